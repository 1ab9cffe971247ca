/* ib_int.h — internals shared by the IndexBook files (not for other layers). */
#ifndef HARP_IB_INT_H
#define HARP_IB_INT_H

#include "index/indexbook.h"

/* Drop pieces whose guard is infeasible on env's box and constraints that
 * always hold there (interval reasoning only; isl does the rest). */
harp_status ib_prune_access(const ib_book *b, ib_env *env, ib_access *a);
/* Fill info[node].acc[] from its step maps and its sources' chains. */
harp_status ib_compose_node(ib_book *b, int node, harp_error *e);

#endif
