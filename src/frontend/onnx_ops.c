/* onnx_ops.c — one mapping per ONNX op type onto the frontend builder, and
 * the folding of integer (shape) computations at import time.
 * Needs: onnx_load.c (values, attributes, errors), the builder.
 * Gives: ox_node.
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

#define OP(name) static hp_status op_##name(ox_ctx *c)

static const fe_shape *shape_of(ox_ctx *c, hp_val v) {
  const fe_node *n = fe_node_of(c->g, v);
  return n ? &n->shape : NULL;
}

static int rank_of(ox_ctx *c, hp_val v) { return hp_val_rank(c->g, v); }

static hp_status need_rank(ox_ctx *c, hp_val v, int lo, int hi, const char *what) {
  int r = rank_of(c, v);
  if (r >= lo && r <= hi) return HP_OK;
  if (lo == hi) return ox_fail(c, HP_E_AXIS_SIZE_MISMATCH, "%s must have rank %d, got rank %d", what, lo, r);
  return ox_fail(c, HP_E_AXIS_SIZE_MISMATCH, "%s must have rank %d to %d, got rank %d", what, lo, hi, r);
}

static hp_status norm_axis(ox_ctx *c, int64_t axis, int rank, int *out) {
  *out = 0;
  if (axis < -rank || axis >= (rank ? rank : 1))
    return ox_fail(c, HP_E_INVALID_ARG, "axis %" PRId64 " is out of range for rank %d", axis, rank);
  *out = (int)(axis < 0 ? axis + rank : axis);
  return HP_OK;
}

/* ---- constant inputs ------------------------------------------------------------------ */
/* Input i as integers known at import time (an attribute in disguise). */
static hp_status const_ints(ox_ctx *c, int i, const char *what, int64_t *out, int cap, int *n) {
  bool failed = false;
  ox_val *x = ox_in(c, i, &failed);
  if (failed) return c->e->code;
  if (!x) return ox_fail(c, HP_E_ARITY, "input %d (%s) is required", i, what);
  if (!x->has_i)
    return ox_fail(c, HP_E_UNSUPPORTED, "input %d (%s) must be an integer constant (an initializer, a Constant or a folded shape "
                   "computation); harp does not take it at run time", i, what);
  if (x->in > cap) return ox_fail(c, HP_E_LIMIT, "input %d (%s) has %" PRId64 " values (at most %d)", i, what, x->in, cap);
  for (int64_t k = 0; k < x->in; k++)
    if (!fe_dim_is_int(x->iv[k], &out[k]))
      return ox_fail(c, HP_E_UNSUPPORTED, "input %d (%s) depends on the symbolic size %s; harp needs it known at import", i, what,
                     x->iv[k]->text);
  *n = (int)x->in;
  return HP_OK;
}

/* Optional input i as integers, else attribute `attr` (older opsets); *n = -1 when neither is there. */
static hp_status ints_in_or_attr(ox_ctx *c, int i, const char *attr, int64_t *out, int cap, int *n) {
  *n = -1;
  if (i < (int)c->node->n_input && c->node->input[i][0]) return const_ints(c, i, attr, out, cap, n);
  return ox_attr_ints(c, attr, out, cap, n);
}

/* A float known at import: a one-element float or integer constant. */
static bool const_scalar(ox_val *x, double *v) {
  if (x && x->has_t && hp_tensor_numel(&x->t) == 1) {
    *v = hp_tensor_get(&x->t, 0);
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
static hp_val operand(ox_ctx *c, int i, int other_rank) {
  bool failed = false;
  ox_val *x = ox_in(c, i, &failed);
  if (failed) return -1;
  double v;
  if (x && x->v <= 0 && !x->has_i && const_scalar(x, &v) && const_rank(x) <= other_rank) {
    hp_val r = hp_const(c->g, v);
    return ox_check(c, r) ? -1 : r;
  }
  return ox_tensor(c, i);
}

/* ---- integer folding -------------------------------------------------------------- */
static bool all_ints(ox_ctx *c) {
  if (c->node->n_input == 0) return false;
  for (size_t i = 0; i < c->node->n_input; i++) {
    if (!c->node->input[i][0]) continue;
    ox_val *x = ox_in(c, (int)i, NULL);
    if (!x || !x->has_i || x->v > 0) return false;
  }
  return true;
}

static const fe_dim *fold_bin(ox_ctx *c, const char *op, const fe_dim *a, const fe_dim *b) {
  int64_t x, y;
  bool ia = fe_dim_is_int(a, &x), ib = fe_dim_is_int(b, &y);
  if (!strcmp(op, "Add")) return fe_dim_add(c->A, a, b);
  if (!strcmp(op, "Sub")) return fe_dim_sub(c->A, a, b);
  if (!strcmp(op, "Mul")) return fe_dim_mul(c->A, a, b);
  if (!strcmp(op, "Div")) {
    if (ia && ib) return y ? fe_dim_int(c->A, x / y) : NULL; /* C truncation, like ONNX */
    return ib && y > 0 ? fe_dim_div(c->A, a, y) : NULL;
  }
  if (!strcmp(op, "Max") || !strcmp(op, "Min")) {
    if (!ia || !ib) return NULL;
    return fe_dim_int(c->A, (!strcmp(op, "Max")) == (x > y) ? x : y);
  }
  if (!strcmp(op, "Equal")) return ia && ib ? fe_dim_int(c->A, x == y) : fe_dim_cmp(a, b) == FE_SAME ? fe_dim_int(c->A, 1) : NULL;
  return NULL;
}

/* Elementwise integer op on constants (same shapes or a one-element side). */
static hp_status fold_binary(ox_ctx *c, const char *op) {
  ox_val *a = ox_in(c, 0, NULL), *b = ox_in(c, 1, NULL);
  if (!a || !b) return ox_fail(c, HP_E_ARITY, "needs two inputs");
  const ox_val *big = a->in >= b->in ? a : b;
  if (a->in != b->in && a->in != 1 && b->in != 1)
    return ox_fail(c, HP_E_UNSUPPORTED, "folding integer %s of %" PRId64 " and %" PRId64 " values", op, a->in, b->in);
  ox_val *y = ox_def_ints(c, 0, big->irank, big->ishape, big->in);
  if (!y) return c->e->code;
  for (int64_t k = 0; k < big->in; k++) {
    const fe_dim *d = fold_bin(c, op, a->iv[a->in == 1 ? 0 : k], b->iv[b->in == 1 ? 0 : k]);
    if (!d) return ox_fail(c, HP_E_UNSUPPORTED, "cannot fold integer %s of %s and %s", op, a->iv[a->in == 1 ? 0 : k]->text,
                           b->iv[b->in == 1 ? 0 : k]->text);
    y->iv[k] = d;
  }
  return HP_OK;
}

/* ---- elementwise --------------------------------------------------------------------- */
static hp_status unary(ox_ctx *c, hp_op op) {
  hp_val x = ox_tensor(c, 0);
  if (x < 0) return c->e->code;
  return ox_def(c, 0, hp_unary(c->g, op, x));
}

OP(Relu) { return unary(c, HP_OP_RELU); }
OP(Sigmoid) { return unary(c, HP_OP_SIGMOID); }
OP(Tanh) { return unary(c, HP_OP_TANH); }
OP(Exp) { return unary(c, HP_OP_EXP); }
OP(Log) { return unary(c, HP_OP_LOG); }
OP(Neg) { return unary(c, HP_OP_NEG); }
OP(Sqrt) { return unary(c, HP_OP_SQRT); }
OP(Reciprocal) { return unary(c, HP_OP_RECIP); }
OP(Abs) { return unary(c, HP_OP_ABS); }

OP(Gelu) {
  char approx[16];
  if (ox_attr_str(c, "approximate", "none", approx, sizeof approx)) return c->e->code;
  if (strcmp(approx, "none") != 0)
    return ox_fail(c, HP_E_UNSUPPORTED, "approximate=\"%s\": harp's gelu is the exact (erf) form", approx);
  return unary(c, HP_OP_GELU);
}

OP(Identity) {
  bool failed = false;
  ox_val *x = ox_in(c, 0, &failed);
  if (failed) return c->e->code;
  if (!x) return ox_fail(c, HP_E_ARITY, "input 0 is required");
  if (x->v <= 0 && x->has_i) { /* keep a folded integer value folded */
    ox_val *y = ox_def_ints(c, 0, x->irank, x->ishape, x->in);
    if (!y) return c->e->code;
    memcpy(y->iv, x->iv, sizeof *y->iv * (size_t)x->in);
    return HP_OK;
  }
  return ox_def(c, 0, ox_value(c, x));
}

OP(Dropout) {
  if (c->node->n_output > 1 && c->node->output[1][0])
    return ox_fail(c, HP_E_UNSUPPORTED, "the mask output of Dropout is not supported (inference only)");
  return op_Identity(c);
}

static bool near(double a, double b) { return fabs(a - b) <= 1e-4 * fabs(b); }

static hp_status set_mark(ox_ctx *c, hp_val x, int stage, double coef, bool has_x) {
  ox_val *y = ox_def_mark(c, 0);
  if (!y) return c->e->code;
  y->gx = x, y->gstage = stage, y->gcoef = coef, y->ghasx = has_x;
  return HP_OK;
}

OP(Erf) {
  bool failed = false;
  ox_val *in = ox_in(c, 0, &failed);
  if (failed) return c->e->code;
  if (!in || in->v <= 0 || in->gx <= 0 || !near(in->gk, M_SQRT1_2))
    return ox_fail(c, HP_E_UNSUPPORTED, "Erf is supported only inside GELU, 0.5 * x * (1 + erf(x / sqrt(2)))");
  return set_mark(c, in->gx, 1, 1, false);
}

/* The GELU pattern's Add and Muls; true when it took the node. */
static bool gelu_step(ox_ctx *c, const char *op, hp_status *st) {
  ox_val *a = ox_in(c, 0, NULL), *b = ox_in(c, 1, NULL);
  if (!a || !b) return false;
  ox_val *m = a->gstage > 0 ? a : b->gstage > 0 ? b : NULL, *o = m == a ? b : a;
  if (!m || o->gstage > 0) return false;
  double k;
  bool scalar = o->v <= 0 && const_scalar(o, &k);
  if (m->gstage == 1 && !strcmp(op, "Add") && scalar && near(k, 1.0)) {
    *st = set_mark(c, m->gx, 2, 1, false);
    return true;
  }
  if (m->gstage < 2 || strcmp(op, "Mul") != 0) return false;
  double coef = m->gcoef;
  bool has_x = m->ghasx;
  if (scalar) coef *= k;
  else if (!has_x && o->v == m->gx) has_x = true;
  else if (!has_x && o->v > 0 && o->gx == m->gx) has_x = true, coef *= o->gk;
  else return false;
  if (has_x && near(coef, 0.5)) *st = ox_def(c, 0, hp_gelu(c->g, m->gx));
  else *st = set_mark(c, m->gx, 3, coef, has_x);
  return true;
}

static hp_status binary(ox_ctx *c, hp_op op, const char *name) {
  if (all_ints(c)) return fold_binary(c, name);
  hp_status st = HP_OK;
  if ((!strcmp(name, "Add") || !strcmp(name, "Mul")) && gelu_step(c, name, &st)) return st;
  ox_val *a = ox_in(c, 0, NULL), *b = ox_in(c, 1, NULL);
  if (!a || !b) return ox_fail(c, HP_E_ARITY, "needs two inputs");
  hp_val av = a->v, bv = b->v;
  int ra = av > 0 ? rank_of(c, av) : const_rank(a), rb = bv > 0 ? rank_of(c, bv) : const_rank(b);
  av = operand(c, 0, rb);
  bv = av > 0 ? operand(c, 1, ra) : -1;
  if (av < 0 || bv < 0) return c->e->code;
  hp_val r = hp_binary(c->g, op, av, bv);
  if (ox_def(c, 0, r)) return c->e->code;
  /* x / √2, x * k: remembered for the GELU pattern */
  double k;
  int *yi = c->node->n_output && c->node->output[0][0] ? hp_strmap_find(&c->byname, c->node->output[0]) : NULL;
  if (yi && (!strcmp(name, "Div") || !strcmp(name, "Mul"))) {
    ox_val *s = NULL, *t = NULL;
    if (b->v <= 0 && const_scalar(b, &k)) s = a, t = b;
    else if (!strcmp(name, "Mul") && a->v <= 0 && const_scalar(a, &k)) s = b, t = a;
    if (s && t && s->v > 0 && k != 0) {
      c->vals[*yi].gx = s->v;
      c->vals[*yi].gk = !strcmp(name, "Div") ? 1 / k : k;
    }
  }
  return HP_OK;
}

OP(Add) { return binary(c, HP_OP_ADD, "Add"); }
OP(Sub) { return binary(c, HP_OP_SUB, "Sub"); }
OP(Mul) { return binary(c, HP_OP_MUL, "Mul"); }
OP(Div) { return binary(c, HP_OP_DIV, "Div"); }
OP(Equal) { return binary(c, HP_OP_EQ, "Equal"); }
OP(Less) { return binary(c, HP_OP_LT, "Less"); }
OP(Greater) { return binary(c, HP_OP_GT, "Greater"); }
OP(LessOrEqual) { return binary(c, HP_OP_LE, "LessOrEqual"); }
OP(GreaterOrEqual) { return binary(c, HP_OP_GE, "GreaterOrEqual"); }

/* Max, Min, Sum: variadic, pairwise */
static hp_status variadic(ox_ctx *c, hp_op op, const char *name) {
  if (c->node->n_input == 2) return binary(c, op, name);
  if (c->node->n_input < 1) return ox_fail(c, HP_E_ARITY, "needs at least one input");
  hp_val acc = ox_tensor(c, 0);
  for (int i = 1; i < (int)c->node->n_input && acc > 0; i++) {
    hp_val v = ox_tensor(c, i);
    acc = v > 0 ? hp_binary(c->g, op, acc, v) : -1;
  }
  return ox_def(c, 0, acc);
}
OP(Max) { return variadic(c, HP_OP_MAX, "Max"); }
OP(Min) { return variadic(c, HP_OP_MIN, "Min"); }
OP(Sum) { return variadic(c, HP_OP_ADD, "Add"); }

OP(Pow) {
  ox_val *b = ox_in(c, 1, NULL);
  double k;
  if (!b || b->v > 0 || !const_scalar(b, &k))
    return ox_fail(c, HP_E_UNSUPPORTED, "the exponent must be a one-element constant");
  hp_val x = ox_tensor(c, 0), r;
  if (x < 0) return c->e->code;
  if (k == 1) r = x;
  else if (k == 2) r = hp_mul(c->g, x, x);
  else if (k == 3) r = hp_mul(c->g, hp_mul(c->g, x, x), x);
  else if (k == 0.5) r = hp_sqrt(c->g, x);
  else if (k == -0.5) r = hp_rsqrt(c->g, x);
  else if (k == -1) r = hp_recip(c->g, x);
  else return ox_fail(c, HP_E_UNSUPPORTED, "exponent %g (harp has x^1, x^2, x^3, x^0.5, x^-0.5 and x^-1)", k);
  return ox_def(c, 0, r);
}

OP(Where) {
  hp_val cond = ox_tensor(c, 0);
  if (cond < 0) return c->e->code;
  hp_val a = operand(c, 1, rank_of(c, cond)), b = a > 0 ? operand(c, 2, rank_of(c, cond)) : -1;
  if (a < 0 || b < 0) return c->e->code;
  return ox_def(c, 0, hp_where(c->g, cond, a, b));
}

OP(Not) {
  hp_val x = ox_tensor(c, 0);
  if (x < 0) return c->e->code;
  return ox_def(c, 0, hp_binary(c->g, HP_OP_EQ, x, hp_const_typed(c->g, 0, TINY_BOOL)));
}

OP(Clip) {
  hp_val x = ox_tensor(c, 0);
  if (x < 0) return c->e->code;
  hp_val lo = 0, hi = 0;
  if (c->opset < 11) {
    double a, b;
    if (ox_attr_float(c, "min", -INFINITY, &a) || ox_attr_float(c, "max", INFINITY, &b)) return c->e->code;
    if (isfinite(a)) lo = hp_const(c->g, a);
    if (isfinite(b)) hi = hp_const(c->g, b);
  } else {
    int r = rank_of(c, x);
    if (c->node->n_input > 1 && c->node->input[1][0] && (lo = operand(c, 1, r)) < 0) return c->e->code;
    if (c->node->n_input > 2 && c->node->input[2][0] && (hi = operand(c, 2, r)) < 0) return c->e->code;
  }
  if (lo > 0) x = hp_max(c->g, x, lo);
  if (hi > 0) x = hp_min(c->g, x, hi);
  return ox_def(c, 0, x);
}

OP(Cast) {
  int64_t to;
  if (ox_attr_int(c, "to", 0, &to)) return c->e->code;
  tiny_dtype dt;
  ox_val *x = ox_in(c, 0, NULL);
  if (!x) return ox_fail(c, HP_E_ARITY, "input 0 is required");
  bool int_to = to == OX_INT32 || to == OX_INT64 || to == OX_INT8 || to == OX_UINT8 || to == OX_INT16 || to == OX_UINT16;
  if (x->v <= 0 && x->has_i && int_to) return op_Identity(c); /* integers stay folded */
  if (x->v <= 0 && x->has_i && to == OX_FLOAT) {
    hp_tensor t;
    if (hp_tensor_alloc(c->e, &t, TINY_FP32, x->irank, x->ishape)) return c->e->code;
    for (int64_t k = 0; k < x->in; k++) {
      int64_t v;
      if (!fe_dim_is_int(x->iv[k], &v)) {
        hp_tensor_free(&t);
        return ox_fail(c, HP_E_UNSUPPORTED, "cannot cast the symbolic size %s to float", x->iv[k]->text);
      }
      ((float *)t.data)[k] = (float)v;
    }
    return ox_def_tensor(c, 0, &t, OX_FLOAT);
  }
  if (!ox_dtype((int)to, &dt)) {
    if (int_to) dt = TINY_I32;
    else return ox_fail(c, HP_E_UNSUPPORTED, "cast to %s: harp has no such type", ox_type_name((int)to));
  }
  hp_val v = ox_value(c, x);
  if (v < 0) return c->e->code;
  return ox_def(c, 0, hp_val_dtype(c->g, v) == dt ? v : hp_cast(c->g, v, dt));
}

/* ---- contractions ---------------------------------------------------------------------- */
OP(MatMul) {
  hp_val a = ox_tensor(c, 0), b = a > 0 ? ox_tensor(c, 1) : -1;
  if (a < 0 || b < 0) return c->e->code;
  int ra = rank_of(c, a), rb = rank_of(c, b);
  if (ra < 1 || rb < 1) return ox_fail(c, HP_E_AXIS_SIZE_MISMATCH, "MatMul of a scalar");
  /* vectors: [K] -> [1, K] (a) or [K, 1] (b), the unit dim dropped after */
  const fe_shape *sa = shape_of(c, a), *sb = shape_of(c, b);
  if (ra == 1) a = fe_reshape(c->g, a, &(fe_shape){.rank = 2, .d = {fe_dim_int(c->A, 1), sa->d[0]}});
  if (rb == 1) b = fe_reshape(c->g, b, &(fe_shape){.rank = 2, .d = {sb->d[0], fe_dim_int(c->A, 1)}});
  hp_val r = hp_matmul(c->g, a, b);
  if ((ra == 1 || rb == 1) && r > 0) {
    fe_shape s = *shape_of(c, r);
    if (ra == 1) s.d[s.rank - 2] = s.d[s.rank - 1];
    s.rank--;
    r = fe_reshape(c->g, r, &s);
  }
  return ox_def(c, 0, r);
}

OP(Gemm) {
  int64_t ta, tb;
  double alpha, beta;
  if (ox_attr_int(c, "transA", 0, &ta) || ox_attr_int(c, "transB", 0, &tb) || ox_attr_float(c, "alpha", 1, &alpha) ||
      ox_attr_float(c, "beta", 1, &beta))
    return c->e->code;
  hp_val a = ox_tensor(c, 0), b = a > 0 ? ox_tensor(c, 1) : -1;
  if (a < 0 || b < 0) return c->e->code;
  if (need_rank(c, a, 2, 2, "A") || need_rank(c, b, 2, 2, "B")) return c->e->code;
  static const int t2[2] = {1, 0};
  if (ta) a = hp_permute(c->g, a, t2, 2);
  if (tb) b = hp_permute(c->g, b, t2, 2);
  hp_val r = hp_matmul(c->g, a, b);
  if (alpha != 1) r = hp_mul(c->g, r, hp_const(c->g, alpha));
  if (c->node->n_input > 2 && c->node->input[2][0] && beta != 0) {
    hp_val cv = operand(c, 2, 2);
    if (cv < 0) return c->e->code;
    if (beta != 1) cv = hp_mul(c->g, cv, hp_const(c->g, beta));
    r = hp_add(c->g, r, cv);
  }
  return ox_def(c, 0, r);
}

/* kernel, strides, dilations and pads (top, bottom, left, right) of a 2-D
 * window op; auto_pad needs the input's spatial sizes known. */
typedef struct win2d {
  int64_t k[2], s[2], d[2], pad[4];
} win2d;

static hp_status window(ox_ctx *c, hp_val x, const int64_t *kernel, win2d *w) {
  int64_t v[8];
  int n;
  for (int i = 0; i < 2; i++) w->k[i] = kernel[i], w->s[i] = 1, w->d[i] = 1;
  memset(w->pad, 0, sizeof w->pad);
  if (ox_attr_ints(c, "strides", v, 8, &n)) return c->e->code;
  if (n >= 0 && n != 2) return ox_fail(c, HP_E_INVALID_ARG, "strides must have 2 values (2-D), got %d", n);
  if (n == 2) w->s[0] = v[0], w->s[1] = v[1];
  if (ox_attr_ints(c, "dilations", v, 8, &n)) return c->e->code;
  if (n >= 0 && n != 2) return ox_fail(c, HP_E_INVALID_ARG, "dilations must have 2 values (2-D), got %d", n);
  if (n == 2) w->d[0] = v[0], w->d[1] = v[1];
  for (int i = 0; i < 2; i++)
    if (w->s[i] < 1 || w->d[i] < 1 || w->k[i] < 1 || w->s[i] > OX_MAX_DIM || w->d[i] > OX_MAX_DIM || w->k[i] > OX_MAX_DIM)
      return ox_fail(c, HP_E_INVALID_ARG, "kernel sizes, strides and dilations must be >= 1");
  char ap[32];
  if (ox_attr_str(c, "auto_pad", "NOTSET", ap, sizeof ap)) return c->e->code;
  if (!strcmp(ap, "NOTSET")) {
    if (ox_attr_ints(c, "pads", v, 8, &n)) return c->e->code;
    if (n >= 0 && n != 4) return ox_fail(c, HP_E_INVALID_ARG, "pads must have 4 values (2-D), got %d", n);
    if (n == 4) {
      for (int i = 0; i < 4; i++)
        if (v[i] < 0 || v[i] > OX_MAX_DIM) return ox_fail(c, HP_E_INVALID_ARG, "pads must be >= 0");
      w->pad[0] = v[0], w->pad[1] = v[2], w->pad[2] = v[1], w->pad[3] = v[3]; /* ONNX: begins, then ends */
    }
  } else if (!strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER")) {
    const fe_shape *s = shape_of(c, x);
    for (int i = 0; i < 2; i++) {
      int64_t in;
      if (!fe_dim_is_int(s->d[2 + i], &in))
        return ox_fail(c, HP_E_UNSUPPORTED, "auto_pad=%s needs the spatial size known (it is %s)", ap, s->d[2 + i]->text);
      int64_t out = (in + w->s[i] - 1) / w->s[i];
      int64_t total = (out - 1) * w->s[i] + (w->k[i] - 1) * w->d[i] + 1 - in;
      if (total < 0) total = 0;
      int64_t small = total / 2, big = total - small;
      bool upper = !strcmp(ap, "SAME_UPPER");
      w->pad[2 * i] = upper ? small : big;
      w->pad[2 * i + 1] = upper ? big : small;
    }
  } else if (strcmp(ap, "VALID") != 0) {
    return ox_fail(c, HP_E_INVALID_ARG, "auto_pad \"%s\" (expected NOTSET, SAME_UPPER, SAME_LOWER or VALID)", ap);
  }
  return HP_OK;
}

OP(Conv) {
  hp_val x = ox_tensor(c, 0), w = x > 0 ? ox_tensor(c, 1) : -1;
  if (x < 0 || w < 0) return c->e->code;
  int r = rank_of(c, x);
  if (r == 3) return ox_fail(c, HP_E_UNSUPPORTED, "1-D convolution (harp has conv2d only)");
  if (need_rank(c, x, 4, 4, "the input (N, C, H, W)") || need_rank(c, w, 4, 4, "the weight")) return c->e->code;
  const fe_shape *ws = shape_of(c, w);
  int64_t kernel[2], ks[8];
  int n;
  for (int i = 0; i < 2; i++)
    if (!fe_dim_is_int(ws->d[2 + i], &kernel[i])) return ox_fail(c, HP_E_UNSUPPORTED, "the kernel size must be known");
  if (ox_attr_ints(c, "kernel_shape", ks, 8, &n)) return c->e->code;
  if (n >= 0 && (n != 2 || ks[0] != kernel[0] || ks[1] != kernel[1]))
    return ox_fail(c, HP_E_AXIS_SIZE_MISMATCH, "kernel_shape does not match the weight's %" PRId64 "x%" PRId64, kernel[0], kernel[1]);
  win2d wd;
  int64_t group;
  if (window(c, x, kernel, &wd) || ox_attr_int(c, "group", 1, &group)) return c->e->code;
  if (group < 1 || group > OX_MAX_DIM) return ox_fail(c, HP_E_INVALID_ARG, "group must be >= 1");
  hp_conv2d_opts o = {.groups = group};
  memcpy(o.stride, wd.s, sizeof o.stride);
  memcpy(o.dilation, wd.d, sizeof o.dilation);
  memcpy(o.pad, wd.pad, sizeof o.pad);
  if (c->node->n_input > 2 && c->node->input[2][0] && (o.bias = ox_tensor(c, 2)) < 0) return c->e->code;
  return ox_def(c, 0, hp_conv2d(c->g, x, w, &o));
}

/* BatchNormalization (inference): y = x * s + t per channel, s and t computed here. */
OP(BatchNormalization) {
  double eps;
  int64_t training;
  if (ox_attr_float(c, "epsilon", 1e-5, &eps) || ox_attr_int(c, "training_mode", 0, &training)) return c->e->code;
  if (training) return ox_fail(c, HP_E_UNSUPPORTED, "training_mode=1 (harp runs inference)");
  for (size_t i = 1; i < c->node->n_output; i++)
    if (c->node->output[i][0]) return ox_fail(c, HP_E_UNSUPPORTED, "the running statistics outputs (training) are not supported");
  hp_val x = ox_tensor(c, 0);
  if (x < 0) return c->e->code;
  int r = rank_of(c, x);
  if (r < 2) return ox_fail(c, HP_E_AXIS_SIZE_MISMATCH, "the input must have rank >= 2 (N, C, ...)");
  const hp_tensor *p[4];
  for (int i = 0; i < 4; i++) {
    ox_val *v = ox_in(c, i + 1, NULL);
    if (!v || !v->has_t || v->v > 0 || v->t.dtype != TINY_FP32 || v->t.rank != 1)
      return ox_fail(c, HP_E_UNSUPPORTED, "scale, B, mean and var must be float32 constants of rank 1");
    p[i] = &v->t;
    if (p[i]->shape[0] != p[0]->shape[0]) return ox_fail(c, HP_E_AXIS_SIZE_MISMATCH, "scale, B, mean and var differ in length");
  }
  int64_t ch = p[0]->shape[0], shp[TINY_MAX_RANK];
  shp[0] = ch;
  for (int i = 1; i < r - 1; i++) shp[i] = 1;
  hp_tensor s, t;
  if (hp_tensor_alloc(c->e, &s, TINY_FP32, r - 1, shp)) return c->e->code;
  if (hp_tensor_alloc(c->e, &t, TINY_FP32, r - 1, shp)) {
    hp_tensor_free(&s);
    return c->e->code;
  }
  for (int64_t k = 0; k < ch; k++) {
    const float *sc = p[0]->data, *b = p[1]->data, *mu = p[2]->data, *var = p[3]->data;
    float f = sc[k] / sqrtf(var[k] + (float)eps);
    ((float *)s.data)[k] = f;
    ((float *)t.data)[k] = b[k] - mu[k] * f;
  }
  /* the scale and shift as weights named after the node's output */
  ox_val sv = {.name = hp_arena_printf(c->A, "%s.bn_scale", c->node->output[0]), .has_t = true, .t = s};
  ox_val tv = {.name = hp_arena_printf(c->A, "%s.bn_shift", c->node->output[0]), .has_t = true, .t = t};
  hp_val svv = sv.name ? ox_value(c, &sv) : -1, tvv = svv > 0 && tv.name ? ox_value(c, &tv) : -1;
  hp_tensor_free(&sv.t), hp_tensor_free(&tv.t);
  if (svv < 0 || tvv < 0) return c->e->code ? c->e->code : ox_fail(c, HP_E_NO_MEMORY, "out of memory");
  return ox_def(c, 0, hp_add(c->g, hp_mul(c->g, x, svv), tvv));
}

static hp_status pool(ox_ctx *c, bool is_max) {
  hp_val x = ox_tensor(c, 0);
  if (x < 0) return c->e->code;
  if (need_rank(c, x, 4, 4, "the input (N, C, H, W)")) return c->e->code;
  int64_t ks[8], ceil_mode, cip = 0, order = 0;
  int n;
  if (ox_attr_ints(c, "kernel_shape", ks, 8, &n)) return c->e->code;
  if (n != 2) return ox_fail(c, HP_E_INVALID_ARG, "kernel_shape must have 2 values (2-D pooling)");
  win2d w;
  if (window(c, x, ks, &w) || ox_attr_int(c, "ceil_mode", 0, &ceil_mode) ||
      ox_attr_int(c, "count_include_pad", 0, &cip) || ox_attr_int(c, "storage_order", 0, &order))
    return c->e->code;
  if (w.d[0] != 1 || w.d[1] != 1) return ox_fail(c, HP_E_UNSUPPORTED, "dilated pooling");
  if (c->node->n_output > 1 && c->node->output[1][0]) return ox_fail(c, HP_E_UNSUPPORTED, "the Indices output of MaxPool");
  const fe_shape *s = shape_of(c, x);
  if (ceil_mode) { /* more padding at the end where ceil gives one more window */
    for (int i = 0; i < 2; i++) {
      int64_t in;
      if (!fe_dim_is_int(s->d[2 + i], &in)) return ox_fail(c, HP_E_UNSUPPORTED, "ceil_mode needs the spatial size known");
      int64_t span = in + w.pad[2 * i] + w.pad[2 * i + 1] - w.k[i];
      int64_t out = (span + w.s[i] - 1) / w.s[i] + 1;
      if ((out - 1) * w.s[i] >= in + w.pad[2 * i]) out--;
      int64_t extra = (out - 1) * w.s[i] + w.k[i] - (in + w.pad[2 * i] + w.pad[2 * i + 1]);
      if (extra > 0 && !is_max) return ox_fail(c, HP_E_UNSUPPORTED, "ceil_mode=1 average pooling with a partial window");
      if (extra > 0) w.pad[2 * i + 1] += extra;
    }
  }
  bool padded = w.pad[0] || w.pad[1] || w.pad[2] || w.pad[3];
  if (padded && !is_max && !cip)
    return ox_fail(c, HP_E_UNSUPPORTED, "average pooling with padding and count_include_pad=0 (harp's pool divides by the window)");
  if (padded) {
    int64_t lo[4] = {0, 0, w.pad[0], w.pad[2]}, hi[4] = {0, 0, w.pad[1], w.pad[3]};
    x = hp_pad(c->g, x, lo, hi, 4, is_max ? -INFINITY : 0.0);
  }
  hp_pool2d_opts o = {.kernel = {w.k[0], w.k[1]}, .stride = {w.s[0], w.s[1]}};
  return ox_def(c, 0, is_max ? hp_max_pool2d(c->g, x, &o) : hp_avg_pool2d(c->g, x, &o));
}
OP(MaxPool) { return pool(c, true); }
OP(AveragePool) { return pool(c, false); }

static hp_status global_pool(ox_ctx *c, hp_op op) {
  hp_val x = ox_tensor(c, 0);
  if (x < 0) return c->e->code;
  int r = rank_of(c, x), axes[TINY_MAX_RANK];
  if (r < 3) return ox_fail(c, HP_E_AXIS_SIZE_MISMATCH, "the input must have rank >= 3 (N, C, spatial...)");
  for (int i = 2; i < r; i++) axes[i - 2] = i;
  return ox_def(c, 0, hp_reduce(c->g, op, x, axes, r - 2, true));
}
OP(GlobalAveragePool) { return global_pool(c, HP_OP_MEAN); }
OP(GlobalMaxPool) { return global_pool(c, HP_OP_RMAX); }

OP(Softmax) {
  hp_val x = ox_tensor(c, 0);
  if (x < 0) return c->e->code;
  int r = rank_of(c, x), axis;
  int64_t a;
  if (ox_attr_int(c, "axis", c->opset >= 13 ? -1 : 1, &a) || norm_axis(c, a, r, &axis)) return c->e->code;
  if (c->opset < 13 && axis != r - 1)
    return ox_fail(c, HP_E_UNSUPPORTED, "Softmax before opset 13 flattens axes %d.. (only the last axis is supported)", axis);
  return ox_def(c, 0, hp_softmax(c->g, x, axis));
}

OP(LayerNormalization) {
  hp_val x = ox_tensor(c, 0);
  if (x < 0) return c->e->code;
  int64_t a, stash;
  double eps;
  int axis;
  if (ox_attr_int(c, "axis", -1, &a) || ox_attr_float(c, "epsilon", 1e-5, &eps) || ox_attr_int(c, "stash_type", 1, &stash) ||
      norm_axis(c, a, rank_of(c, x), &axis))
    return c->e->code;
  for (size_t i = 1; i < c->node->n_output; i++)
    if (c->node->output[i][0]) return ox_fail(c, HP_E_UNSUPPORTED, "the Mean and InvStdDev outputs are not supported");
  hp_val g = ox_tensor(c, 1), b = HP_NONE;
  if (g < 0) return c->e->code;
  if (c->node->n_input > 2 && c->node->input[2][0] && (b = ox_tensor(c, 2)) < 0) return c->e->code;
  return ox_def(c, 0, hp_layernorm(c->g, x, g, b, axis, eps));
}

static hp_status reduce(ox_ctx *c, hp_op op, int input_from) {
  hp_val x = ox_tensor(c, 0);
  if (x < 0) return c->e->code;
  int64_t keep, noop, ax[TINY_MAX_RANK];
  int n, r = rank_of(c, x), axes[TINY_MAX_RANK];
  if (ox_attr_int(c, "keepdims", 1, &keep) || ox_attr_int(c, "noop_with_empty_axes", 0, &noop)) return c->e->code;
  if (c->opset >= input_from ? ints_in_or_attr(c, 1, "axes", ax, TINY_MAX_RANK, &n) : ox_attr_ints(c, "axes", ax, TINY_MAX_RANK, &n))
    return c->e->code;
  if (n <= 0 && noop) return ox_def(c, 0, x);
  if (n < 0) n = 0;
  for (int i = 0; i < n; i++)
    if (norm_axis(c, ax[i], r, &axes[i])) return c->e->code;
  return ox_def(c, 0, hp_reduce(c->g, op, x, axes, n, keep != 0));
}
OP(ReduceMean) { return reduce(c, HP_OP_MEAN, 18); }
OP(ReduceSum) { return reduce(c, HP_OP_SUM, 13); }
OP(ReduceMax) { return reduce(c, HP_OP_RMAX, 18); }
OP(ReduceMin) { return reduce(c, HP_OP_RMIN, 18); }

/* ---- movement -------------------------------------------------------------------------- */
OP(Reshape) {
  bool failed = false;
  ox_val *xv = ox_in(c, 0, &failed), *sv = xv ? ox_in(c, 1, &failed) : NULL;
  if (failed) return c->e->code;
  if (!xv) return ox_fail(c, HP_E_ARITY, "input 0 is required");
  int64_t allowzero;
  fe_shape to = {0};
  if (c->opset < 5) {
    int64_t v[TINY_MAX_RANK];
    int n;
    if (ox_attr_ints(c, "shape", v, TINY_MAX_RANK, &n)) return c->e->code;
    if (n < 0) return ox_fail(c, HP_E_INVALID_ARG, "attribute shape is required");
    to.rank = n;
    for (int i = 0; i < n; i++) to.d[i] = fe_dim_int(c->A, v[i]);
  } else {
    if (!sv || !sv->has_i || sv->v > 0)
      return ox_fail(c, HP_E_UNSUPPORTED, "the shape (input 1) must be an integer constant or a folded shape computation");
    if (sv->in > TINY_MAX_RANK) return ox_fail(c, HP_E_LIMIT, "the shape has %" PRId64 " dims (at most %d)", sv->in, TINY_MAX_RANK);
    to.rank = (int)sv->in;
    for (int i = 0; i < to.rank; i++) to.d[i] = sv->iv[i];
  }
  if (ox_attr_int(c, "allowzero", 0, &allowzero)) return c->e->code;
  if (xv->v <= 0 && xv->has_i) { /* a folded integer value: only its shape changes */
    int64_t shp[TINY_MAX_RANK], prod = 1;
    int infer = -1;
    for (int i = 0; i < to.rank; i++) {
      if (!fe_dim_is_int(to.d[i], &shp[i])) return ox_fail(c, HP_E_UNSUPPORTED, "a symbolic reshape of a folded value");
      if (shp[i] == 0 && !allowzero) shp[i] = i < xv->irank ? xv->ishape[i] : 0;
      if (shp[i] == -1) infer = i;
      else prod *= shp[i];
    }
    if (infer >= 0) shp[infer] = prod ? xv->in / prod : 0;
    ox_val *y = ox_def_ints(c, 0, to.rank, shp, xv->in);
    if (!y) return c->e->code;
    memcpy(y->iv, xv->iv, sizeof *y->iv * (size_t)xv->in);
    return HP_OK;
  }
  hp_val x = ox_value(c, xv);
  if (x < 0) return c->e->code;
  const fe_shape *s = shape_of(c, x);
  int infer = 0;
  for (int i = 0; i < to.rank; i++) {
    int64_t v;
    if (!fe_dim_is_int(to.d[i], &v)) continue;
    if (v == 0 && !allowzero) {
      if (i >= s->rank) return ox_fail(c, HP_E_INVALID_ARG, "shape[%d] = 0 copies a dim the input (rank %d) lacks", i, s->rank);
      to.d[i] = s->d[i];
    } else if (v == -1) {
      if (infer++) return ox_fail(c, HP_E_INVALID_ARG, "the shape has more than one -1");
      to.d[i] = NULL;
    } else if (v < 0) {
      return ox_fail(c, HP_E_INVALID_ARG, "shape[%d] is %" PRId64, i, v);
    }
  }
  return ox_def(c, 0, fe_reshape(c->g, x, &to));
}

OP(Flatten) {
  hp_val x = ox_tensor(c, 0);
  if (x < 0) return c->e->code;
  const fe_shape *s = shape_of(c, x);
  int64_t a;
  int axis;
  if (ox_attr_int(c, "axis", 1, &a)) return c->e->code;
  if (a < -s->rank || a > s->rank) return ox_fail(c, HP_E_INVALID_ARG, "axis %" PRId64 " is out of range for rank %d", a, s->rank);
  axis = (int)(a < 0 ? a + s->rank : a);
  const fe_dim *p = fe_dim_int(c->A, 1), *q = fe_dim_int(c->A, 1);
  for (int i = 0; i < s->rank && p && q; i++) {
    if (i < axis) p = fe_dim_mul(c->A, p, s->d[i]);
    else q = fe_dim_mul(c->A, q, s->d[i]);
  }
  if (!p || !q) return ox_fail(c, HP_E_LIMIT, "the flattened size expression is too large");
  return ox_def(c, 0, fe_reshape(c->g, x, &(fe_shape){.rank = 2, .d = {p, q}}));
}

OP(Transpose) {
  hp_val x = ox_tensor(c, 0);
  if (x < 0) return c->e->code;
  int r = rank_of(c, x), perm[TINY_MAX_RANK];
  int64_t v[TINY_MAX_RANK];
  int n;
  if (ox_attr_ints(c, "perm", v, TINY_MAX_RANK, &n)) return c->e->code;
  if (n < 0)
    for (int i = 0; i < r; i++) perm[i] = r - 1 - i;
  else if (n != r)
    return ox_fail(c, HP_E_INVALID_PERMUTATION, "perm has %d entries for rank %d", n, r);
  else
    for (int i = 0; i < r; i++) {
      if (v[i] < 0 || v[i] >= r) return ox_fail(c, HP_E_INVALID_PERMUTATION, "perm[%d] = %" PRId64 " is out of range", i, v[i]);
      perm[i] = (int)v[i];
    }
  return ox_def(c, 0, hp_permute(c->g, x, perm, r));
}

/* Unsqueeze / Squeeze of a shape: the new dims */
static hp_status squeeze_shape(ox_ctx *c, const fe_shape *in, int in_rank, bool un, fe_shape *out) {
  int64_t ax[TINY_MAX_RANK];
  int n;
  if (c->opset >= 13 ? ints_in_or_attr(c, 1, "axes", ax, TINY_MAX_RANK, &n) : ox_attr_ints(c, "axes", ax, TINY_MAX_RANK, &n))
    return c->e->code;
  bool mark[TINY_MAX_RANK] = {0};
  int out_rank = un ? in_rank + (n < 0 ? 0 : n) : in_rank;
  if (un && n <= 0) return ox_fail(c, HP_E_INVALID_ARG, "axes are required");
  if (out_rank > TINY_MAX_RANK) return ox_fail(c, HP_E_LIMIT, "rank above %d", TINY_MAX_RANK);
  for (int i = 0; i < n; i++) {
    int a;
    if (norm_axis(c, ax[i], un ? out_rank : in_rank, &a)) return c->e->code;
    if (mark[a]) return ox_fail(c, HP_E_INVALID_ARG, "axis %d is repeated", a);
    mark[a] = true;
  }
  out->rank = 0;
  if (un) {
    for (int i = 0, k = 0; i < out_rank; i++) out->d[out->rank++] = mark[i] ? fe_dim_int(c->A, 1) : in->d[k++];
  } else {
    for (int i = 0; i < in_rank; i++) {
      bool drop = n < 0 ? fe_dim_is_one(in->d[i]) : mark[i];
      if (drop && !fe_dim_is_one(in->d[i])) return ox_fail(c, HP_E_AXIS_SIZE_MISMATCH, "axis %d has size %s, not 1", i, in->d[i]->text);
      if (!drop) out->d[out->rank++] = in->d[i];
    }
  }
  return HP_OK;
}

static hp_status squeeze(ox_ctx *c, bool un) {
  bool failed = false;
  ox_val *xv = ox_in(c, 0, &failed);
  if (failed) return c->e->code;
  if (!xv) return ox_fail(c, HP_E_ARITY, "input 0 is required");
  fe_shape in = {0}, out;
  if (xv->v <= 0 && xv->has_i) {
    in.rank = xv->irank;
    for (int i = 0; i < in.rank; i++) in.d[i] = fe_dim_int(c->A, xv->ishape[i]);
    if (squeeze_shape(c, &in, in.rank, un, &out)) return c->e->code;
    int64_t shp[TINY_MAX_RANK];
    for (int i = 0; i < out.rank; i++) fe_dim_is_int(out.d[i], &shp[i]);
    ox_val *y = ox_def_ints(c, 0, out.rank, shp, xv->in);
    if (!y) return c->e->code;
    memcpy(y->iv, xv->iv, sizeof *y->iv * (size_t)xv->in);
    return HP_OK;
  }
  hp_val x = ox_value(c, xv);
  if (x < 0) return c->e->code;
  in = *shape_of(c, x);
  if (squeeze_shape(c, &in, in.rank, un, &out)) return c->e->code;
  return ox_def(c, 0, fe_reshape(c->g, x, &out));
}
OP(Unsqueeze) { return squeeze(c, true); }
OP(Squeeze) { return squeeze(c, false); }

OP(Shape) {
  hp_val x = ox_tensor(c, 0);
  if (x < 0) return c->e->code;
  const fe_shape *s = shape_of(c, x);
  int64_t lo, hi;
  if (ox_attr_int(c, "start", 0, &lo) || ox_attr_int(c, "end", s->rank, &hi)) return c->e->code;
  if (lo < 0) lo += s->rank;
  if (hi < 0) hi += s->rank;
  lo = lo < 0 ? 0 : lo > s->rank ? s->rank : lo;
  hi = hi < lo ? lo : hi > s->rank ? s->rank : hi;
  int64_t n = hi - lo;
  ox_val *y = ox_def_ints(c, 0, 1, &n, n);
  if (!y) return c->e->code;
  for (int64_t i = 0; i < n; i++) y->iv[i] = s->d[lo + i];
  return HP_OK;
}

OP(Constant) {
  const Onnx__AttributeProto *a = c->node->n_attribute == 1 ? c->node->attribute[0] : NULL;
  if (!a) return ox_fail(c, HP_E_INVALID_ARG, "a Constant needs exactly one attribute");
  ox_val tmp = {0};
  if (!strcmp(a->name, "value") && a->t) {
    if (ox_decode_tensor(c, a->t, "value", &tmp)) return c->e->code;
  } else if (!strcmp(a->name, "value_float") || !strcmp(a->name, "value_floats")) {
    bool one = !strcmp(a->name, "value_float");
    int64_t n = one ? 1 : (int64_t)a->n_floats;
    if (hp_tensor_alloc(c->e, &tmp.t, TINY_FP32, one ? 0 : 1, &n)) return c->e->code;
    if (one) ((float *)tmp.t.data)[0] = a->f;
    else if (n) memcpy(tmp.t.data, a->floats, sizeof(float) * (size_t)n);
    tmp.has_t = true;
  } else if (!strcmp(a->name, "value_int") || !strcmp(a->name, "value_ints")) {
    bool one = !strcmp(a->name, "value_int");
    int64_t n = one ? 1 : (int64_t)a->n_ints;
    ox_val *y = ox_def_ints(c, 0, one ? 0 : 1, &n, n);
    if (!y) return c->e->code;
    for (int64_t i = 0; i < n; i++)
      if (!(y->iv[i] = fe_dim_int(c->A, one ? a->i : a->ints[i]))) return ox_fail(c, HP_E_NO_MEMORY, "out of memory");
    return HP_OK;
  } else {
    return ox_fail(c, HP_E_UNSUPPORTED, "Constant attribute %s", a->name);
  }
  if (tmp.has_i) {
    ox_val *y = ox_def_ints(c, 0, tmp.irank, tmp.ishape, tmp.in);
    if (!y) return c->e->code;
    memcpy(y->iv, tmp.iv, sizeof *y->iv * (size_t)tmp.in);
    return HP_OK;
  }
  return ox_def_tensor(c, 0, &tmp.t, tmp.oty ? tmp.oty : OX_FLOAT);
}

OP(ConstantOfShape) {
  int64_t shp[TINY_MAX_RANK];
  int n;
  if (const_ints(c, 0, "shape", shp, TINY_MAX_RANK, &n)) return c->e->code;
  int64_t numel = 1;
  for (int i = 0; i < n; i++) {
    if (shp[i] < 0 || shp[i] > OX_MAX_DIM) return ox_fail(c, HP_E_INVALID_ARG, "shape[%d] is %" PRId64, i, shp[i]);
    numel *= shp[i];
    if (numel > ((int64_t)1 << 24)) return ox_fail(c, HP_E_LIMIT, "a constant of more than 2^24 elements");
  }
  const Onnx__AttributeProto *a = ox_attr(c, "value");
  ox_val v = {0};
  double fill = 0;
  int oty = OX_FLOAT;
  if (a && a->t) {
    if (ox_decode_tensor(c, a->t, "value", &v)) return c->e->code;
    if (!const_scalar(&v, &fill)) {
      hp_tensor_free(&v.t);
      return ox_fail(c, HP_E_INVALID_ARG, "value must have one element");
    }
    oty = v.oty;
    hp_tensor_free(&v.t);
  }
  if (oty == OX_INT64 || oty == OX_INT32) {
    ox_val *y = ox_def_ints(c, 0, n, shp, numel);
    if (!y) return c->e->code;
    for (int64_t i = 0; i < numel; i++)
      if (!(y->iv[i] = fe_dim_int(c->A, (int64_t)fill))) return ox_fail(c, HP_E_NO_MEMORY, "out of memory");
    return HP_OK;
  }
  tiny_dtype dt;
  if (!ox_dtype(oty, &dt)) return ox_fail(c, HP_E_UNSUPPORTED, "value of type %s", ox_type_name(oty));
  hp_tensor t;
  if (hp_tensor_alloc(c->e, &t, dt, n, shp)) return c->e->code;
  for (int64_t i = 0; i < numel; i++) hp_tensor_set(&t, i, (float)fill);
  return ox_def_tensor(c, 0, &t, oty);
}

OP(Concat) {
  int64_t a;
  if (ox_attr_int(c, "axis", 0, &a)) return c->e->code;
  int n = (int)c->node->n_input;
  if (n < 1) return ox_fail(c, HP_E_ARITY, "needs at least one input");
  if (all_ints(c)) { /* shape pieces: rank 1 */
    int64_t total = 0;
    for (int i = 0; i < n; i++) {
      ox_val *x = ox_in(c, i, NULL);
      if (x->irank != 1) return ox_fail(c, HP_E_UNSUPPORTED, "folding a Concat of integer tensors of rank %d", x->irank);
      total += x->in;
    }
    ox_val *y = ox_def_ints(c, 0, 1, &total, total);
    if (!y) return c->e->code;
    for (int i = 0, k = 0; i < n; i++) {
      ox_val *x = ox_in(c, i, NULL);
      for (int64_t j = 0; j < x->in; j++) y->iv[k++] = x->iv[j];
    }
    return HP_OK;
  }
  hp_val *xs = hp_arena_alloc(c->A, sizeof *xs * (size_t)n);
  if (!xs) return ox_fail(c, HP_E_NO_MEMORY, "out of memory");
  for (int i = 0; i < n; i++)
    if ((xs[i] = ox_tensor(c, i)) < 0) return c->e->code;
  int axis;
  if (norm_axis(c, a, rank_of(c, xs[0]), &axis)) return c->e->code;
  return ox_def(c, 0, n == 1 ? xs[0] : hp_concat(c->g, xs, n, axis));
}

/* Slice of a folded integer vector */
static hp_status fold_slice(ox_ctx *c, ox_val *x, int64_t lo, int64_t hi, int64_t step) {
  if (x->irank != 1 || step != 1) return ox_fail(c, HP_E_UNSUPPORTED, "folding a Slice of an integer tensor of rank %d", x->irank);
  int64_t n = x->in;
  if (lo < 0) lo += n;
  if (hi < 0) hi += n;
  lo = lo < 0 ? 0 : lo > n ? n : lo;
  hi = hi < lo ? lo : hi > n ? n : hi;
  int64_t m = hi - lo;
  ox_val *y = ox_def_ints(c, 0, 1, &m, m);
  if (!y) return c->e->code;
  for (int64_t i = 0; i < m; i++) y->iv[i] = x->iv[lo + i];
  return HP_OK;
}

OP(Slice) {
  bool failed = false;
  ox_val *xv = ox_in(c, 0, &failed);
  if (failed) return c->e->code;
  if (!xv) return ox_fail(c, HP_E_ARITY, "input 0 is required");
  int64_t st[TINY_MAX_RANK], en[TINY_MAX_RANK], ax[TINY_MAX_RANK], sp[TINY_MAX_RANK];
  int ns, ne, na = -1, np = -1;
  if (c->opset < 10) {
    if (ox_attr_ints(c, "starts", st, TINY_MAX_RANK, &ns) || ox_attr_ints(c, "ends", en, TINY_MAX_RANK, &ne) ||
        ox_attr_ints(c, "axes", ax, TINY_MAX_RANK, &na))
      return c->e->code;
  } else {
    if (const_ints(c, 1, "starts", st, TINY_MAX_RANK, &ns) || const_ints(c, 2, "ends", en, TINY_MAX_RANK, &ne)) return c->e->code;
    if (c->node->n_input > 3 && c->node->input[3][0] && const_ints(c, 3, "axes", ax, TINY_MAX_RANK, &na)) return c->e->code;
    if (c->node->n_input > 4 && c->node->input[4][0] && const_ints(c, 4, "steps", sp, TINY_MAX_RANK, &np)) return c->e->code;
  }
  if (ns < 0 || ne != ns || (na >= 0 && na != ns) || (np >= 0 && np != ns))
    return ox_fail(c, HP_E_INVALID_ARG, "starts, ends, axes and steps must have the same length");
  for (int i = 0; i < ns; i++) {
    if (na < 0) ax[i] = i;
    if (np < 0) sp[i] = 1;
    if (sp[i] < 1) return ox_fail(c, HP_E_UNSUPPORTED, "step %" PRId64 " (harp slices with steps >= 1)", sp[i]);
  }
  if (xv->v <= 0 && xv->has_i) {
    if (ns != 1) return ox_fail(c, HP_E_UNSUPPORTED, "folding a Slice on %d axes", ns);
    return fold_slice(c, xv, st[0], en[0], sp[0]);
  }
  hp_val x = ox_value(c, xv);
  if (x < 0) return c->e->code;
  int r = rank_of(c, x), axes[TINY_MAX_RANK];
  for (int i = 0; i < ns; i++) {
    if (norm_axis(c, ax[i], r, &axes[i])) return c->e->code;
    /* ends past the dim (INT64_MAX, INT32_MAX...) mean "to the end" */
    int64_t d;
    if (en[i] >= OX_MAX_DIM || (fe_dim_is_int(shape_of(c, x)->d[axes[i]], &d) && en[i] > d)) en[i] = INT64_MAX;
    if (en[i] <= -OX_MAX_DIM) en[i] = 0;
    if (st[i] <= -OX_MAX_DIM) st[i] = 0;
    if (fe_dim_is_int(shape_of(c, x)->d[axes[i]], &d) && st[i] > d) st[i] = d;
  }
  return ox_def(c, 0, hp_slice(c->g, x, ns, axes, st, en, sp));
}

OP(Split) {
  hp_val x = ox_tensor(c, 0);
  if (x < 0) return c->e->code;
  const fe_shape *s = shape_of(c, x);
  int64_t a, sz[64], num;
  int n, axis;
  if (ox_attr_int(c, "axis", 0, &a) || norm_axis(c, a, s->rank, &axis)) return c->e->code;
  if (c->opset >= 13 ? ints_in_or_attr(c, 1, "split", sz, 64, &n) : ox_attr_ints(c, "split", sz, 64, &n)) return c->e->code;
  int nout = (int)c->node->n_output;
  if (nout > 64) return ox_fail(c, HP_E_LIMIT, "more than 64 outputs");
  int64_t dim;
  if (n < 0) {
    if (!fe_dim_is_int(s->d[axis], &dim)) return ox_fail(c, HP_E_UNSUPPORTED, "an even split of the symbolic size %s", s->d[axis]->text);
    if (ox_attr_int(c, "num_outputs", nout, &num)) return c->e->code;
    if (num != nout || nout < 1) return ox_fail(c, HP_E_INVALID_ARG, "num_outputs does not match the outputs");
    int64_t each = (dim + nout - 1) / nout;
    for (int i = 0; i < nout; i++) sz[i] = i < nout - 1 ? each : dim - each * (nout - 1);
    n = nout;
  }
  if (n != nout) return ox_fail(c, HP_E_INVALID_ARG, "split has %d sizes for %d outputs", n, nout);
  int64_t at = 0;
  for (int i = 0; i < nout; i++) {
    if (sz[i] < 0) return ox_fail(c, HP_E_INVALID_ARG, "split size %" PRId64, sz[i]);
    int64_t lo = at, hi = at + sz[i], one = 1;
    at = hi;
    if (ox_def(c, i, hp_slice(c->g, x, 1, &axis, &lo, &hi, &one))) return c->e->code;
  }
  return HP_OK;
}

/* Gather: folded on integers; a constant scalar index is a slice; the rest
 * (embedding lookups) is torch.gather on broadcast operands. */
OP(Gather) {
  bool failed = false;
  ox_val *xv = ox_in(c, 0, &failed), *iv = xv ? ox_in(c, 1, &failed) : NULL;
  if (failed) return c->e->code;
  if (!xv || !iv) return ox_fail(c, HP_E_ARITY, "needs data and indices");
  int64_t a;
  if (ox_attr_int(c, "axis", 0, &a)) return c->e->code;
  if (xv->v <= 0 && xv->has_i && iv->has_i && iv->v <= 0) {
    if (xv->irank != 1) return ox_fail(c, HP_E_UNSUPPORTED, "folding a Gather of an integer tensor of rank %d", xv->irank);
    ox_val *y = ox_def_ints(c, 0, iv->irank, iv->ishape, iv->in);
    if (!y) return c->e->code;
    for (int64_t k = 0; k < iv->in; k++) {
      int64_t j;
      if (!fe_dim_is_int(iv->iv[k], &j)) return ox_fail(c, HP_E_UNSUPPORTED, "a symbolic index");
      if (j < 0) j += xv->in;
      if (j < 0 || j >= xv->in) return ox_fail(c, HP_E_INVALID_ARG, "index %" PRId64 " is out of range", j);
      y->iv[k] = xv->iv[j];
    }
    return HP_OK;
  }
  hp_val x = ox_value(c, xv);
  if (x < 0) return c->e->code;
  const fe_shape xs = *shape_of(c, x);
  int axis;
  if (norm_axis(c, a, xs.rank, &axis)) return c->e->code;
  int64_t j, dim;
  if (iv->has_i && iv->v <= 0 && iv->in == 1 && fe_dim_is_int(iv->iv[0], &j)) {
    if (j < 0 && fe_dim_is_int(xs.d[axis], &dim)) j += dim;
    if (j < 0) return ox_fail(c, HP_E_UNSUPPORTED, "a negative index on a symbolic axis");
    int64_t hi = j + 1, one = 1;
    hp_val s = hp_slice(c->g, x, 1, &axis, &j, &hi, &one);
    if (s < 0) return ox_check(c, s);
    fe_shape to = xs;
    if (iv->irank == 0) { /* the axis goes */
      for (int i = axis; i + 1 < to.rank; i++) to.d[i] = to.d[i + 1];
      to.rank--;
    } else {
      for (int i = 0; i < to.rank; i++) to.d[i] = i == axis ? fe_dim_int(c->A, 1) : xs.d[i];
      for (int i = 1; i < iv->irank; i++) { /* [1] -> [1, 1, ...] for higher-rank one-element indices */
        if (to.rank >= TINY_MAX_RANK) return ox_fail(c, HP_E_LIMIT, "rank above %d", TINY_MAX_RANK);
        memmove(&to.d[axis + 1], &to.d[axis], sizeof *to.d * (size_t)(to.rank - axis));
        to.rank++;
      }
    }
    return ox_def(c, 0, fe_reshape(c->g, s, &to));
  }
  hp_val idx = ox_value(c, iv);
  if (idx < 0) return c->e->code;
  if (hp_val_dtype(c->g, idx) != TINY_I32) return ox_fail(c, HP_E_DTYPE_MISMATCH, "indices must be integers");
  const fe_shape is = *shape_of(c, idx);
  /* out[pre, i.., post] = x[pre, idx[i..], post]: the index flattened to
   * [N] and broadcast to [pre, N, post] (computed, not a view: the gather
   * kernel reads a buffer), gathered along the axis, then [pre, I.., post]. */
  const fe_dim *N = fe_dim_int(c->A, 1), *one = N;
  for (int i = 0; i < is.rank && N; i++) N = fe_dim_mul(c->A, N, is.d[i]);
  if (!N) return ox_fail(c, HP_E_LIMIT, "the index count expression is too large");
  if (xs.rank - 1 + is.rank > TINY_MAX_RANK) return ox_fail(c, HP_E_LIMIT, "rank above %d", TINY_MAX_RANK);
  fe_shape ir = xs, ie = xs, out = {0};
  for (int i = 0; i < xs.rank; i++) ir.d[i] = i == axis ? N : one;
  ie.d[axis] = N;
  for (int i = 0; i < axis; i++) out.d[out.rank++] = xs.d[i];
  for (int i = 0; i < is.rank; i++) out.d[out.rank++] = is.d[i];
  for (int i = axis + 1; i < xs.rank; i++) out.d[out.rank++] = xs.d[i];
  hp_val flat = fe_reshape(c->g, idx, &(fe_shape){.rank = 1, .d = {N}});
  hp_val ib = hp_add(c->g, fe_expand(c->g, fe_reshape(c->g, flat, &ir), &ie), hp_const_typed(c->g, 0, TINY_I32));
  hp_val gv = hp_gather(c->g, x, ib, axis);
  return ox_def(c, 0, fe_reshape(c->g, gv, &out));
}

OP(Expand) {
  hp_val x = ox_tensor(c, 0);
  if (x < 0) return c->e->code;
  ox_val *sv = ox_in(c, 1, NULL);
  if (!sv || !sv->has_i || sv->v > 0) return ox_fail(c, HP_E_UNSUPPORTED, "the shape (input 1) must be an integer constant");
  const fe_shape *s = shape_of(c, x);
  int r = s->rank > sv->in ? s->rank : (int)sv->in;
  if (r > TINY_MAX_RANK) return ox_fail(c, HP_E_LIMIT, "rank above %d", TINY_MAX_RANK);
  fe_shape to = {.rank = r};
  for (int i = 0; i < r; i++) { /* numpy broadcasting of both shapes */
    int xi = i - (r - s->rank), si = i - (r - (int)sv->in);
    const fe_dim *a = xi >= 0 ? s->d[xi] : NULL, *b = si >= 0 ? sv->iv[si] : NULL;
    to.d[i] = !b || fe_dim_is_one(b) ? (a ? a : b) : b;
  }
  return ox_def(c, 0, fe_expand(c->g, x, &to));
}

OP(Pad) {
  hp_val x = ox_tensor(c, 0);
  if (x < 0) return c->e->code;
  char mode[16];
  if (ox_attr_str(c, "mode", "constant", mode, sizeof mode)) return c->e->code;
  if (strcmp(mode, "constant") != 0) return ox_fail(c, HP_E_UNSUPPORTED, "mode \"%s\" (harp pads with a constant)", mode);
  int r = rank_of(c, x), n;
  int64_t pads[2 * TINY_MAX_RANK];
  double value = 0;
  if (c->opset < 11) {
    if (ox_attr_ints(c, "pads", pads, 2 * TINY_MAX_RANK, &n) || ox_attr_float(c, "value", 0, &value)) return c->e->code;
  } else {
    if (const_ints(c, 1, "pads", pads, 2 * TINY_MAX_RANK, &n)) return c->e->code;
    ox_val *cv = ox_in(c, 2, NULL);
    if (cv && !const_scalar(cv, &value)) return ox_fail(c, HP_E_UNSUPPORTED, "constant_value must be a constant");
    if (c->node->n_input > 3 && c->node->input[3][0]) return ox_fail(c, HP_E_UNSUPPORTED, "the axes input of Pad");
  }
  if (n != 2 * r) return ox_fail(c, HP_E_INVALID_ARG, "pads has %d values for rank %d", n, r);
  int64_t lo[TINY_MAX_RANK], hi[TINY_MAX_RANK];
  for (int i = 0; i < r; i++) {
    lo[i] = pads[i], hi[i] = pads[r + i];
    if (lo[i] < 0 || hi[i] < 0) return ox_fail(c, HP_E_UNSUPPORTED, "negative pads (cropping)");
    if (lo[i] > OX_MAX_DIM || hi[i] > OX_MAX_DIM) return ox_fail(c, HP_E_LIMIT, "pads too large");
  }
  return ox_def(c, 0, hp_pad(c->g, x, lo, hi, r, value));
}

/* ---- dispatch ------------------------------------------------------------------------- */
typedef struct op_entry {
  const char *name;
  hp_status (*fn)(ox_ctx *c);
} op_entry;

static const op_entry ops[] = {
#define E(n) {#n, op_##n}
    E(Abs), E(Add), E(AveragePool), E(BatchNormalization), E(Cast), E(Clip), E(Concat), E(Constant), E(ConstantOfShape),
    E(Conv), E(Div), E(Dropout), E(Equal), E(Erf), E(Exp), E(Expand), E(Flatten), E(Gather), E(Gelu), E(Gemm),
    E(GlobalAveragePool), E(GlobalMaxPool), E(Greater), E(GreaterOrEqual), E(Identity), E(LayerNormalization), E(Less),
    E(LessOrEqual), E(Log), E(MatMul), E(Max), E(MaxPool), E(Min), E(Mul), E(Neg), E(Not), E(Pad), E(Pow), E(Reciprocal),
    E(ReduceMax), E(ReduceMean), E(ReduceMin), E(ReduceSum), E(Relu), E(Reshape), E(Shape), E(Sigmoid), E(Slice),
    E(Softmax), E(Split), E(Sqrt), E(Squeeze), E(Sub), E(Sum), E(Tanh), E(Transpose), E(Unsqueeze), E(Where),
#undef E
};

hp_status ox_node(ox_ctx *c) {
  const char *op = c->node->op_type;
  for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
    if (!strcmp(ops[i].name, op)) return ops[i].fn(c);
  return ox_fail(c, HP_E_UNKNOWN_OP, "harp has no mapping for op %s", op);
}
