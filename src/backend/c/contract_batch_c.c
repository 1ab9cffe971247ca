/* contract_batch_c.c — a ShapeSet object's batched GEMM whose rows (M) are
 * read at run time: the template runs one batch at a time with M at run
 * time (cgen_gemm's m_expr path, one batch only), and the caller's loop
 * over the batches moves A, B, C and the epilogue tensors by their batch
 * strides, each stride an expression of the shape symbols where it spans
 * one (an attention's Q K^T: C [B][H][M][N], a batch stride M N).  A stride
 * or a count that no expression reads stays a constant; a constant that
 * differs between the box's corners makes the object compile per binding
 * (sgen.c compares the corners' code), never a wrong result.
 * Needs: region_c.h (rc_size_expr, rc_stride_expr, rc_size_hi,
 * rc_slot_shape), kernel/contract.h (ct_gemm).
 * Gives: cc_gemm_batch_rows, cc_emit_gemm_batch_call (contract_c_int.h). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "contract_c_int.h"

/* A stride `stride` of a tensor of shape sh (of c) as C text into buf: 0,
 * its expression of the symbols where its innermost dims span one
 * (rc_stride_expr), else the constant. */
static void stride_text(const rc_ctx *c, const tiny_shape *sh, int64_t stride, char *buf, size_t cap) {
  if (!rc_stride_expr(c, sh, stride, buf, cap)) snprintf(buf, cap, "%" PRId64 "L", stride);
}

bool cc_gemm_batch_rows(const rc_ctx *c, int r, ct_gemm *gm, bool swapped, cc_gemm_batch *bx) {
  memset(bx, 0, sizeof *bx);
  if (swapped || !c->ngen_syms || (gm->batch[0] == 1 && gm->batch[1] == 1) || gm->c_sn != 1 || gm->c_sm != gm->N ||
      gm->nrep || gm->nepi > CT_MAX_EPI)
    return false;
  const tiny_shape *cs = rc_slot_shape(c, r, gm->C.slot);
  if (!cs || cs->rank < 2 || cs->d[cs->rank - 1].n != gm->N) return false;
  int d0 = cs->rank - 2; /* the fewest dims before N whose product is M: one batch's rows */
  int64_t p = cs->d[d0].n;
  while (p < gm->M && d0 > 0) p *= cs->d[--d0].n;
  if (!rc_size_expr(c, cs, d0, cs->rank - 1, gm->M, bx->m, sizeof bx->m)) return false;
  int64_t hi = rc_size_hi(c, cs, d0, cs->rank - 1);
  if (hi < gm->M) return false;
  const tiny_shape *as = rc_slot_shape(c, r, gm->A.slot), *bs = rc_slot_shape(c, r, gm->B.slot);
  bx->b_shared = gm->b_sb[0] == 0 && gm->b_sb[1] == 0;
  for (int i = 0; i < 2; i++) {
    bx->n[i] = gm->batch[i];
    stride_text(c, as, gm->a_sb[i], bx->a[i], sizeof bx->a[i]);
    stride_text(c, bs, gm->b_sb[i], bx->b[i], sizeof bx->b[i]);
    stride_text(c, cs, gm->c_sb[i], bx->c[i], sizeof bx->c[i]);
    gm->a_sb[i] = gm->b_sb[i] = gm->c_sb[i] = 0;
  }
  for (int k = 0; k < gm->nepi; k++) {
    ct_epi *ep = &gm->epi[k];
    const tiny_shape *es = ep->slot >= 0 ? rc_slot_shape(c, r, ep->slot) : NULL;
    stride_text(c, es, ep->s_b0, bx->e[k][0], sizeof bx->e[k][0]);
    stride_text(c, es, ep->s_b1, bx->e[k][1], sizeof bx->e[k][1]);
    ep->s_b0 = ep->s_b1 = 0;
  }
  gm->batch[0] = gm->batch[1] = 1;
  gm->M = hi;
  return true;
}

void cc_emit_gemm_batch_call(ut_str *out, const cc_gemm_batch *bx, const ct_gemm *gm, const char *kfn, const char *a,
                             const char *b) {
  ut_str_printf(out, "  int rc = 0;\n  for (long b0 = 0; b0 < %" PRId64 "L && !rc; b0++)\n"
                     "    for (long b1 = 0; b1 < %" PRId64 "L && !rc; b1++) {\n", bx->n[0], bx->n[1]);
  ut_str_puts(out, "      const void *epb[] = {");
  for (int k = 0; k < gm->nepi; k++) {
    if (gm->epi[k].slot < 0) ut_str_puts(out, "NULL, ");
    else ut_str_printf(out, "(const char *)ep[%d] + (b0 * %s + b1 * %s) * %d, ", k, bx->e[k][0], bx->e[k][1],
                       tiny_dtype_size(gm->epi[k].dtype));
  }
  ut_str_puts(out, "NULL};\n");
  ut_str_printf(out, "      rc = %s(pool, (const char *)(%s) + (b0 * %s + b1 * %s) * %d, (const char *)(%s) + (b0 * %s + b1 * %s) * %d,\n"
                     "          (char *)bufs[%d] + (b0 * %s + b1 * %s) * %d, epb) ? 2 : 0;\n    }\n",
                kfn, a, bx->a[0], bx->a[1], tiny_dtype_size(gm->A.dtype), b, bx->b[0], bx->b[1], tiny_dtype_size(gm->B.dtype), gm->C.slot,
                bx->c[0], bx->c[1], tiny_dtype_size(gm->C.dtype));
}
