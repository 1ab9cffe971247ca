/* cgen_gemm_rt.c — the implicit-GEMM conv with its sizes read at run time
 * (cg_mm.rt: a ShapeSet object's conv, cgen_conv_spec.n_expr / h_expr /
 * w_expr), as the scalar and AVX2 variants run it beside the AVX-512
 * variant's direct kernel (cgen_dconv_rt.c), so that one portable object
 * serves the box: this run's batch, input plane and pixels N in the
 * context, the task split along N made again per run as split_tasks makes
 * it (cgen_gemm_variant.c), the tasks' place and their store context from
 * them.  The upper corner's sizes (p->nb[0], p->N, p->cv_h, ...) size the
 * tiles and the scratch; M and K do not move.
 * Needs: cgen_gemm_int.h (cg_mm, cg_tile), cgen_int.h (cg_emit_rt_out_hw).
 * Gives: cg_rt_size, cg_rt_task_range, cg_rt_tt_setup, cg_rt_run_sizes. */
#include <stdio.h>
#include <string.h>

#include "backend/c/cgen_gemm_int.h"

const char *cg_rt_size(char *b, const cg_mm *p, int64_t v, const char *rt) {
  if (p->rt) snprintf(b, 48, "%s", rt);
  else snprintf(b, 48, "%ldL", (long)v);
  return b;
}

void cg_rt_task_range(cg_out *o, const cg_mm *p, const cg_tile *t) {
  cg_emit(o, "  long tn = task %% cx->sn, r = task / cx->sn, tm = r %% %ldL; r /= %ldL;\n", (long)t->sm, (long)t->sm);
  cg_emit(o, "  long b1 = r %% %ldL, b0 = r / %ldL;\n", (long)p->nb[1], (long)p->nb[1]);
  cg_emit(o, "  long m0 = tm * %ldL, m1 = m0 + %ldL < %ldL ? m0 + %ldL : %ldL;\n", (long)t->tm, (long)t->tm, (long)p->M,
          (long)t->tm, (long)p->M);
  cg_emit(o, "  long n0 = tn * cx->tn, n1 = n0 + cx->tn < cx->N ? n0 + cx->tn : cx->N;\n");
}

void cg_rt_tt_setup(cg_out *o, const cg_mm *p) {
  /* C, a residual (laid out like C) per batch: channels times this run's pixels */
  cg_emit(o, "  $F_tt tt;\n  memset(&tt, 0, sizeof tt);\n  tt.ldc = cx->N;\n");
  cg_emit(o, "  tt.c = (char *)((%s *)cx->C + (b0 * %ldL + b1 * %ldL) * cx->N);\n", cg_ctype(p->cdt), (long)(p->c_sb[0] / p->N),
          (long)(p->c_sb[1] / p->N));
  for (int i = 0; i < p->n_epi; i++) {
    const cgen_epi *ep = &p->epi[i];
    const char *et = cg_ctype(ep->dtype);
    if (ep->kind == CGEN_EPI_RESIDUAL)
      cg_emit(o, "  tt.ep[%d] = (const %s *)cx->ep[%d] + (b0 * %ldL + b1 * %ldL) * cx->N;\n", i, et, i, (long)(ep->s_b0 / p->N),
              (long)(ep->s_b1 / p->N));
    else if (ep->kind == CGEN_EPI_BIAS_M)
      cg_emit(o, "  tt.ep[%d] = (const %s *)cx->ep[%d] + b1 * %ldL;\n", i, et, i, (long)p->bias_sb1);
    else if (ep->kind == CGEN_EPI_BIAS_N)
      cg_emit(o, "  tt.ep[%d] = cx->ep[%d];\n", i, i);
  }
}

void cg_rt_run_sizes(cg_out *o, const cg_mm *p, const cg_tile *t, char *ntask, size_t cap) {
  const cgen_conv_spec *s = p->cs;
  cg_rt_window k = {s->n_expr, s->h_expr, s->w_expr, s->n, s->h, s->w, s->kh, s->kw, s->stride, s->pad, s->dil};
  cg_emit_rt_out_hw(o, &k);
  cg_emit(o, "  cx.nb0 = n; cx.N = cx.oh * cx.ow;\n");
  /* split_tasks at this run's batches and pixels: along N (an upper corner
   * split along M keeps its row blocks, whole pixel rows a task) */
  const cgen_tuning *u = &p->tune;
  long threads = u->threads > 0 ? u->threads : 2, target = u->tasks > 0 ? u->tasks : threads;
  bool pn = u->par_n || !u->par_m;
  cg_emit(o, "  long need = 1, ncol = (cx.N + %dL) / %dL;\n", t->nr - 1, t->nr);
  if (t->sm == 1 && pn) {
    cg_emit(o, "  if (n * %ldL < %ldL) { /* fewer batches than 4 rounds a thread: the threads over N too */\n", (long)p->nb[1],
            4 * target);
    cg_emit(o, "    long a = n * %ldL, b = %ldL;\n    while (b) { long r = a %% b; a = b; b = r; }\n    need = %ldL / a;\n  }\n",
            (long)p->nb[1], target, target);
  }
  cg_emit(o, "  if (need > ncol) need = ncol;\n");
  cg_emit(o, "  cx.tn = ((cx.N + need - 1) / need + %dL) / %dL * %dL;\n  cx.sn = (cx.N + cx.tn - 1) / cx.tn;\n", t->nr - 1,
          t->nr, t->nr);
  snprintf(ntask, cap, "(int)(cx.nb0 * %ldL * cx.sn)", (long)(p->nb[1] * t->sm));
}
