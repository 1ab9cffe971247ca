/* ibtest.h — helpers for the IndexBook / Poly-View tests. */
#ifndef HARP_IBTEST_H
#define HARP_IBTEST_H

#include "harp/poly.h"
#include "index/indexbook.h"
#include "testutil.h"
#include "util/util.h"

/* A graph, its binding and its IndexBook. */
typedef struct ibt {
  harp_error e;
  tiny_graph *g;
  tiny_symtab syms;
  ib_book *ib;
  poly_view *pv;
} ibt;

/* Load, prepare (unbound symbols allowed when no binding is given), build
 * the book.  Returns the first failing status (e filled); never fails the
 * test itself, so error cases can use it. */
static inline harp_status ibt_load(ibt *t, const char *json, const char *const *syms) {
  memset(t, 0, sizeof *t);
  tiny_symtab_init(&t->syms);
  harp_status s = tiny_load_json(&t->e, json, strlen(json), "test.json", &t->g);
  bool any = false;
  for (int i = 0; syms && syms[i] && !s; i++, any = true) s = tiny_symtab_parse_assign(&t->e, &t->syms, syms[i]);
  if (!s) s = tiny_prepare(&t->e, t->g, &t->syms, !any);
  if (!s) s = ib_build(&t->e, t->g, &t->syms, NULL, &t->ib);
  return s;
}

/* ibt_load of a "uops" list without its brackets, written with ' for " (the
 * tests' C strings stay readable). */
static inline harp_status ibt_load_uops(ibt *t, const char *uops, const char *const *syms) {
  char *json = malloc(strlen(uops) + 32);
  sprintf(json, "{\"uops\":[%s]}", uops);
  for (char *p = json; *p; p++)
    if (*p == '\'') *p = '"';
  harp_status s = ibt_load(t, json, syms);
  free(json);
  return s;
}

static inline harp_status ibt_load_file(ibt *t, const char *rel, const char *const *syms) {
  char path[1024];
  const char *root = getenv("HARP_SOURCE_DIR");
  snprintf(path, sizeof path, "%s/%s", root ? root : HARP_SOURCE_DIR, rel);
  char *text = NULL;
  size_t len = 0;
  harp_error e = {0};
  if (ut_read_file(&e, path, 1 << 24, &text, &len)) fail_msg("cannot read %s", path);
  harp_status s = ibt_load(t, text, syms);
  free(text);
  return s;
}

static inline harp_status ibt_poly(ibt *t, const poly_options *opt) { return poly_build(&t->e, t->g, t->ib, opt, &t->pv); }

static inline void ibt_free(ibt *t) {
  poly_free(t->pv);
  ib_free(t->ib);
  tiny_graph_free(t->g);
  tiny_symtab_free(&t->syms);
  memset(t, 0, sizeof *t);
}

static inline int ibt_node(const ibt *t, const char *id) {
  int n = tiny_find(t->g, id);
  if (n < 0) fail_msg("no node %s", id);
  return n;
}

/* The step map (composed = false) or composed access of input k of node id. */
static inline char *ibt_access(const ibt *t, const char *id, int k, bool composed) {
  const ib_info *f = ib_get(t->ib, ibt_node(t, id));
  const char *vn[IB_MAX_VARS];
  ib_var_names(f, vn);
  ut_str s;
  ut_str_init(&s);
  ib_access_print(&s, t->ib, composed ? &f->acc[k] : &f->in[k], vn);
  return ut_str_take(&s);
}

/* "i0:M i1:4/b r0:K" — axes with sizes (symbol, integer or expression). */
static inline char *ibt_axes(const ibt *t, const char *id) {
  const ib_info *f = ib_get(t->ib, ibt_node(t, id));
  static const char *const none[IB_MAX_VARS] = {0};
  ut_str s;
  ut_str_init(&s);
  for (int v = 0; v < f->nvars; v++) {
    const ib_axis *a = &f->axes[v];
    ut_str_printf(&s, "%s%s:", v ? " " : "", a->name);
    if (a->size.sym) ut_str_puts(&s, a->size.sym);
    else ib_aff_print(&s, &a->size.e, none);
    if (a->kind == IB_BROADCAST) ut_str_puts(&s, "/b");
  }
  return ut_str_take(&s);
}

/* Compare (and free) got with want; print a difference. */
static inline bool check_str(const char *what, char *got, const char *want) {
  bool ok = got && strcmp(got, want) == 0;
  if (!ok) print_message("%s:\n   got  %s\n   want %s\n", what, got ? got : "(null)", want);
  free(got);
  return ok;
}

static inline void expect_str(const char *what, char *got, const char *want) {
  if (!check_str(what, got, want)) fail_msg("%s differs", what);
}

#endif
