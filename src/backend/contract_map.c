/* contract_map.c — elementwise regions read as a map kernel.
 * Needs: a region's blocks in the Poly-View, the Function.
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
 * NCHW is rows of H*W. */
#include <string.h>

#include "backend/contract.h"
#include "harp/polycore.h"
#include "harp/region.h"
#include "util/util.h"

#define DECLINE(msg) \
  do {               \
    *why = (msg);    \
    return false;    \
  } while (0)

static bool float_dt(tiny_dtype t) { return t == TINY_FP32 || t == TINY_FP16 || t == TINY_BF16; }

/* Strides of read a of block bi over the block's variables (extent-1 ones
 * 0) and its offset: false unless one affine piece with no padding and no
 * negative stride. */
static bool read_strides(const ct_src *s, int bi, int a, const int64_t *size, int64_t *st, int64_t *off) {
  const poly_block_info *b = poly_block(s->pv, bi);
  hp_error e = {0};
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
} raw_in;

/* The input for tensor t read at st/off (the same read twice is one input). */
static int add_input(raw_in *in, int *nin, const ct_tensor *t, const int64_t *st, int nv) {
  for (int k = 0; k < *nin; k++)
    if (in[k].t.slot == t->slot && in[k].t.offset == t->offset && !memcmp(in[k].st, st, sizeof(int64_t) * (size_t)nv))
      return k;
  if (*nin >= CT_MAP_MAX_IN) return -1;
  in[*nin].t = *t;
  memcpy(in[*nin].st, st, sizeof(int64_t) * (size_t)nv);
  return (*nin)++;
}

bool ct_read_map(const ct_src *s, int kernel, bool (*ok)(tiny_op op), ct_map *out, const char **why) {
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
    if (b->nvars != nv || memcmp(bs, size, sizeof(int64_t) * (size_t)nv)) DECLINE("map: blocks over different domains");
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
        float v = (float)tn->a.cnst.value;
        if (tn->dtype == TINY_FP16) v = hp_round_f16(v);
        else if (tn->dtype == TINY_BF16) v = hp_round_bf16(v);
        else if (tn->dtype != TINY_FP32) DECLINE("map: an integer constant");
        *arg = (ct_map_arg){'c', 0, v};
      } else {
        int slot = ct_slot_of(K, s->f, t);
        if (slot < 0) DECLINE("map: reads a value that is no buffer of the kernel");
        tiny_dtype sd = s->f->buffers[s->f->buffer_of[t]].dtype;
        if (!float_dt(sd) || !float_dt(tn->dtype)) DECLINE("map: an integer or boolean input");
        int64_t st[POLY_MAX_VARS], off;
        if (!read_strides(s, bi, q, size, st, &off)) DECLINE("map: an input read through padding or other than affinely");
        ct_tensor ten = {t, slot, sd, off};
        int idx = add_input(raw, &nraw, &ten, st, nv);
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
  /* the dimensions that are not 1, with the output's row-major strides */
  int dim[POLY_MAX_VARS], nd = 0;
  for (int v = 0; v < nv; v++)
    if (size[v] > 1) dim[nd++] = v;
  int64_t inner[POLY_MAX_VARS + 1]; /* inner[i]: points in dimensions i.. */
  inner[nd] = 1;
  for (int i = nd - 1; i >= 0; i--) inner[i] = inner[i + 1] * size[dim[i]];
  /* the split: from dimension sp on every input moves with y or stays */
  int sp = 0;
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
  /* the outer dimensions, merged where every read walks two as one */
  int64_t osz[POLY_MAX_VARS], ost[CT_MAP_MAX_IN][POLY_MAX_VARS];
  int no = 0;
  for (int i = 0; i < sp; i++) {
    int v = dim[i];
    bool merge = no > 0;
    for (int k = 0; merge && k < nraw; k++) merge = ost[k][no - 1] == raw[k].st[v] * size[v];
    if (merge) {
      osz[no - 1] *= size[v];
      for (int k = 0; k < nraw; k++) ost[k][no - 1] = raw[k].st[v];
    } else {
      osz[no] = size[v];
      for (int k = 0; k < nraw; k++) ost[k][no] = raw[k].st[v];
      no++;
    }
  }
  if (no > CT_MAP_MAX_OUTER) DECLINE("map: more than 4 outer dimensions after merging");
  if (no > 0 && out->cols < 16) DECLINE("map: rows of fewer than 16 points");
  out->nouter = no;
  memcpy(out->outer, osz, sizeof(int64_t) * (size_t)no);
  out->nin = nraw;
  for (int k = 0; k < nraw; k++) {
    out->in[k].t = raw[k].t;
    out->in[k].bcast = bc[k];
    memcpy(out->in[k].ostride, ost[k], sizeof(int64_t) * (size_t)no);
  }
  return true;
}
