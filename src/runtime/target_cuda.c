/* target_cuda.c — the CUDA target of the compile pipeline: regions for the
 * GPU's description (sm80 / sm90), the Function (half operands of MMA
 * templates kept half), plans, the kernels with their launch list, and the
 * CUDA C.  NVRTC (the build stage) needs a runtime: gpu.c runs it.
 * Needs: pipeline.c, backend/cuda (cuda_model_build, cuda_print).
 * Gives: hp_target_cuda. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/region_cuda.h"
#include "harp/pipeline.h"
#include "harp/region.h"
#include "util/util.h"

/* The architecture and precision asked for (opts.arch, opts.precision);
 * strict fp32 and half rounding form fp32 attentions split from the start. */
static hp_status cuda_setup(hp_compile *c) {
  const char *arch = c->opts.arch ? c->opts.arch : "sm80";
  if (strcmp(arch, "sm80") && strcmp(arch, "sm90"))
    return hp_fail(c->e, HP_E_USAGE, NULL, "GPU target '%s': expected sm80 or sm90", arch);
  c->arch = !strcmp(arch, "sm90") ? CUDA_SM90 : CUDA_SM80;
  cuda_math math = CUDA_MATH_TF32;
  if (c->opts.precision && !cuda_math_parse(c->opts.precision, &math))
    return hp_fail(c->e, HP_E_USAGE, NULL, "precision '%s': expected tf32, fp32, fp16 or bf16", c->opts.precision);
  c->math = (int)math;
  c->split_attention = math != CUDA_MATH_TF32;
  return HP_OK;
}

/* As on the CPU, a CAST of an outside tensor in a row or epilogue region is
 * a region of its own (the generic loop nest converts contraction operands
 * only); split_attention: fp32 attentions stay matmuls and a softmax. */
static hp_status cuda_regions(hp_compile *c) {
  plan_machine_get(c->arch == CUDA_SM90 ? PLAN_ARCH_SM90 : PLAN_ARCH_SM80, &c->machine);
  rg_options ro = {.no_operand_casts = true, .half_attention_only = c->split_attention};
  return hp_form_regions(c, &ro);
}

static hp_status cuda_function(hp_compile *c) {
  fn_options fo = {.widen_half_temps = true, .half_mma_operands = true};
  return hp_build_function(c, &fo);
}

/* Every region's plan (no plan cache: the tuner measures CPU kernels); the
 * kernels read them only where --plan overrides a region. */
static hp_status cuda_plans(hp_compile *c) { return hp_choose_plans(c, 0, true); }

static hp_status cuda_kernels(hp_compile *c) {
  cuda_model_free(c->tu);
  c->tu = NULL;
  const hp_plan_choice *plans = c->opts.nplan_overrides ? c->plans.choice : NULL;
  return cuda_model_build(c->e, c->g, c->pv, c->f, c->syms, (cuda_arch)c->arch, plans, (cuda_math)c->math, &c->knobs,
                          &c->tu);
}

static hp_status cuda_code(hp_compile *c) {
  free(c->source);
  c->source = NULL;
  return cuda_print(c->e, c->tu->mod, &c->source);
}

/* An fp32 attention is one region (the fused template) as TF32; when the
 * template cannot read one (an operand's layout: a key read transposed, as
 * PyTorch's ONNX export of scaled_dot_product_attention scales K^T) the
 * whole attention would be one generic kernel (2 ms of a BERT-base layer on
 * an H200): form again with fp32 attentions split into matmuls and a
 * softmax. */
static bool attention_declined(const hp_compile *c) {
  return !c->status && !c->stopped && !c->split_attention && c->tu && c->tu->nattn_generic > 0;
}

static hp_status cuda_drive(hp_compile *c) {
  if ((c->status = cuda_setup(c))) return c->status;
  hp_stage_run(c, HP_STAGE_NORMALIZE, hp_stage_normalize);
  hp_stage_run(c, HP_STAGE_INDEXBOOK, hp_stage_indexbook);
  hp_stage_run(c, HP_STAGE_POLY_VIEW, hp_stage_poly_view);
  hp_stage_run(c, HP_STAGE_REGIONS, cuda_regions);
  hp_stage_run(c, HP_STAGE_FUNCTION, cuda_function);
  hp_stage_run(c, HP_STAGE_PLANS, cuda_plans);
  hp_stage_run(c, HP_STAGE_KERNELS, cuda_kernels);
  if (attention_declined(c)) {
    c->split_attention = true;
    hp_stage_run(c, HP_STAGE_REGIONS, cuda_regions);
    hp_stage_run(c, HP_STAGE_FUNCTION, cuda_function);
    hp_stage_run(c, HP_STAGE_PLANS, cuda_plans);
    hp_stage_run(c, HP_STAGE_KERNELS, cuda_kernels);
  }
  hp_stage_run(c, HP_STAGE_CODE, cuda_code);
  return c->status;
}

static void cuda_release(hp_compile *c) {
  cuda_model_free(c->tu);
  c->tu = NULL;
}

const hp_target hp_target_cuda = {"cuda", "gpu", "cu", HP_STAGE_KERNELS, cuda_drive, cuda_release};
