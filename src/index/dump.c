/* dump.c — the IndexBook as text and JSON (seed 000 §12.2, docs/indexbook.md).
 * Needs: a built IndexBook; jansson.  Gives: ib_var_names, ib_access_print,
 * ib_dump_json. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "index/ib_int.h"
#include "util/util.h"

void ib_var_names(const ib_info *f, const char *names[IB_MAX_VARS]) {
  for (int j = 0; j < IB_MAX_VARS; j++) names[j] = j < f->nvars ? f->axes[j].name : "?";
}

static void print_cons(ut_str *s, const ib_cons *c, const char *const *vn) {
  ib_aff_print(s, &c->e, vn);
  ut_str_puts(s, c->eq ? " = 0" : " >= 0");
}

static void print_piece(ut_str *s, const ib_book *b, int src, const ib_piece *p, const char *const *vn) {
  if (p->fill) {
    ut_str_printf(s, "fill(%g)", p->value);
  } else {
    ut_str_printf(s, "%s[", b->g->nodes[src].id);
    for (int j = 0; j < p->nmap; j++) {
      if (j) ut_str_puts(s, ", ");
      ib_aff_print(s, &p->map[j], vn);
    }
    ut_str_puts(s, "]");
  }
  for (int k = 0; k < p->ncons; k++) {
    ut_str_puts(s, k ? ", " : " : ");
    print_cons(s, &p->cons[k], vn);
  }
}

void ib_access_print(ut_str *s, const ib_book *b, const ib_access *a, const char *const *vn) {
  if (a->non_affine) {
    ut_str_printf(s, "%s[data-dependent]", b->g->nodes[a->src].id);
    return;
  }
  if (!a->npieces) ut_str_puts(s, "(empty)");
  for (int i = 0; i < a->npieces; i++) {
    if (i) ut_str_puts(s, " | ");
    print_piece(s, b, a->src, &a->pieces[i], vn);
  }
}

/* ---- JSON --------------------------------------------------------------- */
typedef struct jctx {
  harp_error *e;
  bool oom;
} jctx;

static json_t *jstr_take(jctx *j, char *t) {
  json_t *v = t ? json_string(t) : NULL;
  free(t);
  if (!v) j->oom = true;
  return v;
}

static json_t *jaff(jctx *j, const ib_aff *a, const char *const *vn) {
  ut_str s;
  ut_str_init(&s);
  ib_aff_print(&s, a, vn);
  return jstr_take(j, ut_str_take(&s));
}

static void put(jctx *j, json_t *obj, const char *key, json_t *v) {
  if (!v || json_object_set_new(obj, key, v)) j->oom = true;
}

static void push(jctx *j, json_t *arr, json_t *v) {
  if (!v || json_array_append_new(arr, v)) j->oom = true;
}

static json_t *jsize(jctx *j, const ib_size *z) {
  static const char *const none[IB_MAX_VARS] = {0};
  if (z->sym) return json_string(z->sym);
  if (z->n >= 0) return json_integer(z->n);
  return jaff(j, &z->e, none);
}

static json_t *jaxis(jctx *j, const ib_axis *a) {
  json_t *o = json_object();
  if (!o) return NULL;
  put(j, o, "id", json_integer(a->id));
  put(j, o, "name", json_string(a->name));
  put(j, o, "size", jsize(j, &a->size));
  if (a->size.n >= 0 && a->size.sym) put(j, o, "value", json_integer(a->size.n));
  put(j, o, "kind", json_string(ib_axis_kind_name(a->kind)));
  return o;
}

static json_t *jcons(jctx *j, const ib_cons *c, const char *const *vn) {
  ut_str s;
  ut_str_init(&s);
  print_cons(&s, c, vn);
  return jstr_take(j, ut_str_take(&s));
}

static json_t *jpieces(jctx *j, const ib_book *b, const ib_access *a, const char *const *vn) {
  json_t *arr = json_array();
  if (!arr) return NULL;
  for (int i = 0; i < a->npieces; i++) {
    const ib_piece *p = &a->pieces[i];
    json_t *o = json_object(), *g = json_array();
    if (!o || !g) {
      json_decref(o);
      json_decref(g);
      j->oom = true;
      break;
    }
    for (int k = 0; k < p->ncons; k++) push(j, g, jcons(j, &p->cons[k], vn));
    put(j, o, "guard", g);
    if (p->fill) {
      put(j, o, "fill", isfinite(p->value) ? json_real(p->value) : json_string(p->value > 0 ? "inf" : p->value < 0 ? "-inf" : "nan"));
    } else {
      json_t *m = json_array();
      for (int k = 0; m && k < p->nmap; k++) push(j, m, jaff(j, &p->map[k], vn));
      put(j, o, "map", m);
    }
    push(j, arr, o);
  }
  return arr;
}

static json_t *jaccess(jctx *j, const ib_book *b, const ib_access *a, const char *const *vn, bool composed) {
  json_t *o = json_object();
  if (!o) return NULL;
  put(j, o, composed ? "base" : "value_id", json_string(b->g->nodes[a->src].id));
  if (composed) {
    json_t *via = json_array();
    for (int k = 0; via && k < a->nvia; k++) push(j, via, json_string(b->g->nodes[a->via[k]].id));
    put(j, o, "via", via);
  }
  if (a->non_affine) {
    put(j, o, "non_affine", json_true());
    return o;
  }
  bool plain = a->npieces == 1 && a->pieces[0].ncons == 0 && !a->pieces[0].fill;
  if (plain) {
    json_t *m = json_array();
    for (int k = 0; m && k < a->pieces[0].nmap; k++) push(j, m, jaff(j, &a->pieces[0].map[k], vn));
    put(j, o, "map", m);
  } else {
    put(j, o, "pieces", jpieces(j, b, a, vn));
  }
  return o;
}

static json_t *jdomain(jctx *j, const ib_book *b, const ib_info *f, const char *const *vn) {
  json_t *d = json_object(), *cons = json_array();
  if (!d || !cons) {
    json_decref(d);
    json_decref(cons);
    return NULL;
  }
  static const char *const none[IB_MAX_VARS] = {0};
  for (int v = 0; v < f->nvars; v++) { /* the box, one line per axis */
    ut_str s;
    ut_str_init(&s);
    ut_str_printf(&s, "0 <= %s < ", vn[v]);
    ib_aff_print(&s, &f->axes[v].size.e, none);
    push(j, cons, jstr_take(j, ut_str_take(&s)));
  }
  for (int i = 2 * f->nvars; i < f->ncons; i++) push(j, cons, jcons(j, &f->cons[i], vn));
  put(j, d, "constraints", cons);
  /* A piecewise step map (PAD) splits the domain: show where each piece is. */
  if (f->nin == 1 && f->in[0].npieces > 1) put(j, d, "pieces", jpieces(j, b, &f->in[0], vn));
  return d;
}

static json_t *jinfo(jctx *j, const ib_book *b, const ib_info *f) {
  const tiny_node *n = &b->g->nodes[f->node];
  const char *vn[IB_MAX_VARS];
  ib_var_names(f, vn);
  json_t *o = json_object(), *axes = json_array(), *ins = json_array(), *accs = json_array();
  if (!o || !axes || !ins || !accs) {
    json_decref(o), json_decref(axes), json_decref(ins), json_decref(accs);
    return NULL;
  }
  put(j, o, "op", json_string(tiny_op_name(n->op)));
  if (n->tag) put(j, o, "tag", json_string(n->tag));
  if (n->op == TINY_INPUT) put(j, o, "tensor_id", json_string(n->a.input.tensor_id));
  for (int k = 0; k < f->rank; k++) push(j, axes, jaxis(j, &f->axes[k]));
  put(j, o, "axes", axes);
  if (f->nred) {
    json_t *ids = json_array(), *red = json_array();
    for (int k = 0; ids && red && k < f->nred; k++) {
      push(j, ids, json_integer(f->red[k].id));
      push(j, red, jaxis(j, &f->red[k]));
    }
    put(j, o, "reduce_axes", ids);
    put(j, o, "reduced", red);
  }
  put(j, o, "domain", jdomain(j, b, f, vn));
  for (int k = 0; k < f->nin; k++) {
    push(j, ins, jaccess(j, b, &f->in[k], vn, false));
    push(j, accs, jaccess(j, b, &f->acc[k], vn, true));
  }
  put(j, o, "inputs", ins);
  put(j, o, "access", accs);
  if (f->non_scop) put(j, o, "non_scop", json_string(f->non_scop));
  return o;
}

static json_t *jsymbols(jctx *j, const ib_book *b) {
  json_t *o = json_object();
  if (!o) return NULL;
  for (int n = 0; n < b->n; n++) {
    const ib_info *f = &b->info[n];
    for (int k = 0; k < f->nvars; k++) {
      const ib_size *z = &f->axes[k].size;
      for (int s = 0; s < z->e.nsym; s++)
        if (!json_object_get(o, z->e.sym[s].name)) put(j, o, z->e.sym[s].name, json_null());
      if (z->sym && !json_object_get(o, z->sym)) {
        int64_t v;
        bool bound = b->syms && tiny_symtab_get(b->syms, z->sym, &v);
        put(j, o, z->sym, bound ? json_integer(v) : json_null());
      }
    }
  }
  return o;
}

harp_status ib_dump_json(harp_error *e, const ib_book *b, char **out) {
  jctx j = {e, false};
  *out = NULL;
  json_t *root = json_object(), *ib = json_object(), *vals = json_object();
  if (!root || !ib || !vals) {
    json_decref(root), json_decref(ib), json_decref(vals);
    return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  }
  put(&j, root, "indexbook", ib);
  put(&j, ib, "symbols", jsymbols(&j, b));
  put(&j, ib, "values", vals);
  for (int n = 0; n < b->n; n++) put(&j, vals, b->g->nodes[n].id, jinfo(&j, b, &b->info[n]));
  if (!j.oom) *out = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
  json_decref(root);
  if (!*out) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  return HARP_OK;
}
