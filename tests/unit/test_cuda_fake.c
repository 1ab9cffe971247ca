/* test_cuda_fake.c — harp's CUDA host runtime (harp/gpu.h over cuda_rt.c)
 * against the fake libcuda of tests/fake_cuda, so loading, argument setup,
 * launches and CUDA Graph capture / replay run without a GPU: launch and
 * graph counts, device memory released, injected driver failures reported
 * as errors without a leak, an SM90 model's tensor maps, the counters the
 * CLI leaves in HARP_FAKE_CUDA_LOG.  Kernels do not execute: values are not
 * checked.  The model tests need NVRTC (they skip without it); the fake's
 * own graph rules (cuGraphExecUpdate_v2, capture errors) do not.  The
 * fake's path is compiled in (HARP_FAKE_CUDA, tests/CMakeLists.txt); the
 * environment variable of that name overrides it. */
#include "backend/cuda/region_cuda.h"
#include "fake_testutil.h"

static const char *const rows_model = "tests/models/gpu/rows_mixed.harp";

/* Without graphs: every run is the model's launches, one by one. */
static void test_direct_launches(void **vs) {
  NEED_NVRTC();
  model m;
  load(&m, rows_model, NULL);
  S->reset();
  snap s0 = snapshot();
  int n;
  rt_gpu_model *gm = build(&m, "sm80", false, &n);
  run(&m, gm);
  assert_int_equal(counter(FAKE_CUDA_DIRECT_LAUNCHES), n);
  assert_int_equal(counter(FAKE_CUDA_MODULES_LOADED), 1);
  assert_int_equal(counter(FAKE_CUDA_CAPTURES_BEGUN), 0);
  assert_int_equal(counter(FAKE_CUDA_GRAPHS_INSTANTIATED), 0);
  assert_int_equal(counter(FAKE_CUDA_GRAPH_LAUNCHES), 0);
  assert_int_equal(counter(FAKE_CUDA_GRAPH_KERNELS), 0);
  long in_bytes = 0;
  for (int i = 0; i < m.nin; i++) in_bytes += (long)m.in[i].nbytes;
  assert_int_equal(counter(FAKE_CUDA_HTOD_BYTES), in_bytes); /* no weights: inputs only */
  assert_true(counter(FAKE_CUDA_DTOH_BYTES) > 4);            /* the status word and the outputs */
  assert_int_equal(delta(&s0, FAKE_CUDA_LIVE_MODULES), 1);
  run(&m, gm);
  assert_int_equal(counter(FAKE_CUDA_DIRECT_LAUNCHES), 2 * n);
  assert_int_equal(counter(FAKE_CUDA_MODULES_LOADED), 1); /* loaded once */
  harp_error e = {0};
  double ms = 0;
  assert_ok(&e, rt_gpu_time(&e, gm, 1, 5, &ms));
  assert_true(ms > 0);
  long d = counter(FAKE_CUDA_DIRECT_LAUNCHES) - 2 * n; /* whole runs: the warmup and the reps, nothing more */
  assert_int_equal(d, (1 + 5) * n);
  assert_int_equal(delta(&s0, FAKE_CUDA_LIVE_EVENTS), 0);
  rt_gpu_free(gm);
  assert_released(&s0);
  unload(&m);
}

/* With graphs: captured and instantiated once, then replayed. */
static void test_graph_replay(void **vs) {
  NEED_NVRTC();
  model m;
  load(&m, rows_model, NULL);
  S->reset();
  snap s0 = snapshot();
  int n;
  rt_gpu_model *gm = build(&m, "sm80", true, &n);
  run(&m, gm);
  assert_int_equal(counter(FAKE_CUDA_CAPTURES_BEGUN), 1);
  assert_int_equal(counter(FAKE_CUDA_CAPTURES_ENDED), 1);
  assert_int_equal(counter(FAKE_CUDA_GRAPHS_INSTANTIATED), 1);
  assert_int_equal(counter(FAKE_CUDA_GRAPH_LAUNCHES), 1);
  assert_int_equal(counter(FAKE_CUDA_GRAPH_KERNELS), n);
  for (int i = 0; i < 3; i++) run(&m, gm);
  assert_int_equal(counter(FAKE_CUDA_CAPTURES_BEGUN), 1);
  assert_int_equal(counter(FAKE_CUDA_GRAPHS_INSTANTIATED), 1);
  assert_int_equal(counter(FAKE_CUDA_GRAPH_LAUNCHES), 4);
  assert_int_equal(counter(FAKE_CUDA_GRAPH_KERNELS), 4 * n);
  assert_int_equal(counter(FAKE_CUDA_DIRECT_LAUNCHES), 0);
  assert_int_equal(delta(&s0, FAKE_CUDA_LIVE_GRAPHS), 1);
  assert_int_equal(delta(&s0, FAKE_CUDA_LIVE_EXECS), 1);
  harp_error e = {0};
  double ms = 0;
  assert_ok(&e, rt_gpu_time(&e, gm, 2, 3, &ms));
  assert_true(ms > 0);
  long runs = counter(FAKE_CUDA_GRAPH_LAUNCHES) - 4; /* one graph launch a run: the warmup and the reps */
  assert_int_equal(runs, 2 + 3);
  assert_int_equal(counter(FAKE_CUDA_GRAPH_KERNELS), (4 + runs) * n);
  assert_int_equal(counter(FAKE_CUDA_GRAPHS_INSTANTIATED), 1);
  assert_int_equal(counter(FAKE_CUDA_DIRECT_LAUNCHES), 0);
  rt_gpu_free(gm);
  assert_released(&s0);
  unload(&m);
}

/* Kernels shared by repeated layers (cuda_dedup.c): the graph has a node
 * per launch, and the nodes of the shared kernels use one function handle;
 * with the knob no_dedup (HARP_NO_DEDUP=1) every node has its own.  Run
 * directly, the same launches. */
static const char *const repeat_model = "tests/models/gpu/repeat_layers.harp";

static void shared_graph(model *m, bool dedup, int *nlaunch, int *nkernels) {
  S->knobs.no_dedup = !dedup;
  S->reset();
  snap s0 = snapshot();
  rt_gpu_model *gm = build(m, "sm80", true, nlaunch);
  S->knobs.no_dedup = false;
  const cuda_model_tu *t = rt_gpu_tu(gm);
  *nkernels = t->mod->n;
  run(m, gm);
  run(m, gm);
  assert_int_equal(counter(FAKE_CUDA_GRAPHS_INSTANTIATED), 1);
  assert_int_equal(counter(FAKE_CUDA_GRAPH_KERNELS), 2 * *nlaunch);
  assert_int_equal(counter(FAKE_CUDA_GRAPH_FUNCTIONS), *nkernels);
  assert_int_equal(counter(FAKE_CUDA_DIRECT_LAUNCHES), 0);
  rt_gpu_free(gm);
  assert_released(&s0);
}

static void test_shared_kernels_graph(void **vs) {
  NEED_NVRTC();
  model m;
  load(&m, repeat_model, NULL);
  int n, k, n0, k0;
  shared_graph(&m, true, &n, &k);
  shared_graph(&m, false, &n0, &k0);
  assert_int_equal(n, n0);     /* the same launches */
  assert_int_equal(k0, n0);    /* without sharing: a kernel per launch */
  assert_true(k > 0 && k < n); /* with it: graph nodes share functions */
  /* direct launches of the shared kernels */
  S->reset();
  rt_gpu_model *gm = build(&m, "sm80", false, &n);
  run(&m, gm);
  assert_int_equal(counter(FAKE_CUDA_DIRECT_LAUNCHES), n);
  rt_gpu_free(gm);
  unload(&m);
}

/* cuMemAlloc fails: a clear error, nothing half-made; once the driver
 * recovers, the same model loads and runs, and nothing leaks. */
static void test_alloc_failure(void **vs) {
  NEED_NVRTC();
  model m;
  load(&m, rows_model, NULL);
  S->reset();
  snap s0 = snapshot();
  int n;
  rt_gpu_model *gm = build(&m, "sm80", true, &n);
  setenv("HARP_FAKE_CUDA_FAIL", "cuMemAlloc_v2", 1);
  harp_error e = {0};
  ut_tensor out[8];
  harp_status st = rt_gpu_run(&e, gm, m.in, m.nin, out);
  unsetenv("HARP_FAKE_CUDA_FAIL");
  assert_int_equal(st, HARP_E_NO_MEMORY);
  assert_non_null(strstr(e.msg, "cuMemAlloc"));
  assert_true(counter(FAKE_CUDA_INJECTED_FAILURES) >= 1);
  for (int k = 0; k < m.g->noutputs; k++) assert_null(out[k].data);
  assert_int_equal(delta(&s0, FAKE_CUDA_LIVE_ALLOCS), 0);
  assert_int_equal(counter(FAKE_CUDA_DIRECT_LAUNCHES) + counter(FAKE_CUDA_CAPTURES_BEGUN), 0);
  run(&m, gm); /* a retry loads again */
  assert_int_equal(delta(&s0, FAKE_CUDA_LIVE_MODULES), 1);
  assert_int_equal(counter(FAKE_CUDA_GRAPH_KERNELS), n);
  rt_gpu_free(gm);
  assert_released(&s0);
  unload(&m);
}

/* A launch fails inside the capture: the capture is ended, its graph
 * dropped, and the next run captures again. */
static void test_launch_failure_in_capture(void **vs) {
  NEED_NVRTC();
  model m;
  load(&m, rows_model, NULL);
  S->reset();
  snap s0 = snapshot();
  int n;
  rt_gpu_model *gm = build(&m, "sm80", true, &n);
  setenv("HARP_FAKE_CUDA_FAIL", "cuLaunchKernel", 1);
  harp_error e = {0};
  ut_tensor out[8];
  harp_status st = rt_gpu_run(&e, gm, m.in, m.nin, out);
  unsetenv("HARP_FAKE_CUDA_FAIL");
  assert_int_equal(st, HARP_E_INTERNAL);
  assert_non_null(strstr(e.msg, "cuLaunchKernel failed"));
  assert_int_equal(counter(FAKE_CUDA_CAPTURES_BEGUN), 1);
  assert_int_equal(delta(&s0, FAKE_CUDA_LIVE_GRAPHS), 0); /* the half capture is not kept */
  assert_int_equal(delta(&s0, FAKE_CUDA_LIVE_EXECS), 0);
  assert_int_equal(counter(FAKE_CUDA_GRAPH_LAUNCHES), 0);
  run(&m, gm);
  assert_int_equal(counter(FAKE_CUDA_CAPTURES_BEGUN), 2);
  assert_int_equal(counter(FAKE_CUDA_GRAPH_KERNELS), n);
  rt_gpu_free(gm);
  assert_released(&s0);
  unload(&m);
}

/* harp's own allocations failing at every point of a first run (open,
 * compile-cache read, load, launches, capture): an error, never a crash,
 * and nothing held once the model is freed (the ASan build: no leak). */
static void test_host_alloc_failures(void **vs) {
  NEED_NVRTC();
  model m;
  load(&m, rows_model, NULL);
  S->reset();
  snap s0 = snapshot();
  int failed = 0;
  for (long nth = 1; nth < 5000; nth++) {
    int n;
    rt_gpu_model *gm = build(&m, "sm80", nth % 2 == 0, &n);
    harp_error e = {0};
    ut_tensor out[8];
    ut_fault_fail_nth_alloc(nth);
    harp_status st = rt_gpu_run(&e, gm, m.in, m.nin, out);
    bool fired = ut_fault_remaining() == 0;
    ut_fault_fail_nth_alloc(0);
    if (st == HARP_OK) {
      for (int k = 0; k < m.g->noutputs; k++) ut_tensor_free(&out[k]);
    } else {
      assert_true(e.msg[0] != 0);
      for (int k = 0; k < m.g->noutputs; k++) assert_null(out[k].data);
      failed++;
    }
    rt_gpu_free(gm);
    assert_released(&s0);
    if (!fired) break;
  }
  assert_true(failed > 5);
  unload(&m);
}

/* SM90: the WGMMA GEMM's tensor maps are encoded when the graph is
 * captured, not on replay; an sm90 model refuses an sm_80 device. */
static void test_sm90_graphs(void **vs) {
  NEED_NVRTC();
  model m;
  load(&m, "tests/models/seed000_gemm_bias_relu.json", (const char *const[]){"M=80", "N=72", "K=48", NULL});
  S->reset();
  snap s0 = snapshot();
  int n;
  rt_gpu_model *gm = build(&m, "sm90", true, &n);
  harp_error e = {0};
  ut_tensor out[8];
  assert_int_equal(rt_gpu_run(&e, gm, m.in, m.nin, out), HARP_E_UNSUPPORTED); /* the fake is sm_80 by default */
  assert_non_null(strstr(e.msg, "sm90"));
  rt_gpu_free(gm);
  assert_released(&s0);
  setenv("HARP_FAKE_CUDA_CC", "9.0", 1);
  gm = build(&m, "sm90", true, &n);
  assert_string_equal(rt_gpu_nvrtc_arch(gm), "sm_90a");
  run(&m, gm);
  long maps = counter(FAKE_CUDA_TENSOR_MAPS);
  assert_true(maps >= 3); /* A, B and C of the GEMM */
  assert_int_equal(counter(FAKE_CUDA_GRAPH_KERNELS), n);
  run(&m, gm);
  run(&m, gm);
  assert_int_equal(counter(FAKE_CUDA_TENSOR_MAPS), maps);
  assert_int_equal(counter(FAKE_CUDA_GRAPHS_INSTANTIATED), 1);
  assert_int_equal(counter(FAKE_CUDA_GRAPH_KERNELS), 3 * n);
  rt_gpu_free(gm);
  unsetenv("HARP_FAKE_CUDA_CC");
  assert_released(&s0);
  unload(&m);
}

/* fp32 weights stored [K][N] on sm90 at TF32: each is packed K-major by a
 * `once` launch right after the weights go up; later runs and the graph
 * leave those launches out. */
static void test_sm90_packed_weights(void **vs) {
  NEED_NVRTC();
  model m;
  load(&m, "tests/models/gemm_chain4.json", (const char *const[]){"M=128", "D=128", NULL}); /* 2^21 MACs each: packed */
  S->reset();
  snap s0 = snapshot();
  setenv("HARP_FAKE_CUDA_CC", "9.0", 1);
  for (int graphs = 0; graphs < 2; graphs++) {
    S->reset();
    int n;
    rt_gpu_model *gm = build(&m, "sm90", graphs, &n);
    const cuda_model_tu *t = rt_gpu_tu(gm);
    assert_int_equal(t->nonce, 4); /* the four weights */
    assert_true(t->packed_bytes >= 4 * 128 * 128 * 4);
    for (int i = 0; i < t->nlaunch; i++)
      if (t->launch[i].once) assert_int_equal(t->launch[i + 1].args[1].kind, CUDA_ARG_PACKED); /* the GEMM's tmB */
    run(&m, gm);
    run(&m, gm);
    run(&m, gm);
    if (!graphs) assert_int_equal(counter(FAKE_CUDA_DIRECT_LAUNCHES), 4 + 3 * (n - 4));
    else {
      assert_int_equal(counter(FAKE_CUDA_DIRECT_LAUNCHES), 4);
      assert_int_equal(counter(FAKE_CUDA_GRAPH_KERNELS), 3 * (n - 4));
    }
    rt_gpu_free(gm);
  }
  unsetenv("HARP_FAKE_CUDA_CC");
  assert_released(&s0);
  unload(&m);
}

/* The CLI with HARP_FAKE_CUDA_LOG: the counters at exit, as JSON. */
static void test_cli_log(void **vs) {
  NEED_NVRTC();
  const char *bin = getenv("HARP_BIN");
  if (!bin) skip();
  char log[128], cmd[4096];
  snprintf(log, sizeof log, "%s/log.json", S->cache);
  snprintf(cmd, sizeof cmd,
           "HARP_FAKE_CUDA_LOG='%s' HARP_CACHE_DIR='%s' '%s' run '%s' --backend cuda --target sm80 --graphs "
           "--random-inputs --out '%s' >/dev/null",
           log, S->cache, bin, src_path(rows_model), S->cache);
  assert_int_equal(system(cmd), 0);
  json_error_t je;
  json_t *j = json_load_file(log, 0, &je);
  assert_non_null(j);
  assert_int_equal(json_integer_value(json_object_get(j, "captures_begun")), 1);
  assert_int_equal(json_integer_value(json_object_get(j, "graph_launches")), 1);
  assert_true(json_integer_value(json_object_get(j, "graph_kernels")) > 0);
  assert_int_equal(json_integer_value(json_object_get(j, "direct_launches")), 0);
  assert_int_equal(json_integer_value(json_object_get(j, "live_allocs")), 0);
  assert_int_equal(json_integer_value(json_object_get(j, "ctx_refs")), 0);
  assert_int_equal(json_object_size(j), FAKE_CUDA_NSTATS);
  json_decref(j);
}

/* ---- the fake's own rules, called directly (no NVRTC needed) ---------------------------- */
#define CU(name, ...) ((int (*)(__VA_ARGS__))dlsym(S->lib, #name))

typedef struct { /* CUgraphExecUpdateResultInfo */
  int result;
  void *error_node, *error_from_node;
} update_info;

static int launch(void *fn, unsigned gx, void *stream) {
  return CU(cuLaunchKernel, void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *,
            void **, void **)(fn, gx, 1, 1, 128, 1, 1, 0, stream, NULL, NULL);
}

static int update(void *exec, void *graph, update_info *info) {
  return CU(cuGraphExecUpdate_v2, void *, void *, update_info *)(exec, graph, info);
}

static void *capture(void *stream, void *fn, int nlaunch, unsigned gx) {
  void *g = NULL;
  assert_int_equal(CU(cuStreamBeginCapture_v2, void *, int)(stream, 0), 0);
  for (int i = 0; i < nlaunch; i++) assert_int_equal(launch(fn, gx, stream), 0);
  assert_int_equal(CU(cuStreamEndCapture, void *, void **)(stream, &g), 0);
  return g;
}

static void test_fake_graph_rules(void **vs) {
  S->reset();
  snap s0 = snapshot();
  void *stream = NULL, *mod = NULL, *fn = NULL, *x = NULL, *g2 = NULL;
  unsigned long long p = 0;
  assert_int_equal(CU(cuInit, unsigned)(0), 0);
  assert_int_equal(CU(cuStreamCreate, void **, unsigned)(&stream, 0), 0);
  assert_int_equal(CU(cuModuleLoadData, void **, const void *)(&mod, "not a cubin"), 0);
  assert_int_equal(CU(cuModuleGetFunction, void **, void *, const char *)(&fn, mod, "k"), 0);
  void *g1 = capture(stream, fn, 2, 4);
  assert_int_equal(CU(cuGraphInstantiateWithFlags, void **, void *, unsigned long long)(&x, g1, 0), 0);
  /* same topology, new grids: updated in place */
  g2 = capture(stream, fn, 2, 8);
  update_info info = {-1, NULL, NULL};
  assert_int_equal(update(x, g2, &info), 0);
  assert_int_equal(info.result, 0);
  assert_int_equal(counter(FAKE_CUDA_EXEC_UPDATES), 1);
  /* another node count: topology changed */
  void *g3 = capture(stream, fn, 3, 8);
  assert_int_equal(update(x, g3, &info), 910);
  assert_int_equal(info.result, 2);
  setenv("HARP_FAKE_CUDA_FAIL", "cuMemAlloc_v2, cuGraphExecUpdate_v2", 1);
  assert_int_equal(update(x, g2, &info), 910);
  assert_int_equal(info.result, 1);
  assert_int_equal(CU(cuMemAlloc_v2, unsigned long long *, size_t)(&p, 64), 2);
  unsetenv("HARP_FAKE_CUDA_FAIL");
  assert_int_equal(counter(FAKE_CUDA_FAILED_UPDATES), 2);
  assert_int_equal(CU(cuGraphLaunch, void *, void *)(x, stream), 0);
  assert_int_equal(counter(FAKE_CUDA_GRAPH_KERNELS), 2);
  /* misuse: ending no capture, beginning one twice, a zero grid, a copy inside a capture */
  void *g = NULL;
  assert_int_equal(CU(cuStreamEndCapture, void *, void **)(stream, &g), 401);
  assert_int_equal(CU(cuMemAlloc_v2, unsigned long long *, size_t)(&p, 64), 0);
  assert_int_equal(CU(cuStreamBeginCapture_v2, void *, int)(stream, 0), 0);
  assert_int_equal(CU(cuStreamBeginCapture_v2, void *, int)(stream, 0), 401);
  assert_int_equal(launch(fn, 0, stream), 1);
  char host[64] = {0};
  assert_int_equal(CU(cuMemcpyHtoD_v2, unsigned long long, const void *, size_t)(p, host, 64), 900);
  assert_int_equal(CU(cuStreamEndCapture, void *, void **)(stream, &g), 901);
  assert_null(g);
  assert_int_equal(counter(FAKE_CUDA_CAPTURE_VIOLATIONS), 1);
  assert_int_equal(CU(cuMemcpyHtoD_v2, unsigned long long, const void *, size_t)(p, host, 65), 1); /* past the end */
  const char *s = NULL;
  assert_int_equal(CU(cuGetErrorString, int, const char **)(910, &s), 0);
  assert_string_equal(s, "CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE");
  assert_int_equal(CU(cuMemFree_v2, unsigned long long)(p), 0);
  assert_int_equal(CU(cuGraphExecDestroy, void *)(x), 0);
  void *gs[3] = {g1, g2, g3};
  for (int i = 0; i < 3; i++) assert_int_equal(CU(cuGraphDestroy, void *)(gs[i]), 0);
  assert_int_equal(CU(cuModuleUnload, void *)(mod), 0);
  assert_int_equal(CU(cuStreamDestroy_v2, void *)(stream), 0);
  S->reset(); /* the violation above was on purpose */
  assert_released(&s0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fake_graph_rules),
      cmocka_unit_test(test_direct_launches),
      cmocka_unit_test(test_graph_replay),
      cmocka_unit_test(test_shared_kernels_graph),
      cmocka_unit_test(test_alloc_failure),
      cmocka_unit_test(test_launch_failure_in_capture),
      cmocka_unit_test(test_host_alloc_failures),
      cmocka_unit_test(test_sm90_graphs),
      cmocka_unit_test(test_sm90_packed_weights),
      cmocka_unit_test(test_cli_log),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
