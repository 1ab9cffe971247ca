/* deps.c — dependence edges between PolyBlocks (seed 000 §1.4 Edge).
 * Needs: blocks with their access relations.  Gives: poly_build_edges, poly_edge_dep.
 *
 * A Tiny graph is single-assignment: each tensor is written by one block, so
 * between blocks there are only true (flow) dependences:
 *   dep(p -> c) = { p[j] -> c[i] : write_p(j) = read_c(i) }
 * computed as (read_c . write_p^-1)^-1 after aligning their parameters by
 * name.  Inside a reduction every output element is written once per
 * reduced point: a self edge carries { S[i] -> S[i'] : write(i) = write(i'),
 * i <lex i' }, which is at once the true, anti and output dependence of the
 * accumulator.  Region formation and the backends never read a self edge
 * (the dumps and the union views do), so it is computed when first asked
 * for (poly_edge_dep): an isl product and coalesce per reduction, a tenth
 * of a large model's Poly-View. */
#include <stdlib.h>
#include <string.h>

#include "poly/poly_int.h"
#include "util/util.h"

/* Edges are added consumer by consumer: a repeat of (from, to, tensor) is
 * among the edges of `to`, the last ones. */
static harp_status add_edge(poly_view *pv, int from, int to, int tensor, __isl_take isl_map *dep) {
  for (int k = pv->nedges - 1; k >= 0 && pv->edges[k].pub.to == to; k--) {
    poly_edge_int *x = &pv->edges[k];
    if (x->pub.from == from && x->pub.to == to && x->pub.tensor == tensor) {
      x->dep = poly_simplify_map(isl_map_union(x->dep, dep));
      return HARP_OK;
    }
  }
  if (pv->nedges == pv->capedges) {
    int cap = pv->capedges ? 2 * pv->capedges : 16;
    poly_edge_int *ne = ut_xrealloc(pv->edges, sizeof *ne * (size_t)cap);
    if (!ne) {
      isl_map_free(dep);
      return ut_fail(pv->e, HARP_E_NO_MEMORY, NULL, "out of memory");
    }
    pv->edges = ne;
    pv->capedges = cap;
  }
  pv->edges[pv->nedges++] = (poly_edge_int){{from, to, tensor}, dep};
  return HARP_OK;
}

static __isl_give isl_map *flow(__isl_keep isl_map *read, __isl_keep isl_map *write) {
  isl_map *r = isl_map_copy(read), *w = isl_map_copy(write);
  r = isl_map_align_params(r, isl_map_get_space(w));
  w = isl_map_align_params(w, isl_map_get_space(r));
  return poly_simplify_map(isl_map_reverse(isl_map_apply_range(r, isl_map_reverse(w))));
}

static __isl_give isl_map *self_dep(__isl_keep isl_set *domain, __isl_keep isl_map *write) {
  isl_map *same = isl_map_apply_range(isl_map_copy(write), isl_map_reverse(isl_map_copy(write)));
  return poly_simplify_map(isl_map_intersect(same, isl_map_lex_lt(isl_set_get_space(domain))));
}

harp_status poly_build_edges(poly_view *pv) {
  for (int c = 0; c < pv->nblocks; c++) {
    poly_blk *b = &pv->blocks[c];
    int nreads = b->pub.naccess - 1;
    for (int k = 0; k < nreads; k++) {
      int t = b->pub.access[k].tensor, p = pv->block_of[t];
      if (p < 0 || pv->blocks[p].pub.node != t) continue; /* an input, a constant, or outside the SCoP */
      poly_blk *pb = &pv->blocks[p];
      const poly_acc *w = &pb->acc[pb->pub.naccess - 1];
      const char *key = poly_flow_key(pv, b->acc[k].key, w->key); /* acc_cache.c: the same pair, the same relation */
      isl_map *dep = poly_flow_cache_get(pv, key, pb, b);
      if (!dep && (dep = flow(b->acc[k].map, w->map))) poly_flow_cache_put(pv, key, dep);
      if (!dep || add_edge(pv, p, c, t, dep)) break;
    }
    /* the self edge, its relation left for poly_edge_dep (a block never
     * reads its own value: no read edge merges into it) */
    if ((b->pub.kind == POLY_REDUCE || b->pub.kind == POLY_CONTRACTION) && add_edge(pv, c, c, b->pub.node, NULL))
      return pv->e->code;
    if (pv->e->code) return pv->e->code;
    if (poly_isl_check(pv, pv->g->nodes[b->pub.node].id, "computing dependences")) return pv->e->code;
  }
  for (int k = 0; k < pv->nedges; k++)
    if (!pv->edges[k].dep && pv->edges[k].pub.from != pv->edges[k].pub.to)
      return ut_fail(pv->e, HARP_E_NO_MEMORY, NULL, "isl ran out of memory");
  /* the index of each block's incoming edges, and the empty memo */
  pv->edges_to = ut_xcalloc((size_t)pv->nblocks + 2, sizeof(int));
  pv->eq_along = ut_xmalloc((size_t)pv->nedges * POLY_MAX_VARS + 1);
  if (!pv->edges_to || !pv->eq_along) return ut_fail(pv->e, HARP_E_NO_MEMORY, NULL, "out of memory");
  for (int k = 0; k < pv->nedges; k++) pv->edges_to[pv->edges[k].pub.to + 1]++;
  for (int b = 0; b < pv->nblocks; b++) pv->edges_to[b + 1] += pv->edges_to[b];
  memset(pv->eq_along, -1, (size_t)pv->nedges * POLY_MAX_VARS + 1);
  return HARP_OK;
}

__isl_keep isl_map *poly_edge_dep(const poly_view *pv, int k) {
  poly_edge_int *x = &pv->edges[k];
  if (!x->dep && x->pub.from == x->pub.to) {
    const poly_blk *b = &pv->blocks[x->pub.from];
    x->dep = self_dep(b->domain, b->acc[b->pub.naccess - 1].map);
  }
  return x->dep;
}
