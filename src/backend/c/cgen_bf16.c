/* cgen_bf16.c — the bf16 pieces of the GEMM / implicit-GEMM convolution
 * template (cgen_gemm.c) for harp_options.precision = "bf16": the AVX-512
 * variant multiplies bf16 operands with vdpbf16ps and accumulates in fp32.
 * Needs: cgen_int.h.  Gives: cg_emit_bf16_cvt, cg_emit_bf16_kernel,
 * CG_BF16_ATTR.
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
 * the fp32 template's. */
#include <stdio.h>

#include "backend/c/cgen_int.h"

/* $P_bfcv(d, kc, w): the panel d of kc rows of w floats, in place, to pair rows. */
void cg_emit_bf16_cvt(cg_out *o) {
  cg_emit(o, "static " CG_BF16_ATTR " __attribute__((unused)) void $P_bfcv(float *d, long kc, int w) {\n");
  /* output lane 2j <- x0[j], 2j+1 <- x1[j]: cvtne2ps_pbh(x1, x0) holds x0 in
   * its low 16 bf16 and x1 in the high 16 */
  cg_emit(o, "  const __m512i ix = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8,\n"
             "      23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);\n");
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
 * (pairs: (kc + 1) / 2); B prefetched pf pair rows ahead; c_sm > 0: C's
 * rows prefetched for the store (C is the fp32 accumulator). */
void cg_emit_bf16_kernel(cg_out *o, int mr, int nv, int tmr, int tnr, int pf, long c_sm) {
  cg_emit(o, "static " CG_BF16_ATTR " void $P_k%d_%d(long kc, const float *restrict a, const float *restrict b,\n"
             "    const $F_tt *tt, long m, long n, int nr, int first, int last) {\n", mr, nv);
  for (int i = 0; i < mr; i++)
    for (int j = 0; j < nv; j++) cg_emit(o, "  __m512 c%d_%d = _mm512_setzero_ps();\n", i, j);
  if (c_sm > 0)
    for (int i = 0; i < mr; i++)
      for (int l = 0; l < (nv * 64 + 63) / 64; l++)
        cg_emit(o, "  __builtin_prefetch((const float *)tt->c + (m + %d) * %ldL + n + %d, 1);\n", i, c_sm, l * 16);
  cg_emit(o, "  const int *ap = (const int *)a;\n  long kp = (kc + 1) >> 1;\n");
  cg_emit(o, "#pragma GCC unroll 4\n  for (long k = 0; k < kp; k++) {\n");
  if (pf > 0)
    for (int l = 0; l < nv; l++) cg_emit(o, "    __builtin_prefetch(b + (k + %d) * %d + %d);\n", pf, tnr, l * 16);
  for (int j = 0; j < nv; j++) cg_emit(o, "    __m512bh b%d = (__m512bh)_mm512_loadu_ps(b + k * %d + %d);\n", j, tnr, j * 16);
  for (int i = 0; i < mr; i++) {
    cg_emit(o, "    { __m512bh av = (__m512bh)_mm512_set1_epi32(ap[k * %d + %d]);", tmr, i);
    for (int j = 0; j < nv; j++) cg_emit(o, " c%d_%d = _mm512_dpbf16_ps(c%d_%d, av, b%d);", i, j, i, j, j);
    cg_emit(o, " }\n");
  }
  cg_emit(o, "  }\n");
  for (int i = 0; i < mr; i++) {
    cg_emit(o, "  $P_row%d(tt, m + %d, n, nr, first, last", nv, i);
    for (int j = 0; j < nv; j++) cg_emit(o, ", c%d_%d", i, j);
    cg_emit(o, ");\n");
  }
  cg_emit(o, "}\n");
}

/* $P_packA_task: the fp32 packer's task ($P_packA_task0: panel group g of
 * `groups`, span rows of A each, of KC block pb for batch ba), then its
 * panels (mr wide, mp rows of A in all) to pair rows. */
void cg_emit_bf16_pack_a(cg_out *o, int64_t groups, int64_t span, int64_t mp, int mr) {
  cg_emit(o, "static $T void $P_packA_task(void *vc, int task, int tid) {\n");
  cg_emit(o, "  $P_packA_task0(vc, task, tid);\n  const $F_ctx *cx = (const $F_ctx *)vc;\n");
  cg_emit(o, "  long g = task %% %ldL, r = task / %ldL, pb = r %% cx->nkb, ba = r / cx->nkb;\n", (long)groups,
          (long)groups);
  cg_emit(o, "  long pc = pb * cx->kc, kc = cx->K - pc < cx->kc ? cx->K - pc : cx->kc;\n");
  cg_emit(o, "  float *Ap = cx->Ap + ba * cx->K * %ldL + pc * %ldL;\n", (long)mp, (long)mp);
  cg_emit(o, "  long ir1 = (g + 1) * %ldL < %ldL ? (g + 1) * %ldL : %ldL;\n", (long)span, (long)mp, (long)span, (long)mp);
  cg_emit(o, "  for (long ir = g * %ldL; ir < ir1; ir += %d) $P_bfcv(Ap + ir * kc, kc, %d);\n}\n", (long)span, mr, mr);
}
