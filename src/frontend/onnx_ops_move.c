/* onnx_ops_move.c — the ONNX movement and shape ops onto the frontend
 * builder: Reshape, Flatten, Transpose, (Un)Squeeze, Shape, Size, Constant,
 * ConstantOfShape, Concat, Slice, Split, Gather, Expand, Shrink, Pad.
 * Integer (shape) values fold at import as onnx_ops.c describes; a
 * ConstantOfShape's shape or a Slice's bounds that are expressions of
 * shape variables (a ShapeSet's) stay symbolic.
 * Needs: onnx_load.c (values, attributes, errors), onnx_ops.c
 * (ox_const_ints, ox_ints_in_or_attr), onnx_fold_fsym.c (ox_dim_nonneg),
 * onnx_qdq.c (ox_qdq_move), the builder.
 * Gives: ox_find_move, ox_squeeze_shape, ox_fill_sym. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "onnx_int.h"

#define OP(name) static harp_status op_##name(ox_ctx *c)

/* ---- movement -------------------------------------------------------------------------- */
/* Output 0 is v, input 0 moved; a quantized activation's integers move
 * with it (onnx_qdq.c's ox_qdq_move). */
static harp_status moved(ox_ctx *c, hg_val v) {
  if (ox_def(c, 0, v)) return c->e->code;
  ox_qdq_move(c);
  return c->e->code;
}

OP(Reshape) {
  bool failed = false;
  ox_val *xv = ox_in(c, 0, &failed), *sv = xv ? ox_in(c, 1, &failed) : NULL;
  if (failed) return c->e->code;
  if (!xv) return ox_fail(c, HARP_E_ARITY, "input 0 is required");
  int64_t allowzero;
  fe_shape to = {0};
  if (c->opset < 5) {
    int64_t v[TINY_MAX_RANK];
    int n;
    if (ox_attr_ints(c, "shape", v, TINY_MAX_RANK, &n)) return c->e->code;
    if (n < 0) return ox_fail(c, HARP_E_INVALID_ARG, "attribute shape is required");
    to.rank = n;
    for (int i = 0; i < n; i++) to.d[i] = fe_dim_int(c->A, v[i]);
  } else {
    if (!sv || !sv->has_i) {
      if (sv) ox_needs_data(c, sv);
      return ox_fail(c, HARP_E_UNSUPPORTED, "the shape (input 1) must be an integer constant or a folded shape computation (a graph input can be fixed at import: --param NAME=FILE)");
    }
    if (sv->in > TINY_MAX_RANK) return ox_fail(c, HARP_E_LIMIT, "the shape has %" PRId64 " dims (at most %d)", sv->in, TINY_MAX_RANK);
    to.rank = (int)sv->in;
    for (int i = 0; i < to.rank; i++) to.d[i] = sv->iv[i];
  }
  if (ox_attr_int(c, "allowzero", 0, &allowzero)) return c->e->code;
  hg_val x = ox_value(c, xv);
  if (x < 0) return c->e->code;
  const fe_shape *s = ox_shape_of(c, x);
  int infer = 0;
  for (int i = 0; i < to.rank; i++) {
    int64_t v;
    if (!fe_dim_is_int(to.d[i], &v)) continue;
    if (v == 0 && !allowzero) {
      if (i >= s->rank) return ox_fail(c, HARP_E_INVALID_ARG, "shape[%d] = 0 copies a dim the input (rank %d) lacks", i, s->rank);
      to.d[i] = s->d[i];
    } else if (v == -1) {
      if (infer++) return ox_fail(c, HARP_E_INVALID_ARG, "the shape has more than one -1");
      to.d[i] = NULL;
    } else if (v < 0) {
      return ox_fail(c, HARP_E_INVALID_ARG, "shape[%d] is %" PRId64, i, v);
    }
  }
  return moved(c, fe_reshape(c->g, x, &to));
}

OP(Flatten) {
  hg_val x = ox_tensor(c, 0);
  if (x < 0) return c->e->code;
  const fe_shape *s = ox_shape_of(c, x);
  int64_t a;
  int axis;
  if (ox_attr_int(c, "axis", 1, &a)) return c->e->code;
  if (a < -s->rank || a > s->rank) return ox_fail(c, HARP_E_INVALID_ARG, "axis %" PRId64 " is out of range for rank %d", a, s->rank);
  axis = (int)(a < 0 ? a + s->rank : a);
  const fe_dim *p = fe_dim_int(c->A, 1), *q = fe_dim_int(c->A, 1);
  for (int i = 0; i < s->rank && p && q; i++) {
    if (i < axis) p = fe_dim_mul(c->A, p, s->d[i]);
    else q = fe_dim_mul(c->A, q, s->d[i]);
  }
  if (!p || !q) return ox_fail(c, HARP_E_LIMIT, "the flattened size expression is too large");
  return moved(c, fe_reshape(c->g, x, &(fe_shape){.rank = 2, .d = {p, q}}));
}

OP(Transpose) {
  hg_val x = ox_tensor(c, 0);
  if (x < 0) return c->e->code;
  int r = ox_rank_of(c, x), perm[TINY_MAX_RANK];
  int64_t v[TINY_MAX_RANK];
  int n;
  if (ox_attr_ints(c, "perm", v, TINY_MAX_RANK, &n)) return c->e->code;
  if (n < 0)
    for (int i = 0; i < r; i++) perm[i] = r - 1 - i;
  else if (n != r)
    return ox_fail(c, HARP_E_INVALID_PERMUTATION, "perm has %d entries for rank %d", n, r);
  else
    for (int i = 0; i < r; i++) {
      if (v[i] < 0 || v[i] >= r) return ox_fail(c, HARP_E_INVALID_PERMUTATION, "perm[%d] = %" PRId64 " is out of range", i, v[i]);
      perm[i] = (int)v[i];
    }
  return moved(c, hg_permute(c->g, x, perm, r));
}

harp_status ox_squeeze_shape(ox_ctx *c, const fe_shape *in, bool un, fe_shape *out) {
  int64_t ax[TINY_MAX_RANK];
  int n, in_rank = in->rank;
  if (c->opset >= 13 ? ox_ints_in_or_attr(c, 1, "axes", ax, TINY_MAX_RANK, &n) : ox_attr_ints(c, "axes", ax, TINY_MAX_RANK, &n))
    return c->e->code;
  bool mark[TINY_MAX_RANK] = {0};
  int out_rank = un ? in_rank + (n < 0 ? 0 : n) : in_rank;
  if (un && n <= 0) return ox_fail(c, HARP_E_INVALID_ARG, "axes are required");
  if (out_rank > TINY_MAX_RANK) return ox_fail(c, HARP_E_LIMIT, "rank above %d", TINY_MAX_RANK);
  for (int i = 0; i < n; i++) {
    int a;
    if (ox_norm_axis(c, ax[i], un ? out_rank : in_rank, &a)) return c->e->code;
    if (mark[a]) return ox_fail(c, HARP_E_INVALID_ARG, "axis %d is repeated", a);
    mark[a] = true;
  }
  out->rank = 0;
  if (un) {
    for (int i = 0, k = 0; i < out_rank; i++) out->d[out->rank++] = mark[i] ? fe_dim_int(c->A, 1) : in->d[k++];
    return HARP_OK;
  }
  for (int i = 0; i < in_rank; i++) {
    bool drop = n < 0 ? fe_dim_is_one(in->d[i]) : mark[i];
    int64_t v = 1;
    char what[48];
    snprintf(what, sizeof what, "the size of axis %d (squeezed)", i);
    if (drop && !fe_dim_is_one(in->d[i]) && ox_known(c, in->d[i], what, &v)) return c->e->code;
    if (drop && v != 1) return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "axis %d has size %" PRId64 ", not 1", i, v);
    if (!drop) out->d[out->rank++] = in->d[i];
  }
  return HARP_OK;
}

static harp_status squeeze(ox_ctx *c, bool un) {
  hg_val x = ox_tensor(c, 0);
  if (x < 0) return c->e->code;
  fe_shape out;
  if (ox_squeeze_shape(c, ox_shape_of(c, x), un, &out)) return c->e->code;
  return moved(c, fe_reshape(c->g, x, &out));
}
OP(Unsqueeze) { return squeeze(c, true); }
OP(Squeeze) { return squeeze(c, false); }

/* [lo, hi) of an axis of n as numpy slices it: negatives count from the
 * end, both clamped to [0, n], hi not below lo. */
static void clamp_range(int64_t *lo, int64_t *hi, int64_t n) {
  if (*lo < 0) *lo += n;
  if (*hi < 0) *hi += n;
  *lo = *lo < 0 ? 0 : *lo > n ? n : *lo;
  *hi = *hi < *lo ? *lo : *hi > n ? n : *hi;
}

OP(Shape) {
  hg_val x = ox_tensor(c, 0);
  if (x < 0) return c->e->code;
  const fe_shape *s = ox_shape_of(c, x);
  int64_t lo, hi;
  if (ox_attr_int(c, "start", 0, &lo) || ox_attr_int(c, "end", s->rank, &hi)) return c->e->code;
  clamp_range(&lo, &hi, s->rank);
  int64_t n = hi - lo;
  ox_val *y = ox_def_ints(c, 0, 1, &n, n);
  if (!y) return c->e->code;
  y->dyn = true; /* what folds from it is shape arithmetic */
  for (int64_t i = 0; i < n; i++) y->iv[i] = s->d[lo + i];
  return HARP_OK;
}

/* the element count, folded like Shape (a symbolic size stays symbolic) */
OP(Size) {
  hg_val x = ox_tensor(c, 0);
  if (x < 0) return c->e->code;
  const fe_shape *s = ox_shape_of(c, x);
  const fe_dim *n = fe_dim_int(c->A, 1);
  for (int i = 0; i < s->rank && n; i++) n = fe_dim_mul(c->A, n, s->d[i]);
  if (!n) return ox_fail(c, HARP_E_LIMIT, "the size expression is too large");
  ox_val *y = ox_def_ints(c, 0, 0, NULL, 1);
  if (!y) return c->e->code;
  y->iv[0] = n;
  y->dyn = true;
  return HARP_OK;
}

OP(Constant) {
  const Onnx__AttributeProto *a = c->node->n_attribute == 1 ? c->node->attribute[0] : NULL;
  if (!a) return ox_fail(c, HARP_E_INVALID_ARG, "a Constant needs exactly one attribute");
  ox_val tmp = {0};
  if (!strcmp(a->name, "value") && a->t) {
    if (ox_decode_tensor(c, a->t, "value", &tmp)) return c->e->code;
  } else if (!strcmp(a->name, "value_float") || !strcmp(a->name, "value_floats")) {
    bool one = !strcmp(a->name, "value_float");
    int64_t n = one ? 1 : (int64_t)a->n_floats;
    if (ut_tensor_alloc(c->e, &tmp.t, TINY_FP32, one ? 0 : 1, &n)) return c->e->code;
    if (one) ((float *)tmp.t.data)[0] = a->f;
    else if (n) memcpy(tmp.t.data, a->floats, sizeof(float) * (size_t)n);
    tmp.has_t = true;
  } else if (!strcmp(a->name, "value_int") || !strcmp(a->name, "value_ints")) {
    bool one = !strcmp(a->name, "value_int");
    int64_t n = one ? 1 : (int64_t)a->n_ints;
    ox_val *y = ox_def_ints(c, 0, one ? 0 : 1, &n, n);
    if (!y) return c->e->code;
    for (int64_t i = 0; i < n; i++)
      if (!(y->iv[i] = fe_dim_int(c->A, one ? a->i : a->ints[i]))) return ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
    return HARP_OK;
  } else {
    return ox_fail(c, HARP_E_UNSUPPORTED, "Constant attribute %s", a->name);
  }
  if (tmp.has_i) {
    ox_val *y = ox_def_ints(c, 0, tmp.irank, tmp.ishape, tmp.in);
    if (!y) return c->e->code;
    memcpy(y->iv, tmp.iv, sizeof *y->iv * (size_t)tmp.in);
    return HARP_OK;
  }
  return ox_def_tensor(c, 0, &tmp.t, tmp.oty ? tmp.oty : OX_FLOAT);
}

hg_val ox_fill_sym(ox_ctx *c, double fill, tiny_dtype dt, const fe_shape *s) {
  return fe_expand(c->g, fe_reshape(c->g, hg_const_typed(c->g, fill, dt), &(fe_shape){.rank = 0}), s);
}

/* A fill of a shape known at run time only (sizes a host op gave), or of
 * expressions of shape variables (a ShapeSet's): the value expanded in the graph. */
static harp_status fill_runtime(ox_ctx *c, ox_val *sv, double fill, int oty) {
  tiny_dtype dt;
  if (sv->irank != 1 || sv->in > TINY_MAX_RANK) return ox_fail(c, HARP_E_INVALID_ARG, "the shape must be 1-D (at most %d values)", TINY_MAX_RANK);
  if (!ox_dtype(oty, &dt)) return ox_fail(c, HARP_E_UNSUPPORTED, "value of type %s", ox_type_name(oty));
  fe_shape s = {.rank = (int)sv->in};
  for (int i = 0; i < s.rank; i++) s.d[i] = sv->iv[i];
  hg_val v = ox_fill_sym(c, fill, dt, &s);
  if (v < 0) return c->e->code;
  if (ox_def(c, 0, v)) return c->e->code;
  ox_val *y = ox_find(c, c->node->output[0]);
  if (y) y->oty = oty;
  return HARP_OK;
}

OP(ConstantOfShape) {
  int64_t shp[TINY_MAX_RANK];
  int n;
  ox_val *sv = ox_in(c, 0, NULL);
  bool sym = false; /* a size of the shape is an expression of shape variables (a ShapeSet's): expanded in the graph */
  for (int64_t i = 0; sv && sv->has_i && !sv->fden && i < sv->in; i++) sym |= !fe_dim_is_int(sv->iv[i], NULL);
  if (sv && (sym || oxf_val_runtime(c, sv))) {
    double fill = 0;
    int oty = OX_FLOAT;
    const Onnx__AttributeProto *a = ox_attr(c, "value");
    ox_val v = {0};
    if (a && a->t) {
      if (ox_decode_tensor(c, a->t, "value", &v)) return c->e->code;
      bool one = ox_const_scalar(&v, &fill);
      oty = v.oty;
      ut_tensor_free(&v.t);
      if (!one) return ox_fail(c, HARP_E_INVALID_ARG, "value must have one element");
    }
    return fill_runtime(c, sv, fill, oty);
  }
  if (ox_const_ints(c, 0, "shape", shp, TINY_MAX_RANK, &n)) return c->e->code;
  int64_t numel = 1;
  for (int i = 0; i < n; i++) {
    if (shp[i] < 0 || shp[i] > OX_MAX_DIM) return ox_fail(c, HARP_E_INVALID_ARG, "shape[%d] is %" PRId64, i, shp[i]);
    numel *= shp[i];
    if (numel > OX_MAX_FILL) return ox_fail(c, HARP_E_LIMIT, "a constant of more than 2^28 elements");
  }
  const Onnx__AttributeProto *a = ox_attr(c, "value");
  ox_val v = {0};
  double fill = 0;
  int oty = OX_FLOAT;
  if (a && a->t) {
    if (ox_decode_tensor(c, a->t, "value", &v)) return c->e->code;
    if (!ox_const_scalar(&v, &fill)) {
      ut_tensor_free(&v.t);
      return ox_fail(c, HARP_E_INVALID_ARG, "value must have one element");
    }
    oty = v.oty;
    ut_tensor_free(&v.t);
  }
  if (oty == OX_INT64 || oty == OX_INT32) {
    ox_val *y = ox_def_ints(c, 0, n, shp, numel);
    if (!y) return c->e->code;
    for (int64_t i = 0; i < numel; i++)
      if (!(y->iv[i] = fe_dim_int(c->A, (int64_t)fill))) return ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
    return HARP_OK;
  }
  tiny_dtype dt;
  if (!ox_dtype(oty, &dt)) return ox_fail(c, HARP_E_UNSUPPORTED, "value of type %s", ox_type_name(oty));
  ut_tensor t;
  if (ut_tensor_alloc(c->e, &t, dt, n, shp)) return c->e->code;
  for (int64_t i = 0; i < numel; i++) ut_tensor_set(&t, i, (float)fill);
  return ox_def_tensor(c, 0, &t, oty);
}

OP(Concat) {
  int64_t a;
  if (ox_attr_int(c, "axis", 0, &a)) return c->e->code;
  int n = (int)c->node->n_input;
  if (n < 1) return ox_fail(c, HARP_E_ARITY, "needs at least one input");
  for (int i = 0; i < n; i++) /* no optional inputs: an empty name is a missing tensor */
    if (!c->node->input[i][0]) return ox_fail(c, HARP_E_ARITY, "input %d is empty (Concat has no optional inputs)", i);
  hg_val *xs = ut_arena_alloc(c->A, sizeof *xs * (size_t)n);
  if (!xs) return ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
  for (int i = 0; i < n; i++)
    if ((xs[i] = ox_tensor(c, i)) < 0) return c->e->code;
  int axis;
  if (ox_norm_axis(c, a, ox_rank_of(c, xs[0]), &axis)) return c->e->code;
  return ox_def(c, 0, n == 1 ? xs[0] : hg_concat(c->g, xs, n, axis));
}

/* Whether optional input i holds an integer that is an expression of sizes. */
static bool sym_input(ox_ctx *c, int i) {
  ox_val *v = i < (int)c->node->n_input && c->node->input[i][0] ? ox_find(c, c->node->input[i]) : NULL;
  for (int64_t k = 0; v && v->has_i && !v->fden && k < v->in; k++)
    if (!fe_dim_is_int(v->iv[k], NULL)) return true;
  return false;
}

/* Bound b of a slice along an axis of size d, as fe_slice takes it (NULL:
 * the end); a bound that is an expression of sizes must lie in [0, d] at
 * every binding (no clamping), else it is needed as a number. */
static harp_status slice_bound(ox_ctx *c, const fe_dim *b, const fe_dim *d, bool end, const fe_dim **out) {
  int64_t v;
  *out = b;
  if (fe_dim_is_int(b, &v)) { /* as the constant path: past the end is the end, before -d the start */
    if (v >= OX_MAX_DIM) *out = end ? NULL : d;
    else if (v <= -OX_MAX_DIM) *out = fe_dim_int(c->A, 0);
    return HARP_OK;
  }
  const fe_dim *room = fe_dim_sub(c->A, d, b);
  if (ox_dim_nonneg(c, b) && room && ox_dim_nonneg(c, room)) return HARP_OK;
  return ox_need_value(c, b, end ? "a slice's end (it may need clamping)" : "a slice's start (it may need clamping)");
}

/* Slice whose starts or ends are expressions of sizes (a ShapeSet's): the
 * bounds stay symbolic (fe_slice), steps positive constants. */
static harp_status slice_sym(ox_ctx *c, ox_val *xv) {
  ox_val *sv = ox_in(c, 1, NULL), *ev = ox_in(c, 2, NULL);
  int64_t ax[TINY_MAX_RANK], sp[TINY_MAX_RANK];
  int na = -1, np = -1, r;
  if (!sv || !ev || !sv->has_i || !ev->has_i || sv->in != ev->in || sv->in > TINY_MAX_RANK)
    return ox_fail(c, HARP_E_INVALID_ARG, "starts and ends must be integers of the same length (at most %d)", TINY_MAX_RANK);
  if (c->node->n_input > 3 && c->node->input[3][0] && ox_const_ints(c, 3, "axes", ax, TINY_MAX_RANK, &na)) return c->e->code;
  if (c->node->n_input > 4 && c->node->input[4][0] && ox_const_ints(c, 4, "steps", sp, TINY_MAX_RANK, &np)) return c->e->code;
  if ((na >= 0 && na != sv->in) || (np >= 0 && np != sv->in)) return ox_fail(c, HARP_E_INVALID_ARG, "starts, ends, axes and steps must have the same length");
  hg_val x = ox_value(c, xv);
  if (x < 0) return c->e->code;
  const fe_shape *s = ox_shape_of(c, x);
  const fe_dim *st[TINY_MAX_RANK] = {0}, *en[TINY_MAX_RANK] = {0};
  int64_t step[TINY_MAX_RANK];
  for (int i = 0; i < s->rank; i++) step[i] = 1;
  for (int i = 0; i < (int)sv->in; i++) {
    if (ox_norm_axis(c, na >= 0 ? ax[i] : i, s->rank, &r)) return c->e->code;
    if (np >= 0 && sp[i] < 1) return ox_need_value(c, fe_dim_is_int(sv->iv[i], NULL) ? ev->iv[i] : sv->iv[i], "a reversed slice's bound");
    step[r] = np >= 0 ? sp[i] : 1;
    if (slice_bound(c, sv->iv[i], s->d[r], false, &st[r]) || slice_bound(c, ev->iv[i], s->d[r], true, &en[r])) return c->e->code;
    const fe_dim *a = st[r], *b = en[r] ? en[r] : s->d[r], *len = NULL;
    int64_t av, bv;
    bool consts = fe_dim_is_int(a, &av) && fe_dim_is_int(b, &bv);
    if (!consts && fe_dim_is_int(a, &av) && av < 0) a = fe_dim_add(c->A, s->d[r], a);
    if (!consts && fe_dim_is_int(b, &bv) && bv < 0) b = fe_dim_add(c->A, s->d[r], b);
    if (!consts && (!a || !b || !(len = fe_dim_sub(c->A, b, a)) || !ox_dim_nonneg(c, len)))
      return ox_need_value(c, fe_dim_is_int(sv->iv[i], NULL) ? ev->iv[i] : sv->iv[i], "a slice's bounds (the end may come before the start)");
  }
  return ox_def(c, 0, fe_slice(c->g, x, st, en, step));
}

OP(Slice) {
  bool failed = false;
  ox_val *xv = ox_in(c, 0, &failed);
  if (failed) return c->e->code;
  if (!xv) return ox_fail(c, HARP_E_ARITY, "input 0 is required");
  int64_t st[TINY_MAX_RANK], en[TINY_MAX_RANK], ax[TINY_MAX_RANK], sp[TINY_MAX_RANK];
  int ns, ne, na = -1, np = -1;
  if (c->opset < 10) {
    if (ox_attr_ints(c, "starts", st, TINY_MAX_RANK, &ns) || ox_attr_ints(c, "ends", en, TINY_MAX_RANK, &ne) ||
        ox_attr_ints(c, "axes", ax, TINY_MAX_RANK, &na))
      return c->e->code;
  } else {
    if (oxf_runtime_inputs(c, 1, 5)) return oxf_host_slice(c); /* bounds known at run time: on the host */
    if (sym_input(c, 1) || sym_input(c, 2)) return slice_sym(c, xv);
    if (ox_const_ints(c, 1, "starts", st, TINY_MAX_RANK, &ns) || ox_const_ints(c, 2, "ends", en, TINY_MAX_RANK, &ne)) return c->e->code;
    if (c->node->n_input > 3 && c->node->input[3][0] && ox_const_ints(c, 3, "axes", ax, TINY_MAX_RANK, &na)) return c->e->code;
    if (c->node->n_input > 4 && c->node->input[4][0] && ox_const_ints(c, 4, "steps", sp, TINY_MAX_RANK, &np)) return c->e->code;
  }
  if (ns < 0 || ne != ns || (na >= 0 && na != ns) || (np >= 0 && np != ns))
    return ox_fail(c, HARP_E_INVALID_ARG, "starts, ends, axes and steps must have the same length");
  for (int i = 0; i < ns; i++) {
    if (na < 0) ax[i] = i;
    if (np < 0) sp[i] = 1;
    if (sp[i] == 0) return ox_fail(c, HARP_E_INVALID_ARG, "step 0");
  }
  hg_val x = ox_value(c, xv);
  if (x < 0) return c->e->code;
  int r = ox_rank_of(c, x), axes[TINY_MAX_RANK], flip[TINY_MAX_RANK], nflip = 0;
  for (int i = 0; i < ns; i++) {
    if (ox_norm_axis(c, ax[i], r, &axes[i])) return c->e->code;
    if (sp[i] < 0) { /* a reverse: the same elements, counted from the end of the flipped axis */
      if (ox_slice_reverse(c, ox_shape_of(c, x)->d[axes[i]], &st[i], &en[i], &sp[i])) return c->e->code;
      flip[nflip++] = axes[i];
      continue;
    }
    /* ends past the dim (INT64_MAX, INT32_MAX...) mean "to the end" */
    int64_t d;
    if (en[i] >= OX_MAX_DIM || (fe_dim_is_int(ox_shape_of(c, x)->d[axes[i]], &d) && en[i] > d)) en[i] = INT64_MAX;
    if (en[i] <= -OX_MAX_DIM) en[i] = 0;
    if (st[i] <= -OX_MAX_DIM) st[i] = 0;
    if (fe_dim_is_int(ox_shape_of(c, x)->d[axes[i]], &d) && st[i] > d) st[i] = d;
  }
  if (nflip) x = hg_flip(c->g, x, flip, nflip);
  return ox_def(c, 0, hg_slice(c->g, x, ns, axes, st, en, sp));
}

OP(Split) {
  hg_val x = ox_tensor(c, 0);
  if (x < 0) return c->e->code;
  const fe_shape *s = ox_shape_of(c, x);
  int64_t a, sz[64], num;
  int n, axis;
  if (ox_attr_int(c, "axis", 0, &a) || ox_norm_axis(c, a, s->rank, &axis)) return c->e->code;
  if (c->opset >= 13 ? ox_ints_in_or_attr(c, 1, "split", sz, 64, &n) : ox_attr_ints(c, "split", sz, 64, &n)) return c->e->code;
  int nout = (int)c->node->n_output;
  if (nout > 64) return ox_fail(c, HARP_E_LIMIT, "more than 64 outputs");
  int64_t dim;
  if (n < 0) {
    if (ox_known(c, s->d[axis], "the size split evenly", &dim)) return c->e->code;
    if (ox_attr_int(c, "num_outputs", nout, &num)) return c->e->code;
    if (num != nout || nout < 1) return ox_fail(c, HARP_E_INVALID_ARG, "num_outputs does not match the outputs");
    int64_t each = (dim + nout - 1) / nout;
    for (int i = 0; i < nout; i++) sz[i] = i < nout - 1 ? each : dim - each * (nout - 1);
    n = nout;
  }
  if (n != nout) return ox_fail(c, HARP_E_INVALID_ARG, "split has %d sizes for %d outputs", n, nout);
  int64_t at = 0;
  for (int i = 0; i < nout; i++) {
    if (sz[i] < 0) return ox_fail(c, HARP_E_INVALID_ARG, "split size %" PRId64, sz[i]);
    int64_t lo = at, hi = at + sz[i], one = 1;
    at = hi;
    if (ox_def(c, i, hg_slice(c->g, x, 1, &axis, &lo, &hi, &one))) return c->e->code;
  }
  return HARP_OK;
}

/* Row j (< 0: counted back) of x along axis, a symbolic size d there: the
 * slice [d + j, d + j + 1), its bounds expressions of the shape symbols. */
static hg_val back_row(ox_ctx *c, hg_val x, int axis, int64_t j) {
  const fe_shape *xs = ox_shape_of(c, x);
  const fe_dim *st[TINY_MAX_RANK] = {0}, *en[TINY_MAX_RANK] = {0};
  int64_t step[TINY_MAX_RANK];
  for (int i = 0; i < xs->rank; i++) step[i] = 1;
  st[axis] = fe_dim_add(c->A, xs->d[axis], fe_dim_int(c->A, j));
  en[axis] = fe_dim_add(c->A, xs->d[axis], fe_dim_int(c->A, j + 1));
  if (!st[axis] || !en[axis]) return ox_fail(c, HARP_E_NO_MEMORY, "out of memory"), -1;
  return fe_slice(c->g, x, st, en, step);
}

/* Gather: folded on integers; a constant scalar index is a slice; the rest
 * (embedding lookups) is torch.gather on broadcast operands. */
OP(Gather) {
  bool failed = false;
  ox_val *xv = ox_in(c, 0, &failed), *iv = xv ? ox_in(c, 1, &failed) : NULL;
  if (failed) return c->e->code;
  if (!xv || !iv) return ox_fail(c, HARP_E_ARITY, "needs data and indices");
  int64_t a;
  if (ox_attr_int(c, "axis", 0, &a)) return c->e->code;
  hg_val x = ox_value(c, xv);
  if (x < 0) return c->e->code;
  const fe_shape xs = *ox_shape_of(c, x);
  int axis;
  if (ox_norm_axis(c, a, xs.rank, &axis)) return c->e->code;
  int64_t j, dim;
  if (iv->has_i && iv->v <= 0 && iv->in == 1 && fe_dim_is_int(iv->iv[0], &j)) {
    bool known = fe_dim_is_int(xs.d[axis], &dim);
    if (j < 0 && known) j += dim;
    if (j < 0 && known) return ox_need_value(c, xs.d[axis], "the axis a negative index counts back on");
    int64_t hi = j + 1, one = 1;
    hg_val s = j >= 0 ? hg_slice(c->g, x, 1, &axis, &j, &hi, &one) : back_row(c, x, axis, j);
    if (s < 0) return ox_check(c, s);
    fe_shape to = xs;
    if (iv->irank == 0) { /* the axis goes */
      for (int i = axis; i + 1 < to.rank; i++) to.d[i] = to.d[i + 1];
      to.rank--;
    } else {
      for (int i = 0; i < to.rank; i++) to.d[i] = i == axis ? fe_dim_int(c->A, 1) : xs.d[i];
      for (int i = 1; i < iv->irank; i++) { /* [1] -> [1, 1, ...] for higher-rank one-element indices */
        if (to.rank >= TINY_MAX_RANK) return ox_fail(c, HARP_E_LIMIT, "rank above %d", TINY_MAX_RANK);
        memmove(&to.d[axis + 1], &to.d[axis], sizeof *to.d * (size_t)(to.rank - axis));
        to.rank++;
      }
    }
    return ox_def(c, 0, fe_reshape(c->g, s, &to));
  }
  hg_val idx = ox_value(c, iv);
  if (idx < 0) return c->e->code;
  if (hg_val_dtype(c->g, idx) != TINY_I32) return ox_fail(c, HARP_E_DTYPE_MISMATCH, "indices must be integers");
  if ((idx = ox_gather_index(c, iv, idx, xs.d[axis])) < 0) return c->e->code;
  const fe_shape is = *ox_shape_of(c, idx);
  /* out[pre, i.., post] = x[pre, idx[i..], post]: the index flattened to
   * [N] and broadcast to [pre, N, post] (computed, not a view: the gather
   * kernel reads a buffer), gathered along the axis, then [pre, I.., post]. */
  const fe_dim *N = fe_dim_int(c->A, 1), *one = N;
  for (int i = 0; i < is.rank && N; i++) N = fe_dim_mul(c->A, N, is.d[i]);
  if (!N) return ox_fail(c, HARP_E_LIMIT, "the index count expression is too large");
  if (xs.rank - 1 + is.rank > TINY_MAX_RANK) return ox_fail(c, HARP_E_LIMIT, "rank above %d", TINY_MAX_RANK);
  fe_shape ir = xs, ie = xs, out = {0};
  for (int i = 0; i < xs.rank; i++) ir.d[i] = i == axis ? N : one;
  ie.d[axis] = N;
  for (int i = 0; i < axis; i++) out.d[out.rank++] = xs.d[i];
  for (int i = 0; i < is.rank; i++) out.d[out.rank++] = is.d[i];
  for (int i = axis + 1; i < xs.rank; i++) out.d[out.rank++] = xs.d[i];
  hg_val flat = fe_reshape(c->g, idx, &(fe_shape){.rank = 1, .d = {N}});
  hg_val ib = fe_expand(c->g, fe_reshape(c->g, flat, &ir), &ie);
  hg_val gv = hg_gather(c->g, x, ib, axis);
  return ox_def(c, 0, fe_reshape(c->g, gv, &out));
}

OP(Expand) {
  hg_val x = ox_tensor(c, 0);
  if (x < 0) return c->e->code;
  ox_val *sv = ox_in(c, 1, NULL);
  if (!sv || !sv->has_i) {
    if (sv) ox_needs_data(c, sv);
    return ox_fail(c, HARP_E_UNSUPPORTED, "the shape (input 1) must be an integer constant (a graph input can be fixed at import: --param NAME=FILE)");
  }
  const fe_shape *s = ox_shape_of(c, x);
  int r = s->rank > sv->in ? s->rank : (int)sv->in;
  if (r > TINY_MAX_RANK) return ox_fail(c, HARP_E_LIMIT, "rank above %d", TINY_MAX_RANK);
  fe_shape to = {.rank = r};
  for (int i = 0; i < r; i++) { /* numpy broadcasting of both shapes */
    int xi = i - (r - s->rank), si = i - (r - (int)sv->in);
    const fe_dim *a = xi >= 0 ? s->d[xi] : NULL, *b = si >= 0 ? sv->iv[si] : NULL;
    to.d[i] = !b || fe_dim_is_one(b) ? (a ? a : b) : b;
  }
  return ox_def(c, 0, fe_expand(c->g, x, &to));
}

/* Pad's wrap mode along one axis: output i reads x[(i - lo) mod n], the
 * input's copies side by side, cut. */
static hg_val pad_wrap(ox_ctx *c, hg_val x, int axis, int64_t lo, int64_t hi) {
  fe_shape s = *ox_shape_of(c, x);
  int64_t n;
  if (ox_known(c, s.d[axis], "the size wrap padding repeats", &n)) return -1;
  if (n < 1) return ox_fail(c, HARP_E_UNSUPPORTED, "wrap padding of an empty axis %d", axis), -1;
  int64_t before = (lo + n - 1) / n, copies = before + 1 + (hi + n - 1) / n;
  if (copies > 64) return ox_fail(c, HARP_E_UNSUPPORTED, "wrap padding of %" PRId64 "/%" PRId64 " along an axis of %" PRId64, lo, hi, n), -1;
  hg_val parts[64];
  for (int64_t k = 0; k < copies; k++) parts[k] = x;
  hg_val t = copies == 1 ? x : hg_concat(c->g, parts, (int)copies, axis);
  int64_t a = before * n - lo, b = a + lo + n + hi, one = 1;
  return hg_slice(c->g, t, 1, &axis, &a, &b, &one);
}

/* Pad's edge and reflect modes along one axis: [border lo | x | border hi],
 * a border being the edge element repeated or the next elements mirrored. */
static hg_val pad_border(ox_ctx *c, hg_val x, int axis, int64_t lo, int64_t hi, bool reflect) {
  fe_shape s = *ox_shape_of(c, x);
  int64_t n;
  if (ox_known(c, s.d[axis], reflect ? "the size reflect padding mirrors" : "the size edge padding repeats", &n)) return -1;
  if (n < 1 || (reflect && (lo >= n || hi >= n))) {
    ox_fail(c, HARP_E_UNSUPPORTED, "%s padding of %" PRId64 "/%" PRId64 " along axis %d of size %" PRId64, reflect ? "reflect" : "edge", lo,
            hi, axis, n);
    return -1;
  }
  hg_val parts[3];
  int np = 0;
  for (int side = 0; side < 2; side++) {
    int64_t k = side ? hi : lo, one = 1;
    if (!k) {
      if (!side) parts[np++] = x;
      continue;
    }
    int64_t a = reflect ? (side ? n - 1 - k : 1) : (side ? n - 1 : 0), b = reflect ? a + k : a + 1;
    hg_val p = hg_slice(c->g, x, 1, &axis, &a, &b, &one);
    if (reflect) {
      p = hg_flip(c->g, p, &axis, 1);
    } else {
      s.d[axis] = fe_dim_int(c->A, k);
      p = fe_expand(c->g, p, &s);
    }
    if (!side) parts[np++] = p, parts[np++] = x;
    else parts[np++] = p;
  }
  return hg_concat(c->g, parts, np, axis);
}

OP(Shrink) {
  double lambd, bias;
  hg_val x = ox_attr_float(c, "lambd", 0.5, &lambd) || ox_attr_float(c, "bias", 0, &bias) ? -1 : ox_tensor(c, 0);
  if (x < 0) return c->e->code;
  hg_val lt = hg_binary(c->g, HG_OP_LT, x, hg_const(c->g, -lambd)), gt = hg_binary(c->g, HG_OP_GT, x, hg_const(c->g, lambd));
  hg_val inner = hg_where(c->g, gt, hg_sub(c->g, x, hg_const(c->g, bias)), hg_const(c->g, 0));
  return ox_def(c, 0, hg_where(c->g, lt, hg_add(c->g, x, hg_const(c->g, bias)), inner));
}

/* Pad's axes input (opset 18): pads[0..*n) name the listed axes (begins,
 * then ends); rewritten in place for all r axes. */
static harp_status pad_axes(ox_ctx *c, int r, int64_t *pads, int *n) {
  int64_t ax[TINY_MAX_RANK], lo[TINY_MAX_RANK] = {0}, hi[TINY_MAX_RANK] = {0};
  int na;
  bool seen[TINY_MAX_RANK] = {0};
  if (ox_const_ints(c, 3, "axes", ax, TINY_MAX_RANK, &na)) return c->e->code;
  if (*n != 2 * na) return ox_fail(c, HARP_E_INVALID_ARG, "pads has %d values for %d axes", *n, na);
  for (int i = 0; i < na; i++) {
    int a;
    if (ox_norm_axis(c, ax[i], r, &a)) return c->e->code;
    if (seen[a]) return ox_fail(c, HARP_E_INVALID_ARG, "axis %d is repeated", a);
    seen[a] = true;
    lo[a] = pads[i], hi[a] = pads[na + i];
  }
  for (int i = 0; i < r; i++) pads[i] = lo[i], pads[r + i] = hi[i];
  *n = 2 * r;
  return HARP_OK;
}

OP(Pad) {
  hg_val x = ox_tensor(c, 0);
  if (x < 0) return c->e->code;
  char mode[16];
  if (ox_attr_str(c, "mode", "constant", mode, sizeof mode)) return c->e->code;
  bool edge = !strcmp(mode, "edge"), reflect = !strcmp(mode, "reflect"), wrap = !strcmp(mode, "wrap");
  if (strcmp(mode, "constant") != 0 && !edge && !reflect && !wrap)
    return ox_fail(c, HARP_E_UNSUPPORTED, "mode \"%s\" (harp pads with constant, edge, reflect and wrap)", mode);
  int r = ox_rank_of(c, x), n;
  int64_t pads[2 * TINY_MAX_RANK];
  double value = 0;
  if (c->opset < 11) {
    if (ox_attr_ints(c, "pads", pads, 2 * TINY_MAX_RANK, &n) || ox_attr_float(c, "value", 0, &value)) return c->e->code;
  } else {
    if (ox_const_ints(c, 1, "pads", pads, 2 * TINY_MAX_RANK, &n)) return c->e->code;
    ox_val *cv = ox_in(c, 2, NULL);
    if (cv && !ox_const_scalar(cv, &value))
      return ox_needs_data(c, cv), ox_fail(c, HARP_E_UNSUPPORTED, "constant_value must be a constant (a graph input can be fixed at import: --param NAME=FILE)");
    if (c->node->n_input > 3 && c->node->input[3][0] && pad_axes(c, r, pads, &n)) return c->e->code;
  }
  if (n != 2 * r) return ox_fail(c, HARP_E_INVALID_ARG, "pads has %d values for rank %d", n, r);
  int64_t lo[TINY_MAX_RANK], hi[TINY_MAX_RANK];
  for (int i = 0; i < r; i++) {
    lo[i] = pads[i], hi[i] = pads[r + i];
    if (lo[i] < 0 || hi[i] < 0) return ox_fail(c, HARP_E_UNSUPPORTED, "negative pads (cropping)");
    if (lo[i] > OX_MAX_DIM || hi[i] > OX_MAX_DIM) return ox_fail(c, HARP_E_LIMIT, "pads too large");
  }
  if (!edge && !reflect && !wrap) return ox_def(c, 0, hg_pad(c->g, x, lo, hi, r, value));
  for (int i = 0; i < r && x > 0; i++)
    if (lo[i] || hi[i]) x = wrap ? pad_wrap(c, x, i, lo[i], hi[i]) : pad_border(c, x, i, lo[i], hi[i], reflect);
  return ox_def(c, 0, x);
}

/* ---- dispatch ------------------------------------------------------------------------- */
static const struct {
  const char *name;
  ox_op_fn fn;
} ops[] = {
#define E(n) {#n, op_##n}
    E(Reshape), E(Flatten), E(Transpose), E(Unsqueeze), E(Squeeze), E(Shape), E(Size), E(Constant), E(ConstantOfShape), E(Concat), E(Slice), E(Split), E(Gather), E(Expand), E(Shrink), E(Pad),
#undef E
};

ox_op_fn ox_find_move(const char *op) {
  for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
    if (!strcmp(ops[i].name, op)) return ops[i].fn;
  return NULL;
}
