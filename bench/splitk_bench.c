/* splitk_bench.c — CPU split-K (the Plan's splitk_reduce, cgen_skinny.c) on
 * skinny GEMMs C[M][N] = A[M][K] B[K][N]: harp unsplit, harp split 2 and 4
 * ways, OpenBLAS cblas_sgemm and oneDNN dnnl_sgemm, in one process.
 *   splitk_bench [M,N,K[,t] ...]  default: M 1 4 8, N 64 256 1024, K 4096 16384,
 *                                 then 4,4096,4096,t (bench/models/linear_t.harp)
 *   ,t: B stored [N][K] (x W^T, PyTorch's Linear): the kernel's dot-product form
 * Interleaved: every repeat runs each contender once; the median of
 * BENCH_REPS (21) repeats; HARP_THREADS (2) threads for every contender.
 * Needs: common.h, libharp (cgen), OpenBLAS, oneDNN.  Gives: a table of
 * microseconds and the ratios split/unsplit and best harp vs the best peer. */
#include <cblas.h>
#include <oneapi/dnnl/dnnl.h>

#include "common.h"

typedef int (*gemm_fn)(hprt_pool *, const void *, const void *, void *, const void *const *);

enum { NC = 5 }; /* harp S=1, S=2, S=4, OpenBLAS, oneDNN */

static gemm_fn build(long M, long N, long K, int bt, int splitk, void **h) {
  cgen_gemm_spec s;
  cgen_gemm_spec_init(&s, M, N, K, TINY_FP32);
  if (bt) s.b_sk = 1, s.b_sn = K;
  s.tune.threads = bn_env_int("HARP_THREADS", 2);
  s.tune.splitk = splitk;
  ut_str src;
  ut_str_init(&src);
  harp_error e;
  memset(&e, 0, sizeof e);
  if (cgen_gemm(&e, &s, "bench_sk", &src)) {
    fprintf(stderr, "cgen_gemm %ldx%ldx%ld splitk %d: %s\n", M, N, K, splitk, e.msg);
    exit(1);
  }
  *h = bn_build(src.buf);
  ut_str_free(&src);
  return (gemm_fn)bn_sym(*h, "bench_sk");
}

/* One shape: every contender once per repeat; medians in t_us. */
static void run_shape(long M, long N, long K, int bt, int reps, int nthreads, double *t_us) {
  float *A = malloc(4 * M * K), *B = malloc(4 * K * N), *C = malloc(4 * M * N);
  bn_fill(A, M * K, 1), bn_fill(B, K * N, 2);
  void *h[3];
  gemm_fn g[3] = {build(M, N, K, bt, 0, &h[0]), build(M, N, K, bt, 2, &h[1]), build(M, N, K, bt, 4, &h[2])};
  hprt_pool *(*pool_create)(int) = (hprt_pool * (*)(int)) bn_sym(h[0], "hprt_pool_create");
  void (*pool_destroy)(hprt_pool *) = (void (*)(hprt_pool *))bn_sym(h[0], "hprt_pool_destroy");
  hprt_pool *pool = pool_create(nthreads);
  double t[NC][128];
  for (int r = -2; r < reps; r++) {
    double d[NC], t0;
    for (int c = 0; c < 3; c++) {
      t0 = bn_now();
      g[c](pool, A, B, C, NULL);
      d[c] = bn_now() - t0;
    }
    t0 = bn_now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, bt ? CblasTrans : CblasNoTrans, M, N, K, 1.0f, A, K, B, bt ? K : N, 0.0f, C,
                N);
    d[3] = bn_now() - t0;
    t0 = bn_now();
    dnnl_sgemm('N', bt ? 'T' : 'N', M, N, K, 1.0f, A, K, B, bt ? K : N, 0.0f, C, N);
    d[4] = bn_now() - t0;
    if (r >= 0)
      for (int c = 0; c < NC; c++) t[c][r] = d[c];
  }
  for (int c = 0; c < NC; c++) t_us[c] = bn_median(t[c], reps) * 1e6;
  pool_destroy(pool);
  for (int c = 0; c < 3; c++) dlclose(h[c]);
  free(A), free(B), free(C);
}

int main(int argc, char **argv) {
  bn_quiet_peers(argv); /* each contender starts on idle cores */
  long shapes[64][4] = {{0}};
  int ns = 0;
  for (int i = 1; i < argc && ns < 64; i++) {
    char t = 0;
    if (sscanf(argv[i], "%ld,%ld,%ld,%c", &shapes[ns][0], &shapes[ns][1], &shapes[ns][2], &t) >= 3)
      shapes[ns++][3] = t == 't';
  }
  if (!ns) {
    static const long Ms[] = {1, 4, 8}, Ns[] = {64, 256, 1024}, Ks[] = {4096, 16384};
    for (int a = 0; a < 3; a++)
      for (int b = 0; b < 3; b++)
        for (int c = 0; c < 2; c++) shapes[ns][0] = Ms[a], shapes[ns][1] = Ns[b], shapes[ns++][2] = Ks[c];
    shapes[ns][0] = 4, shapes[ns][1] = 4096, shapes[ns][2] = 4096, shapes[ns++][3] = 1;
  }
  int reps = bn_env_int("BENCH_REPS", 21), nthreads = bn_env_int("HARP_THREADS", 2);
  if (reps > 128) reps = 128;
  if (reps < 1) reps = 1;
  openblas_set_num_threads(nthreads);
  printf("split-K, %d threads, median of %d interleaved repeats, microseconds\n", nthreads, reps);
  printf("%4s %6s %7s %9s %9s %9s %9s %9s %8s %8s %10s\n", "M", "N", "K", "harp", "split2", "split4", "openblas",
         "onednn", "s2/harp", "s4/harp", "best/peer");
  /* N,t: B stored [N][K] */
  for (int i = 0; i < ns; i++) {
    double t[NC];
    run_shape(shapes[i][0], shapes[i][1], shapes[i][2], (int)shapes[i][3], reps, nthreads, t);
    double hb = t[0] < t[1] ? (t[0] < t[2] ? t[0] : t[2]) : (t[1] < t[2] ? t[1] : t[2]);
    double pb = t[3] < t[4] ? t[3] : t[4];
    /* ratios are speedups: > 1 means the first is faster */
    printf("%4ld %6ld %5ld%s %9.1f %9.1f %9.1f %9.1f %9.1f %8.2f %8.2f %10.2f\n", shapes[i][0], shapes[i][1], shapes[i][2],
           shapes[i][3] ? ",t" : "  ", t[0], t[1], t[2], t[3], t[4], t[0] / t[1], t[0] / t[2], pb / hb);
    fflush(stdout);
  }
  return 0;
}
