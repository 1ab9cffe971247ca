/* cgen_dconv_px.c — the bf16 direct convolution with output pixels in the
 * lanes, for a conv with few output channels that are not a multiple of 16
 * (PP-OCR's 96 -> 24 3x3 head convs at 160x160): cgen_dconv.c's tiles of
 * 16 or 32 output channels leave lanes empty there (24 of 32).
 * Needs: cgen_int.h (vector layer, epilogue steps, CG_BF16_ATTR / CG_BF16_IX).
 * Gives: cg_dconv_px_ok, cg_dconv_px_variant (the AVX-512 variant of a
 * cgen_conv kernel under --precision bf16), where a row's vectors of 16
 * pixels fill at least as many lanes as the output channels would.
 *
 * Shape of the emitted code:
 *   the weight as pair words Wp[c2][kh][kw][oc] = {bf16(w[oc][2 c2]),
 *     bf16(w[oc][2 c2 + 1])} (the odd last channel with 0), per call or
 *     once (prepack_w);
 *   the input as zero-padded pair planes Xp[n][c2][hp][wp] of the same
 *     words, one pool run, a task per (image, pair, block of rows);
 *   a task per (image, output row): per vector of 16 output pixels, one
 *     fp32 accumulator per output channel; per (c2, kh, kw) one load of 16
 *     input words and a vdpbf16ps per output channel with its weight word
 *     broadcast; then per output channel the epilogue and a store of 16
 *     contiguous pixels (NCHW; the row's last vector masked). */
#include <stdio.h>

#include "backend/c/cgen_int.h"

#define PX_ILV_ROWS 8 /* padded rows per interleave task */

/* The geometry of conv s seen by this kernel. */
typedef struct px {
  int64_t C2, OH, OW, HP, WP, KHW, OC;
} px;

static void geometry(const cgen_conv_spec *s, px *g) {
  cgen_conv_out_hw(s, &g->OH, &g->OW);
  g->C2 = (s->c + 1) / 2, g->OC = s->oc, g->KHW = s->kh * s->kw;
  g->HP = s->h + s->pad[0] + s->pad[2];
  int64_t need = cg_rup(g->OW, 16) + s->kw - 1; /* the last vector's loads, any tap */
  g->WP = s->w + s->pad[1] + s->pad[3];
  if (g->WP < need) g->WP = need;
}

bool cg_dconv_px_ok(const cgen_conv_spec *s, const char **why) {
  px g;
  if (s->n_expr || s->h_expr || s->w_expr) return *why = "pixels in lanes: sizes read at run time", false;
  if (s->groups != 1 || s->c < CG_BF16_MIN_ICG) return *why = "pixels in lanes: one group, 16 input channels or more", false;
  if (s->oc % 16 == 0 || s->oc < 4 || s->oc > 24) return *why = "pixels in lanes: 4 to 24 output channels, not 16", false;
  if (s->stride[0] != 1 || s->stride[1] != 1 || s->dil[0] != 1 || s->dil[1] != 1 || s->kh * s->kw < 2)
    return *why = "pixels in lanes: stride 1, no dilation, a window", false;
  if (!cgen_conv_out_hw(s, &g.OH, &g.OW) || g.OW < 16) return *why = "pixels in lanes: rows of 16 outputs or more", false;
  /* the lanes a row fills (OW of 16 * ceil(OW / 16)) at least those the
   * output channels fill in tiles of 16 (24 of 32): a row of 20 stays */
  if (g.OW * ((s->oc + 15) / 16) < s->oc * ((g.OW + 15) / 16))
    return *why = "pixels in lanes: a row would fill fewer lanes than the output channels do", false;
  geometry(s, &g);
  if (s->n * g.C2 * g.HP * g.WP >= (1L << 29)) return *why = "pixels in lanes: input too large", false;
  return *why = "bf16, output channels not a multiple of 16: the direct kernel with pixels in lanes", true;
}

/* $P_xpack(W, d): the weight W (OIHW of wdt) as pair words d (above). */
static void emit_pack(cg_out *o, const cgen_conv_spec *s, const px *g) {
  char lo[200], hi[200], il[96], ih[96];
  snprintf(il, sizeof il, "(oc * %ldL + 2 * c) * %ldL + t", (long)s->c, (long)g->KHW);
  snprintf(ih, sizeof ih, "(oc * %ldL + 2 * c + 1) * %ldL + t", (long)s->c, (long)g->KHW);
  cg_scalar_ld(o, lo, sizeof lo, s->w_dtype, "w", il);
  cg_scalar_ld(o, hi, sizeof hi, s->w_dtype, "w", ih);
  cg_emit(o, "static void $P_xpack(const void *W, uint32_t *d) {\n");
  cg_emit(o, "  const %s *w = (const %s *)W;\n", cg_ctype(s->w_dtype), cg_ctype(s->w_dtype));
  cg_emit(o, "  for (long c = 0; c < %ldL; c++)\n    for (long t = 0; t < %ldL; t++)\n", (long)g->C2, (long)g->KHW);
  cg_emit(o, "      for (long oc = 0; oc < %ldL; oc++) {\n", (long)g->OC);
  cg_emit(o, "        float a = %s, b = 2 * c + 1 < %ldL ? %s : 0.0f;\n", lo, (long)s->c, hi);
  cg_emit(o, "        d[(c * %ldL + t) * %ldL + oc] = (uint32_t)$F_f2b(a) | (uint32_t)$F_f2b(b) << 16;\n      }\n}\n",
          (long)g->KHW, (long)g->OC);
}

/* $P_xilv(vc, task, tid): PX_ILV_ROWS padded rows of pair plane task /
 * nrc (image n, pair c) of Xp, zeros outside the input. */
static void emit_ilv(cg_out *o, const cgen_conv_spec *s, const px *g) {
  const char *sx = cg_vsuffix(s->x_dtype), *ct = cg_ctype(s->x_dtype);
  long nrc = (long)((g->HP + PX_ILV_ROWS - 1) / PX_ILV_ROWS), hw = (long)(s->h * s->w), W = (long)s->w;
  long pl = (long)s->pad[1];
  cg_emit(o, "static " CG_BF16_ATTR " void $P_xilv(void *vc, int task, int tid) {\n");
  cg_emit(o, "  const $P_xctx *cx = (const $P_xctx *)vc;\n  (void)tid;\n");
  cg_emit(o, "  long q = task / %ldL, r0 = task %% %ldL * %dL, r1 = r0 + %dL < %ldL ? r0 + %dL : %ldL;\n", nrc, nrc,
          PX_ILV_ROWS, PX_ILV_ROWS, (long)g->HP, PX_ILV_ROWS, (long)g->HP);
  cg_emit(o, "  long n = q / %ldL, c = q %% %ldL;\n", (long)g->C2, (long)g->C2);
  cg_emit(o, "  const %s *s0 = (const %s *)cx->B + (n * %ldL + 2 * c) * %ldL, *s1 = s0 + %ldL;\n", ct, ct, (long)s->c, hw, hw);
  cg_emit(o, "  int odd = 2 * c + 1 >= %ldL;\n", (long)s->c);
  cg_emit(o, "  const __m512i ix = " CG_BF16_IX ";\n");
  cg_emit(o, "  for (long r = r0; r < r1; r++) {\n");
  cg_emit(o, "    int *d = cx->Xp + (q * %ldL + r) * %ldL;\n", (long)g->HP, (long)g->WP);
  cg_emit(o, "    long ih = r - %ldL;\n", (long)s->pad[0]);
  cg_emit(o, "    if (ih < 0 || ih >= %ldL) { memset(d, 0, %ldUL); continue; }\n", (long)s->h, (long)g->WP * 4);
  if (pl) cg_emit(o, "    memset(d, 0, %ldUL);\n", pl * 4);
  cg_emit(o, "    for (long i = 0; i < %ldL; i += 16) {\n", W);
  cg_emit(o, "      int k = %ldL - i < 16 ? (int)(%ldL - i) : 16;\n", W, W);
  cg_emit(o, "      __m512 x0 = k == 16 ? $P_ld%s(s0 + ih * %ldL + i) : $P_ldn%s(s0 + ih * %ldL + i, k);\n", sx, W, sx, W);
  cg_emit(o, "      __m512 x1 = odd ? _mm512_setzero_ps() : k == 16 ? $P_ld%s(s1 + ih * %ldL + i) : $P_ldn%s(s1 + ih * %ldL + i, k);\n",
          sx, W, sx, W);
  cg_emit(o, "      __m512i p = _mm512_permutexvar_epi16(ix, (__m512i)_mm512_cvtne2ps_pbh(x1, x0));\n");
  cg_emit(o, "      _mm512_mask_storeu_epi32(d + %ldL + i, (__mmask16)((1u << k) - 1u), p);\n    }\n", pl);
  if (g->WP > pl + W) cg_emit(o, "    memset(d + %ldL, 0, %ldUL);\n", pl + W, ((long)g->WP - pl - W) * 4);
  cg_emit(o, "  }\n}\n");
}

/* Output channel k's epilogue and store of the vector x at pixel
 * oh * OW + ow (cnt valid pixels: 16, or the C variable cnt). */
static void emit_store(cg_out *o, const cgen_conv_spec *s, const px *g, int k) {
  long ohw = (long)(g->OH * g->OW);
  char kx[16];
  snprintf(kx, sizeof kx, "%dL", k);
  cg_emit(o, "    { __m512 x = a%d; long at = %ldL + oh * %ldL + ow;\n", k, (long)k * ohw, (long)g->OW);
  for (int i = 0; i < s->n_epi; i++) {
    const cgen_epi *ep = &s->epi[i];
    if (cg_emit_epi_common(o, ep, i, kx, "x")) continue;
    if (ep->kind == CGEN_EPI_RESIDUAL) {
      const char *et = cg_ctype(ep->dtype), *sx = cg_vsuffix(ep->dtype);
      cg_emit(o, "      { const %s *rp = (const %s *)tt->ep[%d] + at;\n", et, et, i);
      cg_emit(o, "        x = x %s (cnt == 16 ? $P_ld%s(rp) : $P_ldn%s(rp, cnt)); }\n", ep->mul ? "*" : "+", sx, sx);
    }
  }
  const char *yt = cg_ctype(s->y_dtype), *ys = cg_vsuffix(s->y_dtype);
  cg_emit(o, "      %s *yq = (%s *)tt->y + at;\n", yt, yt);
  cg_emit(o, "      if (cnt == 16) $P_st%s(yq, x); else $P_stn%s(yq, x, cnt); }\n", ys, ys);
}

/* $P_xtask(vc, task, tid): output row task % OH of image task / OH. */
static void emit_task(cg_out *o, const cgen_conv_spec *s, const px *g) {
  long ohw = (long)(g->OH * g->OW), plane = (long)(g->HP * g->WP);
  cg_emit(o, "static " CG_BF16_ATTR " void $P_xtask(void *vc, int task, int tid) {\n");
  cg_emit(o, "  const $P_xctx *cx = (const $P_xctx *)vc;\n  (void)tid;\n");
  cg_emit(o, "  long n = task / %ldL, oh = task %% %ldL;\n", (long)g->OH, (long)g->OH);
  cg_emit(o, "  $P_xtt t_, *tt = &t_;\n");
  cg_emit(o, "  tt->y = (%s *)cx->C + n * %ldL;\n", cg_ctype(s->y_dtype), (long)g->OC * ohw);
  for (int i = 0; i < s->n_epi; i++) {
    const cgen_epi *ep = &s->epi[i];
    if (ep->kind == CGEN_EPI_RESIDUAL)
      cg_emit(o, "  tt->ep[%d] = (const %s *)cx->ep[%d] + n * %ldL;\n", i, cg_ctype(ep->dtype), i, (long)g->OC * ohw);
    else cg_emit(o, "  tt->ep[%d] = cx->ep[%d];\n", i, i);
  }
  cg_emit(o, "  const int *xb = cx->Xp + n * %ldL + oh * %ldL;\n", (long)g->C2 * plane, (long)g->WP);
  cg_emit(o, "  for (long ow = 0; ow < %ldL; ow += 16) {\n", (long)g->OW);
  cg_emit(o, "    int cnt = %ldL - ow < 16 ? (int)(%ldL - ow) : 16;\n", (long)g->OW, (long)g->OW);
  for (int k = 0; k < (int)g->OC; k++) cg_emit(o, "    __m512 a%d = _mm512_setzero_ps();\n", k);
  cg_emit(o, "    const int *xc = xb + ow;\n    const int *wc = (const int *)cx->Wp;\n");
  cg_emit(o, "    for (long c = 0; c < %ldL; c++, xc += %ldL, wc += %ldL) {\n", (long)g->C2, plane, (long)(g->KHW * g->OC));
  for (int kh = 0; kh < (int)s->kh; kh++)
    for (int kw = 0; kw < (int)s->kw; kw++) {
      int t = kh * (int)s->kw + kw;
      cg_emit(o, "      { __m512bh xv = (__m512bh)_mm512_loadu_si512(xc + %ldL);\n", (long)(kh * g->WP + kw));
      for (int k = 0; k < (int)g->OC; k++)
        cg_emit(o, "        a%d = _mm512_dpbf16_ps(a%d, (__m512bh)_mm512_set1_epi32(wc[%ld]), xv);\n", k, k,
                (long)t * (long)g->OC + k);
      cg_emit(o, "      }\n");
    }
  cg_emit(o, "    }\n");
  for (int k = 0; k < (int)g->OC; k++) emit_store(o, s, g, k);
  cg_emit(o, "  }\n}\n");
}

harp_status cg_dconv_px_variant(harp_error *e, cg_out *o, const cgen_conv_spec *s) {
  px g;
  const char *why;
  if (!cg_dconv_px_ok(s, &why)) return ut_fail(e, HARP_E_INTERNAL, NULL, "cgen_conv: %s", why);
  geometry(s, &g);
  long xbytes = (long)(s->n * g.C2 * g.HP * g.WP) * 4, wbytes = (long)(g.C2 * g.KHW * g.OC) * 4;
  long nilv = (long)(s->n * g.C2) * (long)((g.HP + PX_ILV_ROWS - 1) / PX_ILV_ROWS);
  cg_emit_isa_helpers(o);
  cg_emit(o, "/* direct conv (%s): %ld output channels a vector of 16 pixels, %ld x %ld padded pair planes */\n", why,
          (long)g.OC, (long)g.HP, (long)g.WP);
  cg_emit(o, "typedef struct { const void *B; void *C; const void *const *ep; const uint32_t *Wp; int *Xp; hprt_scratch sc; } $P_xctx;\n");
  cg_emit(o, "typedef struct { void *y; const void *ep[%d]; } $P_xtt;\n", CGEN_MAX_EPI);
  emit_pack(o, s, &g);
  emit_ilv(o, s, &g);
  emit_task(o, s, &g);
  if (s->prepack_w) {
    cg_emit(o, "static $T long $P_pack_a_bytes_run(void) { return %ldL; }\n", wbytes);
    cg_emit(o, "static $T int $P_pack_a_run(hprt_pool *pool, const void *A, void *Ap) {\n");
    cg_emit(o, "  (void)pool;\n  $P_xpack(A, (uint32_t *)Ap);\n  return 0;\n}\n");
  }
  cg_emit(o, "static $T int $P_run(hprt_pool *pool, const void *A, const void *B, void *C, const void *const *ep) {\n");
  cg_emit(o, "  $P_xctx cx;\n  cx.B = B; cx.C = C; cx.ep = ep;\n");
  cg_emit(o, "  if (hprt_scratch_get(pool, %ldUL, 0UL, &cx.sc)) return -1;\n", xbytes + (s->prepack_w ? 0 : wbytes));
  cg_emit(o, "  cx.Xp = (int *)cx.sc.shared;\n");
  if (s->prepack_w) cg_emit(o, "  cx.Wp = (const uint32_t *)A;\n");
  else cg_emit(o, "  uint32_t *wp = (uint32_t *)(cx.sc.shared + %ldL);\n  $P_xpack(A, wp);\n  cx.Wp = wp;\n", xbytes);
  cg_emit(o, "  hprt_pool_run(pool, %ld, $P_xilv, &cx);\n", nilv);
  cg_emit(o, "  hprt_pool_run(pool, %ld, $P_xtask, &cx);\n", (long)(s->n * g.OH));
  cg_emit(o, "  hprt_scratch_put(&cx.sc);\n  return 0;\n}\n");
  cg_emit(o, "#endif /* HPRT_X86 */\n");
  return HARP_OK;
}
