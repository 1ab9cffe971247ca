/* cpu.c — the CPU backend end to end: analysis, regions, the Function, C
 * generation, compilation (cached) and loading; then runs.
 * Needs: every layer.  Gives: harp/cpu.h. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/c/emit_model.h"
#include "cache.h"
#include "compile.h"
#include "memlimit.h"
#include "harp/cpu.h"
#include "harp/function.h"
#include "harp/poly.h"
#include "harp/region.h"
#include "harp/tune.h"
#include "index/indexbook.h"
#include "util/util.h"

typedef void *(*init_fn)(const void *, size_t);
typedef int (*run_fn)(void *, const void *const *, void *const *);
typedef void (*free_fn)(void *);
typedef int (*kernel_fn)(void *, int, const void *const *, void *const *);

struct rt_cpu_model {
  const tiny_graph *g;
  rg_partition *part; /* owns the IndexBook and the Poly-View */
  fn_function *f;
  ut_arena *arena;
  char *source;
  char *so_path;
  bool cache_hit;
  char warning[512]; /* the compile cache was not usable (rt_cc_result.warning) */
  double compile_ms;
  void *dl;
  init_fn init;
  run_fn run;
  free_fn free_;
  kernel_fn run_kernel;
  rt_plans plans;
};

unsigned rt_cpu_algo_mask(void) { return 1u << PLAN_ALGO_IMPLICIT_GEMM | 1u << PLAN_ALGO_ONLINE_SOFTMAX; }


/* Intel cores with the JCC erratum (Skylake, Cascade Lake and their client
 * siblings, which GCC reports as skylake). */
static bool jcc_erratum_host(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  return __builtin_cpu_is("skylake") || __builtin_cpu_is("skylake-avx512") || __builtin_cpu_is("cascadelake");
#else
  return false;
#endif
}

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

void rt_cpu_free(rt_cpu_model *m) {
  if (!m) return;
  if (m->dl) dlclose(m->dl);
  fn_free(m->f);
  rt_plans_free(&m->plans);
  rg_partition_free(m->part);
  ut_arena_free(m->arena);
  free(m->source);
  free(m->so_path);
  free(m);
}

harp_status rt_cpu_compile(harp_error *e, const tiny_graph *g, const tiny_symtab *syms, const rt_cpu_opts *o,
                         rt_cpu_model **out) {
  *out = NULL;
  double t0 = now_ms();
  rt_cpu_model *m = ut_xcalloc(1, sizeof *m);
  if (!m || !(m->arena = ut_arena_new())) {
    free(m);
    return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  }
  m->g = g;
  ut_str src;
  ut_str_init(&src);
  /* Region formation on the CPU's description; the partition owns the
   * IndexBook and Poly-View.  CASTs of outside tensors inside row and
   * epilogue regions get regions of their own (the C generator converts
   * only contraction operands on load). */
  rg_options ro = {.no_operand_casts = true};
  /* HARP_NO_FUSION=1: every block its own kernel (benchmarks compare fused with unfused) */
  const char *nf = getenv("HARP_NO_FUSION");
  ro.no_fusion = nf && *nf && strcmp(nf, "0") != 0;
  harp_status st = rg_form(e, g, syms, &ro, &m->part);
  if (!st) st = rg_partition_check(e, m->part);
  const poly_view *pv = st ? NULL : m->part->formed->pv;
  fn_options fo = {.widen_half_temps = true};
  if (!st) st = fn_build_ex(e, m->part, "main", &fo, &m->f);
  if (!st) st = rt_check_memory(e, m->f, o ? o->max_memory : 0); /* before the code, the compiler, an instance */
  if (!st) st = rt_check_source(e, 0, m->f->nkernels);
  if (!st) {
    rt_plan_opts po = {.overrides = o ? o->plan_overrides : NULL,
                       .noverrides = o ? o->nplan_overrides : 0,
                       .no_cache = o && o->no_plan_cache,
                       .cache_dir = o ? o->cache_dir : NULL,
                       .search = {rt_cpu_algo_mask()}};
    st = rt_plans_choose(e, m->part, g, syms, &m->part->formed->machine, &po, &m->plans);
  }
  if (!st) {
    rc_ctx rc = {e, g, pv, m->f, syms, m->arena, 1 << 20, !(o && o->portable), m->plans.choice, false, NULL};
    st = cgen_emit_model(&rc, "model", &src);
    if (!st && src.oom) st = ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory writing the generated C");
    if (!st) st = rt_check_source(e, src.len, m->f->nkernels);
    /* the C is all the rest needs: give the analysis back before the
     * compiler, the weights and the model's own memory come */
    rg_formed_drop_analysis(m->part->formed);
    ut_release_free_memory();
    m->plans.compiled = true;
    for (int i = 0; i < m->plans.n; i++) { /* gathers and other regions no template saw */
      rt_plan_choice *ch = &m->plans.choice[i];
      if (ch->has_plan && !ch->applied && !ch->note[0])
        snprintf(ch->note, sizeof ch->note, "generic loops: the plan is not read");
    }
  }
  if (!st) {
    /* host-only code may use every instruction of this machine; 512-bit
       vectors for the auto-vectorized loops too (GCC and clang default to
       256 on AVX-512 parts; softmax/layernorm rows run ~20% faster) */
    const char *flags = o && o->cflags ? o->cflags : getenv("HARP_CFLAGS");
    char host_flags[256];
    bool jcc = false;
    if (!flags && !(o && o->portable)) {
      /* Skylake-derived cores take a penalty on jumps that cross or end on a
       * 32-byte boundary (the JCC-erratum microcode): where a hot loop's
       * branch lands is luck, 25% on a 3x3 conv at 256 channels.  The
       * assembler can keep branches inside 32-byte blocks. */
      jcc = jcc_erratum_host();
      snprintf(host_flags, sizeof host_flags, "%s%s", RT_CFLAGS_HOST, jcc ? " -Wa,-mbranches-within-32B-boundaries" : "");
      flags = host_flags;
    }
    rt_cc_opts cc = {o ? o->cc : NULL, flags, o ? o->cache_dir : NULL, .parallel = true};
    rt_cc_result r;
    st = rt_cc_build_ex(e, src.buf, &cc, &r);
    if (st == HARP_E_INTERNAL && jcc) { /* the compiler ran and failed: perhaps an assembler without the option (binutils < 2.34) */
      harp_error_clear(e);
      *strstr(host_flags, " -Wa,") = 0;
      st = rt_cc_build_ex(e, src.buf, &cc, &r);
    }
    m->so_path = r.path;
    m->cache_hit = r.hit;
    snprintf(m->warning, sizeof m->warning, "%s", r.warning);
    if (!st) {
      m->dl = dlopen(m->so_path, RTLD_NOW | RTLD_LOCAL);
      if (!m->dl) st = ut_fail_at(e, HARP_E_IO, m->so_path, 0, 0, "cannot load the compiled model: %s", dlerror());
    }
    if (r.temp) rt_cache_discard(r.path); /* loaded (or not): the temporary copy goes */
  }
  if (!st) {
    m->init = (init_fn)dlsym(m->dl, "model_init");
    m->run = (run_fn)dlsym(m->dl, "model_run");
    m->free_ = (free_fn)dlsym(m->dl, "model_free");
    m->run_kernel = (kernel_fn)dlsym(m->dl, "model_run_kernel");
    if (!m->init || !m->run || !m->free_) st = ut_fail(e, HARP_E_INTERNAL, NULL, "the compiled model lacks its entry points");
  }
  if (!st && o && o->keep_source) m->source = ut_str_take(&src);
  ut_str_free(&src);
  if (st) {
    rt_cpu_free(m);
    return st;
  }
  m->compile_ms = now_ms() - t0;
  *out = m;
  return HARP_OK;
}

static harp_status run_once(harp_error *e, rt_cpu_model *m, const ut_tensor *inputs, ut_tensor *taken, int ninputs,
                          ut_tensor *outputs) {
  const fn_function *f = m->f;
  const tiny_graph *g = m->g;
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

const char *rt_cpu_source(const rt_cpu_model *m) { return m->source; }
bool rt_cpu_cache_hit(const rt_cpu_model *m) { return m->cache_hit; }
const char *rt_cpu_warning(const rt_cpu_model *m) { return m->warning[0] ? m->warning : NULL; }
double rt_cpu_compile_ms(const rt_cpu_model *m) { return m->compile_ms; }
const struct fn_function *rt_cpu_function(const rt_cpu_model *m) { return m->f; }

void *rt_cpu_instance_new(const rt_cpu_model *m, const void *params, size_t nbytes) { return m->init(params, nbytes); }
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
  for (int k = 0; k < m->f->nkernels; k++)
    if (!strcmp(m->f->kernels[k].name, region)) return k;
  return -1;
}
const struct rt_plans *rt_cpu_plans(const rt_cpu_model *m) { return &m->plans; }
const char *rt_cpu_error_kernel(const rt_cpu_model *m, int rc) {
  return rc >= 100 && rc - 100 < m->f->nkernels ? m->f->kernels[rc - 100].name : NULL;
}
