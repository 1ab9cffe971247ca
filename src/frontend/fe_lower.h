/* fe_lower.h — shared state and helpers of the lowering to Tiny IR
 * (lower.c: the driver, naming, elementwise, reductions, movement;
 * lower_nn.c: matmul, conv2d, attention, layernorm, softmax, pooling).
 * Nodes are emitted with provisional ids; lower.c renames them at the end
 * (an op's last node takes the op's variable name, an output's node the
 * output's name, the others "<name>.<op>").  Not public. */
#ifndef HARP_FE_LOWER_H
#define HARP_FE_LOWER_H

#include "fe_int.h"

/* A value that is a merge of trailing axes of another Tiny node (a flatten,
 * attention's head merge): matmul reads the unmerged node instead, so that
 * its contraction stays affine (merging axes needs div/mod; splitting the
 * other operand does not). */
typedef struct lw_split {
  int node;       /* the unmerged Tiny node, -1 if none */
  fe_shape shape; /* its shape: [.., k1, .., kr] merged into [.., k1*..*kr] */
  int r;          /* trailing axes merged (>= 2) */
} lw_split;

typedef struct lw {
  harp_error *e;
  const hg_program *fp;    /* the flat program (for source positions) */
  const hg_graph *g;       /* its main */
  tiny_graph *t;           /* being built */
  const tiny_symtab *bind; /* symbol values for dims that are expressions; may be NULL */
  int *tn;                 /* frontend value v -> Tiny node index, -1 if none yet */
  lw_split *split;         /* v -> its unmerged form, if any */
  int *owner;              /* Tiny node -> the frontend value whose lowering made it */
  int cap_owner;
  const fe_node *cur;      /* the op being lowered (errors point at it) */
  int seq;                 /* provisional ids */
  bool derive;             /* a dim that is an expression of unbound symbols: a derived symbol (hg_lower_derive) */
} lw;

/* Append a Tiny node (-1 on error, reported at the current op). */
int lw_emit(lw *L, tiny_op op, const tiny_src *src, int nsrc, const void *arg);
int lw_un(lw *L, tiny_op op, int x);
int lw_bin(lw *L, tiny_op op, int a, int b);
int lw_bin_imm(lw *L, tiny_op op, int a, double imm);
int lw_imm_bin(lw *L, tiny_op op, double imm, int b); /* imm op b */
int lw_cast(lw *L, int x, tiny_dtype to);
int lw_cast_if(lw *L, int x, tiny_dtype from, tiny_dtype to); /* x when equal */
int lw_reduce(lw *L, int x, tiny_reduce_op op, const int *axes, int n, tiny_dtype acc);
int lw_permute(lw *L, int x, const int *perm, int n);
int lw_const(lw *L, double v, tiny_dtype dt);

/* A frontend dim as a Tiny arg dim (int or one symbol, or its value under
 * L->bind).  lw_dim reports HARP_E_UNSUPPORTED when it cannot; lw_can_dim
 * only asks. */
bool lw_dim(lw *L, const fe_dim *d, tiny_dim *out);
bool lw_can_dim(const lw *L, const fe_dim *d);
bool lw_shape(lw *L, const fe_shape *s, tiny_shape *out);
bool lw_can_shape(const lw *L, const fe_shape *s);
/* RESHAPE to s (every dim must be expressible). */
int lw_reshape(lw *L, int x, const fe_shape *s);
/* numpy broadcasting of x (shape xs) to `to`: RESHAPE to the rank and
 * EXPAND, written out when the dims are expressible, else left to Tiny's
 * normalization (right-aligned, the same rule). */
int lw_fit(lw *L, int x, const fe_shape *xs, const fe_shape *to);
/* A rank-0 fp32 node holding the product of dims (an element count). */
int lw_count(lw *L, const fe_dim *const *dims, int n);
/* s with the (ascending) axes set to 1 / removed. */
void lw_keep1(lw *L, const fe_shape *s, const int *axes, int n, fe_shape *out);
void lw_drop(const fe_shape *s, const int *axes, int n, fe_shape *out);
bool lw_same_shape(const fe_shape *a, const fe_shape *b);

/* Operand i of the current op: its frontend node and its Tiny node (a weak
 * literal gets a CONST node of dtype dt on demand). */
const fe_node *lw_in(const lw *L, int i);
int lw_tin(lw *L, int i, tiny_dtype dt);
harp_status lw_unsupported(lw *L, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Record that value v (the current op) merges the trailing r axes of node
 * `node` of shape s, when r >= 2 and the leading axes match. */
void lw_note_split(lw *L, int node, const fe_shape *s, const fe_shape *merged);

/* lower_nn.c: each returns the op's result node, -1 on error. */
int lw_matmul(lw *L);
int lw_conv2d(lw *L);
int lw_attention(lw *L);
int lw_layernorm(lw *L);
int lw_softmax(lw *L);
int lw_pool2d(lw *L);

#define LOG2E 1.4426950408889634
#define LN2 0.6931471805599453

#endif
