/* test_c_api_sgen.c — harp.h's ShapeSets (harp_options.shapesets,
 * api_sgen.c): a chain of four GEMMs (weights in the parameter block) over
 * their row count M compiled once for M in 2..40 on a cache of its own, run
 * at three bindings by harp_model_run_shaped (the caller's output buffer,
 * then harp_model_output), each against a reference computed here; the
 * shapes (-1 where M varies, harp_output_shape_for); a binding outside the
 * box refused before any kernel runs (the caller's buffer untouched), or
 * compiled on its own with shapeset_recompile; a row softmax whose row
 * length varies (one object, exact at three lengths); a GEMM over its rows
 * and columns at once (not generic yet: a compile per binding, the reason
 * kept);
 * bad settings; a model without ShapeSets through the same calls; bindings
 * that break a model (a Reshape's divisibility, a tie) or pass the limits
 * (2^41 elements; a box's corner of 2^40 rows), refused before any kernel
 * runs, the caller's buffer untouched. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harp.h"
#include "testutil.h"
#include "util/util.h"

#define D 16

static void model_path(char *path, size_t cap, const char *name) {
  snprintf(path, cap, "%s/tests/models/%s", HARP_SOURCE_DIR, name);
}

/* A fresh cache directory (every object built here is this test's). */
static const char *fresh_cache(void) {
  static char dir[64];
  snprintf(dir, sizeof dir, "/tmp/harp_capi_sgen_XXXXXX");
  assert_non_null(mkdtemp(dir));
  return dir;
}

/* bytes of src into the block p (n bytes) at c's parameter "<kind><l>";
 * a parameter that is missing or does not fit fails the test (fail_msg
 * longjmps: the return after it is for the compiler). */
static void put_param(unsigned char *p, size_t n, const harp_compiled *c, char kind, int l, const void *src, size_t bytes) {
  char name[8];
  snprintf(name, sizeof name, "%c%d", kind, l);
  int64_t off = harp_param_offset(c, name);
  if (off < 0 || (size_t)off + bytes > n) {
    fail_msg("parameter %s at %lld of %zu bytes in a block of %zu", name, (long long)off, bytes, n);
    return;
  }
  memcpy(p + off, src, bytes);
}

/* The parameter block of gemm_chain4.json for c: W0..W3 (D x D), b0..b3. */
static unsigned char *chain_params(const harp_compiled *c, float w[4][D * D], float b[4][D]) {
  size_t n = harp_params_bytes(c);
  unsigned char *p = calloc(n + 1, 1);
  assert_non_null(p);
  for (int l = 0; l < 4; l++) {
    for (int i = 0; i < D * D; i++) w[l][i] = (float)(((i * 7 + l * 13) % 23) - 11) / 40.0f;
    for (int i = 0; i < D; i++) b[l][i] = (float)((i * 5 + l) % 9 - 4) / 10.0f;
    put_param(p, n, c, 'W', l, w[l], sizeof w[l]);
    put_param(p, n, c, 'b', l, b[l], sizeof b[l]);
  }
  return p;
}

/* relu(x W + b) four times, in double, x[m][D]: is y within 1e-4? */
static bool chain_ok(const float *x, int m, float w[4][D * D], float b[4][D], const float *y) {
  double *h = malloc(sizeof(double) * (size_t)m * D), *t = malloc(sizeof(double) * (size_t)m * D);
  for (int i = 0; i < m * D; i++) h[i] = x[i];
  for (int l = 0; l < 4; l++) {
    for (int r = 0; r < m; r++)
      for (int j = 0; j < D; j++) {
        double s = b[l][j];
        for (int k = 0; k < D; k++) s += h[r * D + k] * w[l][k * D + j];
        t[r * D + j] = s > 0 ? s : 0;
      }
    memcpy(h, t, sizeof(double) * (size_t)m * D);
  }
  bool ok = true;
  for (int i = 0; i < m * D && ok; i++) ok = fabs(h[i] - y[i]) <= 1e-4 + 1e-4 * fabs(h[i]);
  free(h);
  free(t);
  return ok;
}

static float *rows(int m, unsigned seed) {
  float *x = malloc(sizeof(float) * (size_t)m * D);
  for (int i = 0; i < m * D; i++) {
    seed = seed * 1103515245u + 12345u;
    x[i] = (float)((seed >> 16) % 2001) / 500.0f - 2.0f;
  }
  return x;
}

static void test_gemm_chain(void **state) {
  (void)state;
  char path[1024];
  model_path(path, sizeof path, "gemm_chain4.json");
  const char *sets[] = {"M=2..40", NULL}, *syms[] = {"D=16", NULL};
  harp_options o = {.shapesets = sets, .syms = syms, .cache_dir = fresh_cache()};
  harp_error e = {0};
  harp_compiled *c;
  assert_ok(&e, harp_compile_file(&e, path, &o, &c));
  int cc = -1;
  const char *why = "?";
  assert_int_equal(harp_shapeset_objects(c, &cc, &why), 1);
  assert_int_equal(cc, 1);
  assert_null(why);
  int64_t shape[HARP_MAX_RANK];
  assert_int_equal(harp_input_shape(c, 0, shape), 2);
  assert_true(shape[0] == -1 && shape[1] == D);
  assert_int_equal(harp_output_shape(c, 0, shape), 2);
  assert_true(shape[0] == -1 && shape[1] == D);
  float w[4][D * D], b[4][D];
  unsigned char *params = chain_params(c, w, b);
  harp_model *m;
  assert_ok(&e, harp_model_new(&e, c, params, harp_params_bytes(c), NULL, &m));
  /* M = 9 into the caller's buffer */
  float *x = rows(9, 1), *y = calloc(9 * D, sizeof *y);
  int64_t s9[] = {9, D};
  const int64_t *in_shapes[] = {s9};
  const void *in[] = {x};
  void *out[] = {y};
  assert_ok(&e, harp_model_run_shaped(&e, m, in, in_shapes, out));
  assert_true(chain_ok(x, 9, w, b, y));
  free(x);
  free(y);
  /* M = 40: outputs read back with harp_model_output */
  x = rows(40, 2);
  int64_t s40[] = {40, D};
  in_shapes[0] = s40, in[0] = x;
  assert_ok(&e, harp_model_run_shaped(&e, m, in, in_shapes, NULL));
  int rank = 0;
  const float *got = harp_model_output(m, 0, shape, &rank);
  assert_non_null(got);
  assert_true(rank == 2 && shape[0] == 40 && shape[1] == D);
  assert_true(chain_ok(x, 40, w, b, got));
  free(x);
  /* M = 2: the output's shape asked first */
  int64_t s2[] = {2, D};
  in_shapes[0] = s2;
  assert_ok(&e, harp_output_shape_for(&e, c, in_shapes, 0, shape, &rank));
  assert_true(rank == 2 && shape[0] == 2 && shape[1] == D);
  x = rows(2, 3), y = calloc(2 * D, sizeof *y), in[0] = x, out[0] = y;
  assert_ok(&e, harp_model_run_shaped(&e, m, in, in_shapes, out));
  assert_true(chain_ok(x, 2, w, b, y));
  assert_int_equal(harp_shapeset_objects(c, &cc, NULL), 1); /* three bindings, one object */
  assert_int_equal(cc, 1);
  free(x);
  free(y);
  /* M = 41: outside, refused before any kernel; the buffer untouched */
  x = rows(41, 4), y = malloc(41 * D * sizeof *y), in[0] = x, out[0] = y;
  for (int i = 0; i < 41 * D; i++) y[i] = 7.0f;
  int64_t s41[] = {41, D};
  in_shapes[0] = s41;
  assert_int_equal(harp_model_run_shaped(&e, m, in, in_shapes, out), HARP_E_INPUT_MISMATCH);
  assert_non_null(strstr(e.msg, "outside the compiled ShapeSet"));
  for (int i = 0; i < 41 * D; i++) assert_true(y[i] == 7.0f);
  harp_error_clear(&e);
  assert_int_equal(harp_output_shape_for(&e, c, in_shapes, 0, shape, &rank), HARP_E_INPUT_MISMATCH);
  harp_error_clear(&e);
  assert_int_not_equal(harp_model_run(m, in, out), 0); /* no shapes: this model needs them */
  assert_non_null(strstr(harp_model_error(m), "harp_model_run_shaped"));
  harp_model_free(m);
  free(params);
  harp_compiled_free(c);
  /* the same binding with shapeset_recompile: a compile of its own */
  o.shapeset_recompile = true;
  assert_ok(&e, harp_compile_file(&e, path, &o, &c));
  params = chain_params(c, w, b);
  assert_ok(&e, harp_model_new(&e, c, params, harp_params_bytes(c), NULL, &m));
  assert_ok(&e, harp_model_run_shaped(&e, m, in, in_shapes, out));
  assert_true(chain_ok(x, 41, w, b, y));
  assert_int_equal(harp_shapeset_objects(c, NULL, NULL), 2);
  free(x);
  free(y);
  harp_model_free(m);
  free(params);
  harp_compiled_free(c);
}

/* Softmax over rows of length L in 3..70: one object (the row length read
 * at run time, cgen_softmax's cols_expr), built once, exact at L = 3, 70
 * and 17 (vector tails), a row length outside the box refused. */
static void test_softmax_rows(void **state) {
  (void)state;
  char path[1024];
  model_path(path, sizeof path, "softmax_rows.json");
  const char *sets[] = {"L=3..70", NULL}, *syms[] = {"R=5", NULL};
  harp_options o = {.shapesets = sets, .syms = syms, .cache_dir = fresh_cache()};
  harp_error e = {0};
  harp_compiled *c;
  assert_ok(&e, harp_compile_file(&e, path, &o, &c));
  const char *why = NULL;
  assert_int_equal(harp_shapeset_objects(c, NULL, &why), 1);
  assert_null(why);
  harp_model *m;
  assert_ok(&e, harp_model_new(&e, c, NULL, 0, NULL, &m));
  const int Ls[] = {3, 70, 17};
  for (int t = 0; t < 3; t++) {
    int L = Ls[t];
    float *x = malloc(sizeof(float) * 5 * (size_t)L);
    for (int i = 0; i < 5 * L; i++) x[i] = (float)((i * 37) % 19) / 4.0f - 2.0f;
    int64_t s[] = {5, L};
    const int64_t *in_shapes[] = {s};
    const void *in[] = {x};
    assert_ok(&e, harp_model_run_shaped(&e, m, in, in_shapes, NULL));
    int64_t shape[HARP_MAX_RANK];
    int rank = 0;
    const float *y = harp_model_output(m, 0, shape, &rank);
    assert_true(y && rank == 2 && shape[0] == 5 && shape[1] == L);
    for (int r = 0; r < 5; r++) {
      double mx = -1e30, sum = 0;
      for (int j = 0; j < L; j++) mx = fmax(mx, x[r * L + j]);
      for (int j = 0; j < L; j++) sum += exp(x[r * L + j] - mx);
      for (int j = 0; j < L; j++) assert_true(fabs(exp(x[r * L + j] - mx) / sum - y[r * L + j]) < 1e-6);
    }
    free(x);
  }
  assert_int_equal(harp_shapeset_objects(c, NULL, NULL), 1);
  float x71[5 * 71] = {0};
  int64_t s71[] = {5, 71};
  const int64_t *in71[] = {s71};
  const void *inx[] = {x71};
  assert_int_not_equal(harp_model_run_shaped(&e, m, inx, in71, NULL), HARP_OK);
  harp_error_clear(&e);
  harp_model_free(m);
  harp_compiled_free(c);
}

/* A GEMM over its rows M and columns N at once (gemm_mn.harp; the template
 * reads one of them at run time, not both yet): a compile per binding, the
 * reason kept, exact. */
static void test_fallback(void **state) {
  (void)state;
  char path[1024];
  model_path(path, sizeof path, "gemm_mn.harp");
  const char *sets[] = {"M=2..40", "N=3..70", NULL};
  harp_options o = {.shapesets = sets, .cache_dir = fresh_cache()};
  harp_error e = {0};
  harp_compiled *c;
  assert_ok(&e, harp_compile_file(&e, path, &o, &c));
  const char *why = NULL;
  assert_int_equal(harp_shapeset_objects(c, NULL, &why), 0);
  assert_non_null(why);
  assert_non_null(strstr(why, "depends on the binding"));
  harp_model *m;
  assert_ok(&e, harp_model_new(&e, c, NULL, 0, NULL, &m));
  for (int t = 0; t < 2; t++) {
    int M = t ? 40 : 3, N = t ? 70 : 3;
    float *a = malloc(sizeof(float) * (size_t)M * 16), *b = malloc(sizeof(float) * 16 * (size_t)N);
    for (int i = 0; i < M * 16; i++) a[i] = (float)((i * 37) % 19) / 4.0f - 2.0f;
    for (int i = 0; i < 16 * N; i++) b[i] = (float)((i * 11) % 13) / 8.0f - 0.75f;
    int64_t sa[] = {M, 16}, sb[] = {16, N};
    const int64_t *in_shapes[] = {sa, sb};
    const void *in[] = {a, b};
    assert_ok(&e, harp_model_run_shaped(&e, m, in, in_shapes, NULL));
    int64_t shape[HARP_MAX_RANK];
    int rank = 0;
    const float *y = harp_model_output(m, 0, shape, &rank);
    assert_true(y && rank == 2 && shape[0] == M && shape[1] == N);
    for (int i = 0; i < M; i++)
      for (int j = 0; j < N; j++) {
        double want = 0;
        for (int k = 0; k < 16; k++) want += (double)a[i * 16 + k] * b[k * N + j];
        assert_true(fabs(want - y[i * N + j]) < 1e-4);
      }
    free(a);
    free(b);
  }
  assert_int_equal(harp_shapeset_objects(c, NULL, NULL), 2);
  harp_model_free(m);
  harp_compiled_free(c);
}

/* Bad settings, and a model without ShapeSets through the shaped calls. */
static void test_errors(void **state) {
  (void)state;
  char path[1024];
  model_path(path, sizeof path, "softmax_rows.json");
  harp_error e = {0};
  harp_compiled *c = NULL;
  const char *bad[] = {"R=5", NULL}, *syms[] = {"L=33", NULL}, *nosuch[] = {"Q=2..5", NULL};
  harp_options o = {.shapesets = bad, .syms = syms};
  assert_int_equal(harp_compile_file(&e, path, &o, &c), HARP_E_USAGE);
  assert_null(c);
  harp_error_clear(&e);
  o.shapesets = nosuch;
  assert_int_not_equal(harp_compile_file(&e, path, &o, &c), HARP_OK);
  assert_null(c);
  harp_error_clear(&e);
  const char *ok[] = {"R=2..8", NULL};
  o.shapesets = ok, o.backend = HARP_BACKEND_CUDA;
  assert_int_equal(harp_compile_file(&e, path, &o, &c), HARP_E_UNSUPPORTED);
  harp_error_clear(&e);
  /* no ShapeSets: the compiled shapes only, outputs kept for harp_model_output */
  const char *both[] = {"R=3", "L=33", NULL};
  harp_options plain = {.syms = both};
  assert_ok(&e, harp_compile_file(&e, path, &plain, &c));
  harp_model *m;
  assert_ok(&e, harp_model_new(&e, c, NULL, 0, NULL, &m));
  float x[3 * 33] = {0};
  int64_t s[] = {3, 33}, s4[] = {4, 33};
  const int64_t *in_shapes[] = {s4};
  const void *in[] = {x};
  assert_int_equal(harp_model_run_shaped(&e, m, in, in_shapes, NULL), HARP_E_INPUT_MISMATCH);
  harp_error_clear(&e);
  in_shapes[0] = s;
  assert_ok(&e, harp_model_run_shaped(&e, m, in, in_shapes, NULL));
  int64_t shape[HARP_MAX_RANK];
  int rank = 0;
  const float *y = harp_model_output(m, 0, shape, &rank);
  assert_true(y && rank == 2 && shape[0] == 3 && fabsf(y[0] - 1.0f / 33) < 1e-6f);
  harp_model_free(m);
  harp_compiled_free(c);
}

/* Run model instance m of compiled c at input shapes in_shapes (inputs of
 * zeros, enough for n floats each): its status, the caller's output buffer
 * of n floats checked untouched on an error. */
static harp_status run_at(harp_error *e, harp_model *m, const harp_compiled *c, const int64_t *const *in_shapes, size_t n) {
  float *z = calloc(n, sizeof *z), *y = malloc(n * sizeof *y);
  assert_true(z && y);
  for (size_t i = 0; i < n; i++) y[i] = 7.0f;
  const void *in[] = {z, z};
  void *out[] = {y};
  harp_status st = harp_model_run_shaped(e, m, in, in_shapes, out);
  for (size_t i = 0; st && i < n; i++) assert_true(y[i] == 7.0f);
  free(z);
  free(y);
  (void)c;
  return st;
}

/* Bindings that break a model, and sizes past the limits: InputMismatch
 * (or LimitExceeded for a box) before any kernel runs, the caller's buffer
 * untouched, with shapeset_recompile too (such a binding compiles nothing). */
static void test_bad_bindings(void **state) {
  (void)state;
  char path[1024];
  harp_error e = {0};
  harp_compiled *c;
  harp_model *m;
  /* a Reshape to n / 4 rows: n = 10 breaks it, n = 12 runs */
  model_path(path, sizeof path, "dsym_reshape.harp");
  const char *nbox[] = {"n=4..64", NULL};
  harp_options o = {.shapesets = nbox, .cache_dir = fresh_cache(), .shapeset_recompile = true};
  assert_ok(&e, harp_compile_file(&e, path, &o, &c));
  assert_ok(&e, harp_model_new(&e, c, NULL, 0, NULL, &m));
  int64_t n12[] = {12}, n10[] = {10};
  const int64_t *sh[] = {n12, n12};
  assert_ok(&e, run_at(&e, m, c, sh, 64));
  sh[0] = n10;
  assert_int_equal(run_at(&e, m, c, sh, 64), HARP_E_INPUT_MISMATCH);
  assert_non_null(strstr(e.msg, "n=10"));
  harp_error_clear(&e);
  assert_int_equal(harp_shapeset_objects(c, NULL, NULL), 1); /* the breaking binding compiled nothing */
  harp_model_free(m);
  harp_compiled_free(c);
  /* a tie: y = upsample2(x) + z needs G = 2 H (the box learns G := 2*H) */
  model_path(path, sizeof path, "up2_add.harp");
  const char *tbox[] = {"H=2..12", "G=4..24", NULL}, *fix[] = {"N=1", "W=8", "V=16", NULL};
  harp_options ot = {.shapesets = tbox, .syms = fix, .cache_dir = fresh_cache()};
  assert_ok(&e, harp_compile_file(&e, path, &ot, &c));
  assert_ok(&e, harp_model_new(&e, c, NULL, 0, NULL, &m));
  int64_t x5[] = {1, 8, 5, 8}, z10[] = {1, 8, 10, 16}, z11[] = {1, 8, 11, 16};
  sh[0] = x5, sh[1] = z10;
  assert_ok(&e, run_at(&e, m, c, sh, 8 * 11 * 16));
  sh[1] = z11;
  assert_int_equal(run_at(&e, m, c, sh, 8 * 11 * 16), HARP_E_INPUT_MISMATCH);
  assert_non_null(strstr(e.msg, "its definition 2*H gives 10"));
  harp_error_clear(&e);
  harp_model_free(m);
  harp_compiled_free(c);
  /* 2^37 rows of 16 (2^41 elements): refused as the shape is read, even where a binding outside compiles */
  model_path(path, sizeof path, "gemm_chain4.json");
  const char *mbox[] = {"M=2..40", NULL}, *d[] = {"D=16", NULL};
  harp_options om = {.shapesets = mbox, .syms = d, .cache_dir = fresh_cache(), .shapeset_recompile = true};
  assert_ok(&e, harp_compile_file(&e, path, &om, &c));
  unsigned char *params = calloc(harp_params_bytes(c) + 1, 1);
  assert_ok(&e, harp_model_new(&e, c, params, harp_params_bytes(c), NULL, &m));
  int64_t huge[] = {(int64_t)1 << 37, D};
  sh[0] = huge;
  assert_int_equal(run_at(&e, m, c, sh, 64), HARP_E_INPUT_MISMATCH);
  assert_non_null(strstr(e.msg, "too large"));
  harp_error_clear(&e);
  int64_t shape[HARP_MAX_RANK];
  int rank = 0;
  assert_int_equal(harp_output_shape_for(&e, c, sh, 0, shape, &rank), HARP_E_INPUT_MISMATCH);
  harp_error_clear(&e);
  assert_int_equal(harp_shapeset_objects(c, NULL, NULL), 1);
  harp_model_free(m);
  free(params);
  harp_compiled_free(c);
  /* a box whose upper corner is 2^40 rows of 16: LimitExceeded at the compile */
  const char *big[] = {"M=2..1099511627776", NULL};
  om.shapesets = big;
  assert_int_equal(harp_compile_file(&e, path, &om, &c), HARP_E_LIMIT);
  assert_non_null(strstr(e.msg, "upper corner"));
  harp_error_clear(&e);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gemm_chain),
      cmocka_unit_test(test_softmax_rows),
      cmocka_unit_test(test_fallback),
      cmocka_unit_test(test_errors),
      cmocka_unit_test(test_bad_bindings),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
