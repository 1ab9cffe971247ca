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

/* onnx_fold_move.c: the fold of a movement op (NULL if none). */
ox_fold_fn ox_fold_find_move(const char *op);

#endif
