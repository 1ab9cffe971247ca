/* harp/poly_ast.h — loop nests from isl's AST generator, without isl types.
 *
 * A backend names the statements of a region (Poly-View blocks, and for a
 * reduction its INIT and FINAL steps), a shared outer prefix, and gets back a
 * tree of loops, guards and statement instances whose expressions are C text
 * over 64-bit integer iterators.  For every statement instance the tree holds
 * the statement's own variables and, for each of its accesses, the tensor
 * indices and (when the access reads padding somewhere) the guard under which
 * the real element is read — all as C expressions computed by isl at that
 * point of the schedule (isl_ast_build_access_from_pw_multi_aff, as PPCG does).
 *
 * Schedule: statement s of block b with variables v0..v(n-1) runs at
 *   [v0 .. v(p-1), g, v(p) .. v(n-1), 0 .., pos]
 * (g = s's group, or s itself) so the first p variables are shared loops (the
 * caller guarantees every dependence among the statements is the identity on
 * them), inside one prefix point the groups run in order, each with its own
 * loops, and a group's statements run in `pos` order at each point.
 *
 * C helpers used by the expressions (the backend must define them):
 *   hp_floord(a, b)   floor(a / b), b > 0      hp_min(a, b), hp_max(a, b)
 */
#ifndef HARP_POLY_AST_H
#define HARP_POLY_AST_H

#include <stdbool.h>
#include <stdint.h>

#include "harp/error.h"
#include "harp/poly.h"

typedef enum poly_stmt_role {
  POLY_STMT_BODY,  /* the block over its whole domain (a reduction: one update per point) */
  POLY_STMT_INIT,  /* a reduction's accumulator init, over its output variables */
  POLY_STMT_FINAL  /* a reduction's result store, over its output variables */
} poly_stmt_role;

typedef struct poly_stmt_spec {
  int block;
  poly_stmt_role role;
  /* Statements of one group share their loops: the schedule is
   * [prefix, group, rest, pos] instead of [prefix, k, rest].  The caller
   * guarantees a group's statements have the same rest extents and read each
   * other pointwise.  group < 0: a group of its own (k). */
  int group, pos;
  /* stage[a] = k > 0: read contraction operand a at its stage k (the CAST
   * poly_access_info.stage[k - 1], in its coordinates, where a region reads
   * it materialized); 0: at the base tensor. */
  int stage[POLY_MAX_ACC];
} poly_stmt_spec;

typedef struct poly_ast_opts {
  int prefix;       /* shared outer variables p (<= every statement's output variables) */
  bool chunk_outer; /* restrict the first shared variable to [hp_lo, hp_hi): C names hp_lo, hp_hi */
  int fix_outer;    /* fix the first fix_outer (<= p) shared variables to the parameters
                       hp_p0, hp_p1, ...: the nest of one point (a GPU thread's) */
  const int64_t *fix_extent; /* their extents: 0 <= hp_pi < fix_extent[i] (lets isl drop guards) */
  const int *fix_sym;        /* NULL, or per fixed variable: symbol index + 1 when its extent is
                                that symbol (0 <= hp_pi < hp_sv<fix_sym[i] - 1>), else 0 */
  int chunk_var;             /* which shared variable chunk_outer restricts (< prefix; the ones
                                before it should have extent 1, so it is the outermost loop) */
  int64_t chunk_extent;      /* > 0: hp_hi <= chunk_extent as well (the caller's chunks never pass the
                                loop's end), so the loop's bound is hp_hi alone and the extent appears
                                nowhere in the code: a ShapeSet object passes it at run time */
  /* A ShapeSet object's symbols (astgen_sym.c; nsyms 0: every size a
   * constant).  A statement of a box block loops over an axis whose size is
   * symbol i up to the C parameter hp_sv<i> (1 <= hp_sv<i> <= sym_hi[i]),
   * and its single-piece accesses (a padded one: its real elements where the
   * index lies in the tensor's box of such parameters) are built on that
   * domain; each is checked against this graph's own at sym_now. */
  int nsyms;
  const char *const *syms;  /* the symbols' names (tiny_dim.sym) */
  const int64_t *sym_now;   /* their values in this graph */
  const int64_t *sym_hi;    /* the largest values a run takes */
  int chunk_sym;            /* > 0 (with chunk_extent): hp_hi <= hp_sv<chunk_sym - 1> too */
} poly_ast_opts;

typedef enum poly_ast_kind { PA_FOR, PA_IF, PA_BLOCK, PA_USER } poly_ast_kind;

#define POLY_AST_MAX_ACC POLY_MAX_ACC
#define POLY_AST_MAX_ALT 7 /* POLY_MAX_FILLS - 1 */

typedef struct poly_ast_access {
  int rank;
  const char *index[TINY_MAX_RANK]; /* C expression per tensor axis */
  /* NULL: index[] runs over the tensor's own shape.  A ShapeSet object's
   * read through a RESHAPE that splits an axis by a symbol's size
   * (poly_reshape_view): the RESHAPE's output shape, index[] a point of it
   * (the same elements row-major, rank that shape's) */
  const tiny_shape *shape;
  const char *guard;                /* C condition for a real element; NULL: always */
  double fill;                      /* value where the guard fails (padding) */
  /* Pads of other values on the way (a concat of a padded tensor): where
   * alt_guard[q] holds, the read yields alt_fill[q] instead of fill. */
  int nalt;
  const char *alt_guard[POLY_AST_MAX_ALT];
  double alt_fill[POLY_AST_MAX_ALT];
} poly_ast_access;

typedef struct poly_ast poly_ast;
struct poly_ast {
  poly_ast_kind kind;
  /* PA_FOR: for (long iter = init; cond; iter += inc) body */
  const char *iter, *init, *cond, *inc;
  int depth; /* loop depth from the top (0 = outermost) */
  /* PA_IF: if (cond) then_ else else_ (else_ may be NULL) */
  poly_ast *then_, *else_;
  /* PA_FOR body / PA_BLOCK children */
  poly_ast *body;
  poly_ast **children;
  int nchildren;
  /* PA_USER: one statement instance */
  int stmt; /* index into the caller's statement list */
  int nvars;
  const char *vars[POLY_MAX_VARS]; /* the statement's variables as C expressions */
  int naccess;
  poly_ast_access access[POLY_AST_MAX_ACC]; /* the block's accesses (reads, then the write) */
};

/* Build the loop nest.  The tree and its strings live in `arena`. */
harp_status poly_ast_gen(harp_error *e, const poly_view *pv, const poly_stmt_spec *stmts, int nstmts,
                       const poly_ast_opts *opts, struct ut_arena *arena, poly_ast **out);

#endif
