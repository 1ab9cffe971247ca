/* test_prepack.c — weights packed once at model_init (contract_c.c,
 * emit_model.c): a model whose convolutions' weights, a GEMM's A and two GEMMs' B are
 * params gets kernels that take the packed form, model_init packs them, and
 * every model_run — the second, an interleaved second instance — gives the
 * interpreter's values; the same model with the weights as inputs (or with
 * HARP_NO_PREPACK=1) packs nothing at init; every allocation of model_init
 * failing in turn gives NULL and leaves nothing allocated. */
#include <dlfcn.h>
#include <math.h>

#include "backend/c/cgen.h"
#include "fe_testutil.h"
#include "harp/cpu.h"
#include "harp/knobs.h"
#include "harp/function.h"

/* Three convs over odd sizes (3x3 pad 1 + bias + relu, 3x3 stride 2, and a
 * grouped 3x3 (4 groups of 5 input, 3 output channels) + bias + relu: the
 * direct kernel on AVX-512, else and with HARP_CONV=gemm the implicit GEMM) and
 * c = a @ v (a: the GEMM's A), d = u @ wb and e = u wt^T (the weight is B:
 * packed as it is, and through the transposes), o = heads merged @ wo (B
 * packed, A copied to dense scratch first: the transformer's projection). */
static const char MODEL[] =
    "graph main(x: f32[2, 13, 11, 23], w: f32[20, 13, 3, 3], b: f32[20], w2: f32[7, 20, 3, 3],\n"
    "           a: f32[37, 29], v: f32[29, 53], u: f32[19, 31], wb: f32[31, 45], wt: f32[70, 31],\n"
    "           wg: f32[12, 5, 3, 3], bg: f32[12], h: f32[2, 3, 10, 8], wo: f32[24, 7])\n"
    "    -> (y: f32[2, 20, 11, 23], z: f32[2, 7, 6, 12], c: f32[37, 53], d: f32[19, 45], e: f32[19, 70],\n"
    "        q: f32[2, 12, 11, 23], o: f32[2, 10, 7]) {\n"
    "    y = relu(conv2d(x, w, bias=b, pad=[1, 1]))\n"
    "    z = conv2d(y, w2, stride=2, pad=1)\n"
    "    c = a @ v\n"
    "    d = u @ wb\n"
    "    e = u @ permute(wt, [1, 0])\n"
    "    q = relu(conv2d(y, wg, bias=bg, pad=1, groups=4))\n"
    "    o = reshape(permute(h, [0, 2, 1, 3]), [2, 10, 24]) @ wo\n"
    "    return y, z, c, d, e, q, o\n}\n";
enum { NIN = 13, NOUT = 7, NPACKED = 7, NDIRECT = 3 };
static const char *const NAMES[NIN] = {"x", "w", "b", "w2", "a", "v", "u", "wb", "wt", "wg", "bg", "h", "wo"};
static const int64_t SHAPES[NIN][4] = {{2, 13, 11, 23}, {20, 13, 3, 3}, {20}, {7, 20, 3, 3}, {37, 29}, {29, 53},
                                       {19, 31}, {31, 45}, {70, 31}, {12, 5, 3, 3}, {12}, {2, 3, 10, 8}, {24, 7}};
static const int RANKS[NIN] = {4, 4, 1, 4, 2, 2, 2, 2, 2, 4, 1, 4, 2};

typedef struct compiled {
  tiny_graph *g;
  tiny_symtab syms;
  rt_cpu_model *cm;
} compiled;

/* Lower MODEL, mark the inputs named in params as weights, compile (source
 * kept) with the knob setting `knob` ("NAME=VALUE"; NULL: the defaults). */
static void compile_model(const char *const *params, const char *knob, compiled *out) {
  harp_error e = {0};
  hg_program *p = fu_load(MODEL);
  tiny_symtab_init(&out->syms);
  assert_ok(&e, hg_lower(&e, p, &out->g, &out->syms));
  hg_program_free(p);
  for (int i = 0; params && params[i]; i++)
    for (int k = 0; k < out->g->n; k++)
      if (out->g->nodes[k].op == TINY_INPUT && !strcmp(out->g->nodes[k].a.input.tensor_id, params[i]))
        out->g->nodes[k].a.input.storage = "param";
  assert_ok(&e, tiny_prepare(&e, out->g, &out->syms, false));
  rt_knobs k;
  rt_knobs_init(&k);
  if (knob) assert_ok(&e, rt_knob_assign(&e, &k, knob));
  rt_cpu_opts co = {.knobs = &k, .keep_source = true};
  assert_ok(&e, rt_cpu_compile(&e, out->g, &out->syms, &co, &out->cm));
  assert_int_equal(rt_cpu_function(out->cm)->nargs, NIN); /* in NAMES order, as the graph's inputs */
}

static void compiled_free(compiled *c) {
  rt_cpu_free(c->cm);
  tiny_graph_free(c->g);
  tiny_symtab_free(&c->syms);
}

/* The text of model_init in the generated C (freed by the caller). */
static char *init_text(const rt_cpu_model *cm) {
  const char *src = rt_cpu_source(cm);
  assert_non_null(src);
  const char *at = strstr(src, "model_t *model_init(");
  assert_non_null(at);
  const char *end = strstr(at, "\n}\n");
  assert_non_null(end);
  return strndup(at, (size_t)(end - at));
}

static int count(const char *s, const char *what) {
  int n = 0;
  for (const char *p = strstr(s, what); p; p = strstr(p + 1, what)) n++;
  return n;
}

/* Random inputs in NAMES order (the graph's), scaled so sums stay near 1. */
static void make_inputs(uint64_t seed, ut_tensor *t) {
  harp_error e = {0};
  for (int i = 0; i < NIN; i++) {
    assert_ok(&e, ut_tensor_alloc(&e, &t[i], TINY_FP32, RANKS[i], SHAPES[i]));
    float *d = t[i].data;
    for (int64_t k = 0; k < ut_tensor_numel(&t[i]); k++) d[k] = (float)(fu_rand(&seed) * (i == 0 ? 1.0 : 0.3));
  }
}

static void free_tensors(ut_tensor *t, int n) {
  for (int i = 0; i < n; i++) ut_tensor_free(&t[i]);
}

/* An instance of c->cm over these weights (the params among t). */
static void *instance(const compiled *c, const ut_tensor *t) {
  harp_error e = {0};
  const fn_function *f = rt_cpu_function(c->cm);
  ut_tensor params[NIN];
  int np = 0;
  for (int a = 0; a < f->nargs; a++)
    if (f->buffers[f->args[a]].kind == FN_PARAM) params[np++] = t[a]; /* args follow the graph: NAMES order */
  fn_constpool cp = {0};
  assert_ok(&e, fn_constpool_from_tensors(&e, f, params, np, &cp));
  void *inst = rt_cpu_instance_new(c->cm, cp.data, cp.size);
  memset(cp.data, 0x7f, cp.size); /* the instance keeps its own copy: the block is garbage from here on */
  fn_constpool_free(&cp);
  assert_non_null(inst);
  return inst;
}

/* One model_run on inputs t (its non-weights), checked against the interpreter. */
static void run_and_check(const compiled *c, void *inst, const ut_tensor *t) {
  harp_error e = {0};
  const fn_function *f = rt_cpu_function(c->cm);
  const void *in[NIN];
  int ni = 0;
  for (int a = 0; a < f->nargs; a++)
    if (f->buffers[f->args[a]].kind != FN_PARAM) in[ni++] = t[a].data;
  ut_tensor want[NOUT], got[NOUT];
  assert_ok(&e, tiny_interp(&e, c->g, &c->syms, t, NIN, want));
  void *outp[NOUT];
  for (int k = 0; k < NOUT; k++) {
    assert_ok(&e, ut_tensor_alloc(&e, &got[k], TINY_FP32, want[k].rank, want[k].shape));
    memset(got[k].data, 0xff, got[k].nbytes); /* NaN: a value not written shows */
    outp[k] = got[k].data;
  }
  assert_int_equal(rt_cpu_instance_run(c->cm, inst, in, outp), 0);
  for (int k = 0; k < NOUT; k++) {
    const float *g = got[k].data, *w = want[k].data;
    for (int64_t i = 0; i < ut_tensor_numel(&want[k]); i++)
      if (!(fabsf(g[i] - w[i]) <= 1e-4f + 1e-4f * fabsf(w[i])))
        fail_msg("output %d element %lld: got %.9g, want %.9g", k, (long long)i, g[i], w[i]);
  }
  free_tensors(want, NOUT);
  free_tensors(got, NOUT);
}

/* One instance over inputs of this seed, one checked run, then freed. */
static void run_one_instance(const compiled *c, uint64_t seed) {
  ut_tensor t[NIN];
  make_inputs(seed, t);
  void *m = instance(c, t);
  run_and_check(c, m, t);
  rt_cpu_instance_free(c->cm, m);
  free_tensors(t, NIN);
}

static const char *const WEIGHTS[] = {"w", "b", "w2", "a", "wb", "wt", "wg", "bg", "wo", NULL};

/* Params: every conv and the GEMM take their weight packed at init; runs
 * after the first (other inputs, and another instance in between) stay right.
 * conv_algo: the knob conv, HARP_CONV (NULL: the kernel cgen_conv_direct picks). */
static void params_packed_once(const char *conv_algo) {
  char knob[64];
  snprintf(knob, sizeof knob, "HARP_CONV=%s", conv_algo ? conv_algo : "auto");
  compiled c;
  compile_model(WEIGHTS, knob, &c);
  const char *src = rt_cpu_source(c.cm);
  char *init = init_text(c.cm);
  /* a weight read only packed is packed from params and not kept as stored
   * (no copy into m->consts); here every packed weight is such a one */
  assert_int_equal(count(init, "_wpack(m->pool, (const void *)((const unsigned char *)params + "), NPACKED);
  assert_int_equal(count(init, "_wpack(m->pool, (void *)(m->consts + "), 0);
  assert_int_equal(count(init, "if (nbytes) memcpy(m->consts, params, nbytes);"), 0);
  /* the packed block, the arena and the weights through hprt_alloc (2 MiB
   * pages where large: test_hprt_pool's test_alloc_huge_pages) */
  assert_int_equal(count(init, "(m->packed = hprt_alloc(total + 64, NULL))"), 1);
  assert_int_equal(count(init, "m->arena = hprt_alloc("), 1);
  assert_int_equal(count(init, "m->consts = hprt_alloc("), 1);
  /* one thread is a pool of one: without it each kernel malloc'd its scratch
   * every call (a ShapeSet attention's 311 KB: 16 page faults a run) */
  assert_int_equal(count(init, "if (n >= 1) m->pool = hprt_pool_create((int)n);"), 1);
  assert_int_equal(count(src, "_wpack("), 2 * NPACKED); /* defined once, called once (in init) */
  assert_int_equal(count(src, "m->wp["), 3 * NPACKED);  /* set and packed in init, passed by run_kernel */
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) /* the pack is the algorithm's */
    assert_int_equal(count(src, "/* direct conv ("), conv_algo ? 0 : NDIRECT);
  free(init);
  ut_tensor t1[NIN], t2[NIN];
  make_inputs(1, t1);
  make_inputs(2, t2);
  void *m1 = instance(&c, t1);
  run_and_check(&c, m1, t1);
  run_and_check(&c, m1, t1);
  void *m2 = instance(&c, t2); /* other weights, packed into its own block */
  for (int k = 0; k < NIN; k++)
    if (!strcmp(NAMES[k], "x") || !strcmp(NAMES[k], "v") || !strcmp(NAMES[k], "u") || !strcmp(NAMES[k], "h")) { /* inputs: t2's, weights still t1's */
      ut_tensor tmp = t1[k];
      t1[k] = t2[k], t2[k] = tmp;
    }
  run_and_check(&c, m1, t1);
  run_and_check(&c, m2, t2);
  run_and_check(&c, m1, t1);
  rt_cpu_instance_free(c.cm, m2);
  rt_cpu_instance_free(c.cm, m1);
  free_tensors(t1, NIN);
  free_tensors(t2, NIN);
  compiled_free(&c);
}

static void test_params_packed_once(void **state) {
  (void)state;
  params_packed_once(NULL);
}

static void test_params_packed_once_gemm(void **state) {
  (void)state;
  params_packed_once("gemm");
}

/* Weights as inputs change between runs: nothing is packed at init. */
static void test_inputs_not_packed(void **state) {
  (void)state;
  compiled c;
  compile_model(NULL, NULL, &c);
  const char *src = rt_cpu_source(c.cm);
  assert_int_equal(count(src, "_wpack("), 0);
  assert_int_equal(count(src, "_pack_a("), 0);
  assert_int_equal(count(src, "_pack_b("), 0);
  assert_null(strstr(src, "m->packed"));
  run_one_instance(&c, 3);
  compiled_free(&c);
}

/* The knob no_prepack, HARP_NO_PREPACK=1 (the benchmarks' A/B switch):
 * params packed per run. */
static void test_no_prepack_switch(void **state) {
  (void)state;
  compiled c;
  compile_model(WEIGHTS, "no_prepack=1", &c);
  assert_int_equal(count(rt_cpu_source(c.cm), "_wpack("), 0);
  run_one_instance(&c, 4);
  compiled_free(&c);
}

/* The generated C again, its allocator counted: allocation n of model_init
 * fails (n = 0, 1, ... until none is left to fail); model_init returns NULL
 * (or, for the thread pool's, runs without one) and nothing stays allocated. */
static const char SHIM[] =
    "#include <math.h>\n#include <pthread.h>\n#include <stdint.h>\n#include <stdlib.h>\n#include <string.h>\n"
    "#include <unistd.h>\n#include <sys/mman.h>\n"
    "#if defined(__x86_64__) || defined(__i386__)\n#include <immintrin.h>\n#endif\n" /* before the macros */
    "int hpt_fail_at = -1, hpt_calls, hpt_live;\n"
    "static int hpt_fail(void) { return hpt_calls++ == hpt_fail_at; }\n"
    "static void *hpt_live_if(void *p) { hpt_live += p != NULL; return p; }\n"
    "static void *hpt_calloc(size_t n, size_t s) { return hpt_fail() ? NULL : hpt_live_if(calloc(n, s)); }\n"
    "static void *hpt_malloc(size_t n) { return hpt_fail() ? NULL : hpt_live_if(malloc(n)); }\n"
    "static void *hpt_aligned_alloc(size_t a, size_t n) {\n"
    "  return hpt_fail() ? NULL : hpt_live_if(aligned_alloc(a, n));\n}\n"
    "static void hpt_free(void *p) { hpt_live -= p != NULL; free(p); }\n"
    "#define calloc hpt_calloc\n#define malloc hpt_malloc\n#define aligned_alloc hpt_aligned_alloc\n"
    "#define free hpt_free\n";

static void test_init_failures(void **state) {
  (void)state;
  compiled c;
  compile_model(WEIGHTS, NULL, &c);
  ut_str src;
  ut_str_init(&src);
  ut_str_puts(&src, SHIM);
  ut_str_puts(&src, rt_cpu_source(c.cm));
  assert_false(src.oom);
  harp_error e = {0};
  void *dl = NULL;
  cgen_cc_opts cc = {.flags = "-O1 -march=native"}; /* the JIT's source: host-only code */
  assert_ok(&e, cgen_compile_so(&e, src.buf, &cc, &dl));
  ut_str_free(&src);
  void *(*init)(const void *, size_t) = (void *(*)(const void *, size_t))dlsym(dl, "model_init");
  void (*fr)(void *) = (void (*)(void *))dlsym(dl, "model_free");
  int *fail_at = dlsym(dl, "hpt_fail_at"), *calls = dlsym(dl, "hpt_calls"), *live = dlsym(dl, "hpt_live");
  assert_true(init && fr && fail_at && calls && live);
  const fn_function *f = rt_cpu_function(c.cm);
  unsigned char *params = calloc(1, f->const_bytes); /* zeros: the values do not matter here */
  setenv("HARP_NUM_THREADS", "2", 1); /* with a pool, whose allocations fail too */
  int nulls = 0, n = 0;
  for (;; n++) {
    *fail_at = n, *calls = 0;
    void *m = init(params, f->const_bytes);
    if (*calls <= n) { /* no allocation left to fail */
      assert_non_null(m);
      fr(m);
      assert_int_equal(*live, 0);
      break;
    }
    nulls += m == NULL;
    fr(m);
    assert_int_equal(*live, 0);
  }
  unsetenv("HARP_NUM_THREADS");
  assert_true(nulls >= 4); /* the instance, arena, weights and packed block at least (a pool's is not fatal) */
  free(params);
  dlclose(dl);
  compiled_free(&c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_params_packed_once),
      cmocka_unit_test(test_params_packed_once_gemm),
      cmocka_unit_test(test_inputs_not_packed),
      cmocka_unit_test(test_no_prepack_switch),
      cmocka_unit_test(test_init_failures),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
