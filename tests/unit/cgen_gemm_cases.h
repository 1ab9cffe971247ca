/* cgen_gemm_cases.h — the GEMM cases shared by test_cgen_gemm.c and
 * test_cgen_gemm2.c (two executables so ctest can compile them in parallel):
 * the case table, the spec it maps to, a naive reference, and run_range(). */
#ifndef HARP_CGEN_GEMM_CASES_H
#define HARP_CGEN_GEMM_CASES_H
#include "cgen_testutil.h"

#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

typedef int (*gemm_fn)(hprt_pool *, const void *, const void *, void *, const void *const *);

typedef struct gcase {
  long M, N, K, b0, b1;
  tiny_dtype a, b, c;
  int ta, tb, bcast_a, tc; /* A stored [K][M]; B stored [N][K]; A shared over b0; C stored [N][M] */
  int isa;                 /* forced variant; -1 = CPUID */
  int kc, nc, tasks, mr, nr;
  int nepi;
  cgen_epi_kind ek[4];
  tiny_dtype edt;
  int res_t;   /* residual stored transposed ([N][M]) */
  int prepack; /* 1: A packed once by gN_pack_a; 2: B by gN_pack_b (and shared by the batches) */
  int order, mc; /* loop order (tune.order) and its row block */
  int mulm;      /* bit i: tensor step i multiplies (cgen_epi.mul) */
  int splitk;    /* tune.splitk: K slices of the skinny kernel */
} gcase;

#define F32 TINY_FP32
#define F16 TINY_FP16
#define B16 TINY_BF16
enum { SC = CGEN_ISA_SCALAR, A2 = CGEN_ISA_AVX2, A5 = CGEN_ISA_AVX512 };

static const gcase CASES[] = {
    /* sizes and tails, fp32, each ISA */
    {1, 1, 1, 1, 1, F32, F32, F32, 0, 0, 0, 0, A5},
    {7, 17, 63, 1, 1, F32, F32, F32, 0, 0, 0, 0, A5},
    {65, 129, 17, 1, 1, F32, F32, F32, 0, 0, 0, 0, A5},
    {129, 65, 129, 1, 1, F32, F32, F32, 0, 0, 0, 0, A5, 32, 64, 3},
    {63, 7, 65, 1, 1, F32, F32, F32, 0, 0, 0, 0, A2},
    {17, 129, 7, 1, 1, F32, F32, F32, 0, 0, 0, 0, A2, 4, 32, 4},
    {65, 63, 129, 1, 1, F32, F32, F32, 0, 0, 0, 0, SC, 40},
    {1, 65, 17, 1, 1, F32, F32, F32, 0, 0, 0, 0, SC},
    {100, 200, 300, 1, 1, F32, F32, F32, 0, 0, 0, 0, -1},
    /* other micro-tiles */
    {63, 129, 65, 1, 1, F32, F32, F32, 0, 0, 0, 0, A5, 0, 0, 0, 6, 64},
    {63, 129, 65, 1, 1, F32, F32, F32, 0, 0, 0, 0, A5, 16, 48, 2, 8, 48},
    {41, 90, 77, 1, 1, F32, F32, F32, 0, 0, 0, 0, A5, 0, 0, 0, 5, 80},
    /* transposes, batches, broadcast A, strided C */
    {17, 63, 65, 1, 1, F32, F32, F32, 1, 0, 0, 0, A5},
    {17, 63, 65, 1, 1, F32, F32, F32, 0, 1, 0, 0, A5},
    {33, 31, 29, 2, 3, F32, F32, F32, 1, 1, 0, 0, A2},
    {33, 40, 29, 3, 2, F32, F32, F32, 0, 0, 1, 0, A5},
    {33, 40, 29, 3, 2, F32, F32, F32, 0, 0, 1, 0, SC},
    {33, 40, 70, 2, 1, F32, F32, F32, 0, 0, 0, 1, A5, 32},
    {33, 40, 29, 1, 1, F32, F32, F32, 0, 0, 0, 1, A2},
    /* half storage */
    {65, 63, 129, 1, 1, F16, F16, F16, 0, 0, 0, 0, A5, 48},
    {65, 63, 129, 1, 1, F16, F16, F16, 0, 0, 0, 0, A2},
    {17, 33, 65, 1, 1, F16, F16, F16, 0, 0, 0, 0, SC},
    {65, 63, 129, 1, 1, B16, B16, B16, 0, 0, 0, 0, A5, 48},
    {65, 63, 129, 1, 1, B16, B16, B16, 0, 0, 0, 0, A2},
    {17, 33, 65, 1, 1, B16, B16, B16, 0, 0, 0, 0, SC},
    {29, 47, 65, 2, 1, F16, B16, F32, 1, 1, 0, 0, A5},
    {29, 47, 65, 1, 1, F32, F16, B16, 0, 0, 0, 1, A5, 16},
    /* epilogues */
    {63, 129, 65, 1, 1, F32, F32, F32, 0, 0, 0, 0, A5, 0, 0, 0, 0, 0, 2, {CGEN_EPI_BIAS_N, CGEN_EPI_RELU}, F32},
    {63, 129, 65, 1, 1, F32, F32, F32, 0, 0, 0, 0, A2, 32, 0, 0, 0, 0, 2, {CGEN_EPI_BIAS_M, CGEN_EPI_GELU}, F16},
    {63, 129, 65, 1, 1, F32, F32, F32, 0, 0, 0, 0, SC, 0, 0, 0, 0, 0, 2, {CGEN_EPI_BIAS_N, CGEN_EPI_GELU}, B16},
    {63, 65, 65, 1, 1, F32, F32, F32, 0, 0, 0, 0, A5, 16, 0, 0, 0, 0, 3, {CGEN_EPI_SCALE, CGEN_EPI_SILU, CGEN_EPI_RESIDUAL}, F32},
    {63, 65, 65, 2, 1, F16, F16, F16, 0, 0, 0, 0, A5, 16, 0, 0, 0, 0, 3, {CGEN_EPI_BIAS_M, CGEN_EPI_SIGMOID, CGEN_EPI_RESIDUAL}, F16, 1},
    {63, 65, 65, 1, 1, F32, F32, F32, 0, 0, 0, 0, A2, 0, 0, 0, 0, 0, 3, {CGEN_EPI_RESIDUAL, CGEN_EPI_SILU, CGEN_EPI_SCALE}, B16, 1},
    {17, 20, 9, 1, 1, F32, F32, B16, 0, 0, 0, 1, SC, 0, 0, 0, 0, 0, 4, {CGEN_EPI_BIAS_N, CGEN_EPI_SIGMOID, CGEN_EPI_RESIDUAL, CGEN_EPI_RELU}, F16},
    {17, 20, 9, 1, 1, F32, F32, F32, 0, 0, 0, 0, A2, 0, 0, 0, 0, 0, 2, {CGEN_EPI_GELU, CGEN_EPI_SIGMOID}, F32},
    /* prepacked (constant) A, batched with A shared over b0 */
    {65, 70, 129, 2, 3, F32, F32, F32, 0, 0, 1, 0, A5, 64, 0, 0, 0, 0, 1, {CGEN_EPI_RELU}, F32, 0, 1},
    {33, 17, 40, 1, 1, F16, F32, F32, 1, 0, 0, 0, -1, 16, 0, 0, 0, 0, 0, {0}, F32, 0, 1},
    /* the other loop orders, multi-pass K, direct and buffered C */
    {65, 129, 70, 1, 1, F32, F32, F32, 0, 0, 0, 0, A5, 16, 64, 0, 0, 0, 1, {CGEN_EPI_BIAS_N}, F32, 0, 0, 1, 18},
    {65, 129, 70, 1, 1, F32, F32, F16, 0, 0, 0, 0, A5, 16, 64, 0, 0, 0, 1, {CGEN_EPI_BIAS_M}, F32, 0, 0, 2, 18},
    {40, 50, 33, 1, 1, F32, F32, F32, 0, 0, 0, 1, A2, 8, 0, 0, 0, 0, 0, {0}, F32, 0, 0, 2, 12},
    /* a rounding to a half type in the middle of the chain, each ISA */
    {33, 70, 29, 1, 1, F32, F32, F16, 0, 0, 0, 0, A5, 0, 0, 0, 0, 0, 2, {CGEN_EPI_ROUND, CGEN_EPI_RELU}, F16},
    {33, 70, 29, 1, 1, F32, F32, B16, 0, 0, 0, 0, A2, 0, 0, 0, 0, 0, 2, {CGEN_EPI_ROUND, CGEN_EPI_RELU}, B16},
    {17, 20, 9, 1, 1, F32, F32, F16, 0, 0, 0, 0, SC, 0, 0, 0, 0, 0, 2, {CGEN_EPI_ROUND, CGEN_EPI_RELU}, F16},
    {33, 70, 29, 1, 1, F32, F32, F32, 0, 0, 0, 0, A5, 0, 0, 0, 0, 0, 2, {CGEN_EPI_ROUND, CGEN_EPI_BIAS_N}, B16},
    /* B^T with whole 64-column panels: packed through 16x16 transposes, k tails */
    {33, 150, 70, 1, 1, F32, F32, F32, 0, 1, 0, 0, A5},
    {20, 128, 40, 2, 1, F32, F16, F32, 0, 1, 0, 0, A5, 32},
    /* split-K (tune.splitk, cgen_skinny.c): whole-vector K slices summed in slice
     * order; B along N and B^T, batches, K and N tails, half storage, epilogues */
    {1, 64, 2050, 1, 1, F32, F32, F32, 0, 0, 0, 0, A5, 0, 0, 0, 0, 0, 0, {0}, F32, 0, 0, 0, 0, 0, 2},
    {4, 72, 1000, 2, 1, F32, F16, F32, 0, 1, 0, 0, A5, 0, 0, 0, 0, 0, 2, {CGEN_EPI_BIAS_N, CGEN_EPI_RELU}, F32, 0, 0, 0, 0, 0, 3},
    {3, 37, 333, 1, 1, F32, F32, F16, 0, 0, 0, 0, A2, 0, 0, 0, 0, 0, 1, {CGEN_EPI_RESIDUAL}, F16, 0, 0, 0, 0, 0, 4},
    {8, 20, 600, 1, 2, F16, F16, F32, 0, 1, 0, 0, A2, 0, 0, 0, 0, 0, 0, {0}, F32, 0, 0, 0, 0, 0, 5},
    {2, 130, 17, 1, 1, F32, F32, F32, 0, 0, 0, 0, -1, 0, 0, 0, 0, 0, 0, {0}, F32, 0, 0, 0, 0, 0, 8},
    /* skinny (M <= 8): B streamed, not packed. Unit stride along N: strips of
     * columns, K in fours with a tail; along K (B^T): dot products, K and N tails */
    {1, 1000, 70, 1, 1, F32, F32, F32, 0, 0, 0, 0, A5},
    {3, 37, 33, 1, 1, F32, F32, F32, 0, 1, 0, 0, A5},
    {4, 130, 9, 2, 3, F16, F16, F16, 0, 0, 1, 0, A5},
    {2, 300, 200, 1, 1, F32, B16, F32, 1, 1, 0, 0, A2},
    {1, 2050, 64, 1, 1, F32, F32, F32, 0, 0, 0, 0, A2},
    {2, 129, 65, 1, 1, F32, F32, F32, 0, 0, 0, 0, A5, 0, 0, 0, 0, 0, 4, {CGEN_EPI_BIAS_N, CGEN_EPI_RESIDUAL, CGEN_EPI_RELU, CGEN_EPI_ROUND}, F16},
    {4, 65, 40, 1, 1, F32, F32, F16, 0, 1, 0, 0, A5, 0, 0, 0, 0, 0, 3, {CGEN_EPI_BIAS_M, CGEN_EPI_GELU, CGEN_EPI_RESIDUAL}, B16, 1},
    {1, 70, 5, 3, 1, F32, F32, F32, 0, 1, 0, 0, -1},
    {2, 48, 3, 1, 1, B16, F32, F32, 0, 0, 0, 0, A5, 0, 0, 7},
    {8, 90, 50, 1, 1, F32, F16, F32, 0, 1, 0, 0, A5, 0, 0, 0, 0, 0, 1, {CGEN_EPI_BIAS_M}, F32},
    {8, 77, 21, 1, 1, F32, F32, F32, 0, 0, 0, 0, A2},
    {2, 40, 20, 1, 1, F32, F32, F32, 0, 0, 0, 1, A5}, /* C strided along N: the packed path */
    /* prepacked (constant) B: K blocks with a tail, N tails, several NC blocks
     * per task; B^T through the transposes, batched over one B; half B; C in
     * a per-thread buffer; M under the skinny limit (packed path) */
    {65, 150, 300, 1, 1, F32, F32, F32, 0, 0, 0, 0, A5, 128, 64, 0, 0, 0, 1, {CGEN_EPI_BIAS_N}, F32, 0, 2},
    {33, 150, 70, 2, 3, F32, F32, F32, 0, 1, 0, 0, A5, 32, 0, 0, 0, 0, 0, {0}, F32, 0, 2},
    {40, 37, 50, 1, 1, F32, F16, F32, 0, 0, 0, 0, A2, 16, 0, 5, 0, 0, 1, {CGEN_EPI_RELU}, F32, 0, 2},
    {17, 9, 20, 1, 1, F32, F32, F32, 0, 1, 0, 0, SC, 8, 0, 0, 0, 0, 0, {0}, F32, 0, 2},
    {50, 70, 90, 1, 1, F32, F32, F16, 0, 0, 0, 0, -1, 32, 0, 0, 0, 0, 1, {CGEN_EPI_RESIDUAL}, F32, 0, 2, 2, 12},
    {3, 40, 20, 1, 1, F32, F32, F32, 0, 0, 0, 0, A5, 0, 0, 0, 0, 0, 0, {0}, F32, 0, 2},
    /* tensor steps that multiply (a per-channel scale: batch norm as x * s + t):
     * per row and per column, a residual product (strided: the transposed
     * path), the skinny kernel, scalar */
    {63, 129, 65, 1, 1, F32, F32, F32, 0, 0, 0, 0, A5, 0, 0, 0, 0, 0, 4, {CGEN_EPI_BIAS_M, CGEN_EPI_BIAS_N, CGEN_EPI_BIAS_M, CGEN_EPI_RELU}, F32, 0, 0, 0, 0, 3},
    {33, 40, 29, 1, 1, F32, F32, F32, 0, 0, 0, 0, A2, 0, 0, 0, 0, 0, 2, {CGEN_EPI_RESIDUAL, CGEN_EPI_BIAS_N}, F16, 1, 0, 0, 0, 1},
    {33, 70, 29, 2, 1, F16, F16, F16, 0, 0, 0, 0, A5, 0, 0, 0, 0, 0, 2, {CGEN_EPI_RESIDUAL, CGEN_EPI_SILU}, F16, 0, 0, 0, 0, 1},
    {4, 65, 40, 1, 1, F32, F32, F32, 0, 0, 0, 0, A5, 0, 0, 0, 0, 0, 2, {CGEN_EPI_BIAS_N, CGEN_EPI_RESIDUAL}, F32, 0, 0, 0, 0, 3},
    {17, 20, 9, 1, 1, F32, F32, F32, 0, 0, 0, 0, SC, 0, 0, 0, 0, 0, 2, {CGEN_EPI_BIAS_M, CGEN_EPI_SIGMOID}, F32, 0, 0, 0, 0, 1},
    /* a constant added (SCALE with a shift: at odd positions), each ISA */
    {33, 70, 29, 1, 1, F32, F32, F32, 0, 0, 0, 0, A5, 0, 0, 0, 0, 0, 2, {CGEN_EPI_RELU, CGEN_EPI_SCALE}, F32},
    {33, 70, 29, 1, 1, F32, F32, F32, 0, 0, 0, 0, A2, 0, 0, 0, 0, 0, 2, {CGEN_EPI_BIAS_N, CGEN_EPI_SCALE}, F32},
    {17, 20, 9, 1, 1, F32, F32, F32, 0, 0, 0, 0, SC, 0, 0, 0, 0, 0, 2, {CGEN_EPI_GELU, CGEN_EPI_SCALE}, F32},
    /* a clamp min(max(x, lo), hi) (ReLU6), at position 0 both bounds, 1 lo only, 2 hi only (make_spec):
     * each ISA, the skinny kernel, a half output */
    {33, 70, 29, 1, 1, F32, F32, F32, 0, 0, 0, 0, A5, 0, 0, 0, 0, 0, 2, {CGEN_EPI_CLAMP, CGEN_EPI_BIAS_N}, F32},
    {33, 70, 29, 1, 1, F32, F32, F32, 0, 0, 0, 0, A2, 0, 0, 0, 0, 0, 3, {CGEN_EPI_BIAS_M, CGEN_EPI_CLAMP, CGEN_EPI_CLAMP}, F32},
    {17, 20, 9, 1, 1, F32, F32, F32, 0, 0, 0, 0, SC, 0, 0, 0, 0, 0, 2, {CGEN_EPI_CLAMP, CGEN_EPI_RELU}, F32},
    {2, 129, 65, 1, 1, F32, F32, F32, 0, 0, 0, 0, A5, 0, 0, 0, 0, 0, 2, {CGEN_EPI_BIAS_N, CGEN_EPI_CLAMP}, F32},
    {33, 70, 29, 1, 1, F16, F16, F16, 0, 0, 0, 0, A5, 0, 0, 0, 0, 0, 1, {CGEN_EPI_CLAMP}, F16},
};
#define NCASE ((int)(sizeof CASES / sizeof CASES[0]))

static void make_spec(const gcase *c, cgen_gemm_spec *s) {
  cgen_gemm_spec_init(s, c->M, c->N, c->K, F32);
  s->a_dtype = c->a, s->b_dtype = c->b, s->c_dtype = c->c;
  s->batch[0] = c->b0, s->batch[1] = c->b1;
  long M = c->M, N = c->N, K = c->K;
  if (c->ta) s->a_sm = 1, s->a_sk = M;
  if (c->tb) s->b_sk = 1, s->b_sn = K;
  if (c->tc) s->c_sm = 1, s->c_sn = M;
  s->a_sb[1] = M * K, s->a_sb[0] = c->bcast_a ? 0 : M * K * c->b1;
  s->b_sb[1] = K * N, s->b_sb[0] = K * N * c->b1;
  if (c->prepack & 2) s->b_sb[0] = s->b_sb[1] = 0;
  s->c_sb[1] = M * N, s->c_sb[0] = M * N * c->b1;
  s->tune.force_isa = c->isa;
  if (c->isa >= 0) s->tune.isa_mask = 1u << c->isa;
  s->tune.kc = c->kc, s->tune.nc = c->nc, s->tune.tasks = c->tasks, s->tune.mr = c->mr, s->tune.nr = c->nr;
  s->prepack_a = c->prepack & 1;
  s->prepack_b = (c->prepack & 2) != 0;
  s->tune.order = c->order, s->tune.mc = c->mc;
  s->tune.splitk = c->splitk;
  s->n_epi = c->nepi;
  for (int i = 0; i < c->nepi; i++) {
    cgen_epi *e = &s->epi[i];
    e->kind = c->ek[i];
    e->dtype = c->edt;
    e->scale = 0.75f;
    e->shift = i % 2 ? 0.5f : 0.0f; /* x * scale + shift, and x * scale alone */
    e->lo = i == 2 ? -INFINITY : -0.25f, e->hi = i == 1 ? INFINITY : 0.5f;
    e->mul = (c->mulm >> i) & 1;
    if (e->kind == CGEN_EPI_RESIDUAL) {
      e->s_b1 = M * N, e->s_b0 = M * N * c->b1;
      if (c->res_t) e->s_m = 1, e->s_n = M;
      else e->s_m = N, e->s_n = 1;
    }
  }
}

static long run_case(void *h, int idx, hprt_pool *pool) {
  const gcase *c = &CASES[idx];
  cgen_gemm_spec s;
  make_spec(c, &s);
  char name[32];
  snprintf(name, sizeof name, "g%d", idx);
  gemm_fn fn = (gemm_fn)dlsym(h, name);
  if (!fn) return -1;
  long M = c->M, N = c->N, K = c->K, nb = c->b0 * c->b1;
  ct_buf A, B, C, E[4];
  ct_alloc(&A, c->a, (c->bcast_a ? c->b1 : nb) * M * K, true);
  ct_alloc(&B, c->b, nb * K * N, true);
  ct_alloc(&C, c->c, nb * M * N, false);
  const void *ep[CGEN_MAX_EPI] = {0};
  for (int i = 0; i < c->nepi; i++) {
    long n = c->ek[i] == CGEN_EPI_BIAS_M ? M : c->ek[i] == CGEN_EPI_BIAS_N ? N : c->ek[i] == CGEN_EPI_RESIDUAL ? nb * M * N : 0;
    ct_alloc(&E[i], c->edt, n, true);
    ep[i] = n ? E[i].p : NULL;
  }
  void *Ap = NULL;
  if (c->prepack) {
    char pn[48], bn[48];
    const char *which = c->prepack & 1 ? "a" : "b";
    snprintf(pn, sizeof pn, "g%d_pack_%s", idx, which);
    snprintf(bn, sizeof bn, "g%d_pack_%s_bytes", idx, which);
    int (*pack)(hprt_pool *, const void *, void *) = (int (*)(hprt_pool *, const void *, void *))dlsym(h, pn);
    long (*bytes)(void) = (long (*)(void))dlsym(h, bn);
    if (!pack || !bytes || bytes() <= 0) return -1;
    Ap = malloc((size_t)bytes());
    if (pack(pool, c->prepack & 1 ? A.p : B.p, Ap) != 0) return -1;
  }
  const void *a = c->prepack & 1 ? Ap : A.p, *b = c->prepack & 2 ? Ap : B.p;
  if (fn(pool, a, b, C.p, ep) != 0) return -1;
  free(Ap);
  double *ref = calloc((size_t)(nb * M * N), sizeof(double));
  for (long b0 = 0; b0 < c->b0; b0++)
    for (long b1 = 0; b1 < c->b1; b1++)
      for (long m = 0; m < M; m++)
        for (long n = 0; n < N; n++) {
          double acc = 0;
          for (long k = 0; k < K; k++)
            acc += (double)A.f[b0 * s.a_sb[0] + b1 * s.a_sb[1] + m * s.a_sm + k * s.a_sk] *
                   B.f[b0 * s.b_sb[0] + b1 * s.b_sb[1] + k * s.b_sk + n * s.b_sn];
          for (int i = 0; i < c->nepi; i++) {
            const cgen_epi *e = &s.epi[i];
            switch (e->kind) {
              case CGEN_EPI_BIAS_M: acc = e->mul ? acc * E[i].f[m] : acc + E[i].f[m]; break;
              case CGEN_EPI_BIAS_N: acc = e->mul ? acc * E[i].f[n] : acc + E[i].f[n]; break;
              case CGEN_EPI_RELU: acc = acc > 0 ? acc : 0; break;
              case CGEN_EPI_GELU: acc = ct_gelu(acc); break;
              case CGEN_EPI_SILU: acc = acc * ct_sigmoid(acc); break;
              case CGEN_EPI_SIGMOID: acc = ct_sigmoid(acc); break;
              case CGEN_EPI_SCALE: acc = acc * e->scale + e->shift; break;
              case CGEN_EPI_CLAMP: acc = acc < e->lo ? e->lo : acc > e->hi ? e->hi : acc; break;
              case CGEN_EPI_RESIDUAL: {
                double r = E[i].f[b0 * e->s_b0 + b1 * e->s_b1 + m * e->s_m + n * e->s_n];
                acc = e->mul ? acc * r : acc + r;
                break;
              }
              case CGEN_EPI_ROUND: acc = ct_round(e->dtype, (float)acc); break;
              default: break;
            }
          }
          ref[b0 * s.c_sb[0] + b1 * s.c_sb[1] + m * s.c_sm + n * s.c_sn] = acc;
        }
  char what[64];
  snprintf(what, sizeof what, "gemm case %d", idx);
  long bad = ct_check(&C, ref, nb * M * N, what);
  free(ref);
  ct_free(&A), ct_free(&B), ct_free(&C);
  for (int i = 0; i < c->nepi; i++) ct_free(&E[i]);
  return bad;
}

/* Half of the cases per test keeps each compile short and lets ctest overlap. */
/* Cases idx[0..n) in one translation unit compiled with flags. */
static void run_list(const int *idx, int n, const char *flags) {
  ut_str src;
  ut_str_init(&src);
  harp_error e;
  memset(&e, 0, sizeof e);
  for (int x = 0; x < n; x++) {
    int i = idx[x];
    cgen_gemm_spec s;
    make_spec(&CASES[i], &s);
    char name[32];
    snprintf(name, sizeof name, "g%d", i);
    assert_int_equal(cgen_gemm(&e, &s, name, &src), HARP_OK);
  }
  void *h = ct_compile_flags(src.buf, flags);
  assert_non_null(h);
  hprt_pool *pool = ct_pool_create(h, 2);
  assert_non_null(pool);
  for (int x = 0; x < n; x++) {
    int i = idx[x];
    assert_int_equal(run_case(h, i, pool), 0);
    if (i % 3 == 0) assert_int_equal(run_case(h, i, NULL), 0); /* no pool: serial path */
  }
  ct_pool_destroy(h, pool);
  dlclose(h);
  ut_str_free(&src);
}

static void run_range(int lo, int hi) {
  int idx[NCASE];
  for (int i = lo; i < hi; i++) idx[i - lo] = i;
  run_list(idx, hi - lo, "-O0");
}

#endif
