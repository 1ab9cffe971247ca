/* api_tune.c — harp.h's harp_tune: the tuner of `harp tune` (tune.c) for a
 * model compiled through harp.h, with a progress callback that may stop it
 * and a JSON report of every point.
 * Needs: api.c (api_int.h: the bound graph, the knobs), tune.c, jansson.
 * Gives: harp_tune, harp_string_free.
 *
 * The report:
 *   {"model": hash, "shapeset": key, "binding": "N=1", "machine": id,
 *    "repeat": R, "warmup": W, "log": path, "rows": logged points,
 *    "regions": [{"region": name, "kernel": k, "calls": per sample,
 *                 "default_ms": m, "best_ms": m, "best": index,
 *                 "speedup": default / best, "spearman": rho or null,
 *                 "cached": path or null,
 *                 "points": [{"plan": plan.json object, "estimate_ms": e,
 *                             "median_ms": m, "min_ms": m, "applied": b,
 *                             "same_as": index or null}, ...]}, ...]} */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "api_int.h"
#include "harp.h"
#include "harp/tensor.h"
#include "harp/tune.h"
#include "util/util.h"

/* The settings checked: a CPU model with a graph, fp32, sane counts. */
static harp_status check_tune(harp_error *e, const harp_compiled *c, const harp_options *o, const harp_tune_options *to) {
  if (!c) return ut_fail(e, HARP_E_USAGE, NULL, "harp_tune: no compiled model");
  if (api_backend(c) != HARP_BACKEND_CPU)
    return ut_fail(e, HARP_E_UNSUPPORTED, NULL, "harp_tune: only CPU models are tuned (this one is %s)",
                   api_backend(c) == HARP_BACKEND_CUDA ? "CUDA" : "for the interpreter");
  const tiny_symtab *syms;
  if (!api_graph(c, &syms))
    return ut_fail(e, HARP_E_UNSUPPORTED, NULL, "harp_tune: a model with run-time control flow is not tuned");
  if (o && o->precision && strcmp(o->precision, "fp32") != 0)
    return ut_fail(e, HARP_E_UNSUPPORTED, NULL, "harp_tune: the tuner measures fp32 plans (precision \"%s\")", o->precision);
  if (to && (to->budget < 0 || to->budget > PLAN_TUNE_POINTS))
    return ut_fail(e, HARP_E_USAGE, NULL, "harp_tune: budget = %d, expected 0 (the default) to %d", to->budget, PLAN_TUNE_POINTS);
  if (to && (to->repeat < 0 || to->repeat > 100000))
    return ut_fail(e, HARP_E_USAGE, NULL, "harp_tune: repeat = %d, expected 0 (the default) to 100000", to->repeat);
  return HARP_OK;
}

/* The tuner's inputs in tiny_inputs order: each weight from the parameter
 * block (params, nbytes), every other input random from seed. */
static harp_status tune_inputs(harp_error *e, const harp_compiled *c, const void *params, size_t nbytes, uint64_t seed,
                               ut_tensor **out, int *n) {
  const tiny_symtab *syms;
  const tiny_graph *g = api_graph(c, &syms);
  if (nbytes != harp_params_bytes(c))
    return ut_fail(e, HARP_E_INPUT_MISMATCH, NULL, "the parameter block has %zu bytes, the model takes %zu", nbytes,
                   harp_params_bytes(c));
  if (nbytes && !params) return ut_fail(e, HARP_E_USAGE, NULL, "no parameter block for %zu bytes", nbytes);
  int *idx = NULL;
  *n = tiny_inputs(g, &idx);
  *out = ut_xcalloc((size_t)*n + 1, sizeof **out);
  if ((*n && !idx) || !*out) {
    free(idx);
    return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  }
  uint64_t state = seed ? seed : 1;
  harp_status st = HARP_OK;
  for (int i = 0; i < *n && !st; i++) {
    const tiny_node *nd = &g->nodes[idx[i]];
    int64_t shape[TINY_MAX_RANK], off = harp_param_offset(c, nd->a.input.tensor_id);
    for (int d = 0; d < nd->shape.rank; d++) shape[d] = nd->shape.d[d].n;
    if (off < 0) {
      st = ut_tensor_random(e, nd->dtype, nd->shape.rank, shape, &state, &(*out)[i]);
    } else if (!(st = ut_tensor_alloc(e, &(*out)[i], nd->dtype, nd->shape.rank, shape))) {
      if ((uint64_t)off + (*out)[i].nbytes > nbytes)
        st = ut_fail(e, HARP_E_INTERNAL, nd->id, "the weight lies past the parameter block");
      else memcpy((*out)[i].data, (const unsigned char *)params + off, (*out)[i].nbytes);
    }
  }
  free(idx);
  return st;
}

/* rt_tune's progress (ctx: the harp_tune_options) to the caller's callback. */
static int on_tune_progress(void *ctx, const rt_tune_progress *p) {
  const harp_tune_options *to = ctx;
  return to->progress(to->progress_ctx, p->region, p->region_index, p->nregions, p->phase, p->done, p->total, p->best_ms);
}

/* Point pt as a JSON object (NULL: out of memory). */
static json_t *point_json(const rt_tune_point *pt) {
  char *pj = NULL;
  harp_error ignore = {0};
  json_t *plan = !plan_to_json(&pt->plan, &pj, &ignore) ? json_loads(pj, 0, NULL) : NULL;
  free(pj);
  return json_pack("{s:o?, s:f, s:f, s:f, s:b, s:o}", "plan", plan, "estimate_ms", pt->cost.time_est * 1e3, "median_ms",
                   pt->median_ms, "min_ms", pt->min_ms, "applied", pt->applied, "same_as",
                   pt->same_as >= 0 ? json_integer(pt->same_as) : json_null());
}

/* Region i of res as a JSON object (NULL: out of memory). */
static json_t *region_json(const rt_tune_result *res, int i) {
  const rt_tune_region *tr = &res->r[i];
  json_t *pts = json_array();
  for (int j = 0; pts && j < tr->npoints; j++)
    if (json_array_append_new(pts, point_json(&tr->pts[j]))) {
      json_decref(pts);
      return NULL;
    }
  double d = tr->npoints ? tr->pts[0].median_ms : 0, b = tr->npoints ? tr->pts[tr->best].median_ms : 0;
  return json_pack("{s:s, s:i, s:i, s:f, s:f, s:i, s:f, s:o, s:o, s:o}", "region", tr->region, "kernel", tr->kernel,
                   "calls", tr->calls, "default_ms", d, "best_ms", b, "best", tr->best, "speedup", b > 0 ? d / b : 0.0,
                   "spearman", isnan(tr->spearman) ? json_null() : json_real(tr->spearman), "cached",
                   tr->cache_path ? json_string(tr->cache_path) : json_null(), "points", pts);
}

/* The report of res (see the top of the file) into *out. */
static harp_status report_json(harp_error *e, const rt_tune_result *res, const char *log, int rows, char **out) {
  json_t *regions = json_array();
  for (int i = 0; regions && i < res->nregions; i++)
    if (json_array_append_new(regions, region_json(res, i))) json_decref(regions), regions = NULL;
  json_t *root = regions ? json_pack("{s:s, s:s, s:s, s:s, s:i, s:i, s:s, s:i, s:o}", "model", res->model, "shapeset",
                                     res->shapeset, "binding", res->binding, "machine", res->machine, "repeat",
                                     res->repeat, "warmup", res->warmup, "log", log, "rows", rows, "regions", regions)
                         : NULL;
  *out = root ? json_dumps(root, JSON_COMPACT) : NULL;
  json_decref(root);
  return *out ? HARP_OK : ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
}

harp_status harp_tune(harp_error *e, const harp_compiled *c, const void *params, size_t nbytes, const harp_options *opts,
                      const harp_tune_options *to, char **report) {
  if (report) *report = NULL;
  harp_tune_options dflt = {0};
  if (!to) to = &dflt;
  if (check_tune(e, c, opts, to)) return e->code;
  rt_knobs k;
  ut_tensor *in = NULL;
  int nin = 0, nreg = 0, rows = 0;
  for (const char *const *r = to->regions; r && *r; r++) nreg++;
  rt_tune_opts ro = {.budget = to->budget, .repeat = to->repeat, .warmup = to->warmup, .regions = to->regions,
                     .nregions = nreg, .no_store = to->no_store, .knobs = &k,
                     .progress = to->progress ? on_tune_progress : NULL, .progress_ctx = (void *)to};
  rt_tune_result res = {0};
  char *log = NULL;
  const tiny_symtab *syms;
  const tiny_graph *g = api_graph(c, &syms);
  harp_status st = api_knobs(e, opts, &k);
  if (!st) st = tune_inputs(e, c, params, nbytes, to->seed, &in, &nin);
  if (!st) st = rt_tune_cpu(e, g, syms, in, nin, &ro, &res);
  if (!st) st = rt_tune_log_all(e, to->log, k.cache_dir, &res, &log, &rows);
  if (!st && report) st = report_json(e, &res, log, rows, report);
  for (int i = 0; in && i < nin; i++) ut_tensor_free(&in[i]);
  free(in);
  free(log);
  rt_tune_result_free(&res);
  return st;
}

void harp_string_free(char *s) { free(s); }
