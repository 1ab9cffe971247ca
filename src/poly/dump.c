/* dump.c — the Poly-View as JSON (seed 000 §12.3, docs/poly-view.md), with
 * isl's own strings for sets and maps.
 * Needs: a built poly_view; jansson.  Gives: poly_dump_json. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "poly/poly_int.h"
#include "util/util.h"

typedef struct jctx {
  bool oom;
} jctx;

static void put(jctx *j, json_t *o, const char *k, json_t *v) {
  if (!v || json_object_set_new(o, k, v)) j->oom = true;
}

static void push(jctx *j, json_t *a, json_t *v) {
  if (!v || json_array_append_new(a, v)) j->oom = true;
}

static json_t *take(jctx *j, char *s) {
  json_t *v = s ? json_string(s) : NULL;
  free(s);
  if (!v) j->oom = true;
  return v;
}

static json_t *jnum(double v) {
  if (isfinite(v)) return json_real(v);
  return json_string(v > 0 ? "inf" : v < 0 ? "-inf" : "nan");
}

/* A size: its symbol, else the integer, else the expression. */
static json_t *jsize(jctx *j, const ib_size *z) {
  static const char *const none[IB_MAX_VARS] = {0};
  if (z->sym) return json_string(z->sym);
  if (z->n >= 0) return json_integer(z->n);
  ut_str s;
  ut_str_init(&s);
  ib_aff_print(&s, &z->e, none);
  return take(j, ut_str_take(&s));
}

static json_t *jupper(jctx *j, const ib_size *z) {
  static const char *const none[IB_MAX_VARS] = {0};
  if (z->n >= 0) return json_integer(z->n - 1);
  ib_aff u = z->e;
  u.c -= 1;
  ut_str s;
  ut_str_init(&s);
  ib_aff_print(&s, &u, none);
  return take(j, ut_str_take(&s));
}

static const ib_axis *var_axis(const poly_view *pv, const poly_blk *b, int v) {
  return &ib_get(pv->ib, b->var_node)->axes[v];
}

static json_t *names(jctx *j, const poly_blk *b, const int *vars, int n) {
  json_t *a = json_array();
  for (int k = 0; a && k < n; k++) push(j, a, json_string(b->pub.var_names[vars[k]]));
  return a;
}

static json_t *jidx(jctx *j, const poly_idx *x, int n) {
  json_t *a = json_array();
  for (int k = 0; a && k < n; k++) push(j, a, json_string(x[k].text));
  return a;
}

static void offsets(jctx *j, const poly_blk *b, json_t *o, const char *side, const poly_idx *x, int n) {
  for (int d = 0; d < n; d++) {
    if (x[d].kind != POLY_IDX_WINDOW) continue;
    json_t *w = json_object();
    if (!w) {
      j->oom = true;
      return;
    }
    put(j, w, "operand", json_string(side));
    put(j, w, "dim", json_integer(d));
    put(j, w, "expr", json_string(x[d].text));
    put(j, w, "window", json_string(b->pub.var_names[x[d].win_var]));
    put(j, w, "stride", json_integer(x[d].stride));
    put(j, w, "dilation", json_integer(x[d].dilation));
    put(j, w, "offset", json_integer(x[d].offset));
    if (x[d].has_pad) {
      json_t *p = json_array();
      if (p) push(j, p, json_integer(x[d].pad_lo)), push(j, p, json_integer(x[d].pad_hi));
      put(j, w, "pad", p);
    }
    /* keyed by the output axis it slides along; a second operand sliding
     * along the same axis gets "<axis>.<operand>" */
    const char *key = b->pub.var_names[x[d].out_var];
    char buf[64];
    if (json_object_get(o, key)) {
      snprintf(buf, sizeof buf, "%s.%s", key, side);
      key = buf;
    }
    put(j, o, key, w);
  }
}

static json_t *jcontraction(jctx *j, const poly_view *pv, const poly_blk *b) {
  const poly_contraction *c = b->con;
  json_t *o = json_object();
  if (!o) return NULL;
  int out[POLY_MAX_VARS], red[POLY_MAX_VARS];
  for (int v = 0; v < c->nout; v++) out[v] = v;
  for (int v = 0; v < c->nred; v++) red[v] = c->nout + v;
  put(j, o, "pattern", json_string(poly_pattern_name(c->pattern)));
  put(j, o, "lhs", json_string(b->pub.access[0].name));
  put(j, o, "rhs", json_string(b->pub.access[1].name));
  put(j, o, "lhs_idx", jidx(j, c->lhs_idx, c->lhs_rank));
  put(j, o, "rhs_idx", jidx(j, c->rhs_idx, c->rhs_rank));
  put(j, o, "out_idx", names(j, b, out, c->nout));
  put(j, o, "reduce_idx", names(j, b, red, c->nred));
  put(j, o, "batch_idx", names(j, b, c->batch, c->nbatch));
  put(j, o, "m_idx", names(j, b, c->m, c->nm));
  put(j, o, "n_idx", names(j, b, c->n, c->nn));
  json_t *sizes = json_object();
  for (int v = 0; sizes && v < b->pub.nvars; v++) put(j, sizes, b->pub.var_names[v], jsize(j, &var_axis(pv, b, v)->size));
  put(j, o, "axis_sizes", sizes);
  json_t *off = json_object();
  if (off) {
    offsets(j, b, off, "lhs", c->lhs_idx, c->lhs_rank);
    offsets(j, b, off, "rhs", c->rhs_idx, c->rhs_rank);
  }
  put(j, o, "affine_offsets", off);
  if (c->lhs_fill || c->rhs_fill) {
    json_t *pad = json_object();
    if (pad && c->lhs_fill) put(j, pad, "lhs", jnum(c->lhs_fill_value));
    if (pad && c->rhs_fill) put(j, pad, "rhs", jnum(c->rhs_fill_value));
    put(j, o, "padding_value", pad);
  }
  json_t *nodes = json_object();
  if (nodes) {
    put(j, nodes, "mul", json_string(pv->g->nodes[c->mul_node].id));
    put(j, nodes, "reduce", json_string(pv->g->nodes[c->reduce_node].id));
  }
  put(j, o, "nodes", nodes);
  return o;
}

static json_t *jaccess(jctx *j, const poly_view *pv, int bi, int k) {
  const poly_blk *b = &pv->blocks[bi];
  const poly_access_info *a = &b->pub.access[k];
  json_t *o = json_object();
  if (!o) return NULL;
  put(j, o, "tensor", json_string(a->name));
  put(j, o, "node", json_string(pv->g->nodes[a->tensor].id));
  put(j, o, "kind", json_string(a->write ? "write" : "read"));
  put(j, o, "map", take(j, poly_access_str(pv, bi, k)));
  if (!a->write) {
    json_t *via = json_array();
    for (int v = 0; via && v < a->nvia; v++) push(j, via, json_string(pv->g->nodes[a->via[v]].id));
    put(j, o, "via", via);
    put(j, o, "pieces", json_integer(a->npieces + a->nfill));
  }
  if (a->nstage) {
    json_t *st = json_array();
    for (int q = 0; st && q < a->nstage; q++) {
      json_t *s = json_object();
      if (s) {
        put(j, s, "node", json_string(pv->g->nodes[a->stage[q]].id));
        put(j, s, "map", take(j, isl_map_to_str(b->stage[k][q].map)));
      }
      push(j, st, s);
    }
    put(j, o, "stages", st);
  }
  if (b->acc[k].nfill) {
    json_t *fills = json_array();
    for (int q = 0; fills && q < b->acc[k].nfill; q++) {
      json_t *f = json_object();
      double v = 0;
      char *s = poly_access_fill_str(pv, bi, k, q, &v);
      if (f) put(j, f, "value", jnum(v)), put(j, f, "where", take(j, s));
      else free(s);
      push(j, fills, f);
    }
    put(j, o, "fill", fills);
  }
  return o;
}

static json_t *jblock(jctx *j, const poly_view *pv, int bi) {
  const poly_blk *b = &pv->blocks[bi];
  const tiny_node *n = &pv->g->nodes[b->pub.node];
  json_t *o = json_object(), *dom = json_object(), *nodes = json_array(), *acc = json_array();
  json_t *par = json_array(), *red = json_array(), *attrs = NULL;
  if (!o || !dom || !nodes || !acc || !par || !red) {
    json_decref(o), json_decref(dom), json_decref(nodes), json_decref(acc), json_decref(par), json_decref(red);
    return NULL;
  }
  put(j, o, "name", json_string(b->pub.name));
  put(j, o, "isl_name", json_string(b->pub.isl_name));
  put(j, o, "node", json_string(n->id));
  put(j, o, "kind", json_string(poly_kind_name(b->pub.kind)));
  for (int k = 0; k < b->pub.nnodes; k++) push(j, nodes, json_string(pv->g->nodes[b->pub.nodes[k]].id));
  put(j, o, "nodes", nodes);
  for (int v = 0; v < b->pub.nvars; v++) {
    json_t *lu = json_array();
    if (lu) push(j, lu, json_integer(0)), push(j, lu, jupper(j, &var_axis(pv, b, v)->size));
    put(j, dom, b->pub.var_names[v], lu);
    push(j, v < b->pub.nout ? par : red, json_string(b->pub.var_names[v]));
  }
  put(j, o, "domain", dom);
  put(j, o, "domain_isl", take(j, poly_domain_str(pv, bi)));
  put(j, o, "parallel_axes", par);
  put(j, o, "reduction_axes", red);
  for (int k = 0; k < b->pub.naccess; k++) push(j, acc, jaccess(j, pv, bi, k));
  put(j, o, "accesses", acc);
  if (b->pub.kind == POLY_CONTRACTION) {
    attrs = jcontraction(j, pv, b);
  } else {
    attrs = json_object();
    if (attrs) put(j, attrs, "op", json_string(tiny_op_name(n->op)));
    if (attrs && n->op == TINY_REDUCE) put(j, attrs, "reduce", json_string(tiny_reduce_name(n->a.reduce.op)));
  }
  put(j, o, "attrs", attrs);
  return o;
}

static json_t *jedge(jctx *j, const poly_view *pv, int k) {
  const poly_edge_int *x = &pv->edges[k];
  json_t *o = json_object(), *deps = json_object(), *t = json_array(), *anti = json_array(), *out = json_array();
  if (!o || !deps || !t || !anti || !out) {
    json_decref(o), json_decref(deps), json_decref(t), json_decref(anti), json_decref(out);
    return NULL;
  }
  put(j, o, "from", json_string(pv->blocks[x->pub.from].pub.name));
  put(j, o, "to", json_string(pv->blocks[x->pub.to].pub.name));
  put(j, o, "tensor", json_string(pv->g->nodes[x->pub.tensor].id));
  push(j, t, take(j, poly_edge_str(pv, k)));
  if (x->pub.from == x->pub.to) { /* the accumulator of a reduction */
    push(j, anti, take(j, poly_edge_str(pv, k)));
    push(j, out, take(j, poly_edge_str(pv, k)));
  }
  put(j, deps, "true", t);
  put(j, deps, "anti", anti);
  put(j, deps, "output", out);
  put(j, o, "deps", deps);
  return o;
}

harp_status poly_dump_json(harp_error *e, const poly_view *pv, char **out) {
  jctx j = {false};
  *out = NULL;
  json_t *root = json_object(), *v = json_object(), *blocks = json_array(), *edges = json_array(),
         *ns = json_array(), *params = json_array();
  if (!root || !v || !blocks || !edges || !ns || !params) {
    json_decref(root), json_decref(v), json_decref(blocks), json_decref(edges), json_decref(ns), json_decref(params);
    return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  }
  put(&j, root, "poly_view", v);
  /* every unbound symbol any block uses */
  for (int b = 0; b < pv->nblocks; b++)
    for (int k = 0; k < pv->blocks[b].nparams; k++) {
      bool seen = false;
      for (size_t q = 0; q < json_array_size(params); q++)
        seen |= strcmp(json_string_value(json_array_get(params, q)), pv->blocks[b].params[k]) == 0;
      if (!seen) push(&j, params, json_string(pv->blocks[b].params[k]));
    }
  put(&j, v, "params", params);
  for (int b = 0; b < pv->nblocks; b++) push(&j, blocks, jblock(&j, pv, b));
  put(&j, v, "blocks", blocks);
  for (int k = 0; k < pv->nedges; k++) push(&j, edges, jedge(&j, pv, k));
  put(&j, v, "edges", edges);
  for (int k = 0; k < pv->nnon_scop; k++) {
    int n = pv->non_scop[k];
    json_t *o = json_object();
    if (o) {
      put(&j, o, "node", json_string(pv->g->nodes[n].id));
      put(&j, o, "op", json_string(tiny_op_name(pv->g->nodes[n].op)));
      put(&j, o, "reason", json_string(ib_get(pv->ib, n)->non_scop ? ib_get(pv->ib, n)->non_scop : "non-affine"));
      json_t *ins = json_array(); /* the tensors it reads: they must be materialized */
      for (int q = 0; ins && q < ib_get(pv->ib, n)->nin; q++)
        push(&j, ins, json_string(pv->g->nodes[ib_get(pv->ib, n)->acc[q].src].id));
      put(&j, o, "reads", ins);
    }
    push(&j, ns, o);
  }
  put(&j, v, "non_scop", ns);
  if (!j.oom) *out = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
  json_decref(root);
  if (!*out) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  return HARP_OK;
}
