/* onnx_int.h — what onnx_load.c (protobuf, graph, initializers) and
 * onnx_ops.c (one mapping per op type) share.  Not public. */
#ifndef HARP_ONNX_INT_H
#define HARP_ONNX_INT_H

#include "fe_int.h"
#include "harp/onnx.h"
#include "onnx.pb-c.h"

/* Integer constants are kept as dims (fe_dim: an integer, or an expression
 * of shape variables once Shape has read a symbolic dim) up to this count;
 * a larger integer initializer is an int32 weight. */
#define OX_MAX_INT_CONST 65536
/* Float tensors computed at import (onnx_fold.c: an anchor grid, a
 * positional table) up to this count; a larger result is built as graph
 * ops instead.  Float constants of at most OX_FOLD_SMALL elements (scalars,
 * scales) take part in folding too; larger ones are weights. */
#define OX_MAX_FOLD ((int64_t)1 << 20)
#define OX_FOLD_SMALL 64
/* One dim of a model's input or initializer; the product of an input's. */
#define OX_MAX_DIM ((int64_t)INT32_MAX)
#define OX_MAX_NUMEL ((int64_t)1 << 34)
/* ConstantOfShape's tensor (a weight: the backend test models build every
 * weight so, VGG-19's fc6 has 2^26.6 elements). */
#define OX_MAX_FILL ((int64_t)1 << 28)

/* ONNX TensorProto.DataType values used here. */
enum {
  OX_FLOAT = 1, OX_UINT8 = 2, OX_INT8 = 3, OX_UINT16 = 4, OX_INT16 = 5, OX_INT32 = 6, OX_INT64 = 7,
  OX_STRING = 8, OX_BOOL = 9, OX_FLOAT16 = 10, OX_DOUBLE = 11, OX_UINT32 = 12, OX_UINT64 = 13, OX_BFLOAT16 = 16
};

/* One ONNX value (by name). */
struct ox_qinfo;
typedef struct ox_val {
  const char *name; /* the ONNX name */
  hg_val v;         /* the graph value; 0 while none was built */
  int oty;          /* ONNX element type */
  bool has_t;       /* float / bool constant data */
  ut_tensor t;
  bool has_i;       /* integer constant data, as dims */
  int irank;
  int64_t ishape[TINY_MAX_RANK];
  int64_t in;
  const fe_dim **iv;
  bool is_init;     /* an initializer (a weight when read as a tensor) */
  bool derived;     /* has_t computed at import (onnx_fold.c): folded further, whatever its size */
  bool dyn;         /* computed from the graph inputs' shapes (Shape, Size and what folds from them) */
  int64_t fden;     /* > 0: a float tensor held as has_i, element k being iv[k] / fden (a size cast to float
                     * and computed with: onnx_fold_fsym.c); 0: integers */
  bool bad;         /* harp check: the output of a node that failed (its readers are skipped) */
  bool bn_folded;   /* a Conv's output whose BatchNormalization was folded into it (onnx_nn.c) */
  bool vacant;      /* defined by a fold that was abandoned: the op's mapping defines it again (onnx_fold.c) */
  bool fq;          /* a QuantizeLinear's output that only DequantizeLinears of the same parameters read: v holds
                     * the dequantized fp32 value, or with qi its integers (onnx_quant.c) */
  struct ox_qinfo *qi; /* what the QDQ fusion knows of it (onnx_qdq.c); NULL: nothing */
  /* GELU as PyTorch exports it (onnx_ops.c): a computed value that is
   * gk * gx; or, with gstage > 0 and no graph value, a partial pattern:
   * 1: erf(gk gx), 2: 1 + erf(gk gx), 3: gcoef * (1 + erf) [* gx if ghasx]
   * (gk ~ 1/√2), built as it stands (ox_value) where the pattern breaks */
  hg_val gx;
  double gk, gcoef;
  int gstage;
  bool ghasx;
  /* control flow (onnx_flow.c): the host slot holding the value + 1 (0:
   * none), and the weight id a materialized initializer took (a later
   * segment reads the weight again by that id) */
  int slot;
  const char *wid;
} ox_val;

/* A graph input as the model declares it, for messages (onnx_shapes.c). */
typedef struct ox_gin {
  const char *name;               /* ONNX name */
  int rank;
  const fe_dim *d[TINY_MAX_RANK]; /* as imported: an integer, or a dynamic dim's shape variable */
  const char *param[TINY_MAX_RANK]; /* a dynamic dim's dim_param (NULL: none) */
  bool given[TINY_MAX_RANK];        /* a dim the file leaves dynamic that the options gave a value (m->bound) */
} ox_gin;
struct ox_flowst; /* onnx_flow.c: the host program being built */

typedef struct ox_ctx {
  harp_error *e;
  const char *file;
  hg_graph *g;
  ut_arena *A;
  ox_val *vals;
  int nvals, cap;
  ut_strmap byname; /* ONNX name -> index in vals (keys live in the proto) */
  ut_strmap ids;    /* harp identifiers taken (keys in the arena) */
  ut_strmap dimsyms; /* dim_param -> index in m->names */
  ut_strmap uses;   /* ONNX name -> how many node inputs and graph outputs read it */
  const Onnx__GraphProto *gp;
  int64_t opset;
  int node_index;   /* the node being imported, for messages */
  const Onnx__NodeProto *node;
  onnx_model *m;
  int wcap, ncap;
  const onnx_opts *opts; /* graph inputs fixed at import (NULL: none) */
  const char *dir;          /* the model file's directory (external data); NULL from memory */
  Onnx__TensorProto *take_raw; /* ox_decode_tensor may keep this proto's raw_data as its tensor's elements */
  /* graph inputs and their shapes (onnx_shapes.c) */
  ox_gin *gins;
  int ngins, gincap;
  ut_strmap bound;          /* dim_param -> value, from opts' shapes and syms */
  ut_strmap sym_hi;         /* a kept dim's symbol -> its keep_dynamic index, where keep_dynamic_hi bounds it */
  bool *taken;              /* opts->shapes[k] is substituted for its graph input */
  onnx_report *report;      /* harp check: record a failure and go on (onnx_check.c) */
  /* Nested graphs (onnx_flow.c).  A subgraph is imported in a scope of its
   * own (vals, byname, uses, gp, node) whose names fall back to the parent's;
   * every other field is shared and handed back when the scope closes.
   * inline_scope: the scope continues its parent's segment (a folded If's
   * branch, an unrolled body); where: the enclosing nodes, for messages. */
  struct ox_ctx *parent;
  bool inline_scope;
  const char *where;
  struct ox_flowst *fl;
} ox_ctx;

/* onnx_values.c (errors, identifiers, the value table, attributes;
 * ox_decode_tensor, ox_dtype, ox_type_name: onnx_tensor.c; the scopes:
 * onnx_load.c) */
/* Fail naming the current node: "node 3 \"name\" (Conv): ...". */
harp_status ox_fail(ox_ctx *c, harp_status code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The builder's error, if any, as the current node's. */
harp_status ox_check(ox_ctx *c, hg_val v);
/* The value of an ONNX name; NULL if none yet. */
ox_val *ox_find(ox_ctx *c, const char *name);
/* How many node inputs and graph outputs read name. */
int ox_uses(const ox_ctx *c, const char *name);
/* One more reader of value name (none when it is empty); NoMemory. */
harp_status ox_count_use(ox_ctx *c, const char *name);
/* Node input i: NULL when absent (past the end or ""); an unknown name fails. */
ox_val *ox_in(ox_ctx *c, int i, bool *failed);
/* Node input i as a graph value (a weight, a literal or a computed value). */
hg_val ox_tensor(ox_ctx *c, int i);
hg_val ox_value(ox_ctx *c, ox_val *x);
/* erf of an fp32 value (onnx_ops_math.c) */
hg_val ox_erf32(ox_ctx *c, hg_val x);
/* the value of a partial GELU mark (onnx_ops.c) */
hg_val ox_gelu_partial(ox_ctx *c, const ox_val *m);
/* Define node output i. */
harp_status ox_def(ox_ctx *c, int i, hg_val v);
ox_val *ox_def_ints(ox_ctx *c, int i, int rank, const int64_t *shape, int64_t n);
ox_val *ox_def_mark(ox_ctx *c, int i); /* an output with no value yet (GELU marks) */
harp_status ox_def_tensor(ox_ctx *c, int i, ut_tensor *t, int oty); /* takes t */
/* A harp identifier for an ONNX name (see harp/onnx.h), registered. */
const char *ox_ident(ox_ctx *c, const char *onnx_name);
/* Decode a TensorProto into x (has_t or has_i). */
harp_status ox_decode_tensor(ox_ctx *c, const Onnx__TensorProto *tp, const char *what, ox_val *x);
/* onnx_extdata.c: the bytes of an external tensor (malloc'd into *buf) */
harp_status ox_read_external(ox_ctx *c, const Onnx__TensorProto *tp, const char *nm, uint8_t **buf, size_t *len);
/* Subgraph scopes (onnx_flow.c uses them): the value table sized for gp;
 * a new value of the scope (a subgraph's input); gp's initializers, the
 * uses of every name (captured ones too) and its nodes, in order. */
harp_status ox_scope_alloc(ox_ctx *c, const Onnx__GraphProto *gp);
ox_val *ox_new_val(ox_ctx *c, const char *name);
harp_status ox_scope_run(ox_ctx *c, Onnx__GraphProto *gp);
/* A constant's value in graph c->g (a weight, or a literal when `literal`). */
hg_val ox_const_value(ox_ctx *c, ox_val *x, bool literal);
/* The harp dtype of an ONNX element type; false if harp has none. */
bool ox_dtype(int oty, tiny_dtype *out);
const char *ox_type_name(int oty);

/* attributes */
const Onnx__AttributeProto *ox_attr(const ox_ctx *c, const char *name);
harp_status ox_attr_int(ox_ctx *c, const char *name, int64_t dflt, int64_t *out);
harp_status ox_attr_float(ox_ctx *c, const char *name, double dflt, double *out);
/* ints: *n = -1 when absent */
harp_status ox_attr_ints(ox_ctx *c, const char *name, int64_t *out, int cap, int *n);
/* string: dflt when absent */
harp_status ox_attr_str(ox_ctx *c, const char *name, const char *dflt, char *out, int cap);

/* An ONNX name as a harp identifier, not registered (see ox_ident). */
void ox_sanitize(const char *onnx_name, char out[128]);
/* A name as it may appear in a message: printable ASCII, shortened. */
void ox_printable(const char *s, char *out, int cap);
/* Record that ONNX name onnx maps to harp identifier id (m->names). */
harp_status ox_add_name(ox_ctx *c, const char *onnx, const char *id);

/* onnx_shapes.c: graph inputs' shapes.  ox_bind_given checks opts' shapes
 * and syms against the graph's inputs and records the dim_params they bind
 * (before any input is imported); ox_input_dims gives input vi's dims (id:
 * its harp name), concrete where given, shape variables where dynamic;
 * ox_dyn_list fills m->dyn with the dims left dynamic, and m->bound with
 * the dynamic dims the options gave values. */
harp_status ox_bind_given(ox_ctx *c, const Onnx__GraphProto *gp);
/* A declared dim: a value (*v), a dim_param (*param), or anonymous (-1, "?", "", none). */
typedef enum { D_FIXED, D_PARAM, D_ANON } ox_dim_kind;
ox_dim_kind ox_kind_of(const Onnx__TensorShapeProto__Dimension *d, int64_t *v, const char **param);
harp_status ox_input_dims(ox_ctx *c, const Onnx__ValueInfoProto *vi, const char *id, int *rank, tiny_dim *dims);
harp_status ox_dyn_list(ox_ctx *c);
/* Fail (UnboundSymbol) because the current node needs d, which is symbolic,
 * as a number: `what` says what it is ("the size of axis 2"); the message
 * names the graph inputs d depends on and the option giving their shapes. */
harp_status ox_need_value(ox_ctx *c, const fe_dim *d, const char *what);
/* Tell opts->needs_data which graph inputs x is computed from (a node
 * needs x's values at import and x is not known). */
void ox_needs_data(ox_ctx *c, const ox_val *x);
/* The same, each graph input's ONNX name to cb(cb_ctx, name). */
void ox_needs_data_cb(ox_ctx *c, const ox_val *x, void (*cb)(void *ctx, const char *name), void *cb_ctx);
/* "--shape x=<batch>x3x<?>x<?>": option, the input's name, its dims (-1:
 * dynamic, named params[i] or "?") into buf. */
void ox_shape_hint(const char *option, const char *name, int rank, const int64_t *dims, const char *const *params, char *buf, size_t cap);
/* d's value, or ox_need_value's failure. */
harp_status ox_known(ox_ctx *c, const fe_dim *d, const char *what, int64_t *out);

/* onnx_fold.c: evaluate the current node at import when every input is
 * known (integers, maybe symbolic, and small or computed float tensors);
 * *done says whether it took the node (else the op's mapping builds it). */
harp_status ox_fold(ox_ctx *c, bool *done);
/* Unsqueeze (un) / Squeeze of the dims `in`: the new dims (onnx_ops.c). */
harp_status ox_squeeze_shape(ox_ctx *c, const fe_shape *in, bool un, fe_shape *out);

/* onnx_load.c: the model file parsed (*dir: its directory, malloc'd);
 * imported (mp freed), with report: go on past failures (harp check);
 * one node: its domain, then its op's mapping. */
harp_status ox_read_model(harp_error *e, const char *path, Onnx__ModelProto **mp, char **dir);
harp_status ox_import_model(harp_error *e, Onnx__ModelProto *mp, const char *file, const char *dir, const onnx_opts *o,
                          onnx_report *report, onnx_model *out);
harp_status ox_import_node(ox_ctx *c);
ox_val *ox_new_val(ox_ctx *c, const char *name);

/* onnx_check.c (harp check, c->report set): import the current node,
 * recording a failure and marking its outputs bad (a node reading a bad
 * value is skipped); ox_check_value_failed: a graph input or initializer
 * that failed (name: its ONNX name). */
harp_status ox_check_node(ox_ctx *c);
harp_status ox_check_value_failed(ox_ctx *c, const char *name, int oty);

/* onnx_ops.c */
harp_status ox_node(ox_ctx *c);
/* Whether harp maps op type `op` (of the default domain). */
bool ox_op_known(const char *op);
/* helpers shared with onnx_nn.c */
const fe_shape *ox_shape_of(ox_ctx *c, hg_val v);
int ox_rank_of(ox_ctx *c, hg_val v);
harp_status ox_need_rank(ox_ctx *c, hg_val v, int lo, int hi, const char *what);
harp_status ox_norm_axis(ox_ctx *c, int64_t axis, int rank, int *out);
/* A float known at import: a one-element float or integer constant. */
bool ox_const_scalar(ox_val *x, double *v);
/* Operand i of an elementwise op: a one-element constant becomes a literal. */
hg_val ox_operand(ox_ctx *c, int i, int other_rank);
/* Input i as integers known at import (required). */
harp_status ox_const_ints(ox_ctx *c, int i, const char *what, int64_t *out, int cap, int *n);
/* onnx_ops_move.c: the literal fill (of type dt) expanded to shape s, whose
 * sizes may be expressions of shape variables. */
hg_val ox_fill_sym(ox_ctx *c, double fill, tiny_dtype dt, const fe_shape *s);
/* onnx_fold_fsym.c: whether d >= 0 at every binding of its sizes (a
 * constant plus non-negative multiples of sizes, after bounding a
 * floor(num / q) subtracted in multiples of q by num / q). */
bool ox_dim_nonneg(ox_ctx *c, const fe_dim *d);
/* Optional input i as integers, else attribute attr; *n = -1 when neither. */
harp_status ox_ints_in_or_attr(ox_ctx *c, int i, const char *attr, int64_t *out, int cap, int *n);

/* onnx_nn.c: a weight named after the node's output 0 and `what`, holding t (taken) */
hg_val ox_weight(ox_ctx *c, const char *what, ut_tensor *t);
/* onnx_nn.c (onnx_attn.c: Attention; onnx_loss.c: the losses): the layer ops, named in onnx_ops.c's dispatch table */
#define OX_NN_OPS(X) \
  X(Attention) X(AveragePool) X(BatchNormalization) X(CausalConvWithState) X(Conv) X(Gemm) X(GlobalAveragePool) X(GlobalMaxPool) X(GroupNormalization) \
  X(InstanceNormalization) X(LRN) X(LayerNormalization) X(LpNormalization) X(LpPool) X(MatMul) X(MaxPool) X(MeanVarianceNormalization) \
  X(NegativeLogLikelihoodLoss) X(RMSNormalization) X(SoftmaxCrossEntropyLoss)
#define OX_DECLARE(n) harp_status ox_op_##n(ox_ctx *c);
OX_NN_OPS(OX_DECLARE)
/* onnx_rnn.c: the recurrent layers, unrolled over their time steps (at most
 * OX_RNN_MAX_STEPS per node, the directions counted: each step costs the
 * compiler ~25 ms and ~2 MB of analysis, an LSTM of H = 128) */
#define OX_RNN_OPS(X) X(GRU) X(LSTM) X(RNN)
#define OX_RNN_MAX_STEPS 1024
OX_RNN_OPS(OX_DECLARE)
#undef OX_DECLARE

/* A reduction's axes (attribute, or input 1 from opset input_from on),
 * keepdims, and whether it is a no-op (noop_with_empty_axes, no axes). */
harp_status ox_reduce_axes(ox_ctx *c, int r, int input_from, int *axes, int *n, bool *keep, bool *noop);

/* onnx_conv3d.c: 3-D Conv (x, w graph values, bias or 0), ConvTranspose
 * (its constant weight; nsp 3, or 1 as 3-D) and pooling of 5-D inputs, the
 * current node's attributes read there. */
harp_status ox_conv3d(ox_ctx *c, hg_val x, hg_val w, hg_val bias);
/* onnx_nn.c: MatMul's rules on two values; a 1-/2-D Conv with the node's attributes (bias 0: none).  -1 on error. */
hg_val ox_matmul(ox_ctx *c, hg_val a, hg_val b);
hg_val ox_conv(ox_ctx *c, hg_val x, hg_val w, hg_val bias);

/* onnx_qdq.c: the QDQ fusion's facts of a value, and the fused Conv / Gemm / MatMul. */
enum { QI_INT = 1, QI_WEIGHT, QI_SCALED };
typedef struct ox_qinfo {
  int kind;
  hg_val qv;        /* QI_INT: the integers, as fp32 */
  double s1, z;     /* QI_INT: the scale and zero point; QI_SCALED: the scale its Q divides by */
  double lo, hi;    /* QI_INT: the range of its type (the integers lie in it); lo > hi: unknown */
  const double *s;  /* QI_WEIGHT: ns scales along axis (ns 1: one for all), zero points 0 */
  int64_t ns;
  int axis;
  bool zin;         /* QI_SCALED: the zero point is added already */
  bool act;         /* QI_SCALED: the Relu / Clip that alone reads it is applied already (its output is the same value) */
  double blo, bhi;  /* QI_SCALED: bounds on round(value) its Q applies before the zero point (an activation's; infinite: none) */
  struct ox_qinfo *q; /* QI_INT: the facts of the Q itself (its DQs' are copies), which keep: */
  hg_val opnd;      /*   the integers' form as an operand (onnx_qdq.c's operand), made once; 0: not yet */
  struct ox_qinfo *moves, *next; /* QI_INT: its integers moved (ox_qdq_move), a list, each made once */
} ox_qinfo;
ox_qinfo *ox_qinfo_new(ox_ctx *c, ox_val *x, int kind);
int ox_qdq_contract(ox_ctx *c, int kind); /* kind 'c', 'g', 'm': 1 fused, 0 not the pattern, -1 error */
/* fp32 integers v (|v| <= 256) through bf16 and back: exact; a contraction then reads bf16 storage. */
hg_val ox_bf16_exact(ox_ctx *c, hg_val v);
int ox_qdq_binary(ox_ctx *c, int op);     /* op '+', '*': the same for Add / Mul */
void ox_qdq_skip_first(ox_ctx *c);        /* at a DQ: a downsampling residual's operand made first */
int ox_qdq_softmax(ox_ctx *c);            /* and for a Softmax (opset 13+) over the last axis */
void ox_qdq_move(ox_ctx *c);              /* at a Reshape / Transpose ... of a DQ's output: its integers moved too */
bool ox_qdq_act_done(ox_ctx *c);          /* at a Relu / Clip a fused output applies already: passed through */
harp_status ox_conv_transpose3d(ox_ctx *c, hg_val x, ox_val *wv, int nsp);
harp_status ox_pool3d(ox_ctx *c, hg_val x, bool is_max, int64_t lp, int nsp); /* nsp 3, or 2 as 3-D */

/* onnx_ops_more.c: a negative Slice step as a positive one on the flipped
 * axis (dim must be known); Gather's indices with negative ones counted
 * from the end. */
harp_status ox_slice_reverse(ox_ctx *c, const fe_dim *dim, int64_t *start, int64_t *end, int64_t *step);
hg_val ox_gather_index(ox_ctx *c, ox_val *iv, hg_val idx, const fe_dim *dim);
/* iota where x equals the reduced extreme m or is NaN, else none: the
 * positions ArgMax / ArgMin / Hardmax pick from (a NaN counts as the
 * extreme, as numpy's argmax has it, so the pick is always in range). */
hg_val ox_extreme_pos(ox_ctx *c, hg_val x, hg_val m, hg_val iota, hg_val none);
/* Max pooling of the padded x [N, C, H, W] with a dilated kernel k, strides
 * s and dilations d into out[0] x out[1] positions. */
hg_val ox_dilated_max_pool(ox_ctx *c, hg_val x, const int64_t *k, const int64_t *s, const int64_t *d, const int64_t *out);

/* onnx_ops_act.c (activations, rounding, softmax family) and
 * onnx_ops_more.c (the rest): the mapping of op type `op`, NULL if none. */
typedef harp_status (*ox_op_fn)(ox_ctx *c);
ox_op_fn ox_find_act(const char *op);
ox_op_fn ox_find_more(const char *op);
ox_op_fn ox_find_move(const char *op); /* onnx_ops_move.c */
/* onnx_ops_signal.c: DFT, STFT, the windows, MelWeightMatrix, AffineGrid */
ox_op_fn ox_find_signal(const char *op);
/* onnx_resize.c: Resize and Upsample */
ox_op_fn ox_find_resize(const char *op);
/* onnx_ops_math.c: trigonometry, hyperbolic functions, SwiGLU, RotaryEmbedding, EyeLike, BitShift, Bitwise* */
ox_op_fn ox_find_math(const char *op);
/* onnx_ops_index.c: GatherND, Scatter*, CumSum, OneHot, TopK, ReverseSequence, TensorScatter, CenterCropPad */
ox_op_fn ox_find_index(const char *op);
/* onnx_flow.c: If, Loop and Scan */
ox_op_fn ox_find_flow(const char *op);
/* onnx_flow_ops.c: ops whose output's shape depends on the values, as host
 * steps: NonMaxSuppression, NonZero, Unique, Compress (ox_find_host); and
 * TopK, Range and Slice where their graph form cannot be built.
 * oxf_runtime_inputs: whether the importer may build host steps and one of
 * the current node's inputs [from, to) is known only at run time. */
ox_op_fn ox_find_host(const char *op);
/* onnx_quant.c: the quantization ops of domain dom (NULL / "": the default; com.microsoft's QLinearAdd, ...) */
ox_op_fn ox_find_quant(const char *dom, const char *op);
/* Sizes known at run time only (a host op's output's dims): whether d is
 * one, whether x holds one (and no size that is not so), and x's integers
 * computed as an int32 tensor of the current segment (x->v). */
bool oxf_dim_runtime(const ox_ctx *c, const fe_dim *d);
bool oxf_val_runtime(const ox_ctx *c, const ox_val *x);
hg_val oxf_ints_value(ox_ctx *c, ox_val *x);
bool oxf_runtime_inputs(ox_ctx *c, int from, int to);
harp_status oxf_host_topk(ox_ctx *c, int axis, bool largest, bool sorted);
harp_status oxf_host_range(ox_ctx *c);
harp_status oxf_host_slice(ox_ctx *c);
/* Whether the importer may build host steps and an input in [from, to)
 * has a size known only at run time; a scatter on the host. */
bool oxf_runtime_shape(ox_ctx *c, int from, int to);
harp_status oxf_host_scatter(ox_ctx *c, bool nd, int axis, int red);
/* Calls put(ctx, name) for each name nodes [from, n) of gp read, and for
 * each their subgraphs read from outside them (captured values). */
harp_status ox_graph_reads(ox_ctx *c, const Onnx__GraphProto *gp, size_t from, bool (*put)(void *ctx, const char *name),
                         void *ctx);
/* Once the model has a host program, main's outputs are slots (outid[i]
 * names output i) instead of graph outputs. */
bool ox_flow_active(const ox_ctx *c);
harp_status ox_flow_outputs(ox_ctx *c, const Onnx__GraphProto *gp, const char *const *outid);
/* The end of an import whose status is st: a host program, if one was
 * made, becomes out->flow (it takes out->program, its first segment);
 * the state is freed either way.  Returns st or the failure. */
harp_status ox_flow_finish(ox_ctx *c, harp_status st, onnx_model *out);
/* log(softmax(x)) along axis (onnx_ops.c), for LogSoftmax and SoftmaxCrossEntropyLoss. */
hg_val ox_log_softmax(ox_ctx *c, hg_val x, int axis);
/* x^k for k a non-zero multiple of 1/4 up to 4 in magnitude, from products,
 * square roots and a reciprocal (or rsqrt), else -1 (onnx_nn.c); with
 * ieee_edges, a root takes -0 and -inf as C's pow does. */
hg_val ox_pow_quarters(hg_graph *g, hg_val x, double k, bool ieee_edges);
/* log(1 + exp(x)), stable at both ends (onnx_ops_act.c), for Softplus and the RNN activations. */
hg_val ox_softplus(ox_ctx *c, hg_val x);
/* Hardmax of x along axis (onnx_ops_act.c), for onnx_ops.c's softmax family. */
hg_val ox_hardmax(ox_ctx *c, hg_val x, int axis);

#endif
