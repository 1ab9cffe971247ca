/* cgen_skinny_bf16.c — the skinny GEMM (cgen_skinny.c) under harp_options.precision
 * "bf16" with a weight B: B is rounded to bf16 once, at model_init (prepack_b), and
 * streamed at half the bytes of the fp32 weight every run (a classifier's 5-8 MB);
 * vdpbf16ps multiplies it by A's rows, rounded to bf16 per run, fp32 accumulation.
 * Needs: cgen_gemm_int.h (cg_mm, the row store), cgen_int.h.  Gives:
 * cg_skinny_bf16_ok, cg_emit_skinny_bf16_variant.
 *
 * Layout (32-bit words, a pair of bf16: the low half the even k):
 *   B stored along K (b_sk 1, x W^T): row n of kw = ceil(K / 2) words
 *     {B[n][2p], B[n][2p + 1]}: dot products along K, 32 k a vdpbf16ps;
 *   B stored along N (b_sn 1, x @ W): pair row p of N words {B[2p][n],
 *     B[2p + 1][n]}: y[m][strip] += A's pair p broadcast times the row;
 *   A: row m of kw words, the same pairs; an odd K's last pair holds 0. */
#include <stdio.h>
#include <string.h>

#include "backend/c/cgen_int.h"

#include "backend/c/cgen_gemm_int.h"

#define SKB_ATTR "static " CG_BF16_ATTR
#define SKB_STRIP 1024
#define SKB_PACK_ROWS 64 /* rows of packed B a packer task */

bool cg_skinny_bf16_ok(const cg_mm *p) {
  if (!p->tune.bf16 || !p->prepack_b || p->conv || p->prepack_a || p->m_expr || p->b0_expr || p->rt) return false;
  if (!(cg_isa_set(&p->tune) >> CGEN_ISA_AVX512 & 1u) || p->tune.splitk > 1) return false;
  if (p->M > CGEN_SKINNY_MAX_M || p->c_sn != 1 || (p->b_sn != 1 && p->b_sk != 1)) return false;
  return p->nb[0] * p->nb[1] * p->M * p->K <= (1L << 24);
}

static int64_t kwords(const cg_mm *p) { return (p->K + 1) / 2; }
static bool dots_form(const cg_mm *p) { return p->b_sk == 1; }

/* Columns per task: about 2 x threads tasks over the batches, whole vectors
 * (cgen_skinny.c's strip rule). */
static int64_t strip(const cg_mm *p) {
  int threads = p->tune.threads > 0 ? p->tune.threads : 2;
  int64_t want = p->tune.tasks > 0 ? p->tune.tasks : 2 * threads, nbat = p->nb[0] * p->nb[1];
  int64_t per = nbat >= want ? 1 : (want + nbat - 1) / nbat;
  int64_t tw = cg_rup((p->N + per - 1) / per, 16);
  if (tw < 64) tw = 64;
  return tw > SKB_STRIP ? SKB_STRIP : tw;
}

/* The statement storing the pair word {bf16(lo), bf16(hi)} at `dst`, where
 * lo and hi are scalar loads of dt from `ptr` at lo_idx and hi_idx, hi 0
 * unless `hi_ok` (C text). */
static void emit_pair_store(cg_out *o, const char *ind, tiny_dtype dt, const char *ptr, const char *lo_idx,
                            const char *hi_idx, const char *hi_ok, const char *dst) {
  char lo[240], hi[240];
  cg_scalar_ld(o, lo, sizeof lo, dt, ptr, lo_idx);
  cg_scalar_ld(o, hi, sizeof hi, dt, ptr, hi_idx);
  cg_emit(o, "%s{ float lo = %s, hi = %s ? %s : 0.0f;\n", ind, lo, hi_ok, hi);
  cg_emit(o, "%s  %s = (uint32_t)$F_f2b(lo) | (uint32_t)$F_f2b(hi) << 16; }\n", ind, dst);
}

/* $P_packBall_task, $P_pack_b_bytes_run, $P_pack_b_run: B as bf16 pair
 * words (the file's layout), SKB_PACK_ROWS rows of the packed B a task. */
static void emit_pack(cg_out *o, const cg_mm *p) {
  bool dots = dots_form(p);
  int64_t kw = kwords(p), rows = dots ? p->N : kw, cols = dots ? kw : p->N;
  int64_t ntask = (rows + SKB_PACK_ROWS - 1) / SKB_PACK_ROWS;
  char il[96], ih[96], ok[48];
  if (dots) {
    snprintf(il, sizeof il, "r * %ldL + 2 * c", (long)p->b_sn);
    snprintf(ih, sizeof ih, "r * %ldL + 2 * c + 1", (long)p->b_sn);
    snprintf(ok, sizeof ok, "2 * c + 1 < %ldL", (long)p->K);
  } else {
    snprintf(il, sizeof il, "2 * r * %ldL + c", (long)p->b_sk);
    snprintf(ih, sizeof ih, "(2 * r + 1) * %ldL + c", (long)p->b_sk);
    snprintf(ok, sizeof ok, "2 * r + 1 < %ldL", (long)p->K);
  }
  cg_emit(o, SKB_ATTR " void $P_packBall_task(void *vc, int task, int tid) {\n  (void)tid;\n");
  cg_emit(o, "  const $F_ctx *cx = (const $F_ctx *)vc;\n  uint32_t *d = (uint32_t *)cx->Ap;\n");
  cg_emit(o, "  long r0 = task * %dL, r1 = r0 + %dL < %ldL ? r0 + %dL : %ldL;\n", SKB_PACK_ROWS, SKB_PACK_ROWS, (long)rows,
          SKB_PACK_ROWS, (long)rows);
  cg_emit(o, "  for (long r = r0; r < r1; r++)\n    for (long c = 0; c < %ldL; c++)\n", (long)cols);
  char dst[48];
  snprintf(dst, sizeof dst, "d[r * %ldL + c]", (long)cols);
  emit_pair_store(o, "      ", p->bdt, "cx->B", il, ih, ok, dst);
  cg_emit(o, "}\n");
  cg_emit(o, SKB_ATTR " long $P_pack_b_bytes_run(void) { return %ldL; }\n", (long)(rows * cols * 4));
  cg_emit(o, SKB_ATTR " int $P_pack_b_run(hprt_pool *pool, const void *B, void *Bp) {\n");
  cg_emit(o, "  $F_ctx cx;\n  memset(&cx, 0, sizeof cx);\n  cx.B = B; cx.Ap = (float *)Bp;\n");
  cg_emit(o, "  hprt_pool_run(pool, %ld, $P_packBall_task, &cx);\n  return 0;\n}\n", (long)ntask);
}

/* The task's dot products (B stored along K): y[m][n - n0] for the strip's
 * columns, four rows of the packed B at a time, then single ones; 16 words
 * (32 k) a step, the last step masked. */
static void emit_dots(cg_out *o, const cg_mm *p) {
  int M = (int)p->M;
  int64_t kw = kwords(p), kf = kw / 16 * 16, kt = kw - kf, tw = strip(p);
  for (int pass = 0; pass < 2; pass++) {
    int nn = pass == 0 ? 4 : 1;
    cg_emit(o, pass == 0 ? "  long n = n0;\n  for (; n + 4 <= n1; n += 4) {\n" : "  for (; n < n1; n++) {\n");
    for (int i = 0; i < nn; i++) {
      cg_emit(o, "    const uint32_t *bq%d = bb + (n + %d) * %ldL;\n", i, i, (long)kw);
      for (int m = 0; m < M; m++) cg_emit(o, "    __m512 c%d_%d = _mm512_setzero_ps();\n", i, m);
    }
    for (int t = 0; t < 2; t++) {
      if ((t == 0 && !kf) || (t == 1 && !kt)) continue;
      if (t == 0) cg_emit(o, "    for (long k = 0; k < %ldL; k += 16) {\n", (long)kf);
      else cg_emit(o, "    { long k = %ldL; const __mmask16 mk = (__mmask16)0x%x;\n", (long)kf, (1u << kt) - 1u);
      const char *ld = t ? "_mm512_maskz_loadu_epi32(mk, " : "_mm512_loadu_si512(";
      for (int m = 0; m < M; m++) cg_emit(o, "      __m512bh x%d = (__m512bh)%sa + %ldL + k);\n", m, ld, (long)(m * kw));
      for (int i = 0; i < nn; i++) {
        cg_emit(o, "      { __m512bh q = (__m512bh)%sbq%d + k);", ld, i);
        for (int m = 0; m < M; m++) cg_emit(o, " c%d_%d = _mm512_dpbf16_ps(c%d_%d, q, x%d);", i, m, i, m, m);
        cg_emit(o, " }\n");
      }
      cg_emit(o, "    }\n");
    }
    for (int i = 0; i < nn; i++)
      for (int m = 0; m < M; m++)
        cg_emit(o, "    y[%ldL + n - n0 + %d] = _mm512_reduce_add_ps(c%d_%d);\n", (long)(m * tw), i, i, m);
    cg_emit(o, "  }\n");
  }
}

/* One step of emit_axpys over vector v of the strip (`mask`: a load mask
 * for the strip's last, partial vector, or NULL): nk pair rows of B times
 * each row's broadcast pairs added into y. */
static void emit_axpy_step(cg_out *o, const cg_mm *p, int nk, const char *mask) {
  int64_t tw = strip(p);
  for (int i = 0; i < nk; i++) {
    if (mask) cg_emit(o, "      __m512bh q%d = (__m512bh)_mm512_maskz_loadu_epi32(%s, b + %dL * %ldL + v);\n", i, mask, i,
                      (long)p->N);
    else cg_emit(o, "      __m512bh q%d = (__m512bh)_mm512_loadu_si512(b + %dL * %ldL + v);\n", i, i, (long)p->N);
  }
  for (int m = 0; m < p->M; m++) {
    cg_emit(o, "      { float *yp = y + %ldL + v; __m512 t = _mm512_loadu_ps(yp);", (long)(m * tw));
    for (int i = 0; i < nk; i++) cg_emit(o, " t = _mm512_dpbf16_ps(t, q%d, a%d_%d);", i, m, i);
    cg_emit(o, " _mm512_storeu_ps(yp, t); }\n");
  }
}

/* The task's sums of B stored along N: y[m][strip] over the pair rows,
 * four at a time, then single ones. */
static void emit_axpys(cg_out *o, const cg_mm *p) {
  int64_t kw = kwords(p), tw = strip(p);
  cg_emit(o, "  memset(y, 0, sizeof(float) * %ldL);\n  long k = 0;\n", (long)(p->M * tw));
  for (int pass = 0; pass < 2; pass++) {
    int nk = pass == 0 ? 4 : 1;
    if ((pass == 0 && kw < 4) || (pass == 1 && kw % 4 == 0)) continue;
    cg_emit(o, pass == 0 ? "  for (; k + 4 <= %ldL; k += 4) {\n" : "  for (; k < %ldL; k++) {\n", (long)kw);
    cg_emit(o, "    const uint32_t *b = bb + k * %ldL + n0;\n", (long)p->N);
    for (int m = 0; m < p->M; m++)
      for (int i = 0; i < nk; i++)
        cg_emit(o, "    __m512bh a%d_%d = (__m512bh)_mm512_set1_epi32((int)a[%ldL + k + %d]);\n", m, i, (long)(m * kw), i);
    cg_emit(o, "    long v = 0;\n    for (; v + 16 <= nc; v += 16) {\n");
    emit_axpy_step(o, p, nk, NULL);
    cg_emit(o, "    }\n    if (v < nc) {\n      const __mmask16 mk = (__mmask16)((1u << (nc - v)) - 1u);\n");
    emit_axpy_step(o, p, nk, "mk");
    cg_emit(o, "    }\n  }\n");
  }
}

/* $P_run: A's rows as bf16 pair words (scratch), then the strips' tasks. */
static void emit_run(cg_out *o, const cg_mm *p, int64_t sn) {
  int64_t kw = kwords(p), nbat = p->nb[0] * p->nb[1], tw = strip(p);
  char il[160], ih[160], ok[48];
  snprintf(il, sizeof il, "b0 * %ldL + b1 * %ldL + m * %ldL + 2 * c * %ldL", (long)p->a_sb[0], (long)p->a_sb[1],
           (long)p->a_sm, (long)p->a_sk);
  snprintf(ih, sizeof ih, "b0 * %ldL + b1 * %ldL + m * %ldL + (2 * c + 1) * %ldL", (long)p->a_sb[0], (long)p->a_sb[1],
           (long)p->a_sm, (long)p->a_sk);
  snprintf(ok, sizeof ok, "2 * c + 1 < %ldL", (long)p->K);
  cg_emit(o, SKB_ATTR " int $P_run(hprt_pool *pool, const void *A, const void *B, void *C, const void *const *ep) {\n");
  cg_emit(o, "  $F_ctx cx;\n  cx.A = A; cx.B = B; cx.C = C; cx.ep = ep;\n");
  cg_emit(o, "  if (hprt_scratch_get(pool, %ldUL, %ldUL, &cx.sc)) return -1;\n", (long)(nbat * p->M * kw * 4),
          (long)(p->M * tw * 4));
  cg_emit(o, "  cx.Ap = (float *)cx.sc.shared;\n  uint32_t *ap = (uint32_t *)cx.Ap;\n");
  cg_emit(o, "  for (long b0 = 0; b0 < %ldL; b0++)\n    for (long b1 = 0; b1 < %ldL; b1++)\n", (long)p->nb[0],
          (long)p->nb[1]);
  cg_emit(o, "      for (long m = 0; m < %ldL; m++)\n        for (long c = 0; c < %ldL; c++, ap++)\n", (long)p->M, (long)kw);
  emit_pair_store(o, "          ", p->adt, "cx.A", il, ih, ok, "*ap");
  cg_emit(o, "  hprt_pool_run(pool, %ld, $P_task, &cx);\n", (long)(nbat * sn));
  cg_emit(o, "  hprt_scratch_put(&cx.sc);\n  return 0;\n}\n");
}

void cg_emit_skinny_bf16_variant(cg_out *o, const cg_mm *p) {
  int64_t tw = strip(p), sn = (p->N + tw - 1) / tw, kw = kwords(p);
  cg_tile rt; /* the GEMM's store, one vector at a time */
  memset(&rt, 0, sizeof rt);
  cg_emit_isa_helpers(o);
  cg_mm_emit_row(o, p, &rt, 1);
  emit_pack(o, p);
  cg_emit(o, SKB_ATTR " void $P_task(void *vc, int task, int tid) {\n  const $F_ctx *cx = (const $F_ctx *)vc;\n");
  cg_emit(o, "  long tn = task %% %ldL, r = task / %ldL, b1 = r %% %ldL, b0 = r / %ldL;\n", (long)sn, (long)sn,
          (long)p->nb[1], (long)p->nb[1]);
  cg_emit(o, "  long n0 = tn * %ldL, n1 = n0 + %ldL < %ldL ? n0 + %ldL : %ldL;\n  int nc = (int)(n1 - n0);\n", (long)tw,
          (long)tw, (long)p->N, (long)tw, (long)p->N);
  cg_emit(o, "  float *y = (float *)cx->sc.thr[tid];\n");
  cg_emit(o, "  const uint32_t *a = (const uint32_t *)cx->Ap + (b0 * %ldL + b1) * %ldL;\n", (long)p->nb[1],
          (long)(p->M * kw));
  cg_emit(o, "  const uint32_t *bb = (const uint32_t *)cx->B;\n");
  if (dots_form(p)) emit_dots(o, p);
  else emit_axpys(o, p);
  cg_mm_tt_setup(o, p);
  cg_emit(o, "  for (long m = 0; m < %ldL; m++)\n    for (long v = 0; v < nc; v += 16)\n", (long)p->M);
  cg_emit(o, "      $P_row1(&tt, m, n0 + v, nc - (int)v, 1, 1, _mm512_loadu_ps(y + m * %ldL + v));\n}\n", (long)tw);
  emit_run(o, p, sn);
  cg_emit(o, "#endif /* HPRT_X86 */\n");
}
