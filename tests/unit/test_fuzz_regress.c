/* test_fuzz_regress.c — the input fuzzers' seeds and findings, replayed on
 * every build: each file of tests/fuzz/seeds/<target>/ and
 * tests/fuzz/regress/<target>/ goes through the same harness as the
 * libFuzzer target fuzz_<target> (tests/fuzz/fz_*.c: load, verify, round
 * trip, lower and form regions under the caps of fz.h).  A crash, a
 * sanitizer report, a hang (ctest's timeout) or a broken oracle (abort)
 * fails the test; a finding's file name says what it was
 * (docs/reliability.md, "Fuzzing"). */
#include <dirent.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "fz.h"
#include "harp/frontend.h"
#include "harp/onnx.h"
#include "harp/plan.h"
#include "harp/tensor.h"
#include "util/util.h"

/* Run target over every file of tests/fuzz/<kind>/<target>; the count. */
static int replay(const fz_target *t, const char *kind) {
  char dir[600];
  snprintf(dir, sizeof dir, "%s/tests/fuzz/%s/%s", HARP_SOURCE_DIR, kind, t->name);
  DIR *d = opendir(dir);
  if (!d) return 0;
  int n = 0;
  for (struct dirent *de; (de = readdir(d));) {
    if (de->d_name[0] == '.') continue;
    char path[900];
    snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
    harp_error e = {0};
    char *buf = NULL;
    size_t len = 0;
    if (ut_read_file(&e, path, 1 << 24, &buf, &len)) fail_msg("cannot read %s: %s", path, e.msg);
    fprintf(stderr, "%s %s/%s\n", t->name, kind, de->d_name);
    /* exactly len bytes, no NUL after them, as libFuzzer passes an input:
     * a loader that reads past its length trips ASan (make test-asan) */
    uint8_t *exact = malloc(len ? len : 1);
    assert_non_null(exact);
    memcpy(exact, buf, len);
    free(buf);
    t->run(exact, len);
    free(exact);
    n++;
  }
  closedir(d);
  return n;
}

static void test_seeds(void **state) {
  (void)state;
  assert_int_equal(fz_setup(), 0);
  int n = 0;
  for (int i = 0; i < fz_ntargets; i++) n += replay(&fz_targets[i], "seeds");
  assert_true(n >= 19); /* 5 ONNX models, 14 .npy files (make_corpus.py --seeds) */
}

static void test_findings(void **state) {
  (void)state;
  assert_int_equal(fz_setup(), 0);
  for (int i = 0; i < fz_ntargets; i++) replay(&fz_targets[i], "regress");
}

/* A .npy header claiming gigabytes the file does not hold is refused
 * before anything that size is allocated: under a 1 GiB address-space
 * limit (not under ASan, whose shadow memory needs more) the 3.4 GB
 * allocation the reader once made fails, and the answer would be
 * NoMemory instead of the file's own error. */
static void test_npy_claim_before_alloc(void **state) {
  (void)state;
  char path[600];
  snprintf(path, sizeof path, "%s/tests/fuzz/regress/npy/oom_header_claims_3gb.npy", HARP_SOURCE_DIR);
  harp_error e = {0};
  char *buf = NULL;
  size_t len = 0;
  if (ut_read_file(&e, path, 1 << 20, &buf, &len)) fail_msg("%s", e.msg);
#if !defined(__SANITIZE_ADDRESS__)
  struct rlimit old, lim;
  assert_int_equal(getrlimit(RLIMIT_AS, &old), 0);
  lim = old;
  lim.rlim_cur = (rlim_t)1 << 30;
  if (old.rlim_max != RLIM_INFINITY && old.rlim_max < lim.rlim_cur) lim.rlim_cur = old.rlim_max;
  assert_int_equal(setrlimit(RLIMIT_AS, &lim), 0);
#endif
  ut_tensor t;
  harp_status st = ut_npy_parse(&e, buf, len, "claim.npy", -1, &t);
#if !defined(__SANITIZE_ADDRESS__)
  assert_int_equal(setrlimit(RLIMIT_AS, &old), 0);
#endif
  free(buf);
  assert_int_not_equal(st, HARP_OK);
  if (st == HARP_E_NO_MEMORY || !strstr(e.msg, "shorter")) fail_msg("got %s: %s", harp_status_name(st), e.msg);
}

/* Each finding's input now gets a clear error: its name and words. */
typedef struct {
  const char *file; /* under tests/fuzz/regress/ */
  harp_status code;
  const char *words;
} finding;

static harp_status load_as(const char *file, const char *buf, size_t len, harp_error *e) {
  if (strstr(file, ".onnx")) {
    onnx_model m;
    harp_status st = onnx_load_buffer(e, buf, len, file, &m);
    if (!st) onnx_model_free(&m);
    return st;
  }
  if (strstr(file, ".json") && strstr(file, "plan_json/")) {
    plan_t p;
    char *text = strndup(buf, len);
    harp_status st = plan_parse_json(text, file, PLAN_ARCH_SM80, &p, e);
    free(text);
    return st;
  }
  if (strstr(file, ".plan")) {
    plan_t p;
    char *text = strndup(buf, len);
    harp_status st = plan_parse_dsl(text, file, PLAN_ARCH_SM80, &p, e);
    free(text);
    return st;
  }
  if (strstr(file, ".json")) {
    tiny_graph *g = NULL;
    harp_status st = tiny_load_json(e, buf, len, file, &g);
    tiny_graph_free(g);
    return st;
  }
  hg_program *p = NULL;
  harp_status st = hg_harp_load_text(e, buf, len, file, &p);
  hg_program_free(p);
  return st;
}

static void test_findings_errors(void **state) {
  (void)state;
  static const finding cases[] = {
      {"onnx/ub_node_without_outputs.onnx", HARP_E_INVALID_ARG, "the node has no outputs"},
      {"onnx/ub_constant_attribute_without_name.onnx", HARP_E_INVALID_ARG, "attribute 0 has no name"},
      {"onnx/ub_lookahead_node_without_op_type.onnx", HARP_E_INVALID_ARG, "node 1 \"\" has no op_type"},
      /* a later node's attributes read by name: the DQ of a Q's pair (dq_only), an opset-10 Clip after a QDQ Conv (q_reader) */
      {"onnx/ub_lookahead_dq_attribute_without_name.onnx", HARP_E_INVALID_ARG, "node 1 \"\": attribute 0 has no name"},
      {"onnx/ub_lookahead_clip_attribute_without_name.onnx", HARP_E_INVALID_ARG, "node 4 \"\": attribute 0 has no name"},
      {"tiny/overflow_snippet_unterminated.json", HARP_E_PARSE, "invalid JSON"},
      {"dsl/hang_graph_midline.harp", HARP_E_PARSE, "expected the end of the statement"},
      {"dsl/param_named_like_shape_var.harp", HARP_E_DUPLICATE_ID, "parameter M has the name of a shape variable"},
      {"plan_dsl/roundtrip_axis_too_long.plan", HARP_E_LIMIT, "at most 59"},
      {"plan_json/roundtrip_axis_too_long.json", HARP_E_LIMIT, "at most 59"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char path[600];
    snprintf(path, sizeof path, "%s/tests/fuzz/regress/%s", HARP_SOURCE_DIR, cases[i].file);
    harp_error e = {0};
    char *buf = NULL;
    size_t len = 0;
    if (ut_read_file(&e, path, 1 << 20, &buf, &len)) fail_msg("%s", e.msg);
    harp_status st = load_as(cases[i].file, buf, len, &e);
    free(buf);
    if (st != cases[i].code || !strstr(e.msg, cases[i].words))
      fail_msg("%s: want %s \"%s\", got %s: %s", cases[i].file, harp_status_name(cases[i].code), cases[i].words,
               harp_status_name(st), e.msg);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_seeds),
      cmocka_unit_test(test_findings),
      cmocka_unit_test(test_npy_claim_before_alloc),
      cmocka_unit_test(test_findings_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
