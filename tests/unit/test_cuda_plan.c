/* test_cuda_plan.c — Schedule Plans (DSL and JSON) read by the CUDA
 * templates: tile, stages, warp tile, vector width, swizzle hints, bind,
 * algo_choice; a plan's GEMM kernel carries the plan in its dialect. */
#include "backend/cuda/cuda_plan.h"
#include "cuda_testutil.h"

static void test_seed_plan(void **s) {
  (void)s;
  /* seed 000 §1.7's DSL example, plus a warp tile */
  const char *dsl = "split m 128; split n 64; split k 64;\n"
                    "reorder m.o n.o k.o m.i.o n.i.o k.i.o m.i.i n.i.i k.i.i;\n"
                    "bind m.o block.y; bind n.o block.x; bind m.i.o warp.y; bind n.i.o warp.x;\n"
                    "pipeline k.i stages=2;\n"
                    "cache_read A smem at=k.i pingpong=true;\ncache_read B smem at=k.i pingpong=true;\n"
                    "vectorize n.i.i 8;\npredicate_tail m.i.i n.i.i k.i.i;\nepilogue bias relu;\n"
                    "warp_tile 64x32;\n";
  harp_error e = {0};
  plan_t p;
  cu_ok(&e, plan_parse_dsl(dsl, "seed.plan", PLAN_ARCH_SM80, &p, &e));
  cuda_tune t;
  cu_ok(&e, cuda_tune_from_plan(&e, &p, 1, &t));
  assert_int_equal(t.arch, CUDA_SM80);
  assert_int_equal(t.bm, 128);
  assert_int_equal(t.bn, 64);
  assert_int_equal(t.bk, 64);
  assert_int_equal(t.stages, 2);
  assert_int_equal(t.warp_m, 64);
  assert_int_equal(t.warp_n, 32);
  assert_int_equal(t.vec, 8);
  assert_false(t.no_swizzle);
  assert_false(t.raster_m_x);
  /* the plan drives a kernel: its dialect records the tile */
  cuda_gemm_spec g;
  cuda_gemm_spec_init(&g, 256, 512, 128, TINY_FP16);
  g.tune = t;
  g.n_epi = p.nepi;
  for (int i = 0; i < p.nepi; i++) cu_ok(&e, cuda_epi_from_plan(&e, p.epi[i], false, TINY_FP16, &g.epi[i]));
  assert_int_equal(g.epi[0].kind, CUDA_EPI_BIAS_N);
  assert_int_equal(g.epi[1].kind, CUDA_EPI_RELU);
  cuda_module *m;
  cu_ok(&e, cuda_module_new(&e, CUDA_SM80, &m));
  cu_ok(&e, cuda_gen_gemm(&e, m, &g, "planned"));
  const cuda_kernel *k = cuda_module_find(m, "planned");
  assert_int_equal(k->block[0], 32 * (128 / 64) * (64 / 32));
  assert_int_equal(k->grid[0], 512 / 64);
  assert_int_equal(k->grid[1], 256 / 128);
  cuda_module_free(m);
}

static void test_plan_variants(void **s) {
  (void)s;
  harp_error e = {0};
  plan_t p;
  cuda_tune t;
  cu_ok(&e, plan_parse_dsl("split m 128; split n 128; split k 64; bind m.o block.x; bind n.o block.y;\n"
                           "algo_choice matmul splitk_parallel;\n",
                           "p.plan", PLAN_ARCH_SM90, &p, &e));
  cu_ok(&e, cuda_tune_from_plan(&e, &p, 4, &t));
  assert_int_equal(t.arch, CUDA_SM90);
  assert_true(t.raster_m_x);
  assert_int_equal(t.splitk, 4);
  assert_int_equal(t.splitk_kind, CUDA_SPLITK_ATOMIC);
  cu_ok(&e, plan_parse_dsl("split m 64; split n 64; split k 32; algo_choice matmul splitk_serial;\n", "p.plan",
                           PLAN_ARCH_SM80, &p, &e));
  cu_ok(&e, cuda_tune_from_plan(&e, &p, 4, &t));
  assert_int_equal(t.splitk, 4);
  assert_int_equal(t.splitk_kind, CUDA_SPLITK_SERIAL);
  cu_ok(&e, plan_parse_dsl("split m 64; split n 64; split k 32; algo_choice matmul splitk_reduce; splitk 3;\n", "p.plan",
                           PLAN_ARCH_SM80, &p, &e));
  assert_int_equal(p.splitk, 3);
  cu_ok(&e, cuda_tune_from_plan(&e, &p, 3, &t));
  assert_int_equal(t.splitk, 3);
  assert_int_equal(t.splitk_kind, CUDA_SPLITK_REDUCE);
  /* no split-K algorithm: no slices whatever the factor */
  cu_ok(&e, plan_parse_dsl("split m 64; split n 64; split k 32;\n", "p.plan", PLAN_ARCH_SM80, &p, &e));
  cu_ok(&e, cuda_tune_from_plan(&e, &p, 4, &t));
  assert_true(t.splitk <= 1);
  cu_ok(&e, plan_parse_dsl("split m 64; algo_choice attention online_softmax;\n", "p.plan", PLAN_ARCH_SM80, &p, &e));
  assert_true(cuda_attn_online_from_plan(&p));
  cu_ok(&e, plan_parse_dsl("split m 64;\n", "p.plan", PLAN_ARCH_CPU, &p, &e));
  assert_int_equal(cuda_tune_from_plan(&e, &p, 1, &t), HARP_E_INVALID_ARG);
}

/* Winograd plans: each algorithm name gives its tile, and the generators
 * refuse what they cannot run (numbers: tests/py/test_cuda_winograd.py). */
static void test_plan_winograd(void **s) {
  (void)s;
  harp_error e = {0};
  plan_t p;
  cuda_tune t;
  static const struct { const char *algo; int tile; } A[] = {
      {"winograd_2x2_3x3", 2}, {"winograd_4x4_3x3", 4}, {"winograd_3x3", -1}, {"implicit_gemm", 0}};
  for (int i = 0; i < 4; i++) {
    char dsl[128];
    snprintf(dsl, sizeof dsl, "split m 64; split n 64; split k 32; algo_choice conv %s;\n", A[i].algo);
    cu_ok(&e, plan_parse_dsl(dsl, "w.plan", PLAN_ARCH_SM80, &p, &e));
    cu_ok(&e, cuda_tune_from_plan(&e, &p, 1, &t));
    assert_int_equal(t.winograd, A[i].tile);
  }
  cuda_conv_spec c;
  cuda_conv_spec_init(&c, 2, 8, 10, 10, 16, 3, 3, TINY_FP16);
  c.pad[0] = c.pad[1] = c.pad[2] = c.pad[3] = 1;
  assert_int_equal(cuda_wino_tile(&c, -1), 2); /* F(4x4) is outside the tolerance in fp16 / bf16 */
  cuda_module *m;
  cu_ok(&e, cuda_module_new(&e, CUDA_SM80, &m));
  cu_ok(&e, cuda_gen_conv_wino(&e, m, &c, 2, "w2"));
  assert_int_equal(m->n, 4); /* filter, input, GEMM, output */
  assert_non_null(cuda_module_find(m, "w2_wfilter"));
  assert_non_null(cuda_module_find(m, "w2_winput"));
  assert_string_equal(cuda_module_find(m, "w2")->kind, "mma_gemm");
  assert_int_equal(cuda_module_find(m, "w2")->grid[2], 16); /* a GEMM per transformed point */
  assert_non_null(cuda_module_find(m, "w2_woutput"));
  /* refusals leave the module as it was */
  cuda_conv_spec b = c;
  assert_int_equal(cuda_gen_conv_wino(&e, m, &b, 3, "bad"), HARP_E_INVALID_ARG); /* no F(3x3,3x3) */
  harp_error_clear(&e);
  b.groups = 2;
  assert_int_equal(cuda_gen_conv_wino(&e, m, &b, 2, "bad"), HARP_E_UNSUPPORTED);
  assert_non_null(strstr(e.msg, "grouped"));
  harp_error_clear(&e);
  b = c, b.stride[0] = 2;
  assert_int_equal(cuda_gen_conv_wino(&e, m, &b, 2, "bad"), HARP_E_UNSUPPORTED);
  harp_error_clear(&e);
  b = c, b.x_dtype = b.w_dtype = b.y_dtype = TINY_FP32, b.math = CUDA_MATH_FP32;
  assert_int_equal(cuda_gen_conv_wino(&e, m, &b, 2, "bad"), HARP_E_UNSUPPORTED);
  harp_error_clear(&e);
  b = c, b.pad[0] = -1;
  assert_int_equal(cuda_gen_conv_wino(&e, m, &b, 2, "bad"), HARP_E_INVALID_ARG);
  harp_error_clear(&e);
  b = c, b.tune.winograd = 2; /* the implicit-GEMM generator does not run a Winograd tuning */
  assert_int_equal(cuda_gen_conv(&e, m, &b, "bad"), HARP_E_INVALID_ARG);
  harp_error_clear(&e);
  assert_int_equal(m->n, 4);
  cuda_module_free(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_seed_plan), cmocka_unit_test(test_plan_variants),
                                     cmocka_unit_test(test_plan_winograd)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
