/* onnx_ops_act.c — more ONNX activations, composed from the builder's
 * elementwise ops, the rounding ops, and Hardmax (the others are in
 * onnx_ops.c).
 * Needs: onnx_load.c / onnx_ops.c (values, attributes, helpers), the builder.
 * Gives: ox_find_act, ox_hardmax.
 *
 * The compositions keep ONNX's NaN behaviour where it is defined: a
 * piecewise function is a where() on a comparison, which is false for NaN,
 * so NaN takes the branch that passes x through. */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "onnx_int.h"

#define OP(name) static harp_status op_##name(ox_ctx *c)

static hg_val K(ox_ctx *c, double v) { return hg_const(c->g, v); }

/* x < 0 ? neg : x */
static hg_val neg_branch(ox_ctx *c, hg_val x, hg_val neg) { return hg_where(c->g, hg_binary(c->g, HG_OP_LT, x, K(c, 0)), neg, x); }

/* min(1, max(0, a x + b)) */
static hg_val hard_sigmoid(ox_ctx *c, hg_val x, double a, double b) {
  return hg_min(c->g, hg_max(c->g, hg_add(c->g, hg_mul(c->g, x, K(c, a)), K(c, b)), K(c, 0)), K(c, 1));
}

/* log(1 + exp(x)) = max(x, 0) + log1p(exp(-|x|)), stable at both ends;
 * log1p(u) is a short series where 1 + u would round. */
static hg_val softplus(ox_ctx *c, hg_val x) {
  hg_graph *g = c->g;
  hg_val u = hg_exp(g, hg_neg(g, hg_abs(g, x)));
  hg_val series = hg_mul(g, u, hg_sub(g, K(c, 1), hg_mul(g, u, hg_sub(g, K(c, 0.5), hg_div(g, u, K(c, 3))))));
  hg_val l = hg_where(g, hg_binary(g, HG_OP_LT, u, K(c, 0.01)), series, hg_log(g, hg_add(g, u, K(c, 1))));
  /* max(x, 0) as where, so that NaN stays NaN */
  return hg_add(g, hg_where(g, hg_binary(g, HG_OP_GT, x, K(c, 0)), x, K(c, 0)), l);
}

hg_val ox_softplus(ox_ctx *c, hg_val x) { return softplus(c, x); }

static hg_val input(ox_ctx *c) { return ox_tensor(c, 0); }

static harp_status attr2(ox_ctx *c, const char *n1, double d1, double *v1, const char *n2, double d2, double *v2) {
  if (ox_attr_float(c, n1, d1, v1)) return c->e->code;
  return n2 ? ox_attr_float(c, n2, d2, v2) : HARP_OK;
}

OP(Celu) {
  double a;
  hg_val x = input(c);
  if (x < 0 || attr2(c, "alpha", 1.0, &a, NULL, 0, NULL)) return c->e->code;
  if (a == 0) return ox_fail(c, HARP_E_INVALID_ARG, "alpha must not be 0");
  hg_val e = hg_sub(c->g, hg_exp(c->g, hg_div(c->g, x, K(c, a))), K(c, 1));
  return ox_def(c, 0, neg_branch(c, x, hg_mul(c->g, e, K(c, a))));
}

OP(ThresholdedRelu) {
  double a;
  hg_val x = input(c);
  if (x < 0 || attr2(c, "alpha", 1.0, &a, NULL, 0, NULL)) return c->e->code;
  return ox_def(c, 0, hg_where(c->g, hg_binary(c->g, HG_OP_GT, x, K(c, a)), x, K(c, 0)));
}

OP(HardSigmoid) {
  double a, b;
  hg_val x = input(c);
  if (x < 0 || attr2(c, "alpha", 0.2, &a, "beta", 0.5, &b)) return c->e->code;
  return ox_def(c, 0, hard_sigmoid(c, x, a, b));
}

OP(HardSwish) {
  hg_val x = input(c);
  if (x < 0) return c->e->code;
  return ox_def(c, 0, hg_mul(c->g, x, hard_sigmoid(c, x, 1.0 / 6, 0.5)));
}

/* x * sigmoid(alpha x) (opset 24) */
OP(Swish) {
  double a;
  hg_val x = input(c);
  if (x < 0 || attr2(c, "alpha", 1.0, &a, NULL, 0, NULL)) return c->e->code;
  return ox_def(c, 0, a == 1 ? hg_silu(c->g, x) : hg_mul(c->g, x, hg_sigmoid(c->g, hg_mul(c->g, x, K(c, a)))));
}

/* NaN is the one value unequal to itself */
OP(IsNaN) {
  hg_val x = input(c);
  if (x < 0) return c->e->code;
  return ox_def(c, 0, hg_binary(c->g, HG_OP_NE, x, x));
}

OP(IsInf) {
  int64_t pos, neg;
  hg_val x = input(c);
  if (x < 0 || ox_attr_int(c, "detect_positive", 1, &pos) || ox_attr_int(c, "detect_negative", 1, &neg)) return c->e->code;
  if (pos && neg) return ox_def(c, 0, hg_binary(c->g, HG_OP_EQ, hg_abs(c->g, x), K(c, INFINITY)));
  if (pos || neg) return ox_def(c, 0, hg_binary(c->g, HG_OP_EQ, x, K(c, pos ? INFINITY : -INFINITY)));
  return ox_def(c, 0, hg_binary(c->g, HG_OP_LT, hg_abs(c->g, x), K(c, -1))); /* all false (NaN too) */
}

OP(Softsign) {
  hg_val x = input(c);
  if (x < 0) return c->e->code;
  return ox_def(c, 0, hg_div(c->g, x, hg_add(c->g, hg_abs(c->g, x), K(c, 1))));
}

OP(Softplus) {
  hg_val x = input(c);
  if (x < 0) return c->e->code;
  return ox_def(c, 0, softplus(c, x));
}

OP(Mish) {
  hg_val x = input(c);
  if (x < 0) return c->e->code;
  /* tanh(log(1 + e^x)) = n / (n + 2) with n = e^x (e^x + 2): no cancellation
   * for x << 0 (where x * tanh(softplus) would lose the relative precision
   * of a tanh near 0); e^x is capped at e^20, where the ratio is 1 */
  hg_graph *g = c->g;
  hg_val u = hg_exp(g, hg_min(g, x, K(c, 20))), n = hg_mul(g, u, hg_add(g, u, K(c, 2)));
  return ox_def(c, 0, hg_mul(g, x, hg_div(g, n, hg_add(g, n, K(c, 2)))));
}

/* Floor, Ceil, Round (halves to even): harp's own unary ops */
static harp_status rounding(ox_ctx *c, hg_op op) {
  hg_val x = input(c);
  if (x < 0) return c->e->code;
  return ox_def(c, 0, hg_unary(c->g, op, x));
}
OP(Floor) { return rounding(c, HG_OP_FLOOR); }
OP(Ceil) { return rounding(c, HG_OP_CEIL); }
OP(Round) { return rounding(c, HG_OP_ROUND); }

/* 1 at the first maximum (or NaN) along axis, 0 elsewhere: the first index
 * is the min over where(x == max, i, n). */
hg_val ox_hardmax(ox_ctx *c, hg_val x, int axis) {
  hg_graph *g = c->g;
  const fe_shape *s = ox_shape_of(c, x);
  int64_t n;
  if (ox_known(c, s->d[axis], "the size Hardmax runs along", &n)) return -1;
  ut_tensor t;
  int64_t shp[TINY_MAX_RANK];
  for (int i = 0; i < s->rank; i++) shp[i] = i == axis ? n : 1;
  if (ut_tensor_alloc(c->e, &t, TINY_FP32, s->rank, shp)) return -1;
  for (int64_t i = 0; i < n; i++) ((float *)t.data)[i] = (float)i;
  hg_val iota = ox_weight(c, "iota", &t);
  if (iota < 0) return -1;
  hg_val m = hg_reduce(g, HG_OP_RMAX, x, &axis, 1, true);
  hg_val pos = ox_extreme_pos(c, x, m, iota, K(c, (double)n));
  hg_val first = hg_reduce(g, HG_OP_RMIN, pos, &axis, 1, true);
  return hg_where(g, hg_binary(g, HG_OP_EQ, iota, first), K(c, 1), K(c, 0));
}

/* ---- dispatch ------------------------------------------------------------------------- */
static const struct {
  const char *name;
  ox_op_fn fn;
} ops[] = {
#define E(n) {#n, op_##n}
    E(Ceil), E(Celu), E(Floor), E(HardSigmoid), E(HardSwish), E(IsInf), E(IsNaN), E(Mish), E(Round), E(Softplus), E(Softsign),
    E(Swish), E(ThresholdedRelu),
#undef E
};

ox_op_fn ox_find_act(const char *op) {
  for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
    if (!strcmp(ops[i].name, op)) return ops[i].fn;
  return NULL;
}
