/* core_deps.c — Poly Core: dependences, parallel / reduction axes, affine
 * closure (seed 000 §1.6), and the helpers the other core_*.c share.
 * Needs: a built poly_view.  Gives: poly_dependence, poly_axis_kinds,
 * poly_access_affine.
 *
 * The original schedule puts block b's instance x at [b, x, 0...] (blocks
 * in graph order, then the block's loops lexicographically).  With W the
 * writes and R the reads — plus, for a REDUCE or a contraction, the read of
 * its own accumulator at every reduced point — the dependences are
 *   true   { s -> t : W(s) = R(t), s before t }
 *   anti   { t -> s : R(t) = W(s), t before s }
 *   output { s -> t : W(s) = W(t), s before t }
 * computed on isl union maps (parameters align by name).  A variable is a
 * reduction when some self-dependence of its block has a non-zero distance
 * along it (isl_map_deltas), parallel otherwise. */
#include <stdlib.h>
#include <string.h>

#include "poly/core_int.h"
#include "util/util.h"

const char *poly_dep_kind_name(poly_dep_kind k) {
  return k == POLY_DEP_TRUE ? "true" : k == POLY_DEP_ANTI ? "anti" : k == POLY_DEP_OUTPUT ? "output" : "?";
}

/* ---- shared helpers ------------------------------------------------------------ */
harp_status poly_core_isl_fail(const poly_view *pv, harp_error *e, const char *who, const char *what) {
  const char *msg = isl_ctx_last_error_msg(pv->ctx);
  harp_status st = isl_ctx_last_error(pv->ctx) == isl_error_alloc || !msg
                     ? ut_fail(e, HARP_E_NO_MEMORY, who, "isl ran out of memory while %s", what)
                     : ut_fail(e, HARP_E_INTERNAL, who, "isl failed while %s: %s", what, msg);
  isl_ctx_reset_error(pv->ctx);
  return st;
}

bool poly_core_val(__isl_take isl_val *v, int64_t *out) {
  bool ok = v && isl_val_is_int(v);
  if (ok) *out = isl_val_get_num_si(v);
  isl_val_free(v);
  return ok;
}

bool poly_core_shape_strides(const poly_view *pv, int node, int64_t *strides, int *rank) {
  const tiny_shape *s = &pv->g->nodes[node].shape;
  *rank = s->rank;
  int64_t acc = 1;
  for (int d = s->rank - 1; d >= 0; d--) {
    if (s->d[d].n < 0) return false;
    strides[d] = acc;
    if (!ut_mul_ok(acc, s->d[d].n, &acc)) return false;
  }
  return true;
}

bool poly_core_var_ranges(const poly_view *pv, int block, int64_t *lo, int64_t *hi) {
  const poly_blk *b = &pv->blocks[block];
  if (!b->ranges_known) return false;
  memcpy(lo, b->lo, sizeof(int64_t) * (size_t)b->pub.nvars);
  memcpy(hi, b->hi, sizeof(int64_t) * (size_t)b->pub.nvars);
  return true;
}

bool poly_block_ranges(const poly_view *pv, int block, int64_t *lo, int64_t *hi) {
  return block >= 0 && block < pv->nblocks && poly_core_var_ranges(pv, block, lo, hi);
}

int poly_core_reads_of(const poly_view *pv, int block, int node, int *acc, int cap) {
  const poly_block_info *b = &pv->blocks[block].pub;
  int n = 0;
  for (int k = 0; k < b->naccess; k++)
    if (!b->access[k].write && b->access[k].tensor == node && n < cap) acc[n++] = k;
  return n;
}

static isl_stat take_piece(__isl_take isl_set *set, __isl_take isl_multi_aff *ma, void *user) {
  isl_set_free(set);
  *(isl_multi_aff **)user = ma;
  return isl_stat_ok;
}

__isl_give isl_multi_aff *poly_core_single_piece(__isl_take isl_pw_multi_aff *pma) {
  isl_multi_aff *ma = NULL;
  if (pma && isl_pw_multi_aff_n_piece(pma) == 1) isl_pw_multi_aff_foreach_piece(pma, &take_piece, &ma);
  isl_pw_multi_aff_free(pma);
  return ma;
}

/* ---- the schedule and the dependences --------------------------------------------- */
static int max_vars(const poly_view *pv) {
  int d = 0;
  for (int b = 0; b < pv->nblocks; b++) d = UT_MAX(d, pv->blocks[b].pub.nvars);
  return d;
}

static __isl_give isl_union_map *schedule(const poly_view *pv) {
  int D = max_vars(pv);
  isl_union_map *u = isl_union_map_empty(isl_space_params_alloc(pv->ctx, 0));
  for (int b = 0; b < pv->nblocks; b++) {
    const poly_blk *blk = &pv->blocks[b];
    isl_space *dom = isl_set_get_space(blk->domain);
    isl_space *ran = isl_space_set_alloc(pv->ctx, 0, (unsigned)(D + 1));
    ran = isl_space_align_params(ran, isl_space_copy(dom));
    isl_map *m = isl_map_universe(isl_space_map_from_domain_and_range(dom, ran));
    m = isl_map_fix_si(m, isl_dim_out, 0, b);
    for (int j = 0; j < D; j++)
      m = j < blk->pub.nvars ? isl_map_equate(m, isl_dim_in, j, isl_dim_out, j + 1) : isl_map_fix_si(m, isl_dim_out, j + 1, 0);
    u = isl_union_map_add_map(u, isl_map_intersect_domain(m, isl_set_copy(blk->domain)));
  }
  return u;
}

/* Reads, with the accumulator read of every reduction. */
static __isl_give isl_union_map *reads_with_acc(const poly_view *pv) {
  isl_union_map *r = poly_union_reads(pv);
  for (int b = 0; b < pv->nblocks; b++) {
    const poly_blk *blk = &pv->blocks[b];
    if (blk->pub.kind == POLY_REDUCE || blk->pub.kind == POLY_CONTRACTION)
      r = isl_union_map_add_map(r, isl_map_copy(blk->acc[blk->pub.naccess - 1].map));
  }
  return r;
}

static __isl_give isl_union_map *all_deps(const poly_view *pv, poly_dep_kind k) {
  isl_union_map *s = schedule(pv);
  isl_union_map *before = isl_union_map_lex_lt_union_map(isl_union_map_copy(s), s);
  isl_union_map *w = poly_union_writes(pv), *r = reads_with_acc(pv), *same;
  if (k == POLY_DEP_TRUE) {
    same = isl_union_map_apply_range(w, isl_union_map_reverse(r));
  } else if (k == POLY_DEP_ANTI) {
    same = isl_union_map_apply_range(r, isl_union_map_reverse(w));
  } else {
    isl_union_map_free(r);
    isl_union_map *w2 = isl_union_map_copy(w);
    same = isl_union_map_apply_range(w2, isl_union_map_reverse(w));
  }
  return isl_union_map_coalesce(isl_union_map_intersect(same, before));
}

/* The part of u from block `from` to block `to`. */
static __isl_give isl_map *between(const poly_view *pv, __isl_take isl_union_map *u, int from, int to) {
  isl_space *sp = isl_space_map_from_domain_and_range(isl_set_get_space(pv->blocks[from].domain),
                                                      isl_set_get_space(pv->blocks[to].domain));
  isl_space *up = isl_union_map_get_space(u);
  sp = isl_space_align_params(sp, up);
  isl_map *m = isl_union_map_extract_map(u, sp);
  isl_union_map_free(u);
  return m ? isl_map_coalesce(m) : NULL;
}

static bool bad_block(const poly_view *pv, int b) { return b < 0 || b >= pv->nblocks; }

harp_status poly_dependence(harp_error *e, const poly_view *pv, int from, int to, poly_dep_kind k, bool *exists,
                          char **text) {
  *exists = false;
  if (text) *text = NULL;
  if (bad_block(pv, from) || bad_block(pv, to)) return ut_fail(e, HARP_E_INTERNAL, NULL, "poly_dependence: no such block");
  isl_map *m = between(pv, all_deps(pv, k), from, to);
  isl_bool empty = m ? isl_map_is_empty(m) : isl_bool_error;
  if (empty == isl_bool_error) {
    isl_map_free(m);
    return poly_core_isl_fail(pv, e, pv->blocks[to].pub.name, "computing dependences");
  }
  *exists = !empty;
  if (text) {
    char *s = isl_map_to_str(m);
    *text = s ? strdup(s) : NULL;
    free(s);
    if (!*text) {
      isl_map_free(m);
      return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
    }
  }
  isl_map_free(m);
  return HARP_OK;
}

harp_status poly_axis_kinds(harp_error *e, const poly_view *pv, int block, poly_axis_kind *kinds) {
  if (bad_block(pv, block)) return ut_fail(e, HARP_E_INTERNAL, NULL, "poly_axis_kinds: no such block");
  const poly_blk *b = &pv->blocks[block];
  isl_union_map *u = all_deps(pv, POLY_DEP_TRUE);
  u = isl_union_map_union(u, all_deps(pv, POLY_DEP_ANTI));
  u = isl_union_map_union(u, all_deps(pv, POLY_DEP_OUTPUT));
  isl_map *self = between(pv, u, block, block);
  isl_set *delta = self ? isl_map_deltas(self) : NULL;
  if (!delta) return poly_core_isl_fail(pv, e, b->pub.name, "computing dependence distances");
  harp_status st = HARP_OK;
  for (int v = 0; v < b->pub.nvars && !st; v++) {
    /* distances along v: project everything else out; a reduction when
     * some distance differs from 0 */
    isl_set *d = isl_set_copy(delta);
    d = isl_set_project_out(d, isl_dim_set, (unsigned)v + 1, (unsigned)(b->pub.nvars - v - 1));
    d = isl_set_project_out(d, isl_dim_set, 0, (unsigned)v);
    isl_set *zero = isl_set_fix_si(isl_set_universe(isl_set_get_space(d)), isl_dim_set, 0, 0);
    isl_bool sub = isl_set_is_subset(d, zero);
    isl_set_free(d);
    isl_set_free(zero);
    if (sub == isl_bool_error) st = poly_core_isl_fail(pv, e, b->pub.name, "classifying axes");
    else kinds[v] = sub ? POLY_AXIS_PARALLEL : POLY_AXIS_REDUCTION;
  }
  isl_set_free(delta);
  return st;
}

harp_status poly_access_affine(harp_error *e, const poly_view *pv, int block, int access, bool *closed) {
  *closed = false;
  if (bad_block(pv, block) || access < 0 || access >= pv->blocks[block].pub.naccess)
    return ut_fail(e, HARP_E_INTERNAL, NULL, "poly_access_affine: no such access");
  const poly_blk *b = &pv->blocks[block];
  const poly_acc *a = &b->acc[access];
  isl_bool sv = isl_map_is_single_valued(a->map);
  isl_pw_multi_aff *pma = sv == isl_bool_true ? isl_pw_multi_aff_from_map(isl_map_copy(a->map)) : NULL;
  /* read pieces and fill pieces together cover the domain, disjointly */
  isl_set *cover = isl_map_domain(isl_map_copy(a->map));
  isl_bool disjoint = isl_bool_true;
  for (int q = 0; q < a->nfill; q++) {
    if (disjoint == isl_bool_true) disjoint = isl_set_is_disjoint(cover, a->fill[q].set);
    cover = isl_set_union(cover, isl_set_copy(a->fill[q].set));
  }
  isl_bool eq = isl_set_is_equal(cover, b->domain);
  isl_set_free(cover);
  bool ok = sv == isl_bool_true && pma && disjoint == isl_bool_true && eq == isl_bool_true;
  isl_pw_multi_aff_free(pma);
  if (sv == isl_bool_error || disjoint == isl_bool_error || eq == isl_bool_error)
    return poly_core_isl_fail(pv, e, b->pub.name, "checking an access");
  isl_ctx_reset_error(pv->ctx);
  *closed = ok;
  return HARP_OK;
}
