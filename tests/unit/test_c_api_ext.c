/* test_c_api_ext.c — harp.h's entry points for bindings (api_ext.c):
 * harp_version, harp_compile_buffer against harp_compile_file, source
 * names, harp_model_new (threads, device, errors), the progress callback
 * and a cancelled compile (nothing left in the cache), int64 feeds
 * narrowed with a range check, harp_model_run_device on the CPU, the
 * tuner (harp_tune: its report, progress, a stop, refusals). */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "harp.h"
#include "testutil.h"
#include "util/util.h"

static const char DSL[] = "graph main(x: i32[4], w: f32[4]) -> (y: i32[4], z: f32[4]) {\n"
                          "    y = x + x\n    z = w * w\n    return y, z\n}\n";

/* path's bytes, malloc'd, *len set. */
static unsigned char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  *len = (size_t)ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *b = malloc(*len + 1);
  assert_int_equal(fread(b, 1, *len, f), *len);
  fclose(f);
  return b;
}

static void test_version(void **state) {
  (void)state;
  int a = -1, b = -1, c = -1;
  assert_int_equal(sscanf(harp_version(), "%d.%d.%d", &a, &b, &c), 3);
  assert_true(a >= 0 && b >= 0 && c >= 0);
}

/* small_cnn.onnx compiled from its file and from its bytes, on 1 and 2
 * threads: the same outputs; names as the file spells them. */
static void test_buffer_threads(void **state) {
  (void)state;
  char path[1024];
  snprintf(path, sizeof path, "%s/tests/models/small_cnn.onnx", HARP_SOURCE_DIR);
  size_t len;
  unsigned char *bytes = slurp(path, &len);
  harp_error err = {0};
  harp_compiled *cf, *cb;
  assert_ok(&err, harp_compile_file(&err, path, NULL, &cf));
  assert_ok(&err, harp_compile_buffer(&err, bytes, len, "onnx", "small_cnn", NULL, &cb));
  assert_int_equal(harp_num_inputs(cb), 1);
  assert_string_equal(harp_input_source_name(cb, 0), "x");
  assert_string_equal(harp_output_source_name(cb, 0), "y");
  int64_t shape[HARP_MAX_RANK];
  int rank = harp_input_shape(cb, 0, shape);
  size_t n = 1, no = 1;
  for (int d = 0; d < rank; d++) n *= (size_t)shape[d];
  rank = harp_output_shape(cb, 0, shape);
  for (int d = 0; d < rank; d++) no *= (size_t)shape[d];
  float *x = malloc(n * 4), *y[3];
  for (size_t i = 0; i < n; i++) x[i] = (float)((i * 37) % 11) / 5.0f - 1.0f;
  const harp_compiled *cs[3] = {cf, cb, cb};
  for (int k = 0; k < 3; k++) {
    harp_instance_options io = {.threads = k, .device = 0}; /* 0: the default */
    harp_model *m;
    assert_ok(&err, harp_model_new(&err, cs[k], harp_embedded_params(cs[k]), harp_params_bytes(cs[k]), &io, &m));
    y[k] = calloc(no, 4);
    const void *in[] = {x};
    void *out[] = {y[k]};
    assert_ok(&err, harp_model_run_typed(&err, m, in, NULL, out));
    harp_model_free(m);
  }
  double sum = 0;
  for (size_t i = 0; i < no; i++) {
    sum += fabs(y[0][i]);
    assert_true(fabsf(y[0][i] - y[1][i]) <= 1e-5f && fabsf(y[0][i] - y[2][i]) <= 1e-5f);
  }
  assert_true(sum > 0);
  /* bad instances */
  harp_model *m = NULL;
  harp_instance_options bad = {.threads = -1};
  assert_int_equal(harp_model_new(&err, cb, harp_embedded_params(cb), harp_params_bytes(cb), &bad, &m), HARP_E_USAGE);
  harp_error_clear(&err);
  bad = (harp_instance_options){.device = 1};
  assert_int_equal(harp_model_new(&err, cb, harp_embedded_params(cb), harp_params_bytes(cb), &bad, &m), HARP_E_USAGE);
  harp_error_clear(&err);
  assert_int_equal(harp_model_new(&err, cb, harp_embedded_params(cb), harp_params_bytes(cb) + 4, NULL, &m),
                   HARP_E_INPUT_MISMATCH);
  assert_null(m);
  harp_error_clear(&err);
  /* bad buffers */
  harp_compiled *cx;
  assert_int_equal(harp_compile_buffer(&err, bytes, len, NULL, NULL, NULL, &cx), HARP_E_USAGE);
  harp_error_clear(&err);
  assert_int_equal(harp_compile_buffer(&err, bytes, len, "tflite", NULL, NULL, &cx), HARP_E_USAGE);
  harp_error_clear(&err);
  assert_int_equal(harp_compile_buffer(&err, "garbage", 7, "onnx", "junk.onnx", NULL, &cx), HARP_E_PARSE);
  assert_null(cx);
  harp_error_clear(&err);
  for (int k = 0; k < 3; k++) free(y[k]);
  free(x);
  free(bytes);
  harp_compiled_free(cf);
  harp_compiled_free(cb);
}

/* int64 feeds for an int32 input: narrowed; out of range: InputMismatch naming it. */
static void test_int64_feeds(void **state) {
  (void)state;
  harp_error err = {0};
  harp_compiled *c;
  assert_ok(&err, harp_compile_buffer(&err, DSL, sizeof DSL - 1, ".harp", "i.harp", NULL, &c));
  assert_int_equal(harp_input_dtype(c, 0), HARP_I32);
  harp_model *m;
  assert_ok(&err, harp_model_new(&err, c, NULL, 0, NULL, &m));
  int64_t x[4] = {1, -2, 300000, -1000000000};
  float w[4] = {1, 2, 3, -4};
  int32_t y[4];
  float z[4];
  const void *in[] = {x, w};
  void *out[] = {y, z};
  harp_dtype dt[] = {HARP_I64, HARP_FP32};
  assert_ok(&err, harp_model_run_typed(&err, m, in, dt, out));
  for (int i = 0; i < 4; i++) {
    assert_int_equal(y[i], (int32_t)(2 * x[i]));
    assert_true(z[i] == w[i] * w[i]);
  }
  x[2] = (int64_t)1 << 40;
  y[2] = 7;
  assert_int_equal(harp_model_run_typed(&err, m, in, dt, out), HARP_E_INPUT_MISMATCH);
  assert_string_equal(err.node, "x");
  assert_non_null(strstr(err.msg, "element 2"));
  harp_error_clear(&err);
  x[2] = INT32_MIN - (int64_t)1;
  assert_int_equal(harp_model_run_typed(&err, m, in, dt, out), HARP_E_INPUT_MISMATCH);
  harp_error_clear(&err);
  harp_dtype wrong[] = {HARP_I32, HARP_I32};
  assert_int_equal(harp_model_run_typed(&err, m, in, wrong, out), HARP_E_DTYPE_MISMATCH);
  assert_string_equal(err.node, "w");
  harp_error_clear(&err);
  assert_int_equal(harp_model_run_device(&err, m, in, out, NULL), HARP_E_UNSUPPORTED);
  harp_error_clear(&err);
  harp_model_free(m);
  harp_compiled_free(c);
}

typedef struct {
  int calls, cancel_at;
  double last;
  char stages[16][24];
} progress_log;

static int on_progress(void *ctx, const char *stage, double fraction) {
  progress_log *p = ctx;
  if (fraction < p->last || fraction > 1.0) return 1; /* must not go back */
  p->last = fraction;
  if (p->calls < 16) snprintf(p->stages[p->calls], sizeof p->stages[0], "%s", stage);
  return ++p->calls == p->cancel_at;
}

static int count_entries(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return 0;
  int n = 0;
  for (struct dirent *x; (x = readdir(d));)
    if (strcmp(x->d_name, ".") && strcmp(x->d_name, "..")) n++;
  closedir(d);
  return n;
}

/* Every stage reported in order; a cancel stops the compile with Cancelled
 * and leaves the cache as it was (empty). */
static void test_progress_cancel(void **state) {
  (void)state;
  char cache[] = "/tmp/harp_api_ext_XXXXXX";
  assert_non_null(mkdtemp(cache));
  const char *knobs[] = {"no_plans=1", NULL};
  progress_log log = {0};
  harp_options o = {.progress = on_progress, .progress_ctx = &log, .cache_dir = cache, .knobs = knobs};
  harp_error err = {0};
  harp_compiled *c;
  assert_ok(&err, harp_compile_buffer(&err, DSL, sizeof DSL - 1, "harp", NULL, &o, &c));
  assert_true(log.calls >= 4);
  assert_string_equal(log.stages[0], "load");
  assert_string_equal(log.stages[log.calls - 1], "build");
  assert_true(log.last == 1.0);
  harp_compiled_free(c);
  char cache2[] = "/tmp/harp_api_ext_XXXXXX";
  assert_non_null(mkdtemp(cache2));
  o.cache_dir = cache2;
  progress_log cancel = {.cancel_at = 3};
  o.progress_ctx = &cancel;
  const char *syms[] = {NULL};
  o.syms = syms;
  static const char other[] = "graph main(x: f32[7]) -> (y: f32[7]) {\n    y = x * x + x\n    return y\n}\n";
  assert_int_equal(harp_compile_buffer(&err, other, sizeof other - 1, "harp", NULL, &o, &c), HARP_E_CANCELLED);
  assert_null(c);
  assert_int_equal(cancel.calls, 3);
  assert_int_equal(count_entries(cache2), 0);
  harp_error_clear(&err);
  char cmd[200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s'", cache, cache2);
  assert_int_equal(system(cmd), 0);
}

typedef struct tune_log {
  int calls, stop_at;
  char phase[16];
} tune_log;

static int on_tune(void *ctx, const char *region, int index, int nregions, const char *phase, int done, int total,
                   double best_ms) {
  (void)region, (void)done, (void)total, (void)best_ms;
  tune_log *t = ctx;
  assert_true(index >= 0 && index < nregions);
  snprintf(t->phase, sizeof t->phase, "%s", phase);
  return ++t->calls == t->stop_at;
}

/* harp_tune: a GEMM model tuned without storing (a JSON report, every
 * phase reported, "done" last); a stop from the callback is Cancelled;
 * an interpreter model, a NULL model and a bad budget are refused. */
static void test_tune(void **state) {
  (void)state;
  static const char mm[] = "graph main(a: f32[32, 64], b: f32[64, 48]) -> (y: f32[32, 48]) {\n"
                           "    y = matmul(a, b)\n    return y\n}\n";
  char cache[] = "/tmp/harp_api_tune_XXXXXX";
  assert_non_null(mkdtemp(cache));
  const char *params[] = {"b", NULL};
  harp_options o = {.cache_dir = cache, .params = params};
  harp_error err = {0};
  harp_compiled *c;
  assert_ok(&err, harp_compile_buffer(&err, mm, sizeof mm - 1, "harp", NULL, &o, &c));
  size_t nb = harp_params_bytes(c);
  float *w = calloc(nb / 4 + 1, 4);
  tune_log log = {0};
  harp_tune_options to = {.budget = 2, .repeat = 1, .warmup = -1, .no_store = true, .progress = on_tune, .progress_ctx = &log};
  char *report = NULL;
  assert_ok(&err, harp_tune(&err, c, w, nb, &o, &to, &report));
  assert_non_null(report);
  assert_non_null(strstr(report, "\"regions\":[{"));
  assert_non_null(strstr(report, "\"median_ms\""));
  assert_string_equal(log.phase, "done");
  harp_string_free(report);
  tune_log stop = {.stop_at = 2};
  to.progress_ctx = &stop;
  assert_int_equal(harp_tune(&err, c, w, nb, &o, &to, &report), HARP_E_CANCELLED);
  assert_null(report);
  assert_int_equal(stop.calls, 2);
  to.budget = 99;
  harp_error_clear(&err);
  assert_int_equal(harp_tune(&err, c, w, nb, &o, &to, NULL), HARP_E_USAGE);
  harp_error_clear(&err);
  assert_int_equal(harp_tune(&err, NULL, w, nb, &o, NULL, NULL), HARP_E_USAGE);
  harp_error_clear(&err);
  assert_int_equal(harp_tune(&err, c, w, nb + 4, &o, NULL, NULL), HARP_E_INPUT_MISMATCH);
  harp_error_clear(&err);
  harp_compiled_free(c);
  o.backend = HARP_BACKEND_INTERP;
  assert_ok(&err, harp_compile_buffer(&err, mm, sizeof mm - 1, "harp", NULL, &o, &c));
  assert_int_equal(harp_tune(&err, c, w, nb, &o, NULL, NULL), HARP_E_UNSUPPORTED);
  assert_non_null(strstr(err.msg, "only CPU models"));
  harp_compiled_free(c);
  harp_error_clear(&err);
  free(w);
  char cmd[200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", cache);
  assert_int_equal(system(cmd), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_version),
      cmocka_unit_test(test_buffer_threads),
      cmocka_unit_test(test_int64_feeds),
      cmocka_unit_test(test_progress_cancel),
      cmocka_unit_test(test_tune),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
