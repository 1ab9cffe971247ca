/* fe_int.h — internals shared by the frontend files (not public).
 *
 * Data model:
 *   hg_program  owns an arena (strings, dims, operand arrays) and its graphs.
 *   hg_graph    nodes in creation order, which is a topological order
 *               (an op's operands exist before it); value v is node v-1.
 *   fe_dim      a dimension in canonical linear form over atoms (symbols,
 *               products, floor divisions); equal dims have equal text.
 */
#ifndef HARP_FE_INT_H
#define HARP_FE_INT_H

#include "harp/frontend.h"
#include "util/util.h"

/* ---- symbolic dimensions (dim.c) ---------------------------------------- */
typedef struct fe_atom fe_atom;
typedef struct fe_term {
  int64_t k; /* != 0 */
  const fe_atom *atom;
} fe_term;

typedef struct fe_dim {
  int64_t c;        /* constant term */
  int nt;           /* terms, sorted by atom text, atoms distinct */
  const char *text; /* canonical DSL text: equal text <=> equal dims */
  fe_term t[];
} fe_dim;

typedef enum fe_atom_kind { FE_A_SYM, FE_A_PROD, FE_A_DIV } fe_atom_kind;
struct fe_atom {
  fe_atom_kind kind;
  const char *text;     /* canonical, as a factor would print it */
  const char *sym;      /* SYM */
  int nf;               /* PROD: >= 2 factors, sorted by text, each a   */
  const fe_dim **f;     /*   symbol, a division or a sum (never a product) */
  const fe_dim *num;    /* DIV: floor(num / q), q >= 2, num not a multiple */
  int64_t q;
};

#define FE_MAX_TERMS 16

const fe_dim *fe_dim_int(ut_arena *a, int64_t n);
const fe_dim *fe_dim_sym(ut_arena *a, const char *name);
const fe_dim *fe_dim_atom(ut_arena *a, const fe_atom *at); /* 1 * atom */
/* NULL on overflow, too many terms or allocation failure. */
const fe_dim *fe_dim_add(ut_arena *a, const fe_dim *x, const fe_dim *y);
const fe_dim *fe_dim_sub(ut_arena *a, const fe_dim *x, const fe_dim *y);
const fe_dim *fe_dim_scale(ut_arena *a, const fe_dim *x, int64_t k);
const fe_dim *fe_dim_mul(ut_arena *a, const fe_dim *x, const fe_dim *y);
const fe_dim *fe_dim_div(ut_arena *a, const fe_dim *x, int64_t q); /* floor; q >= 1 */
bool fe_dim_is_int(const fe_dim *d, int64_t *n);
const char *fe_dim_is_sym(const fe_dim *d); /* the symbol if d is exactly one */
bool fe_dim_is_one(const fe_dim *d);

typedef enum fe_cmp { FE_SAME, FE_DIFF, FE_MAYBE } fe_cmp;
/* SAME: provably equal.  DIFF: provably different, or two distinct shape
 * variables (harp treats distinct names as distinct sizes).  MAYBE: decided
 * only once symbols are bound. */
fe_cmp fe_dim_cmp(const fe_dim *x, const fe_dim *y);

/* Replace symbols: look(ctx, name) returns the replacement or NULL to keep. */
typedef const fe_dim *(*fe_sym_lookup)(void *ctx, const char *name);
const fe_dim *fe_dim_subst(ut_arena *a, const fe_dim *d, fe_sym_lookup look, void *ctx);
/* Value under a binding; false if a symbol is unbound. */
bool fe_dim_eval(const fe_dim *d, const tiny_symtab *syms, int64_t *out);
/* d in tiny_expr_parse syntax ("(H + 1) floordiv 2") into buf[cap]; false when it does not fit. */
bool fe_dim_tiny_text(const fe_dim *d, char *buf, int cap);
/* Calls f(ctx, sym) for every symbol in d. */
void fe_dim_syms(const fe_dim *d, void (*f)(void *ctx, const char *sym), void *ctx);

/* ---- graphs ---------------------------------------------------------------- */
typedef struct fe_shape {
  int rank;
  const fe_dim *d[TINY_MAX_RANK];
} fe_shape;

typedef struct fe_node {
  hg_op op;
  int nin;
  const hg_val *in;  /* operands; HG_NONE for an absent optional one */
  const char *name;  /* DSL variable it is bound to, or NULL */
  int line, col;     /* source position; 0 when built through the API */
  tiny_dtype dtype;  /* result type; CALL has none (see its PROJ nodes) */
  bool weak;         /* CONST without a fixed dtype: adopts its partner's */
  fe_shape shape;
  union {
    struct { int index; } input; /* position among the parameters */
    struct { double v; } cnst;
    struct { int n; int axes[TINY_MAX_RANK]; bool keepdim; } reduce; /* axes ascending */
    struct { int64_t stride[2], pad[4], dilation[2], groups; } conv;  /* in: x, w, bias? */
    struct { int heads; bool causal; double scale; } attn;          /* in: q, k, v, mask?; scale 0 = default */
    struct { int axis; double eps; } ln;                            /* in: x, gamma?, beta? */
    struct { int axis; } axis;                                      /* softmax, concat, gather */
    struct { int64_t kernel[2], stride[2]; } pool;
    struct { fe_shape to; } shape;                                  /* reshape, expand */
    struct { int n; int v[TINY_MAX_RANK]; } perm;                   /* permute perm, flip axes */
    struct { int n; int64_t lo[TINY_MAX_RANK], hi[TINY_MAX_RANK]; double value; } pad;
    struct { int n; const fe_dim *start[TINY_MAX_RANK], *end[TINY_MAX_RANK]; int64_t step[TINY_MAX_RANK]; } slice;
    struct { tiny_dtype to; } cast;
    struct { hg_graph *callee; int nout; const fe_dim **bind; } call; /* bind[i]: callee shape var i */
    struct { int k; } proj;                                             /* in: the CALL */
  } a;
} fe_node;

typedef struct fe_shape_var {
  const char *name;
  int64_t dflt; /* < 0: none */
  int line, col;
} fe_shape_var;

typedef struct fe_output {
  const char *name;
  tiny_dtype dtype; /* declared type (the DSL) or the value's (the builder) */
  fe_shape shape;
  hg_val v;         /* HG_NONE until the graph returns it */
  int line, col;
} fe_output;

struct hg_graph {
  hg_program *prog;
  const char *name;
  fe_node *nodes; /* value v is nodes[v - 1] */
  int n, cap;
  fe_shape_var *sv;
  int nsv, svcap;
  hg_val *params; /* INPUT values in declaration order */
  int nparams, pcap;
  fe_output *outs;
  int nout, ocap;
  harp_error err;    /* first builder error */
  int line, col;     /* stamped on new nodes (the DSL sets it per expression) */
  bool owns_program; /* made by hg_graph_new: hg_graph_free frees the program */
};

struct hg_program {
  ut_arena *arena;
  hg_graph **graphs;
  int n, cap;
  harp_error err;
  const char *filename; /* set by the DSL loader, for located errors */
  const char *src;      /* the DSL text (NUL-terminated), for snippets */
};

/* graph.c */
fe_node *fe_node_of(const hg_graph *g, hg_val v); /* NULL if v is not a value of g */
/* Append a node with a copy of the operands; NULL on error (g->err set). */
fe_node *fe_new_node(hg_graph *g, hg_op op, const hg_val *in, int nin);
hg_val fe_val_of(const hg_graph *g, const fe_node *n);
hg_val fe_failv(hg_graph *g, harp_status code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Clear the sticky error (the DSL loader does this after recording it). */
void fe_clear_error(hg_graph *g);
int fe_shape_var_index(const hg_graph *g, const char *name); /* -1 if none */
int fe_output_index(const hg_graph *g, const char *name);    /* -1 if none */
/* Declare an output with a type and no value yet (DSL signatures). */
harp_status fe_declare_output(hg_graph *g, const char *name, tiny_dtype dt, const fe_shape *s);
/* Give declared output k its value (checks the type). */
hg_val fe_set_output(hg_graph *g, int k, hg_val v);
const char *fe_strdup(hg_graph *g, const char *s);
void fe_shape_text(const fe_shape *s, char *buf, int cap); /* "[B, 64]" */
bool fe_is_ident(const char *s);

/* ops.c / ops_nn.c: the builder with fe_dim arguments (the DSL's entry). */
hg_val fe_input(hg_graph *g, const char *name, tiny_dtype dt, const fe_shape *s);
hg_val fe_reshape(hg_graph *g, hg_val x, const fe_shape *to); /* a dim may be NULL: inferred */
hg_val fe_expand(hg_graph *g, hg_val x, const fe_shape *to);
/* Full-rank slice: start/end per axis (NULL end = to the end). */
hg_val fe_slice(hg_graph *g, hg_val x, const fe_dim *const *start, const fe_dim *const *end, const int64_t *step);
/* Shared checks. */
bool fe_broadcast(hg_graph *g, const fe_shape *a, const fe_shape *b, fe_shape *out);
int fe_norm_axis(hg_graph *g, int axis, int rank); /* -1 with error if out of range */
const fe_node *fe_operand(hg_graph *g, hg_val v, const char *what); /* NULL with error */
bool fe_require_float(hg_graph *g, const fe_node *x, const char *op);
bool fe_same_dim(hg_graph *g, const fe_dim *a, const fe_dim *b, const char *what);
hg_val fe_finish(hg_graph *g, hg_op op, const hg_val *in, int nin, tiny_dtype dt, const fe_shape *s, fe_node **out);

/* inline.c: main with every reachable call expanded (a graph without CALL). */
harp_status fe_flatten(harp_error *e, const hg_program *p, hg_program **flat);
/* Report an error located at node n's source position. */
harp_status fe_fail_node(harp_error *e, const hg_program *p, const fe_node *n, harp_status code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));


/* dsl: lex.c / parse.c / sema.c share fe_dsl.h */

#endif
