/* test_fault_compile.c — fault injection through whole compiles, SQLite
 * style (docs/reliability.md): the Nth allocation, the Nth file write and
 * the Nth child process (the C compiler) fail (util/fault.c), for N = 1, 2,
 * ... until a compile and run completes without the fault firing, over a
 * CNN (examples/cnn.harp), a transformer block (examples/transformer_block.harp)
 * and an ONNX model (tests/models/small_cnn.onnx).  Every N must end in a
 * clean error (a status and a message) or the right answer, never a crash
 * (ASan/UBSan build: nor a leak); the cache must then hold no partial file,
 * and a fault-free run on the same cache must give the reference outputs
 * (the interpreter's).
 *
 * Allocations: every N up to 200, then every `stride`-th (a prime chosen so
 * about 150 more are tried), with a warm cache (the compiler does not run;
 * the allocations of a cold compile's cache path are tried apart: the 6
 * around the compiler's start).  HARP_FAULT_FULL=1 tries every N, and 17
 * around the compiler; the ASan/UBSan build (HARP_FAULT_LIGHT) every N up
 * to 60 and ~40 more.  Writes and child
 * processes: every N, each from an empty cache.  The fault-free run after
 * a fault is skipped where the cache holds the same files as one a
 * fault-free run already read (it would repeat that run), but for the last
 * N of each kind (HARP_FAULT_FULL: never). */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "runmodel.h"
#include "runtime/cache.h"
#include "util/util.h"

#define TOL 1e-4

typedef struct fmodel {
  const char *path; /* under HARP_SOURCE_DIR */
  rm_out ref;       /* the interpreter's output */
  char file[1024];
  uint64_t seen[32]; /* cache_print of the caches a fault-free run gave the reference on */
  int nseen;
} fmodel;


static void wipe(const char *dir) {
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
}

/* Compile `file` for backend b (cache `cache`), run it once; 0 and *out, or
 * a non-zero code with err filled (a harp_status or the run's code). */
static int compile_run(const char *file, harp_backend b, const char *cache, rm_out *out, char *err, size_t cap) {
  /* the whole compile before the run (tier 0's background build would
   * take the Nth fault on another thread, at another point each time).
   * The C compiler is most of this test's time (~50 cc runs) and what it
   * makes of the code is not under test: -O0 and one process (no -flto),
   * about half the compiler's time; harp's own path is the same (flags are
   * a string in the cache key, the compiler runs once either way). */
  static const char *const knobs[] = {"tier0=off", "cflags=-O0 -fno-math-errno", "cc_jobs=1", NULL};
  harp_options o = {.backend = b, .cache_dir = cache, .knobs = knobs};
  harp_error e = {0};
  harp_compiled *c = NULL;
  out->y = NULL;
  harp_status st = harp_compile_file(&e, file, &o, &c);
  if (st) {
    assert_null(c);
    assert_true(e.msg[0] != 0); /* a clean, described error */
    snprintf(err, cap, "%s", e.msg);
    harp_error_clear(&e);
    return (int)st;
  }
  float **in = rm_inputs(c);
  int rc = in ? rm_run(c, in, out, err, cap) : -1;
  rm_free_inputs(c, in);
  harp_compiled_free(c);
  return rc;
}

/* Every file under dir: a whole, sealed *.so entry, or the plan cache's
 * files; no temp file, no build directory left. */
static void check_cache_sound(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return; /* never made: sound */
  for (struct dirent *de; (de = readdir(d));) {
    if (de->d_name[0] == '.') continue;
    char p[1400];
    snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
    const char *dot = strrchr(de->d_name, '.');
    if (dot && !strcmp(dot, ".so")) {
      if (!rt_cache_verify(p)) fail_msg("unsound cache entry %s", p);
    } else if (!strncmp(de->d_name, "build.", 6) || strstr(de->d_name, ".tmp")) {
      char cmd[1500];
      snprintf(cmd, sizeof cmd, "grep -h -m3 -A2 error '%s'/*.log >&2", p);
      if (system(cmd)) {}
      fail_msg("left behind in the cache: %s", p);
    }
  }
  closedir(d);
}

/* The files in the cache directory `dir` (name, inode, size, mtime; in any
 * order): 0 when there are none.  Two equal prints: the same files. */
static uint64_t cache_print(const char *dir) {
  DIR *d = opendir(dir);
  uint64_t sum = 0;
  for (struct dirent *de; d && (de = readdir(d));) {
    char p[1400];
    struct stat st;
    snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
    if (de->d_name[0] == '.' || lstat(p, &st)) continue;
    uint64_t f[4] = {(uint64_t)st.st_ino, (uint64_t)st.st_size, (uint64_t)st.st_mtim.tv_sec, (uint64_t)st.st_mtim.tv_nsec};
    sum += ut_hash64(f, sizeof f, ut_hash64(de->d_name, strlen(de->d_name), 1));
  }
  if (d) closedir(d);
  return sum;
}

/* Note that a fault-free run on a cache of print `fp` gave the reference. */
static void note_sound(fmodel *m, uint64_t fp) {
  m->seen[m->nseen++ % 32] = fp;
}

/* A fault-free run on `cache` gives the reference. */
static void check_clean_run(fmodel *m, const char *cache) {
  rm_out y;
  char err[1200] = "";
  uint64_t fp = cache_print(cache);
  int rc = compile_run(m->file, HARP_BACKEND_CPU, cache, &y, err, sizeof err);
  if (rc) fail_msg("%s: fault-free run failed after faults: %s", m->path, err);
  if (rm_diff(&y, &m->ref) > TOL) fail_msg("%s: poisoned: outputs differ by %g", m->path, rm_diff(&y, &m->ref));
  free(y.y);
  note_sound(m, fp);
}

/* check_clean_run, unless (not `force`) the cache holds the very files of
 * one a fault-free run already gave the reference on (the same run again:
 * what a compile reads is the model, the knobs and the cache); returns
 * whether it ran. */
static bool maybe_clean_run(fmodel *m, const char *cache, bool force) {
  uint64_t fp = cache_print(cache);
  for (int i = 0; !force && i < m->nseen && i < 32; i++)
    if (m->seen[i] == fp) return false;
  check_clean_run(m, cache);
  return true;
}

/* One try with the Nth event of kind k failing.  Returns whether it fired;
 * a run the fault did not stop must still be right. */
static bool try_fault(fmodel *m, ut_fault_kind k, long n, const char *cache, long *events) {
  rm_out y;
  char err[1200] = "";
  if (getenv("HARP_FAULT_VERBOSE")) fprintf(stderr, "%s: fault %d at %ld\n", m->path, (int)k, n);
  ut_fault_fail_nth(k, n);
  int rc = compile_run(m->file, HARP_BACKEND_CPU, cache, &y, err, sizeof err);
  long left = ut_fault_left(k);
  ut_fault_fail_nth(k, 0);
  bool fired = left == 0;
  if (events) *events = n - left;
  if (!rc && rm_diff(&y, &m->ref) > TOL) fail_msg("%s: fault %d at %ld: wrong outputs (%g)", m->path, (int)k, n, rm_diff(&y, &m->ref));
  if (!fired && rc) fail_msg("%s: no fault fired at %ld yet it failed: %s", m->path, n, err);
  free(y.y);
  return fired;
}

static bool full_run(void) { return getenv("HARP_FAULT_FULL") && atoi(getenv("HARP_FAULT_FULL")); }
/* The sanitizer build (a few times slower): every N up to 60, ~40 more. */
static bool light_run(void) {
#ifdef HARP_FAULT_LIGHT
  return !full_run();
#else
  return false;
#endif
}

static long next_prime(long n) {
  for (;; n++) {
    bool p = n > 1;
    for (long d = 2; p && d * d <= n; d++) p = n % d != 0;
    if (p) return n;
  }
}

/* Allocation faults on a warm cache; returns the number of N tried and the
 * allocations of one fault-free compile and run in *total. */
static long alloc_faults(fmodel *m, const char *cache, long *total) {
  bool full = full_run();
  uint64_t fp = cache_print(cache);
  try_fault(m, UT_FAULT_ALLOC, 1L << 40, cache, total); /* fault-free: the reference on this cache */
  note_sound(m, fp);
  long every = light_run() ? 60 : 200, more = light_run() ? 40 : 150;
  long stride = full ? 1 : next_prime(*total / more + 1), tried = 0;
  for (long n = 1;; n += n < every ? 1 : stride) {
    tried++;
    bool fired = try_fault(m, UT_FAULT_ALLOC, n, cache, NULL);
    check_cache_sound(cache);
    if (!fired) break;
    if (tried % 50 == 0) maybe_clean_run(m, cache, full_run()); /* a cache the faults changed */
  }
  check_cache_sound(cache);
  check_clean_run(m, cache);
  return tried;
}

/* Faults of kind k at N = from, from+1, ... (to at most; 0: until none
 * fires), from an empty cache each time; the cache is then sound and a
 * clean run right.  The clean run (a whole cold compile when the fault left
 * the cache empty: the warm-up's, again) runs where the fault left files no
 * clean run has read (maybe_clean_run), and at the last N (HARP_FAULT_FULL:
 * at every N); *clean counts them.  Returns the number of N tried. */
static long cold_faults(fmodel *m, ut_fault_kind k, long from, long to, const char *cache, long *clean) {
  long n = from;
  for (;; n++) {
    wipe(cache);
    bool fired = try_fault(m, k, n, cache, NULL);
    check_cache_sound(cache);
    bool last = !fired || n == to;
    *clean += maybe_clean_run(m, cache, full_run() || last);
    if (last) break;
  }
  return n - from + 1;
}

/* The allocations a cold compile makes before it starts the compiler. */
static long allocs_before_cc(fmodel *m, const char *cache) {
  rm_out y;
  char err[1200];
  wipe(cache);
  ut_fault_fail_nth(UT_FAULT_SPAWN, 1);
  ut_fault_fail_nth(UT_FAULT_ALLOC, 1L << 40);
  assert_int_not_equal(compile_run(m->file, HARP_BACKEND_CPU, cache, &y, err, sizeof err), 0);
  long n = (1L << 40) - ut_fault_left(UT_FAULT_ALLOC);
  ut_fault_fail_nth(UT_FAULT_ALLOC, 0);
  ut_fault_fail_nth(UT_FAULT_SPAWN, 0);
  return n;
}

/* Allocation faults that once crashed (the warm cache's numbering at the
 * time; tried in every run, whatever the stride). */
static const struct {
  const char *path;
  long n[4];
} regressions[] = {
    /* lower.c NULL dim; "(null)" index in the C; a zeroed block node (astgen.c) */
    {"examples/transformer_block.harp", {892, 6923, 6803, 0}},
};

static void try_regressions(fmodel *m, const char *cache) {
  for (size_t i = 0; i < sizeof regressions / sizeof *regressions; i++)
    for (int k = 0; !strcmp(regressions[i].path, m->path) && k < 4 && regressions[i].n[k]; k++) {
      try_fault(m, UT_FAULT_ALLOC, regressions[i].n[k], cache, NULL);
      check_cache_sound(cache);
    }
}

static void run_model(const char *path) {
  fmodel m = {.path = path};
  for (int k = 0; k < UT_FAULT_KINDS; k++) ut_fault_fail_nth((ut_fault_kind)k, 0); /* after a failed test */
  snprintf(m.file, sizeof m.file, "%s/%s", getenv("HARP_SOURCE_DIR") ? getenv("HARP_SOURCE_DIR") : HARP_SOURCE_DIR, path);
  char err[1200] = "", cache[160];
  snprintf(cache, sizeof cache, "%s/cache", rm_dir);
  wipe(cache);
  if (compile_run(m.file, HARP_BACKEND_INTERP, NULL, &m.ref, err, sizeof err)) fail_msg("%s: reference: %s", path, err);
  long cold_total = 0;
  try_fault(&m, UT_FAULT_ALLOC, 1L << 40, cache, &cold_total); /* warms the cache */
  note_sound(&m, 0);                                            /* from an empty one, right */
  if (getenv("HARP_FAULT_N")) { /* one allocation fault, to debug it */
    try_fault(&m, UT_FAULT_ALLOC, atol(getenv("HARP_FAULT_N")), cache, NULL);
    free(m.ref.y);
    return;
  }
  try_regressions(&m, cache);
  long total = 0, na = alloc_faults(&m, cache, &total);
  long cc_at = allocs_before_cc(&m, cache);
  long before = full_run() ? 10 : 3, after = full_run() ? 6 : 2;
  long clean = 0, nc = cold_faults(&m, UT_FAULT_ALLOC, cc_at > before ? cc_at - before : 1, cc_at + after, cache, &clean);
  long nw = cold_faults(&m, UT_FAULT_WRITE, 1, 0, cache, &clean), ns = cold_faults(&m, UT_FAULT_SPAWN, 1, 0, cache, &clean);
  assert_true(na > 1 && nc > 1 && nw > 1 && ns > 1); /* each kind fired at least once */
  printf("%s: allocations %ld warm, %ld cold (%ld before the compiler): %ld N tried warm, %ld cold around the "
         "compiler; writes: %ld N; child processes: %ld N; %ld clean runs after the cold ones\n",
         path, total, cold_total, cc_at, na, nc, nw, ns, clean);
  free(m.ref.y);
}

static void test_cnn(void **state) {
  (void)state;
  run_model("examples/cnn.harp");
}
static void test_transformer(void **state) {
  (void)state;
  run_model("examples/transformer_block.harp");
}
static void test_onnx(void **state) {
  (void)state;
  run_model("tests/models/small_cnn.onnx");
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_cnn), cmocka_unit_test(test_transformer),
                                     cmocka_unit_test(test_onnx)};
  if (getenv("HARP_FAULT_ONLY")) cmocka_set_test_filter(getenv("HARP_FAULT_ONLY"));
  return (rm_dir_template = "/tmp/harp-fault-XXXXXX", cmocka_run_group_tests(tests, rm_setup, rm_teardown));
}
