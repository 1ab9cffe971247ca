/* contract_gmap.c — elementwise regions read through floor divisions: the
 * blocks become ops as in contract_map.c's flat path, and each read of an
 * outside tensor one quasi-affine index per tensor axis (poly_access_quasi)
 * instead of strides over rows.  Only fp32 values: the kernel printing
 * this (gmap_c.c) computes in float with scalar C the compiler vectorises.
 * Needs: the Poly-View (poly_access_quasi, poly_access_identity), the
 * Function.  Gives: ct_read_gmap (gmap.h). */
#include <string.h>

#include "harp/region.h"
#include "kernel/gmap.h"

#define DECLINE(msg) \
  do {               \
    *why = (msg);    \
    return false;    \
  } while (0)

/* Input for tensor t (the same read twice is one input): its index, -1 when full. */
static int add_input(ct_gmap *g, const ct_tensor *t, const poly_qaxis *ax, int rank) {
  for (int k = 0; k < g->nin; k++)
    if (g->in[k].t.slot == t->slot && g->in[k].rank == rank && !memcmp(g->in[k].ax, ax, sizeof(poly_qaxis) * (size_t)rank))
      return k;
  if (g->nin >= CT_MAP_MAX_IN) return -1;
  g->in[g->nin].t = *t;
  g->in[g->nin].rank = rank;
  memcpy(g->in[g->nin].ax, ax, sizeof(poly_qaxis) * (size_t)rank);
  return g->nin++;
}

/* Operand q of block bi (the k-th op) as an op argument; false with *why. */
static bool operand(const ct_src *s, const rg_region *R, const fn_kernel *K, int k, int q, ct_gmap *g, ct_map_arg *arg,
                    const char **why) {
  const poly_block_info *b = poly_block(s->pv, R->blocks[k]);
  int t = b->access[q].tensor;
  const tiny_node *tn = &s->g->nodes[t];
  int j = 0;
  while (j < k && poly_block(s->pv, R->blocks[j])->node != t) j++;
  if (j < k) { /* a value of the region: read at its own point */
    if (!poly_access_identity(s->pv, R->blocks[k], q)) DECLINE("gmap: a value of the region read other than point for point");
    *arg = (ct_map_arg){'v', j, 0};
    return true;
  }
  if (tn->op == TINY_CONST) {
    if (tn->dtype != TINY_FP32) DECLINE("gmap: a constant other than fp32");
    *arg = (ct_map_arg){'c', 0, (float)tn->a.cnst.value};
    return true;
  }
  int slot = ct_slot_of(K, s->f, t);
  if (slot < 0) DECLINE("gmap: reads a value that is no buffer of the kernel");
  if (s->f->buffers[s->f->buffer_of[t]].dtype != TINY_FP32 || tn->dtype != TINY_FP32) DECLINE("gmap: an input other than fp32");
  poly_qaxis ax[TINY_MAX_RANK];
  int rank = 0;
  bool ok = false;
  harp_error e = {0};
  if (poly_access_quasi(&e, s->pv, R->blocks[k], q, ax, &rank, &ok) || !ok || rank != tn->shape.rank)
    DECLINE("gmap: a read that is not one quasi-affine piece");
  ct_tensor ten = {t, slot, TINY_FP32, 0};
  int idx = add_input(g, &ten, ax, rank);
  if (idx < 0) DECLINE("gmap: too many inputs");
  *arg = (ct_map_arg){'i', idx, 0};
  return true;
}

bool ct_read_gmap(const ct_src *s, int kernel, bool (*ok)(tiny_op op), ct_gmap *out, const char **why) {
  *why = NULL;
  memset(out, 0, sizeof *out);
  const fn_kernel *K = &s->f->kernels[kernel];
  const rg_region *R = &s->f->part->regions[K->region];
  if (R->nblocks < 1) DECLINE("gmap: an empty region");
  if (R->nout != 1) DECLINE("gmap: more than one output");
  if (R->nblocks > CT_MAP_MAX_OPS) DECLINE("gmap: too many ops");
  const poly_block_info *last = poly_block(s->pv, R->blocks[R->nblocks - 1]);
  if (last->node != R->out_values[0]) DECLINE("gmap: the output is not the last op");
  out->nv = last->nvars;
  ct_block_sizes(s->g, last, out->size);
  for (int k = 0; k < R->nblocks; k++) {
    const poly_block_info *b = poly_block(s->pv, R->blocks[k]);
    const tiny_node *n = &s->g->nodes[b->node];
    int64_t bs[POLY_MAX_VARS];
    if (b->kind != POLY_EWISE || b->nnodes > 1 || b->nvars != b->nout || b->nvars != out->nv)
      DECLINE("gmap: a block that is not elementwise over the output's domain");
    ct_block_sizes(s->g, b, bs);
    if (memcmp(bs, out->size, sizeof(int64_t) * (size_t)out->nv)) DECLINE("gmap: blocks over different domains");
    if (n->dtype != TINY_FP32 || !ok(n->op)) DECLINE("gmap: a value other than fp32, or an op without a C form");
    if (n->op == TINY_CAST && s->g->nodes[n->src[0].node].dtype != TINY_FP32) DECLINE("gmap: a cast");
    ct_map_op *op = &out->ops[k];
    op->op = n->op;
    op->to = TINY_FP32;
    for (int q = 0; q < n->nsrc && q < 2; q++)
      if (!operand(s, R, K, k, q, out, q == 0 ? &op->a : &op->b, why)) return false;
    if (n->nsrc > 2) DECLINE("gmap: an op of more than two operands");
  }
  out->nops = R->nblocks;
  int yn = last->node, ys = ct_slot_of(K, s->f, yn);
  if (ys < 0) DECLINE("gmap: the output is no buffer of the kernel");
  if (!poly_access_identity(s->pv, R->blocks[R->nblocks - 1], last->naccess - 1))
    DECLINE("gmap: the output is not written point for point");
  out->y = (ct_tensor){yn, ys, s->f->buffers[s->f->buffer_of[yn]].dtype, 0};
  if (out->y.dtype != TINY_FP32) DECLINE("gmap: an output other than fp32");
  return true;
}
