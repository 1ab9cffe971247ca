/* cmd_bench.c — `harp bench MODEL`: compile once, warm up, time N runs of
 * one instance, report the median (and GFLOP/s). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "util/util.h"
#include "harp/cpu.h"
#include "harp/function.h"
#include "harp/gpu.h"
#include "harp/interp.h"
#include "harp/tune.h"

static const char bench_help[] =
    "usage: harp bench MODEL [options]\n\n"
    "MODEL is chosen by extension: .json, .harp, .onnx.\n"
    "Compile MODEL, run it --warmup times, then time --repeat runs of one\n"
    "instance (inputs not given are random) and print the median.\n\n"
    "options:\n"
    "  --backend B          cpu (default), interp, or cuda (the launches alone are\n"
    "                       timed with device events; inputs are uploaded once)\n"
    "  --target T           cuda: sm80 or sm90 (default: the device's)\n"
    "  --graphs             cuda: replay one CUDA Graph of the launches\n"
    "  --precision P        cuda: how fp32 contractions compute: tf32 (default),\n"
    "                       fp32 (strict, no tensor cores), fp16, bf16\n"
    "  --bind SYM=INT[,SYM=INT...]\n"
    "                       cuda: one shape binding of a session (repeatable);\n"
    "                       each --repeat round runs every binding once, in\n"
    "                       turn, and the median is per run.  With --graphs the\n"
    "                       session keeps one CUDA Graph per ShapeSet\n"
    "  --repeat N           timed runs (default 20)\n"
    "  --warmup N           untimed runs first (default 3)\n"
    "  --json               print one JSON object (median_ms, gflops, ...)\n"
    "  --profile            then time each kernel and list them, slowest first,\n"
    "                       with their kinds and share of the sum: cpu, each\n"
    "                       kernel alone (--repeat runs each, on the arena a\n"
    "                       full run left) and in its place in --repeat whole\n"
    "                       runs (\"in run\": caches as the kernels before it\n"
    "                       left them); cuda, each launch in its place in\n"
    "                       --repeat runs (device events between launches)\n"
    "  --sym NAME=INT       bind a shape symbol (repeatable)\n"
    "  --shape NAME=DIMS    an ONNX graph input's shape (x=1x3x640x640; repeatable):\n"
    "                       a dynamic dim needs it, an --input file or --sym\n"
    "  --input NAME=FILE    use this tensor for input NAME\n"
    "  --param NAME=FILE    a weight (its transfer is not timed)\n"
    "  --seed N             seed of the random inputs (default 1)\n"
    "  --random-inputs      accepted as in harp run (inputs not given are random\n"
    "                       anyway; an ONNX model's initializers are its weights)\n"
    "  --plan REGION=FILE   run REGION with this Schedule Plan (JSON or DSL);\n"
    "                       --plan FILE reads a plan list.  Repeatable\n"
    "  --dump LIST          as harp run (--dump-dir DIR): plan (the plans in use),\n"
    "                       c (cpu: model.c), gpu, cu, and the IR stages\n"
    "  --loop-limit N       a model with run-time control flow: a Loop's iterations\n"
    "                       at most (default 1000000); such a model is timed whole,\n"
    "                       its first run (which compiles its segments) untimed\n"
    "Regions without --plan use the plan cache (harp tune), else their default plan.\n";

double cli_now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* One operation per element computed; views and casts are free. */
static double count_flops(const tiny_graph *g) {
  double f = 0;
  for (int i = 0; i < g->n; i++) {
    const tiny_node *n = &g->nodes[i];
    tiny_class c = tiny_op_class(n->op);
    if (c == TC_UNARY || c == TC_BINARY || c == TC_TERNARY) f += (double)tiny_shape_numel(&n->shape);
    if (c == TC_REDUCE) f += (double)tiny_shape_numel(&g->nodes[n->src[0].node].shape);
  }
  return f;
}

double cli_sorted_median(double *t, long n) {
  qsort(t, (size_t)n, sizeof *t, cmp_double);
  return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

static long opt_int(const char *v, const char *what, bool *ok) {
  char *end;
  long x = strtol(v, &end, 10);
  if (*end || end == v || x < 0 || x > 1000000) {
    fprintf(stderr, "harp: error[UsageError]: --%s expects a count\n", what);
    *ok = false;
  }
  return x;
}

/* --bind: one GPU session over the unbound model; every binding runs once
 * (uploads its inputs), then each round launches every binding in turn,
 * waiting for each, so host overhead (graph updates included) is in the time. */
static int bench_session(cli_opts *o, const char **binds, int nbinds, long warmup, long repeat, bool graphs,
                         bool json, const cli_plans *pl) {
  harp_error e = {0};
  cli_model base = {0}, *ms = calloc((size_t)nbinds, sizeof *ms);
  tiny_symtab given = o->syms, *bs = calloc((size_t)nbinds, sizeof *bs);
  double *times = calloc((size_t)repeat, sizeof *times);
  rt_gpu_session *s = NULL;
  int rc = 1;
  tiny_symtab_init(&base.syms);
  tiny_symtab_init(&base.defaults);
  if (!ms || !bs || !times) {
    ut_fail(&e, HARP_E_NO_MEMORY, NULL, "out of memory");
    goto fail;
  }
  const char *target;
  if (cli_gpu_target(&e, o, NULL, &target) || cli_load_graph(&e, o, &base, &base.defaults)) goto fail;
  rt_gpu_opts go = {.target = target, .graphs = graphs, .plan_overrides = pl->ov, .nplan_overrides = pl->n,
                    .precision = o->precision};
  if (rt_gpu_session_new(&e, base.g, &go, &s)) goto fail;
  for (int i = 0; i < nbinds; i++) { /* --sym, then this binding's symbols, then the model's defaults */
    tiny_symtab_init(&bs[i]);
    for (int k = 0; k < given.n; k++)
      if (tiny_symtab_set(&e, &bs[i], given.names[k], given.values[k])) goto fail;
    char spec[512];
    snprintf(spec, sizeof spec, "%s", binds[i]);
    for (char *tok = strtok(spec, ","); tok; tok = strtok(NULL, ","))
      if (tiny_symtab_parse_assign(&e, &bs[i], tok)) goto fail;
    o->syms = bs[i];
    harp_status st = cli_load_model(&e, o, true, &ms[i]);
    o->syms = given;
    if (st) goto fail;
    ut_tensor *outs = calloc((size_t)ms[i].g->noutputs + 1, sizeof *outs);
    if (!outs) {
      ut_fail(&e, HARP_E_NO_MEMORY, NULL, "out of memory");
      goto fail;
    }
    st = rt_gpu_session_run(&e, s, &ms[i].syms, ms[i].inputs, ms[i].ninputs, outs);
    for (int k = 0; k < ms[i].g->noutputs; k++) ut_tensor_free(&outs[k]);
    free(outs);
    if (st) goto fail;
  }
  for (long r = -warmup; r < repeat; r++) {
    double t0 = cli_now_ms();
    for (int i = 0; i < nbinds; i++)
      if (rt_gpu_session_launch(&e, s, &ms[i].syms, true)) goto fail;
    if (r >= 0) times[r] = (cli_now_ms() - t0) / nbinds;
  }
  double median = cli_sorted_median(times, repeat);
  rt_gpu_session_stats st;
  rt_gpu_session_stats_get(s, &st);
  if (json)
    printf("{\"model\": \"%s\", \"backend\": \"cuda\", \"bindings\": %d, \"graphs\": %s, \"repeat\": %ld, "
           "\"warmup\": %ld, \"median_ms\": %.6f, \"min_ms\": %.6f, \"max_ms\": %.6f, \"session\": {\"clusters\": %d, "
           "\"builds\": %d, \"captures\": %d, \"instantiations\": %d, \"updates\": %d, \"replays\": %d, "
           "\"evictions\": %d}}\n",
           o->model, nbinds, graphs ? "true" : "false", repeat, warmup, median, times[0], times[repeat - 1], st.clusters,
           st.builds, st.captures, st.instantiations, st.updates, st.replays, st.evictions);
  else
    printf("%s [cuda, %d bindings in turn%s]: median %.3f ms per run over %ld rounds (min %.3f, max %.3f); "
           "%d ShapeSets, %d models built, graphs: %d captured, %d instantiated, %d updated, %d replays\n",
           o->model, nbinds, graphs ? ", graphs" : "", median, repeat, times[0], times[repeat - 1], st.clusters,
           st.builds, st.captures, st.instantiations, st.updates, st.replays);
  rc = 0;
fail:
  if (rc) rc = cli_report(&e);
  rt_gpu_session_free(s);
  for (int i = 0; ms && bs && i < nbinds; i++) {
    cli_model_free(&ms[i]);
    tiny_symtab_free(&bs[i]);
  }
  free(ms);
  free(bs);
  free(times);
  cli_model_free(&base);
  return rc;
}

/* --profile: per kernel (CPU) or launch (CUDA) its name, kind and median. */
typedef struct kprofile {
  int n;
  const char **name, **kind;
  const char **region; /* CUDA: the launch's region (a kernel may run for several); CPU: NULL each */
  double *med;
  double *inrun; /* CPU: the kernel's median in its place in whole runs (caches as a run leaves them); else NULL */
} kprofile;

static void profile_free(kprofile *p) {
  free(p->name), free(p->kind), free(p->region), free(p->med), free(p->inrun);
  memset(p, 0, sizeof *p);
}

static harp_status profile_alloc(harp_error *e, kprofile *p, int n) {
  p->n = n;
  p->name = calloc((size_t)n + 1, sizeof *p->name);
  p->kind = calloc((size_t)n + 1, sizeof *p->kind);
  p->region = calloc((size_t)n + 1, sizeof *p->region);
  p->med = calloc((size_t)n + 1, sizeof *p->med);
  if (p->name && p->kind && p->region && p->med) return HARP_OK;
  profile_free(p);
  return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
}

/* CPU: each kernel in its place in repeat whole runs (the kernels one after
 * the other, as model_run calls them: its inputs and weights where the run
 * left them in the caches), then each kernel alone, repeat times on end (warm
 * caches).  The two differ where a run streams more than the caches hold. */
static harp_status profile_kernels(harp_error *e, rt_cpu_model *cm, void *inst, const void **in, void **outp, long repeat,
                                 kprofile *p) {
  const fn_function *f = rt_cpu_function(cm);
  const rg_partition *part = f->part;
  int nk = f->nkernels;
  double *t = calloc((size_t)repeat, sizeof *t);
  double *run = calloc((size_t)repeat * (size_t)nk + 1, sizeof *run);
  if (!t || !run || profile_alloc(e, p, nk) || !(p->inrun = calloc((size_t)nk + 1, sizeof *p->inrun))) {
    free(t), free(run);
    return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  }
  harp_status st = HARP_OK;
  for (long r = 0; r < repeat && !st; r++)
    for (int k = 0; k < nk && !st; k++) {
      double t0 = cli_now_ms();
      int code = rt_cpu_instance_run_kernel(cm, inst, k, in, outp);
      run[(size_t)k * (size_t)repeat + (size_t)r] = cli_now_ms() - t0;
      if (code) st = ut_fail(e, HARP_E_INVALID_ARG, f->kernels[k].name, "kernel %s failed with %d", f->kernels[k].name, code);
    }
  for (int k = 0; k < nk && !st; k++) p->inrun[k] = cli_sorted_median(run + (size_t)k * (size_t)repeat, repeat);
  free(run);
  for (int k = 0; k < p->n && !st; k++) {
    for (long r = 0; r < repeat && !st; r++) {
      double t0 = cli_now_ms();
      int code = rt_cpu_instance_run_kernel(cm, inst, k, in, outp);
      t[r] = cli_now_ms() - t0;
      if (code) st = ut_fail(e, HARP_E_INVALID_ARG, f->kernels[k].name, "kernel %s failed with %d", f->kernels[k].name, code);
    }
    const fn_kernel *K = &f->kernels[k];
    const rg_region *R = part && K->region >= 0 && K->region < part->n ? &part->regions[K->region] : NULL;
    p->name[k] = K->name;
    p->kind[k] = !R ? "?" : R->pattern ? R->pattern : R->kind ? R->kind : "?";
    p->med[k] = st ? 0 : cli_sorted_median(t, repeat);
  }
  free(t);
  return st;
}

/* CUDA: each launch where it stands in a run, timed with device events. */
static harp_status profile_launches(harp_error *e, rt_gpu_model *gm, long warmup, long repeat, kprofile *p) {
  if (profile_alloc(e, p, rt_gpu_nlaunches(gm))) return e->code;
  for (int i = 0; i < p->n; i++) {
    rt_gpu_launch_info(gm, i, &p->name[i], &p->kind[i]);
    p->region[i] = rt_gpu_launch_region(gm, i);
  }
  return rt_gpu_profile(e, gm, (int)warmup, (int)repeat, p->med);
}

/* Slowest first, with each one's share of the sum (or as JSON "kernels").  On
 * the CPU a second column: the kernel in its place in whole runs. */
static void profile_print(const kprofile *p, bool json) {
  int *order = calloc((size_t)p->n + 1, sizeof *order);
  double sum = 0, runsum = 0;
  if (!order) return;
  for (int i = 0; i < p->n; i++) order[i] = i, sum += p->med[i], runsum += p->inrun ? p->inrun[i] : 0;
  for (int i = 1; i < p->n; i++) /* insertion sort: a model has few kernels */
    for (int j = i; j > 0 && p->med[order[j]] > p->med[order[j - 1]]; j--) {
      int x = order[j];
      order[j] = order[j - 1], order[j - 1] = x;
    }
  for (int i = 0; i < p->n; i++) {
    int k = order[i];
    double share = sum > 0 ? 100.0 * p->med[k] / sum : 0;
    if (json) {
      char *kn = cli_json_quote(p->name[k]), *rn = cli_json_quote(p->kind[k]);
      char *gn = p->region[k] ? cli_json_quote(p->region[k]) : NULL;
      printf("%s{\"kernel\": %s, ", i ? ", " : "\"kernels\": [", kn ? kn : "\"\"");
      if (gn) printf("\"region\": %s, ", gn);
      printf("\"kind\": %s, \"median_ms\": %.6f, ", rn ? rn : "\"\"", p->med[k]);
      if (p->inrun) printf("\"in_run_ms\": %.6f, ", p->inrun[k]);
      printf("\"share\": %.4f}", share / 100);
      free(kn), free(rn), free(gn);
    } else {
      char nm[160];
      if (p->region[k]) snprintf(nm, sizeof nm, "%s (%s)", p->name[k], p->region[k]);
      else snprintf(nm, sizeof nm, "%s", p->name[k]);
      if (i == 0 && p->inrun) printf("%-32s %-12s %10s %10s %7s\n", "kernel (region)", "kind", "alone ms", "in run ms", "share");
      else if (i == 0) printf("%-32s %-12s %10s %7s\n", "kernel (region)", "kind", "median ms", "share");
      if (p->inrun) printf("%-32.32s %-12.12s %10.4f %10.4f %6.1f%%\n", nm, p->kind[k], p->med[k], p->inrun[k], share);
      else printf("%-32.32s %-12.12s %10.4f %6.1f%%\n", nm, p->kind[k], p->med[k], share);
    }
  }
  if (json) {
    printf("%s\"kernels_sum_ms\": %.6f", p->n ? "], " : "", sum);
    if (p->inrun) printf(", \"kernels_in_run_sum_ms\": %.6f", runsum);
  } else if (p->inrun) {
    printf("%-45s %10.4f %10.4f (%d kernels)\n", "sum", sum, runsum, p->n);
  } else {
    printf("%-45s %10.4f (%d kernels)\n", "sum", sum, p->n);
  }
  free(order);
}

int cmd_bench(int argc, char **argv) {
  long repeat = 20, warmup = 3;
  bool json = false, ok = true, graphs = false, profile = false;
  /* bench's own flags first; the shared parser takes the rest */
  char **rest = calloc((size_t)argc + 1, sizeof *rest);
  const char *binds[CLI_MAX_LIST];
  int nrest = 0, nbinds = 0;
  if (!rest) return 1;
  rest[nrest++] = argv[0];
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      fputs(bench_help, stdout);
      free(rest);
      return 0;
    }
    if (!strcmp(argv[i], "--json")) json = true;
    else if (!strcmp(argv[i], "--profile")) profile = true;
    else if (!strcmp(argv[i], "--graphs")) graphs = true;
    else if (!strcmp(argv[i], "--bind") && i + 1 < argc && nbinds < CLI_MAX_LIST) binds[nbinds++] = argv[++i];
    else if (!strcmp(argv[i], "--repeat") && i + 1 < argc) repeat = opt_int(argv[++i], "repeat", &ok);
    else if (!strcmp(argv[i], "--warmup") && i + 1 < argc) warmup = opt_int(argv[++i], "warmup", &ok);
    else rest[nrest++] = argv[i];
  }
  if (!ok || repeat < 1) {
    free(rest);
    return cli_usage_error("bench", "--repeat needs at least 1");
  }
  harp_error e = {0};
  cli_opts o;
  int rc = cli_parse(nrest, rest, "bench", "input param random-inputs sym shape seed backend target precision plan dump dump-dir loop-limit", &o, &e);
  free(rest);
  if (rc) {
    cli_opts_free(&o);
    return rc;
  }
  const char *backend = o.backend ? o.backend : "cpu";
  if (strcmp(backend, "cpu") && strcmp(backend, "interp") && strcmp(backend, "cuda")) {
    rc = cli_usage_error("bench", "unknown or unavailable backend '%s' (available: cpu, interp, cuda)", backend);
    cli_opts_free(&o);
    return rc;
  }
  if (!o.model) {
    cli_opts_free(&o);
    return cli_usage_error("bench", "no MODEL given");
  }
  if (o.precision && strcmp(backend, "cuda")) fprintf(stderr, "harp: note: --precision changes --backend cuda only\n");
  if (profile && (!strcmp(backend, "interp") || nbinds)) {
    cli_opts_free(&o);
    return cli_usage_error("bench", "--profile needs --backend cpu or cuda (without --bind)");
  }
  if (cli_wants_dump(&o, "c") && strcmp(backend, "cpu")) {
    cli_opts_free(&o);
    return cli_usage_error("bench", "--dump c needs --backend cpu (the C of the CPU backend)");
  }
  if (nbinds && (strcmp(backend, "cuda") || o.ndumps)) {
    cli_opts_free(&o);
    return cli_usage_error("bench", "--bind needs --backend cuda (and no --dump)");
  }
  if (nbinds) {
    cli_plans bpl = {0};
    harp_error pe = {0};
    o.random_inputs = true;
    rc = cli_plans_load(&pe, &o, &bpl) ? cli_report(&pe) : bench_session(&o, binds, nbinds, warmup, repeat, graphs, json, &bpl);
    cli_plans_free(&bpl);
    cli_opts_free(&o);
    return rc;
  }
  o.random_inputs = true;
  cli_model m;
  cli_plans pl = {0};
  rt_cpu_model *cm = NULL;
  rt_gpu_model *gm = NULL;
  void *inst = NULL;
  ut_tensor *outs = NULL;
  const void **in = NULL;
  void **outp = NULL;
  double *times = calloc((size_t)repeat, sizeof *times), compile_ms = 0;
  bool hit = false;
  fn_constpool cp = {0};
  kprofile prof = {0};
  if (!times) return 1;
  o.host_flow = true;
  if (cli_load_model(&e, &o, true, &m)) goto fail;
  if (m.flow) { /* run-time control flow: the host program, timed whole (cli_flow.c) */
    rc = profile ? cli_usage_error("bench", "--profile needs a model without run-time control flow")
                 : cli_flow_bench(&o, &m, backend, graphs, warmup, repeat, json);
    goto done;
  }
  if (cli_write_dumps(&e, &o, &m) || cli_plans_load(&e, &o, &pl)) goto fail;
  outs = calloc((size_t)m.g->noutputs + 1, sizeof *outs);
  in = calloc((size_t)m.ninputs + 1, sizeof *in);
  outp = calloc((size_t)m.g->noutputs + 1, sizeof *outp);
  if (!outs || !in || !outp) {
    ut_fail(&e, HARP_E_NO_MEMORY, NULL, "out of memory");
    goto fail;
  }
  if (strcmp(backend, "cuda") && cli_write_gpu_dumps(&e, &o, &m, &pl)) goto fail;
  if (!strcmp(backend, "cuda")) {
    /* build, one full run (uploads the weights and inputs), then the
     * launches alone, timed on the device */
    const char *target;
    if (cli_gpu_target(&e, &o, NULL, &target)) goto fail;
    rt_gpu_opts go = {.target = target, .graphs = graphs, .plan_overrides = pl.ov, .nplan_overrides = pl.n,
                      .precision = o.precision};
    if (rt_gpu_build(&e, m.g, &m.syms, &go, &gm) || cli_write_gpu_model_dumps(&e, &o, gm) ||
        rt_gpu_run(&e, gm, m.inputs, m.ninputs, outs))
      goto fail;
    for (int k = 0; k < m.g->noutputs; k++) ut_tensor_free(&outs[k]);
    compile_ms = rt_gpu_compile_ms(gm);
    hit = rt_gpu_cache_hit(gm);
    double med;
    if (rt_gpu_time(&e, gm, (int)warmup, (int)repeat, &med)) goto fail;
    for (long r = 0; r < repeat; r++) times[r] = med; /* device events give the median only */
    if (profile && profile_launches(&e, gm, warmup, repeat, &prof)) goto fail;
  }
  if (!strcmp(backend, "cpu")) {
    rt_cpu_opts co = {.keep_source = cli_wants_dump(&o, "c"), .plan_overrides = pl.ov, .nplan_overrides = pl.n};
    if (rt_cpu_compile(&e, m.g, &m.syms, &co, &cm)) goto fail;
    if (co.keep_source && cli_write_text(&e, o.dump_dir, "model.c", rt_cpu_source(cm))) goto fail;
    cli_print_plan_notes(rt_cpu_plans(cm));
    if (cli_write_plan_dump(&e, &o, &m, &pl, rt_cpu_plans(cm))) goto fail;
    compile_ms = rt_cpu_compile_ms(cm);
    hit = rt_cpu_cache_hit(cm);
    const fn_function *f = rt_cpu_function(cm);
    ut_tensor *params = calloc((size_t)f->nargs + 1, sizeof *params);
    if (!params) {
      ut_fail(&e, HARP_E_NO_MEMORY, NULL, "out of memory");
      goto fail;
    }
    int np = 0, ni = 0;
    for (int a = 0; a < f->nargs; a++) {
      if (f->buffers[f->args[a]].kind == FN_PARAM) params[np++] = m.inputs[a];
      else in[ni++] = m.inputs[a].data;
    }
    harp_status cst = fn_constpool_from_tensors(&e, f, params, np, &cp);
    free(params);
    if (cst) goto fail;
    /* the ConstPool holds the weights now: drop the graph's copy before
     * model_init makes its own and packs them */
    for (int a = 0; a < f->nargs; a++)
      if (f->buffers[f->args[a]].kind == FN_PARAM) ut_tensor_free(&m.inputs[a]);
    ut_release_free_memory();
    for (int k = 0; k < m.g->noutputs; k++) {
      const tiny_node *n = &m.g->nodes[m.g->outputs[k]];
      int64_t shape[TINY_MAX_RANK];
      for (int d = 0; d < n->shape.rank; d++) shape[d] = n->shape.d[d].n;
      if (ut_tensor_alloc(&e, &outs[k], n->dtype, n->shape.rank, shape)) goto fail;
      outp[k] = outs[k].data;
    }
    if (!(inst = rt_cpu_instance_new(cm, cp.data, cp.size))) {
      ut_fail(&e, HARP_E_NO_MEMORY, NULL, "model_init failed");
      goto fail;
    }
    fn_constpool_free(&cp); /* model_init copied it */
  }
  if (!cm && cli_write_plan_dump(&e, &o, &m, &pl, NULL)) goto fail;
  for (long r = -warmup; r < repeat && !gm; r++) {
    double t0 = cli_now_ms();
    if (cm) {
      int code = rt_cpu_instance_run(cm, inst, in, outp);
      if (code) {
        ut_fail(&e, HARP_E_INVALID_ARG, rt_cpu_error_kernel(cm, code), "model_run failed with %d", code);
        goto fail;
      }
    } else {
      if (tiny_interp(&e, m.g, &m.syms, m.inputs, m.ninputs, outs)) goto fail;
      for (int k = 0; k < m.g->noutputs; k++) ut_tensor_free(&outs[k]);
    }
    if (r >= 0) times[r] = cli_now_ms() - t0;
  }
  if (cm && profile && profile_kernels(&e, cm, inst, in, outp, repeat, &prof)) goto fail;
  double median = cli_sorted_median(times, repeat);
  double flops = count_flops(m.g), gflops = median > 0 ? flops / (median * 1e6) : 0;
  /* where the kernels' plans came from: how many regions per source */
  int nsrc[RT_PLAN_TUNING + 1] = {0};
  const rt_plans *ps = cm ? rt_cpu_plans(cm) : NULL;
  for (int i = 0; ps && i < ps->n; i++)
    if (ps->choice[i].applied && ps->choice[i].source <= RT_PLAN_TUNING) nsrc[ps->choice[i].source]++;
  if (json) {
    char *mq = cli_json_quote(o.model);
    printf("{\"model\": %s, \"backend\": \"%s\", \"repeat\": %ld, \"warmup\": %ld, \"median_ms\": %.6f, "
           "\"min_ms\": %.6f, \"max_ms\": %.6f, \"flops\": %.0f, \"gflops\": %.4f, \"compile_ms\": %.3f, "
           "\"cache_hit\": %s, \"plans\": {\"default\": %d, \"override\": %d, \"cache\": %d}",
           mq ? mq : "\"\"", backend, repeat, warmup, median, times[0], times[repeat - 1], flops, gflops, compile_ms,
           hit ? "true" : "false", nsrc[RT_PLAN_DEFAULT], nsrc[RT_PLAN_OVERRIDE], nsrc[RT_PLAN_CACHED]);
    free(mq);
    if (profile) {
      printf(", ");
      profile_print(&prof, true);
    }
    printf("}\n");
  } else {
    char plans[64] = "";
    if (nsrc[RT_PLAN_CACHED] || nsrc[RT_PLAN_OVERRIDE])
      snprintf(plans, sizeof plans, "; plans: %d tuned (cache), %d --plan", nsrc[RT_PLAN_CACHED], nsrc[RT_PLAN_OVERRIDE]);
    printf("%s [%s]: median %.3f ms over %ld runs (min %.3f, max %.3f), %.2f GFLOP/s; compile %.1f ms%s%s\n",
           o.model, backend, median, repeat, times[0], times[repeat - 1], gflops, compile_ms, hit ? " (cache hit)" : "",
           plans);
    if (profile) profile_print(&prof, false);
  }
  rc = 0;
  goto done;
fail:
  rc = cli_report(&e);
done:
  if (cm) rt_cpu_instance_free(cm, inst);
  if (outs && m.g && !m.flow)
    for (int k = 0; k < m.g->noutputs; k++) ut_tensor_free(&outs[k]);
  free(outs);
  free(in);
  free(outp);
  free(times);
  fn_constpool_free(&cp);
  rt_cpu_free(cm);
  rt_gpu_free(gm);
  profile_free(&prof);
  cli_plans_free(&pl);
  cli_model_free(&m);
  cli_opts_free(&o);
  return rc;
}
