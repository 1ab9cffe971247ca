/* cgen.h — CPU contraction kernel generators (internal API of the C backend).
 *
 * Gives C source text for four kernel families, each specialised to one
 * shape binding (every size is a compile-time constant in the emitted code):
 *   cgen_gemm  batched GEMM, BLIS-style: packed A/B panels, a register-blocked
 *              FMA micro-kernel, the epilogue fused into the micro-kernel's store;
 *              with M <= 8 (and C unit-stride along N, B unit-stride along N
 *              or K) the vector variants stream B without packing it;
 *   cgen_conv  2-D convolution (NCHW input, OIHW weight) as implicit GEMM: the
 *              B panels are gathered straight from the input (zero for pad);
 *              or, on AVX-512 with overlapping windows (3x3, not 1x1), a
 *              direct convolution that broadcasts the input in place
 *              (cgen_dconv.c); depthwise (groups == c == oc) has its own
 *              kernel on every ISA (cgen_dwconv.c);
 *   cgen_attn  attention with a fused streaming (online) softmax;
 *   cgen_softmax  row softmax along the last axis (three passes over a row);
 *   cgen_pool  2-D max / sum pooling with padding (cgen_dwconv.c's plane layout);
 *   cgen_map   elementwise chains (activations, arithmetic, roundings) over
 *              dense or row-broadcast operands.
 * and a helper that compiles a source string into a shared object and dlopens it.
 *
 * The emitted code is plain C (GNU C, any -std=gnu11/c11 compiler of the GCC
 * family), needs no harp header and can be part of a larger translation unit.
 * Each kernel is emitted up to three times (AVX-512, AVX2+FMA, portable scalar)
 * with __attribute__((target(...))) on the vector variants; the exported entry
 * point picks one once per process through __builtin_cpu_supports.  So the
 * translation unit must NOT be compiled with -march=native (that would let the
 * "portable" variant use instructions that an older machine lacks); the
 * default flags of cgen_compile_so are -O3 -fPIC -shared.
 *
 * A small persistent pthread pool ("hprt_*", guarded by HPRT_RUNTIME so it is
 * defined once per translation unit) is emitted together with the first
 * kernel.  Its exported C API, for the runtime that calls the kernels:
 *   hprt_pool *hprt_pool_create(int nthreads);   NULL on failure; caller counts
 *   void hprt_pool_destroy(hprt_pool *);
 * Kernels take the pool as first argument (NULL: run on the calling thread)
 * and return 0, or -1 when scratch memory could not be allocated.
 *
 * Emitted entry points (fn_name is the caller's, must be a C identifier):
 *   int fn(hprt_pool *pool, const void *A, const void *B, void *C,
 *          const void *const *ep);          gemm and conv (conv: A = weight
 *                                           OIHW, B = input NCHW, C = output)
 *   int fn(hprt_pool *pool, const void *q, const void *k, const void *v,
 *          const void *mask, void *out);    attention
 * ep[i] is the tensor of epilogue i (bias or residual; NULL for the others).
 */
#ifndef HARP_CGEN_H
#define HARP_CGEN_H

#include <stdbool.h>
#include <stdint.h>

#include "harp/error.h"
#include "harp/tiny.h"
#include "util/util.h"

#define CGEN_MAX_EPI 16

/* Which code variants an emitted kernel contains (bit set of 1 << cgen_isa). */
typedef enum cgen_isa { CGEN_ISA_SCALAR, CGEN_ISA_AVX2, CGEN_ISA_AVX512, CGEN_ISA_COUNT } cgen_isa;

/* Epilogue steps, applied in list order to the fp32 accumulator in registers,
 * before the final cast to the output dtype and the store. */
typedef enum cgen_epi_kind {
  CGEN_EPI_BIAS_M,   /* + bias[m] (1-D, contiguous, own dtype); conv: per output channel */
  CGEN_EPI_BIAS_N,   /* + bias[n] */
  CGEN_EPI_RELU,
  CGEN_EPI_GELU,     /* exact: 0.5 x erfc(-x/sqrt2), vectorised, ~1e-7 rel */
  CGEN_EPI_SILU,     /* x * sigmoid(x) */
  CGEN_EPI_SIGMOID,
  CGEN_EPI_SCALE,    /* * scale + shift */
  CGEN_EPI_RESIDUAL, /* + R[b0][b1][m][n] at strides s_b0, s_b1, s_m, s_n (own dtype) */
  CGEN_EPI_ROUND,    /* round to dtype (fp16 or bf16) and back: a cast in the middle of the chain */
  CGEN_EPI_CLAMP,    /* min(max(x, lo), hi), NaN kept (ReLU6: lo 0, hi 6; -inf / inf: that side open) */
  CGEN_EPI_RINT,     /* to the nearest integer, halves to even (requantization) */
  CGEN_EPI_DIV,      /* / scale (a QuantizeLinear's x / s: the pool template's chain; hardswish's / 6) */
  CGEN_EPI_GATE,     /* x * min(max(x * scale + shift, lo), hi) (hardswish before its / 6), NaN kept */
  CGEN_EPI_COUNT
} cgen_epi_kind;

typedef struct cgen_epi {
  cgen_epi_kind kind;
  tiny_dtype dtype;              /* bias / residual storage: FP32, FP16 or BF16; ROUND: FP16 or BF16 */
  float scale;                   /* CGEN_EPI_SCALE; CGEN_EPI_DIV: the divisor */
  float shift;                   /* CGEN_EPI_SCALE: added after the product (0: none) */
  int64_t s_b0, s_b1, s_m, s_n;  /* residual element strides (0 = broadcast); conv: ignored,
                                    the residual has the output's NCHW layout */
  bool mul;                      /* BIAS_M / BIAS_N / RESIDUAL: multiply by the tensor instead */
  float lo, hi;                  /* CGEN_EPI_CLAMP's and CGEN_EPI_GATE's bounds (not NaN) */
} cgen_epi;

/* What a Schedule Plan decides (design.md §2.8).  0 means "choose".
 *   warp_tile WxH        -> mr x nr (register micro-tile of the widest variant)
 *   tile [BM, BN, BK]    -> mc, nc, kc (packed A rows, packed B columns, depth)
 *   vectorize ... width  -> simd (16: AVX-512 and below, 8: AVX2 and below, 1: scalar)
 *   stages               -> prefetch (software prefetch distance in k steps)
 *   bind m.o/n.o block.* -> par_m / par_n, threads (and tasks for finer balance)
 *   cache_read A|B smem  -> always: A and B are packed into contiguous panels
 *   epilogue [...]       -> the spec's epi list (fused into the micro-kernel store)
 * Invariants checked by the generators: nr % simd == 0 and
 * mr*nr/simd + nr/simd + 1 <= 32 (AVX-512; 16 for AVX2), else RegOverflow. */
typedef struct cgen_tuning {
  int mr, nr;        /* micro-tile rows x columns (floats); default 6x64 (zmm), 6x16 (ymm), 4x4 */
  int mc, nc, kc;    /* default mc = M (order 0), nc = 512, kc = 256 */
  int simd;
  int prefetch;      /* k steps ahead for B (0: default 8; < 0: none) */
  int order;         /* loop order: 0 = A micro-panel kept in L1 across the N loop
                        (ir outer, jr inner; measured best here); 1 = B micro-panel kept in
                        L1 across the M loop (jr outer) with mc-row A blocks kept in L2;
                        2 = as 0, with an mc-row block of C kept across the K loop */
  int threads;       /* parallel workers the split targets (default 2) */
  int tasks;         /* parallel tasks (default = threads); more tasks balance noisy cores */
  bool par_m, par_n; /* may split M (rows) / N (columns) across tasks; batch dims
                        are always parallel.  Both false = choose. */
  int unroll_k;      /* GEMM / implicit-GEMM conv: the micro-kernel's K loop unrolled this
                        many times (#pragma GCC unroll; 0: 4) */
  int splitk;        /* GEMM: K slices spread over tasks, partials summed in slice order
                        (0, 1: none; 2..64: the skinny kernel only, cgen_skinny.c) */
  unsigned isa_mask; /* variants to emit, bits 1 << cgen_isa (0: all that simd allows) */
  bool no_fallback;  /* the JIT: a vector variant of isa_mask runs on this host, so the
                        scalar fallback is left out (it only cost compile time) */
  int force_isa;     /* tests: -1 = dispatch by CPUID; else always run this variant */
  bool conv_gather;  /* conv: always pack B with gathers (tests/bench of that path) */
  int conv_algo;     /* conv: CGEN_CONV_AUTO, CGEN_CONV_GEMM or CGEN_CONV_DIRECT (the
                        AVX-512 variant; direct also reads mr = pixels per tile and
                        nr = 16 or 32 output channels per tile) */
  bool bf16;         /* GEMM / conv / attention: the AVX-512 variant rounds A and B to bf16 and multiplies
                        with vdpbf16ps, fp32 accumulation (harp_options.precision "bf16"); it
                        then runs only where the CPU has AVX512_BF16 (else the AVX2 variant,
                        fp32).  Skinny GEMMs (M <= CGEN_SKINNY_MAX_M) stay fp32, but those
                        whose weight B is prepacked (cgen_gemm_skinny_bf16_ok) */
  bool amx;          /* with bf16: a GEMM / implicit-GEMM conv also gets an AMX variant (cgen_amx.c:
                        tdpbf16ps on 32x32 tiles of C), run where the CPU has AMX-BF16 and the
                        kernel grants the tile state (arch_prctl, once), else the AVX-512 one */
  bool amx_im2col;   /* with amx: a stride-1 conv's AMX variant gathers B panels (im2col) as strided ones do,
                        not tiles read in place from padded channel-pair planes (cgen_amx_conv.c; tests, A/B) */
  bool bf16_native;  /* GEMM / conv whose two operands are stored in bf16: the same kernels
                        (exact products, fp32 accumulation; AVX512_BF16 as above) */
  struct {          /* conv, the direct kernel (cgen_dconv.c, fp32) under a Schedule Plan; 0: its own choice */
    int px, oc;      /*   register tile: px pixels x oc (16 or 32) output channels (warp tile) */
    int cb;          /*   input channels per block (tile K / window taps) */
    int rows;        /*   output rows per task (tile of the pixels / output width) */
    int order;       /*   1: a row block's output-channel blocks run on (tile N spans every output
                          channel), 2: an output-channel block's row blocks run on */
  } dconv;
  bool bf16_cvt;     /* harp_options.precision "bf16": a kernel that stores bf16 rounds with
                        vcvtneps2bf16 in its AVX-512 variant (nearest even, subnormals to 0,
                        as vdpbf16ps reads them), which then asks for AVX512_BF16 */
} cgen_tuning;

/* How the AVX-512 variant of a convolution computes (cgen_conv_direct says
 * which AUTO picks and why; the other variants are always implicit GEMM).
 * WINO: Winograd F(m x m, 3x3) (cgen_wino.c), m chosen from the output size
 * (cgen_conv_wino_tile), or F(2x2) / F(4x4) as asked; AUTO never picks it (the
 * Schedule Plan's algo_choice conv winograd_3x3 does). */
enum { CGEN_CONV_AUTO, CGEN_CONV_GEMM, CGEN_CONV_DIRECT, CGEN_CONV_WINO, CGEN_CONV_WINO2, CGEN_CONV_WINO4 };

void cgen_tuning_default(cgen_tuning *t);

typedef struct cgen_gemm_spec {
  int64_t batch[2];                 /* two batch dims (>= 1 each), e.g. [B, H] */
  int64_t M, N, K;                  /* >= 1 */
  tiny_dtype a_dtype, b_dtype, c_dtype; /* FP32, FP16 or BF16; accumulation is fp32 */
  /* element strides: A[b0][b1][m][k] = A + b0*a_sb[0] + b1*a_sb[1] + m*a_sm + k*a_sk.
   * Transposed operand = swapped strides; broadcast batch = stride 0. >= 0. */
  int64_t a_sb[2], a_sm, a_sk;
  int64_t b_sb[2], b_sk, b_sn;
  int64_t c_sb[2], c_sm, c_sn;      /* C must not alias A, B or an epilogue tensor */
  int n_epi;
  cgen_epi epi[CGEN_MAX_EPI];
  cgen_tuning tune;
  bool prepack_a;                   /* A is constant (weights): also emit
                                       long fn_pack_a_bytes(void) and
                                       int fn_pack_a(pool, A, Ap) that packs it once;
                                       fn then takes the packed Ap as its A (a
                                       compiled model does so for its params:
                                       contract_c.c, emit_model.c) */
  bool prepack_b;                   /* the same for B (fn_pack_b_bytes, fn_pack_b):
                                       B shared by every batch (b_sb 0 where a
                                       batch > 1), not with prepack_a; with
                                       M <= CGEN_SKINNY_MAX_M the streaming
                                       kernel, which packs nothing, is given up,
                                       but under tune.bf16 (cgen_gemm_skinny_bf16_ok) */
  const char *m_expr;               /* NULL, or M read at run time (a ShapeSet
                                       object: rc_size_expr), a C expression
                                       whose value is in 1..M; M is then the
                                       upper corner's, which picks the tiles and
                                       sizes the scratch (batch 1, not a conv,
                                       not prepack_a, not bf16; else refused) */
  int64_t m_small;                  /* with m_expr: a run of fewer rows runs its tasks on
                                       the calling thread, the pool's scratch kept (waking
                                       the workers costs more; 0: never) */
  const char *b0_expr;              /* NULL, or batch[0] read at run time (a ShapeSet
                                       object), a C expression whose value is in
                                       1..batch[0]; batch[0] is then the upper
                                       corner's, which sizes the scratch; the tasks'
                                       split is chosen per run as a specialised
                                       object of that batch would (not with m_expr,
                                       bf16 or a conv; else refused) */
  const char *n_expr;               /* NULL, or N read at run time (a ShapeSet
                                       object), a C expression whose value is in
                                       1..N; N is then the upper corner's, which
                                       picks the tiles and sizes the scratch; C's
                                       row stride and, where B has unit column
                                       stride, B's are this run's N (c_sm and b_sk
                                       must equal N, as a residual's s_m where its
                                       s_n is 1); the tasks split along N per run
                                       (one batch, M a constant, no prepack_b, not
                                       bf16, no split-K; else refused) */
  const char *k_expr;               /* NULL, or K read at run time, in 1..K (K the
                                       upper corner's, which picks KC and sizes the
                                       scratch): A dense [M][K] (a_sk 1, a_sm K: its
                                       row stride this run's K), B [K][N] with unit
                                       column stride; one batch, M a constant, no
                                       prepacked operand, not bf16, no split-K; else
                                       refused */
} cgen_gemm_spec;

/* At most this many rows of A: B is streamed, not packed (cgen_gemm.c). */
#define CGEN_SKINNY_MAX_M 8

/* Fill a row-major contiguous spec: A[M][K], B[K][N], C[M][N], batch 1. */
void cgen_gemm_spec_init(cgen_gemm_spec *s, int64_t M, int64_t N, int64_t K, tiny_dtype dt);

/* Append the kernel `fn_name` (plus static helpers prefixed fn_name_) to out. */
harp_status cgen_gemm(harp_error *e, const cgen_gemm_spec *spec, const char *fn_name, ut_str *out);
/* Can spec split K (tune.splitk > 1, the Plan's splitk_reduce)?  Only in the
 * skinny kernel: M <= CGEN_SKINNY_MAX_M, a vector ISA, B and C unit-stride,
 * no prepacked operand, M a constant. */
bool cgen_gemm_splitk_ok(const cgen_gemm_spec *spec);
/* Does spec, with prepack_b, run its AVX-512 variant as the skinny kernel over
 * a bf16 copy of B (tune.bf16, M <= CGEN_SKINNY_MAX_M, M and the batch
 * constants, no split-K, B unit-stride along K or N, C along N)? */
bool cgen_gemm_skinny_bf16_ok(const cgen_gemm_spec *spec);

typedef struct cgen_conv_spec {
  int64_t n, c, h, w;               /* input NCHW */
  int64_t oc, kh, kw;               /* weight [oc][c/groups][kh][kw] */
  int64_t stride[2], pad[4], dil[2]; /* pad: top, left, bottom, right */
  int64_t groups;                   /* c % groups == 0, oc % groups == 0 */
  tiny_dtype x_dtype, w_dtype, y_dtype;
  int n_epi;                        /* BIAS_M = per output channel; RESIDUAL = NCHW like y */
  cgen_epi epi[CGEN_MAX_EPI];
  cgen_tuning tune;
  bool prepack_w;                   /* as cgen_gemm_spec.prepack_a, for the weight */
  const char *n_expr, *h_expr, *w_expr; /* NULL, or that size read at run time (a ShapeSet
                                       object: rc_size_expr), a C expression whose value
                                       is in 1..n / h / w, which are then the upper
                                       corner's (blocking, tiles, scratch): the depthwise
                                       kernel (every variant), else the direct kernel on a
                                       zero-padded copy of the input in the AVX-512 variant,
                                       the implicit GEMM in the others (cgen_gemm_rt.c),
                                       fp32 multiplication, not Winograd; else refused
                                       (cgen_conv_rt_ok) */
  int64_t wino_min_px;              /* with sizes at run time: 0, or a binding with at least this many
                                       output pixels an image runs Winograd (F(4x4) or F(2x2) as
                                       cgen_conv_wino_tile's rule says at that binding), fewer the
                                       direct kernel (AVX-512) or the implicit GEMM (AVX2): those
                                       variants hold both (cgen_wino_rt.c) */
  int64_t wino_min_px_f2;           /* 0, or (a weight transformed every call: the transform's cost
                                       differs by tile) wino_min_px is F(4x4)'s threshold and this
                                       F(2x2)'s, where the cost model's rule gives the binding's
                                       columns F(2x2): fewer than 8, or 27 to 52 */
} cgen_conv_spec;

void cgen_conv_spec_init(cgen_conv_spec *s, int64_t n, int64_t c, int64_t h, int64_t w, int64_t oc,
                         int64_t kh, int64_t kw, tiny_dtype dt);
/* Output size; false if the window does not fit. */
bool cgen_conv_out_hw(const cgen_conv_spec *s, int64_t *oh, int64_t *ow);
harp_status cgen_conv(harp_error *e, const cgen_conv_spec *spec, const char *fn_name, ut_str *out);
/* True when cgen_conv's AVX-512 variant is the direct kernel (cgen_dconv.c)
 * rather than the implicit GEMM; *why says the reason in a few words. */
bool cgen_conv_direct(const cgen_conv_spec *spec, const char **why);
/* Whether cgen_conv takes spec's n_expr / h_expr / w_expr (sizes read at run
 * time): a depthwise conv, or one the direct kernel takes; *why says which,
 * or why not. */
bool cgen_conv_rt_ok(const cgen_conv_spec *spec, const char **why);
/* Whether spec (sizes read at run time, wino_min_px set) runs in cgen_conv's
 * AVX-512 variant as the direct kernel or Winograd, in its AVX2 one as the
 * implicit GEMM or Winograd, chosen per binding:
 * fp32 storage, a conv both take (cgen_wino_rt.c). */
bool cgen_conv_rt_multi_ok(const cgen_conv_spec *spec);
/* Whether s (with tune.conv_algo a CGEN_CONV_WINO*) can run as Winograd in
 * its AVX-512 variant: a 3x3 window, stride and dilation 1, groups 1, fp32
 * storage; *why says why not.  cgen_conv refuses a Winograd spec it cannot
 * honour (HARP_E_UNSUPPORTED) rather than running something else. */
bool cgen_conv_wino_ok(const cgen_conv_spec *spec, const char **why);
/* Whether s (tune.splitk = S > 1, the Plan's splitk_reduce) can split its
 * K into S slices: the implicit GEMM in every variant (not Winograd, the
 * direct or the depthwise kernel), fp32 multiplication, sizes constant,
 * S in 2..64 slices of whole KC blocks (cgen_splitk.c); *why says why not. */
bool cgen_conv_splitk_ok(const cgen_conv_spec *spec, const char **why);
/* The output tile m (2 or 4) of that kernel: as tune.conv_algo asks, or
 * (CGEN_CONV_WINO) 2 below 8 outputs a side or at 27 to 52 columns (rows of
 * F(2) tiles read by loads, F(4)'s gathered), else 4. */
int cgen_conv_wino_tile(const cgen_conv_spec *spec);

typedef struct cgen_attn_rt {
  const char *b, *m, *n, *q[2], *k[2], *v[2], *o[2], *mask[3];
} cgen_attn_rt;

typedef struct cgen_attn_spec {
  int64_t b, h, m, n, d, dv;   /* q[b][h][m][d], k[b][h][n][d], v[b][h][n][dv], out[b][h][m][dv] */
  /* Element strides over (b, h, row) of q, k, v and out when `strided`
   * (else each is contiguous); d and dv always have unit stride.  A 0
   * broadcasts (k and v shared by heads).  out must not overlap an input. */
  bool strided;
  int64_t q_s[3], k_s[3], v_s[3], o_s[3];
  tiny_dtype q_dtype, kv_dtype, o_dtype;
  float scale;                 /* 0: 1/sqrt(d) */
  bool causal;                 /* key j visible to query i iff j <= i (top-left aligned) */
  bool has_mask;               /* additive mask[b][h][i][j] at the strides below (0 = broadcast) */
  tiny_dtype mask_dtype;
  int64_t mask_s[4];
  int bm, bn;                  /* query rows / keys per tile (0: choose) */
  cgen_tuning tune;            /* simd, threads, tasks, isa_mask, force_isa */
  /* A ShapeSet object: C expressions of the shape symbols (rc_size_expr)
   * read at run time, NULL where the constant holds for every binding; b, m
   * and n are then the largest values, which tiles and scratch are sized
   * for.  Strides: (b, h) of q, k, v, out; (b, h, row) of the mask. */
  cgen_attn_rt rt;
} cgen_attn_spec;

void cgen_attn_spec_init(cgen_attn_spec *s, int64_t b, int64_t h, int64_t m, int64_t n, int64_t d,
                         tiny_dtype dt);
harp_status cgen_attn(harp_error *e, const cgen_attn_spec *spec, const char *fn_name, ut_str *out);

/* Row softmax y[r][:] = exp(scale (x[r][:] - max)) / sum over dense rows of
 * cols (cgen_softmax.c).  Entry point: int fn(hprt_pool *pool, const void *x,
 * void *y); y must not overlap x.  A row holding NaN or +-inf gives NaN. */
typedef struct cgen_softmax_spec {
  int64_t rows, cols;
  tiny_dtype x_dtype, y_dtype; /* FP32, FP16 or BF16; computed in fp32 */
  float scale;                 /* > 0 */
  cgen_tuning tune;            /* simd, isa_mask, force_isa */
  const char *rows_expr;       /* NULL; else the row count as a C expression read at run time
                                  (a ShapeSet object: rc_size_expr), rows its value here */
  const char *cols_expr;       /* NULL; else the row length read at run time, in 1..cols_hi
                                  (the per-thread scratch sized for cols_hi); cols its value here */
  int64_t cols_hi;
  /* a QDQ softmax: x through pro[0..npro) before the max (a dequantize and
   * requantize), y = e * ymul / sum through epi[0..nepi) before the store (a
   * quantize); steps with constants only (no bias, residual).  0, 1, 0: none */
  int npro, nepi;
  cgen_epi pro[CGEN_MAX_EPI], epi[CGEN_MAX_EPI];
  float ymul;
} cgen_softmax_spec;

void cgen_softmax_spec_init(cgen_softmax_spec *s, int64_t rows, int64_t cols, tiny_dtype dt);
harp_status cgen_softmax(harp_error *e, const cgen_softmax_spec *spec, const char *fn_name, ut_str *out);

/* 2-D pooling of an NCHW tensor (cgen_pool.c): per output element the max
 * (NaN when the window holds one, as the reference) or the sum of a
 * kh x kw window over the input padded with `fill`, then the epilogue
 * steps without a tensor (an average's SCALE, RELU, ROUND...).  Entry
 * point: int fn(hprt_pool *pool, const void *x, void *y); y (dense NCHW)
 * must not overlap x. */
typedef struct cgen_pool_spec {
  int64_t n, c, h, w;                /* input NCHW, dense */
  int64_t kh, kw;
  int64_t stride[2], pad[4], dil[2]; /* pad: top, left, bottom, right, >= 0 */
  bool sum;                          /* sum of the window, else max */
  float fill;                        /* the pad value (not NaN) */
  tiny_dtype x_dtype, y_dtype;       /* FP32, FP16 or BF16; computed in fp32 */
  int n_epi;
  cgen_epi epi[CGEN_MAX_EPI];
  cgen_tuning tune;                  /* simd, isa_mask, force_isa */
  const char *n_expr, *h_expr, *w_expr; /* NULL, or that size read at run time (a ShapeSet
                                       object), a C expression in 1..n / h / w, which are
                                       then the upper corner's (they size the scratch) */
} cgen_pool_spec;

/* Defaults: stride and dilation 1, no padding, max with fill -inf, fp32. */
void cgen_pool_spec_init(cgen_pool_spec *s, int64_t n, int64_t c, int64_t h, int64_t w, int64_t kh, int64_t kw);
/* Output size (floor mode); false if the window does not fit. */
bool cgen_pool_out_hw(const cgen_pool_spec *s, int64_t *oh, int64_t *ow);
harp_status cgen_pool(harp_error *e, const cgen_pool_spec *spec, const char *fn_name, ut_str *out);

/* Elementwise map (cgen_map.c): y = f(inputs) point by point over a
 * domain of outer[0] x .. x outer[nouter-1] rows of `cols`, y dense
 * row-major.  An input reads one element per point (row-major within a row,
 * at its own strides across rows) or, `bcast`, one element per row.  The
 * ops run in list order on fp32 values, each reading inputs, constants or
 * earlier ops; y is the last op, stored in y_dtype.  Entry point:
 * int fn(hprt_pool *pool, const void *const *in, void *y); y must not
 * overlap an input.  Numerics follow the reference interpreter (NaN in, NaN
 * out; infinities; subnormal results kept) to within ~2 ulp. */
#define CGEN_MAP_MAX_IN 8
#define CGEN_MAP_MAX_OPS 48
#define CGEN_MAP_MAX_OUTER 4
/* A map op: a Tiny op the op table gives a vector form (tiny_op_vec: unary
 * or binary; MAX/MIN: NaN wins), or one of these two (unary). */
enum {
  CGEN_MAP_COPY = TINY_OP_COUNT, /* the operand */
  CGEN_MAP_ROUND                 /* to `dtype` (fp16/bf16) and back */
};
typedef struct cgen_map_arg {
  char kind; /* 'i' input idx, 'v' the value of op idx (< this op), 'c' the constant c */
  int idx;
  float c;
} cgen_map_arg;
typedef struct cgen_map_op {
  int kind; /* a tiny_op, CGEN_MAP_COPY or CGEN_MAP_ROUND */
  tiny_dtype dtype; /* ROUND */
  cgen_map_arg a, b;
} cgen_map_op;
typedef struct cgen_map_in {
  tiny_dtype dtype;                    /* FP32, FP16, BF16 */
  bool bcast;                          /* one element per row (stride 0 along it) */
  int64_t offset;                      /* elements */
  int64_t ostride[CGEN_MAP_MAX_OUTER]; /* elements per step of each outer dimension */
  const char *ostride_expr[CGEN_MAP_MAX_OUTER]; /* NULL; else that stride read at run time */
  const char *offset_expr;                      /* NULL; else the offset read at run time */
} cgen_map_in;
typedef struct cgen_map_spec {
  int nouter;
  int64_t outer[CGEN_MAP_MAX_OUTER], cols;
  int nin;
  cgen_map_in in[CGEN_MAP_MAX_IN];
  tiny_dtype y_dtype;
  /* y: dense from element 0, or (y_strided, a piece of a larger output) the
   * row at y_offset + sum of the outer coordinates times y_ostride[] */
  bool y_strided;
  int64_t y_offset, y_ostride[CGEN_MAP_MAX_OUTER];
  int nops;
  cgen_map_op ops[CGEN_MAP_MAX_OPS];
  cgen_tuning tune; /* simd, isa_mask, force_isa; tasks: 4 per thread of the pool */
  const char *total_expr; /* NULL; else the point count as a C expression read at run time (a
                             ShapeSet object: rc_size_expr), its value here cols x outer[] */
  /* A ShapeSet object: NULL, or the row length, an outer dimension's size, a
   * stride of y (and of an input, cgen_map_in.ostride_expr) as C expressions
   * read at run time, on the calling thread (the values here: the upper
   * corner's); the point count is then their product unless total_expr */
  const char *cols_expr, *outer_expr[CGEN_MAP_MAX_OUTER], *y_ostride_expr[CGEN_MAP_MAX_OUTER], *y_offset_expr;
  /* y_u8: y is stored as bytes v + y_zo (u8, clamped to [0, 255], NaN as 0)
   * instead of y_dtype: the chain's values are integers of [-y_zo, 255 - y_zo]
   * (an int8 activation q8_hold.c holds as bytes) */
  bool y_u8;
  int y_zo;
} cgen_map_spec;

/* One row of `cols` elements, no inputs, no ops, fp32 out. */
void cgen_map_spec_init(cgen_map_spec *s, int64_t cols);
harp_status cgen_map(harp_error *e, const cgen_map_spec *spec, const char *fn_name, ut_str *out);

/* ---- compile and load -------------------------------------------------- */
typedef struct cgen_cc_opts {
  const char *cc;     /* NULL: "cc" (the knob cc, $CC, is the caller's to pass) */
  const char *flags;  /* NULL: "-O3" ; always added: -fPIC -shared, -lm -lpthread */
  const char *workdir; /* where to put the .c/.so; NULL: /tmp (the knob tmpdir, $TMPDIR) */
} cgen_cc_opts;

/* Compile src into a fresh shared object and dlopen it (RTLD_NOW|RTLD_LOCAL).
 * *handle is for dlsym/dlclose; the files are removed once loaded.
 * Compiler diagnostics end up in the error message (truncated). */
harp_status cgen_compile_so(harp_error *e, const char *src, const cgen_cc_opts *opts, void **handle);

#endif
