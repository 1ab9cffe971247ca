/* test_plan_model.c — the resource model (§5), the cost model (§6), the
 * §4.2 thresholds and the fusion Δtime, against numbers worked out by hand
 * (the arithmetic is in the comments, from the machine figures). */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "plan_test_util.h"

static void parse_ok(const char *text, plan_arch arch, plan_t *p) {
  harp_error e = {0};
  if (plan_parse(text, "t.plan", arch, p, &e)) fail_msg("parse failed: %s", err_text(&e));
}

static void assert_close(double got, double want) {
  if (fabs(got - want) > 1e-9 * fabs(want) + 1e-15) fail_msg("got %.12g, want %.12g", got, want);
}

/* The seed plan (128x64x64, warp 64x64, 2 stages, A and B ping-pong, bias
 * relu) on the A100, fp16 in / fp32 acc:
 *   smem = (128*64 + 64*64) * 2 B * 2 stages = 49152, + bias 64 * 2 B = 49280
 *   warps = (128/64) * (64/64) = 2, threads 64
 *   regs = base 32 + acc 64*64*4/(4*32) = 128 + frag (64+64)*16*2/(4*32) = 32
 *          + bias 8 + relu 0 = 200
 *   cta_per_SM = min(167936/49280 = 3, 65536/(200*64) = 5, 32, 64/2 = 32) = 3 (smem)
 *   occ = 3 * 2 / 64 = 0.09375, pipeline_eff = 1 - 1/2 = 0.5 */
static void test_seed_plan_sm80(void **state) {
  (void)state;
  plan_t p;
  parse_ok(SEED_DSL, PLAN_ARCH_SM80, &p);
  plan_region_info r = gemm_bias_relu_region(1024, 1024, 1024);
  plan_resources res;
  plan_resources_of(&p, plan_machine_gpu(PLAN_ARCH_SM80), &r, &res);
  assert_int_equal(res.smem_per_cta, 49280);
  assert_int_equal(res.epilogue_smem, 128);
  assert_int_equal(res.warps_per_cta, 2);
  assert_int_equal(res.threads_per_cta, 64);
  assert_int_equal(res.acc_regs, 128);
  assert_int_equal(res.frag_regs, 32);
  assert_int_equal(res.epilogue_regs, 8);
  assert_int_equal(res.regs_per_thr, 200);
  assert_int_equal(res.cta_per_sm, 3);
  assert_string_equal(res.cta_limit, "smem");
  assert_close(res.occ, 0.09375);
  assert_close(res.pipeline_eff, 0.5);
}

/* 128x128x32, warp 64x64, 3 stages, no epilogue, A100:
 *   smem = (128*32 + 32*128) * 2 * 3 = 49152
 *   warps 4, threads 128, regs = 32 + 128 + 32 = 192
 *   cta = min(167936/49152 = 3, 65536/(192*128) = 2, 32, 16) = 2 (regs)
 *   occ = 2 * 4 / 64 = 0.125, pipeline_eff = 2/3 */
static void test_sm80_regs_limited(void **state) {
  (void)state;
  plan_t p;
  parse_ok("split m 128; split n 128; split k 32; pipeline k.i stages=3;"
           "cache_read A smem at=k.i pingpong=true; cache_read B smem at=k.i pingpong=true",
           PLAN_ARCH_SM80, &p);
  plan_region_info r = gemm_region(1024, 1024, 1024);
  plan_resources res;
  plan_resources_of(&p, plan_machine_gpu(PLAN_ARCH_SM80), &r, &res);
  assert_int_equal(res.smem_per_cta, 49152);
  assert_int_equal(res.regs_per_thr, 192);
  assert_int_equal(res.cta_per_sm, 2);
  assert_string_equal(res.cta_limit, "regs");
  assert_close(res.occ, 0.125);
  assert_close(res.pipeline_eff, 2.0 / 3.0);
  /* a pingpong=false operand has one buffer, whatever the stages */
  p.cache[1].pingpong = false;
  plan_resources_of(&p, plan_machine_gpu(PLAN_ARCH_SM80), &r, &res);
  assert_int_equal(res.smem_per_cta, 128 * 32 * 2 * 3 + 32 * 128 * 2);
}

/* H100, 128x128x64, warpgroup tile 64x128, 2 stages:
 *   smem = (128*64 + 64*128) * 2 * 2 = 65536
 *   warpgroups (128/64) * (128/128) = 2 -> 8 warps, 256 threads
 *   regs = 32 + acc 64*128*4/(4*128) = 64 (wgmma: no fragments) = 96
 *   cta = min(233472/65536 = 3, 65536/(96*256) = 2, 32, 64/8 = 8) = 2
 *   occ = 2 * 8 / 64 = 0.25
 * The search ranks it at occupancy 1 (the persistent wgmma template: one
 * CTA per SM feeds the tensor cores), with the 64 CTAs in one wave over
 * the 132 SMs: 1024^3 x 2 / (peak x 64/132 x 0.5); time_est keeps 0.25. */
static void test_sm90_warpgroups(void **state) {
  (void)state;
  plan_t p;
  parse_ok("split m 128; split n 128; split k 64; cache_read A smem at=k.i pingpong=true;"
           "cache_read B smem at=k.i pingpong=true",
           PLAN_ARCH_SM90, &p);
  assert_int_equal(p.warp_n, 128);
  plan_region_info r = gemm_region(1024, 1024, 1024);
  plan_resources res;
  plan_resources_of(&p, plan_machine_gpu(PLAN_ARCH_SM90), &r, &res);
  assert_int_equal(res.smem_per_cta, 65536);
  assert_int_equal(res.warps_per_cta, 8);
  assert_int_equal(res.threads_per_cta, 256);
  assert_int_equal(res.frag_regs, 0);
  assert_int_equal(res.regs_per_thr, 96);
  assert_int_equal(res.cta_per_sm, 2);
  assert_close(res.occ, 0.25);
  harp_error e = {0};
  if (plan_validate(&p, &r, plan_machine_gpu(PLAN_ARCH_SM90), NULL, &e)) fail_msg("%s", err_text(&e));
  plan_cost c;
  const plan_machine *m = plan_machine_gpu(PLAN_ARCH_SM90);
  assert_int_equal(plan_cost_of(&p, &r, m, &c, &e), HARP_OK);
  assert_int_equal(c.ctas, 64);
  assert_close(c.occ_eff, 0.25 * c.wave_eff);
  assert_close(c.rank_time, plan_time_formula(c.flops, c.bytes, c.peak, c.bw, 64.0 / m->sm_count, 0.5));
  assert_true(c.rank_time < c.time_est);
  /* fewer than four 128x128 tiles of output: ranked as time_est */
  plan_region_info tiny = gemm_region(256, 96, 256);
  assert_int_equal(plan_cost_of(&p, &tiny, m, &c, &e), HARP_OK);
  assert_close(c.rank_time, c.time_est);
}

/* The acceptance case: 256x256x64 fp16 with 3 stages needs
 * (256*64 + 64*256) * 2 * 3 = 196608 bytes > 163 KiB = 166912 on the A100
 * -> SmemOverflow from the resource model.  The H100's 227 KiB = 232448
 * holds it (its warpgroups then run out of registers instead). */
static void test_smem_overflow(void **state) {
  (void)state;
  plan_t p;
  parse_ok("split m 256; split n 256; split k 64; pipeline k.i stages=3;"
           "cache_read A smem at=k.i pingpong=true; cache_read B smem at=k.i pingpong=true",
           PLAN_ARCH_SM80, &p);
  plan_region_info r = gemm_region(1024, 1024, 1024);
  harp_error e = {0};
  assert_int_equal(plan_validate(&p, &r, plan_machine_gpu(PLAN_ARCH_SM80), NULL, &e), HARP_E_SMEM_OVERFLOW);
  assert_non_null(strstr(e.msg, "196608"));
  assert_non_null(strstr(e.msg, "166912"));
  plan_resources res;
  plan_resources_of(&p, plan_machine_gpu(PLAN_ARCH_SM80), &r, &res);
  assert_int_equal(res.smem_per_cta, 196608);
  assert_int_equal(res.cta_per_sm, 0);
  /* two stages fit: 131072 */
  p.stages = 2;
  harp_error_clear(&e);
  assert_int_equal(plan_validate(&p, &r, plan_machine_gpu(PLAN_ARCH_SM80), NULL, &e), HARP_E_REG_OVERFLOW);
  /* (16 warps of 64x64 x 200 registers do not fit one SM: that is next) */
  plan_resources_of(&p, plan_machine_gpu(PLAN_ARCH_SM80), &r, &res);
  assert_int_equal(res.smem_per_cta, 131072);
  parse_ok("split m 256; split n 256; split k 64; pipeline k.i stages=3; warp_tile 64x256;"
           "cache_read A smem at=k.i pingpong=true; cache_read B smem at=k.i pingpong=true",
           PLAN_ARCH_SM90, &p);
  plan_resources_of(&p, plan_machine_gpu(PLAN_ARCH_SM90), &r, &res);
  assert_int_equal(res.smem_per_cta, 196608);
  assert_true(res.smem_per_cta <= plan_machine_gpu(PLAN_ARCH_SM90)->smem_per_cta_max);
}

/* RegOverflow per thread (128x128 warp tile: 512 accumulators) and per CTA
 * (1024 threads x 120 registers = 122880 > 65536); LimitExceeded past 1024
 * threads. */
static void test_reg_overflow(void **state) {
  (void)state;
  plan_region_info r = gemm_region(1024, 1024, 1024);
  const plan_machine *m = plan_machine_gpu(PLAN_ARCH_SM80);
  plan_t p;
  harp_error e = {0};
  parse_ok("split m 256; split n 128; split k 32; warp_tile 128x128", PLAN_ARCH_SM80, &p);
  assert_int_equal(plan_validate(&p, &r, m, NULL, &e), HARP_E_REG_OVERFLOW);
  plan_resources res;
  plan_resources_of(&p, m, &r, &res);
  assert_int_equal(res.acc_regs, 512);
  parse_ok("split m 256; split n 256; split k 32; warp_tile 64x32", PLAN_ARCH_SM80, &p);
  plan_resources_of(&p, m, &r, &res);
  assert_int_equal(res.threads_per_cta, 1024);
  assert_int_equal(res.regs_per_thr, 32 + 64 + 24); /* frag (64+32)*16*2/128 = 24 */
  harp_error_clear(&e);
  assert_int_equal(plan_validate(&p, &r, m, NULL, &e), HARP_E_REG_OVERFLOW);
  parse_ok("split m 256; split n 256; split k 32; warp_tile 32x32", PLAN_ARCH_SM80, &p);
  harp_error_clear(&e);
  assert_int_equal(plan_validate(&p, &r, m, NULL, &e), HARP_E_LIMIT); /* 64 warps = 2048 threads */
}

/* The CPU reading: panels packed as fp32 in L2, vector registers.
 * 128x128x128, micro-tile 8x32, AVX-512 (16 fp32 lanes), 2 stages:
 *   smem = (128*128 + 128*128) * 4 B * 2 = 262144 <= 1 MiB
 *   regs = acc 8*32/16 = 16 + B 32/16 = 2 + A broadcast 1 = 19 <= 32
 *   cta 1, occ 1 */
static void test_cpu_reading(void **state) {
  (void)state;
  plan_machine m = fixed_cpu();
  plan_region_info r = gemm_region(1024, 1024, 1024);
  plan_t p;
  parse_ok("split m 128; split n 128; split k 128; warp_tile 8x32; vectorize n.i.i 16;"
           "cache_read A smem at=k.i pingpong=true; cache_read B smem at=k.i pingpong=true; arch cpu",
           PLAN_ARCH_CPU, &p);
  plan_resources res;
  plan_resources_of(&p, &m, &r, &res);
  assert_int_equal(res.smem_per_cta, 262144);
  assert_int_equal(res.regs_per_thr, 19);
  assert_int_equal(res.threads_per_cta, 1);
  assert_int_equal(res.cta_per_sm, 1);
  assert_close(res.occ, 1.0);
  harp_error e = {0};
  if (plan_validate(&p, &r, &m, NULL, &e)) fail_msg("%s", err_text(&e));
  /* 16x32 needs 32 + 3 = 35 vector registers: RegOverflow */
  p.warp_m = 16;
  assert_int_equal(plan_validate(&p, &r, &m, NULL, &e), HARP_E_REG_OVERFLOW);
  /* 256x256x256 x 2 stages = exactly 1 MiB fits; 3 stages overflow L2 */
  parse_ok("split m 256; split n 256; split k 256; warp_tile 8x32; arch cpu;"
           "cache_read A smem at=k.i pingpong=true; cache_read B smem at=k.i pingpong=true",
           PLAN_ARCH_CPU, &p);
  plan_resources_of(&p, &m, &r, &res);
  assert_int_equal(res.smem_per_cta, 1048576);
  harp_error_clear(&e);
  if (plan_validate(&p, &r, &m, NULL, &e)) fail_msg("%s", err_text(&e));
  p.stages = 3;
  assert_int_equal(plan_validate(&p, &r, &m, NULL, &e), HARP_E_SMEM_OVERFLOW);
  /* vector width 16 of fp32 is 64 bytes: fine on AVX-512, not on AVX2 */
  m.simd_bytes = 32;
  parse_ok("split m 128; split n 128; split k 128; warp_tile 4x16; vectorize n.i.i 16; arch cpu", PLAN_ARCH_CPU, &p);
  harp_error_clear(&e);
  assert_int_equal(plan_validate(&p, &r, &m, NULL, &e), HARP_E_INVALID_ARG);
}

static void test_time_formula(void **state) {
  (void)state;
  /* compute-bound: 2e9 / (1e12 * 0.5 * 0.5) = 8e-3 > 1e6 / (1e11 * 0.5) = 2e-5 */
  assert_close(plan_time_formula(2e9, 1e6, 1e12, 1e11, 0.5, 0.5), 8e-3);
  /* memory-bound: 1e9 / (1e11 * 0.25) = 0.04 */
  assert_close(plan_time_formula(1e6, 1e9, 1e12, 1e11, 0.25, 0.5), 0.04);
  assert_true(isinf(plan_time_formula(1, 1, 1, 1, 0, 0.5)));
}

/* The seed plan on a 1024^3 GEMM + bias + ReLU on the A100:
 *   FLOPs 2 * 1024^3; bytes (1M + 1M) * 2 + 1M * 2 = 6291456 (the operands,
 *   4 MiB, fit in half the 40 MB L2: no re-read traffic)
 *   CTAs 8 * 16 = 128 on 108 SMs x 3 = 324 slots: one wave, 128/324 busy
 *   occ_eff = 0.09375 * 128/324; t = FLOPs / (312e12 * occ_eff * 0.5) */
static void test_cost_seed(void **state) {
  (void)state;
  plan_t p;
  parse_ok(SEED_DSL, PLAN_ARCH_SM80, &p);
  plan_region_info r = gemm_bias_relu_region(1024, 1024, 1024);
  plan_cost c;
  harp_error e = {0};
  assert_int_equal(plan_cost_of(&p, &r, plan_machine_gpu(PLAN_ARCH_SM80), &c, &e), HARP_OK);
  double flops = 2.0 * 1024 * 1024 * 1024, bytes = 6291456;
  double occ = 0.09375 * (128.0 / 324.0);
  assert_close(c.flops, flops);
  assert_close(c.bytes, bytes);
  assert_int_equal(c.ctas, 128);
  assert_int_equal(c.splitk, 1);
  assert_close(c.wave_eff, 128.0 / 324.0);
  assert_close(c.occ_eff, occ);
  assert_close(c.t_compute, flops / (312e12 * occ * 0.5));
  assert_close(c.t_memory, bytes / (2039e9 * occ));
  assert_close(c.time_est, c.t_compute);
  /* a plan that does not fit has no cost */
  p.tile[0] = 512;
  p.warp_m = 128;
  assert_int_equal(plan_cost_of(&p, &r, plan_machine_gpu(PLAN_ARCH_SM80), &c, &e), HARP_E_REG_OVERFLOW);
}

/* Split-K: 1024^3, 128x128x32 tiles = 64 CTAs < 108 SMs x 2: the smallest
 * power of two filling a wave is 4 (256 >= 216), 32 K tiles / 4 >= 4.  Its
 * partial sums cost 8 x 4 x 1M x 4 B of atomics plus the finishing pass's
 * 2 x 1M x 4 B (parallel), 2 x 3 x 1M x 4 B (serial) or 2 x 4 x 1M x 4 B
 * (reduce); the extra launches add 2, 1 and 1 x 3 us. */
static void test_splitk(void **state) {
  (void)state;
  plan_region_info r = gemm_region(1024, 1024, 1024);
  const plan_machine *m = plan_machine_gpu(PLAN_ARCH_SM80);
  plan_t p;
  parse_ok("split m 128; split n 128; split k 32; warp_tile 64x64; algo_choice matmul splitk_parallel", PLAN_ARCH_SM80, &p);
  plan_resources res;
  plan_resources_of(&p, m, &r, &res);
  assert_int_equal(res.cta_per_sm, 2);
  assert_int_equal(plan_splitk_factor(&p, &r, m, &res), 4);
  plan_cost c;
  harp_error e = {0};
  assert_int_equal(plan_cost_of(&p, &r, m, &c, &e), HARP_OK);
  assert_int_equal(c.ctas, 256);
  assert_close(c.bytes, 6291456.0 + 8.0 * 4 * 1048576 * 4 + 2.0 * 1048576 * 4);
  assert_close(c.time_est, plan_time_formula(c.flops, c.bytes, c.peak, c.bw, c.occ_eff, res.pipeline_eff) + 2 * 3e-6);
  p.algo[PLAN_KEY_MATMUL] = PLAN_ALGO_SPLITK_SERIAL;
  assert_int_equal(plan_cost_of(&p, &r, m, &c, &e), HARP_OK);
  assert_close(c.bytes, 6291456.0 + 2.0 * 3 * 1048576 * 4);
  assert_close(c.time_est, plan_time_formula(c.flops, c.bytes, c.peak, c.bw, c.occ_eff, res.pipeline_eff) + 3e-6);
  p.algo[PLAN_KEY_MATMUL] = PLAN_ALGO_SPLITK_REDUCE;
  assert_int_equal(plan_cost_of(&p, &r, m, &c, &e), HARP_OK);
  assert_close(c.bytes, 6291456.0 + 2.0 * 4 * 1048576 * 4);
  p.algo[PLAN_KEY_MATMUL] = PLAN_ALGO_IMPLICIT_GEMM;
  assert_int_equal(plan_splitk_factor(&p, &r, m, &res), 1);
  /* a big GEMM fills the machine without splitting */
  plan_region_info big = gemm_region(8192, 8192, 8192);
  p.algo[PLAN_KEY_MATMUL] = PLAN_ALGO_SPLITK_PARALLEL;
  assert_int_equal(plan_splitk_factor(&p, &big, m, &res), 1);
}

/* Tile re-reads: a 16384^2 x 8192 fp16 GEMM has 512 MiB of operands, far
 * beyond 20 MiB (half of L2): A is read N/BN times, B M/BM times, and
 * the estimate charges the missing part. */
static void test_reread_bytes(void **state) {
  (void)state;
  plan_region_info r = gemm_region(16384, 16384, 8192);
  const plan_machine *m = plan_machine_gpu(PLAN_ARCH_SM80);
  plan_t small, large;
  parse_ok("split m 64; split n 64; split k 64", PLAN_ARCH_SM80, &small);
  parse_ok("split m 128; split n 128; split k 64", PLAN_ARCH_SM80, &large);
  plan_cost cs, cl;
  harp_error e = {0};
  assert_int_equal(plan_cost_of(&small, &r, m, &cs, &e), HARP_OK);
  assert_int_equal(plan_cost_of(&large, &r, m, &cl, &e), HARP_OK);
  double in = 2.0 * 16384 * 8192 * 2, miss = 1 - (40.0 * 1024 * 1024 / 2) / in;
  double base = in + 16384.0 * 16384 * 2;
  assert_close(cs.bytes, base + in / 2 * (256 - 1) * 2 * miss);
  assert_close(cl.bytes, base + in / 2 * (128 - 1) * 2 * miss);
  assert_true(cl.bytes < cs.bytes);
}

static void test_thresholds(void **state) {
  (void)state;
  const plan_machine *m80 = plan_machine_gpu(PLAN_ARCH_SM80);
  plan_resources a = {0}, b = {0};
  a.smem_per_cta = 133530; /* 0.8 * 166912 = 133529.6 */
  assert_true(plan_smem_near_limit(&a, m80));
  a.smem_per_cta = 133529;
  assert_false(plan_smem_near_limit(&a, m80));
  a.cta_per_sm = 2, b.cta_per_sm = 1;
  assert_true(plan_cta_dropped_to_one(&a, &b));
  assert_false(plan_cta_dropped_to_one(&b, &b));
  assert_true(plan_vec_shrunk(16, 8));
  assert_false(plan_vec_shrunk(8, 8));

  plan_t p;
  char why[160];
  parse_ok("split m 128; split n 128; split k 64; arch sm90", PLAN_ARCH_SM90, &p);
  assert_true(plan_sm90_tile_ok(&p, TINY_FP16, why, sizeof why));
  p.warp_m = 32; /* wgmma M is 64 per warpgroup */
  assert_false(plan_sm90_tile_ok(&p, TINY_FP16, why, sizeof why));
  assert_non_null(strstr(why, "multiple of 64"));
  parse_ok("split m 128; split n 128; split k 8; arch sm90", PLAN_ARCH_SM90, &p);
  assert_false(plan_sm90_tile_ok(&p, TINY_FP16, why, sizeof why)); /* K multiple of 16 for fp16 */
  assert_true(plan_sm90_tile_ok(&p, TINY_FP32, why, sizeof why));  /* tf32: k8, 8 x 4 B = 32 B */
  parse_ok("split m 512; split n 128; split k 64; arch sm90", PLAN_ARCH_SM90, &p);
  assert_false(plan_sm90_tile_ok(&p, TINY_FP16, why, sizeof why)); /* TMA box <= 256 */
  parse_ok("split m 64; split n 4; arch sm90", PLAN_ARCH_SM90, &p);
  assert_false(plan_sm90_tile_ok(&p, TINY_FP16, why, sizeof why)); /* 4 x 2 B inner extent */
  assert_non_null(strstr(why, "16 bytes"));
  /* through plan_validate: a legal SM90 tile, then a tf32 K below the k8 step */
  plan_region_info r = gemm_region(1024, 1024, 1024);
  parse_ok("split m 128; split n 8; split k 64; warp_tile 64x8; arch sm90", PLAN_ARCH_SM90, &p);
  harp_error e = {0};
  if (plan_validate(&p, &r, plan_machine_gpu(PLAN_ARCH_SM90), NULL, &e)) fail_msg("%s", err_text(&e));
  r.in_dtype = r.out_dtype = TINY_FP32;
  parse_ok("split m 128; split n 8; split k 2; warp_tile 64x8; arch sm90", PLAN_ARCH_SM90, &p);
  assert_int_equal(plan_validate(&p, &r, plan_machine_gpu(PLAN_ARCH_SM90), NULL, &e), HARP_E_INVALID_ARG);
}

/* Fusion Δtime = max(ΔFLOPs/(peak·occ·eff), ΔBytes/(BW·occ)) + Δocc_time
 *               + fanout_penalty + layout_penalty − saved_bytes/BW */
static void test_fusion_delta(void **state) {
  (void)state;
  const plan_machine *m = plan_machine_gpu(PLAN_ARCH_SM80);
  plan_t p;
  parse_ok(SEED_DSL, PLAN_ARCH_SM80, &p);
  plan_region_info r = gemm_bias_relu_region(1024, 1024, 1024);
  plan_fusion_in in;
  memset(&in, 0, sizeof in);
  plan_resources_of(&p, m, &r, &in.before);
  in.after = in.before;
  in.dflops = 1048576;          /* a ReLU on the 1M outputs */
  in.saved_bytes = 2 * 2097152; /* its fp16 tensor written and read back */
  in.base_time = 1e-4;
  in.fanout = 1;
  in.in_dtype = TINY_FP16;
  plan_fusion_out o;
  plan_fusion_delta(&in, m, &o);
  double dwork = 1048576 / (312e12 * 0.09375 * 0.5), benefit = 4194304 / 2039e9;
  assert_close(o.dwork, dwork);
  assert_close(o.benefit, benefit);
  assert_close(o.dtime, dwork - benefit);
  assert_true(o.fuse);
  assert_int_equal(o.stops, 0);
  /* occupancy halves: Δocc_time = base_time * (occ_before/occ_after - 1) */
  in.after.occ = in.before.occ / 2;
  plan_fusion_delta(&in, m, &o);
  assert_close(o.docc_time, 1e-4);
  assert_false(o.fuse);
  in.after = in.before;
  /* three consumers: the producer is recomputed twice */
  in.fanout = 3;
  in.producer_time = 1e-3;
  plan_fusion_delta(&in, m, &o);
  assert_close(o.fanout_penalty, 2e-3);
  assert_false(o.fuse);
  in.fanout = 1;
  /* §4.2 STOPs: CTA/SM drops to 1, vector width shrinks, smem over 80% */
  in.after.cta_per_sm = 1;
  plan_fusion_delta(&in, m, &o);
  assert_true(o.stops & PLAN_STOP_CTA1);
  assert_false(o.fuse);
  in.after = in.before;
  in.vec_before = 16, in.vec_after = 8;
  plan_fusion_delta(&in, m, &o);
  assert_true(o.stops & PLAN_STOP_VEC_SHRINK);
  assert_close(o.layout_penalty, 0.25 * 1e-4);
  in.vec_before = in.vec_after = 0;
  in.after.smem_per_cta = 150000;
  plan_fusion_delta(&in, m, &o);
  assert_true(o.stops & PLAN_STOP_SMEM80);
  in.after = in.before;
  in.sm90_tile_broken = true; /* no meaning on sm80 */
  plan_fusion_delta(&in, m, &o);
  assert_int_equal(o.stops, 0);
  plan_fusion_delta(&in, plan_machine_gpu(PLAN_ARCH_SM90), &o);
  assert_true(o.stops & PLAN_STOP_SM90_TILE);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_seed_plan_sm80), cmocka_unit_test(test_sm80_regs_limited),
      cmocka_unit_test(test_sm90_warpgroups), cmocka_unit_test(test_smem_overflow),
      cmocka_unit_test(test_reg_overflow),   cmocka_unit_test(test_cpu_reading),
      cmocka_unit_test(test_time_formula),   cmocka_unit_test(test_cost_seed),
      cmocka_unit_test(test_splitk),         cmocka_unit_test(test_reread_bytes),
      cmocka_unit_test(test_thresholds),     cmocka_unit_test(test_fusion_delta),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
