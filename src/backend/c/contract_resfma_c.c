/* contract_resfma_c.c — a contraction whose epilogue has the exact QDQ Add
 * step (CT_EPI_RESFMA: onnxruntime's QLinearAdd as two fused multiply-adds
 * in its order, src/region/resfma.c): no fp32 template applies that step,
 * so the kernel is the int8 kernel (contract_q8.c, whose output pass
 * applies it, taken whether it pays or not).  Where the int8 kernel
 * declines at run time (model_init found a weight no int8 or a bias no
 * int32: weights are params bound at model_init, so this is no fact of
 * the compile; a NaN in an input that is not held bytes; or the template
 * call of a held buffer's fallback, <fn>_q8fb), the fallback is
 * <fn>_q8slow (contract_q8.c): the sums in plain fp32 loops shared by the
 * unit, then the whole epilogue per output row as the output pass applies
 * it, the same fmaf (it was the region's loop nest: ~1 s of isl code
 * generation a kernel).  Without an int8 kernel the region declines here
 * and runs the loop nest alone (the region former forms such a region
 * only where the int8 kernels may run: rg_options.exact_add_steps).  The
 * knob int8_decline makes the int8 kernel decline at once
 * (tests/py/test_onnx_qdq_fma.py reaches the fallback that way).
 * Needs: contract_c_int.h, contract_q8.c.
 * Gives: cc_emit_resfma. */
#include <stdio.h>

#include "contract_c_int.h"

/* Packed form 0, which the int8 kernel's form 1 comes after (emit_model.c
 * packs forms 0..n-1): none here, the fallback reads the weight as stored. */
static void no_form0(ut_str *out, const char *fn) {
  ut_str_printf(out, "static long %s_wbytes(void) { return 64; }\n", fn);
  ut_str_printf(out, "static int %s_wpack(hprt_pool *pool, const void *w, void *wp) {\n"
                     "  (void)pool, (void)w, (void)wp;\n  return 0;\n}\n", fn);
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
    ok = cc_emit_q8conv(c, r, fn, &q8, cv, cc_packs_once(c, r, wslot), NULL, &p);
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
  ut_str_puts(out, q8.buf);
  ut_str_free(&q8);
  no_form0(out, fn);
  *pk = p;
  pk->slot[0] = wslot;
  ut_str_printf(out, "static int %s(hprt_pool *pool, void *const *bufs) {\n", fn);
  cc_q8_call(out, fn);
  ut_str_printf(out, "  return %s_q8slow(pool, bufs); /* the int8 kernel declined: fp32 sums, the same epilogue */\n}\n\n", fn);
  *handled = true;
  return HARP_OK;
}
