/* contract.h — how a contraction or attention region reads as a template
 * kernel, independent of the target (internal API shared by the C backend,
 * src/backend/c/contract_c.c, and the CUDA backend,
 * src/backend/cuda/region_cuda.c; the kernel layer, kernel.h, calls them).
 *
 * A region maps onto a template when its operands are plain strided tensors
 * (every operand axis indexed by one variable, or a window for conv), its
 * epilogue is a sequence of template steps (bias, residual, relu, gelu, silu,
 * sigmoid, scale, a rounding, and a final cast), and its reduction
 * accumulates in fp32.  The readers below return false with *why set when a
 * region does not fit; the summaries they fill are exactly what the template
 * specs need (cgen_*_spec, cuda_*_spec mirror each other field for field).
 * Tensors are named by their slot in the kernel's buffer list (fn_kernel
 * reads, then writes) plus an element offset. */
#ifndef HARP_KERNEL_CONTRACT_H
#define HARP_KERNEL_CONTRACT_H

#include <stdbool.h>
#include <stdint.h>

#include "harp/function.h"
#include "harp/poly.h"

#define CT_MAX_EPI 16

/* What the readers look at: the graph, its Poly-View and the Function. */
typedef struct ct_src {
  const tiny_graph *g;
  const poly_view *pv;
  const fn_function *f;
  /* attention: read q/k/v from a materialized rounding CAST the program
   * applies to them (the CUDA template rounds P to the operands' dtype as
   * the reference does; the C template keeps P in fp32, so it leaves fp16
   * chains of that kind to the generic loops) */
  bool att_cast_operands;
  /* GEMM: A may be rounded (fp32 -> fp16/bf16) by a CAST on its way; it is
   * then copied, rounding, into a dense scratch (ct_gemm.a_round; the CUDA
   * backend's elementwise copy) */
  bool round_operands;
  /* a ShapeSet object's corner: a size-based decline for speed (a map's
   * rows under 16 points, a pool's few windows a plane) is left to the
   * printer (ct_map.short_rows, ct_pool.small_why), which keeps the
   * template wherever that size is read at run time, so that the box's
   * corners print one kernel (short at the lower corner, long at the upper) */
  bool sizes_vary;
  /* with sizes_vary: the symbols that vary (a dim named after one moves
   * with the binding); NULL: any named dim may */
  const char *const *vary;
  int nvary;
} ct_src;

/* A tensor of the kernel: slot in the buffer list, storage dtype, element offset. */
typedef struct ct_tensor {
  int node;
  int slot;
  tiny_dtype dtype;
  int64_t offset;
} ct_tensor;

/* Epilogue steps in the templates' order (cgen_epi_kind, cuda_epi_kind). */
typedef enum ct_epi_kind {
  CT_EPI_BIAS_M,   /* + bias[m]; conv: per output channel */
  CT_EPI_BIAS_N,   /* + bias[n] */
  CT_EPI_RELU,
  CT_EPI_GELU,
  CT_EPI_SILU,
  CT_EPI_SIGMOID,
  CT_EPI_SCALE,    /* * scale + shift (shift: a constant added) */
  CT_EPI_RESIDUAL, /* + R[b0][b1][m][n] at s_b0, s_b1, s_m, s_n; conv: R laid out like the output */
  CT_EPI_ROUND,    /* round to dtype (fp16 / bf16) and back: a cast in the middle of the chain */
  CT_EPI_CLAMP,    /* min(max(x, lo), hi), NaN kept: max / min with a constant (ReLU6); lo / hi may be -inf / inf */
  CT_EPI_RINT,     /* to the nearest integer, halves to even */
  CT_EPI_DIV,      /* / scale, a constant: a QuantizeLinear's x / s, which x * (1/s) is not bit for bit
                      (ct_epi_chain: the pool and reduce templates' chains; a GEMM / conv's chain
                      with rg_options.gate_epilogues: hardswish's / 6) */
  CT_EPI_GATE,     /* x * min(max(x * scale + shift, lo), hi) (a hardswish before its / 6;
                      rg_options.gate_epilogues, RG_ROLE_GATE; the C templates only) */
  CT_EPI_RESFMA    /* the exact QDQ Add (rg_resfma): chain_outer ? fma(x, scale, fma(R + rz, rscale, shift))
                      : fma(R + rz, rscale, fma(x, scale, shift)), each fma rounded once; R placed as
                      RESIDUAL's (laid out like the output).  The int8 kernels' output pass applies it
                      (contract_q8.c); a template without it declines (cc_epi_to_cgen, epi_gpu_has, tier0) */
} ct_epi_kind;

typedef struct ct_epi {
  ct_epi_kind kind;
  tiny_dtype dtype;            /* bias / residual storage; ROUND: the dtype rounded to */
  float scale, shift;
  float lo, hi;                /* CT_EPI_CLAMP's and CT_EPI_GATE's bounds */
  int64_t s_b0, s_b1, s_m, s_n;
  int slot;                    /* the tensor of a bias / residual, else -1 */
  int64_t off;                 /* its element offset */
  bool mul;                    /* BIAS_M / BIAS_N / RESIDUAL: times the tensor, not plus
                                  (a per-channel scale: batch norm as x * s + t) */
  float rscale, rz;            /* CT_EPI_RESFMA: the residual's multiplier and the integer added to it */
  bool chain_outer;            /* CT_EPI_RESFMA: the chain's fma is the outer one (the chain is the Add's input 0) */
} ct_epi;

/* Batched GEMM C[b0][b1] = A[b0][b1] x B[b0][b1] over folded dimensions. */
typedef struct ct_gemm {
  int64_t batch[2], M, N, K;
  ct_tensor A, B, C;           /* A: what the GEMM reads (the scratch when repacked: slot -1, offset 0) */
  int64_t a_sb[2], a_sm, a_sk;
  int64_t b_sb[2], b_sk, b_sn;
  int64_t c_sb[2], c_sm, c_sn;
  int nepi;
  ct_epi epi[CT_MAX_EPI];
  /* When A's reduced dimensions do not fold (heads merged back: [b][h][s][d]
   * read as [b][s][h*d]), A is first copied into a dense scratch: element
   * i0..i(nrep-1) (row-major over rep_size) from A0 at sum i_j * rep_src[j]. */
  int nrep;
  int64_t rep_size[POLY_MAX_VARS], rep_src[POLY_MAX_VARS];
  ct_tensor A0;
  tiny_dtype a_round; /* FP32: none; FP16 / BF16: the copy rounds A to it (then nrep > 0) */
} ct_gemm;

/* 2-D convolution, NCHW input, OIHW weight, NCHW output, groups >= 1
 * (weight [oc][c/groups][kh][kw]; depthwise: groups == c). */
typedef struct ct_conv {
  int64_t n, c, h, w, oc, kh, kw, groups;
  bool x_is_lhs;                     /* the input is the MUL's left operand (the plan's M: the pixels) */
  int64_t stride[2], pad[4], dil[2]; /* pad: top, left, bottom, right */
  ct_tensor X, W, Y;
  int nepi;
  ct_epi epi[CT_MAX_EPI];
} ct_conv;

/* Attention out = softmax(scale q k^T [+ mask], causal) v per (b, h), strided
 * over (b, h, row), unit stride along d / dv. */
typedef struct ct_attn {
  int64_t B, H, M, N, D, DV;
  ct_tensor q, k, v, out;
  int64_t q_s[3], k_s[3], v_s[3], o_s[3];
  float scale;
  bool causal;                 /* top-left aligned */
  bool has_mask;
  ct_tensor mask;
  int64_t mask_s[4];
  int odim[3];                 /* out's axes along (b, h, row); -1: none */
  int key_node, key_dim;       /* the scores tensor and its axis along the keys */
} ct_attn;

/* 2-D pooling: a MAX (NaN propagates) or SUM over a kh x kw window of an
 * NCHW tensor padded with one constant, then steps with constants (an
 * average's 1/(kh*kw) is a SCALE), written NCHW (contract_pool.c). */
typedef struct ct_pool {
  int64_t n, c, h, w, kh, kw, oh, ow;
  int64_t stride[2], pad[4], dil[2]; /* pad: top, left, bottom, right (>= 0; unread last rows/columns: 0) */
  bool sum;                          /* SUM, else MAX */
  double fill;                       /* the padding's value (rounded to a half input's dtype) */
  ct_tensor X, Y;                    /* X: the base tensor (dense NCHW), Y: dense NCHW; offsets 0 */
  int nepi;
  ct_epi epi[CT_MAX_EPI];            /* RELU, SCALE, ROUND only */
  const char *small_why;             /* NULL; else why the target sends a pool this small to the loop
                                        nest, where its sizes are constants (ct_src.sizes_vary) */
} ct_pool;

/* Which reader a region goes to: 'g' GEMM, 'c' conv, 'a' attention, 0 none
 * (not a contraction).  The knob no_templates is kn_select's flag
 * KN_NO_CONTRACTION_TEMPLATES, not this function's. */
char ct_kind(const ct_src *s, int kernel);

bool ct_read_gemm(const ct_src *s, int kernel, ct_gemm *out, const char **why);
bool ct_read_conv(const ct_src *s, int kernel, ct_conv *out, const char **why);
bool ct_read_attn(const ct_src *s, int kernel, ct_attn *out, const char **why);
/* True when the region is a pooling that fits the window kernel; false
 * with *why NULL when it is no pooling, with *why set when it is one read
 * in a way the kernel does not take. */
bool ct_read_pool(const ct_src *s, int kernel, ct_pool *out, const char **why);
/* A ShapeSet unit's window over tensor node x in Function kernel `kernel`
 * whose height / width is read at run time (rt[0], rt[1]): its bottom /
 * right padding pad[2 + q] raised to the model's own (the PAD the read
 * passes) where the reader kept only what this binding reads (less by
 * under a stride: an even width at stride 2 never reads the last pad
 * column, an odd one does, so a box's corners would hold for their parity
 * alone).  The C backend (rc_window_pads) and the CUDA one call it. */
void ct_window_pads(const ct_src *s, int kernel, int x, const int64_t *stride, const bool *rt, int64_t *pad);

/* Extents of a block's variables: its output axes, then the reduced ones. */
void ct_block_sizes(const tiny_graph *g, const poly_block_info *b, int64_t *size);

/* The kernel's slot of the buffer holding node (-1: none). */
int ct_slot_of(const fn_kernel *K, const fn_function *f, int node);

/* ---- row regions (contract_row.c) ------------------------------------------
 * Softmax and layernorm along the last axis, as the row kernels of both
 * backends read them.  A widening CAST (fp16/bf16 -> fp32) of an outside
 * tensor read point for point is "peeled": the kernels convert on load, so
 * they read the CAST's source. */
#define CT_MAX_PEEL 8
typedef struct ct_row {
  const ct_src *s;
  int kernel;
  const rg_region *R;
  const fn_kernel *K;
  int npeel, peel[CT_MAX_PEEL], peel_src[CT_MAX_PEEL];
} ct_row;

void ct_row_init(ct_row *w, const ct_src *s, int kernel);
/* The region's block computing node (-1: none). */
int ct_row_block_of(const ct_row *w, int node);
/* The kernel's slot of node's buffer (-1: none) and its storage dtype. */
int ct_row_slot_of(const ct_row *w, int node);
tiny_dtype ct_row_storage(const ct_row *w, int node);
/* The source of a peeled CAST, else node itself. */
int ct_row_unpeel(const ct_row *w, int node);
/* The region's compute nodes in block order, peeled CASTs left out; -1 beyond cap. */
int ct_row_compute_nodes(const ct_row *w, int *out, int cap);
/* Access a of block bi as strides over its variables (extent-1 ones 0); false
 * unless affine with non-negative strides. */
bool ct_row_strides(const ct_row *w, int bi, int a, int64_t *st, int64_t *off);

/* y = exp(scale (x - max_row x)) / sum_row(...), x and y dense rows of cols. */
typedef struct ct_softmax {
  int64_t rows, cols;
  ct_tensor x, y;     /* x: what the kernel reads (a peeled CAST's source); offsets 0 */
  float scale;        /* 1: plain softmax; a program's exp2(c (x - max)) gives c / log2(e), times
                         a positive constant the program scales x by first */
  /* a QDQ softmax: x goes through pro[0..npro) (elementwise steps with
   * constants, ct_epi_chain: a DequantizeLinear / QuantizeLinear pair) before
   * the max; y = e * ymul / sum then goes through epi[0..nepi) (a
   * QuantizeLinear's rint and clamp) before its store.  npro 0, ymul 1,
   * nepi 0: a plain softmax. */
  int npro, nepi;
  ct_epi pro[CT_MAX_EPI], epi[CT_MAX_EPI];
  float ymul;
} ct_softmax;

/* y = (x - mean) * rsqrt(var + eps) [* gamma] [+ beta] per row. */
typedef struct ct_layernorm {
  int64_t rows, cols;
  ct_tensor x, y, gamma, beta; /* gamma / beta: vectors along the row; slot -1 when absent */
  float eps;
} ct_layernorm;

/* Both return true when the region is that computation and fits the row
 * kernels; false with *why NULL when it is not that computation, false with
 * *why set when it is but is read in a way the kernels do not take. */
bool ct_read_softmax(const ct_row *w, ct_softmax *out, const char **why);
/* A softmax with no QDQ steps (npro 0, nepi 0, ymul 1): what a row kernel without them takes. */
bool ct_softmax_plain(const ct_softmax *s);
bool ct_read_layernorm(const ct_row *w, ct_layernorm *out, const char **why);

/* ---- elementwise maps (contract_map.c) --------------------------------------
 * A region of elementwise blocks only, all over one domain, with one output
 * written point for point: the CPU's map kernel (cgen_map) runs it as ops
 * on vectors.  Its reads of outside tensors are split the same way for
 * every input: outer dimensions (rows) x a contiguous inner run (cols);
 * within a row an input moves with the output (stride 1) or stays put (one
 * value per row, a broadcast bias or scale); across rows each has its own
 * strides.  Values computed in the region are read point for point; a
 * region with pads, slices or concats is cut into slabs of the output
 * (ct_map_set), where each value is computed at the point its chain of
 * reads reaches and a read of padding is its pad value. */
#define CT_MAP_MAX_IN 8
#define CT_MAP_MAX_OPS 48
#define CT_MAP_MAX_OUTER 4
typedef struct ct_map_arg {
  char kind; /* 'i' input idx, 'v' the value of op idx, 'c' the constant c (rounded to its dtype) */
  int idx;
  double c;
} ct_map_arg;
typedef struct ct_map_op {
  tiny_op op; /* the Tiny op; a CAST between float types */
  tiny_dtype to; /* CAST: its target (FP16 / BF16 round, FP32 keeps the value) */
  ct_map_arg a, b;
} ct_map_op;
/* A size as a sum of sizes of the graph (a map piece's extent or start
 * along its cut axis, contract_cut.c): lit + sum coef[i] * term[i], each
 * term a symbol (its value here tval[i]); value: the sum at this binding. */
#define CT_SIZE_MAX_TERMS 6
typedef struct ct_size {
  int64_t value, lit;
  int nterm;
  int64_t coef[CT_SIZE_MAX_TERMS], tval[CT_SIZE_MAX_TERMS];
  const char *term[CT_SIZE_MAX_TERMS]; /* the graph's symbol names */
} ct_size;
typedef struct ct_map_in {
  ct_tensor t;
  bool bcast; /* one element per row */
  int64_t ostride[CT_MAP_MAX_OUTER];
  /* a piece whose bounds are sizes (ct_map.cut_known): t.offset is
   * (cut_lo - cut_off) times the stride of t's axis cut_axis, cut_off a
   * sum of sizes where that axis' index 0 lies in y (ct_cut_origins: an
   * addend of y at 0, a PAD's input at its low amount); -1: not known so */
  int cut_axis;
  ct_size cut_off;
  /* a ShapeSet object's read through a RESHAPE that splits an axis by a
   * symbol's size (poly_reshape_view): that RESHAPE's output shape, whose
   * dims the strides are products of (the same elements); NULL: t's own */
  const tiny_shape *shape;
} ct_map_in;
typedef struct ct_map {
  int nouter;
  int64_t outer[CT_MAP_MAX_OUTER], cols;
  int nin;
  ct_map_in in[CT_MAP_MAX_IN];
  ct_tensor y; /* dense with offset 0, unless ystrided */
  bool ystrided; /* a piece: y at y.offset, yostride[] elements per step of each outer dimension */
  int64_t yostride[CT_MAP_MAX_OUTER];
  int nops;
  ct_map_op ops[CT_MAP_MAX_OPS]; /* operands first; y is the last */
  bool short_rows;               /* outer dimensions and rows of fewer than 16 points (ct_src.sizes_vary) */
  /* a piece (ystrided) whose bounds along y's axis cut_axis are sizes of
   * the graph (cut_known): it spans [cut_lo, cut_lo + cut_len) there */
  bool cut_known;
  int cut_axis;
  ct_size cut_lo, cut_len;
} ct_map;
/* Why the map kernel declines rows of fewer than 16 points (where a
 * generic loop does as well: the kernel pays a call per row). */
#define CT_MAP_SHORT_ROWS "map: rows of fewer than 16 points"

/* A region with pads, slices or concats (RoPE's rotate-half) is cut into
 * slabs of the output along one axis, one map each. */
#define CT_MAP_MAX_PIECES 4
typedef struct ct_map_set {
  int npiece;
  ct_map piece[CT_MAP_MAX_PIECES];
} ct_map_set;

/* True when the region is such a map; false with *why NULL when it is no
 * elementwise region, with *why set when it is one the map kernel does not
 * take (an op without a vector form, a read that is neither point for point
 * nor a row broadcast, several outputs, ...).  `ok(op)` says which Tiny ops
 * the target covers. */
bool ct_read_map(const ct_src *s, int kernel, bool (*ok)(tiny_op op), ct_map_set *out, const char **why);
/* The pieces' cuts (contract_map.c, shared with contract_gmap.c): region
 * R's output cut along one variable (*var; -1: whole) at cut[0..*ncut)
 * into slabs where no chain of reads from the output mixes real elements
 * and padding; false with *why.  ct_region_block: the block of R
 * computing node, or -1. */
bool ct_map_cuts(const ct_src *s, const rg_region *R, int *var, int64_t *cut, int *ncut, const char **why);
int ct_region_block(const ct_src *s, const rg_region *R, int node);
/* The slabs of R's output cut along variable var at cut[0..ncut)
 * (ct_map_cuts): slab k's start lo[k] and extent len[k] as sizes of the
 * graph, where every cut is a bound of a PAD along that axis (a concat's
 * pieces) or of y; false when one is not (contract_cut.c). */
bool ct_cut_sizes(const ct_src *s, const rg_region *R, int var, const int64_t *cut, int ncut, ct_size *lo, ct_size *len);
/* Where tensor `node` is reached following y's axis var back through R as
 * ct_cut_sizes does (PADs, permutes, reshapes keeping the axis whole,
 * elementwise ops point for point): each arrival's axis of node (axis[i])
 * and where in y that axis' index 0 lies (off[i], a sum of sizes: index =
 * y's index - off), distinct ones, at most max; -1 when there are more or
 * the walk was cut short (contract_cut.c). */
int ct_cut_origins(const ct_src *s, const rg_region *R, int var, int node, int *axis, ct_size *off, int max);
/* Whether a and b are the same sum (their terms in any order). */
bool ct_size_same(const ct_size *a, const ct_size *b);

/* ---- reductions and elementwise chains (contract_ewise.c) ---------------------
 * The GPU's simple kernels: a single reduction of a strided buffer, viewed
 * as [outer][red][inner], and an elementwise chain over the output's points
 * as a list of instructions on strided inputs. */

/* out[outer][inner] = reduce over red of in[outer][red][inner] (element
 * strides s_*), accumulated in fp32. */
typedef struct ct_reduce {
  int64_t outer, red, inner;
  int64_t s_outer, s_red, s_inner;
  tiny_reduce_op op;
  bool has_init;
  double init;
  ct_tensor in, out; /* in: a peeled CAST's source, at its offset; out: offset 0 (the chain's last value) */
  /* epilogue (ct_read_reduce's `epilogue`): first divided by the count red
   * when div_count (a mean), then epi[0..nepi) (RELU, SCALE, CLAMP, ROUND) */
  bool div_count;
  int nepi;
  ct_epi epi[CT_MAX_EPI];
} ct_reduce;

/* True when the region is one such reduction; false with *why NULL when it
 * is no single fp32-accumulated REDUCE, with *why set when it is one the
 * kernel does not take.  epilogue: the REDUCE may be followed by a chain of
 * elementwise steps with constants (ct_epi_chain), the first a division by
 * the reduced count; else the REDUCE is the region's only computation. */
bool ct_read_reduce(const ct_row *w, bool epilogue, ct_reduce *out, const char **why);

/* The elementwise steps nodes[0..nn) after a REDUCE red, each applied to
 * the value before it (relu, x*c, x+c, x/c, rint, a clamp with constants:
 * a QuantizeLinear's steps; casts between floats: the last one is the
 * store's conversion; views: a step
 * may read the value before it through RESHAPEs), appended to
 * epi[*nepi..); *last: the node the chain ends with.  False with *why when
 * a step is none of those (contract_pool.c). */
bool ct_epi_chain(const tiny_graph *g, const int *nodes, int nn, int red, bool views, ct_epi *epi, int *nepi, int *last,
                  const char **why);

#define CT_EW_MAX_RANK 8
#define CT_EW_MAX_IN 8
#define CT_EW_MAX_INSTR 64
/* Instruction i computes value i; operands name earlier values.
 *   op = TINY_INPUT: load input `input`; TINY_CONST: the immediate `imm`
 *   (rounded to its dtype); unary / binary / WHERE / CAST: Tiny semantics.
 * The last instruction is the output. */
typedef struct ct_ew_instr {
  tiny_op op;
  int a, b, c;      /* operand values (indices of earlier instructions) */
  int input;        /* TINY_INPUT */
  double imm;       /* TINY_CONST */
  tiny_dtype dtype; /* the value's dtype (CAST: its target) */
} ct_ew_instr;
typedef struct ct_ew_input {
  ct_tensor t;                      /* slot, storage dtype, element offset */
  int64_t strides[CT_EW_MAX_RANK]; /* elements per step of each output axis; 0: broadcast */
} ct_ew_input;
typedef struct ct_ewise {
  int rank;
  int64_t shape[CT_EW_MAX_RANK];
  int ninputs;
  ct_ew_input in[CT_EW_MAX_IN];
  int ninstr;
  ct_ew_instr instr[CT_EW_MAX_INSTR];
  ct_tensor out; /* dense, offset 0 */
} ct_ewise;
/* What the target's elementwise kernel takes: at most max_rank axes,
 * max_in inputs, max_instr instructions (each at most the CT_EW_MAX_*
 * above), the ops op_ok says yes to. */
typedef struct ct_ew_caps {
  int max_rank, max_in, max_instr;
  bool (*op_ok)(tiny_op op);
} ct_ew_caps;

/* *ok when the region is an elementwise chain with one output, every block
 * over the output's points, that the kernel takes; else *why NULL when it
 * is no such chain, set when it is one the kernel does not take.  An error
 * only when out of memory. */
harp_status ct_read_ewise(const ct_row *w, const ct_ew_caps *caps, harp_error *e, ct_ewise *out, bool *ok, const char **why);

#endif
