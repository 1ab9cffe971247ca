/* region_coalesce.c — merges two nested loops of a region's loop tree into
 * one where every access walks them as one contiguous run.
 * Needs: the loop nest's state (src/backend/common/nest_int.h: storage, statements).
 * Gives: rc_coalesce.
 *
 * isl prints a dense elementwise nest over [C, H, W] as three loops; the
 * innermost one (W, often 7..56 points) is what GCC vectorizes, so a short
 * W spends much of its time in the vector loop's prologue and tail.  When
 * an outer loop `o` (0..No-1) holds nothing but an inner loop `i` (0..Ni-1)
 * whose body has no loops, and every row-major offset the body computes
 * (buffers, local arrays, accumulators) is affine in o and i with
 * coef(o) == Ni * coef(i), the offset at (o, i) is the one at (0, o*Ni + i):
 * the pair becomes one loop over i in 0..No*Ni-1 with o replaced by 0 (in a
 * ShapeSet object No, Ni and the strides may be products of symbols).
 * Guards (padding) and conditions must not mention o or i.  Pairs are
 * merged bottom-up, so [C, H, W] contiguous becomes one loop (the chunked
 * outermost loop, whose bounds are the task's, stays).  silu through the
 * generic loops, one thread: 1x2048x7x7 0.52 -> 0.082 ms (rows of 7 never
 * filled a vector), 1x256x56x56 0.62 ms either way (compute-bound).
 * HARP_NO_COALESCE=1 turns it off (an A/B switch). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "region_c_int.h"
#include "util/util.h"

/* ---- offsets as affine forms in the two iterators -------------------------
 * The expressions are isl's (astgen.c): integers, identifiers, + - * / %,
 * comparisons, && ||, ?:, hp_floord / hp_min / hp_max calls.  An operand
 * that does not mention o or i is opaque; o or i under anything but + - and
 * a product with a constant makes the form `bad`. */
typedef struct aff {
  int64_t co, ci, k; /* coef(o), coef(i), the constant when cst */
  bool cst, it, bad; /* a known constant; mentions o or i; mentions them non-affinely */
} aff;

typedef struct parser {
  const char *p;
  const char *o, *i;
  bool fail; /* text this parser does not know */
} parser;

static aff aff_opaque(aff a, aff b) { /* a non-affine op on a and b */
  bool it = a.it || b.it;
  return (aff){0, 0, 0, false, it, it || a.bad || b.bad};
}

static void skip(parser *ps) {
  while (isspace((unsigned char)*ps->p)) ps->p++;
}

static bool eat(parser *ps, const char *tok) {
  skip(ps);
  size_t n = strlen(tok);
  if (strncmp(ps->p, tok, n)) return false;
  /* "<" is not "<=", "-" is not "->" */
  if (n == 1 && (tok[0] == '<' || tok[0] == '>' || tok[0] == '=' || tok[0] == '!') && ps->p[1] == '=') return false;
  if (n == 1 && (tok[0] == '&' || tok[0] == '|') && ps->p[1] == tok[0]) return false;
  ps->p += n;
  return true;
}

static aff parse_expr(parser *ps);

static aff parse_atom(parser *ps) {
  skip(ps);
  const char *p = ps->p;
  if (eat(ps, "(")) {
    aff a = parse_expr(ps);
    if (!eat(ps, ")")) ps->fail = true;
    return a;
  }
  if (eat(ps, "-")) {
    aff a = parse_atom(ps);
    return (aff){-a.co, -a.ci, -a.k, a.cst, a.it, a.bad};
  }
  if (isdigit((unsigned char)*p)) {
    char *end;
    long long v = strtoll(p, &end, 10);
    while (*end == 'L' || *end == 'l' || *end == 'U' || *end == 'u') end++;
    ps->p = end;
    return (aff){0, 0, (int64_t)v, true, false, false};
  }
  if (isalpha((unsigned char)*p) || *p == '_') {
    size_t n = 0;
    while (isalnum((unsigned char)p[n]) || p[n] == '_') n++;
    ps->p = p + n;
    if (eat(ps, "(")) { /* a call: opaque unless it mentions o or i */
      aff r = {0};
      do r = aff_opaque(r, parse_expr(ps));
      while (!ps->fail && eat(ps, ","));
      if (!eat(ps, ")")) ps->fail = true;
      return r;
    }
    if (strlen(ps->o) == n && !strncmp(p, ps->o, n)) return (aff){1, 0, 0, false, true, false};
    if (strlen(ps->i) == n && !strncmp(p, ps->i, n)) return (aff){0, 1, 0, false, true, false};
    return (aff){0};
  }
  ps->fail = true;
  return (aff){0};
}

static aff scale(aff a, int64_t s) { return (aff){a.co * s, a.ci * s, a.k * s, a.cst, a.it, a.bad}; }

static aff parse_mul(parser *ps) {
  aff a = parse_atom(ps);
  for (;;) {
    if (eat(ps, "*")) {
      aff b = parse_atom(ps);
      a = a.cst ? scale(b, a.k) : b.cst ? scale(a, b.k) : aff_opaque(a, b);
    } else if (eat(ps, "/") || eat(ps, "%")) {
      a = aff_opaque(a, parse_atom(ps));
    } else {
      return a;
    }
  }
}

static aff parse_add(parser *ps) {
  aff a = parse_mul(ps);
  for (;;) {
    int s = eat(ps, "+") ? 1 : eat(ps, "-") ? -1 : 0;
    if (!s) return a;
    aff b = scale(parse_mul(ps), s);
    a = (aff){a.co + b.co, a.ci + b.ci, a.k + b.k, a.cst && b.cst, a.it || b.it, a.bad || b.bad};
  }
}

/* comparisons, && ||, ?: : all opaque */
static aff parse_expr(parser *ps) {
  static const char *const ops[] = {"<=", ">=", "==", "!=", "&&", "||", "<", ">", "?", ":"};
  aff a = parse_add(ps);
  for (bool more = true; more && !ps->fail;) {
    more = false;
    for (size_t k = 0; k < sizeof ops / sizeof ops[0] && !more; k++)
      if (eat(ps, ops[k])) {
        a = aff_opaque(a, parse_add(ps));
        more = true;
      }
  }
  return a;
}

/* The affine form of text in o and i; false when it is not one. */
static bool affine(const char *text, const char *o, const char *i, aff *out) {
  *out = (aff){0};
  if (!rc_has_token(text, o) && !rc_has_token(text, i)) return true;
  parser ps = {text, o, i, false};
  *out = parse_expr(&ps);
  skip(&ps);
  return !ps.fail && !*ps.p && !out->bad;
}

/* ---- sizes as products of symbols ------------------------------------------
 * In a ShapeSet object a dim whose size is a symbol is hp_sv<i> in the
 * strides (rc_linear) and in the loop bounds, so the strides and the trips
 * are monomials: an integer times a product of symbols.  An offset's
 * coefficient of o or i is a sum of them (one a dim), kept as a polynomial
 * of at most TINY_MAX_RANK + 1 terms; two are equal when their terms are,
 * so the merge holds at every binding. */
#define MONO_SYMS (2 * TINY_MAX_RANK)
typedef struct mono {
  int64_t k;
  int n, s[MONO_SYMS]; /* the symbols' indices, ascending (repeats allowed) */
} mono;

typedef struct poly {
  int n;
  mono t[TINY_MAX_RANK + 1];
} poly;

/* m times symbol sym; false when it has too many factors. */
static bool mono_sym(mono *m, int sym) {
  if (m->n >= MONO_SYMS) return false;
  int j = m->n++;
  while (j > 0 && m->s[j - 1] > sym) m->s[j] = m->s[j - 1], j--;
  m->s[j] = sym;
  return true;
}

/* *out := a * b; false on overflow. */
static bool mono_mul(const mono *a, const mono *b, mono *out) {
  *out = *a;
  if (__builtin_mul_overflow(a->k, b->k, &out->k)) return false;
  for (int j = 0; j < b->n; j++)
    if (!mono_sym(out, b->s[j])) return false;
  return true;
}

static bool mono_same_syms(const mono *a, const mono *b) {
  return a->n == b->n && !memcmp(a->s, b->s, sizeof(int) * (size_t)a->n);
}

/* p += c * m; false on overflow or too many terms. */
static bool poly_add(poly *p, const mono *m, int64_t c) {
  mono t = *m;
  if (!c) return true;
  if (__builtin_mul_overflow(m->k, c, &t.k)) return false;
  for (int j = 0; j < p->n; j++)
    if (mono_same_syms(&p->t[j], &t)) return !__builtin_add_overflow(p->t[j].k, t.k, &p->t[j].k);
  if (p->n >= (int)(sizeof p->t / sizeof p->t[0])) return false;
  p->t[p->n++] = t;
  return true;
}

/* Does every nonzero term of a appear in b with the same integer? */
static bool poly_within(const poly *a, const poly *b) {
  for (int j = 0; j < a->n; j++) {
    if (!a->t[j].k) continue;
    bool found = false;
    for (int q = 0; q < b->n && !found; q++) found = mono_same_syms(&a->t[j], &b->t[q]) && a->t[j].k == b->t[q].k;
    if (!found) return false;
  }
  return true;
}

/* A product of integers and symbols hp_sv<i> (i < nsyms) as a monomial. */
static bool parse_mono(const char *text, int nsyms, mono *m) {
  *m = (mono){1, 0, {0}};
  const char *p = text;
  for (;;) {
    while (*p == ' ') p++;
    char *end;
    if (isdigit((unsigned char)*p)) {
      long long v = strtoll(p, &end, 10);
      if (*end == 'L') end++;
      if (__builtin_mul_overflow(m->k, (int64_t)v, &m->k)) return false;
    } else if (!strncmp(p, "hp_sv", 5) && isdigit((unsigned char)p[5])) {
      long v = strtol(p + 5, &end, 10);
      if (isalnum((unsigned char)*end) || *end == '_' || v >= nsyms || !mono_sym(m, (int)v)) return false;
    } else {
      return false;
    }
    p = end;
    while (*p == ' ') p++;
    if (!*p) return true;
    if (*p++ != '*') return false;
  }
}

/* The trips of a loop `for (v = 0; v < X; v += 1)` with X a constant or a
 * product of symbols (nsyms of them), its largest value in *hi (sym_hi);
 * false for any other loop. */
static bool loop_trips(const rc_nest_ctx *c, const poly_ast *a, mono *t, int64_t *hi) {
  char *end;
  long lo = strtol(a->init, &end, 10), k = rc_const_trips(a);
  if (end == a->init || (*end && strcmp(end, "L")) || lo != 0) return false;
  if (k > 0) {
    *t = (mono){k, 0, {0}}, *hi = k;
    return true;
  }
  if (!c->nsyms) return false;
  char *x = rc_zero_bound(a);
  bool ok = x && parse_mono(x, c->nsyms, t) && t->k > 0;
  free(x);
  *hi = ok ? t->k : 0;
  for (int j = 0; ok && j < t->n; j++) ok = !__builtin_mul_overflow(*hi, c->sym_hi[t->s[j]], hi);
  return ok;
}

/* ---- the check --------------------------------------------------------------- */
typedef struct pair {
  const char *o, *i;
  mono ni; /* the inner loop's trips */
} pair;

/* The row-major offset of index over dims [from, rank) of shape (rc_linear's
 * sum) steps by ni * coef(i) along o.  A dim of a symbol's size (c) has the
 * stride hp_sv<i> times the ones inside it, as rc_linear prints it. */
static bool offset_ok(const rc_nest_ctx *c, const pair *pr, const tiny_shape *shape, const char *const *index, int from) {
  mono stride = {1, 0, {0}};
  poly co = {0}, ci = {0}, nci = {0};
  for (int d = shape->rank - 1; d >= from; d--) {
    int sym = rc_nest_sym(c, &shape->d[d]);
    if (sym >= 0 || shape->d[d].n != 1) {
      aff a;
      if (!affine(index[d], pr->o, pr->i, &a) || !poly_add(&co, &stride, a.co) || !poly_add(&ci, &stride, a.ci)) return false;
    }
    if (sym >= 0 ? !mono_sym(&stride, sym) : __builtin_mul_overflow(stride.k, shape->d[d].n, &stride.k)) return false;
  }
  for (int j = 0; j < ci.n; j++) {
    mono t;
    if (!mono_mul(&ci.t[j], &pr->ni, &t) || !poly_add(&nci, &t, 1)) return false;
  }
  return poly_within(&co, &nci) && poly_within(&nci, &co);
}

static bool cond_free(const pair *pr, const char *c) { return !c || (!rc_has_token(c, pr->o) && !rc_has_token(c, pr->i)); }

/* Does every statement under a compute offsets that merge? */
static bool body_ok(emit *m, const pair *pr, const poly_ast *a) {
  if (!a) return true;
  switch (a->kind) {
  case PA_FOR: return false;
  case PA_IF: return cond_free(pr, a->cond) && body_ok(m, pr, a->then_) && body_ok(m, pr, a->else_);
  case PA_BLOCK:
    for (int k = 0; k < a->nchildren; k++)
      if (!body_ok(m, pr, a->children[k])) return false;
    return true;
  case PA_USER: break;
  }
  const poly_stmt_spec *sp = &m->stmts[a->stmt];
  const poly_block_info *b = poly_block(m->c->pv, sp->block);
  const tiny_graph *g = m->c->g;
  if (b->kind == POLY_CONTRACTION) return false; /* its operands may be read at a stage's index */
  if (b->kind == POLY_REDUCE) { /* the accumulator (rc_acc_ref) */
    const tiny_shape *sh = &g->nodes[b->node].shape;
    int64_t size = 1;
    for (int d = m->prefix; d < b->nout; d++) size *= sh->d[d].n;
    if (size > 1 && (b->nout != sh->rank || !offset_ok(m->c, pr, sh, a->vars, m->prefix))) return false;
  }
  for (int k = 0; k < a->naccess && k < b->naccess; k++) {
    const poly_ast_access *ac = &a->access[k];
    if (ac->rank < 0) continue; /* not used by this statement */
    if (!cond_free(pr, ac->guard)) return false;
    for (int q = 0; q < ac->nalt; q++)
      if (!cond_free(pr, ac->alt_guard[q])) return false;
    int t = b->access[k].write ? b->node : b->access[k].tensor;
    const value *v = &m->val[t];
    const tiny_shape *sh = rc_acc_shape(ac, &g->nodes[t]);
    if (v->kind == ST_CONST || (v->kind == ST_LOCAL && v->lsize <= 1)) continue; /* no offset */
    if (ac->rank != sh->rank || !offset_ok(m->c, pr, sh, ac->index, v->kind == ST_BUF ? 0 : m->prefix)) return false;
  }
  return true;
}

/* ---- the rewrite --------------------------------------------------------------- */
static const char *subst(emit *m, const char *text, const char *from, bool *oom) {
  if (!text || !rc_has_token(text, from)) return text;
  const char *f[1] = {from}, *t[1] = {"0L"};
  char *s = rc_subst_tokens(text, f, t, 1);
  const char *r = s ? ut_arena_strdup(m->c->arena, s) : NULL;
  free(s);
  if (!r) *oom = true;
  return r ? r : text;
}

static void subst_tree(emit *m, poly_ast *a, const char *from, bool *oom) {
  if (!a) return;
  switch (a->kind) {
  case PA_FOR: return; /* body_ok allows none */
  case PA_IF:
    a->cond = subst(m, a->cond, from, oom);
    subst_tree(m, a->then_, from, oom);
    subst_tree(m, a->else_, from, oom);
    return;
  case PA_BLOCK:
    for (int k = 0; k < a->nchildren; k++) subst_tree(m, a->children[k], from, oom);
    return;
  case PA_USER:
    for (int v = 0; v < a->nvars; v++) a->vars[v] = subst(m, a->vars[v], from, oom);
    for (int k = 0; k < a->naccess; k++) {
      poly_ast_access *ac = &a->access[k];
      if (ac->rank < 0) continue;
      for (int d = 0; d < ac->rank; d++) ac->index[d] = subst(m, ac->index[d], from, oom);
      ac->guard = subst(m, ac->guard, from, oom);
      for (int q = 0; q < ac->nalt; q++) ac->alt_guard[q] = subst(m, ac->alt_guard[q], from, oom);
    }
    return;
  }
}

/* The monomial's text for a loop bound: hp_sv<i> * ... * k L. */
static void mono_text(const mono *t, char *b, size_t cap) {
  size_t l = 0;
  b[0] = 0;
  for (int j = 0; j < t->n && l < cap; j++) l += (size_t)snprintf(b + l, cap - l, "hp_sv%d * ", t->s[j]);
  if (l < cap) snprintf(b + l, cap - l, "%lldL", (long long)t->k);
}

/* Merge loop a with the loop that is its whole body, when that pays and is
 * exact; with symbols (a ShapeSet object) the trips may be run-time
 * products, the merged loop running to their product. */
static harp_status try_merge(emit *m, poly_ast *a) {
  poly_ast *in = a->body;
  while (in && in->kind == PA_BLOCK && in->nchildren == 1) in = in->children[0];
  if (!in || in->kind != PA_FOR) return HARP_OK;
  mono no, ni, prod;
  int64_t no_hi, ni_hi;
  if (!loop_trips(m->c, a, &no, &no_hi) || !loop_trips(m->c, in, &ni, &ni_hi)) return HARP_OK;
  /* a constant outer loop of one trip is no loop to merge; symbols: their largest values */
  if ((!no.n && no.k < 2) || ni_hi < 1 || no_hi > (INT64_C(1) << 40) / ni_hi || !mono_mul(&no, &ni, &prod)) return HARP_OK;
  pair pr = {a->iter, in->iter, ni};
  if (!body_ok(m, &pr, in->body)) return HARP_OK;
  bool oom = false;
  subst_tree(m, in->body, a->iter, &oom);
  char cond[48 + 12 * MONO_SYMS], x[40 + 12 * MONO_SYMS];
  if (prod.n) {
    mono_text(&prod, x, sizeof x);
    snprintf(cond, sizeof cond, "(%s < %s)", in->iter, x);
  } else {
    snprintf(cond, sizeof cond, "(%s <= %lldL)", in->iter, (long long)(prod.k - 1));
  }
  const char *c = ut_arena_strdup(m->c->arena, cond);
  if (oom || !c) return ut_fail(m->c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
  a->iter = in->iter;
  a->init = in->init;
  a->cond = c;
  a->inc = in->inc;
  a->body = in->body;
  return HARP_OK;
}

harp_status rc_coalesce(emit *m, poly_ast *a) {
  if (!a || m->c->gpu) return HARP_OK;
  switch (a->kind) {
  case PA_FOR:
    if (rc_coalesce(m, a->body)) return m->c->e->code;
    return try_merge(m, a);
  case PA_IF:
    if (rc_coalesce(m, a->then_)) return m->c->e->code;
    return rc_coalesce(m, a->else_);
  case PA_BLOCK:
    for (int k = 0; k < a->nchildren; k++)
      if (rc_coalesce(m, a->children[k])) return m->c->e->code;
    return HARP_OK;
  case PA_USER: return HARP_OK;
  }
  return HARP_OK;
}
