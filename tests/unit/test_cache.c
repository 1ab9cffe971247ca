/* test_cache.c — the compile cache's entries and directory (runtime/cache.c):
 * a truncated or corrupted entry and one built for another CPU are not
 * loaded but rebuilt; an unusable cache directory (read-only, not a
 * directory, a symlink, full) degrades to a temporary directory with a
 * warning; the directory is made 0700; a symlink planted at an entry's name
 * is never followed.  The objects are tiny C files: what is under test is
 * the cache, not the generated code. */
#include <dlfcn.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "runtime/cache.h"
#include "runtime/compile.h"
#include "util/util.h"

static char root[64], cache[128];

static int setup(void **state) {
  (void)state;
  strcpy(root, "/tmp/harp-cache-test-XXXXXX");
  if (!mkdtemp(root)) return -1;
  snprintf(cache, sizeof cache, "%s/c/cache", root);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  char cmd[256];
  snprintf(cmd, sizeof cmd, "chmod -R u+w %s; rm -rf %s", root, root);
  return system(cmd) == 0 ? 0 : -1;
}

/* Build `int answer(void) { return v; }` into dir (cpu: the key's CPU, NULL:
 * this one); the result in *r, the answer the object gives returned. */
static int build(const char *dir, int v, const char *cpu, rt_cc_result *r) {
  char src[128];
  snprintf(src, sizeof src, "int answer(void) { return %d; }\n", v);
  rt_cc_opts o = {.cc = "cc", .cflags = "-O1", .cache_dir = dir, .cpu_id = cpu};
  harp_error e = {0};
  harp_status st = rt_cc_build_ex(&e, src, &o, r);
  if (st) fail_msg("build: %s", e.msg);
  void *dl = dlopen(r->path, RTLD_NOW | RTLD_LOCAL);
  assert_non_null(dl);
  int (*f)(void) = (int (*)(void))dlsym(dl, "answer");
  int got = f();
  dlclose(dl);
  return got;
}

static off_t size_of(const char *p) {
  struct stat st;
  return lstat(p, &st) == 0 ? st.st_size : -1;
}

/* A hit runs no compiler; a truncated entry, or one with a byte changed, is
 * rebuilt (a miss), and the rebuilt entry is sound. */
static void test_corrupt_entries(void **state) {
  (void)state;
  rt_cc_result r;
  assert_int_equal(build(cache, 41, NULL, &r), 41);
  assert_false(r.hit);
  assert_true(rt_cache_verify(r.path));
  char *path = strdup(r.path);
  free(r.path);
  assert_int_equal(build(cache, 41, NULL, &r), 41);
  assert_true(r.hit);
  free(r.path);
  off_t full = size_of(path);
  assert_int_equal(truncate(path, full / 2), 0); /* a crash mid-copy, a full disk */
  assert_false(rt_cache_verify(path));
  assert_int_equal(build(cache, 41, NULL, &r), 41);
  assert_false(r.hit);
  assert_int_equal(size_of(path), full);
  free(r.path);
  int fd = open(path, O_RDWR); /* one bit flipped in the middle */
  unsigned char c;
  assert_int_equal(pread(fd, &c, 1, full / 3), 1);
  c ^= 0x10;
  assert_int_equal(pwrite(fd, &c, 1, full / 3), 1);
  close(fd);
  assert_false(rt_cache_verify(path));
  assert_int_equal(build(cache, 41, NULL, &r), 41);
  assert_false(r.hit);
  assert_true(rt_cache_verify(path));
  free(r.path);
  free(path);
}

/* The CPU is in the key: an object built for another CPU (same source,
 * compiler and flags) is a different entry, never this CPU's hit. */
static void test_cpu_in_key(void **state) {
  (void)state;
  rt_cc_result a, b, c;
  build(cache, 7, "x86,avx512f-other-machine", &a);
  build(cache, 7, NULL, &b);
  assert_false(b.hit);
  assert_string_not_equal(a.path, b.path);
  build(cache, 7, "x86,avx512f-other-machine", &c);
  assert_true(c.hit);
  assert_string_equal(a.path, c.path);
  char id[512];
  rt_cache_cpu_id(id, sizeof id);
  assert_non_null(strstr(id, "x86") ? id : strstr(id, "aarch64") ? id : strstr(id, "other"));
  free(a.path);
  free(b.path);
  free(c.path);
}

/* Made 0700; a directory someone else can write, a symlink in place of
 * the directory, a file in place of it, a path under /proc: each is
 * refused with a warning, the object built in a temporary directory (gone
 * after rt_cache_discard). */
static void test_unusable_dirs(void **state) {
  (void)state;
  char d[256];
  rt_cc_result r;
  snprintf(d, sizeof d, "%s/fresh/cache", root);
  assert_int_equal(build(d, 1, NULL, &r), 1);
  struct stat st;
  assert_int_equal(lstat(d, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0700);
  assert_false(r.temp);
  free(r.path);
  const char *bad[4];
  char open_dir[256], link[256], file[256];
  snprintf(open_dir, sizeof open_dir, "%s/open", root);
  assert_int_equal(mkdir(open_dir, 0777), 0);
  assert_int_equal(chmod(open_dir, 0777), 0);
  snprintf(link, sizeof link, "%s/link", root);
  assert_int_equal(symlink(d, link), 0);
  snprintf(file, sizeof file, "%s/file", root);
  fclose(fopen(file, "w"));
  bad[0] = open_dir, bad[1] = link, bad[2] = file, bad[3] = "/proc/self/harp-cache";
  for (int i = 0; i < 4; i++) {
    assert_int_equal(build(bad[i], 2, NULL, &r), 2);
    assert_true(r.temp);
    assert_non_null(strstr(r.warning, "compile cache not used"));
    assert_null(strstr(r.path, root)); /* not in the refused directory */
    char dir[512];
    snprintf(dir, sizeof dir, "%s", r.path);
    *strrchr(dir, '/') = 0;
    rt_cache_discard(r.path);
    assert_int_equal(access(dir, F_OK), -1); /* the temporary directory is gone */
    free(r.path);
  }
}

/* A full cache (its first file write fails with ENOSPC, injected) builds in
 * a temporary directory with a warning instead of failing. */
static void test_full_cache(void **state) {
  (void)state;
  char d[256];
  rt_cc_result r;
  snprintf(d, sizeof d, "%s/full", root);
  ut_fault_fail_nth(UT_FAULT_WRITE, 1);
  assert_int_equal(build(d, 3, NULL, &r), 3);
  assert_int_equal(ut_fault_left(UT_FAULT_WRITE), 0); /* it fired */
  assert_true(r.temp);
  assert_non_null(strstr(r.warning, "No space left"));
  rt_cache_discard(r.path);
  free(r.path);
}

/* A symlink planted at an entry's name (to a sealed object of another
 * answer) is not loaded: the entry is rebuilt as a file of its own. */
static void test_planted_symlink(void **state) {
  (void)state;
  char d[256], evil_dir[256];
  rt_cc_result r, evil;
  snprintf(d, sizeof d, "%s/plant", root);
  snprintf(evil_dir, sizeof evil_dir, "%s/evil", root);
  assert_int_equal(build(d, 5, NULL, &r), 5);
  assert_int_equal(build(evil_dir, 666, NULL, &evil), 666);
  assert_true(rt_cache_verify(evil.path));
  assert_int_equal(unlink(r.path), 0);
  assert_int_equal(symlink(evil.path, r.path), 0);
  assert_false(rt_cache_verify(r.path));
  char *p = strdup(r.path);
  free(r.path);
  assert_int_equal(build(d, 5, NULL, &r), 5);
  assert_false(r.hit);
  struct stat st;
  assert_int_equal(lstat(p, &st), 0);
  assert_true(S_ISREG(st.st_mode));
  free(p);
  free(r.path);
  free(evil.path);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_corrupt_entries), cmocka_unit_test(test_cpu_in_key),
                                     cmocka_unit_test(test_unusable_dirs), cmocka_unit_test(test_full_cache),
                                     cmocka_unit_test(test_planted_symlink)};
  return cmocka_run_group_tests(tests, setup, teardown);
}
