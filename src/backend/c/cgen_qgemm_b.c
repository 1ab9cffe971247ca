/* cgen_qgemm_b.c — the int8 conv's B side for cgen_qgemm.c: how each call
 * builds or reads the activation's blocks.  A stride-1 conv's padded copy
 * ($F_pad), a strided conv's phase planes ($F_phs, $P_phs), the few-channel
 * gather, the in-place reads of B's blocks from x or the planes (masked,
 * unrolled per tap period on AVX-512) and the B block packer ($P_pkb, with
 * its 4-row interleave $P_il4).  The layouts are cgen_qgemm.c's header's.
 * Needs: cgen_qgemm_int.h.  Gives: cg_qg_emit_pad, cg_qg_emit_phase,
 * cg_qg_emit_bpack. */
#include <stdio.h>
#include <string.h>

#include "backend/c/cgen_qgemm_int.h"

/* A stride-1 conv read in place (d->cd): $F_pad(x, xp, c) writes channel c
 * of the image with its padding (za) as Hp x Wp bytes; in that grid, row k =
 * (c, ky, kx) of the im2col over the padded-width columns n' = oy Wp + ox is
 * the plane from c Hp Wp + ky dh Wp + kx dw on, contiguous, so $P_pkb packs
 * B's blocks straight from the padded image; columns ox >= OW are computed
 * and not stored.  The image carries Wp + 64 bytes of slack for the last block. */
void cg_qg_emit_pad(cg_out *o, const cgen_qgemm_spec *s, const qg_dims *d) {
  long H = (long)s->conv.h, W = (long)s->conv.w, plane = d->Hp * d->Wp;
  cg_emit(o, "static void $F_pad(const uint8_t *x, uint8_t *xp, long c) {\n  uint8_t *d = xp + c * %ldL;\n", plane);
  cg_emit(o, "  memset(d, (uint8_t)%d, %ldUL);\n", (int)s->za, plane);
  cg_emit(o, "  for (long y = 0; y < %ldL; y++) memcpy(d + (y + %ldL) * %ldL + %ldL, x + (c * %ldL + y) * %ldL, %ldUL);\n}\n", H,
          (long)s->conv.ph, d->Wp, (long)s->conv.pw, H, W, W);
}

/* A strided conv split into phase planes (d->ps): $F_phs(x, col, c) (vec:
 * $P_phs, AVX-512, sw = 2) writes channel c of x as sh sw planes of Hs x
 * Ws bytes, plane (py, px) holding the pixels (i sh + py, j sw + px); a
 * plane's rows and columns past the image are left unwritten (never read:
 * emit_inplace masks them off).  vec: each image row's even and odd bytes
 * 128 at a time (masked loads and stores, the low and high byte of each
 * 16-bit word packed, the lanes' qwords put in order). */
void cg_qg_emit_phase(cg_out *o, const cgen_qgemm_spec *s, const qg_dims *d, bool vec) {
  long H = (long)s->conv.h, W = (long)s->conv.w, sh = (long)s->conv.sh, sw = (long)s->conv.sw, pl = d->Hs * d->Ws;
  cg_emit(o, "static %s void $%s_phs(const uint8_t *x, uint8_t *col, long c) {\n", vec ? QG_ATTR : "", vec ? "P" : "F");
  if (vec)
    cg_emit(o, "  const __m512i lo = _mm512_set1_epi16(255), pm = _mm512_setr_epi64(0, 2, 4, 6, 1, 3, 5, 7);\n");
  cg_emit(o, "  for (long iy = 0; iy < %ldL; iy++) {\n    const uint8_t *r = x + (c * %ldL + iy) * %ldL;\n", H, H, W);
  cg_emit(o, "    uint8_t *d = col + c * %ldL + iy %% %ldL * %ldL + iy / %ldL * %ldL;\n", sh * sw * pl, sh, sw * pl, sh, d->Ws);
  if (!vec) {
    cg_emit(o, "    for (long px = 0; px < %ldL; px++, d += %ldL)\n", sw, pl);
    cg_emit(o, "      for (long j = 0; px + j * %ldL < %ldL; j++) d[j] = r[px + j * %ldL];\n  }\n}\n", sw, W, sw);
    return;
  }
  cg_emit(o, "    for (long j = 0; j < %ldL; j += 128) {\n      long nb = %ldL - j, ne = (nb + 1) / 2, no = nb / 2;\n", W, W);
  cg_emit(o, "      __mmask64 ma = nb >= 64 ? ~0ULL : (1ULL << nb) - 1, mb = nb >= 128 ? ~0ULL : nb > 64 ? (1ULL << (nb - 64)) - 1 : 0;\n");
  cg_emit(o, "      __m512i a = _mm512_maskz_loadu_epi8(ma, (const void *)(r + j));\n");
  cg_emit(o, "      __m512i b = _mm512_maskz_loadu_epi8(mb, (const void *)((uintptr_t)r + (uintptr_t)(j + 64)));\n");
  cg_emit(o, "      __m512i ev = _mm512_permutexvar_epi64(pm, _mm512_packus_epi16(_mm512_and_si512(a, lo), _mm512_and_si512(b, lo)));\n");
  cg_emit(o, "      __m512i od = _mm512_permutexvar_epi64(pm, _mm512_packus_epi16(_mm512_srli_epi16(a, 8), _mm512_srli_epi16(b, 8)));\n");
  cg_emit(o, "      _mm512_mask_storeu_epi8((void *)(d + j / 2), ne >= 64 ? ~0ULL : (1ULL << ne) - 1, ev);\n");
  cg_emit(o, "      _mm512_mask_storeu_epi8((void *)(d + %ldL + j / 2), no >= 64 ? ~0ULL : (1ULL << no) - 1, od);\n    }\n  }\n}\n", pl);
}

/* $P_il4(p0..p3, x, t): 64 bytes from each of four rows (k .. k + 3),
 * each ^ x, interleaved into 64 words at t (word r = the 4 bytes of column
 * r).  AVX-512: unpacks within the 128-bit lanes, then a 4 x 4 transpose
 * of the lanes; else 16 columns at a time with SSE2 (bytes without it).
 * regs (AVX-512 only): $P_il4r(a0..a3, x, t), the four rows given as
 * vectors (emit_inplace's masked loads). */
static void emit_il4(cg_out *o, bool vec, bool regs) {
  if (regs)
    cg_emit(o, "static inline " QG_ATTR " void $P_il4r(__m512i a0, __m512i a1, __m512i a2, __m512i a3, unsigned x, uint8_t *t) {\n");
  else
    cg_emit(o, "static inline %s void $P_il4(const uint8_t *p0, const uint8_t *p1, const uint8_t *p2, const uint8_t *p3, unsigned x,"
               " uint8_t *t) {\n", vec ? QG_ATTR : "");
  const char *W = vec ? "512" : "", *V = vec ? "__m512i" : "__m128i", *L = vec ? "_mm512_loadu_si512" : "_mm_loadu_si128";
  const char *S = vec ? "_mm512_storeu_si512" : "_mm_storeu_si128";
  if (!vec) cg_emit(o, "#ifdef __SSE2__\n  for (int r = 0; r < 64; r += 16, p0 += 16, p1 += 16, p2 += 16, p3 += 16, t += 64) {\n");
  else cg_emit(o, "  {\n");
  cg_emit(o, "    const %s vx = _mm%s_set1_epi8((char)x);\n", V, W);
  for (int j = 0; j < 4; j++)
    if (regs) cg_emit(o, "    a%d = _mm512_xor_si512(a%d, vx);\n", j, j);
    else cg_emit(o, "    %s a%d = _mm%s_xor_si%s(%s((const void *)p%d), vx);\n", V, j, W, vec ? "512" : "128", L, j);
  cg_emit(o, "    %s t0 = _mm%s_unpacklo_epi8(a0, a1), t1 = _mm%s_unpackhi_epi8(a0, a1);\n", V, W, W);
  cg_emit(o, "    %s t2 = _mm%s_unpacklo_epi8(a2, a3), t3 = _mm%s_unpackhi_epi8(a2, a3);\n", V, W, W);
  cg_emit(o, "    %s u0 = _mm%s_unpacklo_epi16(t0, t2), u1 = _mm%s_unpackhi_epi16(t0, t2);\n", V, W, W);
  cg_emit(o, "    %s u2 = _mm%s_unpacklo_epi16(t1, t3), u3 = _mm%s_unpackhi_epi16(t1, t3);\n", V, W, W);
  if (vec) { /* lane l of u_i: columns 16 l + 4 i .. + 3; vector l of t: lanes l of u0..u3 */
    cg_emit(o, "    __m512i l0 = _mm512_shuffle_i32x4(u0, u1, 0x44), h0 = _mm512_shuffle_i32x4(u0, u1, 0xee);\n");
    cg_emit(o, "    __m512i l1 = _mm512_shuffle_i32x4(u2, u3, 0x44), h1 = _mm512_shuffle_i32x4(u2, u3, 0xee);\n");
    cg_emit(o, "    u0 = _mm512_shuffle_i32x4(l0, l1, 0x88), u1 = _mm512_shuffle_i32x4(l0, l1, 0xdd);\n");
    cg_emit(o, "    u2 = _mm512_shuffle_i32x4(h0, h1, 0x88), u3 = _mm512_shuffle_i32x4(h0, h1, 0xdd);\n");
  }
  for (int i = 0; i < 4; i++) cg_emit(o, "    %s((void *)(t + %d), u%d);\n", S, i * (vec ? 64 : 16), i);
  cg_emit(o, "  }\n");
  if (!vec)
    cg_emit(o, "#else\n  for (int r = 0; r < 64; r++)\n    t[4 * r] = p0[r] ^ x, t[4 * r + 1] = p1[r] ^ x, t[4 * r + 2] = p2[r] ^ x,"
               " t[4 * r + 3] = p3[r] ^ x;\n#endif\n");
  cg_emit(o, "}\n");
}

/* d->pg's $P_pkb(cx, jb, B): block jb of B, each row k = (c, ky, kx) of
 * the im2col gathered from the padded image in cx->col ($F_pad): its
 * columns n0 .. n0 + 63 run along output rows, each row's stretch 64
 * bytes at stride sw (AVX-512, sw <= 2: one or two 64-byte loads, the even
 * bytes packed; else a loop of constant count; the next stretch
 * overwrites the excess, the slack past the image and past rw's 64 bytes
 * absorbs the last), za past N; four rows interleaved by $P_il4.  (c, ky,
 * kx) advance as counters. */
static void emit_gather(cg_out *o, const cgen_qgemm_spec *s, const qg_dims *d, bool vec) {
  unsigned x = s->x_dtype == TINY_I8 ? 0x80u : 0u;
  long sh = (long)s->conv.sh, sw = (long)s->conv.sw;
  long OW = (long)((s->conv.w + 2 * s->conv.pw - s->conv.dw * (s->conv.kw - 1) - 1) / s->conv.sw + 1), OH = d->N / OW;
  cg_emit(o, "static %s void $P_pkb(const $F_ctx *cx, long jb, int32_t *B) {\n  uint8_t *q = (uint8_t *)B;\n", vec ? QG_ATTR : "");
  cg_emit(o, "  uint8_t rw[4][128] __attribute__((aligned(64)));\n  long c = 0, ky = 0, kx = 0, oy0 = jb * %dL / %ldL, ox0 = jb * %dL %% %ldL;\n",
          QG_NR, OW, QG_NR, OW);
  cg_emit(o, "  for (long k4 = 0; k4 < %ldL; k4++) {\n    uint8_t *t = q + k4 * %d;\n    int nj = 0;\n", d->K4, QG_NR * 4);
  cg_emit(o, "    for (int j = 0; j < 4 && 4 * k4 + j < %ldL; j++, nj++) {\n", d->K);
  cg_emit(o, "      const uint8_t *b = cx->col + c * %ldL + ky * %ldL + kx * %ldL;\n", d->Hp * d->Wp, (long)s->conv.dh * d->Wp,
          (long)s->conv.dw);
  cg_emit(o, "      uint8_t *restrict dj = rw[j];\n      long oy = oy0, ox = ox0;\n");
  cg_emit(o, "      for (int i = 0; i < %d; oy++, ox = 0) {\n", QG_NR);
  cg_emit(o, "        if (oy >= %ldL) { memset(dj + i, %d, (size_t)(%d - i)); break; }\n", OH, (int)s->za, QG_NR);
  cg_emit(o, "        const uint8_t *restrict r = b + oy * %ldL + ox * %ldL;\n", sh * d->Wp, sw);
  if (vec && sw == 1) cg_emit(o, "        _mm512_storeu_si512((void *)(dj + i), _mm512_loadu_si512((const void *)r));\n");
  else if (vec && sw == 2) /* the even bytes of 128: the low byte of each word, packed, the lanes' qwords put in order */
    cg_emit(o, "        _mm512_storeu_si512((void *)(dj + i), _mm512_permutexvar_epi64(_mm512_setr_epi64(0, 2, 4, 6, 1, 3, 5, 7),\n"
               "            _mm512_packus_epi16(_mm512_and_si512(_mm512_loadu_si512((const void *)r), _mm512_set1_epi16(255)),\n"
               "                                _mm512_and_si512(_mm512_loadu_si512((const void *)(r + 64)), _mm512_set1_epi16(255)))));\n");
  else cg_emit(o, "        for (int u = 0; u < %d; u++) dj[i + u] = r[u * %ldL];\n", QG_NR, sw);
  cg_emit(o, "        i += (int)(%ldL - ox < %d - i ? %ldL - ox : %d - i);\n      }\n", OW, QG_NR, OW, QG_NR);
  cg_emit(o, "      if (++kx == %ldL) { kx = 0; if (++ky == %ldL) ky = 0, c++; }\n    }\n", (long)s->conv.kw, (long)s->conv.kh);
  cg_emit(o, "    if (nj == 4) { $P_il4(rw[0], rw[1], rw[2], rw[3], %uu, t); continue; }\n", x);
  cg_emit(o, "    for (int r = 0; r < %d; r++)\n      for (int j = 0; j < 4; j++) t[r * 4 + j] = j < nj ? (uint8_t)(rw[j][r] ^ %uu) : 0;\n  }\n}\n",
          QG_NR, x);
}

/* `static const long name[n] = {v(0), .., v(n - 1)};` of emit_inplace's
 * per-tap offsets: v(t) = ((t m - p) mod s) f + floor((t m - p) / s) g
 * (sel 0), the valid count ceil((E - (t m - p) mod s) / s) (sel 1), or the
 * floor alone (sel 2). */
static void emit_taps(cg_out *o, const char *name, long n, long m, long p, long st, long E, long f, long g, int sel) {
  cg_emit(o, "  static const long %s[%ld] = {", name, n);
  for (long t = 0; t < n; t++) {
    long r = t * m - p, ph = ut_mod(r, st), a = ut_floordiv(r, st);
    cg_emit(o, "%s%ldL", t ? ", " : "", sel == 0 ? ph * f + a * g : sel == 1 ? (E - ph + st - 1) / st : a);
  }
  cg_emit(o, "};\n");
}

/* emit_inplace's masks of block jb (n0 = 64 jb, oy / ox its first
 * column's output row and column): rm[ky] the columns whose tap-ky pixel
 * row oy + ya[ky] is in [0, yn[ky]), cm[kx] those whose column ox + xa[kx]
 * is in [0, xn[kx]); per stretch of the block along one output row (OW
 * columns wide), a bit range each, not a test per column. */
static void emit_inplace_masks(cg_out *o, const qg_dims *d, long kh, long kw, long OW) {
  cg_emit(o, "  long n0 = jb * %dL, oy = n0 / %ldL, ox = n0 %% %ldL;\n", QG_NR, OW, OW);
  cg_emit(o, "  for (long l = 0; l < %d && n0 + l < %ldL; oy++, ox = 0) {\n", QG_NR, d->N);
  cg_emit(o, "    long len = %ldL - ox;\n    if (len > %d - l) len = %d - l;\n    if (len > %ldL - n0 - l) len = %ldL - n0 - l;\n", OW,
          QG_NR, QG_NR, d->N, d->N);
  cg_emit(o, "    unsigned long long seg = (len >= 64 ? ~0ULL : (1ULL << len) - 1ULL) << l;\n");
  cg_emit(o, "    for (long ky = 0; ky < %ldL; ky++) if ((unsigned long)(oy + ya[ky]) < (unsigned long)yn[ky]) rm[ky] |= seg;\n", kh);
  cg_emit(o, "    for (long kx = 0; kx < %ldL; kx++) {\n", kw);
  cg_emit(o, "      long lo = -xa[kx] > ox ? -xa[kx] : ox, hi = xn[kx] - xa[kx] < ox + len ? xn[kx] - xa[kx] : ox + len;\n");
  cg_emit(o, "      if (lo < hi) cm[kx] |= (hi - lo >= 64 ? ~0ULL : (1ULL << (hi - lo)) - 1ULL) << (l + lo - ox);\n    }\n");
  cg_emit(o, "    l += len;\n  }\n");
}

/* The rows of emit_inplace's B in periods of P = lcm(kh kw, 4): each
 * period's P / 4 words unrolled, every row's (c, ky, kx) a constant (its
 * offset from the period's base and its mask rm[ky] & cm[kx]), the periods
 * a loop (the base stepping P / (kh kw) channels), the rows past the last
 * full period unrolled after it, the words past K zero (rows of x bytes,
 * ^ x).  AVX-512 only; false (nothing emitted) where a period is over 64
 * words. */
static bool emit_inplace_unrolled(cg_out *o, const cgen_qgemm_spec *s, const qg_dims *d, unsigned x) {
  long H = (long)s->conv.h, W = (long)s->conv.w, kh = (long)s->conv.kh, kw = (long)s->conv.kw, khw = kh * kw;
  long dh = (long)s->conv.dh, dw = (long)s->conv.dw, ph = (long)s->conv.ph, pw = (long)s->conv.pw;
  long sh = (long)s->conv.sh, sw = (long)s->conv.sw, pl = d->Hs * d->Ws;
  long P = khw % 4 == 0 ? khw : khw % 2 == 0 ? 2 * khw : 4 * khw, np = d->K / P;
  long cst = d->ps ? sh * sw * pl : H * W; /* a channel's bytes */
  if (P / 4 > 64) return false;
  cg_emit(o, "  const __m512i vz = _mm512_set1_epi8((char)%d), vx = _mm512_set1_epi8((char)%u);\n  (void)vx;\n", (int)s->za, x);
  cg_emit(o, "  uintptr_t b0 = (uintptr_t)%s + (uintptr_t)n0;\n  uint8_t *t = q;\n  (void)rw;\n", d->ps ? "cx->col" : "cx->x");
  for (int part = 0; part < 2; part++) {
    long rows = part ? d->K - np * P : P;
    if (part == 0 && np == 0) continue;
    if (part == 1 && rows == 0) break;
    if (part == 0) cg_emit(o, "  for (long g = 0; g < %ldL; g++, b0 += %ldUL, t += %ldL) {\n", np, P / khw * cst, P / 4 * QG_NR * 4);
    else cg_emit(o, "  {\n");
    for (long k4 = 0; k4 < (rows + 3) / 4; k4++) {
      cg_emit(o, "    {\n");
      for (long j = 0; j < 4; j++) {
        long r = 4 * k4 + j, c = r / khw, ky = r % khw / kw, kx = r % kw;
        if (r >= rows) {
          cg_emit(o, "      __m512i v%ld = vx;\n", j);
          continue;
        }
        long off;
        if (d->ps) {
          long ry = ky * dh - ph, rx = kx * dw - pw;
          off = c * cst + ut_mod(ry, sh) * sw * pl + ut_floordiv(ry, sh) * d->Ws + ut_mod(rx, sw) * pl + ut_floordiv(rx, sw);
        } else off = c * cst + ky * dh * W + kx * dw - (ph * W + pw);
        cg_emit(o, "      __m512i v%ld = _mm512_mask_loadu_epi8(vz, (__mmask64)(rm[%ld] & cm[%ld]), (const void *)(b0 + (uintptr_t)%ldL));\n", j,
                ky, kx, off);
      }
      cg_emit(o, "      $P_il4r(v0, v1, v2, v3, %uu, t + %ld);\n    }\n", x, k4 * QG_NR * 4);
    }
    cg_emit(o, "  }\n");
  }
  cg_emit(o, "}\n");
  return true;
}

/* d->ci's $P_pkb(cx, jb, B): block jb of B for a stride-1 conv whose
 * output rows are as wide as its image's (OW = W), read from x itself:
 * row k = (c, ky, kx) of the im2col at columns n0 .. n0 + 63 (n = oy W +
 * ox) is x's plane c from n0 + (ky dh - ph) W + kx dw - pw on, contiguous,
 * but for the columns whose pixel (iy, ix) is off the image, or past N,
 * which read za.  d->ps's: the same from the phase planes in cx->col
 * ($F_phs): tap ky reads plane row py = (ky dh - ph) mod sh at oy + floor((ky
 * dh - ph) / sh), of the plane's ceil((H - py) / sh) rows (likewise kx), a
 * plane's rows OW = Ws wide, so again contiguous.  The block's masks, once:
 * per ky the columns on the image's rows, per kx those on its columns.
 * AVX-512: each row one masked
 * load into a register (the bytes masked off are not read, their faults
 * suppressed), four interleaved by $P_il4r; without it, a row whose mask
 * is all 64 columns read in place, any other byte by byte into rw, four
 * interleaved by $P_il4.  (c, ky, kx) as counters.  No padded copy, and
 * the tiles' columns are the output's own (full 64-byte rows stored). */
static void emit_inplace(cg_out *o, const cgen_qgemm_spec *s, const qg_dims *d, bool vec) {
  unsigned x = s->x_dtype == TINY_I8 ? 0x80u : 0u;
  long H = (long)s->conv.h, W = (long)s->conv.w, kh = (long)s->conv.kh, kw = (long)s->conv.kw;
  long dh = (long)s->conv.dh, dw = (long)s->conv.dw, ph = (long)s->conv.ph, pw = (long)s->conv.pw;
  long sh = (long)s->conv.sh, sw = (long)s->conv.sw, pl = d->Hs * d->Ws, OW = d->ps ? d->Ws : W;
  cg_emit(o, "static %s void $P_pkb(const $F_ctx *cx, long jb, int32_t *B) {\n  uint8_t *q = (uint8_t *)B;\n", vec ? QG_ATTR : "");
  cg_emit(o, "  uint8_t rw[4][64] __attribute__((aligned(64)));\n  unsigned long long rm[%ld] = {0}, cm[%ld] = {0};\n", kh, kw);
  /* per tap: the image (or phase plane) row / column shift and count (stride 1: ky dh - ph and H) */
  emit_taps(o, "ya", kh, dh, ph, sh, H, 0, 0, 2), emit_taps(o, "yn", kh, dh, ph, sh, H, 0, 0, 1);
  emit_taps(o, "xa", kw, dw, pw, sw, W, 0, 0, 2), emit_taps(o, "xn", kw, dw, pw, sw, W, 0, 0, 1);
  if (d->ps) emit_taps(o, "yo", kh, dh, ph, sh, H, sw * pl, d->Ws, 0), emit_taps(o, "xo", kw, dw, pw, sw, W, pl, 1, 0);
  emit_inplace_masks(o, d, kh, kw, OW);
  if (vec && emit_inplace_unrolled(o, s, d, x)) return;
  cg_emit(o, "  long c = 0, ky = 0, kx = 0;\n");
  if (vec) cg_emit(o, "  const __m512i vz = _mm512_set1_epi8((char)%d);\n", (int)s->za);
  cg_emit(o, "  for (long k4 = 0; k4 < %ldL; k4++) {\n    const uint8_t *p[4];\n    int nj = 0;\n", d->K4);
  if (vec) cg_emit(o, "    __m512i v[4];\n");
  cg_emit(o, "    for (int j = 0; j < 4 && 4 * k4 + j < %ldL; j++, nj++) {\n", d->K);
  cg_emit(o, "      unsigned long long m = rm[ky] & cm[kx];\n");
  /* the row's first byte: uintptr_t arithmetic, it may lie outside x (its bytes then masked off) */
  if (d->ps) cg_emit(o, "      long off = c * %ldL + n0 + yo[ky] + xo[kx];\n", sh * sw * pl);
  else cg_emit(o, "      long off = c * %ldL + n0 + ky * %ldL + kx * %ldL - %ldL;\n", H * W, dh * W, dw, ph * W + pw);
  cg_emit(o, "      const uint8_t *a = (const uint8_t *)((uintptr_t)%s + (uintptr_t)off);\n", d->ps ? "cx->col" : "cx->x");
  if (vec) /* into a register, the bytes masked off za */
    cg_emit(o, "      v[j] = _mm512_mask_loadu_epi8(vz, (__mmask64)m, (const void *)a);\n      p[j] = rw[j];\n");
  else
    cg_emit(o, "      p[j] = a;\n      if (m != ~0ULL) {\n        for (int r = 0; r < 64; r++) rw[j][r] = m >> r & 1 ? a[r] : (uint8_t)%d;\n"
               "        p[j] = rw[j];\n      }\n", (int)s->za);
  cg_emit(o, "      if (++kx == %ldL) { kx = 0; if (++ky == %ldL) ky = 0, c++; }\n    }\n", kw, kh);
  cg_emit(o, "    uint8_t *t = q + k4 * %d;\n", QG_NR * 4);
  if (vec) {
    cg_emit(o, "    if (nj == 4) { $P_il4r(v[0], v[1], v[2], v[3], %uu, t); continue; }\n", x);
    cg_emit(o, "    for (int j = 0; j < nj; j++) _mm512_store_si512((void *)rw[j], v[j]);\n");
  } else cg_emit(o, "    if (nj == 4) { $P_il4(p[0], p[1], p[2], p[3], %uu, t); continue; }\n", x);
  cg_emit(o, "    for (int r = 0; r < %d; r++)\n      for (int j = 0; j < 4; j++) t[r * 4 + j] = j < nj ? (uint8_t)(p[j][r] ^ %uu) : 0;\n  }\n}\n",
          QG_NR, x);
}

/* AVX-512 $P_pkt(s, B): the partial last block of the [K][N] byte matrix s
 * (its nn = N mod 64 columns; the rows end at N) as $P_pkb's K4 x 64 words
 * at B: four rows at a time, each one masked load of its nn bytes (the
 * lanes past them, and the rows past K, x, so 0 once ^ x), interleaved by
 * $P_il4r.  No memset and no byte loop: the N = 49 convs' only block, the
 * N = 196 and 784 ones' last. */
static void emit_pkt(cg_out *o, const qg_dims *d, unsigned x) {
  long nn = d->N % QG_NR, K = d->K, N = d->N;
  cg_emit(o, "static " QG_ATTR " void $P_pkt(const uint8_t *s, int32_t *B) {\n");
  cg_emit(o, "  const __m512i vx = _mm512_set1_epi8((char)%uu);\n  const __mmask64 m = (__mmask64)%#llxULL;\n", x,
          (unsigned long long)((1ULL << nn) - 1ULL));
  cg_emit(o, "  const uint8_t *p = s + %ldL;\n  uint8_t *t = (uint8_t *)B;\n", (d->NB - 1) * QG_NR);
  if (K / 4) {
    cg_emit(o, "  for (long k4 = 0; k4 < %ldL; k4++, p += %ldL, t += %d) {\n", K / 4, 4 * N, QG_NR * 4);
    cg_emit(o, "    __m512i a0 = _mm512_mask_loadu_epi8(vx, m, (const void *)p);\n");
    for (int j = 1; j < 4; j++) cg_emit(o, "    __m512i a%d = _mm512_mask_loadu_epi8(vx, m, (const void *)(p + %ldL));\n", j, j * N);
    cg_emit(o, "    $P_il4r(a0, a1, a2, a3, %uu, t);\n  }\n", x);
  }
  if (K % 4) { /* the last word's rows past K: x */
    cg_emit(o, "  {\n");
    for (long j = 0; j < 4; j++)
      if (j < K % 4) cg_emit(o, "    __m512i a%ld = _mm512_mask_loadu_epi8(vx, m, (const void *)(p + %ldL));\n", j, j * N);
      else cg_emit(o, "    __m512i a%ld = vx;\n", j);
    cg_emit(o, "    $P_il4r(a0, a1, a2, a3, %uu, t);\n  }\n", x);
  }
  cg_emit(o, "}\n");
}

/* $P_pkb(cx, jb, B): block jb of the activation B when the weight is A (64
 * columns of the [K][N] matrix: x, the im2col, or the padded image's planes
 * (d->cd)) as K4 x 64 words at B, four rows of k at a time ($P_il4), 0 past
 * K.  A partial last block of x or the im2col (whose rows end at N) goes
 * through $P_pkt (AVX-512), else $F_pk. */
void cg_qg_emit_bpack(cg_out *o, const cgen_qgemm_spec *s, const qg_dims *d, bool vec) {
  unsigned x = s->x_dtype == TINY_I8 ? 0x80u : 0u;
  long plane = d->Hp * d->Wp;
  const char *src = s->conv.kh > 0 ? "cx->col" : "(const uint8_t *)cx->x";
  if (s->x_vnni4) { /* x is B's words already: rows of the block copied, 0 past N */
    cg_emit(o, "static %s void $P_pkb(const $F_ctx *cx, long jb, int32_t *B) {\n", vec ? QG_ATTR : "");
    cg_emit(o, "  const uint8_t *p = (const uint8_t *)cx->x + jb * %dL;\n  long nn = %ldL - jb * %dL < %d ? %ldL - jb * %dL : %d;\n",
            QG_NR * 4, d->N, QG_NR, QG_NR, d->N, QG_NR, QG_NR);
    cg_emit(o, "  for (long k4 = 0; k4 < %ldL; k4++) {\n    memcpy(B + k4 * %d, p + k4 * %ldL, (size_t)nn * 4u);\n", d->K4, QG_NR,
            4 * d->N);
    cg_emit(o, "    if (nn < %d) memset(B + k4 * %d + nn, 0, (size_t)(%d - nn) * 4u);\n  }\n}\n", QG_NR, QG_NR, QG_NR);
    return;
  }
  emit_il4(o, vec, false);
  if ((d->ci || d->ps) && vec) emit_il4(o, true, true);
  if (d->pg || d->ci || d->ps) {
    (d->pg ? emit_gather : emit_inplace)(o, s, d, vec);
    return;
  }
  bool pkt = vec && !d->cd && d->N % QG_NR;
  if (pkt) emit_il4(o, true, true), emit_pkt(o, d, x);
  cg_emit(o, "static %s void $P_pkb(const $F_ctx *cx, long jb, int32_t *B) {\n  uint8_t *q = (uint8_t *)B;\n", vec ? QG_ATTR : "");
  if (pkt) cg_emit(o, "  if (jb == %ldL) { $P_pkt(%s, B); return; }\n", d->NB - 1, src);
  else if (!d->cd && d->N % QG_NR)
    cg_emit(o, "  if (jb == %ldL) { $F_pk(%s, 1L, %ldL, %ldL, %d, %uu, jb, B); return; }\n", d->NB - 1, src, d->N, d->N, QG_NR, x);
  if (d->cd) /* row k = (c, ky, kx) of the im2col starts at c plane + ky dh Wp + kx dw: counters, no divisions */
    cg_emit(o, "  long ky = 0, kx = 0;\n  const uint8_t *pc = cx->col + jb * %d;\n", QG_NR);
  cg_emit(o, "  for (long k4 = 0; k4 < %ldL; k4++) {\n    const uint8_t *p[4];\n    for (int j = 0; j < 4; j++) {\n      long k = 4 * k4 + j;\n",
          d->K4);
  if (d->cd) {
    cg_emit(o, "      p[j] = k < %ldL ? pc + ky * %ldL + kx * %ldL : NULL;\n", d->K, (long)s->conv.dh * d->Wp, (long)s->conv.dw);
    cg_emit(o, "      if (++kx == %ldL) { kx = 0; if (++ky == %ldL) ky = 0, pc += %ldL; }\n", (long)s->conv.kw, (long)s->conv.kh, plane);
  } else
    cg_emit(o, "      p[j] = k < %ldL ? %s + k * %ldL + jb * %d : NULL;\n", d->K, src, d->N, QG_NR);
  cg_emit(o, "    }\n    uint8_t *t = q + k4 * %d;\n", QG_NR * 4);
  if (!d->cd) /* rows N bytes apart: ask for the ones 8 ahead */
    cg_emit(o, "    if (p[3]) for (int j = 0; j < 4; j++) __builtin_prefetch(p[j] + %ldL);\n", 8 * d->N);
  cg_emit(o, "    if (p[3]) { $P_il4(p[0], p[1], p[2], p[3], %uu, t); continue; }\n", x);
  cg_emit(o, "    for (int r = 0; r < %d; r++)\n      for (int j = 0; j < 4; j++) t[r * 4 + j] = p[j] ? (uint8_t)(p[j][r] ^ %uu) : 0;\n  }\n}\n",
          QG_NR, x);
}
