/* nest.h — a region of a Function as a loop nest of C statements, for
 * every target that prints C: the CPU's generic loops
 * (src/backend/c/region_c.c) and the CUDA generic kernel
 * (src/backend/cuda/generic_cuda.c) print the same statements and
 * arithmetic, each around its own loops.
 * Needs: a Function, its Poly-View, isl's loop tree (poly_ast_gen).
 * Gives: rc_nest_* (the nest of a region), rc_ewise_expr / rc_float_const
 * (the op spellings every C kernel shares). */
#ifndef HARP_BACKEND_NEST_H
#define HARP_BACKEND_NEST_H

#include "harp/function.h"
#include "harp/poly_ast.h"
#include "harp/poly.h"
#include "util/util.h"

/* What the statements need of the model. */
typedef struct rc_nest_ctx {
  harp_error *e;
  const tiny_graph *g;
  const poly_view *pv;
  const fn_function *f;
  ut_arena *arena; /* scratch for the loop trees */
  bool gpu;        /* statement text for CUDA C: no GNU statement expressions, no
                      OpenMP pragmas, buffer elements through HP_AT(p, i) */
  bool half_rows;  /* CPU: an innermost loop's fp16/bf16 store goes through a float row,
                      converted by a second loop (GCC vectorizes both; a conversion in
                      a loop of masked reads it leaves scalar) */
  /* A ShapeSet object (nsyms > 0; the CPU's generic loops): a dim whose size
   * is symbol i (tiny_dim.sym, at its value sym_now[i]) is hp_sv<i> in
   * strides and loop bounds (poly_ast_opts.syms), sym_hi[i] in local arrays */
  int nsyms;
  const char *const *syms;
  const int64_t *sym_now, *sym_hi;
} rc_nest_ctx;

/* The symbol of c whose value dim d is, or -1. */
int rc_nest_sym(const rc_nest_ctx *c, const tiny_dim *d);

/* The loop nest of a block-based region for a backend that prints the loops
 * itself (the CUDA backend: src/backend/cuda/generic_cuda.c).  The first
 * `fixed` shared loops are fixed to the C parameters hp_p0, hp_p1, ...
 * (0 <= hp_pi < extent[i]); the tree runs the rest for one such point.
 * Buffers are p<slot> (slot = the kernel's reads, then writes).  With
 * c->nsyms, the sizes that are symbols are the C parameters hp_sv<i>. */
typedef struct rc_nest {
  const poly_ast *tree;
  int fixed;
  int64_t extent[POLY_MAX_VARS];
  int fix_sym[POLY_MAX_VARS]; /* per shared loop: the symbol index + 1 of c whose value
                                 its extent is (the loop runs to hp_sv<i>), else 0 */
  int64_t local_bytes; /* per point: every local */
  int64_t array_bytes; /* per point: the local arrays (lsize > 1) */
  void *priv;
} rc_nest;

/* The nest of kernel r (c->gpu set).  Fails for GATHER regions (no blocks). */
harp_status rc_nest_build(const rc_nest_ctx *c, int r, rc_nest *out);
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

#endif
