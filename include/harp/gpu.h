/* harp/gpu.h — the CUDA backend end to end: compile a prepared Tiny graph
 * into one CUDA C translation unit plus a launch list, compile it with NVRTC
 * (cached on disk), load it with the driver API and run it.
 *
 *   hp_gpu_build     regions (formed for sm80 / sm90) -> Function -> kernels
 *                    (templates, simple row kernels, generic loop nests) ->
 *                    CUDA C; needs neither NVRTC nor a GPU
 *   hp_gpu_load      NVRTC -> cubin (disk cache), cuModuleLoadData; needs a GPU
 *   hp_gpu_run       one execution with host tensors
 *
 * NVRTC and libcuda are loaded with dlopen: without them every step that
 * needs them fails with Unsupported and a reason ("no GPU: ..."), never a
 * crash. */
#ifndef HARP_GPU_H
#define HARP_GPU_H

#include <stdbool.h>
#include <stddef.h>

#include "harp/error.h"
#include "harp/tensor.h"
#include "harp/tiny.h"

typedef struct hp_gpu_opts {
  const char *target;    /* "sm80" | "sm90"; NULL: the device's (sm80 without one) */
  const char *cache_dir; /* NULL: $HARP_CACHE_DIR, $XDG_CACHE_HOME/harp or ~/.cache/harp */
  bool graphs;           /* capture the launches in a CUDA Graph on the first run, replay it after */
  /* --plan: regions' plans by name (validated against their regions on the
   * target's machine); the others keep the cost model's default */
  const struct hp_plan_override *plan_overrides;
  int nplan_overrides;
} hp_gpu_opts;

typedef struct hp_gpu_model hp_gpu_model;

hp_status hp_gpu_build(hp_error *e, const tiny_graph *g, const tiny_symtab *syms, const hp_gpu_opts *o,
                       hp_gpu_model **out);
/* Compile and load on the device (once; later calls return HP_OK at once). */
hp_status hp_gpu_load(hp_error *e, hp_gpu_model *m);
/* inputs[] follow tiny_inputs(g) (weights included, uploaded on the first
 * run); outputs[] follow g->outputs and are allocated here.  Loads first. */
hp_status hp_gpu_run(hp_error *e, hp_gpu_model *m, const hp_tensor *inputs, int ninputs, hp_tensor *outputs);
/* The launches alone, n times (inputs already uploaded by hp_gpu_run);
 * *ms receives the median milliseconds per run (device events). */
hp_status hp_gpu_time(hp_error *e, hp_gpu_model *m, int warmup, int reps, double *ms);
void hp_gpu_free(hp_gpu_model *m);

const char *hp_gpu_source(const hp_gpu_model *m);         /* the CUDA C */
hp_status hp_gpu_dump_json(hp_error *e, const hp_gpu_model *m, char **out); /* --dump gpu, malloc'd */
const char *hp_gpu_arch(const hp_gpu_model *m);           /* "sm80" | "sm90" */
const char *hp_gpu_nvrtc_arch(const hp_gpu_model *m);     /* "sm_80" | "sm_90a" */
double hp_gpu_compile_ms(const hp_gpu_model *m);          /* NVRTC (0 before hp_gpu_load) */
bool hp_gpu_cache_hit(const hp_gpu_model *m);
const struct hp_function *hp_gpu_function(const hp_gpu_model *m);
/* Launches by kind: on a template, on a simple row kernel, generic loops. */
void hp_gpu_counts(const hp_gpu_model *m, int *templ, int *simple, int *generic);
/* PTX of the translation unit (compiles it when NVRTC is there; no GPU needed). */
hp_status hp_gpu_ptx(hp_error *e, hp_gpu_model *m, const char **ptx);

#endif
