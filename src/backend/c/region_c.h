/* region_c.h — C code for one region (internal API of the CPU backend). */
#ifndef HARP_REGION_C_H
#define HARP_REGION_C_H

#include "harp/function.h"
#include "harp/knobs.h"
#include "harp/poly_ast.h"
#include "harp/poly.h"
#include "util/util.h"

struct rt_plan_choice;

/* What the region emitter needs about the model. */
typedef struct rc_ctx {
  harp_error *e;
  const tiny_graph *g;
  const poly_view *pv;
  const fn_function *f;
  const tiny_symtab *syms;
  ut_arena *arena;  /* scratch for the loop trees */
  int local_budget; /* bytes of stack a region may use for intermediates */
  bool host_only;   /* JIT: code for this machine's ISA only (compiles faster); else every
                       variant with run-time CPUID dispatch (standalone packages) */
  struct rt_plan_choice *plans; /* per region of the partition (harp/tune.h), or NULL: the
                                   templates' built-in tuning; the template emitters set
                                   `applied` and `note` */
  bool gpu;         /* statement text for CUDA C (rc_nest_*): no GNU statement expressions, no
                       OpenMP pragmas, buffer elements through HP_AT(p, i) */
  bool *packed_only; /* per kernel, or NULL: the template set packed slots (rc_emit_region) and
                        reads them only packed (no epilogue, no other operand on it), so
                        model_init need not keep the weight as stored */
  const struct rt_knobs *knobs; /* the A/B switches (harp/knobs.h); NULL: the defaults */
} rc_ctx;

/* The weights a template kernel takes packed (contract_c.h): slot[i] of its
 * reads, the packed form i read from bufs[nreads + nwrites + i], made by
 * <fn>_wbytes / <fn>_wpack (i = 0) and <fn>_wbytes<i> / <fn>_wpack<i>.
 * key[i], when not empty, names the packed form: kernels that pack the same
 * buffer under the same key share one packed copy (every step of an RNN
 * reads its recurrent weight packed alike). */
#define RC_MAX_PACKED 2
#define RC_PACK_KEY 128
typedef struct rc_packed {
  int n;
  int slot[RC_MAX_PACKED];
  char key[RC_MAX_PACKED][RC_PACK_KEY];
} rc_packed;

/* Append
 *   static int <fn>(hprt_pool *pool, void *const *bufs)
 * computing region `r` of the Function, where bufs[i] is the data of
 * buffer i of the kernel's reads then writes (fn_kernel order).  A generic
 * loop nest is <fn>_body(bufs, hp_lo, hp_hi) over [hp_lo, hp_hi) of its
 * outermost shared loop, which <fn> splits over the pool; *chunk_len
 * receives that loop's length (0: not splittable).  *pk: the weights the
 * kernel takes packed once (a template kernel; pk->n = 0: none). */
harp_status rc_emit_region(rc_ctx *c, int r, const char *fn, ut_str *out, long *chunk_len, rc_packed *pk);

/* The loop nest of a block-based region for a backend that prints the loops
 * itself (the CUDA backend: src/backend/cuda/generic_cuda.c).  The first
 * `fixed` shared loops are fixed to the C parameters hp_p0, hp_p1, ...
 * (0 <= hp_pi < extent[i]); the tree runs the rest for one such point.
 * Buffers are p<slot> (slot = the kernel's reads, then writes). */
typedef struct rc_nest {
  const poly_ast *tree;
  int fixed;
  int64_t extent[POLY_MAX_VARS];
  int64_t local_bytes; /* per point: every local */
  int64_t array_bytes; /* per point: the local arrays (lsize > 1) */
  void *priv;
} rc_nest;

/* c->gpu must be set.  Fails for GATHER regions (no blocks). */
harp_status rc_nest_build(rc_ctx *c, int r, rc_nest *out);
/* Declarations of the locals, one per line; scratch (C text of an
 * unsigned char * to array_bytes of memory for this point) or NULL: arrays
 * on the stack. */
void rc_nest_locals(rc_nest *n, const char *scratch, ut_str *out);
/* The C statement of one PA_USER node (one line, no newline). */
harp_status rc_nest_stmt(rc_nest *n, const poly_ast *user, ut_str *out);
void rc_nest_free(rc_nest *n);

/* One elementwise node (unary, binary, WHERE or CAST) on the C texts x[]
 * of its sources, in compute representation (float or int32_t): the op
 * spellings every C kernel shares. */
void rc_ewise_expr(ut_str *o, const tiny_graph *g, const tiny_node *n, const char *const *x, bool gpu);
/* A constant of float dtype t as the interpreter rounds it. */
void rc_float_const(ut_str *o, tiny_dtype t, double v);

/* The helper definitions the emitted regions use (types, conversions,
 * hp_floord/hp_min/hp_max); emit once per translation unit. */
void rc_emit_prelude(ut_str *out);

#endif
