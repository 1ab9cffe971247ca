/* view.c — building the Poly-View: blocks, their domains and accesses.
 * Needs: a prepared graph and its IndexBook.  Gives: poly_build, poly_free
 * and the accessors of harp/poly.h.
 *
 * Steps: (1) find the contraction patterns, so that their MUL (and CAST)
 * are absorbed; (2) one block per remaining non-movement node, plus one per
 * movement node that is a model output; GATHER is listed as non-SCoP;
 * (3) per block: parameters, domain, reads (the IndexBook's composed
 * accesses), the write; (4) dependence edges (deps.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <isl/ilp.h>
#include <isl/val.h>

#include "poly/poly_int.h"
#include "util/util.h"

const char *poly_kind_name(poly_kind k) {
  static const char *const names[] = {"ewise", "reduce", "movement_affine", "contraction_pattern"};
  return (unsigned)k < 4 ? names[k] : "?";
}

const char *poly_pattern_name(poly_pattern p) { return p == POLY_PAT_CONV ? "conv" : "matmul"; }

static bool is_output(const tiny_graph *g, int node) {
  for (int k = 0; k < g->noutputs; k++)
    if (g->outputs[k] == node) return true;
  return false;
}

/* ---- naming ------------------------------------------------------------- */
static bool name_taken(const poly_view *pv, const char *name, bool isl) {
  return ut_strmap_find(isl ? &pv->isl_names : &pv->names, name) != NULL;
}

/* The tag when no earlier block uses it, else the node id (made unique). */
static harp_status name_block(poly_view *pv, poly_blk *b) {
  const tiny_node *n = &pv->g->nodes[b->pub.node];
  const char *name = n->tag && !name_taken(pv, n->tag, false) ? n->tag : n->id;
  char buf[192], ibuf[192];
  snprintf(buf, sizeof buf, "%s", name);
  for (int k = 2; name_taken(pv, buf, false); k++) snprintf(buf, sizeof buf, "%.150s#%d", name, k);
  ut_sanitize_name(buf, ibuf, sizeof ibuf);
  char ib2[200];
  snprintf(ib2, sizeof ib2, "%s", ibuf);
  for (int k = 2; name_taken(pv, ib2, true); k++) snprintf(ib2, sizeof ib2, "%.150s_%d", ibuf, k);
  b->pub.name = ut_arena_strdup(pv->arena, buf);
  b->pub.isl_name = ut_arena_strdup(pv->arena, ib2);
  if (!b->pub.name || !b->pub.isl_name || !ut_strmap_put(&pv->names, b->pub.name, 1) ||
      !ut_strmap_put(&pv->isl_names, b->pub.isl_name, 1))
    return ut_fail(pv->e, HARP_E_NO_MEMORY, n->id, "out of memory");
  return HARP_OK;
}

static const char *tensor_name(const tiny_graph *g, int node) {
  const tiny_node *n = &g->nodes[node];
  return n->op == TINY_INPUT ? n->a.input.tensor_id : n->id;
}

/* ---- blocks ------------------------------------------------------------- */
static poly_blk *new_block(poly_view *pv, poly_kind kind, int node, int var_node) {
  if (pv->nblocks == pv->capblocks) {
    int cap = pv->capblocks ? 2 * pv->capblocks : 16;
    poly_blk *nb = ut_xrealloc(pv->blocks, sizeof *nb * (size_t)cap);
    if (!nb) {
      ut_fail(pv->e, HARP_E_NO_MEMORY, NULL, "out of memory");
      return NULL;
    }
    pv->blocks = nb;
    pv->capblocks = cap;
  }
  poly_blk *b = &pv->blocks[pv->nblocks];
  memset(b, 0, sizeof *b);
  b->pub.kind = kind;
  b->pub.node = node;
  b->var_node = var_node;
  const ib_info *f = ib_get(pv->ib, var_node);
  b->pub.nvars = f->nvars;
  b->pub.nout = f->rank;
  ib_var_names(f, b->pub.var_names);
  if (name_block(pv, b)) return NULL;
  pv->block_of[node] = pv->nblocks++;
  return b;
}

static void add_node(poly_view *pv, poly_blk *b, int node) {
  if (b->pub.nnodes < POLY_MAX_NODES) b->pub.nodes[b->pub.nnodes++] = node;
  pv->block_of[node] = (int)(b - pv->blocks);
}

static harp_status add_read(poly_view *pv, poly_blk *b, const ib_access *a) {
  if (b->pub.naccess >= POLY_MAX_ACC) return ut_fail(pv->e, HARP_E_INTERNAL, b->pub.name, "too many accesses");
  poly_acc *acc = &b->acc[b->pub.naccess];
  poly_access_info *pub = &b->pub.access[b->pub.naccess++];
  acc->ib = *a;
  pub->tensor = a->src;
  pub->name = tensor_name(pv->g, a->src);
  pub->nvia = a->nvia;
  pub->via = a->via;
  return HARP_OK;
}

/* The write: the first nout variables index the output tensor. */
static harp_status add_write(poly_view *pv, poly_blk *b) {
  ib_piece *p = ut_arena_alloc(pv->arena, sizeof *p);
  ib_aff *m = ut_arena_alloc(pv->arena, sizeof *m * (size_t)(b->pub.nout + 1));
  if (!p || !m) return ut_fail(pv->e, HARP_E_NO_MEMORY, b->pub.name, "out of memory");
  for (int j = 0; j < b->pub.nout; j++) ib_aff_var(&m[j], j);
  *p = (ib_piece){.nmap = b->pub.nout, .map = m};
  ib_access a = {.src = b->pub.node, .nvars = b->pub.nvars, .npieces = 1, .pieces = p};
  if (add_read(pv, b, &a)) return pv->e->code;
  b->pub.access[b->pub.naccess - 1].write = true;
  return HARP_OK;
}

static harp_status collect_access_params(poly_view *pv, poly_blk *b, const ib_access *a) {
  for (int i = 0; i < a->npieces; i++) {
    const ib_piece *p = &a->pieces[i];
    for (int k = 0; k < p->ncons; k++)
      if (poly_collect_params(pv, b, &p->cons[k].e)) return pv->e->code;
    for (int k = 0; !p->fill && k < p->nmap; k++)
      if (poly_collect_params(pv, b, &p->map[k])) return pv->e->code;
  }
  return HARP_OK;
}

/* Parameters, domain and isl relations of a block whose reads are set. */
static harp_status finish_block(poly_view *pv, poly_blk *b) {
  const ib_info *f = ib_get(pv->ib, b->var_node);
  const char *who = pv->g->nodes[b->pub.node].id;
  if (add_write(pv, b)) return pv->e->code;
  for (int i = 0; i < f->ncons; i++)
    if (poly_collect_params(pv, b, &f->cons[i].e)) return pv->e->code;
  for (int k = 0; k < b->pub.naccess; k++)
    if (collect_access_params(pv, b, &b->acc[k].ib)) return pv->e->code;
  isl_space *sp = poly_block_space(pv, b);
  bool empty;
  b->domain = poly_domain_cached(pv, b, f, sp, b->pub.nvars > b->pub.nout, &empty); /* acc_cache.c */
  if (b->domain && empty) {
    ib_cons *oc = ut_arena_alloc(pv->arena, sizeof *oc * (size_t)(f->ncons + 1));
    int n = 0;
    for (int i = 0; oc && i < f->ncons; i++) {
      bool outs = f->cons[i].e.ndiv == 0;
      for (int v = b->pub.nout; v < b->pub.nvars && outs; v++) outs = f->cons[i].e.v[v] == 0;
      if (outs) oc[n++] = f->cons[i];
    }
    if (oc) b->out_domain = poly_simplify_set(poly_cons_set(pv, sp, oc, n));
  }
  isl_space_free(sp);
  if (!b->domain || poly_isl_check(pv, who, "building a domain")) {
    if (pv->e->code == HARP_OK) ut_fail(pv->e, HARP_E_NO_MEMORY, who, "isl ran out of memory");
    return pv->e->code;
  }
  /* constant variable bounds, once (Poly Core asks for them often); a box
   * of known sizes (the IndexBook's 0 <= x_j <= size_j - 1 and no guard)
   * has them without isl */
  b->is_box = f->ncons == 2 * f->nvars && f->nvars == b->pub.nvars && b->nparams == 0;
  for (int v = 0; v < b->pub.nvars && b->is_box; v++) {
    b->is_box = f->axes[v].size.n >= 1;
    b->lo[v] = 0;
    b->hi[v] = f->axes[v].size.n - 1;
  }
  b->ranges_known = true;
  for (int v = 0; v < b->pub.nvars && b->ranges_known && !b->is_box; v++) {
    isl_val *lo = isl_set_dim_min_val(isl_set_copy(b->domain), v), *hi = isl_set_dim_max_val(isl_set_copy(b->domain), v);
    b->ranges_known = lo && hi && isl_val_is_int(lo) && isl_val_is_int(hi);
    if (b->ranges_known) b->lo[v] = isl_val_get_num_si(lo), b->hi[v] = isl_val_get_num_si(hi);
    isl_val_free(lo);
    isl_val_free(hi);
  }
  /* an empty domain (an axis of size 0) has no min or max: its ranges are
   * the axes' sizes, 0 for the empty one, so extents multiply to 0 */
  if (!b->ranges_known && b->out_domain && f->nvars == b->pub.nvars) {
    b->ranges_known = true;
    for (int v = 0; v < b->pub.nvars && b->ranges_known; v++) {
      b->ranges_known = f->axes[v].size.n >= 0;
      b->lo[v] = 0;
      b->hi[v] = f->axes[v].size.n - 1;
    }
  }
  isl_ctx_reset_error(pv->ctx);
  for (int k = 0; k < b->pub.naccess; k++) {
    poly_acc *a = &b->acc[k];
    if (poly_make_access(pv, b, a, b->pub.access[k].tensor)) return pv->e->code;
    b->pub.access[k].npieces = isl_map_n_basic_map(a->map);
    for (int q = 0; q < a->nfill; q++) b->pub.access[k].nfill += isl_set_n_basic_set(a->fill[q].set);
  }
  return HARP_OK;
}

static void free_acc(poly_acc *a) {
  isl_map_free(a->map);
  for (int q = 0; q < a->nfill; q++) isl_set_free(a->fill[q].set);
  memset(a, 0, sizeof *a);
}

/* The relations of a contraction operand's stages.  A stage isl cannot
 * build within the limits (too many pieces) is left out rather than failing
 * the view: it is only needed where a region reads that CAST materialized. */
static harp_status add_stages(poly_view *pv, poly_blk *b, const poly_operand *ops) {
  for (int k = 0; k < 2; k++) {
    poly_access_info *pub = &b->pub.access[k];
    if (!ops[k].nstage) continue;
    b->stage[k] = ut_arena_alloc(pv->arena, sizeof(poly_acc) * (size_t)ops[k].nstage);
    if (!b->stage[k]) return ut_fail(pv->e, HARP_E_NO_MEMORY, b->pub.name, "out of memory");
    memset(b->stage[k], 0, sizeof(poly_acc) * (size_t)ops[k].nstage);
    for (int q = 0; q < ops[k].nstage; q++) {
      poly_acc *st = &b->stage[k][pub->nstage];
      st->ib = ops[k].stage[q];
      harp_error mine = {0}, *keep = pv->e;
      pv->e = &mine;
      harp_status s = poly_make_access(pv, b, st, st->ib.src);
      pv->e = keep;
      if (s) free_acc(st);
      if (s == HARP_E_NO_MEMORY) return ut_fail(pv->e, s, mine.node[0] ? mine.node : NULL, "%s", mine.msg);
      if (!s) pub->stage[pub->nstage++] = ops[k].stage[q].src;
    }
  }
  return HARP_OK;
}

static harp_status contraction_block(poly_view *pv, int r, const poly_contraction *con, const poly_operand *lhs,
                                   const poly_operand *rhs) {
  poly_blk *b = new_block(pv, POLY_CONTRACTION, r, r);
  if (!b) return pv->e->code;
  b->con = ut_arena_alloc(pv->arena, sizeof *b->con); /* contractions only: the struct is large */
  if (!b->con) return ut_fail(pv->e, HARP_E_NO_MEMORY, NULL, "out of memory");
  *b->con = *con;
  b->pub.con = b->con;
  add_node(pv, b, con->mul_node);
  int cast = pv->g->nodes[r].src[0].node;
  if (cast != con->mul_node) add_node(pv, b, cast);
  add_node(pv, b, r);
  if (add_read(pv, b, &lhs->acc) || add_read(pv, b, &rhs->acc)) return pv->e->code;
  const poly_operand ops[2] = {*lhs, *rhs};
  for (int k = 0; k < 2; k++) /* the stages' symbols are parameters of the block too */
    for (int q = 0; q < ops[k].nstage; q++)
      if (collect_access_params(pv, b, &ops[k].stage[q])) return pv->e->code;
  if (finish_block(pv, b)) return pv->e->code;
  return add_stages(pv, b, ops);
}

static harp_status node_block(poly_view *pv, int i) {
  const tiny_node *n = &pv->g->nodes[i];
  tiny_class cls = tiny_op_class(n->op);
  poly_kind kind;
  if (cls == TC_LEAF) return HARP_OK;
  if (cls == TC_GATHER) { /* data-dependent: outside the SCoP, a region boundary */
    pv->non_scop[pv->nnon_scop++] = i;
    return HARP_OK;
  }
  if (cls == TC_MOVE) {
    if (!is_output(pv->g, i)) return HARP_OK; /* a view: absorbed by its readers */
    kind = POLY_MOVEMENT_AFFINE;
  } else {
    kind = cls == TC_REDUCE ? POLY_REDUCE : POLY_EWISE;
  }
  poly_blk *b = new_block(pv, kind, i, i);
  if (!b) return pv->e->code;
  add_node(pv, b, i);
  const ib_info *f = ib_get(pv->ib, i);
  for (int k = 0; k < f->nin; k++)
    if (add_read(pv, b, &f->acc[k])) return pv->e->code;
  return finish_block(pv, b);
}

static harp_status build(poly_view *pv, const poly_options *opt) {
  const tiny_graph *g = pv->g;
  for (int i = 0; i < g->n; i++) pv->block_of[i] = -1;
  /* (1) patterns: absorbed MUL / CAST are skipped below */
  char *absorbed = ut_xcalloc((size_t)g->n + 1, 1);
  int *found = ut_xmalloc(sizeof(int) * ((size_t)g->n + 1)); /* per REDUCE node: its contraction's index, or -1 */
  int nred = 0;
  for (int i = 0; i < g->n; i++) nred += g->nodes[i].op == TINY_REDUCE;
  poly_contraction *cons = ut_xcalloc((size_t)nred + 1, sizeof *cons); /* one per REDUCE (large structs) */
  poly_operand *ops = ut_xcalloc(2 * (size_t)nred + 2, sizeof *ops);
  harp_status s = HARP_OK;
  if (!absorbed || !cons || !ops || !found) s = ut_fail(pv->e, HARP_E_NO_MEMORY, NULL, "out of memory");
  for (int i = 0, k = 0; !s && i < g->n; i++) {
    found[i] = -1;
    if (ib_get(pv->ib, i)->non_scop && opt && opt->require_scop)
      s = ut_fail(pv->e, HARP_E_NON_SCOP, g->nodes[i].id, "%s", ib_get(pv->ib, i)->non_scop);
    bool f = false;
    if (!s && g->nodes[i].op == TINY_REDUCE) s = poly_detect_contraction(pv, i, &f, &cons[k], &ops[2 * k], &ops[2 * k + 1]);
    if (s || !f) continue;
    found[i] = k++;
    absorbed[cons[found[i]].mul_node] = 1;
    absorbed[g->nodes[i].src[0].node] = 1;
  }
  /* (2)-(3) blocks in graph order (a contraction sits where its REDUCE is) */
  for (int i = 0; !s && i < g->n; i++) {
    int k = found[i];
    if (k >= 0) s = contraction_block(pv, i, &cons[k], &ops[2 * k], &ops[2 * k + 1]);
    else if (!absorbed[i]) s = node_block(pv, i);
  }
  free(absorbed);
  free(cons);
  free(ops);
  free(found);
  if (s) return s;
  /* Poly Core's memo of pointwise reads: region formation asks per candidate */
  pv->pointwise = ut_xmalloc((size_t)pv->nblocks * POLY_MAX_ACC + 1);
  if (!pv->pointwise) return ut_fail(pv->e, HARP_E_NO_MEMORY, NULL, "out of memory");
  memset(pv->pointwise, -1, (size_t)pv->nblocks * POLY_MAX_ACC + 1);
  return poly_build_edges(pv);
}

harp_status poly_build(harp_error *e, const tiny_graph *g, const ib_book *ib, const poly_options *opt, poly_view **out) {
  *out = NULL;
  if (ib->g != g || ib->n != g->n) return ut_fail(e, HARP_E_INTERNAL, NULL, "the IndexBook belongs to another graph");
  poly_view *pv = ut_xcalloc(1, sizeof *pv);
  if (!pv) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  pv->g = g;
  pv->ib = ib;
  pv->e = e;
  pv->max_pieces = opt && opt->max_pieces > 0 ? opt->max_pieces : TINY_DEFAULT_MAX_PIECES;
  pv->no_acc_cache = opt && opt->no_reuse;
  if (!pv->no_acc_cache) poly_halo_cache_new(pv);
  pv->arena = ut_arena_new_big();
  pv->block_of = ut_xcalloc((size_t)g->n + 1, sizeof *pv->block_of);
  pv->non_scop = ut_xcalloc((size_t)g->n + 1, sizeof *pv->non_scop);
  pv->uses = ut_xcalloc((size_t)g->n + 1, sizeof *pv->uses);
  pv->ctx = isl_ctx_alloc();
  if (!pv->arena || !pv->block_of || !pv->non_scop || !pv->uses || !pv->ctx) {
    poly_free(pv);
    return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  }
  isl_options_set_on_error(pv->ctx, ISL_ON_ERROR_CONTINUE); /* errors come back as values */
  for (int i = 0; i < g->n; i++)
    for (int k = 0; k < g->nodes[i].nsrc; k++)
      if (g->nodes[i].src[k].node >= 0) pv->uses[g->nodes[i].src[k].node]++;
  if (build(pv, opt)) {
    poly_free(pv);
    return e->code;
  }
  poly_acc_cache_free(pv); /* only the build reuses relations */
  pv->e = NULL;
  *out = pv;
  return HARP_OK;
}

void poly_free(poly_view *pv) {
  if (!pv) return;
  for (int k = 0; k < pv->nblocks; k++) {
    poly_blk *b = &pv->blocks[k];
    isl_set_free(b->domain);
    isl_set_free(b->out_domain);
    for (int a = 0; a < POLY_MAX_ACC; a++) free_acc(&b->acc[a]);
    for (int a = 0; a < 2; a++)
      for (int q = 0; b->stage[a] && q < b->pub.access[a].nstage; q++) free_acc(&b->stage[a][q]);
  }
  for (int k = 0; k < pv->nedges; k++) isl_map_free(pv->edges[k].dep);
  free(pv->blocks);
  free(pv->edges);
  free(pv->edges_to);
  free(pv->eq_along);
  free(pv->pointwise);
  free(pv->block_of);
  free(pv->non_scop);
  free(pv->uses);
  ut_strmap_free(&pv->names);
  ut_strmap_free(&pv->isl_names);
  poly_acc_cache_free(pv);
  poly_halo_cache_free(pv);
  ut_arena_free(pv->arena);
  if (pv->ctx) isl_ctx_free(pv->ctx);
  free(pv);
}

/* ---- accessors ---------------------------------------------------------- */
int poly_nblocks(const poly_view *pv) { return pv->nblocks; }
const poly_block_info *poly_block(const poly_view *pv, int k) { return &pv->blocks[k].pub; }
int poly_block_of(const poly_view *pv, int node) { return node >= 0 && node < pv->g->n ? pv->block_of[node] : -1; }
int poly_nedges(const poly_view *pv) { return pv->nedges; }
const poly_edge_info *poly_edge(const poly_view *pv, int k) { return &pv->edges[k].pub; }
int poly_nnon_scop(const poly_view *pv) { return pv->nnon_scop; }
int poly_non_scop(const poly_view *pv, int k) { return pv->non_scop[k]; }

static char *dup_isl(char *s) {
  if (!s) return NULL;
  char *r = strdup(s);
  free(s);
  return r;
}

char *poly_domain_str(const poly_view *pv, int block) { return dup_isl(isl_set_to_str(pv->blocks[block].domain)); }

char *poly_access_str(const poly_view *pv, int block, int access) {
  return dup_isl(isl_map_to_str(pv->blocks[block].acc[access].map));
}

bool poly_access_identity(const poly_view *pv, int block, int access) {
  const poly_acc *a = &pv->blocks[block].acc[access];
  if (a->nfill || isl_map_dim(a->map, isl_dim_in) != isl_map_dim(a->map, isl_dim_out)) return false;
  /* the tuples name the block and the tensor: compare without them */
  isl_map *m = isl_map_reset_tuple_id(isl_map_reset_tuple_id(isl_map_copy(a->map), isl_dim_in), isl_dim_out);
  isl_set *dom = isl_map_domain(isl_map_copy(m));
  isl_map *id = isl_map_intersect_domain(isl_map_identity(isl_space_map_from_set(isl_set_get_space(dom))), dom);
  isl_bool eq = isl_map_is_equal(m, id);
  isl_map_free(m);
  isl_map_free(id);
  return eq == isl_bool_true;
}

char *poly_access_fill_str(const poly_view *pv, int block, int access, int k, double *value) {
  const poly_acc *a = &pv->blocks[block].acc[access];
  if (k < 0 || k >= a->nfill) return NULL;
  *value = a->fill[k].value;
  return dup_isl(isl_set_to_str(a->fill[k].set));
}

char *poly_edge_str(const poly_view *pv, int edge) { return dup_isl(isl_map_to_str(poly_edge_dep(pv, edge))); }
