/* main.c — the harp CLI: a table of commands.  Each command lives in its own
 * cmd_*.c file and returns the process exit code (0 ok, 1 user error, 2 bug). */
#include <stdio.h>
#include <string.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "cli.h"
#include "harp.h"
#include "harp/knobs.h"

typedef struct command {
  const char *name;
  int (*fn)(int argc, char **argv);
  const char *summary;
} command;

static const command commands[] = {
    {"run", cmd_run, "run a model and write its outputs as .npy files"},
    {"dump", cmd_dump, "write the intermediate representations of a model"},
    {"bench", cmd_bench, "time a model: compile once, median of repeated runs"},
    {"compile", cmd_compile, "write a standalone package (C, or CUDA C + a host loader; weights, Makefile)"},
    {"decompile", cmd_decompile, "print a .harp model back as harp DSL text"},
    {"viz", cmd_viz, "draw a model (frontend, tiny or region stage) as Graphviz DOT/SVG/PNG"},
    {"plan", cmd_plan, "check a Schedule Plan and convert it between JSON and DSL"},
    {"tune", cmd_tune, "measure the plan search space, cache the best plan per region"},
    {"calibrate", cmd_calibrate, "measure this CPU for the cost model (kept in the cache directory)"},
    {"check", cmd_check, "say what harp will and will not do with an ONNX model, in one go"},
    {"ops", cmd_ops, "list the Tiny uops: the op table, one row each"},
};

static void usage(FILE *f) {
  fprintf(f,
          "harp — a deep-learning compiler\n\n"
          "usage: harp <command> [options]\n\ncommands:\n");
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
  fprintf(f,
          "\nMODEL is chosen by extension: .json (Tiny IR, seed 001 or seed 000 dialect),"
          " .harp (the harp DSL) or .onnx\n(an ONNX model; its initializers are the weights).\n"
          "Run 'harp <command> --help' for a command's options, 'harp --help-options' for the\n"
          "library's knobs (set by environment variables or --knob NAME=VALUE).\n");
}

/* The knob table: name, variable, type, default, the value in effect here
 * (the environment read), and what it does. */
static int help_options(void) {
  static const char *const types[] = {"bool", "int", "number", "string", "choice"};
  harp_error e = {0};
  rt_knobs k;
  rt_knobs_init(&k);
  if (rt_knobs_from_env(&e, &k)) {
    fprintf(stderr, "harp: %s\n", e.msg);
    return 1;
  }
  printf("harp's knobs (docs/options.md): each is set by its environment variable, or by\n"
         "--knob NAME=VALUE (run, bench, dump, compile, tune); harp.h takes harp_options.knobs.\n\n");
  printf("%-13s %-18s %-18s %-8s %s\n", "knob", "variable", "type", "default", "now");
  for (int i = 0; i < rt_knob_count(); i++) {
    const rt_knob *r = rt_knob_at(i);
    char now[RT_KNOB_PATH];
    rt_knob_format(&k, r, now, sizeof now);
    char ty[64];
    if (r->type == RT_KNOB_CHOICE) snprintf(ty, sizeof ty, "%s", r->choices);
    else if (r->lo < r->hi) snprintf(ty, sizeof ty, "%s %.10g-%.10g", types[r->type], r->lo, r->hi);
    else snprintf(ty, sizeof ty, "%s", types[r->type]);
    printf("%-13s %-18s %-18s %-8s %s\n  %s\n", r->name, r->env, ty, *r->dflt ? r->dflt : "\"\"", *now ? now : "\"\"",
           r->doc);
  }
  return 0;
}

int main(int argc, char **argv) {
#if defined(__GLIBC__) && defined(M_MMAP_THRESHOLD)
  /* blocks of 1 MiB and up straight from mmap, so a freed one goes back to
   * the system: glibc raises its threshold after the first such free, and
   * the model file, its parse and the weights' copies then stayed resident
   * after their free (ResNet-50 `harp run` peak RSS 304 -> 218 MB) */
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
#endif
  if (argc < 2) {
    usage(stderr);
    return 1;
  }
  if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
    usage(stdout);
    return 0;
  }
  if (!strcmp(argv[1], "--help-options")) return help_options();
  if (!strcmp(argv[1], "--version")) {
    printf("harp %s\n", harp_version()); /* CMakeLists.txt's project() version */
    return 0;
  }
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    if (!strcmp(argv[1], commands[i].name)) return commands[i].fn(argc - 1, argv + 1);
  fprintf(stderr, "harp: error[UsageError]: unknown command '%s'\n", argv[1]);
  usage(stderr);
  return 1;
}
