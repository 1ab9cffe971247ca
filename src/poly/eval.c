/* eval.c — enumerating an access on concrete sizes.
 * Needs: a built poly_view whose blocks use no parameters.
 * Gives: poly_access_scan (tests, CPU playback of accesses).
 *
 * The read relation is wrapped into a set of (point, element) pairs and its
 * points are enumerated (isl_set_foreach_point); each fill set is
 * enumerated the same way. */
#include <stdlib.h>
#include <string.h>

#include <isl/point.h>
#include <isl/val.h>

#include "poly/poly_int.h"
#include "util/util.h"

typedef struct scan {
  poly_point_fn cb;
  void *user;
  int nvars, rank;
  bool fill;
  double value;
  bool stopped, bad;
} scan;

static isl_stat on_point(__isl_take isl_point *pnt, void *user) {
  scan *s = user;
  int64_t c[2 * POLY_MAX_VARS + TINY_MAX_RANK];
  int n = s->nvars + (s->fill ? 0 : s->rank);
  for (int k = 0; k < n; k++) {
    isl_val *v = isl_point_get_coordinate_val(pnt, isl_dim_set, k);
    if (!v || !isl_val_is_int(v)) s->bad = true;
    c[k] = v ? isl_val_get_num_si(v) : 0;
    isl_val_free(v);
  }
  isl_point_free(pnt);
  if (s->bad) return isl_stat_error;
  if (s->cb(s->user, c, s->nvars, s->fill ? NULL : c + s->nvars, s->fill ? 0 : s->rank, s->fill, s->value)) {
    s->stopped = true;
    return isl_stat_error;
  }
  return isl_stat_ok;
}

harp_status poly_access_scan(harp_error *e, const poly_view *pv, int block, int access, poly_point_fn cb, void *user) {
  if (block < 0 || block >= pv->nblocks || access < 0 || access >= pv->blocks[block].pub.naccess)
    return ut_fail(e, HARP_E_INTERNAL, NULL, "poly_access_scan: no such access");
  const poly_blk *b = &pv->blocks[block];
  const poly_acc *a = &b->acc[access];
  if (b->nparams) return ut_fail(e, HARP_E_UNBOUND_SYMBOL, b->pub.name, "scanning needs every symbol bound");
  scan s = {cb, user, b->pub.nvars, (int)isl_map_dim(a->map, isl_dim_out), false, 0, false, false};
  isl_set *w = isl_map_wrap(isl_map_copy(a->map));
  isl_stat r = isl_set_foreach_point(w, &on_point, &s);
  isl_set_free(w);
  for (int q = 0; r == isl_stat_ok && q < a->nfill; q++) {
    s.fill = true;
    s.value = a->fill[q].value;
    r = isl_set_foreach_point(a->fill[q].set, &on_point, &s);
  }
  if (r == isl_stat_ok || s.stopped) {
    isl_ctx_reset_error(pv->ctx);
    return HARP_OK;
  }
  isl_ctx_reset_error(pv->ctx);
  return ut_fail(e, HARP_E_INTERNAL, b->pub.name, "isl failed to enumerate an access");
}
