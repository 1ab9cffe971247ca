/* cuda_copy_at.c — a strided copy whose sizes are read at run time: in a
 * ShapeSet build, a GEMM's A whose reduced dimensions do not fold (heads
 * merged back, [b][h][s][d] read as [b][s][h*d]) is copied dense into
 * scratch by this kernel, its dims and source strides formulas of the
 * box's symbols (issue 25), so one build serves every binding (the
 * fixed-shape build keeps cuda_gen_ewise's copy).
 * Needs: cuda.h, cuda_int.h (cuda_rtsz_text).  Gives: cuda_gen_copy_at. */
#include <stdio.h>

#include "backend/cuda/cuda.h"
#include "backend/cuda/cuda_int.h"

/* Size or stride z as C text: its formula, or its literal. */
static const char *rtsz_or_lit(cuda_b *b, const cuda_rtsz *z) {
  const char *t = cuda_rtsz_text(b, z);
  return t ? t : cuda_fmt(b, "%lldL", (long long)z->lit);
}

/* The checks of s (rank, dtypes, sizes at hi, symbols); *numel its
 * elements at the box's corner hi. */
static harp_status copy_check(harp_error *e, const cuda_copy_at *s, const char *name, int64_t *numel) {
  if (s->rank < 1 || s->rank > CUDA_MAX_RANK || s->nsyms < 1 || s->nsyms > 8)
    return ut_fail(e, HARP_E_INVALID_ARG, name, "copy: rank %d, %d size parameters", s->rank, s->nsyms);
  bool fp_in = s->in_dtype == TINY_FP32 || s->in_dtype == TINY_FP16 || s->in_dtype == TINY_BF16;
  bool fp_out = s->out_dtype == TINY_FP32 || s->out_dtype == TINY_FP16 || s->out_dtype == TINY_BF16;
  if (!fp_in || !fp_out) return ut_fail(e, HARP_E_UNSUPPORTED, name, "copy: fp32, fp16 or bf16 only");
  *numel = 1;
  for (int d = 0; d < s->rank; d++)
    if (s->hi[d] < 1 || !ut_mul_ok(*numel, s->hi[d], numel) || *numel > ((int64_t)1 << 40))
      return ut_fail(e, HARP_E_LIMIT, name, "copy: axis %d of %lld elements", d, (long long)s->hi[d]);
  return HARP_OK;
}

harp_status cuda_gen_copy_at(harp_error *e, cuda_module *m, const cuda_copy_at *s, const char *name) {
  int64_t numel;
  if (copy_check(e, s, name, &numel)) return e->code;
  cuda_b bb, *b = &bb;
  cuda_kernel *k = cuda_kernel_new(b, m, e, name, "ewise");
  if (!k) return e->code;
  int64_t blocks = (numel + CUDA_COPY_THREADS - 1) / CUDA_COPY_THREADS;
  k->grid[0] = blocks < 65535 * 8 ? blocks : 65535 * 8; /* the grid-stride loop covers the rest */
  k->block[0] = CUDA_COPY_THREADS;
  cuda_param_add(k, "in0", cuda_ctype(s->in_dtype), CUDA_P_PTR_IN, s->in_dtype);
  cuda_param_add(k, "out", cuda_ctype(s->out_dtype), CUDA_P_PTR_OUT, s->out_dtype);
  for (int i = 0; i < s->nsyms; i++) cuda_param_add(k, cuda_fmt(b, "hp_sv%d", i), "long", CUDA_P_LONG, TINY_I32);
  cuda_meta_int(k, "numel", numel);
  cuda_meta_str(k, "numel_at_run_time", "the product of the binding's dims");
  cuda_meta_str(k, "bind", "element -> thread, grid-stride");
  cuda_comment(b, "a strided copy at the binding's sizes (dims and source strides read at run time)");
  const char *n = "1L";
  for (int d = 0; d < s->rank; d++) {
    cuda_decl(b, "const hk_i64", cuda_fmt(b, "hk_d%d", d), NULL, rtsz_or_lit(b, &s->size[d]));
    n = cuda_fmt(b, "%s * hk_d%d", n, d);
  }
  cuda_decl(b, "const hk_i64", "hk_n", NULL, n);
  cuda_open(b, cuda_emit_s(b, CU_LOOP, "hk_i", cuda_fmt(b, "(hk_i64)blockIdx.x * %d + threadIdx.x", CUDA_COPY_THREADS), "hk_i < hk_n",
                           cuda_fmt(b, "(hk_i64)gridDim.x * %d", CUDA_COPY_THREADS)));
  const char *off = "0";
  for (int d = s->rank - 1; d >= 0; d--) { /* the innermost dim first: hk_i's coordinates */
    const char *inner = "1L";
    for (int j = d + 1; j < s->rank; j++) inner = cuda_fmt(b, "%s * hk_d%d", inner, j);
    off = cuda_fmt(b, "%s + (hk_i / (%s)) %% hk_d%d * %s", off, inner, d, rtsz_or_lit(b, &s->src_stride[d]));
  }
  cuda_decl(b, "const float", "hk_x", NULL, cuda_fmt(b, "%s(in0 + (%s))", cuda_ld_fn(s->in_dtype), off));
  int osz = tiny_dtype_size(s->out_dtype);
  const char *v = osz == 2 ? cuda_fmt(b, "%s(hk_x)", cuda_cvt_fn(s->out_dtype)) : "hk_f2u(hk_x)";
  cuda_stmt *st = cuda_emit_s(b, CU_ST_GLOBAL_VEC, "out + hk_i", v, NULL, NULL);
  st->i[0] = osz;
  cuda_close(b);
  return cuda_b_finish(b, k);
}
