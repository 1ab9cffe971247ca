/* onnx_fold.c — the importer's constant evaluator.  A node whose inputs are
 * all known at import — integers (kept as dims, so a size read from a
 * symbolic shape stays an expression of its shape variables), bools, and
 * float tensors that are small or were computed here — is evaluated here
 * as onnxruntime would, instead of being built as graph ops: a shape
 * computation folds to constants whatever ops it is written with (Shape ->
 * Gather -> Cast -> Div -> Floor -> Cast -> Concat -> Reshape, an anchor
 * grid from Range and Expand, a condition from Equal and Not).
 *
 * Integers compute exactly in int64, symbolic ones as affine expressions
 * with floor division (sizes are >= 0); a comparison or Max / Min of two
 * dims that differ by a constant is decided.  Floats compute in double and
 * are rounded to the tensor's type after each op, as an fp32 kernel's
 * result would be.  A result of more than OX_MAX_INT_CONST integers or
 * OX_MAX_FOLD floats, or of a symbolic shape, is declined: the op's
 * mapping builds it as graph ops.  Float tensors fold only in shape
 * arithmetic (a node with an input computed from Shape or Size): a weight
 * reshaped or transposed stays the op mapping's, as before.  A node that needs a symbolic value as a
 * number fails (UnboundSymbol) naming the graph input (ox_need_value).
 *
 * This file: the framework, elementwise ops, Where, Cast, reductions,
 * Range, ConstantOfShape, NonZero; onnx_fold_move.c: the movement ops.
 * Needs: onnx_load.c, onnx_shapes.c.  Gives: ox_fold. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_fold.h"

#define MAX_IN 64

/* ---- known values ------------------------------------------------------------------------ */
int fv_rank(const ox_val *x) { return x->has_i ? x->irank : x->t.rank; }
const int64_t *fv_shape(const ox_val *x) { return x->has_i ? x->ishape : x->t.shape; }
int64_t fv_count(const ox_val *x) { return x->has_i ? x->in : ut_tensor_numel(&x->t); }
bool fv_float(const ox_val *x) { return (x->has_t && tiny_dtype_is_float(x->t.dtype)) || fv_fsym(x); }

const fe_dim *fv_dim(ox_ctx *c, const ox_val *x, int64_t k) {
  return x->has_i ? x->iv[k] : fe_dim_int(c->A, ut_tensor_get(&x->t, k) != 0);
}

/* Whether x's value is known here: integers, or a float / bool tensor that
 * is small or computed at import (a larger weight stays a weight). */
static bool known_val(const ox_val *x) {
  if (!x || x->gstage > 0) return false;
  if (x->has_i) return true;
  return x->has_t && (x->derived || ut_tensor_numel(&x->t) <= OX_FOLD_SMALL) && x->t.dtype != TINY_I32;
}

/* Element k of x as a number; a symbolic one fails naming what needs it. */
static harp_status fv_num(ox_ctx *c, const ox_val *x, int64_t k, const char *what, double *v) {
  if (x->has_t) {
    *v = ut_tensor_get(&x->t, k);
    return HARP_OK;
  }
  int64_t n;
  harp_status st = ox_known(c, x->iv[k], what, &n); /* its own status: a failure returns non-OK where *v is unset */
  if (st) return st;
  *v = x->fden > 0 ? (double)n / (double)x->fden : (double)n;
  return HARP_OK;
}

harp_status fv_ints(ox_ctx *c, const ox_val *x, const char *what, int64_t *out, int cap, int *n) {
  int64_t cnt = fv_count(x);
  if (cnt > cap) return ox_fail(c, HARP_E_LIMIT, "%s has %" PRId64 " values (at most %d)", what, cnt, cap);
  for (int64_t k = 0; k < cnt; k++) {
    if (fv_float(x)) return ox_fail(c, HARP_E_INVALID_ARG, "%s must be integers", what);
    if (ox_known(c, fv_dim(c, x, k), what, &out[k])) return c->e->code;
  }
  *n = (int)cnt;
  return HARP_OK;
}

int64_t fv_count_of(int rank, const int64_t *shape, int64_t limit) {
  int64_t n = 1;
  for (int i = 0; i < rank; i++) {
    if (shape[i] < 0) return -1;
    if (shape[i] && n > limit / shape[i]) return -1;
    n *= shape[i];
  }
  return n <= limit ? n : -1;
}

static bool has_out(const ox_ctx *c, int i) { return i < (int)c->node->n_output && c->node->output[i][0]; }

/* Output i as integers (oty OX_BOOL: bools); NULL with *r FOLD_DECLINE when
 * too many, FOLD_FAIL on error, or (*r FOLD_DONE) when output i is unused. */
ox_val *fv_out_ints(ox_ctx *c, int i, int rank, const int64_t *shape, int oty, int *r) {
  int64_t n = fv_count_of(rank, shape, OX_MAX_INT_CONST);
  *r = n < 0 ? FOLD_DECLINE : FOLD_DONE;
  if (n < 0 || !has_out(c, i)) return NULL;
  ox_val *y = ox_def_ints(c, i, rank, shape, n);
  if (!y) *r = FOLD_FAIL;
  else y->oty = oty;
  return y;
}

/* A float or bool tensor result of shape; FOLD_DECLINE when too large. */
static int begin_tensor(ox_ctx *c, ut_tensor *t, tiny_dtype dt, int rank, const int64_t *shape) {
  memset(t, 0, sizeof *t);
  if (fv_count_of(rank, shape, OX_MAX_FOLD) < 0) return FOLD_DECLINE;
  return ut_tensor_alloc(c->e, t, dt, rank, shape) ? FOLD_FAIL : FOLD_DONE;
}

/* Output i := t (taken), marked as computed at import. */
int fv_end_tensor(ox_ctx *c, int i, ut_tensor *t, int oty) {
  if (!has_out(c, i)) {
    ut_tensor_free(t);
    return FOLD_DONE;
  }
  if (ox_def_tensor(c, i, t, oty)) return FOLD_FAIL;
  ox_val *y = ox_find(c, c->node->output[i]);
  if (y) y->derived = true;
  return FOLD_DONE;
}

static tiny_dtype dtype_of_oty(int oty) {
  tiny_dtype dt = TINY_FP32;
  return ox_dtype(oty, &dt) && tiny_dtype_is_float(dt) ? dt : TINY_FP32;
}

int fv_pick(ox_ctx *c, int out, ox_val *const *xs, const int *which, const int64_t *src, int rank, const int64_t *shape) {
  const ox_val *x0 = xs[0];
  int64_t n = fv_count_of(rank, shape, x0->has_i ? OX_MAX_INT_CONST : OX_MAX_FOLD);
  if (n < 0) return FOLD_DECLINE;
  for (int64_t k = 0; which && k < n; k++) /* sizes cast to float picked with others: the mapping's */
    if (xs[which[k]]->has_i != x0->has_i || xs[which[k]]->fden != x0->fden) return FOLD_DECLINE;
  if (x0->has_i) {
    int r;
    ox_val *y = fv_out_ints(c, out, rank, shape, x0->oty ? x0->oty : OX_INT64, &r);
    for (int64_t k = 0; y && k < n; k++) y->iv[k] = fv_dim(c, xs[which ? which[k] : 0], src[k]);
    if (y) y->fden = x0->fden;
    return r == FOLD_DONE && y && y->fden ? fv_fsym_settle(c, out) : r;
  }
  ut_tensor t;
  int r = begin_tensor(c, &t, x0->t.dtype, rank, shape);
  size_t es = (size_t)tiny_dtype_size(t.dtype);
  for (int64_t k = 0; r == FOLD_DONE && k < n; k++)
    memcpy((char *)t.data + (size_t)k * es, (const char *)xs[which ? which[k] : 0]->t.data + (size_t)src[k] * es, es);
  return r == FOLD_DONE ? fv_end_tensor(c, out, &t, x0->oty ? x0->oty : OX_FLOAT) : r;
}

int fv_same(ox_ctx *c, int out, ox_val *x, int rank, const int64_t *shape) {
  int64_t n = fv_count(x);
  int64_t *src = ut_xmalloc(sizeof *src * (size_t)(n + 1));
  if (!src) return ox_fail(c, HARP_E_NO_MEMORY, "out of memory"), FOLD_FAIL;
  for (int64_t k = 0; k < n; k++) src[k] = k;
  int r = fv_pick(c, out, &x, NULL, src, rank, shape);
  free(src);
  return r;
}

/* ---- broadcasting -------------------------------------------------------------------------- */
/* The numpy broadcast of n values' shapes, and each one's element strides
 * in it (0 along a stretched axis). */
static harp_status broadcast(ox_ctx *c, ox_val *const *x, int n, int *rank, int64_t *shape, int64_t (*st)[TINY_MAX_RANK]) {
  int r = 0;
  for (int k = 0; k < n; k++) r = fv_rank(x[k]) > r ? fv_rank(x[k]) : r;
  for (int i = 0; i < r; i++) shape[i] = 1;
  for (int k = 0; k < n; k++)
    for (int i = 0; i < fv_rank(x[k]); i++) {
      int64_t d = fv_shape(x[k])[i], *o = &shape[i + r - fv_rank(x[k])];
      if (d != *o && d != 1 && *o != 1)
        return ox_fail(c, HARP_E_BROADCAST_MISMATCH, "the inputs' shapes do not broadcast (%" PRId64 " and %" PRId64 ")", d, *o);
      if (d != 1) *o = d;
    }
  for (int k = 0; k < n; k++)
    for (int i = r - 1, stride = 1; i >= 0; i--) {
      int j = i - (r - fv_rank(x[k]));
      int64_t d = j >= 0 ? fv_shape(x[k])[j] : 1;
      st[k][i] = d == 1 ? 0 : stride;
      stride *= (int)d;
    }
  *rank = r;
  return HARP_OK;
}

/* element k of the broadcast result's operand with strides st */
int64_t fv_at(int64_t k, int r, const int64_t *shape, const int64_t *st) {
  int64_t j = 0;
  for (int i = r - 1; i >= 0; i--) j += k % shape[i] * st[i], k /= shape[i];
  return j;
}

/* ---- elementwise binary ------------------------------------------------------------------- */
static const struct {
  const char *op;
  ebin k;
} bins[] = {{"Add", E_ADD}, {"Sub", E_SUB}, {"Mul", E_MUL}, {"Div", E_DIV}, {"Mod", E_MOD}, {"Pow", E_POW}, {"Max", E_MAX}, {"Min", E_MIN},
            {"Sum", E_ADD}, {"Equal", E_EQ}, {"Less", E_LT}, {"LessOrEqual", E_LE}, {"Greater", E_GT}, {"GreaterOrEqual", E_GE},
            {"And", E_AND}, {"Or", E_OR}, {"Xor", E_XOR}};

static bool bool_result(ebin k) { return k >= E_EQ; }

/* The comparison k (or Max / Min) of a and b from their difference d. */
static int64_t by_diff(ebin k, int64_t d) {
  switch (k) {
  case E_EQ: return d == 0;
  case E_LT: return d < 0;
  case E_LE: return d <= 0;
  case E_GT: return d > 0;
  case E_GE: return d >= 0;
  case E_MAX: return d >= 0; /* 1: a */
  default: return d <= 0;    /* E_MIN, 1: a */
  }
}

/* Whether d is at least *lb for any sizes: a constant plus positive
 * multiples of sizes (shape variables, their products, floor divisions of
 * such) is at least its constant. */
static bool atom_nonneg(const fe_atom *a) {
  int64_t lb;
  if (a->kind == FE_A_SYM) return true;
  if (a->kind == FE_A_DIV) return fv_dim_lb(a->num, &lb) && lb >= 0;
  for (int i = 0; i < a->nf; i++)
    if (!fv_dim_lb(a->f[i], &lb) || lb < 0) return false;
  return true;
}

bool fv_dim_lb(const fe_dim *d, int64_t *lb) {
  for (int i = 0; i < d->nt; i++)
    if (d->t[i].k < 0 || !atom_nonneg(d->t[i].atom)) return false;
  *lb = d->c;
  return true;
}

/* Comparison k (or Max / Min: 1 picks a) of a and b decided from a bound
 * on their difference d alone (a size is never -1); false if it is not. */
static bool by_bound(ebin k, const fe_dim *d, int64_t *v) {
  int64_t lb, ub;
  bool pos = fv_dim_lb(d, &lb) && lb > 0, nonneg = fv_dim_lb(d, &lb) && lb >= 0;
  bool negd = false, nonpos = false;
  if (!pos && !nonneg) { /* -d bounded below: d bounded above */
    bool all = d->nt > 0;
    for (int i = 0; i < d->nt && all; i++) all = d->t[i].k < 0 && atom_nonneg(d->t[i].atom);
    ub = d->c;
    negd = all && ub < 0, nonpos = all && ub <= 0;
  }
  if (pos || negd) { /* d != 0 and its sign known */
    *v = by_diff(k, pos ? 1 : -1);
    return true;
  }
  if (nonneg && (k == E_LT || k == E_GE || k == E_MAX)) return *v = by_diff(k, 0), true; /* d >= 0 */
  if (nonpos && (k == E_GT || k == E_LE || k == E_MIN)) return *v = by_diff(k, 0), true; /* d <= 0 */
  return false;
}

/* x^y of integers as onnxruntime computes it (a negative y truncates to 0
 * unless |x| is 1); false on overflow. */
static bool int_pow(int64_t x, int64_t y, int64_t *out) {
  if (y < 0) {
    *out = x == 1 ? 1 : x == -1 ? (y % 2 ? -1 : 1) : 0;
    return x != 0;
  }
  int64_t r = 1;
  for (int64_t i = 0; i < y; i++) {
    if (!ut_mul_ok(r, x, &r)) return false;
    if (r == 0 || r == 1) break;
  }
  *out = r;
  return true;
}

/* Integer op k of a and b (symbolic where the result stays affine). */
harp_status fv_int_bin(ox_ctx *c, ebin k, int64_t fmod_attr, const fe_dim *a, const fe_dim *b, const fe_dim **r) {
  int64_t x, y, v = 0;
  *r = NULL;
  if (k == E_ADD || k == E_SUB || k == E_MUL) {
    *r = k == E_ADD ? fe_dim_add(c->A, a, b) : k == E_SUB ? fe_dim_sub(c->A, a, b) : fe_dim_mul(c->A, a, b);
    return *r ? HARP_OK : ox_fail(c, HARP_E_LIMIT, "integer overflow (or an expression too large) in %s and %s", a->text, b->text);
  }
  bool ia = fe_dim_is_int(a, &x), ib = fe_dim_is_int(b, &y);
  if (k == E_DIV && !ia && ib && y > 0) { /* a size: floor is truncation */
    *r = fe_dim_div(c->A, a, y);
    return *r ? HARP_OK : ox_fail(c, HARP_E_LIMIT, "the expression %s / %" PRId64 " is too large", a->text, y);
  }
  const fe_dim *d = (k >= E_MAX && k <= E_GE) && (!ia || !ib) ? fe_dim_sub(c->A, a, b) : NULL;
  int64_t dv;
  if (d && (fe_dim_is_int(d, &dv) ? (dv = by_diff(k, dv), true) : by_bound(k, d, &dv))) {
    *r = k == E_MAX || k == E_MIN ? (dv ? a : b) : fe_dim_int(c->A, dv);
    return HARP_OK;
  }
  if (!ia) return ox_need_value(c, a, "input 0");
  if (!ib) return ox_need_value(c, b, "input 1");
  switch (k) {
  case E_DIV:
  case E_MOD:
    if (y == 0) return ox_fail(c, HARP_E_INVALID_ARG, "integer %s by zero", k == E_DIV ? "division" : "modulo");
    if (y == -1) v = k == E_DIV ? -x : 0;
    else if (k == E_DIV) v = x / y; /* C truncation, as onnxruntime */
    else v = (v = x % y) && !fmod_attr && (v < 0) != (y < 0) ? v + y : v; /* fmod 0: the divisor's sign */
    break;
  case E_POW:
    if (!int_pow(x, y, &v)) return ox_fail(c, HARP_E_INVALID_ARG, "integer Pow %" PRId64 "^%" PRId64 " overflows or divides by zero", x, y);
    break;
  case E_MAX: case E_MIN: case E_EQ: case E_LT: case E_LE: case E_GT: case E_GE: v = by_diff(k, x - y); break; /* |x|, |y| < 2^62 */
  case E_AND: v = x && y; break;
  case E_OR: v = x || y; break;
  case E_XOR: v = !x != !y; break;
  default: break;
  }
  if (k == E_MAX || k == E_MIN) v = v ? x : y;
  if (!(*r = fe_dim_int(c->A, v))) return ox_fail(c, HARP_E_LIMIT, "integer overflow");
  return HARP_OK;
}

static double flt_bin(ebin k, double a, double b) {
  switch (k) {
  case E_ADD: return a + b;
  case E_SUB: return a - b;
  case E_MUL: return a * b;
  case E_DIV: return a / b;
  case E_MOD: return fmod(a, b);
  case E_POW: return pow(a, b);
  case E_MAX: return isnan(a) || isnan(b) ? NAN : a > b ? a : b;
  case E_MIN: return isnan(a) || isnan(b) ? NAN : a < b ? a : b;
  case E_EQ: return a == b;
  case E_LT: return a < b;
  case E_LE: return a <= b;
  case E_GT: return a > b;
  case E_GE: return a >= b;
  case E_AND: return a != 0 && b != 0;
  case E_OR: return a != 0 || b != 0;
  default: return (a != 0) != (b != 0);
  }
}

/* Binary op k of x[0] and x[1], broadcast. */
static int fold_bin2(ox_ctx *c, ebin k, ox_val *const *x, int out) {
  int r = 0;
  int64_t shape[TINY_MAX_RANK], st[2][TINY_MAX_RANK], fm = 0;
  if (broadcast(c, x, 2, &r, shape, st) || ox_attr_int(c, "fmod", 0, &fm)) return FOLD_FAIL;
  if (fv_fsym(x[0]) || fv_fsym(x[1])) return fv_fsym_bin(c, k, x, r, shape, st, out);
  bool flt = fv_float(x[0]) || fv_float(x[1]);
  int64_t n = fv_count_of(r, shape, OX_MAX_FOLD);
  if (!flt || bool_result(k) || (k == E_POW && !fv_float(x[0]))) { /* an integer or bool result */
    int rr;
    ox_val *y = fv_out_ints(c, out, r, shape, bool_result(k) ? OX_BOOL : x[0]->oty ? x[0]->oty : OX_INT64, &rr);
    for (int64_t i = 0; y && i < y->in; i++) {
      int64_t ia = fv_at(i, r, shape, st[0]), ib = fv_at(i, r, shape, st[1]);
      if (!flt) {
        if (fv_int_bin(c, k, fm, fv_dim(c, x[0], ia), fv_dim(c, x[1], ib), &y->iv[i])) return FOLD_FAIL;
        continue;
      }
      double a, b;
      if (fv_num(c, x[0], ia, "input 0", &a) || fv_num(c, x[1], ib, "input 1", &b)) return FOLD_FAIL;
      double v = flt_bin(k, a, b);
      if (k == E_POW && !(fabs(v) < 9.2e18)) return ox_fail(c, HARP_E_INVALID_ARG, "integer Pow of %g and %g overflows", a, b), FOLD_FAIL;
      if (!(y->iv[i] = fe_dim_int(c->A, (int64_t)v))) return ox_fail(c, HARP_E_NO_MEMORY, "out of memory"), FOLD_FAIL;
    }
    return rr;
  }
  const ox_val *f = k == E_POW || fv_float(x[0]) ? x[0] : x[1]; /* the result's type */
  ut_tensor t;
  int rr = begin_tensor(c, &t, f->t.dtype, r, shape);
  for (int64_t i = 0; rr == FOLD_DONE && i < n; i++) {
    double a, b;
    if (fv_num(c, x[0], fv_at(i, r, shape, st[0]), "input 0", &a) || fv_num(c, x[1], fv_at(i, r, shape, st[1]), "input 1", &b)) {
      ut_tensor_free(&t);
      return FOLD_FAIL;
    }
    ut_tensor_set(&t, i, (float)flt_bin(k, a, b));
  }
  return rr == FOLD_DONE ? fv_end_tensor(c, out, &t, f->oty ? f->oty : OX_FLOAT) : rr;
}

/* A binary op, or a variadic one (Max, Min, Sum) pairwise from the left. */
static int fold_binary(ox_ctx *c, ebin k, ox_val *const *x, int n) {
  if (n < 1 || !x[0]) return ox_fail(c, HARP_E_ARITY, "needs inputs"), FOLD_FAIL;
  for (int i = 1; i < n; i++)
    if (!x[i]) return ox_fail(c, HARP_E_ARITY, "input %d is empty", i), FOLD_FAIL;
  if (n == 1) { /* Max(x), Sum(x): x */
    int64_t src[1] = {0};
    if (fv_count(x[0]) != 1) return FOLD_DECLINE;
    return fv_pick(c, 0, x, NULL, src, fv_rank(x[0]), fv_shape(x[0]));
  }
  if (n > 2) return FOLD_DECLINE; /* a chain: rare in shape code */
  return fold_bin2(c, k, x, 0);
}

/* ---- elementwise unary -------------------------------------------------------------------- */
static const struct {
  const char *op;
  eun k;
} uns[] = {{"Neg", U_NEG}, {"Abs", U_ABS}, {"Floor", U_FLOOR}, {"Ceil", U_CEIL}, {"Round", U_ROUND}, {"Sqrt", U_SQRT},
           {"Reciprocal", U_RECIP}, {"Exp", U_EXP}, {"Log", U_LOG}, {"Sin", U_SIN}, {"Cos", U_COS}, {"Tanh", U_TANH},
           {"Sigmoid", U_SIGMOID}, {"Relu", U_RELU}, {"Sign", U_SIGN}, {"Not", U_NOT}, {"IsNaN", U_ISNAN}, {"IsInf", U_ISINF}};

static double flt_un(eun k, double a) {
  switch (k) {
  case U_NEG: return -a;
  case U_ABS: return fabs(a);
  case U_FLOOR: return floor(a);
  case U_CEIL: return ceil(a);
  case U_ROUND: return nearbyint(a); /* half to even */
  case U_SQRT: return sqrt(a);
  case U_RECIP: return 1 / a;
  case U_EXP: return exp(a);
  case U_LOG: return log(a);
  case U_SIN: return sin(a);
  case U_COS: return cos(a);
  case U_TANH: return tanh(a);
  case U_SIGMOID: return 1 / (1 + exp(-a));
  case U_RELU: return a > 0 ? a : 0;
  case U_SIGN: return a > 0 ? 1 : a < 0 ? -1 : a;
  default: return a == 0;
  }
}

/* Integer op k of a: Neg stays symbolic, the rest need the value. */
static harp_status int_un(ox_ctx *c, eun k, const fe_dim *a, const fe_dim **r) {
  int64_t x;
  if (k == U_NEG || k == U_FLOOR || k == U_CEIL || k == U_ROUND) {
    *r = k == U_NEG ? fe_dim_scale(c->A, a, -1) : a;
    return *r ? HARP_OK : ox_fail(c, HARP_E_LIMIT, "integer overflow");
  }
  if (ox_known(c, a, "input 0", &x)) return c->e->code;
  int64_t v = k == U_ABS ? (x < 0 ? -x : x) : k == U_RELU ? (x > 0 ? x : 0) : k == U_SIGN ? (x > 0) - (x < 0) : x == 0;
  return (*r = fe_dim_int(c->A, v)) ? HARP_OK : ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
}

static int fold_unary(ox_ctx *c, eun k, ox_val *const *x, int n) {
  if (n < 1 || !x[0]) return ox_fail(c, HARP_E_ARITY, "input 0 is required"), FOLD_FAIL;
  const ox_val *a = x[0];
  if (fv_fsym(a)) return fv_fsym_un(c, k, a);
  int r = fv_rank(a), rr;
  const int64_t *shape = fv_shape(a);
  bool to_bool = k == U_ISNAN || k == U_ISINF || k == U_NOT;
  if (!fv_float(a) || to_bool) {
    if (!fv_float(a) && (k == U_ISNAN || k == U_ISINF)) return FOLD_DECLINE;
    if (!fv_float(a) && k > U_ROUND && k != U_RELU && k != U_SIGN && k != U_NOT) return FOLD_DECLINE; /* sqrt of an int... */
    int64_t pos = 1, neg = 1;
    if (k == U_ISINF && (ox_attr_int(c, "detect_positive", 1, &pos) || ox_attr_int(c, "detect_negative", 1, &neg))) return FOLD_FAIL;
    ox_val *y = fv_out_ints(c, 0, r, shape, to_bool ? OX_BOOL : a->oty ? a->oty : OX_INT64, &rr);
    for (int64_t i = 0; y && i < y->in; i++) {
      if (!fv_float(a)) {
        if (int_un(c, k, fv_dim(c, a, i), &y->iv[i])) return FOLD_FAIL;
        continue;
      }
      double v = ut_tensor_get(&a->t, i);
      bool b = k == U_ISNAN ? isnan(v) : k == U_NOT ? v == 0 : isinf(v) && ((v > 0 && pos) || (v < 0 && neg));
      y->iv[i] = fe_dim_int(c->A, b);
    }
    return rr;
  }
  ut_tensor t;
  if ((rr = begin_tensor(c, &t, a->t.dtype, r, shape)) != FOLD_DONE) return rr;
  for (int64_t i = 0; i < fv_count(a); i++) ut_tensor_set(&t, i, (float)flt_un(k, ut_tensor_get(&a->t, i)));
  return fv_end_tensor(c, 0, &t, a->oty ? a->oty : OX_FLOAT);
}

/* ---- Where, Cast ------------------------------------------------------------------------------ */
static int f_where(ox_ctx *c, ox_val *const *x, int n) {
  if (n < 3 || !x[0] || !x[1] || !x[2]) return ox_fail(c, HARP_E_ARITY, "needs three inputs"), FOLD_FAIL;
  if (fv_float(x[1]) != fv_float(x[2]) || x[1]->has_i != x[2]->has_i || (x[1]->has_t && x[1]->t.dtype != x[2]->t.dtype)) return FOLD_DECLINE;
  int r = 0;
  int64_t shape[TINY_MAX_RANK], st[3][TINY_MAX_RANK];
  if (broadcast(c, x, 3, &r, shape, st)) return FOLD_FAIL;
  int64_t cnt = fv_count_of(r, shape, OX_MAX_FOLD);
  if (cnt < 0) return FOLD_DECLINE;
  int64_t *src = ut_xmalloc(sizeof *src * (size_t)(cnt + 1));
  int *which = ut_xmalloc(sizeof *which * (size_t)(cnt + 1));
  int rr = src && which ? FOLD_DONE : (ox_fail(c, HARP_E_NO_MEMORY, "out of memory"), FOLD_FAIL);
  for (int64_t i = 0; rr == FOLD_DONE && i < cnt; i++) {
    int64_t cond;
    if (ox_known(c, fv_dim(c, x[0], fv_at(i, r, shape, st[0])), "the condition", &cond)) rr = FOLD_FAIL;
    which[i] = cond ? 0 : 1; /* of x + 1: the picks */
    src[i] = fv_at(i, r, shape, st[which[i] + 1]);
  }
  if (rr == FOLD_DONE) rr = fv_pick(c, 0, x + 1, which, src, r, shape);
  free(src);
  free(which);
  return rr;
}

/* Whether integer value x holds an element that is an expression of sizes. */
static bool any_symbolic(const ox_val *x) {
  for (int64_t i = 0; x->has_i && i < x->in; i++)
    if (!fe_dim_is_int(x->iv[i], NULL)) return true;
  return false;
}

/* x cast to ONNX type `to`. */
static int cast_known(ox_ctx *c, const ox_val *x, int64_t to) {
  bool narrow = to == OX_INT8 || to == OX_UINT8 || to == OX_INT16 || to == OX_UINT16 || to == OX_UINT32;
  bool int_to = to == OX_INT32 || to == OX_INT64 || to == OX_UINT64 || narrow;
  bool flt_to = to == OX_FLOAT || to == OX_FLOAT16 || to == OX_BFLOAT16 || to == OX_DOUBLE;
  int r = fv_rank(x), rr;
  if (fv_fsym(x) || ((to == OX_FLOAT || to == OX_DOUBLE) && any_symbolic(x) && !oxf_val_runtime(c, x)))
    return fv_fsym_cast(c, x, to); /* sizes as floats (not those a host op gives: the segment computes them) */
  const int64_t *shape = fv_shape(x);
  if (int_to || to == OX_BOOL) {
    int64_t lo = to == OX_INT8 ? -128 : to == OX_INT16 ? -32768 : to == OX_INT32 ? INT32_MIN : narrow || to == OX_UINT64 ? 0 : INT64_MIN;
    int64_t hi = to == OX_INT8 ? 127 : to == OX_UINT8 ? 255 : to == OX_INT16 ? 32767 : to == OX_UINT16 ? 65535
                 : to == OX_INT32 ? INT32_MAX : to == OX_UINT32 ? UINT32_MAX : INT64_MAX;
    ox_val *y = fv_out_ints(c, 0, r, shape, (int)to, &rr);
    for (int64_t i = 0; y && i < y->in; i++) {
      int64_t v;
      if (!fv_float(x)) {
        const fe_dim *d = fv_dim(c, x, i);
        if (to != OX_BOOL && !narrow && !fe_dim_is_int(d, &v)) { /* a size stays a size (int32 too: harp's integers) */
          y->iv[i] = d;
          continue;
        }
        if (ox_known(c, d, "input 0", &v)) return FOLD_FAIL;
      } else {
        double f = ut_tensor_get(&x->t, i);
        if (to != OX_BOOL && !(f > -9.2e18 && f < 9.2e18)) return ox_fail(c, HARP_E_INVALID_ARG, "cast of %g to %s", f, ox_type_name((int)to)), FOLD_FAIL;
        v = to == OX_BOOL ? f != 0 : (int64_t)f; /* truncation toward zero */
      }
      if (to == OX_BOOL) v = v != 0;
      else if (to == OX_INT8 || to == OX_UINT8) v = to == OX_INT8 ? (int8_t)(uint8_t)(uint64_t)v : (uint8_t)(uint64_t)v; /* harp dtypes: wrap */
      else if (v < lo || v > hi)
        return ox_fail(c, HARP_E_UNSUPPORTED, "cast of %" PRId64 " to %s: harp keeps integers as int32 and would not wrap it", v,
                       ox_type_name((int)to)), FOLD_FAIL;
      if (!(y->iv[i] = fe_dim_int(c->A, v))) return ox_fail(c, HARP_E_LIMIT, "integer overflow"), FOLD_FAIL;
    }
    return rr;
  }
  if (!flt_to) return FOLD_DECLINE; /* a type harp does not have: the mapping says so */
  ut_tensor t;
  if ((rr = begin_tensor(c, &t, dtype_of_oty((int)to), r, shape)) != FOLD_DONE) return rr;
  for (int64_t i = 0; i < fv_count(x); i++) {
    double v;
    if (fv_num(c, x, i, "a size cast to float", &v)) {
      ut_tensor_free(&t);
      return FOLD_FAIL;
    }
    ut_tensor_set(&t, i, (float)v);
  }
  return fv_end_tensor(c, 0, &t, (int)to);
}

static int f_cast(ox_ctx *c, ox_val *const *x, int n) {
  int64_t to;
  if (n < 1 || !x[0]) return ox_fail(c, HARP_E_ARITY, "input 0 is required"), FOLD_FAIL;
  if (ox_attr_int(c, "to", 0, &to)) return FOLD_FAIL;
  return cast_known(c, x[0], to);
}

static int f_castlike(ox_ctx *c, ox_val *const *x, int n) {
  if (n < 2 || !x[0] || !x[1]) return ox_fail(c, HARP_E_ARITY, "needs two inputs"), FOLD_FAIL;
  return x[1]->oty ? cast_known(c, x[0], x[1]->oty) : FOLD_DECLINE;
}

/* ---- reductions ------------------------------------------------------------------------------- */
typedef enum { R_SUM, R_PROD, R_MAX, R_MIN, R_MEAN } rkind;

static int fold_reduce(ox_ctx *c, rkind k, int input_from, ox_val *const *x, int n) {
  if (n < 1 || !x[0]) return ox_fail(c, HARP_E_ARITY, "input 0 is required"), FOLD_FAIL;
  const ox_val *a = x[0];
  if (fv_fsym(a)) return FOLD_DECLINE; /* sizes cast to float: not summed here */
  int r = fv_rank(a), na, axes[TINY_MAX_RANK];
  bool keep, noop, red[TINY_MAX_RANK] = {0};
  if (ox_reduce_axes(c, r, input_from, axes, &na, &keep, &noop)) return FOLD_FAIL;
  if (noop) return fv_same(c, 0, x[0], r, fv_shape(a));
  for (int i = 0; i < r; i++) red[i] = na == 0;
  for (int i = 0; i < na; i++) red[axes[i]] = true;
  int orank = 0;
  int64_t oshape[TINY_MAX_RANK], ostride[TINY_MAX_RANK], cnt = 1;
  for (int i = 0; i < r; i++) {
    if (red[i]) cnt *= fv_shape(a)[i];
    if (!red[i] || keep) oshape[orank++] = red[i] ? 1 : fv_shape(a)[i];
  }
  if (cnt == 0 && (k == R_MAX || k == R_MIN || k == R_MEAN)) return FOLD_DECLINE;
  /* each input element's output position: the kept axes' coordinates */
  for (int i = r - 1, s = 1; i >= 0; i--) ostride[i] = red[i] ? 0 : s, s *= red[i] ? 1 : (int)fv_shape(a)[i];
  int64_t total = fv_count(a), on = fv_count_of(orank, oshape, OX_MAX_FOLD);
  if (on < 0) return FOLD_DECLINE;
  if (!fv_float(a)) {
    int rr;
    ebin b = k == R_PROD ? E_MUL : k == R_MAX ? E_MAX : k == R_MIN ? E_MIN : E_ADD;
    bool *seen = ut_xcalloc((size_t)on + 1, sizeof *seen); /* Max / Min start from an element */
    ox_val *y = seen ? fv_out_ints(c, 0, orank, oshape, a->oty ? a->oty : OX_INT64, &rr) : NULL;
    if (!seen) rr = (ox_fail(c, HARP_E_NO_MEMORY, "out of memory"), FOLD_FAIL);
    for (int64_t i = 0; y && i < y->in; i++) y->iv[i] = fe_dim_int(c->A, k == R_PROD);
    for (int64_t i = 0; y && i < total && rr == FOLD_DONE; i++) {
      int64_t o = fv_at(i, r, fv_shape(a), ostride);
      const fe_dim *v = fv_dim(c, a, i);
      if ((k == R_MAX || k == R_MIN) && !seen[o]) y->iv[o] = v;
      else if (fv_int_bin(c, b, 0, y->iv[o], v, &y->iv[o])) rr = FOLD_FAIL;
      seen[o] = true;
    }
    free(seen);
    for (int64_t i = 0; y && rr == FOLD_DONE && k == R_MEAN && i < y->in; i++) {
      int64_t s;
      if (ox_known(c, y->iv[i], "the sum", &s) || !(y->iv[i] = fe_dim_int(c->A, s / cnt))) rr = FOLD_FAIL;
    }
    return rr;
  }
  double *acc = ut_xcalloc((size_t)on + 1, sizeof *acc);
  if (!acc) return ox_fail(c, HARP_E_NO_MEMORY, "out of memory"), FOLD_FAIL;
  for (int64_t i = 0; i < on; i++) acc[i] = k == R_PROD ? 1 : k == R_MAX ? -INFINITY : k == R_MIN ? INFINITY : 0;
  for (int64_t i = 0; i < total; i++) {
    double v = ut_tensor_get(&a->t, i), *p = &acc[fv_at(i, r, fv_shape(a), ostride)];
    *p = k == R_PROD ? *p * v : k == R_MAX ? flt_bin(E_MAX, *p, v) : k == R_MIN ? flt_bin(E_MIN, *p, v) : *p + v;
  }
  ut_tensor t;
  int rr = begin_tensor(c, &t, a->t.dtype, orank, oshape);
  for (int64_t i = 0; rr == FOLD_DONE && i < on; i++) ut_tensor_set(&t, i, (float)(k == R_MEAN ? acc[i] / (double)cnt : acc[i]));
  free(acc);
  return rr == FOLD_DONE ? fv_end_tensor(c, 0, &t, a->oty ? a->oty : OX_FLOAT) : rr;
}

static int f_reduce_sum(ox_ctx *c, ox_val *const *x, int n) { return fold_reduce(c, R_SUM, 13, x, n); }
static int f_reduce_prod(ox_ctx *c, ox_val *const *x, int n) { return fold_reduce(c, R_PROD, 18, x, n); }
static int f_reduce_max(ox_ctx *c, ox_val *const *x, int n) { return fold_reduce(c, R_MAX, 18, x, n); }
static int f_reduce_min(ox_ctx *c, ox_val *const *x, int n) { return fold_reduce(c, R_MIN, 18, x, n); }
static int f_reduce_mean(ox_ctx *c, ox_val *const *x, int n) { return fold_reduce(c, R_MEAN, 18, x, n); }

/* ---- generators --------------------------------------------------------------------------- */
/* Range(start, limit, delta): integers exactly; floats as onnxruntime's
 * kernel computes them (the count in double from limit - start in the
 * type, each value start + i * delta in the type). */
static int f_range(ox_ctx *c, ox_val *const *x, int n) {
  static const char *const what[3] = {"start", "limit", "delta"};
  if (n < 3 || !x[0] || !x[1] || !x[2]) return ox_fail(c, HARP_E_ARITY, "needs start, limit and delta"), FOLD_FAIL;
  bool flt = false;
  for (int i = 0; i < 3; i++) {
    if (fv_count(x[i]) != 1) return ox_fail(c, HARP_E_INVALID_ARG, "%s must have one element", what[i]), FOLD_FAIL;
    flt |= fv_float(x[i]);
  }
  if (!flt) {
    int64_t v[3], cnt;
    for (int i = 0; i < 3; i++)
      if (!fe_dim_is_int(fv_dim(c, x[i], 0), &v[i])) return FOLD_DECLINE; /* a size as a bound: the mapping's */
    if (v[2] == 0) return ox_fail(c, HARP_E_INVALID_ARG, "delta is 0"), FOLD_FAIL;
    cnt = v[2] > 0 ? (v[1] > v[0] ? (v[1] - v[0] + v[2] - 1) / v[2] : 0) : (v[0] > v[1] ? (v[0] - v[1] - v[2] - 1) / -v[2] : 0);
    int r;
    ox_val *y = fv_out_ints(c, 0, 1, &cnt, x[0]->oty ? x[0]->oty : OX_INT64, &r);
    for (int64_t k = 0; y && k < cnt; k++)
      if (!(y->iv[k] = fe_dim_int(c->A, v[0] + k * v[2]))) return ox_fail(c, HARP_E_NO_MEMORY, "out of memory"), FOLD_FAIL;
    return r;
  }
  double v[3];
  for (int i = 0; i < 3; i++)
    if (fv_num(c, x[i], 0, what[i], &v[i])) return FOLD_FAIL;
  float s = (float)v[0], l = (float)v[1], d = (float)v[2];
  if (d == 0) return ox_fail(c, HARP_E_INVALID_ARG, "delta is 0"), FOLD_FAIL;
  double len = ceil((double)(float)(l - s) / (double)d);
  if (!(len < (double)OX_MAX_FOLD)) return isnan(len) ? (ox_fail(c, HARP_E_INVALID_ARG, "a range of NaN values"), FOLD_FAIL) : FOLD_DECLINE;
  int64_t cnt = len > 0 ? (int64_t)len : 0;
  const ox_val *f = fv_float(x[0]) ? x[0] : fv_float(x[1]) ? x[1] : x[2];
  ut_tensor t;
  int rr = begin_tensor(c, &t, f->has_t ? f->t.dtype : TINY_FP32, 1, &cnt);
  for (int64_t k = 0; rr == FOLD_DONE && k < cnt; k++) {
    float step = (float)k * d;
    ut_tensor_set(&t, k, s + step);
  }
  return rr == FOLD_DONE ? fv_end_tensor(c, 0, &t, f->oty ? f->oty : OX_FLOAT) : rr;
}

/* ConstantOfShape(shape) filled with attribute value (float 0 by default). */
static int f_const_of_shape(ox_ctx *c, ox_val *const *x, int n) {
  if (n < 1 || !x[0]) return ox_fail(c, HARP_E_ARITY, "input 0 (shape) is required"), FOLD_FAIL;
  int64_t shape[TINY_MAX_RANK], v;
  int r = (int)fv_count(x[0]), rr;
  if (r > TINY_MAX_RANK || fv_float(x[0])) return FOLD_DECLINE; /* the mapping says why */
  for (int i = 0; i < r; i++)
    if (!fe_dim_is_int(fv_dim(c, x[0], i), &shape[i]) || shape[i] < 0) return FOLD_DECLINE;
  const Onnx__AttributeProto *a = ox_attr(c, "value");
  ox_val val = {0};
  double fill = 0;
  int oty = OX_FLOAT;
  if (a && a->t) {
    if (ox_decode_tensor(c, a->t, "value", &val)) return FOLD_FAIL;
    bool one = ox_const_scalar(&val, &fill);
    ut_tensor_free(&val.t);
    if (!one) return ox_fail(c, HARP_E_INVALID_ARG, "value must have one element"), FOLD_FAIL;
    oty = val.oty;
  }
  tiny_dtype dt;
  if (!ox_dtype(oty, &dt)) return FOLD_DECLINE;
  if (!tiny_dtype_is_float(dt)) {
    ox_val *y = fv_out_ints(c, 0, r, shape, oty, &rr);
    const fe_dim *d = y ? fe_dim_int(c->A, (v = (int64_t)fill)) : NULL;
    for (int64_t k = 0; y && k < y->in; k++) y->iv[k] = d;
    return y && !d ? (ox_fail(c, HARP_E_NO_MEMORY, "out of memory"), FOLD_FAIL) : rr;
  }
  ut_tensor t;
  if ((rr = begin_tensor(c, &t, dt, r, shape)) != FOLD_DONE) return rr;
  for (int64_t k = 0; k < ut_tensor_numel(&t); k++) ut_tensor_set(&t, k, (float)fill);
  return fv_end_tensor(c, 0, &t, oty);
}

/* NonZero(x): the coordinates of x's non-zero elements, [rank, count]. */
static int f_nonzero(ox_ctx *c, ox_val *const *x, int n) {
  if (n < 1 || !x[0]) return ox_fail(c, HARP_E_ARITY, "input 0 is required"), FOLD_FAIL;
  const ox_val *a = x[0];
  int r = fv_rank(a), rr;
  if (r < 1) return FOLD_DECLINE;
  int64_t total = fv_count(a), nz = 0;
  bool *on = ut_xcalloc((size_t)total + 1, sizeof *on);
  if (!on) return ox_fail(c, HARP_E_NO_MEMORY, "out of memory"), FOLD_FAIL;
  for (int64_t i = 0; i < total; i++) {
    double v;
    if (fv_num(c, a, i, "input 0", &v)) {
      free(on);
      return FOLD_FAIL;
    }
    nz += on[i] = v != 0;
  }
  int64_t shape[2] = {r, nz};
  ox_val *y = fv_out_ints(c, 0, 2, shape, OX_INT64, &rr);
  for (int64_t i = 0, j = 0; y && i < total; i++) {
    if (!on[i]) continue;
    for (int d = r - 1, k = (int)i; d >= 0; d--) { /* unravel i */
      y->iv[d * nz + j] = fe_dim_int(c->A, k % fv_shape(a)[d]);
      k /= (int)fv_shape(a)[d];
    }
    j++;
  }
  free(on);
  return rr;
}

/* ---- dispatch ------------------------------------------------------------------------------------ */
static const struct {
  const char *op;
  ox_fold_fn fn;
} folds[] = {{"Where", f_where},           {"Cast", f_cast},
             {"CastLike", f_castlike},     {"ReduceSum", f_reduce_sum},
             {"ReduceProd", f_reduce_prod}, {"ReduceMax", f_reduce_max},
             {"ReduceMin", f_reduce_min},  {"ReduceMean", f_reduce_mean},
             {"Range", f_range},           {"ConstantOfShape", f_const_of_shape},
             {"NonZero", f_nonzero}};

/* The fold of op: a binary (*bk) or unary (*uk) elementwise op, or fn. */
static ox_fold_fn find_fold(const char *op, int *bk, int *uk) {
  *bk = *uk = -1;
  for (int i = 0; i < (int)(sizeof bins / sizeof *bins); i++)
    if (!strcmp(bins[i].op, op)) return *bk = i, NULL;
  for (int i = 0; i < (int)(sizeof uns / sizeof *uns); i++)
    if (!strcmp(uns[i].op, op)) return *uk = i, NULL;
  for (size_t i = 0; i < sizeof folds / sizeof *folds; i++)
    if (!strcmp(folds[i].op, op)) return folds[i].fn;
  return ox_fold_find_move(op);
}

static bool runtime_sizes(const ox_ctx *c, ox_val *const *x, int n) {
  for (int i = 0; i < n; i++)
    if (x[i] && oxf_val_runtime(c, x[i])) return true;
  return false;
}

harp_status ox_fold(ox_ctx *c, bool *done) {
  *done = false;
  int nin = (int)c->node->n_input, bk, uk;
  if (nin < 1 || nin > MAX_IN) return HARP_OK; /* Constant and the like: their mappings */
  ox_fold_fn fn = find_fold(c->node->op_type, &bk, &uk);
  if (!fn && bk < 0 && uk < 0) return HARP_OK;
  ox_val *x[MAX_IN];
  bool any = false, dyn = false, ints = true, scalars = true;
  for (int i = 0; i < nin; i++) {
    bool failed = false;
    x[i] = ox_in(c, i, &failed);
    if (failed) return c->e->code;
    if (x[i] && !known_val(x[i])) return HARP_OK;
    any |= x[i] != NULL;
    dyn |= x[i] && x[i]->dyn;
    ints &= !x[i] || x[i]->has_i;
    scalars &= !x[i] || x[i]->has_i || x[i]->derived || ut_tensor_numel(&x[i]->t) <= 1;
  }
  /* shape arithmetic, integers alone, or one-element values and what
   * folded from them (a size computed in float: torchvision's image
   * transform); float weights stay the op mappings' */
  if (!any || !x[0] || (!dyn && !ints && !scalars)) return HARP_OK; /* every fold reads input 0 */
  int before = c->nvals;
  int r = bk >= 0 ? fold_binary(c, bins[bk].k, x, nin) : uk >= 0 ? fold_unary(c, uns[uk].k, x, nin) : fn(c, x, nin);
  if (r == FOLD_FAIL && c->e->code == HARP_E_UNBOUND_SYMBOL && runtime_sizes(c, x, nin)) {
    harp_error_clear(c->e); /* sizes a host op gave: the op computes them in the segment */
    for (size_t k = 0; k < c->node->n_output; k++) { /* what the fold defined is the mapping's to define */
      int *j = c->node->output[k][0] ? ut_strmap_find(&c->byname, c->node->output[k]) : NULL;
      if (j && *j >= before) c->vals[*j].vacant = true;
    }
    return HARP_OK;
  }
  if (r == FOLD_FAIL) return c->e->code ? c->e->code : ox_fail(c, HARP_E_INTERNAL, "folding failed without an error");
  *done = r == FOLD_DONE;
  for (size_t k = 0; *done && dyn && k < c->node->n_output; k++) { /* the outputs are shape arithmetic too */
    ox_val *y = c->node->output[k][0] ? ox_find(c, c->node->output[k]) : NULL;
    if (y) y->dyn = true;
  }
  return HARP_OK;
}
