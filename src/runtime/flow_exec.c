/* flow_exec.c — runs a host program (harp/flow.h): segments compiled by
 * any backend of harp.h when first met, for the shapes they meet (kept per
 * shape, least recently used dropped past FLOW_MAX_VARIANTS), and the
 * If / Loop / Scan steps and the host ops (flow_ops.c) between them.
 * Needs: harp.h (each segment variant is a harp_compiled + harp_model), the
 * frontend (lowering a segment).  Gives: flow_exec_*. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api_int.h"
#include "flow_ops.h"
#include "harp/flow.h"
#include "util/util.h"

typedef struct variant {
  int64_t *key;       /* per segment input: rank, then its dims */
  int nkey;
  harp_compiled *hc;
  harp_model *m;
  int *in_of, *out_of; /* harp input / output k -> the segment's input / output */
  const void **inp;
  void **outp;
  unsigned long long used;
} variant;

typedef struct segx {
  variant v[FLOW_MAX_VARIANTS];
  int nv;
} segx;

struct flow_exec {
  const flow_program *f;
  int nw;
  char *const *wid;
  const ut_tensor *w;
  harp_options o;
  int64_t limit;
  segx *segs;
  ut_tensor *val; /* per slot: this run's tensor */
  bool *set;
  tiny_symtab msyms; /* the model inputs' shape variables this run (a folded shape after a cut may name one) */
  unsigned long long clock;
  flow_stats stats;
};

/* ---- slots ------------------------------------------------------------------------------ */
static const ut_tensor *get(harp_error *e, flow_exec *x, int s) {
  const flow_slot *sl = &x->f->slots[s];
  if (sl->has_konst) return &sl->konst;
  if (sl->weight >= 0 && sl->weight < x->nw) return &x->w[sl->weight];
  if (x->set[s]) return &x->val[s];
  ut_fail(e, HARP_E_INTERNAL, NULL, "the host program reads slot %d (\"%s\") before it is written", s, sl->name);
  return NULL;
}

static void put(flow_exec *x, int s, ut_tensor *t) { /* takes t */
  ut_tensor_free(&x->val[s]);
  x->val[s] = *t;
  x->set[s] = true;
  memset(t, 0, sizeof *t);
}

static harp_status copy_to(harp_error *e, flow_exec *x, int s, const ut_tensor *t) {
  if (s < 0 || (x->set[s] && &x->val[s] == t)) return HARP_OK;
  ut_tensor c;
  if (ut_tensor_alloc(e, &c, t->dtype, t->rank, t->shape)) return e->code;
  if (t->nbytes) memcpy(c.data, t->data, t->nbytes);
  put(x, s, &c);
  return HARP_OK;
}

static harp_status copy_slot(harp_error *e, flow_exec *x, int to, int from) {
  if (to == from || to < 0) return HARP_OK;
  const ut_tensor *t = get(e, x, from);
  return t ? copy_to(e, x, to, t) : e->code;
}

static harp_status scalar_to(harp_error *e, flow_exec *x, int s, tiny_dtype dt, int64_t v) {
  ut_tensor t;
  if (ut_tensor_alloc(e, &t, dt, 0, NULL)) return e->code;
  if (dt == TINY_BOOL) *(uint8_t *)t.data = v != 0;
  else *(int32_t *)t.data = (int32_t)v;
  put(x, s, &t);
  return HARP_OK;
}

/* A one-element tensor's value (where: the step, for the message).  The
 * failure returns its code as a constant, not ut_fail's value, so that the
 * compiler sees *v set on every HARP_OK path. */
static harp_status scalar_of(harp_error *e, const ut_tensor *t, const char *where, const char *what, int64_t *v) {
  if (ut_tensor_numel(t) != 1) {
    ut_fail(e, HARP_E_INVALID_ARG, NULL, "%s: %s has %" PRId64 " elements at run time (it must have one)", where, what,
            ut_tensor_numel(t));
    return HARP_E_INVALID_ARG;
  }
  if (t->dtype == TINY_I32) *v = *(const int32_t *)t->data;
  else if (t->dtype == TINY_BOOL) *v = *(const uint8_t *)t->data != 0;
  else *v = ut_tensor_get(t, 0) != 0;
  return HARP_OK;
}

/* ---- segments ------------------------------------------------------------------------------- */
static void variant_free(variant *v) {
  harp_model_free(v->m);
  harp_compiled_free(v->hc);
  free(v->key), free(v->in_of), free(v->out_of), free(v->inp), free(v->outp);
  memset(v, 0, sizeof *v);
}

/* The shapes of a segment's inputs and the model's shape variables as one key. */
static int64_t *key_of(const flow_exec *x, const flow_seg *sg, const ut_tensor *const *in, int *n) {
  int k = x->msyms.n;
  for (int i = 0; i < sg->nin; i++) k += 1 + in[i]->rank;
  int64_t *key = ut_xcalloc((size_t)k + 1, sizeof *key);
  if (!key) return NULL;
  k = 0;
  for (int i = 0; i < x->msyms.n; i++) key[k++] = x->msyms.values[i];
  for (int i = 0; i < sg->nin; i++) {
    key[k++] = in[i]->rank;
    for (int d = 0; d < in[i]->rank; d++) key[k++] = in[i]->shape[d];
  }
  *n = k;
  return key;
}

static int find_name(char *const *names, int n, const char *name) {
  for (int i = 0; i < n; i++)
    if (!strcmp(names[i], name)) return i;
  return -1;
}

/* The parameter block of a compiled variant: every model weight it reads at
 * its offset. */
static harp_status params_block(harp_error *e, flow_exec *x, const harp_compiled *hc, unsigned char **out, size_t *nb) {
  *nb = harp_params_bytes(hc);
  *out = ut_xcalloc(*nb + 1, 1);
  if (!*out) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  for (int w = 0; w < x->nw; w++) {
    int64_t off = harp_param_offset(hc, x->wid[w]);
    if (off < 0) continue;
    if ((size_t)off + x->w[w].nbytes > *nb) return ut_fail(e, HARP_E_INTERNAL, x->wid[w], "a weight does not fit its slot");
    if (x->w[w].nbytes) memcpy(*out + off, x->w[w].data, x->w[w].nbytes);
  }
  return HARP_OK;
}

/* The segment lowered and compiled for the shapes of in[] (and the model's
 * shape variables, which a shape folded before a cut may name). */
static harp_status compile_graph(harp_error *e, flow_exec *x, const flow_seg *sg, const ut_tensor *const *in,
                               harp_compiled **hc) {
  tiny_symtab syms;
  tiny_symtab_init(&syms);
  harp_status st = HARP_OK;
  for (int i = 0; i < x->msyms.n && !st; i++) st = tiny_symtab_set(e, &syms, x->msyms.names[i], x->msyms.values[i]);
  for (int i = 0; i < sg->nin && !st; i++)
    st = hg_program_bind_input(e, sg->program, sg->in_id[i], in[i]->rank, in[i]->shape, &syms);
  tiny_graph *g = NULL;
  if (!st) st = hg_lower_bound(e, sg->program, &syms, &g, NULL);
  for (int k = 0; !st && k < g->n; k++) /* the model's weights are parameters */
    if (g->nodes[k].op == TINY_INPUT && find_name(x->wid, x->nw, g->nodes[k].a.input.tensor_id) >= 0)
      g->nodes[k].a.input.storage = "param";
  harp_options o = x->o;
  o.syms = o.params = NULL;
  if (!st) st = harp_compile_bound(e, g, &syms, &o, hc);
  tiny_symtab_free(&syms);
  return st;
}

static harp_status compile_variant(harp_error *e, flow_exec *x, const flow_seg *sg, const ut_tensor *const *in, variant *v) {
  double t0 = ut_now_ms();
  harp_status st = compile_graph(e, x, sg, in, &v->hc);
  unsigned char *params = NULL;
  size_t nb = 0;
  if (!st) st = params_block(e, x, v->hc, &params, &nb);
  if (!st && !(v->m = harp_model_init(v->hc, params, nb))) st = ut_fail(e, HARP_E_NO_MEMORY, NULL, "harp_model_init failed");
  free(params);
  int ni = st ? 0 : harp_num_inputs(v->hc), no = st ? 0 : harp_num_outputs(v->hc);
  v->in_of = ut_xcalloc((size_t)ni + 1, sizeof *v->in_of), v->out_of = ut_xcalloc((size_t)no + 1, sizeof *v->out_of);
  v->inp = ut_xcalloc((size_t)ni + 1, sizeof *v->inp), v->outp = ut_xcalloc((size_t)no + 1, sizeof *v->outp);
  if (!st && (!v->in_of || !v->out_of || !v->inp || !v->outp)) st = ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  for (int k = 0; k < ni && !st; k++)
    if ((v->in_of[k] = find_name(sg->in_id, sg->nin, harp_input_name(v->hc, k))) < 0)
      st = ut_fail(e, HARP_E_INTERNAL, harp_input_name(v->hc, k), "a segment input that is no slot");
  for (int k = 0; k < no && !st; k++)
    if ((v->out_of[k] = find_name(sg->out_id, sg->nout, harp_output_name(v->hc, k))) < 0)
      st = ut_fail(e, HARP_E_INTERNAL, harp_output_name(v->hc, k), "a segment output that is no slot");
  for (int k = 0; k < ni && !st; k++)
    if ((tiny_dtype)harp_input_dtype(v->hc, k) != in[v->in_of[k]]->dtype)
      st = ut_fail(e, HARP_E_INTERNAL, harp_input_name(v->hc, k), "a segment input of dtype %s gets %s",
                   tiny_dtype_name((tiny_dtype)harp_input_dtype(v->hc, k)), tiny_dtype_name(in[v->in_of[k]]->dtype));
  if (!st && !(v->key = key_of(x, sg, in, &v->nkey))) st = ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  if (st) variant_free(v);
  x->stats.compiles += !st;
  x->stats.compile_ms += ut_now_ms() - t0;
  return st;
}

/* The variant of segment si for the shapes of in[]: kept, or compiled
 * (dropping the least recently used one when they are many). */
static harp_status variant_for(harp_error *e, flow_exec *x, int si, const ut_tensor *const *in, variant **out) {
  segx *sx = &x->segs[si];
  const flow_seg *sg = &x->f->segs[si];
  int nk;
  int64_t *key = key_of(x, sg, in, &nk);
  if (!key) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  variant *v = NULL;
  for (int i = 0; i < sx->nv && !v; i++)
    if (sx->v[i].nkey == nk && !memcmp(sx->v[i].key, key, sizeof *key * (size_t)nk)) v = &sx->v[i];
  free(key);
  if (!v && sx->nv < FLOW_MAX_VARIANTS) v = &sx->v[sx->nv++];
  if (!v) {
    v = &sx->v[0];
    for (int i = 1; i < sx->nv; i++)
      if (sx->v[i].used < v->used) v = &sx->v[i];
    variant_free(v);
    x->stats.evictions++;
  }
  if (!v->hc && compile_variant(e, x, sg, in, v)) {
    *v = sx->v[--sx->nv]; /* the free place goes to the end */
    memset(&sx->v[sx->nv], 0, sizeof *v);
    return e->code;
  }
  v->used = ++x->clock;
  *out = v;
  return HARP_OK;
}

static harp_status run_seg(harp_error *e, flow_exec *x, int si) {
  const flow_seg *sg = &x->f->segs[si];
  const ut_tensor **in = ut_xcalloc((size_t)sg->nin + 1, sizeof *in);
  ut_tensor *out = ut_xcalloc((size_t)sg->nout + 1, sizeof *out);
  harp_status st = in && out ? HARP_OK : ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  for (int i = 0; i < sg->nin && !st; i++)
    if (!(in[i] = get(e, x, sg->in[i]))) st = e->code;
  variant *v = NULL;
  if (!st) st = variant_for(e, x, si, in, &v);
  int ni = st ? 0 : harp_num_inputs(v->hc), no = st ? 0 : harp_num_outputs(v->hc);
  for (int k = 0; k < ni; k++) v->inp[k] = in[v->in_of[k]]->data;
  for (int k = 0; k < no && !st; k++) {
    int64_t shape[TINY_MAX_RANK];
    int r = harp_output_shape(v->hc, k, shape);
    if (!(st = ut_tensor_alloc(e, &out[v->out_of[k]], (tiny_dtype)harp_output_dtype(v->hc, k), r, shape))) v->outp[k] = out[v->out_of[k]].data;
  }
  if (!st && harp_model_run(v->m, v->inp, v->outp))
    st = ut_fail(e, HARP_E_INVALID_ARG, NULL, "segment %d: %s", si, harp_model_error(v->m) ? harp_model_error(v->m) : "harp_model_run failed");
  for (int k = 0; k < sg->nout && !st; k++) put(x, sg->out[k], &out[k]);
  for (int k = 0; out && k < sg->nout; k++) ut_tensor_free(&out[k]);
  free(in);
  free(out);
  x->stats.seg_runs++;
  return st;
}

/* ---- steps ----------------------------------------------------------------------------------- */
static harp_status run_block(harp_error *e, flow_exec *x, int b);

static harp_status run_if(harp_error *e, flow_exec *x, const flow_step *sp) {
  int64_t v;
  const ut_tensor *c = get(e, x, sp->in[0]);
  if (!c || scalar_of(e, c, sp->where, "the condition", &v)) return e->code;
  int b = sp->body[v ? 0 : 1];
  if (run_block(e, x, b)) return e->code;
  const flow_block *bl = &x->f->blocks[b];
  for (int k = 0; k < sp->nout && k < bl->nout; k++)
    if (copy_slot(e, x, sp->out[k], bl->out[k])) return e->code;
  return HARP_OK;
}

/* Elements el[0..n) of one shape stacked along a new axis (the last
 * iteration's first when rev) into *out. */
static harp_status stack(harp_error *e, const ut_tensor *el, int64_t n, int axis, bool rev, ut_tensor *out) {
  const ut_tensor *f = &el[0];
  int64_t shape[TINY_MAX_RANK];
  if (f->rank + 1 > TINY_MAX_RANK) return ut_fail(e, HARP_E_LIMIT, NULL, "a scan output of rank %d", f->rank + 1);
  for (int d = 0, q = 0; d <= f->rank; d++) shape[d] = d == axis ? n : f->shape[q++];
  if (ut_tensor_alloc(e, out, f->dtype, f->rank + 1, shape)) return e->code;
  size_t es = tiny_dtype_size(f->dtype), inner = es, outer = 1;
  for (int d = 0; d < f->rank; d++) *(d < axis ? &outer : &inner) *= (size_t)f->shape[d];
  for (int64_t t = 0; t < n; t++) {
    const ut_tensor *s = &el[rev ? n - 1 - t : t];
    for (size_t o = 0; o < outer && inner; o++)
      memcpy((char *)out->data + (o * (size_t)n + (size_t)t) * inner, (const char *)s->data + o * inner, inner);
  }
  return HARP_OK;
}

/* Element i of t along axis (the axis dropped) into *out. */
static harp_status take(harp_error *e, const ut_tensor *t, int axis, int64_t i, ut_tensor *out) {
  int64_t shape[TINY_MAX_RANK];
  for (int d = 0, q = 0; d < t->rank; d++)
    if (d != axis) shape[q++] = t->shape[d];
  if (ut_tensor_alloc(e, out, t->dtype, t->rank - 1, shape)) return e->code;
  size_t inner = tiny_dtype_size(t->dtype), outer = 1, len = (size_t)t->shape[axis];
  for (int d = 0; d < t->rank; d++)
    if (d != axis) *(d < axis ? &outer : &inner) *= (size_t)t->shape[d];
  for (size_t o = 0; o < outer && inner; o++)
    memcpy((char *)out->data + o * inner, (const char *)t->data + (o * len + (size_t)i) * inner, inner);
  return HARP_OK;
}

/* The scan elements a loop gathers: one growing list per scan output. */
typedef struct gather {
  ut_tensor *el;
  int64_t n, cap;
  int64_t bytes;
} gather;

static harp_status gather_add(harp_error *e, gather *g, const ut_tensor *t, const char *where, int j, int64_t *total) {
  if (g->n && (g->el[0].rank != t->rank || memcmp(g->el[0].shape, t->shape, sizeof *t->shape * (size_t)t->rank)))
    return ut_fail(e, HARP_E_AXIS_SIZE_MISMATCH, NULL, "%s: scan output %d changes its shape between iterations", where, j);
  if ((*total += (int64_t)t->nbytes) > FLOW_MAX_SCAN_BYTES)
    return ut_fail(e, HARP_E_LIMIT, NULL, "%s: the scan outputs exceed %" PRId64 " bytes", where, FLOW_MAX_SCAN_BYTES);
  if (g->n == g->cap) {
    int64_t cap = g->cap ? 2 * g->cap : 16;
    ut_tensor *p = ut_xrealloc(g->el, sizeof *p * (size_t)cap);
    if (!p) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
    g->el = p, g->cap = cap;
  }
  ut_tensor *c = &g->el[g->n];
  if (ut_tensor_alloc(e, c, t->dtype, t->rank, t->shape)) return e->code;
  if (t->nbytes) memcpy(c->data, t->data, t->nbytes);
  g->n++;
  return HARP_OK;
}

static void gathers_free(gather *g, int k) {
  for (int j = 0; g && j < k; j++) {
    for (int64_t i = 0; i < g[j].n; i++) ut_tensor_free(&g[j].el[i]);
    free(g[j].el);
  }
  free(g);
}

/* The scan outputs, stacked into the step's outputs from nstate on (the
 * body's from `first` on).  With no iteration, an element's shape is the
 * body output slot's, when known at import. */
static harp_status scan_outputs(harp_error *e, flow_exec *x, const flow_step *sp, const flow_block *b, int first,
                              gather *g, int k) {
  for (int j = 0; j < k; j++) {
    ut_tensor out = {0};
    if (!g[j].n) {
      const flow_slot *s = &x->f->slots[b->out[first + j]];
      int64_t shape[TINY_MAX_RANK];
      for (int d = 0, q = 0; d <= s->rank; d++) shape[d] = d == sp->out_axis[j] ? 0 : s->dims[q++];
      for (int d = 0; d <= s->rank; d++)
        if (shape[d] < 0)
          return ut_fail(e, HARP_E_UNSUPPORTED, NULL, "%s: no iteration ran, and the shape of scan output %d is known only when "
                         "one does", sp->where, j);
      if (ut_tensor_alloc(e, &out, s->dtype, s->rank + 1, shape)) return e->code;
    } else if (stack(e, g[j].el, g[j].n, (int)sp->out_axis[j], sp->out_rev[j], &out)) {
      return e->code;
    }
    if (sp->out[sp->nstate + j] >= 0) put(x, sp->out[sp->nstate + j], &out);
    ut_tensor_free(&out);
  }
  return HARP_OK;
}

/* One body run: scan elements gathered, then the states / carried values
 * from the body's outputs back into its inputs (bin[from_in + j] <-
 * bout[from_out + j]), all read before any is written (a body may return
 * its inputs, swapped). */
static harp_status body_once(harp_error *e, flow_exec *x, const flow_step *sp, const flow_block *b, int from_in,
                           int from_out, gather *g, int k, int64_t *total, int cond_slot, int64_t *cond) {
  const ut_tensor *c;
  if (run_block(e, x, sp->body[0])) return e->code;
  if (cond_slot >= 0 && (!(c = get(e, x, cond_slot)) || scalar_of(e, c, sp->where, "the body's condition", cond)))
    return e->code;
  for (int j = 0; j < k; j++) {
    const ut_tensor *t = get(e, x, b->out[from_out + sp->nstate + j]);
    if (!t || gather_add(e, &g[j], t, sp->where, j, total)) return e->code;
  }
  ut_tensor *tmp = ut_xcalloc((size_t)sp->nstate + 1, sizeof *tmp);
  harp_status st = tmp ? HARP_OK : ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  for (int j = 0; j < sp->nstate && !st; j++) {
    const ut_tensor *t = get(e, x, b->out[from_out + j]);
    if (!t || ut_tensor_alloc(e, &tmp[j], t->dtype, t->rank, t->shape)) st = e->code;
    else if (t->nbytes) memcpy(tmp[j].data, t->data, t->nbytes);
  }
  for (int j = 0; j < sp->nstate && !st; j++) put(x, b->in[from_in + j], &tmp[j]);
  for (int j = 0; tmp && j < sp->nstate; j++) ut_tensor_free(&tmp[j]);
  free(tmp);
  x->stats.iterations += !st;
  return st;
}

static harp_status run_loop(harp_error *e, flow_exec *x, const flow_step *sp) {
  const flow_block *b = &x->f->blocks[sp->body[0]];
  int n = sp->nstate, k = b->nout - 1 - n;
  int64_t m = -1, cond = 1, total = 0;
  const ut_tensor *t;
  if (sp->in[0] >= 0 && (!(t = get(e, x, sp->in[0])) || scalar_of(e, t, sp->where, "the trip count", &m))) return e->code;
  if (sp->in[1] >= 0 && (!(t = get(e, x, sp->in[1])) || scalar_of(e, t, sp->where, "the condition", &cond))) return e->code;
  for (int j = 0; j < n; j++)
    if (copy_slot(e, x, b->in[2 + j], sp->in[2 + j])) return e->code;
  gather *g = ut_xcalloc((size_t)k + 1, sizeof *g);
  harp_status st = g ? HARP_OK : ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  for (int64_t i = 0; !st && (m < 0 || i < m) && cond; i++) {
    if (i >= x->limit) {
      st = ut_fail(e, HARP_E_LIMIT, NULL, "%s: ran %" PRId64 " iterations without stopping (the trip-count limit: "
                   "harp_options.loop_limit, --loop-limit N)", sp->where, x->limit);
      break;
    }
    if (!(st = scalar_to(e, x, b->in[0], TINY_I32, i)) && !(st = scalar_to(e, x, b->in[1], TINY_BOOL, cond)))
      st = body_once(e, x, sp, b, 2, 1, g, k, &total, sp->in[1] >= 0 ? b->out[0] : -1, &cond); /* without a
                                                                   condition input, the body's is not read */
  }
  for (int j = 0; j < n && !st; j++) st = copy_slot(e, x, sp->out[j], b->in[2 + j]);
  if (!st) st = scan_outputs(e, x, sp, b, 1 + n, g, k);
  gathers_free(g, k);
  return st;
}

static harp_status run_scan(harp_error *e, flow_exec *x, const flow_step *sp) {
  const flow_block *b = &x->f->blocks[sp->body[0]];
  int n = sp->nstate, m = sp->nin - n, k = b->nout - n;
  int64_t len = -1, total = 0;
  const ut_tensor **in = ut_xcalloc((size_t)m + 1, sizeof *in);
  gather *g = ut_xcalloc((size_t)k + 1, sizeof *g);
  harp_status st = in && g ? HARP_OK : ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  for (int j = 0; j < m && !st; j++) {
    if (!(in[j] = get(e, x, sp->in[n + j]))) st = e->code;
    else if (in[j]->rank <= sp->in_axis[j])
      st = ut_fail(e, HARP_E_INVALID_ARG, NULL, "%s: scan input %d has rank %d at run time", sp->where, j, in[j]->rank);
    else if (len >= 0 && in[j]->shape[sp->in_axis[j]] != len)
      st = ut_fail(e, HARP_E_AXIS_SIZE_MISMATCH, NULL, "%s: the scan inputs differ in length (%" PRId64 " and %" PRId64 ")",
                   sp->where, len, in[j]->shape[sp->in_axis[j]]);
    else len = in[j]->shape[sp->in_axis[j]];
  }
  for (int j = 0; j < n && !st; j++) st = copy_slot(e, x, b->in[j], sp->in[j]);
  for (int64_t t = 0; t < len && !st; t++) {
    for (int j = 0; j < m && !st; j++) {
      ut_tensor el;
      if (!(st = take(e, in[j], (int)sp->in_axis[j], sp->in_rev[j] ? len - 1 - t : t, &el))) put(x, b->in[n + j], &el);
    }
    if (!st) st = body_once(e, x, sp, b, 0, 0, g, k, &total, -1, NULL);
  }
  for (int j = 0; j < n && !st; j++) st = copy_slot(e, x, sp->out[j], b->in[j]);
  if (!st) st = scan_outputs(e, x, sp, b, n, g, k);
  gathers_free(g, k);
  free(in);
  return st;
}

/* A host op: its inputs' tensors (an absent one NULL) in, its outputs into their slots. */
static harp_status run_op(harp_error *e, flow_exec *x, const flow_step *sp) {
  const ut_tensor **in = ut_xcalloc((size_t)sp->nin + 1, sizeof *in);
  ut_tensor *out = ut_xcalloc((size_t)sp->nout + 1, sizeof *out);
  harp_status st = in && out ? HARP_OK : ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  for (int k = 0; k < sp->nin && !st; k++)
    if (sp->in[k] >= 0 && !(in[k] = get(e, x, sp->in[k]))) st = e->code;
  if (!st) st = flow_op_run(e, sp, in, out);
  for (int k = 0; k < sp->nout && !st; k++)
    if (sp->out[k] >= 0) put(x, sp->out[k], &out[k]);
  for (int k = 0; out && k < sp->nout; k++) ut_tensor_free(&out[k]);
  free(in), free(out);
  return st;
}

static harp_status run_block(harp_error *e, flow_exec *x, int b) {
  const flow_block *bl = &x->f->blocks[b];
  for (int i = 0; i < bl->nsteps; i++) {
    const flow_step *sp = &x->f->steps[bl->steps[i]];
    harp_status st = sp->kind == FLOW_SEG    ? run_seg(e, x, sp->seg)
                   : sp->kind == FLOW_IF   ? run_if(e, x, sp)
                   : sp->kind == FLOW_LOOP ? run_loop(e, x, sp)
                   : sp->kind == FLOW_SCAN ? run_scan(e, x, sp)
                   : sp->kind == FLOW_OP   ? run_op(e, x, sp)
                                              : ut_fail(e, sp->code, NULL, "%s", sp->where); /* a branch that did not import */
    if (st) return st;
  }
  return HARP_OK;
}

/* ---- the executor ------------------------------------------------------------------------------ */
harp_status flow_exec_new(harp_error *e, const flow_program *f, int nweights, char *const *weight_ids, const ut_tensor *weights,
                           const harp_options *o, flow_exec **out) {
  *out = NULL;
  flow_exec *x = ut_xcalloc(1, sizeof *x);
  if (!x) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  x->f = f, x->nw = nweights, x->wid = weight_ids, x->w = weights;
  if (o) x->o = *o;
  x->limit = o && o->loop_limit > 0 ? o->loop_limit : FLOW_LOOP_LIMIT;
  if (x->limit > INT32_MAX) x->limit = INT32_MAX; /* iteration numbers are int32 */
  tiny_symtab_init(&x->msyms);
  x->segs = ut_xcalloc((size_t)f->nsegs + 1, sizeof *x->segs);
  x->val = ut_xcalloc((size_t)f->nslots + 1, sizeof *x->val);
  x->set = ut_xcalloc((size_t)f->nslots + 1, sizeof *x->set);
  if (!x->segs || !x->val || !x->set) {
    flow_exec_free(x);
    return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  }
  *out = x;
  return HARP_OK;
}

/* This run's tensors go; the compiled segments stay. */
static void clear_slots(flow_exec *x) {
  for (int s = 0; s < x->f->nslots; s++) ut_tensor_free(&x->val[s]), x->set[s] = false;
}

/* Input k against main's slot: its dtype, rank and the dims known at
 * import; its shape variables bound into syms. */
static harp_status check_input(harp_error *e, const flow_program *f, int k, const ut_tensor *t, tiny_symtab *syms) {
  const flow_block *mb = &f->blocks[f->main];
  const flow_slot *s = &f->slots[mb->in[k]];
  const char *name = mb->in_name ? mb->in_name[k] : s->name;
  if (t->dtype != s->dtype)
    return ut_fail(e, HARP_E_INPUT_MISMATCH, name, "input %s is %s, the model declares %s", name, tiny_dtype_name(t->dtype),
                   tiny_dtype_name(s->dtype));
  if (t->rank != s->rank)
    return ut_fail(e, HARP_E_INPUT_MISMATCH, name, "input %s has rank %d, the model declares rank %d", name, t->rank, s->rank);
  for (int d = 0; d < t->rank; d++) {
    int64_t v;
    if (s->dims[d] >= 0 && s->dims[d] != t->shape[d])
      return ut_fail(e, HARP_E_INPUT_MISMATCH, name, "input %s: dim %d is %" PRId64 ", the model declares %" PRId64, name, d,
                     t->shape[d], s->dims[d]);
    if (!s->sym[d]) continue;
    if (tiny_symtab_get(syms, s->sym[d], &v) && v != t->shape[d])
      return ut_fail(e, HARP_E_INPUT_MISMATCH, name, "input %s: dim %d is %" PRId64 ", but %s is %" PRId64, name, d, t->shape[d],
                     s->sym[d], v);
    if (tiny_symtab_set(e, syms, s->sym[d], t->shape[d])) return e->code;
  }
  return HARP_OK;
}

harp_status flow_exec_run(harp_error *e, flow_exec *x, const ut_tensor *in, int nin, ut_tensor *out) {
  const flow_program *f = x->f;
  const flow_block *mb = &f->blocks[f->main];
  if (nin != mb->nin) return ut_fail(e, HARP_E_INPUT_MISMATCH, NULL, "%d inputs given; the model has %d", nin, mb->nin);
  harp_status st = HARP_OK;
  tiny_symtab_free(&x->msyms);
  tiny_symtab_init(&x->msyms);
  for (int k = 0; k < nin && !st; k++)
    if (!(st = check_input(e, f, k, &in[k], &x->msyms))) st = copy_to(e, x, mb->in[k], &in[k]);
  if (!st) st = run_block(e, x, f->main);
  int done = 0;
  for (; done < mb->nout && !st; done++) {
    const ut_tensor *t = get(e, x, mb->out[done]);
    if (!t || ut_tensor_alloc(e, &out[done], t->dtype, t->rank, t->shape)) st = e->code;
    else if (t->nbytes) memcpy(out[done].data, t->data, t->nbytes);
  }
  if (st)
    for (int k = 0; k < done; k++) ut_tensor_free(&out[k]);
  clear_slots(x);
  return st;
}

void flow_exec_free(flow_exec *x) {
  if (!x) return;
  for (int s = 0; x->segs && s < x->f->nsegs; s++)
    for (int i = 0; i < x->segs[s].nv; i++) variant_free(&x->segs[s].v[i]);
  if (x->val) clear_slots(x);
  tiny_symtab_free(&x->msyms);
  free(x->segs), free(x->val), free(x->set);
  free(x);
}

void flow_exec_stats(const flow_exec *x, flow_stats *s) { *s = x->stats; }
