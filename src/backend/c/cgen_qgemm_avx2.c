/* cgen_qgemm_avx2.c — the AVX2 micro-kernel of the int8 GEMM (cgen_qgemm.c):
 * exact u8 x s8 -> s32 products with AVX2 only, for CPUs without AVX-512
 * VNNI, on the VNNI variant's packed layouts (one packed weight for both).
 * Needs: cgen_qgemm_int.h.  Gives: cg_qg2_emit_tile.
 *
 * Exactness.  vpmaddubsw (u8 x s8, adjacent pairs summed to int16)
 * saturates: 255 * 127 * 2 > 32767.  The u8 operand u is split into
 * u & 0x7f and u & 0x80: the pair sums of the first lie in [-32512, 32258],
 * of the second (0 or 128 times a sum of two s8) in [-32768, 32512], so
 * both are exact; vpmaddwd by ones turns each into the int32 sum of the
 * word's 4 products, and both are added to the int32 accumulator.  The u8
 * operand is the activation: the B vector when the weight is A (split once
 * per vector, shared by the rows), else the broadcast A word (split once
 * per row, shared by the vectors).  The same integers as vpdpbusd, so the
 * requantization (the VNNI epilogue's operations in the same order: fp32
 * acc + c0 times mult, clamp, round to nearest even, + zy) gives the same
 * bytes.
 *
 * Tile.  The contract of the VNNI tile: MR = 6 rows of A times nv vectors
 * of 16 columns of a 64-column B block, kn depth words, partial sums in acc
 * between depth blocks.  With 16 ymm registers it runs as sub-tiles of 3
 * rows x 16 columns (6 accumulators), B re-read from L1 for the second
 * row group. */
#include <stdio.h>
#include <string.h>

#include "backend/c/cgen_qgemm_int.h"

/* The store of one value (scalar, `t` in fp32) at output offset `off`. */
static void emit_sstore(cg_out *o, const cgen_qgemm_spec *s, const char *t, const char *off) {
  const char *yt = s->y_dtype == TINY_I8 ? "int8_t" : "uint8_t";
  if (s->y_dtype == TINY_FP32) {
    cg_emit(o, "((float *)y)[%s] = %s;", off, t);
    return;
  }
  float flo = (float)(s->lo - s->zy), fhi = (float)(s->hi - s->zy);
  cg_emit(o, "{ float u = %s < %.1ff ? %.1ff : %s > %.1ff ? %.1ff : %s; ((%s *)y)[%s] = (%s)((int)nearbyintf(u) + %d); }", t,
          (double)flo, (double)flo, t, (double)fhi, (double)fhi, t, yt, off, yt, (int)s->zy);
}

/* The store of 8 values (ymm v) at output offset `off`, all on the output. */
static void emit_vstore(cg_out *o, const cgen_qgemm_spec *s, const char *off) {
  if (s->y_dtype == TINY_FP32) {
    cg_emit(o, "    _mm256_storeu_ps((float *)y + %s, v);\n", off);
    return;
  }
  float flo = (float)(s->lo - s->zy), fhi = (float)(s->hi - s->zy);
  cg_emit(o, "    v = _mm256_min_ps(_mm256_max_ps(v, _mm256_set1_ps(%.1ff)), _mm256_set1_ps(%.1ff));\n", (double)flo, (double)fhi);
  cg_emit(o, "    __m256i r = _mm256_add_epi32(_mm256_cvtps_epi32(v), _mm256_set1_epi32(%d));\n", (int)s->zy);
  /* in [lo, hi] within the byte's range: both packs exact */
  cg_emit(o, "    __m128i h = _mm_packs_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));\n");
  cg_emit(o, "    _mm_storel_epi64((__m128i *)((uint8_t *)y + %s), _mm_%s_epi16(h, h));\n", off, s->y_dtype == TINY_I8 ? "packs" : "packus");
}

/* $P_st(y, v, row, q): the 8 requantized values v of output row `row`,
 * tile columns q .. q + 7 (of the padded-width grid where d->cd: those on
 * the image, each where it goes), one vector store where all 8 are there,
 * else lane by lane. */
static void emit_st(cg_out *o, const cgen_qgemm_spec *s, const qg_dims *d) {
  long N = (long)s->n;
  cg_emit(o, "static inline " QG_ATTR2 " void $P_st(void *y, __m256 v, long row, long q) {\n");
  if (s->y_vnni4) { /* y VNNI-4 (cgen_qgemm.h): lane by lane, each to byte row & 3 of its column's word */
    cg_emit(o, "  float t[8];\n  _mm256_storeu_ps(t, v);\n  for (int l = 0; l < 8; l++) {\n    long col = q + l;\n");
    cg_emit(o, "    if (col >= %ldL) break;\n", d->NT);
    if (d->cd)
      cg_emit(o, "    if (col %% %ldL >= %ldL) continue;\n    col = col / %ldL * %ldL + col %% %ldL;\n", d->Wp, d->OW, d->Wp, d->OW, d->Wp);
    cg_emit(o, "    long off = (row >> 2) * %ldL + col * 4 + (row & 3);\n    ", 4 * N);
  } else if (d->cd) {
    cg_emit(o, "  long rr = q %% %ldL;\n  if (rr + 8 <= %ldL && q + 8 <= %ldL) {\n    long off = row * %ldL + q / %ldL * %ldL + rr;\n", d->Wp, d->OW,
            d->NT, N, d->Wp, d->OW);
    emit_vstore(o, s, "off");
    cg_emit(o, "    return;\n  }\n  float t[8];\n  _mm256_storeu_ps(t, v);\n");
    cg_emit(o, "  for (int l = 0; l < 8; l++) {\n    long ql = q + l, rl = ql %% %ldL;\n    if (ql >= %ldL || rl >= %ldL) continue;\n", d->Wp,
            d->NT, d->OW);
    cg_emit(o, "    long off = row * %ldL + ql / %ldL * %ldL + rl;\n    ", N, d->Wp, d->OW);
  } else {
    cg_emit(o, "  if (q + 8 <= %ldL) {\n    long off = row * %ldL + q;\n", N, N);
    emit_vstore(o, s, "off");
    cg_emit(o, "    return;\n  }\n  float t[8];\n  _mm256_storeu_ps(t, v);\n");
    cg_emit(o, "  for (int l = 0; l < %ldL - q; l++) {\n    long off = row * %ldL + q + l;\n    ", N, N);
  }
  emit_sstore(o, s, "t[l]", "off");
  cg_emit(o, "\n  }\n}\n");
}

/* One depth step of a sub-tile: the B vectors b0, b1 (16 columns) and the
 * broadcast A words of rows 0..2 at pa (rows arow bytes apart) into the
 * accumulators cI_J, the u8 operand split as the file's head says. */
static void emit_step(cg_out *o, const cgen_qgemm_spec *s, long arow) {
  cg_emit(o, "      __m256i b0 = _mm256_loadu_si256((const __m256i *)pb), b1 = _mm256_loadu_si256((const __m256i *)(pb + 8));\n");
  if (s->weight_a) /* the activation is B: split once, for the 3 rows */
    cg_emit(o, "      __m256i l0 = _mm256_and_si256(b0, m7), h0 = _mm256_and_si256(b0, m8);\n"
               "      __m256i l1 = _mm256_and_si256(b1, m7), h1 = _mm256_and_si256(b1, m8);\n");
  for (int i = 0; i < 3; i++) {
    cg_emit(o, "      { int32_t w; memcpy(&w, pa + %ld, 4); __m256i a = _mm256_set1_epi32(w);\n", arow * i);
    if (!s->weight_a) cg_emit(o, "        __m256i al = _mm256_and_si256(a, m7), ah = _mm256_and_si256(a, m8);\n");
    for (int j = 0; j < 2; j++) {
      if (s->weight_a)
        cg_emit(o, "        c%d_%d = _mm256_add_epi32(c%d_%d, _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(l%d, a), one),"
                   " _mm256_madd_epi16(_mm256_maddubs_epi16(h%d, a), one)));\n", i, j, i, j, j, j);
      else
        cg_emit(o, "        c%d_%d = _mm256_add_epi32(c%d_%d, _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(al, b%d), one),"
                   " _mm256_madd_epi16(_mm256_maddubs_epi16(ah, b%d), one)));\n", i, j, i, j, j, j);
    }
    cg_emit(o, "      }\n");
  }
}

/* cgen_qgemm_int.h.  $P_st once per variant (before its first tile). */
void cg_qg2_emit_tile(cg_out *o, const cgen_qgemm_spec *s, const qg_dims *d, const char *name, int nv) {
  if (!strcmp(name, "tile")) emit_st(o, s, d); /* the variant's first tile */
  /* A's words: packed (4 bytes apart per row, MR * 4 per depth word), or
   * u8 rows read in place K bytes apart (emit_task's A, as the VNNI tile) */
  bool ain = !s->weight_a && s->x_dtype == TINY_U8;
  long arow = ain ? d->K : 4, astep = ain ? 4 : QG_MR * 4;
  cg_emit(o, "static " QG_ATTR2 " void $P_%s(const uint8_t *restrict ap, const int32_t *restrict bp, const int32_t *c0,"
             " const float *mu, void *y, long m0, long n0, long kn, int32_t *acc, int first, int last) {\n", name);
  cg_emit(o, "  const __m256i m7 = _mm256_set1_epi8(0x7f), m8 = _mm256_set1_epi8((char)0x80), one = _mm256_set1_epi16(1);\n");
  cg_emit(o, "  for (int sb = 0; sb < %d; sb++)\n    for (int rg = 0; rg < 2; rg++) {\n", nv);
  for (int i = 0; i < 3; i++) cg_emit(o, "    __m256i c%d_0 = _mm256_setzero_si256(), c%d_1 = _mm256_setzero_si256();\n", i, i);
  cg_emit(o, "    const uint8_t *pa = ap + rg * %ldL;\n    const int32_t *pb = bp + 16 * sb;\n", 3 * arow);
  cg_emit(o, "    for (long k = 0; k < kn; k++, pa += %ldL, pb += %d) {\n", astep, QG_NR);
  emit_step(o, s, arow);
  cg_emit(o, "    }\n    int32_t *ac = acc + rg * %d + 16 * sb;\n    if (!first) {\n", 3 * QG_NR);
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 2; j++)
      cg_emit(o, "      c%d_%d = _mm256_add_epi32(c%d_%d, _mm256_loadu_si256((const __m256i *)(ac + %d)));\n", i, j, i, j, i * QG_NR + 8 * j);
  cg_emit(o, "    }\n    if (!last) {\n");
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 2; j++) cg_emit(o, "      _mm256_storeu_si256((__m256i *)(ac + %d), c%d_%d);\n", i * QG_NR + 8 * j, i, j);
  cg_emit(o, "      continue;\n    }\n");
  /* the epilogue: rows past M and columns past the tile's are computed and not stored */
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 2; j++) {
      cg_emit(o, "    { long row = m0 + rg * 3 + %d, q = n0 + 16 * sb + %d;\n      if (row < %ldL && q < %ldL) {\n", i, 8 * j, d->M, d->NT);
      if (s->weight_a)
        cg_emit(o, "        __m256 v = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(c%d_%d, _mm256_set1_epi32(c0[row]))),"
                   " _mm256_set1_ps(mu[row]));\n", i, j);
      else /* c0 and mu padded to the blocks: 8 loads in bounds */
        cg_emit(o, "        __m256 v = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(c%d_%d, _mm256_loadu_si256((const __m256i *)(c0 + q)))),"
                   " _mm256_loadu_ps(mu + q));\n", i, j);
      cg_emit(o, "        $P_st(y, v, row, q);\n      }\n    }\n");
    }
  cg_emit(o, "  }\n}\n");
}
