/* union.c — whole-program isl views of a Poly-View, for Poly Core.
 * Needs: a built poly_view.  Gives: the union of the block domains, of the
 * read and of the write relations, accesses as piecewise multi-affine
 * functions.  Parameters of different blocks are aligned by name (isl's
 * union objects do this on insertion). */
#include <isl/union_map.h>
#include <isl/union_set.h>

#include "poly/poly_int.h"

__isl_keep isl_set *poly_block_domain(const poly_view *pv, int block) { return pv->blocks[block].domain; }

__isl_keep isl_map *poly_block_access(const poly_view *pv, int block, int access) {
  return pv->blocks[block].acc[access].map;
}

__isl_give isl_union_set *poly_union_domains(const poly_view *pv) {
  isl_union_set *u = isl_union_set_empty(isl_space_params_alloc(pv->ctx, 0));
  for (int b = 0; b < pv->nblocks; b++) u = isl_union_set_add_set(u, isl_set_copy(pv->blocks[b].domain));
  return u;
}

static __isl_give isl_union_map *accesses(const poly_view *pv, bool writes) {
  isl_union_map *u = isl_union_map_empty(isl_space_params_alloc(pv->ctx, 0));
  for (int b = 0; b < pv->nblocks; b++) {
    const poly_blk *blk = &pv->blocks[b];
    for (int k = 0; k < blk->pub.naccess; k++)
      if (blk->pub.access[k].write == writes) u = isl_union_map_add_map(u, isl_map_copy(blk->acc[k].map));
  }
  return u;
}

__isl_give isl_union_map *poly_union_reads(const poly_view *pv) { return accesses(pv, false); }
__isl_give isl_union_map *poly_union_writes(const poly_view *pv) { return accesses(pv, true); }

__isl_give isl_union_map *poly_union_deps(const poly_view *pv) {
  isl_union_map *u = isl_union_map_empty(isl_space_params_alloc(pv->ctx, 0));
  for (int k = 0; k < pv->nedges; k++) u = isl_union_map_add_map(u, isl_map_copy(poly_edge_dep(pv, k)));
  return u;
}

__isl_give isl_pw_multi_aff *poly_access_pma(const poly_view *pv, int block, int access) {
  return isl_pw_multi_aff_from_map(isl_map_copy(pv->blocks[block].acc[access].map));
}
