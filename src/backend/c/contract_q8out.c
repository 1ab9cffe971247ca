/* contract_q8out.c — the int8 kernel's epilogue as C (cc_q8_epilogue, the
 * steps on fp32 sums; cc_q8_rows, a task per output row), the output pass of a QDQ residual add run as the
 * kernel's post hook on each finished block in AVX-512 (cc_q8_post,
 * cc_q8_vec_steps), and the fp32 fallback of a kernel with an exact QDQ
 * Add step (cc_q8_slow, Q8_SLOW_SRC), which no template applies.
 * Needs: contract_q8_int.h (the job), contract_c.h (cc_ep_array).
 * Gives: cc_q8_load, cc_q8_span_step, cc_q8_epilogue, cc_q8_rows,
 * cc_q8_vec_steps, cc_q8_vec_ok, cc_q8_lut, cc_q8_out_table, cc_q8_post, cc_q8_slow (for contract_q8.c). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "backend/c/contract_q8_int.h"

/* A load of element `i` of a tensor of dtype dt at pointer expression p, as fp32. */
void cc_q8_load(char *buf, size_t cap, tiny_dtype dt, const char *p, const char *i) {
  if (dt == TINY_FP32) snprintf(buf, cap, "((const float *)%s)[%s]", p, i);
  else snprintf(buf, cap, "hp_%s(((const uint16_t *)%s)[%s])", dt == TINY_BF16 ? "b2f" : "h2f", p, i);
}

/* Step ep applied to span sp; true when ep rounds to bf16 / fp16 a value
 * they hold exactly (an integer of [-256, 256] / [-2048, 2048]: the steps
 * after a requantization's rint, clamp to bytes and the zero point taken
 * off), which is then left out. */
bool cc_q8_span_step(q8_span *sp, const ct_epi *ep) {
  switch (ep->kind) {
  case CT_EPI_RINT: sp->whole = true, sp->lo = floorf(sp->lo), sp->hi = ceilf(sp->hi); return false;
  case CT_EPI_RELU: sp->lo = fmaxf(sp->lo, 0.0f); return false;
  case CT_EPI_CLAMP:
    sp->lo = fmaxf(sp->lo, ep->lo), sp->hi = fminf(sp->hi, ep->hi);
    sp->whole = sp->whole && (isinf(ep->lo) || ep->lo == rintf(ep->lo)) && (isinf(ep->hi) || ep->hi == rintf(ep->hi));
    return false;
  case CT_EPI_SCALE: /* an integer added to an integer of a few thousand: exact in fp32 */
    if (ep->scale != 1.0f || ep->shift != rintf(ep->shift) || fabsf(ep->shift) > 65536.0f) break;
    sp->lo += ep->shift, sp->hi += ep->shift;
    return false;
  case CT_EPI_ROUND: {
    float m = ep->dtype == TINY_FP16 ? 2048.0f : 256.0f;
    return sp->whole && sp->lo >= -m && sp->hi <= m;
  }
  default: break;
  }
  *sp = (q8_span){false, -INFINITY, INFINITY};
  return false;
}

/* The exact QDQ Add step ep (CT_EPI_RESFMA, step i: its row r<i>) on `v` at
 * column `col`, onnxruntime's fused multiply-adds in its order, each fmaf
 * rounded once: R + rz is the residual's integer, exact; from bytes held
 * at zero point hz (>= 0), R + rz = byte + (rz - hz): the byte itself where
 * the zero points agree (a QDQ residual stream held as its u8 bytes). */
static void q8_resfma(ut_str *o, const ct_epi *ep, int i, int hz) {
  char pe[32], ld[160], r[200];
  snprintf(pe, sizeof pe, "r%d", i);
  if (hz >= 0) snprintf(ld, sizeof ld, "(float)r%d[col]", i);
  else cc_q8_load(ld, sizeof ld, ep->dtype, pe, "col");
  float add = hz >= 0 ? ep->rz - (float)hz : ep->rz;
  if (add != 0.0f) snprintf(r, sizeof r, "(%s + %#.9gf)", ld, (double)add);
  else snprintf(r, sizeof r, "%s", ld);
  if (ep->chain_outer)
    ut_str_printf(o, "    v = fmaf(v, %#.9gf, fmaf(%s, %#.9gf, %#.9gf));\n", (double)ep->scale, r, (double)ep->rscale, (double)ep->shift);
  else
    ut_str_printf(o, "    v = fmaf(%s, %#.9gf, fmaf(v, %#.9gf, %#.9gf));\n", r, (double)ep->rscale, (double)ep->scale, (double)ep->shift);
}

/* The epilogue steps from `from` on of j on the fp32 `v` of output row `t`,
 * column `col` of batch element x->bn (pre: the per-row biases loaded
 * before the loop, as b<i>, and the rows of the tensors added, laid out
 * like the output, as r<i>); false when a step is not one this kernel
 * applies.  A rounding to bf16 / fp16 of integers it holds exactly (the
 * bytes of a requantization, before a held output's store) is left out. */
bool cc_q8_epilogue(ut_str *o, const q8_job *j, int from, bool pre) {
  char ld[160];
  q8_span sp = {false, -INFINITY, INFINITY};
  for (int i = from; i < j->nepi; i++) {
    const ct_epi *ep = &j->epi[i];
    if (!pre && cc_q8_span_step(&sp, ep)) continue; /* a rounding that changes nothing */
    char pe[32];
    snprintf(pe, sizeof pe, "x->ep[%d]", i);
    bool bias = ep->kind == CT_EPI_BIAS_M || ep->kind == CT_EPI_BIAS_N;
    if (bias && (ep->kind == CT_EPI_BIAS_N) != j->bias_col) return false;
    if (ep->kind == CT_EPI_RESIDUAL || ep->kind == CT_EPI_RESFMA) {
      if (!j->res_ok) return false;
      bool hb = j->held_res && i == j->ri; /* its bytes, less their zero point */
      const char *t = hb ? "uint8_t" : ep->dtype == TINY_FP32 ? "float" : "uint16_t";
      if (pre)
        ut_str_printf(o, "  const %s *restrict r%d = (const %s *)x->ep[%d] + x->bn * %" PRId64 "L + (long)t * %" PRId64 "L;\n", t, i, t,
                      i, j->y_bs, j->ylen);
      else if (ep->kind == CT_EPI_RESFMA)
        q8_resfma(o, ep, i, hb ? j->rz : -1);
      else {
        snprintf(pe, sizeof pe, "r%d", i);
        if (hb) snprintf(ld, sizeof ld, "((float)r%d[col] - %d.0f)", i, j->rz);
        else cc_q8_load(ld, sizeof ld, ep->dtype, pe, "col");
        ut_str_printf(o, "    v = v %s %s;\n", ep->mul ? "*" : "+", ld);
      }
      continue;
    }
    if (pre) {
      cc_q8_load(ld, sizeof ld, ep->dtype, pe, j->bias_col ? "0" : "t");
      if (bias && j->bias_col) ut_str_printf(o, "  const void *ep%d = x->ep[%d];\n", i, i);
      else if (bias) ut_str_printf(o, "  const float b%d = %s;\n", i, ld);
      continue;
    }
    switch (ep->kind) {
      case CT_EPI_BIAS_M:
      case CT_EPI_BIAS_N:
        if (j->bias_col) {
          snprintf(pe, sizeof pe, "ep%d", i);
          cc_q8_load(ld, sizeof ld, ep->dtype, pe, "col");
        } else snprintf(ld, sizeof ld, "b%d", i);
        ut_str_printf(o, "    v = v %s %s;\n", ep->mul ? "*" : "+", ld);
        break;
      default:
        if (!cc_epi_scalar(o, ep)) return false;
    }
  }
  return true;
}

/* The body of a task over output row t that applies j's epilogue steps
 * from `from` on to the fp32 values at x->acc (laid out like the output)
 * and stores y (C type yt, store conversion ys); closes the function. */
bool cc_q8_rows(ut_str *o, const q8_job *j, int from, const char *yt, const char *ys) {
  if (!cc_q8_epilogue(o, j, from, true)) return false;
  ut_str_printf(o,
                "  const float *restrict acc = (const float *)x->acc + (long)t * %" PRId64 "L;\n"
                "  %s *restrict y = (%s *)x->y + (long)t * %" PRId64 "L;\n"
                "  for (long col = 0; col < %" PRId64 "L; col++) {\n    float v = acc[col];\n",
                j->ylen, yt, yt, j->ylen, j->ylen);
  if (!cc_q8_epilogue(o, j, from, false)) return false;
  ut_str_printf(o, "    y[col] = %s(v);\n  }\n}\n", ys);
  return true;
}

/* The AVX-512 form of q8_epilogue's steps from `from` on (the output pass's:
 * v the 16 values of columns col ..), where each is one it takes with the
 * same rounding: a residual (added, or onnxruntime's fused multiply-adds)
 * from bytes held, relu, clamps, rint, a product or a sum by a constant, a
 * rounding that changes nothing; the
 * comparisons as vmaxps / vminps (the scalar `lo > v ? lo : v`, NaN and -0
 * alike), a side the steps before already keep v within left out.  Step
 * norint (a RINT, or -1) is left out too: the conversion after rounds
 * (q8_late_rint), and the integers the steps after it add are summed into
 * *off instead (the clamps after them moved by it).  False, printing part
 * of it, for any other step. */
bool cc_q8_vec_steps(ut_str *o, const q8_job *j, int from, int norint, int *off) {
  q8_span sp = {false, -INFINITY, INFINITY};
  float sh = 0.0f; /* the sum left to the conversion */
  for (int i = from; i < j->nepi; i++) {
    const ct_epi *ep = &j->epi[i];
    q8_span before = sp;
    if (cc_q8_span_step(&sp, ep) || i == norint) continue; /* a rounding that changes nothing, or left to the conversion */
    if (norint >= 0 && i > norint && ep->kind == CT_EPI_SCALE) { /* q8_late_rint: an integer added */
      sh += ep->shift;
      continue;
    }
    bool res = ep->kind == CT_EPI_RESIDUAL || ep->kind == CT_EPI_RESFMA;
    if (res && !(j->held_res && i == j->ri && !(ep->kind == CT_EPI_RESIDUAL && ep->mul))) return false;
    if (res) { /* R + rz (RESFMA) or R (RESIDUAL): the byte less its zero point hz, plus rz for RESFMA */
      float add = ep->kind == CT_EPI_RESFMA ? ep->rz - (float)j->rz : -(float)j->rz;
      ut_str_printf(o, "      __m512 r = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(r%d + col))));\n", i);
      if (add != 0.0f) ut_str_printf(o, "      r = _mm512_add_ps(r, _mm512_set1_ps(%#.9gf));\n", (double)add);
      if (ep->kind == CT_EPI_RESIDUAL) ut_str_puts(o, "      v = _mm512_add_ps(v, r);\n");
      else if (ep->chain_outer)
        ut_str_printf(o, "      v = _mm512_fmadd_ps(v, _mm512_set1_ps(%#.9gf), _mm512_fmadd_ps(r, _mm512_set1_ps(%#.9gf), _mm512_set1_ps(%#.9gf)));\n",
                      (double)ep->scale, (double)ep->rscale, (double)ep->shift);
      else
        ut_str_printf(o, "      v = _mm512_fmadd_ps(r, _mm512_set1_ps(%#.9gf), _mm512_fmadd_ps(v, _mm512_set1_ps(%#.9gf), _mm512_set1_ps(%#.9gf)));\n",
                      (double)ep->rscale, (double)ep->scale, (double)ep->shift);
      continue;
    }
    switch (ep->kind) {
    case CT_EPI_RELU:
      if (!(before.lo >= 0.0f)) ut_str_printf(o, "      v = _mm512_max_ps(_mm512_set1_ps(%#.9gf), v);\n", (double)(0.0f - sh));
      break;
    case CT_EPI_RINT: ut_str_puts(o, "      v = _mm512_roundscale_ps(v, 4);\n"); break; /* rint: the current mode */
    case CT_EPI_SCALE: /* a product or a sum (both: the compilers may contract them into one fma) */
      if (ep->scale != 1.0f && ep->shift != 0.0f) return false;
      if (ep->scale != 1.0f) ut_str_printf(o, "      v = _mm512_mul_ps(v, _mm512_set1_ps(%#.9gf));\n", (double)ep->scale);
      if (ep->shift != 0.0f) ut_str_printf(o, "      v = _mm512_add_ps(v, _mm512_set1_ps(%#.9gf));\n", (double)ep->shift);
      break;
    case CT_EPI_CLAMP: /* vmaxps (lo, v) is v where v >= lo or NaN: a side the span keeps is left out */
      if (ep->lo != -INFINITY && !(before.lo >= ep->lo))
        ut_str_printf(o, "      v = _mm512_max_ps(_mm512_set1_ps(%#.9gf), v);\n", (double)(ep->lo - sh));
      if (ep->hi != INFINITY && !(before.hi <= ep->hi))
        ut_str_printf(o, "      v = _mm512_min_ps(_mm512_set1_ps(%#.9gf), v);\n", (double)(ep->hi - sh));
      break;
    default: return false;
    }
  }
  if (off) *off = (int)sh;
  return true;
}

/* The RINT of j's steps from `from` on that the conversion to bytes can do
 * (vcvtps2dq rounds as rint does): the last, where only relus, clamps to
 * integers, sums with small integers and roundings left out follow it (each
 * commutes with rint; the sums then added to the 16-bit integers) and the
 * steps end within [-zo, 255 - zo] (the bytes then packed with saturation,
 * exact); -1 if none. */
static int q8_late_rint(const q8_job *j, int from) {
  q8_span sp = {false, -INFINITY, INFINITY};
  int r = -1;
  float sh = 0.0f;
  for (int i = from; i < j->nepi; i++) {
    const ct_epi *ep = &j->epi[i];
    if (cc_q8_span_step(&sp, ep)) continue;
    bool whole = ep->kind == CT_EPI_RELU ||
                 (ep->kind == CT_EPI_CLAMP && (isinf(ep->lo) || ep->lo == rintf(ep->lo)) && (isinf(ep->hi) || ep->hi == rintf(ep->hi)));
    bool add = ep->kind == CT_EPI_SCALE && ep->scale == 1.0f && ep->shift == rintf(ep->shift) && fabsf(ep->shift) <= 1024.0f;
    if (ep->kind == CT_EPI_RINT) r = i, sh = 0.0f;
    else if (add) sh += ep->shift;
    else if (!whole) r = -1;
  }
  return r >= 0 && fabsf(sh) <= 1024.0f && sp.lo + (float)j->zo >= 0.0f && sp.hi + (float)j->zo <= 255.0f ? r : -1;
}

/* The int32 b of 16 values v as q8_post_vec converts them: rounded, plus
 * zo where the conversion rounds (nr >= 0), else (int32_t)(v + j's zo);
 * NaN lanes 0 (byte 0, as q8_convert stores a NaN). */
static void q8_post_cvt(ut_str *o, const q8_job *j, int nr, int zo) {
  if (nr >= 0)
    ut_str_printf(o, "      __m512i b = _mm512_maskz_add_epi32(_mm512_cmp_ps_mask(v, v, _CMP_ORD_Q), _mm512_cvtps_epi32(v), _mm512_set1_epi32(%d));\n", zo);
  else
    ut_str_printf(o, "      __m512i b = _mm512_maskz_cvttps_epi32(_mm512_cmp_ps_mask(v, v, _CMP_ORD_Q), _mm512_add_ps(v, _mm512_set1_ps(%d.0f)));\n", j->zo);
}

/* The last columns of the row short of 16 (col < n1) in the loops of
 * q8_post_vec: steps (printed on the 16 bytes at y + col) on masked loads,
 * the conversion q8_post_cvt's (nr, zo), a masked store;
 * col then n1 (AVX512VL; else the scalar loop after takes them). */
static void q8_post_tail(ut_str *o, const q8_job *j, const char *steps, int nr, int zo) {
  ut_str_puts(o, "#ifdef __AVX512VL__\n  if (col < n1) {\n      __mmask16 mk = (__mmask16)((1u << (n1 - col)) - 1u);\n");
  for (const char *p = steps, *q; *p; p = q + 1) { /* each load of 16 bytes masked */
    q = strchr(p, '\n');
    const char *ld = strstr(p, "_mm_loadu_si128((const __m128i *)(");
    if (ld && ld < q) ut_str_printf(o, "%.*s_mm_maskz_loadu_epi8(mk, (const void *)(%.*s\n", (int)(ld - p), p, (int)(q - ld - 34), ld + 34);
    else ut_str_printf(o, "%.*s\n", (int)(q - p), p);
  }
  q8_post_cvt(o, j, nr, zo);
  ut_str_puts(o, "      _mm_mask_storeu_epi8(y + col, mk, _mm512_cvtepi32_epi8(b));\n      col = n1;\n  }\n#endif\n");
}

/* The AVX-512 loops of <fn>_q8post (cc_q8_post) on the row's bytes y from
 * col to n1: 64 columns at a time where the conversion rounds (q8_late_rint:
 * four vectors packed to one 64-byte store), then 16; a NaN as byte 0.
 * False when a step has no vector form. */
static bool q8_post_vec(ut_str *o, const q8_job *j) {
  int nr = q8_late_rint(j, j->rq.post), off = 0;
  ut_str st; /* the steps on v, the 16 bytes of y at col */
  ut_str_init(&st);
  ut_str_puts(&st, "      __m512 v = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(y + col))));\n");
  if (j->rq.lo + j->rq.off) ut_str_printf(&st, "      v = _mm512_add_ps(v, _mm512_set1_ps(%d.0f));\n", j->rq.lo + j->rq.off);
  bool ok = cc_q8_vec_steps(&st, j, j->rq.post, nr, &off);
  int zo = j->zo + off; /* added to the rounded integers */
  if (ok) {
    ut_str_puts(o, "#if defined(__AVX512F__) && defined(__AVX512BW__)\n");
    if (nr >= 0) { /* cvtps2dq's NaN (INT_MIN) saturates to byte 0 */
      ut_str_printf(o, "  for (; col + 64 <= n1;) {\n    __m512i q[4];\n    for (int g = 0; g < 4; g++, col += 16) {\n%s"
                       "      q[g] = _mm512_cvtps_epi32(v);\n    }\n", st.buf);
      ut_str_puts(o, "    __m512i h0 = _mm512_packs_epi32(q[0], q[1]), h1 = _mm512_packs_epi32(q[2], q[3]);\n");
      if (zo) ut_str_printf(o, "    h0 = _mm512_adds_epi16(h0, _mm512_set1_epi16(%d)), h1 = _mm512_adds_epi16(h1, _mm512_set1_epi16(%d));\n", zo, zo);
      ut_str_puts(o, "    __m512i b = _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15),"
                     " _mm512_packus_epi16(h0, h1));\n    _mm512_storeu_si512(y + col - 64, b);\n  }\n");
    }
    ut_str_printf(o, "  for (; col + 16 <= n1; col += 16) {\n%s", st.buf);
    q8_post_cvt(o, j, nr, zo);
    ut_str_puts(o, "      _mm_storeu_si128((__m128i *)(y + col), _mm512_cvtepi32_epi8(b));\n  }\n");
    q8_post_tail(o, j, st.buf, nr, zo);
    ut_str_puts(o, "#endif\n");
  }
  ut_str_free(&st);
  return ok;
}

/* Whether every step of j's output pass from rq.post on has its AVX-512 form (cc_q8_vec_steps). */
bool cc_q8_vec_ok(const q8_job *j) {
  ut_str probe;
  ut_str_init(&probe);
  bool vec = cc_q8_vec_steps(&probe, j, j->rq.post, -1, NULL);
  ut_str_free(&probe);
  return vec;
}

/* gelu(x) = x Phi(x) as the templates' vector form computes it (cgen_emit.c's
 * emit_gelu, with libm's exp2f for their 2^t): h = 0.5 erfc(|x| / sqrt2) by
 * Numerical Recipes' erfcc, x h below 0, x - x h above. */
static float q8_gelu(float x) {
  static const float P[] = {-1.26551223f, 1.00002368f, 0.37409196f, 0.09678418f, -0.18628806f,
                            0.27886807f, -1.13520398f, 1.48851587f, -0.82215223f, 0.17087277f};
  const double L2E = 1.4426950408889634; /* log2 e */
  const float L = (float)L2E, s = (float)sqrt(L2E / 2), c = (float)(0.5 / sqrt(2.0) / sqrt(L2E / 2));
  float z = fabsf(x) * s, t = 1.0f / fmaf(z, c, 1.0f), p = P[9];
  for (int i = 8; i >= 0; i--) p = fmaf(p, t, P[i]);
  float y = fminf(3.40282347e38f, x) * (0.5f * t * exp2f(fmaf(-z, z, p * L)));
  return x < 0.0f ? y : x - y;
}

/* One step of a table's chain (q8_table) on v; false for a step that
 * reads a tensor or that it does not compute. */
static bool q8_table_step(const ct_epi *ep, float *pv) {
  float v = *pv;
  switch (ep->kind) {
  case CT_EPI_SCALE:
    if (ep->scale != 1.0f) v = v * ep->scale;
    if (ep->shift != 0.0f) v = v + ep->shift;
    break;
  case CT_EPI_DIV: v = v / ep->scale; break;
  case CT_EPI_GELU: v = q8_gelu(v); break;
  case CT_EPI_RINT: v = rintf(v); break;
  case CT_EPI_RELU: v = 0.0f > v ? 0.0f : v; break;
  case CT_EPI_CLAMP:
    if (ep->lo != -INFINITY) v = ep->lo > v ? ep->lo : v;
    if (ep->hi != INFINITY) v = ep->hi < v ? ep->hi : v;
    break;
  case CT_EPI_ROUND: /* exact on the integers of the half type's range (q8_int_steps'), else bf16's RNE */
    if (v == rintf(v) && fabsf(v) <= (ep->dtype == TINY_FP16 ? 2048.0f : 256.0f)) break;
    if (ep->dtype != TINY_BF16 || v != v) return false;
    uint32_t u;
    memcpy(&u, &v, 4);
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    memcpy(&v, &u, 4);
    break;
  default: return false;
  }
  *pv = v;
  return true;
}

/* The values j's output pass computes from each byte b of the kernel's
 * requantization (v = b + lo + off, then the steps from rq.post on), into
 * tv: where no step reads a tensor (a QDQ GELU: DQ, GELU, Q); else false. */
static bool q8_table(const q8_job *j, float tv[256]) {
  if (!j->rq.ok || j->rq.post < 0) return false;
  for (int b = 0; b < 256; b++) {
    float v = (float)b + (float)(j->rq.lo + j->rq.off);
    for (int i = j->rq.post; i < j->nepi; i++)
      if (!q8_table_step(&j->epi[i], &v)) return false;
    tv[b] = v;
  }
  return true;
}

/* The bytes j's output pass stores (cc_q8_post's scalar loop) for each
 * byte of the kernel's requantization, into lut: q8_table's values where
 * the output is held as the second requantization's bytes (zo). */
bool cc_q8_lut(const q8_job *j, uint8_t lut[256]) {
  float tv[256];
  if (j->zo < 0 || !q8_table(j, tv)) return false;
  for (int b = 0; b < 256; b++) {
    float v = tv[b], y = v + (float)j->zo;
    if (v == v && !(y >= 0.0f && y <= 255.0f)) return false; /* q8_post_zo's range, checked */
    lut[b] = v == v ? (uint8_t)(int32_t)y : 0;
  }
  return true;
}

/* The task <fn>_q8out over output row t of job j as one table lookup per
 * element (q8_table's fp32 values stored as yt through ys, or where the
 * output is held, cc_q8_lut's bytes), where the steps after the
 * requantization read no tensor and some has no vector form (a GELU);
 * false, printing nothing, elsewhere. */
bool cc_q8_out_table(ut_str *o, const char *fn, const q8_job *j, const char *yt, const char *ys) {
  float tv[256];
  uint8_t lut[256];
  if (cc_q8_vec_ok(j) || !q8_table(j, tv) || (j->held_out && !cc_q8_lut(j, lut))) return false;
  for (int b = 0; b < 256; b++)
    if (!isfinite(tv[b])) return false; /* printed as C literals */
  ut_str_printf(o, "static const %s %s_lut%s[256] = {", j->held_out ? "uint8_t" : "float", fn, j->held_out ? "" : "f");
  for (int b = 0; b < 256; b++) {
    ut_str_puts(o, b ? (b % 8 ? ", " : ",\n  ") : "\n  ");
    if (j->held_out) ut_str_printf(o, "%d", lut[b]);
    else ut_str_printf(o, "%a", (double)tv[b]);
  }
  ut_str_puts(o, "};\n");
  ut_str_printf(o, "static void %s_q8out(void *ctx, int t, int tid) {\n  (void)tid;\n  %s_q8ctx *x = (%s_q8ctx *)ctx;\n", fn, fn, fn);
  ut_str_printf(o,
                "  const uint8_t *restrict b = (const uint8_t *)x->acc + (long)t * %" PRId64 "L;\n"
                "  %s *restrict y = (%s *)x->y + (long)t * %" PRId64 "L;\n",
                j->ylen, j->held_out ? "uint8_t" : yt, j->held_out ? "uint8_t" : yt, j->ylen);
  if (j->held_out)
    ut_str_printf(o, "  for (long col = 0; col < %" PRId64 "L; col++) y[col] = %s_lut[b[col]];\n}\n", j->ylen, fn);
  else ut_str_printf(o, "  for (long col = 0; col < %" PRId64 "L; col++) y[col] = %s(%s_lutf[b[col]]);\n}\n", j->ylen, ys, fn);
  return true;
}

/* The table loop of <fn>_q8post on the row's bytes y from col to n1: with
 * AVX512_VBMI 64 bytes at a time (two vpermi2b over the table's halves,
 * a blend on each byte's top bit), then byte by byte. */
static void q8_post_lut(ut_str *o, const char *fn) {
  ut_str_printf(o, "#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VBMI__)\n"
                   "  for (; col + 64 <= n1; col += 64) {\n"
                   "    __m512i b = _mm512_loadu_si512(y + col);\n"
                   "    __m512i lo = _mm512_permutex2var_epi8(t0, b, t1), hi = _mm512_permutex2var_epi8(t2, b, t3);\n"
                   "    _mm512_storeu_si512(y + col, _mm512_mask_blend_epi8(_mm512_movepi8_mask(b), lo, hi));\n  }\n#endif\n"
                   "  for (; col < n1; col++) y[col] = %s_lut[y[col]];\n  }\n}\n", fn);
}

/* <fn>_q8post(ctx, m0, m1, n0, n1), the kernel's post hook (cgen_qgemm.h's
 * spec.post) where job j holds its output as bytes and requantizes twice
 * (a QDQ residual add): on the kernel's bytes of rows [m0, m1), columns
 * [n0, n1) of y, in place, the steps from rq.post on (as the output pass
 * applies them), while the block is in the thread's cache. */
bool cc_q8_post(ut_str *o, const char *fn, const q8_job *j) {
  uint8_t lut[256];
  bool table = !cc_q8_vec_ok(j) && cc_q8_lut(j, lut); /* steps without a vector form, on bytes alone: one table */
  if (table) {
    ut_str_printf(o, "static const uint8_t %s_lut[256] __attribute__((aligned(64))) = {", fn);
    for (int b = 0; b < 256; b++) ut_str_printf(o, "%s%d", b ? (b % 32 ? "," : ",\n  ") : "\n  ", lut[b]);
    ut_str_puts(o, "};\n");
  }
  ut_str_printf(o, "static void %s_q8post(void *ctx, long m0, long m1, long n0, long n1) {\n  %s_q8ctx *x = (%s_q8ctx *)ctx;\n", fn, fn, fn);
  if (table) {
    ut_str_printf(o, "  (void)x;\n#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VBMI__)\n"
                     "  const __m512i t0 = _mm512_load_si512(%s_lut), t1 = _mm512_load_si512(%s_lut + 64);\n"
                     "  const __m512i t2 = _mm512_load_si512(%s_lut + 128), t3 = _mm512_load_si512(%s_lut + 192);\n#endif\n",
                  fn, fn, fn, fn);
    ut_str_printf(o, "  for (long t = m0; t < m1; t++) {\n  uint8_t *restrict y = (uint8_t *)x->y + t * %" PRId64 "L;\n  long col = n0;\n",
                  j->ylen);
    q8_post_lut(o, fn);
    return true;
  }
  ut_str_puts(o, "  for (long t = m0; t < m1; t++) {\n");
  if (!cc_q8_epilogue(o, j, j->rq.post, true)) return false;
  /* the tensors' lines of the next block's row (the rows m1 - m0 on, as a task's next call
   * takes them): blocks of a few lines per row are no stream the hardware prefetches */
  for (int i = j->rq.post; i < j->nepi; i++)
    if (j->epi[i].kind == CT_EPI_RESIDUAL || j->epi[i].kind == CT_EPI_RESFMA)
      ut_str_printf(o, "  if (t + m1 - m0 < %" PRId64 "L)\n    for (const char *p = (const char *)(r%d + (m1 - m0) * %" PRId64 "L + n0),"
                       " *e = (const char *)(r%d + (m1 - m0) * %" PRId64 "L + n1) + 63; p < e; p += 64) __builtin_prefetch(p);\n",
                    j->yrows, i, j->ylen, i, j->ylen);
  ut_str_printf(o, "  uint8_t *restrict y = (uint8_t *)x->y + t * %" PRId64 "L;\n  long col = n0;\n", j->ylen);
  q8_post_vec(o, j); /* where every step has its vector form (compiled for AVX-512) */
  ut_str_printf(o, "  for (; col < n1; col++) {\n    float v = (float)y[col] + %d.0f;\n", j->rq.lo + j->rq.off);
  if (!cc_q8_epilogue(o, j, j->rq.post, false)) return false;
  /* a NaN (a NaN residual) stored as byte 0, as q8_convert does */
  ut_str_printf(o, "    y[col] = v == v ? (uint8_t)(int32_t)(v + %d.0f) : 0;\n  }\n  }\n}\n", j->zo);
  return true;
}

/* The sums of the fallback of an int8 kernel with an exact QDQ Add step
 * (q8_slow): one copy per unit, the sizes arguments, fp32 products and
 * sums of the operands as stored (fp32, bf16 or fp16: dtype code 0, 1, 2)
 * in plain loops, small C for the compiler (a conv template per kernel was
 * ~100 KB of C, the region's loop nest ~1 s of isl each).  A conv (a 1x1
 * conv in NCHW too, one row of pixels) a task per output channel of one
 * image; x W (W[k][n] at k wsk + n wsn) a task per row. */
static const char Q8_SLOW_SRC[] =
    "#ifndef HP_Q8_SLOW\n#define HP_Q8_SLOW\n"
    "static inline float hp_q8s_ld(const void *p, int t, long i) {\n"
    "  return t == 0 ? ((const float *)p)[i] : t == 1 ? hp_b2f(((const uint16_t *)p)[i]) : hp_h2f(((const uint16_t *)p)[i]);\n}\n"
    "typedef struct {\n  const void *x, *w;\n  float *y;\n  int xt, wt;\n"
    "  long c, h, wd, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow, m, n, k, wsk, wsn;\n} hp_q8s_arg;\n"
    "static void hp_q8s_conv(void *ctx, int o, int tid) {\n  (void)tid;\n  const hp_q8s_arg *a = (const hp_q8s_arg *)ctx;\n"
    "  float *y = a->y + (long)o * a->oh * a->ow;\n  for (long i = 0; i < a->oh * a->ow; i++) y[i] = 0.0f;\n"
    "  for (long c = 0; c < a->c; c++)\n    for (long ky = 0; ky < a->kh; ky++)\n      for (long kx = 0; kx < a->kw; kx++) {\n"
    "        float wv = hp_q8s_ld(a->w, a->wt, (((long)o * a->c + c) * a->kh + ky) * a->kw + kx);\n"
    "        for (long oy = 0; oy < a->oh; oy++) {\n          long iy = oy * a->sh - a->ph + ky * a->dh;\n"
    "          if (iy < 0 || iy >= a->h) continue;\n          for (long ox = 0; ox < a->ow; ox++) {\n"
    "            long ix = ox * a->sw - a->pw + kx * a->dw;\n"
    "            if (ix >= 0 && ix < a->wd) y[oy * a->ow + ox] += wv * hp_q8s_ld(a->x, a->xt, (c * a->h + iy) * a->wd + ix);\n"
    "          }\n        }\n      }\n}\n"
    "static void hp_q8s_xw(void *ctx, int r, int tid) {\n  (void)tid;\n  const hp_q8s_arg *a = (const hp_q8s_arg *)ctx;\n"
    "  float *y = a->y + (long)r * a->n;\n  for (long j = 0; j < a->n; j++) y[j] = 0.0f;\n"
    "  for (long k = 0; k < a->k; k++) {\n    float xv = hp_q8s_ld(a->x, a->xt, (long)r * a->k + k);\n"
    "    for (long j = 0; j < a->n; j++) y[j] += xv * hp_q8s_ld(a->w, a->wt, k * a->wsk + j * a->wsn);\n  }\n}\n"
    "#endif\n";

/* A dtype's code in Q8_SLOW_SRC. */
static int q8_dt(tiny_dtype t) { return t == TINY_FP32 ? 0 : t == TINY_BF16 ? 1 : 2; }

/* <fn>_q8slow(pool, bufs) of job j, whose epilogue has an exact QDQ Add
 * step (CT_EPI_RESFMA; no template applies it): the fallback where the
 * int8 kernel declines at run time (cc_emit_resfma), per batch element the
 * sums in fp32 (Q8_SLOW_SRC, exact integers as the kernel's below 2^24; a
 * NaN propagated) and the whole epilogue on them per output row, the same
 * steps as the output pass (its fmaf).  The tensors are read as stored: a
 * held buffer's kernel reaches it through <fn>_q8fb, on converted copies. */
bool cc_q8_slow(ut_str *o, const char *fn, const q8_job *j0) {
  q8_job j = *j0;
  j.held_in = j.held_out = j.held_res = false;
  j.rq.ok = false;
  const char *yt = j.Y.dtype == TINY_FP32 ? "float" : "uint16_t";
  const char *ys = j.Y.dtype == TINY_FP32 ? "" : j.Y.dtype == TINY_BF16 ? "hp_f2b" : "hp_f2h";
  ut_str_puts(o, Q8_SLOW_SRC);
  ut_str_printf(o, "static void %s_q8sl(void *ctx, int t, int tid) {\n  (void)tid;\n  %s_q8ctx *x = (%s_q8ctx *)ctx;\n", fn, fn, fn);
  if (!cc_q8_rows(o, &j, 0, yt, ys)) return false;
  const cgen_qgemm_spec *q = &j.q;
  int64_t oh = j.q.weight_a ? (q->conv.h + 2 * q->conv.ph - q->conv.dh * (q->conv.kh - 1) - 1) / q->conv.sh + 1 : 0;
  int64_t ow = j.q.weight_a ? (q->conv.w + 2 * q->conv.pw - q->conv.dw * (q->conv.kw - 1) - 1) / q->conv.sw + 1 : 0;
  ut_str_printf(o, "static int %s_q8slow(hprt_pool *pool, void *const *bufs) {\n  float *acc = (float *)malloc(%" PRId64 "UL * 4);\n"
                   "  if (!acc) return 2;\n", fn, j.y_bs);
  cc_ep_array(o, j.epi, j.nepi);
  ut_str_printf(o, "  for (long n = 0; n < %" PRId64 "L; n++) {\n"
                   "    hp_q8s_arg a = {(const char *)bufs[%d] + (%" PRId64 "L + n * %" PRId64 "L) * %d, (const char *)bufs[%d] + %" PRId64 "L * %d,"
                   " acc, %d, %d,\n                    %" PRId64 "L, %" PRId64 "L, %" PRId64 "L, %" PRId64 "L, %" PRId64 "L, %" PRId64 "L, %" PRId64
                   "L, %" PRId64 "L, %" PRId64 "L, %" PRId64 "L, %" PRId64 "L, %" PRId64 "L, %" PRId64 "L, %" PRId64 "L, %" PRId64 "L, %" PRId64
                   "L, %" PRId64 "L, %" PRId64 "L};\n",
                j.nb, j.X.slot, j.X.offset, j.x_bs, tiny_dtype_size(j.X.dtype), j.W.slot, j.W.offset, tiny_dtype_size(j.W.dtype),
                q8_dt(j.X.dtype), q8_dt(j.W.dtype), q->conv.c, q->conv.h, q->conv.w, q->conv.kh, q->conv.kw, q->conv.sh, q->conv.sw,
                q->conv.ph, q->conv.pw, q->conv.dh, q->conv.dw, oh, ow, q->m, q->n, q->k, q->w_kmajor ? q->n : 1,
                q->w_kmajor ? 1 : q->k);
  ut_str_printf(o, "    hprt_pool_run(pool, %d, hp_q8s_%s, &a);\n", (int)(j.q.weight_a ? q->m : j.yrows), j.q.weight_a ? "conv" : "xw");
  ut_str_printf(o, "    %s_q8ctx cx = {NULL, NULL, acc, (char *)bufs[%d] + (%" PRId64 "L + n * %" PRId64 "L) * %d, ep, 0, n};\n"
                   "    hprt_pool_run(pool, %d, %s_q8sl, &cx);\n  }\n  free(acc);\n  return 0;\n}\n",
                fn, j.Y.slot, j.Y.offset, j.y_bs, tiny_dtype_size(j.Y.dtype), (int)j.yrows, fn);
  return true;
}
