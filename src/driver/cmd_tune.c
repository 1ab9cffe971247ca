/* cmd_tune.c — `harp tune MODEL`: measure each region's plan search space on
 * this machine (rt_tune_cpu, or rt_tune_cuda with --backend cuda), store the best plan per (model, region,
 * ShapeSet, machine) in the plan cache, append every point to the CSV log,
 * and print a summary with the rank correlation between the cost model's
 * estimates and the measured times. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "harp/cpu.h"
#include "harp/gpu.h"
#include "harp/tune.h"
#include "util/util.h"

static const char tune_help[] =
    "usage: harp tune MODEL [options]\n\n"
    "For every region whose kernel follows its Schedule Plan, compile the model\n"
    "with each of the best --budget points of the plan search space (the default\n"
    "plan among them), time that region's kernel alone, all points interleaved\n"
    "(--warmup untimed rounds, then --repeat timed ones; the median counts), and\n"
    "keep the fastest in the plan cache: `harp run` and `harp bench` then use it\n"
    "for this model, region, ShapeSet and machine.  Inputs not given are random.\n\n"
    "options:\n"
    "  --backend B          cpu (default) or cuda: the points built for the GPU and\n"
    "                       timed on it with device events (--target sm80|sm90,\n"
    "                       --precision as for bench); no GPU: an error\n"
    "  --sym NAME=INT       bind a shape symbol (repeatable)\n"
    "  --shape NAME=DIMS    an ONNX graph input's shape (x=1x3x640x640; repeatable)\n"
    "  --input NAME=FILE    use this tensor for input NAME; --param NAME=FILE a weight\n"
    "  --seed N             seed of the random inputs (default 1)\n"
    "  --budget N           points per region (default 12, at most 20)\n"
    "  --repeat N           timed rounds per point (default 20)\n"
    "  --warmup N           untimed rounds first (default 3)\n"
    "  --region NAME        tune only this region (repeatable)\n"
    "  --log FILE           append the measurements to FILE (CSV; default\n"
    "                       <cache dir>/tune.csv)\n"
    "  --no-store           measure and log; leave the plan cache and Winograd ratios alone\n"
    "  --recalibrate        measure this CPU's calibration again first (it is measured\n"
    "                       at first use; `harp calibrate` does it alone)\n"
    "  --knob NAME=VALUE    set a knob of the library (harp --help-options; repeatable)\n"
    "A progress line goes to stderr when it is a terminal.\n";

static long opt_count(const char *v, const char *what, long lo, long hi, bool *ok) {
  char *end;
  long x = strtol(v, &end, 10);
  if (*end || end == v || x < lo || x > hi) {
    fprintf(stderr, "harp: error[UsageError]: --%s expects a count in [%ld, %ld]\n", what, lo, hi);
    *ok = false;
  }
  return x;
}

static int on_progress(void *ctx, const rt_tune_progress *p) {
  (void)ctx;
  if (!strcmp(p->phase, "done")) {
    fprintf(stderr, "\r\033[K");
  } else if (!strcmp(p->phase, "compile")) {
    fprintf(stderr, "\r\033[Kharp tune: region %d/%d %.40s: compiling point %d/%d", p->region_index + 1, p->nregions,
            p->region, p->done < p->total ? p->done + 1 : p->total, p->total);
  } else {
    fprintf(stderr, "\r\033[Kharp tune: region %d/%d %.40s: round %d/%d, best median %.3f ms", p->region_index + 1,
            p->nregions, p->region, p->done, p->total, p->best_ms);
  }
  fflush(stderr);
  return 0;
}

/* "96x512x256 6x64 s3 v16 implicit_gemm" */
static void short_plan(const plan_t *p, char *buf, size_t cap) {
  size_t k = 0;
  for (int i = 0; i < p->ntile && k < cap; i++) k += (size_t)snprintf(buf + k, cap - k, "%s%lld", i ? "x" : "", (long long)p->tile[i]);
  if (k < cap && p->warp_m) k += (size_t)snprintf(buf + k, cap - k, " %dx%d", p->warp_m, p->warp_n);
  if (k < cap) k += (size_t)snprintf(buf + k, cap - k, " s%d v%d", p->stages, p->vec_width);
  for (int a = 0; a < PLAN_KEY_COUNT && k < cap; a++)
    if (p->algo[a] != PLAN_ALGO_NONE) k += (size_t)snprintf(buf + k, cap - k, " %s", plan_algo_name(p->algo[a]));
}

/* The tuner's own options from argv into *to, *log and regions[]; the
 * rest (and argv[0]) into rest[] for cli_parse.  -1 to go on, else the
 * exit code (0 after --help). */
typedef struct tune_args {
  const char *log;
  const char *regions[CLI_MAX_LIST];
  int nregions;
  char **rest;
  int nrest;
} tune_args;

static int tune_parse(int argc, char **argv, rt_tune_opts *to, tune_args *ta) {
  bool ok = true;
  ta->rest[ta->nrest++] = argv[0];
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      fputs(tune_help, stdout);
      return 0;
    }
    bool has = i + 1 < argc;
    if (!strcmp(a, "--budget") && has) to->budget = (int)opt_count(argv[++i], "budget", 1, PLAN_TUNE_POINTS, &ok);
    else if (!strcmp(a, "--repeat") && has) to->repeat = (int)opt_count(argv[++i], "repeat", 1, 100000, &ok);
    else if (!strcmp(a, "--warmup") && has) {
      to->warmup = (int)opt_count(argv[++i], "warmup", 0, 100000, &ok);
      if (to->warmup == 0) to->warmup = -1;
    } else if (!strcmp(a, "--log") && has) ta->log = argv[++i];
    else if (!strcmp(a, "--region") && has && ta->nregions < CLI_MAX_LIST) ta->regions[ta->nregions++] = argv[++i];
    else if (!strcmp(a, "--no-store")) to->no_store = true;
    else if (!strcmp(a, "--recalibrate")) to->recalibrate = true;
    else if (!strcmp(a, "--budget") || !strcmp(a, "--repeat") || !strcmp(a, "--warmup") || !strcmp(a, "--log") ||
             !strcmp(a, "--region"))
      return cli_usage_error("tune", "option %s needs a value", a);
    else ta->rest[ta->nrest++] = argv[i];
  }
  return ok ? -1 : 1;
}

/* Region i of res: its points, the default against the best, the rank
 * correlation, where its plan was cached. */
static void print_region(const rt_tune_result *res, int i) {
  const rt_tune_region *tr = &res->r[i];
  if (tr->kernel >= 0)
    printf("region %s (kernel %d): %d points, the kernel timed alone, median of %d rounds after %d warm-up\n",
           tr->region, tr->kernel, tr->npoints, res->repeat, res->warmup);
  else
    printf("region %s (GPU): %d points, its launches timed with device events, median of %d rounds after %d warm-up\n",
           tr->region, tr->npoints, res->repeat, res->warmup);
  if (tr->calls > 1) printf("  (a short kernel: each sample is %d calls back to back, the time per call)\n", tr->calls);
  printf("  %3s %-8s %12s %10s %10s  %s\n", "#", "", "estimate_ms", "median_ms", "min_ms", "plan");
  for (int j = 0; j < tr->npoints; j++) {
    const rt_tune_point *pt = &tr->pts[j];
    char sp[160], tag[16] = "";
    short_plan(&pt->plan, sp, sizeof sp);
    if (j == 0) snprintf(tag, sizeof tag, "default");
    if (j == tr->best) snprintf(tag + strlen(tag), sizeof tag - strlen(tag), "%sbest", j == 0 ? "+" : "");
    printf("  %3d %-8s %12.4f %10.4f %10.4f  %s%s", j, tag, pt->cost.time_est * 1e3, pt->median_ms, pt->min_ms, sp,
           pt->applied ? "" : " (not applied: built-in tuning)");
    if (pt->same_as >= 0) printf(" (same kernel as #%d)", pt->same_as);
    printf("\n");
  }
  const rt_tune_point *d = &tr->pts[0], *b = &tr->pts[tr->best];
  printf("  default %.4f ms, best %.4f ms (#%d): %.3fx the default\n", d->median_ms, b->median_ms, tr->best,
         b->median_ms > 0 ? d->median_ms / b->median_ms : 0.0);
  if (isnan(tr->spearman))
    printf("  Spearman rank correlation, estimate vs measured: undefined (constant estimates or < 2 points)\n");
  else
    printf("  Spearman rank correlation, estimate vs measured: %.3f over %d points\n", tr->spearman, tr->npoints);
  if (tr->cache_path) printf("  cached: %s\n", tr->cache_path);
}

/* Which calibration the estimates used, and whether this run measured it. */
static void print_calib(const rt_tune_result *res) {
  if (!res->calib_path[0]) {
    printf("  cost model: uncalibrated (knob cpu_calib off)\n");
    return;
  }
  if (res->calib_why[0]) printf("  calibration file was bad (%s): measured again\n", res->calib_why);
  if (res->calib_measured) printf("  calibration measured in %.1f s: %s\n", res->calib_s, res->calib_path);
  else printf("  calibration: %s\n", res->calib_path);
}

/* cli_parse, the backend (cpu or cuda: *cuda) and the model given: 0, else
 * the exit code. */
static int tune_options(tune_args *ta, cli_opts *o, harp_error *e, bool *cuda) {
  int rc = cli_parse(ta->nrest, ta->rest, "tune", "input param sym shape seed backend knob target precision", o, e);
  if (rc) return rc;
  const cli_backend *be = cli_backend_get("tune", o->backend, "interp cpu regions cuda", &rc);
  *cuda = be && be->target == &rt_target_cuda;
  if (be && !*cuda && (be->target != &rt_target_cpu || be->playback))
    rc = cli_usage_error("tune", "backend '%s' cannot be tuned (available: cpu, cuda)", be->name);
  if (!rc && !o->model) rc = cli_usage_error("tune", "no MODEL given");
  return rc;
}

/* The search on the device (--backend cuda): --target (else the device's)
 * and --precision as `harp bench` takes them. */
static harp_status tune_cuda(harp_error *e, const cli_opts *o, const cli_model *m, const rt_tune_opts *to,
                             rt_tune_result *res) {
  const char *target;
  if (cli_gpu_target(e, o, NULL, &target)) return e->code;
  rt_gpu_opts go = {.knobs = &o->knobs, .target = target, .precision = o->precision};
  return rt_tune_cuda(e, m->g, &m->syms, m->inputs, m->ninputs, to, &go, res);
}

int cmd_tune(int argc, char **argv) {
  rt_tune_opts to = {0};
  tune_args ta = {.rest = calloc((size_t)argc + 1, sizeof(char *))};
  if (!ta.rest) return 1;
  int rc = tune_parse(argc, argv, &to, &ta);
  if (rc >= 0) {
    free(ta.rest);
    return rc;
  }
  harp_error e = {0};
  cli_opts o;
  bool cuda = false;
  rc = tune_options(&ta, &o, &e, &cuda);
  free(ta.rest);
  if (rc) {
    cli_opts_free(&o);
    return rc;
  }
  o.random_inputs = true;
  to.regions = ta.nregions ? ta.regions : NULL;
  to.nregions = ta.nregions;
  to.knobs = &o.knobs;
  if (isatty(2)) to.progress = on_progress;
  cli_model m;
  rt_tune_result res = {0};
  char *log_path = NULL;
  int rows = 0;
  if (cli_load_model(&e, &o, true, &m) ||
      (cuda ? tune_cuda(&e, &o, &m, &to, &res) : rt_tune_cpu(&e, m.g, &m.syms, m.inputs, m.ninputs, &to, &res)) ||
      rt_tune_log_all(&e, ta.log, o.knobs.cache_dir, &res, &log_path, &rows)) {
    if (to.progress) fprintf(stderr, "\r\033[K");
    rc = cli_report(&e);
  } else {
    printf("harp tune: model %s, ShapeSet %s (%s)\n  machine %s\n", res.model, res.shapeset, res.binding, res.machine);
    if (!cuda) print_calib(&res);
    if (res.nregions == 0) printf("no region follows a plan (no contraction or attention kernel): nothing to tune\n");
    for (int i = 0; i < res.nregions; i++) print_region(&res, i);
    printf("log: %s (%d rows appended)\n", log_path, rows);
  }
  free(log_path);
  rt_tune_result_free(&res);
  cli_model_free(&m);
  cli_opts_free(&o);
  return rc;
}
