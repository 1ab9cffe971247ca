/* plan_test_util.h — regions, machines and helpers shared by test_plan_*.c. */
#ifndef PLAN_TEST_UTIL_H
#define PLAN_TEST_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harp/plan.h"

/* The seed 000 §1.7 DSL example, verbatim. */
static const char *const SEED_DSL =
    "split m 128; split n 64; split k 64;\n"
    "reorder m.o n.o k.o m.i.o n.i.o k.i.o m.i.i n.i.i k.i.i;\n"
    "bind m.o block.y; bind n.o block.x; bind m.i.o warp.y; bind n.i.o warp.x;\n"
    "pipeline k.i stages=2;\n"
    "cache_read A smem at=k.i pingpong=true;\n"
    "cache_read B smem at=k.i pingpong=true;\n"
    "vectorize n.i.i 8;\n"
    "predicate_tail m.i.i n.i.i k.i.i;\n"
    "epilogue bias relu;\n";

/* The seed 000 §12.5 JSON example with the values of §1.7 / §7.1: the first
 * alternative of each "a|b" (arch sm80, matmul implicit_gemm). */
static const char *const SEED_JSON =
    "{\n"
    "  \"tile\":[128,64,64],\n"
    "  \"stages\":2,\n"
    "  \"bind\":{\"m.o\":\"block.y\",\"n.o\":\"block.x\",\"m.i.o\":\"warp.y\",\"n.i.o\":\"warp.x\"},\n"
    "  \"warp_tile\":\"64x64\",\n"
    "  \"cache\":[{\"tensor\":\"A\",\"where\":\"smem\",\"at\":\"k.i\",\"pingpong\":true},"
    "{\"tensor\":\"B\",\"where\":\"smem\",\"at\":\"k.i\",\"pingpong\":true}],\n"
    "  \"vectorize\":{\"axis\":\"n.i.i\",\"width\":8},\n"
    "  \"predicate_tail\":[\"m.i.i\",\"n.i.i\",\"k.i.i\"],\n"
    "  \"epilogue\":[\"bias\",\"relu\"],\n"
    "  \"arch\":\"sm80\",\n"
    "  \"layout_hints\":{\"A_swizzle\":true,\"B_swizzle\":true,\"C_stride\":\"row\"},\n"
    "  \"algo_choice\":{\"matmul\":\"implicit_gemm\"},\n"
    "  \"local_edges\":[{\"from\":\"sum_k\",\"to\":\"relu\",\"buffer\":\"reg\"}]\n"
    "}\n";

/* A matmul region C[m,n] = sum_k A[m,k] B[k,n], fp16 in, fp32 acc, fp16 out. */
static inline plan_region_info gemm_region(int64_t M, int64_t N, int64_t K) {
  plan_region_info r;
  memset(&r, 0, sizeof r);
  r.name = "gemm";
  r.pattern = PLAN_PAT_MATMUL;
  r.naxes = 3;
  r.axes[0] = (plan_axis_info){"m", M, false, PLAN_ROLE_AUTO};
  r.axes[1] = (plan_axis_info){"n", N, false, PLAN_ROLE_AUTO};
  r.axes[2] = (plan_axis_info){"k", K, true, PLAN_ROLE_AUTO};
  r.in_dtype = TINY_FP16;
  r.acc_dtype = TINY_FP32;
  r.out_dtype = TINY_FP16;
  return r;
}

/* Seed 000 §7.1: GEMM + bias + ReLU, one region, sum_k -> relu in registers. */
static inline plan_region_info gemm_bias_relu_region(int64_t M, int64_t N, int64_t K) {
  plan_region_info r = gemm_region(M, N, K);
  r.name = "gemm_bias_relu";
  r.epilogue_known = true;
  r.nepi = 2;
  r.epilogue[0] = PLAN_EPI_BIAS;
  r.epilogue[1] = PLAN_EPI_RELU;
  r.nedges = 1;
  snprintf(r.edges[0].from, PLAN_NAME_MAX, "sum_k");
  snprintf(r.edges[0].to, PLAN_NAME_MAX, "relu");
  r.edges[0].buffer = PLAN_BUF_REG;
  return r;
}

/* A fixed AVX-512 CPU (2 cores, 1 MiB L2 per core) so CPU numbers do not
 * depend on the machine running the tests. */
static inline plan_machine fixed_cpu(void) {
  plan_machine m;
  memset(&m, 0, sizeof m);
  m.arch = PLAN_ARCH_CPU;
  snprintf(m.name, sizeof m.name, "test cpu");
  m.sm_count = 2;
  m.clock_ghz = 2.5;
  m.fma_units = 2;
  m.simd_bytes = 64;
  m.peak_fp32 = 2 * 2.5e9 * 2 * 16 * 2; /* 320 GFLOP/s */
  m.peak_tc16 = m.peak_fp32;
  m.mem_bw = 20e9;
  m.l1_bytes = 32 * 1024;
  m.l2_bytes = 1024 * 1024;
  m.l3_bytes = 32 * 1024 * 1024;
  m.smem_per_sm = m.smem_per_cta_max = m.l2_bytes;
  m.regs_per_sm = m.regs_per_thread_max = 32;
  m.max_warps_per_sm = m.max_threads_per_cta = m.max_cta_per_sm = m.warp_size = 1;
  m.avx512 = m.avx2 = m.fma = true;
  return m;
}

static inline char *err_text(const harp_error *e) {
  static char buf[2048]; /* tests only */
  harp_error_format(e, buf, sizeof buf);
  return buf;
}

#endif
