/* contract_cut.c — a map's pieces' extents and starts as sizes of the graph.
 * Needs: the Tiny graph (shapes: sizes with the symbols they equal; PAD's
 * amounts), the region's blocks (contract_map.c's ct_region_block).
 * Gives: ct_cut_sizes, ct_cut_origins, ct_size_same (contract.h).
 *
 * ct_map_cuts finds where a region's output is cut into slabs (the pieces)
 * as numbers at the binding.  A ShapeSet object prints each piece's row
 * length and y offset as an expression of the symbols where it can
 * (contract_rows_c.c), and the dims of y or of an input give them only
 * where the piece spans such a dim; a piece of a concat along a symbolic
 * axis (a fill of w beside one of w + 1) spans none.  Its bounds are the
 * PADs' the concat lowers to: following y's cut axis back through the
 * region's elementwise ops and views (a reshape where it keeps the axis
 * whole: a nearest upsample's), each PAD along it bounds its input's
 * real elements at off + lo and off + lo + n (off: where the PAD's output
 * starts in y, lo its low amount, n its input's size), each a sum of
 * sizes that name their symbols.  A cut that is such a bound takes its
 * sum; a piece's extent is the difference of its two cuts.  The same walk
 * says where a tensor of the region is reached along the cut axis (its
 * axis, and the offset in y where its index 0 lies: a PAD's input at the
 * PAD's low amount, an addend of y at 0), so a ShapeSet object can read it
 * at the run-time position (ct_cut_origins, contract_gmap.c). */
#include <string.h>

#include "kernel/contract.h"
#include "harp/polycore.h"
#include "harp/region.h"

#define MAX_BOUNDS 32
#define MAX_DEPTH 24
#define MAX_REACH 8 /* ct_cut_origins: the arrivals at a node kept */
#define MAX_VISITS 512 /* a region reading a value twice at every step: no exponential walk */

typedef struct bound {
  int64_t v; /* the bound's value at this binding */
  ct_size e;
} bound;

typedef struct cut_walk {
  const ct_src *s;
  const rg_region *R;
  bound b[MAX_BOUNDS];
  int nb, visits;
  int want;   /* ct_cut_origins: the node whose arrivals are kept (-1: none) */
  int nreach; /* its arrivals: the axis, where its index 0 lies in y */
  int raxis[MAX_REACH];
  ct_size roff[MAX_REACH];
  bool lost; /* the walk was cut short, or an arrival not kept */
} cut_walk;

/* The value of a PAD amount d: its number, or the size of a dim of g that
 * equals its symbol; false when none does. */
static bool dim_value(const tiny_graph *g, tiny_dim d, tiny_dim *out) {
  if (!d.sym) {
    *out = d;
    return d.n >= 0;
  }
  for (int k = 0; k < g->n; k++)
    for (int a = 0; a < g->nodes[k].shape.rank; a++)
      if (g->nodes[k].shape.d[a].sym && !strcmp(g->nodes[k].shape.d[a].sym, d.sym) && g->nodes[k].shape.d[a].n >= 0) {
        *out = g->nodes[k].shape.d[a];
        return true;
      }
  return false;
}

/* The coefficient of symbol sym in a (0: none). */
static int64_t size_coef(const ct_size *a, const char *sym) {
  int64_t c = 0;
  for (int i = 0; i < a->nterm; i++) c += strcmp(a->term[i], sym) ? 0 : a->coef[i];
  return c;
}

bool ct_size_same(const ct_size *a, const ct_size *b) {
  if (a->lit != b->lit) return false;
  for (int i = 0; i < a->nterm; i++)
    if (size_coef(a, a->term[i]) != size_coef(b, a->term[i])) return false;
  for (int i = 0; i < b->nterm; i++)
    if (size_coef(a, b->term[i]) != size_coef(b, b->term[i])) return false;
  return true;
}

/* a + coef * d into *out (terms merged by symbol, constants summed); false when too many terms */
static bool size_add(const ct_size *a, int64_t coef, tiny_dim d, ct_size *out) {
  ct_size r = *a;
  r.value += coef * d.n;
  if (!d.sym) {
    r.lit += coef * d.n;
    *out = r;
    return true;
  }
  int i = 0;
  while (i < r.nterm && strcmp(r.term[i], d.sym)) i++;
  if (i == r.nterm) {
    if (r.nterm == CT_SIZE_MAX_TERMS) return false;
    r.term[r.nterm] = d.sym, r.tval[r.nterm] = d.n, r.coef[r.nterm++] = 0;
  }
  r.coef[i] += coef;
  *out = r;
  return true;
}

/* a - b into *out */
static bool size_sub(const ct_size *a, const ct_size *b, ct_size *out) {
  ct_size r = *a;
  if (!size_add(&r, -1, tiny_dim_int(b->lit), &r)) return false;
  for (int i = 0; i < b->nterm; i++)
    if (!size_add(&r, -b->coef[i], (tiny_dim){b->tval[i], b->term[i]}, &r)) return false;
  *out = r;
  return true;
}

/* e as the bound of its value: the first found stands, unless it names no
 * symbol and e does (y's own extent, a constant here, is a sum of the
 * pieces' sizes) */
static void add_bound(cut_walk *w, const ct_size *e) {
  for (int i = 0; i < w->nb; i++)
    if (w->b[i].v == e->value) {
      if (!w->b[i].e.nterm && e->nterm) w->b[i].e = *e;
      return;
    }
  if (w->nb < MAX_BOUNDS) w->b[w->nb++] = (bound){e->value, *e};
}

/* The axis of reshape input `in` that axis `axis` of its output `out` is:
 * as long, with as many elements before it (the dims before each have the
 * same product), so an index along one is the same along the other; -1
 * when none is (the reshape splits or merges it). */
static int reshape_axis(const tiny_shape *out, const tiny_shape *in, int axis) {
  int64_t before = 1, at = 1;
  for (int d = 0; d < axis; d++) before *= out->d[d].n;
  for (int a = 0; a < in->rank && at <= before; at *= in->d[a].n, a++)
    if (at == before && in->d[a].n == out->d[axis].n) return a;
  return -1;
}

/* Axis `axis` of node (starting at off in y's cut axis) followed back to
 * the region's inputs: every PAD along it adds its two bounds. */
static void walk(cut_walk *w, int node, int axis, const ct_size *off, int depth) {
  const tiny_graph *g = w->s->g;
  const tiny_node *n = &g->nodes[node];
  if (depth > MAX_DEPTH || ++w->visits > MAX_VISITS) {
    w->lost = true;
    return;
  }
  if (axis < 0 || axis >= n->shape.rank) return;
  if (node == w->want) { /* an arrival: kept once per axis and offset */
    int i = 0;
    while (i < w->nreach && !(w->raxis[i] == axis && ct_size_same(&w->roff[i], off))) i++;
    if (i == w->nreach && w->nreach < MAX_REACH) w->raxis[w->nreach] = axis, w->roff[w->nreach++] = *off;
    else if (i == w->nreach) w->lost = true;
  }
  bool in_region = ct_region_block(w->s, w->R, node) >= 0;
  tiny_class cl = tiny_op_class(n->op);
  if (n->op == TINY_PAD && n->a.pad.n == n->shape.rank && n->nsrc == 1 && n->src[0].node >= 0) {
    tiny_dim lo, sz = g->nodes[n->src[0].node].shape.d[axis];
    ct_size start, end;
    if (!dim_value(g, n->a.pad.lo[axis], &lo) || !size_add(off, 1, lo, &start) || !size_add(&start, 1, sz, &end)) return;
    add_bound(w, &start);
    add_bound(w, &end);
    walk(w, n->src[0].node, axis, &start, depth + 1);
    return;
  }
  if (n->op == TINY_PERMUTE && n->nsrc == 1 && n->src[0].node >= 0 && axis < n->a.permute.n) {
    walk(w, n->src[0].node, n->a.permute.perm[axis], off, depth + 1);
    return;
  }
  if (n->op == TINY_RESHAPE && n->nsrc == 1 && n->src[0].node >= 0) { /* one that names sizes, or keeps the axis whole */
    walk(w, n->src[0].node, reshape_axis(&n->shape, &g->nodes[n->src[0].node].shape, axis), off, depth + 1);
    return;
  }
  bool follow = (in_region && cl != TC_MOVE) || (n->op == TINY_EXPAND && !n->a.expand.has_bd);
  for (int q = 0; follow && q < n->nsrc; q++) { /* point for point along the axis, right-aligned (broadcast) */
    int src = n->src[q].node;
    if (src < 0) continue;
    const tiny_shape *ss = &g->nodes[src].shape;
    int sa = axis - (n->shape.rank - ss->rank);
    if (sa >= 0 && ss->d[sa].n == n->shape.d[axis].n) walk(w, src, sa, off, depth + 1);
  }
}

bool ct_cut_sizes(const ct_src *s, const rg_region *R, int var, const int64_t *cut, int ncut, ct_size *lo, ct_size *len) {
  const poly_block_info *last = poly_block(s->pv, R->blocks[R->nblocks - 1]);
  const tiny_shape *ys = &s->g->nodes[last->node].shape;
  if (var < 0 || var >= ys->rank || last->nvars != ys->rank || ncut < 2 || ncut > CT_MAP_MAX_PIECES + 1) return false;
  cut_walk w = {.s = s, .R = R, .want = -1};
  ct_size zero = {0}, full;
  if (!size_add(&zero, 1, ys->d[var], &full)) return false;
  add_bound(&w, &zero);
  add_bound(&w, &full);
  walk(&w, last->node, var, &zero, 0);
  const ct_size *at[CT_MAP_MAX_PIECES + 1];
  for (int c = 0; c < ncut; c++) {
    at[c] = NULL;
    for (int i = 0; i < w.nb && !at[c]; i++)
      if (w.b[i].v == cut[c]) at[c] = &w.b[i].e;
    if (!at[c]) return false;
  }
  for (int k = 0; k + 1 < ncut; k++) {
    if (!size_sub(at[k + 1], at[k], &len[k])) return false;
    lo[k] = *at[k];
  }
  return true;
}

int ct_cut_origins(const ct_src *s, const rg_region *R, int var, int node, int *axis, ct_size *off, int max) {
  const poly_block_info *last = poly_block(s->pv, R->blocks[R->nblocks - 1]);
  if (var < 0 || var >= s->g->nodes[last->node].shape.rank) return -1;
  cut_walk w = {.s = s, .R = R, .want = node};
  ct_size zero = {0};
  walk(&w, last->node, var, &zero, 0);
  int n = w.lost || w.nreach > max ? -1 : w.nreach;
  for (int i = 0; i < n; i++) axis[i] = w.raxis[i], off[i] = w.roff[i];
  return n;
}
