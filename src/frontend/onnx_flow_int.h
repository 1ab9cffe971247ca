/* onnx_flow_int.h — what onnx_flow.c (scopes, cuts, If) and
 * onnx_flow_loop.c (Loop, Scan) share.  Not public. */
#ifndef HARP_ONNX_FLOW_INT_H
#define HARP_ONNX_FLOW_INT_H

#include "flow_int.h"
#include "onnx_int.h"

/* A Loop of a constant trip count up to OXF_UNROLL_MAX, or a Scan of a
 * known length up to it, is unrolled at import when the copies hold at most
 * OXF_UNROLL_NODES nodes; a longer one runs as a host loop. */
#define OXF_UNROLL_MAX 32
#define OXF_UNROLL_NODES 4096
/* Subgraphs inside subgraphs, at most. */
#define OXF_MAX_NESTING 32

/* The host program being built; one per import, shared by every scope. */
struct ox_flowst {
  bool allowed;       /* onnx_opts.host_flow */
  flow_program *f;    /* NULL until the first cut */
  int seg;            /* the segment c->g is (-1: none yet) */
  int block;          /* the block new steps go to */
  fe_shape *shape;    /* per slot: its dims at import */
  int shapecap;
  hg_val *inv;        /* per input of the current segment: its value there */
  ut_strmap wmemo;    /* weight id -> its value in the current segment */
  ut_strmap symmemo;  /* a dim's text -> index in symdims: its shape variable here */
  const fe_dim **symdims;
  int nsym;
  int depth;          /* subgraph scopes open */
  ox_val **pins;      /* values outside any scope that cuts must carry (an unrolled loop's results so far) */
  int npins;
  ut_strmap rtsyms;   /* the shape variables of dims known at run time only (a host op's outputs, ...) */
  ut_strmap wanted;   /* graph inputs that, fixed at import, would spare a host step: told
                         (onnx_opts.needs_data) only if the import fails */
};
typedef struct ox_flowst ox_flowst;

/* c->fl, made on first use. */
harp_status oxf_prepare(ox_ctx *c);
/* A host step is needed (why: "the condition is known only at run time"): Unsupported unless
 * the importer may build a host program; starts it at the first one. */
harp_status oxf_ensure(ox_ctx *c, const char *why);
/* Slots: a new one of shape s; x's (a weight's, or x exported from the
 * current segment); a constant's for the host (host_in: konst for a
 * constant, else oxf_slot_of). */
int oxf_new_slot(ox_ctx *c, const char *name, tiny_dtype dt, const fe_shape *s);
int oxf_slot_of(ox_ctx *c, ox_val *x);
int oxf_konst_slot(ox_ctx *c, ox_val *x);
int oxf_host_in(ox_ctx *c, ox_val *x);
/* x is known only at run time where a constant would spare a host step
 * (a Loop's trip count, TopK's K): the graph inputs it is computed from
 * are named to onnx_opts.needs_data if the import fails (harp run then
 * retries with them fixed), not otherwise. */
void oxf_wanted(ox_ctx *c, const ox_val *x);
/* Run-time shape variables: whether sym is one; oxf_need_sym imports into
 * the current segment a slot whose shape binds it. */
bool oxf_sym_runtime(const ox_ctx *c, const char *sym);
harp_status oxf_need_sym(ox_ctx *c, const char *sym);
/* A shape variable for axis `axis` of a value known at run time only. */
const fe_dim *oxf_fresh_dim(ox_ctx *c, const char *base, int axis);
/* A step at the end of the current block. */
int oxf_add_step(ox_ctx *c, flow_kind kind, const char *where);
/* The cut around a host step at node i: oxf_export(c, i) before it, then
 * oxf_enter(c, i + 1) after it (a new segment importing what is live). */
harp_status oxf_export(ox_ctx *c, size_t from);
harp_status oxf_enter(ox_ctx *c, size_t from);
/* Values x[0..n) a cut carries as if they were read after it (oxf_unpin:
 * the last n pinned no longer). */
harp_status oxf_pin(ox_ctx *c, ox_val *x, int n);
void oxf_unpin(ox_ctx *c, int n);

/* Scopes: a subgraph gp of c's current node (label: its attribute name),
 * inline (continuing c's segment) or not; closing hands the shared fields
 * back to c and frees the scope's values. */
harp_status oxf_scope_open(ox_ctx *c, Onnx__GraphProto *gp, bool inl, const char *label, ox_ctx *s);
void oxf_scope_close(ox_ctx *c, ox_ctx *s);
/* The current node for messages: node 3 "name" (Loop). */
void oxf_node_where(const ox_ctx *c, char *out, int cap);
/* Attribute `name` of the current node as a graph (required). */
Onnx__GraphProto *oxf_graph_attr(ox_ctx *c, const char *name);
/* y := x (constants stay constants; y keeps its name). */
harp_status oxf_copy(ox_ctx *c, ox_val *y, const ox_val *x);
/* The value of a one-element constant condition (false: not a constant;
 * *bad with an error: not one element). */
bool oxf_const_truth(ox_ctx *c, const ox_val *x, bool *truth, bool *bad);
/* Output k of the current node as the value x (a copy: constants stay
 * constants); nothing for an unused output. */
harp_status oxf_def_alias(ox_ctx *c, int k, const ox_val *x);
/* The value named output k of subgraph gp, resolved in scope s. */
ox_val *oxf_graph_out(ox_ctx *s, const Onnx__GraphProto *gp, int k);
/* A host block: subgraph gp in a scope of its own whose inputs are the
 * slots in[0..nin) (ONNX types oty[]); the slots of its outputs are
 * appended to the block's out.  The block is c->fl->block. */
harp_status oxf_host_block(ox_ctx *c, Onnx__GraphProto *gp, const char *label, const int *in, const int *oty, int nin);
/* A scalar of the ONNX type oty known at import (the iteration number of
 * an unrolled body, its condition). */
harp_status oxf_def_scalar(ox_ctx *s, const char *name, int oty, int64_t v);

/* Both branches g[] (label[]: their names in messages) compiled as blocks
 * of a host If step on cond; the node's outputs are the step's. */
harp_status oxf_if_host(ox_ctx *c, ox_val *cond, Onnx__GraphProto *g[2], const char *const label[2]);

/* onnx_flow_ops.c: the current node as host op `op` (why: for the error
 * when host steps are not allowed) with attributes attr[0..nattr): its
 * inputs read from slots, its nout outputs new slots of ONNX types oty[]
 * and shapes shp[] (a NULL dim: known at run time only; the j-th NULL of
 * every output is one size, as TopK's values and indices share theirs). */
harp_status oxf_host_op(ox_ctx *c, flow_op op, const char *why, const int64_t *attr, int nattr, int nout, const int *oty,
                      const fe_shape *shp);
/* The same with float attributes fattr[0..nf) too. */
harp_status oxf_host_op_f(ox_ctx *c, flow_op op, const char *why, const int64_t *attr, int nattr, const double *fattr, int nf, int nout,
                        const int *oty, const fe_shape *shp);

/* onnx_flow_loop.c: x := a scalar constant (a holder outside any scope). */
harp_status oxf_def_scalar_holder(ox_ctx *c, ox_val *x, int oty, int64_t v);
/* onnx_flow_loop.c */
harp_status oxf_op_loop(ox_ctx *c);
harp_status oxf_op_scan(ox_ctx *c);

#endif
