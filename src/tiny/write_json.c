/* write_json.c — print a graph as canonical (seed 001) JSON, one node per
 * line.  Needs: jansson.  Gives: tiny_write_json.  Load -> write -> load
 * yields the same graph. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harp/tiny.h"
#include "util/util.h"

static json_t *jdim(tiny_dim d) { return d.sym ? json_string(d.sym) : json_integer(d.n); }

static json_t *jdims(const tiny_dim *d, int n) {
  json_t *a = json_array();
  for (int i = 0; i < n; i++) json_array_append_new(a, jdim(d[i]));
  return a;
}

static json_t *jshape(const tiny_shape *s) { return jdims(s->d, s->rank); }

static json_t *jints(const int *v, int n) {
  json_t *a = json_array();
  for (int i = 0; i < n; i++) json_array_append_new(a, json_integer(v[i]));
  return a;
}

static json_t *jnum(double v) {
  if (isnan(v)) return json_string("nan");
  if (isinf(v)) return json_string(v > 0 ? "inf" : "-inf");
  if (v == floor(v) && fabs(v) < 9e15) return json_integer((json_int_t)v);
  return json_real(v);
}

static json_t *jargs(const tiny_node *n) {
  json_t *o = json_object();
  const tiny_args *a = &n->a;
  switch (tiny_op_argkind(n->op)) {
  case TA_NONE: json_decref(o); return NULL;
  case TA_INPUT:
    json_object_set_new(o, "tensor_id", json_string(a->input.tensor_id));
    json_object_set_new(o, "dtype", json_string(tiny_dtype_name(a->input.dtype)));
    json_object_set_new(o, "shape", jshape(&a->input.shape));
    if (a->input.storage) json_object_set_new(o, "storage", json_string(a->input.storage));
    break;
  case TA_CONST:
    json_object_set_new(o, "value", jnum(a->cnst.value));
    json_object_set_new(o, "dtype", json_string(tiny_dtype_name(a->cnst.dtype)));
    break;
  case TA_RESHAPE: json_object_set_new(o, "result_shape", jshape(&a->reshape.shape)); break;
  case TA_PERMUTE: json_object_set_new(o, "perm", jints(a->permute.perm, a->permute.n)); break;
  case TA_EXPAND:
    json_object_set_new(o, "result_shape", jshape(&a->expand.shape));
    if (a->expand.has_bd) json_object_set_new(o, "broadcast_dimensions", jints(a->expand.bd, a->expand.nbd));
    break;
  case TA_PAD: {
    json_t *p = json_array();
    for (int i = 0; i < a->pad.n; i++) {
      json_t *pair = json_array();
      json_array_append_new(pair, jdim(a->pad.lo[i]));
      json_array_append_new(pair, jdim(a->pad.hi[i]));
      json_array_append_new(p, pair);
    }
    json_object_set_new(o, "pad", p);
    json_object_set_new(o, "value", jnum(a->pad.value));
    break;
  }
  case TA_SHRINK:
    json_object_set_new(o, "lo", jdims(a->shrink.lo, a->shrink.n));
    json_object_set_new(o, "hi", jdims(a->shrink.hi, a->shrink.n));
    if (a->shrink.has_step) json_object_set_new(o, "step", jdims(a->shrink.step, a->shrink.n));
    break;
  case TA_FLIP: json_object_set_new(o, "axes", jints(a->flip.axes, a->flip.n)); break;
  case TA_VIEW: {
    json_object_set_new(o, "result_shape", jshape(&a->view.shape));
    json_t *m = json_array();
    for (int j = 0; j < a->view.n; j++) {
      char buf[1024];
      tiny_expr_print(a->view.map[j], buf, sizeof buf);
      json_array_append_new(m, json_string(buf));
    }
    json_object_set_new(o, "index_map", m);
    break;
  }
  case TA_POOL:
    json_object_set_new(o, "kernel", jdims(a->pool.kernel, a->pool.n));
    json_object_set_new(o, "stride", jdims(a->pool.stride, a->pool.n));
    json_object_set_new(o, "dilation", jdims(a->pool.dilation, a->pool.n));
    break;
  case TA_CAST: json_object_set_new(o, "to", json_string(tiny_dtype_name(a->cast.to))); break;
  case TA_REDUCE:
    json_object_set_new(o, "op", json_string(tiny_reduce_name(a->reduce.op)));
    json_object_set_new(o, "axes", jdims(a->reduce.axes, a->reduce.n));
    if (a->reduce.has_dtype) json_object_set_new(o, "dtype", json_string(tiny_dtype_name(a->reduce.dtype)));
    if (a->reduce.has_init) json_object_set_new(o, "init", jnum(a->reduce.init));
    break;
  case TA_GATHER: json_object_set_new(o, "axis", json_integer(a->gather.axis)); break;
  }
  return o;
}

/* g's derived symbols as "derived": {"NAME": "DEF", ...} (an exact one
 * {"def": "DEF", "exact": true}; nothing when it has none). */
static void write_dsyms(const tiny_graph *g, ut_str *s) {
  if (!g->ndsyms) return;
  ut_str_puts(s, ",\n  \"derived\": {");
  for (int k = 0; k < g->ndsyms; k++) {
    char def[1024];
    tiny_expr_print(g->dsyms[k].def, def, sizeof def);
    if (g->dsyms[k].exact) /* identifiers and expressions: no escapes */
      ut_str_printf(s, "%s\n    \"%s\": {\"def\": \"%s\", \"exact\": true}", k ? "," : "", g->dsyms[k].name, def);
    else
      ut_str_printf(s, "%s\n    \"%s\": \"%s\"", k ? "," : "", g->dsyms[k].name, def);
  }
  ut_str_puts(s, "\n  }");
}

char *tiny_write_json(const tiny_graph *g) {
  ut_str s;
  ut_str_init(&s);
  ut_str_puts(&s, "{\n  \"uops\": [\n");
  for (int i = 0; i < g->n; i++) {
    const tiny_node *n = &g->nodes[i];
    json_t *o = json_object();
    json_object_set_new(o, "id", json_string(n->id));
    json_object_set_new(o, "uop", json_string(tiny_op_name(n->op)));
    if (n->nsrc) {
      json_t *src = json_array();
      for (int k = 0; k < n->nsrc; k++)
        json_array_append_new(src, n->src[k].node >= 0 ? json_string(g->nodes[n->src[k].node].id) : jnum(n->src[k].imm));
      json_object_set_new(o, "src", src);
    }
    json_t *arg = jargs(n);
    if (arg) json_object_set_new(o, "arg", arg);
    if (n->tag) json_object_set_new(o, "tag", json_string(n->tag));
    char *line = json_dumps(o, JSON_PRESERVE_ORDER | JSON_COMPACT | JSON_REAL_PRECISION(17));
    json_decref(o);
    if (!line) {
      ut_str_free(&s);
      return NULL;
    }
    ut_str_puts(&s, "    ");
    ut_str_puts(&s, line);
    ut_str_puts(&s, i + 1 < g->n ? ",\n" : "\n");
    free(line);
  }
  ut_str_puts(&s, "  ]");
  if (g->explicit_outputs) {
    ut_str_puts(&s, ",\n  \"outputs\": [");
    for (int k = 0; k < g->noutputs; k++) {
      json_t *id = json_string(g->nodes[g->outputs[k]].id);
      char *t = json_dumps(id, JSON_ENCODE_ANY);
      json_decref(id);
      if (t) ut_str_printf(&s, "%s%s", k ? ", " : "", t);
      free(t);
    }
    ut_str_puts(&s, "]");
  }
  write_dsyms(g, &s);
  ut_str_puts(&s, "\n}\n");
  return ut_str_take(&s);
}
