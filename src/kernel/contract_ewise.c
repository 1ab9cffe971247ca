/* contract_ewise.c — single reductions and elementwise chains read as the
 * simple kernels of a target (the CUDA backend's cuda_gen_reduce and
 * cuda_gen_ewise).
 * Needs: a region's blocks in the Poly-View, the Function, the row reading
 * (contract_row.c: peeled casts, strides).  Gives: ct_read_reduce,
 * ct_read_ewise (contract.h).
 *
 * A reduction's input must be a strided fp32/fp16/bf16 buffer whose kept
 * axes split into [outer][inner] and whose reduced axes fold into one.  An
 * elementwise chain is read as instructions: inputs as strides over the
 * output's axes (0: broadcast), constants rounded to their dtype, values
 * of the region read at the same point, views passed through. */
#include <stdlib.h>
#include <string.h>

#include "harp/polycore.h"
#include "harp/region.h"
#include "kernel/contract.h"
#include "util/util.h"

#define DECLINE(msg) \
  do {               \
    *why = (msg);    \
    return false;    \
  } while (0)

static const tiny_node *node(const ct_row *w, int n) { return &w->s->g->nodes[n]; }

static ct_tensor tensor(const ct_row *w, int n, int64_t off) {
  return (ct_tensor){n, ct_row_slot_of(w, n), ct_row_storage(w, n), off};
}

/* Fold the variables `vars` (outermost first) of one group: each moving
 * one's stride is the next moving one's times its extent.  Gives the
 * innermost stride and the element count. */
static bool fold_group(const int *vars, int n, const int64_t *st, const int64_t *size, int64_t *inner_stride,
                       int64_t *count) {
  int64_t cnt = 1, want = 0;
  bool any = false;
  *inner_stride = 1;
  for (int i = n - 1; i >= 0; i--) {
    int v = vars[i];
    if (size[v] <= 1) continue;
    if (any && st[v] != want) return false;
    if (!any) *inner_stride = st[v];
    any = true;
    want = st[v] * size[v];
    cnt *= size[v];
  }
  *count = cnt;
  return true;
}

/* The kept variables [0, nout) of a block with strides st split at some p
 * into [0, p) outer and [p, nout) inner, each folding into one. */
static bool split_kept(int nout, const int64_t *st, const int64_t *size, ct_reduce *o) {
  for (int p = nout; p >= 0; p--) {
    int ov[POLY_MAX_VARS], iv[POLY_MAX_VARS];
    for (int v = 0; v < p; v++) ov[v] = v;
    for (int v = p; v < nout; v++) iv[v - p] = v;
    if (fold_group(ov, p, st, size, &o->s_outer, &o->outer) && fold_group(iv, nout - p, st, size, &o->s_inner, &o->inner))
      return true;
  }
  return false;
}

/* The steps after REDUCE red (nodes[0..nn)): a division by its count
 * first (a mean: red's input elements over its own), then ct_epi_chain's
 * steps; *last: the chain's last node. */
static bool reduce_epilogue(const ct_row *w, int red, const int *nodes, int nn, ct_reduce *out, int *last, const char **why) {
  *last = red;
  if (nn == 0) return true;
  const tiny_node *d = node(w, nodes[0]);
  if (d->op == TINY_FDIV && d->src[0].node == red && d->dtype == TINY_FP32) {
    int c = d->src[1].node;
    while (c >= 0 && (node(w, c)->op == TINY_RESHAPE || node(w, c)->op == TINY_EXPAND)) c = node(w, c)->src[0].node;
    const tiny_node *x = node(w, node(w, red)->src[0].node);
    int64_t count = tiny_shape_numel(&x->shape) / tiny_shape_numel(&node(w, red)->shape);
    if (c < 0 || node(w, c)->op != TINY_CONST || node(w, c)->a.cnst.value != (double)count) return false;
    out->div_count = true;
    *last = nodes[0];
    nodes++, nn--;
  }
  return ct_epi_chain(w->s->g, nodes, nn, *last, true, out->epi, &out->nepi, last, why);
}

bool ct_read_reduce(const ct_row *w, bool epilogue, ct_reduce *out, const char **why) {
  int ns[4 * CT_MAX_EPI];
  memset(out, 0, sizeof *out);
  int nn = ct_row_compute_nodes(w, ns, 4 * CT_MAX_EPI);
  if (nn < 1 || (nn > 1 && !epilogue) || w->R->nout != 1) return false;
  int bi = ct_row_block_of(w, ns[0]), last = ns[0];
  const poly_block_info *b = poly_block(w->s->pv, bi);
  const tiny_node *n = node(w, b->node);
  if (b->kind != POLY_REDUCE || n->a.reduce.dtype != TINY_FP32) return false;
  if (!reduce_epilogue(w, b->node, ns + 1, nn - 1, out, &last, why)) return false;
  if (w->R->out_values[0] != last) return false;
  int x = ct_row_unpeel(w, b->access[0].tensor); /* a peeled CAST reads its source point for point */
  tiny_dtype xs = ct_row_slot_of(w, x) < 0 ? TINY_I32 : ct_row_storage(w, x);
  if (!tiny_dtype_is_float(xs)) DECLINE("the reduction input is not an fp32/fp16/bf16 buffer");
  for (int v = 0; v < b->access[0].nvia; v++)
    if (node(w, b->access[0].via[v])->op == TINY_CAST) DECLINE("the reduction reads through a cast");
  int64_t st[POLY_MAX_VARS], off, size[POLY_MAX_VARS];
  if (!ct_row_strides(w, bi, 0, st, &off)) DECLINE("the reduction input is not a strided view");
  ct_block_sizes(w->s->g, b, size);
  int red[POLY_MAX_VARS], nred = 0;
  for (int v = b->nout; v < b->nvars; v++) red[nred++] = v;
  if (!fold_group(red, nred, st, size, &out->s_red, &out->red)) DECLINE("the reduced axes do not fold into one");
  if (!split_kept(b->nout, st, size, out)) DECLINE("the kept axes do not split into [outer][inner]");
  out->op = n->a.reduce.op;
  out->has_init = n->a.reduce.has_init;
  out->init = n->a.reduce.init;
  out->in = tensor(w, x, off);
  out->out = tensor(w, last, 0);
  return true;
}

/* ---- elementwise chains ---------------------------------------------------------- */
typedef struct ew_read {
  const ct_row *w;
  const ct_ew_caps *caps;
  ct_ewise *s;
  int *vof; /* node -> instruction + 1 */
  const char *bad; /* NULL: fine so far; "": no such chain; else why the kernel does not take it */
} ew_read;

/* An integer dtype other than bool (i32, i8, u8): no fp32 row kernel reads it. */
static bool int_num(tiny_dtype t) { return t == TINY_I32 || t == TINY_I8 || t == TINY_U8; }

/* The instruction of constant node tn. */
static int ew_const(ew_read *r, const tiny_node *tn) {
  ct_ewise *s = r->s;
  if (s->ninstr >= r->caps->max_instr - 1 || int_num(tn->dtype)) return r->bad = "", -1;
  double v = tn->a.cnst.value;
  if (tn->dtype == TINY_FP16) v = ut_round_f16((float)v);
  else if (tn->dtype == TINY_BF16) v = ut_round_bf16((float)v);
  else if (tn->dtype == TINY_BOOL) v = v != 0;
  s->instr[s->ninstr] = (ct_ew_instr){.op = TINY_CONST, .imm = v, .dtype = tn->dtype};
  return s->ninstr++;
}

/* The instruction loading tensor t through access a of block bi (an input
 * shared by reads at the same offset and strides). */
static int ew_input(ew_read *r, int bi, int a, int t) {
  ct_ewise *s = r->s;
  int64_t st[POLY_MAX_VARS], off;
  if (ct_row_slot_of(r->w, t) < 0 || int_num(ct_row_storage(r->w, t)) || !ct_row_strides(r->w, bi, a, st, &off))
    return r->bad = "an input is not a strided fp/bool buffer", -1;
  int in = -1;
  for (int i = 0; i < s->ninputs && in < 0; i++)
    if (s->in[i].t.node == t && s->in[i].t.offset == off && !memcmp(s->in[i].strides, st, sizeof(int64_t) * (size_t)s->rank))
      in = i;
  if (in < 0) {
    if (s->ninputs >= r->caps->max_in) return r->bad = "more inputs than the elementwise kernel takes", -1;
    in = s->ninputs++;
    s->in[in].t = tensor(r->w, t, off);
    memcpy(s->in[in].strides, st, sizeof(int64_t) * (size_t)s->rank);
  }
  if (s->ninstr >= r->caps->max_instr - 1) return r->bad = "", -1;
  s->instr[s->ninstr] = (ct_ew_instr){.op = TINY_INPUT, .input = in, .dtype = s->in[in].t.dtype};
  return s->ninstr++;
}

/* Block k of the region (its node n) as instructions, its operands first. */
static void ew_block(ew_read *r, int k, const tiny_shape *os) {
  const ct_row *w = r->w;
  const poly_block_info *b = poly_block(w->s->pv, w->R->blocks[k]);
  const tiny_node *n = node(w, b->node);
  if (b->kind != POLY_EWISE && b->kind != POLY_MOVEMENT_AFFINE) r->bad = "";
  else if (b->nvars != os->rank || !tiny_shape_equal(&n->shape, os)) r->bad = "";
  else if (int_num(n->dtype) || (b->kind == POLY_EWISE && !r->caps->op_ok(n->op))) r->bad = "";
  int val[TINY_MAX_SRC + 1] = {0};
  int nr = b->kind == POLY_EWISE ? n->nsrc : 1;
  for (int a = 0; a < nr && !r->bad; a++) {
    int t = b->access[a].tensor;
    if (r->vof[t]) { /* a value of the region: at the same point */
      bool pw = false;
      harp_error e2 = {0};
      if (poly_access_is_pointwise(&e2, w->s->pv, w->R->blocks[k], a, &pw) || !pw)
        r->bad = "reads a value of the region at another point";
      val[a] = r->vof[t] - 1;
    } else if (node(w, t)->op == TINY_CONST) { /* a literal only where no point reads a pad of it */
      val[a] = b->access[a].nfill ? (r->bad = "reads a constant through padding", -1) : ew_const(r, node(w, t));
    } else {
      val[a] = ew_input(r, w->R->blocks[k], a, t);
    }
  }
  if (r->bad) return;
  if (b->kind == POLY_MOVEMENT_AFFINE) {
    r->vof[b->node] = val[0] + 1;
    return;
  }
  ct_ewise *s = r->s;
  s->instr[s->ninstr++] = (ct_ew_instr){.op = n->op, .a = val[0], .b = n->nsrc > 1 ? val[1] : -1, .c = n->nsrc > 2 ? val[2] : -1,
                                        .dtype = n->op == TINY_CAST ? n->a.cast.to : n->dtype};
  r->vof[b->node] = s->ninstr;
}

harp_status ct_read_ewise(const ct_row *w, const ct_ew_caps *caps, harp_error *e, ct_ewise *s, bool *ok, const char **why) {
  const rg_region *R = w->R;
  *ok = false;
  memset(s, 0, sizeof *s);
  if (R->nout != 1 || R->nblocks < 1 || R->nblocks > caps->max_instr / 2) return HARP_OK;
  int out = R->out_values[0];
  const tiny_shape *os = &node(w, out)->shape;
  if (os->rank > caps->max_rank) return HARP_OK;
  s->rank = os->rank;
  for (int d = 0; d < os->rank; d++) s->shape[d] = os->d[d].n;
  ew_read r = {w, caps, s, ut_xcalloc((size_t)w->s->g->n + 1, sizeof(int)), NULL};
  if (!r.vof) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  for (int k = 0; k < R->nblocks && !r.bad; k++) ew_block(&r, k, os);
  int last = r.vof[out] - 1;
  free(r.vof);
  if (r.bad) {
    if (*r.bad) *why = r.bad;
    return HARP_OK;
  }
  if (last != s->ninstr - 1) { /* the output is a copy of an earlier value: repeat it */
    if (last < 0 || s->ninstr >= caps->max_instr) return HARP_OK;
    s->instr[s->ninstr++] = (ct_ew_instr){.op = TINY_CAST, .a = last, .dtype = TINY_FP32};
  }
  s->out = tensor(w, out, 0);
  *ok = true;
  return HARP_OK;
}
