/* contract_q8dw.c — depthwise convolutions of 8-bit integers (groups ==
 * input == output channels), the int8 kernels' neighbour in a QDQ model's
 * inverted-residual blocks: 1x1 expand -> depthwise -> 1x1 project.
 * Needs: contract_c.h (cc_q8_act, cc_q8_whole, cc_q8_out_zo, cc_q8_scratch
 * of contract_q8.c; q8_hold.c's plan in c->q8).  Gives: cc_emit_q8dw.
 *
 * A depthwise layer is memory-bound (kh*kw multiply-adds an output): what
 * an int8 form buys is bytes in and out, so that the 1x1 convs either side
 * keep their activations as bytes (q8_hold.c) instead of converting them.
 * The arithmetic stays fp32: the input's integers (|x| <= 255) times the
 * weight's (|w| <= 128) summed over at most 64 taps stay below 2^24, so
 * every sum is exact in any order (the int32 sums a VNNI kernel would make)
 * and the template's epilogue (bias, multiplier, rint, clamps) applies to
 * the same value.  A weight that is not integers is read as it is (the
 * template's products, summed in another order): no fallback is needed, so
 * the kernel always runs, held buffers or not.
 *
 * Per task a run of (image, channel) planes; per plane the input copied,
 * converted to fp32 (held: byte - za) and zero-padded into a per-thread
 * scratch with its columns split into stride phases (padded column pc at
 * phase pc % sw, index pc / sw), so that each tap of each output row is one
 * contiguous run at a constant offset; then per output element the kh*kw
 * taps unrolled, the epilogue, the store (held: y + zo as a byte).  Where
 * the CPU has AVX512-VBMI / VNNI and a window row has at most 4 taps, the
 * VNNI variant (dw_task_vnni): the plane copied as bytes, a vpdpbusd per
 * window row over taps gathered by vpermb, the same epilogue; output rows
 * of a vector or more in pairs where the stride down is below the
 * window's height (dw_vnni_pair: the input rows the two share gathered
 * once; MobileNetV2's 112x112 to 14x14 layers). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#include "contract_c.h"

#define DW_MAX_TAPS 64

/* The sizes of depthwise conv cv as its kernel reads them: output rows and
 * columns; the padded plane's rows, phase row length and row stride. */
typedef struct dw_shape {
  int64_t oh, ow, hp, wq, rs;
  int za, zo;             /* the held input's / output's zero points */
  bool held_in, held_out; /* the input / output held as bytes (q8_hold.c) */
  bool packed;            /* the weight read from its packed form 1 (fp32), else as stored */
  bool vnni;              /* the VNNI variant emitted too (dw_vnni_plan; packed) */
  int zb;                 /* vnni: the input's bytes x + zb, zb the padding's byte */
  int64_t rsb, rows;      /* vnni: the u8 plane's row stride; output rows a vector (a row narrower than 16) */
} dw_shape;

/* A C type and load / store spelling of dtype dt (a byte when held). */
static const char *dw_ctype(tiny_dtype dt, bool held) {
  return held ? "uint8_t" : dt == TINY_FP32 ? "float" : "uint16_t";
}
static const char *dw_load(tiny_dtype dt) { return dt == TINY_FP32 ? "" : dt == TINY_BF16 ? "hp_b2f" : "hp_h2f"; }
static const char *dw_store(tiny_dtype dt) { return dt == TINY_FP32 ? "" : dt == TINY_BF16 ? "hp_f2b" : "hp_f2h"; }

/* An AVX-512 expression of the 16 values (mask m) at pointer expression p
 * of a plane of dtype dt (held: bytes) as fp32. */
static void dw_vload(char *buf, size_t cap, tiny_dtype dt, bool held, const char *p) {
  if (held) snprintf(buf, cap, "_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, %s)))", p);
  else if (dt == TINY_FP32) snprintf(buf, cap, "_mm512_maskz_loadu_ps(m, %s)", p);
  else if (dt == TINY_BF16)
    snprintf(buf, cap, "_mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, %s)), 16))", p);
  else snprintf(buf, cap, "_mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, %s))", p);
}

/* The task <fn>_dwt's copy of plane s (dtype of cv's X, or bytes) into the
 * phase-split scratch xp, its padding untouched (zeros written once); vec:
 * each row converted by AVX-512 vectors, straight into place at stride 1,
 * split by permutes at stride 2, else into the row after the plane (xr)
 * and split from there. */
static void dw_fill(ut_str *o, const ct_conv *cv, const dw_shape *d, bool vec) {
  int64_t sw = cv->stride[1], pw = cv->pad[1];
  char ld[200], ld2[200];
  if (vec && sw == 2) { /* 32 columns of the row, their even and odd ones permuted straight into the phase rows */
    dw_vload(ld, sizeof ld, cv->X.dtype, d->held_in, "s + h * W_ + j");
    dw_vload(ld2, sizeof ld2, cv->X.dtype, d->held_in, "s + h * W_ + j + 16");
    ut_str_printf(o,
                  "    for (long h = 0; h < %" PRId64 "L; h++) {\n      const long W_ = %" PRId64 "L;\n"
                  "      float *restrict dr = xp + (h + PH_) * RS_;\n"
                  "      const __m512i ev = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);\n"
                  "      const __m512i od = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);\n"
                  "      const __m512 za = _mm512_set1_ps(%d.0f);\n"
                  "      for (long j = 0; j < W_; j += 32) {\n        long r = W_ - j, ne = r >= 32 ? 16 : (r + 1) / 2, no = r >= 32 ? 16 : r / 2;\n"
                  "        __m512 a, b;\n"
                  "        { __mmask16 m = (__mmask16)(r >= 16 ? 0xffff : (1u << r) - 1); a = _mm512_sub_ps(%s, za); }\n"
                  "        { __mmask16 m = (__mmask16)(r >= 32 ? 0xffff : r > 16 ? (1u << (r - 16)) - 1 : 0); b = _mm512_sub_ps(%s, za); }\n"
                  "        _mm512_mask_storeu_ps(dr + (PW_ %% 2) * %" PRId64 "L + (j + PW_) / 2, (__mmask16)(ne >= 16 ? 0xffff : (1u << ne) - 1),\n"
                  "                              _mm512_permutex2var_ps(a, ev, b));\n"
                  "        _mm512_mask_storeu_ps(dr + ((PW_ + 1) %% 2) * %" PRId64 "L + (j + PW_ + 1) / 2, (__mmask16)(no >= 16 ? 0xffff : (1u << no) - 1),\n"
                  "                              _mm512_permutex2var_ps(a, od, b));\n      }\n    }\n",
                  cv->h, cv->w, d->held_in ? d->za : 0, ld, ld2, d->wq, d->wq);
    return;
  }
  if (vec) {
    dw_vload(ld, sizeof ld, cv->X.dtype, d->held_in, "s + h * W_ + i");
    ut_str_printf(o,
                  "    for (long h = 0; h < %" PRId64 "L; h++) {\n      const long W_ = %" PRId64 "L;\n"
                  "      float *restrict xr = %s;\n"
                  "      for (long i = 0; i < W_; i += 16) {\n"
                  "        __mmask16 m = W_ - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (W_ - i)) - 1);\n"
                  "        _mm512_mask_storeu_ps(xr + i, m, _mm512_sub_ps(%s, _mm512_set1_ps(%d.0f)));\n      }\n",
                  cv->h, cv->w, sw == 1 ? "xp + (h + PH_) * RS_ + PW_" : "xp + PLANE_", ld, d->held_in ? d->za : 0);
    if (sw == 1) {
      ut_str_puts(o, "    }\n");
      return;
    }
    snprintf(ld, sizeof ld, "xr[pc]");
  } else if (d->held_in) snprintf(ld, sizeof ld, "(float)s[h * %" PRId64 "L + pc] - %d.0f", cv->w, d->za);
  else snprintf(ld, sizeof ld, "%s(s[h * %" PRId64 "L + pc])", dw_load(cv->X.dtype), cv->w);
  ut_str_printf(o,
                "%s"
                "      float *restrict dr = xp + (h + %" PRId64 "L) * %" PRId64 "L;\n"
                "      for (long f = 0; f < %" PRId64 "L; f++) {\n"
                "        long lo = f >= %" PRId64 "L ? 0 : (%" PRId64 "L - f + %" PRId64 "L) / %" PRId64 "L;\n"
                "        long hi = (%" PRId64 "L - f + %" PRId64 "L) / %" PRId64 "L;\n"
                "        float *restrict dp = dr + f * %" PRId64 "L;\n"
                "        for (long i = lo; i < hi; i++) {\n"
                "          long pc = i * %" PRId64 "L + f - %" PRId64 "L;\n"
                "          dp[i] = %s;\n        }\n      }\n    }\n",
                vec ? "" : "    for (long h = 0; h < H_; h++) {\n", cv->pad[0], d->rs, sw, pw, pw, sw - 1, sw, pw + cv->w, sw - 1,
                sw, d->wq, sw, pw, ld);
}

/* The taps, epilogue and store of output element (oh, ow) of channel c:
 * the sum over taps in order, each at its constant offset into the phase
 * rows; false when an epilogue step is not one this kernel applies. */
static bool dw_point(ut_str *o, const ct_conv *cv, const dw_shape *d) {
  ut_str_puts(o, "        float v = 0.0f");
  for (int64_t ky = 0; ky < cv->kh; ky++)
    for (int64_t kx = 0; kx < cv->kw; kx++) {
      int64_t c0 = kx * cv->dil[1], off = ky * cv->dil[0] * d->rs + (c0 % cv->stride[1]) * d->wq + c0 / cv->stride[1];
      ut_str_printf(o, "\n          + wv[%" PRId64 "] * r0[ow + %" PRId64 "L]", ky * cv->kw + kx, off);
    }
  ut_str_puts(o, ";\n");
  for (int i = 0; i < cv->nepi; i++) {
    const ct_epi *ep = &cv->epi[i];
    if (ep->kind == CT_EPI_BIAS_M) ut_str_printf(o, "        v = v %s b%d;\n", ep->mul ? "*" : "+", i);
    else if (ep->kind == CT_EPI_RINT) ut_str_puts(o, "        v = __builtin_rintf(v); /* halves to even */\n");
    else if (!cc_epi_scalar(o, ep)) return false;
  }
  if (d->held_out)
    ut_str_printf(o, /* max / min that vectorize; a NaN becomes byte 0 (vmaxps(v, 0)) as QuantizeLinear's q = 0 */
                  "        v = v + %d.0f;\n        v = v > 0.0f ? v : 0.0f;\n        v = v < 255.0f ? v : 255.0f;\n"
                  "        yr[ow] = (uint8_t)(int32_t)v;\n",
                  d->zo);
  else ut_str_printf(o, "        yr[ow] = %s(v);\n", dw_store(cv->Y.dtype));
  return true;
}

/* The variants of the task: AVX-512 (16 outputs of a row a vector, the
 * last masked: rows of 7 to 112 leave the compiler's vectorizer nothing to
 * do) and plain C (the object is built for any x86-64): suffix, attribute,
 * the run-time check that selects it. */
static const struct {
  const char *sfx, *attr, *check;
} DW_ISA[] = {
    {"_avx512", "__attribute__((target(\"avx512f,avx512bw,avx512vl,avx512dq,fma,f16c\"))) ",
     "__builtin_cpu_supports(\"avx512f\") && __builtin_cpu_supports(\"avx512bw\") && __builtin_cpu_supports(\"avx512vl\") && "
     "__builtin_cpu_supports(\"avx512dq\")"},
    {"", "", NULL},
};

/* Whether cv's epilogue ends in a rounding to integers (RINT), then clamps
 * and scales that keep them integers of [-256, 256] (QuantizeLinear's and
 * its zero point's, as a bf16 output not held): each value then has at
 * most 8 significant bits, so its bf16 is the top half of its fp32
 * exactly, and a NaN (quiet after the rounding) stays the same quiet NaN
 * hp_f2b makes of it. */
static bool dw_small_ints(const ct_conv *cv) {
  int i = cv->nepi - 1;
  while (i >= 0 && (cv->epi[i].kind == CT_EPI_CLAMP || cv->epi[i].kind == CT_EPI_SCALE)) i--;
  if (i < 0 || cv->epi[i].kind != CT_EPI_RINT) return false;
  float lo = -INFINITY, hi = INFINITY; /* the values' range after each step (both steps are monotone) */
  for (i++; i < cv->nepi; i++) {
    const ct_epi *e = &cv->epi[i];
    float a = e->kind == CT_EPI_CLAMP ? e->lo : e->scale, b = e->kind == CT_EPI_CLAMP ? e->hi : e->shift;
    if ((isfinite(a) && nearbyintf(a) != a) || (isfinite(b) && nearbyintf(b) != b)) return false;
    if (e->kind == CT_EPI_CLAMP) lo = fminf(fmaxf(lo, a), b), hi = fminf(fmaxf(hi, a), b);
    else {
      float l = lo * a + b, h = hi * a + b; /* inf * 0: NaN, refused below */
      lo = fminf(l, h), hi = fmaxf(l, h);
      if (isnan(l) || isnan(h) || !isfinite(a) || !isfinite(b)) return false;
    }
  }
  return lo >= -256.0f && hi <= 256.0f;
}

static bool dw_vepi(ut_str *o, const ct_conv *cv, const dw_shape *d);

/* dw_point for AVX-512: outputs ow .. ow + 15 of the row (mask m) as the
 * vector v, then dw_vepi; false when an epilogue step has no vector form. */
static bool dw_vpoint(ut_str *o, const ct_conv *cv, const dw_shape *d) {
  ut_str_printf(o, "        __mmask16 m = %" PRId64 "L - ow >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (%" PRId64 "L - ow)) - 1);\n"
                   "        __m512 v = _mm512_setzero_ps();\n", d->ow, d->ow);
  for (int64_t ky = 0; ky < cv->kh; ky++)
    for (int64_t kx = 0; kx < cv->kw; kx++) {
      int64_t c0 = kx * cv->dil[1], off = ky * cv->dil[0] * d->rs + (c0 % cv->stride[1]) * d->wq + c0 / cv->stride[1];
      ut_str_printf(o, "        v = _mm512_fmadd_ps(_mm512_set1_ps(wv[%" PRId64 "]), _mm512_maskz_loadu_ps(m, r0 + ow + %" PRId64 "L), v);\n",
                    ky * cv->kw + kx, off);
    }
  return dw_vepi(o, cv, d);
}

/* A held output's requantizing tail (d->held_out): the index of cv's last
 * epilogue step RINT when every step after it is a clamp or relu to
 * integer bounds or a shift by an integer (scale 1), else -1.  The byte
 * stored, clamp(tail(rint(v)) + zo, 0, 255) (dw_vepi's generic form), is
 * then clamp(rint(v), a, b) + k with k the shifts plus zo and [a, b] the
 * clamps' bounds less the shifts, met with [-k, 255 - k] (*a, *b, *k);
 * and rint(clamp(v, a, b)) is clamp(rint(v), a, b), a, b integers: one
 * clamp, a conversion rounding to nearest even, an integer add.  Only where
 * a == -k: a NaN (vmaxps(v, a) gives a) is byte 0 as in the generic form. */
static int dw_rq_tail(const ct_conv *cv, const dw_shape *d, int *a, int *b, int *k) {
  int r = cv->nepi - 1;
  while (r >= 0 && cv->epi[r].kind != CT_EPI_RINT) r--;
  if (!d->held_out || r < 0) return -1;
  double lo = -INFINITY, hi = INFINITY, off = 0;
  for (int i = r + 1; i < cv->nepi; i++) {
    const ct_epi *e = &cv->epi[i];
    double l = e->kind == CT_EPI_RELU ? 0 : e->lo, h = e->kind == CT_EPI_RELU ? INFINITY : e->hi;
    if (e->kind == CT_EPI_SCALE && e->scale == 1.0f && isfinite(e->shift) && e->shift == nearbyintf(e->shift)) off += e->shift;
    else if ((e->kind == CT_EPI_CLAMP || e->kind == CT_EPI_RELU) && (isinf(l) || l == nearbyint(l)) && (isinf(h) || h == nearbyint(h)))
      lo = fmax(lo, l - off), hi = fmin(hi, h - off);
    else return -1;
  }
  double kk = off + d->zo, aa = fmax(lo, -kk), bb = fmin(hi, 255 - kk);
  if (!(fabs(kk) <= 512 && lo <= -kk && aa <= bb)) return -1;
  *a = (int)aa, *b = (int)bb, *k = (int)kk;
  return r;
}

/* The epilogue of cv's sums in vector v (16 lanes, mask m) and their store
 * at yr + ow; false when a step has no vector form here.  A held output's
 * requantizing tail (dw_rq_tail) in its short form. */
static bool dw_vepi(ut_str *o, const ct_conv *cv, const dw_shape *d) {
  int ta = 0, tb = 0, tk = 0, tail = dw_rq_tail(cv, d, &ta, &tb, &tk);
  for (int i = 0; i < (tail >= 0 ? tail : cv->nepi); i++) { /* the scalar steps' NaN rules: vmaxps / vminps return their second operand */
    const ct_epi *ep = &cv->epi[i];
    switch (ep->kind) {
      case CT_EPI_BIAS_M: ut_str_printf(o, "        v = _mm512_%s_ps(v, _mm512_set1_ps(b%d));\n", ep->mul ? "mul" : "add", i); break;
      case CT_EPI_RINT: ut_str_puts(o, "        v = _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);\n"); break;
      case CT_EPI_RELU: ut_str_puts(o, "        v = _mm512_max_ps(_mm512_setzero_ps(), v);\n"); break;
      case CT_EPI_SCALE:
        ut_str_printf(o, "        v = _mm512_add_ps(_mm512_mul_ps(v, _mm512_set1_ps(%#.9gf)), _mm512_set1_ps(%#.9gf));\n", (double)ep->scale,
                      (double)ep->shift);
        break;
      case CT_EPI_CLAMP:
        if (ep->lo != -INFINITY) ut_str_printf(o, "        v = _mm512_max_ps(_mm512_set1_ps(%#.9gf), v);\n", (double)ep->lo);
        if (ep->hi != INFINITY) ut_str_printf(o, "        v = _mm512_min_ps(_mm512_set1_ps(%#.9gf), v);\n", (double)ep->hi);
        break;
      default: return false; /* none: dw_task checked */
    }
  }
  if (tail >= 0) {
    ut_str_printf(o, "        v = _mm512_min_ps(_mm512_max_ps(v, _mm512_set1_ps(%d.0f)), _mm512_set1_ps(%d.0f));\n"
                     "        __m512i q_ = _mm512_cvt_roundps_epi32(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);\n", ta, tb);
    if (tk) ut_str_printf(o, "        q_ = _mm512_add_epi32(q_, _mm512_set1_epi32(%d));\n", tk);
    ut_str_puts(o, "        _mm512_mask_cvtusepi32_storeu_epi8(yr + ow, m, q_);\n");
  } else if (d->held_out) /* vmaxps(v, 0): a NaN becomes byte 0, as QuantizeLinear's q = 0 */
    ut_str_printf(o,
                  "        v = _mm512_min_ps(_mm512_max_ps(_mm512_add_ps(v, _mm512_set1_ps(%d.0f)), _mm512_setzero_ps()), _mm512_set1_ps(255.0f));\n"
                  "        _mm512_mask_cvtusepi32_storeu_epi8(yr + ow, m, _mm512_cvtps_epi32(v));\n",
                  d->zo);
  else if (cv->Y.dtype == TINY_FP32) ut_str_puts(o, "        _mm512_mask_storeu_ps(yr + ow, m, v);\n");
  else if (cv->Y.dtype == TINY_BF16 && dw_small_ints(cv)) /* integers of 8 bits: their bf16 is their top half */
    ut_str_puts(o, "        _mm512_mask_cvtepi32_storeu_epi16(yr + ow, m, _mm512_srli_epi32(_mm512_castps_si512(v), 16));\n");
  else if (cv->Y.dtype == TINY_BF16) /* hp_f2b's rounding (half to even; a NaN quiet) */
    ut_str_puts(o, "        __m512i u = _mm512_castps_si512(v), one = _mm512_set1_epi32(1);\n"
                   "        __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)),\n"
                   "                                                       _mm512_and_si512(_mm512_srli_epi32(u, 16), one)), 16);\n"
                   "        r = _mm512_mask_mov_epi32(r, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q),\n"
                   "                                  _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40)));\n"
                   "        _mm512_mask_cvtepi32_storeu_epi16(yr + ow, m, r);\n");
  else
    ut_str_printf(o, "        float vt[16];\n        _mm512_storeu_ps(vt, v);\n"
                     "        for (long i = 0; i < 16 && ow + i < %" PRId64 "L; i++) yr[ow + i] = %s(vt[i]);\n",
                  d->ow, dw_store(cv->Y.dtype));
  return true;
}

/* <fn>_dwpad(xp): zeros at the padding of the phase-split scratch xp of
 * cv (shape d), the places dw_fill never writes: the rows above and below
 * the plane, and in its rows the padded columns q outside [pw, pw + w),
 * each at phase q % sw, index q / sw.  Cheaper than clearing the plane
 * once per task: a 112x112 plane is 52 KB of scratch, its padding 2%. */
static void dw_pad(ut_str *o, const char *fn, const ct_conv *cv, const dw_shape *d) {
  int64_t sw = cv->stride[1], pw = cv->pad[1], rs = d->rs, top = cv->pad[0], bot = d->hp - cv->pad[0] - cv->h;
  ut_str_printf(o,
                "static void %s_dwpad(float *xp) {\n"
                "  memset(xp, 0, %" PRId64 "UL * 4);\n  memset(xp + %" PRId64 "L, 0, %" PRId64 "UL * 4);\n"
                "  for (long h = %" PRId64 "L; h < %" PRId64 "L; h++) {\n    float *dr = xp + h * %" PRId64 "L;\n"
                "    for (long q = 0; q < %" PRId64 "L; q++) dr[(q %% %" PRId64 "L) * %" PRId64 "L + q / %" PRId64 "L] = 0.0f;\n"
                "    for (long q = %" PRId64 "L; q < %" PRId64 "L; q++) dr[(q %% %" PRId64 "L) * %" PRId64 "L + q / %" PRId64 "L] = 0.0f;\n"
                "  }\n}\n",
                fn, top * rs, (top + cv->h) * rs, bot * rs, top, top + cv->h, rs, pw, sw, d->wq, sw, pw + cv->w, rs, sw, d->wq, sw);
}

/* The task's per-channel epilogue values of channel c: b<i> for step i. */
static void dw_biases(ut_str *o, const ct_conv *cv) {
  for (int i = 0; i < cv->nepi; i++) {
    const ct_epi *ep = &cv->epi[i];
    if (ep->kind != CT_EPI_BIAS_M) continue;
    if (ep->dtype == TINY_FP32) ut_str_printf(o, "    const float b%d = ((const float *)x->ep[%d])[c];\n", i, i);
    else ut_str_printf(o, "    const float b%d = %s(((const uint16_t *)x->ep[%d])[c]);\n", i, dw_load(ep->dtype), i);
  }
}

/* Whether every step of cv's epilogue has a vector form (dw_vepi). */
static bool dw_vec_epi(const ct_conv *cv) {
  for (int i = 0; i < cv->nepi; i++)
    if (!(cv->epi[i].kind == CT_EPI_BIAS_M || cv->epi[i].kind == CT_EPI_RINT || cv->epi[i].kind == CT_EPI_RELU ||
          cv->epi[i].kind == CT_EPI_SCALE || cv->epi[i].kind == CT_EPI_CLAMP))
      return false;
  return true;
}

/* <fn>_dwt<isa>(ctx, t, tid): task t's planes [t np / nt, (t + 1) np / nt). */
static bool dw_task(ut_str *o, const char *fn, const ct_conv *cv, const dw_shape *d, int isa) {
  const char *xt = dw_ctype(cv->X.dtype, d->held_in), *yt = dw_ctype(cv->Y.dtype, d->held_out);
  int64_t kk = cv->kh * cv->kw, plane = d->hp * d->rs;
  bool vec = DW_ISA[isa].check != NULL && dw_vec_epi(cv); /* the vector form, where every epilogue step has one */
  ut_str_printf(o,
                "static %svoid %s_dwt%s(void *ctx, int t, int tid) {\n  (void)tid;\n  %s_dwx *x = (%s_dwx *)ctx;\n"
                "  const long H_ = %" PRId64 "L, PH_ = %" PRId64 "L, PW_ = %" PRId64 "L, RS_ = %" PRId64 "L, PLANE_ = %" PRId64 "L;\n"
                "  (void)H_, (void)PH_, (void)PW_, (void)RS_;\n"
                "  float *xp = (float *)hp_q8_scratch(%" PRId64 "UL * 4); /* the plane, then a row (dw_fill) */\n"
                "  if (!xp) { __atomic_store_n(&x->err, 1, __ATOMIC_RELAXED); return; }\n"
                "  %s_dwpad(xp); /* the padding, for every plane */\n"
                "  long p0 = (long)t * x->np / x->nt, p1 = (long)(t + 1) * x->np / x->nt;\n"
                "  for (long p = p0; p < p1; p++) {\n    long c = p %% %" PRId64 "L;\n"
                "    const %s *restrict s = (const %s *)x->x + p * %" PRId64 "L;\n",
                DW_ISA[isa].attr, fn, DW_ISA[isa].sfx, fn, fn, cv->h, cv->pad[0], cv->pad[1], d->rs, plane,
                plane + (cv->w + 31) / 16 * 16, fn, cv->c, xt, xt, cv->h * cv->w);
  dw_fill(o, cv, d, vec);
  tiny_dtype wt = d->packed ? TINY_FP32 : cv->W.dtype;
  ut_str_printf(o, "    float wv[%" PRId64 "];\n    for (int i = 0; i < %" PRId64 "; i++) wv[i] = %s(((const %s *)x->w)[c * %" PRId64 "L + i]);\n",
                kk, kk, dw_load(wt), dw_ctype(wt, false), kk);
  dw_biases(o, cv);
  ut_str_printf(o,
                "    %s *restrict y = (%s *)x->y + p * %" PRId64 "L;\n"
                "    for (long oh = 0; oh < %" PRId64 "L; oh++) {\n"
                "      const float *restrict r0 = xp + oh * %" PRId64 "L;\n      %s *restrict yr = y + oh * %" PRId64 "L;\n"
                "      for (long ow = 0; ow < %" PRId64 "L; ow += %d) {\n",
                yt, yt, d->oh * d->ow, d->oh, cv->stride[0] * d->rs, yt, d->ow, d->ow, vec ? 16 : 1);
  if (!(vec ? dw_vpoint(o, cv, d) : dw_point(o, cv, d))) return false;
  ut_str_puts(o, "      }\n    }\n  }\n}\n");
  return true;
}

/* The steps cv's epilogue may have here: per-channel biases (no other
 * tensor) and the scalar steps. */
static bool dw_epi_ok(const ct_conv *cv) {
  for (int i = 0; i < cv->nepi; i++) {
    ct_epi_kind k = cv->epi[i].kind;
    if (k == CT_EPI_BIAS_N || k == CT_EPI_RESIDUAL || k == CT_EPI_GELU || k == CT_EPI_SILU || k == CT_EPI_SIGMOID ||
        k == CT_EPI_GATE)
      return false;
  }
  return true;
}

/* cv's shape as dw_shape (holding nothing); false when cv is no depthwise
 * conv this kernel takes. */
static bool dw_geometry(const ct_conv *cv, dw_shape *d) {
  if (!(cv->groups > 1 && cv->groups == cv->c && cv->oc == cv->c) || cv->kh * cv->kw > DW_MAX_TAPS || !dw_epi_ok(cv)) return false;
  for (int i = 0; i < 4; i++)
    if (cv->pad[i] < 0) return false;
  *d = (dw_shape){.za = 0, .zo = -1};
  d->hp = cv->h + cv->pad[0] + cv->pad[2];
  int64_t wp = cv->w + cv->pad[1] + cv->pad[3];
  d->oh = (d->hp - cv->dil[0] * (cv->kh - 1) - 1) / cv->stride[0] + 1;
  d->ow = (wp - cv->dil[1] * (cv->kw - 1) - 1) / cv->stride[1] + 1;
  d->wq = (wp + cv->stride[1] - 1) / cv->stride[1];
  d->rs = cv->stride[1] * d->wq;
  return d->oh >= 1 && d->ow >= 1 && cv->stride[0] >= 1 && cv->stride[1] >= 1;
}

/* The packed form 1 (rc_packed) of cv's weight: its C x kh*kw values as
 * fp32, for fn's kernel when the template packs the weight once (model_init
 * then keeps the packed forms only); with vnni then per channel and row the
 * kw taps as int8 in one word (the rest 0), per channel the taps' sum, and
 * a flag: 1 when every value is an integer of [-128, 127] (else the VNNI
 * variant is not run: <fn>_dwsel). */
static void dw_wpack(ut_str *o, const char *fn, const ct_conv *cv, bool vnni) {
  int64_t n = cv->c * cv->kh * cv->kw, words = cv->c * cv->kh;
  ut_str_printf(o, "static long %s_wbytes1(void) { return %" PRId64 "L; }\n", fn, n * 4 + (vnni ? (words + cv->c + 1) * 4 : 0));
  ut_str_printf(o,
                "static int %s_wpack1(hprt_pool *pool, const void *w, void *wp) {\n  (void)pool;\n"
                "  const %s *s = (const %s *)w + %" PRId64 "L;\n  float *f = (float *)wp;\n"
                "  for (long i = 0; i < %" PRId64 "L; i++) f[i] = %s(s[i]);\n",
                fn, dw_ctype(cv->W.dtype, false), dw_ctype(cv->W.dtype, false), cv->W.offset, n, dw_load(cv->W.dtype));
  if (vnni)
    ut_str_printf(o,
                  "  int32_t *wq = (int32_t *)(f + %" PRId64 "L), *ws = wq + %" PRId64 "L, *ok = ws + %" PRId64 "L;\n  *ok = 1;\n"
                  "  for (long c = 0; c < %" PRId64 "L; c++) {\n    int32_t sum = 0;\n"
                  "    for (long ky = 0; ky < %" PRId64 "L; ky++) {\n      uint32_t word = 0;\n"
                  "      for (long kx = 0; kx < %" PRId64 "L; kx++) {\n        float v = f[(c * %" PRId64 "L + ky) * %" PRId64 "L + kx];\n"
                  "        if (!(v >= -128.0f && v <= 127.0f && v == (float)(int32_t)v)) { *ok = 0; continue; }\n"
                  "        word |= (uint32_t)(uint8_t)(int8_t)(int32_t)v << (8 * kx);\n        sum += (int32_t)v;\n      }\n"
                  "      wq[c * %" PRId64 "L + ky] = (int32_t)word;\n    }\n    ws[c] = sum;\n  }\n",
                  n, words, cv->c, cv->c, cv->kh, cv->kw, cv->kh, cv->kw, cv->kh);
  ut_str_puts(o, "  return 0;\n}\n");
}

/* Whether cv (shape d, its epilogue vectorizable: vec) also gets the VNNI
 * variant <fn>_dwt_vnni: at most 4 taps a row at unit column dilation, so
 * that one vpdpbusd sums a row's taps for 16 outputs from the bytes a
 * vpermb gathers (4 a lane) out of one 64-byte load of the padded u8 plane;
 * d->rows output rows a vector where a row is narrower than 16 lanes (the
 * 7x7 and 14x14 layers). */
static void dw_vnni_plan(const ct_conv *cv, dw_shape *d, bool vec) {
  int64_t sh = cv->stride[0], sw = cv->stride[1];
  d->rsb = cv->w + cv->pad[1] + cv->pad[3];
  d->rows = d->ow >= 16 ? 1 : 16 / d->ow;
  while (d->rows > 1 && (d->rows - 1) * sh * d->rsb + (d->ow - 1) * sw + 4 > 64) d->rows--;
  d->vnni = d->packed && vec && cv->kw <= 4 && cv->dil[1] == 1 && sw <= 3 && cv->kh <= 16 &&
            (d->held_out || cv->Y.dtype == TINY_FP32 || cv->Y.dtype == TINY_BF16);
}

/* The byte offsets in a 64-byte load of the padded plane (row stride
 * d->rsb) that vpermb gathers: lane i, tap t at the output column (and,
 * with d->rows > 1, row) of lane i; unused lanes read byte 0. */
static void dw_vnni_index(ut_str *o, const ct_conv *cv, const dw_shape *d) {
  int64_t sh = cv->stride[0], sw = cv->stride[1], lanes = d->rows > 1 ? d->rows * d->ow : 16;
  ut_str_puts(o, "  static const uint8_t ix_[64] = {");
  for (int64_t j = 0; j < 64; j++) {
    int64_t i = j / 4, t = j % 4, row = d->rows > 1 ? i / d->ow : 0, col = d->rows > 1 ? i % d->ow : i;
    ut_str_printf(o, "%s%" PRId64, j ? ", " : "", i < lanes ? row * sh * d->rsb + col * sw + t : 0);
  }
  ut_str_puts(o, "};\n  const __m512i ix = _mm512_loadu_si512(ix_);\n");
}

/* The VNNI task's copy of plane s into the u8 plane xb (its padding, the
 * byte zb, written once per task): held bytes as they are, else x + zb,
 * a NaN flagged in x->nan (the wrapper then runs the fp32 variant, which
 * propagates it as the template does). */
static void dw_vnni_fill(ut_str *o, const ct_conv *cv, const dw_shape *d) {
  int64_t rw = cv->pad[0] * d->rsb + cv->pad[1];
  if (d->held_in) {
    ut_str_printf(o, "    for (long h = 0; h < %" PRId64 "L; h++) memcpy(xb + %" PRId64 "L + h * %" PRId64 "L, s + h * %" PRId64 "L, %" PRId64 "UL);\n",
                  cv->h, rw, d->rsb, cv->w, cv->w);
    return;
  }
  char ld[200];
  dw_vload(ld, sizeof ld, cv->X.dtype, false, "s + h * W_ + i");
  ut_str_printf(o,
                "    for (long h = 0; h < %" PRId64 "L; h++) {\n      const long W_ = %" PRId64 "L;\n"
                "      for (long i = 0; i < W_; i += 16) {\n"
                "        __mmask16 m = W_ - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (W_ - i)) - 1);\n"
                "        __m512 f = %s;\n"
                "        if (_mm512_cmp_ps_mask(f, f, _CMP_UNORD_Q)) __atomic_store_n(&x->nan, 1, __ATOMIC_RELAXED);\n"
                "        _mm512_mask_cvtepi32_storeu_epi8(xb + %" PRId64 "L + h * %" PRId64 "L + i, m,\n"
                "                                         _mm512_cvtps_epi32(_mm512_add_ps(f, _mm512_set1_ps(%d.0f))));\n      }\n    }\n",
                cv->h, cv->w, ld, rw, d->rsb, d->zb);
}

/* Whether the VNNI task of cv (shape d) takes its output rows in pairs: a
 * vector per row or more (d->rows 1: rows of 9 outputs and more, the
 * last vector masked), no dilation down the window, a stride sh
 * below its height kh, so that rows oh and oh + 1 share kh - sh of their
 * kh + sh input rows (one load and vpermb each, two vpdpbusd). */
static bool dw_vnni_paired(const ct_conv *cv, const dw_shape *d) {
  return d->rows == 1 && cv->stride[0] < cv->kh && cv->dil[0] == 1 && d->oh >= 2;
}

/* The body of dw_task_vnni's column loop for a pair of output rows (oh,
 * and oh + 1 where `two`): input row ky of the pair's kh + sh gathered once
 * into g, summed into row oh's a0 with tap row ky and into row oh + 1's a1
 * with tap row ky - sh; then each row's epilogue and store (dw_vepi);
 * closes the task.  The last sh rows of an odd last row's pair are read
 * from the scratch's rows past the plane, and their sums are not stored. */
static bool dw_vnni_pair(ut_str *o, const ct_conv *cv, const dw_shape *d) {
  const char *yt = dw_ctype(cv->Y.dtype, d->held_out);
  ut_str_puts(o, "        __m512i a0 = _mm512_setzero_si512(), a1 = _mm512_setzero_si512(), g;\n");
  for (int64_t ky = 0, sh = cv->stride[0]; ky < cv->kh + sh; ky++) {
    ut_str_printf(o, "        g = _mm512_permutexvar_epi8(ix, _mm512_loadu_si512(r0 + %" PRId64 "L + ow * %" PRId64 "L));\n", ky * d->rsb,
                  cv->stride[1]);
    if (ky < cv->kh) ut_str_printf(o, "        a0 = _mm512_dpbusd_epi32(a0, g, w%" PRId64 ");\n", ky);
    if (ky >= sh) ut_str_printf(o, "        a1 = _mm512_dpbusd_epi32(a1, g, w%" PRId64 ");\n", ky - sh);
  }
  ut_str_puts(o, "        {\n        __m512 v = _mm512_cvtepi32_ps(_mm512_sub_epi32(a0, zc));\n");
  if (!dw_vepi(o, cv, d)) return false;
  ut_str_printf(o, "        }\n        if (two) {\n        %s *restrict yr = yr0 + %" PRId64 "L;\n"
                   "        __m512 v = _mm512_cvtepi32_ps(_mm512_sub_epi32(a1, zc));\n", yt, d->ow);
  if (!dw_vepi(o, cv, d)) return false;
  ut_str_puts(o, "        }\n      }\n    }\n  }\n}\n");
  return true;
}

/* <fn>_dwt_vnni(ctx, t, tid): dw_task's planes on vpdpbusd (dw_vnni_plan),
 * the weight's int8 words and sums read after its fp32 form (dw_wpack);
 * the sums minus zb times the weight's sum are the fp32 path's exact sums,
 * so the epilogue (dw_vepi) and the output are the same. */
static bool dw_task_vnni(ut_str *o, const char *fn, const ct_conv *cv, const dw_shape *d) {
  const char *xt = dw_ctype(cv->X.dtype, d->held_in), *yt = dw_ctype(cv->Y.dtype, d->held_out);
  int64_t kh = cv->kh, hp = d->hp, rsb = d->rsb, bot = hp - cv->pad[0] - cv->h, sh = cv->stride[0];
  bool pair = dw_vnni_paired(cv, d);
  if (pair) bot += sh; /* rows past the plane: the odd last row's pair reads them */
  ut_str_printf(o,
                "static __attribute__((target(\"avx512f,avx512bw,avx512vl,avx512dq,avx512vbmi,avx512vnni,fma,f16c\"))) "
                "void %s_dwt_vnni(void *ctx, int t, int tid) {\n  (void)tid;\n  %s_dwx *x = (%s_dwx *)ctx;\n",
                fn, fn, fn);
  dw_vnni_index(o, cv, d);
  ut_str_printf(o,
                "  uint8_t *xb = (uint8_t *)hp_q8_scratch(%" PRId64 "UL); /* the padded plane, 64 bytes after it */\n"
                "  if (!xb) { __atomic_store_n(&x->err, 1, __ATOMIC_RELAXED); return; }\n"
                "  memset(xb, %d, %" PRId64 "UL);\n  memset(xb + %" PRId64 "L, %d, %" PRId64 "UL);\n"
                "  for (long h = %" PRId64 "L; h < %" PRId64 "L; h++) {\n"
                "    memset(xb + h * %" PRId64 "L, %d, %" PRId64 "UL);\n    memset(xb + h * %" PRId64 "L + %" PRId64 "L, %d, %" PRId64 "UL);\n  }\n"
                "  const int32_t *wq = (const int32_t *)((const char *)x->w + %" PRId64 "L), *ws = wq + %" PRId64 "L;\n"
                "  long p0 = (long)t * x->np / x->nt, p1 = (long)(t + 1) * x->np / x->nt;\n"
                "  for (long p = p0; p < p1; p++) {\n    long c = p %% %" PRId64 "L;\n"
                "    const %s *restrict s = (const %s *)x->x + p * %" PRId64 "L;\n",
                (pair ? hp + sh : hp) * rsb + 64, d->zb, cv->pad[0] * rsb, (cv->pad[0] + cv->h) * rsb, d->zb, bot * rsb + 64, cv->pad[0],
                cv->pad[0] + cv->h, rsb, d->zb, cv->pad[1], rsb, cv->pad[1] + cv->w, d->zb, rsb - cv->pad[1] - cv->w,
                cv->c * kh * cv->kw * 4, cv->c * kh, cv->c, xt, xt, cv->h * cv->w);
  dw_vnni_fill(o, cv, d);
  for (int64_t ky = 0; ky < kh; ky++) ut_str_printf(o, "    const __m512i w%" PRId64 " = _mm512_set1_epi32(wq[c * %" PRId64 "L + %" PRId64 "]);\n", ky, kh, ky);
  ut_str_printf(o, "    const __m512i zc = _mm512_set1_epi32(%d * ws[c]);\n", d->zb);
  dw_biases(o, cv);
  ut_str_printf(o, "    %s *restrict y = (%s *)x->y + p * %" PRId64 "L;\n", yt, yt, d->oh * d->ow);
  if (pair)
    ut_str_printf(o,
                  "    for (long oh = 0; oh < %" PRId64 "L; oh += 2) {\n      const int two = oh + 1 < %" PRId64 "L;\n"
                  "      const uint8_t *r0 = xb + oh * %" PRId64 "L;\n      %s *restrict yr0 = y + oh * %" PRId64 "L;\n"
                  "      for (long ow = 0; ow < %" PRId64 "L; ow += 16) {\n"
                  "        __mmask16 m = %" PRId64 "L - ow >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (%" PRId64 "L - ow)) - 1);\n"
                  "        %s *restrict yr = yr0;\n",
                  d->oh, d->oh, sh * rsb, yt, d->ow, d->ow, d->ow, d->ow, yt);
  else if (d->rows > 1)
    ut_str_printf(o,
                  "    for (long oh = 0; oh < %" PRId64 "L; oh += %" PRId64 "L) {\n      const long ow = 0;\n"
                  "      const uint8_t *r0 = xb + oh * %" PRId64 "L;\n      %s *restrict yr = y + oh * %" PRId64 "L;\n"
                  "      long nr = %" PRId64 "L - oh < %" PRId64 "L ? %" PRId64 "L - oh : %" PRId64 "L;\n"
                  "      {\n        __mmask16 m = (__mmask16)((1u << (nr * %" PRId64 "L)) - 1);\n",
                  d->oh, d->rows, sh * rsb, yt, d->ow, d->oh, d->rows, d->oh, d->rows, d->ow);
  else
    ut_str_printf(o,
                  "    for (long oh = 0; oh < %" PRId64 "L; oh++) {\n"
                  "      const uint8_t *r0 = xb + oh * %" PRId64 "L;\n      %s *restrict yr = y + oh * %" PRId64 "L;\n"
                  "      for (long ow = 0; ow < %" PRId64 "L; ow += 16) {\n"
                  "        __mmask16 m = %" PRId64 "L - ow >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (%" PRId64 "L - ow)) - 1);\n",
                  d->oh, sh * rsb, yt, d->ow, d->ow, d->ow, d->ow);
  if (pair) return dw_vnni_pair(o, cv, d);
  ut_str_puts(o, "        __m512i a = _mm512_setzero_si512();\n");
  for (int64_t ky = 0; ky < kh; ky++)
    ut_str_printf(o, "        a = _mm512_dpbusd_epi32(a, _mm512_permutexvar_epi8(ix, _mm512_loadu_si512(r0 + %" PRId64 "L + ow * %" PRId64 "L)), w%" PRId64 ");\n",
                  ky * cv->dil[0] * rsb, cv->stride[1], ky);
  ut_str_puts(o, "        __m512 v = _mm512_cvtepi32_ps(_mm512_sub_epi32(a, zc));\n");
  if (!dw_vepi(o, cv, d)) return false;
  ut_str_puts(o, "      }\n    }\n  }\n}\n");
  return true;
}

bool cc_emit_q8dw(rc_ctx *c, int r, const char *fn, ut_str *out, const ct_conv *cv, bool prepacked, rc_packed *pk) {
  dw_shape d;
  int za;
  const tiny_dtype io[2] = {cv->X.dtype, cv->Y.dtype};
  for (int i = 0; i < 2; i++) /* the float storage types the template reads and writes */
    if (io[i] != TINY_FP32 && io[i] != TINY_BF16 && io[i] != TINY_FP16) return false;
  if (!dw_geometry(cv, &d) || !(cv->W.dtype == TINY_FP32 || cv->W.dtype == TINY_BF16) || !cc_q8_act(c, &cv->X, &za))
    return false;
  int zo = cc_q8_out_zo(cv->epi, cv->nepi, cv->Y.dtype);
  int xbuf = cc_q8_whole(c, r, &cv->X, cv->n * cv->c * cv->h * cv->w, cv->epi, cv->nepi);
  int ybuf = cc_q8_whole(c, r, &cv->Y, cv->n * cv->c * d.oh * d.ow, cv->epi, cv->nepi);
  const cc_q8_plan *hp = c->q8;
  if (hp && xbuf >= 0 && hp->hold[xbuf] >= 0) d.held_in = true, d.za = hp->hold[xbuf];
  if (hp && ybuf >= 0 && zo >= 0 && hp->hold[ybuf] == zo) d.held_out = true, d.zo = zo;
  d.packed = prepacked;
  d.zb = d.held_in ? d.za : za;
  dw_vnni_plan(cv, &d, dw_vec_epi(cv));
  ut_str task;
  ut_str_init(&task);
  ut_str_printf(&task, "typedef struct { const char *x; char *y; const void *w; const void *const *ep; long np; int nt, err, nan; } %s_dwx;\n", fn);
  dw_pad(&task, fn, cv, &d);
  bool ok = true;
  for (int i = 0; i < 2 && ok; i++) {
    if (DW_ISA[i].check) ut_str_puts(&task, "#ifdef HPRT_X86\n");
    ok = dw_task(&task, fn, cv, &d, i);
    if (DW_ISA[i].check) ut_str_puts(&task, "#endif\n");
  }
  if (ok && d.vnni) {
    ut_str_puts(&task, "#ifdef HPRT_X86\n");
    ok = dw_task_vnni(&task, fn, cv, &d);
    ut_str_puts(&task, "#endif\n");
  }
  ut_str_printf(&task, "static hprt_fn %s_dwsel(const void *w, int vnni) { /* the widest variant this CPU runs */\n  (void)w, (void)vnni;\n"
                       "#ifdef HPRT_X86\n  __builtin_cpu_init();\n", fn);
  if (d.vnni) /* the weight's int8 form valid (dw_wpack's flag) */
    ut_str_printf(&task, "  if (vnni && ((const int32_t *)w)[%" PRId64 "L] && __builtin_cpu_supports(\"avx512vbmi\") && __builtin_cpu_supports(\"avx512vnni\") &&\n"
                         "      %s) return %s_dwt_vnni;\n",
                  cv->c * cv->kh * cv->kw + cv->c * cv->kh + cv->c, DW_ISA[0].check, fn);
  for (int i = 0; DW_ISA[i].check; i++) ut_str_printf(&task, "  if (%s) return %s_dwt%s;\n", DW_ISA[i].check, fn, DW_ISA[i].sfx);
  ut_str_printf(&task, "#endif\n  return %s_dwt;\n}\n", fn);
  if (ok) {
    const fn_kernel *K = &c->f->kernels[r];
    char wsrc[96];
    if (prepacked) {
      dw_wpack(out, fn, cv, d.vnni);
      pk->n = 2, pk->slot[1] = cv->W.slot, pk->key[1][0] = 0;
      snprintf(wsrc, sizeof wsrc, "(const char *)bufs[%d]", K->nreads + K->nwrites + 1);
    } else
      snprintf(wsrc, sizeof wsrc, "(const char *)bufs[%d] + %" PRId64 "L * %d", cv->W.slot, cv->W.offset,
               tiny_dtype_size(cv->W.dtype));
    cc_q8_scratch(out);
    ut_str_puts(out, task.buf);
    ut_str_printf(out, "/* the int8 depthwise kernel (the input %s, the output %s) */\n",
                  d.held_in ? "held as bytes" : "as stored", d.held_out ? "held as bytes" : "as stored");
    ut_str_printf(out, "static int %s_q8(hprt_pool *pool, void *const *bufs) {\n", fn);
    cc_ep_array(out, cv->epi, cv->nepi);
    ut_str_printf(out,
                  "  %s_dwx cx = {(const char *)bufs[%d] + %" PRId64 "L * %d, (char *)bufs[%d] + %" PRId64 "L * %d,\n"
                  "               %s, ep, %" PRId64 "L, 1, 0};\n"
                  "  cx.nt = hprt_pool_size(pool) > 1 ? 4 * hprt_pool_size(pool) : 1;\n"
                  "  if (cx.nt > cx.np) cx.nt = (int)cx.np;\n"
                  "  hprt_pool_run(pool, cx.nt, %s_dwsel(cx.w, 1), &cx);\n"
                  "  if (cx.nan && !cx.err) hprt_pool_run(pool, cx.nt, %s_dwsel(cx.w, 0), &cx); /* a NaN in x: the fp32 variant */\n"
                  "  return cx.err ? 2 : 0;\n}\n",
                  fn, cv->X.slot, cv->X.offset, d.held_in ? 1 : tiny_dtype_size(cv->X.dtype), cv->Y.slot, cv->Y.offset,
                  d.held_out ? 1 : tiny_dtype_size(cv->Y.dtype), wsrc, cv->n * cv->c, fn, fn);
    if (c->q8) c->q8->k[r] = (cc_q8_fact){.q8 = true, .xbuf = xbuf, .ybuf = ybuf, .zo = zo, .held_in = d.held_in, .held_out = d.held_out};
  }
  ut_str_free(&task);
  return ok;
}
