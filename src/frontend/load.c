/* load.c — the DSL loader: text -> program, with every error located.
 * Needs: lex.c, parse.c, sema.c, hg_program_check (inline.c).
 * Gives: hg_harp_load_text(_diags), hg_harp_load_file, and the located
 * error of a node (fe_fail_node) used by later passes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fe_dsl.h"

#define MAX_SOURCE_BYTES ((size_t)64 << 20)

/* One error as the CLI prints it: "file:l:c: error[Name]: msg\nline\ncaret". */
static void append_diag(ut_str *s, const char *file, const char *src, const hg_diag *d) {
  harp_error tmp;
  harp_error_clear(&tmp);
  tmp.code = d->code;
  snprintf(tmp.file, sizeof tmp.file, "%s", file);
  tmp.line = d->line;
  tmp.col = d->col;
  snprintf(tmp.msg, sizeof tmp.msg, "%s", d->msg);
  if (d->line > 0) ut_error_set_snippet(&tmp, src, d->line, d->col);
  char buf[1400];
  harp_error_format(&tmp, buf, sizeof buf);
  ut_str_puts(s, buf);
}

/* e gets the first diagnostic; its snippet, then the others in full. */
static harp_status report(harp_error *e, const char *file, const char *src, const hg_diags *ds, int total) {
  const hg_diag *d0 = &ds->d[0];
  ut_fail_at(e, d0->code, file, d0->line, d0->col, "%s", d0->msg);
  if (e->code != d0->code) return e->code; /* e held an earlier error */
  if (d0->line > 0) ut_error_set_snippet(e, src, d0->line, d0->col);
  if (total <= 1) return e->code;
  ut_str s;
  ut_str_init(&s);
  ut_str_puts(&s, e->snippet);
  size_t keep = sizeof e->snippet - 40;
  int shown = 1;
  for (int i = 1; i < ds->n; i++) {
    size_t before = s.len;
    ut_str_puts(&s, "\n");
    append_diag(&s, file, src, &ds->d[i]);
    if (s.oom || s.len > keep) {
      if (!s.oom) s.len = before, s.buf[before] = 0;
      break;
    }
    shown++;
  }
  if (shown < total && !s.oom) ut_str_printf(&s, "\n(%d more error%s)", total - shown, total - shown == 1 ? "" : "s");
  if (!s.oom && s.buf) snprintf(e->snippet, sizeof e->snippet, "%s", s.buf);
  ut_str_free(&s);
  return e->code;
}

harp_status hg_harp_load_text_diags(harp_error *e, const char *text, size_t len, const char *filename, hg_program **out,
                                  hg_diags *diags) {
  *out = NULL;
  const char *file = filename ? filename : "<input>";
  hg_diags local;
  hg_diags *ds = diags ? diags : &local;
  memset(ds, 0, sizeof *ds);
  fe_diagctx dc = {ds, 0};
  if (len > MAX_SOURCE_BYTES) return ut_fail_at(e, HARP_E_LIMIT, file, 0, 0, "the program is larger than 64 MiB");
  hg_program *p = hg_program_new();
  ut_arena *tree = ut_arena_new();
  char *src = p ? ut_arena_strndup(p->arena, text, len) : NULL; /* NUL-terminated copy for snippets */
  fe_tok *toks = NULL;
  int ntok = 0;
  fe_ast ast;
  if (!p || !tree || !src) goto oom;
  p->src = src;
  p->filename = ut_arena_strdup(p->arena, file);
  if (!p->filename || !(toks = fe_lex(src, len, &dc, &ntok)) || !fe_parse(toks, ntok, tree, &dc, &ast)) goto oom;
  if (dc.count == 0) fe_sema(&ast, p, &dc);
  if (dc.count == 0) {
    harp_error ce;
    harp_error_clear(&ce);
    if (hg_program_check(&ce, p)) {
      if (ce.line > 0)
        fe_diag(&dc, ce.code, ce.line, ce.col, "%s", ce.msg);
      else
        fe_diag(&dc, ce.code, 1, 1, "%s", ce.msg);
    }
  }
  free(toks);
  ut_arena_free(tree);
  if (dc.count) {
    harp_status s = report(e, file, src, ds, dc.count);
    hg_program_free(p);
    return s;
  }
  *out = p;
  return HARP_OK;
oom:
  free(toks);
  ut_arena_free(tree);
  hg_program_free(p);
  return ut_fail_at(e, HARP_E_NO_MEMORY, file, 0, 0, "out of memory");
}

harp_status hg_harp_load_text(harp_error *e, const char *text, size_t len, const char *filename, hg_program **out) {
  return hg_harp_load_text_diags(e, text, len, filename, out, NULL);
}

harp_status hg_harp_load_file(harp_error *e, const char *path, hg_program **out) {
  char *text = NULL;
  size_t len = 0;
  *out = NULL;
  if (ut_read_file(e, path, MAX_SOURCE_BYTES, &text, &len)) return e->code;
  harp_status s = hg_harp_load_text(e, text, len, path, out);
  free(text);
  return s;
}

harp_status fe_fail_node(harp_error *e, const hg_program *p, const fe_node *n, harp_status code, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (e->code) return e->code;
  if (n && n->line > 0 && p && p->filename) {
    ut_fail_at(e, code, p->filename, n->line, n->col, "%s", msg);
    if (p->src) ut_error_set_snippet(e, p->src, n->line, n->col);
  } else {
    ut_fail(e, code, NULL, "%s", msg);
  }
  if (n && n->name) snprintf(e->node, sizeof e->node, "%s", n->name);
  return e->code;
}
