/* tier0_map.c — tier 0's elementwise map with run-time sizes: a region
 * ct_read_map reads (ops over inputs split into rows x a contiguous run,
 * broadcasts per row, constants; one map per slab of a padded or
 * concatenated output) evaluated a block of a row at a time, one op over
 * the block per step.  Each op's value is the op table's f32 column
 * (harp/tiny_ops.h), the same expression the reference interpreter
 * evaluates, expanded here into a loop over the block.  fp32 only.
 * A map read through floor divisions (ct_read_gmap: a nearest upsample, a
 * depth-to-space, a stride-2 ConvTranspose's zero-stuffing) runs the same
 * ops: each input's offset along a row tabled once per piece, its row's
 * start per row, the input gathered into the block unless it moves with
 * the row or stays put.
 * Needs: tier0.h, pthreads.  Gives: rt_t0_map_run, rt_t0_gmap_run, rt_t0_map_op_ok,
 * rt_t0_on_threads. */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "tier0.h"
#include "util/util.h"

#define BLOCK 512

bool rt_t0_map_op_ok(tiny_op op) {
  tiny_class c = tiny_op_class(op);
  return c == TC_UNARY || c == TC_BINARY || op == TINY_CAST;
}

/* One operand over a block: n values from p, p[i * step]. */
typedef struct opnd {
  const float *p;
  int step;
} opnd;

/* out[i] = op(a[i], b[i]) for i < n: the op table's f32 expression in a, b.
 * The common steps (both moving, one a broadcast) get loops of their own,
 * which the compiler vectorises; other steps the general loop. */
static void eval_block(tiny_op op, opnd A, opnd B, float *out, int n) {
  static const float zero = 0.0f;
  if (!B.p) B = (opnd){&zero, 0}; /* a unary op's b: never read */
  if (op == TINY_CAST) { /* between fp32 values (tier0.c declines a rounding one) */
    for (int i = 0; i < n; i++) out[i] = A.p[i * A.step];
    return;
  }
  const float *pa = A.p, *pb = B.p;
  switch (op) {
#define LOOP(ea, eb, f32)                    \
  for (int i = 0; i < n; i++) {              \
    float a = (ea), b = (eb), c = 0.0f;      \
    (void)a, (void)b, (void)c;               \
    out[i] = (float)(f32);                   \
  }
#define F32(e, cls, arg, dt, epi, f32, ...)                                \
  case TINY_##e:                                                           \
    if (A.step == 1 && B.step == 1) LOOP(pa[i], pb[i], f32)                \
    else if (A.step == 1 && B.step == 0) LOOP(pa[i], pb[0], f32)           \
    else if (A.step == 0 && B.step == 1) LOOP(pa[0], pb[i], f32)           \
    else LOOP(pa[i * A.step], pb[i * B.step], f32)                         \
    break;
    TINY_OPS(F32)
#undef F32
#undef LOOP
    default:
      for (int i = 0; i < n; i++) out[i] = NAN; /* rt_t0_map_op_ok takes no other op */
  }
}

typedef struct map_job {
  const rt_t0_map *m;
  int64_t nrows, nblk, next; /* work items: rows x blocks of a row; next: atomic */
  int failed;                /* atomic */
} map_job;

/* ops[0..nops) over a block of n points: inputs in[], op o's value in
 * vals + o * BLOCK (constants in consts), the last one stored to dst. */
static void run_ops(const ct_map_op *ops, int nops, const opnd *in, float *vals, float *consts, float *dst, int n) {
  for (int o = 0; o < nops; o++) {
    const ct_map_op *op = &ops[o];
    const ct_map_arg *x[2] = {&op->a, &op->b};
    opnd ab[2];
    for (int i = 0; i < 2; i++) {
      if (x[i]->kind == 'i') ab[i] = in[x[i]->idx];
      else if (x[i]->kind == 'v') ab[i] = (opnd){vals + (size_t)x[i]->idx * BLOCK, 1};
      else consts[2 * o + i] = (float)x[i]->c, ab[i] = (opnd){&consts[2 * o + i], 0};
    }
    if (tiny_op_class(op->op) != TC_BINARY) ab[1] = (opnd){NULL, 0};
    eval_block(op->op, ab[0], ab[1], o == nops - 1 ? dst : vals + (size_t)o * BLOCK, n);
  }
}

/* Item t: its row's coordinates, the inputs' and y's places, every op. */
static void map_item(const rt_t0_map *m, int64_t t, int64_t nblk, float *vals, float *consts) {
  const ct_map *s = &m->m;
  int64_t r = t / nblk, c0 = t % nblk * BLOCK, q = r, idx[CT_MAP_MAX_OUTER] = {0};
  int n = (int)(s->cols - c0 < BLOCK ? s->cols - c0 : BLOCK);
  for (int d = s->nouter - 1; d >= 0; d--) idx[d] = q % s->outer[d], q /= s->outer[d];
  opnd in[CT_MAP_MAX_IN];
  for (int k = 0; k < s->nin; k++) {
    int64_t off = 0;
    for (int d = 0; d < s->nouter; d++) off += idx[d] * s->in[k].ostride[d];
    in[k] = s->in[k].bcast ? (opnd){m->in[k] + off, 0} : (opnd){m->in[k] + off + c0, 1};
  }
  int64_t yo = 0;
  if (s->ystrided)
    for (int d = 0; d < s->nouter; d++) yo += idx[d] * s->yostride[d];
  else
    yo = r * s->cols;
  run_ops(s->ops, s->nops, in, vals, consts, m->y + yo + c0, n);
}

static void *map_worker(void *arg) {
  map_job *j = arg;
  float *vals = malloc(sizeof *vals * ((size_t)j->m->m.nops * BLOCK + 2 * CT_MAP_MAX_OPS));
  if (!vals) {
    __atomic_store_n(&j->failed, 1, __ATOMIC_RELAXED);
    return NULL;
  }
  float *consts = vals + (size_t)j->m->m.nops * BLOCK;
  for (int64_t t; (t = __atomic_fetch_add(&j->next, 1, __ATOMIC_RELAXED)) < j->nrows * j->nblk;)
    map_item(j->m, t, j->nblk, vals, consts);
  free(vals);
  return NULL;
}

/* tier0.h's rt_t0_on_threads. */
void rt_t0_on_threads(void *(*fn)(void *), void *job, int nt) {
  pthread_t th[RT_T0_MAX_THREADS];
  int started = 0;
  for (int i = 1; i < nt && i < RT_T0_MAX_THREADS; i++)
    if (!pthread_create(&th[started], NULL, fn, job)) started++;
  fn(job);
  for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
}

harp_status rt_t0_map_run(harp_error *e, const rt_t0_map *m, int threads) {
  map_job j = {.m = m, .nrows = 1, .nblk = (m->m.cols + BLOCK - 1) / BLOCK};
  for (int d = 0; d < m->m.nouter; d++) j.nrows *= m->m.outer[d];
  if (m->m.cols <= 0 || j.nrows <= 0) return HARP_OK;
  rt_t0_on_threads(map_worker, &j, j.nrows * j.nblk < 8 ? 1 : threads);
  if (j.failed) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory for a map's values");
  return HARP_OK;
}

/* ---- maps read through floor divisions (ct_gmap) --------------------------------- */
/* How an input moves along a row of a piece: with the column (its inner
 * offsets j apart), not at all, or otherwise (gathered per block). */
enum { GM_MOVE, GM_STAY, GM_GATHER };

typedef struct gmap_job {
  const rt_t0_gmap *m;
  const ct_gmap_piece *pc;
  int64_t lo[POLY_MAX_VARS], n[POLY_MAX_VARS]; /* the piece's box over y's axes */
  int64_t nrows, nblk, next;                   /* rows (y's outer axes) x blocks of a row; next: atomic */
  const int64_t *inner;                        /* [nin][n[last]]: each input's offset along the row */
  int how[CT_MAP_MAX_IN];
  int failed; /* atomic */
} gmap_job;

/* Axis q's index at the point idx (y's coordinates) without (outer) or
 * only (!outer) the terms of the last axis `last`. */
static int64_t gm_index(const poly_qaxis *q, const int64_t *idx, int last, bool outer) {
  int64_t v = outer ? q->c0 : 0;
  for (int d = 0; d <= last; d++)
    if ((d < last) == outer) v += q->coef[d] * idx[d];
  for (int i = 0; i < q->ndiv; i++)
    if ((q->dvar[i] < last) == outer) v += q->dcoef[i] * (idx[q->dvar[i]] / q->dden[i]); /* idx >= 0: the floor */
  return v;
}

/* Input in's element offset at idx over its strides st: the outer part or the row's part. */
static int64_t gm_offset(const ct_gmap_in *in, const int64_t *st, const int64_t *idx, int last, bool outer) {
  int64_t off = 0;
  for (int a = 0; a < in->rank; a++) off += gm_index(&in->ax[a], idx, last, outer) * st[a];
  return off;
}

/* Item t of job j: one block of one row, the inputs read (gathered where
 * they neither move nor stay), the ops, y stored. */
static void gmap_item(const gmap_job *j, int64_t t, float *vals, float *consts, float *gather) {
  const ct_gmap *g = j->m->g;
  const ct_gmap_piece *pc = j->pc;
  int last = g->nv - 1, kp = (int)(pc - g->piece);
  int64_t r = t / j->nblk, c0 = t % j->nblk * BLOCK, idx[POLY_MAX_VARS] = {0}, yo = 0;
  int n = (int)(j->n[last] - c0 < BLOCK ? j->n[last] - c0 : BLOCK);
  for (int d = last - 1; d >= 0; d--) idx[d] = j->lo[d] + r % j->n[d], r /= j->n[d];
  for (int d = 0; d < last; d++) yo = (yo + idx[d]) * g->size[d + 1];
  yo += j->lo[last] + c0;
  opnd in[CT_MAP_MAX_IN];
  for (int k = 0; k < pc->nin; k++) {
    const float *p = j->m->in[kp][k] + gm_offset(&pc->in[k], j->m->st[kp][k], idx, last, true);
    const int64_t *inner = j->inner + (size_t)k * (size_t)j->n[last] + c0;
    if (j->how[k] != GM_GATHER) {
      in[k] = (opnd){p + inner[0], j->how[k] == GM_MOVE};
      continue;
    }
    float *b = gather + (size_t)k * BLOCK;
    for (int q = 0; q < n; q++) b[q] = p[inner[q]];
    in[k] = (opnd){b, 1};
  }
  run_ops(pc->ops, pc->nops, in, vals, consts, j->m->y + yo, n);
}

static void *gmap_worker(void *arg) {
  gmap_job *j = arg;
  size_t nv = (size_t)j->pc->nops * BLOCK + 2 * CT_MAP_MAX_OPS;
  float *vals = malloc(sizeof *vals * (nv + (size_t)j->pc->nin * BLOCK));
  if (!vals) {
    __atomic_store_n(&j->failed, 1, __ATOMIC_RELAXED);
    return NULL;
  }
  for (int64_t t; (t = __atomic_fetch_add(&j->next, 1, __ATOMIC_RELAXED)) < j->nrows * j->nblk;)
    gmap_item(j, t, vals, vals + (size_t)j->pc->nops * BLOCK, vals + nv);
  free(vals);
  return NULL;
}

/* Each input's offsets along piece j->pc's rows (j->inner, malloc'd) and
 * how it moves there; false when out of memory. */
static bool gmap_inner(gmap_job *j, int kp) {
  const ct_gmap_piece *pc = j->pc;
  int last = j->m->g->nv - 1;
  int64_t nc = j->n[last], idx[POLY_MAX_VARS] = {0};
  int64_t *inner = malloc(sizeof *inner * (size_t)(nc * (pc->nin ? pc->nin : 1)));
  if (!inner) return false;
  for (int k = 0; k < pc->nin; k++) {
    int64_t *o = inner + (size_t)k * (size_t)nc;
    bool move = true, stay = true;
    for (int64_t c = 0; c < nc; c++) {
      idx[last] = j->lo[last] + c;
      o[c] = gm_offset(&pc->in[k], j->m->st[kp][k], idx, last, false);
      move = move && o[c] == o[0] + c;
      stay = stay && o[c] == o[0];
    }
    j->how[k] = stay ? GM_STAY : move ? GM_MOVE : GM_GATHER;
  }
  j->inner = inner;
  return true;
}

harp_status rt_t0_gmap_run(harp_error *e, const rt_t0_gmap *m, int threads) {
  const ct_gmap *g = m->g;
  for (int kp = 0; kp < g->npiece; kp++) {
    gmap_job j = {.m = m, .pc = &g->piece[kp], .nrows = 1};
    for (int d = 0; d < g->nv; d++) j.n[d] = g->size[d];
    if (g->var >= 0) j.lo[g->var] = g->piece[kp].lo, j.n[g->var] = g->piece[kp].hi - g->piece[kp].lo + 1;
    for (int d = 0; d + 1 < g->nv; d++) j.nrows *= j.n[d];
    j.nblk = (j.n[g->nv - 1] + BLOCK - 1) / BLOCK;
    if (j.nrows <= 0 || j.nblk <= 0) continue;
    if (!gmap_inner(&j, kp)) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory for a map's offsets");
    rt_t0_on_threads(gmap_worker, &j, j.nrows * j.nblk < 8 ? 1 : threads);
    free((void *)j.inner);
    if (j.failed) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory for a map's values");
  }
  return HARP_OK;
}
