/* harp.h — compile a model and run it from C (docs/c-api.md).
 *
 *   harp_compiled *c;
 *   harp_compile_file(&err, "model.harp", &opts, &c);          load, bind, compile
 *   harp_model *m = harp_model_init(c, weights, nbytes);       one arena per instance
 *   harp_model_run(m, inputs, outputs);                        any number of times
 *   harp_model_free(m);
 *   harp_compiled_free(c);
 *
 * Tensors are dense, row-major, in their dtype's storage (fp32 float,
 * fp16/bf16 16-bit patterns, i32 int32_t, bool one byte).  inputs[] are the
 * model's inputs that are not weights, in model order; the weights (inputs
 * declared with storage "param", or named in harp_options.params) come as one
 * parameter block laid out by harp_param_offset.  Errors are values: an
 * harp_status plus the harp_error you pass in (harp/status.h); nothing prints or
 * exits.  Everything here is harp_-prefixed and the handles are opaque; the
 * entry points that take the layers' objects (a Tiny IR graph) are in
 * harp/advanced.h.
 *
 * The library's functions are harp_model_*, not the specification's
 * model_init / model_run / model_free (seed 000 §8): those are the ABI of
 * the packages `harp compile` writes, one model per package, and a program
 * may link such a package and libharp together. */
#ifndef HARP_H
#define HARP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "harp/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Element types, in the order of the Tiny IR's (seed 001). */
typedef enum harp_dtype { HARP_FP16, HARP_BF16, HARP_FP32, HARP_I32, HARP_BOOL, HARP_I8, HARP_U8,
  HARP_I64 = 32 /* no model computes in it: a feed's storage only, for an I32 input (harp_model_run_typed) */
} harp_dtype;
#define HARP_MAX_RANK 12 /* the most dims harp_input_shape / harp_output_shape write */

/* CUDA: NVRTC and libcuda are loaded with dlopen when the model is
 * compiled; without them (or without a GPU) harp_compile_* fails with
 * HARP_E_UNSUPPORTED and the reason. */
typedef enum harp_backend { HARP_BACKEND_CPU, HARP_BACKEND_INTERP, HARP_BACKEND_CUDA } harp_backend;

/* Called after each stage of a compile (stage: "load", "normalize", ...
 * "build"; fraction: how far the compile is, 0..1).  Non-zero cancels it:
 * the compile fails with HARP_E_CANCELLED, nothing half-written is left
 * in the cache (the stage that builds the object finishes before the next
 * call).  A CPU compile with a progress callback runs to its build before
 * it returns (the knob tier0's default, auto, is off for it), unless
 * harp_options.progress_tier0 is set. */
typedef int (*harp_progress_fn)(void *ctx, const char *stage, double fraction);

typedef struct harp_options {
  harp_backend backend;
  const char *const *syms;   /* "NAME=INT" bindings, NULL-terminated (may be NULL) */
  const char *const *params; /* names of inputs that are weights, NULL-terminated (may be NULL) */
  const char *const *shapes; /* ONNX graph inputs' shapes, "NAME=1x3x224x224", NULL-terminated (may be NULL):
                                the import specialises on them and on syms (docs/onnx.md) */
  const char *cc, *cflags;   /* CPU backend: compiler, flags (NULL: the knobs cc, cflags) */
  const char *cache_dir;     /* compiled code (CPU: shared objects; CUDA: cubins); NULL: the knob cache_dir */
  const char *target;        /* CUDA: "sm80" | "sm90"; NULL: the device's */
  bool graphs;               /* CUDA: each instance captures its launches in a CUDA Graph on its
                                first run and replays it after */
  /* CUDA: how fp32 contractions compute (docs/cuda.md "Precision"): "tf32"
   * (NULL: the default, tensor cores with fp32 accumulation, as cuDNN and
   * onnxruntime do), "fp32" (strict, no tensor cores), "fp16" / "bf16"
   * (operands rounded to half precision, fp32 accumulation).  Other values
   * fail with HARP_E_USAGE.
   * CPU: NULL or "fp32" (the default), or "bf16": matmuls, convolutions and
   * attention round their operands to bf16 and multiply with vdpbf16ps, fp32
   * accumulation (as OpenVINO's INFERENCE_PRECISION_HINT=bf16); element-wise
   * ops and reductions stay fp32.  It needs AVX512_BF16 (HARP_E_UNSUPPORTED
   * without); other values fail with HARP_E_USAGE (docs/options.md).  The
   * interpreter computes fp32. */
  const char *precision;
  int64_t loop_limit;        /* a model with run-time control flow: the iterations a Loop may run
                                (0: one million) before it fails */
  int64_t max_memory;        /* CPU: one instance's arena plus weights at most, in bytes (0: this
                                machine's memory); a model beyond it fails to compile with
                                HARP_E_LIMIT before any code is generated */
  /* The library's knobs (docs/options.md, `harp --help-options`): the table's
   * defaults, then the environment (HARP_NO_DEDUP=1, CC, ...; read once per
   * compile, and not at all with no_env), then these "NAME=VALUE" settings
   * in order ("no_dedup=1", "cc_jobs=4"; NULL-terminated, may be NULL), then
   * cc, cflags and cache_dir above.  An unknown knob or a bad value fails the
   * compile with HARP_E_USAGE. */
  const char *const *knobs;
  bool no_env;
  harp_progress_fn progress; /* may be NULL */
  void *progress_ctx;
  /* ShapeSets (CPU; docs/c-api.md, "ShapeSets"): "NAME=LO..HI" per shape
   * symbol that varies, NULL-terminated.  An ONNX model's
   * dynamic dim is named by its dim_param ("batch"), its shape variable
   * ("x_d2") or "INPUT:AXIS"; its other dynamic dims come from shapes and
   * syms.  The model is compiled once for every binding inside (or, where a
   * kernel cannot take its sizes at run time yet, once per binding met);
   * harp_model_run_shaped runs any of them.  Another backend: Unsupported.
   * NULL or {"auto", NULL} (the default): a CPU compile of an ONNX model
   * whose dynamic dims shapes / syms set chooses the box itself
   * (harp_auto_box), tiered by the cache directory's record: a bucket's
   * first binding compiles alone, a later compile at another binding in it
   * compiles the box (docs/c-api.md, "ShapeSets chosen by harp"); the model
   * then still runs at its binding as before.  {"exact", NULL}: the binding
   * alone, always.  A box with LO == HI holds that one size. */
  const char *const *shapesets;
  bool shapeset_recompile; /* a binding outside the ShapeSets gets a compile of its own (else InputMismatch) */
  /* CPU, knob tier0 at auto: a compile with a progress callback returns as
   * soon as tier 0 can run, as one without does (docs/architecture.md,
   * "Tier 0"): the callback sees the stages before that; the object's
   * regions, C and build then go on in the background, neither reported
   * nor cancellable (harp_compiled_wait waits for them).  false: a
   * followed compile runs to its build before it returns. */
  bool progress_tier0;
} harp_options;

typedef struct harp_compiled harp_compiled;
typedef struct harp_model harp_model;

/* Load MODEL (.json Tiny IR, .harp DSL or .onnx), bind its shape symbols
 * from opts->syms (and the DSL's defaults), prepare and compile it.  An
 * ONNX model is imported with opts->shapes and opts->syms, and every
 * dynamic dim must get a value from them (else HARP_E_UNBOUND_SYMBOL naming
 * the input and the shape to give); its initializers are its weights: they
 * come back as the parameter block harp_embedded_params returns. */
harp_status harp_compile_file(harp_error *e, const char *path, const harp_options *opts, harp_compiled **out);
void harp_compiled_free(harp_compiled *c);
/* A warning from the compile, or NULL: the compile cache could not be used
 * (read-only, full, not the user's own) and the code was built in a
 * temporary directory; or (knob tier0=auto) the background build failed,
 * so runs stay on tier 0 (docs/architecture.md, "Tier 0"). */
const char *harp_compiled_warning(const harp_compiled *c);
/* CPU, knob tier0=auto: wait for c's background build and load its object
 * (each instance's next run is on it).  The build's error when it failed
 * (the runs stay on tier 0, harp_compiled_warning says why); HARP_OK at
 * once for a model that was built before harp_compile returned. */
harp_status harp_compiled_wait(harp_error *e, harp_compiled *c);

/* What the compiled model expects.  k counts inputs (weights excluded) and
 * outputs; shape[] receives up to HARP_MAX_RANK sizes. */
int harp_num_inputs(const harp_compiled *c);
int harp_num_outputs(const harp_compiled *c);
const char *harp_input_name(const harp_compiled *c, int k);
const char *harp_output_name(const harp_compiled *c, int k);
harp_dtype harp_input_dtype(const harp_compiled *c, int k);
harp_dtype harp_output_dtype(const harp_compiled *c, int k);
int harp_input_shape(const harp_compiled *c, int k, int64_t *shape);  /* returns the rank */
int harp_output_shape(const harp_compiled *c, int k, int64_t *shape); /* returns the rank */
size_t harp_arena_bytes(const harp_compiled *c);  /* required_memory of one instance */

/* The parameter block: its size, and where weight `name` goes (-1: no such weight). */
size_t harp_params_bytes(const harp_compiled *c);
int64_t harp_param_offset(const harp_compiled *c, const char *name);
/* The parameter block filled with the weights the model file carries (an
 * ONNX model's initializers; harp_params_bytes long), for harp_model_init; NULL
 * for a .json/.harp file or a graph, whose weights the caller supplies. */
const void *harp_embedded_params(const harp_compiled *c);

/* Instances.  harp_model_init copies the parameter block; NULL on a size
 * mismatch or allocation failure (CUDA: also when the instance's device
 * memory or module cannot be had).  harp_model_run returns 0, or a non-zero
 * code (e.g. a GATHER index out of range, a driver error); harp_model_error
 * describes the last one.  CUDA instances upload the weights on their first
 * run and keep them on the device.  Instances use c: free them before c. */
harp_model *harp_model_init(const harp_compiled *c, const void *params, size_t nbytes);
int harp_model_run(harp_model *m, const void *const *inputs, void *const *outputs);
const char *harp_model_error(const harp_model *m);
void harp_model_free(harp_model *m);
/* 1 when m's last run was on tier 0 (a CPU model whose object was not yet
 * ready: knob tier0, docs/architecture.md "Tier 0"), 0 otherwise (before
 * any run, on the object, another backend, a ShapeSet model). */
int harp_model_last_tier0(const harp_model *m);

/* A model with run-time control flow (an ONNX If, Loop or Scan decided at
 * run time: a host program of compiled segments, docs/onnx.md).  Its
 * segments are compiled by each instance when first run, for the shapes
 * they meet.  harp_output_shape gives -1 for a dim known only at run time;
 * such an output is read here after harp_model_run, which then takes NULL
 * in its outputs[k] (any output may be read so).  Output k of the last
 * harp_model_run as the instance holds it (valid until the next run or
 * harp_model_free), its shape into shape[] and its rank into *rank; NULL
 * for another model, before a run, or after a failed one.  After
 * harp_model_run_shaped (below) every model's outputs are read so. */
const void *harp_model_output(const harp_model *m, int k, int64_t *shape, int *rank);

/* ---- ShapeSets (harp_options.shapesets; docs/c-api.md, "ShapeSets") -------------- */

/* A ShapeSet model's harp_input_shape / harp_output_shape give -1 for a
 * dim that varies in its ShapeSets.  Output k's shape when the inputs have
 * the shapes in_shapes[j] (input j's dims, harp_input_shape's rank), into
 * shape[] (HARP_MAX_RANK) and *rank.  A binding outside the ShapeSets (and
 * not shapeset_recompile), or one the model refuses (a Reshape that no
 * longer divides, a size past the limits): InputMismatch.  Another model
 * takes only the shapes it was compiled for. */
harp_status harp_output_shape_for(harp_error *e, const harp_compiled *c, const int64_t *const *in_shapes, int k,
                                  int64_t *shape, int *rank);
/* harp_model_run with each input's shape: inputs[j] holds input j dense at
 * in_shapes[j]; outputs[k] must hold output k at that binding
 * (harp_output_shape_for), or be NULL: then read it with harp_model_output
 * after the run (any model's outputs can be read so after this call).  The
 * binding is checked before any kernel runs (InputMismatch as above).  One
 * compiled object serves every binding inside the ShapeSets; a binding
 * compiled on its own (shapeset_recompile, or a model whose kernels need
 * one compile per binding) runs on a fresh instance, on the default threads.
 * Not re-entrant per instance. */
harp_status harp_model_run_shaped(harp_error *e, harp_model *m, const void *const *inputs, const int64_t *const *in_shapes,
                                  void *const *outputs);
/* The ShapeSet harp chooses around a binding (harp_options.shapesets NULL;
 * a Python session's): n dims, dim k named names[k] (a dim_param, or
 * "INPUT:AXIS") at size values[k].  Writes each distinct name once, in
 * first-met order, into out_names[] (pointers into names) with its box
 * lo[]..hi[]: the power-of-two bucket [2^j, 2^(j+1) - 1] around a size
 * >= 2 (20: 16..31), the size itself (lo == hi: a constant) at 0 or 1.
 * Returns how many, or -1 when one name's sizes disagree (no box). */
int harp_auto_box(int n, const char *const *names, const int64_t *values, const char **out_names, int64_t *lo, int64_t *hi);
/* How many objects c's ShapeSets hold so far, how many of them the C
 * compiler built (the rest came from the disk cache), and why a binding
 * compiles on its own (NULL: one object serves every binding); 0, 0, NULL
 * for a model without ShapeSets. */
int harp_shapeset_objects(const harp_compiled *c, int *cc_runs, const char **fallback);

/* ---- for bindings (docs/c-api.md, "Bindings"; src/runtime/api_ext.c) ------------- */

/* "0.1.0": the library's version (CMakeLists.txt's project() is the one place). */
const char *harp_version(void);

/* The same as harp_compile_file, from a model in memory: format is "onnx",
 * "harp" or "json" (a path's extension, dot optional); name appears in
 * messages (NULL: "<memory>").  An ONNX model whose weights lie in external
 * files cannot be compiled from memory (HARP_E_UNSUPPORTED). */
harp_status harp_compile_buffer(harp_error *e, const void *data, size_t len, const char *format, const char *name,
                                const harp_options *opts, harp_compiled **out);

/* Input / output k's name as the model file spells it (an ONNX graph
 * input's or output's own name, "input.1"), where harp_input_name gives
 * harp's identifier ("input_1").  The same as harp's for .harp / .json. */
const char *harp_input_source_name(const harp_compiled *c, int k);
const char *harp_output_source_name(const harp_compiled *c, int k);

/* An instance's settings (harp_model_new). */
typedef struct harp_instance_options {
  int threads; /* CPU: threads this instance runs on, the caller's included (0: $HARP_NUM_THREADS, else every
                  online CPU); a model with run-time control flow, the interpreter, CUDA: ignored */
  int device;  /* CUDA: the device ordinal (cuDeviceGet); no such device: Unsupported, saying how many there
                  are.  The model is compiled once (for device 0's architecture unless opts.target says);
                  an sm90 build runs only on an sm_90 device.  CPU, interpreter: must be 0 (else UsageError) */
} harp_instance_options;

/* harp_model_init with settings (io may be NULL) and an error that says
 * why: a parameter block of the wrong size (InputMismatch), a bad setting
 * (UsageError), allocation (OutOfMemory), the device (Unsupported). */
harp_status harp_model_new(harp_error *e, const harp_compiled *c, const void *params, size_t nbytes,
                           const harp_instance_options *io, harp_model **out);

/* harp_model_run with each input's storage dtype given (dtypes NULL: the
 * model's own) and the error as a value.  An HARP_I64 feed to an I32 input
 * is narrowed, every element range-checked (InputMismatch naming the input
 * and the first value out of range); any other dtype that differs from the
 * input's is DtypeMismatch naming the input.  A failed run is
 * InvalidArgument with harp_model_error's text.  Not re-entrant per
 * instance: one run at a time on m (use one instance per thread). */
harp_status harp_model_run_typed(harp_error *e, harp_model *m, const void *const *inputs, const harp_dtype *dtypes,
                                 void *const *outputs);

/* Run on device memory (CUDA models): inputs[k] and outputs[k] are
 * CUdeviceptr values (cast to pointers) on the instance's device, each
 * holding the tensor dense in its dtype (harp_input_dtype; no int64
 * narrowing here).  The work is only enqueued on stream (a CUstream; NULL:
 * the instance's own stream) and the call returns without waiting: the
 * caller synchronises stream before reading the outputs.  No host copy is
 * made for the run (the weights go up once, on an instance's first run,
 * synchronously).  The kernels read and write the caller's memory directly;
 * an instance's temporaries stay in its own arena, so a run on another
 * stream than the instance's last one waits for that one (an event, on the
 * device).  The status word
 * (an index out of range in a gather) is not read back in these runs.
 * With opts.graphs the launches are captured (on harp's stream) into a
 * CUDA Graph per set of addresses and replayed on stream; new addresses
 * capture again and update the graph in place.
 * Errors: a NULL pointer (UsageError naming it), a misaligned one
 * (Misaligned), an output that is an input, a weight or another output as
 * compiled (Unsupported), a CPU or interpreter model or one with run-time
 * control flow (Unsupported), a driver failure (the driver's message).
 * Unmeasured on a real GPU so far: tested against tests/fake_cuda only. */
harp_status harp_model_run_device(harp_error *e, harp_model *m, const void *const *inputs, void *const *outputs,
                                  void *stream);

/* ---- tuning (`harp tune` from a program; docs/c-api.md, "Tuning") ----------------- */

/* The tuner's settings (harp_tune; zeroes are the defaults). */
typedef struct harp_tune_options {
  int budget;                  /* plan points per region (0: 12; at most 20) */
  int repeat, warmup;          /* timed rounds (0: 20) and untimed ones first (0: 3; < 0: none) */
  uint64_t seed;               /* the random inputs the kernels run on (0: 1) */
  bool no_store;               /* measure and log, but leave the plan cache alone */
  const char *log;             /* CSV log the points are appended to (NULL: <cache dir>/tune.csv) */
  const char *const *regions;  /* tune only these regions, NULL-terminated (NULL: every one that follows a plan) */
  /* As the tuner goes: region name, its index among nregions, phase
   * "compile" (points compiled: done of total), "measure" (rounds) or
   * "done"; best_ms the best median so far.  Non-zero stops the tuning:
   * HARP_E_CANCELLED, and no plan is stored for the region it was in. */
  int (*progress)(void *ctx, const char *region, int region_index, int nregions, const char *phase, int done, int total,
                  double best_ms);
  void *progress_ctx;
} harp_tune_options;

/* Tune the CPU model c as `harp tune` does (docs/plan.md §16): for each
 * region whose kernel follows its Schedule Plan, measure the best points of
 * its plan search space in this process, keep the fastest in the plan cache
 * of opts' cache directory (a later compile of the same model, ShapeSet and
 * machine uses it) and append every point to the CSV log.  opts: the
 * options c was compiled with (its knobs, compiler and cache directory);
 * params / nbytes: the parameter block as for harp_model_init (the weights);
 * the other inputs are random.  *report (may be NULL): a JSON text
 * describing every point, to free with harp_string_free.  Errors: an
 * interpreter, CUDA or host-program model, or a bf16 compile (Unsupported:
 * the tuner measures fp32 plans); a bad setting (UsageError); a region name
 * the model lacks (UsageError); the callback's stop (Cancelled). */
harp_status harp_tune(harp_error *e, const harp_compiled *c, const void *params, size_t nbytes, const harp_options *opts,
                      const harp_tune_options *to, char **report);
void harp_string_free(char *s);

/* fp16 and bf16 storage from and to float (round to nearest even). */
uint16_t harp_f32_to_f16(float f);
float harp_f16_to_f32(uint16_t h);
uint16_t harp_f32_to_bf16(float f);
float harp_bf16_to_f32(uint16_t h);

#ifdef __cplusplus
}
#endif

#endif
