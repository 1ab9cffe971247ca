/* cmd_bench.c — `harp bench MODEL`: compile once, warm up, time N runs of
 * one instance, report the median (and GFLOP/s).  --profile and --bind:
 * bench_profile.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "harp/function.h"
#include "harp/interp.h"
#include "harp/tune.h"
#include "util/util.h"

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
    "                       fp32 (strict, no tensor cores), fp16, bf16; cpu: fp32\n"
    "                       (default) or bf16 (matmuls and convs in bf16 with fp32\n"
    "                       accumulation, AVX512_BF16); bf16 also prints the\n"
    "                       outputs' error against an fp32 build\n"
    "  --bind SYM=INT[,SYM=INT...]\n"
    "                       cuda: one shape binding of a session (repeatable);\n"
    "                       each --repeat round runs every binding once, in\n"
    "                       turn, and the median is per run.  With --graphs the\n"
    "                       session keeps one CUDA Graph per ShapeSet\n"
    "  --fix SYM[,SYM...]   cuda, with --bind: the session's symbols that stay\n"
    "                       fixed (a CNN's channels: --fix C,K): each ShapeSet's\n"
    "                       box varies over the others only; without it every\n"
    "                       symbol may vary until a box falls back\n"
    "  --shapeset NAME=LO..HI\n"
    "                       cpu, with --bind (repeatable): one object for the box\n"
    "                       (harp run --shapeset) against the exactly-specialised\n"
    "                       object of each binding, in turn in each round; prints\n"
    "                       both medians per binding, their ratio, and the first\n"
    "                       run at each binding on the ShapeSet object; with\n"
    "                       --profile, each binding's kernels on both objects,\n"
    "                       side by side (the ShapeSet's at the bound sizes)\n"
    "  --repeat N           timed runs (default 20)\n"
    "  --warmup N           untimed runs first (default 3)\n"
    "  --json               print one JSON object (median_ms, gflops, ...)\n"
    "  --profile            then time each kernel and list them, slowest first,\n"
    "                       with their kinds and share of the sum: cpu, each\n"
    "                       kernel alone (--repeat runs each, on the arena a\n"
    "                       full run left) and in its place in --repeat whole\n"
    "                       runs (\"in run\": caches as the kernels before it\n"
    "                       left them); cuda, each launch in its place in\n"
    "                       --repeat runs (device events between launches);\n"
    "                       and the time of each compile stage\n"
    "  --time-stages        each compile stage's time, to stderr\n"
    "  --knob NAME=VALUE    set a knob of the library (harp --help-options)\n"
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

double cli_now_ms(void) { return ut_now_ms(); }

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

double cli_sorted_median(double *t, long n) {
  qsort(t, (size_t)n, sizeof *t, cmp_double);
  return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
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

static long opt_int(const char *v, const char *what, bool *ok) {
  char *end;
  long x = strtol(v, &end, 10);
  if (*end || end == v || x < 0 || x > 1000000) {
    fprintf(stderr, "harp: error[UsageError]: --%s expects a count\n", what);
    *ok = false;
  }
  return x;
}

/* bench's own flags into *a, the rest into rest[] for the shared parser;
 * -1 to go on, else the exit code (--help: 0). */
static int bench_flags(int argc, char **argv, bench_args *a, char **rest, int *nrest) {
  bool ok = true;
  *a = (bench_args){.repeat = 20, .warmup = 3};
  rest[(*nrest)++] = argv[0];
  for (int i = 1; i < argc; i++) {
    const char *v = argv[i];
    bool has = i + 1 < argc;
    if (!strcmp(v, "--help") || !strcmp(v, "-h")) {
      fputs(bench_help, stdout);
      return 0;
    }
    if (!strcmp(v, "--json")) a->json = true;
    else if (!strcmp(v, "--profile")) a->profile = true;
    else if (!strcmp(v, "--graphs")) a->graphs = true;
    else if (!strcmp(v, "--bind") && has && a->nbinds < CLI_MAX_LIST) a->binds[a->nbinds++] = argv[++i];
    else if (!strcmp(v, "--fix") && has && a->nfixes < CLI_MAX_LIST) a->fixes[a->nfixes++] = argv[++i];
    else if (!strcmp(v, "--repeat") && has) a->repeat = opt_int(argv[++i], "repeat", &ok);
    else if (!strcmp(v, "--warmup") && has) a->warmup = opt_int(argv[++i], "warmup", &ok);
    else rest[(*nrest)++] = argv[i];
  }
  return ok && a->repeat >= 1 ? -1 : cli_usage_error("bench", "--repeat needs at least 1");
}

/* The combinations bench refuses; 0 when none. */
static int bench_check(const cli_opts *o, const cli_backend *b, const bench_args *a) {
  if (!o->model) return cli_usage_error("bench", "no MODEL given");
  if (o->precision && b->target != &rt_target_cuda && b->target != &rt_target_cpu)
    fprintf(stderr, "harp: note: --precision changes --backend cpu and cuda only\n");
  if (a->profile && (!b->target || (a->nbinds && !o->nshapesets)))
    return cli_usage_error("bench", "--profile needs --backend cpu or cuda (with --bind: --shapeset)");
  if (cli_wants_dump(o, "c") && b->target != &rt_target_cpu)
    return cli_usage_error("bench", "--dump c needs --backend cpu (the C of the CPU backend)");
  if (o->nshapesets && (b->target != &rt_target_cpu || !a->nbinds || o->ndumps || o->nplans))
    return cli_usage_error("bench", "--shapeset needs --backend cpu and --bind (no --dump, --plan)");
  if (a->nfixes && (!a->nbinds || o->nshapesets))
    return cli_usage_error("bench", "--fix needs --bind with --backend cuda (a session)");
  if (a->nbinds && !o->nshapesets && (b->target != &rt_target_cuda || o->ndumps))
    return cli_usage_error("bench", "--bind needs --backend cuda (and no --dump), or --shapeset");
  return 0;
}

/* What a bench measured. */
typedef struct bench_res {
  double *times; /* repeat of them, sorted once printed */
  double compile_ms;
  bool hit;
  const rt_plans *plans;       /* the CPU's, else NULL */
  bool has_err;                /* cpu --precision bf16: the outputs against the fp32 build's */
  double err_abs, err_rel;     /* max |bf16 - fp32|, and it over max |fp32|, over every fp32 output */
  const rt_compile *stages;    /* the compile's stages (NULL: the interpreter) */
  kprofile prof;
} bench_res;

/* A CPU instance ready to run: the weights in its ConstPool (the graph's
 * copies dropped), the output buffers. */
typedef struct cpu_inst {
  rt_cpu_model *cm;
  void *inst;
  const void **in;
  void **outp;
  ut_tensor *outs;
  int nout;
} cpu_inst;

static void cpu_inst_free(cpu_inst *ci) {
  if (ci->cm) rt_cpu_instance_free(ci->cm, ci->inst);
  for (int k = 0; ci->outs && k < ci->nout; k++) ut_tensor_free(&ci->outs[k]);
  free(ci->outs);
  free(ci->in);
  free(ci->outp);
  rt_cpu_free(ci->cm);
  memset(ci, 0, sizeof *ci);
}

/* The ConstPool of m's weights (the graph's copies freed: model_init makes
 * its own and packs them) and the non-weight inputs into ci->in. */
static harp_status cpu_params(harp_error *e, cli_model *m, cpu_inst *ci, fn_constpool *cp) {
  const fn_function *f = rt_cpu_function(ci->cm);
  ut_tensor *params = calloc((size_t)f->nargs + 1, sizeof *params);
  if (!params) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  int np = 0, ni = 0;
  for (int a = 0; a < f->nargs; a++) {
    if (f->buffers[f->args[a]].kind == FN_PARAM) params[np++] = m->inputs[a];
    else ci->in[ni++] = m->inputs[a].data;
  }
  harp_status st = fn_constpool_from_tensors(e, f, params, np, cp);
  free(params);
  for (int a = 0; a < f->nargs && !st; a++)
    if (f->buffers[f->args[a]].kind == FN_PARAM) ut_tensor_free(&m->inputs[a]);
  ut_release_free_memory();
  return st;
}

/* Inputs, outputs and an instance of ci->cm. */
static harp_status cpu_instance(harp_error *e, cli_model *m, cpu_inst *ci) {
  ci->nout = m->g->noutputs;
  ci->outs = calloc((size_t)ci->nout + 1, sizeof *ci->outs);
  ci->in = calloc((size_t)m->ninputs + 1, sizeof *ci->in);
  ci->outp = calloc((size_t)ci->nout + 1, sizeof *ci->outp);
  if (!ci->outs || !ci->in || !ci->outp) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  fn_constpool cp = {0};
  harp_status st = cpu_params(e, m, ci, &cp);
  for (int k = 0; k < ci->nout && !st; k++) {
    const tiny_node *n = &m->g->nodes[m->g->outputs[k]];
    int64_t shape[TINY_MAX_RANK];
    for (int d = 0; d < n->shape.rank; d++) shape[d] = n->shape.d[d].n;
    st = ut_tensor_alloc(e, &ci->outs[k], n->dtype, n->shape.rank, shape);
    if (!st) ci->outp[k] = ci->outs[k].data;
  }
  if (!st && !(ci->inst = rt_cpu_instance_new(ci->cm, cp.data, cp.size))) st = ut_fail(e, HARP_E_NO_MEMORY, NULL, "model_init failed");
  fn_constpool_free(&cp); /* model_init copied it */
  return st;
}

/* --precision bf16 on the cpu: the fp32 build's outputs for m's inputs,
 * into ref[] (m->g->noutputs of them), before an instance takes the weights. */
static harp_status fp32_reference(harp_error *e, const cli_opts *o, cli_model *m, ut_tensor *ref) {
  rt_cpu_opts co = {.knobs = &o->knobs};
  rt_cpu_model *cm = NULL;
  harp_status st = rt_cpu_compile(e, m->g, &m->syms, &co, &cm);
  if (!st) st = rt_cpu_run(e, cm, m->inputs, m->ninputs, ref);
  rt_cpu_free(cm);
  return st;
}

/* r's error: ci's outputs (the last run) against ref[], the fp32 ones. */
static void output_error(const cpu_inst *ci, const ut_tensor *ref, bench_res *r) {
  double emax = 0, vmax = 0;
  for (int k = 0; k < ci->nout; k++) {
    const ut_tensor *a = &ci->outs[k], *b = &ref[k];
    if (a->dtype != TINY_FP32 || b->dtype != TINY_FP32 || ut_tensor_numel(a) != ut_tensor_numel(b)) continue;
    const float *x = a->data, *y = b->data;
    for (int64_t i = 0; i < ut_tensor_numel(a); i++) {
      double d = fabs((double)x[i] - (double)y[i]), v = fabs((double)y[i]);
      if (d > emax || d != d) emax = d != d ? INFINITY : d;
      if (v > vmax) vmax = v;
    }
  }
  r->has_err = true, r->err_abs = emax, r->err_rel = vmax > 0 ? emax / vmax : emax;
}

/* --backend cpu: compile (the dumps from its stages), one instance, warmup
 * then repeat timed runs; then the kernels one by one with --profile.  With
 * --precision bf16, the error of the last run against the fp32 build. */
static harp_status bench_cpu(harp_error *e, const cli_opts *o, cli_model *m, const cli_plans *pl, cli_dumps *d,
                           const bench_args *a, cpu_inst *ci, bench_res *r) {
  rt_cpu_opts co = {.knobs = &o->knobs, .plan_overrides = pl->ov, .nplan_overrides = pl->n,
                    .precision = o->precision, .after_stage = cli_dumps_hook, .hook_ctx = d};
  co.keep_analysis = cli_dumps_own(d, &rt_target_cpu, NULL);
  if (rt_cpu_compile(e, m->g, &m->syms, &co, &ci->cm)) return e->code;
  cli_print_plan_notes(rt_cpu_plans(ci->cm));
  r->compile_ms = rt_cpu_compile_ms(ci->cm), r->hit = rt_cpu_cache_hit(ci->cm);
  r->plans = rt_cpu_plans(ci->cm), r->stages = rt_cpu_stages(ci->cm);
  bool bf16 = o->precision && !strcmp(o->precision, "bf16");
  ut_tensor *ref = bf16 ? calloc((size_t)m->g->noutputs + 1, sizeof *ref) : NULL;
  if (bf16 && !ref) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  harp_status st = bf16 ? fp32_reference(e, o, m, ref) : HARP_OK;
  if (!st) st = cpu_instance(e, m, ci);
  for (long i = -a->warmup; i < a->repeat && !st; i++) {
    double t0 = cli_now_ms();
    int code = rt_cpu_instance_run(ci->cm, ci->inst, ci->in, ci->outp);
    if (code) st = ut_fail(e, HARP_E_INVALID_ARG, rt_cpu_error_kernel(ci->cm, code), "model_run failed with %d", code);
    else if (i >= 0) r->times[i] = cli_now_ms() - t0;
  }
  if (!st && bf16) output_error(ci, ref, r);
  for (int k = 0; ref && k < m->g->noutputs; k++) ut_tensor_free(&ref[k]);
  free(ref);
  if (st) return st;
  return a->profile ? profile_kernels(e, ci->cm, ci->inst, NULL, ci->in, ci->outp, a->repeat, &r->prof) : HARP_OK;
}

/* --backend cuda: build, one full run (uploads the weights and inputs), then
 * the launches alone, timed on the device (which gives the median only). */
static harp_status bench_cuda(harp_error *e, const cli_opts *o, cli_model *m, const cli_plans *pl, cli_dumps *d,
                            const bench_args *a, rt_gpu_model **gm, bench_res *r) {
  const char *target;
  if (cli_gpu_target(e, o, NULL, &target)) return e->code;
  rt_gpu_opts go = {.knobs = &o->knobs, .target = target, .graphs = a->graphs, .plan_overrides = pl->ov,
                    .nplan_overrides = pl->n, .precision = o->precision, .after_stage = cli_dumps_hook, .hook_ctx = d};
  go.keep_analysis = cli_dumps_own(d, &rt_target_cuda, target);
  ut_tensor *outs = calloc((size_t)m->g->noutputs + 1, sizeof *outs);
  if (!outs) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  harp_status st = rt_gpu_build(e, m->g, &m->syms, &go, gm);
  if (!st) st = rt_gpu_run(e, *gm, m->inputs, m->ninputs, outs);
  for (int k = 0; k < m->g->noutputs; k++) ut_tensor_free(&outs[k]);
  free(outs);
  double med = 0;
  if (!st) st = rt_gpu_time(e, *gm, (int)a->warmup, (int)a->repeat, &med);
  if (st) return st;
  for (long i = 0; i < a->repeat; i++) r->times[i] = med;
  r->compile_ms = rt_gpu_compile_ms(*gm), r->hit = rt_gpu_cache_hit(*gm), r->stages = rt_gpu_stages(*gm);
  return a->profile ? profile_launches(e, *gm, a->warmup, a->repeat, &r->prof) : HARP_OK;
}

/* --backend interp: the reference interpreter, each run allocating its outputs. */
static harp_status bench_interp(harp_error *e, cli_model *m, const bench_args *a, bench_res *r) {
  ut_tensor *outs = calloc((size_t)m->g->noutputs + 1, sizeof *outs);
  if (!outs) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  harp_status st = HARP_OK;
  for (long i = -a->warmup; i < a->repeat && !st; i++) {
    double t0 = cli_now_ms();
    st = tiny_interp(e, m->g, &m->syms, m->inputs, m->ninputs, outs);
    for (int k = 0; k < m->g->noutputs && !st; k++) ut_tensor_free(&outs[k]);
    if (i >= 0) r->times[i] = cli_now_ms() - t0;
  }
  free(outs);
  return st;
}

/* The stages' times as JSON members ("stages": {"regions": ms, ...}) or a line. */
static void print_stages(const cli_model *m, const rt_compile *c, bool json) {
  if (!c) return;
  if (!json) {
    char buf[1024];
    rt_compile_times(c, buf, sizeof buf);
    printf("stages (%s): load %.1f ms, normalize %.1f ms, %s\n", c->target->name, m->load_ms, m->normalize_ms, buf);
    return;
  }
  printf(", \"stages\": {\"load\": %.3f, \"normalize\": %.3f", m->load_ms, m->normalize_ms);
  for (int s = RT_STAGE_INDEXBOOK; s < RT_NSTAGES; s++)
    if (c->ran[s]) printf(", \"%s\": %.3f", rt_stage_name((rt_stage)s), c->ms[s]);
  printf("}");
}

/* The median, min, max, GFLOP/s, compile time and where the plans came from. */
static void bench_print(const cli_opts *o, const cli_model *m, const cli_backend *b, const bench_args *a, bench_res *r) {
  long n = a->repeat;
  double median = cli_sorted_median(r->times, n), *t = r->times;
  double flops = count_flops(m->g), gflops = median > 0 ? flops / (median * 1e6) : 0;
  int nsrc[RT_PLAN_TUNING + 1] = {0}; /* regions per plan source */
  for (int i = 0; r->plans && i < r->plans->n; i++)
    if (r->plans->choice[i].applied && r->plans->choice[i].source <= RT_PLAN_TUNING) nsrc[r->plans->choice[i].source]++;
  if (a->json) {
    char *mq = cli_json_quote(o->model);
    printf("{\"model\": %s, \"backend\": \"%s\", \"repeat\": %ld, \"warmup\": %ld, \"median_ms\": %.6f, "
           "\"min_ms\": %.6f, \"max_ms\": %.6f, \"flops\": %.0f, \"gflops\": %.4f, \"compile_ms\": %.3f, "
           "\"cache_hit\": %s, \"plans\": {\"default\": %d, \"override\": %d, \"cache\": %d}",
           mq ? mq : "\"\"", b->name, n, a->warmup, median, t[0], t[n - 1], flops, gflops, r->compile_ms,
           r->hit ? "true" : "false", nsrc[RT_PLAN_DEFAULT], nsrc[RT_PLAN_OVERRIDE], nsrc[RT_PLAN_CACHED]);
    free(mq);
    if (r->has_err) printf(", \"bf16_max_abs_err\": %.6g, \"bf16_max_rel_err\": %.6g", r->err_abs, r->err_rel);
    if (a->profile) {
      printf(", ");
      profile_print(&r->prof, true);
      print_stages(m, r->stages, true);
    }
    printf("}\n");
    return;
  }
  char plans[64] = "";
  if (nsrc[RT_PLAN_CACHED] || nsrc[RT_PLAN_OVERRIDE])
    snprintf(plans, sizeof plans, "; plans: %d tuned (cache), %d --plan", nsrc[RT_PLAN_CACHED], nsrc[RT_PLAN_OVERRIDE]);
  printf("%s [%s]: median %.3f ms over %ld runs (min %.3f, max %.3f), %.2f GFLOP/s; compile %.1f ms%s%s\n", o->model,
         b->name, median, n, t[0], t[n - 1], gflops, r->compile_ms, r->hit ? " (cache hit)" : "", plans);
  if (r->has_err)
    printf("bf16 vs fp32: max abs err %.3g, max rel err %.3g (max |bf16 - fp32| / max |fp32| over the outputs)\n",
           r->err_abs, r->err_rel);
  if (a->profile) {
    profile_print(&r->prof, false);
    print_stages(m, r->stages, false);
  }
}

/* A model without run-time control flow: compile, time, print. */
static harp_status bench_model(harp_error *e, const cli_opts *o, cli_model *m, const cli_backend *b, const bench_args *a) {
  cli_plans pl = {0};
  cli_dumps d;
  cli_dumps_init(&d, o);
  cpu_inst ci = {0};
  rt_gpu_model *gm = NULL;
  bench_res r = {.times = calloc((size_t)a->repeat, sizeof(double))};
  harp_status st = r.times ? cli_plans_load(e, o, &pl) : ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  if (!st && b->target == &rt_target_cuda) st = bench_cuda(e, o, m, &pl, &d, a, &gm, &r);
  else if (!st && b->target == &rt_target_cpu) st = bench_cpu(e, o, m, &pl, &d, a, &ci, &r);
  else if (!st) st = bench_interp(e, m, a, &r);
  cli_print_stage_times(o, m, r.stages);
  if (!st) st = cli_dumps_finish(e, &d, m, &pl);
  else cli_dumps_salvage(&d);
  if (!st) bench_print(o, m, b, a, &r);
  profile_free(&r.prof);
  free(r.times);
  cpu_inst_free(&ci);
  rt_gpu_free(gm);
  cli_dumps_free(&d);
  cli_plans_free(&pl);
  return st;
}

/* --bind: every binding of one GPU session (bench_profile.c). */
static int bench_bindings(cli_opts *o, const bench_args *a) {
  cli_plans pl = {0};
  harp_error e = {0};
  o->random_inputs = true;
  int rc = cli_plans_load(&e, o, &pl) ? cli_report(&e) : bench_session(o, a, &pl);
  cli_plans_free(&pl);
  return rc;
}

int cmd_bench(int argc, char **argv) {
  bench_args a;
  char **rest = calloc((size_t)argc + 1, sizeof *rest);
  int nrest = 0;
  if (!rest) return 1;
  int rc = bench_flags(argc, argv, &a, rest, &nrest);
  if (rc >= 0) { /* --help, or a bad count */
    free(rest);
    return rc;
  }
  harp_error e = {0};
  cli_opts o;
  rc = cli_parse(nrest, rest, "bench",
                 "input param random-inputs sym shape seed backend target precision plan dump dump-dir loop-limit knob "
                 "time-stages shapeset",
                 &o, &e);
  free(rest);
  const cli_backend *b = rc ? NULL : cli_backend_get("bench", o.backend, "cpu interp cuda", &rc);
  if (!rc) rc = bench_check(&o, b, &a);
  if (rc || a.nbinds) {
    rc = rc ? rc : o.nshapesets ? bench_shapeset(&o, &a) : bench_bindings(&o, &a);
    cli_opts_free(&o);
    return rc;
  }
  o.random_inputs = true;
  o.host_flow = true;
  cli_model m;
  harp_status st = cli_load_model(&e, &o, true, &m);
  if (!st && m.flow) /* run-time control flow: the host program, timed whole (cli_flow.c) */
    rc = a.profile ? cli_usage_error("bench", "--profile needs a model without run-time control flow")
                   : cli_flow_bench(&o, &m, b, a.graphs, a.warmup, a.repeat, a.json);
  else if (!st && !(st = cli_write_dumps(&e, &o, &m)))
    st = bench_model(&e, &o, &m, b, &a);
  if (st) rc = cli_report(&e);
  cli_model_free(&m);
  cli_opts_free(&o);
  return rc;
}
