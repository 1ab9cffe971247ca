/* cgen_gemm_pack.c — the GEMM template's packers: A into MR-row panels,
 * B into NR-wide panels (a GEMM's B, read by 16x16 transposes where B^T has
 * unit stride along K; a conv's B gathered from its input with zero fill, by
 * rows or by points), in fp32, or as bf16 pair words where the variant
 * multiplies in bf16.
 * Needs: cgen_gemm_int.h (cg_mm, cg_tile), cgen_int.h (templating, the
 * vector layer, the bf16 packers of cgen_bf16.c).
 * Gives: cg_emit_pack_a, cg_emit_pack_b_gemm, cg_emit_pack_b_conv_rows,
 * cg_emit_pack_b_conv, cg_bt_transposes (cgen_gemm_int.h). */
#include <stdio.h>
#include <string.h>

#include "backend/c/cgen_gemm_int.h"

/* A of p into MR-row panels ([k][MR] inside a KC block, fp32 or bf16 pair
 * words), a task per group of panels and KC block of t. */
void cg_emit_pack_a(cg_out *o, const cg_mm *p, const cg_tile *t) {
  const char *at = cg_ctype(p->adt);
  char ld[160];
  bool cv = cg_mm_use_bfcv(p, o) && !cg_mm_a_pairs(p, o); /* fp32 panels, then $P_bfcv */
  /* bf16: $P_packA_task0 before $P_bfcv; AMX: $P_packA_task1 before $P_amxtr */
  cg_emit(o, "static $T void $P_packA_task%s(void *vc, int task, int tid) {\n  (void)tid;\n", cv ? "0" : o->amx ? "1" : "");
  cg_emit(o, "  const $F_ctx *cx = (const $F_ctx *)vc;\n");
  cg_emit(o, "  long g = task %% %ldL, r = task / %ldL, pb = r %% cx->nkb, ba = r / cx->nkb;\n", (long)t->groups,
          (long)t->groups);
  cg_emit(o, "  long b0 = ba / %ldL, b1 = ba %% %ldL;\n", (long)t->nba[1], (long)t->nba[1]);
  cg_emit(o, "  const %s *A = (const %s *)cx->A + b0 * %ldL + b1 * %ldL;\n", at, at, (long)p->a_sb[0], (long)p->a_sb[1]);
  cg_emit(o, "  long pc = pb * cx->kc, kc = cx->K - pc < cx->kc ? cx->K - pc : cx->kc;\n");
  cg_emit(o, "  float *Ap = cx->Ap + ba * cx->K * %ldL + pc * %ldL;\n", (long)t->mp, (long)t->mp);
  if (p->m_expr) { /* this run's rows, cx->ppg panels of cx->pr rows a task (emit_rows_split) */
    cg_emit(o, "  long step = cx->ppg * cx->pr, mpr = (cx->M + cx->pr - 1) / cx->pr * cx->pr;\n");
    cg_emit(o, "  long ir1 = (g + 1) * step < mpr ? (g + 1) * step : mpr;\n");
    cg_emit(o, "  for (long ir = g * step; ir < ir1; ir += cx->pr) {\n");
    cg_emit(o, "    int mr = cx->M - ir < cx->pr ? (int)(cx->M - ir) : (int)cx->pr;\n");
    cg_emit(o, "    float *restrict d = Ap + ir / cx->pr * %d * kc;\n", t->mr);
  } else {
    cg_emit(o, "  long ir1 = (g + 1) * %ldL < %ldL ? (g + 1) * %ldL : %ldL;\n", (long)(t->ppg * t->mr), (long)t->mp,
            (long)(t->ppg * t->mr), (long)t->mp);
    cg_emit(o, "  for (long ir = g * %ldL; ir < ir1; ir += %d) {\n", (long)(t->ppg * t->mr), t->mr);
    cg_emit(o, "    int mr = %ldL - ir < %d ? (int)(%ldL - ir) : %d;\n", (long)p->M, t->mr, (long)p->M, t->mr);
  }
  if (!p->m_expr) cg_emit(o, "    float *restrict d = Ap + ir * kc;\n");
  /* the permutes below: every panel of a run-time M (its rows past mr as
   * zero rows; a few rows' panels are short, emit_rows_split), else full ones */
  bool perm = p->a_sk == 1 && p->adt == TINY_FP32 && o->isa->id == CGEN_ISA_AVX512 && t->mr <= 16, zrows = perm && p->m_expr;
  if (!zrows)
    cg_emit(o, "    if (mr < %d) for (long k = 0; k < kc; k++) for (int i = mr < 0 ? 0 : mr; i < %d; i++) d[k * %d + i] = 0.0f;\n",
            t->mr, t->mr, t->mr);
  if (perm) {
    /* MR rows x 16 k -> 16 k x MR floats in registers: output vector j takes
     * lane e from row (16j+e) % MR, column (16j+e) / MR; rows are paired into
     * two-source permutes and merged by lane masks */
    int mr = t->mr, npair = (mr + 1) / 2;
    if (zrows) cg_emit(o, "    {\n      long k = 0;\n");
    else cg_emit(o, "    if (mr == %d) {\n      long k = 0;\n", mr);
    for (int j = 0; j < mr; j++)
      for (int q = 0; q < npair; q++) {
        cg_emit(o, "      const __m512i ix%d_%d = _mm512_setr_epi32(", j, q);
        unsigned mask = 0;
        for (int e = 0; e < 16; e++) {
          int tt = 16 * j + e, i = tt % mr, c = tt / mr, v = 0;
          if (i == 2 * q) v = c, mask |= 1u << e;
          else if (i == 2 * q + 1) v = 16 + c, mask |= 1u << e;
          cg_emit(o, "%d%s", v, e < 15 ? ", " : ");\n");
        }
        if (q > 0) cg_emit(o, "      const __mmask16 mk%d_%d = (__mmask16)0x%04x;\n", j, q, mask); /* pair 0: no merge */
      }
    cg_emit(o, "      for (; k + 16 <= kc; k += 16) {\n");
    for (int i = 0; i < mr; i++)
      if (zrows)
        cg_emit(o, "        __m512 r%d = %d < mr ? _mm512_loadu_ps(A + (ir + %d) * cx->lda + pc + k) : _mm512_setzero_ps();\n", i, i,
                i);
      else cg_emit(o, "        __m512 r%d = _mm512_loadu_ps(A + (ir + %d) * cx->lda + pc + k);\n", i, i);
    if (mr % 2) cg_emit(o, "        __m512 r%d = r%d;\n", mr, mr - 1);
    for (int j = 0; j < mr; j++) {
      cg_emit(o, "        { __m512 v = _mm512_permutex2var_ps(r0, ix%d_0, r1);\n", j);
      for (int q = 1; q < npair; q++)
        cg_emit(o, "          v = _mm512_mask_mov_ps(v, mk%d_%d, _mm512_permutex2var_ps(r%d, ix%d_%d, r%d));\n", j, q, 2 * q, j,
                q, 2 * q + 1);
      cg_emit(o, "          _mm512_storeu_ps(d + k * %d + %d, v); }\n", mr, 16 * j);
    }
    cg_emit(o, "      }\n");
    /* the k tail, only where a block depth leaves one (GCC warns about a loop it proves empty) */
    if (t->kc % 16 || (p->K % t->kc) % 16 || p->k_expr)
      cg_emit(o, "      for (int i = 0; i < %d; i++) for (long kk = k; kk < kc; kk++) d[kk * %d + i] = %sA[(ir + i) * cx->lda + pc + kk];\n",
              mr, mr, zrows ? "i >= mr ? 0.0f : " : "");
    cg_emit(o, "      continue;\n    }\n");
  }
  if (cg_mm_a_pairs(p, o)) {
    cg_emit_bf16_pack_a_words(o, t->mr);
  } else if (p->a_sk == 1 && p->adt != TINY_FP32 && o->isa->id != CGEN_ISA_SCALAR) {
    /* convert W elements at a time with the vector layer, then spread */
    int w = o->isa->w;
    const char *sx = cg_vsuffix(p->adt);
    cg_emit(o, "    float tv[%d];\n", w);
    cg_emit(o, "    for (int i = 0; i < mr; i++) {\n      const %s *s = A + (ir + i) * cx->lda + pc;\n", at);
    cg_emit(o, "      for (long k = 0; k < kc; k += %d) {\n", w);
    cg_emit(o, "        int n = kc - k < %d ? (int)(kc - k) : %d;\n", w, w);
    cg_emit(o, "        $P_st(tv, n == %d ? $P_ld%s(s + k) : $P_ldn%s(s + k, n));\n", w, sx, sx);
    cg_emit(o, "        for (int q = 0; q < n; q++) d[(k + q) * %d + i] = tv[q];\n      }\n    }\n", t->mr);
  } else if (p->a_sk == 1) {
    cg_scalar_ld(o, ld, sizeof ld, p->adt, "s", "k");
    cg_emit(o, "    for (int i = 0; i < mr; i++) {\n      const %s *s = A + (ir + i) * cx->lda + pc;\n", at);
    cg_emit(o, "      for (long k = 0; k < kc; k++) d[k * %d + i] = %s;\n    }\n", t->mr, ld);
  } else {
    char idx[64];
    snprintf(idx, sizeof idx, "(long)i * %ldL", (long)p->a_sm);
    cg_scalar_ld(o, ld, sizeof ld, p->adt, "s", idx);
    cg_emit(o, "    for (long k = 0; k < kc; k++) {\n      const %s *s = A + (pc + k) * %ldL + ir * %ldL;\n", at,
            (long)p->a_sk, (long)p->a_sm);
    cg_emit(o, "      for (int i = 0; i < mr; i++) d[k * %d + i] = %s;\n    }\n", t->mr, ld);
  }
  cg_emit(o, "  }\n}\n");
  if (cv) cg_emit_bf16_pack_a(o, t->groups, t->ppg * t->mr, t->mp, t->mr);
}

/* Does the AVX-512 packer read B^T (unit stride along K) with 16x16 transposes? */
bool cg_bt_transposes(const cg_mm *p, const cg_isa *isa, const cg_tile *t) {
  return isa->id == CGEN_ISA_AVX512 && !p->conv && p->b_sk == 1 && p->b_sn != 1 && t->nr % 16 == 0;
}

/* B of a GEMM p into NR-wide panels ([k][NR]), by 16x16 transposes where
 * cg_bt_transposes says, else by vectors or element by element. */
void cg_emit_pack_b_gemm(cg_out *o, const cg_mm *p, const cg_tile *t) {
  const char *bt = cg_ctype(p->bdt), *sx = cg_vsuffix(p->bdt);
  int w = o->isa->w;
  if (cg_mm_b_pairs(p, o)) {
    cg_emit_bf16_pack_b_rows(o, p->bdt, p->b_sb[0], p->b_sb[1], p->b_sk, t->nv);
    return;
  }
  cg_emit(o, "static $T void $P_packB(const $F_ctx *cx, long b0, long b1, long k0, long kc, long n0, long nc,"
             " float *restrict Bp) {\n");
  /* a 1x1 conv's rows with its sizes read at run time: strides of this run's pixels */
  char sb0[48], sb1[48], sk[48], r0[48], r1[48];
  snprintf(r0, sizeof r0, "%ldL * cx->N", (long)(p->b_sb[0] / p->N)), snprintf(r1, sizeof r1, "%ldL * cx->N", (long)(p->b_sb[1] / p->N));
  cg_rt_size(sb0, p, p->b_sb[0], r0), cg_rt_size(sb1, p, p->b_sb[1], r1), cg_rt_size(sk, p, p->b_sk, "cx->N");
  cg_emit(o, "  const %s *B = (const %s *)cx->B + b0 * %s + b1 * %s;\n", bt, bt, sb0, sb1);
  cg_emit(o, "  for (long jr = 0; jr < nc; jr += %d) {\n", t->nr);
  cg_emit(o, "    int nr = nc - jr < %d ? (int)(nc - jr) : %d;\n    float *restrict d = Bp + jr * kc;\n", t->nr, t->nr);
  if (p->b_sn == 1) {
    cg_emit(o, "    const %s *s = B + k0 * %s + n0 + jr;\n", bt, sk);
    cg_emit(o, "    if (nr == %d) {\n      for (long k = 0; k < kc; k++, s += %s) {\n", t->nr, sk);
    for (int v = 0; v < t->nv; v++) cg_emit(o, "        $P_st(d + k * %d + %d, $P_ld%s(s + %d));\n", t->nr, v * w, sx, v * w);
    cg_emit(o, "      }\n    } else {\n      for (long k = 0; k < kc; k++, s += %s) {\n", sk);
    for (int v = 0; v < t->nv; v++)
      cg_emit(o, "        $P_st(d + k * %d + %d, $P_ldn%s(s + %d, nr - %d));\n", t->nr, v * w, sx, v * w, v * w);
    cg_emit(o, "      }\n    }\n");
  } else {
    char ld[160];
    snprintf(ld, sizeof ld, "k * %ldL", (long)p->b_sk);
    char ldx[200];
    cg_scalar_ld(o, ldx, sizeof ldx, p->bdt, "s", ld);
    if (cg_bt_transposes(p, o->isa, t)) {
      char ld2[160], ldx2[200];
      snprintf(ld2, sizeof ld2, "k2 * %ldL", (long)p->b_sk);
      cg_scalar_ld(o, ldx2, sizeof ldx2, p->bdt, "s", ld2);
      /* B^T (unit stride along K): 16 columns x 16 k read as rows, transposed
       * in registers, stored as k rows of the panel; the k tail by element */
      cg_emit(o, "    if (nr == %d) {\n      long k = 0;\n      for (; k + 16 <= kc; k += 16)\n", t->nr);
      cg_emit(o, "        for (int jb = 0; jb < %d; jb += 16) {\n          __m512 r[16];\n", t->nr);
      cg_emit(o, "          for (int j = 0; j < 16; j++) r[j] = $P_ld%s(B + (n0 + jr + jb + j) * %ldL + k0 + k);\n", sx,
              (long)p->b_sn);
      cg_emit(o, "          $P_tr16(r);\n          for (int i = 0; i < 16; i++) $P_st(d + (k + i) * %d + jb, r[i]);\n"
                 "        }\n", t->nr);
      cg_emit(o, "      for (int j = 0; j < %d && k < kc; j++) {\n", t->nr);
      cg_emit(o, "        const %s *s = B + (n0 + jr + j) * %ldL + k0 * %ldL;\n", bt, (long)p->b_sn, (long)p->b_sk);
      cg_emit(o, "        for (long k2 = k; k2 < kc; k2++) d[k2 * %d + j] = %s;\n      }\n", t->nr, ldx2);
      cg_emit(o, "      continue;\n    }\n");
    }
    cg_emit(o, "    for (int j = 0; j < %d; j++) {\n", t->nr);
    cg_emit(o, "      if (j >= nr) { for (long k = 0; k < kc; k++) d[k * %d + j] = 0.0f; continue; }\n", t->nr);
    cg_emit(o, "      const %s *s = B + (n0 + jr + j) * %ldL + k0 * %ldL;\n", bt, (long)p->b_sn, (long)p->b_sk);
    cg_emit(o, "      for (long k = 0; k < kc; k++) d[k * %d + j] = %s;\n    }\n", t->nr, ldx);
  }
  cg_emit(o, "  }\n}\n");
}

/* Stride-1 rows, AVX-512, fp32: each 16-lane vector of a panel row is built
 * from the pieces of output rows it covers; a piece is one contiguous input
 * row run, read with a masked merge-load whose lane 0 is aligned to the
 * vector, then one aligned store per vector.  Masks and offsets depend only
 * on (kh, kw), so they are tabulated once per panel; per k only the channel
 * base moves.  (An expand-load from the first valid lane is used when lane
 * 0's address would fall before the input.) */
void cg_emit_pack_b_conv_rows(cg_out *o, const cg_mm *p, const cg_tile *t) {
  int64_t hw = p->cv_h * p->cv_w, khw = p->cv_kh * p->cv_kw;
  int maxp = t->nv * 17; /* pieces per panel: at most 16 per vector plus one */
  cg_emit(o, "static $T void $P_packB(const $F_ctx *cx, long b0, long b1, long k0, long kc, long n0, long nc,"
             " float *restrict Bp) {\n");
  cg_emit(o, "  const float *x = (const float *)cx->B + b0 * %ldL + b1 * %ldL;\n", (long)(p->cv_c * hw),
          (long)(p->cv_icg * hw));
  cg_emit(o, "  int pa[%d], pb[%d], pih[%d], piw[%d], vs[%d];\n", maxp, maxp, maxp, maxp, t->nv + 1);
  cg_emit(o, "  __mmask16 tm[%ld][%d];\n  int ts[%ld][%d];\n", (long)khw, maxp, (long)khw, maxp);
  cg_emit(o, "  for (long jr = 0; jr < nc; jr += %d) {\n", t->nr);
  cg_emit(o, "    int nr = nc - jr < %d ? (int)(nc - jr) : %d, np = 0;\n    float *restrict d = Bp + jr * kc;\n", t->nr,
          t->nr);
  cg_emit(o, "    for (int v = 0; v < %d; v++) {\n      vs[v] = np;\n", t->nv);
  cg_emit(o, "      for (int j = v * 16; j < nr && j < v * 16 + 16;) {\n");
  cg_emit(o, "        long q = n0 + jr + j, oh = q / %ldL, ow = q %% %ldL;\n", (long)p->cv_ow, (long)p->cv_ow);
  cg_emit(o, "        int l = (int)(%ldL - ow);\n", (long)p->cv_ow);
  cg_emit(o, "        if (l > nr - j) l = nr - j;\n        if (l > v * 16 + 16 - j) l = v * 16 + 16 - j;\n");
  cg_emit(o, "        pa[np] = j - v * 16; pb[np] = j - v * 16 + l;\n");
  cg_emit(o, "        pih[np] = (int)(oh * %ldL - %ldL); piw[np++] = (int)(ow - %ldL) - (j - v * 16); j += l;\n      }\n    }\n",
          (long)p->cv_sh, (long)p->cv_pt, (long)p->cv_pl);
  cg_emit(o, "    vs[%d] = np;\n", t->nv);
  cg_emit(o, "    for (int c = 0; c < %ld; c++)\n      for (int s = 0; s < np; s++) {\n", (long)khw);
  cg_emit(o, "        int ih = pih[s] + (int)(c / %ld) * %d, iw = piw[s] + (int)(c %% %ld) * %d;\n", (long)p->cv_kw,
          (int)p->cv_dh, (long)p->cv_kw, (int)p->cv_dw);
  cg_emit(o, "        int lo = -iw > pa[s] ? -iw : pa[s], hi = %d - iw < pb[s] ? %d - iw : pb[s];\n", (int)p->cv_w,
          (int)p->cv_w);
  cg_emit(o, "        if ((unsigned)ih >= %uu || hi <= lo) { tm[c][s] = 0; ts[c][s] = 0; continue; }\n", (unsigned)p->cv_h);
  cg_emit(o, "        tm[c][s] = (__mmask16)(((1u << hi) - 1u) & ~((1u << lo) - 1u));\n");
  cg_emit(o, "        ts[c][s] = ih * %d + iw;\n      }\n", (int)p->cv_w);
  cg_emit(o, "    long ic = k0 / %ldL, c = k0 %% %ldL;\n", (long)khw, (long)khw);
  cg_emit(o, "    for (long k = 0; k < kc; k++) {\n      const float *xc = x + ic * %ldL;\n", (long)hw);
  cg_emit(o, "      const __mmask16 *mc = tm[c];\n      const int *sc = ts[c];\n");
  for (int v = 0; v < t->nv; v++) {
    /* vectors wholly past nr are never read: the tail kernel is narrower */
    cg_emit(o, "      if (nr > %d) { __m512 a = _mm512_setzero_ps();\n", v * 16);
    cg_emit(o, "        for (int s = vs[%d]; s < vs[%d]; s++)\n", v, v + 1);
    cg_emit(o, "          a = sc[s] >= 0 || ic ? _mm512_mask_loadu_ps(a, mc[s], xc + sc[s])\n"
               "              : _mm512_mask_expandloadu_ps(a, mc[s], xc + sc[s] + __builtin_ctz(mc[s] | 0x10000u));\n");
    cg_emit(o, "        _mm512_store_ps(d + k * %d + %d, a); }\n", t->nr, v * 16);
  }
  cg_emit(o, "      if (++c == %ldL) { c = 0; ++ic; }\n    }\n  }\n}\n", (long)khw);
}

/* Implicit im2col: B[k][p] = x[ic][oh*sh - pt + kh*dh][ow*sw - pl + kw*dw], k = (ic*KH + kh)*KW + kw. */
void cg_emit_pack_b_conv(cg_out *o, const cg_mm *p, const cg_tile *t) {
  const char *xt = cg_ctype(p->bdt);
  int w = o->isa->w;
  int64_t hw = p->cv_h * p->cv_w;
  /* sizes read at run time (p->rt; never the AVX-512 variant, the direct kernel's): this run's plane */
  char hwx[48], owx[48], wx[48], r0[48], r1[48], hi[48], wi[48];
  snprintf(r0, sizeof r0, "%ldL * cx->h * cx->w", (long)p->cv_c), snprintf(r1, sizeof r1, "%ldL * cx->h * cx->w", (long)p->cv_icg);
  cg_rt_size(hwx, p, hw, "cx->h * cx->w"), cg_rt_size(owx, p, p->cv_ow, "cx->ow"), cg_rt_size(wx, p, p->cv_w, "cx->w");
  if (p->rt) snprintf(hi, sizeof hi, "(int)cx->h"), snprintf(wi, sizeof wi, "(int)cx->w");
  else snprintf(hi, sizeof hi, "%d", (int)p->cv_h), snprintf(wi, sizeof wi, "%d", (int)p->cv_w);
  cg_emit(o, "static $T void $P_packB(const $F_ctx *cx, long b0, long b1, long k0, long kc, long n0, long nc,"
             " float *restrict Bp) {\n");
  char sb0[48], sb1[48];
  cg_emit(o, "  const %s *x = (const %s *)cx->B + b0 * %s + b1 * %s;\n", xt, xt, cg_rt_size(sb0, p, p->cv_c * hw, r0),
          cg_rt_size(sb1, p, p->cv_icg * hw, r1));
  cg_emit(o, "  int ih0[%d] __attribute__((aligned(64))), iw0[%d] __attribute__((aligned(64))),"
             " base[%d] __attribute__((aligned(64)));\n", t->nr, t->nr, t->nr);
  cg_emit(o, "  for (long jr = 0; jr < nc; jr += %d) {\n", t->nr);
  cg_emit(o, "    int nr = nc - jr < %d ? (int)(nc - jr) : %d;\n    float *restrict d = Bp + jr * kc;\n", t->nr, t->nr);
  cg_emit(o, "    for (int j = 0; j < %d; j++) {\n      long q = n0 + jr + j;\n", t->nr);
  cg_emit(o, "      if (j < nr) { ih0[j] = (int)(q / %s * %ldL - %ldL); iw0[j] = (int)(q %% %s * %ldL - %ldL);"
             " base[j] = ih0[j] * %s + iw0[j]; }\n", owx, (long)p->cv_sh, (long)p->cv_pt, owx, (long)p->cv_sw, (long)p->cv_pl, wx);
  cg_emit(o, "      else { ih0[j] = -(1 << 28); iw0[j] = 0; base[j] = 0; }\n    }\n");
  int64_t khw = p->cv_kh * p->cv_kw;
  cg_emit(o, "    long ic = k0 / %ldL, kr = k0 %% %ldL, kh = kr / %ldL, kw = kr %% %ldL;\n", (long)khw, (long)khw,
          (long)p->cv_kw, (long)p->cv_kw);
  cg_emit(o, "    for (long k = 0; k < kc; k++) {\n");
  cg_emit(o, "      int dh = (int)(kh * %ldL), dw = (int)(kw * %ldL), off = (int)(ic * %s) + dh * %s + dw;\n",
          (long)p->cv_dh, (long)p->cv_dw, hwx, wi);
  if (o->isa->id == CGEN_ISA_AVX512 && p->bdt == TINY_FP32) {
    for (int v = 0; v < t->nv; v++) {
      cg_emit(o, "      { __m512i vh = _mm512_add_epi32(_mm512_load_si512(ih0 + %d), _mm512_set1_epi32(dh));\n", v * w);
      cg_emit(o, "        __m512i vw = _mm512_add_epi32(_mm512_load_si512(iw0 + %d), _mm512_set1_epi32(dw));\n", v * w);
      cg_emit(o, "        __mmask16 mk = _mm512_cmplt_epu32_mask(vh, _mm512_set1_epi32(%d)) &"
                 " _mm512_cmplt_epu32_mask(vw, _mm512_set1_epi32(%d));\n", (int)p->cv_h, (int)p->cv_w);
      cg_emit(o, "        __m512i ix = _mm512_add_epi32(_mm512_load_si512(base + %d), _mm512_set1_epi32(off));\n", v * w);
      cg_emit(o, "        _mm512_storeu_ps(d + k * %d + %d, _mm512_mask_i32gather_ps(_mm512_setzero_ps(), mk, ix, x, 4)); }\n",
              t->nr, v * w);
    }
  } else if (o->isa->id == CGEN_ISA_AVX2 && p->bdt == TINY_FP32) {
    for (int v = 0; v < t->nv; v++) {
      cg_emit(o, "      { __m256i vh = _mm256_add_epi32(_mm256_load_si256((const __m256i *)(ih0 + %d)), _mm256_set1_epi32(dh));\n",
              v * w);
      cg_emit(o, "        __m256i vw = _mm256_add_epi32(_mm256_load_si256((const __m256i *)(iw0 + %d)), _mm256_set1_epi32(dw));\n",
              v * w);
      cg_emit(o, "        __m256i mk = _mm256_and_si256(_mm256_and_si256(_mm256_cmpgt_epi32(vh, _mm256_set1_epi32(-1)),"
                 " _mm256_cmpgt_epi32(_mm256_set1_epi32(%s), vh)),\n"
                 "          _mm256_and_si256(_mm256_cmpgt_epi32(vw, _mm256_set1_epi32(-1)),"
                 " _mm256_cmpgt_epi32(_mm256_set1_epi32(%s), vw)));\n", hi, wi);
      cg_emit(o, "        __m256i ix = _mm256_add_epi32(_mm256_load_si256((const __m256i *)(base + %d)), _mm256_set1_epi32(off));\n",
              v * w);
      cg_emit(o, "        _mm256_storeu_ps(d + k * %d + %d, _mm256_mask_i32gather_ps(_mm256_setzero_ps(), x, ix,"
                 " _mm256_castsi256_ps(mk), 4)); }\n", t->nr, v * w);
    }
  } else {
    char ld[160];
    cg_scalar_ld(o, ld, sizeof ld, p->bdt, "x", "base[j] + off");
    cg_emit(o, "      for (int j = 0; j < %d; j++) {\n", t->nr);
    cg_emit(o, "        unsigned ih = (unsigned)(ih0[j] + dh), iw = (unsigned)(iw0[j] + dw);\n");
    char hu[48], wu[48];
    if (p->rt) snprintf(hu, sizeof hu, "(unsigned)cx->h"), snprintf(wu, sizeof wu, "(unsigned)cx->w");
    else snprintf(hu, sizeof hu, "%uu", (unsigned)p->cv_h), snprintf(wu, sizeof wu, "%uu", (unsigned)p->cv_w);
    cg_emit(o, "        d[k * %d + j] = ih < %s && iw < %s ? %s : 0.0f;\n      }\n", t->nr, hu, wu, ld);
  }
  cg_emit(o, "      if (++kw == %ldL) { kw = 0; if (++kh == %ldL) { kh = 0; ++ic; } }\n    }\n  }\n}\n", (long)p->cv_kw,
          (long)p->cv_kh);
}
