/* tune_cuda.c — `harp tune --backend cuda`: the measured search of seed 000
 * §6 on the GPU.  Per region whose kernel follows its plan, the best
 * `budget` points of plan_enumerate for the device's architecture (every
 * algorithm's best among them, rt_tune_pick), one model built per point
 * with that point as the region's plan, each loaded on the device; the
 * region's launches timed with device events (rt_gpu_profile), all points
 * interleaved: `warmup` untimed rounds, then `repeat` rounds of one timed
 * run per point; a point's figure is its median.  The best goes to the plan
 * cache under the GPU's machine id and the ShapeSet, which later CUDA
 * compiles read; every point goes to the same CSV log as the CPU's.
 * Needs: harp/gpu.h (rt_gpu_build, _run, _profile), plan_enumerate,
 * tune.c (rt_tune_pick, _begin, _rank, _store: the CPU tuner's bookkeeping), a GPU (else
 * Unsupported, from the runtime's device check).
 * Gives: rt_tune_cuda. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_plan.h"
#include "harp/function.h"
#include "harp/gpu.h"
#include "harp/knobs.h"
#include "harp/pipeline.h"
#include "harp/region.h"
#include "harp/tune.h"
#include "util/util.h"

/* One region's points on the device. */
typedef struct gtuning {
  harp_error *e;
  const rt_tune_opts *o;
  rt_tune_region *tr;
  rt_gpu_model **ms; /* per point */
  double **times;    /* per point: repeat samples */
  int n, ri, nr, repeat, warmup;
} gtuning;

/* Report progress; HARP_E_CANCELLED when the callback says stop. */
static harp_status gprogress(gtuning *t, const char *phase, int done, int total, double best) {
  if (!t->o || !t->o->progress) return HARP_OK;
  rt_tune_progress p = {t->tr->region, phase, t->ri, t->nr, done, total, best};
  if (t->o->progress(t->o->progress_ctx, &p)) return ut_fail(t->e, HARP_E_CANCELLED, t->tr->region, "tuning cancelled");
  return HARP_OK;
}

/* Model for point i: the base options with the point as the region's plan;
 * loaded and run once (weights and inputs uploaded). */
static harp_status build_point(gtuning *t, const tiny_graph *g, const tiny_symtab *syms, const rt_gpu_opts *base,
                               const ut_tensor *inputs, int ninputs, int i) {
  rt_plan_override ov = {t->tr->region, t->tr->pts[i].plan, NULL, NULL, RT_PLAN_TUNING};
  rt_gpu_opts go = *base;
  go.plan_overrides = &ov, go.nplan_overrides = 1, go.no_plan_cache = true, go.graphs = false;
  if (rt_gpu_build(t->e, g, syms, &go, &t->ms[i])) return t->e->code;
  const rt_plans *ps = &rt_gpu_stages(t->ms[i])->plans;
  for (int q = 0; q < ps->n; q++)
    if (!strcmp(ps->choice[q].region, t->tr->region)) t->tr->pts[i].applied = ps->choice[q].applied;
  ut_tensor outs[16];
  if (g->noutputs > 16) return ut_fail(t->e, HARP_E_LIMIT, NULL, "harp tune: more than 16 outputs");
  if (rt_gpu_run(t->e, t->ms[i], inputs, ninputs, outs)) return t->e->code;
  for (int k = 0; k < g->noutputs; k++) ut_tensor_free(&outs[k]);
  return HARP_OK;
}

/* The region's share of one run of model m: its launches' median times
 * (one timed run); the whole run when no launch is the region's. */
static harp_status region_ms(gtuning *t, rt_gpu_model *m, double *ms) {
  int n = rt_gpu_nlaunches(m);
  double *each = ut_xcalloc((size_t)n + 1, sizeof *each);
  if (!each) return ut_fail(t->e, HARP_E_NO_MEMORY, NULL, "out of memory");
  harp_status st = rt_gpu_profile(t->e, m, 0, 1, each);
  double mine = 0, all = 0;
  bool found = false;
  for (int i = 0; i < n && !st; i++) {
    all += each[i];
    if (!strcmp(rt_gpu_launch_region(m, i), t->tr->region)) mine += each[i], found = true;
  }
  *ms = found ? mine : all;
  free(each);
  return st;
}

/* warmup + repeat interleaved rounds; medians, minima, the best. */
static harp_status gmeasure(gtuning *t) {
  for (int r = -t->warmup; r < t->repeat; r++) {
    double best = INFINITY;
    for (int i = 0; i < t->n; i++) {
      double ms;
      if (region_ms(t, t->ms[i], &ms)) return t->e->code;
      if (r >= 0) t->times[i][r] = ms;
    }
    for (int i = 0; r >= 0 && i < t->n; i++) {
      double *x = ut_xcalloc((size_t)r + 2, sizeof *x);
      if (!x) return ut_fail(t->e, HARP_E_NO_MEMORY, NULL, "out of memory");
      memcpy(x, t->times[i], sizeof *x * (size_t)(r + 1));
      for (int a = 1; a <= r; a++) /* insertion sort: r is small */
        for (int b = a; b > 0 && x[b] < x[b - 1]; b--) {
          double y = x[b];
          x[b] = x[b - 1], x[b - 1] = y;
        }
      t->tr->pts[i].median_ms = r % 2 ? 0.5 * (x[r / 2] + x[r / 2 + 1]) : x[r / 2];
      t->tr->pts[i].min_ms = x[0];
      best = UT_MIN(best, t->tr->pts[i].median_ms);
      free(x);
    }
    if (r >= 0 && gprogress(t, "measure", r + 1, t->repeat, best)) return t->e->code;
  }
  return HARP_OK;
}

/* Enumerate, build and measure one region; tr->pts filled. */
static harp_status tune_gpu_region(gtuning *t, const tiny_graph *g, const tiny_symtab *syms, const rt_gpu_opts *go,
                                   const plan_machine *mach, const rg_info *info, const ut_tensor *inputs, int ninputs) {
  int budget = t->o && t->o->budget > 0 ? t->o->budget : 12;
  budget = UT_MIN(budget, PLAN_TUNE_POINTS);
  plan_search_opts so = {.algo_mask = cuda_plan_algo_mask(), .backend = "cuda", .gpu_attention_template = true};
  plan_t *pts = ut_xcalloc(PLAN_TUNE_POINTS, sizeof *pts);
  plan_cost *costs = ut_xcalloc(PLAN_TUNE_POINTS, sizeof *costs);
  harp_status st = !pts || !costs ? ut_fail(t->e, HARP_E_NO_MEMORY, NULL, "out of memory") : HARP_OK;
  if (!st) st = plan_enumerate(&info->plan_info, mach, &so, pts, costs, PLAN_TUNE_POINTS, &t->n, t->e);
  if (!st) t->n = rt_tune_pick(pts, costs, t->n, budget);
  if (!st) {
    t->tr->pts = ut_xcalloc((size_t)t->n, sizeof *t->tr->pts);
    t->ms = ut_xcalloc((size_t)t->n, sizeof *t->ms);
    t->times = ut_xcalloc((size_t)t->n, sizeof *t->times);
    if (!t->tr->pts || !t->ms || !t->times) st = ut_fail(t->e, HARP_E_NO_MEMORY, NULL, "out of memory");
  }
  for (int i = 0; i < t->n && !st; i++) {
    t->tr->npoints = i + 1;
    rt_tune_point *pt = &t->tr->pts[i];
    pt->plan = pts[i], pt->cost = costs[i], pt->same_as = -1;
    plan_fill_from_region(&pt->plan, &info->plan_info);
    if (!(t->times[i] = ut_xcalloc((size_t)t->repeat + 1, sizeof **t->times)))
      st = ut_fail(t->e, HARP_E_NO_MEMORY, NULL, "out of memory");
    if (!st) st = gprogress(t, "compile", i, t->n, 0);
    if (!st) st = build_point(t, g, syms, go, inputs, ninputs, i);
  }
  if (!st) st = gmeasure(t);
  for (int i = 0; t->ms && i < t->n; i++) rt_gpu_free(t->ms[i]);
  for (int i = 0; t->times && i < t->n; i++) free(t->times[i]);
  free(t->ms), free(t->times), free(pts), free(costs);
  t->ms = NULL, t->times = NULL;
  return st;
}

harp_status rt_tune_cuda(harp_error *e, const tiny_graph *g, const tiny_symtab *syms, const ut_tensor *inputs, int ninputs,
                         const rt_tune_opts *o, const rt_gpu_opts *go, rt_tune_result *out) {
  memset(out, 0, sizeof *out);
  out->repeat = o && o->repeat > 0 ? o->repeat : 20;
  out->warmup = o && o->warmup < 0 ? 0 : o && o->warmup > 0 ? o->warmup : 3;
  rt_knobs k = *rt_knobs_or_default(go ? go->knobs : o ? o->knobs : NULL);
  rt_gpu_opts base = go ? *go : (rt_gpu_opts){0};
  base.knobs = &k;
  base.no_plan_cache = true;
  /* the model with its default plans, on the device: no GPU stops here */
  harp_status st = rt_gpu_build(e, g, syms, &base, &out->gpu_base);
  if (!st) st = rt_gpu_load(e, out->gpu_base);
  if (st) return st;
  const rt_plans *ps = &rt_gpu_stages(out->gpu_base)->plans;
  const fn_function *f = rt_gpu_function(out->gpu_base);
  int ntune = 0;
  if (rt_tune_begin(e, o, ps, out, &ntune)) return e->code;
  for (int i = 0; i < ps->n && !st; i++) {
    const rt_plan_choice *ch = &ps->choice[i];
    if (!ch->has_plan || !ch->applied || !rt_tune_wanted(o, ch->region)) continue;
    rt_tune_region *tr = &out->r[out->nregions++];
    tr->region = ch->region, tr->kernel = -1, tr->calls = 1, tr->spearman = NAN;
    gtuning t = {e, o, tr, NULL, NULL, 0, out->nregions - 1, ntune, out->repeat, out->warmup};
    st = tune_gpu_region(&t, g, syms, &base, &ps->mach, f->part->regions[i].info, inputs, ninputs);
    if (!st && tr->npoints > 0) st = rt_tune_rank(e, tr);
    if (!st && tr->npoints > 0 && !(o && o->no_store)) st = rt_tune_store(e, k.cache_dir, out, tr);
    if (!st && tr->npoints > 0) st = gprogress(&t, "done", tr->npoints, tr->npoints, tr->pts[tr->best].median_ms);
  }
  return st;
}
