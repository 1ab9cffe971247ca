/* harp/poly.h — Poly-View: the analysis-only IR of seed 000 §1.4 / §3, on isl.
 *
 * Built from a prepared Tiny IR graph and its IndexBook.  Every non-movement
 * node (except INPUT / CONST, which are tensors) becomes a PolyBlock: a
 * statement with an iteration domain (an isl set) and accesses (isl maps from
 * the domain to tensors).  Movement nodes are views: they are absorbed into
 * the accesses of their consumers (the composed IndexBook maps), except when
 * a movement node is a model output, which then becomes a movement_affine
 * block (a copy).
 *
 *   kind                 what                             domain variables
 *   ewise                unary / binary / WHERE / CAST      i0..  (output axes)
 *   reduce               REDUCE                             i0.. then r0.. (reduced)
 *   movement_affine      a view that is a model output      i0..
 *   contraction_pattern  MUL -> REDUCE(SUM) (§3.5)          i0.. then r0..
 *
 * A contraction block absorbs its MUL (and a CAST between MUL and REDUCE);
 * its reads go through movement and CAST nodes to the two base tensors.
 * Each CAST such a read passes is also a stage of it: the same read stopped
 * at that CAST, in the CAST's own coordinates, for a region where the CAST
 * is materialized and the base is not (poly_stmt_spec.stage).
 * Edges carry the dependence relations between blocks (true; a Tiny graph
 * is single-assignment, so anti and output dependences only appear inside
 * a reduction, as self edges).  GATHER (data-dependent) is no block: it is
 * listed as non-SCoP and bounds regions.
 *
 * Symbols: unbound symbols are isl parameters named after them (>= 0); bound
 * ones are constants (see src/index/indexbook.h).  One isl_ctx per view.
 *
 * isl types never appear here; Poly Core code in src/poly/ uses
 * src/poly/poly_int.h. */
#ifndef HARP_POLY_H
#define HARP_POLY_H

#include <stdbool.h>
#include <stdint.h>

#include "harp/error.h"
#include "harp/tiny.h"

struct ib_book;
typedef struct poly_view poly_view;

typedef enum poly_kind { POLY_EWISE, POLY_REDUCE, POLY_MOVEMENT_AFFINE, POLY_CONTRACTION } poly_kind;
const char *poly_kind_name(poly_kind k); /* "ewise", ..., "contraction_pattern" */

typedef enum poly_pattern { POLY_PAT_MATMUL, POLY_PAT_CONV } poly_pattern;
const char *poly_pattern_name(poly_pattern p);

#define POLY_MAX_VARS TINY_MAX_RANK
#define POLY_MAX_ACC (TINY_MAX_SRC + 1)
#define POLY_MAX_NODES 4
#define POLY_MAX_STAGES 4 /* CASTs of one contraction operand a statement may read at */

/* How one axis of a contraction operand is indexed by the block variables. */
typedef enum poly_idx_kind {
  POLY_IDX_VAR,    /* exactly one variable: index = var */
  POLY_IDX_CONST,  /* a fixed index c (a size-1 axis broadcast) */
  POLY_IDX_WINDOW, /* stride*out_var + dilation*win_var + offset: a sliding window */
  POLY_IDX_AFFINE  /* another affine form (strided, linearized, offsets) */
} poly_idx_kind;

typedef struct poly_idx {
  poly_idx_kind kind;
  int var;                 /* VAR */
  int64_t c;               /* CONST */
  int out_var, win_var;    /* WINDOW: an output and a reduced variable */
  int64_t stride, dilation, offset;
  bool has_pad;            /* WINDOW with known sizes: the padding actually read */
  int64_t pad_lo, pad_hi;
  char text[96];           /* the expression, e.g. "2*i3 + r1 - 1" */
  /* lin: the index is sum coef[v] * v + cst over the block variables (no
   * symbolic size in it), whatever the kind; how an AFFINE axis (a grouped
   * conv's channel g*C/G + c) is read */
  bool lin;
  int64_t coef[POLY_MAX_VARS], cst;
} poly_idx;

typedef struct poly_contraction {
  poly_pattern pattern;
  int mul_node, reduce_node;
  int lhs, rhs;       /* base nodes read (MUL's src[0] and src[1] sides) */
  int nout, nred;     /* block variables: out 0..nout-1, reduced nout..nout+nred-1 */
  int lhs_rank, rhs_rank;
  poly_idx lhs_idx[TINY_MAX_RANK], rhs_idx[TINY_MAX_RANK];
  int nbatch, nm, nn; /* out variables used by both operands / lhs only / rhs only */
  int batch[POLY_MAX_VARS], m[POLY_MAX_VARS], n[POLY_MAX_VARS];
  bool lhs_fill, rhs_fill; /* the operand reads padding somewhere */
  double lhs_fill_value, rhs_fill_value;
} poly_contraction;

typedef struct poly_access_info {
  int tensor;         /* node whose value is read or written */
  const char *name;   /* tensor name: INPUT's tensor_id, else the node id */
  bool write;
  int nvia;           /* movement / CAST nodes the read passes, nearest first */
  const int *via;
  int npieces;        /* basic maps of the read relation after coalescing */
  int nfill;          /* fill pieces (padding) after coalescing */
  /* A contraction operand: the CASTs on via it can be read at instead of
   * the base (its stages), nearest the block first; stage[k] is stage k+1. */
  int nstage;
  int stage[POLY_MAX_STAGES];
} poly_access_info;

typedef struct poly_block_info {
  const char *name;     /* the node's tag when unique, else its id */
  const char *isl_name; /* tuple name in isl strings (sanitised, unique) */
  poly_kind kind;
  int node;             /* the node whose value the block writes */
  int nnodes;
  int nodes[POLY_MAX_NODES]; /* nodes it computes (MUL, CAST, REDUCE for a contraction) */
  int nvars, nout;      /* iteration variables: nout outputs, then reduced ones */
  const char *var_names[POLY_MAX_VARS];
  int naccess;          /* reads first, the write last */
  poly_access_info access[POLY_MAX_ACC];
  const poly_contraction *con; /* contraction_pattern only */
} poly_block_info;

typedef struct poly_edge_info {
  int from, to; /* block indices; from == to for a reduction's self edge */
  int tensor;   /* node whose value carries the dependence */
} poly_edge_info;

typedef struct poly_options {
  int max_pieces;    /* pieces per access after coalesce/gist (0: TINY_DEFAULT_MAX_PIECES) */
  bool require_scop; /* NonScop error at the first data-dependent index instead of a mark */
  bool no_reuse;     /* every access relation built afresh (src/poly/acc_cache.c: an A/B switch) */
} poly_options;

harp_status poly_build(harp_error *e, const tiny_graph *g, const struct ib_book *ib, const poly_options *opt,
                     poly_view **out);
/* Frees every isl object and the isl_ctx. */
void poly_free(poly_view *pv);

int poly_nblocks(const poly_view *pv);
const poly_block_info *poly_block(const poly_view *pv, int k);
int poly_block_of(const poly_view *pv, int node); /* block computing node, or -1 */
int poly_nedges(const poly_view *pv);
const poly_edge_info *poly_edge(const poly_view *pv, int k);
int poly_nnon_scop(const poly_view *pv);
int poly_non_scop(const poly_view *pv, int k); /* node index */

/* isl's own text for a block's domain, an access relation (with its fill
 * pieces appended as "fill V: set" lines in poly_access_fill_str) and an
 * edge's true dependences.  malloc'd; NULL on allocation failure. */
char *poly_domain_str(const poly_view *pv, int block);
char *poly_access_str(const poly_view *pv, int block, int access);
/* Whether the access reads (writes) exactly the element at the block's own
 * coordinates, with no padding: an elementwise, same-index access. */
bool poly_access_identity(const poly_view *pv, int block, int access);
/* Read `access` of a block axis by axis of its base tensor, classified as
 * a contraction operand's are (poly_idx: VAR, CONST, WINDOW, AFFINE):
 * how a pooling (a MAX or SUM over a window) reads its input.  *fill: it
 * reads padding, all of value *fill_value.  False when the read is no
 * single affine piece (floor division, several read pieces, pads of two
 * values, outside the SCoP) or no read. */
bool poly_access_axes(const poly_view *pv, int block, int access, int *rank, poly_idx *idx, bool *fill,
                      double *fill_value);
char *poly_access_fill_str(const poly_view *pv, int block, int access, int k, double *value);
char *poly_edge_str(const poly_view *pv, int edge);

/* Enumerate a block's access on concrete sizes (no unbound symbols): cb gets
 * every domain point with the tensor element it reads, or with fill set and
 * the pad value.  cb returns non-zero to stop.  For tests and playback. */
typedef int (*poly_point_fn)(void *user, const int64_t *point, int nvars, const int64_t *elem, int rank, bool fill,
                             double value);
harp_status poly_access_scan(harp_error *e, const poly_view *pv, int block, int access, poly_point_fn cb, void *user);

/* The view as JSON (seed 000 §12.3, docs/poly-view.md); malloc'd. */
harp_status poly_dump_json(harp_error *e, const poly_view *pv, char **out);

#endif
