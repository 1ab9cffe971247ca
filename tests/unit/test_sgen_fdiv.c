/* test_sgen_fdiv.c — ShapeSet objects whose maps read through floor
 * divisions and remainders (gmap_c.c): one object over the image size,
 * checked against the interpreter at both corners and between, odd sizes
 * included:
 *  - up2_add.harp: a nearest x2 upsample (an element repeat) plus a
 *    lateral map, x read at (h / 2, w / 2);
 *  - up2_crop.harp: the same cropped to an odd width, so a row ends inside
 *    a block of two points (the kernel's point-by-point rest);
 *  - d2s_hw.harp: a depth-to-space (CRD, block 2) with a per-channel bias
 *    and a sigmoid, x read at (4 c + 2 (h % 2) + w % 2, h / 2, w / 2);
 *  - upcat_hw.harp: a concat of maps upsampled x4 and x2 with one at full
 *    size (each a slab of y), two and three images.
 * The source must carry the kernel (its banner) and read the sizes at run
 * time (hp_sym_). */
#include "sgen_testutil.h"

typedef struct fdiv_case {
  const char *model;
  rt_sgen_sym box[8];
  int nbox;
  const char *at[5][8]; /* bindings: "NAME=V", NULL-ended */
  int ngmap;            /* kernels printed by gmap_c.c, at least */
} fdiv_case;

static const fdiv_case CASES[] = {
    {"up2_add.harp",
     {{"N", 1, 1}, {"H", 4, 40}, {"W", 4, 40}, {"G", 8, 80}, {"V", 8, 80}},
     5,
     {{"N=1", "H=4", "W=4", "G=8", "V=8"},
      {"N=1", "H=40", "W=40", "G=80", "V=80"},
      {"N=1", "H=9", "W=13", "G=18", "V=26"},
      {"N=1", "H=31", "W=5", "G=62", "V=10"},
      {"N=1", "H=6", "W=37", "G=12", "V=74"}},
     1},
    {"up2_crop.harp",
     {{"N", 1, 1}, {"H", 4, 40}, {"W", 4, 40}, {"G", 8, 80}, {"V", 7, 79}},
     5,
     {{"N=1", "H=4", "W=4", "G=8", "V=7"},
      {"N=1", "H=40", "W=40", "G=80", "V=79"},
      {"N=1", "H=9", "W=13", "G=18", "V=25"},
      {"N=1", "H=31", "W=5", "G=62", "V=9"},
      {"N=1", "H=6", "W=37", "G=12", "V=73"}},
     1},
    {"d2s_hw.harp",
     {{"N", 2, 3}, {"H", 3, 41}, {"W", 3, 37}},
     3,
     {{"N=2", "H=3", "W=3"}, {"N=3", "H=41", "W=37"}, {"N=2", "H=10", "W=17"}, {"N=3", "H=27", "W=4"}, {"N=2", "H=5", "W=30"}},
     1},
    {"upcat_hw.harp",
     {{"N", 2, 3}, {"H", 2, 12}, {"W", 2, 11}, {"G", 4, 24}, {"V", 4, 22}, {"P", 8, 48}, {"Q", 8, 44}},
     7,
     {{"N=2", "H=2", "W=2", "G=4", "V=4", "P=8", "Q=8"},
      {"N=3", "H=12", "W=11", "G=24", "V=22", "P=48", "Q=44"},
      {"N=2", "H=7", "W=3", "G=14", "V=6", "P=28", "Q=12"},
      {"N=3", "H=3", "W=10", "G=6", "V=20", "P=12", "Q=40"},
      {"N=2", "H=5", "W=5", "G=10", "V=10", "P=20", "Q=20"}},
     1},
};

static void run_case(const fdiv_case *k) {
  rt_sgen *s = compile_box(k->model, k->box, k->nbox, false);
  if (getenv("SGEN_DEBUG")) fprintf(stderr, "%s\n", rt_sgen_source(s) ? rt_sgen_source(s) : rt_sgen_fallback(s));
  if (rt_sgen_fallback(s)) fail_msg("%s: not one object: %s", k->model, rt_sgen_fallback(s));
  const char *src = rt_sgen_source(s);
  int n = 0;
  for (const char *p = src; (p = strstr(p, "read through floor divisions (ShapeSet)")); p++) n++;
  if (n < k->ngmap) fail_msg("%s: %d gmap kernels, want %d", k->model, n, k->ngmap);
  assert_non_null(strstr(src, "hp_sym_["));
  for (int b = 0; b < 5; b++) check_at(s, k->model, k->at[b], 1, 1e-6);
  assert_int_equal(rt_sgen_objects(s), 1);
  rt_sgen_free(s);
}

static void test_fdiv_models(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) run_case(&CASES[i]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fdiv_models),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
