/* harp/onnx.h — the ONNX frontend: a .onnx file (protobuf) as a frontend
 * program plus the weights its initializers hold.
 *
 *   hp_onnx_model m;
 *   if (hp_onnx_load_file(&e, "resnet18.onnx", &m)) ...   // e says why
 *   hp_lower(&e, m.program, &g, &defaults);                 // as for the DSL
 *   ... m.weights[i] is the data of the INPUT whose tensor_id is m.weight_ids[i]
 *   hp_onnx_model_free(&m);
 *
 * The graph is built with the frontend builder (harp/frontend.h), so an ONNX
 * model reaches the same lowering and kernels as its harp DSL twin.
 *
 * Names.  ONNX names are arbitrary strings; every name that becomes a harp
 * name (graph inputs, initializers, outputs, shape variables) is mapped to an
 * identifier: each character outside [A-Za-z0-9_] becomes '_', a leading
 * digit (or an empty name) gets a '_' in front, names are cut at 100
 * characters, and a name already taken gets "_2", "_3", ... in the order
 * graph inputs, initializers, outputs.  "/layer1/0/Relu_output_0" is
 * "_layer1_0_Relu_output_0"; "input.1" is "input_1".  The mapping is
 * deterministic; `names` lists it for the inputs and weights, and messages
 * quote the original names.
 *
 * Weights.  Every initializer a node reads as a tensor becomes a parameter
 * (an INPUT) whose data is in `weights`; the CLI marks them storage "param".
 * Integer initializers and Constant outputs that feed shape-like inputs
 * (Reshape's shape, Slice's starts/ends/axes/steps, Unsqueeze/Squeeze/Reduce
 * axes, Pad's pads, Clip's bounds, ...) are folded into attributes, as are
 * Shape -> Gather -> Unsqueeze -> Concat chains (also on symbolic dims);
 * scalar float constants become literals.
 *
 * Inputs.  A graph input's static dims are kept; a dim_param ("batch")
 * becomes a shape variable of that (mapped) name, bound from the input's
 * tensor like a DSL shape variable, default 1 (as graph<B=1>); a dim with
 * neither is a fresh variable "<input>_d<i>".  int64 inputs are int32 in harp (feed '<i4' or '<i8' arrays:
 * hp_npy_read range-checks the latter).
 *
 * External data: an initializer stored outside the .onnx file is read from
 * the file its "location" names, relative to the model's directory (from
 * "offset" for "length" bytes); a location that leads outside that
 * directory is InvalidArgument, a missing file IoError, a model loaded from
 * memory with external data Unsupported.
 *
 * Errors: a missing file (IoError), bytes that are not an ONNX model
 * (ParseError), an unknown domain or an opset outside
 * [6, 28] (Unsupported), an op harp does not have (UnknownOp), a bad
 * attribute (InvalidArgument), shapes that do not fit, absurd sizes
 * (LimitExceeded), initializer data whose length disagrees with its dims
 * (InvalidArgument).  A node's errors name it: "node 12 \"/conv1/Conv\"
 * (Conv): ...". */
#ifndef HARP_ONNX_H
#define HARP_ONNX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "harp/error.h"
#include "harp/frontend.h"
#include "harp/tensor.h"

typedef struct hp_onnx_name {
  char *onnx; /* the name in the file */
  char *id;   /* the harp identifier it maps to */
} hp_onnx_name;

typedef struct hp_onnx_model {
  hp_program *program; /* "main" */
  int nweights;
  char **weight_ids;   /* the INPUT tensor_ids that are weights */
  hp_tensor *weights;  /* their data, same order */
  int nnames;
  hp_onnx_name *names; /* graph inputs and weights: ONNX name -> harp id */
  int64_t opset;       /* of the default domain */
  /* Run-time control flow (only with hp_onnx_opts.host_flow): the model as
   * a host program of segments and If / Loop / Scan steps (harp/flow.h);
   * program is then NULL (the segments hold the graphs).  NULL when every
   * If, Loop and Scan folded or unrolled at import. */
  struct hp_flow *flow;
} hp_onnx_model;

/* Graph inputs fixed at import: each named input becomes an initializer
 * holding the given data, so the importer knows its values (a Reshape's
 * shape, Slice's starts or a Pad's pads fed as graph inputs fold as if they
 * were initializers; a float input is a weight).  The data must match the
 * input's element type (int64 and int32 inputs take i32 tensors, float fp32,
 * float16 fp16, bool bool) and its static dims.  A name that is not a graph
 * input, or one an initializer already holds, is left alone: `used[i]` says
 * which were taken (the caller may pass NULL).  The data is `fixed[i]`, or,
 * with `fixed` NULL, what read(e, read_ctx, i, &t) gives, asked only for a
 * name that is a graph input (the importer frees t). */
typedef struct hp_onnx_opts {
  int nfixed;
  const char *const *fixed_names; /* ONNX names */
  const hp_tensor *fixed;
  hp_status (*read)(hp_error *e, void *read_ctx, int i, hp_tensor *out);
  void *read_ctx;
  bool *used;
  /* Accept run-time control flow (an If whose condition, a Loop whose trip
   * count or condition, a Scan whose length is known only at run time): the
   * result is then a host program (hp_onnx_model.flow).  Without it such a
   * node is Unsupported, naming the node. */
  bool host_flow;
} hp_onnx_opts;

/* Parse and import path.  On failure *out is empty (nothing to free). */
hp_status hp_onnx_load_file(hp_error *e, const char *path, hp_onnx_model *out);
/* The same from memory; name is used in messages. */
hp_status hp_onnx_load_buffer(hp_error *e, const void *data, size_t len, const char *name, hp_onnx_model *out);
/* The same with options (NULL: none). */
hp_status hp_onnx_load_file_opts(hp_error *e, const char *path, const hp_onnx_opts *o, hp_onnx_model *out);
hp_status hp_onnx_load_buffer_opts(hp_error *e, const void *data, size_t len, const char *name, const hp_onnx_opts *o,
                                   hp_onnx_model *out);
void hp_onnx_model_free(hp_onnx_model *m);
/* The harp id of an ONNX input or weight name (or of an id itself); NULL if none. */
const char *hp_onnx_id_of(const hp_onnx_model *m, const char *onnx_name);

#define HP_ONNX_MIN_OPSET 6
#define HP_ONNX_MAX_OPSET 28

#endif
