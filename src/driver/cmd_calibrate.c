/* cmd_calibrate.c — `harp calibrate`: measure this CPU for the cost model
 * (the micro-kernel per micro-tile, packing and memory bandwidth, a
 * parallel call's cost) and keep the figures in the cache directory, where
 * every later compile on this machine reads them (docs/plan.md §19).
 * Without --force an existing, well-formed file is shown, not re-measured;
 * a malformed one is reported and measured again. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "harp/tune.h"
#include "runtime/calib.h"

static const char calibrate_help[] =
    "usage: harp calibrate [--force] [--knob NAME=VALUE]\n\n"
    "Measure this CPU for the cost model (a second or two: the GEMM micro-kernel\n"
    "per micro-tile, depth and panel width; packing and memory bandwidth; the cost\n"
    "of a parallel call) and store the figures in the cache directory\n"
    "(<cache>/calib/cpu-<machine hash>.txt).  Compiles on this machine then rank\n"
    "CPU plans with them (knob cpu_calib=off: the uncalibrated model).  `harp tune`\n"
    "measures them at first use.  An existing, well-formed file is only shown.\n\n"
    "options:\n"
    "  --force              measure again even if the file is there\n"
    "  --knob NAME=VALUE    set a knob of the library (cache_dir, ...; repeatable)\n";

/* The figures of c, one per line. */
static void print_calib(const plan_calib *c) {
  printf("  memory %.1f GB/s (all cores), packing %.1f GB/s (one core), parallel call %.1f us\n", c->mem_gbs,
         c->pack_gbs, c->task_us);
  printf("  micro-kernel, GFLOP/s of one core (MRxNR kc nc):\n");
  for (int i = 0; i < c->nmk; i++)
    printf("    %dx%d kc %d nc %d: %.1f\n", c->mk[i].mr, c->mk[i].nr, c->mk[i].kc, c->mk[i].nc, c->mk[i].gflops);
  if (c->wf_ns[0] > 0)
    printf("  Winograd filter transform, ns a multiply-add (one core): %.3f in L2, %.3f beyond\n", c->wf_ns[0],
           c->wf_ns[1]);
}

int cmd_calibrate(int argc, char **argv) {
  bool force = false;
  char **rest = calloc((size_t)argc + 1, sizeof *rest);
  if (!rest) return 1;
  int nrest = 0;
  rest[nrest++] = argv[0];
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      fputs(calibrate_help, stdout);
      free(rest);
      return 0;
    }
    if (!strcmp(argv[i], "--force")) force = true;
    else rest[nrest++] = argv[i];
  }
  harp_error e = {0};
  cli_opts o;
  int rc = cli_parse(nrest, rest, "calibrate", "knob", &o, &e);
  free(rest);
  if (!rc && o.model) rc = cli_usage_error("calibrate", "unexpected argument '%s'", o.model);
  if (rc) {
    cli_opts_free(&o);
    return rc;
  }
  plan_machine m;
  plan_machine_detect_cpu_at(&m, o.knobs.cpu_ghz, o.knobs.cpu_bw_gbs);
  rt_calib_result res;
  if (rt_calib_ensure(&e, o.knobs.cache_dir, force, &m, &res)) {
    rc = cli_report(&e);
  } else {
    printf("harp calibrate: %s\n", m.name);
    if (res.why[0]) printf("  the file was bad (%s): measured again\n", res.why);
    if (res.measured) printf("  measured in %.1f s, stored: %s\n", res.seconds, res.path);
    else printf("  read from %s (--force measures again)\n", res.path);
    print_calib(&m.calib);
    if (o.knobs.cpu_calib == RT_CPU_CALIB_OFF) printf("  (the knob cpu_calib is off: compiles do not use it)\n");
  }
  rt_calib_result_free(&res);
  cli_opts_free(&o);
  return rc;
}
