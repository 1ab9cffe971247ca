/* cgen_wino.c — Winograd convolution F(m x m, 3 x 3) kernel generator (AVX-512, AVX2).
 * Needs: cgen_wino_int.h (the plan struct; templating, vector layer, runtime;
 * cgen_wino_avx2.c: AVX2's input and output transforms).  Gives:
 * cg_wino_applies (which convs it takes, and why not), cgen_conv_wino_tile (the
 * output tile m a conv spec gets), cg_wino_variant (the AVX-512 or AVX2 variant
 * of a cgen_conv kernel whose tune.conv_algo asks for Winograd), and the
 * emitters both ISAs share (cg_wn_lin, cg_wn_vstore, cg_wn_ocols, cg_wn_epilogue).
 * AVX2 (vectors of 8 tiles, 16 registers): the same plan with any-tiles
 * vectors only (gathers), blocks of 8 or 16 tiles, 12 or 6 output channels
 * per block, outputs stored lane by lane (AVX2 has no scatter).
 *
 * Math (Lavin & Gray 2016): per output channel o, input channel c and tile of
 * m x m outputs, Y = A^T [ sum_c (G g G^T) .* (B^T d B) ] A, where d is the
 * (m+2) x (m+2) input patch and g the 3x3 filter.  m = 2 (4x4 patches, 16
 * transformed points) or m = 4 (6x6, 36 points): 2.25x and 4x fewer
 * multiply-adds than direct convolution.  The T = (m+2)^2 transformed points
 * are T independent GEMMs  M_t[o][tile] = sum_c U_t[o][c] V_t[c][tile].
 *
 * Shape of the emitted code:
 *   filter transform U = G g G^T in double, once per call or once per
 *     instance (prepack_w: F_pack_a at model_init), laid out
 *     Up[t][ob][c][MR] (MR output channels per block, zero-padded);
 *   tasks (image, block of NBT = 16 NV tiles, output-channel part), dynamic
 *     over the pool; per task:
 *   input transform: per 16 tiles the patch's points are masked gathers from
 *     the NCHW input (0 in the padding and past the edges), B^T d B in
 *     registers (coefficients folded in at generation time), stored as
 *     V[t][c][NBT] in per-thread scratch;
 *   per point t, per block of MR output channels: the GEMM on an MR x NV
 *     register micro-tile (a broadcast of U per row, NV vector loads of V
 *     per c, FMA) into M[t][oc][NBT] (per-thread scratch), then per output
 *     channel the output transform A^T M A on 16 tiles
 *     at a time, the epilogue (bias, activations, residual gathered like
 *     the output) and masked scatters into the NCHW output, tails (tiles
 *     past the edge of the output) masked off.
 * Only fp32 input, weight, output and residual; stride 1, dilation 1,
 * groups 1, a 3x3 window, any padding (cg_wino_applies).
 */
#include <stdio.h>
#include <string.h>

#include "backend/c/cgen_wino_int.h"

#define WN_MAX_A 6

/* The transform matrices of F(2x2,3x3) and F(4x4,3x3) (interpolation points
 * 0, 1, -1 and 0, 1, -1, 2, -2, plus infinity), row-major. */
static const double BT2[4][4] = {{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}};
static const double G2[4][3] = {{1, 0, 0}, {.5, .5, .5}, {.5, -.5, .5}, {0, 0, 1}};
static const double AT2[2][4] = {{1, 1, 1, 0}, {0, 1, -1, -1}};
static const double BT4[6][6] = {{4, 0, -5, 0, 1, 0},  {0, -4, -4, 1, 1, 0}, {0, 4, -4, -1, 1, 0},
                                 {0, -2, -1, 2, 1, 0}, {0, 2, -1, -2, 1, 0}, {0, 4, 0, -5, 0, 1}};
static const double G4[6][3] = {{1. / 4, 0, 0},
                                {-1. / 6, -1. / 6, -1. / 6},
                                {-1. / 6, 1. / 6, -1. / 6},
                                {1. / 24, 1. / 12, 1. / 6},
                                {1. / 24, -1. / 12, 1. / 6},
                                {0, 0, 1}};
static const double AT4[4][6] = {{1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -2, 0}, {0, 1, 1, 4, 4, 0}, {0, 1, -1, 8, -8, 1}};


bool cg_wino_applies(const cgen_conv_spec *s, const char **why) {
  if (s->kh != 3 || s->kw != 3) return *why = "not a 3x3 window", false;
  if (s->stride[0] != 1 || s->stride[1] != 1) return *why = "stride is not 1", false;
  if (s->dil[0] != 1 || s->dil[1] != 1) return *why = "dilation is not 1", false;
  if (s->groups != 1) return *why = "grouped", false;
  if (!cg_dtype_ok(s->x_dtype) || !cg_dtype_ok(s->w_dtype) || !cg_dtype_ok(s->y_dtype))
    return *why = "storage other than fp32, fp16 or bf16", false;
  if (s->tune.bf16) return *why = "bf16 multiplication asked for", false;
  for (int i = 0; i < s->n_epi; i++)
    if ((s->epi[i].kind == CGEN_EPI_RESIDUAL && !cg_dtype_ok(s->epi[i].dtype)) || s->epi[i].kind == CGEN_EPI_BIAS_N)
      return *why = "a residual not fp32, fp16 or bf16, or a spatial bias", false;
  if (!(cg_isa_set(&s->tune) & (1u << CGEN_ISA_AVX512 | 1u << CGEN_ISA_AVX2))) return *why = "no AVX-512 or AVX2 variant", false;
  int64_t oh, ow;
  if (!cgen_conv_out_hw(s, &oh, &ow)) return *why = "window does not fit", false;
  if (s->c * 36 * 64 * 4 > (256L << 20)) return *why = "too many input channels for the per-thread scratch", false;
  *why = "winograd asked for";
  return true;
}

int cgen_conv_wino_tile(const cgen_conv_spec *s) {
  if (s->tune.conv_algo == CGEN_CONV_WINO2) return 2;
  if (s->tune.conv_algo == CGEN_CONV_WINO4) return 4;
  /* F(4) wastes a quarter of a 2-wide tail: at 7x7 outputs (4 tiles of 4 for
   * 7) F(2) does 16 tiles x 16 points against F(4)'s 4 x 36 — about even;
   * below 8 outputs a side F(2).  Where F(2)'s rows have 14 tiles or more
   * and F(4)'s fewer (27 to 52 columns), F(2) reads rows by loads where
   * F(4) would gather: 28x28 outputs, 512 channels, one thread 10.8 ms
   * against 12.7 (128 channels: 0.55 against 0.92) */
  int64_t oh, ow;
  if (!cgen_conv_out_hw(s, &oh, &ow)) return 2;
  if (oh < 8 || ow < 8) return 2;
  return (ow + 3) / 4 < 14 && (ow + 1) / 2 >= 14 ? 2 : 4;
}

/* The plan of conv s for vectors of vw lanes (16: AVX-512, 8: AVX2). */
static void wn_plan(cg_wn *d, const cgen_conv_spec *s, int vw) {
  memset(d, 0, sizeof *d);
  d->s = s;
  d->vw = vw;
  d->vt = vw == 16 ? "__m512" : "__m256";
  d->vp = vw == 16 ? "_mm512" : "_mm256";
  d->m = cgen_conv_wino_tile(s);
  d->a = d->m + 2, d->T = d->a * d->a;
  d->bt = d->m == 2 ? &BT2[0][0] : &BT4[0][0];
  d->g = d->m == 2 ? &G2[0][0] : &G4[0][0];
  d->at = d->m == 2 ? &AT2[0][0] : &AT4[0][0];
  cgen_conv_out_hw(s, &d->OH, &d->OW);
  d->TH = (d->OH + d->m - 1) / d->m, d->TW = (d->OW + d->m - 1) / d->m, d->NTI = d->TH * d->TW;
  /* rows of at least 14 tiles: each vector holds tiles of one row (at most
   * 1/8 of the lanes idle), its points contiguous loads split by
   * permutes and its outputs stored as contiguous rows; shorter rows: any
   * 16 tiles of the image, masked gathers and scatters */
  d->nseg = (d->TW + 15) / 16;
  d->rows = vw == 16 && d->TW >= 14;
  d->nvec = d->rows ? d->TH * d->nseg : (d->NTI + vw - 1) / vw;
  /* 32 tiles a block (two vectors) unless the image has at most 16; 64
   * (four vectors, 6 channels: 24 accumulators) where the transformed
   * weights pass 16 MB: every block reads all of them, from DRAM or L3 */
  double ubytes = (double)d->T * (double)s->oc * (double)s->c * 4;
  d->nv = d->nvec > 1 ? 2 : 1;
  if (ubytes > 16e6 && d->nvec > 2 && vw == 16) d->nv = 4;
  d->nbt = vw * d->nv;
  d->mr = d->nv == 4 ? 6 : d->nv == 2 ? 8 : 12;
  /* AVX2 has 16 registers: 6 x 2 accumulators, 2 loads and a broadcast */
  if (vw == 8 && d->nv == 2) d->mr = 6;
  if (s->oc < d->mr) d->mr = (int)s->oc;
  d->nblk = (d->nvec + d->nv - 1) / d->nv;
  d->nob = (s->oc + d->mr - 1) / d->mr, d->ocp = d->nob * d->mr;
  /* few tile blocks: split the output channels too so that every thread
   * has work (each part repeats the input transform) */
  int64_t want = 4 * (s->tune.threads > 0 ? s->tune.threads : 2);
  d->nos = 1;
  while (s->n * d->nblk * d->nos * 2 <= want && d->nob / (d->nos * 2) >= 2) d->nos *= 2;
}

/* Size `name` of d's image as C text in buf: the constant v, or with sizes
 * read at run time (d->rt) the field of the run's geometry g. */
static const char *wz(const cg_wn *d, char buf[48], const char *name, int64_t v) {
  if (d->rt) snprintf(buf, 48, "g->%s", name);
  else snprintf(buf, 48, "%ldL", (long)v);
  return buf;
}

/* The geometry parameter of an emitted function's signature ("" unless d->rt). */
static const char *wg(const cg_wn *d) { return d->rt ? ", const $P_wg *g" : ""; }

void cg_wn_lin(cg_out *o, const cg_wn *d, const char *dst, const double *row, int n, const char *fmt) {
  const char *vp = d->vp;
  char term[64];
  bool first = true;
  cg_emit(o, "%s = ", dst);
  for (int k = 0; k < n; k++) {
    double c = row[k];
    if (c == 0) continue;
    snprintf(term, sizeof term, fmt, k);
    if (first && c == 1) cg_emit(o, "%s", term);
    else if (first && c == -1) cg_emit(o, "%s_sub_ps(%s_setzero_ps(), %s)", vp, vp, term);
    else if (first) cg_emit(o, "%s_mul_ps(%s_set1_ps((float)%.17g), %s)", vp, vp, c, term);
    else if (c == 1) cg_emit(o, " + %s", term);
    else if (c == -1) cg_emit(o, " - %s", term);
    else cg_emit(o, " + %s_mul_ps(%s_set1_ps((float)%.17g), %s)", vp, vp, c, term);
    first = false;
  }
  if (first) cg_emit(o, "%s_setzero_ps()", vp);
  cg_emit(o, ";\n");
}

/* The filter transform of output-channel block `task`: Up[t][ob][c][MR].
 * Per input channel the block's MR filters are transformed into a local
 * u[t][MR] first, then stored as T runs of MR contiguous floats: storing
 * each U straight to Up (one float per point, the points a whole
 * ob x C x MR slab apart, 270 KB at 256 channels, the same L1 set) cost
 * 1.4-2.6x the CPU time (this host, one thread, 64->64 to 512->512). */
static void emit_wpack(cg_out *o, const cg_wn *d) {
  const cgen_conv_spec *s = d->s;
  cg_emit(o, "static $T void $P_wtask(void *vc, int task, int tid) {\n  (void)tid;\n");
  cg_emit(o, "  const $P_wctx *cx = (const $P_wctx *)vc;\n");
  if (s->w_dtype == TINY_FP32) cg_emit(o, "  const float *W = (const float *)cx->A;\n");
  cg_emit(o, "  static const double G[%d][3] = {", d->a);
  for (int i = 0; i < d->a; i++)
    cg_emit(o, "{%.17g, %.17g, %.17g}%s", d->g[i * 3], d->g[i * 3 + 1], d->g[i * 3 + 2], i + 1 < d->a ? ", " : "};\n");
  cg_emit(o, "  for (long c = 0; c < %ldL; c++) {\n    float u[%d][%d];\n", (long)s->c, d->a * d->a, d->mr);
  cg_emit(o, "    for (int r = 0; r < %d; r++) {\n      long oc = (long)task * %d + r;\n", d->mr, d->mr);
  cg_emit(o, "      double g[3][3], tg[%d][3];\n", d->a);
  if (s->w_dtype == TINY_FP32) {
    cg_emit(o, "      for (int k = 0; k < 9; k++) g[k / 3][k %% 3] = oc < %ldL ? W[(oc * %ldL + c) * 9 + k] : 0.0;\n",
            (long)s->oc, (long)s->c);
  } else { /* half storage: each tap widened (model_init, or once a call) */
    char ld[160], ix[64];
    snprintf(ix, sizeof ix, "(oc * %ldL + c) * 9 + k", (long)s->c);
    cg_scalar_ld(o, ld, sizeof ld, s->w_dtype, "cx->A", ix);
    cg_emit(o, "      for (int k = 0; k < 9; k++) g[k / 3][k %% 3] = oc < %ldL ? %s : 0.0;\n", (long)s->oc, ld);
  }
  cg_emit(o, "      for (int i = 0; i < %d; i++) for (int j = 0; j < 3; j++)\n", d->a);
  cg_emit(o, "        tg[i][j] = G[i][0] * g[0][j] + G[i][1] * g[1][j] + G[i][2] * g[2][j];\n");
  cg_emit(o, "      for (int i = 0; i < %d; i++) for (int j = 0; j < %d; j++)\n", d->a, d->a);
  cg_emit(o, "        u[i * %d + j][r] = (float)(tg[i][0] * G[j][0] + tg[i][1] * G[j][1] + tg[i][2] * G[j][2]);\n", d->a);
  cg_emit(o, "    }\n");
  cg_emit(o, "    for (int t = 0; t < %d; t++) for (int r = 0; r < %d; r++)\n", d->a * d->a, d->mr);
  cg_emit(o, "      cx->Up[(((long)t * %ldL + task) * %ldL + c) * %d + r] = u[t][r];\n", (long)d->nob, (long)s->c, d->mr);
  cg_emit(o, "  }\n}\n");
}

/* Gather indices and masks of a block's tiles: input point (r, k) of lane
 * l of vector v at ix[(v * A + r) * A + k][l] (mask bit l of im[..]),
 * output point (i, j) at ox / om[(v * m + i) * m + j]. */
static void emit_index(cg_out *o, const cg_wn *d) {
  const cgen_conv_spec *s = d->s;
  char b[6][48];
  const char *nti = wz(d, b[0], "nti", d->NTI), *tw = wz(d, b[1], "tw", d->TW), *h = wz(d, b[2], "h", s->h);
  const char *w = wz(d, b[3], "w", s->w), *oh = wz(d, b[4], "oh", d->OH), *ow = wz(d, b[5], "ow", d->OW);
  cg_emit(o, "static $T void $P_index(long blk, int ix[][%d], uint16_t *im, int ox[][%d], uint16_t *om%s) {\n", d->vw, d->vw,
          wg(d));
  cg_emit(o, "  for (int v = 0; v < %d; v++) {\n", d->nv);
  cg_emit(o, "    for (int q = 0; q < %d; q++) im[v * %d + q] = 0;\n", d->T, d->T);
  cg_emit(o, "    for (int q = 0; q < %d; q++) om[v * %d + q] = 0;\n", d->m * d->m, d->m * d->m);
  cg_emit(o, "    for (int l = 0; l < %d; l++) {\n", d->vw);
  cg_emit(o, "      long tile = blk * %dL + v * %d + l;\n      int live = tile < %s;\n", d->nbt, d->vw, nti);
  cg_emit(o, "      if (!live) tile = 0;\n      long th = tile / %s, tw = tile %% %s;\n", tw, tw);
  cg_emit(o, "      for (int r = 0; r < %d; r++) for (int k = 0; k < %d; k++) {\n", d->a, d->a);
  cg_emit(o, "        long ih = th * %d - %ldL + r, iw = tw * %d - %ldL + k;\n", d->m, (long)s->pad[0], d->m,
          (long)s->pad[1]);
  cg_emit(o, "        int in = live && ih >= 0 && ih < %s && iw >= 0 && iw < %s;\n", h, w);
  cg_emit(o, "        ix[(v * %d + r) * %d + k][l] = in ? (int)(ih * %s + iw) : 0;\n", d->a, d->a, w);
  cg_emit(o, "        im[v * %d + r * %d + k] |= (uint16_t)(in << l);\n      }\n", d->T, d->a);
  cg_emit(o, "      for (int i = 0; i < %d; i++) for (int j = 0; j < %d; j++) {\n", d->m, d->m);
  cg_emit(o, "        long oh = th * %d + i, ow = tw * %d + j;\n", d->m, d->m);
  cg_emit(o, "        int in = live && oh < %s && ow < %s;\n", oh, ow);
  cg_emit(o, "        ox[(v * %d + i) * %d + j][l] = in ? (int)(oh * %s + ow) : 0;\n", d->m, d->m, ow);
  cg_emit(o, "        om[v * %d + i * %d + j] |= (uint16_t)(in << l);\n      }\n", d->m * d->m, d->m);
  cg_emit(o, "    }\n  }\n}\n");
}

void cg_wn_vstore(cg_out *o, const cg_wn *d) {
  int a = d->a;
  char fmt[32];
  for (int i = 0; i < a; i++)
    for (int j = 0; j < a; j++) {
      cg_emit(o, "    { %s t;\n", d->vt);
      snprintf(fmt, sizeof fmt, "e[%%d][%d]", j);
      cg_wn_lin(o, d, "      t", d->bt + i * a, a, fmt);
      cg_emit(o, "      %s_storeu_ps(V + (%dL * %ldL + c) * %d + v * %d, t); }\n", d->vp, i * a + j, (long)d->s->c, d->nbt,
              d->vw);
    }
}

/* Input transform of channel c of one image (x: its plane) into V (and
 * AVX2's mask helper, which the output transform uses too). */
static void emit_itrans(cg_out *o, const cg_wn *d) {
  char dst[64];
  int a = d->a;
  if (d->vw == 8) cg_wn_avx2_helpers(o);
  cg_emit(o, "static $T void $P_itrans(const float *x, long c, int ix[][%d], const uint16_t *im, float *V) {\n", d->vw);
  cg_emit(o, "  for (int v = 0; v < %d; v++) {\n    %s d[%d], e[%d][%d];\n", d->nv, d->vt, a, a, a);
  for (int r = 0; r < a; r++) {
    for (int k = 0; k < a; k++)
      if (d->vw == 8) cg_wn_gather_avx2(o, d, r, k);
      else
        cg_emit(o, "    d[%d] = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), im[v * %d + %d], "
                   "_mm512_loadu_si512(ix[(v * %d + %d) * %d + %d]), x, 4);\n",
                k, d->T, r * a + k, a, r, a, k);
    for (int j = 0; j < a; j++) {
      snprintf(dst, sizeof dst, "    e[%d][%d]", r, j);
      cg_wn_lin(o, d, dst, d->bt + j * a, a, "d[%d]");
    }
  }
  cg_wn_vstore(o, d);
  cg_emit(o, "  }\n}\n");
}

/* The T GEMMs of output-channel blocks [ob0, ob1): M[t][oc][NBT] = sum_c
 * U V, point by point (V_t, C x NBT, stays in L1/L2 across the blocks). */
static void emit_gemm(cg_out *o, const cg_wn *d) {
  const cgen_conv_spec *s = d->s;
  cg_emit(o, "static $T void $P_gemm(const float *U, const float *V, float *M, long ob0, long ob1) {\n");
  cg_emit(o, "  for (int t = 0; t < %d; t++) {\n", d->T);
  cg_emit(o, "    const float *vv = V + (long)t * %ldL;\n", (long)(s->c * d->nbt));
  cg_emit(o, "    for (long ob = ob0; ob < ob1; ob++) {\n");
  cg_emit(o, "    const float *u = U + ((long)t * %ldL + ob) * %ldL;\n", (long)d->nob, (long)(s->c * d->mr));
  cg_emit(o, "    float *mo = M + ((long)t * %ldL + ob * %d) * %d;\n", (long)d->ocp, d->mr, d->nbt);
  for (int r = 0; r < d->mr; r++)
    for (int v = 0; v < d->nv; v++) cg_emit(o, "    %s a%d_%d = %s_setzero_ps();\n", d->vt, r, v, d->vp);
  cg_emit(o, "    for (long c = 0; c < %ldL; c++) {\n", (long)s->c);
  for (int v = 0; v < d->nv; v++)
    cg_emit(o, "      %s b%d = %s_loadu_ps(vv + c * %d + %d);\n", d->vt, v, d->vp, d->nbt, v * d->vw);
  cg_emit(o, "      _mm_prefetch((const char *)(u + c * %d) + 1024, _MM_HINT_T0);\n", d->mr);
  for (int r = 0; r < d->mr; r++) {
    cg_emit(o, "      { %s w = %s_set1_ps(u[c * %d + %d]);", d->vt, d->vp, d->mr, r);
    for (int v = 0; v < d->nv; v++) cg_emit(o, " a%d_%d = %s_fmadd_ps(w, b%d, a%d_%d);", r, v, d->vp, v, r, v);
    cg_emit(o, " }\n");
  }
  cg_emit(o, "    }\n");
  for (int r = 0; r < d->mr; r++)
    for (int v = 0; v < d->nv; v++) cg_emit(o, "    %s_storeu_ps(mo + %d, a%d_%d);\n", d->vp, r * d->nbt + v * d->vw, r, v);
  cg_emit(o, "    }\n  }\n}\n");
}

void cg_wn_ocols(cg_out *o, const cg_wn *d) {
  int a = d->a;
  char dst[64], fmt[32];
  cg_emit(o, "    for (int t = 0; t < %d; t++) q[t] = %s_loadu_ps(M + ((long)t * %ldL + r) * %d + v * %d);\n", d->T, d->vp,
          (long)d->ocp, d->nbt, d->vw);
  for (int i = 0; i < d->m; i++)
    for (int col = 0; col < a; col++) {
      snprintf(dst, sizeof dst, "    sm[%d][%d]", i, col);
      snprintf(fmt, sizeof fmt, "q[%%d * %d + %d]", a, col);
      cg_wn_lin(o, d, dst, d->at + i * a, a, fmt);
    }
}

void cg_wn_epilogue(cg_out *o, const cg_wn *d) {
  const cgen_conv_spec *s = d->s;
  char plane[96];
  for (int e = 0; e < s->n_epi; e++) {
    const cgen_epi *ep = &s->epi[e];
    if (cg_emit_epi_common(o, ep, e, "oc", "x") || ep->kind != CGEN_EPI_RESIDUAL) continue;
    char b[48];
    snprintf(plane, sizeof plane, "(const float *)tt->ep[%d] + oc * %s", e, wz(d, b, "ohw", d->OH * d->OW));
    if (d->vw == 16) cg_emit(o, "      { __m512 rv = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), k, oi, %s, 4);", plane);
    else
      cg_emit(o, "      { __m256 rv = _mm256_mask_i32gather_ps(_mm256_setzero_ps(), %s, "
                 "_mm256_loadu_si256((const __m256i *)oi), $P_wbm(b), 4);", plane);
    cg_emit(o, " x = x %s rv; }\n", ep->mul ? "*" : "+");
  }
}

/* Output transform, epilogue and store of channel oc (row r of M). */
static void emit_otrans(cg_out *o, const cg_wn *d) {
  int a = d->a, m = d->m;
  char fmt[32];
  char b[48];
  const char *ohw = wz(d, b, "ohw", d->OH * d->OW);
  cg_emit(o, "static $T void $P_otrans(const $P_wtt *tt, const float *M, int r, long oc, int ox[][%d], const uint16_t *om%s) {\n",
          d->vw, wg(d));
  if (d->vw == 8) cg_emit(o, "  float *y = (float *)tt->y + oc * %s;\n", ohw);
  cg_emit(o, "  for (int v = 0; v < %d; v++) {\n    %s q[%d], sm[%d][%d];\n", d->nv, d->vt, d->T, m, a);
  cg_wn_ocols(o, d);
  for (int i = 0; i < m; i++)
    for (int j = 0; j < m; j++) {
      cg_emit(o, "    {\n      %s x;\n", d->vt);
      snprintf(fmt, sizeof fmt, "sm[%d][%%d]", i);
      cg_wn_lin(o, d, "      x", d->at + j * a, a, fmt);
      if (d->vw == 8) {
        cg_wn_opoint_avx2(o, d, i, j);
        continue;
      }
      cg_emit(o, "      __mmask16 k = om[v * %d + %d];\n", m * m, i * m + j);
      cg_emit(o, "      __m512i oi = _mm512_loadu_si512(ox[(v * %d + %d) * %d + %d]);\n", m, i, m, j);
      cg_wn_epilogue(o, d);
      cg_emit(o, "      _mm512_mask_i32scatter_ps((float *)tt->y + oc * %s, k, oi, x, 4);\n    }\n", ohw);
    }
  cg_emit(o, "  }\n}\n");
}

/* ---- row mode: a vector is 16 tiles of one tile row ------------------------- */
/* Per vector v of block blk: the first input row ih0 (H when the vector is
 * past the last: every row reads as 0), the first output row oh0 (OH then)
 * and column c0, the masks of the m + 1 input loads of a row (lm) and of
 * the m output stores (sm). */
static void emit_rindex(cg_out *o, const cg_wn *d) {
  const cgen_conv_spec *s = d->s;
  int m = d->m;
  char b[6][48];
  const char *nseg = wz(d, b[0], "nseg", d->nseg), *nvec = wz(d, b[1], "nvec", d->nvec), *h = wz(d, b[2], "h", s->h);
  const char *oh = wz(d, b[3], "oh", d->OH), *w = wz(d, b[4], "w", s->w), *ow = wz(d, b[5], "ow", d->OW);
  cg_emit(o, "static $T void $P_rindex(long blk, long *ih0, long *oh0, long *c0, uint16_t *lm, uint16_t *sm%s) {\n", wg(d));
  cg_emit(o, "  for (int v = 0; v < %d; v++) {\n    long %s = blk * %dL + v, th = %s / %s, tw0 = %s %% %s * 16;\n",
          d->nv, d->rt ? "q_" : "g", d->nv, d->rt ? "q_" : "g", nseg, d->rt ? "q_" : "g", nseg);
  cg_emit(o, "    int live = %s < %s;\n", d->rt ? "q_" : "g", nvec);
  cg_emit(o, "    ih0[v] = live ? th * %d - %ldL : %s;\n    oh0[v] = live ? th * %d : %s;\n    c0[v] = tw0 * %d;\n",
          m, (long)s->pad[0], h, m, oh, m);
  cg_emit(o, "    for (int q = 0; q <= %d; q++) {\n      uint16_t k = 0;\n", m);
  cg_emit(o, "      for (int l = 0; l < 16; l++) { long iw = tw0 * %d - %ldL + q * 16 + l;"
             " k |= (uint16_t)((live && iw >= 0 && iw < %s) << l); }\n", m, (long)s->pad[1], w);
  cg_emit(o, "      lm[v * %d + q] = k;\n      if (q == %d) break;\n      k = 0;\n", m + 1, m);
  cg_emit(o, "      for (int l = 0; l < 16; l++) k |= (uint16_t)((live && tw0 * %d + q * 16 + l < %s) << l);\n", m, ow);
  cg_emit(o, "      sm[v * %d + q] = k;\n    }\n  }\n}\n", m);
}

/* idx lanes of a permutex2var: lane p <- element e(p) of the pair (a, b). */
static void emit_idx(cg_out *o, const int *e) {
  cg_emit(o, "_mm512_setr_epi32(");
  for (int p = 0; p < 16; p++) cg_emit(o, "%d%s", e[p], p < 15 ? ", " : ")");
}

/* "dst = " lanes p of permutex2var(a0, e, a1), or with four sources lanes
 * in `hi` from permutex2var(a2, e, a3) (a2 NULL: two sources). */
static void emit_pick(cg_out *o, const char *dst, const int *e, unsigned hi, const char *a0, const char *a1, const char *a2,
                      const char *a3) {
  cg_emit(o, "      %s = ", dst);
  if (a2) cg_emit(o, "_mm512_mask_blend_ps(0x%04x, ", hi);
  cg_emit(o, "_mm512_permutex2var_ps(%s, ", a0);
  emit_idx(o, e);
  cg_emit(o, ", %s)", a1);
  if (a2) {
    cg_emit(o, ", _mm512_permutex2var_ps(%s, ", a2);
    emit_idx(o, e);
    cg_emit(o, ", %s))", a3);
  }
  cg_emit(o, ";\n");
}

/* Point k < m of 16 tiles from the loads L0..: element l*m + k of the row. */
static void emit_split(cg_out *o, const cg_wn *d, int k) {
  int e[16];
  char dst[16];
  for (int l = 0; l < 16; l++) e[l] = (l * d->m + k) & 31;
  snprintf(dst, sizeof dst, "d[%d]", k);
  if (d->m == 2) emit_pick(o, dst, e, 0, "L0", "L1", NULL, NULL);
  else emit_pick(o, dst, e, 0xFF00u, "L0", "L1", "L2", "L3");
}

/* Input transform of channel c in row mode (x: its plane). */
static void emit_ritrans(cg_out *o, const cg_wn *d) {
  const cgen_conv_spec *s = d->s;
  int a = d->a, m = d->m;
  char dst[64];
  char b[2][48];
  const char *h = wz(d, b[0], "h", s->h), *w = wz(d, b[1], "w", s->w);
  cg_emit(o, "static $T void $P_ritrans(const float *x, long c, const long *ih0, const long *c0, const uint16_t *lm,"
             " float *V%s) {\n", wg(d));
  cg_emit(o, "  for (int v = 0; v < %d; v++) {\n    __m512 d[%d], e[%d][%d];\n", d->nv, a, a, a);
  cg_emit(o, "    const float *xr = x + c0[v] - %ldL;\n", (long)s->pad[1]);
  for (int r = 0; r < a; r++) {
    cg_emit(o, "    if (ih0[v] + %d >= 0 && ih0[v] + %d < %s) {\n", r, r, h);
    cg_emit(o, "      const float *row = xr + (ih0[v] + %d) * %s;\n", r, w);
    for (int q = 0; q <= m; q++)
      cg_emit(o, "      __m512 L%d = _mm512_maskz_loadu_ps(lm[v * %d + %d], row + %d);\n", q, m + 1, q, 16 * q);
    for (int k = 0; k < m; k++) emit_split(o, d, k);
    for (int j = 0; j < 2; j++)
      cg_emit(o, "      d[%d] = _mm512_castsi512_ps(_mm512_alignr_epi32(_mm512_castps_si512(%s), _mm512_castps_si512(d[%d]), 1));\n",
              m + j, j == 0 ? (m == 2 ? "L2" : "L4")
                             : (m == 2 ? "_mm512_castsi512_ps(_mm512_alignr_epi32(_mm512_castps_si512(L2), _mm512_castps_si512(L2), 1))"
                                       : "_mm512_castsi512_ps(_mm512_alignr_epi32(_mm512_castps_si512(L4), _mm512_castps_si512(L4), 1))"),
              j);
    cg_emit(o, "    } else {\n");
    for (int k = 0; k < a; k++) cg_emit(o, "      d[%d] = _mm512_setzero_ps();\n", k);
    cg_emit(o, "    }\n");
    for (int j = 0; j < a; j++) {
      snprintf(dst, sizeof dst, "    e[%d][%d]", r, j);
      cg_wn_lin(o, d, dst, d->bt + j * a, a, "d[%d]");
    }
  }
  cg_wn_vstore(o, d);
  cg_emit(o, "  }\n}\n");
}

/* Output q (of m) of an output row: lanes p <- tile (16q + p) / m, point
 * (16q + p) % m of y0..y(m-1). */
static void emit_merge(cg_out *o, const cg_wn *d, int q) {
  int e[16];
  unsigned hi = 0;
  for (int p = 0; p < 16; p++) {
    int g = 16 * q + p, l = g / d->m, j = g % d->m;
    e[p] = (j & 1) * 16 + l;
    if (j >= 2) hi |= 1u << p;
  }
  if (d->m == 2) emit_pick(o, "x", e, 0, "y0", "y1", NULL, NULL);
  else emit_pick(o, "x", e, hi, "y0", "y1", "y2", "y3");
}

/* Output transform, epilogue and store of channel oc in row mode. */
static void emit_rotrans(cg_out *o, const cg_wn *d) {
  const cgen_conv_spec *s = d->s;
  int a = d->a, m = d->m;
  char dst[64], fmt[32], b[3][48];
  const char *ohw = wz(d, b[0], "ohw", d->OH * d->OW), *oh = wz(d, b[1], "oh", d->OH), *ow = wz(d, b[2], "ow", d->OW);
  cg_emit(o, "static $T void $P_rotrans(const $P_wtt *tt, const float *M, int r, long oc, const long *oh0, const long *c0,"
             " const uint16_t *smk%s) {\n", wg(d));
  cg_emit(o, "  for (int v = 0; v < %d; v++) {\n    __m512 q[%d], sm[%d][%d];\n", d->nv, d->T, m, a);
  cg_emit(o, "    if (oh0[v] >= %s) continue;\n", oh);
  cg_wn_ocols(o, d);
  for (int i = 0; i < m; i++) {
    cg_emit(o, "    if (oh0[v] + %d < %s) {\n      __m512 x;\n", i, oh);
    for (int j = 0; j < m; j++) {
      snprintf(dst, sizeof dst, "      __m512 y%d", j);
      snprintf(fmt, sizeof fmt, "sm[%d][%%d]", i);
      cg_wn_lin(o, d, dst, d->at + j * a, a, fmt);
    }
    cg_emit(o, "      long at = oc * %s + (oh0[v] + %d) * %s + c0[v];\n", ohw, i, ow);
    for (int qq = 0; qq < m; qq++) {
      emit_merge(o, d, qq);
      cg_emit(o, "      { __mmask16 k = smk[v * %d + %d];\n", m, qq);
      for (int e = 0; e < s->n_epi; e++) {
        const cgen_epi *ep = &s->epi[e];
        if (cg_emit_epi_common(o, ep, e, "oc", "x")) continue;
        if (ep->kind == CGEN_EPI_RESIDUAL)
          cg_emit(o, "      x = x %s _mm512_maskz_loadu_ps(k, (const float *)tt->ep[%d] + at + %d);\n", ep->mul ? "*" : "+",
                  e, 16 * qq);
      }
      cg_emit(o, "      _mm512_mask_storeu_ps((float *)tt->y + at + %d, k, x); }\n", 16 * qq);
    }
    cg_emit(o, "    }\n");
  }
  cg_emit(o, "  }\n}\n");
}

/* One task: image n, tile block blk, output-channel part os. */
static void emit_task(cg_out *o, const cg_wn *d) {
  const cgen_conv_spec *s = d->s;
  char b[6][48];
  const char *nos = wz(d, b[0], "nos", d->nos), *nblk = wz(d, b[1], "nblk", d->nblk);
  const char *chw = wz(d, b[2], "chw", s->c * s->h * s->w), *hw = wz(d, b[3], "hw", s->h * s->w);
  const char *ochw = wz(d, b[4], "ochw", s->oc * d->OH * d->OW), *ga = d->rt ? ", g" : "";
  cg_emit(o, "static $T void $P_wino(void *vc, int task, int tid) {\n");
  cg_emit(o, "  const $P_wctx *cx = (const $P_wctx *)vc;\n");
  if (d->rt) cg_emit(o, "  const $P_wg *g = &cx->g;\n");
  cg_emit(o, "  long os = task %% %s, r0 = task / %s, blk = r0 %% %s, n = r0 / %s;\n", nos, nos, nblk, nblk);
  cg_emit(o, "  float *V = (float *)cx->sc.thr[tid], *M = V + %ldL;\n", (long)(d->T * s->c * d->nbt));
  cg_emit(o, "  const float *x = (const float *)cx->B + n * %s;\n", chw);
  if (d->rows) {
    cg_emit(o, "  long ih0[%d], oh0[%d], c0[%d];\n  uint16_t lm[%d], sm[%d];\n", d->nv, d->nv, d->nv, d->nv * (d->m + 1),
            d->nv * d->m);
    cg_emit(o, "  $P_rindex(blk, ih0, oh0, c0, lm, sm%s);\n", ga);
    cg_emit(o, "  for (long c = 0; c < %ldL; c++) $P_ritrans(x + c * %s, c, ih0, c0, lm, V%s);\n", (long)s->c, hw, ga);
  } else {
    cg_emit(o, "  int ix[%d][%d], ox[%d][%d];\n  uint16_t im[%d], om[%d];\n", d->nv * d->T, d->vw, d->nv * d->m * d->m, d->vw,
            d->nv * d->T, d->nv * d->m * d->m);
    cg_emit(o, "  $P_index(blk, ix, im, ox, om%s);\n", ga);
    cg_emit(o, "  for (long c = 0; c < %ldL; c++) $P_itrans(x + c * %s, c, ix, im, V);\n", (long)s->c, hw);
  }
  cg_emit(o, "  $P_wtt tt;\n  tt.y = (float *)cx->C + n * %s;\n", ochw);
  for (int i = 0; i < s->n_epi; i++) {
    const cgen_epi *ep = &s->epi[i];
    if (ep->kind == CGEN_EPI_RESIDUAL) cg_emit(o, "  tt.ep[%d] = (const float *)cx->ep[%d] + n * %s;\n", i, i, ochw);
    else cg_emit(o, "  tt.ep[%d] = cx->ep[%d];\n", i, i);
  }
  const char *per = wz(d, b[5], "per", (d->nob + d->nos - 1) / d->nos);
  cg_emit(o, "  long ob1 = (os + 1) * %s < %ldL ? (os + 1) * %s : %ldL;\n", per, (long)d->nob, per, (long)d->nob);
  cg_emit(o, "  $P_gemm(cx->Up, V, M, os * %s, ob1);\n", per);
  cg_emit(o, "  for (long ob = os * %s; ob < ob1; ob++) {\n", per);
  if (d->rows)
    cg_emit(o, "    for (int r = 0; r < %d && ob * %d + r < %ldL; r++) $P_rotrans(&tt, M, ob * %d + r, ob * %d + r, oh0, c0, sm%s);\n",
            d->mr, d->mr, (long)s->oc, d->mr, d->mr, ga);
  else
    cg_emit(o, "    for (int r = 0; r < %d && ob * %d + r < %ldL; r++) $P_otrans(&tt, M, ob * %d + r, ob * %d + r, ox, om%s);\n",
            d->mr, d->mr, (long)s->oc, d->mr, d->mr, ga);
  cg_emit(o, "  }\n}\n");
}

/* Everything of plan d's kernel before $P_run: the filter transform, the
 * input transform of its mode, the GEMMs, the output transform, the task. */
static void emit_body(cg_out *o, const cg_wn *d) {
  emit_wpack(o, d);
  if (d->rows) {
    emit_rindex(o, d);
    emit_ritrans(o, d);
  } else {
    emit_index(o, d);
    emit_itrans(o, d);
  }
  emit_gemm(o, d);
  if (d->rows) emit_rotrans(o, d);
  else emit_otrans(o, d);
  emit_task(o, d);
}

/* Whether s stores any tensor the kernel reads or writes in fp16 / bf16
 * (the weight aside: the filter transform widens it). */
static bool wn_half(const cgen_conv_spec *s) {
  bool h = s->x_dtype != TINY_FP32 || s->y_dtype != TINY_FP32;
  for (int i = 0; i < s->n_epi; i++) h |= s->epi[i].kind == CGEN_EPI_RESIDUAL && s->epi[i].dtype != TINY_FP32;
  return h;
}

/* Half-precision storage around the fp32 kernel: the conversion tasks
 * ($P_wx: the input, $P_wr<i>: residual i, widened into scratch; $P_wy:
 * the fp32 output narrowed into y) and their offsets in the shared
 * scratch after `at` bytes (64-byte aligned); the bytes in all. */
static long emit_half_cvts(cg_out *o, const cg_wn *d, long at, long *xoff, long *roff, long *yoff) {
  const cgen_conv_spec *s = d->s;
  long xn = (long)(s->n * s->c * s->h * s->w), yn = (long)(s->n * s->oc * d->OH * d->OW);
  char nm[16], src[32], dst[32];
  *xoff = *yoff = -1;
  if (s->x_dtype != TINY_FP32) {
    cg_emit_cvt(o, "wx", "$P_wctx", "cx->X0", "cx->B", s->x_dtype, xn, false);
    *xoff = at, at += cg_rup(xn * 4, 64);
  }
  for (int i = 0; i < s->n_epi; i++) {
    roff[i] = -1;
    if (s->epi[i].kind != CGEN_EPI_RESIDUAL || s->epi[i].dtype == TINY_FP32) continue;
    snprintf(nm, sizeof nm, "wr%d", i), snprintf(src, sizeof src, "cx->E0[%d]", i), snprintf(dst, sizeof dst, "cx->E[%d]", i);
    cg_emit_cvt(o, nm, "$P_wctx", src, dst, s->epi[i].dtype, yn, false);
    roff[i] = at, at += cg_rup(yn * 4, 64);
  }
  if (s->y_dtype != TINY_FP32) {
    cg_emit_cvt(o, "wy", "$P_wctx", "cx->C", "cx->Y0", s->y_dtype, yn, true);
    *yoff = at, at += cg_rup(yn * 4, 64);
  }
  return at;
}

/* The pool tasks of a conversion over n elements. */
static long cvt_tasks(long n) { return (n + CG_WIDEN_CHUNK - 1) / CG_WIDEN_CHUNK; }

/* $P_pack_a_bytes_run / $P_pack_a_run: the filter transform of every
 * output-channel block into ubytes at model_init. */
static void emit_pack_entry(cg_out *o, const cg_wn *d, long ubytes) {
    cg_emit(o, "static $T long $P_pack_a_bytes_run(void) { return %ldL; }\n", ubytes);
    cg_emit(o, "static $T int $P_pack_a_run(hprt_pool *pool, const void *A, void *Ap) {\n");
    cg_emit(o, "  $P_wctx cx;\n  memset(&cx, 0, sizeof cx);\n  cx.A = A; cx.Up = (float *)Ap;\n");
    cg_emit(o, "  hprt_pool_run(pool, %ld, $P_wtask, &cx);\n  return 0;\n}\n", (long)d->nob);
}

/* $P_run (and with prepack_w $P_pack_a_run / _bytes_run): the filter
 * transform unless done at model_init, half-precision tensors converted
 * around the fp32 kernel (wn_half), the tasks of the kernel. */
static void emit_run(cg_out *o, const cg_wn *d) {
  const cgen_conv_spec *s = d->s;
  bool half = wn_half(s);
  long ubytes = (long)(d->T * d->ocp * s->c * 4), ntask = (long)(s->n * d->nblk * d->nos);
  long thr = (long)((d->T * s->c * d->nbt + d->T * d->ocp * d->nbt) * 4);
  long xoff = -1, yoff = -1, roff[CGEN_MAX_EPI], sh = s->prepack_w ? 0L : ubytes;
  long xn = (long)(s->n * s->c * s->h * s->w), yn = (long)(s->n * s->oc * d->OH * d->OW);
  if (half) sh = emit_half_cvts(o, d, cg_rup(sh, 64), &xoff, roff, &yoff);
  if (s->prepack_w) emit_pack_entry(o, d, ubytes);
  cg_emit(o, "static $T int $P_run(hprt_pool *pool, const void *A, const void *B, void *C, const void *const *ep) {\n");
  cg_emit(o, "  $P_wctx cx;\n%s  cx.A = A; cx.B = B; cx.C = C; cx.ep = ep;\n", half ? "  memset(&cx, 0, sizeof cx);\n" : "");
  cg_emit(o, "  if (hprt_scratch_get(pool, %ldUL, %ldUL, &cx.sc)) return -1;\n", sh, thr);
  if (xoff >= 0)
    cg_emit(o, "  cx.X0 = B;\n  cx.B = cx.sc.shared + %ldL;\n  hprt_pool_run(pool, %ld, $P_wx, &cx);\n", xoff, cvt_tasks(xn));
  if (half) cg_emit(o, "  const void *ep2[%d];\n  for (int i = 0; i < %d; i++) ep2[i] = ep ? ep[i] : 0;\n", CGEN_MAX_EPI, s->n_epi);
  for (int i = 0; half && i < s->n_epi; i++)
    if (roff[i] >= 0)
      cg_emit(o, "  cx.E0[%d] = ep[%d];\n  cx.E[%d] = (float *)(cx.sc.shared + %ldL);\n  ep2[%d] = cx.E[%d];\n"
                 "  hprt_pool_run(pool, %ld, $P_wr%d, &cx);\n", i, i, i, roff[i], i, i, cvt_tasks(yn), i);
  if (half) cg_emit(o, "  cx.ep = ep2;\n");
  if (yoff >= 0) cg_emit(o, "  cx.Y0 = C;\n  cx.C = cx.sc.shared + %ldL;\n", yoff);
  if (s->prepack_w) {
    cg_emit(o, "  cx.Up = (float *)A;\n");
  } else {
    cg_emit(o, "  cx.Up = (float *)cx.sc.shared;\n");
    cg_emit(o, "  hprt_pool_run(pool, %ld, $P_wtask, &cx);\n", (long)d->nob);
  }
  cg_emit(o, "  hprt_pool_run(pool, %ld, $P_wino, &cx);\n", ntask);
  if (yoff >= 0) cg_emit(o, "  hprt_pool_run(pool, %ld, $P_wy, &cx);\n", cvt_tasks(yn));
  cg_emit(o, "  hprt_scratch_put(&cx.sc);\n  return 0;\n}\n");
}

harp_status cg_wino_variant(harp_error *e, cg_out *o, const cgen_conv_spec *s) {
  const char *why;
  if (!cg_wino_applies(s, &why)) return ut_fail(e, HARP_E_UNSUPPORTED, NULL, "cgen_conv: winograd: %s", why);
  cg_wn d;
  wn_plan(&d, s, o->isa->w);
  bool avx2 = d.vw == 8;
  cg_emit_isa_helpers(o);
  cg_emit(o, "/* winograd F(%dx%d,3x3): %ld tiles of %dx%d per image in blocks of %d (%s), %d output channels per"
             " block, %ld channel parts */\n", d.m, d.m, (long)d.NTI, d.m, d.m, d.nbt,
          d.rows ? "rows of tiles: loads and permutes" : avx2 ? "any tiles: gathers, stores lane by lane" : "any tiles: gathers and scatters",
          d.mr, (long)d.nos);
  if (!wn_half(s)) {
    cg_emit(o, "typedef struct { const void *A, *B; void *C; const void *const *ep; float *Up; hprt_scratch sc; } $P_wctx;\n");
  } else { /* the half-precision tensors' own addresses, and their fp32 copies */
    cg_emit(o, "typedef struct { const void *A, *B; void *C; const void *const *ep; float *Up; hprt_scratch sc;"
               " const void *X0; void *Y0; const void *E0[%d]; float *E[%d]; } $P_wctx;\n", CGEN_MAX_EPI, CGEN_MAX_EPI);
  }
  cg_emit(o, "typedef struct { void *y; const void *ep[%d]; } $P_wtt;\n", CGEN_MAX_EPI);
  emit_body(o, &d);
  emit_run(o, &d);
  cg_emit(o, "#endif /* HPRT_X86 */\n");
  return HARP_OK;
}

/* $P_run of a Winograd variant with sizes read at run time (d->rt; fp32,
 * AVX-512 or AVX2): this binding's geometry into cx.g (checked against the upper
 * corner's, which sized the scratch), its tile blocks and channel parts as
 * wn_plan would choose them, the filter transform unless packed at
 * model_init, then the tasks. */
static void emit_run_rt(cg_out *o, const cg_wn *d) {
  const cgen_conv_spec *s = d->s;
  long ubytes = (long)(d->T * d->ocp * s->c * 4), thr = (long)((d->T * s->c * d->nbt + d->T * d->ocp * d->nbt) * 4);
  char nx[24], hx[24], wx[24];
  snprintf(nx, sizeof nx, "%ldL", (long)s->n), snprintf(hx, sizeof hx, "%ldL", (long)s->h), snprintf(wx, sizeof wx, "%ldL", (long)s->w);
  if (s->prepack_w) emit_pack_entry(o, d, ubytes);
  cg_emit(o, "static $T int $P_run(hprt_pool *pool, const void *A, const void *B, void *C, const void *const *ep) {\n");
  cg_emit(o, "  $P_wctx cx;\n  cx.A = A; cx.B = B; cx.C = C; cx.ep = ep;\n  $P_wg *g = &cx.g;\n");
  cg_emit(o, "  g->n = %s; g->h = %s; g->w = %s;\n", s->n_expr ? s->n_expr : nx, s->h_expr ? s->h_expr : hx,
          s->w_expr ? s->w_expr : wx);
  cg_emit(o, "  if (g->n < 1 || g->n > %ldL || g->h < 1 || g->h > %ldL || g->w < 1 || g->w > %ldL) return -1;\n", (long)s->n,
          (long)s->h, (long)s->w);
  cg_emit(o, "  g->oh = g->h + %ldL; g->ow = g->w + %ldL;\n  if (g->oh < 1 || g->ow < 1) return -1;\n",
          (long)(s->pad[0] + s->pad[2] - 2), (long)(s->pad[1] + s->pad[3] - 2));
  cg_emit(o, "  g->hw = g->h * g->w; g->chw = %ldL * g->hw; g->ohw = g->oh * g->ow; g->ochw = %ldL * g->ohw;\n", (long)s->c,
          (long)s->oc);
  cg_emit(o, "  long th = (g->oh + %d) / %d;\n  g->tw = (g->ow + %d) / %d; g->nti = th * g->tw; g->nseg = (g->tw + 15) / 16;\n",
          d->m - 1, d->m, d->m - 1, d->m);
  char nv[48];
  snprintf(nv, sizeof nv, "(g->nti + %d) / %d", d->vw - 1, d->vw);
  cg_emit(o, "  g->nvec = %s;\n  g->nblk = (g->nvec + %d) / %d;\n", d->rows ? "th * g->nseg" : nv, d->nv - 1, d->nv);
  /* wn_plan's channel parts: split the output channels while the tasks are few */
  cg_emit(o, "  g->nos = 1;\n  while (g->n * g->nblk * g->nos * 2 <= %ldL && %ldL / (g->nos * 2) >= 2) g->nos *= 2;\n",
          (long)(4 * (s->tune.threads > 0 ? s->tune.threads : 2)), (long)d->nob);
  cg_emit(o, "  g->per = (%ldL + g->nos - 1) / g->nos;\n", (long)d->nob);
  cg_emit(o, "  if (hprt_scratch_get(pool, %ldUL, %ldUL, &cx.sc)) return -1;\n", s->prepack_w ? 0L : ubytes, thr);
  if (s->prepack_w) {
    cg_emit(o, "  cx.Up = (float *)A;\n");
  } else {
    cg_emit(o, "  cx.Up = (float *)cx.sc.shared;\n");
    cg_emit(o, "  hprt_pool_run(pool, %ld, $P_wtask, &cx);\n", (long)d->nob);
  }
  cg_emit(o, "  hprt_pool_run(pool, (int)(g->n * g->nblk * g->nos), $P_wino, &cx);\n");
  cg_emit(o, "  hprt_scratch_put(&cx.sc);\n  return 0;\n}\n");
}

void cg_wino_rt_variant(cg_out *o, const cgen_conv_spec *s, int m, bool rows, int *mr) {
  cgen_conv_spec q = *s;
  q.tune.conv_algo = m == 2 ? CGEN_CONV_WINO2 : CGEN_CONV_WINO4;
  cg_wn d;
  int vw = o->isa->w;
  wn_plan(&d, &q, vw);
  /* the upper corner's plan, but the mode asked for (AVX2: gathers only) and
   * two vectors of tiles a block (AVX-512: four where the transformed weights
   * pass 16 MB), as wn_plan gives every image of more than one vector */
  d.rt = true, d.rows = rows && vw == 16;
  d.nv = vw == 16 && (double)d.T * (double)s->oc * (double)s->c * 4 > 16e6 ? 4 : 2;
  d.nbt = vw * d.nv, d.mr = d.nv == 4 || vw == 8 ? 6 : 8;
  if (s->oc < d.mr) d.mr = (int)s->oc;
  d.nob = (s->oc + d.mr - 1) / d.mr, d.ocp = d.nob * d.mr;
  *mr = d.mr;
  cg_emit_isa_helpers(o);
  cg_emit(o, "/* winograd F(%dx%d,3x3), sizes read at run time: blocks of %d tiles (%s), %d output channels per block */\n",
          d.m, d.m, d.nbt, d.rows ? "rows of tiles: loads and permutes" : vw == 8 ? "any tiles: gathers, stores lane by lane"
          : "any tiles: gathers and scatters", d.mr);
  cg_emit(o, "typedef struct { long n, h, w, oh, ow, hw, chw, ohw, ochw, tw, nti, nseg, nvec, nblk, nos, per; } $P_wg;\n");
  cg_emit(o, "typedef struct { const void *A, *B; void *C; const void *const *ep; float *Up; hprt_scratch sc; $P_wg g; } $P_wctx;\n");
  cg_emit(o, "typedef struct { void *y; const void *ep[%d]; } $P_wtt;\n", CGEN_MAX_EPI);
  emit_body(o, &d);
  emit_run_rt(o, &d);
  cg_emit(o, "#endif /* HPRT_X86 */\n");
}
