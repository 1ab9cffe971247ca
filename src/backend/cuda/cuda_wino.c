/* cuda_wino.c — Winograd convolution F(m x m, 3 x 3) on the GPU: the
 * filter, input and output transforms around a batched GEMM on the MMA
 * template (one GEMM per transformed point).
 * Needs: cuda.h (builder), cuda_int.h (cuda_conv_checks, cuda_epi_params / _attach),
 * cuda_front.c (cuda_gen_gemm, cuda_conv_out_hw).
 * Gives: cuda_wino_applies, cuda_wino_tile, cuda_wino_dims_of,
 * cuda_gen_conv_wino.
 *
 * Math (Lavin & Gray 2016, the matrices of src/backend/c/cgen_wino.c): per
 * output channel o, input channel c and output tile of m x m pixels,
 * Y = A^T [ sum_c (G g G^T) .* (B^T d B) ] A, d the a x a input patch
 * (a = m + 2), g the 3x3 filter.  The T = a^2 transformed points are T
 * independent GEMMs  M_t[o][p] = sum_c U_t[o][c] V_t[c][p]  over the tiles
 * p of every image (batch folded into the GEMM's N).
 *
 * Four kernels, in launch order (parameters by name, so one argument list
 * binds them all):
 *   <name>_wfilter  w -> wu   U[t][OC][Cp] = G g G^T (the conv's dtype;
 *                             once at model init when w is a weight)
 *   <name>_winput   x -> wv   V[t][Cp][Pp] = B^T d B (the conv's dtype),
 *                             zeros in the padding and past the edges
 *   <name>          A = wu, B = wv, C = wm: the batched GEMM (cuda_gen_gemm,
 *                   batch T, fp32 C, fp32 accumulation)
 *   <name>_woutput  wm -> y   A^T M A, the conv's epilogue on the m x m
 *                             outputs (the Epilogue statement), the stores
 * Cp and Pp round C and the tile count up to 8 (16-byte cp.async rows; the
 * padding holds zeros).  Transforms compute in fp32 with the coefficients
 * folded in at generation time.
 * A ShapeSet build (s->nsyms: the images, height, width read at run time,
 * cuda_conv_at_run_time) keeps the workspace and the GEMM at the box's
 * corner hi (Pp columns, the input transform zeroing those past the
 * binding's tiles); the transforms take the sizes (hp_sv<i>) and find the
 * binding's tiles, bounds and strides from them (wino_txt). */
#include <stdio.h>
#include <string.h>

#include "backend/cuda/cuda.h"
#include "backend/cuda/cuda_int.h"

static const double BT2[4][4] = {{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}};
static const double G2[4][3] = {{1, 0, 0}, {.5, .5, .5}, {.5, -.5, .5}, {0, 0, 1}};
static const double AT2[2][4] = {{1, 1, 1, 0}, {0, 1, -1, -1}};
static const double BT4[6][6] = {{4, 0, -5, 0, 1, 0},  {0, -4, -4, 1, 1, 0}, {0, 4, -4, -1, 1, 0},
                                 {0, -2, -1, 2, 1, 0}, {0, 2, -1, -2, 1, 0}, {0, 4, 0, -5, 0, 1}};
static const double G4[6][3] = {{1. / 4, 0, 0},           {-1. / 6, -1. / 6, -1. / 6}, {-1. / 6, 1. / 6, -1. / 6},
                                {1. / 24, 1. / 12, 1. / 6}, {1. / 24, -1. / 12, 1. / 6}, {0, 0, 1}};
static const double AT4[4][6] = {{1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -2, 0}, {0, 1, 1, 4, 4, 0}, {0, 1, -1, 8, -8, 1}};

bool cuda_wino_applies(const cuda_conv_spec *s, const char **why) {
  if (s->kh != 3 || s->kw != 3) return *why = "not a 3x3 window", false;
  if (s->stride[0] != 1 || s->stride[1] != 1) return *why = "stride is not 1", false;
  if (s->dil[0] != 1 || s->dil[1] != 1) return *why = "dilation is not 1", false;
  if (s->groups != 1) return *why = "grouped", false;
  if (s->x_dtype != s->w_dtype) return *why = "input and weight of different dtypes", false;
  return true;
}

/* winograd_3x3 (tile 0): the backend's choice.  F(2x2) everywhere: F(4x4)
 * rounds its transformed operands to 10/7 mantissa bits with coefficients
 * up to 8 (B) and 1/24 (G), and its error in fp16 / bf16 / TF32 leaves the
 * spec's 1e-3 (docs/cuda.md, "Winograd"). */
int cuda_wino_tile(const cuda_conv_spec *s, int asked) {
  (void)s;
  return asked == 4 ? 4 : 2;
}

bool cuda_wino_dims_of(const cuda_conv_spec *s, int tile, cuda_wino_dims *d) {
  memset(d, 0, sizeof *d);
  if ((tile != 2 && tile != 4) || !cuda_conv_out_hw(s, &d->oh, &d->ow)) return false;
  d->m = tile, d->a = tile + 2, d->T = d->a * d->a;
  d->th = (d->oh + tile - 1) / tile, d->tw = (d->ow + tile - 1) / tile;
  d->P = s->n * d->th * d->tw;
  d->Pp = (d->P + 7) / 8 * 8;
  d->Cp = (s->c + 7) / 8 * 8;
  int esz = tiny_dtype_size(s->w_dtype);
  d->u_bytes = d->T * s->oc * d->Cp * esz;
  d->v_bytes = d->T * d->Cp * d->Pp * esz;
  d->m_bytes = d->T * s->oc * d->Pp * 4;
  return true;
}

/* C text of sum_k coef[k] * opnd(k) over n terms (fmt: opnd's printf
 * pattern with the index k then `arg`), the coefficients folded: zeros
 * dropped, +-1 as signs. */
static const char *lincomb(cuda_b *b, const double *coef, int n, const char *fmt, int arg, bool arg_first) {
  char buf[1024];
  size_t at = 0;
  buf[0] = 0;
  for (int k = 0; k < n; k++) {
    double c = coef[k];
    if (c == 0) continue;
    char op[64], v[128];
    if (arg_first) snprintf(op, sizeof op, fmt, arg, k);
    else snprintf(op, sizeof op, fmt, k, arg);
    double ac = c < 0 ? -c : c;
    char num[32];
    snprintf(num, sizeof num, "%.9g", ac);
    if (ac == 1) snprintf(v, sizeof v, "%s", op);
    else snprintf(v, sizeof v, "%s%sf * %s", num, strpbrk(num, ".e") ? "" : ".0", op);
    at += (size_t)snprintf(buf + at, sizeof buf - at, "%s%s", at ? (c < 0 ? " - " : " + ") : (c < 0 ? "-" : ""), v);
    if (at >= sizeof buf) break;
  }
  return cuda_fmt(b, "%s", at ? buf : "0.0f");
}

/* out = L * in * L^T with L (rows x cols, row-major) and in (cols x cols,
 * a float array named `in`): the temporary `tmp`, then `out` (declared). */
static void sandwich(cuda_b *b, const double *L, int rows, int cols, const char *in, const char *tmp, const char *out) {
  cuda_decl(b, "float", tmp, cuda_fmt(b, "[%d][%d]", rows, cols), NULL);
  cuda_decl(b, "float", out, cuda_fmt(b, "[%d][%d]", rows, rows), NULL);
  for (int i = 0; i < rows; i++)
    for (int j = 0; j < cols; j++) /* tmp[i][j] = sum_k L[i][k] in[k][j] */
      cuda_assign(b, cuda_fmt(b, "%s[%d][%d]", tmp, i, j), lincomb(b, L + i * cols, cols, cuda_fmt(b, "%s[%%d][%%d]", in), j, false));
  for (int i = 0; i < rows; i++)
    for (int j = 0; j < rows; j++) /* out[i][j] = sum_k tmp[i][k] L[j][k] */
      cuda_assign(b, cuda_fmt(b, "%s[%d][%d]", out, i, j), lincomb(b, L + j * cols, cols, cuda_fmt(b, "%s[%%d][%%d]", tmp), i, true));
}

/* name + suffix in buf (kn: 128 bytes; a longer name is cut and then
 * refused by cuda_kernel_new's duplicate check only if it collides). */
static const char *knm(char *buf, const char *name, const char *suffix) {
  snprintf(buf, 128, "%.100s%s", name, suffix);
  return buf;
}

static const double *bt_of(int m) { return m == 2 ? &BT2[0][0] : &BT4[0][0]; }
static const double *g_of(int m) { return m == 2 ? &G2[0][0] : &G4[0][0]; }
static const double *at_of(int m) { return m == 2 ? &AT2[0][0] : &AT4[0][0]; }

/* U[t][oc][c] = (G g G^T)[t] for every (oc, c < Cp): zeros past C. */
static harp_status gen_filter(harp_error *e, cuda_module *m, const cuda_conv_spec *s, const cuda_wino_dims *d,
                              const char *name) {
  cuda_b bb, *b = &bb;
  char kn[128];
  cuda_kernel *k = cuda_kernel_new(b, m, e, knm(kn, name, "_wfilter"), "wino_filter");
  if (!k) return e->code;
  int64_t n = s->oc * d->Cp;
  k->grid[0] = (n + 255) / 256, k->block[0] = 256;
  cuda_param_add(k, "w", cuda_ctype(s->w_dtype), CUDA_P_PTR_IN, s->w_dtype);
  cuda_param_add(k, "wu", cuda_ctype(s->w_dtype), CUDA_P_PTR_OUT, s->w_dtype);
  cuda_meta_str(k, "layout", "OIHW [OC][C][3][3] -> U[point][OC][Cp] = G g G^T");
  cuda_meta_int(k, "winograd_tile", d->m);
  cuda_decl(b, "const hk_i64", "q", NULL, "(hk_i64)blockIdx.x * 256 + threadIdx.x");
  cuda_if(b, cuda_fmt(b, "q < %lld", (long long)n));
  cuda_decl(b, "const hk_i64", "oc", NULL, cuda_fmt(b, "q / %lld", (long long)d->Cp));
  cuda_decl(b, "const hk_i64", "c", NULL, cuda_fmt(b, "q %% %lld", (long long)d->Cp));
  cuda_decl(b, "float", "g", "[3][3]", NULL);
  cuda_for(b, "i", "0", "9", -1);
  cuda_assign(b, "g[i / 3][i % 3]", cuda_fmt(b, "c < %lld ? %s(w + (oc * %lld + c) * 9 + i) : 0.0f", (long long)s->c,
                                             cuda_ld_fn(s->w_dtype), (long long)s->c));
  cuda_close(b);
  sandwich(b, g_of(d->m), d->a, 3, "g", "gt", "u");
  for (int t = 0; t < d->T; t++)
    cuda_assign(b, cuda_fmt(b, "wu[(%lld + oc) * %lld + c]", (long long)t * s->oc, (long long)d->Cp),
                cuda_fmt(b, "%s(u[%d][%d])", cuda_cvt_fn(s->w_dtype), t / d->a, t % d->a));
  cuda_close(b);
  return cuda_b_finish(b, k);
}

/* The sizes the transforms print, as C text: the constants of d, or a
 * ShapeSet build's formulas of its run-time images, height and width. */
typedef struct wino_txt {
  const char *h, *w, *oh, *ow, *tw, *per, *P, *ohow, *img; /* per: tiles per image; ohow: oh*ow; img: oc*oh*ow */
} wino_txt;

/* The run-time size z as C text, or the constant v. */
static const char *sz_or(cuda_b *b, const cuda_rtsz *z, int64_t v) {
  return z->n ? cuda_rtsz_text(b, z) : cuda_fmt(b, "%lld", (long long)v);
}

/* The output side o = in + pads - 2 of a 3x3, stride-1 window (in: C text). */
static const char *out_side(cuda_b *b, const char *in, int64_t pads) {
  return pads >= 2 ? cuda_fmt(b, "(%s + %lld)", in, (long long)(pads - 2)) : cuda_fmt(b, "(%s - %lld)", in, (long long)(2 - pads));
}

static void wino_texts(cuda_b *b, const cuda_conv_spec *s, const cuda_wino_dims *d, wino_txt *t) {
  if (!s->nsyms) {
    t->h = cuda_fmt(b, "%lld", (long long)s->h), t->w = cuda_fmt(b, "%lld", (long long)s->w);
    t->oh = cuda_fmt(b, "%lld", (long long)d->oh), t->ow = cuda_fmt(b, "%lld", (long long)d->ow);
    t->tw = cuda_fmt(b, "%lld", (long long)d->tw), t->per = cuda_fmt(b, "%lld", (long long)(d->th * d->tw));
    t->P = cuda_fmt(b, "%lld", (long long)d->P), t->ohow = cuda_fmt(b, "%lld", (long long)(d->oh * d->ow));
    t->img = cuda_fmt(b, "%lld", (long long)(s->oc * d->oh * d->ow));
    return;
  }
  t->h = sz_or(b, &s->rt_h, s->h), t->w = sz_or(b, &s->rt_w, s->w);
  t->oh = out_side(b, t->h, s->pad[0] + s->pad[2]), t->ow = out_side(b, t->w, s->pad[1] + s->pad[3]);
  t->tw = cuda_fmt(b, "((%s + %d) / %d)", t->ow, d->m - 1, d->m);
  t->per = cuda_fmt(b, "(((%s + %d) / %d) * %s)", t->oh, d->m - 1, d->m, t->tw);
  t->P = cuda_fmt(b, "(%s * %s)", sz_or(b, &s->rt_n, s->n), t->per);
  t->ohow = cuda_fmt(b, "(%s * %s)", t->oh, t->ow);
  t->img = cuda_fmt(b, "(%lldL * %s)", (long long)s->oc, t->ohow);
}

/* A ShapeSet build's size parameters of kernel k. */
static void add_syms(cuda_b *b, cuda_kernel *k, const cuda_conv_spec *s) {
  for (int i = 0; i < s->nsyms; i++) cuda_param_add(k, cuda_fmt(b, "hp_sv%d", i), "long", CUDA_P_LONG, TINY_I32);
}

/* Tile p's image `img`, its index `tq` in the image, and the top-left
 * corner (y0, x0) of its m x m outputs, moved up and left by pad[0], pad[1]
 * where pad is given (the input patch), not where it is NULL (the output). */
static void tile_origin(cuda_b *b, const cuda_wino_dims *d, const wino_txt *t, const char *y0, const char *x0, const int64_t *pad) {
  cuda_decl(b, "const hk_i64", "img", NULL, cuda_fmt(b, "p / %s", t->per));
  cuda_decl(b, "const hk_i64", "tq", NULL, cuda_fmt(b, "p %% %s", t->per));
  if (pad) {
    cuda_decl(b, "const hk_i64", y0, NULL, cuda_fmt(b, "tq / %s * %d - %lld", t->tw, d->m, (long long)pad[0]));
    cuda_decl(b, "const hk_i64", x0, NULL, cuda_fmt(b, "tq %% %s * %d - %lld", t->tw, d->m, (long long)pad[1]));
  } else {
    cuda_decl(b, "const hk_i64", y0, NULL, cuda_fmt(b, "tq / %s * %d", t->tw, d->m));
    cuda_decl(b, "const hk_i64", x0, NULL, cuda_fmt(b, "tq %% %s * %d", t->tw, d->m));
  }
}

/* V[t][c][p] = (B^T d B)[t] for every (c < Cp, p < Pp): d the patch of
 * tile p (zeros in the padding, past the edges, and past C and P). */
static harp_status gen_input(harp_error *e, cuda_module *m, const cuda_conv_spec *s, const cuda_wino_dims *d,
                             const char *name) {
  cuda_b bb, *b = &bb;
  char kn[128];
  cuda_kernel *k = cuda_kernel_new(b, m, e, knm(kn, name, "_winput"), "wino_input");
  if (!k) return e->code;
  k->grid[0] = (d->Pp + 255) / 256, k->grid[1] = d->Cp, k->block[0] = 256;
  if (s->nsyms) k->grid_items = 256; /* the binding's P tiles, 256 a block of grid.x */
  cuda_param_add(k, "x", cuda_ctype(s->x_dtype), CUDA_P_PTR_IN, s->x_dtype);
  cuda_param_add(k, "wv", cuda_ctype(s->x_dtype), CUDA_P_PTR_OUT, s->x_dtype);
  add_syms(b, k, s);
  wino_txt tx;
  wino_texts(b, s, d, &tx);
  cuda_meta_str(k, "layout", "NCHW -> V[point][Cp][tiles of every image] = B^T d B");
  cuda_meta_int(k, "winograd_tile", d->m);
  cuda_decl(b, "const hk_i64", "p", NULL, "(hk_i64)blockIdx.x * 256 + threadIdx.x");
  cuda_decl(b, "const hk_i64", "c", NULL, "blockIdx.y");
  /* the tiles to Pp (zeros past P), in a ShapeSet build the binding's P only (the GEMM reads no column past it) */
  cuda_if(b, s->nsyms ? cuda_fmt(b, "p < %s", tx.P) : cuda_fmt(b, "p < %lld", (long long)d->Pp));
  tile_origin(b, d, &tx, "iy0", "ix0", s->pad);
  cuda_decl(b, "const bool", "live", NULL, cuda_fmt(b, "p < %s && c < %lld", tx.P, (long long)s->c));
  cuda_decl(b, "float", "dd", cuda_fmt(b, "[%d][%d]", d->a, d->a), NULL);
  cuda_for(b, "i", "0", cuda_fmt(b, "%d", d->a * d->a), -1);
  cuda_decl(b, "const hk_i64", "iy", NULL, cuda_fmt(b, "iy0 + i / %d", d->a));
  cuda_decl(b, "const hk_i64", "ix", NULL, cuda_fmt(b, "ix0 + i %% %d", d->a));
  cuda_assign(b, cuda_fmt(b, "dd[i / %d][i %% %d]", d->a, d->a),
              cuda_fmt(b, "live && iy >= 0 && iy < %s && ix >= 0 && ix < %s ? %s(x + ((img * %lld + c) * %s + iy) * %s + ix) : 0.0f",
                       tx.h, tx.w, cuda_ld_fn(s->x_dtype), (long long)s->c, tx.h, tx.w));
  cuda_close(b);
  sandwich(b, bt_of(d->m), d->a, d->a, "dd", "bt", "v");
  for (int t = 0; t < d->T; t++)
    cuda_assign(b, cuda_fmt(b, "wv[(%lld + c) * %lld + p]", (long long)t * d->Cp, (long long)d->Pp),
                cuda_fmt(b, "%s(v[%d][%d])", cuda_cvt_fn(s->x_dtype), t / d->a, t % d->a));
  cuda_close(b);
  return cuda_b_finish(b, k);
}

/* The Epilogue statement on acc[1][m*m/4][4] (output q = a*m + b of the
 * tile at acc[0][q / 4][q % 4]; pairs (q, q + 1) are neighbours in a row):
 * row oc, column the pixel index in the image. */
static void out_epilogue(cuda_b *b, const cuda_conv_spec *s, const cuda_wino_dims *d, const wino_txt *t) {
  cuda_stmt *ep = cuda_emit_s(b, CU_EPILOGUE, "acc", "(int)oc", cuda_fmt(b, "(int)(oy0 * %s + ox0)", t->ow),
                              cuda_fmt(b, "%lld", (long long)s->oc));
  ep->s[4] = t->ohow;
  ep->s[5] = "0";
  ep->s[6] = cuda_fmt(b, "(hk_j * 4 + hk_h * 2) / %d * %s + (hk_j * 4 + hk_h * 2) %% %d", d->m, t->ow, d->m);
  ep->i[0] = 1, ep->i[1] = d->m * d->m / 4;
  ep->dtype = s->y_dtype;
  cuda_epi epi[CUDA_MAX_EPI];
  const char *ptr[CUDA_MAX_EPI];
  for (int i = 0; i < s->n_epi && i < CUDA_MAX_EPI; i++) {
    epi[i] = s->epi[i], ptr[i] = NULL;
    if (epi[i].kind == CUDA_EPI_BIAS_M || epi[i].kind == CUDA_EPI_BIAS_N) ptr[i] = cuda_fmt(b, "ep%d", i);
    if (epi[i].kind == CUDA_EPI_RESIDUAL) { /* y's layout, image img */
      epi[i].s_m = d->oh * d->ow, epi[i].s_n = 1;
      ptr[i] = cuda_fmt(b, "(ep%d + img * %s)", i, t->img);
    }
  }
  cuda_epi_attach(b, ep, epi, ptr, s->n_epi);
  for (int i = 0; s->nsyms && i < ep->nepi; i++) /* a residual's row stride (its pixels) at run time */
    if (ep->epi[i].e.kind == CUDA_EPI_RESIDUAL) ep->epi[i].s_m_t = t->ohow;
}

/* y = A^T M A per (oc, tile p < P), the epilogue, the stores inside the image. */
static harp_status gen_output(harp_error *e, cuda_module *m, const cuda_conv_spec *s, const cuda_wino_dims *d,
                              const char *name) {
  cuda_b bb, *b = &bb;
  char kn[128];
  cuda_kernel *k = cuda_kernel_new(b, m, e, knm(kn, name, "_woutput"), "wino_output");
  if (!k) return e->code;
  k->grid[0] = (d->P + 127) / 128, k->grid[1] = s->oc, k->block[0] = 128;
  if (s->nsyms) k->grid_items = 128;
  cuda_param_add(k, "wm", "float", CUDA_P_PTR_IN, TINY_FP32);
  cuda_param_add(k, "y", cuda_ctype(s->y_dtype), CUDA_P_PTR_OUT, s->y_dtype);
  cuda_epi_params(b, k, s->epi, s->n_epi);
  add_syms(b, k, s);
  wino_txt tx;
  wino_texts(b, s, d, &tx);
  cuda_meta_str(k, "layout", "M[point][OC][tiles] -> NCHW y = A^T M A, epilogue fused");
  cuda_meta_int(k, "winograd_tile", d->m);
  cuda_decl(b, "const hk_i64", "p", NULL, "(hk_i64)blockIdx.x * 128 + threadIdx.x");
  cuda_decl(b, "const hk_i64", "oc", NULL, "blockIdx.y");
  cuda_if(b, cuda_fmt(b, "p < %s", tx.P));
  tile_origin(b, d, &tx, "oy0", "ox0", NULL);
  cuda_decl(b, "float", "mv", cuda_fmt(b, "[%d][%d]", d->a, d->a), NULL);
  cuda_for(b, "t", "0", cuda_fmt(b, "%d", d->T), -1);
  cuda_assign(b, cuda_fmt(b, "mv[t / %d][t %% %d]", d->a, d->a),
              cuda_fmt(b, "wm[(t * %lld + oc) * %lld + p]", (long long)s->oc, (long long)d->Pp));
  cuda_close(b);
  sandwich(b, at_of(d->m), d->m, d->a, "mv", "at", "o");
  cuda_decl(b, "float", "acc", cuda_fmt(b, "[1][%d][4]", d->m * d->m / 4), NULL);
  for (int q = 0; q < d->m * d->m; q++) cuda_assign(b, cuda_fmt(b, "acc[0][%d][%d]", q / 4, q % 4), cuda_fmt(b, "o[%d][%d]", q / d->m, q % d->m));
  out_epilogue(b, s, d, &tx);
  for (int q = 0; q < d->m * d->m; q++) {
    cuda_if(b, cuda_fmt(b, "oy0 + %d < %s && ox0 + %d < %s", q / d->m, tx.oh, q % d->m, tx.ow));
    cuda_assign(b, cuda_fmt(b, "y[img * %s + oc * %s + (oy0 + %d) * %s + ox0 + %d]", tx.img, tx.ohow, q / d->m, tx.ow, q % d->m),
                cuda_fmt(b, "%s(acc[0][%d][%d])", cuda_cvt_fn(s->y_dtype), q / 4, q % 4));
    cuda_close(b);
  }
  cuda_close(b);
  return cuda_b_finish(b, k);
}

/* The transformed-domain GEMMs: batch T, M = OC, N = Pp, K = Cp, fp32 C. */
static harp_status gen_tgemm(harp_error *e, cuda_module *m, const cuda_conv_spec *s, const cuda_wino_dims *d,
                             const char *name) {
  cuda_gemm_spec g;
  cuda_gemm_spec_init(&g, s->oc, d->Pp, d->Cp, s->w_dtype);
  g.c_dtype = TINY_FP32;
  g.batch[0] = d->T, g.batch[1] = 1;
  g.a_sm = d->Cp, g.a_sk = 1, g.a_sb[0] = s->oc * d->Cp, g.a_sb[1] = 0;
  g.b_sk = d->Pp, g.b_sn = 1, g.b_sb[0] = d->Cp * d->Pp, g.b_sb[1] = 0;
  g.c_sm = d->Pp, g.c_sn = 1, g.c_sb[0] = s->oc * d->Pp, g.c_sb[1] = 0;
  g.math = s->math;
  g.tune = s->tune;
  g.tune.arch = CUDA_SM80;
  g.tune.splitk = 0, g.tune.persistent = false;
  if (s->nsyms) { /* the binding's tiles P as N: a CTA past them returns, B's columns past them zero-filled */
    cuda_b tb = {.a = m->arena};
    wino_txt tx;
    wino_texts(&tb, s, d, &tx);
    if (tb.oom) return ut_fail(e, HARP_E_NO_MEMORY, name, "out of memory");
    g.nsyms = s->nsyms, g.n_text = tx.P;
  }
  if (cuda_gen_gemm(e, m, &g, name)) return e->code;
  cuda_kernel *k = m->k[m->n - 1];
  cuda_meta_str(k, "algo_choice.conv", d->m == 2 ? "winograd_2x2_3x3" : "winograd_4x4_3x3");
  cuda_meta_str(k, "winograd", "the transformed-domain GEMMs: one per point (batch), U[point] x V[point] -> M[point]");
  cuda_meta_int(k, "winograd_tile", d->m);
  return HARP_OK;
}

harp_status cuda_gen_conv_wino(harp_error *e, cuda_module *m, const cuda_conv_spec *s, int tile, const char *name) {
  const char *why = NULL;
  cuda_wino_dims d;
  int64_t oh, ow;
  if (cuda_conv_checks(e, m, s, name, &oh, &ow)) return e->code;
  if (!cuda_wino_applies(s, &why)) return ut_fail(e, HARP_E_UNSUPPORTED, name, "Winograd on the GPU: %s", why);
  if (!cuda_wino_dims_of(s, tile, &d)) return ut_fail(e, HARP_E_INVALID_ARG, name, "Winograd: tile %d or the window", tile);
  if (s->w_dtype == TINY_FP32 && s->math == CUDA_MATH_FP32)
    return ut_fail(e, HARP_E_UNSUPPORTED, name, "Winograd on the GPU: strict fp32 (the tensor cores only: fp16, bf16, TF32)");
  if (d.Cp > 65535 || s->oc > 65535)
    return ut_fail(e, HARP_E_LIMIT, name, "Winograd: %lld input / %lld output channels (grid.y: 65535)", (long long)s->c,
                   (long long)s->oc);
  if (d.T * s->oc * d.Pp > ((int64_t)1 << 40) || d.T * d.Cp * d.Pp > ((int64_t)1 << 40))
    return ut_fail(e, HARP_E_LIMIT, name, "Winograd workspace too large");
  int n0 = m->n;
  harp_status st = gen_filter(e, m, s, &d, name);
  if (!st) st = gen_input(e, m, s, &d, name);
  if (!st) st = gen_tgemm(e, m, s, &d, name);
  if (!st) st = gen_output(e, m, s, &d, name);
  if (st) m->n = n0;
  return st;
}
