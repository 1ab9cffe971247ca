/* test_cgen_conv.c — convolution kernels against a plain loop nest:
 * stride, dilation, asymmetric padding, groups (incl. depthwise: its own kernel), 1x1, 3x3
 * and 7x7 windows (a 1x1 direct from 256 input channels or over pixels short
 * of whole vectors, else its input rows copied as the GEMM's B panel),
 * bias/silu/relu/residual epilogues, half storage, each ISA
 * variant (fp32 gathers and the scalar path; half inputs widened first on
 * the vector variants), errors.  Every AVX-512 case
 * runs as the implicit GEMM and as the direct kernel (cgen_dconv.c) where
 * that applies; the direct cases add row tails (widths not a multiple of the
 * tile or of 16), output channels not a multiple of the block, rows wholly
 * in the padding, tiles of more than 16 pixels, prepacked weights, and
 * strided layers on the tiles cgen_conv chooses (test_strided_tiles).  The
 * depthwise cases cover stride phases (strides 2 and 3, with dilation, even
 * and odd left padding, half inputs split by vectors on AVX-512 and AVX2),
 * output widths 56, 28, 29, 7, 130 and row remainders, stride-1 rows copied
 * by vectors with a masked tail (half inputs, left padding 0 and 2).  No kernel may write
 * past the end of its output (poisoned slack). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "cgen_testutil.h"

#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

typedef int (*conv_fn)(hprt_pool *, const void *, const void *, void *, const void *const *);

typedef struct ccase {
  long n, c, h, w, oc, kh, kw, sh, sw, pt, pl, pb, pr, dh, dw, g;
  tiny_dtype xdt, wdt, ydt;
  int isa, kc, tasks;
  int nepi;
  cgen_epi_kind ek[3];
  int prepack; /* weight packed once by cN_pack_a */
  int algo;    /* tune.conv_algo of the AVX-512 variant */
  int mr, nr;  /* direct: pixels x output channels per tile (0: choose) */
  int mulm;    /* bit i: tensor step i multiplies (cgen_epi.mul) */
} ccase;

#define F32 TINY_FP32
#define F16 TINY_FP16
#define B16 TINY_BF16
enum { SC = CGEN_ISA_SCALAR, A2 = CGEN_ISA_AVX2, A5 = CGEN_ISA_AVX512 };
enum { GE = CGEN_CONV_GEMM, DI = CGEN_CONV_DIRECT };

static const ccase CASES[] = {
    {1, 3, 9, 11, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, F32, F32, F32, A5},
    {2, 8, 13, 12, 17, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, F32, F32, F32, A5, 0, 3},
    {1, 6, 15, 15, 9, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2, 1, F32, F32, F32, A5, 16},
    {2, 8, 10, 9, 8, 3, 2, 1, 2, 0, 1, 2, 0, 1, 1, 2, F32, F32, F32, A5, 0, 0, 2, {CGEN_EPI_BIAS_M, CGEN_EPI_SILU}},
    {1, 8, 7, 7, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 8, F32, F32, F32, A5, 0, 0, 3, {CGEN_EPI_BIAS_M, CGEN_EPI_RESIDUAL, CGEN_EPI_RELU}},
    {1, 16, 6, 6, 20, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, F32, F32, F32, A5},
    {1, 3, 9, 11, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, F32, F32, F32, A2, 8, 0, 1, {CGEN_EPI_RELU}},
    {2, 4, 11, 10, 6, 3, 3, 2, 1, 1, 0, 1, 1, 2, 1, 2, F32, F32, F32, A2, 0, 0, 2, {CGEN_EPI_BIAS_M, CGEN_EPI_SILU}},
    {1, 3, 9, 11, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, F32, F32, F32, SC, 0, 0, 1, {CGEN_EPI_BIAS_M}},
    {1, 4, 8, 8, 4, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 4, F32, F32, F32, SC},
    {1, 8, 10, 10, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, F16, F16, F16, A5, 0, 0, 2, {CGEN_EPI_BIAS_M, CGEN_EPI_RESIDUAL}},
    {1, 8, 10, 10, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 2, B16, B16, F32, A2},
    {1, 8, 12, 12, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, F32, F32, F32, -1, 0, 0, 1, {CGEN_EPI_SILU}},
    {2, 8, 9, 9, 12, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 2, F32, F32, F32, A5, 32, 0, 1, {CGEN_EPI_BIAS_M}, 1},
    {2, 8, 9, 9, 12, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 2, F32, F16, F32, A2, 0, 0, 0, {0}, 1},
    /* direct: batch 2, odd H, C 13 in blocks of 4 (partial sums kept between
     * blocks, a tail block of 1), OC 20 (a block of 16 and a tail), W 23 */
    {2, 13, 11, 23, 20, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, F32, F32, F32, A5, 4, 0, 2, {CGEN_EPI_BIAS_M, CGEN_EPI_RELU}, 0, DI},
    /* the same with 32-channel tiles of 12 + 11 pixels */
    {2, 13, 11, 23, 20, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, F32, F32, F32, A5, 0, 0, 1, {CGEN_EPI_BIAS_M}, 0, DI, 0, 32},
    /* 7 output channels (a block of 16), W 37 = 19 + 18: two transposes per tile */
    {1, 5, 6, 37, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, F32, F32, F32, A5, 0, 0, 1, {CGEN_EPI_BIAS_M}, 0, DI},
    /* stride 2, dilation 2, asymmetric padding, groups, residual + silu */
    {2, 8, 17, 30, 24, 3, 3, 2, 2, 2, 1, 3, 0, 2, 2, 2, F32, F32, F32, A5, 3, 3, 3,
     {CGEN_EPI_BIAS_M, CGEN_EPI_RESIDUAL, CGEN_EPI_SILU}, 0, DI},
    /* padding 3 on a 3x3 window: the first and last rows see no input at all */
    {1, 4, 7, 9, 18, 3, 3, 1, 1, 3, 3, 3, 3, 1, 1, 1, F32, F32, F32, A5, 0, 0, 1, {CGEN_EPI_BIAS_M}, 0, DI},
    /* 7x7 stem-like stride 2 pad 3, C 3; 1x1 stride 2 */
    {1, 3, 21, 40, 16, 7, 7, 2, 2, 3, 3, 3, 3, 1, 1, 1, F32, F32, F32, A5, 0, 0, 2, {CGEN_EPI_BIAS_M, CGEN_EPI_RELU}, 0, DI},
    {2, 12, 9, 19, 33, 1, 1, 2, 2, 0, 0, 0, 0, 1, 1, 1, F32, F32, F32, A5, 0, 0, 0, {0}, 0, DI},
    /* half weights and output, fp16 residual; bf16 output; prepacked weights */
    {1, 8, 10, 14, 40, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, F32, F16, F16, A5, 0, 0, 2, {CGEN_EPI_BIAS_M, CGEN_EPI_RESIDUAL}, 0, DI},
    {1, 6, 9, 20, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 2, F32, B16, B16, A5, 0, 0, 1, {CGEN_EPI_GELU}, 0, DI},
    {2, 16, 8, 29, 48, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, F32, F32, F32, A5, 8, 0, 1, {CGEN_EPI_BIAS_M}, 1, DI},
    /* forced tiles: 5 pixels x 16 channels (W 23 = 5 x 4 + 3), and 3 x 32 */
    {1, 9, 5, 23, 35, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, F32, F32, F32, A5, 0, 0, 1, {CGEN_EPI_RELU}, 0, DI, 5, 16},
    {1, 9, 5, 8, 35, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, F32, F32, F32, A5, 0, 0, 0, {0}, 0, DI, 3, 32},
    /* the ResNet layer of the benchmarks, reduced: the automatic choice */
    {1, 16, 5, 56, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, F32, F32, F32, A5, 0, 0, 1, {CGEN_EPI_BIAS_M}},
    /* half inputs on the direct kernel, widened into scratch first (315 and
     * 2x6x11x13 = 1716 elements: chunk tails) */
    {1, 5, 7, 9, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, B16, F32, F32, A5, 0, 0, 1, {CGEN_EPI_RELU}},
    {2, 6, 11, 13, 20, 3, 3, 2, 1, 1, 1, 1, 1, 1, 1, 1, F16, F16, B16, A5, 0, 0, 1, {CGEN_EPI_BIAS_M}, 1},
    /* depthwise (cgen_dwconv.c): rows of 4 vectors + a tail, stride and
     * dilation with asymmetric padding, half types, 5x5, gathers on AVX2,
     * prepacked weights, CPUID */
    {2, 24, 19, 70, 24, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 24, F32, F32, F32, A5, 0, 0, 2, {CGEN_EPI_BIAS_M, CGEN_EPI_RELU}},
    {1, 16, 21, 40, 16, 3, 3, 2, 2, 2, 1, 0, 3, 2, 2, 16, F16, F16, F16, A5, 0, 0, 3,
     {CGEN_EPI_BIAS_M, CGEN_EPI_RESIDUAL, CGEN_EPI_SILU}},
    {1, 8, 30, 33, 8, 5, 5, 1, 1, 2, 2, 2, 2, 1, 1, 8, F32, B16, F32, A2, 0, 0, 1, {CGEN_EPI_GELU}},
    {1, 8, 17, 35, 8, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 8, F32, F32, B16, A2},
    {2, 12, 14, 14, 12, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 12, F32, F16, F32, A5, 0, 0, 1, {CGEN_EPI_BIAS_M}, 1},
    {1, 6, 9, 9, 6, 3, 3, 1, 2, 0, 1, 2, 1, 1, 1, 6, B16, F32, F32, SC, 0, 0, 1, {CGEN_EPI_RESIDUAL}},
    {1, 32, 56, 56, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 32, F32, F32, F32, -1, 0, 0, 1, {CGEN_EPI_BIAS_M}},
    /* depthwise stride 2 (columns split into even/odd phase planes, blocks of
     * rows x vectors): ow 56 = 3 vectors + 8 in blocks of 2 rows (oh 5: a
     * block of 1 row left), prepacked */
    {1, 4, 9, 112, 4, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 4, F32, F32, F32, A5, 0, 0, 2, {CGEN_EPI_BIAS_M, CGEN_EPI_RELU}, 1},
    /* ow 28, left padding 0 (even: pairs start at column 0), right 1; residual */
    {2, 3, 11, 56, 3, 3, 3, 2, 2, 0, 0, 1, 1, 1, 1, 3, F32, F32, F32, A5, 0, 0, 1, {CGEN_EPI_RESIDUAL}},
    /* ow 7 x oh 7 (one block of 7 rows), fp16 in and out, fp16 residual */
    {1, 5, 14, 14, 5, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 5, F16, F32, F16, A5, 0, 0, 2, {CGEN_EPI_BIAS_M, CGEN_EPI_RESIDUAL}},
    /* odd: W 57, padding 2 left, 1 right, 1 top, 0 bottom: ow 29; bf16 input split by vectors */
    {1, 6, 13, 57, 6, 3, 3, 2, 2, 1, 2, 0, 1, 1, 1, 6, B16, B16, F32, A5, 0, 0, 1, {CGEN_EPI_SILU}},
    /* AVX2 even/odd split of an fp16 input, ow 29 */
    {1, 4, 10, 57, 4, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 4, F16, F32, F32, A2, 0, 0, 1, {CGEN_EPI_BIAS_M}},
    /* stride 3, dilation 2: taps in phases 0, 2, 1 */
    {1, 3, 12, 50, 3, 3, 3, 3, 3, 2, 1, 1, 2, 2, 2, 3, F32, F32, F32, A5},
    /* AVX2 stride 2 dilation 3 (taps at phase 0, 1, 1 +1), stride 1 along H */
    {1, 4, 8, 40, 4, 3, 3, 1, 2, 1, 3, 1, 3, 1, 3, 4, F32, F32, F32, A2, 0, 0, 1, {CGEN_EPI_RELU}},
    /* 5x5 stride 2 (fewer accumulators), scalar stride 2 */
    {1, 4, 11, 60, 4, 5, 5, 2, 2, 2, 2, 2, 2, 1, 1, 4, F32, F32, F32, A5, 0, 0, 1, {CGEN_EPI_BIAS_M}},
    {1, 3, 9, 15, 3, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 3, F32, F32, F32, SC, 0, 0, 1, {CGEN_EPI_RESIDUAL}},
    /* stride 1 rows copied by vectors, the last one masked: fp16 input W 21
     * (16 + 5) with 2 columns of left padding on AVX-512, bf16 W 19 (8 + 8 +
     * 3) on AVX2, pad 0 left and 3 right */
    {1, 5, 7, 21, 5, 3, 3, 1, 1, 1, 2, 1, 2, 1, 1, 5, F16, F32, F32, A5, 0, 0, 1, {CGEN_EPI_BIAS_M}},
    {1, 3, 6, 19, 3, 3, 3, 1, 1, 1, 0, 1, 3, 1, 1, 3, B16, F32, F16, A2, 0, 0, 1, {CGEN_EPI_RELU}},
    /* small planes on two scratch planes, the next one copied before this
     * one is computed (several planes a task: 8 tasks): 7x7 flat, batch 2
     * x 13 channels, bf16 in and out; 14x14 rows of one vector, 19
     * channels; 14x14 stride 2 to a flat 7x7, batch 2; 7x7 rows on AVX2;
     * the scalar variant, batch 2 */
    {2, 13, 7, 7, 13, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 13, B16, F32, B16, A5, 0, 0, 2, {CGEN_EPI_BIAS_M, CGEN_EPI_RELU}, 1},
    {1, 19, 14, 14, 19, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 19, B16, F32, B16, A5, 0, 0, 2, {CGEN_EPI_BIAS_M, CGEN_EPI_RELU}},
    {2, 11, 14, 14, 11, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 11, B16, F32, F32, A5, 0, 0, 1, {CGEN_EPI_RESIDUAL}},
    {2, 9, 7, 7, 9, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 9, F32, F32, F32, A2, 0, 0, 1, {CGEN_EPI_BIAS_M}},
    {2, 5, 6, 6, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 5, F32, F32, F32, SC, 0, 0, 1, {CGEN_EPI_RESIDUAL}},
    /* dilation 5, 5x5: tap columns 5, 10, 15 and 20 past a vector's start,
     * the last one a whole vector further (aligned pairs shifted by 4) */
    {1, 3, 9, 37, 3, 5, 5, 1, 1, 10, 10, 10, 10, 5, 5, 3, F32, F32, F32, A5, 0, 0, 1, {CGEN_EPI_BIAS_M}},
    /* stride 1, ow 130: a loop of two 4-vector blocks, then 2 outputs */
    {1, 2, 5, 130, 2, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 2, F32, F32, F32, A5, 0, 0, 1, {CGEN_EPI_RESIDUAL}},
    /* stride 2, ow 29: a residual and a bias that multiply, then a bias that adds */
    {1, 4, 9, 57, 4, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 4, F32, F32, F32, A5, 0, 0, 3,
     {CGEN_EPI_RESIDUAL, CGEN_EPI_BIAS_M, CGEN_EPI_BIAS_M}, 0, 0, 0, 0, 3},
    /* strided direct convs as cgen_conv chooses them (test_strided_tiles
     * checks the tiles): 32-channel tiles, rows split 8 + 7 (W 30 -> ow 15,
     * H 29 odd), pad 1, batch 2, bias + relu */
    {2, 12, 29, 30, 64, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, F32, F32, F32, A5, 0, 0, 2, {CGEN_EPI_BIAS_M, CGEN_EPI_RELU}},
    /* pad 0, odd W 31 -> ow 15, fp16 input, weight, output and residual, 90
     * input channels in blocks of 16 (partial sums; a tail of 10), batch 2 */
    {2, 90, 13, 31, 96, 3, 3, 2, 2, 0, 0, 0, 0, 1, 1, 1, F16, F16, F16, A5, 0, 0, 3,
     {CGEN_EPI_BIAS_M, CGEN_EPI_RESIDUAL, CGEN_EPI_RELU}},
    /* the ResNet downsampling layer, reduced: ow 28 = 10 + 10 + 8, the left
     * tile in the padding, 57 input columns a row */
    {1, 8, 6, 56, 64, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, F32, F32, F32, A5, 0, 0, 2, {CGEN_EPI_BIAS_M, CGEN_EPI_RELU}, 1},
    /* stride 3: a 5x5 window (pad 2, ow 7, 80 channels: a block of 32 and a
     * tail of 16), and 3x3 with pad 1 (windows that do not overlap: the
     * implicit GEMM) plus the same 3x3 forced onto 32-channel direct tiles */
    {2, 6, 19, 20, 80, 5, 5, 3, 3, 2, 2, 2, 2, 1, 1, 1, F32, F32, F32, A5, 0, 0, 2, {CGEN_EPI_RESIDUAL, CGEN_EPI_RELU}},
    {2, 6, 17, 22, 40, 3, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, F32, F32, F32, A5, 0, 0, 2, {CGEN_EPI_BIAS_M, CGEN_EPI_RELU}},
    {2, 6, 17, 22, 40, 3, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, F16, F32, F16, A5, 0, 0, 2, {CGEN_EPI_BIAS_M, CGEN_EPI_RESIDUAL}, 0, DI, 0, 32},
    /* half inputs on the implicit GEMM, widened into fp32 scratch first (then
     * gathers, or row runs at stride 1): a 1x1 stride 2 in fp16; bf16 3x3
     * stride 3 with 2 groups (the second group's channels further into the
     * widened copy), prepacked weights (the copy at scratch offset 0) and
     * 2x40x15x15 = 18000 elements (two chunks); the forced GEMM at stride 1
     * (378 elements: a vector tail); AVX2's gathers */
    {2, 12, 9, 19, 33, 1, 1, 2, 2, 0, 0, 0, 0, 1, 1, 1, F16, F16, F16, A5, 0, 0, 2, {CGEN_EPI_BIAS_M, CGEN_EPI_RELU}},
    {2, 40, 15, 15, 12, 3, 3, 3, 3, 1, 1, 1, 1, 1, 1, 2, B16, F32, F32, A5, 0, 0, 1, {CGEN_EPI_RESIDUAL}, 1},
    {1, 6, 7, 9, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, F16, F32, F32, A5, 0, 0, 0, {0}, 0, GE},
    {2, 6, 10, 11, 10, 1, 1, 2, 2, 0, 0, 0, 0, 1, 1, 1, F16, F16, F32, A2, 0, 0, 1, {CGEN_EPI_BIAS_M}},
    /* 1x1, stride 1, no padding (contract_c.c's 1x1 convs over rows of
     * pixels): the implicit GEMM copies input rows as its B panel (AVX2;
     * scalar with an fp16 input; AVX2 with 2 groups and a widened bf16
     * input), and the direct kernel takes 256 input channels (the automatic
     * choice, rows of 14 = one tile) and 7x5 pixels (35: a padded GEMM) */
    {1, 40, 5, 12, 32, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, F32, F32, F32, A2, 0, 0, 2, {CGEN_EPI_BIAS_M, CGEN_EPI_RELU}},
    {2, 24, 3, 7, 16, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, F16, F32, F32, SC, 0, 0, 1, {CGEN_EPI_RESIDUAL}},
    {2, 20, 4, 7, 32, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 2, B16, F32, F32, A2, 0, 0, 1, {CGEN_EPI_BIAS_M}},
    {1, 256, 3, 14, 48, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, F32, F32, F32, A5, 0, 0, 2, {CGEN_EPI_BIAS_M, CGEN_EPI_RESIDUAL}, 1},
    {2, 24, 7, 5, 64, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, F32, F32, F16, A5, 0, 0, 2, {CGEN_EPI_BIAS_M, CGEN_EPI_RELU}},
};
#define NCASE ((int)(sizeof CASES / sizeof CASES[0]))

static void make_spec(const ccase *c, cgen_conv_spec *s) {
  cgen_conv_spec_init(s, c->n, c->c, c->h, c->w, c->oc, c->kh, c->kw, F32);
  s->stride[0] = c->sh, s->stride[1] = c->sw, s->dil[0] = c->dh, s->dil[1] = c->dw, s->groups = c->g;
  s->pad[0] = c->pt, s->pad[1] = c->pl, s->pad[2] = c->pb, s->pad[3] = c->pr;
  s->x_dtype = c->xdt, s->w_dtype = c->wdt, s->y_dtype = c->ydt;
  s->tune.force_isa = c->isa;
  if (c->isa >= 0) s->tune.isa_mask = 1u << c->isa;
  s->tune.kc = c->kc, s->tune.tasks = c->tasks;
  s->n_epi = c->nepi;
  for (int i = 0; i < c->nepi; i++) s->epi[i].kind = c->ek[i], s->epi[i].dtype = c->ydt, s->epi[i].mul = (c->mulm >> i) & 1;
  s->prepack_w = c->prepack;
  s->tune.conv_algo = c->algo;
  if (c->algo == DI) s->tune.mr = c->mr, s->tune.nr = c->nr;
}

/* The kernels of case i: 'c' as listed; an AVX-512 case that leaves the
 * choice to cgen_conv (the first NAUTO) also runs with the other algorithm
 * forced: 'g' (implicit GEMM) when 'c' is direct, 'd' (direct) when 'c' is
 * the GEMM and the direct kernel applies.  (Kernels are few on purpose: the
 * compile of the one translation unit is most of this test's time.) */
#define NAUTO 15
static bool twin(int idx, char kind, cgen_conv_spec *s) {
  const ccase *c = &CASES[idx];
  make_spec(c, s);
  if (kind == 'c') return true;
  if (idx >= NAUTO || (c->isa != A5 && c->isa != -1)) return false;
  if (c->g > 1 && c->g == c->c && c->oc == c->c) return false; /* depthwise: one kernel, no algorithm to force */
  const char *why;
  bool direct = cgen_conv_direct(s, &why);
  s->tune.conv_algo = kind == 'g' ? GE : DI;
  return kind == 'g' ? direct : !direct && c->xdt == F32;
}

static long run_case(void *h, int idx, hprt_pool *pool, char kind) {
  const ccase *c = &CASES[idx];
  cgen_conv_spec s;
  if (!twin(idx, kind, &s)) return 0;
  int64_t OH, OW;
  if (!cgen_conv_out_hw(&s, &OH, &OW)) return -1;
  char name[32];
  snprintf(name, sizeof name, "%c%d", kind, idx);
  conv_fn fn = (conv_fn)dlsym(h, name);
  if (!fn) return -1;
  long icg = c->c / c->g, ocg = c->oc / c->g, ny = c->n * c->oc * OH * OW;
  ct_buf X, W, Y, E[3];
  ct_alloc(&X, c->xdt, c->n * c->c * c->h * c->w, true);
  ct_alloc(&W, c->wdt, c->oc * icg * c->kh * c->kw, true);
  ct_alloc(&Y, c->ydt, ny + 32, false); /* the poisoned slack past the end must stay so */
  const void *ep[CGEN_MAX_EPI] = {0};
  for (int i = 0; i < c->nepi; i++) {
    long n = c->ek[i] == CGEN_EPI_BIAS_M ? c->oc : c->ek[i] == CGEN_EPI_RESIDUAL ? ny : 0;
    ct_alloc(&E[i], c->ydt, n, true);
    ep[i] = n ? E[i].p : NULL;
  }
  void *Wp = NULL;
  if (c->prepack) {
    char pn[48], bn[48];
    snprintf(pn, sizeof pn, "%c%d_pack_a", kind, idx);
    snprintf(bn, sizeof bn, "%c%d_pack_a_bytes", kind, idx);
    int (*pack)(hprt_pool *, const void *, void *) = (int (*)(hprt_pool *, const void *, void *))dlsym(h, pn);
    long (*bytes)(void) = (long (*)(void))dlsym(h, bn);
    if (!pack || !bytes || bytes() <= 0) return -1;
    Wp = malloc((size_t)bytes());
    if (pack(pool, W.p, Wp) != 0) return -1;
  }
  if (fn(pool, Wp ? Wp : W.p, X.p, Y.p, ep) != 0) return -1;
  free(Wp);
  double *ref = calloc((size_t)ny, sizeof(double));
  for (long n = 0; n < c->n; n++)
    for (long o = 0; o < c->oc; o++)
      for (long oh = 0; oh < OH; oh++)
        for (long ow = 0; ow < OW; ow++) {
          long g = o / ocg, yi = ((n * c->oc + o) * OH + oh) * OW + ow;
          double acc = 0;
          for (long ic = 0; ic < icg; ic++)
            for (long kh = 0; kh < c->kh; kh++)
              for (long kw = 0; kw < c->kw; kw++) {
                long ih = oh * c->sh - c->pt + kh * c->dh, iw = ow * c->sw - c->pl + kw * c->dw;
                if (ih < 0 || ih >= c->h || iw < 0 || iw >= c->w) continue;
                acc += (double)X.f[((n * c->c + g * icg + ic) * c->h + ih) * c->w + iw] *
                       W.f[((o * icg + ic) * c->kh + kh) * c->kw + kw];
              }
          for (int i = 0; i < c->nepi; i++) {
            switch (c->ek[i]) {
              case CGEN_EPI_BIAS_M: acc = c->mulm >> i & 1 ? acc * E[i].f[o] : acc + E[i].f[o]; break;
              case CGEN_EPI_RESIDUAL: acc = c->mulm >> i & 1 ? acc * E[i].f[yi] : acc + E[i].f[yi]; break;
              case CGEN_EPI_RELU: acc = acc > 0 ? acc : 0; break;
              case CGEN_EPI_SILU: acc = acc * ct_sigmoid(acc); break;
              case CGEN_EPI_GELU: acc = ct_gelu(acc); break;
              default: break;
            }
          }
          ref[yi] = acc;
        }
  char what[64];
  snprintf(what, sizeof what, "conv case %c%d (%s)", kind, idx, cgen_conv_direct(&s, &(const char *){0}) ? "direct" : "gemm");
  long bad = ct_check(&Y, ref, ny, what);
  for (long i = ny; i < ny + 32; i++)
    if (ct_load(&Y, i) != ct_round(c->ydt, 1234.5f)) {
      if (bad++ < 4) fprintf(stderr, "%s: [%ld] written past the end\n", what, i);
    }
  free(ref);
  ct_free(&X), ct_free(&W), ct_free(&Y);
  for (int i = 0; i < c->nepi; i++) ct_free(&E[i]);
  return bad;
}

static void test_cases(void **st) {
  (void)st;
  ut_str src;
  ut_str_init(&src);
  harp_error e;
  memset(&e, 0, sizeof e);
  static const char kinds[] = "cgd";
  for (int i = 0; i < NCASE; i++)
    for (int k = 0; k < 3; k++) {
      cgen_conv_spec s;
      if (!twin(i, kinds[k], &s)) continue;
      const char *why;
      if (kinds[k] != 'c') assert_true(cgen_conv_direct(&s, &why) == (kinds[k] == 'd'));
      if (kinds[k] == 'c' && CASES[i].algo == DI) assert_true(cgen_conv_direct(&s, &why));
      char name[32];
      snprintf(name, sizeof name, "%c%d", kinds[k], i);
      assert_int_equal(cgen_conv(&e, &s, name, &src), HARP_OK);
    }
  void *h = ct_compile(src.buf);
  assert_non_null(h);
  hprt_pool *pool = ct_pool_create(h, 2);
  assert_non_null(pool);
  for (int i = 0; i < NCASE; i++)
    for (int k = 0; k < 3; k++) {
      assert_int_equal(run_case(h, i, pool, kinds[k]), 0);
      if (i % 4 == k) assert_int_equal(run_case(h, i, NULL, kinds[k]), 0);
    }
  ct_pool_destroy(h, pool);
  dlclose(h);
  ut_str_free(&src);
}

/* Split-K (tune.splitk) the implicit GEMM cannot run is an Unsupported
 * error, not another kernel: too many slices, a K too short for them,
 * Winograd, a depthwise conv, bf16; 2 and 64 slices where K allows run. */
static void test_splitk_errors(ut_str *src) {
  harp_error e;
  memset(&e, 0, sizeof e);
  cgen_conv_spec s;
  const char *why;
  cgen_conv_spec_init(&s, 1, 512, 7, 7, 64, 3, 3, F32);
  s.pad[0] = s.pad[1] = s.pad[2] = s.pad[3] = 1;
  const int bad[] = {65, -1};
  for (int i = 0; i < 2; i++) {
    s.tune.splitk = bad[i];
    assert_int_equal(cgen_conv(&e, &s, "f", src), HARP_E_UNSUPPORTED);
    harp_error_clear(&e);
  }
  s.tune.splitk = 2;
  assert_true(cgen_conv_splitk_ok(&s, &why));
  assert_false(cgen_conv_direct(&s, &why)); /* the implicit GEMM, not the direct kernel */
  s.tune.splitk = 64;
  assert_true(cgen_conv_splitk_ok(&s, &why));
  s.tune.conv_algo = CGEN_CONV_WINO;
  assert_int_equal(cgen_conv(&e, &s, "f", src), HARP_E_UNSUPPORTED);
  harp_error_clear(&e);
  s.tune.conv_algo = CGEN_CONV_AUTO, s.tune.bf16 = true;
  assert_false(cgen_conv_splitk_ok(&s, &why));
  s.tune.bf16 = false;
  cgen_conv_spec_init(&s, 1, 3, 7, 7, 8, 1, 1, F32); /* K = 3: no 4 slices */
  s.tune.splitk = 4;
  assert_int_equal(cgen_conv(&e, &s, "f", src), HARP_E_UNSUPPORTED);
  harp_error_clear(&e);
  cgen_conv_spec_init(&s, 1, 16, 7, 7, 16, 3, 3, F32);
  s.groups = 16, s.tune.splitk = 2; /* depthwise */
  assert_int_equal(cgen_conv(&e, &s, "f", src), HARP_E_UNSUPPORTED);
  harp_error_clear(&e);
}

static void test_errors(void **st) {
  (void)st;
  ut_str src;
  ut_str_init(&src);
  harp_error e;
  memset(&e, 0, sizeof e);
  cgen_conv_spec s;
  cgen_conv_spec_init(&s, 1, 4, 8, 8, 4, 3, 3, F32);
  s.groups = 3;
  assert_int_equal(cgen_conv(&e, &s, "f", &src), HARP_E_INVALID_ARG);
  harp_error_clear(&e);
  /* a depthwise window beyond what the depthwise kernel unrolls */
  cgen_conv_spec_init(&s, 1, 4, 40, 40, 4, 12, 12, F32);
  s.groups = 4;
  assert_int_equal(cgen_conv(&e, &s, "f", &src), HARP_E_LIMIT);
  harp_error_clear(&e);
  /* a depthwise stride beyond its phase rows (17 columns) */
  cgen_conv_spec_init(&s, 1, 4, 40, 40, 4, 3, 3, F32);
  s.groups = 4, s.stride[1] = 17;
  assert_int_equal(cgen_conv(&e, &s, "f", &src), HARP_E_LIMIT);
  harp_error_clear(&e);
  cgen_conv_spec_init(&s, 1, 4, 8, 8, 4, 3, 3, F32);
  s.groups = 1, s.kh = 9; /* window larger than the padded input */
  assert_int_equal(cgen_conv(&e, &s, "f", &src), HARP_E_INVALID_ARG);
  harp_error_clear(&e);
  s.kh = 3, s.pad[0] = -1;
  assert_int_equal(cgen_conv(&e, &s, "f", &src), HARP_E_INVALID_ARG);
  harp_error_clear(&e);
  s.pad[0] = 0, s.stride[1] = 0;
  assert_int_equal(cgen_conv(&e, &s, "f", &src), HARP_E_INVALID_ARG);
  harp_error_clear(&e);
  s.stride[1] = 1, s.n_epi = 1, s.epi[0].kind = CGEN_EPI_BIAS_N, s.epi[0].dtype = F32;
  assert_int_equal(cgen_conv(&e, &s, "f", &src), HARP_E_UNSUPPORTED);
  harp_error_clear(&e);
  test_splitk_errors(&src);
  ut_str_free(&src);
}

/* Which kernel the AVX-512 variant gets without a choice made (cgen_conv_direct). */
static void test_choice(void **st) {
  (void)st;
  cgen_conv_spec s;
  const char *why;
  cgen_conv_spec_init(&s, 1, 64, 56, 56, 64, 3, 3, F32);
  s.pad[0] = s.pad[1] = s.pad[2] = s.pad[3] = 1;
  assert_true(cgen_conv_direct(&s, &why)); /* ResNet conv2_x: 64 output channels */
  s.c = s.oc = 256, s.h = s.w = 14, s.n = 8;
  assert_true(cgen_conv_direct(&s, &why));
  s.stride[0] = s.stride[1] = 2;
  assert_true(cgen_conv_direct(&s, &why)); /* 3 taps, stride 2: windows still overlap */
  s.kh = s.kw = 1, s.pad[0] = s.pad[1] = s.pad[2] = s.pad[3] = 0;
  assert_true(cgen_conv_direct(&s, &why)); /* 1x1 stride 2 onto 7x7: the GEMM would pad 15 of 64 lanes */
  s.h = s.w = 28;
  assert_false(cgen_conv_direct(&s, &why)); /* 1x1 stride 2 onto 14x14, 256 in: the implicit GEMM's dense panel */
  s.c = 1024, s.h = s.w = 56;
  assert_false(cgen_conv_direct(&s, &why)); /* onto 28x28, 1024 in */
  s.tune.bf16 = true;
  assert_true(cgen_conv_direct(&s, &why)); /* bf16 on channel pairs: as before, the direct kernel */
  s.tune.bf16 = false, s.c = 256, s.h = s.w = 14;
  s.stride[0] = s.stride[1] = 1;
  assert_true(cgen_conv_direct(&s, &why));
  s.c = 128;
  assert_false(cgen_conv_direct(&s, &why)); /* 128 in, 196 pixels (13 whole vectors): implicit GEMM */
  s.h = s.w = 7;
  assert_true(cgen_conv_direct(&s, &why)); /* 49 pixels: the GEMM would pad 15 of 64 lanes */
  s.oc = 200;
  assert_false(cgen_conv_direct(&s, &why)); /* output channels not in whole vectors */
  s.c = s.oc = 256, s.h = s.w = 14, s.groups = 2;
  assert_false(cgen_conv_direct(&s, &why)); /* grouped: the GEMM per group */
  s.groups = 1;
  s.kh = s.kw = 3, s.c = s.oc = 128, s.h = s.w = 28, s.n = 1, s.x_dtype = TINY_FP16;
  assert_true(cgen_conv_direct(&s, &why)); /* half input: widened into scratch, then direct */
  s.x_dtype = F32, s.tune.isa_mask = 1u << CGEN_ISA_AVX2;
  assert_false(cgen_conv_direct(&s, &why)); /* no AVX-512 variant */
  s.tune.isa_mask = 0, s.tune.conv_algo = GE;
  assert_false(cgen_conv_direct(&s, &why));
  s.tune.conv_algo = DI, s.c = s.oc = 512, s.kh = s.kw = 1;
  assert_true(cgen_conv_direct(&s, &why)); /* asked for: any shape that fits, 1x1 too */
  s.kh = s.kw = 16;
  assert_false(cgen_conv_direct(&s, &why)); /* 16 taps per row: wider than the direct kernel takes */
  assert_non_null(why);
}

/* The direct kernel's tile (its comment in the generated C) for a 3x3
 * layer: C -> OC channels at H x H, stride st, pad 1. */
static bool tile_is(long c, long oc, long h, long st, long k, const char *tile) {
  cgen_conv_spec s;
  cgen_conv_spec_init(&s, 1, c, h, h, oc, k, k, F32);
  s.stride[0] = s.stride[1] = st;
  s.pad[0] = s.pad[1] = s.pad[2] = s.pad[3] = k / 2;
  s.tune.isa_mask = 1u << CGEN_ISA_AVX512;
  ut_str src;
  ut_str_init(&src);
  harp_error e;
  memset(&e, 0, sizeof e);
  bool ok = cgen_conv(&e, &s, "f", &src) == HARP_OK && strstr(src.buf, tile) != NULL;
  if (!ok) fprintf(stderr, "%ld->%ld @%ld s%ld %ldx%ld: not %s\n", c, oc, h, st, k, k, tile);
  ut_str_free(&src);
  return ok;
}

/* Strided layers get 32-channel tiles: a stride-2 tile of 28 x 16 reads 57
 * input columns per 84 FMAs, 10 x 32 reads 21 per 60 (cg_dconv_plan's
 * instruction count); 16 channels stay where 32 would be mostly padding. */
static void test_strided_tiles(void **st) {
  (void)st;
  assert_true(tile_is(128, 128, 56, 2, 3, "10 x 32 tiles")); /* ResNet layer2 downsampling */
  assert_true(tile_is(64, 128, 56, 2, 3, "10 x 32 tiles"));
  assert_true(tile_is(128, 256, 28, 2, 3, "7 x 32 tiles"));
  assert_true(tile_is(256, 512, 14, 2, 3, "7 x 32 tiles"));
  assert_true(tile_is(3, 64, 224, 2, 7, "8 x 32 tiles")); /* the 7x7 stem */
  assert_true(tile_is(64, 64, 56, 1, 3, "12 x 32 tiles"));
  assert_true(tile_is(16, 16, 56, 2, 3, "28 x 16 tiles")); /* one block of 16 channels */
  assert_true(tile_is(6, 80, 20, 3, 5, "7 x 32 tiles"));    /* stride 3, 5x5 */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_errors),
      cmocka_unit_test(test_choice),
      cmocka_unit_test(test_strided_tiles),
      cmocka_unit_test(test_cases),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
