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

#include "fz.h"
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
    t->run((const uint8_t *)buf, len);
    free(buf);
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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_seeds),
      cmocka_unit_test(test_findings),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
