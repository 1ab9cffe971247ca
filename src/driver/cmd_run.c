/* cmd_run.c — `harp run MODEL ...`: load, prepare, execute, write outputs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "harp/cpu.h"
#include "harp/function.h"
#include "harp/gpu.h"
#include "harp/interp.h"
#include "harp/region.h"

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
    "                         int32 '<i4' (or '<i8', range-checked), bool '|b1'\n"
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
    "                         must be given one of these ways (docs/onnx.md)\n"
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
    "                         rounded, fp32 accumulation); docs/cuda.md, \"Precision\"\n"
    "  --plan REGION=FILE     run region REGION with the Schedule Plan in FILE (JSON\n"
    "                         or DSL); --plan FILE reads a plan list (what --dump\n"
    "                         plan writes).  Repeatable.  Used by --backend cpu\n"
    "                         and cuda\n"
    "  --dump LIST            comma-separated IR dumps: frontend, tiny, indexbook,\n"
    "                         poly_view, region, function, c (the generated C), plan\n"
    "                         (every region's plan and where it came from: default,\n"
    "                         override, cache), gpu (GPU dialect + launches,\n"
    "                         gpu.json), cu (model.cu)\n"
    "  --dump-dir DIR         where dumps go (default: the --out DIR)\n"
    "  --max-memory BYTES     --backend cpu: refuse a model whose instance (arena plus\n"
    "                         weights) needs more (K, M, G suffixes; default: this\n"
    "                         machine's memory), with LimitExceeded before compiling\n"
    "  --loop-limit N         a model with run-time control flow (an If, Loop or Scan\n"
    "                         decided at run time: a host program of compiled\n"
    "                         segments, docs/onnx.md): the iterations a Loop may run\n"
    "                         before it fails (default 1000000); --dump flow writes\n"
    "                         the host program (flow.txt)\n";

int cmd_run(int argc, char **argv) {
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      fputs(run_help, stdout);
      return 0;
    }
  harp_error e = {0};
  cli_opts o;
  bool graphs = false;
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--graphs")) { /* run's own flag: drop it before the shared parser */
      graphs = true;
      for (int j = i; j + 1 < argc; j++) argv[j] = argv[j + 1];
      argc--, i--;
    }
  int rc = cli_parse(argc, argv, "run", "input param random-inputs seed sym shape out outputs backend target precision dump dump-dir plan loop-limit max-memory", &o, &e);
  if (rc) {
    cli_opts_free(&o);
    return rc;
  }
  if (!o.model) {
    cli_opts_free(&o);
    return cli_usage_error("run", "no MODEL given");
  }
  o.fix_needed = true; /* one run: an integer --input a node needs at import is fixed there */
  const char *backend = o.backend ? o.backend : "cpu";
  if (strcmp(backend, "interp") != 0 && strcmp(backend, "cpu") != 0 && strcmp(backend, "regions") != 0 &&
      strcmp(backend, "cuda") != 0) {
    int r = cli_usage_error("run", "unknown or unavailable backend '%s' (available: interp, cpu, regions, cuda)", backend);
    cli_opts_free(&o);
    return r;
  }
  if (cli_wants_dump(&o, "c") && strcmp(backend, "cpu")) {
    cli_opts_free(&o);
    return cli_usage_error("run", "--dump c needs --backend cpu (the C of the CPU backend)");
  }
  cli_model m;
  cli_plans pl = {0};
  ut_tensor *outs = NULL;
  const char **names = NULL;
  o.host_flow = true;
  if (cli_load_model(&e, &o, true, &m)) goto fail;
  if (m.flow) { /* run-time control flow: the host program (cli_flow.c) */
    rc = cli_flow_run(&o, &m, backend, graphs);
    goto done;
  }
  if (cli_write_dumps(&e, &o, &m) || cli_plans_load(&e, &o, &pl)) goto fail;
  if (pl.n && strcmp(backend, "cpu") && strcmp(backend, "cuda") && !cli_wants_dump(&o, "plan"))
    fprintf(stderr, "harp: note: --plan changes the code of --backend cpu and cuda only\n");
  if (o.precision && strcmp(backend, "cuda")) fprintf(stderr, "harp: note: --precision changes --backend cuda only\n");
  outs = calloc((size_t)m.g->noutputs + 1, sizeof *outs);
  names = calloc((size_t)m.g->noutputs + 1, sizeof *names);
  if (!outs || !names) {
    ut_fail(&e, HARP_E_NO_MEMORY, NULL, "out of memory");
    goto fail;
  }
  if (strcmp(backend, "cuda") && cli_write_gpu_dumps(&e, &o, &m, &pl)) goto fail;
  if (!strcmp(backend, "cuda")) {
    const char *target;
    rt_gpu_model *gm = NULL;
    harp_status s = cli_gpu_target(&e, &o, NULL, &target);
    rt_gpu_opts go = {.target = target, .graphs = graphs, .plan_overrides = pl.ov, .nplan_overrides = pl.n,
                      .precision = o.precision};
    if (!s) s = rt_gpu_build(&e, m.g, &m.syms, &go, &gm);
    if (!s) s = cli_write_gpu_model_dumps(&e, &o, gm);
    if (!s) s = rt_gpu_run(&e, gm, m.inputs, m.ninputs, outs);
    rt_gpu_free(gm);
    if (s) goto fail;
  } else if (!strcmp(backend, "regions")) {
    rg_partition *p = NULL;
    fn_function *f = NULL;
    harp_status st = cli_form_regions(&e, &o, &m, &p);
    if (!st) st = fn_build(&e, p, "main", &f);
    if (!st) st = fn_playback(&e, f, &m.syms, m.inputs, m.ninputs, outs);
    if (!st)
      fprintf(stderr, "harp: %d regions, arena %zu bytes (%d live at most)\n", p->n, f->required_memory,
              fn_max_live_temps(f));
    fn_free(f);
    rg_partition_free(p);
    if (st) goto fail;
  } else if (!strcmp(backend, "cpu")) {
    rt_cpu_opts co = {.keep_source = cli_wants_dump(&o, "c"), .plan_overrides = pl.ov, .nplan_overrides = pl.n,
                      .max_memory = o.max_memory};
    rt_cpu_model *cm = NULL;
    harp_status s = rt_cpu_compile(&e, m.g, &m.syms, &co, &cm);
    if (!s && rt_cpu_warning(cm)) fprintf(stderr, "harp: warning: %s\n", rt_cpu_warning(cm));
    if (!s) cli_print_plan_notes(rt_cpu_plans(cm));
    if (!s && co.keep_source) s = cli_write_text(&e, o.dump_dir, "model.c", rt_cpu_source(cm));
    if (!s) s = cli_write_plan_dump(&e, &o, &m, &pl, rt_cpu_plans(cm));
    if (!s) s = rt_cpu_run_taking_weights(&e, cm, m.inputs, m.ninputs, outs); /* run once: the weights go once copied */
    rt_cpu_free(cm);
    if (s) goto fail;
  } else if (tiny_interp(&e, m.g, &m.syms, m.inputs, m.ninputs, outs)) {
    goto fail;
  }
  if (strcmp(backend, "cpu") && cli_write_plan_dump(&e, &o, &m, &pl, NULL)) goto fail;
  for (int k = 0; k < m.g->noutputs; k++) names[k] = tiny_output_name(m.g, m.g->outputs[k]);
  if (cli_write_outputs(&e, o.out_dir, names, outs, m.g->noutputs)) goto fail;
  for (int k = 0; k < m.g->noutputs; k++) {
    char shape[256];
    tiny_shape_format(&m.g->nodes[m.g->outputs[k]].shape, shape, sizeof shape);
    printf("%s: %s %s -> %s/%s.npy\n", names[k], tiny_dtype_name(outs[k].dtype), shape, o.out_dir, names[k]);
  }
  rc = 0;
  goto done;
fail:
  rc = cli_report(&e);
done:
  if (outs && m.g && !m.flow)
    for (int k = 0; k < m.g->noutputs; k++) ut_tensor_free(&outs[k]);
  free(outs);
  free(names);
  cli_plans_free(&pl);
  cli_model_free(&m);
  cli_opts_free(&o);
  return rc;
}
