/* onnx_ops.c — one mapping per ONNX op type onto the frontend builder, and
 * the folding of integer (shape) computations at import time.
 * Needs: onnx_load.c (values, attributes, errors), the builder.
 * Gives: ox_node (the movement ops: onnx_ops_move.c).
 *
 * Integer values (Shape's result, Reshape's shape, Slice's starts...) are
 * folded when all their inputs are constant; they are kept as dims, so a
 * Shape of a symbolic dim ("batch") flows into a Reshape as that symbol.
 * Erf appears only inside GELU as PyTorch writes it, 0.5 x (1 + erf(x/√2)):
 * Erf, the Add of 1 and the two Muls are tracked as a partial pattern (ox
 * marks) and become one gelu. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_int.h"

#define OP(name) static harp_status op_##name(ox_ctx *c)

const fe_shape *ox_shape_of(ox_ctx *c, hg_val v) {
  const fe_node *n = fe_node_of(c->g, v);
  return n ? &n->shape : NULL;
}

int ox_rank_of(ox_ctx *c, hg_val v) { return hg_val_rank(c->g, v); }

harp_status ox_need_rank(ox_ctx *c, hg_val v, int lo, int hi, const char *what) {
  int r = ox_rank_of(c, v);
  if (r >= lo && r <= hi) return HARP_OK;
  if (lo == hi) return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "%s must have rank %d, got rank %d", what, lo, r);
  return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "%s must have rank %d to %d, got rank %d", what, lo, hi, r);
}

harp_status ox_norm_axis(ox_ctx *c, int64_t axis, int rank, int *out) {
  *out = 0;
  if (rank < 1) return ox_fail(c, HARP_E_INVALID_ARG, "axis %" PRId64 " on a scalar (rank 0): the op needs rank >= 1", axis);
  if (axis < -rank || axis >= rank)
    return ox_fail(c, HARP_E_INVALID_ARG, "axis %" PRId64 " is out of range for rank %d", axis, rank);
  *out = (int)(axis < 0 ? axis + rank : axis);
  return HARP_OK;
}

/* ---- constant inputs ------------------------------------------------------------------ */
/* Input i as integers known at import time (an attribute in disguise). */
static harp_status const_ints(ox_ctx *c, int i, const char *what, int64_t *out, int cap, int *n) {
  bool failed = false;
  ox_val *x = ox_in(c, i, &failed);
  if (failed) return c->e->code;
  if (!x) return ox_fail(c, HARP_E_ARITY, "input %d (%s) is required", i, what);
  if (!x->has_i)
    return ox_needs_data(c, x), ox_fail(c, HARP_E_UNSUPPORTED, "input %d (%s) must be an integer constant (an initializer, a Constant or a folded shape "
                   "computation); harp does not take it at run time (a graph input can be fixed at import: --param NAME=FILE)", i, what);
  if (x->in > cap) return ox_fail(c, HARP_E_LIMIT, "input %d (%s) has %" PRId64 " values (at most %d)", i, what, x->in, cap);
  char w[96];
  snprintf(w, sizeof w, "input %d (%s)", i, what);
  for (int64_t k = 0; k < x->in; k++)
    if (ox_known(c, x->iv[k], w, &out[k])) return c->e->code;
  *n = (int)x->in;
  return HARP_OK;
}

/* Optional input i as integers, else attribute `attr` (older opsets); *n = -1 when neither is there. */
static harp_status ints_in_or_attr(ox_ctx *c, int i, const char *attr, int64_t *out, int cap, int *n) {
  *n = -1;
  if (i < (int)c->node->n_input && c->node->input[i][0]) return const_ints(c, i, attr, out, cap, n);
  return ox_attr_ints(c, attr, out, cap, n);
}

/* A float known at import: a one-element float or integer constant. */
bool ox_const_scalar(ox_val *x, double *v) {
  if (x && x->has_t && ut_tensor_numel(&x->t) == 1) {
    *v = ut_tensor_get(&x->t, 0);
    return true;
  }
  int64_t n;
  if (x && x->has_i && x->in == 1 && fe_dim_is_int(x->iv[0], &n)) {
    *v = (double)n;
    return true;
  }
  return false;
}

static int const_rank(const ox_val *x) { return x->has_t ? x->t.rank : x->irank; }

/* Operand i of an elementwise op: a one-element constant that the other
 * operand's rank covers is a literal (so scales and epsilons stay constants). */
hg_val ox_operand(ox_ctx *c, int i, int other_rank) {
  bool failed = false;
  ox_val *x = ox_in(c, i, &failed);
  if (failed) return -1;
  double v;
  if (x && x->v <= 0 && !x->has_i && ox_const_scalar(x, &v) && const_rank(x) <= other_rank) {
    hg_val r = hg_const(c->g, v);
    return ox_check(c, r) ? -1 : r;
  }
  return ox_tensor(c, i);
}

/* ---- elementwise --------------------------------------------------------------------- */
static harp_status unary(ox_ctx *c, hg_op op) {
  hg_val x = ox_tensor(c, 0);
  if (x < 0) return c->e->code;
  return ox_def(c, 0, hg_unary(c->g, op, x));
}

OP(Relu) {
  if (ox_qdq_act_done(c)) return c->e->code; /* applied by a fused QDQ op (onnx_qdq.c) */
  return unary(c, HG_OP_RELU);
}
OP(Sigmoid) { return unary(c, HG_OP_SIGMOID); }
OP(Tanh) { return unary(c, HG_OP_TANH); }
OP(Exp) { return unary(c, HG_OP_EXP); }
OP(Log) { return unary(c, HG_OP_LOG); }
OP(Neg) { return unary(c, HG_OP_NEG); }
OP(Sqrt) { return unary(c, HG_OP_SQRT); }
OP(Reciprocal) { return unary(c, HG_OP_RECIP); }
OP(Abs) { return unary(c, HG_OP_ABS); }

OP(Gelu) {
  char approx[16];
  if (ox_attr_str(c, "approximate", "none", approx, sizeof approx)) return c->e->code;
  if (!strcmp(approx, "none")) return unary(c, HG_OP_GELU);
  if (strcmp(approx, "tanh") != 0) return ox_fail(c, HARP_E_INVALID_ARG, "approximate=\"%s\" (none or tanh)", approx);
  /* 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))), GPT-2's gelu_new */
  hg_val x = ox_tensor(c, 0);
  if (x < 0) return c->e->code;
  hg_graph *g = c->g;
  hg_val in = hg_mul(g, hg_add(g, x, hg_mul(g, hg_mul(g, hg_mul(g, x, x), x), hg_const(g, 0.044715))), hg_const(g, sqrt(2 / M_PI)));
  return ox_def(c, 0, hg_mul(g, hg_mul(g, x, hg_const(g, 0.5)), hg_add(g, hg_tanh(g, in), hg_const(g, 1))));
}

/* ---- activations made of where, exp and log ----------------------------------------- */
/* where(x < 0 (x <= 0 with le), neg, x) */
static harp_status negative_part(ox_ctx *c, hg_val x, hg_val neg, bool le) {
  hg_val cond = hg_binary(c->g, le ? HG_OP_LE : HG_OP_LT, x, hg_const(c->g, 0));
  return ox_def(c, 0, hg_where(c->g, cond, neg, x));
}

OP(LeakyRelu) {
  double alpha;
  hg_val x = ox_attr_float(c, "alpha", 0.01, &alpha) ? -1 : ox_tensor(c, 0);
  if (x < 0) return c->e->code;
  return negative_part(c, x, hg_mul(c->g, x, hg_const(c->g, alpha)), false);
}

/* Elu and Selu: [gamma *] where(x <= 0, alpha * (exp(x) - 1), x) */
static harp_status elu(ox_ctx *c, double alpha, double gamma) {
  hg_val x = ox_tensor(c, 0);
  if (x < 0) return c->e->code;
  hg_val neg = hg_mul(c->g, hg_sub(c->g, hg_exp(c->g, x), hg_const(c->g, 1)), hg_const(c->g, alpha));
  if (gamma != 1) x = hg_mul(c->g, x, hg_const(c->g, gamma)), neg = hg_mul(c->g, neg, hg_const(c->g, gamma));
  hg_val cond = hg_binary(c->g, HG_OP_LE, x, hg_const(c->g, 0));
  return ox_def(c, 0, hg_where(c->g, cond, neg, x));
}
OP(Elu) {
  double alpha;
  return ox_attr_float(c, "alpha", 1.0, &alpha) ? c->e->code : elu(c, alpha, 1.0);
}
OP(Selu) {
  double alpha, gamma;
  if (ox_attr_float(c, "alpha", 1.67326319217681884765625, &alpha) || ox_attr_float(c, "gamma", 1.05070102214813232421875, &gamma))
    return c->e->code;
  return elu(c, alpha, gamma);
}

OP(PRelu) {
  hg_val x = ox_tensor(c, 0), s = x > 0 ? ox_tensor(c, 1) : -1;
  if (x < 0 || s < 0) return c->e->code;
  int r = ox_rank_of(c, x);
  if (c->opset < 7 && ox_rank_of(c, s) == 1 && r > 2) { /* a slope per channel (axis 1) */
    fe_shape to = {.rank = r - 1};
    to.d[0] = ox_shape_of(c, s)->d[0];
    for (int i = 1; i < r - 1; i++) to.d[i] = fe_dim_int(c->A, 1);
    s = fe_reshape(c->g, s, &to);
  }
  return negative_part(c, x, hg_mul(c->g, x, s), false);
}

OP(Sign) {
  hg_val x = ox_tensor(c, 0);
  if (x < 0) return c->e->code;
  tiny_dtype dt = hg_val_dtype(c->g, x);
  hg_val z = hg_const_typed(c->g, 0, dt);
  hg_val pos = hg_cast(c->g, hg_binary(c->g, HG_OP_GT, x, z), dt), neg = hg_cast(c->g, hg_binary(c->g, HG_OP_LT, x, z), dt);
  hg_val y = hg_sub(c->g, pos, neg);
  if (tiny_dtype_is_float(dt)) y = hg_where(c->g, hg_binary(c->g, HG_OP_NE, x, x), x, y); /* NaN stays NaN, as numpy's */
  return ox_def(c, 0, y);
}

OP(Identity) {
  bool failed = false;
  ox_val *x = ox_in(c, 0, &failed);
  if (failed) return c->e->code;
  if (!x) return ox_fail(c, HARP_E_ARITY, "input 0 is required");
  return ox_def(c, 0, ox_value(c, x));
}

/* Dropout at inference: the identity, and a mask of all true. */
OP(Dropout) {
  ox_val *tm = ox_in(c, 2, NULL);
  double train = 0;
  if (tm && (tm->v > 0 || !ox_const_scalar(tm, &train)))
    return ox_needs_data(c, tm), ox_fail(c, HARP_E_UNSUPPORTED, "training_mode must be a constant (harp runs inference)");
  if (train != 0) return ox_fail(c, HARP_E_UNSUPPORTED, "training_mode=1 (harp runs inference)");
  if (op_Identity(c)) return c->e->code;
  if (c->node->n_output < 2 || !c->node->output[1][0]) return HARP_OK;
  hg_val x = ox_tensor(c, 0);
  if (x < 0) return c->e->code;
  return ox_def(c, 1, fe_expand(c->g, hg_const_typed(c->g, 1, TINY_BOOL), ox_shape_of(c, x)));
}

/* 1e-3: a constant stored in fp16 (PyTorch's half export: 1.4140625 for √2) */
static bool near(double a, double b) { return fabs(a - b) <= 1e-3 * fabs(b); }

static harp_status set_mark(ox_ctx *c, hg_val x, double k, int stage, double coef, bool has_x) {
  ox_val *y = ox_def_mark(c, 0);
  if (!y) return c->e->code;
  y->gx = x, y->gk = k, y->gstage = stage, y->gcoef = coef, y->ghasx = has_x;
  return HARP_OK;
}

/* erf(x / √2) starts the GELU pattern (kept as a mark: ox_value builds what
 * is left of it should the pattern break); any other Erf is computed */
OP(Erf) {
  bool failed = false;
  ox_val *in = ox_in(c, 0, &failed);
  if (failed) return c->e->code;
  if (in && in->v > 0 && in->gx > 0 && near(in->gk, M_SQRT1_2)) return set_mark(c, in->gx, in->gk, 1, 1, false);
  hg_val x = ox_tensor(c, 0);
  if (x < 0) return c->e->code;
  tiny_dtype dt = hg_val_dtype(c->g, x);
  if (!tiny_dtype_is_float(dt)) return ox_fail(c, HARP_E_DTYPE_MISMATCH, "Erf takes floating-point values");
  hg_val y = ox_erf32(c, dt == TINY_FP32 ? x : hg_cast(c->g, x, TINY_FP32));
  return ox_def(c, 0, dt == TINY_FP32 || y < 0 ? y : hg_cast(c->g, y, dt));
}

hg_val ox_gelu_partial(ox_ctx *c, const ox_val *m) {
  hg_graph *g = c->g;
  tiny_dtype dt = hg_val_dtype(g, m->gx);
  hg_val x = dt == TINY_FP32 ? m->gx : hg_cast(g, m->gx, TINY_FP32);
  hg_val y = ox_erf32(c, hg_mul(g, x, hg_const(g, m->gk)));
  if (m->gstage >= 2) y = hg_add(g, y, hg_const(g, 1));
  if (m->gstage >= 3) {
    y = hg_mul(g, y, hg_const(g, m->gcoef));
    if (m->ghasx) y = hg_mul(g, y, x);
  }
  return dt == TINY_FP32 || y < 0 ? y : hg_cast(g, y, dt);
}

/* The GELU pattern's Add and Muls; true when it took the node. */
static bool gelu_step(ox_ctx *c, const char *op, harp_status *st) {
  ox_val *a = ox_in(c, 0, NULL), *b = ox_in(c, 1, NULL);
  if (!a || !b) return false;
  ox_val *m = a->gstage > 0 ? a : b->gstage > 0 ? b : NULL, *o = m == a ? b : a;
  if (!m || o->gstage > 0) return false;
  double k;
  bool scalar = o->v <= 0 && ox_const_scalar(o, &k);
  if (m->gstage == 1 && !strcmp(op, "Add") && scalar && near(k, 1.0)) {
    *st = set_mark(c, m->gx, m->gk, 2, 1, false);
    return true;
  }
  if (m->gstage < 2 || strcmp(op, "Mul") != 0) return false;
  double coef = m->gcoef;
  bool has_x = m->ghasx;
  if (scalar) coef *= k;
  else if (!has_x && o->v == m->gx) has_x = true;
  else if (!has_x && o->v > 0 && o->gx == m->gx) has_x = true, coef *= o->gk;
  else return false;
  if (has_x && near(coef, 0.5)) *st = ox_def(c, 0, hg_gelu(c->g, m->gx));
  else *st = set_mark(c, m->gx, m->gk, 3, coef, has_x);
  return true;
}

/* Before opset 7, broadcast=1 with an axis puts B's dims at A's dims
 * axis, axis+1, ...: B gets trailing 1s so numpy broadcasting agrees. */
static harp_status legacy_broadcast(ox_ctx *c, hg_val a, hg_val *b) {
  int64_t bc, axis;
  if (c->opset >= 7 || !ox_attr(c, "axis")) return HARP_OK;
  if (ox_attr_int(c, "broadcast", 0, &bc) || ox_attr_int(c, "axis", 0, &axis)) return c->e->code;
  int ra = ox_rank_of(c, a), rb = ox_rank_of(c, *b), ax;
  if (!bc || rb == 0) return HARP_OK;
  if (ox_norm_axis(c, axis, ra, &ax)) return c->e->code;
  if (ax + rb > ra) return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "B (rank %d) does not fit at axis %d of A (rank %d)", rb, ax, ra);
  fe_shape s = *ox_shape_of(c, *b);
  while (s.rank < ra - ax) s.d[s.rank++] = fe_dim_int(c->A, 1);
  *b = fe_reshape(c->g, *b, &s);
  return ox_check(c, *b);
}

static harp_status binary(ox_ctx *c, hg_op op, const char *name) {
  harp_status st = HARP_OK;
  if ((!strcmp(name, "Add") || !strcmp(name, "Mul")) && gelu_step(c, name, &st)) return st;
  ox_val *a = ox_in(c, 0, NULL), *b = ox_in(c, 1, NULL);
  if (!a || !b) return ox_fail(c, HARP_E_ARITY, "needs two inputs");
  hg_val av = a->v, bv = b->v;
  int ra = av > 0 ? ox_rank_of(c, av) : const_rank(a), rb = bv > 0 ? ox_rank_of(c, bv) : const_rank(b);
  av = ox_operand(c, 0, rb);
  bv = av > 0 ? ox_operand(c, 1, ra) : -1;
  if (av < 0 || bv < 0 || legacy_broadcast(c, av, &bv)) return c->e->code;
  if (op == HG_OP_DIV && (!tiny_dtype_is_float(hg_val_dtype(c->g, av)) || !tiny_dtype_is_float(hg_val_dtype(c->g, bv))))
    return ox_fail(c, HARP_E_UNSUPPORTED, "integer Div (harp divides floating-point values only)");
  hg_val r = hg_binary(c->g, op, av, bv);
  if (ox_def(c, 0, r)) return c->e->code;
  /* x / √2, x * k: remembered for the GELU pattern */
  double k;
  int *yi = c->node->n_output && c->node->output[0][0] ? ut_strmap_find(&c->byname, c->node->output[0]) : NULL;
  if (yi && (!strcmp(name, "Div") || !strcmp(name, "Mul"))) {
    ox_val *s = NULL, *t = NULL;
    if (b->v <= 0 && ox_const_scalar(b, &k)) s = a, t = b;
    else if (!strcmp(name, "Mul") && a->v <= 0 && ox_const_scalar(a, &k)) s = b, t = a;
    if (s && t && s->v > 0 && k != 0) {
      c->vals[*yi].gx = s->v;
      c->vals[*yi].gk = !strcmp(name, "Div") ? 1 / k : k;
    }
  }
  return HARP_OK;
}

OP(Add) {
  int fused = ox_qdq_binary(c, '+'); /* DQ, DQ -> Add -> Q (onnx_qdq.c) */
  return fused ? (fused < 0 ? c->e->code : HARP_OK) : binary(c, HG_OP_ADD, "Add");
}
OP(Sub) { return binary(c, HG_OP_SUB, "Sub"); }
OP(Mul) {
  int fused = ox_qdq_binary(c, '*');
  return fused ? (fused < 0 ? c->e->code : HARP_OK) : binary(c, HG_OP_MUL, "Mul");
}
OP(Div) { return binary(c, HG_OP_DIV, "Div"); }
OP(Equal) { return binary(c, HG_OP_EQ, "Equal"); }
OP(Mod) { /* integer constants fold (onnx_fold.c) */
  return ox_fail(c, HARP_E_UNSUPPORTED, "Mod of values computed at run time (harp folds Mod of integer constants only)");
}
OP(Less) { return binary(c, HG_OP_LT, "Less"); }
OP(Greater) { return binary(c, HG_OP_GT, "Greater"); }
OP(LessOrEqual) { return binary(c, HG_OP_LE, "LessOrEqual"); }
OP(GreaterOrEqual) { return binary(c, HG_OP_GE, "GreaterOrEqual"); }

/* Max, Min, Sum, Mean: variadic, pairwise */
static hg_val chain(ox_ctx *c, hg_op op) {
  if (c->node->n_input < 1) {
    ox_fail(c, HARP_E_ARITY, "needs at least one input");
    return -1;
  }
  hg_val acc = ox_tensor(c, 0);
  for (int i = 1; i < (int)c->node->n_input && acc > 0; i++) {
    hg_val v = ox_tensor(c, i);
    acc = v > 0 ? hg_binary(c->g, op, acc, v) : -1;
  }
  return acc;
}
static harp_status variadic(ox_ctx *c, hg_op op, const char *name) {
  if (c->node->n_input == 2) return binary(c, op, name);
  return ox_def(c, 0, chain(c, op));
}
OP(Max) { return variadic(c, HG_OP_MAX, "Max"); }
OP(Min) { return variadic(c, HG_OP_MIN, "Min"); }
OP(Sum) {
  int fused = c->node->n_input == 2 ? ox_qdq_binary(c, '+') : 0; /* DQ, DQ -> Sum -> Q as an Add */
  return fused ? (fused < 0 ? c->e->code : HARP_OK) : variadic(c, HG_OP_ADD, "Add");
}
OP(Mean) {
  hg_val s = chain(c, HG_OP_ADD);
  if (s < 0 || c->node->n_input == 1) return ox_def(c, 0, s);
  return ox_def(c, 0, hg_mul(c->g, s, hg_const(c->g, 1.0 / (double)c->node->n_input)));
}

/* x^y as exp(y log|x|) (relative error ~|y log x| ulps): a negative x
 * takes the sign of its integer power; a finite negative x to a fractional
 * power is NaN (-inf's is inf or 0, as exp(y log inf) has it); y = 0 gives
 * 1.  y is a tensor, or the constant k when y is HG_NONE. */
static hg_val pow_exp_log(ox_ctx *c, hg_val x, hg_val y, double k) {
  hg_graph *g = c->g;
  hg_val neg = hg_binary(g, HG_OP_LT, x, hg_const(g, 0));
  if (y == HG_NONE && k == 0) { /* 1, NaN's too */
    hg_val one = hg_const_typed(g, 1, hg_val_dtype(g, x));
    return hg_where(g, neg, one, one);
  }
  hg_val r = hg_exp(g, hg_mul(g, y != HG_NONE ? y : hg_const(g, k), hg_log(g, hg_abs(g, x))));
  if (y == HG_NONE && k == floor(k)) return fmod(k, 2) != 0 ? hg_where(g, neg, hg_neg(g, r), r) : r;
  hg_val finite_neg = hg_where(g, neg, hg_binary(g, HG_OP_GT, x, hg_const(g, -INFINITY)), neg);
  hg_val frac = hg_where(g, finite_neg, hg_const(g, NAN), r);
  if (y == HG_NONE) return frac;
  hg_val half = hg_mul(g, y, hg_const(g, 0.5));
  hg_val isint = hg_binary(g, HG_OP_EQ, hg_floor(g, y), y), odd = hg_binary(g, HG_OP_NE, hg_floor(g, half), half);
  r = hg_where(g, neg, hg_where(g, isint, hg_where(g, odd, hg_neg(g, r), r), frac), r);
  return hg_where(g, hg_binary(g, HG_OP_EQ, y, hg_const(g, 0)), hg_const(g, 1), r);
}

OP(Pow) {
  ox_val *b = ox_in(c, 1, NULL);
  double k;
  hg_val x = ox_tensor(c, 0), r;
  if (x < 0) return c->e->code;
  tiny_dtype dt = hg_val_dtype(c->g, x);
  bool by_mul = b && b->v <= 0 && ox_const_scalar(b, &k) && (k == 1 || k == 2 || k == 3);
  if (dt != TINY_FP32 && dt != TINY_FP16 && dt != TINY_BF16 && !by_mul)
    return ox_fail(c, HARP_E_UNSUPPORTED, "an integer base with an exponent other than 1, 2 or 3 (harp computes Pow of floats)");
  if (!b || b->v > 0 || !ox_const_scalar(b, &k)) { /* a tensor exponent */
    hg_val y = ox_tensor(c, 1);
    if (y < 0) return c->e->code;
    if (hg_val_dtype(c->g, y) != dt) y = hg_cast(c->g, y, dt);
    return ox_def(c, 0, pow_exp_log(c, x, y, 0));
  }
  /* products, roots and a reciprocal where k is a multiple of 1/4 (x^2 in
   * exported LayerNorms, x^1.5, x^-0.75), else exp(k log|x|) */
  if ((r = ox_pow_quarters(c->g, x, k, true)) < 0) r = pow_exp_log(c, x, HG_NONE, k);
  return ox_def(c, 0, r);
}

OP(Where) {
  hg_val cond = ox_tensor(c, 0);
  if (cond < 0) return c->e->code;
  hg_val a = ox_operand(c, 1, ox_rank_of(c, cond)), b = a > 0 ? ox_operand(c, 2, ox_rank_of(c, cond)) : -1;
  if (a < 0 || b < 0) return c->e->code;
  return ox_def(c, 0, hg_where(c->g, cond, a, b));
}

OP(Not) {
  hg_val x = ox_tensor(c, 0);
  if (x < 0) return c->e->code;
  return ox_def(c, 0, hg_binary(c->g, HG_OP_EQ, x, hg_const_typed(c->g, 0, TINY_BOOL)));
}

/* And, Or, Xor of bools: where(a, b, false), where(a, true, b), a != b */
static harp_status logical(ox_ctx *c, char kind) {
  hg_val a = ox_tensor(c, 0), b = a > 0 ? ox_tensor(c, 1) : -1;
  if (a < 0 || b < 0) return c->e->code;
  if (hg_val_dtype(c->g, a) != TINY_BOOL || hg_val_dtype(c->g, b) != TINY_BOOL)
    return ox_fail(c, HARP_E_DTYPE_MISMATCH, "the inputs must be bool");
  hg_val r;
  if (kind == '&') r = hg_where(c->g, a, b, hg_const_typed(c->g, 0, TINY_BOOL));
  else if (kind == '|') r = hg_where(c->g, a, hg_const_typed(c->g, 1, TINY_BOOL), b);
  else r = hg_binary(c->g, HG_OP_NE, a, b);
  return ox_def(c, 0, r);
}
OP(And) { return logical(c, '&'); }
OP(Or) { return logical(c, '|'); }
OP(Xor) { return logical(c, '^'); }

OP(Clip) {
  if (ox_qdq_act_done(c)) return c->e->code; /* applied by a fused QDQ op (onnx_qdq.c) */
  hg_val x = ox_tensor(c, 0);
  if (x < 0) return c->e->code;
  hg_val lo = 0, hi = 0;
  if (c->opset < 11) {
    double a, b;
    if (ox_attr_float(c, "min", -INFINITY, &a) || ox_attr_float(c, "max", INFINITY, &b)) return c->e->code;
    if (isfinite(a)) lo = hg_const(c->g, a);
    if (isfinite(b)) hi = hg_const(c->g, b);
  } else {
    int r = ox_rank_of(c, x);
    if (c->node->n_input > 1 && c->node->input[1][0] && (lo = ox_operand(c, 1, r)) < 0) return c->e->code;
    if (c->node->n_input > 2 && c->node->input[2][0] && (hi = ox_operand(c, 2, r)) < 0) return c->e->code;
  }
  if (lo > 0) x = hg_max(c->g, x, lo);
  if (hi > 0) x = hg_min(c->g, x, hi);
  return ox_def(c, 0, x);
}

static harp_status cast_to(ox_ctx *c, int64_t to) {
  tiny_dtype dt;
  ox_val *x = ox_in(c, 0, NULL);
  if (!x) return ox_fail(c, HARP_E_ARITY, "input 0 is required");
  bool narrow = to == OX_INT16 || to == OX_UINT16; /* int8 / uint8 are harp dtypes */
  bool int_to = to == OX_INT32 || to == OX_INT64 || narrow;
  if (x->v <= 0 && x->has_t && (to == OX_FLOAT || to == OX_FLOAT16 || to == OX_BFLOAT16) && ox_dtype((int)to, &dt)) {
    ut_tensor t; /* a float constant stays a constant (a CastLike'd literal is still a literal) */
    if (ut_tensor_alloc(c->e, &t, dt, x->t.rank, x->t.shape)) return c->e->code;
    for (int64_t k = 0; k < ut_tensor_numel(&t); k++) ut_tensor_set(&t, k, ut_tensor_get(&x->t, k));
    return ox_def_tensor(c, 0, &t, (int)to);
  }
  if (!ox_dtype((int)to, &dt)) {
    if (int_to) dt = TINY_I32;
    else return ox_fail(c, HARP_E_UNSUPPORTED, "cast to %s: harp has no such type", ox_type_name((int)to));
  }
  hg_val v = ox_value(c, x);
  if (v < 0) return c->e->code;
  if (narrow && hg_val_dtype(c->g, v) != TINY_BOOL) /* bools are 0 / 1 in any integer type */
    return ox_fail(c, HARP_E_UNSUPPORTED, "cast to %s: harp computes integers as int32 and does not wrap to %s's range",
                   ox_type_name((int)to), ox_type_name((int)to));
  return ox_def(c, 0, hg_val_dtype(c->g, v) == dt ? v : hg_cast(c->g, v, dt));
}

OP(Cast) {
  int64_t to;
  if (ox_attr_int(c, "to", 0, &to)) return c->e->code;
  return cast_to(c, to);
}

/* Cast to the element type of input 1 (its ONNX type when known, else its harp dtype's) */
OP(CastLike) {
  ox_val *t = ox_in(c, 1, NULL);
  if (!t) return ox_fail(c, HARP_E_ARITY, "input 1 (target_type) is required");
  int oty = t->oty;
  if (!oty) {
    hg_val tv = ox_value(c, t);
    if (tv < 0) return c->e->code;
    static const int of[] = {[TINY_FP32] = OX_FLOAT, [TINY_FP16] = OX_FLOAT16, [TINY_BF16] = OX_BFLOAT16, [TINY_I32] = OX_INT32,
                             [TINY_BOOL] = OX_BOOL, [TINY_I8] = OX_INT8, [TINY_U8] = OX_UINT8};
    tiny_dtype dt = hg_val_dtype(c->g, tv);
    oty = (int)dt < (int)(sizeof of / sizeof *of) ? of[dt] : 0;
    if (!oty) return ox_fail(c, HARP_E_INTERNAL, "input 1 has a dtype with no ONNX type");
  }
  return cast_to(c, oty);
}

/* x - max - log(sum(exp(x - max))): no log of an underflowed probability */
hg_val ox_log_softmax(ox_ctx *c, hg_val x, int axis) {
  hg_val z = hg_sub(c->g, x, hg_reduce(c->g, HG_OP_RMAX, x, &axis, 1, true));
  return hg_sub(c->g, z, hg_log(c->g, hg_reduce(c->g, HG_OP_SUM, hg_exp(c->g, z), &axis, 1, true)));
}

/* Softmax, LogSoftmax, Hardmax; before opset 13 over axes [axis, r) flattened into one */
typedef enum { SOFTMAX, LOGSOFTMAX, HARDMAX } smax_kind;
static harp_status softmax(ox_ctx *c, smax_kind kind) {
  hg_val x = ox_tensor(c, 0);
  if (x < 0) return c->e->code;
  int r = ox_rank_of(c, x), axis;
  int64_t a;
  if (ox_attr_int(c, "axis", c->opset >= 13 ? -1 : 1, &a) || ox_norm_axis(c, a, r, &axis)) return c->e->code;
  const fe_shape xs = *ox_shape_of(c, x);
  bool flatten = c->opset < 13 && axis != r - 1;
  if (flatten) {
    fe_shape flat = {.rank = axis + 1};
    for (int i = 0; i < axis; i++) flat.d[i] = xs.d[i];
    flat.d[axis] = fe_dim_int(c->A, 1);
    for (int i = axis; i < r && flat.d[axis]; i++) flat.d[axis] = fe_dim_mul(c->A, flat.d[axis], xs.d[i]);
    if (!flat.d[axis]) return ox_fail(c, HARP_E_LIMIT, "the flattened size expression is too large");
    x = fe_reshape(c->g, x, &flat);
  }
  hg_val y;
  if (kind == SOFTMAX) {
    y = hg_softmax(c->g, x, axis);
  } else if (kind == HARDMAX) {
    if ((y = ox_hardmax(c, x, axis)) < 0 && c->e->code) return c->e->code;
  } else {
    y = ox_log_softmax(c, x, axis);
  }
  return ox_def(c, 0, flatten ? fe_reshape(c->g, y, &xs) : y);
}
OP(Softmax) {
  int fused = c->opset >= 13 ? ox_qdq_softmax(c) : 0; /* DQ -> Softmax -> Q (onnx_qdq.c) */
  return fused ? (fused < 0 ? c->e->code : HARP_OK) : softmax(c, SOFTMAX);
}
OP(LogSoftmax) { return softmax(c, LOGSOFTMAX); }
OP(Hardmax) { return softmax(c, HARDMAX); }

harp_status ox_reduce_axes(ox_ctx *c, int r, int input_from, int *axes, int *n, bool *keep, bool *noop) {
  int64_t k, no, ax[TINY_MAX_RANK];
  if (ox_attr_int(c, "keepdims", 1, &k) || ox_attr_int(c, "noop_with_empty_axes", 0, &no)) return c->e->code;
  if (c->opset >= input_from ? ints_in_or_attr(c, 1, "axes", ax, TINY_MAX_RANK, n) : ox_attr_ints(c, "axes", ax, TINY_MAX_RANK, n))
    return c->e->code;
  *keep = k != 0, *noop = *n <= 0 && no;
  if (*n < 0) *n = 0;
  for (int i = 0; i < *n; i++)
    if (ox_norm_axis(c, ax[i], r, &axes[i])) return c->e->code;
  return HARP_OK;
}

static harp_status reduce(ox_ctx *c, hg_op op, int input_from) {
  hg_val x = ox_tensor(c, 0);
  if (x < 0) return c->e->code;
  int n, axes[TINY_MAX_RANK];
  bool keep, noop;
  if (ox_reduce_axes(c, ox_rank_of(c, x), input_from, axes, &n, &keep, &noop)) return c->e->code;
  if (noop) return ox_def(c, 0, x);
  if (hg_val_dtype(c->g, x) == TINY_BOOL && (op == HG_OP_RMAX || op == HG_OP_RMIN)) {
    /* any / all (opset 20): over 0/1 in int32, whose empty max / min are
     * below 0 / above 1: an empty max is false, an empty min true */
    hg_val y = hg_reduce(c->g, op, hg_cast(c->g, x, TINY_I32), axes, n, keep);
    y = hg_binary(c->g, op == HG_OP_RMAX ? HG_OP_GT : HG_OP_GE, y, hg_const_typed(c->g, op == HG_OP_RMAX ? 0 : 1, TINY_I32));
    return ox_def(c, 0, y);
  }
  return ox_def(c, 0, hg_reduce(c->g, op, x, axes, n, keep));
}
OP(ReduceMean) { return reduce(c, HG_OP_MEAN, 18); }
OP(ReduceSum) { return reduce(c, HG_OP_SUM, 13); }
OP(ReduceMax) { return reduce(c, HG_OP_RMAX, 18); }
OP(ReduceMin) { return reduce(c, HG_OP_RMIN, 18); }

/* ---- dispatch ------------------------------------------------------------------------- */
typedef struct op_entry {
  const char *name;
  harp_status (*fn)(ox_ctx *c);
} op_entry;

static const op_entry ops[] = {
#define E(n) {#n, op_##n},
#define N(n) {#n, ox_op_##n},
    OX_NN_OPS(N)
    OX_RNN_OPS(N)
    E(Abs) E(Add) E(And) E(Cast) E(CastLike) E(Clip) E(Div) E(Dropout) E(Equal) E(Erf) E(Exp)
    E(Gelu) E(Greater) E(GreaterOrEqual) E(Hardmax) E(Identity) E(Less) E(LessOrEqual) E(Log) E(LogSoftmax) E(LeakyRelu) E(Elu) E(Selu) E(PRelu) E(Sign)
    E(Max) E(Mean) E(Min) E(Mod) E(Mul) E(Neg) E(Not) E(Or) E(Pow) E(Reciprocal) E(ReduceMax) E(ReduceMean) E(ReduceMin) E(ReduceSum)
    E(Relu) E(Sigmoid) E(Softmax) E(Sqrt) E(Sub) E(Sum) E(Tanh)
    E(Where) E(Xor)
#undef E
#undef N
};

harp_status ox_node(ox_ctx *c) {
  bool folded = false; /* every input known: evaluated here (onnx_fold.c) */
  if (ox_fold(c, &folded) || folded) return c->e->code;
  const char *op = c->node->op_type;
  for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
    if (!strcmp(ops[i].name, op)) return ops[i].fn(c);
  ox_op_fn fn = ox_find_move(op);
  if (!fn) fn = ox_find_act(op);
  if (!fn) fn = ox_find_more(op);
  if (!fn) fn = ox_find_math(op);
  if (!fn) fn = ox_find_index(op);
  if (!fn) fn = ox_find_resize(op);
  if (!fn) fn = ox_find_signal(op);
  if (!fn) fn = ox_find_host(op);
  if (!fn) fn = ox_find_flow(op); /* If, Loop, Scan */
  if (!fn) fn = ox_find_quant(c->node->domain, op);
  if (fn) return fn(c);
  return ox_fail(c, HARP_E_UNKNOWN_OP, "harp has no mapping for op %s", op);
}

bool ox_op_known(const char *op) {
  for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
    if (!strcmp(ops[i].name, op)) return true;
  return ox_find_move(op) || ox_find_act(op) || ox_find_more(op) || ox_find_math(op) || ox_find_index(op) || ox_find_resize(op) || ox_find_signal(op) || ox_find_host(op) ||
         ox_find_flow(op) || ox_find_quant(NULL, op);
}

/* ---- for the other op files ----------------------------------------------------------- */
harp_status ox_const_ints(ox_ctx *c, int i, const char *what, int64_t *out, int cap, int *n) {
  return const_ints(c, i, what, out, cap, n);
}
harp_status ox_ints_in_or_attr(ox_ctx *c, int i, const char *attr, int64_t *out, int cap, int *n) {
  return ints_in_or_attr(c, i, attr, out, cap, n);
}
