/* test_cuda_gpu_c_api.c — harp.h's CUDA backend on a real GPU: seed 000's
 * GEMM + bias + ReLU (fp16, tails in M, N and K; B and bias weights) through
 * harp_model_init / harp_model_run on HARP_BACKEND_CUDA, with and without CUDA Graphs,
 * two instances, against the CPU backend.  Skips where harp_compile_file says
 * Unsupported (no NVRTC, libcuda or GPU): CI has none; the fake driver's
 * version of this is test_cuda_c_api. */
#include <math.h>

#include "harp.h"
#include "testutil.h"

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
      for (int i = 0; i < M * N; i++) {
        float a = ut_f16_to_f32(got[i]), b = ut_f16_to_f32(want[i]);
        if (!(fabsf(a - b) <= 2e-2f + 1e-2f * fabsf(b))) fail_msg("C2[%d] = %g, the CPU gives %g", i, a, b);
      }
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

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_direct), cmocka_unit_test(test_graphs)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
