/* test_cuda_sim.c — every CUDA kernel family run on the CPU SIMT simulator
 * (tests/cuda_sim/hk_sim.h) against naive references.
 *
 * The simulator executes the generated CUDA C itself (not a model of it),
 * with cp.async, ldmatrix, mma.sync and shfl emulated from the PTX ISA's
 * fragment tables, bounds/alignment checks on every access, poisoned SMEM,
 * deferred cp.async completion and shuffled thread order.  What passes here
 * is "CPU-simulated", never "GPU-verified".
 *
 * Also checks that the simulator can fail: a kernel whose cp.async waits are
 * removed, or whose ldmatrix .trans is flipped, must produce wrong results,
 * and the unswizzled SMEM layout must show ldmatrix bank conflicts.
 * Skips when g++ is not installed. */
#include <math.h>

#include "cuda_simrun.h"

/* ---- the module: every kernel of this test ------------------------------------------- */
enum { MAXK = 48 };
typedef struct state {
  cuda_module *m;
  cu_sim sim;
  bool skip;
  cuda_gemm_spec gemm[12];
  cuda_conv_spec conv[6];
  cuda_attn_spec attn[5];
} state;

static void epi_set(cuda_epi *ep, cuda_epi_kind k, tiny_dtype dt) {
  memset(ep, 0, sizeof *ep);
  ep->kind = k;
  ep->dtype = dt;
}

/* The GEMM cases, st->gemm[0..11]. */
static void make_gemm_specs(state *st) {
  cuda_gemm_spec *g = st->gemm;
  /* 0: tails in M, N, K; SMEM-staged 16-byte stores */
  cuda_gemm_spec_init(&g[0], 100, 72, 88, TINY_FP16);
  /* 1: GEMM + bias + ReLU (seed 000 §7.1), fragment-pair stores */
  cuda_gemm_spec_init(&g[1], 64, 96, 64, TINY_FP16);
  g[1].n_epi = 2;
  epi_set(&g[1].epi[0], CUDA_EPI_BIAS_N, TINY_FP16);
  epi_set(&g[1].epi[1], CUDA_EPI_RELU, TINY_FP16);
  g[1].tune.vec = 2;
  /* 2: odd sizes: register-gathered operands, fp32 out, element stores, 4 epilogue ops */
  cuda_gemm_spec_init(&g[2], 37, 29, 27, TINY_FP16);
  g[2].c_dtype = TINY_FP32;
  g[2].n_epi = 4;
  epi_set(&g[2].epi[0], CUDA_EPI_BIAS_M, TINY_FP32);
  epi_set(&g[2].epi[1], CUDA_EPI_GELU, TINY_FP32);
  epi_set(&g[2].epi[2], CUDA_EPI_RESIDUAL, TINY_FP16);
  g[2].epi[2].s_m = 29, g[2].epi[2].s_n = 1;
  epi_set(&g[2].epi[3], CUDA_EPI_SCALE, TINY_FP32);
  g[2].epi[3].scale = 0.5f;
  /* 3: bf16, batch [2][3], A M-major (ldmatrix.trans), B K-major (no .trans) */
  cuda_gemm_spec_init(&g[3], 48, 40, 72, TINY_BF16);
  g[3].batch[0] = 2, g[3].batch[1] = 3;
  g[3].a_sm = 1, g[3].a_sk = 48, g[3].a_sb[1] = 48 * 72, g[3].a_sb[0] = 3 * 48 * 72;
  g[3].b_sk = 1, g[3].b_sn = 72, g[3].b_sb[1] = 72 * 40, g[3].b_sb[0] = 3 * 72 * 40;
  g[3].c_sb[1] = 48 * 40, g[3].c_sb[0] = 3 * 48 * 40;
  g[3].tune.vec = 2;
  /* 4: 128x128 tile, 64x64 warps, 2 stages, SiLU */
  cuda_gemm_spec_init(&g[4], 130, 136, 64, TINY_FP16);
  g[4].n_epi = 1;
  epi_set(&g[4].epi[0], CUDA_EPI_SILU, TINY_FP16);
  g[4].tune.bm = g[4].tune.bn = 128, g[4].tune.warp_m = g[4].tune.warp_n = 64, g[4].tune.stages = 2;
  /* 5: same as 1 without the swizzle (bank conflicts expected) */
  g[5] = g[1];
  g[5].tune.no_swizzle = true;
  /* 6, 7: copies of 0 that get broken on purpose (see break_kernel) */
  g[6] = g[0];
  g[7] = g[4];
  /* 8: skinny GEMM, split-K parallel (4 slices) into a zeroed fp32 C, bias from slice 0 */
  cuda_gemm_spec_init(&g[8], 48, 40, 520, TINY_FP16);
  g[8].c_dtype = TINY_FP32;
  g[8].tune.splitk = 4, g[8].tune.splitk_kind = CUDA_SPLITK_ATOMIC;
  g[8].n_epi = 1;
  epi_set(&g[8].epi[0], CUDA_EPI_BIAS_N, TINY_FP32);
  /* 9: bf16 with the multiplying steps: x s[m], + t[n], * 0.5 + 0.25, x R (strided), + 1 */
  cuda_gemm_spec_init(&g[9], 72, 56, 40, TINY_BF16);
  g[9].n_epi = 5;
  epi_set(&g[9].epi[0], CUDA_EPI_BIAS_M, TINY_BF16);
  g[9].epi[0].mul = true;
  epi_set(&g[9].epi[1], CUDA_EPI_BIAS_N, TINY_FP32);
  epi_set(&g[9].epi[2], CUDA_EPI_SCALE, TINY_FP32);
  g[9].epi[2].scale = 0.5f, g[9].epi[2].shift = 0.25f;
  epi_set(&g[9].epi[3], CUDA_EPI_RESIDUAL, TINY_FP16);
  g[9].epi[3].mul = true, g[9].epi[3].s_m = 1, g[9].epi[3].s_n = 72; /* R transposed */
  epi_set(&g[9].epi[4], CUDA_EPI_SCALE, TINY_FP32);
  g[9].epi[4].scale = 1.0f, g[9].epi[4].shift = 1.0f;
  g[9].tune.vec = 2;
  /* 10: split-K serial (the last slice applies the epilogue): x s[n], + 1.5 */
  cuda_gemm_spec_init(&g[10], 48, 40, 520, TINY_FP16);
  g[10].tune.splitk = 4, g[10].tune.splitk_kind = CUDA_SPLITK_SERIAL;
  g[10].n_epi = 2;
  epi_set(&g[10].epi[0], CUDA_EPI_BIAS_N, TINY_FP16);
  g[10].epi[0].mul = true;
  epi_set(&g[10].epi[1], CUDA_EPI_SCALE, TINY_FP32);
  g[10].epi[1].scale = 1.0f, g[10].epi[1].shift = 1.5f;
  /* 11: + bias, clamp to [-0.5, 0.5] (ReLU6's shape), then a second clamp open below */
  cuda_gemm_spec_init(&g[11], 40, 48, 24, TINY_FP16);
  g[11].n_epi = 3;
  epi_set(&g[11].epi[0], CUDA_EPI_BIAS_N, TINY_FP16);
  epi_set(&g[11].epi[1], CUDA_EPI_CLAMP, TINY_FP32);
  g[11].epi[1].lo = -0.5f, g[11].epi[1].hi = 0.5f;
  epi_set(&g[11].epi[2], CUDA_EPI_CLAMP, TINY_FP32);
  g[11].epi[2].lo = -INFINITY, g[11].epi[2].hi = 0.25f;
}

/* The convolution cases, st->conv[0..5]. */
static void make_conv_specs(state *st) {
  cuda_conv_spec *c = st->conv;
  cuda_conv_spec_init(&c[0], 2, 16, 12, 10, 24, 3, 3, TINY_FP16); /* 3x3 stride 1 pad 1, bias + relu */
  c[0].pad[0] = c[0].pad[1] = c[0].pad[2] = c[0].pad[3] = 1;
  c[0].n_epi = 2;
  epi_set(&c[0].epi[0], CUDA_EPI_BIAS_M, TINY_FP16);
  epi_set(&c[0].epi[1], CUDA_EPI_RELU, TINY_FP16);
  cuda_conv_spec_init(&c[1], 1, 8, 11, 9, 16, 3, 3, TINY_FP16); /* 3x3 stride 2 pad 1, residual */
  c[1].pad[0] = c[1].pad[1] = c[1].pad[2] = c[1].pad[3] = 1;
  c[1].stride[0] = c[1].stride[1] = 2;
  c[1].n_epi = 1;
  epi_set(&c[1].epi[0], CUDA_EPI_RESIDUAL, TINY_FP16);
  cuda_conv_spec_init(&c[2], 2, 32, 6, 8, 48, 1, 1, TINY_FP16); /* 1x1: dense B via cp.async */
  cuda_conv_spec_init(&c[3], 1, 8, 9, 9, 8, 3, 3, TINY_FP16);   /* groups 2, dilation 2, asym pad, K = 36 */
  c[3].groups = 2;
  c[3].dil[0] = c[3].dil[1] = 2;
  c[3].pad[0] = 2, c[3].pad[1] = 1, c[3].pad[2] = 2, c[3].pad[3] = 3;
  cuda_conv_spec_init(&c[4], 2, 16, 10, 9, 24, 3, 3, TINY_FP16); /* batch norm: x s[oc] + t[oc], relu, + 0.5 */
  c[4].pad[0] = c[4].pad[1] = c[4].pad[2] = c[4].pad[3] = 1;
  c[4].n_epi = 4;
  epi_set(&c[4].epi[0], CUDA_EPI_BIAS_M, TINY_FP32);
  c[4].epi[0].mul = true;
  epi_set(&c[4].epi[1], CUDA_EPI_BIAS_M, TINY_FP16);
  epi_set(&c[4].epi[2], CUDA_EPI_RELU, TINY_FP16);
  epi_set(&c[4].epi[3], CUDA_EPI_SCALE, TINY_FP32);
  c[4].epi[3].scale = 1.0f, c[4].epi[3].shift = 0.5f;
  cuda_conv_spec_init(&c[5], 1, 8, 7, 7, 16, 1, 1, TINY_BF16); /* bf16 1x1: x R, x 2 - 1 */
  c[5].y_dtype = TINY_FP32;
  c[5].n_epi = 2;
  epi_set(&c[5].epi[0], CUDA_EPI_RESIDUAL, TINY_BF16);
  c[5].epi[0].mul = true;
  epi_set(&c[5].epi[1], CUDA_EPI_SCALE, TINY_FP32);
  c[5].epi[1].scale = 2.0f, c[5].epi[1].shift = -1.0f;
}

/* The attention cases, st->attn[0..4]. */
static void make_attn_specs(state *st) {
  cuda_attn_spec *a = st->attn;
  cuda_attn_spec_init(&a[0], 2, 2, 100, 90, 64, TINY_FP16);
  cuda_attn_spec_init(&a[1], 2, 2, 100, 90, 64, TINY_FP16);
  a[1].causal = true;
  cuda_attn_spec_init(&a[2], 1, 3, 70, 130, 32, TINY_FP16);
  a[2].online = true;
  cuda_attn_spec_init(&a[3], 1, 2, 65, 65, 64, TINY_BF16);
  a[3].online = true, a[3].causal = true;
  cuda_attn_spec_init(&a[4], 2, 1, 50, 77, 40, TINY_FP16); /* d 40 -> padded 64, dv 24, fp32 mask, fp32 out */
  a[4].dv = 24;
  a[4].o_dtype = TINY_FP32;
  a[4].has_mask = true;
  a[4].mask_dtype = TINY_FP32;
  a[4].mask_s[2] = 77, a[4].mask_s[3] = 1; /* broadcast over b, h */
}

static void make_specs(state *st) {
  make_gemm_specs(st);
  make_conv_specs(st);
  make_attn_specs(st);
}

/* Break a kernel on purpose: drop every cp.async.wait_group (what = 0) or
 * flip the .trans of the first ldmatrix (what = 1). */
static int break_stmt(cuda_stmt *st, int what) {
  int n = 0;
  for (int i = 0; i < st->nbody; i++) {
    cuda_stmt *c = st->body[i];
    if (what == 0 && c->kind == CU_WAIT_GROUP) {
      c->kind = CU_COMMENT;
      c->s[0] = "wait_group removed by the test";
      n++;
    } else if (what == 1 && c->kind == CU_LDMATRIX && n == 0) {
      c->i[1] = !c->i[1];
      n++;
    }
    n += break_stmt(c, what);
    if (what == 1 && n) return n;
  }
  return n;
}

static int setup(void **vs) {
  state *st = calloc(1, sizeof *st);
  *vs = st;
  harp_error e = {0};
  make_specs(st);
  cu_ok(&e, cuda_module_new(&e, CUDA_SM80, &st->m));
  char nm[32];
  for (int i = 0; i < 12; i++) {
    snprintf(nm, sizeof nm, "gemm%d", i);
    cu_ok(&e, cuda_gen_gemm(&e, st->m, &st->gemm[i], nm));
  }
  for (int i = 0; i < 6; i++) {
    snprintf(nm, sizeof nm, "conv%d", i);
    cu_ok(&e, cuda_gen_conv(&e, st->m, &st->conv[i], nm));
  }
  for (int i = 0; i < 5; i++) {
    snprintf(nm, sizeof nm, "attn%d", i);
    cu_ok(&e, cuda_gen_attn(&e, st->m, &st->attn[i], nm));
  }
  assert_true(break_stmt(((cuda_kernel *)cuda_module_find(st->m, "gemm6"))->body, 0) > 0);
  assert_int_equal(break_stmt(((cuda_kernel *)cuda_module_find(st->m, "gemm7"))->body, 1), 1);
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

/* ---- GEMM ------------------------------------------------------------------------------ */
/* Run gemm kernel i; returns mismatches; stats out. */
static int64_t run_gemm(state *st, int i, unsigned long long stats[7]) {
  char nm[32];
  snprintf(nm, sizeof nm, "gemm%d", i);
  return cu_run_gemm(&st->sim, st->m, &st->gemm[i], nm, (uint64_t)i * 7919 + 1, 1e-3, stats);
}

#define SKIP_IF_NO_SIM(st)                                    \
  do {                                                        \
    if ((st)->skip) {                                         \
      fprintf(stderr, "g++ not found: simulator tests skipped\n"); \
      skip();                                                 \
    }                                                         \
  } while (0)

static void test_gemm_tails(void **vs) {
  state *st = *vs;
  SKIP_IF_NO_SIM(st);
  unsigned long long stats[7];
  assert_int_equal(run_gemm(st, 0, stats), 0);
  assert_true(stats[0] > 0 && stats[2] > 0 && stats[3] > 0); /* ldmatrix, mma, cp.async all used */
  assert_int_equal(stats[1], 0);                              /* swizzled: no bank conflicts */
}

static void test_gemm_bias_relu(void **vs) {
  state *st = *vs;
  SKIP_IF_NO_SIM(st);
  unsigned long long stats[7];
  assert_int_equal(run_gemm(st, 1, stats), 0);
  assert_int_equal(stats[1], 0);
}

static void test_gemm_odd_gather_fp32(void **vs) {
  state *st = *vs;
  SKIP_IF_NO_SIM(st);
  assert_int_equal(run_gemm(st, 2, NULL), 0);
}

static void test_gemm_bf16_batched_transposed(void **vs) {
  state *st = *vs;
  SKIP_IF_NO_SIM(st);
  unsigned long long stats[7];
  assert_int_equal(run_gemm(st, 3, stats), 0);
  assert_int_equal(stats[1], 0);
}

static void test_gemm_big_tile(void **vs) {
  state *st = *vs;
  SKIP_IF_NO_SIM(st);
  unsigned long long stats[7];
  assert_int_equal(run_gemm(st, 4, stats), 0);
  assert_int_equal(stats[1], 0);
}

static void test_gemm_unswizzled_conflicts(void **vs) {
  state *st = *vs;
  SKIP_IF_NO_SIM(st);
  unsigned long long stats[7];
  assert_int_equal(run_gemm(st, 5, stats), 0); /* still correct ... */
  assert_true(stats[1] > 0);                    /* ... but with bank conflicts */
}

/* a clamp: min(max(x, lo), hi) with both bounds, then with lo open */
static void test_gemm_clamp(void **vs) {
  state *st = *vs;
  SKIP_IF_NO_SIM(st);
  assert_int_equal(run_gemm(st, 11, NULL), 0);
}

static void test_gemm_splitk_parallel(void **vs) {
  state *st = *vs;
  SKIP_IF_NO_SIM(st);
  assert_int_equal(run_gemm(st, 8, NULL), 0);
  assert_int_equal(cuda_module_find(st->m, "gemm8")->grid[2], 4);
}

/* x tensor and + constant: in the registers of one kernel, after a serial split-K */
static void test_gemm_mul_shift(void **vs) {
  state *st = *vs;
  SKIP_IF_NO_SIM(st);
  assert_int_equal(run_gemm(st, 9, NULL), 0);
  assert_int_equal(run_gemm(st, 10, NULL), 0);
  /* split-K parallel applies the epilogue on slice 0's partial: a product is refused */
  cuda_module *m;
  harp_error e = {0};
  cu_ok(&e, cuda_module_new(&e, CUDA_SM80, &m));
  cuda_gemm_spec s = st->gemm[8];
  s.epi[0].mul = true;
  assert_int_equal(cuda_gen_gemm(&e, m, &s, "refused"), HARP_E_UNSUPPORTED);
  assert_non_null(strstr(e.msg, "x bias_n"));
  cuda_module_free(m);
}

static void test_broken_kernels_fail(void **vs) {
  state *st = *vs;
  SKIP_IF_NO_SIM(st);
  assert_true(run_gemm(st, 6, NULL) > 0); /* no cp.async.wait_group: reads stale (poisoned) SMEM */
  assert_true(run_gemm(st, 7, NULL) > 0); /* ldmatrix .trans flipped: wrong fragments */
}

/* ---- conv ------------------------------------------------------------------------------ */
static void test_conv(void **vs) {
  state *st = *vs;
  SKIP_IF_NO_SIM(st);
  for (int i = 0; i < 6; i++) {
    char nm[32];
    snprintf(nm, sizeof nm, "conv%d", i);
    unsigned long long stats[7];
    assert_int_equal(cu_run_conv(&st->sim, st->m, &st->conv[i], nm, (uint64_t)i + 100, 1e-3, stats), 0);
    assert_int_equal(stats[1], 0);
  }
}

/* ---- attention -------------------------------------------------------------------------- */
static void test_attention(void **vs) {
  state *st = *vs;
  SKIP_IF_NO_SIM(st);
  for (int i = 0; i < 5; i++) {
    const cuda_attn_spec *s = &st->attn[i];
    cu_rng r = {(uint64_t)i + 200};
    int64_t nq = s->b * s->h * s->m * s->d, nk = s->b * s->h * s->n * s->d, nv = s->b * s->h * s->n * s->dv,
            no = s->b * s->h * s->m * s->dv;
    cu_buf q = cu_random(s->q_dtype, nq, &r, 1), k = cu_random(s->kv_dtype, nk, &r, 1),
           v = cu_random(s->kv_dtype, nv, &r, 1), o = cu_buf_new(s->o_dtype, no), mask = {0};
    memset(o.p, 0xFF, o.bytes);
    if (s->has_mask) {
      mask = cu_random(s->mask_dtype, s->m * s->n, &r, 2);
      for (int64_t j = 0; j < s->n; j++) cu_set(&mask, 5 * s->n + j, -INFINITY); /* row 5 fully masked */
    }
    cu_buf *args[5] = {&q, &k, &v, s->has_mask ? &mask : NULL, &o};
    char nm[32];
    snprintf(nm, sizeof nm, "attn%d", i);
    unsigned long long stats[7];
    assert_int_equal(cu_sim_run(&st->sim, cuda_module_find(st->m, nm), args, stats, 11), 0);
    assert_int_equal(stats[1], 0);
    float *want = calloc((size_t)no, sizeof(float));
    ref_attn(s, &q, &k, &v, &mask, want);
    /* bf16 carries 8 significant bits: P rounded to bf16 for the P x V mma
     * costs ~2^-9 relative, beyond rtol 1e-3; fp16 keeps the 1e-3 bound. */
    double tol = s->q_dtype == TINY_BF16 ? 1e-2 : 1e-3;
    assert_int_equal(cu_compare(nm, &o, want, no, tol), 0);
    free(want);
    cu_buf_free(&q);
    cu_buf_free(&k);
    cu_buf_free(&v);
    cu_buf_free(&o);
    if (s->has_mask) cu_buf_free(&mask);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gemm_tails),
      cmocka_unit_test(test_gemm_bias_relu),
      cmocka_unit_test(test_gemm_odd_gather_fp32),
      cmocka_unit_test(test_gemm_bf16_batched_transposed),
      cmocka_unit_test(test_gemm_big_tile),
      cmocka_unit_test(test_gemm_unswizzled_conflicts),
      cmocka_unit_test(test_gemm_splitk_parallel),
      cmocka_unit_test(test_gemm_clamp),
      cmocka_unit_test(test_gemm_mul_shift),
      cmocka_unit_test(test_broken_kernels_fail),
      cmocka_unit_test(test_conv),
      cmocka_unit_test(test_attention),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
