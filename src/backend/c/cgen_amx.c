/* cgen_amx.c — the Intel AMX pieces of the GEMM / implicit-GEMM conv
 * template (cgen_gemm.c) under tune.amx: a variant of its own ($F_amx_*,
 * cg_set_amx) that the selector runs where the CPU has AMX-BF16 and Linux
 * grants the tile state (hprt_amx_ok), else the AVX-512 BF16 variant runs.
 * Needs: cgen_gemm_int.h (cg_mm, cg_tile; cgen_int.h).  Gives: cg_amx_pays,
 * cg_emit_amx_runtime, cg_emit_amx_pend, cg_emit_amx_kernel, cg_emit_amx_tilecfg,
 * cg_emit_amx_pack_a (declared in cgen_int.h), cg_amx_a_direct,
 * cg_emit_amx_pack_a_direct (cgen_gemm_int.h).
 *
 * Layout.  The variant packs as the AVX-512 BF16 one (cgen_bf16.c: A and B
 * panels of pair words, [kp][W]) with MR = NR = CG_AMX_MR (32), and then
 * turns each A panel in place into [MR][kp] (row i's pairs contiguous, the
 * AMX "A" operand, $P_amxtr).  Where A is pair words already (a conv's
 * paired weight) or fp32 / bf16 rows with unit stride along K (a GEMM's
 * activation), $P_amxpk writes that layout in one pass from A's rows
 * (cg_emit_amx_pack_a_direct; a row of the panel is a row of A, rounded):
 * no fp32 panel, no $P_bfcv, no transpose.  (A in tile order, 32 rows x 16
 * pairs a contiguous block, measured no faster: 3x3 512->512 at 7x7 0.22-
 * 0.25 ms against 0.18-0.21.)  B's pair rows are already AMX's "VNNI" B:
 * 16 pair rows x 16 columns = one 1 KiB tile, row stride NR words.
 * The micro-kernel holds C's 32x32 in four accumulator tiles (tmm4-7), two
 * A tiles (tmm0-1: rows 0-15, 16-31, 16 pairs each) and two B tiles
 * (tmm2-3: columns 0-15, 16-31): four tdpbf16ps per 16 pairs.  The pairs
 * past the last multiple of 16 (kp % 16) are added with vdpbf16ps to the
 * stored fp32 tile, whose rows then go through the template's epilogue
 * ($P_row2) during the next call's products ($P_pend: the task's pending
 * tile, flushed at its end): rows past mr and columns past nr are computed
 * (on zero or padding lanes) but never stored.  The tile configuration is loaded once a
 * compute task ($P_tcfg), not per micro-kernel call.
 * A stride-1 conv's AMX variant is cgen_amx_conv.c's where it applies
 * (cg_amx_conv_inplace): its B tiles read in place, no B panels. */
#include <stdio.h>

#include "backend/c/cgen_gemm_int.h"

/* HPRT_AMX and hprt_amx_ok(), once per source (before the first AMX variant). */
static const char AMX_RUNTIME[] =
    "#ifndef HPRT_AMX_RUNTIME\n"
    "#define HPRT_AMX_RUNTIME 1\n"
    "/* a compiler that knows the AMX instructions: the AMX variants (cgen_amx.c) */\n"
    "#if defined(HPRT_X86) && defined(__x86_64__) && (defined(__clang__) ? __clang_major__ >= 12 : __GNUC__ >= 11)\n"
    "#define HPRT_AMX 1\n"
    "#endif\n"
    "#ifdef HPRT_AMX\n"
    "/* AMX-BF16 usable (the AMX variants, cgen_amx.c): CPUID.7.0:EDX bits 22 and 24,\n"
    " * XCR0's tile bits 17-18, and Linux's permission for the tile data\n"
    " * (arch_prctl ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA), asked once; a\n"
    " * refusal leaves the AVX-512 variant (no SIGILL). */\n"
    "static __attribute__((unused)) int hprt_amx_ok(void) {\n"
    "  static int st;\n  int s = __atomic_load_n(&st, __ATOMIC_ACQUIRE);\n"
    "  if (!s) {\n    unsigned a = 7, b, c = 0, d, lo, hi;\n    s = -1;\n"
    "    __asm__ volatile(\"cpuid\" : \"+a\"(a), \"=b\"(b), \"+c\"(c), \"=d\"(d));\n"
    "    if ((d >> 22 & 1u) && (d >> 24 & 1u)) {\n"
    "      __asm__ volatile(\"xgetbv\" : \"=a\"(lo), \"=d\"(hi) : \"c\"(0u));\n      (void)hi;\n"
    "#if defined(__linux__) && defined(__x86_64__)\n"
    "      long r = 158, x = 0x1023, f = 18;\n"
    "      if ((lo >> 17 & 3u) == 3u) __asm__ volatile(\"syscall\" : \"+a\"(r) : \"D\"(x), \"S\"(f) : \"rcx\", \"r11\", \"memory\");\n"
    "      if ((lo >> 17 & 3u) == 3u && r == 0) s = 1;\n"
    "#endif\n    }\n    __atomic_store_n(&st, s, __ATOMIC_RELEASE);\n  }\n  return s > 0;\n}\n"
    "#endif\n"
    "#endif /* HPRT_AMX_RUNTIME */\n";

void cg_emit_amx_runtime(cg_out *o) { ut_str_puts(o->s, AMX_RUNTIME); }

/* Does an M x N x K contraction (per batch and group) pay on the AMX
 * variant?  Measured at 2 threads, bench/amx.py, AMX-off time / AMX time:
 * 16x256x256 2.85, 32x256x256 2.73, 64x512x512 2.76 and up to 10.9 at
 * 1024^3; but 9x64x64 0.74, 12x256x32 0.61, 16x64x16 0.57, 64x64x16 0.82
 * (a tile's setup, the A panel's transpose and 32-wide tiles padded past
 * a small N or M outweigh the products): at least 16 rows, 16 columns,
 * 32 deep and 2^18 multiply-adds, between the largest loss (64x64x16, 2^16)
 * and the smallest gain measured (16x256x256, 2^20); ResNet-50's convs at
 * 7x7 pixels (N = 49) pay. */
bool cg_amx_pays(int64_t M, int64_t N, int64_t K) {
  return M >= 16 && N >= 16 && K >= 32 && (double)M * (double)N * (double)K >= 262144.0;
}

/* $P_pend, $P_prow(pd, i) and $P_pflush(pd): a stored 32x32 tile whose
 * rows wait for the template's epilogue ($P_row2 at the call's m, n, nr,
 * first, last and tt, mr rows), row i of it stored, all of them stored;
 * two buffers, one the pending tile's, the other the next call's.  The
 * task holds one (tt.pd) and flushes it before releasing the tiles. */
void cg_emit_amx_pend(cg_out *o) {
  cg_emit(o, "typedef struct { float cb[2][%d] __attribute__((aligned(64))); $F_tt tt; long m, n; int nr, first, last, pr, h; }"
             " $P_pend;\n", CG_AMX_MR * CG_AMX_MR);
  cg_emit(o, "$I void $P_prow($P_pend *pd, int i) {\n  const float *c = pd->cb[pd->h ^ 1] + i * %d;\n", CG_AMX_MR);
  cg_emit(o, "  $P_row2(&pd->tt, pd->m + i, pd->n, pd->nr, pd->first, pd->last, _mm512_load_ps(c), _mm512_load_ps(c + 16));\n}\n");
  cg_emit(o, "$I void $P_pflush($P_pend *pd) {\n  for (int i = 0; i < pd->pr; i++) $P_prow(pd, i);\n  pd->pr = 0;\n}\n");
}

/* $P_k<mr>_<nv>(kc, a, b, tt, m, n, nr, first, last): the AMX micro-kernel
 * over an A panel [32][kp] and a B panel [kp][32] of pair words (kp = kc
 * when `pairs` counts them already, else (kc + 1) / 2); the 32x32 result is
 * stored into tt->pd's free buffer and its mr rows (nv vectors of 16
 * columns, $P_row2 storing only nr) become the pending tile.  Software-
 * pipelined: the previous call's pending rows are stored two a 16-pair step
 * of this call's products (the vector epilogue overlaps the tile unit), the
 * rest after the loop. */
void cg_emit_amx_kernel(cg_out *o, int mr, int nv, bool pairs) {
  const int R = CG_AMX_MR;
  (void)nv;
  cg_emit(o, "static " CG_AMX_ATTR " void $P_k%d_%d(long kc, const float *restrict a, const float *restrict b,\n"
             "    const $F_tt *tt, long m, long n, int nr, int first, int last) {\n", mr, nv);
  cg_emit(o, "  long kp = %s, ks = kp & ~15L;\n", pairs ? "kc" : "(kc + 1) >> 1");
  /* the pending rows spread over the 16-pair steps: rs a step */
  cg_emit(o, "  $P_pend *pd = ($P_pend *)tt->pd;\n  float *cb = pd->cb[pd->h];\n  int r = 0, pr = pd->pr, ns = (int)(ks >> 4);\n");
  cg_emit(o, "  int rs = ns ? (pr + ns - 1) / ns : 0;\n");
  /* the tiles as $P_tcfg configured them at the task's start */
  cg_emit(o, "  _tile_zero(4); _tile_zero(5); _tile_zero(6); _tile_zero(7);\n");
  cg_emit(o, "  const char *ab = (const char *)a, *bb = (const char *)b;\n  long as = kp * 4;\n");
  cg_emit(o, "  for (long k = 0; k < ks; k += 16) {\n");
  cg_emit(o, "    _tile_loadd(0, ab + k * 4, as);\n    _tile_loadd(1, ab + (%dL * kp + k) * 4, as);\n", R / 2);
  cg_emit(o, "    _tile_loadd(2, bb + k * %d, %d);\n    _tile_loadd(3, bb + k * %d + 64, %d);\n", R * 4, R * 4, R * 4, R * 4);
  cg_emit(o, "    _tile_dpbf16ps(4, 0, 2); _tile_dpbf16ps(5, 0, 3); _tile_dpbf16ps(6, 1, 2); _tile_dpbf16ps(7, 1, 3);\n");
  cg_emit(o, "    for (int e = 0; e < rs && r < pr; e++, r++) $P_prow(pd, r);\n  }\n");
  cg_emit(o, "  for (; r < pr; r++) $P_prow(pd, r);\n");
  cg_emit(o, "  _tile_stored(4, cb, %d); _tile_stored(5, cb + 16, %d);\n", R * 4, R * 4);
  cg_emit(o, "  _tile_stored(6, cb + %d, %d); _tile_stored(7, cb + %d, %d);\n", 16 * R, R * 4, 16 * R + 16, R * 4);
  /* the last kp % 16 pairs, rows < mr: vdpbf16ps onto the stored tile */
  cg_emit(o, "  if (ks < kp) {\n    const int *aw = (const int *)a;\n");
  cg_emit(o, "    for (int i = 0; i < %d; i++)\n      for (int j = 0; j < %d; j++) {\n", mr, nv);
  cg_emit(o, "        __m512 c = _mm512_load_ps(cb + i * %d + j * 16);\n", R);
  cg_emit(o, "        for (long k = ks; k < kp; k++)\n");
  cg_emit(o, "          c = _mm512_dpbf16_ps(c, (__m512bh)_mm512_set1_epi32(aw[i * kp + k]), "
             "(__m512bh)_mm512_loadu_ps(b + k * %d + j * 16));\n", R);
  cg_emit(o, "        _mm512_store_ps(cb + i * %d + j * 16, c);\n      }\n  }\n", R);
  cg_emit(o, "  pd->tt = *tt, pd->m = m, pd->n = n, pd->nr = nr, pd->first = first, pd->last = last;\n");
  cg_emit(o, "  pd->pr = %d, pd->h ^= 1;\n}\n", mr);
}

/* $P_tcfg: the tile configuration the micro-kernels use (palette 1, tiles
 * 0-7 all 16 rows of 64 bytes), loaded once at the start of each compute
 * task ($P_task, which ends with _tile_release) rather than per micro-kernel
 * call: ldtilecfg and the release that must pair with it cost about as much
 * as a 16-pair step of four tdpbf16ps.  A static const configuration: GCC
 * dropped the stores to a stack one (read by the ldtilecfg builtin alone)
 * once $P_tcfg was inlined into the task, and ldtilecfg faulted. */
void cg_emit_amx_tilecfg(cg_out *o) {
  cg_emit(o, "static " CG_AMX_ATTR " void $P_tcfg(void) {\n");
  cg_emit(o, "  static const struct { uint8_t pal, start, res[14]; uint16_t colsb[16]; uint8_t rows[16]; } cfg\n"
             "      __attribute__((aligned(64))) = {1, 0, {0}, {64, 64, 64, 64, 64, 64, 64, 64}, {16, 16, 16, 16, 16, 16, 16, 16}};\n");
  cg_emit(o, "  _tile_loadconfig(&cfg);\n}\n");
}

/* $P_amxtr and $P_packA_task: the packer's task ($P_packA_task1: panel
 * group g of `groups`, span rows of A each, of KC block pb, kc deep at most
 * (pairs: kc counts pairs) for batch ba; mp rows in all), then each of its
 * 32-row panels from [kp][32] to [32][kp] pair words. */
void cg_emit_amx_pack_a(cg_out *o, int64_t groups, int64_t span, int64_t mp, int kc, bool pairs) {
  const int R = CG_AMX_MR;
  long kpmax = pairs ? kc : (kc + 1) / 2;
  cg_emit(o, "static $T void $P_amxtr(float *d, long kp) {\n");
  cg_emit(o, "  uint32_t t[%ldL];\n  uint32_t *w = (uint32_t *)d;\n  memcpy(t, d, (size_t)kp * %dU * 4U);\n", kpmax * R, R);
  cg_emit(o, "  for (int i = 0; i < %d; i++)\n    for (long k = 0; k < kp; k++) w[i * kp + k] = t[k * %d + i];\n}\n", R, R);
  cg_emit_pack_a_pass(o, "", "$P_packA_task1", groups, span, mp, R,
                      pairs ? "$P_amxtr(Ap + ir * kc, kc)" : "$P_amxtr(Ap + ir * kc, (kc + 1) >> 1)");
}

/* Does the AMX variant of p pack A straight into its tile layout
 * (cg_emit_amx_pack_a_direct): A as pair words (a conv's view), or fp32 /
 * bf16 with unit stride along K; else the fp32 packer, $P_bfcv and
 * $P_amxtr (an fp16 A, or A^T). */
bool cg_amx_a_direct(const cg_mm *p) {
  return p->amx && !p->m_expr && (p->pairs || ((p->adt == TINY_FP32 || p->adt == TINY_BF16) && p->a_sk == 1));
}

/* The 16-pair chunks of a panel row (the first ks pairs from A's row s to
 * the panel's row q), as the direct packer reads A (pairs: words; fp32:
 * 32 floats rounded to bf16, nearest even; bf16: 32 halves). */
static void emit_chunk(cg_out *o, const cg_mm *p) {
  if (p->pairs || p->adt == TINY_BF16)
    cg_emit(o, "      for (long c = 0; c < ks; c += 16) memcpy(q + c, s + c * %d, 64);\n", p->pairs ? 1 : 2);
  else
    cg_emit(o, "      for (long c = 0; c < ks; c += 16)\n"
               "        _mm512_storeu_si512(q + c, (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(s + 2 * c + 16), "
               "_mm512_loadu_ps(s + 2 * c)));\n");
}

/* $P_amxpk(cx, ba, d, ir, pc, kc) and $P_packA_task: the panel d of A's
 * rows ir.. (32, those past M zero) for batch ba, kc deep from pc (pairs
 * when p->pairs, else elements), as [32][kp] pair words (the kernel's A);
 * one task per panel group and KC block of t, as cg_emit_pack_a. */
void cg_emit_amx_pack_a_direct(cg_out *o, const cg_mm *p, const cg_tile *t) {
  const int R = CG_AMX_MR;
  const char *at = p->pairs ? "uint32_t" : cg_ctype(p->adt);
  cg_emit(o, "static $T void $P_amxpk(const $F_ctx *cx, long ba, float *d, long ir, long pc, long kc) {\n");
  cg_emit(o, "  const %s *A = (const %s *)cx->A + ba / %ldL * %ldL + ba %% %ldL * %ldL;\n", at, at, (long)t->nba[1],
          (long)p->a_sb[0], (long)t->nba[1], (long)p->a_sb[1]);
  cg_emit(o, "  int mr = %ldL - ir < %d ? (int)(%ldL - ir) : %d;\n", (long)p->M, R, (long)p->M, R);
  cg_emit(o, "  long kp = %s, ks = kp & ~15L, tw = kp - ks;\n", p->pairs ? "kc" : "(kc + 1) >> 1");
  cg_emit(o, "  uint32_t *w = (uint32_t *)d;\n  for (int i = 0; i < %d; i++) {\n", R);
  cg_emit(o, "    uint32_t *q = w + i * kp, *qt = q + ks;\n");
  cg_emit(o, "    if (i >= mr) {\n      memset(q, 0, (size_t)kp * 4U);\n      continue;\n    }\n");
  cg_emit(o, "    const %s *s = A + (ir + i) * cx->lda + pc;\n", at);
  emit_chunk(o, p);
  if (p->pairs) {
    cg_emit(o, "    memcpy(qt, s + ks, (size_t)tw * 4U);\n");
  } else if (p->adt == TINY_BF16) { /* the odd last k paired with 0 */
    cg_emit(o, "    for (long k = 0; k < tw; k++) {\n      long e = 2 * (ks + k);\n");
    cg_emit(o, "      qt[k] = (uint32_t)s[e] | (e + 1 < kc ? (uint32_t)s[e + 1] << 16 : 0U);\n    }\n");
  } else {
    cg_emit(o, "    if (tw) {\n      int rem = (int)(kc - 2 * ks);\n");
    cg_emit(o, "      __m512 x0 = _mm512_maskz_loadu_ps((__mmask16)((1u << (rem < 16 ? rem : 16)) - 1u), s + 2 * ks);\n");
    cg_emit(o, "      __m512 x1 = _mm512_maskz_loadu_ps((__mmask16)((1u << (rem > 16 ? rem - 16 : 0)) - 1u), s + 2 * ks + 16);\n");
    cg_emit(o, "      _mm512_mask_storeu_epi32(qt, (__mmask16)((1u << tw) - 1u), (__m512i)_mm512_cvtne2ps_pbh(x1, x0));\n    }\n");
  }
  cg_emit(o, "  }\n}\n");
  cg_emit_pack_a_pass(o, "", NULL, t->groups, t->ppg * t->mr, t->mp, R, "$P_amxpk(cx, ba, Ap + ir * kc, ir, pc, kc)");
}
