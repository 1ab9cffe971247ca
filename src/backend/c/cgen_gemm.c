/* cgen_gemm.c — GEMM and implicit-GEMM convolution kernel generator: the
 * driver.  A GEMM spec (here) or a conv spec (cgen_conv.c) becomes the
 * contraction cg_mm; its checks, then per ISA the variant: the template's
 * (cgen_gemm_variant.c, which describes the emitted code), its bf16 view
 * of a conv, the skinny GEMM (cgen_skinny.c), the direct, Winograd and
 * pixel-lane convs (cgen_dconv.c, cgen_wino.c, cgen_dconv_px.c), the AMX
 * variant (cgen_amx.c); then the CPUID dispatch and the entries.
 * Needs: cgen_int.h (templating, runtime, dispatch), cgen_gemm_int.h,
 * cgen_gemm_variant.c, split-K's view (cgen_splitk.c).
 * Gives: cgen_gemm, cgen_gemm_splitk_ok, cgen_gemm_skinny_bf16_ok, cg_mm_gen.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "backend/c/cgen_int.h"

#include "backend/c/cgen_gemm_int.h"

/* Conv p seen by its bf16 variant: input channels in pairs (2c, 2c + 1) per
 * 32-bit word, the odd last one paired with 0; the input interleaved so
 * (cg_emit_bf16_ilv), the weight too (cg_emit_bf16_wpairs), K the pairs
 * times the window.  The fp32 packers then move words. */
static cg_mm bf16_pairs(const cg_mm *p) {
  cg_mm q = *p;
  int64_t icg2 = (p->cv_icg + 1) / 2;
  q.pairs = true;
  q.bf_adt = p->adt, q.bf_bdt = p->bdt, q.bf_c = p->cv_c, q.bf_icg = p->cv_icg;
  q.adt = q.bdt = TINY_FP32;
  q.K = icg2 * p->cv_kh * p->cv_kw;
  q.cv_icg = icg2, q.cv_c = p->nb[1] * icg2;
  q.a_sb[1] = p->M * q.K, q.a_sm = q.K;
  return q;
}

/* Pair view q of a strided 1x1 conv without padding (cg_bf16_sub_ok):
 * its interleave writes only the pixels the window reads (oh x ow words a
 * plane, cg_emit_bf16_ilv_sub), so the conv becomes one of stride 1 over
 * them, whose B panel is rows of those planes (the plain packer), not a
 * gather over planes four times the size; q unchanged otherwise. */
static cg_mm bf16_sub(cg_mm q) {
  cg_bf16_sub g = {q.cv_h, q.cv_w, q.cv_sh, q.cv_sw, q.N / q.cv_ow, q.cv_ow};
  if (q.rt || !q.pairs || q.N % q.cv_ow || !cg_bf16_sub_ok(&g, q.cv_kh, q.cv_kw, q.cv_pt, q.cv_pl)) return q;
  q.sub = g;
  q.cv_h = g.oh, q.cv_w = g.ow, q.cv_sh = q.cv_sw = 1;
  return q;
}

static harp_status check_epi(harp_error *e, const cg_mm *p) {
  if (p->n_epi < 0 || p->n_epi > CGEN_MAX_EPI) return ut_fail(e, HARP_E_LIMIT, NULL, "cgen: too many epilogue steps");
  for (int i = 0; i < p->n_epi; i++) {
    const cgen_epi *ep = &p->epi[i];
    if ((unsigned)ep->kind >= CGEN_EPI_COUNT) return ut_fail(e, HARP_E_INVALID_ARG, NULL, "cgen: bad epilogue kind");
    bool tensor = ep->kind == CGEN_EPI_BIAS_M || ep->kind == CGEN_EPI_BIAS_N || ep->kind == CGEN_EPI_RESIDUAL;
    if (tensor && !cg_dtype_ok(ep->dtype))
      return ut_fail(e, HARP_E_UNSUPPORTED, NULL, "cgen: epilogue %d dtype %s", i, tiny_dtype_name(ep->dtype));
    if (ep->kind == CGEN_EPI_ROUND && ep->dtype != TINY_FP16 && ep->dtype != TINY_BF16)
      return ut_fail(e, HARP_E_UNSUPPORTED, NULL, "cgen: epilogue %d rounds to %s (fp16 or bf16 only)", i,
                     tiny_dtype_name(ep->dtype));
    if ((ep->kind == CGEN_EPI_CLAMP || ep->kind == CGEN_EPI_GATE) && (isnan(ep->lo) || isnan(ep->hi)))
      return ut_fail(e, HARP_E_INVALID_ARG, NULL, "cgen: a clamp bound is NaN");
    if ((ep->kind == CGEN_EPI_SCALE || ep->kind == CGEN_EPI_GATE) && (!isfinite(ep->scale) || !isfinite(ep->shift)))
      return ut_fail(e, HARP_E_INVALID_ARG, NULL, "cgen: epilogue scale is not finite");
    if (ep->kind == CGEN_EPI_RESIDUAL && (ep->s_b0 < 0 || ep->s_b1 < 0 || ep->s_m < 0 || ep->s_n < 0))
      return ut_fail(e, HARP_E_NEGATIVE_STRIDE, NULL, "cgen: residual stride < 0");
  }
  return HARP_OK;
}

/* Does contraction p (variants `set`) get an AMX variant: tune.amx with
 * bf16 multiplication, an AVX-512 variant that is this template's (not the
 * direct / Winograd conv's, not the skinny GEMM's), M a constant, a size
 * where AMX pays (cg_amx_pays)? */
static bool amx_applies(const cg_mm *p, unsigned set) {
  if (!p->tune.amx || !p->tune.bf16 || !(set >> CGEN_ISA_AVX512 & 1u) || p->m_expr || p->n_expr || p->k_expr || p->direct || p->wino)
    return false;
  /* a conv's depth as the pair view packs it: an odd channel count padded (conv_amx_stem) */
  int64_t K = p->conv ? (p->cv_icg + 1) / 2 * 2 * p->cv_kh * p->cv_kw : p->K;
  if (!cg_amx_pays(p->M, p->N, K)) return false;
  return p->conv || (!cg_skinny_ok(p, cg_isa_get(CGEN_ISA_AVX512)) && !cg_skinny_bf16_ok(p));
}

/* The AMX variant of p into o (cgen_amx.c): the template's bf16 view with
 * 32x32 micro-tiles; the selector tries it first (o->has_amx). */
static harp_status emit_amx(harp_error *e, cg_out *o, const cg_mm *p) {
  cg_emit_amx_runtime(o);
  cg_set_amx(o);
  cg_mm q = p->conv ? bf16_pairs(p) : *p;
  q.amx = true;
  bool inplace = cg_amx_conv_inplace(&q); /* a stride-1 conv: B tiles from the padded planes (cgen_amx_conv.c) */
  cg_mm qg = q;
  if (inplace) qg.N = cg_amx_conv_grid(&q), qg.prepack_b = true; /* split its padded-width grid; B not packed */
  cg_tile tq;
  if (cg_mm_resolve_tile(e, &qg, o->isa, true, &tq)) return e->code;
  cg_emit(o, "#ifdef HPRT_AMX /* a compiler without AMX: the selector never picks it */\n");
  if (inplace) cg_emit_amx_conv_variant(o, &q, &tq);
  else cg_mm_emit_variant(o, &q, &tq);
  cg_emit(o, "#endif /* HPRT_AMX */\n");
  return HARP_OK;
}

/* cg_conv_rt_multi's base kernels: the direct conv of spec arg (AVX-512),
 * the implicit GEMM of the rt_gemm arg (AVX2). */
static harp_status base_direct(harp_error *e, cg_out *o, const void *arg) {
  return cg_dconv_variant(e, o, (const cgen_conv_spec *)arg, false);
}
typedef struct rt_gemm {
  const cg_mm *p;
  const cg_tile *t;
} rt_gemm;
static harp_status base_gemm(harp_error *e, cg_out *o, const void *arg) {
  const rt_gemm *g = (const rt_gemm *)arg;
  (void)e;
  cg_mm_emit_variant(o, g->p, g->t);
  return HARP_OK;
}

/* The kernel of contraction p as function fn appended to out: p checked,
 * the variants of its ISA set, the dispatch and the packing entries. */
harp_status cg_mm_gen(harp_error *e, const cg_mm *p, const char *fn, ut_str *out) {
  if (cg_check_name(e, fn)) return e->code;
  if (p->M < 1 || p->N < 1 || p->K < 1 || p->nb[0] < 1 || p->nb[1] < 1)
    return ut_fail(e, HARP_E_INVALID_ARG, NULL, "cgen: sizes must be >= 1");
  if (p->M > (1L << 31) || p->N > (1L << 31) || p->K > (1L << 31) || p->nb[0] * p->nb[1] > (1L << 30))
    return ut_fail(e, HARP_E_LIMIT, NULL, "cgen: sizes beyond 2^31");
  if (!cg_dtype_ok(p->adt) || !cg_dtype_ok(p->bdt) || !cg_dtype_ok(p->cdt))
    return ut_fail(e, HARP_E_UNSUPPORTED, NULL, "cgen: dtypes must be fp32, fp16 or bf16");
  const int64_t st[] = {p->a_sb[0], p->a_sb[1], p->a_sm, p->a_sk, p->b_sb[0], p->b_sb[1], p->b_sk, p->b_sn,
                        p->c_sb[0], p->c_sb[1], p->c_sm, p->c_sn};
  for (int i = 0; i < UT_ARRAY_LEN(st); i++)
    if (st[i] < 0) return ut_fail(e, HARP_E_NEGATIVE_STRIDE, NULL, "cgen: negative stride");
  if (check_epi(e, p)) return e->code;
  if (p->prepack_b && (p->prepack_a || p->conv || (p->nb[0] > 1 && p->b_sb[0]) || (p->nb[1] > 1 && p->b_sb[1])))
    return ut_fail(e, HARP_E_INVALID_ARG, NULL, "cgen: prepack_b needs a B shared by every batch, and not prepack_a");
  unsigned set = cg_isa_set(&p->tune);
  int primary = CGEN_ISA_SCALAR;
  for (int i = 0; i < CGEN_ISA_COUNT; i++)
    if (set >> i & 1u) primary = i;
  /* split-K is the skinny kernel's (cgen_skinny.c); a scalar fallback runs unsplit */
  if (p->tune.splitk > 1 && !p->conv && !cg_skinny_splitk_ok(p))
    return ut_fail(e, HARP_E_UNSUPPORTED, NULL,
                   "cgen: split-K runs in the skinny kernel only (M <= %d rows, a vector ISA, B and C unit-stride,"
                   " no prepacked operand, not a conv)", CGEN_SKINNY_MAX_M);
  if (p->tune.splitk < 0 || p->tune.splitk > 64)
    return ut_fail(e, HARP_E_INVALID_ARG, NULL, "cgen: splitk %d (0..64)", p->tune.splitk);
  cg_mm sk; /* a conv split along K: the implicit GEMM's variants run on its slices' view */
  const cg_mm *pv = p;
  if (p->conv && p->tune.splitk > 1) cg_splitk_view(p, &sk), pv = &sk;
  cg_tile tiles[CGEN_ISA_COUNT];
  for (int i = 0; i < CGEN_ISA_COUNT; i++) {
    if (!(set >> i & 1u)) continue;
    if (cg_mm_resolve_tile(e, pv, cg_isa_get((cgen_isa)i), i == primary, &tiles[i])) return e->code;
    const cg_tile *t = &tiles[i];
    if (t->nba[0] * t->nba[1] * p->K * t->mp > (1L << 29))
      return ut_fail(e, HARP_E_LIMIT, NULL, "cgen: packed A would exceed 2 GiB");
  }
  cg_out o = {.s = out, .F = fn, .bf16 = p->tune.bf16 && (set >> CGEN_ISA_AVX512 & 1u),
              .bf16_cvt = p->tune.bf16_cvt && p->cdt == TINY_BF16 && (set >> CGEN_ISA_AVX512 & 1u)};
  cg_set_isa(&o, NULL);
  cg_emit_runtime(out);
  cg_emit(&o, "/* ---- %s: %s %ldx%ldx%ld x batch %ldx%ld, %s*%s->%s ---- */\n", fn, p->conv ? "conv" : "gemm",
          (long)p->M, (long)p->N, (long)p->K, (long)p->nb[0], (long)p->nb[1], tiny_dtype_name(p->adt),
          tiny_dtype_name(p->bdt), tiny_dtype_name(p->cdt));
  cg_emit_scalar_conv(&o);
  cg_emit(&o, "typedef struct { const void *A, *B, *X; void *C; const void *const *ep; hprt_scratch sc; float *Ap; long K, kc, lda, nkb%s; } "
             "$F_ctx;\n", p->m_expr ? ", M, tm, sm, ppg, sn, tn, pr" : p->b0_expr ? ", nb0, tm, sm, tn, sn"
                                 : p->rt ? ", nb0, h, w, oh, ow, N, tn, sn" : "");
  /* pd: the AMX kernels' pending tile (cgen_amx.c's $P_pend) */
  cg_emit(&o, "typedef struct { char *c; const void *ep[%d]; float *ws; long wm0, wn0;%s } $F_tt;\n", CGEN_MAX_EPI,
          amx_applies(p, set) ? " void *pd;" : p->rt ? " long ldc;" : "");
  const char *pxwhy;
  for (int i = 0; i < CGEN_ISA_COUNT; i++) {
    if (!(set >> i & 1u)) continue;
    cg_set_isa(&o, cg_isa_get((cgen_isa)i));
    if (p->wino && (i == CGEN_ISA_AVX512 || i == CGEN_ISA_AVX2)) {
      if (cg_wino_variant(e, &o, p->cs)) return e->code;
    } else if (p->direct && i == CGEN_ISA_AVX512 && p->tune.bf16 && cg_dconv_px_ok(p->cs, &pxwhy)) {
      if (cg_dconv_px_variant(e, &o, p->cs)) return e->code;
    } else if (p->direct && i == CGEN_ISA_AVX512 && cgen_conv_rt_multi_ok(p->cs)) { /* direct or Winograd per binding */
      if (cg_conv_rt_multi(e, &o, p->cs, base_direct, p->cs)) return e->code;
    } else if (p->rt && p->cs && pv == p && i == CGEN_ISA_AVX2 && cgen_conv_rt_multi_ok(p->cs)) { /* implicit GEMM or Winograd */
      const rt_gemm g = {p, &tiles[i]};
      if (cg_conv_rt_multi(e, &o, p->cs, base_gemm, &g)) return e->code;
    } else if (p->direct && i == CGEN_ISA_AVX512) {
      if (cg_dconv_variant(e, &o, p->cs, p->tune.bf16)) return e->code;
    } else if (p->conv && cg_mm_use_bf16(p, &o)) {
      cg_mm q = bf16_sub(bf16_pairs(p));
      cg_tile tq;
      if (cg_mm_resolve_tile(e, &q, o.isa, i == primary, &tq)) return e->code;
      cg_mm_emit_variant(&o, &q, &tq);
    } else if (i == CGEN_ISA_AVX512 && cg_skinny_bf16_ok(p)) { /* skinny over a bf16 copy of B */
      cg_emit_skinny_bf16_variant(&o, p);
    } else if (!p->m_expr && !p->b0_expr && !p->n_expr && !p->k_expr && cg_skinny_ok(p, cg_isa_get((cgen_isa)i))) { /* skinny: sizes constant */
      cg_emit_skinny_variant(&o, p);
    } else {
      cg_mm_emit_variant(&o, pv, &tiles[i]);
    }
  }
  if (amx_applies(p, set) && emit_amx(e, &o, p)) return e->code;
  cg_emit_dispatch(&o, set, p->tune.force_isa, "hprt_pool *pool, const void *A, const void *B, void *C, const void *const *ep",
                   "pool, A, B, C, ep");
  if (p->prepack_a) {
    cg_emit_entry(&o, set, "long", "_pack_a_bytes", "void", "");
    cg_emit_entry(&o, set, "int", "_pack_a", "hprt_pool *pool, const void *A, void *Ap", "pool, A, Ap");
  }
  if (p->prepack_b) {
    cg_emit_entry(&o, set, "long", "_pack_b_bytes", "void", "");
    cg_emit_entry(&o, set, "int", "_pack_b", "hprt_pool *pool, const void *B, void *Bp", "pool, B, Bp");
  }
  if (out->oom) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "cgen: out of memory");
  return HARP_OK;
}

/* The contraction of GEMM spec s (no checks). */
static void mm_of_gemm(const cgen_gemm_spec *s, cg_mm *pp) {
  cg_mm p;
  memset(&p, 0, sizeof p);
  p.nb[0] = s->batch[0], p.nb[1] = s->batch[1];
  p.M = s->M, p.N = s->N, p.K = s->K;
  p.adt = s->a_dtype, p.bdt = s->b_dtype, p.cdt = s->c_dtype;
  memcpy(p.a_sb, s->a_sb, sizeof p.a_sb), p.a_sm = s->a_sm, p.a_sk = s->a_sk;
  memcpy(p.b_sb, s->b_sb, sizeof p.b_sb), p.b_sk = s->b_sk, p.b_sn = s->b_sn;
  memcpy(p.c_sb, s->c_sb, sizeof p.c_sb), p.c_sm = s->c_sm, p.c_sn = s->c_sn;
  p.n_epi = s->n_epi;
  if (p.n_epi > 0 && p.n_epi <= CGEN_MAX_EPI) memcpy(p.epi, s->epi, sizeof(cgen_epi) * (size_t)p.n_epi);
  p.tune = s->tune;
  /* bf16 storage: vdpbf16ps multiplies the stored values exactly */
  if (p.tune.bf16_native && p.adt == TINY_BF16 && p.bdt == TINY_BF16) p.tune.bf16 = true;
  p.prepack_a = s->prepack_a;
  p.prepack_b = s->prepack_b;
  p.m_expr = s->m_expr;
  p.m_small = s->m_expr ? s->m_small : 0;
  p.b0_expr = s->b0_expr;
  p.n_expr = s->n_expr;
  p.rt = s->n_expr != NULL;
  p.k_expr = s->k_expr;
  *pp = p;
}

bool cgen_gemm_skinny_bf16_ok(const cgen_gemm_spec *s) {
  cg_mm p;
  mm_of_gemm(s, &p);
  return cg_skinny_bf16_ok(&p);
}

bool cgen_gemm_splitk_ok(const cgen_gemm_spec *s) {
  cg_mm p;
  mm_of_gemm(s, &p);
  return cg_skinny_splitk_ok(&p);
}

harp_status cgen_gemm(harp_error *e, const cgen_gemm_spec *s, const char *fn, ut_str *out) {
  if (!s || !out) return ut_fail(e, HARP_E_INVALID_ARG, NULL, "cgen_gemm: NULL argument");
  cg_mm p;
  mm_of_gemm(s, &p);
  /* M at run time: the plain fp32/fp16 GEMM of one batch only; refused
   * otherwise (M is the upper corner's: a constant M would be wrong below) */
  if (s->m_expr && (p.prepack_a || p.tune.bf16 || p.nb[0] != 1 || p.nb[1] != 1))
    return ut_fail(e, HARP_E_UNSUPPORTED, NULL, "cgen_gemm: M at run time needs one batch, no prepack_a, no bf16");
  /* the batch at run time: the plain fp32/fp16 GEMM (not with M at run
   * time; nb[0] is the upper corner's) */
  if (s->b0_expr && (s->m_expr || p.tune.bf16 || p.tune.splitk > 1))
    return ut_fail(e, HARP_E_UNSUPPORTED, NULL, "cgen_gemm: the batch at run time needs M a constant, no bf16, no split-K");
  /* N at run time: one batch, M a constant, C (and B where its columns are
   * unit-stride) with N as their row stride, so that cx->N is it */
  bool n_strides = p.c_sn == 1 && p.c_sm == p.N && (p.b_sn != 1 || p.b_sk == p.N);
  for (int i = 0; i < p.n_epi && i < CGEN_MAX_EPI; i++) /* (too many: cg_mm_gen refuses it) */
    if (p.epi[i].kind == CGEN_EPI_RESIDUAL && p.epi[i].s_n == 1 && p.epi[i].s_m != p.N) n_strides = false;
  if (s->n_expr && (s->m_expr || s->b0_expr || p.prepack_b || p.tune.bf16 || p.tune.splitk > 1 || p.nb[0] != 1 ||
                    p.nb[1] != 1 || !n_strides))
    return ut_fail(e, HARP_E_UNSUPPORTED, NULL,
                   "cgen_gemm: N at run time needs one batch, M a constant, N as C's row stride, no prepack_b, no bf16");
  /* K at run time: A dense [M][K], B [K][N] unit-stride along N, nothing packed once */
  if (s->k_expr && (s->m_expr || s->b0_expr || p.prepack_a || p.prepack_b || p.tune.bf16 || p.tune.splitk > 1 ||
                    p.nb[0] != 1 || p.nb[1] != 1 || p.a_sk != 1 || p.a_sm != p.K || p.b_sn != 1))
    return ut_fail(e, HARP_E_UNSUPPORTED, NULL,
                   "cgen_gemm: K at run time needs one batch, M a constant, A [M][K] and B [K][N] dense, nothing prepacked, no bf16");
  return cg_mm_gen(e, &p, fn, out);
}
