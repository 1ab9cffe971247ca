/* units.c — the units region selection moves (blocks, GATHER nodes,
 * recognized attentions, recurrent cells), their producer / consumer graph, and the Tiny
 * nodes, inputs and outputs of a candidate region.
 * Needs: a Poly-View.  Gives: rg_units_build, rg_region_nodes,
 * rg_producer_block, rg_block_name.
 *
 * Dependences between units follow the Tiny graph: a node's source is
 * followed through views (movement nodes) to the compute node or leaf
 * underneath; views are no units, they belong to every region that reads
 * through them.  A movement node that is a model output is a
 * movement_affine block (a copy) and so a unit of its own. */
#include <stdlib.h>
#include <string.h>

#include "region/rg_int.h"

static bool is_view(const tiny_graph *g, int n) { return tiny_op_class(g->nodes[n].op) == TC_MOVE; }

/* Follow s through views to the node underneath. */
static int base_of(const tiny_graph *g, int s) {
  while (s >= 0 && is_view(g, s)) s = g->nodes[s].src[0].node;
  return s;
}

const char *rg_block_name(const rg_ctx *c, int b) { return poly_block(c->pv, b)->name; }

int rg_producer_block(const rg_ctx *c, int t) {
  int b = poly_block_of(c->pv, t);
  return b >= 0 && poly_block(c->pv, b)->node == t ? b : -1;
}

bool rg_shape_strides(const tiny_graph *g, int node, int64_t *strides, int *rank) {
  const tiny_shape *s = &g->nodes[node].shape;
  int64_t acc = 1;
  *rank = s->rank;
  for (int d = s->rank - 1; d >= 0; d--) {
    if (s->d[d].n < 0) return false;
    strides[d] = acc;
    if (!ut_mul_ok(acc, s->d[d].n, &acc)) return false;
  }
  return true;
}

static int cmp_int(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

/* The nodes a unit computes. */
static int unit_nodes(const rg_ctx *c, const rg_unit *u, int *out) {
  int n = 0;
  if (u->kind == RG_U_GATHER) {
    out[n++] = u->node;
    return n;
  }
  for (int i = 0; i < u->nblocks; i++) {
    const poly_block_info *b = poly_block(c->pv, u->blocks[i]);
    for (int k = 0; k < b->nnodes; k++) out[n++] = b->nodes[k];
  }
  return n;
}

static int *list_of(ut_arena *a, const char *mark, int n, int *count) {
  int k = 0;
  for (int i = 0; i < n; i++) k += mark[i] != 0;
  int *out = ut_arena_alloc(a, sizeof(int) * (size_t)(k + 1));
  if (!out) return NULL;
  k = 0;
  for (int i = 0; i < n; i++)
    if (mark[i]) out[k++] = i;
  *count = k;
  return out;
}

harp_status rg_units_build(rg_ctx *c, rg_attention *const *att, int *const *att_blocks, const int *att_n, int natt) {
  const tiny_graph *g = c->g;
  int nb = poly_nblocks(c->pv);
  int *claim = ut_arena_alloc(c->arena, sizeof(int) * ((size_t)nb + 1));
  c->units = ut_arena_alloc(c->arena, sizeof(rg_unit) * ((size_t)nb + (size_t)g->n + 1));
  c->unit_of_block = ut_arena_alloc(c->arena, sizeof(int) * ((size_t)nb + 1));
  int *nodes = ut_arena_alloc(c->arena, sizeof(int) * ((size_t)g->n + 1));
  if (!claim || !c->units || !c->unit_of_block || !nodes) return ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
  for (int b = 0; b < nb; b++) claim[b] = -1;
  for (int a = 0; a < natt; a++)
    for (int i = 0; i < att_n[a]; i++) claim[att_blocks[a][i]] = a;
  /* recurrent cells (cell.c): claim natt + k, a unit at the node of their last block */
  int *cell_last = ut_arena_alloc(c->arena, sizeof(int) * ((size_t)c->ncells + 1));
  if (!cell_last) return ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
  for (int k = 0; k < c->ncells; k++) {
    cell_last[k] = rg_cell_node(c, k);
    for (int i = 0; i < c->cell_n[k]; i++) claim[c->cell_blocks[k][i]] = natt + k;
  }
  /* units in the order of the value they produce (a topological order) */
  for (int i = 0; i < g->n; i++) {
    rg_unit *u = &c->units[c->nunits];
    memset(u, 0, sizeof *u);
    int b = poly_block_of(c->pv, i);
    if (tiny_op_class(g->nodes[i].op) == TC_GATHER) {
      u->kind = RG_U_GATHER;
      u->node = i;
      u->name = g->nodes[i].tag ? g->nodes[i].tag : g->nodes[i].id;
    } else if (b >= 0 && poly_block(c->pv, b)->node == i && claim[b] < 0) {
      u->kind = RG_U_BLOCK;
      u->nblocks = 1;
      u->blocks = ut_arena_alloc(c->arena, sizeof(int));
      if (!u->blocks) return ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
      u->blocks[0] = b;
      u->node = i;
      u->name = rg_block_name(c, b);
    } else if (b >= 0 && claim[b] >= natt && cell_last[claim[b] - natt] == i) {
      int k = claim[b] - natt; /* a cell's blocks are sorted */
      u->kind = RG_U_CELL;
      u->nblocks = c->cell_n[k];
      u->blocks = c->cell_blocks[k];
      u->node = i;
      u->cell = k;
      u->name = rg_block_name(c, b);
    } else if (b >= 0 && poly_block(c->pv, b)->node == i && claim[b] < natt && att[claim[b]]->out == i) {
      int a = claim[b];
      u->kind = RG_U_ATTENTION;
      u->nblocks = att_n[a];
      u->blocks = ut_arena_alloc(c->arena, sizeof(int) * (size_t)att_n[a]);
      if (!u->blocks) return ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
      memcpy(u->blocks, att_blocks[a], sizeof(int) * (size_t)att_n[a]);
      qsort(u->blocks, (size_t)u->nblocks, sizeof(int), cmp_int);
      u->node = i;
      u->att = att[a];
      u->name = rg_block_name(c, b);
    } else {
      continue;
    }
    c->nunits++;
  }
  for (int i = 0; i < g->n; i++) c->unit_of_node[i] = -1;
  for (int u = 0; u < c->nunits; u++) {
    int k = unit_nodes(c, &c->units[u], nodes);
    for (int j = 0; j < k; j++) c->unit_of_node[nodes[j]] = u;
    for (int j = 0; j < c->units[u].nblocks; j++) c->unit_of_block[c->units[u].blocks[j]] = u;
    c->units[u].escapes = c->is_output[c->units[u].node] != 0;
  }
  /* producers, through views */
  for (int u = 0; u < c->nunits; u++) {
    rg_unit *U = &c->units[u];
    memset(c->mark, 0, (size_t)c->nunits + 1);
    int k = unit_nodes(c, U, nodes);
    for (int j = 0; j < k; j++) {
      const tiny_node *n = &g->nodes[nodes[j]];
      int nsrc = is_view(g, nodes[j]) ? 1 : n->nsrc;
      for (int s = 0; s < nsrc; s++) {
        int bsrc = base_of(g, n->src[s].node);
        int v = bsrc >= 0 ? c->unit_of_node[bsrc] : -1;
        if (v >= 0 && v != u) c->mark[v] = 1;
      }
    }
    U->prod = list_of(c->arena, c->mark, c->nunits, &U->nprod);
    if (!U->prod) return ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
  }
  /* consumers: the producer lists inverted, ascending (v runs in order) */
  for (int u = 0; u < c->nunits; u++) c->units[u].ncons = 0;
  for (int v = 0; v < c->nunits; v++)
    for (int j = 0; j < c->units[v].nprod; j++) c->units[c->units[v].prod[j]].ncons++;
  for (int u = 0; u < c->nunits; u++) {
    c->units[u].cons = ut_arena_alloc(c->arena, sizeof(int) * ((size_t)c->units[u].ncons + 1));
    if (!c->units[u].cons) return ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
    c->units[u].ncons = 0;
  }
  for (int v = 0; v < c->nunits; v++)
    for (int j = 0; j < c->units[v].nprod; j++) {
      rg_unit *P = &c->units[c->units[v].prod[j]];
      P->cons[P->ncons++] = v;
    }
  return HARP_OK;
}

/* Does unit U read value t (through views)?  Another value of t's unit is
 * not enough: an attention's intermediates stay inside it although its
 * output is read. */
static bool unit_reads(const rg_ctx *c, const rg_unit *U, int t) {
  const tiny_graph *g = c->g;
  if (U->kind == RG_U_GATHER) {
    const tiny_node *n = &g->nodes[U->node];
    for (int s = 0; s < n->nsrc; s++)
      if (base_of(g, n->src[s].node) == t) return true;
    return false;
  }
  for (int i = 0; i < U->nblocks; i++) {
    const poly_block_info *b = poly_block(c->pv, U->blocks[i]);
    for (int k = 0; k < b->nnodes; k++) {
      const tiny_node *n = &g->nodes[b->nodes[k]];
      int nsrc = is_view(g, b->nodes[k]) ? 1 : n->nsrc;
      for (int s = 0; s < nsrc; s++)
        if (base_of(g, n->src[s].node) == t) return true;
    }
  }
  return false;
}

/* Mark node x with v (1: in the region, 2: an input value) and list it. */
static void rn_mark(rg_ctx *c, int x, char v) {
  if (!c->rn_mark[x]) c->rn_list[c->rn_n++] = x;
  c->rn_mark[x] = v;
}

void rg_region_nodes(rg_ctx *c, const int *blocks, int n, int gather, int *nnodes, int *nin, int *outs, int *nout) {
  const tiny_graph *g = c->g;
  /* clear the last call's marks: the work follows the region's size, not the graph's */
  for (int i = 0; i < c->rn_n; i++) c->rn_mark[c->rn_list[i]] = 0, c->rn_val[c->rn_list[i]] = 0;
  c->rn_n = 0;
  char *m = c->rn_mark, *val = c->rn_val; /* val: the values the region's blocks write */
  int sp = 0;
  for (int i = 0; i < n; i++) {
    const poly_block_info *b = poly_block(c->pv, blocks[i]);
    for (int k = 0; k < b->nnodes; k++) {
      rn_mark(c, b->nodes[k], 1);
      c->stack[sp++] = b->nodes[k];
    }
    val[b->node] = 1;
  }
  if (gather >= 0) {
    rn_mark(c, gather, 1);
    val[gather] = 1;
    c->stack[sp++] = gather;
  }
  while (sp) {
    int x = c->stack[--sp];
    const tiny_node *nd = &g->nodes[x];
    for (int k = 0; k < nd->nsrc; k++) {
      int s = nd->src[k].node;
      if (s < 0 || m[s]) continue;
      if (is_view(g, s) || g->nodes[s].op == TINY_CONST) {
        rn_mark(c, s, 1);
        c->stack[sp++] = s;
      } else {
        rn_mark(c, s, 2);
      }
    }
  }
  qsort(c->rn_list, (size_t)c->rn_n, sizeof(int), cmp_int);
  int nn = 0, ni = 0;
  for (int k = 0; k < c->rn_n; k++) nn += m[c->rn_list[k]] == 1, ni += m[c->rn_list[k]] == 2;
  /* values read from outside the region's nodes, or model outputs */
  int no = 0;
  for (int k = 0; k < c->rn_n; k++) {
    int i = c->rn_list[k];
    if (!val[i]) continue;
    bool out = c->is_output[i];
    int ui = c->unit_of_node[i];
    for (int q = 0; ui >= 0 && q < c->units[ui].ncons && !out; q++) {
      /* a reader outside: a unit (one that reads i's unit at all) with a node not in the region that reads i */
      const rg_unit *U = &c->units[c->units[ui].cons[q]];
      bool inside = false;
      for (int j = 0; j < U->nblocks && !inside; j++) inside = rg_in(blocks, n, U->blocks[j]);
      if (inside || (U->kind == RG_U_GATHER && U->node == gather)) continue;
      out = unit_reads(c, U, i);
    }
    if (out) outs[no++] = i;
  }
  *nnodes = nn;
  *nin = ni;
  *nout = no;
}
