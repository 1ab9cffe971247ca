/* cli_shapeset.c — --shapeset NAME=LO..HI (harp run, harp bench): the
 * model compiled as one object for a box of its shape symbols.
 * Needs: harp/sgen.h, cli.c (cli_model.raw).  Gives: cli_shapeset_compile. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "harp/sgen.h"
#include "util/util.h"

/* "NAME=LO..HI" into *y, its name copied into name[cap]. */
static harp_status parse_box(harp_error *e, const char *spec, char *name, size_t cap, rt_sgen_sym *y) {
  const char *eq = strchr(spec, '=');
  char *dots = NULL, *end = NULL;
  errno = 0;
  long long lo = eq ? strtoll(eq + 1, &dots, 10) : 0;
  long long hi = dots && dots > eq + 1 && !strncmp(dots, "..", 2) ? strtoll(dots + 2, &end, 10) : 0;
  if (!eq || eq == spec || (size_t)(eq - spec) >= cap || !end || end == dots + 2 || *end || errno)
    return ut_fail(e, HARP_E_USAGE, NULL, "--shapeset '%s': expected NAME=LO..HI (integers)", spec);
  snprintf(name, cap, "%.*s", (int)(eq - spec), spec);
  *y = (rt_sgen_sym){name, lo, hi};
  return HARP_OK;
}

harp_status cli_shapeset_compile(harp_error *e, const cli_opts *o, const cli_model *m, rt_sgen **out) {
  *out = NULL;
  if (!m->raw || m->onnx) return ut_fail(e, HARP_E_USAGE, NULL, "--shapeset takes a .json or .harp model");
  rt_sgen_sym box[CLI_MAX_LIST + 64];
  char names[CLI_MAX_LIST][64];
  int n = 0;
  for (int i = 0; i < o->nshapesets; i++)
    if (parse_box(e, o->shapesets[i], names[i], sizeof names[i], &box[n++])) return e->code;
  for (int i = 0; i < m->syms.n && n < CLI_MAX_LIST + 64; i++) { /* the others stay as bound */
    bool boxed = false;
    for (int k = 0; k < o->nshapesets; k++) boxed |= !strcmp(box[k].name, m->syms.names[i]);
    if (!boxed) box[n++] = (rt_sgen_sym){m->syms.names[i], m->syms.values[i], m->syms.values[i]};
  }
  tiny_graph *raw = NULL;
  rt_cpu_opts co = {.knobs = &o->knobs, .precision = o->precision, .max_memory = o->max_memory};
  rt_sgen_opts so = {.cpu = &co};
  double t0 = ut_now_ms();
  harp_status st = tiny_load_json(e, m->raw, strlen(m->raw), o->model, &raw);
  if (!st) st = rt_sgen_compile(e, raw, box, n, &so, out);
  tiny_graph_free(raw);
  if (!st && o->time_stages) {
    const char *why = rt_sgen_fallback(*out);
    fprintf(stderr, "harp: shapeset: %s%s (%.1f ms)\n", why ? "a compile per binding: " : "one object for the box", why ? why : "",
            ut_now_ms() - t0);
  }
  return st;
}
