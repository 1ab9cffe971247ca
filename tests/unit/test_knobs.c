/* test_knobs.c — the knob table (harp/knobs.h): every row complete and
 * distinct, its fields tiling rt_knobs, the defaults, setting by name or
 * variable with the type's checks, and the one reader of the environment
 * (rt_knobs_from_env).  The passes that read each knob are tested where
 * they are (test_prepack: no_prepack, conv; test_tune: no_plans;
 * test_cuda_fake: no_dedup; test_cc_build: cc_jobs; test_plan_search:
 * cpu_ghz, cpu_bw_gbs; tests/py: the CLI's variables). */
#include "testutil.h"

#include "harp/knobs.h"

/* Every row: a name, a HARP_/standard variable, a doc, a default its own
 * setter takes, a field inside rt_knobs; no two rows share a name, a
 * variable or a field. */
static void test_table_complete(void **state) {
  (void)state;
  int n = rt_knob_count();
  assert_true(n >= 16);
  size_t covered = 0;
  for (int i = 0; i < n; i++) {
    const rt_knob *r = rt_knob_at(i);
    assert_non_null(r->name);
    assert_non_null(r->env);
    assert_non_null(r->doc);
    assert_non_null(r->dflt);
    assert_true(strlen(r->doc) > 20);
    assert_true(r->type != RT_KNOB_CHOICE || r->choices);
    assert_true(r->offset < sizeof(rt_knobs));
    assert_ptr_equal(rt_knob_find(r->name), r);
    assert_ptr_equal(rt_knob_find(r->env), r);
    size_t size = r->type == RT_KNOB_STRING ? RT_KNOB_PATH : r->type == RT_KNOB_DOUBLE ? sizeof(double)
                  : r->type == RT_KNOB_BOOL ? sizeof(bool) : sizeof(int);
    covered += size;
    for (int j = 0; j < i; j++) {
      const rt_knob *q = rt_knob_at(j);
      assert_string_not_equal(q->name, r->name);
      assert_string_not_equal(q->env, r->env);
      assert_int_not_equal(q->offset, r->offset);
    }
    harp_error e = {0};
    rt_knobs k;
    rt_knobs_init(&k);
    assert_ok(&e, rt_knob_set(&e, &k, r->name, r->dflt));
    char buf[RT_KNOB_PATH];
    rt_knob_format(&k, r, buf, sizeof buf);
    assert_string_equal(buf, r->dflt); /* the default reads back as written */
  }
  /* the rows' fields are all of rt_knobs (bar padding): a field added to the
   * struct without a row leaves more than padding uncovered */
  assert_true(covered <= sizeof(rt_knobs));
  assert_true(sizeof(rt_knobs) - covered < 32);
  assert_null(rt_knob_at(n));
  assert_null(rt_knob_find("no_such_knob"));
}

/* rt_knobs_init is the constant rt_knobs_or_default(NULL) returns. */
static void test_defaults(void **state) {
  (void)state;
  rt_knobs k;
  memset(&k, 0x5a, sizeof k);
  rt_knobs_init(&k);
  assert_memory_equal(&k, rt_knobs_or_default(NULL), sizeof k);
  assert_ptr_equal(rt_knobs_or_default(&k), &k);
  assert_string_equal(k.cc, "cc");
  assert_false(k.no_dedup);
  assert_int_equal(k.conv, RT_CONV_AUTO);
}

static void test_set(void **state) {
  (void)state;
  harp_error e = {0};
  rt_knobs k;
  rt_knobs_init(&k);
  assert_ok(&e, rt_knob_set(&e, &k, "no_dedup", "1"));
  assert_true(k.no_dedup);
  assert_ok(&e, rt_knob_set(&e, &k, "HARP_NO_DEDUP", "off")); /* by its variable too */
  assert_false(k.no_dedup);
  assert_ok(&e, rt_knob_assign(&e, &k, "conv=direct"));
  assert_int_equal(k.conv, RT_CONV_DIRECT);
  assert_ok(&e, rt_knob_assign(&e, &k, "cc_jobs=4"));
  assert_int_equal(k.cc_jobs, 4);
  assert_ok(&e, rt_knob_assign(&e, &k, "cpu_ghz=2.5"));
  assert_true(k.cpu_ghz == 2.5);
  assert_ok(&e, rt_knob_assign(&e, &k, "cc=/opt/cc=x")); /* the first '=' splits */
  assert_string_equal(k.cc, "/opt/cc=x");
  char buf[64];
  rt_knob_format(&k, rt_knob_find("conv"), buf, sizeof buf);
  assert_string_equal(buf, "direct");
  /* bad values: a UsageError naming the knob, the knob unchanged */
  static const char *const bad[][2] = {{"no_dedup", "maybe"}, {"conv", "winograd"}, {"cc_jobs", "-1"},
                                       {"cc_jobs", "4x"},     {"cpu_ghz", "50"},     {"cpu_bw_gbs", "fast"}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    rt_knobs before = k;
    harp_error_clear(&e);
    assert_int_equal(rt_knob_set(&e, &k, bad[i][0], bad[i][1]), HARP_E_USAGE);
    assert_non_null(strstr(e.msg, bad[i][0]));
    assert_memory_equal(&before, &k, sizeof k);
  }
  harp_error_clear(&e);
  assert_int_equal(rt_knob_assign(&e, &k, "nofusion=1"), HARP_E_USAGE);
  assert_non_null(strstr(e.msg, "nofusion"));
  harp_error_clear(&e);
  assert_int_equal(rt_knob_assign(&e, &k, "no_fusion"), HARP_E_USAGE); /* no '=' */
  char *huge = malloc(RT_KNOB_PATH + 8);
  memset(huge, 'a', RT_KNOB_PATH + 7);
  huge[RT_KNOB_PATH + 7] = 0;
  harp_error_clear(&e);
  assert_int_equal(rt_knob_set(&e, &k, "cache_dir", huge), HARP_E_LIMIT);
  free(huge);
}

/* The environment's variables over the defaults; set but empty: the default;
 * the cache directory's fallbacks; a malformed value names its variable. */
static void test_from_env(void **state) {
  (void)state;
  harp_error e = {0};
  rt_knobs k;
  for (int i = 0; i < rt_knob_count(); i++) unsetenv(rt_knob_at(i)->env);
  setenv("HARP_NO_TEMPLATES", "1", 1);
  setenv("HARP_CONV", "gemm", 1);
  setenv("HARP_CC_JOBS", "", 1);
  setenv("HARP_CPU_BW_GBS", "55", 1);
  setenv("XDG_CACHE_HOME", "/xdg", 1);
  rt_knobs_init(&k);
  assert_ok(&e, rt_knobs_from_env(&e, &k));
  assert_true(k.no_templates);
  assert_false(k.no_dedup);
  assert_int_equal(k.conv, RT_CONV_GEMM);
  assert_int_equal(k.cc_jobs, 0);
  assert_true(k.cpu_bw_gbs == 55);
  assert_string_equal(k.cache_dir, "/xdg/harp");
  setenv("HARP_CACHE_DIR", "/explicit", 1);
  rt_knobs_init(&k);
  assert_ok(&e, rt_knobs_from_env(&e, &k));
  assert_string_equal(k.cache_dir, "/explicit");
  unsetenv("HARP_CACHE_DIR");
  unsetenv("XDG_CACHE_HOME");
  setenv("HOME", "/home/h", 1);
  rt_knobs_init(&k);
  assert_ok(&e, rt_knobs_from_env(&e, &k));
  assert_string_equal(k.cache_dir, "/home/h/.cache/harp");
  setenv("HARP_NO_DEDUP", "sometimes", 1);
  assert_int_equal(rt_knobs_from_env(&e, &k), HARP_E_USAGE);
  assert_non_null(strstr(e.msg, "HARP_NO_DEDUP"));
  for (int i = 0; i < rt_knob_count(); i++) unsetenv(rt_knob_at(i)->env);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_table_complete),
      cmocka_unit_test(test_defaults),
      cmocka_unit_test(test_set),
      cmocka_unit_test(test_from_env),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
