/* onnx_ops_act.c — ONNX activations, sign and the softmax family, composed
 * from the builder's elementwise ops and reductions.
 * Needs: onnx_load.c / onnx_ops.c (values, attributes, helpers), the builder.
 * Gives: ox_find_act, ox_softmax.
 *
 * The compositions keep ONNX's NaN behaviour where it is defined: a
 * piecewise function is a where() on a comparison, which is false for NaN,
 * so NaN takes the branch that passes x through. */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "onnx_int.h"

#define OP(name) static hp_status op_##name(ox_ctx *c)

static hp_val K(ox_ctx *c, double v) { return hp_const(c->g, v); }

/* x < 0 ? neg : x */
static hp_val neg_branch(ox_ctx *c, hp_val x, hp_val neg) { return hp_where(c->g, hp_binary(c->g, HP_OP_LT, x, K(c, 0)), neg, x); }

/* min(1, max(0, a x + b)) */
static hp_val hard_sigmoid(ox_ctx *c, hp_val x, double a, double b) {
  return hp_min(c->g, hp_max(c->g, hp_add(c->g, hp_mul(c->g, x, K(c, a)), K(c, b)), K(c, 0)), K(c, 1));
}

/* log(1 + exp(x)) = max(x, 0) + log1p(exp(-|x|)), stable at both ends;
 * log1p(u) is a short series where 1 + u would round. */
static hp_val softplus(ox_ctx *c, hp_val x) {
  hp_graph *g = c->g;
  hp_val u = hp_exp(g, hp_neg(g, hp_abs(g, x)));
  hp_val series = hp_mul(g, u, hp_sub(g, K(c, 1), hp_mul(g, u, hp_sub(g, K(c, 0.5), hp_div(g, u, K(c, 3))))));
  hp_val l = hp_where(g, hp_binary(g, HP_OP_LT, u, K(c, 0.01)), series, hp_log(g, hp_add(g, u, K(c, 1))));
  /* max(x, 0) as where, so that NaN stays NaN */
  return hp_add(g, hp_where(g, hp_binary(g, HP_OP_GT, x, K(c, 0)), x, K(c, 0)), l);
}

static hp_val input(ox_ctx *c) { return ox_tensor(c, 0); }

static hp_status attr2(ox_ctx *c, const char *n1, double d1, double *v1, const char *n2, double d2, double *v2) {
  if (ox_attr_float(c, n1, d1, v1)) return c->e->code;
  return n2 ? ox_attr_float(c, n2, d2, v2) : HP_OK;
}

OP(LeakyRelu) {
  double a;
  hp_val x = input(c);
  if (x < 0 || attr2(c, "alpha", 0.01, &a, NULL, 0, NULL)) return c->e->code;
  return ox_def(c, 0, neg_branch(c, x, hp_mul(c->g, x, K(c, a))));
}

/* slope broadcasts to x (unidirectionally in ONNX; numpy rules here) */
OP(PRelu) {
  hp_val x = input(c);
  if (x < 0) return c->e->code;
  hp_val s = ox_operand(c, 1, hp_val_rank(c->g, x));
  if (s < 0) return c->e->code;
  return ox_def(c, 0, neg_branch(c, x, hp_mul(c->g, x, s)));
}

OP(Elu) {
  double a;
  hp_val x = input(c);
  if (x < 0 || attr2(c, "alpha", 1.0, &a, NULL, 0, NULL)) return c->e->code;
  return ox_def(c, 0, neg_branch(c, x, hp_mul(c->g, hp_sub(c->g, hp_exp(c->g, x), K(c, 1)), K(c, a))));
}

OP(Celu) {
  double a;
  hp_val x = input(c);
  if (x < 0 || attr2(c, "alpha", 1.0, &a, NULL, 0, NULL)) return c->e->code;
  if (a == 0) return ox_fail(c, HP_E_INVALID_ARG, "alpha must not be 0");
  hp_val e = hp_sub(c->g, hp_exp(c->g, hp_div(c->g, x, K(c, a))), K(c, 1));
  return ox_def(c, 0, neg_branch(c, x, hp_mul(c->g, e, K(c, a))));
}

OP(Selu) {
  double a, gm;
  hp_val x = input(c);
  if (x < 0 || attr2(c, "alpha", 1.67326319217681884765625, &a, "gamma", 1.05070102214813232421875, &gm)) return c->e->code;
  hp_val neg = hp_mul(c->g, hp_sub(c->g, hp_exp(c->g, x), K(c, 1)), K(c, a));
  return ox_def(c, 0, hp_mul(c->g, neg_branch(c, x, neg), K(c, gm)));
}

OP(ThresholdedRelu) {
  double a;
  hp_val x = input(c);
  if (x < 0 || attr2(c, "alpha", 1.0, &a, NULL, 0, NULL)) return c->e->code;
  return ox_def(c, 0, hp_where(c->g, hp_binary(c->g, HP_OP_GT, x, K(c, a)), x, K(c, 0)));
}

OP(HardSigmoid) {
  double a, b;
  hp_val x = input(c);
  if (x < 0 || attr2(c, "alpha", 0.2, &a, "beta", 0.5, &b)) return c->e->code;
  return ox_def(c, 0, hard_sigmoid(c, x, a, b));
}

OP(HardSwish) {
  hp_val x = input(c);
  if (x < 0) return c->e->code;
  return ox_def(c, 0, hp_mul(c->g, x, hard_sigmoid(c, x, 1.0 / 6, 0.5)));
}

OP(Softplus) {
  hp_val x = input(c);
  if (x < 0) return c->e->code;
  return ox_def(c, 0, softplus(c, x));
}

OP(Softsign) {
  hp_val x = input(c);
  if (x < 0) return c->e->code;
  return ox_def(c, 0, hp_div(c->g, x, hp_add(c->g, hp_abs(c->g, x), K(c, 1))));
}

OP(Mish) {
  hp_val x = input(c);
  if (x < 0) return c->e->code;
  return ox_def(c, 0, hp_mul(c->g, x, hp_tanh(c->g, softplus(c, x))));
}

/* 1, -1, or x itself (0, -0 and NaN) */
OP(Sign) {
  hp_val x = input(c);
  if (x < 0) return c->e->code;
  hp_graph *g = c->g;
  hp_val in = hp_where(g, hp_binary(g, HP_OP_LT, x, K(c, 0)), K(c, -1), x);
  return ox_def(c, 0, hp_where(g, hp_binary(g, HP_OP_GT, x, K(c, 0)), K(c, 1), in));
}

/* ---- the softmax family ---------------------------------------------------------------- */
/* softmax / log-softmax / hardmax of x along axis */
static hp_val smax_along(ox_ctx *c, hp_val x, int axis, ox_smax kind) {
  hp_graph *g = c->g;
  if (kind == OX_SOFTMAX) return hp_softmax(g, x, axis);
  hp_val m = hp_reduce(g, HP_OP_RMAX, x, &axis, 1, true);
  if (kind == OX_LOGSOFTMAX) {
    hp_val d = hp_sub(g, x, m);
    return hp_sub(g, d, hp_log(g, hp_reduce(g, HP_OP_SUM, hp_exp(g, d), &axis, 1, true)));
  }
  /* hardmax: 1 at the first maximum.  A position is first when no earlier
   * one equals the max: the max's count over a running prefix is not
   * available, so the first index is the min over where(x == max, i, n). */
  const fe_shape *s = ox_shape(c, x);
  int64_t n;
  if (!s || !fe_dim_is_int(s->d[axis], &n))
    return ox_fail(c, HP_E_UNSUPPORTED, "Hardmax along a symbolic axis"), -1;
  hp_tensor t;
  int64_t shp[TINY_MAX_RANK];
  for (int i = 0; i < s->rank; i++) shp[i] = i == axis ? n : 1;
  if (hp_tensor_alloc(c->e, &t, TINY_FP32, s->rank, shp)) return -1;
  for (int64_t i = 0; i < n; i++) ((float *)t.data)[i] = (float)i;
  hp_val iota = ox_weight(c, "iota", &t);
  if (iota < 0) return -1;
  hp_val pos = hp_where(g, hp_binary(g, HP_OP_EQ, x, m), iota, K(c, (double)n));
  hp_val first = hp_reduce(g, HP_OP_RMIN, pos, &axis, 1, true);
  return hp_where(g, hp_binary(g, HP_OP_EQ, iota, first), K(c, 1), K(c, 0));
}

hp_status ox_softmax(ox_ctx *c, ox_smax kind) {
  hp_val x = ox_tensor(c, 0);
  if (x < 0) return c->e->code;
  fe_shape s = *ox_shape(c, x);
  int axis;
  int64_t a;
  if (ox_attr_int(c, "axis", c->opset >= 13 ? -1 : 1, &a) || ox_norm_axis(c, a, s.rank, &axis)) return c->e->code;
  if (c->opset >= 13 || axis == s.rank - 1) {
    hp_val y = smax_along(c, x, axis, kind);
    return c->e->code ? c->e->code : ox_def(c, 0, y);
  }
  /* before opset 13: over the flattened axes [axis, rank) */
  const fe_dim *p = fe_dim_int(c->A, 1), *q = fe_dim_int(c->A, 1);
  for (int i = 0; i < s.rank && p && q; i++) {
    if (i < axis) p = fe_dim_mul(c->A, p, s.d[i]);
    else q = fe_dim_mul(c->A, q, s.d[i]);
  }
  if (!p || !q) return ox_fail(c, HP_E_LIMIT, "the flattened size expression is too large");
  hp_val f = fe_reshape(c->g, x, &(fe_shape){.rank = 2, .d = {p, q}});
  if (ox_check(c, f)) return c->e->code;
  hp_val y = smax_along(c, f, 1, kind);
  if (c->e->code) return c->e->code;
  return ox_def(c, 0, fe_reshape(c->g, y, &s));
}

OP(LogSoftmax) { return ox_softmax(c, OX_LOGSOFTMAX); }
OP(Hardmax) { return ox_softmax(c, OX_HARDMAX); }

/* ---- dispatch ------------------------------------------------------------------------- */
static const struct {
  const char *name;
  ox_op_fn fn;
} ops[] = {
#define E(n) {#n, op_##n}
    E(Celu), E(Elu), E(Hardmax), E(HardSigmoid), E(HardSwish), E(LeakyRelu), E(LogSoftmax), E(Mish), E(PRelu), E(Selu),
    E(Sign), E(Softplus), E(Softsign), E(ThresholdedRelu),
#undef E
};

ox_op_fn ox_find_act(const char *op) {
  for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
    if (!strcmp(ops[i].name, op)) return ops[i].fn;
  return NULL;
}
