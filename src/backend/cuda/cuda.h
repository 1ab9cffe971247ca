/* cuda.h — the CUDA backend: kernel specs, the GPU dialect IR, the
 * generators (the single MMA template and the simple kernels), the CUDA C
 * printer.  The runtime (NVRTC + driver, dlopen'd) is in cuda_rt.h.
 *
 * Pipeline of this backend (one pass per file):
 *
 *   spec (+ cuda_tune = what the Schedule Plan decided)
 *     --cuda_gen_*-->   cuda_kernel: GPU dialect IR (a statement tree)      cuda_mma.c, cuda_attn.c,
 *                                                                           cuda_simple.c, cuda_sm90.c
 *     --cuda_print-->   CUDA C with inline PTX (one translation unit)      cuda_print.c
 *     --cuda_rt_*-->    NVRTC cubin, cuModuleLoadData, cuLaunchKernel      cuda_rt.c
 *   cuda_dump_json:     the dialect as JSON (--dump gpu)                   cuda_ir.c
 *
 * The specs mirror the CPU backend's (src/backend/c/cgen.h: cgen_gemm_spec,
 * cgen_conv_spec, cgen_attn_spec, cgen_epi) field for field, so that the
 * region layer fills both from one region summary; the GPU tuning fields are
 * the Schedule Plan's (seed 000 §1.7), see cuda_tune.
 *
 * Every size is a compile-time constant in the emitted code (a kernel is
 * specialised to one shape binding, like the CPU kernels).  Kernel
 * parameters are device pointers only, in the order each generator states.
 *
 * Architecture branches exist only here (the dialect layer): cuda_tune.arch
 * selects the SM80 template (cp.async + ldmatrix + mma.sync) or the SM90 one
 * (TMA + mbarrier + wgmma).
 *
 * Status: compile-verified (NVRTC, sm_80 and sm_90a) and executed on a CPU
 * SIMT simulator (tests/cuda_sim) that emulates cp.async / ldmatrix /
 * mma.sync from the PTX ISA's fragment tables; run on an H100 (2026-11-22,
 * docs/cuda.md "On a GPU"). */
#ifndef HARP_CUDA_H
#define HARP_CUDA_H

#include <stdbool.h>
#include <stdint.h>

#include "harp/error.h"
#include "harp/tiny.h"
#include "util/util.h"

#define CUDA_MAX_EPI 16
#define CUDA_MAX_PARAMS 48 /* a ShapeSet unit passes every size of its box: ResNet-18 over H, W has 22 */
#define CUDA_MAX_RANK 8
#define CUDA_MAX_EW_IN 8
#define CUDA_MAX_EW_INSTR 64
#define CUDA_MAX_META 24
#define CUDA_DEFAULT_SMS 132 /* an H100 SXM5: persistent grids when no device says otherwise */

typedef struct cuda_module cuda_module;

/* ---- architecture and tuning (the Schedule Plan's fields) ---------------- */
typedef enum cuda_arch { CUDA_SM80, CUDA_SM90, CUDA_ARCH_COUNT } cuda_arch;
const char *cuda_arch_name(cuda_arch a);      /* "sm80" | "sm90" */
/* *out for "sm80" or "sm90"; false for anything else (NULL included). */
bool cuda_arch_parse(const char *s, cuda_arch *out);
const char *cuda_arch_nvrtc(cuda_arch a);     /* "sm_80" | "sm_90a" */
/* A kernel for template arch t may be part of a module for arch m: the same
 * arch, or the SM80 template in an SM90 module (mma.sync runs on Hopper). */
bool cuda_arch_runs_on(cuda_arch t, cuda_arch m);
/* Bytes of shared memory one block may use on arch a (opt-in maximum). */
int64_t cuda_smem_max(cuda_arch a);

/* Split-K (algo_choice.matmul = splitk_*): slice ks of S runs K tiles
 * [ks*ceil(KT/S), ...) of its output tile; grid.z = batch x S (SM80), or
 * S tiles per output tile in the persistent queue (SM90). */
typedef enum cuda_splitk {
  /* splitk_parallel: raw fp32 partials added into C with red.global.add.f32
   * (C fp32 and zeroed by the caller; only bias / residual, added by slice 0) */
  CUDA_SPLITK_ATOMIC,
  /* splitk_reduce: slice ks stores its raw fp32 partial at C + ks * c_ss (C =
   * the fp32 workspace, no epilogue); cuda_gen_gemm_finish sums the slices in
   * order (deterministic) and applies the epilogue */
  CUDA_SPLITK_REDUCE,
  /* splitk_serial: slice ks waits until flags[tile] == ks, adds the running
   * sum of slices < ks from ws (fp32 [batch][M][N]) and, unless last, stores
   * it back and sets the flag to ks + 1; the last slice applies the whole
   * epilogue and stores C.  Extra parameters ws, flags (int, zeroed per run;
   * one per CTA of the grid).  SM80 template only. */
  CUDA_SPLITK_SERIAL
} cuda_splitk;
const char *cuda_splitk_name(cuda_splitk k); /* the plan's algorithm name */

/* What a Schedule Plan decides for one kernel.  0 / false means "choose".
 * How plan_t (include/harp/plan.h) maps onto it:
 *   tile [BM,BN,BK]         -> bm, bn, bk
 *   stages                  -> stages
 *   warp_tile "WMxWN"       -> warp_m, warp_n  (SM90: the consumer warpgroup tile)
 *   vectorize width         -> vec (elements per global store of C)
 *   layout_hints A/B_swizzle-> no_swizzle = !(a_swizzle && b_swizzle)
 *   predicate_tail          -> tails are always predicated where the shape
 *                              needs it; the list is recorded, never needed
 *   algo_choice.matmul      -> splitk (splitk_serial/parallel), see below
 *   algo_choice.attention   -> cuda_attn_spec.online
 *   arch                    -> arch
 *   bind block.x/y          -> raster (which grid axis walks N)
 *   local_edges             -> fixed by the template: reg (epilogue on the
 *                              accumulators; attention S -> P), smem ring
 *                              (operands) */
typedef struct cuda_tune {
  cuda_arch arch;
  int bm, bn, bk;     /* CTA tile; bm, bn multiples of the warp tile, bk of 16 */
  int stages;         /* SM80: 2 | 3; SM90: 2..4 */
  int warp_m, warp_n; /* warp tile (multiples of 16 x 16) */
  int vec;            /* C store width in elements: 1, 2 (fragment pairs) or 16 bytes' worth (SMEM-staged) */
  bool no_swizzle;    /* plain SMEM rows (tests: shows the ldmatrix bank conflicts) */
  int splitk;         /* >= 2: K split in slices (clamped to the K tiles), 0/1: none */
  cuda_splitk splitk_kind; /* how the slices combine (below) */
  bool raster_m_x;    /* bind m.o -> block.x (default: n.o -> block.x, m.o -> block.y) */
  int group_m;        /* SM90 persistent scheduler: grouped raster width in M tiles (0: 8) */
  bool persistent;    /* SM90: persistent CTAs walking the tile queue */
  int threads;        /* simple kernels: threads per CTA (0: 256) */
  int min_blocks;     /* SM80 template: CTAs per SM the registers must allow (__launch_bounds__;
                         0: no bound) */
  int winograd;       /* conv: 0 implicit GEMM; 2 / 4 Winograd F(2x2,3x3) / F(4x4,3x3); -1 the backend's
                         choice (cuda_wino_tile); cuda_gen_conv_wino reads it, cuda_gen_conv refuses it */
} cuda_tune;

void cuda_tune_default(cuda_tune *t, cuda_arch arch);

/* How a contraction computes (rt_gpu_opts.precision, `--precision`).  It
 * matters for fp32 operands only: fp16/bf16 operands always run their own
 * MMA (m16n8k16 / wgmma k16) with fp32 accumulation.
 *   TF32: fp32 operands on the tensor cores as TF32 (10-bit mantissa, fp32
 *         range), fp32 accumulation: mma.sync m16n8k8 .tf32 on the SM80
 *         template (operands rounded to nearest, ties away), wgmma k8 .tf32
 *         on the SM90 one (the hardware reads the top 19 bits: truncation);
 *         what cuBLAS, cuDNN and onnxruntime do for fp32 by default.
 *   FP32: strict fp32: a register-blocked SIMT template (FFMA, 8x8
 *         outputs per thread, operands staged in SMEM by cp.async,
 *         128-bit shared loads); never the tensor cores.
 *   FP16 / BF16: fp32 operands rounded to fp16 / bf16 as they enter the
 *         MMA (m16n8k16), fp32 accumulation; the output keeps its dtype. */
typedef enum cuda_math {
  CUDA_MATH_TF32, /* the default (0) */
  CUDA_MATH_FP32,
  CUDA_MATH_FP16,
  CUDA_MATH_BF16,
  CUDA_MATH_COUNT
} cuda_math;
const char *cuda_math_name(cuda_math m); /* "tf32" | "fp32" | "fp16" | "bf16" */
/* "tf32" | "fp32" | "fp16" | "bf16" -> *out; false for anything else. */
bool cuda_math_parse(const char *s, cuda_math *out);

/* ---- epilogues (mirror cgen_epi) ----------------------------------------- */
/* Applied in list order to the fp32 accumulator fragments in registers, then
 * the cast to the output dtype and the store; never through global memory. */
typedef enum cuda_epi_kind {
  CUDA_EPI_BIAS_M,   /* + bias[m] (x with .mul); conv: per output channel */
  CUDA_EPI_BIAS_N,   /* + bias[n] (x with .mul) */
  CUDA_EPI_RELU,
  CUDA_EPI_GELU,     /* exact: 0.5 x (1 + erf(x / sqrt 2)), like the interpreter */
  CUDA_EPI_SILU,     /* x * sigmoid(x) */
  CUDA_EPI_SIGMOID,
  CUDA_EPI_SCALE,    /* * scale + shift */
  CUDA_EPI_RESIDUAL, /* + R[b0][b1][m][n] at strides s_b0, s_b1, s_m, s_n (own dtype; x with .mul) */
  CUDA_EPI_ROUND,    /* round to dtype (fp16 / bf16) and back: a cast in the middle of the chain */
  CUDA_EPI_CLAMP,    /* min(max(x, lo), hi), NaN kept (ReLU6); an infinite bound: that side open */
  CUDA_EPI_RINT,     /* to the nearest integer, halves to even */
  CUDA_EPI_COUNT
} cuda_epi_kind;
const char *cuda_epi_name(cuda_epi_kind k);

typedef struct cuda_epi {
  cuda_epi_kind kind;
  tiny_dtype dtype;             /* bias / residual storage: FP32, FP16 or BF16; ROUND: FP16 or BF16 */
  float scale, shift;           /* CUDA_EPI_SCALE: v * scale + shift (a constant added: scale 1) */
  int64_t s_b0, s_b1, s_m, s_n; /* residual element strides (0 = broadcast); conv: NCHW like y */
  bool mul;                     /* BIAS_M / BIAS_N / RESIDUAL: times the tensor, not plus
                                   (batch norm as y * s + t); split-K parallel refuses it */
  float lo, hi;                 /* CUDA_EPI_CLAMP's bounds (not NaN) */
} cuda_epi;

/* ---- contraction specs (mirror cgen_*_spec) ------------------------------- */
/* A size read at run time in a ShapeSet build: lit x hp_sv<sym[0]> x ..
 * x hp_sv<sym[n-1]> (n 0: a constant, not read at run time). */
typedef struct cuda_rtsz {
  int64_t lit;
  int n, sym[8];
} cuda_rtsz;

/* Batched GEMM C[b0][b1] = A[b0][b1] x B[b0][b1], fp32 accumulation.
 * Kernel parameters: (A, B, C, ep0, ..., ep{n_epi-1}); ep[i] is the tensor of
 * epilogue i (bias or residual), pass NULL for the others.
 * Requirements (else Unsupported): A and B FP16, BF16 or FP32 (the same;
 * fp32 computes as `math` says), C FP16, BF16 or FP32; A has a_sk == 1 or
 * a_sm == 1, B has b_sn == 1 or b_sk == 1 (the contiguous dimension is
 * staged with cp.async; the chunk size is the largest of 16/8/4 bytes the
 * strides allow, else a register gather). */
typedef struct cuda_gemm_spec {
  int64_t batch[2];                     /* >= 1 each, e.g. [B, H] */
  int64_t M, N, K;                      /* >= 1 */
  tiny_dtype a_dtype, b_dtype, c_dtype;
  int64_t a_sb[2], a_sm, a_sk;          /* element strides, >= 0 */
  int64_t b_sb[2], b_sk, b_sn;
  int64_t c_sb[2], c_sm, c_sn;          /* C must not alias A, B or an epilogue tensor */
  int64_t c_ss;                         /* split-K REDUCE: element stride between the slices' partials */
  int n_epi;
  cuda_epi epi[CUDA_MAX_EPI];
  cuda_math math;                       /* fp32 operands: TF32 (default), strict FP32, FP16 / BF16 */
  cuda_tune tune;
  /* a ShapeSet build (nsyms > 0, the SM80 template, split-K too, or the SM90 one without;
   * the SM90 one's TMA maps then carry the formulas, cuda_tmap_desc): the
   * kernel takes the sizes hp_sv0 .. hp_sv<nsyms-1> (`const long`); a size or stride whose rt_* has n > 0 is read at run time (M, N, K are
   * then the box's most: the grid's tiles; a CTA past the binding's M or N
   * returns, the K loop runs the binding's tiles, its tail zero-filled) */
  int nsyms;
  cuda_rtsz rt_m, rt_n, rt_k, rt_b[2]; /* rt_b: batch[0], batch[1] (grid.z; a CTA past the binding's batches returns) */
  cuda_rtsz rt_st[6];    /* the strides a_sm, a_sk, b_sk, b_sn, c_sm, c_sn */
  cuda_rtsz rt_sb[3][2]; /* the batch strides of A, B, C */
  cuda_rtsz rt_epi[CUDA_MAX_EPI][4]; /* a residual's strides s_b0, s_b1, s_m, s_n */
  /* N at run time as C text of hp_sv<i> (a count no product formula writes:
   * Winograd's tiles; N's layout stays the box's), else NULL: rt_n */
  const char *n_text;
  /* a ShapeSet build's GEMM whose TMA strides are 16-byte aligned at some
   * bindings only, built as a pair (cuda_own): 1 the SM90 wgmma kernel of
   * the aligned bindings, -1 the SM80 kernel of the others, 0 no pair */
  int own;
} cuda_gemm_spec;

/* Row-major contiguous A[M][K], B[K][N], C[M][N], batch 1, C of dtype dt. */
void cuda_gemm_spec_init(cuda_gemm_spec *s, int64_t M, int64_t N, int64_t K, tiny_dtype dt);
/* K slices the GEMM kernel of s runs: tune.splitk clamped to the K tiles of
 * the template tune.arch selects; 1 without split-K. */
int cuda_gemm_slices(const cuda_gemm_spec *s);
/* The finishing pass of split-K ATOMIC / REDUCE: ws is the fp32 workspace
 * [P][batch][M][N] (contiguous; P = cuda_gemm_slices(s) partials for REDUCE,
 * 1 sum for ATOMIC); it sums the partials in slice order, applies s's whole
 * epilogue and stores C with s's dtype and strides.  An SM80-style kernel
 * (64x64 tiles, 4 warps, the template's Epilogue and stores).
 * Parameters: (ws, C, ep0, ...). */
harp_status cuda_gen_gemm_finish(harp_error *e, cuda_module *m, const cuda_gemm_spec *s, const char *name);
/* Zero `words` 32-bit words at `out` (split-K workspaces and flags, inside
 * the launch list so that a CUDA Graph replays it).  Parameters: (out). */
harp_status cuda_gen_zero(harp_error *e, cuda_module *m, int64_t words, const char *name);
/* A ShapeSet build's zeroing of a region of out read at run time: planes
 * planes (plane_stride words apart) of rows x cols words (rows row_stride
 * apart), rows = ceil(rows_sz / rows_div) and cols = ceil(cols_sz / cols_div)
 * at the binding (a formula with no symbol: its literal), each at most its
 * value at the box's corner hi, hi_rows / hi_cols.  The kernel takes the
 * sizes hp_sv0..hp_sv{nsyms-1}; its launch's grid.x comes from the same
 * count (cuda_zero_grid).  Parameters: (out, hp_sv0, ..). */
typedef struct cuda_zero_at {
  int64_t planes, plane_stride, row_stride, hi_rows, hi_cols, rows_div, cols_div;
  cuda_rtsz rows_sz, cols_sz;
  int nsyms;
} cuda_zero_at;
harp_status cuda_gen_zero_at(harp_error *e, cuda_module *m, const cuda_zero_at *z, const char *name);
/* A strided copy whose sizes are read at run time (a ShapeSet build's
 * repacked GEMM operand, cuda_copy_at.c): out[i0]..[i(rank-1)] dense from
 * in0 at sum i_j x src_stride[j], dims outermost first; each size and
 * stride a formula of the symbols (n 0: its lit), hi[j] the size at the
 * box's corner hi (the grid).  Converted to out_dtype on the store.  The
 * launch's grid.x comes from the binding's elements (cuda_copy_grid).
 * Parameters: (in0, out, hp_sv0, ..). */
#define CUDA_COPY_THREADS 256 /* per CTA; an element each */
typedef struct cuda_copy_at {
  int rank;
  int64_t hi[CUDA_MAX_RANK];
  cuda_rtsz size[CUDA_MAX_RANK], src_stride[CUDA_MAX_RANK];
  tiny_dtype in_dtype, out_dtype;
  int nsyms;
} cuda_copy_at;
harp_status cuda_gen_copy_at(harp_error *e, cuda_module *m, const cuda_copy_at *s, const char *name);
/* An fp32 matrix stored N-major, in[b0][b1][K][N] (element strides s_b[0],
 * s_b[1], s_k; 0 broadcasts a batch dimension), into a contiguous K-major
 * copy out[b0][b1][N][K], each value rounded to TF32 (to nearest, ties away:
 * the SM80 template's hk_tf32, low 13 bits cleared, so that wgmma's
 * truncation reads the rounded value and a second rounding changes nothing).
 * A 32x32 tile per CTA through SMEM: loads and stores coalesced.  How an
 * ONNX MatMul weight reaches TF32 wgmma, which reads K-major operands only.
 * Parameters: (in, out).  A ShapeSet build (nsyms > 0; issue 25) adds the
 * sizes hp_sv0 .. hp_sv<nsyms-1>: a batch count, K, N or source stride
 * whose rt_* has n > 0 is read at run time (batch, K, N are then the box's
 * corner hi's: the grid, and out's layout [b0][b1][N][K] at hi, so the
 * GEMM reads the copy through constant strides); a CTA past the binding's
 * batches returns, the rows and columns past its K and N are not read or
 * written. */
typedef struct cuda_pack_spec {
  int64_t batch[2], K, N;
  int64_t s_b[2], s_k;
  int nsyms;
  cuda_rtsz rt_b[2], rt_k, rt_n, rt_sb[2], rt_sk;
} cuda_pack_spec;
harp_status cuda_gen_pack_tf32(harp_error *e, cuda_module *m, const cuda_pack_spec *s, const char *name);

/* 2-D convolution as implicit GEMM (algo_choice.conv = implicit_gemm):
 * x NCHW, w OIHW [oc][c/groups][kh][kw], y NCHW, all contiguous.
 * GEMM view per (image, group): M = oc/groups, N = oh*ow, K = c/groups*kh*kw;
 * A = the weight rows (cp.async), B = the input gathered through the conv
 * access map (pad -> zero fill), C = y.  Parameters: (x, w, y, ep...).
 * BIAS_M is per output channel; RESIDUAL has y's layout (strides ignored). */
typedef struct cuda_conv_spec {
  int64_t n, c, h, w;
  int64_t oc, kh, kw;
  int64_t stride[2], pad[4], dil[2]; /* pad: top, left, bottom, right */
  int64_t groups;
  tiny_dtype x_dtype, w_dtype, y_dtype;
  int n_epi;
  cuda_epi epi[CUDA_MAX_EPI];
  cuda_math math; /* fp32 x and w: as cuda_gemm_spec.math */
  cuda_tune tune;
  /* a ShapeSet build (nsyms > 0, the implicit GEMM, split-K too): the
   * kernel takes hp_sv0 .. hp_sv<nsyms-1>; the images n, the input's h and
   * w whose rt_* has n > 0 are read at run time (n, h, w then the box's
   * most: the grid; the output's size follows from them in the kernel) */
  int nsyms;
  cuda_rtsz rt_n, rt_h, rt_w;
  /* y is split-K's fp32 workspace [image*group][OC/G][pixels] laid out at
   * the box's corner hi (n, h, w): its base and row stride stay constants
   * while the sizes are read at run time (the finishing pass reads it so) */
  bool ws_hi;
} cuda_conv_spec;

void cuda_conv_spec_init(cuda_conv_spec *s, int64_t n, int64_t c, int64_t h, int64_t w, int64_t oc,
                         int64_t kh, int64_t kw, tiny_dtype dt);
bool cuda_conv_out_hw(const cuda_conv_spec *s, int64_t *oh, int64_t *ow);

/* Attention out = softmax(scale * q k^T + mask) v, per (b, h).
 * q[b][h][m][d], k[b][h][n][d], v[b][h][n][dv], out[b][h][m][dv], contiguous.
 * algo_choice.attention: streaming_softmax_2pass (default; pass 1 streams
 * the row max and sum, pass 2 recomputes S and accumulates P v already
 * normalised) or online_softmax (one pass, rescaling the output).
 * Both matmuls run on mma.sync; S stays in registers and becomes the A
 * fragments of P v (the accumulator layout of two n8 tiles is the A layout
 * of one k16 step).  Parameters: (q, k, v, mask or NULL, out). */
typedef struct cuda_attn_spec {
  int64_t b, h, m, n, d, dv;
  /* Element strides over (b, h, row) of q, k, v and out when `strided` (else
   * each is contiguous); d and dv have unit stride.  A 0 broadcasts (k and v
   * shared by heads).  Rows are read with 16-byte cp.async: q/k/v strides and
   * bases must be multiples of 8 elements (else Unsupported); out's of 2. */
  bool strided;
  int64_t q_s[3], k_s[3], v_s[3], o_s[3];
  tiny_dtype q_dtype, kv_dtype, o_dtype;
  float scale;          /* 0: 1/sqrt(d) */
  bool causal;          /* key j visible to query i iff j <= i (top-left aligned) */
  bool has_mask;        /* additive mask[b][h][i][j] at mask_s (0 = broadcast) */
  tiny_dtype mask_dtype;
  int64_t mask_s[4];
  bool online;          /* algo_choice.attention = online_softmax */
  int bm, bn;           /* query rows / keys per tile (0: 64 / 64) */
  cuda_math math;       /* fp32 q, k, v: TF32 only (both matmuls m16n8k8 .tf32, P rounded to TF32) */
  cuda_tune tune;
  /* A ShapeSet build (issue 25): nsyms > 0 adds the size parameters
   * hp_sv0.. (const long); m and n (then the box's largest: the grid) and
   * the strides q_s, k_s, v_s, o_s, mask_s read as these formulas (n 0: the
   * constant above); a CTA past the binding's m returns at once, and so
   * does one past its batches rt_b and heads rt_h (then b and h are the
   * box's largest: grid.y; (batch, head) decoded by the run-time heads). */
  int nsyms;
  cuda_rtsz rt_m, rt_n, rt_st[4][3], rt_mask[4], rt_b, rt_h;
} cuda_attn_spec;

void cuda_attn_spec_init(cuda_attn_spec *s, int64_t b, int64_t h, int64_t m, int64_t n, int64_t d,
                         tiny_dtype dt);

/* ---- non-contraction specs ------------------------------------------------ */
/* An elementwise chain over an index space of `rank` axes: a small SSA list.
 * Instruction i computes value i; operands name earlier values.
 *   op = TINY_INPUT: load input `input` (its strides: 0 = broadcast)
 *   op = TINY_CONST: the immediate `imm`
 *   unary / binary / WHERE / CAST: tiny semantics (fp32 compute, fp16/bf16
 *   rounded at CAST and at the store, compares give 0/1).
 * The last instruction is stored to out (contiguous, out_dtype).
 * Parameters: (in0, ..., in{ninputs-1}, out). */
typedef struct cuda_ew_instr {
  tiny_op op;
  int a, b, c;      /* operand values (indices of earlier instructions) */
  int input;        /* TINY_INPUT */
  double imm;       /* TINY_CONST */
  tiny_dtype dtype; /* the value's dtype (CAST: target) */
} cuda_ew_instr;

typedef struct cuda_ew_input {
  tiny_dtype dtype;
  int64_t strides[CUDA_MAX_RANK]; /* elements; 0 = broadcast along that axis */
} cuda_ew_input;

typedef struct cuda_ew_spec {
  int rank;
  int64_t shape[CUDA_MAX_RANK];
  int ninputs;
  cuda_ew_input in[CUDA_MAX_EW_IN];
  int ninstr;
  cuda_ew_instr instr[CUDA_MAX_EW_INSTR];
  tiny_dtype out_dtype;
  cuda_tune tune; /* threads, vec (elements per thread per step; 0: 16 bytes' worth) */
} cuda_ew_spec;

/* Reductions: the input viewed as [outer][red][inner] (element strides
 * s_outer, s_red, s_inner), the output out[outer][inner] contiguous.
 * inner == 1: one warp per row, vectorised loads, warp shuffles; else one
 * thread per output column (coalesced across inner).
 * Parameters: (in, out). */
typedef struct cuda_reduce_spec {
  int64_t outer, red, inner;
  int64_t s_outer, s_red, s_inner;
  tiny_reduce_op op;
  bool has_init;
  double init;       /* folded in once (sum: added; max/min: compared) */
  tiny_dtype in_dtype, out_dtype; /* accumulation fp32 */
  cuda_tune tune;
} cuda_reduce_spec;

/* Row softmax / layernorm over the last axis of a [rows][cols] view
 * (row stride in elements, columns contiguous); output contiguous.
 * softmax: y = exp(x*scale - max) / sum   parameters (x, y)
 * layernorm: Welford mean/variance (biased), y = (x - mean) * rsqrt(var + eps)
 *            [* gamma[c]] [+ beta[c]]        parameters (x, gamma|NULL, beta|NULL, y) */
typedef struct cuda_rownorm_spec {
  int64_t rows, cols, row_stride;
  tiny_dtype in_dtype, out_dtype;
  float scale;            /* softmax: 0 -> 1 */
  float eps;              /* layernorm */
  bool has_gamma, has_beta;
  tiny_dtype gamma_dtype, beta_dtype;
  cuda_tune tune;
  /* a ShapeSet build (nsyms > 0: the kernel takes the sizes hp_sv0 ..
   * hp_sv<nsyms-1>, `const long`): the rows at run time are rows_lit times
   * the symbols rows_sym[0..nrows_sym); rows is then the box's most (the grid) */
  int nsyms, nrows_sym, rows_sym[8];
  int64_t rows_lit;
  /* the row length at run time (rt_cols.n > 0: rt_cols.lit times its
   * symbols; cols and row_stride are then the box's most, the row stride
   * the run-time length too) */
  cuda_rtsz rt_cols;
} cuda_rownorm_spec;

/* ---- the GPU dialect IR ----------------------------------------------------- */
/* A kernel is a tree of statements.  Template statements (CpAsync, LdMatrix,
 * MmaSync, Epilogue, ...) are the ops of seed 000 §1.8; structural ones (For,
 * If, Decl, Assign) carry index arithmetic as C expression text built by the
 * generators (never from model names).  X(ENUM, "Name", "string operands",
 * "integer attributes") — the operand names are the JSON keys. */
#define CUDA_STMTS(X)                                                                   \
  X(BLOCK, "Block", "", "")                                                             \
  X(FOR, "For", "var,begin,end,step", "unroll")                                         \
  X(IF, "If", "cond", "")                                                               \
  X(DECL, "Decl", "type,name,dims,init", "")                                            \
  X(ASSIGN, "Assign", "lhs,rhs", "")                                                    \
  X(CALL, "Call", "text", "")                                                           \
  X(COMMENT, "Comment", "text", "")                                                     \
  X(BARRIER, "Barrier", "", "")                                                         \
  X(CP_ASYNC, "CpAsync", "dst_smem,src_gmem,src_bytes", "bytes,group")                  \
  X(COMMIT_GROUP, "CommitGroup", "", "")                                                \
  X(WAIT_GROUP, "WaitGroup", "", "pending")                                             \
  X(LD_GLOBAL, "LdGlobal", "dst,ptr,pred", "bytes")                                     \
  X(ST_SHARED, "StShared", "dst_smem,val", "bytes")                                     \
  X(LD_SHARED, "LdShared", "dst,src_smem", "bytes")                                     \
  X(LDMATRIX, "LdMatrix", "dst_frag,src_smem", "num,trans")                             \
  X(MMA_SYNC, "MmaSync", "acc,a_frag,b_frag", "m,n,k")                                  \
  X(EPILOGUE, "Epilogue", "acc,row0,col0,m_lim,n_lim,rows,cols", "mf,nf")               \
  X(ST_GLOBAL_VEC, "StGlobalVec", "ptr,val,pred", "bytes")                              \
  X(SHFL_XOR, "ShflXor", "var,lanemask,combine", "")                                            \
  X(ATOMIC_ADD, "AtomicAdd", "ptr,val,pred", "")                                        \
  X(TMA_LOAD, "TmaLoad", "dst_smem,desc,coords,mbar", "dims")                           \
  X(TMA_STORE, "TmaStore", "desc,src_smem,coords", "dims")                              \
  X(MBAR_INIT, "MbarInit", "mbar,count", "")                                            \
  X(MBAR_EXPECT_TX, "MbarExpectTx", "mbar,bytes", "")                                   \
  X(MBAR_ARRIVE, "MbarArrive", "mbar", "")                                              \
  X(MBAR_WAIT, "MbarWait", "mbar,phase", "")                                            \
  X(WGMMA, "Wgmma", "acc,a_desc,b_desc,scale_d", "m,n,k,trans_b")                       \
  X(WGMMA_FENCE, "WgmmaFence", "", "")                                                  \
  X(WGMMA_COMMIT, "WgmmaCommit", "", "")                                                \
  X(WGMMA_WAIT, "WgmmaWait", "", "pending")                                             \
  X(SETMAXNREG, "SetMaxNReg", "", "regs,inc")                                           \
  X(FENCE_PROXY_ASYNC, "FenceProxyAsync", "", "")                                       \
  X(LOOP, "Loop", "var,init,cond,inc", "")                                              \
  X(CODE, "Code", "text", "")

typedef enum cuda_stmt_kind {
#define CUDA_X_ENUM(e, n, s, i) CU_##e,
  CUDA_STMTS(CUDA_X_ENUM)
#undef CUDA_X_ENUM
  CU_STMT_COUNT
} cuda_stmt_kind;

const char *cuda_stmt_name(cuda_stmt_kind k);

#define CUDA_STMT_NS 7 /* string operands */
#define CUDA_STMT_NI 4 /* integer attributes */

/* One epilogue op inside an Epilogue statement: what to apply and, for bias
 * and residual, the pointer expression of the tensor's (batch) base. */
typedef struct cuda_epi_ir {
  cuda_epi e;
  const char *ptr; /* C expression; NULL for ops without a tensor */
  const char *s_m_t, *s_n_t; /* a residual's strides read at run time (C text; a ShapeSet build), else NULL */
} cuda_epi_ir;

typedef struct cuda_stmt {
  cuda_stmt_kind kind;
  const char *s[CUDA_STMT_NS]; /* operands, in the order of the table (NULL: absent) */
  int64_t i[CUDA_STMT_NI];     /* attributes, in the order of the table */
  tiny_dtype dtype;            /* MmaSync / Wgmma operand dtype; Epilogue output dtype */
  struct cuda_stmt **body;     /* Block / For / If */
  int nbody, capbody;
  struct cuda_stmt **els;      /* If: else branch (may be empty) */
  int nels, capels;
  cuda_epi_ir *epi;            /* Epilogue */
  int nepi;
} cuda_stmt;

typedef enum cuda_param_kind {
  CUDA_P_PTR_IN,  /* const T * __restrict__ */
  CUDA_P_PTR_OUT, /* T * __restrict__ */
  CUDA_P_TMAP,    /* const __grid_constant__ CUtensorMap (SM90, 128 bytes) */
  CUDA_P_LONG     /* long: a size read at run time (a ShapeSet symbol's value, region_cuda.h) */
} cuda_param_kind;

/* What the host must encode into a CUDA_P_TMAP parameter
 * (cuTensorMapEncodeTiled): a tiled view of one tensor, innermost first. */
#define CUDA_TMAP_MAX_RANK 5
typedef struct cuda_tmap_desc {
  const char *tensor; /* the logical tensor: "A", "B" or "C" (the GEMM spec's operands) */
  tiny_dtype dtype;
  int rank;
  uint64_t dims[CUDA_TMAP_MAX_RANK];        /* elements, innermost first */
  uint64_t strides[CUDA_TMAP_MAX_RANK - 1]; /* bytes of dims 1..rank-1 (multiples of 16) */
  uint32_t box[CUDA_TMAP_MAX_RANK];         /* elements per TMA transfer */
  int swizzle;                              /* 0: none, 3: 128-byte (CU_TENSOR_MAP_SWIZZLE_128B) */
  /* a ShapeSet build (issue 25): a dim or stride whose formula has n > 0 is
   * the binding's (lit x hp_sv<i> x ..; strides in bytes), encoded by the
   * runtime before each launch (cuda_tmap_at); dims / strides then hold the
   * box's corner hi */
  cuda_rtsz rt_dims[CUDA_TMAP_MAX_RANK], rt_strides[CUDA_TMAP_MAX_RANK - 1];
} cuda_tmap_desc;

/* Descriptor d at the binding sv (the box's symbols' values, hp_sv<i> =
 * sv[i]) into *out: its run-time dims and strides evaluated, the rest
 * copied; sv NULL: d as it is.  (cuda_wgmma_rt.c) */
void cuda_tmap_at(const cuda_tmap_desc *d, const int64_t *sv, cuda_tmap_desc *out);
/* Whether descriptors a and b encode alike at every binding: the same
 * rank, box, swizzle, formulas, and values where no formula. */
bool cuda_tmap_same(const cuda_tmap_desc *a, const cuda_tmap_desc *b);

typedef struct cuda_param {
  const char *name;  /* C identifier */
  const char *ctype; /* element type: "hk_u16", "float", "unsigned char", "hk_tmap" */
  cuda_param_kind kind;
  tiny_dtype dtype;  /* element dtype of a pointer */
  const cuda_tmap_desc *tmap; /* CUDA_P_TMAP: how to encode it */
  int align;                  /* bytes the pointer must be aligned to (vector / cp.async width) */
} cuda_param;

typedef struct cuda_meta {
  const char *key;
  const char *str; /* string value, or NULL for the integer */
  int64_t num;
} cuda_meta;

/* Invariants: name is a C identifier unique in its module; block[0] is a
 * multiple of 32 (a whole number of warps); grid[i] >= 1; smem_bytes is the
 * dynamic shared memory the launch must request. */
/* The bindings one kernel of a pair serves (cuda_gemm_spec.own): the
 * strides st[0..n) in bytes, formulas of the symbols (those of the SM90
 * GEMM's tensor maps that are not 16-byte aligned at every binding);
 * aligned: the bindings where every one is a multiple of 16 (the wgmma
 * kernel), else those where one is not (the SM80 kernel).  At another
 * binding the kernel returns at once, and the runtime encodes its tensor
 * maps as generated (at the box's corner hi, where they are aligned). */
typedef struct cuda_own {
  bool aligned;
  int n;
  cuda_rtsz st[9];
} cuda_own;

typedef struct cuda_kernel {
  const char *name;
  const char *kind; /* "mma_gemm" | "mma_conv" | "attention" | "ewise" | "reduce" | "softmax" | "layernorm" | "wgmma_gemm"
                     | "splitk_finish" | "zero" */
  cuda_arch arch;
  int nparams;
  cuda_param params[CUDA_MAX_PARAMS];
  int64_t grid[3];
  int block[3];
  int64_t smem_bytes;
  int min_blocks; /* __launch_bounds__ second argument (0: none) */
  /* > 0: a persistent kernel walking this many tiles; the launch sets
   * grid.x = min(tiles, SMs x min_blocks) from the device (grid[0] holds
   * that for CUDA_DEFAULT_SMS, the figure without a device) */
  int64_t persistent_tiles;
  const cuda_own *own; /* one kernel of a pair: the bindings it serves; NULL: every one */
  /* a ShapeSet build's kernel whose grid along axis grid_axis (0 x, 1 y)
   * covers a count it reads at run time (Winograd's tiles P, a GEMM's N):
   * that count's items per block (its launch may size that grid at the
   * binding); 0: none */
  int64_t grid_items;
  int grid_axis;
  cuda_stmt *body; /* a Block */
  int nmeta;
  cuda_meta meta[CUDA_MAX_META]; /* the plan as the template read it: tile, stages, ... */
} cuda_kernel;

/* A translation unit: kernels that are printed, compiled and loaded together.
 * Owns every IR object through its arena. */
#define CUDA_MAX_HELPERS 8
typedef struct cuda_module {
  ut_arena *arena;
  cuda_kernel **k;
  int n, cap;
  cuda_arch arch; /* all kernels share it */
  /* device code some generators need besides the prelude (printed once,
   * after it, in the order added; the generic kernels' hp_* helpers) */
  const char *helpers[CUDA_MAX_HELPERS];
  int nhelpers;
} cuda_module;

harp_status cuda_module_new(harp_error *e, cuda_arch arch, cuda_module **out);
/* Print `text` once per module, after the prelude (by pointer identity). */
harp_status cuda_module_helpers(harp_error *e, cuda_module *m, const char *text);
void cuda_module_free(cuda_module *m);

/* ---- generators: append one kernel named `name` to m --------------------- */
/* name must be a C identifier (ut_is_safe_name without '.' and '-'); errors:
 * Unsupported (shape/dtype/layout outside the template), InvalidArgument
 * (inconsistent spec), SmemOverflow / RegOverflow (tile too large). */
harp_status cuda_gen_gemm(harp_error *e, cuda_module *m, const cuda_gemm_spec *s, const char *name);
/* Does the SM90 (TMA/wgmma) branch take s as its tune says (0 fields: the
 * template's defaults)?  Else false and why (nullable) says what it refuses. */
bool cuda_sm90_gemm_ok(const cuda_gemm_spec *s, char *why, int cap);
/* A ShapeSet build of the SM90 template (cuda_wgmma_rt.c): whether every
 * stride of t's TMA maps read at run time stays a multiple of 16 bytes at
 * every binding (its literal factor); and the run-time dims and strides of
 * the maps tm[0..2] (A, B, C, as cuda_sm90_gemm fills them at the corner
 * hi) from t's formulas, false when one takes more than 8 symbols. */
bool cuda_sm90_rt_aligned(const cuda_gemm_spec *t);
bool cuda_sm90_tmaps_rt(const cuda_gemm_spec *s, cuda_tmap_desc tm[3]);
/* The pair's bindings of GEMM s (s->own != 0; NULL otherwise or out of
 * memory, *oom then true) in arena a: s's unaligned TMA strides. */
const cuda_own *cuda_gemm_own(ut_arena *a, const cuda_gemm_spec *s, bool *oom);
/* z's value at the binding sv (hp_sv<i> = sv[i]; a constant: z->lit). */
int64_t cuda_rtsz_at(const cuda_rtsz *z, const int64_t *sv);
/* s's strides read at run time (rt_st, rt_sb, a residual's rt_epi) set to
 * their values at the binding sv: a pair's wgmma kernel takes the corner
 * hi's, the same at both corners of a box. */
void cuda_gemm_strides_at(cuda_gemm_spec *s, const int64_t *sv);
/* Whether kernel k serves the binding sv (hp_sv<i> = sv[i]; k->own NULL:
 * every one; sv NULL, no binding: true). */
bool cuda_kernel_own_at(const cuda_kernel *k, const int64_t *sv);
harp_status cuda_gen_conv(harp_error *e, cuda_module *m, const cuda_conv_spec *s, const char *name);
/* The finishing pass of conv s split along K as splitk_parallel
 * (tune.splitk > 1, kind ATOMIC): reads the fp32 workspace ws
 * [image*group][OC/G][OH*OW] the split conv added into (y fp32, no
 * epilogue), applies s's epilogue and stores y.  Parameters: ws, y, ep0.. */
harp_status cuda_gen_conv_finish(harp_error *e, cuda_module *m, const cuda_conv_spec *s, const char *name);
/* Winograd F(m x m, 3 x 3) of conv s (cuda_wino.c): a 3x3 stride-1
 * dilation-1 ungrouped conv, fp16 / bf16 (fp32: as TF32 or rounded, not
 * strict).  tile m: 2 or 4.  Appends four kernels: <name>_wfilter (w ->
 * wu), <name>_winput (x -> wv), <name> (the batched GEMM: A = wu, B = wv,
 * C = wm) and <name>_woutput (wm, y, ep0..); the workspaces' sizes are
 * cuda_wino_dims's. */
typedef struct cuda_wino_dims {
  int m, a, T;                       /* output tile, patch side, transformed points */
  int64_t oh, ow, th, tw, P, Pp, Cp; /* output, tiles per column / row, tiles of every image (P, padded Pp), Cp */
  int64_t u_bytes, v_bytes, m_bytes; /* wu, wv, wm */
} cuda_wino_dims;
bool cuda_wino_applies(const cuda_conv_spec *s, const char **why);
int cuda_wino_tile(const cuda_conv_spec *s, int asked); /* the tile of tune.winograd `asked` (-1: choose) */
bool cuda_wino_dims_of(const cuda_conv_spec *s, int tile, cuda_wino_dims *d);
harp_status cuda_gen_conv_wino(harp_error *e, cuda_module *m, const cuda_conv_spec *s, int tile, const char *name);
harp_status cuda_gen_attn(harp_error *e, cuda_module *m, const cuda_attn_spec *s, const char *name);
harp_status cuda_gen_ewise(harp_error *e, cuda_module *m, const cuda_ew_spec *s, const char *name);
harp_status cuda_gen_reduce(harp_error *e, cuda_module *m, const cuda_reduce_spec *s, const char *name);
harp_status cuda_gen_softmax(harp_error *e, cuda_module *m, const cuda_rownorm_spec *s, const char *name);
harp_status cuda_gen_layernorm(harp_error *e, cuda_module *m, const cuda_rownorm_spec *s, const char *name);

/* The kernel named name, or NULL. */
const cuda_kernel *cuda_module_find(const cuda_module *m, const char *name);

/* ---- outputs ---------------------------------------------------------------- */
/* CUDA C with inline PTX for the whole module (--dump cu).  The text needs no
 * header: a prelude defines the hk_* helpers, guarded by #ifndef HK_SIM so
 * that the CPU simulator (tests/cuda_sim) can supply its own.  Malloc'd. */
harp_status cuda_print(harp_error *e, const cuda_module *m, char **out);
/* The statements of k's body as cuda_print prints them (the text
 * cuda_dedup.c compares), appended to o. */
void cuda_print_body(ut_str *o, const cuda_kernel *k);
/* The dialect as JSON (--dump gpu): {"gpu":{"arch":..,"kernels":[...]}}. */
harp_status cuda_dump_json(harp_error *e, const cuda_module *m, char **out);
/* Structural check of a kernel: known statement kinds, operands present,
 * For/If bodies, param names.  Generators call it before returning. */
harp_status cuda_kernel_verify(harp_error *e, const cuda_kernel *k);

/* ---- builder (used by the generators) -------------------------------------- */
#define CUDA_B_DEPTH 32
typedef struct cuda_b {
  ut_arena *a;
  harp_error *e;
  cuda_stmt *stack[CUDA_B_DEPTH]; /* open Block/For/If; stack[0] is the kernel body */
  bool in_else[CUDA_B_DEPTH];
  int depth;
  bool oom;
  cuda_stmt sink; /* what cuda_emit hands out once an allocation failed */
} cuda_b;

cuda_kernel *cuda_kernel_new(cuda_b *b, cuda_module *m, harp_error *e, const char *name, const char *kind);
/* printf into the module arena (NULL format -> NULL). */
const char *cuda_fmt(cuda_b *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
cuda_stmt *cuda_emit(cuda_b *b, cuda_stmt_kind k);
cuda_stmt *cuda_emit_s(cuda_b *b, cuda_stmt_kind k, const char *s0, const char *s1, const char *s2,
                       const char *s3);
void cuda_open(cuda_b *b, cuda_stmt *st); /* statements now go into st's body */
void cuda_else(cuda_b *b);                /* ... into the If's else branch */
void cuda_close(cuda_b *b);
/* Common shapes. */
void cuda_for(cuda_b *b, const char *var, const char *begin, const char *end, int unroll); /* opens */
void cuda_for_step(cuda_b *b, const char *var, const char *begin, const char *end, const char *step, int unroll);
void cuda_if(cuda_b *b, const char *cond);                                                 /* opens */
void cuda_decl(cuda_b *b, const char *type, const char *name, const char *dims, const char *init);
void cuda_assign(cuda_b *b, const char *lhs, const char *rhs);
void cuda_call(cuda_b *b, const char *text);
void cuda_comment(cuda_b *b, const char *text);
void cuda_param_add(cuda_kernel *k, const char *name, const char *ctype, cuda_param_kind kind, tiny_dtype dt);
/* Require `bytes` alignment of the last parameter added (default: its element size). */
void cuda_param_align(cuda_kernel *k, int bytes);
void cuda_meta_int(cuda_kernel *k, const char *key, int64_t v);
void cuda_meta_str(cuda_kernel *k, const char *key, const char *v);
/* Finish: OutOfMemory if an allocation failed, else verify. */
harp_status cuda_b_finish(cuda_b *b, cuda_kernel *k);

/* Element type name for a storage dtype: hk_u16 (fp16/bf16), float, int, unsigned char. */
const char *cuda_ctype(tiny_dtype t);
/* Device helpers: load one element as float / convert float to storage. */
const char *cuda_ld_fn(tiny_dtype t);  /* "hk_ldf_f16" ... */
const char *cuda_cvt_fn(tiny_dtype t); /* "hk_f2h" ... (float -> storage) */
bool cuda_is_cname(const char *s);

#endif
