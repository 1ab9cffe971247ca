/* convert.c — IndexBook -> isl, mechanically (seed 000 §3.1–3.4).
 * Needs: a built IndexBook; poly_view with its isl_ctx.  Gives: spaces,
 * affine expressions, constraint sets, access relations with their fill
 * pieces, the simplification of §3.3, isl error reporting.
 *
 * Spaces: a block's domain is the set space  Name[i0, .., r0, ..]  with the
 * unbound symbols it uses as parameters (sorted by name); tensors are
 * Tensor[o0, ..] in the same parameter space.  Objects of different blocks
 * meet only through isl_*_align_params (deps.c).  Expressions: constants,
 * variables and parameters become isl_aff terms, floor(e/q) becomes
 * isl_aff_floor(isl_aff_scale_down_ui(e, q)); a constraint e >= 0 becomes
 * isl_aff_nonneg_set(e); a piece becomes the graph of an isl_multi_aff
 * restricted to its guard. */
#include <stdlib.h>
#include <string.h>

#include <isl/val.h>

#include "poly/poly_int.h"
#include "util/util.h"

harp_status poly_isl_check(poly_view *pv, const char *node, const char *what) {
  if (isl_ctx_last_error(pv->ctx) == isl_error_none) return HARP_OK;
  const char *msg = isl_ctx_last_error_msg(pv->ctx);
  ut_fail(pv->e, HARP_E_INTERNAL, node, "isl failed while %s: %s", what, msg ? msg : "unknown error");
  isl_ctx_reset_error(pv->ctx);
  return pv->e->code;
}

__isl_keep isl_ctx *poly_isl_ctx(const poly_view *pv) { return pv->ctx; }

/* ---- parameters --------------------------------------------------------- */
static harp_status add_param(poly_view *pv, poly_blk *b, const char *name) {
  int i = 0;
  while (i < b->nparams && strcmp(b->params[i], name) < 0) i++;
  if (i < b->nparams && strcmp(b->params[i], name) == 0) return HARP_OK;
  if (b->nparams == POLY_MAX_PARAMS)
    return ut_fail(pv->e, HARP_E_LIMIT, b->pub.name, "more than %d unbound symbols in one block", POLY_MAX_PARAMS);
  memmove(&b->params[i + 1], &b->params[i], sizeof b->params[0] * (size_t)(b->nparams - i));
  b->params[i] = name;
  b->nparams++;
  return HARP_OK;
}

harp_status poly_collect_params(poly_view *pv, poly_blk *b, const ib_aff *a) {
  for (int i = 0; i < a->nsym; i++)
    if (add_param(pv, b, a->sym[i].name)) return pv->e->code;
  for (int i = 0; i < a->ndiv; i++)
    if (poly_collect_params(pv, b, &a->div[i].d->num)) return pv->e->code;
  return HARP_OK;
}

/* The isl name of a symbol: sanitised; every block uses the same one, so
 * parameters align by name. */
static char *param_name(const char *sym, char *buf, size_t cap) {
  ut_sanitize_name(sym, buf, cap);
  return buf;
}

static __isl_give isl_space *with_params(poly_view *pv, const poly_blk *b, __isl_take isl_space *sp) {
  for (int k = 0; k < b->nparams; k++) {
    char buf[160];
    sp = isl_space_set_dim_id(sp, isl_dim_param, (unsigned)k,
                              isl_id_alloc(pv->ctx, param_name(b->params[k], buf, sizeof buf), NULL));
  }
  return sp;
}

__isl_give isl_space *poly_block_space(poly_view *pv, const poly_blk *b) {
  isl_space *sp = isl_space_set_alloc(pv->ctx, (unsigned)b->nparams, (unsigned)b->pub.nvars);
  sp = with_params(pv, b, sp);
  for (int j = 0; j < b->pub.nvars; j++) sp = isl_space_set_dim_name(sp, isl_dim_set, (unsigned)j, b->pub.var_names[j]);
  return isl_space_set_tuple_name(sp, isl_dim_set, b->pub.isl_name);
}

/* The isl tuple name of tensor `node` into buf (cap bytes). */
static const char *tensor_name(const poly_view *pv, int node, char *buf, size_t cap) {
  const tiny_node *n = &pv->g->nodes[node];
  ut_sanitize_name(n->op == TINY_INPUT ? n->a.input.tensor_id : n->id, buf, cap);
  return buf;
}

__isl_give isl_space *poly_tensor_space(poly_view *pv, const poly_blk *b, int node) {
  const ib_info *f = ib_get(pv->ib, node);
  char buf[160];
  isl_space *sp = isl_space_set_alloc(pv->ctx, (unsigned)b->nparams, (unsigned)f->rank);
  sp = with_params(pv, b, sp);
  return isl_space_set_tuple_name(sp, isl_dim_set, tensor_name(pv, node, buf, sizeof buf));
}

/* ---- expressions -------------------------------------------------------- */
static __isl_give isl_aff *scaled(__isl_take isl_aff *a, int64_t k) {
  if (k == 1) return a;
  return isl_aff_scale_val(a, isl_val_int_from_si(isl_aff_get_ctx(a), (long)k));
}

__isl_give isl_aff *poly_aff(poly_view *pv, __isl_keep isl_local_space *ls, const ib_aff *a) {
  isl_aff *r = isl_aff_val_on_domain(isl_local_space_copy(ls), isl_val_int_from_si(pv->ctx, (long)a->c));
  int nd = isl_local_space_dim(ls, isl_dim_set);
  for (int j = 0; j < IB_MAX_VARS; j++) {
    if (!a->v[j]) continue;
    if (j >= nd) return isl_aff_free(r);
    r = isl_aff_add(r, scaled(isl_aff_var_on_domain(isl_local_space_copy(ls), isl_dim_set, (unsigned)j), a->v[j]));
  }
  for (int i = 0; i < a->nsym; i++) {
    char buf[160];
    isl_space *sp = isl_local_space_get_space(ls);
    int pos = isl_space_find_dim_by_name(sp, isl_dim_param, param_name(a->sym[i].name, buf, sizeof buf));
    isl_space_free(sp);
    if (pos < 0) return isl_aff_free(r);
    r = isl_aff_add(r, scaled(isl_aff_var_on_domain(isl_local_space_copy(ls), isl_dim_param, (unsigned)pos), a->sym[i].k));
  }
  for (int i = 0; i < a->ndiv; i++) {
    const ib_div *d = a->div[i].d;
    isl_aff *q = poly_aff(pv, ls, &d->num);
    q = isl_aff_floor(isl_aff_scale_down_ui(q, (unsigned)d->q));
    r = isl_aff_add(r, scaled(q, a->div[i].k));
  }
  return r;
}

__isl_give isl_set *poly_cons_set(poly_view *pv, __isl_keep isl_space *space, const ib_cons *c, int n) {
  isl_set *s = isl_set_universe(isl_space_copy(space));
  isl_local_space *ls = isl_local_space_from_space(isl_space_copy(space));
  for (int i = 0; i < n; i++) {
    isl_aff *a = poly_aff(pv, ls, &c[i].e);
    isl_basic_set *bs = c[i].eq ? isl_aff_zero_basic_set(a)
                                : isl_aff_ge_basic_set(a, isl_aff_zero_on_domain(isl_local_space_copy(ls)));
    s = isl_set_intersect(s, isl_set_from_basic_set(bs));
  }
  isl_local_space_free(ls);
  return s;
}

/* ---- simplification (§3.3) ---------------------------------------------- */
static __isl_give isl_set *param_context(__isl_take isl_space *sp) {
  isl_set *c = isl_set_universe(isl_space_params(sp));
  isl_size np = isl_set_dim(c, isl_dim_param);
  for (int k = 0; k < np; k++) c = isl_set_lower_bound_si(c, isl_dim_param, (unsigned)k, 0);
  return c;
}

__isl_give isl_map *poly_simplify_map(__isl_take isl_map *m) {
  m = isl_map_coalesce(m);
  m = isl_map_gist_params(m, param_context(isl_map_get_space(m)));
  return isl_map_remove_redundancies(isl_map_coalesce(m));
}

__isl_give isl_set *poly_simplify_set(__isl_take isl_set *s) {
  s = isl_set_coalesce(s);
  s = isl_set_gist_params(s, param_context(isl_set_get_space(s)));
  return isl_set_remove_redundancies(isl_set_coalesce(s));
}

/* ---- accesses ----------------------------------------------------------- */
__isl_give isl_map *poly_piece_map(poly_view *pv, __isl_keep isl_space *dom, __isl_keep isl_space *ran, const ib_piece *p) {
  isl_local_space *ls = isl_local_space_from_space(isl_space_copy(dom));
  isl_aff_list *list = isl_aff_list_alloc(pv->ctx, p->nmap);
  for (int k = 0; k < p->nmap; k++) list = isl_aff_list_add(list, poly_aff(pv, ls, &p->map[k]));
  isl_local_space_free(ls);
  isl_space *sp = isl_space_map_from_domain_and_range(isl_space_copy(dom), isl_space_copy(ran));
  isl_map *m = isl_map_from_multi_aff(isl_multi_aff_from_aff_list(sp, list));
  return isl_map_intersect_domain(m, poly_cons_set(pv, dom, p->cons, p->ncons));
}

static harp_status check_access(poly_view *pv, const poly_acc *a, const char *who, int tensor, int pieces);

static bool same_value(double a, double b) { return memcmp(&a, &b, sizeof a) == 0 || a == b; }

harp_status poly_make_access(poly_view *pv, poly_blk *b, poly_acc *a, int tensor) {
  const char *who = pv->g->nodes[b->pub.node].id;
  if (a->ib.non_affine) /* only GATHER reads so, and it is no block */
    return ut_fail(pv->e, HARP_E_NON_SCOP, who, "reads %s at data-dependent positions", pv->g->nodes[tensor].id);
  char tname[160];
  const char *key = pv->no_acc_cache ? NULL : poly_acc_key(pv, b, a, ib_get(pv->ib, tensor)->rank);
  int pieces = 0;
  if (poly_acc_cache_get(pv, b, a, key, tensor_name(pv, tensor, tname, sizeof tname), &pieces)) {
    a->key = key;
    return check_access(pv, a, who, tensor, pieces);
  }
  isl_space *dom = poly_block_space(pv, b), *ran = poly_tensor_space(pv, b, tensor);
  isl_map *m = isl_map_empty(isl_space_map_from_domain_and_range(isl_space_copy(dom), isl_space_copy(ran)));
  for (int i = 0; i < a->ib.npieces; i++) {
    const ib_piece *p = &a->ib.pieces[i];
    if (!p->fill) {
      m = isl_map_union(m, poly_piece_map(pv, dom, ran, p));
      continue;
    }
    int k = 0;
    while (k < a->nfill && !same_value(a->fill[k].value, p->value)) k++;
    if (k == POLY_MAX_FILLS) {
      isl_space_free(dom), isl_space_free(ran), isl_map_free(m);
      return ut_fail(pv->e, HARP_E_EXCESSIVE_PIECEWISE, who, "more than %d distinct pad values meet in one access",
                     POLY_MAX_FILLS);
    }
    if (k == a->nfill) a->fill[a->nfill++] = (poly_fill){p->value, isl_set_empty(isl_space_copy(dom))};
    a->fill[k].set = isl_set_union(a->fill[k].set, poly_cons_set(pv, dom, p->cons, p->ncons));
  }
  /* the write of an empty reduction: on its outputs all the same (poly_blk.out_domain) */
  bool write = b->out_domain && a == &b->acc[b->pub.naccess - 1];
  a->map = poly_simplify_map(isl_map_intersect_domain(m, isl_set_copy(write ? b->out_domain : b->domain)));
  pieces = a->map ? isl_map_n_basic_map(a->map) : 0;
  for (int k = 0; k < a->nfill; k++) {
    a->fill[k].set = poly_simplify_set(isl_set_intersect(a->fill[k].set, isl_set_copy(b->domain)));
    if (a->fill[k].set) pieces += isl_set_n_basic_set(a->fill[k].set);
  }
  isl_space_free(dom);
  isl_space_free(ran);
  harp_status st = check_access(pv, a, who, tensor, pieces);
  if (!st) poly_acc_cache_put(pv, key, a, pieces);
  a->key = key;
  return st;
}

/* Access a (of node `who`, reading `tensor`, `pieces` basic relations)
 * built without an isl error and within the view's limit on pieces. */
static harp_status check_access(poly_view *pv, const poly_acc *a, const char *who, int tensor, int pieces) {
  if (!a->map || poly_isl_check(pv, who, "building an access relation")) {
    if (pv->e->code == HARP_OK) ut_fail(pv->e, HARP_E_NO_MEMORY, who, "isl ran out of memory");
    return pv->e->code;
  }
  if (pieces > pv->max_pieces)
    return ut_fail(pv->e, HARP_E_EXCESSIVE_PIECEWISE, who,
                   "reading %s splits into %d pieces after coalescing (limit %d); materialize an intermediate",
                   pv->g->nodes[tensor].id, pieces, pv->max_pieces);
  return HARP_OK;
}
