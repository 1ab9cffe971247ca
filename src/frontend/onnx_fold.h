/* onnx_fold.h — what onnx_fold.c (the constant evaluator: framework,
 * arithmetic, Cast, Where, reductions, generators) and onnx_fold_move.c
 * (its movement ops) share.  Not public. */
#ifndef HARP_ONNX_FOLD_H
#define HARP_ONNX_FOLD_H

#include "onnx_int.h"

/* What a fold function did: evaluated the node (its outputs are defined),
 * declined it (a result too large or of a symbolic shape: the op's mapping
 * builds it), or failed (c->e says why). */
enum { FOLD_DONE = 0, FOLD_DECLINE = 1, FOLD_FAIL = -1 };

/* A fold of one op type: x[0..n) are the node's inputs, each known at
 * import, NULL for an absent optional one. */
typedef int (*ox_fold_fn)(ox_ctx *c, ox_val *const *x, int n);

/* A known value's rank, dims, element count; whether it holds floats
 * (else integers or bools). */
int fv_rank(const ox_val *x);
const int64_t *fv_shape(const ox_val *x);
int64_t fv_count(const ox_val *x);
bool fv_float(const ox_val *x);
/* Element k of an integer or bool value as a dim. */
const fe_dim *fv_dim(ox_ctx *c, const ox_val *x, int64_t k);

/* x's elements as integers (at most cap; symbolic ones fail naming what
 * needs them). */
harp_status fv_ints(ox_ctx *c, const ox_val *x, const char *what, int64_t *out, int cap, int *n);
/* The element count of shape, or -1 when above limit. */
int64_t fv_count_of(int rank, const int64_t *shape, int64_t limit);

/* Output `out` as element src[k] of xs[which[k]] (xs[0] when which is
 * NULL) at each position k of shape: the movement ops' one emitter. */
int fv_pick(ox_ctx *c, int out, ox_val *const *xs, const int *which, const int64_t *src, int rank, const int64_t *shape);

/* Output `out` as x's elements in their order, of shape (as many). */
int fv_same(ox_ctx *c, int out, ox_val *x, int rank, const int64_t *shape);

/* The elementwise ops the evaluator folds (onnx_fold.c's tables). */
typedef enum { E_ADD, E_SUB, E_MUL, E_DIV, E_MOD, E_POW, E_MAX, E_MIN, E_EQ, E_LT, E_LE, E_GT, E_GE, E_AND, E_OR, E_XOR } ebin;
typedef enum { U_NEG, U_ABS, U_FLOOR, U_CEIL, U_ROUND, U_SQRT, U_RECIP, U_EXP, U_LOG, U_SIN, U_COS, U_TANH, U_SIGMOID, U_RELU, U_SIGN,
               U_NOT, U_ISNAN, U_ISINF } eun;

/* Integer op k of dims a and b (symbolic where the result stays affine;
 * fmod_attr: Mod's attribute) into *r. */
harp_status fv_int_bin(ox_ctx *c, ebin k, int64_t fmod_attr, const fe_dim *a, const fe_dim *b, const fe_dim **r);
/* Whether d >= *lb for every binding of its sizes (a constant plus
 * non-negative multiples of sizes). */
bool fv_dim_lb(const fe_dim *d, int64_t *lb);
/* Element j of the broadcast operand with strides st in a result of
 * rank r and shape: its index in the operand. */
int64_t fv_at(int64_t j, int r, const int64_t *shape, const int64_t *st);
/* Output `out` as integers (oty OX_BOOL: bools) of rank and shape: NULL
 * with *r FOLD_DECLINE when too many, FOLD_FAIL on error, or (*r
 * FOLD_DONE) when output out is unused. */
ox_val *fv_out_ints(ox_ctx *c, int out, int rank, const int64_t *shape, int oty, int *r);
/* Output `out` as a float / bool tensor t (taken), computed at import. */
int fv_end_tensor(ox_ctx *c, int out, ut_tensor *t, int oty);

/* onnx_fold_fsym.c: sizes cast to float (ox_val.fden).  fv_fsym: whether
 * x is one; fv_fsym_bin: op k of x[0] and x[1] (one of them one) broadcast
 * to rank r, shape with strides st, into output out; fv_fsym_un: unary
 * op k of a; fv_fsym_cast: x (a size, or one cast to float) cast to ONNX
 * type `to`; fv_fsym_settle: output y as a plain float tensor when
 * none of its elements is symbolic.  Each returns FOLD_*. */
bool fv_fsym(const ox_val *x);
int fv_fsym_bin(ox_ctx *c, ebin k, ox_val *const *x, int r, const int64_t *shape, int64_t (*st)[TINY_MAX_RANK], int out);
int fv_fsym_un(ox_ctx *c, eun k, const ox_val *a);
int fv_fsym_cast(ox_ctx *c, const ox_val *x, int64_t to);
int fv_fsym_settle(ox_ctx *c, int out);

/* onnx_fold_move.c: the fold of a movement op (NULL if none). */
ox_fold_fn ox_fold_find_move(const char *op);

#endif
