/* contract_c.h — contraction and attention regions on the cgen templates. */
#ifndef HARP_CONTRACT_C_H
#define HARP_CONTRACT_C_H

#include "region_c.h"

/* Append `static int fn(hprt_pool *pool, void *const *bufs)` for kernel r
 * through a template when the region fits one (*handled), else nothing and
 * *why says which check declined it (NULL: not a contraction).
 *
 * *pk (region_c.h): the weights the kernel takes packed once: param buffers
 * that are a conv's weight or a GEMM's A (else B) read as they are, a
 * recurrent cell's GEMV weights (HARP_NO_PREPACK=1: never).  Then out also
 * has, for the packed form i (suffix "" for 0, "1" for 1):
 *   static long fn_wbytes<i>(void);    bytes of the packed form (this process's ISA variant)
 *   static int fn_wpack<i>(hprt_pool *pool, const void *w, void *wp);
 *                                   pack weight buffer w into wp (64-byte aligned); 0 = ok
 * and fn reads the packed form i from bufs[nreads + nwrites + i], which the
 * caller (emit_model.c's model_init) packed once and never writes again. */
harp_status cc_emit_template(rc_ctx *c, int r, const char *fn, ut_str *out, bool *handled, const char **why, rc_packed *pk);

#endif
