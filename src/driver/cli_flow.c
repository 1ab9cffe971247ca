/* cli_flow.c — `harp run` and `harp bench` on a model with run-time
 * control flow: its inputs read or made for the host program's inputs, the
 * host program run by the executor (harp/flow.h) on the chosen backend.
 * Needs: the library.  Gives: cli_flow_inputs, cli_flow_run, cli_flow_bench. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "harp.h"
#include "harp/flow.h"
#include "harp/onnx.h"
#include "util/util.h"

/* The dims of main input k under the bindings syms (a shape variable no
 * file or --sym binds is 1, as for a graph without control flow). */
static void input_shape(const flow_program *f, int k, const tiny_symtab *syms, int64_t *shape) {
  const flow_slot *s = &f->slots[f->blocks[f->main].in[k]];
  for (int d = 0; d < s->rank; d++) {
    int64_t v = 1;
    if (s->dims[d] >= 0) v = s->dims[d];
    else if (s->sym[d]) tiny_symtab_get(syms, s->sym[d], &v);
    shape[d] = v;
  }
}

/* File k's shape binds main input i's shape variables. */
static harp_status bind_file(harp_error *e, const flow_slot *s, const char *name, const ut_tensor *t, tiny_symtab *syms) {
  if (t->rank != s->rank)
    return ut_fail(e, HARP_E_INPUT_MISMATCH, name, "input %s has rank %d, the model declares rank %d", name, t->rank, s->rank);
  for (int d = 0; d < s->rank; d++) {
    int64_t v;
    if (s->dims[d] >= 0 && s->dims[d] != t->shape[d])
      return ut_fail(e, HARP_E_INPUT_MISMATCH, name, "input %s: dim %d is %lld, the model declares %lld", name, d,
                     (long long)t->shape[d], (long long)s->dims[d]);
    if (!s->sym[d]) continue;
    if (tiny_symtab_get(syms, s->sym[d], &v) && v != t->shape[d])
      return ut_fail(e, HARP_E_INPUT_MISMATCH, name, "input %s: dim %d is %lld, but %s is %lld", name, d, (long long)t->shape[d],
                     s->sym[d], (long long)v);
    if (tiny_symtab_set(e, syms, s->sym[d], t->shape[d])) return e->code;
  }
  return HARP_OK;
}

harp_status cli_flow_inputs(harp_error *e, cli_opts *o, bool need_inputs, cli_model *m) {
  const flow_program *f = m->flow;
  const flow_block *mb = &f->blocks[f->main];
  if (o->nparams) /* the graph inputs among them were fixed at import and left the list */
    return ut_fail(e, HARP_E_USAGE, NULL, "--param %s: not a graph input (a model with run-time control flow fixes graph inputs "
                   "only)", o->params[0]);
  for (int k = 0; k < o->ninputs; k++) {
    bool found = false;
    for (int i = 0; i < mb->nin && !found; i++) found = !strcmp(mb->in_name[i], o->input_names[k]);
    if (!found) return ut_fail(e, HARP_E_USAGE, NULL, "--input %s: the model has no input of that name", o->input_names[k]);
  }
  if (!need_inputs) return HARP_OK;
  m->ninputs = mb->nin;
  m->inputs = ut_xcalloc((size_t)mb->nin + 1, sizeof *m->inputs);
  if (!m->inputs) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  harp_status st = HARP_OK;
  int *given = ut_xcalloc((size_t)mb->nin + 1, sizeof *given);
  if (!given) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  for (int i = 0; i < mb->nin && !st; i++) { /* the files, binding their shape variables */
    given[i] = -1;
    for (int k = 0; k < o->ninputs && given[i] < 0; k++)
      if (!strcmp(mb->in_name[i], o->input_names[k])) given[i] = k;
    if (given[i] < 0) continue;
    const flow_slot *s = &f->slots[mb->in[i]];
    st = ut_npy_read(e, o->input_files[given[i]], (int)s->dtype, &m->inputs[i]);
    if (!st) st = bind_file(e, s, mb->in_name[i], &m->inputs[i], &m->syms);
  }
  uint64_t state = o->seed;
  for (int i = 0; i < mb->nin && !st; i++) {
    if (given[i] >= 0) continue;
    if (!o->random_inputs) {
      st = ut_fail(e, HARP_E_USAGE, mb->in_name[i], "no --input %s=FILE.npy given (or use --random-inputs)", mb->in_name[i]);
      break;
    }
    int64_t shape[TINY_MAX_RANK];
    input_shape(f, i, &m->syms, shape);
    const flow_slot *s = &f->slots[mb->in[i]];
    st = ut_tensor_random(e, s->dtype, s->rank, shape, &state, &m->inputs[i]);
  }
  free(given);
  return st;
}

/* The options of the executor for --backend B. */
static int exec_options(cli_opts *o, const cli_backend *b, bool graphs, harp_options *ho, harp_error *e) {
  memset(ho, 0, sizeof *ho);
  ho->loop_limit = o->loop_limit;
  ho->graphs = graphs;
  ho->knobs = o->knob_args; /* over the environment, which harp.h reads as the CLI did */
  if (b->harp_backend < 0)
    return cli_usage_error("run", "--backend %s cannot run a model with run-time control flow (cpu, interp or cuda can)",
                           b->name);
  ho->backend = (harp_backend)b->harp_backend;
  if (b->target == &rt_target_cuda && cli_gpu_target(e, o, NULL, &ho->target)) return cli_report(e);
  if (o->noutputs || o->nplans) return cli_usage_error("run", "--outputs and --plan need a model without run-time control flow");
  for (int i = 0; i < o->ndumps; i++)
    if (strcmp(o->dumps[i], "flow"))
      return cli_usage_error("run", "--dump %s needs a model without run-time control flow (--dump flow shows the host "
                             "program)", o->dumps[i]);
  return 0;
}

static harp_status write_flow_dump(harp_error *e, const cli_opts *o, const flow_program *f) {
  if (!cli_wants_dump(o, "flow")) return HARP_OK;
  char *text = flow_describe(f);
  if (!text) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  harp_status st = cli_write_text(e, o->dump_dir, "flow.txt", text);
  free(text);
  return st;
}

/* The executor of m's host program for --backend B and the outputs' array;
 * 0, or the exit code of a failure (reported). */
static int flow_start(cli_opts *o, cli_model *m, const cli_backend *b, bool graphs, flow_exec **x, ut_tensor **outs) {
  harp_error e = {0};
  harp_options ho;
  int rc = exec_options(o, b, graphs, &ho, &e);
  if (rc) return rc;
  const flow_program *f = m->flow;
  *outs = ut_xcalloc((size_t)f->blocks[f->main].nout + 1, sizeof **outs);
  harp_status st = *outs ? write_flow_dump(&e, o, f) : ut_fail(&e, HARP_E_NO_MEMORY, NULL, "out of memory");
  if (!st) st = flow_exec_new(&e, f, m->onnx->nweights, m->onnx->weight_ids, m->onnx->weights, &ho, x);
  return st ? cli_report(&e) : 0;
}

static void print_outputs(const cli_opts *o, const flow_block *mb, const ut_tensor *outs, const flow_exec *x) {
  flow_stats fs;
  flow_exec_stats(x, &fs);
  for (int k = 0; k < mb->nout; k++) {
    char shape[256];
    int n = snprintf(shape, sizeof shape, "[");
    for (int d = 0; d < outs[k].rank && n < 200; d++)
      n += snprintf(shape + n, sizeof shape - (size_t)n, "%s%lld", d ? ", " : "", (long long)outs[k].shape[d]);
    snprintf(shape + n, sizeof shape - (size_t)n, "]");
    printf("%s: %s %s -> %s/%s.npy\n", mb->out_name[k], tiny_dtype_name(outs[k].dtype), shape, o->out_dir, mb->out_name[k]);
  }
  fprintf(stderr, "harp: host program: %d segment variants compiled, %ld segment runs, %ld loop iterations\n", fs.compiles,
          fs.seg_runs, fs.iterations);
}

int cli_flow_run(cli_opts *o, cli_model *m, const cli_backend *b, bool graphs) {
  flow_exec *x = NULL;
  ut_tensor *outs = NULL;
  int rc = flow_start(o, m, b, graphs, &x, &outs);
  const flow_block *mb = &m->flow->blocks[m->flow->main];
  harp_error e = {0};
  if (!rc && (flow_exec_run(&e, x, m->inputs, m->ninputs, outs) ||
              cli_write_outputs(&e, o->out_dir, (const char *const *)mb->out_name, outs, mb->nout)))
    rc = cli_report(&e);
  if (!rc) print_outputs(o, mb, outs, x);
  for (int k = 0; outs && k < mb->nout; k++) ut_tensor_free(&outs[k]);
  free(outs);
  flow_exec_free(x);
  return rc;
}

int cli_flow_bench(cli_opts *o, cli_model *m, const cli_backend *b, bool graphs, long warmup, long repeat, bool json) {
  const char *backend = b->name;
  flow_exec *x = NULL;
  ut_tensor *outs = NULL;
  int rc = flow_start(o, m, b, graphs, &x, &outs);
  const flow_block *mb = &m->flow->blocks[m->flow->main];
  double *t = ut_xcalloc((size_t)repeat + 1, sizeof *t), t0 = cli_now_ms(), first = 0;
  harp_error e = {0};
  harp_status st = rc || t ? HARP_OK : ut_fail(&e, HARP_E_NO_MEMORY, NULL, "out of memory");
  for (long r = -warmup - 1; r < repeat && !st && !rc; r++) { /* the first run compiles: it is not timed */
    double s = cli_now_ms();
    st = flow_exec_run(&e, x, m->inputs, m->ninputs, outs);
    for (int k = 0; k < mb->nout; k++) ut_tensor_free(&outs[k]);
    if (r == -warmup - 1) first = cli_now_ms() - t0;
    if (r >= 0) t[r] = cli_now_ms() - s;
  }
  if (st) rc = cli_report(&e);
  if (!rc) {
    flow_stats fs;
    flow_exec_stats(x, &fs);
    double med = cli_sorted_median(t, repeat);
    char *mq = cli_json_quote(o->model);
    if (json)
      printf("{\"model\": %s, \"backend\": \"%s\", \"host_program\": true, \"repeat\": %ld, \"warmup\": %ld, "
             "\"median_ms\": %.6f, \"min_ms\": %.6f, \"max_ms\": %.6f, \"first_run_ms\": %.3f, \"compiles\": %d, "
             "\"compile_ms\": %.3f, \"segment_runs\": %ld, \"iterations\": %ld}\n",
             mq ? mq : "\"\"", backend, repeat, warmup, med, t[0], t[repeat - 1], first, fs.compiles, fs.compile_ms, fs.seg_runs,
             fs.iterations);
    else
      printf("%s [%s, host program]: median %.3f ms over %ld runs (min %.3f, max %.3f); first run %.1f ms, %d segment "
             "variants compiled in %.1f ms\n",
             o->model, backend, med, repeat, t[0], t[repeat - 1], first, fs.compiles, fs.compile_ms);
    free(mq);
  }
  free(outs);
  free(t);
  flow_exec_free(x);
  return rc;
}
