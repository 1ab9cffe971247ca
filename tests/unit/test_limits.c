/* test_limits.c — sizes refused before they are allocated
 * (runtime/memlimit.c): harp_options.max_memory caps one instance (arena
 * plus weights) with LimitExceeded naming the option, before any code is
 * generated; a negative cap is a usage error; generated C beyond
 * RT_MAX_SOURCE bytes or RT_MAX_KERNELS kernels is refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "harp.h"
#include "runmodel.h"
#include "runtime/memlimit.h"


static harp_status compile_mlp(int64_t max_memory, const char *batch, harp_error *e, harp_compiled **c) {
  char p[1024];
  snprintf(p, sizeof p, "%s/examples/mlp.harp", getenv("HARP_SOURCE_DIR") ? getenv("HARP_SOURCE_DIR") : HARP_SOURCE_DIR);
  const char *syms[] = {batch, NULL};
  harp_options o = {.cache_dir = rm_dir, .max_memory = max_memory, .syms = syms};
  return harp_compile_file(e, p, &o, c);
}

static void test_max_memory(void **state) {
  (void)state;
  harp_error e = {0};
  harp_compiled *c = NULL;
  assert_int_equal(compile_mlp(1024, "B=4", &e, &c), HARP_E_LIMIT);
  assert_null(c);
  assert_non_null(strstr(e.msg, "max_memory"));
  assert_non_null(strstr(e.msg, "1.0 KiB"));
  harp_error_clear(&e);
  assert_int_equal(compile_mlp(-1, "B=4", &e, &c), HARP_E_USAGE);
  harp_error_clear(&e);
  assert_int_equal(compile_mlp(1 << 20, "B=4", &e, &c), HARP_OK); /* 2 KiB of arena fits in 1 MiB */
  assert_true(harp_arena_bytes(c) <= 1 << 20);
  harp_compiled_free(c);
  /* an arena larger than this machine's memory (the default cap): B = 2^27
   * needs about 64 GiB, refused before any code is made (each tensor under
   * 2^40 elements, so the memory cap is what says no); skipped on a machine
   * with that much memory */
  double phys = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
  if (phys < 60e9) {
    assert_int_equal(compile_mlp(0, "B=134217728", &e, &c), HARP_E_LIMIT);
    assert_non_null(strstr(e.msg, "this machine's memory"));
    harp_error_clear(&e);
  }
}

static void test_source_limits(void **state) {
  (void)state;
  harp_error e = {0};
  assert_int_equal(rt_check_source(&e, 1000, 10), HARP_OK);
  assert_int_equal(rt_check_source(&e, RT_MAX_SOURCE + 1, 10), HARP_E_LIMIT);
  assert_non_null(strstr(e.msg, "bind smaller shapes"));
  harp_error_clear(&e);
  assert_int_equal(rt_check_source(&e, 0, RT_MAX_KERNELS + 1), HARP_E_LIMIT);
  harp_error_clear(&e);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_max_memory), cmocka_unit_test(test_source_limits)};
  return (rm_dir_template = "/tmp/harp-limits-XXXXXX", cmocka_run_group_tests(tests, rm_setup, rm_teardown));
}
