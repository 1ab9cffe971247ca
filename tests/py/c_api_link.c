/* c_api_link.c — one program that links a `harp compile` package (the
 * specification's model_init / model_run / model_free, model.h) and libharp
 * (harp.h's harp_model_*) together, and runs the same model through both:
 * the library's names must not clash with the package's (docs/c-api.md).
 * Built and run by test_public_api.py; every input is fp32, no weights.
 * Usage: c_api_link MODEL; prints "max |diff| X" and exits 0, or 1. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harp.h"
#include "model.h"

static size_t numel(const long *shape) {
  size_t n = 1;
  for (long d = 0; d < shape[0]; d++) n *= (size_t)shape[1 + d];
  return n;
}

int main(int argc, char **argv) {
  if (argc != 2) return 1;
  harp_error err = {0};
  harp_options opts = {.backend = HARP_BACKEND_CPU};
  harp_compiled *c = NULL;
  if (harp_compile_file(&err, argv[1], &opts, &c)) {
    char buf[2048];
    harp_error_format(&err, buf, sizeof buf);
    fprintf(stderr, "%s\n", buf);
    return 1;
  }
  int nin = model_num_inputs(), nout = model_num_outputs();
  if (nin != harp_num_inputs(c) || nout != harp_num_outputs(c) || model_params_bytes() != harp_params_bytes(c)) {
    fprintf(stderr, "the package and the library disagree on the signature\n");
    return 1;
  }
  const void **in = calloc((size_t)nin, sizeof *in);
  void **out_pkg = calloc((size_t)nout, sizeof *out_pkg), **out_lib = calloc((size_t)nout, sizeof *out_lib);
  for (int k = 0; k < nin; k++) {
    size_t n = numel(model_input_shapes[k]);
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = (float)((i * 7 + (size_t)k * 3) % 11) / 11.0f - 0.5f;
    in[k] = x;
  }
  for (int k = 0; k < nout; k++) {
    out_pkg[k] = calloc(numel(model_output_shapes[k]), sizeof(float));
    out_lib[k] = calloc(numel(model_output_shapes[k]), sizeof(float));
  }
  model_t *pm = model_init(NULL, 0);
  harp_model *lm = harp_model_init(c, NULL, 0);
  if (!pm || !lm || model_run(pm, in, out_pkg) || harp_model_run(lm, in, out_lib)) {
    fprintf(stderr, "a run failed: %s\n", lm && harp_model_error(lm) ? harp_model_error(lm) : "");
    return 1;
  }
  double worst = 0;
  for (int k = 0; k < nout; k++)
    for (size_t i = 0; i < numel(model_output_shapes[k]); i++) {
      double d = fabs((double)((float *)out_pkg[k])[i] - (double)((float *)out_lib[k])[i]);
      worst = d > worst || d != d ? d : worst;
    }
  printf("max |diff| %g\n", worst);
  model_free(pm);
  harp_model_free(lm);
  harp_compiled_free(c);
  for (int k = 0; k < nin; k++) free((void *)in[k]);
  for (int k = 0; k < nout; k++) free(out_pkg[k]), free(out_lib[k]);
  free(in);
  free(out_pkg);
  free(out_lib);
  return worst <= 1e-4 ? 0 : 1;
}
