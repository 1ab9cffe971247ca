/* tune.c — the tuner (seed 000 §6): measure the search space of each
 * region's plan on this CPU, keep the best in the plan cache.
 * Needs: the CPU backend (rt_cpu_compile, model_run_kernel), plan_enumerate,
 * plans.c / plan_cache.c / tune_log.c, calibrate.c (first use).  Gives: rt_tune_cpu, rt_tune_pick, rt_tune_wanted,
 * rt_tune_check_regions, rt_tune_begin, rt_tune_rank, rt_tune_store,
 * rt_tune_result_free, rt_tune_log_region.
 *
 * Per region: the best `budget` points of plan_enumerate (restricted to the
 * CPU's algorithms; the first is the default plan; every algorithm's best
 * point among them, rt_tune_pick), one compiled model per
 * point with that point as the region's plan (the other regions keep their
 * defaults; the compile cache makes repeated points free).  Every point is
 * a variant of the base model's compile (rt_cpu_compile_variant): its
 * regions and Function are formed once, plans, C and objects per point.  Points whose
 * generated C is identical (plan comments aside) share one measurement.  Timing is per kernel:
 * after one full model_run fills the arena, model_run_kernel(k) runs the
 * region's kernel alone.  All points of a region are measured interleaved,
 * so that the machine's noise (other users of the cores) falls on all of
 * them alike (in a shuffled order each round): `warmup` untimed rounds, then
 * `repeat` rounds in which every
 * point gets a fresh instance (one full run), runs once untimed (its thread
 * pool and caches warm) and once timed, and is freed again: one instance
 * alive at a time (issue 27); each point's figure is its median.  A
 * timed sample of a kernel shorter than SAMPLE_MS runs it several times back
 * to back (the same count for every point of the region) and counts the
 * time per call. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harp/cpu.h"
#include "harp/function.h"
#include "harp/gpu.h"
#include "harp/knobs.h"
#include "harp/pipeline.h"
#include "harp/region.h"
#include "harp/tune.h"
#include "util/util.h"

#include "calib.h"

/* A compiled point with an instance ready to run. */
typedef struct runner {
  rt_cpu_model *m;
  void *inst;
  fn_constpool cp;
  const void **in;
  void **out;
  ut_tensor *outs;
  int nout;
  double *times;
} runner;

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* A fresh instance of r's model (its own thread pool and scratch) and one
 * full run, so every kernel's inputs are in place in its arena. */
static harp_status runner_open(harp_error *e, runner *r) {
  if (!(r->inst = rt_cpu_instance_new(r->m, r->cp.data, r->cp.size)))
    return ut_fail(e, HARP_E_NO_MEMORY, NULL, "model_init failed");
  int rc = rt_cpu_instance_run(r->m, r->inst, r->in, r->out);
  if (rc) return ut_fail(e, HARP_E_INVALID_ARG, rt_cpu_error_kernel(r->m, rc), "model_run failed with %d", rc);
  return HARP_OK;
}

/* r's instance freed: its pool's workers joined. */
static void runner_close(runner *r) {
  if (r->m && r->inst) rt_cpu_instance_free(r->m, r->inst);
  r->inst = NULL;
}

static void runner_free(runner *r) {
  if (!r) return;
  runner_close(r);
  for (int k = 0; k < r->nout; k++) ut_tensor_free(&r->outs[k]);
  free(r->outs);
  free(r->in);
  free(r->out);
  free(r->times);
  fn_constpool_free(&r->cp);
  rt_cpu_free(r->m);
  memset(r, 0, sizeof *r);
}

/* Inputs, outputs and constants for r's model; one instance made and run
 * (the model works), then freed again: a point's instance lives only
 * while it is measured (runner_open). */
static harp_status runner_init(harp_error *e, runner *r, const tiny_graph *g, const ut_tensor *inputs, int ninputs,
                             int repeat) {
  const fn_function *f = rt_cpu_function(r->m);
  if (ninputs != f->nargs) return ut_fail(e, HARP_E_INPUT_MISMATCH, NULL, "%d inputs given, the model has %d", ninputs, f->nargs);
  ut_tensor *params = ut_xcalloc((size_t)ninputs + 1, sizeof *params);
  r->in = ut_xcalloc((size_t)ninputs + 1, sizeof *r->in);
  r->nout = g->noutputs;
  r->outs = ut_xcalloc((size_t)r->nout + 1, sizeof *r->outs);
  r->out = ut_xcalloc((size_t)r->nout + 1, sizeof *r->out);
  r->times = ut_xcalloc((size_t)repeat + 1, sizeof *r->times);
  harp_status st = HARP_OK;
  if (!params || !r->in || !r->outs || !r->out || !r->times) st = ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  int np = 0, ni = 0;
  for (int a = 0; a < f->nargs && !st; a++) {
    if (f->buffers[f->args[a]].kind == FN_PARAM) params[np++] = inputs[a];
    else r->in[ni++] = inputs[a].data;
  }
  if (!st) st = fn_constpool_from_tensors(e, f, params, np, &r->cp);
  for (int k = 0; k < r->nout && !st; k++) {
    const tiny_node *n = &g->nodes[g->outputs[k]];
    int64_t shape[TINY_MAX_RANK];
    for (int d = 0; d < n->shape.rank; d++) shape[d] = n->shape.d[d].n;
    st = ut_tensor_alloc(e, &r->outs[k], n->dtype, n->shape.rank, shape);
    if (!st) r->out[k] = r->outs[k].data;
  }
  free(params);
  if (!st) st = runner_open(e, r);
  runner_close(r);
  return st;
}

/* Kernel k `times` times back to back; *ms (nullable): the time per call. */
static harp_status run_kernel(harp_error *e, runner *r, int k, int times, double *ms) {
  double t0 = ut_now_ms();
  for (int i = 0; i < times; i++) {
    int rc = rt_cpu_instance_run_kernel(r->m, r->inst, k, r->in, r->out);
    if (rc) return ut_fail(e, HARP_E_INTERNAL, rt_cpu_error_kernel(r->m, rc), "model_run_kernel(%d) returned %d", k, rc);
  }
  double t1 = ut_now_ms();
  if (ms) *ms = (t1 - t0) / times;
  return HARP_OK;
}

/* A timed sample should last about this long: a kernel shorter than that is
 * run several times back to back, as the kernels of a model run do, so
 * that waking the thread pool does not dominate it. */
#define SAMPLE_MS 1.0
#define MAX_CALLS 1000

/* Report to o's progress callback; HARP_E_CANCELLED (into e) when it says stop. */
static harp_status progress(harp_error *e, const rt_tune_opts *o, const char *region, const char *phase, int ri, int nr,
                            int done, int total, double best) {
  if (!o || !o->progress) return HARP_OK;
  rt_tune_progress p = {region, phase, ri, nr, done, total, best};
  if (o->progress(o->progress_ctx, &p)) return ut_fail(e, HARP_E_CANCELLED, region, "tuning cancelled (%s)", phase);
  return HARP_OK;
}

harp_status rt_tune_check_regions(harp_error *e, const rt_tune_opts *o, const rt_plans *ps) {
  for (int k = 0; o && k < o->nregions; k++) {
    bool found = false;
    for (int i = 0; i < ps->n && !found; i++) found = !strcmp(ps->choice[i].region, o->regions[k]);
    if (!found) return ut_fail(e, HARP_E_USAGE, o->regions[k], "--region %s: the model has no region of that name", o->regions[k]);
  }
  return HARP_OK;
}

bool rt_tune_wanted(const rt_tune_opts *o, const char *region) {
  if (!o || !o->regions) return true;
  for (int i = 0; i < o->nregions; i++)
    if (!strcmp(o->regions[i], region)) return true;
  return false;
}

/* The same generated code, the plan comments aside (two plans
 * the template reads alike). */
static const char *skip_plan_comment(const char *s) {
  while (!strncmp(s, "/* plan:", 8)) {
    const char *end = strstr(s, "*/");
    if (!end) return s;
    s = end + 2;
  }
  return s;
}

static bool same_code(const char *a, const char *b) {
  for (;;) {
    a = skip_plan_comment(a);
    b = skip_plan_comment(b);
    if (*a != *b) return false;
    if (!*a) return true;
    a++, b++;
  }
}

/* The knobs of a tuning run (o->knobs, else the defaults) with o's
 * compiler, flags and cache over them, into *k; the options of its compiles. */
static rt_cpu_opts tune_cpu_opts(const rt_tune_opts *o, rt_knobs *k) {
  *k = *rt_knobs_or_default(o ? o->knobs : NULL);
  if (o) rt_knobs_set_build(k, o->cc, o->cflags, o->cache_dir);
  return (rt_cpu_opts){.knobs = k, .no_plan_cache = true};
}

/* One region's tuning: its points' models (rs[i].m, NULL for a point
 * whose kernel is another's) and where the results go. */
typedef struct tuning {
  harp_error *e;
  const rt_tune_opts *o;
  rt_tune_region *tr;
  runner *rs;
  char **src; /* each measured point's C, for same_code */
  int n, ri, nr, repeat, warmup;
} tuning;

/* Point i compiled as a variant of base with pts[i]: *pt filled; its
 * runner unless its kernel is an earlier point's (same_as). */
static harp_status compile_point(tuning *t, const rt_cpu_model *base, const rg_info *info, const plan_t *plan,
                                 const plan_cost *cost, const ut_tensor *inputs, int ninputs, int i) {
  rt_tune_point *pt = &t->tr->pts[i];
  t->tr->npoints = i + 1;
  pt->plan = *plan;
  pt->cost = *cost;
  pt->same_as = -1;
  plan_fill_from_region(&pt->plan, &info->plan_info);
  rt_plan_override ov = {t->tr->region, pt->plan, NULL, NULL, RT_PLAN_TUNING};
  rt_knobs k;
  rt_cpu_opts co = tune_cpu_opts(t->o, &k);
  co.keep_source = true, co.plan_overrides = &ov, co.nplan_overrides = 1;
  runner *r = &t->rs[i];
  if (rt_cpu_compile_variant(t->e, base, &co, &r->m)) return t->e->code;
  const rt_plans *ps = rt_cpu_plans(r->m);
  for (int q = 0; q < ps->n; q++)
    if (!strcmp(ps->choice[q].region, t->tr->region)) pt->applied = ps->choice[q].applied;
  const char *text = rt_cpu_source(r->m);
  for (int j = 0; j < i && pt->same_as < 0; j++)
    if (t->src[j] && text && same_code(t->src[j], text)) pt->same_as = j;
  if (pt->same_as >= 0) { /* the same kernel: measured once */
    rt_cpu_free(r->m);
    r->m = NULL;
    return HARP_OK;
  }
  t->src[i] = text ? ut_xmalloc(strlen(text) + 1) : NULL;
  if (t->src[i]) strcpy(t->src[i], text);
  return runner_init(t->e, r, rt_cpu_stages(base)->g, inputs, ninputs, t->repeat);
}

/* Calls per timed sample, from the fastest of a few calls of the default point. */
static harp_status calls_per_sample(tuning *t) {
  t->tr->calls = 1;
  if (t->n == 0 || !t->rs[0].m) return HARP_OK;
  double fastest = INFINITY, ms = 0;
  harp_status st = runner_open(t->e, &t->rs[0]);
  for (int i = 0; i < 5 && !st; i++) {
    st = run_kernel(t->e, &t->rs[0], t->tr->kernel, 1, &ms);
    if (ms < fastest) fastest = ms;
  }
  runner_close(&t->rs[0]);
  if (st) return st;
  int calls = fastest > 0 && fastest < SAMPLE_MS ? (int)ceil(SAMPLE_MS / fastest) : 1;
  t->tr->calls = calls > MAX_CALLS ? MAX_CALLS : calls;
  return HARP_OK;
}

/* Each measured point's median and minimum over rounds 0..round; the
 * best median so far in *best. */
static harp_status record_medians(tuning *t, int round, double *best) {
  *best = INFINITY;
  for (int i = 0; i < t->n; i++) {
    if (!t->rs[i].m) continue;
    double *x = ut_xcalloc((size_t)round + 2, sizeof *x);
    if (!x) return ut_fail(t->e, HARP_E_NO_MEMORY, NULL, "out of memory");
    memcpy(x, t->rs[i].times, sizeof *x * (size_t)(round + 1));
    qsort(x, (size_t)round + 1, sizeof *x, cmp_double);
    double med = round % 2 ? 0.5 * (x[round / 2] + x[round / 2 + 1]) : x[round / 2];
    t->tr->pts[i].median_ms = med;
    t->tr->pts[i].min_ms = x[0];
    free(x);
    if (med < *best) *best = med;
  }
  return HARP_OK;
}

/* The points measured interleaved, warm-up rounds first, in a new
 * (deterministic) order every round so that no point always follows the
 * same one.  Each sample has a fresh instance, the only one alive: with
 * every point's instance kept (10+ thread pools at once) each point's
 * figure was a draw fixed for the whole run (issue 27: minima of 0.16 or
 * 0.30 ms for the same 1000x512x50 GEMM, which points were fast changing
 * from run to run); now each sample draws its own worker placement and
 * scratch, as one `harp bench` does, and no other pool's workers are alive. */
static harp_status measure(tuning *t, int *order) {
  uint64_t rng = 0x9e3779b97f4a7c15ull;
  for (int i = 0; i < t->n; i++) order[i] = i;
  for (int round = -t->warmup; round < t->repeat; round++) {
    for (int i = t->n - 1; i > 0; i--) {
      rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
      int j = (int)(rng % (uint64_t)(i + 1)), x = order[i];
      order[i] = order[j], order[j] = x;
    }
    for (int q = 0; q < t->n; q++) {
      runner *r = &t->rs[order[q]];
      if (!r->m) continue;
      harp_status st = runner_open(t->e, r);
      if (!st) st = run_kernel(t->e, r, t->tr->kernel, 1, NULL);
      if (!st && round >= 0) st = run_kernel(t->e, r, t->tr->kernel, t->tr->calls, &r->times[round]);
      runner_close(r);
      if (st) return st;
    }
    double best;
    if (round >= 0 && record_medians(t, round, &best)) return t->e->code;
    if (round >= 0 && progress(t->e, t->o, t->tr->region, "measure", t->ri, t->nr, round + 1, t->repeat, best))
      return t->e->code;
  }
  return HARP_OK;
}

/* A repeated kernel's times are its first's; the best point; the rank
 * correlation of the estimates with the medians. */
static harp_status conclude(tuning *t) {
  rt_tune_region *tr = t->tr;
  int n = t->n;
  for (int i = 0; i < n; i++)
    if (tr->pts[i].same_as >= 0) {
      tr->pts[i].median_ms = tr->pts[tr->pts[i].same_as].median_ms;
      tr->pts[i].min_ms = tr->pts[tr->pts[i].same_as].min_ms;
    }
  return rt_tune_rank(t->e, tr);
}

harp_status rt_tune_rank(harp_error *e, rt_tune_region *tr) {
  int n = tr->npoints;
  tr->best = 0;
  for (int i = 1; i < n; i++)
    if (tr->pts[i].median_ms < tr->pts[tr->best].median_ms) tr->best = i;
  double *x = ut_xcalloc((size_t)n * 2 + 1, sizeof *x);
  if (!x) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  for (int i = 0; i < n; i++) x[i] = tr->pts[i].cost.time_est, x[n + i] = tr->pts[i].median_ms;
  tr->spearman = rt_spearman(x, x + n, n);
  free(x);
  return HARP_OK;
}

static bool same_algos(const plan_t *a, const plan_t *b) { return !memcmp(a->algo, b->algo, sizeof a->algo); }

int rt_tune_pick(plan_t *pts, plan_cost *costs, int n, int budget) {
  if (n <= budget) return n;
  /* every algorithm's best point among the first `budget`: a missing one
   * takes the place of the worst kept point whose algorithm is kept twice */
  for (int i = budget; i < n; i++) {
    bool kept = false;
    for (int j = 0; j < budget && !kept; j++) kept = same_algos(&pts[j], &pts[i]);
    if (kept) continue;
    for (int s = budget - 1; s > 0; s--) {
      int twins = 0;
      for (int j = 0; j < budget; j++) twins += same_algos(&pts[j], &pts[s]);
      if (twins < 2) continue;
      plan_t tp = pts[s];
      plan_cost tc = costs[s];
      pts[s] = pts[i], costs[s] = costs[i];
      pts[i] = tp, costs[i] = tc;
      break;
    }
  }
  /* back into estimate order (insertion sort: the default stays first) */
  for (int i = 1; i < budget; i++)
    for (int j = i; j > 0 && costs[j].rank_time < costs[j - 1].rank_time; j--) {
      plan_t tp = pts[j];
      plan_cost tc = costs[j];
      pts[j] = pts[j - 1], costs[j] = costs[j - 1];
      pts[j - 1] = tp, costs[j - 1] = tc;
    }
  return budget;
}

/* Compile (variants of base) and measure the points of one region. */
static harp_status tune_region(harp_error *e, const rt_cpu_model *base, const ut_tensor *inputs, int ninputs,
                             const rt_tune_opts *o, const plan_machine *mach, const rg_info *info, rt_tune_region *tr,
                             int ri, int nr, int repeat, int warmup) {
  int budget = o && o->budget > 0 ? o->budget : 12;
  if (budget > PLAN_TUNE_POINTS) budget = PLAN_TUNE_POINTS;
  plan_search_opts so = {.algo_mask = rt_cpu_algo_mask(), .backend = "cpu"};
  plan_t *pts = ut_xcalloc(PLAN_TUNE_POINTS, sizeof *pts);
  plan_cost *costs = ut_xcalloc(PLAN_TUNE_POINTS, sizeof *costs);
  tuning t = {e, o, tr, NULL, NULL, 0, ri, nr, repeat, warmup};
  int *order = NULL;
  harp_status st = !pts || !costs ? ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory") : HARP_OK;
  if (!st) st = plan_enumerate(&info->plan_info, mach, &so, pts, costs, PLAN_TUNE_POINTS, &t.n, e);
  if (!st) t.n = rt_tune_pick(pts, costs, t.n, budget);
  if (!st) {
    tr->pts = ut_xcalloc((size_t)t.n, sizeof *tr->pts);
    t.rs = ut_xcalloc((size_t)t.n, sizeof *t.rs);
    t.src = ut_xcalloc((size_t)t.n + 1, sizeof *t.src);
    order = ut_xcalloc((size_t)t.n + 1, sizeof *order);
    if (!tr->pts || !t.rs || !t.src || !order) st = ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  }
  for (int i = 0; i < t.n && !st; i++) { /* compile: one model per point */
    st = progress(e, o, tr->region, "compile", ri, nr, i, t.n, 0);
    if (!st) st = compile_point(&t, base, info, &pts[i], &costs[i], inputs, ninputs, i);
  }
  if (!st) st = progress(e, o, tr->region, "compile", ri, nr, t.n, t.n, 0);
  if (!st) st = calls_per_sample(&t);
  if (!st) st = measure(&t, order);
  if (!st) st = conclude(&t);
  free(order);
  for (int i = 0; t.rs && i < t.n; i++) runner_free(&t.rs[i]);
  for (int i = 0; t.src && i < t.n; i++) free(t.src[i]);
  free(t.src);
  free(t.rs);
  free(pts);
  free(costs);
  return st;
}

static void utc_now(char *buf, size_t cap) {
  time_t t = time(NULL);
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

harp_status rt_tune_begin(harp_error *e, const rt_tune_opts *o, const rt_plans *ps, rt_tune_result *out, int *ntune) {
  snprintf(out->model, sizeof out->model, "%s", ps->model);
  snprintf(out->shapeset, sizeof out->shapeset, "%s", ps->shapeset);
  snprintf(out->binding, sizeof out->binding, "%s", ps->binding);
  snprintf(out->machine, sizeof out->machine, "%s", ps->machine);
  if (rt_tune_check_regions(e, o, ps)) return e->code;
  out->r = ut_xcalloc((size_t)ps->n + 1, sizeof *out->r);
  if (!out->r) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  *ntune = 0;
  for (int i = 0; i < ps->n; i++)
    if (ps->choice[i].has_plan && ps->choice[i].applied && rt_tune_wanted(o, ps->choice[i].region)) (*ntune)++;
  return HARP_OK;
}

harp_status rt_tune_store(harp_error *e, const char *cache_dir, const rt_tune_result *out, rt_tune_region *tr) {
  rt_plan_key key = {out->model, tr->region, out->shapeset, out->machine};
  rt_plan_entry ent;
  memset(&ent, 0, sizeof ent);
  ent.plan = tr->pts[tr->best].plan;
  snprintf(ent.binding, sizeof ent.binding, "%s", out->binding);
  ent.median_ms = tr->pts[tr->best].median_ms;
  ent.default_ms = tr->pts[0].median_ms;
  ent.points = tr->npoints;
  ent.repeat = out->repeat;
  utc_now(ent.tuned_at, sizeof ent.tuned_at);
  return rt_plan_cache_store(e, cache_dir, &key, &ent, &tr->cache_path);
}

/* A conv whose Winograd and other (direct / implicit GEMM) points were both
 * measured: the ratio of their best times (the direct kernel's at its own
 * tile where that point was measured) (each point's minimum, which load
 * inflates least; its median where no minimum was kept) goes into the
 * calibration, the cost model's Winograd factor on this CPU from then on
 * (the weight's per-call filter transform, which the model adds by itself,
 * left out).  Not with --no-store, which leaves every stored file alone. */
static harp_status note_winograd(harp_error *e, const rt_knobs *k, bool no_store, const rt_tune_result *out,
                                 const plan_machine *mach, const plan_region_info *r, const rt_tune_region *tr) {
  if (no_store || !out->calib_path[0] || r->pattern != PLAN_PAT_CONV) return HARP_OK;
  double w = INFINITY, d = INFINITY, d_own = INFINITY;
  plan_gemm_view g;
  if (plan_region_gemm_view(r, &g, NULL)) return HARP_OK;
  /* the direct kernel at its own tile, which the model divides by the
   * speed-up (cost_cpu.c), where it was among the points */
  plan_dconv own, at;
  bool dconv = plan_cpu_direct_conv(r, &g, mach) && plan_dconv_own(r, &g, &own);
  for (int i = 0; i < tr->npoints; i++) {
    const rt_tune_point *pt = &tr->pts[i];
    double t = pt->min_ms > 0 ? pt->min_ms : pt->median_ms;
    if (!pt->applied || !(t > 0)) continue;
    bool wino = plan_algo_is_winograd(pt->plan.algo[PLAN_KEY_CONV]);
    double *best = wino ? &w : &d;
    if (t < *best) *best = t;
    if (!wino && dconv && plan_dconv_of(&pt->plan, r, &g, &at) && !memcmp(&at, &own, sizeof at)) d_own = UT_MIN(d_own, t);
  }
  if (isfinite(d_own)) d = d_own;
  if (!isfinite(w) || !isfinite(d)) return HARP_OK;
  int64_t px = r->conv_oh * r->conv_ow > 0 ? r->conv_oh * r->conv_ow : g.N;
  /* the speed-up of the transformed-domain work: a filter transform each
   * call (a weight that is no parameter) taken out, at most half of w */
  w -= UT_MIN(plan_cpu_wino_filter_s(r, &g, mach) * 1e3, w / 2);
  return rt_calib_note_wino(e, k->cache_dir, mach, px, g.K, d / w);
}

/* The CPU's calibration, measured at first use (or again when asked, or
 * when the file is bad): the compiles that follow read it (rt_calib_apply). */
static harp_status tune_calibrate(harp_error *e, const rt_knobs *k, bool force, rt_tune_result *out) {
  if (k->cpu_calib == RT_CPU_CALIB_OFF) return HARP_OK;
  plan_machine m;
  plan_machine_detect_cpu_at(&m, k->cpu_ghz, k->cpu_bw_gbs);
  rt_calib_result cr;
  harp_status st = rt_calib_ensure(e, k->cache_dir, force, &m, &cr);
  if (!st) {
    snprintf(out->calib_path, sizeof out->calib_path, "%s", cr.path);
    out->calib_measured = cr.measured;
    out->calib_s = cr.seconds;
    snprintf(out->calib_why, sizeof out->calib_why, "%s", cr.why);
  }
  rt_calib_result_free(&cr);
  return st;
}

harp_status rt_tune_cpu(harp_error *e, const tiny_graph *g, const tiny_symtab *syms, const ut_tensor *inputs, int ninputs,
                      const rt_tune_opts *o, rt_tune_result *out) {
  memset(out, 0, sizeof *out);
  int repeat = o && o->repeat > 0 ? o->repeat : 20;
  int warmup = o && o->warmup < 0 ? 0 : o && o->warmup > 0 ? o->warmup : 3;
  out->repeat = repeat, out->warmup = warmup;
  /* the model with its default plans: regions, kernels, which plans a
   * template follows; its analysis kept for the points' variants */
  rt_knobs kn;
  rt_cpu_opts co = tune_cpu_opts(o, &kn);
  co.keep_analysis = true;
  harp_status st = tune_calibrate(e, &kn, o && o->recalibrate, out);
  if (!st) st = rt_cpu_compile(e, g, syms, &co, &out->base);
  if (st) return st;
  const rt_plans *ps = rt_cpu_plans(out->base);
  const fn_function *f = rt_cpu_function(out->base);
  int ntune = 0;
  if (rt_tune_begin(e, o, ps, out, &ntune)) return e->code;
  for (int i = 0; i < ps->n && !st; i++) {
    const rt_plan_choice *ch = &ps->choice[i];
    if (!ch->has_plan || !ch->applied || !rt_tune_wanted(o, ch->region)) continue;
    rt_tune_region *tr = &out->r[out->nregions++];
    tr->region = ch->region;
    tr->kernel = rt_cpu_kernel_of(out->base, ch->region);
    tr->spearman = NAN;
    const rg_info *info = f->part->regions[i].info;
    st = tune_region(e, out->base, inputs, ninputs, o, &ps->mach, info, tr, out->nregions - 1, ntune, repeat, warmup);
    if (st || tr->npoints == 0) continue;
    if ((st = note_winograd(e, &kn, o && o->no_store, out, &ps->mach, &info->plan_info, tr))) break;
    if ((st = progress(e, o, tr->region, "done", out->nregions - 1, ntune, tr->npoints, tr->npoints,
                       tr->pts[tr->best].median_ms)))
      break;
    if (!(o && o->no_store)) st = rt_tune_store(e, kn.cache_dir, out, tr);
  }
  return st;
}

void rt_tune_result_free(rt_tune_result *r) {
  if (!r) return;
  for (int i = 0; r->r && i < r->nregions; i++) {
    free(r->r[i].pts);
    free(r->r[i].cache_path);
  }
  free(r->r);
  rt_cpu_free(r->base);
  rt_gpu_free(r->gpu_base);
  memset(r, 0, sizeof *r);
}

harp_status rt_tune_log_region(harp_error *e, const char *path, const rt_tune_result *res, int region, const char *timestamp) {
  const rt_tune_region *tr = &res->r[region];
  rt_tune_row *rows = ut_xcalloc((size_t)tr->npoints + 1, sizeof *rows);
  if (!rows) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  for (int i = 0; i < tr->npoints; i++) {
    const rt_tune_point *pt = &tr->pts[i];
    rows[i] = (rt_tune_row){timestamp, res->machine, res->model, res->shapeset, res->binding, tr->region, i, i == 0,
                            i == tr->best, pt->cost.flops, pt->cost.bytes, pt->cost.occ_eff, pt->cost.time_est * 1e3,
                            pt->median_ms, res->repeat, &pt->plan};
  }
  harp_status st = rt_tune_log_append(e, path, rows, tr->npoints);
  free(rows);
  return st;
}

harp_status rt_tune_log_all(harp_error *e, const char *log, const char *cache_dir, const rt_tune_result *res, char **path,
                            int *rows) {
  *rows = 0;
  *path = log ? ut_xmalloc(strlen(log) + 1) : rt_tune_default_log(cache_dir);
  if (!*path) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  if (log) strcpy(*path, log);
  char stamp[32];
  utc_now(stamp, sizeof stamp);
  for (int i = 0; i < res->nregions; i++) {
    if (rt_tune_log_region(e, *path, res, i, stamp)) return e->code;
    *rows += res->r[i].npoints;
  }
  return HARP_OK;
}
