/* test_cuda_tune.c — `harp tune --backend cuda` (rt_tune_cuda) end to end on
 * the fake libcuda: points built, loaded and timed with (fake) device
 * events, the best stored in the plan cache under the GPU's machine id and
 * the ShapeSet, which the next CUDA compile reads; the CSV log; --region;
 * and a clean refusal without a GPU.  The fake executes no kernel and its
 * event times are host clock ticks, so the medians say nothing about the
 * plans: what is checked is the flow.  Needs NVRTC (skips without). */
#include <sys/stat.h>

#include "fake_testutil.h"
#include "harp/tune.h"

static const char *const gemm_model = "bench/models/gemm.json";
static const char *const gemm_syms[] = {"M=128", "K=128", "N=128", NULL};

/* The choice of region `name` in ps. */
static const rt_plan_choice *choice(const rt_plans *ps, const char *name) {
  for (int i = 0; i < ps->n; i++)
    if (!strcmp(ps->choice[i].region, name)) return &ps->choice[i];
  fail_msg("no region %s", name);
  return NULL;
}

static rt_tune_opts tune_opts(void) {
  return (rt_tune_opts){.budget = 2, .repeat = 2, .warmup = -1, .knobs = &S->knobs};
}

static void test_tune_and_cache(void **vs) {
  (void)vs;
  NEED_NVRTC();
  model m;
  load(&m, gemm_model, gemm_syms);
  harp_error e = {0};
  rt_tune_opts to = tune_opts();
  rt_knobs k = S->knobs;
  snprintf(k.cache_dir, sizeof k.cache_dir, "%s", S->cache);
  to.knobs = &k;
  rt_gpu_opts go = {.knobs = &k, .target = "sm80"};
  rt_tune_result res;
  snap s0 = snapshot();
  assert_ok(&e, rt_tune_cuda(&e, m.g, &m.syms, m.in, m.nin, &to, &go, &res));
  assert_int_equal(res.nregions, 1);
  rt_tune_region *tr = &res.r[0];
  assert_int_equal(tr->npoints, 2);
  assert_non_null(strstr(res.machine, "sm80"));
  for (int i = 0; i < tr->npoints; i++) {
    assert_true(tr->pts[i].median_ms > 0 && tr->pts[i].min_ms <= tr->pts[i].median_ms);
    assert_true(tr->pts[i].applied);
    assert_true(tr->pts[i].cost.time_est > 0);
  }
  assert_true(tr->pts[tr->best].median_ms <= tr->pts[0].median_ms);
  /* the default plan is the first point */
  const rt_plans *dp = &rt_gpu_stages(res.gpu_base)->plans;
  assert_true(plan_equal(&choice(dp, tr->region)->plan, &tr->pts[0].plan));
  assert_int_equal(choice(dp, tr->region)->source, RT_PLAN_DEFAULT);
  /* stored: the next compile of this ShapeSet on this GPU uses it */
  assert_non_null(tr->cache_path);
  struct stat st;
  assert_int_equal(stat(tr->cache_path, &st), 0);
  char log[300];
  snprintf(log, sizeof log, "%s/tune.csv", S->cache);
  char *path = NULL;
  int rows = 0;
  assert_ok(&e, rt_tune_log_all(&e, log, NULL, &res, &path, &rows));
  assert_int_equal(rows, 2);
  free(path);
  rt_gpu_model *gm = NULL;
  assert_ok(&e, rt_gpu_build(&e, m.g, &m.syms, &go, &gm));
  const rt_plans *ps = &rt_gpu_stages(gm)->plans;
  assert_int_equal(choice(ps, tr->region)->source, RT_PLAN_CACHED);
  assert_true(plan_equal(&choice(ps, tr->region)->plan, &tr->pts[tr->best].plan));
  rt_gpu_free(gm);
  /* not read when told so (the tuner's own points) */
  go.no_plan_cache = true;
  assert_ok(&e, rt_gpu_build(&e, m.g, &m.syms, &go, &gm));
  assert_int_equal(choice(&rt_gpu_stages(gm)->plans, tr->region)->source, RT_PLAN_DEFAULT);
  rt_gpu_free(gm);
  rt_tune_result_free(&res);
  assert_released(&s0);
  /* the log holds the header and the two points */
  FILE *f = fopen(log, "r");
  assert_non_null(f);
  char line[4096];
  int n = 0;
  while (fgets(line, sizeof line, f)) n++;
  fclose(f);
  assert_int_equal(n, 3);
  unload(&m);
}

static void test_region_and_no_store(void **vs) {
  (void)vs;
  NEED_NVRTC();
  model m;
  load(&m, gemm_model, gemm_syms);
  harp_error e = {0};
  rt_tune_opts to = tune_opts();
  const char *bad[] = {"nope"};
  to.regions = bad, to.nregions = 1;
  rt_gpu_opts go = {.knobs = &S->knobs, .target = "sm80"};
  rt_tune_result res;
  assert_int_equal(rt_tune_cuda(&e, m.g, &m.syms, m.in, m.nin, &to, &go, &res), HARP_E_USAGE);
  assert_non_null(strstr(e.msg, "nope"));
  rt_tune_result_free(&res);
  to.regions = NULL, to.nregions = 0, to.no_store = true;
  memset(&e, 0, sizeof e);
  assert_ok(&e, rt_tune_cuda(&e, m.g, &m.syms, m.in, m.nin, &to, &go, &res));
  assert_int_equal(res.nregions, 1);
  assert_null(res.r[0].cache_path);
  rt_tune_result_free(&res);
  unload(&m);
}

/* No driver: Unsupported, nothing measured or stored. */
static void test_no_gpu(void **vs) {
  (void)vs;
  model m;
  load(&m, gemm_model, gemm_syms);
  harp_error e = {0};
  rt_knobs k = S->knobs;
  snprintf(k.libcuda, sizeof k.libcuda, "/nonexistent/libcuda.so.1");
  rt_tune_opts to = tune_opts();
  to.knobs = &k;
  rt_gpu_opts go = {.knobs = &k};
  rt_tune_result res;
  assert_int_equal(rt_tune_cuda(&e, m.g, &m.syms, m.in, m.nin, &to, &go, &res), HARP_E_UNSUPPORTED);
  assert_non_null(strstr(e.msg, "GPU"));
  assert_int_equal(res.nregions, 0);
  rt_tune_result_free(&res);
  unload(&m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_tune_and_cache),
      cmocka_unit_test(test_region_and_no_store),
      cmocka_unit_test(test_no_gpu),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
