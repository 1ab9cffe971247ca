/* test_sgen_nest.c — ShapeSet objects whose generic loop nests take their
 * sizes at run time (issue 25; astgen_sym.c, region_c.c), and windows whose
 * padding holds at every parity of the box, each one object checked
 * against the interpreter at both corners and between, odd sizes included:
 *  - seq_nest.harp over W: a hard-swish fused into a 3x2 average pool, a
 *    padded 1x3 conv along the W / 2 tokens, the mean over them and the
 *    tokens transposed (loop bounds, strides, local arrays and the mean's
 *    divisor of the token count: hp_sv<i>);
 *  - dsym_cnn.harp (a stride-2 padded conv, a 2x2 max pool) and
 *    pool_pad_hw.harp (padded stride-2 max pools) over boxes with even
 *    corners, run at odd sizes: a window at an even size never reads its
 *    last pad column, at an odd one it does (rc_window_pads).
 * The source must read the sizes at run time (hp_sv / hp_sym_). */
#include "sgen_testutil.h"

typedef struct nest_case {
  const char *model;
  rt_sgen_sym box[8];
  int nbox;
  const char *at[5][8]; /* bindings: "NAME=V", NULL-ended */
  int nout;
  double tol;
  const char *must; /* text the object's source holds */
} nest_case;

static const nest_case CASES[] = {
    {"seq_nest.harp",
     {{"W", 8, 64}, {"N", 1, 1}, {"C", 24, 24}},
     3,
     {{"W=8", "N=1", "C=24"}, {"W=64", "N=1", "C=24"}, {"W=33", "N=1", "C=24"}, {"W=9", "N=1", "C=24"}, {"W=46", "N=1", "C=24"}},
     3,
     1e-5,
     "< hp_sv"},
    {"dsym_cnn.harp",
     {{"H", 8, 40}, {"W", 8, 36}, {"N", 1, 1}, {"C", 3, 3}, {"K", 8, 8}},
     5,
     {{"H=8", "W=8", "N=1", "C=3", "K=8"},
      {"H=40", "W=36", "N=1", "C=3", "K=8"},
      {"H=17", "W=23", "N=1", "C=3", "K=8"},
      {"H=33", "W=9", "N=1", "C=3", "K=8"},
      {"H=11", "W=30", "N=1", "C=3", "K=8"}},
     1,
     1e-4,
     "hp_sym_["},
    {"pool_pad_hw.harp",
     {{"N", 1, 2}, {"H", 4, 40}, {"W", 4, 68}, {"C", 7, 7}},
     4,
     {{"N=1", "H=4", "W=4", "C=7"},
      {"N=2", "H=40", "W=68", "C=7"},
      {"N=1", "H=13", "W=33", "C=7"},
      {"N=2", "H=9", "W=17", "C=7"},
      {"N=1", "H=22", "W=65", "C=7"}},
     3,
     1e-6,
     "hp_sym_["},
};

static void run_case(const nest_case *k) {
  rt_sgen *s = compile_box(k->model, k->box, k->nbox, false);
  if (getenv("SGEN_DEBUG")) fprintf(stderr, "%s\n", rt_sgen_source(s) ? rt_sgen_source(s) : rt_sgen_fallback(s));
  if (rt_sgen_fallback(s)) fail_msg("%s: not one object: %s", k->model, rt_sgen_fallback(s));
  if (!strstr(rt_sgen_source(s), k->must)) fail_msg("%s: the source holds no `%s`", k->model, k->must);
  for (int b = 0; b < 5; b++) check_at(s, k->model, k->at[b], k->nout, k->tol);
  assert_int_equal(rt_sgen_objects(s), 1);
  rt_sgen_free(s);
}

static void test_nest_models(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) run_case(&CASES[i]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_nest_models),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
