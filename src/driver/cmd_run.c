/* cmd_run.c — `harp run MODEL ...`: load, prepare, compile for the backend
 * (the dumps read from its stages), execute, write outputs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "harp/cpu.h"
#include "harp/function.h"
#include "harp/gpu.h"
#include "harp/interp.h"
#include "harp/pipeline.h"
#include "harp/region.h"
#include "harp/sgen.h"
#include "util/util.h"

static const char run_help[] =
    "usage: harp run MODEL [options]\n\n"
    "Run MODEL and write each output to DIR/<output-name>.npy (node id, or value\n"
    "name in the seed 000 dialect; an ONNX output's name mapped to an identifier:\n"
    "every character outside [A-Za-z0-9_] becomes '_').  MODEL is chosen by\n"
    "extension: .json (Tiny IR, either dialect), .harp, .onnx (initializers are\n"
    "weights; --input and --param take the ONNX names).\n\n"
    "options:\n"
    "  --input NAME=FILE.npy  tensor for the model input NAME (repeatable);\n"
    "                         dtypes: float16 '<f2', float32 '<f4' (also for bf16),\n"
    "                         int32 '<i4' (or '<i8', range-checked), int8 '|i1',\n"
    "                         uint8 '|u1', bool '|b1'\n"
    "  --param NAME=FILE.npy  a weight: a constant of the compiled model (packed once\n"
    "                         where a kernel takes it packed); the file as for --input\n"
    "                         (bench and compile take the same flag); on an ONNX\n"
    "                         graph input: fixed at import (a shape or axes input\n"
    "                         then folds like an initializer); an integer --input\n"
    "                         whose values a node needs at import (a shape, axes,\n"
    "                         pads fed at run time) is fixed so for this run\n"
    "  --random-inputs        fill inputs not given with --input from a seeded RNG\n"
    "  --seed N               seed for --random-inputs (default 1)\n"
    "  --sym NAME=INT         bind a shape symbol no input fixes (repeatable)\n"
    "  --shape NAME=DIMS      an ONNX graph input's shape, e.g. x=1x3x640x640\n"
    "                         (repeatable): the import specialises on it, as on\n"
    "                         the --input files' shapes and --sym; a dynamic dim\n"
    "                         must be given one of these ways (docs/onnx.md); with\n"
    "                         --shapeset it binds the box's dims, as a file does\n"
    "  --out DIR              where outputs go (default: .)\n"
    "  --outputs ID,...       return these nodes instead of the model's outputs\n"
    "  --backend B            cpu (default: generated C, compiled with the system\n"
    "                         compiler, cached), interp (the reference interpreter),\n"
    "                         regions (form regions, build the Function with its\n"
    "                         arena, and run it region by region on the interpreter:\n"
    "                         the same outputs, bit for bit in fp32), or cuda (CUDA C\n"
    "                         compiled with NVRTC, cached, run through the CUDA\n"
    "                         driver; needs an sm_80+ GPU, else a clear error)\n"
    "  --target T             cpu (default), sm80 or sm90: the machine regions are\n"
    "                         formed for (cost model, thresholds); with --backend\n"
    "                         cuda, the template branch (default: the device's)\n"
    "  --graphs               cuda: launch through a CUDA Graph captured once\n"
    "  --precision P          cuda: how fp32 matmuls, convolutions and attention\n"
    "                         compute: tf32 (default: tensor cores, fp32\n"
    "                         accumulation, as cuDNN and onnxruntime do), fp32\n"
    "                         (strict, no tensor cores), fp16 or bf16 (operands\n"
    "                         rounded, fp32 accumulation); docs/cuda.md, \"Precision\".\n"
    "                         cpu: fp32 (default) or bf16 (matmuls and convs with\n"
    "                         bf16 operands, fp32 accumulation; needs AVX512_BF16);\n"
    "                         docs/options.md\n"
    "  --plan REGION=FILE     run region REGION with the Schedule Plan in FILE (JSON\n"
    "                         or DSL); --plan FILE reads a plan list (what --dump\n"
    "                         plan writes).  Repeatable.  Used by --backend cpu\n"
    "                         and cuda\n"
    "  --dump LIST            comma-separated IR dumps: frontend, tiny, indexbook,\n"
    "                         poly_view, region, function, c (the generated C), plan\n"
    "                         (every region's plan and where it came from: default,\n"
    "                         override, cache), gpu (GPU dialect + launches,\n"
    "                         gpu.json), cu (model.cu)\n"
    "  --dump-dir DIR         where dumps go (default: the --out DIR); the stage dumps\n"
    "                         are those of the backend's compile (of --target's\n"
    "                         backend for interp and regions)\n"
    "  --knob NAME=VALUE      set a knob of the library (harp --help-options lists\n"
    "                         them, with the environment variables that set them too)\n"
    "  --time-stages          print each compile stage's time to stderr\n"
    "  --shapeset NAME=LO..HI --backend cpu: compile one object\n"
    "                         for every binding with NAME in LO..HI (repeatable; the\n"
    "                         other symbols stay as bound), cached like any object,\n"
    "                         so a later run at another binding in the box compiles\n"
    "                         nothing; a binding outside is an error.  When a kernel\n"
    "                         cannot take its sizes at run time yet, each binding\n"
    "                         compiles as before (--time-stages says why).  An\n"
    "                         ONNX model's dynamic dim: its dim_param, its shape\n"
    "                         variable (x_d2) or INPUT:AXIS (images:2)\n"
    "  --shapeset exact       no box chosen by harp.  By default (--shapeset auto) an\n"
    "                         ONNX model whose dynamic dims --input files set\n"
    "                         compiles that binding alone, recorded in the cache;\n"
    "                         a later run at another binding in its power-of-two\n"
    "                         bucket (H=20: 16..31) compiles the box (docs/options.md)\n"
    "  --shapeset-recompile   a binding outside the --shapeset box compiles on its\n"
    "                         own (cached) instead of failing with InputMismatch\n"
    "  --max-memory BYTES     --backend cpu: refuse a model whose instance (arena plus\n"
    "                         weights) needs more (K, M, G suffixes; default: this\n"
    "                         machine's memory), with LimitExceeded before compiling\n"
    "  --loop-limit N         a model with run-time control flow (an If, Loop or Scan\n"
    "                         decided at run time: a host program of compiled\n"
    "                         segments, docs/onnx.md): the iterations a Loop may run\n"
    "                         before it fails (default 1000000); --dump flow writes\n"
    "                         the host program (flow.txt)\n"
    "  --next                 start another input set: its own --input, --shape and\n"
    "                         --sym (only those), the other options set 0's (before\n"
    "                         the first --next); --backend cpu compiles once, for\n"
    "                         --shapeset or else the box the sets span, checks\n"
    "                         every set before any runs, and writes set k's outputs\n"
    "                         to DIR/k/ (one set: DIR/ as before)\n";

/* --backend cpu: compile (the dumps from its stages), run once; the
 * weights go once copied into the parameter block.  A run served by tier 0
 * while the object still builds (knob tier0) hands the model to *pending:
 * the caller writes the outputs first, then waits for the build
 * (finish_pending). */
static harp_status run_cpu(harp_error *e, const cli_opts *o, cli_model *m, const cli_plans *pl, cli_dumps *d,
                         ut_tensor *outs, rt_cpu_model **pending) {
  rt_cpu_opts co = {.knobs = &o->knobs, .plan_overrides = pl->ov, .nplan_overrides = pl->n, .precision = o->precision,
                    .after_stage = cli_dumps_hook, .hook_ctx = d, .max_memory = o->max_memory};
  co.keep_analysis = cli_dumps_own(d, &rt_target_cpu, NULL);
  for (int i = 0; i < d->n; i++) /* a dump of the C or the plans: tier 0 prints the C before the run, for its hook */
    co.keep_source |= d->stage[i] >= RT_STAGE_PLANS;
  rt_cpu_model *cm = NULL;
  harp_status s = rt_cpu_compile(e, m->g, &m->syms, &co, &cm);
  if (!s && rt_cpu_warning(cm)) fprintf(stderr, "harp: warning: %s\n", rt_cpu_warning(cm));
  harp_error be = {0}; /* a failed background build: said after the run (finish_pending) */
  bool noted = !s && rt_cpu_ready(&be, cm); /* else the plans' notes come with the C (tier 0), after the run */
  harp_error_clear(&be);
  if (noted) cli_print_plan_notes(rt_cpu_plans(cm));
  if (!s) {
    cli_print_stage_times(o, m, rt_cpu_stages(cm));
    if (noted && o->time_stages && rt_cpu_code_in_background(cm)) /* the builder thread was first: no tier-0 run */
      fprintf(stderr, "harp: tier 0: the object was ready before the first run (%s; its C printed in the background)\n",
              rt_cpu_cache_hit(cm) ? "found in the cache" : "built");
    s = rt_cpu_run_taking_weights(e, cm, m->inputs, m->ninputs, outs);
  }
  int fast, interp;
  double fast_ms, interp_ms;
  if (!s && rt_cpu_tier0_last(cm, &fast, &interp, &fast_ms, &interp_ms)) {
    if (o->time_stages)
      fprintf(stderr,
              "harp: tier 0: %d kernels on the shape-generic kernels (%.1f ms), %d on the interpreter (%.1f ms), "
              "%.1f ms waiting for their reading\n",
              fast, fast_ms, interp, interp_ms, rt_cpu_tier0_wait_ms(cm));
    *pending = cm;
    return s;
  }
  if (!s && !noted) cli_print_plan_notes(rt_cpu_plans(cm));
  rt_cpu_free(cm);
  return s;
}

/* --backend cpu with --shapeset: one object for the box (harp/sgen.h), the
 * model's other symbols fixed at their binding; one run at the inputs'. */
static harp_status run_shapeset(harp_error *e, const cli_opts *o, cli_model *m, ut_tensor *outs) {
  rt_sgen *s = NULL;
  harp_status st = cli_shapeset_compile(e, o, m, &s);
  if (!st) st = rt_sgen_run(e, s, m->inputs, m->ninputs, outs);
  if (!st && o->time_stages)
    fprintf(stderr, "harp: shapeset: %d object(s), %d built by the C compiler (the rest from the cache)\n", rt_sgen_objects(s),
            rt_sgen_cc_runs(s));
  rt_sgen_free(s);
  return st;
}

/* After the outputs of a tier-0 run are written: the first result's time,
 * then the background build waited for (its object goes to the cache). */
static harp_status finish_pending(harp_error *e, const cli_opts *o, rt_cpu_model *cm, double t_start) {
  if (!cm) return HARP_OK;
  if (o->time_stages) fprintf(stderr, "harp: tier 0: first result written %.1f ms after start\n", ut_now_ms() - t_start);
  fflush(stdout);
  double build_ms;
  harp_status st = rt_cpu_wait_build(e, cm, &build_ms);
  cli_print_plan_notes(rt_cpu_plans(cm));
  const rt_compile *c = rt_cpu_stages(cm);
  if (o->time_stages && build_ms >= 0)
    fprintf(stderr, "harp: tier 0: the compiled object built in %.1f ms (background%s; its C printed in %.1f ms)\n", build_ms,
            rt_cpu_cache_hit(cm) ? ", found in the cache" : "", c->ms[RT_STAGE_CODE]);
  static const char *const hold_by[] = {"never held", "released by the first tier-0 run", "released by a wait for the object",
                                        "released at the 1.5 s limit"};
  double hold_ms;
  rt_cpu_hold h = rt_cpu_builder_hold(cm, &hold_ms);
  if (o->time_stages && build_ms >= 0)
    fprintf(stderr, "harp: tier 0: the builder held %.1f ms after its reading, %s\n", hold_ms, hold_by[h]);
  if (!st && rt_cpu_warning(cm)) fprintf(stderr, "harp: warning: %s\n", rt_cpu_warning(cm));
  rt_cpu_free(cm);
  return st;
}

/* --backend cuda: build for --target (else the device's), run once. */
static harp_status run_cuda(harp_error *e, const cli_opts *o, cli_model *m, const cli_plans *pl, cli_dumps *d, bool graphs,
                          ut_tensor *outs) {
  const char *target;
  if (cli_gpu_target(e, o, NULL, &target)) return e->code;
  rt_gpu_opts go = {.knobs = &o->knobs, .target = target, .graphs = graphs, .plan_overrides = pl->ov,
                    .nplan_overrides = pl->n, .precision = o->precision, .after_stage = cli_dumps_hook, .hook_ctx = d};
  go.keep_analysis = cli_dumps_own(d, &rt_target_cuda, target);
  rt_gpu_model *gm = NULL;
  harp_status s = rt_gpu_build(e, m->g, &m->syms, &go, &gm);
  if (!s) s = rt_gpu_run(e, gm, m->inputs, m->ninputs, outs);
  if (!s) cli_print_stage_times(o, m, rt_gpu_stages(gm));
  rt_gpu_free(gm);
  return s;
}

/* --backend regions: the compile of --target's backend up to its Function
 * (its final partition), played back region by region on the interpreter. */
static harp_status run_regions(harp_error *e, const cli_opts *o, cli_model *m, const cli_plans *pl, cli_dumps *d,
                             ut_tensor *outs) {
  const rt_target *t;
  const char *arch;
  rt_compile *c = NULL;
  if (cli_target_of(e, o, &t, &arch)) return e->code;
  cli_dumps_own(d, t, arch);
  harp_status st = cli_compile(e, o, m, pl, t, arch, RT_STAGE_FUNCTION, d, &c);
  if (!st) st = fn_playback(e, c->f, &m->syms, m->inputs, m->ninputs, outs);
  if (!st)
    fprintf(stderr, "harp: %d regions, arena %zu bytes (%d live at most)\n", c->part->n, c->f->required_memory,
            fn_max_live_temps(c->f));
  rt_compile_free(c);
  return st;
}

/* Compile with backend b and run once into outs. */
static harp_status run_backend(harp_error *e, const cli_opts *o, cli_model *m, const cli_backend *b, bool graphs,
                             cli_dumps *d, ut_tensor *outs, rt_cpu_model **pending) {
  cli_plans pl = {0};
  harp_status st = cli_plans_load(e, o, &pl);
  if (!st && pl.n && (!b->target || b->playback) && !cli_wants_dump(o, "plan"))
    fprintf(stderr, "harp: note: --plan changes the code of --backend cpu and cuda only\n");
  if (!st && o->precision && b->target != &rt_target_cuda && b->target != &rt_target_cpu)
    fprintf(stderr, "harp: note: --precision changes --backend cpu and cuda only\n");
  if (st) {
  } else if (b->playback) {
    st = run_regions(e, o, m, &pl, d, outs);
  } else if (b->target == &rt_target_cuda) {
    st = run_cuda(e, o, m, &pl, d, graphs, outs);
  } else if (b->target == &rt_target_cpu) {
    st = run_cpu(e, o, m, &pl, d, outs, pending);
  } else {
    st = tiny_interp(e, m->g, &m->syms, m->inputs, m->ninputs, outs);
  }
  if (!st) st = cli_dumps_finish(e, d, m, &pl);
  else cli_dumps_salvage(d);
  cli_plans_free(&pl);
  return st;
}

/* run's own flag --graphs, taken out of argv before the shared parser. */
static bool take_graphs(int *argc, char **argv) {
  bool graphs = false;
  for (int i = 1; i < *argc; i++)
    if (!strcmp(argv[i], "--graphs")) {
      graphs = true;
      for (int j = i; j + 1 < *argc; j++) argv[j] = argv[j + 1];
      (*argc)--, i--;
    }
  return graphs;
}

/* The shared options and the backend; 0, or the exit code of a usage error. */
static int run_options(int argc, char **argv, cli_opts *o, const cli_backend **b) {
  harp_error e = {0};
  int rc = cli_parse(argc, argv, "run",
                     "input param random-inputs seed sym shape out outputs backend target precision dump dump-dir plan "
                     "loop-limit max-memory knob time-stages shapeset shapeset-recompile",
                     o, &e);
  if (rc || !(*b = cli_backend_get("run", o->backend, "interp cpu regions cuda", &rc))) return rc;
  if (!o->model) return cli_usage_error("run", "no MODEL given");
  if (o->nshapesets && ((*b)->target != &rt_target_cpu || (*b)->playback || o->nplans || o->ndumps))
    return cli_usage_error("run", "--shapeset needs --backend cpu, without --plan or --dump");
  if (o->shapeset_recompile && !o->nshapesets) return cli_usage_error("run", "--shapeset-recompile needs --shapeset");
  if (cli_wants_dump(o, "c") && ((*b)->target != &rt_target_cpu || (*b)->playback))
    return cli_usage_error("run", "--dump c needs --backend cpu (the C of the CPU backend)");
  return 0;
}

int cmd_run(int argc, char **argv) {
  double t_start = ut_now_ms();
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      fputs(run_help, stdout);
      return 0;
    }
  harp_error e = {0};
  cli_opts o;
  const cli_backend *b = NULL;
  bool graphs = take_graphs(&argc, argv);
  if (cli_run_sets_count(argc, argv) > 1) return cli_run_sets(argc, argv, run_options); /* run_sets.c */
  int rc = run_options(argc, argv, &o, &b);
  if (rc) {
    cli_opts_free(&o);
    return rc;
  }
  o.fix_needed = true; /* one run: an integer --input a node needs at import is fixed there */
  o.host_flow = true;
  o.shape_binds = true; /* --shape binds a --shapeset's symbols (bench binds them with --bind) */
  cli_model m;
  cli_dumps d;
  cli_dumps_init(&d, &o);
  ut_tensor *outs = NULL;
  harp_status st = cli_load_model(&e, &o, true, &m);
  cli_autobox_st ab = {0}; /* harp's box over dynamic dims the --input files set (cli_autobox.c) */
  if (!st && !m.flow) st = cli_autobox(&e, &o, &m, b->target == &rt_target_cpu && !b->playback, &ab);
  if (!st && m.flow) { /* run-time control flow: the host program (cli_flow.c) */
    rc = cli_flow_run(&o, &m, b, graphs);
  } else {
    if (!st) st = cli_write_dumps(&e, &o, &m);
    if (!st && !(outs = calloc((size_t)m.g->noutputs + 1, sizeof *outs))) st = ut_fail(&e, HARP_E_NO_MEMORY, NULL, "out of memory");
    rt_cpu_model *pending = NULL; /* tier 0 served the run: its build still goes on */
    if (!st && o.nshapesets) st = o.shapeset_why[0] ? cli_shapeset_per_binding(&e, &o, &m, outs) : run_shapeset(&e, &o, &m, outs);
    if (st && ab.boxes && st != HARP_E_NO_MEMORY) { /* harp's box failed: the binding alone, as without it */
      harp_error why = e;
      harp_error_clear(&e);
      for (int k = 0; k < m.g->noutputs; k++) ut_tensor_free(&outs[k]);
      st = cli_autobox_undo(&e, &o, &m, &ab, &why);
      if (!st) st = run_backend(&e, &o, &m, b, graphs, &d, outs, &pending);
    } else if (!st && !o.nshapesets) {
      st = run_backend(&e, &o, &m, b, graphs, &d, outs, &pending);
    }
    if (!st) st = cli_run_write_outputs(&e, &o, &m, outs);
    if (pending) { /* the outputs are tier 0's, whole and right: a failed build is a warning */
      harp_error be = {0};
      if (finish_pending(&be, &o, pending, t_start)) {
        char msg[1400];
        harp_error_format(&be, msg, (int)sizeof msg);
        fprintf(stderr, "harp: warning: the background build failed (the outputs are tier 0's): %s\n", msg);
      }
    }
    rc = st ? cli_report(&e) : 0;
  }
  if (outs && m.g)
    for (int k = 0; k < m.g->noutputs; k++) ut_tensor_free(&outs[k]);
  free(outs);
  cli_dumps_free(&d);
  cli_model_free(&m);
  cli_opts_free(&o);
  cli_autobox_free(&ab);
  return rc;
}
