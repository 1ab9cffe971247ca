/* wino_kernels.c — the conv kernels of one 3x3 stride-1 layer side by side:
 * the direct kernel (cgen_dconv.c), Winograd F(2x2,3x3) and F(4x4,3x3)
 * (cgen_wino.c) and the implicit GEMM, each with the weight packed once and
 * bias + relu fused, on the VGG-19 and ResNet-50 layer sizes (batch 1).
 *   wino_kernels [--isa avx512|avx2] [layer]   (make -C bench wino; layer: an index into the list)
 * --isa avx2 runs the AVX2 variants (the machine must have AVX2): Winograd
 * against the AVX2 implicit GEMM, the direct kernel being AVX-512 only.
 * One thread, timed in the thread's CPU time (time slices given to other
 * processes on a shared machine do not count), best of the repeats after the
 * first, interleaved; WINO_THREADS=2 runs the pool instead, timed by the
 * wall clock.  The figures calibrate the CPU cost model's Winograd speedup
 * (src/plan/cost.c, cpu_winograd_speedup). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

typedef int (*conv_fn)(hprt_pool *, const void *, const void *, void *, const void *const *);

static int threads;
static double now(void) {
  struct timespec t;
  clock_gettime(threads > 1 ? CLOCK_MONOTONIC : CLOCK_THREAD_CPUTIME_ID, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static const long SH[][3] = {{64, 224, 64},  {128, 112, 128}, {256, 56, 256}, {512, 28, 512}, {512, 14, 512},
                             {64, 56, 64},   {128, 28, 128},  {256, 14, 256}, {512, 7, 512}};
static const int ALGO[] = {CGEN_CONV_DIRECT, CGEN_CONV_WINO2, CGEN_CONV_WINO4, CGEN_CONV_GEMM};
static const char *NAME[] = {"direct", "F(2x2)", "F(4x4)", "gemm"};
static int isa = CGEN_ISA_AVX512;
#define NS ((int)(sizeof SH / sizeof SH[0]))
#define NA 4

static void *sym(void *h, const char *fmt, int i, int a) {
  char nm[64];
  snprintf(nm, sizeof nm, fmt, i, a);
  return dlsym(h, nm);
}

int main(int argc, char **argv) {
  int arg = 1;
  if (argc > 2 && !strcmp(argv[1], "--isa")) {
    if (strcmp(argv[2], "avx2") && strcmp(argv[2], "avx512")) {
      fprintf(stderr, "wino_kernels: --isa avx512 or avx2, not '%s'\n", argv[2]);
      return 2;
    }
    isa = strcmp(argv[2], "avx2") ? CGEN_ISA_AVX512 : CGEN_ISA_AVX2;
    arg = 3;
  }
  int only = argc > arg ? atoi(argv[arg]) : -1;
  int a0 = isa == CGEN_ISA_AVX2; /* AVX2: no direct kernel, the implicit GEMM is the baseline */
  threads = getenv("WINO_THREADS") ? atoi(getenv("WINO_THREADS")) : 1;
  ut_str src;
  ut_str_init(&src);
  harp_error e = {0};
  for (int i = 0; i < NS; i++)
    for (int a = a0; a < NA && (only < 0 || i == only); a++) {
      cgen_conv_spec s;
      cgen_conv_spec_init(&s, 1, SH[i][0], SH[i][1], SH[i][1], SH[i][2], 3, 3, TINY_FP32);
      for (int k = 0; k < 4; k++) s.pad[k] = 1;
      s.prepack_w = true;
      s.tune.conv_algo = ALGO[a];
      s.tune.isa_mask = 1u << isa;
      s.tune.force_isa = isa;
      s.n_epi = 2;
      s.epi[0].kind = CGEN_EPI_BIAS_M, s.epi[0].dtype = TINY_FP32, s.epi[1].kind = CGEN_EPI_RELU;
      char nm[32];
      snprintf(nm, sizeof nm, "k%d_%d", i, a);
      if (cgen_conv(&e, &s, nm, &src)) {
        fprintf(stderr, "cgen_conv %s: %s\n", nm, e.msg);
        return 1;
      }
    }
  void *h = NULL;
  if (cgen_compile_so(&e, src.buf, NULL, &h)) {
    fprintf(stderr, "compile: %.400s\n", e.msg);
    return 1;
  }
  hprt_pool *pool = ((hprt_pool * (*)(int)) dlsym(h, "hprt_pool_create"))(threads > 1 ? threads : 1);
  printf("conv 3x3 pad 1 + bias + relu, batch 1, %s, %s, best of the repeats, ms (GFLOP/s of the direct count)\n",
         isa == CGEN_ISA_AVX2 ? "avx2" : "avx512", threads > 1 ? "the pool, wall clock" : "one thread, CPU time");
  for (int i = 0; i < NS; i++) {
    if (only >= 0 && i != only) continue;
    long C = SH[i][0], H = SH[i][1], OC = SH[i][2];
    float *x = malloc(sizeof(float) * C * H * H), *w = malloc(sizeof(float) * OC * C * 9);
    float *y = malloc(sizeof(float) * OC * H * H), *b = calloc((size_t)OC, sizeof(float));
    for (long j = 0; j < C * H * H; j++) x[j] = (float)(rand() % 2000 - 1000) / 1000.f;
    for (long j = 0; j < OC * C * 9; j++) w[j] = (float)(rand() % 2000 - 1000) / 1000.f;
    void *wp[NA];
    for (int a = a0; a < NA; a++) {
      long by = ((long (*)(void))sym(h, "k%d_%d_pack_a_bytes", i, a))();
      wp[a] = aligned_alloc(64, (size_t)(by + 63) / 64 * 64);
      ((int (*)(hprt_pool *, const void *, void *))sym(h, "k%d_%d_pack_a", i, a))(pool, w, wp[a]);
    }
    const void *ep[] = {b, NULL};
    int reps = H >= 112 ? 5 : 15;
    double best[NA];
    for (int a = 0; a < NA; a++) best[a] = 1e30;
    for (int r = 0; r < reps; r++)
      for (int a = a0; a < NA; a++) {
        conv_fn f = (conv_fn)sym(h, "k%d_%d", i, a);
        double t0 = now();
        f(threads > 1 ? pool : NULL, wp[a], x, y, ep);
        double t = now() - t0;
        if (r > 0 && t < best[a]) best[a] = t;
      }
    double gf = 2.0 * OC * C * 9 * H * H * 1e-9;
    printf("%4ld->%-4ld @%-4ld", C, OC, H);
    for (int a = a0; a < NA; a++) printf("  %s %7.2f (%4.0f)", NAME[a], best[a] * 1e3, gf / best[a]);
    int base = a0 ? NA - 1 : 0;
    printf("   %s / best Winograd %.2f\n", NAME[base], best[base] / (best[1] < best[2] ? best[1] : best[2]));
    fflush(stdout);
    for (int a = a0; a < NA; a++) free(wp[a]);
    free(x), free(w), free(y), free(b);
  }
  return 0;
}
