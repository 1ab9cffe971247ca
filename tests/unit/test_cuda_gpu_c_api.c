/* test_cuda_gpu_c_api.c — harp.h's CUDA backend on a real GPU: seed 000's
 * GEMM + bias + ReLU (fp16, tails in M, N and K; B and bias weights) through
 * harp_model_init / harp_model_run on HARP_BACKEND_CUDA, with and without CUDA Graphs,
 * two instances, against the CPU backend; harp_model_run_device on device
 * memory and a stream the test owns (cuda_rt on the primary context, as
 * PyTorch's), two address sets, with and without graphs, and its time per
 * call against harp_model_run's.  Skips where harp_compile_file says
 * Unsupported (no NVRTC, libcuda or GPU): CI has none; the fake driver's
 * versions of this are test_cuda_c_api and test_cuda_device. */
#include <math.h>

#include "backend/cuda/cuda_rt.h"
#include "harp.h"
#include "testutil.h"
#include "util/util.h"

enum { M = 70, K = 48, N = 40 };

static harp_compiled *compile(harp_backend be, bool graphs, harp_status *st) {
  harp_error e = {0};
  const char *syms[] = {"M=70", "K=48", "N=40", NULL};
  const char *weights[] = {"B", "bias", NULL};
  harp_options o = {.backend = be, .syms = syms, .params = weights, .graphs = graphs};
  harp_compiled *c = NULL;
  char path[1024];
  snprintf(path, sizeof path, "%s/tests/models/seed000_gemm_bias_relu.json", HARP_SOURCE_DIR);
  *st = harp_compile_file(&e, path, &o, &c);
  if (*st && *st != HARP_E_UNSUPPORTED) fail_msg("%s", e.msg);
  return c;
}

static void fill(harp_compiled *c, unsigned char *params, uint16_t *A) {
  uint16_t *B = (uint16_t *)(params + harp_param_offset(c, "B"));
  uint16_t *bias = (uint16_t *)(params + harp_param_offset(c, "bias"));
  for (int i = 0; i < K * N; i++) B[i] = ut_f32_to_f16((float)((i * 37) % 19 - 9) / 16.0f);
  for (int i = 0; i < N; i++) bias[i] = ut_f32_to_f16((float)(i % 5) * 0.25f - 0.5f);
  for (int i = 0; i < M * K; i++) A[i] = ut_f32_to_f16((float)((i * 11) % 13 - 6) / 8.0f);
}

/* got (fp16, M x N) against want within fp16 tolerance. */
static void check_c(const uint16_t *got, const uint16_t *want, const char *what) {
  for (int i = 0; i < M * N; i++) {
    float a = ut_f16_to_f32(got[i]), b = ut_f16_to_f32(want[i]);
    if (!(fabsf(a - b) <= 2e-2f + 1e-2f * fabsf(b))) fail_msg("%s: C2[%d] = %g, the CPU gives %g", what, i, a, b);
  }
}

static void run_on_gpu(bool graphs) {
  harp_status st;
  harp_compiled *g = compile(HARP_BACKEND_CUDA, graphs, &st);
  if (st == HARP_E_UNSUPPORTED) skip();
  harp_compiled *c = compile(HARP_BACKEND_CPU, false, &st);
  assert_int_equal(st, HARP_OK);
  assert_int_equal(harp_params_bytes(g), harp_params_bytes(c));
  static uint16_t A[M * K], want[M * N], got[M * N];
  unsigned char *pg = calloc(1, harp_params_bytes(g)), *pc = calloc(1, harp_params_bytes(c));
  fill(g, pg, A);
  fill(c, pc, A);
  harp_model *mc = harp_model_init(c, pc, harp_params_bytes(c));
  const void *in[] = {A};
  void *oc[] = {want}, *og[] = {got};
  assert_int_equal(harp_model_run(mc, in, oc), 0);
  for (int inst = 0; inst < 2; inst++) {
    harp_model *m = harp_model_init(g, pg, harp_params_bytes(g));
    assert_non_null(m);
    for (int rep = 0; rep < 3; rep++) {
      memset(got, 0xff, sizeof got);
      assert_int_equal(harp_model_run(m, in, og), 0);
      check_c(got, want, graphs ? "harp_model_run, graphs" : "harp_model_run");
    }
    harp_model_free(m);
  }
  harp_model_free(mc);
  free(pg);
  free(pc);
  harp_compiled_free(g);
  harp_compiled_free(c);
}

static void test_direct(void **s) {
  (void)s;
  run_on_gpu(false);
}
static void test_graphs(void **s) {
  (void)s;
  run_on_gpu(true);
}

/* harp_model_run_device with A and C in the test's device memory, on the
 * test's stream: two address sets, three runs each (graphs: a capture,
 * replays, an update for the second set); then 200 calls timed against
 * harp_model_run's host copies (printed). */
static void run_device(bool graphs) {
  harp_status st;
  harp_compiled *g = compile(HARP_BACKEND_CUDA, graphs, &st);
  if (st == HARP_E_UNSUPPORTED) skip();
  harp_compiled *c = compile(HARP_BACKEND_CPU, false, &st);
  assert_int_equal(st, HARP_OK);
  harp_error e = {0};
  cuda_rt *rt = NULL;
  assert_ok(&e, cuda_rt_open(&e, &(cuda_rt_opts){0}, &rt));
  if (!cuda_rt_status_of(rt)->gpu) skip();
  static uint16_t A[M * K], want[M * N], got[M * N];
  unsigned char *pg = calloc(1, harp_params_bytes(g)), *pc = calloc(1, harp_params_bytes(c));
  fill(g, pg, A);
  fill(c, pc, A);
  harp_model *mc = harp_model_init(c, pc, harp_params_bytes(c)), *m = harp_model_init(g, pg, harp_params_bytes(g));
  assert_non_null(m);
  const void *hin[] = {A};
  void *hout[] = {want};
  assert_int_equal(harp_model_run(mc, hin, hout), 0);
  cuda_devptr dA[2], dC[2];
  for (int k = 0; k < 2; k++) {
    assert_ok(&e, cuda_rt_alloc(&e, rt, sizeof A, &dA[k]));
    assert_ok(&e, cuda_rt_alloc(&e, rt, sizeof got, &dC[k]));
    assert_ok(&e, cuda_rt_htod(&e, rt, dA[k], A, sizeof A));
  }
  void *stream = cuda_rt_stream(rt);
  for (int k = 0; k < 2; k++)
    for (int rep = 0; rep < 3; rep++) {
      assert_ok(&e, cuda_rt_memset0(&e, rt, dC[k], sizeof got));
      const void *in[] = {(const void *)(uintptr_t)dA[k]};
      void *out[] = {(void *)(uintptr_t)dC[k]};
      assert_ok(&e, harp_model_run_device(&e, m, in, out, stream));
      assert_ok(&e, cuda_rt_sync(&e, rt));
      assert_ok(&e, cuda_rt_dtoh(&e, rt, got, dC[k], sizeof got));
      check_c(got, want, graphs ? "device pointers, graphs" : "device pointers");
    }
  const void *in[] = {(const void *)(uintptr_t)dA[0]};
  void *out[] = {(void *)(uintptr_t)dC[0]}, *hg[] = {got};
  enum { RUNS = 200 };
  double t0 = ut_now_ms();
  for (int i = 0; i < RUNS; i++) assert_ok(&e, harp_model_run_device(&e, m, in, out, stream));
  assert_ok(&e, cuda_rt_sync(&e, rt));
  double t1 = ut_now_ms();
  for (int i = 0; i < RUNS; i++) assert_int_equal(harp_model_run(m, hin, hg), 0);
  double t2 = ut_now_ms();
  printf("# run_device%s: %.1f us a call (enqueue, one sync at the end); harp_model_run (host copies, synchronous): "
         "%.1f us\n", graphs ? " (graphs)" : "", (t1 - t0) / RUNS * 1e3, (t2 - t1) / RUNS * 1e3);
  check_c(got, want, "harp_model_run after device runs");
  for (int k = 0; k < 2; k++) cuda_rt_free(rt, dA[k]), cuda_rt_free(rt, dC[k]);
  harp_model_free(m);
  harp_model_free(mc);
  cuda_rt_close(rt);
  free(pg);
  free(pc);
  harp_compiled_free(g);
  harp_compiled_free(c);
}

static void test_device(void **s) {
  (void)s;
  run_device(false);
}
static void test_device_graphs(void **s) {
  (void)s;
  run_device(true);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_direct), cmocka_unit_test(test_graphs),
                                     cmocka_unit_test(test_device), cmocka_unit_test(test_device_graphs)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
