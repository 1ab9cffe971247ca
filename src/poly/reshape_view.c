/* reshape_view.c — a ShapeSet object's read through a RESHAPE that splits
 * or merges an axis by a symbol's size, indexed through the RESHAPE's own
 * output (docs/architecture.md, "One object per ShapeSet").
 *
 * An embedding's Gather of E[V, D] by the flat ids [B*S] reshaped to
 * [B, S, D] reads the gather's output at [S*b + s, d]: over the symbols'
 * parameters S*b is no affine function, so the loop nest printed the
 * binding's S and the object served one binding.  A RESHAPE is a row-major
 * reinterpretation: its output's element [b, s, d] in its own shape
 * [B, S, D] is the dense input's element at the same linear offset.  So a
 * read whose last step (next to the tensor) is such a RESHAPE is indexed
 * by the point it reaches in the RESHAPE's output (the views before it
 * composed, the RESHAPE itself left out: affine where the rest is) and
 * addressed with that shape's strides, each dim of a symbol's size read at
 * run time.  Only where the RESHAPE's axis groups (the fewest axes of
 * input and output whose element counts agree) hold an axis of a varying
 * size inside, not outermost: the only place a reshape puts a symbol into
 * an index's coefficient or divisor; elsewhere the read keeps the tensor's
 * own index (its code unchanged).
 * Needs: poly_int.h (blocks, accesses), indexbook.h (ib_compose),
 * harp/poly_ast.h (the options).
 * Gives: poly_reshape_view, poly_sym_access_view. */
#include <string.h>

#include "harp/poly_ast.h"
#include "harp/polycore.h"
#include "poly/poly_int.h"

/* Whether dim d's size varies: a symbol of syms[0..nsyms) (syms NULL: any
 * symbol's) names it. */
static bool varies(const tiny_dim *d, int nsyms, const char *const *syms) {
  if (!d->sym) return false;
  if (!syms) return true;
  for (int i = 0; i < nsyms; i++)
    if (!strcmp(syms[i], d->sym)) return true;
  return false;
}

/* Whether a reshape of shape in to shape out splits or merges an axis by a
 * varying size: grouping both from the innermost axes (a group ends where
 * the element counts agree), some axis of a group other than its
 * outermost varies.  False for sizes 0 (no groups). */
static bool splits_by(const tiny_shape *in, const tiny_shape *out, int nsyms, const char *const *syms) {
  int i = in->rank - 1, j = out->rank - 1;
  while (i >= 0 && j >= 0) {
    if (in->d[i].n <= 0 || out->d[j].n <= 0) return false;
    int64_t a = in->d[i].n, b = out->d[j].n;
    bool inner = false; /* a group's axis above its first pair varies */
    int i0 = i, j0 = j;
    while (a != b) {
      if (a < b && i > 0 && in->d[i - 1].n > 0) a *= in->d[--i].n;
      else if (b < a && j > 0 && out->d[j - 1].n > 0) b *= out->d[--j].n;
      else return false;
    }
    for (int k = i + 1; k <= i0; k++) inner |= varies(&in->d[k], nsyms, syms);
    for (int k = j + 1; k <= j0; k++) inner |= varies(&out->d[k], nsyms, syms);
    if (inner) return true;
    i--, j--;
  }
  return false;
}

int poly_reshape_view(const poly_view *pv, int block, int access, int nsyms, const char *const *syms) {
  if (block < 0 || block >= pv->nblocks) return -1;
  const poly_blk *b = &pv->blocks[block];
  if (access < 0 || access >= b->pub.naccess || b->pub.access[access].write) return -1;
  const poly_acc *a = &b->acc[access];
  if (a->ib.non_affine || a->nfill) return -1;
  /* via: nearest the reader first; none: the block's own node reads it */
  int r = a->ib.nvia ? a->ib.via[a->ib.nvia - 1] : b->var_node == b->pub.node ? b->pub.node : -1;
  if (r < 0 || pv->g->nodes[r].op != TINY_RESHAPE || pv->g->nodes[r].src[0].node != a->ib.src) return -1;
  return splits_by(&pv->g->nodes[a->ib.src].shape, &pv->g->nodes[r].shape, nsyms, syms) ? r : -1;
}

/* Access a of block b as far as RESHAPE node r's output (r's own map left
 * out): the block node's step map composed through the views before r,
 * into *out (one piece, no fill); *ident when r is the block's own node
 * (the identity).  False where it does not compose so. */
static bool to_view(poly_view *pv, const poly_blk *b, const poly_acc *a, int r, ib_access *out, bool *ident) {
  const ib_info *f = ib_get(pv->ib, b->var_node);
  *ident = b->pub.node == r;
  if (f->nvars != b->pub.nvars) return false;
  if (*ident) return f->rank == pv->g->nodes[r].shape.rank;
  int k = 0;
  while (k < f->nin && !(f->acc[k].via == a->ib.via && f->acc[k].src == a->ib.src)) k++;
  if (k == f->nin) return false;
  harp_error e = {0};
  ib_env env;
  ib_env_for(pv->ib, b->var_node, &e, &env);
  ib_access cur = f->in[k];
  for (int step = 0; cur.src != r; step++) {
    if (step > a->ib.nvia || cur.non_affine || !ib_is_movement(pv->ib, cur.src)) return false;
    if (ib_compose(pv->ib, &env, &cur, &ib_get(pv->ib, cur.src)->in[0], &cur)) return false;
  }
  *out = cur;
  return !cur.non_affine && cur.npieces == 1 && !cur.pieces[0].fill;
}

/* RESHAPE node r's own map, its output to its input's indices (the read
 * pieces), in b's parameters. */
static __isl_give isl_map *reshape_map(poly_view *pv, const poly_blk *b, int r) {
  const ib_access *s = &ib_get(pv->ib, r)->in[0];
  isl_space *dom = poly_tensor_space(pv, b, r), *ran = poly_tensor_space(pv, b, s->src);
  isl_map *m = isl_map_empty(isl_space_map_from_domain_and_range(isl_space_copy(dom), isl_space_copy(ran)));
  for (int i = 0; i < s->npieces && m; i++)
    m = s->pieces[i].fill ? isl_map_free(m) : isl_map_union(m, poly_piece_map(pv, dom, ran, &s->pieces[i]));
  isl_space_free(dom);
  isl_space_free(ran);
  return m;
}

__isl_give isl_map *poly_sym_access_view(poly_view *pv, const poly_blk *b, const poly_acc *a, int r,
                                         const poly_ast_opts *o, __isl_keep isl_map *m, __isl_keep isl_set *pdom,
                                         __isl_keep isl_set *cdom) {
  ib_access q;
  bool ident = false;
  if (!to_view(pv, b, a, r, &q, &ident)) return NULL;
  isl_space *dom = isl_space_domain(isl_map_get_space(m));
  if (isl_space_dim(dom, isl_dim_set) != b->pub.nvars) {
    isl_space_free(dom);
    return NULL;
  }
  isl_space *ran = poly_tensor_space(pv, b, r);
  isl_space *sp = isl_space_map_from_domain_and_range(isl_space_copy(dom), ran);
  isl_multi_aff *f;
  if (ident) {
    f = isl_multi_aff_identity(sp); /* the block's point is r's output index */
  } else {
    isl_local_space *ls = isl_local_space_from_space(isl_space_copy(dom));
    isl_aff_list *list = isl_aff_list_alloc(pv->ctx, q.pieces[0].nmap);
    for (int k = 0; k < q.pieces[0].nmap; k++) list = isl_aff_list_add(list, poly_aff(pv, ls, &q.pieces[0].map[k]));
    isl_local_space_free(ls);
    f = isl_multi_aff_from_aff_list(sp, list);
  }
  isl_space_free(dom);
  isl_map *v = f ? isl_map_from_multi_aff(f) : NULL;
  if (v) {
    v = isl_map_align_params(v, isl_set_get_space(pdom));
    v = isl_map_intersect_domain(v, isl_set_copy(pdom));
  }
  /* through r's own map, at this binding, it is the tensor's read */
  isl_map *via = v ? reshape_map(pv, b, r) : NULL, *back = NULL;
  if (via) {
    back = isl_map_align_params(isl_map_copy(v), isl_map_get_space(via));
    via = isl_map_align_params(via, isl_map_get_space(back));
    back = isl_map_apply_range(back, via);
  }
  isl_map *want = isl_map_intersect_domain(isl_map_copy(m), isl_set_copy(cdom));
  bool same = back && poly_sym_equal_now(pv->ctx, o, back, want); /* takes both */
  if (!back) isl_map_free(want);
  if (!same) v = isl_map_free(v);
  if (!v) isl_ctx_reset_error(pv->ctx);
  return v;
}
