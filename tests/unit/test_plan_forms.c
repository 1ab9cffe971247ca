/* test_plan_forms.c — the plan's two forms: the seed 000 §1.7 DSL example
 * against the §12.5 JSON example, round trips, extension statements, and
 * plan_convert. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <jansson.h>

#include "plan_test_util.h"

static void parse_ok(const char *text, plan_arch arch, plan_t *p) {
  harp_error e = {0};
  harp_status st = plan_parse(text, "t.plan", arch, p, &e);
  if (st) fail_msg("parse failed: %s\n--- text ---\n%s", err_text(&e), text);
}

static char *to_json(const plan_t *p) {
  char *s = NULL;
  harp_error e = {0};
  assert_int_equal(plan_to_json(p, &s, &e), HARP_OK);
  return s;
}

static char *to_dsl(const plan_t *p) {
  char *s = NULL;
  harp_error e = {0};
  assert_int_equal(plan_to_dsl(p, &s, &e), HARP_OK);
  return s;
}

/* JSON texts equal as values (key order inside objects ignored by jansson). */
static void assert_json_equal(const char *a, const char *b) {
  json_error_t je;
  json_t *x = json_loads(a, 0, &je), *y = json_loads(b, 0, &je);
  assert_non_null(x);
  assert_non_null(y);
  if (!json_equal(x, y)) fail_msg("JSON differs:\n%s\n---\n%s", a, b);
  json_decref(x);
  json_decref(y);
}

/* The seed DSL alone: the fields it says, plus the documented defaults
 * (arch sm80, warp tile 64x64, swizzled A/B, row-major C); algo_choice and
 * local_edges come from the region, so they are empty. */
static void test_seed_dsl_alone(void **state) {
  (void)state;
  plan_t p;
  parse_ok(SEED_DSL, PLAN_ARCH_SM80, &p);
  assert_int_equal(p.ntile, 3);
  assert_int_equal(p.tile[0], 128);
  assert_int_equal(p.tile[1], 64);
  assert_int_equal(p.tile[2], 64);
  assert_int_equal(p.warp_m, 64);
  assert_int_equal(p.warp_n, 64);
  assert_int_equal(p.nreorder, 0); /* the seed's reorder is the canonical order */
  char *j = to_json(&p);
  json_error_t je;
  json_t *want = json_loads(SEED_JSON, 0, &je);
  assert_non_null(want);
  json_object_set_new(want, "algo_choice", json_object());
  json_object_set_new(want, "local_edges", json_array());
  char *w = json_dumps(want, 0);
  assert_json_equal(j, w);
  free(w);
  json_decref(want);
  free(j);
}

/* With the region of §7.1 (GEMM + bias + ReLU, sum_k -> relu in registers)
 * the seed DSL gives exactly the §12.5 example, byte for byte. */
static void test_seed_dsl_equals_seed_json(void **state) {
  (void)state;
  plan_t p, q;
  parse_ok(SEED_DSL, PLAN_ARCH_SM80, &p);
  plan_region_info r = gemm_bias_relu_region(1024, 1024, 1024);
  plan_fill_from_region(&p, &r);
  char *j = to_json(&p);
  assert_string_equal(j, SEED_JSON);
  /* and back: the §12.5 JSON parses to the same plan */
  parse_ok(SEED_JSON, PLAN_ARCH_SM80, &q);
  assert_true(plan_equal(&p, &q));
  /* the plan fits its region on the A100 */
  harp_error e = {0};
  plan_machine m;
  plan_machine_get(PLAN_ARCH_SM80, &m);
  if (plan_validate(&p, &r, &m, NULL, &e)) fail_msg("%s", err_text(&e));
  free(j);
}

/* The seed JSON -> DSL keeps the seed's statements (plus explicit defaults)
 * and DSL -> JSON -> DSL is byte-equal after one normalisation. */
static void test_round_trips_seed(void **state) {
  (void)state;
  plan_t p, q, s;
  parse_ok(SEED_JSON, PLAN_ARCH_SM80, &p);
  char *d = to_dsl(&p);
  assert_non_null(strstr(d, "reorder m.o n.o k.o m.i.o n.i.o k.i.o m.i.i n.i.i k.i.i;\n"));
  assert_non_null(strstr(d, "cache_read A smem at=k.i pingpong=true;\n"));
  assert_non_null(strstr(d, "predicate_tail m.i.i n.i.i k.i.i;\n"));
  assert_non_null(strstr(d, "algo_choice matmul implicit_gemm;\n"));
  assert_non_null(strstr(d, "local_edge sum_k -> relu reg;\n"));
  parse_ok(d, PLAN_ARCH_CPU /* arch comes from the text */, &q);
  assert_true(plan_equal(&p, &q));
  char *j1 = to_json(&p), *j2 = to_json(&q);
  assert_string_equal(j1, j2); /* JSON -> DSL -> JSON */
  char *d2 = to_dsl(&q);
  assert_string_equal(d, d2);
  /* DSL -> JSON -> DSL from the seed's own DSL text */
  parse_ok(SEED_DSL, PLAN_ARCH_SM80, &s);
  char *n1 = to_dsl(&s);
  char *js = to_json(&s);
  parse_ok(js, PLAN_ARCH_SM80, &q);
  char *n2 = to_dsl(&q);
  assert_string_equal(n1, n2);
  free(d), free(d2), free(j1), free(j2), free(n1), free(n2), free(js);
}

/* Every statement, extensions included, survives DSL -> JSON -> DSL. */
static const char *const FULL_DSL =
    "# a plan that uses every statement\n"
    "split x 64\n"
    "split y 128      # newlines end statements too\n"
    "split r 32; split x.i 16; split y.i 32; split r.i 16; split x.i.i 8\n"
    "fuse x.o y.o -> xy.o\n"
    "reorder xy.o r.o x.i.o y.i.o r.i.o x.i.i.o x.i.i.i y.i.i r.i.i\n"
    "bind xy.o block.x; bind x.i.o warp.y; bind y.i.o warp.x\n"
    "pipeline r.i stages=3\n"
    "cache_read A smem at=r.i pingpong=true\n"
    "cache_read B smem at=r.i\n"
    "vectorize y.i.i 4\n"
    "unroll r.i.i 4; unroll x.i.i.i 2\n"
    "predicate_tail x.i.i.i y.i.i\n"
    "epilogue bias silu residual\n"
    "algo_choice matmul splitk_parallel\n"
    "algo_choice attention online_softmax\n"
    "arch sm90\n"
    "layout_hint A_swizzle=false; layout_hint C_stride=col\n"
    "local_edge sum_k -> silu reg\n"
    "local_edge conv -> pool smem_ring depth=3\n";

static void test_round_trip_everything(void **state) {
  (void)state;
  plan_t p, q, r;
  parse_ok(FULL_DSL, PLAN_ARCH_SM80, &p);
  assert_int_equal(p.arch, PLAN_ARCH_SM90);
  assert_string_equal(p.tile_axes[0], "x");
  assert_string_equal(p.tile_axes[2], "r");
  assert_int_equal(p.warp_m, 16);
  assert_int_equal(p.warp_n, 32);
  assert_int_equal(p.nsplits, 2); /* r.i 16 and x.i.i 8 */
  assert_int_equal(p.nfuse, 1);
  assert_int_equal(p.nunroll, 2);
  assert_int_equal(p.stages, 3);
  assert_false(p.cache[1].pingpong);
  assert_false(p.a_swizzle);
  assert_true(p.b_swizzle);
  assert_true(p.c_col);
  assert_int_equal(p.edges[1].depth, 3);
  assert_true(p.nreorder > 0);
  char *j = to_json(&p);
  /* extension keys appear because they differ from their defaults */
  assert_non_null(strstr(j, "\"tile_axes\":[\"x\",\"y\",\"r\"]"));
  assert_non_null(strstr(j, "\"splits\":[{\"axis\":\"r.i\",\"factor\":16},{\"axis\":\"x.i.i\",\"factor\":8}]"));
  assert_non_null(strstr(j, "\"fuse\":[{\"axes\":[\"x.o\",\"y.o\"],\"to\":\"xy.o\"}]"));
  assert_null(strstr(j, "pipeline_axis")); /* r.i is the default */
  parse_ok(j, PLAN_ARCH_CPU, &q);
  assert_true(plan_equal(&p, &q));
  char *d1 = to_dsl(&p), *d2 = to_dsl(&q);
  assert_string_equal(d1, d2);
  parse_ok(d1, PLAN_ARCH_CPU, &r);
  assert_true(plan_equal(&p, &r));
  char *j2 = to_json(&r);
  assert_string_equal(j, j2);
  free(j), free(j2), free(d1), free(d2);
}

/* Statement order does not matter; `warp_tile AxB` equals split m.i / n.i;
 * `;` and newlines separate equally; comments are ignored. */
static void test_equivalent_spellings(void **state) {
  (void)state;
  plan_t a, b, c, d;
  parse_ok("split m 128; split n 64; split k 32; split m.i 64; split n.i 32; vectorize n.i.i 8", PLAN_ARCH_SM80, &a);
  parse_ok("vectorize n.i.i 8\nsplit m 128\n\n  split n 64 # c\nsplit k 32\nwarp_tile 64x32\n", PLAN_ARCH_SM80, &b);
  parse_ok("split n.i 32; split m.i 64; vectorize n.i.i 8; split m 128; split n 64; split k 32;;", PLAN_ARCH_SM80, &c);
  assert_true(plan_equal(&a, &b));
  assert_true(plan_equal(&a, &c));
  /* an explicit pipeline / layout equal to the default is the same plan */
  parse_ok("split m 128; split n 64; split k 32; warp_tile 64x32; vectorize n.i.i 8; pipeline k.i stages=2;"
           "layout_hint A_swizzle=true; arch sm80",
           PLAN_ARCH_SM90, &d);
  assert_true(plan_equal(&a, &d));
}

/* Defaults depend on the arch: SM90 warpgroup tiles, CPU micro-tiles and
 * no swizzle on the CPU. */
static void test_arch_defaults(void **state) {
  (void)state;
  plan_t p;
  parse_ok("split m 128; split n 128; split k 64", PLAN_ARCH_SM90, &p);
  assert_int_equal(p.warp_m, 64);
  assert_int_equal(p.warp_n, 128);
  assert_true(p.a_swizzle);
  parse_ok("split m 128; split n 128; split k 64; arch cpu", PLAN_ARCH_SM80, &p);
  assert_int_equal(p.arch, PLAN_ARCH_CPU);
  assert_int_equal(p.warp_m, 4);
  assert_int_equal(p.warp_n, 16);
  assert_false(p.a_swizzle);
  assert_false(p.b_swizzle);
  char *d = to_dsl(&p);
  assert_null(strstr(d, "layout_hint")); /* defaults are not printed */
  free(d);
  /* a one-axis plan: warp_tile "Wx1" in JSON, split m.i in the DSL */
  parse_ok("split i 1024; split i.i 256", PLAN_ARCH_SM80, &p);
  assert_int_equal(p.ntile, 1);
  assert_int_equal(p.warp_m, 256);
  assert_int_equal(p.warp_n, 0);
  char *j = to_json(&p);
  assert_non_null(strstr(j, "\"warp_tile\":\"256x1\""));
  assert_non_null(strstr(j, "\"tile_axes\":[\"i\"]"));
  plan_t q;
  parse_ok(j, PLAN_ARCH_SM80, &q);
  assert_true(plan_equal(&p, &q));
  free(j);
}

static void test_convert(void **state) {
  (void)state;
  char *out = NULL;
  harp_error e = {0};
  assert_int_equal(plan_convert(SEED_DSL, "seed.plan", NULL, &out, &e), HARP_OK);
  assert_true(plan_text_is_json(out));
  free(out);
  assert_int_equal(plan_convert(SEED_JSON, "seed.json", NULL, &out, &e), HARP_OK);
  assert_false(plan_text_is_json(out));
  assert_non_null(strstr(out, "split m 128;"));
  free(out);
  assert_int_equal(plan_convert(SEED_JSON, "seed.json", "json", &out, &e), HARP_OK);
  assert_string_equal(out, SEED_JSON);
  free(out);
  assert_int_equal(plan_convert(SEED_DSL, "seed.plan", "yaml", &out, &e), HARP_E_USAGE);
  assert_null(out);
  harp_error_clear(&e);
  assert_int_equal(plan_convert("split m 0", "bad.plan", "json", &out, &e), HARP_E_INVALID_ARG);
  assert_null(out);
}

static void test_load_file_and_dump(void **state) {
  (void)state;
  char path[512];
  snprintf(path, sizeof path, "%s/tests/plans/seed000.plan", HARP_SOURCE_DIR);
  plan_t p, q;
  harp_error e = {0};
  if (plan_load_file(path, PLAN_ARCH_SM80, &p, &e)) fail_msg("%s", err_text(&e));
  parse_ok(SEED_DSL, PLAN_ARCH_SM80, &q);
  assert_true(plan_equal(&p, &q));
  snprintf(path, sizeof path, "%s/tests/plans/seed000.json", HARP_SOURCE_DIR);
  if (plan_load_file(path, PLAN_ARCH_SM80, &p, &e)) fail_msg("%s", err_text(&e));
  plan_region_info r = gemm_bias_relu_region(1, 1, 1);
  plan_fill_from_region(&q, &r);
  assert_true(plan_equal(&p, &q));
  assert_int_equal(plan_load_file("/nonexistent/x.plan", PLAN_ARCH_SM80, &p, &e), HARP_E_IO);

  const char *names[2] = {"r0", "r1"};
  plan_t two[2] = {p, q};
  char *dump = NULL;
  harp_error_clear(&e);
  assert_int_equal(plan_dump_json(names, two, 2, &dump, &e), HARP_OK);
  json_error_t je;
  json_t *root = json_loads(dump, 0, &je);
  assert_non_null(root);
  json_t *plans = json_object_get(root, "plans");
  assert_int_equal(json_array_size(plans), 2);
  assert_string_equal(json_string_value(json_object_get(json_array_get(plans, 1), "region")), "r1");
  json_t *t = json_object_get(json_object_get(json_array_get(plans, 0), "plan"), "tile");
  assert_int_equal(json_integer_value(json_array_get(t, 0)), 128);
  json_decref(root);
  free(dump);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_seed_dsl_alone),       cmocka_unit_test(test_seed_dsl_equals_seed_json),
      cmocka_unit_test(test_round_trips_seed),     cmocka_unit_test(test_round_trip_everything),
      cmocka_unit_test(test_equivalent_spellings), cmocka_unit_test(test_arch_defaults),
      cmocka_unit_test(test_convert),              cmocka_unit_test(test_load_file_and_dump),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
