/* test_cuda_session.c — GPU sessions (rt_gpu_session_*, one model over many
 * shape bindings) on the fake libcuda: one executable CUDA Graph per
 * ShapeSet, instantiated for the cluster's first binding, updated in place
 * for its other bindings, replayed untouched for the same binding; a refused
 * update falls back to a new instantiation; least-recently-used models are
 * evicted, and evicting the model a graph points into drops the graph; the
 * error paths; `harp bench --bind`.  The fake counts what the driver was
 * asked to do, so every session counter is checked against the driver's
 * own.  Needs NVRTC (the models are really compiled); skips without it. */
#include <math.h>
#include <sys/wait.h>

#include "fake_testutil.h"
#include "harp/tune.h"

/* mlp.harp: two GEMMs and a bias/ReLU; B is the batch. */
static const char *const mlp_model = "examples/mlp.harp";
/* one elementwise kernel: quick to compile, for the many-binding tests */
static const char relu_src[] = "graph<B=4> main(x: f32[B, 8]) -> (y: f32[B, 8]) {\n"
                               "    y = relu(x)\n"
                               "    return y\n"
                               "}\n";
/* a batched GEMM over B: the template reads the batch at run time (grid.z) */
static const char bmm_src[] = "graph<B=4> main(x: f32[B, 16, 16], w: f32[B, 16, 16]) -> (y: f32[B, 16, 16]) {\n"
                              "    y = x @ w\n"
                              "    return y\n"
                              "}\n";
/* a GEMM of N = B with a residual in its epilogue: the Epilogue reads the
 * residual's row stride (B) at run time too */
static const char gemm_res_src[] = "graph<B=4> main(x: f32[B, 16], w: f32[16, B], r: f32[B, B]) -> (y: f32[B, B]) {\n"
                                   "    y = x @ w + r\n"
                                   "    return y\n"
                                   "}\n";
/* a row softmax whose rows and row length are B: the row kernel reads both
 * at run time */
static const char softmax_b_src[] = "graph<B=4> main(x: f32[B, B]) -> (y: f32[B, B]) {\n"
                                    "    y = softmax(x)\n"
                                    "    return y\n"
                                    "}\n";
/* a GATHER over B rows: its kernel reads its count at run time */
static const char gather_b_src[] = "graph<B=4> main(x: f32[B, 8], i: i32[B, 8]) -> (y: f32[B, 8]) {\n"
                                   "    y = gather(x, i, 0)\n"
                                   "    return y\n"
                                   "}\n";
/* a conv over B images of B channels: the implicit-GEMM template prints its
 * channels, so the box's corners differ */
static const char conv_c_src[] = "graph<B=4> main(x: f32[B, B, 4, 4], w: f32[16, B, 3, 3]) -> (y: f32[B, 16, 4, 4]) {\n"
                                 "    y = conv2d(x, w, pad=[1, 1])\n"
                                 "    return y\n"
                                 "}\n";

/* an fp16 GEMM over M = B rows: on sm90 the wgmma template, whose TMA maps
 * hold B (A's and C's rows and their packed batch strides) */
static const char wgmma_b_src[] = "graph<B=4> main(x: f16[B, 64], w: f16[64, 64]) -> (y: f16[B, 64]) {\n"
                                  "    y = x @ w\n"
                                  "    return y\n"
                                  "}\n";
/* an fp16 GEMM whose B and C row strides are B elements (2B bytes: a TMA
 * stride 16-byte aligned at B = 64, 48, 40, not at 37 or 33): on sm90 a
 * pair, the wgmma kernel and the SM80 one */
static const char wgmma_pair_src[] = "graph<B=4> main(x: f16[B, 64], w: f16[64, B]) -> (y: f16[B, B]) {\n"
                                     "    y = x @ w\n"
                                     "    return y\n"
                                     "}\n";
/* the module target of the sessions open_session_with opens */
static const char *session_target = "sm80";

typedef struct sess {
  hg_program *p;
  tiny_graph *g; /* unbound */
  rt_gpu_session *s;
} sess;

static void open_session_with(sess *t, const char *rel, const char *text, bool graphs, const rt_knobs *k, bool per_binding) {
  harp_error e = {0};
  memset(t, 0, sizeof *t);
  if (rel) assert_ok(&e, hg_harp_load_file(&e, src_path(rel), &t->p));
  else assert_ok(&e, hg_harp_load_text(&e, text, strlen(text), "tiny.harp", &t->p));
  assert_ok(&e, hg_lower(&e, t->p, &t->g, NULL));
  rt_gpu_opts o = {.knobs = k, .target = session_target, .cache_dir = S->cache, .graphs = graphs, .per_binding = per_binding};
  assert_ok(&e, rt_gpu_session_new(&e, t->g, &o, &t->s));
  /* the session keeps its own copy of the graph */
  tiny_graph_free(t->g);
  t->g = NULL;
}

/* A session that builds each binding on its own (the graphs' update,
 * refusal and eviction tests; test_one_build_per_box: one build per box). */
static void open_session(sess *t, const char *rel, const char *text, bool graphs) {
  open_session_with(t, rel, text, graphs, &S->knobs, true);
}

static void close_session(sess *t) {
  rt_gpu_session_free(t->s);
  hg_program_free(t->p);
}

static void bind(tiny_symtab *b, long B) {
  harp_error e = {0};
  tiny_symtab_init(b);
  assert_ok(&e, tiny_symtab_set(&e, b, "B", B));
}

/* One run at batch B with zero inputs shaped from the bound graph; the
 * output comes back as [B, ...].  Returns the status (outputs freed). */
static harp_status run_at(sess *t, long B, const char *rel, const char *text, harp_error *e) {
  tiny_symtab b;
  bind(&b, B);
  hg_program *p = NULL;
  tiny_graph *g = NULL;
  harp_error e2 = {0};
  if (rel) assert_ok(&e2, hg_harp_load_file(&e2, src_path(rel), &p));
  else assert_ok(&e2, hg_harp_load_text(&e2, text, strlen(text), "tiny.harp", &p));
  assert_ok(&e2, hg_lower(&e2, p, &g, NULL));
  assert_ok(&e2, tiny_prepare(&e2, g, &b, false));
  int *ins = NULL, n = tiny_inputs(g, &ins);
  ut_tensor in[8], out[8];
  assert_true(n <= 8 && g->noutputs <= 8);
  for (int i = 0; i < n; i++) {
    const tiny_node *nd = &g->nodes[ins[i]];
    int64_t shape[TINY_MAX_RANK];
    for (int d = 0; d < nd->shape.rank; d++) shape[d] = nd->shape.d[d].n;
    assert_ok(&e2, ut_tensor_alloc(&e2, &in[i], nd->dtype, nd->shape.rank, shape));
  }
  harp_status st = rt_gpu_session_run(e, t->s, &b, in, n, out);
  if (!st) {
    for (int k = 0; k < g->noutputs; k++) {
      assert_int_equal(out[k].shape[0], B);
      ut_tensor_free(&out[k]);
    }
  }
  for (int i = 0; i < n; i++) ut_tensor_free(&in[i]);
  free(ins);
  tiny_graph_free(g);
  hg_program_free(p);
  tiny_symtab_free(&b);
  return st;
}

static rt_gpu_session_stats stats(sess *t) {
  rt_gpu_session_stats st;
  rt_gpu_session_stats_get(t->s, &st);
  return st;
}

/* The session's counters agree with what the driver saw since s0. */
static void assert_driver_agrees(sess *t, const snap *s0) {
  rt_gpu_session_stats st = stats(t);
  assert_int_equal(delta(s0, FAKE_CUDA_GRAPHS_INSTANTIATED), st.instantiations);
  assert_int_equal(delta(s0, FAKE_CUDA_EXEC_UPDATES), st.updates);
  assert_int_equal(delta(s0, FAKE_CUDA_GRAPH_LAUNCHES), st.replays);
  assert_int_equal(delta(s0, FAKE_CUDA_CAPTURES_ENDED), st.captures);
  assert_int_equal(delta(s0, FAKE_CUDA_DIRECT_LAUNCHES), 0);
}

static void expect(sess *t, int clusters, int builds, int captures, int inst, int updates, int replays) {
  rt_gpu_session_stats st = stats(t);
  assert_int_equal(st.clusters, clusters);
  assert_int_equal(st.builds, builds);
  assert_int_equal(st.captures, captures);
  assert_int_equal(st.instantiations, inst);
  assert_int_equal(st.updates, updates);
  assert_int_equal(st.replays, replays);
}

/* B=48 and B=64 share ShapeSet B:64, B=100 is B:128. */
static void test_one_graph_per_shapeset(void **vs) {
  NEED_NVRTC();
  S->reset();
  snap s0 = snapshot();
  sess t;
  harp_error e = {0};
  open_session(&t, mlp_model, NULL, true);
  assert_ok(&e, run_at(&t, 48, mlp_model, NULL, &e));
  expect(&t, 1, 1, 1, 1, 0, 1);
  assert_ok(&e, run_at(&t, 48, mlp_model, NULL, &e)); /* the same binding: replayed as is */
  expect(&t, 1, 1, 1, 1, 0, 2);
  assert_ok(&e, run_at(&t, 64, mlp_model, NULL, &e)); /* same cluster: updated in place */
  expect(&t, 1, 2, 2, 1, 1, 3);
  assert_int_equal(delta(&s0, FAKE_CUDA_LIVE_EXECS), 1);
  assert_ok(&e, run_at(&t, 100, mlp_model, NULL, &e)); /* another cluster: its own graph */
  expect(&t, 2, 3, 3, 2, 1, 4);
  assert_int_equal(delta(&s0, FAKE_CUDA_LIVE_EXECS), 2);
  assert_ok(&e, run_at(&t, 48, mlp_model, NULL, &e)); /* back to B=48: an update, no build, no capture */
  expect(&t, 2, 3, 3, 2, 2, 5);
  assert_int_equal(delta(&s0, FAKE_CUDA_MODULES_LOADED), 3);
  /* the launches alone, for a binding that ran; B=100's graph is current */
  tiny_symtab b;
  bind(&b, 100);
  assert_ok(&e, rt_gpu_session_launch(&e, t.s, &b, true));
  expect(&t, 2, 3, 3, 2, 2, 6);
  assert_non_null(rt_gpu_session_model(t.s, &b));
  tiny_symtab_free(&b);
  assert_driver_agrees(&t, &s0);
  close_session(&t);
  assert_released(&s0);
}

/* up2_add.harp (G = 2 H: tests/py/test_shapeset_ties.py) through a session:
 * bindings of one class box, G following H, share one build; a binding
 * whose G breaks the tie is InputMismatch naming it, before any build or
 * launch (the session's model has G := 2*H: gpu_box_ties). */
static harp_status run_tied(rt_gpu_session *s, long H, long G, harp_error *e) {
  static const char *names[5] = {"N", "H", "W", "G", "V"};
  long vals[5] = {1, H, 8, G, 16};
  tiny_symtab b;
  tiny_symtab_init(&b);
  harp_error e2 = {0};
  for (int i = 0; i < 5; i++) assert_ok(&e2, tiny_symtab_set(&e2, &b, names[i], vals[i]));
  ut_tensor in[2], out[1];
  int64_t xs[4] = {1, 8, H, 8}, zs[4] = {1, 8, G, 16};
  assert_ok(&e2, ut_tensor_alloc(&e2, &in[0], TINY_FP32, 4, xs));
  assert_ok(&e2, ut_tensor_alloc(&e2, &in[1], TINY_FP32, 4, zs));
  harp_status st = rt_gpu_session_run(e, s, &b, in, 2, out);
  if (!st) ut_tensor_free(&out[0]);
  ut_tensor_free(&in[0]);
  ut_tensor_free(&in[1]);
  tiny_symtab_free(&b);
  return st;
}

static void test_tied_box(void **vs) {
  (void)vs;
  NEED_NVRTC();
  S->reset();
  snap s0 = snapshot();
  harp_error e = {0};
  hg_program *p = NULL;
  tiny_graph *g = NULL;
  rt_gpu_session *s = NULL;
  assert_ok(&e, hg_harp_load_file(&e, src_path("tests/models/up2_add.harp"), &p));
  tiny_symtab dflt;
  tiny_symtab_init(&dflt);
  assert_ok(&e, hg_lower_derive(&e, p, NULL, NULL, &g, &dflt));
  tiny_symtab_free(&dflt);
  rt_gpu_opts o = {.knobs = &S->knobs, .target = session_target, .cache_dir = S->cache};
  assert_ok(&e, rt_gpu_session_new(&e, g, &o, &s));
  tiny_graph_free(g);
  assert_ok(&e, run_tied(s, 8, 16, &e));
  assert_ok(&e, run_tied(s, 5, 10, &e));
  assert_ok(&e, run_tied(s, 6, 12, &e));
  rt_gpu_session_stats st;
  rt_gpu_session_stats_get(s, &st);
  assert_int_equal(st.clusters, 1);
  assert_int_equal(st.builds, 1);
  assert_int_equal(st.box_builds, 1);
  assert_int_equal(st.box_fallbacks, 0);
  unsigned long long launches = delta(&s0, FAKE_CUDA_DIRECT_LAUNCHES);
  assert_int_equal(run_tied(s, 6, 13, &e), HARP_E_INPUT_MISMATCH);
  assert_non_null(strstr(e.msg, "shape symbol G is 13"));
  assert_non_null(strstr(e.msg, "2*H gives 12"));
  assert_int_equal(delta(&s0, FAKE_CUDA_DIRECT_LAUNCHES), launches); /* nothing ran */
  rt_gpu_session_stats_get(s, &st);
  assert_int_equal(st.builds, 1);
  rt_gpu_session_free(s);
  hg_program_free(p);
  assert_released(&s0);
}

/* The fake's launch log on (1: emptied; a graph's launches keep the
 * arguments they were captured with while it is on) or off (0), through the
 * same copy of the fake the runtime loaded. */
static void record(int on) {
  void (*f)(int);
  *(void **)&f = dlsym(S->lib, "harp_fake_cuda_record");
  assert_non_null(f);
  f(on);
}

/* The last argument of the first launch the fake logged during a run at B
 * (record on), and its grid.x into *grid_x. */
static unsigned long long last_arg_at(sess *t, long B, unsigned *grid_x) {
  harp_error e = {0};
  int (*launch)(int, const void **, unsigned long long *, int);
  int (*grid)(int, unsigned *);
  *(void **)&launch = dlsym(S->lib, "harp_fake_cuda_launch");
  *(void **)&grid = dlsym(S->lib, "harp_fake_cuda_launch_grid");
  assert_true(launch && grid);
  record(1);
  assert_ok(&e, run_at(t, B, NULL, relu_src, &e));
  const void *where;
  unsigned long long args[16];
  unsigned g[3];
  int n = launch(0, &where, args, 16);
  assert_true(n >= 1);
  assert_int_equal(grid(0, g), 0);
  *grid_x = g[0];
  return args[n - 1];
}

/* The arguments of the first launch logged during a run at B of src
 * (record on) into args[max]: their count. */
static int first_launch_args(sess *t, long B, const char *src, unsigned long long *args, int max) {
  harp_error e = {0};
  int (*launch)(int, const void **, unsigned long long *, int);
  *(void **)&launch = dlsym(S->lib, "harp_fake_cuda_launch");
  assert_non_null(launch);
  record(1);
  assert_ok(&e, run_at(t, B, NULL, src, &e));
  const void *where;
  return launch(0, &where, args, max);
}

/* An sm90 session of text (the fake as a 9.0 device, a Hopper), with graphs. */
static void open_sm90_session(sess *t, const char *text) {
  setenv("HARP_FAKE_CUDA_CC", "9.0", 1);
  session_target = "sm90";
  open_session_with(t, NULL, text, true, &S->knobs, false);
  session_target = "sm80";
}

/* After 4 runs of open_sm90_session's session t at bindings of one box:
 * one build, one module, one graph instantiated and updated 3 times; the
 * driver agrees, the session closed, everything released (s0: before). */
static void close_sm90_session(sess *t, snap *s0) {
  record(0);
  expect(t, 1, 1, 4, 1, 3, 4);
  assert_int_equal(stats(t).box_builds, 1);
  assert_int_equal(stats(t).box_fallbacks, 0);
  assert_int_equal(delta(s0, FAKE_CUDA_MODULES_LOADED), 1);
  assert_driver_agrees(t, s0);
  close_session(t);
  unsetenv("HARP_FAKE_CUDA_CC");
  assert_released(s0);
}

/* The SM90 wgmma GEMM of an sm90 session over a ShapeSet box reads its
 * sizes at run time: one build, one module for B = 48, 64, 40, 33; the
 * runtime encodes its TMA maps at each binding before the launch (the
 * graph updated in place carries them): A's and C's rows are B, their
 * packed batch strides B rows of 128 bytes; the size argument is B. */
static void test_wgmma_box(void **vs) {
  NEED_NVRTC();
  S->reset();
  snap s0 = snapshot();
  sess t;
  open_sm90_session(&t, wgmma_b_src);
  static const long Bs[4] = {48, 64, 40, 33};
  for (int i = 0; i < 4; i++) {
    unsigned long long args[16];
    int n = first_launch_args(&t, Bs[i], wgmma_b_src, args, 16);
    assert_int_equal(n, 5); /* tmA, tmB, tmC, C, hp_sv0 */
    unsigned long long want = (unsigned long long)Bs[i] | (unsigned long long)(128 * Bs[i] / 16) << 32;
    assert_int_equal(args[0], want); /* A [B][64] fp16 */
    assert_int_equal(args[1], 64ull | 512ull << 32); /* B: constant */
    assert_int_equal(args[2], want); /* C [B][64] fp16 */
    assert_int_equal(args[4], Bs[i]);
  }
  tiny_symtab b48;
  bind(&b48, 48);
  const char *why = NULL;
  assert_true(rt_gpu_session_box(t.s, &b48, &why));
  tiny_symtab_free(&b48);
  close_sm90_session(&t, &s0);
  (void)vs;
}

/* A GEMM whose TMA strides are 16-byte aligned at some bindings only (the
 * weight's and the output's rows of B fp16): one build of the box 33..64
 * (B = 64, 40, 37, 33), a pair of kernels launched at every binding (each
 * returns at once at a binding not its own, the graph's topology the same,
 * updated in place); the runtime encodes the wgmma kernel's maps at the
 * binding where its strides are aligned (64, 40), as generated at the
 * box's corner hi where not (37, 33: the fake, as the driver, refuses a
 * stride not a multiple of 16); both kernels read B. */
static void test_wgmma_pair(void **vs) {
  NEED_NVRTC();
  S->reset();
  snap s0 = snapshot();
  sess t;
  open_sm90_session(&t, wgmma_pair_src);
  int (*launch)(int, const void **, unsigned long long *, int);
  *(void **)&launch = dlsym(S->lib, "harp_fake_cuda_launch");
  assert_non_null(launch);
  static const long Bs[4] = {64, 40, 37, 33};
  for (int i = 0; i < 4; i++) {
    unsigned long long args[16];
    int n = first_launch_args(&t, Bs[i], wgmma_pair_src, args, 16);
    assert_int_equal(n, 5); /* the wgmma kernel: tmA, tmB, tmC, C, hp_sv0 */
    unsigned long long b = (unsigned long long)(Bs[i] % 8 ? 64 : Bs[i]); /* the maps' B */
    assert_int_equal(args[0], b | (128 * b / 16) << 32);         /* A [B][64] */
    assert_int_equal(args[1], 64ull | (64 * 2 * b / 16) << 32);  /* w [64][B] */
    /* y [B][B]: its batch stride packed, at a binding the formula's (its literal 2 rounded up to 16 bytes: 16 B^2),
     * as generated the corner's 2 x 64 x 64 bytes */
    assert_int_equal(args[2], b | (Bs[i] % 8 ? 512 : b * b) << 32);
    assert_int_equal(args[4], Bs[i]);
    const void *where;
    assert_int_equal(launch(1, &where, args, 16), 4); /* the SM80 kernel: A, B, C, hp_sv0 */
    assert_int_equal(args[3], Bs[i]);
    assert_int_equal(launch(2, &where, args, 16), -1);
  }
  close_sm90_session(&t, &s0);
  (void)vs;
}

/* A Winograd conv (the Plan names it) over B images of 32 x 32: the box
 * 3..4 is one build; the input and output transforms (256 and 128 tiles a
 * block, grid.x) and the transformed GEMM (64 tiles a block along grid.y,
 * its M tiles along x, the 16 points along z) are launched over the
 * binding's tiles P = B x 16 x 16, the graph updated in place to them. */
static void test_wino_grids(void **vs) {
  NEED_NVRTC();
  S->reset();
  static const char src[] = "graph<B=4> main(x: f16[B, 8, 32, 32], w: f16[16, 8, 3, 3], b: f16[16]) -> (y: f16[B, 16, 32, 32]) {\n"
                            "    y = conv2d(x, w, bias=b, pad=[1, 1])\n"
                            "    return y\n"
                            "}\n";
  char plan[4200], arg[4300];
  snprintf(plan, sizeof plan, "%s/wino2.plan", S->cache);
  FILE *f = fopen(plan, "w");
  assert_non_null(f);
  fputs("split m 64; split n 64; split k 64; predicate_tail m.i.i n.i.i k.i.i; algo_choice conv winograd_2x2_3x3;\n", f);
  fclose(f);
  snprintf(arg, sizeof arg, "y=%s", plan);
  harp_error e = {0};
  rt_plan_override *ov = NULL;
  char **keep = NULL;
  int nov = 0, nkeep = 0;
  assert_ok(&e, rt_plan_overrides_load(&e, arg, PLAN_ARCH_SM80, &ov, &nov, &keep, &nkeep));
  sess t;
  memset(&t, 0, sizeof t);
  assert_ok(&e, hg_harp_load_text(&e, src, strlen(src), "tiny.harp", &t.p));
  assert_ok(&e, hg_lower(&e, t.p, &t.g, NULL));
  rt_gpu_opts o = {.knobs = &S->knobs, .target = "sm80", .cache_dir = S->cache, .graphs = true, .plan_overrides = ov,
                   .nplan_overrides = nov};
  assert_ok(&e, rt_gpu_session_new(&e, t.g, &o, &t.s));
  tiny_graph_free(t.g);
  t.g = NULL;
  int (*grid)(int, unsigned *);
  *(void **)&grid = dlsym(S->lib, "harp_fake_cuda_launch_grid");
  assert_non_null(grid);
  static const long Bs[3] = {4, 3, 4};
  for (int i = 0; i < 3; i++) {
    record(1);
    assert_ok(&e, run_at(&t, Bs[i], NULL, src, &e));
    unsigned want[3][3] = {{(unsigned)Bs[i], 8, 1}, {1, 4 * (unsigned)Bs[i], 16}, {2 * (unsigned)Bs[i], 16, 1}};
    int w = 0; /* the input transform, the GEMM, the output transform, in launch order */
    unsigned g[3];
    for (int l = 0; grid(l, g) == 0 && w < 3; l++)
      if (!memcmp(g, want[w], sizeof g)) w++;
    assert_int_equal(w, 3);
  }
  record(0);
  assert_int_equal(stats(&t).box_builds, 1);
  assert_int_equal(stats(&t).box_fallbacks, 0);
  assert_int_equal(stats(&t).updates, 2);
  close_session(&t);
  free(ov);
  for (int i = 0; i < nkeep; i++) free(keep[i]);
  free(keep);
  (void)vs;
}

/* One build for a ShapeSet box (gpu_box.c): relu (in a ShapeSet build the
 * loop nest, which reads B at run time), B = 48, 64, 40 (ShapeSet B:64, the
 * box 33..64) share one build (one module, one model), each binding's
 * launches pass its own B (the kernel's last parameter, hp_sv0), and the
 * cluster's graph is updated in place per binding.  A batched GEMM's
 * template reads the batch B at run time: one build too, and so does a GEMM
 * whose residual's row stride is B, and a row softmax whose rows and row
 * length are B, and a GATHER over B rows.  A conv over B channels prints
 * them: the box's corners differ, one build per binding, and the session
 * says which kernel. */
static void test_one_build_per_box(void **vs) {
  NEED_NVRTC();
  S->reset();
  snap s0 = snapshot();
  sess t;
  harp_error e = {0};
  open_session_with(&t, NULL, relu_src, true, &S->knobs, false);
  record(1);
  assert_ok(&e, run_at(&t, 48, NULL, relu_src, &e));
  assert_ok(&e, run_at(&t, 64, NULL, relu_src, &e));
  assert_ok(&e, run_at(&t, 40, NULL, relu_src, &e));
  expect(&t, 1, 1, 3, 1, 2, 3);
  assert_int_equal(stats(&t).box_builds, 1);
  assert_int_equal(stats(&t).box_fallbacks, 0);
  assert_int_equal(delta(&s0, FAKE_CUDA_MODULES_LOADED), 1);
  tiny_symtab b48, b64;
  bind(&b48, 48), bind(&b64, 64);
  const char *why = NULL;
  assert_true(rt_gpu_session_box(t.s, &b48, &why));
  assert_string_equal(why, "");
  assert_ptr_equal(rt_gpu_session_model(t.s, &b48), rt_gpu_session_model(t.s, &b64));
  /* relu over [B, 8]: 8 B points, 128 a block, at most the box's 4 blocks */
  unsigned gx = 0;
  assert_int_equal(last_arg_at(&t, 40, &gx), 40); /* replayed as is */
  assert_int_equal(gx, 3);
  assert_int_equal(last_arg_at(&t, 64, &gx), 64); /* updated in place to B=64's sizes and grid */
  assert_int_equal(gx, 4);
  assert_int_equal(last_arg_at(&t, 33, &gx), 33); /* a new binding of the box: captured, no build */
  assert_int_equal(gx, 3);
  record(0);
  expect(&t, 1, 1, 4, 1, 4, 6);
  assert_driver_agrees(&t, &s0);
  close_session(&t);
  open_session_with(&t, NULL, bmm_src, true, &S->knobs, false);
  assert_ok(&e, run_at(&t, 48, NULL, bmm_src, &e));
  assert_ok(&e, run_at(&t, 64, NULL, bmm_src, &e));
  expect(&t, 1, 1, 2, 1, 1, 2);
  assert_int_equal(stats(&t).box_fallbacks, 0);
  assert_true(rt_gpu_session_box(t.s, &b48, &why));
  close_session(&t);
  open_session_with(&t, NULL, gemm_res_src, true, &S->knobs, false);
  assert_ok(&e, run_at(&t, 48, NULL, gemm_res_src, &e));
  assert_ok(&e, run_at(&t, 64, NULL, gemm_res_src, &e));
  expect(&t, 1, 1, 2, 1, 1, 2);
  assert_int_equal(stats(&t).box_fallbacks, 0);
  assert_true(rt_gpu_session_box(t.s, &b48, &why));
  close_session(&t);
  open_session_with(&t, NULL, softmax_b_src, true, &S->knobs, false);
  assert_ok(&e, run_at(&t, 48, NULL, softmax_b_src, &e));
  assert_ok(&e, run_at(&t, 64, NULL, softmax_b_src, &e));
  expect(&t, 1, 1, 2, 1, 1, 2);
  assert_int_equal(stats(&t).box_fallbacks, 0);
  assert_true(rt_gpu_session_box(t.s, &b48, &why));
  close_session(&t);
  open_session_with(&t, NULL, gather_b_src, true, &S->knobs, false);
  assert_ok(&e, run_at(&t, 48, NULL, gather_b_src, &e));
  assert_ok(&e, run_at(&t, 64, NULL, gather_b_src, &e));
  expect(&t, 1, 1, 2, 1, 1, 2);
  assert_int_equal(stats(&t).box_fallbacks, 0);
  assert_true(rt_gpu_session_box(t.s, &b48, &why));
  close_session(&t);
  open_session_with(&t, NULL, conv_c_src, true, &S->knobs, false);
  assert_ok(&e, run_at(&t, 48, NULL, conv_c_src, &e));
  assert_ok(&e, run_at(&t, 64, NULL, conv_c_src, &e));
  expect(&t, 1, 2, 2, 1, 1, 2);
  assert_int_equal(stats(&t).box_fallbacks, 1);
  assert_false(rt_gpu_session_box(t.s, &b48, &why));
  assert_non_null(strstr(why, "depends on the binding"));
  close_session(&t);
  tiny_symtab_free(&b48);
  tiny_symtab_free(&b64);
  assert_released(&s0);
}

/* Without graphs a session launches directly and captures nothing. */
static void test_no_graphs(void **vs) {
  NEED_NVRTC();
  S->reset();
  snap s0 = snapshot();
  sess t;
  harp_error e = {0};
  open_session(&t, NULL, relu_src, false);
  assert_ok(&e, run_at(&t, 3, NULL, relu_src, &e));
  assert_ok(&e, run_at(&t, 4, NULL, relu_src, &e));
  expect(&t, 1, 2, 0, 0, 0, 0);
  assert_true(delta(&s0, FAKE_CUDA_DIRECT_LAUNCHES) >= 2);
  assert_int_equal(delta(&s0, FAKE_CUDA_CAPTURES_BEGUN), 0);
  close_session(&t);
  assert_released(&s0);
}

/* The driver refuses the update: the cluster's graph is instantiated anew,
 * the old one destroyed. */
static void test_update_refused(void **vs) {
  NEED_NVRTC();
  S->reset();
  snap s0 = snapshot();
  sess t;
  harp_error e = {0};
  open_session(&t, NULL, relu_src, true);
  assert_ok(&e, run_at(&t, 5, NULL, relu_src, &e));
  setenv("HARP_FAKE_CUDA_FAIL", "cuGraphExecUpdate_v2", 1);
  assert_ok(&e, run_at(&t, 7, NULL, relu_src, &e));
  unsetenv("HARP_FAKE_CUDA_FAIL");
  expect(&t, 1, 2, 2, 2, 0, 2);
  assert_int_equal(delta(&s0, FAKE_CUDA_FAILED_UPDATES), 1);
  assert_int_equal(delta(&s0, FAKE_CUDA_LIVE_EXECS), 1);
  assert_ok(&e, run_at(&t, 5, NULL, relu_src, &e)); /* updates work again */
  expect(&t, 1, 2, 2, 2, 1, 3);
  close_session(&t);
  assert_released(&s0);
}

/* More bindings than the session keeps: the least recently used model goes;
 * when it is the one its cluster's graph points into, the graph goes too. */
static void test_eviction(void **vs) {
  NEED_NVRTC();
  S->reset();
  snap s0 = snapshot();
  sess t;
  harp_error e = {0};
  open_session(&t, NULL, relu_src, true);
  assert_ok(&e, run_at(&t, 33, NULL, relu_src, &e)); /* ShapeSet B:64, its graph at B=33 */
  for (long B = 65; B < 65 + RT_GPU_SESSION_MODELS - 1; B++) assert_ok(&e, run_at(&t, B, NULL, relu_src, &e));
  assert_int_equal(stats(&t).evictions, 0);
  assert_int_equal(delta(&s0, FAKE_CUDA_LIVE_EXECS), 2);
  assert_int_equal(delta(&s0, FAKE_CUDA_LIVE_MODULES), RT_GPU_SESSION_MODELS);
  /* one more binding: B=33 is the least recently used, and B:64's graph held it */
  assert_ok(&e, run_at(&t, 72, NULL, relu_src, &e));
  assert_int_equal(stats(&t).evictions, 1);
  assert_int_equal(delta(&s0, FAKE_CUDA_LIVE_MODULES), RT_GPU_SESSION_MODELS);
  assert_int_equal(delta(&s0, FAKE_CUDA_LIVE_EXECS), 1);
  tiny_symtab b;
  bind(&b, 33);
  assert_null(rt_gpu_session_model(t.s, &b));
  assert_int_equal(rt_gpu_session_launch(&e, t.s, &b, true), HARP_E_USAGE);
  assert_non_null(strstr(e.msg, "B=33"));
  harp_error_clear(&e); /* the first error stays in e until cleared */
  tiny_symtab_free(&b);
  /* B:64 again: built anew, and its graph instantiated anew (not updated) */
  int inst = stats(&t).instantiations, builds = stats(&t).builds;
  assert_ok(&e, run_at(&t, 40, NULL, relu_src, &e));
  assert_int_equal(stats(&t).instantiations, inst + 1);
  assert_int_equal(stats(&t).builds, builds + 1);
  assert_int_equal(stats(&t).evictions, 2);
  assert_driver_agrees(&t, &s0);
  close_session(&t);
  assert_released(&s0);
}

/* Errors: a binding that misses a symbol, inputs of another binding, a bad
 * target, a run without a driver; the session stays usable after each. */
static void test_errors(void **vs) {
  NEED_NVRTC();
  S->reset();
  snap s0 = snapshot();
  sess t;
  harp_error e = {0};
  open_session(&t, NULL, relu_src, true);
  tiny_symtab none;
  tiny_symtab_init(&none);
  ut_tensor out[1];
  assert_int_not_equal(rt_gpu_session_run(&e, t.s, &none, NULL, 0, out), HARP_OK);
  assert_non_null(strstr(e.msg, "B"));
  harp_error_clear(&e);
  tiny_symtab_free(&none);
  /* inputs for B=6 given to B=5 */
  tiny_symtab b5;
  bind(&b5, 5);
  ut_tensor in;
  int64_t shape[2] = {6, 8};
  assert_ok(&e, ut_tensor_alloc(&e, &in, TINY_FP32, 2, shape));
  assert_int_equal(rt_gpu_session_run(&e, t.s, &b5, &in, 1, out), HARP_E_INPUT_MISMATCH);
  harp_error_clear(&e);
  ut_tensor_free(&in);
  tiny_symtab_free(&b5);
  assert_ok(&e, run_at(&t, 5, NULL, relu_src, &e)); /* still usable */
  expect(&t, 1, 1, 1, 1, 0, 1);
  close_session(&t);
  /* a bad target */
  rt_gpu_session *s = NULL;
  rt_gpu_opts o = {.knobs = &S->knobs, .target = "sm70", .cache_dir = S->cache};
  hg_program *p = NULL;
  tiny_graph *g = NULL;
  assert_ok(&e, hg_harp_load_text(&e, relu_src, strlen(relu_src), "tiny.harp", &p));
  assert_ok(&e, hg_lower(&e, p, &g, NULL));
  assert_int_equal(rt_gpu_session_new(&e, g, &o, &s), HARP_E_USAGE);
  assert_null(s);
  harp_error_clear(&e);
  /* fixed symbols: a NULL name refused; a name no binding gives refused at the run, naming it */
  char zname[] = "Z";
  const char *fixed[] = {"B", NULL, zname};
  rt_gpu_opts fo = {.knobs = &S->knobs, .target = "sm80", .cache_dir = S->cache, .fixed = fixed, .nfixed = 2};
  assert_int_equal(rt_gpu_session_new(&e, g, &fo, &s), HARP_E_USAGE);
  assert_null(s);
  harp_error_clear(&e);
  fo.fixed = fixed + 2, fo.nfixed = 1;
  assert_ok(&e, rt_gpu_session_new(&e, g, &fo, &s));
  zname[0] = 'Y'; /* the session copied the names */
  tiny_symtab bz;
  bind(&bz, 4);
  assert_int_equal(rt_gpu_session_run(&e, s, &bz, NULL, 0, out), HARP_E_USAGE);
  assert_non_null(strstr(e.msg, "holds Z fixed"));
  harp_error_clear(&e);
  tiny_symtab_free(&bz);
  rt_gpu_session_free(s);
  s = NULL;
  /* no driver: the run says why */
  rt_knobs nodrv = S->knobs;
  assert_ok(&e, rt_knob_set(&e, &nodrv, "libcuda", "/nonexistent/libcuda.so.1"));
  o.knobs = &nodrv; /* borrowed for the session's life */
  o.target = "sm80";
  assert_ok(&e, rt_gpu_session_new(&e, g, &o, &s));
  tiny_symtab b;
  bind(&b, 4);
  ut_tensor x;
  int64_t xs[2] = {4, 8};
  assert_ok(&e, ut_tensor_alloc(&e, &x, TINY_FP32, 2, xs));
  assert_int_equal(rt_gpu_session_run(&e, s, &b, &x, 1, out), HARP_E_UNSUPPORTED);
  assert_non_null(strstr(e.msg, "no GPU"));
  ut_tensor_free(&x);
  tiny_symtab_free(&b);
  rt_gpu_session_free(s);
  tiny_graph_free(g);
  hg_program_free(p);
  assert_released(&s0);
}

/* The JSON a harp command prints (it must exit 0). */
static json_t *run_json(const char *cmd) {
  static char buf[65536];
  FILE *f = popen(cmd, "r");
  assert_non_null(f);
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = 0;
  assert_int_equal(pclose(f), 0);
  json_error_t je;
  json_t *j = json_loads(buf, 0, &je);
  assert_non_null(j);
  return j;
}

/* harp bench --bind: the JSON's session counters and the driver's log. */
static void test_cli_bench_bind(void **vs) {
  NEED_NVRTC();
  const char *bin = getenv("HARP_BIN");
  if (!bin) skip();
  char log[128], cmd[4096];
  snprintf(log, sizeof log, "%s/bench_log.json", S->cache);
  snprintf(cmd, sizeof cmd,
           "HARP_FAKE_CUDA_LOG='%s' HARP_CACHE_DIR='%s' '%s' bench '%s' --backend cuda --target sm80 --graphs "
           "--bind B=48 --bind B=64 --bind B=100 --repeat 3 --warmup 1 --json",
           log, S->cache, bin, src_path(mlp_model));
  json_error_t je;
  json_t *j = run_json(cmd), *ss = json_object_get(j, "session");
  assert_non_null(ss);
  /* 3 bindings in 2 ShapeSets; every run (3 first runs + 4 rounds x 3) is a
   * replay; mlp's GEMMs read B at run time: one build per ShapeSet */
  assert_int_equal(json_integer_value(json_object_get(ss, "clusters")), 2);
  assert_int_equal(json_integer_value(json_object_get(ss, "builds")), 2);
  assert_int_equal(json_integer_value(json_object_get(ss, "box_builds")), 2);
  assert_int_equal(json_integer_value(json_object_get(ss, "instantiations")), 2);
  assert_int_equal(json_integer_value(json_object_get(ss, "replays")), 3 + 4 * 3);
  json_t *l = json_load_file(log, 0, &je);
  assert_non_null(l);
  assert_int_equal(json_integer_value(json_object_get(l, "graphs_instantiated")), 2);
  assert_int_equal(json_integer_value(json_object_get(l, "graph_launches")), 3 + 4 * 3);
  assert_int_equal(json_integer_value(json_object_get(l, "exec_updates")),
                   json_integer_value(json_object_get(ss, "updates")));
  assert_int_equal(json_integer_value(json_object_get(l, "direct_launches")), 0);
  assert_int_equal(json_integer_value(json_object_get(l, "live_allocs")), 0);
  assert_int_equal(json_integer_value(json_object_get(l, "live_execs")), 0);
  json_decref(l);
  json_decref(j);
  /* --bind without --backend cuda is a usage error */
  snprintf(cmd, sizeof cmd, "'%s' bench '%s' --bind B=4 2>/dev/null", bin, src_path(mlp_model));
  assert_int_not_equal(system(cmd), 0);
}

/* harp bench --bind over a model that does not lower: exit 1 with the
 * lowering's located error, said to come from the session's one lowering
 * (no second lowering at the defaults); no crash. */
static void test_cli_bench_bind_bad_model(void **vs) {
  const char *bin = getenv("HARP_BIN");
  if (!bin) skip();
  char path[160], cmd[1024], out[4096];
  snprintf(path, sizeof path, "%s/bad_bind.harp", S->cache);
  FILE *m = fopen(path, "w");
  assert_non_null(m);
  fputs("graph<B=4> main(x: f32[B, 8], w: f32[4, 8]) -> (y: f32[B, 8]) {\n    y = x @ w\n    return y\n}\n", m);
  fclose(m);
  snprintf(cmd, sizeof cmd, "'%s' bench '%s' --backend cuda --target sm80 --bind B=3 --bind B=4 2>&1", bin, path);
  FILE *f = popen(cmd, "r");
  assert_non_null(f);
  size_t n = fread(out, 1, sizeof out - 1, f);
  out[n] = 0;
  int st = pclose(f);
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 1);
  assert_non_null(strstr(out, "error[AxisSizeMismatch]"));
  assert_non_null(strstr(out, "bad_bind.harp:2:11"));
  assert_non_null(strstr(out, "(harp bench --bind: the model lowered once for all its bindings)"));
}

/* harp bench --profile --backend cuda: one entry per launch of --dump gpu
 * (its kernel and region), each timed between its own pair of events (the fake's clock ticks once per
 * launch and once per event record: 0.002 ms a launch); --dump gpu is
 * written; --profile with --bind or interp: usage errors. */
static void test_cli_bench_profile(void **vs) {
  NEED_NVRTC();
  const char *bin = getenv("HARP_BIN");
  if (!bin) skip();
  char cmd[4096], dump[1200];
  snprintf(cmd, sizeof cmd,
           "HARP_CACHE_DIR='%s' '%s' bench '%s' --backend cuda --target sm80 --sym B=4 --profile --repeat 3 --warmup 1 "
           "--json --dump gpu --dump-dir '%s'",
           S->cache, bin, src_path(mlp_model), S->cache);
  json_error_t je;
  json_t *j = run_json(cmd), *ks = json_object_get(j, "kernels");
  snprintf(dump, sizeof dump, "%s/gpu.json", S->cache);
  json_t *d = json_load_file(dump, 0, &je), *ls = json_object_get(json_object_get(d, "gpu"), "launches");
  assert_non_null(ks);
  assert_non_null(ls);
  assert_true(json_array_size(ls) >= 2);
  assert_int_equal(json_array_size(ks), json_array_size(ls));
  for (size_t i = 0; i < json_array_size(ks); i++) {
    json_t *k = json_array_get(ks, i);
    const char *name = json_string_value(json_object_get(k, "kernel"));
    const char *region = json_string_value(json_object_get(k, "region")); /* a shared kernel runs for several */
    assert_non_null(region);
    bool found = false;
    for (size_t l = 0; l < json_array_size(ls); l++) {
      json_t *L = json_array_get(ls, l);
      found |= !strcmp(name, json_string_value(json_object_get(L, "kernel"))) &&
               !strcmp(region, json_string_value(json_object_get(L, "region")));
    }
    assert_true(found);
    assert_non_null(json_string_value(json_object_get(k, "kind")));
    assert_true(fabs(json_real_value(json_object_get(k, "median_ms")) - 0.002) < 1e-6);
  }
  assert_true(fabs(json_real_value(json_object_get(j, "kernels_sum_ms")) - 0.002 * (double)json_array_size(ls)) < 1e-6);
  json_decref(d);
  json_decref(j);
  snprintf(cmd, sizeof cmd, "'%s' bench '%s' --backend cuda --bind B=4 --profile 2>/dev/null", bin, src_path(mlp_model));
  assert_int_not_equal(system(cmd), 0);
  snprintf(cmd, sizeof cmd, "'%s' bench '%s' --backend interp --sym B=4 --profile 2>/dev/null", bin, src_path(mlp_model));
  assert_int_not_equal(system(cmd), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_one_graph_per_shapeset), cmocka_unit_test(test_no_graphs),
      cmocka_unit_test(test_update_refused),         cmocka_unit_test(test_eviction),
      cmocka_unit_test(test_errors),                 cmocka_unit_test(test_cli_bench_bind),
      cmocka_unit_test(test_cli_bench_bind_bad_model),
      cmocka_unit_test(test_cli_bench_profile),      cmocka_unit_test(test_one_build_per_box),
      cmocka_unit_test(test_wgmma_box),              cmocka_unit_test(test_wgmma_pair),
      cmocka_unit_test(test_wino_grids),             cmocka_unit_test(test_tied_box),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
