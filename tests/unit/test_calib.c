/* test_calib.c — the CPU calibration (docs/plan.md §19): the file's round
 * trip and every kind of bad input (located errors, never a crash), the
 * runtime's load / measure / re-measure of a bad file, the knob cpu_calib,
 * the calibrated cost model (edge waste, the micro-kernel's measured rate,
 * the DRAM floor of operands beyond the caches, transposed and direct 1x1
 * convs, tile-independent convolutions, Winograd's per-call filter
 * transform at the calibrated rate), the '#@' figures an older harp reads as
 * comments and their upgrade of an older file, and the tuner's choice of points
 * (rt_tune_pick: every algorithm's best is measured). */
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harp/knobs.h"
#include "harp/tune.h"
#include "plan_test_util.h"
#include "runtime/calib.h"
#include "testutil.h"
#include "util/util.h"

#define MACHINE "cpu:test-cpu"

/* A calibration whose micro-kernels all run at `rate`, kc 128 at `slow`. */
static plan_calib sample_calib(double rate, double slow) {
  plan_calib c;
  memset(&c, 0, sizeof c);
  c.valid = true;
  c.mem_gbs = 20, c.pack_gbs = 50, c.task_us = 5;
  static const int tiles[2][2] = {{6, 64}, {8, 48}}, kcs[3] = {128, 256, 384}, ncs[2] = {256, 512};
  for (int t = 0; t < 2; t++)
    for (int k = 0; k < 3; k++)
      for (int n = 0; n < 2; n++)
        c.mk[c.nmk++] = (plan_calib_mk){tiles[t][0], tiles[t][1], kcs[k], ncs[n], kcs[k] == 128 ? slow : rate};
  return c;
}

static void test_roundtrip(void **state) {
  (void)state;
  plan_calib c = sample_calib(123.25, 61.5), back;
  plan_calib_add_wino(&c, 3136, 576, 0.68);
  plan_calib_add_wino(&c, 196, 2304, 1.25);
  c.wf_ns[0] = 0.25, c.wf_ns[1] = 0.5;
  char *text = plan_calib_format(&c, MACHINE);
  assert_non_null(text);
  harp_error e = {0};
  assert_ok(&e, plan_calib_parse(text, "c.txt", MACHINE, &back, &e));
  assert_true(back.valid);
  assert_int_equal(back.nmk, c.nmk);
  assert_true(back.mem_gbs == 20 && back.pack_gbs == 50 && back.task_us == 5);
  assert_true(back.wf_ns[0] == 0.25 && back.wf_ns[1] == 0.5);
  for (int i = 0; i < c.nmk; i++) {
    assert_int_equal(back.mk[i].mr, c.mk[i].mr);
    assert_int_equal(back.mk[i].nr, c.mk[i].nr);
    assert_int_equal(back.mk[i].kc, c.mk[i].kc);
    assert_int_equal(back.mk[i].nc, c.mk[i].nc);
    assert_true(back.mk[i].gflops == c.mk[i].gflops);
  }
  /* the nearest measured (kc, nc) of the micro-tile; none: 0 */
  assert_true(plan_calib_rate(&back, 6, 64, 128, 512) == 61.5);
  assert_true(plan_calib_rate(&back, 6, 64, 300, 600) == 123.25);
  assert_true(plan_calib_rate(&back, 4, 32, 256, 512) == 0);
  assert_int_equal(back.nwino, 2);
  assert_true(plan_calib_wino_speedup(&back, 3136, 576) == 0.68);
  assert_true(plan_calib_wino_speedup(&back, 196, 2000) == 1.25); /* nearest */
  /* the same shape again replaces its entry; a full table drops the oldest */
  plan_calib_add_wino(&back, 3136, 576, 0.7);
  assert_int_equal(back.nwino, 2);
  assert_true(plan_calib_wino_speedup(&back, 3136, 576) == 0.7);
  for (int i = 0; i < PLAN_CALIB_WINO; i++) plan_calib_add_wino(&back, 10 + i, 9, 1 + i);
  assert_int_equal(back.nwino, PLAN_CALIB_WINO);
  assert_true(plan_calib_wino_speedup(&back, 10 + PLAN_CALIB_WINO - 1, 9) == PLAN_CALIB_WINO);
  assert_true(plan_calib_wino_speedup(&back, 3136, 576) != 0.7); /* the oldest went */
  /* the machine line is checked only when a machine is given */
  assert_ok(&e, plan_calib_parse(text, "c.txt", NULL, &back, &e));
  free(text);
}

static void test_bad_text(void **state) {
  (void)state;
  static const char head[] = "harp-calibration 1\nmachine " MACHINE "\nmem_gbs 20\npack_gbs 50\ntask_us 5\n";
  static const char mk[] = "mk 6 64 256 512 100\n";
  /* text after the header, the line of the error (0: the file as a whole) */
  static const struct {
    const char *tail;
    int line;
    const char *what;
  } cases[] = {
      {"", 0, "no 'mk' line"},
      {"mk 6 64 256 512\n", 6, "mk:"},
      {"mk 6 64 256 512 100 7\n", 6, "mk:"},
      {"mk 6.5 64 256 512 100\n", 6, "whole numbers"},
      {"mk 6 64 256 512 -3\n", 6, "mk:"},
      {"mk 6 64 256 512 nan\n", 6, "mk:"},
      {"mk 0 64 256 512 100\n", 6, "mk:"},
      {"mem_gbs 30\n", 6, "given twice"},
      {"colour blue\n", 6, "unknown key 'colour'"},
      {"mk 6 64 256 512 1e999\n", 6, "mk:"},
      {"wino 3136 576\n", 6, "wino:"},
      {"wino 3136.5 576 1\n", 6, "wino:"},
      {"wino 3136 576 0\n", 6, "wino:"},
      {"#@ wfilter_ns 0.2\n", 6, "wfilter_ns:"},
      {"#@ wfilter_ns 0.2 0\n", 6, "wfilter_ns:"},
      {"#@ wfilter_ns 0.2 0.4 9\n", 6, "wfilter_ns:"},
      {"#@ wfilter_ns 0.2 0.4\n#@ wfilter_ns 0.2 0.4\n", 7, "given twice"},
      {"wfilter_ns 0.2 0.4\n", 6, "is a '#@' line"},
      {"#@ mem_gbs 3\n", 6, "unknown '#@' key 'mem_gbs'"},
  };
  harp_error e = {0};
  plan_calib c;
  char text[2048];
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    snprintf(text, sizeof text, "%s%s%s", head, cases[i].line ? mk : "", cases[i].tail);
    memset(&e, 0, sizeof e);
    if (plan_calib_parse(text, "c.txt", MACHINE, &c, &e) != HARP_E_PARSE)
      fail_msg("case %zu accepted: %s", i, text);
    if (cases[i].line && e.line != cases[i].line + 1) fail_msg("case %zu: line %d, want %d", i, e.line, cases[i].line + 1);
    if (!strstr(e.msg, cases[i].what)) fail_msg("case %zu: '%s' does not say '%s'", i, e.msg, cases[i].what);
    assert_false(c.valid);
  }
  static const struct {
    const char *text, *what;
  } whole[] = {
      {"", "no 'mem_gbs' line"},
      {"harp-calibration 2\n", "version"},
      {"harp-calibration 1\nmachine cpu:other\n", "another machine"},
      {"mem_gbs 0\n", "mem_gbs: expected one number"},
      {"mem_gbs 1 2\n", "mem_gbs: expected one number"},
      {"mem_gbs inf\n", "mem_gbs: expected one number"},
      {"task_us 1x\n", "task_us: expected one number"},
      {"harp-calibration 1\nmem_gbs 20\npack_gbs 50\ntask_us 5\nmk 6 64 256 512 100\n", "no 'machine' line"},
  };
  for (size_t i = 0; i < sizeof whole / sizeof whole[0]; i++) {
    memset(&e, 0, sizeof e);
    if (plan_calib_parse(whole[i].text, "c.txt", MACHINE, &c, &e) != HARP_E_PARSE) fail_msg("accepted: %s", whole[i].text);
    if (!strstr(e.msg, whole[i].what)) fail_msg("'%s' does not say '%s'", e.msg, whole[i].what);
  }
  /* a line too long, and more mk lines than fit */
  char *big = calloc(1, 64 * 1024);
  assert_non_null(big);
  strcpy(big, head);
  memset(big + strlen(head), 'x', 600);
  memset(&e, 0, sizeof e);
  assert_int_equal(plan_calib_parse(big, "c.txt", MACHINE, &c, &e), HARP_E_PARSE);
  assert_non_null(strstr(e.msg, "longer than"));
  strcpy(big, head);
  for (int i = 0; i <= PLAN_CALIB_MK; i++) strcat(big, mk);
  memset(&e, 0, sizeof e);
  assert_int_equal(plan_calib_parse(big, "c.txt", MACHINE, &c, &e), HARP_E_PARSE);
  assert_non_null(strstr(e.msg, "more than"));
  free(big);
}

static void spit(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(data, 1, n, f), n);
  fclose(f);
}

/* Files: missing, bad (reported, measured again, replaced), good (read),
 * a NUL byte; the compile's reading of it under the knob. */
static void test_files(void **state) {
  (void)state;
  char dir[256];
  snprintf(dir, sizeof dir, "/tmp/harp_calib_XXXXXX");
  assert_non_null(mkdtemp(dir));
  plan_machine m;
  plan_machine_detect_cpu(&m);
  char id[RT_MACHINE_ID_MAX];
  rt_machine_id(&m, id, sizeof id);
  char *path = rt_calib_path(dir, id);
  assert_non_null(path);
  assert_non_null(strstr(path, "/calib/cpu-"));
  harp_error e = {0};
  plan_calib c;
  bool found = true;
  assert_ok(&e, rt_calib_load(&e, path, id, &c, &found));
  assert_false(found);
  rt_knobs k;
  rt_knobs_init(&k);
  snprintf(k.cache_dir, sizeof k.cache_dir, "%s", dir);
  rt_calib_apply(&m, &k); /* no file: uncalibrated */
  assert_false(m.calib.valid);
  /* a bad file: an error with its line, ignored by a compile, measured
   * again by ensure */
  char sub[300];
  snprintf(sub, sizeof sub, "%s/calib", dir);
  assert_int_equal(mkdir(sub, 0700), 0);
  spit(path, "harp-calibration 1\nmem_gbs banana\n", 34);
  assert_int_equal(rt_calib_load(&e, path, id, &c, &found), HARP_E_PARSE);
  assert_true(found);
  assert_int_equal(e.line, 2);
  rt_calib_apply(&m, &k);
  assert_false(m.calib.valid);
  rt_calib_result r;
  memset(&e, 0, sizeof e);
  if (rt_calib_mk_lanes(m.avx512, m.avx2) == 0) { /* not x86-64 AVX2: no micro-kernel to time */
    assert_int_equal(rt_calib_ensure(&e, dir, false, &m, &r), HARP_E_UNSUPPORTED);
    rt_calib_result_free(&r);
    free(path);
    return;
  }
  assert_ok(&e, rt_calib_ensure(&e, dir, false, &m, &r));
  assert_true(r.measured);
  assert_non_null(strstr(r.why, "mem_gbs"));
  assert_true(m.calib.valid && m.calib.nmk >= 2 && m.calib.mem_gbs > 0 && m.calib.pack_gbs > 0);
  for (int i = 0; i < m.calib.nmk; i++) assert_true(m.calib.mk[i].gflops > 0);
  rt_calib_result_free(&r);
  assert_ok(&e, rt_calib_load(&e, path, id, &c, &found)); /* replaced by a good one */
  assert_true(found && c.valid);
  /* good: read, not measured */
  memset(&m.calib, 0, sizeof m.calib);
  assert_ok(&e, rt_calib_ensure(&e, dir, false, &m, &r));
  assert_false(r.measured);
  assert_int_equal(r.why[0], 0);
  assert_true(m.calib.valid && m.calib.nmk == c.nmk);
  rt_calib_result_free(&r);
  /* a file from before wfilter_ns: that figure alone measured and added */
  assert_true(c.wf_ns[0] > 0 && c.wf_ns[1] > 0);
  plan_calib old = c;
  old.wf_ns[0] = old.wf_ns[1] = 0;
  old.mem_gbs = 1234.5; /* a figure a full measurement would replace */
  assert_ok(&e, rt_calib_store(&e, path, id, &old));
  char *text = NULL;
  size_t len = 0;
  assert_ok(&e, ut_read_file(&e, path, 1 << 16, &text, &len));
  assert_null(strstr(text, "wfilter_ns"));
  free(text);
  /* and the file with it is one a harp from before it reads: the figure
   * on a line it takes for a comment */
  assert_ok(&e, rt_calib_store(&e, path, id, &c));
  assert_ok(&e, ut_read_file(&e, path, 1 << 16, &text, &len));
  const char *wl = strstr(text, "\n#@ wfilter_ns ");
  assert_non_null(wl);
  assert_null(strstr(wl + 1, "\nwfilter_ns")); /* not also as a plain key */
  free(text);
  assert_ok(&e, rt_calib_store(&e, path, id, &old));
  memset(&m.calib, 0, sizeof m.calib);
  assert_ok(&e, rt_calib_ensure(&e, dir, false, &m, &r));
  assert_true(r.measured);
  assert_true(m.calib.mem_gbs == 1234.5 && m.calib.nmk == c.nmk && m.calib.wf_ns[0] > 0 && m.calib.wf_ns[1] > 0);
  rt_calib_result_free(&r);
  assert_ok(&e, rt_calib_load(&e, path, id, &c, &found));
  assert_true(c.mem_gbs == 1234.5 && fabs(c.wf_ns[0] - m.calib.wf_ns[0]) < 1e-4 && fabs(c.wf_ns[1] - m.calib.wf_ns[1]) < 1e-4);
  rt_calib_apply(&m, &k);
  assert_true(m.calib.valid);
  k.cpu_calib = RT_CPU_CALIB_OFF; /* the knob: the uncalibrated model */
  rt_calib_apply(&m, &k);
  assert_false(m.calib.valid);
  /* a NUL byte */
  spit(path, "harp-calibration 1\n\0mem_gbs 2\n", 30);
  memset(&e, 0, sizeof e);
  assert_int_equal(rt_calib_load(&e, path, id, &c, &found), HARP_E_PARSE);
  assert_non_null(strstr(e.msg, "NUL"));
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
  free(path);
}

/* An fp32 matmul region on fixed_cpu's axes. */
static plan_region_info f32_gemm(int64_t M, int64_t N, int64_t K) {
  plan_region_info r = gemm_region(M, N, K);
  r.in_dtype = r.acc_dtype = r.out_dtype = TINY_FP32;
  return r;
}

/* The estimate of every point of r's search space. */
static int points(const plan_region_info *r, const plan_machine *m, plan_t *pts, plan_cost *costs) {
  int n = 0;
  harp_error e = {0};
  assert_ok(&e, plan_enumerate(r, m, NULL, pts, costs, PLAN_TUNE_POINTS, &n, &e));
  assert_true(n >= 2);
  return n;
}

static void test_calibrated_model(void **state) {
  (void)state;
  plan_machine m = fixed_cpu();
  m.calib = sample_calib(200, 100);
  plan_t pts[PLAN_TUNE_POINTS];
  plan_cost costs[PLAN_TUNE_POINTS];
  /* edge waste: N = 64 is one 6x64 micro-tile column; 8x48 runs its full
   * tile and, for the last 16 columns, the template's one-vector tail kernel
   * (not a padded 48-column tile: 96/64 = 1.5x, as this test once said) */
  plan_region_info r = f32_gemm(480, 64, 512);
  int n = points(&r, &m, pts, costs);
  double t64 = 0, t48 = 0;
  for (int i = 0; i < n; i++) {
    if (pts[i].tile[2] != 256 || pts[i].stages != 2) continue;
    if (pts[i].warp_m == 6 && pts[i].warp_n == 64) t64 = costs[i].time_est;
    if (pts[i].warp_m == 8 && pts[i].warp_n == 48) t48 = costs[i].time_est;
  }
  assert_true(t64 > 0 && t48 > 0);
  /* the tail's 8 FMAs and 9 loads a k step are load-bound: harp tune
   * measured 8x48 at 1.12-1.15x the 6x64's time (2-core EPYC, minima) */
  if (!(t48 > 1.06 * t64 && t48 < 1.3 * t64)) fail_msg("8x48 %.3g s, 6x64 %.3g s", t48, t64);
  assert_int_equal(pts[0].warp_n, 64); /* the default avoids the waste */
  /* the measured rate: kc 64 runs at the rate of the nearest depth timed,
   * kc 128, half that of kc 256 */
  r = f32_gemm(960, 1024, 1024);
  n = points(&r, &m, pts, costs);
  double k128 = 0, k256 = 0;
  for (int i = 0; i < n; i++) {
    if (pts[i].warp_n != 64 || pts[i].stages != 2 || pts[i].tile[1] != 512) continue;
    if (pts[i].tile[2] == 64) k128 = costs[i].time_est;
    if (pts[i].tile[2] == 256 && pts[i].tile[0] == 96) k256 = costs[i].time_est;
  }
  assert_true(k128 > 0 && k256 > 0);
  if (!(k128 > 1.7 * k256)) fail_msg("kc 64 %.3g s, kc 256 %.3g s", k128, k256);
  /* stages (the prefetch distance) are not a measured difference: a tie
   * (the search offers one; a plan may ask for another) */
  for (int i = 0; i < n; i++) assert_int_equal(pts[i].stages, 2);
  plan_t s3 = pts[0];
  s3.stages = 3;
  plan_cost uc;
  harp_error e = {0};
  assert_ok(&e, plan_cost_of(&s3, &r, &m, &uc, &e));
  assert_true(uc.time_est == costs[0].time_est);
  /* about the FLOPs at the measured rate on both cores */
  double ideal = 2.0 * 960 * 1024 * 1024 / (2 * 200e9);
  assert_true(costs[0].time_est > ideal && costs[0].time_est < 1.5 * ideal);
  /* uncalibrated: the formula of §6 (stages differ) */
  plan_machine u = fixed_cpu();
  assert_ok(&e, plan_cost_of(&pts[0], &r, &u, &uc, &e));
  assert_true(uc.time_est != costs[0].time_est);
}

/* The estimate of r's point with tile depth kc and micro-tile width nr
 * (stages 2; the first such point: BM and BN do not change the CPU kernel's
 * work), 0 when the space has none. */
static double point_est(const plan_region_info *r, const plan_machine *m, int64_t kc, int nr) {
  plan_t pts[PLAN_TUNE_POINTS];
  plan_cost costs[PLAN_TUNE_POINTS];
  int n = points(r, m, pts, costs);
  int mr = nr == 48 ? 8 : 6; /* the tiles sample_calib times: 6x64, 8x48 */
  for (int i = 0; i < n; i++)
    if (pts[i].tile[2] == kc && pts[i].warp_n == nr && pts[i].warp_m == mr && pts[i].stages == 2)
      return costs[i].time_est;
  return 0;
}

/* The estimate of r's point of micro-tile mr x nr at tile depth kc. */
static double tile_est(const plan_region_info *r, const plan_machine *m, int mr, int nr, int64_t kc) {
  plan_t pts[PLAN_TUNE_POINTS];
  plan_cost costs[PLAN_TUNE_POINTS];
  int n = points(r, m, pts, costs);
  for (int i = 0; i < n; i++)
    if (pts[i].warp_m == mr && pts[i].warp_n == nr && pts[i].tile[2] == kc) return costs[i].time_est;
  return 0;
}

/* r (a 1x1 conv with the pixels as its plan's M, or a matmul with C
 * unit-stride along M) is estimated as the transposed GEMM t at each of the
 * four micro-tiles (the template runs it transposed at the plan's warp tile
 * and BK), and the micro-tiles do not all tie. */
static void check_transposed(const plan_region_info *r, const plan_region_info *t, const plan_machine *m, const char *what) {
  static const int mk[4][2] = {{6, 64}, {8, 48}, {6, 32}, {4, 48}};
  bool differ = false;
  double first = 0;
  for (int i = 0; i < 4; i++) {
    double a = tile_est(r, m, mk[i][0], mk[i][1], 256), b = tile_est(t, m, mk[i][0], mk[i][1], 256);
    if (!(a > 0 && fabs(a / b - 1) < 1e-12)) fail_msg("%s %dx%d: %.6g s, transposed GEMM %.6g s", what, mk[i][0], mk[i][1], a, b);
    if (i == 0) first = a;
    differ |= a != first;
  }
  if (!differ) fail_msg("%s: the four micro-tiles tie", what);
}

/* Orderings of GEMM plans that the calibrated model gets from the template's
 * own choices (cost_cpu.c), with every micro-kernel at one rate: estimates
 * only, no timing.  Each was measured with harp tune (2-core EPYC, minima). */
static void test_calibrated_gemm_terms(void **state) {
  (void)state;
  plan_machine m = fixed_cpu();
  m.calib = sample_calib(200, 200);
  /* 130^3: the template splits M (each task all 130 columns, a 2-column
   * tail vector), 66 rows a task with 6x64, 72 with 8x48: 6x64 ran
   * 0.0118-0.0119 ms, 8x48 0.0122-0.0124 (a split along N, 128 and 2
   * columns, would have made 8x48's 96 + 34 columns the faster) */
  plan_region_info r = f32_gemm(130, 130, 130);
  double t64 = point_est(&r, &m, 256, 64), t48 = point_est(&r, &m, 256, 48);
  assert_true(t64 > 0 && t48 > 0);
  if (!(t64 < t48)) fail_msg("130^3: 6x64 %.4g s, 8x48 %.4g s", t64, t48);
  /* ... and kc 64 leaves K blocks of 64, 64 and 2: two more passes over C
   * and a call per micro-tile for two k steps (6x64 kc 128, one block of 2
   * more, ran 0.0121-0.0122 ms) */
  double k64 = point_est(&r, &m, 64, 64);
  if (!(k64 > 1.01 * t64)) fail_msg("130^3: kc 64 %.4g s, kc 256 %.4g s", k64, t64);
  /* a call's C tile passes through L2 every K block: 1000x512x50 at kc 64
   * (8 blocks) against 256 (2) ran 10-27% slower (minima, harp tune under
   * load, 02:10 UTC); the per-call steps alone said 5% */
  r = f32_gemm(1000, 50, 512);
  double d256 = point_est(&r, &m, 256, 64), d64 = point_est(&r, &m, 64, 64);
  if (!(d64 > 1.08 * d256 && d64 < 1.3 * d256)) fail_msg("1000x512x50: kc 64 %.4g s, kc 256 %.4g s", d64, d256);
  /* a B that is a model parameter is packed once at model_init, not by
   * every task; an A parameter likewise (then B is packed per task) */
  r = f32_gemm(480, 512, 512);
  double plain = point_est(&r, &m, 256, 64);
  r.b_param = true;
  double b_once = point_est(&r, &m, 256, 64);
  r.a_param = true;
  double a_once = point_est(&r, &m, 256, 64);
  if (!(b_once < 0.99 * plain && a_once < 0.99 * plain)) fail_msg("%.4g %.4g %.4g", plain, b_once, a_once);
  /* M N K under 2^21 with B under 1 MiB: the template runs it on the
   * calling thread alone, so one core's FLOPs */
  r = f32_gemm(96, 96, 96);
  double one = 2.0 * 96 * 96 * 96 / 200e9, small = point_est(&r, &m, 256, 64);
  if (!(small > 0.95 * one && small < 1.6 * one)) fail_msg("96^3: %.4g s, one core %.4g s", small, one);
  /* a 1x1 conv whose plan has the pixels as M runs transposed with the
   * template's own panel, reading BK and the warp tile (its weight, a
   * parameter, is the transposed GEMM's A, packed once) */
  r = f32_gemm(56 * 56, 256, 64);
  r.pattern = PLAN_PAT_CONV;
  r.conv_kh = r.conv_kw = r.conv_sh = r.conv_sw = r.conv_dh = r.conv_dw = 1;
  r.conv_oh = r.conv_ow = 56;
  plan_region_info t = f32_gemm(256, 56 * 56, 64);
  t.a_param = true;
  check_transposed(&r, &t, &m, "1x1 conv 64->256 @56");
}

/* DRAM bounds a GEMM from below only for the operands' bytes that miss the
 * caches: operands that fit run from cache, and their plans keep their
 * order (a calibration taken under load, mem_gbs 4.2 GB/s, tied every plan
 * of 200x256x100 at 0.0913 ms: the bytes at DRAM speed); operands far
 * beyond the caches are bound by it, every plan alike. */
static void test_calibrated_dram_floor(void **state) {
  (void)state;
  plan_machine m = fixed_cpu();
  m.calib = sample_calib(200, 200);
  m.calib.mem_gbs = 4.2;
  plan_region_info r = f32_gemm(200, 256, 100); /* 0.39 MB */
  double bytes = (200.0 * 100 + 100 * 256 + 200 * 256) * 4, floor_s = bytes / 4.2e9;
  double t64 = point_est(&r, &m, 256, 64), t48 = point_est(&r, &m, 256, 48);
  assert_true(t64 > 0 && t48 > 0);
  if (!(t64 < 0.5 * floor_s && t48 < 0.5 * floor_s && t64 != t48))
    fail_msg("200x256x100: 6x64 %.4g s, 8x48 %.4g s, all bytes at DRAM speed %.4g s", t64, t48, floor_s);
  /* 1024^3 (12 MiB) on 1.5 MiB of caches: 1 - 0.75 / 12 of it from DRAM */
  m.l3_bytes = 1024 * 1024, m.l2_bytes = 256 * 1024;
  m.calib.mem_gbs = 0.5;
  r = f32_gemm(1024, 1024, 1024);
  bytes = 3.0 * 1024 * 1024 * 4;
  floor_s = bytes * (1 - 0.75 * 1024 * 1024 / bytes) / 0.5e9;
  t64 = point_est(&r, &m, 256, 64), t48 = point_est(&r, &m, 256, 48);
  if (!(fabs(t64 / floor_s - 1) < 1e-9 && fabs(t48 / floor_s - 1) < 1e-9))
    fail_msg("1024^3: 6x64 %.6g s, 8x48 %.6g s, the DRAM floor %.6g s", t64, t48, floor_s);
}

/* A matmul whose C is unit-stride along M (a 1x1 conv in NCHW: the pixels
 * as M, output channels N, input channels K) runs transposed with the
 * template's own panel at the plan's warp tile and BK; with 256 or more
 * input channels it runs on the direct kernel and reads no tile at all
 * (256->64 @56: all 16 points one kernel). */
static void test_calibrated_conv1x1(void **state) {
  (void)state;
  plan_machine m = fixed_cpu();
  m.calib = sample_calib(200, 200);
  plan_region_info r = f32_gemm(56 * 56, 256, 64); /* 64 -> 256 @56 */
  r.c_m_contig = true;
  plan_region_info tr = f32_gemm(256, 56 * 56, 64);
  check_transposed(&r, &tr, &m, "64->256");
  double c64 = point_est(&r, &m, 256, 64);
  /* the weight a parameter (the plan's B, the template's A): packed once,
   * as a plain GEMM of the transposed shape with its A a parameter */
  r.b_param = true;
  plan_region_info t = f32_gemm(256, 56 * 56, 64);
  t.a_param = true;
  double once = point_est(&r, &m, 256, 64), plain = point_est(&t, &m, 256, 64);
  if (!(once < c64 && fabs(once / plain - 1) < 1e-12)) fail_msg("64->256: %.6g s, transposed GEMM %.6g s", once, plain);
  /* 256 -> 64: the direct kernel, the FLOPs at its rate on both cores,
   * whatever the tile depth or micro-tile */
  r = f32_gemm(56 * 56, 64, 256);
  r.c_m_contig = true;
  double want = 2.0 * 3136 * 64 * 256 / (200e9 * 0.8 * 2) + 2 * 5e-6;
  double d[4] = {point_est(&r, &m, 256, 64), point_est(&r, &m, 256, 48), point_est(&r, &m, 64, 64),
                 point_est(&r, &m, 64, 48)};
  for (int i = 0; i < 4; i++)
    if (!(fabs(d[i] / want - 1) < 1e-9)) fail_msg("256->64: point %d %.6g s, the direct kernel's %.6g s", i, d[i], want);
  /* output channels short of whole vectors (40): the transposed GEMM,
   * whose depth counts */
  r = f32_gemm(56 * 56, 40, 256);
  r.c_m_contig = true;
  if (point_est(&r, &m, 256, 64) == point_est(&r, &m, 64, 64)) fail_msg("256->40: kc 64 and 256 tie");
  /* 7x7 = 49 pixels, padded to 64 in the GEMM's vectors: the direct kernel
   * from 128 input channels */
  r = f32_gemm(49, 64, 128);
  r.c_m_contig = true;
  want = 2.0 * 49 * 64 * 128 / (200e9 * 0.8 * 2) + 2 * 5e-6;
  double px49 = point_est(&r, &m, 256, 64);
  if (!(fabs(px49 / want - 1) < 1e-9)) fail_msg("128->64 @7: %.6g s, the direct kernel's %.6g s", px49, want);
  r = f32_gemm(56 * 56, 64, 256);
  /* not unit-stride along M: the plain GEMM's micro-tiles differ */
  r.c_m_contig = false;
  if (point_est(&r, &m, 256, 64) == point_est(&r, &m, 256, 48)) fail_msg("256->64 as a plain GEMM: a tie");
}

/* The CPU space's four micro-tiles (search.c): a calibration that times
 * them all ranks them by its rates (this host, 19:25 UTC: 8x48 172, 6x64
 * 166, 6x32 146, 4x48 122 GFLOP/s) on a GEMM of whole tiles; one that
 * timed only 6x64 and 8x48 (an older file) ranks the others behind them,
 * not level (their step model is FMA-bound too).  A batched conv with the
 * pixels as M runs transposed, as the unbatched conv does. */
static void test_calibrated_microtiles(void **state) {
  (void)state;
  plan_machine m = fixed_cpu();
  m.calib = sample_calib(200, 200);
  static const int mk[4][3] = {{8, 48, 172}, {6, 64, 166}, {6, 32, 146}, {4, 48, 122}};
  m.calib.nmk = 0;
  for (int t = 0; t < 4; t++)
    for (int k = 128; k <= 384; k += 128)
      m.calib.mk[m.calib.nmk++] = (plan_calib_mk){mk[t][0], mk[t][1], k, 512, mk[t][2]};
  plan_region_info r = f32_gemm(960, 960, 1024); /* whole 6-, 8- and 4-row and 32-, 48-, 64-column tiles */
  double t[4];
  for (int i = 0; i < 4; i++) {
    t[i] = tile_est(&r, &m, mk[i][0], mk[i][1], 256);
    assert_true(t[i] > 0);
    if (i && !(t[i] > t[i - 1])) fail_msg("%dx%d %.4g s, %dx%d %.4g s", mk[i - 1][0], mk[i - 1][1], t[i - 1], mk[i][0], mk[i][1], t[i]);
  }
  if (!(t[3] / t[1] > 1.2 && t[3] / t[1] < 1.45)) fail_msg("4x48 / 6x64: %.3f, the rates 1.36", t[3] / t[1]);
  m.calib = sample_calib(200, 200); /* 6x64 and 8x48 timed */
  double t64 = tile_est(&r, &m, 6, 64, 256), t32 = tile_est(&r, &m, 6, 32, 256), t448 = tile_est(&r, &m, 4, 48, 256);
  if (!(t32 > 1.2 * t64 && t448 > 1.2 * t64)) fail_msg("untimed 6x32 %.4g s, 4x48 %.4g s, timed 6x64 %.4g s", t32, t448, t64);
  r = f32_gemm(2 * 28 * 28, 256, 64); /* 1x1 conv 64 -> 256, batch 2, at 28x28 */
  r.pattern = PLAN_PAT_CONV;
  r.conv_kh = r.conv_kw = r.conv_sh = r.conv_sw = r.conv_dh = r.conv_dw = 1;
  r.conv_oh = r.conv_ow = 28;
  plan_region_info tr = f32_gemm(256, 2 * 28 * 28, 64);
  tr.a_param = true;
  check_transposed(&r, &tr, &m, "batched 1x1 conv");
}

/* A 3x3 stride-1 fp32 conv on AVX-512: the direct kernel at each point's
 * tile (cost_dconv.c: the search offers the kernel's own tile and tiles
 * that differ from it, whose estimates differ), or Winograd, whose estimate
 * is the direct kernel's at its own tile over the speed-up, whatever the
 * plan's tiles. */
static void test_calibrated_conv(void **state) {
  (void)state;
  plan_machine m = fixed_cpu();
  m.calib = sample_calib(200, 200);
  plan_region_info r = f32_gemm(64, 56 * 56, 64 * 9);
  r.pattern = PLAN_PAT_CONV;
  r.conv_kh = r.conv_kw = 3;
  r.conv_sh = r.conv_sw = r.conv_dh = r.conv_dw = 1;
  r.conv_oh = r.conv_ow = 56;
  plan_gemm_view g0;
  harp_error ge0 = {0};
  assert_ok(&ge0, plan_region_gemm_view(&r, &g0, &ge0));
  plan_dconv own, at;
  assert_true(plan_dconv_own(&r, &g0, &own));
  plan_t pts[PLAN_TUNE_POINTS];
  plan_cost costs[PLAN_TUNE_POINTS];
  int n = points(&r, &m, pts, costs);
  double wino = 0, direct = 0, lo = INFINITY, hi = 0;
  for (int i = 0; i < n; i++) {
    if (plan_algo_is_winograd(pts[i].algo[PLAN_KEY_CONV])) {
      if (wino == 0) wino = costs[i].time_est;
      assert_true(costs[i].time_est == wino);
      continue;
    }
    assert_true(plan_dconv_of(&pts[i], &r, &g0, &at)); /* every direct point is a tile the kernel takes */
    if (!memcmp(&at, &own, sizeof at)) direct = costs[i].time_est;
    lo = fmin(lo, costs[i].time_est), hi = fmax(hi, costs[i].time_est);
  }
  assert_true(wino > 0 && direct > 0);
  if (!(hi > lo * 1.001)) fail_msg("the direct points' estimates tie (%.6g .. %.6g s)", lo, hi);
  assert_true(fabs(direct / wino - 1.5) < 1e-9); /* 56x56 outputs: cost.c's factor */
  /* the weight an input, not a parameter: Winograd transforms it every call
   * (harp tune, 64->64 @56: the direct kernel measured 1.3-2.6x faster) */
  r.conv_w_per_call = 64 * 64 * 9;
  plan_gemm_view g;
  harp_error ge = {0};
  assert_ok(&ge, plan_region_gemm_view(&r, &g, &ge));
  double wf = plan_cpu_wino_filter_s(&r, &g, &m);
  assert_true(wf > 0.3 * direct && wf < direct);
  n = points(&r, &m, pts, costs);
  assert_false(plan_algo_is_winograd(pts[0].algo[PLAN_KEY_CONV]));
  for (int i = 0; i < n; i++)
    if (plan_algo_is_winograd(pts[i].algo[PLAN_KEY_CONV])) assert_true(fabs(costs[i].time_est - (wino + wf)) < 1e-12);
  r.conv_w_per_call = 0;
  /* a speed-up harp tune measured on this machine overrides it */
  plan_calib_add_wino(&m.calib, 3136, 64 * 9, 0.7);
  n = points(&r, &m, pts, costs);
  assert_false(plan_algo_is_winograd(pts[0].algo[PLAN_KEY_CONV])); /* the default is now the direct kernel */
  for (int i = 0; i < n; i++)
    if (plan_algo_is_winograd(pts[i].algo[PLAN_KEY_CONV])) assert_true(fabs(costs[i].time_est / direct - 1 / 0.7) < 1e-9);
}

/* A 3x3 stride-1 fp32 conv of c -> c channels at hw x hw whose weight is an
 * input: Winograd transforms it every call. */
static plan_region_info conv3x3_input_w(int64_t c, int64_t hw) {
  plan_region_info r = f32_gemm(c, hw * hw, c * 9);
  r.pattern = PLAN_PAT_CONV;
  r.conv_kh = r.conv_kw = 3;
  r.conv_sh = r.conv_sw = r.conv_dh = r.conv_dw = 1;
  r.conv_oh = r.conv_ow = hw;
  r.conv_w_per_call = c * c * 9;
  return r;
}

/* The per-call filter transform at the calibrated rate (wfilter_ns): its
 * multiply-adds (a*9 + a*a*3 a filter) over the cores at the in-L2 rate
 * when the transformed weights fit one core's L2, else the other, plus its
 * own parallel call; and what it does to the ranking: 64->64 @56 saves a
 * third of the direct kernel's time on Winograd (cost.c's 1.5x), so a
 * cheap transform (4096 filters x 162 multiply-adds at 0.2 ns, 0.07 ms)
 * makes Winograd the faster, a slow one (2 ns, 0.66 ms) the direct kernel. */
static void test_calibrated_wino_filter(void **state) {
  (void)state;
  plan_machine m = fixed_cpu(); /* 2 cores, 1 MiB of L2 each */
  m.calib = sample_calib(200, 200);
  m.calib.wf_ns[0] = 0.2, m.calib.wf_ns[1] = 0.7;
  plan_region_info r = conv3x3_input_w(64, 56); /* F(4x4): 36 points, 0.6 MiB transformed */
  plan_gemm_view g;
  harp_error ge = {0};
  assert_ok(&ge, plan_region_gemm_view(&r, &g, &ge));
  double call = m.calib.task_us * 1e-6;
  assert_true(fabs(plan_cpu_wino_filter_s(&r, &g, &m) - (64.0 * 64 * 162 * 0.2e-9 / 2 + call)) < 1e-15);
  plan_region_info big = conv3x3_input_w(256, 14); /* F(4x4): 9.4 MiB transformed, beyond L2 */
  assert_ok(&ge, plan_region_gemm_view(&big, &g, &ge));
  assert_true(fabs(plan_cpu_wino_filter_s(&big, &g, &m) - (256.0 * 256 * 162 * 0.7e-9 / 2 + call)) < 1e-15);
  plan_region_info f2 = conv3x3_input_w(128, 28); /* F(2x2): 16 points, 1 MiB: in L2 */
  assert_ok(&ge, plan_region_gemm_view(&f2, &g, &ge));
  assert_true(fabs(plan_cpu_wino_filter_s(&f2, &g, &m) - (128.0 * 128 * 84 * 0.2e-9 / 2 + call)) < 1e-15);
  f2.conv_w_per_call = 0; /* a parameter: transformed once at model_init */
  assert_true(plan_cpu_wino_filter_s(&f2, &g, &m) == 0);
  /* the ranking follows the measured rate */
  plan_t pts[PLAN_TUNE_POINTS];
  plan_cost costs[PLAN_TUNE_POINTS];
  assert_true(points(&r, &m, pts, costs) > 1);
  assert_true(plan_algo_is_winograd(pts[0].algo[PLAN_KEY_CONV]));
  m.calib.wf_ns[0] = 2.0;
  assert_true(points(&r, &m, pts, costs) > 1);
  assert_false(plan_algo_is_winograd(pts[0].algo[PLAN_KEY_CONV]));
  /* a calibration without the figure: WINO_FILTER_NS_PER_MAC (1 ns) */
  m.calib.wf_ns[0] = m.calib.wf_ns[1] = 0;
  assert_ok(&ge, plan_region_gemm_view(&r, &g, &ge));
  assert_true(fabs(plan_cpu_wino_filter_s(&r, &g, &m) - (64.0 * 64 * 162 * 1e-9 / 2 + call)) < 1e-15);
}

static void test_tune_pick(void **state) {
  (void)state;
  enum { N = 20 };
  plan_t pts[N];
  plan_cost costs[N];
  memset(pts, 0, sizeof pts);
  memset(costs, 0, sizeof costs);
  for (int i = 0; i < N; i++) {
    pts[i].algo[PLAN_KEY_CONV] = i < 16 ? PLAN_ALGO_WINOGRAD_3X3 : PLAN_ALGO_IMPLICIT_GEMM;
    pts[i].stages = i; /* an id */
    costs[i].rank_time = costs[i].time_est = 1 + i;
  }
  assert_int_equal(rt_tune_pick(pts, costs, N, 12), 12);
  for (int i = 0; i < 11; i++) {
    assert_int_equal(pts[i].stages, i); /* the best eleven, in order */
    assert_int_equal(pts[i].algo[PLAN_KEY_CONV], PLAN_ALGO_WINOGRAD_3X3);
  }
  assert_int_equal(pts[11].stages, 16); /* the other algorithm's best */
  assert_int_equal(pts[11].algo[PLAN_KEY_CONV], PLAN_ALGO_IMPLICIT_GEMM);
  /* fewer points than the budget, or one algorithm: unchanged */
  assert_int_equal(rt_tune_pick(pts, costs, 5, 12), 5);
  for (int i = 0; i < N; i++) {
    pts[i].algo[PLAN_KEY_CONV] = PLAN_ALGO_IMPLICIT_GEMM, pts[i].stages = i;
    costs[i].rank_time = costs[i].time_est = 1 + i;
  }
  assert_int_equal(rt_tune_pick(pts, costs, N, 12), 12);
  assert_int_equal(pts[11].stages, 11);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_roundtrip),        cmocka_unit_test(test_bad_text),
      cmocka_unit_test(test_files),            cmocka_unit_test(test_calibrated_model),
      cmocka_unit_test(test_calibrated_gemm_terms), cmocka_unit_test(test_calibrated_dram_floor),
      cmocka_unit_test(test_calibrated_conv1x1), cmocka_unit_test(test_calibrated_microtiles),
      cmocka_unit_test(test_calibrated_conv),  cmocka_unit_test(test_calibrated_wino_filter),
      cmocka_unit_test(test_tune_pick),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
