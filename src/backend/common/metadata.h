/* metadata.h — the model ABI's input / output metadata (metadata.c), for
 * both backends. */
#ifndef HARP_BACKEND_METADATA_H
#define HARP_BACKEND_METADATA_H

#include "harp/function.h"
#include "util/util.h"

/* P_input_names / _dtypes / _shapes and the same for the outputs, as C
 * definitions (prefix P); names sanitized. */
void cgen_emit_metadata(ut_str *out, const char *P, const fn_function *f, const tiny_graph *g);

#endif
