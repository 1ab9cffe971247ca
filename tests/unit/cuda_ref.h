/* cuda_ref.h — naive fp64-accumulating references for the CUDA kernel tests
 * (GEMM with epilogues, NCHW conv, attention). */
#ifndef HARP_CUDA_REF_H
#define HARP_CUDA_REF_H

#include <math.h>

#include "cuda_testutil.h"

/* ---- references ---------------------------------------------------------------------- */
static inline float ref_epi(const cuda_epi *ep, int n_epi, cu_buf *const *eb, float v, int64_t b0, int64_t b1, int64_t m,
                     int64_t n) {
  for (int i = 0; i < n_epi; i++) {
    const cuda_epi *x = &ep[i];
    switch (x->kind) {
    case CUDA_EPI_BIAS_M: v += cu_get(eb[i], m); break;
    case CUDA_EPI_BIAS_N: v += cu_get(eb[i], n); break;
    case CUDA_EPI_RELU: v = v < 0 ? 0 : v; break;
    case CUDA_EPI_GELU: v = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f)); break;
    case CUDA_EPI_SILU: v = v / (1.0f + expf(-v)); break;
    case CUDA_EPI_SIGMOID: v = 1.0f / (1.0f + expf(-v)); break;
    case CUDA_EPI_SCALE: v *= x->scale; break;
    case CUDA_EPI_RESIDUAL: v += cu_get(eb[i], b0 * x->s_b0 + b1 * x->s_b1 + m * x->s_m + n * x->s_n); break;
    default: break;
    }
  }
  return v;
}

static inline void ref_gemm(const cuda_gemm_spec *s, const cu_buf *A, const cu_buf *B, cu_buf *const *eb, float *C) {
  for (int64_t b0 = 0; b0 < s->batch[0]; b0++)
    for (int64_t b1 = 0; b1 < s->batch[1]; b1++)
      for (int64_t m = 0; m < s->M; m++)
        for (int64_t n = 0; n < s->N; n++) {
          double acc = 0;
          for (int64_t k = 0; k < s->K; k++)
            acc += (double)cu_get(A, b0 * s->a_sb[0] + b1 * s->a_sb[1] + m * s->a_sm + k * s->a_sk) *
                   cu_get(B, b0 * s->b_sb[0] + b1 * s->b_sb[1] + k * s->b_sk + n * s->b_sn);
          C[b0 * s->c_sb[0] + b1 * s->c_sb[1] + m * s->c_sm + n * s->c_sn] =
              ref_epi(s->epi, s->n_epi, eb, (float)acc, b0, b1, m, n);
        }
}

static inline void ref_conv(const cuda_conv_spec *s, const cu_buf *x, const cu_buf *w, cu_buf *const *eb, float *y) {
  int64_t oh, ow;
  assert_true(cuda_conv_out_hw(s, &oh, &ow));
  int64_t cg = s->c / s->groups, ocg = s->oc / s->groups;
  for (int64_t n = 0; n < s->n; n++)
    for (int64_t o = 0; o < s->oc; o++)
      for (int64_t i = 0; i < oh; i++)
        for (int64_t j = 0; j < ow; j++) {
          double acc = 0;
          int64_t g = o / ocg;
          for (int64_t c = 0; c < cg; c++)
            for (int64_t a = 0; a < s->kh; a++)
              for (int64_t bb = 0; bb < s->kw; bb++) {
                int64_t ih = i * s->stride[0] - s->pad[0] + a * s->dil[0], iw = j * s->stride[1] - s->pad[1] + bb * s->dil[1];
                if (ih < 0 || ih >= s->h || iw < 0 || iw >= s->w) continue;
                acc += (double)cu_get(x, ((n * s->c + g * cg + c) * s->h + ih) * s->w + iw) *
                       cu_get(w, ((o * cg + c) * s->kh + a) * s->kw + bb);
              }
          int64_t yo = ((n * s->oc + o) * oh + i) * ow + j;
          float v = (float)acc;
          for (int e = 0; e < s->n_epi; e++) {
            const cuda_epi *x2 = &s->epi[e];
            if (x2->kind == CUDA_EPI_BIAS_M) v += cu_get(eb[e], o);
            else if (x2->kind == CUDA_EPI_RESIDUAL) v += cu_get(eb[e], yo);
            else v = ref_epi(x2, 1, &eb[e], v, 0, 0, 0, 0);
          }
          y[yo] = v;
        }
}

static inline void ref_attn(const cuda_attn_spec *s, const cu_buf *q, const cu_buf *k, const cu_buf *v, const cu_buf *mask,
                     float *o) {
  double scale = s->scale != 0 ? s->scale : 1.0 / sqrt((double)s->d);
  double *sc = malloc(sizeof(double) * (size_t)s->n);
  for (int64_t bh = 0; bh < s->b * s->h; bh++)
    for (int64_t i = 0; i < s->m; i++) {
      double mx = -INFINITY;
      for (int64_t j = 0; j < s->n; j++) {
        double acc = 0;
        for (int64_t d = 0; d < s->d; d++)
          acc += (double)cu_get(q, (bh * s->m + i) * s->d + d) * cu_get(k, (bh * s->n + j) * s->d + d);
        acc *= scale;
        if (s->has_mask)
          acc += cu_get(mask, (bh / s->h) * s->mask_s[0] + (bh % s->h) * s->mask_s[1] + i * s->mask_s[2] + j * s->mask_s[3]);
        if (s->causal && j > i) acc = -INFINITY;
        sc[j] = acc;
        if (acc > mx) mx = acc;
      }
      double l = 0;
      for (int64_t j = 0; j < s->n; j++) l += (sc[j] = mx == -INFINITY ? 0 : exp(sc[j] - mx));
      for (int64_t d = 0; d < s->dv; d++) {
        double acc = 0;
        for (int64_t j = 0; j < s->n; j++) acc += sc[j] * cu_get(v, (bh * s->n + j) * s->dv + d);
        o[(bh * s->m + i) * s->dv + d] = l > 0 ? (float)(acc / l) : 0.0f;
      }
    }
  free(sc);
}

#endif
