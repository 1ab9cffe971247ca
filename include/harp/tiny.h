/* harp/tiny.h — Tiny IR: the minimal tensor DAG of seed 001.
 *
 * A graph is a list of nodes in topological order (invariant: every source
 * index of node k is < k).  Each node is one uop: movement (views, never
 * copies), unary, binary, WHERE, REDUCE, CAST, INPUT or CONST.  Shapes hold
 * integers or symbols; symbols are bound later (tiny_infer).
 *
 * Lifecycle:  load or build -> tiny_prepare (infer shapes, normalize
 * broadcasting/immediates/POOL, verify) -> later layers / interpreter.
 */
#ifndef HARP_TINY_H
#define HARP_TINY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "harp/error.h"
#include "harp/tiny_ops.h"

#define TINY_MAX_RANK 12 /* seed 001's conv example needs 8 */
#define TINY_MAX_SRC 3

/* Limits that keep absurd models from exhausting the machine. */
#define TINY_MAX_DIM ((int64_t)1 << 40)       /* one axis */
#define TINY_MAX_ELEMS ((int64_t)1 << 40)     /* one tensor's element count */
#define TINY_MAX_NODES 1000000                /* nodes in a graph */
#define TINY_DEFAULT_MAX_PIECES 64            /* ExcessivePiecewise, per access after isl simplification (Poly-View) */
#define TINY_VERIFY_MAX_PIECES 4096           /* ExcessivePiecewise guard before simplification (tiny_verify) */

/* ---- dtypes ------------------------------------------------------------- */
/* The dtype table, one row per dtype:
 * X(ENUM, "json name", bytes, is_float, C storage type, CUDA storage type,
 *   CUDA load-as-float helper, CUDA float-to-storage helper, .npy descr)
 * The C and CUDA columns are the backends' (tiny_dtype_c, ... in
 * src/tiny/tiny_spell.h); bf16 travels in .npy files as fp32.  i8 / u8 are
 * storage types: held and computed as int32, narrowed modulo 256 when stored
 * (the CUDA backend refuses them). */
#define TINY_DTYPES(X)                                                                        \
  X(FP16, "fp16", 2, 1, "uint16_t", "hk_u16", "hk_ldf_f16", "hk_f2h", "<f2")                  \
  X(BF16, "bf16", 2, 1, "uint16_t", "hk_u16", "hk_ldf_bf16", "hk_f2bf", "<f4")                \
  X(FP32, "fp32", 4, 1, "float", "float", "hk_ldf_f32", "hk_f2f", "<f4")                      \
  X(I32, "i32", 4, 0, "int32_t", "int", "hk_ldf_i32", "hk_f2i", "<i4")                        \
  X(BOOL, "bool", 1, 0, "uint8_t", "unsigned char", "hk_ldf_u8", "hk_f2u8", "|b1")                \
  X(I8, "i8", 1, 0, "int8_t", "signed char", "hk_ldf_s8", "hk_f2s8", "|i1")                   \
  X(U8, "u8", 1, 0, "uint8_t", "unsigned char", "hk_ldf_u8", "hk_f2u8", "|u1")

typedef enum tiny_dtype {
#define TINY_X_DT(e, ...) TINY_##e,
  TINY_DTYPES(TINY_X_DT)
#undef TINY_X_DT
  TINY_DTYPE_COUNT
} tiny_dtype;

const char *tiny_dtype_name(tiny_dtype t);
int tiny_dtype_size(tiny_dtype t);
bool tiny_dtype_is_float(tiny_dtype t);
const char *tiny_dtype_npy(tiny_dtype t); /* the .npy descr: "<f4", ...; "?" if unknown */
/* Accepts the canonical names and the DSL aliases f16/f32. -1 if unknown. */
int tiny_dtype_parse(const char *s);

/* ---- dimensions and shapes ---------------------------------------------- */
/* A dimension is an integer or a symbol.
 *  In an arg: sym != NULL means "the value of symbol sym"; else n.
 *  In an inferred shape: n >= 0 is the size (n < 0: not known yet, only in
 *  symbolic inference); sym, when set, names the symbol this size equals —
 *  it is what name-based broadcasting and REDUCE axes by name look at. */
typedef struct tiny_dim {
  int64_t n;
  const char *sym;
} tiny_dim;

typedef struct tiny_shape {
  int rank;
  tiny_dim d[TINY_MAX_RANK];
} tiny_shape;

static inline tiny_dim tiny_dim_int(int64_t n) { return (tiny_dim){n, NULL}; }
static inline tiny_dim tiny_dim_sym(const char *s) { return (tiny_dim){-1, s}; }
/* Element count; -1 if some dim is unknown, -2 on overflow past TINY_MAX_ELEMS. */
int64_t tiny_shape_numel(const tiny_shape *s);
bool tiny_shape_known(const tiny_shape *s);
/* Same rank and sizes (names ignored). */
bool tiny_shape_equal(const tiny_shape *a, const tiny_shape *b);
/* "[M=256, 1, K]" into buf. */
void tiny_shape_format(const tiny_shape *s, char *buf, int cap);

/* ---- symbol table ------------------------------------------------------- */
typedef struct tiny_symtab {
  int n, cap;
  char **names;
  int64_t *values;
  /* A ShapeSet's (harp/sgen.h): a symbol's dim bound to 1 is broadcast to
   * as at any other size (normalize keeps the EXPAND), so the graph is the
   * same node for node at every binding of the box. */
  bool sym_broadcasts;
} tiny_symtab;
void tiny_symtab_init(tiny_symtab *t);
void tiny_symtab_free(tiny_symtab *t);
/* HARP_OK, or HARP_E_AXIS_SIZE_MISMATCH when name already holds another value. */
harp_status tiny_symtab_set(harp_error *e, tiny_symtab *t, const char *name, int64_t v);
bool tiny_symtab_get(const tiny_symtab *t, const char *name, int64_t *v);
/* Parse "NAME=INT" (for --sym). */
harp_status tiny_symtab_parse_assign(harp_error *e, tiny_symtab *t, const char *s);

/* ---- index expressions (VIEW index_map) --------------------------------- */
/* Affine + floordiv (+ mod, which later layers expand into div + guard).
 * Variables i0..i{r-1} are the VIEW's output axes.  MUL needs a constant or
 * symbol on one side; FLOORDIV/MOD need a positive constant or symbol divisor. */
typedef enum tiny_expr_kind { TX_CONST, TX_VAR, TX_SYM, TX_ADD, TX_MUL, TX_FLOORDIV, TX_MOD } tiny_expr_kind;

typedef struct tiny_expr {
  tiny_expr_kind k;
  int64_t c;       /* TX_CONST */
  int var;         /* TX_VAR */
  const char *sym; /* TX_SYM */
  const struct tiny_expr *a, *b;
} tiny_expr;

/* ---- the op table (harp/tiny_ops.h) ------------------------------------- */
typedef enum tiny_op {
#define TINY_X_OP(e, ...) TINY_##e,
  TINY_OPS(TINY_X_OP)
#undef TINY_X_OP
  TINY_OP_COUNT
} tiny_op;

const char *tiny_op_name(tiny_op op);
int tiny_op_parse(const char *s); /* "ADD" -> TINY_ADD; -1 if unknown */
tiny_class tiny_op_class(tiny_op op);
tiny_argkind tiny_op_argkind(tiny_op op);
int tiny_op_arity(tiny_op op); /* number of sources the class requires */
bool tiny_op_is_elementwise(tiny_op op); /* unary, binary or ternary */
unsigned tiny_op_dtype_rule(tiny_op op); /* TD_* flags */
bool tiny_op_is_compare(tiny_op op);     /* TD_BOOL: result dtype bool */
tiny_epi tiny_op_epi(tiny_op op);
const char *tiny_class_name(tiny_class c); /* "unary", "movement", ... */
const char *tiny_epi_name(tiny_epi k);     /* "relu", "shift", ... */
/* The renderers' text of an op: src/tiny/tiny_spell.h. */

typedef enum tiny_reduce_op { TINY_RSUM, TINY_RMAX, TINY_RMIN } tiny_reduce_op;
const char *tiny_reduce_name(tiny_reduce_op r);

/* ---- per-kind arguments ------------------------------------------------- */
typedef struct tiny_arg_input {
  const char *tensor_id; /* name of the external tensor (file name stem) */
  tiny_dtype dtype;
  tiny_shape shape;
  const char *storage; /* optional: "input" (default) or "param" (a weight) */
} tiny_arg_input;

typedef struct tiny_arg_const {
  double value; /* may be +-inf */
  tiny_dtype dtype;
} tiny_arg_const; /* a rank-0 tensor */

typedef struct tiny_arg_reshape {
  tiny_shape shape;
} tiny_arg_reshape;

typedef struct tiny_arg_permute {
  int n;
  int perm[TINY_MAX_RANK]; /* output axis k reads input axis perm[k] */
} tiny_arg_permute;

typedef struct tiny_arg_expand {
  tiny_shape shape;
  /* Optional.  Same rank as the input: the output axes that are NOT
   * broadcast (seed 001).  Shorter than the output rank and as long as the
   * input rank: input axis i goes to output axis bd[i] (XLA style). */
  bool has_bd;
  int nbd;
  int bd[TINY_MAX_RANK];
} tiny_arg_expand;

typedef struct tiny_arg_pad {
  int n;
  tiny_dim lo[TINY_MAX_RANK], hi[TINY_MAX_RANK]; /* >= 0 */
  double value;
} tiny_arg_pad;

typedef struct tiny_arg_shrink {
  int n;
  tiny_dim lo[TINY_MAX_RANK], hi[TINY_MAX_RANK]; /* lo <= i < hi */
  bool has_step;
  tiny_dim step[TINY_MAX_RANK]; /* >= 1; elements lo, lo+step, ... < hi */
} tiny_arg_shrink;

typedef struct tiny_arg_flip {
  int n;
  int axes[TINY_MAX_RANK];
} tiny_arg_flip;

typedef struct tiny_arg_view {
  tiny_shape shape;                /* result_shape */
  int n;                           /* == input rank */
  const tiny_expr *map[TINY_MAX_RANK]; /* input axis j = map[j](i0..) */
} tiny_arg_view;

typedef struct tiny_arg_pool {
  int n; /* window over the last n axes */
  tiny_dim kernel[TINY_MAX_RANK], stride[TINY_MAX_RANK], dilation[TINY_MAX_RANK];
} tiny_arg_pool;

typedef struct tiny_arg_cast {
  tiny_dtype to;
} tiny_arg_cast;

typedef struct tiny_arg_reduce {
  tiny_reduce_op op;
  int n;
  tiny_dim axes[TINY_MAX_RANK]; /* index (n) or the name of exactly one dim */
  bool has_dtype;
  tiny_dtype dtype; /* accumulation dtype = result dtype */
  bool has_init;
  double init;
  /* derived by tiny_infer: resolved axis indices, ascending */
  int axis_idx[TINY_MAX_RANK];
} tiny_arg_reduce;

/* out[i..] = input[i with axis replaced by index[i..]] (torch.gather).
 * index is i32 with the input's rank; out has the index's shape; every
 * index dim other than `axis` is <= the input's. */
typedef struct tiny_arg_gather {
  int axis;
} tiny_arg_gather;

typedef union tiny_args {
  tiny_arg_input input;
  tiny_arg_const cnst;
  tiny_arg_reshape reshape;
  tiny_arg_permute permute;
  tiny_arg_expand expand;
  tiny_arg_pad pad;
  tiny_arg_shrink shrink;
  tiny_arg_flip flip;
  tiny_arg_view view;
  tiny_arg_pool pool;
  tiny_arg_cast cast;
  tiny_arg_reduce reduce;
  tiny_arg_gather gather;
} tiny_args;

/* A source: a node index, or (before normalization) a scalar immediate. */
typedef struct tiny_src {
  int node; /* -1: immediate */
  double imm;
} tiny_src;

typedef struct tiny_node {
  const char *id; /* unique, non-empty */
  tiny_op op;
  int nsrc;
  tiny_src src[TINY_MAX_SRC];
  tiny_args a; /* the member named by tiny_op_argkind(op) */
  const char *tag; /* optional, never affects semantics */
  /* Derived by tiny_infer; valid after it succeeds. */
  tiny_dtype dtype;
  tiny_shape shape;
  int pieces; /* piecewise count of the view chain ending here (1 if none) */
} tiny_node;

/* A derived shape symbol: name's value is def, an expression (affine, floor
 * division, products) of other symbols, bound with them (tiny_dsym_bind).
 * The lowering makes one where a dim is an expression of unbound symbols
 * (a strided conv's (H + 1)/2) for a ShapeSet (docs/tiny-ir.md). */
#define TINY_MAX_DSYMS 1024 /* derived symbols a graph holds at most */
#define TINY_MAX_DSYMS_TEXT "1024"
typedef struct tiny_dsym {
  const char *name;
  const struct tiny_expr *def; /* symbols: base ones or earlier derived ones */
  /* def is N floordiv d and the model holds only where d divides N (a tie
   * 2 G = 3 H: G := (3*H) floordiv 2): a binding where it does not is
   * InputMismatch (tiny_dsym_bind); the JSON's {"def": .., "exact": true}. */
  bool exact;
} tiny_dsym;

typedef struct tiny_graph {
  struct ut_arena *arena; /* owns ids, tags, expressions */
  tiny_node *nodes;
  int n, cap;
  int *outputs; /* node indices of model outputs, in order */
  int noutputs;
  bool explicit_outputs; /* "outputs" was given; else: nodes nothing consumes */
  harp_error err;        /* first builder error */
  int next_auto_id;
  struct ut_strmap *ids; /* id -> index (util/strmap.c) */
  tiny_dsym *dsyms;      /* derived symbols in definition order (malloc'd; names, defs in arena) */
  int ndsyms;
} tiny_graph;

/* ---- builder API -------------------------------------------------------- */
tiny_graph *tiny_graph_new(void);
void tiny_graph_free(tiny_graph *g);
/* A shadow of g: copies of its nodes, outputs and derived symbols that read
 * g's arena and id map (g must outlive it; no node is added to either),
 * so that tiny_infer / tiny_verify can re-derive its shapes at another
 * binding of its symbols without touching g (a ShapeSet's check of a new
 * binding, src/runtime/sgen_quick.c).  NULL when out of memory; freed with
 * tiny_graph_shadow_free, never tiny_graph_free. */
tiny_graph *tiny_graph_shadow(const tiny_graph *g);
void tiny_graph_shadow_free(tiny_graph *h);
/* Index of the node with this id, or -1. */
int tiny_find(const tiny_graph *g, const char *id);

/* Append a node.  id may be NULL (a fresh "t<k>" is made).  arg points to
 * the tiny_arg_* struct of the op's kind (copied), or NULL for TA_NONE.
 * Returns the node index, or -1 with g->err set (the first error sticks and
 * later calls then fail too, so a builder sequence needs one check at the end). */
int tiny_add(tiny_graph *g, const char *id, tiny_op op, const tiny_src *src, int nsrc, const void *arg);

/* Conveniences over tiny_add. */
int tiny_b_input(tiny_graph *g, const char *id, tiny_dtype dt, const tiny_shape *shape);
int tiny_b_const(tiny_graph *g, double v, tiny_dtype dt);
int tiny_b_unary(tiny_graph *g, tiny_op op, int x);
int tiny_b_binary(tiny_graph *g, tiny_op op, int a, int b);
int tiny_b_binary_imm(tiny_graph *g, tiny_op op, int a, double imm); /* a op imm */
int tiny_b_where(tiny_graph *g, int cond, int a, int b);
int tiny_b_cast(tiny_graph *g, int x, tiny_dtype to);
int tiny_b_reshape(tiny_graph *g, int x, const tiny_shape *shape);
int tiny_b_permute(tiny_graph *g, int x, const int *perm, int n);
int tiny_b_expand(tiny_graph *g, int x, const tiny_shape *shape);
int tiny_b_pad(tiny_graph *g, int x, const int64_t *lo, const int64_t *hi, int n, double value);
int tiny_b_shrink(tiny_graph *g, int x, const int64_t *lo, const int64_t *hi, const int64_t *step, int n);
int tiny_b_flip(tiny_graph *g, int x, const int *axes, int n);
int tiny_b_reduce(tiny_graph *g, int x, tiny_reduce_op op, const int *axes, int n, tiny_dtype acc);
/* Mark a node as a model output (sets explicit_outputs). */
int tiny_mark_output(tiny_graph *g, int node);

/* Shape helpers for the builder. */
tiny_shape tiny_shape_of(int rank, const int64_t *dims);
tiny_shape tiny_shape_syms(int rank, const char *const *syms); /* NULL entry = 1 */

/* Index-expression constructors (arena-owned by g). */
const tiny_expr *tiny_x_const(tiny_graph *g, int64_t c);
const tiny_expr *tiny_x_var(tiny_graph *g, int i);
const tiny_expr *tiny_x_sym(tiny_graph *g, const char *s);
const tiny_expr *tiny_x_bin(tiny_graph *g, tiny_expr_kind k, const tiny_expr *a, const tiny_expr *b);
/* Parse "2*i0 + i3 floordiv 4" ('//' and '%' also accepted). */
harp_status tiny_expr_parse(harp_error *e, tiny_graph *g, const char *text, int nvars, const tiny_expr **out);
/* Print in the canonical text form (round-trips through tiny_expr_parse). */
void tiny_expr_print(const tiny_expr *x, char *buf, int cap);
/* Evaluate with vars[] and symbols; false if a symbol is unbound or a divisor <= 0. */
bool tiny_expr_eval(const tiny_expr *x, const int64_t *vars, const tiny_symtab *syms, int64_t *out);

/* ---- derived symbols (dsym.c) -------------------------------------------- */
/* Add name := def_text (tiny_expr_parse syntax, no axis variables; symbols
 * already known to g's derived list must come before it).  Adding the same
 * name with the same definition again is a no-op.  -1 with g->err set. */
int tiny_dsym_add(tiny_graph *g, const char *name, const char *def_text);
/* Index of derived symbol name, or -1. */
int tiny_dsym_find(const tiny_graph *g, const char *name);
/* The derived symbol's name for dim text `text`: "ds_" and the text with
 * its operators spelt (" + " p, " - " m, "*" x, "/" d, parentheses and
 * spaces dropped), a long one cut and a hash of the whole appended, into
 * name[cap] (cap >= 64). */
void tiny_dsym_name(const char *text, char *name, size_t cap);
/* The derived symbol defined as def_text (tiny_expr_parse syntax, no axis
 * variables), named after that text (tiny_dsym_name): found, else added;
 * -1 (nothing recorded in g->err) when the name is taken by another
 * definition. */
int tiny_dsym_intern(tiny_graph *g, const char *def_text);
/* Set every derived symbol whose definition's symbols syms binds, in
 * order.  One syms binds already (an input's shape gave it) must equal
 * its definition: else InputMismatch; a negative value is
 * AxisSizeMismatch.  Derived symbols of unbound ones stay unbound. */
harp_status tiny_dsym_bind(harp_error *e, const tiny_graph *g, tiny_symtab *syms);
/* The box names[n] (lo..hi each) narrowed to bindings the exact derived
 * symbols of g accept: per exact symbol whose division reads one of names
 * alone (G := (3*H) floordiv 2), that one's lo raised and hi lowered to the
 * nearest values its divisor divides (H 3..9: 4..8).  False when a range
 * holds none (left as it was). */
bool tiny_dsym_snap(const tiny_graph *g, const char *const *names, int64_t *lo, int64_t *hi, int n);
/* Whether def never decreases when a symbol grows (sums, products and
 * floor divisions of non-negative terms by positive constants). */
bool tiny_dsym_monotone(const tiny_expr *def);
/* Whether def (g's derived symbols read through their definitions) never
 * decreases as any one symbol grows by one, by the least change of each
 * term: w - 2 * (w floordiv 3), a ceil(w / 3), changes by at least
 * 1 - ceil(2 / 3) = 0.  Affine sums of floor divisions by constants only. */
bool tiny_dsym_steps_up(const tiny_graph *g, const tiny_expr *def);
/* reads[k] (per derived symbol of g): whether its definition reads symbol
 * sym, directly or through earlier derived symbols. */
void tiny_dsym_readers(const tiny_graph *g, const char *sym, bool *reads);
/* Ties (ties.c): the model json (canonical, unbound) with each symbol of
 * the box names[n] (lo..hi each) that its elementwise ops tie to the
 * others at every binding of the box (an ADD of [.., 2*H] and [.., G]:
 * G = 2 H) made a derived symbol (G := 2*H), first in "derived", into
 * *out (malloc'd; NULL: no tie); said[cap] lists them ("G = 2*H, ..";
 * NULL: not asked).  A model that does not infer symbolically has none. */
harp_status tiny_ties_text(harp_error *e, const char *json, const char *const *names, const int64_t *lo, const int64_t *hi,
                           int n, char **out, char *said, size_t cap);
/* t's symbols but those g defines (a tie, G := 2*H, or another derived
 * symbol: its value follows the others') into *out, initialised here with
 * t's sym_broadcasts. */
harp_status tiny_ties_drop(harp_error *e, const tiny_graph *g, const tiny_symtab *t, tiny_symtab *out);

/* ---- passes ------------------------------------------------------------- */
/* Load a model from JSON text in either dialect (seed 001 uops, or seed 000
 * ops/values).  filename is used in error messages only. */
harp_status tiny_load_json(harp_error *e, const char *text, size_t len, const char *filename, tiny_graph **out);
harp_status tiny_load_file(harp_error *e, const char *path, tiny_graph **out);
/* Canonical (seed 001) JSON; malloc'd.  NULL on allocation failure. */
char *tiny_write_json(const tiny_graph *g);

/* Shape and dtype inference in topological order.  With allow_unknown, sizes
 * depending on unbound symbols stay unknown (n < 0); otherwise such a symbol is
 * UnboundSymbol.  Checks every shape rule it can decide. */
harp_status tiny_infer(harp_error *e, tiny_graph *g, const tiny_symtab *syms, bool allow_unknown);
/* Normalization (design.md §2.2–2.4): immediates -> CONST + RESHAPE/EXPAND,
 * implicit broadcasting -> explicit RESHAPE/EXPAND (right-aligned, else by
 * symbol name), POOL -> VIEW.  Needs a successful tiny_infer; re-infers. */
harp_status tiny_normalize(harp_error *e, tiny_graph *g, const tiny_symtab *syms, bool allow_unknown);
/* Structural and semantic checks of a normalized graph (see docs/tiny-ir.md). */
harp_status tiny_verify(harp_error *e, tiny_graph *g, const tiny_symtab *syms, bool allow_unknown);
/* Rank-0 values computed from constants only become CONSTs (evaluated by the
 * interpreter, so bit-identical), and nodes no output needs are dropped.
 * Fixes the outputs (explicit_outputs).  Shapes may stay symbolic when
 * allow_unknown (the folded values are scalars, which no symbol sizes). */
harp_status tiny_fold_constants(harp_error *e, tiny_graph *g, const tiny_symtab *syms, bool allow_unknown);
/* infer, normalize, fold and verify, in order. */
harp_status tiny_prepare(harp_error *e, tiny_graph *g, const tiny_symtab *syms, bool allow_unknown);

/* Bind symbols from the declared INPUT shapes against actual shapes.
 * shapes[k] is the actual shape of input node inputs[k]. */
harp_status tiny_bind_input(harp_error *e, const tiny_graph *g, int node, int rank, const int64_t *dims,
                          tiny_symtab *syms);

/* Each INPUT node i with at[i] != NULL declared at shape at[i] (constant
 * sizes, each at least the declared one) and read through a SHRINK
 * [0, declared dim) on the axes k set in moving[i] (bit k), which its
 * readers read instead (a ShapeSet's weight at the box's upper corner,
 * src/tiny/declare_at.c).  at and moving have g->n entries. */
harp_status tiny_declare_at(harp_error *e, tiny_graph *g, const tiny_shape *const *at, const unsigned *moving);

/* Model inputs: indices of INPUT nodes in graph order (malloc'd array). */
int tiny_inputs(const tiny_graph *g, int **out);
/* Recompute g->outputs if not explicit: every node nothing consumes. */
harp_status tiny_compute_outputs(harp_error *e, tiny_graph *g);
/* The name an output is written under: the node id (INPUT: its tensor_id). */
const char *tiny_output_name(const tiny_graph *g, int node);

#endif
