/* common.h — helpers shared by the harp CPU benchmarks (not part of libharp).
 * Timing: warmup, then N interleaved repeats of every contender, median;
 * peers' pools made not to spin after a call (bn_quiet_peers), so each
 * contender starts on idle cores. */
#ifndef HARP_BENCH_COMMON_H
#define HARP_BENCH_COMMON_H
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend/c/cgen.h"

typedef struct hprt_pool hprt_pool;

static inline double bn_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int bn_cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}
static inline double bn_median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, bn_cmp);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Write the generated source src to path and free it; 0, or 1 with a message. */
static inline int bn_write_src(const char *path, ut_str *src) {
  FILE *f = fopen(path, "w");
  int bad = !f || fputs(src->buf, f) < 0;
  if (f && fclose(f)) bad = 1;
  if (bad) fprintf(stderr, "cannot write %s\n", path);
  ut_str_free(src);
  return bad;
}

/* Compile src and return its handle; dies on error (benchmarks may exit). */
static inline void *bn_build(const char *src) {
  harp_error e;
  memset(&e, 0, sizeof e);
  void *h = NULL;
  if (cgen_compile_so(&e, src, NULL, &h)) {
    fprintf(stderr, "compile failed: %s\n", e.msg);
    exit(1);
  }
  return h;
}

static inline void *bn_sym(void *h, const char *name) {
  void *p = dlsym(h, name);
  if (!p) {
    fprintf(stderr, "missing symbol %s\n", name);
    exit(1);
  }
  return p;
}

static inline void bn_fill(float *p, long n, unsigned seed) {
  for (long i = 0; i < n; i++) {
    seed = seed * 1664525u + 1013904223u;
    p[i] = (float)((seed >> 9) & 0xffff) / 32768.0f - 1.0f;
  }
}

/* Each contender starts on idle cores: these benches alternate contenders
 * call by call, and after a call OpenBLAS's pthreads busy-wait ~100 ms
 * (default OPENBLAS_THREAD_TIMEOUT) and oneDNN's OpenMP threads ~5 ms,
 * taking the cores of whoever runs next.  Both libraries read their
 * setting when loaded, so unless the caller set both, re-execute argv with
 * bench/Makefile's values (OPENBLAS_THREAD_TIMEOUT=4, OMP_WAIT_POLICY=
 * PASSIVE; a value already set is kept).  Returns if no re-exec was needed,
 * or with a warning if it failed. */
static inline void bn_quiet_peers(char **argv) {
  if (getenv("OPENBLAS_THREAD_TIMEOUT") && getenv("OMP_WAIT_POLICY")) return;
  setenv("OPENBLAS_THREAD_TIMEOUT", "4", 0);
  setenv("OMP_WAIT_POLICY", "PASSIVE", 0);
  execv("/proc/self/exe", argv);
  perror("warning: re-exec with quiet peer pools failed; peers may spin");
}

static inline int bn_env_int(const char *name, int def) {
  const char *s = getenv(name);
  return s && *s ? atoi(s) : def;
}
#endif
