/* harp/interp.h — the reference interpreter (CPU playback, the oracle).
 *
 * Evaluates a prepared (normalized, verified, fully bound) Tiny IR graph.
 * Arithmetic is fp32; fp16/bf16 values are rounded at INPUT, CAST and at the
 * outputs; REDUCE accumulates in its dtype.  Movement ops are strided views
 * where possible (PAD and VIEWs with floordiv/mod materialize). */
#ifndef HARP_INTERP_H
#define HARP_INTERP_H

#include "harp/tensor.h"
#include "harp/tiny.h"

/* inputs[k] feeds the k-th INPUT node in graph order (see tiny_inputs);
 * outputs[k] receives g->outputs[k] (allocated here; free with
 * ut_tensor_free).  Inputs must match the INPUT nodes' dtype and shape.
 * syms is the binding the graph was prepared with (symbolic pads, strides
 * and steps are read from it). */
harp_status tiny_interp(harp_error *e, const tiny_graph *g, const tiny_symtab *syms, const ut_tensor *inputs, int ninputs,
                      ut_tensor *outputs);

/* Evaluate and return the value of every node in `want` (node indices), for
 * tests and region playback.  values[k] receives node want[k]. */
harp_status tiny_interp_nodes(harp_error *e, const tiny_graph *g, const tiny_symtab *syms, const ut_tensor *inputs,
                            int ninputs, const int *want, int nwant, ut_tensor *values);

#endif
