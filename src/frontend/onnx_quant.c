/* onnx_quant.c — the ONNX quantization ops: QuantizeLinear, DequantizeLinear
 * (per-tensor, per-axis, blocked; opsets 10-21+), DynamicQuantizeLinear,
 * MatMulInteger, ConvInteger, QLinearMatMul, QLinearConv and com.microsoft's
 * QLinearAdd / QLinearMul.
 *
 * The lowering is exact integer or fp32 math on harp's own ops: a quantized
 * value is widened (int8/uint8 -> fp32, or int32 where the result is an
 * integer), the zero point subtracted, the contraction run, and the result
 * requantized as onnxruntime does it: round(acc * (sa * sb / sy)) + zy, halves
 * to even, saturated to the type's range.  DequantizeLinear of a constant (a
 * QDQ model's weights and int32 biases) is folded here into an fp32 constant,
 * so a QDQ model's contractions meet fp32 weights and take harp's fp32 kernels;
 * QuantizeLinear of a constant folds the same way.  A per-tensor
 * QuantizeLinear that only DequantizeLinears read keeps its integers in fp32
 * with their facts for the QDQ fusion (onnx_qdq.c), never stored as 8-bit.
 * Constant scales must be positive and finite and scale / zero point shapes
 * must fit the data: else a clear error naming the node.
 * Needs: onnx_int.h, onnx_nn.c (ox_matmul, ox_conv), onnx_qdq.c (ox_qinfo).
 * Gives: ox_find_quant. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "onnx_int.h"

#define OP(name) static harp_status op_##name(ox_ctx *c)

/* ---- types and constants ------------------------------------------------------------- */
/* The quantized types harp has, with their ranges. */
static bool q_type(int oty, tiny_dtype *dt, double *lo, double *hi) {
  if (oty == OX_INT8) return *dt = TINY_I8, *lo = -128, *hi = 127, true;
  if (oty == OX_UINT8) return *dt = TINY_U8, *lo = 0, *hi = 255, true;
  return false;
}

static bool present(const ox_ctx *c, int i) { return i < (int)c->node->n_input && c->node->input[i][0]; }

/* x's ONNX element type: its own, else its graph value's dtype's. */
static int oty_of(ox_ctx *c, ox_val *x) {
  if (x->oty) return x->oty;
  tiny_dtype dt = x->has_t ? x->t.dtype : x->v > 0 ? hg_val_dtype(c->g, x->v) : TINY_I32;
  static const int of[] = {[TINY_FP16] = OX_FLOAT16, [TINY_BF16] = OX_BFLOAT16, [TINY_FP32] = OX_FLOAT, [TINY_I32] = OX_INT32,
                           [TINY_BOOL] = OX_BOOL, [TINY_I8] = OX_INT8, [TINY_U8] = OX_UINT8};
  return x->has_i ? OX_INT64 : (unsigned)dt < sizeof of / sizeof *of ? of[dt] : 0;
}

/* A constant's shape (rank, dims); false when x is not a constant. */
static bool const_shape(const ox_val *x, int *rank, int64_t *shape) {
  if (x->v > 0 && !x->has_t && !x->has_i) return false;
  if (x->has_t) *rank = x->t.rank, memcpy(shape, x->t.shape, sizeof *shape * (size_t)x->t.rank);
  else if (x->has_i) *rank = x->irank, memcpy(shape, x->ishape, sizeof *shape * (size_t)x->irank);
  return x->has_t || x->has_i;
}

/* A constant's elements as doubles (arena memory), *n of them; NULL when x
 * is not a constant (or on an allocation failure, with c->e set). */
static double *const_vals(ox_ctx *c, const ox_val *x, int64_t *n) {
  if (!x->has_t && !x->has_i) return NULL;
  *n = x->has_t ? ut_tensor_numel(&x->t) : x->in;
  double *v = ut_arena_alloc(c->A, sizeof *v * (size_t)(*n ? *n : 1));
  if (!v) return ox_fail(c, HARP_E_NO_MEMORY, "out of memory"), NULL;
  for (int64_t i = 0; i < *n; i++) {
    int64_t k = 0;
    if (x->has_t) v[i] = ut_tensor_get(&x->t, i);
    else if (fe_dim_is_int(x->iv[i], &k)) v[i] = (double)k;
    else return NULL; /* a size known only at run time */
  }
  return v;
}

static void shape_text(int rank, const int64_t *d, char *buf, size_t cap) {
  int k = snprintf(buf, cap, "[");
  for (int i = 0; i < rank && k < (int)cap; i++) k += snprintf(buf + k, cap - (size_t)k, "%s%" PRId64, i ? "," : "", d[i]);
  if (k < (int)cap) snprintf(buf + k, cap - (size_t)k, "]");
}

/* ---- quantization parameters ------------------------------------------------------------ */
/* How a scale applies to the data: one for all, one per index of `axis`, or
 * one per block of `block` indices along `axis` (the scale has the data's
 * rank then). */
typedef enum { QP_TENSOR, QP_AXIS, QP_BLOCK } qp_mode;

/* A (scale, zero point) pair as read for data of rank xr and shape xd (-1: not
 * known at import). */
typedef struct qp {
  qp_mode mode;
  int axis, srank;
  int64_t block, sshape[TINY_MAX_RANK];
  ox_val *s, *z;       /* z NULL: no zero point (0) */
  const double *sv, *zv; /* their values when constant, else NULL */
  int zoty;            /* the zero point's ONNX type; 0 when absent */
} qp;

/* Checks constant scales: positive and finite. */
static harp_status check_scales(ox_ctx *c, const char *what, const double *v, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    if (!(v[i] > 0) || !isfinite(v[i]))
      return ox_fail(c, HARP_E_INVALID_ARG, "%s scale element %" PRId64 " is %g; a scale must be positive and finite", what, i, v[i]);
  return HARP_OK;
}

/* Checks the zero point against its type's range (qt_oty: the type the node
 * quantizes to; a zero point of another type is refused). */
static harp_status check_zero(ox_ctx *c, const char *what, qp *q, int qt_oty) {
  if (!q->z) return HARP_OK;
  tiny_dtype dt;
  double lo, hi;
  if (q->zoty != qt_oty && qt_oty)
    return ox_fail(c, HARP_E_DTYPE_MISMATCH, "%s zero point is %s, the data %s", what, ox_type_name(q->zoty), ox_type_name(qt_oty));
  if (!q->zv) return HARP_OK; /* computed at run time */
  int64_t n = q->z->has_t ? ut_tensor_numel(&q->z->t) : q->z->in;
  bool ranged = q_type(q->zoty, &dt, &lo, &hi);
  for (int64_t i = 0; i < n; i++)
    if ((ranged && (q->zv[i] < lo || q->zv[i] > hi)) || (q->zoty == OX_INT32 && q->zv[i] != 0))
      return ox_fail(c, HARP_E_INVALID_ARG, "%s zero point element %" PRId64 " is %g, outside %s's range%s", what, i, q->zv[i],
                     ox_type_name(q->zoty), q->zoty == OX_INT32 ? " (an int32 zero point must be 0)" : "");
  return HARP_OK;
}

/* The mode of a scale of shape (sr, sd) for data (xr, xd), as ONNX defines
 * them; an error naming both shapes when it fits none. */
static harp_status q_mode(ox_ctx *c, const char *what, qp *q, int xr, const int64_t *xd) {
  int sr = q->srank;
  const int64_t *sd = q->sshape;
  int64_t sn = 1;
  for (int i = 0; i < sr; i++) sn *= sd[i];
  char ss[96], xs[96];
  shape_text(sr, sd, ss, sizeof ss), shape_text(xr, xd, xs, sizeof xs);
  if (q->block == 0 && sn == 1 && sr <= 1) return q->mode = QP_TENSOR, HARP_OK;
  if (q->axis < 0 || q->axis >= xr) return ox_fail(c, HARP_E_INVALID_ARG, "%s scale %s: axis %d is outside the data's rank %d", what, ss, q->axis, xr);
  if (q->block == 0) {
    if (sr != 1 || (xd[q->axis] >= 0 && sd[0] != xd[q->axis]))
      return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "%s scale has shape %s; per-axis quantization along axis %d of data %s needs [%" PRId64 "]",
                     what, ss, q->axis, xs, xd[q->axis]);
    return q->mode = QP_AXIS, HARP_OK;
  }
  if (q->block < 0) return ox_fail(c, HARP_E_INVALID_ARG, "block_size must be >= 0");
  bool ok = sr == xr;
  for (int i = 0; ok && i < xr; i++)
    ok = xd[i] >= 0 && sd[i] == (i == q->axis ? (xd[i] + q->block - 1) / q->block : xd[i]);
  if (!ok)
    return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "%s scale has shape %s; blocks of %" PRId64 " along axis %d of data %s need the data's shape with that axis divided",
                   what, ss, q->block, q->axis, xs);
  return q->mode = QP_BLOCK, HARP_OK;
}

/* Reads the scale (input si) and zero point (input zi, optional) for data of
 * rank xr and dims xd (-1: unknown), with the node's axis and block_size. */
static harp_status q_read(ox_ctx *c, const char *what, int si, int zi, int xr, const int64_t *xd, qp *q) {
  memset(q, 0, sizeof *q);
  int64_t axis = 1, block = 0;
  if (ox_attr_int(c, "axis", 1, &axis) || ox_attr_int(c, "block_size", 0, &block)) return c->e->code;
  if (axis < -TINY_MAX_RANK || axis > TINY_MAX_RANK) return ox_fail(c, HARP_E_INVALID_ARG, "axis %" PRId64 " is out of range", axis);
  q->axis = (int)(axis < 0 ? axis + xr : axis), q->block = block; /* checked where it matters (q_mode) */
  bool failed = false;
  q->s = ox_in(c, si, &failed);
  if (failed) return c->e->code;
  if (!q->s) return ox_fail(c, HARP_E_ARITY, "input %d (%s scale) is required", si, what);
  q->z = present(c, zi) ? ox_in(c, zi, &failed) : NULL;
  if (failed) return c->e->code;
  int64_t n;
  if (!const_shape(q->s, &q->srank, q->sshape)) {
    hg_val sv = ox_value(c, q->s);
    if (sv < 0) return c->e->code;
    const fe_shape *s = ox_shape_of(c, sv);
    q->srank = s->rank;
    for (int i = 0; i < s->rank; i++)
      if (!fe_dim_is_int(s->d[i], &q->sshape[i])) return ox_fail(c, HARP_E_UNSUPPORTED, "%s scale of a size known only at run time", what);
  } else if ((q->sv = const_vals(c, q->s, &n)) && check_scales(c, what, q->sv, n)) {
    return c->e->code;
  }
  if (c->e->code) return c->e->code;
  if (!tiny_dtype_is_float(q->s->has_t ? q->s->t.dtype : q->s->v > 0 ? hg_val_dtype(c->g, q->s->v) : TINY_I32))
    return ox_fail(c, HARP_E_DTYPE_MISMATCH, "%s scale must be a float tensor", what);
  if (q->z) {
    int zr;
    int64_t zd[TINY_MAX_RANK];
    q->zoty = oty_of(c, q->z);
    if (const_shape(q->z, &zr, zd)) {
      q->zv = const_vals(c, q->z, &n);
      if (c->e->code) return c->e->code;
    } else {
      hg_val zvv = ox_value(c, q->z);
      if (zvv < 0) return c->e->code;
      const fe_shape *s = ox_shape_of(c, zvv);
      zr = s->rank;
      for (int i = 0; i < zr; i++)
        if (!fe_dim_is_int(s->d[i], &zd[i])) zd[i] = -1;
    }
    bool same = zr == q->srank;
    int64_t zn = 1, sn = 1;
    for (int i = 0; same && i < zr; i++) same = zd[i] == q->sshape[i];
    for (int i = 0; i < zr; i++) zn *= zd[i];
    for (int i = 0; i < q->srank; i++) sn *= q->sshape[i];
    same = same || (zn == 1 && sn == 1 && zr <= 1 && q->srank <= 1); /* [] against [1]: one value, as onnxruntime reads it */
    if (!same) {
      char ss[96], zs[96];
      shape_text(q->srank, q->sshape, ss, sizeof ss), shape_text(zr, zd, zs, sizeof zs);
      return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "%s zero point has shape %s, its scale %s", what, zs, ss);
    }
  }
  return q_mode(c, what, q, xr, xd);
}

/* The index into a scale of mode q for element i of data of rank xr, dims xd. */
static int64_t q_index(const qp *q, int xr, const int64_t *xd, int64_t i) {
  if (q->mode == QP_TENSOR) return 0;
  int64_t inner = 1;
  for (int d = q->axis + 1; d < xr; d++) inner *= xd[d];
  int64_t D = xd[q->axis], coord = i / inner % D;
  if (q->mode == QP_AXIS) return coord;
  int64_t sD = (D + q->block - 1) / q->block, o = i / (inner * D), in = i % inner;
  return (o * sD + coord / q->block) * inner + in;
}

/* A blocked scale or zero point computed at run time, repeated block times
 * along the axis and cut to the data's size: [.., D/B, ..] -> [.., D, ..]. */
static hg_val block_expand(ox_ctx *c, const qp *q, ox_val *x, int xr, const int64_t *xd) {
  hg_graph *g = c->g;
  hg_val v = ox_value(c, x);
  if (v < 0) return -1;
  if (hg_val_dtype(g, v) != TINY_FP32) v = hg_cast(g, v, TINY_FP32);
  fe_shape u = {.rank = xr + 1}, e = {.rank = xr + 1}, o = {.rank = xr};
  for (int i = 0, k = 0; i < xr; i++, k++) {
    u.d[k] = e.d[k] = fe_dim_int(c->A, q->sshape[i]);
    o.d[i] = fe_dim_int(c->A, i == q->axis ? q->sshape[i] * q->block : xd[i]);
    if (i == q->axis) k++, u.d[k] = fe_dim_int(c->A, 1), e.d[k] = fe_dim_int(c->A, q->block);
  }
  v = fe_reshape(g, fe_expand(g, fe_reshape(g, v, &u), &e), &o);
  int ax = q->axis;
  int64_t st = 0, en = xd[q->axis];
  return hg_slice(g, v, 1, &ax, &st, &en, NULL);
}

/* A scale or zero point (x: qp's s or z) as an fp32 value broadcasting
 * against data of rank xr, dims xd: a scalar, a vector along the axis, or
 * (blocked) expanded on the host to the data's shape.  0 for no zero point. */
static hg_val q_bcast(ox_ctx *c, const qp *q, ox_val *x, const double *xv, int xr, const int64_t *xd) {
  if (!x) return 0;
  if (q->mode == QP_BLOCK && !xv) return block_expand(c, q, x, xr, xd);
  if (q->mode == QP_BLOCK) {
    ut_tensor t;
    if (ut_tensor_alloc(c->e, &t, TINY_FP32, xr, xd)) return -1;
    for (int64_t i = 0; i < ut_tensor_numel(&t); i++) ((float *)t.data)[i] = (float)xv[q_index(q, xr, xd, i)];
    return ox_weight(c, x == q->s ? "qscale" : "qzero", &t);
  }
  hg_val v = ox_value(c, x);
  if (v < 0) return -1;
  if (hg_val_dtype(c->g, v) != TINY_FP32) v = hg_cast(c->g, v, TINY_FP32);
  fe_shape s = {.rank = q->mode == QP_TENSOR ? 0 : xr};
  for (int i = 0; i < s.rank; i++) s.d[i] = fe_dim_int(c->A, i == q->axis ? q->sshape[0] : 1);
  return fe_reshape(c->g, v, &s);
}

/* ---- QuantizeLinear / DequantizeLinear ---------------------------------------------------- */
/* The data's rank and dims (-1 where not known at import). */
static void dims_of(ox_ctx *c, hg_val v, int *r, int64_t *d) {
  const fe_shape *s = ox_shape_of(c, v);
  *r = s->rank;
  for (int i = 0; i < s->rank; i++)
    if (!fe_dim_is_int(s->d[i], &d[i])) d[i] = -1;
}

/* Data xo's rank, its dims into d: a constant's own (*x stays 0: it may
 * fold), else its graph value's (*x set).  -1 after an error (the rank is
 * the value returned, so no path leaves it unset). */
static int data_of(ox_ctx *c, ox_val *xo, hg_val *x, int64_t *d) {
  int r = 0;
  if (const_shape(xo, &r, d)) return r;
  if ((*x = ox_value(c, xo)) < 0) return -1;
  dims_of(c, *x, &r, d);
  return r;
}

/* round(x / s) + z, saturated to [lo, hi], as dtype qt (x fp32). */
static hg_val quantize(ox_ctx *c, hg_val x, hg_val s, hg_val z, tiny_dtype qt, double lo, double hi) {
  hg_graph *g = c->g;
  hg_val r = hg_round(g, hg_div(g, x, s));
  if (z > 0) r = hg_add(g, r, z);
  return hg_cast(g, hg_min(g, hg_max(g, r, hg_const(g, lo)), hg_const(g, hi)), qt);
}

/* Folds a Q or DQ of constant data xv (rank xr, dims xd) on the host: the
 * result as output 0 of ONNX type oty (fp32, or the quantized type). */
static harp_status fold_q(ox_ctx *c, const qp *q, const double *xv, int xr, const int64_t *xd, bool dq, int oty, double lo, double hi) {
  tiny_dtype dt;
  double l2, h2;
  if (!ox_dtype(oty, &dt) && !q_type(oty, &dt, &l2, &h2)) return ox_fail(c, HARP_E_INTERNAL, "fold to %s", ox_type_name(oty));
  ut_tensor t;
  if (ut_tensor_alloc(c->e, &t, dt, xr, xd)) return c->e->code;
  for (int64_t i = 0; i < ut_tensor_numel(&t); i++) {
    int64_t k = q_index(q, xr, xd, i);
    float s = (float)q->sv[k], z = q->zv ? (float)q->zv[k] : 0.0f;
    if (dq) { /* as onnxruntime: the difference in integers, then one fp32 multiply */
      ut_tensor_set(&t, i, (float)(xv[i] - (q->zv ? q->zv[k] : 0)) * s);
    } else {
      float r = nearbyintf((float)xv[i] / s) + z;
      r = r < lo ? (float)lo : r > hi ? (float)hi : r;
      if (dt == TINY_I8) ((int8_t *)t.data)[i] = (int8_t)r;
      else ((uint8_t *)t.data)[i] = (uint8_t)r;
    }
  }
  if (ox_def_tensor(c, 0, &t, oty)) return c->e->code;
  bool zero = true;
  int64_t ns = q->mode == QP_TENSOR ? 1 : q->sshape[0];
  for (int64_t k = 0; q->zv && k < ns; k++) zero = zero && q->zv[k] == 0;
  ox_qinfo *w = dq && zero && q->mode != QP_BLOCK && c->node->n_output ? ox_qinfo_new(c, ox_find(c, c->node->output[0]), QI_WEIGHT) : NULL;
  if (w) w->s = q->sv, w->ns = ns, w->axis = q->mode == QP_AXIS ? q->axis : 0;
  return c->e->code;
}

/* The type QuantizeLinear writes: its zero point's, else output_dtype's (opset 21), else uint8. */
static harp_status q_out_type(ox_ctx *c, const qp *q, int *oty) {
  int64_t od = 0;
  if (ox_attr_int(c, "output_dtype", 0, &od)) return c->e->code;
  if (q->z && od && od != q->zoty) return ox_fail(c, HARP_E_INVALID_ARG, "output_dtype %s differs from the zero point's %s", ox_type_name((int)od), ox_type_name(q->zoty));
  *oty = q->z ? q->zoty : od ? (int)od : OX_UINT8;
  tiny_dtype dt;
  double lo, hi;
  if (!q_type(*oty, &dt, &lo, &hi)) return ox_fail(c, HARP_E_UNSUPPORTED, "quantization to %s (harp has int8 and uint8)", ox_type_name(*oty));
  return HARP_OK;
}

/* The same attribute of two nodes (both absent counts as the same). */
static bool same_attr(const Onnx__NodeProto *a, const Onnx__NodeProto *b, const char *name) {
  const Onnx__AttributeProto *x = NULL, *y = NULL;
  for (size_t i = 0; i < a->n_attribute; i++)
    if (!strcmp(a->attribute[i]->name, name)) x = a->attribute[i];
  for (size_t i = 0; i < b->n_attribute; i++)
    if (!strcmp(b->attribute[i]->name, name)) y = b->attribute[i];
  return (!x && !y) || (x && y && x->i == y->i);
}

/* Whether every reader of this QuantizeLinear's output is a
 * DequantizeLinear of the same scale, zero point, axis and block size (a QDQ
 * model's activations): then the pair is one fp32 step, the 8-bit value
 * exact in fp32 and never stored. */
static bool dq_only(ox_ctx *c) {
  const Onnx__NodeProto *q = c->node;
  int want = ox_uses(c, q->output[0]), seen = 0;
  if (!c->gp || c->inline_scope || c->parent || want == 0 || q->n_input < 2) return false;
  for (size_t i = (size_t)c->node_index + 1; i < c->gp->n_node; i++) {
    const Onnx__NodeProto *n = c->gp->node[i];
    for (size_t k = 0; k < n->n_input; k++) {
      if (strcmp(n->input[k], q->output[0]) != 0) continue;
      bool dq = k == 0 && !strcmp(n->op_type, "DequantizeLinear") && (!n->domain || !*n->domain) && n->n_input == q->n_input;
      for (size_t j = 1; dq && j < q->n_input; j++) dq = !strcmp(n->input[j], q->input[j]);
      if (!dq || !same_attr(q, n, "axis") || !same_attr(q, n, "block_size")) return false;
      seen++;
    }
  }
  return seen == want;
}

/* A per-tensor QuantizeLinear of constant scale s and zero point z: of a
 * fused contraction's output (already divided by s: rounded, shifted,
 * saturated), or of any value.  Read only by DequantizeLinears, its output is
 * the integers in fp32 (never stored as 8-bit) with their facts for the
 * fusion; else the 8-bit tensor. */
static harp_status quantize_fused(ox_ctx *c, ox_val *xo, hg_val x, double s, double z, tiny_dtype qt, double lo, double hi) {
  hg_graph *g = c->g;
  const ox_qinfo *in = xo->qi;
  /* the dequantized integers of the same scale and zero point, moved or not
   * (ox_qdq_move): round((q - z) s / s) + z is q, within the range: q itself */
  bool same = in && in->kind == QI_INT && in->s1 == s && in->z == z && in->lo <= in->hi && lo <= in->lo && in->hi <= hi;
  bool scaled = in && in->kind == QI_SCALED && in->s1 == s;
  if (scaled) { /* an activation's bounds on the rounded value (onnx_qdq.c's with_act), within the type's */
    double l = fmin(fmax(lo, z + in->blo), hi);
    hi = fmax(fmin(hi, z + in->bhi), l), lo = l;
  }
  hg_val r = same ? in->qv : hg_round(g, scaled ? x : hg_div(g, x, hg_const(g, s)));
  if (!same && z != 0 && !(scaled && in->zin)) r = hg_add(g, r, hg_const(g, z));
  if (!same) r = hg_min(g, hg_max(g, r, hg_const(g, lo)), hg_const(g, hi));
  if (!dq_only(c)) return ox_def(c, 0, hg_cast(g, r, qt));
  if (ox_def(c, 0, r)) return c->e->code;
  ox_val *y = ox_find(c, c->node->output[0]);
  ox_qinfo *qi = ox_qinfo_new(c, y, QI_INT);
  if (!qi) return c->e->code;
  if (same) { /* the same integers: their operand form shared */
    *qi = *in, y->fq = true;
    return HARP_OK;
  }
  y->fq = true, qi->qv = r, qi->s1 = s, qi->z = z, qi->q = qi, qi->lo = lo, qi->hi = hi;
  return HARP_OK;
}

OP(QuantizeLinear) {
  ox_val *xo = ox_in(c, 0, NULL);
  if (!xo) return ox_fail(c, HARP_E_ARITY, "input 0 is required");
  int oty = OX_UINT8;
  int64_t xd[TINY_MAX_RANK], n;
  hg_val x = 0;
  int xr = data_of(c, xo, &x, xd);
  if (xr < 0) return c->e->code;
  qp q;
  if (q_read(c, "y", 1, 2, xr, xd, &q) || q_out_type(c, &q, &oty) || check_zero(c, "y", &q, oty)) return c->e->code;
  tiny_dtype qt = TINY_U8, xdt = x ? hg_val_dtype(c->g, x) : xo->has_t ? xo->t.dtype : TINY_I32;
  double lo = 0, hi = 255;
  q_type(oty, &qt, &lo, &hi);
  if (!tiny_dtype_is_float(xdt)) return ox_fail(c, HARP_E_DTYPE_MISMATCH, "x must be a float tensor, not %s", tiny_dtype_name(xdt));
  const double *xv;
  if (!x && q.sv && (!q.z || q.zv) && (xv = const_vals(c, xo, &n))) return fold_q(c, &q, xv, xr, xd, false, oty, lo, hi);
  if (c->e->code || (!x && (x = ox_value(c, xo)) < 0)) return c->e->code;
  hg_val s = q_bcast(c, &q, q.s, q.sv, xr, xd), z = s > 0 ? q_bcast(c, &q, q.z, q.zv, xr, xd) : -1;
  if (s < 0 || z < 0) return c->e->code ? c->e->code : ox_check(c, -1);
  if (xdt != TINY_FP32) x = hg_cast(c->g, x, TINY_FP32);
  if (q.mode == QP_TENSOR && q.sv && (!q.z || q.zv)) return quantize_fused(c, xo, x, q.sv[0], q.zv ? q.zv[0] : 0, qt, lo, hi);
  if (dq_only(c)) { /* (clamp(round(x / s) + z) - z) * s, in fp32 */
    hg_graph *g = c->g;
    hg_val r = hg_round(g, hg_div(g, x, s));
    if (z > 0) r = hg_add(g, r, z);
    r = hg_min(g, hg_max(g, r, hg_const(g, lo)), hg_const(g, hi));
    if (z > 0) r = hg_sub(g, r, z);
    if (ox_def(c, 0, hg_mul(g, r, s))) return c->e->code;
    ox_find(c, c->node->output[0])->fq = true;
    return HARP_OK;
  }
  return ox_def(c, 0, quantize(c, x, s, z, qt, lo, hi));
}

OP(DequantizeLinear) {
  ox_val *xo = ox_in(c, 0, NULL);
  if (!xo) return ox_fail(c, HARP_E_ARITY, "input 0 is required");
  if (xo->fq && xo->qi) { /* the integers of a per-tensor Q (quantize_fused): (q - z) * s */
    hg_graph *g = c->g;
    const ox_qinfo *in = xo->qi;
    hg_val y = in->z != 0 ? hg_add(g, in->qv, hg_const(g, -in->z)) : in->qv; /* + (-z): an epilogue step, as - is not */
    if (ox_def(c, 0, hg_mul(g, y, hg_const(g, in->s1)))) return c->e->code;
    ox_qinfo *qi = ox_qinfo_new(c, ox_find(c, c->node->output[0]), QI_INT);
    if (qi) *qi = *in;
    if (qi) ox_qdq_skip_first(c);
    return c->e->code;
  }
  if (xo->fq) { /* its QuantizeLinear computed the round trip (dq_only) */
    hg_val y = ox_value(c, xo);
    tiny_dtype sdt = y > 0 ? hg_val_dtype(c->g, ox_tensor(c, 1)) : TINY_FP32;
    return y < 0 ? c->e->code : ox_def(c, 0, sdt == TINY_FP32 || !tiny_dtype_is_float(sdt) ? y : hg_cast(c->g, y, sdt));
  }
  int xoty = oty_of(c, xo);
  tiny_dtype qt;
  double lo, hi;
  if (!q_type(xoty, &qt, &lo, &hi) && xoty != OX_INT32)
    return ox_fail(c, HARP_E_UNSUPPORTED, "dequantization of %s (harp has int8, uint8 and int32)", ox_type_name(xoty));
  int64_t xd[TINY_MAX_RANK], n;
  hg_val x = 0;
  int xr = data_of(c, xo, &x, xd);
  if (xr < 0) return c->e->code;
  qp q;
  if (q_read(c, "x", 1, 2, xr, xd, &q) || check_zero(c, "x", &q, xoty)) return c->e->code;
  tiny_dtype sdt = q.s->has_t ? q.s->t.dtype : hg_val_dtype(c->g, ox_value(c, q.s));
  int out_oty = sdt == TINY_FP16 ? OX_FLOAT16 : sdt == TINY_BF16 ? OX_BFLOAT16 : OX_FLOAT;
  const double *xv;
  if (!x && q.sv && (!q.z || q.zv) && (xv = const_vals(c, xo, &n))) return fold_q(c, &q, xv, xr, xd, true, out_oty, 0, 0);
  if (c->e->code || (!x && (x = ox_value(c, xo)) < 0)) return c->e->code;
  hg_val s = q_bcast(c, &q, q.s, q.sv, xr, xd), z = s > 0 ? q_bcast(c, &q, q.z, q.zv, xr, xd) : -1;
  if (s < 0 || z < 0) return c->e->code ? c->e->code : ox_check(c, -1);
  hg_val y = hg_cast(c->g, x, TINY_FP32);
  if (z > 0) y = hg_sub(c->g, y, z);
  y = hg_mul(c->g, y, s);
  return ox_def(c, 0, sdt == TINY_FP32 ? y : hg_cast(c->g, y, sdt));
}

/* ---- DynamicQuantizeLinear -------------------------------------------------------------------- */
/* uint8 over the range of x and 0: scale (max - min) / 255 (1 when the range
 * is empty, as onnxruntime), zero point round(-min / scale) saturated. */
OP(DynamicQuantizeLinear) {
  hg_val x = ox_tensor(c, 0);
  if (x < 0) return c->e->code;
  hg_graph *g = c->g;
  if (hg_val_dtype(g, x) != TINY_FP32) return ox_fail(c, HARP_E_DTYPE_MISMATCH, "x must be float32");
  int r = ox_rank_of(c, x), axes[TINY_MAX_RANK];
  for (int i = 0; i < r; i++) axes[i] = i;
  hg_val mn = hg_min(g, hg_reduce(g, HG_OP_RMIN, x, axes, r, false), hg_const(g, 0));
  hg_val mx = hg_max(g, hg_reduce(g, HG_OP_RMAX, x, axes, r, false), hg_const(g, 0));
  hg_val s = hg_div(g, hg_sub(g, mx, mn), hg_const(g, 255));
  s = hg_where(g, hg_binary(g, HG_OP_EQ, mx, mn), hg_const(g, 1), s);
  hg_val zf = hg_round(g, hg_min(g, hg_max(g, hg_sub(g, hg_const(g, 0), hg_div(g, mn, s)), hg_const(g, 0)), hg_const(g, 255)));
  if (ox_def(c, 0, quantize(c, x, s, zf, TINY_U8, 0, 255)) || ox_def(c, 1, s)) return c->e->code;
  return ox_def(c, 2, hg_cast(g, zf, TINY_U8));
}

/* ---- contractions ---------------------------------------------------------------------------- */
/* Constant data xo minus its constant zero point zv (nz values: one, or
 * one per index of axis ax) on the host, as a weight of dtype dt (BF16:
 * a bf16 weight widened to fp32, the 8-bit differences exact in it). */
static hg_val centered_const(ox_ctx *c, ox_val *xo, const double *zv, int64_t nz, int ax, tiny_dtype dt, const char *what) {
  int xr;
  int64_t xd[TINY_MAX_RANK], n;
  const double *xv = const_shape(xo, &xr, xd) ? const_vals(c, xo, &n) : NULL;
  if (!xv) return c->e->code ? -1 : 0;
  int64_t inner = 1;
  for (int d = ax + 1; d < xr; d++) inner *= xd[d];
  ut_tensor t;
  if (ut_tensor_alloc(c->e, &t, dt, xr, xd)) return -1;
  for (int64_t i = 0; i < n; i++) {
    double v = xv[i] - (zv ? zv[nz == 1 ? 0 : i / inner % xd[ax]] : 0);
    if (dt == TINY_I32) ((int32_t *)t.data)[i] = (int32_t)v;
    else if (dt == TINY_BF16) ((uint16_t *)t.data)[i] = ut_f32_to_bf16((float)v);
    else ((float *)t.data)[i] = (float)v;
  }
  hg_val w = ox_weight(c, what, &t);
  return w < 0 || dt != TINY_BF16 ? w : hg_cast(c->g, w, TINY_FP32);
}

/* Input i (quantized data) minus its zero point (input zi, optional; per
 * tensor, or a vector along axis zaxis of the data) in dtype dt (BF16: in
 * fp32, held in bf16 storage, ox_bf16_exact); folded on the host when both
 * are constants (a quantized weight). */
static hg_val centered(ox_ctx *c, int i, int zi, tiny_dtype dt, int zaxis, const char *what) {
  bool failed = false;
  ox_val *xo = ox_in(c, i, &failed), *zo = present(c, zi) ? ox_in(c, zi, &failed) : NULL;
  if (failed) return -1;
  if (!xo) return ox_fail(c, HARP_E_ARITY, "input %d (%s) is required", i, what), -1;
  tiny_dtype qt;
  double lo, hi;
  int xoty = oty_of(c, xo);
  if (!q_type(xoty, &qt, &lo, &hi)) return ox_fail(c, HARP_E_UNSUPPORTED, "%s of type %s (harp has int8 and uint8)", what, ox_type_name(xoty)), -1;
  if (zo && oty_of(c, zo) != xoty)
    return ox_fail(c, HARP_E_DTYPE_MISMATCH, "%s zero point is %s, the data %s", what, ox_type_name(oty_of(c, zo)), ox_type_name(xoty)), -1;
  int64_t xd[TINY_MAX_RANK], zn = 1, v;
  hg_val x = 0, z = 0;
  int xr = data_of(c, xo, &x, xd);
  if (xr < 0) return -1;
  int zr = 0;
  int64_t zd[TINY_MAX_RANK];
  const double *zv = NULL;
  if (zo && const_shape(zo, &zr, zd)) {
    if (!(zv = const_vals(c, zo, &v)) && c->e->code) return -1;
    zn = v;
  } else if (zo) {
    if ((z = ox_value(c, zo)) < 0) return -1;
    dims_of(c, z, &zr, zd);
    for (int k = 0; k < zr; k++) zn = zd[k] >= 0 ? zn * zd[k] : -1;
  }
  for (int64_t k = 0; zv && k < zn; k++)
    if (zv[k] < lo || zv[k] > hi) return ox_fail(c, HARP_E_INVALID_ARG, "%s zero point %g is outside %s's range", what, zv[k], ox_type_name(xoty)), -1;
  int ax = zaxis < 0 ? zaxis + xr : zaxis;
  if (zo && zn != 1 && (zr != 1 || ax < 0 || ax >= xr || zd[0] != xd[ax]))
    return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "%s zero point of %" PRId64 " elements fits neither the tensor nor its axis %d", what, zn, ax), -1;
  if (!x && (!zo || zv)) {
    hg_val w = centered_const(c, xo, zv, zn, ax, dt, what);
    if (w) return w;
  }
  if (!x && (x = ox_value(c, xo)) < 0) return -1;
  tiny_dtype cd = dt == TINY_BF16 ? TINY_FP32 : dt;
  x = hg_cast(c->g, x, cd);
  if (!zo) return dt == TINY_BF16 ? ox_bf16_exact(c, x) : x;
  if (!z && (z = ox_value(c, zo)) < 0) return -1;
  z = hg_cast(c->g, z, cd);
  fe_shape s = {.rank = zn == 1 ? 0 : xr};
  for (int k = 0; k < s.rank; k++) s.d[k] = k == ax ? ox_shape_of(c, z)->d[0] : fe_dim_int(c->A, 1);
  hg_val d = hg_sub(c->g, x, fe_reshape(c->g, z, &s));
  return dt == TINY_BF16 ? ox_bf16_exact(c, d) : d;
}

/* The contraction dimension K of a MatMul / Conv of weight w (capped at 2^24). */
static int64_t contraction_k(ox_ctx *c, hg_val w, bool conv) {
  const fe_shape *s = ox_shape_of(c, w);
  int64_t k = 1, v;
  int from = conv ? 1 : s->rank >= 2 ? s->rank - 2 : 0, to = conv ? s->rank : from + 1;
  for (int i = from; i < to; i++) {
    k = fe_dim_is_int(s->d[i], &v) && v < ((int64_t)1 << 24) ? k * v : ((int64_t)1 << 24);
    if (k > ((int64_t)1 << 24)) k = (int64_t)1 << 24;
  }
  return k;
}

/* A convolution of centered 8-bit data a by b (both fp32 integers) with an
 * exact int32 result when K products of 255 x 255 would not stay exact in
 * fp32: a = 16 hi + lo (|hi| <= 16, 0 <= lo < 16), two fp32 convolutions
 * whose sums are exact while K * 16 * 255 < 2^24, joined in int32. */
static hg_val split_conv(ox_ctx *c, hg_val a, hg_val b, int64_t k) {
  if (k * 16 * 255 >= ((int64_t)1 << 24))
    return ox_fail(c, HARP_E_UNSUPPORTED, "a ConvInteger over %" PRId64 " products (its int32 sums exceed what harp computes exactly)", k), -1;
  hg_graph *g = c->g;
  hg_val hi = hg_floor(g, hg_mul(g, a, hg_const(g, 1.0 / 16))), lo = hg_sub(g, a, hg_mul(g, hi, hg_const(g, 16)));
  hg_val yh = ox_conv(c, hi, b, 0), yl = yh > 0 ? ox_conv(c, lo, b, 0) : -1;
  if (yl < 0) return -1;
  return hg_add(g, hg_mul(g, hg_cast(g, yh, TINY_I32), hg_const_typed(g, 16, TINY_I32)), hg_cast(g, yl, TINY_I32));
}

/* Products of 8-bit differences (|.| <= 255) summed in fp32 stay exact over this many. */
#define QK_EXACT 256

/* A MatMul of centered 8-bit data a (rank >= 2) by b over K = k products
 * with an exact int32 result: fp32 matmuls over slices of QK_EXACT along K
 * (each sum exact), joined in int32; 0 past 64 slices (int32 then). */
static hg_val split_matmul(ox_ctx *c, hg_val a, hg_val b, int64_t k) {
  int ra = ox_rank_of(c, a), rb = ox_rank_of(c, b), axa = ra - 1, axb = rb >= 2 ? rb - 2 : 0;
  if (ra < 2 || k > 64 * QK_EXACT) return 0;
  hg_graph *g = c->g;
  hg_val y = 0;
  for (int64_t k0 = 0; k0 < k; k0 += QK_EXACT) {
    int64_t k1 = k0 + QK_EXACT < k ? k0 + QK_EXACT : k;
    hg_val as = hg_slice(g, a, 1, &axa, &k0, &k1, NULL), bs = as > 0 ? hg_slice(g, b, 1, &axb, &k0, &k1, NULL) : -1;
    hg_val p = bs > 0 ? ox_matmul(c, as, bs) : -1;
    if (p < 0) return -1;
    p = hg_cast(g, p, TINY_I32);
    y = y ? hg_add(g, y, p) : p;
  }
  return y;
}

/* MatMulInteger / ConvInteger: int32 results of the centered operands. */
static harp_status integer_op(ox_ctx *c, bool conv) {
  hg_val w = ox_tensor(c, 1);
  if (w < 0) return c->e->code;
  int64_t k = contraction_k(c, w, conv);
  /* fp32 sums of 8-bit products are exact while K * 255 * 255 < 2^24; else
   * fp32 sums over slices of K (a MatMul of known K, up to 64 slices) or
   * int32, or the split convolution (harp convolves floats) */
  bool slices = !conv && k * 65025 >= ((int64_t)1 << 24) && k <= 64 * QK_EXACT;
  tiny_dtype acc = k * 65025 < ((int64_t)1 << 24) || conv || slices ? TINY_FP32 : TINY_I32;
  /* operands in bf16 storage (exact) where the contraction sums them in fp32 exactly */
  tiny_dtype od = acc == TINY_FP32 && (k * 65025 < ((int64_t)1 << 24) || slices) ? TINY_BF16 : acc;
  hg_val a = centered(c, 0, 2, od, conv ? 1 : -2, conv ? "x" : "A");
  hg_val b = a > 0 ? centered(c, 1, 3, od, conv ? 0 : -1, conv ? "w" : "B") : -1;
  if (a < 0 || b < 0) return c->e->code ? c->e->code : ox_check(c, -1);
  if (conv && ox_rank_of(c, a) == 5) return ox_fail(c, HARP_E_UNSUPPORTED, "a 3-D ConvInteger");
  if (conv && k * 65025 >= ((int64_t)1 << 24)) {
    hg_val y = split_conv(c, a, b, k);
    return y < 0 ? (c->e->code ? c->e->code : ox_check(c, y)) : ox_def(c, 0, y);
  }
  if (slices) {
    hg_val y = split_matmul(c, a, b, k);
    if (y > 0) return ox_def(c, 0, y);
    if (y < 0) return c->e->code ? c->e->code : ox_check(c, y);
    /* a 1-D A: int32 operands, as before */
    a = hg_cast(c->g, a, TINY_I32), b = hg_cast(c->g, b, TINY_I32);
    acc = TINY_I32;
  }
  hg_val y = conv ? ox_conv(c, a, b, 0) : ox_matmul(c, a, b);
  if (y < 0) return c->e->code ? c->e->code : ox_check(c, y);
  return ox_def(c, 0, acc == TINY_I32 ? y : hg_cast(c->g, y, TINY_I32));
}

OP(MatMulInteger) { return integer_op(c, false); }
OP(ConvInteger) { return integer_op(c, true); }

/* Scale input i as an fp32 value: one value (rank 0), or, when r > 0, a
 * vector along axis `axis` of a rank-r result; constant scales checked. */
static hg_val scale_of(ox_ctx *c, int i, const char *what, int r, int axis) {
  hg_graph *g = c->g;
  ox_val *so = ox_in(c, i, NULL);
  if (!so) return ox_fail(c, HARP_E_ARITY, "input %d (%s scale) is required", i, what), -1;
  int64_t n = 0;
  const double *sv = const_vals(c, so, &n);
  if (c->e->code || (sv && check_scales(c, what, sv, n))) return -1;
  hg_val v = ox_value(c, so);
  if (v < 0) return -1;
  if (!sv) {
    int vr;
    int64_t vd[TINY_MAX_RANK];
    dims_of(c, v, &vr, vd);
    n = 1;
    for (int k = 0; k < vr; k++) n = vd[k] >= 0 && n >= 0 ? n * vd[k] : -1;
  }
  if (!tiny_dtype_is_float(hg_val_dtype(g, v))) return ox_fail(c, HARP_E_DTYPE_MISMATCH, "%s scale must be a float tensor", what), -1;
  if (hg_val_dtype(g, v) != TINY_FP32) v = hg_cast(g, v, TINY_FP32);
  int sr = ox_rank_of(c, v);
  if (n == 1) return fe_reshape(g, v, &(fe_shape){.rank = 0});
  int ax = axis < 0 ? axis + r : axis;
  if (r == 0 || sr != 1)
    return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "%s scale must be one value%s", what, r ? " or a vector per output channel" : ""), -1;
  fe_shape s = {.rank = r};
  for (int d = 0; d < r; d++) s.d[d] = d == ax ? ox_shape_of(c, v)->d[0] : fe_dim_int(c->A, 1);
  return fe_reshape(g, v, &s);
}

/* The requantization multiplier sa * sb / sy (inputs ia, ib, iy; b's scale
 * may be a vector along axis `baxis` of a rank-r result), as onnxruntime
 * computes it in fp32; checks constant scales. */
static hg_val multiplier(ox_ctx *c, int ia, int ib, int iy, int r, int baxis) {
  hg_val sa = scale_of(c, ia, "a", 0, 0), sb = sa > 0 ? scale_of(c, ib, "b", r, baxis) : -1, sy = sb > 0 ? scale_of(c, iy, "y", 0, 0) : -1;
  return sy < 0 ? -1 : hg_div(c->g, hg_mul(c->g, sa, sb), sy);
}

/* y = saturate(round(acc * m) + zy) in the type of input zy (uint8 without one). */
static harp_status requantize(ox_ctx *c, hg_val acc, hg_val m, int izy) {
  int oty = OX_UINT8;
  hg_val z = 0;
  if (present(c, izy)) {
    ox_val *zo = ox_in(c, izy, NULL);
    if (!zo) return c->e->code; /* named but undefined: ox_in said so */
    int64_t n;
    const double *zv = const_vals(c, zo, &n);
    oty = oty_of(c, zo);
    tiny_dtype dt;
    double lo, hi;
    if (!q_type(oty, &dt, &lo, &hi)) return ox_fail(c, HARP_E_UNSUPPORTED, "y of type %s (harp has int8 and uint8)", ox_type_name(oty));
    for (int64_t i = 0; zv && i < n; i++)
      if (zv[i] < lo || zv[i] > hi) return ox_fail(c, HARP_E_INVALID_ARG, "y zero point %g is outside %s's range", zv[i], ox_type_name(oty));
    if ((z = ox_tensor(c, izy)) < 0) return c->e->code;
    if (zv && n != 1) return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "y zero point must be one value");
    z = fe_reshape(c->g, hg_cast(c->g, z, TINY_FP32), &(fe_shape){.rank = 0});
  }
  tiny_dtype qt = TINY_U8;
  double lo = 0, hi = 255;
  q_type(oty, &qt, &lo, &hi);
  hg_graph *g = c->g;
  hg_val r = hg_round(g, hg_mul(g, acc, m));
  if (z > 0) r = hg_add(g, r, z);
  return ox_def(c, 0, hg_cast(g, hg_min(g, hg_max(g, r, hg_const(g, lo)), hg_const(g, hi)), qt));
}

/* QLinearMatMul (a, sa, za, b, sb, zb, sy, zy) and QLinearConv (x, sx, zx,
 * w, sw, zw, sy, zy[, bias int32]): the contraction of the centered operands
 * in fp32 (read from bf16 storage, which holds them exactly), requantized. */
static harp_status qlinear(ox_ctx *c, bool conv) {
  hg_val a = centered(c, 0, 2, TINY_BF16, conv ? 1 : -2, conv ? "x" : "a");
  hg_val b = a > 0 ? centered(c, 3, 5, TINY_BF16, conv ? 0 : -1, conv ? "w" : "b") : -1;
  if (a < 0 || b < 0) return c->e->code ? c->e->code : ox_check(c, -1);
  if (conv && ox_rank_of(c, a) == 5) return ox_fail(c, HARP_E_UNSUPPORTED, "a 3-D QLinearConv");
  hg_val bias = 0;
  if (conv && present(c, 8)) {
    ox_val *bo = ox_in(c, 8, NULL);
    if ((bias = ox_tensor(c, 8)) < 0) return c->e->code;
    if (oty_of(c, bo) != OX_INT32) return ox_fail(c, HARP_E_DTYPE_MISMATCH, "the bias must be int32");
    bias = hg_cast(c->g, bias, TINY_FP32);
  }
  hg_val acc = conv ? ox_conv(c, a, b, bias) : ox_matmul(c, a, b);
  if (acc < 0) return c->e->code ? c->e->code : ox_check(c, acc);
  hg_val m = multiplier(c, 1, 4, 6, ox_rank_of(c, acc), conv ? 1 : -1);
  if (m < 0) return c->e->code ? c->e->code : ox_check(c, m);
  return requantize(c, acc, m, 7);
}

OP(QLinearMatMul) { return qlinear(c, false); }
OP(QLinearConv) { return qlinear(c, true); }

/* com.microsoft QLinearAdd / QLinearMul (a, sa, za, b, sb, zb, sc, zc) as
 * onnxruntime computes them: add: round(a*sa/sc + b*sb/sc + (zc - za*sa/sc
 * - zb*sb/sc)); mul: round((a - za)(b - zb) * sa*sb/sc) + zc. */
static harp_status qlinear_binary(ox_ctx *c, bool mul) {
  hg_graph *g = c->g;
  hg_val a = centered(c, 0, 2, TINY_FP32, 0, "A"), b = a > 0 ? centered(c, 3, 5, TINY_FP32, 0, "B") : -1;
  if (a < 0 || b < 0) return c->e->code ? c->e->code : ox_check(c, -1);
  if (mul) {
    hg_val m = multiplier(c, 1, 4, 6, 0, 0);
    return m < 0 ? (c->e->code ? c->e->code : ox_check(c, m)) : requantize(c, hg_mul(g, a, b), m, 7);
  }
  hg_val sa = scale_of(c, 1, "A", 0, 0), sb = sa > 0 ? scale_of(c, 4, "B", 0, 0) : -1, sc = sb > 0 ? scale_of(c, 6, "C", 0, 0) : -1;
  if (sc < 0) return c->e->code ? c->e->code : ox_check(c, -1);
  hg_val ra = hg_div(g, sa, sc), rb = hg_div(g, sb, sc);
  return requantize(c, hg_add(g, hg_mul(g, a, ra), hg_mul(g, b, rb)), hg_const(g, 1), 7);
}

OP(QLinearAdd) { return qlinear_binary(c, false); }
OP(QLinearMul) { return qlinear_binary(c, true); }

/* ---- dispatch ----------------------------------------------------------------------------- */
static const struct {
  const char *name;
  ox_op_fn fn;
  bool ms; /* com.microsoft's */
} ops[] = {
    {"QuantizeLinear", op_QuantizeLinear, false},   {"DequantizeLinear", op_DequantizeLinear, false},
    {"DynamicQuantizeLinear", op_DynamicQuantizeLinear, false},
    {"MatMulInteger", op_MatMulInteger, false},     {"ConvInteger", op_ConvInteger, false},
    {"QLinearMatMul", op_QLinearMatMul, false},     {"QLinearConv", op_QLinearConv, false},
    {"QLinearAdd", op_QLinearAdd, true},            {"QLinearMul", op_QLinearMul, true},
    {"QuantizeLinear", op_QuantizeLinear, true},    {"DequantizeLinear", op_DequantizeLinear, true},
};

/* The mapping of op in domain dom ("" or "ai.onnx": the default; "com.microsoft"). */
ox_op_fn ox_find_quant(const char *dom, const char *op) {
  bool ms = dom && *dom && strcmp(dom, "ai.onnx") != 0;
  if (ms && strcmp(dom, "com.microsoft") != 0) return NULL;
  for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
    if (ops[i].ms == ms && !strcmp(ops[i].name, op)) return ops[i].fn;
  return NULL;
}
