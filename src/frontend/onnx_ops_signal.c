/* onnx_ops_signal.c — the ONNX signal ops and AffineGrid, built from
 * matmuls by constant matrices (sizes are known at import):
 *
 *   DFT (opsets 17, 20): the signal axis moved last, cut or zero-padded to
 *   dft_length, its real and imaginary parts multiplied by the cos / sin
 *   matrices of the transform (onesided: the first L/2 + 1 bins; inverse:
 *   the conjugate transform over L), the two parts stacked.
 *   STFT: the frames gathered ([B, F, L]), the window multiplied in, a
 *   onesided DFT.  The summation index is folded (v[h] + v[L-h], v[h] -
 *   v[L-h]) before the products: half the matrix, and a Hermitian input's
 *   imaginary part cancels exactly.
 *   HannWindow, HammingWindow, BlackmanWindow, MelWeightMatrix: constants,
 *   as the ONNX reference computes them.
 *   AffineGrid: the normalised base grid [H W, 3] (or [D H W, 4]) times
 *   theta transposed.
 * Needs: onnx_load.c / onnx_ops.c (values, attributes), the builder.
 * Gives: ox_find_signal. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_int.h"

#define OP(name) static harp_status op_##name(ox_ctx *c)
/* A transform's matrix, at most: L x bins. */
#define OX_MAX_DFT ((int64_t)1 << 24)

static const fe_dim *I(ox_ctx *c, int64_t v) { return fe_dim_int(c->A, v); }

/* Optional input i as one integer (absent: dflt). */
static harp_status int_in(ox_ctx *c, int i, const char *what, int64_t dflt, int64_t *v) {
  ox_val *x = i < (int)c->node->n_input && c->node->input[i][0] ? ox_find(c, c->node->input[i]) : NULL;
  int n;
  if (!x) return *v = dflt, HARP_OK;
  if (ox_const_ints(c, i, what, v, 1, &n)) return c->e->code;
  return n == 1 ? HARP_OK : ox_fail(c, HARP_E_INVALID_ARG, "%s must have one value", what);
}

/* The cos matrix [L/2 + 1, K] and the sin matrix [(L-1)/2, K] of an
 * L-point transform's first K bins over the folded summation index
 * (inverse: scaled by 1/L): row h of cos is bin k's cos(2 pi h k / L),
 * row h - 1 of sin its sin. */
static harp_status dft_mats(ox_ctx *c, int64_t L, int64_t K, bool inverse, hg_val *cm, hg_val *sm) {
  int64_t hc = L / 2 + 1, hs = (L - 1) / 2;
  if ((hc + hs) * K > OX_MAX_DFT) return ox_fail(c, HARP_E_LIMIT, "a %" PRId64 "-point transform of %" PRId64 " bins (at most 2^24 coefficients)", L, K);
  ut_tensor ct, st = {0};
  int64_t cs[2] = {hc, K}, ss[2] = {hs, K};
  if (ut_tensor_alloc(c->e, &ct, TINY_FP32, 2, cs)) return c->e->code;
  if (hs && ut_tensor_alloc(c->e, &st, TINY_FP32, 2, ss)) return ut_tensor_free(&ct), c->e->code;
  double w = inverse ? 1.0 / (double)L : 1.0;
  for (int64_t h = 0; h < hc; h++)
    for (int64_t k = 0; k < K; k++) {
      double a = 2 * M_PI * (double)((h * k) % L) / (double)L;
      ((float *)ct.data)[h * K + k] = (float)(w * cos(a));
      if (h >= 1 && h <= hs) ((float *)st.data)[(h - 1) * K + k] = (float)(w * sin(a));
    }
  *cm = ox_weight(c, "dft_cos", &ct), *sm = 0;
  if (*cm > 0 && hs) *sm = ox_weight(c, "dft_sin", &st);
  ut_tensor_free(&ct), ut_tensor_free(&st);
  return *cm < 0 || *sm < 0 ? c->e->code : HARP_OK;
}

/* The summation index folded: v [..., L] -> P [..., L/2 + 1] (v[0],
 * v[h] + v[L-h], v[L/2] for even L) and M [..., (L-1)/2] (v[h] - v[L-h]),
 * so that sum_n v[n] cos(2 pi n k / L) = P cos and sum_n v[n] sin(..) =
 * M sin, pairs added before the products (a Hermitian input's imaginary
 * part cancels exactly). */
static void fold(ox_ctx *c, hg_val v, int64_t L, hg_val *P, hg_val *M) {
  hg_graph *g = c->g;
  int ax = ox_rank_of(c, v) - 1;
  int64_t hs = (L - 1) / 2, z = 0, o = 1, e1 = 1 + hs, b0 = L - hs, eL = L, m0 = L / 2, m1 = L / 2 + 1;
  hg_val parts[3];
  int np = 0;
  parts[np++] = hg_slice(g, v, 1, &ax, &z, &o, NULL);
  *M = 0;
  if (hs) {
    hg_val front = hg_slice(g, v, 1, &ax, &o, &e1, NULL), back = hg_flip(g, hg_slice(g, v, 1, &ax, &b0, &eL, NULL), &ax, 1);
    parts[np++] = hg_add(g, front, back);
    *M = hg_sub(g, front, back);
  }
  if (L % 2 == 0 && L > 1) parts[np++] = hg_slice(g, v, 1, &ax, &m0, &m1, NULL);
  *P = np == 1 ? parts[0] : hg_concat(g, parts, np, ax);
}

/* sum over the folded index of P cos (+ sign M sin): [..., K] */
static hg_val fsum(ox_ctx *c, hg_val P, hg_val M, hg_val cm, hg_val sm, int sign) {
  hg_graph *g = c->g;
  hg_val y = P ? hg_matmul(g, P, cm) : 0;
  if (M && sm && sign) {
    hg_val t = hg_matmul(g, M, sm);
    y = y ? (sign > 0 ? hg_add(g, y, t) : hg_sub(g, y, t)) : sign > 0 ? t : hg_neg(g, t);
  }
  return y;
}

/* x [..., L, 2 or 1] (the signal axis before the complex one) transformed
 * into [..., K, 2]. */
static hg_val dft_last(ox_ctx *c, hg_val x, int64_t L, int64_t K, bool inverse) {
  hg_graph *g = c->g;
  const fe_shape s = *ox_shape_of(c, x);
  int r = s.rank, last = r - 1;
  int64_t cc;
  if (ox_known(c, s.d[last], "the complex axis", &cc)) return -1;
  if (cc != 1 && cc != 2) return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "the last axis must be 1 (real) or 2 (complex), got %" PRId64, cc), -1;
  hg_val cm = 0, sm = 0;
  if (dft_mats(c, L, K, inverse, &cm, &sm)) return -1;
  fe_shape part = s;
  part.rank = r - 1;
  int64_t z = 0, o = 1, t = 2;
  hg_val Pr, Mr, Pi = 0, Mi = 0;
  fold(c, fe_reshape(g, hg_slice(g, x, 1, &last, &z, &o, NULL), &part), L, &Pr, &Mr);
  if (cc == 2) fold(c, fe_reshape(g, hg_slice(g, x, 1, &last, &o, &t, NULL), &part), L, &Pi, &Mi);
  int sg = inverse ? 1 : -1; /* e^{-i a} forward: re = P(re) cos + P... ; im = P(im) cos - M(re) sin */
  hg_val yr = fsum(c, Pr, Mi, cm, sm, -sg), yi = fsum(c, Pi, Mr, cm, sm, sg);
  if (!yi) yi = hg_mul(g, yr, hg_const(g, 0)); /* L = 1 or 2 and real: no sine terms */
  fe_shape u = s;
  u.d[last - 1] = I(c, K), u.d[last] = I(c, 1);
  hg_val parts[2] = {fe_reshape(g, yr, &u), fe_reshape(g, yi, &u)};
  return hg_concat(g, parts, 2, last);
}

/* The inverse of a onesided transform: x [..., K, 2] (bins 0 .. L/2) to the
 * real [..., L, 1], the other bins their conjugates: (1/L) sum_k w_k
 * (re_k cos - im_k sin), w_k = 2 but for bin 0 and bin L/2. */
static hg_val irfft_last(ox_ctx *c, hg_val x, int64_t L) {
  hg_graph *g = c->g;
  const fe_shape s = *ox_shape_of(c, x);
  int r = s.rank, last = r - 1, sa = r - 2;
  int64_t K = L / 2 + 1, n, cc;
  if (ox_known(c, s.d[sa], "the bins", &n) || ox_known(c, s.d[last], "the complex axis", &cc)) return -1;
  if (cc != 2) return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "an inverse onesided DFT takes complex bins [..., K, 2]"), -1;
  if (K * L > OX_MAX_DFT) return ox_fail(c, HARP_E_LIMIT, "a %" PRId64 "-point transform", L), -1;
  int64_t z = 0;
  if (n > K) x = hg_slice(g, x, 1, &sa, &z, &K, NULL);
  else if (n < K) {
    int64_t lo[TINY_MAX_RANK] = {0}, hi[TINY_MAX_RANK] = {0};
    hi[sa] = K - n;
    x = hg_pad(g, x, lo, hi, r, 0);
  }
  ut_tensor ct, st;
  int64_t shp[2] = {K, L};
  if (ut_tensor_alloc(c->e, &ct, TINY_FP32, 2, shp)) return -1;
  if (ut_tensor_alloc(c->e, &st, TINY_FP32, 2, shp)) return ut_tensor_free(&ct), -1;
  for (int64_t k = 0; k < K; k++)
    for (int64_t m = 0; m < L; m++) {
      double a = 2 * M_PI * (double)((k * m) % L) / (double)L, w = (k == 0 || 2 * k == L ? 1.0 : 2.0) / (double)L;
      ((float *)ct.data)[k * L + m] = (float)(w * cos(a)), ((float *)st.data)[k * L + m] = (float)(w * sin(a));
    }
  hg_val cm = ox_weight(c, "irfft_cos", &ct), sm = cm > 0 ? ox_weight(c, "irfft_sin", &st) : -1;
  ut_tensor_free(&ct), ut_tensor_free(&st);
  if (sm < 0) return -1;
  fe_shape part = s, u = s;
  part.rank = r - 1, part.d[sa] = I(c, K), u.d[sa] = I(c, L), u.d[last] = I(c, 1);
  int64_t o = 1, t = 2;
  hg_val re = fe_reshape(g, hg_slice(g, x, 1, &last, &z, &o, NULL), &part), im = fe_reshape(g, hg_slice(g, x, 1, &last, &o, &t, NULL), &part);
  return fe_reshape(g, hg_sub(g, hg_matmul(g, re, cm), hg_matmul(g, im, sm)), &u);
}

/* ---- DFT ------------------------------------------------------------------------------------------- */
OP(DFT) {
  hg_graph *g = c->g;
  hg_val x = ox_tensor(c, 0);
  int64_t inv, one, a, L, n;
  if (x < 0 || ox_attr_int(c, "inverse", 0, &inv) || ox_attr_int(c, "onesided", 0, &one)) return c->e->code;
  if (c->opset >= 20 ? int_in(c, 2, "axis", -2, &a) : ox_attr_int(c, "axis", 1, &a)) return c->e->code;
  const fe_shape s = *ox_shape_of(c, x);
  int r = s.rank, axis;
  if (r < 2) return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "the input must have rank >= 2 ([..., signal, 1 or 2])");
  if (ox_norm_axis(c, a, r, &axis)) return c->e->code;
  if (axis == r - 1) return ox_fail(c, HARP_E_INVALID_ARG, "axis %" PRId64 " is the complex axis", a);
  if (ox_known(c, s.d[axis], "the signal length", &n) || int_in(c, 1, "dft_length", n, &L)) return c->e->code;
  if (one && inv && c->node->n_input < 2) L = 2 * (n - 1); /* irfft: the full length the bins come from */
  if (one && inv && c->node->n_input >= 2 && !c->node->input[1][0]) L = 2 * (n - 1);
  if (L < 1) return ox_fail(c, HARP_E_INVALID_ARG, "dft_length %" PRId64, L);
  int perm[TINY_MAX_RANK], back[TINY_MAX_RANK], k = 0;
  for (int i = 0; i < r - 1; i++)
    if (i != axis) perm[k++] = i;
  perm[k++] = axis, perm[k] = r - 1;
  for (int i = 0; i < r; i++) back[perm[i]] = i;
  bool moved = axis != r - 2;
  if (moved) x = hg_permute(g, x, perm, r);
  int sa = r - 2;
  if (one && inv) { /* the real inverse of onesided bins */
    if (hg_val_dtype(g, x) != TINY_FP32) x = hg_cast(g, x, TINY_FP32);
    hg_val y = irfft_last(c, x, L);
    if (y > 0 && moved) y = hg_permute(g, y, back, r);
    return c->e->code ? c->e->code : ox_def(c, 0, y);
  }
  if (n > L) {
    int64_t z = 0;
    x = hg_slice(g, x, 1, &sa, &z, &L, NULL);
  } else if (n < L) {
    int64_t lo[TINY_MAX_RANK] = {0}, hi[TINY_MAX_RANK] = {0};
    hi[sa] = L - n;
    x = hg_pad(g, x, lo, hi, r, 0);
  }
  if (hg_val_dtype(g, x) != TINY_FP32) x = hg_cast(g, x, TINY_FP32);
  hg_val y = dft_last(c, x, L, one ? L / 2 + 1 : L, inv != 0);
  if (y > 0 && moved) y = hg_permute(g, y, back, r);
  tiny_dtype dt = hg_val_dtype(g, ox_tensor(c, 0));
  if (y > 0 && dt != TINY_FP32) y = hg_cast(g, y, dt);
  return c->e->code ? c->e->code : ox_def(c, 0, y);
}

/* ---- STFT ------------------------------------------------------------------------------------------ */
/* signal [B, S, 1 or 2], frame_step, window [L]?, frame_length? -> [B, F, K, 2] */
OP(STFT) {
  hg_graph *g = c->g;
  hg_val x = ox_tensor(c, 0);
  int64_t step, one, L = -1, S, cc;
  if (x < 0 || ox_attr_int(c, "onesided", 1, &one) || int_in(c, 1, "frame_step", -1, &step) || int_in(c, 3, "frame_length", -1, &L))
    return c->e->code;
  const fe_shape s = *ox_shape_of(c, x);
  if (s.rank != 3) return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "the signal must be [batch, length, 1 or 2]");
  if (ox_known(c, s.d[1], "the signal length", &S) || ox_known(c, s.d[2], "the complex axis", &cc)) return c->e->code;
  ox_val *wv = c->node->n_input > 2 && c->node->input[2][0] ? ox_find(c, c->node->input[2]) : NULL;
  hg_val wg = 0;
  int64_t wl = -1;
  if (wv) {
    wg = ox_value(c, wv);
    if (wg < 0) return c->e->code;
    const fe_shape *ws = ox_shape_of(c, wg);
    if (ws->rank != 1 || ox_known(c, ws->d[0], "the window length", &wl)) return c->e->code ? c->e->code : ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "the window must be 1-D");
  }
  if (L < 0) L = wl;
  if (L < 1) return ox_fail(c, HARP_E_INVALID_ARG, "the frame length must be given (frame_length or a window)");
  if (wl >= 0 && wl != L) return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "a window of %" PRId64 " for frames of %" PRId64, wl, L);
  if (step < 1 || L > S) return ox_fail(c, HARP_E_INVALID_ARG, "frame_step %" PRId64 ", frames of %" PRId64 " in a signal of %" PRId64, step, L, S);
  if (one && cc == 2) return ox_fail(c, HARP_E_INVALID_ARG, "onesided takes a real signal");
  int64_t F = (S - L) / step + 1;
  if (F * L > OX_MAX_DFT) return ox_fail(c, HARP_E_LIMIT, "%" PRId64 " frames of %" PRId64, F, L);
  /* the frames: a gather of F L positions along the signal */
  ut_tensor it;
  int64_t nfl = F * L;
  if (ut_tensor_alloc(c->e, &it, TINY_I32, 1, &nfl)) return c->e->code;
  for (int64_t f = 0; f < F; f++)
    for (int64_t n = 0; n < L; n++) ((int32_t *)it.data)[f * L + n] = (int32_t)(f * step + n);
  hg_val idx = ox_weight(c, "frames", &it);
  if (idx < 0) return c->e->code;
  idx = fe_expand(g, fe_reshape(g, idx, &(fe_shape){.rank = 3, .d = {I(c, 1), I(c, nfl), I(c, 1)}}),
                  &(fe_shape){.rank = 3, .d = {s.d[0], I(c, nfl), s.d[2]}});
  if (hg_val_dtype(g, x) != TINY_FP32) x = hg_cast(g, x, TINY_FP32);
  hg_val fr = fe_reshape(g, hg_gather(g, x, idx, 1), &(fe_shape){.rank = 4, .d = {s.d[0], I(c, F), I(c, L), s.d[2]}});
  if (wv) { /* the window multiplied in */
    if (hg_val_dtype(g, wg) != TINY_FP32) wg = hg_cast(g, wg, TINY_FP32);
    fr = hg_mul(g, fr, fe_reshape(g, wg, &(fe_shape){.rank = 4, .d = {I(c, 1), I(c, 1), I(c, L), I(c, 1)}}));
  }
  hg_val y = dft_last(c, fr, L, one ? L / 2 + 1 : L, false);
  return c->e->code ? c->e->code : ox_def(c, 0, y);
}

/* ---- windows and the mel matrix --------------------------------------------------------------------- */
/* A window of `size` (input 0): a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N),
 * N = size (periodic) or size - 1. */
static harp_status window_fn(ox_ctx *c, double a0, double a1, double a2) {
  int64_t size, periodic, oty;
  if (int_in(c, 0, "size", -1, &size) || ox_attr_int(c, "periodic", 1, &periodic) || ox_attr_int(c, "output_datatype", OX_FLOAT, &oty))
    return c->e->code;
  tiny_dtype dt;
  if (size < 0 || size > OX_MAX_FILL) return ox_fail(c, HARP_E_INVALID_ARG, "size %" PRId64, size);
  if (!ox_dtype((int)oty, &dt)) return ox_fail(c, HARP_E_UNSUPPORTED, "output_datatype %s, which harp does not have", ox_type_name((int)oty));
  ut_tensor t;
  if (ut_tensor_alloc(c->e, &t, dt == TINY_I32 || dt == TINY_BOOL ? TINY_FP32 : dt, 1, &size)) return c->e->code;
  double N = (double)(periodic ? size : size - 1);
  for (int64_t n = 0; n < size; n++) {
    double v = N == 0 ? 1 : a0 - a1 * cos(2 * M_PI * (double)n / N) + a2 * cos(4 * M_PI * (double)n / N);
    ut_tensor_set(&t, n, (float)v);
  }
  if (dt == TINY_I32 || dt == TINY_BOOL) return ut_tensor_free(&t), ox_fail(c, HARP_E_UNSUPPORTED, "an integer window");
  return ox_def_tensor(c, 0, &t, (int)oty);
}

OP(HannWindow) { return window_fn(c, 0.5, 0.5, 0); }
OP(HammingWindow) { return window_fn(c, 25.0 / 46.0, 1 - 25.0 / 46.0, 0); }
OP(BlackmanWindow) { return window_fn(c, 0.42, 0.5, 0.08); }

/* One float of a constant input. */
static harp_status float_in(ox_ctx *c, int i, const char *what, double *v) {
  ox_val *x = ox_in(c, i, NULL);
  if (x && ox_const_scalar(x, v)) return HARP_OK;
  if (x) ox_needs_data(c, x);
  return ox_fail(c, HARP_E_UNSUPPORTED, "%s (input %d) must be a constant", what, i);
}

/* [dft_length / 2 + 1, num_mel_bins] triangles between mel-spaced edges, as
 * the ONNX reference computes them. */
OP(MelWeightMatrix) {
  int64_t nmel, L, oty;
  double sr, lo, hi;
  if (int_in(c, 0, "num_mel_bins", -1, &nmel) || int_in(c, 1, "dft_length", -1, &L) || float_in(c, 2, "sample_rate", &sr) ||
      float_in(c, 3, "lower_edge_hertz", &lo) || float_in(c, 4, "upper_edge_hertz", &hi) ||
      ox_attr_int(c, "output_datatype", OX_FLOAT, &oty))
    return c->e->code;
  tiny_dtype dt;
  if (nmel < 1 || L < 1 || nmel > 65536 || L > ((int64_t)1 << 20) || !(sr > 0))
    return ox_fail(c, HARP_E_INVALID_ARG, "num_mel_bins %" PRId64 ", dft_length %" PRId64 ", sample_rate %g", nmel, L, sr);
  if (!ox_dtype((int)oty, &dt) || !tiny_dtype_is_float(dt)) return ox_fail(c, HARP_E_UNSUPPORTED, "output_datatype %s", ox_type_name((int)oty));
  int64_t bins = L / 2 + 1, shp[2] = {bins, nmel};
  int64_t *edge = malloc(sizeof *edge * (size_t)(nmel + 2));
  ut_tensor t;
  if (!edge) return ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
  if (ut_tensor_alloc(c->e, &t, dt, 2, shp)) return free(edge), c->e->code;
  double mlo = 2595 * log10(1 + lo / 700), mhi = 2595 * log10(1 + hi / 700), step = (mhi - mlo) / (double)(nmel + 2);
  for (int64_t i = 0; i < nmel + 2; i++) {
    double hz = 700 * (pow(10, ((double)i * step + mlo) / 2595) - 1);
    edge[i] = (int64_t)floor((double)(L + 1) * hz / sr);
  }
  for (int64_t i = 0; i < nmel; i++) {
    int64_t l = edge[i], m = edge[i + 1], r = edge[i + 2];
    if (m - l == 0 && m >= 0 && m < bins) ut_tensor_set(&t, m * nmel + i, 1);
    for (int64_t j = l; m - l > 0 && j <= m; j++)
      if (j >= 0 && j < bins) ut_tensor_set(&t, j * nmel + i, (float)((double)(j - l) / (double)(m - l)));
    for (int64_t j = m; r - m > 0 && j < r; j++)
      if (j >= 0 && j < bins) ut_tensor_set(&t, j * nmel + i, (float)((double)(r - j) / (double)(r - m)));
  }
  free(edge);
  return ox_def_tensor(c, 0, &t, (int)oty);
}

/* ---- AffineGrid ------------------------------------------------------------------------------------ */
/* theta [N, 2, 3] (or [N, 3, 4]), size [N, C, H, W] (or [N, C, D, H, W]) ->
 * grid [N, H, W, 2] (or [N, D, H, W, 3]): the base grid times theta^T. */
OP(AffineGrid) {
  hg_graph *g = c->g;
  hg_val th = ox_tensor(c, 0);
  int64_t sz[5], ac;
  int n;
  if (th < 0 || ox_const_ints(c, 1, "size", sz, 5, &n) || ox_attr_int(c, "align_corners", 0, &ac)) return c->e->code;
  if (n != 4 && n != 5) return ox_fail(c, HARP_E_INVALID_ARG, "size must have 4 or 5 values, got %d", n);
  int sp = n - 2;
  int64_t P = 1;
  for (int i = 2; i < n; i++) {
    if (sz[i] < 1 || sz[i] > OX_MAX_DIM) return ox_fail(c, HARP_E_INVALID_ARG, "size[%d] = %" PRId64, i, sz[i]);
    P *= sz[i];
  }
  if (P > OX_MAX_FILL / (sp + 1)) return ox_fail(c, HARP_E_LIMIT, "a grid of %" PRId64 " points", P);
  ut_tensor t;
  int64_t shp[2] = {P, sp + 1};
  if (ut_tensor_alloc(c->e, &t, TINY_FP32, 2, shp)) return c->e->code;
  for (int64_t p = 0; p < P; p++) { /* row p: (x, y[, z], 1), x along the last axis */
    int64_t rest = p;
    for (int a = n - 1; a >= 2; a--) {
      int64_t len = sz[a], i = rest % len;
      rest /= len;
      double v = ac ? (len > 1 ? -1 + 2.0 * (double)i / (double)(len - 1) : 0) : (2.0 * (double)i + 1) / (double)len - 1;
      ((float *)t.data)[p * (sp + 1) + (n - 1 - a)] = (float)v;
    }
    ((float *)t.data)[p * (sp + 1) + sp] = 1;
  }
  hg_val base = ox_weight(c, "base_grid", &t);
  if (base < 0) return c->e->code;
  int pt[3] = {0, 2, 1};
  hg_val y = hg_matmul(g, base, hg_permute(g, th, pt, 3)); /* [P, sp+1] x [N, sp+1, sp] -> [N, P, sp] */
  fe_shape o = {.rank = n};
  o.d[0] = ox_shape_of(c, th)->d[0];
  for (int i = 2; i < n; i++) o.d[i - 1] = I(c, sz[i]);
  o.d[n - 1] = I(c, sp);
  return ox_def(c, 0, fe_reshape(g, y, &o));
}

/* ---- dispatch --------------------------------------------------------------------------------------- */
static const struct {
  const char *name;
  ox_op_fn fn;
} ops[] = {
#define E(n) {#n, op_##n}
    E(AffineGrid), E(BlackmanWindow), E(DFT), E(HammingWindow), E(HannWindow), E(MelWeightMatrix), E(STFT),
#undef E
};

ox_op_fn ox_find_signal(const char *op) {
  for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
    if (!strcmp(ops[i].name, op)) return ops[i].fn;
  return NULL;
}
