/* test_plan_bad.c — malformed plans give located errors and never crash.
 *
 * tests/plan_bad/EXPECTED lists each file with the error name and the
 * line:col it must report; "validate" files parse and then fail plan_validate
 * against a GEMM m=1000 n=1024 k=1024 fp16 region on sm80.  A mutation sweep
 * then feeds thousands of damaged plans (both forms) to the parsers. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "plan_test_util.h"
#include "util/util.h"

static char *slurp(const char *path) {
  harp_error e = {0};
  char *buf = NULL;
  size_t len = 0;
  if (ut_read_file(&e, path, 1 << 20, &buf, &len)) fail_msg("cannot read %s: %s", path, e.msg);
  return buf;
}

static void test_corpus(void **state) {
  (void)state;
  char dir[512], path[700];
  snprintf(dir, sizeof dir, "%s/tests/plan_bad", HARP_SOURCE_DIR);
  snprintf(path, sizeof path, "%s/EXPECTED", dir);
  char *manifest = slurp(path);
  plan_machine m;
  plan_machine_get(PLAN_ARCH_SM80, &m);
  plan_region_info r = gemm_region(1000, 1024, 1024);
  int n = 0, nparse = 0, nvalidate = 0, ndsl = 0, njson = 0;
  char *save = NULL;
  for (char *line = strtok_r(manifest, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    if (line[0] == '#' || !line[0]) continue;
    char file[128], name[64], phase[16];
    int want_line, want_col;
    assert_int_equal(sscanf(line, "%127s %63s %d:%d %15s", file, name, &want_line, &want_col, phase), 5);
    snprintf(path, sizeof path, "%s/%s", dir, file);
    char *text = slurp(path);
    plan_t p;
    harp_error e = {0};
    harp_status st = plan_parse(text, file, PLAN_ARCH_SM80, &p, &e);
    if (!strcmp(phase, "validate")) {
      if (st) fail_msg("%s: should parse, got %s", file, err_text(&e));
      st = plan_validate(&p, &r, &m, &(plan_src){file, text}, &e);
      nvalidate++;
    } else {
      nparse++;
    }
    if (st == HARP_OK) fail_msg("%s: accepted, expected %s", file, name);
    if (strcmp(harp_status_name(e.code), name) || e.line != want_line || e.col != want_col)
      fail_msg("%s: expected %s at %d:%d, got %s", file, name, want_line, want_col, err_text(&e));
    assert_string_equal(e.file, file);
    assert_true(e.msg[0] != 0);
    assert_non_null(strchr(e.snippet, '^')); /* source line + caret */
    if (strstr(file, ".json")) njson++;
    else ndsl++;
    free(text);
    n++;
  }
  free(manifest);
  /* the acceptance asks for 15; keep the corpus well above that in both forms */
  assert_true(n >= 40);
  assert_true(ndsl >= 15 && njson >= 15);
  assert_true(nparse >= 30 && nvalidate >= 10);
}

/* The caret sits under the reported column of the reported line. */
static void test_snippet(void **state) {
  (void)state;
  plan_t p;
  harp_error e = {0};
  assert_int_equal(plan_parse_dsl("split m 128\nbind m.o block.w\n", "x.plan", PLAN_ARCH_SM80, &p, &e), HARP_E_PARSE);
  assert_string_equal(e.snippet, "bind m.o block.w\n         ^");
  char buf[2048];
  harp_error_format(&e, buf, sizeof buf);
  assert_non_null(strstr(buf, "error[ParseError]: x.plan:2:10: unknown bind target 'block.w'"));
}

/* xorshift, so the sweep is the same on every run */
static uint64_t rng(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static void sweep(const char *seed_text, int rounds, uint64_t seed) {
  static const char alphabet[] = " ;\n#=->.{}[]\":,0123456789xmnk\x01\xff";
  size_t len = strlen(seed_text);
  char *buf = malloc(len + 16);
  assert_non_null(buf);
  uint64_t s = seed;
  int failures = 0;
  for (int i = 0; i < rounds; i++) {
    memcpy(buf, seed_text, len + 1);
    int edits = 1 + (int)(rng(&s) % 4);
    size_t n = len;
    for (int k = 0; k < edits && n > 0; k++) {
      size_t at = rng(&s) % n;
      switch (rng(&s) % 3) {
      case 0: buf[at] = alphabet[rng(&s) % (sizeof alphabet - 1)]; break;   /* replace */
      case 1: memmove(buf + at, buf + at + 1, n - at); n--; break;          /* delete */
      default: n = at; buf[n] = 0; break;                                   /* truncate */
      }
    }
    plan_t p;
    harp_error e = {0};
    harp_status st = plan_parse(buf, "fuzz", PLAN_ARCH_SM80, &p, &e);
    if (st) {
      failures++;
      assert_int_equal(st, e.code);
      assert_true(e.msg[0] != 0);
      if (st == HARP_E_PARSE) assert_true(e.line > 0 && e.col > 0);
    } else {
      /* whatever parses prints and re-parses to the same plan */
      char *j = NULL, *d = NULL;
      plan_t q;
      assert_int_equal(plan_to_json(&p, &j, &e), HARP_OK);
      assert_int_equal(plan_to_dsl(&p, &d, &e), HARP_OK);
      if (plan_parse(j, "j", PLAN_ARCH_SM80, &q, &e)) fail_msg("re-parse of\n%s\nfailed: %s", j, err_text(&e));
      assert_true(plan_equal(&p, &q));
      if (plan_parse(d, "d", PLAN_ARCH_SM80, &q, &e)) fail_msg("re-parse of\n%s\nfailed: %s", d, err_text(&e));
      assert_true(plan_equal(&p, &q));
      free(j);
      free(d);
    }
  }
  assert_true(failures > rounds / 4); /* the sweep did damage plans */
  free(buf);
}

static void test_mutation_sweep(void **state) {
  (void)state;
  sweep(SEED_DSL, 3000, 0x9e3779b97f4a7c15ull);
  sweep(SEED_JSON, 3000, 0x2545f4914f6cdd1dull);
}

/* Every prefix of both seed forms: accepted or a clean error. */
static void test_prefixes(void **state) {
  (void)state;
  const char *forms[2] = {SEED_DSL, SEED_JSON};
  for (int f = 0; f < 2; f++) {
    size_t len = strlen(forms[f]);
    char *buf = malloc(len + 1);
    assert_non_null(buf);
    for (size_t n = 0; n <= len; n++) {
      memcpy(buf, forms[f], n);
      buf[n] = 0;
      plan_t p;
      harp_error e = {0};
      harp_status st = plan_parse(buf, "prefix", PLAN_ARCH_SM80, &p, &e);
      assert_int_equal(st, e.code);
    }
    free(buf);
  }
}

/* Limits: long names, too many statements, huge factors. */
static void test_limits(void **state) {
  (void)state;
  plan_t p;
  harp_error e = {0};
  char txt[4096];
  snprintf(txt, sizeof txt, "split %0100d 2", 0);
  memset(txt + 6, 'a', 100);
  assert_int_equal(plan_parse_dsl(txt, "x", PLAN_ARCH_SM80, &p, &e), HARP_E_LIMIT);
  harp_error_clear(&e);
  assert_int_equal(plan_parse_dsl("split m 99999999999999999999", "x", PLAN_ARCH_SM80, &p, &e), HARP_E_INVALID_ARG);
  harp_error_clear(&e);
  assert_int_equal(plan_parse_dsl("split m 65537", "x", PLAN_ARCH_SM80, &p, &e), HARP_E_INVALID_ARG);
  harp_error_clear(&e);
  txt[0] = 0;
  strcat(txt, "split m 64;");
  for (int i = 0; i < 30; i++) strcat(txt, "predicate_tail m.i.i;");
  assert_int_equal(plan_parse_dsl(txt, "x", PLAN_ARCH_SM80, &p, &e), HARP_E_LIMIT);
  harp_error_clear(&e);
  assert_int_equal(plan_parse_json("{\"tile\":[64,64,64,64]}", "x", PLAN_ARCH_SM80, &p, &e), HARP_E_INVALID_ARG);
  harp_error_clear(&e);
  assert_int_equal(plan_parse_json("{\"tile\":[1e3]}", "x", PLAN_ARCH_SM80, &p, &e), HARP_E_PARSE);
}

/* Every allocation the plan layer makes may fail: the result is OutOfMemory
 * (or success when the failing allocation is never reached), never a crash
 * or a leak (the ASan build checks the latter). */
static void test_alloc_failures(void **state) {
  (void)state;
  plan_region_info r = gemm_bias_relu_region(1024, 1024, 1024);
  const plan_machine *m = plan_machine_gpu(PLAN_ARCH_SM80);
  int failures = 0;
  for (long n = 1; n < 100000; n++) {
    plan_t p, q, d;
    harp_error e = {0};
    char *j = NULL, *s = NULL;
    ut_fault_fail_nth_alloc(n);
    harp_status st = plan_parse_dsl(SEED_DSL, "a.plan", PLAN_ARCH_SM80, &p, &e);
    if (!st) st = plan_to_json(&p, &j, &e);
    if (!st) st = plan_parse_json(j, "a.json", PLAN_ARCH_SM80, &q, &e);
    if (!st) st = plan_to_dsl(&q, &s, &e);
    if (!st) st = plan_validate(&q, &r, m, NULL, &e);
    if (!st) st = plan_default(&r, m, NULL, &d, &e);
    bool never_fired = ut_fault_remaining() > 0;
    ut_fault_fail_nth_alloc(0);
    free(j);
    free(s);
    if (never_fired) {
      assert_int_equal(st, HARP_OK);
      break;
    }
    if (st != HARP_OK) {
      if (st != HARP_E_NO_MEMORY) fail_msg("allocation %ld: expected OutOfMemory, got %s (%s)", n, harp_status_name(st), e.msg);
      failures++;
    }
  }
  assert_true(failures >= 5);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_corpus),         cmocka_unit_test(test_snippet), cmocka_unit_test(test_mutation_sweep),
      cmocka_unit_test(test_prefixes),       cmocka_unit_test(test_limits),
      cmocka_unit_test(test_alloc_failures),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
