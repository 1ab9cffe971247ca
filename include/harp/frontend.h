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
 *   hp_graph *g = hp_graph_new();                    // program with "main"
 *   hp_shape_var(g, "B", 1);
 *   hp_val x = hp_input(g, "x", TINY_FP32, 2, (tiny_dim[]){tiny_dim_sym("B"), tiny_dim_int(64)});
 *   hp_val w = hp_input(g, "w", TINY_FP32, 2, (tiny_dim[]){tiny_dim_int(64), tiny_dim_int(10)});
 *   hp_output(g, "y", hp_relu(g, hp_matmul(g, x, w)));
 *   if (hp_graph_error(g)->code) ...                 // first error sticks
 *
 * Errors are values: a builder call that fails returns a negative hp_val
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

typedef struct hp_program hp_program;
typedef struct hp_graph hp_graph;

/* A value of one graph: > 0.  HP_NONE marks an absent optional operand
 * (a conv without bias); a negative value is the result of a failed call. */
typedef int hp_val;
#define HP_NONE 0

/* ---- the op table ------------------------------------------------------- */
/* X(ENUM, lower_name, "dsl name", class) — one line per high-level op. */
#define HP_OPS(X)                                  \
  X(INPUT, input, "input", HP_C_LEAF)              \
  X(CONST, const, "const", HP_C_LEAF)              \
  X(RELU, relu, "relu", HP_C_UNARY)                \
  X(GELU, gelu, "gelu", HP_C_UNARY)                \
  X(SILU, silu, "silu", HP_C_UNARY)                \
  X(SIGMOID, sigmoid, "sigmoid", HP_C_UNARY)       \
  X(TANH, tanh, "tanh", HP_C_UNARY)                \
  X(EXP, exp, "exp", HP_C_UNARY)                   \
  X(LOG, log, "log", HP_C_UNARY)                   \
  X(NEG, neg, "neg", HP_C_UNARY)                   \
  X(SQRT, sqrt, "sqrt", HP_C_UNARY)                \
  X(RSQRT, rsqrt, "rsqrt", HP_C_UNARY)             \
  X(RECIP, recip, "recip", HP_C_UNARY)             \
  X(ABS, abs, "abs", HP_C_UNARY)                   \
  X(FLOOR, floor, "floor", HP_C_UNARY)             \
  X(CEIL, ceil, "ceil", HP_C_UNARY)                \
  X(ROUND, round, "round", HP_C_UNARY)             \
  X(ADD, add, "add", HP_C_BINARY)                  \
  X(SUB, sub, "sub", HP_C_BINARY)                  \
  X(MUL, mul, "mul", HP_C_BINARY)                  \
  X(DIV, div, "div", HP_C_BINARY)                  \
  X(MAX, max, "max", HP_C_BINARY)                  \
  X(MIN, min, "min", HP_C_BINARY)                  \
  X(LT, lt, "lt", HP_C_COMPARE)                    \
  X(LE, le, "le", HP_C_COMPARE)                    \
  X(GT, gt, "gt", HP_C_COMPARE)                    \
  X(GE, ge, "ge", HP_C_COMPARE)                    \
  X(EQ, eq, "eq", HP_C_COMPARE)                    \
  X(NE, ne, "ne", HP_C_COMPARE)                    \
  X(WHERE, where, "where", HP_C_WHERE)             \
  X(SUM, sum, "sum", HP_C_REDUCE)                  \
  X(RMAX, rmax, "max", HP_C_REDUCE)                \
  X(RMIN, rmin, "min", HP_C_REDUCE)                \
  X(MEAN, mean, "mean", HP_C_REDUCE)               \
  X(MATMUL, matmul, "matmul", HP_C_NN)             \
  X(CONV2D, conv2d, "conv2d", HP_C_NN)             \
  X(ATTENTION, attention, "attention", HP_C_NN)    \
  X(LAYERNORM, layernorm, "layernorm", HP_C_NN)    \
  X(SOFTMAX, softmax, "softmax", HP_C_NN)          \
  X(MAX_POOL2D, max_pool2d, "max_pool2d", HP_C_NN) \
  X(AVG_POOL2D, avg_pool2d, "avg_pool2d", HP_C_NN) \
  X(RESHAPE, reshape, "reshape", HP_C_MOVE)        \
  X(PERMUTE, permute, "permute", HP_C_MOVE)        \
  X(EXPAND, expand, "expand", HP_C_MOVE)           \
  X(PAD, pad, "pad", HP_C_MOVE)                    \
  X(SLICE, slice, "slice", HP_C_MOVE)              \
  X(FLIP, flip, "flip", HP_C_MOVE)                 \
  X(CONCAT, concat, "concat", HP_C_MOVE)           \
  X(CAST, cast, "cast", HP_C_OTHER)                \
  X(GATHER, gather, "gather", HP_C_OTHER)          \
  X(CALL, call, "call", HP_C_CALL)                 \
  X(PROJ, proj, "proj", HP_C_CALL)

typedef enum hp_op_class {
  HP_C_LEAF,    /* parameters and scalar constants */
  HP_C_UNARY,   /* elementwise, one tensor */
  HP_C_BINARY,  /* elementwise, two tensors, numpy broadcasting */
  HP_C_COMPARE, /* like BINARY, result bool */
  HP_C_WHERE,   /* where(cond, a, b) */
  HP_C_REDUCE,  /* over axes, keepdim */
  HP_C_NN,      /* the contraction / normalization ops */
  HP_C_MOVE,    /* logical movement */
  HP_C_OTHER,   /* cast, gather */
  HP_C_CALL     /* subgraph call and the selection of one of its outputs */
} hp_op_class;

typedef enum hp_op {
#define HP_X_OP(e, l, n, c) HP_OP_##e,
  HP_OPS(HP_X_OP)
#undef HP_X_OP
  HP_OP_COUNT
} hp_op;

const char *hp_op_name(hp_op op); /* the DSL name ("max" for both MAX and RMAX) */
hp_op_class hp_op_class_of(hp_op op);

/* ---- programs and graphs ------------------------------------------------ */
hp_program *hp_program_new(void);
void hp_program_free(hp_program *p);
/* A new, empty graph in p.  NULL if the name is taken, not an identifier, or
 * on allocation failure (see hp_program_error). */
hp_graph *hp_program_add_graph(hp_program *p, const char *name);
hp_graph *hp_program_find(const hp_program *p, const char *name); /* NULL if none */
int hp_program_ngraphs(const hp_program *p);
hp_graph *hp_program_graph_at(const hp_program *p, int i);
const hp_error *hp_program_error(const hp_program *p);

/* A program holding one graph named "main"; hp_graph_free frees the program. */
hp_graph *hp_graph_new(void);
void hp_graph_free(hp_graph *g);
hp_program *hp_graph_program(const hp_graph *g);
const char *hp_graph_name(const hp_graph *g);
/* The graph's first error (code HP_OK if none). */
const hp_error *hp_graph_error(const hp_graph *g);

/* Declare a shape variable with a default value (dflt < 0: no default).
 * Symbols used in hp_input dims are declared implicitly without default. */
hp_status hp_shape_var(hp_graph *g, const char *name, int64_t dflt);

/* ---- values ------------------------------------------------------------- */
/* A parameter: dims are integers or shape variables (tiny_dim_sym). */
hp_val hp_input(hp_graph *g, const char *name, tiny_dtype dt, int rank, const tiny_dim *dims);
/* A scalar literal.  It takes the dtype of the tensor it meets in an
 * elementwise op (f32 when used alone). */
hp_val hp_const(hp_graph *g, double v);
/* A rank-0 tensor of a fixed dtype. */
hp_val hp_const_typed(hp_graph *g, double v, tiny_dtype dt);
/* Declare output `name` of the graph (outputs are numbered in call order). */
hp_val hp_output(hp_graph *g, const char *name, hp_val v);

/* The dtype and rank of a value; the dims as text ("B", "64", "H/2"). */
tiny_dtype hp_val_dtype(const hp_graph *g, hp_val v);
int hp_val_rank(const hp_graph *g, hp_val v);
/* dim i of v as text into buf; false if v or i is out of range. */
bool hp_val_dim_text(const hp_graph *g, hp_val v, int i, char *buf, int cap);
/* Name a value (the DSL variable it is bound to; used for Tiny ids). */
hp_val hp_name(hp_graph *g, hp_val v, const char *name);

/* ---- elementwise -------------------------------------------------------- */
/* relu gelu silu sigmoid tanh exp log neg sqrt rsqrt recip abs floor ceil
 * round (to the nearest integer, halves to even) */
hp_val hp_unary(hp_graph *g, hp_op op, hp_val x);
/* add sub mul div max min, and the comparisons lt le gt ge eq ne (bool
 * result); operands broadcast like numpy (right-aligned, size 1 stretches). */
hp_val hp_binary(hp_graph *g, hp_op op, hp_val a, hp_val b);
hp_val hp_where(hp_graph *g, hp_val cond, hp_val a, hp_val b);

/* ---- reductions (sum, rmax, rmin, mean) ---------------------------------- */
/* axes may be negative (from the end); naxes == 0 reduces every axis. */
hp_val hp_reduce(hp_graph *g, hp_op op, hp_val x, const int *axes, int naxes, bool keepdim);

/* ---- contractions and normalizations ------------------------------------ */
/* a[..., M, K] @ b[..., K, N] -> [..., M, N]; batch dims broadcast. */
hp_val hp_matmul(hp_graph *g, hp_val a, hp_val b);

/* Zero fields mean the defaults (stride 1, no padding, dilation 1, one group,
 * no bias); pass NULL for all defaults. */
typedef struct hp_conv2d_opts {
  hp_val bias;        /* [Cout] or HP_NONE */
  int64_t stride[2];  /* h, w */
  int64_t pad[4];     /* top, bottom, left, right */
  int64_t dilation[2];
  int64_t groups;
} hp_conv2d_opts;
/* x[N, C, H, W] (NCHW), w[Cout, C/groups, Kh, Kw] -> [N, Cout, Oh, Ow]. */
hp_val hp_conv2d(hp_graph *g, hp_val x, hp_val w, const hp_conv2d_opts *o);

typedef struct hp_attention_opts {
  int heads;   /* 0 or 1: one head; h > 1 splits the last axis into h heads */
  bool causal; /* key j is visible to query i iff j <= i + (N - M) */
  hp_val mask; /* additive, broadcastable to [..., heads, M, N], or HP_NONE */
  double scale; /* 0: 1/sqrt(head dim) */
} hp_attention_opts;
/* q[..., M, E], k[..., N, E], v[..., N, Ev] -> [..., M, Ev]:
 * softmax(q k^T * scale + mask) v per head. */
hp_val hp_attention(hp_graph *g, hp_val q, hp_val k, hp_val v, const hp_attention_opts *o);

/* Normalizes over axes [axis, rank); gamma/beta (optional) have those dims. */
hp_val hp_layernorm(hp_graph *g, hp_val x, hp_val gamma, hp_val beta, int axis, double eps);
hp_val hp_softmax(hp_graph *g, hp_val x, int axis);

typedef struct hp_pool2d_opts {
  int64_t kernel[2];
  int64_t stride[2]; /* 0: the kernel size */
} hp_pool2d_opts;
hp_val hp_max_pool2d(hp_graph *g, hp_val x, const hp_pool2d_opts *o); /* NCHW */
hp_val hp_avg_pool2d(hp_graph *g, hp_val x, const hp_pool2d_opts *o);

/* ---- movement (logical) ------------------------------------------------- */
/* At most one dim may be tiny_dim_int(-1): inferred from the element count. */
hp_val hp_reshape(hp_graph *g, hp_val x, int rank, const tiny_dim *dims);
hp_val hp_permute(hp_graph *g, hp_val x, const int *perm, int n);
/* numpy broadcast_to */
hp_val hp_expand(hp_graph *g, hp_val x, int rank, const tiny_dim *dims);
/* One (lo, hi) pair per axis, both >= 0. */
hp_val hp_pad(hp_graph *g, hp_val x, const int64_t *lo, const int64_t *hi, int n, double value);
/* Along axes[i] (axes NULL: 0..n-1) keep start, start+step, ... < end.
 * Negative start/end count from the end; end = INT64_MAX means "to the end";
 * steps NULL means 1; steps must be >= 1 (use flip to reverse). */
hp_val hp_slice(hp_graph *g, hp_val x, int n, const int *axes, const int64_t *starts, const int64_t *ends,
                const int64_t *steps);
hp_val hp_flip(hp_graph *g, hp_val x, const int *axes, int n);
hp_val hp_concat(hp_graph *g, const hp_val *xs, int n, int axis);

hp_val hp_cast(hp_graph *g, hp_val x, tiny_dtype to);
/* torch.gather: out[i..] = x[i.. with axis replaced by index[i..]]; index is
 * i32 with x's rank.  Data-dependent: a Non-SCoP op for the later layers. */
hp_val hp_gather(hp_graph *g, hp_val x, hp_val index, int axis);

/* ---- subgraphs ---------------------------------------------------------- */
/* Call callee (a graph of the same program) with one argument per parameter.
 * The callee's shape variables are bound from the argument shapes.  outs
 * (may be NULL) receives the callee's outputs, nouts of them at most.
 * Returns the first output.  A graph may call itself; the recursion depth
 * is checked when the program is lowered (limit HP_MAX_CALL_DEPTH). */
hp_val hp_call(hp_graph *g, hp_graph *callee, const hp_val *args, int nargs, hp_val *outs, int nouts);
#define HP_MAX_CALL_DEPTH 10

/* Convenience wrappers, one per op: hp_relu(g, x), hp_add(g, a, b), ... */
static inline hp_val hp_relu(hp_graph *g, hp_val x) { return hp_unary(g, HP_OP_RELU, x); }
static inline hp_val hp_gelu(hp_graph *g, hp_val x) { return hp_unary(g, HP_OP_GELU, x); }
static inline hp_val hp_silu(hp_graph *g, hp_val x) { return hp_unary(g, HP_OP_SILU, x); }
static inline hp_val hp_sigmoid(hp_graph *g, hp_val x) { return hp_unary(g, HP_OP_SIGMOID, x); }
static inline hp_val hp_tanh(hp_graph *g, hp_val x) { return hp_unary(g, HP_OP_TANH, x); }
static inline hp_val hp_exp(hp_graph *g, hp_val x) { return hp_unary(g, HP_OP_EXP, x); }
static inline hp_val hp_log(hp_graph *g, hp_val x) { return hp_unary(g, HP_OP_LOG, x); }
static inline hp_val hp_neg(hp_graph *g, hp_val x) { return hp_unary(g, HP_OP_NEG, x); }
static inline hp_val hp_sqrt(hp_graph *g, hp_val x) { return hp_unary(g, HP_OP_SQRT, x); }
static inline hp_val hp_rsqrt(hp_graph *g, hp_val x) { return hp_unary(g, HP_OP_RSQRT, x); }
static inline hp_val hp_recip(hp_graph *g, hp_val x) { return hp_unary(g, HP_OP_RECIP, x); }
static inline hp_val hp_abs(hp_graph *g, hp_val x) { return hp_unary(g, HP_OP_ABS, x); }
static inline hp_val hp_floor(hp_graph *g, hp_val x) { return hp_unary(g, HP_OP_FLOOR, x); }
static inline hp_val hp_ceil(hp_graph *g, hp_val x) { return hp_unary(g, HP_OP_CEIL, x); }
static inline hp_val hp_round(hp_graph *g, hp_val x) { return hp_unary(g, HP_OP_ROUND, x); }
static inline hp_val hp_add(hp_graph *g, hp_val a, hp_val b) { return hp_binary(g, HP_OP_ADD, a, b); }
static inline hp_val hp_sub(hp_graph *g, hp_val a, hp_val b) { return hp_binary(g, HP_OP_SUB, a, b); }
static inline hp_val hp_mul(hp_graph *g, hp_val a, hp_val b) { return hp_binary(g, HP_OP_MUL, a, b); }
static inline hp_val hp_div(hp_graph *g, hp_val a, hp_val b) { return hp_binary(g, HP_OP_DIV, a, b); }
static inline hp_val hp_max(hp_graph *g, hp_val a, hp_val b) { return hp_binary(g, HP_OP_MAX, a, b); }
static inline hp_val hp_min(hp_graph *g, hp_val a, hp_val b) { return hp_binary(g, HP_OP_MIN, a, b); }
static inline hp_val hp_sum(hp_graph *g, hp_val x, const int *axes, int n, bool keepdim) {
  return hp_reduce(g, HP_OP_SUM, x, axes, n, keepdim);
}
static inline hp_val hp_mean(hp_graph *g, hp_val x, const int *axes, int n, bool keepdim) {
  return hp_reduce(g, HP_OP_MEAN, x, axes, n, keepdim);
}

/* ---- the DSL ------------------------------------------------------------ */
/* One located diagnostic of the loader. */
typedef struct hp_diag {
  hp_status code;
  int line, col;
  char msg[256];
} hp_diag;

#define HP_MAX_DIAGS 32
typedef struct hp_diags {
  int n;         /* diagnostics kept (at most HP_MAX_DIAGS) */
  int dropped;   /* further ones not kept */
  hp_diag d[HP_MAX_DIAGS];
} hp_diags;

/* Parse and check a harp DSL program (docs/dsl.md).  The parser recovers and
 * reports every error it finds: e gets the first one's code and position,
 * and e->snippet its source line and caret followed by the others, each as
 * "file:line:col: error[Name]: message", source line, caret.  HP_E_PARSE
 * for syntax; semantic errors carry their own code (UnknownOp, ArityMismatch,
 * BroadcastMismatch, DanglingRef for undefined names, UnboundSymbol for bad
 * shape variables, LimitExceeded for recursion deeper than
 * HP_MAX_CALL_DEPTH...).  diags (may be NULL) receives them all. */
hp_status hp_harp_load_text(hp_error *e, const char *text, size_t len, const char *filename, hp_program **out);
hp_status hp_harp_load_text_diags(hp_error *e, const char *text, size_t len, const char *filename,
                                  hp_program **out, hp_diags *diags);
hp_status hp_harp_load_file(hp_error *e, const char *path, hp_program **out);

/* Whole-program checks the builder cannot make call by call: a "main"
 * exists, every graph returns all its outputs, and calls reachable from
 * main's outputs nest at most HP_MAX_CALL_DEPTH deep. */
hp_status hp_program_check(hp_error *e, const hp_program *p);

/* DSL text for p (malloc'd; NULL on allocation failure): subgraphs first,
 * then main.  hp_harp_load_text(hp_decompile(p)) gives a program equal to p
 * (hp_program_equal). */
char *hp_decompile(const hp_program *p);

/* Structural equality: same graphs, signatures and shape variables, and the
 * same DAG of ops and attributes from the outputs back (value names are
 * ignored).  On difference, why (may be NULL) says where. */
bool hp_program_equal(const hp_program *a, const hp_program *b, char *why, int cap);

/* Bind main's shape variables from the actual shape of parameter `param`
 * (as the CLI does with an input file); InputMismatch when it does not fit. */
hp_status hp_program_bind_input(hp_error *e, const hp_program *p, const char *param, int rank, const int64_t *dims,
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
 * HP_E_UNSUPPORTED unless `bind` gives the symbols' values, in which case
 * such dimensions are written as integers. */
hp_status hp_lower(hp_error *e, const hp_program *p, tiny_graph **out, tiny_symtab *defaults);
hp_status hp_lower_bound(hp_error *e, const hp_program *p, const tiny_symtab *bind, tiny_graph **out,
                         tiny_symtab *defaults);
/* hp_lower, and where that needs values (HP_E_UNSUPPORTED) lower again
 * with bindings: those `fill` puts into bind (the caller's --sym, input
 * shapes; may be NULL), then main's defaults for the symbols still unbound.
 * An error from fill is returned in place of the first one. */
typedef hp_status (*hp_bind_fill)(hp_error *e, tiny_symtab *bind, void *ctx);
hp_status hp_lower_or_bind(hp_error *e, const hp_program *p, hp_bind_fill fill, void *ctx, tiny_graph **out,
                           tiny_symtab *defaults);

/* ---- dumps -------------------------------------------------------------- */
/* `--dump frontend`: stable JSON (malloc'd). */
char *hp_frontend_json(const hp_program *p);
/* Graphviz DOT (malloc'd): the frontend program (one cluster per graph), and
 * a Tiny graph (after tiny_prepare it shows shapes and dtypes). */
char *hp_frontend_dot(const hp_program *p);
char *hp_tiny_dot(const tiny_graph *g);

#endif
