/* contract_conv_img.c — a ShapeSet object's conv whose batch alone is read
 * at run time (its height and width are the same at every binding of the
 * box: a classifier's N over fixed-size images) and which the run-time
 * path would run on the direct kernel: the template is printed for one
 * image with constant sizes — the kernel the specialised object runs, with
 * its edge tiles and channel blocks fitted to the plane (the run-time
 * direct kernel's, sized for any plane, cost ResNet-18's 7x7 and 14x14
 * convs 5-30% a call) — and the kernel's wrapper calls it once per image,
 * moving X, Y and a residual by one image.  The built-in tuning, not the
 * region's plan: the plan is chosen at the binding being printed, and the
 * box's two corners must print the same text (sgen.c).  Winograd (the
 * per-binding choice of cgen_wino_rt.c), the depthwise kernel and a conv
 * whose weight is not packed once at model_init keep their run-time path.
 * Needs: contract_c_int.h (cc_small_on_caller_rt), cgen.h (the spec).
 * Gives: cc_conv_one_image, cc_emit_conv_images (contract_c_int.h). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "contract_c_int.h"

/* The C type of one element of dtype t as the wrapper moves a tensor by
 * whole images: fp32 "float", fp16 / bf16 "uint16_t", else NULL. */
static const char *elem_t(tiny_dtype t) {
  return t == TINY_FP32 ? "float" : t == TINY_FP16 || t == TINY_BF16 ? "uint16_t" : NULL;
}

/* Whether every tensor of s is fp32 (the epilogue's too), or, any_dtype,
 * of a dtype elem_t moves: the per-image strides below are in elements. */
static bool dtypes_ok(const cgen_conv_spec *s, bool any_dtype) {
  if (!any_dtype) {
    if (s->x_dtype != TINY_FP32 || s->w_dtype != TINY_FP32 || s->y_dtype != TINY_FP32) return false;
    for (int i = 0; i < s->n_epi; i++)
      if ((s->epi[i].kind == CGEN_EPI_BIAS_M || s->epi[i].kind == CGEN_EPI_RESIDUAL) && s->epi[i].dtype != TINY_FP32) return false;
    return true;
  }
  if (!elem_t(s->x_dtype) || !elem_t(s->y_dtype)) return false;
  for (int i = 0; i < s->n_epi; i++)
    if (s->epi[i].kind == CGEN_EPI_RESIDUAL && !elem_t(s->epi[i].dtype)) return false;
  return true;
}

bool cc_conv_one_image(cgen_conv_spec *s, cc_conv_img *img, bool any_dtype) {
  memset(img, 0, sizeof *img);
  int64_t oh = 0, ow = 0;
  /* a weight packed by the kernel (not once by model_init) would be packed again for every image */
  if (!s->n_expr || s->h_expr || s->w_expr || s->groups != 1 || !s->prepack_w || !dtypes_ok(s, any_dtype) || !cgen_conv_out_hw(s, &oh, &ow))
    return false;
  if (s->wino_min_px > 0 && oh * ow >= s->wino_min_px) return false; /* Winograd at this plane: its run-time path */
  if (strlen(s->n_expr) >= sizeof img->n) return false;
  snprintf(img->n, sizeof img->n, "%s", s->n_expr);
  img->x_stride = s->c * s->h * s->w, img->y_stride = s->oc * oh * ow;
  img->pixels = oh * ow;
  s->n = 1, s->n_expr = NULL, s->wino_min_px = s->wino_min_px_f2 = 0;
  return true;
}

void cc_emit_conv_images(ut_str *out, const char *kfn, const cgen_conv_spec *s, const cc_conv_img *img, double per_pixel,
                         int w, int x, int y) {
  ut_str_printf(out, "  const long n_ = %s; /* this binding's images */\n", img->n);
  const char *fx[1] = {"n_"};
  const int64_t fv[1] = {1};
  cc_small_on_caller_rt(out, fx, fv, 1, per_pixel * (double)img->pixels);
  ut_str_puts(out, "  (void)ep;\n  for (long i_ = 0; i_ < n_; i_++) {\n    const void *ei_[] = {");
  for (int i = 0; i < s->n_epi; i++) /* a residual is laid out like y (ct_read_conv) */
    if (s->epi[i].kind == CGEN_EPI_RESIDUAL)
      ut_str_printf(out, "ep[%d] ? (const %s *)ep[%d] + i_ * %" PRId64 "L : NULL, ", i, elem_t(s->epi[i].dtype), i, img->y_stride);
    else ut_str_printf(out, "ep[%d], ", i);
  ut_str_puts(out, "NULL};\n");
  ut_str_printf(out,
                "    if (%s(pool, bufs[%d], (const %s *)bufs[%d] + i_ * %" PRId64 "L, (%s *)bufs[%d] + i_ * %" PRId64
                "L, ei_)) return 2;\n  }\n  return 0;\n}\n\n",
                kfn, w, elem_t(s->x_dtype), x, img->x_stride, elem_t(s->y_dtype), y, img->y_stride);
}
