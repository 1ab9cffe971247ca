/* calibrate.c — measure this CPU for the cost model and keep the figures
 * with the machine description (docs/plan.md §19).
 * Needs: calib_mk.c (the micro-kernel), calib_wf.c (Winograd's filter
 * transform), plan_calib_parse / _format
 * (src/plan/calib.c), the cache directory (rt_cc_cache_dir), rt_machine_id.
 * Gives: rt_calib_path, rt_calib_measure, rt_calib_load, rt_calib_store,
 * rt_calib_ensure, rt_calib_note_wino, rt_calib_apply.
 *
 * Measurement under load: every figure is the best of many short samples
 * taken round-robin over all configurations, so another process on the
 * core slows some samples of each and the minimum stays the machine's. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "calib.h"
#include "compile.h"
#include "harp/knobs.h"
#include "harp/tune.h"
#include "util/util.h"

/* Depths and panel widths of the CPU search space (search.c, space_for). */
static const int kcs[] = {128, 256, 384};
static const int ncs[] = {256, 512};
/* Micro-tiles MR x vectors the search may offer (search.c's list). */
static const int tiles[][2] = {{6, 4}, {8, 3}, {6, 2}, {4, 3}, {5, 2}, {4, 2}, {2, 2}};
#define MK_TILES 4 /* the first four that fit: the search offers them (with an epilogue, those that still fit) */
#define ROUNDS 12
#define SAMPLE_MS 0.3

char *rt_calib_path(const char *cache_dir, const char *machine_id) {
  rt_cc_opts co = {.cache_dir = cache_dir};
  char *dir = rt_cc_cache_dir(&co);
  if (!dir) return NULL;
  uint64_t h = ut_hash64(machine_id, strlen(machine_id), 0x6361);
  size_t n = strlen(dir) + 48;
  char *p = ut_xmalloc(n);
  if (p) snprintf(p, n, "%s/calib/cpu-%016llx.txt", dir, (unsigned long long)h);
  free(dir);
  return p;
}

/* ---- the micro-kernel ------------------------------------------------------------------ */
typedef struct mk_bufs {
  float *a, *b, *c;
} mk_bufs;

/* One sample of micro-tile (mr, nr) at (kc, nc): GFLOP/s, 0 if no kernel. */
static double mk_sample(const plan_machine *m, const mk_bufs *bf, int mr, int nr, int kc, int nc) {
  long npan = nc / nr > 0 ? nc / nr : 1;
  double flops = 2.0 * mr * nr * (double)npan * kc, t0 = ut_now_ms(), t;
  int calls = 0;
  do {
    if (!rt_calib_mk_run(m->avx512, mr, nr, bf->a, bf->b, kc, npan, bf->c)) return 0;
    calls++;
  } while ((t = ut_now_ms() - t0) < SAMPLE_MS);
  return t > 0 ? flops * calls / (t * 1e6) : 0;
}

/* The micro-tiles this CPU's registers hold, each at every (kc, nc): the
 * best of ROUNDS samples, rounds interleaved. */
static harp_status measure_mk(harp_error *e, const plan_machine *m, plan_calib *c) {
  int lanes = rt_calib_mk_lanes(m->avx512, m->avx2);
  if (lanes == 0) return HARP_OK; /* no micro-kernel here: the caller says so */
  mk_bufs bf = {ut_xmalloc(64 * 512 * sizeof(float)), ut_xmalloc((size_t)384 * 768 * sizeof(float)),
                ut_xmalloc(64 * 768 * sizeof(float))};
  if (!bf.a || !bf.b || !bf.c) {
    free(bf.a), free(bf.b), free(bf.c);
    return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  }
  for (int i = 0; i < 64 * 512; i++) bf.a[i] = 1.0f / (float)(1 + i % 7);
  for (int i = 0; i < 384 * 768; i++) bf.b[i] = 1.0f / (float)(1 + i % 5);
  memset(bf.c, 0, 64 * 768 * sizeof(float));
  c->nmk = 0;
  for (int t = 0, used = 0; t < UT_ARRAY_LEN(tiles) && used < MK_TILES; t++) {
    int mr = tiles[t][0], nr = tiles[t][1] * lanes;
    if (tiles[t][0] * tiles[t][1] + tiles[t][1] + 1 > m->regs_per_thread_max) continue;
    used++;
    for (int k = 0; k < UT_ARRAY_LEN(kcs); k++)
      for (int n = 0; n < UT_ARRAY_LEN(ncs) && c->nmk < PLAN_CALIB_MK; n++)
        c->mk[c->nmk++] = (plan_calib_mk){mr, nr, kcs[k], ncs[n], 0};
  }
  for (int r = 0; r < ROUNDS; r++)
    for (int i = 0; i < c->nmk; i++) {
      plan_calib_mk *k = &c->mk[i];
      double g = mk_sample(m, &bf, k->mr, k->nr, k->kc, k->nc);
      if (g > k->gflops) k->gflops = g;
    }
  free(bf.a), free(bf.b), free(bf.c);
  return HARP_OK;
}

/* ---- bandwidth and the parallel call ---------------------------------------------------- */
typedef struct worker {
  pthread_t th;
  struct pool *pool;
  const float *src;
  float *dst;
  size_t n;
} worker;

/* A minimal fork-join pool: workers wait for a new generation, do their
 * share (a copy, or nothing), count themselves done. */
typedef struct pool {
  pthread_mutex_t mu;
  pthread_cond_t go, done;
  long gen;
  int pending, nworkers;
  bool quit, copy;
  worker w[64];
} pool;

static void *worker_main(void *arg) {
  worker *w = arg;
  pool *p = w->pool;
  long seen = 0;
  for (;;) {
    pthread_mutex_lock(&p->mu);
    while (p->gen == seen && !p->quit) pthread_cond_wait(&p->go, &p->mu);
    if (p->quit) {
      pthread_mutex_unlock(&p->mu);
      return NULL;
    }
    seen = p->gen;
    bool copy = p->copy;
    pthread_mutex_unlock(&p->mu);
    if (copy) memcpy(w->dst, w->src, w->n * sizeof(float));
    pthread_mutex_lock(&p->mu);
    if (--p->pending == 0) pthread_cond_signal(&p->done);
    pthread_mutex_unlock(&p->mu);
  }
}

/* One parallel call: every worker's share, the caller's (w[0]) too. */
static void pool_call(pool *p, bool copy) {
  pthread_mutex_lock(&p->mu);
  p->copy = copy;
  p->pending = p->nworkers - 1;
  p->gen++;
  pthread_cond_broadcast(&p->go);
  pthread_mutex_unlock(&p->mu);
  if (copy) memcpy(p->w[0].dst, p->w[0].src, p->w[0].n * sizeof(float));
  pthread_mutex_lock(&p->mu);
  while (p->pending > 0) pthread_cond_wait(&p->done, &p->mu);
  pthread_mutex_unlock(&p->mu);
}

/* DRAM bandwidth (a 64 MiB copy split over the cores) and the cost of an
 * empty parallel call, best of several. */
static harp_status measure_pool(harp_error *e, const plan_machine *m, plan_calib *c) {
  int nt = m->sm_count < 1 ? 1 : m->sm_count > 64 ? 64 : m->sm_count;
  size_t total = (size_t)16 << 20; /* floats: 64 MiB each way */
  float *src = ut_xmalloc(total * sizeof(float)), *dst = ut_xmalloc(total * sizeof(float));
  pool *p = ut_xcalloc(1, sizeof *p);
  if (!src || !dst || !p) {
    free(src), free(dst), free(p);
    return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  }
  memset(src, 0, total * sizeof(float));
  memset(dst, 1, total * sizeof(float));
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->go, NULL);
  pthread_cond_init(&p->done, NULL);
  p->nworkers = 1;
  for (int i = 0; i < nt; i++) {
    worker *w = &p->w[i];
    *w = (worker){.pool = p, .src = src + total / nt * i, .dst = dst + total / nt * i, .n = total / nt};
    if (i > 0 && pthread_create(&w->th, NULL, worker_main, w) == 0) p->nworkers++;
  }
  double best_copy = INFINITY, best_call = INFINITY;
  for (int r = 0; r < 5; r++) {
    double t0 = ut_now_ms();
    pool_call(p, true);
    double t = ut_now_ms() - t0;
    if (t < best_copy) best_copy = t;
    for (int k = 0; k < 40; k++) {
      t0 = ut_now_ms();
      pool_call(p, false);
      t = ut_now_ms() - t0;
      if (t < best_call) best_call = t;
    }
  }
  pthread_mutex_lock(&p->mu);
  p->quit = true;
  pthread_cond_broadcast(&p->go);
  pthread_mutex_unlock(&p->mu);
  for (int i = 1; i < p->nworkers; i++) pthread_join(p->w[i].th, NULL);
  double moved = 2.0 * (double)(total / nt * nt) * sizeof(float) * p->nworkers / nt;
  c->mem_gbs = moved / (best_copy * 1e6);
  c->task_us = best_call * 1e3;
  pthread_mutex_destroy(&p->mu);
  pthread_cond_destroy(&p->go);
  pthread_cond_destroy(&p->done);
  free(src), free(dst), free(p);
  return HARP_OK;
}

/* Packing: NR-wide panels gathered from a row-major 384 x 1024 B (1.5 MiB,
 * the size of a packed KC x N slab), one core. */
static harp_status measure_pack(harp_error *e, const plan_machine *m, plan_calib *c) {
  int kc = 384, n = 1024, nr = UT_MAX(m->simd_bytes / 4, 4) * 4;
  float *b = ut_xmalloc((size_t)kc * n * sizeof(float)), *pk = ut_xmalloc((size_t)kc * n * sizeof(float));
  if (!b || !pk) {
    free(b), free(pk);
    return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  }
  for (int i = 0; i < kc * n; i++) b[i] = (float)(i & 255);
  double best = INFINITY;
  for (int r = 0; r < 8; r++) {
    double t0 = ut_now_ms();
    for (int j = 0; j < n; j += nr)
      for (int k = 0; k < kc; k++) memcpy(pk + (size_t)j * kc + (size_t)k * nr, b + (size_t)k * n + j, nr * sizeof(float));
    double t = ut_now_ms() - t0;
    if (t < best) best = t;
  }
  volatile float sink = pk[kc * n - 1];
  (void)sink;
  c->pack_gbs = 2.0 * kc * n * sizeof(float) / (best * 1e6);
  free(b), free(pk);
  return HARP_OK;
}

/* This thread's CPU time in ms: a one-thread loop timed by it is not
 * slowed by other processes taking the core (only by what they leave in
 * the caches). */
static double thread_ms(void) {
  struct timespec ts;
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)) return ut_now_ms();
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* Winograd's filter transform (calib_wf.c) of a 64 x 64 weight (its
 * output, 0.6 MiB, within a core's L2) and of a 256 x 256 one (9.7 MiB,
 * beyond it): ns per multiply-add of thread CPU time, the best of rounds
 * interleaved. */
static harp_status measure_wf(harp_error *e, plan_calib *c) {
  static const long ch[2] = {64, 256};
  float *w = ut_xmalloc((size_t)256 * 256 * 9 * sizeof(float));
  float *up = ut_xmalloc((size_t)rt_calib_wf_up_floats(256) * sizeof(float));
  if (!w || !up) {
    free(w), free(up);
    return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  }
  for (int i = 0; i < 256 * 256 * 9; i++) w[i] = 1.0f / (float)(1 + i % 11);
  memset(up, 0, (size_t)rt_calib_wf_up_floats(256) * sizeof(float)); /* the pages, before any timing */
  double best[2] = {INFINITY, INFINITY};
  for (int r = 0; r < 6; r++)
    for (int i = 0; i < 2; i++) {
      double t0 = thread_ms(), macs = rt_calib_wf_run(w, up, ch[i]), t = (thread_ms() - t0) * 1e6 / macs;
      if (t < best[i]) best[i] = t;
    }
  volatile float sink = up[rt_calib_wf_up_floats(256) - 1];
  (void)sink;
  for (int i = 0; i < 2; i++) c->wf_ns[i] = best[i] > 1e-4 ? best[i] : 1e-4;
  free(w), free(up);
  return HARP_OK;
}

harp_status rt_calib_measure(harp_error *e, const plan_machine *m, plan_calib *out) {
  memset(out, 0, sizeof *out);
  if (m->arch != PLAN_ARCH_CPU) return ut_fail(e, HARP_E_USAGE, NULL, "calibration measures the CPU only");
  if (measure_mk(e, m, out) || measure_pool(e, m, out) || measure_pack(e, m, out) || measure_wf(e, out)) return e->code;
  if (out->nmk == 0)
    return ut_fail(e, HARP_E_UNSUPPORTED, NULL, "no micro-kernel to calibrate on this CPU (%s): x86-64 AVX2 or AVX-512 only",
                   m->name);
  for (int i = 0; i < out->nmk; i++)
    if (!(out->mk[i].gflops > 0)) return ut_fail(e, HARP_E_INTERNAL, NULL, "calibration: a micro-kernel did not run");
  if (!(out->mem_gbs > 0.01)) out->mem_gbs = 0.01;
  if (!(out->pack_gbs > 0.01)) out->pack_gbs = 0.01;
  out->valid = true;
  return HARP_OK;
}

/* ---- the file ---------------------------------------------------------------------------- */
harp_status rt_calib_load(harp_error *e, const char *path, const char *machine_id, plan_calib *out, bool *found) {
  memset(out, 0, sizeof *out);
  *found = false;
  FILE *f = fopen(path, "rb");
  if (!f) return HARP_OK;
  fclose(f);
  *found = true;
  char *text = NULL;
  size_t len = 0;
  harp_status st = ut_read_file(e, path, 1 << 16, &text, &len);
  if (!st && memchr(text, 0, len)) st = ut_fail_at(e, HARP_E_PARSE, path, 0, 0, "calibration file contains a NUL byte");
  if (!st) st = plan_calib_parse(text, path, machine_id, out, e);
  free(text);
  return st;
}

harp_status rt_calib_store(harp_error *e, const char *path, const char *machine_id, const plan_calib *c) {
  char *text = plan_calib_format(c, machine_id);
  char *dir = ut_xmalloc(strlen(path) + 1);
  if (!text || !dir) {
    free(text), free(dir);
    return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  }
  strcpy(dir, path);
  char *slash = strrchr(dir, '/');
  if (slash) *slash = 0;
  harp_status st = slash ? ut_mkdirs(e, dir) : HARP_OK;
  if (!st) st = ut_write_file_atomic(e, path, text, strlen(text));
  free(text), free(dir);
  return st;
}

harp_status rt_calib_ensure(harp_error *e, const char *cache_dir, bool force, plan_machine *m, rt_calib_result *res) {
  memset(res, 0, sizeof *res);
  char id[RT_MACHINE_ID_MAX];
  rt_machine_id(m, id, sizeof id);
  if (!(res->path = rt_calib_path(cache_dir, id))) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  bool found = false;
  harp_error le = {0};
  if (!force) {
    if (!rt_calib_load(&le, res->path, id, &m->calib, &found) && found) {
      if (m->calib.wf_ns[0] > 0) return HARP_OK;
      /* a file from before the filter-transform figure: that one measured
       * now (a fraction of a second) and added, the rest kept */
      double t0 = ut_now_ms();
      harp_status st = measure_wf(e, &m->calib);
      res->seconds = (ut_now_ms() - t0) / 1e3;
      res->measured = true;
      return st ? st : rt_calib_store(e, res->path, id, &m->calib);
    }
    if (le.code == HARP_E_NO_MEMORY) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
    if (le.code) harp_error_format(&le, res->why, sizeof res->why); /* "error[..]: FILE:LINE:COL: ..." */
  }
  double t0 = ut_now_ms();
  harp_status st = rt_calib_measure(e, m, &m->calib);
  res->seconds = (ut_now_ms() - t0) / 1e3;
  res->measured = true;
  if (!st) st = rt_calib_store(e, res->path, id, &m->calib);
  return st;
}

void rt_calib_result_free(rt_calib_result *r) {
  if (!r) return;
  free(r->path);
  r->path = NULL;
}

harp_status rt_calib_note_wino(harp_error *e, const char *cache_dir, const plan_machine *m, int64_t px, int64_t k,
                               double speedup) {
  char id[RT_MACHINE_ID_MAX];
  rt_machine_id(m, id, sizeof id);
  char *path = rt_calib_path(cache_dir, id);
  if (!path) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  harp_error le = {0};
  bool found = false;
  plan_calib c;
  harp_status st = HARP_OK;
  if (!rt_calib_load(&le, path, id, &c, &found) && found) {
    plan_calib_add_wino(&c, px, k, speedup);
    st = rt_calib_store(e, path, id, &c);
  }
  free(path);
  return st;
}

void rt_calib_apply(plan_machine *m, const rt_knobs *k) {
  memset(&m->calib, 0, sizeof m->calib);
  if (m->arch != PLAN_ARCH_CPU || (k && k->cpu_calib == RT_CPU_CALIB_OFF)) return;
  char id[RT_MACHINE_ID_MAX];
  rt_machine_id(m, id, sizeof id);
  char *path = rt_calib_path(k ? k->cache_dir : NULL, id);
  harp_error e = {0};
  bool found;
  plan_calib c;
  if (path && !rt_calib_load(&e, path, id, &c, &found) && found) m->calib = c;
  free(path);
}
