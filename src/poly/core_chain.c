/* core_chain.c — Poly Core for reads through padded views: what a chain of
 * reads from one block's point reaches, over a box of its domain.
 * Needs: core_deps.c helpers, core_quasi.c.  Gives: poly_chain_read,
 * poly_chain_quasi, poly_chain_cuts.
 *
 * A chain starts at a point x of block path[0]: its read access[0] is an
 * element of the value block path[1] computes, at the point A0(x) of
 * path[1]'s domain (the value's index space is that block's domain: an
 * elementwise block), whose read access[1] ... and so on to the last read.
 * A read with fill (PAD, a concat's pieces) reads a pad value instead on
 * part of its block's domain.  Over a box of path[0]'s domain the chain
 * reads real elements everywhere (then the composition is one affine
 * function: strides and offset of the last tensor's linear index), or one
 * pad value everywhere, or a mix.  poly_chain_cuts finds the boxes where no
 * chain mixes: cuts along one variable (a concat along the last axis cuts
 * it where the pieces meet). */
#include <stdlib.h>
#include <string.h>

#include "harp/polyquasi.h"
#include "poly/core_int.h"
#include "util/util.h"

static bool bad_chain(const poly_view *pv, const poly_chain *c) {
  if (c->n < 1 || c->n > POLY_CHAIN_MAX) return true;
  for (int i = 0; i < c->n; i++) {
    int b = c->block[i], a = c->access[i];
    if (b < 0 || b >= pv->nblocks || a < 0 || a >= pv->blocks[b].pub.naccess || pv->blocks[b].pub.access[a].write)
      return true;
    if (i + 1 < c->n && pv->blocks[c->block[i + 1]].pub.node != pv->blocks[b].pub.access[a].tensor) return true;
  }
  return false;
}

/* block's domain within lo <= x <= hi (lo NULL: all of it) */
static __isl_give isl_set *box_of(const poly_view *pv, int block, const int64_t *lo, const int64_t *hi) {
  isl_set *d = isl_set_copy(pv->blocks[block].domain);
  for (int v = 0; lo && v < pv->blocks[block].pub.nvars; v++) {
    d = isl_set_lower_bound_si(d, isl_dim_set, (unsigned)v, (int)lo[v]);
    d = isl_set_upper_bound_si(d, isl_dim_set, (unsigned)v, (int)hi[v]);
  }
  return d;
}

static __isl_give isl_map *anon_map(__isl_take isl_map *m) {
  return isl_map_reset_tuple_id(isl_map_reset_tuple_id(m, isl_dim_in), isl_dim_out);
}
static __isl_give isl_set *anon_set(__isl_take isl_set *s) { return isl_set_reset_tuple_id(s); }

/* dom(m) restricted to the points whose image lies in s */
static __isl_give isl_set *where(__isl_keep isl_map *m, __isl_take isl_set *s) {
  isl_map *r = isl_map_copy(m);
  s = isl_set_align_params(anon_set(s), isl_map_get_space(r));
  r = isl_map_align_params(r, isl_set_get_space(s));
  return isl_map_domain(isl_map_intersect_range(r, s));
}

/* The steps of chain c from dom: at each step the points reading real
 * elements and those reading each pad value.  walk calls visit(real, fills)
 * per padded step with sets over path[0]'s domain and stops at the first
 * nonzero return; m ends as the composition over the points that read real
 * elements all the way. */
typedef int (*step_fn)(void *user, int step, __isl_keep isl_set *real, __isl_keep isl_set *const *fill, int nfill);

static __isl_give isl_map *walk(const poly_view *pv, const poly_chain *c, __isl_take isl_set *dom, step_fn visit,
                                void *user, int *stopped) {
  *stopped = 0;
  isl_map *m = isl_map_identity(isl_space_map_from_set(isl_set_get_space(dom)));
  m = anon_map(isl_map_intersect_domain(m, dom));
  for (int i = 0; i < c->n && m; i++) {
    const poly_acc *a = &pv->blocks[c->block[i]].acc[c->access[i]];
    isl_map *am = anon_map(isl_map_copy(a->map));
    if (a->nfill) {
      isl_set *real = where(m, isl_map_domain(isl_map_copy(am)));
      isl_set *fill[POLY_MAX_FILLS] = {0};
      for (int q = 0; q < a->nfill; q++) fill[q] = where(m, isl_set_copy(a->fill[q].set));
      int r = visit(user, i, real, fill, a->nfill);
      isl_set_free(real);
      for (int q = 0; q < a->nfill; q++) isl_set_free(fill[q]);
      if (r) {
        *stopped = r;
        isl_map_free(am);
        return m;
      }
    }
    am = isl_map_align_params(am, isl_map_get_space(m));
    m = isl_map_align_params(m, isl_map_get_space(am));
    m = isl_map_apply_range(m, am);
  }
  return m;
}

/* ---- poly_chain_read ------------------------------------------------------------------ */
typedef struct read_st {
  const poly_view *pv;
  const poly_chain *c;
  isl_set *box;
  int kind;
  double fill;
} read_st;

enum { GO_ON = 0, STOP_FILL = 1, STOP_MIXED = 2, STOP_ERR = 3 };

static int read_step(void *user, int step, __isl_keep isl_set *real, __isl_keep isl_set *const *fill, int nfill) {
  read_st *r = user;
  isl_bool e = isl_set_is_empty(real);
  if (e < 0) return STOP_ERR;
  if (!e) { /* real somewhere: everywhere, or a mix */
    isl_set *b = isl_set_align_params(isl_set_copy(r->box), isl_set_get_space(real));
    isl_bool all = isl_set_is_subset(b, real);
    isl_set_free(b);
    return all < 0 ? STOP_ERR : all ? GO_ON : STOP_MIXED;
  }
  for (int q = 0; q < nfill; q++) {
    isl_set *b = isl_set_align_params(isl_set_copy(r->box), isl_set_get_space(fill[q]));
    isl_bool all = isl_set_is_subset(b, fill[q]);
    isl_set_free(b);
    if (all < 0) return STOP_ERR;
    if (all) {
      r->fill = r->pv->blocks[r->c->block[step]].acc[r->c->access[step]].fill[q].value;
      return STOP_FILL;
    }
  }
  return STOP_MIXED;
}

/* Follow chain c over the box lo..hi of its first block: *out's kind (a
 * fill value with FILL) and, when it reads real elements everywhere, *ma
 * the composition as one piece (NULL when it is not one); *rank, *ts the
 * last tensor's rank and row-major strides. */
static harp_status chain_compose(harp_error *e, const poly_view *pv, const poly_chain *c, const int64_t *lo, const int64_t *hi,
                               poly_chain_result *out, int64_t *ts, int *rank, isl_multi_aff **ma) {
  memset(out, 0, sizeof *out);
  out->kind = POLY_CHAIN_MIXED;
  *ma = NULL;
  if (!c || bad_chain(pv, c)) return ut_fail(e, HARP_E_INTERNAL, NULL, "poly_chain_read: not a chain of reads");
  const poly_blk *b0 = &pv->blocks[c->block[0]];
  int t = pv->blocks[c->block[c->n - 1]].pub.access[c->access[c->n - 1]].tensor;
  if (!poly_core_shape_strides(pv, t, ts, rank)) return HARP_OK;
  for (int d = 0; d < *rank; d++)
    if (ts[d] > INT32_MAX) return HARP_OK;
  read_st r = {pv, c, anon_set(box_of(pv, c->block[0], lo, hi)), POLY_CHAIN_MIXED, 0};
  isl_bool empty = isl_set_is_empty(r.box);
  if (empty != isl_bool_false) {
    isl_set_free(r.box);
    return empty < 0 ? poly_core_isl_fail(pv, e, b0->pub.name, "a chain's box") : HARP_OK;
  }
  int stopped;
  isl_map *m = walk(pv, c, isl_set_copy(r.box), read_step, &r, &stopped);
  isl_set_free(r.box);
  if (stopped == STOP_ERR || !m) {
    isl_map_free(m);
    return poly_core_isl_fail(pv, e, b0->pub.name, "following a chain of reads");
  }
  if (stopped == STOP_FILL) {
    out->kind = POLY_CHAIN_FILL;
    out->fill = r.fill;
  }
  if (stopped) {
    isl_map_free(m);
    return HARP_OK;
  }
  /* real everywhere: one function */
  isl_bool sv = isl_map_is_single_valued(m);
  *ma = sv == isl_bool_true ? poly_core_single_piece(isl_pw_multi_aff_from_map(m)) : (isl_map_free(m), NULL);
  if (!*ma) isl_ctx_reset_error(pv->ctx);
  return HARP_OK;
}

harp_status poly_chain_read(harp_error *e, const poly_view *pv, const poly_chain *c, const int64_t *lo, const int64_t *hi,
                          poly_chain_result *out) {
  int64_t ts[TINY_MAX_RANK];
  int rank = 0;
  isl_multi_aff *ma;
  harp_status st = chain_compose(e, pv, c, lo, hi, out, ts, &rank, &ma);
  if (st || !ma) return st;
  /* linearized: strides and an offset */
  const poly_blk *b0 = &pv->blocks[c->block[0]];
  isl_local_space *ls = isl_local_space_from_space(isl_space_range(isl_multi_aff_get_space(ma)));
  isl_aff *l = isl_aff_zero_on_domain(ls);
  for (int d = 0; d < rank; d++) l = isl_aff_set_coefficient_si(l, isl_dim_in, d, (int)ts[d]);
  l = isl_aff_pullback_multi_aff(l, ma);
  bool ok = l && isl_aff_dim(l, isl_dim_div) == 0 && isl_aff_dim(l, isl_dim_param) == 0;
  for (int v = 0; ok && v < b0->pub.nvars; v++) ok = poly_core_val(isl_aff_get_coefficient_val(l, isl_dim_in, v), &out->strides[v]);
  if (ok) ok = poly_core_val(isl_aff_get_constant_val(l), &out->offset);
  isl_aff_free(l);
  isl_ctx_reset_error(pv->ctx);
  if (ok) out->kind = POLY_CHAIN_READ;
  return HARP_OK;
}

harp_status poly_chain_quasi(harp_error *e, const poly_view *pv, const poly_chain *c, const int64_t *lo, const int64_t *hi,
                             poly_chain_result *out, poly_qaxis *ax, int *rank) {
  int64_t ts[TINY_MAX_RANK];
  isl_multi_aff *ma;
  *rank = 0;
  harp_status st = chain_compose(e, pv, c, lo, hi, out, ts, rank, &ma);
  if (st || !ma) return st;
  int nv = pv->blocks[c->block[0]].pub.nvars;
  if (poly_core_quasi_of(ma, nv, ax, rank)) out->kind = POLY_CHAIN_READ;
  isl_multi_aff_free(ma);
  isl_ctx_reset_error(pv->ctx);
  return HARP_OK;
}

/* ---- poly_chain_cuts ------------------------------------------------------------------ */
typedef struct cut_st {
  const poly_view *pv;
  int block; /* path[0] */
  int64_t lo[POLY_MAX_VARS], hi[POLY_MAX_VARS];
  int var; /* the variable cut so far, -1: none */
  int64_t *cuts;
  int ncuts, cap;
  bool fail;
} cut_st;

static bool add_cut(cut_st *s, int64_t x) {
  for (int i = 0; i < s->ncuts; i++)
    if (s->cuts[i] == x) return true;
  if (s->ncuts == s->cap) return false;
  s->cuts[s->ncuts++] = x;
  return true;
}

/* bset (over path[0]'s domain) must be a slab lo <= x_v <= hi of the
 * domain along one variable v, the same for every set. */
static isl_stat slab(__isl_take isl_basic_set *bset, void *user) {
  cut_st *s = user;
  isl_set *set = isl_set_from_basic_set(bset);
  int nv = s->pv->blocks[s->block].pub.nvars;
  int64_t mn[POLY_MAX_VARS], mx[POLY_MAX_VARS];
  isl_set *box = anon_set(isl_set_copy(s->pv->blocks[s->block].domain));
  box = isl_set_align_params(box, isl_set_get_space(set));
  bool ok = true;
  for (int v = 0; v < nv && ok; v++) {
    isl_aff *x = isl_aff_var_on_domain(isl_local_space_from_space(isl_set_get_space(set)), isl_dim_set, (unsigned)v);
    ok = poly_core_val(isl_set_min_val(set, x), &mn[v]) && poly_core_val(isl_set_max_val(set, x), &mx[v]);
    isl_aff_free(x);
    box = isl_set_lower_bound_si(box, isl_dim_set, (unsigned)v, (int)mn[v]);
    box = isl_set_upper_bound_si(box, isl_dim_set, (unsigned)v, (int)mx[v]);
  }
  ok = ok && isl_set_is_equal(box, set) == isl_bool_true;
  isl_set_free(box);
  isl_set_free(set);
  for (int v = 0; v < nv && ok; v++) {
    if (mn[v] == s->lo[v] && mx[v] == s->hi[v]) continue;
    if (s->var >= 0 && s->var != v) ok = false;
    s->var = v;
    ok = ok && add_cut(s, mn[v]) && add_cut(s, mx[v] + 1);
  }
  return ok ? isl_stat_ok : isl_stat_error;
}

/* set: empty, or a union of such slabs (a pad on both sides) */
static bool slabs(cut_st *s, __isl_keep isl_set *set) {
  isl_set *c = isl_set_coalesce(isl_set_copy(set));
  isl_stat st = c ? isl_set_foreach_basic_set(c, slab, s) : isl_stat_error;
  isl_set_free(c);
  return st == isl_stat_ok;
}

static int cut_step(void *user, int step, __isl_keep isl_set *real, __isl_keep isl_set *const *fill, int nfill) {
  cut_st *s = user;
  (void)step;
  bool ok = slabs(s, real);
  for (int q = 0; ok && q < nfill; q++) ok = slabs(s, fill[q]);
  if (!ok) s->fail = true;
  return ok ? GO_ON : STOP_MIXED;
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

harp_status poly_chain_cuts(harp_error *e, const poly_view *pv, const poly_chain *chains, int nchains, int *var,
                          int64_t *cuts, int *ncuts, int cap, bool *ok) {
  *var = -1;
  *ncuts = 0;
  *ok = false;
  if (nchains < 1 || cap < 2) return ut_fail(e, HARP_E_INTERNAL, NULL, "poly_chain_cuts: no chains");
  int b = chains[0].block[0];
  cut_st s = {pv, b, {0}, {0}, -1, cuts, 0, cap, false};
  if (!poly_core_var_ranges(pv, b, s.lo, s.hi)) return HARP_OK;
  for (int k = 0; k < nchains && !s.fail; k++) {
    if (bad_chain(pv, &chains[k]) || chains[k].block[0] != b)
      return ut_fail(e, HARP_E_INTERNAL, NULL, "poly_chain_cuts: not chains from one block");
    int stopped;
    isl_map *m = walk(pv, &chains[k], anon_set(box_of(pv, b, NULL, NULL)), cut_step, &s, &stopped);
    isl_map_free(m);
  }
  isl_ctx_reset_error(pv->ctx);
  if (s.fail) return HARP_OK;
  if (s.var >= 0) {
    if (!add_cut(&s, s.lo[s.var]) || !add_cut(&s, s.hi[s.var] + 1)) return HARP_OK;
    qsort(cuts, (size_t)s.ncuts, sizeof *cuts, cmp_i64);
  }
  *var = s.var;
  *ncuts = s.ncuts;
  *ok = true;
  return HARP_OK;
}
