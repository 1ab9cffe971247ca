/* common.h — helpers shared by the harp CPU benchmarks (not part of libharp).
 * Timing: warmup, then N interleaved repeats of every contender, median. */
#ifndef HARP_BENCH_COMMON_H
#define HARP_BENCH_COMMON_H
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

static inline int bn_env_int(const char *name, int def) {
  const char *s = getenv(name);
  return s && *s ? atoi(s) : def;
}
#endif
