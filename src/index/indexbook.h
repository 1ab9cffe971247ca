/* index/indexbook.h — IndexBook: the axis side table of seed 000 §1.3.
 *
 * For every node of a prepared Tiny IR graph the book records, without
 * touching the graph:
 *   - its axes (AxisVar: id, name i0.., size, kind iter|reduce|broadcast);
 *   - its domain: the box 0 <= ik < size_k plus the guards of every `%`
 *     that was expanded into a floor division;
 *   - for each source, the step map (AxisMap: the source's axes as affine +
 *     floordiv expressions of this node's iteration variables), split into
 *     pieces where PAD makes it piecewise;
 *   - for each source, the composed access: the same, followed through every
 *     movement node down to the first non-movement node (the "base"), the
 *     expressions simplified after each step.
 *   - REDUCE: the removed axes (reduce_axes); GATHER: a NonScop mark.
 *
 * Iteration variables of a node: its output axes i0..i{rank-1}; a REDUCE has
 * in addition its reduced axes r0..r{nred-1} (variables rank..rank+nred-1),
 * in the order they have in the REDUCE's input.
 *
 * Symbols.  A symbol bound in the symbol table is replaced by its value
 * everywhere (a compiled artifact is specialised per binding); an unbound one
 * stays a symbol, becomes an isl parameter named after it in Poly-View, and
 * is assumed >= 0 (Tiny symbols are sizes, pads and offsets).  Axis sizes
 * keep the symbol's name in both cases (ib_size.sym).  A symbol may only be
 * added or multiplied by a constant: strides, steps and reshapes across
 * unbound symbols need the symbols bound (Unsupported otherwise).
 *
 * Errors (seed 000 §13, seed 001 §4): NegativeStride (VIEW walking an axis
 * backwards, SHRINK step < 1), ExcessivePiecewise (more pieces than
 * ib_options.max_pieces_ib before isl gets to coalesce them),
 * MissingDivGuard (ib_validate), Unsupported (see above).  Data-dependent
 * indices (GATHER) are marked, not rejected: info->non_scop.
 *
 * Needs: a graph after tiny_infer (normally after tiny_prepare).
 * Gives: ib_build, ib_get, ib_validate, ib_compose, ib_dump_json. */
#ifndef HARP_INDEXBOOK_H
#define HARP_INDEXBOOK_H

#include <stdbool.h>
#include <stdint.h>

#include "harp/error.h"
#include "harp/tiny.h"

struct ut_arena;
struct ut_str;

/* ---- expressions: affine + floordiv ------------------------------------ */
#define IB_MAX_VARS TINY_MAX_RANK /* iteration variables of one node */
#define IB_MAX_SYMS 16            /* distinct unbound symbols in one expression */
#define IB_MAX_DIVS 16            /* distinct floor divisions in one expression */

typedef struct ib_div ib_div;

typedef struct ib_symterm {
  const char *name; /* unbound symbol */
  int64_t k;        /* != 0 */
} ib_symterm;

typedef struct ib_divterm {
  const ib_div *d;
  int64_t k; /* != 0 */
} ib_divterm;

/* c + sum v[j]*x_j + sum k*sym + sum k*floor(num/q).
 * Canonical: sym[] sorted by name, div[] sorted by ib_div_cmp, no zero
 * coefficients, no duplicate entries.  Plain value: copy it freely (divs are
 * immutable and arena-owned). */
typedef struct ib_aff {
  int64_t c;
  int64_t v[IB_MAX_VARS];
  int nsym, ndiv;
  ib_symterm sym[IB_MAX_SYMS];
  ib_divterm div[IB_MAX_DIVS];
} ib_aff;

struct ib_div {
  ib_aff num;
  int64_t q; /* >= 2 */
};

/* A closed interval; a missing bound is infinite. */
typedef struct ib_range {
  bool has_lo, has_hi;
  int64_t lo, hi;
} ib_range;

/* What the simplifier knows while it works on one node's expressions. */
typedef struct ib_env {
  struct ut_arena *arena; /* owns the ib_div it creates */
  harp_error *e;
  const char *node; /* for error messages */
  int nvars;
  ib_range var[IB_MAX_VARS]; /* range of each iteration variable */
} ib_env;

void ib_aff_zero(ib_aff *a);
void ib_aff_const(ib_aff *a, int64_t c);
void ib_aff_var(ib_aff *a, int var);
/* a += k*b.  Fails (LimitExceeded) on overflow or too many terms. */
harp_status ib_aff_add(ib_env *env, ib_aff *a, const ib_aff *b, int64_t k);
harp_status ib_aff_add_sym(ib_env *env, ib_aff *a, const char *name, int64_t k);
/* out = floor(a / q), q >= 1, simplified (exact division, range analysis,
 * common factors, nested divisions). */
harp_status ib_aff_floordiv(ib_env *env, ib_aff *out, const ib_aff *a, int64_t q);
/* out = a mod q = a - q*floor(a/q).  *made_div: a floor division survived
 * simplification, so the caller must record the guard (ib_mod). */
harp_status ib_aff_mod(ib_env *env, ib_aff *out, const ib_aff *a, int64_t q, bool *made_div);
/* out = a with variable j replaced by vals[j] (j < nvals), simplified in env
 * (whose variables are those of vals). */
harp_status ib_aff_subst(ib_env *env, ib_aff *out, const ib_aff *a, const ib_aff *vals, int nvals);
ib_range ib_aff_range(const ib_env *env, const ib_aff *a);
int ib_aff_cmp(const ib_aff *a, const ib_aff *b);
int ib_div_cmp(const ib_div *a, const ib_div *b);
bool ib_aff_is_const(const ib_aff *a); /* no variables, symbols or divisions */
/* Number of variables with a non-zero coefficient, ignoring symbols and divs. */
int ib_aff_nvars(const ib_aff *a);
/* True if any variable (also inside a division) has a non-zero coefficient. */
bool ib_aff_uses_var(const ib_aff *a, int var);
/* Print in the Tiny index_map syntax ("2*i3 + r1 - 1", "(i0 + 3*i1) floordiv 4",
 * "(i0) mod 6" when it recognises a remainder).  vnames[j] names variable j. */
void ib_aff_print(struct ut_str *s, const ib_aff *a, const char *const *vnames);

/* ---- the side table ----------------------------------------------------- */
typedef enum ib_axis_kind { IB_ITER, IB_REDUCE, IB_BROADCAST } ib_axis_kind;
const char *ib_axis_kind_name(ib_axis_kind k);

typedef struct ib_size {
  int64_t n;       /* >= 0 when known (bound or constant); -1 otherwise */
  const char *sym; /* the Tiny symbol this size is named after, when any */
  ib_aff e;        /* the size as an expression of unbound symbols (== n when known) */
} ib_size;

typedef struct ib_axis {
  int id;          /* unique in the book; identity rules pass it on */
  char name[16];   /* "i<k>" (output axis) or "r<k>" (reduced axis) */
  ib_size size;
  ib_axis_kind kind;
} ib_axis;

/* e >= 0, or e == 0 when eq. */
typedef struct ib_cons {
  ib_aff e;
  bool eq;
} ib_cons;

/* One piece of a piecewise map: where all of cons hold, either the source
 * is read at map[0..nmap-1] or (fill) the value is the constant `value`. */
typedef struct ib_piece {
  int ncons;
  const ib_cons *cons;
  bool fill;
  double value;
  int nmap;
  const ib_aff *map;
} ib_piece;

/* A (possibly piecewise) map from a node's iteration variables to the axes of
 * `src`.  Pieces are pairwise disjoint and cover the node's domain. */
typedef struct ib_access {
  int src; /* node read: the direct source (step map) or the base (composed) */
  int nvars;
  int npieces;
  const ib_piece *pieces;
  int nvia;
  const int *via; /* composed: movement (and CAST) nodes passed, nearest first */
  bool non_affine; /* data-dependent (GATHER's data operand): no pieces */
} ib_access;

/* `e mod q` was expanded into e - q*floor(e/q); the domain must hold its
 * guard 0 <= e - q*floor(e/q) <= q-1 (checked by ib_validate). */
typedef struct ib_mod {
  ib_aff e;
  int64_t q;
} ib_mod;

typedef struct ib_info {
  int node;
  int rank;
  ib_axis *axes;
  int nred; /* REDUCE only */
  ib_axis *red;
  int nvars; /* rank + nred */
  int ncons; /* domain: box constraints, then the mod guards */
  ib_cons *cons;
  int nin;
  ib_access in[TINY_MAX_SRC];  /* step maps */
  ib_access acc[TINY_MAX_SRC]; /* composed accesses */
  int nmods;
  ib_mod *mods;
  const char *non_scop; /* why this node leaves the polyhedral model, or NULL */
} ib_info;

typedef struct ib_options {
  int max_pieces_ib; /* pieces one access may have before isl (0: default 1024) */
} ib_options;

typedef struct ib_book {
  struct ut_arena *arena;
  const tiny_graph *g;
  const tiny_symtab *syms; /* borrowed; NULL = no bindings */
  int n;                   /* == g->n */
  ib_info *info;           /* one per node */
  int next_axis_id;
  int max_pieces_ib;
} ib_book;

/* Build the book.  g must stay alive (and unchanged) as long as the book. */
harp_status ib_build(harp_error *e, const tiny_graph *g, const tiny_symtab *syms, const ib_options *opt,
                   ib_book **out);
void ib_free(ib_book *b);
static inline const ib_info *ib_get(const ib_book *b, int node) { return &b->info[node]; }
/* True for the nodes whose value is a view (absorbed into accesses). */
bool ib_is_movement(const ib_book *b, int node);

/* An environment for node's iteration variables (ranges from its axes). */
void ib_env_for(const ib_book *b, int node, harp_error *e, ib_env *env);
/* out = inner after outer: outer maps env's variables to the axes of
 * inner.src's consumer space (outer.src must be the node whose iteration
 * variables inner is written in); pieces are combined and pruned.  Used to
 * follow an access through a CAST or into a REDUCE. */
harp_status ib_compose(const ib_book *b, ib_env *env, const ib_access *outer, const ib_access *inner, ib_access *out);
/* The access of inner node `src`'s value seen from env's variables when the
 * map `outer` selects src's axes: compose(outer, chain(src)). */
harp_status ib_follow(const ib_book *b, ib_env *env, const ib_access *outer, ib_access *out);

/* MissingDivGuard: every expanded `%` must have its guard in the domain. */
harp_status ib_validate(harp_error *e, const ib_book *b);

/* Strings for dumps and tests (arena- or caller-owned as noted). */
void ib_access_print(struct ut_str *s, const ib_book *b, const ib_access *a, const char *const *vnames);
/* Names of node's iteration variables ("i0".., "r0"..). */
void ib_var_names(const ib_info *info, const char *names[IB_MAX_VARS]);
/* The book as JSON (seed 000 §12.2, docs/indexbook.md); malloc'd. */
harp_status ib_dump_json(harp_error *e, const ib_book *b, char **out);

#endif
