/* contract_pool.c — pooling regions read as the window kernel, for every
 * target that has one (the CPU's cgen_pool).
 * Needs: a region formed by rg_form (rg_info), its Poly-View, the Function.
 * Gives: ct_read_pool (contract.h).
 *
 * The frontend lowers max_pool2d / avg_pool2d to a REDUCE (MAX, or SUM
 * then a MUL by 1/(kh*kw)) over a VIEW of windows, the padding an explicit
 * PAD before it; region formation fuses the MUL (and any cast) after the
 * REDUCE.  The reader classifies the REDUCE's read through those views
 * (poly_access_axes): X[n, c, oh*s + kh*d - p, ow*s + kw*d - p] with one
 * pad value, and takes the elementwise chain after it as template steps
 * with constants (a QuantizeLinear's x / s, rint, + zero point and clamp
 * among them: a QDQ model's pool).  A decline says which check failed; it lands in a comment
 * of the generated code. */
#include <math.h>
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

/* The axis is variable v alone, coefficient 1 (variables of extent 1 never
 * move the index, whatever isl made of them). */
static bool var_only(const poly_idx *ix, int nvars, const int64_t *size, int v) {
  if (!ix->lin || ix->cst != 0) return false;
  for (int u = 0; u < nvars; u++)
    if (size[u] > 1 && ix->coef[u] != (u == v ? 1 : 0)) return false;
  return true;
}

/* The value of a scalar constant broadcast through views, else false. */
static bool const_of(const tiny_graph *g, int n, double *v) {
  while (n >= 0 && (g->nodes[n].op == TINY_RESHAPE || g->nodes[n].op == TINY_EXPAND)) n = g->nodes[n].src[0].node;
  if (n < 0 || g->nodes[n].op != TINY_CONST || !tiny_dtype_is_float(g->nodes[n].dtype)) return false;
  *v = g->nodes[n].a.cnst.value;
  return true;
}

static bool half_or_single(tiny_dtype t) { return t == TINY_FP32 || t == TINY_FP16 || t == TINY_BF16; }

/* Operand k of n, through RESHAPEs when views. */
static int operand(const tiny_graph *g, const tiny_node *n, int k, bool views) {
  int s = n->src[k].node;
  while (views && s >= 0 && g->nodes[s].op == TINY_RESHAPE) s = g->nodes[s].src[0].node;
  return s;
}

bool ct_epi_chain(const tiny_graph *g, const int *nodes, int nn, int red, bool views, ct_epi *epi, int *nepi, int *last,
                  const char **why) {
  int prev = red;
  for (int i = 1; i <= nn; i++) {
    int nd = nodes[i - 1];
    const tiny_node *n = &g->nodes[nd];
    bool same = views ? tiny_shape_numel(&n->shape) == tiny_shape_numel(&g->nodes[red].shape)
                      : tiny_shape_equal(&n->shape, &g->nodes[red].shape);
    if (!same) DECLINE("a step after the pool changes the shape");
    if (*nepi >= CT_MAX_EPI) DECLINE("too many steps after the pool");
    ct_epi *ep = &epi[*nepi];
    memset(ep, 0, sizeof *ep);
    ep->slot = -1;
    double v;
    if (n->op == TINY_CAST) {
      tiny_dtype from = g->nodes[prev].dtype, to = n->a.cast.to;
      if (operand(g, n, 0, views) != prev || !half_or_single(from) || !half_or_single(to)) DECLINE("a cast after the pool is not between floats");
      if (!(i == nn || to == TINY_FP32 || from == to)) { /* else the store converts; widening is exact */
        if (from != TINY_FP32) DECLINE("a cast after the pool rounds a half to another half");
        ep->kind = CT_EPI_ROUND;
        ep->dtype = to;
        (*nepi)++;
      }
      prev = nd;
      continue;
    }
    if (n->op == TINY_FDIV) { /* x / c: a QuantizeLinear's division by its scale, kept a division (bit for bit) */
      if (operand(g, n, 0, views) != prev || !const_of(g, n->src[1].node, &v) || v == 0 || !isfinite(v) || (float)v == 0)
        DECLINE("a division after the pool is not by a nonzero constant");
      if (g->nodes[prev].dtype != TINY_FP32 || n->dtype != TINY_FP32) DECLINE("a step after the pool is not in fp32");
      ep->kind = CT_EPI_DIV;
      ep->scale = (float)v;
      (*nepi)++;
      prev = nd;
      continue;
    }
    tiny_epi ek = tiny_op_epi(n->op); /* the op table's epilogue column */
    switch (ek) {
    case TE_RELU:
    case TE_RINT: /* a QuantizeLinear's rounding, halves to even */
      if (operand(g, n, 0, views) != prev) DECLINE("a step after the pool reads another value");
      if (ek == TE_RINT && n->dtype != TINY_FP32) DECLINE("a step after the pool is not in fp32");
      ep->kind = ek == TE_RELU ? CT_EPI_RELU : CT_EPI_RINT;
      (*nepi)++;
      break;
    case TE_SHIFT:
    case TE_SCALE: {
      int k = operand(g, n, 0, views) == prev ? 1 : operand(g, n, 1, views) == prev ? 0 : -1;
      if (k < 0 || !const_of(g, n->src[k].node, &v)) DECLINE("a step after the pool is not with a constant");
      if (g->nodes[prev].dtype != TINY_FP32 || n->dtype != TINY_FP32) DECLINE("a step after the pool is not in fp32");
      ep->kind = CT_EPI_SCALE;
      ep->scale = ek == TE_SCALE ? (float)v : 1.0f;
      ep->shift = ek == TE_SHIFT ? (float)v : 0.0f;
      (*nepi)++;
      break;
    }
    case TE_LOWER:
    case TE_UPPER: { /* a clamp, min(max(x, lo), hi) (contract.c's map_epilogue) */
      int k = operand(g, n, 0, views) == prev ? 1 : operand(g, n, 1, views) == prev ? 0 : -1;
      if (k < 0 || !const_of(g, n->src[k].node, &v) || isnan(v)) DECLINE("a max / min after the pool is not with a constant");
      ct_epi *last_ep = *nepi ? &epi[*nepi - 1] : NULL;
      if (ek == TE_UPPER && last_ep && last_ep->kind == CT_EPI_CLAMP && last_ep->hi == INFINITY && i > 1 &&
          tiny_op_epi(g->nodes[prev].op) == TE_LOWER) {
        last_ep->hi = (float)v;
        break;
      }
      ep->kind = CT_EPI_CLAMP;
      ep->lo = ek == TE_LOWER ? (float)v : -INFINITY;
      ep->hi = ek == TE_UPPER ? (float)v : INFINITY;
      (*nepi)++;
      break;
    }
    default: DECLINE("a step after the pool is not relu, rint, a cast, x*c / x+c / x/c, or a max / min with a constant");
    }
    prev = nd;
  }
  *last = prev;
  return true;
}

/* Block bi reduces two axes of a 4-D tensor's read (a pooling's shape);
 * idx: that read classified. */
static bool window_read(const poly_view *pv, int bi, poly_idx *idx, bool *fill, double *fv) {
  const poly_block_info *b = poly_block(pv, bi);
  int rank = 0;
  if (b->kind != POLY_REDUCE || b->nout != 4 || b->nvars != 6 || b->naccess != 2) return false;
  return poly_access_axes(pv, bi, 0, &rank, idx, fill, fv) && rank == 4;
}

/* Axis ix as stride*o + dil*k + cst over output variable o and window
 * variable k; an extent-1 variable's coefficient is isl's choice (1 then).
 * A window whose stride is its width reads as a plain AFFINE index (a
 * mixed-radix linearization: 2x2 stride 2), so this reads coefficients,
 * not poly_idx's kind. */
static bool window_axis(const poly_idx *ix, int nvars, const int64_t *size, int o, int k, int64_t *stride, int64_t *dil,
                        int64_t *off) {
  if (!ix->lin) return false;
  for (int u = 0; u < nvars; u++)
    if (u != o && u != k && size[u] > 1 && ix->coef[u] != 0) return false;
  *stride = size[o] > 1 ? ix->coef[o] : 1;
  *dil = size[k] > 1 ? ix->coef[k] : 1;
  *off = ix->cst;
  return *stride >= 1 && *dil >= 1;
}

bool ct_read_pool(const ct_src *c, int r, ct_pool *out, const char **why) {
  const fn_function *f = c->f;
  const fn_kernel *K = &f->kernels[r];
  const rg_region *R = &f->part->regions[K->region];
  const rg_info *info = R->info;
  const tiny_graph *g = c->g;
  memset(out, 0, sizeof *out);
  *why = NULL;
  if (!info || info->nblocks < 1) return false;
  poly_idx idx[TINY_MAX_RANK];
  bool fill = false;
  double fv = 0;
  if (!window_read(c->pv, info->blocks[0], idx, &fill, &fv)) {
    for (int i = 1; i < info->nblocks; i++)
      if (window_read(c->pv, info->blocks[i], idx, &fill, &fv)) DECLINE("the region computes the pool's input");
    return false; /* not a pooling */
  }
  const poly_block_info *b = poly_block(c->pv, info->blocks[0]);
  const tiny_node *red = &g->nodes[b->node];
  tiny_reduce_op op = red->a.reduce.op;
  if (red->op != TINY_REDUCE || (op != TINY_RMAX && op != TINY_RSUM)) DECLINE("the window reduction is neither a max nor a sum");
  if (red->a.reduce.has_init) DECLINE("the window reduction has an initial value");
  tiny_dtype in_dt = g->nodes[red->src[0].node].dtype, acc = red->a.reduce.dtype;
  /* a sum accumulates in fp32; a max is exact in the input's own dtype */
  if (acc != TINY_FP32 && !(op == TINY_RMAX && acc == in_dt)) DECLINE("the window reduction does not accumulate in fp32");
  int64_t size[POLY_MAX_VARS];
  ct_block_sizes(g, b, size);
  int64_t st[2], dl[2], off[2];
  if (!var_only(&idx[0], b->nvars, size, 0) || !var_only(&idx[1], b->nvars, size, 1) ||
      !window_axis(&idx[2], b->nvars, size, 2, 4, &st[0], &dl[0], &off[0]) ||
      !window_axis(&idx[3], b->nvars, size, 3, 5, &st[1], &dl[1], &off[1]))
    DECLINE("the input is not read as X[n, c, oh*s + kh*d - p, ow*s + kw*d - p]");
  if (fill && isnan(fv)) DECLINE("the padding is NaN");
  /* what is read: the base tensor, through views and exact widenings only */
  const poly_access_info *ai = &b->access[0];
  for (int i = 0; i < ai->nvia; i++) {
    const tiny_node *v = &g->nodes[ai->via[i]];
    /* a half tensor holds its pad value rounded (the interpreter's PAD) */
    if (v->op == TINY_PAD && v->dtype == TINY_FP16) fv = ut_round_f16((float)fv);
    if (v->op == TINY_PAD && v->dtype == TINY_BF16) fv = ut_round_bf16((float)fv);
    if (v->op != TINY_CAST) continue;
    tiny_dtype from = g->nodes[v->src[0].node].dtype, to = v->a.cast.to;
    if (!(from == to || (to == TINY_FP32 && (from == TINY_FP16 || from == TINY_BF16))))
      DECLINE("the input passes a rounding cast");
  }
  int xslot = ct_slot_of(K, f, ai->tensor);
  if (xslot < 0) DECLINE("the input is not a buffer of the kernel");
  tiny_dtype xdt = f->buffers[f->buffer_of[ai->tensor]].dtype;
  if (!half_or_single(xdt)) DECLINE("the input is not fp32/fp16/bf16");
  const tiny_shape *xs = &g->nodes[ai->tensor].shape;
  out->n = xs->d[0].n, out->c = xs->d[1].n, out->h = xs->d[2].n, out->w = xs->d[3].n;
  out->kh = size[4], out->kw = size[5], out->oh = size[2], out->ow = size[3];
  if (size[0] != out->n || size[1] != out->c) DECLINE("the pool's batch or channels are not the input's");
  for (int q = 0; q < 2; q++) {
    int64_t in = xs->d[2 + q].n, outn = size[2 + q], k = size[4 + q];
    /* one output along the axis: its stride is isl's choice (1); where 1
     * does not give that one output, the window's width (a 2x2 pool of a
     * 3-row input: stride 2), as a ShapeSet object's larger bindings read it */
    if (outn == 1 && in + -off[q] - dl[q] * (k - 1) - 1 >= 1) st[q] = dl[q] * k;
    out->stride[q] = st[q];
    out->dil[q] = dl[q];
    int64_t lo = -off[q], hi = (outn - 1) * st[q] + dl[q] * (k - 1) + 1 - in - lo;
    if (lo < 0) DECLINE("the window starts inside the input (a crop)");
    out->pad[q] = lo;
    out->pad[2 + q] = hi > 0 ? hi : 0; /* hi < 0: the last columns are never read */
    int64_t e = in + lo + out->pad[2 + q] - dl[q] * (k - 1) - 1;
    if (e < 0 || e / st[q] + 1 != outn) DECLINE("the output size does not match the window");
    if ((lo || hi > 0) && !fill) DECLINE("the window reads outside the input without padding");
  }
  out->sum = op == TINY_RSUM;
  out->fill = fill ? fv : 0.0;
  int last = -1;
  int steps[4 * CT_MAX_EPI], nsteps = 0;
  if (info->nblocks - 1 > 4 * CT_MAX_EPI) DECLINE("too many steps after the pool");
  for (int i = 1; i < info->nblocks; i++) steps[nsteps++] = poly_block(c->pv, info->blocks[i])->node;
  if (!ct_epi_chain(g, steps, nsteps, b->node, false, out->epi, &out->nepi, &last, why)) return false;
  if (R->nout != 1 || R->out_values[0] != last) DECLINE("the region writes a value besides the pool's result");
  int yslot = ct_slot_of(K, f, last);
  tiny_dtype ydt = f->buffers[f->buffer_of[last]].dtype;
  if (yslot < 0 || !half_or_single(ydt)) DECLINE("the output is not an fp32/fp16/bf16 buffer");
  out->X = (ct_tensor){ai->tensor, xslot, xdt, 0};
  out->Y = (ct_tensor){last, yslot, ydt, 0};
  return true;
}
