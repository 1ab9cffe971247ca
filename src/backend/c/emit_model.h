/* emit_model.h — the C translation unit of a compiled model. */
#ifndef HARP_EMIT_MODEL_H
#define HARP_EMIT_MODEL_H

#include "region_c.h"

/* Append the whole translation unit (prelude, kernels, the P_* ABI). */
harp_status cgen_emit_model(rc_ctx *c, const char *prefix, ut_str *out);

#endif
