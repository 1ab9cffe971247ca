/* cpu.c — the CPU backend: the compile pipeline on the CPU target (regions,
 * the Function, plans, C, cc; target_cpu.c), the shared object loaded;
 * then runs.
 * Needs: pipeline.c, target_cpu.c.  Gives: harp/cpu.h. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache.h"
#include "harp/cpu.h"
#include "harp/function.h"
#include "harp/pipeline.h"
#include "util/util.h"

typedef void *(*init_fn)(const void *, size_t);
typedef void *(*init_threads_fn)(const void *, size_t, int);
typedef int (*run_fn)(void *, const void *const *, void *const *);
typedef void (*free_fn)(void *);
typedef int (*kernel_fn)(void *, int, const void *const *, void *const *);

struct rt_cpu_model {
  rt_compile *c; /* the stages' results: g, the partition, the Function, plans, source */
  double compile_ms;
  void *dl;
  init_fn init;
  init_threads_fn init_threads;
  run_fn run;
  free_fn free_;
  kernel_fn run_kernel;
};

void rt_cpu_free(rt_cpu_model *m) {
  if (!m) return;
  if (m->dl) dlclose(m->dl);
  rt_compile_free(m->c);
  free(m);
}

/* The compile's options from o: its knobs (o->knobs, else the defaults) with
 * o's compiler, flags and cache over them, into *k. */
static rt_compile_opts compile_opts(const rt_cpu_opts *o, rt_knobs *k) {
  *k = *rt_knobs_or_default(o ? o->knobs : NULL);
  rt_compile_opts co = {.knobs = k};
  if (!o) return co;
  rt_knobs_set_build(k, o->cc, o->cflags, o->cache_dir);
  co.keep_source = o->keep_source;
  co.portable = o->portable;
  co.precision = o->precision;
  co.max_memory = o->max_memory;
  co.keep_analysis = o->keep_analysis;
  co.plan_overrides = o->plan_overrides;
  co.nplan_overrides = o->nplan_overrides;
  co.no_plan_cache = o->no_plan_cache;
  co.after_stage = o->after_stage;
  co.hook_ctx = o->hook_ctx;
  return co;
}

/* dlopen the compiled object and find its entry points. */
static harp_status load_so(harp_error *e, rt_cpu_model *m) {
  m->dl = dlopen(m->c->so_path, RTLD_NOW | RTLD_LOCAL);
  if (m->c->so_temp) { /* loaded (or not): the temporary copy goes */
    rt_cache_discard(m->c->so_path);
    m->c->so_temp = false;
  }
  if (!m->dl) return ut_fail_at(e, HARP_E_IO, m->c->so_path, 0, 0, "cannot load the compiled model: %s", dlerror());
  m->init = (init_fn)dlsym(m->dl, "model_init");
  m->init_threads = (init_threads_fn)dlsym(m->dl, "model_init_threads");
  m->run = (run_fn)dlsym(m->dl, "model_run");
  m->free_ = (free_fn)dlsym(m->dl, "model_free");
  m->run_kernel = (kernel_fn)dlsym(m->dl, "model_run_kernel");
  if (!m->init || !m->run || !m->free_) return ut_fail(e, HARP_E_INTERNAL, NULL, "the compiled model lacks its entry points");
  return HARP_OK;
}

/* A model from base's stages (NULL: g's own compile), loaded. */
static harp_status compile_and_load(harp_error *e, const rt_cpu_model *base, const tiny_graph *g, const tiny_symtab *syms,
                                  const rt_cpu_opts *o, rt_cpu_model **out) {
  *out = NULL;
  double t0 = ut_now_ms();
  rt_cpu_model *m = ut_xcalloc(1, sizeof *m);
  if (!m) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  rt_knobs k;
  rt_compile_opts co = compile_opts(o, &k);
  harp_status st = base ? rt_compile_variant(e, base->c, &co, &m->c)
                      : rt_compile_run(e, &rt_target_cpu, (tiny_graph *)g, syms, &co, &m->c);
  if (!st) st = load_so(e, m);
  if (st) {
    rt_cpu_free(m);
    return st;
  }
  m->compile_ms = ut_now_ms() - t0;
  *out = m;
  return HARP_OK;
}

harp_status rt_cpu_compile(harp_error *e, const tiny_graph *g, const tiny_symtab *syms, const rt_cpu_opts *o,
                         rt_cpu_model **out) {
  return compile_and_load(e, NULL, g, syms, o, out);
}

harp_status rt_cpu_compile_variant(harp_error *e, const rt_cpu_model *base, const rt_cpu_opts *o, rt_cpu_model **out) {
  return compile_and_load(e, base, NULL, NULL, o, out);
}

static harp_status run_once(harp_error *e, rt_cpu_model *m, const ut_tensor *inputs, ut_tensor *taken, int ninputs,
                          ut_tensor *outputs) {
  const fn_function *f = m->c->f;
  const tiny_graph *g = m->c->g;
  if (ninputs != f->nargs) return ut_fail(e, HARP_E_INPUT_MISMATCH, NULL, "%d inputs given, the model has %d", ninputs, f->nargs);
  for (int k = 0; k < f->nret; k++) memset(&outputs[k], 0, sizeof outputs[k]);
  const void **in = ut_xcalloc((size_t)ninputs + 1, sizeof *in);
  void **outp = ut_xcalloc((size_t)f->nret + 1, sizeof *outp);
  ut_tensor *params = ut_xcalloc((size_t)ninputs + 1, sizeof *params);
  fn_constpool cp = {0};
  void *inst = NULL;
  harp_status st = HARP_OK;
  int nin = 0, nparams = 0;
  if (!in || !outp || !params) {
    st = ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
    goto done;
  }
  for (int a = 0; a < f->nargs && !st; a++) {
    const fn_buffer *b = &f->buffers[f->args[a]];
    const tiny_node *n = &g->nodes[b->node];
    const ut_tensor *t = &inputs[a];
    bool ok = t->dtype == n->dtype && t->rank == n->shape.rank && t->nbytes == b->size;
    for (int d = 0; ok && d < t->rank; d++) ok = t->shape[d] == n->shape.d[d].n;
    if (!ok) st = ut_fail(e, HARP_E_INPUT_MISMATCH, n->id, "input %s does not match the model's dtype or shape", n->a.input.tensor_id);
    else if (b->kind == FN_PARAM) params[nparams++] = *t;
    else in[nin++] = t->data;
  }
  if (!st) st = fn_constpool_from_tensors(e, f, params, nparams, &cp);
  for (int a = 0; a < f->nargs && !st && taken; a++) /* in the block now */
    if (f->buffers[f->args[a]].kind == FN_PARAM) ut_tensor_free(&taken[a]);
  for (int k = 0; k < f->nret && !st; k++) {
    const tiny_node *n = &g->nodes[g->outputs[k]];
    int64_t shape[TINY_MAX_RANK];
    for (int d = 0; d < n->shape.rank; d++) shape[d] = n->shape.d[d].n;
    st = ut_tensor_alloc(e, &outputs[k], n->dtype, n->shape.rank, shape);
    if (!st) outp[k] = outputs[k].data;
  }
  if (!st && !(inst = m->init(cp.data, cp.size))) st = ut_fail(e, HARP_E_NO_MEMORY, NULL, "model_init failed");
  fn_constpool_free(&cp); /* model_init copied or packed what it keeps: not held through the run */
  if (!st) {
    int rc = m->run(inst, in, outp);
    if (rc >= 100 && rc - 100 < f->nkernels)
      st = ut_fail(e, HARP_E_INVALID_ARG, f->kernels[rc - 100].name, "kernel %s stopped: an index is out of range",
                   f->kernels[rc - 100].name);
    else if (rc)
      st = ut_fail(e, HARP_E_INTERNAL, NULL, "model_run returned %d", rc);
  }
  if (inst) m->free_(inst);
done:
  if (st)
    for (int k = 0; k < f->nret; k++) ut_tensor_free(&outputs[k]);
  fn_constpool_free(&cp);
  free(in);
  free(outp);
  free(params);
  return st;
}

harp_status rt_cpu_run(harp_error *e, rt_cpu_model *m, const ut_tensor *inputs, int ninputs, ut_tensor *outputs) {
  return run_once(e, m, inputs, NULL, ninputs, outputs);
}

harp_status rt_cpu_run_taking_weights(harp_error *e, rt_cpu_model *m, ut_tensor *inputs, int ninputs, ut_tensor *outputs) {
  return run_once(e, m, inputs, inputs, ninputs, outputs);
}

const char *rt_cpu_source(const rt_cpu_model *m) { return m->c->source; }
bool rt_cpu_cache_hit(const rt_cpu_model *m) { return m->c->cache_hit; }
const char *rt_cpu_warning(const rt_cpu_model *m) { return m->c->cc_warning[0] ? m->c->cc_warning : NULL; }
double rt_cpu_compile_ms(const rt_cpu_model *m) { return m->compile_ms; }
const struct fn_function *rt_cpu_function(const rt_cpu_model *m) { return m->c->f; }
const struct rt_compile *rt_cpu_stages(const rt_cpu_model *m) { return m->c; }

void *rt_cpu_instance_new(const rt_cpu_model *m, const void *params, size_t nbytes) { return m->init(params, nbytes); }
void *rt_cpu_instance_new_threads(const rt_cpu_model *m, const void *params, size_t nbytes, int nthreads) {
  return m->init_threads ? m->init_threads(params, nbytes, nthreads) : m->init(params, nbytes);
}
int rt_cpu_instance_run(const rt_cpu_model *m, void *inst, const void *const *inputs, void *const *outputs) {
  return m->run(inst, inputs, outputs);
}
void rt_cpu_instance_free(const rt_cpu_model *m, void *inst) {
  if (inst) m->free_(inst);
}
int rt_cpu_instance_run_kernel(const rt_cpu_model *m, void *inst, int k, const void *const *inputs,
                               void *const *outputs) {
  return m->run_kernel ? m->run_kernel(inst, k, inputs, outputs) : -1;
}
int rt_cpu_kernel_of(const rt_cpu_model *m, const char *region) {
  const fn_function *f = m->c->f;
  for (int k = 0; k < f->nkernels; k++)
    if (!strcmp(f->kernels[k].name, region)) return k;
  return -1;
}
const struct rt_plans *rt_cpu_plans(const rt_cpu_model *m) { return &m->c->plans; }
const char *rt_cpu_error_kernel(const rt_cpu_model *m, int rc) {
  const fn_function *f = m->c->f;
  return rc >= 100 && rc - 100 < f->nkernels ? f->kernels[rc - 100].name : NULL;
}
