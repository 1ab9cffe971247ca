/* gemm_bench.c — harp's generated GEMM against OpenBLAS and oneDNN, same run.
 *   gemm_bench fp32 [N...]   fp32 GEMM N^3: harp, OpenBLAS cblas_sgemm, oneDNN dnnl_sgemm
 *   gemm_bench fp16 [N...]   fp16-storage harp (fp32 accumulate) vs fp32 harp and OpenBLAS
 *   gemm_bench bf16 [N...]   same with bf16 storage
 *   gemm_bench epi  [N...]   C = relu(A B + bias): fused epilogue vs GEMM then a bias+relu pass
 * Interleaved: every repeat runs each contender once; median of BENCH_REPS (15).
 * Tuning overrides: HARP_MR HARP_NR HARP_KC HARP_NC HARP_PF HARP_TASKS HARP_THREADS (2). */
#include <cblas.h>
#include <oneapi/dnnl/dnnl.h>

#include "common.h"

typedef int (*gemm_fn)(hprt_pool *, const void *, const void *, void *, const void *const *);

static void tune_from_env(cgen_tuning *t) {
  t->mr = bn_env_int("HARP_MR", 0);
  t->nr = bn_env_int("HARP_NR", 0);
  t->kc = bn_env_int("HARP_KC", 0);
  t->nc = bn_env_int("HARP_NC", 0);
  t->prefetch = bn_env_int("HARP_PF", 0);
  t->tasks = bn_env_int("HARP_TASKS", 0);
  t->threads = bn_env_int("HARP_THREADS", 2);
}

static gemm_fn build_gemm(long n, tiny_dtype dt, int epi, void **h) {
  cgen_gemm_spec s;
  cgen_gemm_spec_init(&s, n, n, n, dt);
  tune_from_env(&s.tune);
  if (epi) {
    s.n_epi = 2;
    s.epi[0].kind = CGEN_EPI_BIAS_N;
    s.epi[0].dtype = TINY_FP32;
    s.epi[1].kind = CGEN_EPI_RELU;
  }
  ut_str src;
  ut_str_init(&src);
  harp_error e;
  memset(&e, 0, sizeof e);
  if (cgen_gemm(&e, &s, "bench_gemm", &src)) {
    fprintf(stderr, "cgen_gemm: %s\n", e.msg);
    exit(1);
  }
  *h = bn_build(src.buf);
  ut_str_free(&src);
  return (gemm_fn)bn_sym(*h, "bench_gemm");
}

static void to_half(const float *x, uint16_t *y, long n, int bf) {
  for (long i = 0; i < n; i++) y[i] = bf ? ut_f32_to_bf16(x[i]) : ut_f32_to_f16(x[i]);
}

int main(int argc, char **argv) {
  bn_quiet_peers(argv); /* each contender starts on idle cores */
  const char *mode = argc > 1 ? argv[1] : "fp32";
  long sizes[16] = {256, 512, 1024, 2048};
  int ns = 4;
  if (argc > 2) {
    ns = 0;
    for (int i = 2; i < argc && ns < 16; i++) sizes[ns++] = atol(argv[i]);
  }
  int reps = bn_env_int("BENCH_REPS", 15);
  int nthreads = bn_env_int("HARP_THREADS", 2);
  openblas_set_num_threads(nthreads);
  void *rt = NULL;
  int fp16 = !strcmp(mode, "fp16"), bf16 = !strcmp(mode, "bf16"), epi = !strcmp(mode, "epi");
  printf("mode %s, %d threads, median of max(%d, %d*2048/N) (<= 101) interleaved repeats\n", mode, nthreads, reps, reps);
  if (!strcmp(mode, "fp32"))
    printf("%6s %10s %10s %10s %9s %9s\n", "N", "harp", "openblas", "onednn", "h/oblas", "h/dnnl");
  else if (epi)
    printf("%6s %12s %12s %12s %9s %9s\n", "N", "harp_fused", "harp+pass", "dnnl+pass", "f/unf", "f/dnnl");
  else
    printf("%6s %10s %10s %10s %9s %9s\n", "N", mode, "harp_fp32", "openblas", "h16/h32", "h16/oblas");
  for (int si = 0; si < ns; si++) {
    long n = sizes[si];
    float *A = malloc(4 * n * n), *B = malloc(4 * n * n), *C = malloc(4 * n * n), *bias = malloc(4 * n);
    uint16_t *A16 = malloc(2 * n * n), *B16 = malloc(2 * n * n), *C16 = malloc(2 * n * n);
    bn_fill(A, n * n, 1), bn_fill(B, n * n, 2), bn_fill(bias, n, 3);
    to_half(A, A16, n * n, bf16), to_half(B, B16, n * n, bf16);
    void *h1, *h2 = NULL;
    gemm_fn g = build_gemm(n, fp16 ? TINY_FP16 : bf16 ? TINY_BF16 : TINY_FP32, epi, &h1);
    gemm_fn g32 = (fp16 || bf16 || epi) ? build_gemm(n, TINY_FP32, 0, &h2) : NULL;
    hprt_pool *(*pool_create)(int) = (hprt_pool * (*)(int)) bn_sym(h1, "hprt_pool_create");
    void (*pool_destroy)(hprt_pool *) = (void (*)(hprt_pool *))bn_sym(h1, "hprt_pool_destroy");
    hprt_pool *pool = pool_create(nthreads);
    const void *ep[2] = {bias, NULL};
    /* small problems take microseconds: more repeats keep the median stable */
    int nrep = reps * (int)(2048 / n);
    if (nrep < reps) nrep = reps;
    if (nrep > 101) nrep = 101;
    double t[3][101];
    for (int r = -2; r < nrep; r++) {
      double t0, d[3];
      /* contender 0: harp (the mode's kernel) */
      t0 = bn_now();
      if (fp16 || bf16) g(pool, A16, B16, C16, NULL);
      else g(pool, A, B, C, ep);
      d[0] = bn_now() - t0;
      /* contender 1 */
      t0 = bn_now();
      if (!strcmp(mode, "fp32")) cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, A, n, B, n, 0.0f, C, n);
      else {
        g32(pool, A, B, C, NULL);
        if (epi)
          for (long i = 0; i < n; i++)
            for (long j = 0; j < n; j++) {
              float v = C[i * n + j] + bias[j];
              C[i * n + j] = v > 0 ? v : 0;
            }
      }
      d[1] = bn_now() - t0;
      /* contender 2 */
      t0 = bn_now();
      if (fp16 || bf16) cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, A, n, B, n, 0.0f, C, n);
      else {
        dnnl_sgemm('N', 'N', n, n, n, 1.0f, A, n, B, n, 0.0f, C, n);
        if (epi)
          for (long i = 0; i < n; i++)
            for (long j = 0; j < n; j++) {
              float v = C[i * n + j] + bias[j];
              C[i * n + j] = v > 0 ? v : 0;
            }
      }
      d[2] = bn_now() - t0;
      if (r >= 0)
        for (int c = 0; c < 3; c++) t[c][r] = d[c];
    }
    double fl = 2.0 * n * n * n, gf[3];
    for (int c = 0; c < 3; c++) gf[c] = fl / bn_median(t[c], nrep) / 1e9;
    printf(epi ? "%6ld %12.1f %12.1f %12.1f %9.2f %9.2f\n" : "%6ld %10.1f %10.1f %10.1f %9.2f %9.2f\n", n, gf[0], gf[1],
           gf[2], gf[0] / gf[1], gf[0] / gf[2]);
    fflush(stdout);
    pool_destroy(pool);
    dlclose(h1);
    if (h2) dlclose(h2);
    free(A), free(B), free(C), free(bias), free(A16), free(B16), free(C16);
  }
  (void)rt;
  return 0;
}
