/* onnx_values.c — what the ONNX importer's node mappers (onnx_ops*.c and
 * the rest) work with: located errors (ox_fail: the file, the node and its
 * op), identifiers made from ONNX names (sanitized, unique) and the table of
 * names the model keeps, the value table of a graph scope (defined values,
 * their readers, constants and weights, the builder values they become) and
 * a node's attributes.
 * Needs: the frontend builder, onnx_int.h.  Gives: ox_fail, ox_check,
 * ox_printable, ox_ident, ox_add_name, onnx_ident, ox_new_val, ox_find,
 * ox_uses, ox_count_use, ox_in, ox_value, ox_const_value, ox_tensor,
 * ox_def*, ox_attr*. */
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_int.h"

/* A name as it may appear in a message: printable ASCII, shortened. */
void ox_printable(const char *s, char *out, int cap) {
  int k = 0;
  for (; s && *s && k + 4 < cap; s++) out[k++] = (*s >= 32 && *s < 127 && *s != '"') ? *s : '?';
  if (s && *s) out[k++] = '.', out[k++] = '.', out[k++] = '.';
  out[k] = 0;
}

harp_status ox_fail(ox_ctx *c, harp_status code, const char *fmt, ...) {
  if (c->e->code) return c->e->code;
  char msg[768], nm[96] = "", op[64] = "";
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  const char *in = c->where ? c->where : "", *sep = c->where ? ": " : ""; /* a subgraph's node: the nodes around it first */
  if (!c->node) return ut_fail_at(c->e, code, c->file, 0, 0, "%s%s%s", in, sep, msg);
  ox_printable(c->node->name, nm, sizeof nm);
  ox_printable(c->node->op_type, op, sizeof op);
  return ut_fail_at(c->e, code, c->file, 0, 0, "%s%snode %d \"%s\" (%s): %s", in, sep, c->node_index, nm, op, msg);
}

harp_status ox_check(ox_ctx *c, hg_val v) {
  const harp_error *ge = hg_graph_error(c->g);
  if (v > 0 && !ge->code) return HARP_OK;
  if (!ge->code) return ox_fail(c, HARP_E_INTERNAL, "the builder failed without an error");
  return ox_fail(c, ge->code, "%s", ge->msg);
}

/* ---- names -------------------------------------------------------------------- */
void ox_sanitize(const char *onnx_name, char base[128]) {
  int k = 0;
  const char *s = onnx_name ? onnx_name : "";
  if (!*s || (*s >= '0' && *s <= '9')) base[k++] = '_';
  for (; *s && k < 100; s++) {
    char ch = *s;
    base[k++] = ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_') ? ch : '_';
  }
  base[k] = 0;
}

void onnx_ident(const char *onnx_name, char out[128]) { ox_sanitize(onnx_name, out); }

const char *ox_ident(ox_ctx *c, const char *onnx_name) {
  char base[128];
  ox_sanitize(onnx_name, base);
  const char *id = ut_arena_strdup(c->A, base);
  for (int n = 2; id && ut_strmap_find(&c->ids, id); n++) id = ut_arena_printf(c->A, "%s_%d", base, n);
  if (!id || !ut_strmap_put(&c->ids, id, 1)) {
    ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
    return NULL;
  }
  return id;
}

harp_status ox_add_name(ox_ctx *c, const char *onnx, const char *id) {
  onnx_model *m = c->m;
  if (m->nnames == c->ncap) {
    int cap = c->ncap ? 2 * c->ncap : 16;
    onnx_name_entry *p = ut_xrealloc(m->names, sizeof *p * (size_t)cap);
    if (!p) return ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
    m->names = p, c->ncap = cap;
  }
  char *a = ut_xmalloc(strlen(onnx) + 1), *b = ut_xmalloc(strlen(id) + 1);
  if (!a || !b) {
    free(a), free(b);
    return ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
  }
  strcpy(a, onnx), strcpy(b, id);
  m->names[m->nnames++] = (onnx_name_entry){a, b};
  return HARP_OK;
}

/* ---- the value table --------------------------------------------------------------- */
ox_val *ox_new_val(ox_ctx *c, const char *name) {
  if (!name || !*name) {
    ox_fail(c, HARP_E_INVALID_ARG, "a value has an empty name");
    return NULL;
  }
  int *had = ut_strmap_find(&c->byname, name);
  if (had && c->vals[*had].vacant) { /* an abandoned fold's: defined again */
    ox_val *x = &c->vals[*had];
    ut_tensor_free(&x->t);
    memset(x, 0, sizeof *x);
    x->name = name;
    return x;
  }
  if (had) {
    char nm[96];
    ox_printable(name, nm, sizeof nm);
    ox_fail(c, HARP_E_DUPLICATE_ID, "value \"%s\" is defined twice", nm);
    return NULL;
  }
  if (c->nvals == c->cap) { /* sized once in import_graph: pointers to values stay valid */
    ox_fail(c, HARP_E_INTERNAL, "more values than the graph declares");
    return NULL;
  }
  if (!ut_strmap_put(&c->byname, name, c->nvals)) {
    ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
    return NULL;
  }
  ox_val *x = &c->vals[c->nvals++];
  memset(x, 0, sizeof *x);
  x->name = name;
  return x;
}

/* A subgraph's scope falls back to the scopes around it (outer values). */
static ox_val *find_val(ox_ctx *c, const char *name) {
  for (; c; c = c->parent) {
    int *i = ut_strmap_find(&c->byname, name);
    if (i) return &c->vals[*i];
  }
  return NULL;
}
ox_val *ox_find(ox_ctx *c, const char *name) { return find_val(c, name); }

int ox_uses(const ox_ctx *c, const char *name) {
  int *n = name && *name ? ut_strmap_find(&c->uses, name) : NULL;
  return n ? *n : 0;
}

/* One more reader of value `name` (none when the name is empty). */
harp_status ox_count_use(ox_ctx *c, const char *name) {
  if (!name || !*name) return HARP_OK;
  if (!ut_strmap_put(&c->uses, name, ox_uses(c, name) + 1)) return ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
  return HARP_OK;
}

ox_val *ox_in(ox_ctx *c, int i, bool *failed) {
  if (i >= (int)c->node->n_input || !c->node->input[i][0]) return NULL;
  ox_val *x = find_val(c, c->node->input[i]);
  if (!x) {
    char nm[96];
    ox_printable(c->node->input[i], nm, sizeof nm);
    ox_fail(c, HARP_E_DANGLING, "input %d \"%s\" is not defined by an earlier node, an initializer or a graph input", i, nm);
    if (failed) *failed = true;
  }
  return x;
}

static harp_status add_weight(ox_ctx *c, const char *id, ut_tensor *t) {
  onnx_model *m = c->m;
  if (m->nweights == c->wcap) {
    int cap = c->wcap ? 2 * c->wcap : 64;
    char **ids = ut_xrealloc(m->weight_ids, sizeof *ids * (size_t)cap);
    if (ids) m->weight_ids = ids;
    ut_tensor *ts = ids ? ut_xrealloc(m->weights, sizeof *ts * (size_t)cap) : NULL;
    if (!ts) return ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
    m->weights = ts, c->wcap = cap;
  }
  char *s = ut_xmalloc(strlen(id) + 1);
  if (!s) return ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
  strcpy(s, id);
  m->weight_ids[m->nweights] = s;
  m->weights[m->nweights++] = *t; /* moved */
  memset(t, 0, sizeof *t);
  return HARP_OK;
}

/* A constant as a graph value: a weight (integers as int32, folded
 * comparisons as bool), or a literal when it has rank 0 and `literal` (a
 * graph output is always a weight: the backends write outputs from
 * regions, and a literal is none). */
static hg_val const_value(ox_ctx *c, ox_val *x, bool literal) {
  if (literal && x->has_t && x->t.rank == 0) {
    x->v = hg_const_typed(c->g, ut_tensor_get(&x->t, 0), x->t.dtype);
    return ox_check(c, x->v) ? -1 : x->v;
  }
  ut_tensor t = {0};
  if (x->has_i) {
    /* a folded comparison (Equal of shapes) is a bool tensor, the rest int32 */
    tiny_dtype dt = x->oty == OX_BOOL ? TINY_BOOL : x->oty == OX_INT8 ? TINY_I8 : x->oty == OX_UINT8 ? TINY_U8 : TINY_I32;
    if (ut_tensor_alloc(c->e, &t, dt, x->irank, x->ishape)) return -1;
    for (int64_t i = 0; i < x->in; i++) {
      int64_t v;
      if (!fe_dim_is_int(x->iv[i], &v)) { /* a size read from a dynamic dim, used as data */
        char nm[96], what[160];
        ut_tensor_free(&t);
        if (oxf_val_runtime(c, x)) return oxf_ints_value(c, x); /* sizes a host op gave: computed in the segment */
        ox_printable(x->name, nm, sizeof nm);
        snprintf(what, sizeof what, "value \"%s\" (used as a tensor)", nm);
        ox_need_value(c, x->iv[i], what);
        return -1;
      }
      if (v < INT32_MIN || v > INT32_MAX) {
        ut_tensor_free(&t);
        ox_fail(c, HARP_E_LIMIT, "integer constant \"%s\" holds %" PRId64 ", outside int32", x->name, v);
        return -1;
      }
      if (dt == TINY_BOOL) ((uint8_t *)t.data)[i] = v != 0;
      else if (dt == TINY_I8 || dt == TINY_U8) ut_tensor_set(&t, i, (float)v);
      else ((int32_t *)t.data)[i] = (int32_t)v;
    }
    if (literal && x->irank == 0) {
      double v0 = dt == TINY_I32 ? ((int32_t *)t.data)[0] : ut_tensor_get(&t, 0);
      x->v = hg_const_typed(c->g, v0, dt);
      ut_tensor_free(&t);
      return ox_check(c, x->v) ? -1 : x->v;
    }
  } else if (ut_tensor_numel(&x->t) <= OX_FOLD_SMALL) { /* a scalar or a scale, still folded on (onnx_fold.c): a copy */
    if (ut_tensor_alloc(c->e, &t, x->t.dtype, x->t.rank, x->t.shape)) return -1;
    if (t.nbytes) memcpy(t.data, x->t.data, t.nbytes);
  } else { /* a weight (a larger computed one too): moved, not held twice; no longer folded */
    t = x->t;
    memset(&x->t, 0, sizeof x->t);
    x->has_t = false;
  }
  const char *id = ox_ident(c, x->name);
  tiny_dim dims[TINY_MAX_RANK];
  for (int i = 0; i < t.rank; i++) dims[i] = tiny_dim_int(t.shape[i]);
  hg_val v = id ? hg_input(c->g, id, t.dtype, t.rank, dims) : -1;
  if (ox_check(c, v) || ox_add_name(c, x->name, id) || add_weight(c, id, &t)) {
    ut_tensor_free(&t);
    return -1;
  }
  x->wid = id; /* a later segment reads the weight by its id (onnx_flow.c) */
  return x->v = v;
}
hg_val ox_const_value(ox_ctx *c, ox_val *x, bool literal) { return const_value(c, x, literal); }

hg_val ox_value(ox_ctx *c, ox_val *x) {
  if (x->v > 0) return x->v;
  if (x->gstage > 0) { /* a GELU pattern that broke off: what it holds so far */
    hg_val v = ox_gelu_partial(c, x);
    if (ox_check(c, v)) return -1;
    return x->v = v;
  }
  if (x->has_t || x->has_i) return const_value(c, x, true);
  ox_fail(c, HARP_E_INTERNAL, "value \"%s\" has no definition", x->name);
  return -1;
}

hg_val ox_tensor(ox_ctx *c, int i) {
  bool failed = false;
  ox_val *x = ox_in(c, i, &failed);
  if (failed) return -1;
  if (!x) {
    ox_fail(c, HARP_E_ARITY, "input %d is required", i);
    return -1;
  }
  return ox_value(c, x);
}

static ox_val *out_val(ox_ctx *c, int i) {
  if (i >= (int)c->node->n_output || !c->node->output[i][0]) return NULL; /* an unused optional output */
  return ox_new_val(c, c->node->output[i]);
}

harp_status ox_def(ox_ctx *c, int i, hg_val v) {
  if (ox_check(c, v)) return c->e->code;
  if (i >= (int)c->node->n_output || !c->node->output[i][0]) return HARP_OK;
  ox_val *x = out_val(c, i);
  if (!x) return c->e->code;
  x->v = v;
  return HARP_OK;
}

ox_val *ox_def_mark(ox_ctx *c, int i) {
  ox_val *x = out_val(c, i);
  if (!x && !c->e->code) ox_fail(c, HARP_E_INVALID_ARG, "output %d has no name", i);
  return x;
}

ox_val *ox_def_ints(ox_ctx *c, int i, int rank, const int64_t *shape, int64_t n) {
  if (n > OX_MAX_INT_CONST) {
    ox_fail(c, HARP_E_UNSUPPORTED, "an integer result of %" PRId64 " elements is too large to fold", n);
    return NULL;
  }
  ox_val *x = out_val(c, i);
  if (!x) {
    if (!c->e->code) ox_fail(c, HARP_E_INVALID_ARG, "output %d has no name", i);
    return NULL;
  }
  x->has_i = true;
  x->oty = OX_INT64;
  x->irank = rank;
  for (int k = 0; k < rank; k++) x->ishape[k] = shape[k];
  x->in = n;
  x->iv = ut_arena_alloc(c->A, sizeof *x->iv * (size_t)(n ? n : 1));
  if (!x->iv) {
    ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
    return NULL;
  }
  return x;
}

harp_status ox_def_tensor(ox_ctx *c, int i, ut_tensor *t, int oty) {
  ox_val *x = out_val(c, i);
  if (!x) {
    ut_tensor_free(t);
    return c->e->code ? c->e->code : HARP_OK;
  }
  x->has_t = true;
  x->t = *t;
  x->oty = oty;
  memset(t, 0, sizeof *t);
  return HARP_OK;
}

/* ---- attributes ----------------------------------------------------------------------- */
const Onnx__AttributeProto *ox_attr(const ox_ctx *c, const char *name) {
  for (size_t i = 0; i < c->node->n_attribute; i++)
    if (c->node->attribute[i]->name && !strcmp(c->node->attribute[i]->name, name)) return c->node->attribute[i];
  return NULL;
}

static harp_status bad_attr(ox_ctx *c, const char *name, const char *want) {
  return ox_fail(c, HARP_E_INVALID_ARG, "attribute %s must be %s", name, want);
}

harp_status ox_attr_int(ox_ctx *c, const char *name, int64_t dflt, int64_t *out) {
  const Onnx__AttributeProto *a = ox_attr(c, name);
  *out = dflt;
  if (!a) return HARP_OK;
  if (a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT) return bad_attr(c, name, "an int");
  *out = a->i;
  return HARP_OK;
}

harp_status ox_attr_float(ox_ctx *c, const char *name, double dflt, double *out) {
  const Onnx__AttributeProto *a = ox_attr(c, name);
  *out = dflt;
  if (!a) return HARP_OK;
  if (a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT) return bad_attr(c, name, "a float");
  *out = a->f;
  return HARP_OK;
}

harp_status ox_attr_ints(ox_ctx *c, const char *name, int64_t *out, int cap, int *n) {
  const Onnx__AttributeProto *a = ox_attr(c, name);
  *n = -1;
  if (!a) return HARP_OK;
  if (a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS) return bad_attr(c, name, "a list of ints");
  if (a->n_ints > (size_t)cap) return ox_fail(c, HARP_E_LIMIT, "attribute %s has %zu values (at most %d)", name, a->n_ints, cap);
  for (size_t i = 0; i < a->n_ints; i++) out[i] = a->ints[i];
  *n = (int)a->n_ints;
  return HARP_OK;
}

harp_status ox_attr_str(ox_ctx *c, const char *name, const char *dflt, char *out, int cap) {
  const Onnx__AttributeProto *a = ox_attr(c, name);
  snprintf(out, (size_t)cap, "%s", dflt);
  if (!a) return HARP_OK;
  if (a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING) return bad_attr(c, name, "a string");
  if (a->s.len >= (size_t)cap || (a->s.len && memchr(a->s.data, 0, a->s.len))) return bad_attr(c, name, "a short string");
  if (a->s.len) memcpy(out, a->s.data, a->s.len); /* an empty string may have no data at all */
  out[a->s.len] = 0;
  return HARP_OK;
}
