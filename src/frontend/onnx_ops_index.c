/* onnx_ops_index.c — ONNX ops that move elements by index or by order:
 * GatherND, ScatterElements (and the old Scatter), ScatterND, CumSum,
 * OneHot, TopK, ReverseSequence, TensorScatter; and CenterCropPad (a
 * slice or a pad).
 * Needs: onnx_load.c / onnx_ops.c (values, attributes, helpers), the builder.
 * Gives: ox_find_index.
 *
 * harp has one data-dependent op, GATHER; the rest is written with
 * broadcast comparisons and reductions: a scatter compares every output
 * position with every index (a one-hot mask) and reduces over the indices,
 * a cumulative sum reduces a triangular mask, TopK ranks each element by
 * counting the elements before it in the order.  Those cost O(n m) for n
 * outputs and m candidates, so each is refused above OX_MAX_MASK elements
 * of mask, and the sizes they need must be known at import. */
#include <inttypes.h>
#include <stdio.h>
#include <math.h>
#include <string.h>

#include "onnx_int.h"

#define OP(name) static harp_status op_##name(ox_ctx *c)
/* elements of one broadcast comparison (the O(n m) masks) */
#define OX_MAX_MASK ((int64_t)1 << 26)
/* Scatter with reduction mul: one product per candidate (no product reduction) */
#define OX_MAX_MUL_STEPS 64

static hg_val K(ox_ctx *c, double v) { return hg_const(c->g, v); }
static hg_val KI(ox_ctx *c, double v) { return hg_const_typed(c->g, v, TINY_I32); }
static const fe_dim *I(ox_ctx *c, int64_t v) { return fe_dim_int(c->A, v); }

/* every dim of v known at import into d; what names v in the message */
static harp_status dims_of(ox_ctx *c, hg_val v, const char *what, int64_t *d, int *rank) {
  const fe_shape *s = ox_shape_of(c, v);
  *rank = s->rank;
  for (int i = 0; i < s->rank; i++) {
    char w[128];
    snprintf(w, sizeof w, "dim %d of %s", i, what);
    if (ox_known(c, s->d[i], w, &d[i])) return c->e->code;
  }
  return HARP_OK;
}

static int64_t prod(const int64_t *d, int lo, int hi) {
  int64_t p = 1;
  for (int i = lo; i < hi; i++) p *= d[i];
  return p;
}

static harp_status mask_limit(ox_ctx *c, int64_t n, int64_t m) {
  if (n > 0 && m > OX_MAX_MASK / n)
    return ox_fail(c, HARP_E_LIMIT, "%s as a %" PRId64 " x %" PRId64 " comparison mask (at most %" PRId64 " elements)", c->node->op_type,
                   n, m, OX_MAX_MASK);
  return HARP_OK;
}

/* 0, 1, ..., n-1 (i32) along axis of a rank-r tensor of ones elsewhere */
static hg_val iota(ox_ctx *c, int64_t n, int rank, int axis, const char *what) {
  ut_tensor t;
  int64_t shp[TINY_MAX_RANK];
  for (int i = 0; i < rank; i++) shp[i] = i == axis ? n : 1;
  if (n > INT32_MAX) return ox_fail(c, HARP_E_LIMIT, "an axis of %" PRId64, n), -1;
  if (ut_tensor_alloc(c->e, &t, TINY_I32, rank, shp)) return -1;
  for (int64_t i = 0; i < n; i++) ((int32_t *)t.data)[i] = (int32_t)i;
  return ox_weight(c, what, &t);
}

/* Integer input i (indices): the value, and a clear error when a constant
 * one lies outside [-n, n) (n <= 0: not checked). */
static hg_val indices(ox_ctx *c, int i, ox_val **out) {
  bool failed = false;
  ox_val *iv = ox_in(c, i, &failed);
  if (failed) return -1;
  if (!iv) return ox_fail(c, HARP_E_ARITY, "input %d (indices) is required", i), -1;
  hg_val v = ox_value(c, iv);
  if (v < 0) return -1;
  if (hg_val_dtype(c->g, v) != TINY_I32) return ox_fail(c, HARP_E_DTYPE_MISMATCH, "the indices must be integers"), -1;
  *out = iv;
  return v;
}

static harp_status check_const(ox_ctx *c, ox_val *iv, int64_t k, int64_t n, const char *what) {
  int64_t j;
  if (iv->has_i && k < iv->in && fe_dim_is_int(iv->iv[k], &j) && (j < -n || j >= n))
    return ox_fail(c, HARP_E_INVALID_ARG, "index %" PRId64 " is out of range for %s of size %" PRId64, j, what, n);
  return HARP_OK;
}

/* idx + n where idx < 0 */
static hg_val wrap(ox_ctx *c, hg_val idx, int64_t n) {
  return hg_where(c->g, hg_binary(c->g, HG_OP_LT, idx, KI(c, 0)), hg_add(c->g, idx, KI(c, (double)n)), idx);
}

/* The row of data (flattened over its axes [b, b + m)) that each index
 * tuple idx[..., 0:m] names: sum_k idx_k stride_k, negative idx_k counted
 * from the end; constant tuples are range-checked. */
static hg_val row_index(ox_ctx *c, ox_val *iv, hg_val idx, const int64_t *dd, int b, int m) {
  hg_graph *g = c->g;
  const fe_shape is = *ox_shape_of(c, idx);
  fe_shape drop = is;
  drop.rank--;
  for (int64_t k = 0; iv->has_i && k < iv->in; k++)
    if (check_const(c, iv, k, dd[b + k % m], "the indexed axis")) return -1;
  hg_val lin = HG_NONE;
  int ax = is.rank - 1;
  for (int k = 0; k < m; k++) {
    int64_t lo = k, hi = k + 1, stride = prod(dd, b + k + 1, b + m);
    hg_val comp = wrap(c, fe_reshape(g, hg_slice(g, idx, 1, &ax, &lo, &hi, NULL), &drop), dd[b + k]);
    if (stride != 1) comp = hg_mul(g, comp, KI(c, (double)stride));
    lin = lin == HG_NONE ? comp : hg_add(g, lin, comp);
  }
  return lin;
}

/* ---- GatherND ------------------------------------------------------------------------------- */
/* data [Bt.., P.. (m axes), T..] -> [B, P, T]; the tuples -> rows [B, G];
 * gather along axis 1 with the rows broadcast over T; out [Bt.., G.., T..] */
OP(GatherND) {
  hg_graph *g = c->g;
  ox_val *iv;
  int64_t bd, dd[TINY_MAX_RANK], m;
  hg_val x = ox_tensor(c, 0), idx = x > 0 ? indices(c, 1, &iv) : -1;
  if (idx < 0 || ox_attr_int(c, "batch_dims", 0, &bd)) return c->e->code;
  /* only the tuple length and the indexed dims must be known (the strides) */
  const fe_shape xs = *ox_shape_of(c, x), is = *ox_shape_of(c, idx);
  int r = xs.rank, q = is.rank;
  if (q < 1) return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "indices must have rank >= 1");
  if (ox_known(c, is.d[q - 1], "the index tuple length", &m)) return c->e->code;
  if (bd < 0 || bd >= q || bd >= r) return ox_fail(c, HARP_E_INVALID_ARG, "batch_dims %" PRId64 " for data of rank %d and indices of rank %d", bd, r, q);
  if (m < 1 || m > r - bd) return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "index tuples of %" PRId64 " for data of rank %d past %" PRId64 " batch dims", m, r, bd);
  int b = (int)bd, e = b + (int)m;
  for (int i = 0; i < b; i++)
    if (fe_dim_cmp(xs.d[i], is.d[i]) == FE_DIFF) return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "batch dim %d is %s in data and %s in indices", i, xs.d[i]->text, is.d[i]->text);
  for (int i = b; i < e; i++)
    if (ox_known(c, xs.d[i], "an indexed dim", &dd[i])) return c->e->code;
  int64_t P = prod(dd, b, e);
  if (P > INT32_MAX) return ox_fail(c, HARP_E_LIMIT, "%" PRId64 " indexed rows", P);
  if (q - 1 + r - e > TINY_MAX_RANK) return ox_fail(c, HARP_E_LIMIT, "rank above %d", TINY_MAX_RANK);
  const fe_dim *B = I(c, 1), *G = B, *T = B, *one = B;
  for (int i = 0; i < b && B; i++) B = fe_dim_mul(c->A, B, xs.d[i]);
  for (int i = b; i < q - 1 && G; i++) G = fe_dim_mul(c->A, G, is.d[i]);
  for (int i = e; i < r && T; i++) T = fe_dim_mul(c->A, T, xs.d[i]);
  if (!B || !G || !T) return ox_fail(c, HARP_E_LIMIT, "the size expression is too large");
  hg_val lin = row_index(c, iv, idx, dd, b, (int)m);
  if (ox_check(c, lin)) return c->e->code;
  hg_val x3 = fe_reshape(g, x, &(fe_shape){.rank = 3, .d = {B, I(c, P), T}});
  hg_val l3 = fe_expand(g, fe_reshape(g, lin, &(fe_shape){.rank = 3, .d = {B, G, one}}), &(fe_shape){.rank = 3, .d = {B, G, T}});
  fe_shape out = {0};
  for (int i = 0; i < q - 1; i++) out.d[out.rank++] = is.d[i];
  for (int i = e; i < r; i++) out.d[out.rank++] = xs.d[i];
  return ox_def(c, 0, fe_reshape(g, hg_gather(g, x3, l3, 1), &out));
}

/* ---- scatter: the combination of the matched updates ------------------------------------------- */
typedef enum { RED_NONE, RED_ADD, RED_MUL, RED_MAX, RED_MIN } reduction;

/* The node's "reduction" attribute as a reduction, or -1 after an error
 * (a value, not an out-parameter: no path leaves it unset). */
static int reduction_of(ox_ctx *c) {
  char s[8];
  if (ox_attr_str(c, "reduction", "none", s, sizeof s)) return -1;
  static const char *const names[] = {"none", "add", "mul", "max", "min"};
  for (int i = 0; i < 5; i++)
    if (!strcmp(s, names[i])) return i;
  ox_fail(c, HARP_E_INVALID_ARG, "reduction \"%s\" (none, add, mul, max or min)", s);
  return -1;
}

/* data (shape S without axis k) with the updates upd whose mask is true
 * (both broadcast to S, the candidates along axis k of n) combined in:
 * none: the last matching update (ONNX applies them in order), add: data +
 * their sum, mul: data times each in turn, max / min: of data and them;
 * positions no update matches keep data. */
static hg_val combine(ox_ctx *c, hg_val data, hg_val mask, hg_val upd, int k, int64_t n, int rank, reduction red) {
  hg_graph *g = c->g;
  tiny_dtype dt = hg_val_dtype(g, data);
  bool isf = tiny_dtype_is_float(dt);
  hg_val zero = hg_const_typed(g, 0, dt);
  if (red == RED_ADD) return hg_add(g, data, hg_reduce(g, HG_OP_SUM, hg_where(g, mask, upd, zero), &k, 1, false));
  if (red == RED_MUL) {
    if (n > OX_MAX_MUL_STEPS)
      return ox_fail(c, HARP_E_UNSUPPORTED, "reduction mul over %" PRId64 " candidates (at most %d: harp has no product reduction)", n,
                     OX_MAX_MUL_STEPS), -1;
    hg_val full = hg_where(g, mask, upd, hg_const_typed(g, 1, dt));
    if (ox_check(c, full)) return -1;
    fe_shape s = *ox_shape_of(c, full), d = s; /* S, and S without axis k */
    for (int i = k; i < rank - 1; i++) d.d[i] = s.d[i + 1];
    d.rank = rank - 1;
    for (int64_t j = 0; j < n; j++) {
      int64_t lo = j, hi = j + 1;
      data = hg_mul(g, data, fe_reshape(g, hg_slice(g, full, 1, &k, &lo, &hi, NULL), &d));
    }
    return data;
  }
  hg_val pos = iota(c, n, rank, k, "pos");
  if (pos < 0) return -1;
  hg_val cand = hg_where(g, mask, pos, KI(c, -1));
  hg_val last = hg_reduce(g, HG_OP_RMAX, cand, &k, 1, false);
  hg_val any = hg_binary(g, HG_OP_GE, last, KI(c, 0));
  if (red == RED_NONE) { /* the last match: its position is the max of the matching ones */
    hg_val pick = hg_binary(g, HG_OP_EQ, pos, hg_reduce(g, HG_OP_RMAX, cand, &k, 1, true));
    /* the picked value exactly (-0 and NaN too): the max over it and the lowest value */
    if (dt == TINY_BOOL)
      return hg_where(g, any, hg_binary(g, HG_OP_NE, hg_reduce(g, HG_OP_RMAX, hg_where(g, pick, hg_cast(g, upd, TINY_I32), KI(c, 0)), &k, 1, false), KI(c, 0)), data);
    hg_val low = isf ? K(c, -INFINITY) : KI(c, INT32_MIN);
    return hg_where(g, any, hg_reduce(g, HG_OP_RMAX, hg_where(g, pick, upd, low), &k, 1, false), data);
  }
  bool mx = red == RED_MAX;
  hg_val fill = isf ? K(c, mx ? -INFINITY : INFINITY) : KI(c, mx ? INT32_MIN : INT32_MAX);
  hg_val r = hg_reduce(g, mx ? HG_OP_RMAX : HG_OP_RMIN, hg_where(g, mask, upd, fill), &k, 1, false);
  return hg_where(g, any, mx ? hg_max(g, data, r) : hg_min(g, data, r), data);
}

static harp_status scatter_dtype(ox_ctx *c, hg_val data, hg_val upd, reduction red) {
  tiny_dtype dt = hg_val_dtype(c->g, data);
  if (hg_val_dtype(c->g, upd) != dt) return ox_fail(c, HARP_E_DTYPE_MISMATCH, "data and updates differ in element type");
  if (dt == TINY_BOOL && red != RED_NONE) return ox_fail(c, HARP_E_UNSUPPORTED, "a reduction of bool values");
  return HARP_OK;
}

/* ---- ScatterElements / Scatter ---------------------------------------------------------------- */
/* out[o] from the updates u at positions j with j = o off the axis and
 * idx[j] = o[axis]: indices and updates padded to data's extent off the
 * axis (index -1 matches nothing), the axis moved to a trailing candidate
 * axis, compared with an iota along the axis: a [data.., U_axis] mask. */
static harp_status scatter_elements(ox_ctx *c) {
  hg_graph *g = c->g;
  ox_val *iv;
  int64_t a, dd[TINY_MAX_RANK], id[TINY_MAX_RANK], ud[TINY_MAX_RANK];
  int r, q, ru, axis;
  int ri = RED_NONE;
  hg_val x = ox_tensor(c, 0), idx = x > 0 ? indices(c, 1, &iv) : -1, upd = idx > 0 ? ox_tensor(c, 2) : -1;
  if (upd < 0 || ox_attr_int(c, "axis", 0, &a) || (strcmp(c->node->op_type, "Scatter") && (ri = reduction_of(c)) < 0) ||
      ox_norm_axis(c, a, ox_rank_of(c, x), &axis))
    return c->e->code;
  reduction red = (reduction)ri;
  if (oxf_runtime_shape(c, 0, 3)) return oxf_host_scatter(c, false, axis, red); /* sizes known at run time: on the host */
  if (dims_of(c, x, "data", dd, &r) || dims_of(c, idx, "indices", id, &q) || dims_of(c, upd, "updates", ud, &ru) ||
      scatter_dtype(c, x, upd, red))
    return c->e->code;
  if (q != r || ru != r) return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "data, indices and updates must have one rank (%d, %d, %d)", r, q, ru);
  for (int i = 0; i < r; i++) {
    if (id[i] != ud[i]) return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "indices and updates differ in dim %d", i);
    if (i != axis && id[i] > dd[i]) return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "indices dim %d (%" PRId64 ") exceeds data's (%" PRId64 ")", i, id[i], dd[i]);
  }
  for (int64_t k = 0; iv->has_i && k < iv->in; k++)
    if (check_const(c, iv, k, dd[axis], "the scatter axis")) return c->e->code;
  int64_t n = id[axis];
  if (r + 1 > TINY_MAX_RANK) return ox_fail(c, HARP_E_LIMIT, "rank above %d", TINY_MAX_RANK - 1);
  if (c->opts && c->opts->host_flow && prod(dd, 0, r) > 0 && n > OX_MAX_MASK / prod(dd, 0, r))
    return oxf_host_scatter(c, false, axis, red); /* too large for the comparison mask: on the host */
  if (mask_limit(c, prod(dd, 0, r), n)) return c->e->code;
  int64_t lo[TINY_MAX_RANK] = {0}, hi[TINY_MAX_RANK] = {0};
  bool pad = false;
  for (int i = 0; i < r; i++) hi[i] = i == axis ? 0 : dd[i] - id[i], pad |= hi[i] > 0;
  idx = wrap(c, idx, dd[axis]);
  if (pad) idx = hg_pad(g, idx, lo, hi, r, -1), upd = hg_pad(g, upd, lo, hi, r, 0);
  /* [.., n at axis, ..] -> [.., 1 at axis, .., n] */
  int perm[TINY_MAX_RANK], p = 0;
  for (int i = 0; i < r; i++)
    if (i != axis) perm[p++] = i;
  perm[p] = axis;
  fe_shape s = {.rank = r + 1};
  for (int i = 0; i < r; i++) s.d[i] = I(c, i == axis ? 1 : dd[i]);
  s.d[r] = I(c, n);
  hg_val idx2 = fe_reshape(g, hg_permute(g, idx, perm, r), &s), upd2 = fe_reshape(g, hg_permute(g, upd, perm, r), &s);
  hg_val pos = iota(c, dd[axis], r + 1, axis, "iota");
  if (pos < 0 || ox_check(c, idx2) || ox_check(c, upd2)) return c->e->code;
  hg_val y = combine(c, x, hg_binary(g, HG_OP_EQ, idx2, pos), upd2, r, n, r + 1, red);
  return ox_def(c, 0, y);
}
OP(ScatterElements) { return scatter_elements(c); }
OP(Scatter) { return scatter_elements(c); }

/* ---- ScatterND ---------------------------------------------------------------------------------- */
/* data -> [P rows, T]; the J index tuples -> rows; updates -> [J, T];
 * the mask [P, J, 1] compares each row with each tuple's row. */
OP(ScatterND) {
  hg_graph *g = c->g;
  ox_val *iv;
  int64_t dd[TINY_MAX_RANK], id[TINY_MAX_RANK], ud[TINY_MAX_RANK], m;
  int r, q, ru;
  hg_val x = ox_tensor(c, 0), idx = x > 0 ? indices(c, 1, &iv) : -1, upd = idx > 0 ? ox_tensor(c, 2) : -1;
  int ri = upd < 0 ? -1 : reduction_of(c);
  if (ri < 0) return c->e->code;
  reduction red = (reduction)ri;
  if (oxf_runtime_shape(c, 0, 3)) return oxf_host_scatter(c, true, 0, red); /* sizes known at run time: on the host */
  if (dims_of(c, x, "data", dd, &r) || dims_of(c, idx, "indices", id, &q) || dims_of(c, upd, "updates", ud, &ru) ||
      scatter_dtype(c, x, upd, red))
    return c->e->code;
  if (q < 1) return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "indices must have rank >= 1");
  m = id[q - 1];
  if (m < 1 || m > r) return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "index tuples of %" PRId64 " for data of rank %d", m, r);
  bool ok = ru == q - 1 + r - (int)m;
  for (int i = 0; ok && i < q - 1; i++) ok = ud[i] == id[i];
  for (int i = (int)m; ok && i < r; i++) ok = ud[q - 1 + i - (int)m] == dd[i];
  if (!ok) return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "updates must have the shape indices.shape[:-1] + data.shape[%" PRId64 ":]", m);
  int64_t P = prod(dd, 0, (int)m), T = prod(dd, (int)m, r), J = prod(id, 0, q - 1);
  if (P > INT32_MAX) return ox_fail(c, HARP_E_LIMIT, "%" PRId64 " indexed rows", P);
  if (c->opts && c->opts->host_flow && P * T > 0 && J > OX_MAX_MASK / (P * T))
    return oxf_host_scatter(c, true, 0, red); /* too large for the comparison mask: on the host */
  if (mask_limit(c, P * T, J)) return c->e->code;
  const fe_shape xs = *ox_shape_of(c, x);
  hg_val lin = row_index(c, iv, idx, dd, 0, (int)m);
  if (ox_check(c, lin)) return c->e->code;
  hg_val l3 = fe_reshape(g, lin, &(fe_shape){.rank = 3, .d = {I(c, 1), I(c, J), I(c, 1)}});
  hg_val u3 = fe_reshape(g, upd, &(fe_shape){.rank = 3, .d = {I(c, 1), I(c, J), I(c, T)}});
  hg_val x2 = fe_reshape(g, x, &(fe_shape){.rank = 2, .d = {I(c, P), I(c, T)}});
  hg_val rows = iota(c, P, 3, 0, "iota");
  if (rows < 0) return c->e->code;
  hg_val y = combine(c, x2, hg_binary(g, HG_OP_EQ, l3, rows), u3, 1, J, 3, red);
  return ox_def(c, 0, fe_reshape(g, y, &xs));
}

/* ---- CumSum: a triangular mask reduced ------------------------------------------------------- */
/* x [.., n at axis, ..] as [.., 1 at axis, .., n]: element j of the axis on a trailing axis */
static hg_val to_trailing(ox_ctx *c, hg_val x, int axis) {
  const fe_shape s = *ox_shape_of(c, x);
  int perm[TINY_MAX_RANK], p = 0;
  for (int i = 0; i < s.rank; i++)
    if (i != axis) perm[p++] = i;
  perm[p] = axis;
  fe_shape t = s;
  t.rank = s.rank + 1, t.d[axis] = I(c, 1), t.d[s.rank] = s.d[axis];
  return fe_reshape(c->g, hg_permute(c->g, x, perm, s.rank), &t);
}

/* [.., n at axis, ..] with a trailing 1 */
static hg_val with_trailing(ox_ctx *c, hg_val x) {
  fe_shape s = *ox_shape_of(c, x);
  s.d[s.rank++] = I(c, 1);
  return fe_reshape(c->g, x, &s);
}

/* a constant bool [1.., n at axis, ..1, n]: keep(i, j) by kind */
typedef enum { TRI_LE, TRI_LT, TRI_GE, TRI_GT } tri_kind;
static hg_val tri_mask(ox_ctx *c, int64_t n, int rank, int axis, tri_kind k) {
  ut_tensor t;
  int64_t shp[TINY_MAX_RANK];
  for (int i = 0; i < rank; i++) shp[i] = i == axis ? n : 1;
  shp[rank] = n;
  if (ut_tensor_alloc(c->e, &t, TINY_BOOL, rank + 1, shp)) return -1;
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < n; j++)
      ((uint8_t *)t.data)[i * n + j] = k == TRI_LE ? j <= i : k == TRI_LT ? j < i : k == TRI_GE ? j >= i : j > i;
  return ox_weight(c, "tri", &t);
}

OP(CumSum) {
  hg_graph *g = c->g;
  int64_t a[1], ex, rev, d[TINY_MAX_RANK];
  int n1, r, axis;
  hg_val x = ox_tensor(c, 0);
  if (x < 0 || ox_const_ints(c, 1, "axis", a, 1, &n1) || ox_attr_int(c, "exclusive", 0, &ex) || ox_attr_int(c, "reverse", 0, &rev) ||
      dims_of(c, x, "the input", d, &r))
    return c->e->code;
  if (n1 != 1) return ox_fail(c, HARP_E_INVALID_ARG, "axis must be one value");
  if (r + 1 > TINY_MAX_RANK || ox_norm_axis(c, a[0], r, &axis)) return c->e->code ? c->e->code : ox_fail(c, HARP_E_LIMIT, "rank above %d", TINY_MAX_RANK - 1);
  if (r == 0) return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "the input must have rank >= 1");
  int64_t n = d[axis];
  if (mask_limit(c, prod(d, 0, r), n)) return c->e->code;
  hg_val tri = tri_mask(c, n, r, axis, rev ? (ex ? TRI_GT : TRI_GE) : (ex ? TRI_LT : TRI_LE));
  if (tri < 0) return c->e->code;
  hg_val zero = hg_const_typed(g, 0, hg_val_dtype(g, x));
  return ox_def(c, 0, hg_reduce(g, HG_OP_SUM, hg_where(g, tri, to_trailing(c, x, axis), zero), &r, 1, false));
}

/* ---- OneHot ---------------------------------------------------------------------------------- */
OP(OneHot) {
  hg_graph *g = c->g;
  int64_t a;
  double depth;
  bool failed = false;
  ox_val *dv = ox_in(c, 1, &failed);
  hg_val idx = failed ? -1 : ox_tensor(c, 0), vals = idx > 0 ? ox_tensor(c, 2) : -1;
  if (vals < 0 || ox_attr_int(c, "axis", -1, &a)) return c->e->code;
  if (!dv || dv->v > 0 || !ox_const_scalar(dv, &depth))
    return ox_needs_data(c, ox_in(c, 1, NULL)), ox_fail(c, HARP_E_UNSUPPORTED, "depth (input 1) must be a one-element constant (the output's shape depends on it)");
  if (!(depth >= 1 && depth <= INT32_MAX)) return ox_fail(c, HARP_E_INVALID_ARG, "depth %g", depth);
  int64_t n = (int64_t)depth;
  int r = ox_rank_of(c, idx), axis;
  if (r + 1 > TINY_MAX_RANK || ox_norm_axis(c, a, r + 1, &axis)) return c->e->code ? c->e->code : ox_fail(c, HARP_E_LIMIT, "rank above %d", TINY_MAX_RANK - 1);
  const fe_shape *vs = ox_shape_of(c, vals);
  int64_t nv;
  if (vs->rank != 1 || !fe_dim_is_int(vs->d[0], &nv) || nv != 2) return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "values must be [off, on]");
  if (hg_val_dtype(g, idx) != TINY_I32) idx = hg_cast(g, idx, TINY_I32); /* float indices truncate, as ONNX casts them */
  idx = wrap(c, idx, n);
  fe_shape s = *ox_shape_of(c, idx), u = {.rank = r + 1};
  for (int i = 0, j = 0; i <= r; i++) u.d[i] = i == axis ? I(c, 1) : s.d[j++];
  hg_val pos = iota(c, n, r + 1, axis, "iota");
  if (pos < 0) return c->e->code;
  int ax0 = 0;
  int64_t z = 0, o = 1, t = 2;
  fe_shape scalar = {.rank = 0};
  hg_val off = fe_reshape(g, hg_slice(g, vals, 1, &ax0, &z, &o, NULL), &scalar), on = fe_reshape(g, hg_slice(g, vals, 1, &ax0, &o, &t, NULL), &scalar);
  return ox_def(c, 0, hg_where(g, hg_binary(g, HG_OP_EQ, fe_reshape(g, idx, &u), pos), on, off));
}

/* ---- TopK: ranks by counting, then a pick per output position --------------------------------- */
/* rank(i) = #{j before i}: j's value ahead in the order (NaN the largest,
 * as numpy sorts it), or equal with j < i (ONNX: the lower index first).
 * Output p takes the element of rank p. */
static hg_val bool_or(hg_graph *g, hg_val a, hg_val b) { return hg_where(g, a, a, b); }
static hg_val bool_and(hg_graph *g, hg_val a, hg_val b) { return hg_where(g, a, b, a); }

OP(TopK) {
  hg_graph *g = c->g;
  int64_t a, largest, sorted, kk[1], d[TINY_MAX_RANK];
  int nk, r, axis;
  hg_val x = ox_tensor(c, 0);
  if (x < 0 || ox_attr_int(c, "axis", -1, &a) || ox_attr_int(c, "largest", 1, &largest) || ox_attr_int(c, "sorted", 1, &sorted))
    return c->e->code;
  /* sorted = 0 leaves the order open: harp's is sorted either way */
  r = ox_rank_of(c, x);
  if (r < 1 || r + 1 > TINY_MAX_RANK) return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "the input must have rank 1 to %d", TINY_MAX_RANK - 1);
  if (ox_norm_axis(c, a, r, &axis)) return c->e->code;
  bool host = c->opts && c->opts->host_flow && c->opset >= 10;
  if (c->opset >= 10 && oxf_runtime_inputs(c, 1, 2)) return oxf_host_topk(c, axis, largest != 0, sorted != 0); /* K at run time */
  if (dims_of(c, x, "the input", d, &r)) return c->e->code;
  if (c->opset < 10) {
    if (ox_attr_int(c, "k", -1, &kk[0])) return c->e->code;
  } else if (ox_const_ints(c, 1, "K", kk, 1, &nk)) {
    return c->e->code;
  }
  int64_t n = d[axis], k = kk[0];
  if (k < 1 || k > n) return ox_fail(c, k < 1 ? HARP_E_UNSUPPORTED : HARP_E_INVALID_ARG, "k = %" PRId64 " along an axis of %" PRId64, k, n);
  if (host && prod(d, 0, r) > 0 && n > OX_MAX_MASK / prod(d, 0, r)) return oxf_host_topk(c, axis, largest != 0, sorted != 0);
  if (mask_limit(c, prod(d, 0, r), n)) return c->e->code;
  hg_val xi = with_trailing(c, x), xj = to_trailing(c, x, axis);
  hg_val ni = hg_binary(g, HG_OP_NE, xi, xi), nj = hg_binary(g, HG_OP_NE, xj, xj);
  hg_val ahead = hg_binary(g, largest ? HG_OP_GT : HG_OP_LT, xj, xi);
  hg_val no = hg_const_typed(g, 0, TINY_BOOL);
  /* NaN ahead of a number when largest (nj and not ni), behind it when smallest (ni and not nj) */
  ahead = bool_or(g, ahead, largest ? hg_where(g, ni, no, nj) : hg_where(g, nj, no, ni));
  hg_val tie = bool_or(g, hg_binary(g, HG_OP_EQ, xj, xi), bool_and(g, ni, nj));
  hg_val lower = tri_mask(c, n, r, axis, TRI_LT);
  if (lower < 0) return c->e->code;
  hg_val before = bool_or(g, ahead, bool_and(g, tie, lower));
  hg_val rank = hg_reduce(g, HG_OP_SUM, hg_where(g, before, KI(c, 1), KI(c, 0)), &r, 1, false);
  hg_val p = iota(c, k, r + 1, axis, "pos"), ii = iota(c, n, r + 1, r, "index");
  if (p < 0 || ii < 0) return c->e->code;
  hg_val pick = hg_binary(g, HG_OP_EQ, to_trailing(c, rank, axis), p); /* [.., k at axis, .., n] */
  tiny_dtype dt = hg_val_dtype(g, x);
  hg_val low = tiny_dtype_is_float(dt) ? hg_const_typed(g, -INFINITY, dt) : KI(c, INT32_MIN);
  hg_val vals = hg_reduce(g, HG_OP_RMAX, hg_where(g, pick, xj, low), &r, 1, false);
  hg_val idx = hg_reduce(g, HG_OP_RMAX, hg_where(g, pick, ii, KI(c, -1)), &r, 1, false);
  if (ox_def(c, 0, vals)) return c->e->code;
  return c->node->n_output > 1 ? ox_def(c, 1, idx) : HARP_OK;
}

/* ---- ReverseSequence: a gather along the time axis --------------------------------------------- */
/* out[b, t] = x[b, t < len[b] ? len[b] - 1 - t : t]; len may be computed at run time */
OP(ReverseSequence) {
  hg_graph *g = c->g;
  ox_val *lv;
  int64_t ba, ta, tn;
  hg_val x = ox_tensor(c, 0), len = x > 0 ? indices(c, 1, &lv) : -1;
  if (len < 0 || ox_attr_int(c, "batch_axis", 1, &ba) || ox_attr_int(c, "time_axis", 0, &ta)) return c->e->code;
  const fe_shape xs = *ox_shape_of(c, x);
  if (xs.rank < 2) return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "the input must have rank >= 2");
  if ((ba != 0 && ba != 1) || (ta != 0 && ta != 1) || ba == ta)
    return ox_fail(c, HARP_E_INVALID_ARG, "batch_axis %" PRId64 " and time_axis %" PRId64 " (0 and 1, or 1 and 0)", ba, ta);
  if (ox_known(c, xs.d[ta], "the time size", &tn)) return c->e->code;
  const fe_shape *ls = ox_shape_of(c, len);
  if (ls->rank != 1 || fe_dim_cmp(ls->d[0], xs.d[ba]) == FE_DIFF)
    return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "sequence_lens must be [batch] (%s)", xs.d[ba]->text);
  for (int64_t k = 0; lv->has_i && k < lv->in; k++) {
    int64_t v;
    if (fe_dim_is_int(lv->iv[k], &v) && (v < 0 || v > tn))
      return ox_fail(c, HARP_E_INVALID_ARG, "sequence length %" PRId64 " is out of range for a time axis of %" PRId64, v, tn);
  }
  fe_shape lb = {.rank = xs.rank};
  for (int i = 0; i < xs.rank; i++) lb.d[i] = i == ba ? xs.d[ba] : I(c, 1);
  hg_val t = iota(c, tn, xs.rank, (int)ta, "iota");
  if (t < 0) return c->e->code;
  hg_val l = fe_reshape(g, len, &lb);
  hg_val idx = hg_where(g, hg_binary(g, HG_OP_LT, t, l), hg_sub(g, hg_sub(g, l, KI(c, 1)), t), hg_add(g, t, KI(c, 0)));
  return ox_def(c, 0, hg_gather(g, x, fe_expand(g, idx, &xs), (int)ta));
}

/* ---- TensorScatter (opset 24, KV cache updates): a gather from the update ----------------------- */
/* present[b, .., s, ..] = update[b, .., j, ..] where j = s - write_index[b]
 * (modulo the cache length when circular) lies in [0, L), else past */
OP(TensorScatter) {
  hg_graph *g = c->g;
  char mode[12];
  int64_t a, M, L;
  int axis;
  hg_val past = ox_tensor(c, 0), upd = past > 0 ? ox_tensor(c, 1) : -1, wi = HG_NONE;
  if (upd < 0 || ox_attr_int(c, "axis", -2, &a) || ox_attr_str(c, "mode", "linear", mode, sizeof mode)) return c->e->code;
  bool circ = !strcmp(mode, "circular");
  if (!circ && strcmp(mode, "linear") != 0) return ox_fail(c, HARP_E_INVALID_ARG, "mode \"%s\" (linear or circular)", mode);
  const fe_shape ps = *ox_shape_of(c, past), us = *ox_shape_of(c, upd);
  if (ox_norm_axis(c, a, ps.rank, &axis)) return c->e->code;
  if (axis == 0) return ox_fail(c, HARP_E_INVALID_ARG, "axis 0 is the batch axis");
  bool same = us.rank == ps.rank;
  for (int i = 0; same && i < ps.rank; i++) same = i == axis || fe_dim_cmp(ps.d[i], us.d[i]) != FE_DIFF;
  if (!same) return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "update must have the cache's shape but along axis %d", axis);
  if (ox_known(c, ps.d[axis], "the cache's sequence size", &M) || ox_known(c, us.d[axis], "the update's sequence size", &L)) return c->e->code;
  if (L > M || L < 1) return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "an update of %" PRId64 " into a cache of %" PRId64, L, M);
  if (hg_val_dtype(g, upd) != hg_val_dtype(g, past)) return ox_fail(c, HARP_E_DTYPE_MISMATCH, "past_cache and update differ in element type");
  hg_val s = iota(c, M, ps.rank, axis, "iota"), j = s;
  if (s < 0) return c->e->code;
  if (c->node->n_input > 2 && c->node->input[2][0]) {
    ox_val *wv;
    if ((wi = indices(c, 2, &wv)) < 0) return c->e->code;
    const fe_shape *ws = ox_shape_of(c, wi);
    if (ws->rank != 1 || fe_dim_cmp(ws->d[0], ps.d[0]) == FE_DIFF) return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "write_indices must be [batch]");
    for (int64_t k = 0; wv->has_i && k < wv->in; k++) {
      int64_t v;
      if (fe_dim_is_int(wv->iv[k], &v) && (v < 0 || (!circ && v + L > M)))
        return ox_fail(c, HARP_E_INVALID_ARG, "write index %" PRId64 " does not fit %" PRId64 " updates in a cache of %" PRId64, v, L, M);
    }
    fe_shape wb = {.rank = ps.rank};
    for (int i = 0; i < ps.rank; i++) wb.d[i] = i == 0 ? ps.d[0] : I(c, 1);
    j = hg_sub(g, s, fe_reshape(g, wi, &wb));
    if (circ) { /* j mod M: the float quotient is within one of the true one (|j| < 2^24 assumed), then corrected */
      hg_val q = hg_cast(g, hg_floor(g, hg_mul(g, hg_cast(g, j, TINY_FP32), K(c, 1.0 / (double)M))), TINY_I32);
      j = hg_sub(g, j, hg_mul(g, q, KI(c, (double)M)));
      j = hg_where(g, hg_binary(g, HG_OP_LT, j, KI(c, 0)), hg_add(g, j, KI(c, (double)M)), j);
      j = hg_where(g, hg_binary(g, HG_OP_GE, j, KI(c, (double)M)), hg_sub(g, j, KI(c, (double)M)), j);
    }
  }
  hg_val valid = hg_where(g, hg_binary(g, HG_OP_GE, j, KI(c, 0)), hg_binary(g, HG_OP_LT, j, KI(c, (double)L)), hg_const_typed(g, 0, TINY_BOOL));
  hg_val jc = hg_min(g, hg_max(g, j, KI(c, 0)), KI(c, (double)(L - 1)));
  hg_val pick = hg_gather(g, upd, fe_expand(g, jc, &ps), axis);
  return ox_def(c, 0, hg_where(g, valid, pick, past));
}

/* ---- CenterCropPad: a centred slice or zero padding per axis ------------------------------------- */
OP(CenterCropPad) {
  hg_graph *g = c->g;
  hg_val x = ox_tensor(c, 0);
  int64_t sh[TINY_MAX_RANK], ax[TINY_MAX_RANK], d;
  int ns, na;
  if (x < 0 || ox_const_ints(c, 1, "shape", sh, TINY_MAX_RANK, &ns) || ox_attr_ints(c, "axes", ax, TINY_MAX_RANK, &na)) return c->e->code;
  const fe_shape xs = *ox_shape_of(c, x);
  if (na < 0) {
    na = xs.rank;
    for (int i = 0; i < na; i++) ax[i] = i;
  }
  if (ns != na) return ox_fail(c, HARP_E_INVALID_ARG, "shape has %d values for %d axes", ns, na);
  int64_t lo[TINY_MAX_RANK] = {0}, hi[TINY_MAX_RANK] = {0};
  bool seen[TINY_MAX_RANK] = {false}, pad = false;
  for (int i = 0; i < na; i++) {
    int a;
    if (ox_norm_axis(c, ax[i], xs.rank, &a)) return c->e->code;
    if (seen[a]) return ox_fail(c, HARP_E_INVALID_ARG, "axis %d is named twice", a);
    seen[a] = true;
    if (ox_known(c, xs.d[a], "a cropped or padded dim", &d)) return c->e->code;
    if (sh[i] < 0 || sh[i] > OX_MAX_DIM) return ox_fail(c, HARP_E_INVALID_ARG, "shape[%d] = %" PRId64, i, sh[i]);
    if (sh[i] < d) { /* crop: start (d - s) / 2 */
      int64_t st = (d - sh[i]) / 2, en = st + sh[i];
      x = hg_slice(g, x, 1, &a, &st, &en, NULL);
    } else if (sh[i] > d) {
      lo[a] = (sh[i] - d) / 2, hi[a] = sh[i] - d - lo[a], pad = true;
    }
  }
  return ox_def(c, 0, pad ? hg_pad(g, x, lo, hi, xs.rank, 0) : x);
}

/* ---- dispatch -------------------------------------------------------------------------------- */
static const struct {
  const char *name;
  ox_op_fn fn;
} ops[] = {
#define E(n) {#n, op_##n}
    E(CenterCropPad), E(CumSum), E(GatherND), E(OneHot), E(ReverseSequence), E(Scatter), E(ScatterElements), E(ScatterND), E(TensorScatter), E(TopK),
#undef E
};

ox_op_fn ox_find_index(const char *op) {
  for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
    if (!strcmp(ops[i].name, op)) return ops[i].fn;
  return NULL;
}
