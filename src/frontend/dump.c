/* dump.c — the frontend's dumps: JSON for `--dump frontend`, Graphviz DOT
 * for `harp viz` (the frontend program and a Tiny graph).
 * Needs: the graph model, jansson.  Gives: hg_frontend_json,
 * hg_frontend_dot, hg_tiny_dot.
 *
 * JSON shape (stable, keys sorted):
 *   {"entry": "main", "graphs": [{"name", "shape_vars": [{"name", "default"?}],
 *     "params": [{"name", "dtype", "shape"}], "outputs": [{"name", "dtype",
 *     "shape", "value"}], "nodes": [{"id", "name"?, "op", "inputs", "dtype",
 *     "shape", "attrs"?, "line"?}]}]}
 * A node id is its value number; a shape entry is an integer or a string
 * (a shape variable or an expression of them). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "fe_int.h"

static json_t *dim_json(const fe_dim *d) {
  int64_t v;
  return fe_dim_is_int(d, &v) ? json_integer(v) : json_string(d->text);
}

static json_t *shape_json(const fe_shape *s) {
  json_t *a = json_array();
  for (int i = 0; a && i < s->rank; i++) json_array_append_new(a, dim_json(s->d[i]));
  return a;
}

static json_t *ints_json(const int64_t *v, int n) {
  json_t *a = json_array();
  for (int i = 0; a && i < n; i++) json_array_append_new(a, json_integer(v[i]));
  return a;
}

static json_t *iints_json(const int *v, int n) {
  json_t *a = json_array();
  for (int i = 0; a && i < n; i++) json_array_append_new(a, json_integer(v[i]));
  return a;
}

static json_t *num_json(double v) {
  if (isfinite(v)) return json_real(v);
  return json_string(isnan(v) ? "nan" : v < 0 ? "-inf" : "inf");
}

static json_t *attrs_json(const fe_node *n) {
  json_t *a = json_object();
  if (!a) return NULL;
  switch (n->op) {
  case HG_OP_CONST:
    json_object_set_new(a, "value", num_json(n->a.cnst.v));
    if (n->weak) json_object_set_new(a, "weak", json_true());
    break;
  case HG_OP_SUM: case HG_OP_RMAX: case HG_OP_RMIN: case HG_OP_MEAN:
    json_object_set_new(a, "axes", iints_json(n->a.reduce.axes, n->a.reduce.n));
    json_object_set_new(a, "keepdim", json_boolean(n->a.reduce.keepdim));
    break;
  case HG_OP_CONV2D:
    json_object_set_new(a, "stride", ints_json(n->a.conv.stride, 2));
    json_object_set_new(a, "pad", ints_json(n->a.conv.pad, 4));
    json_object_set_new(a, "dilation", ints_json(n->a.conv.dilation, 2));
    json_object_set_new(a, "groups", json_integer(n->a.conv.groups));
    json_object_set_new(a, "layout", json_string("NCHW"));
    break;
  case HG_OP_ATTENTION:
    json_object_set_new(a, "heads", json_integer(n->a.attn.heads));
    json_object_set_new(a, "causal", json_boolean(n->a.attn.causal));
    if (n->a.attn.scale != 0) json_object_set_new(a, "scale", num_json(n->a.attn.scale));
    break;
  case HG_OP_LAYERNORM:
    json_object_set_new(a, "axis", json_integer(n->a.ln.axis));
    json_object_set_new(a, "eps", num_json(n->a.ln.eps));
    break;
  case HG_OP_SOFTMAX: case HG_OP_CONCAT: case HG_OP_GATHER:
    json_object_set_new(a, "axis", json_integer(n->a.axis.axis));
    break;
  case HG_OP_MAX_POOL2D: case HG_OP_AVG_POOL2D:
    json_object_set_new(a, "kernel", ints_json(n->a.pool.kernel, 2));
    json_object_set_new(a, "stride", ints_json(n->a.pool.stride, 2));
    break;
  case HG_OP_RESHAPE: case HG_OP_EXPAND: json_object_set_new(a, "shape", shape_json(&n->a.shape.to)); break;
  case HG_OP_PERMUTE: json_object_set_new(a, "perm", iints_json(n->a.perm.v, n->a.perm.n)); break;
  case HG_OP_FLIP: json_object_set_new(a, "axes", iints_json(n->a.perm.v, n->a.perm.n)); break;
  case HG_OP_PAD: {
    json_t *p = json_array();
    for (int i = 0; p && i < n->a.pad.n; i++) {
      int64_t lh[2] = {n->a.pad.lo[i], n->a.pad.hi[i]};
      json_array_append_new(p, ints_json(lh, 2));
    }
    json_object_set_new(a, "pad", p);
    json_object_set_new(a, "value", num_json(n->a.pad.value));
    break;
  }
  case HG_OP_SLICE: {
    json_t *st = json_array(), *en = json_array();
    for (int i = 0; st && en && i < n->a.slice.n; i++) {
      json_array_append_new(st, dim_json(n->a.slice.start[i]));
      json_array_append_new(en, dim_json(n->a.slice.end[i]));
    }
    json_object_set_new(a, "starts", st);
    json_object_set_new(a, "ends", en);
    json_object_set_new(a, "steps", ints_json(n->a.slice.step, n->a.slice.n));
    break;
  }
  case HG_OP_CAST: json_object_set_new(a, "to", json_string(tiny_dtype_name(n->a.cast.to))); break;
  case HG_OP_CALL:
    json_object_set_new(a, "graph", json_string(n->a.call.callee->name));
    json_object_set_new(a, "outputs", json_integer(n->a.call.nout));
    break;
  case HG_OP_PROJ: json_object_set_new(a, "index", json_integer(n->a.proj.k)); break;
  default: break;
  }
  if (json_object_size(a) == 0) {
    json_decref(a);
    return NULL;
  }
  return a;
}

static json_t *graph_json(const hg_graph *g) {
  json_t *o = json_object(), *sv = json_array(), *ps = json_array(), *os = json_array(), *ns = json_array();
  if (!o || !sv || !ps || !os || !ns) {
    json_decref(o), json_decref(sv), json_decref(ps), json_decref(os), json_decref(ns);
    return NULL;
  }
  json_object_set_new(o, "name", json_string(g->name));
  for (int i = 0; i < g->nsv; i++) {
    json_t *v = json_object();
    json_object_set_new(v, "name", json_string(g->sv[i].name));
    if (g->sv[i].dflt >= 0) json_object_set_new(v, "default", json_integer(g->sv[i].dflt));
    json_array_append_new(sv, v);
  }
  for (int i = 0; i < g->nparams; i++) {
    const fe_node *n = fe_node_of(g, g->params[i]);
    json_t *v = json_object();
    json_object_set_new(v, "name", json_string(n->name));
    json_object_set_new(v, "dtype", json_string(tiny_dtype_name(n->dtype)));
    json_object_set_new(v, "shape", shape_json(&n->shape));
    json_object_set_new(v, "value", json_integer(g->params[i]));
    json_array_append_new(ps, v);
  }
  for (int k = 0; k < g->nout; k++) {
    json_t *v = json_object();
    json_object_set_new(v, "name", json_string(g->outs[k].name));
    json_object_set_new(v, "dtype", json_string(tiny_dtype_name(g->outs[k].dtype)));
    json_object_set_new(v, "shape", shape_json(&g->outs[k].shape));
    json_object_set_new(v, "value", g->outs[k].v > 0 ? json_integer(g->outs[k].v) : json_null());
    json_array_append_new(os, v);
  }
  for (int v = 1; v <= g->n; v++) {
    const fe_node *n = fe_node_of(g, v);
    json_t *j = json_object(), *in = json_array();
    json_object_set_new(j, "id", json_integer(v));
    if (n->name) json_object_set_new(j, "name", json_string(n->name));
    json_object_set_new(j, "op", json_string(n->op == HG_OP_RMAX ? "reduce_max" : n->op == HG_OP_RMIN ? "reduce_min" : hg_op_name(n->op)));
    for (int i = 0; in && i < n->nin; i++) json_array_append_new(in, n->in[i] > 0 ? json_integer(n->in[i]) : json_null());
    json_object_set_new(j, "inputs", in);
    if (n->op != HG_OP_CALL) {
      json_object_set_new(j, "dtype", json_string(n->weak ? "literal" : tiny_dtype_name(n->dtype)));
      json_object_set_new(j, "shape", shape_json(&n->shape));
    }
    json_t *a = attrs_json(n);
    if (a) json_object_set_new(j, "attrs", a);
    if (n->line > 0) json_object_set_new(j, "line", json_integer(n->line));
    json_array_append_new(ns, j);
  }
  json_object_set_new(o, "shape_vars", sv);
  json_object_set_new(o, "params", ps);
  json_object_set_new(o, "outputs", os);
  json_object_set_new(o, "nodes", ns);
  return o;
}

char *hg_frontend_json(const hg_program *p) {
  json_t *root = json_object(), *gs = json_array();
  if (!root || !gs) {
    json_decref(root);
    json_decref(gs);
    return NULL;
  }
  json_object_set_new(root, "entry", json_string("main"));
  for (int i = 0; i < p->n; i++) {
    json_t *g = graph_json(p->graphs[i]);
    if (!g) {
      json_decref(root);
      json_decref(gs);
      return NULL;
    }
    json_array_append_new(gs, g);
  }
  json_object_set_new(root, "graphs", gs);
  char *s = json_dumps(root, JSON_INDENT(1) | JSON_SORT_KEYS);
  json_decref(root);
  return s;
}

/* ---- DOT ------------------------------------------------------------------------ */
/* A DOT string body: quotes, backslashes and control characters escaped. */
static void dot_str(ut_str *s, const char *t) {
  for (; *t; t++) {
    unsigned char c = (unsigned char)*t;
    if (c == '"' || c == '\\') ut_str_putc(s, '\\'), ut_str_putc(s, (char)c);
    else if (c == '\n') ut_str_puts(s, "\\n");
    else if (c < 32 || c == 127) ut_str_putc(s, '?');
    else ut_str_putc(s, (char)c);
  }
}

static const char *fill_of(hg_op_class c) {
  switch (c) {
  case HG_C_LEAF: return "#e8f0fe";
  case HG_C_NN: return "#fde2c8";
  case HG_C_REDUCE: return "#fff3b0";
  case HG_C_MOVE: return "#e6e6e6";
  case HG_C_CALL: return "#d7f5dd";
  default: return "#ffffff";
  }
}

char *hg_frontend_dot(const hg_program *p) {
  ut_str s;
  ut_str_init(&s);
  ut_str_puts(&s, "digraph harp_frontend {\n  rankdir=TB;\n  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", fontsize=10];\n");
  for (int gi = 0; gi < p->n; gi++) {
    const hg_graph *g = p->graphs[gi];
    ut_str_printf(&s, "  subgraph cluster_%d {\n    label=\"", gi);
    dot_str(&s, g->name);
    ut_str_puts(&s, "\";\n");
    for (int v = 1; v <= g->n; v++) {
      const fe_node *n = fe_node_of(g, v);
      char sh[256];
      fe_shape_text(&n->shape, sh, sizeof sh);
      ut_str_printf(&s, "    g%d_n%d [fillcolor=\"%s\", label=\"", gi, v, fill_of(hg_op_class_of(n->op)));
      if (n->name) {
        dot_str(&s, n->name);
        ut_str_puts(&s, "\\n");
      }
      if (n->op == HG_OP_CALL) {
        ut_str_puts(&s, "call ");
        dot_str(&s, n->a.call.callee->name);
      } else if (n->op == HG_OP_CONST) {
        ut_str_printf(&s, "%g", n->a.cnst.v);
      } else {
        dot_str(&s, n->op == HG_OP_RMAX ? "reduce_max" : n->op == HG_OP_RMIN ? "reduce_min" : hg_op_name(n->op));
      }
      if (n->op != HG_OP_CALL && !n->weak) {
        ut_str_printf(&s, "\\n%s", tiny_dtype_name(n->dtype));
        dot_str(&s, sh);
      }
      ut_str_puts(&s, "\"];\n");
      for (int i = 0; i < n->nin; i++)
        if (n->in[i] > 0) ut_str_printf(&s, "    g%d_n%d -> g%d_n%d;\n", gi, n->in[i], gi, v);
    }
    for (int k = 0; k < g->nout; k++) {
      ut_str_printf(&s, "    g%d_out%d [shape=oval, fillcolor=\"#c8e6c9\", label=\"", gi, k);
      dot_str(&s, g->outs[k].name);
      ut_str_puts(&s, "\"];\n");
      if (g->outs[k].v > 0) ut_str_printf(&s, "    g%d_n%d -> g%d_out%d;\n", gi, g->outs[k].v, gi, k);
    }
    ut_str_puts(&s, "  }\n");
  }
  ut_str_puts(&s, "}\n");
  if (s.oom) {
    ut_str_free(&s);
    return NULL;
  }
  return ut_str_take(&s);
}

char *hg_tiny_dot(const tiny_graph *g) {
  ut_str s;
  ut_str_init(&s);
  ut_str_puts(&s, "digraph harp_tiny {\n  rankdir=TB;\n  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", fontsize=10];\n");
  for (int i = 0; i < g->n; i++) {
    const tiny_node *n = &g->nodes[i];
    tiny_class c = tiny_op_class(n->op);
    const char *fill = c == TC_LEAF ? "#e8f0fe" : c == TC_MOVE ? "#e6e6e6" : c == TC_REDUCE ? "#fff3b0" : "#ffffff";
    char sh[256];
    tiny_shape_format(&n->shape, sh, sizeof sh);
    ut_str_printf(&s, "  n%d [fillcolor=\"%s\", label=\"", i, fill);
    dot_str(&s, n->id);
    ut_str_printf(&s, "\\n%s", tiny_op_name(n->op));
    if (n->op == TINY_REDUCE) ut_str_printf(&s, " %s", tiny_reduce_name(n->a.reduce.op));
    ut_str_printf(&s, "\\n%s", tiny_dtype_name(n->dtype));
    dot_str(&s, sh);
    ut_str_puts(&s, "\"];\n");
    for (int k = 0; k < n->nsrc; k++) {
      if (n->src[k].node >= 0) {
        ut_str_printf(&s, "  n%d -> n%d;\n", n->src[k].node, i);
      } else {
        ut_str_printf(&s, "  imm%d_%d [shape=plaintext, style=\"\", label=\"%g\"];\n  imm%d_%d -> n%d;\n", i, k,
                      n->src[k].imm, i, k, i);
      }
    }
  }
  for (int k = 0; k < g->noutputs; k++) {
    ut_str_printf(&s, "  out%d [shape=oval, style=filled, fillcolor=\"#c8e6c9\", label=\"", k);
    dot_str(&s, tiny_output_name(g, g->outputs[k]));
    ut_str_printf(&s, "\"];\n  n%d -> out%d;\n", g->outputs[k], k);
  }
  ut_str_puts(&s, "}\n");
  if (s.oom) {
    ut_str_free(&s);
    return NULL;
  }
  return ut_str_take(&s);
}
