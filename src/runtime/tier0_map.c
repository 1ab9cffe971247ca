/* tier0_map.c — tier 0's elementwise map with run-time sizes: a region
 * ct_read_map reads (ops over inputs split into rows x a contiguous run,
 * broadcasts per row, constants; one map per slab of a padded or
 * concatenated output) evaluated a block of a row at a time, one op over
 * the block per step.  Each op's value is the op table's f32 column
 * (harp/tiny_ops.h), the same expression the reference interpreter
 * evaluates, expanded here into a loop over the block.  fp32 only.
 * Needs: tier0.h, pthreads.  Gives: rt_t0_map_run, rt_t0_map_op_ok. */
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
    float a = (ea), b = (eb);                \
    (void)a, (void)b;                        \
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

/* Argument x of an op in the block at column c0 of a row whose inputs
 * start at in[] (a broadcast input: its one value). */
static opnd arg_of(const ct_map_arg *x, const float *const *in, const rt_t0_map *m, const float *vals, int64_t c0) {
  if (x->kind == 'i') return m->m.in[x->idx].bcast ? (opnd){in[x->idx], 0} : (opnd){in[x->idx] + c0, 1};
  if (x->kind == 'v') return (opnd){vals + (size_t)x->idx * BLOCK, 1};
  return (opnd){NULL, 0}; /* a constant: set by the caller */
}

/* Item t: its row's coordinates, the inputs' and y's places, every op. */
static void map_item(const rt_t0_map *m, int64_t t, int64_t nblk, float *vals, float *consts) {
  const ct_map *s = &m->m;
  int64_t r = t / nblk, c0 = t % nblk * BLOCK, q = r, idx[CT_MAP_MAX_OUTER] = {0};
  int n = (int)(s->cols - c0 < BLOCK ? s->cols - c0 : BLOCK);
  for (int d = s->nouter - 1; d >= 0; d--) idx[d] = q % s->outer[d], q /= s->outer[d];
  const float *in[CT_MAP_MAX_IN];
  for (int k = 0; k < s->nin; k++) {
    int64_t off = 0;
    for (int d = 0; d < s->nouter; d++) off += idx[d] * s->in[k].ostride[d];
    in[k] = m->in[k] + off;
  }
  int64_t yo = 0;
  if (s->ystrided)
    for (int d = 0; d < s->nouter; d++) yo += idx[d] * s->yostride[d];
  else
    yo = r * s->cols;
  for (int o = 0; o < s->nops; o++) {
    const ct_map_op *op = &s->ops[o];
    opnd a = arg_of(&op->a, in, m, vals, c0), b = arg_of(&op->b, in, m, vals, c0);
    if (op->a.kind == 'c') consts[2 * o] = (float)op->a.c, a = (opnd){&consts[2 * o], 0};
    if (op->b.kind == 'c') consts[2 * o + 1] = (float)op->b.c, b = (opnd){&consts[2 * o + 1], 0};
    if (tiny_op_class(op->op) != TC_BINARY) b = (opnd){NULL, 0};
    eval_block(op->op, a, b, o == s->nops - 1 ? m->y + yo + c0 : vals + (size_t)o * BLOCK, n);
  }
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

harp_status rt_t0_map_run(harp_error *e, const rt_t0_map *m, int threads) {
  map_job j = {.m = m, .nrows = 1, .nblk = (m->m.cols + BLOCK - 1) / BLOCK};
  for (int d = 0; d < m->m.nouter; d++) j.nrows *= m->m.outer[d];
  if (m->m.cols <= 0 || j.nrows <= 0) return HARP_OK;
  pthread_t th[RT_T0_MAX_THREADS];
  int started = 0, nt = j.nrows * j.nblk < 8 ? 1 : threads;
  for (int i = 1; i < nt && i < RT_T0_MAX_THREADS; i++)
    if (!pthread_create(&th[started], NULL, map_worker, &j)) started++;
  map_worker(&j);
  for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
  if (j.failed) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory for a map's values");
  return HARP_OK;
}
