/* test_cc_build.c — rt_cc_build (runtime/compile.c): the on-disk cache, the
 * parallel (-flto=N) build of a large source, the plain command again when
 * the compiler refuses LTO, and a compile error reported with its log.  The
 * compiler is a shell script in front of cc that writes each command line to
 * a file, so the test sees what harp ran. */
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "runtime/compile.h"

typedef struct fixture {
  char dir[64];   /* the cache */
  char cc[96];    /* the recording compiler */
  char nolto[96]; /* the recording compiler that fails on -flto */
  char log[96];   /* its command lines, one per run */
  int jobs;       /* the knob cc_jobs the builds get */
} fixture;

static void write_script(const char *path, const char *body) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(body, f);
  fclose(f);
  assert_int_equal(chmod(path, 0755), 0);
}

static int setup(void **state) {
  fixture *fx = calloc(1, sizeof *fx);
  strcpy(fx->dir, "/tmp/harp-cc-test-XXXXXX");
  if (!mkdtemp(fx->dir)) return -1;
  snprintf(fx->cc, sizeof fx->cc, "%s/cc.sh", fx->dir);
  snprintf(fx->nolto, sizeof fx->nolto, "%s/nolto.sh", fx->dir);
  snprintf(fx->log, sizeof fx->log, "%s/runs.txt", fx->dir);
  char body[512];
  snprintf(body, sizeof body, "#!/bin/sh\necho \"$*\" >> %s\nexec cc \"$@\"\n", fx->log);
  write_script(fx->cc, body);
  snprintf(body, sizeof body,
           "#!/bin/sh\necho \"$*\" >> %s\nfor a in \"$@\"; do case \"$a\" in -flto*) echo 'no LTO here' >&2; exit 1;; "
           "esac; done\nexec cc \"$@\"\n",
           fx->log);
  write_script(fx->nolto, body);
  *state = fx;
  return 0;
}

static int teardown(void **state) {
  fixture *fx = *state;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", fx->dir);
  if (system(cmd) != 0) return -1;
  free(fx);
  return 0;
}

/* A translation unit of at least `bytes` (a comment pads it) whose answer()
 * returns `v`. */
static char *source(size_t bytes, int v) {
  char *s = malloc(bytes + 256);
  int n = sprintf(s, "int answer(void) { return %d; }\n/*", v);
  memset(s + n, 'x', bytes);
  strcpy(s + n + bytes, "*/\n");
  return s;
}

/* The compiler's command lines so far, then the file emptied. */
static char *runs(fixture *fx) {
  FILE *f = fopen(fx->log, "r");
  char *all = calloc(1, 1 << 16);
  if (f) {
    size_t n = fread(all, 1, (1 << 16) - 1, f);
    all[n] = 0;
    fclose(f);
  }
  unlink(fx->log);
  return all;
}

static int count(const char *hay, const char *needle) {
  int n = 0;
  for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle)) n++;
  return n;
}

static int call_answer(const char *so) {
  void *h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
  assert_non_null(h);
  int (*f)(void) = (int (*)(void))dlsym(h, "answer");
  assert_non_null(f);
  int r = f();
  dlclose(h);
  return r;
}

static void build(fixture *fx, const char *cc, const char *src, bool parallel, int want, bool want_hit) {
  harp_error e = {0};
  rt_cc_opts o = {cc, "-O1", fx->dir, parallel, NULL, fx->jobs, NULL};
  char *so = NULL;
  bool hit = true;
  assert_int_equal(rt_cc_build(&e, src, &o, &so, &hit), HARP_OK);
  assert_int_equal(hit, want_hit);
  assert_int_equal(call_answer(so), want);
  free(so);
}

/* A large source with parallel on: one run, with -flto=2; then a cache hit. */
static void test_large_parallel(void **state) {
  fixture *fx = *state;
  fx->jobs = 2; /* the knob cc_jobs (HARP_CC_JOBS) */
  char *src = source(RT_CC_PARALLEL_MIN, 41);
  build(fx, fx->cc, src, true, 41, false);
  char *r = runs(fx);
  assert_int_equal(count(r, "\n"), 1);
  assert_int_equal(count(r, " -flto=2 "), 1);
  free(r);
  build(fx, fx->cc, src, true, 41, true);
  r = runs(fx);
  assert_string_equal(r, ""); /* no compiler on a hit */
  free(r);
  free(src);
}

/* Small sources, parallel off, or cc_jobs 1 (HARP_CC_JOBS=1): no -flto. */
static void test_no_lto(void **state) {
  fixture *fx = *state;
  fx->jobs = 2; /* the knob cc_jobs (HARP_CC_JOBS) */
  char *small = source(RT_CC_PARALLEL_MIN / 2, 1), *large = source(RT_CC_PARALLEL_MIN, 2), *large3 = source(RT_CC_PARALLEL_MIN, 3);
  build(fx, fx->cc, small, true, 1, false);
  build(fx, fx->cc, large, false, 2, false);
  fx->jobs = 1; /* the knob cc_jobs (HARP_CC_JOBS) */
  build(fx, fx->cc, large3, true, 3, false);
  char *r = runs(fx);
  assert_int_equal(count(r, "\n"), 3);
  assert_int_equal(count(r, "-flto"), 0);
  free(r);
  free(small);
  free(large);
  free(large3);
}

/* A compiler that refuses -flto: the plain command runs next and the build
 * succeeds. */
static void test_lto_refused(void **state) {
  fixture *fx = *state;
  fx->jobs = 4; /* the knob cc_jobs (HARP_CC_JOBS) */
  char *src = source(RT_CC_PARALLEL_MIN, 7);
  build(fx, fx->nolto, src, true, 7, false);
  char *r = runs(fx);
  assert_int_equal(count(r, "\n"), 2);
  assert_int_equal(count(r, "-flto=4"), 1);
  char *second = strchr(r, '\n') + 1;
  assert_null(strstr(second, "-flto"));
  free(r);
  free(src);
}

/* A source that does not compile: an error that quotes the compiler's
 * message and names the kept source; nothing installed in the cache. */
static void test_compile_error(void **state) {
  fixture *fx = *state;
  fx->jobs = 2; /* the knob cc_jobs (HARP_CC_JOBS) */
  char *src = source(RT_CC_PARALLEL_MIN, 5);
  src[0] = '@'; /* not C */
  harp_error e = {0};
  rt_cc_opts o = {fx->cc, "-O1", fx->dir, true, NULL, fx->jobs, NULL};
  char *so = NULL;
  bool hit = true;
  assert_int_equal(rt_cc_build(&e, src, &o, &so, &hit), HARP_E_INTERNAL);
  assert_null(so);
  assert_false(hit);
  assert_non_null(strstr(e.msg, "the C compiler"));
  assert_non_null(strstr(e.msg, ".c"));
  char *r = runs(fx);
  assert_int_equal(count(r, "\n"), 2); /* with -flto, then the plain command */
  free(r);
  char cmd[160];
  snprintf(cmd, sizeof cmd, "ls %s/*.so >/dev/null 2>&1", fx->dir);
  assert_int_not_equal(system(cmd), 0);
  harp_error_clear(&e);
  free(src);
}

/* A compiler that cannot be started is an I/O error naming it; more flags
 * than the command line holds is a limit, not a silent truncation. */
static void test_spawn_errors(void **state) {
  fixture *fx = *state;
  char *src = source(16, 1);
  harp_error e = {0};
  char *so = NULL;
  bool hit = true;
  rt_cc_opts o = {"/nonexistent/harp-cc", "-O1", fx->dir, false, NULL, 0, NULL};
  assert_int_equal(rt_cc_build(&e, src, &o, &so, &hit), HARP_E_IO);
  assert_non_null(strstr(e.msg, "/nonexistent/harp-cc"));
  assert_null(so);
  harp_error_clear(&e);
  char many[60 * 4 + 1] = "";
  for (int i = 0; i < 60; i++) strcat(many, "-O1 ");
  rt_cc_opts m = {fx->cc, many, fx->dir, false, NULL, 0, NULL};
  assert_int_equal(rt_cc_build(&e, src, &m, &so, &hit), HARP_E_LIMIT);
  assert_non_null(strstr(e.msg, "too many compiler flags"));
  assert_null(so);
  char *r = runs(fx);
  assert_string_equal(r, ""); /* the compiler never ran */
  free(r);
  harp_error_clear(&e);
  free(src);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_large_parallel, setup, teardown),
      cmocka_unit_test_setup_teardown(test_no_lto, setup, teardown),
      cmocka_unit_test_setup_teardown(test_lto_refused, setup, teardown),
      cmocka_unit_test_setup_teardown(test_compile_error, setup, teardown),
      cmocka_unit_test_setup_teardown(test_spawn_errors, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
