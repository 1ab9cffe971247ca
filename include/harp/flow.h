/* harp/flow.h — a model with run-time control flow as a host program.
 *
 * harp compiles one static graph per model.  An ONNX If whose condition, a
 * Loop whose trip count or condition, or a Scan whose length is known only
 * at run time cannot be one graph: the importer (src/frontend/onnx_flow.c)
 * then cuts the model into segments — ordinary harp graphs, each compiled
 * by the chosen backend — and host steps (If, Loop, Scan) that move
 * tensors between them through a table of slots.  A model without run-time
 * control flow has no host program (onnx_model.flow is NULL) and
 * compiles exactly as before.
 *
 *   block  := step*                       (in: slots it reads first; out: slots it leaves)
 *   step   := SEG  seg                     a compiled segment: its inputs' slots -> its outputs' slots
 *           | IF   cond then else          run one block; its outputs become the node's
 *           | LOOP M cond init body        body.in = [iteration, cond, carried...],
 *                                          body.out = [cond, carried..., scan elements...]
 *           | SCAN init inputs body        body.in = [states..., one slice per scan input],
 *                                          body.out = [states..., scan elements...]
 *           | FAIL code message            a run-time If's branch that does not import for the
 *                                          shapes given (an untaken 8 kHz path fed 16 kHz
 *                                          frames): the run fails with the import's error
 *                                          only if the host takes it
 *           | OP op attrs in out           an op whose output's shape depends on the values
 *                                          (NonMaxSuppression, NonZero, TopK with a K known
 *                                          at run time, Unique, Compress, Range, Slice by
 *                                          run-time bounds), or one that samples at places
 *                                          the values give (RoiAlign, GridSample),
 *                                          computed by the host on the
 *                                          tensors the segments before it left; the segments
 *                                          after it are compiled for the shapes it gives
 *
 * Slots hold one tensor each: a value some segment computes, a model input,
 * a constant fixed at import (konst), or a model weight (weight >= 0).
 * Segments are compiled when first run, for the shapes their inputs have
 * then, and kept per shape (docs/onnx.md, "Control flow").
 *
 * The executor (src/runtime/flow_exec.c) runs a host program over any
 * backend of harp.h; `harp run`, `harp bench` and harp_compile_file use it.
 * Needs: the frontend (segments are programs).  Gives: flow_program (built by the ONNX importer), the executor. */
#ifndef HARP_FLOW_H
#define HARP_FLOW_H

#include <stdbool.h>
#include <stdint.h>

#include "harp/frontend.h"
#include "harp/tensor.h"

typedef enum flow_kind { FLOW_SEG, FLOW_IF, FLOW_LOOP, FLOW_SCAN, FLOW_FAIL, FLOW_OP } flow_kind;

/* The ops an OP step computes on the host (src/runtime/flow_ops.c), as
 * ONNX defines them and onnxruntime's CPU kernels compute them; int64
 * results are int32, as everywhere in harp.  X(ENUM, "ONNX name"). */
#define FLOW_OPS(X)                      \
  X(NMS, "NonMaxSuppression")            \
  X(NONZERO, "NonZero")                  \
  X(TOPK, "TopK")                        \
  X(UNIQUE, "Unique")                    \
  X(COMPRESS, "Compress")                \
  X(RANGE, "Range")                      \
  X(SLICE, "Slice")                      \
  X(ROIALIGN, "RoiAlign")                \
  X(GRIDSAMPLE, "GridSample")            \
  X(SCATTER_ELEMENTS, "ScatterElements") \
  X(SCATTER_ND, "ScatterND")
typedef enum flow_op {
#define FLOW_X_FOP(e, n) FLOW_FOP_##e,
  FLOW_OPS(FLOW_X_FOP)
#undef FLOW_X_FOP
  FLOW_FOP_COUNT
} flow_op;
const char *flow_op_name(flow_op op);
/* An OP step's integer and float attributes, at most (of each). */
#define FLOW_MAX_ATTR 6

typedef struct flow_slot {
  char *name;                  /* the ONNX value (main's inputs and outputs: the harp id) */
  tiny_dtype dtype;
  int rank;
  int64_t dims[TINY_MAX_RANK]; /* -1: known at run time */
  char *sym[TINY_MAX_RANK];    /* main's inputs and outputs: the shape variable a dim is (NULL: none) */
  bool has_konst;
  ut_tensor konst;             /* a constant fixed at import */
  int weight;                  /* >= 0: the model's weight of that index */
} flow_slot;

/* A segment: a program whose "main" graph has one INPUT per slot it reads
 * (in_id[k] reads in[k]; the model's weights are INPUTs named by their ids)
 * and one output per slot it writes (out_id[k] -> out[k]). */
typedef struct flow_seg {
  hg_program *program;
  int nin, *in;
  char **in_id;
  int nout, *out;
  char **out_id;
} flow_seg;

typedef struct flow_block {
  int nsteps, *steps; /* indices into flow_program.steps, in order */
  int nin, *in;       /* LOOP / SCAN bodies: the slots of the body's inputs */
  int nout, *out;     /* the slots of the block's outputs */
  char **in_name, **out_name; /* main: the harp ids of the model's inputs and outputs (else NULL) */
} flow_block;

typedef struct flow_step {
  flow_kind kind;
  char *where;          /* the node, for messages: node 3 "loop" (Loop); FAIL: the whole message */
  harp_status code;     /* FAIL: the import's error code */
  int seg;              /* SEG */
  int body[2];          /* IF: the then and else blocks; LOOP, SCAN: body[0] */
  int nin, *in;         /* IF: cond; LOOP: M, cond (-1: absent), initial values; SCAN: states, scan inputs */
  int nout, *out;       /* the node's outputs (-1: not used) */
  int nstate;           /* LOOP: carried values; SCAN: states */
  int64_t *in_axis;     /* SCAN: per scan input, its axis (>= 0) */
  bool *in_rev;         /* SCAN: per scan input, iterated backwards */
  int64_t *out_axis;    /* LOOP, SCAN: per scan output, the axis the elements stack along */
  bool *out_rev;        /* per scan output: the last iteration's element first */
  flow_op op;           /* OP: the op; in: its inputs (-1: absent), out: its outputs (-1: unused) */
  int64_t attr[FLOW_MAX_ATTR]; /* OP: its attributes (flow_ops.c says which) */
  double fattr[FLOW_MAX_ATTR];
} flow_step;

typedef struct flow_program {
  int nslots, nsegs, nsteps, nblocks;
  flow_slot *slots;
  flow_seg *segs;
  flow_step *steps;
  flow_block *blocks;
  int main; /* the model's block: in = its inputs, out = its outputs */
  int slotcap, segcap, stepcap, blockcap;
} flow_program;

void flow_free(flow_program *f);
/* One line per step, nested ("seg 0: 3 in, 2 out", "If node 2 ..."): `--dump flow`. */
char *flow_describe(const flow_program *f);

/* ---- the executor -------------------------------------------------------------------- */
/* A Loop that has run this many iterations without its condition turning
 * false stops with LimitExceeded (harp_options.loop_limit, --loop-limit). */
#define FLOW_LOOP_LIMIT 1000000
/* Compiled shapes kept per segment (least recently used dropped first). */
#define FLOW_MAX_VARIANTS 16
/* The elements a Loop's scan outputs may gather, all together. */
#define FLOW_MAX_SCAN_BYTES ((int64_t)1 << 33)

typedef struct flow_exec flow_exec;
struct harp_options; /* harp.h */

/* An executor of f over the backend and options of o (NULL: the CPU
 * backend), with the model's weights (borrowed: they must outlive it).
 * Nothing is compiled until the first run. */
harp_status flow_exec_new(harp_error *e, const flow_program *f, int nweights, char *const *weight_ids, const ut_tensor *weights,
                           const struct harp_options *o, flow_exec **out);
/* One run: in[] are the model's inputs in main's order (f->blocks[f->main].in);
 * out[] receives its outputs, allocated here (the caller frees them).  On
 * failure out[] is left empty. */
harp_status flow_exec_run(harp_error *e, flow_exec *x, const ut_tensor *in, int nin, ut_tensor *out);
void flow_exec_free(flow_exec *x);

typedef struct flow_stats {
  int compiles;      /* segment variants compiled */
  int evictions;     /* variants dropped for a newer shape */
  long seg_runs;     /* segment runs */
  long iterations;   /* Loop and Scan iterations */
  double compile_ms; /* time spent compiling */
} flow_stats;
void flow_exec_stats(const flow_exec *x, flow_stats *s);

#endif
