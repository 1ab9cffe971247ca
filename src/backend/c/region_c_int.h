/* region_c_int.h — what region_c.c (statements, the region), region_loops.c
 * (printing the loop tree: simd pragmas, next-row prefetch) and
 * region_coalesce.c (merging contiguous loops) share. */
#ifndef HARP_REGION_C_INT_H
#define HARP_REGION_C_INT_H

#include "harp/poly_ast.h"
#include "harp/polycore.h"
#include "harp/region.h"
#include "region_c.h"

typedef enum store_kind { ST_CONST, ST_BUF, ST_LOCAL } store_kind;

typedef struct value {
  store_kind kind;
  int slot;       /* ST_BUF: index in bufs[] */
  tiny_dtype storage; /* ST_BUF: the buffer's dtype (a widened temp is fp32) */
  int64_t lsize;  /* ST_LOCAL: elements (1: a scalar) */
} value;

/* Prefetching the next row (next_row_prefetch): the loop over rows, the
 * pass that issues the prefetches, and what they fetch. */
#define PF_MAX_READS 4
typedef struct pf_plan {
  const poly_ast *outer, *first, *target;
  int nread;
  const tiny_node *node[PF_MAX_READS];
  const poly_ast_access *acc[PF_MAX_READS];
  int slot[PF_MAX_READS];
} pf_plan;

typedef struct emit {
  rc_ctx *c;
  const rg_region *R;
  const fn_kernel *K;
  ut_str *o;
  int prefix;
  poly_stmt_spec *stmts; /* 3 per block at most (a reduction's INIT, BODY, FINAL) */
  int nstmts;
  value *val; /* per node */
  pf_plan pf;
  const poly_ast *simd_outer; /* the loop carrying an outer `omp simd` being printed, or NULL */
} emit;

/* Names and references shared by both files (region_c.c): a local's C
 * name, a reduction's accumulator and NaN flag, a row-major offset. */
void rc_acc_ref(emit *m, const poly_ast *u, const poly_block_info *b, ut_str *o);
void rc_local_name(ut_str *o, const tiny_node *n, const char *prefix, int node);
bool rc_nan_flag(const emit *m, const poly_block_info *b);
void rc_flag_name(ut_str *o, const emit *m, const poly_block_info *b);
void rc_linear(ut_str *o, const tiny_shape *shape, const char *const *index, int from);
/* One PA_USER node as C (region_c.c). */
harp_status rc_stmt_body(emit *m, const poly_ast *u);
/* The loop tree from depth d (region_loops.c). */
harp_status rc_print_ast(emit *m, const poly_ast *a, int d);
/* Text helpers of region_loops.c: whether text holds tok as a whole
 * identifier; text with each whole-identifier from[i] replaced by (to[i])
 * (malloc'd, NULL when out of memory); the trips of a loop
 * `for (v = A; v <= B; v += 1)` with constant A and B, else -1. */
bool rc_has_token(const char *text, const char *tok);
char *rc_subst_tokens(const char *text, const char *const *from, const char *const *to, int n);
long rc_const_trips(const poly_ast *a);
/* Merge nested loops that every access walks as one contiguous run
 * (region_coalesce.c); CPU only. */
harp_status rc_coalesce(emit *m, poly_ast *a);

#endif
