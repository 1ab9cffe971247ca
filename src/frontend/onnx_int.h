/* onnx_int.h — what onnx_load.c (protobuf, graph, initializers) and
 * onnx_ops.c (one mapping per op type) share.  Not public. */
#ifndef HARP_ONNX_INT_H
#define HARP_ONNX_INT_H

#include "fe_int.h"
#include "harp/onnx.h"
#include "onnx.pb-c.h"

/* Integer constants are kept as dims (fe_dim: an integer, or an expression
 * of shape variables once Shape has read a symbolic dim) up to this count. */
#define OX_MAX_INT_CONST 65536
/* One dim of a model's input or initializer; the product of an input's. */
#define OX_MAX_DIM ((int64_t)INT32_MAX)
#define OX_MAX_NUMEL ((int64_t)1 << 34)

/* ONNX TensorProto.DataType values used here. */
enum {
  OX_FLOAT = 1, OX_UINT8 = 2, OX_INT8 = 3, OX_UINT16 = 4, OX_INT16 = 5, OX_INT32 = 6, OX_INT64 = 7,
  OX_STRING = 8, OX_BOOL = 9, OX_FLOAT16 = 10, OX_DOUBLE = 11, OX_UINT32 = 12, OX_UINT64 = 13, OX_BFLOAT16 = 16
};

/* One ONNX value (by name). */
typedef struct ox_val {
  const char *name; /* the ONNX name */
  hp_val v;         /* the graph value; 0 while none was built */
  int oty;          /* ONNX element type */
  bool has_t;       /* float / bool constant data */
  hp_tensor t;
  bool has_i;       /* integer constant data, as dims */
  int irank;
  int64_t ishape[TINY_MAX_RANK];
  int64_t in;
  const fe_dim **iv;
  bool is_init;     /* an initializer (a weight when read as a tensor) */
  /* GELU as PyTorch exports it (onnx_ops.c): a computed value that is
   * gk * gx; or, with gstage > 0 and no graph value, a partial pattern:
   * 1: erf(gx/√2), 2: 1 + erf(gx/√2), 3: gcoef * (1 + erf) [* gx if ghasx] */
  hp_val gx;
  double gk, gcoef;
  int gstage;
  bool ghasx;
} ox_val;

typedef struct ox_ctx {
  hp_error *e;
  const char *file;
  hp_graph *g;
  hp_arena *A;
  ox_val *vals;
  int nvals, cap;
  hp_strmap byname; /* ONNX name -> index in vals (keys live in the proto) */
  hp_strmap ids;    /* harp identifiers taken (keys in the arena) */
  hp_strmap dimsyms; /* dim_param -> index in m->names */
  int64_t opset;
  int node_index;   /* the node being imported, for messages */
  const Onnx__NodeProto *node;
  hp_onnx_model *m;
  int wcap, ncap;
} ox_ctx;

/* onnx_load.c */
/* Fail naming the current node: "node 3 \"name\" (Conv): ...". */
hp_status ox_fail(ox_ctx *c, hp_status code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The builder's error, if any, as the current node's. */
hp_status ox_check(ox_ctx *c, hp_val v);
/* Node input i: NULL when absent (past the end or ""); an unknown name fails. */
ox_val *ox_in(ox_ctx *c, int i, bool *failed);
/* Node input i as a graph value (a weight, a literal or a computed value). */
hp_val ox_tensor(ox_ctx *c, int i);
hp_val ox_value(ox_ctx *c, ox_val *x);
/* Define node output i. */
hp_status ox_def(ox_ctx *c, int i, hp_val v);
ox_val *ox_def_ints(ox_ctx *c, int i, int rank, const int64_t *shape, int64_t n);
ox_val *ox_def_mark(ox_ctx *c, int i); /* an output with no value yet (GELU marks) */
hp_status ox_def_tensor(ox_ctx *c, int i, hp_tensor *t, int oty); /* takes t */
/* A harp identifier for an ONNX name (see harp/onnx.h), registered. */
const char *ox_ident(ox_ctx *c, const char *onnx_name);
/* Decode a TensorProto into x (has_t or has_i). */
hp_status ox_decode_tensor(ox_ctx *c, const Onnx__TensorProto *tp, const char *what, ox_val *x);
/* The harp dtype of an ONNX element type; false if harp has none. */
bool ox_dtype(int oty, tiny_dtype *out);
const char *ox_type_name(int oty);

/* attributes */
const Onnx__AttributeProto *ox_attr(const ox_ctx *c, const char *name);
hp_status ox_attr_int(ox_ctx *c, const char *name, int64_t dflt, int64_t *out);
hp_status ox_attr_float(ox_ctx *c, const char *name, double dflt, double *out);
/* ints: *n = -1 when absent */
hp_status ox_attr_ints(ox_ctx *c, const char *name, int64_t *out, int cap, int *n);
/* string: dflt when absent */
hp_status ox_attr_str(ox_ctx *c, const char *name, const char *dflt, char *out, int cap);

/* onnx_ops.c */
hp_status ox_node(ox_ctx *c);

#endif
