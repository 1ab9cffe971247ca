/* cuda_plan.h — Schedule Plan (harp/plan.h) -> CUDA tuning and epilogues. */
#ifndef HARP_CUDA_PLAN_H
#define HARP_CUDA_PLAN_H

#include "backend/cuda/cuda.h"
#include "harp/plan.h"

/* Fill `out` from plan p (arch sm80 | sm90).  splitk_factor is the slice
 * count of plan_splitk_factor when p chooses splitk_* (splitk_parallel ->
 * CUDA_SPLITK_ATOMIC, splitk_reduce -> REDUCE, splitk_serial -> SERIAL);
 * winograd_2x2_3x3 / 4x4 / 3x3 -> tune.winograd 2 / 4 / -1 (choose).
 * Unsupported for algorithms the GPU templates lack (fft). */
harp_status cuda_tune_from_plan(harp_error *e, const plan_t *p, int splitk_factor, cuda_tune *out);
/* The algorithms the CUDA default plans choose from (plan_search_opts.algo_mask):
 * implicit_gemm, the three split-K forms, both attention softmaxes. */
unsigned cuda_plan_algo_mask(void);
/* Those a --plan may name beyond them (plan_search_opts.explicit_mask): the
 * Winograd forms (cuda_wino.c), never a default until measured on a GPU.
 * fft_conv has no GPU kernel: a --plan naming it is a located error. */
unsigned cuda_plan_explicit_algo_mask(void);
/* algo_choice.attention = online_softmax (else streaming_softmax_2pass). */
bool cuda_attn_online_from_plan(const plan_t *p);
/* One plan epilogue op; bias is per row (conv: per output channel) or per
 * column; the residual's strides are the caller's to set. */
harp_status cuda_epi_from_plan(harp_error *e, plan_epi op, bool per_row_bias, tiny_dtype dtype, cuda_epi *out);

#endif
