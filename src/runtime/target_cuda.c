/* target_cuda.c — the CUDA target of the compile pipeline: regions for the
 * GPU's description (sm80 / sm90), the Function (half operands of MMA
 * templates kept half), plans, the kernels with their launch list, and the
 * CUDA C.  NVRTC (the build stage) needs a runtime: gpu.c runs it.
 * Needs: pipeline.c, backend/cuda (cuda_model_build, cuda_print).
 * Gives: rt_target_cuda. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_plan.h"
#include "backend/cuda/region_cuda.h"
#include "harp/pipeline.h"
#include "harp/region.h"
#include "util/util.h"

/* The architecture and precision asked for (opts.arch, opts.precision);
 * strict fp32 and half rounding form fp32 attentions split from the start. */
static harp_status cuda_setup(rt_compile *c) {
  const char *name = c->opts.arch ? c->opts.arch : "sm80";
  cuda_arch arch;
  if (!cuda_arch_parse(name, &arch))
    return ut_fail(c->e, HARP_E_USAGE, NULL, "GPU target '%s': expected sm80 or sm90", name);
  c->arch = (int)arch;
  cuda_math math = CUDA_MATH_TF32;
  if (c->opts.precision && !cuda_math_parse(c->opts.precision, &math))
    return ut_fail(c->e, HARP_E_USAGE, NULL, "precision '%s': expected tf32, fp32, fp16 or bf16", c->opts.precision);
  c->math = (int)math;
  c->split_attention = math != CUDA_MATH_TF32;
  return HARP_OK;
}

/* As on the CPU, a CAST of an outside tensor in a row or epilogue region is
 * a region of its own (the generic loop nest converts contraction operands
 * only); split_attention: fp32 attentions stay matmuls and a softmax. */
/* The CUDA kernels have no int8 / uint8 yet (int8 mma is a later step):
 * the first node of either dtype is refused, named. */
static harp_status cuda_dtypes_ok(rt_compile *c) {
  for (int i = 0; i < c->g->n; i++) {
    const tiny_node *n = &c->g->nodes[i];
    if (n->dtype == TINY_I8 || n->dtype == TINY_U8)
      return ut_fail(c->e, HARP_E_UNSUPPORTED, n->id, "the CUDA backend has no %s tensors yet (use the cpu backend)",
                     tiny_dtype_name(n->dtype));
  }
  return HARP_OK;
}

/* Regions for the GPU; a ShapeSet build's lower corner replays its upper
 * corner's (opts.replay_regions: the same units in the same regions, the
 * attentions formed or split as there), so the box is decided once. */
static harp_status cuda_regions(rt_compile *c) {
  if (cuda_dtypes_ok(c)) return c->e->code;
  plan_machine_get(c->arch == CUDA_SM90 ? PLAN_ARCH_SM90 : PLAN_ARCH_SM80, &c->machine);
  const rg_formed *replay = c->opts.replay_regions ? c->opts.replay_regions->formed : NULL;
  if (replay) c->split_attention = replay->opt.half_attention_only;
  rg_options ro = {.no_operand_casts = true, .half_attention_only = c->split_attention, .algo_mask = cuda_plan_algo_mask(),
                   .replay = replay};
  return rt_form_regions(c, &ro);
}

static harp_status cuda_function(rt_compile *c) {
  fn_options fo = {.widen_half_temps = true, .half_mma_operands = true};
  return rt_build_function(c, &fo);
}

/* Every region's plan (the plan cache: what `harp tune --backend cuda`
 * measured for this GPU and ShapeSet, unless the options say not to),
 * from the algorithms the GPU templates implement (cuda_plan_algo_mask: no
 * fft_conv, so the default never names a kernel the GPU lacks and a --plan
 * naming one is a located error); Winograd only when a --plan names it
 * (cuda_plan_explicit_algo_mask: unmeasured on a GPU). */
static harp_status cuda_plans(rt_compile *c) {
  return rt_choose_plans(c, cuda_plan_algo_mask(), cuda_plan_explicit_algo_mask(), c->opts.no_plan_cache);
}

/* The kernels, each reading its region's plan (the template kernels mark
 * it applied or say why not); a region no template saw says so. */
static harp_status cuda_kernels(rt_compile *c) {
  cuda_model_free(c->tu);
  c->tu = NULL;
  for (int i = 0; i < c->plans.n; i++) c->plans.choice[i].applied = false;
  harp_status st = cuda_model_build(c->e, c->g, c->pv, c->f, c->syms, (cuda_arch)c->arch, c->plans.choice,
                                    (cuda_math)c->math, &c->knobs,
                                    &(cuda_syms){c->opts.ngen_syms, c->opts.gen_syms, c->opts.gen_hi}, &c->tu);
  c->plans.compiled = true;
  for (int i = 0; i < c->plans.n; i++) {
    rt_plan_choice *ch = &c->plans.choice[i];
    if (ch->has_plan && !ch->applied && !ch->note[0])
      snprintf(ch->note, sizeof ch->note, "a simple or generic GPU kernel: the plan is not read");
  }
  return st;
}

static harp_status cuda_code(rt_compile *c) {
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
static bool attention_declined(const rt_compile *c) {
  return !c->status && !c->stopped && !c->split_attention && c->tu && c->tu->nattn_generic > 0;
}

/* regions to kernels: what runs again when a template declined an attention */
static void cuda_partition(rt_compile *c) {
  rt_stage_run(c, RT_STAGE_REGIONS, cuda_regions);
  rt_stage_run(c, RT_STAGE_FUNCTION, cuda_function);
  rt_stage_run(c, RT_STAGE_PLANS, cuda_plans);
  rt_stage_run(c, RT_STAGE_KERNELS, cuda_kernels);
}

static harp_status cuda_drive(rt_compile *c) {
  if ((c->status = cuda_setup(c))) return c->status;
  rt_stages_analysis(c); /* normalize, indexbook, poly_view */
  cuda_partition(c);     /* regions, function, plans, kernels */
  if (attention_declined(c)) {
    c->split_attention = true;
    cuda_partition(c);
  }
  rt_stage_run(c, RT_STAGE_CODE, cuda_code);
  return c->status;
}

static void cuda_release(rt_compile *c) {
  cuda_model_free(c->tu);
  c->tu = NULL;
}

const rt_target rt_target_cuda = {.name = "cuda",
                                  .machines = {"sm80", "sm90"},
                                  .kernels_dump = "gpu",
                                  .code_dump = "cu",
                                  .regions_final = RT_STAGE_KERNELS,
                                  .drive = cuda_drive,
                                  .release = cuda_release};
