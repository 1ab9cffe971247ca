/* cli_shapeset.c — --shapeset NAME=LO..HI (harp run, harp bench): the
 * model compiled as one object for a box of its shape symbols.  An ONNX
 * model's dynamic dims are named by their dim_param ("batch"), their shape
 * variable ("x_d2") or INPUT:AXIS ("images:2"); the import leaves them
 * symbols (cmd_frontend.c).
 * Needs: harp/sgen.h, harp/onnx.h, cli.c (cli_model.raw).
 * Gives: cli_shapeset_compile(_with), cli_shapeset_ties, cli_shapeset_require, cli_shapeset_per_binding,
 * cli_shapeset_check_dims. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "harp/cpu.h"
#include "harp/onnx.h"
#include "harp/sgen.h"
#include "util/util.h"

/* The name --shapeset k gives into name[cap] (an ONNX model's dynamic dim
 * named any way onnx_dyn_sym takes: its shape variable's). */
static void box_name(const cli_opts *o, const onnx_model *om, int k, char *name, size_t cap) {
  const char *eq = strchr(o->shapesets[k], '=');
  snprintf(name, cap, "%.*s", eq ? (int)(eq - o->shapesets[k]) : 0, o->shapesets[k]);
  const char *sym = om ? onnx_dyn_sym(om, name) : NULL;
  if (sym) snprintf(name, cap, "%s", sym);
}

harp_status cli_shapeset_ties(harp_error *e, const cli_opts *o, cli_model *m) {
  const char *names[CLI_MAX_LIST];
  int64_t lo[CLI_MAX_LIST], hi[CLI_MAX_LIST];
  char(*buf)[64] = ut_xcalloc((size_t)o->nshapesets + 1, sizeof *buf), said[256];
  char *json = buf ? tiny_write_json(m->g) : NULL, *tied = NULL;
  harp_status st = !buf || !json ? ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory") : HARP_OK;
  for (int k = 0; !st && k < o->nshapesets; k++) {
    rt_sgen_sym y;
    if (!(st = rt_sgen_parse_box(e, o->shapesets[k], "--shapeset", buf[k], sizeof buf[k], &y)))
      box_name(o, m->onnx, k, buf[k], sizeof buf[k]), names[k] = buf[k], lo[k] = y.lo, hi[k] = y.hi;
  }
  if (!st) st = tiny_ties_text(e, json, names, lo, hi, o->nshapesets, &tied, said, sizeof said);
  tiny_graph *g = NULL;
  if (!st && tied && !(st = tiny_load_json(e, tied, strlen(tied), o->model, &g))) {
    tiny_graph_free(m->g);
    m->g = g;
    if (o->time_stages) fprintf(stderr, "harp: shapeset: tied symbols follow the others: %s\n", said);
  }
  free(tied);
  free(json);
  free(buf);
  return st;
}

harp_status cli_shapeset_require(harp_error *e, const cli_opts *o, const onnx_model *om) {
  const char *keep[CLI_MAX_LIST];
  char(*names)[64] = ut_xcalloc((size_t)o->nshapesets + 1, sizeof *names);
  if (!names) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  for (int k = 0; k < o->nshapesets; k++) box_name(o, om, k, names[k], sizeof names[k]), keep[k] = names[k];
  harp_status st = onnx_require_shapes_but(e, om, keep, o->nshapesets);
  free(names);
  return st;
}

harp_status cli_shapeset_per_binding(harp_error *e, const cli_opts *o, cli_model *m, ut_tensor *outs) {
  rt_cpu_opts co = {.knobs = &o->knobs, .precision = o->precision, .max_memory = o->max_memory};
  rt_cpu_model *cm = NULL;
  harp_status st = rt_cpu_compile(e, m->g, &m->syms, &co, &cm);
  if (!st) st = rt_cpu_run(e, cm, m->inputs, m->ninputs, outs);
  if (!st && o->time_stages)
    fprintf(stderr, "harp: shapeset: a compile per binding: %s\nharp: shapeset: 1 object(s), %d built by the C compiler (the rest "
            "from the cache)\n", o->shapeset_why, !rt_cpu_cache_hit(cm));
  rt_cpu_free(cm);
  return st;
}

/* The size the given shapes (shapes[0..n)) give graph input `input`'s
 * dim `axis` of om, or -1 when none gives it. */
static int64_t given_dim(const onnx_model *om, const onnx_shape *shapes, int n, const char *input, int axis) {
  const char *id = onnx_id_of(om, input);
  for (int j = 0; j < n; j++)
    if ((!strcmp(shapes[j].name, input) || (id && !strcmp(shapes[j].name, id))) && axis < shapes[j].rank)
      return shapes[j].dims[axis];
  return -1;
}

harp_status cli_shapeset_check_dims(harp_error *e, const cli_opts *o, const onnx_model *om) {
  if (o->shapeset_recompile) return HARP_OK;
  onnx_shape *shapes = NULL;
  int n = 0;
  harp_status st = cli_given_shapes(e, o, &shapes, &n);
  for (int k = 0; !st && k < o->nshapesets; k++) {
    char name[CLI_NAME_MAX], given[CLI_NAME_MAX];
    rt_sgen_sym y;
    if ((st = rt_sgen_parse_box(e, o->shapesets[k], "--shapeset", given, sizeof given, &y))) break;
    box_name(o, om, k, name, sizeof name);
    for (int i = 0; !st && i < om->ndyn; i++) {
      const onnx_dyn *d = &om->dyn[i];
      int64_t v = strcmp(d->sym, name) ? -1 : given_dim(om, shapes, n, d->input, d->dim);
      if (v >= 0 && (v < y.lo || v > y.hi))
        st = ut_fail(e, HARP_E_INPUT_MISMATCH, NULL, "%s = %lld (graph input \"%s\" dim %d) is outside the compiled ShapeSet (%s in "
                     "%lld..%lld)", given, (long long)v, d->input, d->dim, given, (long long)y.lo, (long long)y.hi);
    }
  }
  free(shapes);
  return st;
}

harp_status cli_shapeset_compile(harp_error *e, const cli_opts *o, const cli_model *m, rt_sgen **out) {
  rt_cpu_opts co = {.knobs = &o->knobs, .precision = o->precision, .max_memory = o->max_memory};
  return cli_shapeset_compile_with(e, o, m, &co, out);
}

harp_status cli_shapeset_compile_with(harp_error *e, const cli_opts *o, const cli_model *m, const rt_cpu_opts *co,
                                      rt_sgen **out) {
  *out = NULL;
  if (!m->raw) return ut_fail(e, HARP_E_USAGE, NULL, "--shapeset takes a .json, .harp or .onnx model");
  if (o->shapeset_why[0]) /* imported at one binding (cli_onnx_load): no box to compile */
    return ut_fail(e, HARP_E_UNSUPPORTED, NULL, "the ShapeSet's dims cannot stay symbols through this model's import, so no one "
                   "object serves the box: %s", o->shapeset_why);
  rt_sgen_sym box[CLI_MAX_LIST + 64];
  char names[CLI_MAX_LIST][64];
  int n = 0;
  for (int i = 0; i < o->nshapesets; i++)
    if (rt_sgen_parse_box(e, o->shapesets[i], "--shapeset", names[i], sizeof names[i], &box[n++])) return e->code;
    else box_name(o, m->onnx, i, names[i], sizeof names[i]);
  for (int i = 0; i < m->syms.n && n < CLI_MAX_LIST + 64; i++) { /* the others stay as bound */
    bool boxed = tiny_dsym_find(m->g, m->syms.names[i]) >= 0; /* a derived size: computed per binding */
    for (int k = 0; k < o->nshapesets; k++) boxed |= !strcmp(box[k].name, m->syms.names[i]);
    if (!boxed) box[n++] = (rt_sgen_sym){m->syms.names[i], m->syms.values[i], m->syms.values[i]};
  }
  tiny_graph *raw = NULL;
  rt_sgen_opts so = {.cpu = co, .recompile_outside = o->shapeset_recompile};
  double t0 = ut_now_ms();
  harp_status st = tiny_load_json(e, m->raw, strlen(m->raw), o->model, &raw);
  if (!st) st = rt_sgen_compile(e, raw, box, n, &so, out);
  tiny_graph_free(raw);
  if (!st && o->time_stages) {
    const char *why = rt_sgen_fallback(*out);
    fprintf(stderr, "harp: shapeset: %s%s (%.1f ms%s)\n", why ? "a compile per binding: " : "one object for the box", why ? why : "",
            ut_now_ms() - t0, rt_sgen_from_manifest(*out) ? "; from the cache's manifest, no corner compiled" : "");
  }
  return st;
}
