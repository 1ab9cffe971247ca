/* cuda_mma_math.c — the inner loops of the SM80 MMA template, one per way
 * of computing (cuda_mmode), and the SMEM tile layouts they read.
 * Needs: cuda.h, cuda_int.h.  Gives: the swizzled offsets (cuda_swz_off,
 * cuda_swz_off32, cuda_swz_cols_ok), cuda_mm_tile_off, cuda_mm_tiles_ok,
 * cuda_mm_decls, cuda_mm_inner, cuda_mm_row, cuda_mm_col (cuda_mma.c
 * stages the tiles, runs the pipeline, the epilogue and the stores).
 *
 *   MMA16  fp16/bf16 tiles: ldmatrix.x4 [.trans] -> mma m16n8k16 (PTX ISA
 *          9.7.14.5.8); the fragment addressing is described in cuda_mma.c.
 *   TF32   fp32 tiles, k steps of 8: a K-major tile through ldmatrix.x4 (an
 *          8x8 b16 matrix is 8 rows x 4 fp32, and lane l receives row l/4,
 *          word l%4: exactly a{0..3} = (g,t), (g+8,t), (g,t+4), (g+8,t+4) of
 *          A and b{0,1} = (k t, n g), (k t+4, n g) of B, PTX ISA 9.7.14.5.7);
 *          an M/N-major tile through ld.shared.b32 per element (ldmatrix
 *          .trans moves 16-bit elements).  Every register rounded to TF32
 *          (hk_tf32), then mma m16n8k8 .tf32.
 *   CVT16  fp32 tiles, k steps of 16: the m16n8k16 fragments read with
 *          ld.shared (K-major: one 8-byte load per register; M/N-major: two
 *          4-byte loads) and packed to fp16/bf16 pairs (round to nearest).
 *   SIMT   fp32 tiles: a warp computes 32x64 with lanes 4 (rows) x 8
 *          (columns), 8x8 outputs per thread; per 4 k, 128-bit ld.shared of
 *          the thread's rows and columns (a K-major tile: along k, a row per
 *          load; an M/N-major one: 4 consecutive rows or columns per load),
 *          then 4 x 8 x 8 FFMAs (CUTLASS's SIMT SGEMM shape).  The outputs
 *          stay in acc[4][4][4] with element [i][j][2h+e] at row(i, h),
 *          column col(j) + e (cuda_mm_row / cuda_mm_col): the pairs e = 0, 1
 *          are adjacent, so the epilogue and the stores are the MMA ones.
 *
 * SMEM layouts (bytes; r: tile row, c: contiguous column):
 *   16-bit tiles and fp32 K-major tiles: 16-byte chunks XOR-swizzled per row
 *     (cuda_swz_off, the fp32 row read as twice as many 16-bit columns), so
 *     the 8 rows of each ldmatrix phase / 128-bit load hit distinct chunks.
 *   fp32 M/N-major tiles: rows padded by 32 bytes (cuda_pitch32): the TF32
 *     fragment loads read rows t (4 of them) x 8 consecutive columns, which
 *     the padding spreads over all 32 banks, and every address is the
 *     thread's base plus a constant (an XOR swizzle of the chunk, the first
 *     version, cost 4 integer instructions per load: the j and k offsets
 *     cannot be folded through it); 128-bit loads of one row stay
 *     conflict-free. */
#include <stdio.h>
#include <string.h>

#include "backend/cuda/cuda.h"
#include "backend/cuda/cuda_int.h"

static bool tile_kmajor(const mma_gen *g, bool is_a) { return is_a ? g->p->A.kmajor : g->p->B.kmajor; }

int cuda_pitch32(int cols, bool kmajor, bool no_swizzle) { return cols * 4 + (kmajor || no_swizzle ? 0 : 32); }

/* Swizzle selector g(row) as C text, for CPR 16-byte chunks per row. */
static const char *swz_g(cuda_b *b, int cpr, bool off, const char *r) {
  if (off || cpr <= 1) return "0";
  if (cpr >= 8) return cuda_fmt(b, "((%s) & 7)", r);
  if (cpr == 4) return cuda_fmt(b, "(((%s) >> 1) & 3)", r);
  return cuda_fmt(b, "(((%s) >> 2) & 1)", r); /* cpr == 2 */
}

const char *cuda_swz_off(cuda_b *b, int cols, bool no_swizzle, const char *r, const char *c) {
  int cpr = cols / 8;
  return cuda_fmt(b, "((%s) * %d + ((((%s) >> 3) ^ %s) << 4) + ((%s) & 7) * 2)", r, cols * 2, c,
                  swz_g(b, cpr, no_swizzle, r), c);
}

bool cuda_swz_cols_ok(int cols) {
  if (cols % 8) return false;
  int cpr = cols / 8;
  return cpr == 1 || cpr == 2 || cpr == 4 || cpr % 8 == 0;
}

const char *cuda_swz_off32(cuda_b *b, int cols, bool kmajor, bool no_swizzle, const char *r, const char *c) {
  if (kmajor) return cuda_swz_off(b, 2 * cols, no_swizzle, r, cuda_fmt(b, "((%s) * 2)", c));
  return cuda_fmt(b, "((%s) * %d + (%s) * 4)", r, cuda_pitch32(cols, false, no_swizzle), c);
}

int64_t cuda_mm_tile_bytes(const mma_gen *g, bool is_a) {
  int rows = is_a ? g->a_rows : g->b_rows, cols = is_a ? g->a_cols : g->b_cols;
  if (g->esz == 2) return (int64_t)rows * cols * 2;
  return (int64_t)rows * cuda_pitch32(cols, tile_kmajor(g, is_a), g->swz_off);
}

const char *cuda_mm_tile_off(mma_gen *g, bool is_a, const char *r, const char *c) {
  int cols = is_a ? g->a_cols : g->b_cols;
  if (g->esz == 2) return cuda_swz_off(&g->b, cols, g->swz_off, r, c);
  return cuda_swz_off32(&g->b, cols, tile_kmajor(g, is_a), g->swz_off, r, c);
}

bool cuda_mm_tiles_ok(const mma_gen *g) {
  for (int i = 0; i < 2; i++) {
    int cols = i ? g->b_cols : g->a_cols;
    bool ok = g->esz == 2 || tile_kmajor(g, i == 0) ? cuda_swz_cols_ok(g->esz == 2 ? cols : 2 * cols) : cols % 4 == 0;
    if (!ok) return false;
  }
  return true;
}

/* ---- fragment layouts --------------------------------------------------------------- */
const char *cuda_mm_row(mma_gen *g, const char *i, const char *h) {
  cuda_b *b = &g->b;
  if (g->p->mode != CUDA_MM_SIMT)
    return cuda_fmt(b, "(wm * %d + (%s) * 16 + (lane >> 2) + (%s) * 8)", g->WM, i, h);
  if (g->p->A.kmajor) /* rows lr + 4(2i + h): the 4 lanes of a load on adjacent rows */
    return cuda_fmt(b, "(wm * 32 + (lane >> 3) + (2 * (%s) + (%s)) * 4)", i, h);
  return cuda_fmt(b, "(wm * 32 + ((%s) >> 1) * 16 + (lane >> 3) * 4 + ((%s) & 1) * 2 + (%s))", i, i, h);
}

const char *cuda_mm_col(mma_gen *g, const char *j) {
  cuda_b *b = &g->b;
  if (g->p->mode != CUDA_MM_SIMT) return cuda_fmt(b, "(wn * %d + (%s) * 8 + (lane & 3) * 2)", g->WN, j);
  if (g->p->B.kmajor) return cuda_fmt(b, "(wn * 64 + (lane & 7) * 2 + (%s) * 16)", j);
  return cuda_fmt(b, "(wn * 64 + ((%s) >> 1) * 32 + (lane & 7) * 4 + ((%s) & 1) * 2)", j, j);
}

/* ---- declarations -------------------------------------------------------------------- */
void cuda_mm_decls(mma_gen *g) {
  cuda_b *b = &g->b;
  cuda_decl(b, "float", "acc", cuda_fmt(b, "[%d][%d][4]", g->MF, g->NF), "{}");
  if (g->p->mode == CUDA_MM_SIMT) { /* K-major: 4 k per 128-bit load; M/N-major: one k at a time */
    cuda_decl(b, "float", "av", g->p->A.kmajor ? "[8][4]" : "[8][1]", NULL);
    cuda_decl(b, "float", "bv", g->p->B.kmajor ? "[8][4]" : "[8][1]", NULL);
    cuda_decl(b, "hk_v4", "hk_v", NULL, NULL);
    return;
  }
  cuda_decl(b, "hk_u32", "af", cuda_fmt(b, "[%d][4]", g->MF), NULL);
  cuda_decl(b, "hk_u32", "bf", cuda_fmt(b, "[%d][2]", g->NF), NULL);
}

/* Stage hk_st's A or B tile base (C text). */
static const char *stage_base(mma_gen *g, bool is_a) {
  return cuda_fmt(&g->b, "(hk_sb + hk_st * %lld%s)", (long long)g->stage_bytes,
                  is_a ? "" : cuda_fmt(&g->b, " + %lld", (long long)g->a_bytes));
}

static void ldsm(mma_gen *g, bool is_a, const char *dst, const char *r, const char *c, bool trans) {
  cuda_stmt *lm = cuda_emit_s(&g->b, CU_LDMATRIX, dst,
                              cuda_fmt(&g->b, "%s + %s", stage_base(g, is_a), cuda_mm_tile_off(g, is_a, r, c)), NULL, NULL);
  lm->i[0] = 4;
  lm->i[1] = trans;
}

/* dst = the 4 (or 8) bytes of tile element (r, c). */
static void lds(mma_gen *g, bool is_a, const char *dst, const char *r, const char *c, int bytes) {
  cuda_emit_s(&g->b, CU_LD_SHARED, dst, cuda_fmt(&g->b, "%s + %s", stage_base(g, is_a), cuda_mm_tile_off(g, is_a, r, c)), NULL,
              NULL)->i[0] = bytes;
}

static void mma(mma_gen *g, int k, tiny_dtype dt) {
  cuda_b *b = &g->b;
  cuda_for(b, "i", "0", cuda_fmt(b, "%d", g->MF), -1);
  cuda_for(b, "j", "0", cuda_fmt(b, "%d", g->NF), -1);
  cuda_stmt *st = cuda_emit_s(b, CU_MMA_SYNC, "acc[i][j]", "af[i]", "bf[j]", NULL);
  st->i[0] = 16, st->i[1] = 8, st->i[2] = k;
  st->dtype = dt;
  cuda_close(b);
  cuda_close(b);
}

/* MMA16, and TF32's K-major tiles: ldmatrix.x4 (columns counted in 16-bit units, kk a k step of 32 bytes). */
static void ldsm_a(mma_gen *g) {
  cuda_b *b = &g->b;
  bool km = g->p->A.kmajor;
  const char *r = km ? cuda_fmt(b, "wm * %d + i * 16 + (lane & 7) + ((lane >> 3) & 1) * 8", g->WM)
                     : "kk * 16 + (lane & 7) + (lane >> 4) * 8";
  const char *c = km ? "kk * 16 + (lane >> 4) * 8" : cuda_fmt(b, "wm * %d + i * 16 + ((lane >> 3) & 1) * 8", g->WM);
  if (g->esz == 4) c = cuda_fmt(b, "(%s) / 2", c); /* fp32 columns */
  ldsm(g, true, "af[i]", r, c, !km);
}
static void ldsm_b(mma_gen *g) {
  cuda_b *b = &g->b;
  bool km = g->p->B.kmajor;
  const char *r = km ? cuda_fmt(b, "wn * %d + jp * 16 + (lane >> 4) * 8 + (lane & 7)", g->WN)
                     : "kk * 16 + ((lane >> 3) & 1) * 8 + (lane & 7)";
  const char *c = km ? "kk * 16 + ((lane >> 3) & 1) * 8" : cuda_fmt(b, "wn * %d + jp * 16 + (lane >> 4) * 8", g->WN);
  if (g->esz == 4) c = cuda_fmt(b, "(%s) / 2", c);
  ldsm(g, false, "&bf[2 * jp][0]", r, c, !km);
}

static void inner_mma16(mma_gen *g) {
  cuda_b *b = &g->b;
  cuda_for(b, "kk", "0", cuda_fmt(b, "%d", g->BK / 16), -1);
  cuda_for(b, "i", "0", cuda_fmt(b, "%d", g->MF), -1);
  ldsm_a(g);
  cuda_close(b);
  cuda_for(b, "jp", "0", cuda_fmt(b, "%d", g->NF / 2), -1);
  ldsm_b(g);
  cuda_close(b);
  mma(g, 16, g->p->mma_dtype);
  cuda_close(b);
}

/* TF32: k steps of 8 (32 bytes of a K-major row, as MMA16's k16). */
static void inner_tf32(mma_gen *g) {
  cuda_b *b = &g->b;
  const cuda_mma_prob *p = g->p;
  cuda_for(b, "kk", "0", cuda_fmt(b, "%d", g->BK / 8), -1);
  cuda_for(b, "i", "0", cuda_fmt(b, "%d", g->MF), -1);
  if (p->A.kmajor) ldsm_a(g);
  else /* A[k][m]: a0 (m g, k t), a1 (g+8, t), a2 (g, t+4), a3 (g+8, t+4) */
    for (int q = 0; q < 4; q++)
      lds(g, true, cuda_fmt(b, "af[i][%d]", q), cuda_fmt(b, "kk * 8 + (lane & 3) + %d", (q >> 1) * 4),
          cuda_fmt(b, "wm * %d + i * 16 + (lane >> 2) + %d", g->WM, (q & 1) * 8), 4);
  cuda_for(b, "q", "0", "4", -1);
  cuda_assign(b, "af[i][q]", "hk_tf32(af[i][q])");
  cuda_close(b);
  cuda_close(b);
  if (p->B.kmajor) {
    cuda_for(b, "jp", "0", cuda_fmt(b, "%d", g->NF / 2), -1);
    ldsm_b(g);
    cuda_close(b);
  }
  cuda_for(b, "j", "0", cuda_fmt(b, "%d", g->NF), -1);
  if (!p->B.kmajor) /* B[k][n]: b0 (k t, n g), b1 (k t+4, n g) */
    for (int q = 0; q < 2; q++)
      lds(g, false, cuda_fmt(b, "bf[j][%d]", q), cuda_fmt(b, "kk * 8 + (lane & 3) + %d", q * 4),
          cuda_fmt(b, "wn * %d + j * 8 + (lane >> 2)", g->WN), 4);
  cuda_assign(b, "bf[j][0]", "hk_tf32(bf[j][0])");
  cuda_assign(b, "bf[j][1]", "hk_tf32(bf[j][1])");
  cuda_close(b);
  mma(g, 8, TINY_FP32);
  cuda_close(b);
}

/* One m16n8k16 register (two k-adjacent elements) of an fp32 tile, packed:
 * (r, c) and (r, c + 1) of a K-major tile, (r, c) and (r + 1, c) else. */
static void cvt_reg(mma_gen *g, bool is_a, const char *dst, const char *r, const char *c) {
  cuda_b *b = &g->b;
  const char *pack = g->p->mma_dtype == TINY_BF16 ? "hk_pack_bf2" : "hk_pack_h2";
  if (tile_kmajor(g, is_a)) {
    lds(g, is_a, "hk_w2", r, c, 8);
    cuda_assign(b, dst, cuda_fmt(b, "%s(hk_u2f(hk_w2.x), hk_u2f(hk_w2.y))", pack));
  } else {
    lds(g, is_a, "hk_w0", r, c, 4);
    lds(g, is_a, "hk_w1", cuda_fmt(b, "%s + 1", r), c, 4);
    cuda_assign(b, dst, cuda_fmt(b, "%s(hk_u2f(hk_w0), hk_u2f(hk_w1))", pack));
  }
}

static void inner_cvt16(mma_gen *g) {
  cuda_b *b = &g->b;
  const cuda_mma_prob *p = g->p;
  cuda_for(b, "kk", "0", cuda_fmt(b, "%d", g->BK / 16), -1);
  cuda_decl(b, "hk_v2", "hk_w2", NULL, NULL);
  cuda_decl(b, "hk_u32", "hk_w0", NULL, NULL);
  cuda_decl(b, "hk_u32", "hk_w1", NULL, NULL);
  cuda_call(b, "(void)hk_w2; (void)hk_w0; (void)hk_w1");
  cuda_for(b, "i", "0", cuda_fmt(b, "%d", g->MF), -1);
  for (int q = 0; q < 4; q++) { /* a_q: row g + 8(q & 1), k 2t + 8(q >> 1) */
    const char *m = cuda_fmt(b, "wm * %d + i * 16 + (lane >> 2) + %d", g->WM, (q & 1) * 8);
    const char *k = cuda_fmt(b, "kk * 16 + (lane & 3) * 2 + %d", (q >> 1) * 8);
    cvt_reg(g, true, cuda_fmt(b, "af[i][%d]", q), p->A.kmajor ? m : k, p->A.kmajor ? k : m);
  }
  cuda_close(b);
  cuda_for(b, "j", "0", cuda_fmt(b, "%d", g->NF), -1);
  for (int q = 0; q < 2; q++) { /* b_q: k 2t + 8q, n g */
    const char *n = cuda_fmt(b, "wn * %d + j * 8 + (lane >> 2)", g->WN);
    const char *k = cuda_fmt(b, "kk * 16 + (lane & 3) * 2 + %d", q * 8);
    cvt_reg(g, false, cuda_fmt(b, "bf[j][%d]", q), p->B.kmajor ? n : k, p->B.kmajor ? k : n);
  }
  cuda_close(b);
  mma(g, 16, p->mma_dtype);
  cuda_close(b);
}

/* The four words of hk_v (a 128-bit shared load) as floats into dst(0..3):
 * fmt names the destination with one %d for the word. */
static void unpack_v4(cuda_b *b, const char *fmt) {
  static const char *const w[4] = {"hk_u2f(hk_v.x)", "hk_u2f(hk_v.y)", "hk_u2f(hk_v.z)", "hk_u2f(hk_v.w)"};
  for (int i = 0; i < 4; i++) cuda_assign(b, cuda_fmt(b, fmt, i), w[i]);
}

/* SIMT, a K-major tile: vals[x][0..3] <- the thread's 8 rows (A) or
 * columns (B) at k kq..kq+3, one 128-bit load each. */
static void simt_load_k4(mma_gen *g, bool is_a) {
  cuda_b *b = &g->b;
  const char *v = is_a ? "av" : "bv";
  cuda_for(b, "x", "0", "8", -1);
  const char *r = is_a ? "wm * 32 + (lane >> 3) + x * 4" : "wn * 64 + (lane & 7) * 2 + (x >> 1) * 16 + (x & 1)";
  lds(g, is_a, "hk_v", r, "kq", 16);
  unpack_v4(b, cuda_fmt(b, "%s[x][%%d]", v));
  cuda_close(b);
}

/* SIMT, an M/N-major tile: vals[x][0] <- the thread's 8 rows / columns at
 * k kq + kx, two 128-bit loads of 4 consecutive ones (registers stay few:
 * a K-major operand holds 32, this one 8). */
static void simt_load_k1(mma_gen *g, bool is_a) {
  cuda_b *b = &g->b;
  const char *v = is_a ? "av" : "bv";
  cuda_for(b, "hb", "0", "2", -1);
  const char *c = is_a ? "wm * 32 + hb * 16 + (lane >> 3) * 4" : "wn * 64 + hb * 32 + (lane & 7) * 4";
  lds(g, is_a, "hk_v", "kq + kx", c, 16);
  unpack_v4(b, cuda_fmt(b, "%s[hb * 4 + %%d][0]", v));
  cuda_close(b);
}

static void inner_simt(mma_gen *g) {
  cuda_b *b = &g->b;
  bool ak = g->p->A.kmajor, bk = g->p->B.kmajor;
  cuda_for_step(b, "kq", "0", cuda_fmt(b, "%d", g->BK), "4", -1);
  if (ak) simt_load_k4(g, true);
  if (bk) simt_load_k4(g, false);
  cuda_for(b, "kx", "0", "4", -1);
  if (!ak) simt_load_k1(g, true);
  if (!bk) simt_load_k1(g, false);
  cuda_for(b, "x", "0", "8", -1);
  cuda_for(b, "y", "0", "8", -1);
  cuda_assign(b, "acc[x >> 1][y >> 1][(x & 1) * 2 + (y & 1)]",
              cuda_fmt(b, "hk_fma(av[x][%s], bv[y][%s], acc[x >> 1][y >> 1][(x & 1) * 2 + (y & 1)])", ak ? "kx" : "0",
                       bk ? "kx" : "0"));
  cuda_close(b);
  cuda_close(b);
  cuda_close(b);
  cuda_close(b);
}

void cuda_mm_inner(mma_gen *g) {
  switch (g->p->mode) {
  case CUDA_MM_MMA16: inner_mma16(g); break;
  case CUDA_MM_TF32: inner_tf32(g); break;
  case CUDA_MM_CVT16: inner_cvt16(g); break;
  case CUDA_MM_SIMT: inner_simt(g); break;
  }
}
