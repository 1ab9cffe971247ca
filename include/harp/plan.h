/* harp/plan.h — the Schedule Plan (seed 000 §1.7, §12.5, §12.6), the machine
 * descriptions, the resource model (§5) and the cost model (§6).
 *
 * A plan is a plain C struct (plan_t): fixed-size arrays, no pointers, so it
 * can be copied, compared and enumerated by value.  It has two textual forms,
 * the JSON of §12.5 and the DSL of §12.6 (plus harp's documented extension
 * statements, docs/plan.md), and both convert losslessly through plan_t:
 *
 *     text --plan_parse_dsl / plan_parse_json--> plan_t --plan_to_json / plan_to_dsl--> text
 *
 * Loading checks the plan's own consistency (plan_check).  plan_validate then
 * checks it against the region it schedules (plan_region_info, filled by the
 * region layer) and a machine (plan_machine): axes, tails, algo_choice,
 * architecture rules, and resources (SmemOverflow / RegOverflow come from the
 * resource model, never from a compile failure).
 *
 * The same fields read on the CPU as design.md §2.8 says: bind block.* =
 * parallel outer tiles, warp_tile = register micro-tile, vectorize = SIMD
 * width, cache_read smem = packing into contiguous panels (bounded by L2 per
 * core), stages = prefetch distance, epilogue = fused into the store.
 */
#ifndef HARP_PLAN_H
#define HARP_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "harp/error.h"
#include "harp/tiny.h"

/* ---- limits ---------------------------------------------------------------- */
#define PLAN_NAME_MAX 64      /* axis, tensor and node names, NUL included */
#define PLAN_MAX_TILE 3       /* tile = [BM, BN, BK] */
#define PLAN_MAX_BIND 6       /* one per target */
#define PLAN_MAX_CACHE 4
#define PLAN_MAX_AXLIST 24    /* reorder, predicate_tail */
#define PLAN_MAX_EPI 8
#define PLAN_MAX_EDGES 16
#define PLAN_MAX_SPLITS 8     /* splits beyond the tile and warp tile */
#define PLAN_MAX_SPLITK 64     /* split-K slices a plan may ask for */
#define PLAN_MAX_FUSE 4
#define PLAN_MAX_UNROLL 8
#define PLAN_MAX_FACTOR 65536 /* largest split / tile factor */
#define PLAN_MAX_TEXT ((size_t)1 << 20)

/* ---- vocabularies ------------------------------------------------------------- */
typedef enum plan_arch { PLAN_ARCH_SM80, PLAN_ARCH_SM90, PLAN_ARCH_CPU, PLAN_ARCH_COUNT } plan_arch;
const char *plan_arch_name(plan_arch a); /* "sm80" | "sm90" | "cpu" */
int plan_arch_parse(const char *s);      /* -1 if unknown */
static inline bool plan_arch_is_gpu(plan_arch a) { return a == PLAN_ARCH_SM80 || a == PLAN_ARCH_SM90; }

/* bind targets (§12.6 `target`) */
#define PLAN_TARGETS(X) \
  X(BLOCK_X, "block.x") \
  X(BLOCK_Y, "block.y") \
  X(BLOCK_Z, "block.z") \
  X(WARP_X, "warp.x")   \
  X(WARP_Y, "warp.y")   \
  X(WARP_Z, "warp.z")
typedef enum plan_target {
#define PLAN_X_ENUM(e, s) PLAN_T_##e,
  PLAN_TARGETS(PLAN_X_ENUM)
#undef PLAN_X_ENUM
  PLAN_T_COUNT
} plan_target;
const char *plan_target_name(plan_target t);
int plan_target_parse(const char *s);
static inline bool plan_target_is_block(plan_target t) { return t <= PLAN_T_BLOCK_Z; }

/* epilogue ops (§12.6 `op`) */
#define PLAN_EPILOGUES(X) \
  X(BIAS, "bias")         \
  X(RELU, "relu")         \
  X(SILU, "silu")         \
  X(GELU, "gelu")         \
  X(RESIDUAL, "residual")
typedef enum plan_epi {
#define PLAN_X_ENUM(e, s) PLAN_EPI_##e,
  PLAN_EPILOGUES(PLAN_X_ENUM)
#undef PLAN_X_ENUM
  PLAN_EPI_COUNT
} plan_epi;
const char *plan_epi_name(plan_epi op);
int plan_epi_parse(const char *s);

/* algo_choice keys = the Poly-View contraction patterns (§12.6 `key`) */
typedef enum plan_algo_key { PLAN_KEY_MATMUL, PLAN_KEY_CONV, PLAN_KEY_ATTENTION, PLAN_KEY_COUNT } plan_algo_key;
const char *plan_algo_key_name(plan_algo_key k);
int plan_algo_key_parse(const char *s);

/* algorithms (§1.7): X(ENUM, "name", mask of the keys it serves) */
#define PLAN_ALGOS(X)                                 \
  X(NONE, "", 0)                                      \
  X(IMPLICIT_GEMM, "implicit_gemm", 1 << 0 | 1 << 1)  \
  X(SPLITK_SERIAL, "splitk_serial", 1 << 0)           \
  X(SPLITK_PARALLEL, "splitk_parallel", 1 << 0)       \
  X(SPLITK_REDUCE, "splitk_reduce", 1 << 0)           \
  X(WINOGRAD_3X3, "winograd_3x3", 1 << 1)             \
  X(WINOGRAD_2X2_3X3, "winograd_2x2_3x3", 1 << 1)     \
  X(WINOGRAD_4X4_3X3, "winograd_4x4_3x3", 1 << 1)     \
  X(STREAMING_SOFTMAX_2PASS, "streaming_softmax_2pass", 1 << 2) \
  X(ONLINE_SOFTMAX, "online_softmax", 1 << 2)
typedef enum plan_algo {
#define PLAN_X_ENUM(e, s, m) PLAN_ALGO_##e,
  PLAN_ALGOS(PLAN_X_ENUM)
#undef PLAN_X_ENUM
  PLAN_ALGO_COUNT
} plan_algo;
const char *plan_algo_name(plan_algo a);
/* splitk_serial | splitk_parallel | splitk_reduce (seed 000 §1.7 "splitk_*"). */
static inline bool plan_algo_is_splitk(plan_algo a) {
  return a == PLAN_ALGO_SPLITK_SERIAL || a == PLAN_ALGO_SPLITK_PARALLEL || a == PLAN_ALGO_SPLITK_REDUCE;
}
int plan_algo_parse(const char *s); /* -1 if unknown; never returns NONE */
/* Why a name that is no algorithm of harp's is not one (fft_conv: no FFT
 * convolution on any target), for the parsers' errors; NULL otherwise. */
const char *plan_algo_absent(const char *s);
/* winograd_3x3 (the backend picks the output tile), winograd_2x2_3x3 (F(2x2,3x3)),
 * winograd_4x4_3x3 (F(4x4,3x3)) */
static inline bool plan_algo_is_winograd(plan_algo a) {
  return a == PLAN_ALGO_WINOGRAD_3X3 || a == PLAN_ALGO_WINOGRAD_2X2_3X3 || a == PLAN_ALGO_WINOGRAD_4X4_3X3;
}
bool plan_algo_fits(plan_algo a, plan_algo_key k);

/* local_edges buffers (§1.6 MinBuffer) */
typedef enum plan_buffer { PLAN_BUF_REG, PLAN_BUF_SMEM_RING, PLAN_BUF_GMEM, PLAN_BUF_COUNT } plan_buffer;
const char *plan_buffer_name(plan_buffer b);
int plan_buffer_parse(const char *s);

/* ---- the plan ------------------------------------------------------------------ */
typedef struct plan_pos {
  int line, col; /* 1-based position in the source text; 0 when built in code */
} plan_pos;

typedef struct plan_bind {
  char axis[PLAN_NAME_MAX];
  plan_target target;
} plan_bind;

typedef struct plan_cache {
  char tensor[PLAN_NAME_MAX]; /* "A" (lhs), "B" (rhs) or a region input name */
  char at[PLAN_NAME_MAX];     /* loop level where the tile is staged; where is always "smem" */
  bool pingpong;              /* true: `stages` buffers (ring); false: one buffer */
} plan_cache;

typedef struct plan_edge {
  char from[PLAN_NAME_MAX], to[PLAN_NAME_MAX];
  plan_buffer buffer;
  int depth; /* 0 (absent), or 2|3 with smem_ring */
} plan_edge;

typedef struct plan_split {
  char axis[PLAN_NAME_MAX];
  int64_t factor; /* axis -> axis.o, axis.i (extent factor) */
} plan_split;

typedef struct plan_fuse {
  char a[PLAN_NAME_MAX], b[PLAN_NAME_MAX], to[PLAN_NAME_MAX];
} plan_fuse;

typedef struct plan_unroll {
  char axis[PLAN_NAME_MAX];
  int factor; /* 1..64 */
} plan_unroll;

/* Where each field came from (plan_parse_*); all zero for plans built in code. */
typedef struct plan_srcmap {
  plan_pos tile[PLAN_MAX_TILE], stages, pipeline, warp_tile, vec, vec_width, arch, layout, epilogue;
  plan_pos bind[PLAN_MAX_BIND], cache[PLAN_MAX_CACHE], pred[PLAN_MAX_AXLIST];
  plan_pos algo[PLAN_KEY_COUNT], edges[PLAN_MAX_EDGES], reorder[PLAN_MAX_AXLIST];
  plan_pos splits[PLAN_MAX_SPLITS], fuse[PLAN_MAX_FUSE], unroll[PLAN_MAX_UNROLL];
  plan_pos splitk;
} plan_srcmap;

/* Invariants after plan_parse_* / plan_check succeed:
 *  - 1 <= ntile <= 3, tile[i] in [1, PLAN_MAX_FACTOR], tile_axes distinct base
 *    names (no '.'); tile_axes[i] is split by tile[i] into X.o, X.i.
 *  - warp_m divides tile[0]; warp_n divides tile[1] when ntile >= 2 (else 0).
 *    m.i -> m.i.o, m.i.i (by warp_m); n.i likewise; k.i -> k.i.o, k.i.i.
 *  - every axis named anywhere is a derived name (X.o, X.i, ...), a fuse
 *    output, or a base name (no '.') left for plan_validate to check.
 *  - stages is 2 or 3; pipeline_axis is set; bind targets are distinct. */
typedef struct plan_t {
  int ntile;
  char tile_axes[PLAN_MAX_TILE][PLAN_NAME_MAX]; /* default "m","n","k" */
  int64_t tile[PLAN_MAX_TILE];                  /* [BM, BN, BK] */
  int stages;                                   /* 2 | 3 */
  char pipeline_axis[PLAN_NAME_MAX];            /* default K.i (last tile axis .i) */
  int nbind;
  plan_bind bind[PLAN_MAX_BIND];
  int warp_m, warp_n; /* warp tile (SM80), warpgroup tile (SM90), register micro-tile (CPU) */
  int ncache;
  plan_cache cache[PLAN_MAX_CACHE];
  char vec_axis[PLAN_NAME_MAX];
  int vec_width; /* 0: no vectorize; else 1, 2, 4, 8 or 16 */
  int npred;
  char pred[PLAN_MAX_AXLIST][PLAN_NAME_MAX];
  int nepi;
  plan_epi epi[PLAN_MAX_EPI];
  plan_arch arch;
  bool a_swizzle, b_swizzle, c_col; /* layout_hints; c_col: C_stride "col" */
  plan_algo algo[PLAN_KEY_COUNT];   /* PLAN_ALGO_NONE where unset */
  int nedges;
  plan_edge edges[PLAN_MAX_EDGES];
  /* harp extensions (docs/plan.md): kept so that DSL -> JSON -> DSL is lossless */
  int nreorder; /* 0: the canonical order */
  char reorder[PLAN_MAX_AXLIST][PLAN_NAME_MAX];
  int nsplits;
  plan_split splits[PLAN_MAX_SPLITS];
  int nfuse;
  plan_fuse fuse[PLAN_MAX_FUSE];
  int nunroll;
  plan_unroll unroll[PLAN_MAX_UNROLL];
  int splitk; /* K slices of a splitk_* plan: 0 = derived (plan_splitk_factor), else 1..PLAN_MAX_SPLITK */
  plan_srcmap pos;
} plan_t;

/* The text a plan came from, for located errors with a caret.  May be NULL. */
typedef struct plan_src {
  const char *file;
  const char *text;
} plan_src;

/* Defaults for arch: stages 2, layout hints of the arch, nothing else set. */
void plan_init(plan_t *p, plan_arch arch);
/* Defaulted layout hints of an arch (GPU: A/B swizzled; CPU: none; C row). */
void plan_default_layout(plan_arch arch, bool *a_swizzle, bool *b_swizzle, bool *c_col);
/* Same plan, positions ignored. */
bool plan_equal(const plan_t *a, const plan_t *b);
/* The canonical loop order: X.o..., X.i.o..., X.i.i... over the tile axes. */
int plan_canonical_order(const plan_t *p, char out[][PLAN_NAME_MAX], int cap);
/* Self-consistency (the invariants above).  Loaders call it. */
harp_status plan_check(const plan_t *p, const plan_src *src, harp_error *e);

/* ---- the two forms --------------------------------------------------------------- */
/* Parse the DSL of §12.6 (+ extensions).  Statements end at ';' or a newline;
 * '#' starts a comment.  Fields the text does not set get the documented
 * defaults, arch = default_arch.  Errors carry file:line:col and a caret. */
harp_status plan_parse_dsl(const char *text, const char *file, plan_arch default_arch, plan_t *out,
                         harp_error *e);
/* Parse the JSON of §12.5 (+ extension keys).  Unknown keys are errors. */
harp_status plan_parse_json(const char *text, const char *file, plan_arch default_arch, plan_t *out,
                          harp_error *e);
/* Either form: JSON when the first non-blank character is '{'. */
harp_status plan_parse(const char *text, const char *file, plan_arch default_arch, plan_t *out,
                     harp_error *e);
harp_status plan_load_file(const char *path, plan_arch default_arch, plan_t *out, harp_error *e);
bool plan_text_is_json(const char *text);

/* ---- plan lists: several regions' plans in one file (docs/plan.md §14) -------------- */
/*   {"plans": [{"region": NAME, "plan": PLAN | null, ...}, ...], ...}
 * is what `--dump plan` writes and `--plan FILE` reads.  An entry may also
 * carry the dump's informational keys (source, applied, note, kernel,
 * time_est, cache), which are ignored; the top level may carry model,
 * shapeset, machine and binding.  Nested plans are parsed in place, so their
 * errors (and plan_validate's, given {file, text}) are located in the list. */
#define PLAN_REGION_MAX 256
typedef struct plan_list_entry {
  char region[PLAN_REGION_MAX];
  plan_pos region_pos; /* where the region name is */
  bool has_plan;       /* false: "plan": null */
  plan_t plan;
} plan_list_entry;
/* A JSON object with a "plans" member. */
bool plan_text_is_list(const char *text);
/* *out is malloc'd (*n entries); region names are unique. */
harp_status plan_list_parse(const char *text, const char *file, plan_arch default_arch, plan_list_entry **out, int *n,
                          harp_error *e);

/* Canonical JSON: the 12 keys of §12.5 in that order (one per line), then
 * the extension keys that differ from their defaults.  *out is malloc'd. */
harp_status plan_to_json(const plan_t *p, char **out, harp_error *e);
/* Canonical DSL, one statement per line.  *out is malloc'd. */
harp_status plan_to_dsl(const plan_t *p, char **out, harp_error *e);
/* `harp plan FILE --to json|dsl`: parse either form, check, print in `to`
 * ("json", "dsl", or NULL for the other form). */
harp_status plan_convert(const char *text, const char *file, const char *to, char **out, harp_error *e);
/* `--dump plan`: {"plans":[{"region":NAME,"plan":{...}},...]}, malloc'd. */
harp_status plan_dump_json(const char *const *region_names, const plan_t *plans, int n, char **out,
                         harp_error *e);

/* ---- machine descriptions --------------------------------------------------------- */
/* One machine.  GPU figures are per device; on the CPU an "SM" is a core, a
 * "CTA" is one core's outer tile, shared memory reads as the L2 per core
 * (where the packed panels live) and registers as vector registers. */
/* A CPU's measured figures (harp calibrate, src/runtime/calibrate.c; the
 * file format in src/plan/calib.c, docs/plan.md §19): with them the cost
 * model times a CPU plan from its micro-tile, blocking, edge waste, packing
 * and thread balance (cost_cpu.c); without (valid false) it keeps §6's
 * formula. */
#define PLAN_CALIB_MK 32
typedef struct plan_calib_mk {
  int mr, nr, kc, nc; /* micro-tile rows x columns, depth and panel width */
  double gflops;      /* one core, fp32 */
} plan_calib_mk;
/* Winograd's measured speed-up over the direct conv kernel at one shape
 * (harp tune measures both for a 3x3 conv and records it). */
#define PLAN_CALIB_WINO 16
typedef struct plan_calib_wino {
  int64_t px, k;  /* output pixels per image, reduction length (C x 9) */
  double speedup; /* direct time / Winograd time */
} plan_calib_wino;
typedef struct plan_calib {
  bool valid;
  double mem_gbs;  /* DRAM bandwidth, all cores (read + write of a buffer far above the LLC) */
  double pack_gbs; /* packing: a strided gather into a contiguous panel, one core */
  double task_us;  /* one parallel call: waking the workers and joining them */
  /* Winograd's filter transform (a weight that is no parameter, every
   * call): ns per multiply-add on one core, its output within one core's
   * L2 [0] and beyond it [1]; 0: not measured (an older file) */
  double wf_ns[2];
  int nmk;
  plan_calib_mk mk[PLAN_CALIB_MK];
  int nwino;
  plan_calib_wino wino[PLAN_CALIB_WINO];
} plan_calib;

/* The calibration file's text (docs/plan.md §19) into *out; `path` locates
 * errors ("path:LINE: ..."), `machine` (nullable) must match its machine
 * line.  Errors: HARP_E_PARSE (malformed, out of range, another machine). */
harp_status plan_calib_parse(const char *text, const char *path, const char *machine, plan_calib *out, harp_error *e);
/* The file's text for c and `machine` (malloc'd; NULL: out of memory). */
char *plan_calib_format(const plan_calib *c, const char *machine);
/* One core's GFLOP/s for micro-tile mr x nr at depth kc and panel width nc:
 * the entry of that micro-tile nearest in (kc, nc); 0 when c has none. */
double plan_calib_rate(const plan_calib *c, int mr, int nr, int64_t kc, int64_t nc);
/* Winograd's measured speed-up at the entry nearest (px, k); 0: none. */
double plan_calib_wino_speedup(const plan_calib *c, int64_t px, int64_t k);
/* Record one (replacing the entry of the same px and k; when full, the oldest). */
void plan_calib_add_wino(plan_calib *c, int64_t px, int64_t k, double speedup);

typedef struct plan_machine {
  plan_arch arch;
  char name[96];
  int sm_count;              /* SMs, or cores */
  double clock_ghz;
  double peak_fp32;          /* FLOP/s, plain FMA pipes (CPU: cores x GHz x FMA units x lanes x 2) */
  double peak_tc16;          /* FLOP/s, fp16/bf16 tensor cores, dense, fp32 accumulate (CPU: = peak_fp32) */
  double mem_bw;             /* bytes/s, DRAM */
  int64_t l1_bytes, l2_bytes, l3_bytes; /* GPU: L1 per SM, L2 per device; CPU: per core, per core, shared */
  int64_t smem_per_sm;       /* CPU: L2 per core */
  int64_t smem_per_cta_max;  /* opt-in maximum; CPU: L2 per core */
  int regs_per_sm;           /* 32-bit registers; CPU: vector registers of one core */
  int regs_per_thread_max;   /* CPU: vector registers */
  int max_warps_per_sm;      /* CPU: 1 */
  int max_threads_per_cta;   /* CPU: 1 */
  int max_cta_per_sm;        /* CPU: 1 */
  int warp_size;             /* 32; CPU: 1 */
  int simd_bytes;            /* widest vector access: 16 on GPUs; 64 AVX-512, 32 AVX2, 16 SSE/NEON */
  int fma_units;             /* CPU: FMA pipes per core (assumed) */
  int base_regs;             /* registers every thread needs besides tiles (addresses, indices) */
  bool avx512, avx2, fma;    /* CPU features (runtime CPUID) */
  plan_calib calib;          /* CPU: measured figures (valid false: none) */
} plan_machine;
/* The fewest output pixels of an image from which a 3x3 conv of k = 9 x
 * input channels (storage in) runs faster as Winograd than on the direct
 * kernel on m (NULL: uncalibrated), at every larger size too; 0: never
 * (cost_cpu.c).  A ShapeSet object's conv chooses so per binding. */
int64_t plan_cpu_winograd_min_pixels(const plan_machine *m, tiny_dtype in, int64_t k);
/* The same for a weight that is no parameter (w_per_call elements: output
 * x input channels x 9), whose filter transform Winograd runs every call
 * (plan_cpu_wino_filter_s, for the tile cgen_conv_wino_tile gives ow output
 * columns): from where the direct kernel's time (its FLOPs at the
 * calibrated rate, else at 0.8 of m's peak) times 1 - 1/speed-up passes
 * the transform's.  As plan_cpu_winograd_min_pixels where m is NULL or
 * w_per_call 0. */
int64_t plan_cpu_winograd_min_pixels_w(const plan_machine *m, tiny_dtype in, int64_t k, int64_t w_per_call, int64_t ow);

/* A100-SXM4-80GB (sm80) and H100-SXM5-80GB (sm90): the figures and their
 * sources are in src/plan/machine.c.  NULL for PLAN_ARCH_CPU. */
const plan_machine *plan_machine_gpu(plan_arch arch);
/* This host's CPU, detected at run time (sysconf, CPUID, /sys, /proc). */
void plan_machine_detect_cpu(plan_machine *out);
/* The same with the clock (GHz) and the memory bandwidth (GB/s) given
 * (the knobs cpu_ghz, cpu_bw_gbs); 0 for either: detected / estimated. */
void plan_machine_detect_cpu_at(plan_machine *out, double ghz, double bw_gbs);
/* Either of the above, copied into *out. */
void plan_machine_get(plan_arch arch, plan_machine *out);
/* Peak FLOP/s for inputs of dtype `in` (tensor cores for fp16/bf16 on GPUs). */
double plan_machine_peak(const plan_machine *m, tiny_dtype in);

/* ---- the region a plan schedules ------------------------------------------------ */
typedef enum plan_pattern {
  PLAN_PAT_EWISE,
  PLAN_PAT_REDUCE,
  PLAN_PAT_MATMUL,
  PLAN_PAT_CONV,
  PLAN_PAT_ATTENTION,
  PLAN_PAT_COUNT
} plan_pattern;
const char *plan_pattern_name(plan_pattern p); /* "ewise" | "reduce" | "matmul" | "conv" | "attention" */
int plan_pattern_parse(const char *s);
static inline bool plan_pattern_is_contraction(plan_pattern p) {
  return p == PLAN_PAT_MATMUL || p == PLAN_PAT_CONV || p == PLAN_PAT_ATTENTION;
}

/* Which tile slot an axis takes.  AUTO: for contractions the last two
 * parallel axes are M, N and the first reduce axis K, the other parallel axes
 * batch; for ewise the last two parallel axes are M, N; for reduce the last
 * parallel axis is M and the first reduce axis K. */
typedef enum plan_role { PLAN_ROLE_AUTO, PLAN_ROLE_M, PLAN_ROLE_N, PLAN_ROLE_K, PLAN_ROLE_BATCH } plan_role;

#define PLAN_MAX_REGION_AXES 16
typedef struct plan_axis_info {
  const char *name; /* base name, no '.', e.g. "m" */
  int64_t size;     /* > 0 */
  bool reduce;
  plan_role role;
} plan_axis_info;

/* Summary of a region, filled by the region layer.  Pointers are borrowed. */
typedef struct plan_region_info {
  const char *name;
  plan_pattern pattern;
  int naxes;
  plan_axis_info axes[PLAN_MAX_REGION_AXES];
  tiny_dtype in_dtype, acc_dtype, out_dtype; /* storage of A/B, accumulation, output */
  int64_t flops;                             /* 0: derived from the axes */
  int64_t bytes;                             /* compulsory DRAM traffic; 0: derived */
  bool epilogue_known;                       /* then plans must carry exactly `epilogue` */
  int nepi;
  plan_epi epilogue[PLAN_MAX_EPI];
  int nedges; /* local_edges from region formation (§4.1 step 6) */
  plan_edge edges[PLAN_MAX_EDGES];
  int ninputs; /* region input names a cache_read may name besides A and B */
  const char *inputs[8];
  int conv_kh, conv_kw; /* conv window, 0 if unknown (winograd_3x3 needs 3x3) */
  int conv_sh, conv_sw, conv_dh, conv_dw; /* its strides and dilations, 0 if unknown (winograd: 1) */
  int64_t conv_oh, conv_ow;               /* output rows / columns per image, 0 if unknown */
  int64_t conv_w_per_call; /* the weight's elements when it is no model parameter (0: a parameter, or unknown):
                              a CPU Winograd transforms it every call, not at model_init (plan_cpu_wino_filter_s) */
  bool a_param, b_param;   /* a matmul's left (M rows) / right (N columns) operand is a model parameter: the
                              CPU template packs it once at model_init, not every call (cost_cpu.c) */
  bool c_m_contig;         /* a matmul's output is unit-stride along M, not N (a 1x1 conv in NCHW, the pixels
                              as M): the CPU template runs it transposed, C^T = B^T A^T (cost_cpu.c) */
} plan_region_info;

/* A conv region whose window steps by 1 without dilation (or not known). */
static inline bool plan_conv_unit_stride(const plan_region_info *r) {
  return (!r->conv_sh || (r->conv_sh == 1 && r->conv_sw == 1)) && (!r->conv_dh || (r->conv_dh == 1 && r->conv_dw == 1));
}

/* The GEMM view of a region: indices into r->axes of M, N, K (-1 if none)
 * and the product of the batch axes. */
typedef struct plan_gemm_view {
  int m, n, k;
  int64_t M, N, K, batch;
} plan_gemm_view;
harp_status plan_region_gemm_view(const plan_region_info *r, plan_gemm_view *out, harp_error *e);
/* Is axis (an index into r->axes; < 0: none) bound to block.* by p, as
 * "<axis>.o" or the axis itself (the CPU template's task split may cut it)? */
bool plan_axis_bound_block(const plan_t *p, const plan_region_info *r, int axis);
/* Seconds a CPU Winograd conv spends on its filter transform each call (0
 * when r's weight is a model parameter, transformed once at model_init):
 * harp tune takes it out of the measured Winograd time before it records
 * the speed-up (plan_calib_add_wino), which then holds for either weight. */
double plan_cpu_wino_filter_s(const plan_region_info *r, const plan_gemm_view *g, const plan_machine *m);

/* cost_dconv.c: the CPU's direct conv kernel (cgen_dconv.c).  Its tile:
 * nv vectors of 16 output channels x mr pixels a register tile, cb input
 * channels a block, rows output rows a task, order 1 (a row block's
 * channel blocks run on) or 2 (a channel block's row blocks). */
typedef struct plan_dconv {
  int nv, mr;
  int64_t cb, rows;
  int order;
} plan_dconv;
/* Whether the CPU template runs region r on its direct conv kernel: fp32,
 * AVX-512, windows overlapping along a row, or a 1x1 conv in NCHW (a
 * matmul, C unit-stride along M) of whole output-channel vectors over 256+
 * input channels or pixels the GEMM's vectors would pad (cg_dconv_plan). */
bool plan_cpu_direct_conv(const plan_region_info *r, const plan_gemm_view *g, const plan_machine *m);
/* Whether conv r's M axis is its output pixels (images x oh x ow; else
 * its N axis is, and M the output channels). */
bool plan_conv_pixels_m(const plan_region_info *r, const plan_gemm_view *g);
/* The pixels of the kernel's widest even register tile at nv vectors of
 * output channels for conv r (its rows cut into equal tiles; 0: none fits). */
int plan_dconv_mr(const plan_region_info *r, int nv);
/* The tile the kernel picks itself for conv r (its choose_nv and
 * plan_blocking, kept in step); false when r is no conv of known geometry. */
bool plan_dconv_own(const plan_region_info *r, const plan_gemm_view *g, plan_dconv *t);
/* The tile plan p gives the kernel (contract_c.c, plan_to_dconv), its own
 * choice where p has no such field; false when the kernel refuses p's warp
 * tile (or r is no conv of known geometry). */
bool plan_dconv_of(const plan_t *p, const plan_region_info *r, const plan_gemm_view *g, plan_dconv *t);
/* Seconds of conv r at tile t on m, best_gflops the best micro-kernel's
 * calibrated rate on one core (the header of cost_dconv.c says how). */
double plan_dconv_time(const plan_region_info *r, const plan_gemm_view *g, const plan_machine *m, const plan_dconv *t,
                       double best_gflops);

/* Check p against region r on machine m: arch, axes, tails (a tile that does
 * not divide needs predicate_tail), algo_choice vs the pattern, epilogue,
 * SM80 mma / SM90 wgmma + TMA shapes, vector widths, and resources
 * (SmemOverflow, RegOverflow).  src (nullable) locates the errors. */
harp_status plan_validate(const plan_t *p, const plan_region_info *r, const plan_machine *m,
                        const plan_src *src, harp_error *e);
/* Fill what the plan leaves open from the region: algo_choice of its
 * pattern, epilogue (when the region knows it) and local_edges. */
void plan_fill_from_region(plan_t *p, const plan_region_info *r);

/* ---- resource model (§5) -------------------------------------------------------- */
typedef struct plan_resources {
  int64_t smem_per_cta;  /* bytes: staged operand tiles x buffers + epilogue_smem */
  int64_t epilogue_smem; /* bytes (bias vector) */
  int regs_per_thr;      /* base + acc + fragments + epilogue (CPU: vector registers) */
  int base_regs, acc_regs, frag_regs, epilogue_regs;
  int warps_per_cta;     /* (BM/WM) x (BN/WN); SM90: warpgroups x 4; CPU: 1 */
  int threads_per_cta;
  int cta_per_sm;        /* 0 when one CTA does not fit */
  const char *cta_limit; /* "smem" | "regs" | "blocks" | "warps" */
  double occ;            /* min(1, cta_per_sm x warps_per_cta / max_warps_per_sm) */
  double pipeline_eff;   /* 1 - 1/stages */
} plan_resources;

/* dtypes from r, or fp16 storage / fp32 accumulation when r is NULL. */
void plan_resources_of(const plan_t *p, const plan_machine *m, const plan_region_info *r,
                       plan_resources *out);
/* SmemOverflow, RegOverflow or LimitExceeded (threads per CTA). */
harp_status plan_resources_check(const plan_t *p, const plan_resources *res, const plan_machine *m,
                               const plan_src *src, harp_error *e);

/* §4.2 thresholds, as predicates region formation and the tuner can ask. */
bool plan_smem_near_limit(const plan_resources *res, const plan_machine *m); /* > 80% of the CTA max */
bool plan_cta_dropped_to_one(const plan_resources *before, const plan_resources *after);
bool plan_vec_shrunk(int width_before, int width_after); /* 16 -> 8/4 and the like */
/* SM90 rules: wgmma M multiple of 64 per warpgroup, N multiple of 8 up to
 * 256, K multiple of 16 (fp16/bf16) or 8 (tf32); TMA boxes <= 256 per
 * dimension with 16-byte aligned inner extents.  why (nullable) says which. */
bool plan_sm90_tile_ok(const plan_t *p, tiny_dtype in, char *why, int cap);
enum {
  PLAN_STOP_SMEM80 = 1 << 0,      /* smem_per_CTA above ~80% of the maximum */
  PLAN_STOP_CTA1 = 1 << 1,        /* cta_per_SM dropped to 1 */
  PLAN_STOP_VEC_SHRINK = 1 << 2,  /* vectorize width shrank */
  PLAN_STOP_SM90_TILE = 1 << 3,   /* SM90: outside the TMA / WGMMA tiles */
};

/* ---- cost model (§6) ------------------------------------------------------------ */
/* time_est = max(FLOPs / (peak x occ x pipeline_eff), Bytes / (BW x occ)). */
double plan_time_formula(double flops, double bytes, double peak, double bw, double occ,
                         double pipeline_eff);

typedef struct plan_cost {
  double flops, bytes;  /* what the estimate charged (bytes include tile re-reads, split-K) */
  double peak, bw;      /* machine figures used */
  plan_resources res;
  int64_t ctas;         /* CTAs launched (outer tiles x split-K slices) */
  int splitk;           /* K slices (1 without split-K) */
  double wave_eff;      /* ctas / (waves x SMs x cta_per_SM): last-wave quantisation */
  double occ_eff;       /* res.occ x wave_eff: the `occ` used in time_est */
  double t_compute, t_memory, time_est; /* seconds */
  double rank_time;     /* what the search ranks by: time_est, but an SM90 GEMM (the persistent
                           wgmma template) at occupancy 1 */
} plan_cost;
harp_status plan_cost_of(const plan_t *p, const plan_region_info *r, const plan_machine *m, plan_cost *out,
                       harp_error *e);
/* A node name a plan may hold (local_edges' from/to): word characters and dots. */
bool plan_ident_ok(const char *s);
/* Split-K slices a splitk_* plan uses: its `splitk` field when set, else the
 * smallest power of two filling one wave of CTAs, at most 16, keeping >= 4
 * K tiles per slice; 1 otherwise.  The backends use the same function. */
int plan_splitk_factor(const plan_t *p, const plan_region_info *r, const plan_machine *m,
                       const plan_resources *res);
/* Persistent CTAs (seed 000 §5 "many tiles / small problems: fewer
 * launches"): an SM90 matmul whose CTAs (tiles x split-K slices) fill more
 * than two waves walks them with one wave of CTAs (the SM90 template's tile
 * queue).  The backends use the same function. */
bool plan_persistent(const plan_t *p, const plan_region_info *r, const plan_machine *m, const plan_resources *res);

/* Fusion Δtime (§4.1 step 4, §6), shared with region formation:
 *   Δtime = max(ΔFLOPs/(peak x occ x eff), ΔBytes/(BW x occ)) + Δocc_time
 *           + fanout_penalty + layout_penalty − saved_bytes/BW
 * Fuse when Δtime < 0 and no §4.2 STOP applies. */
typedef struct plan_fusion_in {
  double dflops;        /* extra FLOPs in the fused kernel (recompute, halo) */
  double dbytes;        /* extra DRAM bytes it moves (halo reads) */
  double saved_bytes;   /* bytes_write_back + bytes_read_back avoided */
  double base_time;     /* time_est of the kernel absorbing the producer, unfused */
  double producer_time; /* time_est of the producer alone (fan-out recompute) */
  int fanout;           /* consumers of the producer (>= 1) */
  plan_resources before, after; /* the absorbing kernel's resources without / with the producer */
  int vec_before, vec_after;    /* its vector widths */
  bool sm90_tile_broken;        /* SM90: the fused tile leaves TMA/WGMMA shapes */
  tiny_dtype in_dtype;
} plan_fusion_in;
typedef struct plan_fusion_out {
  double dtime, benefit, cost; /* dtime = cost - benefit */
  double dwork, docc_time, fanout_penalty, layout_penalty;
  unsigned stops; /* PLAN_STOP_* */
  bool fuse;      /* dtime < 0 && stops == 0 */
} plan_fusion_out;
void plan_fusion_delta(const plan_fusion_in *in, const plan_machine *m, plan_fusion_out *out);

/* ---- default plan and the tuner's search space (§6) ------------------------------- */
#define PLAN_TUNE_POINTS 20 /* the tuner measures at most this many points (§6: 10-20) */
/* What a caller (a backend that lacks an algorithm, the tuner) allows. */
typedef struct plan_search_opts {
  unsigned algo_mask; /* bit (1u << plan_algo) per allowed algorithm; 0 = all */
  const char *backend; /* its name in errors ("cuda", "cpu"); NULL: "the chosen backend" */
  /* GPU attention plans only of the tiles the CUDA attention template has
   * (64 query rows, a key tile of 16..128, warp tile 16xBN, 2 stages): the
   * plan a GPU attention kernel reads (region formation costs the wider space) */
  bool gpu_attention_template;
  /* algorithms a --plan may name beyond algo_mask: implemented, but not a
   * default (unmeasured; the CUDA Winograd forms); 0: none */
  unsigned explicit_mask;
} plan_search_opts;

/* The search space for r on m: tile (3-4) x stages {2,3} x warp_tile {2} x
 * vec {4,8,16} x algo_choice (a few), pruned by plan_validate (resources,
 * shapes) and the §4.2 thresholds (no smem above 80%, widest legal vector),
 * ranked by time_est (ties: enumeration order).  Writes at most cap plans
 * (and their costs, when costs != NULL) to out; *n = how many. */
harp_status plan_enumerate(const plan_region_info *r, const plan_machine *m, const plan_search_opts *opts,
                         plan_t *out, plan_cost *costs, int cap, int *n, harp_error *e);
/* The best point of plan_enumerate, filled from the region: the plan a
 * region gets when no --plan overrides it. */
harp_status plan_default(const plan_region_info *r, const plan_machine *m, const plan_search_opts *opts, plan_t *out,
                       harp_error *e);
/* The plan for a region: override (nullable; filled from the region, then
 * validated, errors located in src; an algorithm outside opts->algo_mask is
 * Unsupported) or plan_default.  opts may be NULL. */
harp_status plan_for_region(const plan_region_info *r, const plan_machine *m, const plan_search_opts *opts,
                          const plan_t *override, const plan_src *src, plan_t *out, harp_error *e);

/* Re-derive the predicate_tail entries of a plan's tiled axes for region r
 * (a tile or vector width that does not divide its axis needs one): a plan
 * tuned for one binding of a ShapeSet, applied to another. */
void plan_retarget(plan_t *p, const plan_region_info *r);

/* ---- ShapeSets (docs/plan.md §15) --------------------------------------------------- */
/* Shape bindings are clustered by rounding every symbol's value up to a
 * power of two: class(v) = v for v <= 1, else the smallest 2^k >= v.  So
 * 513..1024 is one class, 1025..2048 the next.  Plans and measurements are
 * cached per ShapeSet. */
int64_t plan_shapeset_class(int64_t v);
#define PLAN_SHAPESET_MAX 512
/* The ShapeSet key of a binding: "NAME:CLASS" for every symbol that some
 * node's shape of g names (all of syms when g is NULL), sorted by name,
 * joined with ';' — e.g. "K:1024;M:1024;N:1024" — or "static" when there is
 * none.  Names are sanitised.  A key longer than cap is cut at a symbol
 * boundary and ends in a hash of the rest. */
void plan_shapeset_key(const tiny_symtab *syms, const tiny_graph *g, char *out, size_t cap);
/* The same symbols with their values: "K=1000;M=1000;N=1000" ("static"). */
void plan_binding_text(const tiny_symtab *syms, const tiny_graph *g, char *out, size_t cap);

#endif
