/* harp/cpu.h — the CPU backend: compile a prepared Tiny graph into a shared
 * object of generated C, load it, run it.
 *
 *   rt_cpu_compile  the compile pipeline's CPU target (harp/pipeline.h):
 *                   IndexBook -> Poly-View -> regions -> Function -> plans ->
 *                   C -> cc (cached on disk by content hash); then dlopen
 *   rt_cpu_run      one execution with host tensors
 *
 * Every contraction and attention kernel follows its region's Schedule Plan
 * (harp/tune.h chooses it; src/backend/c/contract_c.c maps it onto the
 * template; the knob no_plans keeps the templates' built-in tuning instead).
 *
 * The generated code is self-contained C (its ABI is described in
 * src/backend/c/emit_model.c and docs/c-api.md). */
#ifndef HARP_CPU_H
#define HARP_CPU_H

#include <stdbool.h>
#include <stdint.h>

#include "harp/error.h"
#include "harp/pipeline.h"
#include "harp/tensor.h"
#include "harp/tiny.h"

typedef struct rt_cpu_opts {
  const struct rt_knobs *knobs; /* the configuration (harp/knobs.h); NULL: the table's defaults */
  const char *cc;        /* NULL: the knob cc */
  const char *cflags;    /* NULL: the knob cflags */
  const char *cache_dir; /* NULL: the knob cache_dir */
  bool keep_source;      /* keep the generated C in the model (for --dump c) */
  const char *precision; /* how fp32 contractions compute: NULL or "fp32", "bf16" (docs/options.md);
                            else HARP_E_USAGE */
  bool portable;         /* code for any x86-64 (every ISA variant, CPUID dispatch at load), as
                            standalone packages need; else this machine's ISA only (faster to compile) */
  /* Schedule Plans (harp/tune.h): each region runs with an override, else the
   * plan cache's entry, else its default plan. */
  const struct rt_plan_override *plan_overrides; /* --plan; validated against their regions */
  int nplan_overrides;
  bool no_plan_cache;    /* do not read the plan cache */
  uint64_t max_memory;   /* one instance's arena plus weights at most (0: this machine's memory);
                            beyond it the compile fails with LimitExceeded before any code is made */
  bool keep_analysis;    /* keep the IndexBook and Poly-View (dumps; rt_cpu_compile_variant) */
  /* called after each stage of the compile (harp/pipeline.h rt_stage_hook: the CLI's dumps) */
  rt_stage_hook after_stage;
  void *hook_ctx;
} rt_cpu_opts;

/* The algorithms the CPU templates have (plan_search_opts.algo_mask):
 * implicit GEMM (matmul, conv) and the online softmax (attention). */
unsigned rt_cpu_algo_mask(void);

typedef struct rt_cpu_model rt_cpu_model;

harp_status rt_cpu_compile(harp_error *e, const tiny_graph *g, const tiny_symtab *syms, const rt_cpu_opts *o,
                         rt_cpu_model **out);
/* Another model of base's regions and Function (base compiled with
 * keep_analysis, and outliving it): plans, C and the object again with o's
 * plan overrides (its knobs and compiler too).  The tuner's points. */
harp_status rt_cpu_compile_variant(harp_error *e, const rt_cpu_model *base, const rt_cpu_opts *o, rt_cpu_model **out);
/* A ShapeSet object's pieces (harp/sgen.h): the stages up to the code,
 * no compiler, the source kept, sizes of the symbols gen_syms (values
 * gen_hi in g) read at run time where a template can, the regions those
 * `replay` was formed with when not NULL (rg_options.replay), and then the
 * plans `plans` chose for them when not NULL (unchecked); then that compile
 * built (or found in the cache) and loaded as a model, which owns c from
 * then on (freed on error); then one run at a binding: gb the binding's
 * prepared graph (node for node the compiled one), syms the symbols'
 * values in gen_syms' order. */
harp_status rt_cpu_compile_code(harp_error *e, tiny_graph *g, const tiny_symtab *syms, const rt_cpu_opts *o,
                                const char *const *gen_syms, const int64_t *gen_hi, int ngen,
                                const struct rg_partition *replay, const struct rt_plans *plans, rt_compile **out);
harp_status rt_cpu_adopt(harp_error *e, rt_compile *c, rt_cpu_model **out);
/* A ShapeSet object found through its manifest (src/runtime/sgen_manifest.h):
 * the entry so_name of o's compile cache, loaded as a model of g (prepared
 * at the corner hi; g and syms borrowed) whose Function f (no partition)
 * it takes, freed with the model or on error.  An entry that is gone or
 * damaged fails (the caller compiles the corners instead). */
harp_status rt_cpu_load_cached(harp_error *e, tiny_graph *g, const tiny_symtab *syms, const rt_cpu_opts *o,
                               struct fn_function *f, const char *so_name, rt_cpu_model **out);
harp_status rt_cpu_run_bound(harp_error *e, rt_cpu_model *m, const tiny_graph *gb, const long long *syms,
                             const ut_tensor *inputs, int ninputs, ut_tensor *outputs);
/* inputs[] follow tiny_inputs(g) (weights included); outputs[] follow
 * g->outputs and are allocated here. */
harp_status rt_cpu_run(harp_error *e, rt_cpu_model *m, const ut_tensor *inputs, int ninputs, ut_tensor *outputs);
/* The same for a caller done with the weights: each weight (storage "param")
 * in inputs[] is freed once copied into the parameter block, so a run holds
 * the weights about twice at its peak (the block, then the packed copies
 * model_init makes), not three times.  The other inputs are left alone. */
harp_status rt_cpu_run_taking_weights(harp_error *e, rt_cpu_model *m, ut_tensor *inputs, int ninputs, ut_tensor *outputs);
/* Frees m; a build still running on its thread (knob tier0) is waited for
 * first, so its object reaches the cache. */
void rt_cpu_free(rt_cpu_model *m);
/* Whether the last run went to tier 0 (knob tier0), and what it did there:
 * kernels on the shape-generic fast kernels and on the interpreter, and
 * their milliseconds. */
bool rt_cpu_tier0_last(const rt_cpu_model *m, int *fast, int *interp, double *fast_ms, double *interp_ms);
/* The milliseconds that last tier-0 run waited for its kernels' reading
 * (read on the builder thread while the first run starts; 0 after). */
double rt_cpu_tier0_wait_ms(const rt_cpu_model *m);
/* What ended the builder thread's hold (knob tier0=auto: after its reading
 * it waits for the first tier-0 run to end, at most 1.5 s), and how long it
 * waited (*ms; -1: it never reached the hold).  Read after rt_cpu_wait_build. */
typedef enum rt_cpu_hold {
  RT_HOLD_NONE,      /* never held (no builder thread, or tier0 is not auto) */
  RT_HOLD_FIRST_RUN, /* the first tier-0 run ended */
  RT_HOLD_WAITED,    /* a caller waited for the object first */
  RT_HOLD_TIMEOUT    /* 1.5 s passed */
} rt_cpu_hold;
rt_cpu_hold rt_cpu_builder_hold(const rt_cpu_model *m, double *ms);
/* Whether the compiled object is loaded: true at once without the knob
 * tier0; with it, once the background build finished (then loaded here; a
 * failed build's error into e).  Never waits. */
bool rt_cpu_ready(harp_error *e, rt_cpu_model *m);
/* One run on tier 0 whatever the object's state (harp.h's instances before
 * the object is ready): inputs and outputs as rt_cpu_run's. */
harp_status rt_cpu_run_tier0(harp_error *e, rt_cpu_model *m, const ut_tensor *inputs, int ninputs, ut_tensor *outputs);
/* Wait for a build running in the background (knob tier0=auto) and load its
 * object; *build_ms its wall time (-1: none was running).  Its error, if it
 * failed. */
harp_status rt_cpu_wait_build(harp_error *e, rt_cpu_model *m, double *build_ms);

/* Instances of the compiled code (what rt_cpu_run does once): the generated
 * model_init / model_run / model_free.  inputs[] are the non-weight inputs. */
void *rt_cpu_instance_new(const rt_cpu_model *m, const void *params, size_t nbytes);
/* The same on nthreads threads, the caller's included (<= 0: $HARP_NUM_THREADS, else every online CPU). */
void *rt_cpu_instance_new_threads(const rt_cpu_model *m, const void *params, size_t nbytes, int nthreads);
int rt_cpu_instance_run(const rt_cpu_model *m, void *inst, const void *const *inputs, void *const *outputs);
void rt_cpu_instance_free(const rt_cpu_model *m, void *inst);
/* A ShapeSet object's run at a binding (harp/sgen.h rt_sgen_bind gives syms); an object without
 * symbols (every box one point, LO == HI) runs at its one binding. */
int rt_cpu_instance_run_syms(const rt_cpu_model *m, void *inst, const long long *syms, const void *const *inputs,
                             void *const *outputs);
/* Name of the kernel behind a non-zero model_run code, or NULL. */
const char *rt_cpu_error_kernel(const rt_cpu_model *m, int rc);

/* Kernel k alone, after one rt_cpu_instance_run (the tuner): 0, 100 + k for
 * a kernel error, -1 when there is no kernel k. */
int rt_cpu_instance_run_kernel(const rt_cpu_model *m, void *inst, int k, const void *const *inputs,
                               void *const *outputs);
/* A ShapeSet object's kernel k alone at the binding syms (after an
 * rt_cpu_instance_run_syms at the same binding): codes as above, -1 also
 * when m is not a ShapeSet object. */
int rt_cpu_instance_run_kernel_syms(const rt_cpu_model *m, void *inst, const long long *syms, int k,
                                    const void *const *inputs, void *const *outputs);
/* The kernel that runs region `name`, or -1. */
int rt_cpu_kernel_of(const rt_cpu_model *m, const char *region);

/* The plans the kernels were generated from (applied / note filled). */
const struct rt_plans *rt_cpu_plans(const rt_cpu_model *m);

/* Facts about the compiled model. */
const char *rt_cpu_source(const rt_cpu_model *m); /* the generated C, if kept */
bool rt_cpu_cache_hit(const rt_cpu_model *m);
/* Whether m's C was printed on its builder thread (tier0=auto), not before
 * the compile returned. */
bool rt_cpu_code_in_background(const rt_cpu_model *m);
/* Why the compile cache was not used (the object was built in a temporary
 * directory), or NULL. */
const char *rt_cpu_warning(const rt_cpu_model *m);
double rt_cpu_compile_ms(const rt_cpu_model *m);
const struct fn_function *rt_cpu_function(const rt_cpu_model *m);
/* What every stage of its compile made (harp/pipeline.h): the partition,
 * plans, stage times, and the analysis when kept. */
const struct rt_compile *rt_cpu_stages(const rt_cpu_model *m);

#endif
