/* onnx_fold_move.c — the constant evaluator's movement ops (onnx_fold.c):
 * Identity, Reshape, Flatten, Squeeze, Unsqueeze, Concat, Gather, Slice
 * (negative steps too), Transpose, Expand, Tile, Split, Shape and Size of
 * known values.  Each computes the result's shape and, for every result
 * element, which input element it is; fv_pick copies them (dims or tensor
 * elements alike).  A target shape that is symbolic is declined (the op's
 * mapping builds it); an index that is symbolic fails naming the graph
 * input it depends on.
 * Needs: onnx_fold.c.  Gives: ox_fold_find_move. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_fold.h"

/* row-major strides of shape */
static void strides(int r, const int64_t *shape, int64_t *st) {
  for (int i = r - 1, s = 1; i >= 0; i--) st[i] = s, s *= (int)shape[i];
}

/* src[] for `out` positions of shape (NULL on no memory: error set). */
static int64_t *new_src(ox_ctx *c, int r, const int64_t *shape, int64_t *n, int64_t limit) {
  *n = fv_count_of(r, shape, limit);
  if (*n < 0) return NULL;
  int64_t *s = ut_xmalloc(sizeof *s * (size_t)(*n + 1));
  if (!s) ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
  return s;
}

static int64_t limit_of(const ox_val *x) { return x->has_i ? OX_MAX_INT_CONST : OX_MAX_FOLD; }

/* Output 0 as x with element k at src[k] (src freed). */
static int emit(ox_ctx *c, ox_val *x, int64_t *src, int r, const int64_t *shape) {
  int rr = fv_pick(c, 0, &x, NULL, src, r, shape);
  free(src);
  return rr;
}

/* Integer input i (optional: *n = -1 when absent) as a target shape or
 * axes: FOLD_DECLINE when symbolic. */
static int shape_in(ox_ctx *c, ox_val *const *x, int nin, int i, int64_t *out, int *n) {
  *n = -1;
  if (i >= nin || !x[i]) return FOLD_DONE;
  if (fv_float(x[i]) || fv_count(x[i]) > TINY_MAX_RANK) return FOLD_DECLINE;
  for (int64_t k = 0; k < fv_count(x[i]); k++)
    if (!fe_dim_is_int(fv_dim(c, x[i], k), &out[k])) return FOLD_DECLINE;
  *n = (int)fv_count(x[i]);
  return FOLD_DONE;
}

static int f_identity(ox_ctx *c, ox_val *const *x, int n) {
  (void)n;
  return x[0] ? fv_same(c, 0, x[0], fv_rank(x[0]), fv_shape(x[0])) : FOLD_DECLINE;
}

/* Reshape: 0 copies the input's dim (unless allowzero), -1 is inferred. */
static int f_reshape(ox_ctx *c, ox_val *const *x, int n) {
  int64_t to[TINY_MAX_RANK], az, prod = 1;
  int r, infer = -1, st = FOLD_DONE;
  if (!x[0]) return ox_fail(c, HARP_E_ARITY, "input 0 is required"), FOLD_FAIL;
  if (c->opset < 5 ? ox_attr_ints(c, "shape", to, TINY_MAX_RANK, &r) != HARP_OK : (st = shape_in(c, x, n, 1, to, &r)) == FOLD_FAIL)
    return FOLD_FAIL;
  if (c->opset >= 5 && st == FOLD_DECLINE) return FOLD_DECLINE;
  if (r < 0) return ox_fail(c, HARP_E_INVALID_ARG, "the shape is required"), FOLD_FAIL;
  if (ox_attr_int(c, "allowzero", 0, &az)) return FOLD_FAIL;
  for (int i = 0; i < r; i++) {
    if (to[i] == 0 && !az) {
      if (i >= fv_rank(x[0])) return ox_fail(c, HARP_E_INVALID_ARG, "shape[%d] = 0 copies a dim the input (rank %d) lacks", i, fv_rank(x[0])), FOLD_FAIL;
      to[i] = fv_shape(x[0])[i];
    }
    if (to[i] < -1 || (to[i] == -1 && infer >= 0) || (to[i] >= 0 && !ut_mul_ok(prod, to[i], &prod)))
      return ox_fail(c, HARP_E_INVALID_ARG, "reshape to an invalid shape (dim %d is %" PRId64 ")", i, to[i]), FOLD_FAIL;
    if (to[i] == -1) infer = i;
  }
  int64_t cnt = fv_count(x[0]);
  if (infer >= 0) to[infer] = prod ? cnt / prod : 0, prod *= to[infer];
  if (prod != cnt)
    return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "reshape of %" PRId64 " elements to %" PRId64, cnt, prod), FOLD_FAIL;
  return fv_same(c, 0, x[0], r, to);
}

static int f_flatten(ox_ctx *c, ox_val *const *x, int n) {
  (void)n;
  int64_t a, to[2] = {1, 1};
  int r = fv_rank(x[0]);
  if (ox_attr_int(c, "axis", 1, &a)) return FOLD_FAIL;
  if (a < -r || a > r) return ox_fail(c, HARP_E_INVALID_ARG, "axis %" PRId64 " is out of range for rank %d", a, r), FOLD_FAIL;
  for (int i = 0; i < r; i++) to[i < (a < 0 ? a + r : a) ? 0 : 1] *= fv_shape(x[0])[i];
  return fv_same(c, 0, x[0], 2, to);
}

static int squeeze(ox_ctx *c, ox_val *x, bool un) {
  fe_shape in = {.rank = fv_rank(x)}, out;
  for (int i = 0; i < in.rank; i++)
    if (!(in.d[i] = fe_dim_int(c->A, fv_shape(x)[i]))) return ox_fail(c, HARP_E_NO_MEMORY, "out of memory"), FOLD_FAIL;
  if (ox_squeeze_shape(c, &in, un, &out)) return FOLD_FAIL;
  int64_t shape[TINY_MAX_RANK];
  for (int i = 0; i < out.rank; i++) fe_dim_is_int(out.d[i], &shape[i]);
  return fv_same(c, 0, x, out.rank, shape);
}
static int f_squeeze(ox_ctx *c, ox_val *const *x, int n) { return (void)n, squeeze(c, x[0], false); }
static int f_unsqueeze(ox_ctx *c, ox_val *const *x, int n) { return (void)n, squeeze(c, x[0], true); }

static harp_status norm_axis(ox_ctx *c, int64_t a, int r, int *out) { return ox_norm_axis(c, a, r, out); }

static int f_concat(ox_ctx *c, ox_val *const *x, int n) {
  int64_t a;
  int axis;
  if (ox_attr_int(c, "axis", 0, &a)) return FOLD_FAIL;
  for (int i = 0; i < n; i++)
    if (!x[i]) return ox_fail(c, HARP_E_ARITY, "input %d is empty (Concat has no optional inputs)", i), FOLD_FAIL;
  int r = fv_rank(x[0]);
  if (norm_axis(c, a, r, &axis)) return FOLD_FAIL;
  int64_t shape[TINY_MAX_RANK];
  memcpy(shape, fv_shape(x[0]), sizeof *shape * (size_t)r);
  shape[axis] = 0;
  for (int i = 0; i < n; i++) {
    if (fv_rank(x[i]) != r || x[i]->has_i != x[0]->has_i) return FOLD_DECLINE;
    for (int d = 0; d < r; d++)
      if (d != axis && fv_shape(x[i])[d] != shape[d])
        return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "input %d has size %" PRId64 " on axis %d, input 0 %" PRId64, i, fv_shape(x[i])[d], d,
                       shape[d]), FOLD_FAIL;
    shape[axis] += fv_shape(x[i])[axis];
  }
  int64_t cnt, outer = 1, inner = 1;
  int64_t *src = new_src(c, r, shape, &cnt, limit_of(x[0]));
  int *which = src ? ut_xmalloc(sizeof *which * (size_t)(cnt + 1)) : NULL;
  if (!which) return free(src), c->e->code ? FOLD_FAIL : cnt < 0 ? FOLD_DECLINE : (ox_fail(c, HARP_E_NO_MEMORY, "out of memory"), FOLD_FAIL);
  for (int d = 0; d < axis; d++) outer *= shape[d];
  for (int d = axis + 1; d < r; d++) inner *= shape[d];
  int64_t k = 0;
  for (int64_t o = 0; o < outer; o++)
    for (int i = 0; i < n; i++) {
      int64_t span = fv_shape(x[i])[axis] * inner;
      for (int64_t j = 0; j < span; j++) which[k] = i, src[k++] = o * span + j;
    }
  int rr = fv_pick(c, 0, x, which, src, r, shape);
  free(src);
  free(which);
  return rr;
}

static int f_transpose(ox_ctx *c, ox_val *const *x, int n) {
  (void)n;
  int r = fv_rank(x[0]), np;
  int64_t perm[TINY_MAX_RANK], shape[TINY_MAX_RANK], ist[TINY_MAX_RANK], cnt;
  if (ox_attr_ints(c, "perm", perm, TINY_MAX_RANK, &np)) return FOLD_FAIL;
  bool seen[TINY_MAX_RANK] = {0};
  for (int i = 0; i < r; i++) {
    if (np < 0) perm[i] = r - 1 - i;
    if (np >= 0 && (np != r || perm[i] < 0 || perm[i] >= r || seen[perm[i]]))
      return ox_fail(c, HARP_E_INVALID_PERMUTATION, "perm does not permute the %d axes", r), FOLD_FAIL;
    seen[perm[i]] = true;
    shape[i] = fv_shape(x[0])[perm[i]];
  }
  strides(r, fv_shape(x[0]), ist);
  int64_t *src = new_src(c, r, shape, &cnt, limit_of(x[0]));
  if (!src) return c->e->code ? FOLD_FAIL : FOLD_DECLINE;
  for (int64_t k = 0; k < cnt; k++) {
    int64_t rem = k, j = 0;
    for (int i = r - 1; i >= 0; i--) j += rem % shape[i] * ist[perm[i]], rem /= shape[i];
    src[k] = j;
  }
  return emit(c, x[0], src, r, shape);
}

static int f_gather(ox_ctx *c, ox_val *const *x, int n) {
  if (n < 2 || !x[0] || !x[1]) return ox_fail(c, HARP_E_ARITY, "needs data and indices"), FOLD_FAIL;
  if (fv_float(x[1])) return ox_fail(c, HARP_E_DTYPE_MISMATCH, "indices must be integers"), FOLD_FAIL;
  int64_t a;
  int axis, r = fv_rank(x[0]), q = fv_rank(x[1]);
  if (ox_attr_int(c, "axis", 0, &a) || norm_axis(c, a, r, &axis)) return FOLD_FAIL;
  if (r - 1 + q > TINY_MAX_RANK) return ox_fail(c, HARP_E_LIMIT, "rank above %d", TINY_MAX_RANK), FOLD_FAIL;
  int64_t shape[TINY_MAX_RANK], outer = 1, inner = 1, dim = fv_shape(x[0])[axis], ni = fv_count(x[1]), cnt;
  int o = 0;
  for (int i = 0; i < axis; i++) shape[o++] = fv_shape(x[0])[i], outer *= fv_shape(x[0])[i];
  for (int i = 0; i < q; i++) shape[o++] = fv_shape(x[1])[i];
  for (int i = axis + 1; i < r; i++) shape[o++] = fv_shape(x[0])[i], inner *= fv_shape(x[0])[i];
  int64_t *src = new_src(c, o, shape, &cnt, limit_of(x[0]));
  if (!src) return c->e->code ? FOLD_FAIL : FOLD_DECLINE;
  int64_t k = 0;
  for (int64_t p = 0; p < outer; p++)
    for (int64_t t = 0; t < ni; t++) {
      int64_t j;
      if (ox_known(c, fv_dim(c, x[1], t), "an index", &j)) return free(src), FOLD_FAIL;
      if (j < -dim || j >= dim) return free(src), ox_fail(c, HARP_E_INVALID_ARG, "index %" PRId64 " is out of range for a dim of %" PRId64, j, dim), FOLD_FAIL;
      if (j < 0) j += dim;
      for (int64_t e = 0; e < inner; e++) src[k++] = (p * dim + j) * inner + e;
    }
  return emit(c, x[0], src, o, shape);
}

/* Slice's starts, ends, axes, steps (inputs from opset 10, attributes before). */
static int slice_args(ox_ctx *c, ox_val *const *x, int n, int64_t (*v)[TINY_MAX_RANK], int *ns) {
  static const char *const names[4] = {"starts", "ends", "axes", "steps"};
  int cnt[4] = {-1, -1, -1, -1};
  for (int i = 0; i < 4; i++) {
    if (c->opset < 10) {
      if (i < 3 && ox_attr_ints(c, names[i], v[i], TINY_MAX_RANK, &cnt[i])) return FOLD_FAIL;
    } else if (i + 1 < n && x[i + 1] && fv_ints(c, x[i + 1], names[i], v[i], TINY_MAX_RANK, &cnt[i])) {
      return FOLD_FAIL;
    }
  }
  *ns = cnt[0];
  if (cnt[0] < 0 || cnt[1] != cnt[0] || (cnt[2] >= 0 && cnt[2] != cnt[0]) || (cnt[3] >= 0 && cnt[3] != cnt[0]))
    return ox_fail(c, HARP_E_INVALID_ARG, "starts, ends, axes and steps must have the same length"), FOLD_FAIL;
  for (int i = 0; i < cnt[0]; i++) {
    if (cnt[2] < 0) v[2][i] = i;
    if (cnt[3] < 0) v[3][i] = 1;
    if (v[3][i] == 0) return ox_fail(c, HARP_E_INVALID_ARG, "step 0"), FOLD_FAIL;
  }
  return FOLD_DONE;
}

/* Slice as onnxruntime clamps it: negatives count from the end; a positive
 * step clamps start and end to [0, dim], a negative one to [0, dim - 1]
 * and [-1, dim - 1]. */
static int f_slice(ox_ctx *c, ox_val *const *x, int n) {
  int64_t v[4][TINY_MAX_RANK], lo[TINY_MAX_RANK] = {0}, step[TINY_MAX_RANK], shape[TINY_MAX_RANK], ist[TINY_MAX_RANK], cnt;
  int ns, r = fv_rank(x[0]);
  if (slice_args(c, x, n, v, &ns) != FOLD_DONE) return FOLD_FAIL;
  memcpy(shape, fv_shape(x[0]), sizeof *shape * (size_t)r);
  for (int i = 0; i < r; i++) step[i] = 1;
  bool seen[TINY_MAX_RANK] = {0};
  for (int i = 0; i < ns; i++) {
    int a;
    if (norm_axis(c, v[2][i], r, &a)) return FOLD_FAIL;
    if (seen[a]) return ox_fail(c, HARP_E_INVALID_ARG, "axis %d is sliced twice", a), FOLD_FAIL;
    seen[a] = true;
    int64_t d = fv_shape(x[0])[a], s = v[0][i], e = v[1][i], k = v[3][i];
    if (s < 0) s += d;
    if (e < 0) e += d;
    if (k > 0) {
      s = s < 0 ? 0 : s > d ? d : s;
      e = e < 0 ? 0 : e > d ? d : e;
      shape[a] = e > s ? (e - s + k - 1) / k : 0;
    } else {
      s = s < 0 ? 0 : s > d - 1 ? d - 1 : s;
      e = e < -1 ? -1 : e > d - 1 ? d - 1 : e;
      shape[a] = s > e ? (s - e - k - 1) / -k : 0;
    }
    lo[a] = s, step[a] = k;
  }
  strides(r, fv_shape(x[0]), ist);
  int64_t *src = new_src(c, r, shape, &cnt, limit_of(x[0]));
  if (!src) return c->e->code ? FOLD_FAIL : FOLD_DECLINE;
  for (int64_t k = 0; k < cnt; k++) {
    int64_t rem = k, j = 0;
    for (int i = r - 1; i >= 0; i--) j += (lo[i] + rem % shape[i] * step[i]) * ist[i], rem /= shape[i];
    src[k] = j;
  }
  return emit(c, x[0], src, r, shape);
}

/* Expand (numpy broadcasting of x's shape and the target's) and Tile. */
static int f_expand(ox_ctx *c, ox_val *const *x, int n) {
  int64_t to[TINY_MAX_RANK], shape[TINY_MAX_RANK], ist[TINY_MAX_RANK], cnt;
  int nt, st = shape_in(c, x, n, 1, to, &nt), xr = fv_rank(x[0]);
  if (st != FOLD_DONE) return st;
  if (nt < 0) return ox_fail(c, HARP_E_ARITY, "input 1 (shape) is required"), FOLD_FAIL;
  int r = nt > xr ? nt : xr;
  for (int i = 0; i < r; i++) {
    int xi = i - (r - xr), ti = i - (r - nt);
    int64_t a = xi >= 0 ? fv_shape(x[0])[xi] : 1, b = ti >= 0 ? to[ti] : 1;
    if (a != b && a != 1 && b != 1)
      return ox_fail(c, HARP_E_BROADCAST_MISMATCH, "dim %" PRId64 " does not expand to %" PRId64, a, b), FOLD_FAIL;
    if (b < 0) return ox_fail(c, HARP_E_INVALID_ARG, "shape[%d] is %" PRId64, ti, b), FOLD_FAIL;
    shape[i] = a == 1 ? b : a;
    ist[i] = 0;
  }
  for (int i = r - 1, s = 1; i >= r - xr; i--) { /* x's strides, 0 along a stretched axis */
    int64_t a = fv_shape(x[0])[i - (r - xr)];
    ist[i] = a == 1 ? 0 : s;
    s *= (int)a;
  }
  int64_t *src = new_src(c, r, shape, &cnt, limit_of(x[0]));
  if (!src) return c->e->code ? FOLD_FAIL : FOLD_DECLINE;
  for (int64_t k = 0; k < cnt; k++) {
    int64_t rem = k, j = 0;
    for (int i = r - 1; i >= 0; i--) j += rem % shape[i] * ist[i], rem /= shape[i];
    src[k] = j;
  }
  return emit(c, x[0], src, r, shape);
}

static int f_tile(ox_ctx *c, ox_val *const *x, int n) {
  int64_t rep[TINY_MAX_RANK], shape[TINY_MAX_RANK], ist[TINY_MAX_RANK], cnt;
  int nr, r = fv_rank(x[0]);
  if (n < 2 || !x[1]) return ox_fail(c, HARP_E_ARITY, "input 1 (repeats) is required"), FOLD_FAIL;
  if (fv_ints(c, x[1], "repeats", rep, TINY_MAX_RANK, &nr)) return FOLD_FAIL;
  if (nr != r) return ox_fail(c, HARP_E_INVALID_ARG, "repeats has %d values for rank %d", nr, r), FOLD_FAIL;
  for (int i = 0; i < r; i++) {
    if (rep[i] < 0 || rep[i] > OX_MAX_DIM) return ox_fail(c, HARP_E_INVALID_ARG, "repeats[%d] is %" PRId64, i, rep[i]), FOLD_FAIL;
    if (!ut_mul_ok(fv_shape(x[0])[i], rep[i], &shape[i])) return FOLD_DECLINE;
  }
  strides(r, fv_shape(x[0]), ist);
  int64_t *src = new_src(c, r, shape, &cnt, limit_of(x[0]));
  if (!src) return c->e->code ? FOLD_FAIL : FOLD_DECLINE;
  for (int64_t k = 0; k < cnt; k++) {
    int64_t rem = k, j = 0;
    for (int i = r - 1; i >= 0; i--) j += rem % shape[i] % fv_shape(x[0])[i] * ist[i], rem /= shape[i];
    src[k] = j;
  }
  return emit(c, x[0], src, r, shape);
}

/* Split into the outputs: sizes from input 1 (opset 13) or attribute
 * split, else even parts (the last one smaller). */
static int f_split(ox_ctx *c, ox_val *const *x, int n) {
  int64_t a, sz[64], num;
  int ns = -1, axis, r = fv_rank(x[0]), nout = (int)c->node->n_output;
  if (ox_attr_int(c, "axis", 0, &a) || norm_axis(c, a, r, &axis)) return FOLD_FAIL;
  if (nout < 1 || nout > 64) return FOLD_DECLINE;
  if (c->opset >= 13 && n > 1 && x[1]) {
    if (fv_ints(c, x[1], "split", sz, 64, &ns)) return FOLD_FAIL;
  } else if (ox_attr_ints(c, "split", sz, 64, &ns)) {
    return FOLD_FAIL;
  }
  int64_t dim = fv_shape(x[0])[axis], at = 0;
  if (ns < 0) {
    if (ox_attr_int(c, "num_outputs", nout, &num)) return FOLD_FAIL;
    if (num != nout) return ox_fail(c, HARP_E_INVALID_ARG, "num_outputs does not match the outputs"), FOLD_FAIL;
    for (int i = 0; i < nout; i++) sz[i] = i < nout - 1 ? (dim + nout - 1) / nout : dim - (dim + nout - 1) / nout * (nout - 1);
    ns = nout;
  }
  if (ns != nout) return ox_fail(c, HARP_E_INVALID_ARG, "split has %d sizes for %d outputs", ns, nout), FOLD_FAIL;
  for (int i = 0; i < nout; i++) at += sz[i];
  if (at != dim) return ox_fail(c, HARP_E_INVALID_ARG, "the split sizes add up to %" PRId64 ", not %" PRId64, at, dim), FOLD_FAIL;
  for (int i = 0; i < nout; i++) { /* every part fits, before any is defined */
    int64_t shape[TINY_MAX_RANK];
    memcpy(shape, fv_shape(x[0]), sizeof *shape * (size_t)r);
    shape[axis] = sz[i];
    if (sz[i] < 0) return ox_fail(c, HARP_E_INVALID_ARG, "split size %" PRId64, sz[i]), FOLD_FAIL;
    if (fv_count_of(r, shape, limit_of(x[0])) < 0) return FOLD_DECLINE;
  }
  at = 0;
  for (int i = 0; i < nout; i++) { /* every part, through Slice's index map */
    int64_t shape[TINY_MAX_RANK], ist[TINY_MAX_RANK], cnt;
    memcpy(shape, fv_shape(x[0]), sizeof *shape * (size_t)r);
    shape[axis] = sz[i];
    strides(r, fv_shape(x[0]), ist);
    int64_t *src = new_src(c, r, shape, &cnt, limit_of(x[0]));
    if (!src) return FOLD_FAIL;
    for (int64_t k = 0; k < cnt; k++) {
      int64_t rem = k, j = 0;
      for (int d = r - 1; d >= 0; d--) j += (rem % shape[d] + (d == axis ? at : 0)) * ist[d], rem /= shape[d];
      src[k] = j;
    }
    int rr = fv_pick(c, i, x, NULL, src, r, shape);
    free(src);
    if (rr != FOLD_DONE) return FOLD_FAIL;
    at += sz[i];
  }
  return FOLD_DONE;
}

/* Shape and Size of a known value. */
static int f_shape(ox_ctx *c, ox_val *const *x, int n) {
  (void)n;
  int64_t lo, hi, r = fv_rank(x[0]);
  if (ox_attr_int(c, "start", 0, &lo) || ox_attr_int(c, "end", r, &hi)) return FOLD_FAIL;
  lo = lo < 0 ? lo + r : lo, hi = hi < 0 ? hi + r : hi;
  lo = lo < 0 ? 0 : lo > r ? r : lo, hi = hi < lo ? lo : hi > r ? r : hi;
  int64_t m = hi - lo;
  ox_val *y = ox_def_ints(c, 0, 1, &m, m);
  for (int64_t i = 0; y && i < m; i++)
    if (!(y->iv[i] = fe_dim_int(c->A, fv_shape(x[0])[lo + i]))) return ox_fail(c, HARP_E_NO_MEMORY, "out of memory"), FOLD_FAIL;
  return y ? FOLD_DONE : FOLD_FAIL;
}

static int f_size(ox_ctx *c, ox_val *const *x, int n) {
  (void)n;
  ox_val *y = ox_def_ints(c, 0, 0, NULL, 1);
  if (y && !(y->iv[0] = fe_dim_int(c->A, fv_count(x[0])))) return ox_fail(c, HARP_E_NO_MEMORY, "out of memory"), FOLD_FAIL;
  return y ? FOLD_DONE : FOLD_FAIL;
}

static const struct {
  const char *op;
  ox_fold_fn fn;
} moves[] = {{"Identity", f_identity}, {"Reshape", f_reshape}, {"Flatten", f_flatten}, {"Squeeze", f_squeeze},
             {"Unsqueeze", f_unsqueeze}, {"Concat", f_concat}, {"Gather", f_gather}, {"Slice", f_slice},
             {"Transpose", f_transpose}, {"Expand", f_expand}, {"Tile", f_tile}, {"Split", f_split},
             {"Shape", f_shape}, {"Size", f_size}};

ox_fold_fn ox_fold_find_move(const char *op) {
  for (size_t i = 0; i < sizeof moves / sizeof *moves; i++)
    if (!strcmp(moves[i].op, op)) return moves[i].fn;
  return NULL;
}
