/* harp/onnx.h — the ONNX frontend: a .onnx file (protobuf) as a frontend
 * program plus the weights its initializers hold.
 *
 *   onnx_model m;
 *   if (onnx_load_file(&e, "resnet18.onnx", &m)) ...      // e says why
 *   hg_lower(&e, m.program, &g, &defaults);                 // as for the DSL
 *   ... m.weights[i] is the data of the INPUT whose tensor_id is m.weight_ids[i]
 *   onnx_model_free(&m);
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
 * Inputs and shapes (docs/onnx.md, "Dynamic shapes").  A graph input's
 * static dims are kept.  A dynamic dim — a dim_param ("batch"), or a dim
 * written -1, "?", "" or not at all — is a shape variable: a dim_param's
 * (mapped) name, shared by every dim that names it, else "<input>_d<i>".
 * The options give them values at import (shapes, syms): the importer then
 * specialises, and every shape computation folds to constants (Shape, Size,
 * Gather / Slice / Concat of shapes, their arithmetic, Cast, Range,
 * ConstantOfShape, Expand, comparisons, Where ...: any node whose inputs
 * are all known is evaluated at import, onnx_fold.c).  A dim left dynamic
 * stays a symbol as far as the arithmetic is affine with floor division; a
 * node that needs its value as a number fails with UnboundSymbol, naming
 * the graph input and the option to give ("--shape x=1x3x<height>x<width>").
 * There is no default: `dyn` lists the dims left dynamic, which the caller
 * must bind before it runs the model.  int64 inputs are int32 in harp (feed
 * '<i4' or '<i8' arrays: ut_npy_read range-checks the latter).
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

typedef struct onnx_name_entry {
  char *onnx; /* the name in the file */
  char *id;   /* the harp identifier it maps to */
} onnx_name_entry;

/* A dynamic dim left in an imported model (no shape or symbol given). */
typedef struct onnx_dyn {
  char *input; /* the graph input's ONNX name */
  int dim;     /* which of its dims */
  char *sym;   /* the shape variable (a harp identifier) */
  char *hint;  /* the option that would fix it: "--shape x=1x3x<height>x<width>" */
} onnx_dyn;

/* A dim the file leaves dynamic that the options gave a value (shapes,
 * syms): where harp may choose a ShapeSet (harp/autobox.h). */
typedef struct onnx_bound {
  char *input; /* the graph input's ONNX name */
  int dim;     /* which of its dims */
  char *param; /* its dim_param as the file spells it (NULL: an unnamed dim) */
  int64_t value;
} onnx_bound;

typedef struct onnx_model {
  hg_program *program; /* "main" */
  int nweights;
  char **weight_ids;   /* the INPUT tensor_ids that are weights */
  ut_tensor *weights;  /* their data, same order */
  int nnames;
  onnx_name_entry *names; /* graph inputs, weights and graph outputs: ONNX name -> harp id */
  int64_t opset;       /* of the default domain */
  int ndyn;
  onnx_dyn *dyn;       /* the dynamic dims of the graph inputs, in input order; after a failed
                          import with nkeep_dynamic, those met before it failed (all else
                          cleared; onnx_model_free frees them): a ShapeSet's box check */
  int nbound;
  onnx_bound *bound;   /* the graph inputs' dynamic dims given values, in input order */
  /* Run-time control flow (only with onnx_opts.host_flow): the model as
   * a host program of segments and If / Loop / Scan steps (harp/flow.h);
   * program is then NULL (the segments hold the graphs).  NULL when every
   * If, Loop and Scan folded or unrolled at import. */
  struct flow_program *flow;
} onnx_model;

/* A graph input's concrete shape, given at import. */
#define ONNX_NAME_MAX 256
typedef struct onnx_shape {
  char name[ONNX_NAME_MAX]; /* the ONNX name, or the harp identifier it maps to */
  int rank;
  int64_t dims[TINY_MAX_RANK];
  bool loose; /* a data file's shape: where it disagrees with the model or with another shape it is left out
                 (the data's binding reports it), rather than an error at import */
} onnx_shape;

/* "NAME=1x3x224x224" (',' may separate the dims too; "NAME=" is a scalar):
 * the name is split at the last '='.  UsageError when malformed. */
harp_status onnx_parse_shape(harp_error *e, const char *spec, onnx_shape *out);

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
/*
 * Shapes and symbols given at import: shapes[i] is graph input
 * shapes[i].name's shape (ONNX name or harp id): it replaces the input's
 * dims (a static dim that disagrees, or another rank, is InputMismatch),
 * and binds the dim_params it covers for every input that shares them.
 * syms binds shape variables by their harp names ("batch",
 * "p2o_DynamicDimension_0", "x_d2").  A shape naming no graph input is left
 * alone: `shape_used[i]` says which were taken (may be NULL).
 * shape_option is how messages spell the option ("--shape" when NULL).
 * needs_data: see below; `harp run` retries with those inputs fixed. */
typedef struct onnx_opts {
  int nfixed;
  const char *const *fixed_names; /* ONNX names */
  const ut_tensor *fixed;
  harp_status (*read)(harp_error *e, void *read_ctx, int i, ut_tensor *out);
  void *read_ctx;
  bool *used;
  int nshapes;
  const onnx_shape *shapes;
  bool *shape_used;
  const tiny_symtab *syms;
  const char *shape_option;
  /* Called (may be NULL) before the import fails because a node needs, as
   * constants, values computed from graph input onnx_name (a shape, axes or
   * pads fed as a graph input): fixing that input would let it fold. */
  void (*needs_data)(void *needs_ctx, const char *onnx_name);
  void *needs_ctx;
  /* Accept run-time control flow (an If whose condition, a Loop whose trip
   * count or condition, a Scan whose length is known only at run time): the
   * result is then a host program (onnx_model.flow).  Without it such a
   * node is Unsupported, naming the node. */
  bool host_flow;
  /* The knobs the import reads (qdq_add); NULL: the defaults. */
  const struct rt_knobs *knobs;
  /* Dims that stay shape variables even where a shape or symbol given
   * covers them (a ShapeSet's, harp/sgen.h): each names a dim_param as the
   * file spells it or as its identifier, "<input id>_d<i>", or "INPUT:i". */
  const char *const *keep_dynamic;
  int nkeep_dynamic;
  /* Per keep_dynamic entry (NULL, or 0: none): the largest value the dim
   * takes (a ShapeSet's upper corner).  The import takes it as a fact where
   * a size must be proved to lie inside an axis (a table sliced by the
   * sequence length, [0, S) of 128 rows, becomes a slice over S, not a
   * number needed); a binding past it fails the model's preparation. */
  const int64_t *keep_dynamic_hi;
} onnx_opts;

/* Parse and import path.  On failure *out is empty (nothing to free). */
harp_status onnx_load_file(harp_error *e, const char *path, onnx_model *out);
/* The same from memory; name is used in messages. */
harp_status onnx_load_buffer(harp_error *e, const void *data, size_t len, const char *name, onnx_model *out);
/* The same with options (NULL: none). */
harp_status onnx_load_file_opts(harp_error *e, const char *path, const onnx_opts *o, onnx_model *out);
harp_status onnx_load_buffer_opts(harp_error *e, const void *data, size_t len, const char *name, const onnx_opts *o,
                                   onnx_model *out);
void onnx_model_free(onnx_model *m);

/* What harp will and will not do with a model (harp check), found in one
 * go: each list holds lines of text.  The import runs on to the end: a node
 * that fails is recorded and the nodes reading its outputs are skipped. */
typedef struct onnx_report {
  int64_t opset;
  int nnodes, ngraphs;   /* nodes and graphs, nested ones included */
  char **ops;            /* "Conv 64": every op type, in first-use order */
  int nops;
  char **unknown_ops;    /* "LSTM: 1 node, first node 79 \"LSTM_79\"" (nested graphs too) */
  int nunknown;
  char **types;          /* element types harp does not have: graph inputs, initializers */
  int ntypes;
  char **inputs;         /* each graph input: type, dims, its dynamic dims and how they are given */
  int ninputs;
  char **needs;          /* nodes that need a dynamic dim's value: the --shape to give */
  int nneeds;
  char **refused;        /* the other failures, each naming its node */
  int nrefused;
  int skipped;           /* nodes not tried: an input came from a failed one */
  int ndynamic;          /* dynamic dims left without a value */
  bool imports;          /* the import succeeded (and the lowering, every dim known) */
} onnx_report;

/* Check path with the options (NULL: none) into *r (free it with
 * onnx_report_free).  Fails only when the file cannot be read or is
 * not an ONNX model; the model's own problems are r's. */
harp_status onnx_check_file(harp_error *e, const char *path, const onnx_opts *o, onnx_report *r);
void onnx_report_free(onnx_report *r);
/* UnboundSymbol naming every graph input of m left with dynamic dims and
 * the option that gives its shape (m->dyn's hints); HARP_OK when none. */
harp_status onnx_require_shapes(harp_error *e, const onnx_model *m);
/* The same, the dims of shape variables syms[0..nsyms) left dynamic on
 * purpose (a ShapeSet's symbols, harp/sgen.h). */
harp_status onnx_require_shapes_but(harp_error *e, const onnx_model *m, const char *const *syms, int nsyms);
/* The shape variable of m's dynamic dim that name stands for: a dim_param
 * as the file spells it, "INPUT:AXIS" (a graph input's ONNX name or harp
 * id), or the variable's own name ("x_d2"); NULL when none. */
const char *onnx_dyn_sym(const onnx_model *m, const char *name);
/* The identifier an ONNX name maps to, before "_2"-style renaming (above). */
void onnx_ident(const char *onnx_name, char out[128]);
/* The harp id of an ONNX input or weight name (or of an id itself); NULL if none. */
const char *onnx_id_of(const onnx_model *m, const char *onnx_name);

#define ONNX_MIN_OPSET 6
#define ONNX_MAX_OPSET 28

#endif
