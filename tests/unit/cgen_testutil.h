/* cgen_testutil.h — helpers for the cgen tests: random data in any storage
 * dtype, rounding, tolerant comparison, compiling a batch of kernels
 * (through the library's compile cache, in the Python tests' directory).
 * Needs: cgen.h, knobs, runtime/compile.h.  Gives: ct_buf and its helpers,
 * ct_compile_flags, ct_compile, ct_check_cases. */
#ifndef HARP_CGEN_TESTUTIL_H
#define HARP_CGEN_TESTUTIL_H
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/c/cgen.h"
#include "harp/knobs.h"
#include "runtime/cache.h"
#include "runtime/compile.h"

typedef struct hprt_pool hprt_pool;

typedef struct ct_buf {
  tiny_dtype dt;
  long n;
  void *p;   /* storage */
  float *f;  /* the same values as fp32 (what the kernel sees) */
} ct_buf;

static unsigned ct_seed = 12345u;
static inline float ct_rand(void) {
  ct_seed = ct_seed * 1664525u + 1013904223u;
  return (float)((ct_seed >> 8) & 0xffff) / 32768.0f - 1.0f;
}

static inline float ct_round(tiny_dtype dt, float x) {
  return dt == TINY_FP16 ? ut_round_f16(x) : dt == TINY_BF16 ? ut_round_bf16(x) : x;
}

static inline void ct_store(ct_buf *b, long i, float x) {
  if (b->dt == TINY_FP32) ((float *)b->p)[i] = x;
  else ((uint16_t *)b->p)[i] = b->dt == TINY_FP16 ? ut_f32_to_f16(x) : ut_f32_to_bf16(x);
}
static inline float ct_load(const ct_buf *b, long i) {
  if (b->dt == TINY_FP32) return ((const float *)b->p)[i];
  uint16_t h = ((const uint16_t *)b->p)[i];
  return b->dt == TINY_FP16 ? ut_f16_to_f32(h) : ut_bf16_to_f32(h);
}

static inline void ct_alloc(ct_buf *b, tiny_dtype dt, long n, bool random) {
  b->dt = dt;
  b->n = n;
  b->p = calloc((size_t)(n > 0 ? n : 1), (size_t)tiny_dtype_size(dt));
  b->f = calloc((size_t)(n > 0 ? n : 1), sizeof(float));
  for (long i = 0; random && i < n; i++) {
    ct_store(b, i, ct_rand());
    b->f[i] = ct_load(b, i);
  }
  if (!random)  /* poison: a kernel that fails to write shows up */
    for (long i = 0; i < n; i++) ct_store(b, i, 1234.5f);
}
static inline void ct_free(ct_buf *b) {
  free(b->p);
  free(b->f);
  b->p = b->f = NULL;
}

/* Compare against a reference after rounding it to the output dtype:
 * |got - ref| <= 1e-3 + rtol |ref|, rtol = max(1e-3, one ulp of the dtype). */
static inline long ct_check(const ct_buf *out, const double *ref, long n, const char *what) {
  double rtol = out->dt == TINY_BF16 ? 1.0 / 128 : 1e-3;
  long bad = 0;
  for (long i = 0; i < n; i++) {
    double r = ct_round(out->dt, (float)ref[i]), g = ct_load(out, i);
    if (!(fabs(g - r) <= 1e-3 + rtol * fabs(r))) {
      if (bad < 5) fprintf(stderr, "%s: [%ld] got %.7g want %.7g\n", what, i, g, r);
      bad++;
    }
  }
  return bad;
}

static inline double ct_gelu(double x) { return 0.5 * x * (1.0 + erf(x / sqrt(2.0))); }
static inline double ct_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }

/* Most kernels compile at -O0 (compile time dominates the suite; the emitted
 * code's meaning does not depend on the level); a selection runs at -O3 too.
 * CT_FLAGS replaces -O0 (the sanitizer build sets it to sanitize the kernels).
 *
 * The objects are cached the way the Python tests' compiled models are
 * (harp_test.py: $TMPDIR/harp-test-cache-<uid>, the library's compile cache,
 * runtime/compile.c): keyed by the source, the compiler, its flags and the
 * CPU, installed by rename, so concurrent ctest processes share it and the
 * ASan build's run loads what the plain build's compiled with the same
 * flags.  CT_CACHE=off compiles afresh (cgen_compile_so) every time. */
static inline void *ct_compile_flags(const char *src, const char *flags) {
  harp_error e;
  memset(&e, 0, sizeof e);
  void *h = NULL;
  static rt_knobs k; /* CC and TMPDIR, through the library's one reader */
  static bool read;
  if (!read) {
    rt_knobs_init(&k);
    rt_knobs_from_env(&e, &k);
    read = true;
  }
  const char *off = getenv("CT_CACHE");
  if (off && !strcmp(off, "off")) {
    cgen_cc_opts o = {0};
    o.flags = flags;
    o.cc = k.cc;
    o.workdir = k.tmpdir;
    if (cgen_compile_so(&e, src, &o, &h)) fprintf(stderr, "compile: %s\n", e.msg);
    return h;
  }
  char dir[RT_KNOB_PATH + 64];
  snprintf(dir, sizeof dir, "%s/harp-test-cache-%ld", k.tmpdir[0] ? k.tmpdir : "/tmp", (long)getuid());
  rt_cc_opts o = {.cc = k.cc, .cflags = flags, .cache_dir = dir, .tmpdir = k.tmpdir, .jobs = 1};
  rt_cc_result r;
  if (rt_cc_build_ex(&e, src, &o, &r)) {
    fprintf(stderr, "compile: %s\n", e.msg);
    return NULL;
  }
  h = dlopen(r.path, RTLD_NOW | RTLD_LOCAL);
  if (!h) fprintf(stderr, "compile: dlopen %s: %s\n", r.path, dlerror());
  if (r.temp) rt_cache_discard(r.path); /* the cache was unusable: a temporary build */
  free(r.path);
  return h;
}
/* The thread pool of a compiled batch of kernels, and its end (NULL: none). */
static inline hprt_pool *ct_pool_create(void *h, int n) {
  hprt_pool *(*pc)(int) = (hprt_pool * (*)(int)) dlsym(h, "hprt_pool_create");
  return pc ? pc(n) : NULL;
}
static inline void ct_pool_destroy(void *h, hprt_pool *pool) {
  void (*pd)(hprt_pool *) = (void (*)(hprt_pool *))dlsym(h, "hprt_pool_destroy");
  if (pd) pd(pool);
}
/* CT_FLAGS, else -O0: the level of a test of what kernels compute. */
static inline const char *ct_flags(void) { return getenv("CT_FLAGS") ? getenv("CT_FLAGS") : "-O0"; }
static inline void *ct_compile(const char *src) { return ct_compile_flags(src, ct_flags()); }

/* The n cases of a kernel generator, compiled as one source with flags
 * (emit(i, src) appends case i's kernel) and each run on a pool of 3 and on
 * the calling thread alone (run(h, i, pool): the wrong elements, 0 when
 * none). */
static inline void ct_check_cases(int n, void (*emit)(int i, ut_str *src), long (*run)(void *h, int i, hprt_pool *pool),
                                  const char *flags) {
  ut_str src;
  ut_str_init(&src);
  for (int i = 0; i < n; i++) emit(i, &src);
  void *h = ct_compile_flags(src.buf, flags);
  assert_non_null(h);
  hprt_pool *pool = ct_pool_create(h, 3);
  assert_non_null(pool);
  for (int i = 0; i < n; i++) {
    assert_int_equal(run(h, i, pool), 0);
    assert_int_equal(run(h, i, NULL), 0);
  }
  ct_pool_destroy(h, pool);
  dlclose(h);
  ut_str_free(&src);
}
#endif
