/* affine.c — IndexBook expressions: affine + floordiv, kept canonical and
 * simplified so that composed movement chains stay small.
 * Needs: util (arena, checked arithmetic, ut_str).  Gives: ib_aff_*.
 *
 * Simplification of floor(E/q) (q >= 2), in order:
 *   1. E = q*A + R with every coefficient of R in [0, q) (symbols: truncated,
 *      sign kept): floor(E/q) = A + floor(R/q);
 *   2. R's range lies in one block [k*q, k*q + q-1]: floor(R/q) = k;
 *   3. R = g*R1 + R2 with g | q and R2 in [0, g): floor(R/q) = floor(R1/(q/g));
 *   4. R = floor(N/a) + S (S free of divisions): floor(R/q) = floor((N + a*S)/(a*q));
 *   5. otherwise a new division floor(R/q).
 * Ranges come from the environment's variable ranges; unbound symbols are
 * taken as >= 0. */
#include <stdlib.h>
#include <string.h>

#include "index/indexbook.h"
#include "util/util.h"

static harp_status limit(ib_env *env, const char *what) {
  return ut_fail(env->e, HARP_E_LIMIT, env->node, "index expression too large: %s", what);
}

void ib_aff_zero(ib_aff *a) {
  a->c = 0;
  memset(a->v, 0, sizeof a->v);
  a->nsym = a->ndiv = 0;
}

void ib_aff_const(ib_aff *a, int64_t c) {
  ib_aff_zero(a);
  a->c = c;
}

void ib_aff_var(ib_aff *a, int var) {
  ib_aff_zero(a);
  a->v[var] = 1;
}

bool ib_aff_is_const(const ib_aff *a) {
  for (int j = 0; j < IB_MAX_VARS; j++)
    if (a->v[j]) return false;
  return a->nsym == 0 && a->ndiv == 0;
}

int ib_aff_nvars(const ib_aff *a) {
  int n = 0;
  for (int j = 0; j < IB_MAX_VARS; j++) n += a->v[j] != 0;
  return n;
}

bool ib_aff_uses_var(const ib_aff *a, int var) {
  if (a->v[var]) return true;
  for (int k = 0; k < a->ndiv; k++)
    if (ib_aff_uses_var(&a->div[k].d->num, var)) return true;
  return false;
}

/* ---- ordering ----------------------------------------------------------- */
static int cmp64(int64_t a, int64_t b) { return a < b ? -1 : a > b; }

int ib_div_cmp(const ib_div *a, const ib_div *b) {
  if (a == b) return 0;
  int c = cmp64(a->q, b->q);
  return c ? c : ib_aff_cmp(&a->num, &b->num);
}

int ib_aff_cmp(const ib_aff *a, const ib_aff *b) {
  int c;
  for (int j = 0; j < IB_MAX_VARS; j++)
    if ((c = cmp64(a->v[j], b->v[j]))) return c;
  if ((c = cmp64(a->nsym, b->nsym))) return c;
  for (int k = 0; k < a->nsym; k++) {
    if ((c = strcmp(a->sym[k].name, b->sym[k].name))) return c;
    if ((c = cmp64(a->sym[k].k, b->sym[k].k))) return c;
  }
  if ((c = cmp64(a->ndiv, b->ndiv))) return c;
  for (int k = 0; k < a->ndiv; k++) {
    if ((c = ib_div_cmp(a->div[k].d, b->div[k].d))) return c;
    if ((c = cmp64(a->div[k].k, b->div[k].k))) return c;
  }
  return cmp64(a->c, b->c);
}

/* ---- term arithmetic ---------------------------------------------------- */
harp_status ib_aff_add_sym(ib_env *env, ib_aff *a, const char *name, int64_t k) {
  if (!k) return HARP_OK;
  int i = 0;
  while (i < a->nsym && strcmp(a->sym[i].name, name) < 0) i++;
  if (i < a->nsym && strcmp(a->sym[i].name, name) == 0) {
    if (!ut_add_ok(a->sym[i].k, k, &a->sym[i].k)) return limit(env, "coefficient overflow");
    if (a->sym[i].k == 0) {
      memmove(&a->sym[i], &a->sym[i + 1], sizeof a->sym[0] * (size_t)(a->nsym - i - 1));
      a->nsym--;
    }
    return HARP_OK;
  }
  if (a->nsym == IB_MAX_SYMS) return limit(env, "too many symbols");
  memmove(&a->sym[i + 1], &a->sym[i], sizeof a->sym[0] * (size_t)(a->nsym - i));
  a->sym[i] = (ib_symterm){name, k};
  a->nsym++;
  return HARP_OK;
}

static harp_status add_div(ib_env *env, ib_aff *a, const ib_div *d, int64_t k) {
  if (!k) return HARP_OK;
  int i = 0, c = -1;
  while (i < a->ndiv && (c = ib_div_cmp(a->div[i].d, d)) < 0) i++;
  if (i < a->ndiv && c == 0) {
    if (!ut_add_ok(a->div[i].k, k, &a->div[i].k)) return limit(env, "coefficient overflow");
    if (a->div[i].k == 0) {
      memmove(&a->div[i], &a->div[i + 1], sizeof a->div[0] * (size_t)(a->ndiv - i - 1));
      a->ndiv--;
    }
    return HARP_OK;
  }
  if (a->ndiv == IB_MAX_DIVS) return limit(env, "too many floor divisions");
  memmove(&a->div[i + 1], &a->div[i], sizeof a->div[0] * (size_t)(a->ndiv - i));
  a->div[i] = (ib_divterm){d, k};
  a->ndiv++;
  return HARP_OK;
}

harp_status ib_aff_add(ib_env *env, ib_aff *a, const ib_aff *b, int64_t k) {
  int64_t t;
  if (!k) return HARP_OK;
  ib_aff r = *a; /* b may alias a */
  if (!ut_mul_ok(b->c, k, &t) || !ut_add_ok(r.c, t, &r.c)) return limit(env, "coefficient overflow");
  for (int j = 0; j < IB_MAX_VARS; j++)
    if (b->v[j] && (!ut_mul_ok(b->v[j], k, &t) || !ut_add_ok(r.v[j], t, &r.v[j])))
      return limit(env, "coefficient overflow");
  for (int i = 0; i < b->nsym; i++) {
    if (!ut_mul_ok(b->sym[i].k, k, &t)) return limit(env, "coefficient overflow");
    if (ib_aff_add_sym(env, &r, b->sym[i].name, t)) return env->e->code;
  }
  for (int i = 0; i < b->ndiv; i++) {
    if (!ut_mul_ok(b->div[i].k, k, &t)) return limit(env, "coefficient overflow");
    if (add_div(env, &r, b->div[i].d, t)) return env->e->code;
  }
  *a = r;
  return HARP_OK;
}

/* ---- ranges ------------------------------------------------------------- */
static ib_range rconst(int64_t c) { return (ib_range){true, true, c, c}; }

static ib_range rscale(ib_range r, int64_t k) {
  ib_range o = {false, false, 0, 0};
  if (k == 0) return rconst(0);
  ib_range s = r;
  if (k < 0) { /* swap ends */
    s.has_lo = r.has_hi, s.lo = r.hi;
    s.has_hi = r.has_lo, s.hi = r.lo;
  }
  o.has_lo = s.has_lo && ut_mul_ok(s.lo, k, &o.lo);
  o.has_hi = s.has_hi && ut_mul_ok(s.hi, k, &o.hi);
  return o;
}

static ib_range radd(ib_range a, ib_range b) {
  ib_range o = {false, false, 0, 0};
  o.has_lo = a.has_lo && b.has_lo && ut_add_ok(a.lo, b.lo, &o.lo);
  o.has_hi = a.has_hi && b.has_hi && ut_add_ok(a.hi, b.hi, &o.hi);
  return o;
}

ib_range ib_aff_range(const ib_env *env, const ib_aff *a) {
  ib_range r = rconst(a->c);
  for (int j = 0; j < IB_MAX_VARS; j++) {
    if (!a->v[j]) continue;
    ib_range v = j < env->nvars ? env->var[j] : (ib_range){false, false, 0, 0};
    r = radd(r, rscale(v, a->v[j]));
  }
  for (int i = 0; i < a->nsym; i++) r = radd(r, rscale((ib_range){true, false, 0, 0}, a->sym[i].k));
  for (int i = 0; i < a->ndiv; i++) {
    ib_range n = ib_aff_range(env, &a->div[i].d->num), d = {n.has_lo, n.has_hi, 0, 0};
    if (d.has_lo) d.lo = ut_floordiv(n.lo, a->div[i].d->q);
    if (d.has_hi) d.hi = ut_floordiv(n.hi, a->div[i].d->q);
    r = radd(r, rscale(d, a->div[i].k));
  }
  return r;
}

/* ---- floor division ----------------------------------------------------- */
/* Split every coefficient c of x into q*floor(c/q) + mod(c, q). */
static void split(const ib_aff *x, int64_t q, ib_aff *A, ib_aff *R) {
  ib_aff_zero(A);
  ib_aff_zero(R);
  A->c = ut_floordiv(x->c, q), R->c = ut_mod(x->c, q);
  for (int j = 0; j < IB_MAX_VARS; j++) A->v[j] = ut_floordiv(x->v[j], q), R->v[j] = ut_mod(x->v[j], q);
  for (int i = 0; i < x->nsym; i++) { /* symbols are unbounded above: keep their sign (W - K, not K + W - 2K) */
    int64_t a = x->sym[i].k / q, r = x->sym[i].k % q;
    if (a) A->sym[A->nsym++] = (ib_symterm){x->sym[i].name, a};
    if (r) R->sym[R->nsym++] = (ib_symterm){x->sym[i].name, r};
  }
  for (int i = 0; i < x->ndiv; i++) {
    int64_t a = ut_floordiv(x->div[i].k, q), r = ut_mod(x->div[i].k, q);
    if (a) A->div[A->ndiv++] = (ib_divterm){x->div[i].d, a};
    if (r) R->div[R->ndiv++] = (ib_divterm){x->div[i].d, r};
  }
}

static bool in_block(ib_range r, int64_t q, int64_t *k) {
  if (!r.has_lo || !r.has_hi) return false;
  *k = ut_floordiv(r.lo, q);
  return *k == ut_floordiv(r.hi, q);
}

/* Rule 3: R = g*R1 + R2, g | q, R2 in [0, g).  Tries the largest g first. */
static bool common_factor(const ib_env *env, const ib_aff *R, int64_t q, ib_aff *R1, int64_t *qq) {
  int64_t cand[IB_MAX_VARS + IB_MAX_SYMS + IB_MAX_DIVS];
  int nc = 0;
  for (int j = 0; j < IB_MAX_VARS; j++)
    if (R->v[j]) cand[nc++] = ut_gcd(R->v[j], q);
  for (int i = 0; i < R->nsym; i++) cand[nc++] = ut_gcd(R->sym[i].k, q);
  for (int i = 0; i < R->ndiv; i++) cand[nc++] = ut_gcd(R->div[i].k, q);
  for (;;) {
    int64_t g = 1;
    for (int i = 0; i < nc; i++)
      if (cand[i] > g && cand[i] < q) g = cand[i];
    if (g == 1) return false;
    ib_aff r2;
    ib_aff_zero(R1);
    ib_aff_zero(&r2);
    R1->c = ut_floordiv(R->c, g), r2.c = ut_mod(R->c, g);
    for (int j = 0; j < IB_MAX_VARS; j++) {
      if (R->v[j] % g == 0) R1->v[j] = R->v[j] / g;
      else r2.v[j] = R->v[j];
    }
    for (int i = 0; i < R->nsym; i++) {
      if (R->sym[i].k % g == 0) R1->sym[R1->nsym++] = (ib_symterm){R->sym[i].name, R->sym[i].k / g};
      else r2.sym[r2.nsym++] = R->sym[i];
    }
    for (int i = 0; i < R->ndiv; i++) {
      if (R->div[i].k % g == 0) R1->div[R1->ndiv++] = (ib_divterm){R->div[i].d, R->div[i].k / g};
      else r2.div[r2.ndiv++] = R->div[i];
    }
    ib_range r = ib_aff_range(env, &r2);
    if (r.has_lo && r.has_hi && r.lo >= 0 && r.hi < g) {
      *qq = q / g;
      return true;
    }
    for (int i = 0; i < nc; i++) /* drop this g and try smaller ones */
      if (cand[i] == g) cand[i] = 1;
  }
}

static harp_status floordiv_rec(ib_env *env, ib_aff *out, const ib_aff *x, int64_t q, int depth);

/* floor(R/q) for R with coefficients in [0, q): rules 2-5. */
static harp_status floor_rest(ib_env *env, ib_aff *out, const ib_aff *R, int64_t q, int depth) {
  int64_t k, qq;
  ib_aff R1;
  if (in_block(ib_aff_range(env, R), q, &k)) {
    ib_aff_const(out, k);
    return HARP_OK;
  }
  if (common_factor(env, R, q, &R1, &qq)) return floordiv_rec(env, out, &R1, qq, depth + 1);
  if (R->ndiv == 1 && R->div[0].k == 1) { /* rule 4 */
    const ib_div *d = R->div[0].d;
    ib_aff n = d->num, s = *R;
    int64_t aq;
    s.ndiv = 0;
    if (ut_mul_ok(d->q, q, &aq) && ib_aff_add(env, &n, &s, d->q) == HARP_OK) return floordiv_rec(env, out, &n, aq, depth + 1);
    if (env->e->code) return env->e->code;
  }
  ib_div *d = ut_arena_alloc(env->arena, sizeof *d);
  if (!d) return ut_fail(env->e, HARP_E_NO_MEMORY, env->node, "out of memory");
  d->num = *R;
  d->q = q;
  ib_aff_zero(out);
  return add_div(env, out, d, 1);
}

static harp_status floordiv_rec(ib_env *env, ib_aff *out, const ib_aff *x, int64_t q, int depth) {
  if (q < 1) return ut_fail(env->e, HARP_E_INTERNAL, env->node, "floor division by %lld", (long long)q);
  if (depth > 64) return limit(env, "nested floor divisions");
  if (q == 1) {
    *out = *x;
    return HARP_OK;
  }
  ib_aff A, R, f;
  split(x, q, &A, &R);
  if (floor_rest(env, &f, &R, q, depth)) return env->e->code;
  if (ib_aff_add(env, &A, &f, 1)) return env->e->code;
  *out = A;
  return HARP_OK;
}

harp_status ib_aff_floordiv(ib_env *env, ib_aff *out, const ib_aff *a, int64_t q) { return floordiv_rec(env, out, a, q, 0); }

harp_status ib_aff_mod(ib_env *env, ib_aff *out, const ib_aff *a, int64_t q, bool *made_div) {
  ib_aff f, r = *a;
  *made_div = false;
  if (ib_aff_floordiv(env, &f, a, q)) return env->e->code;
  if (ib_aff_add(env, &r, &f, -q)) return env->e->code;
  *made_div = f.ndiv > 0;
  *out = r;
  return HARP_OK;
}

/* ---- substitution ------------------------------------------------------- */
static harp_status subst_rec(ib_env *env, ib_aff *out, const ib_aff *a, const ib_aff *vals, int nvals, int depth) {
  if (depth > 64) return limit(env, "nested floor divisions");
  ib_aff r;
  ib_aff_const(&r, a->c);
  for (int j = 0; j < IB_MAX_VARS; j++) {
    if (!a->v[j]) continue;
    if (j >= nvals) return ut_fail(env->e, HARP_E_INTERNAL, env->node, "substitution misses variable %d", j);
    if (ib_aff_add(env, &r, &vals[j], a->v[j])) return env->e->code;
  }
  for (int i = 0; i < a->nsym; i++)
    if (ib_aff_add_sym(env, &r, a->sym[i].name, a->sym[i].k)) return env->e->code;
  for (int i = 0; i < a->ndiv; i++) {
    ib_aff n, f;
    if (subst_rec(env, &n, &a->div[i].d->num, vals, nvals, depth + 1)) return env->e->code;
    if (ib_aff_floordiv(env, &f, &n, a->div[i].d->q)) return env->e->code;
    if (ib_aff_add(env, &r, &f, a->div[i].k)) return env->e->code;
  }
  *out = r;
  return HARP_OK;
}

harp_status ib_aff_subst(ib_env *env, ib_aff *out, const ib_aff *a, const ib_aff *vals, int nvals) {
  return subst_rec(env, out, a, vals, nvals, 0);
}

/* ---- printing ----------------------------------------------------------- */
static void put_term(ut_str *s, bool *first, int64_t k, const char *what, bool paren) {
  unsigned long long m = k < 0 ? 0ull - (unsigned long long)k : (unsigned long long)k; /* |INT64_MIN| too */
  if (*first) {
    if (k < 0) ut_str_puts(s, "-");
    if (m != 1 || !what) ut_str_printf(s, "%llu", m);
  } else {
    ut_str_puts(s, k < 0 ? " - " : " + ");
    if (m != 1 || !what) ut_str_printf(s, "%llu", m);
  }
  if (what) {
    if (k != 1 && k != -1) ut_str_puts(s, "*");
    if (paren) ut_str_putc(s, '(');
    ut_str_puts(s, what);
    if (paren) ut_str_putc(s, ')');
  }
  *first = false;
}

static char *print_to(const ib_aff *a, const char *const *vnames) {
  ut_str t;
  ut_str_init(&t);
  ib_aff_print(&t, a, vnames);
  return ut_str_take(&t);
}

/* Is a == m*(num(d) mod q) + rest for some m >= 1?  True when a holds m times
 * num's terms and the division has coefficient -m*q.  Fills m and rest. */
static bool as_mod(const ib_aff *a, int i, int64_t *mult, ib_aff *rest) {
  const ib_div *d = a->div[i].d;
  if (a->div[i].k >= 0 || (-a->div[i].k) % d->q) return false;
  int64_t m = -a->div[i].k / d->q, t;
  const ib_aff *n = &d->num;
  for (int j = 0; j < IB_MAX_VARS; j++)
    if (n->v[j] && (!ut_mul_ok(n->v[j], m, &t) || a->v[j] != t)) return false;
  for (int k = 0; k < n->nsym; k++) {
    bool found = false;
    for (int x = 0; x < a->nsym; x++)
      found |= strcmp(a->sym[x].name, n->sym[k].name) == 0 && ut_mul_ok(n->sym[k].k, m, &t) && a->sym[x].k == t;
    if (!found) return false;
  }
  for (int k = 0; k < n->ndiv; k++) {
    bool found = false;
    for (int x = 0; x < a->ndiv; x++)
      found |= ib_div_cmp(a->div[x].d, n->div[k].d) == 0 && ut_mul_ok(n->div[k].k, m, &t) && a->div[x].k == t;
    if (!found) return false;
  }
  if (!ut_mul_ok(n->c, m, &t)) return false;
  /* rest = a - m*num + m*q*d: drop num's terms and the division */
  *rest = *a;
  rest->c -= t;
  for (int j = 0; j < IB_MAX_VARS; j++) rest->v[j] -= n->v[j] * m;
  int ns = 0;
  for (int x = 0; x < a->nsym; x++) {
    bool drop = false;
    for (int k = 0; k < n->nsym; k++) drop |= strcmp(a->sym[x].name, n->sym[k].name) == 0;
    if (!drop) rest->sym[ns++] = a->sym[x];
  }
  rest->nsym = ns;
  int nd = 0;
  for (int x = 0; x < a->ndiv; x++) {
    bool drop = x == i;
    for (int k = 0; k < n->ndiv; k++) drop |= ib_div_cmp(a->div[x].d, n->div[k].d) == 0;
    if (!drop) rest->div[nd++] = a->div[x];
  }
  rest->ndiv = nd;
  *mult = m;
  return true;
}

void ib_aff_print(ut_str *s, const ib_aff *a, const char *const *vnames) {
  bool first = true;
  for (int i = 0; i < a->ndiv; i++) {
    ib_aff rest;
    int64_t m;
    if (!as_mod(a, i, &m, &rest)) continue;
    char *n = print_to(&a->div[i].d->num, vnames);
    if (m != 1) ut_str_printf(s, "%lld*", (long long)m);
    ut_str_printf(s, "%s(%s) mod %lld%s", m != 1 ? "(" : "", n ? n : "?", (long long)a->div[i].d->q, m != 1 ? ")" : "");
    free(n);
    first = false;
    bool zero = ib_aff_is_const(&rest) && rest.c == 0;
    if (zero) return;
    char *r = print_to(&rest, vnames);
    if (r && r[0] == '-') ut_str_printf(s, " - %s", r + 1);
    else ut_str_printf(s, " + %s", r ? r : "?");
    free(r);
    return;
  }
  /* positive terms first, so that "M - i1 - 1" reads as written by hand */
  bool cdone = false;
  for (int neg = 0; neg < 2; neg++) {
    if (neg && first && a->c > 0) put_term(s, &first, a->c, NULL, false), cdone = true;
    for (int j = 0; j < IB_MAX_VARS; j++)
      if (a->v[j] && (a->v[j] < 0) == neg) put_term(s, &first, a->v[j], vnames[j], false);
    for (int i = 0; i < a->nsym; i++)
      if ((a->sym[i].k < 0) == neg) put_term(s, &first, a->sym[i].k, a->sym[i].name, false);
    for (int i = 0; i < a->ndiv; i++) {
      if ((a->div[i].k < 0) != neg) continue;
      char *n = print_to(&a->div[i].d->num, vnames);
      ut_str t;
      ut_str_init(&t);
      ut_str_printf(&t, "(%s) floordiv %lld", n ? n : "?", (long long)a->div[i].d->q);
      free(n);
      char *w = ut_str_take(&t);
      put_term(s, &first, a->div[i].k, w ? w : "?", a->div[i].k != 1 && a->div[i].k != -1);
      free(w);
    }
  }
  if (!cdone && (a->c || first)) put_term(s, &first, a->c, NULL, false);
}
