/* harp/polycore.h — Poly Core (seed 000 §1.6): the analysis service over a
 * Poly-View.  Every answer is computed with isl from the blocks' domains and
 * access relations (src/poly/core_*.c), never from op names.
 *
 *   dependences        true / anti / output under the original schedule
 *                      (blocks in graph order, each block's loops in
 *                      lexicographic order)
 *   axis kinds         parallel or reduction, from the distances of a
 *                      block's self-dependences
 *   affine closure     an access is still (piecewise) quasi-affine after the
 *                      IndexBook composed it
 *   tails              which axes a tile does not divide, with the tail set
 *   can_compute_at     legality of computing (or loading) a producer per
 *                      consumer tile, and the halo {bytes, per_axis}
 *   min_buffer         reg | smem_ring | gmem for a producer -> consumer edge
 *   fusable groups     blocks connected by edges a region could keep inside
 *   fusion prefix      the outer loop dimensions a set of blocks can share
 *   strides            an access as a linear element offset (for backends)
 *   hints              barriers and shared-memory bank conflicts
 *
 * Tiles: `tile` gives one size per output variable of the consumer block
 * (its first nout variables); 0 or a NULL tile means 1, a negative size the
 * whole extent.  Reduced variables always span their whole extent.
 * Sizes must be known (bound symbols) wherever a number is returned. */
#ifndef HARP_POLYCORE_H
#define HARP_POLYCORE_H

#include <stdbool.h>
#include <stdint.h>

#include "harp/error.h"
#include "harp/plan.h"
#include "harp/poly.h"

/* ---- dependences ------------------------------------------------------------ */
typedef enum poly_dep_kind { POLY_DEP_TRUE, POLY_DEP_ANTI, POLY_DEP_OUTPUT } poly_dep_kind;
const char *poly_dep_kind_name(poly_dep_kind k); /* "true" | "anti" | "output" */

/* The dependences of kind k from instances of block `from` to instances of
 * block `to` (from == to: inside one block), as isl text in *text (malloc'd,
 * may be NULL) and whether they exist.  A REDUCE or contraction accumulates
 * into its output: that is a read and a write of the output at every reduced
 * point, which is where anti and output dependences come from. */
harp_status poly_dependence(harp_error *e, const poly_view *pv, int from, int to, poly_dep_kind k, bool *exists,
                          char **text);

typedef enum poly_axis_kind { POLY_AXIS_PARALLEL, POLY_AXIS_REDUCTION } poly_axis_kind;
/* kinds[v] for every variable of the block: a variable is a reduction when
 * some self-dependence of the block has a non-zero distance along it. */
harp_status poly_axis_kinds(harp_error *e, const poly_view *pv, int block, poly_axis_kind *kinds);

/* The access is a function of the block's variables (single-valued), quasi-
 * affine after composition (isl can write it as a piecewise multi-affine
 * expression), and its read and fill pieces cover the domain exactly. */
harp_status poly_access_affine(harp_error *e, const poly_view *pv, int block, int access, bool *closed);

/* ---- tiles --------------------------------------------------------------------- */
/* tail[v] for every variable of the block: a tile of tile[v] (> 0) leaves a
 * partial tile along it.  tail_set (nullable, malloc'd) receives isl's text
 * of the domain points in partial tiles (empty when none). */
harp_status poly_tail_axes(harp_error *e, const poly_view *pv, int block, const int64_t *tile, bool *tail,
                         char **tail_set);

#define POLY_HALO_WHY 160
typedef struct poly_halo {
  bool ok;                      /* the producer's values for one consumer tile can be computed there */
  char why[POLY_HALO_WHY];      /* when !ok */
  int rank;                     /* producer tensor rank */
  int64_t extent[TINY_MAX_RANK]; /* footprint of one tile per producer axis (pad positions included) */
  int64_t core[TINY_MAX_RANK];  /* the direct image of the tile's output variables per axis */
  int64_t lo[TINY_MAX_RANK], hi[TINY_MAX_RANK]; /* reach below / above the core: the halo per axis */
  int64_t elems;                /* footprint elements (product of extents) */
  int64_t halo_elems;           /* elems - product of cores */
  int64_t bytes;                /* halo_elems x element size: the halo */
  int64_t footprint_bytes;      /* elems x element size */
  bool pointwise;               /* every consumer point reads the producer element at its own linear position */
} poly_halo;

/* can_compute_at(producer, consumer, tile): `producer` is the node whose
 * value the consumer block reads (a block's value or an input tensor: then
 * "compute" reads "load").  The footprint applies every read piece's affine
 * function to a tile at the origin, so a window reaching into padding counts
 * the pad positions: a 3x3 stride-1 window over a Th x Tw tile needs
 * (Th+2) x (Tw+2), lo = hi = 1 with pad 1.  Not ok when the consumer does
 * not read the producer, the producer is outside the SCoP, or a size is
 * unknown. */
harp_status poly_can_compute_at(harp_error *e, const poly_view *pv, int producer, int consumer, const int64_t *tile,
                              poly_halo *out);

typedef struct poly_min_buffer {
  plan_buffer buffer; /* reg | smem_ring | gmem */
  int depth;          /* smem_ring: 2 when two tiles fit the budget (double buffering), else 0 */
  int64_t bytes;      /* per tile, all ring slots */
  poly_halo halo;     /* the can_compute_at answer it was derived from */
} poly_min_buffer;

/* min_buffer_for_edge(producer, consumer, tile): reg when the consumer reads
 * the producer pointwise or one element per tile (a broadcast scalar),
 * smem_ring when the tile's footprint fits `budget` bytes, else gmem. */
harp_status poly_min_buffer_for_edge(harp_error *e, const poly_view *pv, int producer, int consumer, const int64_t *tile,
                                   int64_t budget, poly_min_buffer *out);

/* ---- fusion ------------------------------------------------------------------------ */
/* make_fusable_groups(scop): group[b] for every block, *ngroups groups.  Two
 * blocks share a group when a dependence edge joins them that a region may
 * keep inside: the producer can be computed at the consumer (can_compute_at),
 * its value is no model output and no non-SCoP node reads it. */
harp_status poly_make_fusable_groups(harp_error *e, const poly_view *pv, int *group, int *ngroups);

/* The largest p such that the blocks can share their first p loop
 * dimensions: every block has at least p output variables, their domains
 * projected on the first p dimensions are equal, and every dependence
 * between two of them is the identity on those dimensions (a consumer at
 * prefix x reads only producer instances at prefix x).  The lead's codegen
 * builds the schedule from it: the outer p loops shared, then the blocks in
 * sequence. */
harp_status poly_fusion_prefix(harp_error *e, const poly_view *pv, const int *blocks, int n, int *p);

/* The access reads the producer pointwise: the element read at a domain
 * point has that point's own row-major position, counting the domain's
 * variables (reduced ones included) in order — identity, reshapes that keep
 * the order, a reduction over the innermost axes streaming its input; one
 * piece, no fill, as many points as elements. */
harp_status poly_access_is_pointwise(harp_error *e, const poly_view *pv, int block, int access, bool *out);

/* The access as a linear element offset into its (row-major) tensor:
 * offset + sum strides[v] * var_v over the block's variables.  *affine is
 * false (strides unset) when it has several pieces, fill pieces or floor
 * divisions.  A variable whose extent is 1 gets some stride (isl's choice,
 * often 0): it never moves. */
harp_status poly_access_strides(harp_error *e, const poly_view *pv, int block, int access, int64_t *strides,
                              int64_t *offset, bool *affine);
/* The same for stage `stage` (>= 1) of contraction operand `access`: the
 * read in the coordinates of the CAST poly_access_info.stage[stage - 1]. */
harp_status poly_stage_strides(harp_error *e, const poly_view *pv, int block, int access, int stage, int64_t *strides,
                             int64_t *offset, bool *affine);

/* The same, for the read `access` of block path[n-1] seen from the output
 * variables of block path[0]: the dependences path[0] -> path[1] -> ...
 * (Poly-View edges, path[0]'s reduced variables projected out) composed
 * with the read.  This is how an epilogue's bias or residual is addressed
 * from the accumulator of the contraction it follows. */
harp_status poly_access_strides_via(harp_error *e, const poly_view *pv, const int *path, int n, int access,
                                  int64_t *strides, int64_t *offset, bool *affine);

/* A chain of reads through values (core_chain.c): block[0] reads, through
 * its access[0], the value block[1] computes (an elementwise block, whose
 * domain is that value's index space), which reads access[1], ... up to
 * the read access[n-1] of block[n-1]: how a consumer reaches a tensor
 * through the PADs and slices of a concat in between. */
#define POLY_CHAIN_MAX 48
typedef struct poly_chain {
  int n;
  int block[POLY_CHAIN_MAX], access[POLY_CHAIN_MAX];
} poly_chain;
typedef enum poly_chain_kind {
  POLY_CHAIN_MIXED, /* real elements on part of the box, or not one affine function */
  POLY_CHAIN_READ,  /* real elements everywhere: offset + strides over block[0]'s variables */
  POLY_CHAIN_FILL   /* one pad value everywhere */
} poly_chain_kind;
typedef struct poly_chain_result {
  poly_chain_kind kind;
  int64_t strides[POLY_MAX_VARS], offset; /* READ: the last tensor's row-major linear index */
  double fill;                            /* FILL */
} poly_chain_result;
/* What chain c reads over lo <= x <= hi of block[0]'s domain (lo NULL: all). */
harp_status poly_chain_read(harp_error *e, const poly_view *pv, const poly_chain *c, const int64_t *lo, const int64_t *hi,
                          poly_chain_result *out);
/* Cuts along one variable of block[0] (shared by the chains) so that over
 * each slab cuts[i] <= x_var < cuts[i+1] (the rest of the domain whole) no
 * chain reads MIXED: *ok with *var -1 when no chain pads at all; *ok false
 * when the pads are no slabs along one variable or need more than cap cuts. */
harp_status poly_chain_cuts(harp_error *e, const poly_view *pv, const poly_chain *chains, int nchains, int *var,
                          int64_t *cuts, int *ncuts, int cap, bool *ok);

/* A ShapeSet object's read through a RESHAPE (src/poly/reshape_view.c):
 * the RESHAPE node next to the tensor that access `access` of `block`
 * reads (the read's last view, or the block's own node) where it splits or
 * merges an axis by a varying size (a symbol of syms[0..nsyms), syms NULL:
 * any symbol's), so that an index through it would hold that size as a
 * coefficient or divisor; -1 otherwise.  The read then indexes the
 * RESHAPE's output in its own shape: the same elements, row-major. */
int poly_reshape_view(const poly_view *pv, int block, int access, int nsyms, const char *const *syms);

/* The constant range [lo, hi] of every variable of a block; false when a
 * bound is not a constant (unbound symbols). */
bool poly_block_ranges(const poly_view *pv, int block, int64_t *lo, int64_t *hi);

/* ---- hints ---------------------------------------------------------------------------- */
typedef enum poly_barrier {
  POLY_BARRIER_NONE,       /* the value stays with the thread that made it (registers) */
  POLY_BARRIER_SYNC,       /* shared between threads: a CTA barrier between write and read */
  POLY_BARRIER_COMMIT_WAIT, /* SM80 cp.async ring: commit_group / wait_group per stage */
  POLY_BARRIER_MBARRIER    /* SM90 TMA ring: mbarrier arrive / try_wait per stage */
} poly_barrier;
const char *poly_barrier_name(poly_barrier b);
/* The barrier an edge needs given its buffer and the target. */
poly_barrier poly_barrier_hint(plan_buffer buffer, int depth, plan_arch arch);

/* Bank conflicts of reading `access` from a shared-memory tile whose rows are
 * `row_elems` elements of elem_size bytes, when consecutive threads take
 * consecutive values of variable `var`: *ways is how many threads of a warp
 * hit one bank (1 = conflict-free), from the access's stride along var. */
harp_status poly_bank_conflict_hint(harp_error *e, const poly_view *pv, int block, int access, int var,
                                  int64_t row_elems, int elem_size, int *ways);

#endif
