/* harp/polyquasi.h — Poly Core: an access as quasi-affine indices, one per
 * axis of its tensor (src/poly/core_quasi.c), for the kernels that read
 * through floor divisions and remainders by constants: a nearest upsample
 * reads x[h / 2], a depth-to-space x[4 c + 2 (h % 2) + w % 2, h / 2, w / 2].
 * Needs: harp/polycore.h.  Gives: poly_qaxis, poly_access_quasi,
 * poly_chain_quasi. */
#ifndef HARP_POLYQUASI_H
#define HARP_POLYQUASI_H

#include "harp/polycore.h"

#define POLY_QUASI_MAX_DIV 4

/* Index of one tensor axis over a block's variables x:
 *   c0 + sum_v coef[v] x_v + sum_i dcoef[i] floor(x_{dvar[i]} / dden[i])
 * (a remainder x % d is x - d floor(x / d)). */
typedef struct poly_qaxis {
  int64_t c0, coef[POLY_MAX_VARS];
  int ndiv;
  int dvar[POLY_QUASI_MAX_DIV];
  int64_t dden[POLY_QUASI_MAX_DIV], dcoef[POLY_QUASI_MAX_DIV];
} poly_qaxis;

/* Read `access` of `block` as one poly_qaxis per axis of its tensor (ax:
 * TINY_MAX_RANK entries; *rank the tensor's rank).  *ok false (ax unset)
 * when the read has fill pieces or several pieces, a division of anything
 * but one variable by a positive constant, nested divisions, parameters or
 * more than POLY_QUASI_MAX_DIV divisions on an axis. */
harp_status poly_access_quasi(harp_error *e, const poly_view *pv, int block, int access, poly_qaxis *ax, int *rank,
                              bool *ok);

/* poly_chain_read's answer for chain c over lo..hi (core_chain.c), a read of
 * real elements everywhere as one poly_qaxis per axis of the last tensor
 * (ax, *rank) over block[0]'s variables instead of strides: kind READ
 * then, FILL with its value, or MIXED (also when not of that form). */
harp_status poly_chain_quasi(harp_error *e, const poly_view *pv, const poly_chain *c, const int64_t *lo, const int64_t *hi,
                             poly_chain_result *out, poly_qaxis *ax, int *rank);

#endif
