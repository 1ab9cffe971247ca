/* sgen_quick.h — a ShapeSet object's check of a new binding without
 * preparing the model again: the graph the object runs, re-inferred and
 * verified at the binding (sgen_quick.c; sgen.c decides where it serves).
 * Needs: harp/sgen.h, tiny.  Gives: sgq_*. */
#ifndef HARP_SGEN_QUICK_H
#define HARP_SGEN_QUICK_H

#include "harp/sgen.h"
#include "harp/tiny.h"

/* Whether a and b are the same graph up to sizes (ops, sources, dtypes,
 * ranks, outputs); *bigger: some size of a is larger than b's. */
bool sgq_same_graph(const tiny_graph *a, const tiny_graph *b, bool *bigger);
/* Whether a and b (sgq_same_graph) have the same size at every node. */
bool sgq_same_sizes(const tiny_graph *a, const tiny_graph *b);
/* The quick check of binding vals (per symbol of syms[0..nsyms); a
 * follows[i] symbol's value comes from its definition) on gfast, a shadow
 * (tiny_graph_shadow) of ghi, the graph the object runs, prepared at the
 * box's upper corner: the derived symbols bound at vals, every shape
 * inferred and every node verified there (tiny_verify: each shape rule,
 * each reshape's sizes); *bigger: some size is larger than ghi's.  gfast
 * then holds the binding's shapes; an error says what vals breaks. */
harp_status sgq_check(harp_error *e, const tiny_graph *ghi, tiny_graph *gfast, const rt_sgen_sym *syms, const bool *follows,
                      int nsyms, const int64_t *vals, bool *bigger);

#endif
