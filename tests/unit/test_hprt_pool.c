/* test_hprt_pool.c — the generated code's thread pool (cgen_emit.c's
 * runtime) under back-to-back jobs of different sizes and functions: every
 * task of every job runs exactly once, with its own job's function and
 * context, and hprt_pool_run returns (a watchdog turns a lost wake-up into a
 * failure, not a hung suite).  The jobs alternate between 2..8 tasks (the
 * caller usually runs them all before a worker wakes: a worker then meets the
 * next job while it is being set up) and 40..100 tasks, so a worker that
 * mixes one job's count or function with another's shows up as a task run
 * twice, never, or with the wrong context.  The runtime's HPRT_TEST_DELAY
 * hook spins where a job is set up and where a worker has read its fields,
 * so the races are likely within the test's few seconds. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <unistd.h>
#include <cmocka.h>

#include "backend/c/cgen_int.h"
#include "cgen_testutil.h"
#include "util/util.h"

/* The driver compiled with the runtime: two task functions that count into
 * their own arrays and check that they got their own context. */
static const char DRIVER[] =
    "static int cnt_a[128], cnt_b[128], tag_a, tag_b, wrong;\n"
    "static void fa(void *ctx, int t, int tid) { (void)tid; if (ctx != &tag_a) __atomic_add_fetch(&wrong, 1, __ATOMIC_RELAXED);"
    " __atomic_add_fetch(&cnt_a[t], 1, __ATOMIC_RELAXED); }\n"
    "static void fb(void *ctx, int t, int tid) { (void)tid; if (ctx != &tag_b) __atomic_add_fetch(&wrong, 1, __ATOMIC_RELAXED);"
    " __atomic_add_fetch(&cnt_b[t], 1, __ATOMIC_RELAXED); }\n"
    "/* rounds pairs of jobs on p; the tasks that did not run exactly once,\n"
    " * plus the calls with another job's context */\n"
    "long hp_stress(hprt_pool *p, int rounds) {\n"
    "  long bad = 0;\n"
    "  for (int r = 0; r < rounds; r++) {\n"
    "    int na = 2 + r % 7, nb = 40 + (r * 7) % 61;\n"
    "    hprt_pool_run(p, na, fa, &tag_a);\n"
    "    for (int t = 0; t < 128; t++) bad += cnt_a[t] != (t < na), cnt_a[t] = 0;\n"
    "    hprt_pool_run(p, nb, fb, &tag_b);\n"
    "    for (int t = 0; t < 128; t++) bad += cnt_b[t] != (t < nb), cnt_b[t] = 0;\n"
    "  }\n"
    "  return bad + __atomic_load_n(&wrong, __ATOMIC_RELAXED);\n"
    "}\n";

static void on_alarm(int sig) {
  (void)sig;
  static const char msg[] = "test_hprt_pool: hprt_pool_run did not return (a lost wake-up)\n";
  ssize_t w = write(2, msg, sizeof msg - 1);
  (void)w;
  _exit(1);
}

/* Many small and large jobs back to back on a pool of 2 and of 3 threads. */
static void test_jobs_back_to_back(void **state) {
  (void)state;
  ut_str src;
  ut_str_init(&src);
  /* a spin where a job is set up and where a worker has read its fields:
   * the windows a race needs, made wide */
  ut_str_puts(&src, "#define HPRT_TEST_DELAY() do { for (volatile int i_ = 0; i_ < 300; i_++) ; } while (0)\n");
  cg_emit_runtime(&src);
  ut_str_puts(&src, DRIVER);
  void *h = ct_compile_flags(src.buf, "-O2");
  ut_str_free(&src);
  assert_non_null(h);
  long (*stress)(hprt_pool *, int) = (long (*)(hprt_pool *, int))dlsym(h, "hp_stress");
  assert_non_null(stress);
  signal(SIGALRM, on_alarm);
  for (int n = 2; n <= 3; n++) {
    hprt_pool *p = ct_pool_create(h, n);
    assert_non_null(p);
    alarm(120);
    long bad = stress(p, 40000);
    alarm(0);
    ct_pool_destroy(h, p);
    assert_int_equal(bad, 0);
  }
  dlclose(h);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_jobs_back_to_back)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
