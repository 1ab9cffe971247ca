/* cgen_wino_avx2.c — the AVX2 input and output transforms of the Winograd
 * convolution (the rest of the kernel, and its plan, in cgen_wino.c):
 * the mask helper, the input gathers and the output points.
 * Needs: cgen_wino_int.h.  Gives: cg_wn_avx2_helpers, cg_wn_gather_avx2,
 * cg_wn_opoint_avx2 (what cgen_wino.c's transforms emit for AVX2).
 *
 * A vector is 8 tiles of the image (any 8: cg_wn.rows is never set for
 * AVX2), lane l's points at the gather indices ix / ox[..][l] of $P_index
 * with validity bit l of im / om[..] (0: in the padding, past the edge, or
 * no tile).  Inputs are masked gathers (vgatherdps, 0 where the bit is
 * clear); the output transform's results, after the epilogue (a residual
 * gathered like the input), are stored lane by lane where the bit is set:
 * AVX2 has no scatter. */
#include "backend/c/cgen_wino_int.h"

/* $P_wbm(k): the 8 bits of k as a gather mask (lane l all ones where bit l is set). */
void cg_wn_avx2_helpers(cg_out *o) {
  cg_emit(o, "$I __m256 $P_wbm(unsigned k) {\n  const __m256i b = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);\n");
  cg_emit(o, "  return _mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32((int)k), b), b));\n}\n");
}

void cg_wn_gather_avx2(cg_out *o, const cg_wn *d, int r, int k) {
  int a = d->a;
  cg_emit(o, "    d[%d] = _mm256_mask_i32gather_ps(_mm256_setzero_ps(), x, "
             "_mm256_loadu_si256((const __m256i *)ix[(v * %d + %d) * %d + %d]), $P_wbm(im[v * %d + %d]), 4);\n",
          k, a, r, a, k, d->T, r * a + k);
}

void cg_wn_opoint_avx2(cg_out *o, const cg_wn *d, int i, int j) {
  int m = d->m;
  cg_emit(o, "      unsigned b = om[v * %d + %d];\n", m * m, i * m + j);
  cg_emit(o, "      const int *oi = ox[(v * %d + %d) * %d + %d];\n", m, i, m, j);
  cg_wn_epilogue(o, d);
  cg_emit(o, "      float t[8];\n      _mm256_storeu_ps(t, x);\n");
  cg_emit(o, "      for (int l = 0; l < 8; l++) if (b >> l & 1u) y[oi[l]] = t[l];\n    }\n");
}
