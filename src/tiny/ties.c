/* ties.c — shape symbols tied to others at every binding of a box (issue 25):
 * an ADD of an upsampled map [.., 2*H, ..] and a lateral one [.., G, ..]
 * holds only where G = 2 H (or G = 1, a broadcast), a concat of maps
 * upsampled x4 and x2 with one at full size where 4 H = 2 G = P.  A box
 * whose corners take each symbol's range on its own has a lower corner
 * (H lo, G lo) no model accepts; made a derived symbol of the graph
 * (tiny_dsym: G := 2*H), the tied symbol follows the others, so the box's
 * corners are real bindings, and a binding that breaks the tie is
 * InputMismatch before any kernel ("shape symbol G is 9 (an input's
 * shape), but its definition 2*H gives 10 at this binding").
 *
 * The relations are read from the graph inferred symbolically: every pair
 * of dims that an elementwise op broadcasts to one axis, named by two
 * different symbols, neither a literal 1 (a named dim does not broadcast
 * at 1: a binding with G 1 and 2 H 8 is BroadcastMismatch in every
 * backend, verify.c, so a box whose ranges hold 1 is tied too), and every
 * RESHAPE's element counts (input's = output's: [R, 4] -> [H, 8] gives
 * 4 R = 8 H; symbols both sides name cancelled, [N, H, W] -> [N, P] gives
 * P = H W), is an equation of affine forms over the box's symbols (derived
 * symbols read through their definitions; a floor division, remainder or
 * product of symbols one opaque atom).  It is solved for a symbol X of the
 * box with a coefficient that divides every other one and the constant
 * (the equation's common factor out), X read by no opaque atom; the symbol
 * an input declares last is taken first (x [.., H, ..] before z [.., G,
 * ..]: G := 2*H).  Where no coefficient divides (2 G = 3 H) and X has one
 * other symbol, X := (3*H) floordiv 2 marked exact (tiny_dsym.exact): a
 * binding with H odd is InputMismatch naming it, and a box's corners are
 * narrowed to even H (tiny_dsym_snap).  A tie is kept only where its
 * definition is monotone, reads only the box's symbols, is at least 1 at
 * the box's lower corner, and X or the definition varies.
 * Needs: infer.c (tiny_infer, tiny_broadcast), dsym.c, expr.c.
 * Gives: tiny_ties_text, tiny_ties_drop. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tiny_int.h"
#include "util/util.h"

#define TIE_ATOMS 16
#define TIE_MAX 32
#define TIE_TEXT 200

typedef struct lin { /* c + sum k[i] * atom[i] */
  int64_t c;
  int n;
  int64_t k[TIE_ATOMS];
  char atom[TIE_ATOMS][TIE_TEXT]; /* a symbol's name, or an opaque term's text */
  bool sym[TIE_ATOMS];
} lin;

typedef struct ties {
  tiny_graph *g;
  const char *const *names;
  const int64_t *lo, *hi;
  int nbox;
  int n;
  const char *x[TIE_MAX]; /* tied symbol := def */
  const tiny_expr *def[TIE_MAX];
  bool exact[TIE_MAX]; /* def a division exact where the model holds (tiny_dsym.exact) */
  char text[TIE_MAX][TIE_TEXT];
} ties;

/* The definition x has in t (a tie first, then g's derived symbols); NULL: none. */
static const tiny_expr *def_of(const ties *t, const char *x) {
  for (int i = 0; i < t->n; i++)
    if (!strcmp(t->x[i], x)) return t->def[i];
  int d = tiny_dsym_find(t->g, x);
  return d >= 0 ? t->g->dsyms[d].def : NULL;
}

/* x printed into b[cap] at *at, every tied or derived symbol read through
 * its definition, fully parenthesised; false when it does not fit. */
static bool xprint(const ties *t, const tiny_expr *x, char *b, size_t cap, size_t *at, int depth) {
  if (depth > 16 || *at + 1 >= cap) return false;
  int w = 0;
  switch (x->k) {
  case TX_CONST: w = snprintf(b + *at, cap - *at, x->c < 0 ? "(%" PRId64 ")" : "%" PRId64, x->c); break;
  case TX_VAR: return false;
  case TX_SYM: {
    const tiny_expr *d = def_of(t, x->sym);
    if (!d) {
      w = snprintf(b + *at, cap - *at, "%s", x->sym);
      break;
    }
    if ((*at += (size_t)snprintf(b + *at, cap - *at, "(")) >= cap || !xprint(t, d, b, cap, at, depth + 1)) return false;
    w = snprintf(b + *at, cap - *at, ")");
    break;
  }
  default: {
    const char *op = x->k == TX_ADD ? " + " : x->k == TX_MUL ? " * " : x->k == TX_FLOORDIV ? " floordiv " : " % ";
    if ((*at += (size_t)snprintf(b + *at, cap - *at, "(")) >= cap || !xprint(t, x->a, b, cap, at, depth + 1)) return false;
    if ((*at += (size_t)snprintf(b + *at, cap - *at, "%s", op)) >= cap || !xprint(t, x->b, b, cap, at, depth + 1)) return false;
    w = snprintf(b + *at, cap - *at, ")");
  }
  }
  *at += (size_t)w;
  return *at < cap;
}

/* f += k * (the atom named a; sym: a symbol); false past TIE_ATOMS. */
static bool add_atom(lin *f, int64_t k, const char *a, bool sym) {
  for (int i = 0; i < f->n; i++)
    if (!strcmp(f->atom[i], a)) return ut_add_ok(f->k[i], k, &f->k[i]);
  if (f->n == TIE_ATOMS || strlen(a) >= TIE_TEXT) return false;
  snprintf(f->atom[f->n], TIE_TEXT, "%s", a);
  f->k[f->n] = k, f->sym[f->n++] = sym;
  return true;
}

/* f += k * g. */
static bool add_lin(lin *f, int64_t k, const lin *g) {
  int64_t c;
  if (!ut_mul_ok(k, g->c, &c) || !ut_add_ok(f->c, c, &f->c)) return false;
  for (int i = 0; i < g->n; i++)
    if (!ut_mul_ok(k, g->k[i], &c) || !add_atom(f, c, g->atom[i], g->sym[i])) return false;
  return true;
}

/* x as an affine form over symbols and opaque terms into *f (zeroed first);
 * false when it does not fit. */
static bool lin_of(const ties *t, const tiny_expr *x, lin *f, int depth) {
  memset(f, 0, sizeof *f);
  if (depth > 16) return false;
  lin a, b;
  switch (x->k) {
  case TX_CONST: f->c = x->c; return true;
  case TX_VAR: return false;
  case TX_SYM: {
    const tiny_expr *d = def_of(t, x->sym);
    return d ? lin_of(t, d, f, depth + 1) : add_atom(f, 1, x->sym, true);
  }
  case TX_ADD: return lin_of(t, x->a, &a, depth + 1) && lin_of(t, x->b, &b, depth + 1) && add_lin(f, 1, &a) && add_lin(f, 1, &b);
  default: break;
  }
  if (!lin_of(t, x->a, &a, depth + 1) || !lin_of(t, x->b, &b, depth + 1)) return false;
  if (x->k == TX_MUL && !a.n) return add_lin(f, a.c, &b);
  if (x->k == TX_MUL && !b.n) return add_lin(f, b.c, &a);
  if (!a.n && !b.n && b.c > 0) return (f->c = x->k == TX_FLOORDIV ? ut_floordiv(a.c, b.c) : ut_mod(a.c, b.c)), true;
  char text[TIE_TEXT];
  size_t at = 0;
  return xprint(t, x, text, sizeof text, &at, depth) && add_atom(f, 1, text, false);
}

/* Whether text names identifier id (a whole word). */
static bool mentions(const char *text, const char *id) {
  size_t n = strlen(id);
  for (const char *p = strstr(text, id); p; p = strstr(p + 1, id)) {
    bool before = p > text && (p[-1] == '_' || (p[-1] >= '0' && p[-1] <= '9') || ((p[-1] | 32) >= 'a' && (p[-1] | 32) <= 'z'));
    char c = p[n];
    bool after = c == '_' || (c >= '0' && c <= '9') || ((c | 32) >= 'a' && (c | 32) <= 'z');
    if (!before && !after) return true;
  }
  return false;
}

/* The index of symbol x in t's box; -1: not in it. */
static int box_index(const ties *t, const char *x) {
  for (int i = 0; i < t->nbox; i++)
    if (!strcmp(t->names[i], x)) return i;
  return -1;
}

/* Whether every identifier of an opaque term's text is a symbol of t's box. */
static bool reads_box_only(const ties *t, const char *text) {
  for (const char *p = text; *p;) {
    if (*p == '_' || ((*p | 32) >= 'a' && (*p | 32) <= 'z')) {
      size_t n = 0;
      char id[TIE_TEXT];
      while (p[n] == '_' || (p[n] >= '0' && p[n] <= '9') || ((p[n] | 32) >= 'a' && (p[n] | 32) <= 'z')) n++;
      snprintf(id, sizeof id, "%.*s", (int)n, p);
      if (strcmp(id, "floordiv") && box_index(t, id) < 0) return false;
      p += n;
    } else {
      p++;
    }
  }
  return true;
}

/* Where symbol x is first declared by an input of g (its order: inputs,
 * then axes); a large number when none declares it. */
static int declared_at(const tiny_graph *g, const char *x) {
  int k = 0;
  for (int i = 0; i < g->n; i++) {
    const tiny_node *n = &g->nodes[i];
    for (int d = 0; n->op == TINY_INPUT && d < n->a.input.shape.rank; d++, k++)
      if (n->a.input.shape.d[d].sym && !strcmp(n->a.input.shape.d[d].sym, x)) return k;
  }
  return 1 << 30;
}

/* def's value with t's box symbols at lo (at_hi: at hi) into *v. */
static bool value_at(const ties *t, const tiny_expr *def, bool at_hi, int64_t *v) {
  tiny_symtab s;
  tiny_symtab_init(&s);
  harp_error e = {0};
  bool ok = true;
  for (int i = 0; ok && i < t->nbox; i++) ok = !tiny_symtab_set(&e, &s, t->names[i], at_hi ? t->hi[i] : t->lo[i]);
  ok = ok && tiny_expr_eval(def, NULL, &s, v);
  tiny_symtab_free(&s);
  return ok;
}

/* Whether f's atoms but j with a coefficient are symbols (no opaque term). */
static bool others_symbols(const lin *f, int j) {
  for (int i = 0; i < f->n; i++)
    if (i != j && f->k[i] && !f->sym[i]) return false;
  return true;
}

/* The tie f = 0 solved for its atom j into t when it holds over the box
 * (the file's header); false when not.  x's coefficient must divide the
 * others' and the constant, or (exact) x := (m*Y + c) floordiv d, one other
 * symbol Y, exact where the model holds (2 G = 3 H: G := (3*H) floordiv 2). */
static bool solve_for(ties *t, const lin *f, int j, bool exact) {
  const char *x = f->atom[j];
  int b = box_index(t, x), others = 0;
  int64_t d = f->k[j] < 0 ? -f->k[j] : f->k[j], sign = f->k[j] < 0 ? 1 : -1, c = sign * f->c; /* d x = sum m[i] atom[i] + c */
  if (!f->sym[j] || b < 0 || def_of(t, x) || d == 0) return false;
  for (int i = 0; i < f->n; i++) {
    if (i == j || !f->k[i]) continue;
    if ((!f->sym[i] && mentions(f->atom[i], x)) || (f->sym[i] ? box_index(t, f->atom[i]) < 0 : !reads_box_only(t, f->atom[i])))
      return false;
    d = ut_gcd(d, f->k[i]), others++;
  }
  d = ut_gcd(d, c); /* the equation's common factor out */
  int64_t k = f->k[j] < 0 ? -f->k[j] / d : f->k[j] / d;
  bool whole = k == 1;
  if (!whole && (!exact || others != 1 || !others_symbols(f, j))) return false;
  char text[TIE_TEXT];
  int at = whole ? 0 : snprintf(text, sizeof text, "(");
  for (int i = 0; i < f->n; i++) { /* x = (sum m[i] / d * atom[i] + c / d) floordiv k */
    if (i == j || !f->k[i]) continue;
    int64_t m = sign * f->k[i] / d;
    at += m == 1 ? snprintf(text + at, sizeof text - (size_t)at, "%s%s", at > !whole ? " + " : "", f->atom[i])
                 : snprintf(text + at, sizeof text - (size_t)at, "%s%" PRId64 "*%s", at > !whole ? " + " : "", m, f->atom[i]);
    if (at >= (int)sizeof text) return false;
  }
  if (at == !whole || c / d) at += snprintf(text + at, sizeof text - (size_t)at, "%s%" PRId64, at > !whole ? " + " : "", c / d);
  if (!whole && at < (int)sizeof text) at += snprintf(text + at, sizeof text - (size_t)at, ") floordiv %" PRId64, k);
  if (at >= (int)sizeof text) return false;
  harp_error e = {0};
  const tiny_expr *def = NULL;
  int64_t vlo = 0, vhi = 0;
  bool ok = !tiny_expr_parse(&e, t->g, text, 0, &def) && (tiny_dsym_monotone(def) || tiny_dsym_steps_up(t->g, def)) &&
            value_at(t, def, false, &vlo) && value_at(t, def, true, &vhi) && vlo >= 1 && (vlo < vhi || t->lo[b] < t->hi[b]);
  harp_error_clear(&e);
  if (!ok || t->n == TIE_MAX) return false;
  t->x[t->n] = t->names[b], t->def[t->n] = def, t->exact[t->n] = !whole;
  tiny_expr_print(def, t->text[t->n], TIE_TEXT);
  t->n++;
  return true;
}

/* The equation text = 0 (an expression of symbols) added to t's ties where
 * it solves for a box symbol (the one an input declares last first). */
static void equate(ties *t, const char *text) {
  harp_error e = {0};
  const tiny_expr *x = NULL;
  lin f;
  if (tiny_expr_parse(&e, t->g, text, 0, &x) || !lin_of(t, x, &f, 0)) {
    harp_error_clear(&e);
    return;
  }
  for (int exact = 0; exact < 2; exact++) { /* a whole multiple first, else an exact division */
    bool used[TIE_ATOMS] = {false};
    for (;;) { /* the candidates, the latest declared first */
      int best = -1;
      for (int i = 0; i < f.n; i++)
        if (f.k[i] && f.sym[i] && !used[i] && (best < 0 || declared_at(t->g, f.atom[i]) > declared_at(t->g, f.atom[best]))) best = i;
      if (best < 0) break;
      if (solve_for(t, &f, best, exact)) return;
      used[best] = true;
    }
  }
}

/* The equations of node n (an elementwise op of several operands): each
 * operand's dim against the one it broadcasts to, two names neither 1. */
static void node_equations(ties *t, const tiny_node *n) {
  const tiny_shape *ops[TINY_MAX_SRC];
  int k = 0;
  for (int i = 0; i < n->nsrc; i++)
    if (n->src[i].node >= 0) ops[k++] = &t->g->nodes[n->src[i].node].shape;
  tiny_bcast b;
  harp_error e = {0};
  if (k < 2 || tiny_broadcast(&e, n->id, ops, k, &b)) {
    harp_error_clear(&e);
    return;
  }
  for (int i = 0; i < k; i++)
    for (int a = 0; a < ops[i]->rank; a++) {
      int m = b.map[i][a];
      const tiny_dim *x = &ops[i]->d[a], *y = m >= 0 ? &b.out.d[m] : NULL;
      if (y && x->sym && y->sym && x->n != 1 && y->n != 1 && strcmp(x->sym, y->sym)) {
        char text[2 * TIE_TEXT];
        snprintf(text, sizeof text, "%s - (%s)", x->sym, y->sym);
        equate(t, text);
      }
    }
}

/* The product of shape s's dims into *k (its constants) and sym[0..*n) (its
 * symbols); false when a dim is neither or the constants overflow. */
static bool monomial(const tiny_shape *s, int64_t *k, const char **sym, int *n) {
  *k = 1, *n = 0;
  for (int a = 0; a < s->rank; a++)
    if (s->d[a].sym) sym[(*n)++] = s->d[a].sym;
    else if (s->d[a].n < 0 || !ut_mul_ok(*k, s->d[a].n, k)) return false;
  return true;
}

/* The equation of a RESHAPE n: its input's element count equals its
 * output's at every binding (4 R = 8 H: [R, 4] -> [H, 8]), the symbols
 * both sides name cancelled ([N, H, W] -> [N, P]: H W = P). */
static void reshape_equation(ties *t, const tiny_node *n) {
  const char *a[TINY_MAX_RANK], *b[TINY_MAX_RANK];
  int64_t ka, kb;
  int na, nb;
  if (n->nsrc != 1 || n->src[0].node < 0 || !monomial(&t->g->nodes[n->src[0].node].shape, &ka, a, &na) ||
      !monomial(&n->shape, &kb, b, &nb))
    return;
  for (int i = 0; i < na; i++) /* cancel a symbol both sides name */
    for (int j = 0; j < nb; j++)
      if (a[i] && b[j] && !strcmp(a[i], b[j])) a[i] = b[j] = NULL;
  char text[2][TIE_TEXT];
  const char **side[2] = {a, b};
  int cnt[2] = {na, nb}, named = 0;
  for (int s = 0; s < 2; s++) {
    int at = snprintf(text[s], TIE_TEXT, "%" PRId64 " * (", s ? kb : ka), first = at;
    for (int i = 0; i < cnt[s] && at < TIE_TEXT; i++)
      if (side[s][i]) at += snprintf(text[s] + at, TIE_TEXT - (size_t)at, "%s%s", at > first ? " * " : "", side[s][i]), named++;
    if (at < TIE_TEXT) at += snprintf(text[s] + at, TIE_TEXT - (size_t)at, "%s)", at > first ? "" : "1");
    if (at >= TIE_TEXT) return;
  }
  char eq[2 * TIE_TEXT + 8];
  snprintf(eq, sizeof eq, "%s - (%s)", text[0], text[1]);
  if (named) equate(t, eq);
}

/* g's derived symbols with t's ties first (their definitions read the
 * box's symbols only; the derived ones may read them). */
static harp_status apply(harp_error *e, const ties *t) {
  tiny_graph *g = t->g;
  tiny_dsym *d = ut_xcalloc((size_t)(t->n + g->ndsyms) + 1, sizeof *d);
  if (!d) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  for (int i = 0; i < t->n; i++)
    if (!(d[i].name = ut_arena_strdup(g->arena, t->x[i]))) {
      free(d);
      return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
    } else {
      d[i].def = t->def[i], d[i].exact = t->exact[i];
    }
  for (int i = 0; i < g->ndsyms; i++) d[t->n + i] = g->dsyms[i];
  free(g->dsyms);
  g->dsyms = d, g->ndsyms += t->n;
  return HARP_OK;
}

harp_status tiny_ties_text(harp_error *e, const char *json, const char *const *names, const int64_t *lo, const int64_t *hi,
                           int n, char **out, char *said, size_t cap) {
  *out = NULL;
  if (said && cap) said[0] = '\0';
  ties t = {.names = names, .lo = lo, .hi = hi, .nbox = n};
  harp_error ie = {0};
  if (tiny_load_json(&ie, json, strlen(json), "<ties>", &t.g) || tiny_infer(&ie, t.g, NULL, true)) {
    tiny_graph_free(t.g); /* not typed symbolically: no ties, the corners say what fails */
    harp_error_clear(&ie);
    return HARP_OK;
  }
  for (int i = 0; i < t.g->n; i++) {
    tiny_class c = tiny_op_class(t.g->nodes[i].op);
    if (t.g->nodes[i].op == TINY_RESHAPE) reshape_equation(&t, &t.g->nodes[i]);
    else if (c != TC_LEAF && c != TC_CAST && c != TC_MOVE && c != TC_REDUCE && c != TC_GATHER && t.g->nodes[i].nsrc > 1)
      node_equations(&t, &t.g->nodes[i]);
  }
  harp_status st = t.n ? apply(e, &t) : HARP_OK;
  if (!st && t.n && !(*out = tiny_write_json(t.g))) st = ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  for (int i = 0; !st && said && i < t.n; i++) {
    size_t at = strlen(said);
    snprintf(said + at, cap - at, "%s%s = %s%s", i ? ", " : "", t.x[i], t.text[i], t.exact[i] ? " (exact)" : "");
  }
  tiny_graph_free(t.g);
  return st;
}

harp_status tiny_ties_drop(harp_error *e, const tiny_graph *g, const tiny_symtab *t, tiny_symtab *out) {
  tiny_symtab_init(out);
  out->sym_broadcasts = t->sym_broadcasts;
  for (int i = 0; i < t->n; i++)
    if (tiny_dsym_find(g, t->names[i]) < 0 && tiny_symtab_set(e, out, t->names[i], t->values[i])) {
      tiny_symtab_free(out);
      return e->code;
    }
  return HARP_OK;
}
