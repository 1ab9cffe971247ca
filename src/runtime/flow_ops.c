/* flow_ops.c — the ops a host program's OP steps compute on the host
 * (harp/flow.h): those whose output shape depends on the values, run
 * between compiled segments on the tensors the segments left.  Each is
 * computed as onnxruntime's CPU kernel computes it, so that a model's
 * answer does not depend on who ran the op: NonMaxSuppression (candidates
 * by score, equal scores in index order, as onnxruntime 1.32 takes them),
 * NonZero, TopK, Unique, Compress, Range, Slice; and RoiAlign and
 * GridSample, which sample where the values say; ScatterElements and
 * ScatterND of sizes known at run time only or too large for the graph's
 * comparison masks.
 * int64 results are int32 (harp's integers); a value past int32 is an
 * error.
 * Needs: tensors.  Gives: flow_op_run (flow_ops.h), flow_op_name. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "flow_ops.h"
#include "util/util.h"

const char *flow_op_name(flow_op op) {
  static const char *const names[] = {
#define FLOW_X_FOP(e, n) n,
      FLOW_OPS(FLOW_X_FOP)
#undef FLOW_X_FOP
  };
  return op >= 0 && op < FLOW_FOP_COUNT ? names[op] : "?";
}

/* ---- elements ----------------------------------------------------------------------- */
static double num(const ut_tensor *t, int64_t i) {
  switch (t->dtype) {
  case TINY_I32: return ((const int32_t *)t->data)[i];
  case TINY_BOOL: return ((const uint8_t *)t->data)[i] != 0;
  default: return ut_tensor_get(t, i);
  }
}

static harp_status new_i32(harp_error *e, ut_tensor *t, int rank, const int64_t *shape) {
  return ut_tensor_alloc(e, t, TINY_I32, rank, shape);
}

/* A one-element input as a number (absent: dflt).  The failure returns its
 * code as a constant, not ut_fail's value, so that the compiler sees *v set
 * on every HARP_OK path. */
static harp_status scalar(harp_error *e, const ut_tensor *t, const char *where, const char *what, double dflt, double *v) {
  if (!t) return *v = dflt, HARP_OK;
  if (ut_tensor_numel(t) != 1) {
    ut_fail(e, HARP_E_INVALID_ARG, NULL, "%s: %s has %" PRId64 " elements (it must have one)", where, what, ut_tensor_numel(t));
    return HARP_E_INVALID_ARG;
  }
  *v = num(t, 0);
  return HARP_OK;
}

static int64_t prod(const int64_t *d, int from, int to) {
  int64_t p = 1;
  for (int i = from; i < to; i++) p *= d[i];
  return p;
}

/* idx[0..n) sorted stably by before(ctx, a, b) (a goes first), a merge
 * sort; tmp: scratch of n. */
typedef bool (*before_fn)(const void *ctx, int64_t a, int64_t b);
static void sort_idx(int64_t *idx, int64_t *tmp, int64_t n, before_fn before, const void *ctx) {
  for (int64_t w = 1; w < n; w *= 2) {
    for (int64_t lo = 0; lo < n; lo += 2 * w) {
      int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n, i = lo, j = mid, o = lo;
      while (i < mid && j < hi) tmp[o++] = before(ctx, idx[j], idx[i]) ? idx[j++] : idx[i++];
      while (i < mid) tmp[o++] = idx[i++];
      while (j < hi) tmp[o++] = idx[j++];
    }
    memcpy(idx, tmp, sizeof *idx * (size_t)n);
  }
}

/* ---- NonMaxSuppression ---------------------------------------------------------------- */
static void min_max(float a, float b, float *lo, float *hi) {
  if (a >= b) *lo = b, *hi = a;
  else *lo = a, *hi = b;
}

static bool score_before(const void *s, int64_t a, int64_t b) { return ((const float *)s)[a] > ((const float *)s)[b]; }

/* Whether box j's overlap with box i exceeds the threshold (onnxruntime's
 * SuppressByIOU: corners [y1, x1, y2, x2] in either order, or centres
 * [xc, yc, w, h]). */
static bool suppress(const float *b, int64_t i, int64_t j, int64_t centre, float thr) {
  const float *p = b + 4 * i, *q = b + 4 * j;
  float x1lo, x1hi, x2lo, x2hi, y1lo, y1hi, y2lo, y2hi;
  if (!centre) {
    min_max(p[1], p[3], &x1lo, &x1hi), min_max(q[1], q[3], &x2lo, &x2hi);
    min_max(p[0], p[2], &y1lo, &y1hi), min_max(q[0], q[2], &y2lo, &y2hi);
  } else {
    float pw = p[2] / 2, ph = p[3] / 2, qw = q[2] / 2, qh = q[3] / 2;
    x1lo = p[0] - pw, x1hi = p[0] + pw, x2lo = q[0] - qw, x2hi = q[0] + qw;
    y1lo = p[1] - ph, y1hi = p[1] + ph, y2lo = q[1] - qh, y2hi = q[1] + qh;
  }
  float ixlo = x1lo > x2lo ? x1lo : x2lo, ixhi = x1hi < x2hi ? x1hi : x2hi;
  if (ixhi <= ixlo) return false;
  float iylo = y1lo > y2lo ? y1lo : y2lo, iyhi = y1hi < y2hi ? y1hi : y2hi;
  if (iyhi <= iylo) return false;
  float inter = (ixhi - ixlo) * (iyhi - iylo);
  if (inter <= 0) return false;
  float a1 = (x1hi - x1lo) * (y1hi - y1lo), a2 = (x2hi - x2lo) * (y2hi - y2lo), uni = a1 + a2 - inter;
  if (a1 <= 0 || a2 <= 0 || uni <= 0) return false;
  return inter / uni > thr;
}

/* in: boxes [B, N, 4], scores [B, C, N], max_output_boxes_per_class,
 * iou_threshold, score_threshold (each optional); attr[0]:
 * center_point_box.  out: [selected, 3] (batch, class, box). */
static harp_status op_nms(harp_error *e, const flow_step *sp, const ut_tensor *const *in, ut_tensor *out) {
  const ut_tensor *bx = in[0], *sc = in[1];
  double maxd, iou, sthr;
  if (!bx || !sc || bx->dtype != TINY_FP32 || sc->dtype != TINY_FP32)
    return ut_fail(e, HARP_E_INVALID_ARG, NULL, "%s: boxes and scores must be float tensors", sp->where);
  if (bx->rank != 3 || sc->rank != 3 || bx->shape[2] != 4 || bx->shape[0] != sc->shape[0] || bx->shape[1] != sc->shape[2])
    return ut_fail(e, HARP_E_AXIS_SIZE_MISMATCH, NULL, "%s: boxes must be [batch, boxes, 4] and scores [batch, classes, boxes]",
                   sp->where);
  if (scalar(e, sp->nin > 2 ? in[2] : NULL, sp->where, "max_output_boxes_per_class", 0, &maxd) ||
      scalar(e, sp->nin > 3 ? in[3] : NULL, sp->where, "iou_threshold", 0, &iou) ||
      scalar(e, sp->nin > 4 ? in[4] : NULL, sp->where, "score_threshold", 0, &sthr))
    return e->code;
  if (!(iou >= 0 && iou <= 1)) return ut_fail(e, HARP_E_INVALID_ARG, NULL, "%s: iou_threshold %g must be in [0, 1]", sp->where, iou);
  bool has_thr = sp->nin > 4 && in[4];
  int64_t B = bx->shape[0], C = sc->shape[1], N = bx->shape[1], maxo = maxd > 0 ? (int64_t)maxd : 0, nsel = 0;
  int64_t *sel = NULL, *mine = ut_xmalloc(sizeof *mine * (size_t)(N + 1)), cap = 0;
  int64_t *cand = ut_xmalloc(sizeof *cand * 2 * (size_t)(N + 1));
  harp_status st = mine && cand ? HARP_OK : ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  for (int64_t b = 0; b < B && !st && maxo > 0; b++)
    for (int64_t c = 0; c < C && !st; c++) {
      const float *s = (const float *)sc->data + (b * C + c) * N, *boxes = (const float *)bx->data + b * N * 4;
      int64_t n = 0, nm = 0;
      for (int64_t i = 0; i < N; i++)
        if (!has_thr || s[i] > (float)sthr) cand[n++] = i;
      sort_idx(cand, cand + N + 1, n, score_before, s); /* equal scores: the lower index first */
      for (int64_t q = 0; q < n; q++) {
        int64_t t = cand[q];
        bool keep = true;
        for (int64_t k = 0; k < nm && keep; k++) keep = !suppress(boxes, mine[k], t, sp->attr[0], (float)iou);
        if (!keep) continue;
        if (nm >= maxo) break;
        mine[nm++] = t;
        if (nsel == cap) {
          int64_t *p = ut_xrealloc(sel, sizeof *p * 3 * (size_t)(cap = cap ? 2 * cap : 64));
          if (!p) {
            st = ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
            break;
          }
          sel = p;
        }
        sel[3 * nsel] = b, sel[3 * nsel + 1] = c, sel[3 * nsel + 2] = t, nsel++;
      }
    }
  int64_t shape[2] = {nsel, 3};
  if (!st && !(st = new_i32(e, &out[0], 2, shape)))
    for (int64_t k = 0; k < 3 * nsel; k++) ((int32_t *)out[0].data)[k] = (int32_t)sel[k];
  free(sel), free(mine), free(cand);
  return st;
}

/* ---- NonZero -------------------------------------------------------------------------- */
static harp_status op_nonzero(harp_error *e, const flow_step *sp, const ut_tensor *const *in, ut_tensor *out) {
  (void)sp;
  const ut_tensor *x = in[0];
  int64_t n = ut_tensor_numel(x), nz = 0;
  int r = x->rank ? x->rank : 1;
  for (int64_t i = 0; i < n; i++) nz += num(x, i) != 0;
  int64_t shape[2] = {r, nz};
  if (new_i32(e, &out[0], 2, shape)) return e->code;
  int32_t *y = out[0].data;
  for (int64_t i = 0, j = 0; i < n; i++) {
    if (num(x, i) == 0) continue;
    for (int d = x->rank - 1; d >= 0; d--) y[d * nz + j] = (int32_t)((i / prod(x->shape, d + 1, x->rank)) % x->shape[d]);
    if (!x->rank) y[j] = 0;
    j++;
  }
  return HARP_OK;
}

/* ---- TopK ------------------------------------------------------------------------------ */
/* Element a ahead of b: by value (NaN the largest, as the graph TopK has
 * it), then the lower index first. */
typedef struct topk_ctx {
  const double *v;
  bool largest;
} topk_ctx;

static bool ahead(const topk_ctx *k, int64_t a, int64_t b) {
  double x = k->v[a], y = k->v[b];
  bool xn = isnan(x), yn = isnan(y);
  if (xn || yn) {
    if (xn && yn) return a < b;
    return k->largest ? xn : yn;
  }
  if (x != y) return k->largest ? x > y : x < y;
  return a < b;
}

static bool topk_before(const void *k, int64_t a, int64_t b) { return ahead(k, a, b); }

/* in: x, K; attr: axis (normalised), largest.  out: values, indices. */
static harp_status op_topk(harp_error *e, const flow_step *sp, const ut_tensor *const *in, ut_tensor *out) {
  const ut_tensor *x = in[0];
  double kd;
  int axis = (int)sp->attr[0];
  if (scalar(e, in[1], sp->where, "K", 0, &kd)) return e->code;
  if (axis < 0 || axis >= x->rank) return ut_fail(e, HARP_E_INVALID_ARG, NULL, "%s: axis %d of rank %d", sp->where, axis, x->rank);
  int64_t n = x->shape[axis], k = (int64_t)kd, outer = prod(x->shape, 0, axis), inner = prod(x->shape, axis + 1, x->rank);
  if (kd < 0 || k > n) return ut_fail(e, HARP_E_INVALID_ARG, NULL, "%s: k = %g along an axis of %" PRId64, sp->where, kd, n);
  int64_t shape[TINY_MAX_RANK];
  memcpy(shape, x->shape, sizeof *shape * (size_t)x->rank);
  shape[axis] = k;
  double *v = ut_xmalloc(sizeof *v * (size_t)(n + 1));
  int64_t *idx = ut_xmalloc(sizeof *idx * (size_t)(2 * n + 1));
  harp_status st = v && idx ? HARP_OK : ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  if (!st) st = ut_tensor_alloc(e, &out[0], x->dtype, x->rank, shape);
  if (!st) st = new_i32(e, &out[1], x->rank, shape);
  topk_ctx kc = {v, sp->attr[1] != 0};
  size_t es = (size_t)tiny_dtype_size(x->dtype);
  for (int64_t o = 0; o < outer && !st; o++)
    for (int64_t q = 0; q < inner; q++) {
      for (int64_t i = 0; i < n; i++) v[i] = num(x, (o * n + i) * inner + q), idx[i] = i;
      sort_idx(idx, idx + n, n, topk_before, &kc);
      for (int64_t j = 0; j < k; j++) {
        int64_t to = (o * k + j) * inner + q;
        memcpy((char *)out[0].data + (size_t)to * es, (const char *)x->data + (size_t)((o * n + idx[j]) * inner + q) * es, es);
        ((int32_t *)out[1].data)[to] = (int32_t)idx[j];
      }
    }
  free(v), free(idx);
  return st;
}

/* ---- Unique ------------------------------------------------------------------------------ */
/* Slices of x along an axis (all of x flattened when there is none), compared as byte rows
 * of their values. */
typedef struct slices {
  const ut_tensor *x;
  int64_t n, outer, inner; /* slice i: x[o, i, q] for o < outer, q < inner */
} slices;

static int slice_cmp(const slices *s, int64_t a, int64_t b) {
  for (int64_t o = 0; o < s->outer; o++)
    for (int64_t q = 0; q < s->inner; q++) {
      double x = num(s->x, (o * s->n + a) * s->inner + q), y = num(s->x, (o * s->n + b) * s->inner + q);
      if (x != y) return x < y ? -1 : 1;
    }
  return 0;
}

static bool slice_before(const void *s, int64_t a, int64_t b) { return slice_cmp(s, a, b) < 0; }

typedef struct groups {
  const int64_t *first;
} groups;
static bool first_before(const void *g, int64_t a, int64_t b) { return ((const groups *)g)->first[a] < ((const groups *)g)->first[b]; }

/* in: x; attr[0]: has an axis, attr[1]: the axis, attr[2]: sorted.  out:
 * Y, indices (first occurrences), inverse_indices, counts.  The slices
 * sorted stably, then grouped: a group's first member is its first
 * occurrence; unsorted, the groups in the order of their first occurrences. */
static harp_status op_unique(harp_error *e, const flow_step *sp, const ut_tensor *const *in, ut_tensor *out) {
  const ut_tensor *x = in[0];
  int axis = sp->attr[0] ? (int)sp->attr[1] : -1;
  slices s = {x, ut_tensor_numel(x), 1, 1};
  if (axis >= 0) s.n = x->shape[axis], s.outer = prod(x->shape, 0, axis), s.inner = prod(x->shape, axis + 1, x->rank);
  size_t n1 = (size_t)s.n + 1;
  int64_t *idx = ut_xmalloc(sizeof *idx * 2 * n1), *first = ut_xmalloc(sizeof *first * n1), *cnt = ut_xcalloc(n1, sizeof *cnt);
  int64_t *inv = ut_xmalloc(sizeof *inv * n1), *order = ut_xmalloc(sizeof *order * 2 * n1), *pos = ut_xmalloc(sizeof *pos * n1), m = 0;
  harp_status st = idx && first && cnt && inv && order && pos ? HARP_OK : ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  for (int64_t i = 0; i < s.n && !st; i++) idx[i] = i;
  if (!st) sort_idx(idx, idx + s.n, s.n, slice_before, &s);
  for (int64_t i = 0; i < s.n && !st; i++) {
    if (!i || slice_cmp(&s, idx[i - 1], idx[i])) first[m++] = idx[i];
    inv[idx[i]] = m - 1, cnt[m - 1]++;
  }
  for (int64_t j = 0; j < m && !st; j++) order[j] = j;
  if (!st && !sp->attr[2]) sort_idx(order, order + m, m, first_before, &(groups){first});
  for (int64_t j = 0; j < m && !st; j++) pos[order[j]] = j; /* group -> its place in the output */
  int r = axis >= 0 ? x->rank : 1;
  int64_t shape[TINY_MAX_RANK];
  if (axis >= 0) memcpy(shape, x->shape, sizeof *shape * (size_t)x->rank), shape[axis] = m;
  else shape[0] = m;
  size_t es = (size_t)tiny_dtype_size(x->dtype);
  if (!st) st = ut_tensor_alloc(e, &out[0], x->dtype, r, shape);
  for (int64_t o = 0; o < s.outer && !st; o++)
    for (int64_t j = 0; j < m; j++)
      memcpy((char *)out[0].data + (size_t)((o * m + j) * s.inner) * es,
             (const char *)x->data + (size_t)((o * s.n + first[order[j]]) * s.inner) * es, (size_t)s.inner * es);
  int64_t len[3] = {m, s.n, m};
  for (int k = 0; k < 3 && !st; k++) {
    if (k + 1 >= sp->nout || sp->out[k + 1] < 0) continue;
    if ((st = new_i32(e, &out[k + 1], 1, &len[k]))) break;
    int32_t *y = out[k + 1].data;
    for (int64_t j = 0; j < len[k]; j++) y[j] = (int32_t)(k == 0 ? first[order[j]] : k == 1 ? pos[inv[j]] : cnt[order[j]]);
  }
  free(idx), free(first), free(cnt), free(inv), free(order), free(pos);
  return st;
}

/* ---- Compress ----------------------------------------------------------------------------- */
/* in: x, condition; attr[0]: has an axis, attr[1]: the axis. */
static harp_status op_compress(harp_error *e, const flow_step *sp, const ut_tensor *const *in, ut_tensor *out) {
  const ut_tensor *x = in[0], *cond = in[1];
  int axis = sp->attr[0] ? (int)sp->attr[1] : -1;
  int64_t n = axis >= 0 ? x->shape[axis] : ut_tensor_numel(x), outer = axis >= 0 ? prod(x->shape, 0, axis) : 1;
  int64_t inner = axis >= 0 ? prod(x->shape, axis + 1, x->rank) : 1, nc = ut_tensor_numel(cond), m = 0;
  if (cond->rank != 1) return ut_fail(e, HARP_E_INVALID_ARG, NULL, "%s: the condition must be 1-D", sp->where);
  if (nc > n) return ut_fail(e, HARP_E_INVALID_ARG, NULL, "%s: a condition of %" PRId64 " along %" PRId64, sp->where, nc, n);
  for (int64_t i = 0; i < nc; i++) m += num(cond, i) != 0;
  int64_t shape[TINY_MAX_RANK];
  if (axis >= 0) memcpy(shape, x->shape, sizeof *shape * (size_t)x->rank), shape[axis] = m;
  else shape[0] = m;
  if (ut_tensor_alloc(e, &out[0], x->dtype, axis >= 0 ? x->rank : 1, shape)) return e->code;
  size_t es = (size_t)tiny_dtype_size(x->dtype), row = (size_t)inner * es;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0, j = 0; i < nc; i++)
      if (num(cond, i) != 0)
        memcpy((char *)out[0].data + (size_t)(o * m + j++) * row, (const char *)x->data + (size_t)(o * n + i) * row, row);
  return HARP_OK;
}

/* ---- Range ---------------------------------------------------------------------------------- */
/* int32: the count exactly; float: in fp32 as onnxruntime's kernel,
 * start + k * delta. */
static harp_status op_range(harp_error *e, const flow_step *sp, const ut_tensor *const *in, ut_tensor *out) {
  double a, b, d;
  if (scalar(e, in[0], sp->where, "start", 0, &a) || scalar(e, in[1], sp->where, "limit", 0, &b) ||
      scalar(e, in[2], sp->where, "delta", 0, &d))
    return e->code;
  if (d == 0) return ut_fail(e, HARP_E_INVALID_ARG, NULL, "%s: delta is 0", sp->where);
  bool ints = in[0]->dtype == TINY_I32;
  float fs = (float)a, fl = (float)b, fd = (float)d;
  double len = ints ? ceil((b - a) / d) : ceil((double)(float)(fl - fs) / (double)fd);
  if (isnan(len) || len >= (double)((int64_t)1 << 31))
    return ut_fail(e, HARP_E_LIMIT, NULL, "%s: a range of %g elements", sp->where, len);
  int64_t n = len > 0 ? (int64_t)len : 0;
  if (ut_tensor_alloc(e, &out[0], in[0]->dtype, 1, &n)) return e->code;
  for (int64_t i = 0; i < n; i++)
    if (ints) ((int32_t *)out[0].data)[i] = (int32_t)((int64_t)a + i * (int64_t)d);
    else ut_tensor_set(&out[0], i, fs + (float)i * fd);
  return HARP_OK;
}

/* ---- Slice ------------------------------------------------------------------------------------ */
/* in: x, starts, ends, axes, steps (the last two optional), clamped as
 * onnxruntime clamps them. */
static harp_status op_slice(harp_error *e, const flow_step *sp, const ut_tensor *const *in, ut_tensor *out) {
  const ut_tensor *x = in[0], *ax = sp->nin > 3 ? in[3] : NULL, *stp = sp->nin > 4 ? in[4] : NULL;
  int r = x->rank;
  int64_t n = ut_tensor_numel(in[1]), lo[TINY_MAX_RANK], step[TINY_MAX_RANK], shape[TINY_MAX_RANK];
  bool seen[TINY_MAX_RANK] = {0};
  if (ut_tensor_numel(in[2]) != n || (ax && ut_tensor_numel(ax) != n) || (stp && ut_tensor_numel(stp) != n) || n > r)
    return ut_fail(e, HARP_E_INVALID_ARG, NULL, "%s: starts, ends, axes and steps differ in length", sp->where);
  for (int i = 0; i < r; i++) lo[i] = 0, step[i] = 1, shape[i] = x->shape[i];
  for (int64_t k = 0; k < n; k++) {
    int64_t a = ax ? (int64_t)num(ax, k) : k, d;
    if (a < 0) a += r;
    if (a < 0 || a >= r || seen[a]) return ut_fail(e, HARP_E_INVALID_ARG, NULL, "%s: axis %g", sp->where, ax ? num(ax, k) : (double)k);
    seen[a] = true, d = x->shape[a];
    double s = num(in[1], k), en = num(in[2], k), st = stp ? num(stp, k) : 1;
    if (st == 0) return ut_fail(e, HARP_E_INVALID_ARG, NULL, "%s: step 0", sp->where);
    s = s < 0 ? s + (double)d : s, en = en < 0 ? en + (double)d : en;
    if (st > 0) s = s < 0 ? 0 : s > d ? (double)d : s, en = en < 0 ? 0 : en > d ? (double)d : en;
    else s = s < 0 ? 0 : s > d - 1 ? (double)(d - 1) : s, en = en < -1 ? -1 : en > d - 1 ? (double)(d - 1) : en;
    double cnt = st > 0 ? ceil((en - s) / st) : ceil((s - en) / -st);
    lo[a] = (int64_t)s, step[a] = (int64_t)st, shape[a] = cnt > 0 ? (int64_t)cnt : 0;
  }
  if (ut_tensor_alloc(e, &out[0], x->dtype, r, shape)) return e->code;
  size_t es = (size_t)tiny_dtype_size(x->dtype);
  int64_t total = ut_tensor_numel(&out[0]);
  for (int64_t i = 0; i < total; i++) {
    int64_t off = 0, rest = i;
    for (int d = r - 1; d >= 0; d--) {
      int64_t c = rest % shape[d];
      rest /= shape[d];
      off += (lo[d] + c * step[d]) * prod(x->shape, d + 1, r);
    }
    memcpy((char *)out[0].data + (size_t)i * es, (const char *)x->data + (size_t)off * es, es);
  }
  return HARP_OK;
}

/* ---- RoiAlign ------------------------------------------------------------------------------- */
/* The bilinear sample of plane p (h x w) at (y, x), onnxruntime's
 * PreCalcForBilinearInterpolate: nothing beyond a pixel past the border,
 * clamped to the edge inside it; the four weighted taps in w[], t[]. */
static void roi_taps(int64_t h, int64_t w, float y, float x, int64_t *t, float *wt) {
  if (y < -1.0 || y > (double)h || x < -1.0 || x > (double)w || isnan(x) || isnan(y)) {
    t[0] = t[1] = t[2] = t[3] = 0, wt[0] = wt[1] = wt[2] = wt[3] = 0;
    return;
  }
  if (y <= 0) y = 0;
  if (x <= 0) x = 0;
  int64_t yl = (int64_t)y, xl = (int64_t)x, yh, xh;
  if (yl >= h - 1) yh = yl = h - 1, y = (float)yl;
  else yh = yl + 1;
  if (xl >= w - 1) xh = xl = w - 1, x = (float)xl;
  else xh = xl + 1;
  float ly = y - (float)yl, lx = x - (float)xl, hy = 1.0f - ly, hx = 1.0f - lx;
  t[0] = yl * w + xl, t[1] = yl * w + xh, t[2] = yh * w + xl, t[3] = yh * w + xh;
  wt[0] = hy * hx, wt[1] = hy * lx, wt[2] = ly * hx, wt[3] = ly * lx;
}

/* One roi's [C, oh, ow] from plane set xb [C, h, w]: every bin averages (or
 * takes the max of, onnxruntime's way: the largest weighted tap) its
 * grid of samples. */
static harp_status roi_one(harp_error *e, const flow_step *sp, const float *xb, int64_t C, int64_t h, int64_t w, const float *roi,
                         float *y) {
  int64_t oh = sp->attr[1], ow = sp->attr[2], sr = sp->attr[3];
  bool maxm = sp->attr[0] != 0, half = sp->attr[4] != 0;
  float sc = (float)sp->fattr[0], off = half ? 0.5f : 0.0f;
  float sw = roi[0] * sc - off, sh = roi[1] * sc - off, ew = roi[2] * sc - off, eh = roi[3] * sc - off;
  float rw = ew - sw, rh = eh - sh;
  if (!half) rw = rw > 1.0f ? rw : 1.0f, rh = rh > 1.0f ? rh : 1.0f;
  float bh = rh / (float)oh, bw = rw / (float)ow;
  if (sr <= 0 && !(bh < 4096 && bw < 4096)) /* the samples a bin averages: no endless loop on an absurd roi */
    return ut_fail(e, HARP_E_LIMIT, NULL, "%s: a roi of %g x %g with sampling_ratio 0 (bins of more than 4096 samples a side)",
                   sp->where, (double)rh, (double)rw);
  int64_t gh = sr > 0 ? sr : (int64_t)ceilf(rh / (float)oh), gw = sr > 0 ? sr : (int64_t)ceilf(rw / (float)ow);
  int64_t cnt = gh * gw > 1 ? gh * gw : 1;
  for (int64_t ph = 0; ph < oh; ph++)
    for (int64_t pw = 0; pw < ow; pw++)
      for (int64_t c = 0; c < C; c++) {
        const float *pl = xb + c * h * w;
        float acc = 0;
        bool first = true;
        for (int64_t iy = 0; iy < gh; iy++) {
          float yy = sh + (float)ph * bh + (float)(iy + .5f) * bh / (float)gh;
          for (int64_t ix = 0; ix < gw; ix++) {
            float xx = sw + (float)pw * bw + (float)(ix + .5f) * bw / (float)gw, wt[4];
            int64_t t[4];
            roi_taps(h, w, yy, xx, t, wt);
            if (!maxm) {
              acc += wt[0] * pl[t[0]] + wt[1] * pl[t[1]] + wt[2] * pl[t[2]] + wt[3] * pl[t[3]];
              continue;
            }
            float v = fmaxf(fmaxf(fmaxf(wt[0] * pl[t[0]], wt[1] * pl[t[1]]), wt[2] * pl[t[2]]), wt[3] * pl[t[3]]);
            acc = first || v > acc ? v : acc, first = false;
          }
        }
        y[(c * oh + ph) * ow + pw] = maxm ? acc : acc / (float)cnt;
      }
  return HARP_OK;
}

/* in: X [N, C, H, W], rois [R, 4], batch_indices [R]; attr: max mode,
 * output_height, output_width, sampling_ratio, half_pixel; fattr[0]:
 * spatial_scale.  out: [R, C, oh, ow]. */
static harp_status op_roialign(harp_error *e, const flow_step *sp, const ut_tensor *const *in, ut_tensor *out) {
  const ut_tensor *x = in[0], *rois = in[1], *bi = in[2];
  if (x->dtype != TINY_FP32 || rois->dtype != TINY_FP32 || x->rank != 4 || rois->rank != 2 || rois->shape[1] != 4 || bi->rank != 1 ||
      bi->shape[0] != rois->shape[0])
    return ut_fail(e, HARP_E_INVALID_ARG, NULL, "%s: X must be float [N, C, H, W], rois [R, 4] and batch_indices [R]", sp->where);
  int64_t R = rois->shape[0], N = x->shape[0], C = x->shape[1], h = x->shape[2], w = x->shape[3];
  int64_t shape[4] = {R, C, sp->attr[1], sp->attr[2]}, per = C * sp->attr[1] * sp->attr[2];
  if (h < 1 || w < 1) return ut_fail(e, HARP_E_INVALID_ARG, NULL, "%s: an empty feature map", sp->where);
  if (ut_tensor_alloc(e, &out[0], TINY_FP32, 4, shape)) return e->code;
  for (int64_t r = 0; r < R; r++) {
    int64_t b = (int64_t)num(bi, r);
    if (b < 0 || b >= N) return ut_fail(e, HARP_E_INVALID_ARG, NULL, "%s: batch index %" PRId64 " of %" PRId64, sp->where, b, N);
    if (roi_one(e, sp, (const float *)x->data + b * C * h * w, C, h, w, (const float *)rois->data + 4 * r, (float *)out[0].data + r * per))
      return e->code;
  }
  return HARP_OK;
}

/* ---- GridSample ------------------------------------------------------------------------------ */
enum { GS_LINEAR, GS_NEAREST, GS_CUBIC };
enum { GS_ZEROS, GS_BORDER, GS_REFLECTION };

static float gs_denorm(float n, int64_t len, bool ac) {
  return ac ? (n + 1) / 2.f * (float)(len - 1) : ((n + 1) * (float)len - 1) / 2.f;
}

static float gs_reflect(float x, float lo, float hi) {
  float range = hi - lo;
  if (!(range > 0)) return lo; /* a plane one pixel wide, corners aligned */
  if (x < lo) {
    float dx = lo - x;
    int n = (int)(dx / range);
    float r = dx - (float)n * range;
    return n % 2 == 0 ? lo + r : hi - r;
  }
  if (x > hi) {
    float dx = x - hi;
    int n = (int)(dx / range);
    float r = dx - (float)n * range;
    return n % 2 == 0 ? hi - r : lo + r;
  }
  return x;
}

typedef struct gs_plane {
  const float *p;
  int64_t h, w;
  int pad;
  float border[4]; /* x lo, y lo, x hi, y hi */
} gs_plane;

static float gs_pixel(const gs_plane *g, int64_t r, int64_t c) {
  if (g->pad == GS_ZEROS) return c >= 0 && c < g->w && r >= 0 && r < g->h ? g->p[r * g->w + c] : 0.0f;
  if (g->pad == GS_BORDER) {
    c = c < 0 ? 0 : c >= g->w ? g->w - 1 : c, r = r < 0 ? 0 : r >= g->h ? g->h - 1 : r;
    return g->p[r * g->w + c];
  }
  c = (int64_t)gs_reflect((float)c, g->border[0], g->border[2]), r = (int64_t)gs_reflect((float)r, g->border[1], g->border[3]);
  c = c < 0 ? 0 : c >= g->w ? g->w - 1 : c, r = r < 0 ? 0 : r >= g->h ? g->h - 1 : r; /* reflected into the plane */
  return g->p[r * g->w + c];
}

static void gs_cubic(float x, float k[4]) {
  const float a = -0.75f;
  x = fabsf(x);
  k[0] = ((a * (x + 1) - 5 * a) * (x + 1) + 8 * a) * (x + 1) - 4 * a;
  k[1] = ((a + 2) * x - (a + 3)) * x * x + 1;
  k[2] = ((a + 2) * (1 - x) - (a + 3)) * (1 - x) * (1 - x) + 1;
  k[3] = ((a * (2 - x) - 5 * a) * (2 - x) + 8 * a) * (2 - x) - 4 * a;
}

/* One output of plane g at grid point (nx, ny), as onnxruntime's GridSample. */
static float gs_sample(const gs_plane *g, int mode, bool ac, float nx, float ny) {
  float x = gs_denorm(nx, g->w, ac), y = gs_denorm(ny, g->h, ac);
  if (isnan(x) || isnan(y)) return 0.0f;
  const float far = (float)(1 << 24); /* beyond any plane: no undefined conversion of a huge coordinate */
  x = x < -far ? -far : x > far ? far : x, y = y < -far ? -far : y > far ? far : y;
  if (mode == GS_NEAREST) return gs_pixel(g, (int64_t)nearbyintf(y), (int64_t)nearbyintf(x));
  if (mode == GS_LINEAR) {
    int64_t x1 = (int64_t)floorf(x), y1 = (int64_t)floorf(y), x2 = x1 + 1, y2 = y1 + 1;
    float dx2 = (float)x2 - x, dx1 = x - (float)x1, dy2 = (float)y2 - y, dy1 = y - (float)y1;
    return dy2 * (dx2 * gs_pixel(g, y1, x1) + dx1 * gs_pixel(g, y1, x2)) + dy1 * (dx2 * gs_pixel(g, y2, x1) + dx1 * gs_pixel(g, y2, x2));
  }
  int64_t x0 = (int64_t)floorf(x) - 1, y0 = (int64_t)floorf(y) - 1;
  float v[4], k[4];
  gs_cubic(x - (float)x0 - 1, k);
  for (int i = 0; i < 4; i++)
    v[i] = k[0] * gs_pixel(g, y0 + i, x0) + k[1] * gs_pixel(g, y0 + i, x0 + 1) + k[2] * gs_pixel(g, y0 + i, x0 + 2) +
           k[3] * gs_pixel(g, y0 + i, x0 + 3);
  gs_cubic(y - (float)y0 - 1, k);
  return k[0] * v[0] + k[1] * v[1] + k[2] * v[2] + k[3] * v[3];
}

/* 3-D: the plane set of depth d, its reflection border z lo / hi */
typedef struct gs_vol {
  gs_plane g;
  int64_t d;
  float zlo, zhi;
} gs_vol;

static float gs_voxel(const gs_vol *v, int64_t z, int64_t r, int64_t c) {
  if (v->g.pad == GS_ZEROS && (z < 0 || z >= v->d)) return 0.0f;
  if (v->g.pad == GS_BORDER) z = z < 0 ? 0 : z >= v->d ? v->d - 1 : z;
  if (v->g.pad == GS_REFLECTION) z = (int64_t)gs_reflect((float)z, v->zlo, v->zhi), z = z < 0 ? 0 : z >= v->d ? v->d - 1 : z;
  gs_plane g = v->g;
  g.p += z * g.h * g.w;
  return gs_pixel(&g, r, c);
}

/* One output of volume v at grid point (nx, ny, nz): nearest or trilinear, as onnxruntime's. */
static float gs_sample3(const gs_vol *v, int mode, bool ac, const float *n) {
  float x = gs_denorm(n[0], v->g.w, ac), y = gs_denorm(n[1], v->g.h, ac), z = gs_denorm(n[2], v->d, ac);
  if (isnan(x) || isnan(y) || isnan(z)) return 0.0f;
  const float far = (float)(1 << 24);
  x = x < -far ? -far : x > far ? far : x, y = y < -far ? -far : y > far ? far : y, z = z < -far ? -far : z > far ? far : z;
  if (mode == GS_NEAREST) return gs_voxel(v, (int64_t)nearbyintf(z), (int64_t)nearbyintf(y), (int64_t)nearbyintf(x));
  int64_t x1 = (int64_t)floorf(x), y1 = (int64_t)floorf(y), z1 = (int64_t)floorf(z), x2 = x1 + 1, y2 = y1 + 1, z2 = z1 + 1;
  float dx2 = (float)x2 - x, dx1 = x - (float)x1, dy2 = (float)y2 - y, dy1 = y - (float)y1, dz2 = (float)z2 - z, dz1 = z - (float)z1;
  float a = dy2 * (dx2 * gs_voxel(v, z1, y1, x1) + dx1 * gs_voxel(v, z1, y1, x2)) + dy1 * (dx2 * gs_voxel(v, z1, y2, x1) + dx1 * gs_voxel(v, z1, y2, x2));
  float b = dy2 * (dx2 * gs_voxel(v, z2, y1, x1) + dx1 * gs_voxel(v, z2, y1, x2)) + dy1 * (dx2 * gs_voxel(v, z2, y2, x1) + dx1 * gs_voxel(v, z2, y2, x2));
  return dz2 * a + dz1 * b;
}

static harp_status gridsample3(harp_error *e, const flow_step *sp, const ut_tensor *x, const ut_tensor *gr, ut_tensor *out) {
  if (gr->rank != 5 || gr->shape[4] != 3 || gr->shape[0] != x->shape[0] || sp->attr[0] == GS_CUBIC)
    return ut_fail(e, HARP_E_INVALID_ARG, NULL, "%s: a 5-D X takes a grid [N, D_out, H_out, W_out, 3] and mode linear or nearest", sp->where);
  int64_t N = x->shape[0], C = x->shape[1], D = x->shape[2], H = x->shape[3], W = x->shape[4];
  int64_t Do = gr->shape[1], Ho = gr->shape[2], Wo = gr->shape[3], shape[5] = {N, C, Do, Ho, Wo}, m = Do * Ho * Wo;
  if (ut_tensor_alloc(e, out, TINY_FP32, 5, shape)) return e->code;
  bool ac = sp->attr[2] != 0;
  gs_vol v = {{NULL, H, W, (int)sp->attr[1], {-0.5f, -0.5f, (float)W - 0.5f, (float)H - 0.5f}}, D, -0.5f, (float)D - 0.5f};
  if (ac) v.g.border[0] = v.g.border[1] = v.zlo = 0, v.g.border[2] = (float)W - 1.f, v.g.border[3] = (float)H - 1.f, v.zhi = (float)D - 1.f;
  for (int64_t n = 0; n < N; n++)
    for (int64_t c = 0; c < C; c++) {
      v.g.p = (const float *)x->data + (n * C + c) * D * H * W;
      const float *gp = (const float *)gr->data + n * m * 3;
      float *y = (float *)out->data + (n * C + c) * m;
      for (int64_t i = 0; i < m; i++) y[i] = gs_sample3(&v, (int)sp->attr[0], ac, gp + 3 * i);
    }
  return HARP_OK;
}

/* in: X [N, C, H, W] (or [N, C, D, H, W]), grid [N, Ho, Wo, 2] (or [N, Do,
 * Ho, Wo, 3]); attr: mode, padding, align_corners.  out: [N, C, Ho, Wo]
 * (or [N, C, Do, Ho, Wo]). */
static harp_status op_gridsample(harp_error *e, const flow_step *sp, const ut_tensor *const *in, ut_tensor *out) {
  const ut_tensor *x = in[0], *gr = in[1];
  if (x->dtype == TINY_FP32 && gr->dtype == TINY_FP32 && x->rank == 5) return gridsample3(e, sp, x, gr, &out[0]);
  if (x->dtype != TINY_FP32 || gr->dtype != TINY_FP32 || x->rank != 4 || gr->rank != 4 || gr->shape[3] != 2 || gr->shape[0] != x->shape[0])
    return ut_fail(e, HARP_E_INVALID_ARG, NULL, "%s: X must be float [N, C, H, W] and grid [N, H_out, W_out, 2]", sp->where);
  int64_t N = x->shape[0], C = x->shape[1], H = x->shape[2], W = x->shape[3], Ho = gr->shape[1], Wo = gr->shape[2];
  int64_t shape[4] = {N, C, Ho, Wo};
  if (ut_tensor_alloc(e, &out[0], TINY_FP32, 4, shape)) return e->code;
  bool ac = sp->attr[2] != 0;
  gs_plane g = {NULL, H, W, (int)sp->attr[1], {-0.5f, -0.5f, (float)W - 0.5f, (float)H - 0.5f}};
  if (ac) g.border[0] = g.border[1] = 0, g.border[2] = (float)W - 1.f, g.border[3] = (float)H - 1.f;
  for (int64_t n = 0; n < N; n++)
    for (int64_t c = 0; c < C; c++) {
      g.p = (const float *)x->data + (n * C + c) * H * W;
      const float *gp = (const float *)gr->data + n * Ho * Wo * 2;
      float *y = (float *)out[0].data + (n * C + c) * Ho * Wo;
      for (int64_t i = 0; i < Ho * Wo; i++) y[i] = gs_sample(&g, (int)sp->attr[0], ac, gp[2 * i], gp[2 * i + 1]);
    }
  return HARP_OK;
}

/* ---- ScatterElements, ScatterND ------------------------------------------------------------- */
/* out[at] combined with update element u by reduction red (0 none, 1 add,
 * 2 mul, 3 max, 4 min), in the tensor's type. */
static void scatter_one(ut_tensor *out, int64_t at, const ut_tensor *u, int64_t ui, int64_t red) {
  size_t es = (size_t)tiny_dtype_size(out->dtype);
  if (red == 0) {
    memcpy((char *)out->data + (size_t)at * es, (const char *)u->data + (size_t)ui * es, es);
    return;
  }
  double a = num(out, at), b = num(u, ui), r = red == 1 ? a + b : red == 2 ? a * b : red == 3 ? (a >= b ? a : b) : (a <= b ? a : b);
  if (red >= 3 && (isnan(a) || isnan(b))) r = NAN;
  if (out->dtype == TINY_I32) ((int32_t *)out->data)[at] = (int32_t)(int64_t)r;
  else if (out->dtype == TINY_BOOL) ((uint8_t *)out->data)[at] = r != 0;
  else ut_tensor_set(out, at, (float)r);
}

static harp_status copy_of(harp_error *e, const ut_tensor *x, ut_tensor *out) {
  if (ut_tensor_alloc(e, out, x->dtype, x->rank, x->shape)) return e->code;
  if (x->nbytes) memcpy(out->data, x->data, x->nbytes);
  return HARP_OK;
}

/* in: data, indices, updates; attr[0]: axis (normalised), attr[1]: reduction.
 * The updates in index order (a repeated index: the last one wins, or all
 * combine), negative indices counted from the end. */
static harp_status op_scatter_el(harp_error *e, const flow_step *sp, const ut_tensor *const *in, ut_tensor *out) {
  const ut_tensor *x = in[0], *idx = in[1], *u = in[2];
  int r = x->rank, axis = (int)sp->attr[0];
  if (idx->rank != r || u->rank != r || axis < 0 || axis >= r || u->dtype != x->dtype)
    return ut_fail(e, HARP_E_INVALID_ARG, NULL, "%s: data, indices and updates must have one rank and type", sp->where);
  for (int d = 0; d < r; d++)
    if (idx->shape[d] != u->shape[d] || (d != axis && idx->shape[d] > x->shape[d]))
      return ut_fail(e, HARP_E_AXIS_SIZE_MISMATCH, NULL, "%s: indices and updates differ, or exceed data, in dim %d", sp->where, d);
  if (copy_of(e, x, &out[0])) return e->code;
  int64_t n = ut_tensor_numel(idx);
  for (int64_t j = 0; j < n; j++) {
    int64_t at = 0, rest = j, k = (int64_t)num(idx, j);
    if (k < 0) k += x->shape[axis];
    if (k < 0 || k >= x->shape[axis])
      return ut_fail(e, HARP_E_INVALID_ARG, NULL, "%s: index %g outside [%" PRId64 ", %" PRId64 ")", sp->where, num(idx, j),
                     -x->shape[axis], x->shape[axis]);
    for (int d = r - 1, stride = 1; d >= 0; d--) {
      int64_t cd = rest % idx->shape[d];
      rest /= idx->shape[d];
      at += (d == axis ? k : cd) * stride;
      stride *= (int)x->shape[d];
    }
    scatter_one(&out[0], at, u, j, sp->attr[1]);
  }
  return HARP_OK;
}

/* in: data, indices [.., m], updates; attr[1]: reduction. */
static harp_status op_scatter_nd(harp_error *e, const flow_step *sp, const ut_tensor *const *in, ut_tensor *out) {
  const ut_tensor *x = in[0], *idx = in[1], *u = in[2];
  int q = idx->rank;
  int64_t m = q ? idx->shape[q - 1] : 0;
  if (q < 1 || m < 1 || m > x->rank || u->dtype != x->dtype)
    return ut_fail(e, HARP_E_INVALID_ARG, NULL, "%s: index tuples of %" PRId64 " for data of rank %d", sp->where, m, x->rank);
  int64_t J = prod(idx->shape, 0, q - 1), T = prod(x->shape, (int)m, x->rank);
  if (ut_tensor_numel(u) != J * T) return ut_fail(e, HARP_E_AXIS_SIZE_MISMATCH, NULL, "%s: updates must have %" PRId64 " elements", sp->where, J * T);
  if (copy_of(e, x, &out[0])) return e->code;
  for (int64_t j = 0; j < J; j++) {
    int64_t row = 0;
    for (int64_t d = 0; d < m; d++) {
      int64_t k = (int64_t)num(idx, j * m + d);
      if (k < 0) k += x->shape[d];
      if (k < 0 || k >= x->shape[d]) return ut_fail(e, HARP_E_INVALID_ARG, NULL, "%s: index %g outside dim %" PRId64, sp->where, num(idx, j * m + d), d);
      row = row * x->shape[d] + k;
    }
    for (int64_t t = 0; t < T; t++) scatter_one(&out[0], row * T + t, u, j * T + t, sp->attr[1]);
  }
  return HARP_OK;
}

/* ---- dispatch ----------------------------------------------------------------------------------- */
harp_status flow_op_run(harp_error *e, const flow_step *sp, const ut_tensor *const *in, ut_tensor *out) {
  static const int need[FLOW_FOP_COUNT] = {2, 1, 2, 1, 2, 3, 3, 3, 2, 3, 3}; /* the inputs each op requires */
  if (sp->op < 0 || sp->op >= FLOW_FOP_COUNT) return ut_fail(e, HARP_E_INTERNAL, NULL, "%s: host op %d", sp->where, (int)sp->op);
  for (int k = 0; k < need[sp->op]; k++)
    if (k >= sp->nin || !in[k]) return ut_fail(e, HARP_E_INVALID_ARG, NULL, "%s: input %d is required", sp->where, k);
  switch (sp->op) {
  case FLOW_FOP_NMS: return op_nms(e, sp, in, out);
  case FLOW_FOP_NONZERO: return op_nonzero(e, sp, in, out);
  case FLOW_FOP_TOPK: return op_topk(e, sp, in, out);
  case FLOW_FOP_UNIQUE: return op_unique(e, sp, in, out);
  case FLOW_FOP_COMPRESS: return op_compress(e, sp, in, out);
  case FLOW_FOP_RANGE: return op_range(e, sp, in, out);
  case FLOW_FOP_SLICE: return op_slice(e, sp, in, out);
  case FLOW_FOP_ROIALIGN: return op_roialign(e, sp, in, out);
  case FLOW_FOP_GRIDSAMPLE: return op_gridsample(e, sp, in, out);
  case FLOW_FOP_SCATTER_ELEMENTS: return op_scatter_el(e, sp, in, out);
  case FLOW_FOP_SCATTER_ND: return op_scatter_nd(e, sp, in, out);
  default: return ut_fail(e, HARP_E_INTERNAL, NULL, "%s: host op %d", sp->where, (int)sp->op);
  }
}
