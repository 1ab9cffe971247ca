/* attention.c — recognizing shape C (seed 000 §7.3) in the Poly-View:
 * two contraction blocks whose intermediate is the softmax of the first's
 * output along the second's reduced axis.
 * Needs: Poly Core (pointwise reads, strides), the interpreter (to check a
 * constant mask).  Gives: rg_match_attention.
 *
 * Walking back from the P V contraction through the operand that its
 * reduced variable indexes along axis `ax` (the keys):
 *
 *   P   = [CAST] FDIV(e, Z)            e pointwise, Z broadcast along ax
 *   Z   = [MAX(., c)] REDUCE SUM_ax(e)
 *   e   = EXP2(MUL(d, log2 e)) | EXP(d)
 *   d   = SUB(s, Mx)                   s pointwise, Mx broadcast along ax
 *   Mx  = [MAX(., c)] REDUCE MAX_ax(s)
 *   s   = [WHERE(mask, -inf, .)] [ADD(., mask)] [MUL(., scale)] S
 *   S   = Q K^T: a matmul whose key variable (used by K only) is ax
 *
 * Each arrow is checked on the isl relations: pointwise reads
 * (poly_access_is_pointwise), broadcasts and reduction reads by their
 * strides (poly_access_strides), and every intermediate is read inside the
 * chain only.  A WHERE mask must be constant (no input feeds it); it is
 * evaluated and compared with the causal masks j > i + (N - M) and j > i
 * (a compare of a row vector and a column vector: the vectors only). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harp/interp.h"
#include "region/rg_int.h"

#define LOG2E 1.4426950408889634
#define MAX_CHAIN 24
#define MAX_MASK_ELEMS ((int64_t)1 << 22)

typedef struct walker {
  rg_ctx *c;
  const char *why;
  int blocks[MAX_CHAIN];
  int n;
} walker;

static bool fail(walker *w, const char *why) {
  if (!w->why) w->why = why;
  return false;
}

static const poly_block_info *B(const walker *w, int b) { return poly_block(w->c->pv, b); }
static tiny_op op_of(const walker *w, int b) { return w->c->g->nodes[B(w, b)->node].op; }

static bool add(walker *w, int b) {
  if (b < 0 || w->n >= MAX_CHAIN) return fail(w, "chain too long");
  w->blocks[w->n++] = b;
  return true;
}

/* The block producing what access k of block b reads, when it reads pointwise. */
static int pointwise_src(walker *w, int b, int k) {
  bool pw = false;
  if (poly_access_is_pointwise(w->c->e, w->c->pv, b, k, &pw) || !pw) return -1;
  return rg_producer_block(w->c, B(w, b)->access[k].tensor);
}

/* Access k of block b reads a CONST; its value. */
static bool const_operand(const walker *w, int b, int k, double *v) {
  const tiny_node *n = &w->c->g->nodes[B(w, b)->access[k].tensor];
  if (n->op != TINY_CONST) return false;
  *v = n->a.cnst.value;
  return true;
}

static bool strides_of(walker *w, int b, int k, int64_t *st, int64_t *off) {
  bool aff = false;
  if (poly_access_strides(w->c->e, w->c->pv, b, k, st, off, &aff)) return false;
  return aff;
}

/* Block b (vars = the S axes) reads access k broadcast along ax: the reduced tensor row-major, stride 0 on ax. */
static bool broadcast_along(walker *w, int b, int k, int ax) {
  int64_t st[POLY_MAX_VARS], off, ts[TINY_MAX_RANK];
  int rank;
  if (!strides_of(w, b, k, st, &off) || off) return false;
  if (!rg_shape_strides(w->c->g, B(w, b)->access[k].tensor, ts, &rank)) return false;
  if (rank != B(w, b)->nvars - 1) return false;
  int64_t lo[POLY_MAX_VARS], hi[POLY_MAX_VARS];
  if (!poly_block_ranges(w->c->pv, b, lo, hi)) return false;
  for (int v = 0; v < B(w, b)->nvars; v++) /* a variable of extent 1 has any stride */
    if (hi[v] > lo[v] && st[v] != (v == ax ? 0 : ts[v - (v > ax)])) return false;
  return true;
}

/* REDUCE block r (vars i.. then r0) reads tensor t of rank nout+1 with r0 at axis ax, the rest in order. */
static bool reduce_along(walker *w, int r, int64_t t, int ax) {
  const poly_block_info *b = B(w, r);
  int64_t st[POLY_MAX_VARS], off, ts[TINY_MAX_RANK];
  int rank;
  if (b->kind != POLY_REDUCE || b->nvars != b->nout + 1 || b->access[0].tensor != t) return false;
  if (!strides_of(w, r, 0, st, &off) || off || !rg_shape_strides(w->c->g, (int)t, ts, &rank)) return false;
  if (rank != b->nvars) return false;
  int64_t lo[POLY_MAX_VARS], hi[POLY_MAX_VARS];
  if (!poly_block_ranges(w->c->pv, r, lo, hi)) return false;
  for (int v = 0; v < b->nout; v++)
    if (hi[v] > lo[v] && st[v] != ts[v + (v >= ax)]) return false;
  return hi[b->nout] == lo[b->nout] || st[b->nout] == ts[ax];
}

/* An optional MAX(x, c) clamp: returns the block it reads (or b itself). */
static int unclamp(walker *w, int b, bool *has, double *floor_v) {
  *has = false;
  if (b < 0 || op_of(w, b) != TINY_MAX) return b;
  for (int k = 0; k < 2; k++) {
    double v;
    int other = pointwise_src(w, b, 1 - k);
    if (const_operand(w, b, k, &v) && other >= 0) {
      *has = true;
      *floor_v = v;
      add(w, b);
      return other;
    }
  }
  return b;
}

/* ---- the causal mask -------------------------------------------------------------- */
/* Evaluate node h (which no INPUT may feed) on the interpreter. */
static harp_status eval_const(rg_ctx *c, int h, bool *ok, ut_tensor *out) {
  const tiny_graph *g = c->g;
  *ok = false;
  memset(c->mark, 0, (size_t)g->n + 1);
  c->mark[h] = 1;
  for (int i = h; i >= 0; i--) {
    if (!c->mark[i]) continue;
    if (g->nodes[i].op == TINY_INPUT) return HARP_OK;
    for (int k = 0; k < g->nodes[i].nsrc; k++)
      if (g->nodes[i].src[k].node >= 0) c->mark[g->nodes[i].src[k].node] = 1;
  }
  if (tiny_shape_numel(&g->nodes[h].shape) > MAX_MASK_ELEMS) return HARP_OK;
  tiny_graph *s = tiny_graph_new();
  if (!s) return ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
  for (int i = 0; i <= h; i++) {
    if (!c->mark[i]) continue;
    const tiny_node *n = &g->nodes[i];
    tiny_src src[TINY_MAX_SRC];
    for (int k = 0; k < n->nsrc; k++) src[k] = (tiny_src){c->stack[n->src[k].node], 0};
    c->stack[i] = tiny_add(s, n->id, n->op, src, n->nsrc, tiny_op_argkind(n->op) == TA_NONE ? NULL : &n->a);
  }
  tiny_mark_output(s, c->stack[h]);
  harp_error e2 = {0};
  harp_status st = s->err.code ? s->err.code : tiny_infer(&e2, s, c->syms, false);
  if (!st) st = tiny_interp(&e2, s, c->syms, NULL, 0, out);
  tiny_graph_free(s);
  if (st == HARP_E_NO_MEMORY) return ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
  *ok = st == HARP_OK; /* anything else: not a mask we can prove causal */
  return HARP_OK;
}

/* One operand of the compare block cb (vars i, j): a constant vector read
 * along one of the two variables only; its values (evaluated) in *t and
 * the element read at (i, j) = off + si * i + sj * j. */
static bool cmp_operand(rg_ctx *c, int cb, int k, ut_tensor *t, int64_t *off, int64_t *si, int64_t *sj) {
  int64_t st[POLY_MAX_VARS];
  bool aff, ok;
  if (poly_access_strides(c->e, c->pv, cb, k, st, off, &aff) || !aff) return false;
  *si = st[0], *sj = st[1];
  if (*si && *sj) return false; /* a matrix: not the row / column vectors of a mask */
  return !eval_const(c, poly_block(c->pv, cb)->access[k].tensor, &ok, t) && ok;
}

/* The causal mask without evaluating it: the WHERE block wb reads its
 * condition as the M x N matrix of a CMPLT block (row stride N, column 1,
 * other variables 0) whose operands are a constant vector along the rows
 * and one along the columns (the lowering's reversed iotas); the condition
 * at (i, j) is then a[i] < b[j] from M + N values, checked against j > i + off
 * for every (i, j).  What an attention of 4k-16k tokens needs: its mask has
 * 2^24-2^28 elements.  *done false when the mask is not of this form. */
/* Is hidden(i, j) = u[i] < w[j] (u_lt_w; else w[j] < u[i]) exactly j > i + off
 * for every query i < M and key j < N?  With w's prefix max / min and suffix
 * min / max: O(M + N) (16k tokens: 2^28 pairs).  NaN-free u and w. */
static bool split_causal(const double *u, int64_t M, const double *w, int64_t N, bool u_lt_w, int64_t off, double *pre,
                         double *suf) {
  for (int64_t j = 0; j < N; j++) /* pre[j]: over w[0..j]; suf[j]: over w[j..N-1] */
    pre[j] = j == 0 ? w[0] : u_lt_w ? fmax(pre[j - 1], w[j]) : fmin(pre[j - 1], w[j]);
  for (int64_t j = N - 1; j >= 0; j--)
    suf[j] = j == N - 1 ? w[j] : u_lt_w ? fmin(suf[j + 1], w[j]) : fmax(suf[j + 1], w[j]);
  for (int64_t i = 0; i < M; i++) {
    int64_t t = i + off; /* keys 0..t visible, t+1.. hidden */
    if (t >= 0 && (u_lt_w ? u[i] < pre[t < N ? t : N - 1] : pre[t < N ? t : N - 1] < u[i])) return false;
    if (t + 1 < N && !(u_lt_w ? u[i] < suf[t + 1 > 0 ? t + 1 : 0] : suf[t + 1 > 0 ? t + 1 : 0] < u[i])) return false;
  }
  return true;
}

/* The compare's operands as a query vector u and a key vector w (which one
 * depends on the queries says u_lt_w); false when they are not of that form,
 * an index is out of range, or a value is NaN. */
static bool mask_vectors(const ut_tensor *x, const int64_t *o, const int64_t *si, const int64_t *sj, int64_t M, int64_t N,
                         double *u, double *w, bool *u_lt_w) {
  int qi = sj[0] == 0 && si[1] == 0 ? 0 : si[0] == 0 && sj[1] == 0 ? 1 : -1; /* the operand along the queries */
  if (qi < 0) return false;
  *u_lt_w = qi == 0;
  for (int64_t i = 0; i < M; i++) {
    int64_t a = o[qi] + si[qi] * i;
    if (a < 0 || a >= ut_tensor_numel(&x[qi])) return false;
    u[i] = ut_tensor_get(&x[qi], a);
    if (isnan(u[i])) return false;
  }
  for (int64_t j = 0; j < N; j++) {
    int64_t a = o[1 - qi] + sj[1 - qi] * j;
    if (a < 0 || a >= ut_tensor_numel(&x[1 - qi])) return false;
    w[j] = ut_tensor_get(&x[1 - qi], a);
    if (isnan(w[j])) return false;
  }
  return true;
}

static void causal_by_vectors(rg_ctx *c, int wb, int qv, int kv, const int64_t *st, int64_t off, int64_t M, int64_t N,
                              bool *done, bool *br, bool *tl) {
  const poly_block_info *b = poly_block(c->pv, wb);
  *done = false;
  for (int v = 0; v < b->nvars; v++)
    if (st[v] != (v == qv ? N : v == kv ? 1 : 0)) return;
  int cb = rg_producer_block(c, b->access[0].tensor);
  if (off || cb < 0 || c->g->nodes[poly_block(c->pv, cb)->node].op != TINY_CMPLT || poly_block(c->pv, cb)->nvars != 2) return;
  int64_t lo[POLY_MAX_VARS], hi[POLY_MAX_VARS];
  if (!poly_block_ranges(c->pv, cb, lo, hi) || hi[0] + 1 != M || hi[1] + 1 != N) return;
  ut_tensor x[2];
  int64_t o[2], si[2], sj[2];
  bool ok0 = cmp_operand(c, cb, 0, &x[0], &o[0], &si[0], &sj[0]);
  bool ok1 = ok0 && cmp_operand(c, cb, 1, &x[1], &o[1], &si[1], &sj[1]);
  double *v = ok1 ? ut_xmalloc(sizeof(double) * (size_t)(M + 3 * N)) : NULL;
  if (ok1 && !v) ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
  bool u_lt_w;
  if (v) {
    *done = true; /* a mask of this form that is not causal is no causal attention */
    bool vec = mask_vectors(x, o, si, sj, M, N, v, v + M, &u_lt_w);
    *br = vec && split_causal(v, M, v + M, N, u_lt_w, N - M, v + M + N, v + M + 2 * N);
    *tl = vec && !*br && split_causal(v, M, v + M, N, u_lt_w, 0, v + M + N, v + M + 2 * N);
  }
  free(v);
  if (ok0) ut_tensor_free(&x[0]);
  if (ok1) ut_tensor_free(&x[1]);
}

/* WHERE block wb (vars = the S axes) reads its condition (access 0) with
 * these strides; is it j > i + off for the query var qv and key var kv? */
static harp_status check_causal(rg_ctx *c, int wb, int qv, int kv, rg_attention *att) {
  const poly_block_info *b = poly_block(c->pv, wb);
  int64_t st[POLY_MAX_VARS], off;
  bool aff, ok;
  att->causal = false;
  if (poly_access_strides(c->e, c->pv, wb, 0, st, &off, &aff) || !aff) return c->e->code;
  int64_t rlo[POLY_MAX_VARS], rhi[POLY_MAX_VARS];
  if (poly_block_ranges(c->pv, wb, rlo, rhi)) {
    bool done, br, tl;
    causal_by_vectors(c, wb, qv, kv, st, off, rhi[qv] + 1, rhi[kv] + 1, &done, &br, &tl);
    if (c->e->code) return c->e->code;
    if (done) {
      if (br || tl) att->causal = true, att->causal_offset = br ? rhi[kv] - rhi[qv] : 0;
      return HARP_OK;
    }
  }
  ut_tensor t;
  if (eval_const(c, b->access[0].tensor, &ok, &t)) return c->e->code;
  if (!ok) return HARP_OK;
  int64_t lo[POLY_MAX_VARS], hi[POLY_MAX_VARS];
  if (!poly_block_ranges(c->pv, wb, lo, hi)) {
    ut_tensor_free(&t);
    return HARP_OK;
  }
  int nv = b->nvars;
  int64_t M = hi[qv] + 1, N = hi[kv] + 1, total = 1;
  for (int v = 0; v < nv; v++) total *= hi[v] + 1;
  bool br = true, tl = true; /* bottom-right (j > i + N - M), top-left (j > i) */
  int64_t x[POLY_MAX_VARS] = {0};
  for (int64_t p = 0; p < total && (br || tl); p++) {
    int64_t at = off;
    for (int v = 0; v < nv; v++) at += st[v] * x[v];
    bool hidden = at >= 0 && at < ut_tensor_numel(&t) && ut_tensor_get(&t, at) != 0;
    br &= hidden == (x[kv] > x[qv] + N - M);
    tl &= hidden == (x[kv] > x[qv]);
    for (int v = nv - 1; v >= 0; v--) {
      if (++x[v] <= hi[v]) break;
      x[v] = 0;
    }
  }
  ut_tensor_free(&t);
  if (br || tl) {
    att->causal = true;
    att->causal_offset = br ? N - M : 0;
  }
  return HARP_OK;
}

/* ---- the chain ------------------------------------------------------------------------ */
static bool only_inside(walker *w, int b) {
  /* every reader of b's value is a block of the chain, and it is no model output */
  int node = B(w, b)->node;
  if (w->c->is_output[node]) return false;
  for (int k = 0; k < poly_nedges(w->c->pv); k++) {
    const poly_edge_info *ed = poly_edge(w->c->pv, k);
    if (ed->from == b && ed->to != b && !rg_in(w->blocks, w->n, ed->to)) return false;
  }
  /* readers that are no blocks (a GATHER) */
  const tiny_graph *g = w->c->g;
  for (int i = node + 1; i < g->n; i++) {
    if (tiny_op_class(g->nodes[i].op) != TC_GATHER) continue;
    for (int s = 0; s < g->nodes[i].nsrc; s++) {
      int x = g->nodes[i].src[s].node;
      while (x >= 0 && tiny_op_class(g->nodes[x].op) == TC_MOVE) x = g->nodes[x].src[0].node;
      if (x == node) return false;
    }
  }
  return true;
}

/* Tiny node x is read (through views) by the MUL of contraction block k only. */
static bool only_inside_tiny(walker *w, int x, int k) {
  const tiny_graph *g = w->c->g;
  if (w->c->is_output[x]) return false;
  int mul = B(w, k)->con->mul_node;
  for (int i = x + 1; i < g->n; i++) {
    if (tiny_op_class(g->nodes[i].op) == TC_MOVE) continue;
    for (int s = 0; s < g->nodes[i].nsrc; s++) {
      int y = g->nodes[i].src[s].node;
      while (y >= 0 && tiny_op_class(g->nodes[y].op) == TC_MOVE) y = g->nodes[y].src[0].node;
      if (y == x && i != mul) return false;
    }
  }
  return true;
}

static void operand(rg_ctx *c, int block, int access, rg_operand *o) {
  memset(o, 0, sizeof *o);
  o->node = poly_block(c->pv, block)->access[access].tensor;
  o->block = block;
  o->cast = -1;
  o->nvars = poly_block(c->pv, block)->nvars;
  poly_access_strides(c->e, c->pv, block, access, o->strides, &o->offset, &o->affine);
}

/* The axis of P that PV's reduced variable indexes (the keys), from P's
 * index pidx of rank prank; -1 (w->why set) when P is not read as a plain
 * matrix or PV reduces over no axis of it. */
static int key_axis(walker *w, const poly_contraction *K2, const poly_idx *pidx, int prank) {
  int ax = -1;
  for (int d = 0; d < prank; d++) {
    if (pidx[d].kind == POLY_IDX_VAR && pidx[d].var == K2->nout) ax = d;
    else if (pidx[d].kind != POLY_IDX_VAR && pidx[d].kind != POLY_IDX_CONST) return fail(w, "P is not read as a plain matrix"), -1;
  }
  if (ax < 0) fail(w, "PV does not reduce over an axis of P");
  return ax;
}

/* PV (block pvb) reads P (operand `side`) through the CASTs its access
 * passes (Poly-View folds them into the read): they join the chain, and the
 * last one is P's dtype. */
static bool p_casts(walker *w, int pvb, int side, rg_attention *att) {
  rg_ctx *c = w->c;
  const poly_access_info *pa = &B(w, pvb)->access[side];
  for (int i = 0; i < pa->nvia; i++) {
    int cb = rg_producer_block(c, pa->via[i]);
    if (c->g->nodes[pa->via[i]].op != TINY_CAST) continue;
    if (cb < 0 || !only_inside_tiny(w, pa->via[i], pvb)) return fail(w, "P's conversion is read elsewhere");
    att->p_dtype = c->g->nodes[pa->via[i]].dtype;
    add(w, cb);
  }
  return true;
}

/* P (tensor ptensor, rank prank) = [CAST] e / Z, Z = [MAX(., c)] SUM_ax(e):
 * the block computing e, or -1 (w->why set). */
static int match_probs(walker *w, int ptensor, int prank, int ax, rg_attention *att) {
  rg_ctx *c = w->c;
  int b = rg_producer_block(c, ptensor);
  if (b < 0) return fail(w, "P is no computed value"), -1;
  if (op_of(w, b) == TINY_CAST) {
    add(w, b);
    b = pointwise_src(w, b, 0);
  }
  if (b < 0 || op_of(w, b) != TINY_FDIV || B(w, b)->nout != prank) return fail(w, "P is not e / sum(e)"), -1;
  int probs = b;
  add(w, probs);
  int eb = pointwise_src(w, probs, 0);
  if (eb < 0 || !broadcast_along(w, probs, 1, ax)) return fail(w, "P does not divide by a row sum"), -1;
  int zb = unclamp(w, rg_producer_block(c, B(w, probs)->access[1].tensor), &att->has_sum_floor, &att->sum_floor);
  if (zb < 0 || !reduce_along(w, zb, B(w, probs)->access[0].tensor, ax) ||
      c->g->nodes[B(w, zb)->node].a.reduce.op != TINY_RSUM)
    return fail(w, "the row sum is not a SUM over the key axis of e"), -1;
  add(w, zb);
  add(w, eb);
  return eb;
}

/* e (block eb) = EXP2(d * log2 e) | EXP(d): the block computing d, or -1
 * (w->why set); att->exp2 says which. */
static int match_exp(walker *w, int eb, rg_attention *att) {
  if (op_of(w, eb) == TINY_EXP) {
    att->exp2 = false;
    return pointwise_src(w, eb, 0);
  }
  if (op_of(w, eb) != TINY_EXP2) return fail(w, "the exponential is missing"), -1;
  int tb = pointwise_src(w, eb, 0);
  double l2 = 0;
  if (tb < 0 || op_of(w, tb) != TINY_MUL) return fail(w, "EXP2 does not read d * log2(e)"), -1;
  int k = const_operand(w, tb, 1, &l2) ? 0 : const_operand(w, tb, 0, &l2) ? 1 : -1;
  if (k < 0 || fabs(l2 - LOG2E) > 1e-6) return fail(w, "EXP2 does not read d * log2(e)"), -1;
  add(w, tb);
  att->exp2 = true;
  return pointwise_src(w, tb, k);
}

/* d (block db) = s - Mx, Mx = [MAX(., c)] MAX_ax(s): the block computing
 * s, or -1 with *ok false (w->why set).  s may be no block (-1, *ok true):
 * the caller says so. */
static int match_shift(walker *w, int db, int ax, rg_attention *att, bool *ok) {
  rg_ctx *c = w->c;
  *ok = false;
  if (db < 0 || op_of(w, db) != TINY_SUB || !broadcast_along(w, db, 1, ax)) return fail(w, "no max-shift s - max(s)"), -1;
  add(w, db);
  int sb = pointwise_src(w, db, 0);
  int stensor = B(w, db)->access[0].tensor;
  int mb = unclamp(w, rg_producer_block(c, B(w, db)->access[1].tensor), &att->has_max_floor, &att->max_floor);
  if (mb < 0 || !reduce_along(w, mb, stensor, ax) || c->g->nodes[B(w, mb)->node].a.reduce.op != TINY_RMAX)
    return fail(w, "the row max is not a MAX over the key axis of s"), -1;
  add(w, mb);
  *ok = true;
  return sb;
}

/* One step of s = [WHERE] [ADD mask] [MUL scale] S walked backwards from
 * block sb at *stage (0: none seen yet, 1: WHERE, 2: ADD, 3: MUL): records
 * it in att (*where_b: the WHERE block) and gives the block it reads, or
 * -2 (w->why set) when sb is no such step. */
static int score_step(walker *w, int sb, int *stage, int *where_b, rg_attention *att) {
  tiny_op op = op_of(w, sb);
  double v;
  if (op == TINY_WHERE && *stage < 1) {
    if (!const_operand(w, sb, 1, &v) || !(isinf(v) && v < 0)) return fail(w, "WHERE does not write -inf"), -2;
    att->where_mask = B(w, sb)->access[0].tensor;
    *where_b = sb;
    *stage = 1;
    return pointwise_src(w, sb, 2);
  }
  if (op == TINY_ADD && *stage < 2) {
    int k = -1;
    for (int j = 0; j < 2 && k < 0; j++) {
      int p = pointwise_src(w, sb, j);
      if (p >= 0 && (B(w, p)->kind == POLY_CONTRACTION || op_of(w, p) == TINY_MUL)) k = j;
    }
    if (k < 0) return fail(w, "the mask is not added to the scores"), -2;
    int next = pointwise_src(w, sb, k);
    att->has_mask = true;
    operand(w->c, sb, 1 - k, &att->mask);
    if (!att->mask.affine) return fail(w, "the mask is not read affinely"), -2;
    *stage = 2;
    return next;
  }
  if (op == TINY_MUL && *stage < 3) {
    int k = const_operand(w, sb, 1, &v) ? 0 : const_operand(w, sb, 0, &v) ? 1 : -1;
    if (k < 0) return fail(w, "the scores are scaled by a tensor"), -2;
    att->scale = v;
    *stage = 3;
    return pointwise_src(w, sb, k);
  }
  return fail(w, "an op between QK^T and the softmax that attention does not take"), -2;
}

/* s (block sb) walked back to S: the contraction block, -1 when s leads to
 * no block, -2 (w->why set) on a step attention does not take. */
static int match_scores(walker *w, int sb, int *where_b, rg_attention *att) {
  att->scale = 1;
  att->where_mask = -1;
  int stage = 0;
  *where_b = -1;
  while (sb >= 0 && B(w, sb)->kind != POLY_CONTRACTION) {
    int next = score_step(w, sb, &stage, where_b, att);
    if (next == -2) return -2;
    add(w, sb);
    sb = next;
  }
  return sb;
}

/* S (block sb) = Q K^T over one axis, with ax its key axis (used by K
 * only) and one query axis used by Q only: att's q, k and their variables. */
static bool match_qk(walker *w, int sb, int ax, int prank, rg_attention *att) {
  if (sb < 0 || B(w, sb)->con->pattern != POLY_PAT_MATMUL || B(w, sb)->con->nred != 1)
    return fail(w, "the scores are not a matmul over one axis");
  const poly_contraction *K1 = B(w, sb)->con;
  if (K1->nout != prank) return fail(w, "QK^T and P differ in rank");
  bool ax_lhs = false, ax_rhs = false;
  for (int i = 0; i < K1->nm; i++) ax_lhs |= K1->m[i] == ax;
  for (int i = 0; i < K1->nn; i++) ax_rhs |= K1->n[i] == ax;
  if (!(ax_lhs ? K1->nm == 1 && K1->nn == 1 : ax_rhs && K1->nm == 1 && K1->nn == 1))
    return fail(w, "QK^T has no single query and key axis");
  int qside = ax_lhs ? 1 : 0;
  att->qk = sb;
  att->k_var = ax;
  att->q_var = qside == 0 ? K1->m[0] : K1->n[0];
  att->d_var = K1->nout;
  att->nbatch = K1->nbatch;
  operand(w->c, sb, qside, &att->q);
  operand(w->c, sb, 1 - qside, &att->k);
  return true;
}

/* PV (block pvb, P its operand `side` read by pidx) = batch x the query
 * axis of P x dv: att's v and dv variable. */
static bool match_pv(walker *w, int pvb, int side, const poly_idx *pidx, rg_attention *att) {
  const poly_contraction *K1 = B(w, att->qk)->con, *K2 = B(w, pvb)->con;
  if (K2->nbatch != K1->nbatch || K2->nm != 1 || K2->nn != 1 || K2->nred != 1)
    return fail(w, "PV is not batch x query x value");
  if (pidx[att->q_var].kind != POLY_IDX_VAR || pidx[att->q_var].var != (side == 0 ? K2->m[0] : K2->n[0]))
    return fail(w, "PV reads P with another query axis");
  att->dv_var = side == 0 ? K2->n[0] : K2->m[0];
  att->pv = pvb;
  operand(w->c, pvb, 1 - side, &att->v);
  if (!att->q.affine || !att->k.affine || !att->v.affine) return fail(w, "Q, K or V is not read affinely");
  return true;
}

/* The CASTs that only convert PV's result (one reader each, pointwise)
 * join the chain; att->out is the last of them (else PV's own value). */
static void out_casts(walker *w, int pvb, rg_attention *att) {
  rg_ctx *c = w->c;
  att->out = B(w, pvb)->node;
  int last = pvb;
  for (;;) {
    if (c->is_output[B(w, last)->node]) break;
    int reader = -1, nreaders = 0;
    for (int k = 0; k < poly_nedges(c->pv); k++) {
      const poly_edge_info *ed = poly_edge(c->pv, k);
      if (ed->from == last && ed->to != last) reader = ed->to, nreaders++;
    }
    if (nreaders != 1 || op_of(w, reader) != TINY_CAST || pointwise_src(w, reader, 0) != last) break;
    if (!add(w, reader)) break;
    if (!only_inside(w, last)) {
      w->n--;
      break;
    }
    last = reader;
    att->out = B(w, reader)->node;
  }
  att->out_dtype = c->g->nodes[att->out].dtype;
}

/* Shape C ending in contraction pvb with P its operand `side`: the chain's
 * blocks in w (PV first), the attention in att; false with w->why set, or
 * on a failure in w->c->e. */
static bool match_side(walker *w, int pvb, int side, rg_attention *att) {
  rg_ctx *c = w->c;
  const poly_contraction *K2 = B(w, pvb)->con;
  const poly_idx *pidx = side == 0 ? K2->lhs_idx : K2->rhs_idx;
  int prank = side == 0 ? K2->lhs_rank : K2->rhs_rank;
  int ptensor = side == 0 ? K2->lhs : K2->rhs;
  w->n = 0;
  w->why = NULL;
  add(w, pvb);
  int ax = key_axis(w, K2, pidx, prank);
  if (ax < 0) return false;
  att->p_dtype = c->g->nodes[ptensor].dtype;
  if (!p_casts(w, pvb, side, att)) return false;
  int eb = match_probs(w, ptensor, prank, ax, att);
  if (eb < 0) return false;
  int db = match_exp(w, eb, att);
  if (db < 0 && w->why) return false;
  bool ok;
  int sb = match_shift(w, db, ax, att, &ok), where_b;
  if (!ok || (sb = match_scores(w, sb, &where_b, att)) == -2) return false;
  if (!match_qk(w, sb, ax, prank, att) || !match_pv(w, pvb, side, pidx, att)) return false;
  add(w, sb);
  if (where_b >= 0 && check_causal(c, where_b, att->q_var, att->k_var, att)) return false;
  if (where_b >= 0 && !att->causal) return fail(w, "the WHERE mask is not a causal mask");
  /* every intermediate is read inside the chain only */
  for (int i = 0; i < w->n; i++)
    if (w->blocks[i] != pvb && !only_inside(w, w->blocks[i])) return fail(w, "an intermediate is read outside the chain");
  out_casts(w, pvb, att);
  return true;
}

harp_status rg_match_attention(rg_ctx *c, int pvb, bool *found, rg_attention *att, int *blocks, int *nblocks,
                             char *why, int cap) {
  *found = false;
  *nblocks = 0;
  const poly_block_info *b = poly_block(c->pv, pvb);
  if (why && cap) why[0] = 0;
  if (b->kind != POLY_CONTRACTION || b->con->pattern != POLY_PAT_MATMUL || b->con->nred != 1) return HARP_OK;
  walker w = {c, NULL, {0}, 0};
  for (int side = 0; side < 2 && !*found; side++) {
    memset(att, 0, sizeof *att);
    harp_error save = *c->e;
    bool ok = match_side(&w, pvb, side, att);
    if (c->e->code && c->e->code != save.code) return c->e->code; /* a real failure (memory) */
    if (ok) {
      *found = true;
      *nblocks = w.n;
      memcpy(blocks, w.blocks, sizeof(int) * (size_t)w.n);
    } else if (why && w.why && (side == 0 || !why[0])) {
      snprintf(why, (size_t)cap, "%s", w.why);
    }
  }
  return HARP_OK;
}
