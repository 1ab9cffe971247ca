/* api_autobox.c — harp.h's default over an ONNX model's dynamic dims
 * (harp_options.shapesets NULL or {"auto"}): the box harp chooses around
 * the binding that shapes / syms set (harp/autobox.h), compiled once the
 * cache directory's record shows a second binding in its bucket; the
 * compiled model then runs at its binding as an exact one does
 * (harp_model_run, harp_input_shape) and at any binding in the box
 * (harp_model_run_shaped).
 * Needs: autobox.c, api.c / api_sgen.c (api_int.h).  Gives: api_boxes, api_autobox_*. */
#include <stdlib.h>
#include <string.h>

#include "api_int.h"
#include "harp.h"
#include "harp/autobox.h"
#include "util/util.h"

const char *const *api_boxes(const harp_options *o) {
  if (!o || !o->shapesets || !o->shapesets[0]) return NULL;
  if (!o->shapesets[1] && (!strcmp(o->shapesets[0], "auto") || !strcmp(o->shapesets[0], "exact"))) return NULL;
  return o->shapesets;
}

bool api_autobox_wanted(const harp_options *o) {
  if (o && (o->backend != HARP_BACKEND_CPU || api_boxes(o))) return false;
  return !(o && o->shapesets && o->shapesets[0] && !strcmp(o->shapesets[0], "exact"));
}

/* c's inputs' and outputs' shapes at the binding om->bound gives (a dim
 * the box varies that no given dim names: UsageError, the caller then
 * compiles the binding alone), into *out (to free). */
static harp_status bind_shapes(harp_error *e, const harp_compiled *c, const onnx_model *om, int64_t (**out)[HARP_MAX_RANK]) {
  int ni = harp_num_inputs(c), no = harp_num_outputs(c);
  int64_t(*b)[HARP_MAX_RANK] = ut_xcalloc((size_t)(ni + no) + 1, sizeof *b);
  const int64_t **in = ut_xcalloc((size_t)ni + 1, sizeof *in);
  harp_status st = b && in ? HARP_OK : ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  for (int k = 0; !st && k < ni; k++) {
    int rank = harp_input_shape(c, k, b[k]);
    for (int d = 0; !st && d < rank; d++) {
      for (int i = 0; b[k][d] < 0 && i < om->nbound; i++)
        if (om->bound[i].dim == d && !strcmp(om->bound[i].input, harp_input_source_name(c, k))) b[k][d] = om->bound[i].value;
      if (b[k][d] < 0)
        st = ut_fail(e, HARP_E_USAGE, NULL, "input %s: dim %d varies in the box but no shape gives it", harp_input_source_name(c, k), d);
    }
    in[k] = b[k];
  }
  int rank;
  for (int k = 0; !st && k < no; k++) st = harp_output_shape_for(e, c, in, k, b[ni + k], &rank);
  free(in);
  if (st) free(b);
  else *out = b;
  return st;
}

harp_status api_autobox_compile(harp_error *e, const api_src *src, const harp_options *o, const onnx_model *om,
                                harp_compiled **out, bool *done) {
  *done = false;
  char **boxes = NULL, key[4096], binding[4096];
  rt_knobs k;
  if (rt_autobox_onnx(e, om, &boxes, key, binding, sizeof key) || api_knobs(e, o, &k)) return e->code;
  uint64_t id = rt_autobox_model_id(src->data ? NULL : src->path, src->data, src->len);
  if (!boxes || rt_autobox_tier_of(k.cache_dir, id, key, binding) != RT_AUTOBOX_BOX) {
    rt_autobox_free(boxes);
    return HARP_OK;
  }
  harp_options ob = o ? *o : (harp_options){0};
  ob.shapesets = (const char *const *)boxes;
  ob.shapeset_recompile = true;
  harp_compiled *c = NULL;
  int64_t(*b)[HARP_MAX_RANK] = NULL;
  harp_error be = {0};
  harp_status st = api_compile_src(&be, src, &ob, &c);
  if (!st) st = bind_shapes(&be, c, om, &b);
  if (!st) {
    api_set_bind(c, b);
    *out = c, *done = true;
  } else if (st == HARP_E_NO_MEMORY || st == HARP_E_CANCELLED) {
    *e = be;
  } else { /* the binding compiles alone, now and from now on */
    char why[1200];
    harp_error_format(&be, why, (int)sizeof why);
    rt_autobox_failed(k.cache_dir, id, key, why);
    harp_error_clear(&be);
    st = HARP_OK;
  }
  if (!*done) harp_compiled_free(c);
  rt_autobox_free(boxes);
  return st;
}
