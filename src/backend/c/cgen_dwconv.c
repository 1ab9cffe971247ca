/* cgen_dwconv.c — depthwise convolution (groups == input == output channels).
 * Needs: cgen_int.h.  Gives: cg_dw_applies, cg_dwconv (cgen_conv's kernel
 * for that case).
 *
 * A depthwise layer has K = kh*kw per output: as an implicit GEMM every
 * group is a 1-row GEMM with a 9-deep reduction, all packing and no
 * arithmetic.  Here each task is one (image, channel) plane:
 *   the input plane is copied, converted to fp32 and zero-padded, into a
 *   per-thread scratch wide enough that every vector load stays inside it
 *   (no bounds checks in the loop);
 *   per output row, four vectors of outputs at a time (four independent FMA
 *   chains) accumulate kh*kw taps, each tap a weight broadcast times the
 *   input row at that offset (a gather when the stride is not 1);
 *   the epilogue (per-channel bias, activations, a residual laid out like
 *   the output, roundings) runs in registers before the store.
 * With prepack_w the weights are converted to fp32 once (fn_pack_a). */
#include <stdio.h>
#include <string.h>

#include "backend/c/cgen_int.h"

bool cg_dw_applies(const cgen_conv_spec *s) { return s->groups > 1 && s->groups == s->c && s->oc == s->c; }

typedef struct dw_geo {
  int64_t oh, ow, hp, wp; /* output size; the padded plane in the scratch */
} dw_geo;

static void geometry(const cgen_conv_spec *s, int w, dw_geo *g) {
  cgen_conv_out_hw(s, &g->oh, &g->ow);
  g->hp = s->h + s->pad[0] + s->pad[2];
  int64_t need = (cg_rup(g->ow, w) - 1) * s->stride[1] + (s->kw - 1) * s->dil[1] + 1;
  int64_t wp = s->w + s->pad[1] + s->pad[3];
  g->wp = cg_rup(need > wp ? need : wp, 16);
}

/* acc += the U vectors of outputs at ow (+ j*W) for one tap at row pointer r. */
static void emit_tap(cg_out *o, const cgen_conv_spec *s, int u, const char *wt) {
  int w = o->isa->w;
  for (int j = 0; j < u; j++) {
    if (s->stride[1] == 1) cg_emit(o, "          a%d = $P_fma($P_ld(r + %d), %s, a%d);\n", j, j * w, wt, j);
    else cg_emit(o, "          a%d = $P_fma($P_lds(r + %ld), %s, a%d);\n", j, (long)(j * w * s->stride[1]), wt, j);
  }
}

static void emit_variant(cg_out *o, const cgen_conv_spec *s) {
  int w = o->isa->w;
  dw_geo g;
  geometry(s, w, &g);
  int64_t C = s->c, H = s->h, W = s->w, KH = s->kh, KW = s->kw, plane = g.oh * g.ow;
  const char *xt = cg_ctype(s->x_dtype), *yt = cg_ctype(s->y_dtype), *ys = cg_vsuffix(s->y_dtype);
  tiny_dtype wdt = s->prepack_w ? TINY_FP32 : s->w_dtype;
  char buf[256];
  cg_emit_isa_helpers(o);
  if (s->stride[1] > 1) { /* lanes stride[1] apart */
    if (o->isa->id == CGEN_ISA_AVX512) {
      cg_emit(o, "$I $P_v $P_lds(const float *p) { return _mm512_i32gather_ps(_mm512_setr_epi32(");
      for (int l = 0; l < 16; l++) cg_emit(o, "%ld%s", (long)(l * s->stride[1]), l < 15 ? ", " : "), p, 4); }\n");
    } else if (o->isa->id == CGEN_ISA_AVX2) {
      cg_emit(o, "$I $P_v $P_lds(const float *p) { return _mm256_i32gather_ps(p, _mm256_setr_epi32(");
      for (int l = 0; l < 8; l++) cg_emit(o, "%ld%s", (long)(l * s->stride[1]), l < 7 ? ", " : "), 4); }\n");
    } else {
      cg_emit(o, "$I $P_v $P_lds(const float *p) { return *p; }\n");
    }
  }
  cg_emit(o, "static $T void $P_task(void *vc, int task, int tid) {\n  const $F_ctx *cx = (const $F_ctx *)vc;\n");
  cg_emit(o, "  long n = task / %ldL, c = task %% %ldL;\n  (void)n;\n", (long)C, (long)C);
  cg_emit(o, "  float *xp = (float *)cx->sc.thr[tid];\n");
  cg_emit(o, "  const %s *x = (const %s *)cx->B + (n * %ldL + c) * %ldL;\n", xt, xt, (long)C, (long)(H * W));
  /* the padded plane: zero rows above and below, zero margins, the row converted */
  char idx[96], ldx[300];
  snprintf(idx, sizeof idx, "ih * %ldL + iw", (long)W);
  cg_scalar_ld(o, ldx, sizeof ldx, s->x_dtype, "x", idx);
  cg_emit(o, "  for (long r = 0; r < %ldL; r++) {\n    float *d = xp + r * %ldL;\n    long ih = r - %ldL;\n", (long)g.hp,
          (long)g.wp, (long)s->pad[0]);
  cg_emit(o, "    if (ih < 0 || ih >= %ldL) { memset(d, 0, sizeof(float) * %ldL); continue; }\n", (long)H, (long)g.wp);
  cg_emit(o, "    for (long q = 0; q < %ldL; q++) d[q] = 0.0f;\n", (long)s->pad[1]);
  cg_emit(o, "    for (long iw = 0; iw < %ldL; iw++) d[%ldL + iw] = %s;\n", (long)W, (long)s->pad[1], ldx);
  cg_emit(o, "    for (long q = %ldL; q < %ldL; q++) d[q] = 0.0f;\n  }\n", (long)(s->pad[1] + W), (long)g.wp);
  /* the channel's taps, as broadcasts */
  for (int t = 0; t < KH * KW; t++) {
    snprintf(idx, sizeof idx, "c * %ldL + %d", (long)(KH * KW), t);
    cg_scalar_ld(o, buf, sizeof buf, wdt, "cx->A", idx);
    cg_emit(o, "  const $P_v w%d = $P_set1(%s);\n", t, buf);
  }
  /* the epilogue steps name their tensors tt->ep[i] (cg_emit_epi_common) */
  cg_emit(o, "  const struct { const void *const *ep; } tt0 = {cx->ep}, *tt = &tt0;\n  (void)tt;\n");
  cg_emit(o, "  %s *y = (%s *)cx->C + (n * %ldL + c) * %ldL;\n", yt, yt, (long)C, (long)plane);
  for (int i = 0; i < s->n_epi; i++)
    if (s->epi[i].kind == CGEN_EPI_RESIDUAL)
      cg_emit(o, "  const %s *res%d = (const %s *)cx->ep[%d] + (n * %ldL + c) * %ldL;\n", cg_ctype(s->epi[i].dtype), i,
              cg_ctype(s->epi[i].dtype), i, (long)C, (long)plane);
  cg_emit(o, "  for (long oh = 0; oh < %ldL; oh++) {\n    long ow = 0;\n", (long)g.oh);
  for (int pass = 0; pass < 2; pass++) {
    int u = pass == 0 ? 4 : 1;
    if (pass == 0) cg_emit(o, "    for (; ow + %d <= %ldL; ow += %d) {\n", u * w, (long)g.ow, u * w);
    else cg_emit(o, "    for (; ow < %ldL; ow += %d) {\n", (long)g.ow, w);
    for (int j = 0; j < u; j++) cg_emit(o, "      $P_v a%d = $P_zero();\n", j);
    for (int kh = 0; kh < KH; kh++)
      for (int kw = 0; kw < KW; kw++) {
        cg_emit(o, "      { const float *r = xp + (oh * %ldL + %ld) * %ldL + ow * %ldL + %ld;\n", (long)s->stride[0],
                (long)(kh * s->dil[0]), (long)g.wp, (long)s->stride[1], (long)(kw * s->dil[1]));
        char wt[16];
        snprintf(wt, sizeof wt, "w%d", (int)(kh * KW + kw));
        emit_tap(o, s, u, wt);
        cg_emit(o, "      }\n");
      }
    for (int j = 0; j < u; j++) {
      char x[8];
      snprintf(x, sizeof x, "a%d", j);
      if (pass == 1) cg_emit(o, "      { int nj = %ldL - ow < %d ? (int)(%ldL - ow) : %d;\n", (long)g.ow, w, (long)g.ow, w);
      else cg_emit(o, "      { int nj = %d; (void)nj;\n", w);
      cg_emit(o, "        long at = oh * %ldL + ow + %d;\n", (long)g.ow, j * w);
      for (int i = 0; i < s->n_epi; i++) {
        const cgen_epi *ep = &s->epi[i];
        if (ep->kind == CGEN_EPI_RESIDUAL) {
          const char *sx = cg_vsuffix(ep->dtype);
          cg_emit(o, "        %s = %s %s (nj == %d ? $P_ld%s(res%d + at) : $P_ldn%s(res%d + at, nj));\n", x, x,
                  ep->mul ? "*" : "+", w, sx, i, sx, i);
        } else {
          cg_emit_epi_common(o, ep, i, "c", x);
        }
      }
      cg_emit(o, "        if (nj == %d) $P_st%s(y + at, %s); else $P_stn%s(y + at, %s, nj);\n      }\n", w, ys, x, ys, x);
    }
    cg_emit(o, "    }\n");
  }
  cg_emit(o, "  }\n}\n");
  if (s->prepack_w) {
    char ldw[200];
    cg_scalar_ld(o, ldw, sizeof ldw, s->w_dtype, "A", "i");
    cg_emit(o, "static $T long $P_pack_a_bytes_run(void) { return %ldL; }\n", (long)(C * KH * KW * 4));
    cg_emit(o, "static $T int $P_pack_a_run(hprt_pool *pool, const void *A, void *Ap) {\n  (void)pool;\n");
    cg_emit(o, "  for (long i = 0; i < %ldL; i++) ((float *)Ap)[i] = %s;\n  return 0;\n}\n", (long)(C * KH * KW), ldw);
  }
  cg_emit(o, "static $T int $P_run(hprt_pool *pool, const void *A, const void *B, void *C, const void *const *ep) {\n");
  cg_emit(o, "  $F_ctx cx;\n  cx.A = A; cx.B = B; cx.C = C; cx.ep = ep;\n");
  cg_emit(o, "  if (hprt_scratch_get(pool, 0, %ldUL, &cx.sc)) return -1;\n", (long)(g.hp * g.wp * 4));
  cg_emit(o, "  hprt_pool_run(pool, %ld, $P_task, &cx);\n", (long)(s->n * C));
  cg_emit(o, "  hprt_scratch_put(&cx.sc);\n  return 0;\n}\n");
  if (o->isa->id != CGEN_ISA_SCALAR) cg_emit(o, "#endif /* HPRT_X86 */\n");
}

hp_status cg_dwconv(hp_error *e, const cgen_conv_spec *s, const char *fn, hp_str *out) {
  for (int i = 0; i < s->n_epi; i++)
    if (s->epi[i].kind == CGEN_EPI_BIAS_N)
      return hp_fail(e, HP_E_UNSUPPORTED, NULL, "cgen_conv: bias along N (spatial) is not a conv epilogue");
  if ((s->h + s->pad[0] + s->pad[2]) * (s->w + s->pad[1] + s->pad[3] + 64) > (1L << 26))
    return hp_fail(e, HP_E_LIMIT, NULL, "cgen_conv: depthwise plane beyond 256 MiB of scratch");
  if (s->kh * s->kw > 121) /* every tap is unrolled code and a register broadcast */
    return hp_fail(e, HP_E_LIMIT, NULL, "cgen_conv: depthwise window beyond 11x11 taps");
  unsigned set = cg_isa_set(&s->tune);
  cg_out o = {.s = out, .F = fn};
  cg_set_isa(&o, NULL);
  cg_emit_runtime(out);
  cg_emit(&o, "/* ---- %s: depthwise conv n%ld c%ld %ldx%ld, %ldx%ld window, %s*%s->%s ---- */\n", fn, (long)s->n,
          (long)s->c, (long)s->h, (long)s->w, (long)s->kh, (long)s->kw, tiny_dtype_name(s->x_dtype),
          tiny_dtype_name(s->w_dtype), tiny_dtype_name(s->y_dtype));
  cg_emit_scalar_conv(&o);
  cg_emit(&o, "typedef struct { const void *A, *B; void *C; const void *const *ep; hprt_scratch sc; } $F_ctx;\n");
  for (int i = 0; i < CGEN_ISA_COUNT; i++) {
    if (!(set >> i & 1u)) continue;
    cg_set_isa(&o, cg_isa_get((cgen_isa)i));
    emit_variant(&o, s);
  }
  cg_emit_dispatch(&o, set, s->tune.force_isa, "hprt_pool *pool, const void *A, const void *B, void *C, const void *const *ep",
                   "pool, A, B, C, ep");
  if (s->prepack_w) {
    cg_emit_entry(&o, set, "long", "_pack_a_bytes", "void", "");
    cg_emit_entry(&o, set, "int", "_pack_a", "hprt_pool *pool, const void *A, void *Ap", "pool, A, Ap");
  }
  if (out->oom) return hp_fail(e, HP_E_NO_MEMORY, NULL, "cgen: out of memory");
  return HP_OK;
}
