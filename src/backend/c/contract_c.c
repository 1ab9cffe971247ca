/* contract_c.c — the CPU's contraction kernels printed from what the kernel
 * layer read, on the templates of cgen.h (BLIS-style GEMM, implicit-GEMM or
 * direct conv), and the helpers every template kernel shares: the epilogue,
 * the host's ISA, weights packed once (the region's Schedule Plan as the
 * template's tuning and the body under it: contract_plan_c.c; attention,
 * softmax, pooling and maps: contract_rows_c.c).
 * Needs: a region formed by rg_form (rg_info), its Poly-View, the Function;
 * the kernel layer's reading (src/kernel/contract.h), chosen by kernel_c.c.
 * Gives: cc_emit_gemm, cc_emit_conv, cc_note_generic, and contract_c_int.h.
 *
 * The kernel layer (src/kernel/select.c) decides which template a region
 * runs and says what the kernel reads; this file fills the cgen specs from
 * that, maps the region's Schedule Plan onto the template's tuning and
 * writes the call.  A template that refuses the shape returns *handled =
 * false with *why, and the kernel layer moves on (in the end to the generic
 * loop nest of region_c.c, which computes the same values).
 *
 * Constant weights: when a conv's weight or a GEMM's A (else its B) is a
 * param buffer (FN_PARAM) read as it is — no repack copy, no rounding on the
 * way — the template is generated with prepack_w / prepack_a / prepack_b, the kernel gets
 * fn_wbytes / fn_wpack helpers, and model_init packs the weight once
 * (emit_model.c); every run then reads the packed form. */
#include <cpuid.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "contract_c_int.h"
#include "harp/region.h"
#include "tiny/tiny_spell.h"

/* The template steps of the shared reading as the C templates' epilogue. */
bool cc_epi_to_cgen(const ct_epi *in, int n, cgen_epi *out) {
  static const cgen_epi_kind kinds[] = {
      [CT_EPI_BIAS_M] = CGEN_EPI_BIAS_M, [CT_EPI_BIAS_N] = CGEN_EPI_BIAS_N,     [CT_EPI_RELU] = CGEN_EPI_RELU,
      [CT_EPI_GELU] = CGEN_EPI_GELU,     [CT_EPI_SILU] = CGEN_EPI_SILU,         [CT_EPI_SIGMOID] = CGEN_EPI_SIGMOID,
      [CT_EPI_SCALE] = CGEN_EPI_SCALE,   [CT_EPI_RESIDUAL] = CGEN_EPI_RESIDUAL, [CT_EPI_ROUND] = CGEN_EPI_ROUND,
      [CT_EPI_CLAMP] = CGEN_EPI_CLAMP,   [CT_EPI_RINT] = CGEN_EPI_RINT,
      [CT_EPI_DIV] = CGEN_EPI_DIV,       [CT_EPI_GATE] = CGEN_EPI_GATE};
  memset(out, 0, sizeof(cgen_epi) * CGEN_MAX_EPI);
  for (int i = 0; i < n; i++) {
    if ((unsigned)in[i].kind >= sizeof kinds / sizeof kinds[0]) return false; /* CT_EPI_RESFMA: no template step */
    out[i] = (cgen_epi){kinds[in[i].kind], in[i].dtype, in[i].scale, in[i].shift, in[i].s_b0, in[i].s_b1, in[i].s_m,
                        in[i].s_n, in[i].mul, in[i].lo, in[i].hi};
  }
  return true;
}

/* F16C by CPUID (leaf 1, ecx bit 29): clang's __builtin_cpu_supports does
 * not know "f16c", and the library must build with clang too (make fuzz). */
static bool host_has_f16c(void) {
  unsigned a, b, c, d;
  return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29));
}

/* The one variant this machine runs best (the JIT compiles where it runs). */
unsigned cc_host_isa_mask(void) {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("fma"))
    return 1u << CGEN_ISA_AVX512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && host_has_f16c())
    return 1u << CGEN_ISA_AVX2;
  return 1u << CGEN_ISA_SCALAR;
}

/* The generators behind one signature, for cc_template_body. */
static harp_status gen_gemm(harp_error *e, const void *s, const char *fn, ut_str *o) { return cgen_gemm(e, s, fn, o); }
static harp_status gen_conv(harp_error *e, const void *s, const char *fn, ut_str *o) { return cgen_conv(e, s, fn, o); }

/* The knob conv (HARP_CONV=gemm|direct): an A/B switch for benchmarks
 * (cgen_conv_direct decides otherwise). */
static int conv_algo(const rc_ctx *c) {
  int k = rt_knobs_or_default(c->knobs)->conv;
  return k == RT_CONV_GEMM ? CGEN_CONV_GEMM : k == RT_CONV_DIRECT ? CGEN_CONV_DIRECT : 0;
}

/* ---- weights packed once ------------------------------------------------------------- */
/* The template may take the operand in `slot` packed at model_init: a weight
 * (FN_PARAM, constant for the instance's life) that the kernel reads
 * straight.  The callers check that nothing (a repack copy, a rounding) sits
 * between the buffer and the template.  HARP_NO_PREPACK=1 packs on every run
 * instead: an A/B switch for benchmarks. */
static bool packs_once(const rc_ctx *c, int r, int slot) {
  const fn_kernel *K = &c->f->kernels[r];
  if (slot < 0 || slot >= K->nreads || c->f->buffers[K->reads[slot]].kind != FN_PARAM) return false;
  return !rt_knobs_or_default(c->knobs)->no_prepack;
}

bool cc_packs_once(const rc_ctx *c, int r, int slot) { return packs_once(c, r, slot); }

/* Kernel r reads its packed slot only packed: no epilogue operand and no
 * other operand (`other`) is that slot (see rc_ctx.packed_only). */
static void note_packed_only(const rc_ctx *c, int r, int slot, int other, const ct_epi *epi, int nepi) {
  if (!c->packed_only) return;
  bool only = other != slot;
  for (int i = 0; i < nepi; i++) only &= epi[i].slot != slot;
  c->packed_only[r] = only;
}

/* The helpers model_init calls for a kernel that takes its weight packed
 * (contract_c.h): the packed form's size (the ISA variant's this process
 * runs) and the packing of the weight buffer w, at element offset off. */
static void emit_wpack(ut_str *o, const char *fn, const char *kfn, char which, int64_t off, int esize) {
  ut_str_printf(o, "static long %s_wbytes(void) { return %s_pack_%c_bytes(); }\n", fn, kfn, which);
  ut_str_printf(o,
                "static int %s_wpack(hprt_pool *pool, const void *w, void *wp) {\n"
                "  return %s_pack_%c(pool, (const char *)w + %" PRId64 " * %d, wp);\n}\n",
                fn, kfn, which, off, esize);
}

void cc_ep_array(ut_str *o, const ct_epi *epi, int n) {
  ut_str_puts(o, "  const void *ep[] = {");
  for (int i = 0; i < n; i++) {
    if (epi[i].slot < 0) ut_str_puts(o, "NULL, ");
    else ut_str_printf(o, "(const void *)((const char *)bufs[%d] + %" PRId64 " * %d), ", epi[i].slot, epi[i].off,
                       tiny_dtype_size(epi[i].dtype));
  }
  ut_str_puts(o, "NULL};\n");
}

/* The copy into the scratch `ap` (nested loops, the destination's innermost
 * dimension innermost), in the tensor's storage type. */
/* A ShapeSet object's repack of A: each copy loop's extent and source
 * stride as an expression of the symbols (NULL: the constant), and the
 * elements at the box's top. */
typedef struct rep_rt {
  const char *v[POLY_MAX_VARS], *s[POLY_MAX_VARS];
  char buf[2 * POLY_MAX_VARS][96];
  int64_t total;
} rep_rt;

/* *x for a repack of n loops (extents size, source strides src) from a
 * tensor of shape sh (of c): loop i walks the axis of sh whose row-major
 * stride and extent it has. */
static void repack_rt(const rc_ctx *c, const tiny_shape *sh, const int64_t *size, const int64_t *src, int n, rep_rt *x) {
  memset(x, 0, sizeof *x);
  int64_t st[TINY_MAX_RANK], acc = 1;
  for (int d = sh->rank - 1; d >= 0; d--) st[d] = acc, acc *= sh->d[d].n;
  x->total = 1;
  for (int i = 0; i < n; i++) {
    int64_t hi = size[i];
    for (int d = 0; d < sh->rank; d++) {
      if (sh->d[d].n < 2 || sh->d[d].n != size[i] || st[d] != src[i]) continue;
      if (rc_axis_expr(c, sh, d, hi, x->buf[2 * i], sizeof x->buf[0], &hi)) x->v[i] = x->buf[2 * i];
      break;
    }
    if (rc_stride_expr(c, sh, src[i], x->buf[2 * i + 1], sizeof x->buf[0])) x->s[i] = x->buf[2 * i + 1];
    x->total *= hi;
  }
}

/* Copy A0 (n loops of extents vsize, source strides src_stride) into a
 * dense scratch `dst` (ap: A's); x: a ShapeSet object's run-time extents
 * and strides (NULL: all constants). */
static void emit_repack(ut_str *o, const char *dst, const ct_tensor *A0, const int64_t *vsize, const int64_t *src_stride,
                        int n, const rep_rt *x) {
  const char *t = A0->dtype == TINY_FP32 ? "float" : "uint16_t";
  int64_t total = 1;
  for (int i = 0; i < n; i++) total *= vsize[i];
  if (x) total = x->total;
  ut_str_printf(o, "  %s *%s = aligned_alloc(64, %" PRId64 "UL);\n  if (!%s) return 2;\n", t, dst,
                (total * tiny_dtype_size(A0->dtype) + 63) / 64 * 64, dst);
  ut_str_printf(o, "  { const %s *src = (const %s *)bufs[%d] + %" PRId64 ";\n    long at = 0;\n", t, t, A0->slot,
                A0->offset);
  for (int i = 0; i < n; i++) {
    if (x && x->v[i]) ut_str_printf(o, "    %*sfor (long i%d = 0; i%d < %s; i%d++)\n", 2 * i, "", i, i, x->v[i], i);
    else ut_str_printf(o, "    %*sfor (long i%d = 0; i%d < %" PRId64 "L; i%d++)\n", 2 * i, "", i, i, vsize[i], i);
  }
  ut_str_printf(o, "    %*s%s[at++] = src[", 2 * n, "", dst);
  for (int i = 0; i < n; i++) {
    if (x && x->s[i]) ut_str_printf(o, "%si%d * %s", i ? " + " : "", i, x->s[i]);
    else ut_str_printf(o, "%si%d * %" PRId64 "L", i ? " + " : "", i, src_stride[i]);
  }
  ut_str_puts(o, "];\n  }\n");
}

/* Kernels below this many multiply-adds run on the calling thread: waking
 * the pool's sleeping workers costs ~50-200 us on the 2-core VMs measured,
 * more than a second thread saves (a 128^3 GEMM is ~40 us on one core). */
#define SMALL_WORK (double)(1 << 21)
#define SMALL_BYTES (double)(1 << 20) /* nor when they stream this much (a GEMV's B) */

void cc_small_on_caller(ut_str *out, double work) {
  if (work < SMALL_WORK) ut_str_puts(out, "  pool = NULL; /* small: the calling thread alone */\n");
}

void cc_small_on_caller_rt(ut_str *out, const char *const *fx, const int64_t *fv, int n, double work) {
  bool rt = false;
  for (int i = 0; i < n; i++) rt = rt || fx[i];
  for (int i = 0; !rt && i < n; i++) work *= (double)fv[i];
  if (!rt) {
    cc_small_on_caller(out, work);
    return;
  }
  ut_str_puts(out, "  if ((double)");
  for (int i = 0; i < n; i++) {
    if (fx[i]) ut_str_printf(out, "(%s) * ", fx[i]);
    else ut_str_printf(out, "%" PRId64 ".0 * ", fv[i]);
  }
  ut_str_printf(out, "%.1f < %.0f) pool = NULL; /* small at this binding: the calling thread alone */\n", work, SMALL_WORK);
}

void cc_emit_rt_out_hw(ut_str *out, const cc_rt_geometry *g) {
  char nx[24], hx[24], wx[24];
  snprintf(nx, sizeof nx, "%" PRId64 "L", g->n), snprintf(hx, sizeof hx, "%" PRId64 "L", g->h);
  snprintf(wx, sizeof wx, "%" PRId64 "L", g->w);
  ut_str_printf(out, "  { long n_ = %s, h_ = %s, w_ = %s;\n", g->n_expr ? g->n_expr : nx, g->h_expr ? g->h_expr : hx,
                g->w_expr ? g->w_expr : wx);
  ut_str_printf(out, "    long oh_ = (h_ + %" PRId64 "L) / %" PRId64 "L + 1, ow_ = (w_ + %" PRId64 "L) / %" PRId64 "L + 1;\n", g->eh,
                g->sh, g->ew, g->sw);
}

/* A ShapeSet object's conv s (sizes read at run time): SMALL_WORK's choice
 * at run time from this binding's output pixels times `per_pixel`
 * multiply-adds (scaled as cc_small_on_caller's caller does); the spec's
 * sizes are the upper corner's, which would wake the pool for every
 * binding. */
static void conv_small_rt(ut_str *out, const cgen_conv_spec *s, double per_pixel) {
  cc_rt_geometry g = {s->n_expr, s->h_expr, s->w_expr, s->n, s->h, s->w,
                      s->pad[0] + s->pad[2] - s->dil[0] * (s->kh - 1) - 1, s->stride[0],
                      s->pad[1] + s->pad[3] - s->dil[1] * (s->kw - 1) - 1, s->stride[1]};
  cc_emit_rt_out_hw(out, &g);
  ut_str_printf(out, "    if ((double)n_ * oh_ * ow_ * %.1f < %.0f) pool = NULL; /* small at this binding: the calling thread alone */\n  }\n",
                per_pixel, SMALL_WORK);
}

/* Output pixels of a conv spec. */
static double conv_pixels(const cgen_conv_spec *s) {
  int64_t oh = 0, ow = 0;
  return cgen_conv_out_hw(s, &oh, &ow) ? (double)oh * (double)ow : 0;
}

/* ---- GEMM ---------------------------------------------------------------------- */
/* C = A B stored column-major (unit stride along M, not N) as C^T = B^T A^T:
 * the template vectorizes along N and stores a C with a non-unit column
 * stride one element at a time.  A 1x1 conv in NCHW reads this way (x as A,
 * pixels along M; the weight as B, output channels along N), and so does
 * y^T = W x^T in general.  Not with a repacked or rounded A, which only A may
 * be.  True when it swapped. */
static bool gemm_transpose(ct_gemm *g) {
  if (g->c_sn == 1 || g->c_sm != 1 || g->nrep || g->a_round != TINY_FP32) return false;
  int64_t t;
#define SWAP(x, y) (t = (x), (x) = (y), (y) = t)
  SWAP(g->M, g->N);
  SWAP(g->a_sm, g->b_sn);
  SWAP(g->a_sk, g->b_sk);
  SWAP(g->c_sm, g->c_sn);
  for (int i = 0; i < 2; i++) SWAP(g->a_sb[i], g->b_sb[i]);
  for (int i = 0; i < g->nepi; i++) {
    ct_epi *ep = &g->epi[i];
    if (ep->kind == CT_EPI_BIAS_M) ep->kind = CT_EPI_BIAS_N;
    else if (ep->kind == CT_EPI_BIAS_N) ep->kind = CT_EPI_BIAS_M;
    else if (ep->kind == CT_EPI_RESIDUAL || ep->kind == CT_EPI_RESFMA) SWAP(ep->s_m, ep->s_n);
  }
#undef SWAP
  ct_tensor a = g->A;
  g->A = g->B;
  g->B = a;
  g->A0 = g->A;
  return true;
}

/* The row length of a 1x1 conv over N pixels seen as rows (the window
 * reads pixel p for output p, so any split of the H*W run into rows is the
 * same conv): whole 14-pixel tiles where a multiple of 14 up to 56 divides
 * it (56x56, 28x28, 14x14: rows of 56, 56, 28), else the largest divisor up
 * to 56 (7x7: 49, one row), else one row; rows make tasks for the threads. */
static int64_t conv1x1_row(int64_t N) {
  if (N <= 56) return N;
  int64_t best = 0, best14 = 0;
  for (int64_t l = 56; l >= 8; l--)
    if (N % l == 0) {
      if (!best) best = l;
      if (!best14 && l % 14 == 0) best14 = l;
    }
  return best14 ? best14 : best ? best : N;
}

/* A GEMM that is a dense 1x1 conv in NCHW once transposed (gemm_transpose:
 * C[n][oc][p] = W[oc][c] x[n][c][p], W shared by the images, the pixels
 * contiguous): the conv spec of it over rows of the H*W pixels (a 1x1
 * window without padding or stride reads pixel p for output p).  The
 * epilogue must be a conv's: a bias per output channel, a residual laid
 * out like y. */
static bool gemm_as_conv1x1(const ct_gemm *g, cgen_conv_spec *s) {
  int64_t M = g->M, N = g->N, K = g->K, nb = g->batch[0];
  if (g->batch[1] != 1 || g->nrep || g->a_round != TINY_FP32) return false;
  if (g->a_sk != 1 || g->a_sm != K || g->a_sb[0] || g->a_sb[1]) return false;
  if (g->b_sn != 1 || g->b_sk != N || (nb > 1 && g->b_sb[0] != K * N)) return false;
  if (g->c_sn != 1 || g->c_sm != N || (nb > 1 && g->c_sb[0] != M * N)) return false;
  for (int i = 0; i < g->nepi; i++) {
    const ct_epi *ep = &g->epi[i];
    if (ep->kind == CT_EPI_BIAS_N) return false;
    if (ep->kind == CT_EPI_RESIDUAL && (ep->s_n != 1 || ep->s_m != N || (nb > 1 && ep->s_b0 != M * N))) return false;
  }
  /* rows of L pixels (conv1x1_row) */
  int64_t L = conv1x1_row(N);
  cgen_conv_spec_init(s, nb, K, N / L, L, M, 1, 1, TINY_FP32);
  s->x_dtype = g->B.dtype;
  s->w_dtype = g->A.dtype;
  s->y_dtype = g->C.dtype;
  s->n_epi = g->nepi;
  return cc_epi_to_cgen(g->epi, g->nepi, s->epi);
}

/* A ShapeSet object: 1x1 conv s (GEMM gm of region r), the pixel count (as
 * one row of them) and the batch read at run time into x where they are a
 * symbol's, s's sizes then the upper corner's, with the built-in tuning;
 * false when both are constants. */
static bool conv1x1_size_exprs(rc_ctx *c, int r, const ct_gemm *gm, cgen_conv_spec *s, char x[2][160]) {
  const tiny_shape *cs = c->ngen_syms ? rc_slot_shape(c, r, gm->C.slot) : NULL;
  if (!cs || cs->rank != 4 || cs->d[0].n != gm->batch[0] || cs->d[1].n != gm->M) return false;
  if (rc_size_expr(c, cs, 2, 4, gm->N, x[1], sizeof x[1])) s->h = 1, s->w = rc_size_hi(c, cs, 2, 4), s->w_expr = x[1];
  if (rc_axis_expr(c, cs, 0, gm->batch[0], x[0], sizeof x[0], &s->n)) s->n_expr = x[0];
  if (!s->w_expr && !s->n_expr) return false; /* the pixels and the batch constants: not a ShapeSet's */
  cgen_tuning_default(&s->tune);
  cc_jit_variant(c, &s->tune, cc_host_isa_mask());
  rt_plan_choice *ch = cc_choice_of(c, r);
  if (ch) cc_note_add(ch, "ShapeSet object, pixels read at run time: the direct kernel's built-in blocking, not the plan");
  return true;
}

static const char *gemm_cols_expr(const rc_ctx *c, int r, ct_gemm *gm, char *buf, size_t cap);

/* A ShapeSet object's 1x1 conv s (GEMM gm of region r) with its pixels read
 * at run time and its batch a constant: whether it goes to the GEMM with N
 * read at run time (gemm_cols_expr) because the specialised object at the
 * upper corner runs the implicit GEMM (cg_dconv_plan's 1x1 rule: fewer than
 * 256 input channels, pixels whole vectors).  Why: the direct kernel stores
 * each tile as 32 output-channel rows of 14 pixels; where a plane is a
 * multiple of 4 KiB (MobileNetV2's block 2 at 320 x 320: 160 x 160 pixels,
 * 100 KiB) those rows share an L1 set and the partial lines are evicted
 * between tiles: 16 -> 96 channels took 0.77 ms alone (3.1 in a run)
 * against the specialised GEMM's 0.28 (0.24 at 320 x 312). */
static bool rt_conv1x1_gemm(const rc_ctx *c, int r, const ct_gemm *gm, const cgen_conv_spec *s) {
  if (!s->w_expr || s->n_expr || s->h_expr) return false;
  cgen_conv_spec q = *s;
  int64_t N = s->h * s->w, L = conv1x1_row(N);
  q.w_expr = NULL, q.h = N / L, q.w = L;
  const char *why;
  ct_gemm g = *gm;
  char buf[160];
  return !cgen_conv_direct(&q, &why) && gemm_cols_expr(c, r, &g, buf, sizeof buf);
}

/* The GEMM as that conv, when cgen_conv's AVX-512 variant is the direct
 * kernel for it (cg_dconv_plan: 256 or more input channels, or a pixel count
 * that the GEMM's vectors along the pixels would pad by a tenth or more);
 * the other variants are its implicit GEMM, which copies input rows as its
 * B panel as the GEMM does.  HARP_CONV=gemm|direct forces either here too.
 * Or when the plan splits K (splitk_reduce): the conv's implicit GEMM split
 * along K in every variant (cgen_splitk.c), which the skinny-only GEMM lacks. */
static bool try_gemm_conv1x1(rc_ctx *c, int r, const char *fn, ut_str *out, const ct_gemm *gm, bool swapped,
                             rc_packed *pk) {
  cgen_conv_spec s;
  if (!gemm_as_conv1x1(gm, &s)) return false;
  plan_use pu = {0};
  char rtx[2][160]; /* a ShapeSet object: the pixels at run time (else the GEMM prints them) */
  bool rt = conv1x1_size_exprs(c, r, gm, &s, rtx);
  /* a 1x1 conv in NCHW arrives with the pixels as M (swapped), or as
   * W x with the weight a param; not a matmul of activations */
  if (!rt && !(swapped || packs_once(c, r, gm->A.slot))) return false;
  if (!rt) cc_plan_tuning(c, r, 'c', swapped, &s.tune, NULL, NULL, &pu);
  const char *dwhy = NULL;
  s.tune.conv_algo = conv_algo(c);
  bool split = !rt && cc_conv1x1_plan_splitk(c, r, &pu, &s); /* the implicit GEMM split along K */
  if (!split && pu.ch && plan_algo_is_splitk(pu.ch->plan.algo[PLAN_KEY_MATMUL])) return false; /* the GEMM's say */
  if (!split && !cgen_conv_direct(&s, &dwhy)) return false;
  if (rt && rt_conv1x1_gemm(c, r, gm, &s)) return false;
  if (rt && !s.w_expr) { /* the batch alone at run time: the direct kernel where a specialised object takes it */
    cgen_conv_spec q = s;
    q.n_expr = NULL;
    if (!cgen_conv_direct(&q, &dwhy)) return false;
  }
  s.prepack_w = packs_once(c, r, gm->A.slot);
  char kfn[128];
  snprintf(kfn, sizeof kfn, "%s_conv", fn);
  ut_str body;
  ut_str_init(&body);
  if (!cc_template_body(c, &pu, gen_conv, &s, &s.tune, NULL, NULL, kfn, &body)) {
    ut_str_free(&body);
    return false;
  }
  if (pu.ch && !split) {
    char msg[256];
    snprintf(msg, sizeof msg, "1x1 conv: the AVX-512 variant is the direct kernel (%.120s); tile and warp tile not used", dwhy);
    cc_note_add(pu.ch, msg);
  }
  ut_str_puts(out, body.buf);
  ut_str_free(&body);
  const fn_kernel *K = &c->f->kernels[r];
  if (s.prepack_w) {
    emit_wpack(out, fn, kfn, 'a', gm->A.offset, tiny_dtype_size(gm->A.dtype));
    pk->n = 1, pk->slot[0] = gm->A.slot;
    note_packed_only(c, r, gm->A.slot, gm->B.slot, gm->epi, gm->nepi);
  }
  bool q8 = s.prepack_w && cc_emit_q8gemm(c, r, fn, out, gm, true, false, pk);
  ut_str_printf(out, "static int %s(hprt_pool *pool, void *const *bufs) {\n", fn);
  if (s.n_expr || s.h_expr || s.w_expr) conv_small_rt(out, &s, (double)gm->M * gm->K);
  else cc_small_on_caller(out, (double)s.n * gm->M * (s.h * s.w) * gm->K);
  if (q8) cc_q8_call(out, fn);
  cc_ep_array(out, gm->epi, gm->nepi);
  if (s.prepack_w) ut_str_printf(out, "  /* the weight packed by model_init */\n  return %s(pool, bufs[%d]", kfn, K->nreads + K->nwrites);
  else ut_str_printf(out, "  return %s(pool, (const char *)bufs[%d] + %" PRId64 " * %d", kfn, gm->A.slot, gm->A.offset,
                     tiny_dtype_size(gm->A.dtype));
  ut_str_printf(out, ", (const char *)bufs[%d] + %" PRId64 " * %d, bufs[%d], ep) ? 2 : 0;\n}\n\n", gm->B.slot, gm->B.offset,
                tiny_dtype_size(gm->B.dtype), gm->C.slot);
  return true;
}

/* The row count M of GEMM *gm (region r) as a run-time expression of the
 * ShapeSet's symbols into buf, when C is one dense batch whose leading dims
 * (a product with a symbol in it) are the rows; gm->M then becomes their
 * product at the upper corner, which every size decision here and the
 * template's tiles use.  NULL: M stays a constant. */
static const char *gemm_rows_expr(const rc_ctx *c, int r, ct_gemm *gm, bool swapped, char *buf, size_t cap) {
  if (swapped || !c->ngen_syms || gm->batch[0] != 1 || gm->batch[1] != 1 || gm->c_sn != 1 || gm->c_sm != gm->N)
    return NULL;
  const tiny_shape *cs = rc_slot_shape(c, r, gm->C.slot);
  if (!cs || cs->rank < 2 || cs->d[cs->rank - 1].n != gm->N || !rc_size_expr(c, cs, 0, cs->rank - 1, gm->M, buf, cap))
    return NULL;
  int64_t hi = rc_size_hi(c, cs, 0, cs->rank - 1);
  if (hi < gm->M) return NULL;
  gm->M = hi;
  return buf;
}

/* Whether GEMM gm multiplies in bf16 (the model's precision, or bf16
 * operands where vdpbf16ps takes them): the template reads N and K at run
 * time only in fp32, so such a GEMM keeps them constants (a compile per
 * binding with the bf16 template, not one object of loop nests). */
static bool gemm_in_bf16(const rc_ctx *c, const ct_gemm *gm) {
  return c->bf16 || (c->bf16_native && gm->A.dtype == TINY_BF16 && gm->B.dtype == TINY_BF16);
}

/* The column count N of GEMM *gm (region r) as a run-time expression of
 * the ShapeSet's symbols into buf, M a constant: one batch, C dense with N
 * its last dims' product (a symbol's size in it) and row stride, B read along N at unit
 * stride with N its row stride (or along K: constant strides), a residual
 * laid out as C; gm->N and the strides that equal it then become the
 * upper corner's, which the tiles and every size decision use, and the
 * batch strides 0 (one batch).  Either orientation: a 1x1 conv's GEMM
 * arrives transposed (gemm_transpose: the pixels N, the weight A).  NULL:
 * N stays a constant. */
static const char *gemm_cols_expr(const rc_ctx *c, int r, ct_gemm *gm, char *buf, size_t cap) {
  if (!c->ngen_syms || gemm_in_bf16(c, gm) || gm->nrep || gm->batch[0] != 1 || gm->batch[1] != 1 || gm->c_sn != 1 ||
      gm->c_sm != gm->N || (gm->b_sn == 1 && gm->b_sk != gm->N))
    return NULL;
  for (int i = 0; i < gm->nepi; i++)
    if (gm->epi[i].kind == CT_EPI_RESIDUAL && gm->epi[i].s_n == 1 && gm->epi[i].s_m != gm->N) return NULL;
  const tiny_shape *cs = rc_slot_shape(c, r, gm->C.slot);
  int d0 = cs ? cs->rank - 1 : -1; /* the fewest last dims whose product N is (a 1x1 conv's H, W) */
  while (d0 > 0 && !rc_size_expr(c, cs, d0, cs->rank, gm->N, buf, cap)) d0--;
  if (d0 < 0 || !rc_size_expr(c, cs, d0, cs->rank, gm->N, buf, cap)) return NULL;
  int64_t hi = rc_size_hi(c, cs, d0, cs->rank);
  if (hi < gm->N) return NULL;
  for (int i = 0; i < gm->nepi; i++) {
    ct_epi *ep = &gm->epi[i];
    if (ep->kind == CT_EPI_RESIDUAL && ep->s_n == 1) ep->s_m = hi;
    ep->s_b0 = ep->s_b1 = 0;
  }
  if (gm->b_sn == 1) gm->b_sk = hi;
  gm->c_sm = hi, gm->N = hi;
  for (int i = 0; i < 2; i++) gm->a_sb[i] = gm->b_sb[i] = gm->c_sb[i] = 0;
  return buf;
}

/* The depth K of GEMM *gm (region r) as a run-time expression of the
 * ShapeSet's symbols into buf, M a constant: one batch, A read as it is
 * stored, dense [.., M, K] with K its last dim (a symbol's size), B [K][N]
 * at unit column stride; gm->K and A's row stride then become the upper
 * corner's (KC is picked for it), the batch strides 0.  NULL: a constant. */
static const char *gemm_depth_expr(const rc_ctx *c, int r, ct_gemm *gm, bool swapped, char *buf, size_t cap) {
  if (swapped || !c->ngen_syms || gemm_in_bf16(c, gm) || gm->nrep || gm->a_round != TINY_FP32 || gm->batch[0] != 1 ||
      gm->batch[1] != 1 || gm->a_sk != 1 || gm->a_sm != gm->K || gm->b_sn != 1)
    return NULL;
  const tiny_shape *as = rc_slot_shape(c, r, gm->A.slot);
  if (!as || as->rank < 1 || !rc_size_expr(c, as, as->rank - 1, as->rank, gm->K, buf, cap)) return NULL;
  int64_t hi = rc_size_hi(c, as, as->rank - 1, as->rank);
  if (hi < gm->K) return NULL;
  gm->K = hi, gm->a_sm = hi;
  for (int i = 0; i < 2; i++) gm->a_sb[i] = gm->b_sb[i] = gm->c_sb[i] = 0;
  for (int i = 0; i < gm->nepi; i++) gm->epi[i].s_b0 = gm->epi[i].s_b1 = 0;
  return buf;
}

/* The outer batch batch[0] of GEMM *gm (region r) as a run-time expression
 * of the ShapeSet's symbols into buf, when it is C's leading dim and C is
 * dense behind it (NCHW 1x1 convs over the batch, batched matmuls), A is not
 * repacked per run; gm->batch[0] then becomes the upper corner's.  NULL: a
 * constant. */
static const char *gemm_batch_expr(const rc_ctx *c, int r, ct_gemm *gm, char *buf, size_t cap) {
  if (!c->ngen_syms || gm->nrep || gm->a_round != TINY_FP32) return NULL;
  const tiny_shape *cs = rc_slot_shape(c, r, gm->C.slot);
  int64_t inner = 1, hi = 0;
  for (int d = 1; cs && d < cs->rank; d++) inner *= cs->d[d].n;
  if (!cs || cs->rank < 3 || (gm->batch[0] > 1 && gm->c_sb[0] != inner) ||
      !rc_axis_expr(c, cs, 0, gm->batch[0], buf, cap, &hi) || hi < gm->batch[0])
    return NULL;
  if (gm->batch[0] == 1) gm->c_sb[0] = inner; /* a corner at 1: C's batch stride as at the others */
  gm->batch[0] = hi;
  return buf;
}

/* A ShapeSet GEMM (rows m_now at this binding) whose A or residual is read
 * with a stride of run-time value (a symbol's size: A transposed, [K][M]
 * over the rows; a residual [N][M]): the template reads it dense instead,
 * A from the repack scratch `ap` ([M][K]), a residual from rp<i>
 * ([M][N], sym_dense_epi_copies), both copied per run at the binding's
 * extents and strides (repack_rt). */
static void sym_dense_operands(const rc_ctx *c, int r, ct_gemm *gm, int64_t m_now) {
  char buf[96];
  if (!gm->nrep && gm->a_sk != 1 && gm->A.slot >= 0 && gm->a_round == TINY_FP32 &&
      rc_stride_expr(c, &c->g->nodes[gm->A.node].shape, gm->a_sk, buf, sizeof buf)) {
    gm->A0 = gm->A;
    gm->nrep = 2;
    gm->rep_size[0] = m_now, gm->rep_src[0] = gm->a_sm;
    gm->rep_size[1] = gm->K, gm->rep_src[1] = gm->a_sk;
    gm->A.slot = -1, gm->A.offset = 0;
    gm->a_sm = gm->K, gm->a_sk = 1;
  }
  for (int i = 0; i < gm->nepi; i++) {
    ct_epi *ep = &gm->epi[i];
    const tiny_shape *sh = ep->slot >= 0 ? rc_slot_shape(c, r, ep->slot) : NULL;
    if (ep->kind == CT_EPI_RESIDUAL && ep->s_n != 1 && sh && rc_stride_expr(c, sh, ep->s_n, buf, sizeof buf))
      ep->s_m = gm->N, ep->s_n = 1;
  }
}

/* The copies sym_dense_operands asked for of gm's residuals (read: as the
 * GEMM reads them), ep[i] pointed at each. */
static void sym_dense_epi_copies(const rc_ctx *c, int r, const ct_gemm *read, const ct_gemm *gm, ut_str *out) {
  for (int i = 0; i < gm->nepi; i++) {
    const ct_epi *ep = &read->epi[i];
    if (gm->epi[i].s_n == ep->s_n) continue;
    char dst[16];
    snprintf(dst, sizeof dst, "rp%d", i);
    const ct_tensor t = {-1, ep->slot, ep->dtype, ep->off};
    const int64_t size[2] = {read->M, read->N}, src[2] = {ep->s_m, ep->s_n};
    rep_rt x;
    repack_rt(c, rc_slot_shape(c, r, ep->slot), size, src, 2, &x);
    emit_repack(out, dst, &t, size, src, 2, &x);
    ut_str_printf(out, "  ep[%d] = %s;\n", i, dst);
  }
}

/* cgen_gemm_splitk_ok behind cc_splitk_ok_fn. */
static bool gemm_splitk_ok(const void *spec, const char **why) {
  *why = "split-K runs in the skinny kernel only (at most 8 rows, B and C unit-stride, no weight packed once, M a constant)";
  return cgen_gemm_splitk_ok(spec);
}

/* The plan's split-K for the skinny kernel of region r (cc_plan_splitk). */
static harp_status gemm_plan_splitk(rc_ctx *c, int r, plan_use *pu, cgen_gemm_spec *s) {
  if (pu->ch && cgen_gemm_splitk_ok(s))
    cc_note_add(pu->ch, "skinny GEMM (at most 8 rows): B streamed in column strips over the threads, not packed; tile,"
                 " warp_tile, stages, reorder, unroll and which of M.o / N.o is bound not used");
  return cc_plan_splitk(c, r, pu, &s->tune.splitk, gemm_splitk_ok, s);
}

/* The GEMM template's operand layout in s from gm: the element types, the
 * strides of A, B and C, the two batch axes and their strides, the number
 * of epilogue steps. */
static void gemm_spec_layout(cgen_gemm_spec *s, const ct_gemm *gm) {
  s->a_dtype = gm->A.dtype;
  s->b_dtype = gm->B.dtype;
  s->c_dtype = gm->C.dtype;
  s->a_sm = gm->a_sm, s->a_sk = gm->a_sk;
  s->b_sk = gm->b_sk, s->b_sn = gm->b_sn;
  s->c_sm = gm->c_sm, s->c_sn = gm->c_sn;
  for (int i = 0; i < 2; i++) {
    s->batch[i] = gm->batch[i];
    s->a_sb[i] = gm->a_sb[i];
    s->b_sb[i] = gm->b_sb[i];
    s->c_sb[i] = gm->c_sb[i];
  }
  s->n_epi = gm->nepi;
}

/* The runner `fn` of region r's GEMM (gm; read: as the kernel layer read
 * it) around the template kernel kfn (spec s): the small-work gate, the
 * int8 kernel's call where q8, the epilogue array, the operands (packed by
 * model_init, repacked, or as stored), the call (a batch at a time where bx
 * is not NULL), m_rt / b_rt: the rows / the batch read at run time (NULL:
 * none). */
static void emit_gemm_runner(rc_ctx *c, int r, const char *fn, const char *kfn, ut_str *out, const ct_gemm *gm,
                             const ct_gemm *read, const cgen_gemm_spec *s, const char *m_rt, const char *b_rt,
                             const cc_gemm_batch *bx, bool q8) {
  const fn_kernel *K = &c->f->kernels[r];
  ut_str_printf(out, "static int %s(hprt_pool *pool, void *const *bufs) {\n", fn);
  /* a GEMV streams all of B once: little arithmetic, but 8 MB of weights
   * read by one core take ~0.5 ms, two cores about half */
  double b_bytes = (double)(gm->b_sb[0] ? gm->batch[0] : 1) * (gm->b_sb[1] ? gm->batch[1] : 1) * gm->K * gm->N *
                   tiny_dtype_size(gm->B.dtype);
  if (b_bytes < SMALL_BYTES && b_rt) /* SMALL_WORK's choice at this binding's batch */
    ut_str_printf(out, "  if ((double)%s * %.1f < %.0f) pool = NULL; /* small at this binding: the calling thread alone */\n",
                  b_rt, (double)gm->batch[1] * gm->M * gm->N * gm->K, SMALL_WORK);
  else if (b_bytes < SMALL_BYTES && (s->n_expr || s->k_expr)) { /* SMALL_WORK's choice at this binding's N and K */
    const char *fx[] = {s->n_expr, s->k_expr};
    const int64_t fv[] = {gm->N, gm->K};
    cc_small_on_caller_rt(out, fx, fv, 2, (double)gm->M);
  } else if (b_bytes < SMALL_BYTES && !m_rt) cc_small_on_caller(out, (double)gm->batch[0] * gm->batch[1] * gm->M * gm->N * gm->K);
  if (q8) cc_q8_call(out, fn);
  cc_ep_array(out, gm->epi, gm->nepi);
  /* the operands: A packed by model_init, repacked into `ap` here, or as
   * stored; B packed by model_init or as stored */
  int packed = K->nreads + K->nwrites;
  ut_str a, b;
  ut_str_init(&a);
  ut_str_init(&b);
  if (s->prepack_a) ut_str_printf(&a, "bufs[%d]", packed);
  else if (gm->nrep) ut_str_puts(&a, "ap");
  else ut_str_printf(&a, "(const char *)bufs[%d] + %" PRId64 " * %d", gm->A.slot, gm->A.offset, tiny_dtype_size(gm->A.dtype));
  if (s->prepack_b) ut_str_printf(&b, "bufs[%d]", packed);
  else ut_str_printf(&b, "(const char *)bufs[%d] + %" PRId64 " * %d", gm->B.slot, gm->B.offset, tiny_dtype_size(gm->B.dtype));
  if (s->prepack_a || s->prepack_b) ut_str_printf(out, "  /* %s packed by model_init */\n", s->prepack_a ? "A" : "B");
  rep_rt rx;
  if (gm->nrep && m_rt) repack_rt(c, &c->g->nodes[gm->A0.node].shape, gm->rep_size, gm->rep_src, gm->nrep, &rx);
  if (gm->nrep) emit_repack(out, "ap", &gm->A0, gm->rep_size, gm->rep_src, gm->nrep, m_rt ? &rx : NULL);
  if (m_rt) sym_dense_epi_copies(c, r, read, gm, out);
  if (bx) cc_emit_gemm_batch_call(out, bx, gm, kfn, a.buf ? a.buf : "", b.buf ? b.buf : "");
  else ut_str_printf(out, "  int rc = %s(pool, %s, %s, bufs[%d], ep) ? 2 : 0;\n", kfn, a.buf ? a.buf : "",
                     b.buf ? b.buf : "", gm->C.slot);
  for (int i = 0; m_rt && i < gm->nepi; i++)
    if (gm->epi[i].s_n != read->epi[i].s_n) ut_str_printf(out, "  free(rp%d);\n", i);
  ut_str_puts(out, gm->nrep ? "  free(ap);\n  return rc;\n}\n\n" : "  return rc;\n}\n\n");
  if (a.oom || b.oom) out->oom = true;
  ut_str_free(&a);
  ut_str_free(&b);
}

harp_status cc_emit_gemm(rc_ctx *c, int r, const char *fn, ut_str *out, const ct_gemm *read, bool *handled,
                       const char **why, rc_packed *pk) {
  ct_gemm gm = *read;
  bool swapped = gemm_transpose(&gm);
  if (cc_has_resfma(gm.epi, gm.nepi)) return cc_emit_resfma(c, r, fn, out, NULL, &gm, handled, why, pk);
  if (try_gemm_conv1x1(c, r, fn, out, &gm, swapped, pk)) {
    *handled = true;
    return HARP_OK;
  }
  char mexpr[160]; /* a ShapeSet object: the rows read at run time, tiled for the upper corner */
  const char *m_rt = gemm_rows_expr(c, r, &gm, swapped, mexpr, sizeof mexpr);
  cc_gemm_batch bx; /* more than one batch: a batch at a time, the rows at run time */
  bool per_batch = !m_rt && cc_gemm_batch_rows(c, r, &gm, swapped, &bx);
  if (per_batch) m_rt = bx.m;
  else if (m_rt) sym_dense_operands(c, r, &gm, read->M);
  char nexpr[160]; /* else the columns read at run time, M a constant */
  const char *n_rt = m_rt ? NULL : gemm_cols_expr(c, r, &gm, nexpr, sizeof nexpr);
  char kexpr[160]; /* and / or the depth */
  const char *k_rt = m_rt ? NULL : gemm_depth_expr(c, r, &gm, swapped, kexpr, sizeof kexpr);
  char bexpr[160]; /* else the batch read at run time, the tasks split per run */
  const char *b_rt = m_rt || n_rt || k_rt ? NULL : gemm_batch_expr(c, r, &gm, bexpr, sizeof bexpr);
  cgen_gemm_spec s;
  cgen_gemm_spec_init(&s, gm.M, gm.N, gm.K, TINY_FP32);
  s.m_expr = m_rt;
  s.b0_expr = b_rt;
  s.n_expr = n_rt;
  s.k_expr = k_rt;
  /* the kernel runs a binding below SMALL_WORK on the calling thread (its
   * scratch the pool's, sized for the upper corner: no malloc a run), as a
   * specialised object of that size would */
  double row_work = (double)gm.N * gm.K;
  if (m_rt && (double)gm.K * gm.N * tiny_dtype_size(gm.B.dtype) < SMALL_BYTES)
    s.m_small = (int64_t)ceil(SMALL_WORK / (row_work > 0 ? row_work : 1));
  gemm_spec_layout(&s, &gm);
  if (!cc_epi_to_cgen(gm.epi, gm.nepi, s.epi)) DECLINE("an epilogue step the template has no form of");
  /* A a weight read as it is (a repacked or rounded A is a fresh copy each run) */
  s.prepack_a = gm.nrep == 0 && gm.a_round == TINY_FP32 && !k_rt && packs_once(c, r, gm.A.slot);
  /* else B a weight (x @ W, x W^T) shared by the batches; not where the
   * skinny kernel streams B instead of packing it (M a constant of at most
   * CGEN_SKINNY_MAX_M rows: with M read at run time the template packs B,
   * so once, at model_init: a classifier's 2 MB weight over a batch of 1..8
   * rows, packed every run, took longer than its multiply), unless the
   * int8 kernel takes it (cc_q8_gemv: its int8 weight, packed once, is
   * half the bytes; the packed template then only its fallback) */
  s.prepack_b = !s.prepack_a && (gm.M > CGEN_SKINNY_MAX_M || m_rt || cc_q8_gemv(c, &gm)) && (gm.batch[0] == 1 || gm.b_sb[0] == 0) &&
                (gm.batch[1] == 1 || gm.b_sb[1] == 0) && (!per_batch || bx.b_shared) && !n_rt && !k_rt && packs_once(c, r, gm.B.slot);
  plan_use pu;
  /* M at run time: each corner's plan is its own size's, so the built-in
   * tuning, the same at both.  The batch at run time: the upper corner's
   * plan, which the lower corner replays (rt_compile_opts.replay_plans);
   * the tasks' split is the run's own (emit_batch_split) */
  if (m_rt || n_rt || k_rt) {
    cgen_tuning_default(&s.tune);
    cc_jit_variant(c, &s.tune, cc_host_isa_mask());
    pu.ch = NULL, pu.desc[0] = 0;
    rt_plan_choice *ch = cc_choice_of(c, r);
    if (ch)
      cc_note_add(ch, m_rt ? "ShapeSet object, M read at run time: the template's built-in tuning, not the plan"
                           : "ShapeSet object, N or K read at run time: the template's built-in tuning, not the plan");
  } else cc_plan_tuning(c, r, 'g', swapped, &s.tune, NULL, NULL, &pu);
  if (gemm_plan_splitk(c, r, &pu, &s)) return c->e->code;
  /* bf16: a skinny GEMM's weight B rounded to bf16 once, at model_init, and
   * streamed at half the bytes every run (a classifier's 5-8 MB) */
  if (!s.prepack_a && !s.prepack_b && !m_rt && !b_rt && !n_rt && !k_rt && s.tune.bf16 && (gm.batch[0] == 1 || gm.b_sb[0] == 0) &&
      (gm.batch[1] == 1 || gm.b_sb[1] == 0) && packs_once(c, r, gm.B.slot)) {
    s.prepack_b = true;
    s.prepack_b = cgen_gemm_skinny_bf16_ok(&s);
  }
  char kfn[128];
  snprintf(kfn, sizeof kfn, "%s_gemm", fn);
  if (!cc_template_body(c, &pu, gen_gemm, &s, &s.tune, NULL, NULL, kfn, out)) DECLINE("the template refused the shape");
  if (s.prepack_a) emit_wpack(out, fn, kfn, 'a', gm.A.offset, tiny_dtype_size(gm.A.dtype));
  if (s.prepack_b) emit_wpack(out, fn, kfn, 'b', gm.B.offset, tiny_dtype_size(gm.B.dtype));
  if (s.prepack_a) pk->n = 1, pk->slot[0] = gm.A.slot, note_packed_only(c, r, gm.A.slot, gm.B.slot, gm.epi, gm.nepi);
  if (s.prepack_b) pk->n = 1, pk->slot[0] = gm.B.slot, note_packed_only(c, r, gm.B.slot, gm.A.slot, gm.epi, gm.nepi);
  bool q8 = !m_rt && !b_rt && !n_rt && !k_rt && cc_emit_q8gemm(c, r, fn, out, &gm, s.prepack_a, s.prepack_b, pk);
  emit_gemm_runner(c, r, fn, kfn, out, &gm, read, &s, m_rt, b_rt, per_batch ? &bx : NULL, q8);
  *handled = true;
  return HARP_OK;
}

/* ---- conv ------------------------------------------------------------------------ */
/* The plan's conv algorithm on spec s: Winograd (and its tile) into
 * s->tune.conv_algo, unless the knob conv (HARP_CONV=gemm|direct) asks for
 * another kernel (the plan then says implicit_gemm, and its note why).  A searched plan's Winograd that the kernel cannot run
 * (a grouped conv, half storage: the region info does not tell the search)
 * becomes implicit_gemm in the plan itself, with a note, so that plan.json
 * says what runs; a plan given by the user is refused with the reason. */
static harp_status conv_plan_algo(rc_ctx *c, rt_plan_choice *ch, cgen_conv_spec *s) {
  if (!ch || !plan_algo_is_winograd(ch->plan.algo[PLAN_KEY_CONV])) return HARP_OK;
  plan_algo a = ch->plan.algo[PLAN_KEY_CONV];
  int keep = s->tune.conv_algo;
  if (keep != CGEN_CONV_AUTO) { /* the knob conv (HARP_CONV), an A/B switch, wins */
    char msg[96];
    snprintf(msg, sizeof msg, "%s: the knob conv asks for the %s kernel, so implicit_gemm", plan_algo_name(a),
             keep == CGEN_CONV_GEMM ? "implicit GEMM" : "direct");
    cc_note_add(ch, msg);
    ch->plan.algo[PLAN_KEY_CONV] = PLAN_ALGO_IMPLICIT_GEMM;
    return HARP_OK;
  }
  s->tune.conv_algo = a == PLAN_ALGO_WINOGRAD_2X2_3X3 ? CGEN_CONV_WINO2
                      : a == PLAN_ALGO_WINOGRAD_4X4_3X3 ? CGEN_CONV_WINO4 : CGEN_CONV_WINO;
  const char *why = NULL;
  if (cgen_conv_wino_ok(s, &why)) {
    char msg[160];
    snprintf(msg, sizeof msg, "conv: Winograd F(%dx%d,3x3) (AVX-512, AVX2; scalar: implicit GEMM); tiles, warp tile and"
             " stages not used (its own blocking)", cgen_conv_wino_tile(s), cgen_conv_wino_tile(s));
    cc_note_add(ch, msg);
    return HARP_OK;
  }
  if (ch->source == RT_PLAN_DEFAULT) {
    char msg[160];
    snprintf(msg, sizeof msg, "%s: %s, so implicit_gemm", plan_algo_name(a), why);
    cc_note_add(ch, msg);
    ch->plan.algo[PLAN_KEY_CONV] = PLAN_ALGO_IMPLICIT_GEMM;
    s->tune.conv_algo = keep;
    return HARP_OK;
  }
  return ut_fail(c->e, HARP_E_UNSUPPORTED, NULL, "region '%s': the plan's algo_choice conv %s cannot run on the CPU: %s",
                 ch->region ? ch->region : "?", plan_algo_name(a), why);
}

/* Whether conv r (spec s) reads its plan as the direct kernel's tile
 * (plan_to_dconv): fp32, its AVX-512 variant the direct kernel under the
 * built-in tuning bt (cgen_conv_direct), the plan asking for neither
 * Winograd nor split-K, no knob choosing the kernel. */
static bool conv_plan_direct(const rc_ctx *c, int r, const cgen_conv_spec *s, const cgen_tuning *bt) {
  const rt_plan_choice *ch = cc_choice_of(c, r);
  const char *why;
  if (!ch || c->bf16 || bt->conv_algo != CGEN_CONV_AUTO || ch->plan.splitk > 1) return false;
  if (plan_algo_is_winograd(ch->plan.algo[PLAN_KEY_CONV]) || plan_algo_is_splitk(ch->plan.algo[PLAN_KEY_MATMUL]))
    return false;
  if (s->x_dtype != TINY_FP32 || s->w_dtype != TINY_FP32 || s->y_dtype != TINY_FP32) return false;
  cgen_conv_spec q = *s;
  q.tune = *bt;
  return cgen_conv_direct(&q, &why);
}

/* A ShapeSet object: the batch, height and width of conv cv's input
 * (region r) as run-time expressions of the symbols into x[0..3) (NULL: a
 * constant), s's sizes then the upper corner's; false when none is. */
static bool conv_size_exprs(const rc_ctx *c, int r, const ct_conv *cv, cgen_conv_spec *s, char x[3][160]) {
  const tiny_shape *xs = c->ngen_syms ? rc_slot_shape(c, r, cv->X.slot) : NULL;
  const int64_t want[4] = {cv->n, cv->c, cv->h, cv->w};
  if (!xs || xs->rank != 4 || cv->X.offset) return false;
  for (int d = 0; d < 4; d++)
    if (xs->d[d].n != want[d]) return false;
  const char **e[3] = {&s->n_expr, &s->h_expr, &s->w_expr};
  int64_t *sz[3] = {&s->n, &s->h, &s->w};
  bool any = false;
  for (int i = 0; i < 3; i++) {
    int d = i ? i + 1 : 0;
    if (!rc_axis_expr(c, xs, d, want[d], x[i], sizeof x[i], sz[i])) continue;
    *e[i] = x[i], any = true;
  }
  const bool rt[2] = {s->h_expr != NULL, s->w_expr != NULL};
  if (any) rc_window_pads(c, r, cv->X.node, s->stride, rt, s->pad);
  return any;
}

/* A ShapeSet object's conv s (sizes at run time) of kernel r, its weight
 * slot w: s->wino_min_px from the cost model on this machine
 * (plan_cpu_winograd_min_pixels), where its AVX-512 variant can hold both
 * the direct kernel and Winograd (cg_conv_rt_multi_ok); a weight that is no
 * parameter, transformed every call, by tile: F(4x4)'s there,
 * s->wino_min_px_f2 F(2x2)'s (plan_cpu_winograd_min_pixels_w; a tile that
 * never pays: a size no binding reaches).  True when set. */
static bool rt_wino_pays(const rc_ctx *c, int r, int w, cgen_conv_spec *s) {
  const plan_machine *m = c->f->part->formed ? &c->f->part->formed->machine : NULL;
  const fn_kernel *K = &c->f->kernels[r];
  int64_t k = s->c / s->groups * s->kh * s->kw;
  bool per_call = m && w >= 0 && w < K->nreads && c->f->buffers[K->reads[w]].kind != FN_PARAM;
  s->wino_min_px = plan_cpu_winograd_min_pixels(m, s->x_dtype, k);
  s->wino_min_px_f2 = 0;
  if (per_call && s->wino_min_px > 0) { /* ow 64: F(4x4)'s points, 32: F(2x2)'s (cost_cpu.c wino_points_side) */
    int64_t f4 = plan_cpu_winograd_min_pixels_w(m, s->x_dtype, k, s->oc * k, 64);
    int64_t f2 = plan_cpu_winograd_min_pixels_w(m, s->x_dtype, k, s->oc * k, 32);
    s->wino_min_px = f4 > 0 ? f4 : INT64_C(1) << 40, s->wino_min_px_f2 = f2 > 0 ? f2 : INT64_C(1) << 40;
  }
  if (s->wino_min_px > 0 && cgen_conv_rt_multi_ok(s)) return true;
  s->wino_min_px = s->wino_min_px_f2 = 0;
  return false;
}

/* *t: the conv template's built-in tuning for this compile (its variant, its algorithm knob). */
static void builtin_tuning(const rc_ctx *c, cgen_tuning *t) {
  cgen_tuning_default(t);
  cc_jit_variant(c, t, cc_host_isa_mask());
  t->conv_algo = conv_algo(c);
}

/* A ShapeSet object's conv cv (kernel r, spec *s): sizes read at run time
 * with the built-in tuning (as a GEMM's M), where the direct or depthwise
 * kernel takes them (cgen_conv_rt_ok), or, refused (bf16 multiplication: a
 * QDQ conv's bf16 operands of integers), over the batch alone one image's
 * template per image (*one_image, *img; contract_conv_img.c), over H or W
 * the run-time kernel's fp32 multiply-adds on the widened operands (exact
 * sums of integers below 2^24; bf16 storage's own rounding otherwise).
 * True with *s so set (its expressions in rtx); false: constants, the
 * plan's tuning (the model then compiles per binding, this kernel named as
 * the reason). */
static bool conv_rt_spec(rc_ctx *c, int r, const ct_conv *cv, cgen_conv_spec *s, char rtx[3][160], cc_conv_img *img,
                         bool *one_image) {
  cgen_conv_spec rs = *s;
  const char *rwhy;
  builtin_tuning(c, &rs.tune);
  bool sized = conv_size_exprs(c, r, cv, &rs, rtx), rt = sized && cgen_conv_rt_ok(&rs, &rwhy), f32 = false;
  if (sized && !rt && (rs.h_expr || rs.w_expr) && rs.tune.bf16_native && !rs.tune.bf16) {
    cgen_conv_spec f = rs;
    f.tune.bf16_native = false;
    if ((f32 = rt = cgen_conv_rt_ok(&f, &rwhy))) rs = f;
  }
  if (!rt) {
    if (!sized || !cc_conv_one_image(&rs, img, true)) return false;
    *s = rs, *one_image = true;
    rt_plan_choice *ch = cc_choice_of(c, r);
    if (ch) cc_note_add(ch, "ShapeSet object, the batch read at run time, no run-time kernel: one image's kernel (built-in tuning), per image");
    return true;
  }
  *s = rs;
  rt_plan_choice *ch = cc_choice_of(c, r);
  /* Winograd where the cost model says it pays, chosen per binding */
  bool wino = rs.tune.conv_algo == CGEN_CONV_AUTO && rt_wino_pays(c, r, cv->W.slot, s);
  /* the batch alone at run time, the direct kernel: one image's constant-size kernel, per image */
  *one_image = cc_conv_one_image(s, img, false);
  /* the implicit GEMM's variants (AVX2, scalar) take the plan's K block at
   * the box's corner, as a specialised object's do (issue 25: KC 256 of K =
   * 288 summed two blocks through C); the direct kernel reads it only when
   * forced, which keeps its own */
  int pkc = ch && s->tune.conv_algo != CGEN_CONV_DIRECT && !conv_plan_direct(c, r, s, &s->tune) ? cc_plan_tile_k(c, r) : 0;
  if (pkc > 0) s->tune.kc = pkc;
  if (ch && *one_image) cc_note_add(ch, "ShapeSet object, the batch read at run time: one image's kernel (built-in blocking), per image");
  if (ch && !*one_image) cc_note_add(ch, pkc > 0 ? "ShapeSet object, sizes read at run time: the direct or depthwise kernel's built-in blocking, the implicit GEMM's (AVX2, scalar) the plan's K block"
                              : "ShapeSet object, sizes read at run time: the direct or depthwise kernel's built-in blocking, not the plan");
  if (ch && !*one_image && wino) cc_note_add(ch, "ShapeSet object: Winograd from this many output pixels an image, chosen per binding");
  if (ch && f32) cc_note_add(ch, "ShapeSet object: bf16 operands widened, fp32 multiply-adds (the run-time kernel has no bf16 form)");
  return true;
}

harp_status cc_emit_conv(rc_ctx *c, int r, const char *fn, ut_str *out, const ct_conv *read, bool *handled,
                       const char **why, rc_packed *pk) {
  const ct_conv cv = *read;
  if (cc_has_resfma(cv.epi, cv.nepi)) return cc_emit_resfma(c, r, fn, out, &cv, NULL, handled, why, pk);
  cgen_conv_spec s;
  cgen_conv_spec_init(&s, cv.n, cv.c, cv.h, cv.w, cv.oc, cv.kh, cv.kw, TINY_FP32);
  s.x_dtype = cv.X.dtype;
  s.w_dtype = cv.W.dtype;
  s.y_dtype = cv.Y.dtype;
  s.groups = cv.groups;
  memcpy(s.stride, cv.stride, sizeof s.stride);
  memcpy(s.dil, cv.dil, sizeof s.dil);
  memcpy(s.pad, cv.pad, sizeof s.pad);
  s.n_epi = cv.nepi;
  if (!cc_epi_to_cgen(cv.epi, cv.nepi, s.epi)) DECLINE("an epilogue step the template has no form of");
  s.prepack_w = packs_once(c, r, cv.W.slot); /* ct_read_conv: W is read straight, never through a cast */
  plan_use pu;
  char rtx[3][160];
  cc_conv_img img;
  bool one_image = false;
  if (conv_rt_spec(c, r, &cv, &s, rtx, &img, &one_image)) {
    pu.ch = NULL, pu.desc[0] = 0;
  } else {
    cgen_tuning bt;
    builtin_tuning(c, &bt);
    /* the plan's M is con->m: the pixels when X is the left operand */
    cc_plan_tuning(c, r, conv_plan_direct(c, r, &s, &bt) ? 'd' : 'c', cv.x_is_lhs, &s.tune, NULL, NULL, &pu);
  }
  s.tune.conv_algo = conv_algo(c);
  if (conv_plan_algo(c, pu.ch, &s)) return c->e->code;
  if (cc_conv_plan_splitk(c, r, &pu, &s)) return c->e->code;
  char kfn[128];
  snprintf(kfn, sizeof kfn, "%s_conv", fn);
  if (!cc_template_body(c, &pu, gen_conv, &s, &s.tune, NULL, NULL, kfn, out)) DECLINE("the template refused the shape");
  /* the AVX-512 variant may be the direct kernel, which reads none of the
   * plan's tiles (cgen_conv_direct has the rule) */
  const char *dwhy = NULL;
  if (pu.ch && cgen_conv_direct(&s, &dwhy) && !s.tune.dconv.px && !s.tune.dconv.cb) {
    char msg[200];
    snprintf(msg, sizeof msg, "conv: the AVX-512 variant is the direct kernel (%.120s); tile and warp tile not used", dwhy);
    cc_note_add(pu.ch, msg);
  }
  const fn_kernel *K = &c->f->kernels[r];
  if (s.prepack_w) {
    emit_wpack(out, fn, kfn, 'a', cv.W.offset, tiny_dtype_size(cv.W.dtype));
    pk->n = 1, pk->slot[0] = cv.W.slot;
    note_packed_only(c, r, cv.W.slot, cv.X.slot, cv.epi, cv.nepi);
  }
  bool q8 = cc_emit_q8conv(c, r, fn, out, &cv, s.prepack_w, one_image ? img.n : NULL, pk) || cc_emit_q8dw(c, r, fn, out, &cv, s.prepack_w, pk);
  ut_str_printf(out, "static int %s(hprt_pool *pool, void *const *bufs) {\n", fn);
  /* a depthwise conv does one vector load per FMA and copies its input
   * plane (cgen_dwconv.c), which a stride makes larger per output: ~8x a
   * GEMM's time per multiply-add, times the stride's (384 channels of 14x14:
   * 0.68 M multiply-adds, 33 us on one core; 576 of 14x14 at stride 2: 0.25 M,
   * 45 us) */
  double dw_cost = cv.groups > 1 && cv.groups == cv.c && cv.oc == cv.c ? 8.0 * cv.stride[0] * cv.stride[1] : 1;
  double per_pixel = dw_cost * cv.oc * (cv.c / cv.groups) * cv.kh * cv.kw;
  if (s.n_expr || s.h_expr || s.w_expr) conv_small_rt(out, &s, per_pixel);
  else if (!one_image) cc_small_on_caller(out, per_pixel * s.n * conv_pixels(&s));
  if (q8) cc_q8_call(out, fn);
  cc_ep_array(out, cv.epi, cv.nepi);
  if (s.prepack_w) ut_str_puts(out, "  /* the weight packed by model_init */\n");
  if (one_image) { /* after the int8 kernel, where it runs */
    cc_emit_conv_images(out, kfn, &s, &img, per_pixel, s.prepack_w ? K->nreads + K->nwrites : cv.W.slot, cv.X.slot, cv.Y.slot);
    *handled = true;
    return HARP_OK;
  }
  ut_str_printf(out, "  return %s(pool, bufs[%d], bufs[%d], bufs[%d], ep) ? 2 : 0;\n}\n\n", kfn,
                s.prepack_w ? K->nreads + K->nwrites : cv.W.slot, cv.X.slot, cv.Y.slot);
  *handled = true;
  return HARP_OK;
}
