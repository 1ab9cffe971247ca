/* runmodel.h — for the reliability tests: compile a model file through the
 * public API, feed it fixed pseudo-random inputs, run it and keep its first
 * output; compare two outputs.  Header-only (each test is one executable). */
#ifndef HARP_TEST_RUNMODEL_H
#define HARP_TEST_RUNMODEL_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harp.h"

typedef struct rm_out {
  float *y; /* output 0 (fp32) */
  size_t n;
} rm_out;

/* Element count of input/output k. */
static inline size_t rm_numel(const harp_compiled *c, int k, bool out) {
  int64_t sh[HARP_MAX_RANK];
  int r = out ? harp_output_shape(c, k, sh) : harp_input_shape(c, k, sh);
  size_t n = 1;
  for (int d = 0; d < r; d++) n *= (size_t)sh[d];
  return n;
}

/* Fixed inputs for c (fp32 only: the models here are fp32), seed-free. */
static inline float **rm_inputs(const harp_compiled *c) {
  int ni = harp_num_inputs(c);
  float **in = calloc((size_t)ni + 1, sizeof *in);
  for (int k = 0; in && k < ni; k++) {
    size_t n = rm_numel(c, k, false);
    in[k] = malloc(n * sizeof(float) + 1);
    for (size_t i = 0; in[k] && i < n; i++) in[k][i] = (float)((i * 7919 + (size_t)k * 104729) % 2001) / 1000.0f - 1.0f;
  }
  return in;
}

static inline void rm_free_inputs(const harp_compiled *c, float **in) {
  for (int k = 0; in && k < harp_num_inputs(c); k++) free(in[k]);
  free(in);
}

/* One instance of c run once on in; output 0 into *out (malloc'd).  The
 * parameter block is `params`, else the file's own weights (ONNX), else
 * zeros (the .harp models of the fault test take their weights as inputs).  Returns 0, or -1 when the instance could
 * not be made, or harp_model_run's code (err says why). */
static inline int rm_run_with(const harp_compiled *c, const void *params, float **in, rm_out *out, char *err, size_t errcap) {
  size_t pb = harp_params_bytes(c);
  if (!params) params = harp_embedded_params(c);
  void *zeros = NULL;
  if (!params && pb) params = zeros = calloc(1, pb);
  harp_model *m = harp_model_init(c, params, pb);
  free(zeros);
  if (!m) {
    snprintf(err, errcap, "harp_model_init failed");
    return -1;
  }
  int no = harp_num_outputs(c);
  void **outs = calloc((size_t)no + 1, sizeof *outs);
  for (int k = 0; k < no; k++) outs[k] = calloc(rm_numel(c, k, true) + 1, sizeof(float));
  int rc = harp_model_run(m, (const void *const *)in, outs);
  if (rc) snprintf(err, errcap, "%s", harp_model_error(m) ? harp_model_error(m) : "run failed");
  out->n = rm_numel(c, 0, true);
  out->y = rc ? NULL : outs[0];
  for (int k = rc ? 0 : 1; k < no; k++) free(outs[k]);
  free(outs);
  harp_model_free(m);
  return rc;
}

static inline int rm_run(const harp_compiled *c, float **in, rm_out *out, char *err, size_t errcap) {
  return rm_run_with(c, NULL, in, out, err, errcap);
}

/* A parameter block for c with weight `names[i]` (counts[i] floats) filled
 * with a fixed pattern, the same whatever c's layout (malloc'd). */
static inline void *rm_params(const harp_compiled *c, const char *const *names, const size_t *counts) {
  unsigned char *b = calloc(1, harp_params_bytes(c) + 1);
  for (int w = 0; names[w]; w++) {
    float *p = (float *)(b + harp_param_offset(c, names[w]));
    for (size_t i = 0; i < counts[w]; i++) p[i] = (float)((i * 31 + (size_t)w * 17) % 97) / 97.0f - 0.5f;
  }
  return b;
}

/* The test's scratch directory: made from `tmpl` (mkdtemp), removed
 * whole; as cmocka group setup/teardown through rm_setup/rm_teardown. */
static char rm_dir[96];
static const char *rm_dir_template = "/tmp/harp-test-XXXXXX";
static inline int rm_setup(void **state) {
  (void)state;
  snprintf(rm_dir, sizeof rm_dir, "%s", rm_dir_template);
  return mkdtemp(rm_dir) ? 0 : -1;
}
static inline int rm_teardown(void **state) {
  (void)state;
  char cmd[160];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", rm_dir);
  return system(cmd) == 0 ? 0 : -1;
}

/* Largest |a-b| / (1 + |b|). */
static inline double rm_diff(const rm_out *a, const rm_out *b) {
  if (!a->y || !b->y || a->n != b->n) return INFINITY;
  double worst = 0;
  for (size_t i = 0; i < a->n; i++) {
    double d = fabs((double)a->y[i] - (double)b->y[i]) / (1 + fabs((double)b->y[i]));
    if (!(d <= worst)) worst = d; /* NaN counts as worst */
  }
  return worst;
}

#endif
