/* region_int.h — what the region emitters of the CUDA backend share
 * (internal): region_cuda.c (the dispatch, the row regions and the launch
 * helpers) and region_tmpl_cuda.c (the GEMM, conv and attention templates).
 * Needs: region_cuda.h, the kernel layer's readings (kernel/kernel.h).
 * Gives: named_arg, cr_gen_fn, the cr_* helpers and the template printers. */
#ifndef HARP_REGION_INT_H
#define HARP_REGION_INT_H

#include "backend/cuda/region_cuda.h"
#include "kernel/kernel.h"

/* A kernel's arguments by parameter name (a tensor map: the tensor it maps). */
typedef struct named_arg {
  const char *name;
  cuda_arg arg;
} named_arg;

/* A generator of the CUDA backend (spec: its own spec type). */
typedef harp_status (*cr_gen_fn)(harp_error *, cuda_module *, const void *, const char *);

/* Kernel name k<r>_<what>, in c's arena. */
const char *cr_kname(cuda_rctx *c, int r, const char *what);
/* fmt has one %s (a reason); the result lives in the context's arena. */
const char *cr_fmt_note(cuda_rctx *c, const char *fmt, const char *a);
/* Run generator fn on spec; on a refusal drop what it added to the module
 * and say why (*why). */
harp_status cr_try_gen(cuda_rctx *c, cr_gen_fn fn, const void *spec, const char *name, const char **why);
/* cuda_gen_ewise as a cr_gen_fn. */
harp_status cr_gen_ew(harp_error *e, cuda_module *m, const void *s, const char *n);
/* Add the launch of the kernel just generated (arguments na[0..n) by name),
 * or drop it and the kernels from n0 on when its arguments break an
 * alignment (*ok false, *why). */
harp_status cr_launch_last(cuda_rctx *c, int r, int n0, const named_arg *na, int n, bool *ok, const char **why);
/* Launch of kernel k (already in the module) with arguments by name; false
 * (and no launch) when an argument breaks its parameter's alignment. */
harp_status cr_add_launch(cuda_rctx *c, int r, const cuda_kernel *k, const named_arg *na, int n, bool *ok);

/* The template printers of region_tmpl_cuda.c: region r's GEMM, conv or
 * attention as its template's kernels and launches (*done), or *why the
 * template refused. */
harp_status cr_print_gemm(cuda_rctx *c, int r, const ct_gemm *read, bool *done, const char **why);
harp_status cr_print_conv(cuda_rctx *c, int r, const ct_conv *read, bool *done, const char **why);
harp_status cr_print_attn(cuda_rctx *c, int r, const ct_attn *read, bool *done, const char **why);

#endif
