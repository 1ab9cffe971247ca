/* poly_int.h — Poly-View internals: the isl objects behind harp/poly.h.
 * Only src/poly/ includes isl.  Ownership follows isl: a struct field marked
 * "owned" is freed by poly_free; functions say __isl_give / __isl_take /
 * __isl_keep on every isl argument and result. */
#ifndef HARP_POLY_INT_H
#define HARP_POLY_INT_H

#include <isl/aff.h>
#include <isl/constraint.h>
#include <isl/id.h>
#include <isl/options.h>
#include <isl/ctx.h>
#include <isl/local_space.h>
#include <isl/map.h>
#include <isl/set.h>
#include <isl/space.h>
#include <isl/union_map.h>
#include <isl/union_set.h>

#include "harp/poly.h"
#include "index/indexbook.h"
#include "util/util.h"

#define POLY_MAX_FILLS 8   /* distinct pad values one read can meet */
#define POLY_MAX_PARAMS 64 /* distinct unbound symbols in one block */

typedef struct poly_fill {
  double value;
  isl_set *set; /* owned: the domain points that read this pad value */
} poly_fill;

typedef struct poly_acc {
  ib_access ib;  /* block variables -> tensor, as the IndexBook composed it */
  isl_map *map;  /* owned: block domain -> tensor (the read pieces / the write) */
  const char *key; /* acc_cache.c's key of map (arena), NULL when not cached */
  int nfill;
  poly_fill fill[POLY_MAX_FILLS];
} poly_acc;

typedef struct poly_blk {
  poly_block_info pub;
  int var_node;    /* node whose IndexBook variables the block uses */
  isl_set *domain; /* owned */
  isl_set *out_domain; /* owned; an empty reduction only (a reduced axis of size 0): the
                          domain without the reduced variables' constraints, where its
                          initialisation and store still run on every output */
  poly_acc acc[POLY_MAX_ACC];
  poly_acc *stage[2]; /* a contraction operand's stages (pub.access[a].nstage; arena, maps owned) */
  poly_contraction *con; /* contraction_pattern only (arena) */
  int nparams;
  const char *params[POLY_MAX_PARAMS]; /* unbound symbols used, sorted */
  bool ranges_known; /* lo/hi: every variable's constant bounds (no unbound symbol) */
  bool is_box;       /* the domain is exactly the box lo..hi (no guard, no parameter, not empty) */
  int64_t lo[POLY_MAX_VARS], hi[POLY_MAX_VARS];
} poly_blk;

typedef struct poly_edge_int {
  poly_edge_info pub;
  isl_map *dep; /* owned: from-block instances -> to-block instances */
} poly_edge_int;

struct poly_view {
  isl_ctx *ctx; /* owned: one per view */
  struct ut_arena *arena;
  const tiny_graph *g;
  const ib_book *ib;
  harp_error *e; /* during poly_build only */
  int max_pieces;
  int nblocks, capblocks;
  poly_blk *blocks;
  int *block_of; /* per node: block index or -1 */
  int *uses;     /* per node: how many sources name it */
  int nedges, capedges;
  poly_edge_int *edges;   /* grouped by consumer (pub.to ascending) */
  int *edges_to;          /* per block b + 1: edges[edges_to[b] .. edges_to[b+1]) end at b */
  signed char *eq_along;  /* per edge x POLY_MAX_VARS: equal_along memo, -1 unknown (core_fuse.c) */
  signed char *pointwise; /* per block x POLY_MAX_ACC: poly_access_is_pointwise memo, -1 unknown */
  int nnon_scop;
  int *non_scop;
  ut_strmap names, isl_names; /* block names taken (name_block; keys in the arena) */
  bool no_acc_cache;          /* poly_options.no_reuse */
  struct poly_halo_cache *halos; /* acc_cache.c: poly_can_compute_at's answers by shape (owned; NULL with no_reuse) */
  ut_strmap acc_keys;         /* acc_cache.c: key (arena) -> entry of acc_cache */
  struct poly_acc_entry *acc_cache;
  int nacc_cache, capacc_cache;
};

/* ---- convert.c: IndexBook -> isl ---------------------------------------- */
/* The set space of block b (its params, tuple and variable names). */
__isl_give isl_space *poly_block_space(poly_view *pv, const poly_blk *b);
/* The set space of a tensor (node), with b's params. */
__isl_give isl_space *poly_tensor_space(poly_view *pv, const poly_blk *b, int node);
__isl_give isl_aff *poly_aff(poly_view *pv, __isl_keep isl_local_space *ls, const ib_aff *a);
/* The set of points of space where every constraint holds. */
__isl_give isl_set *poly_cons_set(poly_view *pv, __isl_keep isl_space *space, const ib_cons *c, int n);
/* The graph of piece p's map (dom -> ran) where its constraints hold. */
__isl_give isl_map *poly_piece_map(poly_view *pv, __isl_keep isl_space *dom, __isl_keep isl_space *ran, const ib_piece *p);
/* Read relation (read pieces) and fill sets of an access, simplified. */
harp_status poly_make_access(poly_view *pv, poly_blk *b, poly_acc *a, int tensor);
/* ---- astgen_sym.c: a ShapeSet object's domains and accesses ---- */
struct poly_ast_opts;
/* The symbols' parameters hp_sv<i> bounded 1..sym_hi[i], or (now) fixed to sym_now[i]. */
__isl_give isl_set *poly_sym_params(isl_ctx *ctx, const struct poly_ast_opts *o, bool now);
/* Box block b's statement domain (nvars variables, tuple `tuple`) with each
 * axis of a symbol's size bounded by its parameter; NULL where no axis is
 * one, b is no box, or the set differs from `concrete` at sym_now. */
__isl_give isl_set *poly_sym_domain(poly_view *pv, const poly_blk *b, int nvars, const struct poly_ast_opts *o,
                                    const char *tuple, __isl_keep isl_set *concrete);
/* Access a's (of block b) relation m (a statement's tuple; taken) rebuilt on
 * the parametric domain pdom; NULL where m is not one affine function (at
 * most one pad value), or the result differs from m on cdom at sym_now. */
__isl_give isl_map *poly_sym_access(poly_view *pv, const poly_blk *b, const poly_acc *a, const struct poly_ast_opts *o,
                                    __isl_take isl_map *m, __isl_keep isl_set *pdom, __isl_keep isl_set *cdom);
/* a and b (taken) equal once both are restricted to the parameters at sym_now. */
bool poly_sym_equal_now(isl_ctx *ctx, const struct poly_ast_opts *o, __isl_take isl_map *a, __isl_take isl_map *b);
/* ---- reshape_view.c: a read through a RESHAPE indexed by its output ---- */
/* Access a of block b (its relation m, a statement's tuple; kept) read into
 * RESHAPE node r's output (poly_reshape_view's answer) and rebuilt on the
 * parametric domain pdom: the views before r composed, r left out; NULL
 * where that is not one affine function, or, through r's own map, it
 * differs from m on cdom at sym_now. */
__isl_give isl_map *poly_sym_access_view(poly_view *pv, const poly_blk *b, const poly_acc *a, int r,
                                         const struct poly_ast_opts *o, __isl_keep isl_map *m, __isl_keep isl_set *pdom,
                                         __isl_keep isl_set *cdom);
/* ---- acc_cache.c: access relations reused across same-shaped blocks ---- */
/* The key of access a of block b into a tensor of `rank` axes (arena);
 * NULL where it is not cached. */
const char *poly_acc_key(poly_view *pv, const poly_blk *b, const poly_acc *a, int rank);
/* true when key's relation was found: a->map / a->fill set, renamed to b
 * and tensor tname; *pieces its count of basic relations. */
bool poly_acc_cache_get(poly_view *pv, const poly_blk *b, poly_acc *a, const char *key, const char *tname, int *pieces);
void poly_acc_cache_put(poly_view *pv, const char *key, const poly_acc *a, int pieces);
/* A dependence's key from its read's and write's (NULL if either is), the
 * dependence under it renamed from pb's instances to b's (NULL if none),
 * and keeping one. */
const char *poly_flow_key(poly_view *pv, const char *rkey, const char *wkey);
__isl_give isl_map *poly_flow_cache_get(poly_view *pv, const char *key, const poly_blk *pb, const poly_blk *b);
void poly_flow_cache_put(poly_view *pv, const char *key, __isl_keep isl_map *dep);
void poly_acc_cache_free(poly_view *pv);
/* Block b's domain from f's constraints (space sp), reused from a block
 * with the same ones; check_empty: *empty whether it has no point. */
__isl_give isl_set *poly_domain_cached(poly_view *pv, const poly_blk *b, const ib_info *f, __isl_keep isl_space *sp,
                                       bool check_empty, bool *empty);
/* poly_can_compute_at's answer for reads acc[0..nacc) of block b at tile
 * (NULL: a point), es-byte elements, from another block of the same shape:
 * true with *out set; else *key (arena, NULL when not cached) is where
 * poly_halo_cache_put keeps the answer. */
struct poly_halo;
bool poly_halo_cache_get(const poly_view *pv, const poly_blk *b, const int *acc, int nacc, const int64_t *tile, int es,
                         struct poly_halo *out, const char **key);
void poly_halo_cache_put(const poly_view *pv, const char *key, const struct poly_halo *h);
void poly_halo_cache_new(poly_view *pv); /* pv->halos, or NULL when out of memory (no reuse) */
void poly_halo_cache_free(poly_view *pv);
/* coalesce, gist against the parameter context (params >= 0), remove
 * redundancies: seed 000 §3.3. */
__isl_give isl_map *poly_simplify_map(__isl_take isl_map *m);
__isl_give isl_set *poly_simplify_set(__isl_take isl_set *s);
/* Unbound symbols of an expression, added to b->params (sorted, unique). */
harp_status poly_collect_params(poly_view *pv, poly_blk *b, const ib_aff *a);
/* Turn a pending isl error into a harp_error. */
harp_status poly_isl_check(poly_view *pv, const char *node, const char *what);

/* ---- contract.c: §3.5 --------------------------------------------------- */
/* A contraction operand: the read of its base tensor and, for each CAST it
 * passes (nearest the block first), the read stopped at that CAST. */
typedef struct poly_operand {
  ib_access acc;
  int nstage;
  ib_access stage[POLY_MAX_STAGES];
} poly_operand;

/* If REDUCE node r with its MUL is a contraction pattern, set *found, fill
 * con and the operand accesses (in r's iteration variables). */
harp_status poly_detect_contraction(poly_view *pv, int r, bool *found, poly_contraction *con, poly_operand *lhs,
                                  poly_operand *rhs);

/* ---- deps.c ------------------------------------------------------------- */
harp_status poly_build_edges(poly_view *pv);
/* Edge k's dependence relation (a self edge's computed on first use; NULL
 * if isl fails). */
__isl_keep isl_map *poly_edge_dep(const poly_view *pv, int k);

/* ---- union.c: whole-program views for Poly Core ------------------------- */
__isl_keep isl_set *poly_block_domain(const poly_view *pv, int block);
__isl_keep isl_map *poly_block_access(const poly_view *pv, int block, int access);
__isl_give isl_union_set *poly_union_domains(const poly_view *pv);
__isl_give isl_union_map *poly_union_reads(const poly_view *pv);  /* every read piece, block -> tensor */
__isl_give isl_union_map *poly_union_writes(const poly_view *pv); /* block -> its output tensor */
__isl_give isl_union_map *poly_union_deps(const poly_view *pv);   /* every edge, from -> to */
/* A read as a function (the read pieces; fill pieces are outside its domain). */
__isl_give isl_pw_multi_aff *poly_access_pma(const poly_view *pv, int block, int access);

/* ---- tests -------------------------------------------------------------- */
__isl_keep isl_ctx *poly_isl_ctx(const poly_view *pv);

#endif
