/* core_int.h — helpers shared by the Poly Core files (src/poly/core_*.c). */
#ifndef HARP_POLY_CORE_INT_H
#define HARP_POLY_CORE_INT_H

#include <isl/aff.h>
#include <isl/ilp.h>
#include <isl/val.h>

#include "harp/polycore.h"
#include "poly/poly_int.h"

/* An isl failure (or a NULL result) as a harp_error; resets isl's error. */
harp_status poly_core_isl_fail(const poly_view *pv, harp_error *e, const char *who, const char *what);

/* A constant integer from an isl_val (taken); false when it is not one. */
bool poly_core_val(__isl_take isl_val *v, int64_t *out);

/* Row-major element strides of node's shape; false when a size is unknown. */
bool poly_core_shape_strides(const poly_view *pv, int node, int64_t *strides, int *rank);

/* Block variable ranges [lo, hi] from its domain; false when not constant. */
bool poly_core_var_ranges(const poly_view *pv, int block, int64_t *lo, int64_t *hi);

/* The reads of block b whose tensor is node (indices into its accesses). */
int poly_core_reads_of(const poly_view *pv, int block, int node, int *acc, int cap);

/* The multi-affine function of a one-piece pma (taken); NULL otherwise. */
__isl_give isl_multi_aff *poly_core_single_piece(__isl_take isl_pw_multi_aff *pma);

/* ma (kept) as one poly_qaxis per output (harp/polyquasi.h) over nvars
 * inputs, *rank outputs; false when one is not of that form (core_quasi.c). */
struct poly_qaxis;
bool poly_core_quasi_of(__isl_keep isl_multi_aff *ma, int nvars, struct poly_qaxis *ax, int *rank);

#endif
