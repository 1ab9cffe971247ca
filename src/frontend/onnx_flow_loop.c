/* onnx_flow_loop.c — ONNX Loop and Scan.  A Loop of a small constant trip
 * count whose condition stays a constant, and a Scan of a small known
 * length, are unrolled at import (the body imported once per iteration in
 * place, its iteration number a constant); any other becomes a host loop
 * over a block compiled once (onnx_flow.c's cuts).  A loop-carried value
 * whose shape the body changes is given shape variables where it changes
 * and the body imported again (harp/flow.h: segments are compiled for the
 * shapes they meet at run time).
 * Needs: onnx_flow.c.  Gives: oxf_op_loop, oxf_op_scan. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_flow_int.h"

/* ---- helpers ---------------------------------------------------------------------------- */
/* x with axis removed: element i along it. */
static hg_val take(ox_ctx *c, hg_val x, int axis, int64_t i) {
  int64_t end = i + 1;
  hg_val s = hg_slice(c->g, x, 1, &axis, &i, &end, NULL);
  const fe_shape *sh = s > 0 ? ox_shape_of(c, s) : NULL;
  if (!sh) return ox_check(c, -1), -1;
  fe_shape to = {.rank = sh->rank - 1};
  for (int d = 0, k = 0; d < sh->rank; d++)
    if (d != axis) to.d[k++] = sh->d[d];
  hg_val r = fe_reshape(c->g, s, &to);
  return ox_check(c, r) ? -1 : r;
}

/* v[0..n) stacked along a new axis `axis` (backwards when rev). */
static hg_val stack(ox_ctx *c, hg_val *v, int n, int axis, bool rev) {
  hg_val *u = ut_xcalloc((size_t)n + 1, sizeof *u);
  if (!u) return ox_fail(c, HARP_E_NO_MEMORY, "out of memory"), -1;
  hg_val r = 0;
  for (int i = 0; i < n && r >= 0; i++) {
    const fe_shape *sh = ox_shape_of(c, v[rev ? n - 1 - i : i]);
    fe_shape to = {.rank = sh ? sh->rank + 1 : 0};
    if (!sh || to.rank > TINY_MAX_RANK || axis > sh->rank) {
      if (sh) ox_fail(c, HARP_E_LIMIT, "a scan output of rank %d stacked along axis %d", sh->rank, axis);
      r = -1;
      break;
    }
    for (int d = 0, k = 0; d < to.rank; d++) to.d[d] = d == axis ? fe_dim_int(c->A, 1) : sh->d[k++];
    u[i] = fe_reshape(c->g, v[rev ? n - 1 - i : i], &to);
  }
  if (r >= 0) r = n == 1 ? u[0] : hg_concat(c->g, u, n, axis);
  free(u);
  return r < 0 || ox_check(c, r) ? -1 : r;
}

/* Axes attribute `name` of n entries (default 0), each in [-rank, rank) of
 * its tensor (rank[i]) and normalized. */
static harp_status axes_attr(ox_ctx *c, const char *name, int n, const int *rank, int64_t *out) {
  int got;
  int64_t a[TINY_MAX_RANK * 8];
  if (n > (int)(sizeof a / sizeof *a)) return ox_fail(c, HARP_E_LIMIT, "%d scan values (at most %zu)", n, sizeof a / sizeof *a);
  if (ox_attr_ints(c, name, a, (int)(sizeof a / sizeof *a), &got)) return c->e->code;
  if (got >= 0 && got != n) return ox_fail(c, HARP_E_INVALID_ARG, "attribute %s has %d values; it needs %d", name, got, n);
  for (int i = 0; i < n; i++) {
    int64_t x = got < 0 ? 0 : a[i];
    if (rank && (x < -rank[i] || x >= rank[i]))
      return ox_fail(c, HARP_E_INVALID_ARG, "%s[%d] = %" PRId64 " is out of range for rank %d", name, i, x, rank[i]);
    out[i] = rank && x < 0 ? x + rank[i] : x;
  }
  return HARP_OK;
}

/* ---- the unrolled body ------------------------------------------------------------------- */
/* One iteration in place: the body's inputs are in[0..nin) (copies), its
 * outputs are copied into out[0..nout). */
static harp_status iterate(ox_ctx *c, Onnx__GraphProto *body, const ox_val *in, int nin, ox_val *out, int nout) {
  ox_ctx s;
  harp_status st = oxf_scope_open(c, body, true, "body", &s);
  if (!st && ((int)body->n_input != nin || (int)body->n_output != nout))
    st = ox_fail(c, HARP_E_ARITY, "the body has %zu inputs and %zu outputs; it needs %d and %d", body->n_input, body->n_output, nin,
                 nout);
  for (int k = 0; k < nin && !st; k++) {
    ox_val *x = ox_new_val(&s, body->input[k]->name);
    st = x ? oxf_copy(&s, x, &in[k]) : s.e->code;
  }
  if (!st) st = ox_scope_run(&s, body);
  for (int k = 0; k < nout && !st; k++) {
    ox_val *x = oxf_graph_out(&s, body, k);
    st = x ? oxf_copy(&s, &out[k], x) : s.e->code;
  }
  oxf_scope_close(c, &s);
  return st;
}

static void holders_free(ox_val *h, int n) {
  for (int i = 0; h && i < n; i++) ut_tensor_free(&h[i].t);
  free(h);
}

/* A scalar holder (an iteration number, a condition). */
harp_status oxf_def_scalar_holder(ox_ctx *c, ox_val *x, int oty, int64_t v) {
  memset(x, 0, sizeof *x);
  x->has_i = true, x->oty = oty, x->in = 1;
  x->iv = ut_arena_alloc(c->A, sizeof *x->iv);
  if (!x->iv || !(x->iv[0] = fe_dim_int(c->A, v))) return ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
  return HARP_OK;
}

/* ---- Loop ----------------------------------------------------------------------------------- */
/* Whether the body's condition output is what it was given (the input
 * itself, an Identity of it) or, with `constant`, a Constant. */
static bool cond_static(const Onnx__GraphProto *body, bool constant) {
  const char *out = body->output[0]->name, *in = body->input[1]->name;
  if (!out || !in) return false;
  if (!strcmp(out, in)) return true;
  for (size_t i = 0; i < body->n_node; i++) {
    const Onnx__NodeProto *n = body->node[i];
    if (n->n_output < 1 || !n->output[0] || strcmp(n->output[0], out)) continue;
    if (!strcmp(n->op_type, "Constant")) return constant;
    return !strcmp(n->op_type, "Identity") && n->n_input == 1 && n->input[0] && !strcmp(n->input[0], in);
  }
  return false;
}

/* The trip count of a Loop unrolled at import, or -1 for a host loop;
 * *wrap: the condition is known at run time only, but the body passes it
 * on (all trips or none: an If between the unrolled Loop and no loop). */
static int64_t unroll_trips(ox_ctx *c, const Onnx__GraphProto *body, ox_val *M, ox_val *cond, bool *wrap) {
  int64_t m;
  bool t = true, bad = false;
  *wrap = false;
  if (!M || !M->has_i || M->in != 1 || !fe_dim_is_int(M->iv[0], &m)) return -1;
  if (m < 0) m = 0;
  if (m > OXF_UNROLL_MAX || m * (int64_t)(body->n_node ? body->n_node : 1) > OXF_UNROLL_NODES) return -1;
  if (!cond) return m; /* the body's condition is not read */
  if (!oxf_const_truth(c, cond, &t, &bad)) {
    *wrap = !bad && cond_static(body, false);
    return *wrap ? m : -1;
  }
  return !t ? 0 : cond_static(body, true) ? m : -1;
}

/* With no iteration, the scan outputs are empty: the body imported once,
 * its results dropped, for their element shapes (known at import). */
static harp_status no_trips(ox_ctx *c, Onnx__GraphProto *body, ox_val *in, ox_val *h, ox_val *out, int n, int k) {
  harp_status st = HARP_OK;
  if (!(st = oxf_def_scalar_holder(c, &in[0], OX_INT64, 0)) && !(st = oxf_def_scalar_holder(c, &in[1], OX_BOOL, 1)))
    for (int j = 0; j < n && !st; j++) st = oxf_copy(c, &in[2 + j], &h[j]);
  if (!st) st = iterate(c, body, in, n + 2, out, n + k + 1);
  for (int j = 0; j < k && !st; j++) {
    const ox_val *x = &out[1 + n + j];
    const fe_shape *sh = x->v > 0 ? ox_shape_of(c, x->v) : NULL;
    int rank = sh ? sh->rank : x->has_t ? x->t.rank : x->irank;
    int64_t shape[TINY_MAX_RANK] = {0};
    if (rank + 1 > TINY_MAX_RANK) return ox_fail(c, HARP_E_LIMIT, "scan output %d has rank %d", j, rank + 1);
    for (int d = 0; d < rank; d++) {
      int64_t v = sh ? -1 : x->has_t ? x->t.shape[d] : x->ishape[d];
      if (sh && !fe_dim_is_int(sh->d[d], &v))
        return ox_fail(c, HARP_E_UNSUPPORTED, "a Loop of no iteration whose scan output %d has the symbolic size %s", j,
                       sh->d[d]->text);
      shape[d + 1] = v;
    }
    tiny_dtype dt = x->v > 0 ? hg_val_dtype(c->g, x->v) : x->has_t ? x->t.dtype : x->oty == OX_BOOL ? TINY_BOOL : TINY_I32;
    ut_tensor t;
    int oty = x->oty ? x->oty : dt == TINY_FP16 ? OX_FLOAT16 : dt == TINY_BF16 ? OX_BFLOAT16 : dt == TINY_I32 ? OX_INT64
                                : dt == TINY_BOOL ? OX_BOOL : OX_FLOAT;
    if (ut_tensor_alloc(c->e, &t, dt, rank + 1, shape) || ox_def_tensor(c, n + j, &t, oty)) return c->e->code;
  }
  return st;
}

/* The Loop unrolled: h[0..n) carried values, then the scan elements
 * (h[n + k * trips + i]: output k of iteration i). */
static harp_status loop_unroll(ox_ctx *c, Onnx__GraphProto *body, bool has_cond, int64_t trips, int n, int k) {
  int nh = n + k * (int)trips;
  ox_val *h = ut_xcalloc((size_t)nh + 1, sizeof *h), *in = ut_xcalloc((size_t)n + 3, sizeof *in),
         *out = ut_xcalloc((size_t)n + (size_t)k + 2, sizeof *out);
  harp_status st = h && in && out ? HARP_OK : ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
  for (int j = 0; j < n && !st; j++) {
    bool failed = false;
    ox_val *x = ox_in(c, 2 + j, &failed);
    if (failed) st = c->e->code;
    else st = x ? oxf_copy(c, &h[j], x) : ox_fail(c, HARP_E_ARITY, "input %d (a loop-carried value) is required", 2 + j);
  }
  bool pinned = !st && !(st = oxf_pin(c, h, nh));
  int64_t done = 0;
  for (int64_t i = 0; i < trips && !st; i++) {
    if (!(st = oxf_def_scalar_holder(c, &in[0], OX_INT64, i)) && !(st = oxf_def_scalar_holder(c, &in[1], OX_BOOL, 1)))
      for (int j = 0; j < n && !st; j++) st = oxf_copy(c, &in[2 + j], &h[j]);
    if (!st) st = iterate(c, body, in, n + 2, out, n + k + 1);
    for (int j = 0; j < n && !st; j++) st = oxf_copy(c, &h[j], &out[1 + j]);
    for (int j = 0; j < k && !st; j++) st = oxf_copy(c, &h[n + j * trips + i], &out[1 + n + j]);
    done = i + 1;
    bool t = true, bad = false;
    if (!st && has_cond && !oxf_const_truth(c, &out[0], &t, &bad))
      st = bad ? c->e->code : ox_fail(c, HARP_E_INTERNAL, "the body's condition did not stay a constant");
    if (!t) break;
  }
  for (int j = 0; j < n && !st; j++) st = oxf_def_alias(c, j, &h[j]);
  if (!st && k && !done) st = no_trips(c, body, in, h, out, n, k);
  hg_val *v = st ? NULL : ut_xcalloc((size_t)done + 1, sizeof *v);
  if (!st && !v) st = ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
  for (int j = 0; j < k && !st && done; j++) {
    for (int64_t i = 0; i < done && !st; i++)
      if ((v[i] = ox_value(c, &h[n + j * trips + i])) < 0) st = c->e->code;
    if (!st) st = ox_def(c, n + j, stack(c, v, (int)done, 0, false));
  }
  free(v);
  if (pinned) oxf_unpin(c, nh);
  holders_free(h, nh);
  holders_free(in, n + 2);
  holders_free(out, n + k + 1);
  return st;
}

/* A Loop of a constant trip count whose condition, known at run time, the
 * body passes on: a host If on the condition between the node without its
 * condition (unrolled) and the node with no trip (its initial values). */
static harp_status loop_wrap(ox_ctx *c, ox_val *cond) {
  const Onnx__NodeProto *n = c->node;
  Onnx__NodeProto node[2] = {*n, *n};
  Onnx__GraphProto g[2] = {ONNX__GRAPH_PROTO__INIT, ONNX__GRAPH_PROTO__INIT}, *gp[2] = {&g[0], &g[1]};
  Onnx__NodeProto *np[2] = {&node[0], &node[1]};
  Onnx__TensorProto zero = ONNX__TENSOR_PROTO__INIT, *zp = &zero;
  int64_t zv = 0;
  char zname[64], (*unused)[48] = ut_xcalloc(n->n_output + 1, sizeof *unused);
  char **in = ut_xcalloc(2 * (n->n_input + 1), sizeof *in), **out = ut_xcalloc(n->n_output + 1, sizeof *out);
  Onnx__ValueInfoProto *vi = ut_xcalloc(n->n_output + 1, sizeof *vi), **vp = ut_xcalloc(n->n_output + 1, sizeof *vp);
  harp_status st = unused && in && out && vi && vp ? HARP_OK : ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
  snprintf(zname, sizeof zname, "harp.no_trips.%d", c->node_index);
  for (size_t i = 0; !st && i < n->n_input; i++) in[i] = in[n->n_input + i] = n->input[i];
  for (size_t k = 0; !st && k < n->n_output; k++) { /* an unused output still has a name here */
    snprintf(unused[k], sizeof unused[k], "harp.unused.%zu", k);
    out[k] = n->output[k][0] ? n->output[k] : unused[k];
    onnx__value_info_proto__init(&vi[k]);
    vi[k].name = out[k], vp[k] = &vi[k];
  }
  if (!st) {
    in[1] = in[n->n_input + 1] = "", in[n->n_input] = zname;
    zero.name = zname, zero.has_data_type = 1, zero.data_type = OX_INT64, zero.n_int64_data = 1, zero.int64_data = &zv;
    for (int b = 0; b < 2; b++) {
      node[b].input = in + b * n->n_input, node[b].output = out;
      g[b].n_node = 1, g[b].node = &np[b], g[b].n_output = n->n_output, g[b].output = vp;
    }
    g[1].n_initializer = 1, g[1].initializer = &zp;
    static const char *const label[2] = {"(all trips)", "(no trip)"};
    st = oxf_if_host(c, cond, gp, label);
  }
  free(unused), free(in), free(out), free(vi), free(vp);
  return st;
}

/* Slots in[cfirst + j] of a host loop's carried body inputs, of shape
 * sh[j] and the dtype of slot init[j]. */
static harp_status body_slots(ox_ctx *c, int cfirst, const int *init, const fe_shape *sh, int n, int *in) {
  flow_program *f = c->fl->f;
  for (int j = 0; j < n; j++) {
    const flow_slot *is = &f->slots[init[j]];
    char name[160];
    snprintf(name, sizeof name, "%.100s_in", is->name);
    if ((in[cfirst + j] = oxf_new_slot(c, name, is->dtype, &sh[j])) < 0) return c->e->code;
  }
  return HARP_OK;
}

/* After the body was imported with carried shapes sh[]: the axes where the
 * body's result differs become shape variables (known at run time; an axis
 * once variable stays so).  *again: sh changed, import the body again. */
static harp_status widen(ox_ctx *c, const int *init, const int *out, fe_shape *sh, bool (*dyn)[TINY_MAX_RANK], int n,
                       bool *again) {
  flow_program *f = c->fl->f;
  *again = false;
  for (int j = 0; j < n; j++) {
    const flow_slot *a = &f->slots[init[j]], *b = &f->slots[out[j]];
    if (a->dtype != b->dtype)
      return ox_fail(c, HARP_E_DTYPE_MISMATCH, "loop-carried value %d is %s, the body makes it %s", j, tiny_dtype_name(a->dtype),
                     tiny_dtype_name(b->dtype));
    if (a->rank != b->rank)
      return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "loop-carried value %d has rank %d, the body gives it rank %d", j, a->rank,
                     b->rank);
    for (int d = 0; d < sh[j].rank; d++) {
      if (dyn[j][d] || fe_dim_cmp(sh[j].d[d], c->fl->shape[out[j]].d[d]) == FE_SAME) continue;
      if (!(sh[j].d[d] = oxf_fresh_dim(c, a->name, d))) return c->e->code;
      dyn[j][d] = *again = true;
    }
  }
  return HARP_OK;
}

/* Slots from ns on are gone (a body imported again): values outside the
 * body that took one while it was imported (a constant the host read) lose it. */
static void forget_slots(ox_ctx *c, int ns) {
  for (ox_ctx *s = c; s; s = s->parent)
    for (int i = 0; i < s->nvals; i++)
      if (s->vals[i].slot > ns) s->vals[i].slot = 0;
  for (int i = 0; i < c->fl->npins; i++)
    if (c->fl->pins[i]->slot > ns) c->fl->pins[i]->slot = 0;
}

/* The body of host loop step `st` as a block, imported until the carried
 * shapes settle.  in[0..nin) are the body inputs' slots: the carried ones,
 * in[cfirst..cfirst + n), are made here (their initial slots are
 * init[0..n)), the others given (a Loop's iteration number and condition,
 * a Scan's slices); the body's carried results are its outputs from
 * out_first on, of nout outputs. */
static harp_status host_body(ox_ctx *c, Onnx__GraphProto *body, int st, int *in, int nin, int cfirst, const int *oty,
                           const int *init, int n, int out_first, int nout) {
  ox_flowst *fl = c->fl;
  fe_shape *sh = ut_xcalloc((size_t)n + 1, sizeof *sh);
  bool(*dyn)[TINY_MAX_RANK] = ut_xcalloc((size_t)n + 1, sizeof *dyn);
  harp_status s = sh && dyn ? HARP_OK : ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
  for (int j = 0; j < n && !s; j++) sh[j] = fl->shape[init[j]];
  int outer = fl->block, ns = fl->f->nslots, ng = fl->f->nsegs, nt = fl->f->nsteps, nb = fl->f->nblocks;
  for (bool again = true; again && !s;) {
    flow_truncate(fl->f, ns, ng, nt, nb); /* the last import, when the shapes changed */
    forget_slots(c, ns);
    int blk = flow_add_block(fl->f);
    if (blk < 0) s = ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
    if (!s) s = body_slots(c, cfirst, init, sh, n, in);
    flow_block *b = s ? NULL : &fl->f->blocks[blk];
    for (int j = 0; b && j < nin && !s; j++)
      if (!flow_push(&b->in, &b->nin, in[j])) s = ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
    if (s) break;
    fl->f->steps[st].body[0] = fl->block = blk;
    s = oxf_host_block(c, body, "body", in, oty, nin);
    fl->block = outer;
    if (!s && fl->f->blocks[blk].nout != nout)
      s = ox_fail(c, HARP_E_ARITY, "the body has %d outputs; it needs %d", fl->f->blocks[blk].nout, nout);
    if (!s) s = widen(c, init, fl->f->blocks[blk].out + out_first, sh, dyn, n, &again);
  }
  free(sh);
  free(dyn);
  return s;
}

/* The node's outputs from `first` on as slots of shape: each carried
 * value's settled body-input shape (in[]), then each scan output's
 * element shape (elem[]) with `len` inserted at out_axis[j]. */
static harp_status loop_outputs(ox_ctx *c, int st, const int *in, int n, const int *elem, int k, const fe_dim *len,
                              const int64_t *out_axis) {
  ox_flowst *fl = c->fl;
  for (int j = 0; j < n + k; j++) {
    const char *name = j < (int)c->node->n_output && c->node->output[j][0] ? c->node->output[j] : "loop_out";
    fe_shape sh;
    int from = j < n ? in[j] : elem[j - n];
    if (j < n) {
      sh = fl->shape[from];
    } else {
      const fe_shape *e = &fl->shape[from];
      int ax = (int)out_axis[j - n];
      if (e->rank + 1 > TINY_MAX_RANK) return ox_fail(c, HARP_E_LIMIT, "scan output %d has rank %d (at most %d)", j - n, e->rank + 1, TINY_MAX_RANK);
      sh.rank = e->rank + 1;
      for (int d = 0, q = 0; d < sh.rank; d++) sh.d[d] = d == ax ? len : e->d[q++];
      if (!len && !(sh.d[ax] = oxf_fresh_dim(c, name, ax))) return c->e->code;
    }
    int s = oxf_new_slot(c, name, fl->f->slots[from].dtype, &sh);
    flow_step *sp = s < 0 ? NULL : &fl->f->steps[st];
    if (!sp) return c->e->code;
    if (!flow_push(&sp->out, &sp->nout, s)) return ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
    if (j >= (int)c->node->n_output || !c->node->output[j][0]) continue;
    ox_val *y = ox_def_mark(c, j);
    if (!y) return c->e->code;
    y->slot = s + 1;
  }
  return HARP_OK;
}

/* The Loop as a host loop over its body compiled once. */
static harp_status loop_host(ox_ctx *c, Onnx__GraphProto *body, ox_val *M, ox_val *cond, int n, int k) {
  char where[200], why[200];
  int64_t m = -1;
  oxf_node_where(c, where, sizeof where);
  if (M && M->has_i && M->in == 1 && fe_dim_is_int(M->iv[0], &m) && !cond)
    snprintf(why, sizeof why, "a Loop of %" PRId64 " iterations (more than harp unrolls at import, %d) runs as a host loop", m,
             OXF_UNROLL_MAX);
  else
    snprintf(why, sizeof why, "the trip count or the condition is known only at run time");
  /* fixed at import, they could unroll the loop: harp run retries so if the
   * import fails further on (a body that needs the iteration as a number) */
  if (M && !M->has_i && !M->has_t) oxf_wanted(c, M);
  if (cond && !cond->has_i && !cond->has_t) oxf_wanted(c, cond);
  if (oxf_ensure(c, why) || oxf_export(c, (size_t)c->node_index)) return c->e->code;
  int *in = ut_xcalloc((size_t)(2 * n + 4), sizeof *in), *oty = ut_xcalloc((size_t)(n + 3), sizeof *oty);
  int *init = in + n + 2;
  harp_status s = in && oty ? HARP_OK : ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
  int ms = !s && M ? oxf_host_in(c, M) : -1, cs = !s && cond ? oxf_host_in(c, cond) : -1;
  if ((M && ms < 0) || (cond && cs < 0)) s = c->e->code;
  for (int j = 0; j < n && !s; j++) {
    bool failed = false;
    ox_val *x = ox_in(c, 2 + j, &failed);
    if (!x && !failed) s = ox_fail(c, HARP_E_ARITY, "input %d (a loop-carried value) is required", 2 + j);
    else if (!x || (init[j] = oxf_host_in(c, x)) < 0) s = c->e->code;
    else oty[2 + j] = x->oty;
  }
  int st = s ? -1 : oxf_add_step(c, FLOW_LOOP, where);
  if (st < 0 && !s) s = c->e->code;
  flow_step *sp = s ? NULL : &c->fl->f->steps[st];
  if (sp && (!flow_push(&sp->in, &sp->nin, ms) || !flow_push(&sp->in, &sp->nin, cs))) s = ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
  for (int j = 0; j < n && !s; j++)
    if (!flow_push(&c->fl->f->steps[st].in, &c->fl->f->steps[st].nin, init[j])) s = ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
  fe_shape scalar_shape = {.rank = 0};
  if (!s && ((in[0] = oxf_new_slot(c, "iteration", TINY_I32, &scalar_shape)) < 0 ||
             (in[1] = oxf_new_slot(c, "cond", TINY_BOOL, &scalar_shape)) < 0))
    s = c->e->code;
  oty[0] = OX_INT64, oty[1] = OX_BOOL;
  if (!s) {
    c->fl->f->steps[st].nstate = n;
    s = host_body(c, body, st, in, 2 + n, 2, oty, init, n, 1, 1 + n + k);
  }
  int64_t *axis = s ? NULL : ut_xcalloc((size_t)k + 1, sizeof *axis);
  bool *rev = axis ? ut_xcalloc((size_t)k + 1, sizeof *rev) : NULL;
  if (!s && !rev) s = ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
  if (!s) {
    sp = &c->fl->f->steps[st];
    sp->out_axis = axis, sp->out_rev = rev;
    const fe_dim *len = m >= 0 && !cond ? fe_dim_int(c->A, m) : NULL; /* the scan outputs' length, when known */
    s = loop_outputs(c, st, in + 2, n, c->fl->f->blocks[sp->body[0]].out + 1 + n, k, len, axis);
  } else {
    free(axis);
  }
  free(in);
  free(oty);
  return s ? s : oxf_enter(c, (size_t)c->node_index + 1);
}

harp_status oxf_op_loop(ox_ctx *c) {
  Onnx__GraphProto *body = oxf_graph_attr(c, "body");
  if (!body || oxf_prepare(c)) return c->e->code;
  if (c->node->n_input < 2) return ox_fail(c, HARP_E_ARITY, "a Loop has the inputs M, cond and the loop-carried values");
  int n = (int)c->node->n_input - 2;
  if ((int)body->n_input != n + 2)
    return ox_fail(c, HARP_E_ARITY, "the body has %zu inputs; with %d loop-carried values it needs %d", body->n_input, n, n + 2);
  if ((int)body->n_output < n + 1)
    return ox_fail(c, HARP_E_ARITY, "the body has %zu outputs; with %d loop-carried values it needs at least %d", body->n_output, n,
                   n + 1);
  int k = (int)body->n_output - 1 - n;
  if ((int)c->node->n_output != n + k)
    return ox_fail(c, HARP_E_ARITY, "the Loop has %zu outputs; its body gives %d loop-carried values and %d scan outputs",
                   c->node->n_output, n, k);
  bool failed = false;
  ox_val *M = ox_in(c, 0, &failed), *cond = failed ? NULL : ox_in(c, 1, &failed);
  if (failed) return c->e->code;
  bool wrap;
  int64_t trips = unroll_trips(c, body, M, cond, &wrap);
  if (c->e->code) return c->e->code;
  if (wrap) return loop_wrap(c, cond);
  if (trips >= 0) return loop_unroll(c, body, cond != NULL, trips, n, k);
  return loop_host(c, body, M, cond, n, k);
}

/* ---- Scan ------------------------------------------------------------------------------------ */
typedef struct scan_spec {
  int n, m, k;        /* states, scan inputs, scan outputs */
  int64_t *in_axis;   /* per scan input (normalized) */
  bool *in_rev;
  int64_t *out_axis;  /* per scan output (may be negative until the element rank is known) */
  bool *out_rev;
} scan_spec;

static void spec_free(scan_spec *p) { free(p->in_axis), free(p->in_rev), free(p->out_axis), free(p->out_rev); }

static int val_rank(ox_ctx *c, const ox_val *x) {
  if (x->v > 0) return ox_rank_of(c, x->v);
  return x->has_t ? x->t.rank : x->has_i ? x->irank : -1;
}

/* A scan output axis in [-(r+1), r+1) for elements of rank r, normalized. */
static harp_status out_axis_of(ox_ctx *c, int j, int r, int64_t *axis) {
  if (*axis < -(r + 1) || *axis > r) return ox_fail(c, HARP_E_INVALID_ARG, "scan_output_axes[%d] = %" PRId64 " is out of range for rank %d", j, *axis, r + 1);
  if (*axis < 0) *axis += r + 1;
  return HARP_OK;
}

/* L iterations in place.  h[0..n): the states (updated); x[0..m): the scan
 * inputs; e[j * L + t]: scan output j of iteration t.  All are pinned. */
static harp_status scan_iterate(ox_ctx *c, Onnx__GraphProto *body, const scan_spec *p, ox_val *h, ox_val *x, int64_t L, ox_val *e) {
  int n = p->n, m = p->m, k = p->k;
  ox_val *in = ut_xcalloc((size_t)(n + m) + 1, sizeof *in), *out = ut_xcalloc((size_t)(n + k) + 1, sizeof *out);
  harp_status st = in && out ? HARP_OK : ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
  for (int64_t t = 0; t < L && !st; t++) {
    for (int j = 0; j < n && !st; j++) st = oxf_copy(c, &in[j], &h[j]);
    for (int j = 0; j < m && !st; j++) {
      hg_val xv = ox_value(c, &x[j]);
      hg_val v = xv < 0 ? -1 : take(c, xv, (int)p->in_axis[j], p->in_rev[j] ? L - 1 - t : t);
      ut_tensor_free(&in[n + j].t);
      memset(&in[n + j], 0, sizeof in[n + j]);
      in[n + j].v = v, in[n + j].name = x[j].name;
      if (v < 0) st = c->e->code;
    }
    if (!st) st = iterate(c, body, in, n + m, out, n + k);
    for (int j = 0; j < n && !st; j++) st = oxf_copy(c, &h[j], &out[j]);
    for (int j = 0; j < k && !st; j++) st = oxf_copy(c, &e[j * L + t], &out[n + j]);
  }
  holders_free(in, n + m);
  holders_free(out, n + k);
  return st;
}

/* Scan output j of L elements e[j * L ...] stacked as the spec says. */
static hg_val scan_stack(ox_ctx *c, const scan_spec *p, int j, ox_val *e, int64_t L) {
  hg_val *v = ut_xcalloc((size_t)L + 1, sizeof *v);
  if (!v) return ox_fail(c, HARP_E_NO_MEMORY, "out of memory"), -1;
  hg_val r = 0;
  for (int64_t t = 0; t < L && r >= 0; t++) r = v[t] = ox_value(c, &e[j * L + t]);
  int64_t ax = p->out_axis[j];
  if (r >= 0 && !out_axis_of(c, j, ox_rank_of(c, v[0]), &ax)) r = stack(c, v, (int)L, (int)ax, p->out_rev[j]);
  else r = -1;
  free(v);
  return r;
}

/* Scan (opset 9 on) unrolled: L iterations over inputs from `first`. */
static harp_status scan_unroll(ox_ctx *c, Onnx__GraphProto *body, const scan_spec *p, int first, int64_t L) {
  int n = p->n, m = p->m, k = p->k, nh = n + m + k * (int)L;
  ox_val *h = ut_xcalloc((size_t)nh + 1, sizeof *h);
  harp_status st = h ? HARP_OK : ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
  for (int j = 0; j < n + m && !st; j++) {
    bool failed = false;
    ox_val *x = ox_in(c, first + j, &failed);
    st = failed ? c->e->code : x ? oxf_copy(c, &h[j], x) : ox_fail(c, HARP_E_ARITY, "input %d is required", first + j);
  }
  bool pinned = !st && !(st = oxf_pin(c, h, nh));
  if (!st) st = scan_iterate(c, body, p, h, h + n, L, h + n + m);
  for (int j = 0; j < n && !st; j++) st = oxf_def_alias(c, j, &h[j]);
  for (int j = 0; j < k && !st; j++) st = ox_def(c, n + j, scan_stack(c, p, j, h + n + m, L));
  if (pinned) oxf_unpin(c, nh);
  holders_free(h, nh);
  return st;
}

/* Scan of opset 8: every input has a batch axis first (the scan axis is
 * 1); the body runs per batch element.  Unrolled over B x L. */
static harp_status scan8_unroll(ox_ctx *c, Onnx__GraphProto *body, const scan_spec *p, int64_t B, int64_t L) {
  int n = p->n, m = p->m, k = p->k, per = n + m + k * (int)L, nh = (n + m) + (int)B * (n + k) + per;
  ox_val *h = ut_xcalloc((size_t)nh + 1, sizeof *h);
  harp_status st = h ? HARP_OK : ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
  ox_val *all = h, *res = h + n + m, *w = res + B * (n + k); /* inputs; per batch: states, scan outputs; the batch at work */
  for (int j = 0; j < n + m && !st; j++) {
    bool failed = false;
    ox_val *x = ox_in(c, 1 + j, &failed);
    st = failed ? c->e->code : x ? oxf_copy(c, &all[j], x) : ox_fail(c, HARP_E_ARITY, "input %d is required", 1 + j);
  }
  bool pinned = !st && !(st = oxf_pin(c, h, nh));
  for (int64_t b = 0; b < B && !st; b++) {
    for (int j = 0; j < n + m && !st; j++) { /* batch element b of every input */
      hg_val xv = ox_value(c, &all[j]), v = xv < 0 ? -1 : take(c, xv, 0, b);
      ut_tensor_free(&w[j].t);
      memset(&w[j], 0, sizeof w[j]);
      w[j].v = v, w[j].name = all[j].name;
      if (v < 0) st = c->e->code;
    }
    if (!st) st = scan_iterate(c, body, p, w, w + n, L, w + n + m);
    for (int j = 0; j < n && !st; j++) st = oxf_copy(c, &res[b * (n + k) + j], &w[j]);
    for (int j = 0; j < k && !st; j++) {
      hg_val v = scan_stack(c, p, j, w + n + m, L);
      memset(&res[b * (n + k) + n + j], 0, sizeof res[0]);
      res[b * (n + k) + n + j].v = v, res[b * (n + k) + n + j].name = "scan_out";
      if (v < 0) st = c->e->code;
    }
  }
  hg_val *v = st ? NULL : ut_xcalloc((size_t)B + 1, sizeof *v);
  if (!st && !v) st = ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
  for (int j = 0; j < n + k && !st; j++) { /* stacked over the batch again */
    for (int64_t b = 0; b < B && !st; b++)
      if ((v[b] = ox_value(c, &res[b * (n + k) + j])) < 0) st = c->e->code;
    if (!st) st = ox_def(c, j, stack(c, v, (int)B, 0, false));
  }
  free(v);
  if (pinned) oxf_unpin(c, nh);
  holders_free(h, nh);
  return st;
}

/* The Scan as a host loop over its body compiled once (opset 9 on). */
static harp_status scan_host(ox_ctx *c, Onnx__GraphProto *body, scan_spec *p, const fe_dim *len) {
  char where[200];
  int64_t L;
  oxf_node_where(c, where, sizeof where);
  int n = p->n, m = p->m, k = p->k;
  if (oxf_ensure(c, fe_dim_is_int(len, &L) ? "a Scan longer than harp unrolls at import runs as a host loop"
                                           : "the length of the Scan is known only at run time") ||
      oxf_export(c, (size_t)c->node_index))
    return c->e->code;
  int *in = ut_xcalloc((size_t)(2 * (n + m)) + 2, sizeof *in), *oty = ut_xcalloc((size_t)(n + m) + 1, sizeof *oty);
  int *init = in + n + m; /* states, then scan inputs */
  harp_status s = in && oty ? HARP_OK : ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
  for (int j = 0; j < n + m && !s; j++) {
    bool failed = false;
    ox_val *x = ox_in(c, j, &failed);
    if (!x && !failed) s = ox_fail(c, HARP_E_ARITY, "input %d is required", j);
    else if (!x || (init[j] = oxf_host_in(c, x)) < 0) s = c->e->code;
    else oty[j] = x->oty;
  }
  int st = s ? -1 : oxf_add_step(c, FLOW_SCAN, where);
  if (st < 0 && !s) s = c->e->code;
  for (int j = 0; j < n + m && !s; j++)
    if (!flow_push(&c->fl->f->steps[st].in, &c->fl->f->steps[st].nin, init[j])) s = ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
  for (int j = 0; j < m && !s; j++) { /* the slices the body sees: a slot each, the axis dropped */
    const fe_shape *xs = &c->fl->shape[init[n + j]];
    fe_shape e = {.rank = xs->rank - 1};
    for (int d = 0, q = 0; d < xs->rank; d++)
      if (d != p->in_axis[j]) e.d[q++] = xs->d[d];
    char name[160];
    snprintf(name, sizeof name, "%.100s_elem", c->fl->f->slots[init[n + j]].name);
    if ((in[n + j] = oxf_new_slot(c, name, c->fl->f->slots[init[n + j]].dtype, &e)) < 0) s = c->e->code;
  }
  if (!s) {
    c->fl->f->steps[st].nstate = n;
    s = host_body(c, body, st, in, n + m, 0, oty, init, n, 0, n + k);
  }
  flow_step *sp = s ? NULL : &c->fl->f->steps[st];
  if (sp) { /* the spec moves into the step */
    sp->in_axis = p->in_axis, sp->in_rev = p->in_rev, sp->out_axis = p->out_axis, sp->out_rev = p->out_rev;
    memset(p, 0, sizeof *p);
    const flow_block *b = &c->fl->f->blocks[sp->body[0]];
    for (int j = 0; j < k && !s; j++)
      s = out_axis_of(c, j, c->fl->f->slots[b->out[n + j]].rank, &sp->out_axis[j]);
    if (!s) s = loop_outputs(c, st, in, n, b->out + n, k, len, sp->out_axis);
  }
  free(in);
  free(oty);
  return s ? s : oxf_enter(c, (size_t)c->node_index + 1);
}

/* Dim `axis` of value x (NULL when its shape is unknown). */
static const fe_dim *val_dim(ox_ctx *c, const ox_val *x, int axis) {
  if (x->v > 0) {
    const fe_shape *sh = ox_shape_of(c, x->v);
    return sh && axis < sh->rank ? sh->d[axis] : NULL;
  }
  if (x->has_t && axis < x->t.rank) return fe_dim_int(c->A, x->t.shape[axis]);
  if (x->has_i && axis < x->irank) return fe_dim_int(c->A, x->ishape[axis]);
  return NULL;
}

/* Per scan input j (from input `first` + n), flags attribute `name` of 0 / 1. */
static harp_status flags_attr(ox_ctx *c, const char *name, int m, bool *out) {
  int64_t v[TINY_MAX_RANK * 8];
  if (axes_attr(c, name, m, NULL, v)) return c->e->code;
  for (int j = 0; j < m; j++) {
    if (v[j] != 0 && v[j] != 1) return ox_fail(c, HARP_E_INVALID_ARG, "%s[%d] = %" PRId64 " (must be 0 or 1)", name, j, v[j]);
    out[j] = v[j] == 1;
  }
  return HARP_OK;
}

/* The scan inputs' common length along their axes (first: the first scan
 * input's node input); B: opset 8's batch. */
static harp_status scan_len(ox_ctx *c, const scan_spec *p, int first, bool v8, const fe_dim **len, const fe_dim **batch) {
  *len = *batch = NULL;
  for (int j = 0; j < p->m; j++) {
    ox_val *x = ox_in(c, first + j, NULL);
    const fe_dim *d = x ? val_dim(c, x, v8 ? 1 : (int)p->in_axis[j]) : NULL, *b = x && v8 ? val_dim(c, x, 0) : NULL;
    if (!d || (v8 && !b)) return ox_fail(c, HARP_E_INVALID_ARG, "scan input %d has no axis to scan", j);
    if (*len && fe_dim_cmp(*len, d) == FE_DIFF)
      return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "the scan inputs differ in length (%s and %s)", (*len)->text, d->text);
    if (*batch && b && fe_dim_cmp(*batch, b) == FE_DIFF)
      return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "the scan inputs differ in batch size (%s and %s)", (*batch)->text, b->text);
    *len = d, *batch = b;
  }
  return HARP_OK;
}

/* Opset 8: sequence_lens (input 0) may only say every sequence is whole. */
static harp_status scan8_lens(ox_ctx *c, int64_t L) {
  ox_val *sl = ox_in(c, 0, NULL);
  if (!sl) return c->e->code;
  int64_t v;
  if (!sl->has_i) return ox_fail(c, HARP_E_UNSUPPORTED, "sequence_lens of a Scan (opset 8) must be a constant");
  for (int64_t i = 0; i < sl->in; i++)
    if (!fe_dim_is_int(sl->iv[i], &v) || v != L)
      return ox_fail(c, HARP_E_UNSUPPORTED, "sequence_lens of a Scan (opset 8) shorter than the sequence (%s of %" PRId64 ")",
                     sl->iv[i]->text, L);
  return HARP_OK;
}

harp_status oxf_op_scan(ox_ctx *c) {
  Onnx__GraphProto *body = oxf_graph_attr(c, "body");
  int64_t nscan;
  if (!body || oxf_prepare(c) || ox_attr_int(c, "num_scan_inputs", -1, &nscan)) return c->e->code;
  bool v8 = c->opset < 9;
  int first = v8 ? 1 : 0, nin = (int)c->node->n_input - first;
  if (nscan < 1 || nscan > nin) return ox_fail(c, HARP_E_INVALID_ARG, "num_scan_inputs is %" PRId64 " for %d inputs", nscan, nin);
  scan_spec p = {.n = nin - (int)nscan, .m = (int)nscan};
  p.k = (int)body->n_output - p.n;
  if ((int)body->n_input != nin || p.k < 0)
    return ox_fail(c, HARP_E_ARITY, "the body has %zu inputs and %zu outputs; with %d states and %d scan inputs it needs %d "
                   "inputs and at least %d outputs", body->n_input, body->n_output, p.n, p.m, nin, p.n);
  if ((int)c->node->n_output != p.n + p.k)
    return ox_fail(c, HARP_E_ARITY, "the Scan has %zu outputs; its body gives %d states and %d scan outputs", c->node->n_output,
                   p.n, p.k);
  int rk[TINY_MAX_RANK * 8];
  if (p.m > (int)(sizeof rk / sizeof *rk)) return ox_fail(c, HARP_E_LIMIT, "%d scan inputs (at most %zu)", p.m, sizeof rk / sizeof *rk);
  for (int j = 0; j < p.m; j++) {
    bool failed = false;
    ox_val *x = ox_in(c, first + p.n + j, &failed);
    if (!x) return failed ? c->e->code : ox_fail(c, HARP_E_ARITY, "scan input %d is required", j);
    if ((rk[j] = val_rank(c, x)) < 1) return ox_fail(c, HARP_E_INVALID_ARG, "scan input %d has rank %d (no axis to scan)", j, rk[j]);
  }
  p.in_axis = ut_xcalloc((size_t)p.m + 1, sizeof *p.in_axis), p.in_rev = ut_xcalloc((size_t)p.m + 1, sizeof *p.in_rev);
  p.out_axis = ut_xcalloc((size_t)p.k + 1, sizeof *p.out_axis), p.out_rev = ut_xcalloc((size_t)p.k + 1, sizeof *p.out_rev);
  harp_status st = p.in_axis && p.in_rev && p.out_axis && p.out_rev ? HARP_OK : ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
  if (!st && v8) st = flags_attr(c, "directions", p.m, p.in_rev);
  if (!st && !v8 && !(st = axes_attr(c, "scan_input_axes", p.m, rk, p.in_axis)) &&
      !(st = flags_attr(c, "scan_input_directions", p.m, p.in_rev)) && !(st = axes_attr(c, "scan_output_axes", p.k, NULL, p.out_axis)))
    st = flags_attr(c, "scan_output_directions", p.k, p.out_rev);
  const fe_dim *len = NULL, *batch = NULL;
  if (!st) st = scan_len(c, &p, first + p.n, v8, &len, &batch);
  int64_t L = -1, B = 1, nodes = body->n_node ? (int64_t)body->n_node : 1;
  bool known = !st && fe_dim_is_int(len, &L) && (!v8 || fe_dim_is_int(batch, &B));
  bool unroll = known && L * B <= OXF_UNROLL_MAX && L * B * nodes <= OXF_UNROLL_NODES;
  if (!st && v8 && !unroll)
    st = ox_fail(c, HARP_E_UNSUPPORTED, "a Scan of opset 8 runs only unrolled at import: its batch x length (%s x %s) must be "
                 "known and at most %d", batch->text, len->text, OXF_UNROLL_MAX);
  if (!st && v8 && c->node->n_input && c->node->input[0][0]) st = scan8_lens(c, L);
  if (!st && v8 && L == 0) st = ox_fail(c, HARP_E_UNSUPPORTED, "a Scan of 0 iterations");
  if (!st && unroll && L == 0) st = ox_fail(c, HARP_E_UNSUPPORTED, "a Scan of 0 iterations (its output element shape is unknown)");
  if (!st) st = v8 ? scan8_unroll(c, body, &p, B, L) : unroll ? scan_unroll(c, body, &p, 0, L) : scan_host(c, body, &p, len);
  spec_free(&p);
  return st;
}
