/* emit_model.h — the C translation unit of a compiled model. */
#ifndef HARP_EMIT_MODEL_H
#define HARP_EMIT_MODEL_H

#include "region_c.h"

/* Append the whole translation unit (prelude, kernels, the P_* ABI). */
harp_status cgen_emit_model(rc_ctx *c, const char *prefix, ut_str *out);
/* The input / output metadata arrays of the model ABI (prefix P), shared
 * with the CUDA backend's host loader. */
void cgen_emit_metadata(ut_str *out, const char *P, const fn_function *f, const tiny_graph *g);

#endif
