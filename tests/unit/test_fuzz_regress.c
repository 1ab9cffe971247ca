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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_seeds),
      cmocka_unit_test(test_findings),
      cmocka_unit_test(test_npy_claim_before_alloc),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
