/* cgen_conv.c — the conv front end of the CPU generator: which kernel a
 * conv spec goes to (depthwise, direct, Winograd, bf16 on channel or
 * column pairs, AMX, the implicit GEMM), its checks, and the conv as the
 * contraction cg_mm that cgen_gemm.c's driver emits.
 * Needs: cgen_int.h (the spec helpers, the direct / Winograd / depthwise
 * kernels' rules), cgen_gemm_int.h (cg_mm, cg_mm_gen).
 * Gives: cgen_conv, cgen_conv_direct, cgen_conv_wino_ok, cgen_conv_rt_ok,
 * cg_conv_bf16_asked.
 */
#include <string.h>

#include "backend/c/cgen_int.h"

#include "backend/c/cgen_gemm_int.h"

/* cgen_int.h: tune.bf16, or bf16 operands with tune.bf16_native. */
bool cg_conv_bf16_asked(const cgen_conv_spec *s) {
  return s->tune.bf16 || (s->tune.bf16_native && s->x_dtype == TINY_BF16 && s->w_dtype == TINY_BF16);
}

static bool conv_wino(const cgen_conv_spec *s) {
  return s->tune.conv_algo == CGEN_CONV_WINO || s->tune.conv_algo == CGEN_CONV_WINO2 || s->tune.conv_algo == CGEN_CONV_WINO4;
}

/* Does conv s, with fewer than CG_BF16_MIN_ICG input channels per group
 * (a stem), go to the implicit GEMM's AMX variant on channel pairs
 * (tune.amx: this host has AMX; an AVX-512 variant; a size where AMX pays;
 * neither the direct kernel nor Winograd asked for)?  On the AMX host the
 * column-pair direct kernel (conv_bf16_cols) loses even to fp32: vdpbf16ps
 * issues at half fp32's FMA rate there.  Only with 32 output channels a
 * group and 2048 multiply-adds a pixel (output channels x padded depth):
 * 2 threads, min of 100, bf16 before -> AMX: ResNet-50's 7x7/2 3->64
 * (12544 a pixel) 1.38 -> 0.38 ms, 3x3/1 3->64 at 224 (2304) 1.6 -> 0.95;
 * MobileNetV2's 3x3/2 3->32 (1152) 0.09 -> 0.105 and PP-OCR's 3->16 at 640
 * 0.44 -> 0.93 lose (a half-empty tile, too little depth to pay). */
static bool conv_amx_stem(const cgen_conv_spec *s) {
  int64_t oh, ow;
  if (!s->tune.amx || s->c / s->groups >= CG_BF16_MIN_ICG || !(cg_isa_set(&s->tune) >> CGEN_ISA_AVX512 & 1u)) return false;
  if (s->tune.conv_algo == CGEN_CONV_DIRECT || conv_wino(s) || !cgen_conv_out_hw(s, &oh, &ow)) return false;
  int64_t icg2 = (s->c / s->groups + 1) / 2 * 2, ocg = s->oc / s->groups, kp = icg2 * s->kh * s->kw;
  return ocg >= 32 && ocg * kp >= 2048 && cg_amx_pays(ocg, oh * ow, kp);
}

/* Does conv s multiply in bf16 (tune.bf16, or bf16 storage and
 * tune.bf16_native)?  Not with fewer than 16 input
 * channels per group: the pairs' interleave and a half-empty last pair cost
 * more than bf16 saves (MobileNetV2's 3-channel stem: 0.11 ms fp32 direct,
 * 0.27 ms bf16); such convs pair columns instead (conv_bf16_cols). */
static bool conv_bf16(const cgen_conv_spec *s) {
  return cg_conv_bf16_asked(s) && (s->c / s->groups >= CG_BF16_MIN_ICG || conv_amx_stem(s));
}

/* Does conv s, with fewer input channels than conv_bf16 takes, multiply in
 * bf16 on the direct kernel over column pairs (cg_dconv_cols_ok: a stem's
 * 7x7 row in 4 vdpbf16ps where fp32 takes 7 FMAs)?  Not where the implicit
 * GEMM or Winograd is asked for, nor without an AVX-512 variant. */
static bool conv_bf16_cols(const cgen_conv_spec *s) {
  const char *why;
  if (!cg_conv_bf16_asked(s) || conv_wino(s) || s->tune.conv_algo == CGEN_CONV_GEMM || conv_amx_stem(s)) return false;
  return (cg_isa_set(&s->tune) >> CGEN_ISA_AVX512 & 1u) && cg_dconv_cols_ok(s, &why);
}

bool cgen_conv_wino_ok(const cgen_conv_spec *s, const char **why) {
  if (conv_bf16(s)) return *why = "bf16 multiplication", false;
  return cg_wino_applies(s, why);
}

bool cgen_conv_direct(const cgen_conv_spec *s, const char **why) {
  if (s->n_expr || s->h_expr || s->w_expr) return cg_dconv_rt_ok(s, why); /* sizes at run time: direct or refused */
  if (conv_wino(s)) {
    *why = "winograd";
    return false;
  }
  if (s->tune.splitk > 1) return *why = "split-K: the implicit GEMM", false;
  if (conv_bf16_cols(s)) return cg_dconv_cols_ok(s, why);
  if (conv_amx_stem(s)) return *why = "bf16 with AMX, few input channels: the implicit GEMM's AMX variant", false;
  if (conv_bf16(s)) { /* the direct kernel on channel pairs (cgen_dconv.c) where cg_dconv_plan takes the pair view */
    cgen_conv_spec q = cg_dconv_pairs(s);
    bool avx512 = cg_isa_set(&s->tune) >> CGEN_ISA_AVX512 & 1u;
    /* with AMX (tune.amx: this host has it) the implicit GEMM's AMX variant
     * (cgen_amx.c) beats the direct kernels: 1024->256 1x1 @14, 2 threads,
     * 0.08 ms against 0.49 direct (bench/amx.py) */
    int64_t oh, ow;
    bool amx_size = cgen_conv_out_hw(s, &oh, &ow) && cg_amx_pays(s->oc / s->groups, oh * ow, s->c / s->groups * s->kh * s->kw);
    if (avx512 && s->tune.amx && amx_size && s->tune.conv_algo != CGEN_CONV_DIRECT) {
      *why = "bf16 with AMX: the implicit GEMM's AMX variant";
      return false;
    }
    /* few output channels, not a multiple of 16: pixels in the lanes (cgen_dconv_px.c) */
    if (avx512 && s->tune.conv_algo != CGEN_CONV_GEMM && cg_dconv_px_ok(s, why)) return true;
    /* A 1x1 window goes by the fp32 rule on the pair view (cg_dconv_plan):
     * pixels the GEMM's vectors would pad (7x7), or 256 pairs (512 input
     * channels) and more.  Measured at 2 threads, bf16 GEMM -> direct:
     * 2048->512 @7 0.62 -> 0.47 ms, 512->2048 @7 0.60 -> 0.47, 1024->256
     * @14 0.52 -> 0.49, 512->128 @28 even; 256->64 @56 0.57 -> 0.60 and
     * 64->256 @56 0.50 -> 0.60 lose (128 and 32 pairs: stay GEMM). */
    if (!avx512 || s->tune.conv_algo == CGEN_CONV_GEMM || !cg_dconv_plan(&q, why)) {
      *why = "bf16: the implicit GEMM's vdpbf16ps kernel";
      return false;
    }
    *why = s->kw <= s->stride[1] ? "bf16, 1x1: the direct kernel on channel pairs"
                                 : "bf16, overlapping windows: the direct kernel on channel pairs";
    return true;
  }
  if (cg_dw_applies(s)) {
    *why = "depthwise: the depthwise kernel";
    return false;
  }
  if (!(cg_isa_set(&s->tune) >> CGEN_ISA_AVX512 & 1u)) {
    *why = "no AVX-512 variant";
    return false;
  }
  return cg_dconv_plan(s, why);
}

bool cgen_conv_rt_ok(const cgen_conv_spec *s, const char **why) {
  if (cg_dw_applies(s)) return *why = "sizes read at run time: the depthwise kernel", true;
  return cg_dconv_rt_ok(s, why);
}

harp_status cgen_conv(harp_error *e, const cgen_conv_spec *s, const char *fn, ut_str *out) {
  if (!s || !out) return ut_fail(e, HARP_E_INVALID_ARG, NULL, "cgen_conv: NULL argument");
  int64_t oh, ow;
  if (s->n < 1 || s->c < 1 || s->h < 1 || s->w < 1 || s->oc < 1 || s->kh < 1 || s->kw < 1 || s->groups < 1)
    return ut_fail(e, HARP_E_INVALID_ARG, NULL, "cgen_conv: sizes must be >= 1");
  for (int i = 0; i < 4; i++)
    if (s->pad[i] < 0) return ut_fail(e, HARP_E_INVALID_ARG, NULL, "cgen_conv: negative padding");
  if (s->c % s->groups || s->oc % s->groups)
    return ut_fail(e, HARP_E_INVALID_ARG, NULL, "cgen_conv: channels not divisible by groups");
  if (!cgen_conv_out_hw(s, &oh, &ow)) return ut_fail(e, HARP_E_INVALID_ARG, NULL, "cgen_conv: window does not fit");
  if (s->n * s->c * s->h * s->w >= (1L << 31) || s->h + s->pad[0] + s->pad[2] >= (1L << 20) ||
      s->w + s->pad[1] + s->pad[3] >= (1L << 20))
    return ut_fail(e, HARP_E_LIMIT, NULL, "cgen_conv: input too large for 32-bit gather indices");
  const char *why;
  if (conv_wino(s) && !cgen_conv_wino_ok(s, &why))
    return ut_fail(e, HARP_E_UNSUPPORTED, NULL, "cgen_conv: winograd asked for, but %s", why);
  if (s->tune.splitk && (s->tune.splitk != 1 && !cgen_conv_splitk_ok(s, &why)))
    return ut_fail(e, HARP_E_UNSUPPORTED, NULL, "cgen_conv: splitk %d, but %s", s->tune.splitk, why);
  if ((s->n_expr || s->h_expr || s->w_expr) && !cgen_conv_rt_ok(s, &why))
    return ut_fail(e, HARP_E_UNSUPPORTED, NULL, "cgen_conv: sizes at run time, but %s", why);
  if (cg_dw_applies(s)) return cg_dwconv(e, s, fn, out);
  cg_mm p;
  memset(&p, 0, sizeof p);
  int64_t g = s->groups, icg = s->c / g, ocg = s->oc / g, P = oh * ow, kd = icg * s->kh * s->kw;
  p.conv = true;
  p.nb[0] = s->n, p.nb[1] = g;
  p.M = ocg, p.N = P, p.K = kd;
  p.adt = s->w_dtype, p.bdt = s->x_dtype, p.cdt = s->y_dtype;
  p.a_sb[0] = 0, p.a_sb[1] = ocg * kd, p.a_sm = kd, p.a_sk = 1;
  p.b_sn = 1; /* unused by the conv packer */
  p.c_sb[0] = s->oc * P, p.c_sb[1] = ocg * P, p.c_sm = P, p.c_sn = 1;
  p.bias_sb1 = ocg;
  p.n_epi = s->n_epi;
  if (p.n_epi > 0 && p.n_epi <= CGEN_MAX_EPI) memcpy(p.epi, s->epi, sizeof(cgen_epi) * (size_t)p.n_epi);
  for (int i = 0; i < p.n_epi && i < CGEN_MAX_EPI; i++) {
    cgen_epi *ep = &p.epi[i];
    if (ep->kind == CGEN_EPI_BIAS_N)
      return ut_fail(e, HARP_E_UNSUPPORTED, NULL, "cgen_conv: bias along N (spatial) is not a conv epilogue");
    if (ep->kind == CGEN_EPI_RESIDUAL) ep->s_b0 = p.c_sb[0], ep->s_b1 = p.c_sb[1], ep->s_m = P, ep->s_n = 1;
  }
  p.tune = s->tune;
  p.tune.bf16 = conv_bf16(s) || conv_bf16_cols(s);
  p.prepack_a = s->prepack_w;
  p.cv_c = s->c, p.cv_h = s->h, p.cv_w = s->w, p.cv_icg = icg, p.cv_kh = s->kh, p.cv_kw = s->kw;
  p.cv_sh = s->stride[0], p.cv_sw = s->stride[1], p.cv_pt = s->pad[0], p.cv_pl = s->pad[1];
  p.cv_dh = s->dil[0], p.cv_dw = s->dil[1], p.cv_ow = ow;
  p.cs = s;
  p.rt = s->n_expr || s->h_expr || s->w_expr; /* the variants beside the AVX-512 direct kernel's (cgen_gemm_rt.c) */
  p.wino = conv_wino(s);
  p.direct = cgen_conv_direct(s, &why);
  return cg_mm_gen(e, &p, fn, out);
}
