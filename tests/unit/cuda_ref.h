/* cuda_ref.h — naive fp64-accumulating references for the CUDA kernel tests
 * (GEMM with epilogues, NCHW conv, attention). */
#ifndef HARP_CUDA_REF_H
#define HARP_CUDA_REF_H

#include <math.h>

#include "cuda_testutil.h"

/* ---- references ---------------------------------------------------------------------- */
/* fp32 -> TF32 as the SM80 template rounds (hk_tf32: to nearest, ties away
 * from zero; Inf and NaN kept), written independently of it. */
static inline float cu_tf32(float v) {
  if (!isfinite(v)) return v;
  uint32_t u;
  memcpy(&u, &v, 4);
  u = (u + 0x1000u) & 0xffffe000u;
  memcpy(&v, &u, 4);
  return v;
}
/* fp32 -> TF32 as the SM90 template's wgmma reads it: the top 19 bits. */
static inline float cu_tf32_trunc(float v) {
  uint32_t u;
  memcpy(&u, &v, 4);
  u &= 0xffffe000u;
  memcpy(&v, &u, 4);
  return v;
}
/* An operand value as the contraction of `math` multiplies it: fp32 operands
 * rounded to TF32 (the SM90 template truncates) / fp16 / bf16, or kept
 * (strict fp32); 16-bit ones as stored. */
static inline float ref_opnd(cuda_math math, bool sm90, tiny_dtype t, float v) {
  if (t != TINY_FP32) return v;
  switch (math) {
  case CUDA_MATH_TF32: return sm90 ? cu_tf32_trunc(v) : cu_tf32(v);
  case CUDA_MATH_FP16: return ut_round_f16(v);
  case CUDA_MATH_BF16: return ut_round_bf16(v);
  default: return v;
  }
}
static inline float ref_epi(const cuda_epi *ep, int n_epi, cu_buf *const *eb, float v, int64_t b0, int64_t b1, int64_t m,
                     int64_t n) {
  for (int i = 0; i < n_epi; i++) {
    const cuda_epi *x = &ep[i];
    switch (x->kind) {
    case CUDA_EPI_BIAS_M: v = x->mul ? v * cu_get(eb[i], m) : v + cu_get(eb[i], m); break;
    case CUDA_EPI_BIAS_N: v = x->mul ? v * cu_get(eb[i], n) : v + cu_get(eb[i], n); break;
    case CUDA_EPI_RELU: v = v < 0 ? 0 : v; break;
    case CUDA_EPI_GELU: v = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f)); break;
    case CUDA_EPI_SILU: v = v / (1.0f + expf(-v)); break;
    case CUDA_EPI_SIGMOID: v = 1.0f / (1.0f + expf(-v)); break;
    case CUDA_EPI_SCALE: v = v * x->scale + x->shift; break;
    case CUDA_EPI_CLAMP: v = v < x->lo ? x->lo : v > x->hi ? x->hi : v; break;
    case CUDA_EPI_RESIDUAL: {
      float r = cu_get(eb[i], b0 * x->s_b0 + b1 * x->s_b1 + m * x->s_m + n * x->s_n);
      v = x->mul ? v * r : v + r;
      break;
    }
    default: break;
    }
  }
  return v;
}

static inline void ref_gemm(const cuda_gemm_spec *s, const cu_buf *A, const cu_buf *B, cu_buf *const *eb, float *C) {
  bool sm90 = s->tune.arch == CUDA_SM90;
  for (int64_t b0 = 0; b0 < s->batch[0]; b0++)
    for (int64_t b1 = 0; b1 < s->batch[1]; b1++)
      for (int64_t m = 0; m < s->M; m++)
        for (int64_t n = 0; n < s->N; n++) {
          double acc = 0;
          for (int64_t k = 0; k < s->K; k++)
            acc += (double)ref_opnd(s->math, sm90, A->t, cu_get(A, b0 * s->a_sb[0] + b1 * s->a_sb[1] + m * s->a_sm + k * s->a_sk)) *
                   ref_opnd(s->math, sm90, B->t, cu_get(B, b0 * s->b_sb[0] + b1 * s->b_sb[1] + k * s->b_sk + n * s->b_sn));
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
                acc += (double)ref_opnd(s->math, false, x->t, cu_get(x, ((n * s->c + g * cg + c) * s->h + ih) * s->w + iw)) *
                       ref_opnd(s->math, false, w->t, cu_get(w, ((o * cg + c) * s->kh + a) * s->kw + bb));
              }
          int64_t yo = ((n * s->oc + o) * oh + i) * ow + j;
          float v = (float)acc;
          for (int e = 0; e < s->n_epi; e++) {
            const cuda_epi *x2 = &s->epi[e];
            float t = x2->kind == CUDA_EPI_BIAS_M ? cu_get(eb[e], o) : x2->kind == CUDA_EPI_RESIDUAL ? cu_get(eb[e], yo) : 0;
            if (x2->kind == CUDA_EPI_BIAS_M || x2->kind == CUDA_EPI_RESIDUAL) v = x2->mul ? v * t : v + t;
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

/* Tiny semantics on floats, the way the interpreter computes them.  A spec
 * of no instruction, too many, or an op the reference lacks fails the test
 * (fail_msg longjmps; the returns after it are for the compiler). */
static inline float ref_ew_eval(const cuda_ew_spec *s, cu_buf *const *in, int64_t idx) {
  float v[CUDA_MAX_EW_INSTR];
  if (s->ninstr < 1 || s->ninstr > CUDA_MAX_EW_INSTR) {
    fail_msg("ew_eval: %d instructions (1 to %d)", s->ninstr, CUDA_MAX_EW_INSTR);
    return NAN;
  }
  for (int i = 0; i < s->ninstr; i++) {
    const cuda_ew_instr *I = &s->instr[i];
    float a = I->a >= 0 && I->a < i ? v[I->a] : 0, b = I->b >= 0 && I->b < i ? v[I->b] : 0,
          c = I->c >= 0 && I->c < i ? v[I->c] : 0;
    switch (I->op) {
    case TINY_INPUT: {
      int64_t off = 0, rem = idx;
      for (int d = s->rank - 1; d >= 0; d--) {
        off += (rem % s->shape[d]) * s->in[I->input].strides[d];
        rem /= s->shape[d];
      }
      v[i] = cu_get(in[I->input], off);
      break;
    }
    case TINY_CONST: v[i] = (float)I->imm; break;
    case TINY_ADD: v[i] = a + b; break;
    case TINY_SUB: v[i] = a - b; break;
    case TINY_MUL: v[i] = a * b; break;
    case TINY_MAX: v[i] = a > b ? a : b; break;
    case TINY_GELU: v[i] = 0.5f * a * (1.0f + erff(a * 0.70710678118654752f)); break;
    case TINY_CMPLT: v[i] = a < b; break;
    case TINY_WHERE: v[i] = a != 0 ? b : c; break;
    case TINY_EXP2: v[i] = exp2f(a); break;
    case TINY_SQRT: v[i] = sqrtf(a); break;
    case TINY_RECIP: v[i] = 1.0f / a; break;
    case TINY_RELU: v[i] = a < 0 ? 0 : a; break;
    case TINY_CAST: v[i] = cu_round(I->dtype, a); break;
    default: fail_msg("ew_eval: op %s not in the reference", tiny_op_name(I->op)); return NAN;
    }
  }
  return v[s->ninstr - 1];
}


static inline void ref_reduce(const cuda_reduce_spec *s, const cu_buf *in, float *want) {
  for (int64_t a = 0; a < s->outer; a++)
    for (int64_t c = 0; c < s->inner; c++) {
      double acc = s->op == TINY_RSUM ? 0 : s->op == TINY_RMAX ? -INFINITY : INFINITY;
      for (int64_t j = 0; j < s->red; j++) {
        double x = cu_get(in, a * s->s_outer + j * s->s_red + c * s->s_inner);
        acc = s->op == TINY_RSUM ? acc + x : s->op == TINY_RMAX ? (x > acc ? x : acc) : (x < acc ? x : acc);
      }
      if (s->has_init)
        acc = s->op == TINY_RSUM ? acc + s->init : s->op == TINY_RMAX ? fmax(acc, s->init) : fmin(acc, s->init);
      want[a * s->inner + c] = (float)acc;
    }
}

/* Softmax (ln false) or layernorm with two-pass mean/variance in double
 * (independent of the kernel's Welford). */
static inline void ref_rownorm(const cuda_rownorm_spec *s, bool ln, const cu_buf *x, const cu_buf *g, const cu_buf *bt,
                               float *want) {
  for (int64_t row = 0; row < s->rows; row++) {
    const int64_t o = row * s->row_stride;
    if (!ln) {
      double sc = s->scale != 0 ? s->scale : 1.0, mx = -INFINITY, l = 0;
      for (int64_t c = 0; c < s->cols; c++) mx = fmax(mx, cu_get(x, o + c) * sc);
      for (int64_t c = 0; c < s->cols; c++) l += exp(cu_get(x, o + c) * sc - mx);
      for (int64_t c = 0; c < s->cols; c++) want[row * s->cols + c] = (float)(exp(cu_get(x, o + c) * sc - mx) / l);
    } else {
      double mean = 0, var = 0;
      for (int64_t c = 0; c < s->cols; c++) mean += cu_get(x, o + c);
      mean /= (double)s->cols;
      for (int64_t c = 0; c < s->cols; c++) var += (cu_get(x, o + c) - mean) * (cu_get(x, o + c) - mean);
      var /= (double)s->cols;
      for (int64_t c = 0; c < s->cols; c++) {
        double v = (cu_get(x, o + c) - mean) / sqrt(var + s->eps);
        if (s->has_gamma) v *= cu_get(g, c);
        if (s->has_beta) v += cu_get(bt, c);
        want[row * s->cols + c] = (float)v;
      }
    }
  }
}

#endif
