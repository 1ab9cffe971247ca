/* cgen_dconv_kern.c — the direct conv's emitted pieces (cgen_dconv.c has
 * the plan and the driver): the weight packer, the micro-kernel of a tile
 * pattern (row broadcasts into MR x NV accumulators, the 16x16 transposes
 * and the epilogue's stores), the kernel rows inside the input, and the
 * task of a conv of constant sizes.
 * Needs: cgen_int.h (templating, vector layer, epilogue steps),
 * cgen_dconv_int.h (the plan dc).  Gives: dc_emit_pack, dc_emit_kernel,
 * dc_emit_kh_range, dc_emit_task. */
#include <stdio.h>
#include <string.h>

#include "backend/c/cgen_dconv_int.h"
#include "backend/c/cgen_int.h"

/* Weights OIHW (any dtype) -> Wp[g][ocb][k][OB] fp32, k = (c*KH + kh)*KW + kw:
 * 16 output channels x 16 k loaded as rows, transposed, stored as k rows. */
void dc_emit_pack(cg_out *o, const dc *d) {
  const cgen_conv_spec *s = d->s;
  const char *wt = cg_ctype(s->w_dtype), *sx = cg_vsuffix(s->w_dtype);
  cg_emit(o, "static $T void $P_dpack(void *vc, int task, int tid) {\n  (void)tid;\n");
  cg_emit(o, "  const $P_dctx *cx = (const $P_dctx *)vc;\n");
  cg_emit(o, "  long ocb = task %% %dL, g = task / %dL;\n", d->nob, d->nob);
  cg_emit(o, "  const %s *A = (const %s *)cx->A + (g * %ldL + ocb * %dL) * %ldL;\n", wt, wt, (long)d->OCG, d->ob,
          (long)d->K);
  cg_emit(o, "  float *dst = cx->Wp + (long)task * %ldL;\n", (long)(d->K * d->ob));
  cg_emit(o, "  int nrow = %ldL - ocb * %dL < %d ? (int)(%ldL - ocb * %dL) : %d;\n", (long)d->OCG, d->ob, d->ob,
          (long)d->OCG, d->ob, d->ob);
  cg_emit(o, "  for (long k0 = 0; k0 < %ldL; k0 += 16) {\n", (long)d->K);
  cg_emit(o, "    int kn = %ldL - k0 < 16 ? (int)(%ldL - k0) : 16;\n", (long)d->K, (long)d->K);
  cg_emit(o, "    for (int v = 0; v < %d; v++) {\n      __m512 r[16];\n", d->nv);
  cg_emit(o, "      for (int i = 0; i < 16; i++) r[i] = v * 16 + i < nrow ? $P_ldn%s(A + (v * 16 + i) * %ldL + k0, kn)"
             " : _mm512_setzero_ps();\n", sx, (long)d->K);
  cg_emit(o, "      $P_tr16(r);\n");
  cg_emit(o, "      for (int i = 0; i < kn; i++) _mm512_storeu_ps(dst + (k0 + i) * %dL + v * 16, r[i]);\n", d->ob);
  cg_emit(o, "    }\n  }\n}\n");
}

/* The epilogue on x (16 pixels q.. of output channel o of this group, cnt valid)
 * and the store. */
static void emit_store_row(cg_out *o, const dc *d, int cnt) {
  const cgen_conv_spec *s = d->s;
  char ohw[32]; /* the output plane: a constant, or this run's (tt) */
  if (d->rt) snprintf(ohw, sizeof ohw, "tt->ohw");
  else snprintf(ohw, sizeof ohw, "%ldL", (long)d->OHW);
  for (int i = 0; i < s->n_epi; i++) {
    const cgen_epi *ep = &s->epi[i];
    const char *et = cg_ctype(ep->dtype), *sx = cg_vsuffix(ep->dtype);
    if (cg_emit_epi_common(o, ep, i, "oc", "x")) continue;
    switch (ep->kind) {
      case CGEN_EPI_RESIDUAL:
        cg_emit(o, "      { const %s *rp = (const %s *)tt->ep[%d] + oc * %s + q;\n", et, et, i, ohw);
        if (cnt == 16) cg_emit(o, "        x = x %s $P_ld%s(rp); }\n", ep->mul ? "*" : "+", sx);
        else cg_emit(o, "        x = x %s $P_ldn%s(rp, %d); }\n", ep->mul ? "*" : "+", sx, cnt);
        break;
      default: break; /* BIAS_N: no conv epilogue (cgen_conv refuses it) */
    }
  }
  const char *yt = cg_ctype(s->y_dtype), *ys = cg_vsuffix(s->y_dtype);
  cg_emit(o, "      %s *yq = (%s *)tt->y + oc * %s + q;\n", yt, yt, ohw);
  if (cnt == 16) cg_emit(o, "      $P_st%s(yq, x);\n", ys);
  else cg_emit(o, "      $P_stn%s(yq, x, %d);\n", ys, cnt);
}

/* Is pixel p of pattern g fed by tap kw? */
static bool valid(const dc_sig *g, int p, int kw) { return p >= g->lo[kw] && p < g->hi[kw]; }

/* The prefetch of the input rows pfd channels ahead that d's tile reads,
 * its columns jlo..jhi (jlo < 0: none), each row rs bytes on (text). */
static void emit_prefetch_rows(cg_out *o, const dc *d, int jlo, int jhi, const char *rs) {
  if (jlo < 0) return;
  /* the rows of the channel pfd ahead: their stride (H*W floats) is beyond
   * what the hardware prefetchers follow.  Every line the tile reads: a stride-2
   * tile of 28 pixels spans 57 columns, and prefetching only its first
   * and last column left two lines in the middle to miss (3x3 s2
   * 128->128 56->28, 28 x 16 tiles: 1.38 -> 1.08 ms) */
  cg_emit(o, "    for (int r = 0; r < nkh; r++) {\n");
  for (int j = jlo, more = 1; more; more = j < jhi, j = j + 16 < jhi ? j + 16 : jhi)
    if (d->rt)
      cg_emit(o, "      __builtin_prefetch((const void *)(xa + %du * hs + %du + (uintptr_t)r * rs));\n", d->pfd, j * 4);
    else
      cg_emit(o, "      __builtin_prefetch((const void *)(xa + %ldu + (uintptr_t)r * %s));\n", (long)(d->pfd * d->HW + j) * 4, rs);
  cg_emit(o, "    }\n");
}

/* The FMAs of d's tile pattern g for one kernel row: per input column j in
 * jlo..jhi (of 0..jmax) one broadcast (zero where padding may lie outside
 * the row) into every accumulator whose pixel and tap read it. */
static void emit_taps(cg_out *o, const dc *d, const dc_sig *g, int jlo, int jhi, int jmax) {
  const cgen_conv_spec *s = d->s;
  int np = g->np, nv = d->nv, kw_n = (int)s->kw, sw = (int)s->stride[1], dw = (int)s->dil[1];
  for (int j = jlo; j >= 0 && j <= jhi; j++) {
    bool any = false;
    for (int p = 0; p < np; p++)
      for (int kw = 0; kw < kw_n; kw++)
        if (p * sw + kw * dw == j && valid(g, p, kw)) {
          if (!any && d->bf) cg_emit(o, "      { __m512bh b = (__m512bh)_mm512_set1_epi32(((const int *)xr)[%d]);", j);
          else if (!any && d->edge && (j < s->pad[1] || jmax - j < s->pad[3])) /* maybe outside the row */
            cg_emit(o, "      { __m512 b = _mm512_set1_ps(*(%s > %d ? &zf : xr + %d));", j < s->pad[1] ? "zl" : "zr",
                    j < s->pad[1] ? j : jmax - j, j);
          else if (!any) cg_emit(o, "      { __m512 b = _mm512_set1_ps(xr[%d]);", j);
          any = true;
          for (int v = 0; v < nv; v++)
            if (d->bf) cg_emit(o, " a%d_%d = _mm512_dpbf16_ps(a%d_%d, b, w%d_%d);", p, v, p, v, kw, v);
            else cg_emit(o, " a%d_%d = _mm512_fmadd_ps(b, w%d_%d, a%d_%d);", p, v, kw, v, p, v);
        }
    if (any) cg_emit(o, " }\n");
  }
}

/* The end of d's micro-kernel for np pixels: blocked, the accumulators
 * parked in the scratch until the last channel block; then transposed to
 * rows of output channels and stored through the epilogue. */
static void emit_store_tile(cg_out *o, const dc *d, int np, bool blocked) {
  int nv = d->nv;
  if (blocked) {
    cg_emit(o, "  if (!last) {\n");
    for (int p = 0; p < np; p++)
      for (int v = 0; v < nv; v++) cg_emit(o, "    _mm512_store_ps(ws + %d, a%d_%d);\n", (p * nv + v) * 16, p, v);
    cg_emit(o, "    return;\n  }\n");
  }
  /* [pixel][oc] -> oc rows of pixels, 16 x 16 at a time */
  for (int p0 = 0; p0 < np; p0 += 16) {
    int cnt = np - p0 < 16 ? np - p0 : 16;
    for (int v = 0; v < nv; v++) {
      cg_emit(o, "  {\n    __m512 r[16] = {");
      for (int i = 0; i < 16; i++)
        if (i < cnt) cg_emit(o, "a%d_%d%s", p0 + i, v, i < 15 ? ", " : "");
        else cg_emit(o, "_mm512_setzero_ps()%s", i < 15 ? ", " : "");
      cg_emit(o, "};\n    $P_tr16(r);\n");
      cg_emit(o, "    long q = q0 + %d;\n", p0);
      cg_emit(o, "#pragma GCC unroll 16\n    for (int k = 0; k < 16; k++) {\n");
      cg_emit(o, "      long oc = o0 + %d + k;\n", v * 16);
      if (d->OCG % d->ob) cg_emit(o, "      if (oc >= %ldL) break;\n", (long)d->OCG);
      cg_emit(o, "      __m512 x = r[k];\n");
      emit_store_row(o, d, cnt);
      cg_emit(o, "    }\n  }\n");
    }
  }
}

/* The micro-kernel of d's tile pattern si: the accumulators of its
 * pixels over the channel steps (taps, prefetches), then stored, or
 * parked in the scratch between channel blocks. */
void dc_emit_kernel(cg_out *o, const dc *d, int si) {
  const cgen_conv_spec *s = d->s;
  const dc_sig *g = &d->sig[si];
  int np = g->np, nv = d->nv, kw_n = (int)s->kw, sw = (int)s->stride[1], dw = (int)s->dil[1];
  bool blocked = d->cb < d->ICG;
  cg_emit(o, "static %s void $P_dk%d(const $P_dtt *tt, const float *restrict xr0, long col0,"
             " const float *restrict wt, int nkh, long o0, long q0%s%s%s) {\n", d->bf ? CG_BF16_ATTR : "$T", si,
          blocked ? ", long ncb, float *restrict ws, int first, int last" : "", d->npf ? ", uintptr_t pf" : "",
          d->edge ? ", int zl, int zr" : "");
  if (d->edge) cg_emit(o, "  static const float zf = 0.0f;\n");
  /* the input's plane and row steps in bytes: constants, or the padded copy's (run-time sizes) */
  char hs[32], rs[32];
  if (d->rt) {
    cg_emit(o, "  const uintptr_t hs = tt->hs, rs = tt->rs;\n");
    snprintf(hs, sizeof hs, "hs"), snprintf(rs, sizeof rs, "rs");
  } else {
    snprintf(hs, sizeof hs, "%ldu", (long)d->HW * 4), snprintf(rs, sizeof rs, "%ldu", (long)(s->dil[0] * s->w) * 4);
  }
  for (int p = 0; p < np; p++)
    for (int v = 0; v < nv; v++)
      if (blocked)
        cg_emit(o, "  __m512 a%d_%d = first ? _mm512_setzero_ps() : _mm512_load_ps(ws + %d);\n", p, v, (p * nv + v) * 16);
      else
        cg_emit(o, "  __m512 a%d_%d = _mm512_setzero_ps();\n", p, v);
  /* the input columns this pattern reads, and the first/last for the prefetch */
  int jmax = (np - 1) * sw + (kw_n - 1) * dw, jlo = -1, jhi = -1;
  for (int j = 0; j <= jmax; j++)
    for (int p = 0; p < np; p++)
      for (int kw = 0; kw < kw_n; kw++)
        if (p * sw + kw * dw == j && valid(g, p, kw)) {
          if (jlo < 0) jlo = j;
          jhi = j;
        }
  /* addresses as integers: the tile's column 0 may lie left of the row (only
   * valid columns are loaded), and the prefetch runs one channel ahead */
  cg_emit(o, "  uintptr_t xa = (uintptr_t)xr0 + (uintptr_t)col0 * 4u;\n");
  if (blocked) cg_emit(o, "  for (long c = 0; c < ncb; c++, xa += %s) {\n", hs);
  else cg_emit(o, "  for (long c = 0; c < %ldL; c++, xa += %s) {\n", (long)d->ICG, hs);
  cg_emit(o, "    const float *wc = wt + c * %ldL;\n", (long)(s->kh * s->kw * d->ob));
  /* the next block's weights, npf lines a channel step (prefetches never fault) */
  for (int l = 0; l < d->npf; l++)
    cg_emit(o, "    __builtin_prefetch((const void *)(pf + (uintptr_t)c * %du + %du));\n", d->npf * 64, l * 64);
  emit_prefetch_rows(o, d, jlo, jhi, rs);
  cg_emit(o, "    for (int r = 0; r < nkh; r++) {\n");
  cg_emit(o, "      const float *xr = (const float *)(xa + (uintptr_t)r * %s);\n", rs);
  cg_emit(o, "      const float *wr = wc + r * %dL;\n", kw_n * d->ob);
  for (int kw = 0; kw < kw_n; kw++)
    for (int v = 0; v < nv; v++)
      cg_emit(o, "      %s w%d_%d = %s(wr + %d);\n", d->bf ? "__m512bh" : "__m512", kw, v, d->bf ? "(__m512bh)_mm512_loadu_ps" : "_mm512_loadu_ps",
              kw * d->ob + v * 16);
  emit_taps(o, d, g, jlo, jhi, jmax);
  for (int kw = 0; kw < kw_n; kw++)
    for (int v = 0; v < nv; v++) cg_emit(o, "      (void)w%d_%d;\n", kw, v);
  cg_emit(o, "    }\n  }\n");
  emit_store_tile(o, d, np, blocked);
  cg_emit(o, "}\n");
}

/* Vertical padding: the kernel rows [kh0, kh1) of output row oh that land
 * inside the input of h rows (an expression: a constant, or this run's). */
void dc_emit_kh_range(cg_out *o, const dc *d, const char *h) {
  const cgen_conv_spec *s = d->s;
  cg_emit(o, "  long ih = oh * %ldL - %ldL;\n  int kh0 = 0, kh1 = %d;\n", (long)s->stride[0], (long)s->pad[0], (int)s->kh);
  cg_emit(o, "  while (kh0 < %d && ih + kh0 * %ldL < 0) kh0++;\n", (int)s->kh, (long)s->dil[0]);
  cg_emit(o, "  while (kh1 > kh0 && ih + (kh1 - 1) * %ldL >= %s) kh1--;\n", (long)s->dil[0], h);
}

/* The task $P_dtask of d (constant sizes): one (image, group, output
 * channel block, block of rows), over the channel blocks, per row its
 * kernel rows and the calls of its tiles' micro-kernels. */
void dc_emit_task(cg_out *o, const dc *d) {
  const cgen_conv_spec *s = d->s;
  bool blocked = d->cb < d->ICG;
  int tw = d->mr * d->nv * 16; /* scratch floats per tile */
  cg_emit(o, "static $T void $P_dtask(void *vc, int task, int tid) {\n  (void)tid;\n");
  cg_emit(o, "  const $P_dctx *cx = (const $P_dctx *)vc;\n");
  if (d->ocb_fast)
    cg_emit(o, "  long ocb = task %% %dL, r = task / %dL, rb = r %% %ldL; r /= %ldL;\n", d->nob, d->nob, (long)d->nrb,
            (long)d->nrb);
  else
    cg_emit(o, "  long rb = task %% %ldL, r = task / %ldL, ocb = r %% %dL; r /= %dL;\n", (long)d->nrb, (long)d->nrb, d->nob,
            d->nob);
  cg_emit(o, "  long g = r %% %ldL, n = r / %ldL;\n", (long)d->G, (long)d->G);
  cg_emit(o, "  $P_dtt tt;\n");
  cg_emit(o, "  tt.y = (%s *)cx->C + (n * %ldL + g * %ldL) * %ldL;\n", cg_ctype(s->y_dtype), (long)s->oc, (long)d->OCG,
          (long)d->OHW);
  for (int i = 0; i < s->n_epi; i++) {
    const cgen_epi *ep = &s->epi[i];
    const char *et = cg_ctype(ep->dtype);
    if (ep->kind == CGEN_EPI_RESIDUAL)
      cg_emit(o, "  tt.ep[%d] = (const %s *)cx->ep[%d] + (n * %ldL + g * %ldL) * %ldL;\n", i, et, i, (long)s->oc,
              (long)d->OCG, (long)d->OHW);
    else if (ep->kind == CGEN_EPI_BIAS_M)
      cg_emit(o, "  tt.ep[%d] = (const %s *)cx->ep[%d] + g * %ldL;\n", i, et, i, (long)d->OCG);
    else cg_emit(o, "  tt.ep[%d] = 0;\n", i);
  }
  cg_emit(o, "  const float *x = (const float *)cx->B + (n * %ldL + g * %ldL) * %ldL;\n", (long)s->c, (long)d->ICG,
          (long)d->HW);
  cg_emit(o, "  const float *wb = cx->Wp + (g * %dL + ocb) * %ldL;\n", d->nob, (long)(d->K * d->ob));
  cg_emit(o, "  long o0 = ocb * %dL, oh1 = rb * %dL + %dL < %ldL ? rb * %dL + %dL : %ldL;\n", d->ob, d->rb, d->rb,
          (long)d->OH, d->rb, d->rb, (long)d->OH);
  const char *bargs = "";
  if (blocked) {
    cg_emit(o, "  float *ws = (float *)cx->sc.thr[tid];\n");
    cg_emit(o, "  for (long c0 = 0; c0 < %ldL; c0 += %ldL) {\n", (long)d->ICG, (long)d->cb);
    cg_emit(o, "  long ncb = %ldL - c0 < %ldL ? %ldL - c0 : %ldL;\n", (long)d->ICG, (long)d->cb, (long)d->ICG, (long)d->cb);
    cg_emit(o, "  int first = c0 == 0, last = c0 + ncb == %ldL;\n", (long)d->ICG);
    bargs = ", ncb, ws + ((oh - rb * %dL) * %dL + %s) * %dL, first, last";
  } else {
    cg_emit(o, "  const long c0 = 0, ncb = %ldL;\n  (void)ncb;\n", (long)d->ICG);
  }
  /* the weights after this block in memory (the next channels', or the next
   * output channel block's): this call's share of them */
  if (d->npf)
    cg_emit(o, "  uintptr_t pfb = (uintptr_t)wb + (uintptr_t)(c0 + ncb) * %ldu;\n", (long)(s->kh * s->kw * d->ob) * 4);
  cg_emit(o, "  for (long oh = rb * %dL; oh < oh1; oh++) {\n", d->rb);
  char hx[24];
  snprintf(hx, sizeof hx, "%ldL", (long)s->h);
  dc_emit_kh_range(o, d, hx);
  cg_emit(o, "  const float *xr0 = x + c0 * %ldL + (kh1 > kh0 ? (ih + kh0 * %ldL) * %ldL : 0);\n", (long)d->HW,
          (long)s->dil[0], (long)s->w);
  cg_emit(o, "  const float *wt = wb + c0 * %ldL + kh0 * %ldL;\n", (long)(s->kh * s->kw * d->ob), (long)(s->kw * d->ob));
  cg_emit(o, "  int nkh = kh1 - kh0;\n  long q0 = oh * %ldL;\n", (long)d->OW);
  long step = (long)d->mr * s->stride[1];
  char ba[320], tix[32];
  for (int t = 0; t < d->nt; t++) {
    bool loop = t == d->nl && d->nl + d->nr < d->nt;
    if (t >= d->nl && t < d->nt - d->nr && !loop) continue; /* interior: the loop below */
    int si = t < d->nl ? d->tsig[t] : loop ? d->tsig[2 * DC_MAX_EDGE] : d->tsig[DC_MAX_EDGE + (d->nt - 1 - t)];
    if (loop) snprintf(tix, sizeof tix, "t");
    else snprintf(tix, sizeof tix, "%d", t);
    ba[0] = 0;
    if (blocked) snprintf(ba, sizeof ba, bargs, d->rb, d->nt, tix, tw);
    if (d->npf) {
      size_t l = strlen(ba);
      snprintf(ba + l, sizeof ba - l, ", pfb + (uintptr_t)(((oh - rb * %dL) * %dL + %s) * ncb) * %du", d->rb, d->nt, tix,
               d->npf * 64);
    }
    if (loop)
      cg_emit(o, "  for (long t = %d; t < %d; t++) $P_dk%d(&tt, xr0, t * %ldL - %ldL, wt, nkh, o0, q0 + t * %dL%s);\n",
              d->nl, d->nt - d->nr, si, step, (long)s->pad[1], d->mr, ba);
    else
      cg_emit(o, "  $P_dk%d(&tt, xr0, %ldL, wt, nkh, o0, q0 + %ldL%s);\n", si, t * step - (long)s->pad[1], (long)t * d->mr,
              ba);
  }
  cg_emit(o, "  }\n");
  if (blocked) cg_emit(o, "  }\n");
  cg_emit(o, "}\n");
}
