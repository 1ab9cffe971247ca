/* harp/gpu.h — the CUDA backend end to end: compile a prepared Tiny graph
 * into one CUDA C translation unit plus a launch list, compile it with NVRTC
 * (cached on disk), load it with the driver API and run it.
 *
 *   rt_gpu_build     the compile pipeline's CUDA target (harp/pipeline.h):
 *                    regions (formed for sm80 / sm90) -> Function -> plans ->
 *                    kernels (templates, simple row kernels, generic loop
 *                    nests) -> CUDA C; needs neither NVRTC nor a GPU
 *   rt_gpu_prepare   NVRTC -> cubin (disk cache) for the device; needs a GPU
 *   rt_gpu_load      prepare, then cuModuleLoadData and the device memory
 *   rt_gpu_instance  another loaded copy sharing a prepared model's build
 *   rt_gpu_run       one execution with host tensors
 *   rt_gpu_run_device  one execution on the caller's device memory and stream
 *
 * NVRTC and libcuda are loaded with dlopen: without them every step that
 * needs them fails with Unsupported and a reason ("no GPU: ..."), never a
 * crash. */
#ifndef HARP_GPU_H
#define HARP_GPU_H

#include <stdbool.h>
#include <stddef.h>

#include "harp/error.h"
#include "harp/pipeline.h"
#include "harp/tensor.h"
#include "harp/tiny.h"

typedef struct rt_gpu_opts {
  const struct rt_knobs *knobs; /* the configuration (harp/knobs.h: nvrtc, libcuda, cache_dir, the
                                   A/B switches); NULL: the table's defaults */
  const char *target;    /* "sm80" | "sm90"; NULL: the device's (sm80 without one) */
  const char *cache_dir; /* NULL: the knob cache_dir */
  bool graphs;           /* capture the launches in a CUDA Graph on the first run, replay it after */
  /* how fp32 contractions (matmul, conv, attention) compute: "tf32" (NULL:
   * the default, as cuBLAS / cuDNN / onnxruntime do: tensor cores, 10-bit
   * mantissa operands, fp32 accumulation), "fp32" (strict: a SIMT template,
   * no tensor cores), "fp16" / "bf16" (operands rounded to half precision,
   * fp32 accumulation); fp16/bf16 contractions are not affected */
  const char *precision;
  /* --plan: regions' plans by name (validated against their regions on the
   * target's machine); the others keep the cost model's default */
  const struct rt_plan_override *plan_overrides;
  int nplan_overrides;
  bool keep_analysis;    /* keep the IndexBook and Poly-View (their dumps) */
  bool no_plan_cache;    /* do not read the plan cache (harp tune --backend cuda's points) */
  /* called after each stage of the compile (harp/pipeline.h rt_stage_hook: the CLI's dumps) */
  rt_stage_hook after_stage;
  void *hook_ctx;
  bool per_binding;      /* a session: build each binding on its own, never one build for its ShapeSet's box */
  /* a session: the symbols that stay fixed (a CNN's channels C, K): each
   * ShapeSet's box holds them at its first binding's values, so its kernels
   * may print them (a conv template's channels); a binding at another value
   * is another ShapeSet.  Every name must be one the bindings give.  Copied
   * by rt_gpu_session_new.  Without them every symbol may vary (see below) */
  const char *const *fixed;
  int nfixed;
} rt_gpu_opts;

typedef struct rt_gpu_model rt_gpu_model;

harp_status rt_gpu_build(harp_error *e, const tiny_graph *g, const tiny_symtab *syms, const rt_gpu_opts *o,
                       rt_gpu_model **out);
/* Compile for the device (NVRTC or its disk cache) after checking there is
 * one of the model's architecture; no module, no device memory yet. */
harp_status rt_gpu_prepare(harp_error *e, rt_gpu_model *m);
/* Prepare, then load on the device (once; later calls return HARP_OK at once). */
harp_status rt_gpu_load(harp_error *e, rt_gpu_model *m);
/* inputs[] follow tiny_inputs(g) (weights included, uploaded on the first
 * run); outputs[] follow g->outputs and are allocated here.  Loads first. */
harp_status rt_gpu_run(harp_error *e, rt_gpu_model *m, const ut_tensor *inputs, int ninputs, ut_tensor *outputs);
/* rt_gpu_run downloading straight into the caller's buffers: outputs[k]
 * holds the k-th output's bytes (g->outputs order, its dtype and shape). */
harp_status rt_gpu_run_into(harp_error *e, rt_gpu_model *m, const ut_tensor *inputs, int ninputs, void *const *outputs);
/* Another instance of a prepared (or loaded) model: its own driver context,
 * module, device memory and graph; the build (regions, kernels, CUDA C,
 * cubin) shared with src, which must outlive it.  No rebuild, no NVRTC.
 * Loads on the device now. */
harp_status rt_gpu_instance(harp_error *e, const rt_gpu_model *src, rt_gpu_model **out);
/* rt_gpu_instance on CUDA device `device` (an ordinal; cuDeviceGet): the
 * build must suit it (an sm90 build needs an sm_90 device).  No such device:
 * Unsupported, naming how many there are. */
harp_status rt_gpu_instance_on(harp_error *e, const rt_gpu_model *src, int device, rt_gpu_model **out);
/* One execution on device memory, enqueued on `stream` (a CUstream; NULL:
 * the instance's own) without waiting for it: in[a] is the device address
 * of model input a (the Function's arguments that are not weights, in
 * order), out[k] of output k.  `params` are every input as rt_gpu_run
 * takes them (the weights' data is read, once, on the first run; the other
 * inputs' data is not read).  No host copy: the kernels read and write the
 * caller's memory; the status word (an index out of range) is not read
 * back.  With graphs, a graph is captured per set of addresses and replayed
 * on `stream` while they stay the same. */
harp_status rt_gpu_run_device(harp_error *e, rt_gpu_model *m, const ut_tensor *params, int nparams, const uint64_t *in,
                            const uint64_t *out, void *stream);
/* The launches alone, n times (inputs already uploaded by rt_gpu_run);
 * *ms receives the median milliseconds per run (device events). */
harp_status rt_gpu_time(harp_error *e, rt_gpu_model *m, int warmup, int reps, double *ms);
/* Each launch where it stands in a run (no graph), reps runs after warmup:
 * ms[i] (rt_gpu_nlaunches(m) of them) the median milliseconds of launch i,
 * device events between the launches.  For `harp bench --profile`. */
harp_status rt_gpu_profile(harp_error *e, rt_gpu_model *m, int warmup, int reps, double *ms);
int rt_gpu_nlaunches(const rt_gpu_model *m);
/* Launch i's kernel name and kind ("mma_gemm", "wgmma_gemm", "softmax", ...). */
void rt_gpu_launch_info(const rt_gpu_model *m, int i, const char **kernel, const char **kind);
/* Launch i's region (its Function kernel's name): a kernel that is the same
 * code for several regions (repeated layers) is launched for each. */
const char *rt_gpu_launch_region(const rt_gpu_model *m, int i);
void rt_gpu_free(rt_gpu_model *m);

const char *rt_gpu_source(const rt_gpu_model *m);         /* the CUDA C */
harp_status rt_gpu_dump_json(harp_error *e, const rt_gpu_model *m, char **out); /* --dump gpu, malloc'd */
const char *rt_gpu_arch(const rt_gpu_model *m);           /* "sm80" | "sm90" */
const char *rt_gpu_nvrtc_arch(const rt_gpu_model *m);     /* "sm_80" | "sm_90a" */
double rt_gpu_compile_ms(const rt_gpu_model *m);          /* NVRTC (0 before rt_gpu_load) */
bool rt_gpu_cache_hit(const rt_gpu_model *m);
const struct fn_function *rt_gpu_function(const rt_gpu_model *m);
/* What every stage of its compile made (harp/pipeline.h). */
const struct rt_compile *rt_gpu_stages(const rt_gpu_model *m);
/* Launches by kind: on a template, on a simple row kernel, generic loops. */
void rt_gpu_counts(const rt_gpu_model *m, int *templ, int *simple, int *generic);
/* ---- sessions: one model, many shape bindings -------------------------------
 * A session holds a model whose shapes name free symbols (B, T, ...).  Each
 * run gives a binding.  A binding's ShapeSet (plan_shapeset_class of each
 * symbol: 3..4, 5..8, ..) is one box: when every kernel can read the box's
 * sizes at run time (the generic loop nests can; templates and the simple
 * row kernels print theirs), ONE build (NVRTC, one device arena) serves
 * every binding in it, the sizes and grids set per launch; else each binding
 * is built on first use (NVRTC's disk cache makes rebuilds cheap).
 * opts.fixed names the symbols that stay fixed: they are not the box's, and
 * their values are part of the ShapeSet.  Without them a box spans every
 * symbol; when that box cannot be one build, the cluster's next binding
 * that moves some symbols decides it again with the others held at their
 * values (those that stayed the same at every binding of the cluster so
 * far: box_learned), so a model whose channels are symbols costs one
 * extra build, not one per binding.  A binding outside a box always gets
 * its own build, never a wrong result.
 * With opts.graphs, runs go through ONE executable CUDA Graph per ShapeSet
 * (the binding's cluster, plan_shapeset_key): instantiated for the first
 * binding of the cluster, updated in place (cuGraphExecUpdate) when another
 * binding of the same cluster runs, replayed untouched when the same binding
 * runs again.  The session keeps the RT_GPU_SESSION_MODELS most recently
 * used bindings built; the graph is a view of the given graph, re-read per
 * binding, so g may be freed after rt_gpu_session_new.  opts' plan overrides,
 * precision string and knobs are borrowed for the session's life. */
#define RT_GPU_SESSION_MODELS 8
typedef struct rt_gpu_session rt_gpu_session;
typedef struct rt_gpu_session_stats {
  int clusters;       /* ShapeSets seen */
  int builds;         /* models built: one per binding, again after an eviction */
  int captures;       /* graphs captured: one per built model that ran with graphs */
  int instantiations; /* executable graphs created (one per cluster unless an update was refused) */
  int updates;        /* in-place updates of a cluster's graph to another of its bindings */
  int replays;        /* graph launches */
  int evictions;      /* built models dropped to make room */
  int box_builds;     /* ShapeSets served by one build (kernels read the sizes at run time; counted in builds) */
  int box_fallbacks;  /* ShapeSets built per binding: a kernel prints a size (rt_gpu_session_box says which) */
  int box_learned;    /* boxes decided again, the symbols that stayed the same so far held fixed */
} rt_gpu_session_stats;
harp_status rt_gpu_session_new(harp_error *e, const tiny_graph *g, const rt_gpu_opts *o, rt_gpu_session **out);
/* One execution for this binding (inputs[] as for rt_gpu_run, at its shapes). */
harp_status rt_gpu_session_run(harp_error *e, rt_gpu_session *s, const tiny_symtab *binding, const ut_tensor *inputs,
                             int ninputs, ut_tensor *outputs);
/* The launches alone for a binding that has run (its inputs stay uploaded);
 * sync: wait for them.  Benchmarks of host overhead use this. */
harp_status rt_gpu_session_launch(harp_error *e, rt_gpu_session *s, const tiny_symtab *binding, bool sync);
/* The built model of a binding that has run (NULL otherwise); owned by s. */
const rt_gpu_model *rt_gpu_session_model(rt_gpu_session *s, const tiny_symtab *binding);
void rt_gpu_session_stats_get(const rt_gpu_session *s, rt_gpu_session_stats *out);
/* Whether the ShapeSet of a binding that has run is served by one build for
 * its box; *why (nullable; owned by s): why not, or "" when it is. */
bool rt_gpu_session_box(rt_gpu_session *s, const tiny_symtab *binding, const char **why);
void rt_gpu_session_free(rt_gpu_session *s);

/* PTX of the translation unit (compiles it when NVRTC is there; no GPU needed). */
harp_status rt_gpu_ptx(harp_error *e, rt_gpu_model *m, const char **ptx);

#endif
