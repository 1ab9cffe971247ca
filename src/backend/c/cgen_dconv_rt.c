/* cgen_dconv_rt.c — the direct conv with sizes read at run time (a
 * ShapeSet object's N / H / W: cgen_conv_spec.n_expr / h_expr / w_expr):
 * the task over this run's rows, row blocks and column blocks (the tiles'
 * widths behind a switch), the zero-padded copy of the input, and $P_run.
 * Needs: cgen_int.h (templating, runtime), cgen_dconv_int.h (the plan dc,
 * dc_emit_kh_range of cgen_dconv_kern.c).  Gives: dc_emit_task_rt,
 * dc_emit_pad_copy, dc_emit_run_rt. */
#include <stdio.h>

#include "backend/c/cgen_dconv_int.h"
#include "backend/c/cgen_int.h"

/* The blocked channels' and the weight prefetch's arguments of a call
 * whose partial-sum slot in its row is `slot` (d->rt) into ba. */
static void rt_tile_args(const dc *d, const char *slot, char *ba, size_t cap) {
  size_t l = 0;
  ba[0] = 0;
  if (d->cb < d->ICG)
    l = (size_t)snprintf(ba, cap, ", ncb, ws + ((oh - rb * %dL) * %dL + %s) * %dL, first, last", d->rb, rt_slots(d), slot,
                         d->mr * d->nv * 16);
  if (d->npf && l < cap)
    snprintf(ba + l, cap - l, ", pfb + (uintptr_t)(((oh - rb * %dL) * %dL + %s) * ncb) * %du", d->rb, rt_slots(d), slot,
             d->npf * 64);
}

/* d->edge: zl and zr, the columns of a tile at pixel q of np pixels (an
 * expression) that lie left and right of the input row (at most pad[1]
 * and pad[3]; dc_emit_kernel broadcasts zeros there). */
static void rt_edge_args(cg_out *o, const dc *d, const char *np, const char *ind) {
  const cgen_conv_spec *s = d->s;
  if (!d->edge) return;
  cg_emit(o, "%slong cl_ = q * %ldL - %ldL, ce_ = cl_ + (%s - 1) * %ldL + %ldL;\n", ind, (long)s->stride[1], (long)s->pad[1], np,
          (long)s->stride[1], (long)((s->kw - 1) * s->dil[1]));
  cg_emit(o, "%sint zl = cl_ < 0 ? (int)-cl_ : 0, zr = ce_ >= cx->w ? (int)(ce_ - cx->w + 1) : 0;\n", ind);
}

/* The task of a conv whose sizes are read at run time (d->rt; d's sizes
 * are the upper corner's): this run's rows, row blocks and column blocks
 * (cx->ncol of cx->cw tiles each: work for every thread
 * where the rows are few, as a 1x1 conv's single row of pixels) from cx, over the
 * zero-padded copy cx->xp (planes of cx->hp x cx->wp), so every tile reads
 * all of its taps along a row (the kernel rows are those inside the input,
 * as dc_emit_task's); a row in even tiles (rt_patterns). */
void dc_emit_task_rt(cg_out *o, const dc *d) {
  const cgen_conv_spec *s = d->s;
  bool blocked = d->cb < d->ICG;
  long kstep = (long)(s->kh * s->kw * d->ob);
  cg_emit(o, "static $T void $P_dtask(void *vc, int task, int tid) {\n  (void)tid;\n");
  /* the column block slowest: a block's tasks share its input columns */
  cg_emit(o, "  const $P_dctx *cx = (const $P_dctx *)vc;\n  long nb = cx->n * %ldL * cx->nrb, col = task / nb, tk = task %% nb;\n",
          (long)(d->G * d->nob));
  if (d->ocb_fast)
    cg_emit(o, "  long ocb = tk %% %dL, r = tk / %dL, rb = r %% cx->nrb; r /= cx->nrb;\n", d->nob, d->nob);
  else
    cg_emit(o, "  long rb = tk %% cx->nrb, r = tk / cx->nrb, ocb = r %% %dL; r /= %dL;\n", d->nob, d->nob);
  cg_emit(o, "  long g = r %% %ldL, n = r / %ldL, ohw = cx->oh * cx->ow, hwp = cx->hp * cx->wp;\n", (long)d->G, (long)d->G);
  cg_emit(o, "  $P_dtt tt;\n  tt.ohw = ohw, tt.hs = (uintptr_t)hwp * 4u, tt.rs = (uintptr_t)(%ldL * cx->wp) * 4u;\n",
          (long)s->dil[0]);
  cg_emit(o, "  tt.y = (%s *)cx->C + (n * %ldL + g * %ldL) * ohw;\n", cg_ctype(s->y_dtype), (long)s->oc, (long)d->OCG);
  for (int i = 0; i < s->n_epi; i++) {
    const cgen_epi *ep = &s->epi[i];
    const char *et = cg_ctype(ep->dtype);
    if (ep->kind == CGEN_EPI_RESIDUAL)
      cg_emit(o, "  tt.ep[%d] = (const %s *)cx->ep[%d] + (n * %ldL + g * %ldL) * ohw;\n", i, et, i, (long)s->oc, (long)d->OCG);
    else if (ep->kind == CGEN_EPI_BIAS_M)
      cg_emit(o, "  tt.ep[%d] = (const %s *)cx->ep[%d] + g * %ldL;\n", i, et, i, (long)d->OCG);
    else cg_emit(o, "  tt.ep[%d] = 0;\n", i);
  }
  cg_emit(o, "  const float *x = cx->xp + (n * %ldL + g * %ldL) * hwp;\n", (long)s->c, (long)d->ICG);
  cg_emit(o, "  const float *wb = cx->Wp + (g * %dL + ocb) * %ldL;\n", d->nob, (long)(d->K * d->ob));
  cg_emit(o, "  long o0 = ocb * %dL, oh1 = rb * %dL + %dL < cx->oh ? rb * %dL + %dL : cx->oh;\n", d->ob, d->rb, d->rb, d->rb,
          d->rb);
  if (blocked) { /* the partial sums: slot q / mr for a whole tile at q, ow / mr + i for pattern i (rt_slots) */
    cg_emit(o, "  float *ws = (float *)cx->sc.thr[tid];\n");
    cg_emit(o, "  for (long c0 = 0; c0 < %ldL; c0 += %ldL) {\n", (long)d->ICG, (long)d->cb);
    cg_emit(o, "  long ncb = %ldL - c0 < %ldL ? %ldL - c0 : %ldL;\n", (long)d->ICG, (long)d->cb, (long)d->ICG, (long)d->cb);
    cg_emit(o, "  int first = c0 == 0, last = c0 + ncb == %ldL;\n", (long)d->ICG);
  } else {
    cg_emit(o, "  const long c0 = 0, ncb = %ldL;\n  (void)ncb;\n", (long)d->ICG);
  }
  if (d->npf) cg_emit(o, "  uintptr_t pfb = (uintptr_t)wb + (uintptr_t)(c0 + ncb) * %ldu;\n", kstep * 4);
  cg_emit(o, "  for (long oh = rb * %dL; oh < oh1; oh++) {\n", d->rb);
  dc_emit_kh_range(o, d, "cx->h");
  if (d->rtcopy) /* the padded plane: row ih + pad[0] */
    cg_emit(o, "  const float *xr0 = x + c0 * hwp + (oh * %ldL + kh0 * %ldL) * cx->wp;\n", (long)s->stride[0], (long)s->dil[0]);
  else
    cg_emit(o, "  const float *xr0 = x + c0 * hwp + (kh1 > kh0 ? (ih + kh0 * %ldL) * cx->wp : 0);\n", (long)s->dil[0]);
  cg_emit(o, "  const float *wt = wb + c0 * %ldL + kh0 * %ldL;\n", kstep, (long)(s->kw * d->ob));
  cg_emit(o, "  int nkh = kh1 - kh0;\n  long q0 = oh * cx->ow;\n");
  /* even tiles t of this column block (cx->cw of them), tile t at pixel
   * t * ow / nt, each width's kernel behind a switch; a row narrower than
   * rt_half(d) in the narrower patterns (one column block) */
  char ba[320], col0[48];
  int nbal = d->mr - rt_half(d) + 1;
  const char *za = d->edge ? ", zl, zr" : "";
  /* the tile's first column: in the padded plane, or in the row itself (maybe left of it) */
  if (d->rtcopy) snprintf(col0, sizeof col0, "q * %ldL", (long)s->stride[1]);
  else snprintf(col0, sizeof col0, "q * %ldL - %ldL", (long)s->stride[1], (long)s->pad[1]);
  rt_tile_args(d, "t", ba, sizeof ba);
  cg_emit(o, "  if (cx->ow >= %d) {\n", rt_half(d));
  cg_emit(o, "    long te = (col + 1) * cx->cw < cx->nt ? (col + 1) * cx->cw : cx->nt;\n");
  cg_emit(o, "    for (long t = col * cx->cw; t < te; t++) {\n");
  cg_emit(o, "      long q = t * cx->ow / cx->nt, np = (t + 1) * cx->ow / cx->nt - q;\n");
  rt_edge_args(o, d, "np", "      ");
  cg_emit(o, "      switch (np) {\n");
  for (int i = 0; i < nbal; i++) {
    char lab[24];
    if (i + 1 < nbal) snprintf(lab, sizeof lab, "case %d", d->sig[i].np);
    else snprintf(lab, sizeof lab, "default");
    cg_emit(o, "      %s: $P_dk%d(&tt, xr0, %s, wt, nkh, o0, q0 + q%s%s); break;\n", lab, i, col0, ba, za);
  }
  /* (the default: mr - nbal + 1 pixels, the narrowest even width) */
  cg_emit(o, "      }\n    }\n  } else {\n    long q = 0;\n");
  for (int i = nbal; i < d->nsig; i++) {
    char slot[16];
    snprintf(slot, sizeof slot, "%d", i - nbal);
    rt_tile_args(d, slot, ba, sizeof ba);
    char np[16];
    snprintf(np, sizeof np, "%dL", d->sig[i].np);
    cg_emit(o, "    if (q + %d <= cx->ow) {\n", d->sig[i].np);
    rt_edge_args(o, d, np, "      ");
    cg_emit(o, "      $P_dk%d(&tt, xr0, %s, wt, nkh, o0, q0 + q%s%s);\n      q += %d;\n    }\n", i, col0, ba, za, d->sig[i].np);
  }
  cg_emit(o, "  }\n");
  cg_emit(o, blocked ? "  }\n  }\n}\n" : "  }\n}\n");
}

/* One (image, channel) plane of the input per task into the zero-padded
 * copy: cx->hp rows of cx->wp columns, the input at row pad[0], column
 * pad[1]; rows no tile reads (dc_emit_kh_range) are left out.  A row by
 * vectors of 16 columns, each a masked load of the input's columns in it
 * (none outside the row is touched; half precision widened) and a store
 * with the padding as zeros: no per-row library calls, which cost more
 * than the copy at 14 x 14. */
void dc_emit_pad_copy(cg_out *o, const dc *d) {
  const cgen_conv_spec *s = d->s;
  const char *xt = cg_ctype(s->x_dtype);
  long pl = (long)s->pad[1];
  cg_emit(o, "static $T void $P_dpad(void *vc, int task, int tid) {\n  (void)tid;\n");
  cg_emit(o, "  const $P_dctx *cx = (const $P_dctx *)vc;\n  long h = cx->h, w = cx->w, wp = cx->wp;\n");
  cg_emit(o, "  const %s *x = (const %s *)cx->B + (long)task * h * w;\n", xt, xt);
  cg_emit(o, "  float *d = cx->xp + (long)task * cx->hp * wp;\n");
  cg_emit(o, "  for (long r = 0; r < cx->hp; r++, d += wp) {\n    long ih = r - %ldL;\n", (long)s->pad[0]);
  cg_emit(o, "    if (ih < 0 || ih >= h) continue;\n");
  cg_emit(o, "    uintptr_t xr = (uintptr_t)(x + ih * w);\n");
  cg_emit(o, "    for (long j = 0; j < wp; j += 16) {\n");
  cg_emit(o, "      __mmask16 k = (__mmask16)($P_mk((int)(%ldL + w - j)) & ~$P_mk((int)(%ldL - j)));\n", pl, pl);
  char ptr[96];
  snprintf(ptr, sizeof ptr, "(const void *)(xr + (uintptr_t)(j - %ldL) * %du)", pl, s->x_dtype == TINY_FP32 ? 4 : 2);
  if (s->x_dtype == TINY_FP32) cg_emit(o, "      __m512 v = _mm512_maskz_loadu_ps(k, %s);\n", ptr);
  else if (s->x_dtype == TINY_FP16) cg_emit(o, "      __m512 v = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(k, %s));\n", ptr);
  else if (s->x_dtype == TINY_BF16) cg_emit(o, "      __m512 v = $P_b2v(_mm256_maskz_loadu_epi16(k, %s));\n", ptr);
  else { /* another type: element by element */
    char ld[300];
    cg_scalar_ld(o, ld, sizeof ld, s->x_dtype, "xs", "i");
    cg_emit(o, "      float t[16];\n      const %s *xs = (const %s *)%s;\n", xt, xt, ptr);
    cg_emit(o, "      for (int i = 0; i < 16; i++) t[i] = k >> i & 1 ? %s : 0.0f;\n      __m512 v = _mm512_loadu_ps(t);\n", ld);
  }
  cg_emit(o, "      _mm512_mask_storeu_ps(d + j, $P_mk((int)(wp - j)), v);\n    }\n  }\n}\n");
}

/* The packing and the convolution in one pool run (sizes read at run
 * time), as $P_dall: the weight's npack packing tasks first, the
 * convolution's wait for them (the pool hands tasks out in order). */
static void emit_all_rt(cg_out *o, long npack) {
  cg_emit(o, "static $T void $P_drt(void *vc, int task, int tid) {\n");
  cg_emit(o, "  const $P_dctx *cx = (const $P_dctx *)vc;\n");
  cg_emit(o, "  if (task < %ldL) { $P_dpack(vc, task, tid); __atomic_add_fetch(cx->packed, 1, __ATOMIC_RELEASE); return; }\n", npack);
  cg_emit(o, "  while (__atomic_load_n(cx->packed, __ATOMIC_ACQUIRE) < %ld) HPRT_PAUSE();\n", npack);
  cg_emit(o, "  $P_dtask(vc, (int)(task - %ldL), tid);\n}\n", npack);
}

/* $P_run with run-time sizes: this run's n, h, w (checked against the
 * upper corner's), its output size, tiles and row blocks, the padded copy
 * (scratch sized for this run), then the packing and the tasks. */
void dc_emit_run_rt(cg_out *o, const dc *d, long wbytes, long npack, long wsb) {
  const cgen_conv_spec *s = d->s;
  if (s->prepack_w) npack = 0;
  else emit_all_rt(o, npack);
  long xoff = s->prepack_w ? 0L : wbytes;
  char nx[24], hx[24], wx[24];
  snprintf(nx, sizeof nx, "%ldL", (long)s->n), snprintf(hx, sizeof hx, "%ldL", (long)s->h), snprintf(wx, sizeof wx, "%ldL", (long)s->w);
  cg_emit(o, "static $T int $P_run(hprt_pool *pool, const void *A, const void *B, void *C, const void *const *ep) {\n");
  cg_emit(o, "  $P_dctx cx;\n  cx.A = A; cx.B = B; cx.C = C; cx.ep = ep;\n");
  cg_emit(o, "  cx.c = %ldL; cx.n = %s; cx.h = %s; cx.w = %s;\n", (long)s->c, s->n_expr ? s->n_expr : nx, s->h_expr ? s->h_expr : hx,
          s->w_expr ? s->w_expr : wx);
  cg_emit(o, "  if (cx.n < 1 || cx.n > %ldL || cx.h < 1 || cx.h > %ldL || cx.w < 1 || cx.w > %ldL) return -1;\n", (long)s->n,
          (long)s->h, (long)s->w);
  cg_emit(o, "  long eh = cx.h + %ldL, ew = cx.w + %ldL;\n  if (eh < 0 || ew < 0) return -1;\n",
          (long)(s->pad[0] + s->pad[2] - s->dil[0] * (s->kh - 1) - 1), (long)(s->pad[1] + s->pad[3] - s->dil[1] * (s->kw - 1) - 1));
  cg_emit(o, "  cx.oh = eh / %ldL + 1; cx.ow = ew / %ldL + 1;\n", (long)s->stride[0], (long)s->stride[1]);
  cg_emit(o, "  cx.nt = (cx.ow + %d) / %d; cx.nrb = (cx.oh + %d) / %d;\n", d->mr - 1, d->mr, d->rb - 1, d->rb);
  if (d->rtcopy) {
    cg_emit(o, "  cx.hp = (cx.oh - 1) * %ldL + %ldL;\n", (long)s->stride[0], (long)((s->kh - 1) * s->dil[0] + 1));
    /* the row's tiles end at its last pixel (dc_emit_task_rt) */
    cg_emit(o, "  cx.wp = (cx.ow - 1) * %ldL + %ldL;\n  if (cx.wp < %ldL + cx.w) cx.wp = %ldL + cx.w;\n",
            (long)s->stride[1], (long)((s->kw - 1) * s->dil[1] + 1), (long)s->pad[1], (long)s->pad[1]);
    /* this run's plane (the pool keeps the largest; without one, a malloc of the run's size) */
    cg_emit(o, "  if (hprt_scratch_get(pool, (size_t)(%ldL + cx.n * %ldL * cx.hp * cx.wp * 4), %ldUL, &cx.sc)) return -1;\n", xoff,
            (long)s->c, wsb);
    cg_emit(o, "  cx.xp = (float *)(cx.sc.shared + %ldL);\n", xoff);
  } else { /* the input itself (d->edge: the columns outside it as zeros) */
    cg_emit(o, "  cx.hp = cx.h; cx.wp = cx.w;\n");
    cg_emit(o, "  if (hprt_scratch_get(pool, %ldUL, %ldUL, &cx.sc)) return -1;\n", xoff, wsb);
    cg_emit(o, "  cx.xp = (float *)B;\n");
  }
  /* the padded copy in a pool run of its own (its tasks would make the
   * convolution's wait for them longer than a hand-over) */
  if (d->rtcopy) cg_emit(o, "  hprt_pool_run(pool, (int)(cx.n * cx.c), $P_dpad, &cx);\n");
  cg_emit(o, "  long ntask = cx.n * %ldL * cx.nrb;\n", (long)(d->G * d->nob));
  /* column blocks while the tasks are fewer than 8, or of at most ~256
   * pixels (a 1x1 conv's single row: the input of a block stays in cache
   * for its output channel blocks); cx.cw tiles a block, at least one */
  cg_emit(o, "  cx.ncol = ntask < 8 ? (8 + ntask - 1) / ntask : 1;\n  if (cx.ncol < cx.ow / 256) cx.ncol = cx.ow / 256;\n");
  cg_emit(o, "  if (cx.ncol > cx.nt) cx.ncol = cx.nt;\n");
  cg_emit(o, "  cx.cw = (cx.nt + cx.ncol - 1) / cx.ncol;\n  cx.ncol = (cx.nt + cx.cw - 1) / cx.cw;\n  ntask *= cx.ncol;\n");
  if (s->prepack_w) {
    cg_emit(o, "  cx.Wp = (float *)A;\n  hprt_pool_run(pool, (int)ntask, $P_dtask, &cx);\n");
  } else {
    cg_emit(o, "  cx.Wp = (float *)cx.sc.shared;\n  int packed = 0;\n  cx.packed = &packed;\n");
    cg_emit(o, "  hprt_pool_run(pool, (int)(%ldL + ntask), $P_drt, &cx);\n", npack);
  }
  cg_emit(o, "  hprt_scratch_put(&cx.sc);\n  return 0;\n}\n");
}
