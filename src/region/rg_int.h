/* rg_int.h — region formation internals (src/region/{units,attention,legal,
 * rcost,select,form,ssa}.c).
 *
 * Vocabulary:
 *   unit      what selection moves as a whole: one Poly-View block, one
 *             GATHER node, a recognized attention (several blocks) or a
 *             recurrent cell (several blocks and outputs, a region alone)
 *   set       a candidate region: sorted block indices (+ a GATHER node)
 *   sink      the one unit of a set whose value leaves it; every other
 *             member's consumers are inside (UCC), which also makes every
 *             candidate convex and the region graph acyclic */
#ifndef HARP_RG_INT_H
#define HARP_RG_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "harp/polycore.h"
#include "harp/region.h"
#include "index/indexbook.h"
#include "util/util.h"

#define RG_MAX_SET 256 /* blocks in one candidate region */
#define RG_MAX_EPI 16  /* epilogue steps a template applies (CT_MAX_EPI, CGEN_MAX_EPI, CUDA_MAX_EPI) */

typedef enum rg_ukind { RG_U_BLOCK, RG_U_GATHER, RG_U_ATTENTION, RG_U_CELL } rg_ukind;

typedef struct rg_unit {
  rg_ukind kind;
  int nblocks;
  int *blocks;   /* sorted; none for a GATHER */
  int node;      /* the value it produces (its last block's node, or the GATHER) */
  int nprod, ncons;
  int *prod, *cons; /* producer / consumer units, ascending */
  bool escapes;  /* a model output */
  rg_attention *att; /* RG_U_ATTENTION */
  int cell;          /* RG_U_CELL: index in the context's cells */
  const char *name;
} rg_unit;

/* What a candidate set is: legality, shape, cost.  Computed once per set
 * and cached (rg_eval_set). */
typedef struct rg_eval {
  bool legal;
  const char *reason; /* a stop reason when !legal */
  char detail[320];
  rg_shape shape;
  int anchor;         /* block, or -1 */
  int prefix;
  int64_t local_smem; /* bytes of smem_ring local buffers */
  /* cost */
  plan_region_info info;
  bool has_plan;
  plan_t *plan;       /* the default plan (arena), once rg_cost_set ran: a legal set's; NULL before (9.4 KB not zeroed for each illegal set) */
  plan_resources res; /* the plan's resources with local buffers; occ = the throughput factor (saturating occupancy x wave efficiency) */
  double raw_occ;     /* §5's occupancy of that plan (with the local buffers) */
  double time;        /* the adjusted time estimate (s) */
  double flops, bytes;
  bool tma_ok;        /* every tensor it touches has 16-byte aligned rows (SM90 TMA) */
  char names[PLAN_MAX_REGION_AXES][16]; /* axis names info.axes[].name point to */
  const char *inputs[8];
} rg_eval;

typedef struct rg_cache_entry rg_cache_entry;

typedef struct rg_ctx {
  harp_error *e;
  const tiny_graph *g;
  const tiny_symtab *syms;
  poly_view *pv;
  plan_machine m;
  int64_t budget;
  double halo_max;
  double occ_sat;
  bool no_rollback;
  bool no_operand_casts;
  bool gate_epilogues; /* rg_options.gate_epilogues */
  bool exact_add_steps; /* rg_options' */
  unsigned algo_mask; /* rg_options.algo_mask */
  ut_arena *arena;  /* lives as long as the context */
  int nunits;
  rg_unit *units;
  int *unit_of_node;  /* node -> unit, -1 for views and leaves */
  int *unit_of_block; /* block -> unit */
  int *group;         /* block -> fusable group (poly_make_fusable_groups) */
  char *units_exact;  /* unit -> placed by the exact search (after rg_select) */
  char *is_output;    /* per node */
  int *consumers;     /* per node: readers (compute nodes, through views), counted */
  /* scratch, g->n each */
  char *mark, *mark2;
  char *rn_mark, *rn_val; /* rg_region_nodes' marks, g->n each, cleared through rn_list */
  int *rn_list, rn_n;
  int *stack, *outs;
  /* Poly Core answers per (consumer block, first access reading the tensor),
   * computed once: the same edges come back in many candidate sets */
  struct rg_memo **memo; /* per (block, access): allocated when first asked */
  /* evaluation cache */
  int ncache, capcache;
  rg_cache_entry **cache;
  struct rg_plan_memo **plan_memo; /* rcost.c: default plans by summary */
  long evals;
  /* recurrent cells (cell.c): their sorted blocks and descriptions */
  int ncells, capcells;
  int **cell_blocks, *cell_n;
  rg_cell *cells;
} rg_ctx;

/* units.c */
harp_status rg_units_build(rg_ctx *c, rg_attention *const *att, int *const *att_blocks, const int *att_n, int natt);
/* node sets of a region made of blocks (+ gather node): nodes, inputs, outputs
 * as marks in c->rn_mark (1 = in the region, 2 = an input value; the marked
 * nodes listed ascending in c->rn_list[0 .. c->rn_n), valid until the next
 * call), returned as counts; out values go to outs (cap g->n). */
void rg_region_nodes(rg_ctx *c, const int *blocks, int n, int gather, int *nnodes, int *nin, int *outs, int *nout);
/* the producer block of tensor node t, or -1 (an input, a constant, a GATHER) */
int rg_producer_block(const rg_ctx *c, int t);
const char *rg_block_name(const rg_ctx *c, int b);
/* row-major element strides of a node's (bound) shape */
bool rg_shape_strides(const tiny_graph *g, int node, int64_t *strides, int *rank);

/* attention.c: shape C from the QK^T ... PV chain ending at block pv */
harp_status rg_match_attention(rg_ctx *c, int pv_block, bool *found, rg_attention *att, int *blocks, int *nblocks,
                             char *why, int cap);

/* legal.c: legality and shape of a set (no cost) */
typedef struct rg_memo {
  bool has_halo, has_pw;
  poly_halo halo; /* at the consumer's natural tile */
  bool pointwise;
  bool has_mb[POLY_MAX_VARS + 1];
  poly_min_buffer mb[POLY_MAX_VARS + 1]; /* at the tile of a p-dimensional shared prefix */
} rg_memo;
harp_status rg_check_set(rg_ctx *c, const int *blocks, int n, int gather, rg_eval *ev);
/* min_buffer_for_edge at the tile of a p-dimensional shared prefix, memoized */
harp_status rg_min_buffer(rg_ctx *c, int tensor, int block, int access, int prefix, const poly_min_buffer **out);
/* the tile a block's natural kernel computes (halo checks) */
void rg_natural_tile(const rg_ctx *c, int block, int64_t *tile);
bool rg_in(const int *set, int n, int x);
/* shape A: block b converts an operand of the epilogue (a CAST of an outside tensor) */
bool rg_operand_cast(rg_ctx *c, const int *blocks, int n, int K, int b);

/* rcost.c: the plan summary and time of a legal set; Δtime */
harp_status rg_cost_set(rg_ctx *c, const int *blocks, int n, int gather, rg_eval *ev);
/* Δtime of turning `before` plus `absorbed` into `after` (plan_fusion_delta). */
void rg_delta(rg_ctx *c, const rg_eval *before, const rg_eval *after, double absorbed_time, double absorbed_flops,
              double absorbed_bytes, plan_fusion_out *out, char *detail, int cap);
const char *rg_stop_of(const plan_fusion_out *d);
/* part (one side of a fusion) is the absorbing kernel of fused region S */
bool rg_is_base(const rg_eval *S, const rg_eval *part, bool part_has_anchor);
/* roles[i] = the plan_epi block set[i] is part of (-1: none), K the contraction */
void rg_epilogue_roles(rg_ctx *c, const int *set, int n, int K, int *roles);
/* Is every epilogue op of contraction K in the set a step of the contraction
 * templates (src/kernel/contract.c's reading)?  Else *bad: the first that is not. */
bool rg_epilogue_template(rg_ctx *c, const int *set, int n, int K, int *bad);

/* resfma.c: block b of the set (K its contraction) is the outer MULADD of an
 * exact QDQ Add step (*p; the CPU only); b is part of one of the set's: a
 * side node (*side: on the residual's way, not reached from K) or its inner
 * MULADD on the chain. */
bool rg_resfma_at(rg_ctx *c, const int *set, int n, int K, int b, rg_resfma *p);
bool rg_resfma_part(rg_ctx *c, const int *set, int n, int K, int b, bool *side);

/* select.c: evaluation with cache, greedy, exact windows */
harp_status rg_eval_set(rg_ctx *c, const int *blocks, int n, int gather, const rg_eval **out);
/* Drop the set's cached evaluation (its legality changed: a cell was found). */
void rg_eval_forget(rg_ctx *c, const int *blocks, int n, int gather);
/* A partition of the units: region[u] = id of the region unit u is in, sink[r] = its sink unit. */
typedef struct rg_choice {
  int *region_of_unit;
  int nregions;
  const char **selection; /* per region */
  double *dtime;          /* per region */
} rg_choice;
harp_status rg_select(rg_ctx *c, rg_choice *ch, double *greedy_total, double *final_total, int *nwindows, int *nexact,
                    int window);
/* The blocks of units in `members` (unit ids), sorted, into out; returns the count, gather via *gather. */
int rg_units_blocks(const rg_ctx *c, const int *members, int n, int *out, int cap, int *gather);
/* Can region R (units) take producer unit q?  ok, or the STOP reason. */
typedef struct rg_absorb {
  bool ok;
  const char *reason;
  char detail[320];
  double dtime;
} rg_absorb;
harp_status rg_try_absorb(rg_ctx *c, const int *R, int n, int q, rg_absorb *out);
/* Δtime of forming a set from its units alone. */
harp_status rg_formation_delta(rg_ctx *c, const int *members, int n, double *dtime, const char **stop, char *detail,
                             int cap);

/* cell.c: the recurrent cells (shape D) among the blocks not claimed (by
 * an attention), registered in c before the units are built: each is one
 * unit, a region of its own */
harp_status rg_find_cells(rg_ctx *c, const char *claimed);
/* the node cell k's unit sits at (its last block's, copies aside) */
int rg_cell_node(const rg_ctx *c, int k);

#endif
