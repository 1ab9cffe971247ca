/* cuda_plan.c — the Schedule Plan read by the CUDA templates.
 * Needs: cuda.h, harp/plan.h.  Gives: cuda_tune_from_plan, cuda_plan_algo_mask,
 * cuda_plan_explicit_algo_mask, cuda_epi_from_plan.
 * The table of docs/cuda.md ("How a Schedule Plan maps onto cuda_tune") in
 * code, so the region layer can call one function per kernel. */
#include <stdio.h>
#include <string.h>

#include "backend/cuda/cuda_plan.h"

harp_status cuda_tune_from_plan(harp_error *e, const plan_t *p, int splitk_factor, cuda_tune *out) {
  if (p->arch != PLAN_ARCH_SM80 && p->arch != PLAN_ARCH_SM90)
    return ut_fail(e, HARP_E_INVALID_ARG, NULL, "plan arch %s is not a GPU", plan_arch_name(p->arch));
  cuda_tune_default(out, p->arch == PLAN_ARCH_SM90 ? CUDA_SM90 : CUDA_SM80);
  if (p->ntile >= 1) out->bm = (int)p->tile[0];
  if (p->ntile >= 2) out->bn = (int)p->tile[1];
  if (p->ntile >= 3) out->bk = (int)p->tile[2];
  out->stages = p->stages;
  /* SM90: the template fixes 64 x BN per consumer warpgroup; the plan's
   * warpgroup tile is recorded but not needed. */
  if (p->arch == PLAN_ARCH_SM80) out->warp_m = p->warp_m, out->warp_n = p->warp_n;
  out->vec = p->vec_width;
  out->no_swizzle = !(p->a_swizzle && p->b_swizzle);
  for (int i = 0; i < p->nbind; i++)
    if (p->bind[i].target == PLAN_T_BLOCK_X && p->ntile >= 1) {
      char mo[PLAN_NAME_MAX + 4];
      snprintf(mo, sizeof mo, "%s.o", p->tile_axes[0]);
      if (!strcmp(p->bind[i].axis, mo)) out->raster_m_x = true;
    }
  switch (p->algo[PLAN_KEY_MATMUL]) {
  case PLAN_ALGO_SPLITK_PARALLEL: out->splitk_kind = CUDA_SPLITK_ATOMIC; break;
  case PLAN_ALGO_SPLITK_REDUCE: out->splitk_kind = CUDA_SPLITK_REDUCE; break;
  case PLAN_ALGO_SPLITK_SERIAL: out->splitk_kind = CUDA_SPLITK_SERIAL; break;
  default: break;
  }
  if (plan_algo_is_splitk(p->algo[PLAN_KEY_MATMUL])) out->splitk = splitk_factor > 1 ? splitk_factor : 1;
  switch (p->algo[PLAN_KEY_CONV]) {
  case PLAN_ALGO_NONE:
  case PLAN_ALGO_IMPLICIT_GEMM: break;
  case PLAN_ALGO_WINOGRAD_2X2_3X3: out->winograd = 2; break;
  case PLAN_ALGO_WINOGRAD_4X4_3X3: out->winograd = 4; break;
  case PLAN_ALGO_WINOGRAD_3X3: out->winograd = -1; break; /* cuda_wino_tile chooses */
  default:
    return ut_fail(e, HARP_E_UNSUPPORTED, NULL, "conv algorithm %s on the GPU (implicit_gemm, winograd_*)",
                   plan_algo_name(p->algo[PLAN_KEY_CONV]));
  }
  return HARP_OK;
}

unsigned cuda_plan_algo_mask(void) {
  return 1u << PLAN_ALGO_IMPLICIT_GEMM | 1u << PLAN_ALGO_SPLITK_SERIAL | 1u << PLAN_ALGO_SPLITK_PARALLEL |
         1u << PLAN_ALGO_SPLITK_REDUCE | 1u << PLAN_ALGO_STREAMING_SOFTMAX_2PASS | 1u << PLAN_ALGO_ONLINE_SOFTMAX;
}

unsigned cuda_plan_explicit_algo_mask(void) {
  return 1u << PLAN_ALGO_WINOGRAD_3X3 | 1u << PLAN_ALGO_WINOGRAD_2X2_3X3 | 1u << PLAN_ALGO_WINOGRAD_4X4_3X3;
}

bool cuda_attn_online_from_plan(const plan_t *p) { return p->algo[PLAN_KEY_ATTENTION] == PLAN_ALGO_ONLINE_SOFTMAX; }

harp_status cuda_epi_from_plan(harp_error *e, plan_epi op, bool per_row_bias, tiny_dtype dtype, cuda_epi *out) {
  memset(out, 0, sizeof *out);
  out->dtype = dtype;
  switch (op) {
  case PLAN_EPI_BIAS: out->kind = per_row_bias ? CUDA_EPI_BIAS_M : CUDA_EPI_BIAS_N; break;
  case PLAN_EPI_RELU: out->kind = CUDA_EPI_RELU; break;
  case PLAN_EPI_SILU: out->kind = CUDA_EPI_SILU; break;
  case PLAN_EPI_GELU: out->kind = CUDA_EPI_GELU; break;
  case PLAN_EPI_RESIDUAL: out->kind = CUDA_EPI_RESIDUAL; break;
  default: return ut_fail(e, HARP_E_INVALID_ARG, NULL, "unknown epilogue op %d", (int)op);
  }
  return HARP_OK;
}
