/* test_rg_stops.c — one case per STOP condition of seed 000 §4.1 / §4.2:
 * the fusion does not happen, and the region records why (in rg_info and in
 * the dump).  Each case is built so that exactly that condition trips; the
 * one-step rollback of the greedy selection gets its own case.  Every
 * partition is still played back against the interpreter. */
#include "rgtest.h"

/* The region computing `consumer` refused `cand` for `reason`, and the
 * dump says so. */
static void expect(rgt *t, const char *consumer, const char *cand, const char *reason) {
  const rg_region *R = rgt_region_of(t, consumer);
  rgt_expect_stop(R, cand, reason);
  assert_true(rgt_region_of(t, cand) != R || !strcmp(reason, "not_ucc"));
  json_t *d = rgt_dump(t), *r = rgt_dump_region(d, R->name), *st = json_object_get(r, "stops");
  bool found = false;
  for (size_t i = 0; i < json_array_size(st); i++) {
    json_t *s = json_array_get(st, i);
    found |= !strcmp(json_string_value(json_object_get(s, "candidate")), cand) &&
             !strcmp(json_string_value(json_object_get(s, "reason")), reason);
  }
  assert_true(found);
  json_decref(d);
}

/* ① not UCC: the producer is read by two regions, or is a model output */
static void test_not_ucc(void **state) {
  (void)state;
  rgt t;
  rgt_load(&t,
           "{\"uops\":[{\"id\":\"x\",\"uop\":\"INPUT\",\"arg\":{\"tensor_id\":\"X\",\"dtype\":\"fp32\",\"shape\":[64,64]}},"
           "{\"id\":\"a\",\"uop\":\"EXP\",\"src\":[\"x\"]},{\"id\":\"b\",\"uop\":\"RELU\",\"src\":[\"a\"]},"
           "{\"id\":\"c\",\"uop\":\"NEG\",\"src\":[\"a\"]},{\"id\":\"d\",\"uop\":\"SQRT\",\"src\":[\"x\"]},"
           "{\"id\":\"e\",\"uop\":\"NEG\",\"src\":[\"d\"]}],\"outputs\":[\"b\",\"c\",\"d\",\"e\"]}",
           NULL);
  rgt_form(&t, PLAN_ARCH_CPU);
  assert_int_equal(t.p->n, 5); /* nothing fuses */
  expect(&t, "b", "a", "not_ucc");
  assert_non_null(strstr(rgt_stop(rgt_region_of(&t, "b"), "a")->detail, "also read by"));
  expect(&t, "e", "d", "not_ucc");
  assert_non_null(strstr(rgt_stop(rgt_region_of(&t, "e"), "d")->detail, "model output"));
  rgt_playback(&t, true);
  rgt_free(&t);
}

/* non-SCoP: a GATHER ends a region and is one by itself (§13) */
static void test_non_scop(void **state) {
  (void)state;
  rgt t;
  rgt_load(&t,
           "{\"uops\":[{\"id\":\"x\",\"uop\":\"INPUT\",\"arg\":{\"tensor_id\":\"X\",\"dtype\":\"fp32\",\"shape\":[16]}},"
           "{\"id\":\"i\",\"uop\":\"INPUT\",\"arg\":{\"tensor_id\":\"I\",\"dtype\":\"i32\",\"shape\":[16]}},"
           "{\"id\":\"a\",\"uop\":\"EXP\",\"src\":[\"x\"]},{\"id\":\"g\",\"uop\":\"GATHER\",\"src\":[\"a\",\"i\"],\"arg\":{\"axis\":0}},"
           "{\"id\":\"b\",\"uop\":\"RELU\",\"src\":[\"g\"]},{\"id\":\"c\",\"uop\":\"NEG\",\"src\":[\"b\"]}]}",
           NULL);
  rgt_form(&t, PLAN_ARCH_CPU);
  const rg_region *G = rgt_region_of(&t, "g");
  assert_string_equal(G->kind, "gather");
  assert_int_equal(G->info->shape, RG_SHAPE_GATHER);
  expect(&t, "c", "g", "non_scop");
  expect(&t, "g", "a", "non_scop");
  assert_true(rgt_region_of(&t, "b") == rgt_region_of(&t, "c"));
  /* indices in range for the playback: the random inputs are 0 for i32... build them */
  fn_function *f;
  assert_ok(&t.e, fn_build(&t.e, t.p, "g", &f));
  assert_ok(&t.e, fn_check(&t.e, f));
  fn_free(f);
  rgt_free(&t);
}

/* ② halo too large: a 3-row stencil over a producer, computed per row */
static void test_halo_too_large(void **state) {
  (void)state;
  rgt t;
  rgt_load(&t,
           "{\"uops\":[{\"id\":\"x\",\"uop\":\"INPUT\",\"arg\":{\"tensor_id\":\"X\",\"dtype\":\"fp32\",\"shape\":[18,16]}},"
           "{\"id\":\"r\",\"uop\":\"RELU\",\"src\":[\"x\"]},"
           "{\"id\":\"rt\",\"uop\":\"PERMUTE\",\"src\":[\"r\"],\"arg\":{\"perm\":[1,0]}},"
           "{\"id\":\"w\",\"uop\":\"POOL\",\"src\":[\"rt\"],\"arg\":{\"kernel\":[3]}},"
           "{\"id\":\"wt\",\"uop\":\"PERMUTE\",\"src\":[\"w\"],\"arg\":{\"perm\":[1,0,2]}},"
           "{\"id\":\"s\",\"uop\":\"REDUCE\",\"src\":[\"wt\"],\"arg\":{\"op\":\"SUM\",\"axes\":[2],\"dtype\":\"fp32\"}}]}",
           NULL);
  for (int a = 0; a < PLAN_ARCH_COUNT; a++) {
    rgt_form(&t, (plan_arch)a);
    expect(&t, "s", "r", "halo_too_large");
    /* a looser threshold accepts the halo (what happens next is up to the cost) */
    rg_options o = {.halo_max = 3.0};
    rgt_form_opt(&t, (plan_arch)a, &o);
    const rg_stop *s = rgt_stop(rgt_region_of(&t, "s"), "r");
    assert_true(!s || strcmp(s->reason, "halo_too_large") != 0);
  }
  rgt_playback(&t, true);
  rgt_free(&t);
}

/* unsupported shape: an elementwise prologue feeding a contraction */
static void test_unsupported_prologue(void **state) {
  (void)state;
  static const char *syms[] = {"M=8", "D=16", NULL};
  rgt t;
  rgt_load(&t, "gemm_chain4.json", syms);
  rgt_form(&t, PLAN_ARCH_CPU);
  expect(&t, "gemm1", "relu0", "unsupported_shape");
  assert_non_null(strstr(rgt_stop(rgt_region_of(&t, "gemm1"), "relu0")->detail, "prologue"));
  rgt_free(&t);
}

/* c = x @ w (32x16 @ 16x24), and s[24]: the uops before a test's epilogue */
#define GEMM_XS                                                                                                \
  "{\"uops\":[{\"id\":\"x\",\"uop\":\"INPUT\",\"arg\":{\"tensor_id\":\"X\",\"dtype\":\"fp32\",\"shape\":[32,16]}}," \
  "{\"id\":\"w\",\"uop\":\"INPUT\",\"arg\":{\"tensor_id\":\"W\",\"dtype\":\"fp32\",\"shape\":[16,24]}},"     \
  "{\"id\":\"s\",\"uop\":\"INPUT\",\"arg\":{\"tensor_id\":\"S\",\"dtype\":\"fp32\",\"shape\":[24]}},"        \
  "{\"id\":\"a\",\"uop\":\"RESHAPE\",\"src\":[\"x\"],\"arg\":{\"result_shape\":[32,16,1]}},"                   \
  "{\"id\":\"b\",\"uop\":\"RESHAPE\",\"src\":[\"w\"],\"arg\":{\"result_shape\":[1,16,24]}},"                   \
  "{\"id\":\"p\",\"uop\":\"MUL\",\"src\":[\"a\",\"b\"]},"                                                     \
  "{\"id\":\"c\",\"uop\":\"REDUCE\",\"src\":[\"p\"],\"arg\":{\"op\":\"SUM\",\"axes\":[1],\"dtype\":\"fp32\"}},"

/* an epilogue op no contraction template applies: NEG after a GEMM stays
 * out of the GEMM's region (which would otherwise run the generic loops); a
 * product with a tensor and an added constant are steps of the CPU and the
 * CUDA templates alike, so they join the GEMM on every target */
static void test_epilogue_not_template(void **state) {
  (void)state;
  rgt t;
  rgt_load(&t,
           GEMM_XS
           "{\"id\":\"m\",\"uop\":\"MUL\",\"src\":[\"c\",\"s\"]},{\"id\":\"n\",\"uop\":\"NEG\",\"src\":[\"m\"]}]}",
           NULL);
  for (int a = 0; a < PLAN_ARCH_COUNT; a++) {
    rgt_form(&t, (plan_arch)a);
    assert_true(rgt_region_of(&t, "n") != rgt_region_of(&t, "c"));
    /* the product goes with the NEG (the cost model's choice: cpu, sm90), and
     * then the NEG is what stops the fusion on every target, or with the GEMM (sm80) */
    if (rgt_region_of(&t, "m") == rgt_region_of(&t, "n")) {
      expect(&t, "n", "c", "epilogue_not_template");
      assert_non_null(strstr(rgt_stop(rgt_region_of(&t, "n"), "c")->detail, "n (NEG)"));
    } else {
      assert_true(rgt_region_of(&t, "m") == rgt_region_of(&t, "c"));
    }
    rgt_playback(&t, true);
  }
  rgt_free(&t);
  /* x s, then + 1.5 (a constant): one region with the GEMM on every target */
  rgt_load(&t,
           GEMM_XS
           "{\"id\":\"m\",\"uop\":\"MUL\",\"src\":[\"c\",\"s\"]},"
           "{\"id\":\"k\",\"uop\":\"CONST\",\"arg\":{\"value\":1.5,\"dtype\":\"fp32\"}},"
           "{\"id\":\"d\",\"uop\":\"ADD\",\"src\":[\"m\",\"k\"]}]}",
           NULL);
  for (int a = 0; a < PLAN_ARCH_COUNT; a++) {
    rgt_form(&t, (plan_arch)a);
    assert_true(rgt_region_of(&t, "c") == rgt_region_of(&t, "m"));
    assert_true(rgt_region_of(&t, "c") == rgt_region_of(&t, "d"));
    rgt_playback(&t, true);
  }
  rgt_free(&t);
}

/* buffer too large: a transposed read needs the whole producer per row */
static void test_buffer_too_large(void **state) {
  (void)state;
  rgt t;
  rgt_load(&t,
           "{\"uops\":[{\"id\":\"x\",\"uop\":\"INPUT\",\"arg\":{\"tensor_id\":\"X\",\"dtype\":\"fp32\",\"shape\":[256,256]}},"
           "{\"id\":\"a\",\"uop\":\"EXP\",\"src\":[\"x\"]},{\"id\":\"at\",\"uop\":\"PERMUTE\",\"src\":[\"a\"],\"arg\":{\"perm\":[1,0]}},"
           "{\"id\":\"b\",\"uop\":\"NEG\",\"src\":[\"at\"]}]}",
           NULL);
  for (int a = 0; a < PLAN_ARCH_COUNT; a++) {
    rgt_form(&t, (plan_arch)a);
    expect(&t, "b", "a", "buffer_too_large");
  }
  /* with a budget of 512 KiB it fits the budget, but no longer the SM */
  rg_options o = {.local_budget = 512 * 1024};
  rgt_form_opt(&t, PLAN_ARCH_SM80, &o);
  expect(&t, "b", "a", "smem_over_80pct");
  rgt_free(&t);
}

/* ③ Δtime >= 0: the fused region loses its parallelism (one shared loop
 * level less: the transposed consumer takes the whole 64x64 tile per CTA) */
static void test_delta_time_nonneg(void **state) {
  (void)state;
  rgt t;
  rgt_load(&t,
           "{\"uops\":[{\"id\":\"x\",\"uop\":\"INPUT\",\"arg\":{\"tensor_id\":\"X\",\"dtype\":\"fp32\",\"shape\":[64,64]}},"
           "{\"id\":\"a\",\"uop\":\"EXP\",\"src\":[\"x\"]},{\"id\":\"at\",\"uop\":\"PERMUTE\",\"src\":[\"a\"],\"arg\":{\"perm\":[1,0]}},"
           "{\"id\":\"b\",\"uop\":\"NEG\",\"src\":[\"at\"]}]}",
           NULL);
  for (int a = PLAN_ARCH_SM80; a <= PLAN_ARCH_SM90; a++) {
    rgt_form(&t, (plan_arch)a);
    expect(&t, "b", "a", "delta_time_nonneg");
    assert_true(rgt_stop(rgt_region_of(&t, "b"), "a")->dtime >= 0);
  }
  rgt_playback(&t, true);
  rgt_free(&t);
}

/* A row of `L` floats flipped: the consumer needs the whole row in a buffer. */
static void flip_model(rgt *t, int L) {
  char js[1024];
  snprintf(js, sizeof js,
           "{\"uops\":[{\"id\":\"x\",\"uop\":\"INPUT\",\"arg\":{\"tensor_id\":\"X\",\"dtype\":\"fp32\",\"shape\":[2,%d]}},"
           "{\"id\":\"a\",\"uop\":\"EXP\",\"src\":[\"x\"]},{\"id\":\"af\",\"uop\":\"FLIP\",\"src\":[\"a\"],\"arg\":{\"axes\":[1]}},"
           "{\"id\":\"b\",\"uop\":\"NEG\",\"src\":[\"af\"]}]}",
           L);
  rgt_load(t, js, NULL);
}

/* §4.2: smem_per_CTA above ~80% (a 144 KB row buffer of 163 KiB on the A100) */
static void test_smem_over_80pct(void **state) {
  (void)state;
  rgt t;
  flip_model(&t, 36000);
  rgt_form(&t, PLAN_ARCH_SM80);
  expect(&t, "b", "a", "smem_over_80pct");
  rgt_free(&t);
}

/* §4.2: CTA/SM drops to 1 — a 96 KB row buffer on an A100 whose SMs hold
 * 256 warps (so that one CTA leaves the SM below the saturating occupancy) */
static void test_cta_drops_to_1(void **state) {
  (void)state;
  rgt t;
  flip_model(&t, 24000);
  plan_machine m;
  plan_machine_get(PLAN_ARCH_SM80, &m);
  m.max_warps_per_sm = 256;
  m.max_cta_per_sm = 64;
  rg_options o = {.machine = &m};
  rgt_form_opt(&t, PLAN_ARCH_SM80, &o); /* rgt_form_opt installs t.m; use ours */
  rg_partition_free(t.p);
  assert_ok(&t.e, rg_form(&t.e, t.g, &t.syms, &o, &t.p));
  expect(&t, "b", "a", "cta_drops_to_1");
  assert_non_null(strstr(rgt_stop(rgt_region_of(&t, "b"), "a")->detail, "-> 1 CTA/SM"));
  rgt_free(&t);
}

/* §4.2: vectorize width 8 -> 4: an fp16 kernel would read fp32 */
static void test_vector_width_shrinks(void **state) {
  (void)state;
  rgt t;
  rgt_load(&t,
           "{\"uops\":[{\"id\":\"x\",\"uop\":\"INPUT\",\"arg\":{\"tensor_id\":\"X\",\"dtype\":\"fp32\",\"shape\":[64,64]}},"
           "{\"id\":\"y\",\"uop\":\"CAST\",\"src\":[\"x\"],\"arg\":{\"to\":\"fp16\"}},{\"id\":\"z\",\"uop\":\"RELU\",\"src\":[\"y\"]}]}",
           NULL);
  for (int a = PLAN_ARCH_SM80; a <= PLAN_ARCH_SM90; a++) {
    rgt_form(&t, (plan_arch)a);
    expect(&t, "z", "y", "vector_width_shrinks");
    assert_non_null(strstr(rgt_stop(rgt_region_of(&t, "z"), "y")->detail, "vector width 8 -> 4"));
  }
  rgt_free(&t);
}

/* §4.2 SM90: a residual whose rows are not 16-byte aligned leaves the TMA tiles */
static const char *gemm_residual(int rcols) {
  static char js[4096];
  snprintf(js, sizeof js,
           "{\"uops\":[{\"id\":\"a\",\"uop\":\"INPUT\",\"arg\":{\"tensor_id\":\"A\",\"dtype\":\"fp16\",\"shape\":[256,256]}},"
           "{\"id\":\"b\",\"uop\":\"INPUT\",\"arg\":{\"tensor_id\":\"B\",\"dtype\":\"fp16\",\"shape\":[256,96]}},"
           "{\"id\":\"r\",\"uop\":\"INPUT\",\"arg\":{\"tensor_id\":\"R\",\"dtype\":\"fp32\",\"shape\":[256,%d]}},"
           "{\"id\":\"a1\",\"uop\":\"RESHAPE\",\"src\":[\"a\"],\"arg\":{\"result_shape\":[256,256,1]}},"
           "{\"id\":\"b1\",\"uop\":\"RESHAPE\",\"src\":[\"b\"],\"arg\":{\"result_shape\":[1,256,96]}},"
           "{\"id\":\"a2\",\"uop\":\"EXPAND\",\"src\":[\"a1\"],\"arg\":{\"result_shape\":[256,256,96]}},"
           "{\"id\":\"b2\",\"uop\":\"EXPAND\",\"src\":[\"b1\"],\"arg\":{\"result_shape\":[256,256,96]}},"
           "{\"id\":\"m\",\"uop\":\"MUL\",\"src\":[\"a2\",\"b2\"]},"
           "{\"id\":\"c\",\"uop\":\"REDUCE\",\"src\":[\"m\"],\"arg\":{\"op\":\"SUM\",\"axes\":[1],\"dtype\":\"fp32\"}},"
           "{\"id\":\"rs\",\"uop\":\"SHRINK\",\"src\":[\"r\"],\"arg\":{\"lo\":[0,0],\"hi\":[256,96]}},"
           "{\"id\":\"y\",\"uop\":\"ADD\",\"src\":[\"c\",\"rs\"]}]}",
           rcols);
  return js;
}

static void test_sm90_tile_constraint(void **state) {
  (void)state;
  rgt t;
  rgt_load(&t, gemm_residual(98), NULL); /* 392-byte rows */
  rgt_form(&t, PLAN_ARCH_SM90);
  expect(&t, "y", "c", "sm90_tile_constraint");
  rgt_free(&t);
  rgt_load(&t, gemm_residual(100), NULL); /* 400-byte rows: fine */
  rgt_form(&t, PLAN_ARCH_SM90);
  assert_int_equal(t.p->n, 1);
  assert_string_equal(t.p->regions[0].pattern, "matmul");
  rgt_free(&t);
}

/* The one-step rollback: greedy takes the latest producer first (a CAST of a
 * misaligned tensor, fine alone), then the GEMM trips the SM90 threshold;
 * undoing the CAST and taking the GEMM instead pays more. */
static void test_rollback(void **state) {
  (void)state;
  static const char js[] =
      "{\"uops\":[{\"id\":\"a\",\"uop\":\"INPUT\",\"arg\":{\"tensor_id\":\"A\",\"dtype\":\"fp16\",\"shape\":[256,256]}},"
      "{\"id\":\"b\",\"uop\":\"INPUT\",\"arg\":{\"tensor_id\":\"B\",\"dtype\":\"fp16\",\"shape\":[256,96]}},"
      "{\"id\":\"z\",\"uop\":\"INPUT\",\"arg\":{\"tensor_id\":\"Z\",\"dtype\":\"fp16\",\"shape\":[256,98]}},"
      "{\"id\":\"a1\",\"uop\":\"RESHAPE\",\"src\":[\"a\"],\"arg\":{\"result_shape\":[256,256,1]}},"
      "{\"id\":\"b1\",\"uop\":\"RESHAPE\",\"src\":[\"b\"],\"arg\":{\"result_shape\":[1,256,96]}},"
      "{\"id\":\"a2\",\"uop\":\"EXPAND\",\"src\":[\"a1\"],\"arg\":{\"result_shape\":[256,256,96]}},"
      "{\"id\":\"b2\",\"uop\":\"EXPAND\",\"src\":[\"b1\"],\"arg\":{\"result_shape\":[256,256,96]}},"
      "{\"id\":\"m\",\"uop\":\"MUL\",\"src\":[\"a2\",\"b2\"]},"
      "{\"id\":\"c\",\"uop\":\"REDUCE\",\"src\":[\"m\"],\"arg\":{\"op\":\"SUM\",\"axes\":[1],\"dtype\":\"fp32\"}},"
      "{\"id\":\"zs\",\"uop\":\"SHRINK\",\"src\":[\"z\"],\"arg\":{\"lo\":[0,0],\"hi\":[256,96]}},"
      "{\"id\":\"t\",\"uop\":\"CAST\",\"src\":[\"zs\"],\"arg\":{\"to\":\"fp32\"}},"
      "{\"id\":\"y\",\"uop\":\"ADD\",\"src\":[\"c\",\"t\"]}]}";
  rgt t;
  rgt_load(&t, js, NULL);
  rg_options o = {.window = -1, .no_rollback = true};
  rgt_form_opt(&t, PLAN_ARCH_SM90, &o);
  assert_true(rgt_region_of(&t, "t") == rgt_region_of(&t, "y")); /* without rollback: the CAST sticks */
  assert_true(rgt_region_of(&t, "c") != rgt_region_of(&t, "y"));
  o.no_rollback = false;
  rgt_form_opt(&t, PLAN_ARCH_SM90, &o);
  assert_true(rgt_region_of(&t, "c") == rgt_region_of(&t, "y")); /* with it: the GEMM instead */
  assert_true(rgt_region_of(&t, "t") != rgt_region_of(&t, "y"));
  expect(&t, "y", "t", "sm90_tile_constraint");
  rgt_playback(&t, false);
  rgt_free(&t);
}

/* no plan: no plan of the search space fits the fused region, while its
 * anchor alone has one.  An A100 whose threads hold at most 120 registers:
 * the GEMM alone fits its 64x32 warp tiles (32 base + 64 accumulator + 24
 * fragment registers, the 64x64 ones do not), and a bias epilogue's 8 more
 * fit no tile.  Both selections refuse it: the greedy one (window -1) and
 * the exact search (window 0: the default windows). */
static void test_no_plan(void **state) {
  (void)state;
  rgt t;
  rgt_load(&t, GEMM_XS "{\"id\":\"y\",\"uop\":\"ADD\",\"src\":[\"c\",\"s\"]}]}", NULL);
  plan_machine m;
  plan_machine_get(PLAN_ARCH_SM80, &m);
  m.regs_per_thread_max = 120;
  for (int window = -1; window <= 0; window++) {
    rg_options o = {.machine = &m, .window = window};
    rg_partition_free(t.p);
    t.p = NULL;
    assert_ok(&t.e, rg_form(&t.e, t.g, &t.syms, &o, &t.p));
    assert_ok(&t.e, rg_partition_check(&t.e, t.p));
    assert_int_equal(t.p->n, 2); /* the GEMM, and the bias alone */
    expect(&t, "y", "c", "no_plan");
    rgt_playback(&t, true);
  }
  /* the stock A100 (255 registers a thread) takes the bias into the GEMM */
  rgt_form(&t, PLAN_ARCH_SM80);
  assert_true(rgt_region_of(&t, "y") == rgt_region_of(&t, "c"));
  rgt_free(&t);
}

/* no plan, attention (§7.3): a backend with the GEMM template and no
 * attention algorithm (rg_options.algo_mask) has a plan for the P.V matmul
 * alone and none for the attention region: QK^T, the softmax and P.V stay
 * apart, a matmul each side of the softmax; the stock mask forms it */
static void test_no_plan_attention(void **state) {
  (void)state;
  static const char *syms[] = {"B=2", "H=2", "M=5", "N=6", "D=4", "Dv=3", NULL};
  for (int a = 0; a < PLAN_ARCH_COUNT; a++) {
    rgt t;
    rgt_load(&t, "attention_full.json", syms);
    rg_options o = {.algo_mask = 1u << PLAN_ALGO_IMPLICIT_GEMM};
    rgt_form_opt(&t, (plan_arch)a, &o);
    assert_true(t.p->n > 1);
    for (int i = 0; i < t.p->n; i++) assert_true(!t.p->regions[i].info || t.p->regions[i].info->shape != RG_SHAPE_ATTENTION);
    rgt_playback(&t, true);
    rgt_form(&t, (plan_arch)a);
    assert_int_equal(t.p->n, 1);
    assert_int_equal(t.p->regions[0].info->shape, RG_SHAPE_ATTENTION);
    rgt_free(&t);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_not_ucc),           cmocka_unit_test(test_non_scop),
      cmocka_unit_test(test_halo_too_large),    cmocka_unit_test(test_unsupported_prologue),
      cmocka_unit_test(test_epilogue_not_template),
      cmocka_unit_test(test_buffer_too_large),  cmocka_unit_test(test_delta_time_nonneg),
      cmocka_unit_test(test_smem_over_80pct),   cmocka_unit_test(test_cta_drops_to_1),
      cmocka_unit_test(test_vector_width_shrinks), cmocka_unit_test(test_sm90_tile_constraint),
      cmocka_unit_test(test_rollback),          cmocka_unit_test(test_no_plan),
      cmocka_unit_test(test_no_plan_attention),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
