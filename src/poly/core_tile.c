/* core_tile.c — Poly Core on tiles: tail axes, can_compute_at with its halo,
 * min_buffer_for_edge, barrier and bank-conflict hints (seed 000 §1.6).
 * Needs: core_deps.c helpers, core_fuse.c (pointwise, strides).
 * Gives: poly_tail_axes, poly_can_compute_at, poly_min_buffer_for_edge,
 * poly_barrier_hint, poly_bank_conflict_hint.
 *
 * Tails: P = the domain projected on a variable, tile(x) = floor(x / T);
 * the partial tiles are the tiles some point of which is outside P, the
 * tail the points of P in them — all isl sets, parametric when sizes are.
 *
 * can_compute_at: a consumer tile is the box of `tile` output points at the
 * domain's lower corner, all reduced points included.  Every read piece of
 * the producer is an isl_multi_aff; its range over the tile (isl_set_min_val /
 * isl_set_max_val per producer axis) is the footprint.  The functions are
 * applied to the whole tile, outside their piece too, so the positions a
 * window reads in padding count (the halo of a padded conv is symmetric).
 * The core of an axis is the range of the same function with the reduced
 * variables and the constant dropped: the tile's own image; the halo is the
 * reach beyond it (lo below, hi above).  An axis no output variable indexes
 * has no halo. */
#include <stdlib.h>
#include <string.h>

#include "poly/core_int.h"
#include "util/util.h"

/* ---- tails ------------------------------------------------------------------------ */
/* { D -> [x_v] } restricted to the domain. */
static __isl_give isl_map *project_var(__isl_keep isl_set *dom, int v) {
  isl_space *sp = isl_set_get_space(dom);
  isl_space *ran = isl_space_set_alloc(isl_set_get_ctx(dom), 0, 1);
  ran = isl_space_align_params(ran, isl_space_copy(sp));
  isl_map *m = isl_map_universe(isl_space_map_from_domain_and_range(sp, ran));
  m = isl_map_equate(m, isl_dim_in, v, isl_dim_out, 0);
  return isl_map_intersect_domain(m, isl_set_copy(dom));
}

/* { [x] -> [t] : T t <= x < T t + T } */
static __isl_give isl_map *tile_map(__isl_keep isl_space *one, int64_t T) {
  isl_space *sp = isl_space_map_from_set(isl_space_copy(one));
  isl_local_space *ls = isl_local_space_from_space(isl_space_copy(sp));
  isl_constraint *c1 = isl_constraint_alloc_inequality(isl_local_space_copy(ls)); /* x - T t >= 0 */
  c1 = isl_constraint_set_coefficient_si(c1, isl_dim_in, 0, 1);
  c1 = isl_constraint_set_coefficient_si(c1, isl_dim_out, 0, (int)-T);
  isl_constraint *c2 = isl_constraint_alloc_inequality(ls); /* T t + T - 1 - x >= 0 */
  c2 = isl_constraint_set_coefficient_si(c2, isl_dim_in, 0, -1);
  c2 = isl_constraint_set_coefficient_si(c2, isl_dim_out, 0, (int)T);
  c2 = isl_constraint_set_constant_si(c2, (int)(T - 1));
  return isl_map_add_constraint(isl_map_add_constraint(isl_map_universe(sp), c1), c2);
}

harp_status poly_tail_axes(harp_error *e, const poly_view *pv, int block, const int64_t *tile, bool *tail,
                         char **tail_set) {
  if (tail_set) *tail_set = NULL;
  if (block < 0 || block >= pv->nblocks) return ut_fail(e, HARP_E_INTERNAL, NULL, "poly_tail_axes: no such block");
  const poly_blk *b = &pv->blocks[block];
  isl_set *all = isl_set_empty(isl_set_get_space(b->domain));
  for (int v = 0; v < b->pub.nvars; v++) {
    tail[v] = false;
    if (!tile || tile[v] <= 0) continue;
    if (tile[v] > INT32_MAX) return ut_fail(e, HARP_E_LIMIT, b->pub.name, "tile %lld is too large", (long long)tile[v]);
    isl_map *pi = project_var(b->domain, v);
    isl_set *P = isl_set_apply(isl_set_copy(b->domain), isl_map_copy(pi));
    isl_space *one = isl_set_get_space(P);
    isl_map *tm = tile_map(one, tile[v]);
    tm = isl_map_align_params(tm, isl_space_copy(one));
    isl_space_free(one);
    isl_set *tiles = isl_set_apply(isl_set_copy(P), isl_map_copy(tm));
    isl_set *covered = isl_set_apply(tiles, isl_map_reverse(isl_map_copy(tm)));
    isl_set *missing = isl_set_subtract(covered, isl_set_copy(P));
    isl_set *partial = isl_set_apply(missing, isl_map_copy(tm));
    isl_set *tailv = isl_set_intersect(P, isl_set_apply(partial, isl_map_reverse(tm)));
    isl_bool empty = isl_set_is_empty(tailv);
    if (empty == isl_bool_error) {
      isl_set_free(tailv);
      isl_map_free(pi);
      isl_set_free(all);
      return poly_core_isl_fail(pv, e, b->pub.name, "finding tails");
    }
    tail[v] = !empty;
    all = isl_set_union(all, isl_set_apply(tailv, isl_map_reverse(pi)));
  }
  all = isl_set_coalesce(all);
  if (!all) return poly_core_isl_fail(pv, e, b->pub.name, "finding tails");
  if (tail_set) {
    char *s = isl_set_to_str(all);
    *tail_set = s ? strdup(s) : NULL;
    free(s);
  }
  isl_set_free(all);
  if (tail_set && !*tail_set) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  return HARP_OK;
}

/* ---- can_compute_at ----------------------------------------------------------------- */
typedef struct footprint {
  const poly_view *pv;
  isl_set *tile; /* the consumer tile (block space) */
  bool box;      /* the tile is exactly the box tlo..thi (a box domain) */
  int64_t tlo[POLY_MAX_VARS], thi[POLY_MAX_VARS];
  int nout, nvars, rank;
  int64_t nlo[TINY_MAX_RANK], nhi[TINY_MAX_RANK]; /* needed */
  int64_t clo[TINY_MAX_RANK], chi[TINY_MAX_RANK]; /* core */
  bool has_core[TINY_MAX_RANK];
  bool any, bad;
} footprint;

/* An integer affine function of the variables alone over a box: each
 * variable at the end of its range its coefficient's sign picks, the answer
 * isl's ILP gives, without the ILP.  False: not of that form (divisions,
 * parameters, a denominator, overflow). */
static bool box_range(const footprint *f, __isl_keep isl_aff *a, int64_t *lo, int64_t *hi) {
  if (isl_aff_dim(a, isl_dim_div) != 0 || isl_aff_dim(a, isl_dim_param) != 0 || isl_aff_dim(a, isl_dim_in) != f->nvars)
    return false;
  int64_t den, c;
  if (!poly_core_val(isl_aff_get_denominator_val(a), &den) || den != 1 || !poly_core_val(isl_aff_get_constant_val(a), &c))
    return false;
  __int128 l = c, h = c;
  for (int v = 0; v < f->nvars; v++) {
    int64_t k;
    if (!poly_core_val(isl_aff_get_coefficient_val(a, isl_dim_in, v), &k)) return false;
    __int128 x = (__int128)k * f->tlo[v], y = (__int128)k * f->thi[v];
    l += x < y ? x : y;
    h += x < y ? y : x;
  }
  if (l < INT64_MIN || h > INT64_MAX) return false;
  *lo = (int64_t)l;
  *hi = (int64_t)h;
  return true;
}

static bool range_of(const footprint *f, __isl_keep isl_aff *a, int64_t *lo, int64_t *hi) {
  if (f->box && box_range(f, a, lo, hi)) return true;
  return poly_core_val(isl_set_min_val(f->tile, a), lo) && poly_core_val(isl_set_max_val(f->tile, a), hi);
}

static void widen(int64_t *lo, int64_t *hi, int64_t l, int64_t h, bool first) {
  if (first || l < *lo) *lo = l;
  if (first || h > *hi) *hi = h;
}

static isl_stat on_piece(__isl_take isl_set *set, __isl_take isl_multi_aff *ma, void *user) {
  footprint *f = user;
  isl_set_free(set); /* the function applies to the whole tile (pad positions included) */
  for (int d = 0; d < f->rank && !f->bad; d++) {
    isl_aff *a = isl_multi_aff_get_aff(ma, d);
    int64_t lo, hi;
    if (!a || !range_of(f, a, &lo, &hi)) {
      f->bad = true;
      isl_aff_free(a);
      break;
    }
    widen(&f->nlo[d], &f->nhi[d], lo, hi, !f->any);
    /* core: the output variables' part only */
    bool uses_out = false;
    for (int v = 0; v < f->nout; v++) uses_out |= isl_aff_involves_dims(a, isl_dim_in, (unsigned)v, 1) == isl_bool_true;
    if (uses_out && isl_aff_dim(a, isl_dim_div) == 0) {
      isl_aff *c = isl_aff_set_constant_si(a, 0);
      for (int v = f->nout; v < f->nvars; v++) c = isl_aff_set_coefficient_si(c, isl_dim_in, v, 0);
      if (!range_of(f, c, &lo, &hi)) f->bad = true;
      else widen(&f->clo[d], &f->chi[d], lo, hi, !f->has_core[d]);
      f->has_core[d] = true;
      isl_aff_free(c);
    } else {
      isl_aff_free(a);
    }
  }
  f->any = true;
  isl_multi_aff_free(ma);
  return f->bad ? isl_stat_error : isl_stat_ok;
}

static void not_ok(poly_halo *h, const char *fmt, const char *a) { snprintf(h->why, sizeof h->why, fmt, a); }

static harp_status footprint_of(harp_error *e, const poly_view *pv, int consumer, const tiny_node *pn, const int *acc, int nacc,
                                const int64_t *tile, const int64_t *lo, const int64_t *hi, poly_halo *out);

harp_status poly_can_compute_at(harp_error *e, const poly_view *pv, int producer, int consumer, const int64_t *tile,
                              poly_halo *out) {
  memset(out, 0, sizeof *out);
  if (consumer < 0 || consumer >= pv->nblocks || producer < 0 || producer >= pv->g->n)
    return ut_fail(e, HARP_E_INTERNAL, NULL, "poly_can_compute_at: no such block or node");
  const poly_blk *b = &pv->blocks[consumer];
  const tiny_node *pn = &pv->g->nodes[producer];
  int acc[POLY_MAX_ACC];
  int nacc = poly_core_reads_of(pv, consumer, producer, acc, POLY_MAX_ACC);
  out->rank = pn->shape.rank;
  if (nacc == 0) return not_ok(out, "%s is not read by this block", pn->id), HARP_OK;
  if (tiny_op_class(pn->op) == TC_GATHER)
    return not_ok(out, "%s is outside the SCoP (data-dependent indices)", pn->id), HARP_OK;
  int64_t lo[POLY_MAX_VARS], hi[POLY_MAX_VARS];
  if (!poly_core_var_ranges(pv, consumer, lo, hi)) return not_ok(out, "%s has sizes that are not known", b->pub.name), HARP_OK;
  const char *key; /* acc_cache.c: the answer of a block of the same shape */
  if (poly_halo_cache_get(pv, b, acc, nacc, tile, tiny_dtype_size(pn->dtype), out, &key)) return HARP_OK;
  harp_status st = footprint_of(e, pv, consumer, pn, acc, nacc, tile, lo, hi, out);
  if (!st) poly_halo_cache_put(pv, key, out);
  return st;
}

/* poly_can_compute_at's answer for reads acc[0..nacc) of `consumer` of
 * node pn at tile, the consumer's variables in lo..hi: into *out. */
static harp_status footprint_of(harp_error *e, const poly_view *pv, int consumer, const tiny_node *pn, const int *acc, int nacc,
                                const int64_t *tile, const int64_t *lo, const int64_t *hi, poly_halo *out) {
  const poly_blk *b = &pv->blocks[consumer];
  /* the tile at the domain's lower corner */
  isl_set *t = isl_set_copy(b->domain);
  for (int v = 0; v < b->pub.nout; v++) {
    int64_t n = hi[v] - lo[v] + 1, s = tile && tile[v] ? tile[v] : 1;
    if (s < 0 || s > n) s = n;
    t = isl_set_upper_bound_si(t, isl_dim_set, (unsigned)v, (int)UT_MIN(lo[v] + s - 1, INT32_MAX));
  }
  footprint f = {.pv = pv, .tile = t, .box = b->is_box, .nout = b->pub.nout, .nvars = b->pub.nvars, .rank = pn->shape.rank};
  for (int v = 0; v < b->pub.nvars; v++) {
    int64_t n = hi[v] - lo[v] + 1, s = v < b->pub.nout && tile && tile[v] ? tile[v] : v < b->pub.nout ? 1 : n;
    if (s < 0 || s > n) s = n;
    f.tlo[v] = lo[v];
    f.thi[v] = v < b->pub.nout ? UT_MIN(lo[v] + s - 1, INT32_MAX) : hi[v];
  }
  for (int k = 0; k < nacc && !f.bad; k++) {
    isl_pw_multi_aff *pma = poly_access_pma(pv, consumer, acc[k]);
    if (!pma || isl_pw_multi_aff_foreach_piece(pma, &on_piece, &f) < 0) f.bad = true;
    isl_pw_multi_aff_free(pma);
  }
  isl_set_free(t);
  if (f.bad || !f.any) {
    isl_ctx_reset_error(pv->ctx);
    return not_ok(out, "the footprint of %s has no constant bounds", pn->id), HARP_OK;
  }
  int64_t elems = 1, core = 1;
  bool over = false;
  for (int d = 0; d < f.rank; d++) {
    out->extent[d] = f.nhi[d] - f.nlo[d] + 1;
    if (f.has_core[d]) {
      out->core[d] = f.chi[d] - f.clo[d] + 1;
      out->lo[d] = f.clo[d] - f.nlo[d];
      out->hi[d] = f.nhi[d] - f.chi[d];
    } else {
      out->core[d] = out->extent[d];
    }
    over |= !ut_mul_ok(elems, out->extent[d], &elems) || !ut_mul_ok(core, UT_MIN(out->core[d], out->extent[d]), &core);
  }
  if (over) return not_ok(out, "the footprint of %s is too large", pn->id), HARP_OK;
  int es = tiny_dtype_size(pn->dtype);
  out->elems = elems;
  out->halo_elems = elems - core;
  out->bytes = out->halo_elems * es;
  out->footprint_bytes = elems * es;
  out->ok = true;
  out->pointwise = true; /* every read of the producer at the consumer's own position (MUL(x, x) too) */
  for (int k = 0; k < nacc && out->pointwise; k++) {
    harp_status st = poly_access_is_pointwise(e, pv, consumer, acc[k], &out->pointwise);
    if (st) return st;
  }
  return HARP_OK;
}

harp_status poly_min_buffer_for_edge(harp_error *e, const poly_view *pv, int producer, int consumer, const int64_t *tile,
                                   int64_t budget, poly_min_buffer *out) {
  memset(out, 0, sizeof *out);
  harp_status st = poly_can_compute_at(e, pv, producer, consumer, tile, &out->halo);
  if (st) return st;
  const poly_halo *h = &out->halo;
  int es = tiny_dtype_size(pv->g->nodes[producer].dtype);
  out->buffer = PLAN_BUF_GMEM;
  out->bytes = h->ok ? h->footprint_bytes : 0;
  if (!h->ok) return HARP_OK;
  if (h->pointwise || h->elems == 1) { /* the thread that made it uses it: a register */
    out->buffer = PLAN_BUF_REG;
    out->bytes = es;
  } else if (h->footprint_bytes <= budget) {
    out->buffer = PLAN_BUF_SMEM_RING;
    out->depth = 2 * h->footprint_bytes <= budget ? 2 : 0;
    out->bytes = h->footprint_bytes * (out->depth ? out->depth : 1);
  }
  return HARP_OK;
}

/* ---- hints ------------------------------------------------------------------------------ */
const char *poly_barrier_name(poly_barrier b) {
  static const char *const n[] = {"none", "sync", "commit_wait", "mbarrier"};
  return (unsigned)b < 4 ? n[b] : "?";
}

poly_barrier poly_barrier_hint(plan_buffer buffer, int depth, plan_arch arch) {
  if (buffer == PLAN_BUF_REG || !plan_arch_is_gpu(arch)) return POLY_BARRIER_NONE;
  if (buffer == PLAN_BUF_SMEM_RING && depth >= 2) return arch == PLAN_ARCH_SM90 ? POLY_BARRIER_MBARRIER : POLY_BARRIER_COMMIT_WAIT;
  return POLY_BARRIER_SYNC;
}

harp_status poly_bank_conflict_hint(harp_error *e, const poly_view *pv, int block, int access, int var,
                                  int64_t row_elems, int elem_size, int *ways) {
  *ways = 1;
  if (block < 0 || block >= pv->nblocks || access < 0 || access >= pv->blocks[block].pub.naccess ||
      var < 0 || var >= pv->blocks[block].pub.nvars)
    return ut_fail(e, HARP_E_INTERNAL, NULL, "poly_bank_conflict_hint: no such access");
  isl_pw_multi_aff *pma = poly_access_pma(pv, block, access);
  if (!pma) return poly_core_isl_fail(pv, e, pv->blocks[block].pub.name, "reading an access");
  isl_multi_aff *ma = poly_core_single_piece(pma);
  if (!ma) return HARP_OK; /* several pieces: no single stride, no hint */
  isl_size rank = ma ? isl_multi_aff_dim(ma, isl_dim_out) : -1;
  int64_t stride = 0, c;
  /* the element stride inside a tile stored row-major with rows of row_elems:
   * the innermost tensor axis moves by 1, the one before it by a row */
  for (int d = (int)rank - 1, w = 0; d >= 0 && w < 2; d--, w++) {
    isl_aff *a = isl_multi_aff_get_aff(ma, d);
    if (a && poly_core_val(isl_aff_get_coefficient_val(a, isl_dim_in, var), &c)) stride += c * (w == 0 ? 1 : row_elems);
    isl_aff_free(a);
  }
  isl_multi_aff_free(ma);
  int64_t bytes = stride * elem_size;
  if (bytes < 0) bytes = -bytes;
  if (bytes == 0 || bytes < 4) *ways = 1; /* one word for several threads: a broadcast */
  else *ways = (int)ut_gcd(bytes / 4, 32);
  return HARP_OK;
}
