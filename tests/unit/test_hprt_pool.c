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
 * so the races are likely within the test's few seconds.
 *
 * A worker put on its caller's CPU leaves it: with a busy thread on the other
 * CPU the scheduler kept the two together (2 threads against 1 counts as
 * balanced), and every 2-task kernel of the process ran serially.
 *
 * Each thread runs its own range of a job's tasks first (thread t: t n / P
 * to (t + 1) n / P) and takes what is left of others' from the top, so a
 * worker that runs a task starts at the bottom of its own range; a job of
 * more tasks than a range word holds runs as several, every task once.
 *
 * hprt_alloc, the runtime's allocator of the arena, the weights and the
 * scratch, gives large blocks on 2 MiB pages where the OS grants them. */
#define _GNU_SOURCE 1 /* sched_getcpu, CPU_SET */
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stddef.h>
#include <string.h>
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

/* pre (the test hooks), the runtime, then driver, compiled at -O2. */
static void *compile_with_runtime(const char *pre, const char *driver) {
  ut_str src;
  ut_str_init(&src);
  ut_str_puts(&src, pre);
  cg_emit_runtime(&src);
  ut_str_puts(&src, driver);
  void *h = ct_compile_flags(src.buf, "-O2");
  ut_str_free(&src);
  return h;
}

/* Many small and large jobs back to back on a pool of 2 and of 3 threads. */
static void test_jobs_back_to_back(void **state) {
  (void)state;
  /* a spin where a job is set up and where a worker has read its fields:
   * the windows a race needs, made wide */
  void *h = compile_with_runtime("#define HPRT_TEST_DELAY() do { for (volatile int i_ = 0; i_ < 300; i_++) ; } while (0)\n", DRIVER);
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

/* The worker's CPU per job while the caller sits on one CPU (c) and a busy
 * thread on another (d; -1: the worker may use c alone, no busy thread); the
 * caller's own tasks sleep, so a worker sharing c gets to run its task there. */
static const char LEAVE_DRIVER[] =
    "#include <unistd.h>\n"
    "static int job_i, cpu_w[1024];\n"
    "static volatile int hog_stop;\n"
    "static void *hog(void *a) { (void)a; while (!hog_stop) HPRT_PAUSE(); return NULL; }\n"
    "static void fc(void *ctx, int t, int tid) { (void)ctx; (void)t; if (tid) cpu_w[job_i] = sched_getcpu(); else usleep(200); }\n"
    "static void pin(pthread_t th, int a, int b) {\n"
    "  cpu_set_t s; CPU_ZERO(&s); CPU_SET(a, &s); if (b >= 0) CPU_SET(b, &s);\n"
    "  pthread_setaffinity_np(th, sizeof s, &s);\n"
    "}\n"
    "/* jobs of 2 tasks on p (2 threads) with the caller on c and a busy thread on\n"
    " * d, the worker put on c first; out: the jobs the worker ran a task in, and\n"
    " * those of them on c, and the worker's moves */\n"
    "int hp_leave(hprt_pool *p, int c, int d, int jobs, int *ran, int *on_c, int *moved) {\n"
    "  cpu_set_t keep; pthread_t h;\n"
    "  if (jobs > 1024 || pthread_getaffinity_np(pthread_self(), sizeof keep, &keep)) return -1;\n"
    "  for (int i = 0; i < 5000; i++) { /* the worker is past its start (where it takes the CPU set back) */\n"
    "    job_i = 0; cpu_w[0] = -1;\n"
    "    hprt_pool_run(p, 2, fc, NULL);\n"
    "    if (cpu_w[0] >= 0) break;\n"
    "  }\n"
    "  pin(pthread_self(), c, -1);\n"
    "  hog_stop = 0;\n"
    "  if (d >= 0 && pthread_create(&h, NULL, hog, NULL)) return -1;\n"
    "  if (d >= 0) pin(h, d, -1);\n"
    "  pin(p->th[0], c, -1); /* the worker moves to c, and is free again among c and d */\n"
    "  pin(p->th[0], c, d);\n"
    "  *ran = *on_c = 0;\n"
    "  for (job_i = 0; job_i < jobs; job_i++) {\n"
    "    cpu_w[job_i] = -1;\n"
    "    hprt_pool_run(p, 2, fc, NULL);\n"
    "    *ran += cpu_w[job_i] >= 0; *on_c += cpu_w[job_i] == c;\n"
    "  }\n"
    "  hog_stop = 1;\n"
    "  if (d >= 0) pthread_join(h, NULL);\n"
    "  pthread_setaffinity_np(pthread_self(), sizeof keep, &keep);\n"
    "  *moved = __atomic_load_n(&hp_moved, __ATOMIC_RELAXED);\n"
    "  return 0;\n"
    "}\n";

/* Two CPUs this process may use (the caller's first); 0 when there are not. */
static int two_cpus(int *c, int *d) {
  cpu_set_t s;
  *c = sched_getcpu(), *d = -1;
  if (*c < 0 || sched_getaffinity(0, sizeof s, &s)) return 0;
  for (int i = 0; i < CPU_SETSIZE && *d < 0; i++)
    if (i != *c && CPU_ISSET(i, &s)) *d = i;
  return *d >= 0;
}

/* hp_leave of a fresh pool of 2 threads: 0, or -1 where it could not run. */
static int run_leave(int c, int d, int jobs, int *ran, int *on_c, int *moved) {
  void *h = compile_with_runtime("static int hp_moved;\n#define HPRT_TEST_MOVED() __atomic_add_fetch(&hp_moved, 1, __ATOMIC_RELAXED)\n",
                                 LEAVE_DRIVER);
  assert_non_null(h);
  int (*leave)(hprt_pool *, int, int, int, int *, int *, int *) =
      (int (*)(hprt_pool *, int, int, int, int *, int *, int *))dlsym(h, "hp_leave");
  assert_non_null(leave);
  hprt_pool *p = ct_pool_create(h, 2);
  assert_non_null(p);
  signal(SIGALRM, on_alarm);
  alarm(120);
  int rc = leave(p, c, d, jobs, ran, on_c, moved);
  alarm(0);
  ct_pool_destroy(h, p);
  dlclose(h);
  fprintf(stderr, "c %d d %d: worker ran a task in %d of %d jobs, %d of them on the caller's CPU; moves %d\n", c, d, *ran, jobs,
          *on_c, *moved);
  return rc;
}

/* The worker, put on the caller's CPU with a busy thread on the other one,
 * moves off: in 200 jobs whose caller tasks sleep, at most 10 of the jobs
 * the worker ran a task in ran it on the caller's CPU (the old pool ran
 * all 200 there). */
static void test_worker_leaves_callers_cpu(void **state) {
  (void)state;
  int c, d, ran, on_c, moved;
  if (!two_cpus(&c, &d)) skip();
  assert_int_equal(run_leave(c, d, 200, &ran, &on_c, &moved), 0);
  assert_true(ran >= 1);
  assert_true(on_c <= 10);
}

/* Caller and worker allowed one CPU only: the worker takes (almost) no task
 * (the old pool's took the tasks of the jobs the caller slept in, and a
 * caller that finished first spun for them on the CPU the worker needed). */
static void test_worker_alone_sits_out(void **state) {
  (void)state;
  int c = sched_getcpu(), ran, on_c, moved;
  if (c < 0) skip();
  assert_int_equal(run_leave(c, -1, 100, &ran, &on_c, &moved), 0);
  assert_true(ran <= 5);
}

/* A job's tasks and who ran them: counts per task, the worker's first task. */
static const char RANGE_DRIVER[] =
    "static unsigned char cnt_r[(1 << 20) + 64];\n"
    "static int first_w, ran_w, bad_tid;\n"
    "static void fr(void *ctx, int t, int tid) { (void)ctx; if (tid < 0 || tid >= 3) bad_tid = 1; __atomic_add_fetch(&cnt_r[t], 1, __ATOMIC_RELAXED); }\n"
    "static void fh(void *ctx, int t, int tid) {\n"
    "  (void)ctx;\n"
    "  if (tid) { if (first_w < 0) first_w = t; ran_w++; }\n"
    "  for (volatile int i = 0; i < 20000; i++) ;\n"
    "}\n"
    "/* one job of n tasks on p: the tasks not run exactly once (n <= 2^20 + 64) */\n"
    "long hp_once(hprt_pool *p, int n) {\n"
    "  long bad = 0;\n"
    "  memset(cnt_r, 0, sizeof cnt_r);\n"
    "  hprt_pool_run(p, n, fr, NULL);\n"
    "  for (int t = 0; t < (int)sizeof cnt_r; t++) bad += cnt_r[t] != (t < n);\n"
    "  return bad + bad_tid;\n"
    "}\n"
    "/* jobs of n slow tasks on p (2 threads): the jobs the worker ran a task in,\n"
    " * and those whose first task it ran was not n / 2 */\n"
    "void hp_home(hprt_pool *p, int n, int jobs, int *ran, int *off) {\n"
    "  *ran = *off = 0;\n"
    "  for (int j = 0; j < jobs; j++) {\n"
    "    first_w = -1, ran_w = 0;\n"
    "    hprt_pool_run(p, n, fh, NULL);\n"
    "    *ran += ran_w > 0, *off += ran_w > 0 && first_w != n / 2;\n"
    "  }\n"
    "}\n";

/* A job of more tasks than a range word holds (2^20 - 1), and one of a few
 * tasks, on pools of 2 and 3 threads: every task exactly once. */
static void test_job_over_range_word(void **state) {
  (void)state;
  void *h = compile_with_runtime("", RANGE_DRIVER);
  assert_non_null(h);
  long (*once)(hprt_pool *, int) = (long (*)(hprt_pool *, int))dlsym(h, "hp_once");
  assert_non_null(once);
  signal(SIGALRM, on_alarm);
  for (int n = 2; n <= 3; n++) {
    hprt_pool *p = ct_pool_create(h, n);
    assert_non_null(p);
    alarm(120);
    assert_int_equal(once(p, (1 << 20) + 37), 0);
    assert_int_equal(once(p, 5), 0);
    alarm(0);
    ct_pool_destroy(h, p);
  }
  dlclose(h);
}

/* 40 jobs of 64 tasks of ~20 us on 2 threads: whenever the worker runs a
 * task, its first is 32, the bottom of its own range (the old pool's one
 * counter gave it whatever was next). */
static void test_worker_starts_at_its_range(void **state) {
  (void)state;
  void *h = compile_with_runtime("", RANGE_DRIVER);
  assert_non_null(h);
  void (*home)(hprt_pool *, int, int, int *, int *) = (void (*)(hprt_pool *, int, int, int *, int *))dlsym(h, "hp_home");
  assert_non_null(home);
  hprt_pool *p = ct_pool_create(h, 2);
  assert_non_null(p);
  int ran, off;
  signal(SIGALRM, on_alarm);
  alarm(120);
  home(p, 64, 40, &ran, &off);
  alarm(0);
  ct_pool_destroy(h, p);
  dlclose(h);
  fprintf(stderr, "the worker ran tasks in %d of 40 jobs, %d of them not starting at 32\n", ran, off);
  assert_true(ran >= 1);
  assert_int_equal(off, 0);
}

/* hprt_alloc (the arena, weights, packed weights and scratch) reached from a test. */
static const char ALLOC_DRIVER[] = "void *hp_alloc(size_t n, size_t *cap) { return hprt_alloc(n, cap); }\n";

/* The value of smaps field `key` (e.g. "AnonHugePages:", in kB, or
 * "THPeligible:") of the mapping of /proc/self/smaps holding p; -1 when none. */
static long smaps_field_at(const void *p, const char *key) {
  FILE *f = fopen("/proc/self/smaps", "r");
  if (!f) return -1;
  char line[512];
  int in = 0;
  long v = -1;
  size_t kl = strlen(key);
  unsigned long lo, hi, a = (unsigned long)(uintptr_t)p;
  while (fgets(line, sizeof line, f)) {
    if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) in = a >= lo && a < hi;
    else if (in && !strncmp(line, key, kl) && sscanf(line + kl, "%ld", &v) == 1) break;
  }
  fclose(f);
  return v;
}

/* Transparent huge pages on request ("[always]" or "[madvise]"): 1, else 0. */
static int thp_on_request(void) {
  char s[128] = {0};
  FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
  if (!f) return 0;
  size_t n = fread(s, 1, sizeof s - 1, f);
  fclose(f);
  s[n] = 0;
  return strstr(s, "[always]") || strstr(s, "[madvise]");
}

/* hprt_alloc: from 2 MiB on a block 2 MiB aligned, its size rounded to
 * 2 MiB, and, where the kernel grants transparent huge pages on request,
 * eligible for huge pages (the madvise took: smaps' THPeligible; whether
 * the kernel grants one at the first touch depends on its free memory, so
 * AnonHugePages is printed, not asserted); below 2 MiB 64-aligned and
 * rounded to 64; 0 bytes a block. */
static void test_alloc_huge_pages(void **state) {
  (void)state;
  void *h = compile_with_runtime("", ALLOC_DRIVER);
  assert_non_null(h);
  void *(*al)(size_t, size_t *) = (void *(*)(size_t, size_t *))dlsym(h, "hp_alloc");
  assert_non_null(al);
  size_t cap = 0;
  unsigned char *big = al((size_t)5 << 20, &cap);
  assert_non_null(big);
  assert_int_equal((uintptr_t)big % ((uintptr_t)1 << 21), 0);
  assert_int_equal(cap, (size_t)6 << 20);
  memset(big, 1, (size_t)5 << 20);
  long kb = smaps_field_at(big, "AnonHugePages:"), eligible = smaps_field_at(big, "THPeligible:");
  fprintf(stderr, "5 MiB block: AnonHugePages %ld kB, THPeligible %ld (THP on request: %d)\n", kb, eligible,
          thp_on_request());
  if (thp_on_request() && eligible >= 0) assert_int_equal(eligible, 1);
  unsigned char *small = al(100, &cap);
  assert_non_null(small);
  assert_int_equal((uintptr_t)small % 64, 0);
  assert_int_equal(cap, 128);
  void *none = al(0, NULL);
  assert_non_null(none);
  free(big), free(small), free(none);
  dlclose(h);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_jobs_back_to_back), cmocka_unit_test(test_worker_leaves_callers_cpu),
                                     cmocka_unit_test(test_worker_alone_sits_out), cmocka_unit_test(test_job_over_range_word),
                                     cmocka_unit_test(test_worker_starts_at_its_range), cmocka_unit_test(test_alloc_huge_pages)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
