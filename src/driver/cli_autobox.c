/* cli_autobox.c — harp run's default over an ONNX model whose dynamic dims
 * its --input files set: the box harp chooses around that binding
 * (harp/autobox.h, as harp.h and a Python session choose it), tiered
 * across processes by the cache directory's record: a bucket's first
 * binding compiles alone, a run at another binding in it compiles the box
 * (then run as --shapeset BOX --shapeset-recompile would), every later run
 * in the bucket finds that object in the cache.  --shapeset exact turns
 * it off.
 * Needs: harp/autobox.h, cli.c (cli_load_model).  Gives: cli_autobox, cli_autobox_undo, cli_autobox_free. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "harp/autobox.h"
#include "harp/onnx.h"
#include "util/util.h"

void cli_autobox_free(cli_autobox_st *a) {
  rt_autobox_free(a->boxes);
  a->boxes = NULL;
}

harp_status cli_autobox(harp_error *e, cli_opts *o, cli_model *m, bool cpu, cli_autobox_st *a) {
  memset(a, 0, sizeof *a);
  if (!cpu || o->shapeset_exact || o->nshapesets || o->nshapes || o->syms.n || o->nplans || o->ndumps || !m->onnx ||
      m->flow || !m->onnx->nbound)
    return HARP_OK;
  char **boxes = NULL, binding[2048];
  if (rt_autobox_onnx(e, m->onnx, &boxes, a->key, binding, sizeof a->key)) return e->code;
  int n = 0;
  while (boxes && boxes[n]) n++;
  a->id = rt_autobox_model_id(o->model, NULL, 0);
  rt_autobox_tier t = boxes && n <= CLI_MAX_LIST ? rt_autobox_tier_of(o->knobs.cache_dir, a->id, a->key, binding) : RT_AUTOBOX_EXACT;
  if (o->time_stages && boxes)
    fprintf(stderr, "harp: shapeset: harp's box %s: %s\n", a->key,
            t == RT_AUTOBOX_BOX ? "another binding met before, the box compiled"
            : t == RT_AUTOBOX_FAILED ? "compiled per binding (the box failed before)" : "the bucket's first binding, compiled alone");
  if (t != RT_AUTOBOX_BOX) {
    rt_autobox_free(boxes);
    return HARP_OK;
  }
  a->boxes = boxes;
  for (int k = 0; k < n; k++) o->shapesets[k] = boxes[k];
  o->nshapesets = n;
  o->shapeset_recompile = true;
  o->shapeset_why[0] = 0;
  cli_model_free(m);
  if (!cli_load_model(e, o, true, m) || e->code == HARP_E_NO_MEMORY) return e->code;
  harp_error why = *e; /* the import over the box failed: the binding alone */
  harp_error_clear(e);
  return cli_autobox_undo(e, o, m, a, &why);
}

harp_status cli_autobox_undo(harp_error *e, cli_opts *o, cli_model *m, cli_autobox_st *a, const harp_error *why) {
  char msg[1200];
  harp_error_format(why, msg, (int)sizeof msg);
  rt_autobox_failed(o->knobs.cache_dir, a->id, a->key, msg);
  if (o->time_stages) fprintf(stderr, "harp: shapeset: harp's box %s failed, the binding compiles alone: %s\n", a->key, msg);
  o->nshapesets = 0;
  o->shapeset_recompile = false;
  o->shapeset_why[0] = 0;
  cli_autobox_free(a);
  cli_model_free(m);
  return cli_load_model(e, o, true, m);
}
