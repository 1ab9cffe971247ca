/* test_cpu_amx.c — AMX detection apart from the permission request
 * (cpu_amx.c): the compile cache's CPU key (rt_cache_cpu_id) and
 * ut_cpu_has_amx_bf16 ask Linux for no tile permission (an fp32 model's
 * process never holds it); ut_cpu_amx_bf16 asks, and on a CPU with AMX-BF16
 * the process then holds it and the key names amx-bf16.  The permission is
 * read back with arch_prctl(ARCH_GET_XCOMP_PERM): XTILEDATA (bit 18) is
 * granted only on request.  One process, in this order (a grant is never
 * taken back).  Needs: cmocka, harp_lib.  Gives: the test executable. */
#define _GNU_SOURCE 1
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include <cmocka.h>

#include "runtime/cache.h"
#include "util/util.h"

/* 1: this process holds the tile data permission, 0: not, -1: cannot tell. */
static int tile_perm(void) {
#if defined(__linux__) && defined(__x86_64__)
  uint64_t mask = 0;
  if (syscall(SYS_arch_prctl, 0x1022 /* ARCH_GET_XCOMP_PERM */, &mask) != 0) return -1;
  return (int)(mask >> 18 & 1u);
#else
  return -1;
#endif
}

static void test_detect_then_permit(void **state) {
  (void)state;
  int before = tile_perm();
  if (before < 0) skip(); /* no arch_prctl XCOMP (not Linux x86-64, or an old kernel) */
  assert_int_equal(before, 0);
  char key[512];
  rt_cache_cpu_id(key, sizeof key);
  assert_int_equal(tile_perm(), 0); /* the cache key asked nothing */
  bool has = ut_cpu_has_amx_bf16();
  assert_int_equal(tile_perm(), 0); /* nor did detection */
  assert_int_equal(strstr(key, ",amx-bf16") != NULL, has);
  bool ok = ut_cpu_amx_bf16();
  if (has) {
    assert_true(ok); /* Linux grants it unless a sandbox forbids */
    assert_int_equal(tile_perm(), 1);
    char key2[512];
    rt_cache_cpu_id(key2, sizeof key2);
    assert_string_equal(key, key2); /* the key does not move with the permission */
  } else {
    assert_false(ok);
    assert_int_equal(tile_perm(), 0); /* no AMX: nothing asked */
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_detect_then_permit)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
