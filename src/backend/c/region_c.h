/* region_c.h — C code for one region (internal API of the CPU backend). */
#ifndef HARP_REGION_C_H
#define HARP_REGION_C_H

#include "harp/function.h"
#include "harp/poly.h"
#include "util/util.h"

struct hp_plan_choice;

/* What the region emitter needs about the model. */
typedef struct rc_ctx {
  hp_error *e;
  const tiny_graph *g;
  const poly_view *pv;
  const hp_function *f;
  const tiny_symtab *syms;
  hp_arena *arena;  /* scratch for the loop trees */
  int local_budget; /* bytes of stack a region may use for intermediates */
  bool host_only;   /* JIT: code for this machine's ISA only (compiles faster); else every
                       variant with run-time CPUID dispatch (standalone packages) */
  struct hp_plan_choice *plans; /* per region of the partition (harp/tune.h), or NULL: the
                                   templates' built-in tuning; the template emitters set
                                   `applied` and `note` */
} rc_ctx;

/* Append
 *   static int <fn>(void *const *bufs, long hp_lo, long hp_hi)
 * computing region `r` of the Function, where bufs[i] is the data of
 * buffer i of the kernel's reads then writes (fn_kernel order), and
 * [hp_lo, hp_hi) is the range of the outermost shared loop this call runs
 * (the whole range when *chunk_len is 0).  *chunk_len receives the length of
 * that loop (0: not splittable).  Returns the C code's needs in *uses_pool. */
hp_status rc_emit_region(rc_ctx *c, int r, const char *fn, hp_str *out, long *chunk_len);

/* The helper definitions the emitted regions use (types, conversions,
 * hp_floord/hp_min/hp_max); emit once per translation unit. */
void rc_emit_prelude(hp_str *out);

#endif
