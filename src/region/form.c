/* form.c — region formation, seed 000 §4.1 as a list of steps, and the
 * description of every region for the backends (rg_info).
 * Needs: every other src/region/ file, the IndexBook and Poly-View.
 * Gives: rg_form, rg_formed_free, rg_shape_name.
 *
 *   1. SCoP extraction        ib_build, ib_validate, poly_build
 *   2. contraction patterns   (poly_build, §3.5) and attentions (attention.c)
 *   3. legality and halo      can_compute_at per internal edge (legal.c)
 *   4. Δtime                  plan_fusion_delta on the machine (rcost.c)
 *   5. selection              greedy + rollback, exact windows (select.c)
 *   6. Region Buffer SSA      regions, local_edges, plan summaries (here;
 *                             the §12.4 JSON is ssa.c) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "region/rg_int.h"

#define MAX_ATT 64
#define DEFAULT_BUDGET_CPU (64 * 1024)
#define DEFAULT_WINDOW 24
#define DEFAULT_HALO_MAX 0.5
#define OCC_SAT_GPU 0.125

const char *rg_role_name(rg_role r) {
  static const char *const n[] = {"body", "anchor", "epilogue", "operand_cast", "matmul", "softmax"};
  return (unsigned)r < 6 ? n[r] : "?";
}

const char *rg_shape_name(rg_shape s) {
  static const char *const n[] = {"single", "contraction_epilogue", "row_fused", "attention", "gather", "cell"};
  return (unsigned)s < 6 ? n[s] : "?";
}

void rg_formed_drop_analysis(rg_formed *f) {
  if (!f) return;
  if (!f->borrowed) {
    poly_free(f->pv);
    ib_free(f->ib);
  }
  f->pv = NULL;
  f->ib = NULL;
}

void rg_formed_free(rg_formed *f) {
  rg_formed_drop_analysis(f);
  if (f) free(f->region_of_unit);
  free(f);
}

/* ---- the description of one region -------------------------------------------------- */
static char *dup(ut_arena *a, const char *s) { return ut_arena_strdup(a, s ? s : ""); }

static const char *tensor_name(const rg_ctx *c, int node) { return tiny_output_name(c->g, node); }

/* Blocks of the region in a path from `from` to `to` along internal reads. */
static int path_to(const rg_ctx *c, const int *blocks, int n, int from, int to, int *path) {
  int parent[RG_MAX_SET], queue[RG_MAX_SET], qh = 0, qt = 0;
  for (int i = 0; i < n; i++) parent[i] = -2;
  int fi = -1, ti = -1;
  for (int i = 0; i < n; i++) {
    if (blocks[i] == from) fi = i;
    if (blocks[i] == to) ti = i;
  }
  if (fi < 0 || ti < 0) return 0;
  parent[fi] = -1;
  queue[qt++] = fi;
  while (qh < qt) {
    int x = queue[qh++];
    for (int j = 0; j < n; j++) {
      if (parent[j] != -2) continue;
      const poly_block_info *b = poly_block(c->pv, blocks[j]);
      bool reads = false;
      for (int a = 0; a < b->naccess && !reads; a++) reads = !b->access[a].write && rg_producer_block(c, b->access[a].tensor) == blocks[x];
      if (reads) parent[j] = x, queue[qt++] = j;
    }
  }
  if (parent[ti] == -2) return 0;
  int rev[RG_MAX_SET], k = 0;
  for (int x = ti; x >= 0; x = parent[x]) rev[k++] = blocks[x];
  for (int i = 0; i < k; i++) path[i] = rev[k - 1 - i];
  return k;
}

static void add_edge(rg_ctx *c, rg_info *I, ut_arena *A, int from_block, int tensor, int to_block,
                     const poly_min_buffer *mb) {
  rg_local_edge *e = &I->edges[I->nedges++];
  e->from_block = from_block;
  e->to_block = to_block;
  e->tensor = tensor;
  e->from = dup(A, from_block >= 0 ? rg_block_name(c, from_block) : tensor_name(c, tensor));
  e->to = dup(A, rg_block_name(c, to_block));
  e->buffer = mb ? mb->buffer : PLAN_BUF_REG;
  e->depth = mb ? mb->depth : 0;
  e->bytes = mb ? mb->bytes : tiny_dtype_size(c->g->nodes[tensor].dtype);
  e->barrier = poly_barrier_hint(e->buffer, e->depth, c->m.arch);
}

/* Block b of the set as the outer MULADD of an exact QDQ Add step (*rf):
 * the tensor its residual's way reads (the base tensor of the deepest side
 * block's read; the way reads it point for point), else -1. */
static int resfma_tensor(rg_ctx *c, const int *blocks, int n, int K, int b, rg_resfma *rf) {
  if (!rg_resfma_at(c, blocks, n, K, b, rf)) return -1;
  int ns = rf->nside - (rf->chain_outer ? 1 : 0);
  int deep = ns > 0 ? rf->side[ns - 1] : rf->chain_outer ? rf->inner : -1;
  int db = deep >= 0 ? rg_producer_block(c, deep) : -1;
  if (db < 0) return -1; /* no side block: the outer reads the tensor itself */
  const poly_block_info *x = poly_block(c->pv, db);
  for (int a = 0; a < x->naccess; a++)
    if (!x->access[a].write && c->g->nodes[x->access[a].tensor].op != TINY_CONST) return x->access[a].tensor;
  return -1;
}

static harp_status describe_contraction(rg_ctx *c, rg_info *I, ut_arena *A, const int *blocks, int n) {
  int K = I->anchor;
  const poly_block_info *kb = poly_block(c->pv, K);
  int roles[RG_MAX_SET];
  rg_epilogue_roles(c, blocks, n, K, roles);
  I->epi = ut_arena_alloc(A, sizeof(rg_epi) * (size_t)(n + 1));
  I->edges = ut_arena_alloc(A, sizeof(rg_local_edge) * 4);
  I->halos = ut_arena_alloc(A, sizeof(rg_halo) * 2);
  if (!I->epi || !I->edges || !I->halos) return ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
  for (int i = 0; i < n; i++) {
    bool side = false; /* on an exact QDQ Add's residual way: the outer MULADD reads its tensor (resfma.c) */
    if (blocks[i] == K || rg_operand_cast(c, blocks, n, K, blocks[i]) || (rg_resfma_part(c, blocks, n, K, blocks[i], &side) && side))
      continue;
    const poly_block_info *b = poly_block(c->pv, blocks[i]);
    rg_resfma rf;
    int rtensor = resfma_tensor(c, blocks, n, K, blocks[i], &rf);
    rg_epi *ep = &I->epi[I->nepi++];
    ep->block = blocks[i];
    ep->node = b->node;
    ep->op = c->g->nodes[b->node].op;
    ep->role = roles[i];
    int path[RG_MAX_SET], np = path_to(c, blocks, n, K, blocks[i], path);
    for (int a = 0; a < b->naccess && ep->nextra < 2; a++) {
      if (b->access[a].write) continue;
      int p = rg_producer_block(c, b->access[a].tensor);
      bool conv_op = p >= 0 && rg_in(blocks, n, p) && rg_operand_cast(c, blocks, n, K, p);
      bool side_in = rtensor >= 0 && p >= 0 && rg_in(blocks, n, p) && rg_resfma_part(c, blocks, n, K, p, &side) && side;
      if (p >= 0 && rg_in(blocks, n, p) && !conv_op && !side_in) continue;
      rg_operand *o = &ep->extra[ep->nextra++];
      /* through an operand cast: the tensor it converts, same shape; through
       * the residual's way (read point for point): its tensor */
      o->node = conv_op ? poly_block(c->pv, p)->access[0].tensor : side_in ? rtensor : b->access[a].tensor;
      o->cast = conv_op ? poly_block(c->pv, p)->node : -1;
      o->block = K;
      o->nvars = kb->nout;
      if (np && poly_access_strides_via(c->e, c->pv, path, np, a, o->strides, &o->offset, &o->affine)) return c->e->code;
    }
  }
  if (n > 1) add_edge(c, I, A, K, kb->node, blocks[n - 1], NULL); /* the accumulator through the epilogue, in registers */
  /* windowed operands: staged with their halo */
  const poly_contraction *k = kb->con;
  for (int side = 0; side < 2; side++) {
    const poly_idx *idx = side ? k->rhs_idx : k->lhs_idx;
    int rank = side ? k->rhs_rank : k->lhs_rank;
    bool win = false;
    for (int d = 0; d < rank; d++) win |= idx[d].kind == POLY_IDX_WINDOW;
    if (!win) continue;
    rg_halo *h = &I->halos[I->nhalos++];
    h->tensor = side ? k->rhs : k->lhs;
    h->block = K;
    rg_natural_tile(c, K, h->tile);
    poly_min_buffer mb;
    if (poly_min_buffer_for_edge(c->e, c->pv, h->tensor, K, h->tile, c->budget, &mb)) return c->e->code;
    h->halo = mb.halo;
    add_edge(c, I, A, -1, h->tensor, K, &mb);
  }
  return HARP_OK;
}

static harp_status describe_rows(rg_ctx *c, rg_info *I, ut_arena *A, const int *blocks, int n) {
  int ne = 0;
  for (int i = 0; i < n; i++) ne += poly_block(c->pv, blocks[i])->naccess;
  I->edges = ut_arena_alloc(A, sizeof(rg_local_edge) * (size_t)(ne + 1));
  if (!I->edges) return ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
  for (int i = 0; i < n; i++) {
    const poly_block_info *b = poly_block(c->pv, blocks[i]);
    for (int a = 0; a < b->naccess; a++) {
      if (b->access[a].write) continue;
      int p = rg_producer_block(c, b->access[a].tensor);
      if (p < 0 || p == blocks[i] || !rg_in(blocks, n, p)) continue;
      bool seen = false;
      for (int k = 0; k < I->nedges; k++) seen |= I->edges[k].from_block == p && I->edges[k].to_block == blocks[i];
      if (seen) continue;
      if (rg_operand_cast(c, blocks, n, -1, p)) { /* converted when its reader loads it */
        add_edge(c, I, A, p, b->access[a].tensor, blocks[i], NULL);
        continue;
      }
      const poly_min_buffer *mb;
      if (rg_min_buffer(c, b->access[a].tensor, blocks[i], a, I->prefix, &mb)) return c->e->code;
      add_edge(c, I, A, p, b->access[a].tensor, blocks[i], mb);
    }
  }
  return HARP_OK;
}

static harp_status describe_attention(rg_ctx *c, rg_info *I, ut_arena *A, const rg_attention *att, const int *blocks,
                                    int n) {
  I->att = *att;
  I->epi = ut_arena_alloc(A, sizeof(rg_epi) * (size_t)(n + 1));
  I->edges = ut_arena_alloc(A, sizeof(rg_local_edge) * 2);
  if (!I->epi || !I->edges) return ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
  for (int i = 0; i < n; i++) /* the casts after P V */
    if (blocks[i] > att->pv) {
      rg_epi *ep = &I->epi[I->nepi++];
      ep->block = blocks[i];
      ep->node = poly_block(c->pv, blocks[i])->node;
      ep->op = c->g->nodes[ep->node].op;
      ep->role = -1;
    }
  /* S and P never leave the registers of the CTA that computes them */
  add_edge(c, I, A, att->qk, poly_block(c->pv, att->qk)->node, att->pv, NULL);
  return HARP_OK;
}

static harp_status copy_plan_info(rg_ctx *c, rg_info *I, ut_arena *A, const rg_eval *ev) {
  plan_region_info *r = &I->plan_info;
  *r = ev->info;
  r->name = dup(A, ev->info.name);
  for (int i = 0; i < r->naxes; i++) r->axes[i].name = dup(A, ev->info.axes[i].name);
  for (int i = 0; i < r->ninputs; i++) r->inputs[i] = dup(A, ev->info.inputs[i]);
  r->nedges = 0;
  for (int i = 0; i < I->nedges && r->nedges < PLAN_MAX_EDGES; i++) {
    plan_edge *pe = &r->edges[r->nedges++];
    ut_sanitize_name(I->edges[i].from, pe->from, sizeof pe->from);
    ut_sanitize_name(I->edges[i].to, pe->to, sizeof pe->to);
    pe->buffer = I->edges[i].buffer;
    pe->depth = I->edges[i].depth;
  }
  if (!r->name) return ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
  for (int i = 0; i < r->naxes; i++)
    if (!r->axes[i].name) return ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
  return HARP_OK;
}

/* Why the region took none of its remaining producers. */
static harp_status describe_stops(rg_ctx *c, rg_info *I, ut_arena *A, const int *members, int nm) {
  int nprod = 0;
  for (int i = 0; i < nm; i++) nprod += c->units[members[i]].nprod;
  I->stops = ut_arena_alloc(A, sizeof(rg_stop) * (size_t)(nprod + 1));
  if (!I->stops) return ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
  for (int i = nm - 1; i >= 0; i--)
    for (int k = c->units[members[i]].nprod - 1; k >= 0; k--) {
      int q = c->units[members[i]].prod[k];
      bool seen = rg_in(members, nm, q);
      for (int j = 0; j < I->nstops && !seen; j++) seen = !strcmp(I->stops[j].candidate, c->units[q].name);
      if (seen) continue;
      rg_absorb a;
      if (rg_try_absorb(c, members, nm, q, &a)) return c->e->code;
      rg_stop *s = &I->stops[I->nstops++];
      s->candidate = dup(A, c->units[q].name);
      s->reason = a.ok ? (c->units_exact && c->units_exact[q] ? "exact_selection" : "rolled_back") : a.reason;
      s->detail = dup(A, a.ok ? "the fusion is legal and pays, but the selection put the producer elsewhere" : a.detail);
      s->dtime = a.dtime;
      if (!s->candidate || !s->detail) return ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
    }
  return HARP_OK;
}

/* ---- attention: accept when forming it pays ------------------------------------------ */
static harp_status attention_delta(rg_ctx *c, const rg_attention *att, const int *blocks, int n, double *dt,
                                 const char **stop) {
  const rg_eval *S, *P, *x;
  *stop = NULL;
  if (rg_eval_set(c, blocks, n, -1, &S) || rg_eval_set(c, &att->pv, 1, -1, &P)) return c->e->code;
  if (!S->legal) {
    *stop = S->reason;
    return HARP_OK;
  }
  double t = 0, f = 0, b = 0;
  for (int i = 0; i < n; i++) {
    if (blocks[i] == att->pv) continue;
    if (rg_eval_set(c, &blocks[i], 1, -1, &x)) return c->e->code;
    t += x->time, f += x->flops, b += x->bytes;
  }
  if (P->has_plan && !S->has_plan) {
    *stop = "no_plan";
    return HARP_OK;
  }
  plan_fusion_out d;
  rg_delta(c, P, S, t, f, b, &d, NULL, 0);
  *dt = d.dtime;
  *stop = rg_stop_of(&d);
  return HARP_OK;
}

static harp_status describe(rg_ctx *c, rg_info *I, ut_arena *A, const int *members, int nm, const int *blocks, int n,
                          int gather, const char *selection) {
  const rg_eval *ev;
  if (rg_eval_set(c, blocks, n, gather, &ev)) return c->e->code;
  if (!ev->legal)
    return ut_fail(c->e, HARP_E_INTERNAL, gather >= 0 ? c->g->nodes[gather].id : rg_block_name(c, blocks[n - 1]),
                   "region formation chose an illegal region: %s (%s)", ev->reason, ev->detail);
  I->shape = ev->shape;
  I->nblocks = n;
  I->blocks = ut_arena_alloc(A, sizeof(int) * (size_t)(n + 1));
  if (!I->blocks) return ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
  memcpy(I->blocks, blocks, sizeof(int) * (size_t)n);
  I->anchor = ev->anchor;
  I->prefix = ev->prefix;
  rg_ukind k0 = c->units[members[0]].kind;
  I->selection = nm == 1 && k0 == RG_U_CELL ? "cell" : nm == 1 && k0 != RG_U_ATTENTION ? "singleton" : selection;
  I->time_est = ev->time;
  I->has_plan = ev->has_plan;
  I->plan = *ev->plan; /* a legal set's (rg_cost_set) */
  harp_status st = HARP_OK;
  bool contraction = I->anchor >= 0 && poly_block(c->pv, I->anchor)->kind == POLY_CONTRACTION;
  int cell = ev->shape == RG_SHAPE_CELL ? c->units[members[0]].cell : -1;
  if (ev->shape == RG_SHAPE_ATTENTION) st = describe_attention(c, I, A, c->units[members[0]].att, blocks, n);
  else if (cell >= 0) I->cell = c->cells[cell];
  else if (gather < 0 && contraction) st = describe_contraction(c, I, A, blocks, n);
  else if (gather < 0) st = describe_rows(c, I, A, blocks, n);
  I->roles = ut_arena_alloc(A, sizeof(rg_role) * (size_t)(n + 1));
  if (!st && !I->roles) st = ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
  for (int i = 0; i < n && !st; i++) {
    int b = blocks[i];
    rg_role r = RG_ROLE_BODY;
    if (cell >= 0) {
      r = b == I->cell.con[0] ? RG_ROLE_ANCHOR : rg_in(I->cell.con, I->cell.ncon, b) ? RG_ROLE_MATMUL : RG_ROLE_EPILOGUE;
    } else if (ev->shape == RG_SHAPE_ATTENTION) {
      r = b == I->att.qk || b == I->att.pv ? RG_ROLE_MATMUL : b > I->att.pv ? RG_ROLE_EPILOGUE : RG_ROLE_SOFTMAX;
      if (b < I->att.pv && c->g->nodes[poly_block(c->pv, b)->node].op == TINY_CAST && b > I->att.qk) r = RG_ROLE_SOFTMAX;
    } else if (gather < 0 && contraction) {
      r = b == I->anchor ? RG_ROLE_ANCHOR : rg_operand_cast(c, blocks, n, I->anchor, b) ? RG_ROLE_OPERAND_CAST : RG_ROLE_EPILOGUE;
    } else if (gather < 0 && n > 1 && rg_operand_cast(c, blocks, n, -1, b)) {
      r = RG_ROLE_OPERAND_CAST;
    }
    I->roles[i] = r;
  }
  if (!st) st = copy_plan_info(c, I, A, ev);
  const char *stop;
  if (!st && ev->shape == RG_SHAPE_ATTENTION) st = attention_delta(c, &I->att, blocks, n, &I->dtime, &stop);
  else if (!st) st = rg_formation_delta(c, members, nm, &I->dtime, &stop, NULL, 0);
  if (!st) st = describe_stops(c, I, A, members, nm);
  return st;
}

static void reset_units(rg_ctx *c) {
  c->nunits = 0;
  c->units_exact = NULL;
  c->ncache = 0;
  c->capcache = 0; /* a fresh table: legality depends on the units */
  c->cache = NULL;
}

/* ---- the partition -------------------------------------------------------------------- */
/* The nodes of list[0 .. n) (ascending) whose mark is want. */
static int *ints_of(ut_arena *a, const char *mark, const int *list, int n, char want, int *count) {
  int k = 0;
  for (int i = 0; i < n; i++) k += mark[list[i]] == want;
  int *out = ut_arena_alloc(a, sizeof(int) * (size_t)(k + 1));
  if (!out) return NULL;
  k = 0;
  for (int i = 0; i < n; i++)
    if (mark[list[i]] == want) out[k++] = list[i];
  *count = k;
  return out;
}

static int cmp_int(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

static harp_status build_partition(rg_ctx *c, const rg_choice *ch, rg_partition *p) {
  const tiny_graph *g = c->g;
  ut_arena *A = p->arena;
  p->regions = ut_arena_alloc(A, sizeof(rg_region) * ((size_t)ch->nregions + 1));
  rg_info *infos = ut_arena_alloc(A, sizeof(rg_info) * ((size_t)ch->nregions + 1));
  int *members = ut_xmalloc(sizeof(int) * ((size_t)c->nunits + 1));
  int *blocks = ut_xmalloc(sizeof(int) * ((size_t)poly_nblocks(c->pv) + 1));
  harp_status st = HARP_OK;
  if (!p->regions || !infos || !members || !blocks) st = ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
  for (int r = 0; r < ch->nregions && !st; r++) {
    int nm = 0;
    for (int u = 0; u < c->nunits; u++)
      if (ch->region_of_unit[u] == r) members[nm++] = u;
    int gather;
    int n = rg_units_blocks(c, members, nm, blocks, poly_nblocks(c->pv), &gather);
    rg_region *R = &p->regions[p->n];
    rg_info *I = &infos[p->n];
    int nn, nin, nout;
    rg_region_nodes(c, blocks, n, gather, &nn, &nin, c->outs, &nout);
    int sink_node = c->units[members[nm - 1]].node;
    if (nout == 0) c->outs[nout++] = sink_node; /* dead code still writes its value */
    R->nodes = ints_of(A, c->rn_mark, c->rn_list, c->rn_n, 1, &R->nnodes);
    R->in_values = ints_of(A, c->rn_mark, c->rn_list, c->rn_n, 2, &R->nin);
    R->out_values = ut_arena_alloc(A, sizeof(int) * (size_t)(nout + 1));
    if (!R->nodes || !R->in_values || !R->out_values) {
      st = ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
      break;
    }
    qsort(c->outs, (size_t)nout, sizeof(int), cmp_int);
    memcpy(R->out_values, c->outs, sizeof(int) * (size_t)nout);
    R->nout = nout;
    for (int i = 0; i < n; i++) {
      const poly_block_info *b = poly_block(c->pv, blocks[i]);
      for (int k = 0; k < b->nnodes; k++) p->region_of[b->nodes[k]] = p->n;
    }
    if (gather >= 0) p->region_of[gather] = p->n;
    R->name = dup(A, c->units[members[nm - 1]].name); /* block names live in the Poly-View, which may go first */
    if (!R->name) {
      st = ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
      break;
    }
    for (int q = 0; q < p->n; q++)
      if (!strcmp(p->regions[q].name, R->name)) R->name = g->nodes[sink_node].id;
    if ((st = describe(c, I, A, members, nm, blocks, n, gather, ch->selection[r]))) break;
    R->info = I;
    /* rg_region.blocks: the blocks with loops, in order; operand casts are
     * conversions done where their readers load */
    R->blocks = ut_arena_alloc(A, sizeof(int) * (size_t)(n + 1));
    if (!R->blocks) {
      st = ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
      break;
    }
    for (int i = 0; i < n; i++)
      if (I->roles[i] != RG_ROLE_OPERAND_CAST) R->blocks[R->nblocks++] = blocks[i];
    switch (I->shape) {
    case RG_SHAPE_GATHER: R->kind = "gather"; break;
    case RG_SHAPE_ATTENTION: R->kind = "contraction", R->pattern = "attention"; break;
    case RG_SHAPE_CELL: R->kind = "contraction", R->pattern = "cell"; break;
    default:
      if (I->anchor >= 0 && poly_block(c->pv, I->anchor)->kind == POLY_CONTRACTION) {
        R->kind = "contraction";
        R->pattern = poly_pattern_name(poly_block(c->pv, I->anchor)->con->pattern);
      } else {
        R->kind = "ewise";
        for (int i = 0; i < n; i++)
          if (poly_block(c->pv, blocks[i])->kind == POLY_REDUCE) R->kind = "reduce";
      }
    }
    R->stop_reason = I->nstops ? I->stops[0].reason : gather >= 0 ? "non_scop" : "inputs_only";
    p->n++;
  }
  free(members);
  free(blocks);
  return st;
}

/* ---- rg_form ------------------------------------------------------------------------------ */
static bool half(tiny_dtype d) { return d == TINY_FP16 || d == TINY_BF16; }

/* half_only (rg_options.half_attention_only): an attention that does not
 * compute in half precision (P not rounded to fp16/bf16 before P V, so q, k
 * and v are fp32 too) is not one, so its matmuls and softmax form regions
 * of their own (on an H100 a BERT layer's fp32 attention as one generic
 * kernel, a thread per query row, took 2.0 ms) */
static harp_status match_attentions(rg_ctx *c, bool half_only, rg_attention **att, int **att_blocks, int *att_n,
                                  int *natt) {
  int nb = poly_nblocks(c->pv);
  char *claimed = ut_arena_alloc(c->arena, (size_t)nb + 1);
  if (!claimed) return ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
  *natt = 0;
  for (int b = nb - 1; b >= 0 && *natt < MAX_ATT; b--) {
    if (poly_block(c->pv, b)->kind != POLY_CONTRACTION || claimed[b]) continue;
    rg_attention *a = ut_arena_alloc(c->arena, sizeof *a);
    int *bl = ut_arena_alloc(c->arena, sizeof(int) * 32);
    if (!a || !bl) return ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
    bool found;
    int n;
    if (rg_match_attention(c, b, &found, a, bl, &n, NULL, 0)) return c->e->code;
    bool overlap = false;
    for (int i = 0; found && i < n; i++) overlap |= claimed[bl[i]];
    if (!found || overlap) continue;
    if (half_only && !half(a->p_dtype)) continue;
    for (int i = 0; i < n; i++) claimed[bl[i]] = 1;
    qsort(bl, (size_t)n, sizeof(int), cmp_int);
    att[*natt] = a;
    att_blocks[*natt] = bl;
    att_n[(*natt)++] = n;
  }
  return HARP_OK;
}

/* ch: the regions r formed (rg_options.replay), when the units are the
 * same in number. */
static harp_status replay_choice(rg_ctx *c, const rg_formed *r, rg_choice *ch) {
  if (r->nunits != c->nunits || !r->region_of_unit)
    return ut_fail(c->e, HARP_E_INVALID_ARG, NULL, "regions to replay over %d units, this graph has %d", r->nunits, c->nunits);
  ch->nregions = r->nregions;
  ch->selection = ut_arena_alloc(c->arena, sizeof(char *) * ((size_t)r->nregions + 1));
  if (!ch->selection) return ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
  for (int u = 0; u < c->nunits; u++) ch->region_of_unit[u] = r->region_of_unit[u];
  for (int i = 0; i < r->nregions; i++) ch->selection[i] = "replayed";
  return HARP_OK;
}

static harp_status form(rg_ctx *c, const rg_options *opt, rg_formed *F, rg_partition *p) {
  const tiny_graph *g = c->g;
  /* 1. SCoP extraction (2. contraction patterns are found on the way), unless given */
  if (opt->pv && opt->ib) {
    F->ib = opt->ib, F->pv = opt->pv, F->borrowed = true;
  } else if (ib_build(c->e, g, c->syms, NULL, &F->ib) || ib_validate(c->e, F->ib) ||
             poly_build(c->e, g, F->ib, NULL, &F->pv)) {
    return c->e->code;
  }
  c->pv = F->pv;
  int nb = poly_nblocks(c->pv);
  c->group = ut_arena_alloc(c->arena, sizeof(int) * ((size_t)nb + 1));
  if (!c->group) return ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
  int ngroups;
  if (poly_make_fusable_groups(c->e, c->pv, c->group, &ngroups)) return c->e->code;
  /* 2. attentions, kept when forming them pays */
  rg_attention *att[MAX_ATT];
  int *att_blocks[MAX_ATT], att_n[MAX_ATT], natt = 0;
  if (!opt->no_fusion && match_attentions(c, opt->half_attention_only, att, att_blocks, att_n, &natt))
    return c->e->code;
  /* 2b. recurrent cells (CPU): each step's GEMV with its gate math, a unit and a region */
  if (!opt->no_fusion && !opt->no_cells && !plan_arch_is_gpu(c->m.arch)) {
    char *claimed = ut_arena_alloc(c->arena, (size_t)nb + 1);
    if (!claimed) return ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
    for (int a = 0; a < natt; a++)
      for (int i = 0; i < att_n[a]; i++) claimed[att_blocks[a][i]] = 1;
    if (rg_find_cells(c, claimed)) return c->e->code;
  }
  if (rg_units_build(c, att, att_blocks, att_n, natt)) return c->e->code;
  int keep = 0;
  for (int a = 0; a < natt; a++) {
    double dt = 0;
    const char *stop = NULL;
    if (opt->replay) stop = opt->replay->att_kept >> a & 1u ? NULL : "replayed";
    else if (attention_delta(c, att[a], att_blocks[a], att_n[a], &dt, &stop)) return c->e->code;
    if (!stop) {
      F->att_kept |= UINT64_C(1) << a;
      att[keep] = att[a], att_blocks[keep] = att_blocks[a], att_n[keep++] = att_n[a];
    }
  }
  if (keep != natt) {
    reset_units(c);
    if (rg_units_build(c, att, att_blocks, att_n, keep)) return c->e->code;
  }
  /* 3-5. selection */
  rg_choice ch = {0};
  ch.region_of_unit = ut_arena_alloc(c->arena, sizeof(int) * ((size_t)c->nunits + 1));
  if (!ch.region_of_unit) return ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
  if (opt->replay) {
    if (replay_choice(c, opt->replay, &ch)) return c->e->code;
  } else if (opt->no_fusion) {
    ch.nregions = c->nunits;
    ch.selection = ut_arena_alloc(c->arena, sizeof(char *) * ((size_t)c->nunits + 1));
    if (!ch.selection) return ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
    for (int u = 0; u < c->nunits; u++) ch.region_of_unit[u] = u, ch.selection[u] = "singleton";
  } else {
    int window = opt->window ? opt->window : DEFAULT_WINDOW;
    if (rg_select(c, &ch, &F->greedy_time, &F->final_time, &F->nwindows, &F->nexact, window > 0 ? window : 0))
      return c->e->code;
  }
  /* 6. regions with their description; the decisions kept for a replay */
  F->nunits = c->nunits, F->nregions = ch.nregions;
  if (!(F->region_of_unit = ut_xmalloc(sizeof(int) * ((size_t)c->nunits + 1))))
    return ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
  memcpy(F->region_of_unit, ch.region_of_unit, sizeof(int) * (size_t)c->nunits);
  return build_partition(c, &ch, p);
}

harp_status rg_form(harp_error *e, const tiny_graph *g, const tiny_symtab *syms, const rg_options *opt,
                  rg_partition **out) {
  *out = NULL;
  rg_options o = {0};
  if (opt) o = *opt;
  for (int i = 0; i < g->n; i++)
    if (!tiny_shape_known(&g->nodes[i].shape))
      return ut_fail(e, HARP_E_UNBOUND_SYMBOL, g->nodes[i].id, "region formation needs every size bound (--sym)");
  rg_formed *F = ut_xcalloc(1, sizeof *F);
  rg_partition *p = ut_xcalloc(1, sizeof *p);
  rg_ctx c;
  memset(&c, 0, sizeof c);
  size_t sz = (size_t)g->n * 2 + 2;
  c.arena = ut_arena_new_big();
  if (F && p) p->formed = F;
  if (!F || !p || !c.arena || !(p->arena = ut_arena_new()) || !(p->region_of = ut_xmalloc(sizeof(int) * ((size_t)g->n + 1))) ||
      !(c.unit_of_node = ut_arena_alloc(c.arena, sizeof(int) * sz)) || !(c.is_output = ut_arena_alloc(c.arena, sz)) ||
      !(c.mark = ut_arena_alloc(c.arena, sz)) || !(c.mark2 = ut_arena_alloc(c.arena, sz)) ||
      !(c.rn_mark = ut_arena_alloc(c.arena, sz)) || !(c.rn_val = ut_arena_alloc(c.arena, sz)) ||
      !(c.rn_list = ut_arena_alloc(c.arena, sizeof(int) * sz)) ||
      !(c.stack = ut_arena_alloc(c.arena, sizeof(int) * sz)) || !(c.outs = ut_arena_alloc(c.arena, sizeof(int) * sz))) {
    if (p && !p->formed) free(F);
    rg_partition_free(p);
    ut_arena_free(c.arena);
    return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  }
  c.e = e;
  c.g = g;
  c.syms = syms;
  if (o.machine) c.m = *o.machine;
  else plan_machine_detect_cpu(&c.m);
  F->machine = c.m;
  o.machine = &F->machine;
  F->opt = o;
  F->opt.ib = NULL, F->opt.pv = NULL; /* F->ib, F->pv hold them */
  F->opt.replay = NULL;               /* another compile's: not kept */
  bool gpu = plan_arch_is_gpu(c.m.arch);
  c.budget = o.local_budget > 0 ? o.local_budget : gpu ? c.m.smem_per_cta_max : DEFAULT_BUDGET_CPU;
  c.halo_max = o.halo_max > 0 ? o.halo_max : DEFAULT_HALO_MAX;
  c.occ_sat = gpu ? OCC_SAT_GPU : 1.0;
  c.no_rollback = o.no_rollback;
  c.no_operand_casts = o.no_operand_casts;
  c.gate_epilogues = o.gate_epilogues && !gpu; /* the CUDA templates have no such steps */
  c.exact_add_steps = o.exact_add_steps;
  c.algo_mask = o.algo_mask;
  p->g = g;
  for (int i = 0; i < g->n; i++) p->region_of[i] = -1;
  for (int k = 0; k < g->noutputs; k++) c.is_output[g->outputs[k]] = 1;
  harp_status st = form(&c, &o, F, p);
  if (!st) st = rg_partition_check(e, p);
  ut_arena_free(c.arena);
  if (st) {
    rg_partition_free(p);
    return st;
  }
  *out = p;
  return HARP_OK;
}
