/* cuda_simrun.h — run one GEMM or convolution kernel of a module on the SIMT
 * simulator with random inputs and compare it with the naive reference
 * (cuda_ref.h): the runners test_cuda_sim.c and test_cuda_sim_fp32.c share. */
#ifndef HARP_CUDA_SIMRUN_H
#define HARP_CUDA_SIMRUN_H

#include "cuda_ref.h"

static inline int64_t cu_gemm_numel(int64_t sb0, int64_t sb1, int64_t n0, int64_t n1, int64_t last) {
  return (n0 - 1) * sb0 + (n1 - 1) * sb1 + last + 1;
}

/* Run GEMM kernel `name` of spec s (random inputs from seed) and compare C
 * with the reference within rtol = atol = tol; returns the mismatches.  C
 * starts as NaN (every element must be written) unless split-K accumulates
 * into it (zero). */
static inline int64_t cu_run_gemm(cu_sim *sim, const cuda_module *m, const cuda_gemm_spec *s, const char *name, uint64_t seed,
                                  double tol, unsigned long long stats[7]) {
  cu_rng r = {seed};
  int64_t na = cu_gemm_numel(s->a_sb[0], s->a_sb[1], s->batch[0], s->batch[1], (s->M - 1) * s->a_sm + (s->K - 1) * s->a_sk);
  int64_t nb = cu_gemm_numel(s->b_sb[0], s->b_sb[1], s->batch[0], s->batch[1], (s->K - 1) * s->b_sk + (s->N - 1) * s->b_sn);
  int64_t nc = cu_gemm_numel(s->c_sb[0], s->c_sb[1], s->batch[0], s->batch[1], (s->M - 1) * s->c_sm + (s->N - 1) * s->c_sn);
  cu_buf A = cu_random(s->a_dtype, na, &r, 1), B = cu_random(s->b_dtype, nb, &r, 1), C = cu_buf_new(s->c_dtype, nc);
  if (s->tune.splitk <= 1) memset(C.p, 0xFF, C.bytes);
  cu_buf eb[CUDA_MAX_EPI];
  cu_buf *ebp[CUDA_MAX_EPI] = {0};
  cu_buf *args[5 + CUDA_MAX_EPI] = {&A, &B, &C};
  for (int k = 0; k < s->n_epi; k++) {
    const cuda_epi *ep = &s->epi[k];
    int64_t n = ep->kind == CUDA_EPI_BIAS_M ? s->M : ep->kind == CUDA_EPI_BIAS_N ? s->N : ep->kind == CUDA_EPI_RESIDUAL ? nc : 0;
    if (!n) continue;
    eb[k] = cu_random(ep->dtype, n, &r, 1);
    ebp[k] = args[3 + k] = &eb[k];
  }
  const cuda_kernel *k = cuda_module_find(m, name);
  assert_non_null(k);
  /* split-K serial: the running sums and a flag per output tile (zeroed) after ep.. */
  bool serial = s->tune.splitk > 1 && s->tune.splitk_kind == CUDA_SPLITK_SERIAL;
  cu_buf ws = {0}, flags = {0};
  if (serial) {
    ws = cu_buf_new(TINY_FP32, s->batch[0] * s->batch[1] * s->M * s->N);
    flags = cu_buf_new(TINY_I32, k->grid[0] * k->grid[1] * k->grid[2]);
    args[3 + s->n_epi] = &ws, args[4 + s->n_epi] = &flags;
  }
  assert_int_equal(cu_sim_run(sim, k, args, stats, 1 + seed), 0);
  if (serial) cu_buf_free(&ws), cu_buf_free(&flags);
  float *want = calloc((size_t)nc, sizeof(float));
  ref_gemm(s, &A, &B, ebp, want);
  int64_t bad = cu_compare(name, &C, want, nc, tol);
  free(want);
  cu_buf_free(&A);
  cu_buf_free(&B);
  cu_buf_free(&C);
  for (int q = 0; q < s->n_epi; q++)
    if (ebp[q]) cu_buf_free(ebp[q]);
  return bad;
}

/* Run conv kernel `name` of spec s; as cu_run_gemm. */
static inline int64_t cu_run_conv(cu_sim *sim, const cuda_module *m, const cuda_conv_spec *s, const char *name, uint64_t seed,
                                  double tol, unsigned long long stats[7]) {
  cu_rng r = {seed};
  int64_t oh, ow;
  assert_true(cuda_conv_out_hw(s, &oh, &ow));
  int64_t nx = s->n * s->c * s->h * s->w, nw = s->oc * (s->c / s->groups) * s->kh * s->kw, ny = s->n * s->oc * oh * ow;
  cu_buf x = cu_random(s->x_dtype, nx, &r, 1), w = cu_random(s->w_dtype, nw, &r, 1), y = cu_buf_new(s->y_dtype, ny);
  memset(y.p, 0xFF, y.bytes);
  cu_buf eb[CUDA_MAX_EPI];
  cu_buf *ebp[CUDA_MAX_EPI] = {0};
  cu_buf *args[3 + CUDA_MAX_EPI] = {&w, &x, &y};
  for (int k = 0; k < s->n_epi; k++) {
    int64_t n = s->epi[k].kind == CUDA_EPI_BIAS_M ? s->oc : s->epi[k].kind == CUDA_EPI_RESIDUAL ? ny : 0;
    if (!n) continue;
    eb[k] = cu_random(s->epi[k].dtype, n, &r, 1);
    ebp[k] = args[3 + k] = &eb[k];
  }
  assert_int_equal(cu_sim_run(sim, cuda_module_find(m, name), args, stats, seed), 0);
  float *want = calloc((size_t)ny, sizeof(float));
  ref_conv(s, &x, &w, ebp, want);
  int64_t bad = cu_compare(name, &y, want, ny, tol);
  free(want);
  cu_buf_free(&x);
  cu_buf_free(&w);
  cu_buf_free(&y);
  for (int k = 0; k < s->n_epi; k++)
    if (ebp[k]) cu_buf_free(ebp[k]);
  return bad;
}

#endif
