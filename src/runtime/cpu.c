/* cpu.c — the CPU backend: the compile pipeline on the CPU target (regions,
 * the Function, plans, C, cc; target_cpu.c), the shared object loaded;
 * then runs.  With the knob tier0 (auto, the default) a compile returns
 * after the function stage of the greedy regions (tier 0's), and forms
 * the exact regions, their Function and plans, prints the C and builds the
 * object (or finds it in the disk cache) on a thread of its own, which
 * first reads tier 0's kernels (tier0.c's rt_t0_prep_read: a run started
 * meanwhile waits per kernel); runs before the object is ready go to tier
 * 0, the first one after it loads it.  tier0=force: every run on tier 0,
 * no compiler.
 * Needs: pipeline.c, target_cpu.c, tier0.c.  Gives: harp/cpu.h. */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef __linux__
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "cache.h"
#include "compile.h"
#include "harp/cpu.h"
#include "harp/function.h"
#include "harp/pipeline.h"
#include "tier0.h"
#include "util/util.h"

typedef void *(*init_fn)(const void *, size_t);
typedef void *(*init_threads_fn)(const void *, size_t, int);
typedef int (*run_fn)(void *, const void *const *, void *const *);
typedef void (*free_fn)(void *);
typedef int (*kernel_fn)(void *, int, const void *const *, void *const *);
typedef int (*run_syms_fn)(void *, const long long *, const void *const *, void *const *);
typedef int (*kernel_syms_fn)(void *, const long long *, int, const void *const *, void *const *);

struct rt_cpu_model {
  rt_compile *c; /* the stages' results: g, the partition, the Function, plans, source */
  double compile_ms;
  void *dl;
  init_fn init;
  init_threads_fn init_threads;
  run_fn run;
  free_fn free_;
  kernel_fn run_kernel;
  run_syms_fn run_syms;  /* a ShapeSet object's (harp/sgen.h), else NULL */
  kernel_syms_fn run_kernel_syms; /* the same: one kernel at a binding */
  /* tier 0 */
  int tier0;             /* the knob: rt_knob_tier0 */
  bool building;         /* the builder thread was started and not joined */
  int built;             /* it finished (atomic) */
  pthread_t builder;
  bool read_on_thread;   /* the builder reads tier 0's kernels first (prep), the runs waiting per kernel */
  bool code_on_thread;   /* the builder prints the C first (the code stage) */
  bool exact_on_thread;  /* before that it forms the exact regions, the Function and the plans (c->part, c->f,
                            c->plans are its own until joined): tier 0 runs t0f, of the greedy regions */
  rg_partition *t0part;  /* tier 0's greedy partition and its Function, taken from the compile (exact_on_thread) */
  fn_function *t0f;
  double exact_ms[3];    /* the builder's regions, function and plans wall times (-1: did not finish) */
  harp_error build_err;  /* its error */
  double code_ms, build_ms; /* its wall times */
  rt_t0_prep *prep;      /* tier 0's reading of the kernels (tier0.c), made before the builder starts */
  rt_t0_stats t0;        /* the last run's, when last_tier0 */
  bool last_tier0;
  pthread_mutex_t mu;    /* join_build: instances of one model may run on several threads */
  pthread_mutex_t t0mu;  /* one tier-0 run at a time (the readers reach isl, whose context is not shared safely) */
  pthread_mutex_t holdmu; /* with holdcv: the builder holds back after its reading while hold */
  pthread_cond_t holdcv;
  bool hold;             /* until the first tier-0 run ended (or HOLD_MS, or someone waits for the object) */
  rt_cpu_hold hold_by;   /* what ended the hold (RT_HOLD_NONE: the builder was never held) */
  double hold_ms;        /* how long the builder waited in it (-1: it never reached the hold) */
};

/* How long the builder holds back after tier 0's reading for the first
 * tier-0 run to end (a caller that runs later finds a build in progress). */
#define HOLD_MS 1500

/* The builder may go on (under no lock of m's); why: what ended the hold,
 * kept when it was the first to. */
static void release_hold(rt_cpu_model *m, rt_cpu_hold why) {
  pthread_mutex_lock(&m->holdmu);
  if (m->hold) m->hold_by = why;
  m->hold = false;
  pthread_cond_broadcast(&m->holdcv);
  pthread_mutex_unlock(&m->holdmu);
}

/* On the builder thread: wait while m->hold, at most HOLD_MS (then
 * m->hold_by says so); the wait's length into m->hold_ms. */
static void wait_hold(rt_cpu_model *m) {
  double t0 = ut_now_ms();
  struct timespec dl;
  clock_gettime(CLOCK_REALTIME, &dl);
  dl.tv_sec += HOLD_MS / 1000;
  dl.tv_nsec += (long)(HOLD_MS % 1000) * 1000000L;
  if (dl.tv_nsec >= 1000000000L) dl.tv_sec++, dl.tv_nsec -= 1000000000L;
  pthread_mutex_lock(&m->holdmu);
  while (m->hold && pthread_cond_timedwait(&m->holdcv, &m->holdmu, &dl) != ETIMEDOUT) {
  }
  if (m->hold) m->hold = false, m->hold_by = RT_HOLD_TIMEOUT;
  m->hold_ms = ut_now_ms() - t0;
  pthread_mutex_unlock(&m->holdmu);
}

/* A zeroed model with its locks, or NULL. */
static rt_cpu_model *model_alloc(void) {
  rt_cpu_model *m = ut_xcalloc(1, sizeof *m);
  if (!m) return NULL;
  pthread_mutex_init(&m->mu, NULL);
  pthread_mutex_init(&m->t0mu, NULL);
  pthread_mutex_init(&m->holdmu, NULL);
  pthread_cond_init(&m->holdcv, NULL);
  return m;
}

/* A tier-0 run of m, one at a time. */
static harp_status tier0_locked(harp_error *e, rt_cpu_model *m, const ut_tensor *inputs, int ninputs, ut_tensor *outputs,
                                rt_t0_stats *stats) {
  pthread_mutex_lock(&m->t0mu);
  harp_status st = HARP_OK;
  if (!m->prep && (m->building || m->tier0 == RT_TIER0_OFF)) /* no reading, and the Poly-View is not this thread's or gone */
    st = ut_fail(e, HARP_E_INTERNAL, NULL, "tier 0 was not prepared for this model");
  if (!st && !m->prep) st = rt_t0_prepare(e, m->c, m->c->f, &m->prep);
  if (!st) st = rt_tier0_run(e, m->c, m->prep, inputs, ninputs, outputs, stats);
  pthread_mutex_unlock(&m->t0mu);
  release_hold(m, RT_HOLD_FIRST_RUN); /* the first run is over: the builder takes the second core */
  return st;
}

/* The builder thread: tier 0's reading of the kernels (at the runs'
 * priority: a run waits for it), then the build stage of m's compile at a
 * lower priority than the runs it overlaps (on Linux the nice value is the
 * thread's, and the compiler it spawns inherits it), so tier 0 keeps the
 * cores first. */
static void *build_main(void *arg) {
  rt_cpu_model *m = arg;
  if (m->read_on_thread) { /* the Poly-View is this thread's from here on */
    harp_error re = {0};
    rt_t0_prep_read(&re, m->c, m->prep); /* a failure is kept in m->prep: the runs that reach it say it */
  }
#ifdef __linux__
  errno = 0;
  int nice_now = getpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid));
  if (!errno) setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), nice_now + 10 < 19 ? nice_now + 10 : 19);
#endif
  wait_hold(m); /* the first tier-0 run keeps both cores: its kernels start their threads per kernel, and a
                   thread of lower priority on the other core still delays each by a time slice */
  if (m->exact_on_thread) /* the object's regions first, on the Poly-View tier 0 is done reading */
    rt_cpu_exact_stages(m->c, false, m->exact_ms);
  double t0 = ut_now_ms();
  if (m->code_on_thread && !m->build_err.code) { /* the C next: the runs read tier 0's reading, not the Poly-View */
    rt_cpu_code_unrecorded(m->c);
    m->code_ms = ut_now_ms() - t0;
    t0 = ut_now_ms();
  }
  if (!m->build_err.code) rt_cpu_build_unrecorded(m->c); /* its error in m->build_err (m->c->e) */
  m->build_ms = ut_now_ms() - t0;
  __atomic_store_n(&m->built, 1, __ATOMIC_RELEASE);
  return NULL;
}

static harp_status load_so(harp_error *e, rt_cpu_model *m);
static harp_status run_once(harp_error *e, rt_cpu_model *m, const tiny_graph *gb, const long long *syms,
                            const ut_tensor *inputs, ut_tensor *taken, int ninputs, ut_tensor *outputs);

/* Wait for the builder thread, then load what it built; its error, if
 * any, into e.  Under m->mu. */
static harp_status join_build_locked(harp_error *e, rt_cpu_model *m) {
  if (!m->building) return HARP_OK;
  release_hold(m, RT_HOLD_WAITED); /* the object is waited for now */
  pthread_join(m->builder, NULL);
  m->building = false;
  m->c->e = e;
  m->c->ms[RT_STAGE_BUILD] = m->build_ms; /* the stage table is this thread's */
  m->c->ran[RT_STAGE_BUILD] = !m->build_err.code;
  for (int s = 0; m->exact_on_thread && s < 3; s++) /* after the greedy pass the main thread timed */
    if (m->exact_ms[s] >= 0) m->c->ms[RT_STAGE_REGIONS + s] += m->exact_ms[s], m->c->ran[RT_STAGE_REGIONS + s] = true;
  if (m->code_on_thread) {
    m->c->ms[RT_STAGE_CODE] = m->code_ms;
    m->c->ran[RT_STAGE_CODE] = m->c->source_bytes > 0;
  }
  if (m->build_err.code) { /* kept as the model's warning: runs stay on tier 0 */
    snprintf(m->c->cc_warning, sizeof m->c->cc_warning, "the background build failed, runs stay on tier 0: %.400s",
             m->build_err.msg);
    harp_status st = ut_fail(e, m->build_err.code, m->build_err.node, "%s", m->build_err.msg);
    harp_error_clear(&m->build_err);
    return st;
  }
  return load_so(e, m);
}

static harp_status join_build(harp_error *e, rt_cpu_model *m) {
  pthread_mutex_lock(&m->mu);
  harp_status st = join_build_locked(e, m);
  pthread_mutex_unlock(&m->mu);
  return st;
}

void rt_cpu_free(rt_cpu_model *m) {
  if (!m) return;
  harp_error e = {0};
  join_build(&e, m); /* the object goes into the cache even when no run needs it any more */
  harp_error_clear(&e);
  if (m->dl) dlclose(m->dl);
  rt_t0_prep_free(m->prep);
  fn_free(m->t0f);
  rg_partition_free(m->t0part); /* before the compile's Poly-View, which it borrows */
  rt_compile_free(m->c);
  pthread_mutex_destroy(&m->mu);
  pthread_mutex_destroy(&m->t0mu);
  pthread_mutex_destroy(&m->holdmu);
  pthread_cond_destroy(&m->holdcv);
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
  m->run_syms = (run_syms_fn)dlsym(m->dl, "model_run_syms");
  m->run_kernel_syms = (kernel_syms_fn)dlsym(m->dl, "model_run_kernel_syms");
  if (!m->init || !m->run || !m->free_) return ut_fail(e, HARP_E_INTERNAL, NULL, "the compiled model lacks its entry points");
  return HARP_OK;
}

/* Whether graph g holds fp16 / bf16 values (tier 0 computes in fp32 and
 * stores its temps so: its numbers would not be the object's). */
static bool has_half(const tiny_graph *g) {
  for (int i = 0; i < g->n; i++)
    if (g->nodes[i].dtype == TINY_FP16 || g->nodes[i].dtype == TINY_BF16) return true;
  return false;
}

/* After a tier-0 compile (stopped after plans, or after the function of
 * the greedy regions: rt_compile_opts.greedy_regions): auto with a kept
 * source (packages, dumps) prints the C now and loads a cached object at
 * once; auto on a model with fp16 / bf16 values builds its object now (the
 * object's numbers first, as tier0=off; its exact regions formed first).
 * Otherwise tier 0 reads the kernels (of the greedy regions, which it
 * keeps, when the compile formed those) and, with auto, the builder thread
 * starts, forming the exact regions and printing the C itself: a warm
 * model starts on tier 0 too, its object found by the thread (a cache hit,
 * no compiler) within the exact search's and the C's time. */
static harp_status tier0_start(harp_error *e, rt_cpu_model *m) {
  rt_compile *c = m->c;
  bool half = m->tier0 == RT_TIER0_AUTO && has_half(c->g);
  bool code_now = m->tier0 == RT_TIER0_FORCE || c->opts.keep_source || half;
  if (c->opts.greedy_regions && code_now && rt_cpu_exact_stages(c, true, NULL)) return e->code;
  if (code_now && rt_cpu_code_stage(c)) return e->code;
  if (half || (code_now && m->tier0 == RT_TIER0_AUTO && rt_cpu_object_cached(c))) {
    if (rt_cpu_build_stage(c)) return e->code;
    return load_so(e, m);
  }
  if (c->opts.greedy_regions) { /* tier 0's from here on; the compile forms the object's */
    m->t0part = c->part, m->t0f = c->f, c->part = NULL, c->f = NULL;
    m->exact_on_thread = true;
  }
  if (rt_t0_prep_new(e, m->t0f ? m->t0f : c->f, &m->prep)) return e->code;
  if (m->tier0 == RT_TIER0_FORCE) return rt_t0_prep_read(e, c, m->prep);
  m->code_on_thread = !code_now;
  if (m->code_on_thread) c->stopped = false;
  m->c->e = &m->build_err; /* the thread's own: this one goes on with e */
  c->opts.after_stage = NULL; /* the caller's progress hook: its stages end here (harp_options.progress_tier0) */
  m->read_on_thread = true; /* the first run overlaps tier 0's reading */
  m->hold = m->tier0 == RT_TIER0_AUTO; /* then the builder holds back while that run lasts */
  m->hold_ms = -1;                      /* until it does (wait_hold) */
  if (pthread_create(&m->builder, NULL, build_main, m)) {
    m->c->e = e;
    m->code_on_thread = m->exact_on_thread = m->read_on_thread = false;
    if (rt_t0_prep_read(e, c, m->prep)) return e->code;
    if (c->opts.greedy_regions && rt_cpu_exact_stages(c, true, NULL)) return e->code; /* no thread: all here */
    if (!code_now && rt_cpu_code_stage(c)) return e->code;
    if (rt_cpu_build_stage(m->c)) return e->code;
    return load_so(e, m);
  }
  m->building = true;
  return HARP_OK;
}

/* A model from base's stages (NULL: g's own compile), loaded. */
static harp_status compile_and_load(harp_error *e, const rt_cpu_model *base, const tiny_graph *g, const tiny_symtab *syms,
                                  const rt_cpu_opts *o, rt_cpu_model **out) {
  *out = NULL;
  double t0 = ut_now_ms();
  rt_cpu_model *m = model_alloc();
  if (!m) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  rt_knobs k;
  rt_compile_opts co = compile_opts(o, &k);
  m->tier0 = base ? RT_TIER0_OFF : k.tier0;
  if (co.precision && strcmp(co.precision, "fp32")) /* tier 0 computes in fp32 only: the object's numbers first */
    m->tier0 = RT_TIER0_OFF;
  if (m->tier0 != RT_TIER0_OFF) { /* stop before the C: tier0_start decides */
    /* auto, unless a kept source, the caller's analysis (dumps of the
     * regions) or the caller's plans (--plan: a bad one is an error before
     * any kernel runs) want the object's regions now: tier 0 on the greedy
     * regions, the exact search on the builder thread */
    co.greedy_regions = m->tier0 == RT_TIER0_AUTO && !k.tier0_exact && !co.keep_source && !co.keep_analysis &&
                        co.nplan_overrides == 0;
    co.keep_analysis = true;
    co.until = co.greedy_regions ? RT_STAGE_FUNCTION : RT_STAGE_PLANS;
  }
  if (base && base->building) { /* a variant reads base's regions and plans: its builder's until joined */
    harp_error be = {0};
    join_build(&be, (rt_cpu_model *)base); /* a failure stays base's warning */
    harp_error_clear(&be);
  }
  if (base && !base->c->part) {
    rt_cpu_free(m);
    return ut_fail(e, HARP_E_INTERNAL, NULL, "the base model has no regions (its background build failed)");
  }
  harp_status st = base ? rt_compile_variant(e, base->c, &co, &m->c)
                      : rt_compile_run(e, &rt_target_cpu, (tiny_graph *)g, syms, &co, &m->c);
  if (!st && m->tier0 != RT_TIER0_OFF) st = tier0_start(e, m);
  else if (!st) st = load_so(e, m);
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

harp_status rt_cpu_compile_code(harp_error *e, tiny_graph *g, const tiny_symtab *syms, const rt_cpu_opts *o,
                                const char *const *gen_syms, const int64_t *gen_hi, int ngen,
                                const struct rg_partition *replay, const struct rt_plans *plans, rt_compile **out) {
  rt_knobs k;
  rt_compile_opts co = compile_opts(o, &k);
  co.until = RT_STAGE_CODE;
  co.keep_source = true;
  co.gen_syms = gen_syms, co.gen_hi = gen_hi, co.ngen_syms = ngen;
  co.replay_regions = replay;
  co.replay_plans = plans;
  return rt_compile_run(e, &rt_target_cpu, g, syms, &co, out);
}

harp_status rt_cpu_adopt(harp_error *e, rt_compile *c, rt_cpu_model **out) {
  *out = NULL;
  double t0 = ut_now_ms();
  rt_cpu_model *m = model_alloc();
  if (!m) {
    rt_compile_free(c);
    return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  }
  m->c = c;
  c->e = e;
  harp_status st = rt_cpu_build_stage(c);
  if (!st) st = load_so(e, m);
  if (st) {
    rt_cpu_free(m);
    return st;
  }
  m->compile_ms = ut_now_ms() - t0;
  *out = m;
  return HARP_OK;
}

harp_status rt_cpu_load_cached(harp_error *e, tiny_graph *g, const tiny_symtab *syms, const rt_cpu_opts *o,
                               struct fn_function *f, const char *so_name, rt_cpu_model **out) {
  *out = NULL;
  double t0 = ut_now_ms();
  rt_cpu_model *m = model_alloc();
  rt_compile *c = ut_xcalloc(1, sizeof *c);
  if (!m || !c) {
    free(m), free(c), fn_free(f); /* m's locks hold nothing yet */
    return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  }
  m->c = c;
  rt_knobs k;
  rt_compile_opts co = compile_opts(o, &k);
  *c = (rt_compile){.target = &rt_target_cpu, .knobs = k, .opts = co, .g = g, .syms = syms, .f = f, .e = e, .cache_hit = true};
  c->opts.knobs = &c->knobs;
  char *dir = rt_cc_cache_dir(&(rt_cc_opts){.cache_dir = c->knobs.cache_dir});
  size_t n = dir ? strlen(dir) + strlen(so_name) + 2 : 0;
  harp_status st = dir && (c->so_path = ut_xmalloc(n)) ? HARP_OK : ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  if (!st) snprintf(c->so_path, n, "%s/%s", dir, so_name);
  free(dir);
  if (!st && !rt_cache_verify(c->so_path)) st = ut_fail_at(e, HARP_E_IO, c->so_path, 0, 0, "the cached object is gone or damaged");
  if (!st) st = load_so(e, m);
  if (!st && !m->run_syms) st = ut_fail(e, HARP_E_INTERNAL, NULL, "the cached object is not a ShapeSet object");
  if (st) {
    rt_cpu_free(m);
    return st;
  }
  c->ran[RT_STAGE_BUILD] = true;
  m->compile_ms = ut_now_ms() - t0;
  *out = m;
  return HARP_OK;
}

harp_status rt_cpu_run_bound(harp_error *e, rt_cpu_model *m, const tiny_graph *gb, const long long *syms,
                             const ut_tensor *inputs, int ninputs, ut_tensor *outputs) {
  return run_once(e, m, gb, syms, inputs, NULL, ninputs, outputs);
}

harp_status rt_cpu_compile_variant(harp_error *e, const rt_cpu_model *base, const rt_cpu_opts *o, rt_cpu_model **out) {
  return compile_and_load(e, base, NULL, NULL, o, out);
}

/* One run on a fresh instance.  gb: the shapes of this run (a ShapeSet
 * object's binding, syms its symbols' values), else those compiled for. */
static harp_status run_once(harp_error *e, rt_cpu_model *m, const tiny_graph *gb, const long long *syms,
                            const ut_tensor *inputs, ut_tensor *taken, int ninputs, ut_tensor *outputs) {
  const fn_function *f = m->c->f;
  const tiny_graph *g = gb ? gb : m->c->g;
  if (gb && gb->n != m->c->g->n) return ut_fail(e, HARP_E_INTERNAL, NULL, "not the object's graph");
  /* an object without symbols (a ShapeSet whose every box is one point, LO == HI) has that one binding */
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
    size_t want = gb ? (size_t)tiny_shape_numel(&n->shape) * tiny_dtype_size(n->dtype) : b->size;
    bool ok = t->dtype == n->dtype && t->rank == n->shape.rank && t->nbytes == want;
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
    int rc = gb && m->run_syms ? m->run_syms(inst, syms, in, outp) : m->run(inst, in, outp);
    if (rc >= 100 && rc - 100 < f->nkernels)
      st = ut_fail(e, HARP_E_INVALID_ARG, f->kernels[rc - 100].name, "kernel %s stopped: an index is out of range",
                   f->kernels[rc - 100].name);
    else if (rc == 2 && gb) /* a ShapeSet object's arena could not grow to this binding's */
      st = ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory: the arena of this binding");
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

bool rt_cpu_ready(harp_error *e, rt_cpu_model *m) {
  pthread_mutex_lock(&m->mu);
  if (m->building && __atomic_load_n(&m->built, __ATOMIC_ACQUIRE)) join_build_locked(e, m);
  bool ready = m->dl != NULL;
  pthread_mutex_unlock(&m->mu);
  return ready;
}

harp_status rt_cpu_run_tier0(harp_error *e, rt_cpu_model *m, const ut_tensor *inputs, int ninputs, ut_tensor *outputs) {
  return tier0_locked(e, m, inputs, ninputs, outputs, NULL);
}

/* One run: the object when it is loaded (or its build just finished),
 * else tier 0. */
static harp_status run_any(harp_error *e, rt_cpu_model *m, const ut_tensor *inputs, ut_tensor *taken, int ninputs,
                           ut_tensor *outputs) {
  harp_error be = {0};
  bool ready = rt_cpu_ready(&be, m);
  if (be.code) {
    *e = be;
    return e->code;
  }
  m->last_tier0 = !ready;
  if (m->dl) return run_once(e, m, NULL, NULL, inputs, taken, ninputs, outputs);
  harp_status st = tier0_locked(e, m, inputs, ninputs, outputs, &m->t0);
  if (st && st != HARP_E_INPUT_MISMATCH && st != HARP_E_NO_MEMORY && m->building) {
    /* tier 0 could not run it (a case its kernels or the interpreter refuse): the object can */
    harp_error_clear(e);
    if (join_build(e, m)) return e->code;
    m->last_tier0 = false;
    return run_once(e, m, NULL, NULL, inputs, taken, ninputs, outputs);
  }
  return st;
}

harp_status rt_cpu_run(harp_error *e, rt_cpu_model *m, const ut_tensor *inputs, int ninputs, ut_tensor *outputs) {
  return run_any(e, m, inputs, NULL, ninputs, outputs);
}

harp_status rt_cpu_run_taking_weights(harp_error *e, rt_cpu_model *m, ut_tensor *inputs, int ninputs, ut_tensor *outputs) {
  return run_any(e, m, inputs, inputs, ninputs, outputs);
}

bool rt_cpu_tier0_last(const rt_cpu_model *m, int *fast, int *interp, double *fast_ms, double *interp_ms) {
  *fast = m->t0.fast, *interp = m->t0.interp, *fast_ms = m->t0.fast_ms, *interp_ms = m->t0.interp_ms;
  return m->last_tier0;
}
double rt_cpu_tier0_wait_ms(const rt_cpu_model *m) { return m->t0.wait_ms; }

rt_cpu_hold rt_cpu_builder_hold(const rt_cpu_model *m, double *ms) {
  *ms = m->hold_ms;
  return m->hold_by;
}

harp_status rt_cpu_wait_build(harp_error *e, rt_cpu_model *m, double *build_ms) {
  bool was = m->building;
  harp_status st = join_build(e, m);
  *build_ms = was ? m->build_ms : -1;
  return st;
}

/* While the object builds on its thread (knob tier0) its fields are the
 * thread's: the source only when kept, no cache hit (it builds because
 * there was none), no warning yet (harp run prints it after the wait). */
const char *rt_cpu_source(const rt_cpu_model *m) { return m->building && !m->c->opts.keep_source ? NULL : m->c->source; }
bool rt_cpu_cache_hit(const rt_cpu_model *m) { return !m->building && m->c->cache_hit; }
bool rt_cpu_code_in_background(const rt_cpu_model *m) { return m->code_on_thread; }
const char *rt_cpu_warning(const rt_cpu_model *m) {
  if (m->building) { /* a build that finished is joined here (never waited for) */
    harp_error e = {0};
    rt_cpu_ready(&e, (rt_cpu_model *)m);
    harp_error_clear(&e);
  }
  return !m->building && m->c->cc_warning[0] ? m->c->cc_warning : NULL;
}
double rt_cpu_compile_ms(const rt_cpu_model *m) { return m->compile_ms; }
/* While the builder forms the object's regions, tier 0's Function: the
 * same arguments, weights' layout and results (fn_buffers: graph order),
 * other kernels; also when that failed. */
const struct fn_function *rt_cpu_function(const rt_cpu_model *m) {
  return (m->exact_on_thread && m->building) || !m->c->f ? m->t0f : m->c->f;
}

/* The object's Function (its kernels): the builder joined when it forms it. */
static const fn_function *object_function(const rt_cpu_model *m) {
  if (m->exact_on_thread && m->building) {
    harp_error e = {0};
    join_build(&e, (rt_cpu_model *)m); /* its error stays the model's warning */
    harp_error_clear(&e);
  }
  return m->c->f;
}
const struct rt_compile *rt_cpu_stages(const rt_cpu_model *m) { return m->c; }

/* The object for an instance: the background build waited for, or with
 * tier0=force (which builds none) built now. */
static void object_for_instance(rt_cpu_model *m) {
  harp_error e = {0};
  join_build(&e, m);
  pthread_mutex_lock(&m->mu);
  if (!m->dl && m->tier0 == RT_TIER0_FORCE && m->c->source) {
    m->c->e = &e;
    if (!rt_cpu_build_stage(m->c)) load_so(&e, m);
  }
  pthread_mutex_unlock(&m->mu);
  harp_error_clear(&e);
}

void *rt_cpu_instance_new(const rt_cpu_model *m, const void *params, size_t nbytes) {
  return rt_cpu_instance_new_threads(m, params, nbytes, 0);
}

void *rt_cpu_instance_new_threads(const rt_cpu_model *m, const void *params, size_t nbytes, int nthreads) {
  object_for_instance((rt_cpu_model *)m); /* instances are the object's */
  if (!m->init) return NULL;
  return m->init_threads ? m->init_threads(params, nbytes, nthreads) : m->init(params, nbytes);
}
int rt_cpu_instance_run(const rt_cpu_model *m, void *inst, const void *const *inputs, void *const *outputs) {
  return m->run(inst, inputs, outputs);
}
int rt_cpu_instance_run_syms(const rt_cpu_model *m, void *inst, const long long *syms, const void *const *inputs,
                             void *const *outputs) {
  return m->run_syms ? m->run_syms(inst, syms, inputs, outputs) : m->run(inst, inputs, outputs); /* one binding: LO == HI */
}
void rt_cpu_instance_free(const rt_cpu_model *m, void *inst) {
  if (inst) m->free_(inst);
}
int rt_cpu_instance_run_kernel(const rt_cpu_model *m, void *inst, int k, const void *const *inputs,
                               void *const *outputs) {
  return m->run_kernel ? m->run_kernel(inst, k, inputs, outputs) : -1;
}
int rt_cpu_instance_run_kernel_syms(const rt_cpu_model *m, void *inst, const long long *syms, int k,
                                    const void *const *inputs, void *const *outputs) {
  return m->run_kernel_syms ? m->run_kernel_syms(inst, syms, k, inputs, outputs) : -1;
}
int rt_cpu_kernel_of(const rt_cpu_model *m, const char *region) {
  const fn_function *f = object_function(m);
  for (int k = 0; f && k < f->nkernels; k++)
    if (!strcmp(f->kernels[k].name, region)) return k;
  return -1;
}
/* The plans' notes come with the C: a C the builder thread prints is waited for. */
const struct rt_plans *rt_cpu_plans(const rt_cpu_model *m) {
  if (m->code_on_thread && m->building) {
    harp_error e = {0};
    join_build(&e, (rt_cpu_model *)m); /* its error stays the model's warning */
    harp_error_clear(&e);
  }
  return &m->c->plans;
}
const char *rt_cpu_error_kernel(const rt_cpu_model *m, int rc) {
  const fn_function *f = object_function(m);
  return f && rc >= 100 && rc - 100 < f->nkernels ? f->kernels[rc - 100].name : NULL;
}
