/* test_c_api.c — harp.h end to end, as docs/c-api.md shows it: compile a
 * model file with a weight, run instances on both backends, compare; and
 * the API's error paths. */
#include <math.h>
#include <unistd.h>

#include "harp.h"
#include "harp/advanced.h"
#include "testutil.h"
#include "util/util.h"

static void gemm_bias_relu(harp_backend backend, float *out) {
  harp_error err = {0};
  const char *syms[] = {"M=3", "K=4", "N=5", NULL};
  const char *weights[] = {"B", "bias", NULL};
  harp_options opts = {.backend = backend, .syms = syms, .params = weights};
  harp_compiled *c;
  char path[1024];
  snprintf(path, sizeof path, "%s/tests/models/seed000_gemm_bias_relu.json", HARP_SOURCE_DIR);
  assert_ok(&err, harp_compile_file(&err, path, &opts, &c));
  assert_int_equal(harp_num_inputs(c), 1); /* A; B and bias are weights */
  assert_null(harp_embedded_params(c));   /* a .json file carries no weights */
  assert_string_equal(harp_input_name(c, 0), "A");
  assert_int_equal(harp_num_outputs(c), 1);
  assert_string_equal(harp_output_name(c, 0), "C2");
  int64_t shape[HARP_MAX_RANK];
  assert_int_equal(harp_output_shape(c, 0, shape), 2);
  assert_int_equal(shape[0], 3);
  assert_int_equal(shape[1], 5);
  /* the parameter block: each weight at its offset, fp16 */
  size_t nbytes = harp_params_bytes(c);
  unsigned char *params = calloc(1, nbytes);
  uint16_t *B = (uint16_t *)(params + harp_param_offset(c, "B"));
  uint16_t *bias = (uint16_t *)(params + harp_param_offset(c, "bias"));
  for (int i = 0; i < 4 * 5; i++) B[i] = harp_f32_to_f16((float)(i % 7) - 3.0f);
  for (int i = 0; i < 5; i++) bias[i] = harp_f32_to_f16(0.5f * (float)i);
  assert_int_equal(harp_param_offset(c, "nope"), -1);
  uint16_t A[3 * 4], C[3 * 5];
  for (int i = 0; i < 12; i++) A[i] = harp_f32_to_f16((float)(i % 5) - 2.0f);
  harp_model *m = harp_model_init(c, params, nbytes);
  assert_non_null(m);
  assert_null(harp_model_init(c, params, nbytes + 1)); /* wrong block size */
  const void *inputs[] = {A};
  void *outputs[] = {C};
  for (int rep = 0; rep < 3; rep++) assert_int_equal(harp_model_run(m, inputs, outputs), 0);
  for (int i = 0; i < 15; i++) out[i] = harp_f16_to_f32(C[i]);
  /* check against a direct computation */
  for (int r = 0; r < 3; r++)
    for (int j = 0; j < 5; j++) {
      float acc = 0;
      for (int k = 0; k < 4; k++) acc += ut_f16_to_f32(A[r * 4 + k]) * ut_f16_to_f32(B[k * 5 + j]);
      float want = fmaxf(ut_round_f16(acc) + ut_f16_to_f32(bias[j]), 0);
      assert_true(fabsf(out[r * 5 + j] - ut_round_f16(want)) <= 1e-3f + 1e-3f * fabsf(want));
    }
  harp_model_free(m);
  free(params);
  harp_compiled_free(c);
}

static void test_both_backends(void **state) {
  (void)state;
  float a[15], b[15];
  gemm_bias_relu(HARP_BACKEND_INTERP, a);
  gemm_bias_relu(HARP_BACKEND_CPU, b);
  for (int i = 0; i < 15; i++) assert_true(fabsf(a[i] - b[i]) <= 1e-3f);
}

static void test_errors(void **state) {
  (void)state;
  harp_error err = {0};
  harp_compiled *c;
  assert_int_equal(harp_compile_file(&err, "/nonexistent.json", NULL, &c), HARP_E_IO);
  harp_error_clear(&err);
  assert_int_equal(harp_compile_file(&err, "model.tflite", NULL, &c), HARP_E_USAGE);
  harp_error_clear(&err);
  char path[1024];
  snprintf(path, sizeof path, "%s/tests/models/seed001_gemm.json", HARP_SOURCE_DIR);
  harp_options opts = {.backend = HARP_BACKEND_INTERP};
  assert_int_equal(harp_compile_file(&err, path, &opts, &c), HARP_E_UNBOUND_SYMBOL); /* M, K, N unbound */
  harp_error_clear(&err);
  const char *weights[] = {"Z", NULL};
  const char *syms[] = {"M=1", "K=1", "N=1", NULL};
  opts.syms = syms;
  opts.params = weights;
  assert_int_equal(harp_compile_file(&err, path, &opts, &c), HARP_E_USAGE); /* no input Z */
  assert_null(harp_model_init(NULL, NULL, 0));
  assert_int_equal(harp_model_run(NULL, NULL, NULL), -1);
  harp_model_free(NULL);
  harp_compiled_free(NULL);
}

/* A Tiny IR graph from harp/tiny.h's builder, compiled directly (harp/advanced.h). */
static void test_builder_graph(void **state) {
  (void)state;
  tiny_graph *g = tiny_graph_new();
  int64_t d[1] = {8};
  tiny_shape s = tiny_shape_of(1, d);
  int x = tiny_b_input(g, "x", TINY_FP32, &s);
  int y = tiny_b_unary(g, TINY_EXP, x);
  tiny_mark_output(g, tiny_b_binary_imm(g, TINY_MUL, y, 2.0));
  harp_error err = {0};
  harp_compiled *c;
  harp_options opts = {.backend = HARP_BACKEND_CPU};
  assert_ok(&err, harp_compile_graph(&err, g, &opts, &c));
  float in[8], out[8];
  for (int i = 0; i < 8; i++) in[i] = (float)i * 0.25f;
  harp_model *m = harp_model_init(c, NULL, 0);
  const void *ins[] = {in};
  void *outs[] = {out};
  assert_int_equal(harp_model_run(m, ins, outs), 0);
  for (int i = 0; i < 8; i++) assert_true(fabsf(out[i] - 2.0f * expf(in[i])) < 1e-5f * out[i]);
  harp_model_free(m);
  harp_compiled_free(c);
}

/* Shared objects in dir (its *.so files). */
static int objects_in(const char *dir) {
  char cmd[600];
  snprintf(cmd, sizeof cmd, "ls %s/*.so 2>/dev/null | wc -l", dir);
  FILE *f = popen(cmd, "r");
  int n = 0;
  if (f && fscanf(f, "%d", &n) != 1) n = -1;
  if (f) pclose(f);
  return n;
}

/* exp(x) * 2 on 8 values, compiled for the CPU with opts. */
static harp_status compile_small(harp_error *err, const harp_options *opts) {
  tiny_graph *g = tiny_graph_new();
  int64_t d[1] = {8};
  tiny_shape s = tiny_shape_of(1, d);
  tiny_mark_output(g, tiny_b_binary_imm(g, TINY_MUL, tiny_b_unary(g, TINY_EXP, tiny_b_input(g, "x", TINY_FP32, &s)), 2.0));
  harp_compiled *c = NULL;
  harp_status st = harp_compile_graph(err, g, opts, &c);
  harp_compiled_free(c);
  return st;
}

/* harp_options' knobs: the environment (HARP_CACHE_DIR), then opts.knobs,
 * then opts.cache_dir; no_env ignores the environment; a bad knob, or a bad
 * variable read, is a usage error naming it. */
static void test_knobs(void **state) {
  (void)state;
  char root[] = "/tmp/harp_knobs_XXXXXX", a[64], b[64], c[64], cmd[128];
  assert_non_null(mkdtemp(root));
  snprintf(a, sizeof a, "%s/a", root), snprintf(b, sizeof b, "%s/b", root), snprintf(c, sizeof c, "%s/c", root);
  harp_error err = {0};
  setenv("HARP_CACHE_DIR", a, 1);
  harp_options opts = {.backend = HARP_BACKEND_CPU};
  assert_ok(&err, compile_small(&err, &opts));
  assert_int_equal(objects_in(a), 1);
  char knob[96];
  snprintf(knob, sizeof knob, "cache_dir=%s", b);
  const char *knobs[] = {"no_dedup=1", knob, NULL};
  opts.knobs = knobs;
  assert_ok(&err, compile_small(&err, &opts));
  assert_int_equal(objects_in(b), 1);
  opts.cache_dir = c;
  assert_ok(&err, compile_small(&err, &opts));
  assert_int_equal(objects_in(c), 1);
  assert_int_equal(objects_in(a), 1);
  assert_int_equal(objects_in(b), 1);
  setenv("HARP_NO_DEDUP", "sometimes", 1);
  assert_int_equal(compile_small(&err, &opts), HARP_E_USAGE);
  assert_non_null(strstr(err.msg, "HARP_NO_DEDUP"));
  harp_error_clear(&err);
  opts.no_env = true;
  assert_ok(&err, compile_small(&err, &opts));
  unsetenv("HARP_NO_DEDUP");
  unsetenv("HARP_CACHE_DIR");
  const char *bad[] = {"nodedup=1", NULL};
  opts.knobs = bad;
  assert_int_equal(compile_small(&err, &opts), HARP_E_USAGE);
  assert_non_null(strstr(err.msg, "nodedup"));
  snprintf(cmd, sizeof cmd, "rm -rf %s", root);
  assert_int_equal(system(cmd), 0);
}

/* y = x W^T (20 x 40 x 33) compiled for the CPU at `precision`, run on
 * x and w; the status of the compile. */
static harp_status linear(harp_error *err, const char *precision, const float *x, const float *w, float *y) {
  char dir[] = "/tmp/harp_prec_XXXXXX", path[64];
  assert_non_null(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/l.harp", dir);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs("graph<M=20, K=40, N=33> main(x: f32[M, K], w: f32[N, K]) -> (y: f32[M, N]) {\n"
        "    y = matmul(x, permute(w, [1, 0]))\n    return y\n}\n", f);
  fclose(f);
  const char *weights[] = {"w", NULL};
  harp_options opts = {.backend = HARP_BACKEND_CPU, .params = weights, .precision = precision};
  harp_compiled *c = NULL;
  harp_status st = harp_compile_file(err, path, &opts, &c);
  remove(path);
  rmdir(dir);
  if (st) return st;
  /* the parameter block as harp_param_offset lays it out (its size is padded past w's) */
  unsigned char *block = calloc(1, harp_params_bytes(c));
  assert_non_null(block);
  assert_true(harp_param_offset(c, "w") >= 0);
  memcpy(block + harp_param_offset(c, "w"), w, sizeof(float) * 33 * 40);
  harp_model *m = harp_model_init(c, block, harp_params_bytes(c));
  free(block);
  assert_non_null(m);
  const void *ins[] = {x};
  void *outs[] = {y};
  assert_int_equal(harp_model_run(m, ins, outs), 0);
  harp_model_free(m);
  harp_compiled_free(c);
  return HARP_OK;
}

/* harp_options.precision on the CPU: "bf16" rounds the operands (the result
 * is the bf16-rounded operands' product within fp32 accumulation's error,
 * and not the fp32 one), "fp32" and NULL do not, anything else is a usage
 * error; without AVX512_BF16, "bf16" is unsupported. */
static void test_cpu_precision(void **state) {
  (void)state;
  float x[20 * 40], w[33 * 40], y32[20 * 33], y16[20 * 33];
  for (int i = 0; i < 20 * 40; i++) x[i] = sinf(0.37f * (float)i) + 0.001f * (float)i;
  for (int i = 0; i < 33 * 40; i++) w[i] = cosf(0.23f * (float)i) - 0.0007f * (float)i;
  harp_error err = {0};
  assert_ok(&err, linear(&err, "fp32", x, w, y32));
  assert_int_equal(linear(&err, "fp16", x, w, y16), HARP_E_USAGE);
  assert_non_null(strstr(err.msg, "bf16"));
  harp_error_clear(&err);
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx512bf16")) {
    assert_int_equal(linear(&err, "bf16", x, w, y16), HARP_E_UNSUPPORTED);
    return;
  }
  assert_ok(&err, linear(&err, "bf16", x, w, y16));
  bool differs = false;
  for (int r = 0; r < 20; r++)
    for (int n = 0; n < 33; n++) {
      double want = 0, want32 = 0, mag = 0;
      for (int k = 0; k < 40; k++) {
        double a = ut_round_bf16(x[r * 40 + k]), b = ut_round_bf16(w[n * 40 + k]);
        want += a * b, want32 += (double)x[r * 40 + k] * w[n * 40 + k], mag += fabs(a * b);
      }
      assert_true(fabs(y16[r * 33 + n] - want) <= 40 * 0x1p-24 * mag + 1e-30);
      assert_true(fabs(y32[r * 33 + n] - want32) <= 40 * 0x1p-24 * mag + 1e-30);
      differs |= fabs(y16[r * 33 + n] - want32) > 40 * 0x1p-24 * mag;
    }
  assert_true(differs);
}

/* examples/conv_block.harp (3x3 conv, bias, SiLU) through harp.h with
 * the knob tier0 (tier0 in opts' knobs) on the CPU, into y. */
static bool conv_block_run(harp_backend backend, const char *tier0, const char *cache, const char *knob, float *y) {
  harp_error err = {0};
  const char *weights[] = {"w", "b", NULL};
  char k1[64], k2[600];
  snprintf(k1, sizeof k1, "tier0=%s", tier0);
  snprintf(k2, sizeof k2, "cache_dir=%s", cache);
  const char *knobs[] = {k1, k2, knob, NULL};
  harp_options opts = {.backend = backend, .params = weights, .knobs = knobs, .no_env = true};
  harp_compiled *c;
  char path[1024];
  snprintf(path, sizeof path, "%s/examples/conv_block.harp", HARP_SOURCE_DIR);
  assert_ok(&err, harp_compile_file(&err, path, &opts, &c));
  size_t nbytes = harp_params_bytes(c);
  unsigned char *params = calloc(1, nbytes);
  float *w = (float *)(params + harp_param_offset(c, "w")), *b = (float *)(params + harp_param_offset(c, "b"));
  for (int i = 0; i < 16 * 8 * 9; i++) w[i] = 0.05f * (float)((i * 7) % 11 - 5);
  for (int i = 0; i < 16; i++) b[i] = 0.1f * (float)(i - 8);
  static float x[8 * 16 * 16];
  for (int i = 0; i < 8 * 16 * 16; i++) x[i] = 0.01f * (float)((i * 13) % 97 - 48);
  harp_model *m = harp_model_init(c, params, nbytes);
  assert_non_null(m);
  free(params); /* the model keeps what it needs */
  for (int run = 0; run < 2; run++) { /* a second run: tier 0 again, or the object once it is ready */
    assert_int_equal(harp_model_run(m, (const void *[]){x}, (void *[]){y}), 0);
    assert_null(harp_model_error(m));
  }
  harp_model_free(m);
  bool warned = harp_compiled_warning(c) != NULL;
  for (int i = 0; i < 200 && !warned && knob; i++) { /* a failing build ends soon: its warning then shows */
    usleep(50000);
    warned = harp_compiled_warning(c) != NULL;
  }
  harp_compiled_free(c);
  return warned;
}

/* tier0=force: every run on tier 0 (no compiler); auto on a cold cache:
 * tier 0 until the background build is done.  Both against the
 * interpreter, an independent implementation of the same graph. */
static void test_tier0(void **state) {
  (void)state;
  char root[] = "/tmp/harp_tier0_XXXXXX", cmd[128];
  assert_non_null(mkdtemp(root));
  static float ref[16 * 16 * 16], got[16 * 16 * 16];
  conv_block_run(HARP_BACKEND_INTERP, "off", root, NULL, ref);
  /* force; auto on a cold cache; auto with no compiler (runs stay on tier 0, a warning says why) */
  const char *modes[] = {"force", "auto", "auto"}, *extra[] = {NULL, NULL, "cc=/nonexistent/cc"};
  for (int k = 0; k < 3; k++) {
    memset(got, 0, sizeof got);
    char cache[64];
    snprintf(cache, sizeof cache, "%s/%d", root, k);
    bool warned = conv_block_run(HARP_BACKEND_CPU, modes[k], cache, extra[k], got);
    assert_int_equal(warned, k == 2);
    for (int i = 0; i < 16 * 16 * 16; i++) assert_true(fabsf(got[i] - ref[i]) <= 1e-4f + 1e-4f * fabsf(ref[i]));
  }
  snprintf(cmd, sizeof cmd, "rm -rf %s", root);
  assert_int_equal(system(cmd), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cpu_precision),
      cmocka_unit_test(test_both_backends),
      cmocka_unit_test(test_errors),
      cmocka_unit_test(test_builder_graph),
      cmocka_unit_test(test_knobs),
      cmocka_unit_test(test_tier0),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
