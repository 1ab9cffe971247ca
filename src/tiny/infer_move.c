/* infer_move.c — shape inference of the movement uops (views), one rule per
 * op (seed 001 §3).
 * Needs: tiny_int.h (the inference context, dim resolution), dsym.c
 * (tiny_dsym_intern: a ShapeSet's window counts named; a PAD's padded
 * axis named by a derived symbol the graph has: a concat's 2 H + 1).
 * Gives: tiny_infer_move: node->shape, dtype and pieces of a view. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "tiny_int.h"

#define FAIL(code, ...) ut_fail(e, code, n->id, __VA_ARGS__)

/* A movement rule: out from in (the source's shape) and n's arg. */
typedef harp_status (*move_rule)(tiny_ictx *c, tiny_node *n, const tiny_shape *in, tiny_shape *out);

/* Resolve dim d of n's arg against the symbols (unknown only if allowed). */
static bool dim_of(tiny_ictx *c, const tiny_node *n, tiny_dim d, tiny_dim *out) {
  return tiny_resolve_dim(c->e, n->id, d, c->syms, c->allow_unknown, out);
}

/* Element counts of two shapes, compared as monomials when symbols are
 * unknown; *decided false when the answer waits for a binding. */
static bool same_numel(const tiny_shape *a, const tiny_shape *b, bool *decided) {
  int64_t na = tiny_shape_numel(a), nb = tiny_shape_numel(b);
  *decided = true;
  if (na >= 0 && nb >= 0) return na == nb;
  int64_t ka = 1, kb = 1;
  const char *sa[TINY_MAX_RANK], *sb[TINY_MAX_RANK];
  int ca = 0, cb = 0;
  for (int i = 0; i < a->rank; i++) {
    if (a->d[i].n >= 0) ka *= a->d[i].n;
    else if (a->d[i].sym) sa[ca++] = a->d[i].sym;
    else { *decided = false; return true; }
  }
  for (int i = 0; i < b->rank; i++) {
    if (b->d[i].n >= 0) kb *= b->d[i].n;
    else if (b->d[i].sym) sb[cb++] = b->d[i].sym;
    else { *decided = false; return true; }
  }
  if (ca != cb || ka != kb) { *decided = false; return true; } /* mixed known/unknown: wait for binding */
  bool used[TINY_MAX_RANK] = {0};
  for (int i = 0; i < ca; i++) {
    int j = 0;
    for (; j < cb; j++)
      if (!used[j] && strcmp(sa[i], sb[j]) == 0) break;
    if (j == cb) { *decided = false; return true; }
    used[j] = true;
  }
  return true;
}

/* RESHAPE: the arg's shape, with as many elements as in. */
static harp_status infer_reshape(tiny_ictx *c, tiny_node *n, const tiny_shape *in, tiny_shape *out) {
  harp_error *e = c->e;
  if (tiny_resolve_shape(e, n, &n->a.reshape.shape, c->syms, c->allow_unknown, out)) return e->code;
  bool decided, same = same_numel(in, out, &decided);
  if (decided && !same) {
    char ib[256], ob[256];
    tiny_shape_format(in, ib, sizeof ib);
    tiny_shape_format(out, ob, sizeof ob);
    return FAIL(HARP_E_AXIS_SIZE_MISMATCH, "RESHAPE %s -> %s changes the element count", ib, ob);
  }
  return HARP_OK;
}

/* PERMUTE: output axis i is input axis perm[i], perm a permutation of in's axes. */
static harp_status infer_permute(tiny_ictx *c, tiny_node *n, const tiny_shape *in, tiny_shape *out) {
  harp_error *e = c->e;
  const tiny_arg_permute *a = &n->a.permute;
  int r = in->rank;
  bool seen[TINY_MAX_RANK] = {0};
  if (a->n != r) return FAIL(HARP_E_INVALID_PERMUTATION, "perm has %d entries for rank %d", a->n, r);
  for (int i = 0; i < r; i++) {
    if (a->perm[i] < 0 || a->perm[i] >= r || seen[a->perm[i]])
      return FAIL(HARP_E_INVALID_PERMUTATION, "perm entry %d (%d) is out of range or repeated", i, a->perm[i]);
    seen[a->perm[i]] = true;
  }
  out->rank = r;
  for (int i = 0; i < r; i++) out->d[i] = in->d[a->perm[i]];
  return HARP_OK;
}

/* EXPAND's map[i]: the output axis (of R) input axis i (of r) becomes —
 * right-aligned, or by broadcast_dimensions: of the same rank the axes kept
 * (seed 001; the others must be 1), of a smaller one where each goes (XLA). */
static harp_status expand_map(tiny_ictx *c, tiny_node *n, const tiny_shape *in, int R, int *map) {
  harp_error *e = c->e;
  const tiny_arg_expand *a = &n->a.expand;
  int r = in->rank;
  if (!a->has_bd) {
    for (int i = 0; i < r; i++) map[i] = i + R - r;
  } else if (r == R) {
    bool keep[TINY_MAX_RANK] = {0};
    for (int i = 0; i < a->nbd; i++) {
      if (a->bd[i] < 0 || a->bd[i] >= R || keep[a->bd[i]])
        return FAIL(HARP_E_INVALID_ARG, "broadcast_dimensions entry %d is out of range or repeated", a->bd[i]);
      keep[a->bd[i]] = true;
    }
    for (int i = 0; i < r; i++) {
      map[i] = i;
      if (!keep[i] && in->d[i].n != 1 && in->d[i].n >= 0)
        return FAIL(HARP_E_BROADCAST_MISMATCH, "axis %d is broadcast but has size %" PRId64 ", not 1", i, in->d[i].n);
    }
  } else {
    if (a->nbd != r) return FAIL(HARP_E_INVALID_ARG, "broadcast_dimensions needs %d entries (one per input axis)", r);
    for (int i = 0; i < r; i++) {
      if (a->bd[i] < 0 || a->bd[i] >= R || (i && a->bd[i] <= a->bd[i - 1]))
        return FAIL(HARP_E_INVALID_ARG, "broadcast_dimensions must be increasing output axes");
      map[i] = a->bd[i];
    }
  }
  return HARP_OK;
}

/* EXPAND: the arg's shape; every input axis equals its output axis or is 1. */
static harp_status infer_expand(tiny_ictx *c, tiny_node *n, const tiny_shape *in, tiny_shape *out) {
  harp_error *e = c->e;
  if (tiny_resolve_shape(e, n, &n->a.expand.shape, c->syms, c->allow_unknown, out)) return e->code;
  int r = in->rank, R = out->rank;
  if (r > R) return FAIL(HARP_E_BROADCAST_MISMATCH, "EXPAND to rank %d from a larger rank %d", R, r);
  int map[TINY_MAX_RANK];
  if (expand_map(c, n, in, R, map)) return e->code;
  for (int i = 0; i < r; i++) {
    const tiny_dim *s = &in->d[i], *t = &out->d[map[i]];
    if (s->n == 1) continue;
    /* a mismatch allows either side to be 1 (broadcasting); EXPAND only grows a 1 */
    if (tiny_dim_mismatch(s, t) || (s->n >= 0 && t->n >= 0 && s->n != t->n)) {
      char ib[256], ob[256];
      tiny_shape_format(in, ib, sizeof ib);
      tiny_shape_format(out, ob, sizeof ob);
      return FAIL(HARP_E_BROADCAST_MISMATCH, "EXPAND %s -> %s: axis %d is neither equal nor 1", ib, ob, i);
    }
  }
  return HARP_OK;
}

static void pad_axis_name(tiny_ictx *c, const tiny_node *n, int i, tiny_dim *d);

/* PAD: each axis grows by lo + hi >= 0; a padded side adds a piece. */
static harp_status infer_pad(tiny_ictx *c, tiny_node *n, const tiny_shape *in, tiny_shape *out) {
  harp_error *e = c->e;
  const tiny_arg_pad *a = &n->a.pad;
  int r = in->rank;
  if (a->n != r) return FAIL(HARP_E_INVALID_ARG, "pad has %d entries for rank %d", a->n, r);
  *out = *in;
  for (int i = 0; i < r; i++) {
    tiny_dim lo, hi;
    if (!dim_of(c, n, a->lo[i], &lo) || !dim_of(c, n, a->hi[i], &hi)) return e->code;
    /* n == -1 with a symbol means "not bound yet"; anything else below 0 is bad */
    if ((lo.n < 0 && !lo.sym) || (hi.n < 0 && !hi.sym)) return FAIL(HARP_E_INVALID_ARG, "pad amounts must be >= 0 (use SHRINK to cut)");
    int factor = 1 + (lo.n != 0) + (hi.n != 0);
    n->pieces = n->pieces > INT32_MAX / factor ? INT32_MAX : n->pieces * factor;
    if (lo.n == 0 && hi.n == 0) continue; /* axis untouched, keeps its name */
    out->d[i].sym = NULL;
    out->d[i].n = -1;
    if (lo.n >= 0 && hi.n >= 0 && in->d[i].n >= 0) {
      out->d[i].n = in->d[i].n + lo.n + hi.n;
      if (out->d[i].n > TINY_MAX_DIM) return FAIL(HARP_E_LIMIT, "padded axis %d is too large", i);
      pad_axis_name(c, n, i, &out->d[i]);
    }
  }
  return HARP_OK;
}

/* SHRINK of axis i: lo <= k < hi in steps of step, into *d (in's axis). */
static harp_status shrink_axis(tiny_ictx *c, tiny_node *n, int i, tiny_dim *d) {
  harp_error *e = c->e;
  const tiny_arg_shrink *a = &n->a.shrink;
  tiny_dim lo, hi, st = {1, NULL};
  if (!dim_of(c, n, a->lo[i], &lo) || !dim_of(c, n, a->hi[i], &hi) || (a->has_step && !dim_of(c, n, a->step[i], &st)))
    return e->code;
  if (lo.n >= 0 && hi.n >= 0 && st.n >= 0 && d->n >= 0) {
    if (st.n < 1) return FAIL(HARP_E_NEGATIVE_STRIDE, "SHRINK step on axis %d is %" PRId64 "; use FLIP to reverse", i, st.n);
    if (lo.n > hi.n || hi.n > d->n)
      return FAIL(HARP_E_INVALID_ARG, "SHRINK axis %d: need 0 <= lo <= hi <= %" PRId64 ", got [%" PRId64 ", %" PRId64 ")", i,
                  d->n, lo.n, hi.n);
    int64_t len = (hi.n - lo.n + st.n - 1) / st.n;
    if (len != d->n) d->sym = NULL;
    d->n = len;
  } else if (!(lo.n == 0 && hi.sym && d->sym && strcmp(hi.sym, d->sym) == 0 && st.n == 1)) {
    if (!lo.sym && !hi.sym && lo.n > hi.n) return FAIL(HARP_E_INVALID_ARG, "SHRINK axis %d: lo > hi", i);
    d->n = -1;
    d->sym = NULL;
  }
  return HARP_OK;
}

/* SHRINK: a strided window [lo, hi) of every axis. */
static harp_status infer_shrink(tiny_ictx *c, tiny_node *n, const tiny_shape *in, tiny_shape *out) {
  harp_error *e = c->e;
  if (n->a.shrink.n != in->rank) return FAIL(HARP_E_INVALID_ARG, "shrink has %d entries for rank %d", n->a.shrink.n, in->rank);
  *out = *in;
  for (int i = 0; i < in->rank; i++)
    if (shrink_axis(c, n, i, &out->d[i])) return e->code;
  return HARP_OK;
}

/* FLIP: in's shape; the axes distinct and in range. */
static harp_status infer_flip(tiny_ictx *c, tiny_node *n, const tiny_shape *in, tiny_shape *out) {
  harp_error *e = c->e;
  const tiny_arg_flip *a = &n->a.flip;
  bool seen[TINY_MAX_RANK] = {0};
  for (int i = 0; i < a->n; i++) {
    if (a->axes[i] < 0 || a->axes[i] >= in->rank || seen[a->axes[i]])
      return FAIL(HARP_E_INVALID_ARG, "FLIP axis %d is out of range or repeated", a->axes[i]);
    seen[a->axes[i]] = true;
  }
  *out = *in;
  return HARP_OK;
}

/* VIEW: the arg's shape; each index_map entry reads inside its input axis
 * (checked where its range is known); each MOD doubles the pieces. */
static harp_status infer_view(tiny_ictx *c, tiny_node *n, const tiny_shape *in, tiny_shape *out) {
  harp_error *e = c->e;
  const tiny_arg_view *a = &n->a.view;
  int r = in->rank;
  if (tiny_resolve_shape(e, n, &a->shape, c->syms, c->allow_unknown, out)) return e->code;
  if (a->n != r) return FAIL(HARP_E_INVALID_ARG, "index_map has %d entries for an input of rank %d", a->n, r);
  int64_t sizes[TINY_MAX_RANK];
  for (int i = 0; i < out->rank; i++) sizes[i] = out->d[i].n;
  bool empty = tiny_shape_numel(out) == 0;
  for (int j = 0; j < r; j++) {
    if (!a->map[j]) return FAIL(HARP_E_INVALID_ARG, "index_map entry %d is missing", j);
    int64_t lo, hi;
    if (empty || in->d[j].n < 0 || !tiny_expr_range(a->map[j], sizes, c->syms, &lo, &hi)) {
      if (!empty && tiny_shape_known(out) && in->d[j].n >= 0 && !c->allow_unknown)
        return FAIL(HARP_E_INVALID_ARG, "index_map entry %d is not affine in the output axes", j);
      continue;
    }
    if (lo < 0 || hi >= in->d[j].n)
      return FAIL(HARP_E_INVALID_ARG, "index_map entry %d reads [%" PRId64 ", %" PRId64 "] outside axis size %" PRId64, j, lo,
                  hi, in->d[j].n);
  }
  for (int j = 0; j < r; j++) {
    int mods = tiny_expr_count_mod(a->map[j]);
    for (int k = 0; k < mods && n->pieces < INT32_MAX / 2; k++) n->pieces *= 2;
  }
  return HARP_OK;
}

/* ---- a ShapeSet's window counts named (tiny_symtab.sym_broadcasts) ---------
 * A POOL's window count over a size that is an affine expression of named
 * symbols (the causal mask's iota: M windows over M padded by M, M + 1 of
 * them) is a derived symbol of that expression (tiny_dsym_intern), so a
 * ShapeSet object's loops over it read it at run time as over any symbol.
 * The expression comes only from named dims and the literal args: an axis
 * with no name could be any symbol's value, so it names nothing. */
#define FORM_MAX 8
typedef struct form {
  int64_t c, k[FORM_MAX]; /* c + sum k[i] * sym[i] */
  const char *sym[FORM_MAX];
  int n;
} form;

/* f += k * s (s a symbol, or NULL: the constant k); false when f is full. */
static bool form_add(form *f, const char *s, int64_t k) {
  if (k > 1000000 || k < -1000000 || f->c > INT32_MAX || f->c < -INT32_MAX) return false;
  if (!s) return f->c += k, true;
  for (int i = 0; i < f->n; i++)
    if (!strcmp(f->sym[i], s)) return f->k[i] += k, true;
  if (f->n == FORM_MAX) return false;
  f->sym[f->n] = s, f->k[f->n++] = k;
  return true;
}

/* f += k * x (an affine expression: constants, symbols, sums, products by
 * a constant); a derived symbol of g with an affine definition is its
 * definition (2 H, not ds_2_xH), so one sum has one name. */
static bool form_expr(const tiny_graph *g, form *f, const tiny_expr *x, int64_t k, int depth) {
  if (depth > 8 || k > 1000000 || k < -1000000) return false;
  switch (x->k) {
  case TX_CONST: return form_add(f, NULL, k * x->c);
  case TX_SYM: {
    int i = tiny_dsym_find(g, x->sym);
    form t = *f;
    if (i >= 0 && form_expr(g, &t, g->dsyms[i].def, k, depth + 1)) return *f = t, true;
    return form_add(f, x->sym, k);
  }
  case TX_ADD: return form_expr(g, f, x->a, k, depth + 1) && form_expr(g, f, x->b, k, depth + 1);
  case TX_MUL:
    if (x->a->k == TX_CONST) return form_expr(g, f, x->b, k * x->a->c, depth + 1);
    return x->b->k == TX_CONST && form_expr(g, f, x->a, k * x->b->c, depth + 1);
  default: return false;
  }
}

/* f += k * symbol s of g (a derived one by its affine definition). */
static bool form_sym(const tiny_graph *g, form *f, const char *s, int64_t k) {
  tiny_expr x = {.k = TX_SYM, .sym = s};
  return form_expr(g, f, &x, k, 0);
}

/* f += k * (the arg dim d: its symbol, or its literal value). */
static bool form_arg(const tiny_graph *g, form *f, tiny_dim d, int64_t k) {
  return d.sym ? form_sym(g, f, d.sym, k) : d.n >= 0 && form_add(f, NULL, k * d.n);
}

/* f += axis a of node x of g: its symbol, or through a PAD its input's axis
 * and the pads; false where the axis has no name to go by. */
static bool form_axis(const tiny_graph *g, int x, int a, form *f, int depth) {
  const tiny_node *n = &g->nodes[x];
  if (n->shape.d[a].sym) return form_sym(g, f, n->shape.d[a].sym, 1);
  if (n->op != TINY_PAD || depth > 8 || n->src[0].node < 0 || a >= n->a.pad.n) return false;
  return form_arg(g, f, n->a.pad.lo[a], 1) && form_arg(g, f, n->a.pad.hi[a], 1) && form_axis(g, n->src[0].node, a, f, depth + 1);
}

static void form_name(tiny_ictx *c, const form *f, int64_t s, bool add, tiny_dim *d);

/* f as tiny_expr_parse text ("2*M + 1", "M - 3": unit coefficients and a
 * zero constant left out) into buf[cap]; false when it has no symbol. */
static bool form_text(const form *f, char *buf, size_t cap) {
  size_t k = 0;
  buf[0] = 0;
  for (int i = 0; i < f->n; i++) {
    int64_t q = f->k[i], u = q < 0 ? -q : q;
    if (!q) continue;
    int w = u == 1 ? snprintf(buf + k, cap - k, "%s%s", k ? (q < 0 ? " - " : " + ") : q < 0 ? "-1*" : "", f->sym[i])
                   : snprintf(buf + k, cap - k, "%s%" PRId64 "*%s", k ? (q < 0 ? " - " : " + ") : q < 0 ? "-" : "", u, f->sym[i]);
    if (w < 0 || (size_t)w >= cap - k) return false;
    k += (size_t)w;
  }
  int w = f->c ? snprintf(buf + k, cap - k, " %s %" PRId64, f->c < 0 ? "-" : "+", f->c < 0 ? -f->c : f->c) : 0;
  return k && w >= 0 && (size_t)w < cap - k;
}

/* The window count *d of POOL n over axis D of its input (window span
 * dl * (k - 1) + 1, stride s: (size - span) floordiv s + 1) named after
 * its expression of the symbols, where every piece has one (ShapeSet
 * preparations only; the name is a derived symbol of g). */
static void pool_count_name(tiny_ictx *c, tiny_node *n, int m, int D, tiny_dim *d) {
  const tiny_arg_pool *a = &n->a.pool;
  form f = {0};
  if (!c->syms || !c->syms->sym_broadcasts || d->n < 0 || n->src[0].node < 0 || a->dilation[m].sym || a->stride[m].sym) return;
  int64_t s = a->stride[m].n;
  if (form_axis(c->g, n->src[0].node, D, &f, 0) && form_arg(c->g, &f, a->kernel[m], -a->dilation[m].n) &&
      form_add(&f, NULL, a->dilation[m].n - 1 + (s == 1)))
    form_name(c, &f, s, true, d);
}

/* Dim *d (its value known) named after f floordiv s (s 1: f itself): the
 * symbol f is, or a derived symbol of g (tiny_dsym_intern; add false: one
 * g has already) whose value at c's symbols is d's; d unchanged where f has
 * no symbol. */
static void form_name(tiny_ictx *c, const form *f, int64_t s, bool add, tiny_dim *d) {
  char num[256], def[300];
  int64_t v;
  if (!form_text(f, num, sizeof num)) return;
  int nz = 0, at = 0;
  for (int i = 0; i < f->n; i++)
    if (f->k[i]) nz++, at = i;
  if (s == 1 && nz == 1 && f->k[at] == 1 && f->c == 0) { /* the count is a symbol already */
    if (tiny_symtab_get(c->syms, f->sym[at], &v) && v == d->n) d->sym = f->sym[at];
    return;
  }
  if (s == 1) snprintf(def, sizeof def, "%s", num);
  else snprintf(def, sizeof def, "(%s) floordiv %" PRId64 " + 1", num, s);
  char name[96];
  tiny_dsym_name(def, name, sizeof name);
  int k = add || tiny_dsym_find(c->g, name) >= 0 ? tiny_dsym_intern(c->g, def) : -1;
  if (k >= 0 && tiny_expr_eval(c->g->dsyms[k].def, NULL, c->syms, &v) && v == d->n) d->sym = c->g->dsyms[k].name;
}

/* Padded axis i of PAD n (its size in *d) named after its input's axis
 * plus the pads where g has that symbol already (a Concat's 2 H + 1, the
 * frontend's, lowered for a ShapeSet), so a ShapeSet object's loops over
 * it read it at run time.  A padded conv input's H + 2 adds none; a graph
 * without derived symbols (a fixed-shape compile's) is left as it was. */
static void pad_axis_name(tiny_ictx *c, const tiny_node *n, int i, tiny_dim *d) {
  form f = {0};
  if (c->syms && c->g->ndsyms > 0 && n->src[0].node >= 0 && form_axis(c->g, n->src[0].node, i, &f, 0) &&
      form_arg(c->g, &f, n->a.pad.lo[i], 1) && form_arg(c->g, &f, n->a.pad.hi[i], 1))
    form_name(c, &f, 1, false, d);
}

/* POOL window axis m over input axis D (size in *d): the window count into
 * *d, the kernel size into *k. */
static harp_status pool_axis(tiny_ictx *c, tiny_node *n, int m, int D, tiny_dim *d, tiny_dim *k) {
  harp_error *e = c->e;
  const tiny_arg_pool *a = &n->a.pool;
  tiny_dim s, dl;
  if (!dim_of(c, n, a->kernel[m], k) || !dim_of(c, n, a->stride[m], &s) || !dim_of(c, n, a->dilation[m], &dl))
    return e->code;
  const tiny_dim *vals[3] = {k, &s, &dl};
  bool bad = false;
  for (int q = 0; q < 3; q++) /* n < 0 is fine only as "symbol not bound yet" */
    bad |= vals[q]->n >= 0 ? vals[q]->n < 1 : !vals[q]->sym;
  if (bad) return FAIL(HARP_E_INVALID_ARG, "POOL kernel, stride and dilation must be >= 1");
  int64_t size = d->n;
  *d = (tiny_dim){-1, NULL};
  if (k->n > 0 && s.n > 0 && dl.n > 0 && size >= 0) {
    int64_t span = dl.n * (k->n - 1) + 1;
    if (span > size)
      return FAIL(HARP_E_AXIS_SIZE_MISMATCH, "POOL window %" PRId64 " is larger than axis %d (size %" PRId64 ")", span, D, size);
    d->n = (size - span) / s.n + 1;
    pool_count_name(c, n, m, D, d);
  }
  return HARP_OK;
}

/* POOL: the last a.n axes become window counts, then a.n kernel axes follow. */
static harp_status infer_pool(tiny_ictx *c, tiny_node *n, const tiny_shape *in, tiny_shape *out) {
  harp_error *e = c->e;
  const tiny_arg_pool *a = &n->a.pool;
  int r = in->rank;
  if (a->n < 1 || a->n > r) return FAIL(HARP_E_INVALID_ARG, "POOL window has %d axes for rank %d", a->n, r);
  if (r + a->n > TINY_MAX_RANK) return FAIL(HARP_E_LIMIT, "POOL result rank exceeds %d", TINY_MAX_RANK);
  out->rank = r + a->n;
  for (int i = 0; i < r; i++) out->d[i] = in->d[i];
  int lead = r - a->n;
  for (int m = 0; m < a->n; m++)
    if (pool_axis(c, n, m, lead + m, &out->d[lead + m], &out->d[r + m])) return e->code;
  return HARP_OK;
}

static const move_rule rules[TINY_OP_COUNT] = {
    [TINY_RESHAPE] = infer_reshape, [TINY_PERMUTE] = infer_permute, [TINY_EXPAND] = infer_expand,
    [TINY_PAD] = infer_pad,         [TINY_SHRINK] = infer_shrink,   [TINY_FLIP] = infer_flip,
    [TINY_VIEW] = infer_view,       [TINY_POOL] = infer_pool,
};

harp_status tiny_infer_move(tiny_ictx *c, tiny_node *n) {
  harp_error *e = c->e;
  const tiny_node *x = &c->g->nodes[n->src[0].node];
  n->dtype = x->dtype;
  n->pieces = x->pieces > 0 ? x->pieces : 1;
  if ((unsigned)n->op >= TINY_OP_COUNT || !rules[n->op]) return FAIL(HARP_E_INTERNAL, "not a movement op");
  tiny_shape out = {0};
  if (rules[n->op](c, n, &x->shape, &out)) return e->code;
  n->shape = out;
  return HARP_OK;
}
