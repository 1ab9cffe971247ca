/* onnx_ops_more.c — ONNX ops composed from the builder's movement ops and
 * reductions: Tile, Range over a symbolic size, the derived reductions, DepthToSpace,
 * SpaceToDepth, ConvTranspose, Col2Im, ArgMax / ArgMin, Einsum; and the negative-index
 * parts of Slice and Gather.
 * Needs: onnx_load.c / onnx_ops.c (values, attributes, helpers), the builder.
 * Gives: ox_find_more, ox_slice_reverse, ox_gather_index. */
#include <inttypes.h>
#include <stdio.h>
#include <math.h>
#include <string.h>

#include "onnx_int.h"

#define OP(name) static harp_status op_##name(ox_ctx *c)

static hg_val K(ox_ctx *c, double v) { return hg_const(c->g, v); }
static const fe_dim *I(ox_ctx *c, int64_t v) { return fe_dim_int(c->A, v); }

/* the dim's size, or a clear error naming what needs it and the graph input it depends on */
static harp_status known(ox_ctx *c, const fe_dim *d, const char *what, int64_t *out) {
  char w[128];
  snprintf(w, sizeof w, "the size %s needs", what);
  return ox_known(c, d, w, out);
}

/* Each axis i of x repeated rep[i] times, either whole (tile: [x x x]) or
 * element by element (nearest upsampling: [x0 x0 x1 x1]): a unit dim
 * inserted before (tile) or after (upsample) the axis, expanded, merged. */
static hg_val repeat(ox_ctx *c, hg_val x, const int64_t *rep, bool whole) {
  const fe_shape s = *ox_shape_of(c, x);
  fe_shape u = {0}, e = {0}, m = {0};
  for (int i = 0; i < s.rank; i++) {
    if (rep[i] == 1) {
      u.d[u.rank++] = e.d[e.rank++] = m.d[m.rank++] = s.d[i];
      continue;
    }
    if (u.rank + 2 > TINY_MAX_RANK) return ox_fail(c, HARP_E_LIMIT, "rank above %d", TINY_MAX_RANK), -1;
    const fe_dim *r = I(c, rep[i]), *md = fe_dim_mul(c->A, s.d[i], r);
    if (!md) return ox_fail(c, HARP_E_LIMIT, "the repeated size expression is too large"), -1;
    m.d[m.rank++] = md;
    if (whole) u.d[u.rank++] = I(c, 1), e.d[e.rank++] = r;
    u.d[u.rank++] = e.d[e.rank++] = s.d[i];
    if (!whole) u.d[u.rank++] = I(c, 1), e.d[e.rank++] = r;
  }
  if (u.rank == s.rank) return x;
  return fe_reshape(c->g, fe_expand(c->g, fe_reshape(c->g, x, &u), &e), &m);
}

/* ---- Tile ------------------------------------------------------------------------------ */
OP(Tile) {
  hg_val x = ox_tensor(c, 0);
  if (x < 0) return c->e->code;
  int64_t rep[TINY_MAX_RANK];
  int n, r = hg_val_rank(c->g, x);
  if (ox_const_ints(c, 1, "repeats", rep, TINY_MAX_RANK, &n)) return c->e->code;
  if (n != r) return ox_fail(c, HARP_E_INVALID_ARG, "repeats has %d values for rank %d", n, r);
  for (int i = 0; i < n; i++)
    if (rep[i] < 1 || rep[i] > OX_MAX_DIM)
      return ox_fail(c, HARP_E_UNSUPPORTED, "repeats[%d] = %" PRId64 " (harp tiles with repeats >= 1)", i, rep[i]);
  hg_val y = repeat(c, x, rep, true);
  return c->e->code ? c->e->code : ox_def(c, 0, y);
}

/* ---- Slice with a negative step --------------------------------------------------------- */
harp_status ox_slice_reverse(ox_ctx *c, const fe_dim *dim, int64_t *start, int64_t *end, int64_t *step) {
  int64_t d;
  if (known(c, dim, "a Slice with a negative step", &d)) return c->e->code;
  if (*step < -OX_MAX_DIM) *step = -OX_MAX_DIM;
  int64_t s = *start, e = *end;
  /* ONNX: start clamps to [0, d-1], end to [-1, d-1] (-1: through index 0) */
  if (s < 0) s += d;
  if (e < 0 && e > -OX_MAX_DIM) e += d;
  s = s < 0 ? 0 : s > d - 1 ? d - 1 : s;
  e = e < -1 ? -1 : e > d - 1 ? d - 1 : e;
  /* index i is d-1-i once flipped */
  *start = d - 1 - s, *end = d - 1 - e, *step = -*step;
  if (*end < *start) *end = *start;
  return HARP_OK;
}

/* ---- Gather: negative indices ----------------------------------------------------------- */
/* The size dim (an expression of the shape symbols) as an int32 scalar
 * computed at run time: the sum of a tensor of ones that long. */
static hg_val size_value(ox_ctx *c, const fe_dim *dim) {
  hg_graph *g = c->g;
  int ax = 0;
  hg_val one = fe_reshape(g, hg_const_typed(g, 1, TINY_I32), &(fe_shape){.rank = 1, .d = {fe_dim_int(c->A, 1)}});
  return hg_reduce(g, HG_OP_SUM, fe_expand(g, one, &(fe_shape){.rank = 1, .d = {dim}}), &ax, 1, false);
}

/* idx (the value of the indices iv) with each negative index i along an
 * axis of size dim read as dim + i; dim a constant or, under a ShapeSet,
 * an expression of the symbols (its value then computed at run time) where
 * the indices are constants. */
hg_val ox_gather_index(ox_ctx *c, ox_val *iv, hg_val idx, const fe_dim *dim) {
  bool neg = false; /* a negative constant index */
  for (int64_t k = 0; iv->has_i && k < iv->in; k++) {
    int64_t j;
    if (fe_dim_is_int(iv->iv[k], &j) && j < 0) neg = true;
  }
  if (iv->has_i && iv->v <= 0 && !neg) return idx; /* constant: a where only when one is negative */
  int64_t d;
  /* along a symbolic axis only for a negative constant: harp's gather reports a negative index computed at
   * run time (a where on the size there would fold to the binding's constant: one object per binding) */
  if (!neg && !fe_dim_is_int(dim, &d)) return idx;
  hg_val zero = hg_const_typed(c->g, 0, TINY_I32), n = fe_dim_is_int(dim, &d) ? hg_const_typed(c->g, (double)d, TINY_I32) : size_value(c, dim);
  if (n < 0) return ox_check(c, n), -1;
  hg_val r = hg_where(c->g, hg_binary(c->g, HG_OP_LT, idx, zero), hg_add(c->g, idx, n), idx);
  return ox_check(c, r) ? -1 : r;
}

/* GatherElements: harp's gather (torch.gather) */
OP(GatherElements) {
  bool failed = false;
  ox_val *xv = ox_in(c, 0, &failed), *iv = xv ? ox_in(c, 1, &failed) : NULL;
  if (failed) return c->e->code;
  if (!xv || !iv) return ox_fail(c, HARP_E_ARITY, "needs data and indices");
  int64_t a;
  int axis;
  hg_val x = ox_attr_int(c, "axis", 0, &a) ? -1 : ox_value(c, xv), idx = x > 0 ? ox_value(c, iv) : -1;
  if (idx < 0 || ox_norm_axis(c, a, ox_rank_of(c, x), &axis)) return c->e->code;
  if (hg_val_dtype(c->g, idx) != TINY_I32) return ox_fail(c, HARP_E_DTYPE_MISMATCH, "indices must be integers");
  if (ox_rank_of(c, idx) != ox_rank_of(c, x))
    return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "indices have rank %d, data %d", ox_rank_of(c, idx), ox_rank_of(c, x));
  if ((idx = ox_gather_index(c, iv, idx, ox_shape_of(c, x)->d[axis])) < 0) return c->e->code;
  return ox_def(c, 0, hg_gather(c->g, x, idx, axis));
}

/* Trilu: a constant [M, N] mask of the kept triangle (j - i >= k, or <= k
 * for the lower one) over the last two axes; k must be known at import. */
OP(Trilu) {
  hg_val x = ox_tensor(c, 0);
  if (x < 0 || ox_need_rank(c, x, 2, TINY_MAX_RANK, "the input")) return c->e->code;
  int64_t upper, k = 0, m, n;
  int nk = -1;
  if (ox_attr_int(c, "upper", 1, &upper)) return c->e->code;
  if (c->node->n_input > 1 && c->node->input[1][0] && ox_const_ints(c, 1, "k", &k, 1, &nk)) return c->e->code;
  const fe_shape *s = ox_shape_of(c, x);
  if (known(c, s->d[s->rank - 2], "Trilu", &m) || known(c, s->d[s->rank - 1], "Trilu", &n)) return c->e->code;
  if (m * n > OX_MAX_FILL) return ox_fail(c, HARP_E_LIMIT, "a %" PRId64 "x%" PRId64 " mask is too large", m, n);
  ut_tensor t;
  if (ut_tensor_alloc(c->e, &t, TINY_BOOL, 2, (int64_t[]){m, n})) return c->e->code;
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) ((uint8_t *)t.data)[i * n + j] = upper ? j - i >= k : j - i <= k;
  hg_val mask = ox_weight(c, "mask", &t);
  if (mask < 0) return c->e->code;
  return ox_def(c, 0, hg_where(c->g, mask, x, hg_const(c->g, 0)));
}

/* 0, 1, ..., n-1 (fp32, exact below 2^24) for a size n that is an
 * expression of shape variables: b = [1 x n, 0 x n] summed over a sliding
 * window of n (a conv2d of b as [1, 1, 1, 2n] with a [1, 1, 1, n] filter of
 * ones: Tiny's POOL with the window n) holds s_i = n - i at position i, so
 * i = s_0 - s_i.  As the causal mask's iota_rev (lower_nn.c): the ones
 * padded after by n zeros (the concat's zero fill adds nothing, lower.c),
 * every read affine in n (the window's extent, the pad's guard), so a
 * ShapeSet's loop nest takes n at run time.  n^2 work: sizes, not data. */
static hg_val iota_sym(ox_ctx *c, const fe_dim *n) {
  hg_graph *g = c->g;
  const fe_dim *w = fe_dim_scale(c->A, n, 2), *one = I(c, 1), *zero = I(c, 0);
  if (!w) return ox_fail(c, HARP_E_LIMIT, "a range of %s values: too large", n->text), -1;
  hg_val parts[2] = {ox_fill_sym(c, 1, TINY_FP32, &(fe_shape){1, {n}}), ox_fill_sym(c, 0, TINY_FP32, &(fe_shape){1, {n}})};
  hg_val ones = ox_fill_sym(c, 1, TINY_FP32, &(fe_shape){4, {one, one, one, n}});
  if (parts[0] < 0 || parts[1] < 0 || ones < 0) return -1;
  hg_val b = fe_reshape(g, hg_concat(g, parts, 2, 0), &(fe_shape){4, {one, one, one, w}});
  hg_val sums = hg_conv2d(g, b, ones, NULL); /* [1, 1, 1, n + 1]: n - i at i */
  const fe_dim *lo[4] = {zero, zero, zero, zero};
  hg_val s0 = fe_slice(g, sums, lo, (const fe_dim *[]){one, one, one, one}, (int64_t[]){1, 1, 1, 1});
  /* -s + s_0 over all n + 1 sums (the conv's named sizes; the size-1
   * operand second, so that at n = 1 the graph is the one at n > 1 and a
   * ShapeSet object serves it), then the first n */
  hg_val d = hg_add(g, hg_unary(g, HG_OP_NEG, sums), s0);
  hg_val first = fe_slice(g, d, lo, (const fe_dim *[]){one, one, one, n}, (int64_t[]){1, 1, 1, 1});
  return fe_reshape(g, first, &(fe_shape){1, {n}});
}

/* Range(start, limit, delta) whose limit is an expression of shape
 * variables (start and delta > 0 integer constants): start + delta * i for
 * i below ceil((limit - start) / delta), int32. */
static harp_status range_sym(ox_ctx *c, ox_val *const *x) {
  int64_t st, dl;
  if (!fe_dim_is_int(x[0]->iv[0], &st) || !fe_dim_is_int(x[2]->iv[0], &dl) || dl < 1)
    return ox_need_value(c, fe_dim_is_int(x[0]->iv[0], NULL) ? x[2]->iv[0] : x[0]->iv[0], "a range's start or delta (with a symbolic limit)");
  const fe_dim *span = fe_dim_sub(c->A, x[1]->iv[0], I(c, st));
  if (!span || !ox_dim_nonneg(c, span)) return ox_need_value(c, x[1]->iv[0], "a range's limit (it may lie below the start)");
  const fe_dim *n = fe_dim_div(c->A, fe_dim_add(c->A, span, I(c, dl - 1)), dl);
  if (!n) return ox_fail(c, HARP_E_LIMIT, "a range of %s values: too large", span->text);
  hg_val i = iota_sym(c, n);
  if (i < 0) return c->e->code;
  if (dl != 1) i = hg_mul(c->g, i, K(c, (double)dl));
  if (st != 0) i = hg_add(c->g, i, K(c, (double)st));
  if (ox_def(c, 0, hg_cast(c->g, i, TINY_I32))) return c->e->code;
  ox_val *y = ox_find(c, c->node->output[0]);
  if (y) y->oty = x[1]->oty ? x[1]->oty : OX_INT64;
  return HARP_OK;
}

/* Range of constants too long to fold (onnx_fold.c evaluates the rest): a
 * weight, int32 or float as the evaluator computes it; computed at run
 * time it is refused. */
OP(Range) {
  if (oxf_runtime_inputs(c, 0, 3)) return oxf_host_range(c); /* bounds known at run time: on the host */
  ox_val *in[3] = {ox_in(c, 0, NULL), ox_in(c, 1, NULL), ox_in(c, 2, NULL)};
  bool iok = in[0] && in[1] && in[2], sym = false;
  for (int i = 0; iok && i < 3; i++) {
    iok &= in[i]->has_i && !in[i]->fden && in[i]->in == 1;
    sym |= iok && !fe_dim_is_int(in[i]->iv[0], NULL);
  }
  if (iok && sym) return range_sym(c, in); /* a size as the limit (a ShapeSet's) */
  double v[3];
  int64_t iv[3];
  bool ints = true;
  tiny_dtype dt = TINY_FP32; /* the floats' type (fp16 in, fp16 out) */
  int oty = OX_FLOAT;
  for (int i = 0; i < 3; i++) {
    bool failed = false;
    ox_val *x = ox_in(c, i, &failed);
    if (x && x->has_t && tiny_dtype_is_float(x->t.dtype)) dt = x->t.dtype, oty = x->oty ? x->oty : OX_FLOAT;
    if (failed) return c->e->code;
    if (!x || !ox_const_scalar(x, &v[i])) {
      if (x) ox_needs_data(c, x);
      return ox_fail(c, HARP_E_UNSUPPORTED, "input %d must be a one-element constant (the output's length depends on the values)", i);
    }
    ints &= x->has_i && fe_dim_is_int(x->iv[0], &iv[i]) && iv[i] > -((int64_t)1 << 52) && iv[i] < ((int64_t)1 << 52);
  }
  if (v[2] == 0) return ox_fail(c, HARP_E_INVALID_ARG, "delta is 0");
  double len = ceil((v[1] - v[0]) / v[2]);
  if (len > (double)OX_MAX_FILL) return ox_fail(c, HARP_E_LIMIT, "a range of %g values", len);
  int64_t n = ints ? (iv[1] - iv[0] + iv[2] + (iv[2] > 0 ? -1 : 1)) / iv[2] : len > 0 ? (int64_t)len : 0;
  if (n < 0) n = 0;
  ut_tensor t;
  if (ut_tensor_alloc(c->e, &t, ints ? TINY_I32 : dt, 1, &n)) return c->e->code;
  for (int64_t k = 0; k < n; k++) {
    if (!ints) { /* in float, as onnxruntime's kernel */
      float step = (float)k * (float)v[2];
      ut_tensor_set(&t, k, (float)v[0] + step);
      continue;
    }
    int64_t e = iv[0] + k * iv[2];
    if (e < INT32_MIN || e > INT32_MAX) {
      ut_tensor_free(&t);
      return ox_fail(c, HARP_E_LIMIT, "a range through %" PRId64 ", outside int32 (harp's integers)", e);
    }
    ((int32_t *)t.data)[k] = (int32_t)e;
  }
  return ox_def_tensor(c, 0, &t, ints ? OX_INT64 : oty);
}

/* ---- MaxPool with dilations: the max of the kernel's k[0] x k[1] strided slices ---------- */
#define OX_MAX_DILATED_TAPS 64
hg_val ox_dilated_max_pool(ox_ctx *c, hg_val x, const int64_t *k, const int64_t *s, const int64_t *d, const int64_t *out) {
  if (k[0] * k[1] > OX_MAX_DILATED_TAPS)
    return ox_fail(c, HARP_E_UNSUPPORTED, "a dilated %" PRId64 "x%" PRId64 " window (at most %d taps)", k[0], k[1], OX_MAX_DILATED_TAPS), -1;
  hg_val y = HG_NONE;
  int axes[2] = {2, 3};
  for (int64_t a = 0; a < k[0]; a++)
    for (int64_t b = 0; b < k[1]; b++) {
      int64_t lo[2] = {a * d[0], b * d[1]}, hi[2] = {lo[0] + (out[0] - 1) * s[0] + 1, lo[1] + (out[1] - 1) * s[1] + 1};
      hg_val t = hg_slice(c->g, x, 2, axes, lo, hi, s);
      y = y == HG_NONE ? t : hg_max(c->g, y, t);
    }
  return y;
}

/* ---- reductions ----------------------------------------------------------------------- */
typedef enum { R_L1, R_L2, R_SUMSQ, R_LOGSUM, R_LOGSUMEXP } rkind;

static harp_status reduce_more(ox_ctx *c, rkind k) {
  hg_val x = ox_tensor(c, 0);
  if (x < 0) return c->e->code;
  int n, axes[TINY_MAX_RANK];
  bool keep, noop;
  if (ox_reduce_axes(c, hg_val_rank(c->g, x), 18, axes, &n, &keep, &noop)) return c->e->code;
  hg_graph *g = c->g;
  hg_val y;
  switch (k) {
  case R_L1: y = noop ? hg_abs(g, x) : hg_reduce(g, HG_OP_SUM, hg_abs(g, x), axes, n, keep); break;
  case R_SUMSQ: y = noop ? hg_mul(g, x, x) : hg_reduce(g, HG_OP_SUM, hg_mul(g, x, x), axes, n, keep); break;
  case R_L2: y = noop ? hg_abs(g, x) : hg_sqrt(g, hg_reduce(g, HG_OP_SUM, hg_mul(g, x, x), axes, n, keep)); break;
  case R_LOGSUM: y = hg_log(g, noop ? x : hg_reduce(g, HG_OP_SUM, x, axes, n, keep)); break;
  default: {
    if (noop) {
      y = x;
      break;
    }
    /* m + log(sum(exp(x - m))), m the max (0 where it is infinite, so that
     * an all -inf slice gives -inf and an inf gives inf, not NaN) */
    hg_val m = hg_reduce(g, HG_OP_RMAX, x, axes, n, true);
    hg_val fin = hg_binary(g, HG_OP_LT, hg_abs(g, m), K(c, INFINITY));
    m = hg_where(g, fin, m, K(c, 0));
    hg_val l = hg_add(g, hg_log(g, hg_reduce(g, HG_OP_SUM, hg_exp(g, hg_sub(g, x, m)), axes, n, true)), m);
    if (!keep) {
      y = hg_reduce(g, HG_OP_SUM, l, axes, n, false); /* the axes have size 1 now */
      break;
    }
    y = l;
  }
  }
  return ox_def(c, 0, y);
}

OP(ReduceL1) { return reduce_more(c, R_L1); }
OP(ReduceL2) { return reduce_more(c, R_L2); }
OP(ReduceSumSquare) { return reduce_more(c, R_SUMSQ); }
OP(ReduceLogSum) { return reduce_more(c, R_LOGSUM); }
OP(ReduceLogSumExp) { return reduce_more(c, R_LOGSUMEXP); }

OP(ReduceProd) {
  return ox_fail(c, HARP_E_UNSUPPORTED, "ReduceProd: harp's reductions are sum, max and min (no product)");
}

/* ---- ArgMax / ArgMin: the first (or last) position holding the max / min -------------- */
hg_val ox_extreme_pos(ox_ctx *c, hg_val x, hg_val m, hg_val iota, hg_val none) {
  hg_graph *g = c->g;
  hg_val nan = hg_binary(g, HG_OP_NE, x, x);
  return hg_where(g, hg_binary(g, HG_OP_EQ, x, m), iota, hg_where(g, nan, iota, none));
}

static harp_status arg_reduce(ox_ctx *c, bool is_max) {
  hg_val x = ox_tensor(c, 0);
  if (x < 0) return c->e->code;
  int64_t a, keep, last, n;
  int axis;
  const fe_shape s = *ox_shape_of(c, x);
  if (ox_attr_int(c, "axis", 0, &a) || ox_attr_int(c, "keepdims", 1, &keep) || ox_attr_int(c, "select_last_index", 0, &last) ||
      ox_norm_axis(c, a, s.rank, &axis) || known(c, s.d[axis], "the reduced axis", &n))
    return c->e->code;
  if (n < 1 || n > INT32_MAX) return ox_fail(c, HARP_E_UNSUPPORTED, "an axis of size %" PRId64, n);
  ut_tensor t;
  int64_t shp[TINY_MAX_RANK];
  for (int i = 0; i < s.rank; i++) shp[i] = i == axis ? n : 1;
  if (ut_tensor_alloc(c->e, &t, TINY_I32, s.rank, shp)) return c->e->code;
  for (int64_t i = 0; i < n; i++) ((int32_t *)t.data)[i] = (int32_t)i;
  hg_val iota = ox_weight(c, "iota", &t);
  if (iota < 0) return c->e->code;
  hg_graph *g = c->g;
  hg_val m = hg_reduce(g, is_max ? HG_OP_RMAX : HG_OP_RMIN, x, &axis, 1, true);
  hg_val none = hg_const_typed(g, last ? -1 : (double)n, TINY_I32);
  hg_val pos = ox_extreme_pos(c, x, m, iota, none);
  return ox_def(c, 0, hg_reduce(g, last ? HG_OP_RMAX : HG_OP_RMIN, pos, &axis, 1, keep != 0));
}
OP(ArgMax) { return arg_reduce(c, true); }
OP(ArgMin) { return arg_reduce(c, false); }

/* ---- DepthToSpace / SpaceToDepth: reshape, permute, reshape ---------------------------- */
static harp_status depth_space(ox_ctx *c, bool to_space) {
  hg_val x = ox_tensor(c, 0);
  if (x < 0) return c->e->code;
  int64_t b, C;
  char mode[8];
  if (ox_attr_int(c, "blocksize", 0, &b) || ox_attr_str(c, "mode", "DCR", mode, sizeof mode)) return c->e->code;
  const fe_shape s = *ox_shape_of(c, x);
  if (s.rank != 4) return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "the input must have rank 4 (N, C, H, W), got %d", s.rank);
  if (b < 1 || b > 65536) return ox_fail(c, HARP_E_INVALID_ARG, "blocksize %" PRId64, b);
  bool crd = !strcmp(mode, "CRD");
  if (!crd && strcmp(mode, "DCR") != 0) return ox_fail(c, HARP_E_INVALID_ARG, "mode \"%s\"", mode);
  const fe_dim *B = I(c, b), *N = s.d[0], *H = s.d[2], *W = s.d[3];
  fe_shape u = {.rank = 6}, o = {.rank = 4};
  int perm[6];
  if (to_space) {
    if (known(c, s.d[1], "DepthToSpace", &C)) return c->e->code;
    if (C % (b * b)) return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "%" PRId64 " channels are not a multiple of %" PRId64 "^2", C, b);
    const fe_dim *Cb = I(c, C / (b * b));
    static const int dcr[6] = {0, 3, 4, 1, 5, 2}, crdp[6] = {0, 1, 4, 2, 5, 3};
    if (crd) u = (fe_shape){.rank = 6, .d = {N, Cb, B, B, H, W}};
    else u = (fe_shape){.rank = 6, .d = {N, B, B, Cb, H, W}};
    memcpy(perm, crd ? crdp : dcr, sizeof perm);
    o = (fe_shape){.rank = 4, .d = {N, Cb, fe_dim_mul(c->A, H, B), fe_dim_mul(c->A, W, B)}};
  } else {
    int64_t h, w;
    if (known(c, H, "SpaceToDepth", &h) || known(c, W, "SpaceToDepth", &w)) return c->e->code;
    if (h % b || w % b) return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "%" PRId64 "x%" PRId64 " is not a multiple of %" PRId64, h, w, b);
    u = (fe_shape){.rank = 6, .d = {N, s.d[1], I(c, h / b), B, I(c, w / b), B}};
    /* DCR: channel (bh b + bw) C + c; CRD (opset 28): c b^2 + bh b + bw */
    static const int s2d[6] = {0, 3, 5, 1, 2, 4}, s2d_crd[6] = {0, 1, 3, 5, 2, 4};
    memcpy(perm, crd ? s2d_crd : s2d, sizeof perm);
    o = (fe_shape){.rank = 4, .d = {N, fe_dim_mul(c->A, s.d[1], I(c, b * b)), I(c, h / b), I(c, w / b)}};
  }
  for (int i = 0; i < 4; i++)
    if (!o.d[i]) return ox_fail(c, HARP_E_LIMIT, "the size expression is too large");
  return ox_def(c, 0, fe_reshape(c->g, hg_permute(c->g, fe_reshape(c->g, x, &u), perm, 6), &o));
}
OP(DepthToSpace) { return depth_space(c, true); }
OP(SpaceToDepth) { return depth_space(c, false); }

/* ---- ConvTranspose ---------------------------------------------------------------------- */
/* A strided transposed convolution (with dilation, or a kernel smaller than
 * its stride; the others: transpose_subpixel) is a stride-1 convolution of
 * the input with (stride - 1) zeros between its elements, padded by (k-1)d - pad (plus
 * output_padding at the end), with the weight flipped and its two channel
 * axes swapped per group: the conv template then runs it. */
static harp_status flip_weight(ox_ctx *c, const ut_tensor *w, int64_t group, ut_tensor *out) {
  int64_t ci = w->shape[0], cog = w->shape[1], kh = w->shape[2], kw = w->shape[3], cig = ci / group;
  int64_t shp[4] = {cog * group, cig, kh, kw};
  if (ut_tensor_alloc(c->e, out, TINY_FP32, 4, shp)) return c->e->code;
  const float *src = w->data;
  float *dst = out->data;
  for (int64_t gi = 0; gi < group; gi++)
    for (int64_t i = 0; i < cig; i++)
      for (int64_t o = 0; o < cog; o++)
        for (int64_t a = 0; a < kh; a++)
          for (int64_t b = 0; b < kw; b++)
            dst[(((gi * cog + o) * cig + i) * kh + a) * kw + b] = src[(((gi * cig + i) * cog + o) * kh + (kh - 1 - a)) * kw + (kw - 1 - b)];
  return HARP_OK;
}

/* A strided ConvTranspose (dilation 1, kernel >= stride) as sub-pixel
 * convolutions: output position u = q*s + r (before the pads) of phase r
 * takes only the taps k = r + s*t, so z_r[q] = sum_t x[q - t] w[r + s*t],
 * a stride-1 conv with the T = ceil(k/s) taps of phase r flipped (those
 * past the kernel 0).  All s_h x s_w phases are one conv to Cout * s_h * s_w
 * channels, padded T - 1 before and R = ceil((k + output_padding)/s) - 1
 * after (Q = H + R positions per phase), then a depth-to-space and the
 * pads cut: about s_h x s_w times fewer multiplications than the conv of
 * the zero-inserted input, and no zero-inserted copy.  The 2x2 stride-2
 * upsampling of detectors and U-Nets becomes a 1x1 conv.  x: [N, C, H, W]
 * (xs its shape), w: the [C, Cout/group, kh, kw] weight; st, op, pads as
 * ONNX's. */
static harp_status transpose_subpixel(ox_ctx *c, hg_val x, const fe_shape *xs, const ut_tensor *w, int64_t group,
                                      const int64_t *st, const int64_t *op, const int64_t *pads) {
  int64_t ci = w->shape[0], cog = w->shape[1], kk[2] = {w->shape[2], w->shape[3]}, cig = ci / group;
  int64_t T[2], R[2], cut[2];
  for (int i = 0; i < 2; i++) {
    T[i] = (kk[i] + st[i] - 1) / st[i], R[i] = (kk[i] + op[i] + st[i] - 1) / st[i] - 1;
    cut[i] = (R[i] + 1) * st[i] - kk[i] - op[i] + pads[2 + i]; /* cut from the end of the Q * s positions */
  }
  int64_t ph = st[0] * st[1], shp[4] = {group * cog * ph, cig, T[0], T[1]};
  ut_tensor wt;
  if (ut_tensor_alloc(c->e, &wt, TINY_FP32, 4, shp)) return c->e->code;
  const float *src = w->data;
  float *dst = wt.data;
  /* row (g, o, rh, rw), column i, tap (th, tw) <- w[g, i, o, rh + s_h (T_h - 1 - th), rw + s_w (T_w - 1 - tw)] */
  for (int64_t gi = 0; gi < group; gi++)
    for (int64_t o = 0; o < cog; o++)
      for (int64_t r = 0; r < ph; r++)
        for (int64_t i = 0; i < cig; i++)
          for (int64_t th = 0; th < T[0]; th++)
            for (int64_t tw = 0; tw < T[1]; tw++) {
              int64_t a = r / st[1] + st[0] * (T[0] - 1 - th), b = r % st[1] + st[1] * (T[1] - 1 - tw);
              float v = a < kk[0] && b < kk[1] ? src[(((gi * cig + i) * cog + o) * kk[0] + a) * kk[1] + b] : 0.0f;
              dst[((((gi * cog + o) * ph + r) * cig + i) * T[0] + th) * T[1] + tw] = v;
            }
  hg_val wv = ox_weight(c, "weight", &wt);
  if (wv < 0) return c->e->code;
  hg_conv2d_opts o = {.groups = group, .stride = {1, 1}, .dilation = {1, 1}, .pad = {T[0] - 1, R[0], T[1] - 1, R[1]}};
  hg_val y = hg_conv2d(c->g, x, wv, &o);
  const fe_dim *co = I(c, group * cog), *Qh = fe_dim_add(c->A, xs->d[2], I(c, R[0])), *Qw = fe_dim_add(c->A, xs->d[3], I(c, R[1]));
  const fe_dim *H = Qh ? fe_dim_mul(c->A, Qh, I(c, st[0])) : NULL, *W = Qw ? fe_dim_mul(c->A, Qw, I(c, st[1])) : NULL;
  if (!H || !W) return ox_fail(c, HARP_E_LIMIT, "the size expression is too large");
  y = fe_reshape(c->g, y, &(fe_shape){.rank = 6, .d = {xs->d[0], co, I(c, st[0]), I(c, st[1]), Qh, Qw}});
  static const int d2s[6] = {0, 1, 4, 2, 5, 3}; /* [N, Co, Qh, s_h, Qw, s_w] */
  y = fe_reshape(c->g, hg_permute(c->g, y, d2s, 6), &(fe_shape){.rank = 4, .d = {xs->d[0], co, H, W}});
  if (pads[0] || pads[1] || cut[0] || cut[1]) {
    int ax[2] = {2, 3};
    int64_t s0[2] = {pads[0], pads[1]}, e0[2] = {cut[0] ? -cut[0] : INT64_MAX, cut[1] ? -cut[1] : INT64_MAX};
    y = hg_slice(c->g, y, 2, ax, s0, e0, NULL);
  }
  if (c->node->n_input > 2 && c->node->input[2][0]) {
    hg_val bias = ox_tensor(c, 2);
    if (bias < 0) return c->e->code;
    y = hg_add(c->g, y, fe_reshape(c->g, bias, &(fe_shape){.rank = 3, .d = {co, I(c, 1), I(c, 1)}}));
  }
  if (ox_check(c, y)) return c->e->code;
  return ox_def(c, 0, y);
}

/* ConvTranspose's pads from auto_pad SAME_UPPER / SAME_LOWER (output =
 * input * stride) or VALID, or from attribute output_shape, as onnxruntime
 * splits them: the odd one at the end for SAME_UPPER, at the start
 * otherwise.  xs: the input's shape, k: the weight's. */
static harp_status transpose_pads(ox_ctx *c, const fe_shape *xs, const int64_t *k, const int64_t *st, const int64_t *dl, const int64_t *op,
                                const char *ap, int64_t *pads) {
  int64_t os[8];
  int nos;
  if (ox_attr_ints(c, "output_shape", os, 8, &nos)) return c->e->code;
  if (nos >= 0 && nos != 2 && nos != 4) return ox_fail(c, HARP_E_INVALID_ARG, "output_shape has %d values (2, or 4 with N and C)", nos);
  bool same = !strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER");
  if (!strcmp(ap, "VALID")) memset(pads, 0, sizeof *pads * 4);
  if (nos < 0 && !same) return HARP_OK;
  for (int i = 0; i < 2; i++) {
    int64_t in;
    if (ox_known(c, xs->d[2 + i], nos >= 0 ? "the spatial size output_shape pads" : "the spatial size auto_pad pads", &in)) return c->e->code;
    int64_t full = (in - 1) * st[i] + op[i] + (k[2 + i] - 1) * dl[i] + 1, out = nos >= 0 ? os[nos - 2 + i] : in * st[i];
    int64_t tot = full - out;
    if (tot < 0 && !same)
      return ox_fail(c, HARP_E_UNSUPPORTED, "output_shape %" PRId64 " beyond the %" PRId64 " the kernel reaches (give output_padding)", out, full);
    if (tot < 0) tot = 0;
    pads[i] = !strcmp(ap, "SAME_UPPER") ? tot / 2 : tot - tot / 2;
    pads[2 + i] = tot - pads[i];
  }
  return HARP_OK;
}

OP(ConvTranspose) {
  hg_val x = ox_tensor(c, 0);
  if (x < 0) return c->e->code;
  ox_val *wv = ox_in(c, 1, NULL);
  int xr = ox_rank_of(c, x);
  if (xr == 5 || xr == 3) return ox_conv_transpose3d(c, x, wv, xr - 2); /* 3-D, and 1-D as 3-D (onnx_conv3d.c) */
  if (!wv || wv->v > 0 || !wv->has_t || wv->t.dtype != TINY_FP32 || wv->t.rank != 4)
    return ox_needs_data(c, wv), ox_fail(c, HARP_E_UNSUPPORTED, "the weight must be a float32 constant of rank 4 (2-D ConvTranspose)");
  const fe_shape xs = *ox_shape_of(c, x);
  if (xs.rank != 4) return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "the input must have rank 4 (N, C, H, W), got %d", xs.rank);
  char ap[16];
  int64_t group, v[8], st[2] = {1, 1}, dl[2] = {1, 1}, pads[4] = {0}, op[2] = {0}, ks[8];
  int n;
  if (ox_attr_int(c, "group", 1, &group) || ox_attr_str(c, "auto_pad", "NOTSET", ap, sizeof ap)) return c->e->code;
  if (strcmp(ap, "NOTSET") && strcmp(ap, "SAME_UPPER") && strcmp(ap, "SAME_LOWER") && strcmp(ap, "VALID"))
    return ox_fail(c, HARP_E_INVALID_ARG, "auto_pad \"%s\" (expected NOTSET, SAME_UPPER, SAME_LOWER or VALID)", ap);
  const int64_t *k = wv->t.shape;
  int64_t cin;
  if (known(c, xs.d[1], "ConvTranspose", &cin)) return c->e->code;
  if (group < 1 || k[0] != cin || cin % group)
    return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "the weight's %" PRId64 " input channels do not match the input's %" PRId64 " in %" PRId64 " groups",
                   k[0], cin, group);
  if (ox_attr_ints(c, "kernel_shape", ks, 8, &n)) return c->e->code;
  if (n >= 0 && (n != 2 || ks[0] != k[2] || ks[1] != k[3])) return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "kernel_shape does not match the weight");
  struct { const char *name; int64_t *to; int cnt; } at[] = {{"strides", st, 2}, {"dilations", dl, 2}, {"pads", pads, 4}, {"output_padding", op, 2}};
  for (int i = 0; i < 4; i++) {
    if (ox_attr_ints(c, at[i].name, v, 8, &n)) return c->e->code;
    if (n < 0) continue;
    if (n != at[i].cnt) return ox_fail(c, HARP_E_INVALID_ARG, "%s must have %d values, got %d", at[i].name, at[i].cnt, n);
    memcpy(at[i].to, v, sizeof *v * (size_t)n);
  }
  if (transpose_pads(c, &xs, k, st, dl, op, ap, pads)) return c->e->code;
  hg_conv2d_opts o = {.groups = group, .stride = {1, 1}, .dilation = {dl[0], dl[1]}};
  for (int i = 0; i < 2; i++) {
    if (st[i] < 1 || dl[i] < 1 || st[i] > 64 || dl[i] > 64) return ox_fail(c, HARP_E_INVALID_ARG, "strides and dilations must be 1 to 64");
    if (op[i] < 0 || (op[i] >= st[i] && op[i] >= dl[i])) return ox_fail(c, HARP_E_INVALID_ARG, "output_padding %" PRId64 " is out of range", op[i]);
    int64_t edge = (k[2 + i] - 1) * dl[i];
    o.pad[2 * i] = edge - pads[i], o.pad[2 * i + 1] = edge - pads[2 + i] + op[i];
    if (pads[i] < 0 || pads[2 + i] < 0 || o.pad[2 * i] < 0 || o.pad[2 * i + 1] < 0)
      return ox_fail(c, HARP_E_UNSUPPORTED, "pads beyond the kernel's reach ((kernel - 1) * dilation)");
  }
  /* strided, dilation 1, every phase with a tap: sub-pixel convolutions */
  if ((st[0] > 1 || st[1] > 1) && dl[0] == 1 && dl[1] == 1 && k[2] >= st[0] && k[3] >= st[1])
    return transpose_subpixel(c, x, &xs, &wv->t, group, st, op, pads);
  if (st[0] > 1 || st[1] > 1) { /* zeros between the elements: [.., H, 1, W, 1] padded, merged, the tail cut */
    const fe_dim *one = I(c, 1), *H = fe_dim_mul(c->A, xs.d[2], I(c, st[0])), *W = fe_dim_mul(c->A, xs.d[3], I(c, st[1]));
    if (!H || !W) return ox_fail(c, HARP_E_LIMIT, "the size expression is too large");
    hg_val u = fe_reshape(c->g, x, &(fe_shape){.rank = 6, .d = {xs.d[0], xs.d[1], xs.d[2], one, xs.d[3], one}});
    int64_t lo[6] = {0}, hi[6] = {0, 0, 0, st[0] - 1, 0, st[1] - 1};
    u = fe_reshape(c->g, hg_pad(c->g, u, lo, hi, 6, 0), &(fe_shape){.rank = 4, .d = {xs.d[0], xs.d[1], H, W}});
    int ax[2] = {2, 3};
    int64_t s0[2] = {0, 0}, e0[2] = {-(st[0] - 1), -(st[1] - 1)};
    for (int i = 0; i < 2; i++)
      if (st[i] == 1) e0[i] = INT64_MAX;
    /* + 0: a compute node, so the zero-inserted input is a region of its own
     * and the conv reads a plain buffer (the conv template takes it; read
     * through the views it would be generic loops with a modulo per load) */
    x = hg_add(c->g, hg_slice(c->g, u, 2, ax, s0, e0, NULL), K(c, 0));
    if (ox_check(c, x)) return c->e->code;
  }
  ut_tensor wt;
  if (flip_weight(c, &wv->t, group, &wt)) return c->e->code;
  hg_val w = ox_weight(c, "weight", &wt);
  if (w < 0) return c->e->code;
  if (c->node->n_input > 2 && c->node->input[2][0] && (o.bias = ox_tensor(c, 2)) < 0) return c->e->code;
  return ox_def(c, 0, hg_conv2d(c->g, x, w, &o));
}

/* ---- Col2Im: the sum over the kernel's taps of the blocks placed at their positions ---------- */
/* input [N, C * K, L] (K = prod(block), L the block positions, row-major
 * over out[d] = (image + pads - (block - 1) dilation - 1) / stride + 1):
 * tap k's [N, C, out...] gets strides - 1 zeros between its elements, is
 * padded to k's offset in the padded image, summed, and the pads cut. */
#define OX_MAX_COL2IM_TAPS 256
OP(Col2Im) {
  hg_graph *g = c->g;
  hg_val x = ox_tensor(c, 0);
  int64_t img[6], blk[6], dil[6], st[6], pads[12], v[12], in[3];
  int ni, nb, n;
  if (x < 0 || ox_const_ints(c, 1, "image_shape", img, 6, &ni) || ox_const_ints(c, 2, "block_shape", blk, 6, &nb)) return c->e->code;
  if (ni != nb || ni < 1 || ni > 5) return ox_fail(c, HARP_E_UNSUPPORTED, "image_shape and block_shape of %d and %d values (harp takes 1 to 5 spatial dims)", ni, nb);
  const fe_shape xs = *ox_shape_of(c, x);
  if (xs.rank != 3) return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "the input must be [N, C * prod(block_shape), L], got rank %d", xs.rank);
  for (int i = 1; i < 3; i++)
    if (known(c, xs.d[i], "Col2Im", &in[i])) return c->e->code;
  int sp = ni;
  for (int i = 0; i < sp; i++) dil[i] = st[i] = 1, pads[i] = pads[sp + i] = 0;
  struct { const char *name; int64_t *to; int cnt; } at[] = {{"dilations", dil, sp}, {"strides", st, sp}, {"pads", pads, 2 * sp}};
  for (int i = 0; i < 3; i++) {
    if (ox_attr_ints(c, at[i].name, v, 12, &n)) return c->e->code;
    if (n < 0) continue;
    if (n != at[i].cnt) return ox_fail(c, HARP_E_INVALID_ARG, "%s must have %d values, got %d", at[i].name, at[i].cnt, n);
    memcpy(at[i].to, v, sizeof *v * (size_t)n);
  }
  int64_t K = 1, L = 1, out[6], full[6];
  for (int i = 0; i < sp; i++) {
    if (img[i] < 1 || blk[i] < 1 || dil[i] < 1 || st[i] < 1 || pads[i] < 0 || pads[sp + i] < 0 || img[i] > OX_MAX_DIM || blk[i] > 4096 ||
        dil[i] > 4096 || st[i] > 4096 || pads[i] > OX_MAX_DIM || pads[sp + i] > OX_MAX_DIM)
      return ox_fail(c, HARP_E_INVALID_ARG, "image_shape, block_shape, dilations and strides must be >= 1 and pads >= 0");
    full[i] = img[i] + pads[i] + pads[sp + i];
    int64_t span = full[i] - (blk[i] - 1) * dil[i] - 1;
    if (span < 0) return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "the block is larger than the padded image along spatial dim %d", i);
    out[i] = span / st[i] + 1, K *= blk[i], L *= out[i];
  }
  if (K > OX_MAX_COL2IM_TAPS) return ox_fail(c, HARP_E_UNSUPPORTED, "a block of %" PRId64 " elements (at most %d taps)", K, OX_MAX_COL2IM_TAPS);
  if (in[1] % K || in[2] != L)
    return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "the input [N, %" PRId64 ", %" PRId64 "] is not [N, C * %" PRId64 ", %" PRId64 "]", in[1], in[2], K, L);
  const fe_dim *N = xs.d[0], *C = I(c, in[1] / K);
  fe_shape s4 = {.rank = 3 + sp}; /* [N, C, K, out...] */
  s4.d[0] = N, s4.d[1] = C, s4.d[2] = I(c, K);
  for (int i = 0; i < sp; i++) s4.d[3 + i] = I(c, out[i]);
  hg_val x4 = fe_reshape(g, x, &s4), y = HG_NONE;
  bool strided = false;
  for (int i = 0; i < sp; i++) strided |= st[i] > 1;
  for (int64_t k = 0; k < K; k++) {
    int ax = 2;
    int64_t lo = k, hi = k + 1, off[6], rem = k;
    for (int i = sp - 1; i >= 0; i--) off[i] = rem % blk[i] * dil[i], rem /= blk[i];
    fe_shape t = {.rank = 2 + sp};
    t.d[0] = N, t.d[1] = C;
    for (int i = 0; i < sp; i++) t.d[2 + i] = I(c, out[i]);
    hg_val tap = fe_reshape(g, hg_slice(g, x4, 1, &ax, &lo, &hi, NULL), &t);
    int64_t ext[6];
    for (int i = 0; i < sp; i++) ext[i] = (out[i] - 1) * st[i] + 1;
    if (strided) { /* [N, C, o, 1, ...] padded to the strides, merged, the tail cut */
      fe_shape u = {.rank = 2 + 2 * sp}, m = t;
      int64_t plo[12] = {0}, phi[12] = {0}, z[6] = {0};
      int axes[6];
      u.d[0] = N, u.d[1] = C;
      for (int i = 0; i < sp; i++) {
        u.d[2 + 2 * i] = I(c, out[i]), u.d[3 + 2 * i] = I(c, 1), phi[3 + 2 * i] = st[i] - 1;
        m.d[2 + i] = I(c, out[i] * st[i]), axes[i] = 2 + i;
      }
      tap = fe_reshape(g, hg_pad(g, fe_reshape(g, tap, &u), plo, phi, u.rank, 0), &m);
      tap = hg_slice(g, tap, sp, axes, z, ext, NULL);
    }
    int64_t plo[8] = {0}, phi[8] = {0};
    for (int i = 0; i < sp; i++) plo[2 + i] = off[i], phi[2 + i] = full[i] - off[i] - ext[i];
    tap = hg_pad(g, tap, plo, phi, 2 + sp, 0);
    y = y == HG_NONE ? tap : hg_add(g, y, tap);
  }
  int axes[6];
  int64_t a[6], b[6];
  for (int i = 0; i < sp; i++) axes[i] = 2 + i, a[i] = pads[i], b[i] = pads[i] + img[i];
  return ox_def(c, 0, hg_slice(g, y, sp, axes, a, b, NULL));
}

/* ---- Einsum: one or two operands, as sums, a permute and a matmul ------------------------ */
/* A term's letters, at most TINY_MAX_RANK, each once (no "..." and no diagonals). */
static harp_status einsum_term(ox_ctx *c, const char *t, int len, char *out, int *n) {
  *n = 0;
  for (int i = 0; i < len; i++) {
    char ch = t[i];
    if (ch == ' ') continue;
    if (ch == '.') return ox_fail(c, HARP_E_UNSUPPORTED, "an ellipsis (...) in the equation");
    if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z'))) return ox_fail(c, HARP_E_INVALID_ARG, "'%c' in the equation", ch);
    if (memchr(out, ch, (size_t)*n)) return ox_fail(c, HARP_E_UNSUPPORTED, "the repeated index '%c' (a diagonal) in one term", ch);
    if (*n == TINY_MAX_RANK) return ox_fail(c, HARP_E_LIMIT, "a term of more than %d indices", TINY_MAX_RANK);
    out[(*n)++] = ch;
  }
  return HARP_OK;
}

/* x (letters l, n of them) summed over the letters not in keep, kept in order */
static hg_val einsum_sum(ox_ctx *c, hg_val x, char *l, int *n, const char *keep, int nk) {
  int ax[TINY_MAX_RANK], na = 0, m = 0;
  for (int i = 0; i < *n; i++) {
    if (memchr(keep, l[i], (size_t)nk)) l[m++] = l[i];
    else ax[na++] = i;
  }
  *n = m;
  return na ? hg_reduce(c->g, HG_OP_SUM, x, ax, na, false) : x;
}

/* the permutation of x's letters `from` into `to` (same letters) */
static hg_val einsum_perm(ox_ctx *c, hg_val x, const char *from, const char *to, int n) {
  int perm[TINY_MAX_RANK];
  bool id = true;
  for (int i = 0; i < n; i++) {
    perm[i] = (int)((const char *)memchr(from, to[i], (size_t)n) - from);
    id &= perm[i] == i;
  }
  return id ? x : hg_permute(c->g, x, perm, n);
}

/* the product of x's dims [lo, hi) (1 when empty) */
static const fe_dim *dims_prod(ox_ctx *c, hg_val x, int lo, int hi) {
  const fe_shape *s = ox_shape_of(c, x);
  const fe_dim *p = I(c, 1);
  for (int i = lo; i < hi && p; i++) p = fe_dim_mul(c->A, p, s->d[i]);
  return p;
}

OP(Einsum) {
  char eq[256];
  if (ox_attr_str(c, "equation", "", eq, sizeof eq)) return c->e->code;
  const char *arrow = strstr(eq, "->"), *comma = strchr(eq, ',');
  int nin = (int)c->node->n_input;
  if (!arrow) return ox_fail(c, HARP_E_UNSUPPORTED, "an equation without \"->\" (implicit output)");
  if (nin < 1 || nin > 2 || (nin == 2) != (comma && comma < arrow))
    return ox_fail(c, HARP_E_UNSUPPORTED, "Einsum of %d operands (harp takes one or two)", nin);
  char la[TINY_MAX_RANK], lb[TINY_MAX_RANK], lo[TINY_MAX_RANK];
  int na, nb = 0, no;
  const char *a_end = nin == 2 ? comma : arrow;
  if (einsum_term(c, eq, (int)(a_end - eq), la, &na) ||
      (nin == 2 && einsum_term(c, comma + 1, (int)(arrow - comma - 1), lb, &nb)) ||
      einsum_term(c, arrow + 2, (int)strlen(arrow + 2), lo, &no))
    return c->e->code;
  hg_val a = ox_tensor(c, 0), b = nin == 2 && a > 0 ? ox_tensor(c, 1) : HG_NONE;
  if (a < 0 || b < 0) return c->e->code;
  if (ox_rank_of(c, a) != na || (nin == 2 && ox_rank_of(c, b) != nb))
    return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "the equation's terms do not match the inputs' ranks");
  for (int i = 0; i < no; i++)
    if (!memchr(la, lo[i], (size_t)na) && !memchr(lb, lo[i], (size_t)nb))
      return ox_fail(c, HARP_E_INVALID_ARG, "the output index '%c' is in no input", lo[i]);
  /* a letter only one operand has and the output lacks is summed there first */
  char ka[2 * TINY_MAX_RANK], kb[2 * TINY_MAX_RANK];
  memcpy(ka, lo, (size_t)no), memcpy(ka + no, lb, (size_t)nb);
  memcpy(kb, lo, (size_t)no), memcpy(kb + no, la, (size_t)na);
  int nka = no + nb, nkb = no + na;
  a = einsum_sum(c, a, la, &na, ka, nka);
  if (nin == 1) return ox_def(c, 0, a > 0 ? einsum_perm(c, a, la, lo, na) : a);
  b = einsum_sum(c, b, lb, &nb, kb, nkb);
  if (a < 0 || b < 0) return ox_check(c, -1);
  /* batch: in both and the output; contracted: in both, not the output;
   * free: in one and the output.  a -> [batch, free_a, contr] as [.., M, K],
   * b -> [batch, contr, free_b] as [.., K, N], matmul, then the output order */
  char bt[TINY_MAX_RANK], ct[TINY_MAX_RANK], fa[TINY_MAX_RANK], fb[TINY_MAX_RANK];
  int nbt = 0, nct = 0, nfa = 0, nfb = 0;
  for (int i = 0; i < na; i++) {
    bool inb = memchr(lb, la[i], (size_t)nb), ino = memchr(lo, la[i], (size_t)no);
    if (inb && ino) bt[nbt++] = la[i];
    else if (inb) ct[nct++] = la[i];
    else fa[nfa++] = la[i];
  }
  for (int i = 0; i < nb; i++)
    if (!memchr(la, lb[i], (size_t)na)) fb[nfb++] = lb[i];
  char pa[TINY_MAX_RANK], pb[TINY_MAX_RANK], pm[TINY_MAX_RANK];
  memcpy(pa, bt, (size_t)nbt), memcpy(pa + nbt, fa, (size_t)nfa), memcpy(pa + nbt + nfa, ct, (size_t)nct);
  memcpy(pb, bt, (size_t)nbt), memcpy(pb + nbt, ct, (size_t)nct), memcpy(pb + nbt + nct, fb, (size_t)nfb);
  memcpy(pm, bt, (size_t)nbt), memcpy(pm + nbt, fa, (size_t)nfa), memcpy(pm + nbt + nfa, fb, (size_t)nfb);
  a = einsum_perm(c, a, la, pa, na), b = einsum_perm(c, b, lb, pb, nb);
  if (ox_check(c, a) || ox_check(c, b)) return c->e->code;
  fe_shape sa = *ox_shape_of(c, a), sb = *ox_shape_of(c, b), mm = {.rank = nbt + 2}, ma, mb, out = {.rank = nbt + nfa + nfb};
  for (int i = 0; i < nbt; i++)
    if (fe_dim_cmp(sa.d[i], sb.d[i]) != FE_SAME)
      return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "index '%c' is %s in one operand and %s in the other", bt[i], sa.d[i]->text,
                     sb.d[i]->text);
  for (int i = 0; i < nct; i++)
    if (fe_dim_cmp(sa.d[nbt + nfa + i], sb.d[nbt + i]) != FE_SAME)
      return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "index '%c' is %s in one operand and %s in the other", ct[i],
                     sa.d[nbt + nfa + i]->text, sb.d[nbt + i]->text);
  for (int i = 0; i < nbt; i++) mm.d[i] = sa.d[i];
  ma = mm, mb = mm;
  ma.d[nbt] = dims_prod(c, a, nbt, nbt + nfa), ma.d[nbt + 1] = dims_prod(c, a, nbt + nfa, na);
  mb.d[nbt] = dims_prod(c, b, nbt, nbt + nct), mb.d[nbt + 1] = dims_prod(c, b, nbt + nct, nb);
  if (!ma.d[nbt] || !ma.d[nbt + 1] || !mb.d[nbt] || !mb.d[nbt + 1]) return ox_fail(c, HARP_E_LIMIT, "the size expression is too large");
  for (int i = 0; i < nbt + nfa; i++) out.d[i] = sa.d[i];
  for (int i = 0; i < nfb; i++) out.d[nbt + nfa + i] = sb.d[nbt + nct + i];
  hg_val y = hg_matmul(c->g, fe_reshape(c->g, a, &ma), fe_reshape(c->g, b, &mb));
  y = fe_reshape(c->g, y, &out);
  if (ox_check(c, y)) return c->e->code;
  return ox_def(c, 0, einsum_perm(c, y, pm, lo, out.rank));
}

/* ---- dispatch ------------------------------------------------------------------------- */
static const struct {
  const char *name;
  ox_op_fn fn;
} ops[] = {
#define E(n) {#n, op_##n}
    E(ArgMax), E(ArgMin), E(Col2Im), E(ConvTranspose), E(DepthToSpace), E(Einsum), E(GatherElements), E(Range), E(ReduceL1), E(ReduceL2),
    E(ReduceLogSum), E(ReduceLogSumExp), E(ReduceProd), E(ReduceSumSquare), E(SpaceToDepth), E(Tile), E(Trilu),
#undef E
};

ox_op_fn ox_find_more(const char *op) {
  for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
    if (!strcmp(ops[i].name, op)) return ops[i].fn;
  return NULL;
}
