/* cgen_wino_avx2.c — the AVX2 input and output transforms of the Winograd
 * convolution (the rest of the kernel, and its plan, in cgen_wino.c).
 * Needs: cgen_wino_int.h.  Gives: cg_wn_itrans_avx2, cg_wn_otrans_avx2.
 *
 * A vector is 8 tiles of the image (any 8: cg_wn.rows is never set for
 * AVX2), lane l's points at the gather indices ix / ox[..][l] of $P_index
 * with validity bit l of im / om[..] (0: in the padding, past the edge, or
 * no tile).  Inputs are masked gathers (vgatherdps, 0 where the bit is
 * clear); the output transform's results, after the epilogue (a residual
 * gathered like the input), are stored lane by lane where the bit is set:
 * AVX2 has no scatter. */
#include <stdio.h>

#include "backend/c/cgen_wino_int.h"

/* $P_wbm(k): the 8 bits of k as a gather mask (lane l all ones where bit l is set). */
static void emit_bitmask(cg_out *o) {
  cg_emit(o, "$I __m256 $P_wbm(unsigned k) {\n  const __m256i b = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);\n");
  cg_emit(o, "  return _mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32((int)k), b), b));\n}\n");
}

/* Input transform of channel c of one image (x: its plane) into V, and the
 * mask helper both transforms use. */
void cg_wn_itrans_avx2(cg_out *o, const cg_wn *d) {
  char dst[64];
  int a = d->a;
  emit_bitmask(o);
  cg_emit(o, "static $T void $P_itrans(const float *x, long c, int ix[][8], const uint16_t *im, float *V) {\n");
  cg_emit(o, "  for (int v = 0; v < %d; v++) {\n    __m256 d[%d], e[%d][%d];\n", d->nv, a, a, a);
  for (int r = 0; r < a; r++) {
    for (int k = 0; k < a; k++)
      cg_emit(o, "    d[%d] = _mm256_mask_i32gather_ps(_mm256_setzero_ps(), x, "
                 "_mm256_loadu_si256((const __m256i *)ix[(v * %d + %d) * %d + %d]), $P_wbm(im[v * %d + %d]), 4);\n",
              k, a, r, a, k, d->T, r * a + k);
    for (int j = 0; j < a; j++) {
      snprintf(dst, sizeof dst, "    e[%d][%d]", r, j);
      cg_wn_lin(o, d, dst, d->bt + j * a, a, "d[%d]");
    }
  }
  cg_wn_vstore(o, d);
  cg_emit(o, "  }\n}\n");
}

/* Output point (i, j) of vector v: the epilogue on x, then the lanes whose
 * bit b is set into y (channel oc's plane) at the indices oi. */
static void emit_opoint(cg_out *o, const cg_wn *d, int i, int j) {
  const cgen_conv_spec *s = d->s;
  int m = d->m;
  cg_emit(o, "      unsigned b = om[v * %d + %d];\n", m * m, i * m + j);
  cg_emit(o, "      const int *oi = ox[(v * %d + %d) * %d + %d];\n", m, i, m, j);
  for (int e = 0; e < s->n_epi; e++) {
    const cgen_epi *ep = &s->epi[e];
    if (cg_emit_epi_common(o, ep, e, "oc", "x")) continue;
    if (ep->kind == CGEN_EPI_RESIDUAL)
      cg_emit(o, "      { __m256 rv = _mm256_mask_i32gather_ps(_mm256_setzero_ps(), (const float *)tt->ep[%d] + oc * %ldL, "
                 "_mm256_loadu_si256((const __m256i *)oi), $P_wbm(b), 4); x = x %s rv; }\n",
              e, (long)(d->OH * d->OW), ep->mul ? "*" : "+");
  }
  cg_emit(o, "      float t[8];\n      _mm256_storeu_ps(t, x);\n");
  cg_emit(o, "      for (int l = 0; l < 8; l++) if (b >> l & 1u) y[oi[l]] = t[l];\n");
}

/* Output transform, epilogue and store of channel oc (row r of M). */
void cg_wn_otrans_avx2(cg_out *o, const cg_wn *d) {
  int a = d->a, m = d->m;
  char fmt[32];
  cg_emit(o, "static $T void $P_otrans(const $P_wtt *tt, const float *M, int r, long oc, int ox[][8], const uint16_t *om) {\n");
  cg_emit(o, "  float *y = (float *)tt->y + oc * %ldL;\n", (long)(d->OH * d->OW));
  cg_emit(o, "  for (int v = 0; v < %d; v++) {\n    __m256 q[%d], sm[%d][%d];\n", d->nv, d->T, m, a);
  cg_wn_ocols(o, d);
  for (int i = 0; i < m; i++)
    for (int j = 0; j < m; j++) {
      cg_emit(o, "    {\n      __m256 x;\n");
      snprintf(fmt, sizeof fmt, "sm[%d][%%d]", i);
      cg_wn_lin(o, d, "      x", d->at + j * a, a, fmt);
      emit_opoint(o, d, i, j);
      cg_emit(o, "    }\n");
    }
  cg_emit(o, "  }\n}\n");
}
