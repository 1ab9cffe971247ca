/* cgen_wino_rt.c — a ShapeSet object's 3x3 conv that chooses its kernel per
 * binding: the base kernel or Winograd, every one reading its sizes at run time.
 * Needs: cgen_wino_int.h (cg_wino_rt_variant), cgen_int.h (cg_rt_base_fn).
 * Gives: cg_conv_rt_multi (the AVX-512 or AVX2 variant of such a conv), and
 * cgen_conv_rt_multi_ok (which specs it takes).
 *
 * An object compiled once for a box of image sizes serves small images and
 * large ones; the specialised objects run the direct kernel (AVX-512) or
 * the implicit GEMM (AVX2) on the first and Winograd on the second (the
 * cost model's plan_cpu_winograd_speedup: Winograd pays from ~784 output
 * pixels an image, 28x28).  So the variant holds several kernels under one
 * prefix each (o->P with a suffix), the AVX-512 one
 *   _d    the direct kernel (cgen_dconv.c, sizes at run time);
 *   _w4r  Winograd F(4x4,3x3), rows of tiles (loads and permutes);
 *   _w4g  Winograd F(4x4,3x3), any tiles (gathers and scatters);
 *   _w2r  Winograd F(2x2,3x3), rows of tiles;
 * the AVX2 one (whose specialised Winograd always gathers: cgen_wino_avx2.c)
 *   _g    the implicit GEMM (cgen_gemm_rt.c, sizes at run time);
 *   _w4   Winograd F(4x4,3x3), any tiles (gathers, stores lane by lane);
 *   _w2   Winograd F(2x2,3x3), the same;
 * and $P_run computes the binding's output size and picks one by the rules
 * the specialised compile applies to that size (one emitter for both,
 * emit_choose): Winograd from s->wino_min_px output pixels (a weight
 * transformed every call: by the tile the cost model counts for the
 * binding's columns, s->wino_min_px_f2 for F(2x2)), its tile by
 * cgen_conv_wino_tile's rule, on AVX-512 rows of tiles from 14 tiles a row
 * (wn_plan's rule), F(2x2) where that rule would gather (fewer than 8
 * outputs a side) direct.  With a weight packed at model_init the packed
 * buffer holds the base kernel's packing, then F(4x4)'s transformed filter
 * (both AVX-512 F(4x4) kernels read the same layout), then F(2x2)'s, each
 * at a 64-byte boundary.
 */
#include <stdio.h>
#include <string.h>

#include "backend/c/cgen_wino_int.h"

bool cgen_conv_rt_multi_ok(const cgen_conv_spec *s) {
  const char *why;
  if (s->wino_min_px <= 0 || !(s->n_expr || s->h_expr || s->w_expr)) return false;
  if (s->x_dtype != TINY_FP32 || s->w_dtype != TINY_FP32 || s->y_dtype != TINY_FP32) return false;
  for (int i = 0; i < s->n_epi; i++)
    if (s->epi[i].kind == CGEN_EPI_RESIDUAL && s->epi[i].dtype != TINY_FP32) return false;
  return cg_wino_applies(s, &why) && cg_dconv_rt_ok(s, &why);
}

/* o->P := prefix p0 then suffix (p0 is at most sizeof o->P - 8 long). */
static void set_prefix(cg_out *o, const char *p0, const char *suffix) {
  size_t n = strlen(p0);
  memcpy(o->P, p0, n);
  snprintf(o->P + n, sizeof o->P - n, "%s", suffix);
}

/* The kernels of one ISA's variant (suffixes of its prefix): the base
 * kernel, and Winograd F(4x4) / F(2x2) in rows of tiles (r) or any tiles
 * (g); two names alike are one kernel, NULL none (that case runs the base). */
typedef struct rt_kernels {
  const char *base, *what, *w4r, *w4g, *w2r, *w2g;
} rt_kernels;
/* AVX-512: rows of tiles from 14 a row; F(2x2) that would gather runs direct */
static const rt_kernels K512 = {"_d", "the direct one", "_w4r", "_w4g", "_w2r", NULL};
/* AVX2: Winograd gathers at every size (cg_wn.rows is AVX-512's) */
static const rt_kernels K256 = {"_g", "the implicit GEMM", "_w4", "_w4", "_w2", "_w2"};

/* "return" the call of kernel r (rows of tiles at m-wide tiles, the
 * condition on ow_) or g with args: one call where both are one kernel. */
static void emit_pick(cg_out *o, const char *ind, int m, const char *r, const char *g, const char *args) {
  if (!strcmp(r, g)) cg_emit(o, "%sreturn $P%s_run(%s);\n", ind, r, args);
  else cg_emit(o, "%sreturn (ow_ + %d) / %d >= 14 ? $P%s_run(%s) : $P%s_run(%s);\n", ind, m - 1, m, r, args, g, args);
}

/* $P_run's choice for output size (oh_, ow_) of this run (stride 1) among
 * kernels k: the rule the specialised compile applies to that size (the
 * cost model's threshold, cgen_conv_wino_tile's tile, wn_plan's rows). */
static void emit_choose(cg_out *o, const cgen_conv_spec *s, const rt_kernels *k, const char *args4, const char *args2) {
  char nx[24], hx[24], wx[24];
  snprintf(nx, sizeof nx, "%ldL", (long)s->n), snprintf(hx, sizeof hx, "%ldL", (long)s->h), snprintf(wx, sizeof wx, "%ldL", (long)s->w);
  cg_emit(o, "  long oh_ = (%s) + %ldL, ow_ = (%s) + %ldL;\n", s->h_expr ? s->h_expr : hx, (long)(s->pad[0] + s->pad[2] - 2),
          s->w_expr ? s->w_expr : wx, (long)(s->pad[1] + s->pad[3] - 2));
  if (s->wino_min_px_f2 > 0) /* a filter transformed every call: its cost by the tile's points (the cost model's rule) */
    cg_emit(o, "  if (oh_ * ow_ >= (ow_ < 8 || (ow_ >= 27 && ow_ <= 52) ? %ldL : %ldL)) { /* Winograd pays at this size, "
               "its filter transformed per call (the cost model's thresholds, F(2x2)'s and F(4x4)'s) */\n",
            (long)s->wino_min_px_f2, (long)s->wino_min_px);
  else cg_emit(o, "  if (oh_ * ow_ >= %ldL) { /* Winograd pays at this size (the cost model's threshold) */\n", (long)s->wino_min_px);
  cg_emit(o, "    int m_ = oh_ < 8 || ow_ < 8 ? 2 : (ow_ + 3) / 4 < 14 && (ow_ + 1) / 2 >= 14 ? 2 : 4;\n");
  emit_pick(o, "    if (m_ == 4) ", 4, k->w4r, k->w4g, args4);
  if (!k->w2g) cg_emit(o, "    if ((ow_ + 1) / 2 >= 14) return $P%s_run(%s);\n", k->w2r, args2);
  else emit_pick(o, "    ", 2, k->w2r, k->w2g, args2);
  cg_emit(o, "  }\n");
}

/* The Winograd kernels of k under prefix p0, each name once; an error when
 * the two F(4x4) kernels block the output channels differently (they read
 * one packed filter). */
static harp_status emit_winos(harp_error *e, cg_out *o, const cgen_conv_spec *s, const rt_kernels *k, const char *p0) {
  const char *nm[4] = {k->w4r, k->w4g, k->w2r, k->w2g};
  int mr[4] = {0, 0, 0, 0};
  for (int i = 0; i < 4; i++) {
    bool dup = !nm[i];
    for (int j = 0; j < i && !dup; j++) dup = nm[j] && !strcmp(nm[j], nm[i]);
    if (dup) continue;
    set_prefix(o, p0, nm[i]), cg_wino_rt_variant(o, s, i < 2 ? 4 : 2, i % 2 == 0, &mr[i]);
  }
  if (mr[0] && mr[1] && mr[0] != mr[1])
    return ut_fail(e, HARP_E_INTERNAL, NULL, "cgen_conv: F(4x4) kernels with different filter layouts");
  return HARP_OK;
}

harp_status cg_conv_rt_multi(harp_error *e, cg_out *o, const cgen_conv_spec *s, cg_rt_base_fn base, const void *arg) {
  char p0[sizeof o->P];
  if (strlen(o->P) + 8 > sizeof p0) return ut_fail(e, HARP_E_LIMIT, NULL, "cgen_conv: kernel name too long");
  memcpy(p0, o->P, sizeof p0);
  const rt_kernels *k = o->isa->id == CGEN_ISA_AVX512 ? &K512 : &K256;
  set_prefix(o, p0, k->base);
  harp_status st = base(e, o, arg);
  if (!st) st = emit_winos(e, o, s, k, p0);
  set_prefix(o, p0, "");
  if (st) return st;
  cg_emit(o, "#ifdef HPRT_X86\n/* the kernel of each binding: %s or Winograd (cgen_wino_rt.c) */\n", k->what);
  if (s->prepack_w) {
    cg_emit(o, "static $T long $P_wofs(int k) { /* 1: F(4x4)'s filter, 2: F(2x2)'s, 3: the end */\n");
    cg_emit(o, "  long at = ($P%s_pack_a_bytes_run() + 63) / 64 * 64;\n  if (k == 1) return at;\n", k->base);
    cg_emit(o, "  at += ($P%s_pack_a_bytes_run() + 63) / 64 * 64;\n  if (k == 2) return at;\n", k->w4r);
    cg_emit(o, "  return at + ($P%s_pack_a_bytes_run() + 63) / 64 * 64;\n}\n", k->w2r);
    cg_emit(o, "static $T long $P_pack_a_bytes_run(void) { return $P_wofs(3); }\n");
    cg_emit(o, "static $T int $P_pack_a_run(hprt_pool *pool, const void *A, void *Ap) {\n");
    cg_emit(o, "  char *p = (char *)Ap;\n  if ($P%s_pack_a_run(pool, A, p) || $P%s_pack_a_run(pool, A, p + $P_wofs(1))) return -1;\n",
            k->base, k->w4r);
    cg_emit(o, "  return $P%s_pack_a_run(pool, A, p + $P_wofs(2));\n}\n", k->w2r);
  }
  cg_emit(o, "static $T int $P_run(hprt_pool *pool, const void *A, const void *B, void *C, const void *const *ep) {\n");
  if (s->prepack_w)
    emit_choose(o, s, k, "pool, (const char *)A + $P_wofs(1), B, C, ep", "pool, (const char *)A + $P_wofs(2), B, C, ep");
  else emit_choose(o, s, k, "pool, A, B, C, ep", "pool, A, B, C, ep");
  cg_emit(o, "  return $P%s_run(pool, A, B, C, ep);\n}\n#endif /* HPRT_X86 */\n", k->base);
  return HARP_OK;
}
