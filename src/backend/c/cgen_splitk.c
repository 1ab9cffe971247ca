/* cgen_splitk.c — split-K for the GEMM template's kernels (tune.splitk = S
 * > 1, the Plan's `algo_choice matmul splitk_reduce`): the slices of K
 * write fp32 partials side by side, and a finishing pass adds them in
 * slice order (deterministic: the same sums whatever the threads) and
 * applies the epilogue and the store.
 * Needs: cgen_gemm_int.h (the contraction, the row store, the task
 * setup), cgen_int.h.  Gives: cg_emit_splitk_sum (the skinny GEMM's and the
 * implicit-GEMM conv's reduction), cg_splitk_floats, cg_splitk_kc,
 * cg_splitk_view, cg_emit_splitk_run, cgen_conv_splitk_ok.
 *
 * The implicit-GEMM conv (cgen_gemm.c's variant on cg_splitk_view): the
 * tasks are S x the tiles of a slice; slice s runs the KC blocks
 * [s * nps, (s + 1) * nps) of its tile into its partial (the fp32 C of the
 * view, accumulated across its blocks in place), then $P_ksum.  Where it
 * pays: few output tiles for the threads over a long K (512->512 3x3 at
 * 7x7, batch 1: M 512, N 49, K 4608). */
#include <stdio.h>
#include <string.h>

#include "backend/c/cgen_gemm_int.h"

int64_t cg_splitk_floats(const cg_mm *p, int S) { return (int64_t)S * p->nb[0] * p->nb[1] * p->M * p->N; }

int cg_splitk_kc(int64_t K, int kc0, int S, int64_t *nps) {
  if (S < 2 || K < S || kc0 < 1) return 0;
  int64_t nkb0 = (K + kc0 - 1) / kc0;
  *nps = (nkb0 + S - 1) / S;
  int64_t kc = (K + *nps * S - 1) / (*nps * S), nkb = (K + kc - 1) / kc;
  return (nkb + *nps - 1) / *nps == S ? (int)kc : 0;
}

/* $P_ksum(task): tile task of the S partials (k's grid) summed in slice
 * order, a vector at a time, into $P_ksrow1 (p's epilogue and store). */
void cg_emit_splitk_sum(cg_out *o, const cg_mm *p, const cg_splitk *k) {
  int w = o->isa->w;
  int64_t slice = cg_splitk_floats(p, 1);
  cg_tile rt; /* the store alone: nothing carried across K blocks */
  memset(&rt, 0, sizeof rt);
  cg_mm_emit_row_as(o, p, &rt, 1, "ksrow");
  cg_emit(o, "static $T void $P_ksum(void *vc, int task, int tid) {\n  const $F_ctx *cx = (const $F_ctx *)vc;\n");
  cg_emit(o, "  (void)tid;\n  long tn = task %% %ldL, r = task / %ldL, tm = r %% %ldL; r /= %ldL;\n", (long)k->sn,
          (long)k->sn, (long)k->sm, (long)k->sm);
  cg_emit(o, "  long b1 = r %% %ldL, b0 = r / %ldL;\n", (long)p->nb[1], (long)p->nb[1]);
  cg_emit(o, "  long m0 = tm * %ldL, m1 = m0 + %ldL < %ldL ? m0 + %ldL : %ldL;\n", (long)k->tm, (long)k->tm, (long)p->M,
          (long)k->tm, (long)p->M);
  cg_emit(o, "  long n0 = tn * %ldL, n1 = n0 + %ldL < %ldL ? n0 + %ldL : %ldL;\n  int nc = (int)(n1 - n0);\n", (long)k->tn,
          (long)k->tn, (long)p->N, (long)k->tn, (long)p->N);
  cg_emit(o, "  const float *pp = (const float *)cx->sc.shared + %ldL + r * %ldL + n0;\n", (long)k->off,
          (long)(p->M * p->N));
  cg_mm_tt_setup(o, p);
  cg_emit(o, "  for (long m = m0; m < m1; m++)\n    for (long v = 0; v < nc; v += %d) {\n", w);
  cg_emit(o, "      const float *q = pp + m * %ldL + v;\n      int nj = nc - (int)v;\n", (long)p->N);
  cg_emit(o, "      $P_v t = nj >= %d ? $P_ld(q) : $P_ldn(q, nj);\n", w);
  cg_emit(o, "      for (long s = 1; s < %dL; s++) t = t + (nj >= %d ? $P_ld(q + s * %ldL) : $P_ldn(q + s * %ldL, nj));\n",
          k->S, w, (long)slice, (long)slice);
  cg_emit(o, "      $P_ksrow1(&tt, m, n0 + v, nj, 1, 1, t);\n    }\n}\n");
}

void cg_splitk_view(const cg_mm *p, cg_mm *q) {
  *q = *p;
  q->full = p;
  q->cdt = TINY_FP32;
  q->n_epi = 0;
  memset(q->epi, 0, sizeof q->epi);
  q->c_sb[1] = p->M * p->N, q->c_sb[0] = p->nb[1] * p->M * p->N, q->c_sm = p->N, q->c_sn = 1;
  /* the slices are the parallel work: fewer tiles a slice */
  int threads = p->tune.threads > 0 ? p->tune.threads : 2, S = p->tune.splitk;
  q->tune.tasks = threads > S ? (threads + S - 1) / S : 1;
}

cg_splitk cg_splitk_grid(const cg_mm *p, int64_t off) {
  int threads = p->tune.threads > 0 ? p->tune.threads : 2;
  /* rows over about 2 x threads tasks a batch, all columns */
  int64_t want = 2 * threads, nbat = p->nb[0] * p->nb[1];
  int64_t per = nbat >= want ? 1 : (want + nbat - 1) / nbat, tm = (p->M + per - 1) / per;
  return (cg_splitk){p->tune.splitk, (p->M + tm - 1) / tm, tm, 1, p->N, off};
}

void cg_emit_splitk_run(cg_out *o, const cg_mm *p, int64_t ntask, const cg_splitk *k) {
  cg_emit(o, "  cx.C = (float *)cx.sc.shared + %ldL; /* the %d slices' partials */\n", (long)k->off, k->S);
  cg_emit(o, "  hprt_pool_run(pool, %ld, $P_task, &cx);\n", (long)(k->S * ntask));
  cg_emit(o, "  cx.C = C;\n  hprt_pool_run(pool, %ld, $P_ksum, &cx);\n", (long)(p->nb[0] * p->nb[1] * k->sm * k->sn));
}

bool cgen_conv_splitk_ok(const cgen_conv_spec *s, const char **why) {
  int S = s->tune.splitk;
  int64_t oh, ow, nps;
  if (S < 2 || S > 64) return *why = "split-K takes 2..64 slices (without splitk N: plan_splitk_factor's count)", false;
  if (s->n_expr || s->h_expr || s->w_expr) return *why = "sizes read at run time (the direct kernel's)", false;
  if (s->tune.conv_algo != CGEN_CONV_AUTO && s->tune.conv_algo != CGEN_CONV_GEMM)
    return *why = "split-K is the implicit GEMM's, not Winograd's or the direct kernel's", false;
  if (cg_dw_applies(s)) return *why = "a depthwise conv (its own kernel)", false;
  if (cg_conv_bf16_asked(s)) return *why = "bf16 multiplication", false;
  if (!cgen_conv_out_hw(s, &oh, &ow)) return *why = "the window does not fit", false;
  int64_t K = s->c / (s->groups > 0 ? s->groups : 1) * s->kh * s->kw;
  if (!cg_splitk_kc(K, s->tune.kc > 0 ? s->tune.kc : 256, S, &nps))
    return *why = "K too short for that many slices of whole blocks", false;
  return true;
}
