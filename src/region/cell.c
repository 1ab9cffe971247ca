/* cell.c — recurrent cells (shape D, "cell"): a GEMV of a small state whose
 * output is read, a column block at a time, by elementwise gate math on
 * [M, H], run as one kernel: the recurrent gate GEMM with the gate math in
 * its epilogue.  One per time step of an unrolled LSTM, GRU or RNN
 * (src/frontend/onnx_rnn.c), or of a cell written out by hand (Gemm,
 * Split, Sigmoid, Tanh, Mul, Add).
 * Needs: Poly-View (blocks, edges, strides), the selection's choice.
 * Gives: rg_cells (merge each cell's regions into one), rg_cell_of_set.
 *
 * A cell is found from a contraction K: S[m, n] = sum_k A[m, k] B[k, n]
 * (one m, one n and one reduced variable, no batch, M <= RG_CELL_MAX_M
 * rows), every reader of S an ewise block on one domain [M, H] that reads
 * S[m, c + j] (a column block).  Its gate math is every ewise block of that
 * domain whose latest contraction ancestor ("owner", by block order) is K:
 * what runs between K and the next step's contractions.  A contraction read
 * only by the gate math (the step's input projection x Wᵀ when it is not
 * one GEMM up front) joins the cell.  The cell is refused when a block that
 * depends on K outside it feeds its gate math (it would not be convex), or
 * when the selection put one of its blocks in a region with others; then
 * the selection's regions stay.  Otherwise the regions holding its blocks
 * become one region, with several outputs (h, and c for an LSTM), and the
 * regions are ordered again (a topological order of the region graph, the
 * selection's order kept where it can be). */
#include <stdlib.h>
#include <string.h>

#include "region/rg_int.h"

#define MAX_TAIL (RG_MAX_SET - RG_CELL_MAX_CON)

/* Producer and consumer blocks of every block (from the Poly-View's edges). */
typedef struct adj {
  int *pstart, *plist, *cstart, *clist;
  int *ostart, *olist; /* the blocks each contraction owns, ascending */
} adj;

static void adj_free(adj *a) {
  free(a->pstart), free(a->plist), free(a->cstart), free(a->clist), free(a->ostart), free(a->olist);
}

/* The blocks of each owner, bucketed (counting sort: ascending within a bucket). */
static harp_status owned_lists(rg_ctx *c, adj *a, const int *owner, int nb) {
  a->ostart = ut_xcalloc((size_t)nb + 2, sizeof(int));
  a->olist = ut_xmalloc(sizeof(int) * ((size_t)nb + 1));
  int *fill = ut_xmalloc(sizeof(int) * ((size_t)nb + 1));
  if (!a->ostart || !a->olist || !fill) {
    free(fill);
    return ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
  }
  for (int b = 0; b < nb; b++)
    if (owner[b] >= 0) a->ostart[owner[b] + 1]++;
  for (int b = 0; b < nb; b++) a->ostart[b + 1] += a->ostart[b];
  memcpy(fill, a->ostart, sizeof(int) * (size_t)nb);
  for (int b = 0; b < nb; b++)
    if (owner[b] >= 0) a->olist[fill[owner[b]]++] = b;
  free(fill);
  return HARP_OK;
}

static harp_status adj_build(rg_ctx *c, adj *a) {
  int nb = poly_nblocks(c->pv), ne = poly_nedges(c->pv);
  a->pstart = ut_xcalloc((size_t)nb + 2, sizeof(int));
  a->cstart = ut_xcalloc((size_t)nb + 2, sizeof(int));
  a->plist = ut_xmalloc(sizeof(int) * ((size_t)ne + 1));
  a->clist = ut_xmalloc(sizeof(int) * ((size_t)ne + 1));
  if (!a->pstart || !a->cstart || !a->plist || !a->clist) return ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
  for (int k = 0; k < ne; k++) {
    const poly_edge_info *e = poly_edge(c->pv, k);
    if (e->from == e->to) continue;
    a->pstart[e->to + 1]++, a->cstart[e->from + 1]++;
  }
  for (int b = 0; b < nb; b++) a->pstart[b + 1] += a->pstart[b], a->cstart[b + 1] += a->cstart[b];
  int *pf = ut_xmalloc(sizeof(int) * ((size_t)nb + 1)), *cf = ut_xmalloc(sizeof(int) * ((size_t)nb + 1));
  if (!pf || !cf) {
    free(pf), free(cf);
    return ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
  }
  memcpy(pf, a->pstart, sizeof(int) * (size_t)nb);
  memcpy(cf, a->cstart, sizeof(int) * (size_t)nb);
  for (int k = 0; k < ne; k++) {
    const poly_edge_info *e = poly_edge(c->pv, k);
    if (e->from == e->to) continue;
    a->plist[pf[e->to]++] = e->from;
    a->clist[cf[e->from]++] = e->to;
  }
  free(pf), free(cf);
  return HARP_OK;
}

/* Block K is a contraction a cell can run: its rows M and columns N. */
static bool gemv_of(rg_ctx *c, int K, int64_t *M, int64_t *N) {
  const poly_block_info *b = poly_block(c->pv, K);
  const poly_contraction *k = b->con;
  if (b->kind != POLY_CONTRACTION || !k || k->pattern != POLY_PAT_MATMUL || b->nout != 2 || k->nbatch || k->nm > 1 ||
      (k->nm == 1 && k->m[0] != 0) || k->nn != 1 || k->n[0] != 1)
    return false;
  int64_t lo[POLY_MAX_VARS], hi[POLY_MAX_VARS];
  if (!poly_block_ranges(c->pv, K, lo, hi)) return false;
  int red = 0; /* reduced variables that move (a size-1 one is how a [M, K] operand may be read) */
  for (int v = 2; v < b->nvars; v++) red += hi[v] > lo[v];
  if (red > 1) return false;
  *M = hi[0] - lo[0] + 1, *N = hi[1] - lo[1] + 1;
  return lo[0] == 0 && lo[1] == 0 && *M >= 1 && *M <= RG_CELL_MAX_M && tiny_dtype_is_float(c->g->nodes[b->node].dtype);
}

/* Block b is ewise over [M, H] (2 variables from 0). */
static bool on_domain(rg_ctx *c, int b, int64_t M, int64_t H) {
  const poly_block_info *p = poly_block(c->pv, b);
  int64_t lo[POLY_MAX_VARS], hi[POLY_MAX_VARS];
  if (p->kind != POLY_EWISE || p->nvars != 2 || !poly_block_ranges(c->pv, b, lo, hi)) return false;
  return lo[0] == 0 && lo[1] == 0 && hi[0] + 1 == M && hi[1] + 1 == H;
}

/* Every read of contraction K's output [M, N] by block b is S[m, c + j], c + H <= N. */
static bool reads_columns(rg_ctx *c, int b, int K, int64_t N, int64_t H) {
  const poly_block_info *p = poly_block(c->pv, b);
  int t = poly_block(c->pv, K)->node;
  for (int a = 0; a < p->naccess; a++) {
    if (p->access[a].write || p->access[a].tensor != t) continue;
    int64_t st[POLY_MAX_VARS], off;
    bool aff = false;
    if (poly_access_strides(c->e, c->pv, b, a, st, &off, &aff) || !aff) return false;
    if (st[1] != 1 || off < 0 || off + H > N) return false;
  }
  return true;
}

static bool has(const int *set, int n, int x) { return rg_in(set, n, x); }

/* The cell of contraction K, into cl (blocks sorted): false when there is none. */
static bool find_cell(rg_ctx *c, const adj *a, const int *owner, int K, int *blocks, int *n, rg_cell *cl) {
  int64_t M, N, H = -1;
  if (!gemv_of(c, K, &M, &N) || a->cstart[K] == a->cstart[K + 1]) return false;
  for (int i = a->cstart[K]; i < a->cstart[K + 1]; i++) { /* the readers of S fix the domain */
    int r = a->clist[i];
    int64_t lo[POLY_MAX_VARS], hi[POLY_MAX_VARS];
    if (poly_block(c->pv, r)->kind != POLY_EWISE || !poly_block_ranges(c->pv, r, lo, hi) || poly_block(c->pv, r)->nvars != 2)
      return false;
    if (H < 0) H = hi[1] + 1;
    if (!on_domain(c, r, M, H) || owner[r] != K) return false;
  }
  int nt = 0;
  blocks[nt++] = K;
  for (int i = a->ostart[K]; i < a->ostart[K + 1]; i++) /* ascending: a topological order */
    if (a->olist[i] != K && on_domain(c, a->olist[i], M, H)) {
      if (nt == MAX_TAIL) return false;
      blocks[nt++] = a->olist[i];
    }
  memset(cl, 0, sizeof *cl);
  cl->ncon = 1, cl->con[0] = K, cl->M = M, cl->H = H;
  /* what feeds the gate math: S, itself, blocks not depending on K, or a GEMV read by it alone */
  for (int i = 1; i < nt; i++) {
    int b = blocks[i];
    if (!reads_columns(c, b, K, N, H)) return false;
    for (int q = a->pstart[b]; q < a->pstart[b + 1]; q++) {
      int p = a->plist[q];
      if (p == K || has(blocks, nt, p) || has(cl->con, cl->ncon, p)) continue;
      if (owner[p] == K) return false; /* depends on K, outside: not convex */
      int64_t M2, N2;
      bool only = a->cstart[p] < a->cstart[p + 1];
      for (int r = a->cstart[p]; r < a->cstart[p + 1] && only; r++) only = has(blocks, nt, a->clist[r]);
      if (only && cl->ncon < RG_CELL_MAX_CON && gemv_of(c, p, &M2, &N2) && M2 == M && !c->is_output[poly_block(c->pv, p)->node]) {
        bool cols = true;
        for (int r = a->cstart[p]; r < a->cstart[p + 1] && cols; r++) cols = reads_columns(c, a->clist[r], p, N2, H);
        if (cols) cl->con[cl->ncon++] = p;
      }
    }
  }
  if (nt < 2 || c->is_output[poly_block(c->pv, K)->node]) return false;
  /* copies of gate math values (a model output that is a view keeping the order): stores of the cell */
  for (int i = 1, tail = nt; i < tail; i++)
    for (int q = a->cstart[blocks[i]]; q < a->cstart[blocks[i] + 1] && nt < MAX_TAIL; q++) {
      int r = a->clist[q];
      const poly_block_info *rb = poly_block(c->pv, r);
      bool pw = false;
      if (rb->kind != POLY_MOVEMENT_AFFINE || rb->naccess != 2 || a->pstart[r + 1] - a->pstart[r] != 1 || has(blocks, nt, r))
        continue;
      if (poly_access_is_pointwise(c->e, c->pv, r, 0, &pw) || !pw) continue;
      if (tiny_shape_numel(&c->g->nodes[rb->node].shape) == M * H) blocks[nt++] = r;
    }
  for (int i = 1; i < cl->ncon; i++) blocks[nt++] = cl->con[i];
  for (int i = 1; i < nt; i++) /* sorted (insertion: the extra contractions come first) */
    for (int j = i; j > 0 && blocks[j] < blocks[j - 1]; j--) {
      int t = blocks[j];
      blocks[j] = blocks[j - 1], blocks[j - 1] = t;
    }
  *n = nt;
  return true;
}

int rg_cell_of_set(const rg_ctx *c, const int *blocks, int n) {
  for (int k = 0; k < c->ncells; k++)
    if (c->cell_n[k] == n && !memcmp(c->cell_blocks[k], blocks, sizeof(int) * (size_t)n)) return k;
  return -1;
}

/* The node a cell's unit sits at: its last block's, the copies of outputs
 * aside (nothing reads them). */
int rg_cell_node(const rg_ctx *c, int k) {
  int last = -1;
  for (int i = 0; i < c->cell_n[k]; i++) {
    const poly_block_info *b = poly_block(c->pv, c->cell_blocks[k][i]);
    if (b->kind != POLY_MOVEMENT_AFFINE && b->node > last) last = b->node;
  }
  return last;
}

/* Drop the cells a reader outside would precede: a cell is a unit at
 * rg_cell_node, and units are taken in node order.  pos[b]: where block
 * b's unit sits (scratch, one per block). */
static void keep_ordered(rg_ctx *c, const adj *a, int *pos) {
  int nb = poly_nblocks(c->pv);
  for (bool again = true; again;) {
    again = false;
    for (int b = 0; b < nb; b++) pos[b] = poly_block(c->pv, b)->node;
    for (int k = 0; k < c->ncells; k++) {
      int at = rg_cell_node(c, k);
      for (int i = 0; i < c->cell_n[k]; i++) pos[c->cell_blocks[k][i]] = at;
    }
    for (int k = 0; k < c->ncells; k++) {
      int at = rg_cell_node(c, k);
      bool ok = true;
      for (int i = 0; i < c->cell_n[k] && ok; i++)
        for (int q = a->cstart[c->cell_blocks[k][i]]; q < a->cstart[c->cell_blocks[k][i] + 1] && ok; q++)
          ok = pos[a->clist[q]] >= at;
      if (ok) continue;
      c->ncells--;
      c->cell_blocks[k] = c->cell_blocks[c->ncells], c->cell_n[k] = c->cell_n[c->ncells], c->cells[k] = c->cells[c->ncells];
      k--, again = true;
    }
  }
}

/* Register cell cl of blocks[0 .. n) in c. */
static harp_status add_cell(rg_ctx *c, const int *blocks, int n, const rg_cell *cl) {
  if (c->ncells == c->capcells) {
    int cap = c->capcells ? 2 * c->capcells : 16;
    int **cb = ut_arena_alloc(c->arena, sizeof(int *) * (size_t)cap), *cn = ut_arena_alloc(c->arena, sizeof(int) * (size_t)cap);
    rg_cell *cc = ut_arena_alloc(c->arena, sizeof(rg_cell) * (size_t)cap);
    if (!cb || !cn || !cc) return ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
    if (c->ncells) {
      memcpy(cb, c->cell_blocks, sizeof(int *) * (size_t)c->ncells);
      memcpy(cn, c->cell_n, sizeof(int) * (size_t)c->ncells);
      memcpy(cc, c->cells, sizeof(rg_cell) * (size_t)c->ncells);
    }
    c->cell_blocks = cb, c->cell_n = cn, c->cells = cc, c->capcells = cap;
  }
  int *copy = ut_arena_alloc(c->arena, sizeof(int) * (size_t)n);
  if (!copy) return ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
  memcpy(copy, blocks, sizeof(int) * (size_t)n);
  c->cell_blocks[c->ncells] = copy, c->cell_n[c->ncells] = n, c->cells[c->ncells++] = *cl;
  return HARP_OK;
}

/* owner[b]: the latest contraction block b depends on (itself for a
 * contraction); then a block whose readers all belong to one later cell's
 * gate math moves there (an LSTM's peephole p ⊙ c_{t-1} is step t's),
 * unless it reads a GEMV's output (that stays with the GEMV). */
static void owners(rg_ctx *c, const adj *a, int *owner, int nb) {
  for (int b = 0; b < nb; b++) {
    owner[b] = -1;
    if (poly_block(c->pv, b)->kind == POLY_CONTRACTION) owner[b] = b;
    else
      for (int q = a->pstart[b]; q < a->pstart[b + 1]; q++)
        if (owner[a->plist[q]] > owner[b]) owner[b] = owner[a->plist[q]];
  }
  for (int b = nb - 1; b >= 0; b--) {
    const poly_block_info *pb = poly_block(c->pv, b);
    int64_t lo[POLY_MAX_VARS], hi[POLY_MAX_VARS];
    if (pb->kind != POLY_EWISE || pb->nvars != 2 || a->cstart[b] == a->cstart[b + 1] || !poly_block_ranges(c->pv, b, lo, hi))
      continue;
    bool from_con = false;
    for (int q = a->pstart[b]; q < a->pstart[b + 1]; q++) from_con |= poly_block(c->pv, a->plist[q])->kind == POLY_CONTRACTION;
    int o = -2;
    for (int q = a->cstart[b]; q < a->cstart[b + 1] && o != -1 && !from_con; q++) {
      int r = a->clist[q];
      int ro = poly_block(c->pv, r)->kind == POLY_CONTRACTION || !on_domain(c, r, hi[0] + 1, hi[1] + 1) ? -1 : owner[r];
      o = o == -2 || o == ro ? ro : -1;
    }
    if (!from_con && o > owner[b]) owner[b] = o;
  }
}

harp_status rg_find_cells(rg_ctx *c, const char *claimed) {
  int nb = poly_nblocks(c->pv);
  adj a = {0};
  int *owner = ut_xmalloc(sizeof(int) * ((size_t)nb + 1)), *blocks = ut_xmalloc(sizeof(int) * (RG_MAX_SET + 1));
  harp_status st = !owner || !blocks ? ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory") : adj_build(c, &a);
  if (!st) owners(c, &a, owner, nb);
  if (!st) st = owned_lists(c, &a, owner, nb);
  for (int K = 0; K < nb && !st; K++) {
    int n, bad;
    rg_cell cl;
    if (poly_block(c->pv, K)->kind != POLY_CONTRACTION || claimed[K] || !find_cell(c, &a, owner, K, blocks, &n, &cl)) continue;
    bool free_ = true;
    for (int i = 0; i < n; i++) free_ &= !claimed[blocks[i]];
    /* a GEMM whose epilogue a contraction template takes is shape A, not a cell */
    int64_t M, N;
    bool plain = cl.ncon == 1 && gemv_of(c, K, &M, &N) && cl.H == N && rg_epilogue_template(c, blocks, n, K, &bad);
    if (!free_ || plain) continue;
    st = add_cell(c, blocks, n, &cl);
  }
  if (!st) keep_ordered(c, &a, owner); /* owner's memory reused */
  adj_free(&a);
  free(owner), free(blocks);
  return st;
}
