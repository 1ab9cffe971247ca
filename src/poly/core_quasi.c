/* core_quasi.c — Poly Core: an access as one quasi-affine index per axis
 * of its tensor (harp/polyquasi.h), read off isl's multi-affine form of the
 * read: integer coefficients over the block's variables plus integer
 * multiples of floor(x_v / d), d a positive constant.
 * Needs: core_int.h.  Gives: poly_access_quasi, poly_core_quasi_of. */
#include <string.h>

#include "harp/polyquasi.h"
#include "poly/core_int.h"

/* Division i of aff a as floor(x_v / d): *v, *d; false for anything else
 * (a constant or a second variable in the numerator, nested divisions). */
static bool div_of(__isl_keep isl_aff *a, int i, int nvars, int *v, int64_t *d) {
  isl_aff *q = isl_aff_get_div(a, i);
  if (!q) return false;
  bool ok = poly_core_val(isl_aff_get_denominator_val(q), d) && *d > 0;
  if (ok) q = isl_aff_scale_val(q, isl_val_int_from_si(isl_aff_get_ctx(q), (long)*d));
  int64_t c = 0;
  ok = ok && q && isl_aff_dim(q, isl_dim_param) == 0;
  for (int j = 0; ok && j < (int)isl_aff_dim(q, isl_dim_div); j++) { /* no nested division */
    int64_t k = 0;
    ok = poly_core_val(isl_aff_get_coefficient_val(q, isl_dim_div, j), &k) && k == 0;
  }
  ok = ok && poly_core_val(isl_aff_get_constant_val(q), &c) && c == 0;
  *v = -1;
  for (int u = 0; ok && u < nvars; u++) {
    int64_t k = 0;
    ok = poly_core_val(isl_aff_get_coefficient_val(q, isl_dim_in, u), &k);
    if (!ok || !k) continue;
    ok = k == 1 && *v < 0;
    *v = u;
  }
  isl_aff_free(q);
  return ok && *v >= 0;
}

/* Output k of ma as a poly_qaxis over nvars variables. */
static bool axis_of(__isl_keep isl_multi_aff *ma, int k, int nvars, poly_qaxis *q) {
  isl_aff *a = isl_multi_aff_get_aff(ma, k);
  memset(q, 0, sizeof *q);
  bool ok = a && isl_aff_dim(a, isl_dim_param) == 0 && poly_core_val(isl_aff_get_constant_val(a), &q->c0);
  for (int v = 0; ok && v < nvars; v++) ok = poly_core_val(isl_aff_get_coefficient_val(a, isl_dim_in, v), &q->coef[v]);
  int nd = ok ? (int)isl_aff_dim(a, isl_dim_div) : 0;
  for (int i = 0; ok && i < nd; i++) {
    int64_t c = 0;
    ok = poly_core_val(isl_aff_get_coefficient_val(a, isl_dim_div, i), &c);
    if (!ok || !c) continue;
    ok = q->ndiv < POLY_QUASI_MAX_DIV && div_of(a, i, nvars, &q->dvar[q->ndiv], &q->dden[q->ndiv]);
    if (ok) q->dcoef[q->ndiv++] = c;
  }
  isl_aff_free(a);
  return ok;
}

bool poly_core_quasi_of(__isl_keep isl_multi_aff *ma, int nvars, poly_qaxis *ax, int *rank) {
  int n = (int)isl_multi_aff_dim(ma, isl_dim_out);
  bool good = n >= 0 && n <= TINY_MAX_RANK && (int)isl_multi_aff_dim(ma, isl_dim_in) == nvars;
  for (int k = 0; good && k < n; k++) good = axis_of(ma, k, nvars, &ax[k]);
  *rank = good ? n : 0;
  return good;
}

harp_status poly_access_quasi(harp_error *e, const poly_view *pv, int block, int access, poly_qaxis *ax, int *rank,
                              bool *ok) {
  *ok = false;
  *rank = 0;
  if (block < 0 || block >= pv->nblocks || access < 0 || access >= pv->blocks[block].pub.naccess)
    return ut_fail(e, HARP_E_INTERNAL, NULL, "poly_access_quasi: no such access");
  const poly_blk *b = &pv->blocks[block];
  if (b->acc[access].nfill) return HARP_OK;
  isl_multi_aff *ma = poly_core_single_piece(poly_access_pma(pv, block, access));
  if (!ma) {
    isl_ctx_reset_error(pv->ctx);
    return HARP_OK;
  }
  *ok = poly_core_quasi_of(ma, b->pub.nvars, ax, rank);
  isl_multi_aff_free(ma);
  isl_ctx_reset_error(pv->ctx);
  return HARP_OK;
}
