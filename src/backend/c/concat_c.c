/* concat_c.c — a region that only concatenates, as copies.
 * Needs: the Tiny graph, the Function.  Gives: cc_try_concat.
 *
 * The frontend lowers a concatenation to pieces padded with zeros into
 * their boxes of the output and summed (lower.c).  A region whose every
 * block is such a sum (fp32 ADDs of PADs of 0, nested: a concatenation of
 * concatenations) writes each piece into its box: one copy of a contiguous
 * run per piece (times the rows of one outer axis), each element + 0.0f as
 * the reference's sum gives it (-0 becomes +0).  The boxes must not
 * overlap; the output is 0 where none goes.  A concatenation split over regions (one takes at most
 * RG_MAX_SET blocks) reads the sum of the pieces before it whole: copied
 * first (it is 0 off its own pieces), then this region's pieces.  Taken
 * for more pieces than the map template cuts slabs
 * (CT_MAP_MAX_PIECES): the generic loop nest of such a region evaluates
 * every piece's guard at every point, so its time and its code grow with
 * the square of the pieces (the Y of an unrolled RNN: one piece per step). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "kernel/contract.h"
#include "cell_c.h"
#include "harp/region.h"

#define CONCAT_MAX_PIECES 8192

typedef struct box {
  int node;    /* the piece (a buffer of the kernel) */
  bool inner;  /* a piece of the partial sum the region reads (copied with it) */
  int64_t lo[TINY_MAX_RANK], ext[TINY_MAX_RANK];
} box;

typedef struct walk {
  const rc_ctx *c;
  const rg_region *R;
  box *b;
  int n;
  int partial; /* a sum of pieces another region wrote (a concatenation split over regions), or -1 */
  bool ok;
  bool zero;   /* the pieces leave some of the output: it is 0 there */
} walk;

static bool in_region(const rg_region *R, int node) {
  for (int i = 0; i < R->nnodes; i++)
    if (R->nodes[i] == node) return true;
  return false;
}

/* The pieces under node x, whose box in the output starts at lo. */
static void pieces(walk *w, int x, const int64_t *lo, int depth, bool inner) {
  const tiny_graph *g = w->c->g;
  const tiny_node *n = &g->nodes[x];
  if (!w->ok) return;
  if (depth > 64 + CONCAT_MAX_PIECES) { w->ok = false; return; }
  if (n->op == TINY_ADD && n->dtype == TINY_FP32) {
    if (!in_region(w->R, x) && !inner) { /* the partial sum: read whole, its pieces only checked */
      if (w->partial >= 0 || depth == 0) { w->ok = false; return; }
      w->partial = x;
      inner = true;
    }
    for (int k = 0; k < 2; k++) pieces(w, n->src[k].node, lo, depth + 1, inner);
    return;
  }
  if (n->op == TINY_PAD && n->a.pad.value == 0) {
    int64_t l2[TINY_MAX_RANK];
    for (int a = 0; a < n->shape.rank; a++) {
      if (n->a.pad.lo[a].n < 0) { w->ok = false; return; }
      l2[a] = lo[a] + n->a.pad.lo[a].n;
    }
    pieces(w, n->src[0].node, l2, depth + 1, inner);
    return;
  }
  /* a piece: a buffer, or reshapes of one (a reshape keeps the order) */
  int base = x;
  while (g->nodes[base].op == TINY_RESHAPE) base = g->nodes[base].src[0].node;
  if (w->n == CONCAT_MAX_PIECES || g->nodes[base].dtype != TINY_FP32 || tiny_op_class(g->nodes[base].op) == TC_MOVE) {
    w->ok = false;
    return;
  }
  box *b = &w->b[w->n++];
  b->node = base;
  b->inner = inner;
  for (int a = 0; a < n->shape.rank; a++) b->lo[a] = lo[a], b->ext[a] = n->shape.d[a].n;
}

/* Box b of y (dims d, rank r) as rows of one contiguous run: the run's
 * length, the rows and their stride in y (rows of one outer axis at most). */
static bool runs(const box *b, const int64_t *d, int r, int64_t *run, int64_t *rows, int64_t *rstride, int64_t *start) {
  int64_t st[TINY_MAX_RANK], x = 1;
  for (int a = r - 1; a >= 0; a--) st[a] = x, x *= d[a];
  int k = r - 1;
  while (k > 0 && b->ext[k] == d[k]) k--; /* full trailing axes */
  *run = b->ext[k] * st[k];
  *rows = 1, *rstride = 0, *start = 0;
  for (int a = 0; a < r; a++) *start += b->lo[a] * st[a];
  for (int a = 0; a < k; a++)
    if (b->ext[a] > 1) {
      if (*rows > 1) return false;
      *rows = b->ext[a], *rstride = st[a];
    }
  return true;
}

static bool overlap(const box *x, const box *y, int r) {
  for (int a = 0; a < r; a++)
    if (x->lo[a] + x->ext[a] <= y->lo[a] || y->lo[a] + y->ext[a] <= x->lo[a]) return false;
  return true;
}

/* The pieces of region r (a tiling of its one output), or false. */
static bool read_concat(const rc_ctx *c, int r, walk *w, int64_t *d, int *rank, const char **why) {
  const fn_kernel *K = &c->f->kernels[r];
  const rg_region *R = &c->f->part->regions[K->region];
  const tiny_graph *g = c->g;
  if (R->nout != 1 || !R->nblocks) return *why = NULL, false;
  int y = R->out_values[0];
  const tiny_node *yn = &g->nodes[y];
  if (yn->op != TINY_ADD || yn->dtype != TINY_FP32) return *why = NULL, false;
  for (int i = 0; i < R->nnodes; i++) {
    const tiny_node *n = &g->nodes[R->nodes[i]];
    if (tiny_op_class(n->op) != TC_MOVE && n->op != TINY_ADD && n->op != TINY_CONST) return *why = NULL, false;
  }
  int64_t lo[TINY_MAX_RANK] = {0};
  *rank = yn->shape.rank;
  int64_t total = 1;
  for (int a = 0; a < *rank; a++) d[a] = yn->shape.d[a].n, total *= d[a];
  w->c = c, w->R = R, w->n = 0, w->ok = true, w->partial = -1;
  pieces(w, y, lo, 0, false);
  if (!w->ok) return *why = "concat: not a sum of padded fp32 pieces", false;
  if (w->n <= CT_MAP_MAX_PIECES) return *why = NULL, false; /* the map template's slabs */
  if (w->partial >= 0 && (ct_slot_of(K, c->f, w->partial) < 0 || !tiny_shape_equal(&g->nodes[w->partial].shape, &yn->shape)))
    return *why = "concat: the partial sum is no buffer of the output's shape", false;
  int64_t vol = 0;
  for (int i = 0; i < w->n; i++) {
    int64_t v = 1, run, rows, rs, start;
    for (int a = 0; a < *rank; a++) v *= w->b[i].ext[a];
    vol += v;
    if (w->b[i].inner) continue;
    if (ct_slot_of(K, c->f, w->b[i].node) < 0 || !runs(&w->b[i], d, *rank, &run, &rows, &rs, &start))
      return *why = "concat: a piece is no buffer, or no rows of one run", false;
  }
  if (vol > total) return *why = "concat: the pieces cover more than the output", false;
  w->zero = vol < total; /* a partial sum: 0 off its pieces */
  for (int i = 0; i < w->n; i++)
    for (int j = i + 1; j < w->n; j++)
      if (overlap(&w->b[i], &w->b[j], *rank)) return *why = "concat: pieces overlap", false;
  return true;
}

harp_status cc_try_concat(rc_ctx *c, int r, const char *fn, ut_str *out, bool *handled, const char **why) {
  *handled = false;
  walk w = {0};
  w.b = malloc(sizeof(box) * CONCAT_MAX_PIECES);
  if (!w.b) return ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
  int64_t d[TINY_MAX_RANK];
  int rank;
  if (!read_concat(c, r, &w, d, &rank, why)) {
    free(w.b);
    return HARP_OK;
  }
  const fn_kernel *K = &c->f->kernels[r];
  const rg_region *R = &c->f->part->regions[K->region];
  int own = 0;
  for (int i = 0; i < w.n; i++) own += !w.b[i].inner;
  int64_t total = 1;
  for (int a = 0; a < rank; a++) total *= d[a];
  ut_str_printf(out, "/* concatenation of %d pieces: one copy each */\nstatic int %s(hprt_pool *pool, void *const *bufs) {\n  (void)pool;\n",
                own, fn);
  ut_str_printf(out, "  float *y = (float *)bufs[%d];\n", ct_slot_of(K, c->f, R->out_values[0]));
  if (w.partial >= 0) /* the partial sum is 0 off its pieces: copied whole, then ours into its zeros */
    ut_str_printf(out, "  { const float *s = (const float *)bufs[%d];\n#pragma omp simd\n    for (long q = 0; q < %" PRId64 "L; q++) y[q] = s[q] + 0.0f; }\n",
                  ct_slot_of(K, c->f, w.partial), total);
  else if (w.zero) /* a partial sum itself: 0 where no piece goes */
    ut_str_printf(out, "  memset(y, 0, %" PRId64 " * sizeof(float));\n", total);
  ut_str_printf(out, "  const float *const src[%d] = {", own);
  for (int i = 0; i < w.n; i++)
    if (!w.b[i].inner) ut_str_printf(out, "bufs[%d], ", ct_slot_of(K, c->f, w.b[i].node));
  ut_str_printf(out, "};\n  static const long at[%d][4] = { /* start, run, rows, row stride */\n", own);
  for (int i = 0; i < w.n; i++) {
    int64_t run, rows, rs, start;
    if (w.b[i].inner) continue;
    runs(&w.b[i], d, rank, &run, &rows, &rs, &start);
    ut_str_printf(out, "    {%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64 "},\n", start, run, rows, rs);
  }
  ut_str_printf(out,
                "  };\n  for (int i = 0; i < %d; i++)\n    for (long o = 0; o < at[i][2]; o++) {\n"
                "      const float *s = src[i] + o * at[i][1];\n      float *t = y + at[i][0] + o * at[i][3];\n"
                "#pragma omp simd\n      for (long q = 0; q < at[i][1]; q++) t[q] = s[q] + 0.0f;\n    }\n  return 0;\n}\n\n",
                own);
  free(w.b);
  *handled = true;
  return out->oom ? ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory") : HARP_OK;
}
