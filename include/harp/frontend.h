/* harp/frontend.h — the high-level graph, the harp DSL, lowering to Tiny IR.
 *
 * A program is a set of named graphs; "main" is the entry point, the others
 * are subgraphs it (or they) call.  A graph is a DAG of high-level ops
 * (seed 000 §1.1): matmul, conv2d, attention, layernorm, softmax, the
 * elementwise functions, reductions, movement (logical only: nothing is
 * copied), cast, gather, and subgraph calls.  Every value has a type
 * {dtype, shape}; a dimension is an integer, a shape variable ("B"), or an
 * expression of them ("(H - 1)/2 + 1") that later binding makes concrete.
 *
 * The builder mirrors the DSL one function per construct, and the DSL
 * (docs/dsl.md) is parsed into calls of this builder:
 *
 *   hg_graph *g = hg_graph_new();                    // program with "main"
 *   hg_shape_var(g, "B", 1);
 *   hg_val x = hg_input(g, "x", TINY_FP32, 2, (tiny_dim[]){tiny_dim_sym("B"), tiny_dim_int(64)});
 *   hg_val w = hg_input(g, "w", TINY_FP32, 2, (tiny_dim[]){tiny_dim_int(64), tiny_dim_int(10)});
 *   hg_output(g, "y", hg_relu(g, hg_matmul(g, x, w)));
 *   if (hg_graph_error(g)->code) ...                 // first error sticks
 *
 * Errors are values: a builder call that fails returns a negative hg_val
 * and records the first error in the graph; every later call then fails
 * too, so a sequence of calls needs one check at the end.
 */
#ifndef HARP_FRONTEND_H
#define HARP_FRONTEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "harp/error.h"
#include "harp/tiny.h"

typedef struct hg_program hg_program;
typedef struct hg_graph hg_graph;

/* A value of one graph: > 0.  HG_NONE marks an absent optional operand
 * (a conv without bias); a negative value is the result of a failed call. */
typedef int hg_val;
#define HG_NONE 0

/* ---- the op table ------------------------------------------------------- */
/* X(ENUM, lower_name, "dsl name", class) — one line per high-level op. */
#define HG_OPS(X)                                  \
  X(INPUT, input, "input", HG_C_LEAF)              \
  X(CONST, const, "const", HG_C_LEAF)              \
  X(RELU, relu, "relu", HG_C_UNARY)                \
  X(GELU, gelu, "gelu", HG_C_UNARY)                \
  X(SILU, silu, "silu", HG_C_UNARY)                \
  X(SIGMOID, sigmoid, "sigmoid", HG_C_UNARY)       \
  X(TANH, tanh, "tanh", HG_C_UNARY)                \
  X(EXP, exp, "exp", HG_C_UNARY)                   \
  X(LOG, log, "log", HG_C_UNARY)                   \
  X(NEG, neg, "neg", HG_C_UNARY)                   \
  X(SQRT, sqrt, "sqrt", HG_C_UNARY)                \
  X(RSQRT, rsqrt, "rsqrt", HG_C_UNARY)             \
  X(RECIP, recip, "recip", HG_C_UNARY)             \
  X(ABS, abs, "abs", HG_C_UNARY)                   \
  X(FLOOR, floor, "floor", HG_C_UNARY)             \
  X(CEIL, ceil, "ceil", HG_C_UNARY)                \
  X(ROUND, round, "round", HG_C_UNARY)             \
  X(ADD, add, "add", HG_C_BINARY)                  \
  X(SUB, sub, "sub", HG_C_BINARY)                  \
  X(MUL, mul, "mul", HG_C_BINARY)                  \
  X(DIV, div, "div", HG_C_BINARY)                  \
  X(MAX, max, "max", HG_C_BINARY)                  \
  X(MIN, min, "min", HG_C_BINARY)                  \
  X(LT, lt, "lt", HG_C_COMPARE)                    \
  X(LE, le, "le", HG_C_COMPARE)                    \
  X(GT, gt, "gt", HG_C_COMPARE)                    \
  X(GE, ge, "ge", HG_C_COMPARE)                    \
  X(EQ, eq, "eq", HG_C_COMPARE)                    \
  X(NE, ne, "ne", HG_C_COMPARE)                    \
  X(WHERE, where, "where", HG_C_WHERE)             \
  X(MULADD, muladd, "muladd", HG_C_WHERE)          \
  X(SUM, sum, "sum", HG_C_REDUCE)                  \
  X(RMAX, rmax, "max", HG_C_REDUCE)                \
  X(RMIN, rmin, "min", HG_C_REDUCE)                \
  X(MEAN, mean, "mean", HG_C_REDUCE)               \
  X(MATMUL, matmul, "matmul", HG_C_NN)             \
  X(CONV2D, conv2d, "conv2d", HG_C_NN)             \
  X(ATTENTION, attention, "attention", HG_C_NN)    \
  X(LAYERNORM, layernorm, "layernorm", HG_C_NN)    \
  X(SOFTMAX, softmax, "softmax", HG_C_NN)          \
  X(MAX_POOL2D, max_pool2d, "max_pool2d", HG_C_NN) \
  X(AVG_POOL2D, avg_pool2d, "avg_pool2d", HG_C_NN) \
  X(RESHAPE, reshape, "reshape", HG_C_MOVE)        \
  X(PERMUTE, permute, "permute", HG_C_MOVE)        \
  X(EXPAND, expand, "expand", HG_C_MOVE)           \
  X(PAD, pad, "pad", HG_C_MOVE)                    \
  X(SLICE, slice, "slice", HG_C_MOVE)              \
  X(FLIP, flip, "flip", HG_C_MOVE)                 \
  X(CONCAT, concat, "concat", HG_C_MOVE)           \
  X(CAST, cast, "cast", HG_C_OTHER)                \
  X(GATHER, gather, "gather", HG_C_OTHER)          \
  X(CALL, call, "call", HG_C_CALL)                 \
  X(PROJ, proj, "proj", HG_C_CALL)

typedef enum hg_op_class {
  HG_C_LEAF,    /* parameters and scalar constants */
  HG_C_UNARY,   /* elementwise, one tensor */
  HG_C_BINARY,  /* elementwise, two tensors, numpy broadcasting */
  HG_C_COMPARE, /* like BINARY, result bool */
  HG_C_WHERE,   /* where(cond, a, b); muladd(a, b, c) = a b + c rounded once */
  HG_C_REDUCE,  /* over axes, keepdim */
  HG_C_NN,      /* the contraction / normalization ops */
  HG_C_MOVE,    /* logical movement */
  HG_C_OTHER,   /* cast, gather */
  HG_C_CALL     /* subgraph call and the selection of one of its outputs */
} hg_op_class;

typedef enum hg_op {
#define HG_X_OP(e, l, n, c) HG_OP_##e,
  HG_OPS(HG_X_OP)
#undef HG_X_OP
  HG_OP_COUNT
} hg_op;

const char *hg_op_name(hg_op op); /* the DSL name ("max" for both MAX and RMAX) */
hg_op_class hg_op_class_of(hg_op op);

/* ---- programs and graphs ------------------------------------------------ */
hg_program *hg_program_new(void);
void hg_program_free(hg_program *p);
/* A new, empty graph in p.  NULL if the name is taken, not an identifier, or
 * on allocation failure (see hg_program_error). */
hg_graph *hg_program_add_graph(hg_program *p, const char *name);
hg_graph *hg_program_find(const hg_program *p, const char *name); /* NULL if none */
int hg_program_ngraphs(const hg_program *p);
hg_graph *hg_program_graph_at(const hg_program *p, int i);
const harp_error *hg_program_error(const hg_program *p);

/* A program holding one graph named "main"; hg_graph_free frees the program. */
hg_graph *hg_graph_new(void);
void hg_graph_free(hg_graph *g);
hg_program *hg_graph_program(const hg_graph *g);
const char *hg_graph_name(const hg_graph *g);
/* The graph's first error (code HARP_OK if none). */
const harp_error *hg_graph_error(const hg_graph *g);

/* Declare a shape variable with a default value (dflt < 0: no default).
 * Symbols used in hg_input dims are declared implicitly without default. */
harp_status hg_shape_var(hg_graph *g, const char *name, int64_t dflt);

/* ---- values ------------------------------------------------------------- */
/* A parameter: dims are integers or shape variables (tiny_dim_sym). */
hg_val hg_input(hg_graph *g, const char *name, tiny_dtype dt, int rank, const tiny_dim *dims);
/* A scalar literal.  It takes the dtype of the tensor it meets in an
 * elementwise op (f32 when used alone). */
hg_val hg_const(hg_graph *g, double v);
/* A rank-0 tensor of a fixed dtype. */
hg_val hg_const_typed(hg_graph *g, double v, tiny_dtype dt);
/* Declare output `name` of the graph (outputs are numbered in call order). */
hg_val hg_output(hg_graph *g, const char *name, hg_val v);

/* The dtype and rank of a value; the dims as text ("B", "64", "H/2"). */
tiny_dtype hg_val_dtype(const hg_graph *g, hg_val v);
int hg_val_rank(const hg_graph *g, hg_val v);
/* dim i of v as text into buf; false if v or i is out of range. */
bool hg_val_dim_text(const hg_graph *g, hg_val v, int i, char *buf, int cap);
/* Name a value (the DSL variable it is bound to; used for Tiny ids). */
hg_val hg_name(hg_graph *g, hg_val v, const char *name);

/* ---- elementwise -------------------------------------------------------- */
/* relu gelu silu sigmoid tanh exp log neg sqrt rsqrt recip abs floor ceil
 * round (to the nearest integer, halves to even) */
hg_val hg_unary(hg_graph *g, hg_op op, hg_val x);
/* add sub mul div max min, and the comparisons lt le gt ge eq ne (bool
 * result); operands broadcast like numpy (right-aligned, size 1 stretches). */
hg_val hg_binary(hg_graph *g, hg_op op, hg_val a, hg_val b);
hg_val hg_where(hg_graph *g, hg_val cond, hg_val a, hg_val b);
/* a * b + c rounded once (a fused multiply-add, Tiny MULADD): floats, of one
 * dtype (number literals take it), numpy broadcasting. */
hg_val hg_muladd(hg_graph *g, hg_val a, hg_val b, hg_val c);

/* ---- reductions (sum, rmax, rmin, mean) ---------------------------------- */
/* axes may be negative (from the end); naxes == 0 reduces every axis. */
hg_val hg_reduce(hg_graph *g, hg_op op, hg_val x, const int *axes, int naxes, bool keepdim);

/* ---- contractions and normalizations ------------------------------------ */
/* a[..., M, K] @ b[..., K, N] -> [..., M, N]; batch dims broadcast. */
hg_val hg_matmul(hg_graph *g, hg_val a, hg_val b);

/* Zero fields mean the defaults (stride 1, no padding, dilation 1, one group,
 * no bias); pass NULL for all defaults. */
typedef struct hg_conv2d_opts {
  hg_val bias;        /* [Cout] or HG_NONE */
  int64_t stride[2];  /* h, w */
  int64_t pad[4];     /* top, bottom, left, right */
  int64_t dilation[2];
  int64_t groups;
} hg_conv2d_opts;
/* x[N, C, H, W] (NCHW), w[Cout, C/groups, Kh, Kw] -> [N, Cout, Oh, Ow]. */
hg_val hg_conv2d(hg_graph *g, hg_val x, hg_val w, const hg_conv2d_opts *o);

typedef struct hg_attention_opts {
  int heads;   /* 0 or 1: one head; h > 1 splits the last axis into h heads */
  bool causal; /* key j is visible to query i iff j <= i + (N - M) */
  hg_val mask; /* additive, broadcastable to [..., heads, M, N], or HG_NONE */
  double scale; /* 0: 1/sqrt(head dim) */
} hg_attention_opts;
/* q[..., M, E], k[..., N, E], v[..., N, Ev] -> [..., M, Ev]:
 * softmax(q k^T * scale + mask) v per head. */
hg_val hg_attention(hg_graph *g, hg_val q, hg_val k, hg_val v, const hg_attention_opts *o);

/* Normalizes over axes [axis, rank); gamma/beta (optional) have those dims. */
hg_val hg_layernorm(hg_graph *g, hg_val x, hg_val gamma, hg_val beta, int axis, double eps);
hg_val hg_softmax(hg_graph *g, hg_val x, int axis);

typedef struct hg_pool2d_opts {
  int64_t kernel[2];
  int64_t stride[2]; /* 0: the kernel size */
} hg_pool2d_opts;
hg_val hg_max_pool2d(hg_graph *g, hg_val x, const hg_pool2d_opts *o); /* NCHW */
hg_val hg_avg_pool2d(hg_graph *g, hg_val x, const hg_pool2d_opts *o);

/* ---- movement (logical) ------------------------------------------------- */
/* At most one dim may be tiny_dim_int(-1): inferred from the element count. */
hg_val hg_reshape(hg_graph *g, hg_val x, int rank, const tiny_dim *dims);
hg_val hg_permute(hg_graph *g, hg_val x, const int *perm, int n);
/* numpy broadcast_to */
hg_val hg_expand(hg_graph *g, hg_val x, int rank, const tiny_dim *dims);
/* One (lo, hi) pair per axis, both >= 0. */
hg_val hg_pad(hg_graph *g, hg_val x, const int64_t *lo, const int64_t *hi, int n, double value);
/* Along axes[i] (axes NULL: 0..n-1) keep start, start+step, ... < end.
 * Negative start/end count from the end; end = INT64_MAX means "to the end";
 * steps NULL means 1; steps must be >= 1 (use flip to reverse). */
hg_val hg_slice(hg_graph *g, hg_val x, int n, const int *axes, const int64_t *starts, const int64_t *ends,
                const int64_t *steps);
hg_val hg_flip(hg_graph *g, hg_val x, const int *axes, int n);
hg_val hg_concat(hg_graph *g, const hg_val *xs, int n, int axis);

hg_val hg_cast(hg_graph *g, hg_val x, tiny_dtype to);
/* torch.gather: out[i..] = x[i.. with axis replaced by index[i..]]; index is
 * i32 with x's rank.  Data-dependent: a Non-SCoP op for the later layers. */
hg_val hg_gather(hg_graph *g, hg_val x, hg_val index, int axis);

/* ---- subgraphs ---------------------------------------------------------- */
/* Call callee (a graph of the same program) with one argument per parameter.
 * The callee's shape variables are bound from the argument shapes.  outs
 * (may be NULL) receives the callee's outputs, nouts of them at most.
 * Returns the first output.  A graph may call itself; the recursion depth
 * is checked when the program is lowered (limit HG_MAX_CALL_DEPTH). */
hg_val hg_call(hg_graph *g, hg_graph *callee, const hg_val *args, int nargs, hg_val *outs, int nouts);
#define HG_MAX_CALL_DEPTH 10

/* Convenience wrappers, one per op: hg_relu(g, x), hg_add(g, a, b), ... */
static inline hg_val hg_relu(hg_graph *g, hg_val x) { return hg_unary(g, HG_OP_RELU, x); }
static inline hg_val hg_gelu(hg_graph *g, hg_val x) { return hg_unary(g, HG_OP_GELU, x); }
static inline hg_val hg_silu(hg_graph *g, hg_val x) { return hg_unary(g, HG_OP_SILU, x); }
static inline hg_val hg_sigmoid(hg_graph *g, hg_val x) { return hg_unary(g, HG_OP_SIGMOID, x); }
static inline hg_val hg_tanh(hg_graph *g, hg_val x) { return hg_unary(g, HG_OP_TANH, x); }
static inline hg_val hg_exp(hg_graph *g, hg_val x) { return hg_unary(g, HG_OP_EXP, x); }
static inline hg_val hg_log(hg_graph *g, hg_val x) { return hg_unary(g, HG_OP_LOG, x); }
static inline hg_val hg_neg(hg_graph *g, hg_val x) { return hg_unary(g, HG_OP_NEG, x); }
static inline hg_val hg_sqrt(hg_graph *g, hg_val x) { return hg_unary(g, HG_OP_SQRT, x); }
static inline hg_val hg_rsqrt(hg_graph *g, hg_val x) { return hg_unary(g, HG_OP_RSQRT, x); }
static inline hg_val hg_recip(hg_graph *g, hg_val x) { return hg_unary(g, HG_OP_RECIP, x); }
static inline hg_val hg_abs(hg_graph *g, hg_val x) { return hg_unary(g, HG_OP_ABS, x); }
static inline hg_val hg_floor(hg_graph *g, hg_val x) { return hg_unary(g, HG_OP_FLOOR, x); }
static inline hg_val hg_ceil(hg_graph *g, hg_val x) { return hg_unary(g, HG_OP_CEIL, x); }
static inline hg_val hg_round(hg_graph *g, hg_val x) { return hg_unary(g, HG_OP_ROUND, x); }
static inline hg_val hg_add(hg_graph *g, hg_val a, hg_val b) { return hg_binary(g, HG_OP_ADD, a, b); }
static inline hg_val hg_sub(hg_graph *g, hg_val a, hg_val b) { return hg_binary(g, HG_OP_SUB, a, b); }
static inline hg_val hg_mul(hg_graph *g, hg_val a, hg_val b) { return hg_binary(g, HG_OP_MUL, a, b); }
static inline hg_val hg_div(hg_graph *g, hg_val a, hg_val b) { return hg_binary(g, HG_OP_DIV, a, b); }
static inline hg_val hg_max(hg_graph *g, hg_val a, hg_val b) { return hg_binary(g, HG_OP_MAX, a, b); }
static inline hg_val hg_min(hg_graph *g, hg_val a, hg_val b) { return hg_binary(g, HG_OP_MIN, a, b); }
static inline hg_val hg_sum(hg_graph *g, hg_val x, const int *axes, int n, bool keepdim) {
  return hg_reduce(g, HG_OP_SUM, x, axes, n, keepdim);
}
static inline hg_val hg_mean(hg_graph *g, hg_val x, const int *axes, int n, bool keepdim) {
  return hg_reduce(g, HG_OP_MEAN, x, axes, n, keepdim);
}

/* ---- the DSL ------------------------------------------------------------ */
/* One located diagnostic of the loader. */
typedef struct hg_diag {
  harp_status code;
  int line, col;
  char msg[256];
} hg_diag;

#define HG_MAX_DIAGS 32
typedef struct hg_diags {
  int n;         /* diagnostics kept (at most HG_MAX_DIAGS) */
  int dropped;   /* further ones not kept */
  hg_diag d[HG_MAX_DIAGS];
} hg_diags;

/* Parse and check a harp DSL program (docs/dsl.md).  The parser recovers and
 * reports every error it finds: e gets the first one's code and position,
 * and e->snippet its source line and caret followed by the others, each as
 * "file:line:col: error[Name]: message", source line, caret.  HARP_E_PARSE
 * for syntax; semantic errors carry their own code (UnknownOp, ArityMismatch,
 * BroadcastMismatch, DanglingRef for undefined names, UnboundSymbol for bad
 * shape variables, LimitExceeded for recursion deeper than
 * HG_MAX_CALL_DEPTH...).  diags (may be NULL) receives them all. */
harp_status hg_harp_load_text(harp_error *e, const char *text, size_t len, const char *filename, hg_program **out);
harp_status hg_harp_load_text_diags(harp_error *e, const char *text, size_t len, const char *filename,
                                  hg_program **out, hg_diags *diags);
harp_status hg_harp_load_file(harp_error *e, const char *path, hg_program **out);

/* Whole-program checks the builder cannot make call by call: a "main"
 * exists, every graph returns all its outputs, and calls reachable from
 * main's outputs nest at most HG_MAX_CALL_DEPTH deep. */
harp_status hg_program_check(harp_error *e, const hg_program *p);

/* DSL text for p (malloc'd; NULL on allocation failure): subgraphs first,
 * then main.  hg_harp_load_text(hg_decompile(p)) gives a program equal to p
 * (hg_program_equal). */
char *hg_decompile(const hg_program *p);

/* Structural equality: same graphs, signatures and shape variables, and the
 * same DAG of ops and attributes from the outputs back (value names are
 * ignored).  On difference, why (may be NULL) says where. */
bool hg_program_equal(const hg_program *a, const hg_program *b, char *why, int cap);

/* Bind main's shape variables from the actual shape of parameter `param`
 * (as the CLI does with an input file); InputMismatch when it does not fit. */
harp_status hg_program_bind_input(harp_error *e, const hg_program *p, const char *param, int rank, const int64_t *dims,
                                tiny_symtab *syms);

/* ---- lowering ------------------------------------------------------------ */
/* Lower main (subgraph calls inlined) into a new Tiny graph.  Shapes keep the
 * DSL's symbols; INPUT tensor_ids are the parameter names; the outputs are
 * marked in declaration order, each produced by a node whose id is the
 * output's name.  defaults (may be NULL; must be initialised) receives the
 * default bindings of main's shape variables.  The result passes
 * tiny_prepare() once its symbols are bound (and with allow_unknown before).
 * A dimension that is an expression of symbols (a strided conv's output
 * height) cannot be written into a Tiny arg: ops that need one report
 * HARP_E_UNSUPPORTED unless `bind` gives the symbols' values, in which case
 * such dimensions are written as integers. */
harp_status hg_lower(harp_error *e, const hg_program *p, tiny_graph **out, tiny_symtab *defaults);
harp_status hg_lower_bound(harp_error *e, const hg_program *p, const tiny_symtab *bind, tiny_graph **out,
                         tiny_symtab *defaults);
/* hg_lower, and where that needs values (HARP_E_UNSUPPORTED) lower again
 * with bindings: those `fill` puts into bind (the caller's --sym, input
 * shapes; may be NULL), then main's defaults for the symbols still unbound.
 * An error from fill is returned in place of the first one. */
typedef harp_status (*hg_bind_fill)(harp_error *e, tiny_symtab *bind, void *ctx);
harp_status hg_lower_or_bind(harp_error *e, const hg_program *p, hg_bind_fill fill, void *ctx, tiny_graph **out,
                           tiny_symtab *defaults);
/* hg_lower_or_bind for a ShapeSet: a dim that is an expression of symbols
 * left unbound (a strided conv's (H + 1)/2, a Reshape's n/4) becomes a
 * derived symbol of the Tiny graph (tiny_dsym, named "ds_" and the
 * expression spelt as an identifier, "ds_H_p1_d2") instead of an error.
 * A model that lowers without one gives the same graph as hg_lower_or_bind. */
harp_status hg_lower_derive(harp_error *e, const hg_program *p, hg_bind_fill fill, void *ctx, tiny_graph **out,
                            tiny_symtab *defaults);

/* ---- dumps -------------------------------------------------------------- */
/* `--dump frontend`: stable JSON (malloc'd). */
char *hg_frontend_json(const hg_program *p);
/* Graphviz DOT (malloc'd): the frontend program (one cluster per graph), and
 * a Tiny graph (after tiny_prepare it shows shapes and dtypes). */
char *hg_frontend_dot(const hg_program *p);
char *hg_tiny_dot(const tiny_graph *g);

#endif
