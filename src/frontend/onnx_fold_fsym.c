/* onnx_fold_fsym.c — sizes cast to float, at import.  Exporters often
 * compute a size in float: Shape -> Gather -> Cast(float) -> Div(2.0) ->
 * Floor -> Cast(int64) (PyTorch's interpolate, a PaddlePaddle export's
 * token count).  Where the size is an expression of shape variables (a
 * ShapeSet's dim, a derived size), the evaluator keeps such a float tensor
 * as fractions of expressions: element k is iv[k] / fden (ox_val.fden, a
 * positive integer the value's elements share), exact as the float
 * computation is for sizes below 2^24.  Sums, differences, products,
 * quotients by constants, Max / Min, Neg and comparisons stay exact;
 * Floor, Ceil, Round and a cast back to an integer type make a size again
 * (floor divisions).  What needs the number (a quotient by a size, Sqrt, a
 * cast to float16) fails naming the graph input (ox_need_value), as
 * before; a value whose elements are all constants is settled into an
 * ordinary float tensor, so what reads float tensors never sees a
 * fraction.  ox_dim_nonneg proves a size expression nonnegative, a
 * ShapeSet's symbols taken at most their box's upper corner
 * (onnx_opts.keep_dynamic_hi): a table sliced by the sequence length.
 * Needs: onnx_fold.c (the framework, integer ops), dim.c.
 * Gives: fv_fsym, fv_fsym_bin, fv_fsym_un, fv_fsym_cast, fv_fsym_settle,
 * ox_dim_nonneg. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_fold.h"

#define MAX_DEN ((int64_t)1 << 30) /* a larger common denominator: the number is needed */

bool fv_fsym(const ox_val *x) { return x && x->has_i && x->fden > 0; }

/* A fraction num / den (den > 0). */
typedef struct frac {
  const fe_dim *num;
  int64_t den;
} frac;

/* v as p / q with q a power of two up to 2^20 (a float's fraction). */
static bool frac_of_double(double v, int64_t *p, int64_t *q) {
  for (int64_t d = 1; d <= ((int64_t)1 << 20); d *= 2) {
    double w = v * (double)d;
    if (w == nearbyint(w) && fabs(w) < 9.0e15) return *p = (int64_t)w, *q = d, true;
  }
  return false;
}

/* The first element of x that is an expression of sizes (NULL: none). */
static const fe_dim *first_symbolic(const ox_val *x) {
  for (int64_t i = 0; x && x->has_i && i < x->in; i++)
    if (!fe_dim_is_int(x->iv[i], NULL)) return x->iv[i];
  return NULL;
}

/* Fail because what needs the number of a size in x (or in y). */
static int need(ox_ctx *c, const ox_val *x, const ox_val *y, const char *what) {
  const fe_dim *d = first_symbolic(x);
  if (!d) d = first_symbolic(y);
  if (d) ox_need_value(c, d, what);
  else ox_fail(c, HARP_E_INTERNAL, "%s: no size to name", what);
  return FOLD_FAIL;
}

/* Element k of x as a fraction: a size cast to float, an integer, or a
 * float constant that is a fraction of a power of two (else false). */
static bool elem(ox_ctx *c, const ox_val *x, int64_t k, frac *f) {
  if (x->has_i) {
    f->num = x->iv[k], f->den = x->fden > 0 ? x->fden : 1;
    return true;
  }
  int64_t p, q;
  if (!frac_of_double(ut_tensor_get(&x->t, k), &p, &q)) return false;
  f->num = fe_dim_int(c->A, p), f->den = q;
  return f->num != NULL;
}

/* a * k for a constant k; NULL on overflow. */
static const fe_dim *times(ox_ctx *c, const fe_dim *a, int64_t k) { return k == 1 ? a : fe_dim_scale(c->A, a, k); }

/* The gcd of d's coefficients and constant with g. */
static int64_t gcd_with(const fe_dim *d, int64_t g) {
  g = ut_gcd(g, d->c < 0 ? -d->c : d->c);
  for (int i = 0; i < d->nt; i++) g = ut_gcd(g, d->t[i].k < 0 ? -d->t[i].k : d->t[i].k);
  return g;
}

/* Output out as the fractions f[0..n) of rank, shape and ONNX type oty,
 * over their least common denominator reduced by what divides every
 * numerator; then settled. */
static int put_fracs(ox_ctx *c, int out, frac *f, int64_t n, int rank, const int64_t *shape, int oty) {
  int64_t L = 1, g = 0;
  for (int64_t i = 0; i < n; i++) {
    int64_t m = L / ut_gcd(L, f[i].den);
    if (!ut_mul_ok(m, f[i].den, &L) || L > MAX_DEN) return FOLD_DECLINE;
  }
  for (int64_t i = 0; i < n; i++)
    if (!(f[i].num = times(c, f[i].num, L / f[i].den))) return ox_fail(c, HARP_E_LIMIT, "a size computed in float overflows"), FOLD_FAIL;
  for (int64_t i = 0; i < n; i++) g = gcd_with(f[i].num, g);
  g = ut_gcd(g, L);
  int rr;
  ox_val *y = fv_out_ints(c, out, rank, shape, oty, &rr);
  for (int64_t i = 0; y && i < n; i++)
    if (!(y->iv[i] = g > 1 ? fe_dim_div(c->A, f[i].num, g) : f[i].num)) return ox_fail(c, HARP_E_NO_MEMORY, "out of memory"), FOLD_FAIL;
  if (!y) return rr;
  y->fden = g > 1 ? L / g : L;
  return fv_fsym_settle(c, out);
}

/* a op b for fractions (op: E_ADD, E_SUB, E_MUL, E_DIV by a constant, E_MAX, E_MIN) into *r; FOLD_*. */
static int frac_bin(ox_ctx *c, ebin k, frac a, frac b, frac *r) {
  int64_t den, bv;
  if (!ut_mul_ok(a.den, b.den, &den) || den > MAX_DEN) return FOLD_DECLINE;
  const fe_dim *ab = times(c, a.num, b.den), *ba = times(c, b.num, a.den);
  if (!ab || !ba) return ox_fail(c, HARP_E_LIMIT, "a size computed in float overflows"), FOLD_FAIL;
  r->den = den;
  switch (k) {
  case E_ADD: r->num = fe_dim_add(c->A, ab, ba); break;
  case E_SUB: r->num = fe_dim_sub(c->A, ab, ba); break;
  case E_MUL: r->num = fe_dim_mul(c->A, a.num, b.num); break;
  case E_DIV: /* (a / da) / (bv / db) = a db / (da bv) */
    if (!fe_dim_is_int(b.num, &bv) || bv == 0) return FOLD_DECLINE;
    if (!ut_mul_ok(a.den, bv < 0 ? -bv : bv, &r->den) || r->den > MAX_DEN) return FOLD_DECLINE;
    r->num = times(c, a.num, bv < 0 ? -b.den : b.den);
    break;
  default: /* E_MAX, E_MIN: decided on a db against b da */
    if (fv_int_bin(c, k, 0, ab, ba, &r->num)) return FOLD_FAIL;
    break;
  }
  return r->num ? FOLD_DONE : (ox_fail(c, HARP_E_LIMIT, "a size computed in float overflows"), FOLD_FAIL);
}

int fv_fsym_bin(ox_ctx *c, ebin k, ox_val *const *x, int r, const int64_t *shape, int64_t (*st)[TINY_MAX_RANK], int out) {
  bool cmp = k >= E_EQ && k <= E_GE;
  if (!cmp && k != E_ADD && k != E_SUB && k != E_MUL && k != E_DIV && k != E_MAX && k != E_MIN)
    return need(c, x[0], x[1], "a size computed in float");
  int64_t n = fv_count_of(r, shape, OX_MAX_INT_CONST);
  if (n < 0) return FOLD_DECLINE;
  frac *f = ut_xcalloc((size_t)n + 1, sizeof *f);
  if (!f) return ox_fail(c, HARP_E_NO_MEMORY, "out of memory"), FOLD_FAIL;
  int rr = FOLD_DONE;
  for (int64_t i = 0; rr == FOLD_DONE && i < n; i++) {
    frac a, b;
    if (!elem(c, x[0], fv_at(i, r, shape, st[0]), &a) || !elem(c, x[1], fv_at(i, r, shape, st[1]), &b)) {
      rr = need(c, x[0], x[1], "a size computed in float with a constant that is no fraction of a power of two");
      break;
    }
    if (!cmp) {
      rr = frac_bin(c, k, a, b, &f[i]);
      if (rr == FOLD_DECLINE && k == E_DIV) rr = need(c, x[1], x[0], "a divisor of a size computed in float");
      continue;
    }
    const fe_dim *ab = times(c, a.num, b.den), *ba = times(c, b.num, a.den);
    if (!ab || !ba) rr = (ox_fail(c, HARP_E_LIMIT, "a size computed in float overflows"), FOLD_FAIL);
    else if (fv_int_bin(c, k, 0, ab, ba, &f[i].num)) rr = FOLD_FAIL;
  }
  if (rr == FOLD_DONE && cmp) {
    ox_val *y = fv_out_ints(c, out, r, shape, OX_BOOL, &rr);
    for (int64_t i = 0; y && i < n; i++) y->iv[i] = f[i].num;
  } else if (rr == FOLD_DONE) {
    rr = put_fracs(c, out, f, n, r, shape, fv_fsym(x[0]) ? x[0]->oty : x[1]->oty);
  }
  free(f);
  return rr;
}

/* floor(a / den) as a size (a fraction of denominator 1). */
static const fe_dim *floor_of(ox_ctx *c, frac a) { return fe_dim_div(c->A, a.num, a.den); }

/* Unary op k of fraction a into *r: Neg, Floor, Ceil, Round (an odd
 * denominator: no ties), Abs and Relu of a non-negative size; false when
 * it needs the number. */
static bool frac_un(ox_ctx *c, eun k, frac a, frac *r) {
  int64_t lb;
  const fe_dim *t;
  *r = (frac){NULL, 1};
  switch (k) {
  case U_NEG: r->num = fe_dim_scale(c->A, a.num, -1), r->den = a.den; break;
  case U_FLOOR: r->num = floor_of(c, a); break;
  case U_CEIL: /* -floor(-a / den) */
    t = fe_dim_scale(c->A, a.num, -1);
    t = t ? floor_of(c, (frac){t, a.den}) : NULL;
    r->num = t ? fe_dim_scale(c->A, t, -1) : NULL;
    break;
  case U_ROUND: /* floor((2a + den) / 2den) where no value is halfway */
    if (a.den == 1) return *r = a, true;
    if (a.den % 2 == 0 || a.den > MAX_DEN) return false;
    t = fe_dim_scale(c->A, a.num, 2);
    t = t ? fe_dim_add(c->A, t, fe_dim_int(c->A, a.den)) : NULL;
    r->num = t ? fe_dim_div(c->A, t, 2 * a.den) : NULL;
    break;
  case U_ABS:
  case U_RELU:
    if (!fv_dim_lb(a.num, &lb) || lb < 0) return false;
    *r = a;
    break;
  default: return false;
  }
  return true;
}

int fv_fsym_un(ox_ctx *c, eun k, const ox_val *a) {
  int64_t n = fv_count(a);
  frac *f = ut_xcalloc((size_t)n + 1, sizeof *f);
  if (!f) return ox_fail(c, HARP_E_NO_MEMORY, "out of memory"), FOLD_FAIL;
  int rr = FOLD_DONE;
  for (int64_t i = 0; i < n && rr == FOLD_DONE; i++) {
    frac e = {a->iv[i], a->fden};
    if (!frac_un(c, k, e, &f[i])) rr = need(c, a, NULL, "a size computed in float");
    else if (!f[i].num) rr = (ox_fail(c, HARP_E_LIMIT, "a size computed in float overflows"), FOLD_FAIL);
  }
  if (rr == FOLD_DONE) rr = put_fracs(c, 0, f, n, fv_rank(a), fv_shape(a), a->oty);
  free(f);
  return rr;
}

int fv_fsym_cast(ox_ctx *c, const ox_val *x, int64_t to) {
  int64_t n = fv_count(x), den = x->fden > 0 ? x->fden : 1, lb;
  int rr = FOLD_DONE;
  if (to == OX_FLOAT || to == OX_DOUBLE) { /* exact for sizes below 2^24 */
    frac *f = ut_xcalloc((size_t)n + 1, sizeof *f);
    if (!f) return ox_fail(c, HARP_E_NO_MEMORY, "out of memory"), FOLD_FAIL;
    for (int64_t i = 0; i < n; i++) f[i] = (frac){x->iv[i], den};
    rr = put_fracs(c, 0, f, n, fv_rank(x), fv_shape(x), (int)to);
    free(f);
    return rr;
  }
  if (to != OX_INT64 && to != OX_INT32 && to != OX_UINT64) return need(c, x, NULL, "a size computed in float, cast to a narrow type");
  ox_val *y = fv_out_ints(c, 0, fv_rank(x), fv_shape(x), (int)to, &rr);
  for (int64_t i = 0; y && i < n; i++) { /* truncation toward zero: the floor of a value >= 0 */
    if (den > 1 && (!fv_dim_lb(x->iv[i], &lb) || lb < 0)) return need(c, x, NULL, "a size computed in float, cast to an integer");
    if (!(y->iv[i] = fe_dim_div(c->A, x->iv[i], den))) return ox_fail(c, HARP_E_NO_MEMORY, "out of memory"), FOLD_FAIL;
  }
  return rr;
}

int fv_fsym_settle(ox_ctx *c, int out) {
  if (out >= (int)c->node->n_output || !c->node->output[out][0]) return FOLD_DONE;
  ox_val *y = ox_find(c, c->node->output[out]);
  if (!fv_fsym(y) || first_symbolic(y)) return FOLD_DONE;
  tiny_dtype dt = TINY_FP32;
  if (!ox_dtype(y->oty, &dt) || !tiny_dtype_is_float(dt)) dt = TINY_FP32;
  ut_tensor t;
  memset(&t, 0, sizeof t);
  if (ut_tensor_alloc(c->e, &t, dt, y->irank, y->ishape)) return FOLD_FAIL;
  for (int64_t i = 0; i < y->in; i++) {
    int64_t v = 0;
    fe_dim_is_int(y->iv[i], &v);
    ut_tensor_set(&t, i, (float)((double)v / (double)y->fden));
  }
  y->has_i = false, y->iv = NULL, y->in = 0, y->fden = 0;
  y->has_t = true, y->t = t, y->derived = true;
  return FOLD_DONE;
}

/* d with its term k * floor(num / q) (k < 0, q dividing k) replaced by the
 * smaller (k / q) * num; NULL when d has no such term. */
static const fe_dim *relax_div(ox_ctx *c, const fe_dim *d) {
  for (int i = 0; i < d->nt; i++) {
    const fe_atom *a = d->t[i].atom;
    int64_t k = d->t[i].k;
    if (k >= 0 || a->kind != FE_A_DIV || k % a->q) continue;
    const fe_dim *one = fe_dim_atom(c->A, a), *num = fe_dim_scale(c->A, a->num, k / a->q);
    const fe_dim *rest = one ? fe_dim_sub(c->A, d, fe_dim_scale(c->A, one, k)) : NULL;
    return rest && num ? fe_dim_add(c->A, rest, num) : NULL;
  }
  return NULL;
}

/* Whether d >= 0 where every symbol is at most its ShapeSet's upper corner
 * (onnx_opts.keep_dynamic_hi, c->sym_hi): d's constant, positive multiples
 * of symbols, negative multiples of bounded ones (128 - S for S <= 128). */
static bool nonneg_in_box(const ox_ctx *c, const fe_dim *d) {
  int64_t lb = d->c;
  for (int i = 0; i < d->nt; i++) {
    const fe_atom *a = d->t[i].atom;
    const int *k = a->kind == FE_A_SYM ? ut_strmap_find(&c->sym_hi, a->sym) : NULL;
    int64_t t;
    if (a->kind != FE_A_SYM || (d->t[i].k < 0 && !k)) return false;
    if (d->t[i].k < 0 && (!ut_mul_ok(d->t[i].k, c->opts->keep_dynamic_hi[*k], &t) || !ut_add_ok(lb, t, &lb))) return false;
  }
  return lb >= 0;
}

bool ox_dim_nonneg(ox_ctx *c, const fe_dim *d) {
  int64_t lb;
  const fe_dim *d0 = d;
  for (int depth = 0; d && depth < 8; depth++, d = relax_div(c, d)) /* w - 2*(w/2) >= w - w */
    if (fv_dim_lb(d, &lb) && lb >= 0) return true;
  return d0 && c->sym_hi.n && nonneg_in_box(c, d0);
}
