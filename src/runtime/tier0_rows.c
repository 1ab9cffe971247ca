/* tier0_rows.c — tier 0's row kernels with run-time sizes: attention
 * (softmax(scale q k^T + mask, causal) v per batch and head, strided as
 * ct_attn reads it), the row softmax and the layernorm (ct_softmax,
 * ct_layernorm), all in fp32, a plain C loop per row.
 * tier0.c resolves the tensors; rows are shared out over threads.
 * Needs: tier0.h, pthreads.  Gives: rt_t0_attn_run, rt_t0_softmax_run,
 * rt_t0_layernorm_run. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>

#include "tier0.h"
#include "util/util.h"

/* ---- rows over threads ------------------------------------------------------------ */
typedef struct rows_job {
  int64_t nrows;
  int64_t next; /* atomic */
  void (*row)(const void *k, int64_t r, float *scratch);
  const void *k;
  size_t scratch; /* floats per thread */
  int failed;     /* atomic */
} rows_job;

static void *rows_worker(void *arg) {
  rows_job *j = arg;
  float *s = j->scratch ? malloc(j->scratch * sizeof *s) : NULL;
  if (j->scratch && !s) {
    __atomic_store_n(&j->failed, 1, __ATOMIC_RELAXED);
    return NULL;
  }
  for (int64_t r; (r = __atomic_fetch_add(&j->next, 8, __ATOMIC_RELAXED)) < j->nrows;)
    for (int64_t q = r; q < r + 8 && q < j->nrows; q++) j->row(j->k, q, s);
  free(s);
  return NULL;
}

/* row(k, r, scratch) for r in [0, nrows) on up to `threads` threads. */
static harp_status run_rows(harp_error *e, int64_t nrows, void (*row)(const void *, int64_t, float *), const void *k,
                            size_t scratch, int threads) {
  rows_job j = {.nrows = nrows, .row = row, .k = k, .scratch = scratch};
  rt_t0_on_threads(rows_worker, &j, nrows < 16 ? 1 : threads);
  if (j.failed) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory for a row's scratch");
  return HARP_OK;
}

/* ---- attention -------------------------------------------------------------------- */
/* Query row r (over batch, head, row) of a: scores, their softmax, times v. */
static void attn_row(const void *k, int64_t r, float *p) {
  const rt_t0_attn *a = k;
  const ct_attn *t = &a->t;
  int64_t i = r % t->M, h = r / t->M % t->H, b = r / t->M / t->H;
  const float *q = a->q + b * t->q_s[0] + h * t->q_s[1] + i * t->q_s[2];
  int64_t n_end = t->causal ? (i + 1 < t->N ? i + 1 : t->N) : t->N; /* top-left aligned */
  float mx = -INFINITY;
  for (int64_t j = 0; j < n_end; j++) {
    const float *kr = a->k + b * t->k_s[0] + h * t->k_s[1] + j * t->k_s[2];
    float s = 0.0f;
    for (int64_t d = 0; d < t->D; d++) s += q[d] * kr[d];
    s *= t->scale;
    if (t->has_mask) s += a->mask[b * t->mask_s[0] + h * t->mask_s[1] + i * t->mask_s[2] + j * t->mask_s[3]];
    p[j] = s;
    mx = s > mx ? s : mx;
  }
  float sum = 0.0f;
  for (int64_t j = 0; j < n_end; j++) sum += p[j] = expf(p[j] - mx);
  float *o = a->out + b * t->o_s[0] + h * t->o_s[1] + i * t->o_s[2];
  for (int64_t d = 0; d < t->DV; d++) o[d] = 0.0f;
  for (int64_t j = 0; j < n_end; j++) {
    const float *vr = a->v + b * t->v_s[0] + h * t->v_s[1] + j * t->v_s[2];
    float w = p[j] / sum;
    for (int64_t d = 0; d < t->DV; d++) o[d] += w * vr[d];
  }
}

harp_status rt_t0_attn_run(harp_error *e, const rt_t0_attn *a, int threads) {
  return run_rows(e, a->t.B * a->t.H * a->t.M, attn_row, a, (size_t)a->t.N + 1, threads);
}

/* ---- softmax and layernorm -------------------------------------------------------- */
static void softmax_row(const void *k, int64_t r, float *unused) {
  const rt_t0_row *w = k;
  const float *x = w->x + r * w->cols;
  float *y = w->y + r * w->cols, mx = -INFINITY, sum = 0.0f;
  for (int64_t c = 0; c < w->cols; c++) mx = x[c] > mx || x[c] != x[c] ? x[c] : mx;
  for (int64_t c = 0; c < w->cols; c++) sum += y[c] = expf(w->scale * (x[c] - mx));
  for (int64_t c = 0; c < w->cols; c++) y[c] /= sum;
}

harp_status rt_t0_softmax_run(harp_error *e, const rt_t0_row *w, int threads) {
  return run_rows(e, w->rows, softmax_row, w, 0, threads);
}

static void layernorm_row(const void *k, int64_t r, float *unused) {
  const rt_t0_row *w = k;
  const float *x = w->x + r * w->cols;
  float *y = w->y + r * w->cols, mean = 0.0f, var = 0.0f;
  for (int64_t c = 0; c < w->cols; c++) mean += x[c];
  mean /= (float)w->cols;
  for (int64_t c = 0; c < w->cols; c++) var += (x[c] - mean) * (x[c] - mean);
  float inv = 1.0f / sqrtf(var / (float)w->cols + w->eps);
  for (int64_t c = 0; c < w->cols; c++) {
    float v = (x[c] - mean) * inv;
    if (w->gamma) v *= w->gamma[c];
    if (w->beta) v += w->beta[c];
    y[c] = v;
  }
}

harp_status rt_t0_layernorm_run(harp_error *e, const rt_t0_row *w, int threads) {
  return run_rows(e, w->rows, layernorm_row, w, 0, threads);
}
