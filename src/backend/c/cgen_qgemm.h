/* cgen_qgemm.h — the int8 GEMM generator (cgen_qgemm.c): exact u8 x s8
 * integer products with AVX-512 VNNI vpdpbusd (AVX2 and scalar variants
 * where the CPU lacks it), onnxruntime's requantization in the epilogue.
 *
 * C[M][N] = A[M][K] B[K][N], one operand a constant weight (s8, zero point 0,
 * its output channels along the other operand's free axis), the other an
 * activation (u8, or s8 seen as u8 through + 128) with zero point za:
 *   acc[m][n] = sum_k (x - za) w                      (int32, exact)
 *   v         = (float)(acc + bias[ch]) * mult[ch]    (ch = n, or m when the weight is A)
 *   y         = v (fp32 out), or clamp(rint(v) + zy, lo, hi) (u8 / s8 out)
 * The weight is packed once (entry F_pack) with its compensation
 * (za + 128 [s8]) * sum_k w folded into the bias; the activation is packed
 * per call into 4-deep byte groups (or, u8 as A, read in place).  Entry
 * points, F = fn_name:
 *   long F_wsize(void)                    bytes of the packed weight;
 *   int  F_pack(const int8_t *w, const int32_t *bias, const float *mult, void *wp)
 *        w as laid out by w_kmajor, bias (NULL: 0) and mult per channel;
 *   int  F_requant(void *wp, const float *bias, const float *mult)
 *        after F_pack (bias NULL, mult all 1): the channels' bias (integers, NULL:
 *        none) added and their multipliers set, for the requantizing epilogue;
 *        -1 (wp unchanged) when a bias is no integer below 2^30;
 *   int  F_amx_on(void)                   (only with the AMX variant) 1 when it is the one that runs;
 *   int  F(hprt_pool *pool, const void *wp, const void *x, void *y)
 *        x row-major ([M][K] as A, [K][N] as B; a conv's image), y row-major [M][N]
 *        (or VNNI-4: x_vnni4, y_vnni4);
 *   with spec.post, F takes two more arguments, void (*post)(void *pctx, long m0, long m1,
 *        long n0, long n1) and pctx: post (unless NULL) is called on each block of y the
 *        moment it is final, rows [m0, m1) x columns [n0, n1), by the thread that stored
 *        it while the block is in its cache (a second pass over y fused into the tasks:
 *        contract_q8.c's QDQ residual add); every element of y in exactly one call. */
#ifndef HARP_CGEN_QGEMM_H
#define HARP_CGEN_QGEMM_H

#include "backend/c/cgen.h"

typedef struct cgen_qgemm_spec {
  int64_t m, n, k;
  bool weight_a;        /* the weight is A (NCHW convs: [cout][cin] x [cin][hw]); else B */
  bool w_kmajor;        /* the weight as given: K-major ([K][N] for B, [K][M] for A); else
                           channel-major ([N][K] for B, [M][K] for A: ONNX Conv's layout) */
  tiny_dtype x_dtype;   /* TINY_U8 or TINY_I8 */
  tiny_dtype y_dtype;   /* TINY_U8, TINY_I8 or TINY_FP32 */
  int32_t za;           /* the activation's zero point (within x_dtype's range) */
  int32_t zy, lo, hi;   /* output zero point and clamp (within y_dtype's range; a fused
                           Relu is lo = zy); ignored for fp32 */
  int force_isa;        /* -1 = by CPUID; CGEN_ISA_SCALAR, CGEN_ISA_AVX2 (where the CPU has
                           AVX2 and FMA, else scalar; knob int8_isa) or CGEN_ISA_AVX512 (tests) */
  int amx;              /* an AMX-INT8 variant too (cgen_qamx.c: tdpbusd / tdpbsud on 32x32
                           tiles), run where the CPU has AMX-INT8 and Linux grants the tile
                           state, else the VNNI one: 0 none, 1 where it pays (cg_qamx_pays),
                           2 always (tests, bench) */
  bool x_vnni4;         /* x is held VNNI-4 (weight_a, K % 4 == 0, no conv but 1x1 stride 1 unpadded):
                           [K / 4][N][4] bytes, the 4 bytes of k = 4 k4 .. + 3 of column n adjacent
                           (AMX's B rows: its tiles read B there, no packing) */
  bool y_vnni4;         /* y written so: [M / 4][N][4] bytes (weight_a, u8 / s8 out, M % 4 == 0) */
  bool post;            /* F takes a post hook (above): y row-major, no stride-1 conv but 1x1 */
  int ws;               /* the AVX-512 variant's order where the weight is A and no AMX variant is
                           emitted: 0 by size (weight-stationary, B packed whole first, where the
                           weight is large and B small: cgen_qgemm.c's qg_ws), 1 weight-stationary,
                           -1 never (a B block per task) */
  struct {              /* kh > 0: a convolution; x is one NCHW image [c][h][w] (the caller
                           steps the batch and the groups) and B its im2col [c kh kw][oh ow],
                           the padding reading za (x - za = 0, as onnxruntime pads); needs
                           weight_a, !w_kmajor (ONNX's [cout][c][kh][kw]), M = cout,
                           K = c kh kw, N = oh ow (pads ph, pw on both sides) */
    int64_t c, h, w, kh, kw, sh, sw, ph, pw, dh, dw;
  } conv;
} cgen_qgemm_spec;

void cgen_qgemm_spec_init(cgen_qgemm_spec *s, int64_t m, int64_t n, int64_t k);
harp_status cgen_qgemm(harp_error *e, const cgen_qgemm_spec *spec, const char *fn_name, ut_str *out);
/* Whether spec is a GEMM or a 1x1 conv of stride 1 without padding: x is B's
 * [K][N] rows as they are (what a VNNI-4 x, spec.x_vnni4, needs). */
bool cgen_qgemm_c11(const cgen_qgemm_spec *spec);
/* Whether spec may take a post hook (spec.post): y row-major, no stride-1 conv but 1x1. */
bool cgen_qgemm_post_ok(const cgen_qgemm_spec *spec);

#endif
