/* onnx_load.c — the ONNX frontend's outer half: the protobuf (protobuf-c,
 * code generated from Debian's onnx.proto at build time), the opset check,
 * graph inputs (given shapes and fixed values), initializers decoded into
 * weights or folded constants (onnx_tensor.c), the node loop (onnx_ops.c
 * maps each node; onnx_values.c holds the value table), subgraph scopes,
 * and the outputs.
 * Needs: the frontend builder, onnx_values.c, onnx_tensor.c.  Gives:
 * onnx_load_file/_buffer (and _opts), onnx_model_free, onnx_id_of,
 * ox_import_model, ox_read_model, ox_scope_alloc/_run, ox_import_node. */
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harp/flow.h"
#include "onnx_int.h"

/* protobuf's own limit on a message */
#define MAX_MODEL_BYTES ((size_t)2 << 30)

/* ---- the graph ------------------------------------------------------------------------------ */
static harp_status check_opsets(ox_ctx *c, const Onnx__ModelProto *mp) {
  c->opset = -1;
  for (size_t i = 0; i < mp->n_opset_import; i++) {
    const Onnx__OperatorSetIdProto *o = mp->opset_import[i];
    if (!o->domain || !*o->domain || !strcmp(o->domain, "ai.onnx")) c->opset = o->version;
  }
  if (c->opset < 0) return ox_fail(c, HARP_E_UNSUPPORTED, "the model imports no opset of the default ONNX domain");
  if (c->opset < ONNX_MIN_OPSET || c->opset > ONNX_MAX_OPSET)
    return ox_fail(c, HARP_E_UNSUPPORTED, "opset %" PRId64 " of the default domain is not supported (harp reads opsets %d to %d)",
                   c->opset, ONNX_MIN_OPSET, ONNX_MAX_OPSET);
  return HARP_OK;
}

/* A graph input's tensor type (nm: its printable name); NULL, failed, if it
 * is not a tensor. */
static const Onnx__TypeProto__Tensor *input_type(ox_ctx *c, const Onnx__ValueInfoProto *vi, char nm[96]) {
  ox_printable(vi->name, nm, 96);
  const Onnx__TypeProto *tp = vi->type;
  if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type) {
    ox_fail(c, HARP_E_UNSUPPORTED, "graph input \"%s\" is not a tensor", nm);
    return NULL;
  }
  return tp->tensor_type;
}

/* Graph input vi as a harp input: its dims are those given at import, or
 * its own (dynamic ones as shape variables: onnx_shapes.c). */
static harp_status graph_input(ox_ctx *c, const Onnx__ValueInfoProto *vi) {
  char nm[96];
  const Onnx__TypeProto__Tensor *tt = input_type(c, vi, nm);
  if (!tt) return c->e->code;
  tiny_dtype dt;
  if (!ox_dtype(tt->elem_type, &dt))
    return ox_fail(c, HARP_E_UNSUPPORTED, "graph input \"%s\" has element type %s, which harp does not have", nm,
                   ox_type_name(tt->elem_type));
  const char *id = ox_ident(c, vi->name);
  if (!id) return c->e->code;
  tiny_dim dims[TINY_MAX_RANK];
  int rank;
  if (ox_input_dims(c, vi, id, &rank, dims)) return c->e->code;
  ox_val *x = ox_new_val(c, vi->name);
  if (!x) return c->e->code;
  x->oty = tt->elem_type;
  x->v = hg_input(c->g, id, dt, rank, dims);
  if (ox_check(c, x->v)) return c->e->code;
  return ox_add_name(c, vi->name, id);
}

/* The decoded initializer owns its elements now: the proto's copy goes, so
 * that the weights are not held twice through the import (a model's size at
 * the peak).  The proto is ours (unpacked by us); free_unpacked skips NULL. */
static void drop_elements(Onnx__TensorProto *tp) {
  free(tp->raw_data.data);
  tp->raw_data.data = NULL;
  tp->raw_data.len = 0;
  free(tp->float_data);
  tp->float_data = NULL;
  tp->n_float_data = 0;
}

/* Graph input vi fixed at import to the data opts->fixed[k] (or what
 * opts->read gives): decoded as an initializer would be (a proto made over
 * the tensor's bytes). */
static harp_status fixed_input_data(ox_ctx *c, const Onnx__ValueInfoProto *vi, int k, const ut_tensor *t) {
  char nm[96];
  const Onnx__TypeProto__Tensor *tt = input_type(c, vi, nm);
  if (!tt) return c->e->code;
  int ety = tt->elem_type;
  bool ok = t->dtype == TINY_I32 ? ety == OX_INT64 || ety == OX_INT32
            : t->dtype == TINY_FP32 ? ety == OX_FLOAT || ety == OX_BFLOAT16 /* bf16 data comes as fp32 (.npy) */
            : t->dtype == TINY_FP16 ? ety == OX_FLOAT16
            : t->dtype == TINY_BF16 ? ety == OX_BFLOAT16
            : t->dtype == TINY_I8   ? ety == OX_INT8
            : t->dtype == TINY_U8   ? ety == OX_UINT8
            : t->dtype == TINY_BOOL && ety == OX_BOOL;
  if (!ok)
    return ox_fail(c, HARP_E_INPUT_MISMATCH, "graph input \"%s\" is %s; the data fixed for it is %s", nm, ox_type_name(ety),
                   tiny_dtype_name(t->dtype));
  if (tt->shape && (int)tt->shape->n_dim != t->rank)
    return ox_fail(c, HARP_E_INPUT_MISMATCH, "graph input \"%s\" has rank %zu; the data fixed for it has rank %d", nm,
                   tt->shape->n_dim, t->rank);
  for (int i = 0; tt->shape && i < t->rank; i++) {
    const Onnx__TensorShapeProto__Dimension *d = tt->shape->dim[i];
    if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE && d->dim_value != t->shape[i])
      return ox_fail(c, HARP_E_INPUT_MISMATCH, "graph input \"%s\": dim %d is %" PRId64 "; the data fixed for it has %" PRId64, nm,
                     i, d->dim_value, t->shape[i]);
  }
  Onnx__TensorProto p = ONNX__TENSOR_PROTO__INIT;
  p.name = vi->name;
  p.data_type = ety;
  p.n_dims = (size_t)t->rank;
  int64_t dims[TINY_MAX_RANK];
  memcpy(dims, t->shape, sizeof *dims * (size_t)t->rank);
  p.dims = dims;
  p.has_raw_data = 1;
  int64_t n = ut_tensor_numel(t);
  int64_t *wide = NULL; /* int64 inputs: the i32 data widened; bf16 ones from fp32 data: rounded */
  if (ety == OX_INT64) {
    if (!(wide = ut_xmalloc(sizeof *wide * (size_t)(n ? n : 1)))) return ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
    for (int64_t i = 0; i < n; i++) wide[i] = ((const int32_t *)t->data)[i];
    p.raw_data.data = (uint8_t *)wide;
    p.raw_data.len = sizeof *wide * (size_t)n;
  } else if (ety == OX_BFLOAT16 && t->dtype == TINY_FP32) {
    if (!(wide = ut_xmalloc(sizeof(uint16_t) * (size_t)(n ? n : 1)))) return ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
    for (int64_t i = 0; i < n; i++) ((uint16_t *)wide)[i] = ut_f32_to_bf16(((const float *)t->data)[i]);
    p.raw_data.data = (uint8_t *)wide;
    p.raw_data.len = sizeof(uint16_t) * (size_t)n;
  } else {
    p.raw_data.data = t->data;
    p.raw_data.len = t->nbytes;
  }
  ox_val *x = ox_new_val(c, vi->name);
  harp_status st = x ? HARP_OK : c->e->code;
  if (!st) {
    x->is_init = true;
    st = ox_decode_tensor(c, &p, "fixed input", x);
  }
  free(wide);
  if (!st && c->opts->used) c->opts->used[k] = true;
  return st;
}

static harp_status fixed_input(ox_ctx *c, const Onnx__ValueInfoProto *vi, int k) {
  const onnx_opts *o = c->opts;
  if (o->fixed) return fixed_input_data(c, vi, k, &o->fixed[k]);
  if (!o->read) return ox_fail(c, HARP_E_INVALID_ARG, "fixed input %d has neither data nor a reader", k);
  ut_tensor t = {0};
  harp_status st = o->read(c->e, o->read_ctx, k, &t);
  if (!st) st = fixed_input_data(c, vi, k, &t);
  ut_tensor_free(&t);
  return st;
}

static int fixed_index(const ox_ctx *c, const char *name) {
  for (int k = 0; c->opts && k < c->opts->nfixed; k++)
    if (!strcmp(c->opts->fixed_names[k], name)) return k;
  return -1;
}

harp_status ox_import_node(ox_ctx *c) {
  const char *dom = c->node->domain;
  if (!c->node->op_type || !*c->node->op_type) return ox_fail(c, HARP_E_INVALID_ARG, "the node has no op_type");
  /* every ONNX op has an output, and the mappings name what they make after it */
  if (c->node->n_output == 0) return ox_fail(c, HARP_E_INVALID_ARG, "the node has no outputs");
  for (size_t i = 0; i < c->node->n_attribute; i++) /* the mappings find attributes by name */
    if (!c->node->attribute[i]->name || !*c->node->attribute[i]->name)
      return ox_fail(c, HARP_E_INVALID_ARG, "attribute %zu has no name", i);
  if (dom && *dom && strcmp(dom, "ai.onnx") != 0 && !ox_find_quant(dom, c->node->op_type))
    return ox_fail(c, HARP_E_UNSUPPORTED, "domain \"%s\" is not supported (harp reads the default ONNX domain only)", dom);
  return ox_node(c);
}

/* The value table of a graph's scope, sized once: pointers to values stay
 * valid while its nodes are imported. */
harp_status ox_scope_alloc(ox_ctx *c, const Onnx__GraphProto *gp) {
  size_t nv = gp->n_input + gp->n_initializer + 1;
  for (size_t i = 0; i < gp->n_node; i++) nv += gp->node[i]->n_output;
  if (nv > (size_t)INT32_MAX / 2) return ox_fail(c, HARP_E_LIMIT, "too many values");
  c->vals = ut_xcalloc(nv, sizeof *c->vals);
  if (!c->vals) return ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
  c->cap = (int)nv;
  return HARP_OK;
}

static harp_status decode_initializers(ox_ctx *c, Onnx__GraphProto *gp) {
  harp_status st = HARP_OK;
  for (size_t i = 0; i < gp->n_initializer && !st; i++) {
    ox_val *x = ox_new_val(c, gp->initializer[i]->name);
    if (!x) return c->e->code;
    x->is_init = true;
    c->take_raw = gp->initializer[i]; /* ours (unpacked by us): its raw_data may become the tensor's */
    st = ox_decode_tensor(c, gp->initializer[i], "initializer", x);
    c->take_raw = NULL;
    if (!st && x->has_t) drop_elements(gp->initializer[i]);
    if (st && c->report) st = ox_check_value_failed(c, x->name, gp->initializer[i]->data_type); /* harp check: on */
  }
  if (gp->n_sparse_initializer && !st) st = ox_fail(c, HARP_E_UNSUPPORTED, "sparse initializers are not supported");
  return st;
}

static bool put_use(void *ctx, const char *name) { return ox_count_use(ctx, name) == HARP_OK; }

/* gp's nodes in order (c->gp: the readers of each value, for the folds
 * that look ahead; values read inside subgraphs count too). */
static harp_status run_nodes(ox_ctx *c, Onnx__GraphProto *gp) {
  harp_status st = ox_graph_reads(c, gp, 0, put_use, c);
  c->gp = gp;
  for (size_t i = 0; i < gp->n_output && !st; i++) st = ox_count_use(c, gp->output[i]->name);
  for (size_t i = 0; i < gp->n_node && !st; i++) {
    c->node = gp->node[i];
    c->node_index = (int)i;
    st = c->report ? ox_check_node(c) : ox_import_node(c); /* harp check: records a failure and goes on */
  }
  c->node = NULL;
  return st;
}

harp_status ox_scope_run(ox_ctx *c, Onnx__GraphProto *gp) {
  if (decode_initializers(c, gp)) return c->e->code;
  return run_nodes(c, gp);
}

static harp_status import_graph(ox_ctx *c, Onnx__GraphProto *gp) {
  /* identifiers: graph inputs first, so that they keep their plain names */
  ut_strmap inits = {0};
  harp_status st = ox_bind_given(c, gp); /* the shapes and symbols given, before any input */
  if (!st) st = ox_scope_alloc(c, gp);
  for (size_t i = 0; i < gp->n_initializer && !st; i++) {
    const char *n = gp->initializer[i]->name;
    if (!n || !*n) st = ox_fail(c, HARP_E_INVALID_ARG, "initializer %zu has no name", i);
    else if (!ut_strmap_put(&inits, n, (int)i)) st = ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
  }
  for (size_t i = 0; i < gp->n_input && !st; i++) {
    const Onnx__ValueInfoProto *vi = gp->input[i];
    if (!vi->name || !*vi->name) st = ox_fail(c, HARP_E_INVALID_ARG, "graph input %zu has no name", i);
    else if (!ut_strmap_find(&inits, vi->name)) { /* else: an initializer's default */
      int k = fixed_index(c, vi->name);
      st = k >= 0 ? fixed_input(c, vi, k) : graph_input(c, vi);
      if (st && c->report) st = ox_check_value_failed(c, vi->name, vi->type && vi->type->tensor_type ? vi->type->tensor_type->elem_type : 0);
    }
  }
  ut_strmap_free(&inits);
  /* then the outputs: a constant (a folded Shape) that is an output must
   * not take the output's name for its weight */
  const char **outid = ut_arena_alloc(c->A, sizeof *outid * (gp->n_output + 1));
  if (!outid && !st) st = ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
  for (size_t i = 0; i < gp->n_output && !st; i++)
    if (!(outid[i] = ox_ident(c, gp->output[i]->name)) ||
        (gp->output[i]->name && ox_add_name(c, gp->output[i]->name, outid[i]))) /* no name: refused below */
      st = c->e->code;
  if (!st) st = decode_initializers(c, gp);
  if (!st) st = run_nodes(c, gp);
  if (!st && gp->n_output == 0) st = ox_fail(c, HARP_E_INVALID_ARG, "the graph has no outputs");
  if (!st && ox_flow_active(c)) { /* main's outputs are slots of the host program */
    st = ox_flow_outputs(c, gp, outid);
    return st ? st : ox_dyn_list(c);
  }
  for (size_t i = 0; i < gp->n_output && !st; i++) {
    const char *name = gp->output[i]->name;
    char nm[96];
    ox_printable(name, nm, sizeof nm);
    ox_val *x = name ? ox_find(c, name) : NULL;
    if (!x) return ox_fail(c, HARP_E_DANGLING, "graph output \"%s\" is not computed by any node", nm);
    if (x->bad) continue; /* harp check: its node failed (recorded) */
    hg_val v = x->v <= 0 && !x->gstage && (x->has_t || x->has_i) ? ox_const_value(c, x, false) : ox_value(c, x);
    if (v < 0) return c->e->code;
    if (ox_check(c, hg_output(c->g, outid[i], v))) return c->e->code;
  }
  return st ? st : ox_dyn_list(c); /* the dims left dynamic, for the caller to bind */
}

/* Free what m holds and empty it (m itself is the caller's). */
/* m's dynamic dims freed (m->dyn NULL). */
static void free_dyn(onnx_model *m) {
  for (int i = 0; i < m->ndyn; i++) free(m->dyn[i].input), free(m->dyn[i].sym), free(m->dyn[i].hint);
  free(m->dyn);
  m->dyn = NULL, m->ndyn = 0;
  for (int i = 0; i < m->nbound; i++) free(m->bound[i].input), free(m->bound[i].param);
  free(m->bound);
  m->bound = NULL, m->nbound = 0;
}

/* A failed import of c's model: its graph inputs' dynamic dims met so far
 * taken out of c->m into *dyn, *ndyn (none when they cannot be listed),
 * c's error kept. */
static void take_dyn(ox_ctx *c, onnx_dyn **dyn, int *ndyn) {
  harp_error keep = *c->e;
  if (!c->m->dyn && ox_dyn_list(c)) free_dyn(c->m);
  *c->e = keep;
  *dyn = c->m->dyn, *ndyn = c->m->ndyn;
  c->m->dyn = NULL, c->m->ndyn = 0;
}

static void clear_model(onnx_model *m) {
  hg_program_free(m->program);
  flow_free(m->flow);
  for (int i = 0; i < m->nweights; i++) {
    free(m->weight_ids[i]);
    ut_tensor_free(&m->weights[i]);
  }
  free(m->weight_ids);
  free(m->weights);
  for (int i = 0; i < m->nnames; i++) free(m->names[i].onnx), free(m->names[i].id);
  free(m->names);
  free_dyn(m);
  memset(m, 0, sizeof *m);
}

void onnx_model_free(onnx_model *m) {
  if (m) clear_model(m);
}

const char *onnx_id_of(const onnx_model *m, const char *onnx_name) {
  for (int i = 0; i < m->nnames; i++)
    if (!strcmp(m->names[i].onnx, onnx_name)) return m->names[i].id;
  for (int i = 0; i < m->nnames; i++)
    if (!strcmp(m->names[i].id, onnx_name)) return m->names[i].id;
  return NULL;
}

static harp_status unpack(harp_error *e, const void *data, size_t len, const char *file, Onnx__ModelProto **out) {
  *out = NULL;
  if (len == 0) return ut_fail_at(e, HARP_E_PARSE, file, 0, 0, "empty file: not an ONNX model");
  Onnx__ModelProto *mp = onnx__model_proto__unpack(NULL, len, data);
  if (!mp) return ut_fail_at(e, HARP_E_PARSE, file, 0, 0, "not an ONNX model (the protobuf does not parse: truncated or another format)");
  if (!mp->graph) {
    onnx__model_proto__free_unpacked(mp, NULL);
    return ut_fail_at(e, HARP_E_PARSE, file, 0, 0, "not an ONNX model (no graph)");
  }
  *out = mp;
  return HARP_OK;
}

harp_status ox_import_model(harp_error *e, Onnx__ModelProto *mp, const char *file, const char *dir, const onnx_opts *o,
                          onnx_report *report, onnx_model *out) {
  ox_ctx c = {.e = e, .file = file, .m = out, .opts = o, .dir = dir, .report = report};
  for (int k = 0; o && o->used && k < o->nfixed; k++) o->used[k] = false;
  harp_status st = HARP_OK;
  out->program = hg_program_new();
  c.g = out->program ? hg_program_add_graph(out->program, "main") : NULL;
  if (!c.g) st = ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  if (!st) {
    c.A = out->program->arena;
    st = check_opsets(&c, mp);
  }
  out->opset = c.opset;
  if (!st) st = import_graph(&c, mp->graph);
  st = ox_flow_finish(&c, st, out); /* run-time control flow: out->flow, its segments checked */
  bool failed = report && (report->nrefused || report->nneeds || report->skipped); /* harp check: no whole graph */
  if (!st && !failed && !out->flow) st = hg_program_check(e, out->program);
  if (!st && failed) st = ut_fail(e, HARP_E_UNSUPPORTED, NULL, "the import failed (the report lists why)");
  onnx_dyn *dyn = NULL; /* a failed import for a ShapeSet: its dims, for the caller's box check */
  int ndyn = 0;
  if (st && o && o->nkeep_dynamic) take_dyn(&c, &dyn, &ndyn);
  for (int i = 0; i < c.nvals; i++) ut_tensor_free(&c.vals[i].t);
  free(c.vals);
  ut_strmap_free(&c.byname);
  ut_strmap_free(&c.ids);
  ut_strmap_free(&c.dimsyms);
  ut_strmap_free(&c.uses);
  ut_strmap_free(&c.bound);
  ut_strmap_free(&c.sym_hi);
  free(c.gins);
  free(c.taken);
  onnx__model_proto__free_unpacked(mp, NULL);
  if (st) clear_model(out), out->dyn = dyn, out->ndyn = ndyn;
  return st;
}

harp_status onnx_load_buffer_opts(harp_error *e, const void *data, size_t len, const char *name, const onnx_opts *o,
                                   onnx_model *out) {
  memset(out, 0, sizeof *out);
  const char *file = name ? name : "<onnx>";
  Onnx__ModelProto *mp;
  if (unpack(e, data, len, file, &mp)) return e->code;
  return ox_import_model(e, mp, file, NULL, o, NULL, out);
}

harp_status onnx_load_buffer(harp_error *e, const void *data, size_t len, const char *name, onnx_model *out) {
  return onnx_load_buffer_opts(e, data, len, name, NULL, out);
}

harp_status onnx_load_file(harp_error *e, const char *path, onnx_model *out) {
  return onnx_load_file_opts(e, path, NULL, out);
}

harp_status ox_read_model(harp_error *e, const char *path, Onnx__ModelProto **mp, char **dir) {
  *mp = NULL, *dir = NULL;
  const char *buf = NULL;
  size_t len = 0;
  bool mapped = false;
  if (ut_map_file(e, path, MAX_MODEL_BYTES, &buf, &len, &mapped)) return e->code;
  harp_status st = unpack(e, buf, len, path, mp);
  ut_unmap_file(buf, len, mapped); /* the proto holds copies of its bytes: the file is not needed through the import */
  if (st) return st;
  /* external data is found beside the model */
  const char *slash = strrchr(path, '/');
  size_t dl = slash ? (size_t)(slash - path) : 1;
  *dir = ut_xmalloc(dl + 2); /* "." or "/" fit too */
  if (!*dir) {
    onnx__model_proto__free_unpacked(*mp, NULL);
    *mp = NULL;
    return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  }
  if (slash) memcpy(*dir, path, dl), (*dir)[dl] = 0;
  else strcpy(*dir, ".");
  if (slash == path) strcpy(*dir, "/");
  return HARP_OK;
}

harp_status onnx_load_file_opts(harp_error *e, const char *path, const onnx_opts *o, onnx_model *out) {
  memset(out, 0, sizeof *out);
  Onnx__ModelProto *mp;
  char *dir;
  if (ox_read_model(e, path, &mp, &dir)) return e->code;
  harp_status st = ox_import_model(e, mp, path, dir, o, NULL, out);
  free(dir);
  return st;
}
