/* cgen_gemm_rt.c — the implicit-GEMM conv with its sizes read at run time
 * (cg_mm.rt: a ShapeSet object's conv, cgen_conv_spec.n_expr / h_expr /
 * w_expr), as the scalar and AVX2 variants run it beside the AVX-512
 * variant's direct kernel (cgen_dconv_rt.c), so that one portable object
 * serves the box: this run's batch, input plane and pixels N in the
 * context, the task split along N made again per run as split_tasks makes
 * it (cgen_gemm_variant.c), the tasks' place and their store context from
 * them.  The upper corner's sizes (p->nb[0], p->N, p->cv_h, ...) size the
 * tiles and the scratch; M and K do not move.  A GEMM whose N is read at
 * run time (cg_mm.n_expr, cs NULL: one batch, C [M][N] and B [K][N] with
 * this run's N as their row stride) takes the same path, N from its
 * expression.
 * Needs: cgen_gemm_int.h (cg_mm, cg_tile, the split rule cg_split_need), cgen_int.h (cg_emit_rt_out_hw).
 * Gives: cg_rt_size, cg_rt_task_range, cg_rt_batch_off, cg_rt_run_sizes. */
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

const char *cg_rt_batch_off(char *b, const cg_mm *p, int64_t s0, int64_t s1) {
  if (p->rt) /* channels times this run's pixels (C, and a residual laid out like it) */
    snprintf(b, 96, "(b0 * %ldL + b1 * %ldL) * cx->N", (long)(s0 / p->N), (long)(s1 / p->N));
  else snprintf(b, 96, "b0 * %ldL + b1 * %ldL", (long)s0, (long)s1);
  return b;
}

void cg_rt_run_sizes(cg_out *o, const cg_mm *p, const cg_tile *t, char *ntask, size_t cap) {
  const cgen_conv_spec *s = p->cs;
  if (s) {
    cg_rt_window k = {s->n_expr, s->h_expr, s->w_expr, s->n, s->h, s->w, s->kh, s->kw, s->stride, s->pad, s->dil};
    cg_emit_rt_out_hw(o, &k);
    cg_emit(o, "  cx.nb0 = n; cx.N = cx.oh * cx.ow;\n");
  } else { /* a GEMM's N (p->n_expr), one batch */
    cg_emit(o, "  long n = 1;\n  cx.nb0 = n; cx.N = %s;\n  if (cx.N < 1 || cx.N > %ldL) return -1;\n", p->n_expr, (long)p->N);
  }
  /* split_tasks at this run's batches and pixels, by its rule
   * ($P_split_need, emitted before $P_run): along N (an upper corner split
   * along M keeps its row blocks, whole pixel rows a task) */
  const cgen_tuning *u = &p->tune;
  bool pn = u->par_n || !u->par_m;
  if (t->sm == 1 && pn) cg_emit(o, "  long need = $P_split_need(n * %ldL, %ldL);\n", (long)p->nb[1], cg_split_target(u));
  else cg_emit(o, "  long need = 1;\n");
  cg_emit(o, "  long ncol = (cx.N + %dL) / %dL;\n", t->nr - 1, t->nr);
  cg_emit(o, "  if (need > ncol) need = ncol;\n");
  cg_emit(o, "  cx.tn = ((cx.N + need - 1) / need + %dL) / %dL * %dL;\n  cx.sn = (cx.N + cx.tn - 1) / cx.tn;\n", t->nr - 1,
          t->nr, t->nr);
  snprintf(ntask, cap, "(int)(cx.nb0 * %ldL * cx.sn)", (long)(p->nb[1] * t->sm));
}
