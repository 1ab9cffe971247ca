/* onnx_load.c — the ONNX frontend's outer half: the protobuf (protobuf-c,
 * code generated from Debian's onnx.proto at build time), the opset check,
 * names mapped to identifiers, graph inputs, initializers decoded into
 * weights or folded constants, the node loop (onnx_ops.c maps each node),
 * and the outputs.
 * Needs: the frontend builder.  Gives: onnx_load_file/_buffer (and _opts). */
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

/* ---- types and tensors ------------------------------------------------------------ */
bool ox_dtype(int oty, tiny_dtype *out) {
  switch (oty) {
  case OX_FLOAT: *out = TINY_FP32; return true;
  case OX_FLOAT16: *out = TINY_FP16; return true;
  case OX_BFLOAT16: *out = TINY_BF16; return true;
  case OX_INT32: case OX_INT64: *out = TINY_I32; return true;
  case OX_BOOL: *out = TINY_BOOL; return true;
  case OX_INT8: *out = TINY_I8; return true;
  case OX_UINT8: *out = TINY_U8; return true;
  default: return false;
  }
}

const char *ox_type_name(int oty) {
  static const char *const names[] = {"undefined", "float", "uint8", "int8", "uint16", "int16", "int32", "int64", "string",
                                      "bool", "float16", "double", "uint32", "uint64", "complex64", "complex128", "bfloat16",
                                      "float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz", "uint4", "int4",
                                      "float4e2m1", "float8e8m0", "uint2", "int2", "float6e2m3", "float6e3m2"};
  return oty >= 0 && oty < (int)(sizeof names / sizeof *names) ? names[oty] : "an unknown type";
}

static int elem_bytes(int oty) {
  switch (oty) {
  case OX_BOOL: case OX_INT8: case OX_UINT8: return 1;
  case OX_FLOAT16: case OX_BFLOAT16: case OX_INT16: case OX_UINT16: return 2;
  case OX_FLOAT: case OX_INT32: case OX_UINT32: return 4;
  case OX_INT64: case OX_UINT64: case OX_DOUBLE: return 8;
  default: return 0;
  }
}

static bool is_int_type(int oty) {
  return oty == OX_INT8 || oty == OX_UINT8 || oty == OX_INT16 || oty == OX_UINT16 || oty == OX_INT32 || oty == OX_INT64 ||
         oty == OX_UINT32 || oty == OX_UINT64;
}

/* Element i of raw little-endian data as an integer. */
static int64_t raw_int(const uint8_t *p, int oty, int64_t i) {
  switch (oty) {
  case OX_INT8: return ((const int8_t *)p)[i];
  case OX_UINT8: case OX_BOOL: return p[i];
  case OX_INT16: { int16_t v; memcpy(&v, p + 2 * i, 2); return v; }
  case OX_UINT16: { uint16_t v; memcpy(&v, p + 2 * i, 2); return v; }
  case OX_INT32: { int32_t v; memcpy(&v, p + 4 * i, 4); return v; }
  case OX_UINT32: { uint32_t v; memcpy(&v, p + 4 * i, 4); return v; }
  default: { int64_t v; memcpy(&v, p + 8 * i, 8); return v; }
  }
}

/* Element i of integer tensor tp (raw: its raw_data, or NULL). */
static int64_t int_at(const Onnx__TensorProto *tp, const uint8_t *raw, int oty, int64_t i) {
  if (raw) return raw_int(raw, oty, i);
  if (oty == OX_INT64) return tp->int64_data[i];
  if (oty == OX_UINT32 || oty == OX_UINT64) return (int64_t)tp->uint64_data[i];
  return tp->int32_data[i];
}

/* Tensor tp (named nm) keeps its bytes in an external file: read them and
 * decode the same tensor with the bytes inside into x. */
static harp_status decode_external(ox_ctx *c, const Onnx__TensorProto *tp, const char *what, const char *nm, ox_val *x) {
  if (!c->dir)
    return ox_fail(c, HARP_E_UNSUPPORTED, "tensor \"%s\" keeps its data in an external file; a model read from memory has "
                   "no directory to find it in (load it from its file)", nm);
  if (tp->has_raw_data && tp->raw_data.len)
    return ox_fail(c, HARP_E_INVALID_ARG, "tensor \"%s\" is external but holds raw_data too", nm);
  uint8_t *buf;
  size_t len;
  if (ox_read_external(c, tp, nm, &buf, &len)) return c->e->code;
  Onnx__TensorProto in = *tp; /* the same tensor with the bytes inside */
  in.has_data_location = 0;
  in.data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__DEFAULT;
  in.n_external_data = 0;
  in.external_data = NULL;
  in.has_raw_data = 1;
  in.raw_data.data = buf;
  in.raw_data.len = len;
  harp_status st = ox_decode_tensor(c, &in, what, x);
  free(buf);
  return st;
}

/* The element count of tp (named nm) into *n, after checking its rank,
 * dims and that its data field holds exactly that many elements. */
static harp_status tensor_count(ox_ctx *c, const Onnx__TensorProto *tp, const char *nm, int64_t *n) {
  int oty = tp->data_type;
  if ((int)tp->n_dims > TINY_MAX_RANK) return ox_fail(c, HARP_E_LIMIT, "tensor \"%s\" has rank %zu (at most %d)", nm, tp->n_dims, TINY_MAX_RANK);
  *n = 1;
  for (size_t i = 0; i < tp->n_dims; i++) {
    if (tp->dims[i] < 0 || tp->dims[i] > OX_MAX_DIM)
      return ox_fail(c, HARP_E_LIMIT, "tensor \"%s\": dim %zu is %" PRId64 " (must be in [0, 2^31))", nm, i, tp->dims[i]);
    if (tp->dims[i] && *n > OX_MAX_NUMEL / tp->dims[i])
      return ox_fail(c, HARP_E_LIMIT, "tensor \"%s\" has more than 2^34 elements", nm);
    *n *= tp->dims[i];
  }
  int eb = elem_bytes(oty);
  if (!eb) return ox_fail(c, HARP_E_UNSUPPORTED, "tensor \"%s\" has element type %s, which harp does not have", nm, ox_type_name(oty));
  /* Where the elements are: raw_data, or the typed field the type uses. */
  size_t have;
  const char *field;
  if (tp->has_raw_data) have = tp->raw_data.len / (size_t)eb, field = "raw_data";
  else if (oty == OX_FLOAT) have = tp->n_float_data, field = "float_data";
  else if (oty == OX_DOUBLE) have = tp->n_double_data, field = "double_data";
  else if (oty == OX_INT64) have = tp->n_int64_data, field = "int64_data";
  else if (oty == OX_UINT32 || oty == OX_UINT64) have = tp->n_uint64_data, field = "uint64_data";
  else have = tp->n_int32_data, field = "int32_data";
  if ((tp->has_raw_data && tp->raw_data.len % (size_t)eb) || have != (size_t)*n)
    return ox_fail(c, HARP_E_INVALID_ARG, "tensor \"%s\": %s holds %zu bytes for %" PRId64 " elements of %s (dims say %" PRId64 ")",
                   nm, field, tp->has_raw_data ? tp->raw_data.len : have * (size_t)eb, (int64_t)have, ox_type_name(oty), *n);
  return HARP_OK;
}

/* The n integers of tp (raw: its raw_data or NULL) as an int32 weight in x,
 * each checked to fit. */
static harp_status decode_int_weight(ox_ctx *c, const Onnx__TensorProto *tp, const uint8_t *raw, const char *nm, int64_t n,
                                     ox_val *x) {
  if (ut_tensor_alloc(c->e, &x->t, TINY_I32, (int)tp->n_dims, tp->dims)) return c->e->code;
  for (int64_t i = 0; i < n; i++) {
    int64_t v = int_at(tp, raw, tp->data_type, i);
    if (v < INT32_MIN || v > INT32_MAX) {
      ut_tensor_free(&x->t);
      return ox_fail(c, HARP_E_LIMIT, "integer tensor \"%s\" holds %" PRId64 " at %" PRId64 ", outside int32 (harp keeps an integer tensor of more "
                     "than %d elements as an int32 weight)", nm, v, i, OX_MAX_INT_CONST);
    }
    ((int32_t *)x->t.data)[i] = (int32_t)v;
  }
  x->has_t = true;
  return HARP_OK;
}

/* The n integers of tp as folded dims in x (shapes, axes, pads). */
static harp_status decode_dims(ox_ctx *c, const Onnx__TensorProto *tp, const uint8_t *raw, int64_t n, ox_val *x) {
  x->has_i = true;
  x->in = n;
  x->iv = ut_arena_alloc(c->A, sizeof *x->iv * (size_t)(n ? n : 1));
  if (!x->iv) return ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
  for (int64_t i = 0; i < n; i++) {
    int64_t v = int_at(tp, raw, tp->data_type, i);
    /* INT64_MAX ("to the end") and the like: far beyond any dim, and in
     * the range dims compute in */
    if (v > ((int64_t)1 << 50)) v = (int64_t)1 << 50;
    if (v < -((int64_t)1 << 50)) v = -((int64_t)1 << 50);
    if (!(x->iv[i] = fe_dim_int(c->A, v))) return ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
  }
  return HARP_OK;
}

/* Fills x->t (allocated, n elements of oty) from tp's data: doubles
 * narrowed to fp32, raw bytes taken over or copied, typed fields unpacked. */
static void fill_tensor(ox_ctx *c, const Onnx__TensorProto *tp, const uint8_t *raw, int oty, int64_t n, ox_val *x) {
  int eb = elem_bytes(oty);
  if (oty == OX_DOUBLE) {
    x->oty = OX_FLOAT; /* harp computes it in fp32 */
    for (int64_t i = 0; i < n; i++) {
      double v;
      if (raw) memcpy(&v, raw + 8 * i, 8);
      else v = tp->double_data[i];
      ((float *)x->t.data)[i] = (float)v;
    }
  } else if (raw && tp == c->take_raw && n && tp->raw_data.len == x->t.nbytes) {
    free(x->t.data); /* calloc'd, not touched: the proto's bytes become the tensor's (one copy fewer) */
    x->t.data = c->take_raw->raw_data.data;
    c->take_raw->raw_data.data = NULL;
    c->take_raw->raw_data.len = 0;
  } else if (raw) {
    if (n) memcpy(x->t.data, raw, (size_t)n * (size_t)eb);
  } else if (oty == OX_FLOAT) {
    if (n) memcpy(x->t.data, tp->float_data, (size_t)n * 4);
  } else {
    for (int64_t i = 0; i < n; i++) { /* fp16, bf16 (low 16 bits), bool in int32_data */
      if (eb == 2) ((uint16_t *)x->t.data)[i] = (uint16_t)tp->int32_data[i];
      else if (oty == OX_BOOL) ((uint8_t *)x->t.data)[i] = tp->int32_data[i] != 0;
      else ((uint8_t *)x->t.data)[i] = (uint8_t)tp->int32_data[i]; /* int8 / uint8: the low byte */
    }
  }
  if (oty == OX_BOOL)
    for (int64_t i = 0; i < n; i++) ((uint8_t *)x->t.data)[i] = ((uint8_t *)x->t.data)[i] != 0;
}

/* Decodes initializer or constant tp (what names it when it has no name)
 * into x: folded dims for small integer tensors, else a tensor. */
harp_status ox_decode_tensor(ox_ctx *c, const Onnx__TensorProto *tp, const char *what, ox_val *x) {
  char nm[96];
  ox_printable(tp->name ? tp->name : what, nm, sizeof nm);
  if ((tp->has_data_location && tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) || tp->n_external_data)
    return decode_external(c, tp, what, nm, x);
  if (tp->segment) return ox_fail(c, HARP_E_UNSUPPORTED, "tensor \"%s\" is segmented", nm);
  int oty = tp->data_type;
  int64_t n = 0;
  if (tensor_count(c, tp, nm, &n)) return c->e->code;
  const uint8_t *raw = tp->has_raw_data ? tp->raw_data.data : NULL;
  x->oty = oty;
  x->irank = (int)tp->n_dims;
  for (size_t i = 0; i < tp->n_dims; i++) x->ishape[i] = tp->dims[i];
  if (is_int_type(oty) && n > OX_MAX_INT_CONST) /* too many to fold: an int32 weight (a table, quantized data) */
    return decode_int_weight(c, tp, raw, nm, n, x);
  if (is_int_type(oty) && oty != OX_INT8 && oty != OX_UINT8) /* 8-bit ones are tensors (quantized weights) */
    return decode_dims(c, tp, raw, n, x);
  tiny_dtype dt = TINY_FP32;
  if (oty != OX_DOUBLE && !ox_dtype(oty, &dt))
    return ox_fail(c, HARP_E_UNSUPPORTED, "tensor \"%s\" has element type %s, which harp does not have", nm, ox_type_name(oty));
  if (ut_tensor_alloc(c->e, &x->t, dt, (int)tp->n_dims, tp->dims)) return c->e->code;
  x->has_t = true;
  fill_tensor(c, tp, raw, oty, n, x);
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

static harp_status count_use(ox_ctx *c, const char *name) {
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

static bool put_use(void *ctx, const char *name) { return count_use(ctx, name) == HARP_OK; }

/* gp's nodes in order (c->gp: the readers of each value, for the folds
 * that look ahead; values read inside subgraphs count too). */
static harp_status run_nodes(ox_ctx *c, Onnx__GraphProto *gp) {
  harp_status st = ox_graph_reads(c, gp, 0, put_use, c);
  c->gp = gp;
  for (size_t i = 0; i < gp->n_output && !st; i++) st = count_use(c, gp->output[i]->name);
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
    ox_val *x = name ? find_val(c, name) : NULL;
    if (!x) return ox_fail(c, HARP_E_DANGLING, "graph output \"%s\" is not computed by any node", nm);
    if (x->bad) continue; /* harp check: its node failed (recorded) */
    hg_val v = x->v <= 0 && !x->gstage && (x->has_t || x->has_i) ? const_value(c, x, false) : ox_value(c, x);
    if (v < 0) return c->e->code;
    if (ox_check(c, hg_output(c->g, outid[i], v))) return c->e->code;
  }
  return st ? st : ox_dyn_list(c); /* the dims left dynamic, for the caller to bind */
}

/* Free what m holds and empty it (m itself is the caller's). */
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
  for (int i = 0; i < m->ndyn; i++) free(m->dyn[i].input), free(m->dyn[i].sym), free(m->dyn[i].hint);
  free(m->dyn);
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
  if (st) clear_model(out);
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
  char *buf = NULL;
  size_t len = 0;
  if (ut_read_file(e, path, MAX_MODEL_BYTES, &buf, &len)) return e->code;
  harp_status st = unpack(e, buf, len, path, mp);
  free(buf); /* the proto holds copies of its bytes: the file is not needed through the import */
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
