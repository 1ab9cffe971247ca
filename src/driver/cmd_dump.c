/* cmd_dump.c — `harp dump MODEL --dump LIST [--dump-dir DIR] [--sym ...]`:
 * write IR dumps without running: the compile for --target (cpu by
 * default; gpu and cu: CUDA) runs up to the last stage they need.
 * Symbols may stay unbound. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const char dump_help[] =
    "usage: harp dump MODEL --dump LIST [--dump-dir DIR] [--sym NAME=INT]... [--shape NAME=DIMS]... [--target T] [--plan P]\n\n"
    "MODEL is chosen by extension: .json, .harp, .onnx.\n"
    "Write the intermediate representations named in LIST (comma-separated):\n"
    "  frontend    the high-level graph of a .harp model (JSON)\n"
    "  tiny        the normalized Tiny IR (canonical JSON)\n"
    "  indexbook   the axis side table: axes, domains, maps (docs/indexbook.md)\n"
    "  poly_view   blocks, isl domains and accesses, contraction patterns,\n"
    "              dependences (docs/poly-view.md)\n"
    "  region      the regions (one per kernel) as Region Buffer SSA, with\n"
    "              shapes, local edges, plan summaries, STOP reasons\n"
    "              (docs/regions.md; needs every size bound)\n"
    "  function    the compiled Function: kernels, buffers, arena layout\n"
    "  gpu         the GPU dialect of every kernel, the launch list and the\n"
    "              device memory layout (gpu.json; docs/cuda.md)\n"
    "  cu          the CUDA C translation unit (model.cu)\n"
    "  plan        every region's Schedule Plan and where it came from\n"
    "              (default, override, cache): a plan list, plan.json\n"
    "(the generated C: harp run MODEL --dump c)\n"
    "--plan REGION=FILE | FILE overrides a region's plan (docs/plan.md §14).\n"
    "--target cpu|sm80|sm90 picks the backend whose compile the dumps describe (the\n"
    "partition, Function and plans it compiles); gpu and cu take sm80 (the default\n"
    "for them) or sm90, and --precision tf32|fp32|fp16|bf16 (how fp32 contractions\n"
    "compute; default tf32).  Neither needs a GPU or NVRTC.\n"
    "--shapeset NAME=LO..HI (gpu, cu): the GPU kernels that can (the generic loop\n"
    "nests) read NAME's size at run time (kernel parameter hp_sv<i>, the launch's\n"
    "grid_x from it), one build for the box; bind NAME inside the box with --sym\n"
    "(at HI the buffers are the box's largest).\n"
    "--knob NAME=VALUE sets a knob (harp --help-options; repeatable); --time-stages\n"
    "prints each compile stage's time.\n"
    "Symbols without a value stay symbolic where the layer allows it; --shape\n"
    "gives an ONNX graph input's shape at import (docs/onnx.md).\n"
    "DIR defaults to the current directory.\n";

int cmd_dump(int argc, char **argv) {
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      fputs(dump_help, stdout);
      return 0;
    }
  harp_error e = {0};
  cli_opts o;
  int rc = cli_parse(argc, argv, "dump", "sym shape dump dump-dir target precision plan knob time-stages shapeset", &o, &e);
  if (rc) {
    cli_opts_free(&o);
    return rc;
  }
  if (!o.model || o.ndumps == 0) {
    cli_opts_free(&o);
    return cli_usage_error("dump", "usage: harp dump MODEL --dump LIST");
  }
  if (cli_wants_dump(&o, "c")) { /* the C exists once the CPU backend compiles: say where, write nothing */
    cli_opts_free(&o);
    return cli_usage_error("dump", "the generated C is written by `harp run MODEL --dump c` "
                                   "(or `harp compile MODEL --target cpu -o DIR`), not by harp dump");
  }
  cli_model m;
  cli_plans pl = {0};
  cli_dumps d;
  cli_dumps_init(&d, &o);
  if (cli_load_model(&e, &o, false, &m) || cli_write_dumps(&e, &o, &m) || cli_plans_load(&e, &o, &pl) ||
      cli_dumps_finish(&e, &d, &m, &pl)) {
    cli_dumps_salvage(&d);
    rc = cli_report(&e);
  }
  cli_dumps_free(&d);
  cli_plans_free(&pl);
  cli_model_free(&m);
  cli_opts_free(&o);
  return rc;
}
