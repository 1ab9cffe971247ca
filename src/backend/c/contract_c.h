/* contract_c.h — contraction and attention regions on the cgen templates. */
#ifndef HARP_CONTRACT_C_H
#define HARP_CONTRACT_C_H

#include "region_c.h"

/* Append `static int fn(hprt_pool *pool, void *const *bufs)` for kernel r
 * through a template when the region fits one (*handled), else nothing and
 * *why says which check declined it (NULL: not a contraction). */
hp_status cc_emit_template(rc_ctx *c, int r, const char *fn, hp_str *out, bool *handled, const char **why);

#endif
