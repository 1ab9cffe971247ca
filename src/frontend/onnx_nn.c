/* onnx_nn.c — the ONNX ops of the network layers: MatMul and Gemm, Conv,
 * BatchNormalization, InstanceNormalization, LayerNormalization,
 * RMSNormalization, GroupNormalization, LpNormalization,
 * MeanVarianceNormalization, the poolings (LpPool too) and LRN.
 * Needs: onnx_load.c (values, attributes, errors), onnx_ops.c (helpers),
 * the builder.
 * Gives: ox_op_<Name> for the dispatch table in onnx_ops.c.
 *
 * Average pooling divides by the window; where ONNX divides by fewer
 * elements (count_include_pad=0 over padding, a ceil_mode window past the
 * end) the result is scaled by a small [OH, OW] weight computed here. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_int.h"

#define OP(name) harp_status ox_op_##name(ox_ctx *c)

/* ---- contractions ---------------------------------------------------------------------- */
/* a @ b with ONNX MatMul's rules (numpy's: vectors, broadcast batches); -1 on error. */
hg_val ox_matmul(ox_ctx *c, hg_val a, hg_val b) {
  int ra = ox_rank_of(c, a), rb = ox_rank_of(c, b);
  if (ra < 1 || rb < 1) return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "MatMul of a scalar"), -1;
  /* vectors: [K] -> [1, K] (a) or [K, 1] (b), the unit dim dropped after */
  const fe_shape *sa = ox_shape_of(c, a), *sb = ox_shape_of(c, b);
  if (ra == 1) a = fe_reshape(c->g, a, &(fe_shape){.rank = 2, .d = {fe_dim_int(c->A, 1), sa->d[0]}});
  if (rb == 1) b = fe_reshape(c->g, b, &(fe_shape){.rank = 2, .d = {sb->d[0], fe_dim_int(c->A, 1)}});
  hg_val r = hg_matmul(c->g, a, b);
  if ((ra == 1 || rb == 1) && r > 0) {
    fe_shape s = *ox_shape_of(c, r);
    if (ra == 1) s.d[s.rank - 2] = s.d[s.rank - 1];
    s.rank -= ra == 1 && rb == 1 ? 2 : 1; /* [K] @ [K] is a scalar */
    r = fe_reshape(c->g, r, &s);
  }
  return r;
}

OP(MatMul) {
  int fused = ox_qdq_contract(c, 'm');
  if (fused) return fused < 0 ? c->e->code : HARP_OK;
  hg_val a = ox_tensor(c, 0), b = a > 0 ? ox_tensor(c, 1) : -1;
  if (a < 0 || b < 0) return c->e->code;
  hg_val r = ox_matmul(c, a, b);
  return r < 0 && c->e->code ? c->e->code : ox_def(c, 0, r);
}

OP(Gemm) {
  int fused = ox_qdq_contract(c, 'g');
  if (fused) return fused < 0 ? c->e->code : HARP_OK;
  int64_t ta, tb;
  double alpha, beta;
  if (ox_attr_int(c, "transA", 0, &ta) || ox_attr_int(c, "transB", 0, &tb) || ox_attr_float(c, "alpha", 1, &alpha) ||
      ox_attr_float(c, "beta", 1, &beta))
    return c->e->code;
  hg_val a = ox_tensor(c, 0), b = a > 0 ? ox_tensor(c, 1) : -1;
  if (a < 0 || b < 0) return c->e->code;
  if (ox_need_rank(c, a, 2, 2, "A") || ox_need_rank(c, b, 2, 2, "B")) return c->e->code;
  static const int t2[2] = {1, 0};
  if (ta) a = hg_permute(c->g, a, t2, 2);
  if (tb) b = hg_permute(c->g, b, t2, 2);
  hg_val r = hg_matmul(c->g, a, b);
  if (alpha != 1) r = hg_mul(c->g, r, hg_const(c->g, alpha));
  if (c->node->n_input > 2 && c->node->input[2][0] && beta != 0) {
    hg_val cv = ox_operand(c, 2, 2);
    if (cv < 0) return c->e->code;
    if (beta != 1) cv = hg_mul(c->g, cv, hg_const(c->g, beta));
    r = hg_add(c->g, r, cv);
  }
  return ox_def(c, 0, r);
}

/* kernel, strides, dilations and pads (top, bottom, left, right) of a 2-D
 * window op; auto_pad needs the input's spatial sizes known. */
typedef struct win2d {
  int64_t k[2], s[2], d[2], pad[4];
} win2d;

/* 1-D windows run as 2-D ones over [N, C, 1, L]: *nsp is the number of
 * spatial dims the node has (1 or 2), x is made rank 4. */
static harp_status spatial(ox_ctx *c, hg_val *x, const char *what, int *nsp) {
  int r = ox_rank_of(c, *x);
  if (r > 4) return ox_fail(c, HARP_E_UNSUPPORTED, "%d-D %s (harp has 1-D, 2-D and 3-D)", r - 2, what);
  if (r < 3) return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "the input must have rank 4 (N, C, H, W) or 3 (N, C, W), got rank %d", r);
  *nsp = r - 2;
  if (r == 3) {
    const fe_shape *s = ox_shape_of(c, *x);
    *x = fe_reshape(c->g, *x, &(fe_shape){.rank = 4, .d = {s->d[0], s->d[1], fe_dim_int(c->A, 1), s->d[2]}});
  }
  return ox_check(c, *x);
}

/* y [N, C, 1, L] back to [N, C, L] for a 1-D op */
static hg_val unspatial(ox_ctx *c, hg_val y, int nsp) {
  if (nsp == 2 || y < 0) return y;
  const fe_shape *s = ox_shape_of(c, y);
  return fe_reshape(c->g, y, &(fe_shape){.rank = 3, .d = {s->d[0], s->d[1], s->d[3]}});
}

/* kernel (2 values, [0] = 1 for 1-D), strides, dilations and pads (top,
 * bottom, left, right) of a window op over x [N, C, H, W] with nsp spatial
 * dims in the node's attributes; auto_pad needs the spatial sizes known. */
static harp_status window(ox_ctx *c, hg_val x, const int64_t *kernel, int nsp, win2d *w) {
  int64_t v[8];
  int n, off = 2 - nsp;
  for (int i = 0; i < 2; i++) w->k[i] = kernel[i], w->s[i] = 1, w->d[i] = 1;
  memset(w->pad, 0, sizeof w->pad);
  if (ox_attr_ints(c, "strides", v, 8, &n)) return c->e->code;
  if (n >= 0 && n != nsp) return ox_fail(c, HARP_E_INVALID_ARG, "strides must have %d values (%d-D), got %d", nsp, nsp, n);
  for (int i = 0; i < n; i++) w->s[off + i] = v[i];
  if (ox_attr_ints(c, "dilations", v, 8, &n)) return c->e->code;
  if (n >= 0 && n != nsp) return ox_fail(c, HARP_E_INVALID_ARG, "dilations must have %d values (%d-D), got %d", nsp, nsp, n);
  for (int i = 0; i < n; i++) w->d[off + i] = v[i];
  for (int i = 0; i < 2; i++)
    if (w->s[i] < 1 || w->d[i] < 1 || w->k[i] < 1 || w->s[i] > OX_MAX_DIM || w->d[i] > OX_MAX_DIM || w->k[i] > OX_MAX_DIM)
      return ox_fail(c, HARP_E_INVALID_ARG, "kernel sizes, strides and dilations must be >= 1");
  char ap[32];
  if (ox_attr_str(c, "auto_pad", "NOTSET", ap, sizeof ap)) return c->e->code;
  if (!strcmp(ap, "NOTSET")) {
    if (ox_attr_ints(c, "pads", v, 8, &n)) return c->e->code;
    if (n >= 0 && n != 2 * nsp) return ox_fail(c, HARP_E_INVALID_ARG, "pads must have %d values (%d-D), got %d", 2 * nsp, nsp, n);
    for (int i = 0; i < n; i++)
      if (v[i] < 0 || v[i] > OX_MAX_DIM) return ox_fail(c, HARP_E_INVALID_ARG, "pads must be >= 0");
    for (int i = 0; i < n / 2; i++) /* ONNX: begins, then ends */
      w->pad[2 * (off + i)] = v[i], w->pad[2 * (off + i) + 1] = v[nsp + i];
  } else if (!strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER")) {
    const fe_shape *s = ox_shape_of(c, x);
    for (int i = 0; i < 2; i++) {
      int64_t in;
      char what[64];
      snprintf(what, sizeof what, "the spatial size auto_pad=%s pads", ap);
      if (ox_known(c, s->d[2 + i], what, &in)) return c->e->code;
      int64_t out = (in + w->s[i] - 1) / w->s[i];
      int64_t total = (out - 1) * w->s[i] + (w->k[i] - 1) * w->d[i] + 1 - in;
      if (total < 0) total = 0;
      int64_t small = total / 2, big = total - small;
      bool upper = !strcmp(ap, "SAME_UPPER");
      w->pad[2 * i] = upper ? small : big;
      w->pad[2 * i + 1] = upper ? big : small;
    }
  } else if (strcmp(ap, "VALID") != 0) {
    return ox_fail(c, HARP_E_INVALID_ARG, "auto_pad \"%s\" (expected NOTSET, SAME_UPPER, SAME_LOWER or VALID)", ap);
  }
  return HARP_OK;
}

/* A tensor computed here as a weight named "<node output>.<what>" (takes t). */
hg_val ox_weight(ox_ctx *c, const char *what, ut_tensor *t) {
  ox_val w = {.name = ut_arena_printf(c->A, "%s.%s", c->node->output[0], what), .has_t = true, .t = *t};
  memset(t, 0, sizeof *t);
  hg_val v = w.name ? ox_value(c, &w) : -1;
  ut_tensor_free(&w.t);
  if (v < 0 && !c->e->code) ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
  return v;
}

/* The BatchNormalization that alone reads this Conv's output, when it can
 * be folded into the Conv: its parameters are float constants of Cout
 * values, the Conv's weight (and bias) constants read by this Conv alone.
 * Then w' = w * s and b' = (b - mean) * s + B with s = scale / sqrt(var +
 * eps), so the conv template's epilogue sees a bias; the BatchNormalization
 * becomes the identity.  NULL (no fold) otherwise. */
static const Onnx__NodeProto *foldable_bn(ox_ctx *c, int64_t cout, const ut_tensor *p[4], double *eps) {
  const Onnx__NodeProto *conv = c->node, *bn = NULL;
  if (conv->n_output != 1 || ox_uses(c, conv->output[0]) != 1) return NULL;
  for (size_t i = (size_t)c->node_index + 1; i < c->gp->n_node && !bn; i++)
    for (size_t k = 0; k < c->gp->node[i]->n_input; k++)
      if (!strcmp(c->gp->node[i]->input[k], conv->output[0])) {
        bn = c->gp->node[i];
        break;
      }
  if (!bn || strcmp(bn->op_type, "BatchNormalization") != 0 || bn->n_input != 5 || strcmp(bn->input[0], conv->output[0]) != 0 ||
      (bn->domain && *bn->domain && strcmp(bn->domain, "ai.onnx") != 0))
    return NULL;
  for (size_t i = 1; i < bn->n_output; i++)
    if (bn->output[i][0]) return NULL;
  for (int i = 0; i < 4; i++) {
    ox_val *v = ox_find(c, bn->input[i + 1]);
    if (!v || !v->has_t || v->v > 0 || v->t.dtype != TINY_FP32 || v->t.rank != 1 || v->t.shape[0] != cout) return NULL;
    p[i] = &v->t;
  }
  int64_t training = 0;
  c->node = bn; /* its attributes */
  bool ok = !ox_attr_float(c, "epsilon", 1e-5, eps) && !ox_attr_int(c, "training_mode", 0, &training) && !training;
  c->node = conv;
  return ok ? bn : NULL;
}

/* A constant input i of the Conv that only the Conv reads; NULL if not. */
static ox_val *own_const(ox_ctx *c, int i) {
  if (i >= (int)c->node->n_input || !c->node->input[i][0] || ox_uses(c, c->node->input[i]) != 1) return NULL;
  ox_val *v = ox_find(c, c->node->input[i]);
  return v && v->has_t && v->v <= 0 && v->t.dtype == TINY_FP32 ? v : NULL;
}

/* The folded weight and bias (see foldable_bn) as new weights; false if
 * there is nothing to fold, an error code in c->e if it failed. */
static bool fold_bn(ox_ctx *c, hg_val *w, hg_val *bias) {
  ox_val *wv = own_const(c, 1), *bv = c->node->n_input > 2 && c->node->input[2][0] ? own_const(c, 2) : NULL;
  if (!wv || wv->t.rank < 3 || (c->node->n_input > 2 && c->node->input[2][0] && !bv)) return false;
  int64_t cout = wv->t.shape[0], per = ut_tensor_numel(&wv->t) / (cout ? cout : 1);
  if (bv && (bv->t.rank != 1 || bv->t.shape[0] != cout)) return false;
  const ut_tensor *p[4];
  double eps;
  if (!cout || !foldable_bn(c, cout, p, &eps)) return false;
  ut_tensor tw, tb;
  if (ut_tensor_alloc(c->e, &tw, TINY_FP32, wv->t.rank, wv->t.shape)) return false;
  if (ut_tensor_alloc(c->e, &tb, TINY_FP32, 1, &cout)) {
    ut_tensor_free(&tw);
    return false;
  }
  const float *sc = p[0]->data, *b = p[1]->data, *mu = p[2]->data, *var = p[3]->data, *w0 = wv->t.data;
  for (int64_t o = 0; o < cout; o++) {
    float f = sc[o] / sqrtf(var[o] + (float)eps);
    for (int64_t k = 0; k < per; k++) ((float *)tw.data)[o * per + k] = w0[o * per + k] * f;
    ((float *)tb.data)[o] = ((bv ? ((const float *)bv->t.data)[o] : 0.0f) - mu[o]) * f + b[o];
  }
  *w = ox_weight(c, "bn_w", &tw);
  *bias = *w > 0 ? ox_weight(c, "bn_b", &tb) : -1;
  ut_tensor_free(&tw), ut_tensor_free(&tb);
  /* this conv was their one reader (own_const): the originals can go now,
   * not at the end of the import (a model's conv weights twice at the peak) */
  ut_tensor_free(&wv->t), wv->has_t = false;
  if (bv) ut_tensor_free(&bv->t), bv->has_t = false;
  return true;
}

OP(Conv) {
  int fused = ox_qdq_contract(c, 'c');
  if (fused) return fused < 0 ? c->e->code : HARP_OK;
  hg_val fw = 0, fb = 0;
  bool folded = fold_bn(c, &fw, &fb);
  if (c->e->code) return c->e->code;
  if (folded && (fw < 0 || fb < 0)) return c->e->code ? c->e->code : ox_fail(c, HARP_E_INTERNAL, "the batch norm fold failed");
  hg_val x = ox_tensor(c, 0), w = x > 0 ? (folded ? fw : ox_tensor(c, 1)) : -1;
  if (x < 0 || w < 0) return c->e->code;
  hg_val bias = folded ? fb : 0;
  if (!folded && c->node->n_input > 2 && c->node->input[2][0] && (bias = ox_tensor(c, 2)) < 0) return c->e->code;
  if (ox_rank_of(c, x) == 5) { /* 3-D: the depth taps as channels (onnx_conv3d.c) */
    if (ox_conv3d(c, x, w, bias)) return c->e->code;
  } else {
    hg_val y = ox_conv(c, x, w, bias);
    if (y < 0 && c->e->code) return c->e->code;
    if (ox_def(c, 0, y)) return c->e->code;
  }
  if (folded) ox_find(c, c->node->output[0])->bn_folded = true;
  return HARP_OK;
}

/* A 1-D or 2-D Conv of x by w (+ bias unless 0) with the node's attributes
 * (strides, pads, dilations, group, auto_pad, kernel_shape); -1 on error. */
hg_val ox_conv(ox_ctx *c, hg_val x, hg_val w, hg_val bias) {
  int nsp;
  if (spatial(c, &x, "convolution", &nsp)) return -1;
  if (ox_need_rank(c, w, nsp + 2, nsp + 2, "the weight") || (nsp == 1 && spatial(c, &w, "convolution", &nsp))) return -1;
  const fe_shape *ws = ox_shape_of(c, w);
  int64_t kernel[2], ks[8];
  int n;
  for (int i = 0; i < 2; i++)
    if (ox_known(c, ws->d[2 + i], "the kernel size", &kernel[i])) return -1;
  if (ox_attr_ints(c, "kernel_shape", ks, 8, &n)) return -1;
  if (n >= 0 && (n != nsp || ks[0] != kernel[2 - nsp] || ks[nsp - 1] != kernel[1]))
    return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "kernel_shape does not match the weight's %" PRId64 "x%" PRId64, kernel[0], kernel[1]), -1;
  win2d wd;
  int64_t group;
  if (window(c, x, kernel, nsp, &wd) || ox_attr_int(c, "group", 1, &group)) return -1;
  if (group < 1 || group > OX_MAX_DIM) return ox_fail(c, HARP_E_INVALID_ARG, "group must be >= 1"), -1;
  hg_conv2d_opts o = {.groups = group, .bias = bias};
  memcpy(o.stride, wd.s, sizeof o.stride);
  memcpy(o.dilation, wd.d, sizeof o.dilation);
  memcpy(o.pad, wd.pad, sizeof o.pad);
  return unspatial(c, hg_conv2d(c->g, x, w, &o), nsp);
}

/* BatchNormalization (inference): y = x * s + t per channel, s and t computed here. */
OP(BatchNormalization) {
  double eps;
  int64_t training;
  if (ox_attr_float(c, "epsilon", 1e-5, &eps) || ox_attr_int(c, "training_mode", 0, &training)) return c->e->code;
  if (training) return ox_fail(c, HARP_E_UNSUPPORTED, "training_mode=1 (harp runs inference)");
  ox_val *in = ox_in(c, 0, NULL);
  if (in && in->bn_folded) return ox_def(c, 0, ox_value(c, in)); /* folded into the Conv before it */
  for (size_t i = 1; i < c->node->n_output; i++)
    if (c->node->output[i][0]) return ox_fail(c, HARP_E_UNSUPPORTED, "the running statistics outputs (training) are not supported");
  hg_val x = ox_tensor(c, 0);
  if (x < 0) return c->e->code;
  int r = ox_rank_of(c, x);
  if (r < 2) return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "the input must have rank >= 2 (N, C, ...)");
  const ut_tensor *p[4];
  for (int i = 0; i < 4; i++) {
    ox_val *v = ox_in(c, i + 1, NULL);
    if (!v || !v->has_t || v->v > 0 || v->t.dtype != TINY_FP32 || v->t.rank != 1)
      return ox_needs_data(c, v), ox_fail(c, HARP_E_UNSUPPORTED, "scale, B, mean and var must be float32 constants of rank 1");
    p[i] = &v->t;
    if (p[i]->shape[0] != p[0]->shape[0]) return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "scale, B, mean and var differ in length");
  }
  int64_t ch = p[0]->shape[0], shp[TINY_MAX_RANK];
  shp[0] = ch;
  for (int i = 1; i < r - 1; i++) shp[i] = 1;
  ut_tensor s, t;
  if (ut_tensor_alloc(c->e, &s, TINY_FP32, r - 1, shp)) return c->e->code;
  if (ut_tensor_alloc(c->e, &t, TINY_FP32, r - 1, shp)) {
    ut_tensor_free(&s);
    return c->e->code;
  }
  for (int64_t k = 0; k < ch; k++) {
    const float *sc = p[0]->data, *b = p[1]->data, *mu = p[2]->data, *var = p[3]->data;
    float f = sc[k] / sqrtf(var[k] + (float)eps);
    ((float *)s.data)[k] = f;
    ((float *)t.data)[k] = b[k] - mu[k] * f;
  }
  hg_val sv = ox_weight(c, "bn_scale", &s), tv = sv > 0 ? ox_weight(c, "bn_shift", &t) : -1;
  ut_tensor_free(&s), ut_tensor_free(&t);
  if (sv < 0 || tv < 0) return c->e->code;
  return ox_def(c, 0, hg_add(c->g, hg_mul(c->g, x, sv), tv));
}

/* How many of window o's k positions along one axis ONNX averages over:
 * those inside [lo, hi) of the padded input's coordinates. */
static int64_t window_count(int64_t o, const win2d *w, int i, int64_t lo, int64_t hi) {
  int64_t a = o * w->s[i] - w->pad[2 * i], b = a + w->k[i];
  return (b < hi ? b : hi) - (a > lo ? a : lo);
}

static hg_val int_power(hg_graph *g, hg_val b, int n);

/* LpPool's window sums with dilations: the sum of the kernel's strided slices */
static hg_val dilated_sum_pool(ox_ctx *c, hg_val x, const win2d *w, const int64_t *out) {
  if (w->k[0] * w->k[1] > 64) return ox_fail(c, HARP_E_UNSUPPORTED, "a dilated %" PRId64 "x%" PRId64 " window (at most 64 taps)", w->k[0], w->k[1]), -1;
  hg_val y = HG_NONE;
  int axes[2] = {2, 3};
  for (int64_t a = 0; a < w->k[0]; a++)
    for (int64_t b = 0; b < w->k[1]; b++) {
      int64_t lo[2] = {a * w->d[0], b * w->d[1]}, hi[2] = {lo[0] + (out[0] - 1) * w->s[0] + 1, lo[1] + (out[1] - 1) * w->s[1] + 1};
      hg_val t = hg_slice(c->g, x, 2, axes, lo, hi, w->s);
      y = y == HG_NONE ? t : hg_add(c->g, y, t);
    }
  return y;
}

/* MaxPool, AveragePool, and LpPool when lp = p >= 1: (sum |x|^p)^(1/p), the
 * zero padding adding nothing, so the sum is the average times the window */
static harp_status pool(ox_ctx *c, bool is_max, int64_t lp) {
  hg_val x = ox_tensor(c, 0);
  if (x < 0) return c->e->code;
  if (ox_rank_of(c, x) == 5) return ox_pool3d(c, x, is_max, lp, 3); /* separable (onnx_conv3d.c) */
  int64_t ks[8], ceil_mode, cip = lp ? 1 : 0, order = 0;
  int n, nsp = 0;
  if (spatial(c, &x, "pooling", &nsp) || ox_attr_ints(c, "kernel_shape", ks, 8, &n)) return c->e->code;
  if (n != nsp) return ox_fail(c, HARP_E_INVALID_ARG, "kernel_shape must have %d values (%d-D pooling)", nsp, nsp);
  if (nsp == 1) ks[1] = ks[0], ks[0] = 1;
  win2d w;
  if (window(c, x, ks, nsp, &w) || ox_attr_int(c, "ceil_mode", 0, &ceil_mode) ||
      ox_attr_int(c, "count_include_pad", 0, &cip) || ox_attr_int(c, "storage_order", 0, &order))
    return c->e->code;
  bool dilated = w.d[0] != 1 || w.d[1] != 1;
  if (dilated && !is_max && !lp && nsp == 2) return ox_pool3d(c, ox_tensor(c, 0), false, 0, 2); /* as 3-D (onnx_conv3d.c) */
  if (dilated && !is_max && !lp) return ox_fail(c, HARP_E_UNSUPPORTED, "dilated 1-D average pooling");
  if (hg_val_dtype(c->g, x) == TINY_BOOL) return ox_fail(c, HARP_E_DTYPE_MISMATCH, "pooling takes numbers, not bool");
  if (lp && (x = int_power(c->g, hg_abs(c->g, x), (int)lp)) < 0) return c->e->code ? c->e->code : ox_fail(c, HARP_E_INTERNAL, "|x|^p");
  int64_t ek[2] = {(w.k[0] - 1) * w.d[0] + 1, (w.k[1] - 1) * w.d[1] + 1}; /* the window's extent */
  if (c->node->n_output > 1 && c->node->output[1][0]) return ox_fail(c, HARP_E_UNSUPPORTED, "the Indices output of MaxPool");
  const fe_shape *s = ox_shape_of(c, x);
  int64_t in[2] = {-1, -1}, out[2] = {0, 0}, pads[4];
  memcpy(pads, w.pad, sizeof pads); /* as written, before the ceil_mode extension */
  bool uneven = false; /* some average has fewer elements than the window */
  for (int i = 0; i < 2; i++) {
    bool known = fe_dim_is_int(s->d[2 + i], &in[i]);
    if (!known && (ceil_mode || dilated || (!is_max && (w.pad[2 * i] || w.pad[2 * i + 1]) && !cip)))
      return ox_need_value(c, s->d[2 + i], ceil_mode ? "the spatial size (for ceil_mode)" : dilated ? "the spatial size (for dilated pooling)"
                                                                                                    : "the spatial size (for count_include_pad=0)");
    if (!known) continue;
    int64_t span = in[i] + w.pad[2 * i] + w.pad[2 * i + 1] - ek[i];
    if (span < 0) return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "the window is larger than the padded input");
    out[i] = span / w.s[i] + 1;
    if (ceil_mode) { /* more padding at the end where ceil gives one more window */
      out[i] = (span + w.s[i] - 1) / w.s[i] + 1;
      if ((out[i] - 1) * w.s[i] >= in[i] + w.pad[2 * i]) out[i]--;
      int64_t extra = (out[i] - 1) * w.s[i] + ek[i] - (in[i] + w.pad[2 * i] + w.pad[2 * i + 1]);
      if (extra > 0) w.pad[2 * i + 1] += extra, uneven = true;
    }
    if (!cip && (w.pad[2 * i] || w.pad[2 * i + 1])) uneven = true;
  }
  if (w.pad[0] || w.pad[1] || w.pad[2] || w.pad[3]) {
    int64_t lo[4] = {0, 0, w.pad[0], w.pad[2]}, hi[4] = {0, 0, w.pad[1], w.pad[3]};
    x = hg_pad(c->g, x, lo, hi, 4, is_max ? -INFINITY : 0.0);
  }
  hg_pool2d_opts o = {.kernel = {w.k[0], w.k[1]}, .stride = {w.s[0], w.s[1]}};
  if (lp) {
    hg_val sum = dilated ? dilated_sum_pool(c, x, &w, out) : hg_mul(c->g, hg_avg_pool2d(c->g, x, &o), hg_const(c->g, (double)(w.k[0] * w.k[1])));
    hg_val y = lp == 1 ? sum : lp == 2 ? hg_sqrt(c->g, sum) : hg_exp(c->g, hg_mul(c->g, hg_log(c->g, sum), hg_const(c->g, 1.0 / (double)lp)));
    return c->e->code ? c->e->code : ox_def(c, 0, unspatial(c, y, nsp));
  }
  if (dilated) {
    hg_val y = ox_dilated_max_pool(c, x, w.k, w.s, w.d, out);
    return c->e->code ? c->e->code : ox_def(c, 0, unspatial(c, y, nsp));
  }
  tiny_dtype xdt = hg_val_dtype(c->g, x);
  if (is_max && (xdt == TINY_I8 || xdt == TINY_U8)) /* a quantized tensor: the max of exact fp32 copies */
    return ox_def(c, 0, hg_cast(c->g, unspatial(c, hg_max_pool2d(c->g, hg_cast(c->g, x, TINY_FP32), &o), nsp), xdt));
  if (is_max) return ox_def(c, 0, unspatial(c, hg_max_pool2d(c->g, x, &o), nsp));
  hg_val y = hg_avg_pool2d(c->g, x, &o);
  if (!uneven || y < 0) return ox_def(c, 0, unspatial(c, y, nsp));
  /* y * window / count, the count per output position */
  if (out[0] * out[1] > ((int64_t)1 << 24)) return ox_fail(c, HARP_E_LIMIT, "an output plane of more than 2^24 positions");
  ut_tensor t;
  if (ut_tensor_alloc(c->e, &t, TINY_FP32, 2, out)) return c->e->code;
  for (int64_t a = 0; a < out[0]; a++)
    for (int64_t b = 0; b < out[1]; b++) {
      int64_t ch = cip ? window_count(a, &w, 0, -pads[0], in[0] + pads[1]) : window_count(a, &w, 0, 0, in[0]);
      int64_t cw = cip ? window_count(b, &w, 1, -pads[2], in[1] + pads[3]) : window_count(b, &w, 1, 0, in[1]);
      ((float *)t.data)[a * out[1] + b] = ch > 0 && cw > 0 ? (float)(w.k[0] * w.k[1]) / (float)(ch * cw) : 0.0f;
    }
  hg_val sc = ox_weight(c, "pool_scale", &t);
  if (sc < 0) return c->e->code;
  return ox_def(c, 0, unspatial(c, hg_mul(c->g, y, sc), nsp));
}
OP(MaxPool) { return pool(c, true, 0); }
OP(AveragePool) { return pool(c, false, 0); }
OP(LpPool) {
  int64_t p;
  if (ox_attr_int(c, "p", 2, &p)) return c->e->code;
  if (p < 1 || p > 64) return ox_fail(c, HARP_E_UNSUPPORTED, "p = %" PRId64 " (harp takes 1 to 64)", p);
  return pool(c, false, p);
}

static harp_status global_pool(ox_ctx *c, hg_op op) {
  hg_val x = ox_tensor(c, 0);
  if (x < 0) return c->e->code;
  int r = ox_rank_of(c, x), axes[TINY_MAX_RANK];
  if (r < 3) return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "the input must have rank >= 3 (N, C, spatial...)");
  for (int i = 2; i < r; i++) axes[i - 2] = i;
  return ox_def(c, 0, hg_reduce(c->g, op, x, axes, r - 2, true));
}
OP(GlobalAveragePool) { return global_pool(c, HG_OP_MEAN); }
OP(GlobalMaxPool) { return global_pool(c, HG_OP_RMAX); }


/* b^n by squaring and multiplying, n >= 1. */
static hg_val int_power(hg_graph *g, hg_val b, int n) {
  hg_val r = n & 1 ? b : -1;
  for (n >>= 1; n; n >>= 1) {
    b = hg_mul(g, b, b);
    if (n & 1) r = r < 0 ? b : hg_mul(g, r, b);
  }
  return r;
}

/* (onnx_int.h) exp(k log x) costs a log and an exp per element: LRN's
 * x^-0.75 ran 3x slower that way.  An integer k takes no root (right for
 * x < 0 too). */
hg_val ox_pow_quarters(hg_graph *g, hg_val x, double k, bool ieee_edges) {
  double q = fabs(k) * 4;
  if (q == 0 || q > 16 || q != floor(q)) return -1;
  int n = (int)q;
  if (n % 4 == 0) {
    hg_val p = int_power(g, x, n / 4);
    return k < 0 ? hg_recip(g, p) : p;
  }
  /* a root: C's pow takes -0 to +0 / +inf and -inf to +inf / +0, where
   * sqrt gives -0 and NaN */
  if (ieee_edges)
    x = hg_where(g, hg_binary(g, HG_OP_EQ, x, hg_const(g, -INFINITY)), hg_const(g, INFINITY), hg_add(g, x, hg_const(g, 0)));
  /* powers of h = x^(+-1/2): |k| = (n/2) halves, the odd quarter a sqrt of h */
  hg_val h = k < 0 ? hg_rsqrt(g, x) : hg_sqrt(g, x), p = n / 2 ? int_power(g, h, n / 2) : -1;
  if (n % 2 == 0) return p;
  hg_val r = hg_sqrt(g, h);
  return p < 0 ? r : hg_mul(g, p, r);
}

/* LRN: x / (bias + alpha/size * sum of x^2 over a window of channels)^beta.
 * The channel window is an average pool of size x 1 over [N, 1, C, rest]
 * with the channels padded by zeros; the power is from roots and products
 * where beta is a multiple of 1/4 (0.75, 0.5, 1: the models' values), else
 * exp(-beta * log(.)). */
OP(LRN) {
  int64_t size;
  double alpha, beta, bias;
  if (ox_attr_int(c, "size", 0, &size) || ox_attr_float(c, "alpha", 1e-4, &alpha) || ox_attr_float(c, "beta", 0.75, &beta) ||
      ox_attr_float(c, "bias", 1.0, &bias))
    return c->e->code;
  if (size < 1 || size > OX_MAX_DIM) return ox_fail(c, HARP_E_INVALID_ARG, "size must be >= 1 (it is %" PRId64 ")", size);
  hg_val x = ox_tensor(c, 0);
  if (x < 0) return c->e->code;
  if (ox_need_rank(c, x, 3, TINY_MAX_RANK, "the input (N, C, ...)")) return c->e->code;
  const fe_shape xs = *ox_shape_of(c, x);
  const fe_dim *rest = fe_dim_int(c->A, 1);
  for (int i = 2; i < xs.rank && rest; i++) rest = fe_dim_mul(c->A, rest, xs.d[i]);
  if (!rest) return ox_fail(c, HARP_E_LIMIT, "the spatial size expression is too large");
  fe_shape s4 = {.rank = 4, .d = {xs.d[0], fe_dim_int(c->A, 1), xs.d[1], rest}};
  /* all of it on the [N, 1, C, rest] view: a view that splits rest back into
   * the spatial axes costs a division and a remainder per load */
  hg_val x4 = fe_reshape(c->g, x, &s4);
  int64_t lo[4] = {0, 0, (size - 1) / 2, 0}, hi[4] = {0, 0, size / 2, 0};
  hg_pool2d_opts o = {.kernel = {size, 1}, .stride = {1, 1}};
  hg_val avg = hg_avg_pool2d(c->g, hg_pad(c->g, hg_mul(c->g, x4, x4), lo, hi, 4, 0.0), &o);
  hg_val base = hg_add(c->g, hg_mul(c->g, avg, hg_const(c->g, alpha)), hg_const(c->g, bias));
  hg_val inv = ox_pow_quarters(c->g, base, -beta, false); /* base >= bias > 0 */
  if (inv < 0) inv = hg_exp(c->g, hg_mul(c->g, hg_log(c->g, base), hg_const(c->g, -beta)));
  return ox_def(c, 0, fe_reshape(c->g, hg_mul(c->g, x4, inv), &xs));
}

/* InstanceNormalization: per sample and channel over the spatial axes,
 * (x - mean) / sqrt(var + eps) * scale[c] + B[c]. */
OP(InstanceNormalization) {
  double eps;
  hg_val x = ox_attr_float(c, "epsilon", 1e-5, &eps) ? -1 : ox_tensor(c, 0);
  hg_val sc = x > 0 ? ox_tensor(c, 1) : -1, b = sc > 0 ? ox_tensor(c, 2) : -1;
  if (x < 0 || sc < 0 || b < 0) return c->e->code;
  if (ox_need_rank(c, x, 3, TINY_MAX_RANK, "the input (N, C, ...)") || ox_need_rank(c, sc, 1, 1, "scale") ||
      ox_need_rank(c, b, 1, 1, "B"))
    return c->e->code;
  int r = ox_rank_of(c, x), axes[TINY_MAX_RANK];
  for (int i = 2; i < r; i++) axes[i - 2] = i;
  fe_shape cs = {.rank = r - 1};
  cs.d[0] = ox_shape_of(c, x)->d[1];
  for (int i = 1; i < r - 1; i++) cs.d[i] = fe_dim_int(c->A, 1);
  hg_val d = hg_sub(c->g, x, hg_reduce(c->g, HG_OP_MEAN, x, axes, r - 2, true));
  hg_val var = hg_reduce(c->g, HG_OP_MEAN, hg_mul(c->g, d, d), axes, r - 2, true);
  hg_val y = hg_mul(c->g, d, hg_rsqrt(c->g, hg_add(c->g, var, hg_const(c->g, eps))));
  return ox_def(c, 0, hg_add(c->g, hg_mul(c->g, y, fe_reshape(c->g, sc, &cs)), fe_reshape(c->g, b, &cs)));
}

/* LayerNormalization and RMSNormalization over axes [axis, r): y = (x - mean)
 * * inv * scale + B with inv = 1 / sqrt(mean((x - mean)^2) + eps) (RMS: no
 * mean, no B).  A LayerNormalization that asks only for Y is harp's
 * layernorm; with its Mean / InvStdDev outputs, and RMSNormalization, it is
 * composed, the statistics in the stash type (fp32 by default). */
static harp_status normalization(ox_ctx *c, bool rms) {
  hg_val x = ox_tensor(c, 0);
  if (x < 0) return c->e->code;
  int64_t a, stash;
  double eps;
  int axis, r = ox_rank_of(c, x);
  if (ox_attr_int(c, "axis", -1, &a) || ox_attr_float(c, "epsilon", 1e-5, &eps) || ox_attr_int(c, "stash_type", 1, &stash) ||
      ox_norm_axis(c, a, r, &axis))
    return c->e->code;
  if (stash != 1 && stash != OX_FLOAT16 && stash != OX_BFLOAT16)
    return ox_fail(c, HARP_E_UNSUPPORTED, "stash_type %" PRId64 " (harp computes the statistics in float, float16 or bfloat16)", stash);
  bool stats = false;
  for (size_t i = 1; i < c->node->n_output; i++) stats |= c->node->output[i][0] != 0;
  if (rms && stats) return ox_fail(c, HARP_E_ARITY, "RMSNormalization has one output");
  hg_val g = ox_tensor(c, 1), b = HG_NONE;
  if (g < 0) return c->e->code;
  if (!rms && c->node->n_input > 2 && c->node->input[2][0] && (b = ox_tensor(c, 2)) < 0) return c->e->code;
  tiny_dtype dt = hg_val_dtype(c->g, x), st = stash == 1 ? TINY_FP32 : stash == OX_FLOAT16 ? TINY_FP16 : TINY_BF16;
  if (!rms && !stats) return ox_def(c, 0, hg_layernorm(c->g, x, g, b, axis, eps));
  int axes[TINY_MAX_RANK], n = r - axis;
  for (int i = 0; i < n; i++) axes[i] = axis + i;
  hg_val xs = dt == st ? x : hg_cast(c->g, x, st), d = xs, mean = HG_NONE;
  if (!rms) d = hg_sub(c->g, xs, mean = hg_reduce(c->g, HG_OP_MEAN, xs, axes, n, true));
  hg_val var = hg_reduce(c->g, HG_OP_MEAN, hg_mul(c->g, d, d), axes, n, true);
  hg_val inv = hg_rsqrt(c->g, hg_add(c->g, var, hg_const(c->g, eps)));
  hg_val y = hg_mul(c->g, d, inv);
  if (st != dt) y = hg_cast(c->g, y, dt);
  y = hg_mul(c->g, y, g);
  if (b != HG_NONE) y = hg_add(c->g, y, b);
  if (ox_def(c, 0, y)) return c->e->code;
  if (!stats) return HARP_OK;
  return ox_def(c, 1, mean) ? c->e->code : ox_def(c, 2, inv);
}

OP(LayerNormalization) { return normalization(c, false); }
OP(RMSNormalization) { return normalization(c, true); }

/* GroupNormalization: x [N, C, ...] as [N, G, C/G * spatial], normalized
 * over its last axis; scale and bias are per group (opset 18) or per
 * channel (21).  The statistics in the stash type (fp32 by default). */
OP(GroupNormalization) {
  int64_t groups, stash, ch;
  double eps;
  hg_val x = ox_tensor(c, 0), sc = x > 0 ? ox_tensor(c, 1) : -1, b = sc > 0 ? ox_tensor(c, 2) : -1;
  if (b < 0 || ox_attr_int(c, "num_groups", 0, &groups) || ox_attr_float(c, "epsilon", 1e-5, &eps) ||
      ox_attr_int(c, "stash_type", 1, &stash) || ox_need_rank(c, x, 3, TINY_MAX_RANK, "the input (N, C, ...)"))
    return c->e->code;
  const fe_shape xs = *ox_shape_of(c, x);
  if (ox_known(c, xs.d[1], "the channel count", &ch)) return c->e->code;
  if (groups < 1 || ch % groups) return ox_fail(c, HARP_E_INVALID_ARG, "%" PRId64 " channels in %" PRId64 " groups", ch, groups);
  if (stash != 1) return ox_fail(c, HARP_E_UNSUPPORTED, "stash_type %" PRId64 " (harp computes the statistics in float)", stash);
  const fe_dim *G = fe_dim_int(c->A, groups), *one = fe_dim_int(c->A, 1), *rest = fe_dim_int(c->A, ch / groups);
  for (int i = 2; i < xs.rank && rest; i++) rest = fe_dim_mul(c->A, rest, xs.d[i]);
  if (!rest) return ox_fail(c, HARP_E_LIMIT, "the size expression is too large");
  tiny_dtype dt = hg_val_dtype(c->g, x);
  hg_val xg = fe_reshape(c->g, x, &(fe_shape){.rank = 3, .d = {xs.d[0], G, rest}});
  if (dt != TINY_FP32) xg = hg_cast(c->g, xg, TINY_FP32);
  int ax = 2;
  hg_val d = hg_sub(c->g, xg, hg_reduce(c->g, HG_OP_MEAN, xg, &ax, 1, true));
  hg_val var = hg_reduce(c->g, HG_OP_MEAN, hg_mul(c->g, d, d), &ax, 1, true);
  hg_val y = hg_mul(c->g, d, hg_rsqrt(c->g, hg_add(c->g, var, hg_const(c->g, eps))));
  if (dt != TINY_FP32) y = hg_cast(c->g, y, dt);
  fe_shape ps = {.rank = xs.rank - 1}; /* [C or G, 1, ...] against [.., C, spatial] or [.., G, rest] */
  if (c->opset >= 21) {
    y = fe_reshape(c->g, y, &xs);
    ps.d[0] = xs.d[1];
    for (int i = 1; i < ps.rank; i++) ps.d[i] = one;
  } else {
    ps = (fe_shape){.rank = 2, .d = {G, one}};
  }
  y = hg_add(c->g, hg_mul(c->g, y, fe_reshape(c->g, sc, &ps)), fe_reshape(c->g, b, &ps));
  return ox_def(c, 0, c->opset >= 21 ? y : fe_reshape(c->g, y, &xs));
}

/* LpNormalization: x / ||x||_p along axis (p 1 or 2); 0 where the norm is 0 */
OP(LpNormalization) {
  int64_t a, p;
  int axis;
  hg_val x = ox_tensor(c, 0);
  if (x < 0 || ox_attr_int(c, "axis", -1, &a) || ox_attr_int(c, "p", 2, &p) || ox_norm_axis(c, a, ox_rank_of(c, x), &axis))
    return c->e->code;
  if (p != 1 && p != 2) return ox_fail(c, HARP_E_INVALID_ARG, "p = %" PRId64 " (1 or 2)", p);
  hg_val n = p == 1 ? hg_reduce(c->g, HG_OP_SUM, hg_abs(c->g, x), &axis, 1, true)
                    : hg_sqrt(c->g, hg_reduce(c->g, HG_OP_SUM, hg_mul(c->g, x, x), &axis, 1, true));
  /* a zero norm divides by 1 (its x are all 0), as onnx's reference */
  return ox_def(c, 0, hg_div(c->g, x, hg_where(c->g, hg_binary(c->g, HG_OP_EQ, n, hg_const(c->g, 0)), hg_const(c->g, 1), n)));
}

/* MeanVarianceNormalization: (x - E[x]) / (sqrt(E[x^2] - E[x]^2) + 1e-9) over
 * axes (default 0, 2, 3), as the op's function body computes it */
OP(MeanVarianceNormalization) {
  int64_t av[TINY_MAX_RANK];
  int n, axes[TINY_MAX_RANK];
  hg_val x = ox_tensor(c, 0);
  if (x < 0 || ox_attr_ints(c, "axes", av, TINY_MAX_RANK, &n)) return c->e->code;
  int r = ox_rank_of(c, x);
  if (n < 0) {
    if (r < 4) return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "the default axes (0, 2, 3) need rank >= 4, got %d", r);
    n = 3, av[0] = 0, av[1] = 2, av[2] = 3;
  }
  for (int i = 0; i < n; i++)
    if (ox_norm_axis(c, av[i], r, &axes[i])) return c->e->code;
  hg_graph *g = c->g;
  hg_val m = hg_reduce(g, HG_OP_MEAN, x, axes, n, true), m2 = hg_reduce(g, HG_OP_MEAN, hg_mul(g, x, x), axes, n, true);
  hg_val sd = hg_add(g, hg_sqrt(g, hg_sub(g, m2, hg_mul(g, m, m))), hg_const(g, 1e-9));
  return ox_def(c, 0, hg_div(g, hg_sub(g, x, m), sd));
}

/* CausalConvWithState (opset 27; Mamba, Gated DeltaNet): a depthwise causal
 * 1-D conv of x [B, C, T] with w [C, 1, k] over [past_state (or k - 1 zeros)
 * | x], as the sum of k weighted slices; present_state is the last k - 1
 * positions of that; optional bias and SiLU. */
OP(CausalConvWithState) {
  hg_graph *g = c->g;
  char act[8];
  int64_t k;
  hg_val x = ox_tensor(c, 0), w = x > 0 ? ox_tensor(c, 1) : -1, b = HG_NONE, past = HG_NONE;
  if (w < 0 || ox_attr_str(c, "activation", "none", act, sizeof act)) return c->e->code;
  bool silu = !strcmp(act, "silu") || !strcmp(act, "swish");
  if (!silu && strcmp(act, "none") != 0) return ox_fail(c, HARP_E_INVALID_ARG, "activation \"%s\" (none, silu or swish)", act);
  if (ox_need_rank(c, x, 3, 3, "the input") || ox_need_rank(c, w, 3, 3, "the weight")) return c->e->code;
  const fe_shape xs = *ox_shape_of(c, x), ws = *ox_shape_of(c, w);
  if (ox_known(c, ws.d[2], "the kernel's tap count", &k)) return c->e->code;
  if (k < 1 || k > 64) return ox_fail(c, HARP_E_UNSUPPORTED, "a kernel of %" PRId64 " taps (harp takes 1 to 64)", k);
  if (fe_dim_cmp(ws.d[0], xs.d[1]) == FE_DIFF || !fe_dim_is_one(ws.d[1]))
    return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "the weight must be [channels, 1, k] for %s channels", xs.d[1]->text);
  if (c->node->n_input > 2 && c->node->input[2][0] && (b = ox_tensor(c, 2)) < 0) return c->e->code;
  if (c->node->n_input > 3 && c->node->input[3][0] && (past = ox_tensor(c, 3)) < 0) return c->e->code;
  const fe_dim *one = fe_dim_int(c->A, 1);
  hg_val xp = x;
  if (past != HG_NONE) {
    hg_val parts[2] = {past, x};
    xp = hg_concat(g, parts, 2, 2);
  } else if (k > 1) {
    int64_t lo[3] = {0, 0, k - 1}, hi[3] = {0, 0, 0};
    xp = hg_pad(g, x, lo, hi, 3, 0);
  }
  if (ox_check(c, xp)) return c->e->code;
  hg_val y = HG_NONE;
  int ax = 2;
  for (int64_t j = 0; j < k; j++) {
    int64_t lo = j, hi = j + 1, end = j == k - 1 ? INT64_MAX : -(k - 1 - j);
    hg_val wj = fe_reshape(g, hg_slice(g, w, 1, &ax, &lo, &hi, NULL), &(fe_shape){.rank = 3, .d = {one, xs.d[1], one}});
    hg_val t = hg_mul(g, hg_slice(g, xp, 1, &ax, &lo, &end, NULL), wj);
    y = y == HG_NONE ? t : hg_add(g, y, t);
  }
  if (b != HG_NONE) y = hg_add(g, y, fe_reshape(g, b, &(fe_shape){.rank = 3, .d = {one, xs.d[1], one}}));
  if (silu) y = hg_silu(g, y);
  if (ox_def(c, 0, y)) return c->e->code;
  if (c->node->n_output < 2 || !c->node->output[1][0]) return HARP_OK;
  if (k == 1) return ox_fail(c, HARP_E_UNSUPPORTED, "present_state of a 1-tap kernel (an empty tensor)");
  int64_t lo = -(k - 1), end = INT64_MAX;
  return ox_def(c, 1, hg_slice(g, xp, 1, &ax, &lo, &end, NULL));
}
