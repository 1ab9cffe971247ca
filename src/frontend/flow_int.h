/* flow_int.h — building a host program (harp/flow.h): what onnx_flow*.c
 * use to add slots, segments, steps and blocks.  Not public. */
#ifndef HARP_FLOW_INT_H
#define HARP_FLOW_INT_H

#include "harp/flow.h"

/* Each returns the new element's index, or -1 when out of memory.  The
 * arrays grow: pointers into them are good until the next add. */
int flow_add_slot(flow_program *f, const char *name, tiny_dtype dt, int rank);
int flow_add_seg(flow_program *f, hg_program *p); /* takes p (freed on failure) */
int flow_add_step(flow_program *f, flow_kind kind, const char *where);
int flow_add_block(flow_program *f);
/* Appends v to the int array *a of *n elements; false when out of memory. */
bool flow_push(int **a, int *n, int v);
/* Appends s to the strings *a of n elements (n is the count before); false when out of memory. */
bool flow_push_str(char ***a, int n, const char *s);
/* Drops what was added after the counts given (a body imported again). */
void flow_truncate(flow_program *f, int nslots, int nsegs, int nsteps, int nblocks);

#endif
