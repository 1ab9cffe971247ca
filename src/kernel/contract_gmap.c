/* contract_gmap.c — elementwise regions read through floor divisions: as
 * contract_map.c's pieces (the output cut into slabs where no chain of
 * reads mixes padding and real elements, each value computed at the point
 * its chain reaches), with each read of an outside tensor one quasi-affine
 * index per tensor axis (poly_chain_quasi) instead of strides over rows.
 * A nearest upsample added to a lateral map, a concat of upsampled maps, a
 * depth-to-space (also as a model's output: a view's copy) and a
 * per-channel gate computed on the way all read so.
 * Only fp32 values: the kernel printing this (gmap_c.c) computes in float
 * with scalar C the compiler vectorises.
 * A concat's piece along a symbolic axis: its bounds as sizes
 * (ct_cut_sizes), and where each input's index along the cut axis starts
 * (ct_cut_origins: an addend of y at 0, the piece's own input at its
 * PAD's low amount), so the printer reads neither as a number of the
 * binding; a piece one row long reads its inputs there as constants,
 * which that gives back their form.
 * Needs: the Poly-View (poly_chain_quasi), the Function, ct_map_cuts, ct_cut_sizes, ct_cut_origins.
 * Gives: ct_read_gmap (gmap.h). */
#include <stdlib.h>
#include <string.h>

#include "harp/region.h"
#include "kernel/gmap.h"

/* The reading of one slab: the chain followed so far, the values of the
 * region computed (block, the index reached, their op). */
typedef struct gp_ctx {
  const ct_src *s;
  const fn_kernel *K;
  const rg_region *R;
  int64_t lo[POLY_MAX_VARS], hi[POLY_MAX_VARS];
  poly_chain ch;
  ct_gmap_piece *out;
  struct {
    int block, rank, op;
    poly_qaxis ax[TINY_MAX_RANK];
  } inst[CT_MAP_MAX_OPS];
  int ninst;
  const char *why;
} gp_ctx;

/* Input for tensor t read at ax (the same read twice is one input): its index, -1 when full. */
static int add_input(ct_gmap_piece *g, const ct_tensor *t, const poly_qaxis *ax, int rank) {
  for (int k = 0; k < g->nin; k++)
    if (g->in[k].t.slot == t->slot && g->in[k].rank == rank && !memcmp(g->in[k].ax, ax, sizeof(poly_qaxis) * (size_t)rank))
      return k;
  if (g->nin >= CT_MAP_MAX_IN) return -1;
  g->in[g->nin].t = *t;
  g->in[g->nin].rank = rank;
  g->in[g->nin].cut_axis = -1;
  memcpy(g->in[g->nin].ax, ax, sizeof(poly_qaxis) * (size_t)rank);
  return g->nin++;
}

static int gp_op(gp_ctx *p, int bi);

/* The value of region block j at the index ax its chain reaches: the op
 * computing it, made once per (block, index); -1 with p->why. */
static int gp_value(gp_ctx *p, int j, const poly_qaxis *ax, int rank) {
  for (int k = 0; k < p->ninst; k++)
    if (p->inst[k].block == j && p->inst[k].rank == rank && !memcmp(p->inst[k].ax, ax, sizeof(poly_qaxis) * (size_t)rank))
      return p->inst[k].op;
  int o = gp_op(p, j);
  if (o < 0) return -1;
  if (p->ninst == CT_MAP_MAX_OPS) return p->why = "gmap: too many ops", -1;
  p->inst[p->ninst].block = j, p->inst[p->ninst].rank = rank, p->inst[p->ninst].op = o;
  memcpy(p->inst[p->ninst++].ax, ax, sizeof(poly_qaxis) * (size_t)rank);
  return o;
}

/* Operand q of block bi at the point the current chain reaches, into *arg;
 * false with p->why. */
static bool gp_operand(gp_ctx *p, int bi, int q, ct_map_arg *arg) {
  const tiny_graph *g = p->s->g;
  int t = poly_block(p->s->pv, bi)->access[q].tensor;
  const tiny_node *tn = &g->nodes[t];
  if (p->ch.n >= POLY_CHAIN_MAX) return p->why = "gmap: too many ops", false;
  p->ch.block[p->ch.n] = bi;
  p->ch.access[p->ch.n++] = q;
  poly_chain_result r;
  poly_qaxis ax[TINY_MAX_RANK];
  int rank = 0, j = ct_region_block(p->s, p->R, t);
  harp_error e = {0};
  if (poly_chain_quasi(&e, p->s->pv, &p->ch, p->lo, p->hi, &r, ax, &rank)) r.kind = POLY_CHAIN_MIXED;
  bool ok = true;
  if (r.kind == POLY_CHAIN_MIXED) ok = false, p->why = "gmap: a read that is neither all padding nor one quasi-affine piece";
  else if (r.kind == POLY_CHAIN_FILL) *arg = (ct_map_arg){'c', 0, (float)r.fill};
  else if (j >= 0) { /* a value of the region at the point reached */
    int o = gp_value(p, j, ax, rank);
    ok = o >= 0;
    *arg = (ct_map_arg){'v', o, 0};
  } else if (tn->op == TINY_CONST) {
    ok = tn->dtype == TINY_FP32;
    if (!ok) p->why = "gmap: a constant other than fp32";
    *arg = (ct_map_arg){'c', 0, (float)tn->a.cnst.value};
  } else {
    int slot = ct_slot_of(p->K, p->s->f, t);
    ok = slot >= 0 && p->s->f->buffers[p->s->f->buffer_of[t]].dtype == TINY_FP32 && tn->dtype == TINY_FP32 &&
         rank == tn->shape.rank;
    ct_tensor ten = {t, slot, TINY_FP32, 0};
    int idx = ok ? add_input(p->out, &ten, ax, rank) : -1;
    if (!ok) p->why = "gmap: an input other than an fp32 buffer of the kernel";
    else if (p->s->sizes_vary && poly_reshape_view(p->s->pv, bi, q, p->s->nvary, p->s->vary) >= 0) /* the nest reads it */
      ok = false, p->why = "gmap: a read through a reshape that splits an axis by a symbol's size";
    else if (idx < 0) ok = false, p->why = "gmap: too many inputs";
    *arg = (ct_map_arg){'i', idx, 0};
  }
  p->ch.n--;
  return ok;
}

/* The op computing block bi at the point the current chain reaches
 * (appended after the ops it reads); -1 with p->why set. */
static int gp_op(gp_ctx *p, int bi) {
  const poly_block_info *b = poly_block(p->s->pv, bi);
  const tiny_node *n = &p->s->g->nodes[b->node];
  bool move = b->kind == POLY_MOVEMENT_AFFINE; /* a view that is an output: a copy of its read */
  if ((!move && b->kind != POLY_EWISE) || b->nnodes > 1 || b->nvars != b->nout)
    return p->why = "gmap: a block that is not elementwise", -1;
  if (n->nsrc > 2 || (move && b->naccess != 2)) return p->why = "gmap: an op of more than two operands", -1;
  if (n->op == TINY_CAST && p->s->g->nodes[n->src[0].node].dtype != TINY_FP32) return p->why = "gmap: a cast", -1;
  ct_map_op op = {move ? TINY_CAST : n->op, TINY_FP32, {0}, {0}}; /* a CAST to fp32 of fp32: a copy */
  for (int q = 0; q < (move ? 1 : n->nsrc); q++)
    if (!gp_operand(p, bi, q, q == 0 ? &op.a : &op.b)) return -1;
  if (p->out->nops == CT_MAP_MAX_OPS) return p->why = "gmap: too many ops", -1;
  p->out->ops[p->out->nops] = op;
  return p->out->nops++;
}

/* Whether q, an input's index on the slab lo..hi of variable var (of nv),
 * is var's coordinate minus off: coefficient 1 on var, none on the
 * others, no division, constant -off; or, the slab one row long, the
 * constant lo - off (the row folded it). */
static bool origin_fits(const poly_qaxis *q, int nv, int var, int64_t lo, int64_t hi, int64_t off) {
  if (q->ndiv) return false;
  for (int v = 0; v < nv; v++)
    if (v != var && q->coef[v]) return false;
  return (q->coef[var] == 1 && q->c0 == -off) || (lo == hi && !q->coef[var] && q->c0 == lo - off);
}

/* Piece pc's inputs read along y's cut axis var at the coordinate minus a
 * sum of sizes (ct_cut_origins; the one arrival fitting the reading, the
 * tensor read once in the piece): that axis and sum into the input, its
 * index made var's coordinate minus the sum again where a piece one row
 * long folded it to a constant. */
static void read_origins(const ct_src *s, const rg_region *R, int nv, int var, ct_gmap_piece *pc) {
  for (int k = 0; k < pc->nin; k++) {
    ct_gmap_in *in = &pc->in[k];
    int twice = 0, ax[4], pick = -1, fits = 0;
    ct_size off[4];
    for (int j = 0; j < pc->nin; j++) twice += pc->in[j].t.node == in->t.node;
    int n = twice == 1 ? ct_cut_origins(s, R, var, in->t.node, ax, off, 4) : -1;
    for (int i = 0; i < n; i++)
      if (ax[i] < in->rank && origin_fits(&in->ax[ax[i]], nv, var, pc->lo, pc->hi, off[i].value)) pick = i, fits++;
    if (fits != 1) continue;
    in->cut_axis = ax[pick];
    in->cut_off = off[pick];
    in->ax[ax[pick]].coef[var] = 1;
    in->ax[ax[pick]].c0 = -off[pick].value;
  }
}

#define DECLINE(msg) \
  do {               \
    *why = (msg);    \
    return false;    \
  } while (0)

/* The region's blocks: fp32 values of ops the target has. */
static bool blocks_ok(const ct_src *s, const rg_region *R, bool (*ok)(tiny_op op), const char **why) {
  for (int k = 0; k < R->nblocks; k++) {
    const poly_block_info *b = poly_block(s->pv, R->blocks[k]);
    const tiny_node *n = &s->g->nodes[b->node];
    bool move = b->kind == POLY_MOVEMENT_AFFINE;
    if (b->kind != POLY_EWISE && !move) DECLINE("gmap: a block that is not elementwise");
    if (n->dtype != TINY_FP32 || (!move && !ok(n->op))) DECLINE("gmap: a value other than fp32, or an op without a C form");
  }
  return true;
}

bool ct_read_gmap(const ct_src *s, int kernel, bool (*ok)(tiny_op op), ct_gmap *out, const char **why) {
  *why = NULL;
  memset(out, 0, sizeof *out);
  const fn_kernel *K = &s->f->kernels[kernel];
  const rg_region *R = &s->f->part->regions[K->region];
  if (R->nblocks < 1 || R->nout != 1) DECLINE("gmap: no block, or more than one output");
  int lb = R->blocks[R->nblocks - 1];
  const poly_block_info *last = poly_block(s->pv, lb);
  if (last->node != R->out_values[0]) DECLINE("gmap: the output is not the last op");
  if (!blocks_ok(s, R, ok, why)) return false;
  if (!poly_access_identity(s->pv, lb, last->naccess - 1)) DECLINE("gmap: the output is not written point for point");
  int yn = last->node, ys = ct_slot_of(K, s->f, yn);
  if (ys < 0) DECLINE("gmap: the output is no buffer of the kernel");
  out->y = (ct_tensor){yn, ys, s->f->buffers[s->f->buffer_of[yn]].dtype, 0};
  if (out->y.dtype != TINY_FP32) DECLINE("gmap: an output other than fp32");
  int64_t cut[CT_MAP_MAX_PIECES + 1], lo[POLY_MAX_VARS], hi[POLY_MAX_VARS];
  int ncut = 0;
  if (!ct_map_cuts(s, R, &out->var, cut, &ncut, why)) return false;
  if (!poly_block_ranges(s->pv, lb, lo, hi)) DECLINE("gmap: a domain of unknown size");
  out->nv = last->nvars;
  if (out->nv < 1) DECLINE("gmap: a scalar output");
  for (int v = 0; v < out->nv; v++) {
    out->size[v] = hi[v] - lo[v] + 1;
    if (lo[v]) DECLINE("gmap: a domain not from 0");
  }
  out->npiece = out->var < 0 ? 1 : ncut - 1;
  gp_ctx *p = malloc(sizeof *p);
  if (!p) DECLINE("gmap: out of memory");
  for (int k = 0; k < out->npiece; k++) {
    memset(p, 0, sizeof *p);
    *p = (gp_ctx){.s = s, .K = K, .R = R, .out = &out->piece[k]};
    memcpy(p->lo, lo, sizeof lo);
    memcpy(p->hi, hi, sizeof hi);
    if (out->var >= 0) p->lo[out->var] = cut[k], p->hi[out->var] = cut[k + 1] - 1;
    out->piece[k].lo = out->var >= 0 ? cut[k] : 0;
    out->piece[k].hi = out->var >= 0 ? cut[k + 1] - 1 : 0;
    if (gp_op(p, lb) < 0) {
      *why = p->why;
      free(p);
      return false;
    }
  }
  free(p);
  ct_size clo[CT_MAP_MAX_PIECES], clen[CT_MAP_MAX_PIECES];
  if (out->npiece > 1 && ct_cut_sizes(s, R, out->var, cut, ncut, clo, clen))
    for (int k = 0; k < out->npiece; k++) {
      out->piece[k].cut_known = true, out->piece[k].cut_lo = clo[k], out->piece[k].cut_len = clen[k];
      read_origins(s, R, out->nv, out->var, &out->piece[k]);
    }
  return true;
}
