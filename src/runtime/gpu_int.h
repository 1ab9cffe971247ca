/* gpu_int.h — the CUDA backend's model object, shared by gpu.c (one shape
 * binding) and gpu_session.c (many bindings, one CUDA Graph per ShapeSet).
 * Internal to src/runtime. */
#ifndef HARP_GPU_INT_H
#define HARP_GPU_INT_H

#include "backend/cuda/cuda_rt.h"
#include "backend/cuda/region_cuda.h"
#include "harp/gpu.h"
#include "harp/knobs.h"
#include "harp/pipeline.h"
#include "harp/region.h"
#include "harp/tune.h"

struct rt_gpu_model {
  const tiny_graph *g;
  rt_compile *comp;  /* the stages' results: the partition, plans, kernels, CUDA C */
  fn_function *f;    /* comp's, for short */
  cuda_model_tu *tu; /* comp's */
  cuda_arch arch;
  char *source;      /* comp's */
  char *cache_dir;
  rt_knobs knobs;    /* the runtime's libraries (nvrtc, libcuda), the cache */
  bool graphs;
  bool shares_build; /* rt_gpu_instance: g .. bin belong to another model */
  /* once loaded */
  cuda_rt *rt;
  bool rt_borrowed; /* a session's: not closed with the model */
  cuda_binary bin;
  bool compiled, loaded, consts_up;
  double compile_ms;
  cuda_rt_module *mod;
  void **fn; /* per launch */
  cuda_model_mem mem;
  cuda_devptr *args; /* per launch, CUDA_MAX_PARAMS each */
  cuda_rt_graph *graph;
  int device; /* the CUDA device ordinal */
  /* runs on device pointers (gpu_device.c) */
  cuda_devptr *dargs;   /* per launch, CUDA_MAX_PARAMS each: the arguments with the caller's addresses */
  cuda_devptr *dptrs;   /* the addresses dgraph was captured with: inputs, then outputs */
  cuda_rt_graph *dgraph; /* the executable graph of the last device run with graphs */
  void *ddone;           /* a CUevent recorded after each device run: the next run on another stream waits for it */
  void *dstream;         /* the stream of the last device run (NULL: harp's own) */
  /* a ShapeSet build (tu->gen.n > 0; gpu_session.c): the binding a run is at */
  const tiny_graph *gio; /* the graph prepared at it: the inputs' and outputs' shapes (NULL: g) */
  const int64_t *sv;     /* per symbol of tu->gen: its value (NULL: the box's corner hi) */
  int64_t *consts_sv;    /* weights whose sizes vary with tu->gen: the values they went up at, then which vary them (NULL: fixed sizes) */
};

/* rt_gpu_build on an already opened runtime (rt != NULL: borrowed, and the
 * target is taken from o or, without one, from rt's device). */
harp_status gpu_build_on(harp_error *e, const tiny_graph *g, const tiny_symtab *syms, const rt_gpu_opts *o, cuda_rt *rt,
                       rt_gpu_model **out);
/* gpu_build_on for a ShapeSet box: the kernels that can read the sizes of
 * gen's symbols at run time do (generic loop nests); g prepared at a
 * binding of the box (gen->hi its corner hi).  replay (NULL: none): the
 * compile of the box's corner hi, whose regions and plans this build takes
 * instead of forming and choosing its own (decided once per box). */
harp_status gpu_build_gen(harp_error *e, const tiny_graph *g, const tiny_symtab *syms, const rt_gpu_opts *o, cuda_rt *rt,
                          const cuda_syms *gen, const rt_compile *replay, rt_gpu_model **out);

/* cuda_rt_open with the libraries of knobs k (nvrtc, libcuda; NULL: the
 * defaults) and NVRTC's cache under cache_dir/cuda (created; NULL: no cache). */
harp_status gpu_rt_open(harp_error *e, const rt_knobs *k, const char *cache_dir, bool no_driver, int device,
                        cuda_rt **out);
/* o's knobs (NULL: the defaults) with o->cache_dir over them. */
void gpu_knobs(const rt_gpu_opts *o, rt_knobs *k);
/* "sm80" | "sm90" -> *arch; NULL: rt's device (sm90 on Hopper, else sm80). */
harp_status gpu_target(harp_error *e, const char *target, const cuda_rt *rt, cuda_arch *arch);
/* Capture m's launches on its stream into a new graph (instantiated on
 * request).  A failed launch still ends the capture and keeps no graph. */
harp_status gpu_capture(harp_error *e, rt_gpu_model *m, bool instantiate, cuda_rt_graph **out);

/* One GPU build for a ShapeSet box (gpu_box.c): the box of a binding, its
 * varying symbols gen (their corner hi), and the upper corner's build when
 * both corners generate the same code, else why not. */
typedef struct gpu_box {
  cuda_syms gen;
  const char **names; /* gen's names (copies in arena) */
  ut_arena *arena;
  int64_t *hi;
  tiny_graph *g; /* prepared at the corner hi (m's graph) */
  tiny_symtab syms;
  rt_gpu_model *m; /* NULL: one build per binding, for the reason why */
  char why[512];
} gpu_box;
/* The model text json with the symbols that its ops tie to others over the
 * ShapeSet class box of `binding` made derived ones (tiny_ties_text: G :=
 * 2*H) into *out (malloc'd; NULL: no tie), said[cap] naming them. */
harp_status gpu_box_ties(harp_error *e, const char *json, const tiny_symtab *binding, char **out, char *said, size_t cap);
/* The box of `binding` for the model text json (a session's), decided by
 * generating both corners with o on rt.  Only running out of memory is an
 * error; a corner that does not build is a reason.  A symbol of the
 * binding that json defines (a tie: gpu_box_ties) follows the others. */
harp_status gpu_box_decide(harp_error *e, const char *json, const tiny_symtab *binding, const rt_gpu_opts *o, cuda_rt *rt,
                           gpu_box **out);
/* Whether box b's build serves the binding whose prepared graph is g (its
 * symbols, derived ones bound, in binding): the same graph node for node,
 * no size past the corner hi; sv[i]: the value of b->gen's symbol i. */
bool gpu_box_fits(const gpu_box *b, const tiny_graph *g, const tiny_symtab *binding, int64_t *sv);
void gpu_box_free(gpu_box *b);
/* Whether o holds the symbol name fixed in a session (rt_gpu_opts.fixed). */
bool gpu_sym_fixed(const rt_gpu_opts *o, const char *name);
/* A copy of the model text json prepared at the binding names/vals (n
 * symbols) into *g, its symbols in *t (the caller frees both, also on error). */
harp_status gpu_prepare_at(harp_error *e, const char *json, const char *const *names, const int64_t *vals, int n,
                           tiny_graph **g, tiny_symtab *t);

/* How a run issues its launches: directly, through the model's own graph, or
 * through a session's graph for the binding's ShapeSet. */
typedef harp_status (*gpu_launcher)(harp_error *e, rt_gpu_model *m, void *ctx);
/* Every launch of m once, in order, on harp's stream. */
harp_status gpu_launch_all(harp_error *e, rt_gpu_model *m);
/* rt_gpu_run with the launches issued by `launch`; dst != NULL: the outputs
 * go into these caller buffers (rt_gpu_run_into) and `outputs` is unused. */
harp_status gpu_run_with(harp_error *e, rt_gpu_model *m, const ut_tensor *inputs, int ninputs, ut_tensor *outputs,
                       void *const *dst, gpu_launcher launch, void *ctx);

/* The ConstPool up from the weights among inputs (rt_gpu_run's tensors)
 * and the `once` launches after it, the first time only (a ShapeSet
 * build whose weights' sizes vary: again at each binding that moves one). */
harp_status gpu_upload_consts(harp_error *e, rt_gpu_model *m, const ut_tensor *inputs);
/* Launch i of m on the runtime's current stream with arguments args. */
harp_status gpu_launch_args(harp_error *e, rt_gpu_model *m, int i, const cuda_devptr *args);
/* gpu_device.c's memory and graph (m's rt still open). */
void gpu_device_free(rt_gpu_model *m);

#endif
