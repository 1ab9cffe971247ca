/* dim.c — symbolic dimensions of the frontend.
 * Needs: util (arena, checked arithmetic).  Gives: fe_dim construction in a
 * canonical form, comparison, substitution, evaluation, Tiny expression text.
 *
 * A dim is  c + sum_i k_i * atom_i  where an atom is a shape variable, a
 * product of two or more factors, or floor(num / q).  Terms are sorted by
 * the atom's text and merged, divisions take out what divides exactly, so
 * two dims built from equal expressions get equal text:
 *   conv output  (H + 2 - 3)/1 + 1  ->  "H"
 *   (H - 1)/2 + 1                    ->  "(H + 1)/2"
 * The text is DSL syntax ('/' is floor division in shapes), so printing a
 * dim and parsing it back gives the same dim. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fe_int.h"

#define DIM_LIMIT ((int64_t)1 << 62) /* keeps negation and sums overflow-free */
#define TEXT_CAP 512

static bool small(int64_t v) { return v > -DIM_LIMIT && v < DIM_LIMIT; }

/* ---- text ---------------------------------------------------------------- */
static bool is_div_atom(const fe_atom *a) { return a->kind == FE_A_DIV; }

/* Append to buf at *k; false when it does not fit. */
static bool put(char *buf, int *k, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool put(char *buf, int *k, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf + *k, (size_t)(TEXT_CAP - *k), fmt, ap);
  va_end(ap);
  if (n < 0 || *k + n >= TEXT_CAP) return false;
  *k += n;
  return true;
}

static bool dim_text(const fe_dim *d, char *buf) {
  int k = 0;
  buf[0] = 0;
  if (d->nt == 0) return put(buf, &k, "%" PRId64, d->c);
  for (int i = 0; i < d->nt; i++) {
    int64_t c = d->t[i].k, ac = c < 0 ? -c : c;
    const fe_atom *a = d->t[i].atom;
    bool ok;
    if (i == 0)
      ok = put(buf, &k, "%s", c < 0 ? "-" : "");
    else
      ok = put(buf, &k, " %s ", c < 0 ? "-" : "+");
    if (!ok) return false;
    /* -(H/2) and 2*(H/2): a division after a unary minus or a coefficient
     * needs parentheses, '/' being left-associative with '*'. */
    bool paren = is_div_atom(a) && (ac != 1 || (i == 0 && c < 0));
    if (ac != 1 && !put(buf, &k, "%" PRId64 "*", ac)) return false;
    if (!put(buf, &k, paren ? "(%s)" : "%s", a->text)) return false;
  }
  if (d->c > 0) return put(buf, &k, " + %" PRId64, d->c);
  if (d->c < 0) return put(buf, &k, " - %" PRId64, -d->c);
  return true;
}

/* How a dim prints as a factor of a product. */
static bool factor_text(const fe_dim *f, char *buf, int *k) {
  if (f->nt == 1 && f->c == 0 && f->t[0].k == 1) {
    const fe_atom *a = f->t[0].atom;
    if (a->kind == FE_A_SYM) return put(buf, k, "%s", a->text);
    if (a->kind == FE_A_DIV) return put(buf, k, "(%s)", a->text);
  }
  return put(buf, k, "(%s)", f->text);
}

/* ---- construction -------------------------------------------------------- */
static fe_dim *new_dim(ut_arena *a, int nt) {
  if (nt > FE_MAX_TERMS) return NULL;
  return ut_arena_alloc(a, sizeof(fe_dim) + sizeof(fe_term) * (size_t)(nt > 0 ? nt : 1));
}

static const fe_dim *finish(ut_arena *a, fe_dim *d) {
  char buf[TEXT_CAP];
  if (!d || !dim_text(d, buf)) return NULL;
  d->text = ut_arena_strdup(a, buf);
  return d->text ? d : NULL;
}

const fe_dim *fe_dim_int(ut_arena *a, int64_t n) {
  if (!small(n)) return NULL;
  fe_dim *d = new_dim(a, 0);
  if (!d) return NULL;
  d->c = n;
  return finish(a, d);
}

static const fe_dim *atom_dim(ut_arena *a, const fe_atom *at, int64_t k) {
  fe_dim *d = new_dim(a, 1);
  if (!d) return NULL;
  d->nt = 1;
  d->t[0].k = k;
  d->t[0].atom = at;
  return finish(a, d);
}

const fe_dim *fe_dim_atom(ut_arena *a, const fe_atom *at) { return atom_dim(a, at, 1); }

const fe_dim *fe_dim_sym(ut_arena *a, const char *name) {
  fe_atom *at = ut_arena_alloc(a, sizeof *at);
  if (!at) return NULL;
  at->kind = FE_A_SYM;
  at->sym = ut_arena_strdup(a, name);
  at->text = at->sym;
  return at->sym ? atom_dim(a, at, 1) : NULL;
}

bool fe_dim_is_int(const fe_dim *d, int64_t *n) {
  if (!d || d->nt) return false;
  if (n) *n = d->c;
  return true;
}

const char *fe_dim_is_sym(const fe_dim *d) {
  if (!d || d->nt != 1 || d->c != 0 || d->t[0].k != 1 || d->t[0].atom->kind != FE_A_SYM) return NULL;
  return d->t[0].atom->sym;
}

bool fe_dim_is_one(const fe_dim *d) { return d && d->nt == 0 && d->c == 1; }

/* Linear combination x*kx + y*ky, merged in atom-text order. */
static const fe_dim *lincomb(ut_arena *a, const fe_dim *x, int64_t kx, const fe_dim *y, int64_t ky) {
  fe_term t[2 * FE_MAX_TERMS];
  int n = 0, i = 0, j = 0;
  int64_t c, cx, cy;
  if (!ut_mul_ok(x->c, kx, &cx) || !ut_mul_ok(y->c, ky, &cy) || !ut_add_ok(cx, cy, &c) || !small(c)) return NULL;
  while (i < x->nt || j < y->nt) {
    int cmp = i == x->nt ? 1 : j == y->nt ? -1 : strcmp(x->t[i].atom->text, y->t[j].atom->text);
    int64_t k, k1 = 0, k2 = 0;
    const fe_atom *at;
    if (cmp <= 0) {
      if (!ut_mul_ok(x->t[i].k, kx, &k1)) return NULL;
      at = x->t[i++].atom;
    } else {
      at = y->t[j].atom;
    }
    if (cmp >= 0) {
      if (!ut_mul_ok(y->t[j].k, ky, &k2)) return NULL;
      if (cmp > 0) at = y->t[j].atom;
      j++;
    }
    if (!ut_add_ok(k1, k2, &k) || !small(k)) return NULL;
    if (k != 0) t[n++] = (fe_term){k, at};
  }
  fe_dim *d = new_dim(a, n);
  if (!d) return NULL;
  d->c = c;
  d->nt = n;
  memcpy(d->t, t, sizeof(fe_term) * (size_t)n);
  return finish(a, d);
}

const fe_dim *fe_dim_add(ut_arena *a, const fe_dim *x, const fe_dim *y) {
  return x && y ? lincomb(a, x, 1, y, 1) : NULL;
}
const fe_dim *fe_dim_sub(ut_arena *a, const fe_dim *x, const fe_dim *y) {
  return x && y ? lincomb(a, x, 1, y, -1) : NULL;
}
const fe_dim *fe_dim_scale(ut_arena *a, const fe_dim *x, int64_t k) {
  if (!x) return NULL;
  if (k == 0) return fe_dim_int(a, 0);
  static const fe_dim zero = {0, 0, "0"};
  return lincomb(a, x, k, &zero, 0);
}

static int cmp_factor(const void *p, const void *q) {
  const fe_dim *const *a = p, *const *b = q;
  char ta[TEXT_CAP], tb[TEXT_CAP];
  int ka = 0, kb = 0;
  factor_text(*a, ta, &ka);
  factor_text(*b, tb, &kb);
  return strcmp(ta, tb);
}

/* x = k * (product of factors). */
static int split_product(ut_arena *a, const fe_dim *x, int64_t *k, const fe_dim **f, int cap) {
  if (x->nt == 1 && x->c == 0) {
    const fe_atom *at = x->t[0].atom;
    *k = x->t[0].k;
    if (at->kind == FE_A_PROD) {
      if (at->nf > cap) return -1;
      for (int i = 0; i < at->nf; i++) f[i] = at->f[i];
      return at->nf;
    }
    f[0] = atom_dim(a, at, 1);
    return f[0] ? 1 : -1;
  }
  *k = 1;
  f[0] = x;
  return 1;
}

const fe_dim *fe_dim_mul(ut_arena *a, const fe_dim *x, const fe_dim *y) {
  if (!x || !y) return NULL;
  int64_t n;
  if (fe_dim_is_int(x, &n)) return fe_dim_scale(a, y, n);
  if (fe_dim_is_int(y, &n)) return fe_dim_scale(a, x, n);
  const fe_dim *f[2 * FE_MAX_TERMS];
  int64_t kx, ky, k;
  int nx = split_product(a, x, &kx, f, FE_MAX_TERMS);
  if (nx < 0) return NULL;
  int ny = split_product(a, y, &ky, f + nx, FE_MAX_TERMS);
  if (ny < 0 || !ut_mul_ok(kx, ky, &k) || !small(k)) return NULL;
  int nf = nx + ny;
  qsort(f, (size_t)nf, sizeof f[0], cmp_factor);
  fe_atom *at = ut_arena_alloc(a, sizeof *at);
  const fe_dim **fs = ut_arena_alloc(a, sizeof *fs * (size_t)nf);
  if (!at || !fs) return NULL;
  char buf[TEXT_CAP];
  int len = 0;
  for (int i = 0; i < nf; i++) {
    fs[i] = f[i];
    if ((i && !put(buf, &len, "*")) || !factor_text(f[i], buf, &len)) return NULL;
  }
  at->kind = FE_A_PROD;
  at->nf = nf;
  at->f = fs;
  at->text = ut_arena_strdup(a, buf);
  return at->text ? atom_dim(a, at, k) : NULL;
}

const fe_dim *fe_dim_div(ut_arena *a, const fe_dim *x, int64_t q) {
  if (!x || q < 1) return NULL;
  if (q == 1) return x;
  /* x = q*A + R with every coefficient of R in [0, q): floor(x/q) = A +
   * floor(R/q), and floor(R/q) is a constant when R is. */
  fe_dim *A = new_dim(a, x->nt), *R = new_dim(a, x->nt);
  if (!A || !R) return NULL;
  A->c = ut_floordiv(x->c, q);
  R->c = ut_mod(x->c, q);
  for (int i = 0; i < x->nt; i++) {
    int64_t hi = ut_floordiv(x->t[i].k, q), lo = ut_mod(x->t[i].k, q);
    if (hi) A->t[A->nt++] = (fe_term){hi, x->t[i].atom};
    if (lo) R->t[R->nt++] = (fe_term){lo, x->t[i].atom};
  }
  if (!finish(a, A)) return NULL;
  if (R->nt == 0) return A; /* R is a constant in [0, q) */
  if (!finish(a, R)) return NULL;
  fe_atom *at = ut_arena_alloc(a, sizeof *at);
  if (!at) return NULL;
  at->kind = FE_A_DIV;
  at->num = R;
  at->q = q;
  const char *sym = fe_dim_is_sym(R);
  at->text = sym ? ut_arena_printf(a, "%s/%" PRId64, sym, q) : ut_arena_printf(a, "(%s)/%" PRId64, R->text, q);
  if (!at->text) return NULL;
  const fe_dim *t = atom_dim(a, at, 1);
  return t ? fe_dim_add(a, A, t) : NULL;
}

/* ---- comparison ------------------------------------------------------------ */
fe_cmp fe_dim_cmp(const fe_dim *x, const fe_dim *y) {
  if (strcmp(x->text, y->text) == 0) return FE_SAME;
  if (x->nt == y->nt) {
    bool same_terms = true;
    for (int i = 0; i < x->nt && same_terms; i++)
      same_terms = x->t[i].k == y->t[i].k && strcmp(x->t[i].atom->text, y->t[i].atom->text) == 0;
    if (same_terms) return FE_DIFF; /* differ by a nonzero constant */
  }
  if (fe_dim_is_sym(x) && fe_dim_is_sym(y)) return FE_DIFF;
  return FE_MAYBE;
}

/* ---- substitution and evaluation ------------------------------------------- */
static const fe_dim *subst_atom(ut_arena *a, const fe_atom *at, fe_sym_lookup look, void *ctx) {
  switch (at->kind) {
  case FE_A_SYM: {
    const fe_dim *r = look ? look(ctx, at->sym) : NULL;
    return r ? r : fe_dim_sym(a, at->sym);
  }
  case FE_A_PROD: {
    const fe_dim *r = fe_dim_int(a, 1);
    for (int i = 0; i < at->nf && r; i++) r = fe_dim_mul(a, r, fe_dim_subst(a, at->f[i], look, ctx));
    return r;
  }
  case FE_A_DIV: return fe_dim_div(a, fe_dim_subst(a, at->num, look, ctx), at->q);
  }
  return NULL;
}

const fe_dim *fe_dim_subst(ut_arena *a, const fe_dim *d, fe_sym_lookup look, void *ctx) {
  if (!d) return NULL;
  const fe_dim *r = fe_dim_int(a, d->c);
  for (int i = 0; i < d->nt && r; i++) r = fe_dim_add(a, r, fe_dim_scale(a, subst_atom(a, d->t[i].atom, look, ctx), d->t[i].k));
  return r;
}

static bool eval_atom(const fe_atom *at, const tiny_symtab *syms, int64_t *out) {
  int64_t v, f;
  switch (at->kind) {
  case FE_A_SYM: return tiny_symtab_get(syms, at->sym, out);
  case FE_A_PROD:
    v = 1;
    for (int i = 0; i < at->nf; i++)
      if (!fe_dim_eval(at->f[i], syms, &f) || !ut_mul_ok(v, f, &v)) return false;
    *out = v;
    return true;
  case FE_A_DIV:
    if (!fe_dim_eval(at->num, syms, &v)) return false;
    *out = ut_floordiv(v, at->q);
    return true;
  }
  return false;
}

bool fe_dim_eval(const fe_dim *d, const tiny_symtab *syms, int64_t *out) {
  int64_t v = d->c, t;
  for (int i = 0; i < d->nt; i++)
    if (!eval_atom(d->t[i].atom, syms, &t) || !ut_mul_ok(t, d->t[i].k, &t) || !ut_add_ok(v, t, &v)) return false;
  *out = v;
  return true;
}

static void atom_syms(const fe_atom *at, void (*f)(void *, const char *), void *ctx) {
  if (at->kind == FE_A_SYM) f(ctx, at->sym);
  if (at->kind == FE_A_PROD)
    for (int i = 0; i < at->nf; i++) fe_dim_syms(at->f[i], f, ctx);
  if (at->kind == FE_A_DIV) fe_dim_syms(at->num, f, ctx);
}

void fe_dim_syms(const fe_dim *d, void (*f)(void *ctx, const char *sym), void *ctx) {
  for (int i = 0; i < d->nt; i++) atom_syms(d->t[i].atom, f, ctx);
}

/* ---- as a Tiny expression -------------------------------------------------- */
typedef struct tbuf {
  char *b;
  int cap, k;
} tbuf;

static bool tput(tbuf *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool tput(tbuf *t, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(t->b + t->k, (size_t)(t->cap - t->k), fmt, ap);
  va_end(ap);
  if (n < 0 || t->k + n >= t->cap) return false;
  t->k += n;
  return true;
}

static bool tiny_text(const fe_dim *d, tbuf *t);

/* An atom in tiny_expr_parse syntax: a symbol, a product, a floor division. */
static bool atom_tiny_text(const fe_atom *at, tbuf *t) {
  switch (at->kind) {
  case FE_A_SYM: return tput(t, "%s", at->sym);
  case FE_A_PROD:
    for (int i = 0; i < at->nf; i++)
      if (!tput(t, i ? "*(" : "(") || !tiny_text(at->f[i], t) || !tput(t, ")")) return false;
    return true;
  case FE_A_DIV: return tput(t, "((") && tiny_text(at->num, t) && tput(t, ") floordiv %" PRId64 ")", at->q); /* 2*(x/2) */
  }
  return false;
}

static bool tiny_text(const fe_dim *d, tbuf *t) {
  for (int i = 0; i < d->nt; i++) {
    int64_t k = d->t[i].k;
    if ((i && !tput(t, " + ")) || (k != 1 && !tput(t, "%" PRId64 "*", k)) || !atom_tiny_text(d->t[i].atom, t)) return false;
  }
  if (d->nt == 0 || d->c != 0) return tput(t, "%s%" PRId64, d->nt ? " + " : "", d->c);
  return true;
}

bool fe_dim_tiny_text(const fe_dim *d, char *buf, int cap) {
  tbuf t = {buf, cap, 0};
  if (cap <= 0) return false;
  buf[0] = 0;
  return d && tiny_text(d, &t);
}
