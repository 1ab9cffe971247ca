/* onnx_flow_ops.c — ONNX ops whose output shape depends on the values,
 * as host steps of the host program (harp/flow.h, FLOW_OP): the graph
 * is cut at the node (as at a run-time If), the host computes the op on the
 * tensors the segment before it left (src/runtime/flow_ops.c), and the
 * segment after it imports the results with their unknown dims as shape
 * variables, compiled for the sizes each run brings.
 *
 * NonMaxSuppression, NonZero of run-time values, Unique, RoiAlign and
 * GridSample are always host steps; so is Compress;
 * TopK (a K known at run time, or an axis too long for its comparison
 * mask), Range (bounds known at run time) and Slice (starts / ends / axes /
 * steps known at run time) become one where their graph form cannot be
 * built (oxf_runtime_inputs).  Without onnx_opts.host_flow (harp
 * compile, dump) each stays the Unsupported error it was, naming the node.
 * Needs: onnx_flow.c (cuts, slots, steps).  Gives: ox_find_host, oxf_host_op,
 * oxf_runtime_inputs. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_flow_int.h"

bool oxf_runtime_inputs(ox_ctx *c, int from, int to) {
  if (!c->opts || !c->opts->host_flow) return false;
  for (int i = from; i < to && i < (int)c->node->n_input; i++) {
    ox_val *x = c->node->input[i][0] ? ox_find(c, c->node->input[i]) : NULL;
    if (x && ((!x->has_i && !x->has_t) || oxf_val_runtime(c, x))) return true;
  }
  return false;
}

/* ---- sizes known at run time, as values ------------------------------------------------ */
typedef struct sym_check {
  const ox_ctx *c;
  bool all;
} sym_check;

static void check_sym(void *ctx, const char *sym) {
  sym_check *k = ctx;
  k->all &= oxf_sym_runtime(k->c, sym);
}

bool oxf_dim_runtime(const ox_ctx *c, const fe_dim *d) {
  int64_t v;
  if (fe_dim_is_int(d, &v) || !c->fl) return false;
  sym_check k = {c, true};
  fe_dim_syms(d, check_sym, &k);
  return k.all;
}

bool oxf_val_runtime(const ox_ctx *c, const ox_val *x) {
  bool any = false;
  int64_t v;
  for (int64_t i = 0; x->has_i && i < x->in; i++) {
    if (fe_dim_is_int(x->iv[i], &v)) continue;
    if (!oxf_dim_runtime(c, x->iv[i])) return false;
    any = true;
  }
  return any;
}

typedef struct sym_need {
  ox_ctx *c;
  harp_status st;
} sym_need;

static void need_sym(void *ctx, const char *sym) {
  sym_need *k = ctx;
  if (!k->st) k->st = oxf_need_sym(k->c, sym);
}

/* The value of run-time size d as an int32 scalar of the current segment:
 * c0 + sum k_i atom_i, an atom's value the count of a tensor of ones that
 * long (its shape variables bound by the slots imported for them). */
static hg_val dim_value(ox_ctx *c, const fe_dim *d) {
  hg_graph *g = c->g;
  sym_need k = {c, HARP_OK};
  fe_dim_syms(d, need_sym, &k);
  if (k.st) return -1;
  hg_val v = hg_const_typed(g, (double)d->c, TINY_I32), one = hg_const_typed(g, 1, TINY_I32);
  int ax = 0;
  for (int i = 0; i < d->nt && v > 0; i++) {
    const fe_dim *a = fe_dim_atom(c->A, d->t[i].atom);
    if (!a) return ox_fail(c, HARP_E_NO_MEMORY, "out of memory"), -1;
    hg_val n = hg_reduce(g, HG_OP_SUM, fe_expand(g, fe_reshape(g, one, &(fe_shape){.rank = 1, .d = {fe_dim_int(c->A, 1)}}),
                                                  &(fe_shape){.rank = 1, .d = {a}}), &ax, 1, false);
    v = hg_add(g, v, d->t[i].k == 1 ? n : hg_mul(g, n, hg_const_typed(g, (double)d->t[i].k, TINY_I32)));
  }
  return ox_check(c, v) ? -1 : v;
}

hg_val oxf_ints_value(ox_ctx *c, ox_val *x) {
  hg_graph *g = c->g;
  if (x->in > 4096) return ox_fail(c, HARP_E_LIMIT, "%" PRId64 " run-time sizes in one value", x->in), -1;
  hg_val *el = ut_xmalloc(sizeof *el * (size_t)(x->in + 1)), v = -1;
  if (!el) return ox_fail(c, HARP_E_NO_MEMORY, "out of memory"), -1;
  fe_shape one = {.rank = 1, .d = {fe_dim_int(c->A, 1)}}, s = {.rank = x->irank};
  bool ok = true;
  for (int64_t i = 0; i < x->in && ok; i++) {
    int64_t n;
    el[i] = fe_dim_is_int(x->iv[i], &n) ? hg_const_typed(g, (double)n, TINY_I32) : dim_value(c, x->iv[i]);
    ok = el[i] > 0 && (el[i] = fe_reshape(g, el[i], &one)) > 0;
  }
  for (int i = 0; i < x->irank; i++) s.d[i] = fe_dim_int(c->A, x->ishape[i]);
  if (ok) v = x->in == 1 ? el[0] : hg_concat(g, el, (int)x->in, 0);
  if (v > 0) v = fe_reshape(g, v, &s);
  if (v > 0 && x->oty == OX_BOOL) v = hg_cast(g, v, TINY_BOOL);
  free(el);
  if (c->e->code || ox_check(c, v)) return -1;
  return x->v = v;
}

/* The shape of a host op's output: s's dims where known, a shape variable
 * of its own (named after the output) where d[i] is NULL, or the j-th of
 * `share` (another output's, the same sizes: TopK's values and indices)
 * for its j-th NULL when share has them. */
static harp_status out_shape(ox_ctx *c, const char *name, const fe_shape *s, const fe_dim **share, int nshare, fe_shape *out) {
  *out = *s;
  for (int i = 0, j = 0; i < s->rank; i++)
    if (!s->d[i]) {
      out->d[i] = j < nshare ? share[j] : oxf_fresh_dim(c, name, i);
      if (!out->d[i]) return c->e->code;
      if (j >= nshare) share[j] = out->d[i];
      j++;
    }
  return HARP_OK;
}

harp_status oxf_host_op(ox_ctx *c, flow_op op, const char *why, const int64_t *attr, int nattr, int nout, const int *oty,
                      const fe_shape *shp) {
  return oxf_host_op_f(c, op, why, attr, nattr, NULL, 0, nout, oty, shp);
}

harp_status oxf_host_op_f(ox_ctx *c, flow_op op, const char *why, const int64_t *attr, int nattr, const double *fattr, int nf, int nout,
                        const int *oty, const fe_shape *shp) {
  char where[200];
  oxf_node_where(c, where, sizeof where);
  if (nattr > FLOW_MAX_ATTR || nf > FLOW_MAX_ATTR) return ox_fail(c, HARP_E_INTERNAL, "%d attributes for a host op", nattr);
  if (oxf_ensure(c, why) || oxf_export(c, (size_t)c->node_index)) return c->e->code;
  int nin = (int)c->node->n_input, *in = ut_xcalloc((size_t)nin + 1, sizeof *in);
  if (!in) return ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
  for (int k = 0; k < nin; k++) {
    bool failed = false;
    ox_val *x = ox_in(c, k, &failed);
    in[k] = failed ? -2 : x ? oxf_host_in(c, x) : -1;
    if (in[k] < -1 || (x && in[k] < 0)) return free(in), c->e->code ? c->e->code : ox_fail(c, HARP_E_INTERNAL, "no slot");
  }
  int st = oxf_add_step(c, FLOW_OP, where);
  if (st < 0) return free(in), c->e->code;
  flow_step *sp = &c->fl->f->steps[st];
  sp->op = op;
  for (int k = 0; k < nattr; k++) sp->attr[k] = attr[k];
  for (int k = 0; k < nf; k++) sp->fattr[k] = fattr[k];
  for (int k = 0; k < nin; k++)
    if (!flow_push(&c->fl->f->steps[st].in, &c->fl->f->steps[st].nin, in[k])) return free(in), ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
  free(in);
  const fe_dim *share[TINY_MAX_RANK]; /* the outputs' unknown sizes, in order: the same for each output */
  int nshare = 0;
  for (int k = 0; k < nout; k++) {
    int slot = -1, nul = 0;
    for (int i = 0; i < shp[k].rank; i++) nul += !shp[k].d[i];
    if (k < (int)c->node->n_output && c->node->output[k][0]) {
      fe_shape s;
      tiny_dtype dt;
      if (!ox_dtype(oty[k], &dt)) return ox_fail(c, HARP_E_UNSUPPORTED, "output %d: element type %s", k, ox_type_name(oty[k]));
      if (out_shape(c, c->node->output[k], &shp[k], share, nshare, &s) || (slot = oxf_new_slot(c, c->node->output[k], dt, &s)) < 0)
        return c->e->code;
      if (nul > nshare) nshare = nul;
      ox_val *y = ox_def_mark(c, k);
      if (!y) return c->e->code;
      y->slot = slot + 1, y->oty = oty[k];
    }
    if (!flow_push(&c->fl->f->steps[st].out, &c->fl->f->steps[st].nout, slot)) return ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
  }
  return oxf_enter(c, (size_t)c->node_index + 1);
}

/* ---- the ops --------------------------------------------------------------------------- */
static hg_val input(ox_ctx *c, int i, const fe_shape **s) {
  hg_val v = ox_tensor(c, i);
  if (v > 0) *s = ox_shape_of(c, v);
  return v;
}

/* Input i's ONNX element type: its own, else its graph value's (int32 is
 * harp's int64). */
static int oty_of(ox_ctx *c, int i) {
  ox_val *x = ox_find(c, c->node->input[i]);
  if (!x) return OX_FLOAT;
  if (x->oty) return x->oty;
  if (x->has_i) return OX_INT64;
  switch (x->has_t ? x->t.dtype : x->v > 0 ? hg_val_dtype(c->g, x->v) : TINY_FP32) {
  case TINY_FP16: return OX_FLOAT16;
  case TINY_BF16: return OX_BFLOAT16;
  case TINY_I32: return OX_INT64;
  case TINY_BOOL: return OX_BOOL;
  case TINY_I8: return OX_INT8;
  case TINY_U8: return OX_UINT8;
  default: return OX_FLOAT;
  }
}

/* boxes [B, N, 4], scores [B, C, N] -> [selected, 3] */
static harp_status op_nms(ox_ctx *c) {
  const fe_shape *bs = NULL, *ss = NULL;
  int64_t cpb, v;
  if (input(c, 0, &bs) < 0 || input(c, 1, &ss) < 0 || ox_attr_int(c, "center_point_box", 0, &cpb)) return c->e->code;
  if (cpb != 0 && cpb != 1) return ox_fail(c, HARP_E_INVALID_ARG, "center_point_box %" PRId64 " (0 or 1)", cpb);
  if (bs->rank != 3 || ss->rank != 3 || (fe_dim_is_int(bs->d[2], &v) && v != 4))
    return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "boxes must be [batch, boxes, 4] and scores [batch, classes, boxes]");
  if (hg_val_dtype(c->g, ox_tensor(c, 0)) != TINY_FP32 || hg_val_dtype(c->g, ox_tensor(c, 1)) != TINY_FP32)
    return ox_fail(c, HARP_E_UNSUPPORTED, "boxes and scores must be float (harp's NonMaxSuppression reads fp32)");
  fe_shape o = {.rank = 2, .d = {NULL, fe_dim_int(c->A, 3)}};
  return oxf_host_op(c, FLOW_FOP_NMS, "NonMaxSuppression's output size depends on the scores", &cpb, 1, 1, (int[]){OX_INT64}, &o);
}

/* x -> [rank, count] */
static harp_status op_nonzero(ox_ctx *c) {
  const fe_shape *xs = NULL;
  if (input(c, 0, &xs) < 0) return c->e->code;
  fe_shape o = {.rank = 2, .d = {fe_dim_int(c->A, xs->rank ? xs->rank : 1), NULL}};
  return oxf_host_op(c, FLOW_FOP_NONZERO, "NonZero's output size depends on the values", NULL, 0, 1, (int[]){OX_INT64}, &o);
}

/* x -> Y, indices, inverse_indices, counts */
static harp_status op_unique(ox_ctx *c) {
  const fe_shape *xs = NULL;
  int64_t srt, a, attr[3] = {0, 0, 0};
  int axis;
  if (input(c, 0, &xs) < 0 || ox_attr_int(c, "sorted", 1, &srt)) return c->e->code;
  attr[0] = ox_attr(c, "axis") != NULL, attr[2] = srt != 0;
  if (attr[0] && (ox_attr_int(c, "axis", 0, &a) || ox_norm_axis(c, a, xs->rank, &axis))) return c->e->code;
  if (attr[0]) attr[1] = axis;
  fe_shape o[4] = {{.rank = 1}, {.rank = 1}, {.rank = 1}, {.rank = 1}};
  if (attr[0]) {
    o[0] = *xs, o[0].d[axis] = NULL;
    o[2].d[0] = xs->d[axis];
  } else {
    o[2].d[0] = fe_dim_int(c->A, 1);
    for (int i = 0; i < xs->rank && o[2].d[0]; i++) o[2].d[0] = fe_dim_mul(c->A, o[2].d[0], xs->d[i]);
    if (!o[2].d[0]) return ox_fail(c, HARP_E_LIMIT, "a size expression too large");
  }
  int x = oty_of(c, 0), oty[4] = {x, OX_INT64, OX_INT64, OX_INT64};
  return oxf_host_op(c, FLOW_FOP_UNIQUE, "Unique's output size depends on the values", attr, 3, 4, oty, o);
}

/* x, condition -> the slices whose condition is true.  A constant
 * condition is a gather of those slices, in the graph. */
static harp_status op_compress(ox_ctx *c) {
  const fe_shape *xs = NULL;
  int64_t a, attr[2] = {0, 0};
  int axis = 0;
  hg_val x = input(c, 0, &xs);
  if (x < 0) return c->e->code;
  attr[0] = ox_attr(c, "axis") != NULL;
  if (attr[0] && (ox_attr_int(c, "axis", 0, &a) || ox_norm_axis(c, a, xs->rank, &axis))) return c->e->code;
  attr[1] = axis;
  bool failed = false;
  ox_val *cv = ox_in(c, 1, &failed);
  if (failed) return c->e->code;
  if (!cv) return ox_fail(c, HARP_E_ARITY, "input 1 (condition) is required");
  fe_shape o = *xs;
  if (!attr[0]) o.rank = 1;
  o.d[attr[0] ? axis : 0] = NULL;
  return oxf_host_op(c, FLOW_FOP_COMPRESS, "Compress's output size depends on the condition", attr, 2, 1, (int[]){oty_of(c, 0)}, &o);
}

static int pick(const char *s, const char *const *names, int n) {
  for (int i = 0; i < n; i++)
    if (!strcmp(s, names[i])) return i;
  return -1;
}

/* X [N, C, H, W], rois [R, 4], batch_indices [R] -> [R, C, oh, ow] */
static harp_status op_roialign(ox_ctx *c) {
  const fe_shape *xs = NULL, *rs = NULL, *bs = NULL;
  char mode[16], ctm[32];
  int64_t attr[5] = {0, 1, 1, 0, 0};
  double scale;
  if (input(c, 0, &xs) < 0 || input(c, 1, &rs) < 0 || input(c, 2, &bs) < 0 || ox_attr_str(c, "mode", "avg", mode, sizeof mode) ||
      ox_attr_str(c, "coordinate_transformation_mode", c->opset >= 16 ? "half_pixel" : "output_half_pixel", ctm, sizeof ctm) ||
      ox_attr_int(c, "output_height", 1, &attr[1]) || ox_attr_int(c, "output_width", 1, &attr[2]) ||
      ox_attr_int(c, "sampling_ratio", 0, &attr[3]) || ox_attr_float(c, "spatial_scale", 1.0, &scale))
    return c->e->code;
  int m = pick(mode, (const char *const[]){"avg", "max"}, 2), h = pick(ctm, (const char *const[]){"output_half_pixel", "half_pixel"}, 2);
  if (m < 0) return ox_fail(c, HARP_E_INVALID_ARG, "mode \"%s\" (avg or max)", mode);
  if (h < 0) return ox_fail(c, HARP_E_INVALID_ARG, "coordinate_transformation_mode \"%s\"", ctm);
  if (attr[1] < 1 || attr[2] < 1 || attr[1] > 4096 || attr[2] > 4096 || attr[3] < 0 || attr[3] > 4096)
    return ox_fail(c, HARP_E_INVALID_ARG, "output %" PRId64 " x %" PRId64 ", sampling_ratio %" PRId64, attr[1], attr[2], attr[3]);
  if (xs->rank != 4 || rs->rank != 2 || bs->rank != 1)
    return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "X must be [N, C, H, W], rois [R, 4] and batch_indices [R]");
  if (hg_val_dtype(c->g, ox_tensor(c, 0)) != TINY_FP32 || hg_val_dtype(c->g, ox_tensor(c, 1)) != TINY_FP32)
    return ox_fail(c, HARP_E_UNSUPPORTED, "X and rois must be float (harp's RoiAlign reads fp32)");
  attr[0] = m, attr[4] = h;
  fe_shape o = {.rank = 4, .d = {rs->d[0], xs->d[1], fe_dim_int(c->A, attr[1]), fe_dim_int(c->A, attr[2])}};
  return oxf_host_op_f(c, FLOW_FOP_ROIALIGN, "RoiAlign samples where its rois say", attr, 5, &scale, 1, 1, (int[]){OX_FLOAT}, &o);
}

/* X [N, C, H, W], grid [N, Ho, Wo, 2] -> [N, C, Ho, Wo]; or 5-D, a grid of 3 */
static harp_status op_gridsample(ox_ctx *c) {
  const fe_shape *xs = NULL, *gs = NULL;
  char mode[16], pad[16];
  int64_t ac;
  if (input(c, 0, &xs) < 0 || input(c, 1, &gs) < 0 || ox_attr_str(c, "mode", c->opset >= 20 ? "linear" : "bilinear", mode, sizeof mode) ||
      ox_attr_str(c, "padding_mode", "zeros", pad, sizeof pad) || ox_attr_int(c, "align_corners", 0, &ac))
    return c->e->code;
  int m = pick(mode, c->opset >= 20 ? (const char *const[]){"linear", "nearest", "cubic"} : (const char *const[]){"bilinear", "nearest", "bicubic"}, 3);
  int p = pick(pad, (const char *const[]){"zeros", "border", "reflection"}, 3);
  if (m < 0) return ox_fail(c, HARP_E_INVALID_ARG, "mode \"%s\"", mode);
  if (p < 0) return ox_fail(c, HARP_E_INVALID_ARG, "padding_mode \"%s\"", pad);
  int64_t last, r = xs->rank;
  if (r == 5 && m == 2) return ox_fail(c, HARP_E_UNSUPPORTED, "cubic volumetric (5-D) sampling (onnxruntime has none either)");
  if ((r != 4 && r != 5) || gs->rank != r || (fe_dim_is_int(gs->d[r - 1], &last) && last != r - 2))
    return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "X must be [N, C, H, W] and grid [N, H_out, W_out, 2] (or 5-D, a grid of 3)");
  if (hg_val_dtype(c->g, ox_tensor(c, 0)) != TINY_FP32 || hg_val_dtype(c->g, ox_tensor(c, 1)) != TINY_FP32)
    return ox_fail(c, HARP_E_UNSUPPORTED, "X and grid must be float (harp's GridSample reads fp32)");
  int64_t attr[3] = {m, p, ac != 0};
  fe_shape o = {.rank = (int)r, .d = {xs->d[0], xs->d[1], gs->d[1], gs->d[2], r == 5 ? gs->d[3] : NULL}};
  return oxf_host_op(c, FLOW_FOP_GRIDSAMPLE, "GridSample samples where its grid says", attr, 3, 1, (int[]){OX_FLOAT}, &o);
}

static const struct {
  const char *name;
  ox_op_fn fn;
} ops[] = {{"Compress", op_compress},   {"GridSample", op_gridsample}, {"NonMaxSuppression", op_nms},
           {"NonZero", op_nonzero},     {"RoiAlign", op_roialign},     {"Unique", op_unique}};

ox_op_fn ox_find_host(const char *op) {
  for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
    if (!strcmp(ops[i].name, op)) return ops[i].fn;
  return NULL;
}

/* ---- the fallbacks of ops with a graph form --------------------------------------------- */
/* Inputs [from, to) known only at run time would let the graph form be
 * built were they fixed at import: harp run retries so if the import fails
 * further on (oxf_wanted), as it did before host steps. */
static void wanted(ox_ctx *c, int from, int to) {
  for (int i = from; i < to && i < (int)c->node->n_input; i++) {
    ox_val *x = c->node->input[i][0] ? ox_find(c, c->node->input[i]) : NULL;
    if (x && !x->has_i && !x->has_t) oxf_wanted(c, x);
  }
}

bool oxf_runtime_shape(ox_ctx *c, int from, int to) {
  if (!c->opts || !c->opts->host_flow || !c->fl) return false;
  for (int i = from; i < to && i < (int)c->node->n_input; i++) {
    ox_val *x = c->node->input[i][0] ? ox_find(c, c->node->input[i]) : NULL;
    const fe_shape *s = x && x->v > 0 ? ox_shape_of(c, x->v) : NULL;
    for (int d = 0; s && d < s->rank; d++)
      if (oxf_dim_runtime(c, s->d[d])) return true;
  }
  return false;
}

/* ScatterElements (nd false: along axis) or ScatterND with reduction red,
 * on the host. */
harp_status oxf_host_scatter(ox_ctx *c, bool nd, int axis, int red) {
  const fe_shape *xs = NULL;
  if (input(c, 0, &xs) < 0) return c->e->code;
  int64_t attr[2] = {axis, red};
  return oxf_host_op(c, nd ? FLOW_FOP_SCATTER_ND : FLOW_FOP_SCATTER_ELEMENTS, "a scatter of sizes known at run time", attr, 2, 1,
                     (int[]){oty_of(c, 0)}, xs);
}

/* TopK along axis with K known at run time (or too long an axis). */
harp_status oxf_host_topk(ox_ctx *c, int axis, bool largest, bool sorted) {
  const fe_shape *xs = NULL;
  if (input(c, 0, &xs) < 0) return c->e->code;
  fe_shape o = *xs;
  o.d[axis] = NULL;
  ox_val *kv = ox_find(c, c->node->input[1]);
  int64_t k;
  if (kv && kv->has_i && kv->in == 1 && fe_dim_is_int(kv->iv[0], &k)) o.d[axis] = fe_dim_int(c->A, k);
  int64_t attr[3] = {axis, largest, sorted};
  fe_shape os[2] = {o, o};
  wanted(c, 1, 2);
  return oxf_host_op(c, FLOW_FOP_TOPK, "TopK's K is known only at run time", attr, 3, 2, (int[]){oty_of(c, 0), OX_INT64}, os);
}

harp_status oxf_host_range(ox_ctx *c) {
  fe_shape o = {.rank = 1, .d = {NULL}};
  wanted(c, 0, 3);
  return oxf_host_op(c, FLOW_FOP_RANGE, "Range's length depends on values known only at run time", NULL, 0, 1,
                     (int[]){oty_of(c, 0)}, &o);
}

/* Slice by run-time bounds: the axes listed (when they are constants)
 * take run-time sizes, the others keep theirs; all do when the axes are
 * known only at run time. */
harp_status oxf_host_slice(ox_ctx *c) {
  const fe_shape *xs = NULL;
  if (input(c, 0, &xs) < 0) return c->e->code;
  fe_shape o = *xs;
  ox_val *av = c->node->n_input > 3 && c->node->input[3][0] ? ox_find(c, c->node->input[3]) : NULL;
  ox_val *sv = ox_find(c, c->node->input[1]);
  if (av && av->has_i) {
    for (int64_t k = 0; k < av->in; k++) {
      int64_t a;
      int ax;
      if (!fe_dim_is_int(av->iv[k], &a) || ox_norm_axis(c, a, xs->rank, &ax)) return c->e->code ? c->e->code : ox_need_value(c, av->iv[k], "an axis");
      o.d[ax] = NULL;
    }
  } else if (!av && sv && (sv->has_i || sv->has_t || sv->v > 0)) { /* axes 0 .. len(starts) - 1 */
    const fe_shape *ss = sv->v > 0 ? ox_shape_of(c, sv->v) : NULL;
    int64_t n = sv->has_i ? sv->in : sv->has_t ? ut_tensor_numel(&sv->t) : -1;
    if (ss && ss->rank == 1) fe_dim_is_int(ss->d[0], &n);
    for (int i = 0; i < xs->rank; i++)
      if (n < 0 || i < n) o.d[i] = NULL;
  } else {
    for (int i = 0; i < xs->rank; i++) o.d[i] = NULL;
  }
  wanted(c, 1, 5);
  return oxf_host_op(c, FLOW_FOP_SLICE, "Slice's bounds are known only at run time", NULL, 0, 1, (int[]){oty_of(c, 0)}, &o);
}
