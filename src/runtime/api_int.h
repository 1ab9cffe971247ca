/* api_int.h — what api.c (harp.h) and flow_api.c (harp.h over a host
 * program) share.  Not public. */
#ifndef HARP_API_INT_H
#define HARP_API_INT_H

#include "harp/advanced.h"
#include "harp/function.h"
#include "harp/onnx.h"
#include "harp/knobs.h"

/* harp_compile_graph with the symbols already bound (any names). */
harp_status harp_compile_bound(harp_error *e, tiny_graph *g, const tiny_symtab *syms, const harp_options *o, harp_compiled **out);

/* A model to compile: a file (path), or bytes in memory (data, len; path
 * names it in messages) in format ("onnx", "harp", "json"; NULL: path's
 * extension). */
typedef struct api_src {
  const char *path;
  const void *data;
  size_t len;
  const char *format;
} api_src;
harp_status api_compile_src(harp_error *e, const api_src *src, const harp_options *o, harp_compiled **out);
/* The knobs of a compile: the table's defaults, the environment (unless
 * o->no_env), o->knobs' settings, then o's compiler, flags, cache dir. */
harp_status api_knobs(harp_error *e, const harp_options *o, rt_knobs *k);
/* The bound Tiny graph and symbols of c; NULL for a host program's. */
const tiny_graph *api_graph(const harp_compiled *c, const tiny_symtab **syms);
/* o's progress callback (if any) at stage: HARP_E_CANCELLED when it says stop. */
harp_status api_progress(harp_error *e, const harp_options *o, const char *stage, double fraction);

/* harp_model_init on `threads` threads (CPU; 0: the default) and, for
 * CUDA, device ordinal `device` (why a CUDA instance failed: into e). */
harp_model *api_model_new(harp_error *e, const harp_compiled *c, const void *params, size_t nbytes, int threads,
                          int device);
/* A CUDA instance (not one of a host program): rt_gpu_run_device with
 * inputs / outputs as device addresses, on stream. */
bool api_model_on_device(const harp_model *m);
harp_status api_run_device(harp_error *e, harp_model *m, const void *const *inputs, void *const *outputs, void *stream);
const harp_compiled *api_model_compiled(const harp_model *m);
harp_backend api_backend(const harp_compiled *c);

/* api_sgen.c: ShapeSets (harp_options.shapesets).  api_sgen_onnx: an
 * ONNX model's ShapeSet names as shape variables ("SYM=LO..HI" strings,
 * NULL-terminated, to free), its other dynamic dims required.
 * api_sgen_new: g (as loaded) compiled for the box, syms gaining each
 * ShapeSet symbol at its hi; *ghi a copy prepared there (c's graph).  The
 * one object's Function (NULL: a compile per binding).  A node's shape with
 * -1 where it varies (an INPUT, or output k). */
typedef struct api_sgen api_sgen;
harp_status api_sgen_onnx(harp_error *e, const onnx_model *om, const harp_options *o, char ***out);
harp_status api_sgen_new(harp_error *e, const tiny_graph *g, tiny_symtab *syms, const harp_options *o, const rt_knobs *k,
                         api_sgen **out, tiny_graph **ghi);
void api_sgen_free(api_sgen *a);
const fn_function *api_sgen_function(const api_sgen *a);
int api_sgen_shape(const api_sgen *a, const tiny_node *n, int k, int64_t *shape);
/* c's ShapeSets (NULL: none). */
const api_sgen *api_shapesets(const harp_compiled *c);
/* An instance's shaped runs (harp_model_run_shaped): of a ShapeSet model
 * (made with the instance: params copied, the one object's instance on
 * threads), or of any other (made at its first such run, params NULL);
 * output k of its last run (NULL: none). */
typedef struct api_shaped api_shaped;
api_shaped *api_shaped_new(const harp_compiled *c, const void *params, size_t nbytes, int threads);
void api_shaped_free(const harp_compiled *c, api_shaped *p);
const void *api_shaped_output(const api_shaped *p, int k, int64_t *shape, int *rank);
api_shaped **api_model_shaped(harp_model *m);

/* api_autobox.c: the box harp chooses (harp_options.shapesets NULL or
 * {"auto"}; harp/autobox.h).  api_boxes: o's ShapeSets when they name
 * boxes (NULL for none, "auto" or "exact").  api_autobox_wanted: o lets
 * harp choose (a CPU compile, no box named, not "exact").
 * api_autobox_compile: src imported as om at o's binding (om->bound: the
 * dynamic dims it set): when the cache's record says the bucket has met
 * another binding, src compiled for the box into *out (*done; its inputs
 * and outputs at the binding, api_set_bind); else nothing (*done false,
 * the binding recorded).  A box that fails to compile is recorded and the
 * caller compiles the binding alone. */
const char *const *api_boxes(const harp_options *o);
bool api_autobox_wanted(const harp_options *o);
harp_status api_autobox_compile(harp_error *e, const api_src *src, const harp_options *o, const onnx_model *om,
                                harp_compiled **out, bool *done);
void api_set_bind(harp_compiled *c, int64_t (*bind)[HARP_MAX_RANK]);

/* flow_api.c: a model with run-time control flow behind harp.h.  The
 * signature: inputs (the shapes bound from o->syms, else 1), outputs
 * (-1 where known only at run time), the parameter block (the model's
 * weights, each at a 64-byte aligned offset). */
typedef struct flow_sig flow_sig;
harp_status flow_sig_new(harp_error *e, onnx_model *om, const harp_options *o, flow_sig **out); /* takes *om */
void flow_sig_free(flow_sig *s);
int flow_sig_count(const flow_sig *s, bool out);
const char *flow_sig_name(const flow_sig *s, bool out, int k);
tiny_dtype flow_sig_dtype(const flow_sig *s, bool out, int k);
int flow_sig_shape(const flow_sig *s, bool out, int k, int64_t *shape);
size_t flow_sig_params_bytes(const flow_sig *s);
int64_t flow_sig_param_offset(const flow_sig *s, const char *name);
const void *flow_sig_embedded(const flow_sig *s);

/* An instance: its own executor (compiled segments) and weights. */
typedef struct flow_inst flow_inst;
flow_inst *flow_inst_new(const flow_sig *s, const void *params, size_t nbytes);
int flow_inst_run(flow_inst *m, const void *const *in, void *const *out, char *err, size_t cap);
const void *flow_inst_output(const flow_inst *m, int k, int64_t *shape, int *rank);
void flow_inst_free(flow_inst *m);

#endif
