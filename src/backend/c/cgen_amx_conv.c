/* cgen_amx_conv.c — the AMX variant of a bf16 stride-1 or stride-2
 * convolution whose B tiles are loaded in place from the interleaved input:
 * no im2col, no B packing (the GEMM template's AMX variant, cgen_amx.c,
 * gathers B panels [kp][32] per task instead; it keeps stride-1 1x1 convs,
 * 3x3/2 convs over 512 grid columns, and convs with too few channels).
 * Needs: cgen_gemm_int.h (cg_mm, cg_tile, the row store and its epilogue,
 * the store context), cgen_int.h (the padded interleave and the weight
 * pairs of cgen_bf16.c, the tile configuration of cgen_amx.c).
 * Gives: cg_amx_conv_inplace, cg_amx_conv_grid, cg_emit_amx_conv_variant
 * (declared in cgen_gemm_int.h).
 *
 * Layout.  $P_ilv writes each group's input as p16 planes (its channel
 * pairs, ceil(icg / 2) rounded up to 16, the pairs past them zero) of
 * hp x wp words, the image at row pt, column pl and zeros around it: the
 * conv's padding is in the planes.  The output is computed over the
 * padded-width grid, column q = oy wp + ox (ox < wp; the int8 kernels'
 * grid, cgen_qgemm.c's emit_pad), so that tap (ky, kx) of column q reads
 * word q + ky dh wp + kx dw of every plane: for 16 pairs (planes p .. p +
 * 15) and 16 consecutive columns that is a tile of 16 rows of 64 bytes, one
 * plane apart, loaded straight from the planes.  A stride s (2; per axis)
 * splits each pair's plane into s x s phase planes of hp x wp words (phase
 * (a, b) holds the padded rows s y + a, columns s x + b; wp = ow + (kw - 1)
 * dw / s): output (oy, ox) reads padded row s oy + ky dh, that is phase
 * row oy + ky dh / s of phase ky dh % s, so tap (ky, kx) of column q is
 * word q + (ky dh / s) wp + kx dw / s of its phase plane, again a plain
 * tile load (cgen_bf16.c's emit_ilv_phases deals the columns).  Where
 * every tap reads phase (0, 0) (a strided 1x1; a dilation the stride
 * divides) that phase alone is written: the input subsampled, one plane a
 * pair.  Few channels (a stem's 3: 2 pairs in 16) expand the window's rows
 * (rows_expand): virtual pair v = (pair v / kh, window row v % kh), whose
 * plane's row oy is the padded input's row s oy + (v % kh) dh, split into
 * the column phases only (emit_ilv_rows); the conv is then a 1 x kw
 * window of stride 1 x s over the virtual pairs, and the weight's pair
 * words [pair][ky][kx] are already [v][kx].  K is ordered pair block x
 * tap x pair (16 pairs a chunk), the weight packed so at model_init
 * ($P_amxcw: panels of 32 rows [32][kp], kp = p16 x taps words, zero rows
 * past M and zero pairs past the channels).  A 32x32 tile of C is four
 * accumulator tiles over all of K at once (no KC blocks, no partial sums);
 * stored, the columns of the tile that are outputs (ox < ow, inside the
 * task) are compressed into a contiguous run of outputs (consecutive grid
 * columns that are outputs are consecutive outputs) and go through the
 * template's epilogue ($P_row2), software-pipelined: a tile's rows are
 * stored during the first pair block of the next tile's products (a kernel
 * call runs a task block's panels and tiles), so the vector epilogue and
 * the tile unit overlap (64->64 at 56: -20% CPU in the kernel).  Words read past a group's last plane
 * (at most 31 + (kw - 1) dw / s) are the next group's or a zeroed slack:
 * finite, and only in columns that are never stored.
 * The sums' order differs from the im2col variant's (its chunks are 16
 * consecutive (pair, tap) of the pair-major K): the same values only where
 * every sum is exact. */
#include <stdio.h>

#include "backend/c/cgen_gemm_int.h"

/* The sizes of conv view q's in-place variant: the window the tiles see
 * (kh x kw, stride sh x sw, dilation dh x dw: q's, or with rows expanded
 * 1 x kw, stride 1 x sw), virtual pairs icg2 (q's pairs, times xk). */
typedef struct ipg {
  long icg2, p16, taps, kp, oh, ow, hp, wp, pl, ps, ng, G, nb0, M, mp, npan, slack, nc;
  long kh, kw, sh, sw, dh, dw, xk; /* xk > 1: rows expanded (rows_expand), xk = q's kh */
  bool one; /* every tap reads phase (0, 0): one plane a pair */
} ipg;

/* Does conv view q expand its window's rows into virtual pairs (pair,
 * window row): few channels (the pairs rounded up to 16 more than twice
 * the pairs, a stem's 3 channels) and a window of 2 rows or more?  Then a
 * tile's 16 rows are 16 (pair, row) planes, the input rows each needs
 * copied into them (cgen_bf16.c's emit_ilv_rows; a 7-row stem: 7 copies
 * of its 2 pairs' rows, 14 of 16 planes).  (cg_amx_conv_inplace still
 * wants the virtual pairs to fill half of their 16-pair blocks.) */
static bool rows_expand(const cg_mm *q) {
  int64_t p = q->cv_icg;
  return q->cv_kh > 1 && (p + 15) / 16 * 16 > 2 * p;
}

/* The sizes of q's variant: the window, planes, grid, panels, the slack
 * past the last plane, the grid columns of a task's block; one where
 * every tap reads phase (0, 0) of the stride's phase planes (a strided
 * 1x1, the downsampling projection; a dilation the stride divides, per
 * axis): only that phase is written (the input subsampled) and read. */
static ipg geom(const cg_mm *q) {
  ipg g;
  g.xk = rows_expand(q) ? (long)q->cv_kh : 1;
  g.kh = g.xk > 1 ? 1 : (long)q->cv_kh, g.sh = g.xk > 1 ? 1 : (long)q->cv_sh, g.dh = g.xk > 1 ? 1 : (long)q->cv_dh;
  g.kw = (long)q->cv_kw, g.sw = (long)q->cv_sw, g.dw = (long)q->cv_dw;
  g.one = (g.kh == 1 || g.dh % g.sh == 0) && (g.kw == 1 || g.dw % g.sw == 0);
  g.icg2 = (long)q->cv_icg * g.xk, g.p16 = (g.icg2 + 15) / 16 * 16, g.taps = g.kh * g.kw;
  g.kp = g.p16 * g.taps;
  g.ow = (long)q->cv_ow, g.oh = (long)q->N / g.ow;
  g.wp = g.ow + (g.kw - 1) * g.dw / g.sw, g.hp = g.oh + (g.kh - 1) * g.dh / g.sh;
  long nph = g.one ? 1 : g.sh * g.sw; /* the phase planes a pair */
  g.pl = nph * g.hp * g.wp, g.ng = g.oh * g.wp;
  /* planes a multiple of 256 bytes apart put a tile's 16 rows in a few L1 sets: 64 bytes more */
  g.ps = g.pl % 64 ? g.pl : g.pl + 16;
  g.G = (long)q->nb[1], g.nb0 = (long)q->nb[0], g.M = (long)q->M;
  g.mp = (g.M + CG_AMX_MR - 1) / CG_AMX_MR * CG_AMX_MR, g.npan = g.mp / CG_AMX_MR;
  g.slack = CG_AMX_MR + (g.kw - 1) * g.dw / g.sw;
  /* grid columns a block: the block's B (p16 planes' words, in each of the sh sw phases) about 256 KiB,
   * in L2 across a task's panels */
  g.nc = 262144L / (g.p16 * 4 * nph) / CG_AMX_MR * CG_AMX_MR;
  if (g.nc < CG_AMX_MR) g.nc = CG_AMX_MR;
  return g;
}

/* Does the AMX variant of conv view q (cgen_gemm.c's bf16_pairs, q->amx)
 * read its B tiles in place: a window of 2 taps or more (or a strided
 * 1x1), sizes constant, no split-K, not asked for the im2col path
 * (tune.amx_im2col), at most half of the products on the zero pairs that
 * round the (virtual) pairs up to 16, and a stride of 1, or 2 (per axis:
 * the phase planes) up to 512 grid columns; any grid where one phase
 * plane is read (a strided 1x1, a dilation the stride divides) or the
 * rows are expanded (rows_expand).  Measured (2 threads, 3x3 pad 1 + bias
 * + relu, min ms im2col -> in place, load 9-11): 16->64 at 112 (8 pairs
 * in 16) 0.44 -> 0.24, 24->64 at 56 0.16 -> 0.06, 34->64 at 56 (17 in 32)
 * 0.16 -> 0.15, 48->48 at 56 0.17 -> 0.13; a 3- or 5-channel stem (2 or 3
 * pairs in 16) level or noise on the planes as they are, rows expanded
 * the 3-channel 7x7/2 stem at 224 0.363 -> 0.327 (min of 200, load 17).
 * Stride 2 (3x3/2, min of 300, base -> phase planes, load 14-17): 128->128
 * at 32 0.070 -> 0.062, at 40 (420 grid columns) 0.115 -> 0.100, 256->256
 * at 28 0.17 -> 0.14, 512->512 at 14 0.18 -> 0.136; at 56 (812 columns)
 * 64->64 level, 128->128 0.18-0.20 -> 0.20 (the tiles' loads slower: a
 * tile reads twice the distinct lines of a stride-1 tap's; rows expanded
 * 0.22 -> 0.27): those keep im2col.  1x1/2 from phase (0, 0) (min of 200,
 * load 17): 256->512 at 56 0.32 -> 0.21, 512->1024 at 28 0.21 -> 0.18,
 * 1024->2048 at 14 0.22 -> 0.19. */
bool cg_amx_conv_inplace(const cg_mm *q) {
  if (!q->amx || !q->pairs || !q->conv || q->tune.amx_im2col || q->full || q->m_expr || q->b0_expr) return false;
  bool s1 = q->cv_sh == 1 && q->cv_sw == 1;
  if (q->cv_sh < 1 || q->cv_sh > 2 || q->cv_sw < 1 || q->cv_sw > 2 || (q->cv_kh * q->cv_kw < 2 && s1) || q->cv_ow < 1) return false;
  ipg g = geom(q);
  if (g.p16 > 2 * g.icg2) return false;
  return s1 || g.one || g.xk > 1 || g.ng <= 512;
}

/* Columns of q's padded-width grid (oh x wp): the N its tasks split. */
int64_t cg_amx_conv_grid(const cg_mm *q) { return geom(q).ng; }

/* $P_amxcw(w2, Ap, task): panel task % npan of group task / npan of the
 * paired weight w2 ([G M][icg2 taps] words, cg_emit_bf16_wpairs) as
 * [32][kp] words at Ap's panel `task`, K ordered pair block x tap x pair;
 * $P_packA_task, a pool task per panel. */
static void emit_pack_w(cg_out *o, const ipg *g) {
  cg_emit(o, "static void $P_amxcw(const uint32_t *w2, uint32_t *Ap, long task) {\n");
  cg_emit(o, "  long gr = task / %ldL, ir = task %% %ldL * %d;\n  uint32_t *q = Ap + task * %ldL;\n", g->npan, g->npan, CG_AMX_MR,
          (long)CG_AMX_MR * g->kp);
  cg_emit(o, "  for (int i = 0; i < %d; i++) {\n", CG_AMX_MR);
  cg_emit(o, "    if (ir + i >= %ldL) { memset(q, 0, %ldUL); q += %ldL; continue; }\n", g->M, g->kp * 4, g->kp);
  cg_emit(o, "    const uint32_t *s = w2 + (gr * %ldL + ir + i) * %ldL;\n", g->M, g->icg2 * g->taps);
  cg_emit(o, "    for (long b = 0; b < %ldL; b += 16)\n      for (long t = 0; t < %ldL; t++)\n", g->p16, g->taps);
  cg_emit(o, "        for (long c = b; c < b + 16; c++) *q++ = c < %ldL ? s[c * %ldL + t] : 0u;\n  }\n}\n", g->icg2, g->taps);
  cg_emit(o, "static void $P_packA_task(void *vc, int task, int tid) {\n  const $F_ctx *cx = (const $F_ctx *)vc;\n  (void)tid;\n");
  cg_emit(o, "  $P_amxcw((const uint32_t *)cx->A, (uint32_t *)cx->Ap, task);\n}\n");
}

/* $P_ko, $P_kout(q0, qe, o) and $P_krow(cb, tt, m, i, o): a stored 32x32
 * tile's outputs (the columns q0.. below qe that are outputs, ox < ow:
 * their compress masks, the run's first output index and length; 0 when
 * none), and row i of the stored tile cb (row m + i of C) compressed into
 * that run and stored through $P_row2. */
static void emit_outs(cg_out *o, const ipg *g) {
  cg_emit(o, "typedef struct { __m512i i0, i1; long n; int nr; __mmask16 k0, k1; } $P_ko;\n");
  cg_emit(o, "$I int $P_kout(long q0, long qe, $P_ko *o) {\n");
  cg_emit(o, "  unsigned msk = 0;\n  long n = -1;\n");
  cg_emit(o, "  for (int j = 0; j < 32; j++) {\n    long c = q0 + j, ox = c %% %ldL;\n", g->wp);
  cg_emit(o, "    if (c < qe && ox < %ldL) { msk |= 1u << j; if (n < 0) n = c / %ldL * %ldL + ox; }\n  }\n", g->ow, g->wp, g->ow);
  cg_emit(o, "  if (!msk) return 0;\n");
  cg_emit(o, "  o->k0 = (__mmask16)(msk & 0xffffu), o->k1 = (__mmask16)(msk >> 16);\n");
  cg_emit(o, "  int c0 = __builtin_popcount(msk & 0xffffu);\n  o->nr = __builtin_popcount(msk), o->n = n;\n");
  /* lane l of the run: lanes l < c0 of the first half's compress, then the second's from its lane 0 */
  cg_emit(o, "  const __m512i io = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);\n");
  cg_emit(o, "  o->i0 = _mm512_mask_add_epi32(io, _mm512_cmpge_epi32_mask(io, _mm512_set1_epi32(c0)), io, "
             "_mm512_set1_epi32(16 - c0));\n");
  cg_emit(o, "  o->i1 = _mm512_add_epi32(io, _mm512_set1_epi32(32 - c0));\n  return 1;\n}\n");
  cg_emit(o, "$I void $P_krow(const float *cb, const $F_tt *tt, long m, int i,"
             " const $P_ko *o) {\n");
  cg_emit(o, "  __m512 v0 = _mm512_maskz_compress_ps(o->k0, _mm512_load_ps(cb + i * 32));\n");
  cg_emit(o, "  __m512 v1 = _mm512_maskz_compress_ps(o->k1, _mm512_load_ps(cb + i * 32 + 16));\n");
  cg_emit(o, "  $P_row2(tt, m + i, o->n, o->nr, 1, 1, _mm512_permutex2var_ps(v0, o->i0, v1), "
             "_mm512_permutex2var_ps(v0, o->i1, v1));\n}\n");
}

/* One pair block's tap steps of $P_kip (a, xb, off of the block; two A
 * and two B tiles, four products a tap), each followed by rp rows of the
 * previous tile's epilogue while rows are left (none when rp is 0). */
static void emit_taps(cg_out *o, const ipg *g, long rp) {
  cg_emit(o, "#pragma GCC unroll 9\n          for (int t = 0; t < %ld; t++) {\n", g->taps);
  cg_emit(o, "            _tile_loadd(0, a + t * 64, %ldL);\n            _tile_loadd(1, a + %ldL + t * 64, %ldL);\n", g->kp * 4,
          16 * g->kp * 4, g->kp * 4);
  cg_emit(o, "            _tile_loadd(2, xb + off[t], %ldL);\n            _tile_loadd(3, xb + off[t] + 64, %ldL);\n",
          g->ps * 4, g->ps * 4);
  cg_emit(o, "            _tile_dpbf16ps(4, 0, 2); _tile_dpbf16ps(5, 0, 3); _tile_dpbf16ps(6, 1, 2); _tile_dpbf16ps(7, 1, 3);\n");
  if (rp) cg_emit(o, "            for (int e = 0; e < %ld && r < pr; e++, r++) $P_krow(pb, tt, pm, r, &po);\n", rp);
  cg_emit(o, "          }\n");
}

/* $P_kip(A, X, tt, m0, m1, c0, ce, qe): the 32x32 tiles of C at rows
 * m0.. below m1 (A's panels from A, 32 rows each) and grid columns c0,
 * c0 + 32, .. below ce (the planes at X, column 0), panel by panel, all of
 * K; each tile's columns below qe that are outputs stored through $P_krow.
 * Software-pipelined: a tile's rows are stored one per tap step of the next
 * tile's products (the epilogue's vector work runs while the tile unit
 * multiplies; tiles stored into two buffers in turn), the last tile's
 * after the loops. */
static void emit_kernel(cg_out *o, const cg_mm *q, const ipg *g) {
  cg_emit(o, "static " CG_AMX_ATTR " void $P_kip(const char *A, const char *X, const $F_tt *tt, long m0, long m1, long c0,"
             " long ce, long qe) {\n");
  cg_emit(o, "  static const long off[%ld] = {", g->taps);
  long sh = g->sh, sw = g->sw;
  for (long t = 0; t < g->taps; t++) { /* the tap's row and column in the padded image: phase (ry % sh, rx % sw) */
    long ry = t / g->kw * g->dh, rx = t % g->kw * g->dw;
    cg_emit(o, "%s%ldL", t ? ", " : "", ((ry % sh * sw + rx % sw) * g->hp * g->wp + ry / sh * g->wp + rx / sw) * 4);
  }
  cg_emit(o, "};\n  float cb[2][%d] __attribute__((aligned(64)));\n", CG_AMX_MR * CG_AMX_MR);
  cg_emit(o, "  $P_ko po;\n  long pm = 0;\n  int pr = 0, h = 0; /* the previous tile's rows (pm.., pr left) in cb[h ^ 1] */\n");
  cg_emit(o, "  for (long m = m0; m < m1; m += %d) {\n", CG_AMX_MR);
  cg_emit(o, "    int mr = m1 - m < %d ? (int)(m1 - m) : %d;\n", CG_AMX_MR, CG_AMX_MR);
  cg_emit(o, "    for (long c = c0; c < ce; c += 32, h ^= 1) {\n");
  cg_emit(o, "      const char *a = A + m * %ldL, *xb = X + c * 4;\n      const float *pb = cb[h ^ 1];\n      int r = 0;\n",
          g->kp * 4);
  cg_emit(o, "      _tile_zero(4); _tile_zero(5); _tile_zero(6); _tile_zero(7);\n");
  /* the first pair block's taps store the previous tile's rows, rp a tap (rp taps >= 32 rows); the other
   * blocks have no epilogue */
  long rp = (CG_AMX_MR + g->taps - 1) / g->taps;
  cg_emit(o, "      for (long b = 0; b < %ldL; b++, a += %ldL, xb += %ldL) {\n", g->p16 / 16, g->taps * 64, 16 * g->ps * 4);
  cg_emit(o, "        if (b == 0) {\n");
  emit_taps(o, g, rp);
  cg_emit(o, "        } else {\n");
  emit_taps(o, g, 0);
  cg_emit(o, "        }\n      }\n");
  cg_emit(o, "      _tile_stored(4, cb[h], 128); _tile_stored(5, cb[h] + 16, 128);\n");
  cg_emit(o, "      _tile_stored(6, cb[h] + 512, 128); _tile_stored(7, cb[h] + 528, 128);\n");
  cg_emit(o, "      pr = $P_kout(c, qe, &po) ? mr : 0, pm = m;\n    }\n  }\n");
  cg_emit(o, "  for (int r = 0; r < pr; r++) $P_krow(cb[h ^ 1], tt, pm, r, &po);\n}\n");
}

/* $P_task(vc, task, tid): batch x group x M split x grid split (t's), the
 * tile configuration loaded once; blocks of g->nc grid columns, in each
 * the task's 32-row panels and the block's 32-column tiles ($P_kip). */
static void emit_task(cg_out *o, const cg_mm *q, const cg_tile *t, const ipg *g) {
  cg_emit(o, "static $T void $P_task(void *vc, int task, int tid) {\n  const $F_ctx *cx = (const $F_ctx *)vc;\n  (void)tid;\n");
  cg_emit(o, "  $P_tcfg(); /* released at the end */\n");
  cg_emit(o, "  long tn = task %% %ldL, r = task / %ldL, tm = r %% %ldL; r /= %ldL;\n", (long)t->sn, (long)t->sn, (long)t->sm,
          (long)t->sm);
  cg_emit(o, "  long b1 = r %% %ldL, b0 = r / %ldL;\n", g->G, g->G);
  cg_emit(o, "  long m0 = tm * %ldL, m1 = m0 + %ldL < %ldL ? m0 + %ldL : %ldL;\n", (long)t->tm, (long)t->tm, g->M, (long)t->tm, g->M);
  cg_emit(o, "  long n0 = tn * %ldL, n1 = n0 + %ldL < %ldL ? n0 + %ldL : %ldL;\n", (long)t->tn, (long)t->tn, g->ng, (long)t->tn,
          g->ng);
  cg_emit(o, "  const char *X = (const char *)((const uint32_t *)cx->B + (b0 * %ldL + b1) * %ldL);\n", g->G, g->p16 * g->ps);
  cg_emit(o, "  const char *Ab = (const char *)((const uint32_t *)cx->Ap + b1 * %ldL);\n", g->mp * g->kp);
  cg_mm_tt_setup(o, q);
  cg_emit(o, "  for (long jc = n0; jc < n1; jc += %ldL) {\n", g->nc);
  cg_emit(o, "    long je = jc + %ldL < n1 ? jc + %ldL : n1;\n", g->nc, g->nc);
  cg_emit(o, "    $P_kip(Ab, X, &tt, m0, m1, jc, je, n1);\n  }\n  _tile_release();\n}\n");
}

/* $P_pack_a_run / $P_pack_a_bytes_run (a constant weight, at model_init),
 * and $P_run: the padded interleave, the weight where it is an input, the
 * tasks. */
static void emit_run(cg_out *o, const cg_mm *q, const cg_tile *t, const ipg *g) {
  long abytes = g->G * g->mp * g->kp * 4, wbytes = g->G * g->M * g->icg2 * g->taps * 4, npk = g->G * g->npan;
  long xwords = g->nb0 * g->G * g->p16 * g->ps, xbytes = (xwords + g->slack) * 4;
  long aoff = (xbytes + 63) / 64 * 64, woff = aoff + (abytes + 63) / 64 * 64;
  long used = q->prepack_a ? xbytes : woff + wbytes;
  if (q->prepack_a) {
    cg_emit(o, "static $T long $P_pack_a_bytes_run(void) { return %ldL; }\n", abytes);
    cg_emit(o, "static $T int $P_pack_a_run(hprt_pool *pool, const void *A, void *Ap) {\n");
    cg_emit(o, "  $F_ctx cx;\n  memset(&cx, 0, sizeof cx);\n  cx.Ap = (float *)Ap;\n");
    cg_emit(o, "  uint32_t *w2 = (uint32_t *)malloc(%ldUL);\n  if (!w2) return -1;\n  $P_wpairs(A, w2);\n  cx.A = w2;\n", wbytes);
    cg_emit(o, "  hprt_pool_run(pool, %ld, $P_packA_task, &cx);\n  free(w2);\n  return 0;\n}\n", npk);
  }
  cg_emit(o, "static $T int $P_run(hprt_pool *pool, const void *A, const void *B, void *C, const void *const *ep) {\n");
  cg_emit(o, "  $F_ctx cx;\n  memset(&cx, 0, sizeof cx);\n  cx.A = A; cx.C = C; cx.ep = ep; cx.X = B;\n");
  cg_emit(o, "  cx.K = %ldL; cx.kc = %ldL; cx.lda = %ldL; cx.nkb = 1;\n", g->kp, g->kp, g->kp);
  cg_emit(o, "  if (hprt_scratch_get(pool, %ldUL, 0UL, &cx.sc)) return -1;\n", used);
  cg_emit(o, "  cx.B = cx.sc.shared;\n  hprt_pool_run(pool, %ld, $P_ilv, &cx);\n", g->nb0 * g->G * g->p16);
  cg_emit(o, "  memset((uint32_t *)cx.sc.shared + %ldL, 0, %ldUL); /* the slack past the last plane */\n", xwords, g->slack * 4);
  if (q->prepack_a) {
    cg_emit(o, "  cx.Ap = (float *)A;\n");
  } else {
    cg_emit(o, "  uint32_t *w2 = (uint32_t *)(cx.sc.shared + %ldL);\n  $P_wpairs(A, w2);\n  cx.A = w2;\n", woff);
    cg_emit(o, "  cx.Ap = (float *)(cx.sc.shared + %ldL);\n  hprt_pool_run(pool, %ld, $P_packA_task, &cx);\n", aoff, npk);
  }
  cg_emit(o, "  hprt_pool_run(pool, %ld, $P_task, &cx);\n", (long)(g->nb0 * g->G * t->sm * t->sn));
  cg_emit(o, "  hprt_scratch_put(&cx.sc);\n  return 0;\n}\n");
}

/* The variant (cg_amx_conv_inplace(q)) into o, the AMX variant being
 * emitted (cg_set_amx); t resolved on q with N the grid's columns. */
void cg_emit_amx_conv_variant(cg_out *o, const cg_mm *q, const cg_tile *t) {
  ipg g = geom(q);
  cg_tile t1 = *t; /* all of K in one pass: plain stores of the epilogue */
  t1.multi = t1.ws = false, t1.nkb = 1, t1.nv = 2;
  cg_ilv_pad ip = {q->bf_icg, q->cv_h, q->cv_w, g.hp, g.wp, q->cv_pt, q->cv_pl, g.p16, g.ps, q->cv_sh, q->cv_sw, g.one, g.xk,
                   q->cv_dh};
  cg_emit_isa_helpers(o);
  cg_emit(o, "/* bf16 conv on AMX, B tiles read in place from the padded channel-pair planes (cgen_amx_conv.c) */\n");
  cg_mm_emit_row(o, q, &t1, 2);
  emit_outs(o, &g);
  emit_kernel(o, q, &g);
  cg_emit_amx_tilecfg(o);
  emit_pack_w(o, &g);
  cg_emit_bf16_ilv_pad(o, "$F_ctx", q->bf_bdt, &ip);
  cg_emit_bf16_wpairs(o, q->bf_adt, q->nb[1] * q->M, q->bf_icg, q->cv_kh * q->cv_kw);
  emit_task(o, q, &t1, &g);
  emit_run(o, q, &t1, &g);
  cg_emit(o, "#endif /* HPRT_X86 */\n");
}
