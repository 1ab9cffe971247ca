/* test_cuda_c_api.c — harp.h's CUDA backend (HARP_BACKEND_CUDA) on the fake
 * libcuda (tests/fake_cuda): compiling builds and compiles for the device
 * but loads nothing; each instance loads its own module, device memory and
 * graph, sharing the compiled build; outputs come down into the caller's
 * buffers; weights go up on an
 * instance's first run only; with graphs every run after the first replays
 * the captured graph; driver failures come back as NULL instances or non-zero
 * harp_model_run codes with harp_model_error's reason, and nothing stays held.  The
 * fake executes no kernel, so the outputs' values are not checked here
 * (tests/py/test_cuda_gpu_models.py does that on a GPU). */
#include "fake_testutil.h"
#include "harp.h"

static harp_compiled *compile(bool graphs) {
  harp_error e = {0};
  const char *syms[] = {"M=8", "K=16", "N=24", NULL};
  const char *weights[] = {"B", "bias", NULL};
  harp_options o = {.backend = HARP_BACKEND_CUDA, .syms = syms, .params = weights, .cache_dir = S->cache,
                    .target = "sm80", .graphs = graphs};
  harp_compiled *c = NULL;
  assert_ok(&e, harp_compile_file(&e, src_path("tests/models/seed000_gemm_bias_relu.json"), &o, &c));
  assert_int_equal(harp_num_inputs(c), 1);
  assert_true(harp_params_bytes(c) >= (16 * 24 + 24) * 2);
  assert_true(harp_param_offset(c, "bias") >= 0);
  return c;
}

typedef struct io {
  unsigned char *params;
  uint16_t A[8 * 16], C[8 * 24];
} io;

static int run1(harp_model *m, io *x) {
  const void *in[] = {x->A};
  void *out[] = {x->C};
  return harp_model_run(m, in, out);
}

static void test_instances(void **vs) {
  NEED_NVRTC();
  S->reset();
  snap s0 = snapshot();
  harp_compiled *c = compile(false);
  assert_int_equal(counter(FAKE_CUDA_MODULES_LOADED), 0); /* NVRTC at compile time; nothing on the device */
  assert_int_equal(delta(&s0, FAKE_CUDA_LIVE_ALLOCS), 0);
  io x = {.params = calloc(1, harp_params_bytes(c))};
  size_t pb = harp_params_bytes(c);
  harp_model *m1 = harp_model_init(c, x.params, pb), *m2 = harp_model_init(c, x.params, pb);
  assert_non_null(m1);
  assert_non_null(m2);
  assert_null(harp_model_init(c, x.params, pb - 2)); /* wrong block size */
  assert_int_equal(counter(FAKE_CUDA_MODULES_LOADED), 2);
  assert_int_equal(delta(&s0, FAKE_CUDA_LIVE_MODULES), 2);
  long h0 = counter(FAKE_CUDA_HTOD_BYTES), d0 = counter(FAKE_CUDA_DTOH_BYTES);
  memset(x.C, 0xff, sizeof x.C); /* the fake runs no kernel: its zeroed arena must come down into C */
  assert_int_equal(run1(m1, &x), 0);
  for (size_t i = 0; i < sizeof x.C / sizeof x.C[0]; i++) assert_int_equal(x.C[i], 0);
  assert_int_equal(counter(FAKE_CUDA_DTOH_BYTES) - d0, (long)sizeof x.C + 4); /* the output and the status word */
  long first = counter(FAKE_CUDA_HTOD_BYTES) - h0;
  assert_int_equal(run1(m1, &x), 0);
  long later = counter(FAKE_CUDA_HTOD_BYTES) - h0 - first;
  assert_int_equal(later, (long)sizeof x.A);            /* the input alone */
  assert_true(first >= later + (16 * 24 + 24) * 2);     /* the weights once */
  assert_int_equal(run1(m2, &x), 0);                    /* the other instance uploads its own */
  assert_int_equal(counter(FAKE_CUDA_HTOD_BYTES) - h0, 2 * first + later);
  assert_true(counter(FAKE_CUDA_DIRECT_LAUNCHES) >= 3);
  assert_null(harp_model_error(m1));
  harp_model_free(m1);
  harp_model_free(m2);
  harp_compiled_free(c);
  free(x.params);
  assert_released(&s0);
}

static void test_graphs(void **vs) {
  NEED_NVRTC();
  S->reset();
  snap s0 = snapshot();
  harp_compiled *c = compile(true);
  io x = {.params = calloc(1, harp_params_bytes(c))};
  harp_model *m = harp_model_init(c, x.params, harp_params_bytes(c));
  assert_non_null(m);
  for (int i = 0; i < 4; i++) assert_int_equal(run1(m, &x), 0);
  assert_int_equal(counter(FAKE_CUDA_CAPTURES_BEGUN), 1);
  assert_int_equal(counter(FAKE_CUDA_GRAPHS_INSTANTIATED), 1);
  assert_int_equal(counter(FAKE_CUDA_GRAPH_LAUNCHES), 4);
  assert_int_equal(counter(FAKE_CUDA_DIRECT_LAUNCHES), 0);
  harp_model_free(m);
  harp_compiled_free(c);
  free(x.params);
  assert_released(&s0);
}

/* rt_gpu_instance wants a model compiled for the device; rt_gpu_run_into
 * wants a buffer per output. */
static void test_instance_needs_prepare(void **vs) {
  NEED_NVRTC();
  snap s0 = snapshot();
  harp_error e = {0};
  model md;
  const char *syms[] = {"M=8", "K=16", "N=24", NULL};
  load(&md, "tests/models/seed000_gemm_bias_relu.json", syms);
  int nlaunch;
  rt_gpu_model *gm = build(&md, "sm80", false, &nlaunch), *inst = (rt_gpu_model *)gm;
  assert_int_equal(rt_gpu_instance(&e, gm, &inst), HARP_E_INVALID_ARG);
  assert_null(inst);
  harp_error_clear(&e);
  assert_int_equal(rt_gpu_instance(&e, NULL, &inst), HARP_E_INVALID_ARG);
  harp_error_clear(&e);
  assert_ok(&e, rt_gpu_prepare(&e, gm));
  assert_int_equal(delta(&s0, FAKE_CUDA_MODULES_LOADED), 0);
  assert_ok(&e, rt_gpu_instance(&e, gm, &inst));
  assert_int_equal(delta(&s0, FAKE_CUDA_LIVE_MODULES), 1);
  run(&md, inst); /* runs on its own: the build it borrows is gm's */
  void *none[] = {NULL};
  assert_int_equal(rt_gpu_run_into(&e, inst, md.in, md.nin, none), HARP_E_INVALID_ARG);
  harp_error_clear(&e);
  assert_int_equal(rt_gpu_run_into(&e, inst, md.in, md.nin, NULL), HARP_E_INVALID_ARG);
  harp_error_clear(&e);
  rt_gpu_free(inst);
  rt_gpu_free(gm);
  unload(&md);
  assert_released(&s0);
}

/* The driver fails: harp_model_init gives NULL, harp_model_run a code and a reason;
 * the same instance runs once the driver recovers. */
static void test_driver_failures(void **vs) {
  NEED_NVRTC();
  snap s0 = snapshot();
  harp_compiled *c = compile(false);
  io x = {.params = calloc(1, harp_params_bytes(c))};
  size_t pb = harp_params_bytes(c);
  setenv("HARP_FAKE_CUDA_FAIL", "cuMemAlloc_v2", 1);
  assert_null(harp_model_init(c, x.params, pb));
  unsetenv("HARP_FAKE_CUDA_FAIL");
  harp_model *m = harp_model_init(c, x.params, pb);
  assert_non_null(m);
  setenv("HARP_FAKE_CUDA_FAIL", "cuLaunchKernel", 1);
  assert_int_not_equal(run1(m, &x), 0);
  unsetenv("HARP_FAKE_CUDA_FAIL");
  assert_non_null(harp_model_error(m));
  assert_non_null(strstr(harp_model_error(m), "cuLaunchKernel"));
  assert_int_equal(run1(m, &x), 0);
  assert_null(harp_model_error(m));
  harp_model_free(m);
  harp_compiled_free(c);
  free(x.params);
  assert_released(&s0);
}

/* Without a driver: compiling fails with Unsupported and says why. */
static void test_no_driver(void **vs) {
  char *saved = strdup(getenv("HARP_LIBCUDA"));
  setenv("HARP_LIBCUDA", "/nonexistent/libcuda.so.1", 1);
  harp_error e = {0};
  harp_options o = {.backend = HARP_BACKEND_CUDA, .cache_dir = S->cache};
  harp_compiled *c = NULL;
  const char *syms[] = {"M=8", "K=16", "N=24", NULL};
  o.syms = syms;
  assert_int_equal(harp_compile_file(&e, src_path("tests/models/seed000_gemm_bias_relu.json"), &o, &c), HARP_E_UNSUPPORTED);
  assert_null(c);
  assert_non_null(strstr(e.msg, "GPU"));
  setenv("HARP_LIBCUDA", saved, 1);
  free(saved);
  harp_error_clear(&e);
  o.backend = (harp_backend)7;
  assert_int_equal(harp_compile_file(&e, src_path("tests/models/seed000_gemm_bias_relu.json"), &o, &c), HARP_E_USAGE);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_instances),
      cmocka_unit_test(test_graphs),
      cmocka_unit_test(test_instance_needs_prepare),
      cmocka_unit_test(test_driver_failures),
      cmocka_unit_test(test_no_driver),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
