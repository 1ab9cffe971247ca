/* onnx_conv3d.c — 3-D Conv, ConvTranspose and pooling (MaxPool,
 * AveragePool, LpPool) over [N, C, D, H, W], built from harp's 2-D ops:
 *
 *   Conv: the depth taps stacked as channels.  The input, padded along D,
 *   is sliced once per depth tap kd (stride sd, dilation dd), the KD slices
 *   stacked beside the channels of each group, and the depth positions
 *   moved into the batch: [N Do, G KD C/G, H, W]; one 2-D convolution with
 *   the weight [O, KD C/G, KH, KW] (the weight's depth taps moved beside its
 *   channels) gives [N Do, O, Ho, Wo], moved back to [N, O, Do, Ho, Wo].
 *   The conv template runs it whole: a GEMM with K = KD C/G KH KW.
 *   ConvTranspose: zeros between the elements along each strided axis, the
 *   weight flipped with its channel axes swapped per group, then that
 *   convolution with stride 1 (as the 2-D one in onnx_ops_more.c).
 *   Pooling: separable.  The input is padded (max: -inf, else 0, ceil_mode's
 *   extra end included), pooled over H and W by the 2-D pools on [N, C Dp,
 *   Hp, Wp], then over D by the max / sum of KD strided slices; an average
 *   divides by its window's count, a product of per-axis counts.
 *
 * Needs: onnx_load.c / onnx_ops.c (values, attributes), the builder.
 * Gives: ox_conv3d, ox_conv_transpose3d (3-D, and 1-D as 3-D), ox_pool3d
 * (3-D, and 2-D dilated averages as 3-D; called by onnx_nn.c and
 * onnx_ops_more.c). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "onnx_int.h"

static const fe_dim *I(ox_ctx *c, int64_t v) { return fe_dim_int(c->A, v); }

/* A 3-D window's attributes (axes D, H, W). */
typedef struct win3 {
  int64_t k[3], s[3], d[3], lo[3], hi[3];
} win3;

/* Attribute `name` of a node with nsp spatial axes as per * 3 integers over
 * D, H, W (absent: dflt each; per 2: begins, then ends; a 1-D node's
 * values go to W, its D and H stay dflt). */
static harp_status intsn(ox_ctx *c, const char *name, int64_t dflt, int64_t *out, int per, int nsp) {
  int64_t v[8];
  int n, off = 3 - nsp;
  if (ox_attr_ints(c, name, v, 8, &n)) return c->e->code;
  if (n >= 0 && n != per * nsp) return ox_fail(c, HARP_E_INVALID_ARG, "%s must have %d values (%d-D), got %d", name, per * nsp, nsp, n);
  for (int i = 0; i < per * 3; i++) out[i] = dflt;
  for (int i = 0; i < nsp && n >= 0; i++)
    for (int j = 0; j < per; j++) out[3 * j + off + i] = v[nsp * j + i];
  return HARP_OK;
}

static harp_status ints3(ox_ctx *c, const char *name, int64_t dflt, int64_t *out, int want) {
  return intsn(c, name, dflt, out, want / 3, 3);
}

/* kernel k, strides, dilations and pads (or auto_pad, the spatial sizes in[]
 * known) of a 3-D window op. */
static harp_status window3(ox_ctx *c, const int64_t *k, const int64_t *in, int nsp, win3 *w) {
  int64_t p[6];
  memcpy(w->k, k, sizeof w->k);
  if (intsn(c, "strides", 1, w->s, 1, nsp) || intsn(c, "dilations", 1, w->d, 1, nsp) || intsn(c, "pads", 0, p, 2, nsp)) return c->e->code;
  for (int i = 0; i < 3; i++) {
    if (w->s[i] < 1 || w->d[i] < 1 || w->k[i] < 1 || w->s[i] > OX_MAX_DIM || w->d[i] > OX_MAX_DIM || w->k[i] > OX_MAX_DIM)
      return ox_fail(c, HARP_E_INVALID_ARG, "kernel sizes, strides and dilations must be >= 1");
    if (p[i] < 0 || p[3 + i] < 0 || p[i] > OX_MAX_DIM || p[3 + i] > OX_MAX_DIM) return ox_fail(c, HARP_E_INVALID_ARG, "pads must be >= 0");
    w->lo[i] = p[i], w->hi[i] = p[3 + i];
  }
  char ap[32];
  if (ox_attr_str(c, "auto_pad", "NOTSET", ap, sizeof ap)) return c->e->code;
  bool upper = !strcmp(ap, "SAME_UPPER");
  if (!strcmp(ap, "VALID")) memset(w->lo, 0, sizeof w->lo), memset(w->hi, 0, sizeof w->hi);
  else if (upper || !strcmp(ap, "SAME_LOWER"))
    for (int i = 0; i < 3; i++) {
      int64_t out = (in[i] + w->s[i] - 1) / w->s[i], tot = (out - 1) * w->s[i] + (w->k[i] - 1) * w->d[i] + 1 - in[i];
      if (tot < 0) tot = 0;
      w->lo[i] = upper ? tot / 2 : tot - tot / 2, w->hi[i] = tot - w->lo[i];
    }
  else if (strcmp(ap, "NOTSET") != 0)
    return ox_fail(c, HARP_E_INVALID_ARG, "auto_pad \"%s\" (expected NOTSET, SAME_UPPER, SAME_LOWER or VALID)", ap);
  return HARP_OK;
}

/* The spatial sizes of x [N, C, D, H, W], which 3-D windows need known. */
static harp_status sizes3(ox_ctx *c, hg_val x, const char *what, int64_t *in) {
  const fe_shape *s = ox_shape_of(c, x);
  for (int i = 0; i < 3; i++)
    if (ox_known(c, s->d[2 + i], what, &in[i])) return c->e->code;
  return HARP_OK;
}

static hg_val pad_axes(ox_ctx *c, hg_val x, const int64_t *lo, const int64_t *hi, double v) {
  int64_t l[5] = {0, 0, lo[0], lo[1], lo[2]}, h[5] = {0, 0, hi[0], hi[1], hi[2]};
  return l[2] || l[3] || l[4] || h[2] || h[3] || h[4] ? hg_pad(c->g, x, l, h, 5, v) : x;
}

/* ---- Conv ------------------------------------------------------------------------------------ */
/* The weight w [O, C/G, KD, KH, KW] as [O, KD C/G, KH, KW], its depth taps
 * beside its channels: a new weight when w is one of the model's (the conv
 * template takes it packed), else a permuted copy in the graph. */
static hg_val depth_weight(ox_ctx *c, hg_val w) {
  const fe_shape ws = *ox_shape_of(c, w);
  const fe_node *n = fe_node_of(c->g, w);
  const ut_tensor *t = NULL;
  for (int i = 0; n && n->op == HG_OP_INPUT && n->name && i < c->m->nweights && !t; i++)
    if (!strcmp(c->m->weight_ids[i], n->name) && c->m->weights[i].dtype == TINY_FP32 && c->m->weights[i].rank == 5) t = &c->m->weights[i];
  if (t) {
    int64_t O = t->shape[0], Cg = t->shape[1], KD = t->shape[2], hw = t->shape[3] * t->shape[4];
    int64_t shp[4] = {O, KD * Cg, t->shape[3], t->shape[4]};
    ut_tensor r;
    if (ut_tensor_alloc(c->e, &r, TINY_FP32, 4, shp)) return -1;
    const float *src = t->data;
    float *dst = r.data;
    for (int64_t o = 0; o < O; o++)
      for (int64_t ci = 0; ci < Cg; ci++)
        for (int64_t kd = 0; kd < KD; kd++)
          memcpy(dst + ((o * KD + kd) * Cg + ci) * hw, src + ((o * Cg + ci) * KD + kd) * hw, sizeof *dst * (size_t)hw);
    return ox_weight(c, "weight_kd", &r);
  }
  int64_t KD;
  if (ox_known(c, ws.d[2], "the kernel depth", &KD)) return -1;
  const fe_dim *K = fe_dim_mul(c->A, ws.d[1], I(c, KD));
  int pw[5] = {0, 2, 1, 3, 4};
  if (!K) return ox_fail(c, HARP_E_LIMIT, "a size expression too large"), -1;
  return hg_add(c->g, fe_reshape(c->g, hg_permute(c->g, w, pw, 5), &(fe_shape){.rank = 4, .d = {ws.d[0], K, ws.d[3], ws.d[4]}}),
                hg_const(c->g, 0));
}

/* x [N, C, Dp, H, W] (already padded along D), weight w [O, C/G, KD, KH,
 * KW] as a graph value: the depth taps as channels, one 2-D convolution
 * (pads along H and W, its stride and dilation there). */
static hg_val conv_depth(ox_ctx *c, hg_val x, hg_val w, const win3 *wn, int64_t G, hg_val bias) {
  hg_graph *g = c->g;
  const fe_shape xs = *ox_shape_of(c, x), ws = *ox_shape_of(c, w);
  int64_t Dp, C, O, KD = wn->k[0];
  if (ox_known(c, xs.d[2], "the depth", &Dp) || ox_known(c, xs.d[1], "the channels", &C) || ox_known(c, ws.d[0], "the filters", &O)) return -1;
  int64_t span = Dp - (KD - 1) * wn->d[0] - 1;
  if (span < 0) return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "the kernel's depth reach is larger than the padded input's %" PRId64, Dp), -1;
  if (C % G || O % G) return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "%" PRId64 " channels and %" PRId64 " filters in %" PRId64 " groups", C, O, G), -1;
  if (KD > 256) return ox_fail(c, HARP_E_UNSUPPORTED, "a kernel %" PRId64 " deep (at most 256)", KD), -1;
  int64_t Do = span / wn->s[0] + 1, Cg = C / G;
  const fe_dim *N = xs.d[0], *H = xs.d[3], *W = xs.d[4], *NDo = fe_dim_mul(c->A, N, I(c, Do));
  if (!NDo) return ox_fail(c, HARP_E_LIMIT, "a size expression too large"), -1;
  hg_val parts[256];
  int ax = 2;
  for (int64_t kd = 0; kd < KD; kd++) {
    int64_t lo = kd * wn->d[0], hi = lo + (Do - 1) * wn->s[0] + 1;
    hg_val s = hg_slice(g, x, 1, &ax, &lo, &hi, &wn->s[0]);
    parts[kd] = fe_reshape(g, s, &(fe_shape){.rank = 7, .d = {N, I(c, G), I(c, 1), I(c, Cg), I(c, Do), H, W}});
  }
  hg_val st = KD == 1 ? parts[0] : hg_concat(g, parts, (int)KD, 2); /* [N, G, KD, C/G, Do, H, W] */
  int pin[7] = {0, 4, 1, 2, 3, 5, 6};
  /* + 0: the conv reads a dense buffer (through the views: generic loops) */
  hg_val x2 = hg_add(g, fe_reshape(g, hg_permute(g, st, pin, 7), &(fe_shape){.rank = 4, .d = {NDo, I(c, KD * C), H, W}}),
                     hg_const(g, 0));
  hg_val w2 = depth_weight(c, w);
  if (w2 < 0) return -1;
  hg_conv2d_opts o = {.bias = bias, .stride = {wn->s[1], wn->s[2]}, .dilation = {wn->d[1], wn->d[2]},
                      .pad = {wn->lo[1], wn->hi[1], wn->lo[2], wn->hi[2]}, .groups = G};
  hg_val y = hg_conv2d(g, x2, w2, &o);
  if (ox_check(c, y)) return -1;
  const fe_shape *ys = ox_shape_of(c, y);
  y = fe_reshape(g, y, &(fe_shape){.rank = 5, .d = {N, I(c, Do), I(c, O), ys->d[2], ys->d[3]}});
  int pback[5] = {0, 2, 1, 3, 4};
  return hg_permute(g, y, pback, 5);
}

harp_status ox_conv3d(ox_ctx *c, hg_val x, hg_val w, hg_val bias) {
  const fe_shape *ws = ox_shape_of(c, w);
  int64_t k[3], in[3], G, ks[3];
  if (ws->rank != 5) return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "a 3-D convolution's weight has rank 5, got %d", ws->rank);
  for (int i = 0; i < 3; i++)
    if (ox_known(c, ws->d[2 + i], "the kernel size", &k[i])) return c->e->code;
  if (ints3(c, "kernel_shape", 0, ks, 3)) return c->e->code;
  if (ox_attr(c, "kernel_shape") && (ks[0] != k[0] || ks[1] != k[1] || ks[2] != k[2]))
    return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "kernel_shape does not match the weight's %" PRId64 "x%" PRId64 "x%" PRId64, k[0], k[1], k[2]);
  win3 wn;
  if (sizes3(c, x, "the spatial size a 3-D convolution needs", in) || window3(c, k, in, 3, &wn) || ox_attr_int(c, "group", 1, &G))
    return c->e->code;
  if (G < 1 || G > OX_MAX_DIM) return ox_fail(c, HARP_E_INVALID_ARG, "group must be >= 1");
  hg_val xp = pad_axes(c, x, (int64_t[]){wn.lo[0], 0, 0}, (int64_t[]){wn.hi[0], 0, 0}, 0);
  return ox_def(c, 0, conv_depth(c, xp, w, &wn, G, bias));
}

/* ---- ConvTranspose ----------------------------------------------------------------------------- */
/* w [Ci, Co/G, KD, KH, KW] -> [Co, Ci/G, KD, KH, KW], flipped in space and
 * its channel axes swapped per group. */
static harp_status flip3(ox_ctx *c, const ut_tensor *w, int64_t G, ut_tensor *out) {
  int64_t ci = w->shape[0], cog = w->shape[1], cig = ci / G, sp = w->shape[2] * w->shape[3] * w->shape[4];
  int64_t shp[5] = {cog * G, cig, w->shape[2], w->shape[3], w->shape[4]};
  if (ut_tensor_alloc(c->e, out, TINY_FP32, 5, shp)) return c->e->code;
  const float *src = w->data;
  float *dst = out->data;
  for (int64_t g = 0; g < G; g++)
    for (int64_t i = 0; i < cig; i++)
      for (int64_t o = 0; o < cog; o++)
        for (int64_t t = 0; t < sp; t++) dst[((g * cog + o) * cig + i) * sp + t] = src[((g * cig + i) * cog + o) * sp + (sp - 1 - t)];
  return HARP_OK;
}

/* x [N, C, D, H, W] with s - 1 zeros after each element along each axis
 * (the last ones cut). */
static hg_val spread(ox_ctx *c, hg_val x, const int64_t *s) {
  hg_graph *g = c->g;
  for (int a = 0; a < 3; a++) {
    if (s[a] == 1) continue;
    const fe_shape xs = *ox_shape_of(c, x);
    fe_shape u = {.rank = 6}, m = xs;
    for (int i = 0, k = 0; i < 6; i++) u.d[i] = i == a + 3 ? I(c, 1) : xs.d[k++];
    int64_t lo[6] = {0}, hi[6] = {0};
    hi[a + 3] = s[a] - 1;
    if (!(m.d[2 + a] = fe_dim_mul(c->A, xs.d[2 + a], I(c, s[a])))) return ox_fail(c, HARP_E_LIMIT, "a size expression too large"), -1;
    x = fe_reshape(g, hg_pad(g, fe_reshape(g, x, &u), lo, hi, 6, 0), &m);
    int ax = 2 + a;
    int64_t b = 0, e = -(s[a] - 1);
    x = hg_slice(g, x, 1, &ax, &b, &e, NULL);
  }
  return x;
}

/* ConvTranspose of x [N, C, D, H, W] (nsp 3) or [N, C, L] (nsp 1, as
 * [N, C, 1, 1, L]) by the constant weight wv. */
harp_status ox_conv_transpose3d(ox_ctx *c, hg_val x, ox_val *wv, int nsp) {
  if (!wv || wv->v > 0 || !wv->has_t || wv->t.dtype != TINY_FP32 || wv->t.rank != nsp + 2)
    return ox_needs_data(c, wv), ox_fail(c, HARP_E_UNSUPPORTED, "the weight must be a float32 constant of rank %d (%d-D ConvTranspose)",
                                         nsp + 2, nsp);
  const fe_shape xs0 = *ox_shape_of(c, x);
  int64_t k[5] = {wv->t.shape[0], wv->t.shape[1], 1, 1, 1};
  for (int i = 0; i < nsp; i++) k[5 - nsp + i] = wv->t.shape[2 + i];
  if (nsp == 1) x = fe_reshape(c->g, x, &(fe_shape){.rank = 5, .d = {xs0.d[0], xs0.d[1], I(c, 1), I(c, 1), xs0.d[2]}});
  int64_t G, in[3], st[3], dl[3], p[6], op[3], os[8], C;
  int nos;
  char ap[16];
  if (sizes3(c, x, "the spatial size a ConvTranspose needs", in) || ox_known(c, xs0.d[1], "the channels", &C) ||
      ox_attr_int(c, "group", 1, &G) || intsn(c, "strides", 1, st, 1, nsp) || intsn(c, "dilations", 1, dl, 1, nsp) ||
      intsn(c, "pads", 0, p, 2, nsp) || intsn(c, "output_padding", 0, op, 1, nsp) || ox_attr_ints(c, "output_shape", os, 8, &nos) ||
      ox_attr_str(c, "auto_pad", "NOTSET", ap, sizeof ap))
    return c->e->code;
  if (G < 1 || k[0] != C || C % G)
    return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "the weight's %" PRId64 " input channels do not match the input's %" PRId64 " in %" PRId64 " groups",
                   k[0], C, G);
  bool same = !strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER");
  if (!strcmp(ap, "VALID")) memset(p, 0, sizeof p);
  else if (!same && strcmp(ap, "NOTSET") != 0) return ox_fail(c, HARP_E_INVALID_ARG, "auto_pad \"%s\"", ap);
  if (nos >= 0 && nos != nsp && nos != nsp + 2) return ox_fail(c, HARP_E_INVALID_ARG, "output_shape has %d values (%d, or %d with N and C)", nos, nsp, nsp + 2);
  win3 wn = {.s = {1, 1, 1}};
  for (int i = 0; i < 3; i++) {
    if (st[i] < 1 || dl[i] < 1 || st[i] > 64 || dl[i] > 64) return ox_fail(c, HARP_E_INVALID_ARG, "strides and dilations must be 1 to 64");
    if (op[i] < 0 || (op[i] >= st[i] && op[i] >= dl[i])) return ox_fail(c, HARP_E_INVALID_ARG, "output_padding %" PRId64 " is out of range", op[i]);
    int64_t full = (in[i] - 1) * st[i] + op[i] + (k[2 + i] - 1) * dl[i] + 1;
    if ((nos >= 0 || same) && i >= 3 - nsp) { /* the pads that give output_shape (or input x stride), the odd one as onnxruntime puts it */
      int64_t want = nos >= 0 ? os[nos - 3 + i] : in[i] * st[i], tot = full - want;
      if (tot < 0 && !same) return ox_fail(c, HARP_E_UNSUPPORTED, "output_shape %" PRId64 " beyond the %" PRId64 " the kernel reaches", want, full);
      if (tot < 0) tot = 0;
      p[i] = !strcmp(ap, "SAME_UPPER") ? tot / 2 : tot - tot / 2, p[3 + i] = tot - p[i];
    }
    int64_t edge = (k[2 + i] - 1) * dl[i];
    wn.k[i] = k[2 + i], wn.d[i] = dl[i], wn.lo[i] = edge - p[i], wn.hi[i] = edge - p[3 + i] + op[i];
    if (p[i] < 0 || p[3 + i] < 0 || wn.lo[i] < 0 || wn.hi[i] < 0) return ox_fail(c, HARP_E_UNSUPPORTED, "pads beyond the kernel's reach");
  }
  x = spread(c, x, st);
  if (x < 0) return c->e->code;
  ut_tensor w5 = wv->t, wt; /* a 1-D weight read as [Ci, Co/G, 1, 1, K] */
  w5.rank = 5;
  memcpy(w5.shape, k, sizeof k);
  if (flip3(c, &w5, G, &wt)) return c->e->code;
  hg_val w = ox_weight(c, "weight", &wt), bias = 0;
  if (w < 0) return c->e->code;
  if (c->node->n_input > 2 && c->node->input[2][0] && (bias = ox_tensor(c, 2)) < 0) return c->e->code;
  hg_val xp = pad_axes(c, x, (int64_t[]){wn.lo[0], 0, 0}, (int64_t[]){wn.hi[0], 0, 0}, 0);
  hg_val y = conv_depth(c, xp, w, &wn, G, bias);
  if (y > 0 && nsp == 1) {
    const fe_shape *ys = ox_shape_of(c, y);
    y = fe_reshape(c->g, y, &(fe_shape){.rank = 3, .d = {ys->d[0], ys->d[1], ys->d[4]}});
  }
  return ox_def(c, 0, y);
}

/* ---- pooling ------------------------------------------------------------------------------------ */
/* How many of window o's positions along axis i lie in [a, b) (the input,
 * or the input and its pads), the window starting at o s - lo. */
static int64_t count1(int64_t o, const win3 *w, int i, int64_t a, int64_t b) {
  int64_t first = o * w->s[i] - w->lo[i], n = 0;
  for (int64_t t = 0; t < w->k[i]; t++) {
    int64_t at = first + t * w->d[i];
    n += at >= a && at < b;
  }
  return n;
}

/* The reduction over D of y [N, C, Dp, Ho, Wo]: the max or sum of KD
 * strided slices. */
static hg_val depth_reduce(ox_ctx *c, hg_val y, const win3 *w, int64_t Do, bool is_max) {
  hg_val r = HG_NONE;
  int ax = 2;
  for (int64_t kd = 0; kd < w->k[0]; kd++) {
    int64_t lo = kd * w->d[0], hi = lo + (Do - 1) * w->s[0] + 1;
    hg_val t = hg_slice(c->g, y, 1, &ax, &lo, &hi, &w->s[0]);
    r = r == HG_NONE ? t : is_max ? hg_max(c->g, r, t) : hg_add(c->g, r, t);
  }
  return r;
}

/* A 2-D op's result [N, C, 1, H, W] back to [N, C, H, W]. */
static hg_val flat2(ox_ctx *c, hg_val y, int nsp) {
  if (nsp != 2 || y < 0) return y;
  const fe_shape *s = ox_shape_of(c, y);
  return fe_reshape(c->g, y, &(fe_shape){.rank = 4, .d = {s->d[0], s->d[1], s->d[3], s->d[4]}});
}

harp_status ox_pool3d(ox_ctx *c, hg_val x, bool is_max, int64_t lp, int nsp) {
  hg_graph *g = c->g;
  int64_t ks[3], in[3], ceil_mode, cip = lp ? 1 : 0, out[3];
  const fe_shape xs0 = *ox_shape_of(c, x);
  if (nsp == 2) x = fe_reshape(g, x, &(fe_shape){.rank = 5, .d = {xs0.d[0], xs0.d[1], I(c, 1), xs0.d[2], xs0.d[3]}});
  if (intsn(c, "kernel_shape", 1, ks, 1, nsp) || sizes3(c, x, "the spatial size pooling needs", in) || ox_attr_int(c, "ceil_mode", 0, &ceil_mode) ||
      ox_attr_int(c, "count_include_pad", 0, &cip))
    return c->e->code;
  if (!ox_attr(c, "kernel_shape")) return ox_fail(c, HARP_E_INVALID_ARG, "kernel_shape is required");
  if (c->node->n_output > 1 && c->node->output[1][0]) return ox_fail(c, HARP_E_UNSUPPORTED, "the Indices output of MaxPool");
  if (hg_val_dtype(g, x) == TINY_BOOL) return ox_fail(c, HARP_E_DTYPE_MISMATCH, "pooling takes numbers, not bool");
  win3 w;
  if (window3(c, ks, in, nsp, &w)) return c->e->code;
  int64_t written_hi[3];
  memcpy(written_hi, w.hi, sizeof written_hi);
  for (int i = 0; i < 3; i++) {
    int64_t ek = (w.k[i] - 1) * w.d[i] + 1, span = in[i] + w.lo[i] + w.hi[i] - ek;
    if (span < 0) return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "the window is larger than the padded input");
    out[i] = span / w.s[i] + 1;
    if (ceil_mode) { /* one more window where ceil gives it, unless it starts past the input and its start padding */
      out[i] = (span + w.s[i] - 1) / w.s[i] + 1;
      if ((out[i] - 1) * w.s[i] >= in[i] + w.lo[i]) out[i]--;
      int64_t extra = (out[i] - 1) * w.s[i] + ek - (in[i] + w.lo[i] + w.hi[i]);
      if (extra > 0) w.hi[i] += extra;
    }
  }
  if (lp && (x = hg_abs(g, x)) > 0 && lp > 1) {
    hg_val p = x;
    for (int64_t i = 1; i < lp; i++) p = hg_mul(g, p, x);
    x = p;
  }
  x = pad_axes(c, x, w.lo, w.hi, is_max ? -INFINITY : 0.0);
  if (ox_check(c, x)) return c->e->code;
  const fe_shape xs = *ox_shape_of(c, x);
  int64_t Dp = in[0] + w.lo[0] + w.hi[0], Hp = in[1] + w.lo[1] + w.hi[1], Wp = in[2] + w.lo[2] + w.hi[2];
  const fe_dim *CD = fe_dim_mul(c->A, xs.d[1], I(c, Dp));
  if (!CD) return ox_fail(c, HARP_E_LIMIT, "a size expression too large");
  hg_val x4 = fe_reshape(g, x, &(fe_shape){.rank = 4, .d = {xs.d[0], CD, I(c, Hp), I(c, Wp)}}), y;
  if (w.d[1] > 1 || w.d[2] > 1) { /* dilated over H, W: strided slices */
    if (!is_max && w.k[1] * w.k[2] > 64) return ox_fail(c, HARP_E_UNSUPPORTED, "a dilated %" PRId64 "x%" PRId64 " window (at most 64 taps)", w.k[1], w.k[2]);
    y = HG_NONE;
    int axes[2] = {2, 3};
    for (int64_t a = 0; a < w.k[1]; a++)
      for (int64_t b = 0; b < w.k[2]; b++) {
        int64_t lo[2] = {a * w.d[1], b * w.d[2]}, hi[2] = {lo[0] + (out[1] - 1) * w.s[1] + 1, lo[1] + (out[2] - 1) * w.s[2] + 1};
        hg_val t = hg_slice(g, x4, 2, axes, lo, hi, &w.s[1]);
        y = y == HG_NONE ? t : is_max ? hg_max(g, y, t) : hg_add(g, y, t);
      }
  } else {
    hg_pool2d_opts o = {.kernel = {w.k[1], w.k[2]}, .stride = {w.s[1], w.s[2]}};
    y = is_max ? hg_max_pool2d(g, x4, &o) : hg_mul(g, hg_avg_pool2d(g, x4, &o), hg_const(g, (double)(w.k[1] * w.k[2])));
  }
  y = fe_reshape(g, y, &(fe_shape){.rank = 5, .d = {xs.d[0], xs.d[1], I(c, Dp), I(c, out[1]), I(c, out[2])}});
  y = depth_reduce(c, y, &w, out[0], is_max);
  if (is_max || ox_check(c, y)) return c->e->code ? c->e->code : ox_def(c, 0, flat2(c, y, nsp));
  if (lp) { /* (sum |x|^p)^(1/p) */
    y = lp == 1 ? y : lp == 2 ? hg_sqrt(g, y) : hg_exp(g, hg_mul(g, hg_log(g, y), hg_const(g, 1.0 / (double)lp)));
    return ox_def(c, 0, flat2(c, y, nsp));
  }
  /* the average: the sum over the count of its window (padding counted or
   * not; ceil_mode's extension never), one count per output position */
  int64_t n = out[0] * out[1] * out[2];
  if (n > ((int64_t)1 << 24)) return ox_fail(c, HARP_E_LIMIT, "an output volume of more than 2^24 positions");
  ut_tensor t;
  if (ut_tensor_alloc(c->e, &t, TINY_FP32, 3, out)) return c->e->code;
  for (int64_t a = 0; a < out[0]; a++)
    for (int64_t b = 0; b < out[1]; b++)
      for (int64_t d = 0; d < out[2]; d++) {
        int64_t o[3] = {a, b, d}, m = 1;
        for (int i = 0; i < 3; i++) m *= cip ? count1(o[i], &w, i, -w.lo[i], in[i] + written_hi[i]) : count1(o[i], &w, i, 0, in[i]);
        ((float *)t.data)[(a * out[1] + b) * out[2] + d] = m > 0 ? 1.0f / (float)m : 0.0f;
      }
  hg_val sc = ox_weight(c, "pool_scale", &t);
  return sc < 0 ? c->e->code : ox_def(c, 0, flat2(c, hg_mul(g, y, sc), nsp));
}
