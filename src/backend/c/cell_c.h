/* cell_c.h — recurrent cell regions (shape D) on the cell template (cell_c.c),
 * and the regions that concatenate their outputs (concat_c.c). */
#ifndef HARP_CELL_C_H
#define HARP_CELL_C_H

#include "region_c.h"

/* Append `static int fn(hprt_pool *pool, void *const *bufs)` for cell
 * region r when the template takes it (*handled; *pk: its packed GEMV
 * weights, shared by the steps that pack a weight alike), else nothing
 * and *why says why (the region then runs the generic loop nest). */
harp_status cc_try_cell(rc_ctx *c, int r, const char *fn, ut_str *out, bool *handled, const char **why, rc_packed *pk);

/* concat_c.c: a region that only concatenates more pieces than the map
 * template's slabs (an RNN's Y: a piece per step), as one copy per piece;
 * else nothing (*why: why, or NULL when the region is no concatenation). */
harp_status cc_try_concat(rc_ctx *c, int r, const char *fn, ut_str *out, bool *handled, const char **why);

#endif
