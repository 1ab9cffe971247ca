/* harp/region.h — region formation (seed 000 §4) and Region Buffer SSA
 * (§1.5, §12.4): how a prepared graph is cut into regions (one region = one
 * kernel), and what each region tells the backends.
 *
 * rg_form runs §4.1: (1) SCoP extraction (IndexBook -> Poly-View),
 * (2) contraction and attention recognition, (3) legality and halo
 * (can_compute_at), (4) Δtime (plan_fusion_delta on the machine), (5)
 * selection: backward greedy from the outputs with a one-step rollback over
 * the whole graph, then an exact search on windows of at most opt->window
 * units; the STOP conditions of §4.1 and the thresholds of §4.2, (6) Region
 * Buffer SSA and the local_edges of the plan.  The result is an ordinary
 * rg_partition (harp/function.h) whose regions carry an rg_info.
 *
 * Every region has one of these shapes (docs/regions.md):
 *   A  contraction + epilogue   kind "contraction", pattern "matmul" | "conv":
 *      one contraction block and ewise blocks that read the accumulator
 *      (or an earlier epilogue value) pointwise; other tensors through any
 *      affine access.  No prologue.
 *   B  row-fused                kind "ewise" | "reduce": ewise / reduce
 *      blocks sharing their first `prefix` loop dimensions
 *      (poly_fusion_prefix); intermediates in registers or a local buffer.
 *   C  attention                kind "contraction", pattern "attention":
 *      Q K^T -> row softmax -> P V, run as one streaming kernel.
 *   D  cell                     kind "contraction", pattern "cell": a GEMV of
 *      at most RG_CELL_MAX_M rows (the recurrent one, plus one read only by
 *      the gate math) and the elementwise gate math on [M, H] reading its
 *      output a column block at a time: one time step of an RNN
 *      (src/region/cell.c).  Several outputs (h, c).  CPU only.
 *   GATHER                      kind "gather": a non-SCoP node, alone.
 * A region with one block is a singleton of its block's kind. */
#ifndef HARP_REGION_H
#define HARP_REGION_H

#include <stdbool.h>
#include <stdint.h>

#include "harp/function.h"
#include "harp/plan.h"
#include "harp/poly.h"
#include "harp/polycore.h"

struct ib_book;

typedef enum rg_shape {
  RG_SHAPE_SINGLE,      /* one block (its kind says which) */
  RG_SHAPE_CONTRACTION, /* A */
  RG_SHAPE_ROW,         /* B */
  RG_SHAPE_ATTENTION,   /* C */
  RG_SHAPE_GATHER,
  RG_SHAPE_CELL         /* D */
} rg_shape;
const char *rg_shape_name(rg_shape s); /* "single" | "contraction_epilogue" | "row_fused" | "attention" | "gather" | "cell" */

/* Shape D: the contractions of a recurrent cell, con[0] the one it was
 * found from (h Rᵀ), con[1] one read only by its gate math (x Wᵀ); the
 * gate math's domain [M, H].  Its other blocks are the gate math. */
#define RG_CELL_MAX_CON 2
#define RG_CELL_MAX_M 16
typedef struct rg_cell {
  int ncon;
  int con[RG_CELL_MAX_CON];
  int64_t M, H;
} rg_cell;

/* A tensor a region reads, as a linear element offset in the variables of
 * one of its blocks (`block`): offset + sum strides[v] * var_v.  affine is
 * false when no single affine offset exists (padding, floor division). */
typedef struct rg_operand {
  int node;  /* the tensor (INPUT node or a value another region writes) */
  int block; /* whose variables the strides are in */
  int nvars; /* how many: all of the block's, or its output ones (epilogue operands) */
  int cast;  /* a CAST node the region applies after loading the tensor (fp16 bias -> fp32), or -1 */
  bool affine;
  int64_t offset;
  int64_t strides[POLY_MAX_VARS];
} rg_operand;

/* One epilogue op of shape A (or a trailing cast of C), applied in order to
 * the accumulator in registers. */
typedef struct rg_epi {
  int block;      /* Poly-View block */
  int node;
  tiny_op op;
  int role;       /* a plan_epi (bias, relu, silu, gelu, residual) the op is part of, or -1 */
  int nextra;     /* tensors read besides values of the region, at most 2 */
  rg_operand extra[2]; /* strides in the contraction's variables (its output ones) */
} rg_epi;

/* The exact QDQ Add at MULADD node `outer` as one epilogue step (CT_EPI_RESFMA,
 * src/region/resfma.c): chain_outer: v = fma(v, sc, fma(R + z, sr, k)),
 * else v = fma(R + z, sr, fma(v, sc, k)); v the chain's value, R the
 * residual tensor read from outside (node r, as the side reads it).  side:
 * the nodes on R's way that the chain does not reach (the ADD of z, a
 * widening CAST, chain_outer's inner MULADD). */
typedef struct rg_resfma {
  int outer, inner;
  bool chain_outer;
  float sc, sr, k, z;
  int side[3], nside;
  int r;
} rg_resfma;
/* Whether node `outer` is one: chain(env, node) says a node is the chain's
 * (the contraction reaches it), inside(env, node) that the region computes it. */
bool rg_resfma_parse(const tiny_graph *g, int outer, bool (*chain)(const void *env, int node),
                     bool (*inside)(const void *env, int node), const void *env, rg_resfma *p);

/* Node is the op that ends a spelled-out silu (its MUL of x by RECIP(1 +
 * exp(-x))): a silu's several epilogue ops are one step up to it, and
 * silu(silu(x)) is two steps. */
bool rg_silu_last(const tiny_graph *g, int node);

/* rg_epi.role of the ops of a gate x * clamp(x * a + b, lo, hi) (a hardswish
 * spelled out; rg_options.gate_epilogues): one step, up to the MUL of x by
 * the clamp (its last op).  No plan_epi: the plan's epilogue is unknown. */
#define RG_ROLE_GATE (PLAN_EPI_COUNT + 1)

typedef struct rg_local_edge {
  const char *from, *to; /* block names (a tensor name when from_block < 0), as in the plan */
  int from_block, to_block;
  int tensor;            /* node whose value the edge carries */
  plan_buffer buffer;
  int depth;             /* smem_ring: 2 (double buffered) or 0 */
  int64_t bytes;
  poly_barrier barrier;  /* on the region's machine */
} rg_local_edge;

/* Shape C: out = softmax(scale * Q K^T [+ mask] [masked by where_mask]) V,
 * the softmax along the keys, max-shifted.  Strides of q and k are in the
 * variables of the QK^T block, of v in those of the PV block; out is
 * written row-major. */
typedef struct rg_attention {
  int qk, pv;              /* the two contraction blocks */
  rg_operand q, k, v;
  int q_var, k_var, d_var; /* QK^T block: the query variable, the key variable (softmax axis), the head dim */
  int dv_var;              /* PV block: the value dim */
  int nbatch;              /* batch variables (shared by both contractions), the first of each block */
  double scale;            /* 1 when the graph does not scale */
  bool has_mask;           /* additive mask, added after the scale */
  rg_operand mask;         /* strides in the QK^T block's output variables */
  int where_mask;          /* bool tensor: where true the score is -inf; -1 if none */
  bool causal;             /* where_mask is the causal mask, checked by evaluating it */
  int64_t causal_offset;   /* key j hidden from query i when j > i + causal_offset (N - M: bottom-right; 0: top-left) */
  bool exp2;               /* EXP2(x * log2 e) (else EXP) */
  bool has_max_floor, has_sum_floor; /* row max = max(max, floor); row sum = max(sum, floor) */
  double max_floor, sum_floor;
  tiny_dtype p_dtype;      /* P is rounded to this dtype before P V */
  int out;                 /* node the region writes */
  tiny_dtype out_dtype;
} rg_attention;

/* Why a region did not take in a producer. */
typedef struct rg_stop {
  const char *candidate; /* the producer's name */
  const char *reason;    /* not_ucc | non_scop | compute_at_illegal | halo_too_large | unsupported_shape |
                            epilogue_not_template | buffer_too_large | no_plan | smem_over_80pct | cta_drops_to_1 | vector_width_shrinks |
                            sm90_tile_constraint | delta_time_nonneg | exact_selection | rolled_back */
  const char *detail;
  double dtime;          /* the Δtime of that fusion when it was computed, else 0 */
} rg_stop;

/* A halo the region's tile needs from a tensor (can_compute_at). */
typedef struct rg_halo {
  int tensor, block;
  int64_t tile[POLY_MAX_VARS]; /* the consumer tile it was computed for */
  poly_halo halo;
} rg_halo;

/* What a block does in its region. */
typedef enum rg_role {
  RG_ROLE_BODY,         /* B: a block of the fused loops; single: the block */
  RG_ROLE_ANCHOR,       /* A: the contraction */
  RG_ROLE_EPILOGUE,     /* A: applied to the accumulator; C: a cast of the output */
  RG_ROLE_OPERAND_CAST, /* a CAST of a tensor from outside the region: done when its readers load it */
  RG_ROLE_MATMUL,       /* C: Q K^T or P V */
  RG_ROLE_SOFTMAX       /* C: the row softmax between them */
} rg_role;
const char *rg_role_name(rg_role r);

typedef struct rg_info {
  rg_shape shape;
  int nblocks;
  int *blocks;        /* Poly-View blocks in execution order */
  rg_role *roles;     /* per block */
  int anchor;         /* A: the contraction block; C: the PV block; B / single: the last block; -1 for GATHER */
  int prefix;         /* loop dimensions the region's blocks share (poly_fusion_prefix over the blocks
                         without operand casts): B's rows, A's output dims, C's batch x query dims;
                         a single block: its output dims */
  int nepi;
  rg_epi *epi;        /* A: the epilogue in order; C: the casts after PV */
  int nedges;
  rg_local_edge *edges; /* local_edges (§4.1 step 6) */
  int nhalos;
  rg_halo *halos;     /* windowed operands (A with a conv) */
  plan_region_info plan_info; /* what plan_default / plan_validate read */
  rg_attention att;   /* C */
  rg_cell cell;       /* D */
  const char *selection; /* "singleton" | "greedy" | "exact" */
  int nstops;
  rg_stop *stops;
  double time_est;    /* seconds, from the region's default plan on the machine */
  double dtime;       /* Δtime of forming it from single blocks (< 0: a gain) */
  bool has_plan;      /* plan_default found a plan */
  plan_t plan;        /* that plan */
} rg_info;

typedef struct rg_options {
  const plan_machine *machine; /* NULL: the CPU harp runs on */
  int64_t local_budget;        /* bytes of one local buffer; 0: 64 KiB on the CPU, the SMEM per CTA on GPUs */
  int window;                  /* exact selection on windows of at most this many units; 0: 24; < 0: greedy only */
  double halo_max;             /* STOP when a halo exceeds this fraction of the tile's own footprint; 0: 0.5 */
  bool no_fusion;              /* every block alone (still described) */
  bool no_rollback;            /* greedy without its one-step rollback (tests) */
  bool exact_add_steps;        /* an exact QDQ Add (rg_resfma) may be an epilogue step: where the int8
                                  kernels apply it (the CPU, the knob int8 not off); else its own kernel */
  bool no_operand_casts;       /* only contraction operands convert on load: an epilogue's or a row
                                  region's CAST of an outside tensor stays a region of its own */
  bool half_attention_only;    /* attention regions only over fp16/bf16 q, k, v (the GPU's fused
                                  template); others stay two matmuls and a softmax */
  bool no_cells;               /* no recurrent cell regions (shape D; never on a GPU machine) */
  unsigned algo_mask;          /* the algorithms the backend has (plan_search_opts.algo_mask): a
                                  fusion is costed with those only; 0: every one */
  bool gate_epilogues;         /* CPU templates: x * clamp(x * a + b, lo, hi) (a hardswish) and x / c
                                  by a constant are epilogue steps (RG_ROLE_GATE, CT_EPI_GATE /
                                  CT_EPI_DIV); off: they stay maps of their own.  The CPU target: on
                                  (fp32 and bf16) unless the knob no_gate_epilogues */
  /* The graph's IndexBook and Poly-View when the caller built them (the
   * compile pipeline's stages; ib_build and poly_build without options):
   * borrowed, never freed by the partition.  NULL: rg_form builds its own. */
  struct ib_book *ib;
  poly_view *pv;
  /* The decisions another rg_form made on this graph at other sizes (its
   * partition's `formed`): the same attentions kept, the same units in the
   * same regions, no cost model; HARP_E_INVALID_ARG when the units differ.
   * A ShapeSet object's lower corner replays its upper corner's (sgen.c). */
  const struct rg_formed *replay;
} rg_options;

/* Form the regions of a prepared graph with every size bound.  The
 * partition owns the IndexBook and Poly-View it built (rg_partition_free). */
harp_status rg_form(harp_error *e, const tiny_graph *g, const tiny_symtab *syms, const rg_options *opt,
                  rg_partition **out);

/* What rg_form keeps alive with the partition. */
typedef struct rg_formed {
  struct ib_book *ib;
  poly_view *pv;
  bool borrowed;                    /* ib and pv are rg_options' (the caller frees them) */
  plan_machine machine;
  rg_options opt;
  double greedy_time, final_time;   /* Σ of the regions' estimated times: greedy's, and the chosen ones */
  int nwindows, nexact;             /* windows searched, and where the exact search won */
  /* the decisions, for rg_options.replay: the matched attentions kept (bit i),
   * the units and the region of each */
  uint64_t att_kept;
  int nunits, nregions;
  int *region_of_unit;
} rg_formed;
void rg_formed_free(rg_formed *f);
/* Free the IndexBook and Poly-View (pv, ib become NULL; borrowed ones are
 * only forgotten) once no backend reads them: they are most of a large
 * model's analysis memory, and the regions, their rg_info and the machine
 * stay usable. */
void rg_formed_drop_analysis(rg_formed *f);

/* --dump region: {"regions": [§12.4 region, ...], ...} (docs/regions.md). */
harp_status rg_dump_json(harp_error *e, const rg_partition *p, char **out);

#endif
