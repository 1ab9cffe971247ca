/* tier0_gemm.c — the shape-generic contraction kernels of tier 0, compiled
 * into libharp at harp's build: a GEMM with run-time M / N / K and strides
 * (masked tails: every tile is computed whole in registers and only its
 * valid part stored), and the convolution as that GEMM over an im2col
 * packing done while B is packed.  Both apply the epilogue steps of the
 * kernel layer (ct_epi) before the store.  tier0.c reads the regions
 * (src/kernel/contract.c) and hands the pointers here.
 *
 * The micro-kernel is 6 rows x 32 columns of fp32 with AVX-512 or AVX2 +
 * FMA intrinsics chosen once by CPUID (a plain C loop elsewhere); B is
 * packed per 32-column panel, A per 6-row strip, both zero-filled past the
 * edge.  Panels are shared out over threads (pthreads, a counter).  A
 * depthwise conv runs directly, one plane per task.
 * Needs: contract.h (ct_epi), pthreads.  Gives: rt_t0_gemm_run, rt_t0_conv_run, rt_t0_epilogue. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tier0.h"
#include "util/util.h"

#define MR 6
#define NR 32

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define T0_X86 1
#endif

/* ---- micro-kernels: t[MR][NR] = ap[K][MR]^T bp[K][NR] ------------------------- */
static void ukr_c(int64_t K, const float *ap, const float *bp, float *t) {
  float acc[MR][NR] = {{0}};
  for (int64_t k = 0; k < K; k++)
    for (int i = 0; i < MR; i++)
      for (int j = 0; j < NR; j++) acc[i][j] += ap[k * MR + i] * bp[k * NR + j];
  memcpy(t, acc, sizeof acc);
}

#ifdef T0_X86
__attribute__((target("avx512f"))) static void ukr_avx512(int64_t K, const float *ap, const float *bp, float *t) {
  __m512 c[MR][2];
  for (int i = 0; i < MR; i++) c[i][0] = c[i][1] = _mm512_setzero_ps();
  for (int64_t k = 0; k < K; k++) {
    __m512 b0 = _mm512_loadu_ps(bp + k * NR), b1 = _mm512_loadu_ps(bp + k * NR + 16);
    for (int i = 0; i < MR; i++) {
      __m512 a = _mm512_set1_ps(ap[k * MR + i]);
      c[i][0] = _mm512_fmadd_ps(a, b0, c[i][0]);
      c[i][1] = _mm512_fmadd_ps(a, b1, c[i][1]);
    }
  }
  for (int i = 0; i < MR; i++) {
    _mm512_storeu_ps(t + i * NR, c[i][0]);
    _mm512_storeu_ps(t + i * NR + 16, c[i][1]);
  }
}

/* 16 of the panel's columns from col (12 ymm accumulators: AVX2 has 16 registers). */
__attribute__((target("avx2,fma"))) static void ukr_avx2_half(int64_t K, const float *ap, const float *bp, float *t,
                                                             int col) {
  __m256 c[MR][2];
  for (int i = 0; i < MR; i++) c[i][0] = c[i][1] = _mm256_setzero_ps();
  for (int64_t k = 0; k < K; k++) {
    __m256 b0 = _mm256_loadu_ps(bp + k * NR + col), b1 = _mm256_loadu_ps(bp + k * NR + col + 8);
    for (int i = 0; i < MR; i++) {
      __m256 a = _mm256_broadcast_ss(ap + k * MR + i);
      c[i][0] = _mm256_fmadd_ps(a, b0, c[i][0]);
      c[i][1] = _mm256_fmadd_ps(a, b1, c[i][1]);
    }
  }
  for (int i = 0; i < MR; i++) {
    _mm256_storeu_ps(t + i * NR + col, c[i][0]);
    _mm256_storeu_ps(t + i * NR + col + 8, c[i][1]);
  }
}

static void ukr_avx2(int64_t K, const float *ap, const float *bp, float *t) {
  ukr_avx2_half(K, ap, bp, t, 0);
  ukr_avx2_half(K, ap, bp, t, 16);
}
#endif

typedef void (*ukr_fn)(int64_t K, const float *ap, const float *bp, float *t);

/* The widest micro-kernel this CPU runs (decided once). */
static ukr_fn pick_ukr(void) {
#ifdef T0_X86
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return ukr_avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return ukr_avx2;
#endif
  return ukr_c;
}

/* ---- the epilogue ------------------------------------------------------------------ */
/* max(lo, x) / min(hi, x) keeping a NaN x, as the reference's max / min. */
static float keep_max(float lo, float x) { return lo > x ? lo : x; }
static float keep_min(float hi, float x) { return hi < x ? hi : x; }

/* One step s with operand v[q * vs] (bias, residual: a stride of 0
 * broadcasts) on x[0..n): a loop per step, so that the simple ones vectorize. */
static void epi_step(const ct_epi *s, const float *v, int64_t vs, float *x, int64_t n) {
  switch (s->kind) {
    case CT_EPI_BIAS_M:
    case CT_EPI_BIAS_N:
    case CT_EPI_RESIDUAL:
      if (s->mul)
        for (int64_t q = 0; q < n; q++) x[q] *= v[q * vs];
      else
        for (int64_t q = 0; q < n; q++) x[q] += v[q * vs];
      break;
    case CT_EPI_RELU:
      for (int64_t q = 0; q < n; q++) x[q] = x[q] < 0 ? 0.0f : x[q];
      break;
    case CT_EPI_GELU:
      for (int64_t q = 0; q < n; q++) x[q] = (float)(0.5 * x[q] * (1.0 + erf(x[q] * 0.70710678118654752440)));
      break;
    case CT_EPI_SILU:
      for (int64_t q = 0; q < n; q++) x[q] = x[q] / (1.0f + expf(-x[q]));
      break;
    case CT_EPI_SIGMOID:
      for (int64_t q = 0; q < n; q++) x[q] = 1.0f / (1.0f + expf(-x[q]));
      break;
    case CT_EPI_SCALE:
      for (int64_t q = 0; q < n; q++) x[q] = x[q] * s->scale + s->shift;
      break;
    case CT_EPI_CLAMP:
      for (int64_t q = 0; q < n; q++) x[q] = keep_min(s->hi, keep_max(s->lo, x[q]));
      break;
    case CT_EPI_ROUND: break; /* tier0.c declines a rounding: fp32 only */
    case CT_EPI_RINT:
      for (int64_t q = 0; q < n; q++) x[q] = rintf(x[q]); /* halves to even: the default rounding mode */
      break;
    case CT_EPI_DIV:
      for (int64_t q = 0; q < n; q++) x[q] = x[q] / s->scale;
      break;
    case CT_EPI_GATE:
      for (int64_t q = 0; q < n; q++) x[q] = x[q] * keep_min(s->hi, keep_max(s->lo, x[q] * s->scale + s->shift));
      break;
    case CT_EPI_RESFMA: break; /* tier0.c declines it (fp32_epi): the int8 kernels' step */
  }
}

/* tier0.h's rt_t0_epilogue_row; residuals are laid out like the output. */
void rt_t0_epilogue_row(const rt_t0_epi *ep, int nep, float *x, int64_t n, int64_t b0, int64_t b1, int64_t m, int64_t n0,
                        int64_t roff, bool conv) {
  static const float none = 0.0f;
  for (int i = 0; i < nep; i++) {
    const ct_epi *s = &ep[i].e;
    const float *v = &none;
    int64_t vs = 0;
    if (s->kind == CT_EPI_BIAS_M) v = ep[i].p + m;
    else if (s->kind == CT_EPI_BIAS_N) v = ep[i].p + n0, vs = 1;
    else if (s->kind == CT_EPI_RESIDUAL && conv) v = ep[i].p + roff, vs = 1;
    else if (s->kind == CT_EPI_RESIDUAL) v = ep[i].p + b0 * s->s_b0 + b1 * s->s_b1 + m * s->s_m + n0 * s->s_n, vs = s->s_n;
    epi_step(s, v, vs, x, n);
  }
}

float rt_t0_epilogue(const rt_t0_epi *ep, int nep, float x, int64_t b0, int64_t b1, int64_t m, int64_t n, int64_t roff,
                     bool conv) {
  rt_t0_epilogue_row(ep, nep, &x, 1, b0, b1, m, n, roff, conv);
  return x;
}

/* ---- packing ---------------------------------------------------------------------- */
/* Rows m0..m0+MR of A (strided) as [K][MR], zeros past M. */
static void pack_a(const rt_t0_gemm *g, const float *a, int64_t m0, float *ap) {
  for (int i = 0; i < MR; i++) {
    int64_t m = m0 + i;
    if (m >= g->M) {
      for (int64_t k = 0; k < g->K; k++) ap[k * MR + i] = 0.0f;
      continue;
    }
    const float *row = a + m * g->a_sm;
    for (int64_t k = 0; k < g->K; k++) ap[k * MR + i] = row[k * g->a_sk];
  }
}

/* Columns n0..n0+NR of B ([K][N] at strides b_sk, b_sn) as [K][NR], zeros past N. */
static void pack_b(const float *b, int64_t K, int64_t N, int64_t b_sk, int64_t b_sn, int64_t n0, float *bp) {
  int64_t nn = N - n0 < NR ? N - n0 : NR;
  for (int64_t k = 0; k < K; k++) {
    const float *row = b + k * b_sk + n0 * b_sn;
    float *o = bp + k * NR;
    if (b_sn == 1) memcpy(o, row, (size_t)nn * sizeof *o);
    else
      for (int64_t j = 0; j < nn; j++) o[j] = row[j * b_sn];
    for (int64_t j = nn; j < NR; j++) o[j] = 0.0f;
  }
}

/* o[j0..j1) = plane row ih from column iw (consecutive), zeros outside the plane. */
static void copy_run(float *o, const float *plane, const ct_conv *c, int64_t ih, int64_t iw, int j0, int j1) {
  if (ih < 0 || ih >= c->h) {
    for (int j = j0; j < j1; j++) o[j] = 0.0f;
    return;
  }
  const float *row = plane + ih * c->w;
  int j = j0;
  for (; j < j1 && iw + (j - j0) < 0; j++) o[j] = 0.0f;
  int64_t avail = c->w - (iw + (j - j0)); /* columns left in the row from here */
  int n = (int)(j1 - j < avail ? j1 - j : avail > 0 ? avail : 0);
  if (n > 0) memcpy(o + j, row + iw + (j - j0), (size_t)n * sizeof *o);
  for (j += n; j < j1; j++) o[j] = 0.0f;
}

/* The im2col column block n0..n0+NR of image x (one group's channels) as
 * [K][NR], K = (c, r, s): the window point or 0 in the padding. */
static void pack_im2col(const rt_t0_conv *cv, const float *x, int64_t n0, float *bp) {
  const ct_conv *c = &cv->c;
  int64_t cg = c->c / c->groups, P = cv->oh * cv->ow;
  int64_t ih0[NR], iw0[NR];
  int nn = P - n0 < NR ? (int)(P - n0) : NR;
  for (int j = 0; j < NR; j++) {
    int64_t p = j < nn ? n0 + j : 0;
    ih0[j] = p / cv->ow * c->stride[0] - c->pad[0];
    iw0[j] = p % cv->ow * c->stride[1] - c->pad[1];
  }
  /* runs of the panel's pixels along one output row: with stride 1 each is
   * one row segment of the input (memcpy, padding as zeros) */
  int run_at[NR + 1], nrun = 0;
  for (int j = 0; j < nn; j++)
    if (!j || ih0[j] != ih0[j - 1]) run_at[nrun++] = j;
  run_at[nrun] = nn;
  bool unit = c->stride[1] == 1;
  int64_t k = 0;
  for (int64_t ch = 0; ch < cg; ch++)
    for (int64_t r = 0; r < c->kh; r++)
      for (int64_t s = 0; s < c->kw; s++, k++) {
        float *o = bp + k * NR;
        const float *plane = x + ch * c->h * c->w;
        if (unit) {
          for (int q = 0; q < nrun; q++)
            copy_run(o, plane, c, ih0[run_at[q]] + r * c->dil[0], iw0[run_at[q]] + s * c->dil[1], run_at[q], run_at[q + 1]);
          for (int j = nn; j < NR; j++) o[j] = 0.0f;
          continue;
        }
        for (int j = 0; j < NR; j++) {
          int64_t ih = ih0[j] + r * c->dil[0], iw = iw0[j] + s * c->dil[1];
          o[j] = j < nn && ih >= 0 && ih < c->h && iw >= 0 && iw < c->w ? plane[ih * c->w + iw] : 0.0f;
        }
      }
}

/* ---- the parallel loop over B panels ---------------------------------------------- */
typedef struct job {
  const rt_t0_gemm *g;  /* the GEMM, or NULL for a conv */
  const rt_t0_conv *cv;
  const float *a, *b;   /* this batch's A and B (conv: the group's weights and image) */
  float *c;
  const float *ap;      /* A packed: ceil(M / MR) strips of [K][MR] */
  int64_t M, N, K, b0, b1, grp; /* b0, b1: the batch (conv: the image); grp: the conv's group */
  int64_t b_sk, b_sn;   /* a GEMM's B strides */
  bool im2col;          /* a conv: B is the image's im2col (1x1 convs are GEMM regions already) */
  int npanel;
  int next;             /* the next panel (atomic) */
  ukr_fn ukr;
  int failed;           /* a thread found no scratch (atomic) */
} job;

/* One 6 x 32 tile t at (m0, n0) through the epilogue into C, a row at a time. */
static void store_tile(const job *j, const float *t, int64_t m0, int64_t n0) {
  int64_t nv = j->N - n0 < NR ? j->N - n0 : NR;
  float row[NR];
  for (int i = 0; i < MR && m0 + i < j->M; i++) {
    int64_t m = m0 + i;
    memcpy(row, t + i * NR, sizeof(float) * (size_t)nv);
    if (j->g) {
      const rt_t0_gemm *g = j->g;
      rt_t0_epilogue_row(g->epi, g->nepi, row, nv, j->b0, j->b1, m, n0, 0, false);
      float *c = j->c + m * g->c_sm + n0 * g->c_sn;
      for (int64_t q = 0; q < nv; q++) c[q * g->c_sn] = row[q];
    } else {
      const rt_t0_conv *cv = j->cv;
      int64_t oc = j->grp * j->M + m;
      rt_t0_epilogue_row(cv->epi, cv->nepi, row, nv, 0, 0, oc, n0, (j->b0 * cv->c.oc + oc) * j->N + n0, true);
      memcpy(j->c + m * j->N + n0, row, sizeof(float) * (size_t)nv);
    }
  }
}

static void *worker(void *arg) {
  job *j = arg;
  float *bp = malloc((size_t)j->K * NR * sizeof *bp), t[MR * NR];
  if (!bp) {
    __atomic_store_n(&j->failed, 1, __ATOMIC_RELAXED);
    return NULL;
  }
  for (int p; (p = __atomic_fetch_add(&j->next, 1, __ATOMIC_RELAXED)) < j->npanel;) {
    int64_t n0 = (int64_t)p * NR;
    if (j->im2col) pack_im2col(j->cv, j->b, n0, bp);
    else pack_b(j->b, j->K, j->N, j->b_sk, j->b_sn, n0, bp);
    for (int64_t m0 = 0; m0 < j->M; m0 += MR) {
      j->ukr(j->K, j->ap + m0 / MR * j->K * MR, bp, t);
      store_tile(j, t, m0, n0);
    }
  }
  free(bp);
  return NULL;
}

/* Run j's panels on up to `threads` threads (the caller is one). */
static harp_status run_job(harp_error *e, job *j, int threads) {
  static ukr_fn ukr;
  if (!__atomic_load_n(&ukr, __ATOMIC_ACQUIRE)) __atomic_store_n(&ukr, pick_ukr(), __ATOMIC_RELEASE);
  j->ukr = ukr;
  j->npanel = (int)((j->N + NR - 1) / NR);
  int nt = threads < j->npanel ? threads : j->npanel;
  if ((double)j->M * (double)j->N * (double)j->K < 1 << 18) nt = 1; /* a thread costs more than it saves */
  rt_t0_on_threads(worker, j, nt);
  if (j->failed) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory for a %lld x 32 panel", (long long)j->K);
  return HARP_OK;
}

/* A packed once for all panels. */
static float *pack_all_a(const rt_t0_gemm *g, const float *a) {
  int64_t strips = (g->M + MR - 1) / MR;
  float *ap = ut_xmalloc((size_t)(strips * g->K * MR) * sizeof *ap + 1);
  for (int64_t s = 0; ap && s < strips; s++) pack_a(g, a, s * MR, ap + s * g->K * MR);
  return ap;
}

/* g as its transpose, C^T = B^T x A^T: the same sums in the same order
 * (each output's products in k order), the epilogue's per-row and
 * per-column steps swapped. */
static rt_t0_gemm transposed(const rt_t0_gemm *g) {
  rt_t0_gemm t = *g;
  t.M = g->N, t.N = g->M, t.a = g->b, t.b = g->a;
  for (int i = 0; i < 2; i++) t.a_sb[i] = g->b_sb[i], t.b_sb[i] = g->a_sb[i];
  t.a_sm = g->b_sn, t.a_sk = g->b_sk, t.b_sk = g->a_sk, t.b_sn = g->a_sm;
  t.c_sm = g->c_sn, t.c_sn = g->c_sm;
  for (int i = 0; i < g->nepi; i++) {
    ct_epi *s = &t.epi[i].e;
    if (s->kind == CT_EPI_BIAS_M || s->kind == CT_EPI_BIAS_N) s->kind = s->kind == CT_EPI_BIAS_M ? CT_EPI_BIAS_N : CT_EPI_BIAS_M;
    int64_t sm = s->s_m;
    s->s_m = s->s_n, s->s_n = sm;
  }
  return t;
}

harp_status rt_t0_gemm_run(harp_error *e, const rt_t0_gemm *g0, int threads) {
  /* C stored by columns (a 1x1 conv read as pixels x channels: C's rows
   * are its pixels, adjacent in memory): computed as the transpose, so
   * that a tile's rows are stored contiguous and B's rows copied whole */
  rt_t0_gemm gt;
  const rt_t0_gemm *g = g0;
  if (g0->M > 1 && g0->c_sm == 1 && g0->c_sn != 1) gt = transposed(g0), g = &gt;
  harp_status st = HARP_OK;
  for (int64_t b0 = 0; b0 < g->batch[0] && !st; b0++)
    for (int64_t b1 = 0; b1 < g->batch[1] && !st; b1++) {
      const float *a = g->a + b0 * g->a_sb[0] + b1 * g->a_sb[1];
      float *ap = pack_all_a(g, a);
      if (!ap) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory packing a %lld x %lld operand", (long long)g->M,
                              (long long)g->K);
      job j = {.g = g, .a = a, .b = g->b + b0 * g->b_sb[0] + b1 * g->b_sb[1], .b_sk = g->b_sk, .b_sn = g->b_sn,
               .c = g->c + b0 * g->c_sb[0] + b1 * g->c_sb[1], .ap = ap, .M = g->M, .N = g->N, .K = g->K, .b0 = b0, .b1 = b1};
      st = run_job(e, &j, threads);
      free(ap);
    }
  return st;
}

/* The conv's weights of group grp as a GEMM's A: [OC/G][C/G * kh * kw], dense. */
static rt_t0_gemm weights_as_a(const rt_t0_conv *cv, int64_t grp) {
  const ct_conv *c = &cv->c;
  int64_t K = c->c / c->groups * c->kh * c->kw, M = c->oc / c->groups;
  return (rt_t0_gemm){.M = M, .K = K, .a = cv->w + grp * M * K, .a_sm = K, .a_sk = 1};
}

/* ---- depthwise: one plane per task --------------------------------------------- */
typedef struct dw_job {
  const rt_t0_conv *cv;
  int64_t next; /* atomic: the next (image, channel) plane */
} dw_job;

/* The first output column whose tap at offset off (iw = ow * s + off)
 * lies in the row, and one past the last: ow in [*lo, *hi). */
static void dw_cols(int64_t off, int64_t s, int64_t w, int64_t ow, int64_t *lo, int64_t *hi) {
  *lo = off >= 0 ? 0 : (-off + s - 1) / s;
  *hi = w - 1 - off < 0 ? 0 : (w - 1 - off) / s + 1;
  if (*hi > ow) *hi = ow;
  if (*lo > *hi) *lo = *hi;
}

/* Plane t (image t / c, channel t % c) of a depthwise conv, directly: an
 * output row at a time, each tap over the columns it reaches (a stride-1
 * row vectorizes), then the epilogue over the row. */
static void dw_plane(const rt_t0_conv *cv, int64_t t) {
  const ct_conv *c = &cv->c;
  int64_t img = t / c->c, ch = t % c->c, P = cv->oh * cv->ow, s = c->stride[1];
  const float *x = cv->x + t * c->h * c->w, *w = cv->w + ch * c->kh * c->kw;
  float *y = cv->y + t * P;
  for (int64_t oh = 0; oh < cv->oh; oh++) {
    float *yr = y + oh * cv->ow;
    for (int64_t ow = 0; ow < cv->ow; ow++) yr[ow] = 0.0f;
    for (int64_t r = 0; r < c->kh; r++) {
      int64_t ih = oh * c->stride[0] - c->pad[0] + r * c->dil[0];
      if (ih < 0 || ih >= c->h) continue;
      for (int64_t q = 0; q < c->kw; q++) {
        int64_t off = q * c->dil[1] - c->pad[1], lo, hi;
        dw_cols(off, s, c->w, cv->ow, &lo, &hi);
        const float *xr = x + ih * c->w + off;
        float wv = w[r * c->kw + q];
        for (int64_t ow = lo; ow < hi; ow++) yr[ow] += xr[ow * s] * wv;
      }
    }
    rt_t0_epilogue_row(cv->epi, cv->nepi, yr, cv->ow, 0, 0, ch, oh * cv->ow, (img * c->oc + ch) * P + oh * cv->ow, true);
  }
}

static void *dw_worker(void *arg) {
  dw_job *j = arg;
  int64_t n = j->cv->c.n * j->cv->c.c;
  for (int64_t t; (t = __atomic_fetch_add(&j->next, 1, __ATOMIC_RELAXED)) < n;) dw_plane(j->cv, t);
  return NULL;
}

/* A depthwise conv (groups == channels == output channels): planes over threads. */
static harp_status run_depthwise(const rt_t0_conv *cv, int threads) {
  dw_job j = {.cv = cv};
  rt_t0_on_threads(dw_worker, &j, threads);
  return HARP_OK;
}

harp_status rt_t0_conv_run(harp_error *e, const rt_t0_conv *cv, int threads) {
  const ct_conv *c = &cv->c;
  if (c->groups == c->c && c->oc == c->c) return run_depthwise(cv, threads);
  int64_t P = cv->oh * cv->ow, cg = c->c / c->groups;
  harp_status st = HARP_OK;
  for (int64_t grp = 0; grp < c->groups && !st; grp++) {
    rt_t0_gemm wa = weights_as_a(cv, grp);
    float *ap = pack_all_a(&wa, wa.a);
    if (!ap) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory packing a conv's weights");
    for (int64_t img = 0; img < c->n && !st; img++) {
      job j = {.cv = cv, .b = cv->x + (img * c->c + grp * cg) * c->h * c->w, .im2col = true,
               .c = cv->y + (img * c->oc + grp * wa.M) * P, .ap = ap, .M = wa.M, .N = P, .K = wa.K, .b0 = img, .grp = grp};
      st = run_job(e, &j, threads);
    }
    free(ap);
  }
  return st;
}
