/* cuda_testutil.h — helpers for the CUDA backend tests: random fp16/bf16
 * data, tolerance checks, NVRTC access, and the CPU SIMT simulator
 * (tests/cuda_sim): build a generated module into a simulator program with
 * g++ and run kernels on host buffers.  Tests skip cleanly when g++ or NVRTC
 * is missing. */
#ifndef HARP_CUDA_TESTUTIL_H
#define HARP_CUDA_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "backend/cuda/cuda.h"
#include "backend/cuda/cuda_rt.h"
#include "util/util.h"

#define cu_ok(e, expr)                                                     \
  do {                                                                     \
    if ((expr) != HARP_OK) {                                               \
      char buf_[4096];                                                     \
      harp_error_format((e), buf_, sizeof buf_);                           \
      fail_msg("%s failed: %s", #expr, buf_);                              \
    }                                                                      \
  } while (0)

/* ---- data ---------------------------------------------------------------------------- */
typedef struct cu_rng {
  uint64_t s;
} cu_rng;
static inline float cu_uniform(cu_rng *r) { /* [-1, 1) */
  r->s = r->s * 6364136223846793005ULL + 1442695040888963407ULL;
  return (float)((r->s >> 40) & 0xffffff) / 8388608.0f - 1.0f;
}

/* A host buffer holding n elements of dtype t (raw storage). */
typedef struct cu_buf {
  tiny_dtype t;
  int64_t n;
  void *p;
  size_t bytes;
} cu_buf;

static inline cu_buf cu_buf_new(tiny_dtype t, int64_t n) {
  cu_buf b = {t, n, NULL, (size_t)(n * tiny_dtype_size(t))};
  b.p = calloc(1, b.bytes + 16);
  return b;
}
static inline void cu_buf_free(cu_buf *b) {
  free(b->p);
  b->p = NULL;
}
static inline float cu_get(const cu_buf *b, int64_t i) {
  switch (b->t) {
  case TINY_FP16: return ut_f16_to_f32(((const uint16_t *)b->p)[i]);
  case TINY_BF16: return ut_bf16_to_f32(((const uint16_t *)b->p)[i]);
  case TINY_FP32: return ((const float *)b->p)[i];
  case TINY_I32: return (float)((const int32_t *)b->p)[i];
  default: return (float)((const uint8_t *)b->p)[i];
  }
}
static inline void cu_set(cu_buf *b, int64_t i, float v) {
  switch (b->t) {
  case TINY_FP16: ((uint16_t *)b->p)[i] = ut_f32_to_f16(v); break;
  case TINY_BF16: ((uint16_t *)b->p)[i] = ut_f32_to_bf16(v); break;
  case TINY_FP32: ((float *)b->p)[i] = v; break;
  case TINY_I32: ((int32_t *)b->p)[i] = (int32_t)v; break;
  default: ((uint8_t *)b->p)[i] = v != 0; break;
  }
}
static inline cu_buf cu_random(tiny_dtype t, int64_t n, cu_rng *r, float scale) {
  cu_buf b = cu_buf_new(t, n);
  for (int64_t i = 0; i < n; i++) cu_set(&b, i, cu_uniform(r) * scale);
  return b;
}
static inline float cu_round(tiny_dtype t, float v) {
  if (t == TINY_FP16) return ut_round_f16(v);
  if (t == TINY_BF16) return ut_round_bf16(v);
  return v;
}

/* Compare got (dtype of b) with want (fp32 reference, rounded to b's dtype)
 * within rtol = atol = tol.  Returns the number of mismatches (prints the first). */
static inline int64_t cu_compare(const char *what, const cu_buf *got, const float *want, int64_t n, double tol) {
  int64_t bad = 0;
  double worst = 0;
  for (int64_t i = 0; i < n; i++) {
    double g = cu_get(got, i), w = cu_round(got->t, want[i]);
    double d = g > w ? g - w : w - g;
    bool ok = (g == w) || d <= tol + tol * (w < 0 ? -w : w) || (g != g && w != w);
    if (d > worst && d == d) worst = d;
    if (!ok) {
      if (!bad) fprintf(stderr, "%s: element %lld: got %.7g, want %.7g\n", what, (long long)i, g, w);
      bad++;
    }
  }
  if (bad) fprintf(stderr, "%s: %lld of %lld elements off (worst abs diff %.3g)\n", what, (long long)bad, (long long)n, worst);
  return bad;
}

/* ---- the simulator ------------------------------------------------------------------------ */
typedef struct cu_sim {
  char dir[256];
  char bin[320];
  bool ready;
  const int64_t *sv; /* the size parameters' values (hp_sv<i>: sv[i]) of the next runs; NULL: none */
} cu_sim;

static inline int cu_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline int cu_sh(const char *fmt, ...) {
  char cmd[8192];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(cmd, sizeof cmd, fmt, ap);
  va_end(ap);
  int r = system(cmd);
  return r == -1 ? -1 : WEXITSTATUS(r);
}

static inline bool cu_have_gxx(void) { return cu_sh("g++ --version >/dev/null 2>&1") == 0; }

static inline const char *cu_srcdir(void) {
  const char *s = getenv("HARP_SOURCE_DIR");
#ifdef HARP_SOURCE_DIR
  if (!s) s = HARP_SOURCE_DIR;
#endif
  return s ? s : ".";
}

/* Build the simulator for CUDA source `src`.  false: g++ missing (skip). */
static inline bool cu_sim_build(cu_sim *s, const char *src) {
  memset(s, 0, sizeof *s);
  if (!cu_have_gxx()) return false;
  snprintf(s->dir, sizeof s->dir, "/tmp/harp_cusim_XXXXXX");
  if (!mkdtemp(s->dir)) fail_msg("mkdtemp failed");
  char path[512];
  snprintf(path, sizeof path, "%s/k.cu", s->dir);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(src, f);
  fclose(f);
  snprintf(s->bin, sizeof s->bin, "%s/sim", s->dir);
  const char *sd = cu_srcdir();
  int r = cu_sh("g++ -std=c++17 -O1 -w -DHK_SIM -include %s/tests/cuda_sim/hk_sim.h -x c++ %s -x c++ "
                "%s/tests/cuda_sim/hk_sim_main.cc -o %s -rdynamic -ldl > %s/build.log 2>&1",
                sd, path, sd, s->bin, s->dir);
  if (r) {
    cu_sh("head -c 3000 %s/build.log >&2", s->dir);
    fail_msg("building the simulator failed (g++ exit %d)", r);
  }
  s->ready = true;
  return true;
}

static inline void cu_sim_free(cu_sim *s) {
  if (s->dir[0]) cu_sh("rm -rf %s", s->dir);
  memset(s, 0, sizeof *s);
}

/* The simulator's encoding of a tensor map (see hk_sim.h): the tensor is
 * job buffer `buf_id` (an extra buffer: 32 + its index). */
static inline cu_buf cu_tmap_blob(const cuda_tmap_desc *d, int buf_id) {
  cu_buf b = cu_buf_new(TINY_FP32, 32);
  uint64_t *v = b.p;
  v[0] = 0x484b544d41500001ULL;
  v[1] = (uint64_t)buf_id;
  v[2] = (uint64_t)tiny_dtype_size(d->dtype);
  v[3] = (uint64_t)d->rank;
  for (int i = 0; i < d->rank; i++) v[4 + i] = d->dims[i];
  for (int i = 0; i + 1 < d->rank; i++) v[9 + i] = d->strides[i];
  for (int i = 0; i < d->rank && i < 4; i++) v[13] |= (uint64_t)d->box[i] << (16 * i);
  v[14] = (uint64_t)d->swizzle;
  return b;
}

/* Run kernel k with args[i] the buffer of parameter i (NULL: a NULL
 * pointer; for a tensor-map parameter, its cu_tmap_blob) and extra buffers
 * (ids 32, 33, ... in the job; what tensor maps point at).  Every buffer is
 * copied in and back.  stats (nullable): ldsm, ldsm conflicts, mma,
 * cp.async bytes, barriers, wgmma, TMA bytes.  Returns the simulator's exit
 * status (0 = ran). */
static inline int cu_sim_run_x(cu_sim *s, const cuda_kernel *k, cu_buf *const *args, cu_buf *const *extra, int nextra,
                               unsigned long long stats[7], unsigned long long seed) {
  char path[512], job[512];
  snprintf(job, sizeof job, "%s/job.txt", s->dir);
  FILE *jf = fopen(job, "w");
  assert_non_null(jf);
  for (int i = 0; i < k->nparams; i++) {
    if (!args[i]) continue;
    snprintf(path, sizeof path, "%s/in%d.bin", s->dir, i);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fwrite(args[i]->p, 1, args[i]->bytes, f);
    fclose(f);
    fprintf(jf, "buf %d %zu %s\n", i, args[i]->bytes, path);
  }
  for (int i = 0; i < nextra; i++) {
    snprintf(path, sizeof path, "%s/x%d.bin", s->dir, i);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fwrite(extra[i]->p, 1, extra[i]->bytes, f);
    fclose(f);
    fprintf(jf, "buf %d %zu %s\n", 32 + i, extra[i]->bytes, path);
  }
  fprintf(jf, "launch %s %lld %lld %lld %d %d %d %lld %d", k->name, (long long)k->grid[0], (long long)k->grid[1],
          (long long)k->grid[2], k->block[0], k->block[1], k->block[2], (long long)k->smem_bytes, k->nparams);
  for (int i = 0; i < k->nparams; i++)
    if (k->params[i].kind == CUDA_P_LONG && s->sv) fprintf(jf, " v%lld", (long long)s->sv[atoi(k->params[i].name + 5)]);
    else fprintf(jf, !args[i] ? " 0" : k->params[i].kind == CUDA_P_TMAP ? " m%d" : " b%d", i);
  fprintf(jf, "\n");
  for (int i = 0; i < k->nparams; i++)
    if (args[i]) fprintf(jf, "out %d %s/out%d.bin\n", i, s->dir, i);
  for (int i = 0; i < nextra; i++) fprintf(jf, "out %d %s/xo%d.bin\n", 32 + i, s->dir, i);
  fclose(jf);
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "%s %s %llu > %s/stdout.txt 2> %s/stderr.txt", s->bin, job, seed, s->dir, s->dir);
  int r = system(cmd);
  r = r == -1 ? -1 : WEXITSTATUS(r);
  if (r) {
    cu_sh("head -c 2000 %s/stderr.txt >&2", s->dir);
    return r;
  }
  for (int i = 0; i < k->nparams; i++) {
    if (!args[i]) continue;
    snprintf(path, sizeof path, "%s/out%d.bin", s->dir, i);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fread(args[i]->p, 1, args[i]->bytes, f), args[i]->bytes);
    fclose(f);
  }
  for (int i = 0; i < nextra; i++) {
    snprintf(path, sizeof path, "%s/xo%d.bin", s->dir, i);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fread(extra[i]->p, 1, extra[i]->bytes, f), extra[i]->bytes);
    fclose(f);
  }
  if (stats) {
    snprintf(path, sizeof path, "%s/stdout.txt", s->dir);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    int got = fscanf(f, "hk_sim_stats ldsm=%llu conflicts=%llu mma=%llu cp_bytes=%llu barriers=%llu wgmma=%llu tma_bytes=%llu",
                     &stats[0], &stats[1], &stats[2], &stats[3], &stats[4], &stats[5], &stats[6]);
    fclose(f);
    assert_int_equal(got, 7);
  }
  return 0;
}

static inline int cu_sim_run(cu_sim *s, const cuda_kernel *k, cu_buf *const *args, unsigned long long stats[7],
                             unsigned long long seed) {
  return cu_sim_run_x(s, k, args, NULL, 0, stats, seed);
}

#endif
