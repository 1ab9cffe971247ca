/* harp/advanced.h — harp.h's entry points that take the layers' own
 * objects, for tools that build or rewrite the IRs themselves.
 *
 *   tiny_graph *g = tiny_graph_new();            harp/tiny.h's builder
 *   ... tiny_b_input / tiny_b_unary / tiny_mark_output ...
 *   harp_compile_graph(&err, g, &opts, &c);      then harp_model_init as usual
 *
 * This header includes the Tiny IR (harp/tiny.h); harp.h does not. */
#ifndef HARP_ADVANCED_H
#define HARP_ADVANCED_H

#include "harp.h"
#include "harp/tiny.h"

/* Compile a Tiny IR graph built with harp/tiny.h's builder, binding its
 * shape symbols from opts->syms; harp takes the graph (freed on failure
 * too). */
harp_status harp_compile_graph(harp_error *e, tiny_graph *g, const harp_options *opts, harp_compiled **out);

#endif
