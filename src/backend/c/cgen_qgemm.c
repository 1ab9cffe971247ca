/* cgen_qgemm.c — the int8 GEMM (cgen_qgemm.h): u8 x s8 -> s32 products with
 * AVX-512 VNNI vpdpbusd, exact, and onnxruntime's requantization fused into
 * the epilogue; an AVX2 variant (its tile in cgen_qgemm_avx2.c) and a
 * scalar one of the same layouts where the CPU lacks VNNI.
 * Needs: cgen_qgemm_int.h (cgen_qgemm_b.c's B side of a conv, cgen_qgemm_avx2.c's tile, cgen_qamx.c's AMX
 * variant).  Gives: cgen_qgemm, cgen_qgemm_spec_init, cgen_qgemm_c11,
 * cgen_qgemm_post_ok.
 *
 * Layout.  Both operands are seen as "rows x K" and packed into blocks of W
 * rows: block b holds K4 = ceil(K / 4) words per row, word [k4][r] = the 4
 * bytes of row b W + r at k = 4 k4 .. 4 k4 + 3 (0 past K and past the rows).
 * A's blocks are MR = 6 rows (the micro-kernel broadcasts one word per row),
 * B's NR = 64 (four vectors of 16 words); a last B block of 16 q + 1
 * columns (N = 49) as q vectors and one column, one of at most 4 columns
 * (N = 196) as those columns alone (qg_nx).  The weight's blocks are packed by
 * F_pack once; the activation per call, s8 through x ^ 0x80 (= x + 128 as
 * u8): as B, each task packs its own B block into its thread's scratch (once
 * per thread for the M chunks of one block), or, where the weight is large
 * and B small (qg_ws, spec.ws; AVX-512), all of B first (into each
 * thread's scratch by its first task where B is at most QG_WS_OWN blocks,
 * else into shared scratch by a pool run), each task then a run of the
 * weight's blocks times all of B (the weight read once, in order); as A, a pool task per block, or
 * (u8, AVX-512) no packing at all: the tile broadcasts the words straight
 * from the rows (K bytes apart; the last block from a zero-padded copy, so
 * nothing past x is read).  vpdpbusd takes the u8 operand first: the
 * broadcast A word when the activation is A, the B vector when it is B.
 * The VNNI tile's depth loop is one asm block (emit_vnni_loop).
 * VNNI-4 (x_vnni4, y_vnni4; a held buffer's layout, q8_hold.c): x is B's
 * words already, [K4][N], each block's rows copied (the AMX variant reads
 * full blocks in place); y rows stored as byte (m & 3) of the words of row
 * m / 4 (byte-masked stores of the shifted lanes).
 *
 * Compensation.  sum_k (x - za) w = sum_k u w - (za + off) sum_k w with u the
 * packed u8 (off = 128 for s8, else 0): F_pack folds bias - (za + off) sum_k w
 * into one int32 per channel (c0), next to the multipliers (mult), each
 * padded to the blocks.  Packed weight: [blocks][K4][W] words, c0, mult.
 *
 * Convolution: B is the im2col of one NCHW image.  1x1, stride 1, no
 * padding: the image itself, [K][N], as a GEMM's (conv1x1_as_gemm);
 * stride-1 convs whose output rows are as wide as the image's ("same"
 * padding across: qg_dims.ci): B's blocks read from x itself, masked
 * where a pixel is off the image (emit_inplace), the output's own columns;
 * other stride-1 convs: read in place from a padded copy over a
 * padded-width grid of columns (emit_pad); strided convs whose output rows
 * are as wide as the image's phase planes (qg_dims.ps: OW = ceil(W / sw),
 * every phase read, e.g. 3x3/2 pad 1): the image split per call into sh sw
 * phase planes per channel ($F_phs, emit_phase) and B's blocks read from
 * them masked as from x (emit_inplace), no im2col (a 7x7/2 stem too); the
 * AVX-512 variant's blocks unrolled per period of lcm(kh kw, 4) rows
 * (emit_inplace_unrolled); other strides: built per call ($F_col, the
 * padding za) into scratch and packed from there as a [K][N] matrix; or,
 * with few input channels (qg_dims.pg, where ps does not apply), each B
 * block's rows gathered from the padded image (emit_gather), no im2col.
 *
 * Epilogue (MLAS's requantization): v = float(acc + c0) * mult; fp32 out: v;
 * else v clamped to [lo - zy, hi - zy], rounded to nearest even, + zy, stored
 * as bytes (a full tile row as one 64-byte store).  Rows and columns past M,
 * N are computed and not stored. */
#include <stdio.h>
#include <string.h>

#include "backend/c/cgen_qgemm_int.h"

/* The VNNI tiles' depth block in words (4 k each): B's 64-column slice of it
 * (32 KiB) stays in L1 across a task's A blocks; partial sums kept in the
 * thread's scratch between blocks.  A K4 of at most QG_KC4 * 5 / 4 is one block. */
#define QG_KC4 128L

/* A strided conv of at most this many input channels gathers B's blocks
 * from the zero-point-padded image (qg_dims.pg) instead of building the
 * im2col: with few channels the im2col is kh kw / (sh sw) times the image
 * (12x for a 7x7/2 stem: 1.8 MB against 159 KB for ResNet's), written and
 * read again, while the padded image stays in L2. */
#define QG_PG_C 4
/* The bytes a gather reads past the padded image (a row's 64 columns at
 * stride sw <= 4, not stored) */
#define QG_PG_SLACK 320L
/* The largest stride whose convs may be split into phase planes (qg_dims.ps):
 * sh sw planes per channel */
#define QG_PS_S 4

/* The weight-stationary order (qg_ws) where the packed weight is at least
 * QG_WS_W bytes and B packed whole at most QG_WS_B (it stays in L2, read
 * by both cores): the weight then streams from L3 / DRAM once a call, in
 * order, A's next rows asked for QG_PFA bytes ahead in the tile's depth
 * loop.  Zen 5, 1 thread, the weight flushed before each call
 * (bench/q1x1_ab.py --cold --cpu), ResNet-50's 1x1 convs of weights of
 * 256 KiB to 2 MiB against the B block per task: 0.58-0.97x the time
 * (512x49x2048 0.59, 2048 @ 14x14/2 0.58, 512x196x1024 0.81); warm, equal;
 * ws forced on the smaller weights (64-128 KiB), 1.00-1.09x: no gain.
 * The order without the prefetch: 0.75-1.10x (1024x196x256 slower);
 * 512 bytes ahead 2-10% slower than 1024, 2048 3% faster, 4096 as 2048. */
#define QG_WS_W (192L << 10)
#define QG_WS_B (512L << 10)
#define QG_PFA 2048
/* The weight-stationary order with at most QG_WS_OWN B blocks: each thread
 * packs all of B into its own scratch on its first task (qg_scr.own): no
 * pool run for the pack, no barrier after it, B read from the thread's own
 * L2.  Shared (a pool run, one packer a block, then every thread reading
 * all of it, half from the other core), N = 49's single block was a serial
 * pack, a barrier and the other core's B.  Zen 5, 2 threads
 * (bench/qconv_ab.py, q1x1_ab.py), vCPUs on two CCDs: 3x3 512 @ 7x7
 * 0.75-0.91x the time, 512x49x2048 0.75-0.87, 3x3/2 to 7x7 0.88-0.98,
 * 256x196x1024 (4 blocks) 0.77-0.92; on one CCD the N = 49 convs
 * 0.94-0.97, N = 196 level; int8 ResNet-50 0.93x on two CCDs, level on one
 * (bench/RESULTS.md, z10rn). */
#define QG_WS_OWN 4

/* The tiles' order (not qg_ws) where the weight (A) is at least QG_PFN
 * bytes: the depth loop asks for the next A block's bytes at the same depth
 * (K4 MR words ahead) on every step, so the next tile's piece of the weight
 * (a depth block's 3 KiB, K4 MR words apart) is in L1 when it starts; the
 * hardware prefetcher does not follow those jumps.  Zen 5, 1 thread, CPU
 * clock (bench/qconv_ab.py, bench/q1x1_ab.py --cpu), the weight flushed
 * before each call, as in a whole run: 3x3 256x196x2304 0.78x the time,
 * 3x3/2 to 14x14 0.79, 3x3 128x784x1152 0.94, 1x1 256x784x512 0.96,
 * 128x784x512 0.98; warm 0.99-1.01.  Below 64 KiB (K <= 256 at 56x56,
 * 64x3136x576) 0.99-1.02 cold: not asked. */
#define QG_PFN (64L << 10)

/* The attribute of o's variant's functions: VNNI, AVX2 or none. */
static const char *qg_attr(const cg_out *o) {
  return o->isa->id == CGEN_ISA_AVX512 ? QG_ATTR : o->isa->id == CGEN_ISA_AVX2 ? QG_ATTR2 : "";
}

void cgen_qgemm_spec_init(cgen_qgemm_spec *s, int64_t m, int64_t n, int64_t k) {
  memset(s, 0, sizeof *s);
  s->m = m, s->n = n, s->k = k;
  s->x_dtype = s->y_dtype = TINY_U8;
  s->hi = 255;
  s->force_isa = -1;
}

int cg_qg_tail_nv(const qg_dims *d) { return (int)((d->NT - (d->NB - 1) * QG_NR + 15) / 16); }

/* The columns of the VNNI variant's last B block of spec s (sizes d) run
 * one by one with the rows as lanes (0: none): the weight as A, the
 * columns the output's own.  Each such column is one ymm vpdpbusd per
 * depth step: the 6 rows' weight words (24 of its 32 bytes) times the
 * column's word broadcast (emit_vnni_loop's nx).  Columns 16 q + 1, q >= 1
 * (N = 49, a 7x7 image): 3 vectors and column 48 instead of 4 vectors, a
 * quarter of the lanes idle.  At most QG_XC columns and no vector (N = 196,
 * a 14x14 image: 3 blocks and 4 columns): those columns alone, in two sets
 * of accumulators over alternate depth steps (a vector of 16 lanes for 4
 * columns, its 6 accumulators each on every step, ran at ~4 cycles a step). */
#define QG_XC 4
static int qg_nx(const cgen_qgemm_spec *s, const qg_dims *d) {
  long nc = d->NT - (d->NB - 1) * QG_NR;
  if (!s->weight_a || d->cd) return 0;
  return nc > 16 && nc % 16 == 1 ? 1 : nc <= QG_XC ? (int)nc : 0;
}

/* The vectors of the VNNI variant's last B block (QG_NV: no tail tile). */
static int qg_tnv(const cgen_qgemm_spec *s, const qg_dims *d) {
  return qg_nx(s, d) ? (int)((d->NT - (d->NB - 1) * QG_NR) / 16) : cg_qg_tail_nv(d);
}

const char *cg_qg_post_params(const cgen_qgemm_spec *s) {
  return s->post ? ", void (*post)(void *, long, long, long, long), void *pctx" : "";
}

void cg_qg_emit_post(cg_out *o, const cgen_qgemm_spec *s, const qg_dims *d, const char *m0, const char *m1, bool all) {
  if (!s->post) return;
  if (all) {
    cg_emit(o, "  if (cx->post) cx->post(cx->pctx, %s, %s, 0L, %ldL);\n", m0, m1, d->N);
    return;
  }
  cg_emit(o, "  if (cx->post) cx->post(cx->pctx, %s, %s, jb * %dL, jb * %dL + %d < %ldL ? jb * %dL + %d : %ldL);\n", m0, m1, QG_NR, QG_NR,
          QG_NR, d->N, QG_NR, QG_NR, d->N);
}

/* The sizes of spec s's emitted functions (cgen_qgemm_int.h). */
qg_dims cg_qg_dims(const cgen_qgemm_spec *s) {
  qg_dims d;
  d.M = (long)s->m, d.N = (long)s->n, d.K = (long)s->k, d.K4 = (d.K + 3) / 4;
  bool s1 = s->conv.kh > 0 && s->conv.sh == 1 && s->conv.sw == 1;
  d.ci = s1 && s->weight_a && 2 * s->conv.pw == s->conv.dw * (s->conv.kw - 1);
  d.cd = s1 && !d.ci;
  d.Hp = (long)(s->conv.h + 2 * s->conv.ph), d.Wp = (long)(s->conv.w + 2 * s->conv.pw);
  d.OW = d.Wp - (long)(s->conv.dw * (s->conv.kw - 1));
  d.NT = d.cd ? d.N / (d.OW > 0 ? d.OW : 1) * d.Wp : d.N;
  /* the padded image (and its slack) fits where the AMX variant keeps an im2col (cgen_qamx.c: K N bytes) */
  d.ps = false, d.Hs = d.Ws = 0;
  if (s->conv.kh > 0 && !s1 && s->weight_a && s->conv.sh <= QG_PS_S && s->conv.sw <= QG_PS_S) {
    long sh = (long)s->conv.sh, sw = (long)s->conv.sw;
    d.Hs = ((long)s->conv.h + sh - 1) / sh, d.Ws = ((long)s->conv.w + sw - 1) / sw;
    long ow = ((long)s->conv.w + 2 * (long)s->conv.pw - (long)s->conv.dw * ((long)s->conv.kw - 1) - 1) / sw + 1;
    unsigned uy = 0, ux = 0; /* the plane rows py and columns px some tap reads: every (py, px) where all are */
    for (long ky = 0; ky < (long)s->conv.kh && ky < sh; ky++) uy |= 1u << ut_mod(ky * (long)s->conv.dh - (long)s->conv.ph, sh);
    for (long kx = 0; kx < (long)s->conv.kw && kx < sw; kx++) ux |= 1u << ut_mod(kx * (long)s->conv.dw - (long)s->conv.pw, sw);
    d.ps = ow == d.Ws && uy == (1u << sh) - 1 && ux == (1u << sw) - 1;
  }
  /* the phase planes where they apply: a 7x7/2 stem 0.92x the gather's time on them (Zen 5, one thread) */
  d.pg = !d.ps && s->conv.kh > 0 && !s1 && s->conv.c <= QG_PG_C && s->conv.sw <= 4 && s->weight_a &&
         (long)s->conv.c * d.Hp * d.Wp + QG_PG_SLACK <= d.K * d.N;
  d.MB = (d.M + QG_MR - 1) / QG_MR, d.NB = (d.NT + QG_NR - 1) / QG_NR;
  d.wrows = s->weight_a ? d.M : d.N;
  d.wblk = s->weight_a ? QG_MR : QG_NR;
  d.wblocks = s->weight_a ? d.MB : d.NB;
  d.chpad = d.wblocks * d.wblk;
  d.amx = cg_qamx_on(s);
  d.wwords = d.wblocks * d.K4 * d.wblk;
  if (d.amx && cg_qamx_wwords(s, &d) > d.wwords) d.wwords = cg_qamx_wwords(s, &d);
  return d;
}

/* Whether the AVX-512 variant of spec s (sizes d) runs weight-stationary
 * (emit_task_ws: B's NB blocks packed once into shared scratch, then each
 * task a run of A blocks times every B block over the whole depth): the
 * weight as A and spec.ws 1, or 0 and the weight at least QG_WS_W bytes,
 * B packed at most QG_WS_B.  Not with the AMX variant (it reads B blocks
 * per task). */
static bool qg_ws(const cgen_qgemm_spec *s, const qg_dims *d) {
  if (!s->weight_a || d->amx || s->ws < 0) return false;
  return s->ws > 0 || (d->M * d->K >= QG_WS_W && d->NB * d->K4 * QG_NR * 4 <= QG_WS_B);
}

/* $F_pk: rows [b W, b W + W) of an R x K byte matrix (row stride rs, k
 * stride ks), each byte ^ x, as block b of words d[K4][W]. */
static void emit_pack(cg_out *o, long K, long K4) {
  cg_emit(o, "static void $F_pk(const uint8_t *s, long rs, long ks, long R, int W, unsigned x, long b, int32_t *d) {\n");
  cg_emit(o, "  uint8_t *q = (uint8_t *)d;\n  memset(q, 0, (size_t)%ldL * (size_t)W * 4u);\n", K4);
  cg_emit(o, "  long r0 = b * W, nr = R - r0 < W ? R - r0 : W;\n");
  cg_emit(o, "  if (ks == 1) {\n    for (long r = 0; r < nr; r++) {\n      const uint8_t *p = s + (r0 + r) * rs;\n");
  cg_emit(o, "      for (long k = 0; k < %ldL; k++) q[(k >> 2) * W * 4 + r * 4 + (k & 3)] = (uint8_t)(p[k] ^ x);\n", K);
  cg_emit(o, "    }\n    return;\n  }\n  long k0 = 0, rv = 0;\n  (void)rv;\n");
  /* rows along the unit stride (rs == 1): 16 rows of 4 k at a time, the
   * bytes interleaved by two rounds of unpacks */
  cg_emit(o, "#ifdef __SSE2__\n  if (rs == 1) {\n    const __m128i vx = _mm_set1_epi8((char)x);\n    long r16 = nr / 16 * 16;\n");
  cg_emit(o, "    for (; k0 + 4 <= %ldL; k0 += 4)\n      for (long r = 0; r < r16; r += 16) {\n", K);
  cg_emit(o, "        const uint8_t *p = s + k0 * ks + r0 + r;\n");
  cg_emit(o, "        __m128i a0 = _mm_xor_si128(_mm_loadu_si128((const __m128i *)p), vx);\n");
  for (int j = 1; j < 4; j++)
    cg_emit(o, "        __m128i a%d = _mm_xor_si128(_mm_loadu_si128((const __m128i *)(p + %d * ks)), vx);\n", j, j);
  cg_emit(o, "        __m128i t0 = _mm_unpacklo_epi8(a0, a1), t1 = _mm_unpackhi_epi8(a0, a1);\n");
  cg_emit(o, "        __m128i t2 = _mm_unpacklo_epi8(a2, a3), t3 = _mm_unpackhi_epi8(a2, a3);\n");
  cg_emit(o, "        __m128i *d4 = (__m128i *)(q + (k0 >> 2) * W * 4 + r * 4);\n");
  cg_emit(o, "        _mm_storeu_si128(d4, _mm_unpacklo_epi16(t0, t2));\n        _mm_storeu_si128(d4 + 1, _mm_unpackhi_epi16(t0, t2));\n");
  cg_emit(o, "        _mm_storeu_si128(d4 + 2, _mm_unpacklo_epi16(t1, t3));\n        _mm_storeu_si128(d4 + 3, _mm_unpackhi_epi16(t1, t3));\n");
  cg_emit(o, "      }\n    rv = r16;\n  }\n#endif\n");
  /* the rest: rows from rv for the k done above, every row past k0 */
  cg_emit(o, "  for (long k = 0; k < %ldL; k++) {\n", K);
  cg_emit(o, "    const uint8_t *p = s + k * ks + r0 * rs;\n    uint8_t *t = q + (k >> 2) * W * 4 + (k & 3);\n");
  cg_emit(o, "    for (long r = k < k0 ? rv : 0; r < nr; r++) t[r * 4] = (uint8_t)(p[r * rs] ^ x);\n  }\n}\n");
}

/* $F_col(x, col, k): row k of the conv's im2col [K][N] bytes (cgen_qgemm.h's
 * conv), the padding za; runs of unit stride as memcpy / memset. */
static void emit_im2col(cg_out *o, const cgen_qgemm_spec *s, long N) {
  long khw = (long)(s->conv.kh * s->conv.kw), H = (long)s->conv.h, W = (long)s->conv.w;
  long OW = (W + 2 * (long)s->conv.pw - (long)s->conv.dw * ((long)s->conv.kw - 1) - 1) / (long)s->conv.sw + 1, OH = N / OW;
  cg_emit(o, "static void $F_col(const uint8_t *x, uint8_t *col, long k) {\n");
  cg_emit(o, "  long c = k / %ldL, ky = k %% %ldL / %ldL, kx = k %% %ldL;\n", khw, khw, (long)s->conv.kw, (long)s->conv.kw);
  cg_emit(o, "  const uint8_t *src = x + c * %ldL;\n  uint8_t *d = col + k * %ldL, z = (uint8_t)%d;\n", H * W, N, (int)s->za);
  /* the columns ox whose ix = ox sw - pw + kx dw is in [0, W): [o0, o1) */
  cg_emit(o, "  long x0 = kx * %ldL - %ldL, o0 = 0, o1 = %ldL;\n", (long)s->conv.dw, (long)s->conv.pw, OW);
  cg_emit(o, "  while (o0 < o1 && o0 * %ldL + x0 < 0) o0++;\n  while (o1 > o0 && (o1 - 1) * %ldL + x0 >= %ldL) o1--;\n",
          (long)s->conv.sw, (long)s->conv.sw, W);
  cg_emit(o, "  for (long oy = 0; oy < %ldL; oy++, d += %ldL) {\n", OH, OW);
  cg_emit(o, "    long iy = oy * %ldL - %ldL + ky * %ldL;\n", (long)s->conv.sh, (long)s->conv.ph, (long)s->conv.dh);
  cg_emit(o, "    if (iy < 0 || iy >= %ldL) { memset(d, z, %ldUL); continue; }\n", H, OW);
  cg_emit(o, "    const uint8_t *r = src + iy * %ldL + x0;\n    memset(d, z, (size_t)o0);\n", W);
  if (s->conv.sw == 1) cg_emit(o, "    memcpy(d + o0, r + o0, (size_t)(o1 - o0));\n");
  else cg_emit(o, "    for (long ox = o0; ox < o1; ox++) d[ox] = r[ox * %ldL];\n", (long)s->conv.sw);
  cg_emit(o, "    memset(d + o1, z, (size_t)(%ldL - o1));\n  }\n}\n", OW);
}

/* $F_pack: the weight's blocks, then c0 = bias - (za + off) * sum_k w and
 * mult per channel (0 past the channels). */
static void emit_wpack(cg_out *o, const cgen_qgemm_spec *s, const qg_dims *d) {
  long off = s->x_dtype == TINY_I8 ? 128 : 0;
  long rs = s->w_kmajor ? 1 : d->K, ks = s->w_kmajor ? d->wrows : 1;
  long words = d->wwords;
  cg_emit(o, "long $F_wsize(void) { return %ldL; }\n", (words + 2 * d->chpad) * 4);
  if (d->amx) {
    cg_emit(o, "static int $F_sel(void);\n");
    cg_qamx_emit_pack(o, s, d);
  }
  cg_emit(o, "int $F_pack(const int8_t *w, const int32_t *bias, const float *mult, void *wp) {\n");
  cg_emit(o, "  int32_t *d = (int32_t *)wp, *c0 = d + %ldL;\n  float *mu = (float *)(c0 + %ldL);\n", words, d->chpad);
  cg_emit(o, "  if (!w || !mult || !wp) return -1;\n");
  if (d->amx) /* the variant that runs reads its own layout (cgen_qamx.c) */
    cg_emit(o, "  if ($F_sel() == 4) $F_amxpk(w, d);\n  else\n");
  cg_emit(o, "  for (long b = 0; b < %ldL; b++) $F_pk((const uint8_t *)w, %ldL, %ldL, %ldL, %ld, 0u, b, d + b * %ldL);\n", d->wblocks,
          rs, ks, d->wrows, d->wblk, d->K4 * d->wblk);
  cg_emit(o, "  for (long c = 0; c < %ldL; c++) {\n    long sum = 0;\n", d->chpad);
  cg_emit(o, "    for (long k = 0; c < %ldL && k < %ldL; k++) sum += w[c * %ldL + k * %ldL];\n", d->wrows, d->K, rs, ks);
  cg_emit(o, "    long v = c < %ldL ? (bias ? (long)bias[c] : 0L) - %ldL * sum : 0L;\n", d->wrows, (long)s->za + off);
  cg_emit(o, "    c0[c] = (int32_t)(uint32_t)(unsigned long)v;\n    mu[c] = c < %ldL ? mult[c] : 0.0f;\n  }\n", d->wrows);
  cg_emit(o, "  return 0;\n}\n");
}

/* $F_requant: the requantization's per-channel parameters set after
 * $F_pack (which took no bias and a multiplier of 1): c0 += bias[c] (NULL:
 * none; each an integer below 2^30 in magnitude, else -1 and wp is left
 * as it was) and mu = mult[c] (NULL: 1), for c below the channels. */
static void emit_requant(cg_out *o, const qg_dims *d) {
  long words = d->wwords;
  cg_emit(o, "int $F_requant(void *wp, const float *bias, const float *mult) {\n");
  cg_emit(o, "  int32_t *c0 = (int32_t *)wp + %ldL;\n  float *mu = (float *)(c0 + %ldL);\n", words, d->chpad);
  cg_emit(o, "  for (long c = 0; bias && c < %ldL; c++) {\n", d->wrows);
  cg_emit(o, "    float b = bias[c];\n    if (!(b == nearbyintf(b) && b > -1073741824.0f && b < 1073741824.0f)) return -1;\n");
  cg_emit(o, "    long v = (long)c0[c] + (long)b;\n    if (v < -2147483647L || v > 2147483647L) return -1;\n  }\n");
  cg_emit(o, "  for (long c = 0; c < %ldL; c++) {\n", d->wrows);
  cg_emit(o, "    if (bias) c0[c] = (int32_t)((long)c0[c] + (long)bias[c]);\n    mu[c] = mult ? mult[c] : 1.0f;\n  }\n");
  cg_emit(o, "  return 0;\n}\n");
}

/* The store of one output element (scalar variant) or vector (AVX-512) of
 * row expression `row`, column `col`: v in fp32. */
static void emit_store(cg_out *o, const cgen_qgemm_spec *s, bool vec, bool compress, const char *row, const char *col) {
  const char *yt = s->y_dtype == TINY_FP32 ? "float" : s->y_dtype == TINY_I8 ? "int8_t" : "uint8_t";
  long N = (long)s->n;
  if (s->y_dtype == TINY_FP32 && vec) {
    cg_emit(o, "      _mm512_mask_%sstoreu_ps((float *)y + (%s) * %ldL + %s, mk, v);\n", compress ? "compress" : "", row, N, col);
    return;
  }
  if (s->y_dtype == TINY_FP32) {
    cg_emit(o, "      ((float *)y)[(%s) * %ldL + %s] = v;\n", row, N, col);
    return;
  }
  float flo = (float)(s->lo - s->zy), fhi = (float)(s->hi - s->zy);
  if (vec) {
    cg_emit(o, "      v = _mm512_min_ps(_mm512_max_ps(v, _mm512_set1_ps(%.1ff)), _mm512_set1_ps(%.1ff));\n", (double)flo, (double)fhi);
    cg_emit(o, "      __m512i r = _mm512_add_epi32(_mm512_cvtps_epi32(v), _mm512_set1_epi32(%d));\n", (int)s->zy);
    if (compress) /* the lanes on the image, packed to the front: the output is contiguous across rows */
      cg_emit(o, "      r = _mm512_maskz_compress_epi32(mk, r);\n      mk = (__mmask16)((1u << __builtin_popcount(mk)) - 1u);\n");
    if (s->y_vnni4) { /* lane l's byte to byte (row & 3) of word l: a byte-masked store of the shifted lanes */
      cg_emit(o, "      { __m128i sh = _mm_cvtsi32_si128(8 * (int)((%s) & 3));\n", row);
      cg_emit(o, "        __m512i t = _mm512_sll_epi32(_mm512_maskz_mov_epi32(mk, _mm512_set1_epi32(255)), sh);\n");
      cg_emit(o, "        _mm512_mask_storeu_epi8((uint8_t *)y + ((%s) >> 2) * %ldL + (%s) * 4, _mm512_test_epi8_mask(t, t),\n"
                 "                                _mm512_sll_epi32(_mm512_and_si512(r, _mm512_set1_epi32(255)), sh)); }\n",
              row, 4 * N, col);
      return;
    }
    cg_emit(o, "      _mm512_mask_cvtepi32_storeu_epi8((%s *)y + (%s) * %ldL + %s, mk, r);\n", yt, row, N, col);
    return;
  }
  cg_emit(o, "      v = v < %.1ff ? %.1ff : v > %.1ff ? %.1ff : v;\n", (double)flo, (double)flo, (double)fhi, (double)fhi);
  if (s->y_vnni4)
    cg_emit(o, "      ((%s *)y)[((%s) >> 2) * %ldL + (%s) * 4 + ((%s) & 3)] = (%s)((int)nearbyintf(v) + %d);\n", yt, row, 4 * N, col, row,
            yt, (int)s->zy);
  else cg_emit(o, "      ((%s *)y)[(%s) * %ldL + %s] = (%s)((int)nearbyintf(v) + %d);\n", yt, row, N, col, yt, (int)s->zy);
}

/* The depth loop of a VNNI tile of no vector and nx <= QG_XC columns
 * (qg_nx) in one asm block: column c's word broadcast (u8) times the rows'
 * words (s8) into cx<c+1> on even steps and cy<c+1> on odd ones (each
 * accumulator on every other step: vpdpbusd's latency off the loop), an
 * odd kn's first step alone; cx = cx + cy after.  astep: A's bytes a step,
 * pfa as emit_vnni_loop's. */
static void emit_xc_loop(cg_out *o, int nx, long astep, int pfa) {
  cg_emit(o, "  { const uint8_t *pa = ap; const int32_t *pb = bp; long kk = kn;\n  __asm__ volatile(\n");
  for (int c = 1; c <= nx; c++) cg_emit(o, "    \"vpxord %%[cx%d], %%[cx%d], %%[cx%d]\\n\\t\"\n    \"vpxord %%[cy%d], %%[cy%d], %%[cy%d]\\n\\t\"\n", c, c, c, c, c, c);
  for (int part = 0; part < 2; part++) { /* the odd step, then the loop of two */
    cg_emit(o, part ? "    \"shr $1, %%[kk]\\n\\tjz 3f\\n\\t\"\n    \"1:\\n\\t\"\n" : "    \"test $1, %%[kk]\\n\\tjz 2f\\n\\t\"\n");
    for (int st = 0; st <= part; st++) {
      cg_emit(o, "    \"vmovdqu32 %ld(%%[pa]), %%%%ymm%d\\n\\t\"\n", st * astep, 28 + st);
      for (int c = 1; c <= nx; c++)
        cg_emit(o, "    \"vpbroadcastd %d(%%[pb]), %%%%ymm%d\\n\\t\"\n    \"vpdpbusd %%%%ymm%d, %%%%ymm%d, %%[c%c%d]\\n\\t\"\n",
                st * QG_NR * 4 + 4 * (c - 1), 30 + st, 28 + st, 30 + st, st ? 'y' : 'x', c);
      cg_emit(o, "    \"prefetcht0 %d(%%[pb])\\n\\t\"\n", st * QG_NR * 4 + 8 * QG_NR * 4);
      if (pfa > 0) cg_emit(o, "    \"prefetcht0 %ld(%%[pa])\\n\\t\"\n", pfa + st * astep);
    }
    cg_emit(o, "    \"add $%ld, %%[pa]\\n\\tadd $%d, %%[pb]\\n\\t\"\n", (part + 1) * astep, (part + 1) * QG_NR * 4);
    cg_emit(o, part ? "    \"dec %%[kk]\\n\\tjnz 1b\\n\\t\"\n    \"3:\"\n" : "    \"2:\\n\\t\"\n");
  }
  cg_emit(o, "    : [pa] \"+r\"(pa), [pb] \"+r\"(pb), [kk] \"+r\"(kk)");
  for (int c = 1; c <= nx; c++) cg_emit(o, ", [cx%d] \"=&v\"(cx%d), [cy%d] \"=&v\"(cy%d)", c, c, c, c);
  cg_emit(o, "\n    :\n    : \"cc\", \"memory\", \"zmm28\", \"zmm29\", \"zmm30\", \"zmm31\");\n  }\n");
  for (int c = 1; c <= nx; c++) cg_emit(o, "  cx%d = _mm256_add_epi32(cx%d, cy%d);\n", c, c, c);
}

/* The depth loop of the VNNI tile in one asm block (GCC 12 spilled the
 * accumulators of the C loop to the stack on every step): kn steps of nv
 * vector loads of B (zmm28..), mr <= MR broadcasts of A words, mr x nv
 * vpdpbusd into the C variables cI_J, kept in registers (rows mr .. MR - 1
 * zero: the last A block of M % MR rows computes only those, 3% of a
 * 128-row GEMM's 132).  The u8 operand (the
 * activation) is vpdpbusd's first source: the B vectors when the weight is
 * A (its s8 words then broadcast straight from memory, {1to16}), else the
 * A word broadcast into zmm27.  pfa > 0: A's bytes pfa ahead asked for on
 * every step (the weight-stationary order's stream, qg_ws).  nx columns
 * after the vectors (qg_nx) into cx1 ..: with no vector, emit_xc_loop. */
static void emit_vnni_loop(cg_out *o, const cgen_qgemm_spec *s, int nv, int mr, long arow, long astep, int pfa, int nx) {
  if (nv == 0) {
    emit_xc_loop(o, nx, astep, pfa);
    return;
  }
  for (int i = mr; i < QG_MR; i++) /* rows past the block's: zero, stored nowhere */
    for (int j = 0; j < nv; j++) cg_emit(o, "  c%d_%d = _mm512_setzero_si512();\n", i, j);
  cg_emit(o, "  { const uint8_t *pa = ap; const int32_t *pb = bp; long kk = kn;\n  __asm__ volatile(\n");
  for (int i = 0; i < mr; i++)
    for (int j = 0; j < nv; j++) cg_emit(o, "    \"vpxord %%[c%d_%d], %%[c%d_%d], %%[c%d_%d]\\n\\t\"\n", i, j, i, j, i, j);
  for (int c = 1; c <= nx; c++) cg_emit(o, "    \"vpxord %%[cx%d], %%[cx%d], %%[cx%d]\\n\\t\"\n", c, c, c);
  cg_emit(o, "    \"1:\\n\\t\"\n");
  for (int j = 0; j < nv; j++) cg_emit(o, "    \"vmovdqu64 %d(%%[pb]), %%%%zmm%d\\n\\t\"\n", 64 * j, 28 + j);
  for (int c = 1; c <= nx; c++) /* column 16 nv + c - 1: its word (u8) broadcast times the MR rows' words (s8, 24 of the ymm's 32 bytes: lanes past MR unused) */
    cg_emit(o, "    \"vpbroadcastd %d(%%[pb]), %%%%ymm31\\n\\t\"\n    \"vpdpbusd (%%[pa]), %%%%ymm31, %%[cx%d]\\n\\t\"\n", 64 * nv + 4 * (c - 1), c);
  cg_emit(o, "    \"prefetcht0 %d(%%[pb])\\n\\t\"\n", 8 * QG_NR * 4);
  if (pfa > 0) cg_emit(o, "    \"prefetcht0 %d(%%[pa])\\n\\t\"\n", pfa);
  for (int i = 0; i < mr; i++) {
    cg_emit(o, "    \"vpbroadcastd %ld(%%[pa]), %%%%zmm27\\n\\t\"\n", arow * i);
    for (int j = 0; j < nv; j++) {
      if (s->weight_a) cg_emit(o, "    \"vpdpbusd %%%%zmm27, %%%%zmm%d, %%[c%d_%d]\\n\\t\"\n", 28 + j, i, j);
      else cg_emit(o, "    \"vpdpbusd %%%%zmm%d, %%%%zmm27, %%[c%d_%d]\\n\\t\"\n", 28 + j, i, j);
    }
  }
  cg_emit(o, "    \"add $%ld, %%[pa]\\n\\tadd $%d, %%[pb]\\n\\tdec %%[kk]\\n\\tjnz 1b\"\n    : [pa] \"+r\"(pa), [pb] \"+r\"(pb), [kk] \"+r\"(kk)",
          astep, QG_NR * 4);
  for (int i = 0; i < mr; i++)
    for (int j = 0; j < nv; j++) cg_emit(o, ", [c%d_%d] \"=v\"(c%d_%d)", i, j, i, j);
  for (int c = 1; c <= nx; c++) cg_emit(o, ", [cx%d] \"=v\"(cx%d)", c, c);
  cg_emit(o, "\n    :\n    : \"cc\", \"memory\"");
  for (int j = -1; j < nv; j++) cg_emit(o, ", \"zmm%d\"", 28 + j);
  if (nx) cg_emit(o, ", \"zmm31\"");
  cg_emit(o, ");\n  }\n");
}

/* `__m512 v = ...`: accumulator cI_J of the VNNI tile plus c0, times mult
 * (per row when the weight is A, per column when it is B). */
static void emit_value(cg_out *o, const cgen_qgemm_spec *s, const char *v, int i, int j) {
  if (s->weight_a)
    cg_emit(o, "      __m512 %s = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(c%d_%d, _mm512_set1_epi32(c0[m0 + %d]))),"
               " _mm512_set1_ps(mu[m0 + %d]));\n", v, i, j, i, i);
  else
    cg_emit(o, "      __m512 %s = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(c%d_%d, _mm512_loadu_si512(c0 + n0 + %d))),"
               " _mm512_loadu_ps(mu + n0 + %d));\n", v, i, j, 16 * j, 16 * j);
}

/* Row i of a full VNNI tile as 64 output bytes (u8 / s8), one store.  The
 * clamp to [lo, hi] with the fewest vector operations: each value's upper
 * side in fp32 (min(hi - zy, v): rint and the clamp commute at integer
 * bounds; it also keeps cvtps2dq off its overflow, which returns INT_MIN),
 * rounded, packed to int16 (saturating: only values below the bounds
 * saturate), + zy saturating, packed to bytes (saturating to the type's
 * range, which holds [lo, hi]), max lo on the bytes where lo is above the
 * type's least (no fp32 max); the packs' lane order undone (dword 4 l + j
 * of the packs holds columns 16 j + 4 l .. + 3).  A NaN (min keeps v,
 * cvtps2dq gives INT_MIN) stores lo, as the fp32 clamp of the masked
 * stores does. */
static void emit_row64(cg_out *o, const cgen_qgemm_spec *s, int i) {
  bool s8 = s->y_dtype == TINY_I8;
  float fhi = (float)(s->hi - s->zy);
  for (int j = 0; j < QG_NV; j++) {
    char v[8];
    snprintf(v, sizeof v, "v%d", j);
    emit_value(o, s, v, i, j);
    cg_emit(o, "      __m512i r%d = _mm512_cvtps_epi32(_mm512_min_ps(_mm512_set1_ps(%.1ff), v%d));\n", j, (double)fhi, j);
  }
  cg_emit(o, "      const __m512i zy = _mm512_set1_epi16(%d);\n", (int)s->zy);
  cg_emit(o, "      __m512i h0 = _mm512_adds_epi16(_mm512_packs_epi32(r0, r1), zy), h1 = _mm512_adds_epi16(_mm512_packs_epi32(r2, r3), zy);\n");
  cg_emit(o, "      __m512i b = _mm512_%s_epi16(h0, h1);\n", s8 ? "packs" : "packus");
  if (s->lo > (s8 ? -128 : 0)) cg_emit(o, "      b = _mm512_max_ep%s8(b, _mm512_set1_epi8((char)%d));\n", s8 ? "i" : "u", (int)s->lo);
  cg_emit(o, "      b = _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), b);\n");
  cg_emit(o, "      _mm512_storeu_si512((uint8_t *)y + (m0 + %d) * %ldL + n0, b);\n", i, (long)s->n);
}

/* The last depth block's store of emit_xc_loop's nx columns (no vector;
 * bytes out, row-major): each column's rows as lanes (its sums x<c>[],
 * emit_x1_epilogue's) requantized as emit_store's vectors, the columns'
 * bytes interleaved into one word a row, its nx bytes stored. */
static void emit_xc_store(cg_out *o, const cgen_qgemm_spec *s, const qg_dims *d, int nx) {
  cg_emit(o, "  {\n    const __m256i c0v = _mm256_maskz_loadu_epi32(0x3f, c0 + m0);\n    const __m256 muv = _mm256_maskz_loadu_ps(0x3f, mu + m0);\n");
  cg_emit(o, "    __m128i b[4] = {_mm_setzero_si128(), _mm_setzero_si128(), _mm_setzero_si128(), _mm_setzero_si128()};\n");
  for (int c = 1; c <= nx; c++) {
    cg_emit(o, "    { __m256 v = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(_mm256_loadu_si256((const __m256i *)x%d), c0v)), muv);\n", c);
    cg_emit(o, "      v = _mm256_min_ps(_mm256_max_ps(v, _mm256_set1_ps(%.1ff)), _mm256_set1_ps(%.1ff));\n", (double)(s->lo - s->zy),
            (double)(s->hi - s->zy));
    cg_emit(o, "      b[%d] = _mm256_cvtepi32_epi8(_mm256_add_epi32(_mm256_cvtps_epi32(v), _mm256_set1_epi32(%d))); }\n", c - 1, (int)s->zy);
  }
  cg_emit(o, "    __m128i t01 = _mm_unpacklo_epi8(b[0], b[1]), t23 = _mm_unpacklo_epi8(b[2], b[3]);\n    uint32_t w[8];\n");
  cg_emit(o, "    _mm_storeu_si128((__m128i *)w, _mm_unpacklo_epi16(t01, t23));\n    _mm_storeu_si128((__m128i *)(w + 4), _mm_unpackhi_epi16(t01, t23));\n");
  cg_emit(o, "    for (int i = 0; i < %d && m0 + i < %ldL; i++) memcpy((uint8_t *)y + (m0 + i) * %ldL + n0, w + i, %d);\n  }\n", QG_MR, d->M,
          (long)s->n, nx);
}

/* The nx columns (qg_nx) of emit_tile_vnni's tile from 16 nv: !fin, each
 * one's sums (cx<c>'s lanes, the rows) into x<c>[] through acc as the
 * vectors'; fin (the last depth block), each row's value stored as the
 * scalar variant's. */
static void emit_x1_epilogue(cg_out *o, const cgen_qgemm_spec *s, const qg_dims *d, int nv, int nx, bool fin) {
  for (int c = 1; c <= nx; c++) {
    int col = 16 * nv + c - 1;
    if (!fin) {
      cg_emit(o, "  int32_t x%d[8];\n  _mm256_storeu_si256((__m256i *)x%d, cx%d);\n", c, c, c);
      cg_emit(o, "  if (!first) for (int i = 0; i < %d; i++) x%d[i] += acc[i * %d + %d];\n", QG_MR, c, QG_NR, col);
      cg_emit(o, "  if (!last) for (int i = 0; i < %d; i++) acc[i * %d + %d] = x%d[i];\n", QG_MR, QG_NR, col, c);
      continue;
    }
    if (nv == 0 && s->y_dtype != TINY_FP32 && !s->y_vnni4) {
      emit_xc_store(o, s, d, nx);
      return;
    }
    cg_emit(o, "  for (int i = 0; i < %d && m0 + i < %ldL; i++) {\n", QG_MR, d->M);
    cg_emit(o, "      float v = (float)(int32_t)((uint32_t)x%d[i] + (uint32_t)c0[m0 + i]) * mu[m0 + i];\n", c);
    char cs[32];
    snprintf(cs, sizeof cs, "n0 + %d", col);
    emit_store(o, s, false, false, "m0 + i", cs);
    cg_emit(o, "  }\n");
  }
}

/* The AVX-512 VNNI micro-kernel $P_<name>: MR rows (mr computed) of packed A (ap) times
 * the first nv vectors of 16 of NR columns of packed B (bp: nv < QG_NV for
 * the last block of a narrow N) and nx columns from 16 nv (qg_nx),
 * stored from row m0, column n0. */
static void emit_tile_vnni(cg_out *o, const cgen_qgemm_spec *s, const qg_dims *d, const char *name, int nv, int mr, int nx) {
  /* kn words from ap / bp (block strides MR, NR); acc: the partial sums
   * [MR][NR] of the earlier depth blocks (first: none) and, unless last,
   * where this block's go instead of the epilogue */
  cg_emit(o, "static " QG_ATTR " void $P_%s(const uint8_t *restrict ap, const int32_t *restrict bp, const int32_t *c0,"
             " const float *mu, void *y, long m0, long n0, long kn, int32_t *acc, int first, int last) {\n", name);
  for (int i = 0; i < QG_MR; i++)
    for (int j = 0; j < nv; j++)
      cg_emit(o, "  __m512i c%d_%d;\n", i, j);
  bool ain = !s->weight_a && s->x_dtype == TINY_U8; /* A in place: rows K bytes apart (emit_task) */
  for (int c = 1; c <= nx; c++) cg_emit(o, nv ? "  __m256i cx%d;\n" : "  __m256i cx%d, cy%d;\n", c, c);
  int pfa = qg_ws(s, d) ? QG_PFA : s->weight_a && d->M * d->K >= QG_PFN ? (int)(d->K4 * QG_MR * 4) : 0;
  emit_vnni_loop(o, s, nv, mr, ain ? d->K : 4, ain ? 4 : QG_MR * 4, pfa, nx);
  emit_x1_epilogue(o, s, d, nv, nx, false);
  cg_emit(o, "  if (!first) {\n");
  for (int i = 0; i < QG_MR; i++)
    for (int j = 0; j < nv; j++) cg_emit(o, "    c%d_%d = _mm512_add_epi32(c%d_%d, _mm512_loadu_si512(acc + %d));\n", i, j, i, j, i * QG_NR + 16 * j);
  cg_emit(o, "  }\n");
  cg_emit(o, "  if (!last) {\n");
  for (int i = 0; i < QG_MR; i++)
    for (int j = 0; j < nv; j++) cg_emit(o, "    _mm512_storeu_si512(acc + %d, c%d_%d);\n", i * QG_NR + 16 * j, i, j);
  cg_emit(o, "    return;\n  }\n");
  char mlim[32];
  snprintf(mlim, sizeof mlim, "%ldL", d->M);
  cg_qg_emit_epilogue(o, s, d, nv, mlim);
  emit_x1_epilogue(o, s, d, nv, nx, true);
  cg_emit(o, "}\n");
}

/* cgen_qgemm_int.h: the epilogue of emit_tile_vnni's tile, rows below mlim. */
void cg_qg_emit_epilogue(cg_out *o, const cgen_qgemm_spec *s, const qg_dims *d, int nv, const char *mlim) {
  if (d->cd) /* per vector j: its lanes on the image (vm_j) and where the first goes (dst_j) */
    for (int j = 0; j < nv; j++) {
      cg_emit(o, "  __mmask16 vm%d = 0;\n  long dst%d;\n  { long q = n0 + %d, r = q %% %ldL;\n", j, j, 16 * j, d->Wp);
      cg_emit(o, "    dst%d = q / %ldL * %ldL + (r < %ldL ? r : %ldL);\n", j, d->Wp, d->OW, d->OW, d->OW);
      cg_emit(o, "    for (int l = 0; l < 16; l++, r = r + 1 == %ldL ? 0 : r + 1) if (r < %ldL && q + l < %ldL) vm%d |= (__mmask16)(1u << l); }\n",
              d->Wp, d->OW, d->NT, j);
    }
  bool b64 = !d->cd && nv == QG_NV && s->y_dtype != TINY_FP32 && !s->y_vnni4;
  for (int i = 0; i < QG_MR; i++) {
    cg_emit(o, "  if (m0 + %d < %s) {\n", i, mlim);
    if (b64) { /* a row of 64 bytes in one store where all its columns are there */
      cg_emit(o, "   if (n0 + %d <= %ldL) {\n", QG_NR, d->N);
      emit_row64(o, s, i);
      cg_emit(o, "   } else {\n");
    }
    for (int j = 0; j < nv; j++) {
      cg_emit(o, "    if (n0 + %d < %ldL) {\n", 16 * j, d->NT);
      if (d->cd)
        cg_emit(o, "      __mmask16 mk = vm%d;\n      long dj = dst%d;\n", j, j);
      else
        cg_emit(o, "      long nl = %ldL - n0 - %d;\n      __mmask16 mk = nl >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << nl) - 1u);\n",
                d->N, 16 * j);
      emit_value(o, s, "v", i, j);
      char row[32], col[32];
      snprintf(row, sizeof row, "m0 + %d", i);
      snprintf(col, sizeof col, d->cd ? "dj" : "n0 + %d", 16 * j);
      emit_store(o, s, true, d->cd, row, col);
      cg_emit(o, "    }\n");
    }
    cg_emit(o, b64 ? "   }\n  }\n" : "  }\n");
  }
}

/* The scalar $P_tile: the same contract as emit_tile_vnni's. */
static void emit_tile_scalar(cg_out *o, const cgen_qgemm_spec *s, const qg_dims *d) {
  cg_emit(o, "static void $P_tile(const uint8_t *restrict ap, const int32_t *restrict bp, const int32_t *c0, const float *mu, void *y,"
             " long m0, long n0) {\n");
  cg_emit(o, "  for (int i = 0; i < %d && m0 + i < %ldL; i++)\n    for (int j = 0; j < %d && n0 + j < %ldL; j++) {\n", QG_MR, d->M,
          QG_NR, d->NT);
  cg_emit(o, "      long col = n0 + j;\n");
  if (d->cd) /* the padded-width grid: columns past OW are not on the image */
    cg_emit(o, "      if (col %% %ldL >= %ldL) continue;\n      col = col / %ldL * %ldL + col %% %ldL;\n", d->Wp, d->OW, d->Wp, d->OW, d->Wp);
  cg_emit(o, "      long acc = 0;\n      for (long k = 0; k < %ldL; k++) {\n", d->K4);
  cg_emit(o, "        const uint8_t *a = ap + (k * %d + i) * 4, *b = (const uint8_t *)(bp + k * %d + j);\n", QG_MR, QG_NR);
  if (s->weight_a)
    cg_emit(o, "        for (int t = 0; t < 4; t++) acc += (long)(int8_t)a[t] * (long)b[t];\n");
  else
    cg_emit(o, "        for (int t = 0; t < 4; t++) acc += (long)a[t] * (long)(int8_t)b[t];\n");
  cg_emit(o, "      }\n");
  const char *ch = s->weight_a ? "m0 + i" : "n0 + j";
  cg_emit(o, "      int32_t sum = (int32_t)(uint32_t)((unsigned long)acc + (unsigned long)(long)c0[%s]);\n", ch);
  cg_emit(o, "      float v = (float)sum * mu[%s];\n", ch);
  emit_store(o, s, false, false, "m0 + i", "col");
  cg_emit(o, "    }\n}\n");
}

/* Scratch of one call of a variant (bytes): shared (the conv's image or
 * im2col, the packed activation A, the copy of A's last block) and per
 * thread (the partial sums of the depth blocks, the packed B block). */
typedef struct qg_scr {
  long col, xp, at, bs, acc, bb;
  long kc;  /* the depth block in words (K4: one block) */
  bool ain; /* A (the activation, u8) read in place, rows K bytes apart */
  bool ws;  /* weight-stationary (qg_ws): B packed whole into shared scratch (bs bytes) */
  bool own; /* ws with at most QG_WS_OWN blocks: B packed whole per thread instead (bs bytes each) */
} qg_scr;

long cg_qg_col_bytes(const cgen_qgemm_spec *s, const qg_dims *d) {
  return d->cd   ? ((long)s->conv.c * d->Hp * d->Wp + d->Wp + 64 + 63) / 64 * 64
         : d->pg ? ((long)s->conv.c * d->Hp * d->Wp + QG_PG_SLACK + 63) / 64 * 64
         : d->ps ? ((long)s->conv.c * (long)(s->conv.sh * s->conv.sw) * d->Hs * d->Ws + 63) / 64 * 64
         : s->conv.kh > 0 && !d->ci ? (d->K * d->N + 63) / 64 * 64 : 0;
}

static qg_scr scr_of(const cgen_qgemm_spec *s, const qg_dims *d, int isa) {
  qg_scr r;
  bool vec = isa != CGEN_ISA_SCALAR; /* the VNNI or the AVX2 tile (the same contract) */
  r.ws = isa == CGEN_ISA_AVX512 && qg_ws(s, d);
  r.own = r.ws && d->NB <= QG_WS_OWN;
  r.bs = r.ws ? d->NB * d->K4 * QG_NR * 4 : 0;
  r.col = cg_qg_col_bytes(s, d);
  r.ain = vec && !s->weight_a && s->x_dtype == TINY_U8;
  r.xp = s->weight_a || r.ain ? 0 : d->MB * d->K4 * QG_MR * 4;
  r.at = r.ain ? (QG_MR * d->K + 4 + 63) / 64 * 64 : 0;
  r.kc = vec && !r.ws && d->K4 > QG_KC4 * 5 / 4 ? QG_KC4 : d->K4;
  r.acc = r.kc < d->K4 ? d->MB * QG_MR * QG_NR * 4 : 0;
  r.bb = s->weight_a && !r.ws ? d->K4 * QG_NR * 4 : 0;
  return r;
}

/* The conv's $P_ctask: the padded image (stride 1), the phase planes
 * (d->ps; $P_phs in the AVX-512 variant at sw = 2) or the im2col rows, a
 * task per chunk of channels / rows. */
static void emit_ctask(cg_out *o, const cgen_qgemm_spec *s, const qg_dims *d, long nrow) {
  const char *f = d->cd || d->pg ? "$F_pad"
                  : d->ps        ? (o->isa->id == CGEN_ISA_AVX512 && s->conv.sw == 2 ? "$P_phs" : "$F_phs")
                                 : "$F_col";
  cg_emit(o, "static void $P_ctask(void *vc, int task, int tid) {\n  const $F_ctx *cx = (const $F_ctx *)vc;\n  (void)tid;\n");
  cg_emit(o, "  for (long r = %ldL * task / cx->nct; r < %ldL * (task + 1) / cx->nct; r++) ", nrow, nrow);
  cg_emit(o, "%s", f);
  cg_emit(o, "((const uint8_t *)cx->x, cx->col, r);\n}\n");
}

/* $P_task(task): B block jb = task % NB times A blocks [mb0, mb1) of chunk
 * task / NB, depth blocks outer (B's slice stays in L1 across the A
 * blocks).  Chunk-major: where there are several chunks (few B blocks), a
 * thread's range of tasks (hprt_pool_run) is whole rows of y, the channels
 * the depthwise conv after it reads on the same thread; the old B-major
 * order split the columns, and rows of 196 or 49 bytes put one line of
 * each row on both cores (MobileNetV2's 14x14 1x1 convs 0.013 -> 0.008 ms
 * in whole runs, 2 threads, vCPUs on two CCDs).  The weight as A: the task first packs its B block (the
 * activation) into the thread's scratch.  A read in place: block mb at row
 * 6 mb of x, the last from its copy cx->at. */
static void emit_task(cg_out *o, const cgen_qgemm_spec *s, const qg_dims *d, const qg_scr *r) {
  bool vec = o->isa->id != CGEN_ISA_SCALAR; /* VNNI or AVX2: the same tile contract */
  long words = d->wwords;
  cg_emit(o, "static %s void $P_task(void *vc, int task, int tid) {\n  $F_ctx *cx = ($F_ctx *)vc;\n", qg_attr(o));
  cg_emit(o, "  long ic = task / %ldL, jb = task %% %ldL;\n", d->NB, d->NB);
  cg_emit(o, "  long mb0 = %ldL * ic / cx->mc, mb1 = %ldL * (ic + 1) / cx->mc;\n", d->MB, d->MB);
  cg_emit(o, "  const int32_t *c0 = cx->wp + %ldL;\n  const float *mu = (const float *)(c0 + %ldL);\n", words, d->chpad);
  cg_emit(o, "  int32_t *acc = (int32_t *)cx->sc.thr[tid];\n  (void)acc;\n");
  if (s->weight_a) {
    cg_emit(o, "  int32_t *B = (int32_t *)(cx->sc.thr[tid] + %ldL);\n", r->acc);
    /* a thread packs a B block once per run of its tasks in that block */
    cg_emit(o, "  if (cx->pjb[tid] != jb) $P_pkb(cx, jb, B), cx->pjb[tid] = jb;\n");
  } else
    cg_emit(o, "  const int32_t *B = cx->wp + jb * %ldL;\n", d->K4 * QG_NR);
  /* A block mb's bytes at depth word k0 */
  char abase[160];
  if (s->weight_a) snprintf(abase, sizeof abase, "(const uint8_t *)(cx->wp + mb * %ldL) + k0 * %d", d->K4 * QG_MR, QG_MR * 4);
  else if (r->ain)
    snprintf(abase, sizeof abase, "(mb < %ldL ? (const uint8_t *)cx->x + mb * %ldL : cx->at) + k0 * 4", d->MB - 1, QG_MR * d->K);
  else snprintf(abase, sizeof abase, "(const uint8_t *)(cx->xp + mb * %ldL) + k0 * %d", d->K4 * QG_MR, QG_MR * 4);
  char m0[32], m1[64]; /* the task's rows */
  snprintf(m0, sizeof m0, "mb0 * %dL", QG_MR);
  snprintf(m1, sizeof m1, "mb1 * %dL < %ldL ? mb1 * %dL : %ldL", QG_MR, d->M, QG_MR, d->M);
  if (!vec) {
    cg_emit(o, "  long k0 = 0;\n  for (long mb = mb0; mb < mb1; mb++)\n");
    cg_emit(o, "    $P_tile(%s, B, c0, mu, cx->y, mb * %d, jb * %d);\n", abase, QG_MR, QG_NR);
    cg_qg_emit_post(o, s, d, m0, m1, false);
    cg_emit(o, "}\n");
    return;
  }
  cg_emit(o, "  for (long k0 = 0; k0 < %ldL; k0 += %ldL) {\n    long kn = %ldL - k0 < %ldL ? %ldL - k0 : %ldL;\n", d->K4, r->kc, d->K4,
          r->kc, d->K4, r->kc);
  cg_emit(o, "    for (long mb = mb0; mb < mb1; mb++)\n");
  bool tn = (o->isa->id == CGEN_ISA_AVX512 ? qg_tnv(s, d) : cg_qg_tail_nv(d)) < QG_NV;
  if (o->isa->id == CGEN_ISA_AVX512 && d->M % QG_MR) /* the last A block's rows alone (tilem, tilemt) */
    cg_emit(o, "      (mb == %ldL ? (jb == %ldL ? $P_%s : $P_tilem) : ", d->MB - 1, d->NB - 1, tn ? "tilemt" : "tilem");
  else cg_emit(o, "      (");
  cg_emit(o, "jb == %ldL ? $P_%s : $P_tile)(%s, B + k0 * %d, c0, mu, cx->y, mb * %d, jb * %d, kn, acc + (mb - mb0) * %d, k0 == 0,"
             " k0 + kn == %ldL);\n  }\n",
          d->NB - 1, tn ? "tilet" : "tile", abase, QG_NR, QG_MR, QG_NR, QG_MR * QG_NR, d->K4);
  cg_qg_emit_post(o, s, d, m0, m1, false);
  cg_emit(o, "}\n");
}

/* The weight-stationary tasks (r->ws): $P_btask(jb) packs B block jb into
 * the shared cx->bs, or (own) a thread's first task packs every B block
 * into its own scratch; $P_task(task) then runs A blocks [mb0, mb1) of
 * chunk task, each times every B block over the whole depth (B from L2,
 * A's rows in L1 across the B blocks, the weight read once, in order), the
 * post hook on each A block's rows once they are final. */
static void emit_task_ws(cg_out *o, const cgen_qgemm_spec *s, const qg_dims *d, bool own) {
  if (!own) {
    cg_emit(o, "static %s void $P_btask(void *vc, int task, int tid) {\n  $F_ctx *cx = ($F_ctx *)vc;\n  (void)tid;\n", qg_attr(o));
    cg_emit(o, "  $P_pkb(cx, task, cx->bs + (long)task * %ldL);\n}\n", d->K4 * QG_NR);
  }
  cg_emit(o, "static %s void $P_task(void *vc, int task, int tid) {\n  $F_ctx *cx = ($F_ctx *)vc;\n", qg_attr(o));
  if (own) { /* pjb[tid] 0: this thread's B is packed */
    cg_emit(o, "  int32_t *bs = (int32_t *)cx->sc.thr[tid];\n  if (cx->pjb[tid] != 0) {\n");
    cg_emit(o, "    for (long jb = 0; jb < %ldL; jb++) $P_pkb(cx, jb, bs + jb * %ldL);\n    cx->pjb[tid] = 0;\n  }\n", d->NB, d->K4 * QG_NR);
  } else cg_emit(o, "  const int32_t *bs = cx->bs;\n  (void)tid;\n");
  cg_emit(o, "  long mb0 = %ldL * task / cx->mc, mb1 = %ldL * (task + 1) / cx->mc;\n", d->MB, d->MB);
  cg_emit(o, "  const int32_t *c0 = cx->wp + %ldL;\n  const float *mu = (const float *)(c0 + %ldL);\n", d->wwords, d->chpad);
  cg_emit(o, "  for (long mb = mb0; mb < mb1; mb++) {\n    const uint8_t *a = (const uint8_t *)(cx->wp + mb * %ldL);\n", d->K4 * QG_MR);
  bool tn = qg_tnv(s, d) < QG_NV;
  cg_emit(o, "    for (long jb = 0; jb < %ldL; jb++)\n", d->NB);
  if (d->M % QG_MR) /* the last A block's rows alone (tilem, tilemt) */
    cg_emit(o, "      (mb == %ldL ? (jb == %ldL ? $P_%s : $P_tilem) : ", d->MB - 1, d->NB - 1, tn ? "tilemt" : "tilem");
  else cg_emit(o, "      (");
  cg_emit(o, "jb == %ldL ? $P_%s : $P_tile)(a, bs + jb * %ldL, c0, mu, cx->y, mb * %d, jb * %d, %ldL, NULL, 1, 1);\n",
          d->NB - 1, tn ? "tilet" : "tile", d->K4 * QG_NR, QG_MR, QG_NR, d->K4);
  char m0[32], m1[64]; /* block mb's rows */
  snprintf(m0, sizeof m0, "mb * %dL", QG_MR);
  snprintf(m1, sizeof m1, "mb * %dL + %d < %ldL ? mb * %dL + %d : %ldL", QG_MR, QG_MR, d->M, QG_MR, QG_MR, d->M);
  cg_qg_emit_post(o, s, d, m0, m1, true);
  cg_emit(o, "  }\n}\n");
}

/* The variant's tasks and $P_run: the conv's image (padded or im2col), A
 * packed when it is the activation and not read in place (a task per
 * block), then the tiles over (chunks of A blocks) x (B blocks). */
static void emit_run(cg_out *o, const cgen_qgemm_spec *s, const qg_dims *d) {
  qg_scr r = scr_of(s, d, o->isa->id);
  unsigned x = s->x_dtype == TINY_I8 ? 0x80u : 0u;
  bool conv = s->conv.kh > 0 && !d->ci; /* an image built per call */
  long nrow = d->cd || d->pg || d->ps ? (long)s->conv.c : d->K; /* rows of the im2col, or channels of the image */
  if (r.xp)
    cg_emit(o, "static void $P_xtask(void *vc, int task, int tid) {\n  const $F_ctx *cx = (const $F_ctx *)vc;\n  (void)tid;\n"
               "  $F_pk((const uint8_t *)cx->x, %ldL, 1L, %ldL, %d, %uu, task, cx->xp + task * %ldL);\n}\n",
            d->K, d->M, QG_MR, x, d->K4 * QG_MR);
  if (conv) emit_ctask(o, s, d, nrow);
  if (r.ws) emit_task_ws(o, s, d, r.own);
  else emit_task(o, s, d, &r);
  cg_emit(o, "static int $P_run(hprt_pool *pool, const void *wp, const void *x, void *y%s) {\n  $F_ctx cx;\n", cg_qg_post_params(s));
  cg_emit(o, "  cx.wp = (const int32_t *)wp; cx.x = x; cx.y = y;\n  for (int t = 0; t < HPRT_MAXT; t++) cx.pjb[t] = -1;\n");
  if (s->post) cg_emit(o, "  cx.post = post, cx.pctx = pctx;\n");
  long bsh = r.own ? 0 : r.bs; /* B's bytes shared, else each thread's */
  cg_emit(o, "  if (hprt_scratch_get(pool, %ldUL, %ldUL, &cx.sc)) return -1;\n", r.col + r.xp + r.at + bsh, r.acc + r.bb + r.bs - bsh);
  cg_emit(o, "  cx.col = (uint8_t *)cx.sc.shared;\n  cx.xp = (int32_t *)(cx.sc.shared + %ldL);\n", r.col);
  cg_emit(o, "  cx.at = (uint8_t *)cx.sc.shared + %ldL;\n", r.col + r.xp);
  cg_emit(o, "  cx.bs = (int32_t *)(cx.sc.shared + %ldL);\n", r.col + r.xp + r.at);
  /* below ~2M multiply-adds a pool wake-up costs more than it saves */
  bool small = (double)d->M * (double)d->N * (double)d->K < 2e6;
  cg_emit(o, "  hprt_pool *p = %s;\n  int P = hprt_pool_size(p);\n", small ? "NULL" : "pool");
  if (conv) {
    cg_emit(o, "  cx.nct = 4 * P < %ldL ? 4 * P : %ldL;\n", nrow, nrow);
    if (d->cd) /* the slack past the image: defined bytes in the columns not stored */
      cg_emit(o, "  memset(cx.col + %ldL, 0, %ldUL);\n", (long)s->conv.c * d->Hp * d->Wp, r.col - (long)s->conv.c * d->Hp * d->Wp);
    cg_emit(o, "  hprt_pool_run(P > 1 ? p : NULL, (int)cx.nct, $P_ctask, &cx);\n");
  }
  if (r.xp) cg_emit(o, "  hprt_pool_run(P > 1 ? p : NULL, %d, $P_xtask, &cx);\n", (int)d->MB);
  if (r.ain) /* A's last block: its rows (the bytes past them defined), read as the others */
    cg_emit(o, "  memset(cx.at, 0, %ldUL);\n  memcpy(cx.at, (const uint8_t *)x + %ldL, %ldUL);\n", r.at, (d->MB - 1) * QG_MR * d->K,
            (d->M - (d->MB - 1) * QG_MR) * d->K);
  if (r.ws) { /* B whole (own: in each thread's first task), then runs of A blocks */
    if (!r.own) cg_emit(o, "  hprt_pool_run(P > 1 ? p : NULL, %d, $P_btask, &cx);\n", (int)d->NB);
    cg_emit(o, "  cx.mc = 4L * P < %ldL ? 4L * P : %ldL;\n", d->MB, d->MB);
    cg_emit(o, "  hprt_pool_run(P > 1 ? p : NULL, (int)cx.mc, $P_task, &cx);\n");
    cg_emit(o, "  hprt_scratch_put(&cx.sc);\n  return 0;\n}\n");
    return;
  }
  cg_emit(o, "  long mc = (4L * P + %ldL - 1) / %ldL;\n  cx.mc = mc < 1 ? 1 : mc > %ldL ? %ldL : mc;\n", d->NB, d->NB, d->MB, d->MB);
  cg_emit(o, "  hprt_pool_run(P > 1 ? p : NULL, (int)(cx.mc * %ldL), $P_task, &cx);\n", d->NB);
  cg_emit(o, "  hprt_scratch_put(&cx.sc);\n  return 0;\n}\n");
}

/* Checks the convolution of spec s against its GEMM sizes. */
static harp_status check_conv(harp_error *e, const cgen_qgemm_spec *s) {
  const int64_t *g = &s->conv.c; /* c h w kh kw sh sw ph pw dh dw */
  for (int i = 0; i < 11; i++)
    if (g[i] < (i == 7 || i == 8 ? 0 : 1) || g[i] > (1L << 24))
      return ut_fail(e, HARP_E_INVALID_ARG, NULL, "cgen_qgemm: conv geometry out of range");
  int64_t oh = (s->conv.h + 2 * s->conv.ph - s->conv.dh * (s->conv.kh - 1) - 1) / s->conv.sh + 1;
  int64_t ow = (s->conv.w + 2 * s->conv.pw - s->conv.dw * (s->conv.kw - 1) - 1) / s->conv.sw + 1;
  if (!s->weight_a || s->w_kmajor || oh < 1 || ow < 1 || s->k != s->conv.c * s->conv.kh * s->conv.kw || s->n != oh * ow)
    return ut_fail(e, HARP_E_INVALID_ARG, NULL, "cgen_qgemm: conv needs the weight as A, channel-major, K = c kh kw, N = oh ow");
  return HARP_OK;
}

/* Whether s is a GEMM or a 1x1 stride-1 unpadded conv (B is x itself). */
bool cgen_qgemm_c11(const cgen_qgemm_spec *s) {
  return s->conv.kh == 0 || (s->conv.kh == 1 && s->conv.kw == 1 && s->conv.sh == 1 && s->conv.sw == 1 && !s->conv.ph && !s->conv.pw);
}

/* Whether s may take a post hook: y row-major, no stride-1 conv but 1x1 (their grids have other columns). */
bool cgen_qgemm_post_ok(const cgen_qgemm_spec *s) {
  return !s->y_vnni4 && !(s->conv.kh > 0 && s->conv.sh == 1 && s->conv.sw == 1 && !cgen_qgemm_c11(s));
}

/* Checks spec s: sizes, dtypes, ranges. */
static harp_status check_spec(harp_error *e, const cgen_qgemm_spec *s) {
  if (s->m < 1 || s->n < 1 || s->k < 1) return ut_fail(e, HARP_E_INVALID_ARG, NULL, "cgen_qgemm: sizes must be >= 1");
  /* acc magnitude <= K * 255 * 128 stays below 2^31; the blocks' sizes fit long and int */
  if (s->k > 65536 || s->m > (1L << 30) || s->n > (1L << 30) || s->m * s->k > (1L << 40) || s->n * s->k > (1L << 40))
    return ut_fail(e, HARP_E_LIMIT, NULL, "cgen_qgemm: sizes beyond what the kernel handles (K <= 65536)");
  if (s->x_dtype != TINY_U8 && s->x_dtype != TINY_I8)
    return ut_fail(e, HARP_E_UNSUPPORTED, NULL, "cgen_qgemm: the activation must be uint8 or int8");
  if (s->y_dtype != TINY_U8 && s->y_dtype != TINY_I8 && s->y_dtype != TINY_FP32)
    return ut_fail(e, HARP_E_UNSUPPORTED, NULL, "cgen_qgemm: the output must be uint8, int8 or fp32");
  int xlo = s->x_dtype == TINY_I8 ? -128 : 0, ylo = s->y_dtype == TINY_I8 ? -128 : 0;
  if (s->za < xlo || s->za > xlo + 255) return ut_fail(e, HARP_E_INVALID_ARG, NULL, "cgen_qgemm: zero point %d out of range", (int)s->za);
  if (s->y_dtype != TINY_FP32 && !(ylo <= s->lo && s->lo <= s->zy && s->zy <= s->hi && s->hi <= ylo + 255))
    return ut_fail(e, HARP_E_INVALID_ARG, NULL, "cgen_qgemm: output zero point %d / clamp [%d, %d] out of range", (int)s->zy,
                   (int)s->lo, (int)s->hi);
  if (s->conv.kh > 0 && check_conv(e, s)) return e->code;
  bool c11 = cgen_qgemm_c11(s);
  if (s->x_vnni4 && !(s->weight_a && s->x_dtype == TINY_U8 && s->k % 4 == 0 && c11))
    return ut_fail(e, HARP_E_INVALID_ARG, NULL, "cgen_qgemm: a VNNI-4 x needs the weight as A, u8, K %% 4 == 0, no conv but 1x1 stride 1");
  if (s->y_vnni4 && !(s->weight_a && s->y_dtype != TINY_FP32 && s->m % 4 == 0))
    return ut_fail(e, HARP_E_INVALID_ARG, NULL, "cgen_qgemm: a VNNI-4 y needs the weight as A, bytes out, M %% 4 == 0");
  if (s->post && !cgen_qgemm_post_ok(s))
    return ut_fail(e, HARP_E_INVALID_ARG, NULL, "cgen_qgemm: a post hook needs y row-major, no stride-1 conv but 1x1");
  if (s->amx < 0 || s->amx > 2) return ut_fail(e, HARP_E_INVALID_ARG, NULL, "cgen_qgemm: amx must be 0, 1 or 2");
  if (s->ws < -1 || s->ws > 1) return ut_fail(e, HARP_E_INVALID_ARG, NULL, "cgen_qgemm: ws must be -1, 0 or 1");
  if (s->force_isa != -1 && s->force_isa != CGEN_ISA_SCALAR && s->force_isa != CGEN_ISA_AVX2 && s->force_isa != CGEN_ISA_AVX512)
    return ut_fail(e, HARP_E_INVALID_ARG, NULL, "cgen_qgemm: force_isa must be -1, scalar, avx2 or avx512");
  return HARP_OK;
}

/* $F_sel: the variant that runs, once: 4 AMX, 3 AVX-512 VNNI, 2 AVX2 (when
 * the variant is there: `av2`, a preprocessor condition), 1 scalar; by
 * CPUID, or s->force_isa (AVX2 only where the CPU has it). */
static void emit_sel(cg_out *o, const cgen_qgemm_spec *s, const qg_dims *d, const char *av2) {
  cg_emit(o, "static int $F_sel(void) {\n  static int sel;\n  int s = __atomic_load_n(&sel, __ATOMIC_RELAXED);\n  if (!s) {\n    s = 1;\n");
  if (s->force_isa == CGEN_ISA_AVX512) cg_emit(o, "    s = 3;\n");
  else if (s->force_isa < 0)
    cg_emit(o, "#ifdef HPRT_X86\n    __builtin_cpu_init();\n    if (__builtin_cpu_supports(\"avx512f\") && __builtin_cpu_supports(\"avx512bw\") &&\n"
                "        __builtin_cpu_supports(\"avx512vl\") && __builtin_cpu_supports(\"avx512dq\") &&\n"
                "        __builtin_cpu_supports(\"avx512vnni\")) s = 3;\n#endif\n");
  if (s->force_isa < 0 || s->force_isa == CGEN_ISA_AVX2)
    cg_emit(o, "#if %s\n    __builtin_cpu_init();\n    if (s == 1 && __builtin_cpu_supports(\"avx2\") && __builtin_cpu_supports(\"fma\")) s = 2;\n#endif\n",
            av2);
  if (d->amx && s->force_isa < 0) cg_emit(o, "#ifdef HPRT_AMX\n    if (s == 3 && hprt_amx8_ok()) s = 4;\n#endif\n");
  cg_emit(o, "    __atomic_store_n(&sel, s, __ATOMIC_RELAXED);\n  }\n  return s;\n}\n");
}

/* A 1x1 conv of stride 1 without padding is the GEMM of its image: x is
 * B's [K][N] rows as they are (no padded copy, no padded-width grid, whose
 * epilogue compresses lanes); the conv's fields cleared in *g. */
static const cgen_qgemm_spec *conv1x1_as_gemm(const cgen_qgemm_spec *s, cgen_qgemm_spec *g) {
  if (s->conv.kh == 0 || !cgen_qgemm_c11(s)) return s;
  *g = *s;
  memset(&g->conv, 0, sizeof g->conv);
  return g;
}

harp_status cgen_qgemm(harp_error *e, const cgen_qgemm_spec *s0, const char *fn, ut_str *out) {
  if (!s0 || !out) return ut_fail(e, HARP_E_INVALID_ARG, NULL, "cgen_qgemm: NULL argument");
  if (cg_check_name(e, fn) || check_spec(e, s0)) return e->code;
  cgen_qgemm_spec sg;
  const cgen_qgemm_spec *s = conv1x1_as_gemm(s0, &sg);
  qg_dims d = cg_qg_dims(s);
  cg_out o = {.s = out, .F = fn};
  cg_set_isa(&o, NULL);
  cg_emit_runtime(out);
  if (d.amx) cg_emit_amx_runtime(&o); /* hprt_amx_ok for $F_sel */
  cg_emit(&o, "/* ---- %s: int8 GEMM %ld x %ld x %ld, %s x s8 (weight %s) -> %s%s%s ---- */\n", fn, d.M, d.N, d.K,
          tiny_dtype_name(s->x_dtype), s->weight_a ? "A" : "B", tiny_dtype_name(s->y_dtype), s->x_vnni4 ? ", x VNNI-4" : "",
          s->y_vnni4 ? ", y VNNI-4" : "");
  cg_emit(&o, "#include <math.h>\n#include <string.h>\n");
  cg_emit(&o, "typedef struct { const int32_t *wp; const void *x; void *y; int32_t *xp; uint8_t *col, *at; int32_t *bs; long mc, nct, pjb[HPRT_MAXT]; hprt_scratch sc;%s } $F_ctx;\n",
          s->post ? " void (*post)(void *, long, long, long, long); void *pctx;" : "");
  emit_pack(&o, d.K, d.K4);
  if (d.cd || d.pg) cg_qg_emit_pad(&o, s, &d);
  else if (d.ps) cg_qg_emit_phase(&o, s, &d, false);
  else if (s->conv.kh > 0 && !d.ci) emit_im2col(&o, s, d.N);
  emit_wpack(&o, s, &d);
  emit_requant(&o, &d);
  cg_set_isa(&o, cg_isa_get(CGEN_ISA_SCALAR));
  emit_tile_scalar(&o, s, &d);
  if (s->weight_a) cg_qg_emit_bpack(&o, s, &d, false);
  emit_run(&o, s, &d);
  cg_set_isa(&o, cg_isa_get(CGEN_ISA_AVX512));
  cg_emit(&o, "#ifdef HPRT_X86\n");
  int tnv = qg_tnv(s, &d);
  int nx = qg_nx(s, &d);
  emit_tile_vnni(&o, s, &d, "tile", QG_NV, QG_MR, 0);
  if (tnv < QG_NV) emit_tile_vnni(&o, s, &d, "tilet", tnv, QG_MR, nx);
  if (d.M % QG_MR) emit_tile_vnni(&o, s, &d, "tilem", QG_NV, (int)(d.M % QG_MR), 0);
  if (d.M % QG_MR && tnv < QG_NV) emit_tile_vnni(&o, s, &d, "tilemt", tnv, (int)(d.M % QG_MR), nx);
  if (d.ps && s->conv.sw == 2) cg_qg_emit_phase(&o, s, &d, true);
  if (s->weight_a) cg_qg_emit_bpack(&o, s, &d, true);
  emit_run(&o, s, &d);
  if (d.amx) cg_qamx_emit(&o, s, &d); /* the AMX variant, under HPRT_AMX */
  cg_emit(&o, "#endif\n");
  /* the AVX2 variant (cgen_qgemm_avx2.c's tile): left out of an object built
   * for VNNI, where it never runs, unless forced */
  const char *av2 = s->force_isa == CGEN_ISA_AVX2 ? "defined(HPRT_X86)" : "defined(HPRT_X86) && !defined(__AVX512VNNI__)";
  cg_set_isa(&o, cg_isa_get(CGEN_ISA_AVX2));
  cg_emit(&o, "#if %s\n", av2);
  cg_qg2_emit_tile(&o, s, &d, "tile", QG_NV);
  if (cg_qg_tail_nv(&d) < QG_NV) cg_qg2_emit_tile(&o, s, &d, "tilet", cg_qg_tail_nv(&d));
  if (s->weight_a) cg_qg_emit_bpack(&o, s, &d, false);
  emit_run(&o, s, &d);
  cg_emit(&o, "#endif\n");
  cg_set_isa(&o, NULL);
  emit_sel(&o, s, &d, av2);
  if (d.amx) cg_emit(&o, "int $F_amx_on(void) { return $F_sel() == 4; }\n");
  const char *pa = s->post ? ", post, pctx" : ""; /* the post hook passed on */
  cg_emit(&o, "int $F(hprt_pool *pool, const void *wp, const void *x, void *y%s) {\n", cg_qg_post_params(s));
  if (d.amx) cg_emit(&o, "#ifdef HPRT_AMX\n  if ($F_sel() == 4) return $F_amx_run(pool, wp, x, y%s);\n#endif\n", pa);
  cg_emit(&o, "#ifdef HPRT_X86\n  if ($F_sel() == 3) return $F_avx512_run(pool, wp, x, y%s);\n#endif\n", pa);
  cg_emit(&o, "#if %s\n  if ($F_sel() == 2) return $F_avx2_run(pool, wp, x, y%s);\n#endif\n", av2, pa);
  cg_emit(&o, "  return $F_scalar_run(pool, wp, x, y%s);\n}\n", pa);
  if (out->oom) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "cgen: out of memory");
  return HARP_OK;
}
