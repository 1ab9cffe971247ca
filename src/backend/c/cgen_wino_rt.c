/* cgen_wino_rt.c — a ShapeSet object's 3x3 conv that chooses its kernel per
 * binding: the direct kernel or Winograd, every one reading its sizes at run time.
 * Needs: cgen_wino_int.h (cg_wino_rt_variant), cgen_int.h (cg_dconv_variant).
 * Gives: cg_conv_rt_multi (the AVX-512 variant of such a conv), and
 * cgen_conv_rt_multi_ok (which specs it takes).
 *
 * An object compiled once for a box of image sizes serves small images and
 * large ones; the specialised objects run the direct kernel on the first
 * and Winograd on the second (the cost model's plan_cpu_winograd_speedup:
 * Winograd pays from ~784 output pixels an image, 28x28).  So the AVX-512
 * variant holds four kernels under one prefix each (o->P with a suffix):
 *   _d    the direct kernel (cgen_dconv.c, sizes at run time);
 *   _w4r  Winograd F(4x4,3x3), rows of tiles (loads and permutes);
 *   _w4g  Winograd F(4x4,3x3), any tiles (gathers and scatters);
 *   _w2r  Winograd F(2x2,3x3), rows of tiles;
 * and $P_run computes the binding's output size and picks one by the rules
 * the specialised compile applies to that size: Winograd from
 * s->wino_min_px output pixels, its tile by cgen_conv_wino_tile's rule,
 * rows of tiles from 14 tiles a row (wn_plan's rule); F(2x2) where that
 * rule would gather (fewer than 8 outputs a side) runs direct.  With a
 * weight packed at model_init the packed buffer holds the direct kernel's
 * packing, then F(4x4)'s transformed filter (both F(4x4) kernels read the
 * same layout), then F(2x2)'s, each at a 64-byte boundary.
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

/* $P_run's choice for output size (oh_, ow_) of this run (stride 1). */
static void emit_choose(cg_out *o, const cgen_conv_spec *s, const char *args4, const char *args2) {
  char nx[24], hx[24], wx[24];
  snprintf(nx, sizeof nx, "%ldL", (long)s->n), snprintf(hx, sizeof hx, "%ldL", (long)s->h), snprintf(wx, sizeof wx, "%ldL", (long)s->w);
  cg_emit(o, "  long oh_ = (%s) + %ldL, ow_ = (%s) + %ldL;\n", s->h_expr ? s->h_expr : hx, (long)(s->pad[0] + s->pad[2] - 2),
          s->w_expr ? s->w_expr : wx, (long)(s->pad[1] + s->pad[3] - 2));
  cg_emit(o, "  if (oh_ * ow_ >= %ldL) { /* Winograd pays at this size (the cost model's threshold) */\n", (long)s->wino_min_px);
  cg_emit(o, "    int m_ = oh_ < 8 || ow_ < 8 ? 2 : (ow_ + 3) / 4 < 14 && (ow_ + 1) / 2 >= 14 ? 2 : 4;\n");
  cg_emit(o, "    if (m_ == 4) return (ow_ + 3) / 4 >= 14 ? $P_w4r_run(%s) : $P_w4g_run(%s);\n", args4, args4);
  cg_emit(o, "    if ((ow_ + 1) / 2 >= 14) return $P_w2r_run(%s);\n  }\n", args2);
}

harp_status cg_conv_rt_multi(harp_error *e, cg_out *o, const cgen_conv_spec *s) {
  char p0[sizeof o->P];
  if (strlen(o->P) + 8 > sizeof p0) return ut_fail(e, HARP_E_LIMIT, NULL, "cgen_conv: kernel name too long");
  memcpy(p0, o->P, sizeof p0);
  int mr4 = 0, mr4g = 0, mr2 = 0;
  set_prefix(o, p0, "_d");
  harp_status st = cg_dconv_variant(e, o, s, false);
  if (!st) {
    set_prefix(o, p0, "_w4r"), cg_wino_rt_variant(o, s, 4, true, &mr4);
    set_prefix(o, p0, "_w4g"), cg_wino_rt_variant(o, s, 4, false, &mr4g);
    set_prefix(o, p0, "_w2r"), cg_wino_rt_variant(o, s, 2, true, &mr2);
  }
  set_prefix(o, p0, "");
  if (st) return st;
  if (mr4 != mr4g) return ut_fail(e, HARP_E_INTERNAL, NULL, "cgen_conv: F(4x4) kernels with different filter layouts");
  cg_emit(o, "#ifdef HPRT_X86\n/* the kernel of each binding: the direct one or Winograd (cgen_wino_rt.c) */\n");
  if (s->prepack_w) {
    cg_emit(o, "static $T long $P_wofs(int k) { /* 1: F(4x4)'s filter, 2: F(2x2)'s, 3: the end */\n");
    cg_emit(o, "  long at = ($P_d_pack_a_bytes_run() + 63) / 64 * 64;\n  if (k == 1) return at;\n");
    cg_emit(o, "  at += ($P_w4r_pack_a_bytes_run() + 63) / 64 * 64;\n  if (k == 2) return at;\n");
    cg_emit(o, "  return at + ($P_w2r_pack_a_bytes_run() + 63) / 64 * 64;\n}\n");
    cg_emit(o, "static $T long $P_pack_a_bytes_run(void) { return $P_wofs(3); }\n");
    cg_emit(o, "static $T int $P_pack_a_run(hprt_pool *pool, const void *A, void *Ap) {\n");
    cg_emit(o, "  char *p = (char *)Ap;\n  if ($P_d_pack_a_run(pool, A, p) || $P_w4r_pack_a_run(pool, A, p + $P_wofs(1))) return -1;\n");
    cg_emit(o, "  return $P_w2r_pack_a_run(pool, A, p + $P_wofs(2));\n}\n");
  }
  cg_emit(o, "static $T int $P_run(hprt_pool *pool, const void *A, const void *B, void *C, const void *const *ep) {\n");
  if (s->prepack_w)
    emit_choose(o, s, "pool, (const char *)A + $P_wofs(1), B, C, ep", "pool, (const char *)A + $P_wofs(2), B, C, ep");
  else emit_choose(o, s, "pool, A, B, C, ep", "pool, A, B, C, ep");
  cg_emit(o, "  return $P_d_run(pool, A, B, C, ep);\n}\n#endif /* HPRT_X86 */\n");
  return HARP_OK;
}
