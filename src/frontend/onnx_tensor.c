/* onnx_tensor.c — ONNX element types and TensorProto decoding: an
 * initializer's or a Constant's data (typed fields or raw bytes, little
 * endian; external data through onnx_extdata.c) into a weight tensor, or
 * into the integers a shape or axes input carries; counts checked against
 * the dims and the importer's limits.
 * Needs: onnx_int.h, onnx_values.c (errors).  Gives: ox_dtype,
 * ox_type_name, ox_decode_tensor. */
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_int.h"

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
