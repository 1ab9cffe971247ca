/* gpu_device.c — runs of the CUDA backend on the caller's device memory
 * and stream (harp_model_run_device): the kernels' arguments that name a
 * model input or output are the caller's addresses instead of the arena's
 * I/O part; temporaries, scratch, packed weights and the status word stay
 * in the instance's arena.  Nothing is copied between host and device for
 * such a run (the weights go up once, on an instance's first run), and the
 * run is only enqueued: the caller synchronises its stream.
 * With graphs: one executable graph for the last set of addresses, captured
 * on harp's own stream (capture has rules a caller's stream may break, e.g.
 * the legacy stream) and launched on the caller's; new addresses are a new
 * capture, updated into the executable graph in place when the driver can.
 * Runs of one instance on different streams are ordered: each run records
 * an event, which a run on another stream waits for on the device.
 * Needs: gpu.c (gpu_int.h).  Gives: rt_gpu_run_device. */
#include <stdlib.h>
#include <string.h>

#include "gpu_int.h"
#include "harp/function.h"
#include "util/util.h"

void gpu_device_free(rt_gpu_model *m) {
  if (m->rt) cuda_rt_graph_free(m->rt, m->dgraph), cuda_rt_event_free(m->rt, m->ddone);
  m->dgraph = NULL;
  m->ddone = NULL;
  free(m->dargs);
  free(m->dptrs);
  m->dargs = m->dptrs = NULL;
}

/* Where argument a points for this run: the caller's address for a model
 * input (in[k], k its place among the non-weight arguments) or output
 * (out[k]); else the address rt_gpu_load computed (args_i). */
static cuda_devptr arg_address(const rt_gpu_model *m, const cuda_arg *a, cuda_devptr loaded, const uint64_t *in,
                               const uint64_t *out) {
  const fn_function *f = m->f;
  if (a->kind != CUDA_ARG_BUF) return loaded;
  fn_buf_kind kind = f->buffers[a->buffer].kind;
  if (kind == FN_INPUT)
    for (int i = 0, k = 0; i < f->nargs; i++) {
      if (f->args[i] == a->buffer) return in[k] + (cuda_devptr)a->offset;
      if (f->buffers[f->args[i]].kind == FN_INPUT) k++;
    }
  if (kind == FN_OUTPUT)
    for (int k = 0; k < f->nret; k++)
      if (f->ret[k] == a->buffer) return out[k] + (cuda_devptr)a->offset;
  return loaded;
}

/* Check the caller's addresses (none NULL) and that every output of m is
 * a buffer of its own that the kernels write (not an input, a weight or
 * another output), so that pointing it at out[k] is the whole run. */
static harp_status check_io(harp_error *e, const rt_gpu_model *m, int nin, const uint64_t *in, const uint64_t *out) {
  const fn_function *f = m->f;
  for (int k = 0; k < nin; k++)
    if (!in[k]) return ut_fail(e, HARP_E_USAGE, NULL, "input %d: a NULL device pointer", k);
  for (int k = 0; k < f->nret; k++) {
    if (!out[k]) return ut_fail(e, HARP_E_USAGE, NULL, "output %d: a NULL device pointer", k);
    bool again = false;
    for (int j = 0; j < k; j++) again |= f->ret[j] == f->ret[k];
    if (f->buffers[f->ret[k]].kind != FN_OUTPUT || again)
      return ut_fail(e, HARP_E_UNSUPPORTED, NULL,
                     "output %d is %s: device-pointer runs need outputs the kernels compute; use harp_model_run", k,
                     again ? "another output too" : "an input or a weight as it stands");
  }
  return HARP_OK;
}

/* m->dargs for this run's addresses. */
static harp_status fill_args(harp_error *e, rt_gpu_model *m, const uint64_t *in, const uint64_t *out) {
  const cuda_model_tu *t = m->tu;
  if (!m->dargs && !(m->dargs = ut_xcalloc((size_t)t->nlaunch * CUDA_MAX_PARAMS + 1, sizeof *m->dargs)))
    return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  for (int i = 0; i < t->nlaunch; i++)
    for (int p = 0; p < t->launch[i].nargs; p++) {
      int at = i * CUDA_MAX_PARAMS + p;
      m->dargs[at] = arg_address(m, &t->launch[i].args[p], m->args[at], in, out);
    }
  return HARP_OK;
}

/* Every launch but the `once` ones, with m->dargs, on the current stream. */
static harp_status launch_device(harp_error *e, rt_gpu_model *m) {
  for (int i = 0; i < m->tu->nlaunch; i++)
    if (!m->tu->launch[i].once && gpu_launch_args(e, m, i, &m->dargs[i * CUDA_MAX_PARAMS])) return e->code;
  return HARP_OK;
}

/* m->dgraph holding this run's addresses (ptrs: n of them): kept when they
 * are the ones it was captured with, else captured anew on harp's stream
 * and updated into it (or instantiated). */
static harp_status device_graph(harp_error *e, rt_gpu_model *m, const cuda_devptr *ptrs, int n) {
  if (m->dgraph && !memcmp(m->dptrs, ptrs, (size_t)n * sizeof *ptrs)) return HARP_OK;
  if (!m->dptrs && !(m->dptrs = ut_xcalloc((size_t)n + 1, sizeof *m->dptrs)))
    return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  void *was = cuda_rt_use_stream(m->rt, NULL);
  harp_status st = cuda_rt_graph_begin(e, m->rt);
  harp_status launched = st ? st : launch_device(e, m);
  cuda_rt_graph *g = NULL;
  harp_error e2 = {0};
  if (!st) st = cuda_rt_graph_end(launched ? &e2 : e, m->rt, false, &g); /* always end a capture begun */
  cuda_rt_use_stream(m->rt, was);
  if (launched || st) {
    cuda_rt_graph_free(m->rt, g);
    return launched ? launched : st;
  }
  bool updated = false;
  if (m->dgraph) st = cuda_rt_graph_update(e, m->rt, m->dgraph, g, &updated);
  if (!st && !updated) {
    cuda_rt_graph_free(m->rt, m->dgraph);
    m->dgraph = NULL;
    st = cuda_rt_graph_instantiate(e, m->rt, g, &m->dgraph);
  }
  cuda_rt_graph_free(m->rt, g);
  if (!st) memcpy(m->dptrs, ptrs, (size_t)n * sizeof *ptrs);
  else memset(m->dptrs, 0, (size_t)n * sizeof *ptrs); /* an update half done: capture again next time */
  return st;
}

harp_status rt_gpu_run_device(harp_error *e, rt_gpu_model *m, const ut_tensor *params, int nparams, const uint64_t *in,
                            const uint64_t *out, void *stream) {
  const fn_function *f = m->f;
  if (nparams != f->nargs) return ut_fail(e, HARP_E_INPUT_MISMATCH, NULL, "%d inputs given, the model has %d", nparams, f->nargs);
  int nin = 0;
  for (int a = 0; a < f->nargs; a++) nin += f->buffers[f->args[a]].kind == FN_INPUT;
  if (check_io(e, m, nin, in, out) || rt_gpu_load(e, m)) return e->code;
  if (!m->consts_up) { /* the weights, once, on harp's stream; then ordered before the caller's stream */
    if (gpu_upload_consts(e, m, params) || cuda_rt_sync(e, m->rt)) return e->code;
  }
  if (fill_args(e, m, in, out)) return e->code;
  harp_status st = HARP_OK;
  if (m->graphs) {
    int n = nin + f->nret;
    cuda_devptr *ptrs = ut_xcalloc((size_t)n + 1, sizeof *ptrs);
    if (!ptrs) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
    memcpy(ptrs, in, (size_t)nin * sizeof *ptrs);
    memcpy(ptrs + nin, out, (size_t)f->nret * sizeof *ptrs);
    st = device_graph(e, m, ptrs, n);
    free(ptrs);
    if (st) return st;
  }
  /* on another stream than the last run: after it (the arena's temporaries are shared); then mark this one */
  void *was = cuda_rt_use_stream(m->rt, stream);
  if (m->ddone && stream != m->dstream) st = cuda_rt_wait(e, m->rt, m->ddone);
  if (!st) st = m->graphs ? cuda_rt_graph_launch(e, m->rt, m->dgraph) : launch_device(e, m);
  if (!st) st = cuda_rt_record(e, m->rt, &m->ddone);
  if (!st) m->dstream = stream;
  cuda_rt_use_stream(m->rt, was);
  return st;
}
