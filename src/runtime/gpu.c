/* gpu.c — the CUDA backend: the compile pipeline on the CUDA target
 * (regions formed for the GPU, the Function, plans, kernels, CUDA C;
 * target_cuda.c), then NVRTC (cached on disk) and the driver; then runs.
 * Needs: pipeline.c, target_cuda.c, backend/cuda.  Gives: harp/gpu.h.
 *
 * A run: inputs are copied into their places in the device arena, the
 * status word is cleared, the launches run in order on harp's stream (or,
 * with graphs, as one CUDA Graph captured on the first run and replayed),
 * then the outputs come back and the status word is checked.  Weights are
 * uploaded once, on the first run. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compile.h"
#include "gpu_int.h"
#include "harp/function.h"
#include "harp/plan.h"
#include "util/util.h"

void rt_gpu_free(rt_gpu_model *m) {
  if (!m) return;
  gpu_device_free(m);
  if (m->rt) {
    cuda_rt_graph_free(m->rt, m->graph);
    cuda_model_mem_free(m->rt, &m->mem);
    cuda_rt_unload(m->rt, m->mod);
    if (!m->rt_borrowed) cuda_rt_close(m->rt);
  }
  free(m->fn);
  free(m->args);
  free(m->consts_sv);
  free(m->cache_dir);
  if (!m->shares_build) {
    cuda_binary_free(&m->bin);
    rt_compile_free(m->comp);
  }
  free(m);
}

harp_status gpu_rt_open(harp_error *e, const rt_knobs *k, const char *cache_dir, bool no_driver, int device,
                        cuda_rt **out) {
  k = rt_knobs_or_default(k);
  cuda_rt_opts ro = {.nvrtc_path = k->nvrtc[0] ? k->nvrtc : NULL, .cuda_path = k->libcuda[0] ? k->libcuda : NULL,
                     .no_driver = no_driver, .device = device};
  char dir[4200];
  if (cache_dir) {
    snprintf(dir, sizeof dir, "%s/cuda", cache_dir);
    harp_error e2 = {0};
    if (ut_mkdirs(&e2, dir) == HARP_OK) ro.cache_dir = dir;
  }
  return cuda_rt_open(e, &ro, out);
}

static harp_status open_rt(harp_error *e, rt_gpu_model *m, bool no_driver) {
  return m->rt ? HARP_OK : gpu_rt_open(e, &m->knobs, m->cache_dir, no_driver, m->device, &m->rt);
}

harp_status gpu_target(harp_error *e, const char *target, const cuda_rt *rt, cuda_arch *arch) {
  if (!target) { /* the device's architecture, if there is one */
    const cuda_rt_status *rs = cuda_rt_status_of(rt);
    target = rs->gpu && rs->cc_major >= 9 ? "sm90" : "sm80";
  }
  if (!cuda_arch_parse(target, arch))
    return ut_fail(e, HARP_E_USAGE, NULL, "GPU target '%s': expected sm80 or sm90", target);
  return HARP_OK;
}

void gpu_knobs(const rt_gpu_opts *o, rt_knobs *k) {
  *k = *rt_knobs_or_default(o ? o->knobs : NULL);
  if (o) rt_knobs_set_build(k, NULL, NULL, o->cache_dir);
}

harp_status gpu_build_on(harp_error *e, const tiny_graph *g, const tiny_symtab *syms, const rt_gpu_opts *o, cuda_rt *rt,
                       rt_gpu_model **out) {
  return gpu_build_gen(e, g, syms, o, rt, NULL, NULL, out);
}

harp_status gpu_build_gen(harp_error *e, const tiny_graph *g, const tiny_symtab *syms, const rt_gpu_opts *o, cuda_rt *rt,
                          const cuda_syms *gen, const rt_compile *replay, rt_gpu_model **out) {
  *out = NULL;
  rt_gpu_model *m = ut_xcalloc(1, sizeof *m);
  if (!m) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  m->g = g;
  m->rt = rt;
  m->rt_borrowed = rt != NULL;
  m->graphs = o && o->graphs;
  gpu_knobs(o, &m->knobs);
  rt_cc_opts cc = {.cache_dir = m->knobs.cache_dir};
  m->cache_dir = rt_cc_cache_dir(&cc);
  const char *target = o ? o->target : NULL;
  harp_status st = HARP_OK;
  cuda_math math;
  if (o && o->precision && !cuda_math_parse(o->precision, &math)) {
    st = ut_fail(e, HARP_E_USAGE, NULL, "precision '%s': expected tf32, fp32, fp16 or bf16", o->precision);
    goto fail;
  }
  if (!target && (st = open_rt(e, m, false))) goto fail; /* the device decides */
  if ((st = gpu_target(e, target, m->rt, &m->arch))) goto fail;
  rt_compile_opts co = {.knobs = &m->knobs, .arch = cuda_arch_name(m->arch), .precision = o ? o->precision : NULL,
                        .plan_overrides = o ? o->plan_overrides : NULL, .nplan_overrides = o ? o->nplan_overrides : 0,
                        .keep_analysis = o && o->keep_analysis, .no_plan_cache = o && o->no_plan_cache,
                        .after_stage = o ? o->after_stage : NULL,
                        .hook_ctx = o ? o->hook_ctx : NULL};
  if (gen) co.gen_syms = gen->names, co.gen_hi = gen->hi, co.ngen_syms = gen->n;
  if (replay) co.replay_regions = replay->part, co.replay_plans = &replay->plans;
  if ((st = rt_compile_run(e, &rt_target_cuda, (tiny_graph *)g, syms, &co, &m->comp))) goto fail;
  m->f = m->comp->f, m->tu = m->comp->tu, m->source = m->comp->source;
  *out = m;
  return HARP_OK;
fail:
  rt_gpu_free(m);
  return st;
}

harp_status rt_gpu_build(harp_error *e, const tiny_graph *g, const tiny_symtab *syms, const rt_gpu_opts *o,
                       rt_gpu_model **out) {
  return gpu_build_on(e, g, syms, o, NULL, out);
}

harp_status rt_gpu_instance(harp_error *e, const rt_gpu_model *src, rt_gpu_model **out) {
  return rt_gpu_instance_on(e, src, 0, out);
}

harp_status rt_gpu_instance_on(harp_error *e, const rt_gpu_model *src, int device, rt_gpu_model **out) {
  *out = NULL;
  if (device < 0) return ut_fail(e, HARP_E_USAGE, NULL, "device %d: a CUDA device ordinal is >= 0", device);
  if (!src || !src->compiled || !src->rt || !cuda_rt_status_of(src->rt)->gpu)
    return ut_fail(e, HARP_E_INVALID_ARG, NULL, "rt_gpu_instance: the model is not prepared for the device");
  rt_gpu_model *m = ut_xcalloc(1, sizeof *m);
  if (!m) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  /* the build, borrowed; everything a run writes is the instance's own */
  m->g = src->g, m->comp = src->comp, m->f = src->f, m->tu = src->tu, m->knobs = src->knobs;
  m->arch = src->arch, m->source = src->source, m->graphs = src->graphs, m->bin = src->bin;
  m->compile_ms = src->compile_ms;
  m->shares_build = m->compiled = true;
  m->device = device;
  m->cache_dir = src->cache_dir ? strdup(src->cache_dir) : NULL;
  if (src->cache_dir && !m->cache_dir) {
    rt_gpu_free(m);
    return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  }
  harp_status st = rt_gpu_load(e, m);
  if (st) {
    rt_gpu_free(m);
    return st;
  }
  *out = m;
  return HARP_OK;
}

/* NVRTC for the target's architecture, or (on a device) for the device: an
 * sm80 translation unit runs on any sm_80+ GPU, but a cubin only on its own
 * major version. */
static harp_status compile_tu(harp_error *e, rt_gpu_model *m, bool no_driver) {
  if (m->compiled) return HARP_OK;
  if (open_rt(e, m, no_driver)) return e->code;
  const cuda_rt_status *rs = cuda_rt_status_of(m->rt);
  if (!rs->nvrtc) return ut_fail(e, HARP_E_UNSUPPORTED, NULL, "NVRTC is not available: %s", rs->why_no_nvrtc);
  const char *arch = rs->gpu && m->arch == CUDA_SM80 ? cuda_rt_arch(m->rt) : cuda_arch_nvrtc(m->arch);
  double t0 = ut_now_ms();
  if (cuda_rt_compile(e, m->rt, m->source, "model.cu", arch, NULL, 0, &m->bin)) return e->code;
  m->compile_ms = ut_now_ms() - t0;
  if (!m->shares_build) { /* the pipeline's build stage, run here where the runtime is */
    m->comp->ran[RT_STAGE_BUILD] = true;
    m->comp->ms[RT_STAGE_BUILD] = m->compile_ms;
  }
  m->compiled = true;
  return HARP_OK;
}

harp_status rt_gpu_ptx(harp_error *e, rt_gpu_model *m, const char **ptx) {
  *ptx = NULL;
  if (compile_tu(e, m, true)) return e->code;
  *ptx = m->bin.ptx;
  return HARP_OK;
}

harp_status rt_gpu_prepare(harp_error *e, rt_gpu_model *m) {
  if (m->compiled && m->rt && cuda_rt_status_of(m->rt)->gpu) return HARP_OK;
  if (m->rt && !m->rt_borrowed && !cuda_rt_status_of(m->rt)->driver) { /* opened for compiling only: again, for the device */
    cuda_rt_close(m->rt);
    m->rt = NULL;
    cuda_binary_free(&m->bin);
    memset(&m->bin, 0, sizeof m->bin);
    m->compiled = false;
  }
  if (open_rt(e, m, false)) return e->code;
  const cuda_rt_status *rs = cuda_rt_status_of(m->rt);
  if (!rs->gpu) return ut_fail(e, HARP_E_UNSUPPORTED, NULL, "no GPU: %s", rs->why_no_gpu);
  if (m->arch == CUDA_SM90 && rs->cc_major != 9)
    return ut_fail(e, HARP_E_UNSUPPORTED, NULL, "the model is compiled for sm90 (sm_90a); the device %s is sm_%d%d",
                   rs->device_name, rs->cc_major, rs->cc_minor);
  return compile_tu(e, m, false);
}

harp_status rt_gpu_load(harp_error *e, rt_gpu_model *m) {
  if (m->loaded) return HARP_OK;
  if (rt_gpu_prepare(e, m)) return e->code;
  if (cuda_rt_load(e, m->rt, &m->bin, &m->mod)) return e->code;
  cuda_model_tu *t = m->tu;
  m->fn = ut_xcalloc((size_t)t->nlaunch + 1, sizeof *m->fn);
  m->args = ut_xcalloc((size_t)t->nlaunch * CUDA_MAX_PARAMS + 1, sizeof *m->args);
  if (!m->fn || !m->args) {
    ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
    goto fail;
  }
  for (int i = 0; i < t->nlaunch; i++)
    if (cuda_rt_function(e, m->rt, m->mod, t->launch[i].k->name, &m->fn[i])) goto fail;
  if (cuda_rt_alloc(e, m->rt, t->arena_bytes, &m->mem.arena)) goto fail;
  m->mem.arena_bytes = t->arena_bytes;
  if (t->f->const_bytes && cuda_rt_alloc(e, m->rt, t->f->const_bytes, &m->mem.constpool)) goto fail;
  m->mem.const_bytes = t->f->const_bytes;
  /* every argument's device address, once */
  for (int i = 0; i < t->nlaunch; i++)
    for (int p = 0; p < t->launch[i].nargs; p++) {
      bool in_consts;
      int64_t off = cuda_arg_offset(t, &t->launch[i].args[p], &in_consts);
      m->args[i * CUDA_MAX_PARAMS + p] = off < 0 ? 0 : (in_consts ? m->mem.constpool : m->mem.arena) + (cuda_devptr)off;
      if (t->launch[i].args[p].kind == CUDA_ARG_SYM) /* a size: the box's corner hi until a run sets its binding's */
        m->args[i * CUDA_MAX_PARAMS + p] = (cuda_devptr)t->gen.hi[t->launch[i].args[p].buffer];
    }
  m->loaded = true;
  return HARP_OK;
fail: /* undo the module and the memory: a later call (a retry after a transient failure) loads from here again */
  cuda_model_mem_free(m->rt, &m->mem);
  cuda_rt_unload(m->rt, m->mod);
  m->mod = NULL;
  free(m->fn);
  free(m->args);
  m->fn = NULL;
  m->args = NULL;
  return e->code;
}

/* grid.x of a persistent kernel on this device: min(tiles, SMs x CTAs per SM). */
int64_t rt_gpu_persistent_grid(const cuda_kernel *k, int sm_count) {
  if (k->persistent_tiles <= 0) return 0;
  int64_t slots = (int64_t)(sm_count > 0 ? sm_count : CUDA_DEFAULT_SMS) * (k->min_blocks > 0 ? k->min_blocks : 1);
  return k->persistent_tiles < slots ? k->persistent_tiles : slots;
}

/* Launch i of m on harp's stream (sms: the device's multiprocessors); a
 * ShapeSet build's sizes and grid at the binding m->sv (NULL: the box's hi). */
static harp_status launch_at(harp_error *e, rt_gpu_model *m, int i, int sms) {
  const cuda_launch *l = &m->tu->launch[i];
  const int64_t *sv = m->sv ? m->sv : m->tu->gen.hi;
  cuda_devptr *args = &m->args[i * CUDA_MAX_PARAMS];
  for (int p = 0; p < l->nargs; p++)
    if (l->args[p].kind == CUDA_ARG_SYM) args[p] = (cuda_devptr)sv[l->args[p].buffer];
  int64_t grid = l->grid_div > 0 ? cuda_launch_grid(l, sv) : rt_gpu_persistent_grid(l->k, sms);
  bool y = l->grid_div > 0 && l->grid_axis == 1; /* the run-time grid along y */
  return cuda_rt_launch_kernel_xy(e, m->rt, m->fn[i], l->k, args, y ? 0 : grid, y ? grid : 0, sv);
}

harp_status gpu_launch_args(harp_error *e, rt_gpu_model *m, int i, const cuda_devptr *args) {
  const cuda_kernel *k = m->tu->launch[i].k;
  return cuda_rt_launch_kernel_at(e, m->rt, m->fn[i], k, args, rt_gpu_persistent_grid(k, cuda_rt_status_of(m->rt)->sm_count),
                                  m->sv ? m->sv : m->tu->gen.hi); /* a ShapeSet build's maps at the binding */
}

/* Every launch of a run, in order, but the `once` ones (packs of weights;
 * run_once_launches). */
harp_status gpu_launch_all(harp_error *e, rt_gpu_model *m) {
  int sms = cuda_rt_status_of(m->rt)->sm_count;
  for (int i = 0; i < m->tu->nlaunch; i++)
    if (!m->tu->launch[i].once && launch_at(e, m, i, sms)) return e->code;
  return HARP_OK;
}

/* The `once` launches (weights repacked into the packed area), directly on
 * harp's stream, right after the ConstPool went up: never part of a graph. */
static harp_status run_once_launches(harp_error *e, rt_gpu_model *m) {
  int sms = cuda_rt_status_of(m->rt)->sm_count;
  for (int i = 0; i < m->tu->nlaunch; i++)
    if (m->tu->launch[i].once && launch_at(e, m, i, sms)) return e->code;
  return HARP_OK;
}

harp_status gpu_capture(harp_error *e, rt_gpu_model *m, bool instantiate, cuda_rt_graph **out) {
  *out = NULL;
  if (cuda_rt_graph_begin(e, m->rt)) return e->code;
  harp_status st = gpu_launch_all(e, m);
  cuda_rt_graph *g = NULL;
  harp_error e2 = {0};
  harp_status st2 = cuda_rt_graph_end(st ? &e2 : e, m->rt, instantiate, &g); /* always end the capture */
  if (st) { /* a launch failed: the graph lacks it (the driver may still have made one) */
    cuda_rt_graph_free(m->rt, g);
    return st;
  }
  if (st2) return st2;
  *out = g;
  return HARP_OK;
}

/* The launches once: directly, or through the graph (captured the first time). */
static harp_status run_launches(harp_error *e, rt_gpu_model *m) {
  if (!m->graphs) return gpu_launch_all(e, m);
  if (!m->graph && gpu_capture(e, m, true, &m->graph)) return e->code;
  return cuda_rt_graph_launch(e, m->rt, m->graph);
}

static harp_status own_launches(harp_error *e, rt_gpu_model *m, void *ctx) {
  (void)ctx;
  return run_launches(e, m);
}

harp_status rt_gpu_run(harp_error *e, rt_gpu_model *m, const ut_tensor *inputs, int ninputs, ut_tensor *outputs) {
  return gpu_run_with(e, m, inputs, ninputs, outputs, NULL, own_launches, NULL);
}

harp_status rt_gpu_run_into(harp_error *e, rt_gpu_model *m, const ut_tensor *inputs, int ninputs, void *const *outputs) {
  if (!outputs) return ut_fail(e, HARP_E_INVALID_ARG, NULL, "rt_gpu_run_into: no output buffers");
  for (int k = 0; k < m->f->nret; k++)
    if (!outputs[k]) return ut_fail(e, HARP_E_INVALID_ARG, NULL, "output %d: no buffer given", k);
  return gpu_run_with(e, m, inputs, ninputs, NULL, outputs, own_launches, NULL);
}

/* Which symbols of ShapeSet build m a weight's dim is (want[i] 1: a
 * weight's size varies with symbol i of m->tu->gen); whether any. */
static bool weight_syms(const rt_gpu_model *m, int64_t *want) {
  const fn_function *f = m->f;
  bool any = false;
  for (int a = 0; a < f->nargs; a++) {
    const fn_buffer *b = &f->buffers[f->args[a]];
    const tiny_shape *sh = b->kind == FN_PARAM ? &m->g->nodes[b->node].shape : NULL;
    for (int d = 0; sh && d < sh->rank; d++)
      for (int i = 0; sh->d[d].sym && i < m->tu->gen.n; i++)
        if (!strcmp(sh->d[d].sym, m->tu->gen.names[i])) want[i] = 1, any = true;
  }
  return any;
}

/* Whether the weights' sizes at the symbols' values sv differ from where
 * they went up (m->consts_sv: gen.n values, then weight_syms' flags). */
static bool weights_moved(const rt_gpu_model *m, const int64_t *sv) {
  int n = m->tu->gen.n;
  for (int i = 0; i < n; i++)
    if (m->consts_sv[n + i] && m->consts_sv[i] != sv[i]) return true;
  return false;
}

/* The weights (the inputs' params) into the ConstPool, then the `once`
 * launches (their packs), when not up yet.  A ShapeSet build whose weights'
 * sizes vary takes them at the binding m->sv (no larger than at the corner
 * hi, the layout's) and uploads and packs them again at each binding that
 * moves a symbol they name (m->consts_sv: where they went up). */
harp_status gpu_upload_consts(harp_error *e, rt_gpu_model *m, const ut_tensor *inputs) {
  const fn_function *f = m->f;
  int n = m->tu->gen.n;
  const int64_t *sv = m->sv ? m->sv : m->tu->gen.hi;
  if (m->consts_up && (!m->consts_sv || !weights_moved(m, sv))) return HARP_OK;
  if (!f->const_bytes) return (m->consts_up = true), HARP_OK;
  if (n && !m->consts_up && !m->consts_sv) { /* the first upload: do the weights' sizes vary? */
    if (!(m->consts_sv = ut_xcalloc(2 * (size_t)n, sizeof *m->consts_sv)))
      return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
    if (!weight_syms(m, m->consts_sv + n)) free(m->consts_sv), m->consts_sv = NULL;
  }
  ut_tensor *params = ut_xcalloc((size_t)f->nargs + 1, sizeof *params);
  if (!params) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  int np = 0;
  for (int a = 0; a < f->nargs; a++)
    if (f->buffers[f->args[a]].kind == FN_PARAM) params[np++] = inputs[a];
  fn_constpool cp = {0};
  m->consts_up = false; /* until every step below is done */
  harp_status st = m->consts_sv ? fn_constpool_from_tensors_upto(e, f, params, np, &cp)
                                : fn_constpool_from_tensors(e, f, params, np, &cp);
  free(params);
  if (!st) st = cuda_rt_htod(e, m->rt, m->mem.constpool, cp.data, cp.size);
  fn_constpool_free(&cp);
  if (!st) st = run_once_launches(e, m);
  if (!st) m->consts_up = true;
  if (!st && m->consts_sv) memcpy(m->consts_sv, sv, sizeof *sv * (size_t)n);
  return st;
}

harp_status gpu_run_with(harp_error *e, rt_gpu_model *m, const ut_tensor *inputs, int ninputs, ut_tensor *outputs,
                       void *const *dst, gpu_launcher launch, void *ctx) {
  const fn_function *f = m->f;
  const tiny_graph *g = m->gio ? m->gio : m->g; /* a ShapeSet build: the binding's sizes */
  for (int k = 0; !dst && k < f->nret; k++) memset(&outputs[k], 0, sizeof outputs[k]);
  if (ninputs != f->nargs) return ut_fail(e, HARP_E_INPUT_MISMATCH, NULL, "%d inputs given, the model has %d", ninputs, f->nargs);
  for (int a = 0; a < f->nargs; a++) {
    const fn_buffer *b = &f->buffers[f->args[a]];
    const tiny_node *n = &g->nodes[b->node];
    const ut_tensor *t = &inputs[a];
    bool ok = t->dtype == n->dtype && t->rank == n->shape.rank &&
              t->nbytes == (m->gio ? (size_t)tiny_shape_numel(&n->shape) * tiny_dtype_size(n->dtype) : b->size);
    for (int d = 0; ok && d < t->rank; d++) ok = t->shape[d] == n->shape.d[d].n;
    if (!ok) return ut_fail(e, HARP_E_INPUT_MISMATCH, n->id, "input %s does not match the model's dtype or shape", n->a.input.tensor_id);
  }
  if (rt_gpu_load(e, m) || gpu_upload_consts(e, m, inputs)) return e->code;
  const cuda_model_tu *t = m->tu;
  harp_status st = HARP_OK;
  for (int a = 0; a < f->nargs && !st; a++) {
    const fn_buffer *b = &f->buffers[f->args[a]];
    if (b->kind == FN_INPUT) st = cuda_rt_htod(e, m->rt, m->mem.arena + t->io_offset[f->args[a]], inputs[a].data, inputs[a].nbytes);
  }
  if (!st) st = cuda_rt_memset0(e, m->rt, m->mem.arena + t->status_off, 4);
  if (!st) st = launch(e, m, ctx);
  if (!st) st = cuda_rt_sync(e, m->rt);
  int status = 0;
  if (!st) st = cuda_rt_dtoh(e, m->rt, &status, m->mem.arena + t->status_off, sizeof status);
  if (!st && status > 0 && status <= f->nkernels)
    st = ut_fail(e, HARP_E_INVALID_ARG, f->kernels[status - 1].name, "kernel %s stopped: an index is out of range",
                 f->kernels[status - 1].name);
  for (int k = 0; k < f->nret && !st; k++) {
    cuda_devptr from = m->mem.arena + t->io_offset[f->ret[k]];
    const tiny_node *n = &g->nodes[g->outputs[k]];
    if (dst) { /* the caller's buffer, no staging copy */
      st = cuda_rt_dtoh(e, m->rt, dst[k], from, (size_t)tiny_shape_numel(&n->shape) * (size_t)tiny_dtype_size(n->dtype));
      continue;
    }
    int64_t shape[TINY_MAX_RANK];
    for (int d = 0; d < n->shape.rank; d++) shape[d] = n->shape.d[d].n;
    st = ut_tensor_alloc(e, &outputs[k], n->dtype, n->shape.rank, shape);
    if (!st) st = cuda_rt_dtoh(e, m->rt, outputs[k].data, from, outputs[k].nbytes);
  }
  if (st && !dst)
    for (int k = 0; k < f->nret; k++) ut_tensor_free(&outputs[k]);
  return st;
}

static int run_once(void *ctx) {
  rt_gpu_model *m = ctx;
  harp_error e = {0};
  return run_launches(&e, m) ? 1 : 0;
}

harp_status rt_gpu_time(harp_error *e, rt_gpu_model *m, int warmup, int reps, double *ms) {
  *ms = 0;
  if (rt_gpu_load(e, m)) return e->code;
  return cuda_rt_time_fn(e, m->rt, run_once, m, warmup, reps, ms);
}

typedef struct launch_ctx {
  rt_gpu_model *m;
  harp_error *e;
  int sms;
} launch_ctx;

static int launch_one(void *ctx, int i) {
  launch_ctx *c = ctx;
  return launch_at(c->e, c->m, i, c->sms) ? 1 : 0;
}

harp_status rt_gpu_profile(harp_error *e, rt_gpu_model *m, int warmup, int reps, double *ms) {
  if (rt_gpu_load(e, m)) return e->code;
  harp_error e2 = {0}; /* a launch's own error, kept as the reason */
  launch_ctx c = {m, &e2, cuda_rt_status_of(m->rt)->sm_count};
  harp_status st = cuda_rt_time_seq(e, m->rt, m->tu->nlaunch, launch_one, &c, warmup, reps, ms);
  if (st && e2.code) {
    char why[512];
    harp_error_format(&e2, why, sizeof why);
    harp_error_clear(e);
    return ut_fail(e, e2.code, NULL, "profiling: %s", why);
  }
  return st;
}

int rt_gpu_nlaunches(const rt_gpu_model *m) { return m->tu->nlaunch; }
void rt_gpu_launch_info(const rt_gpu_model *m, int i, const char **kernel, const char **kind) {
  const cuda_kernel *k = m->tu->launch[i].k;
  *kernel = k->name, *kind = k->kind;
}

const char *rt_gpu_launch_region(const rt_gpu_model *m, int i) {
  return m->tu->f->kernels[m->tu->launch[i].fn_kernel].name;
}

const char *rt_gpu_source(const rt_gpu_model *m) { return m->source; }
const cuda_model_tu *rt_gpu_tu(const rt_gpu_model *m) { return m->tu; }
harp_status rt_gpu_dump_json(harp_error *e, const rt_gpu_model *m, char **out) { return cuda_model_dump_json(e, m->tu, out); }
const char *rt_gpu_arch(const rt_gpu_model *m) { return cuda_arch_name(m->arch); }
const char *rt_gpu_nvrtc_arch(const rt_gpu_model *m) { return cuda_arch_nvrtc(m->arch); }
double rt_gpu_compile_ms(const rt_gpu_model *m) { return m->compile_ms; }
bool rt_gpu_cache_hit(const rt_gpu_model *m) { return m->bin.cached; }
const struct fn_function *rt_gpu_function(const rt_gpu_model *m) { return m->f; }
const struct rt_compile *rt_gpu_stages(const rt_gpu_model *m) { return m->comp; }
void rt_gpu_counts(const rt_gpu_model *m, int *templ, int *simple, int *generic) {
  *templ = m->tu->ntemplate, *simple = m->tu->nsimple, *generic = m->tu->ngeneric;
}
