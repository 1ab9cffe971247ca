/* flow_ops.h — the host ops of a host program's OP steps (flow_ops.c),
 * for the executor (flow_exec.c).  Not public. */
#ifndef HARP_FLOW_OPS_H
#define HARP_FLOW_OPS_H

#include "harp/flow.h"

/* Step sp's op on in[0..sp->nin) (NULL: an absent optional input) into
 * out[0..sp->nout) (allocated here; an output whose slot is -1 may be left
 * empty).  Bad values (a condition longer than its axis, a step of 0, ...)
 * are errors naming the step's node. */
harp_status flow_op_run(harp_error *e, const flow_step *sp, const ut_tensor *const *in, ut_tensor *out);

#endif
