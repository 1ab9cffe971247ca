/* test_cuda_sim_fp32.c — fp32 contractions on the SM80 template, each way of
 * computing them (cuda_math), run on the CPU SIMT simulator against naive
 * fp64 references that round the operands as the mode does (cuda_ref.h
 * ref_opnd):
 *   TF32  mma.sync m16n8k8 .tf32 (operands rounded to TF32, ties away);
 *   FP32  the SIMT template (FFMA, 8x8 outputs per thread);
 *   FP16 / BF16  fp32 operands rounded into m16n8k16.
 * Every SMEM layout (A K- or M-major, B K- or N-major), tails in M, N, K,
 * batches, epilogues, split-K, convolutions (gathered and 1x1), and the
 * TF32 attention.  The references round exactly as the kernels do, so the
 * tolerance is the fp32 accumulation's (1e-4; 16-bit outputs 1e-3): a kernel
 * that skipped the TF32 rounding (the hardware would truncate) is off by
 * about 1e-3 and fails.  "CPU-simulated", never "GPU-verified".  Skips when
 * g++ is not installed. */
#include <math.h>

#include "cuda_simrun.h"

enum { NG = 11, NC = 5, NA = 3, NA_GEN = NA };
typedef struct state {
  cuda_module *m;
  cu_sim sim;
  bool skip;
  cuda_gemm_spec gemm[NG];
  cuda_conv_spec conv[NC];
  cuda_attn_spec attn[NA];
} state;

static void epi_set(cuda_epi *ep, cuda_epi_kind k, tiny_dtype dt) {
  memset(ep, 0, sizeof *ep);
  ep->kind = k;
  ep->dtype = dt;
}

/* A [b0][b1] batch of M-major A (A^T stored) and K-major B (B^T stored). */
static void transposed(cuda_gemm_spec *g, int64_t b0, int64_t b1) {
  int64_t M = g->M, N = g->N, K = g->K;
  g->batch[0] = b0, g->batch[1] = b1;
  g->a_sm = 1, g->a_sk = M, g->a_sb[1] = M * K, g->a_sb[0] = b1 * M * K;
  g->b_sk = 1, g->b_sn = K, g->b_sb[1] = K * N, g->b_sb[0] = b1 * K * N;
  g->c_sb[1] = M * N, g->c_sb[0] = b1 * M * N;
}

static void make_gemms(cuda_gemm_spec *g) {
  /* 0: TF32, tails in M, N, K; A K-major (ldmatrix), B N-major (ld.shared.b32); staged 16-byte stores */
  cuda_gemm_spec_init(&g[0], 100, 72, 88, TINY_FP32);
  /* 1: TF32, A M-major (ld.shared.b32), B K-major (ldmatrix), batch [2][3], + bias[n], ReLU, pair stores */
  cuda_gemm_spec_init(&g[1], 48, 40, 72, TINY_FP32);
  transposed(&g[1], 2, 3);
  g[1].n_epi = 2;
  epi_set(&g[1].epi[0], CUDA_EPI_BIAS_N, TINY_FP32);
  epi_set(&g[1].epi[1], CUDA_EPI_RELU, TINY_FP32);
  g[1].tune.vec = 2;
  /* 2: TF32, 128x128 tiles of 64x64 warps, 2 stages, odd K and strides (4-byte cp.async), fp16 out, SiLU */
  cuda_gemm_spec_init(&g[2], 130, 136, 27, TINY_FP32);
  g[2].a_sm = 27, g[2].b_sk = 137, g[2].c_dtype = TINY_FP16;
  g[2].n_epi = 1;
  epi_set(&g[2].epi[0], CUDA_EPI_SILU, TINY_FP32);
  g[2].tune.bm = g[2].tune.bn = 128, g[2].tune.warp_m = g[2].tune.warp_n = 64, g[2].tune.stages = 2;
  /* 3: strict fp32 (SIMT), tails, A K-major, B N-major */
  cuda_gemm_spec_init(&g[3], 100, 72, 88, TINY_FP32);
  g[3].math = CUDA_MATH_FP32;
  /* 4: SIMT, A M-major, B K-major, batch, x s[m] + residual (fp16) */
  cuda_gemm_spec_init(&g[4], 48, 72, 40, TINY_FP32);
  transposed(&g[4], 2, 1);
  g[4].math = CUDA_MATH_FP32;
  g[4].n_epi = 2;
  epi_set(&g[4].epi[0], CUDA_EPI_BIAS_M, TINY_FP32);
  g[4].epi[0].mul = true;
  epi_set(&g[4].epi[1], CUDA_EPI_RESIDUAL, TINY_FP16);
  g[4].epi[1].s_b0 = 48 * 72, g[4].epi[1].s_m = 72, g[4].epi[1].s_n = 1;
  /* 5: SIMT, 128x128 tiles (8 warps), 2 stages, BK 8, GELU */
  cuda_gemm_spec_init(&g[5], 130, 136, 40, TINY_FP32);
  g[5].math = CUDA_MATH_FP32;
  g[5].n_epi = 1;
  epi_set(&g[5].epi[0], CUDA_EPI_GELU, TINY_FP32);
  g[5].tune.bm = g[5].tune.bn = 128, g[5].tune.bk = 8, g[5].tune.stages = 2;
  /* 6: fp32 rounded to fp16 into m16n8k16, fp16 out, A K-major, B N-major */
  cuda_gemm_spec_init(&g[6], 100, 72, 88, TINY_FP32);
  g[6].math = CUDA_MATH_FP16, g[6].c_dtype = TINY_FP16;
  /* 7: rounded to bf16, A M-major, B K-major, + bias[m] */
  cuda_gemm_spec_init(&g[7], 48, 40, 72, TINY_FP32);
  transposed(&g[7], 1, 2);
  g[7].math = CUDA_MATH_BF16;
  g[7].n_epi = 1;
  epi_set(&g[7].epi[0], CUDA_EPI_BIAS_M, TINY_FP32);
  /* 8: TF32 split-K parallel (4 slices, atomics into a zeroed C), bias from slice 0 */
  cuda_gemm_spec_init(&g[8], 48, 40, 520, TINY_FP32);
  g[8].tune.splitk = 4, g[8].tune.splitk_kind = CUDA_SPLITK_ATOMIC;
  g[8].n_epi = 1;
  epi_set(&g[8].epi[0], CUDA_EPI_BIAS_N, TINY_FP32);
  /* 9: SIMT split-K serial, the last slice applies x 0.5 + 1 */
  cuda_gemm_spec_init(&g[9], 48, 72, 520, TINY_FP32);
  g[9].math = CUDA_MATH_FP32;
  g[9].tune.splitk = 3, g[9].tune.splitk_kind = CUDA_SPLITK_SERIAL;
  g[9].n_epi = 1;
  epi_set(&g[9].epi[0], CUDA_EPI_SCALE, TINY_FP32);
  g[9].epi[0].scale = 0.5f, g[9].epi[0].shift = 1.0f;
  /* 10: a copy of 0 with the TF32 rounding removed (break_rounding): must fail */
  g[10] = g[0];
}

static void make_convs(cuda_conv_spec *c) {
  cuda_conv_spec_init(&c[0], 2, 16, 12, 10, 24, 3, 3, TINY_FP32); /* TF32 3x3 s1 pad 1 (gathered B), bias + relu */
  c[0].pad[0] = c[0].pad[1] = c[0].pad[2] = c[0].pad[3] = 1;
  c[0].n_epi = 2;
  epi_set(&c[0].epi[0], CUDA_EPI_BIAS_M, TINY_FP32);
  epi_set(&c[0].epi[1], CUDA_EPI_RELU, TINY_FP32);
  cuda_conv_spec_init(&c[1], 1, 8, 11, 9, 16, 3, 3, TINY_FP32); /* SIMT 3x3 s2, residual */
  c[1].math = CUDA_MATH_FP32;
  c[1].pad[0] = c[1].pad[1] = c[1].pad[2] = c[1].pad[3] = 1;
  c[1].stride[0] = c[1].stride[1] = 2;
  c[1].n_epi = 1;
  epi_set(&c[1].epi[0], CUDA_EPI_RESIDUAL, TINY_FP32);
  cuda_conv_spec_init(&c[2], 2, 32, 6, 8, 48, 1, 1, TINY_FP32); /* TF32 1x1: dense B through cp.async */
  cuda_conv_spec_init(&c[3], 1, 8, 9, 9, 8, 3, 3, TINY_FP32);   /* fp16-rounded: groups 2, dilation 2, asymmetric pad */
  c[3].math = CUDA_MATH_FP16;
  c[3].groups = 2;
  c[3].dil[0] = c[3].dil[1] = 2;
  c[3].pad[0] = 2, c[3].pad[1] = 1, c[3].pad[2] = 2, c[3].pad[3] = 3;
  cuda_conv_spec_init(&c[4], 2, 16, 7, 7, 32, 1, 1, TINY_FP32); /* SIMT 1x1 */
  c[4].math = CUDA_MATH_FP32;
}

static void make_attns(cuda_attn_spec *a) {
  cuda_attn_spec_init(&a[0], 2, 2, 100, 90, 64, TINY_FP32); /* TF32, 2-pass */
  cuda_attn_spec_init(&a[1], 1, 2, 65, 77, 32, TINY_FP32); /* TF32, online, causal */
  a[1].online = true, a[1].causal = true;
  cuda_attn_spec_init(&a[2], 2, 1, 50, 77, 40, TINY_FP32); /* d 40 -> 64, dv 24, fp32 mask with a masked row */
  a[2].dv = 24;
  a[2].has_mask = true;
  a[2].mask_s[2] = 77, a[2].mask_s[3] = 1;
}

/* Remove every hk_tf32 rounding of the fragment registers (the tensor core
 * then truncates). */
static int break_rounding(cuda_stmt *st) {
  int n = 0;
  for (int i = 0; i < st->nbody; i++) {
    cuda_stmt *c = st->body[i];
    if (c->kind == CU_ASSIGN && strstr(c->s[1], "hk_tf32(")) {
      c->kind = CU_COMMENT;
      c->s[0] = "rounding removed by the test";
      n++;
    }
    n += break_rounding(c);
  }
  return n;
}

static int setup(void **vs) {
  state *st = calloc(1, sizeof *st);
  *vs = st;
  harp_error e = {0};
  make_gemms(st->gemm);
  make_convs(st->conv);
  make_attns(st->attn);
  cu_ok(&e, cuda_module_new(&e, CUDA_SM80, &st->m));
  char nm[32];
  for (int i = 0; i < NG; i++) {
    snprintf(nm, sizeof nm, "gemm%d", i);
    cu_ok(&e, cuda_gen_gemm(&e, st->m, &st->gemm[i], nm));
  }
  for (int i = 0; i < NC; i++) {
    snprintf(nm, sizeof nm, "conv%d", i);
    cu_ok(&e, cuda_gen_conv(&e, st->m, &st->conv[i], nm));
  }
  for (int i = 0; i < NA_GEN; i++) {
    snprintf(nm, sizeof nm, "attn%d", i);
    cu_ok(&e, cuda_gen_attn(&e, st->m, &st->attn[i], nm));
  }
  assert_true(break_rounding(((cuda_kernel *)cuda_module_find(st->m, "gemm10"))->body) > 0);
  char *src = NULL;
  cu_ok(&e, cuda_print(&e, st->m, &src));
  st->skip = !cu_sim_build(&st->sim, src);
  free(src);
  return 0;
}

static int teardown(void **vs) {
  state *st = *vs;
  cu_sim_free(&st->sim);
  cuda_module_free(st->m);
  free(st);
  return 0;
}

#define SKIP_IF_NO_SIM(st)                                         \
  do {                                                             \
    if ((st)->skip) {                                              \
      fprintf(stderr, "g++ not found: simulator tests skipped\n"); \
      skip();                                                      \
    }                                                              \
  } while (0)

static int64_t run_gemm(state *st, int i, unsigned long long stats[7]) {
  char nm[32];
  snprintf(nm, sizeof nm, "gemm%d", i);
  double tol = st->gemm[i].c_dtype == TINY_FP32 ? 1e-4 : 1e-3;
  return cu_run_gemm(&st->sim, st->m, &st->gemm[i], nm, (uint64_t)i * 131 + 5, tol, stats);
}

static const char *meta(const cuda_kernel *k, const char *key) {
  for (int i = 0; i < k->nmeta; i++)
    if (!strcmp(k->meta[i].key, key)) return k->meta[i].str;
  return "";
}

static void test_gemm_tf32(void **vs) {
  state *st = *vs;
  SKIP_IF_NO_SIM(st);
  unsigned long long stats[7];
  for (int i = 0; i < 3; i++) {
    assert_int_equal(run_gemm(st, i, stats), 0);
    assert_true(stats[2] > 0);  /* mma */
    assert_int_equal(stats[1], 0); /* no ldmatrix bank conflicts */
    assert_non_null(strstr(meta(cuda_module_find(st->m, i == 0 ? "gemm0" : i == 1 ? "gemm1" : "gemm2"), "math"), "tf32"));
  }
  assert_int_equal(run_gemm(st, 8, NULL), 0); /* split-K parallel */
}

static void test_gemm_simt(void **vs) {
  state *st = *vs;
  SKIP_IF_NO_SIM(st);
  unsigned long long stats[7];
  for (int i = 3; i < 6; i++) {
    assert_int_equal(run_gemm(st, i, stats), 0);
    assert_int_equal(stats[0], 0); /* no ldmatrix ... */
    assert_int_equal(stats[2], 0); /* ... and no mma: FFMA only */
  }
  assert_int_equal(run_gemm(st, 9, NULL), 0); /* split-K serial */
  assert_int_equal(cuda_module_find(st->m, "gemm5")->block[0], 256); /* 128x128 of 32x64 warps */
}

static void test_gemm_half_rounded(void **vs) {
  state *st = *vs;
  SKIP_IF_NO_SIM(st);
  unsigned long long stats[7];
  for (int i = 6; i < 8; i++) {
    assert_int_equal(run_gemm(st, i, stats), 0);
    assert_true(stats[2] > 0);
  }
}

/* without the rounding the tensor core truncates: off beyond the tolerance */
static void test_rounding_matters(void **vs) {
  state *st = *vs;
  SKIP_IF_NO_SIM(st);
  assert_true(run_gemm(st, 10, NULL) > 0);
}

static void test_conv(void **vs) {
  state *st = *vs;
  SKIP_IF_NO_SIM(st);
  for (int i = 0; i < NC; i++) {
    char nm[32];
    snprintf(nm, sizeof nm, "conv%d", i);
    assert_int_equal(cu_run_conv(&st->sim, st->m, &st->conv[i], nm, (uint64_t)i + 300, 1e-4, NULL), 0);
  }
}

static void test_attention_tf32(void **vs) {
  state *st = *vs;
  SKIP_IF_NO_SIM(st);
  for (int i = 0; i < NA; i++) {
    const cuda_attn_spec *s = &st->attn[i];
    cu_rng r = {(uint64_t)i + 400};
    int64_t nq = s->b * s->h * s->m * s->d, nk = s->b * s->h * s->n * s->d, nv = s->b * s->h * s->n * s->dv,
            no = s->b * s->h * s->m * s->dv;
    cu_buf q = cu_random(TINY_FP32, nq, &r, 1), k = cu_random(TINY_FP32, nk, &r, 1), v = cu_random(TINY_FP32, nv, &r, 1),
           o = cu_buf_new(s->o_dtype, no), mask = {0};
    memset(o.p, 0xFF, o.bytes);
    if (s->has_mask) {
      mask = cu_random(s->mask_dtype, s->m * s->n, &r, 2);
      for (int64_t j = 0; j < s->n; j++) cu_set(&mask, 5 * s->n + j, -INFINITY); /* row 5 fully masked */
    }
    cu_buf *args[5] = {&q, &k, &v, s->has_mask ? &mask : NULL, &o};
    char nm[32];
    snprintf(nm, sizeof nm, "attn%d", i);
    unsigned long long stats[7];
    assert_int_equal(cu_sim_run(&st->sim, cuda_module_find(st->m, nm), args, stats, 13), 0);
    assert_true(stats[2] > 0);
    float *want = calloc((size_t)no, sizeof(float));
    ref_attn(s, &q, &k, &v, &mask, want);
    /* the reference keeps P in fp64 and q, k, v unrounded: TF32's 2^-11 per operand */
    assert_int_equal(cu_compare(nm, &o, want, no, 2e-3), 0);
    free(want);
    cu_buf_free(&q);
    cu_buf_free(&k);
    cu_buf_free(&v);
    cu_buf_free(&o);
    if (s->has_mask) cu_buf_free(&mask);
  }
}

/* strict fp32 attention has no template: refused (the region former splits it) */
static void test_attention_refusals(void **vs) {
  (void)vs;
  cuda_module *m;
  harp_error e = {0};
  cu_ok(&e, cuda_module_new(&e, CUDA_SM80, &m));
  cuda_attn_spec a;
  cuda_attn_spec_init(&a, 1, 1, 64, 64, 64, TINY_FP32);
  a.math = CUDA_MATH_FP32;
  assert_int_equal(cuda_gen_attn(&e, m, &a, "strict"), HARP_E_UNSUPPORTED);
  cuda_module_free(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gemm_tf32),      cmocka_unit_test(test_gemm_simt), cmocka_unit_test(test_gemm_half_rounded),
      cmocka_unit_test(test_rounding_matters), cmocka_unit_test(test_conv),    cmocka_unit_test(test_attention_tf32),
      cmocka_unit_test(test_attention_refusals),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
