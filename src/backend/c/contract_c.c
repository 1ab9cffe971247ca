/* contract_c.c — contraction and attention regions on the kernel templates
 * of cgen.h (BLIS-style GEMM, implicit-GEMM conv, streaming-softmax
 * attention).
 * Needs: a region formed by rg_form (rg_info), its Poly-View, the Function;
 * the target-independent reading of src/backend/contract.c.
 * Gives: cc_emit_template.
 *
 * contract.c decides whether a region fits a template (strided operands,
 * folded dimensions, an epilogue of template steps) and says what the kernel
 * reads; this file fills the cgen specs from that and writes the call.  A
 * region that does not fit returns *handled = false and gets the generic
 * loop nest of region_c.c, which computes the same values. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/contract.h"
#include "cgen.h"
#include "contract_c.h"

/* Declining a template: say why (it lands in a comment of the generated C). */
#define DECLINE(msg)    \
  do {                  \
    *why = (msg);       \
    return HP_OK;       \
  } while (0)

/* The template steps of the shared reading as the C templates' epilogue. */
static void epi_to_cgen(const ct_epi *in, int n, cgen_epi *out) {
  static const cgen_epi_kind kinds[] = {
      [CT_EPI_BIAS_M] = CGEN_EPI_BIAS_M, [CT_EPI_BIAS_N] = CGEN_EPI_BIAS_N,     [CT_EPI_RELU] = CGEN_EPI_RELU,
      [CT_EPI_GELU] = CGEN_EPI_GELU,     [CT_EPI_SILU] = CGEN_EPI_SILU,         [CT_EPI_SIGMOID] = CGEN_EPI_SIGMOID,
      [CT_EPI_SCALE] = CGEN_EPI_SCALE,   [CT_EPI_RESIDUAL] = CGEN_EPI_RESIDUAL, [CT_EPI_ROUND] = CGEN_EPI_ROUND};
  memset(out, 0, sizeof(cgen_epi) * CGEN_MAX_EPI);
  for (int i = 0; i < n; i++)
    out[i] = (cgen_epi){kinds[in[i].kind], in[i].dtype, in[i].scale, in[i].s_b0, in[i].s_b1, in[i].s_m, in[i].s_n};
}

/* The one variant this machine runs best (the JIT compiles where it runs). */
static unsigned host_isa_mask(void) {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("fma"))
    return 1u << CGEN_ISA_AVX512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c"))
    return 1u << CGEN_ISA_AVX2;
  return 1u << CGEN_ISA_SCALAR;
}

static void ep_array(hp_str *o, const ct_epi *epi, int n) {
  hp_str_puts(o, "  const void *ep[] = {");
  for (int i = 0; i < n; i++) {
    if (epi[i].slot < 0) hp_str_puts(o, "NULL, ");
    else hp_str_printf(o, "(const void *)((const char *)bufs[%d] + %" PRId64 " * %d), ", epi[i].slot, epi[i].off,
                       tiny_dtype_size(epi[i].dtype));
  }
  hp_str_puts(o, "NULL};\n");
}

/* The copy into the scratch `ap` (nested loops, the destination's innermost
 * dimension innermost), in the tensor's storage type. */
static void emit_repack(hp_str *o, const ct_tensor *A0, const int64_t *vsize, const int64_t *src_stride, int n) {
  const char *t = A0->dtype == TINY_FP32 ? "float" : "uint16_t";
  int64_t total = 1;
  for (int i = 0; i < n; i++) total *= vsize[i];
  hp_str_printf(o, "  %s *ap = aligned_alloc(64, %" PRId64 "UL);\n  if (!ap) return 2;\n", t,
                (total * tiny_dtype_size(A0->dtype) + 63) / 64 * 64);
  hp_str_printf(o, "  { const %s *src = (const %s *)bufs[%d] + %" PRId64 ";\n    long at = 0;\n", t, t, A0->slot,
                A0->offset);
  for (int i = 0; i < n; i++)
    hp_str_printf(o, "    %*sfor (long i%d = 0; i%d < %" PRId64 "L; i%d++)\n", 2 * i, "", i, i, vsize[i], i);
  hp_str_printf(o, "    %*sap[at++] = src[", 2 * n, "");
  for (int i = 0; i < n; i++) hp_str_printf(o, "%si%d * %" PRId64 "L", i ? " + " : "", i, src_stride[i]);
  hp_str_puts(o, "];\n  }\n");
}

/* ---- GEMM ---------------------------------------------------------------------- */
static hp_status try_gemm(rc_ctx *c, int r, const char *fn, hp_str *out, bool *handled, const char **why) {
  ct_src src = {c->g, c->pv, c->f, false};
  ct_gemm gm;
  if (!ct_read_gemm(&src, r, &gm, why)) return HP_OK;
  cgen_gemm_spec s;
  cgen_gemm_spec_init(&s, gm.M, gm.N, gm.K, TINY_FP32);
  s.a_dtype = gm.A.dtype;
  s.b_dtype = gm.B.dtype;
  s.c_dtype = gm.C.dtype;
  s.a_sm = gm.a_sm, s.a_sk = gm.a_sk;
  s.b_sk = gm.b_sk, s.b_sn = gm.b_sn;
  s.c_sm = gm.c_sm, s.c_sn = gm.c_sn;
  for (int i = 0; i < 2; i++) {
    s.batch[i] = gm.batch[i];
    s.a_sb[i] = gm.a_sb[i];
    s.b_sb[i] = gm.b_sb[i];
    s.c_sb[i] = gm.c_sb[i];
  }
  s.n_epi = gm.nepi;
  epi_to_cgen(gm.epi, gm.nepi, s.epi);
  if (c->host_only) s.tune.isa_mask = host_isa_mask();
  char kfn[128];
  snprintf(kfn, sizeof kfn, "%s_gemm", fn);
  hp_error e3 = {0};
  hp_str body;
  hp_str_init(&body);
  if (cgen_gemm(&e3, &s, kfn, &body) != HP_OK) { /* a shape the template refuses: generic code */
    hp_str_free(&body);
    DECLINE("the template refused the shape");
  }
  hp_str_puts(out, body.buf);
  hp_str_free(&body);
  hp_str_printf(out, "static int %s(hprt_pool *pool, void *const *bufs) {\n", fn);
  ep_array(out, gm.epi, gm.nepi);
  if (gm.nrep) {
    emit_repack(out, &gm.A0, gm.rep_size, gm.rep_src, gm.nrep);
    hp_str_printf(out,
                  "  int rc = %s(pool, ap, (const char *)bufs[%d] + %" PRId64 " * %d, bufs[%d], ep) ? 2 : 0;\n"
                  "  free(ap);\n  return rc;\n}\n\n",
                  kfn, gm.B.slot, gm.B.offset, tiny_dtype_size(gm.B.dtype), gm.C.slot);
  } else {
    hp_str_printf(out,
                  "  return %s(pool, (const char *)bufs[%d] + %" PRId64 " * %d, (const char *)bufs[%d] + %" PRId64
                  " * %d, bufs[%d], ep) ? 2 : 0;\n}\n\n",
                  kfn, gm.A.slot, gm.A.offset, tiny_dtype_size(gm.A.dtype), gm.B.slot, gm.B.offset,
                  tiny_dtype_size(gm.B.dtype), gm.C.slot);
  }
  *handled = true;
  return HP_OK;
}

/* ---- conv ------------------------------------------------------------------------ */
static hp_status try_conv(rc_ctx *c, int r, const char *fn, hp_str *out, bool *handled, const char **why) {
  ct_src src = {c->g, c->pv, c->f, false};
  ct_conv cv;
  if (!ct_read_conv(&src, r, &cv, why)) return HP_OK;
  cgen_conv_spec s;
  cgen_conv_spec_init(&s, cv.n, cv.c, cv.h, cv.w, cv.oc, cv.kh, cv.kw, TINY_FP32);
  s.x_dtype = cv.X.dtype;
  s.w_dtype = cv.W.dtype;
  s.y_dtype = cv.Y.dtype;
  s.groups = 1;
  memcpy(s.stride, cv.stride, sizeof s.stride);
  memcpy(s.dil, cv.dil, sizeof s.dil);
  memcpy(s.pad, cv.pad, sizeof s.pad);
  s.n_epi = cv.nepi;
  epi_to_cgen(cv.epi, cv.nepi, s.epi);
  if (c->host_only) s.tune.isa_mask = host_isa_mask();
  char kfn[128];
  snprintf(kfn, sizeof kfn, "%s_conv", fn);
  hp_error e2 = {0};
  hp_str body;
  hp_str_init(&body);
  if (cgen_conv(&e2, &s, kfn, &body) != HP_OK) {
    hp_str_free(&body);
    DECLINE("the template refused the shape");
  }
  hp_str_puts(out, body.buf);
  hp_str_free(&body);
  hp_str_printf(out, "static int %s(hprt_pool *pool, void *const *bufs) {\n", fn);
  ep_array(out, cv.epi, cv.nepi);
  hp_str_printf(out, "  return %s(pool, bufs[%d], bufs[%d], bufs[%d], ep) ? 2 : 0;\n}\n\n", kfn, cv.W.slot, cv.X.slot,
                cv.Y.slot);
  *handled = true;
  return HP_OK;
}

/* ---- attention --------------------------------------------------------------------- */
static hp_status try_attention(rc_ctx *c, int r, const char *fn, hp_str *out, bool *handled, const char **why) {
  ct_src src = {c->g, c->pv, c->f, false};
  ct_attn at;
  if (!ct_read_attn(&src, r, &at, why)) return HP_OK;
  cgen_attn_spec s;
  cgen_attn_spec_init(&s, at.B, at.H, at.M, at.N, at.D, TINY_FP32);
  s.dv = at.DV;
  s.q_dtype = at.q.dtype;
  s.kv_dtype = at.k.dtype;
  s.o_dtype = at.out.dtype;
  s.scale = at.scale;
  s.strided = true;
  memcpy(s.q_s, at.q_s, sizeof at.q_s), memcpy(s.k_s, at.k_s, sizeof at.k_s);
  memcpy(s.v_s, at.v_s, sizeof at.v_s), memcpy(s.o_s, at.o_s, sizeof at.o_s);
  s.causal = at.causal;
  if (at.has_mask) {
    s.has_mask = true;
    s.mask_dtype = at.mask.dtype;
    memcpy(s.mask_s, at.mask_s, sizeof s.mask_s);
  }
  if (c->host_only) s.tune.isa_mask = host_isa_mask();
  char kfn[128];
  snprintf(kfn, sizeof kfn, "%s_attn", fn);
  hp_error e2 = {0};
  hp_str body;
  hp_str_init(&body);
  if (cgen_attn(&e2, &s, kfn, &body) != HP_OK) {
    hp_str_free(&body);
    DECLINE("the template refused the shape");
  }
  hp_str_puts(out, body.buf);
  hp_str_free(&body);
  hp_str_printf(out, "static int %s(hprt_pool *pool, void *const *bufs) {\n", fn);
  if (at.has_mask)
    hp_str_printf(out, "  const void *mask = (const char *)bufs[%d] + %" PRId64 " * %d;\n", at.mask.slot, at.mask.offset,
                  tiny_dtype_size(s.mask_dtype));
  else
    hp_str_puts(out, "  const void *mask = NULL;\n");
  hp_str_printf(out,
                "  return %s(pool, (const char *)bufs[%d] + %" PRId64 " * %d, (const char *)bufs[%d] + %" PRId64
                " * %d,\n           (const char *)bufs[%d] + %" PRId64 " * %d, mask, bufs[%d]) ? 2 : 0;\n}\n\n",
                kfn, at.q.slot, at.q.offset, tiny_dtype_size(at.q.dtype), at.k.slot, at.k.offset,
                tiny_dtype_size(at.k.dtype), at.v.slot, at.v.offset, tiny_dtype_size(at.v.dtype), at.out.slot);
  *handled = true;
  return HP_OK;
}

hp_status cc_emit_template(rc_ctx *c, int r, const char *fn, hp_str *out, bool *handled, const char **why) {
  *handled = false;
  *why = NULL;
  ct_src src = {c->g, c->pv, c->f, false};
  switch (ct_kind(&src, r)) {
  case 'a': return try_attention(c, r, fn, out, handled, why);
  case 'c': return try_conv(c, r, fn, out, handled, why);
  case 'g': return try_gemm(c, r, fn, out, handled, why);
  default: return HP_OK;
  }
}
