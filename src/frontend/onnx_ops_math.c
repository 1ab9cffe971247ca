/* onnx_ops_math.c — the trigonometric and hyperbolic functions composed
 * from harp's elementwise ops, SwiGLU, RotaryEmbedding, EyeLike, and
 * BitShift / Bitwise* on int32 (exact).
 * Needs: onnx_load.c / onnx_ops.c (values, attributes, helpers), the builder.
 * Gives: ox_find_math.
 *
 * Arithmetic is fp32 (fp16 / bf16 inputs are widened and the result
 * narrowed).  Sin, Cos and Tan reduce |x| modulo pi/2 exactly over the
 * whole float range (Payne-Hanek with float products that are exact by
 * construction, so FMA contraction in a backend changes nothing), then use
 * Cephes' single-precision polynomials on [-pi/4, pi/4]; the others are
 * Cephes / fdlibm range splits with log1p written as Goldberg's
 * log(1 + u) * u / ((1 + u) - 1).  Measured against numpy in float64:
 * a few ulp (tests/py/test_onnx_math.py). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "onnx_int.h"

#define OP(name) static harp_status op_##name(ox_ctx *c)

static hg_val K(ox_ctx *c, double v) { return hg_const(c->g, v); }
static hg_val add(ox_ctx *c, hg_val a, hg_val b) { return hg_add(c->g, a, b); }
static hg_val sub(ox_ctx *c, hg_val a, hg_val b) { return hg_sub(c->g, a, b); }
static hg_val mul(ox_ctx *c, hg_val a, hg_val b) { return hg_mul(c->g, a, b); }
static hg_val mulk(ox_ctx *c, hg_val a, double k) { return hg_mul(c->g, a, K(c, k)); }
static hg_val addk(ox_ctx *c, hg_val a, double k) { return hg_add(c->g, a, K(c, k)); }
static hg_val lt(ox_ctx *c, hg_val a, hg_val b) { return hg_binary(c->g, HG_OP_LT, a, b); }
static hg_val sel(ox_ctx *c, hg_val cond, hg_val a, hg_val b) { return hg_where(c->g, cond, a, b); }

/* p[0] + z (p[1] + z (p[2] + ...)), n coefficients */
static hg_val horner(ox_ctx *c, hg_val z, const double *p, int n) {
  hg_val y = K(c, p[n - 1]);
  for (int i = n - 2; i >= 0; i--) y = addk(c, mul(c, y, z), p[i]);
  return y;
}

/* an odd function of x from its value r on |x|: ±0 and NaN pass through */
static hg_val odd(ox_ctx *c, hg_val x, hg_val r) {
  hg_val zero = K(c, 0);
  return sel(c, lt(c, x, zero), hg_neg(c->g, r), sel(c, lt(c, zero, x), r, x));
}

/* log(1 + u) to a few ulp for every u (Goldberg): where 1 + u rounds,
 * log(w) u / (w - 1) corrects by the ratio of the exact to the rounded
 * argument; w = 1 gives u, w = inf gives inf */
static hg_val log1p_(ox_ctx *c, hg_val u) {
  hg_graph *g = c->g;
  hg_val w = addk(c, u, 1), d = addk(c, w, -1);
  hg_val r = mul(c, hg_log(g, w), hg_div(g, u, d));
  r = sel(c, hg_binary(g, HG_OP_EQ, w, K(c, INFINITY)), w, r);
  return sel(c, hg_binary(g, HG_OP_EQ, d, K(c, 0)), u, r);
}

/* the input widened to fp32; *dt gets its dtype (the result's) */
static hg_val input32(ox_ctx *c, tiny_dtype *dt) {
  hg_val x = ox_tensor(c, 0);
  if (x < 0) return -1;
  *dt = hg_val_dtype(c->g, x);
  if (!tiny_dtype_is_float(*dt)) return ox_fail(c, HARP_E_DTYPE_MISMATCH, "%s takes floating-point values", c->node->op_type), -1;
  return *dt == TINY_FP32 ? x : hg_cast(c->g, x, TINY_FP32);
}

static harp_status def_as(ox_ctx *c, hg_val y, tiny_dtype dt) {
  return ox_def(c, 0, dt == TINY_FP32 || y < 0 ? y : hg_cast(c->g, y, dt));
}

/* ---- Sin, Cos, Tan: exact reduction modulo pi/2 ------------------------------------------ */
/* a = M 2^E, M an integer in [2^23, 2^24), E in [-24, 104] for a >= 1/2.
 * a (2/pi) mod 4 = M (2^E (2/pi) mod 4): T[E] = 2^E (2/pi) mod 4 is a
 * table of TRIG_K chunks of 12 bits (t_i at scale 2^(2 - 12 i)), gathered
 * by E.  With M = Mh 2^12 + Ml, every product Mh t_i, Ml t_i is an integer
 * below 2^24 (exact); Mh t_1 has scale 2^2 (a multiple of 4: dropped).
 * Each product is split into 12-bit halves (exact), summed into 12-bit
 * limbs at scales 2^(2 - 12 j) (sums below 2^14: exact), the carries
 * propagated (exact), and the nearest quadrant n taken from limb 1 (bits
 * 2^1 .. 2^-10).  The fraction f in [-1/2, 1/2] is then hi + lo: limbs 1
 * and 2 exactly, the rest (below 2^-22) rounded once.  96 bits of T cover
 * the worst cancellation of binary32 (f near 2^-30) with room. */
#define TRIG_K 8
#define TRIG_E0 (-24)
#define TRIG_NE 129
/* 2/pi in hex, 240 bits (mpmath) */
static const char two_over_pi[] = "a2f9836e4e441529fc2757d1f534ddc0db6295993c439041fe5163abdebb";

static int bit_of_2_over_pi(int k) { /* bit 2^-k, k >= 1 */
  if (k < 1 || k > 4 * (int)(sizeof two_over_pi - 1)) return 0;
  char ch = two_over_pi[(k - 1) / 4];
  int v = ch <= '9' ? ch - '0' : ch - 'a' + 10;
  return (v >> (3 - (k - 1) % 4)) & 1;
}

/* column i of the table: chunk i + 1 of T[e] (i < TRIG_K) or 2^-E (i = TRIG_K) for each row e */
static harp_status trig_column(ox_ctx *c, int i, ut_tensor *t) {
  int64_t n = TRIG_NE;
  if (ut_tensor_alloc(c->e, t, TINY_FP32, 1, &n)) return c->e->code;
  float *d = t->data;
  for (int e = 0; e < TRIG_NE; e++) {
    int v = 0;
    for (int s = 13 - 12 * (i + 1); i < TRIG_K && s >= 2 - 12 * (i + 1); s--) v = 2 * v + bit_of_2_over_pi(e + TRIG_E0 - s);
    d[e] = i < TRIG_K ? (float)v : ldexpf(1, -(e + TRIG_E0));
  }
  return HARP_OK;
}

/* t[i] = chunk i + 1 of T[e] for each element of e (float row numbers), and
 * t[K] = 2^-E: a gather from each column, all reading one index buffer
 * (e flattened, then cast: a computed [N], which the gathers read as is;
 * a view would be copied for each) */
static harp_status trig_chunks(ox_ctx *c, hg_val e, hg_val *t) {
  hg_graph *g = c->g;
  const fe_shape s = *ox_shape_of(c, e);
  const fe_dim *n = fe_dim_int(c->A, 1);
  for (int i = 0; i < s.rank && n; i++) n = fe_dim_mul(c->A, n, s.d[i]);
  if (!n) return ox_fail(c, HARP_E_LIMIT, "the size expression is too large");
  hg_val idx = hg_cast(g, s.rank == 1 ? e : fe_reshape(g, e, &(fe_shape){.rank = 1, .d = {n}}), TINY_I32);
  for (int i = 0; i <= TRIG_K; i++) {
    ut_tensor col;
    char what[24];
    snprintf(what, sizeof what, "two_over_pi%d", i);
    if (trig_column(c, i, &col)) return c->e->code;
    hg_val w = ox_weight(c, what, &col);
    if (w < 0) return c->e->code;
    t[i] = hg_gather(g, w, idx, 0);
    if (s.rank != 1) t[i] = fe_reshape(g, t[i], &s);
  }
  return ox_check(c, t[TRIG_K]);
}

/* floor(v / 2^12) and v - that 2^12, both exact for an integer v < 2^24 */
static hg_val hi12(ox_ctx *c, hg_val v) { return hg_floor(c->g, mulk(c, v, 1.0 / 4096)); }
static hg_val lo12(ox_ctx *c, hg_val v, hg_val h) { return sub(c, v, mulk(c, h, 4096)); }

/* a = |x| (fp32) -> r in [-pi/4, pi/4] and the quadrant n (0..4, 4 meaning
 * 0) with a = n pi/2 + r mod 2 pi; below pi/4, r = a and n = 0 */
static harp_status trig_reduce(ox_ctx *c, hg_val a, hg_val *r, hg_val *n) {
  hg_graph *g = c->g;
  /* M and E by exact power-of-two scalings (no libm, so every backend agrees) */
  hg_val y = a, e = K(c, 0);
  for (int s = 64; s >= 1; s /= 2) {
    hg_val cnd = hg_binary(g, HG_OP_GE, y, K(c, ldexp(1, 23 + s)));
    y = mul(c, y, sel(c, cnd, K(c, ldexp(1, -s)), K(c, 1)));
    e = add(c, e, sel(c, cnd, K(c, s), K(c, 0)));
  }
  for (int s = 16; s >= 1; s /= 2) {
    hg_val cnd = lt(c, y, K(c, ldexp(1, 24 - s)));
    y = mul(c, y, sel(c, cnd, K(c, ldexp(1, s)), K(c, 1)));
    e = sub(c, e, sel(c, cnd, K(c, s), K(c, 0)));
  }
  /* in range for any a (0, inf and NaN too: their result is replaced) */
  hg_val ef = hg_min(g, hg_max(g, addk(c, e, -TRIG_E0), K(c, 0)), K(c, TRIG_NE - 1));
  hg_val t[TRIG_K + 1];
  if (trig_chunks(c, ef, t)) return c->e->code;
  /* M = a 2^-E (exact) from a, not from y: what follows the gather then
   * reads a and the gathered row only, so the scaling chain stays in the
   * kernel that computes the index (y's steps would each be a buffer) */
  hg_val m = mul(c, a, t[TRIG_K]);
  hg_val mh = hi12(c, m), ml = lo12(c, m, mh);
  /* p_j = Mh t_(j+1), q_j = Ml t_j at scale 2^(2 - 12 j), j = 1..K */
  hg_val ph[TRIG_K + 2], pl[TRIG_K + 2], qh[TRIG_K + 2], ql[TRIG_K + 2], limb[TRIG_K + 1];
  for (int j = 1; j <= TRIG_K + 1; j++) {
    hg_val p = j < TRIG_K ? mul(c, mh, t[j]) : HG_NONE, q = j <= TRIG_K ? mul(c, ml, t[j - 1]) : HG_NONE;
    ph[j] = p ? hi12(c, p) : HG_NONE, pl[j] = p ? lo12(c, p, ph[j]) : HG_NONE;
    qh[j] = q ? hi12(c, q) : HG_NONE, ql[j] = q ? lo12(c, q, qh[j]) : HG_NONE;
  }
  for (int j = 1; j <= TRIG_K; j++) {
    hg_val parts[4] = {pl[j], ql[j], ph[j + 1], qh[j + 1]}, s = HG_NONE;
    for (int k = 0; k < 4; k++)
      if (parts[k] != HG_NONE) s = s == HG_NONE ? parts[k] : add(c, s, parts[k]);
    limb[j] = s;
  }
  for (int j = TRIG_K; j >= 2; j--) { /* carries, exact */
    hg_val cr = hi12(c, limb[j]);
    limb[j] = lo12(c, limb[j], cr);
    limb[j - 1] = add(c, limb[j - 1], cr);
  }
  limb[1] = lo12(c, limb[1], hi12(c, limb[1])); /* mod 4 */
  hg_val q = hg_floor(g, mulk(c, addk(c, limb[1], 512), 1.0 / 1024));
  hg_val l1 = sub(c, limb[1], mulk(c, q, 1024));
  hg_val v12 = add(c, mulk(c, l1, ldexp(1, -10)), mulk(c, limb[2], ldexp(1, -22)));
  hg_val rest = limb[TRIG_K];
  for (int j = TRIG_K - 1; j >= 3; j--) rest = add(c, mulk(c, rest, 1.0 / 4096), limb[j]);
  rest = mulk(c, rest, ldexp(1, -34));
  hg_val fh = add(c, v12, rest), fl = sub(c, rest, sub(c, fh, v12));
  /* r = (fh + fl) pi/2 with pi/2 = P1 + P2 */
  const double P1 = (float)M_PI_2, P2 = (float)(M_PI_2 - P1);
  hg_val red = add(c, mulk(c, fh, P1), add(c, mulk(c, fh, P2), mulk(c, fl, P1)));
  hg_val small = hg_binary(g, HG_OP_LE, a, K(c, M_PI_4));
  *r = sel(c, small, a, red);
  *n = sel(c, small, K(c, 0), q);
  return ox_check(c, *n);
}

/* Cephes sinf / cosf / tanf on [-pi/4, pi/4] */
static hg_val sin_poly(ox_ctx *c, hg_val r, hg_val z) {
  static const double p[] = {-1.6666654611E-1, 8.3321608736E-3, -1.9515295891E-4};
  return add(c, mul(c, mul(c, horner(c, z, p, 3), z), r), r);
}
static hg_val cos_poly(ox_ctx *c, hg_val z) {
  static const double p[] = {4.166664568298827E-2, -1.388731625493765E-3, 2.443315711809948E-5};
  return addk(c, sub(c, mul(c, mul(c, horner(c, z, p, 3), z), z), mulk(c, z, 0.5)), 1);
}
static hg_val tan_poly(ox_ctx *c, hg_val r, hg_val z) {
  static const double p[] = {3.33331568548E-1, 1.33387994085E-1, 5.34112807005E-2, 2.44301354525E-2, 3.11992232697E-3, 9.38540185543E-3};
  return add(c, mul(c, mul(c, horner(c, z, p, 6), z), r), r);
}

typedef enum { T_SIN, T_COS, T_TAN } trig_kind;

static harp_status trig(ox_ctx *c, trig_kind k) {
  tiny_dtype dt;
  hg_val x = input32(c, &dt), r = -1, n = -1;
  if (x < 0) return c->e->code;
  hg_graph *g = c->g;
  hg_val a = hg_abs(g, x);
  if (trig_reduce(c, a, &r, &n)) return c->e->code;
  hg_val z = mul(c, r, r), y;
  hg_val n1 = hg_binary(g, HG_OP_EQ, n, K(c, 1)), n2 = hg_binary(g, HG_OP_EQ, n, K(c, 2)), n3 = hg_binary(g, HG_OP_EQ, n, K(c, 3));
  if (k == T_TAN) {
    hg_val t = tan_poly(c, r, z);
    hg_val cot = hg_div(g, K(c, -1), t); /* odd quadrants: tan(r + pi/2) = -1/tan(r) */
    y = sel(c, n1, cot, sel(c, n3, cot, t));
  } else {
    hg_val s = sin_poly(c, r, z), co = cos_poly(c, z);
    /* sin: s, c, -s, -c; cos: c, -s, -c, s (quadrants 0..3) */
    hg_val q0 = k == T_SIN ? s : co, q1 = k == T_SIN ? co : hg_neg(g, s);
    y = sel(c, n1, q1, sel(c, n2, hg_neg(g, q0), sel(c, n3, hg_neg(g, q1), q0)));
  }
  y = sel(c, lt(c, a, K(c, INFINITY)), y, K(c, NAN)); /* inf and NaN give NaN */
  if (k != T_COS) y = odd(c, x, y);
  return def_as(c, y, dt);
}

OP(Sin) { return trig(c, T_SIN); }
OP(Cos) { return trig(c, T_COS); }
OP(Tan) { return trig(c, T_TAN); }

/* ---- inverse trigonometric (Cephes asinf, acosf, atanf) ------------------------------------ */
/* asin on |v| <= 1/2 (odd in v) */
static hg_val asin_small(ox_ctx *c, hg_val v) {
  static const double p[] = {1.6666752422E-1, 7.4953002686E-2, 4.5470025998E-2, 2.4181311049E-2, 4.2163199048E-2};
  hg_val z = mul(c, v, v);
  return add(c, mul(c, mul(c, horner(c, z, p, 5), z), v), v);
}

/* pi/2 and pi as float pairs: hi + lo */
#define PIO2_HI ((double)(float)M_PI_2)
#define PIO2_LO ((double)(float)(M_PI_2 - PIO2_HI))
#define PI_HI ((double)(float)M_PI)
#define PI_LO ((double)(float)(M_PI - PI_HI))

OP(Asin) {
  tiny_dtype dt;
  hg_val x = input32(c, &dt);
  if (x < 0) return c->e->code;
  hg_graph *g = c->g;
  hg_val a = hg_abs(g, x);
  /* |x| > 1/2: pi/2 - 2 asin(sqrt((1 - |x|) / 2)); above 1 the sqrt is NaN */
  hg_val s = asin_small(c, hg_sqrt(g, mulk(c, sub(c, K(c, 1), a), 0.5)));
  hg_val big = addk(c, sub(c, K(c, PIO2_HI), add(c, s, s)), PIO2_LO);
  hg_val y = sel(c, hg_binary(g, HG_OP_GT, a, K(c, 0.5)), odd(c, x, big), asin_small(c, x));
  return def_as(c, y, dt);
}

OP(Acos) {
  tiny_dtype dt;
  hg_val x = input32(c, &dt);
  if (x < 0) return c->e->code;
  hg_graph *g = c->g;
  hg_val sp = asin_small(c, hg_sqrt(g, mulk(c, sub(c, K(c, 1), x), 0.5)));  /* x > 1/2: 2 asin(sqrt((1 - x) / 2)) */
  hg_val sn = asin_small(c, hg_sqrt(g, mulk(c, addk(c, x, 1), 0.5)));       /* x < -1/2: pi - that of -x */
  hg_val mid = addk(c, sub(c, K(c, PIO2_HI), asin_small(c, x)), PIO2_LO);
  hg_val y = sel(c, hg_binary(g, HG_OP_GT, x, K(c, 0.5)), add(c, sp, sp),
                 sel(c, lt(c, x, K(c, -0.5)), addk(c, sub(c, K(c, PI_HI), add(c, sn, sn)), PI_LO), mid));
  return def_as(c, y, dt);
}

OP(Atan) {
  tiny_dtype dt;
  hg_val x = input32(c, &dt);
  if (x < 0) return c->e->code;
  hg_graph *g = c->g;
  hg_val a = hg_abs(g, x);
  /* a > tan(3pi/8): pi/2 + atan(-1/a); a > tan(pi/8): pi/4 + atan((a-1)/(a+1)) */
  hg_val c1 = hg_binary(g, HG_OP_GT, a, K(c, 2.414213562373095)), c2 = hg_binary(g, HG_OP_GT, a, K(c, 0.4142135623730950));
  hg_val v = sel(c, c1, hg_div(g, K(c, -1), a), sel(c, c2, hg_div(g, addk(c, a, -1), addk(c, a, 1)), a));
  hg_val base = sel(c, c1, K(c, PIO2_HI), sel(c, c2, K(c, M_PI_4), K(c, 0)));
  static const double p[] = {-3.33329491539E-1, 1.99777106478E-1, -1.38776856032E-1, 8.05374449538E-2};
  hg_val z = mul(c, v, v);
  hg_val poly = add(c, mul(c, mul(c, horner(c, z, p, 4), z), v), v);
  return def_as(c, odd(c, x, add(c, base, poly)), dt);
}

/* ---- erf ------------------------------------------------------------------------------------- */
/* erf of an fp32 value: below |x| = 1/2 its Taylor series x P(x^2) to x^13
 * (remainder < 1e-9 relative), above Abramowitz-Stegun 7.1.26,
 * 1 - t (a1 + ... a5 t^4) e^(-x^2), t = 1 / (1 + p |x|) (|error| <= 1.5e-7,
 * so <= 3e-7 relative where erf >= 0.52); +-inf give +-1, NaN NaN */
hg_val ox_erf32(ox_ctx *c, hg_val x) {
  hg_graph *g = c->g;
  static const double ts[] = {1.1283791670955126, -0.37612638903183754, 0.11283791670955126, -0.026866170645131252, 0.0052239776254421879, -0.00085483270234508522, 0.00012055332981789664};
  static const double as[] = {0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429};
  hg_val a = hg_abs(g, x), z = mul(c, x, x);
  hg_val small = mul(c, horner(c, z, ts, 7), x);
  hg_val t = hg_recip(g, addk(c, mulk(c, a, 0.3275911), 1));
  hg_val big = sub(c, K(c, 1), mul(c, mul(c, horner(c, t, as, 5), t), hg_exp(g, hg_neg(g, z))));
  return sel(c, lt(c, a, K(c, 0.5)), small, odd(c, x, big));
}

/* ---- hyperbolic ------------------------------------------------------------------------------ */
/* e^a / 2 (+ or -) e^-a / 2 for a >= 1; past 88 (e^a overflows, the
 * result not yet) as (e^(a/2) / 2) e^(a/2) */
static hg_val exp_pair(ox_ctx *c, hg_val a, bool plus) {
  hg_graph *g = c->g;
  hg_val e = hg_exp(g, hg_min(g, a, K(c, 88))), h = hg_exp(g, mulk(c, a, 0.5));
  hg_val inv = hg_div(g, K(c, 0.5), e), half = mulk(c, e, 0.5);
  hg_val near = plus ? add(c, half, inv) : sub(c, half, inv);
  return sel(c, hg_binary(g, HG_OP_GT, a, K(c, 88)), mul(c, mulk(c, h, 0.5), h), near);
}

OP(Sinh) {
  tiny_dtype dt;
  hg_val x = input32(c, &dt);
  if (x < 0) return c->e->code;
  hg_graph *g = c->g;
  hg_val a = hg_abs(g, x), z = mul(c, x, x);
  static const double p[] = {1.66667160211E-1, 8.33028376239E-3, 2.03721912945E-4};
  hg_val small = add(c, mul(c, mul(c, horner(c, z, p, 3), z), x), x); /* |x| <= 1, Cephes sinhf */
  return def_as(c, sel(c, hg_binary(g, HG_OP_GT, a, K(c, 1)), odd(c, x, exp_pair(c, a, false)), small), dt);
}

OP(Cosh) {
  tiny_dtype dt;
  hg_val x = input32(c, &dt);
  if (x < 0) return c->e->code;
  return def_as(c, exp_pair(c, hg_abs(c->g, x), true), dt);
}

OP(Asinh) {
  tiny_dtype dt;
  hg_val x = input32(c, &dt);
  if (x < 0) return c->e->code;
  hg_graph *g = c->g;
  hg_val a = hg_abs(g, x), a2 = mul(c, a, a);
  /* log1p(a + a^2 / (1 + sqrt(1 + a^2))); from 2^13 on, log(a) + log 2 (a^2 would overflow) */
  hg_val mid = log1p_(c, add(c, a, hg_div(g, a2, addk(c, hg_sqrt(g, addk(c, a2, 1)), 1))));
  hg_val big = addk(c, hg_log(g, a), M_LN2);
  return def_as(c, odd(c, x, sel(c, hg_binary(g, HG_OP_GE, a, K(c, 8192)), big, mid)), dt);
}

OP(Acosh) {
  tiny_dtype dt;
  hg_val x = input32(c, &dt);
  if (x < 0) return c->e->code;
  hg_graph *g = c->g;
  /* [1, 2): log1p(t + sqrt(2t + t^2)), t = x - 1 exact; [2, 2^13): log(x + sqrt(x^2 - 1)); then log(x) + log 2 */
  hg_val t = addk(c, x, -1);
  hg_val low = log1p_(c, add(c, t, hg_sqrt(g, add(c, add(c, t, t), mul(c, t, t)))));
  hg_val mid = hg_log(g, add(c, x, hg_sqrt(g, addk(c, mul(c, x, x), -1))));
  hg_val big = addk(c, hg_log(g, x), M_LN2);
  hg_val y = sel(c, lt(c, x, K(c, 2)), low, sel(c, lt(c, x, K(c, 8192)), mid, big));
  return def_as(c, sel(c, hg_binary(g, HG_OP_GE, x, K(c, 1)), y, K(c, NAN)), dt); /* below 1 and NaN: NaN */
}

OP(Atanh) {
  tiny_dtype dt;
  hg_val x = input32(c, &dt);
  if (x < 0) return c->e->code;
  hg_graph *g = c->g;
  hg_val a = hg_abs(g, x), om = sub(c, K(c, 1), a), a2 = add(c, a, a);
  /* fdlibm: |x| < 1/2: log1p(2a + 2a^2 / (1 - a)) / 2, else log1p(2a / (1 - a)) / 2 */
  hg_val u = sel(c, lt(c, a, K(c, 0.5)), add(c, a2, hg_div(g, mul(c, a2, a), om)), hg_div(g, a2, om));
  return def_as(c, odd(c, x, mulk(c, log1p_(c, u), 0.5)), dt);
}

/* ---- SwiGLU (opset 28): Swish_alpha(A) * B, A and B of one shape ------------------------------- */
OP(SwiGLU) {
  double alpha;
  hg_val a = ox_tensor(c, 0), b = a > 0 ? ox_tensor(c, 1) : -1;
  if (b < 0 || ox_attr_float(c, "alpha", 1.0, &alpha)) return c->e->code;
  const fe_shape *sa = ox_shape_of(c, a), *sb = ox_shape_of(c, b);
  bool same = sa->rank == sb->rank;
  for (int i = 0; same && i < sa->rank; i++) same = fe_dim_cmp(sa->d[i], sb->d[i]) != FE_DIFF;
  if (!same) return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "A and B must have one shape (SwiGLU does not broadcast)");
  hg_graph *g = c->g;
  hg_val s = alpha == 1 ? hg_silu(g, a) : mul(c, a, hg_sigmoid(g, mulk(c, a, alpha)));
  return ox_def(c, 0, mul(c, s, b));
}

/* ---- RotaryEmbedding (opset 23) ------------------------------------------------------------------ */
/* x [B, H, S, D] (or [B, S, H*D] with num_heads) in the layout [B, S, H, D];
 * cos / sin [B, S, R/2] (picked by position_ids from [P, R/2]) broadcast
 * over the heads; the first R of D rotate, in halves or interleaved pairs. */
static hg_val rope_cache(ox_ctx *c, int i, hg_val pos, const fe_shape *bs) {
  hg_graph *g = c->g;
  hg_val t = ox_tensor(c, i);
  if (t < 0) return -1;
  const fe_shape ts = *ox_shape_of(c, t);
  if (pos != HG_NONE) {
    if (ts.rank != 2) return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "with position_ids the caches must be [max_position, rotary_dim / 2]"), -1;
    const fe_dim *n = fe_dim_mul(c->A, bs->d[0], bs->d[1]), *one = fe_dim_int(c->A, 1);
    if (!n) return ox_fail(c, HARP_E_LIMIT, "the size expression is too large"), -1;
    hg_val ib = fe_expand(g, fe_reshape(g, pos, &(fe_shape){.rank = 2, .d = {n, one}}), &(fe_shape){.rank = 2, .d = {n, ts.d[1]}});
    return fe_reshape(g, hg_gather(g, t, ib, 0), &(fe_shape){.rank = 4, .d = {bs->d[0], bs->d[1], one, ts.d[1]}});
  }
  if (ts.rank != 3) return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "without position_ids the caches must be [batch, sequence, rotary_dim / 2]"), -1;
  return fe_reshape(g, t, &(fe_shape){.rank = 4, .d = {ts.d[0], ts.d[1], fe_dim_int(c->A, 1), ts.d[2]}});
}

OP(RotaryEmbedding) {
  hg_graph *g = c->g;
  int64_t inter, rdim, nh = 0, d, half;
  hg_val x = ox_tensor(c, 0), pos = HG_NONE;
  if (x < 0 || ox_attr_int(c, "interleaved", 0, &inter) || ox_attr_int(c, "rotary_embedding_dim", 0, &rdim) ||
      ox_attr_int(c, "num_heads", 0, &nh) || ox_need_rank(c, x, 3, 4, "the input"))
    return c->e->code;
  if (c->node->n_input > 3 && c->node->input[3][0]) {
    if ((pos = ox_tensor(c, 3)) < 0) return c->e->code;
    if (hg_val_dtype(g, pos) != TINY_I32 || ox_rank_of(c, pos) != 2) return ox_fail(c, HARP_E_DTYPE_MISMATCH, "position_ids must be [batch, sequence] integers");
  }
  const fe_shape xs = *ox_shape_of(c, x);
  fe_shape bs; /* [B, S, H, D] */
  if (xs.rank == 4) {
    int perm[4] = {0, 2, 1, 3};
    x = hg_permute(g, x, perm, 4);
    bs = (fe_shape){.rank = 4, .d = {xs.d[0], xs.d[2], xs.d[1], xs.d[3]}};
  } else {
    int64_t hidden;
    if (nh < 1) return ox_fail(c, HARP_E_INVALID_ARG, "a 3-D input needs num_heads >= 1");
    if (ox_known(c, xs.d[2], "the hidden size", &hidden)) return c->e->code;
    if (hidden % nh) return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "hidden size %" PRId64 " is not a multiple of num_heads %" PRId64, hidden, nh);
    bs = (fe_shape){.rank = 4, .d = {xs.d[0], xs.d[1], fe_dim_int(c->A, nh), fe_dim_int(c->A, hidden / nh)}};
    x = fe_reshape(g, x, &bs);
  }
  if (ox_known(c, bs.d[3], "the head size", &d)) return c->e->code;
  if (rdim == 0) rdim = d;
  if (rdim < 2 || rdim > d || rdim % 2) return ox_fail(c, HARP_E_INVALID_ARG, "rotary_embedding_dim %" PRId64 " for head size %" PRId64, rdim, d);
  half = rdim / 2;
  hg_val cs = rope_cache(c, 1, pos, &bs), sn = cs > 0 ? rope_cache(c, 2, pos, &bs) : -1;
  if (ox_check(c, cs) || ox_check(c, sn)) return c->e->code;
  int64_t cl;
  if (!fe_dim_is_int(ox_shape_of(c, cs)->d[3], &cl) || cl != half || !fe_dim_is_int(ox_shape_of(c, sn)->d[3], &cl) || cl != half)
    return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "the caches' last dim must be rotary_dim / 2 = %" PRId64, half);
  int ax = 3;
  int64_t z = 0, one = 1, two = 2, s1 = 1;
  hg_val x1 = inter ? hg_slice(g, x, 1, &ax, &z, &rdim, &two) : hg_slice(g, x, 1, &ax, &z, &half, &one);
  hg_val x2 = inter ? hg_slice(g, x, 1, &ax, &s1, &rdim, &two) : hg_slice(g, x, 1, &ax, &half, &rdim, &one);
  hg_val re = sub(c, mul(c, cs, x1), mul(c, sn, x2)), im = add(c, mul(c, sn, x1), mul(c, cs, x2)), rot;
  if (inter) { /* [.., R/2, 2] merged: re0 im0 re1 im1 ... */
    fe_shape s5 = bs, sr = bs;
    s5.rank = 5, s5.d[3] = fe_dim_int(c->A, half), s5.d[4] = fe_dim_int(c->A, 1), sr.d[3] = fe_dim_int(c->A, rdim);
    hg_val parts[2] = {fe_reshape(g, re, &s5), fe_reshape(g, im, &s5)};
    rot = fe_reshape(g, hg_concat(g, parts, 2, 4), &sr);
  } else {
    hg_val parts[2] = {re, im};
    rot = hg_concat(g, parts, 2, 3);
  }
  if (rdim < d) {
    int64_t end = INT64_MAX;
    hg_val parts[2] = {rot, hg_slice(g, x, 1, &ax, &rdim, &end, &one)};
    rot = hg_concat(g, parts, 2, 3);
  }
  if (xs.rank == 3) return ox_def(c, 0, fe_reshape(g, rot, &xs));
  int perm[4] = {0, 2, 1, 3};
  return ox_def(c, 0, hg_permute(g, rot, perm, 4));
}

/* ---- EyeLike: ones where j - i = k, as a constant mask ------------------------------------------ */
OP(EyeLike) {
  hg_val x = ox_tensor(c, 0);
  int64_t k, oty = 0, m, n;
  if (x < 0 || ox_attr_int(c, "k", 0, &k) || ox_need_rank(c, x, 2, 2, "the input")) return c->e->code;
  tiny_dtype dt = hg_val_dtype(c->g, x);
  if (ox_attr(c, "dtype")) {
    if (ox_attr_int(c, "dtype", 0, &oty)) return c->e->code;
    if (!ox_dtype((int)oty, &dt)) return ox_fail(c, HARP_E_UNSUPPORTED, "dtype %s, which harp does not have", ox_type_name((int)oty));
  }
  const fe_shape *s = ox_shape_of(c, x);
  if (ox_known(c, s->d[0], "EyeLike's row count", &m) || ox_known(c, s->d[1], "EyeLike's column count", &n)) return c->e->code;
  if (n > 0 && m > OX_MAX_FILL / n) return ox_fail(c, HARP_E_LIMIT, "a %" PRId64 "x%" PRId64 " matrix is too large", m, n);
  ut_tensor t;
  if (ut_tensor_alloc(c->e, &t, TINY_BOOL, 2, (int64_t[]){m, n})) return c->e->code;
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) ((uint8_t *)t.data)[i * n + j] = j - i == k;
  hg_val mask = ox_weight(c, "eye", &t);
  if (mask < 0) return c->e->code;
  return ox_def(c, 0, dt == TINY_BOOL ? mask : hg_cast(c->g, mask, dt));
}

/* ---- BitShift and the Bitwise ops on int32, exact ------------------------------------------------ */
/* harp's int32 arithmetic wraps (ADD, SUB, MUL), which is a left shift by
 * a multiplication; the rest goes through x = hi 2^16 + lo with lo in
 * [0, 2^16) and hi in [-2^15, 2^15), both exact as floats: float(x) gives
 * hi to within one, the wrapped x - hi 2^16 corrects it. */
static hg_val I32(ox_ctx *c, double v) { return hg_const_typed(c->g, v, TINY_I32); }

static void split16(ox_ctx *c, hg_val x, hg_val *hi, hg_val *lo) {
  hg_graph *g = c->g;
  hg_val h = hg_cast(g, hg_floor(g, mulk(c, hg_cast(g, x, TINY_FP32), 1.0 / 65536)), TINY_I32);
  hg_val l = sub(c, x, mul(c, h, I32(c, 65536)));
  hg_val neg = lt(c, l, I32(c, 0)), big = hg_binary(g, HG_OP_GE, l, I32(c, 65536));
  h = sel(c, neg, sub(c, h, I32(c, 1)), sel(c, big, add(c, h, I32(c, 1)), h));
  l = sel(c, neg, add(c, l, I32(c, 65536)), sel(c, big, sub(c, l, I32(c, 65536)), l));
  *hi = hg_cast(g, h, TINY_FP32), *lo = hg_cast(g, l, TINY_FP32);
}

/* a and b (int32) as one broadcast shape, each */
static harp_status int_pair(ox_ctx *c, hg_val *a, hg_val *b) {
  *a = ox_tensor(c, 0), *b = *a > 0 ? ox_tensor(c, 1) : -1;
  if (*b < 0) return c->e->code;
  if (hg_val_dtype(c->g, *a) != TINY_I32 || hg_val_dtype(c->g, *b) != TINY_I32)
    return ox_fail(c, HARP_E_UNSUPPORTED, "%s of %s (harp computes it on int32)", c->node->op_type, tiny_dtype_name(hg_val_dtype(c->g, *a)));
  hg_val z = sub(c, *a, *a), w = sub(c, *b, *b); /* zeros, to broadcast */
  *a = add(c, *a, w), *b = add(c, *b, z);
  return ox_check(c, *b);
}

OP(BitShift) {
  hg_graph *g = c->g;
  char dir[8];
  hg_val x, y;
  if (ox_attr_str(c, "direction", "", dir, sizeof dir) || int_pair(c, &x, &y)) return c->e->code;
  bool left = !strcmp(dir, "LEFT");
  if (!left && strcmp(dir, "RIGHT") != 0) return ox_fail(c, HARP_E_INVALID_ARG, "direction \"%s\" (LEFT or RIGHT)", dir);
  /* int64 values are int32 in harp: a right shift of one agrees with int64's, a left one would lose the bits past 32 */
  ox_val *xv = ox_in(c, 0, NULL);
  if (left && xv && xv->oty == OX_INT64) return ox_fail(c, HARP_E_UNSUPPORTED, "a LEFT shift of int64 (harp computes int64 as int32)");
  /* a shift past the width (or negative) leaves the sign fill alone */
  hg_val oor = sel(c, lt(c, y, I32(c, 0)), lt(c, y, I32(c, 0)), hg_binary(g, HG_OP_GT, y, I32(c, 31)));
  hg_val yc = hg_min(g, hg_max(g, y, I32(c, 0)), I32(c, 31)), r;
  /* 2^y (left: as int32, 2^31 wrapping to INT32_MIN) or 2^(16 - y) (right: as float), gathered */
  ut_tensor t;
  int64_t n = 32;
  if (ut_tensor_alloc(c->e, &t, left ? TINY_I32 : TINY_FP32, 1, &n)) return c->e->code;
  for (int k = 0; k < 32; k++) {
    if (left) ((int32_t *)t.data)[k] = (int32_t)(uint32_t)(1u << k);
    else ((float *)t.data)[k] = ldexpf(1, 16 - k);
  }
  hg_val tab = ox_weight(c, "pow2", &t);
  const fe_shape s = *ox_shape_of(c, yc);
  const fe_dim *m = fe_dim_int(c->A, 1);
  for (int i = 0; i < s.rank && m; i++) m = fe_dim_mul(c->A, m, s.d[i]);
  if (tab < 0 || !m) return c->e->code ? c->e->code : ox_fail(c, HARP_E_LIMIT, "the size expression is too large");
  hg_val p = fe_reshape(g, hg_gather(g, tab, fe_reshape(g, yc, &(fe_shape){.rank = 1, .d = {m}}), 0), &s);
  if (left) {
    r = sel(c, oor, I32(c, 0), mul(c, x, p));
  } else { /* floor(x / 2^y) = floor(hi 2^(16 - y)) + floor(lo 2^-y) */
    hg_val hi, lo;
    split16(c, x, &hi, &lo);
    hg_val a = hg_floor(g, mul(c, hi, p)), b = hg_floor(g, mul(c, lo, mulk(c, p, 1.0 / 65536)));
    r = add(c, hg_cast(g, a, TINY_I32), hg_cast(g, b, TINY_I32));
    r = sel(c, oor, sel(c, lt(c, x, I32(c, 0)), I32(c, -1), I32(c, 0)), r);
  }
  return ox_def(c, 0, r);
}

/* the 16 bits of v (a float integer in [0, 2^16)), low first */
static void bits16(ox_ctx *c, hg_val v, hg_val *bit) {
  hg_val f = v;
  for (int k = 0; k < 16; k++) {
    hg_val next = hg_floor(c->g, mulk(c, f, 0.5));
    bit[k] = sub(c, f, add(c, next, next));
    f = next;
  }
}

typedef enum { B_AND, B_OR, B_XOR } bit_kind;

static hg_val bits_half(ox_ctx *c, hg_val u, hg_val v, bit_kind k) {
  hg_val bu[16], bv[16], r = HG_NONE;
  bits16(c, u, bu), bits16(c, v, bv);
  for (int i = 15; i >= 0; i--) { /* r = 2 r + bit, exact */
    hg_val ab = mul(c, bu[i], bv[i]);
    hg_val b = k == B_AND ? ab : k == B_OR ? sub(c, add(c, bu[i], bv[i]), ab) : sub(c, add(c, bu[i], bv[i]), add(c, ab, ab));
    r = r == HG_NONE ? b : add(c, add(c, r, r), b);
  }
  return r;
}

static harp_status bitwise(ox_ctx *c, bit_kind k) {
  hg_graph *g = c->g;
  hg_val a, b, ah, al, bh, bl;
  if (int_pair(c, &a, &b)) return c->e->code;
  split16(c, a, &ah, &al), split16(c, b, &bh, &bl);
  /* hi as its 16-bit two's complement pattern, and back */
  hg_val zero = K(c, 0), big = K(c, 65536);
  ah = sel(c, lt(c, ah, zero), add(c, ah, big), ah), bh = sel(c, lt(c, bh, zero), add(c, bh, big), bh);
  hg_val rh = bits_half(c, ah, bh, k), rl = bits_half(c, al, bl, k);
  rh = sel(c, hg_binary(g, HG_OP_GE, rh, K(c, 32768)), sub(c, rh, big), rh);
  return ox_def(c, 0, add(c, mul(c, hg_cast(g, rh, TINY_I32), I32(c, 65536)), hg_cast(g, rl, TINY_I32)));
}
OP(BitwiseAnd) { return bitwise(c, B_AND); }
OP(BitwiseOr) { return bitwise(c, B_OR); }
OP(BitwiseXor) { return bitwise(c, B_XOR); }

/* ~x = -x - 1, wrapping */
OP(BitwiseNot) {
  hg_val x = ox_tensor(c, 0);
  if (x < 0) return c->e->code;
  if (hg_val_dtype(c->g, x) != TINY_I32) return ox_fail(c, HARP_E_UNSUPPORTED, "BitwiseNot of %s (harp computes it on int32)", tiny_dtype_name(hg_val_dtype(c->g, x)));
  return ox_def(c, 0, sub(c, hg_neg(c->g, x), I32(c, 1)));
}

/* ---- dispatch ------------------------------------------------------------------------------------ */
static const struct {
  const char *name;
  ox_op_fn fn;
} ops[] = {
#define E(n) {#n, op_##n}
    E(Acos), E(Acosh), E(Asin), E(Asinh), E(Atan), E(Atanh), E(BitShift), E(BitwiseAnd), E(BitwiseNot), E(BitwiseOr), E(BitwiseXor),
    E(Cos), E(Cosh), E(EyeLike), E(RotaryEmbedding), E(Sin), E(Sinh), E(SwiGLU), E(Tan),
#undef E
};

ox_op_fn ox_find_math(const char *op) {
  for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
    if (!strcmp(ops[i].name, op)) return ops[i].fn;
  return NULL;
}
