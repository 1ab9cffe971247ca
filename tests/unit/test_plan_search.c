/* test_plan_search.c — machine descriptions, the GEMM view of a region, the
 * default plan of every kind of region on the three machines, the tuner's
 * search space, and plan_for_region (--plan overrides). */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "backend/cuda/cuda_plan.h"
#include "backend/c/cgen.h"
#include "harp/cpu.h"
#include "harp/knobs.h"
#include "plan_test_util.h"

static void parse_ok(const char *text, plan_arch arch, plan_t *p) {
  harp_error e = {0};
  if (plan_parse(text, "t.plan", arch, p, &e)) fail_msg("parse failed: %s", err_text(&e));
}

static void test_gpu_machines(void **state) {
  (void)state;
  const plan_machine *a = plan_machine_gpu(PLAN_ARCH_SM80), *h = plan_machine_gpu(PLAN_ARCH_SM90);
  assert_non_null(a);
  assert_non_null(h);
  assert_null(plan_machine_gpu(PLAN_ARCH_CPU));
  assert_int_equal(a->sm_count, 108);
  assert_int_equal(a->smem_per_sm, 164 * 1024);
  assert_int_equal(a->smem_per_cta_max, 163 * 1024);
  assert_int_equal(a->l2_bytes, 40 * 1024 * 1024);
  assert_true(a->peak_tc16 == 312e12 && a->peak_fp32 == 19.5e12 && a->mem_bw == 2039e9);
  assert_int_equal(h->sm_count, 132);
  assert_int_equal(h->smem_per_sm, 228 * 1024);
  assert_int_equal(h->smem_per_cta_max, 227 * 1024);
  assert_int_equal(h->l2_bytes, 50 * 1024 * 1024);
  assert_true(h->peak_tc16 == 989.4e12 && h->peak_fp32 == 66.9e12 && h->mem_bw == 3350e9);
  for (int i = 0; i < 2; i++) {
    const plan_machine *m = i ? h : a;
    assert_int_equal(m->regs_per_sm, 65536);
    assert_int_equal(m->regs_per_thread_max, 255);
    assert_int_equal(m->max_warps_per_sm, 64);
    assert_int_equal(m->max_cta_per_sm, 32);
    assert_int_equal(m->max_threads_per_cta, 1024);
  }
  assert_true(plan_machine_peak(a, TINY_FP16) == 312e12);
  assert_true(plan_machine_peak(a, TINY_BF16) == 312e12);
  assert_true(plan_machine_peak(a, TINY_FP32) == 19.5e12);
  plan_machine copy;
  plan_machine_get(PLAN_ARCH_SM90, &copy);
  assert_memory_equal(&copy, h, sizeof copy);
}

static void test_cpu_detection(void **state) {
  (void)state;
  unsetenv("HARP_CPU_BW_GBS");
  unsetenv("HARP_CPU_GHZ");
  plan_machine m;
  plan_machine_detect_cpu(&m);
  assert_int_equal(m.arch, PLAN_ARCH_CPU);
  assert_true(m.sm_count >= 1);
  assert_true(m.simd_bytes == 16 || m.simd_bytes == 32 || m.simd_bytes == 64);
  assert_true(m.regs_per_thread_max == 16 || m.regs_per_thread_max == 32);
  assert_true(m.clock_ghz > 0.3 && m.clock_ghz < 10);
  assert_true(m.l1_bytes > 0 && m.l2_bytes > 0 && m.l3_bytes > 0);
  assert_int_equal(m.smem_per_sm, m.l2_bytes);
  assert_int_equal(m.smem_per_cta_max, m.l2_bytes);
  /* peak = cores x GHz x FMA units x fp32 lanes x 2 */
  double peak = m.sm_count * m.clock_ghz * 1e9 * m.fma_units * (m.simd_bytes / 4) * 2;
  assert_true(fabs(m.peak_fp32 - peak) <= 1e-6 * peak);
  assert_true(m.mem_bw > 0);
  if (m.avx512) assert_int_equal(m.simd_bytes, 64);
  double bw = m.mem_bw, ghz = m.clock_ghz;
  /* the knobs cpu_bw_gbs and cpu_ghz, set by HARP_CPU_BW_GBS and
   * HARP_CPU_GHZ through the one reader (rt_knobs_from_env) */
  setenv("HARP_CPU_BW_GBS", "123.5", 1);
  setenv("HARP_CPU_GHZ", "3", 1);
  plan_machine_detect_cpu(&m); /* the library itself reads no environment */
  assert_true(m.mem_bw == bw && m.clock_ghz == ghz);
  rt_knobs k;
  harp_error e = {0};
  rt_knobs_init(&k);
  assert_int_equal(rt_knobs_from_env(&e, &k), HARP_OK);
  plan_machine_detect_cpu_at(&m, k.cpu_ghz, k.cpu_bw_gbs);
  assert_true(m.mem_bw == 123.5e9);
  assert_true(m.clock_ghz == 3.0);
  assert_true(fabs(m.peak_fp32 - m.sm_count * 3e9 * m.fma_units * (m.simd_bytes / 4) * 2) <= 1e-6 * m.peak_fp32);
  setenv("HARP_CPU_BW_GBS", "fast", 1); /* not a number: an error naming the variable */
  assert_int_equal(rt_knobs_from_env(&e, &k), HARP_E_USAGE);
  assert_non_null(strstr(e.msg, "HARP_CPU_BW_GBS"));
  plan_machine_detect_cpu_at(&m, 0, 0);
  assert_true(m.mem_bw == bw && m.clock_ghz == ghz);
  unsetenv("HARP_CPU_BW_GBS");
  unsetenv("HARP_CPU_GHZ");
}

static void test_gemm_view(void **state) {
  (void)state;
  plan_region_info r = gemm_region(64, 32, 16);
  plan_gemm_view g;
  harp_error e = {0};
  assert_int_equal(plan_region_gemm_view(&r, &g, &e), HARP_OK);
  assert_true(g.m == 0 && g.n == 1 && g.k == 2 && g.M == 64 && g.N == 32 && g.K == 16 && g.batch == 1);
  /* roles given explicitly win; batch is the other parallel axes */
  memset(&r, 0, sizeof r);
  r.pattern = PLAN_PAT_MATMUL;
  r.naxes = 5;
  r.axes[0] = (plan_axis_info){"kk", 7, true, PLAN_ROLE_K};
  r.axes[1] = (plan_axis_info){"b", 3, false, PLAN_ROLE_AUTO};
  r.axes[2] = (plan_axis_info){"cols", 11, false, PLAN_ROLE_N};
  r.axes[3] = (plan_axis_info){"rows", 13, false, PLAN_ROLE_M};
  r.axes[4] = (plan_axis_info){"h", 5, false, PLAN_ROLE_AUTO};
  assert_int_equal(plan_region_gemm_view(&r, &g, &e), HARP_OK);
  assert_true(g.m == 3 && g.n == 2 && g.k == 0 && g.batch == 15);
  r.axes[4].role = PLAN_ROLE_M;
  assert_int_equal(plan_region_gemm_view(&r, &g, &e), HARP_E_INVALID_ARG);
  harp_error_clear(&e);
  r.axes[4] = (plan_axis_info){"b", 5, false, PLAN_ROLE_AUTO};
  assert_int_equal(plan_region_gemm_view(&r, &g, &e), HARP_E_INVALID_ARG); /* duplicate name */
}

/* The default plan validates, is canonical (JSON round trip) and reads the
 * machine: vector width 8 halves = 16 bytes on GPUs, 16 fp32 lanes on AVX-512. */
static void check_default(const plan_region_info *r, const plan_machine *m, plan_t *p) {
  harp_error e = {0};
  if (plan_default(r, m, NULL, p, &e)) fail_msg("default for %s on %s: %s", r->name, m->name, err_text(&e));
  harp_error_clear(&e);
  if (plan_validate(p, r, m, NULL, &e)) fail_msg("default does not validate: %s", err_text(&e));
  assert_int_equal(p->arch, m->arch);
  char *j = NULL;
  plan_t q;
  assert_int_equal(plan_to_json(p, &j, &e), HARP_OK);
  parse_ok(j, PLAN_ARCH_CPU, &q);
  assert_true(plan_equal(p, &q));
  free(j);
  plan_resources res;
  plan_resources_of(p, m, r, &res);
  assert_false(plan_smem_near_limit(&res, m));
  assert_true(res.cta_per_sm >= 1);
}

static void test_default_gemm(void **state) {
  (void)state;
  plan_region_info r = gemm_bias_relu_region(1024, 1024, 1024);
  plan_machine ms[4];
  plan_machine_get(PLAN_ARCH_SM80, &ms[0]);
  plan_machine_get(PLAN_ARCH_SM90, &ms[1]);
  ms[2] = fixed_cpu();
  plan_machine_detect_cpu(&ms[3]);
  for (int i = 0; i < 4; i++) {
    plan_t p;
    check_default(&r, &ms[i], &p);
    assert_int_equal(p.ntile, 3);
    assert_string_equal(p.tile_axes[2], "k");
    assert_int_equal(p.ncache, 2);
    assert_true(p.algo[PLAN_KEY_MATMUL] != PLAN_ALGO_NONE);
    assert_int_equal(p.nepi, 2); /* from the region */
    assert_int_equal(p.nedges, 1);
    /* a tail exactly where a tile does not divide 1024 (the CPU's tiles
     * hold whole 6- or 8-row micro-tiles, so M may have one) */
    int want = 0;
    for (int t = 0; t < p.ntile; t++) want += 1024 % p.tile[t] != 0;
    assert_int_equal(p.npred, want);
    if (i < 2) assert_int_equal(p.npred, 0);
    assert_string_equal(p.vec_axis, "n.i.i");
    if (i < 2) {
      assert_int_equal(p.vec_width, 8);
      assert_int_equal(p.nbind, 4); /* m.o n.o block, m.i.o n.i.o warp */
    } else {
      assert_int_equal(p.vec_width, ms[i].simd_bytes / 4);
      assert_int_equal(p.nbind, 2); /* only blocks on the CPU */
    }
  }
}

/* GPU split-K: the default plan names its slice count, chosen among the
 * powers of two by the cost model (atomics against filled SMs): the skinny
 * shapes measured on an H100 split (128x128x32768 best 64 ways, 256x256x16384
 * 16 ways), 1024x1024x4096 and a square 2048 GEMM do not; never serial or
 * reduce by default on a GPU. */
static void test_default_splitk(void **state) {
  (void)state;
  const plan_machine *m = plan_machine_gpu(PLAN_ARCH_SM90);
  static const struct {
    int64_t M, N, K;
    int want;
  } cases[] = {{128, 128, 32768, 64}, {256, 256, 16384, 16}, {1024, 1024, 4096, 0}, {2048, 2048, 2048, 0}};
  for (int i = 0; i < 4; i++) {
    plan_region_info r = gemm_region(cases[i].M, cases[i].N, cases[i].K);
    plan_t p;
    check_default(&r, m, &p);
    if (cases[i].want) {
      assert_int_equal(p.algo[PLAN_KEY_MATMUL], PLAN_ALGO_SPLITK_PARALLEL);
      assert_int_equal(p.splitk, cases[i].want);
    } else {
      assert_false(plan_algo_is_splitk(p.algo[PLAN_KEY_MATMUL]));
    }
  }
  /* the slice count survives the JSON round trip (check_default) and bounds
   * the factor the generator reads */
  plan_region_info r = gemm_region(128, 128, 32768);
  plan_t p;
  check_default(&r, m, &p);
  plan_resources res;
  plan_resources_of(&p, m, &r, &res);
  assert_int_equal(plan_splitk_factor(&p, &r, m, &res), 64);
}

/* Ragged sizes get predicate_tail on exactly the axes that need it. */
static void test_default_tails(void **state) {
  (void)state;
  plan_region_info r = gemm_region(1000, 1024, 1000);
  plan_t p;
  check_default(&r, plan_machine_gpu(PLAN_ARCH_SM80), &p);
  bool m = false, n = false, k = false;
  for (int i = 0; i < p.npred; i++) {
    m |= !strcmp(p.pred[i], "m.i.i");
    n |= !strcmp(p.pred[i], "n.i.i");
    k |= !strcmp(p.pred[i], "k.i.i");
  }
  assert_true(m && !n);
  assert_int_equal(k, 1000 % p.tile[2] != 0);
  /* a tiny GEMM: every tile is larger than the problem */
  r = gemm_region(3, 5, 7);
  check_default(&r, plan_machine_gpu(PLAN_ARCH_SM90), &p);
  assert_int_equal(p.npred, 3);
}

/* AVX2's 16 registers: the micro-tiles of at least 8 accumulators that fit
 * with the epilogue, 5x16 and 4x16 (2x16's 4 accumulators wait on the FMA
 * latency: not offered while a larger one fits). */
static void test_enumerate_avx2(void **state) {
  (void)state;
  plan_region_info r = gemm_region(1024, 1024, 1024);
  r.nepi = 1;
  plan_machine m = fixed_cpu();
  m.simd_bytes = 32, m.regs_per_thread_max = m.regs_per_sm = 16;
  plan_t pts[PLAN_TUNE_POINTS];
  int n = 0;
  harp_error e = {0};
  assert_int_equal(plan_enumerate(&r, &m, NULL, pts, NULL, PLAN_TUNE_POINTS, &n, &e), HARP_OK);
  bool five = false, four = false;
  for (int i = 0; i < n; i++) {
    if (pts[i].warp_m * (pts[i].warp_n / 8) < 8) fail_msg("point %d: %dx%d", i, pts[i].warp_m, pts[i].warp_n);
    five |= pts[i].warp_m == 5 && pts[i].warp_n == 16, four |= pts[i].warp_m == 4 && pts[i].warp_n == 16;
  }
  assert_true(five && four);
}

/* The search space of a 1024^3 GEMM: 10-20 points after pruning, each valid,
 * ranked by time_est, no two alike, none above 80% of shared memory. */
static void test_enumerate_gemm(void **state) {
  (void)state;
  plan_region_info r = gemm_region(1024, 1024, 1024);
  plan_machine ms[3];
  plan_machine_get(PLAN_ARCH_SM80, &ms[0]);
  plan_machine_get(PLAN_ARCH_SM90, &ms[1]);
  ms[2] = fixed_cpu();
  for (int mi = 0; mi < 3; mi++) {
    plan_t pts[PLAN_TUNE_POINTS];
    plan_cost costs[PLAN_TUNE_POINTS];
    int n = 0;
    harp_error e = {0};
    assert_int_equal(plan_enumerate(&r, &ms[mi], NULL, pts, costs, PLAN_TUNE_POINTS, &n, &e), HARP_OK);
    /* the CPU: 2 blockings x 4 micro-tiles, one prefetch distance */
    bool cpu = ms[mi].arch == PLAN_ARCH_CPU;
    if (cpu ? n != 8 : n < 10 || n > 20) fail_msg("%s: %d points", ms[mi].name, n);
    bool algos[PLAN_ALGO_COUNT] = {0}, stages[4] = {0}, kcs[2] = {0}, tiles[4] = {0};
    for (int i = 0; i < n; i++) {
      if (plan_validate(&pts[i], &r, &ms[mi], NULL, &e)) fail_msg("point %d: %s", i, err_text(&e));
      assert_false(plan_smem_near_limit(&costs[i].res, &ms[mi]));
      if (i) assert_true(costs[i - 1].rank_time <= costs[i].rank_time);
      for (int j = 0; j < i; j++) assert_false(plan_equal(&pts[i], &pts[j]));
      plan_cost c;
      assert_int_equal(plan_cost_of(&pts[i], &r, &ms[mi], &c, &e), HARP_OK);
      assert_true(c.time_est == costs[i].time_est);
      algos[pts[i].algo[PLAN_KEY_MATMUL]] = true;
      stages[pts[i].stages] = true;
      kcs[0] |= pts[i].tile[2] == 256, kcs[1] |= pts[i].tile[2] == 64;
      static const int mk[4][2] = {{6, 64}, {8, 48}, {6, 32}, {4, 48}};
      for (int t = 0; t < 4; t++) tiles[t] |= pts[i].warp_m == mk[t][0] && pts[i].warp_n == mk[t][1];
    }
    if (cpu) /* the micro-tiles 6x64, 8x48, 6x32, 4x48 at kc 256 and 64 */
      assert_true(stages[2] && !stages[3] && kcs[0] && kcs[1] && tiles[0] && tiles[1] && tiles[2] && tiles[3]);
    else assert_true(stages[2] && stages[3]);
    /* the default is the first point */
    plan_t d;
    assert_int_equal(plan_default(&r, &ms[mi], NULL, &d, &e), HARP_OK);
    assert_true(plan_equal(&d, &pts[0]));
    /* a smaller cap keeps the best ones */
    plan_t few[3];
    int n3 = 0;
    assert_int_equal(plan_enumerate(&r, &ms[mi], NULL, few, NULL, 3, &n3, &e), HARP_OK);
    assert_int_equal(n3, 3);
    for (int i = 0; i < 3; i++) assert_true(plan_equal(&few[i], &pts[i]));
    if (mi < 2) assert_true(algos[PLAN_ALGO_IMPLICIT_GEMM]);
    /* a backend without split-K restricts the space */
    plan_search_opts only = {.algo_mask = 1u << PLAN_ALGO_IMPLICIT_GEMM};
    assert_int_equal(plan_enumerate(&r, &ms[mi], &only, pts, NULL, PLAN_TUNE_POINTS, &n, &e), HARP_OK);
    assert_true(n >= 1);
    for (int i = 0; i < n; i++) assert_int_equal(pts[i].algo[PLAN_KEY_MATMUL], PLAN_ALGO_IMPLICIT_GEMM);
    assert_int_equal(plan_default(&r, &ms[mi], &only, &d, &e), HARP_OK);
    assert_true(plan_equal(&d, &pts[0]));
    plan_search_opts none = {.algo_mask = 1u << PLAN_ALGO_WINOGRAD_3X3}; /* no conv here: nothing is left */
    assert_int_equal(plan_enumerate(&r, &ms[mi], &none, pts, NULL, PLAN_TUNE_POINTS, &n, &e), HARP_E_UNSUPPORTED);
    harp_error_clear(&e);
  }
}

static plan_region_info region(const char *name, plan_pattern pat, int n, const plan_axis_info *axes) {
  plan_region_info r;
  memset(&r, 0, sizeof r);
  r.name = name;
  r.pattern = pat;
  r.naxes = n;
  for (int i = 0; i < n; i++) r.axes[i] = axes[i];
  r.in_dtype = r.out_dtype = TINY_FP16;
  r.acc_dtype = TINY_FP32;
  return r;
}

static void all_machines(const plan_region_info *r, plan_t out[3]) {
  plan_machine cpu = fixed_cpu();
  check_default(r, plan_machine_gpu(PLAN_ARCH_SM80), &out[0]);
  check_default(r, plan_machine_gpu(PLAN_ARCH_SM90), &out[1]);
  check_default(r, &cpu, &out[2]);
}

static void test_default_other_patterns(void **state) {
  (void)state;
  plan_t p[3];
  /* batched matmul: the batch axis goes to block.z */
  plan_axis_info bmm[] = {{"b", 8, false, 0}, {"m", 512, false, 0}, {"n", 512, false, 0}, {"k", 256, true, 0}};
  plan_region_info r = region("bmm", PLAN_PAT_MATMUL, 4, bmm);
  all_machines(&r, p);
  for (int i = 0; i < 3; i++) {
    bool z = false;
    for (int j = 0; j < p[i].nbind; j++) z |= p[i].bind[j].target == PLAN_T_BLOCK_Z && !strcmp(p[i].bind[j].axis, "b");
    assert_true(z);
  }
  /* two batch axes are fused first */
  plan_axis_info bh[] = {{"b", 2, false, 0}, {"h", 12, false, 0}, {"m", 256, false, 0}, {"n", 256, false, 0},
                         {"k", 64, true, 0}};
  r = region("bhmm", PLAN_PAT_MATMUL, 5, bh);
  all_machines(&r, p);
  assert_int_equal(p[0].nfuse, 1);
  assert_string_equal(p[0].fuse[0].to, "b_h");
  /* matrix-vector: one parallel axis, tiled [M, K] like a row reduction */
  plan_axis_info gemv[] = {{"m", 4096, false, 0}, {"k", 4096, true, 0}};
  r = region("gemv", PLAN_PAT_MATMUL, 2, gemv);
  all_machines(&r, p);
  for (int i = 0; i < 3; i++) {
    assert_int_equal(p[i].ntile, 2);
    assert_string_equal(p[i].tile_axes[1], "k");
    assert_int_equal(p[i].algo[PLAN_KEY_MATMUL], PLAN_ALGO_IMPLICIT_GEMM);
  }
  plan_t three;
  parse_ok("split m 64", PLAN_ARCH_SM80, &three);
  harp_error e = {0};
  assert_int_equal(plan_validate(&three, &r, plan_machine_gpu(PLAN_ARCH_SM80), NULL, &e), HARP_E_INVALID_ARG);
  assert_non_null(strstr(e.msg, "tiles [M, K]"));
  parse_ok("split k 64; split m 64", PLAN_ARCH_SM80, &three);
  harp_error_clear(&e);
  assert_int_equal(plan_validate(&three, &r, plan_machine_gpu(PLAN_ARCH_SM80), NULL, &e), HARP_E_INVALID_ARG);
  assert_non_null(strstr(e.msg, "tile[0] ('k') is a reduction axis"));
  /* attention: M = queries, N = keys (reduced by softmax), K = head dim */
  plan_axis_info att[] = {{"b", 4, false, 0},
                          {"h", 8, false, 0},
                          {"q", 1024, false, PLAN_ROLE_M},
                          {"s", 1024, true, PLAN_ROLE_N},
                          {"d", 64, true, PLAN_ROLE_K}};
  r = region("attention", PLAN_PAT_ATTENTION, 5, att);
  all_machines(&r, p);
  assert_int_equal(p[0].algo[PLAN_KEY_ATTENTION], PLAN_ALGO_STREAMING_SOFTMAX_2PASS);
  /* conv as implicit GEMM: M = N*OH*OW, N = OC, K = IC*KH*KW, 3x3 window */
  plan_axis_info conv[] = {{"npq", 8 * 56 * 56, false, 0}, {"oc", 64, false, 0}, {"crs", 64 * 9, true, 0}};
  r = region("conv3x3", PLAN_PAT_CONV, 3, conv);
  r.conv_kh = r.conv_kw = 3;
  all_machines(&r, p);
  for (int i = 0; i < 3; i++)
    assert_true(p[i].algo[PLAN_KEY_CONV] == PLAN_ALGO_IMPLICIT_GEMM || p[i].algo[PLAN_KEY_CONV] == PLAN_ALGO_WINOGRAD_3X3);
  /* ... but a plan a backend uses names a kernel it has (issue 27: the GPU
   * default said winograd_3x3 while implicit GEMM ran): test_backend_defaults */
  r.conv_kh = r.conv_kw = 1; /* 1x1: no winograd */
  all_machines(&r, p);
  for (int i = 0; i < 3; i++) assert_int_equal(p[i].algo[PLAN_KEY_CONV], PLAN_ALGO_IMPLICIT_GEMM);
  /* elementwise 2-D and 1-D (a prime length needs a tail), a row reduction */
  plan_axis_info ew[] = {{"i0", 4096, false, 0}, {"i1", 4096, false, 0}};
  r = region("ewise", PLAN_PAT_EWISE, 2, ew);
  all_machines(&r, p);
  for (int i = 0; i < 3; i++) {
    assert_int_equal(p[i].ntile, 2);
    assert_int_equal(p[i].ncache, 0);
    assert_string_equal(p[i].vec_axis, "i1.i.i");
    assert_int_equal(p[i].algo[0] + p[i].algo[1] + p[i].algo[2], 0);
  }
  plan_axis_info ew1[] = {{"i0", 1000003, false, 0}};
  r = region("ewise1d", PLAN_PAT_EWISE, 1, ew1);
  all_machines(&r, p);
  for (int i = 0; i < 3; i++) assert_int_equal(p[i].npred, 1);
  plan_axis_info red[] = {{"row", 4096, false, 0}, {"col", 1000, true, 0}};
  r = region("softmax_sum", PLAN_PAT_REDUCE, 2, red);
  all_machines(&r, p);
  for (int i = 0; i < 3; i++) {
    assert_string_equal(p[i].tile_axes[0], "row");
    assert_string_equal(p[i].tile_axes[1], "col");
  }
  plan_axis_info full[] = {{"i", 1 << 20, true, 0}};
  r = region("sum_all", PLAN_PAT_REDUCE, 1, full);
  all_machines(&r, p);
}

/* --plan: the override is filled from the region and validated; errors point
 * into its text. */
/* The CPU's default conv plan: Winograd where cgen_wino measured faster
 * than the direct kernel (a 3x3 window, stride 1, fp32, from 28x28 outputs
 * up; cost.c), never at 7x7, at stride 2 or for half storage; and the kernel
 * generated for such a spec is Winograd (tests/py/test_winograd.py checks
 * that a compiled model's C and plan.json say so). */
static void test_cpu_winograd(void **state) {
  (void)state;
  plan_machine cpu = fixed_cpu();
  plan_search_opts o = {.algo_mask = rt_cpu_algo_mask()};
  plan_axis_info conv[] = {{"npq", 56 * 56, false, 0}, {"oc", 64, false, 0}, {"crs", 64 * 9, true, 0}};
  plan_region_info r = region("conv3x3", PLAN_PAT_CONV, 3, conv);
  r.in_dtype = r.out_dtype = TINY_FP32;
  r.conv_kh = r.conv_kw = 3, r.conv_sh = r.conv_sw = r.conv_dh = r.conv_dw = 1, r.conv_oh = r.conv_ow = 56;
  static const struct {
    int64_t px;
    int stride;
    tiny_dtype dt;
    plan_algo want;
  } C[] = {{56, 1, TINY_FP32, PLAN_ALGO_WINOGRAD_3X3}, {28, 1, TINY_FP32, PLAN_ALGO_WINOGRAD_3X3},
           {7, 1, TINY_FP32, PLAN_ALGO_IMPLICIT_GEMM}, {14, 1, TINY_FP32, PLAN_ALGO_IMPLICIT_GEMM},
           {56, 2, TINY_FP32, PLAN_ALGO_IMPLICIT_GEMM}, {56, 1, TINY_FP16, PLAN_ALGO_IMPLICIT_GEMM}};
  for (int i = 0; i < (int)(sizeof C / sizeof C[0]); i++) {
    r.conv_oh = r.conv_ow = C[i].px;
    r.axes[0].size = C[i].px * C[i].px;
    r.conv_sh = r.conv_sw = C[i].stride;
    r.in_dtype = r.out_dtype = C[i].dt;
    plan_t p;
    harp_error e = {0};
    assert_int_equal(plan_default(&r, &cpu, &o, &p, &e), HARP_OK);
    if (p.algo[PLAN_KEY_CONV] != C[i].want)
      fail_msg("case %d: %s, want %s", i, plan_algo_name(p.algo[PLAN_KEY_CONV]), plan_algo_name(C[i].want));
    if (C[i].want != PLAN_ALGO_WINOGRAD_3X3) continue;
    cgen_conv_spec cs;
    cgen_conv_spec_init(&cs, 1, 64, C[i].px, C[i].px, 64, 3, 3, TINY_FP32);
    for (int k = 0; k < 4; k++) cs.pad[k] = 1;
    cs.tune.conv_algo = CGEN_CONV_WINO;
    cs.tune.isa_mask = 1u << CGEN_ISA_AVX512;
    ut_str src;
    ut_str_init(&src);
    assert_int_equal(cgen_conv(&e, &cs, "k", &src), HARP_OK);
    assert_non_null(strstr(src.buf, C[i].px == 56 ? "winograd F(4x4,3x3)" : "winograd F(2x2,3x3)"));
    ut_str_free(&src);
  }
  /* a Winograd plan on a stride-2 window does not validate */
  plan_t w;
  parse_ok("split npq 64; split oc 64; split crs 64;\nalgo_choice conv winograd_3x3;\n", PLAN_ARCH_CPU, &w);
  r.conv_sh = r.conv_sw = 2;
  harp_error e = {0};
  assert_int_equal(plan_validate(&w, &r, &cpu, NULL, &e), HARP_E_INVALID_ARG);
  assert_non_null(strstr(e.msg, "stride 1"));
}

static void test_for_region(void **state) {
  (void)state;
  plan_region_info r = gemm_bias_relu_region(1024, 1024, 1024);
  const plan_machine *m = plan_machine_gpu(PLAN_ARCH_SM80);
  plan_t o, out;
  harp_error e = {0};
  parse_ok(SEED_DSL, PLAN_ARCH_SM80, &o);
  assert_int_equal(plan_for_region(&r, m, NULL, &o, NULL, &out, &e), HARP_OK);
  char *j = NULL;
  assert_int_equal(plan_to_json(&out, &j, &e), HARP_OK);
  assert_string_equal(j, SEED_JSON);
  free(j);
  assert_int_equal(plan_for_region(&r, m, NULL, NULL, NULL, &out, &e), HARP_OK);
  plan_t d;
  assert_int_equal(plan_default(&r, m, NULL, &d, &e), HARP_OK);
  assert_true(plan_equal(&out, &d));
  /* an override for another arch, or with another epilogue, is refused */
  const char *txt = "split m 128; split n 64; split k 64\nepilogue bias silu\n";
  parse_ok(txt, PLAN_ARCH_SM80, &o);
  assert_int_equal(plan_for_region(&r, m, NULL, &o, &(plan_src){"o.plan", txt}, &out, &e), HARP_E_INVALID_ARG);
  assert_int_equal(e.line, 2);
  assert_int_equal(e.col, 1);
  assert_non_null(strstr(e.msg, "bias relu"));
  harp_error_clear(&e);
  assert_int_equal(plan_for_region(&r, plan_machine_gpu(PLAN_ARCH_SM90), NULL, &o, NULL, &out, &e), HARP_E_INVALID_ARG);
  harp_error_clear(&e);
  /* a region the space cannot serve */
  plan_region_info bad = gemm_region(1024, 1024, 1024);
  bad.naxes = 0;
  assert_int_equal(plan_default(&bad, m, NULL, &out, &e), HARP_E_UNSUPPORTED);
}

/* The default plan each backend uses names an algorithm that backend runs:
 * the CUDA target's (cuda_plan_algo_mask) is implicit GEMM for every conv
 * (GPU Winograd is unmeasured: a --plan's choice only, through
 * cuda_plan_explicit_algo_mask), and cuda_tune_from_plan reads a plan
 * naming Winograd as Winograd (tune.winograd), never as implicit GEMM
 * under its name.  Shapes: fp16 3x3 convs of ResNet / VGG size (the cost
 * model picks winograd_3x3 for some when unrestricted). */
static void test_backend_defaults(void **state) {
  (void)state;
  static const int64_t shapes[][4] = {{8, 56, 64, 64}, {8, 14, 512, 512}, {32, 14, 256, 256}, {1, 7, 512, 512}};
  plan_search_opts gpu = {.algo_mask = cuda_plan_algo_mask(), .backend = "cuda"};
  plan_search_opts gpu_plan = gpu; /* what the CUDA target passes: a --plan may name Winograd */
  gpu_plan.explicit_mask = cuda_plan_explicit_algo_mask();
  plan_search_opts cpu = {.algo_mask = rt_cpu_algo_mask(), .backend = "cpu"};
  plan_machine host = fixed_cpu();
  int unrestricted_winograd = 0;
  for (int i = 0; i < UT_ARRAY_LEN(shapes); i++) {
    int64_t n = shapes[i][0], hw = shapes[i][1], c = shapes[i][2], oc = shapes[i][3];
    plan_axis_info conv[] = {{"m", n * hw * hw, false, 0}, {"n", oc, false, 0}, {"k", c * 9, true, 0}};
    plan_region_info r = region("conv3x3", PLAN_PAT_CONV, 3, conv);
    r.conv_kh = r.conv_kw = 3;
    for (int a = 0; a < 2; a++) {
      const plan_machine *m = plan_machine_gpu(a ? PLAN_ARCH_SM90 : PLAN_ARCH_SM80);
      plan_t p, any;
      harp_error e = {0};
      cuda_tune t;
      assert_int_equal(plan_default(&r, m, &gpu, &p, &e), HARP_OK);
      assert_int_equal(p.algo[PLAN_KEY_CONV], PLAN_ALGO_IMPLICIT_GEMM);
      assert_int_equal(cuda_tune_from_plan(&e, &p, plan_splitk_factor(&p, &r, m, &(plan_resources){0}), &t), HARP_OK);
      assert_int_equal(plan_default(&r, m, NULL, &any, &e), HARP_OK);
      bool wino = any.algo[PLAN_KEY_CONV] == PLAN_ALGO_WINOGRAD_3X3;
      unrestricted_winograd += wino;
      /* the reader runs what the plan names: Winograd (the tile the backend's choice) or implicit GEMM */
      assert_int_equal(cuda_tune_from_plan(&e, &any, 1, &t), HARP_OK);
      assert_int_equal(t.winograd, wino ? -1 : 0);
      harp_error_clear(&e);
      /* a --plan naming Winograd: outside the default mask a located
       * Unsupported; with the CUDA target's explicit mask, read as Winograd */
      plan_t ov;
      parse_ok("split m 128; split n 64; split k 32; predicate_tail m.i.i n.i.i k.i.i; algo_choice conv winograd_3x3",
               a ? PLAN_ARCH_SM90 : PLAN_ARCH_SM80, &ov);
      assert_int_equal(plan_for_region(&r, m, &gpu, &ov, NULL, &p, &e), HARP_E_UNSUPPORTED);
      assert_non_null(strstr(e.msg, "winograd_3x3 is not implemented on the cuda backend"));
      harp_error_clear(&e);
      assert_int_equal(plan_for_region(&r, m, &gpu_plan, &ov, NULL, &p, &e), HARP_OK);
      assert_int_equal(p.algo[PLAN_KEY_CONV], PLAN_ALGO_WINOGRAD_3X3);
      assert_int_equal(cuda_tune_from_plan(&e, &p, 1, &t), HARP_OK);
      assert_int_equal(t.winograd, -1);
      assert_int_equal(plan_default(&r, m, &gpu_plan, &p, &e), HARP_OK); /* never the default */
      assert_int_equal(p.algo[PLAN_KEY_CONV], PLAN_ALGO_IMPLICIT_GEMM);
    }
    plan_t p;
    harp_error e = {0};
    assert_int_equal(plan_default(&r, &host, &cpu, &p, &e), HARP_OK);
    assert_int_equal(p.algo[PLAN_KEY_CONV], PLAN_ALGO_IMPLICIT_GEMM);
  }
  assert_true(unrestricted_winograd > 0); /* the restriction is what keeps Winograd out */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gpu_machines),   cmocka_unit_test(test_cpu_detection),
      cmocka_unit_test(test_gemm_view),      cmocka_unit_test(test_default_gemm),
      cmocka_unit_test(test_default_tails),  cmocka_unit_test(test_enumerate_gemm), cmocka_unit_test(test_enumerate_avx2),
      cmocka_unit_test(test_default_splitk),
      cmocka_unit_test(test_default_other_patterns), cmocka_unit_test(test_backend_defaults), cmocka_unit_test(test_for_region),
      cmocka_unit_test(test_cpu_winograd),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
