/* api_sgen.c — harp.h's ShapeSets (harp_options.shapesets): a CPU model
 * compiled once for a box of its shape symbols (harp/sgen.h), its instances
 * run at any binding inside (harp_model_run_shaped), the output shapes of a
 * binding (harp_output_shape_for), and the last run's outputs kept for
 * harp_model_output.
 * Needs: sgen.c, cpu.c (instances of the one object), api.c (api_int.h).
 * Gives: api_sgen_*, harp.h's ShapeSet section. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_int.h"
#include "harp.h"
#include "harp/cpu.h"
#include "harp/sgen.h"
#include "util/util.h"

#define API_MAX_SETS 64 /* the symbols a ShapeSet model's box names at most (rt_sgen's own limit) */

struct api_sgen {
  rt_sgen *s;
  rt_knobs knobs;          /* the compile's: later bindings compiled on their own use them */
  char *precision;
  tiny_graph *glo; /* prepared at the box's lower corner: a dim that differs from the upper's varies */
};

/* An instance's part: the one object's instance (NULL in fallback), the
 * parameter block (for bindings compiled on their own) and the outputs of
 * the last harp_model_run_shaped. */
struct api_shaped {
  void *inst;
  unsigned char *params;
  ut_tensor *out;
  int nout;
};

void api_sgen_free(api_sgen *a) {
  if (!a) return;
  rt_sgen_free(a->s);
  tiny_graph_free(a->glo);
  free(a->precision);
  free(a);
}

harp_status api_sgen_onnx(harp_error *e, const onnx_model *om, const harp_options *o, char ***out) {
  int n = 0;
  while (o->shapesets[n]) n++;
  char **names = ut_xcalloc((size_t)n + 1, sizeof *names);
  const char **syms = ut_xcalloc((size_t)n + 1, sizeof *syms);
  harp_status st = names && syms ? HARP_OK : ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  for (int i = 0; !st && i < n; i++) {
    char name[128];
    rt_sgen_sym y;
    if ((st = rt_sgen_parse_box(e, o->shapesets[i], "harp_options.shapesets", name, sizeof name, &y))) break;
    const char *sym = onnx_dyn_sym(om, name);
    if (!sym) {
      st = ut_fail(e, HARP_E_USAGE, NULL, "harp_options.shapesets \"%s\": the model has no dynamic dim %s (a dim_param, a shape "
                   "variable such as x_d2, or INPUT:AXIS)", o->shapesets[i], name);
      break;
    }
    size_t len = strlen(sym) + 48;
    if (!(names[i] = ut_xmalloc(len))) st = ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
    else snprintf(names[i], len, "%s=%lld..%lld", sym, (long long)y.lo, (long long)y.hi), syms[i] = sym;
  }
  if (!st) st = onnx_require_shapes_but(e, om, syms, n);
  free(syms);
  if (st) {
    for (int i = 0; names && i < n; i++) free(names[i]);
    free(names);
    names = NULL;
  }
  *out = names;
  return st;
}

/* A copy of g (as loaded) prepared at t. */
static harp_status prepared_copy(harp_error *e, const char *text, tiny_symtab *t, tiny_graph **out) {
  if (tiny_load_json(e, text, strlen(text), NULL, out) || tiny_dsym_bind(e, *out, t)) return e->code;
  return tiny_prepare(e, *out, t, false);
}

/* lo and syms without the symbols that the object's model text defines (a
 * tie the box learned, G := 2*H: rt_sgen's; computed from the others
 * instead), the model read once; lo and syms (the corner hi) narrowed as
 * rt_sgen narrows its box for an exact tie (tiny_dsym_snap: 2 G = 3 H, H even). */
static harp_status drop_tied(harp_error *e, const char *text, tiny_symtab *lo, tiny_symtab *syms) {
  tiny_graph *g = NULL;
  if (tiny_load_json(e, text, strlen(text), NULL, &g)) return e->code;
  for (int i = 0; i < lo->n; i++) {
    int64_t l = lo->values[i], h = l;
    int k = 0;
    while (k < syms->n && strcmp(syms->names[k], lo->names[i])) k++;
    if (k < syms->n) h = syms->values[k];
    if (tiny_dsym_snap(g, (const char *const *)&lo->names[i], &l, &h, 1) && k < syms->n) lo->values[i] = l, syms->values[k] = h;
  }
  tiny_symtab *ts[2] = {lo, syms};
  harp_status st = HARP_OK;
  for (int k = 0; !st && k < 2; k++) {
    tiny_symtab keep;
    if (!(st = tiny_ties_drop(e, g, ts[k], &keep))) tiny_symtab_free(ts[k]), *ts[k] = keep;
  }
  tiny_graph_free(g);
  return st;
}

/* The box of o->shapesets plus every symbol syms binds (fixed there; a
 * derived one of g is computed per binding instead), into
 * box[0..*n) (names in names[]); syms gains each ShapeSet symbol at hi, lo
 * its copy at the lower corner. */
static harp_status make_box(harp_error *e, const tiny_graph *g, const harp_options *o, tiny_symtab *syms, tiny_symtab *lo,
                            rt_sgen_sym *box, char (*names)[128], int *n) {
  *n = 0;
  for (int i = 0; o->shapesets[i]; i++) {
    if (*n == API_MAX_SETS) return ut_fail(e, HARP_E_LIMIT, NULL, "more than %d ShapeSet symbols", API_MAX_SETS);
    if (rt_sgen_parse_box(e, o->shapesets[i], "harp_options.shapesets", names[*n], sizeof names[*n], &box[*n])) return e->code;
    (*n)++;
  }
  int nsets = *n;
  for (int i = 0; i < syms->n; i++) {
    bool boxed = tiny_dsym_find(g, syms->names[i]) >= 0; /* a derived size: computed per binding */
    for (int k = 0; k < nsets; k++) boxed |= !strcmp(box[k].name, syms->names[i]);
    if (boxed) continue;
    if (*n == API_MAX_SETS) return ut_fail(e, HARP_E_LIMIT, NULL, "more than %d shape symbols", API_MAX_SETS);
    snprintf(names[*n], sizeof names[*n], "%s", syms->names[i]);
    box[*n] = (rt_sgen_sym){names[*n], syms->values[i], syms->values[i]};
    (*n)++;
  }
  for (int i = 0; i < *n; i++)
    if (tiny_symtab_set(e, lo, box[i].name, box[i].lo) || (i < nsets && tiny_symtab_set(e, syms, box[i].name, box[i].hi)))
      return e->code;
  return HARP_OK;
}

harp_status api_sgen_new(harp_error *e, const tiny_graph *g, tiny_symtab *syms, const harp_options *o, const rt_knobs *k,
                         api_sgen **out, tiny_graph **ghi) {
  *out = NULL;
  *ghi = NULL;
  if (o->backend != HARP_BACKEND_CPU)
    return ut_fail(e, HARP_E_UNSUPPORTED, NULL, "harp_options.shapesets: ShapeSets are compiled for the CPU backend only");
  if (o->max_memory < 0) return ut_fail(e, HARP_E_USAGE, NULL, "harp_options.max_memory is negative");
  api_sgen *a = ut_xcalloc(1, sizeof *a);
  rt_sgen_sym *box = ut_xcalloc(API_MAX_SETS, sizeof *box);
  char(*names)[128] = ut_xcalloc(API_MAX_SETS, sizeof *names);
  char *text = tiny_write_json(g);
  tiny_symtab lo;
  tiny_symtab_init(&lo);
  int n = 0;
  harp_status st = a && box && names && text ? HARP_OK : ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  if (!st) st = make_box(e, g, o, syms, &lo, box, names, &n);
  if (!st && o->precision && !(a->precision = strdup(o->precision))) st = ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  if (a) a->knobs = *k;
  rt_cpu_opts co = {.knobs = a ? &a->knobs : k, .precision = a ? a->precision : NULL,
                    .max_memory = o->max_memory > 0 ? (uint64_t)o->max_memory : 0};
  rt_sgen_opts so = {.cpu = &co, .recompile_outside = o->shapeset_recompile};
  if (!st) st = rt_sgen_compile(e, g, box, n, &so, &a->s);
  if (!st) st = drop_tied(e, rt_sgen_text(a->s), &lo, syms);
  if (!st) st = prepared_copy(e, rt_sgen_text(a->s), &lo, &a->glo); /* the object's model: its weights' shapes */
  if (!st) st = prepared_copy(e, rt_sgen_text(a->s), syms, ghi);
  tiny_symtab_free(&lo);
  free(text);
  free(box);
  free(names);
  if (st) {
    tiny_graph_free(*ghi);
    *ghi = NULL;
    api_sgen_free(a);
    return st;
  }
  *out = a;
  return HARP_OK;
}

const fn_function *api_sgen_function(const api_sgen *a) {
  rt_cpu_model *m = rt_sgen_object(a->s);
  return m ? rt_cpu_function(m) : NULL;
}

/* Node n's shape (prepared at the upper corner; an INPUT, or output k)
 * with -1 where it differs at the lower corner. */
int api_sgen_shape(const api_sgen *a, const tiny_node *n, int k, int64_t *shape) {
  const tiny_graph *g = a->glo;
  const tiny_node *l = n->op == TINY_INPUT ? NULL : &g->nodes[g->outputs[k]];
  for (int i = 0; !l && i < g->n; i++)
    if (g->nodes[i].op == TINY_INPUT && !strcmp(g->nodes[i].a.input.tensor_id, n->a.input.tensor_id)) l = &g->nodes[i];
  for (int d = 0; d < n->shape.rank; d++)
    shape[d] = l && l->shape.rank == n->shape.rank && l->shape.d[d].n == n->shape.d[d].n ? n->shape.d[d].n : -1;
  return n->shape.rank;
}

int harp_shapeset_objects(const harp_compiled *c, int *cc_runs, const char **fallback) {
  const api_sgen *a = api_shapesets(c);
  if (cc_runs) *cc_runs = a ? rt_sgen_cc_runs(a->s) : 0;
  if (fallback) *fallback = a ? rt_sgen_fallback(a->s) : NULL;
  return a ? rt_sgen_objects(a->s) : 0;
}

/* ---- instances -------------------------------------------------------------------- */
api_shaped *api_shaped_new(const harp_compiled *c, const void *params, size_t nbytes, int threads) {
  api_shaped *p = ut_xcalloc(1, sizeof *p);
  if (!p) return NULL;
  const api_sgen *a = api_shapesets(c);
  rt_cpu_model *obj = a ? rt_sgen_object(a->s) : NULL;
  p->params = a ? ut_xmalloc(nbytes + 1) : NULL;
  if (p->params && nbytes) memcpy(p->params, params, nbytes);
  if ((a && !p->params) || (obj && !(p->inst = rt_cpu_instance_new_threads(obj, params, nbytes, threads)))) {
    api_shaped_free(c, p);
    return NULL;
  }
  return p;
}

static void drop_outputs(api_shaped *p) {
  for (int k = 0; k < p->nout; k++) ut_tensor_free(&p->out[k]);
  free(p->out);
  p->out = NULL;
  p->nout = 0;
}

void api_shaped_free(const harp_compiled *c, api_shaped *p) {
  if (!p) return;
  const api_sgen *a = api_shapesets(c);
  if (p->inst) rt_cpu_instance_free(rt_sgen_object(a->s), p->inst);
  drop_outputs(p);
  free(p->params);
  free(p);
}

const void *api_shaped_output(const api_shaped *p, int k, int64_t *shape, int *rank) {
  if (!p || k < 0 || k >= p->nout || !p->out[k].data) return NULL;
  for (int d = 0; d < p->out[k].rank; d++) shape[d] = p->out[k].shape[d];
  *rank = p->out[k].rank;
  return p->out[k].data;
}

/* ---- runs ------------------------------------------------------------------------- */
/* c's inputs as tensors in tiny_inputs order (*t[0..*n)): input j dense at
 * in_shapes[j] holding inputs[j] (NULL: headers only), each weight at its
 * compiled shape in params (NULL: headers only). */
static harp_status feed_tensors(harp_error *e, const harp_compiled *c, const void *const *inputs, const int64_t *const *in_shapes,
                                const unsigned char *params, ut_tensor **t, int *n) {
  const tiny_symtab *syms;
  const tiny_graph *g = api_graph(c, &syms);
  int *ins = NULL;
  *n = tiny_inputs(g, &ins);
  *t = ut_xcalloc((size_t)*n + 1, sizeof **t);
  harp_status st = ins && *t ? HARP_OK : ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  if (!st && harp_num_inputs(c) && !in_shapes) st = ut_fail(e, HARP_E_USAGE, NULL, "no input shapes given");
  for (int i = 0, ki = 0; !st && i < *n; i++) {
    const tiny_node *x = &g->nodes[ins[i]];
    ut_tensor *y = &(*t)[i];
    bool weight = x->a.input.storage && !strcmp(x->a.input.storage, "param");
    const int64_t *dims = weight ? NULL : in_shapes[ki];
    int64_t numel = 1;
    y->dtype = x->dtype, y->rank = x->shape.rank;
    for (int d = 0; !st && d < y->rank; d++) {
      y->shape[d] = dims ? dims[d] : x->shape.d[d].n;
      if (y->shape[d] < 0 || y->shape[d] > TINY_MAX_DIM || (y->shape[d] && numel > TINY_MAX_ELEMS / y->shape[d]))
        st = ut_fail(e, HARP_E_INPUT_MISMATCH, x->id, "input %s: dim %d is %lld, or the tensor is too large",
                     x->a.input.tensor_id, d, (long long)y->shape[d]);
      numel *= y->shape[d];
    }
    y->nbytes = (size_t)numel * tiny_dtype_size(x->dtype);
    if (weight) y->data = params ? (void *)(params + harp_param_offset(c, x->a.input.tensor_id)) : NULL;
    else if (!dims) st = ut_fail(e, HARP_E_USAGE, x->id, "no shape given for input %s", x->a.input.tensor_id);
    else y->data = inputs ? (void *)inputs[ki] : NULL;
    ki += !weight;
  }
  free(ins);
  return st;
}

/* The one object's instance p at the binding syms (rt_sgen_bind checked
 * it; t[0..n) the tensors of feed_tensors): the outputs allocated at its
 * shapes into p->out. */
static harp_status run_object(harp_error *e, const harp_compiled *c, api_shaped *p, const ut_tensor *t, int n,
                              const long long *syms) {
  const api_sgen *a = api_shapesets(c);
  rt_cpu_model *obj = rt_sgen_object(a->s);
  const tiny_symtab *gs;
  const tiny_graph *g = api_graph(c, &gs);
  int *ins = NULL, nin = tiny_inputs(g, &ins), ki = 0;
  tiny_shape *sh = ut_xcalloc((size_t)p->nout + 1, sizeof *sh);
  const void **in = ut_xcalloc((size_t)n + 1, sizeof *in);
  void **outp = ut_xcalloc((size_t)p->nout + 1, sizeof *outp);
  harp_status st = ins && sh && in && outp && nin == n ? HARP_OK : ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  if (!st) st = rt_sgen_output_shapes(e, a->s, t, n, sh);
  for (int k = 0; !st && k < p->nout; k++) {
    int64_t dims[TINY_MAX_RANK];
    for (int d = 0; d < sh[k].rank; d++) dims[d] = sh[k].d[d].n;
    st = ut_tensor_alloc(e, &p->out[k], (tiny_dtype)harp_output_dtype(c, k), sh[k].rank, dims);
    outp[k] = p->out[k].data;
  }
  for (int i = 0; !st && i < n; i++) /* the weights are the instance's own */
    if (!g->nodes[ins[i]].a.input.storage || strcmp(g->nodes[ins[i]].a.input.storage, "param")) in[ki++] = t[i].data;
  int rc = st ? 0 : rt_cpu_instance_run_syms(obj, p->inst, syms, in, outp);
  if (rc == 2) /* P_grow_: no memory for this binding's arena */
    st = ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory: the arena of this binding");
  else if (rc) {
    const char *k = rt_cpu_error_kernel(obj, rc);
    st = ut_fail(e, HARP_E_INVALID_ARG, NULL, "the run failed: kernel %s stopped: an index is out of range", k ? k : "?");
  }
  free(ins);
  free(sh);
  free(in);
  free(outp);
  return st;
}

/* A model without ShapeSets: each input's shape must be the compiled one. */
static harp_status same_shapes(harp_error *e, const harp_compiled *c, const int64_t *const *in_shapes) {
  for (int j = 0; j < harp_num_inputs(c); j++) {
    int64_t want[HARP_MAX_RANK];
    int rank = harp_input_shape(c, j, want);
    for (int d = 0; d < rank; d++)
      if (!in_shapes || (want[d] >= 0 && in_shapes[j][d] != want[d]))
        return ut_fail(e, HARP_E_INPUT_MISMATCH, NULL, "input %s: dim %d is %lld, the model was compiled for %lld (no ShapeSet "
                       "has it vary: harp_options.shapesets)", harp_input_source_name(c, j), d,
                       in_shapes ? (long long)in_shapes[j][d] : -1LL, (long long)want[d]);
  }
  return HARP_OK;
}

harp_status harp_output_shape_for(harp_error *e, const harp_compiled *c, const int64_t *const *in_shapes, int k,
                                  int64_t *shape, int *rank) {
  if (!c || k < 0 || k >= harp_num_outputs(c)) return ut_fail(e, HARP_E_USAGE, NULL, "harp_output_shape_for: no output %d", k);
  const api_sgen *a = api_shapesets(c);
  if (!a) {
    if (same_shapes(e, c, in_shapes)) return e->code;
    *rank = harp_output_shape(c, k, shape);
    return HARP_OK;
  }
  ut_tensor *t = NULL;
  int n = 0, nout = harp_num_outputs(c);
  tiny_shape *sh = ut_xcalloc((size_t)nout + 1, sizeof *sh);
  harp_status st = sh ? feed_tensors(e, c, NULL, in_shapes, NULL, &t, &n) : ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  if (!st) st = rt_sgen_output_shapes(e, a->s, t, n, sh);
  if (!st) {
    *rank = sh[k].rank;
    for (int d = 0; d < sh[k].rank; d++) shape[d] = sh[k].d[d].n;
  }
  free(t);
  free(sh);
  return st;
}

/* A ShapeSet model's run of instance p: on the one object's instance when
 * it serves the binding, else through rt_sgen_run (a binding compiled on
 * its own, on a fresh instance; or the binding's error). */
static harp_status run_sets(harp_error *e, const harp_compiled *c, api_shaped *p, const void *const *inputs,
                            const int64_t *const *in_shapes) {
  const api_sgen *a = api_shapesets(c);
  ut_tensor *t = NULL;
  int n = 0;
  long long syms[RT_SGEN_MAX_GEN];
  harp_status st = feed_tensors(e, c, inputs, in_shapes, p->params, &t, &n);
  if (!st && p->inst && !rt_sgen_bind(e, a->s, t, n, syms)) {
    st = run_object(e, c, p, t, n, syms);
  } else if (!st) {
    harp_error_clear(e);
    st = rt_sgen_run(e, a->s, t, n, p->out);
  }
  free(t);
  return st;
}

harp_status harp_model_run_shaped(harp_error *e, harp_model *m, const void *const *inputs, const int64_t *const *in_shapes,
                                  void *const *outputs) {
  if (!m) return ut_fail(e, HARP_E_USAGE, NULL, "no model instance");
  const harp_compiled *c = api_model_compiled(m);
  const tiny_symtab *syms;
  if (!api_graph(c, &syms)) return harp_model_run_typed(e, m, inputs, NULL, outputs); /* a host program: its own shapes */
  for (int j = 0; j < harp_num_inputs(c); j++)
    if (!inputs || !inputs[j]) return ut_fail(e, HARP_E_USAGE, NULL, "no data for input %s", harp_input_source_name(c, j));
  api_shaped **pp = api_model_shaped(m);
  if (!*pp && !(*pp = api_shaped_new(c, NULL, 0, 0))) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  api_shaped *p = *pp;
  drop_outputs(p);
  int nout = harp_num_outputs(c);
  if (!(p->out = ut_xcalloc((size_t)nout + 1, sizeof *p->out))) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  p->nout = nout;
  harp_status st = HARP_OK;
  if (api_shapesets(c)) {
    st = run_sets(e, c, p, inputs, in_shapes);
  } else { /* the compiled shapes: into buffers of its own, then the caller's */
    void **outp = ut_xcalloc((size_t)nout + 1, sizeof *outp);
    st = outp ? same_shapes(e, c, in_shapes) : ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
    for (int k = 0; !st && k < nout; k++) {
      int64_t dims[HARP_MAX_RANK];
      int rank = harp_output_shape(c, k, dims);
      st = ut_tensor_alloc(e, &p->out[k], (tiny_dtype)harp_output_dtype(c, k), rank, dims);
      outp[k] = p->out[k].data;
    }
    if (!st) st = harp_model_run_typed(e, m, inputs, NULL, outp);
    free(outp);
  }
  for (int k = 0; !st && outputs && k < nout; k++)
    if (outputs[k] && p->out[k].nbytes) memcpy(outputs[k], p->out[k].data, p->out[k].nbytes);
  if (st) drop_outputs(p);
  return st;
}
