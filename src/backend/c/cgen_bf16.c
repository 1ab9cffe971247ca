/* cgen_bf16.c — the bf16 pieces of the GEMM / implicit-GEMM convolution
 * template (cgen_gemm.c) for harp_options.precision = "bf16": the AVX-512
 * variant multiplies bf16 operands with vdpbf16ps and accumulates in fp32.
 * Needs: cgen_int.h.  Gives: cg_emit_bf16_cvt, cg_emit_bf16_kernel,
 * cg_emit_pack_a_pass, cg_emit_bf16_pack_a, cg_emit_bf16_pack_a_words, cg_emit_bf16_pack_b_rows,
 * cg_emit_bf16_ilv, cg_emit_bf16_ilv_pad, cg_emit_bf16_wpairs, cg_emit_bf16_ilv_cols, cg_emit_bf16_wpairs_cols
 * (declared in cgen_int.h with CG_BF16_ATTR, CG_BF16_IX).
 *
 * Layout.  The packers write their panels in fp32 as usual, [k][W] (W = MR
 * for A, NR for B); $P_bfcv then rewrites each panel in place as
 * [ceil(k/2)][W] pairs {bf16(x[2p][w]), bf16(x[2p+1][w])} (a 32-bit word per
 * lane, the odd row of an odd depth paired with 0), rounded to nearest even.
 * Pair row p lands on fp32 row p, which rows 2p and 2p+1 (both >= p) have
 * already been read from when p > 0, and which row 0's own chunk is read
 * before it is written when p == 0: the rewrite is safe in place, and the
 * panels keep their fp32 offsets (half of each is then unused).
 * The micro-kernel reads a pair row of B as NR/16 vectors of 32 bf16 and
 * broadcasts A's pair for row i; vdpbf16ps adds both products of the pair
 * to the fp32 accumulator.  Accumulators, the epilogue and the stores are
 * the fp32 template's.
 * A B with unit stride along N (a GEMM's) is packed as pairs directly
 * (cg_emit_bf16_pack_b_rows), and so is an A stored in bf16 with unit
 * stride along K (cg_emit_bf16_pack_a_words: its pairs are words already).  A convolution pairs input channels instead
 * (cgen_gemm.c's bf16_pairs): the input is interleaved once per run
 * (cg_emit_bf16_ilv), the weight at packing (cg_emit_bf16_wpairs), and the
 * fp32 packers then move 32-bit words.  The direct conv (cgen_dconv.c)
 * takes the same interleaved input and weight pairs.
 * With fewer than CG_BF16_MIN_ICG input channels per group (a stem's 3) the
 * direct conv pairs adjacent columns of a row instead
 * (cg_emit_bf16_ilv_cols, cg_emit_bf16_wpairs_cols): taps kw = 2t and
 * 2t + 1 of a pixel read the word {x[j], x[j + 1]}, so a 7-tap row takes 4
 * vdpbf16ps where fp32 took 7 FMAs, and no lane of a channel pair is
 * empty. */
#include <stdio.h>

#include "backend/c/cgen_int.h"

/* $P_bfcv(d, kc, w): the panel d of kc rows of w floats, in place, to pair rows. */
void cg_emit_bf16_cvt(cg_out *o) {
  cg_emit(o, "static " CG_BF16_ATTR " __attribute__((unused)) void $P_bfcv(float *d, long kc, int w) {\n");
  /* output lane 2j <- x0[j], 2j+1 <- x1[j]: cvtne2ps_pbh(x1, x0) holds x0 in
   * its low 16 bf16 and x1 in the high 16 */
  cg_emit(o, "  const __m512i ix = " CG_BF16_IX ";\n");
  cg_emit(o, "  for (long k = 0; k < kc; k += 2) {\n");
  cg_emit(o, "    const float *r0 = d + k * w, *r1 = d + (k + 1) * w;\n    float *q = d + k / 2 * w;\n");
  cg_emit(o, "    int odd = k + 1 >= kc;\n");
  cg_emit(o, "    for (int i = 0; i < w; i += 16) {\n");
  cg_emit(o, "      __mmask16 mk = w - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (w - i)) - 1u);\n");
  cg_emit(o, "      __m512 x0 = _mm512_maskz_loadu_ps(mk, r0 + i);\n");
  cg_emit(o, "      __m512 x1 = odd ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(mk, r1 + i);\n");
  cg_emit(o, "      __m512i p = _mm512_permutexvar_epi16(ix, (__m512i)_mm512_cvtne2ps_pbh(x1, x0));\n");
  cg_emit(o, "      _mm512_mask_storeu_epi32(q + i, mk, p);\n    }\n  }\n}\n");
}

/* The micro-kernel $P_k<mr>_<nv> over pair panels: mr rows of A (panel
 * width tmr) times nv vectors of 16 columns of B (panel width tnr), kc deep
 * (pairs: (kc + 1) / 2, or kc when `pairs` counts them already); B prefetched pf pair rows ahead; c_sm > 0: C's
 * rows prefetched for the store (C is the fp32 accumulator); pf_a > 0: A
 * prefetched that many bytes ahead. */
void cg_emit_bf16_kernel(cg_out *o, int mr, int nv, int tmr, int tnr, int pf, long c_sm, bool pairs, int pf_a) {
  cg_emit(o, "static " CG_BF16_ATTR " void $P_k%d_%d(long kc, const float *restrict a, const float *restrict b,\n"
             "    const $F_tt *tt, long m, long n, int nr, int first, int last) {\n", mr, nv);
  for (int i = 0; i < mr; i++)
    for (int j = 0; j < nv; j++) cg_emit(o, "  __m512 c%d_%d = _mm512_setzero_ps();\n", i, j);
  if (c_sm > 0)
    for (int i = 0; i < mr; i++)
      for (int l = 0; l < (nv * 64 + 63) / 64; l++)
        cg_emit(o, "  __builtin_prefetch((const float *)tt->c + (m + %d) * %ldL + n + %d, 1);\n", i, c_sm, l * 16);
  cg_emit(o, "  const int *ap = (const int *)a;\n  long kp = %s;\n", pairs ? "kc" : "(kc + 1) >> 1");
  cg_emit(o, "#pragma GCC unroll 4\n  for (long k = 0; k < kp; k++) {\n");
  if (pf > 0)
    for (int l = 0; l < nv; l++) cg_emit(o, "    __builtin_prefetch(b + (k + %d) * %d + %d);\n", pf, tnr, l * 16);
  if (pf_a > 0) /* A's pair rows, pf_a bytes ahead (cgen_gemm_variant.c's emit_kernel says when) */
    cg_emit(o, "    __builtin_prefetch((const void *)((uintptr_t)(ap + k * %d) + %du));\n", tmr, pf_a);
  for (int j = 0; j < nv; j++) cg_emit(o, "    __m512bh b%d = (__m512bh)_mm512_loadu_ps(b + k * %d + %d);\n", j, tnr, j * 16);
  for (int i = 0; i < mr; i++) {
    cg_emit(o, "    { __m512bh av = (__m512bh)_mm512_set1_epi32(ap[k * %d + %d]);", tmr, i);
    for (int j = 0; j < nv; j++) cg_emit(o, " c%d_%d = _mm512_dpbf16_ps(c%d_%d, av, b%d);", i, j, i, j, j);
    cg_emit(o, " }\n");
  }
  cg_emit_kernel_rows(o, mr, nv);
}

/* $P_packA_task<suffix>: the packer's task `inner` (none when NULL; panel
 * group g of `groups`, span rows of A each, of KC block pb for batch ba), then `stmt`
 * on each of its panels (mr rows, mp rows of A in all; stmt reads Ap + ir
 * * kc, the panel, and kc, the block's depth). */
void cg_emit_pack_a_pass(cg_out *o, const char *suffix, const char *inner, int64_t groups, int64_t span, int64_t mp,
                         int mr, const char *stmt) {
  cg_emit(o, "static $T void $P_packA_task%s(void *vc, int task, int tid) {\n", suffix);
  if (inner) cg_emit(o, "  %s(vc, task, tid);\n", inner);
  else cg_emit(o, "  (void)tid;\n");
  cg_emit(o, "  const $F_ctx *cx = (const $F_ctx *)vc;\n");
  cg_emit(o, "  long g = task %% %ldL, r = task / %ldL, pb = r %% cx->nkb, ba = r / cx->nkb;\n", (long)groups,
          (long)groups);
  cg_emit(o, "  long pc = pb * cx->kc, kc = cx->K - pc < cx->kc ? cx->K - pc : cx->kc;\n");
  cg_emit(o, "  float *Ap = cx->Ap + ba * cx->K * %ldL + pc * %ldL;\n", (long)mp, (long)mp);
  cg_emit(o, "  long ir1 = (g + 1) * %ldL < %ldL ? (g + 1) * %ldL : %ldL;\n", (long)span, (long)mp, (long)span, (long)mp);
  cg_emit(o, "  for (long ir = g * %ldL; ir < ir1; ir += %d) %s;\n}\n", (long)span, mr, stmt);
}

/* $P_packA_task: the fp32 packer's task ($P_packA_task0), then its
 * panels (mr wide, mp rows of A in all) to pair rows ($P_packA_task1 in
 * the AMX variant, whose $P_packA_task then transposes them, cgen_amx.c). */
void cg_emit_bf16_pack_a(cg_out *o, int64_t groups, int64_t span, int64_t mp, int mr) {
  char stmt[64];
  snprintf(stmt, sizeof stmt, "$P_bfcv(Ap + ir * kc, kc, %d)", mr);
  cg_emit_pack_a_pass(o, o->amx ? "1" : "", "$P_packA_task0", groups, span, mp, mr, stmt);
}

/* Inside the packer's panel loop (A bf16 with unit stride along K, row
 * stride cx->lda; the panel d of mr <= w rows from ir, kc deep from pc):
 * each row's pair p is the 32-bit word {x[2p], x[2p + 1]} already in
 * memory, so it is copied to lane i of pair row p, as $P_bfcv would leave
 * the fp32 panel (the odd last k paired with 0), without the fp32 pass. */
void cg_emit_bf16_pack_a_words(cg_out *o, int w) {
  cg_emit(o, "    for (int i = 0; i < mr; i++) {\n      const uint16_t *s = A + (ir + i) * cx->lda + pc;\n");
  cg_emit(o, "      float *q = d + i;\n      long k = 0;\n");
  cg_emit(o, "      for (; k + 1 < kc; k += 2, q += %d) memcpy(q, s + k, 4);\n", w);
  cg_emit(o, "      if (k < kc) { uint32_t v = s[k]; memcpy(q, &v, 4); }\n    }\n");
}

/* The statement `{dst}(..., p)` for 16 pair words p, word j {s0[j], s1[j]}
 * of two bf16 rows (j < n, the rest 0; s1 read as zeros where `odd`), at
 * indent ind: the halves moved as they are (zero-extended, the second
 * shifted into the high half), not widened to fp32 and rounded back with
 * vcvtne2ps2bf16 and a vpermw (the same words for every non-NaN value).
 * dst is a store taking the pointer and the vector ("_mm512_storeu_si512(d"
 * or a masked store "_mm512_mask_storeu_epi32(d, m"); n > 0. */
static void emit_bf16_pairs16(cg_out *o, const char *ind, const char *dst, const char *s0, const char *s1, const char *n,
                              const char *odd) {
  cg_emit(o, "%s{ __mmask16 mk = %s >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << %s) - 1u);\n", ind, n, n);
  cg_emit(o, "%s  __m512i w0 = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(mk, %s));\n", ind, s0);
  cg_emit(o, "%s  __m512i w1 = %s ? _mm512_setzero_si512() : _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(mk, %s));\n", ind,
          odd, s1);
  cg_emit(o, "%s  %s, _mm512_or_si512(w0, _mm512_slli_epi32(w1, 16))); }\n", ind, dst);
}

/* The statements of one step of an interleave (indent ind): 16 pair words
 * {x0[j], x1[j]} from s0 and s1 (xdt; j < n, the rest 0; s1 read as zeros
 * where `odd`) stored at dst with a mask of n lanes.  Other than bf16
 * sources round through fp32 and need `ix` (CG_BF16_IX) in scope. */
static void emit_ilv_step(cg_out *o, const char *ind, tiny_dtype xdt, const char *dst, const char *s0, const char *s1) {
  const char *sx = cg_vsuffix(xdt);
  char st[96];
  if (xdt == TINY_BF16) { /* the halves as they are (emit_bf16_pairs16) */
    snprintf(st, sizeof st, "_mm512_mask_storeu_epi32(%s, mk", dst);
    emit_bf16_pairs16(o, ind, st, s0, s1, "n", "odd");
    return;
  }
  cg_emit(o, "%s__m512 x0 = n == 16 ? $P_ld%s(%s) : $P_ldn%s(%s, n);\n", ind, sx, s0, sx, s0);
  cg_emit(o, "%s__m512 x1 = odd ? _mm512_setzero_ps() : n == 16 ? $P_ld%s(%s) : $P_ldn%s(%s, n);\n", ind, sx, s1, sx, s1);
  cg_emit(o, "%s__m512i p = _mm512_permutexvar_epi16(ix, (__m512i)_mm512_cvtne2ps_pbh(x1, x0));\n", ind);
  cg_emit(o, "%s_mm512_mask_storeu_epi32(%s, (__mmask16)((1u << n) - 1u), p);\n", ind, dst);
}

/* The 16-bit lane indices of vpermt2w that interleave the low (hi: the
 * high) 16 halves of two bf16 rows x0, x1 into pair words {x0[j], x1[j]}. */
#define CG_BF16_ILO                                                                                             \
  "_mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40, 8, 39, 7, 38, 6, 37, 5, 36, 4, 35, 3, " \
  "34, 2, 33, 1, 32, 0)"
#define CG_BF16_IHI                                                                                                  \
  "_mm512_set_epi16(63, 31, 62, 30, 61, 29, 60, 28, 59, 27, 58, 26, 57, 25, 56, 24, 55, 23, 54, 22, 53, 21, 52, 20, 51, " \
  "19, 50, 18, 49, 17, 48, 16)"

/* 32 pair words {s0[j], s1[j]} of two bf16 rows at dst (j < 32, all in
 * range): a vpermt2w per 16 words, where emit_bf16_pairs16 widens, shifts
 * and ors each half; ilo / ihi (CG_BF16_ILO, CG_BF16_IHI) in scope. */
static void emit_bf16_pairs32(cg_out *o, const char *ind, const char *dst, const char *s0, const char *s1) {
  cg_emit(o, "%s{ __m512i x0 = _mm512_loadu_si512(%s), x1 = _mm512_loadu_si512(%s);\n", ind, s0, s1);
  cg_emit(o, "%s  _mm512_storeu_si512(%s, _mm512_permutex2var_epi16(x0, ilo, x1));\n", ind, dst);
  cg_emit(o, "%s  _mm512_storeu_si512(%s + 16, _mm512_permutex2var_epi16(x0, ihi, x1)); }\n", ind, dst);
}

/* The loop (indent ind) interleaving w elements of the rows s0 + i and
 * s1 + i (xdt) into pair words at dst + i (emit_ilv_step, 16 a step; s0,
 * s1, dst: pointers without the "+ i"); bf16 rows take 32 a step first
 * where both rows are there (emit_bf16_pairs32). */
static void emit_ilv_loop(cg_out *o, const char *ind, tiny_dtype xdt, long w, const char *dst, const char *s0,
                          const char *s1) {
  char d[48], a[48], b[48], in2[24];
  snprintf(d, sizeof d, "%s + i", dst);
  snprintf(a, sizeof a, "%s + i", s0);
  snprintf(b, sizeof b, "%s + i", s1);
  snprintf(in2, sizeof in2, "%s  ", ind);
  cg_emit(o, "%slong i = 0;\n", ind);
  if (xdt == TINY_BF16 && w >= 32) {
    cg_emit(o, "%sconst __m512i ilo = " CG_BF16_ILO ", ihi = " CG_BF16_IHI ";\n", ind);
    cg_emit(o, "%sif (!odd)\n%s  for (; i + 32 <= %ldL; i += 32)\n", ind, ind, w);
    emit_bf16_pairs32(o, in2, d, a, b);
  }
  cg_emit(o, "%sfor (; i < %ldL; i += 16) {\n", ind, w);
  cg_emit(o, "%s  int n = %ldL - i < 16 ? (int)(%ldL - i) : 16;\n", ind, w, w);
  emit_ilv_step(o, in2, xdt, d, a, b);
  cg_emit(o, "%s}\n", ind);
}

/* $P_ilv(vc, task, tid): a pool task (vc a `ctx` with fields X and B),
 * plane `task` of nplanes of the interleaved input (cx->B, words): plane t pairs channels 2c and 2c + 1
 * (c = t % ceil(icg / 2)) of the group's icg channels (source planes of hw
 * elements of xdt at cx->X; the odd last channel with 0). */
void cg_emit_bf16_ilv(cg_out *o, const char *ctx, tiny_dtype xdt, int64_t nplanes, int64_t icg, int64_t hw) {
  const char *ct = cg_ctype(xdt);
  long icg2 = (long)((icg + 1) / 2);
  (void)nplanes;
  cg_emit(o, "static " CG_BF16_ATTR " void $P_ilv(void *vc, int task, int tid) {\n");
  cg_emit(o, "  const %s *cx = (const %s *)vc;\n  (void)tid;\n", ctx, ctx);
  cg_emit(o, "  long ng = task / %ldL, c = task %% %ldL;\n", icg2, icg2);
  cg_emit(o, "  const %s *s0 = (const %s *)cx->X + (ng * %ldL + 2 * c) * %ldL, *s1 = s0 + %ldL;\n", ct, ct, (long)icg,
          (long)hw, (long)hw);
  cg_emit(o, "  int odd = 2 * c + 1 >= %ldL;\n", (long)icg);
  cg_emit(o, "  int *d = (int *)cx->B + (long)task * %ldL;\n", (long)hw);
  if (xdt != TINY_BF16) cg_emit(o, "  const __m512i ix = " CG_BF16_IX ";\n");
  emit_ilv_loop(o, "  ", xdt, (long)hw, "d", "s0", "s1");
  cg_emit(o, "}\n");
}

/* Whether a conv with a kh x kw window, padding pt (top) and pl (left) and
 * g's sizes reads through g's view: a 1x1 window, a stride, no padding,
 * every output inside the input, rows of at most 4096 outputs (the stack
 * rows of the generic interleave). */
bool cg_bf16_sub_ok(const cg_bf16_sub *g, int64_t kh, int64_t kw, int64_t pt, int64_t pl) {
  if (kh != 1 || kw != 1 || pt || pl || g->sh < 1 || g->sw < 1 || (g->sh == 1 && g->sw == 1)) return false;
  return g->oh >= 1 && g->ow >= 1 && g->ow <= 4096 && (g->oh - 1) * g->sh < g->h && (g->ow - 1) * g->sw < g->w;
}

/* $P_ilv(vc, task, tid) through view g (cg_bf16_sub_ok): plane `task` of
 * the interleaved input at cx->B, g->oh x g->ow words, word (y, j)
 * {x[2c][y sh][j sw], x[2c + 1][y sh][j sw]} (c = task % ceil(icg / 2) of
 * the group's icg channels, source planes of g->h x g->w elements of xdt
 * at cx->X; the odd last channel with 0).  bf16 at sw == 2: 16 words from
 * one 32-element load of each row (the even halves kept); else the row's
 * pixels copied to the stack first, then paired (emit_ilv_loop). */
void cg_emit_bf16_ilv_sub(cg_out *o, const char *ctx, tiny_dtype xdt, int64_t icg, const cg_bf16_sub *g) {
  const char *ct = cg_ctype(xdt);
  long icg2 = (long)((icg + 1) / 2), hw = (long)(g->h * g->w), ow = (long)g->ow;
  cg_emit(o, "static " CG_BF16_ATTR " void $P_ilv(void *vc, int task, int tid) {\n");
  cg_emit(o, "  const %s *cx = (const %s *)vc;\n  (void)tid;\n", ctx, ctx);
  cg_emit(o, "  long ng = task / %ldL, c = task %% %ldL;\n", icg2, icg2);
  cg_emit(o, "  const %s *s0 = (const %s *)cx->X + (ng * %ldL + 2 * c) * %ldL, *s1 = s0 + %ldL;\n", ct, ct, (long)icg, hw, hw);
  cg_emit(o, "  int odd = 2 * c + 1 >= %ldL;\n", (long)icg);
  cg_emit(o, "  int *d = (int *)cx->B + (long)task * %ldL;\n", (long)(g->oh * g->ow));
  bool fast = xdt == TINY_BF16 && g->sw == 2;
  if (!fast) {
    if (xdt != TINY_BF16) cg_emit(o, "  const __m512i ix = " CG_BF16_IX ";\n");
    cg_emit(o, "  %s t0[%ld], t1[%ld];\n", ct, ow, ow);
  }
  cg_emit(o, "  for (long y = 0; y < %ldL; y++, d += %ldL) {\n", (long)g->oh, ow);
  cg_emit(o, "    const %s *r0 = s0 + y * %ldL, *r1 = s1 + y * %ldL;\n", ct, (long)(g->sh * g->w), (long)(g->sh * g->w));
  if (fast) {
    cg_emit(o, "    for (long j = 0; j < %ldL; j += 16) {\n", ow);
    cg_emit(o, "      int n = %ldL - j < 16 ? (int)(%ldL - j) : 16;\n", ow, ow);
    /* elements 0 .. 2n - 2 of the row from column 2j: the last read is the last pixel's */
    cg_emit(o, "      __mmask32 m = (__mmask32)((1ull << (2 * n - 1)) - 1u);\n");
    cg_emit(o, "      __m512i a = _mm512_maskz_loadu_epi16(m, r0 + 2 * j);\n");
    cg_emit(o, "      __m512i b = odd ? _mm512_setzero_si512() : _mm512_maskz_loadu_epi16(m, r1 + 2 * j);\n");
    cg_emit(o, "      __m512i v = _mm512_or_si512(_mm512_and_si512(a, _mm512_set1_epi32(0xffff)), _mm512_slli_epi32(b, 16));\n");
    cg_emit(o, "      _mm512_mask_storeu_epi32(d + j, (__mmask16)((1u << n) - 1u), v);\n    }\n  }\n}\n");
    return;
  }
  cg_emit(o, "    for (long j = 0; j < %ldL; j++) t0[j] = r0[j * %ldL], t1[j] = odd ? 0 : r1[j * %ldL];\n", ow,
          (long)g->sw, (long)g->sw);
  cg_emit(o, "    {\n");
  emit_ilv_loop(o, "      ", xdt, ow, "d", "t0", "t1");
  cg_emit(o, "    }\n  }\n}\n");
}

/* $P_ilv(vc, task, tid) padded (cgen_amx_conv.c's in-place conv): plane
 * `task` of the interleaved input at cx->B as g->hp x g->wp words (g->ps
 * apart, the words between zero), the
 * group's pair c = task % g->p16 (its channels 2c, 2c + 1 of g->icg at
 * cx->X, planes of g->h x g->w elements of xdt) placed at row g->pt,
 * column g->pl, zeros around it; pairs from ceil(icg / 2) on all zeros.
 * A stride (g->sh, g->sw not 1) writes the phase planes (emit_ilv_phases). */
/* Part of emit_ilv_phases for sw == 2: the interleaved row `row` (words,
 * 32-aligned) dealt to the phase rows at dr: its even columns x (padded
 * column x + pl) to phase (pl % 2) from column pl / 2, its odd ones to the
 * other phase from (pl + 1) / 2, 16 of each a step, at most g->wp a row;
 * with g->one only those of phase 0. */
static void emit_deal2(cg_out *o, const cg_ilv_pad *g) {
  long w = (long)g->w, pl = (long)g->pl, pq = (long)(g->hp * g->wp), wp = (long)g->wp;
  long ne = (w + 1) / 2, no = w / 2;
  if (ne > wp - pl / 2) ne = wp - pl / 2;
  if (no > wp - (pl + 1) / 2) no = wp - (pl + 1) / 2;
  if (no < 0) no = 0;
  cg_emit(o, "    int *pe = dr + %ldL, *po = dr + %ldL;\n", pl % 2 * pq + pl / 2, (pl + 1) % 2 * pq + (pl + 1) / 2);
  if (g->one) cg_emit(o, "    (void)%s;\n", pl % 2 ? "pe" : "po");
  cg_emit(o, "    for (long j = 0; j < %ldL; j += 16) {\n", ne > no ? ne : no);
  cg_emit(o, "      __m512i a = _mm512_load_si512(row + 2 * j), b = _mm512_load_si512(row + 2 * j + 16);\n");
  cg_emit(o, "      long ce = %ldL - j, co = %ldL - j;\n", ne, no);
  cg_emit(o, "      __mmask16 me = ce >= 16 ? 0xffff : ce > 0 ? (__mmask16)((1u << ce) - 1u) : 0;\n");
  cg_emit(o, "      __mmask16 mo = co >= 16 ? 0xffff : co > 0 ? (__mmask16)((1u << co) - 1u) : 0;\n");
  if (!g->one || pl % 2 == 0)
    cg_emit(o, "      _mm512_mask_storeu_epi32(pe + j, me, _mm512_permutex2var_epi32(a, _mm512_set_epi32("
               "30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0), b));\n");
  if (!g->one || pl % 2 == 1)
    cg_emit(o, "      _mm512_mask_storeu_epi32(po + j, mo, _mm512_permutex2var_epi32(a, _mm512_set_epi32("
               "31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1), b));\n");
  cg_emit(o, "    }\n");
}

/* The start of emit_ilv_phases' and emit_ilv_rows' $P_ilv: its pair c's
 * source planes s0, s1 (channels 2c, 2c + 1 of g->icg at cx->X, batch and
 * group ng), odd (no channel 2c + 1) and the row buffer on the stack. */
static void emit_ilv_src(cg_out *o, tiny_dtype xdt, const cg_ilv_pad *g) {
  const char *ct = cg_ctype(xdt);
  long hw = (long)(g->h * g->w), w = (long)g->w;
  cg_emit(o, "  const %s *s0 = (const %s *)cx->X + (ng * %ldL + 2 * c) * %ldL, *s1 = s0 + %ldL;\n", ct, ct, (long)g->icg,
          hw, hw);
  cg_emit(o, "  int odd = 2 * c + 1 >= %ldL;\n", (long)g->icg);
  if (xdt != TINY_BF16) cg_emit(o, "  const __m512i ix = " CG_BF16_IX ";\n");
  cg_emit(o, "  int row[%ld] __attribute__((aligned(64)));\n  memset(row, 0, sizeof row);\n", (w + 31) / 32 * 32);
}

/* One input row (s0, s1: the pair's rows, g->w elements) interleaved into
 * `row` (emit_ilv_step). */
static void emit_ilv_row(cg_out *o, tiny_dtype xdt, const cg_ilv_pad *g, const char *s0, const char *s1) {
  cg_emit(o, "    {\n");
  emit_ilv_loop(o, "      ", xdt, (long)g->w, "row", s0, s1);
  cg_emit(o, "    }\n");
}

/* The interleaved row `row` dealt to the g->sw column phases of the row at
 * dr (phase column b g->hp g->wp words on; with g->one phase 0 alone). */
static void emit_deal(cg_out *o, const cg_ilv_pad *g) {
  long sw = (long)g->sw, w = (long)g->w, pq = (long)(g->hp * g->wp);
  if (sw == 2) {
    emit_deal2(o, g);
    return;
  }
  for (long b = 0; b < (g->one ? 1 : sw); b++) { /* phase column b: input columns x with (x + pl) % sw == b */
    long x0 = (((b - (long)g->pl) % sw) + sw) % sw;
    cg_emit(o, "    for (long x = %ldL, xx = %ldL; x < %ldL && xx < %ldL; x += %ldL, xx++) dr[%ldL + xx] = row[x];\n", x0,
            (x0 + (long)g->pl) / sw, w, (long)g->wp, sw, b * pq);
  }
}

/* $P_ilv for a stride g->sh x g->sw (cg_emit_bf16_ilv_pad): plane `task`
 * (g->ps words at cx->B) zeroed, then each of its pair's rows interleaved
 * into a row on the stack whose columns are dealt to the g->sw phase planes
 * of the row's phase (cg_ilv_pad); rows and columns past the phase planes'
 * g->hp x g->wp (never read) are dropped; with g->one, the rows and
 * columns of phases other than (0, 0) too (never read). */
static void emit_ilv_phases(cg_out *o, const char *ctx, tiny_dtype xdt, const cg_ilv_pad *g) {
  long icg2 = (long)((g->icg + 1) / 2), w = (long)g->w, pq = (long)(g->hp * g->wp);
  long sh = (long)g->sh, sw = (long)g->sw;
  cg_emit(o, "static " CG_BF16_ATTR " void $P_ilv(void *vc, int task, int tid) {\n");
  cg_emit(o, "  const %s *cx = (const %s *)vc;\n  (void)tid;\n", ctx, ctx);
  cg_emit(o, "  long ng = task / %ldL, c = task %% %ldL;\n", (long)g->p16, (long)g->p16);
  cg_emit(o, "  int *d = (int *)cx->B + (long)task * %ldL;\n", (long)g->ps);
  cg_emit(o, "  memset(d, 0, %ldUL);\n  if (c >= %ldL) return;\n", (long)g->ps * 4, icg2);
  emit_ilv_src(o, xdt, g);
  cg_emit(o, "  for (long y = 0; y < %ldL; y++, s0 += %ldL, s1 += %ldL) {\n", (long)g->h, w, w);
  cg_emit(o, "    long yr = y + %ldL, yy = yr / %ldL;\n    if (yy >= %ldL) break;\n", (long)g->pt, sh, (long)g->hp);
  if (g->one && sh > 1) cg_emit(o, "    if (yr %% %ldL) continue;\n", sh);
  cg_emit(o, "    int *dr = d + yr %% %ldL * %ldL + yy * %ldL;\n", sh, g->one ? 0L : sw * pq, (long)g->wp);
  emit_ilv_row(o, xdt, g, "s0", "s1");
  emit_deal(o, g);
  cg_emit(o, "  }\n}\n");
}

/* $P_ilv for row-expanded planes (g->xk > 1: cg_ilv_pad): plane `task`
 * (g->ps words at cx->B) zeroed, virtual pair v = task % g->p16 (channel
 * pair v / xk, window row ky = v % xk) from v < ceil(icg / 2) xk on: its
 * row yy of g->hp is the input's row yy sh + ky xd - pt of that pair (zero
 * outside the image), interleaved on the stack and dealt to the g->sw
 * column phases (emit_deal). */
static void emit_ilv_rows(cg_out *o, const char *ctx, tiny_dtype xdt, const cg_ilv_pad *g) {
  const char *ct = cg_ctype(xdt);
  long nv = (long)((g->icg + 1) / 2 * g->xk), w = (long)g->w;
  cg_emit(o, "static " CG_BF16_ATTR " void $P_ilv(void *vc, int task, int tid) {\n");
  cg_emit(o, "  const %s *cx = (const %s *)vc;\n  (void)tid;\n", ctx, ctx);
  cg_emit(o, "  long ng = task / %ldL, v = task %% %ldL, c = v / %ldL, ky = v %% %ldL;\n", (long)g->p16, (long)g->p16,
          (long)g->xk, (long)g->xk);
  cg_emit(o, "  int *d = (int *)cx->B + (long)task * %ldL;\n", (long)g->ps);
  cg_emit(o, "  memset(d, 0, %ldUL);\n  if (v >= %ldL) return;\n", (long)g->ps * 4, nv);
  emit_ilv_src(o, xdt, g);
  cg_emit(o, "  for (long yy = 0; yy < %ldL; yy++) {\n", (long)g->hp);
  cg_emit(o, "    long y = yy * %ldL + ky * %ldL - %ldL;\n    if (y < 0 || y >= %ldL) continue;\n", (long)g->sh,
          (long)g->xd, (long)g->pt, (long)g->h);
  cg_emit(o, "    const %s *r0 = s0 + y * %ldL, *r1 = s1 + y * %ldL;\n    int *dr = d + yy * %ldL;\n", ct, w, w, (long)g->wp);
  emit_ilv_row(o, xdt, g, "r0", "r1");
  emit_deal(o, g);
  cg_emit(o, "  }\n}\n");
}

void cg_emit_bf16_ilv_pad(cg_out *o, const char *ctx, tiny_dtype xdt, const cg_ilv_pad *g) {
  if (g->xk > 1) {
    emit_ilv_rows(o, ctx, xdt, g);
    return;
  }
  if (g->sh > 1 || g->sw > 1) {
    emit_ilv_phases(o, ctx, xdt, g);
    return;
  }
  const char *ct = cg_ctype(xdt);
  long icg2 = (long)((g->icg + 1) / 2), pl = (long)(g->hp * g->wp), hw = (long)(g->h * g->w), w = (long)g->w;
  cg_emit(o, "static " CG_BF16_ATTR " void $P_ilv(void *vc, int task, int tid) {\n");
  cg_emit(o, "  const %s *cx = (const %s *)vc;\n  (void)tid;\n", ctx, ctx);
  cg_emit(o, "  long ng = task / %ldL, c = task %% %ldL;\n", (long)g->p16, (long)g->p16);
  cg_emit(o, "  int *d = (int *)cx->B + (long)task * %ldL;\n", (long)g->ps);
  if (g->ps > pl) cg_emit(o, "  memset(d + %ldL, 0, %ldUL);\n", pl, ((long)g->ps - pl) * 4);
  cg_emit(o, "  if (c >= %ldL) { memset(d, 0, %ldUL); return; }\n", icg2, pl * 4);
  cg_emit(o, "  const %s *s0 = (const %s *)cx->X + (ng * %ldL + 2 * c) * %ldL, *s1 = s0 + %ldL;\n", ct, ct, (long)g->icg,
          hw, hw);
  cg_emit(o, "  int odd = 2 * c + 1 >= %ldL;\n", (long)g->icg);
  if (xdt != TINY_BF16) cg_emit(o, "  const __m512i ix = " CG_BF16_IX ";\n");
  cg_emit(o, "  memset(d, 0, %ldUL);\n", (long)(g->pt * g->wp) * 4);
  cg_emit(o, "  for (long y = 0; y < %ldL; y++, s0 += %ldL, s1 += %ldL) {\n", (long)g->h, w, w);
  cg_emit(o, "    int *r = d + (y + %ldL) * %ldL + %ldL;\n", (long)g->pt, (long)g->wp, (long)g->pl);
  if (g->pl) cg_emit(o, "    memset(r - %ldL, 0, %ldUL);\n", (long)g->pl, (long)g->pl * 4);
  if (g->wp - g->pl - g->w)
    cg_emit(o, "    memset(r + %ldL, 0, %ldUL);\n", w, (long)(g->wp - g->pl - g->w) * 4);
  cg_emit(o, "    {\n");
  emit_ilv_loop(o, "      ", xdt, w, "r", "s0", "s1");
  cg_emit(o, "    }\n  }\n");
  cg_emit(o, "  memset(d + %ldL, 0, %ldUL);\n}\n", (long)((g->pt + g->h) * g->wp), (long)((g->hp - g->pt - g->h) * g->wp) * 4);
}

/* $P_wpairs(W, d): the weight W ([rows][icg][khw] of wdt) as channel-pair
 * words d[rows][ceil(icg / 2) * khw] (pair c, window tap j at c * khw + j),
 * rounded to nearest even; run once per packing. */
void cg_emit_bf16_wpairs(cg_out *o, tiny_dtype wdt, int64_t rows, int64_t icg, int64_t khw) {
  char lo[200], hi[200], il[64], ih[64];
  long icg2 = (long)((icg + 1) / 2), kd = (long)(icg * khw);
  snprintf(il, sizeof il, "2 * c * %ldL + j", (long)khw);
  snprintf(ih, sizeof ih, "(2 * c + 1) * %ldL + j", (long)khw);
  cg_scalar_ld(o, lo, sizeof lo, wdt, "w", il);
  cg_scalar_ld(o, hi, sizeof hi, wdt, "w", ih);
  cg_emit(o, "static void $P_wpairs(const void *W, uint32_t *d) {\n");
  cg_emit(o, "  for (long r = 0; r < %ldL; r++) {\n", (long)rows);
  cg_emit(o, "    const %s *w = (const %s *)W + r * %ldL;\n", cg_ctype(wdt), cg_ctype(wdt), kd);
  cg_emit(o, "    uint32_t *q = d + r * %ldL;\n", icg2 * (long)khw);
  cg_emit(o, "    for (long c = 0; c < %ldL; c++)\n      for (long j = 0; j < %ldL; j++) {\n", icg2, (long)khw);
  cg_emit(o, "        float a = %s, b = 2 * c + 1 < %ldL ? %s : 0.0f;\n", lo, (long)icg, hi);
  cg_emit(o, "        q[c * %ldL + j] = (uint32_t)$F_f2b(a) | (uint32_t)$F_f2b(b) << 16;\n      }\n  }\n}\n", (long)khw);
}

/* $P_packB for a B with unit stride along N (rows of bdt, row stride sk,
 * batch strides sb0, sb1): panels of nr = 16 * nv columns written as pair
 * rows directly, rows 2p and 2p + 1 rounded and interleaved in registers
 * (no fp32 panel, no $P_bfcv); lanes past the matrix are 0. */
void cg_emit_bf16_pack_b_rows(cg_out *o, tiny_dtype bdt, int64_t sb0, int64_t sb1, int64_t sk, int nv) {
  const char *bt = cg_ctype(bdt), *sx = cg_vsuffix(bdt);
  int nr = 16 * nv;
  cg_emit(o, "static " CG_BF16_ATTR " void $P_packB(const $F_ctx *cx, long b0, long b1, long k0, long kc, long n0, long nc,"
             " float *restrict Bp) {\n");
  cg_emit(o, "  const %s *B = (const %s *)cx->B + b0 * %ldL + b1 * %ldL;\n", bt, bt, (long)sb0, (long)sb1);
  if (bdt != TINY_BF16) cg_emit(o, "  const __m512i ix = " CG_BF16_IX ";\n");
  else if (nv % 2 == 0) cg_emit(o, "  const __m512i ilo = " CG_BF16_ILO ", ihi = " CG_BF16_IHI ";\n");
  cg_emit(o, "  for (long jr = 0; jr < nc; jr += %d) {\n", nr);
  cg_emit(o, "    int nr = nc - jr < %d ? (int)(nc - jr) : %d;\n    int *d = (int *)(Bp + jr * kc);\n", nr, nr);
  cg_emit(o, "    const %s *s = B + k0 * %ldL + n0 + jr;\n", bt, (long)sk);
  cg_emit(o, "    for (long k = 0; k < kc; k += 2, s += %ldL, d += %d) {\n", 2 * (long)sk, nr);
  cg_emit(o, "      int odd = k + 1 >= kc;\n");
  if (bdt == TINY_BF16 && nv % 2 == 0) { /* a whole panel of both rows: 32 words a vpermt2w pair */
    cg_emit(o, "      if (nr == %d && !odd) {\n", nr);
    for (int q = 0; q < nr; q += 32) {
      char dst[24], s0[24], s1[48];
      snprintf(dst, sizeof dst, "d + %d", q);
      snprintf(s0, sizeof s0, "s + %d", q);
      snprintf(s1, sizeof s1, "s + %ldL + %d", (long)sk, q);
      emit_bf16_pairs32(o, "        ", dst, s0, s1);
    }
    cg_emit(o, "        continue;\n      }\n");
  }
  for (int v = 0; bdt == TINY_BF16 && v < nv; v++) { /* the halves as they are; columns past nr 0 */
    char dst[48], s0[24], s1[40], n[24];
    snprintf(dst, sizeof dst, "_mm512_storeu_si512(d + %d", 16 * v);
    snprintf(s0, sizeof s0, "s + %d", 16 * v);
    snprintf(s1, sizeof s1, "s + %ldL + %d", (long)sk, 16 * v);
    snprintf(n, sizeof n, "(nr - %d)", 16 * v);
    if (v) cg_emit(o, "      if (nr <= %d) _mm512_storeu_si512(d + %d, _mm512_setzero_si512());\n      else ", 16 * v, 16 * v);
    emit_bf16_pairs16(o, v ? "" : "      ", dst, s0, s1, n, "odd");
  }
  for (int v = 0; bdt != TINY_BF16 && v < nv; v++) {
    cg_emit(o, "      { int n = nr - %d; __m512 x0 = _mm512_setzero_ps(), x1 = x0;\n", 16 * v);
    cg_emit(o, "        if (n >= 16) { x0 = $P_ld%s(s + %d); if (!odd) x1 = $P_ld%s(s + %ldL + %d); }\n", sx, 16 * v, sx,
            (long)sk, 16 * v);
    cg_emit(o, "        else if (n > 0) { x0 = $P_ldn%s(s + %d, n); if (!odd) x1 = $P_ldn%s(s + %ldL + %d, n); }\n", sx,
            16 * v, sx, (long)sk, 16 * v);
    cg_emit(o, "        _mm512_storeu_si512(d + %d, _mm512_permutexvar_epi16(ix, (__m512i)_mm512_cvtne2ps_pbh(x1, x0))); }\n",
            16 * v);
  }
  cg_emit(o, "    }\n  }\n}\n");
}

/* $P_ilv(vc, task, tid) for column pairs: pool tasks (vc a `ctx` with
 * fields X and B) of CG_ILV_ROWS rows of a plane of h rows of w elements of
 * xdt at cx->X (task / ceil(h / CG_ILV_ROWS) the plane), written to cx->B
 * as rows of w + sh words, word u of a row {bf16(x[u - sh]), bf16(x[u - sh
 * + 1])} (0 outside the row; sh is 0 or 1).  Each row goes through a
 * zero-padded float row on the stack.  Returns the tasks per plane. */
#define CG_ILV_ROWS 16
long cg_emit_bf16_ilv_cols(cg_out *o, const char *ctx, tiny_dtype xdt, int64_t h, int64_t w, int sh) {
  const char *sx = cg_vsuffix(xdt), *ct = cg_ctype(xdt);
  long w2 = (long)w + sh, tn = (long)cg_rup(w2 + 1, 16) + 16; /* every load of the row below stays inside */
  long nrc = ((long)h + CG_ILV_ROWS - 1) / CG_ILV_ROWS;
  cg_emit(o, "static " CG_BF16_ATTR " void $P_ilv(void *vc, int task, int tid) {\n");
  cg_emit(o, "  const %s *cx = (const %s *)vc;\n  (void)tid;\n", ctx, ctx);
  cg_emit(o, "  float t[%ldL] __attribute__((aligned(64)));\n  memset(t, 0, sizeof t);\n", tn);
  cg_emit(o, "  const __m512i ix = " CG_BF16_IX ";\n");
  cg_emit(o, "  long pl = task / %ldL, r0 = task %% %ldL * %dL, r1 = r0 + %dL < %ldL ? r0 + %dL : %ldL;\n", nrc, nrc,
          CG_ILV_ROWS, CG_ILV_ROWS, (long)h, CG_ILV_ROWS, (long)h);
  cg_emit(o, "  for (long r = r0; r < r1; r++) {\n");
  cg_emit(o, "    const %s *s = (const %s *)cx->X + (pl * %ldL + r) * %ldL;\n", ct, ct, (long)h, (long)w);
  cg_emit(o, "    int *d = (int *)cx->B + (pl * %ldL + r) * %ldL;\n", (long)h, w2);
  cg_emit(o, "    for (long i = 0; i < %ldL; i += 16) {\n", (long)w);
  cg_emit(o, "      int n = %ldL - i < 16 ? (int)(%ldL - i) : 16;\n", (long)w, (long)w);
  cg_emit(o, "      _mm512_storeu_ps(t + %d + i, n == 16 ? $P_ld%s(s + i) : $P_ldn%s(s + i, n));\n    }\n", sh, sx, sx);
  cg_emit(o, "    for (long u = 0; u < %ldL; u += 16) {\n", w2);
  cg_emit(o, "      int n = %ldL - u < 16 ? (int)(%ldL - u) : 16;\n", w2, w2);
  cg_emit(o, "      __m512 x0 = _mm512_loadu_ps(t + u), x1 = _mm512_loadu_ps(t + u + 1);\n");
  cg_emit(o, "      __m512i p = _mm512_permutexvar_epi16(ix, (__m512i)_mm512_cvtne2ps_pbh(x1, x0));\n");
  cg_emit(o, "      _mm512_mask_storeu_epi32(d + u, (__mmask16)((1u << n) - 1u), p);\n    }\n  }\n}\n");
  return nrc;
}

/* $P_wpairs(W, d) for column pairs: the weight W (rows of kw taps of wdt)
 * as d[rows][ceil(kw / 2)] words {bf16(w[2t]), bf16(w[2t + 1])}, the odd
 * last tap paired with 0; run once per packing. */
void cg_emit_bf16_wpairs_cols(cg_out *o, tiny_dtype wdt, int64_t rows, int64_t kw) {
  char lo[200], hi[200];
  long kw2 = (long)((kw + 1) / 2);
  cg_scalar_ld(o, lo, sizeof lo, wdt, "w", "2 * t");
  cg_scalar_ld(o, hi, sizeof hi, wdt, "w", "2 * t + 1");
  cg_emit(o, "static void $P_wpairs(const void *W, uint32_t *d) {\n");
  cg_emit(o, "  for (long r = 0; r < %ldL; r++) {\n", (long)rows);
  cg_emit(o, "    const %s *w = (const %s *)W + r * %ldL;\n", cg_ctype(wdt), cg_ctype(wdt), (long)kw);
  cg_emit(o, "    for (long t = 0; t < %ldL; t++) {\n", kw2);
  cg_emit(o, "      float a = %s, b = 2 * t + 1 < %ldL ? %s : 0.0f;\n", lo, (long)kw, hi);
  cg_emit(o, "      d[r * %ldL + t] = (uint32_t)$F_f2b(a) | (uint32_t)$F_f2b(b) << 16;\n    }\n  }\n}\n", kw2);
}
