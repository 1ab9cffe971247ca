/* api_ext.c — harp.h's entry points for bindings (Python, ...): the
 * version, compiling from memory, instances with settings, runs with the
 * feeds' dtypes (int64 narrowed with a range check) and errors as values,
 * runs on device memory (CUDA: gpu_device.c, on the caller's stream).
 * Needs: api.c (api_int.h).  Gives: harp.h's "for bindings" section. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_int.h"
#include "harp.h"
#include "util/util.h"

#ifndef HARP_VERSION_STRING
#error "HARP_VERSION_STRING comes from CMakeLists.txt's project()"
#endif

const char *harp_version(void) { return HARP_VERSION_STRING; }

harp_status harp_compile_buffer(harp_error *e, const void *data, size_t len, const char *format, const char *name,
                                const harp_options *opts, harp_compiled **out) {
  *out = NULL;
  if (!data && len) return ut_fail(e, HARP_E_USAGE, NULL, "harp_compile_buffer: no data for %zu bytes", len);
  if (!format) return ut_fail(e, HARP_E_USAGE, NULL, "harp_compile_buffer: no format (\"onnx\", \"harp\" or \"json\")");
  api_src src = {.path = name ? name : "<memory>", .data = data ? data : "", .len = len, .format = format};
  return api_compile_src(e, &src, opts, out);
}

harp_status harp_model_new(harp_error *e, const harp_compiled *c, const void *params, size_t nbytes,
                           const harp_instance_options *io, harp_model **out) {
  *out = NULL;
  if (!c) return ut_fail(e, HARP_E_USAGE, NULL, "harp_model_new: no compiled model");
  int threads = io ? io->threads : 0, device = io ? io->device : 0;
  if (threads < 0 || threads > 1024) return ut_fail(e, HARP_E_USAGE, NULL, "threads = %d: expected 0 (the default) to 1024", threads);
  if (device < 0) return ut_fail(e, HARP_E_USAGE, NULL, "device = %d: a device ordinal is >= 0", device);
  if (device > 0 && api_backend(c) != HARP_BACKEND_CUDA)
    return ut_fail(e, HARP_E_USAGE, NULL, "device = %d: only a CUDA model runs on a device (the CPU is device 0)", device);
  if (nbytes != harp_params_bytes(c))
    return ut_fail(e, HARP_E_INPUT_MISMATCH, NULL, "the parameter block has %zu bytes, the model takes %zu", nbytes,
                   harp_params_bytes(c));
  if (nbytes && !params) return ut_fail(e, HARP_E_USAGE, NULL, "no parameter block for %zu bytes", nbytes);
  harp_error why = {0}; /* a CUDA instance's reason */
  if (!(*out = api_model_new(&why, c, params, nbytes, threads, device))) {
    if (why.code) {
      char msg[900];
      harp_error_format(&why, msg, sizeof msg);
      return ut_fail(e, why.code, NULL, "the CUDA instance on device %d could not be made: %s", device, msg);
    }
    return ut_fail(e, api_backend(c) == HARP_BACKEND_CUDA ? HARP_E_UNSUPPORTED : HARP_E_NO_MEMORY, NULL,
                   "the instance could not be made (its memory%s)", api_backend(c) == HARP_BACKEND_CUDA ? ", module or device" : "");
  }
  return HARP_OK;
}

static const char *dtype_name(harp_dtype d) {
  switch (d) {
  case HARP_FP16: return "fp16";
  case HARP_BF16: return "bf16";
  case HARP_FP32: return "fp32";
  case HARP_I32: return "i32";
  case HARP_BOOL: return "bool";
  case HARP_I8: return "i8";
  case HARP_U8: return "u8";
  case HARP_I64: return "i64";
  }
  return "an unknown dtype";
}

/* Input k of c's element count (its dims as compiled). */
static int64_t input_numel(const harp_compiled *c, int k) {
  int64_t shape[HARP_MAX_RANK], n = 1;
  int rank = harp_input_shape(c, k, shape);
  for (int d = 0; d < rank; d++) n *= shape[d] > 0 ? shape[d] : 1;
  return n;
}

/* src's n int64 values into dst as int32; InputMismatch naming input `name`
 * at the first value int32 cannot hold. */
static harp_status narrow_i64(harp_error *e, const char *name, const int64_t *src, int64_t n, int32_t *dst) {
  for (int64_t i = 0; i < n; i++) {
    if (src[i] < INT32_MIN || src[i] > INT32_MAX)
      return ut_fail(e, HARP_E_INPUT_MISMATCH, name,
                     "input \"%s\": element %lld is %lld, out of the int32 range harp computes this input in", name,
                     (long long)i, (long long)src[i]);
    dst[i] = (int32_t)src[i];
  }
  return HARP_OK;
}

harp_status harp_model_run_typed(harp_error *e, harp_model *m, const void *const *inputs, const harp_dtype *dtypes,
                                 void *const *outputs) {
  if (!m) return ut_fail(e, HARP_E_USAGE, NULL, "no model instance");
  const harp_compiled *c = api_model_compiled(m);
  int n = harp_num_inputs(c);
  const void **in = ut_xcalloc((size_t)n + 1, sizeof *in);
  void **tmp = ut_xcalloc((size_t)n + 1, sizeof *tmp);
  harp_status st = in && tmp ? HARP_OK : ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  for (int k = 0; k < n && !st; k++) {
    harp_dtype want = harp_input_dtype(c, k), have = dtypes ? dtypes[k] : want;
    const char *name = harp_input_source_name(c, k);
    in[k] = inputs[k];
    if (have == want) continue;
    if (have != HARP_I64 || want != HARP_I32) {
      st = ut_fail(e, HARP_E_DTYPE_MISMATCH, name, "input \"%s\" is %s, the feed %s", name, dtype_name(want), dtype_name(have));
      break;
    }
    int64_t numel = input_numel(c, k);
    if (!(tmp[k] = ut_xmalloc((size_t)numel * 4 + 4))) st = ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
    if (!st) st = narrow_i64(e, name, inputs[k], numel, tmp[k]);
    in[k] = tmp[k];
  }
  if (!st && harp_model_run(m, in, outputs)) {
    const char *why = harp_model_error(m);
    st = ut_fail(e, HARP_E_INVALID_ARG, NULL, "the run failed: %s", why ? why : "(no reason given)");
  }
  for (int k = 0; tmp && k < n; k++) free(tmp[k]);
  free(tmp);
  free(in);
  return st;
}

harp_status harp_model_run_device(harp_error *e, harp_model *m, const void *const *inputs, void *const *outputs,
                                  void *stream) {
  if (!m) return ut_fail(e, HARP_E_USAGE, NULL, "no model instance");
  if (api_backend(api_model_compiled(m)) != HARP_BACKEND_CUDA)
    return ut_fail(e, HARP_E_UNSUPPORTED, NULL, "device pointers need a CUDA model; this one runs on the host (harp_model_run)");
  if (!api_model_on_device(m))
    return ut_fail(e, HARP_E_UNSUPPORTED, NULL,
                   "this CUDA model has run-time control flow (a host program): run it with host arrays (harp_model_run)");
  if (!inputs && harp_num_inputs(api_model_compiled(m)))
    return ut_fail(e, HARP_E_USAGE, NULL, "harp_model_run_device: no input pointers");
  if (!outputs) return ut_fail(e, HARP_E_USAGE, NULL, "harp_model_run_device: no output pointers");
  return api_run_device(e, m, inputs, outputs, stream);
}
