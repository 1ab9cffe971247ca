/* flow_api.c — harp.h over a host program: a model with run-time control
 * flow compiled by harp_compile_file answers harp.h's questions from its
 * host program (inputs, outputs, the parameter block), and each instance
 * runs it with an executor of its own (harp/flow.h).
 * Needs: the executor.  Gives: api_int.h's flow_sig / flow_inst. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_int.h"
#include "harp/flow.h"
#include "util/util.h"

typedef struct sig_io {
  const char *name;
  tiny_dtype dtype;
  int rank;
  int64_t shape[TINY_MAX_RANK]; /* outputs: -1 where known only at run time */
} sig_io;

struct flow_sig {
  onnx_model om;      /* the import: the host program and the weights */
  harp_options o;     /* the executor's options; its strings owned below */
  char *cc, *cflags, *cache_dir, *target;
  char **knobs;       /* o.knobs, copied: NULL-terminated */
  sig_io *in, *out;
  int nin, nout;
  int64_t *off;       /* per weight: its offset in the parameter block */
  size_t bytes;
  unsigned char *embedded;
};

struct flow_inst {
  const flow_sig *s;
  unsigned char *params; /* the instance's copy of the parameter block */
  ut_tensor *w;          /* the weights, views into params */
  flow_exec *x;
  ut_tensor *last;       /* the last run's outputs */
  bool have;
};

static char *dup(const char *s, bool *ok) {
  if (!s) return NULL;
  char *d = strdup(s);
  if (!d) *ok = false;
  return d;
}

/* The executor's options: the caller's, its strings (knobs included) copied;
 * no progress callback (its context is the caller's, gone after the compile). */
static bool options(flow_sig *s, const harp_options *o) {
  bool ok = true;
  if (o) s->o = *o;
  s->o.syms = s->o.params = NULL;
  s->o.progress = NULL, s->o.progress_ctx = NULL;
  int n = 0;
  while (o && o->knobs && o->knobs[n]) n++;
  s->o.knobs = NULL;
  if (n) {
    if (!(s->knobs = ut_xcalloc((size_t)n + 1, sizeof *s->knobs))) return false;
    for (int i = 0; i < n; i++) s->knobs[i] = dup(o->knobs[i], &ok);
    s->o.knobs = (const char *const *)s->knobs;
  }
  s->o.cc = s->cc = dup(o ? o->cc : NULL, &ok);
  s->o.cflags = s->cflags = dup(o ? o->cflags : NULL, &ok);
  s->o.cache_dir = s->cache_dir = dup(o ? o->cache_dir : NULL, &ok);
  s->o.target = s->target = dup(o ? o->target : NULL, &ok);
  return ok;
}

/* Inputs with their shape variables bound from o->syms (else 1); outputs
 * with the dims known at import. */
static harp_status signature(harp_error *e, flow_sig *s, const harp_options *o) {
  const flow_program *f = s->om.flow;
  const flow_block *mb = &f->blocks[f->main];
  tiny_symtab syms;
  tiny_symtab_init(&syms);
  harp_status st = HARP_OK;
  for (int i = 0; !st && o && o->syms && o->syms[i]; i++) st = tiny_symtab_parse_assign(e, &syms, o->syms[i]);
  s->nin = mb->nin, s->nout = mb->nout;
  s->in = ut_xcalloc((size_t)s->nin + 1, sizeof *s->in), s->out = ut_xcalloc((size_t)s->nout + 1, sizeof *s->out);
  if (!st && (!s->in || !s->out)) st = ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  for (int k = 0; !st && k < s->nin; k++) { /* a shape variable no binding gives is 1 */
    const flow_slot *sl = &f->slots[mb->in[k]];
    for (int d = 0; d < sl->rank && !st; d++)
      if (sl->dims[d] < 0 && sl->sym[d] && !tiny_symtab_get(&syms, sl->sym[d], NULL)) st = tiny_symtab_set(e, &syms, sl->sym[d], 1);
  }
  for (int k = 0; !st && k < s->nin + s->nout; k++) {
    bool out = k >= s->nin;
    int j = out ? k - s->nin : k;
    const flow_slot *sl = &f->slots[out ? mb->out[j] : mb->in[j]];
    sig_io *io = out ? &s->out[j] : &s->in[j];
    io->name = out ? mb->out_name[j] : mb->in_name[j];
    io->dtype = sl->dtype, io->rank = sl->rank;
    for (int d = 0; d < sl->rank; d++) { /* an output's dim of another shape variable: known at run time only (-1) */
      int64_t v = sl->dims[d];
      if (v < 0 && sl->sym[d]) tiny_symtab_get(&syms, sl->sym[d], &v);
      io->shape[d] = v;
    }
  }
  tiny_symtab_free(&syms);
  return st;
}

/* The parameter block: every weight at a 64-byte aligned offset, filled. */
static harp_status params(harp_error *e, flow_sig *s) {
  s->off = ut_xcalloc((size_t)s->om.nweights + 1, sizeof *s->off);
  if (!s->off) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  for (int w = 0; w < s->om.nweights; w++) {
    s->off[w] = (int64_t)s->bytes;
    s->bytes += (s->om.weights[w].nbytes + 63) & ~(size_t)63;
  }
  if (!(s->embedded = ut_xcalloc(s->bytes + 1, 1))) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  for (int w = 0; w < s->om.nweights; w++)
    if (s->om.weights[w].nbytes) memcpy(s->embedded + s->off[w], s->om.weights[w].data, s->om.weights[w].nbytes);
  return HARP_OK;
}

harp_status flow_sig_new(harp_error *e, onnx_model *om, const harp_options *o, flow_sig **out) {
  *out = NULL;
  flow_sig *s = ut_xcalloc(1, sizeof *s);
  if (!s) {
    onnx_model_free(om);
    return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  }
  s->om = *om;
  memset(om, 0, sizeof *om);
  harp_status st = options(s, o) ? HARP_OK : ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  if (!st) st = signature(e, s, o);
  if (!st) st = params(e, s);
  for (int w = 0; !st && w < s->om.nweights; w++) { /* the weights live in the parameter block now (their headers stay) */
    free(s->om.weights[w].data);
    s->om.weights[w].data = NULL;
  }
  if (st) {
    flow_sig_free(s);
    return st;
  }
  *out = s;
  return HARP_OK;
}

void flow_sig_free(flow_sig *s) {
  if (!s) return;
  onnx_model_free(&s->om);
  free(s->cc), free(s->cflags), free(s->cache_dir), free(s->target);
  for (int i = 0; s->knobs && s->knobs[i]; i++) free(s->knobs[i]);
  free(s->knobs);
  free(s->in), free(s->out), free(s->off), free(s->embedded);
  free(s);
}

int flow_sig_count(const flow_sig *s, bool out) { return out ? s->nout : s->nin; }
const char *flow_sig_name(const flow_sig *s, bool out, int k) { return (out ? s->out : s->in)[k].name; }
tiny_dtype flow_sig_dtype(const flow_sig *s, bool out, int k) { return (out ? s->out : s->in)[k].dtype; }
int flow_sig_shape(const flow_sig *s, bool out, int k, int64_t *shape) {
  const sig_io *io = &(out ? s->out : s->in)[k];
  memcpy(shape, io->shape, sizeof *shape * (size_t)io->rank);
  return io->rank;
}
size_t flow_sig_params_bytes(const flow_sig *s) { return s->bytes; }
const void *flow_sig_embedded(const flow_sig *s) { return s->embedded; }
int64_t flow_sig_param_offset(const flow_sig *s, const char *name) {
  for (int w = 0; w < s->om.nweights; w++)
    if (!strcmp(s->om.weight_ids[w], name)) return s->off[w];
  return -1;
}

/* ---- instances ---------------------------------------------------------------------------- */
void flow_inst_free(flow_inst *m) {
  if (!m) return;
  flow_exec_free(m->x);
  for (int k = 0; m->last && k < m->s->nout; k++) ut_tensor_free(&m->last[k]);
  free(m->last), free(m->w), free(m->params);
  free(m);
}

flow_inst *flow_inst_new(const flow_sig *s, const void *params, size_t nbytes) {
  flow_inst *m = ut_xcalloc(1, sizeof *m);
  if (!m || nbytes != s->bytes) {
    free(m);
    return NULL;
  }
  m->s = s;
  m->params = ut_xmalloc(nbytes + 1);
  m->w = ut_xcalloc((size_t)s->om.nweights + 1, sizeof *m->w);
  m->last = ut_xcalloc((size_t)s->nout + 1, sizeof *m->last);
  harp_error e = {0};
  if (!m->params || !m->w || !m->last) {
    flow_inst_free(m);
    return NULL;
  }
  if (nbytes) memcpy(m->params, params, nbytes);
  for (int w = 0; w < s->om.nweights; w++) { /* views: the executor only reads them */
    m->w[w] = s->om.weights[w];
    m->w[w].data = m->params + s->off[w];
  }
  if (flow_exec_new(&e, s->om.flow, s->om.nweights, s->om.weight_ids, m->w, &s->o, &m->x)) {
    flow_inst_free(m);
    return NULL;
  }
  return m;
}

static int fail(char *err, size_t cap, const harp_error *e) {
  harp_error_format(e, err, cap);
  return 1;
}

int flow_inst_run(flow_inst *m, const void *const *in, void *const *out, char *err, size_t cap) {
  const flow_sig *s = m->s;
  harp_error e = {0};
  ut_tensor *t = ut_xcalloc((size_t)s->nin + 1, sizeof *t);
  if (!t) return fail(err, cap, &(harp_error){.code = HARP_E_NO_MEMORY, .msg = "out of memory"});
  for (int k = 0; k < s->nin; k++) { /* views of the caller's inputs */
    t[k].dtype = s->in[k].dtype, t[k].rank = s->in[k].rank;
    memcpy(t[k].shape, s->in[k].shape, sizeof t->shape);
    t[k].data = (void *)in[k];
    t[k].nbytes = (size_t)ut_tensor_numel(&t[k]) * tiny_dtype_size(t[k].dtype);
  }
  for (int k = 0; k < s->nout; k++) ut_tensor_free(&m->last[k]);
  m->have = false;
  harp_status st = flow_exec_run(&e, m->x, t, s->nin, m->last);
  free(t);
  for (int k = 0; k < s->nout && !st; k++) { /* every output fits its buffer before any is written */
    const sig_io *io = &s->out[k];
    bool known = true, same = io->rank == m->last[k].rank;
    for (int d = 0; d < io->rank; d++) known &= io->shape[d] >= 0, same &= io->shape[d] == m->last[k].shape[d];
    if (out[k] && !known)
      st = ut_fail(&e, HARP_E_INPUT_MISMATCH, io->name, "output %s has a shape known only at run time: pass NULL for it and "
                   "read it with harp_model_output", io->name);
    else if (out[k] && !same)
      st = ut_fail(&e, HARP_E_INTERNAL, io->name, "output %s does not have the shape harp_output_shape gave", io->name);
  }
  if (st) return fail(err, cap, &e);
  for (int k = 0; k < s->nout; k++)
    if (out[k] && m->last[k].nbytes) memcpy(out[k], m->last[k].data, m->last[k].nbytes);
  m->have = true;
  return 0;
}

const void *flow_inst_output(const flow_inst *m, int k, int64_t *shape, int *rank) {
  if (!m->have || k < 0 || k >= m->s->nout) return NULL;
  const ut_tensor *t = &m->last[k];
  if (shape) memcpy(shape, t->shape, sizeof *shape * (size_t)t->rank);
  if (rank) *rank = t->rank;
  return t->data;
}
