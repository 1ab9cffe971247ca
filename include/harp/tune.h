/* harp/tune.h — the plans a compiled model uses, and the tuner's store.
 *
 * Every region of a formed partition gets a Schedule Plan (harp/plan.h),
 * chosen in this order (docs/plan.md §14):
 *   1. an override for that region (`--plan`), validated against the region;
 *   2. the plan cache: the best plan `harp tune` measured for (model hash,
 *      region, ShapeSet, machine), re-targeted to this binding and validated
 *      (an entry that is unreadable or no longer fits is ignored, with a note);
 *   3. the default: plan_default on the region's plan_info, restricted to the
 *      algorithms the backend has.
 * The backend then maps the plan onto its kernel (src/backend/c/contract_c.c
 * for the CPU) and records whether it did (`applied`) and what it changed or
 * ignored (`note`).  `--dump plan` writes all of it as a plan list.
 *
 * The plan cache lives under the compile cache directory (rt_cc_cache_dir):
 * one small JSON file per key, written atomically (temp file + rename), so
 * concurrent processes are safe. */
#ifndef HARP_TUNE_H
#define HARP_TUNE_H

#include <stdbool.h>
#include <stdint.h>

#include "harp/error.h"
#include "harp/function.h"
#include "harp/plan.h"
#include "harp/tensor.h"
#include "harp/tiny.h"

#define RT_MACHINE_ID_MAX 160
#define RT_PLAN_NOTE_MAX 320

/* Where a region's plan came from. */
typedef enum rt_plan_source {
  RT_PLAN_NONE,     /* the region has no plan (no search space, e.g. a gather) */
  RT_PLAN_DEFAULT,  /* plan_default: the cost model's best point */
  RT_PLAN_OVERRIDE, /* --plan */
  RT_PLAN_CACHED,   /* the plan cache (harp tune) */
  RT_PLAN_TUNING    /* a point harp tune is measuring */
} rt_plan_source;
const char *rt_plan_source_name(rt_plan_source s); /* "none" "default" "override" "cache" "tuning" */

/* A plan given for one region by name.  file/text (nullable) locate errors;
 * they must outlive the compilation. */
typedef struct rt_plan_override {
  const char *region;
  plan_t plan;
  const char *file, *text;
  rt_plan_source source; /* RT_PLAN_OVERRIDE, or RT_PLAN_TUNING for the tuner's points */
} rt_plan_override;

/* What a region runs with. */
typedef struct rt_plan_choice {
  const char *region;    /* borrowed from the partition */
  rt_plan_source source;
  bool has_plan;
  plan_t plan;           /* filled from the region and validated */
  bool has_cost;
  plan_cost cost;        /* plan_cost_of on the region */
  bool applied;          /* set by the backend: its kernel follows this plan */
  char note[RT_PLAN_NOTE_MAX]; /* what was ignored, or why a fallback happened; may be empty */
  bool fallback;         /* a plan could not be used: a cache entry ignored, or the template
                            refused the plan (note says which) */
} rt_plan_choice;

/* The choices for one partition. */
typedef struct rt_plans {
  char model[17];                     /* rt_model_hash as 16 hex digits */
  char shapeset[PLAN_SHAPESET_MAX];   /* plan_shapeset_key of the binding */
  char binding[PLAN_SHAPESET_MAX];    /* the binding itself, "M=1000;N=64" */
  char machine[RT_MACHINE_ID_MAX];    /* rt_machine_id */
  plan_machine mach;
  bool compiled;                      /* a backend generated code from them (applied/note are its) */
  int n;                              /* = the partition's regions */
  rt_plan_choice *choice;             /* malloc'd, per region in partition order */
} rt_plans;

typedef struct rt_plan_opts {
  const rt_plan_override *overrides;
  int noverrides;
  bool no_cache;            /* do not read the plan cache */
  const char *cache_dir;    /* NULL: rt_cc_cache_dir's default */
  plan_search_opts search;  /* the algorithms the backend has (algo_mask 0: all) */
} rt_plan_opts;

/* Hash of the prepared graph's canonical Tiny IR (symbolic shapes: one hash
 * for every binding of a model). */
uint64_t rt_model_hash(const tiny_graph *g);
/* "cpu:<model name>:<isa>:<cores>c" or "sm80:<name>", sanitised. */
void rt_machine_id(const plan_machine *m, char *out, size_t cap);

/* Choose every region's plan (order above).  An override that names no
 * region of p, or does not fit its region, is an error (located in its
 * text).  p must come from rg_form (regions carry rg_info). */
harp_status rt_plans_choose(harp_error *e, const rg_partition *p, const tiny_graph *g, const tiny_symtab *syms,
                          const plan_machine *m, const rt_plan_opts *o, rt_plans *out);
void rt_plans_free(rt_plans *ps);
/* The plan list of `--dump plan` (docs/plan.md §14), malloc'd. */
harp_status rt_plans_dump_json(harp_error *e, const rt_plans *ps, char **out);
/* Overrides from a `--plan` argument: "REGION=FILE" (one plan, JSON or DSL,
 * or REGION's entry of a plan list; split at the first '=') or "FILE" (a plan
 * list; also when the whole argument names an existing file).  Appends to *ov (realloc'd); texts and names are
 * kept in *keep (one malloc'd block per file; free with free()). */
harp_status rt_plan_overrides_load(harp_error *e, const char *arg, plan_arch arch, rt_plan_override **ov, int *n,
                                 char ***keep, int *nkeep);

/* ---- the plan cache ---------------------------------------------------------------- */
typedef struct rt_plan_key {
  const char *model, *region, *shapeset, *machine;
} rt_plan_key;

typedef struct rt_plan_entry {
  plan_t plan;
  char binding[PLAN_SHAPESET_MAX]; /* the binding it was measured at */
  double median_ms;                /* its measured median */
  double default_ms;               /* the default plan's median in the same run */
  int points, repeat;              /* points measured, repeats per point */
  char tuned_at[32];               /* UTC, ISO 8601 */
} rt_plan_entry;

/* DIR/plans/<16 hex of the key>.json (malloc'd). */
char *rt_plan_cache_path(const char *cache_dir, const rt_plan_key *k);
/* *found = false when there is no entry.  An entry that cannot be read, is
 * not valid JSON, is for another key (hash collision) or holds a bad plan is
 * ignored: *found = false and note says why.  Errors only for out of memory. */
harp_status rt_plan_cache_load(harp_error *e, const char *cache_dir, const rt_plan_key *k, plan_arch arch,
                             rt_plan_entry *out, bool *found, char *note, size_t cap);
/* Write the entry atomically; *path (nullable) receives the file (malloc'd). */
harp_status rt_plan_cache_store(harp_error *e, const char *cache_dir, const rt_plan_key *k, const rt_plan_entry *in,
                              char **path);

/* ---- the tuner's figures ------------------------------------------------------------ */
/* Spearman's rank correlation of x and y (average ranks for ties); NaN when
 * n < 2 or one side is constant. */
double rt_spearman(const double *x, const double *y, int n);
/* One plan on one line: its DSL statements joined by "; ". malloc'd. */
char *rt_plan_oneline(const plan_t *p);

/* One row of the tuning log (seed 000 §9: FLOPs, Bytes, occ, estimate,
 * actual, plan; plus when, where and for which ShapeSet). */
typedef struct rt_tune_row {
  const char *timestamp, *machine, *model, *shapeset, *binding, *region;
  int point;          /* 0-based, in estimate order */
  bool is_default, is_best;
  double flops, bytes, occ;
  double estimate_ms; /* plan_cost_of's time_est */
  double actual_ms;   /* the measured median */
  int repeat;
  const plan_t *plan;
} rt_tune_row;
/* <cache dir>/tune.csv, the default log (malloc'd); cache_dir NULL: the default. */
char *rt_tune_default_log(const char *cache_dir);
/* The header line, without the newline. */
const char *rt_tune_csv_header(void);
/* Append rows to a CSV file (created with the header when missing or empty),
 * each row with one write(2) on an O_APPEND descriptor so that concurrent
 * tuners interleave whole lines. */
harp_status rt_tune_log_append(harp_error *e, const char *path, const rt_tune_row *rows, int n);

/* ---- the tuner (harp tune, docs/plan.md §16) --------------------------------------------- */
/* For each region whose kernel follows its plan (a CPU template), measure
 * the best `budget` points of plan_enumerate (the default plan is the first
 * of them), each in a model compiled with that point for that region; time
 * the region's kernel alone (model_run_kernel), all points interleaved:
 * every round runs each point once untimed (pool and caches warm) and once
 * timed, after `warmup` untimed rounds; the median of `repeat` rounds.  The
 * best median goes to the plan cache; every point to the CSV log. */
typedef struct rt_tune_progress {
  const char *region;
  const char *phase; /* "compile" | "measure" | "done" */
  int region_index, nregions;
  int done, total;   /* points compiled, or rounds measured */
  double best_ms;    /* best median so far (measure, done), else 0 */
} rt_tune_progress;

typedef struct rt_tune_opts {
  int budget;                /* points per region; 0: 12; at most PLAN_TUNE_POINTS */
  int repeat, warmup;        /* timed rounds (0: 20) and untimed ones first (0: 3; < 0: none) */
  const char *cache_dir;     /* compile and plan cache; NULL: the default */
  const char *const *regions; /* tune only these (NULL: every region with a plan a template follows) */
  int nregions;
  bool no_store;             /* measure and log, but do not write the plan cache */
  bool recalibrate;         /* measure the CPU's calibration again (docs/plan.md §19); it is
                               measured anyway when the cache directory has none or a bad one */
  const char *cc, *cflags;   /* as rt_cpu_opts */
  const struct rt_knobs *knobs; /* the configuration (harp/knobs.h); NULL: the table's defaults */
  int (*progress)(void *ctx, const rt_tune_progress *p); /* non-zero: stop (HARP_E_CANCELLED) */
  void *progress_ctx;
} rt_tune_opts;

typedef struct rt_tune_point {
  plan_t plan;
  plan_cost cost;           /* plan_cost_of: the estimate */
  bool applied;             /* the template followed it (else its built-in tuning ran) */
  int same_as;              /* index of an earlier point with the same generated code, or -1 */
  double median_ms, min_ms; /* measured */
} rt_tune_point;

typedef struct rt_tune_region {
  const char *region;       /* borrowed from the result's model */
  int kernel;
  int npoints;
  int calls;                /* kernel calls per timed sample (short kernels: several) */
  rt_tune_point *pts;       /* in estimate order; pts[0] is the default plan */
  int best;                 /* index of the smallest median */
  double spearman;          /* estimates vs medians (NaN when undefined) */
  char *cache_path;         /* where the best plan was stored (NULL with no_store) */
} rt_tune_region;

typedef struct rt_tune_result {
  char model[17], shapeset[PLAN_SHAPESET_MAX], binding[PLAN_SHAPESET_MAX], machine[RT_MACHINE_ID_MAX];
  int repeat, warmup;
  char calib_path[1024];     /* the CPU calibration the estimates used ("": none, knob cpu_calib off) */
  bool calib_measured;       /* measured by this run (first use, --recalibrate, or a bad file) */
  double calib_s;            /* how long that took */
  char calib_why[320];       /* why a file was measured again (its error), or "" */
  int nregions;
  rt_tune_region *r;
  struct rt_cpu_model *base; /* the model with default plans (owns the region names) */
  struct rt_gpu_model *gpu_base; /* rt_tune_cuda's: the same on the GPU */
} rt_tune_result;

/* inputs[] as rt_cpu_run takes them (tiny_inputs order, weights included).
 * First the CPU's calibration (docs/plan.md §19): read from the cache
 * directory, or measured and stored when absent, bad or o->recalibrate
 * (not with the knob cpu_calib off); out->calib_* say which. */
harp_status rt_tune_cpu(harp_error *e, const tiny_graph *g, const tiny_symtab *syms, const ut_tensor *inputs, int ninputs,
                      const rt_tune_opts *o, rt_tune_result *out);
void rt_tune_result_free(rt_tune_result *r);
/* The same search on the GPU (harp tune --backend cuda; tune_cuda.c): every
 * point built for the device of go (its target, knobs; NULL: defaults),
 * loaded, its region's launches timed with device events, the points
 * interleaved; the best stored in the plan cache under the GPU's machine id
 * and the ShapeSet, which later CUDA compiles read.  No GPU (or no driver):
 * Unsupported, before anything is measured. */
struct rt_gpu_opts;
harp_status rt_tune_cuda(harp_error *e, const tiny_graph *g, const tiny_symtab *syms, const ut_tensor *inputs, int ninputs,
                         const rt_tune_opts *o, const struct rt_gpu_opts *go, rt_tune_result *out);
/* Shared by both tuners: the result's keys from ps, --region checked,
 * out->r allocated, *ntune the regions to tune. */
harp_status rt_tune_begin(harp_error *e, const rt_tune_opts *o, const rt_plans *ps, rt_tune_result *out, int *ntune);
/* tr->best (smallest median) and tr->spearman (estimates vs medians). */
harp_status rt_tune_rank(harp_error *e, rt_tune_region *tr);
/* tr's best point into the plan cache under out's keys (tr->cache_path). */
harp_status rt_tune_store(harp_error *e, const char *cache_dir, const rt_tune_result *out, rt_tune_region *tr);
/* o's --region names that ps has no region of: a usage error. */
harp_status rt_tune_check_regions(harp_error *e, const rt_tune_opts *o, const rt_plans *ps);
/* Whether o tunes region (no --region: every one). */
bool rt_tune_wanted(const rt_tune_opts *o, const char *region);
/* The `budget` points to measure of n (plan_enumerate's order, the default
 * first): the best by estimate, but every algo_choice the n have keeps its
 * best point (it replaces the worst point of an algorithm kept twice), so a
 * region whose tilings of one algorithm tie still measures the others.
 * Rearranges pts/costs; returns how many to measure. */
int rt_tune_pick(plan_t *pts, plan_cost *costs, int n, int budget);
/* Log rows for one tuned region (timestamp: UTC ISO 8601, caller's). */
harp_status rt_tune_log_region(harp_error *e, const char *path, const rt_tune_result *res, int region, const char *timestamp);
/* Every region of res appended to the log `log` (NULL: cache_dir's
 * tune.csv, cache_dir NULL: the default one), stamped now: *path
 * (malloc'd, also on failure, or NULL) and the *rows written. */
harp_status rt_tune_log_all(harp_error *e, const char *log, const char *cache_dir, const rt_tune_result *res, char **path,
                            int *rows);

#endif
