/* contract_resfma_c.c — a contraction whose epilogue has the exact QDQ Add
 * step (CT_EPI_RESFMA: onnxruntime's QLinearAdd as two fused multiply-adds
 * in its order, src/region/resfma.c): no fp32 template applies that step,
 * so the kernel is the int8 kernel (contract_q8.c, whose output pass
 * applies it, taken whether it pays or not).  Where the int8 kernel
 * declines at run time (model_init found a weight no int8 or a bias no
 * int32, a NaN in an input that is not held bytes; or the template call of
 * a held buffer's fallback, <fn>_q8fb), the fallback is the fp32 template
 * with its epilogue cut before that step, into an fp32 scratch laid out
 * like the output, then <fn>_q8tail (contract_q8.c): that step and the
 * ones after it, per output row, the same fmaf.  Only where the template
 * refuses the shape, the region's generic loop nest (which costs ~1 s of
 * code generation a kernel: isl).  Without an int8 kernel the region
 * declines here and runs the loop nest alone (the region former forms
 * such a region only where the int8 kernels may run:
 * rg_options.exact_add_steps).  The knob int8_decline makes the int8
 * kernel decline at once (tests/py/test_onnx_qdq_fma.py reaches the
 * fallback that way).
 * Needs: contract_c_int.h, contract_q8.c, cgen.h's templates, the loop
 * nest (region_c.h).
 * Gives: cc_emit_resfma. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "contract_c_int.h"

/* Packed form 0, which the int8 kernel's form 1 comes after (emit_model.c
 * packs forms 0..n-1): none here, the fallback reads the weight as stored. */
static void no_form0(ut_str *out, const char *fn) {
  ut_str_printf(out, "static long %s_wbytes(void) { return 64; }\n", fn);
  ut_str_printf(out, "static int %s_wpack(hprt_pool *pool, const void *w, void *wp) {\n"
                     "  (void)pool, (void)w, (void)wp;\n  return 0;\n}\n", fn);
}

/* The index of the first exact QDQ Add step of epi[0..n). */
static int resfma_at(const ct_epi *epi, int n) {
  int i = 0;
  while (i < n && epi[i].kind != CT_EPI_RESFMA) i++;
  return i;
}

/* The fp32 conv template kfn for conv cv with its epilogue cut to the
 * steps before `cut`, its output fp32 (the weight read as stored, the
 * built-in tuning); *ny its output's elements, the call's arguments (W, X)
 * into args.  False when the template refuses it. */
static bool fb_conv(rc_ctx *c, const char *kfn, ut_str *out, const ct_conv *cv, int cut, int64_t *ny, char *args, size_t cap) {
  cgen_conv_spec s;
  cgen_conv_spec_init(&s, cv->n, cv->c, cv->h, cv->w, cv->oc, cv->kh, cv->kw, TINY_FP32);
  s.x_dtype = cv->X.dtype, s.w_dtype = cv->W.dtype, s.y_dtype = TINY_FP32;
  s.groups = cv->groups;
  memcpy(s.stride, cv->stride, sizeof s.stride);
  memcpy(s.dil, cv->dil, sizeof s.dil);
  memcpy(s.pad, cv->pad, sizeof s.pad);
  s.n_epi = cut;
  int64_t oh, ow;
  if (!cc_epi_to_cgen(cv->epi, cut, s.epi) || !cgen_conv_out_hw(&s, &oh, &ow)) return false;
  cgen_tuning_default(&s.tune);
  cc_jit_variant(c, &s.tune, cc_host_isa_mask());
  harp_error e = {0};
  if (cgen_conv(&e, &s, kfn, out)) return false;
  *ny = cv->n * cv->oc * oh * ow;
  snprintf(args, cap, "bufs[%d], bufs[%d]", cv->W.slot, cv->X.slot);
  return true;
}

/* The same for GEMM g (C dense: the int8 kernel took it). */
static bool fb_gemm(rc_ctx *c, const char *kfn, ut_str *out, const ct_gemm *g, int cut, int64_t *ny, char *args, size_t cap) {
  cgen_gemm_spec s;
  cgen_gemm_spec_init(&s, g->M, g->N, g->K, TINY_FP32);
  s.a_dtype = g->A.dtype, s.b_dtype = g->B.dtype, s.c_dtype = TINY_FP32;
  s.a_sm = g->a_sm, s.a_sk = g->a_sk, s.b_sk = g->b_sk, s.b_sn = g->b_sn, s.c_sm = g->c_sm, s.c_sn = g->c_sn;
  for (int i = 0; i < 2; i++) {
    s.batch[i] = g->batch[i];
    s.a_sb[i] = g->a_sb[i], s.b_sb[i] = g->b_sb[i], s.c_sb[i] = g->c_sb[i];
  }
  s.n_epi = cut;
  if (g->nrep || g->a_round != TINY_FP32 || !cc_epi_to_cgen(g->epi, cut, s.epi)) return false;
  cgen_tuning_default(&s.tune);
  cc_jit_variant(c, &s.tune, cc_host_isa_mask());
  harp_error e = {0};
  if (cgen_gemm(&e, &s, kfn, out)) return false;
  *ny = g->batch[0] * g->batch[1] * g->M * g->N;
  snprintf(args, cap, "(const char *)bufs[%d] + %" PRId64 " * %d, (const char *)bufs[%d] + %" PRId64 " * %d", g->A.slot,
           g->A.offset, tiny_dtype_size(g->A.dtype), g->B.slot, g->B.offset, tiny_dtype_size(g->B.dtype));
  return true;
}

/* The fallback of kernel r (conv cv, else GEMM g; fn its wrapper) after
 * its int8 kernel's call: the template up to the exact QDQ Add step into
 * a scratch, then <fn>_q8tail; the template's body into `tmpl`, the
 * wrapper's lines into `call`.  False when the template refuses it. */
static bool fb_template(rc_ctx *c, const char *fn, ut_str *tmpl, ut_str *call, const ct_conv *cv, const ct_gemm *g) {
  char kfn[160], args[200];
  snprintf(kfn, sizeof kfn, "%s_%s", fn, cv ? "conv" : "gemm");
  const ct_epi *epi = cv ? cv->epi : g->epi;
  int cut = resfma_at(epi, cv ? cv->nepi : g->nepi);
  int64_t ny = 0;
  if (cv ? !fb_conv(c, kfn, tmpl, cv, cut, &ny, args, sizeof args) : !fb_gemm(c, kfn, tmpl, g, cut, &ny, args, sizeof args))
    return false;
  ut_str_printf(call, "  /* the int8 kernel declined: the template up to the exact QDQ Add step, then its pass (the same fmaf) */\n"
                      "  float *v = (float *)malloc(%" PRId64 "UL * 4);\n  if (!v) return 2;\n", ny);
  cc_ep_array(call, epi, cut);
  ut_str_printf(call, "  int rc = %s(pool, %s, v, ep) ? 2 : %s_q8tail(pool, bufs, v);\n  free(v);\n  return rc;\n}\n\n", kfn, args, fn);
  return true;
}

harp_status cc_emit_resfma(rc_ctx *c, int r, const char *fn, ut_str *out, const ct_conv *cv, const ct_gemm *g, bool *handled,
                           const char **why, rc_packed *pk) {
  ut_str q8;
  ut_str_init(&q8);
  rc_packed p = {0};
  bool ok;
  int wslot;
  if (cv) {
    wslot = cv->W.slot;
    ok = cc_emit_q8conv(c, r, fn, &q8, cv, cc_packs_once(c, r, wslot), &p);
  } else { /* a 1x1 conv in NCHW (the weight A), else x W (the weight B) */
    wslot = g->A.slot;
    ok = cc_emit_q8gemm(c, r, fn, &q8, g, cc_packs_once(c, r, wslot), false, &p);
    if (!ok) wslot = g->B.slot, ok = cc_emit_q8gemm(c, r, fn, &q8, g, false, cc_packs_once(c, r, wslot), &p);
  }
  if (!ok) {
    ut_str_free(&q8);
    *handled = false;
    *why = "an exact QDQ Add step (CT_EPI_RESFMA): no template applies it, and the int8 kernel does not take the region";
    return HARP_OK;
  }
  ut_str tmpl, call;
  ut_str_init(&tmpl);
  ut_str_init(&call);
  harp_status st = HARP_OK;
  if (!fb_template(c, fn, &tmpl, &call, cv, g)) { /* the loop nest, the same fmaf */
    char ln[160];
    snprintf(ln, sizeof ln, "%s_ln", fn);
    long chunk = 0;
    ut_str_free(&call);
    ut_str_init(&call);
    st = rc_emit_loops(c, r, ln, "the int8 kernel's fallback (an exact QDQ Add step)", &tmpl, &chunk);
    ut_str_printf(&call, "  return %s(pool, bufs); /* the int8 kernel declined: the loop nest, the same fmaf */\n}\n\n", ln);
  }
  if (!st) {
    ut_str_puts(out, tmpl.buf);
    ut_str_puts(out, q8.buf);
    no_form0(out, fn);
    *pk = p;
    pk->slot[0] = wslot;
    ut_str_printf(out, "static int %s(hprt_pool *pool, void *const *bufs) {\n", fn);
    cc_q8_call(out, fn);
    ut_str_puts(out, call.buf);
    *handled = true;
  }
  if (tmpl.oom || call.oom) out->oom = true;
  ut_str_free(&q8);
  ut_str_free(&tmpl);
  ut_str_free(&call);
  return st;
}
