/* cuda_models.h — the CUDA backend's test models (issue 8): GEMM with M, N,
 * K not multiples of the tile; GEMM + bias + ReLU; conv 3x3 stride 1 and 2;
 * attention, causal and not; layernorm; softmax (plus an elementwise chain
 * and a reduction).  Shared by the NVRTC compile test and the GPU test. */
#ifndef HARP_CUDA_MODELS_H
#define HARP_CUDA_MODELS_H

#include <string.h>

#include "backend/cuda/cuda.h"

typedef enum cu_model_kind { CU_M_GEMM, CU_M_CONV, CU_M_ATTN, CU_M_SOFTMAX, CU_M_LAYERNORM, CU_M_EWISE, CU_M_REDUCE } cu_model_kind;

typedef struct cu_model {
  const char *name;
  cu_model_kind kind;
  bool contraction;
  cuda_gemm_spec g;
  cuda_conv_spec c;
  cuda_attn_spec a;
  cuda_rownorm_spec r;
  cuda_ew_spec ew;
  cuda_reduce_spec red;
} cu_model;

#define CU_NMODELS 17

static inline void cu_models(cu_model *m, cuda_arch arch) {
  memset(m, 0, sizeof(cu_model) * CU_NMODELS);
  int i = 0;
  /* GEMM, no size a multiple of the tile; K and N only even (4-byte cp.async chunks) */
  m[i].name = "gemm_tail", m[i].kind = CU_M_GEMM, m[i].contraction = true;
  cuda_gemm_spec_init(&m[i].g, 333, 250, 190, TINY_FP16);
  m[i].g.tune.arch = arch;
  i++;
  /* GEMM + bias + ReLU, the plan of seed 000 §7.1: tile 128x64x64, 2 stages, vec 8 */
  m[i].name = "gemm_bias_relu", m[i].kind = CU_M_GEMM, m[i].contraction = true;
  cuda_gemm_spec_init(&m[i].g, 256, 512, 128, TINY_FP16);
  m[i].g.tune.arch = arch;
  m[i].g.tune.bm = 128, m[i].g.tune.bn = 64, m[i].g.tune.bk = 64, m[i].g.tune.stages = 2;
  m[i].g.tune.warp_m = 64, m[i].g.tune.warp_n = 32, m[i].g.tune.vec = 8;
  m[i].g.n_epi = 2;
  m[i].g.epi[0].kind = CUDA_EPI_BIAS_N, m[i].g.epi[0].dtype = TINY_FP16;
  m[i].g.epi[1].kind = CUDA_EPI_RELU;
  i++;
  /* a big square GEMM, the default tile (the benchmark's shape class) */
  m[i].name = "gemm_1024", m[i].kind = CU_M_GEMM, m[i].contraction = true;
  cuda_gemm_spec_init(&m[i].g, 1024, 1024, 1024, TINY_FP16);
  m[i].g.tune.arch = arch;
  i++;
  m[i].name = "conv3x3_s1", m[i].kind = CU_M_CONV, m[i].contraction = true;
  cuda_conv_spec_init(&m[i].c, 2, 64, 28, 28, 64, 3, 3, TINY_FP16);
  m[i].c.pad[0] = m[i].c.pad[1] = m[i].c.pad[2] = m[i].c.pad[3] = 1;
  m[i].c.n_epi = 2;
  m[i].c.epi[0].kind = CUDA_EPI_BIAS_M, m[i].c.epi[0].dtype = TINY_FP16;
  m[i].c.epi[1].kind = CUDA_EPI_RELU;
  i++;
  m[i].name = "conv3x3_s2", m[i].kind = CU_M_CONV, m[i].contraction = true;
  cuda_conv_spec_init(&m[i].c, 2, 32, 28, 28, 64, 3, 3, TINY_FP16);
  m[i].c.pad[0] = m[i].c.pad[1] = m[i].c.pad[2] = m[i].c.pad[3] = 1;
  m[i].c.stride[0] = m[i].c.stride[1] = 2;
  i++;
  m[i].name = "attention", m[i].kind = CU_M_ATTN, m[i].contraction = true;
  cuda_attn_spec_init(&m[i].a, 2, 4, 256, 256, 64, TINY_FP16);
  i++;
  m[i].name = "attention_causal", m[i].kind = CU_M_ATTN, m[i].contraction = true;
  cuda_attn_spec_init(&m[i].a, 2, 4, 256, 256, 64, TINY_FP16);
  m[i].a.causal = true;
  i++;
  m[i].name = "layernorm", m[i].kind = CU_M_LAYERNORM;
  m[i].r = (cuda_rownorm_spec){.rows = 512, .cols = 768, .row_stride = 768, .in_dtype = TINY_FP16,
                               .out_dtype = TINY_FP16, .eps = 1e-5f, .has_gamma = true, .has_beta = true,
                               .gamma_dtype = TINY_FP16, .beta_dtype = TINY_FP16};
  i++;
  m[i].name = "softmax", m[i].kind = CU_M_SOFTMAX;
  m[i].r = (cuda_rownorm_spec){.rows = 512, .cols = 1000, .row_stride = 1000, .in_dtype = TINY_FP16, .out_dtype = TINY_FP16};
  i++;
  m[i].name = "ewise_bias_gelu", m[i].kind = CU_M_EWISE;
  cuda_ew_spec *e = &m[i].ew;
  e->rank = 2, e->shape[0] = 512, e->shape[1] = 768, e->ninputs = 2;
  e->in[0].dtype = TINY_FP16, e->in[0].strides[0] = 768, e->in[0].strides[1] = 1;
  e->in[1].dtype = TINY_FP16, e->in[1].strides[1] = 1;
  e->instr[0] = (cuda_ew_instr){.op = TINY_INPUT, .input = 0, .dtype = TINY_FP16};
  e->instr[1] = (cuda_ew_instr){.op = TINY_INPUT, .input = 1, .dtype = TINY_FP16};
  e->instr[2] = (cuda_ew_instr){.op = TINY_ADD, .a = 0, .b = 1, .dtype = TINY_FP32};
  e->instr[3] = (cuda_ew_instr){.op = TINY_GELU, .a = 2, .dtype = TINY_FP32};
  e->ninstr = 4;
  e->out_dtype = TINY_FP16;
  i++;
  m[i].name = "reduce_sum_rows", m[i].kind = CU_M_REDUCE;
  m[i].red = (cuda_reduce_spec){.outer = 512, .red = 768, .inner = 1, .s_outer = 768, .s_red = 1, .s_inner = 1,
                                .op = TINY_RSUM, .in_dtype = TINY_FP16, .out_dtype = TINY_FP32};
  i++;
  /* fp32 contractions (--precision): TF32 with tails (B N-major: ld.shared.b32 fragments) */
  m[i].name = "gemm_tf32", m[i].kind = CU_M_GEMM, m[i].contraction = true;
  cuda_gemm_spec_init(&m[i].g, 333, 250, 190, TINY_FP32);
  m[i].g.tune.arch = arch;
  i++;
  /* TF32, B K-major (torch's Linear weight): wgmma .tf32 on the SM90 template */
  m[i].name = "gemm_tf32_tn", m[i].kind = CU_M_GEMM, m[i].contraction = true;
  cuda_gemm_spec_init(&m[i].g, 1024, 1024, 512, TINY_FP32);
  m[i].g.b_sk = 1, m[i].g.b_sn = 512;
  m[i].g.tune.arch = arch;
  i++;
  /* strict fp32: the SIMT template */
  m[i].name = "gemm_fp32", m[i].kind = CU_M_GEMM, m[i].contraction = true;
  cuda_gemm_spec_init(&m[i].g, 333, 250, 190, TINY_FP32);
  m[i].g.math = CUDA_MATH_FP32;
  m[i].g.tune.arch = arch;
  i++;
  /* fp32 operands rounded to fp16 into m16n8k16, + bias, ReLU */
  m[i].name = "gemm_fp16r", m[i].kind = CU_M_GEMM, m[i].contraction = true;
  cuda_gemm_spec_init(&m[i].g, 256, 512, 128, TINY_FP32);
  m[i].g.math = CUDA_MATH_FP16;
  m[i].g.tune.arch = arch;
  m[i].g.n_epi = 2;
  m[i].g.epi[0].kind = CUDA_EPI_BIAS_N, m[i].g.epi[0].dtype = TINY_FP32;
  m[i].g.epi[1].kind = CUDA_EPI_RELU;
  i++;
  m[i].name = "conv3x3_tf32", m[i].kind = CU_M_CONV, m[i].contraction = true;
  cuda_conv_spec_init(&m[i].c, 2, 64, 28, 28, 64, 3, 3, TINY_FP32);
  m[i].c.pad[0] = m[i].c.pad[1] = m[i].c.pad[2] = m[i].c.pad[3] = 1;
  m[i].c.n_epi = 2;
  m[i].c.epi[0].kind = CUDA_EPI_BIAS_M, m[i].c.epi[0].dtype = TINY_FP32;
  m[i].c.epi[1].kind = CUDA_EPI_RELU;
  i++;
  m[i].name = "attention_tf32", m[i].kind = CU_M_ATTN, m[i].contraction = true;
  cuda_attn_spec_init(&m[i].a, 2, 4, 256, 256, 64, TINY_FP32);
  m[i].a.causal = true;
  i++;
  for (int j = 0; j < i; j++) {
    m[j].c.tune.arch = m[j].a.tune.arch = m[j].r.tune.arch = m[j].ew.tune.arch = m[j].red.tune.arch = arch;
  }
}

static inline harp_status cu_model_gen(harp_error *e, cuda_module *mod, const cu_model *m) {
  switch (m->kind) {
  case CU_M_GEMM: return cuda_gen_gemm(e, mod, &m->g, m->name);
  case CU_M_CONV: return cuda_gen_conv(e, mod, &m->c, m->name);
  case CU_M_ATTN: return cuda_gen_attn(e, mod, &m->a, m->name);
  case CU_M_SOFTMAX: return cuda_gen_softmax(e, mod, &m->r, m->name);
  case CU_M_LAYERNORM: return cuda_gen_layernorm(e, mod, &m->r, m->name);
  case CU_M_EWISE: return cuda_gen_ewise(e, mod, &m->ew, m->name);
  case CU_M_REDUCE: return cuda_gen_reduce(e, mod, &m->red, m->name);
  }
  return HARP_E_INTERNAL;
}

#endif
