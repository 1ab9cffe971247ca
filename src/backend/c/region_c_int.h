/* region_c_int.h — what region_c.c (the generic loops of a region),
 * region_loops.c (printing the loop tree: simd pragmas, next-row prefetch)
 * and region_coalesce.c (merging contiguous loops) share, over the loop
 * nest's state (src/backend/common/nest_int.h). */
#ifndef HARP_REGION_C_INT_H
#define HARP_REGION_C_INT_H

#include "backend/common/nest_int.h"
#include "region_c.h"

/* The loop tree from depth d (region_loops.c). */
harp_status rc_print_ast(emit *m, const poly_ast *a, int d);
/* Text helpers of region_loops.c: text with each whole-identifier from[i]
 * replaced by (to[i]) (malloc'd, NULL when out of memory); the trips of a
 * loop `for (v = A; v <= B; v += 1)` with constant A and B, else -1. */
char *rc_subst_tokens(const char *text, const char *const *from, const char *const *to, int n);
long rc_const_trips(const poly_ast *a);
/* The bound X of a loop `for (v = 0; v < X; v += 1)` (or `v <= X - 1`) as
 * text, malloc'd, else NULL (region_loops.c). */
char *rc_zero_bound(const poly_ast *a);
/* Merge nested loops that every access walks as one contiguous run
 * (region_coalesce.c); CPU only. */
harp_status rc_coalesce(emit *m, poly_ast *a);

#endif
