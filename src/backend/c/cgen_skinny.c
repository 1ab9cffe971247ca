/* cgen_skinny.c — the skinny GEMM variant: up to 8 rows of A (GEMV,
 * decode-time matmuls) stream B once instead of packing it.
 * Needs: cgen_gemm_int.h (the contraction, the GEMM's row store and task
 * setup, split-K's sum of cgen_splitk.c), cgen_int.h.  Gives: cg_skinny_ok, cg_skinny_splitk_ok, cg_emit_skinny_variant
 * (with split-K). */
#include <stdio.h>
#include <string.h>

#include "backend/c/cgen_gemm_int.h"

/* ---- skinny GEMM: up to 8 rows of A (GEMV, decode-time matmuls) ------------ */
/* Packing B costs as much as the product when M is tiny, and a 6-row
 * micro-tile idles: stream B once instead.  B with unit stride along N: each
 * task keeps fp32 rows of C for a strip of columns in L1 and adds
 * A[m][k] * B[k][strip] over k, four rows of B at a time (long contiguous
 * runs of B).  B with unit stride along K (x W^T): dot products along K, four
 * columns at a time sharing the loads of A.  A is first converted to dense
 * fp32 rows (M x K per batch, small).  The epilogue and the store are the
 * GEMM's (cg_mm_emit_row).
 * Split-K (tune.splitk = S > 1, the Plan's `algo_choice matmul splitk_reduce`):
 * the tasks also split K into S slices of whole vectors; each writes its
 * strip's fp32 partial rows into shared scratch, then a second pass per strip
 * sums the S partials in slice order (deterministic) and runs the epilogue
 * and the store.  For few strips over a long K: a 1..8-row GEMV whose N
 * fills fewer strips than threads otherwise runs on fewer cores. */
#define SKINNY_MAX_M CGEN_SKINNY_MAX_M
#define SKINNY_STRIP 1024

bool cg_skinny_ok(const cg_mm *p, const cg_isa *isa) {
  if (p->conv || p->prepack_a || p->prepack_b || p->M > SKINNY_MAX_M || isa->id == CGEN_ISA_SCALAR || p->c_sn != 1) return false;
  if (p->b_sn != 1 && p->b_sk != 1) return false;
  return p->nb[0] * p->nb[1] * p->M * p->K <= (1L << 24); /* the fp32 copy of A: 64 MiB at most */
}

/* Can GEMM p split K (tune.splitk > 1)?  Its primary variant, the widest
 * ISA its tuning emits, must be this kernel (a scalar fallback runs unsplit). */
bool cg_skinny_splitk_ok(const cg_mm *p) {
  unsigned set = cg_isa_set(&p->tune);
  int primary = CGEN_ISA_SCALAR;
  for (int i = 0; i < CGEN_ISA_COUNT; i++)
    if (set >> i & 1u) primary = i;
  return !p->m_expr && !p->b0_expr && !p->n_expr && !p->k_expr && cg_skinny_ok(p, cg_isa_get((cgen_isa)primary));
}

/* Columns per task: the work split over about 2 x threads tasks, whole vectors. */
static int64_t skinny_strip(const cg_mm *p, int w) {
  int threads = p->tune.threads > 0 ? p->tune.threads : 2;
  int64_t want = p->tune.tasks > 0 ? p->tune.tasks : 2 * threads, nbat = p->nb[0] * p->nb[1];
  int64_t per = nbat >= want ? 1 : (want + nbat - 1) / nbat;
  int64_t tw = cg_rup((p->N + per - 1) / per, w);
  if (tw < 4 * w) tw = 4 * w;
  return tw > SKINNY_STRIP ? SKINNY_STRIP : tw;
}

/* y[m][v..] += sum over i < nk of A[m][k + i] * B[k + i][v..] for one vector
 * of the strip (nk = 4 or 1); tail: the strip's last, partial vector. */
static void emit_skinny_axpy(cg_out *o, const cg_mm *p, int nk, bool tail, int64_t tw) {
  const char *bs = cg_vsuffix(p->bdt);
  for (int i = 0; i < nk; i++) {
    if (tail) cg_emit(o, "      $P_v q%d = $P_ldn%s(b + %dL * %ldL + v, nc - (int)v);\n", i, bs, i, (long)p->b_sk);
    else cg_emit(o, "      $P_v q%d = $P_ld%s(b + %dL * %ldL + v);\n", i, bs, i, (long)p->b_sk);
  }
  for (int m = 0; m < p->M; m++) {
    cg_emit(o, "      { float *yp = y + %ldL + v; $P_v t = $P_ld(yp);", (long)(m * tw));
    for (int i = 0; i < nk; i++) cg_emit(o, " t = $P_fma(q%d, a%d_%d, t);", i, m, i);
    cg_emit(o, " $P_st(yp, t); }\n");
  }
}

/* Split-K's end of a task (slice s of strip tn: its y rows into the
 * partials after the fp32 A, ap_floats in, as cg_emit_splitk_sum lays them
 * out) and that pass, which adds the S partials of a strip in slice order,
 * then the epilogue and the store. */
static void emit_skinny_partials(cg_out *o, const cg_mm *p, int S, int64_t sn, int64_t tw, int64_t ap_floats) {
  int M = (int)p->M;
  cg_emit(o, "  float *pp = (float *)cx->sc.shared + %ldL + ((s * %ldL + r) * %dL) * %ldL + n0;\n", (long)ap_floats,
          (long)(p->nb[0] * p->nb[1]), M, (long)p->N);
  cg_emit(o, "  (void)b0; (void)b1;\n  for (long m = 0; m < %dL; m++) memcpy(pp + m * %ldL, y + m * %ldL, sizeof(float) * nc);\n}\n",
          M, (long)p->N, (long)tw);
  cg_splitk k = {S, 1, M, sn, tw, ap_floats};
  cg_emit_splitk_sum(o, p, &k);
}

/* K slices of tune.splitk (0, 1: none), each whole vectors of width w. */
static int skinny_slices(const cg_mm *p, int w, int64_t *ks) {
  int S = p->tune.splitk > 1 ? p->tune.splitk : 1;
  *ks = cg_rup((p->K + S - 1) / S, w);
  return (int)((p->K + *ks - 1) / *ks);
}

/* The task's sums of B stored along N (b_sn 1): y[m][n] over K (or the
 * slice [k0, kend)), four k steps at a time, then single ones. */
static void emit_skinny_axpys(cg_out *o, const cg_mm *p, int64_t tw, int S, const char *kend) {
  int w = o->isa->w, M = (int)p->M;
  int64_t K = p->K;
  const char *bt = cg_ctype(p->bdt);
  cg_emit(o, "  memset(y, 0, sizeof(float) * %ldL);\n  long k = %s;\n", (long)(M * tw), S > 1 ? "k0" : "0");
  for (int pass = 0; pass < 2; pass++) {
    int nk = pass == 0 ? 4 : 1;
    /* no loop GCC proves empty (slices are whole vectors: K % 4 == 0 leaves none a tail) */
    if ((pass == 0 && K < 4) || (pass == 1 && K % 4 == 0)) continue;
    if (pass == 0) cg_emit(o, "  for (; k + 4 <= %s; k += 4) {\n", kend);
    else cg_emit(o, "  for (; k < %s; k++) {\n", kend);
    cg_emit(o, "    const %s *b = bb + k * %ldL + n0;\n", bt, (long)p->b_sk);
    for (int m = 0; m < M; m++)
      for (int i = 0; i < nk; i++) cg_emit(o, "    $P_v a%d_%d = $P_set1(a[%ldL + k + %d]);\n", m, i, (long)(m * K), i);
    cg_emit(o, "    long v = 0;\n    for (; v + %d <= nc; v += %d) {\n", w, w);
    emit_skinny_axpy(o, p, nk, false, tw);
    cg_emit(o, "    }\n    if (v < nc) {\n");
    emit_skinny_axpy(o, p, nk, true, tw);
    cg_emit(o, "    }\n  }\n");
  }
}

/* The task's sums of B stored along K (x W^T): dot products along K (or
 * the slice [k0, k1)), four columns of B at a time, then single ones. */
static void emit_skinny_dots(cg_out *o, const cg_mm *p, int64_t tw, int S) {
  int w = o->isa->w, M = (int)p->M;
  int64_t K = p->K;
  const char *bt = cg_ctype(p->bdt), *bs = cg_vsuffix(p->bdt);
  /* dot products along K, NN columns of B (rows of B^T) at a time */
  int64_t kf = K / w * w;
  int kt = (int)(K - kf);
  for (int pass = 0; pass < 2; pass++) {
    int nn = pass == 0 ? 4 : 1;
    if (pass == 0) cg_emit(o, "  long n = n0;\n  for (; n + 4 <= n1; n += 4) {\n");
    else cg_emit(o, "  for (; n < n1; n++) {\n");
    for (int i = 0; i < nn; i++) {
      cg_emit(o, "    const %s *b%d = bb + (n + %d) * %ldL;\n", bt, i, i, (long)p->b_sn);
      for (int m = 0; m < M; m++) cg_emit(o, "    $P_v c%d_%d = $P_zero();\n", i, m);
    }
    for (int t = 0; t < 2; t++) {
      if (t == 1 && !kt) break;
      if (S > 1) { /* a slice's whole vectors; only the last slice has the tail */
        if (t == 0) cg_emit(o, "    for (long k = k0; k + %d <= k1; k += %d) {\n", w, w);
        else cg_emit(o, "    if (k1 == %ldL) { long k = %ldL;\n", (long)K, (long)kf);
      } else if (t == 0) cg_emit(o, "    for (long k = 0; k < %ldL; k += %d) {\n", (long)kf, w);
      else cg_emit(o, "    { long k = %ldL;\n", (long)kf);
      for (int m = 0; m < M; m++)
        cg_emit(o, t ? "      $P_v x%d = $P_ldn(a + %ldL + k, %d);\n" : "      $P_v x%d = $P_ld(a + %ldL + k);\n", m,
                (long)(m * K), kt);
      for (int i = 0; i < nn; i++) {
        if (t) cg_emit(o, "      { $P_v q = $P_ldn%s(b%d + k, %d);", bs, i, kt);
        else cg_emit(o, "      { $P_v q = $P_ld%s(b%d + k);", bs, i);
        for (int m = 0; m < M; m++) cg_emit(o, " c%d_%d = $P_fma(q, x%d, c%d_%d);", i, m, m, i, m);
        cg_emit(o, " }\n");
      }
      cg_emit(o, "    }\n");
    }
    for (int i = 0; i < nn; i++)
      for (int m = 0; m < M; m++) cg_emit(o, "    y[%ldL + n - n0 + %d] = $P_hsum(c%d_%d);\n", (long)(m * tw), i, i, m);
    cg_emit(o, "  }\n");
  }
}

/* $P_run: A as dense fp32 rows (scratch: A, then S slices' partials of the
 * sn strips), then the tasks (and the slices' sum). */
static void emit_skinny_run(cg_out *o, const cg_mm *p, int S, int64_t sn, int64_t tw, int64_t ap_floats) {
  int M = (int)p->M;
  int64_t K = p->K, nbat = p->nb[0] * p->nb[1];
  char ld[240], idx[160];
  snprintf(idx, sizeof idx, "b0 * %ldL + b1 * %ldL + m * %ldL + k * %ldL", (long)p->a_sb[0], (long)p->a_sb[1],
           (long)p->a_sm, (long)p->a_sk);
  cg_scalar_ld(o, ld, sizeof ld, p->adt, "cx.A", idx);
  cg_emit(o, "static $T int $P_run(hprt_pool *pool, const void *A, const void *B, void *C, const void *const *ep) {\n");
  cg_emit(o, "  $F_ctx cx;\n  cx.A = A; cx.B = B; cx.C = C; cx.ep = ep;\n");
  cg_emit(o, "  if (hprt_scratch_get(pool, %ldUL, %ldUL, &cx.sc)) return -1;\n",
          (long)(S > 1 ? (ap_floats + cg_splitk_floats(p, S)) * 4 : nbat * M * K * 4), (long)(M * tw * 4));
  cg_emit(o, "  cx.Ap = (float *)cx.sc.shared;\n  float *ap = cx.Ap;\n");
  cg_emit(o, "  for (long b0 = 0; b0 < %ldL; b0++)\n    for (long b1 = 0; b1 < %ldL; b1++)\n", (long)p->nb[0],
          (long)p->nb[1]);
  cg_emit(o, "      for (long m = 0; m < %dL; m++)\n        for (long k = 0; k < %ldL; k++) *ap++ = ", M, (long)K);
  cg_emit(o, "%s;\n  hprt_pool_run(pool, %ld, $P_task, &cx);\n", ld, (long)(nbat * sn * S));
  if (S > 1) cg_emit(o, "  hprt_pool_run(pool, %ld, $P_ksum, &cx);\n", (long)(nbat * sn));
  cg_emit(o, "  hprt_scratch_put(&cx.sc);\n  return 0;\n}\n");
}

void cg_emit_skinny_variant(cg_out *o, const cg_mm *p) {
  int w = o->isa->w, M = (int)p->M;
  int64_t tw = skinny_strip(p, w), sn = (p->N + tw - 1) / tw, K = p->K, ks, nbat = p->nb[0] * p->nb[1];
  int S = skinny_slices(p, w, &ks);
  int64_t ap_floats = cg_rup(nbat * M * K, 16); /* the fp32 A, then the partials (64-byte aligned) */
  char kend[32];
  snprintf(kend, sizeof kend, S > 1 ? "k1" : "%ldL", (long)K);
  const char *bt = cg_ctype(p->bdt);
  cg_tile rt; /* the GEMM's store, one vector at a time, nothing carried across K blocks */
  memset(&rt, 0, sizeof rt);
  cg_emit_isa_helpers(o);
  if (S == 1) cg_mm_emit_row(o, p, &rt, 1);
  cg_emit(o, "static $T void $P_task(void *vc, int task, int tid) {\n  const $F_ctx *cx = (const $F_ctx *)vc;\n");
  if (S > 1) { /* the slice s of K: [k0, k1) */
    cg_emit(o, "  long tn = task %% %ldL, r = task / %ldL, s = r %% %dL; r /= %dL;\n", (long)sn, (long)sn, S, S);
    cg_emit(o, "  long b1 = r %% %ldL, b0 = r / %ldL;\n", (long)p->nb[1], (long)p->nb[1]);
    cg_emit(o, "  long k0 = s * %ldL, k1 = k0 + %ldL < %ldL ? k0 + %ldL : %ldL;\n", (long)ks, (long)ks, (long)K,
            (long)ks, (long)K);
  } else
    cg_emit(o, "  long tn = task %% %ldL, r = task / %ldL, b1 = r %% %ldL, b0 = r / %ldL;\n", (long)sn, (long)sn,
            (long)p->nb[1], (long)p->nb[1]);
  cg_emit(o, "  long n0 = tn * %ldL, n1 = n0 + %ldL < %ldL ? n0 + %ldL : %ldL;\n  int nc = (int)(n1 - n0);\n", (long)tw,
          (long)tw, (long)p->N, (long)tw, (long)p->N);
  cg_emit(o, "  float *y = (float *)cx->sc.thr[tid];\n");
  cg_emit(o, "  const float *a = cx->Ap + (b0 * %ldL + b1) * %ldL;\n", (long)p->nb[1], (long)(M * K));
  cg_emit(o, "  const %s *bb = (const %s *)cx->B + b0 * %ldL + b1 * %ldL;\n", bt, bt, (long)p->b_sb[0], (long)p->b_sb[1]);
  if (p->b_sn == 1) emit_skinny_axpys(o, p, tw, S, kend);
  else emit_skinny_dots(o, p, tw, S);
  if (S > 1) emit_skinny_partials(o, p, S, sn, tw, ap_floats);
  else { /* epilogue and store, a vector at a time */
    cg_mm_tt_setup(o, p);
    cg_emit(o, "  for (long m = 0; m < %dL; m++)\n    for (long v = 0; v < nc; v += %d)\n", M, w);
    cg_emit(o, "      $P_row1(&tt, m, n0 + v, nc - (int)v, 1, 1, $P_ld(y + m * %ldL + v));\n}\n", (long)tw);
  }
  emit_skinny_run(o, p, S, sn, tw, ap_floats);
  cg_emit(o, "#endif /* HPRT_X86 */\n");
}
