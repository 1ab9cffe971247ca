/* test_cuda_model.c — the CUDA backend on whole models through the library
 * (harp/gpu.h), no GPU needed: builds for sm80 and sm90, launches by kind,
 * the --dump gpu JSON, PTX through NVRTC (skipped without it), a run without
 * a GPU is Unsupported with a reason, a bad target is a usage error, and an
 * allocation failure anywhere in a build is an error, never a crash or a
 * leak (the ASan build checks the latter). */
#include <jansson.h>

#include "harp/gpu.h"
#include "testutil.h"
#include "util/util.h"

static char *slurp(const char *rel) {
  char path[1024];
  const char *src = getenv("HARP_SOURCE_DIR");
  snprintf(path, sizeof path, "%s/%s", src ? src : HARP_SOURCE_DIR, rel);
  harp_error e = {0};
  char *text = NULL;
  size_t len = 0;
  assert_ok(&e, ut_read_file(&e, path, (size_t)1 << 24, &text, &len));
  return text;
}

typedef struct model {
  char *json;
  tiny_graph *g;
  tiny_symtab syms;
} model;

static void load(model *m, const char *rel, const char *const *syms) {
  harp_error e = {0};
  harp_status st;
  m->json = slurp(rel);
  m->g = tu_prepare(&e, m->json, syms, &m->syms, &st);
  assert_ok(&e, st);
}

static void unload(model *m) {
  tiny_graph_free(m->g);
  tiny_symtab_free(&m->syms);
  free(m->json);
}

static const char *const gemm_syms[] = {"M=80", "N=72", "K=48", NULL};

static void test_build_and_dump(void **s) {
  (void)s;
  model m;
  load(&m, "tests/models/seed000_gemm_bias_relu.json", gemm_syms);
  const char *targets[] = {"sm80", "sm90"};
  for (int t = 0; t < 2; t++) {
    harp_error e = {0};
    rt_gpu_model *gm = NULL;
    rt_gpu_opts o = {.target = targets[t]};
    assert_ok(&e, rt_gpu_build(&e, m.g, &m.syms, &o, &gm));
    assert_string_equal(rt_gpu_arch(gm), targets[t]);
    int tp, sp, gp;
    rt_gpu_counts(gm, &tp, &sp, &gp);
    assert_int_equal(tp, 1); /* matmul + bias + relu: one template launch, nothing else */
    assert_int_equal(sp + gp, 0);
    const char *src = rt_gpu_source(gm);
    assert_non_null(strstr(src, "extern \"C\" __global__"));
    char *js = NULL;
    assert_ok(&e, rt_gpu_dump_json(&e, gm, &js));
    json_error_t je;
    json_t *root = json_loads(js, 0, &je), *gpu = json_object_get(root, "gpu");
    assert_non_null(gpu);
    json_t *k0 = json_array_get(json_object_get(gpu, "kernels"), 0);
    assert_string_equal(json_string_value(json_object_get(k0, "kind")), t ? "wgmma_gemm" : "mma_gemm");
    assert_int_equal(json_array_size(json_object_get(gpu, "launches")), 1);
    /* the bias is the template's epilogue, read from the input that holds it */
    json_t *args = json_object_get(json_array_get(json_object_get(gpu, "launches"), 0), "args");
    bool bias = false;
    for (size_t i = 0; i < json_array_size(args); i++) {
      const char *v = json_string_value(json_object_get(json_array_get(args, i), "value"));
      bias |= v && !strcmp(v, "bias");
    }
    assert_true(bias);
    json_decref(root);
    free(js);
    /* PTX when NVRTC is there */
    const char *ptx = NULL;
    harp_error pe = {0};
    harp_status ps = rt_gpu_ptx(&pe, gm, &ptx);
    if (ps == HARP_OK) assert_non_null(strstr(ptx, t ? "wgmma.mma_async" : "mma.sync.aligned.m16n8k16"));
    else assert_int_equal(ps, HARP_E_UNSUPPORTED);
    rt_gpu_free(gm);
  }
  unload(&m);
}

static void test_run_without_gpu(void **s) {
  (void)s;
  model m;
  load(&m, "tests/models/layernorm_fp16.json", (const char *const[]){"R=8", NULL});
  harp_error e = {0};
  rt_gpu_model *gm = NULL;
  rt_knobs k; /* a driver library that is not there (the knob libcuda, HARP_LIBCUDA) */
  rt_knobs_init(&k);
  assert_ok(&e, rt_knob_set(&e, &k, "libcuda", "/nonexistent/libcuda.so.1"));
  rt_gpu_opts o = {.knobs = &k, .target = "sm80"};
  assert_ok(&e, rt_gpu_build(&e, m.g, &m.syms, &o, &gm));
  int tp, sp, gp;
  rt_gpu_counts(gm, &tp, &sp, &gp);
  assert_int_equal(sp, 1); /* the layernorm (the weights' widening casts read through) */
  ut_tensor in[3], out[1];
  int64_t xs[2] = {8, 64}, vs[1] = {64};
  assert_ok(&e, ut_tensor_alloc(&e, &in[0], TINY_FP16, 2, xs));
  assert_ok(&e, ut_tensor_alloc(&e, &in[1], TINY_FP16, 1, vs));
  assert_ok(&e, ut_tensor_alloc(&e, &in[2], TINY_FP16, 1, vs));
  assert_int_equal(rt_gpu_run(&e, gm, in, 3, out), HARP_E_UNSUPPORTED);
  assert_non_null(strstr(e.msg, "no GPU: no NVIDIA driver"));
  assert_null(out[0].data); /* nothing half-made */
  harp_error_clear(&e);
  assert_int_equal(rt_gpu_run(&e, gm, in, 2, out), HARP_E_INPUT_MISMATCH);
  for (int i = 0; i < 3; i++) ut_tensor_free(&in[i]);
  rt_gpu_free(gm);
  harp_error_clear(&e);
  o.target = "sm75";
  assert_int_equal(rt_gpu_build(&e, m.g, &m.syms, &o, &gm), HARP_E_USAGE);
  assert_null(gm);
  unload(&m);
}

/* Allocation failures at every point of a build: an error, never a crash. */
static void test_alloc_failures(void **s) {
  (void)s;
  model m;
  load(&m, "tests/models/layernorm_fp16.json", (const char *const[]){"R=8", NULL});
  int failed = 0;
  for (long nth = 1; nth < 20000; nth += 89) {
    harp_error e = {0};
    rt_gpu_model *gm = NULL;
    rt_gpu_opts o = {.target = nth % 2 ? "sm80" : "sm90"};
    ut_fault_fail_nth_alloc(nth);
    harp_status st = rt_gpu_build(&e, m.g, &m.syms, &o, &gm);
    bool fired = ut_fault_remaining() == 0;
    ut_fault_fail_nth_alloc(0);
    if (st != HARP_OK) {
      assert_null(gm);
      assert_true(e.msg[0] != 0);
      failed++;
    }
    rt_gpu_free(gm);
    if (!fired) break;
  }
  assert_true(failed > 10);
  unload(&m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_build_and_dump),
      cmocka_unit_test(test_run_without_gpu),
      cmocka_unit_test(test_alloc_failures),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
