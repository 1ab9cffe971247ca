/* fake_testutil.h — what the tests over the fake libcuda (tests/fake_cuda)
 * share: loading the fake through the knob libcuda (S->knobs, read from the
 * environment's HARP_LIBCUDA, which names the fake for the CLI the tests
 * spawn too: its path compiled in as HARP_FAKE_CUDA, or the environment
 * variable of that name), its counters,
 * a private NVRTC cache, models with zero inputs, builds and runs through
 * harp/gpu.h, and "nothing is still held" checks. */
#ifndef HARP_FAKE_TESTUTIL_H
#define HARP_FAKE_TESTUTIL_H

#include <dlfcn.h>
#include <jansson.h>

#include "backend/cuda/cuda_rt.h"
#include "fake_cuda.h"
#include "harp/frontend.h"
#include "harp/gpu.h"
#include "harp/knobs.h"
#include "testutil.h"
#include "util/util.h"

typedef struct model {
  hg_program *p;
  char *json;
  tiny_graph *g;
  tiny_symtab syms;
  ut_tensor in[32];
  int nin;
} model;

typedef struct state {
  void *lib;
  const char *path;
  void (*stats)(long *, int);
  void (*reset)(void);
  char cache[64];
  bool nvrtc;
  rt_knobs knobs; /* libcuda: the fake; nvrtc: $HARP_NVRTC */
} state;

static state *S;

static inline long counter(int i) {
  long v[FAKE_CUDA_NSTATS];
  S->stats(v, FAKE_CUDA_NSTATS);
  return v[i];
}

static inline int setup(void **vs) {
  static state st;
  S = &st;
  *vs = S;
  st.path = getenv("HARP_FAKE_CUDA") ? getenv("HARP_FAKE_CUDA") : HARP_FAKE_CUDA;
  setenv("HARP_LIBCUDA", st.path, 1);
  unsetenv("HARP_FAKE_CUDA_FAIL");
  unsetenv("HARP_FAKE_CUDA_CC");
  /* the runtime's dlopen of the same path gets this same copy of the fake */
  st.lib = dlopen(st.path, RTLD_NOW);
  if (!st.lib) return fprintf(stderr, "cannot load the fake libcuda: %s\n", dlerror()), -1;
  *(void **)&st.stats = dlsym(st.lib, "harp_fake_cuda_stats");
  *(void **)&st.reset = dlsym(st.lib, "harp_fake_cuda_reset");
  if (!st.stats || !st.reset) return -1;
  snprintf(st.cache, sizeof st.cache, "/tmp/harp_fake_cuda_XXXXXX");
  if (!mkdtemp(st.cache)) return -1;
  harp_error e = {0};
  rt_knobs_init(&st.knobs);
  if (rt_knobs_from_env(&e, &st.knobs)) return fprintf(stderr, "%s\n", e.msg), -1;
  cuda_rt *rt = NULL;
  cuda_rt_opts o = {.no_driver = true, .nvrtc_path = st.knobs.nvrtc[0] ? st.knobs.nvrtc : NULL}; /* as rt_gpu_load opens it */
  if (cuda_rt_open(&e, &o, &rt)) return -1;
  st.nvrtc = cuda_rt_status_of(rt)->nvrtc;
  if (!st.nvrtc)
    fprintf(stderr, "NVRTC not available (%s): model tests skipped\n", cuda_rt_status_of(rt)->why_no_nvrtc);
  cuda_rt_close(rt);
  return 0;
}

static inline int teardown(void **vs) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", S->cache);
  if (system(cmd)) fprintf(stderr, "could not remove %s\n", S->cache);
  return 0; /* the fake stays loaded, as cuda_rt leaves libcuda loaded */
}

static inline char *src_path(const char *rel) {
  static char path[1024];
  const char *src = getenv("HARP_SOURCE_DIR");
  snprintf(path, sizeof path, "%s/%s", src ? src : HARP_SOURCE_DIR, rel);
  return path;
}

/* A .harp or .json model, prepared, with zero-filled inputs. */
static inline void load(model *m, const char *rel, const char *const *syms) {
  harp_error e = {0};
  memset(m, 0, sizeof *m);
  tiny_symtab_init(&m->syms);
  if (strstr(rel, ".harp")) {
    assert_ok(&e, hg_harp_load_file(&e, src_path(rel), &m->p));
    assert_ok(&e, hg_lower(&e, m->p, &m->g, NULL));
    assert_ok(&e, tiny_prepare(&e, m->g, &m->syms, false));
  } else {
    size_t len;
    harp_status st;
    assert_ok(&e, ut_read_file(&e, src_path(rel), (size_t)1 << 24, &m->json, &len));
    tiny_symtab_free(&m->syms);
    m->g = tu_prepare(&e, m->json, syms, &m->syms, &st);
    assert_ok(&e, st);
  }
  int *ins = NULL;
  m->nin = tiny_inputs(m->g, &ins);
  assert_true(m->nin <= 32);
  for (int i = 0; i < m->nin; i++) {
    const tiny_node *n = &m->g->nodes[ins[i]];
    int64_t shape[TINY_MAX_RANK];
    for (int d = 0; d < n->shape.rank; d++) shape[d] = n->shape.d[d].n;
    assert_ok(&e, ut_tensor_alloc(&e, &m->in[i], n->dtype, n->shape.rank, shape));
  }
  free(ins);
}

static inline void unload(model *m) {
  for (int i = 0; i < m->nin; i++) ut_tensor_free(&m->in[i]);
  tiny_graph_free(m->g);
  tiny_symtab_free(&m->syms);
  hg_program_free(m->p);
  free(m->json);
}

static inline rt_gpu_model *build(model *m, const char *target, bool graphs, int *nlaunch) {
  harp_error e = {0};
  rt_gpu_model *gm = NULL;
  rt_gpu_opts o = {.knobs = &S->knobs, .target = target, .cache_dir = S->cache, .graphs = graphs};
  assert_ok(&e, rt_gpu_build(&e, m->g, &m->syms, &o, &gm));
  int t, s, g;
  rt_gpu_counts(gm, &t, &s, &g);
  *nlaunch = t + s + g;
  assert_true(*nlaunch > 0);
  return gm;
}

/* One run; the outputs have the model's shapes (their values are not computed). */
static inline void run(model *m, rt_gpu_model *gm) {
  harp_error e = {0};
  ut_tensor out[8];
  assert_true(m->g->noutputs <= 8);
  assert_ok(&e, rt_gpu_run(&e, gm, m->in, m->nin, out));
  for (int k = 0; k < m->g->noutputs; k++) {
    const tiny_node *n = &m->g->nodes[m->g->outputs[k]];
    assert_int_equal(out[k].dtype, n->dtype);
    assert_int_equal(out[k].rank, n->shape.rank);
    for (int d = 0; d < n->shape.rank; d++) assert_int_equal(out[k].shape[d], n->shape.d[d].n);
    assert_non_null(out[k].data);
    ut_tensor_free(&out[k]);
  }
}

/* The live counters (allocations, modules, graphs, streams, ...) at one time. */
typedef struct snap {
  long v[FAKE_CUDA_NSTATS];
} snap;

static inline snap snapshot(void) {
  snap s;
  S->stats(s.v, FAKE_CUDA_NSTATS);
  return s;
}
static inline long delta(const snap *s0, int i) { return counter(i) - s0->v[i]; }

/* Nothing the runtime took from the driver since s0 is still held, and no
 * synchronous call was made during a capture. */
static inline void assert_released(const snap *s0) {
  snap s = snapshot();
  for (int i = 0; i < FAKE_CUDA_NSTATS; i++)
    if (fake_cuda_stat_live[i] && s.v[i] != s0->v[i])
      fail_msg("%s: %ld, was %ld", fake_cuda_stat_names[i], s.v[i], s0->v[i]);
  assert_int_equal(s.v[FAKE_CUDA_CAPTURE_VIOLATIONS], 0);
}

#define NEED_NVRTC()         \
  do {                       \
    if (!S->nvrtc) skip();   \
  } while (0)

#endif
