/* onnx_resize.c — ONNX Resize (opsets 10–19) and Upsample (7–9) in
 * general: modes nearest, linear and cubic, antialias, every coordinate
 * transformation (tf_crop_and_resize with its roi and extrapolation value),
 * every nearest_mode, cubic_coeff_a, exclude_outside,
 * keep_aspect_ratio_policy and axes; any factor, fractional ones too.
 *
 * Shapes are known at import, so each resized axis gets a table computed
 * here the way onnxruntime's CPU kernel computes it (in fp32): for output
 * position o, T input positions and their weights, and whether o falls
 * outside the input (tf_crop_and_resize: the extrapolation value).  The
 * table is applied axis by axis by the cheapest graph that gives the same
 * map (rs_apply): the identity; a strided slice (a nearest downscale); an
 * element repeat (a nearest upscale by a whole factor); for a whole factor
 * s whose map is periodic, the s phases, each a weighted sum of x shifted
 * by a few positions with the edge repeated, stacked and merged (linear and
 * cubic by whole factors: no gather); otherwise one gather of the T taps
 * and their weighted sum (fractional factors, align_corners, antialias).
 * Needs: onnx_load.c / onnx_ops.c (values, attributes), the builder.
 * Gives: ox_find_resize (Resize, Upsample). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_int.h"

enum { RS_NEAREST, RS_LINEAR, RS_CUBIC };
enum { CT_HALF_PIXEL, CT_ASYMMETRIC, CT_PYTORCH_HALF_PIXEL, CT_TF_HALF_PIXEL_FOR_NN, CT_ALIGN_CORNERS, CT_TF_CROP_AND_RESIZE,
       CT_HALF_PIXEL_SYMMETRIC };
enum { NM_SIMPLE, NM_ROUND_PREFER_FLOOR, NM_ROUND_PREFER_CEIL, NM_FLOOR, NM_CEIL };

/* A table's taps (T per output) times its outputs, at most. */
#define RS_MAX_TABLE ((int64_t)1 << 24)
/* Whole factors up to this take the phase graph (one weighted sum per phase). */
#define RS_MAX_PHASES 64
/* A map of more than one tap is a matmul by its dense matrix while the
 * input axis is at most this long and the matrix at most this large. */
#define RS_MAX_DENSE_IN 512
#define RS_MAX_DENSE ((int64_t)1 << 20)
/* Shifts of a phase, at most (cubic reaches 2 each way). */
#define RS_MAX_SHIFT 4

typedef struct rs_opts {
  int mode, ctm, nearest;
  float cubic_a;
  bool exclude, antialias, extrap;
  double ev; /* the extrapolation value */
} rs_opts;

/* One axis: output o reads idx[o*T + t] with weight w[o*T + t]; oob[o]:
 * outside the input (the extrapolation value).  Taps beyond an output's
 * own carry weight 0. */
typedef struct rs_table {
  int64_t in, out;
  int T;
  int32_t *idx;
  float *w;
  bool *oob; /* NULL: none */
} rs_table;

static void table_free(rs_table *t) {
  free(t->idx), free(t->w), free(t->oob);
  memset(t, 0, sizeof *t);
}

static hg_val K(ox_ctx *c, double v) { return hg_const(c->g, v); }
static const fe_dim *I(ox_ctx *c, int64_t v) { return fe_dim_int(c->A, v); }

/* ---- onnxruntime's arithmetic ------------------------------------------------------------ */
/* The input coordinate of output position x (fp32, as onnxruntime's
 * GetOriginalCoordinateFromResizedCoordinate; half_pixel_symmetric and
 * tf_crop_and_resize partly in double, as there). */
static float coord(int ctm, float x, float scale, float out, float in, float r0, float r1) {
  switch (ctm) {
  case CT_ASYMMETRIC: return x / scale;
  case CT_PYTORCH_HALF_PIXEL: return out > 1 ? (x + 0.5f) / scale - 0.5f : 0.0f;
  case CT_TF_HALF_PIXEL_FOR_NN: return (x + 0.5f) / scale;
  case CT_ALIGN_CORNERS: return out == 1 ? 0.0f : x * (in - 1) / (out - 1);
  case CT_TF_CROP_AND_RESIZE:
    return out > 1 ? (float)(double)(r0 * (in - 1) + (x * (r1 - r0) * (in - 1)) / (out - 1))
                   : (float)(0.5 * (double)(r0 + r1) * (double)(in - 1));
  case CT_HALF_PIXEL_SYMMETRIC: {
    float ow = scale * in, adj = out / ow, centre = in / 2, off = centre * (1 - adj);
    return (float)(off + ((double)x + 0.5) / scale - 0.5);
  }
  default: return (x + 0.5f) / scale - 0.5f;
  }
}

/* A float as an int64 the way C++'s cast does, kept in range (the
 * coordinates are bounded: no undefined conversion). */
static int64_t to_i(float x) { return (int64_t)(x < -1e9f ? -1e9f : x > 1e9f ? 1e9f : x); }

static int64_t nearest_pixel(int nm, float x, bool down) {
  switch (nm) {
  case NM_SIMPLE: return down ? to_i(ceilf(x)) : to_i(x);
  case NM_ROUND_PREFER_CEIL: return to_i(roundf(x));
  case NM_FLOOR: return to_i(floorf(x));
  case NM_CEIL: return to_i(ceilf(x));
  default: return x == (float)to_i(x) + 0.5f ? to_i(floorf(x)) : to_i(roundf(x));
  }
}

static int64_t clampi(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

static void cubic_coeffs(float s, float A, float k[4]) {
  s = fabsf(s);
  k[0] = ((A * (s + 1) - 5 * A) * (s + 1) + 8 * A) * (s + 1) - 4 * A;
  k[1] = ((A + 2) * s - (A + 3)) * s * s + 1;
  k[2] = ((A + 2) * (1 - s) - (A + 3)) * (1 - s) * (1 - s) + 1;
  k[3] = ((A * (2 - s) - 5 * A) * (2 - s) + 8 * A) * (2 - s) - 4 * A;
}

/* The antialias filters (Pillow's, as onnxruntime has them). */
static float aa_filter(const rs_opts *p, float x) {
  x = fabsf(x);
  if (p->mode == RS_LINEAR) return x < 1 ? 1 - x : 0;
  if (x < 1) return ((p->cubic_a + 2) * x - (p->cubic_a + 3)) * x * x + 1;
  if (x < 2) return (((x - 5) * x + 8) * x - 4) * p->cubic_a;
  return 0;
}

/* ---- the tables ------------------------------------------------------------------------------ */
typedef struct rs_axis {
  int64_t in, out;
  float scale, r0, r1; /* onnxruntime's scale (given, or out / in); the roi */
} rs_axis;

static float orig(const rs_opts *p, const rs_axis *a, int64_t o) {
  return a->scale == 1 ? (float)o : coord(p->ctm, (float)o, a->scale, (float)a->out, (float)a->in, a->r0, a->r1);
}

static void nearest_row(const rs_opts *p, const rs_axis *a, int64_t o, rs_table *t) {
  float x = orig(p, a, o);
  if (t->oob) t->oob[o] = p->extrap && (x < 0 || x > (float)(a->in - 1));
  t->idx[o] = (int32_t)(a->scale == 1 ? clampi(o, 0, a->in - 1) : clampi(nearest_pixel(p->nearest, x, a->scale < 1), 0, a->in - 1));
  t->w[o] = 1;
}

/* linear: the coordinate clamped into the input, its two neighbours */
static void linear_row(const rs_opts *p, const rs_axis *a, int64_t o, rs_table *t) {
  float x = orig(p, a, o), top = (float)(a->in - 1);
  if (t->oob) t->oob[o] = p->extrap && (x < 0 || x > top);
  x = x < 0 ? 0 : x > top ? top : x;
  int64_t i1 = clampi(to_i(x), 0, a->in - 1), i2 = clampi(i1 + 1, 0, a->in - 1);
  float d1 = fabsf(x - (float)i1), d2 = fabsf(x - (float)i2);
  if (i1 == i2) d1 = d2 = 0.5f;
  t->idx[2 * o] = (int32_t)i1, t->idx[2 * o + 1] = (int32_t)i2;
  t->w[2 * o] = d2, t->w[2 * o + 1] = d1;
}

/* cubic: four neighbours of floor(x), clamped; exclude_outside drops the
 * ones outside and renormalises */
static void cubic_row(const rs_opts *p, const rs_axis *a, int64_t o, rs_table *t) {
  float x = orig(p, a, o), k[4], sum = 0;
  if (t->oob) t->oob[o] = p->extrap && (x < 0 || x > (float)(a->in - 1));
  int64_t xi = to_i(floorf(x));
  cubic_coeffs(x - (float)xi, p->cubic_a, k);
  for (int j = 0; j < 4; j++) {
    int64_t v = xi - 1 + j;
    if (p->exclude && (v < 0 || v >= a->in)) k[j] = 0;
    sum += k[j];
  }
  if (!p->exclude) sum = 1;
  for (int j = 0; j < 4; j++) t->idx[4 * o + j] = (int32_t)clampi(xi - 1 + j, 0, a->in - 1), t->w[4 * o + j] = k[j] / sum;
}

/* antialias: the filter stretched by the downscale factor over a window
 * (onnxruntime's SetupUpsampleFilterAntiAlias): taps past the input fold
 * onto the edge unless exclude_outside, weights normalised */
static void aa_row(const rs_opts *p, const rs_axis *a, int64_t o, float support, int T, float *buf, rs_table *t) {
  float sc = 1.0f / a->scale, inv = sc >= 1 ? 1.0f / sc : 1.0f, total = 0;
  float centre = 0.5f + (sc == 1 ? (float)o : coord(p->ctm, (float)o, a->scale, (float)a->out, (float)a->in, a->r0, a->r1));
  if (t->oob) t->oob[o] = p->extrap && (centre - 0.5f < 0 || centre - 0.5f > (float)(a->in - 1));
  int64_t lo_r = to_i(floorf(centre - support + 0.5f)), hi_r = to_i(floorf(centre + support + 0.5f));
  hi_r = lo_r + clampi(hi_r - lo_r, 0, T);
  int64_t lo_c = clampi(lo_r, 0, a->in), hi_c = clampi(hi_r, 0, a->in);
  int64_t lo = p->exclude ? lo_c : lo_r, n = (p->exclude ? hi_c : hi_r) - lo;
  for (int j = 0; j < T; j++) buf[j] = 0;
  for (int64_t j = 0; j < n; j++) total += buf[j] = aa_filter(p, ((float)(j + lo) - centre + 0.5f) * inv);
  if (!p->exclude && lo_c < hi_c) {
    int64_t neg = clampi(-lo, 0, n - 1), past = clampi(n + lo - a->in, 0, n - 1);
    for (int64_t j = 0; j < neg; j++) buf[neg] += buf[j];
    for (int64_t j = n - past; j < n; j++) buf[n - past - 1] += buf[j];
    for (int64_t j = 0; (neg | past) > 0 && j < hi_c - lo_c; j++) buf[j] = buf[j + neg];
  }
  float norm = total == 0 ? 1.0f : 1.0f / total;
  for (int j = 0; j < T; j++) {
    bool in = j < hi_c - lo_c;
    t->idx[(int64_t)o * T + j] = (int32_t)(in ? lo_c + j : (lo_c < a->in ? lo_c : a->in - 1));
    t->w[(int64_t)o * T + j] = in ? buf[j] * norm : 0;
  }
}

static harp_status table_build(ox_ctx *c, const rs_opts *p, const rs_axis *a, rs_table *t) {
  memset(t, 0, sizeof *t);
  t->in = a->in, t->out = a->out;
  float support = 0;
  if (p->antialias) {
    float sc = 1.0f / a->scale;
    support = (p->mode == RS_CUBIC ? 2.0f : 1.0f) * (sc >= 1 ? sc : 1.0f);
    t->T = (int)ceilf(support) * 2 + 1;
  } else {
    t->T = p->mode == RS_NEAREST ? 1 : p->mode == RS_LINEAR ? 2 : 4;
  }
  if (t->T > 4096 || (int64_t)t->T * a->out > RS_MAX_TABLE)
    return ox_fail(c, HARP_E_LIMIT, "a resize table of %d taps x %" PRId64 " outputs (at most %" PRId64 ")", t->T, a->out,
                   RS_MAX_TABLE);
  size_t n = (size_t)(t->T * a->out) + 1;
  t->idx = ut_xmalloc(sizeof *t->idx * n), t->w = ut_xmalloc(sizeof *t->w * n);
  t->oob = p->extrap ? ut_xcalloc((size_t)a->out + 1, sizeof *t->oob) : NULL;
  float *buf = p->antialias ? ut_xmalloc(sizeof *buf * (size_t)t->T) : NULL;
  if (!t->idx || !t->w || (p->extrap && !t->oob) || (p->antialias && !buf)) {
    free(buf);
    table_free(t);
    return ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
  }
  for (int64_t o = 0; o < a->out; o++) {
    if (p->antialias) aa_row(p, a, o, support, t->T, buf, t);
    else if (p->mode == RS_NEAREST) nearest_row(p, a, o, t);
    else if (p->mode == RS_LINEAR) linear_row(p, a, o, t);
    else cubic_row(p, a, o, t);
  }
  free(buf);
  return HARP_OK;
}

/* ---- the map of a table: per output, its distinct inputs and summed weights ---------------- */
typedef struct rs_map {
  int T;
  int *n;       /* per output: its terms */
  int32_t *idx; /* [out][T], sorted, distinct, non-zero weights */
  float *w;
} rs_map;

static void map_free(rs_map *m) {
  free(m->n), free(m->idx), free(m->w);
  memset(m, 0, sizeof *m);
}

/* Terms (i[k], v[k]) k < n merged: sorted by index, equal ones summed,
 * zeros dropped; the count left. */
static int merge(int32_t *i, float *v, int n) {
  for (int a = 1; a < n; a++) /* insertion sort: n <= T, small */
    for (int b = a; b > 0 && i[b - 1] > i[b]; b--) {
      int32_t ti = i[b];
      float tv = v[b];
      i[b] = i[b - 1], v[b] = v[b - 1], i[b - 1] = ti, v[b - 1] = tv;
    }
  int m = 0;
  for (int a = 0; a < n; a++) {
    if (m && i[m - 1] == i[a]) v[m - 1] += v[a];
    else i[m] = i[a], v[m++] = v[a];
  }
  int z = 0;
  for (int a = 0; a < m; a++)
    if (v[a] != 0) i[z] = i[a], v[z++] = v[a];
  return z;
}

static bool map_build(const rs_table *t, rs_map *m) {
  size_t n = (size_t)(t->T * t->out) + 1;
  m->T = t->T;
  m->n = ut_xmalloc(sizeof *m->n * (size_t)(t->out + 1));
  m->idx = ut_xmalloc(sizeof *m->idx * n), m->w = ut_xmalloc(sizeof *m->w * n);
  if (!m->n || !m->idx || !m->w) return map_free(m), false;
  memcpy(m->idx, t->idx, sizeof *m->idx * (size_t)(t->T * t->out));
  memcpy(m->w, t->w, sizeof *m->w * (size_t)(t->T * t->out));
  for (int64_t o = 0; o < t->out; o++) m->n[o] = merge(&m->idx[o * t->T], &m->w[o * t->T], t->T);
  return true;
}

static bool close_w(float a, float b) { return fabsf(a - b) <= 1e-6f + 1e-5f * fabsf(b); }

/* Output o takes one input with weight 1: which one (-1: not so). */
static int64_t single(const rs_map *m, int64_t o) {
  return m->n[o] == 1 && m->w[o * m->T] == 1 ? m->idx[o * m->T] : -1;
}

/* A whole factor f = out / in whose map is periodic: output k f + j is
 * sum_t wt[j][t] x[clamp(k + d[j][t])], the offsets and weights read off
 * the middle period; nd[j] terms per phase.  False if the map is not so. */
static bool periodic(const rs_map *m, int64_t in, int64_t f, int *nd, int (*d)[8], float (*wt)[8]) {
  int64_t k0 = in / 2;
  if (m->T > 8) return false;
  for (int64_t j = 0; j < f; j++) {
    int64_t o = k0 * f + j;
    nd[j] = m->n[o];
    for (int t = 0; t < nd[j]; t++) {
      int64_t dd = m->idx[o * m->T + t] - k0;
      if (dd < -RS_MAX_SHIFT || dd > RS_MAX_SHIFT) return false;
      d[j][t] = (int)dd, wt[j][t] = m->w[o * m->T + t];
    }
  }
  for (int64_t k = 0; k < in; k++)
    for (int64_t j = 0; j < f; j++) {
      int32_t ci[8];
      float cw[8];
      for (int t = 0; t < nd[j]; t++) ci[t] = (int32_t)clampi(k + d[j][t], 0, in - 1), cw[t] = wt[j][t];
      int n = merge(ci, cw, nd[j]);
      int64_t o = k * f + j;
      if (n != m->n[o]) return false;
      for (int t = 0; t < n; t++)
        if (ci[t] != m->idx[o * m->T + t] || !close_w(cw[t], m->w[o * m->T + t])) return false;
    }
  return true;
}

/* ---- the graphs ------------------------------------------------------------------------------- */
static hg_val slice1(ox_ctx *c, hg_val x, int axis, int64_t lo, int64_t hi, int64_t step) {
  return hg_slice(c->g, x, 1, &axis, &lo, &hi, &step);
}

/* x[..., clamp(k + d, 0, n - 1), ...] along axis a of size n: the edge
 * element repeated where k + d falls outside */
static hg_val shifted(ox_ctx *c, hg_val x, int a, int64_t n, int64_t d) {
  if (d == 0) return x;
  int64_t lo = clampi(-d, 0, n), hi = clampi(n - d, lo, n);
  hg_val part[3];
  int np = 0;
  fe_shape s = *ox_shape_of(c, x);
  if (lo > 0) s.d[a] = I(c, lo), part[np++] = fe_expand(c->g, slice1(c, x, a, 0, 1, 1), &s);
  if (hi > lo) part[np++] = slice1(c, x, a, lo + d, hi + d, 1);
  if (n > hi) s.d[a] = I(c, n - hi), part[np++] = fe_expand(c->g, slice1(c, x, a, n - 1, n, 1), &s);
  return np == 1 ? part[0] : hg_concat(c->g, part, np, a);
}

/* A periodic map of whole factor f along axis a: the f phases stacked on a
 * new axis after a, merged into it. */
static hg_val phases(ox_ctx *c, hg_val x, int a, int64_t n, int64_t f, const int *nd, int (*d)[8], float (*wt)[8]) {
  hg_graph *g = c->g;
  const fe_shape sh = *ox_shape_of(c, x);
  if (sh.rank + 1 > TINY_MAX_RANK) return ox_fail(c, HARP_E_LIMIT, "rank above %d", TINY_MAX_RANK - 1), -1;
  fe_shape u = {.rank = sh.rank + 1}, m = sh;
  for (int i = 0, k = 0; i < u.rank; i++) u.d[i] = i == a + 1 ? I(c, 1) : sh.d[k++];
  m.d[a] = I(c, n * f);
  hg_val sv[2 * RS_MAX_SHIFT + 1] = {0}, ph[RS_MAX_PHASES];
  for (int64_t j = 0; j < f; j++) {
    hg_val v = 0;
    for (int t = 0; t < nd[j]; t++) {
      int k = d[j][t] + RS_MAX_SHIFT;
      if (!sv[k]) sv[k] = shifted(c, x, a, n, d[j][t]);
      hg_val term = wt[j][t] == 1 ? sv[k] : hg_mul(g, sv[k], K(c, wt[j][t]));
      v = v ? hg_add(g, v, term) : term;
    }
    if (!v) v = hg_mul(g, x, K(c, 0)); /* no term: weights that sum to nothing */
    ph[j] = fe_reshape(g, v, &u);
  }
  return f == 1 ? fe_reshape(g, ph[0], &m) : fe_reshape(g, hg_concat(g, ph, (int)f, a + 1), &m);
}

/* A constant of n values of dtype dt (from i32 or f32 or bool arrays),
 * shaped [1.., n at axis a, 1..] of rank r (n2 > 0: [.., n, n2, ..]). */
static hg_val table_const(ox_ctx *c, const char *what, tiny_dtype dt, const void *src, int64_t n, int64_t n2, int r, int a) {
  int64_t cnt = n * (n2 > 0 ? n2 : 1);
  ut_tensor t;
  if (ut_tensor_alloc(c->e, &t, dt, 1, &cnt)) return -1;
  if (cnt) memcpy(t.data, src, t.nbytes);
  hg_val v = ox_weight(c, what, &t);
  if (v < 0) return -1;
  fe_shape s = {.rank = r + (n2 > 0)};
  for (int i = 0; i < s.rank; i++) s.d[i] = I(c, i == a ? n : i == a + 1 && n2 > 0 ? n2 : 1);
  return fe_reshape(c->g, v, &s);
}

/* The general map along axis a: one gather of the T taps of every output,
 * then their weighted sum (none for a single tap of weight 1). */
static hg_val gathered(ox_ctx *c, hg_val x, int a, const rs_map *m, int64_t out) {
  hg_graph *g = c->g;
  int T = 1;
  bool ones = true;
  for (int64_t o = 0; o < out; o++) {
    if (m->n[o] > T) T = m->n[o];
    ones &= m->n[o] == 1 && m->w[o * m->T] == 1;
  }
  int32_t *idx = ut_xmalloc(sizeof *idx * (size_t)(T * out + 1));
  float *w = ut_xmalloc(sizeof *w * (size_t)(T * out + 1));
  if (!idx || !w) return free(idx), free(w), ox_fail(c, HARP_E_NO_MEMORY, "out of memory"), -1;
  for (int64_t o = 0; o < out; o++)
    for (int t = 0; t < T; t++) {
      bool have = t < m->n[o];
      idx[o * T + t] = have ? m->idx[o * m->T + t] : m->n[o] ? m->idx[o * m->T] : 0;
      w[o * T + t] = have ? m->w[o * m->T + t] : 0;
    }
  const fe_shape sh = *ox_shape_of(c, x);
  int r = sh.rank;
  char nm[32];
  snprintf(nm, sizeof nm, "resize_idx%d", a);
  hg_val ic = table_const(c, nm, TINY_I32, idx, out * T, 0, r, a), y = -1;
  if (ic > 0) {
    fe_shape e = sh;
    e.d[a] = I(c, out * T);
    y = hg_gather(g, x, fe_expand(g, ic, &e), a);
  }
  if (y > 0 && !ones) {
    if (r + 1 > TINY_MAX_RANK) return free(idx), free(w), ox_fail(c, HARP_E_LIMIT, "rank above %d", TINY_MAX_RANK - 1), -1;
    fe_shape s2 = {.rank = r + 1};
    for (int i = 0; i < s2.rank; i++) s2.d[i] = i == a ? I(c, out) : i == a + 1 ? I(c, T) : sh.d[i < a ? i : i - 1];
    snprintf(nm, sizeof nm, "resize_w%d", a);
    hg_val wc = table_const(c, nm, TINY_FP32, w, out, T, r, a);
    int ax = a + 1;
    y = wc < 0 ? -1 : hg_reduce(g, HG_OP_SUM, hg_mul(g, fe_reshape(g, y, &s2), wc), &ax, 1, false);
  }
  free(idx), free(w);
  return y;
}

/* The map as a contraction with its dense [in, out] matrix: axis a moved
 * last (a permute), x [R, in] M, moved back; the GEMM template beats a
 * gather of T taps while in is small (align_corners, fractional factors).
 * A non-finite element then reaches every output of its row (0 x inf), as
 * it reaches its neighbours' in onnxruntime. */
static hg_val contracted(ox_ctx *c, hg_val x, int a, const rs_map *m, int64_t in, int64_t out) {
  hg_graph *g = c->g;
  const fe_shape sh = *ox_shape_of(c, x);
  int r = sh.rank, to[TINY_MAX_RANK], from[TINY_MAX_RANK];
  int64_t dims[2] = {in, out};
  ut_tensor t;
  if (ut_tensor_alloc(c->e, &t, TINY_FP32, 2, dims)) return -1;
  float *mat = t.data;
  memset(mat, 0, t.nbytes);
  for (int64_t o = 0; o < out; o++)
    for (int k = 0; k < m->n[o]; k++) mat[m->idx[o * m->T + k] * out + o] += m->w[o * m->T + k];
  char nm[32];
  snprintf(nm, sizeof nm, "resize_mat%d", a);
  hg_val mv = ox_weight(c, nm, &t);
  if (mv < 0) return -1;
  for (int i = 0, k = 0; i < r; i++) /* to: the permutation moving a last; from: its inverse */
    if (i != a) to[k] = i, from[i] = k++;
  to[r - 1] = a, from[a] = r - 1;
  /* the matmul reads a dense operand (a permuted view would keep it off
   * the GEMM template): the permute is materialized by a product with 1 */
  hg_val xm = a == r - 1 ? x : hg_mul(g, hg_permute(g, x, to, r), K(c, 1));
  if (r == 1) xm = fe_reshape(g, xm, &(fe_shape){.rank = 2, .d = {I(c, 1), I(c, in)}});
  hg_val y = hg_matmul(g, xm, mv);
  if (r == 1) y = fe_reshape(g, y, &(fe_shape){.rank = 1, .d = {I(c, out)}});
  return a == r - 1 ? y : hg_permute(g, y, from, r);
}

/* Axis a of x resized by table t, by the cheapest graph giving its map;
 * outputs outside the input (tf_crop_and_resize) take the extrapolation value. */
static hg_val rs_apply(ox_ctx *c, hg_val x, int a, const rs_table *t, const rs_opts *p) {
  rs_map m = {0};
  if (!map_build(t, &m)) return ox_fail(c, HARP_E_NO_MEMORY, "out of memory"), -1;
  int64_t in = t->in, out = t->out, s0 = out ? single(&m, 0) : -1, step = out > 1 ? single(&m, 1) - s0 : 1;
  bool sel = true, prog = s0 >= 0 && step >= 0, rep = in > 0 && out % in == 0 && out > 0;
  for (int64_t o = 0; o < out; o++) {
    int64_t s = single(&m, o);
    sel &= s >= 0;
    prog &= s == s0 + step * o;
    rep &= rep && s == o / (out / in);
  }
  hg_val y;
  int nd[RS_MAX_PHASES], d[RS_MAX_PHASES][8];
  float wt[RS_MAX_PHASES][8];
  if (sel && prog && out == in && step == 1) {
    y = x;
  } else if (sel && prog && step >= 1) {
    y = slice1(c, x, a, s0, s0 + step * (out - 1) + 1, step);
  } else if (sel && prog && step == 0) {
    fe_shape s = *ox_shape_of(c, x);
    s.d[a] = I(c, out);
    y = fe_expand(c->g, slice1(c, x, a, s0, s0 + 1, 1), &s);
  } else if (sel && rep) {
    const fe_shape sh = *ox_shape_of(c, x);
    fe_shape u = sh, e;
    if (sh.rank + 1 > TINY_MAX_RANK) return map_free(&m), ox_fail(c, HARP_E_LIMIT, "rank above %d", TINY_MAX_RANK - 1), -1;
    u.rank = sh.rank + 1;
    for (int i = 0, k = 0; i < u.rank; i++) u.d[i] = i == a + 1 ? I(c, 1) : sh.d[k++];
    e = u, e.d[a + 1] = I(c, out / in);
    fe_shape mm = sh;
    mm.d[a] = I(c, out);
    y = fe_reshape(c->g, fe_expand(c->g, fe_reshape(c->g, x, &u), &e), &mm);
  } else if (!sel && in >= 2 && out % in == 0 && out / in <= RS_MAX_PHASES && periodic(&m, in, out / in, nd, d, wt)) {
    y = phases(c, x, a, in, out / in, nd, d, wt);
  } else if (!sel && in <= RS_MAX_DENSE_IN && in * out <= RS_MAX_DENSE && hg_val_dtype(c->g, x) == TINY_FP32) {
    y = contracted(c, x, a, &m, in, out);
  } else {
    y = gathered(c, x, a, &m, out);
  }
  map_free(&m);
  if (y < 0 || !t->oob) return y;
  bool any = false;
  for (int64_t o = 0; o < out && !any; o++) any = t->oob[o];
  if (!any) return y;
  char nm[32];
  snprintf(nm, sizeof nm, "resize_oob%d", a);
  hg_val mk = table_const(c, nm, TINY_BOOL, t->oob, out, 0, ox_rank_of(c, y), a);
  return mk < 0 ? -1 : hg_where(c->g, mk, hg_const_typed(c->g, p->ev, hg_val_dtype(c->g, y)), y);
}

/* ---- the attributes ------------------------------------------------------------------------------ */
static int pick(const char *s, const char *const *names, int n) {
  for (int i = 0; i < n; i++)
    if (!strcmp(s, names[i])) return i;
  return -1;
}

static harp_status parse_opts(ox_ctx *c, bool upsample, rs_opts *p) {
  static const char *const modes[] = {"nearest", "linear", "cubic"};
  static const char *const ctms[] = {"half_pixel", "asymmetric", "pytorch_half_pixel", "tf_half_pixel_for_nn", "align_corners",
                                     "tf_crop_and_resize", "half_pixel_symmetric"};
  static const char *const nms[] = {"", "round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
  char mode[32], ctm[32], nm[32];
  double a;
  int64_t ex, aa;
  bool v11 = !upsample && c->opset >= 11;
  if (ox_attr_str(c, "mode", "nearest", mode, sizeof mode) ||
      ox_attr_str(c, "coordinate_transformation_mode", v11 ? "half_pixel" : "asymmetric", ctm, sizeof ctm) ||
      ox_attr_str(c, "nearest_mode", v11 ? "round_prefer_floor" : "", nm, sizeof nm) ||
      ox_attr_float(c, "cubic_coeff_a", -0.75, &a) || ox_attr_int(c, "exclude_outside", 0, &ex) ||
      ox_attr_float(c, "extrapolation_value", 0, &p->ev) || ox_attr_int(c, "antialias", 0, &aa))
    return c->e->code;
  if (upsample && !strcmp(mode, "bilinear")) strcpy(mode, "linear");
  p->mode = pick(mode, modes, 3), p->ctm = v11 ? pick(ctm, ctms, 7) : CT_ASYMMETRIC;
  p->nearest = v11 ? pick(nm, nms, 5) : NM_SIMPLE;
  if (p->mode < 0 || (upsample && p->mode == RS_CUBIC)) return ox_fail(c, HARP_E_INVALID_ARG, "mode \"%s\"", mode);
  if (p->ctm < 0) return ox_fail(c, HARP_E_INVALID_ARG, "coordinate_transformation_mode \"%s\"", ctm);
  if (p->nearest < 0) return ox_fail(c, HARP_E_INVALID_ARG, "nearest_mode \"%s\"", nm);
  p->cubic_a = (float)a, p->exclude = ex != 0, p->antialias = aa != 0 && c->opset >= 18;
  p->extrap = p->ctm == CT_TF_CROP_AND_RESIZE;
  if (p->antialias && p->mode == RS_NEAREST) return ox_fail(c, HARP_E_INVALID_ARG, "antialias with mode nearest");
  return HARP_OK;
}

/* The resized axes, from the axes attribute (opset 18) or all of them. */
static harp_status axes_of(ox_ctx *c, int r, int *axis_of, int *n) {
  int64_t ax[TINY_MAX_RANK];
  int na;
  bool seen[TINY_MAX_RANK] = {0};
  if (ox_attr_ints(c, "axes", ax, TINY_MAX_RANK, &na)) return c->e->code;
  *n = na >= 0 ? na : r;
  for (int i = 0; i < *n; i++) {
    if (na >= 0 && ox_norm_axis(c, ax[i], r, &axis_of[i])) return c->e->code;
    if (na < 0) axis_of[i] = i;
    if (seen[axis_of[i]]) return ox_fail(c, HARP_E_INVALID_ARG, "axis %d is repeated", axis_of[i]);
    seen[axis_of[i]] = true;
  }
  return HARP_OK;
}

/* Up to cap floats of input i (a constant) or attribute attr; *n = -1 when
 * neither is given or the tensor is empty. */
static harp_status floats_of(ox_ctx *c, int i, const char *attr, double *out, int cap, int *n) {
  *n = -1;
  ox_val *v = i >= 0 ? ox_in(c, i, NULL) : NULL;
  if (v) {
    int64_t k = v->has_t ? ut_tensor_numel(&v->t) : v->has_i ? v->in : -1;
    if (k < 0) {
      ox_needs_data(c, v);
      return ox_fail(c, HARP_E_UNSUPPORTED, "input %d must be a constant (a graph input can be fixed at import: --param NAME=FILE)", i);
    }
    if (k > cap) return ox_fail(c, HARP_E_INVALID_ARG, "input %d has %" PRId64 " values (at most %d)", i, k, cap);
    for (int64_t j = 0; j < k; j++) {
      int64_t iv = 0;
      if (v->has_i && !fe_dim_is_int(v->iv[j], &iv)) return ox_need_value(c, v->iv[j], "a resize scale");
      out[j] = v->has_t ? ut_tensor_get(&v->t, j) : (double)iv;
    }
    if (k > 0) *n = (int)k;
  } else if (attr) {
    const Onnx__AttributeProto *a = ox_attr(c, attr);
    if (a && a->n_floats > (size_t)cap) return ox_fail(c, HARP_E_INVALID_ARG, "%s has %zu values", attr, a->n_floats);
    for (size_t j = 0; a && j < a->n_floats; j++) out[j] = a->floats[j];
    if (a && a->n_floats) *n = (int)a->n_floats;
  }
  return HARP_OK;
}

/* Each axis's sizes and scale from scales or sizes (and the policy). */
/* Whether onnxruntime and the ONNX reference resize axis a differently:
 * they take the resized length as the output size and as scale x size, and
 * these modes divide by it (or compare it with 1). */
static bool ambiguous(const rs_opts *p, const rs_axis *a) {
  float len = a->scale * (float)a->in;
  if (len == (float)a->out) return false;
  if (p->ctm == CT_PYTORCH_HALF_PIXEL) return (a->out > 1) != (len > 1);
  return p->ctm == CT_ALIGN_CORNERS || p->ctm == CT_TF_CROP_AND_RESIZE;
}

static harp_status axes_sizes(ox_ctx *c, const rs_opts *p, bool upsample, const fe_shape *sh, const int64_t *din, int r, rs_axis *ax) {
  int axis_of[TINY_MAX_RANK], na, ns, nz = -1;
  double sc[TINY_MAX_RANK];
  int64_t sz[TINY_MAX_RANK];
  if (axes_of(c, r, axis_of, &na)) return c->e->code;
  int si = upsample ? (c->opset >= 9 ? 1 : -1) : c->opset >= 11 ? 2 : 1;
  if (floats_of(c, si, upsample && c->opset < 9 ? "scales" : NULL, sc, TINY_MAX_RANK, &ns)) return c->e->code;
  if (ns < 0 && !upsample && c->opset >= 11) {
    ox_val *zv = ox_in(c, 3, NULL);
    if (zv && !zv->has_i) return ox_needs_data(c, zv), ox_fail(c, HARP_E_UNSUPPORTED, "sizes (input 3) must be a constant");
    if (zv && ox_const_ints(c, 3, "sizes", sz, TINY_MAX_RANK, &nz)) return c->e->code;
  }
  int n = ns >= 0 ? ns : nz;
  if (n != na) return ox_fail(c, HARP_E_INVALID_ARG, "need a scale or size per resized axis (%d), got %d", na, n < 0 ? 0 : n);
  for (int i = 0; i < r; i++) ax[i] = (rs_axis){din[i], din[i], 1, 0, 1};
  char pol[32];
  if (ox_attr_str(c, "keep_aspect_ratio_policy", "stretch", pol, sizeof pol)) return c->e->code;
  int policy = c->opset >= 18 && ns < 0 ? pick(pol, (const char *const[]){"stretch", "not_larger", "not_smaller"}, 3) : 0;
  if (policy < 0) return ox_fail(c, HARP_E_INVALID_ARG, "keep_aspect_ratio_policy \"%s\"", pol);
  float ext = policy == 1 ? INFINITY : 0;
  for (int k = 0; k < na; k++) {
    rs_axis *a = &ax[axis_of[k]];
    if (ns >= 0) {
      if (!(sc[k] > 0 && sc[k] < 1e9) || (upsample && sc[k] < 1))
        return ox_fail(c, HARP_E_INVALID_ARG, "scale %g on axis %d", sc[k], axis_of[k]);
      a->scale = (float)sc[k], a->out = (int64_t)(a->scale * (float)a->in);
      if (ambiguous(p, a))
        return ox_fail(c, HARP_E_UNSUPPORTED, "coordinate_transformation_mode \"%s\" with scale %g on axis %d of size %" PRId64
                       ": the resized length is %g, not whole (onnxruntime takes %" PRId64 ", the ONNX reference %g; give sizes)",
                       p->ctm == CT_ALIGN_CORNERS ? "align_corners" : p->ctm == CT_TF_CROP_AND_RESIZE ? "tf_crop_and_resize" : "pytorch_half_pixel",
                       sc[k], axis_of[k], a->in, (double)(a->scale * (float)a->in), a->out, (double)(a->scale * (float)a->in));
    } else {
      if (sz[k] < 0 || sz[k] > OX_MAX_DIM) return ox_fail(c, HARP_E_INVALID_ARG, "sizes[%d] = %" PRId64, k, sz[k]);
      if (!fe_dim_is_int(sh->d[axis_of[k]], &(int64_t){0})) return ox_need_value(c, sh->d[axis_of[k]], "the size a resize to sizes maps");
      if (a->in == 0 && sz[k] != 0) return ox_fail(c, HARP_E_INVALID_ARG, "axis %d has size 0; sizes gives %" PRId64, axis_of[k], sz[k]);
      a->out = sz[k], a->scale = a->in ? (float)sz[k] / (float)a->in : 1.0f;
    }
    if (policy == 1 && a->scale < ext) ext = a->scale;
    if (policy == 2 && a->scale > ext) ext = a->scale;
  }
  for (int k = 0; k < na && policy; k++) {
    rs_axis *a = &ax[axis_of[k]];
    a->scale = ext, a->out = (int64_t)roundf(ext * (float)a->in);
  }
  for (int i = 0; i < r; i++)
    if (ax[i].out < 0 || ax[i].out > OX_MAX_DIM || (ax[i].out == 0 && ax[i].in > 0 && ns >= 0))
      return ox_fail(c, HARP_E_INVALID_ARG, "axis %d: %" PRId64 " resized to %" PRId64, i, ax[i].in, ax[i].out);
  return HARP_OK;
}

/* tf_crop_and_resize's roi: starts then ends, per resized axis. */
static harp_status roi_of(ox_ctx *c, int r, rs_axis *ax) {
  int axis_of[TINY_MAX_RANK], na, n;
  double v[2 * TINY_MAX_RANK];
  if (axes_of(c, r, axis_of, &na) || floats_of(c, 1, NULL, v, 2 * TINY_MAX_RANK, &n)) return c->e->code;
  if (n != 2 * na) return ox_fail(c, HARP_E_INVALID_ARG, "tf_crop_and_resize needs a roi of %d values, got %d", 2 * na, n < 0 ? 0 : n);
  for (int k = 0; k < na; k++) ax[axis_of[k]].r0 = (float)v[k], ax[axis_of[k]].r1 = (float)v[na + k];
  return HARP_OK;
}

/* ---- the op -------------------------------------------------------------------------------------- */
/* The factor f when output o of table t is input o / f, one tap of weight
 * 1 inside the input (0: not so). */
static int64_t rep_factor(const rs_table *t) {
  if (t->T != 1 || t->in <= 0 || t->out % t->in) return 0;
  int64_t f = t->out / t->in;
  for (int64_t o = 0; o < t->out; o++)
    if (t->idx[o] != o / f || t->w[o] != 1 || (t->oob && t->oob[o])) return 0;
  return f;
}

/* A resized axis of symbolic size: only a nearest upscale by a whole factor
 * that repeats each element (checked on two sizes) can be built. */
static harp_status symbolic_axis(ox_ctx *c, const rs_opts *p, double scale, bool *rep) {
  *rep = false;
  if (p->mode != RS_NEAREST || p->extrap || !(scale >= 1 && scale <= 64 && scale == floor(scale))) return HARP_OK;
  for (int64_t n = 7; n <= 64; n += 57) {
    rs_axis a = {n, n * (int64_t)scale, (float)scale, 0, 1};
    rs_table t;
    if (table_build(c, p, &a, &t)) return c->e->code;
    bool ok = rep_factor(&t) == (int64_t)scale;
    table_free(&t);
    if (!ok) return HARP_OK;
  }
  *rep = true;
  return HARP_OK;
}

/* Each axis i of x with its elements repeated rep[i] times ([x0 x0 x1 x1]):
 * a unit dim after each, expanded, merged. */
static hg_val repeat_each(ox_ctx *c, hg_val x, const int64_t *rep) {
  const fe_shape s = *ox_shape_of(c, x);
  fe_shape u = {0}, e = {0}, m = {0};
  for (int i = 0; i < s.rank; i++) {
    u.d[u.rank++] = e.d[e.rank++] = s.d[i];
    m.d[m.rank++] = rep[i] == 1 ? s.d[i] : fe_dim_mul(c->A, s.d[i], I(c, rep[i]));
    if (!m.d[m.rank - 1]) return ox_fail(c, HARP_E_LIMIT, "a size expression too large"), -1;
    if (rep[i] == 1) continue;
    if (u.rank + 1 > TINY_MAX_RANK) return ox_fail(c, HARP_E_LIMIT, "rank above %d", TINY_MAX_RANK), -1;
    u.d[u.rank++] = I(c, 1), e.d[e.rank++] = I(c, rep[i]);
  }
  return fe_reshape(c->g, fe_expand(c->g, fe_reshape(c->g, x, &u), &e), &m);
}

static harp_status resize(ox_ctx *c, bool upsample) {
  rs_opts p = {0};
  hg_val x = parse_opts(c, upsample, &p) ? -1 : ox_tensor(c, 0);
  if (x < 0) return c->e->code;
  const fe_shape sh = *ox_shape_of(c, x);
  int r = sh.rank;
  if (r < 1) return ox_fail(c, HARP_E_INVALID_ARG, "the input must have rank 1 or more");
  int64_t din[TINY_MAX_RANK];
  bool sym[TINY_MAX_RANK];
  for (int i = 0; i < r; i++) sym[i] = !fe_dim_is_int(sh.d[i], &din[i]), din[i] = sym[i] ? 8 : din[i];
  rs_axis ax[TINY_MAX_RANK];
  if (axes_sizes(c, &p, upsample, &sh, din, r, ax) || (p.extrap && roi_of(c, r, ax))) return c->e->code;
  tiny_dtype dt = hg_val_dtype(c->g, x);
  if (p.mode != RS_NEAREST && !tiny_dtype_is_float(dt))
    return ox_fail(c, HARP_E_UNSUPPORTED, "%s resizing of %s values (harp interpolates floating-point values)",
                   p.mode == RS_LINEAR ? "linear" : "cubic", tiny_dtype_name(dt));
  bool same = true;
  for (int i = 0; i < r; i++) same &= ax[i].out == ax[i].in && !sym[i];
  if (same) return ox_def(c, 0, x); /* onnxruntime copies when no size changes */
  if (p.mode != RS_NEAREST && dt != TINY_FP32) x = hg_cast(c->g, x, TINY_FP32);
  /* axes that shrink most first: the later ones work on less */
  int order[TINY_MAX_RANK];
  for (int i = 0; i < r; i++) order[i] = i;
  for (int i = 1; i < r; i++)
    for (int j = i; j > 0 && (double)ax[order[j]].out / (double)(ax[order[j]].in ? ax[order[j]].in : 1) <
                                 (double)ax[order[j - 1]].out / (double)(ax[order[j - 1]].in ? ax[order[j - 1]].in : 1); j--) {
      int t = order[j];
      order[j] = order[j - 1], order[j - 1] = t;
    }
  int64_t rep[TINY_MAX_RANK]; /* axes that repeat each element: one reshape-expand-reshape for all, last */
  bool any_rep = false;
  for (int k = 0; k < r && x > 0 && !c->e->code; k++) {
    int i = order[k];
    rep[i] = 1;
    if (ax[i].scale == 1 && ax[i].out == ax[i].in) continue;
    if (sym[i]) {
      bool ok = false;
      if (symbolic_axis(c, &p, ax[i].scale, &ok)) return c->e->code;
      if (!ok) return ox_need_value(c, sh.d[i], "the size a resize maps");
      rep[i] = (int64_t)ax[i].scale, any_rep = true;
      continue;
    }
    rs_table t;
    if (table_build(c, &p, &ax[i], &t)) return c->e->code;
    int64_t f = rep_factor(&t);
    if (f > 1) rep[i] = f, any_rep = true;
    else x = rs_apply(c, x, i, &t, &p);
    table_free(&t);
  }
  if (any_rep && x > 0) x = repeat_each(c, x, rep);
  if (x > 0 && hg_val_dtype(c->g, x) != dt) x = hg_cast(c->g, x, dt);
  return c->e->code ? c->e->code : ox_def(c, 0, x);
}

static harp_status op_Resize(ox_ctx *c) { return resize(c, false); }
static harp_status op_Upsample(ox_ctx *c) { return resize(c, true); }

ox_op_fn ox_find_resize(const char *op) {
  if (!strcmp(op, "Resize")) return op_Resize;
  if (!strcmp(op, "Upsample")) return op_Upsample;
  return NULL;
}
