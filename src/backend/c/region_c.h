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
  bool gpu;         /* false: the CPU's statement text (the nest's flag, rc_nest_ctx, is
                       set by the CUDA backend) */
  bool *packed_only; /* per kernel, or NULL: the template set packed slots (rc_emit_region) and
                        reads them only packed (no epilogue, no other operand on it), so
                        model_init need not keep the weight as stored */
  const struct rt_knobs *knobs; /* the A/B switches (harp/knobs.h); NULL: the defaults */
  bool bf16;        /* harp_options.precision "bf16": GEMMs and convs multiply in bf16
                       (cgen_tuning.bf16) */
  bool bf16_native; /* bf16-storage GEMMs and convs may use vdpbf16ps (the host has it, or
                       the code dispatches on it: cgen_tuning.bf16_native) */
  /* A ShapeSet object (rc_syms.c): these shape symbols are read at run time
   * from hp_sym_[i] (model_run_syms); the templates that can print their
   * sizes as expressions of them do.  ngen_syms == 0: every size a constant. */
  const char *const *gen_syms;
  const int64_t *gen_hi; /* each symbol's value in this compile (model_run's default) */
  int ngen_syms;
  /* int8 activations held as bytes between int8 kernels (q8_hold.c), or
   * NULL: each int8 kernel converts its input and output */
  struct cc_q8_plan *q8;
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
 * buffer i of the kernel's reads then writes (fn_kernel order), on the
 * kernel the kernel layer chooses (kernel_c.c).  A generic loop nest is
 * <fn>_body(bufs, hp_lo, hp_hi) over [hp_lo, hp_hi) of its outermost shared
 * loop, which <fn> splits over the pool; *chunk_len receives that loop's
 * length (0: not splittable).  *pk: the weights the kernel takes packed
 * once (a template kernel; pk->n = 0: none). */
harp_status rc_emit_region(rc_ctx *c, int r, const char *fn, ut_str *out, long *chunk_len, rc_packed *pk);

/* The generic loop nest of region r (region_c.c), why (or NULL) the
 * templates declined it in a comment first; a GATHER region's loop. */
harp_status rc_emit_loops(rc_ctx *c, int r, const char *fn, const char *why, ut_str *out, long *chunk_len);
harp_status rc_emit_gather(rc_ctx *c, int r, const char *fn, ut_str *out, long *chunk_len);

/* The helper definitions the emitted regions use (types, conversions,
 * hp_floord/hp_min/hp_max); emit once per translation unit. */
void rc_emit_prelude(ut_str *out);

/* rc_syms.c: the product of dims [d0, d1) of shape s as a C expression of
 * the ShapeSet's symbols into buf, when at least one of them is a symbol of
 * c->gen_syms and the product of their values is `want` (the size the
 * kernel reader computed); else false (print the constant). */
/* now[i]: the value of symbol c->gen_syms[i] in c's graph (-1: no dim has it). */
void rc_sym_now(const rc_ctx *c, int64_t *now);
/* A generic loop nest's body's hp_sv<i> locals, from its hp_sv argument. */
void rc_emit_sv_locals(const rc_ctx *c, ut_str *out);
/* A ShapeSet object's entry fn of a generic loop nest fn_body: the body
 * over [0, len) (C text), split over the pool when chunks and len times
 * per (each index's work) reaches 32768; the symbols passed as hp_sv. */
void rc_emit_sv_entry(const rc_ctx *c, const char *fn, const char *len, bool chunks, double per, ut_str *out);
/* A ShapeSet object's window over tensor node x (region r) whose height /
 * width is read at run time (rt[0], rt[1]): its bottom / right padding
 * pad[2 + q] raised to the model's own (the PAD the read passes) where the
 * reader kept only what this binding reads (less by under a stride: an
 * even width at stride 2 never reads the last pad column, an odd one does,
 * so the corners' pads would hold for their parity alone). */
void rc_window_pads(const rc_ctx *c, int r, int x, const int64_t *stride, const bool *rt, int64_t *pad);
bool rc_size_expr(const rc_ctx *c, const tiny_shape *s, int d0, int d1, int64_t want, char *buf, size_t cap);
/* Size z (a sum of sizes, the kernel layer's ct_size) as a C expression
 * of the ShapeSet's symbols into buf (160 bytes), a symbol the box does
 * not vary as its value; false when none varies (the constant stands). */
struct ct_size;
bool rc_sum_expr(const rc_ctx *c, const struct ct_size *z, char *buf);
/* The product of s's dims [d0, d1) at the ShapeSet's upper corner (each
 * ShapeSet symbol at its hi, the other dims as they are): the size a
 * run-time expression from rc_size_expr is sized and tiled for. */
int64_t rc_size_hi(const rc_ctx *c, const tiny_shape *s, int d0, int d1);
/* The element stride `stride` of a dense tensor of shape s as an expression
 * of the ShapeSet's symbols into buf (cap bytes): the product of the fewest
 * innermost dims that gives it, when they hold a symbol.  False: none does,
 * or none moves with a symbol (the constant stands). */
bool rc_stride_expr(const rc_ctx *c, const tiny_shape *s, int64_t stride, char *buf, size_t cap);
/* Axis d of shape s (its size `want` here) read at run time: its expression
 * into buf (cap bytes) and *hi its largest value in the box; false (*hi
 * untouched) when no symbol moves it. */
bool rc_axis_expr(const rc_ctx *c, const tiny_shape *s, int d, int64_t want, char *buf, size_t cap, int64_t *hi);
/* The tensor behind bufs[slot] of region r's kernel, or NULL. */
const tiny_shape *rc_slot_shape(const rc_ctx *c, int r, int slot);
/* The symbols' run-time values (hp_sym_, after the prelude), and
 * P_run_syms and P_run_kernel_syms (after P_run); nothing when
 * c->ngen_syms is 0. */
void rc_emit_sym_block(const rc_ctx *c, ut_str *out);
void rc_emit_run_syms(const rc_ctx *c, const char *P, ut_str *out);
/* A ShapeSet object's arena laid out and sized per binding (rc_layout.c):
 * P_layout_, P_grow_ (P_run_kernel lays the arena out for the binding and
 * grows it to its bytes before it runs) and P_required_memory_syms(syms);
 * nothing when c->ngen_syms is 0. */
void rc_emit_arena_at(const rc_ctx *c, const char *P, ut_str *out);
/* The fields of P_t that layout keeps (nothing when c->ngen_syms is 0). */
void rc_emit_layout_fields(const rc_ctx *c, ut_str *out);
/* The pointer to temporary buffer b in P_run: its offset in the arena, a
 * constant, or in a ShapeSet object the binding's (m->off[b]). */
void rc_temp_ptr(const rc_ctx *c, int b, ut_str *o);

#endif
