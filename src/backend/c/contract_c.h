/* contract_c.h — contraction and attention regions on the cgen templates. */
#ifndef HARP_CONTRACT_C_H
#define HARP_CONTRACT_C_H

#include "region_c.h"

/* Append `static int fn(hprt_pool *pool, void *const *bufs)` for kernel r
 * through a template when the region fits one (*handled), else nothing and
 * *why says which check declined it (NULL: not a contraction).
 *
 * *packed_slot: -1, or the slot (in the kernel's reads) of a weight the
 * kernel takes packed once: a param buffer that is the conv's weight or the
 * GEMM's A, read as it is (HARP_NO_PREPACK=1: never).  Then out also has
 *   static long fn_wbytes(void);    bytes of the packed form (this process's ISA variant)
 *   static int fn_wpack(hprt_pool *pool, const void *w, void *wp);
 *                                   pack weight buffer w into wp (64-byte aligned); 0 = ok
 * and fn reads the packed form from bufs[nreads + nwrites], which the
 * caller (emit_model.c's model_init) packed once and never writes again. */
hp_status cc_emit_template(rc_ctx *c, int r, const char *fn, hp_str *out, bool *handled, const char **why,
                           int *packed_slot);

#endif
