/* test_fe_numerics.c — DSL programs lowered to Tiny IR and run on the
 * reference interpreter, against references computed here with plain loops
 * in double precision: every high-level op, with the awkward cases (groups,
 * strides, dilation, asymmetric padding, causal attention with M != N, masks,
 * heads, multi-axis layernorm, keepdim, symbolic sizes), in fp32 and fp16. */
#include "fe_testutil.h"
#include "util/util.h"

#ifndef HARP_SOURCE_DIR
#define HARP_SOURCE_DIR "."
#endif

#define MAXN 4096

static double v(const ut_tensor *t, int64_t i) { return fu_get(t, i); }

/* ---- matmul --------------------------------------------------------------- */
static void check_matmul(const char *dt, tiny_dtype tdt, double tol) {
  char src[512];
  snprintf(src, sizeof src,
           "graph main(a: %s[1, 3, 4], b: %s[2, 4, 5]) -> (y: %s[2, 3, 5]) {\n  y = a @ b\n  return y\n}\n", dt, dt, dt);
  uint64_t seed = 1;
  ut_tensor in[2] = {fu_random(tdt, 3, (int64_t[]){1, 3, 4}, &seed), fu_random(tdt, 3, (int64_t[]){2, 4, 5}, &seed)}, out;
  fu_run(src, NULL, in, 2, &out);
  double want[30];
  for (int b = 0; b < 2; b++)
    for (int i = 0; i < 3; i++)
      for (int j = 0; j < 5; j++) {
        double s = 0;
        for (int k = 0; k < 4; k++) s += v(&in[0], i * 4 + k) * v(&in[1], b * 20 + k * 5 + j);
        want[b * 15 + i * 5 + j] = s;
      }
  fu_expect(&out, want, 30, tol, tol);
  assert_int_equal(out.dtype, tdt);
  for (int i = 0; i < 2; i++) ut_tensor_free(&in[i]);
  ut_tensor_free(&out);
}

static void test_matmul(void **st) {
  (void)st;
  check_matmul("f32", TINY_FP32, 1e-5);
  check_matmul("f16", TINY_FP16, 2e-3);
}

/* ---- conv2d ------------------------------------------------------------------- */
typedef struct conv_case {
  int N, C, H, W, Co, Kh, Kw, G, sh, sw, dh, dw, pt, pb, pl, pr;
  bool bias;
} conv_case;

static void check_conv(const conv_case *c, const char *dt, tiny_dtype tdt, double tol) {
  int Oh = (c->H + c->pt + c->pb - c->dh * (c->Kh - 1) - 1) / c->sh + 1;
  int Ow = (c->W + c->pl + c->pr - c->dw * (c->Kw - 1) - 1) / c->sw + 1;
  int Cg = c->C / c->G;
  char src[1024];
  snprintf(src, sizeof src,
           "graph main(x: %s[%d, %d, %d, %d], w: %s[%d, %d, %d, %d], b: %s[%d]) -> (y: %s[%d, %d, %d, %d]) {\n"
           "  y = conv2d(x, w, %sstride=[%d, %d], pad=[%d, %d, %d, %d], dilation=[%d, %d], groups=%d)\n"
           "  return y\n}\n",
           dt, c->N, c->C, c->H, c->W, dt, c->Co, Cg, c->Kh, c->Kw, dt, c->Co, dt, c->N, c->Co, Oh, Ow,
           c->bias ? "bias=b, " : "", c->sh, c->sw, c->pt, c->pb, c->pl, c->pr, c->dh, c->dw, c->G);
  uint64_t seed = 3;
  ut_tensor in[3] = {fu_random(tdt, 4, (int64_t[]){c->N, c->C, c->H, c->W}, &seed),
                     fu_random(tdt, 4, (int64_t[]){c->Co, Cg, c->Kh, c->Kw}, &seed),
                     fu_random(tdt, 1, (int64_t[]){c->Co}, &seed)},
            out;
  fu_run(src, NULL, in, 3, &out);
  static double want[MAXN];
  int per = c->Co / c->G;
  for (int n = 0; n < c->N; n++)
    for (int o = 0; o < c->Co; o++)
      for (int y = 0; y < Oh; y++)
        for (int x = 0; x < Ow; x++) {
          double s = c->bias ? v(&in[2], o) : 0;
          int g = o / per;
          for (int ci = 0; ci < Cg; ci++)
            for (int i = 0; i < c->Kh; i++)
              for (int j = 0; j < c->Kw; j++) {
                int iy = y * c->sh + i * c->dh - c->pt, ix = x * c->sw + j * c->dw - c->pl;
                if (iy < 0 || iy >= c->H || ix < 0 || ix >= c->W) continue;
                int ch = g * Cg + ci;
                s += v(&in[0], ((n * c->C + ch) * c->H + iy) * c->W + ix) * v(&in[1], ((o * Cg + ci) * c->Kh + i) * c->Kw + j);
              }
          want[((n * c->Co + o) * Oh + y) * Ow + x] = s;
        }
  fu_expect(&out, want, (int64_t)c->N * c->Co * Oh * Ow, tol, tol);
  for (int i = 0; i < 3; i++) ut_tensor_free(&in[i]);
  ut_tensor_free(&out);
}

static void test_conv2d(void **st) {
  (void)st;
  const conv_case cases[] = {
      {1, 3, 6, 5, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true},  /* same padding */
      {2, 4, 7, 6, 6, 3, 2, 2, 2, 1, 1, 2, 1, 0, 2, 1, true},  /* groups, stride, dilation, asymmetric pad */
      {1, 4, 5, 5, 4, 3, 3, 4, 1, 1, 1, 1, 1, 1, 1, 1, false}, /* depthwise, no bias */
      {2, 2, 8, 8, 3, 1, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0, true},  /* 1x1, stride 2 */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    check_conv(&cases[i], "f32", TINY_FP32, 1e-5);
    check_conv(&cases[i], "f16", TINY_FP16, 4e-3);
  }
}

/* ---- attention -------------------------------------------------------------------- */
/* q [B, M, E], k/v [B, N, E] split into h heads; causal keeps j <= i + N - M;
 * mask [M, N] added; a row with no visible key gives 0. */
static void attn_ref(const ut_tensor *q, const ut_tensor *k, const ut_tensor *vv, const ut_tensor *mask, int B, int M,
                     int N, int E, int h, bool causal, double scale, double *out) {
  int D = E / h;
  if (scale == 0) scale = 1 / sqrt((double)D);
  for (int b = 0; b < B; b++)
    for (int hh = 0; hh < h; hh++)
      for (int i = 0; i < M; i++) {
        double s[64], mx = -INFINITY, z = 0;
        for (int j = 0; j < N; j++) {
          double d = 0;
          for (int t = 0; t < D; t++) d += v(q, (b * M + i) * E + hh * D + t) * v(k, (b * N + j) * E + hh * D + t);
          s[j] = d * scale + (mask ? v(mask, i * N + j) : 0);
          if (causal && j > i + N - M) s[j] = -INFINITY;
          if (s[j] > mx) mx = s[j];
        }
        for (int j = 0; j < N; j++) z += s[j] == -INFINITY ? 0 : exp(s[j] - mx);
        for (int t = 0; t < D; t++) {
          double o = 0;
          for (int j = 0; j < N; j++)
            if (s[j] != -INFINITY) o += exp(s[j] - mx) / z * v(vv, (b * N + j) * E + hh * D + t);
          out[(b * M + i) * E + hh * D + t] = o;
        }
      }
}

static void check_attention(int B, int M, int N, int E, int h, bool causal, bool mask, double scale, const char *dt,
                            tiny_dtype tdt, double tol) {
  char src[1024], opts[200];
  snprintf(opts, sizeof opts, "heads=%d%s%s", h, causal ? ", causal=true" : "", mask ? ", mask=m" : "");
  if (scale != 0) snprintf(opts + strlen(opts), sizeof opts - strlen(opts), ", scale=%g", scale);
  snprintf(src, sizeof src,
           "graph main(q: %s[%d, %d, %d], k: %s[%d, %d, %d], v: %s[%d, %d, %d], m: %s[%d, %d]) -> (y: %s[%d, %d, %d]) {\n"
           "  y = attention(q, k, v, %s)\n  return y\n}\n",
           dt, B, M, E, dt, B, N, E, dt, B, N, E, dt, M, N, dt, B, M, E, opts);
  uint64_t seed = 11;
  ut_tensor in[4] = {fu_random(tdt, 3, (int64_t[]){B, M, E}, &seed), fu_random(tdt, 3, (int64_t[]){B, N, E}, &seed),
                     fu_random(tdt, 3, (int64_t[]){B, N, E}, &seed), fu_random(tdt, 2, (int64_t[]){M, N}, &seed)},
            out;
  fu_run(src, NULL, in, 4, &out);
  static double want[MAXN];
  attn_ref(&in[0], &in[1], &in[2], mask ? &in[3] : NULL, B, M, N, E, h, causal, scale, want);
  fu_expect(&out, want, (int64_t)B * M * E, tol, tol);
  for (int i = 0; i < 4; i++) ut_tensor_free(&in[i]);
  ut_tensor_free(&out);
}

static void test_attention(void **st) {
  (void)st;
  const char *dts[2] = {"f32", "f16"};
  tiny_dtype tdts[2] = {TINY_FP32, TINY_FP16};
  double tols[2] = {1e-5, 4e-3};
  for (int d = 0; d < 2; d++) {
    check_attention(2, 5, 5, 8, 2, true, false, 0, dts[d], tdts[d], tols[d]);  /* self-attention, causal */
    check_attention(2, 3, 5, 8, 2, true, true, 0, dts[d], tdts[d], tols[d]);   /* M < N: bottom-right causal + mask */
    check_attention(1, 5, 3, 4, 1, true, false, 0, dts[d], tdts[d], tols[d]);  /* M > N: rows 0, 1 see no key -> 0 */
    check_attention(1, 4, 6, 6, 3, false, true, 0.7, dts[d], tdts[d], tols[d]); /* explicit scale */
  }
}

static void test_attention_rank4(void **st) {
  (void)st;
  /* [B, H, M, D] inputs: heads already split; the H axis is a batch axis */
  const char *src = "graph main(q: f32[1, 2, 3, 4], k: f32[1, 2, 3, 4], v: f32[1, 2, 3, 4]) -> (y: f32[1, 2, 3, 4]) {\n"
                    "  return attention(q, k, v)\n}\n";
  uint64_t seed = 5;
  ut_tensor in[3], out;
  for (int i = 0; i < 3; i++) in[i] = fu_random(TINY_FP32, 4, (int64_t[]){1, 2, 3, 4}, &seed);
  fu_run(src, NULL, in, 3, &out);
  /* as two batches of one head: [2, 3, 4] */
  ut_tensor r[3];
  for (int i = 0; i < 3; i++) r[i] = in[i], r[i].rank = 3, r[i].shape[0] = 2, r[i].shape[1] = 3, r[i].shape[2] = 4;
  double want[24];
  attn_ref(&r[0], &r[1], &r[2], NULL, 2, 3, 3, 4, 1, false, 0, want);
  fu_expect(&out, want, 24, 1e-5, 1e-5);
  for (int i = 0; i < 3; i++) ut_tensor_free(&in[i]);
  ut_tensor_free(&out);
}

/* ---- normalizations ---------------------------------------------------------------- */
static void test_layernorm(void **st) {
  (void)st;
  const char *src = "graph main(x: f32[2, 3, 4], g: f32[3, 4], b: f32[3, 4]) -> (y: f32[2, 3, 4], z: f32[2, 3, 4]) {\n"
                    "  y = layernorm(x, gamma=g, beta=b, axis=1, eps=1e-3)\n"
                    "  z = layernorm(x)\n"
                    "  return y, z\n}\n";
  uint64_t seed = 21;
  ut_tensor in[3] = {fu_random(TINY_FP32, 3, (int64_t[]){2, 3, 4}, &seed), fu_random(TINY_FP32, 2, (int64_t[]){3, 4}, &seed),
                     fu_random(TINY_FP32, 2, (int64_t[]){3, 4}, &seed)},
            out[2];
  fu_run(src, NULL, in, 3, out);
  double want[24], want2[24];
  for (int n = 0; n < 2; n++) {
    double m = 0, var = 0;
    for (int i = 0; i < 12; i++) m += v(&in[0], n * 12 + i) / 12;
    for (int i = 0; i < 12; i++) var += pow(v(&in[0], n * 12 + i) - m, 2) / 12;
    for (int i = 0; i < 12; i++) want[n * 12 + i] = (v(&in[0], n * 12 + i) - m) / sqrt(var + 1e-3) * v(&in[1], i) + v(&in[2], i);
    for (int r = 0; r < 3; r++) {
      double m2 = 0, v2 = 0;
      for (int i = 0; i < 4; i++) m2 += v(&in[0], n * 12 + r * 4 + i) / 4;
      for (int i = 0; i < 4; i++) v2 += pow(v(&in[0], n * 12 + r * 4 + i) - m2, 2) / 4;
      for (int i = 0; i < 4; i++) want2[n * 12 + r * 4 + i] = (v(&in[0], n * 12 + r * 4 + i) - m2) / sqrt(v2 + 1e-5);
    }
  }
  fu_expect(&out[0], want, 24, 1e-5, 1e-5);
  fu_expect(&out[1], want2, 24, 1e-5, 1e-5);
  for (int i = 0; i < 3; i++) ut_tensor_free(&in[i]);
  for (int i = 0; i < 2; i++) ut_tensor_free(&out[i]);
}

static void test_softmax_reductions(void **st) {
  (void)st;
  const char *src =
      "graph main(x: f32[3, 4], n: i32[3, 4]) -> (s: f32[3, 4], a: f32[1, 4], m: f32[3], mx: f32[3, 1], mn: f32[4], t: f32[], "
      "ni: i32[3]) {\n"
      "  s = softmax(x, axis=0)\n"
      "  a = sum(x, axes=[0], keepdim=true)\n"
      "  m = mean(x, [1])\n"
      "  mx = max(x, axes=[-1], keepdim=true)\n"
      "  mn = min(x, 0)\n"
      "  t = sum(x)\n"
      "  ni = sum(n, axes=[1])\n"
      "  return s, a, m, mx, mn, t, ni\n}\n";
  uint64_t seed = 9;
  ut_tensor in[2] = {fu_random(TINY_FP32, 2, (int64_t[]){3, 4}, &seed), fu_random(TINY_I32, 2, (int64_t[]){3, 4}, &seed)},
            out[7];
  fu_run(src, NULL, in, 2, out);
  double s[12], a[4], m[3], mx[3], mn[4], t = 0, ni[3];
  for (int j = 0; j < 4; j++) {
    double c = -INFINITY, z = 0;
    for (int i = 0; i < 3; i++) c = fmax(c, v(&in[0], i * 4 + j));
    for (int i = 0; i < 3; i++) z += exp(v(&in[0], i * 4 + j) - c);
    for (int i = 0; i < 3; i++) s[i * 4 + j] = exp(v(&in[0], i * 4 + j) - c) / z;
    a[j] = 0;
    mn[j] = INFINITY;
    for (int i = 0; i < 3; i++) a[j] += v(&in[0], i * 4 + j), mn[j] = fmin(mn[j], v(&in[0], i * 4 + j));
  }
  for (int i = 0; i < 3; i++) {
    m[i] = 0, mx[i] = -INFINITY, ni[i] = 0;
    for (int j = 0; j < 4; j++) m[i] += v(&in[0], i * 4 + j) / 4, mx[i] = fmax(mx[i], v(&in[0], i * 4 + j)), ni[i] += v(&in[1], i * 4 + j);
  }
  for (int i = 0; i < 12; i++) t += v(&in[0], i);
  fu_expect(&out[0], s, 12, 1e-5, 1e-6);
  fu_expect(&out[1], a, 4, 1e-5, 1e-6);
  fu_expect(&out[2], m, 3, 1e-5, 1e-6);
  fu_expect(&out[3], mx, 3, 0, 0);
  fu_expect(&out[4], mn, 4, 0, 0);
  fu_expect(&out[5], &t, 1, 1e-5, 1e-6);
  fu_expect(&out[6], ni, 3, 0, 0);
  assert_int_equal(out[6].dtype, TINY_I32);
  assert_int_equal(out[1].rank, 2);
  for (int i = 0; i < 2; i++) ut_tensor_free(&in[i]);
  for (int i = 0; i < 7; i++) ut_tensor_free(&out[i]);
}

/* ---- elementwise ---------------------------------------------------------------------- */
static void test_elementwise(void **st) {
  (void)st;
  const char *src = "graph main(x: f32[8], y: f32[8]) -> (a: f32[8], b: f32[8], c: f32[8], d: f32[8], e: f32[8], f: f32[8],\n"
                    "  g: f32[8], h: bool[8], i: bool[8], j: bool[8], k: bool[8], l: f32[8], m: f32[8], n: f32[8], o: f32[8]) {\n"
                    "  a = sigmoid(x)\n  b = silu(x)\n  c = tanh(x)\n  d = log(abs(x) + 0.5)\n  e = gelu(x)\n"
                    "  f = rsqrt(abs(y) + 1.0) - sqrt(abs(y)) + recip(y + 3.0) + exp(-x)\n"
                    "  g = max(x, 0.25) * min(y, -0.25) / (abs(x) + 1.0)\n"
                    "  h = x <= y\n  i = x >= y\n  j = x != y\n  k = x > y\n"
                    "  l = where(x < y, x, 2.0)\n  m = neg(x) - 1.0\n  n = relu(x) * 2.0\n  o = 1.0 - x\n"
                    "  return a, b, c, d, e, f, g, h, i, j, k, l, m, n, o\n}\n";
  double xs[8] = {-60, -3, -0.5, 0, 1e-4, 0.5, 3, 60}, ys[8] = {-1, -3, 0.25, 0, 2, 0.5, -7, 1};
  ut_tensor in[2] = {tu_tensor(TINY_FP32, 1, (int64_t[]){8}, xs), tu_tensor(TINY_FP32, 1, (int64_t[]){8}, ys)}, out[15];
  fu_run(src, NULL, in, 2, out);
  double w[15][8];
  for (int i = 0; i < 8; i++) {
    double x = xs[i], y = ys[i], s = 1 / (1 + exp(-x));
    w[0][i] = s, w[1][i] = x * s, w[2][i] = tanh(x), w[3][i] = log(fabs(x) + 0.5);
    w[4][i] = 0.5 * x * (1 + erf(x / sqrt(2)));
    w[5][i] = 1 / sqrt(fabs(y) + 1) - sqrt(fabs(y)) + 1 / (y + 3) + exp(-x);
    w[6][i] = fmax(x, 0.25) * fmin(y, -0.25) / (fabs(x) + 1);
    w[7][i] = x <= y, w[8][i] = x >= y, w[9][i] = x != y, w[10][i] = x > y;
    w[11][i] = x < y ? x : 2.0, w[12][i] = -x - 1, w[13][i] = fmax(x, 0) * 2, w[14][i] = 1 - x;
  }
  for (int k = 0; k < 15; k++) {
    double rt = k == 5 ? 1e-5 : 2e-6; /* exp(60) in f */
    fu_expect(&out[k], w[k], 8, rt, 2e-6);
  }
  for (int i = 0; i < 2; i++) ut_tensor_free(&in[i]);
  for (int i = 0; i < 15; i++) ut_tensor_free(&out[i]);
}

/* ---- movement, cast, gather, pooling ---------------------------------------------------- */
static void test_movement(void **st) {
  (void)st;
  const char *src =
      "graph main(x: f32[2, 3, 4], ix: i32[2, 2, 4]) -> (r: f32[4, 6], p: f32[4, 2, 3], e: f32[2, 2, 3, 4], d: f32[3, 3, 5],\n"
      "  s: f32[2, 2, 2], f: f32[2, 3, 4], c: f32[2, 8, 4], h: f16[2, 3, 4], g: f32[2, 2, 4]) {\n"
      "  r = reshape(x, [4, -1])\n"
      "  p = permute(x, [2, 0, 1])\n"
      "  e = expand(reshape(x, [2, 1, 3, 4]), [2, 2, 3, 4])\n"
      "  d = pad(x, [[0, 1], [0, 0], [1, 0]], value=-1.0)\n"
      "  s = slice(x, [0, -2, 1], [2, 3, 4], steps=[1, 1, 2])\n"
      "  f = flip(x, [0, 2])\n"
      "  c = concat([x, slice(x, [0, 0, 0], [2, 2, 4]), x], axis=1)\n"
      "  h = cast(x, f16)\n"
      "  g = gather(x, ix, axis=1)\n"
      "  return r, p, e, d, s, f, c, h, g\n}\n";
  uint64_t seed = 2;
  ut_tensor in[2] = {fu_random(TINY_FP32, 3, (int64_t[]){2, 3, 4}, &seed), fu_random(TINY_I32, 3, (int64_t[]){2, 2, 4}, &seed)},
            out[9];
  for (int i = 0; i < 16; i++) ((int32_t *)in[1].data)[i] %= 3; /* indices into axis 1 (size 3) */
  fu_run(src, NULL, in, 2, out);
#define X(a, b, c) v(&in[0], ((a) * 3 + (b)) * 4 + (c))
  double r[24], p[24], e[48], d[45], s[8], f[24], c[64], h[24], g[16];
  for (int i = 0; i < 24; i++) r[i] = v(&in[0], i), h[i] = ut_round_f16((float)v(&in[0], i));
  for (int a = 0; a < 2; a++)
    for (int b = 0; b < 3; b++)
      for (int k = 0; k < 4; k++) {
        p[(k * 2 + a) * 3 + b] = X(a, b, k);
        for (int q = 0; q < 2; q++) e[((a * 2 + q) * 3 + b) * 4 + k] = X(a, b, k);
        f[(a * 3 + b) * 4 + k] = X(1 - a, b, 3 - k);
      }
  for (int a = 0; a < 3; a++)
    for (int b = 0; b < 3; b++)
      for (int k = 0; k < 5; k++) d[(a * 3 + b) * 5 + k] = a < 2 && k > 0 ? X(a, b, k - 1) : -1;
  for (int a = 0; a < 2; a++)
    for (int b = 0; b < 2; b++)
      for (int k = 0; k < 2; k++) s[(a * 2 + b) * 2 + k] = X(a, 1 + b, 1 + 2 * k);
  for (int a = 0; a < 2; a++)
    for (int b = 0; b < 8; b++)
      for (int k = 0; k < 4; k++) c[(a * 8 + b) * 4 + k] = b < 3 ? X(a, b, k) : b < 5 ? X(a, b - 3, k) : X(a, b - 5, k);
  for (int a = 0; a < 2; a++)
    for (int b = 0; b < 2; b++)
      for (int k = 0; k < 4; k++) g[(a * 2 + b) * 4 + k] = X(a, ((int32_t *)in[1].data)[(a * 2 + b) * 4 + k], k);
#undef X
  const double *w[9] = {r, p, e, d, s, f, c, h, g};
  const int64_t n[9] = {24, 24, 48, 45, 8, 24, 64, 24, 16};
  for (int k = 0; k < 9; k++) fu_expect(&out[k], w[k], n[k], 0, 0);
  assert_int_equal(out[7].dtype, TINY_FP16);
  for (int i = 0; i < 2; i++) ut_tensor_free(&in[i]);
  for (int i = 0; i < 9; i++) ut_tensor_free(&out[i]);
}

static void test_pooling(void **st) {
  (void)st;
  const char *src = "graph main(x: f32[1, 2, 5, 6]) -> (m: f32[1, 2, 2, 3], a: f32[1, 2, 2, 2]) {\n"
                    "  m = max_pool2d(x, kernel=2)\n  a = avg_pool2d(x, kernel=[3, 2], stride=[2, 3])\n"
                    "  return m, a\n}\n";
  uint64_t seed = 4;
  ut_tensor x = fu_random(TINY_FP32, 4, (int64_t[]){1, 2, 5, 6}, &seed), out[2];
  fu_run(src, NULL, &x, 1, out);
  double m[12], a[8];
  for (int c = 0; c < 2; c++) {
    for (int i = 0; i < 2; i++)
      for (int j = 0; j < 3; j++) {
        double mx = -INFINITY;
        for (int p = 0; p < 2; p++)
          for (int q = 0; q < 2; q++) mx = fmax(mx, v(&x, (c * 5 + 2 * i + p) * 6 + 2 * j + q));
        m[(c * 2 + i) * 3 + j] = mx;
      }
    for (int i = 0; i < 2; i++)
      for (int j = 0; j < 2; j++) {
        double s = 0;
        for (int p = 0; p < 3; p++)
          for (int q = 0; q < 2; q++) s += v(&x, (c * 5 + 2 * i + p) * 6 + 3 * j + q);
        a[(c * 2 + i) * 2 + j] = s / 6;
      }
  }
  fu_expect(&out[0], m, 12, 0, 0);
  fu_expect(&out[1], a, 8, 1e-6, 1e-6);
  ut_tensor_free(&x);
  for (int i = 0; i < 2; i++) ut_tensor_free(&out[i]);
}

/* ---- symbolic sizes ---------------------------------------------------------------------- */
/* conv with same padding keeps H, W as shape variables; mean over a symbolic
 * axis divides by a count computed in the graph; the program is lowered
 * once and run with two bindings. */
static void test_symbolic(void **st) {
  (void)st;
  const char *src = "graph<N=1, H=4, W=4, L=3> main(x: f32[N, 2, H, W], w: f32[3, 2, 3, 3], t: f32[N, L])\n"
                    "    -> (y: f32[N, 3, H, W], m: f32[N]) {\n"
                    "  y = conv2d(x, w, pad=1)\n  m = mean(t, [1])\n  return y, m\n}\n";
  hg_program *p = fu_load(src);
  int sizes[2][3] = {{1, 4, 5}, {2, 6, 3}};
  for (int c = 0; c < 2; c++) {
    int N = sizes[c][0], H = sizes[c][1], W = sizes[c][2], L = 2 + c;
    uint64_t seed = 8;
    ut_tensor in[3] = {fu_random(TINY_FP32, 4, (int64_t[]){N, 2, H, W}, &seed), fu_random(TINY_FP32, 4, (int64_t[]){3, 2, 3, 3}, &seed),
                       fu_random(TINY_FP32, 2, (int64_t[]){N, L}, &seed)},
              out[2];
    tiny_graph *g = fu_run_program(p, NULL, in, 3, out);
    static double want[MAXN];
    for (int n = 0; n < N; n++)
      for (int o = 0; o < 3; o++)
        for (int y = 0; y < H; y++)
          for (int x = 0; x < W; x++) {
            double s = 0;
            for (int ci = 0; ci < 2; ci++)
              for (int i = 0; i < 3; i++)
                for (int j = 0; j < 3; j++) {
                  int iy = y + i - 1, ix = x + j - 1;
                  if (iy >= 0 && iy < H && ix >= 0 && ix < W)
                    s += v(&in[0], ((n * 2 + ci) * H + iy) * W + ix) * v(&in[1], ((o * 2 + ci) * 3 + i) * 3 + j);
                }
            want[((n * 3 + o) * H + y) * W + x] = s;
          }
    fu_expect(&out[0], want, (int64_t)N * 3 * H * W, 1e-5, 1e-5);
    double mv[2];
    for (int n = 0; n < N; n++) {
      mv[n] = 0;
      for (int l = 0; l < L; l++) mv[n] += v(&in[2], n * L + l) / L;
    }
    fu_expect(&out[1], mv, N, 1e-6, 1e-6);
    tiny_graph_free(g);
    for (int i = 0; i < 3; i++) ut_tensor_free(&in[i]);
    for (int i = 0; i < 2; i++) ut_tensor_free(&out[i]);
  }
  hg_program_free(p);
}

/* A strided conv over a symbolic height has an output height (H + 1)/2 that
 * a Tiny arg cannot hold symbolically: hg_lower says so; hg_lower_bound
 * with H bound writes it as an integer. */
static void test_derived_dims(void **st) {
  (void)st;
  const char *src2 = "graph<H=8> main(x: f32[1, 1, H, 4], w: f32[1, 1, 3, 3]) -> (y: f32[1, 1, (H + 1)/2, 2], z: f32[1, (H + 1)/2]) {\n"
                     "  y = conv2d(x, w, stride=2, pad=1)\n"
                     "  z = sum(y, axes=[1, 3])\n  return y, z\n}\n";
  hg_program *p = fu_load(src2);
  harp_error e = {0};
  tiny_graph *g = NULL;
  /* the conv itself lowers symbolically (POOL computes its own output size) */
  assert_ok(&e, hg_lower(&e, p, &g, NULL));
  tiny_graph_free(g);
  g = NULL;
  hg_program_free(p);
  /* a reshape to the derived size does not */
  const char *src3 = "graph<H=8> main(x: f32[1, 1, H, 4], w: f32[1, 1, 3, 3]) -> (z: f32[(H + 1)/2, 2]) {\n"
                     "  z = reshape(conv2d(x, w, stride=2, pad=1), [(H + 1)/2, 2])\n  return z\n}\n";
  p = fu_load(src3);
  assert_int_equal(hg_lower(&e, p, &g, NULL), HARP_E_UNSUPPORTED);
  assert_non_null(strstr(e.msg, "(H + 1)/2"));
  assert_int_equal(e.line, 2);
  tiny_symtab b;
  tiny_symtab_init(&b);
  harp_error_clear(&e);
  assert_ok(&e, tiny_symtab_set(&e, &b, "H", 7));
  assert_ok(&e, hg_lower_bound(&e, p, &b, &g, NULL));
  assert_ok(&e, tiny_prepare(&e, g, &b, false));
  assert_int_equal(g->nodes[g->outputs[0]].shape.d[0].n, 4);
  tiny_graph_free(g);
  tiny_symtab_free(&b);
  hg_program_free(p);
}

/* Seed 002's DSL examples, verbatim (tests/models/seed002_*.harp). */
static void test_seed002(void **st) {
  (void)st;
  char path[1024], *text;
  size_t len;
  harp_error e = {0};
  snprintf(path, sizeof path, "%s/tests/models/seed002_subgraph.harp", HARP_SOURCE_DIR);
  assert_ok(&e, ut_read_file(&e, path, 1 << 20, &text, &len));
  double xs[6] = {-1, 2, -3, 4, 0, -0.5};
  ut_tensor in = tu_tensor(TINY_FP32, 2, (int64_t[]){2, 3}, xs), out[2];
  fu_run(text, NULL, &in, 1, out);
  double relu[6] = {0, 2, 0, 4, 0, 0};
  fu_expect(&out[0], relu, 6, 0, 0);
  free(text);
  ut_tensor_free(&in);
  ut_tensor_free(&out[0]);
  snprintf(path, sizeof path, "%s/tests/models/seed002_multi_output.harp", HARP_SOURCE_DIR);
  assert_ok(&e, ut_read_file(&e, path, 1 << 20, &text, &len));
  double v[10], a[10], b[10];
  for (int i = 0; i < 10; i++) v[i] = i - 4.5, a[i] = v[i] + 1, b[i] = v[i] * 2;
  in = tu_tensor(TINY_FP32, 1, (int64_t[]){10}, v);
  fu_run(text, NULL, &in, 1, out);
  fu_expect(&out[0], a, 10, 0, 0);
  fu_expect(&out[1], b, 10, 0, 0);
  free(text);
  ut_tensor_free(&in);
  ut_tensor_free(&out[0]);
  ut_tensor_free(&out[1]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_matmul),     cmocka_unit_test(test_conv2d),         cmocka_unit_test(test_attention),
      cmocka_unit_test(test_attention_rank4), cmocka_unit_test(test_layernorm), cmocka_unit_test(test_softmax_reductions),
      cmocka_unit_test(test_elementwise), cmocka_unit_test(test_movement),     cmocka_unit_test(test_pooling),
      cmocka_unit_test(test_symbolic),   cmocka_unit_test(test_derived_dims), cmocka_unit_test(test_seed002),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
