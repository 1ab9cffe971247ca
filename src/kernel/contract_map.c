/* contract_map.c — elementwise regions read as a map kernel.
 * Needs: a region's blocks in the Poly-View (poly_chain_* for pieces), the Function.
 * Gives: ct_read_map (contract.h).
 *
 * The region's blocks become a list of ops in block order, each reading
 * earlier ops (point for point), constants (CONST nodes, rounded to their
 * dtype as the reference does) or the kernel's buffers.  A buffer read is
 * an affine access; its strides over the domain decide how the domain
 * splits into rows x cols: the split is the outermost dimension from which
 * every input either moves with the output (row-major, stride 1 over the
 * inner run) or stays put.  Outer dimensions that every read walks as one
 * are merged, so a dense chain is a single row and a per-channel bias over
 * NCHW is rows of H*W.  Blocks over other domains or reads of padding
 * (pads, slices, concats) take the pieces path at the end of the file. */
#include <stdlib.h>
#include <string.h>

#include "kernel/contract.h"
#include "harp/polycore.h"
#include "harp/region.h"
#include "util/util.h"

#define DECLINE(msg) \
  do {               \
    *why = (msg);    \
    return false;    \
  } while (0)

static const char DIFFERENT_DOMAINS[] = "map: blocks over different domains";
static const char PADDED_READ[] = "map: an input read through padding or other than affinely";

static bool float_dt(tiny_dtype t) { return t == TINY_FP32 || t == TINY_FP16 || t == TINY_BF16; }

/* Strides of read a of block bi over the block's variables (extent-1 ones
 * 0) and its offset: false unless one affine piece with no padding and no
 * negative stride. */
static bool read_strides(const ct_src *s, int bi, int a, const int64_t *size, int64_t *st, int64_t *off) {
  const poly_block_info *b = poly_block(s->pv, bi);
  harp_error e = {0};
  bool aff = false;
  if (b->access[a].nfill || poly_access_strides(&e, s->pv, bi, a, st, off, &aff) || !aff || *off < 0) return false;
  for (int v = 0; v < b->nvars; v++) {
    if (size[v] <= 1) st[v] = 0;
    if (st[v] < 0) return false;
  }
  return true;
}

/* The reads of outside tensors, before the split. */
typedef struct raw_in {
  ct_tensor t;
  int64_t st[POLY_MAX_VARS];
  const tiny_shape *shape; /* ct_map_in.shape */
} raw_in;

/* The input for tensor t read at st/off (the same read twice is one input),
 * read by access a of block bi (a ShapeSet object's read through a
 * RESHAPE: that RESHAPE's shape, ct_map_in.shape). */
static int add_input(const ct_src *s, int bi, int a, raw_in *in, int *nin, const ct_tensor *t, const int64_t *st, int nv) {
  for (int k = 0; k < *nin; k++)
    if (in[k].t.slot == t->slot && in[k].t.offset == t->offset && !memcmp(in[k].st, st, sizeof(int64_t) * (size_t)nv))
      return k;
  if (*nin >= CT_MAP_MAX_IN) return -1;
  in[*nin].t = *t;
  memcpy(in[*nin].st, st, sizeof(int64_t) * (size_t)nv);
  int view = s->sizes_vary ? poly_reshape_view(s->pv, bi, a, s->nvary, s->vary) : -1;
  in[*nin].shape = view >= 0 ? &s->g->nodes[view].shape : NULL;
  return (*nin)++;
}


static void row_major(const int64_t *size, int nv, int64_t *st) {
  int64_t acc = 1;
  for (int v = nv - 1; v >= 0; v--) {
    st[v] = size[v] > 1 ? acc : 0;
    acc *= size[v];
  }
}

/* The domain (sizes over nv variables) as rows x cols, y written at yst
 * (ystrided: not y's own dense layout, a piece of it): the split is the
 * outermost dimension from which every input moves with y or stays put,
 * and y's run is contiguous.  Rows shorter than 16 points: declined unless
 * short_ok (out->short_rows then says so). */
static bool split(const raw_in *raw, int nraw, const int64_t *size, int nv, const int64_t *yst, bool ystrided,
                  bool short_ok, ct_map *out, const char **why) {
  int dim[POLY_MAX_VARS], nd = 0;
  for (int v = 0; v < nv; v++)
    if (size[v] > 1) dim[nd++] = v;
  int64_t inner[POLY_MAX_VARS + 1]; /* inner[i]: points in dimensions i.. */
  inner[nd] = 1;
  for (int i = nd - 1; i >= 0; i--) inner[i] = inner[i + 1] * size[dim[i]];
  /* the split: from dimension sp on every input moves with y or stays, y
   * itself contiguous */
  int sp = nd;
  while (sp > 0 && yst[dim[sp - 1]] == inner[sp]) sp--;
  bool bc[CT_MAP_MAX_IN];
  for (int k = 0; k < nraw; k++) {
    int c = nd, z = nd; /* from c on: row-major with y; from z on: all 0 */
    while (c > 0 && raw[k].st[dim[c - 1]] == inner[c]) c--;
    while (z > 0 && raw[k].st[dim[z - 1]] == 0) z--;
    int m = c < z ? c : z;
    if (m > sp) sp = m;
  }
  for (int k = 0; k < nraw; k++) {
    bool moves = true;
    for (int i = sp; i < nd; i++) moves = moves && raw[k].st[dim[i]] == inner[i + 1];
    bc[k] = !moves;
  }
  out->cols = inner[sp];
  /* the outer dimensions, merged where every read and y walk two as one */
  int64_t osz[POLY_MAX_VARS], ost[CT_MAP_MAX_IN][POLY_MAX_VARS], yos[POLY_MAX_VARS];
  int no = 0;
  for (int i = 0; i < sp; i++) {
    int v = dim[i];
    bool merge = no > 0 && yos[no - 1] == yst[v] * size[v];
    for (int k = 0; merge && k < nraw; k++) merge = ost[k][no - 1] == raw[k].st[v] * size[v];
    if (merge) {
      osz[no - 1] *= size[v];
      yos[no - 1] = yst[v];
      for (int k = 0; k < nraw; k++) ost[k][no - 1] = raw[k].st[v];
    } else {
      osz[no] = size[v];
      yos[no] = yst[v];
      for (int k = 0; k < nraw; k++) ost[k][no] = raw[k].st[v];
      no++;
    }
  }
  if (no > CT_MAP_MAX_OUTER) DECLINE("map: more than 4 outer dimensions after merging");
  out->short_rows = no > 0 && out->cols < 16;
  if (out->short_rows && !short_ok) DECLINE(CT_MAP_SHORT_ROWS);
  out->nouter = no;
  memcpy(out->outer, osz, sizeof(int64_t) * (size_t)no);
  out->ystrided = ystrided;
  memcpy(out->yostride, yos, sizeof(int64_t) * (size_t)no);
  out->nin = nraw;
  for (int k = 0; k < nraw; k++) {
    out->in[k].t = raw[k].t;
    out->in[k].bcast = bc[k];
    out->in[k].shape = raw[k].shape;
    memcpy(out->in[k].ostride, ost[k], sizeof(int64_t) * (size_t)no);
  }
  return true;
}

static bool read_flat(const ct_src *s, int kernel, bool (*ok)(tiny_op op), ct_map *out, const char **why) {
  *why = NULL;
  memset(out, 0, sizeof *out);
  const tiny_graph *g = s->g;
  const fn_kernel *K = &s->f->kernels[kernel];
  const rg_region *R = &s->f->part->regions[K->region];
  if (R->nblocks < 1) return false;
  for (int k = 0; k < R->nblocks; k++) {
    const poly_block_info *b = poly_block(s->pv, R->blocks[k]);
    if (b->kind != POLY_EWISE || b->nnodes > 1 || b->nvars != b->nout) return false;
  }
  /* from here on an elementwise region: a decline says why */
  if (R->nout != 1) DECLINE("map: more than one output");
  if (R->nblocks > CT_MAP_MAX_OPS) DECLINE("map: too many ops");
  const poly_block_info *last = poly_block(s->pv, R->blocks[R->nblocks - 1]);
  if (last->node != R->out_values[0]) DECLINE("map: the output is not the last op");
  int64_t size[POLY_MAX_VARS];
  ct_block_sizes(g, last, size);
  int nv = last->nvars;
  raw_in raw[CT_MAP_MAX_IN];
  int nraw = 0;
  for (int k = 0; k < R->nblocks; k++) {
    int bi = R->blocks[k];
    const poly_block_info *b = poly_block(s->pv, bi);
    const tiny_node *n = &g->nodes[b->node];
    int64_t bs[POLY_MAX_VARS];
    ct_block_sizes(g, b, bs);
    if (b->nvars != nv || memcmp(bs, size, sizeof(int64_t) * (size_t)nv)) DECLINE(DIFFERENT_DOMAINS);
    if (!float_dt(n->dtype)) DECLINE("map: an integer or boolean value");
    if (!ok(n->op)) DECLINE("map: an op without a vector form");
    if (n->op == TINY_CAST && !float_dt(g->nodes[n->src[0].node].dtype)) DECLINE("map: a cast from an integer");
    ct_map_op *op = &out->ops[k];
    op->op = n->op;
    op->to = n->op == TINY_CAST ? n->a.cast.to : TINY_FP32;
    for (int q = 0; q < n->nsrc; q++) {
      ct_map_arg *arg = q == 0 ? &op->a : &op->b;
      int t = b->access[q].tensor;
      const tiny_node *tn = &g->nodes[t];
      int j = 0;
      while (j < k && poly_block(s->pv, R->blocks[j])->node != t) j++;
      if (j < k) { /* a value of the region: read at its own point */
        if (!poly_access_identity(s->pv, bi, q)) DECLINE("map: a value of the region read other than point for point");
        *arg = (ct_map_arg){'v', j, 0};
      } else if (tn->op == TINY_CONST) {
        /* a literal everywhere only where no point of the block reads a pad
         * of it (a fill padded by a concat: the pieces path cuts the slabs) */
        if (b->access[q].nfill) DECLINE(PADDED_READ);
        float v = (float)tn->a.cnst.value;
        if (tn->dtype == TINY_FP16) v = ut_round_f16(v);
        else if (tn->dtype == TINY_BF16) v = ut_round_bf16(v);
        else if (tn->dtype != TINY_FP32) DECLINE("map: an integer constant");
        *arg = (ct_map_arg){'c', 0, v};
      } else {
        int slot = ct_slot_of(K, s->f, t);
        if (slot < 0) DECLINE("map: reads a value that is no buffer of the kernel");
        tiny_dtype sd = s->f->buffers[s->f->buffer_of[t]].dtype;
        if (!float_dt(sd) || !float_dt(tn->dtype)) DECLINE("map: an integer or boolean input");
        int64_t st[POLY_MAX_VARS], off;
        if (!read_strides(s, bi, q, size, st, &off)) DECLINE(PADDED_READ);
        ct_tensor ten = {t, slot, sd, off};
        int idx = add_input(s, bi, q, raw, &nraw, &ten, st, nv);
        if (idx < 0) DECLINE("map: too many inputs");
        *arg = (ct_map_arg){'i', idx, 0};
      }
    }
  }
  out->nops = R->nblocks;
  /* the output: written point for point into a buffer of the kernel */
  int yn = last->node, ys = ct_slot_of(K, s->f, yn);
  if (ys < 0) DECLINE("map: the output is no buffer of the kernel");
  if (!poly_access_identity(s->pv, R->blocks[R->nblocks - 1], last->naccess - 1))
    DECLINE("map: the output is not written point for point");
  out->y = (ct_tensor){yn, ys, s->f->buffers[s->f->buffer_of[yn]].dtype, 0};
  if (!float_dt(out->y.dtype)) DECLINE("map: an integer or boolean output");
  int64_t yst[POLY_MAX_VARS];
  row_major(size, nv, yst);
  return split(raw, nraw, size, nv, yst, false, s->sizes_vary, out, why);
}

/* ---- pieces: regions with pads, slices and concats -------------------------------
 * The output's domain is cut along one variable into slabs where every
 * chain of reads from the output (poly_chain_*) reads real elements or one
 * pad value throughout.  Per slab the region is one map: each value is
 * computed at the point the chain reaches (a block over a smaller domain,
 * the negated half of a rotary embedding, is computed at the output's
 * point, shifted), a read of padding is its pad value. */
#define MAX_CHAINS 64

typedef struct inst {
  int block;
  int64_t st[POLY_MAX_VARS], off;
  int op;
} inst;

typedef struct piece_ctx {
  const ct_src *s;
  const fn_kernel *K;
  const rg_region *R;
  int nv;
  int64_t lo[POLY_MAX_VARS], hi[POLY_MAX_VARS], size[POLY_MAX_VARS];
  poly_chain ch;
  ct_map *out;
  raw_in raw[CT_MAP_MAX_IN];
  int nraw, ninst;
  inst in[CT_MAP_MAX_OPS];
  const char *why;
  bool err; /* an error of the poly layer: decline */
} piece_ctx;

int ct_region_block(const ct_src *s, const rg_region *R, int node) {
  for (int k = 0; k < R->nblocks; k++)
    if (poly_block(s->pv, R->blocks[k])->node == node) return R->blocks[k];
  return -1;
}

static float rounded(tiny_dtype t, double v) {
  float f = (float)v;
  return t == TINY_FP16 ? ut_round_f16(f) : t == TINY_BF16 ? ut_round_bf16(f) : f;
}

/* The op computing block bi at the point the current chain reaches
 * (appended after the ops it reads); -1 with p->why set. */
static int piece_op(piece_ctx *p, int bi) {
  const tiny_graph *g = p->s->g;
  const poly_block_info *b = poly_block(p->s->pv, bi);
  const tiny_node *n = &g->nodes[b->node];
  ct_map_op op = {n->op, n->op == TINY_CAST ? n->a.cast.to : TINY_FP32, {0}, {0}};
  if (p->ch.n >= POLY_CHAIN_MAX) return p->why = "map: too many ops", -1;
  for (int q = 0; q < n->nsrc; q++) {
    ct_map_arg *arg = q == 0 ? &op.a : &op.b;
    int t = b->access[q].tensor;
    const tiny_node *tn = &g->nodes[t];
    p->ch.block[p->ch.n] = bi;
    p->ch.access[p->ch.n++] = q;
    poly_chain_result r;
    harp_error e = {0};
    int j = ct_region_block(p->s, p->R, t);
    if (poly_chain_read(&e, p->s->pv, &p->ch, p->lo, p->hi, &r)) {
      p->err = true;
      r.kind = POLY_CHAIN_MIXED;
    }
    if (r.kind == POLY_CHAIN_MIXED) return p->why = "map: a read that is neither all padding nor one affine read on a piece", -1;
    if (r.kind == POLY_CHAIN_FILL) {
      if (!float_dt(tn->dtype)) return p->why = "map: an integer pad", -1;
      *arg = (ct_map_arg){'c', 0, rounded(tn->dtype, r.fill)};
    } else if (j >= 0) { /* a value of the region at the point reached */
      int k = 0;
      while (k < p->ninst && !(p->in[k].block == j && p->in[k].off == r.offset &&
                               !memcmp(p->in[k].st, r.strides, sizeof(int64_t) * (size_t)p->nv)))
        k++;
      if (k == p->ninst) {
        int o = piece_op(p, j);
        if (o < 0) return -1;
        if (p->ninst == CT_MAP_MAX_OPS) return p->why = "map: too many ops", -1;
        k = p->ninst; /* after those the call added */
        p->in[p->ninst] = (inst){j, {0}, r.offset, o};
        memcpy(p->in[p->ninst++].st, r.strides, sizeof(int64_t) * (size_t)p->nv);
      }
      *arg = (ct_map_arg){'v', p->in[k].op, 0};
    } else if (tn->op == TINY_CONST) {
      if (!float_dt(tn->dtype)) return p->why = "map: an integer constant", -1;
      *arg = (ct_map_arg){'c', 0, rounded(tn->dtype, tn->a.cnst.value)};
    } else {
      int slot = ct_slot_of(p->K, p->s->f, t);
      if (slot < 0) return p->why = "map: reads a value that is no buffer of the kernel", -1;
      tiny_dtype sd = p->s->f->buffers[p->s->f->buffer_of[t]].dtype;
      if (!float_dt(sd) || !float_dt(tn->dtype)) return p->why = "map: an integer or boolean input", -1;
      int64_t st[POLY_MAX_VARS], off = r.offset;
      for (int v = 0; v < p->nv; v++) {
        st[v] = p->size[v] > 1 ? r.strides[v] : 0;
        off += r.strides[v] * p->lo[v]; /* the piece's first point */
        if (st[v] < 0) return p->why = "map: an input read backwards", -1;
      }
      if (off < 0) return p->why = "map: an input read before its start", -1;
      ct_tensor ten = {t, slot, sd, off};
      int idx = add_input(p->s, bi, q, p->raw, &p->nraw, &ten, st, p->nv);
      if (idx < 0) return p->why = "map: too many inputs", -1;
      *arg = (ct_map_arg){'i', idx, 0};
    }
    p->ch.n--;
  }
  if (p->out->nops == CT_MAP_MAX_OPS) return p->why = "map: too many ops", -1;
  p->out->ops[p->out->nops] = op;
  return p->out->nops++;
}

/* Every chain of reads from block bi (the path so far in *cur) to a tensor
 * the region does not compute. */
static bool chains_of(const ct_src *s, const rg_region *R, int bi, poly_chain *cur, poly_chain *all, int *n) {
  const poly_block_info *b = poly_block(s->pv, bi);
  int nsrc = s->g->nodes[b->node].nsrc;
  for (int q = 0; q < nsrc; q++) {
    if (cur->n >= POLY_CHAIN_MAX) return false;
    cur->block[cur->n] = bi;
    cur->access[cur->n++] = q;
    int j = ct_region_block(s, R, b->access[q].tensor);
    bool ok = true;
    if (j >= 0) ok = chains_of(s, R, j, cur, all, n);
    else if (*n < MAX_CHAINS) all[(*n)++] = *cur;
    else ok = false;
    cur->n--;
    if (!ok) return false;
  }
  return true;
}

bool ct_map_cuts(const ct_src *s, const rg_region *R, int *var, int64_t *cut, int *ncut, const char **why) {
  poly_chain *chains = malloc(sizeof(poly_chain) * MAX_CHAINS);
  poly_chain cur = {0};
  int nch = 0;
  bool ok = false;
  *var = -1, *ncut = 0;
  if (!chains) DECLINE("map: out of memory");
  harp_error e = {0};
  if (!chains_of(s, R, R->blocks[R->nblocks - 1], &cur, chains, &nch)) {
    free(chains);
    DECLINE("map: too many paths through the region");
  }
  harp_status st = nch ? poly_chain_cuts(&e, s->pv, chains, nch, var, cut, ncut, CT_MAP_MAX_PIECES + 1, &ok) : HARP_OK;
  free(chains);
  if (st || !ok) DECLINE("map: pads that do not cut the output into at most 4 slabs along one axis");
  return true;
}

/* Piece m's inputs whose offset is their start along y's cut axis var:
 * (the piece's start - where the axis' index 0 lies in y, ct_cut_origins)
 * times the axis' stride in the tensor, for the one arrival that fits,
 * the tensor read once in the piece; that axis and sum into the input
 * (ct_map_in.cut_axis, -1 for the others). */
static void piece_origins(const ct_src *s, const rg_region *R, int var, ct_map *m) {
  for (int k = 0; k < m->nin; k++) {
    ct_map_in *in = &m->in[k];
    const tiny_shape *ts = &s->g->nodes[in->t.node].shape;
    int twice = 0, ax[4], fits = 0, pick = -1;
    ct_size off[4];
    in->cut_axis = -1;
    for (int j = 0; j < m->nin; j++) twice += m->in[j].t.node == in->t.node;
    int n = twice == 1 ? ct_cut_origins(s, R, var, in->t.node, ax, off, 4) : -1;
    for (int i = 0; i < n; i++) {
      int64_t stride = 1;
      for (int d = ax[i] + 1; d < ts->rank; d++) stride *= ts->d[d].n;
      if (ax[i] < ts->rank && m->cut_lo.value >= off[i].value && in->t.offset == (m->cut_lo.value - off[i].value) * stride)
        pick = i, fits++;
    }
    if (fits == 1) in->cut_axis = ax[pick], in->cut_off = off[pick];
  }
}

static bool read_pieces(const ct_src *s, int kernel, bool (*ok_op)(tiny_op op), ct_map_set *out, const char **why) {
  const fn_kernel *K = &s->f->kernels[kernel];
  const rg_region *R = &s->f->part->regions[K->region];
  const tiny_graph *g = s->g;
  int lb = R->blocks[R->nblocks - 1];
  const poly_block_info *last = poly_block(s->pv, lb);
  for (int k = 0; k < R->nblocks; k++) { /* read_flat stopped before these */
    const tiny_node *n = &g->nodes[poly_block(s->pv, R->blocks[k])->node];
    if (!float_dt(n->dtype)) DECLINE("map: an integer or boolean value");
    if (!ok_op(n->op)) DECLINE("map: an op without a vector form");
    if (n->op == TINY_CAST && !float_dt(g->nodes[n->src[0].node].dtype)) DECLINE("map: a cast from an integer");
  }
  if (!poly_access_identity(s->pv, lb, last->naccess - 1)) DECLINE("map: the output is not written point for point");
  int var = -1, ncut = 0;
  int64_t cut[CT_MAP_MAX_PIECES + 1];
  if (!ct_map_cuts(s, R, &var, cut, &ncut, why)) return false;
  int nv = last->nvars;
  int64_t lo[POLY_MAX_VARS], hi[POLY_MAX_VARS];
  if (!poly_block_ranges(s->pv, lb, lo, hi)) DECLINE("map: a domain of unknown size");
  int npiece = var < 0 ? 1 : ncut - 1;
  /* y: written point for point, row-major over the output's variables */
  int yn = last->node, ys = ct_slot_of(K, s->f, yn);
  if (ys < 0) DECLINE("map: the output is no buffer of the kernel");
  if (!float_dt(s->f->buffers[s->f->buffer_of[yn]].dtype)) DECLINE("map: an integer or boolean output");
  int64_t full[POLY_MAX_VARS], yst[POLY_MAX_VARS];
  for (int v = 0; v < nv; v++) full[v] = hi[v] - lo[v] + 1;
  row_major(full, nv, yst);
  piece_ctx *p = calloc(1, sizeof *p);
  if (!p) DECLINE("map: out of memory");
  out->npiece = 0;
  for (int k = 0; k < npiece; k++) {
    memset(p, 0, sizeof *p);
    *p = (piece_ctx){.s = s, .K = K, .R = R, .nv = nv, .out = &out->piece[k]};
    memset(p->out, 0, sizeof *p->out);
    memcpy(p->lo, lo, sizeof lo);
    memcpy(p->hi, hi, sizeof hi);
    if (var >= 0) p->lo[var] = cut[k], p->hi[var] = cut[k + 1] - 1;
    int64_t yoff = 0;
    for (int v = 0; v < nv; v++) {
      p->size[v] = p->hi[v] - p->lo[v] + 1;
      yoff += yst[v] * (p->lo[v] - lo[v]);
    }
    if (piece_op(p, lb) < 0 || p->err) {
      *why = p->err ? "map: the poly layer failed on a chain of reads" : p->why;
      free(p);
      return false;
    }
    p->out->y = (ct_tensor){yn, ys, s->f->buffers[s->f->buffer_of[yn]].dtype, yoff};
    if (!split(p->raw, p->nraw, p->size, nv, yst, npiece > 1, s->sizes_vary, p->out, why)) {
      free(p);
      return false;
    }
    out->npiece++;
  }
  free(p);
  ct_size clo[CT_MAP_MAX_PIECES], clen[CT_MAP_MAX_PIECES];
  if (npiece > 1 && s->sizes_vary && ct_cut_sizes(s, R, var, cut, ncut, clo, clen)) /* a ShapeSet object's: read at run time */
    for (int k = 0; k < npiece; k++) {
      ct_map *m = &out->piece[k];
      m->cut_known = true, m->cut_axis = var, m->cut_lo = clo[k], m->cut_len = clen[k];
      piece_origins(s, R, var, m);
    }
  return true;
}

bool ct_read_map(const ct_src *s, int kernel, bool (*ok)(tiny_op op), ct_map_set *out, const char **why) {
  out->npiece = 1;
  if (read_flat(s, kernel, ok, &out->piece[0], why)) return true;
  if (*why != DIFFERENT_DOMAINS && *why != PADDED_READ) return false;
  const char *flat = *why;
  if (read_pieces(s, kernel, ok, out, why)) return true;
  if (!*why) *why = flat;
  return false;
}
