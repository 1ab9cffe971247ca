/* load_ops.c — the seed 000 dialect: {"ops":[...], "values":{...}}.
 * Needs: load_json.c helpers.  Gives: the same canonical graph.
 *
 * Conversion rules (docs/tiny-ir.md §Dialects):
 *  - each op's single output value name becomes the node id; the op's
 *    "name" becomes the node's tag;
 *  - values that no op produces are model inputs (INPUT nodes) and must be
 *    declared in "values" with dtype and shape;
 *  - Reduce accumulates in attrs.dtype when given, else fp32 (i32 for
 *    integers); its result is CAST to the declared dtype of its output value,
 *    or else to its input's dtype, as a seed 000 model expects;
 *  - declared dtypes and shapes of intermediate values are checked. */
#include <string.h>

#include "load_int.h"
#include "util/util.h"

typedef struct fnmap {
  const char *name;
  tiny_op op;
} fnmap;

/* The dialect names an op by its table name in lower case ("exp2", "add",
 * "reshape"), or by one of these. */
static const fnmap name_aliases[] = {{"div", TINY_FDIV}, {"lt", TINY_CMPLT},    {"eq", TINY_CMPEQ},
                                     {"ne", TINY_CMPNE}, {"slice", TINY_SHRINK}, {NULL, 0}};

static bool lower_eq(const char *upper, const char *s) {
  for (; *upper && *s; upper++, s++)
    if (*s != (*upper >= 'A' && *upper <= 'Z' ? *upper - 'A' + 'a' : *upper)) return false;
  return !*upper && !*s;
}

/* The op named s, if of class c1 or c2; -1 if none. */
static int lookup(const char *s, tiny_class c1, tiny_class c2) {
  int op = -1;
  for (int i = 0; name_aliases[i].name && op < 0; i++)
    if (strcmp(name_aliases[i].name, s) == 0) op = (int)name_aliases[i].op;
  for (int i = 0; i < TINY_OP_COUNT && op < 0; i++)
    if (lower_eq(tiny_op_name((tiny_op)i), s)) op = i;
  return op >= 0 && (tiny_op_class((tiny_op)op) == c1 || tiny_op_class((tiny_op)op) == c2) ? op : -1;
}

/* attrs key aliases of the seed 000 dialect -> canonical arg keys */
static const char *const aliases[][2] = {
    {"new_shape", "result_shape"}, {"shape", "result_shape"}, {"order", "perm"}, {"dims", "perm"},
    {"pads", "pad"},               {"starts", "lo"},          {"ends", "hi"},    {"steps", "step"},
    {"acc_dtype", "dtype"},        {NULL, NULL}};

static json_t *canonical_attrs(lctx *c, tiny_op op, json_t *attrs) {
  json_t *o = json_object();
  if (!o) return NULL;
  const char *key;
  json_t *val;
  json_object_foreach(attrs, key, val) {
    const char *k = key;
    for (int i = 0; aliases[i][0]; i++)
      if (strcmp(key, aliases[i][0]) == 0) k = aliases[i][1];
    if (json_object_get(o, k)) {
      ut_fail(c->e, HARP_E_INVALID_ARG, c->node, "attrs give \"%s\" twice (under two names)", k);
      json_decref(o);
      return NULL;
    }
    json_object_set(o, k, val);
  }
  (void)op;
  return o;
}

typedef struct decl {
  const char *name;
  bool has_dtype, has_shape;
  tiny_dtype dtype;
  tiny_shape shape;
} decl;

static decl *find_decl(decl *d, int n, const char *name) {
  for (int i = 0; i < n; i++)
    if (strcmp(d[i].name, name) == 0) return &d[i];
  return NULL;
}

static harp_status parse_values(lctx *c, json_t *values, decl **out, int *nout) {
  *out = NULL;
  *nout = 0;
  if (!values) return HARP_OK;
  if (!json_is_object(values)) return ut_fail(c->e, HARP_E_INVALID_ARG, NULL, "\"values\" must be an object");
  decl *d = ut_xcalloc(json_object_size(values) + 1, sizeof *d);
  if (!d) return ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
  const char *key;
  json_t *val;
  int n = 0;
  static const char *const keys[] = {"dtype", "shape", NULL};
  json_object_foreach(values, key, val) {
    c->node = key;
    d[n].name = key;
    if (!json_is_object(val) || !ld_only_keys(c, val, "values entry", keys)) {
      if (!c->e->code) ut_fail(c->e, HARP_E_INVALID_ARG, key, "a values entry is an object {dtype, shape}");
      free(d);
      return c->e->code;
    }
    json_t *v;
    if ((v = json_object_get(val, "dtype"))) {
      if (!ld_dtype(c, v, "dtype", &d[n].dtype)) return free(d), c->e->code;
      d[n].has_dtype = true;
    }
    if ((v = json_object_get(val, "shape"))) {
      if (!ld_shape(c, v, "shape", &d[n].shape)) return free(d), c->e->code;
      d[n].has_shape = true;
    }
    n++;
  }
  *out = d;
  *nout = n;
  return HARP_OK;
}

/* Records are registered in `ids` (a scratch graph used only for its id
 * map) in record order, so a node index there is the record index. */
static int rec_of(const tiny_graph *ids, const char *name) { return tiny_find(ids, name); }

static harp_status register_rec(lctx *c, tiny_graph *ids, const char *id) {
  tiny_arg_input dummy = {.tensor_id = "x"};
  if (tiny_add(ids, id, TINY_INPUT, NULL, 0, &dummy) >= 0) return HARP_OK;
  if (ids->err.code == HARP_E_DUPLICATE_ID)
    return ut_fail(c->e, HARP_E_DUPLICATE_ID, id, "value \"%s\" is produced twice", id);
  return ut_fail(c->e, ids->err.code, id, "%s", ids->err.msg);
}

static harp_status parse_op(lctx *c, json_t *op, size_t i, ld_rec *r, const char **in_names, json_t **tmp) {
  static const char *const keys[] = {"op", "name", "kind", "fn", "inputs", "outputs", "attrs", "axes", NULL};
  if (!json_is_object(op)) return ut_fail(c->e, HARP_E_INVALID_ARG, NULL, "ops[%zu] is not an object", i);
  json_t *outs = json_object_get(op, "outputs");
  if (!json_is_array(outs) || json_array_size(outs) != 1 || !json_is_string(json_array_get(outs, 0)))
    return ut_fail(c->e, HARP_E_INVALID_ARG, NULL, "ops[%zu]: \"outputs\" must list exactly one value name", i);
  r->id = json_string_value(json_array_get(outs, 0));
  c->node = r->id;
  if (!*r->id || strlen(r->id) > 120) return ut_fail(c->e, HARP_E_INVALID_ARG, r->id, "bad output value name");
  if (!ld_only_keys(c, op, "op", keys)) return c->e->code;
  json_t *name = json_object_get(op, "name");
  if (name && !json_is_string(name)) return ut_fail(c->e, HARP_E_INVALID_ARG, r->id, "\"name\" must be a string");
  r->tag = name ? json_string_value(name) : NULL;
  const char *cls = json_string_value(json_object_get(op, "op"));
  const char *fn = json_string_value(json_object_get(op, "fn"));
  const char *kind = json_string_value(json_object_get(op, "kind"));
  if (!cls) return ut_fail(c->e, HARP_E_INVALID_ARG, r->id, "\"op\" must be a string");
  int o = -1;
  if (!strcmp(cls, "Movement")) o = kind ? lookup(kind, TC_MOVE, TC_MOVE) : -1;
  else if (!strcmp(cls, "Unary")) o = fn ? lookup(fn, TC_UNARY, TC_UNARY) : -1;
  else if (!strcmp(cls, "Binary") || !strcmp(cls, "Ternary")) o = fn ? lookup(fn, TC_BINARY, TC_TERNARY) : -1;
  else if (!strcmp(cls, "Reduce")) o = TINY_REDUCE;
  else if (!strcmp(cls, "Cast")) o = TINY_CAST;
  else return ut_fail(c->e, HARP_E_UNKNOWN_OP, r->id, "unknown op class \"%s\"", cls);
  if (o < 0)
    return ut_fail(c->e, HARP_E_UNKNOWN_OP, r->id, "unknown %s %s \"%s\"", cls, !strcmp(cls, "Movement") ? "kind" : "fn",
                   (!strcmp(cls, "Movement") ? kind : fn) ? (!strcmp(cls, "Movement") ? kind : fn) : "(missing)");
  r->op = (tiny_op)o;
  json_t *ins = json_object_get(op, "inputs");
  int arity = tiny_op_arity(r->op);
  if (!json_is_array(ins) || json_array_size(ins) != (size_t)arity)
    return ut_fail(c->e, HARP_E_ARITY, r->id, "%s takes %d input%s", tiny_op_name(r->op), arity, arity == 1 ? "" : "s");
  r->nsrc = arity;
  for (int k = 0; k < arity; k++) {
    json_t *s = json_array_get(ins, (size_t)k);
    in_names[k] = NULL;
    if (json_is_string(s)) in_names[k] = json_string_value(s);
    else if (json_is_number(s)) r->imm[k] = json_number_value(s);
    else return ut_fail(c->e, HARP_E_INVALID_ARG, r->id, "inputs[%d] must be a value name or a number", k);
  }
  json_t *attrs = json_object_get(op, "attrs");
  if (attrs && !json_is_object(attrs)) return ut_fail(c->e, HARP_E_INVALID_ARG, r->id, "\"attrs\" must be an object");
  json_t *arg = attrs ? canonical_attrs(c, r->op, attrs) : json_object();
  if (!arg) return c->e->code ? c->e->code : ut_fail(c->e, HARP_E_NO_MEMORY, r->id, "out of memory");
  *tmp = arg;
  if (r->op == TINY_REDUCE) {
    json_t *axes = json_object_get(op, "axes");
    if (axes && json_object_get(arg, "axes"))
      return ut_fail(c->e, HARP_E_INVALID_ARG, r->id, "axes given both at the top and in attrs");
    if (axes) json_object_set(arg, "axes", axes);
    const char *up = !fn ? NULL : !strcmp(fn, "sum") ? "SUM" : !strcmp(fn, "max") ? "MAX" : !strcmp(fn, "min") ? "MIN" : NULL;
    if (!up) return ut_fail(c->e, HARP_E_UNKNOWN_OP, r->id, "unknown Reduce fn \"%s\"", fn ? fn : "(missing)");
    json_object_set_new(arg, "op", json_string(up));
  }
  if (tiny_op_argkind(r->op) == TA_NONE && json_object_size(arg) == 0) {
    return HARP_OK;
  }
  return ld_args(c, r->op, arg, &r->args) ? HARP_OK : c->e->code;
}

/* dtype each record produces, in dependency order (a small forward pass). */
static void propagate_dtypes(const ld_rec *recs, const int *order, int n, tiny_dtype *dt) {
  for (int t = 0; t < n; t++) {
    int i = order[t];
    const ld_rec *r = &recs[i];
    tiny_dtype d = TINY_FP32;
    bool have = false;
    switch (tiny_op_class(r->op)) {
    case TC_LEAF: d = r->op == TINY_INPUT ? r->args.input.dtype : r->args.cnst.dtype; have = true; break;
    case TC_CAST: d = r->args.cast.to; have = true; break;
    case TC_REDUCE: d = r->args.reduce.dtype; have = true; break;
    default:
      for (int k = (r->op == TINY_WHERE); k < r->nsrc; k++) {
        if (r->src_rec[k] < 0) continue;
        tiny_dtype s = dt[r->src_rec[k]];
        if (!have || s == TINY_FP32) d = s;
        have = true;
      }
      if (tiny_op_is_compare(r->op)) d = TINY_BOOL;
    }
    dt[i] = d;
  }
}

/* The ops dialect's records while it loads: ops first (nop of them), then
 * the model inputs their names need, then the result casts of reductions. */
typedef struct ops_ld {
  size_t nops;
  decl *decls;
  int ndecl;
  ld_rec *recs;
  const char **names; /* per op, TINY_MAX_SRC input names (NULL: an immediate) */
  json_t **tmps;      /* per op, its canonical attrs (owned) */
  int *order, *rec_to_node;
  tiny_dtype *dt;
  bool *explicit_acc; /* per record: a Reduce whose accumulation dtype is given */
  tiny_graph *ids;    /* the produced names (only the id map is used) */
  int n, nop;
} ops_ld;

/* x's arrays for nops ops (records: at most 3 * nops + 1). */
static harp_status ops_alloc(lctx *c, ops_ld *x, size_t nops) {
  memset(x, 0, sizeof *x);
  size_t cap = 3 * nops + 1;
  x->nops = nops;
  x->recs = ut_xcalloc(cap, sizeof *x->recs);
  x->names = ut_xcalloc(nops * TINY_MAX_SRC + 1, sizeof *x->names);
  x->tmps = ut_xcalloc(nops + 1, sizeof *x->tmps);
  x->order = ut_xcalloc(cap, sizeof(int));
  x->rec_to_node = ut_xcalloc(cap, sizeof(int));
  x->dt = ut_xcalloc(cap, sizeof *x->dt);
  x->explicit_acc = ut_xcalloc(cap, sizeof(bool));
  x->ids = tiny_graph_new();
  if (!x->recs || !x->names || !x->tmps || !x->order || !x->rec_to_node || !x->dt || !x->explicit_acc || !x->ids)
    return ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
  return HARP_OK;
}

static void ops_free(ops_ld *x) {
  if (x->tmps)
    for (size_t i = 0; i < x->nops; i++) json_decref(x->tmps[i]);
  tiny_graph_free(x->ids);
  free(x->decls);
  free(x->recs);
  free(x->names);
  free(x->tmps);
  free(x->order);
  free(x->rec_to_node);
  free(x->dt);
  free(x->explicit_acc);
}

/* Input k of op record i: the record producing its name, else a model input
 * declared (dtype and shape) in "values", added as a record. */
static harp_status ops_resolve(lctx *c, ops_ld *x, int i, int k) {
  ld_rec *recs = x->recs;
  const char *nm = x->names[(size_t)i * TINY_MAX_SRC + k];
  if (!nm) {
    recs[i].src_rec[k] = -1;
    return HARP_OK;
  }
  int p = rec_of(x->ids, nm);
  if (p < 0) {
    decl *d = find_decl(x->decls, x->ndecl, nm);
    c->node = nm;
    if (!d || !d->has_dtype || !d->has_shape)
      return ut_fail(c->e, HARP_E_DANGLING, recs[i].id,
                     "\"%s\" is neither produced by an op nor declared with dtype and shape in \"values\"", nm);
    if (register_rec(c, x->ids, nm)) return c->e->code;
    p = x->n++;
    recs[p].id = nm;
    recs[p].op = TINY_INPUT;
    recs[p].args.input = (tiny_arg_input){.tensor_id = nm, .dtype = d->dtype, .shape = d->shape};
  }
  recs[i].src_rec[k] = p;
  return HARP_OK;
}

/* Reduce i accumulates in fp32 / i32 unless told; when the value's dtype
 * (declared, else the input's) differs, REDUCE -> "<v>.acc" and a CAST
 * -> "<v>" that the value's users (records below base) now read. */
static harp_status ops_reduce_cast(lctx *c, ops_ld *x, int i, int base) {
  ld_rec *recs = x->recs, *r = &recs[i];
  tiny_dtype in = x->dt[r->src_rec[0]];
  if (!x->explicit_acc[i]) r->args.reduce.dtype = tiny_dtype_is_float(in) ? TINY_FP32 : TINY_I32;
  decl *d = find_decl(x->decls, x->ndecl, r->id);
  tiny_dtype want = d && d->has_dtype ? d->dtype : in;
  if (want == r->args.reduce.dtype) return HARP_OK;
  int cidx = x->n++;
  recs[cidx] = (ld_rec){.id = r->id, .op = TINY_CAST, .nsrc = 1, .src_rec = {i}, .tag = r->tag};
  recs[cidx].args.cast.to = want;
  char *acc_id = ut_arena_printf(c->g->arena, "%s.acc", r->id);
  if (!acc_id) return ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
  r->id = acc_id;
  for (int u = 0; u < base; u++)
    for (int k = 0; k < recs[u].nsrc; k++)
      if (recs[u].src_rec[k] == i && u != cidx) recs[u].src_rec[k] = cidx;
  return HARP_OK;
}

/* The ops of "ops" parsed and registered, their inputs resolved, sorted,
 * reductions given their dtypes: the records, in dependency order. */
static harp_status ops_records(lctx *c, json_t *ops, ops_ld *x) {
  harp_status st = HARP_OK;
  for (size_t i = 0; i < x->nops && !st; i++) {
    ld_rec *r = &x->recs[x->n];
    st = parse_op(c, json_array_get(ops, i), i, r, &x->names[i * TINY_MAX_SRC], &x->tmps[i]);
    if (!st) st = register_rec(c, x->ids, r->id);
    if (!st) x->explicit_acc[x->n] = r->op == TINY_REDUCE && r->args.reduce.has_dtype, x->n++;
  }
  x->nop = x->n; /* names nothing produces are model inputs */
  for (int i = 0; i < x->nop && !st; i++)
    for (int k = 0; k < x->recs[i].nsrc && !st; k++) st = ops_resolve(c, x, i, k);
  if (st || (st = ld_toposort(c, x->recs, x->n, x->order))) return st;
  for (int i = 0; i < x->nop; i++)
    if (x->recs[i].op == TINY_REDUCE && !x->explicit_acc[i]) x->recs[i].args.reduce.has_dtype = true;
  propagate_dtypes(x->recs, x->order, x->n, x->dt);
  int base = x->n;
  for (int i = 0; i < x->nop && !st; i++)
    if (x->recs[i].op == TINY_REDUCE) st = ops_reduce_cast(c, x, i, base);
  return st;
}

/* The model's "outputs" (outs: NULL when absent) marked in c->g. */
static harp_status ops_outputs(lctx *c, json_t *outs) {
  if (!outs) return HARP_OK;
  c->node = NULL;
  if (!json_is_array(outs) || !json_array_size(outs))
    return ut_fail(c->e, HARP_E_INVALID_ARG, NULL, "\"outputs\" must be a non-empty array of value names");
  for (size_t k = 0; k < json_array_size(outs); k++) {
    json_t *o = json_array_get(outs, k);
    int idx = json_is_string(o) ? tiny_find(c->g, json_string_value(o)) : -1;
    if (idx < 0) return ut_fail(c->e, HARP_E_DANGLING, json_string_value(o), "output is not a value of this model");
    if (tiny_mark_output(c->g, idx) < 0) return ut_fail(c->e, c->g->err.code, NULL, "%s", c->g->err.msg);
  }
  return HARP_OK;
}

/* Declaration d of "values" against the node the ops made of it (dtype,
 * and the shape where both sides know a dim). */
static harp_status ops_check_decl(lctx *c, const decl *d) {
  int idx = tiny_find(c->g, d->name);
  if (idx < 0) return HARP_OK; /* declared but unused: harmless */
  const tiny_node *nd = &c->g->nodes[idx];
  if (d->has_dtype && d->dtype != nd->dtype)
    return ut_fail(c->e, HARP_E_DTYPE_MISMATCH, nd->id, "\"values\" declares %s, the op produces %s",
                   tiny_dtype_name(d->dtype), tiny_dtype_name(nd->dtype));
  if (!d->has_shape) return HARP_OK;
  const tiny_shape *ds = &d->shape, *is = &nd->shape;
  bool ok = ds->rank == is->rank;
  for (int a = 0; a < ds->rank && ok; a++) {
    const tiny_dim *x = &ds->d[a], *y = &is->d[a];
    if (!x->sym && y->n >= 0) ok = x->n == y->n;
    else if (x->sym && y->sym && y->n < 0) ok = strcmp(x->sym, y->sym) == 0;
  }
  if (ok) return HARP_OK;
  char a[256], b[256];
  tiny_shape_format(ds, a, sizeof a);
  tiny_shape_format(is, b, sizeof b);
  return ut_fail(c->e, HARP_E_AXIS_SIZE_MISMATCH, nd->id, "\"values\" declares shape %s, the op produces %s", a, b);
}

harp_status tiny_load_ops_dialect(lctx *c, json_t *root) {
  static const char *const top_keys[] = {"ops", "values", "outputs", "derived", "name", "comment", "meta", NULL};
  if (!ld_only_keys(c, root, "model", top_keys)) return c->e->code;
  json_t *ops = json_object_get(root, "ops");
  if (!json_is_array(ops)) return ut_fail(c->e, HARP_E_INVALID_ARG, NULL, "\"ops\" must be an array");
  size_t nops = json_array_size(ops);
  if (nops > TINY_MAX_NODES / 4) return ut_fail(c->e, HARP_E_LIMIT, NULL, "too many ops");
  ops_ld x;
  harp_status st = ops_alloc(c, &x, nops);
  if (!st) st = parse_values(c, json_object_get(root, "values"), &x.decls, &x.ndecl);
  if (!st) st = ops_records(c, ops, &x);
  if (!st) st = ld_add_sorted(c, x.recs, x.n, x.rec_to_node);
  if (!st) st = ops_outputs(c, json_object_get(root, "outputs"));
  if (!st) st = ld_dsyms(c, json_object_get(root, "derived"));
  /* declared dtypes and shapes must match what the ops produce */
  if (!st) st = tiny_infer(c->e, c->g, NULL, true);
  for (int i = 0; i < x.ndecl && !st; i++) st = ops_check_decl(c, &x.decls[i]);
  ops_free(&x);
  return st;
}
