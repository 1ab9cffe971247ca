/* dsym.c — derived shape symbols of a Tiny graph: a symbol whose value is
 * an expression of other symbols (a strided conv's output height
 * (H + 1) floordiv 2, a Resize's 2*H, a Reshape's n floordiv 4), made by the
 * lowering where a dim is an expression of symbols a ShapeSet leaves
 * unbound, and bound with the others before the graph is prepared
 * (docs/tiny-ir.md, "Derived symbols").
 * Needs: expr.c (parse, eval), core.c (symtab).  Gives: tiny_dsym_add,
 * tiny_dsym_find, tiny_dsym_bind, tiny_dsym_monotone, tiny_dsym_steps_up, tiny_dsym_readers,
 * tiny_dsym_name, tiny_dsym_intern, tiny_dsym_snap. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harp/tiny.h"
#include "util/util.h"

static int dsym_fail(tiny_graph *g, harp_status code, const char *name, const char *msg) {
  if (!g->err.code) ut_fail(&g->err, code, NULL, "derived symbol %s: %s", name ? name : "(null)", msg);
  return -1;
}

int tiny_dsym_find(const tiny_graph *g, const char *name) {
  for (int i = 0; name && i < g->ndsyms; i++)
    if (!strcmp(g->dsyms[i].name, name)) return i;
  return -1;
}

/* Whether name is an identifier the expression parser reads back as a symbol. */
static bool ident_ok(const char *name) {
  size_t n = strlen(name);
  if (n == 0 || n > 64 || (name[0] >= '0' && name[0] <= '9')) return false;
  for (size_t i = 0; i < n; i++) {
    char c = name[i];
    if (!(c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))) return false;
  }
  return strcmp(name, "floordiv") && strcmp(name, "mod");
}

/* Whether x reads symbol sym itself (not through derived definitions). */
static bool reads_direct(const tiny_expr *x, const char *sym) {
  if (!x) return false;
  if (x->k == TX_SYM) return !strcmp(x->sym, sym);
  return reads_direct(x->a, sym) || reads_direct(x->b, sym);
}

/* Whether x reads sym, or a derived symbol whose reads[] is set. */
static bool reads_marked(const tiny_graph *g, const tiny_expr *x, const char *sym, const bool *reads) {
  if (!x) return false;
  if (x->k == TX_SYM) {
    int k = tiny_dsym_find(g, x->sym);
    return !strcmp(x->sym, sym) || (k >= 0 && reads[k]);
  }
  return reads_marked(g, x->a, sym, reads) || reads_marked(g, x->b, sym, reads);
}

void tiny_dsym_readers(const tiny_graph *g, const char *sym, bool *reads) {
  for (int k = 0; k < g->ndsyms; k++) reads[k] = false;
  for (int k = 0; k < g->ndsyms; k++) reads[k] = reads_marked(g, g->dsyms[k].def, sym, reads); /* earlier ones first */
}

int tiny_dsym_add(tiny_graph *g, const char *name, const char *def_text) {
  if (g->err.code) return -1;
  if (!name || !def_text || !ident_ok(name)) return dsym_fail(g, HARP_E_INVALID_ARG, name, "not an identifier of at most 64 characters");
  harp_error e;
  harp_error_clear(&e);
  const tiny_expr *def = NULL;
  if (tiny_expr_parse(&e, g, def_text, 0, &def)) return dsym_fail(g, e.code, name, e.msg);
  if (reads_direct(def, name)) return dsym_fail(g, HARP_E_INVALID_ARG, name, "its definition reads itself");
  int k = tiny_dsym_find(g, name);
  if (k >= 0) {
    char a[512], b[512];
    tiny_expr_print(g->dsyms[k].def, a, sizeof a);
    tiny_expr_print(def, b, sizeof b);
    return strcmp(a, b) ? dsym_fail(g, HARP_E_INVALID_ARG, name, "defined twice, differently") : k;
  }
  for (int i = 0; i < g->ndsyms; i++)
    if (reads_direct(g->dsyms[i].def, name))
      return dsym_fail(g, HARP_E_INVALID_ARG, name, "an earlier derived symbol reads it: define it first");
  if (g->ndsyms >= TINY_MAX_DSYMS) return dsym_fail(g, HARP_E_LIMIT, name, "more than " TINY_MAX_DSYMS_TEXT " derived symbols");
  tiny_dsym *d = ut_xrealloc(g->dsyms, sizeof *d * (size_t)(g->ndsyms + 1));
  const char *nm = ut_arena_strdup(g->arena, name);
  if (d) g->dsyms = d;
  if (!d || !nm) return dsym_fail(g, HARP_E_NO_MEMORY, name, "out of memory");
  g->dsyms[g->ndsyms] = (tiny_dsym){nm, def, false};
  return g->ndsyms++;
}

/* Whether exact derived symbol d's division leaves a remainder at syms
 * (its dividend into *num, its divisor into *den); false where it does not
 * or cannot say. */
static bool inexact(const tiny_dsym *d, const tiny_symtab *syms, int64_t *num, int64_t *den) {
  return d->exact && d->def->k == TX_FLOORDIV && tiny_expr_eval(d->def->a, NULL, syms, num) &&
         tiny_expr_eval(d->def->b, NULL, syms, den) && *den > 0 && ut_mod(*num, *den);
}

harp_status tiny_dsym_bind(harp_error *e, const tiny_graph *g, tiny_symtab *syms) {
  for (int i = 0; i < g->ndsyms; i++) {
    const tiny_dsym *d = &g->dsyms[i];
    int64_t v, old, num, den;
    if (!tiny_expr_eval(d->def, NULL, syms, &v)) continue; /* reads an unbound symbol (or overflows): stays unbound */
    char def[256];
    tiny_expr_print(d->def, def, sizeof def);
    if (inexact(d, syms, &num, &den)) {
      char a[256];
      tiny_expr_print(d->def->a, a, sizeof a);
      return ut_fail(e, HARP_E_INPUT_MISMATCH, NULL,
                     "shape symbol %s := %s (a tie of the model's shapes) holds only where %" PRId64 " divides %s, which is %" PRId64
                     " at this binding",
                     d->name, def, den, a, num);
    }
    if (tiny_symtab_get(syms, d->name, &old) && old != v)
      return ut_fail(e, HARP_E_INPUT_MISMATCH, NULL,
                     "shape symbol %s is %" PRId64 " (an input's shape), but its definition %s gives %" PRId64 " at this binding",
                     d->name, old, def, v);
    if (v < 0)
      return ut_fail(e, HARP_E_AXIS_SIZE_MISMATCH, NULL, "the size %s = %s is %" PRId64 " at this binding: negative", d->name,
                     def, v);
    if (tiny_symtab_set(e, syms, d->name, v)) return e->code;
  }
  return HARP_OK;
}

/* The one symbol x reads into *sym; false when it reads none or several. */
static bool one_symbol(const tiny_expr *x, const char **sym) {
  if (!x) return true;
  if (x->k == TX_SYM) {
    if (*sym && strcmp(*sym, x->sym)) return false;
    *sym = x->sym;
    return true;
  }
  return one_symbol(x->a, sym) && one_symbol(x->b, sym);
}

/* The first v of from, from + step, .. (up to to, at most den of them, and
 * 4,096) where d's division, sym at v, is exact, into *at; false: none. */
static bool exact_from(const tiny_dsym *d, const char *sym, int64_t from, int64_t to, int64_t step, int64_t den, int64_t *at) {
  for (int64_t k = 0, v = from; k < den && k < 4096 && (step > 0 ? v <= to : v >= to); k++, v += step) {
    tiny_symtab t;
    harp_error e = {0};
    int64_t num, dd, q;
    tiny_symtab_init(&t);
    bool ok = !tiny_symtab_set(&e, &t, sym, v) && tiny_expr_eval(d->def, NULL, &t, &q) && !inexact(d, &t, &num, &dd);
    tiny_symtab_free(&t);
    if (ok) return *at = v, true;
  }
  return false;
}

bool tiny_dsym_snap(const tiny_graph *g, const char *const *names, int64_t *lo, int64_t *hi, int n) {
  bool ok = true;
  for (int i = 0; i < g->ndsyms; i++) {
    const tiny_dsym *d = &g->dsyms[i];
    const char *sym = NULL;
    int64_t den = 0, l, h;
    if (!d->exact || d->def->k != TX_FLOORDIV || d->def->b->k != TX_CONST || (den = d->def->b->c) <= 0 || !one_symbol(d->def->a, &sym) ||
        !sym)
      continue;
    for (int j = 0; j < n; j++) {
      if (strcmp(names[j], sym)) continue;
      if (exact_from(d, sym, lo[j], hi[j], 1, den, &l) && exact_from(d, sym, hi[j], lo[j], -1, den, &h)) lo[j] = l, hi[j] = h;
      else ok = false;
    }
  }
  return ok;
}

/* Whether x is a constant below zero. */
static bool negative_const(const tiny_expr *x) { return x->k == TX_CONST && x->c < 0; }

bool tiny_dsym_monotone(const tiny_expr *x) {
  switch (x->k) {
  case TX_CONST:
  case TX_SYM: return true;
  case TX_VAR: return false;
  case TX_ADD: return tiny_dsym_monotone(x->a) && tiny_dsym_monotone(x->b);
  case TX_MUL: /* a negative factor turns growth into decrease (sizes are >= 0: a product of growing ones grows) */
    if (negative_const(x->a) || negative_const(x->b)) return false;
    return tiny_dsym_monotone(x->a) && tiny_dsym_monotone(x->b);
  case TX_FLOORDIV: return x->b->k == TX_CONST && x->b->c > 0 && tiny_dsym_monotone(x->a);
  case TX_MOD: return false;
  }
  return false;
}

/* The change of x (g's derived symbols read through their definitions) as
 * symbol `sym` grows by one, every other one held: within [*lo, *hi]
 * (interval steps: a floor division by d > 0 of a change in [lo, hi]
 * changes by floor(lo / d) .. ceil(hi / d)).  False when not bounded so:
 * a product of two changing terms, a variable, a remainder or a division
 * by a symbol of a changing term, a depth past 16 or a large constant. */
#define STEP_MAX ((int64_t)1 << 30)
static bool step_range(const tiny_graph *g, const tiny_expr *x, const char *sym, int depth, int64_t *lo, int64_t *hi) {
  int64_t alo, ahi, blo, bhi;
  *lo = *hi = 0;
  if (depth > 16) return false;
  switch (x->k) {
  case TX_CONST: return x->c > -STEP_MAX && x->c < STEP_MAX;
  case TX_VAR: return false;
  case TX_SYM: {
    int d = tiny_dsym_find(g, x->sym);
    if (d >= 0) return step_range(g, g->dsyms[d].def, sym, depth + 1, lo, hi);
    *lo = *hi = !strcmp(x->sym, sym);
    return true;
  }
  case TX_ADD:
    if (!step_range(g, x->a, sym, depth + 1, &alo, &ahi) || !step_range(g, x->b, sym, depth + 1, &blo, &bhi)) return false;
    *lo = alo + blo, *hi = ahi + bhi;
    return *lo > -STEP_MAX && *hi < STEP_MAX;
  case TX_MUL: { /* a constant factor scales the change; two others: neither may change */
    if (!step_range(g, x->a, sym, depth + 1, &alo, &ahi) || !step_range(g, x->b, sym, depth + 1, &blo, &bhi)) return false;
    bool ka = x->a->k == TX_CONST;
    if (!ka && x->b->k != TX_CONST) return !alo && !ahi && !blo && !bhi;
    int64_t k = ka ? x->a->c : x->b->c, tlo = ka ? blo : alo, thi = ka ? bhi : ahi; /* |k|, |t..| < 2^30: no overflow */
    *lo = k >= 0 ? k * tlo : k * thi, *hi = k >= 0 ? k * thi : k * tlo;
    return *lo > -STEP_MAX && *hi < STEP_MAX;
  }
  case TX_FLOORDIV:
  case TX_MOD:
    if (!step_range(g, x->a, sym, depth + 1, &alo, &ahi)) return false;
    if (!alo && !ahi && step_range(g, x->b, sym, depth + 1, &blo, &bhi) && !blo && !bhi) return true; /* neither side changes */
    if (x->k == TX_MOD || x->b->k != TX_CONST || x->b->c <= 0) return false;
    *lo = ut_floordiv(alo, x->b->c), *hi = -ut_floordiv(-ahi, x->b->c);
    return true;
  }
  return false;
}

/* The symbols x reads that are not derived ones of g (those read through
 * their definitions) into names[*n..] (at most cap, each once); false past cap. */
static bool base_syms(const tiny_graph *g, const tiny_expr *x, int depth, const char **names, int *n, int cap) {
  if (!x || depth > 16) return depth <= 16;
  if (x->k == TX_SYM) {
    int d = tiny_dsym_find(g, x->sym);
    if (d >= 0) return base_syms(g, g->dsyms[d].def, depth + 1, names, n, cap);
    for (int i = 0; i < *n; i++)
      if (!strcmp(names[i], x->sym)) return true;
    if (*n == cap) return false;
    names[(*n)++] = x->sym;
    return true;
  }
  bool pair = x->k == TX_ADD || x->k == TX_MUL || x->k == TX_FLOORDIV || x->k == TX_MOD;
  return !pair || (base_syms(g, x->a, depth + 1, names, n, cap) && base_syms(g, x->b, depth + 1, names, n, cap));
}

bool tiny_dsym_steps_up(const tiny_graph *g, const tiny_expr *def) {
  const char *names[16];
  int n = 0;
  if (!base_syms(g, def, 0, names, &n, 16)) return false;
  for (int i = 0; i < n; i++) {
    int64_t lo, hi;
    if (!step_range(g, def, names[i], 0, &lo, &hi) || lo < 0) return false;
  }
  return true;
}

void tiny_dsym_name(const char *text, char *name, size_t cap) {
  size_t k = (size_t)snprintf(name, cap, "ds_");
  uint64_t h = 1469598103934665603ULL; /* FNV-1a */
  for (const char *p = text; *p; p++) {
    h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    char c = *p;
    const char *put = c == '+' ? "_p" : c == '-' ? "_m" : c == '*' ? "_x" : c == '/' ? "_d" : NULL;
    char one[2] = {c, 0};
    if (!put && ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_')) put = one;
    for (; put && *put && k + 1 < cap; put++) name[k++] = *put;
  }
  name[k < cap ? k : cap - 1] = 0;
  if (k > 48) snprintf(name + 40, cap - 40, "_%08" PRIx64, h & 0xffffffffu);
}

int tiny_dsym_intern(tiny_graph *g, const char *def_text) {
  harp_error e;
  harp_error_clear(&e);
  const tiny_expr *def = NULL;
  char canon[512], theirs[512], name[96];
  if (g->err.code || tiny_expr_parse(&e, g, def_text, 0, &def)) return -1;
  tiny_expr_print(def, canon, sizeof canon);
  tiny_dsym_name(def_text, name, sizeof name); /* named after the text given (the canonical one spells L - 1 as L + (-1)) */
  int k = tiny_dsym_find(g, name);
  if (k >= 0) {
    tiny_expr_print(g->dsyms[k].def, theirs, sizeof theirs);
    return strcmp(canon, theirs) ? -1 : k;
  }
  for (int i = 0; i < g->ndsyms; i++) /* an earlier definition reading the name: not this one */
    if (reads_direct(g->dsyms[i].def, name)) return -1;
  return tiny_dsym_add(g, name, canon);
}
