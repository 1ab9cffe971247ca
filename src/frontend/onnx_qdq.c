/* onnx_qdq.c — QDQ fusion at import, as onnxruntime's QDQ transformer does it:
 * DequantizeLinear -> Conv / Gemm / MatMul -> [Relu | Clip] -> QuantizeLinear
 * becomes one contraction of the quantized integers with the requantization
 * (and the activation's bounds) in its epilogue, so that harp computes
 * what onnxruntime's int8 kernels compute (QLinearConv, QGemm,
 * QLinearMatMul), not the fp32 emulation of the graph.
 *
 * What the import knows of a value is its ox_qinfo (ox_val.qi):
 *  QI_INT      an activation between a Q and the DQs that alone read it: qv
 *              holds its integers (as fp32, exact), with one constant scale s
 *              and zero point z (the Q's output and each DQ's);
 *  QI_WEIGHT   a constant dequantized at import (onnx_quant.c's fold): its
 *              scales (one, or one per index of `axis`), zero points all 0;
 *  QI_SCALED   a fused contraction's output: acc * (sx * sw / sy), the
 *              QuantizeLinear of scale s that reads it rounds it, adds the
 *              zero point and saturates.
 * The contraction: acc = conv(qx - zx, qw) + qb in fp32 (integers, exact
 * while the partial sums stay below 2^24), times the per-channel multiplier
 * fl(fl(sx * sw) / sy) as onnxruntime computes it; halves to even.  DQ, DQ
 * -> Add / Mul -> Q and DQ -> Softmax -> Q follow onnxruntime's QLinearAdd,
 * QLinearMul and QLinearSoftmax the same way; a residual DQ, DQ -> Add /
 * Sum -> [Relu] -> Q is written so that it fuses into the epilogue of the
 * contraction that made one operand (ox_qdq_binary).
 * A Reshape / Flatten / Transpose / (Un)Squeeze of a DQ's output moves its
 * integers too (ox_qdq_move), so that the Q of the same parameters after it
 * passes them through, as onnxruntime drops such DQ -> Reshape -> Q pairs.
 * Needs: onnx_int.h, onnx_nn.c (ox_conv, ox_matmul), fe_int.h (the builder's
 * nodes).  Gives: ox_qdq_contract, ox_qdq_binary, ox_qdq_skip_first,
 * ox_qdq_softmax, ox_qdq_move, ox_qdq_act_done, ox_qinfo_new, ox_bf16_exact. */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "harp/knobs.h"
#include "onnx_int.h"

/* Integers of at most this magnitude are exact in bf16 (8 significant bits). */
#define QDQ_BF16_EXACT 256.0f

/* ---- the value facts ---------------------------------------------------------------------- */
ox_qinfo *ox_qinfo_new(ox_ctx *c, ox_val *x, int kind) {
  if (!x) return NULL;
  ox_qinfo *q = ut_arena_alloc(c->A, sizeof *q);
  if (!q) return ox_fail(c, HARP_E_NO_MEMORY, "out of memory"), NULL;
  memset(q, 0, sizeof *q);
  q->kind = kind;
  q->lo = 1, q->hi = 0; /* the range unknown */
  q->blo = -INFINITY, q->bhi = INFINITY;
  return x->qi = q;
}

/* The node that reads value `name` when exactly one node reads it once (and
 * it is no graph output); else NULL. */
static const Onnx__NodeProto *only_reader(ox_ctx *c, const char *name) {
  if (!c->gp || c->parent || c->inline_scope || ox_uses(c, name) != 1) return NULL;
  for (size_t i = (size_t)c->node_index + 1; i < c->gp->n_node; i++) {
    const Onnx__NodeProto *n = c->gp->node[i];
    for (size_t k = 0; k < n->n_input; k++)
      if (!strcmp(n->input[k], name)) return n;
  }
  return NULL;
}

/* A per-tensor constant (one element) of value `name`. */
static bool const_one(ox_ctx *c, const char *name, double *v) {
  ox_val *x = name && *name ? ox_find(c, name) : NULL;
  return x && (x->v <= 0 || x->has_t) && ox_const_scalar(x, v);
}

/* The node before node `at` of the graph that writes value `name`, or NULL. */
static const Onnx__NodeProto *producer_at(ox_ctx *c, int at, const char *name) {
  if (!c->gp || !name || !*name) return NULL;
  for (int i = at - 1; i >= 0; i--) {
    const Onnx__NodeProto *n = c->gp->node[i];
    for (size_t k = 0; k < n->n_output; k++)
      if (!strcmp(n->output[k], name)) return n;
  }
  return NULL;
}

/* Whether value `name`, as node `at` of the graph reads it, is the
 * DequantizeLinear of a QuantizeLinear of a Conv / Gemm / MatMul's output
 * (through one Relu / Clip): a contraction's requantized output. */
static bool from_contraction_at(ox_ctx *c, int at, const char *name) {
  const Onnx__NodeProto *dq = producer_at(c, at, name), *q = NULL, *p = NULL;
  if (dq && !strcmp(dq->op_type, "DequantizeLinear") && dq->n_input) q = producer_at(c, at, dq->input[0]);
  if (q && !strcmp(q->op_type, "QuantizeLinear") && q->n_input) p = producer_at(c, at, q->input[0]);
  if (p && (!strcmp(p->op_type, "Relu") || !strcmp(p->op_type, "Clip")) && p->n_input) p = producer_at(c, at, p->input[0]);
  return p && (!strcmp(p->op_type, "Conv") || !strcmp(p->op_type, "Gemm") || !strcmp(p->op_type, "MatMul"));
}

/* from_contraction_at as this node reads `name`. */
static bool from_contraction(ox_ctx *c, const char *name) { return from_contraction_at(c, c->node_index, name); }

/* ---- the fused contraction -------------------------------------------------------------------- */
/* The scale of output channel k of weight facts w. */
static double w_scale(const ox_qinfo *w, int64_t k) { return w->ns == 1 ? w->s[0] : w->s[k]; }

/* The integers of a constant dequantized at import (fp32 w * 1/s, exact),
 * as a weight named after what: fp32, or (half) a bf16 weight widened to
 * fp32 when every integer is exact in bf16 (|q| <= 256: an 8-bit weight's;
 * an int32 bias's need not be).  The contraction then reads the bf16
 * storage and, where the CPU has vdpbf16ps, multiplies in it: exactly. */
static hg_val integers(ox_ctx *c, ox_val *x, const char *what, bool half) {
  const ox_qinfo *q = x->qi;
  int64_t inner = 1, D = q->ns == 1 ? 1 : x->t.shape[q->axis];
  for (int d = q->axis + 1; d < x->t.rank; d++) inner *= x->t.shape[d];
  ut_tensor t;
  if (ut_tensor_alloc(c->e, &t, TINY_FP32, x->t.rank, x->t.shape)) return -1;
  for (int64_t i = 0; i < ut_tensor_numel(&t); i++) {
    float v = nearbyintf(ut_tensor_get(&x->t, i) / (float)w_scale(q, q->ns == 1 ? 0 : i / inner % D));
    ((float *)t.data)[i] = v;
    half = half && fabsf(v) <= QDQ_BF16_EXACT;
  }
  if (!half) return ox_weight(c, what, &t);
  ut_tensor h;
  harp_status st = ut_tensor_alloc(c->e, &h, TINY_BF16, t.rank, t.shape);
  for (int64_t i = 0; !st && i < ut_tensor_numel(&t); i++) ((uint16_t *)h.data)[i] = ut_f32_to_bf16(((float *)t.data)[i]);
  ut_tensor_free(&t);
  hg_val w = st ? -1 : ox_weight(c, what, &h);
  return w < 0 ? -1 : hg_cast(c->g, w, TINY_FP32);
}

/* An fp32 bias b quantized to the accumulator's scale sx * sw (as
 * onnxruntime's QGemm takes a float bias), as an fp32 weight. */
static hg_val bias_integers(ox_ctx *c, ox_val *b, const ox_qinfo *x, const ox_qinfo *w) {
  ut_tensor t;
  if (ut_tensor_alloc(c->e, &t, TINY_FP32, 1, b->t.shape)) return -1;
  for (int64_t k = 0; k < b->t.shape[0]; k++)
    ((float *)t.data)[k] = nearbyintf(((const float *)b->t.data)[k] / ((float)x->s1 * (float)w_scale(w, k)));
  return ox_weight(c, "qb", &t);
}

/* The requantization multiplier per output channel (n of them) as an fp32
 * weight of rank r with the channels on axis ax. */
static hg_val multiplier(ox_ctx *c, const ox_qinfo *x, const ox_qinfo *w, double sy, int64_t n, int r, int ax) {
  int64_t shape[TINY_MAX_RANK];
  for (int d = 0; d < r; d++) shape[d] = d == ax ? n : 1;
  ut_tensor t;
  if (ut_tensor_alloc(c->e, &t, TINY_FP32, r, shape)) return -1;
  for (int64_t k = 0; k < n; k++) ((float *)t.data)[k] = (float)x->s1 * (float)w_scale(w, k) / (float)sy;
  return ox_weight(c, "qmul", &t);
}

/* Whether constant facts w fit a weight of nout channels on axis ax. */
static bool weight_ok(const ox_val *w, int ax, int64_t *nout) {
  if (!w || !w->qi || w->qi->kind != QI_WEIGHT || !w->has_t || w->t.dtype != TINY_FP32 || ax >= w->t.rank) return false;
  *nout = w->t.shape[ax];
  return w->qi->ns == 1 || (w->qi->axis == ax && w->qi->ns == *nout);
}

/* Input i of the node (NULL when absent). */
static ox_val *input(ox_ctx *c, int i) { return i < (int)c->node->n_input && c->node->input[i][0] ? ox_find(c, c->node->input[i]) : NULL; }

/* Marks output 0 as a fused op's, already divided by the scale sy of the Q
 * that reads it (zin: its zero point added too). */
static int scaled_out(ox_ctx *c, double sy, bool zin) {
  ox_qinfo *o = ox_qinfo_new(c, ox_find(c, c->node->output[0]), QI_SCALED);
  if (!o) return -1;
  o->s1 = sy, o->zin = zin;
  return 1;
}

/* The integers of x minus its zero point. */
static hg_val centered(ox_ctx *c, const ox_qinfo *x) { return x->z != 0 ? hg_add(c->g, x->qv, hg_const(c->g, -x->z)) : x->qv; }

/* fp32 integers v, each of magnitude at most 256, as a contraction's
 * operand: through bf16 and back, which holds them exactly, so that their
 * producer stores them in bf16 and the contraction reads bf16 storage
 * (vdpbf16ps where the CPU has it: exact products, fp32 sums, the same
 * values as the fp32 kernel's, at twice its rate). */
hg_val ox_bf16_exact(ox_ctx *c, hg_val v) {
  hg_val h = v < 0 ? -1 : hg_cast(c->g, v, TINY_BF16);
  return h < 0 ? -1 : hg_cast(c->g, h, TINY_FP32);
}

/* x's integers minus its zero point as a contraction's operand (8-bit q
 * and z: |q - z| <= 255); made once per Q, so that the contractions and
 * residual adds that read it read one tensor. */
static hg_val operand(ox_ctx *c, const ox_qinfo *x) {
  if (x->q && x->q->opnd > 0) return x->q->opnd;
  hg_val v = fabs(x->z) <= 255 ? ox_bf16_exact(c, centered(c, x)) : centered(c, x);
  if (x->q && v > 0) x->q->opnd = v;
  return v;
}

/* MatMul of two quantized activations (onnxruntime's QLinearMatMul):
 * (qa - za)(qb - zb) * fl(fl(sa * sb) / sy). */
static int activations_matmul(ox_ctx *c, const ox_qinfo *a, const ox_qinfo *b, double sy) {
  hg_val acc = ox_matmul(c, operand(c, a), operand(c, b));
  if (acc < 0) return c->e->code ? -1 : (ox_check(c, acc), -1);
  float m = (float)a->s1 * (float)b->s1 / (float)sy;
  if (ox_def(c, 0, hg_mul(c->g, acc, hg_const(c->g, m)))) return -1;
  return scaled_out(c, sy, false);
}

/* An activation between an op and the Q that reads it: Relu (bounds [0,
 * inf)) or Clip of constant bounds [lo, hi] (infinite where absent). */
typedef struct {
  bool on;
  double lo, hi;
} qdq_act;

/* Float attribute `name` of node n (dflt when it has none, NaN when it is
 * no float). */
static double node_float(const Onnx__NodeProto *n, const char *name, double dflt) {
  for (size_t i = 0; i < n->n_attribute; i++)
    if (!strcmp(n->attribute[i]->name, name))
      return n->attribute[i]->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT ? n->attribute[i]->f : NAN;
  return dflt;
}

/* Whether node n is a Relu or (clip) a Clip of constant bounds (attributes
 * before opset 11, constant per-tensor inputs since) of one input and
 * output, lo <= hi: its bounds in *a. */
static bool act_node(ox_ctx *c, const Onnx__NodeProto *n, bool clip, qdq_act *a) {
  if ((n->domain && *n->domain) || n->n_input < 1 || n->n_output != 1) return false;
  a->lo = -INFINITY, a->hi = INFINITY;
  if (!strcmp(n->op_type, "Relu")) return n->n_input == 1 && (a->lo = 0, true);
  if (!clip || strcmp(n->op_type, "Clip") != 0) return false;
  if (c->opset < 11) {
    a->lo = node_float(n, "min", -INFINITY), a->hi = node_float(n, "max", INFINITY);
    return n->n_input == 1 && !isnan(a->lo) && !isnan(a->hi) && a->lo <= a->hi;
  }
  for (size_t k = 1; k < n->n_input && k < 3; k++)
    if (n->input[k][0] && !const_one(c, n->input[k], k == 1 ? &a->lo : &a->hi)) return false;
  return n->n_input <= 3 && !isnan(a->lo) && !isnan(a->hi) && a->lo <= a->hi;
}

/* The QuantizeLinear of per-tensor constant scale and zero point that alone
 * reads this node's output 0 (*sy, *zy), or NULL; with act non-NULL, also
 * one that alone reads the output of an activation that alone reads it
 * (Relu, or with clip a Clip of constant bounds: *act). */
static const Onnx__NodeProto *q_reader(ox_ctx *c, double *sy, double *zy, qdq_act *act, bool clip) {
  const Onnx__NodeProto *q = c->node->n_output == 1 ? only_reader(c, c->node->output[0]) : NULL;
  *zy = 0;
  if (act) act->on = false;
  if (act && q && act_node(c, q, clip, act)) q = only_reader(c, q->output[0]), act->on = true;
  if (!q || strcmp(q->op_type, "QuantizeLinear") != 0 || (q->domain && *q->domain) || q->n_input < 2 || !const_one(c, q->input[1], sy) ||
      !(*sy > 0) || !isfinite(*sy))
    return NULL;
  if (q->n_input > 2 && q->input[2][0] && !const_one(c, q->input[2], zy)) return NULL;
  return q;
}

/* Marks this node's fused output (QI_SCALED) as taking activation a, which
 * its Q of scale sy applies as bounds on the rounded integers: round(y / sy)
 * is monotone in y, so round(clamp(y, lo, hi) / sy) = clamp(round(y / sy),
 * round(lo / sy), round(hi / sy)), the bounds divided in fp32 as the QDQ
 * graph's Q divides them: exact; the activation's node then passes the
 * value through (ox_qdq_act_done). */
static int with_act(ox_ctx *c, int rc, const qdq_act *a, double sy) {
  ox_qinfo *o = rc > 0 && a->on ? ox_find(c, c->node->output[0])->qi : NULL;
  if (!o) return rc;
  o->act = true;
  o->blo = isinf(a->lo) ? a->lo : rintf((float)a->lo / (float)sy);
  o->bhi = isinf(a->hi) ? a->hi : rintf((float)a->hi / (float)sy);
  return rc;
}

/* At a Relu / Clip whose input is a fused output that applies it already
 * (with_act, or ox_qdq_binary's Relu): the same value and facts, the
 * activation applied by them; true when so (or on an error). */
bool ox_qdq_act_done(ox_ctx *c) {
  ox_val *x = c->node->n_input >= 1 ? ox_find(c, c->node->input[0]) : NULL;
  if (!x || !x->qi || x->qi->kind != QI_SCALED || !x->qi->act) return false;
  hg_val v = ox_tensor(c, 0);
  if (v < 0 || ox_def(c, 0, v)) return true;
  ox_qinfo *o = ox_qinfo_new(c, ox_find(c, c->node->output[0]), QI_SCALED);
  if (o) *o = *x->qi, o->act = false;
  return true;
}

/* Whether a QDQ Add is written to fuse into a contraction's epilogue
 * (the qdq_add knob: fused) rather than as onnxruntime computes it (exact,
 * the default; the import reads only the knobs it is given, no runtime call). */
static bool want_fused(ox_ctx *c) {
  return c->opts && c->opts->knobs && c->opts->knobs->qdq_add == RT_QDQ_ADD_FUSED; /* NULL knobs: the default, exact */
}

/* Which operand of a QDQ Add of x (input 0) and y (input 1) is the residual
 * (1: y, 0: x, -1: neither): where one comes from a contraction, the other
 * (of two, the one whose operand form ox_qdq_skip_first made) — the
 * contraction that made the first is the one whose epilogue takes the sum. */
static int residual_side(ox_ctx *c, const ox_qinfo *x, const ox_qinfo *y) {
  bool f0 = from_contraction(c, c->node->input[0]), f1 = from_contraction(c, c->node->input[1]);
  bool made0 = x->q && x->q->opnd > 0, made1 = y->q && y->q->opnd > 0; /* ox_qdq_skip_first's choice */
  if (!f0 && !f1) return -1;
  return f0 && f1 ? (made0 && !made1 ? 0 : 1) : f1 ? 0 : 1;
}

/* qa sa / sc + qb sb / sc + zc (a = x, input 0; b = y, input 1) as
 * onnxruntime's QLinearAdd computes it (MLAS, float with fused
 * multiply-adds): ra = sa / sc, rb = sb / sc, fixed = zc - fma(ra, za, rb zb),
 * v = fma(qa, ra, fma(qb, rb, fixed)) — the order matters
 * (tests/py/test_onnx_qdq_fma.py) — each fma one MULADD (rounded once).
 * The residual operand (residual_side) is read in its operand form plus its
 * zero point, (q - z) + z = q exactly, the tensor the next contraction reads
 * too: the two MULADDs then are one epilogue step of the contraction that
 * made the other operand (CT_EPI_RESFMA), its tensor held as bytes there. */
static hg_val exact_add(ox_ctx *c, const ox_qinfo *x, const ox_qinfo *y, double sy, double zy) {
  hg_graph *g = c->g;
  float ra = (float)x->s1 / (float)sy, rb = (float)y->s1 / (float)sy;
  float fixed = (float)zy - fmaf(ra, (float)x->z, rb * (float)y->z);
  int side = residual_side(c, x, y);
  const ox_qinfo *qr = side == 0 ? x : y;
  hg_val r = side < 0 || fabs(qr->z) > 255 ? qr->qv : operand(c, qr);
  if (r < 0) return -1;
  if (side >= 0 && r != qr->qv && qr->z != 0) r = hg_add(g, r, hg_const(g, qr->z));
  hg_val qa = side == 0 ? r : x->qv, qb = side == 1 ? r : y->qv;
  return hg_muladd(g, qa, hg_const(g, ra), hg_muladd(g, qb, hg_const(g, rb), hg_const(g, fixed)));
}

/* The same sum written to fuse into the epilogue of the contraction that
 * made one operand (the qdq_add knob: fused): (qs (rs / rr) + (qr - zr)) rr
 * + (bias + zr rr), the operand a contraction made (qs, ratio rs) scaled in
 * its epilogue's chain, the other added as the contractions read it (its
 * operand form, qr - zr in bf16: a residual step, CT_EPI_RESIDUAL, of the
 * tensor they read), as onnxruntime's QDQ fusions and OpenVINO fuse the
 * residual add into the int8 conv; separate roundings, so within one step
 * of onnxruntime's (MULADD is no epilogue step yet). */
static hg_val fused_add(ox_ctx *c, const ox_qinfo *x, const ox_qinfo *y, double sy, double zy) {
  hg_graph *g = c->g;
  float ra = (float)x->s1 / (float)sy, rb = (float)y->s1 / (float)sy;
  float bias = (float)zy - ra * (float)x->z - rb * (float)y->z;
  bool swap = residual_side(c, x, y) == 0;
  const ox_qinfo *qs = swap ? y : x, *qr = swap ? x : y;
  float rs = swap ? rb : ra, rr = swap ? ra : rb;
  hg_val r = operand(c, qr);
  if (r < 0) return -1;
  return hg_add(g, hg_mul(g, hg_add(g, hg_mul(g, qs->qv, hg_const(g, rs / rr)), r), hg_const(g, rr)),
                hg_const(g, bias + rr * (float)qr->z));
}

/* Add / Mul of two quantized activations read by a Q, as onnxruntime's
 * QLinearAdd (qa * sa/sc + qb * sb/sc + (zc - za sa/sc - zb sb/sc)) and
 * QLinearMul ((qa - za)(qb - zb) * sa sb / sc) compute them. */
int ox_qdq_binary(ox_ctx *c, int op) {
  ox_val *a = input(c, 0), *b = input(c, 1);
  double sy, zy;
  qdq_act act = {0}; /* an Add's Relu before the Q: max(v, zy) before the rounding, the Relu then the same value */
  if (!a || !b || !a->qi || !b->qi || a->qi->kind != QI_INT || b->qi->kind != QI_INT ||
      !q_reader(c, &sy, &zy, op == '+' ? &act : NULL, false))
    return 0;
  hg_graph *g = c->g;
  const ox_qinfo *x = a->qi, *y = b->qi;
  if (op == '*') {
    float m = (float)x->s1 * (float)y->s1 / (float)sy;
    if (ox_def(c, 0, hg_mul(g, hg_mul(g, centered(c, x), centered(c, y)), hg_const(g, m)))) return -1;
    return scaled_out(c, sy, false);
  }
  hg_val v = want_fused(c) ? fused_add(c, x, y, sy, zy) : exact_add(c, x, y, sy, zy);
  if (v < 0) return -1;
  if (act.on) v = hg_max(g, v, hg_const(g, zy));
  if (ox_def(c, 0, v)) return -1;
  int rc = scaled_out(c, sy, true);
  if (rc > 0) ox_find(c, c->node->output[0])->qi->act = act.on;
  return rc;
}

/* At the DequantizeLinear of a contraction's requantized output that only
 * an Add / Sum reads whose other operand is another contraction's, not yet
 * imported (ResNet's downsampling block: the 1x1 projection conv and the
 * block's last conv): this one's operand form made now, before the other
 * contraction's nodes, and ox_qdq_binary takes it as the residual.  Region
 * selection takes a region's latest producers first: so the sum's region
 * reaches the other conv through its requantization, and the sum fuses into
 * that conv's epilogue (the operand read as stored), rather than both
 * requantizations into an elementwise kernel after two bare sums. */
void ox_qdq_skip_first(ox_ctx *c) {
  const ox_val *v = c->node->n_output == 1 ? ox_find(c, c->node->output[0]) : NULL;
  const char *name = v ? c->node->output[0] : NULL;
  const Onnx__NodeProto *d = name && v->qi && v->qi->kind == QI_INT ? only_reader(c, name) : NULL;
  if (!d || (strcmp(d->op_type, "Add") && strcmp(d->op_type, "Sum")) || (d->domain && *d->domain) || d->n_input != 2) return;
  const char *other = !strcmp(d->input[0], name) ? d->input[1] : d->input[0];
  int at = c->node_index + 1;
  while (at < (int)c->gp->n_node && c->gp->node[at] != d) at++;
  if (!strcmp(other, name) || ox_find(c, other) || !from_contraction_at(c, at, name) || !from_contraction_at(c, at, other)) return;
  operand(c, v->qi);
}

/* Softmax over the last axis of quantized activations read by a Q, as
 * onnxruntime's QLinearSoftmax computes it (uint8 and int8 alike): y = round(e *
 * floor(1 / sy) / sum e) + zy — floor(1 / sy), not 1 / sy, as it does —
 * with e = exp((q - max q) sx).  (Its table holds e times a constant
 * e^(t sx) that keeps the sum below FLT_MAX; the ratio does not change, and
 * an fp32 exp of the small argument alone is the more exact.) */
int ox_qdq_softmax(ox_ctx *c) {
  ox_val *x = input(c, 0);
  double sy, zy;
  int64_t axis, D;
  const Onnx__NodeProto *q = x && x->qi && x->qi->kind == QI_INT ? q_reader(c, &sy, &zy, NULL, false) : NULL;
  if (!q || ox_attr_int(c, "axis", -1, &axis)) return c->e->code ? -1 : 0;
  hg_graph *g = c->g;
  const fe_shape *s = ox_shape_of(c, x->qi->qv);
  int ax = s->rank - 1;
  if ((axis != -1 && axis != ax) || ax < 0 || !fe_dim_is_int(s->d[ax], &D) || D < 1) return 0;
  hg_val m = hg_reduce(g, HG_OP_RMAX, x->qi->qv, &ax, 1, true);
  hg_val e = hg_exp(g, hg_mul(g, hg_sub(g, x->qi->qv, m), hg_const(g, x->qi->s1)));
  hg_val sum = hg_reduce(g, HG_OP_SUM, e, &ax, 1, true);
  if (ox_def(c, 0, hg_div(g, hg_mul(g, e, hg_const(g, floorf(1.0f / (float)sy))), sum))) return -1;
  return scaled_out(c, sy, false);
}

/* At a movement node (Reshape, Flatten, Transpose, (Un)Squeeze) whose
 * input 0 is a quantized activation (QI_INT: a DQ's output, or a moved one)
 * and whose output the builder made of it by reshapes and permutes alone:
 * the same moves of its integers, as the output's facts, so that a
 * QuantizeLinear of the same parameters reading it passes the integers
 * through (onnx_quant.c's quantize_fused) and a contraction reads them as
 * its operand.  Leaves the output without facts otherwise. */
#define QDQ_MOVES 8

/* Whether value v is one move as d (a copy of a builder node): the same op
 * of the same shape, and for a permute the same order. */
static bool same_move(hg_graph *g, hg_val v, const fe_node *d) {
  const fe_node *o = fe_node_of(g, v);
  if (!o || o->op != d->op || o->shape.rank != d->shape.rank) return false;
  for (int i = 0; i < d->shape.rank; i++) {
    int64_t a, b;
    if (o->shape.d[i] != d->shape.d[i] && !(fe_dim_is_int(o->shape.d[i], &a) && fe_dim_is_int(d->shape.d[i], &b) && a == b)) return false;
  }
  return d->op != HG_OP_PERMUTE || !memcmp(o->a.perm.v, d->a.perm.v, sizeof(int) * (size_t)d->a.perm.n);
}

void ox_qdq_move(ox_ctx *c) {
  if (c->e->code || c->node->n_output != 1) return;
  ox_val *x = input(c, 0), *y = ox_find(c, c->node->output[0]);
  if (!x || !y || !x->qi || x->qi->kind != QI_INT || x->v <= 0 || y->v <= 0 || y->qi) return;
  fe_node mv[QDQ_MOVES]; /* copies: the builder's node array may move as it grows */
  int n = 0;
  for (hg_val v = y->v; v != x->v;) {
    const fe_node *d = fe_node_of(c->g, v);
    if (!d || n == QDQ_MOVES || (d->op != HG_OP_RESHAPE && d->op != HG_OP_PERMUTE) || d->nin != 1) return;
    mv[n++] = *d;
    v = d->in[0];
  }
  ox_qinfo *src = x->qi->q ? x->qi->q : x->qi;
  for (ox_qinfo *m = n == 1 ? src->moves : NULL; m; m = m->next) /* the same move made before: its facts */
    if (same_move(c->g, m->qv, &mv[0])) {
      ox_qinfo *qi = ox_qinfo_new(c, y, QI_INT);
      if (qi) *qi = *m;
      return;
    }
  hg_val q = x->qi->qv;
  for (int i = n - 1; i >= 0 && q > 0; i--)
    q = mv[i].op == HG_OP_RESHAPE ? fe_reshape(c->g, q, &mv[i].shape) : hg_permute(c->g, q, mv[i].a.perm.v, mv[i].a.perm.n);
  if (q < 0) {
    ox_check(c, q);
    return;
  }
  ox_qinfo *qi = ox_qinfo_new(c, y, QI_INT);
  if (!qi) return;
  *qi = *x->qi, qi->qv = q;
  if (n) qi->q = qi, qi->opnd = 0, qi->moves = NULL; /* other integers: their own operand form */
  if (n == 1) qi->next = src->moves, src->moves = qi;
}

/* The QDQ pattern at a Conv / Gemm / MatMul (kind 'c', 'g', 'm'): 1 when
 * this node was imported fused, 0 when it is not the pattern (the caller
 * imports it as it stands), -1 on an error. */
int ox_qdq_contract(ox_ctx *c, int kind) {
  ox_val *x = input(c, 0), *w = input(c, 1), *b = kind != 'm' ? input(c, 2) : NULL;
  double sy, zy, alpha = 1, beta = 1;
  int64_t ta = 0, tb = 0, nout;
  qdq_act act;
  if (!x || !x->qi || x->qi->kind != QI_INT || !q_reader(c, &sy, &zy, &act, true)) return 0;
  if (kind == 'g' && (ox_attr_int(c, "transA", 0, &ta) || ox_attr_int(c, "transB", 0, &tb) || ox_attr_float(c, "alpha", 1, &alpha) ||
                      ox_attr_float(c, "beta", 1, &beta)))
    return -1;
  if (ta || alpha != 1 || beta != 1 || c->node->n_output != 1) return 0;
  int wax = kind == 'c' || tb ? 0 : 1; /* the output channels' axis of the weight */
  if (kind == 'm' && w && w->qi && w->qi->kind == QI_INT) return with_act(c, activations_matmul(c, x->qi, w->qi, sy), &act, sy);
  if (!weight_ok(w, wax, &nout)) return 0;
  bool bint = b && b->qi && b->qi->kind == QI_WEIGHT && (b->qi->ns == 1 || b->qi->ns == nout);
  if (b && !(b->has_t && b->t.dtype == TINY_FP32 && b->t.rank == 1 && b->t.shape[0] == nout && (bint || !b->qi))) return 0;
  hg_graph *g = c->g;
  hg_val xc = operand(c, x->qi);
  hg_val wq = integers(c, w, "qw", true), bq = !b ? 0 : bint ? integers(c, b, "qb", false) : bias_integers(c, b, x->qi, w->qi);
  if (wq < 0 || bq < 0) return -1;
  hg_val acc;
  if (kind == 'c') {
    acc = ox_rank_of(c, xc) == 4 || ox_rank_of(c, xc) == 3 ? ox_conv(c, xc, wq, bq) : -1;
  } else {
    if (tb) wq = hg_permute(g, wq, (int[]){1, 0}, 2);
    acc = ox_matmul(c, xc, wq);
    if (acc > 0 && bq > 0) acc = hg_add(g, acc, bq);
  }
  if (acc < 0) return c->e->code ? -1 : (ox_check(c, acc), -1);
  int r = ox_rank_of(c, acc);
  hg_val m = multiplier(c, x->qi, w->qi, sy, nout, r, kind == 'c' ? 1 : r - 1);
  if (m < 0 || ox_def(c, 0, hg_mul(g, acc, m))) return -1;
  return with_act(c, scaled_out(c, sy, false), &act, sy);
}
