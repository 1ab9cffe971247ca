/* test_c_api_autobox.c — the box harp chooses by itself through harp.h
 * (harp_options.shapesets NULL; api_autobox.c, autobox.c): dyn_conv.onnx
 * (x: N x 4 x H x W; tests/models/gen_dyn_conv.py) on a cache of its own,
 * compiled at H x W = 20 x 20 (the bucket's first binding: exact, no
 * ShapeSet object), again at 20 x 20 (still exact), at 24 x 18 (a second
 * binding in the bucket 16..31 x 16..31: the box, one C compile; the
 * binding's shapes reported, harp_model_run at it, harp_model_run_shaped at
 * 17 x 30 inside and 40 x 40 outside, compiled on its own), at 21 x 21
 * (the box from the disk cache: no C compile); {"exact"} at 25 x 25 (no
 * box); one-point boxes (H=20..20: one object for that binding); harp_auto_box's
 * rule.  Every output against a reference computed here in double. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harp.h"
#include "testutil.h"

static void model_path(char *path, size_t cap) { snprintf(path, cap, "%s/tests/models/dyn_conv.onnx", HARP_SOURCE_DIR); }

static const char *fresh_cache(void) {
  static char dir[64];
  snprintf(dir, sizeof dir, "/tmp/harp_capi_autobox_XXXXXX");
  assert_non_null(mkdtemp(dir));
  return dir;
}

/* x: n x 4 x h x w, pseudo-random in [-2, 2]. */
static float *image(int n, int h, int w, unsigned seed) {
  size_t len = (size_t)n * 4 * h * w;
  float *x = malloc(sizeof(float) * len);
  for (size_t i = 0; i < len; i++) {
    seed = seed * 1103515245u + 12345u;
    x[i] = (float)((seed >> 16) % 2001) / 500.0f - 2.0f;
  }
  return x;
}

/* relu(conv3x3(x, w, b, pad 1)) * 0.5 + x[:, :1] in double, with
 * gen_dyn_conv.py's weights: is y (n x 8 x h x w) within 1e-4? */
static bool conv_ok(const float *x, int n, int h, int wd, const float *y) {
  bool ok = true;
  for (int b = 0; b < n; b++)
    for (int k = 0; k < 8; k++)
      for (int i = 0; i < h; i++)
        for (int j = 0; j < wd; j++) {
          double s = (double)(k % 5 - 2) / 10;
          for (int c = 0; c < 4; c++)
            for (int di = 0; di < 3; di++)
              for (int dj = 0; dj < 3; dj++) {
                int ii = i + di - 1, jj = j + dj - 1;
                if (ii < 0 || ii >= h || jj < 0 || jj >= wd) continue;
                int widx = ((k * 4 + c) * 3 + di) * 3 + dj;
                s += (double)((widx * 7) % 13 - 6) / 20 * x[((size_t)(b * 4 + c) * h + ii) * wd + jj];
              }
          double want = (s > 0 ? s : 0) * 0.5 + x[((size_t)(b * 4) * h + i) * wd + j];
          double got = y[((size_t)(b * 8 + k) * h + i) * wd + j];
          if (fabs(want - got) > 1e-4 + 1e-4 * fabs(want)) ok = false;
        }
  return ok;
}

/* dyn_conv.onnx compiled at 1 x 4 x h x w with opts o (shapes set here). */
static harp_compiled *compile_at(harp_options *o, int h, int w) {
  char path[1024], shape[64];
  model_path(path, sizeof path);
  snprintf(shape, sizeof shape, "x=1x4x%dx%d", h, w);
  const char *shapes[] = {shape, NULL};
  o->shapes = shapes;
  harp_error e = {0};
  harp_compiled *c = NULL;
  assert_ok(&e, harp_compile_file(&e, path, o, &c));
  o->shapes = NULL;
  return c;
}

/* c run by harp_model_run at its binding 1 x 4 x h x w (its reported shapes checked first). */
static void run_plain(harp_compiled *c, int h, int w) {
  int64_t s[HARP_MAX_RANK];
  assert_int_equal(harp_input_shape(c, 0, s), 4);
  assert_true(s[0] == 1 && s[1] == 4 && s[2] == h && s[3] == w);
  assert_int_equal(harp_output_shape(c, 0, s), 4);
  assert_true(s[0] == 1 && s[1] == 8 && s[2] == h && s[3] == w);
  harp_error e = {0};
  harp_model *m = NULL;
  assert_ok(&e, harp_model_new(&e, c, harp_embedded_params(c), harp_params_bytes(c), NULL, &m));
  float *x = image(1, h, w, (unsigned)(h * 100 + w)), *y = calloc((size_t)8 * h * w, sizeof *y);
  const void *in[] = {x};
  void *out[] = {y};
  int rc = harp_model_run(m, in, out);
  if (rc) fail_msg("harp_model_run: %s", harp_model_error(m) ? harp_model_error(m) : "?");
  assert_true(conv_ok(x, 1, h, w, y));
  free(x);
  free(y);
  harp_model_free(m);
}

static int objects(const harp_compiled *c, int *cc) {
  const char *why = NULL;
  int n = harp_shapeset_objects(c, cc, &why);
  if (why) fail_msg("a compile per binding: %s", why);
  return n;
}

static void test_tiers(void **state) {
  (void)state;
  harp_options o = {.cache_dir = fresh_cache()};
  int cc = -1;
  harp_compiled *c = compile_at(&o, 20, 20); /* the bucket's first binding: alone */
  assert_int_equal(objects(c, &cc), 0);
  run_plain(c, 20, 20);
  harp_compiled_free(c);
  c = compile_at(&o, 20, 20); /* the same binding again: alone */
  assert_int_equal(objects(c, &cc), 0);
  harp_compiled_free(c);
  c = compile_at(&o, 24, 18); /* another binding in the bucket: the box */
  assert_int_equal(objects(c, &cc), 1);
  assert_int_equal(cc, 1);
  run_plain(c, 24, 18);
  harp_error e = {0};
  harp_model *m = NULL;
  assert_ok(&e, harp_model_new(&e, c, harp_embedded_params(c), harp_params_bytes(c), NULL, &m));
  int hw[2][2] = {{17, 30}, {40, 40}}; /* inside the box; outside (an object of its own) */
  for (int t = 0; t < 2; t++) {
    int h = hw[t][0], w = hw[t][1];
    float *x = image(1, h, w, (unsigned)(7 * h + w));
    int64_t s[] = {1, 4, h, w}, os[HARP_MAX_RANK];
    const int64_t *shapes[] = {s};
    const void *in[] = {x};
    assert_ok(&e, harp_model_run_shaped(&e, m, in, shapes, NULL));
    int rank = 0;
    const float *y = harp_model_output(m, 0, os, &rank);
    assert_non_null(y);
    assert_true(rank == 4 && os[2] == h && os[3] == w);
    assert_true(conv_ok(x, 1, h, w, y));
    free(x);
    assert_int_equal(objects(c, &cc), 1 + t); /* 17 x 30 on the box's object; 40 x 40 one more */
  }
  harp_model_free(m);
  harp_compiled_free(c);
  c = compile_at(&o, 21, 21); /* a later compile in the bucket: the box, from the disk cache */
  assert_int_equal(objects(c, &cc), 1);
  assert_int_equal(cc, 0);
  run_plain(c, 21, 21);
  harp_compiled_free(c);
  const char *exact[] = {"exact", NULL};
  o.shapesets = exact;
  c = compile_at(&o, 25, 25);
  assert_int_equal(objects(c, &cc), 0);
  run_plain(c, 25, 25);
  harp_compiled_free(c);
}

/* Boxes whose LO is their HI hold one binding: one object compiled for
 * it (no size read at run time), run there; another size is refused. */
static void test_one_point(void **state) {
  (void)state;
  const char *one[] = {"H=20..20", "W=12..12", NULL}, *mixed[] = {"H=20..20", "W=8..15", NULL};
  harp_options o = {.cache_dir = fresh_cache(), .shapesets = one};
  int cc = -1;
  harp_compiled *c = compile_at(&o, 20, 12);
  assert_int_equal(objects(c, &cc), 1);
  harp_error e = {0};
  harp_model *m = NULL;
  assert_ok(&e, harp_model_new(&e, c, harp_embedded_params(c), harp_params_bytes(c), NULL, &m));
  int64_t s1[] = {1, 4, 20, 12}, s2[] = {1, 4, 20, 13}, os[HARP_MAX_RANK];
  const int64_t *shapes[] = {s1};
  float *x = image(1, 20, 13, 5);
  const void *in[] = {x};
  assert_ok(&e, harp_model_run_shaped(&e, m, in, shapes, NULL));
  int rank = 0;
  const float *y = harp_model_output(m, 0, os, &rank);
  assert_non_null(y);
  assert_true(rank == 4 && os[2] == 20 && os[3] == 12);
  assert_true(conv_ok(x, 1, 20, 12, y));
  shapes[0] = s2;
  assert_int_equal(harp_model_run_shaped(&e, m, in, shapes, NULL), HARP_E_INPUT_MISMATCH);
  harp_error_clear(&e);
  free(x);
  harp_model_free(m);
  harp_compiled_free(c);
  o.shapesets = mixed; /* H bound, W a box */
  c = compile_at(&o, 20, 12);
  assert_int_equal(objects(c, &cc), 1);
  assert_ok(&e, harp_model_new(&e, c, harp_embedded_params(c), harp_params_bytes(c), NULL, &m));
  x = image(1, 20, 9, 3);
  int64_t s3[] = {1, 4, 20, 9};
  shapes[0] = s3, in[0] = x;
  assert_ok(&e, harp_model_run_shaped(&e, m, in, shapes, NULL));
  y = harp_model_output(m, 0, os, &rank);
  assert_non_null(y);
  assert_true(conv_ok(x, 1, 20, 9, y));
  free(x);
  harp_model_free(m);
  harp_compiled_free(c);
}

static void test_rule(void **state) {
  (void)state;
  const char *names[] = {"H", "W", "N", "H", "x:3"}, *out[5];
  int64_t v[] = {20, 2, 1, 20, 31}, lo[5], hi[5];
  assert_int_equal(harp_auto_box(5, names, v, out, lo, hi), 4);
  assert_true(!strcmp(out[0], "H") && lo[0] == 16 && hi[0] == 31);
  assert_true(!strcmp(out[1], "W") && lo[1] == 2 && hi[1] == 3);
  assert_true(!strcmp(out[2], "N") && lo[2] == 1 && hi[2] == 1);
  assert_true(!strcmp(out[3], "x:3") && lo[3] == 16 && hi[3] == 31);
  int64_t big[] = {32, 0};
  assert_int_equal(harp_auto_box(2, (const char *[]){"H", "W"}, big, out, lo, hi), 2);
  assert_true(lo[0] == 32 && hi[0] == 63 && lo[1] == 0 && hi[1] == 0);
  int64_t bad[] = {20, 21};
  assert_int_equal(harp_auto_box(2, (const char *[]){"H", "H"}, bad, out, lo, hi), -1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rule),
      cmocka_unit_test(test_tiers),
      cmocka_unit_test(test_one_point),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
