/* harp/pipeline.h — one compile pipeline: a compile object runs named
 * stages in order, each stage named as its `--dump`, and keeps what each
 * made.  A target (interp, cpu, cuda) is a descriptor with a small vtable;
 * its driver is one short function that lists its stages.  Everything that
 * describes or runs a compiled model (the backends, the dumps, `harp viz`,
 * `harp run --backend regions`, the tuner) reads the stage results of one
 * compile: nothing forms regions a second time.
 *
 *   stage      made                              --dump
 *   load       the graph                         frontend
 *   normalize  the prepared Tiny IR              tiny
 *   indexbook  IndexBook                         indexbook
 *   poly_view  Poly-View                         poly_view
 *   regions    the partition (rg_form)           region
 *   function   the Function and its arena        function
 *   plans      each region's Schedule Plan       plan
 *   kernels    the kernel list (CUDA)            gpu
 *   code       the translation unit              c | cu
 *   build      the shared object (CPU; CUDA: NVRTC, in gpu.c)
 *
 *   rt_compile *c;
 *   rt_compile_run(&e, &rt_target_cpu, g, syms, &opts, &c);   the target's stages
 *   c->part, c->f, c->plans, c->source ...                    read the results
 *   rt_compile_free(c);
 *
 * A compile stops after opts.until; a failing stage stops it with the
 * stage's error.  opts.after_stage runs after each stage that ran (a test's
 * fault injection: an error from it stops the compile there), and every
 * stage's wall time is kept in c->ms. */
#ifndef HARP_PIPELINE_H
#define HARP_PIPELINE_H

#include <stdbool.h>

#include "harp/error.h"
#include "harp/function.h"
#include "harp/knobs.h"
#include "harp/plan.h"
#include "harp/poly.h"
#include "harp/tiny.h"
#include "harp/tune.h"

typedef enum rt_stage {
  RT_STAGE_LOAD,
  RT_STAGE_NORMALIZE,
  RT_STAGE_INDEXBOOK,
  RT_STAGE_POLY_VIEW,
  RT_STAGE_REGIONS,
  RT_STAGE_FUNCTION,
  RT_STAGE_PLANS,
  RT_STAGE_KERNELS,
  RT_STAGE_CODE,
  RT_STAGE_BUILD,
  RT_NSTAGES
} rt_stage;

typedef struct rt_target rt_target;
typedef struct rt_compile rt_compile;

/* "load", "normalize", "indexbook", ... */
const char *rt_stage_name(rt_stage s);
/* The --dump that shows stage s's result on target t ("region", "c", "gpu",
 * ...), or NULL when it has none there. */
const char *rt_stage_dump(rt_stage s, const rt_target *t);
/* The stage a --dump name belongs to (on any target), or -1. */
int rt_stage_of_dump(const char *dump);

/* A target: what its stages need to know about it, and its driver. */
struct rt_target {
  const char *name;          /* "interp" | "cpu" | "cuda" */
  const char *machines[3];   /* the --target names it compiles for, NULL-terminated ("sm80", "sm90") */
  const char *kernels_dump;  /* --dump of its kernels stage, or NULL */
  const char *code_dump;     /* --dump of its code stage, or NULL */
  rt_stage regions_final;    /* the partition is final once this stage ran (CUDA forms
                                again after kernels when a template declined an attention) */
  harp_status (*drive)(rt_compile *c); /* its stages, in order (rt_stage_run) */
  void (*release)(rt_compile *c);     /* what its own stages made (c->tu ...) */
};
extern const rt_target rt_target_interp, rt_target_cpu, rt_target_cuda;
/* The target named `name`, or NULL. */
const rt_target *rt_target_find(const char *name);
/* The target of a machine name (`--target`): "cpu", or a CUDA architecture
 * ("sm80", "sm90") as the cuda target with *arch that name (NULL for the
 * CPU).  NULL when there is no such machine. */
const rt_target *rt_target_of_machine(const char *name, const char **arch);
/* The target whose own stage makes dump (its kernels or code stage: "c",
 * "gpu", "cu"), or NULL when every target's stages can make it. */
const rt_target *rt_target_of_dump(const char *dump);

/* Called after each stage that ran; an error stops the compile. */
typedef harp_status (*rt_stage_hook)(void *ctx, harp_error *e, const rt_compile *c, rt_stage s);

typedef struct rt_compile_opts {
  const rt_knobs *knobs;  /* NULL: the table's defaults (copied into the compile) */
  rt_stage until;         /* the last stage to run; RT_STAGE_LOAD (0): every stage */
  bool normalize;         /* the graph is not prepared yet: normalize (tiny_prepare) runs first */
  bool keep_analysis;     /* keep the IndexBook and Poly-View after code (dumps, variants) */
  /* CPU */
  bool keep_source;       /* keep c->source after build */
  bool portable;          /* code for any x86-64 (packages); else this CPU's ISA */
  bool greedy_regions;    /* regions by the greedy pass alone, no exact windows: tier 0's partition, the
                             exact one formed after it (rt_cpu_exact_stages) */
  uint64_t max_memory;    /* one instance's arena plus weights at most (0: this machine's memory) */
  const char *const *gen_syms; /* a ShapeSet object (harp/sgen.h): sizes of these symbols read at run
                                  time where a template can; gen_hi their values in this compile */
  const int64_t *gen_hi;
  int ngen_syms;
  const struct rg_partition *replay_regions; /* form the regions this partition's rg_form formed
                                                (rg_options.replay), not by the cost model */
  const struct rt_plans *replay_plans; /* with replay_regions: each region runs the plan these chose for
                                          it, unchecked against this binding (a ShapeSet's lower corner) */
  /* CUDA */
  const char *arch;       /* "sm80" | "sm90" (NULL: sm80) */
  const char *precision;  /* how fp32 contractions compute: CUDA "tf32" (NULL), "fp32", "fp16",
                             "bf16"; CPU "fp32" (NULL) or "bf16" */
  /* plans (harp/tune.h): overrides, else the plan cache (CPU), else the default */
  const struct rt_plan_override *plan_overrides;
  int nplan_overrides;
  bool no_plan_cache;
  rt_stage_hook after_stage;
  void *hook_ctx;
} rt_compile_opts;

/* What the stages made, for reading (the compile owns it all). */
struct rt_compile {
  const rt_target *target;
  rt_knobs knobs;
  rt_compile_opts opts;          /* pointers in it are the caller's */
  tiny_graph *g;                 /* normalize prepares it in place; otherwise read only */
  const tiny_symtab *syms;
  plan_machine machine;          /* the machine regions are formed for */
  struct ib_book *ib;            /* indexbook (NULL once dropped) */
  poly_view *pv;                 /* poly_view (NULL once dropped) */
  rg_partition *part;            /* regions */
  fn_function *f;                /* function */
  rt_plans plans;                /* plans (n == 0 when not run) */
  struct cuda_model_tu *tu;      /* kernels (CUDA) */
  char *source;                  /* code: C or CUDA C */
  size_t source_bytes;           /* code: its length (kept when the source is freed) */
  int source_kernels;            /* code: the kernels it holds (CPU: the Function's) */
  char *so_path;                 /* build (CPU): the shared object */
  bool cache_hit;                /* build: the object came from the disk cache */
  bool so_temp;                  /* build: so_path lies in a temporary directory (rt_cache_discard once loaded) */
  char cc_warning[512];          /* build: why the compile cache was not used ("": it was) */
  int arch, math;                /* CUDA: cuda_arch, cuda_math */
  bool split_attention;          /* CUDA: fp32 attentions formed as matmuls + softmax */
  bool ran[RT_NSTAGES];          /* which stages ran */
  double ms[RT_NSTAGES];         /* their wall time, milliseconds */
  /* private */
  const rt_compile *base;        /* a variant's: results before plans are borrowed from it */
  harp_error *e;
  harp_status status;
  bool stopped;
  struct ut_arena *arena;        /* scratch of the code stage */
};

/* Run target t's stages on g (prepared, unless opts->normalize) bound by
 * syms; both must outlive the compile.  On failure *out is NULL. */
harp_status rt_compile_run(harp_error *e, const rt_target *t, tiny_graph *g, const tiny_symtab *syms,
                         const rt_compile_opts *o, rt_compile **out);
/* A variant of a finished compile: plans, code and build again on base's
 * regions and Function (base compiled with keep_analysis and outlives the
 * variant); o's plan options and knobs are the variant's.  The tuner's
 * points. */
harp_status rt_compile_variant(harp_error *e, const rt_compile *base, const rt_compile_opts *o, rt_compile **out);
void rt_compile_free(rt_compile *c);

/* For target drivers: run stage s with fn unless the compile failed or is
 * past opts.until; times it, records it, calls the hook. */
typedef harp_status (*rt_stage_fn)(rt_compile *c);
void rt_stage_run(rt_compile *c, rt_stage s, rt_stage_fn fn);
/* The stages every target shares. */
harp_status rt_stage_normalize(rt_compile *c);
harp_status rt_stage_indexbook(rt_compile *c);
harp_status rt_stage_poly_view(rt_compile *c);
/* normalize, indexbook, poly_view: the analysis every compiling target runs first. */
void rt_stages_analysis(rt_compile *c);
/* Regions with the target's options (machine, analysis and no_fusion
 * filled in here); the Function with its options; the plans with its
 * algorithms.  A stage run again replaces what it made before. */
struct rg_options;
harp_status rt_form_regions(rt_compile *c, struct rg_options *ro);
/* The interpreter's partition: one region per node that computes. */
harp_status rt_stage_singleton_regions(rt_compile *c);
harp_status rt_build_function(rt_compile *c, const fn_options *fo);
/* Every region's plan: defaults from algo_mask; a --plan may also name
 * the algorithms of explicit_mask (plan_search_opts.explicit_mask). */
harp_status rt_choose_plans(rt_compile *c, unsigned algo_mask, unsigned explicit_mask, bool no_cache);
/* Give back the IndexBook and Poly-View (unless opts.keep_analysis). */
void rt_compile_drop_analysis(rt_compile *c);

/* One line per stage that ran: "regions 12.3 ms" (for --time-stages); the
 * code stage adds the unit's size and kernels, the build whether the
 * compiler ran ("code 54.6 ms (1006 KiB of C, 56 kernels), build 3717.0 ms (cc)"). */
void rt_compile_times(const rt_compile *c, char *buf, size_t cap);

#endif
