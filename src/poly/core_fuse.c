/* core_fuse.c — Poly Core for fusion: pointwise accesses, linear strides,
 * the shared loop prefix of a set of blocks, and make_fusable_groups
 * (seed 000 §1.6, §4.1 step 3).
 * Needs: core_deps.c helpers, core_tile.c (can_compute_at).
 * Gives: poly_access_is_pointwise, poly_access_strides, poly_stage_strides,
 * poly_fusion_prefix, poly_make_fusable_groups.
 *
 * Pointwise: with lin_T the row-major linear index of a tensor, a read
 * A: D -> T is pointwise when lin_T(A(x)) = lin_D(x) on the whole domain
 * (checked as: the set of points where they differ is empty), the block has
 * no reduced variables, the read has one piece and no fill, and both sides
 * have as many elements: then the consumer point and the producer element
 * it reads have the same position, whatever reshapes lie between.
 *
 * Fusion prefix: dimension j < p is shared when every dependence between two
 * blocks of the set relates only instances with equal j-th coordinates
 * (dep ∩ {in_j < out_j} and dep ∩ {in_j > out_j} are empty) and the domains
 * agree on the first p dimensions. */
#include <stdlib.h>
#include <string.h>

#include "poly/core_int.h"
#include "util/util.h"

static bool bad_access(const poly_view *pv, int block, int access) {
  return block < 0 || block >= pv->nblocks || access < 0 || access >= pv->blocks[block].pub.naccess;
}

/* sum strides[d] * x_d over a set space's dimensions. */
static __isl_give isl_aff *linear(__isl_take isl_space *set_space, const int64_t *strides, int rank) {
  isl_local_space *ls = isl_local_space_from_space(set_space);
  isl_aff *a = isl_aff_zero_on_domain(ls);
  for (int d = 0; d < rank; d++) a = isl_aff_set_coefficient_si(a, isl_dim_in, d, (int)strides[d]);
  return a;
}

static bool fits_int(const int64_t *s, int n) {
  for (int i = 0; i < n; i++)
    if (s[i] > INT32_MAX) return false;
  return true;
}

static harp_status access_is_pointwise(harp_error *e, const poly_view *pv, int block, int access, bool *out);

/* Row-major strides of tensor t with those of its extent-1 dimensions set
 * to 0: their index is always 0, and their stride (the whole tensor's size,
 * [1, 16, 16384, 16384]: 2^32) must not keep a read from isl's int
 * coefficients. */
static bool shape_strides(const poly_view *pv, int t, int64_t *ts, int *rank) {
  if (!poly_core_shape_strides(pv, t, ts, rank)) return false;
  for (int d = 0; d < *rank; d++)
    if (pv->g->nodes[t].shape.d[d].n == 1) ts[d] = 0;
  return true;
}

/* memoized per (block, access): the same reads are asked about for every
 * candidate region holding them */
harp_status poly_access_is_pointwise(harp_error *e, const poly_view *pv, int block, int access, bool *out) {
  *out = false;
  if (bad_access(pv, block, access)) return ut_fail(e, HARP_E_INTERNAL, NULL, "poly_access_is_pointwise: no such access");
  signed char *memo = &pv->pointwise[(size_t)block * POLY_MAX_ACC + (size_t)access];
  if (*memo >= 0) {
    *out = *memo;
    return HARP_OK;
  }
  harp_status st = access_is_pointwise(e, pv, block, access, out);
  if (!st) *memo = *out;
  return st;
}

static harp_status access_is_pointwise(harp_error *e, const poly_view *pv, int block, int access, bool *out) {
  const poly_blk *b = &pv->blocks[block];
  const poly_acc *a = &b->acc[access];
  if (a->nfill) return HARP_OK;
  /* row-major positions of the tensor's elements and of the domain's points */
  int64_t ss[TINY_MAX_RANK], sc[POLY_MAX_VARS], lo[POLY_MAX_VARS], hi[POLY_MAX_VARS];
  int rs;
  int t = b->pub.access[access].tensor;
  if (!shape_strides(pv, t, ss, &rs) || !poly_core_var_ranges(pv, block, lo, hi)) return HARP_OK;
  int64_t acc = 1;
  for (int v = b->pub.nvars - 1; v >= 0; v--) {
    if (lo[v] != 0 || !ut_mul_ok(acc, hi[v] + 1, &sc[v])) return HARP_OK;
    sc[v] = hi[v] ? acc : 0; /* a variable of extent 1 is always 0 */
    acc *= hi[v] + 1;
  }
  if (tiny_shape_numel(&pv->g->nodes[t].shape) != acc) return HARP_OK;
  if (!fits_int(ss, rs) || !fits_int(sc, b->pub.nvars)) return HARP_OK;
  isl_multi_aff *ma = poly_core_single_piece(poly_access_pma(pv, block, access));
  if (!ma) {
    isl_ctx_reset_error(pv->ctx);
    return HARP_OK;
  }
  isl_aff *lt = linear(isl_space_range(isl_multi_aff_get_space(ma)), ss, rs);
  lt = isl_aff_pullback_multi_aff(lt, ma);
  isl_aff *lc = linear(isl_set_get_space(b->domain), sc, b->pub.nvars);
  lc = isl_aff_align_params(lc, isl_aff_get_space(lt));
  lt = isl_aff_align_params(lt, isl_aff_get_space(lc));
  isl_set *same = isl_set_from_basic_set(isl_aff_zero_basic_set(isl_aff_sub(lt, lc)));
  isl_set *dom = isl_set_align_params(isl_set_copy(b->domain), isl_set_get_space(same));
  isl_set *diff = isl_set_subtract(dom, same);
  isl_bool empty = isl_set_is_empty(diff);
  isl_set_free(diff);
  if (empty == isl_bool_error) return poly_core_isl_fail(pv, e, b->pub.name, "comparing positions");
  *out = empty == isl_bool_true;
  return HARP_OK;
}

/* Read a of block b (tensor t) as offset + strides over b's variables. */
static harp_status strides_of(harp_error *e, const poly_view *pv, const poly_blk *b, const poly_acc *a, int t,
                            int64_t *strides, int64_t *offset, bool *affine) {
  *affine = false;
  int64_t ts[TINY_MAX_RANK];
  int rank;
  if (a->nfill || !shape_strides(pv, t, ts, &rank) || !fits_int(ts, rank)) return HARP_OK;
  isl_multi_aff *ma = poly_core_single_piece(isl_pw_multi_aff_from_map(isl_map_copy(a->map)));
  if (!ma) {
    isl_ctx_reset_error(pv->ctx);
    return HARP_OK;
  }
  isl_aff *l = isl_aff_pullback_multi_aff(linear(isl_space_range(isl_multi_aff_get_space(ma)), ts, rank), ma);
  if (!l) return poly_core_isl_fail(pv, e, b->pub.name, "linearizing an access");
  bool ok = isl_aff_dim(l, isl_dim_div) == 0 && isl_aff_dim(l, isl_dim_param) == 0;
  for (int v = 0; ok && v < b->pub.nvars; v++) ok = poly_core_val(isl_aff_get_coefficient_val(l, isl_dim_in, v), &strides[v]);
  if (ok) ok = poly_core_val(isl_aff_get_constant_val(l), offset);
  isl_aff_free(l);
  isl_ctx_reset_error(pv->ctx);
  *affine = ok;
  return HARP_OK;
}

harp_status poly_access_strides(harp_error *e, const poly_view *pv, int block, int access, int64_t *strides,
                              int64_t *offset, bool *affine) {
  *affine = false;
  if (bad_access(pv, block, access)) return ut_fail(e, HARP_E_INTERNAL, NULL, "poly_access_strides: no such access");
  const poly_blk *b = &pv->blocks[block];
  return strides_of(e, pv, b, &b->acc[access], b->pub.access[access].tensor, strides, offset, affine);
}

harp_status poly_stage_strides(harp_error *e, const poly_view *pv, int block, int access, int stage, int64_t *strides,
                             int64_t *offset, bool *affine) {
  *affine = false;
  if (bad_access(pv, block, access) || access >= 2 || stage < 1 || stage > pv->blocks[block].pub.access[access].nstage)
    return ut_fail(e, HARP_E_INTERNAL, NULL, "poly_stage_strides: no such stage");
  const poly_blk *b = &pv->blocks[block];
  const poly_access_info *ai = &b->pub.access[access];
  return strides_of(e, pv, b, &b->stage[access][stage - 1], ai->stage[stage - 1], strides, offset, affine);
}

static __isl_keep isl_map *edge_map(const poly_view *pv, int from, int to) {
  for (int k = pv->edges_to[to]; k < pv->edges_to[to + 1]; k++)
    if (pv->edges[k].pub.from == from) return poly_edge_dep(pv, k);
  return NULL;
}

static __isl_give isl_map *then(__isl_take isl_map *a, __isl_take isl_map *b) {
  a = isl_map_align_params(a, isl_map_get_space(b));
  b = isl_map_align_params(b, isl_map_get_space(a));
  return isl_map_apply_range(a, b);
}

/* The identity relation on the points of dom. */
static __isl_give isl_map *identity_on(__isl_keep isl_set *dom) {
  return isl_map_intersect_domain(isl_map_identity(isl_space_map_from_set(isl_set_get_space(dom))), isl_set_copy(dom));
}

harp_status poly_access_strides_via(harp_error *e, const poly_view *pv, const int *path, int n, int access,
                                  int64_t *strides, int64_t *offset, bool *affine) {
  *affine = false;
  if (n < 1 || bad_access(pv, path[n - 1], access)) return ut_fail(e, HARP_E_INTERNAL, NULL, "poly_access_strides_via: no such access");
  const poly_blk *first = &pv->blocks[path[0]], *last = &pv->blocks[path[n - 1]];
  int64_t ts[TINY_MAX_RANK];
  int rank;
  if (last->acc[access].nfill || !shape_strides(pv, last->pub.access[access].tensor, ts, &rank) || !fits_int(ts, rank))
    return HARP_OK;
  /* instances of path[0] with its reduced variables projected out; past
   * one edge, that edge's relation, whose domain lies in path[0]'s (a flow
   * dependence is built on the producer's write, restricted to its domain):
   * the identity on that domain composed with it is the relation itself.
   * Not so for an empty reduction, whose write covers its outputs
   * (poly_blk.out_domain): the identity on its empty domain first. */
  isl_map *m = first->out_domain ? identity_on(first->domain) : NULL;
  for (int i = 0; i + 1 < n; i++) {
    isl_map *d = edge_map(pv, path[i], path[i + 1]);
    if (!d) {
      isl_map_free(m);
      return HARP_OK;
    }
    m = m ? then(m, isl_map_copy(d)) : isl_map_copy(d);
  }
  if (!m) m = identity_on(first->domain);
  m = then(m, isl_map_copy(last->acc[access].map));
  m = isl_map_project_out(m, isl_dim_in, (unsigned)first->pub.nout, (unsigned)(first->pub.nvars - first->pub.nout));
  isl_bool sv = m ? isl_map_is_single_valued(m) : isl_bool_error;
  if (sv != isl_bool_true) {
    isl_map_free(m);
    isl_ctx_reset_error(pv->ctx);
    return HARP_OK;
  }
  isl_multi_aff *ma = poly_core_single_piece(isl_pw_multi_aff_from_map(m));
  if (!ma) {
    isl_ctx_reset_error(pv->ctx);
    return HARP_OK;
  }
  isl_aff *l = isl_aff_pullback_multi_aff(linear(isl_space_range(isl_multi_aff_get_space(ma)), ts, rank), ma);
  bool ok = l && isl_aff_dim(l, isl_dim_div) == 0 && isl_aff_dim(l, isl_dim_param) == 0;
  for (int v = 0; ok && v < first->pub.nout; v++) ok = poly_core_val(isl_aff_get_coefficient_val(l, isl_dim_in, v), &strides[v]);
  if (ok) ok = poly_core_val(isl_aff_get_constant_val(l), offset);
  isl_aff_free(l);
  isl_ctx_reset_error(pv->ctx);
  *affine = ok;
  return HARP_OK;
}

/* ---- fusion prefix -------------------------------------------------------------------- */
static bool in_set(const int *blocks, int n, int b) {
  for (int i = 0; i < n; i++)
    if (blocks[i] == b) return true;
  return false;
}

/* dep relates only equal coordinates along dimension j (isl_bool). */
static isl_bool equal_along(__isl_keep isl_map *dep, int j) {
  isl_map *lt = isl_map_order_lt(isl_map_copy(dep), isl_dim_in, j, isl_dim_out, j);
  isl_map *gt = isl_map_order_gt(isl_map_copy(dep), isl_dim_in, j, isl_dim_out, j);
  isl_bool e1 = isl_map_is_empty(lt), e2 = isl_map_is_empty(gt);
  isl_map_free(lt);
  isl_map_free(gt);
  if (e1 == isl_bool_error || e2 == isl_bool_error) return isl_bool_error;
  return e1 && e2 ? isl_bool_true : isl_bool_false;
}

static __isl_give isl_set *prefix_of(__isl_keep isl_set *dom, int p) {
  isl_size n = isl_set_dim(dom, isl_dim_set);
  isl_set *s = isl_set_project_out(isl_set_copy(dom), isl_dim_set, (unsigned)p, (unsigned)(n - p));
  return isl_set_reset_tuple_id(s);
}

static isl_bool same_prefix(__isl_keep isl_set *a, __isl_keep isl_set *b, int p) {
  isl_set *x = prefix_of(a, p), *y = prefix_of(b, p);
  x = isl_set_align_params(x, isl_set_get_space(y));
  y = isl_set_align_params(y, isl_set_get_space(x));
  /* dimension names may differ; compare as anonymous spaces */
  for (int j = 0; j < p; j++) {
    x = isl_set_set_dim_id(x, isl_dim_set, (unsigned)j, isl_id_alloc(isl_set_get_ctx(a), "d", NULL));
    y = isl_set_set_dim_id(y, isl_dim_set, (unsigned)j, isl_id_alloc(isl_set_get_ctx(a), "d", NULL));
  }
  isl_bool r = isl_set_is_equal(x, y);
  isl_set_free(x);
  isl_set_free(y);
  return r;
}

harp_status poly_fusion_prefix(harp_error *e, const poly_view *pv, const int *blocks, int n, int *p) {
  *p = 0;
  if (n <= 0) return HARP_OK;
  int maxp = POLY_MAX_VARS;
  for (int i = 0; i < n; i++) {
    if (blocks[i] < 0 || blocks[i] >= pv->nblocks) return ut_fail(e, HARP_E_INTERNAL, NULL, "poly_fusion_prefix: no such block");
    maxp = UT_MIN(maxp, pv->blocks[blocks[i]].pub.nout);
  }
  /* the dimensions every internal dependence keeps equal, from the outside
   * in; an edge's answer per dimension is memoized (the same edges come back
   * in many candidate sets) */
  int q = 0;
  for (; q < maxp; q++) {
    bool all = true;
    for (int i = 0; i < n && all; i++)
      for (int k = pv->edges_to[blocks[i]]; k < pv->edges_to[blocks[i] + 1] && all; k++) {
        const poly_edge_int *ed = &pv->edges[k];
        if (ed->pub.from == ed->pub.to || !in_set(blocks, n, ed->pub.from)) continue;
        signed char *memo = &pv->eq_along[(size_t)k * POLY_MAX_VARS + (size_t)q];
        if (*memo < 0) {
          isl_bool eq = equal_along(ed->dep, q);
          if (eq == isl_bool_error) return poly_core_isl_fail(pv, e, pv->blocks[ed->pub.to].pub.name, "comparing loops");
          *memo = eq == isl_bool_true;
        }
        all = *memo;
      }
    if (!all) break;
  }
  /* and on which the domains agree (two boxes: when their bounds do) */
  for (; q > 0; q--) {
    bool all = true;
    for (int i = 1; i < n && all; i++) {
      const poly_blk *x = &pv->blocks[blocks[0]], *y = &pv->blocks[blocks[i]];
      if (x->is_box && y->is_box) {
        for (int j = 0; j < q && all; j++) all = x->lo[j] == y->lo[j] && x->hi[j] == y->hi[j];
        continue;
      }
      isl_bool eq = same_prefix(x->domain, y->domain, q);
      if (eq == isl_bool_error) return poly_core_isl_fail(pv, e, pv->blocks[blocks[i]].pub.name, "comparing domains");
      all = eq;
    }
    if (all) break;
  }
  *p = q;
  return HARP_OK;
}

/* ---- fusable groups ---------------------------------------------------------------------- */
static int find(int *up, int x) {
  while (up[x] != x) x = up[x] = up[up[x]];
  return x;
}

/* Nodes a GATHER reads as data, through views: they feed a non-SCoP node. */
static void mark_gather_reads(const poly_view *pv, char *mark) {
  const tiny_graph *g = pv->g;
  for (int i = 0; i < g->n; i++) {
    if (tiny_op_class(g->nodes[i].op) != TC_GATHER) continue;
    for (int k = 0; k < g->nodes[i].nsrc; k++) {
      int s = g->nodes[i].src[k].node;
      while (s >= 0 && tiny_op_class(g->nodes[s].op) == TC_MOVE) s = g->nodes[s].src[0].node;
      if (s >= 0) mark[s] = 1;
    }
  }
}

harp_status poly_make_fusable_groups(harp_error *e, const poly_view *pv, int *group, int *ngroups) {
  const tiny_graph *g = pv->g;
  int *up = ut_xmalloc(sizeof(int) * ((size_t)pv->nblocks + 1));
  char *nonblock = ut_xcalloc((size_t)g->n + 1, 1);
  if (!up || !nonblock) {
    free(up);
    free(nonblock);
    return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  }
  mark_gather_reads(pv, nonblock);
  for (int k = 0; k < g->noutputs; k++) nonblock[g->outputs[k]] = 1;
  for (int b = 0; b < pv->nblocks; b++) up[b] = b;
  harp_status st = HARP_OK;
  for (int k = 0; k < pv->nedges && !st; k++) {
    const poly_edge_info *ed = &pv->edges[k].pub;
    if (ed->from == ed->to || nonblock[ed->tensor]) continue;
    poly_halo h;
    st = poly_can_compute_at(e, pv, ed->tensor, ed->to, NULL, &h);
    if (!st && h.ok) up[find(up, ed->from)] = find(up, ed->to);
  }
  int n = 0;
  for (int b = 0; b < pv->nblocks && !st; b++) group[b] = -1;
  for (int b = 0; b < pv->nblocks && !st; b++) {
    int r = find(up, b);
    if (group[r] < 0) group[r] = n++;
    group[b] = group[r];
  }
  free(up);
  free(nonblock);
  if (!st) *ngroups = n;
  return st;
}
