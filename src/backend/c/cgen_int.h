/* cgen_int.h — shared by the cgen_*.c generators: text templating, the
 * per-ISA vector helper layer and the thread-pool runtime text. */
#ifndef HARP_CGEN_INT_H
#define HARP_CGEN_INT_H

#include "backend/c/cgen.h"

/* One code variant: a vector width and the attributes its functions carry. */
typedef struct cg_isa {
  cgen_isa id;
  const char *tag;    /* "avx512", "avx2", "scalar": part of emitted names */
  int w;              /* floats per vector */
  const char *attr;   /* attribute for non-inline functions ("" for scalar) */
  const char *iattr;  /* attribute for always-inline helpers */
  int nregs;          /* vector registers */
} cg_isa;

const cg_isa *cg_isa_get(cgen_isa id);

/* Emitter: text with "$P" (variant prefix, e.g. "f_avx512"), "$F" (function
 * prefix), "$T" (the variant's function attribute), "$I" (its inline
 * attribute) replaced, after printf formatting. */
typedef struct cg_out {
  ut_str *s;
  const char *F;
  char P[160];
  const cg_isa *isa;
  bool amx;     /* the variant being emitted is the AMX one (cg_set_amx: AVX-512 helpers, prefix $F_amx) */
  bool has_amx; /* an AMX variant was emitted: the selector tries it (4) before AVX-512 */
  bool bf16; /* the AVX-512 variant multiplies in bf16: its selector also asks for AVX512_BF16 */
  bool bf16_cvt; /* the AVX-512 variant rounds its bf16 stores with vcvtneps2bf16 (cgen_tuning.bf16_cvt):
                    compiled for AVX512_BF16, and its selector asks for it */
} cg_out;

void cg_set_isa(cg_out *o, const cg_isa *isa);
/* The AMX variant: AVX-512's vector layer and attributes, prefix $F_amx (cg_out.amx). */
void cg_set_amx(cg_out *o);
void cg_emit(cg_out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The guarded runtime (includes, hprt thread pool); safe to emit many times. */
void cg_emit_runtime(ut_str *s);
/* Scalar fp16/bf16 conversion helpers prefixed $F_. */
void cg_emit_scalar_conv(cg_out *o);
/* The vector layer of o->isa, prefixed $P_. */
void cg_emit_isa_helpers(cg_out *o);
/* CPUID selection, emitted once per kernel: static int F_sel(void). */
void cg_emit_selector(cg_out *o, unsigned isa_mask, int force_isa);
/* Entry point: ret F<suffix>(params) calling F_<tag><suffix>_run(args) as F_sel says. */
void cg_emit_entry(cg_out *o, unsigned isa_mask, const char *ret, const char *suffix, const char *params, const char *args);
/* Both, for a kernel with one entry point int F(params). */
void cg_emit_dispatch(cg_out *o, unsigned isa_mask, int force_isa, const char *params, const char *args);

/* dtype text helpers */
bool cg_dtype_ok(tiny_dtype t); /* FP32, FP16, BF16 */
const char *cg_ctype(tiny_dtype t);  /* "float" or "uint16_t" */
const char *cg_vsuffix(tiny_dtype t); /* "" / "h" / "b": $P_ld<sfx> */
/* Scalar load as float of ((const T*)(ptr))[idx], as an expression string. */
void cg_scalar_ld(cg_out *o, char *buf, int cap, tiny_dtype t, const char *ptr, const char *idx);
/* Scalar conversion of float expression to storage of t. */
void cg_scalar_cvt(cg_out *o, char *buf, int cap, tiny_dtype t, const char *expr);
/* AVX-512 only: $P_tr16(__m512 r[16]) transposes 16 rows of 16 floats in place. */
void cg_emit_tr16(cg_out *o);
/* $P_widen(vc, task, tid): a pool task that converts chunk `task` of
 * CG_WIDEN_CHUNK elements (n in all) of the fp16/bf16 tensor at `src` to
 * fp32 at `dst` (C expressions over `const ctx *cx`), with o->isa's vectors;
 * run it over (n + CG_WIDEN_CHUNK - 1) / CG_WIDEN_CHUNK tasks. */
#define CG_WIDEN_CHUNK 16384L
void cg_emit_widen(cg_out *o, const char *ctx, const char *src, const char *dst, tiny_dtype t, long n);
/* The same pool task named $P_<name>; narrow: from fp32 at `src` to t at `dst`. */
void cg_emit_cvt(cg_out *o, const char *name, const char *ctx, const char *src, const char *dst, tiny_dtype t, long n,
                 bool narrow);
/* Emit "x = <epilogue step>(x)" for the pure-activation kinds. */
void cg_emit_activation(cg_out *o, cgen_epi_kind k, float scale, float shift, const char *x);
/* Epilogue step i on the vector x when its code does not depend on the
 * template's tile: + bias[bias_idx] (BIAS_M; bias_idx is C text), a rounding,
 * an activation.  False for BIAS_N and RESIDUAL, which the template writes. */
bool cg_emit_epi_common(cg_out *o, const cgen_epi *ep, int i, const char *bias_idx, const char *x);
/* Each BIAS_M step i of epi[0..n) as a broadcast `eb<i>` of its tensor
 * (`<ep>[i]`, e.g. "tt->ep") at bias_idx, for a run of vectors that share it. */
void cg_emit_bias_regs(cg_out *o, const cgen_epi *epi, int n, const char *ep, const char *bias_idx);

/* bf16 GEMM pieces (cgen_bf16.c), AVX-512 only: functions carrying
 * CG_BF16_ATTR use vdpbf16ps.  $P_bfcv(float *d, long kc, int w) rewrites a
 * packed fp32 panel [kc][w] in place as pair rows [(kc + 1) / 2][w] of
 * {bf16(row 2p), bf16(row 2p + 1)} (round to nearest even);
 * cg_emit_bf16_kernel emits the micro-kernel $P_k<mr>_<nv> over such panels
 * (A panel tmr wide, B panel tnr wide, B prefetched pf pair rows ahead,
 * C's rows prefetched when c_sm > 0, A pf_a bytes ahead when > 0); cg_emit_bf16_pack_a emits
 * $P_packA_task over the fp32 packer's $P_packA_task0 (panel groups of
 * `span` rows, mp rows in all, mr per panel); cg_emit_bf16_pack_a_words,
 * for a bf16 A with unit stride along K, the packer's row loop that copies
 * pair words into panels w wide (no fp32 pass, no $P_bfcv). */
#define CG_BF16_ATTR "__attribute__((target(\"avx512f,avx512bw,avx512vl,avx512dq,fma,f16c,avx512bf16\")))"
/* The 16-bit lane permutation that interleaves cvtne2ps_pbh(x1, x0)'s halves
 * into pairs {x0[j], x1[j]} (lane 2j from x0, 2j + 1 from x1). */
#define CG_BF16_IX                                                                                         \
  "_mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6, 21, 5, 20, 4, 19, 3, " \
  "18, 2, 17, 1, 16, 0)"
void cg_emit_bf16_cvt(cg_out *o);
/* AMX pieces (cgen_amx.c), the GEMM template's AMX variant (cg_set_amx):
 * functions carrying CG_AMX_ATTR use the tiles; MR = NR = CG_AMX_MR.
 * cg_amx_pays: whether an M x N x K contraction pays on it;
 * cg_emit_amx_kernel emits $P_k<mr>_<nv> (cg_emit_bf16_kernel's signature)
 * over an A panel [32][kp] and a B panel [kp][32] of pair words;
 * cg_emit_amx_pack_a emits $P_packA_task: $P_packA_task1, then its panels
 * from [kp][32] to [32][kp] (groups, span, mp as cg_emit_bf16_pack_a; kc
 * the block depth, counted in pairs when `pairs`). */
#define CG_AMX_MR 32
#define CG_AMX_ATTR \
  "__attribute__((target(\"avx512f,avx512bw,avx512vl,avx512dq,fma,f16c,avx512bf16,amx-tile,amx-bf16\")))"
bool cg_amx_pays(int64_t M, int64_t N, int64_t K);
/* HPRT_AMX (the compiler knows AMX) and hprt_amx_ok() (this process may use it), once per source. */
void cg_emit_amx_runtime(cg_out *o);
void cg_emit_amx_kernel(cg_out *o, int mr, int nv, bool pairs);
/* $P_pend (the AMX kernels' pending tile, tt.pd), $P_prow, $P_pflush: before the kernels. */
void cg_emit_amx_pend(cg_out *o);
void cg_emit_amx_pack_a(cg_out *o, int64_t groups, int64_t span, int64_t mp, int kc, bool pairs);
/* $P_tcfg: loads the micro-kernels' tile configuration (once a compute task). */
void cg_emit_amx_tilecfg(cg_out *o);
void cg_emit_bf16_kernel(cg_out *o, int mr, int nv, int tmr, int tnr, int pf, long c_sm, bool pairs, int pf_a);
/* The GEMM micro-kernel's end (cgen_gemm_variant.c): the k loop closed, the mr x nv
 * accumulators c<i>_<j> stored row by row through $P_row<nv>. */
void cg_emit_kernel_rows(cg_out *o, int mr, int nv);
void cg_emit_bf16_pack_a(cg_out *o, int64_t groups, int64_t span, int64_t mp, int mr);
/* $P_packA_task<suffix>: `inner` (a packer task), then `stmt` per panel of its group (cgen_bf16.c says how). */
void cg_emit_pack_a_pass(cg_out *o, const char *suffix, const char *inner, int64_t groups, int64_t span, int64_t mp,
                         int mr, const char *stmt);
void cg_emit_bf16_pack_a_words(cg_out *o, int w);
/* A conv's bf16 view (cgen_gemm.c bf16_pairs): $P_ilv, a pool task per
 * plane interleaving the input's channel pairs into 32-bit words, and
 * $P_wpairs(W, d), the weight's (cgen_bf16.c says how). */
void cg_emit_bf16_ilv(cg_out *o, const char *ctx, tiny_dtype xdt, int64_t nplanes, int64_t icg, int64_t hw);
/* A strided 1x1 conv seen as one of stride 1 over the pixels it reads
 * (cg_bf16_sub_ok): the input's h x w planes, the stride sh x sw, the
 * output's oh x ow (sh == 0: no such view).  cg_emit_bf16_ilv_sub emits
 * $P_ilv writing only those pixels, oh x ow words a pair plane. */
typedef struct cg_bf16_sub {
  int64_t h, w, sh, sw, oh, ow;
} cg_bf16_sub;
bool cg_bf16_sub_ok(const cg_bf16_sub *g, int64_t kh, int64_t kw, int64_t pt, int64_t pl);
void cg_emit_bf16_ilv_sub(cg_out *o, const char *ctx, tiny_dtype xdt, int64_t icg, const cg_bf16_sub *g);
void cg_emit_bf16_wpairs(cg_out *o, tiny_dtype wdt, int64_t rows, int64_t icg, int64_t khw);
/* The same interleave padded for the in-place AMX conv (cgen_amx_conv.c):
 * each plane hp x wp words with the h x w image at row pt, column pl and
 * zeros around it, p16 planes a group (pairs past ceil(icg / 2) zero),
 * ps >= hp wp words apart (the words between them zero too).  A stride
 * sh x sw other than 1 x 1 splits each plane into sh sw phase planes of
 * hp x wp words (phase (a, b), a sw + b, holds the padded image's rows
 * sh y + a, columns sw x + b), ps >= sh sw hp wp apart. */
typedef struct cg_ilv_pad {
  int64_t icg, h, w, hp, wp, pt, pl, p16, ps, sh, sw;
  bool one;       /* a stride: only phase (0, 0) is read, each plane that phase alone (hp x wp) */
  int64_t xk, xd; /* xk > 1: row-expanded planes, virtual pair v = (pair v / xk, window row v % xk):
                     row yy of v's planes is the input's row yy sh + (v % xk) xd - pt, split into
                     the sw column phases only (few channels: cgen_amx_conv.c) */
} cg_ilv_pad;
void cg_emit_bf16_ilv_pad(cg_out *o, const char *ctx, tiny_dtype xdt, const cg_ilv_pad *g);
/* The direct conv's column-pair view (cg_dconv_cols, fewer than
 * CG_BF16_MIN_ICG input channels per group): $P_ilv over planes of h rows
 * of w elements (words shifted right by sh, 0 or 1; returns its tasks per
 * plane), $P_wpairs over rows of kw taps (cgen_bf16.c says how). */
#define CG_BF16_MIN_ICG 16
/* Does conv s multiply in bf16: tune.bf16, or bf16 operands with
 * tune.bf16_native (cgen_gemm.c)? */
bool cg_conv_bf16_asked(const cgen_conv_spec *s);
long cg_emit_bf16_ilv_cols(cg_out *o, const char *ctx, tiny_dtype xdt, int64_t h, int64_t w, int sh);
void cg_emit_bf16_wpairs_cols(cg_out *o, tiny_dtype wdt, int64_t rows, int64_t kw);
/* A GEMM's $P_packB writing pair rows straight from a B with unit stride
 * along N (batch strides sb0, sb1, row stride sk; panels 16 * nv wide). */
void cg_emit_bf16_pack_b_rows(cg_out *o, tiny_dtype bdt, int64_t sb0, int64_t sb1, int64_t sk, int nv);

/* Direct convolution (cgen_dconv.c): whether it applies to s and is chosen
 * (*why: the reason), and the AVX-512 variant of the kernel. */
bool cg_dconv_plan(const cgen_conv_spec *s, const char **why);
harp_status cg_dconv_variant(harp_error *e, cg_out *o, const cgen_conv_spec *s, bool bf);
cgen_conv_spec cg_dconv_pairs(const cgen_conv_spec *s);
/* Whether bf16 conv s (fewer than CG_BF16_MIN_ICG input channels per group,
 * sizes known) runs on the direct kernel over column pairs; else *why. */
bool cg_dconv_cols_ok(const cgen_conv_spec *s, const char **why);
/* The bf16 direct conv with pixels in the lanes (cgen_dconv_px.c): whether
 * it takes conv s (few output channels, not a multiple of 16; *why), and
 * its AVX-512 variant. */
bool cg_dconv_px_ok(const cgen_conv_spec *s, const char **why);
harp_status cg_dconv_px_variant(harp_error *e, cg_out *o, const cgen_conv_spec *s);
/* Whether conv s, with some of its sizes read at run time (n_expr, h_expr,
 * w_expr), runs on the direct kernel; else *why says why not. */
bool cg_dconv_rt_ok(const cgen_conv_spec *s, const char **why);

/* Winograd convolution (cgen_wino.c): whether it applies, the AVX-512
 * variant of the kernel. */
bool cg_wino_applies(const cgen_conv_spec *s, const char **why);
harp_status cg_wino_variant(harp_error *e, cg_out *o, const cgen_conv_spec *s);
/* The base kernel of a variant that cg_conv_rt_multi extends, emitted
 * under o->P from arg (the caller's). */
typedef harp_status (*cg_rt_base_fn)(harp_error *e, cg_out *o, const void *arg);
/* The AVX-512 or AVX2 (o->isa) variant of a conv cgen_conv_rt_multi_ok takes
 * (cgen_wino_rt.c): the base kernel (AVX-512: the direct one, AVX2: the
 * implicit GEMM), emitted by base(e, o, arg), and Winograd, the binding
 * choosing. */
harp_status cg_conv_rt_multi(harp_error *e, cg_out *o, const cgen_conv_spec *s, cg_rt_base_fn base, const void *arg);

/* A padded input row split into its stride phases, the scratch layout of the
 * depthwise conv and pooling kernels: padded column i*stride + f (phase f)
 * at d + f*wq + i, for an input row of w columns and `pad` columns of fill
 * before it.  cg_emit_plane_row (cgen_pool.c) emits the copy of input row
 * `xr` into `d`: per phase, the fill value fv, the input's columns, fv to
 * the end of the phase row; vector variants copy stride 1 by vectors,
 * stride 2 by vector pairs split into even and odd lanes ($P_dei2 from
 * cg_emit_dei2), the tails masked; the rest column by column.  With chk
 * the copy ORs into `nm` whether it saw a NaN ($P_unord).  `parts` picks
 * the fill (CG_ROW_FILL), the input's columns (CG_ROW_DATA) or both: the
 * input's columns are the same ones in every plane, so a kernel that keeps
 * its scratch over several planes fills once. */
typedef struct cg_plane_row {
  tiny_dtype x_dtype;
  int64_t w, pad, stride, wq;
} cg_plane_row;
enum { CG_ROW_FILL = 1, CG_ROW_DATA = 2, CG_ROW_ALL = 3 };
void cg_emit_plane_row(cg_out *o, const cg_plane_row *r, const char *fv, bool chk, int parts);
void cg_emit_dei2(cg_out *o);
/* Sizes read at run time (cgen_pool.c), shared with the depthwise conv.  A
 * block emitter: `rows` output rows from C variable oh by u vectors from
 * ow, the last vector's `last` lanes (-1: the C variable lastc).
 * cg_emit_plane_rt emits the output plane of a run of oh_ x ow_ (C
 * variables): blocks of rows x vecs vectors while they fit, the rest of a
 * row and of the plane behind switches.  cg_emit_pair_consts_rt and
 * cg_emit_unit_consts_rt emit the bounds every row of a stride-2 / stride-1
 * plane copy shares (the C variables w, the input's width, and wq, a phase
 * row, in scope; pl the left pad), as the pool's copy uses them. */
typedef void (*cg_block_fn)(cg_out *o, const void *k, int rows, int u, int last);
/* The window kernel's (pool, depthwise conv) sizes of this run into its
 * context cx (fields h, w, oh, ow, hp, wq, rs) and the C variable n: the
 * batch, height and width from their expressions (NULL: the constant, the
 * upper corner's), return -1 outside 1..upper or where the window does not
 * fit, the output size, hp (the C text hp, of cx.oh / cx.h) and the phase
 * rows of the plane as the kernel's geometry makes them. */
typedef struct cg_rt_window {
  const char *n_expr, *h_expr, *w_expr;
  int64_t n, h, w, kh, kw;
  const int64_t *stride, *pad, *dil;
} cg_rt_window;
void cg_emit_rt_window(cg_out *o, const cg_rt_window *k, const char *hp);
/* Its first part alone (cgen_pool.c): `long n`, cx.h and cx.w read and
 * checked, cx.oh and cx.ow (the implicit-GEMM conv's, cgen_gemm_rt.c). */
void cg_emit_rt_out_hw(cg_out *o, const cg_rt_window *k);
/* A block's tap (kh, kw) of the phase-split plane xp: cg_emit_tap_row opens
 * "{ const float *r = " the row of padded row oh * sh + rh, padded column
 * ow + cw (its phase cw % sw); cg_tap_off the offset from r of the block's
 * vector `rows` padded rows and `cols` columns on.  rt: the plane's row
 * step rs and phase row wq are the C variables of those names, else the
 * constants given. */
void cg_emit_tap_row(cg_out *o, bool rt, int64_t sh, int64_t rh, int64_t cw, int64_t sw, int64_t rs, int64_t wq);
void cg_tap_off(char *buf, size_t cap, bool rt, int64_t rows, int64_t cols, int64_t rs);
void cg_emit_plane_rt(cg_out *o, int rows, int vecs, cg_block_fn blk, const void *k);
void cg_emit_pair_consts_rt(cg_out *o, long pl);
void cg_emit_unit_consts_rt(cg_out *o, long pl);

/* Depthwise convolution (cgen_dwconv.c): groups == input == output channels. */
bool cg_dw_applies(const cgen_conv_spec *s);
harp_status cg_dwconv(harp_error *e, const cgen_conv_spec *s, const char *fn, ut_str *out);

/* Which variants simd and isa_mask allow; never 0 (scalar is always kept). */
unsigned cg_isa_set(const cgen_tuning *t);
harp_status cg_check_name(harp_error *e, const char *fn);
int64_t cg_rup(int64_t a, int64_t b);

/* cgen_map_lut.c: a map chain's suffix through one byte as a table.  j: the
 * op whose later ops the table holds (-1: none), on lo..lo+n-1 (n <= 256)
 * and NaN (entry n); the table is MAP_LUT_PAD floats, a multiple of every
 * vector width. */
#define MAP_LUT_PAD 272
typedef struct map_lut {
  int j, n;
  float lo;
} map_lut;
int cg_map_lut_find(const cgen_map_spec *s, float *lo, int *n);
void cg_map_lut_helper(cg_out *o);

#endif
