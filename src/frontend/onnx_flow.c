/* onnx_flow.c — ONNX If, Loop and Scan, and the host program of a model
 * whose control flow is decided at run time (harp/flow.h).
 *
 * A subgraph is imported in a scope of its own (ox_ctx.parent: its names
 * fall back to the graphs around it, as ONNX's outer-scope values do).  An
 * If whose condition is a constant after import imports the taken branch in
 * place; a Loop of a small constant trip count and a Scan of a small known
 * length are unrolled (onnx_flow_loop.c).  Otherwise the node becomes a host
 * step: the graph built so far ends (a segment), each branch or body becomes
 * a block of segments of its own, and the graph after the node is a new
 * segment.  Values cross a cut through slots: a computed value becomes an
 * output of the segment that computes it and an input of each segment that
 * reads it; constants stay constants (folded shapes fold on), weights are
 * read again by their ids.
 *
 * Needs: onnx_load.c (scopes, values), flow.c (the host program).
 * Gives: ox_find_flow (If; Loop and Scan from onnx_flow_loop.c), the cuts
 * (onnx_flow_int.h), ox_graph_reads, ox_flow_outputs / _finish. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_flow_int.h"

/* ---- the state --------------------------------------------------------------------- */
harp_status oxf_prepare(ox_ctx *c) {
  if (!c->fl) {
    if (!(c->fl = ut_xcalloc(1, sizeof *c->fl))) return ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
    c->fl->seg = -1;
    c->fl->allowed = c->opts && c->opts->host_flow;
  }
  return HARP_OK;
}

bool ox_flow_active(const ox_ctx *c) { return c->fl && c->fl->f; }

/* What a segment has imported: reset when a new one starts. */
static void memo_reset(ox_flowst *fl) {
  free(fl->inv);
  fl->inv = NULL;
  ut_strmap_free(&fl->wmemo);
  ut_strmap_free(&fl->symmemo);
  fl->nsym = 0;
}

static void state_free(ox_flowst *fl) {
  if (!fl) return;
  memo_reset(fl);
  free(fl->pins);
  free(fl->symdims);
  ut_strmap_free(&fl->rtsyms);
  ut_strmap_free(&fl->wanted);
  free(fl->shape);
  flow_free(fl->f);
  free(fl);
}

/* ---- names read ---------------------------------------------------------------------- */
typedef struct filter {
  ut_strmap defs; /* names the subgraph defines */
  bool (*put)(void *ctx, const char *name);
  void *ctx;
} filter;

static bool put_outside(void *ctx, const char *name) {
  filter *f = ctx;
  return ut_strmap_find(&f->defs, name) || f->put(f->ctx, name);
}

static harp_status reads(ox_ctx *c, const Onnx__GraphProto *gp, size_t from, bool (*put)(void *, const char *), void *ctx,
                       int depth);

/* The names subgraph gp reads from outside it. */
static harp_status captured(ox_ctx *c, const Onnx__GraphProto *gp, bool (*put)(void *, const char *), void *ctx, int depth) {
  if (depth > OXF_MAX_NESTING)
    return ox_fail(c, HARP_E_LIMIT, "subgraphs nest more than %d deep", OXF_MAX_NESTING);
  filter f = {{0}, put, ctx};
  bool ok = true;
  for (size_t i = 0; i < gp->n_input && ok; i++) ok = !gp->input[i]->name || ut_strmap_put(&f.defs, gp->input[i]->name, 1);
  for (size_t i = 0; i < gp->n_initializer && ok; i++)
    ok = !gp->initializer[i]->name || ut_strmap_put(&f.defs, gp->initializer[i]->name, 1);
  for (size_t i = 0; i < gp->n_node && ok; i++)
    for (size_t k = 0; k < gp->node[i]->n_output && ok; k++)
      ok = !gp->node[i]->output[k] || ut_strmap_put(&f.defs, gp->node[i]->output[k], 1);
  harp_status st = ok ? reads(c, gp, 0, put_outside, &f, depth) : ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
  for (size_t i = 0; i < gp->n_output && !st; i++)
    if (gp->output[i]->name && !put_outside(&f, gp->output[i]->name)) st = ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
  ut_strmap_free(&f.defs);
  return st;
}

/* The error of node i of gp (a subgraph's at depth > 0) without an op_type
 * (attr < 0) or with attribute attr without a name: found before any node
 * is imported, as the folds that look ahead (BN fold, QDQ readers and
 * producers, Clip bounds) read later nodes' op_type and attribute names. */
static harp_status nameless(ox_ctx *c, const Onnx__GraphProto *gp, size_t i, int depth, int attr) {
  char nm[96];
  ox_printable(gp->node[i]->name, nm, sizeof nm);
  const char *sub = depth ? " of a subgraph" : "";
  if (attr < 0) return ox_fail(c, HARP_E_INVALID_ARG, "node %zu \"%s\"%s has no op_type", i, nm, sub);
  return ox_fail(c, HARP_E_INVALID_ARG, "node %zu \"%s\"%s: attribute %d has no name", i, nm, sub, attr);
}

static harp_status reads(ox_ctx *c, const Onnx__GraphProto *gp, size_t from, bool (*put)(void *, const char *), void *ctx,
                       int depth) {
  for (size_t i = from; i < gp->n_node; i++) {
    const Onnx__NodeProto *n = gp->node[i];
    if (!n->op_type || !*n->op_type) return nameless(c, gp, i, depth, -1); /* the folds that look ahead read it */
    for (size_t k = 0; k < n->n_input; k++)
      if (n->input[k] && n->input[k][0] && !put(ctx, n->input[k])) return ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
    for (size_t a = 0; a < n->n_attribute; a++) {
      const Onnx__AttributeProto *at = n->attribute[a];
      if (!at->name || !*at->name) return nameless(c, gp, i, depth, (int)a); /* the folds find a later node's by name */
      if (at->g && captured(c, at->g, put, ctx, depth + 1)) return c->e->code;
      for (size_t k = 0; k < at->n_graphs; k++)
        if (at->graphs[k] && captured(c, at->graphs[k], put, ctx, depth + 1)) return c->e->code;
    }
  }
  return HARP_OK;
}

harp_status ox_graph_reads(ox_ctx *c, const Onnx__GraphProto *gp, size_t from, bool (*put)(void *ctx, const char *name),
                         void *ctx) {
  return reads(c, gp, from, put, ctx, 0);
}

static bool put_name(void *ctx, const char *name) { return ut_strmap_put(ctx, name, 1); }

/* The names read from node `from` of c's graph on and by its outputs; where
 * c continues its parent's segment, also what the parent reads from its
 * current node on (an inline scope's cut cuts its parent's graph too). */
static harp_status live_names(ox_ctx *c, size_t from, ut_strmap *out) {
  for (ox_ctx *s = c; s; s = s->parent) {
    if (ox_graph_reads(s, s->gp, from, put_name, out)) return c->e->code;
    for (size_t i = 0; i < s->gp->n_output; i++)
      if (s->gp->output[i]->name && !ut_strmap_put(out, s->gp->output[i]->name, 1))
        return ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
    if (!s->inline_scope || !s->parent) break;
    from = (size_t)s->parent->node_index;
  }
  return HARP_OK;
}

static hg_val slot_import(ox_ctx *c, int k);

/* ---- slots --------------------------------------------------------------------------- */
/* Slot k's shape s binds the run-time shape variables among its dims that
 * no slot bound yet (a segment needing one imports that slot). */
static void bind_syms(ox_flowst *fl, const fe_shape *s, int k) {
  for (int i = 0; i < s->rank; i++) {
    const char *sym = fe_dim_is_sym(s->d[i]);
    int *p = sym ? ut_strmap_find(&fl->rtsyms, sym) : NULL;
    if (p && *p < 0) *p = k;
  }
}

harp_status oxf_need_sym(ox_ctx *c, const char *sym) {
  int *p = c->fl ? ut_strmap_find(&c->fl->rtsyms, sym) : NULL;
  if (!p || *p < 0) return ox_fail(c, HARP_E_INTERNAL, "the run-time size %s has no slot", sym);
  return slot_import(c, *p) < 0 ? c->e->code : HARP_OK;
}

bool oxf_sym_runtime(const ox_ctx *c, const char *sym) { return c->fl && ut_strmap_find(&c->fl->rtsyms, sym); }

/* A new slot of shape s (its dims are kept for the segments that read it). */
int oxf_new_slot(ox_ctx *c, const char *name, tiny_dtype dt, const fe_shape *s) {
  ox_flowst *fl = c->fl;
  int k = flow_add_slot(fl->f, name, dt, s->rank);
  if (k >= 0 && k >= fl->shapecap) {
    int cap = fl->shapecap ? 2 * fl->shapecap : 16;
    fe_shape *p = ut_xrealloc(fl->shape, sizeof *p * (size_t)cap);
    if (p) fl->shape = p, fl->shapecap = cap;
    else k = -1;
  }
  if (k < 0) {
    ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
    return -1;
  }
  fl->shape[k] = *s;
  for (int i = 0; i < s->rank; i++) fe_dim_is_int(s->d[i], &fl->f->slots[k].dims[i]);
  bind_syms(fl, s, k);
  return k;
}

/* A dim known at run time only: a shape variable of its own. */
const fe_dim *oxf_fresh_dim(ox_ctx *c, const char *base, int axis) {
  char buf[160];
  snprintf(buf, sizeof buf, "%.40s_d%d", base, axis); /* short: a shape variable's name */
  const char *id = ox_ident(c, buf);
  const fe_dim *d = id ? fe_dim_sym(c->A, id) : NULL;
  if (d && !ut_strmap_put(&c->fl->rtsyms, id, -1)) d = NULL;
  if (!d && !c->e->code) ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
  return d;
}

static int weight_index(const ox_ctx *c, const char *id) {
  for (int w = 0; w < c->m->nweights; w++)
    if (!strcmp(c->m->weight_ids[w], id)) return w;
  return -1;
}

static int weight_slot(ox_ctx *c, ox_val *x) {
  int w = weight_index(c, x->wid);
  if (w < 0) return ox_fail(c, HARP_E_INTERNAL, "weight %s of value \"%s\" is missing", x->wid, x->name), -1;
  const ut_tensor *t = &c->m->weights[w];
  fe_shape s = {.rank = t->rank};
  for (int i = 0; i < t->rank; i++)
    if (!(s.d[i] = fe_dim_int(c->A, t->shape[i]))) return ox_fail(c, HARP_E_NO_MEMORY, "out of memory"), -1;
  int k = oxf_new_slot(c, x->name, t->dtype, &s);
  if (k >= 0) c->fl->f->slots[k].weight = w, x->slot = k + 1;
  return k;
}

/* A constant for the host (a trip count, a condition): its elements, an
 * integer beyond int32 clamped into it (a trip count of INT64_MAX is "no
 * bound"). */
int oxf_konst_slot(ox_ctx *c, ox_val *x) {
  ut_tensor t = {0};
  if (x->has_t) {
    if (ut_tensor_alloc(c->e, &t, x->t.dtype, x->t.rank, x->t.shape)) return -1;
    if (x->t.nbytes) memcpy(t.data, x->t.data, x->t.nbytes);
  } else {
    if (ut_tensor_alloc(c->e, &t, x->oty == OX_BOOL ? TINY_BOOL : TINY_I32, x->irank, x->ishape)) return -1;
    for (int64_t i = 0; i < x->in; i++) {
      int64_t v;
      if (!fe_dim_is_int(x->iv[i], &v)) {
        ut_tensor_free(&t);
        return ox_fail(c, HARP_E_UNSUPPORTED, "value \"%s\" depends on the symbolic size %s; harp needs it known at import "
                       "(give the input's shape)", x->name, x->iv[i]->text), -1;
      }
      if (t.dtype == TINY_BOOL) ((uint8_t *)t.data)[i] = v != 0;
      else ((int32_t *)t.data)[i] = (int32_t)(v > INT32_MAX ? INT32_MAX : v < INT32_MIN ? INT32_MIN : v);
    }
  }
  fe_shape s = {.rank = t.rank};
  for (int i = 0; i < t.rank; i++)
    if (!(s.d[i] = fe_dim_int(c->A, t.shape[i]))) {
      ut_tensor_free(&t);
      return ox_fail(c, HARP_E_NO_MEMORY, "out of memory"), -1;
    }
  int k = oxf_new_slot(c, x->name, t.dtype, &s);
  if (k < 0) {
    ut_tensor_free(&t);
    return -1;
  }
  c->fl->f->slots[k].konst = t;
  c->fl->f->slots[k].has_konst = true;
  return k;
}

/* x, computed in the current segment, as its slot: a new output of the
 * segment (or the input it already is there). */
static int export_value(ox_ctx *c, ox_val *x) {
  ox_flowst *fl = c->fl;
  flow_seg *sg = &fl->f->segs[fl->seg];
  for (int k = 0; k < sg->nin; k++)
    if (fl->inv[k] == x->v) return x->slot = sg->in[k] + 1, sg->in[k];
  const fe_shape *sh = ox_shape_of(c, x->v);
  const char *id = ox_ident(c, x->name);
  if (!sh || !id) return c->e->code ? -1 : (ox_fail(c, HARP_E_INTERNAL, "value \"%s\" has no shape", x->name), -1);
  int k = oxf_new_slot(c, x->name, hg_val_dtype(c->g, x->v), sh);
  if (k < 0 || ox_check(c, hg_output(c->g, id, x->v))) return -1;
  sg = &fl->f->segs[fl->seg];
  if (!flow_push(&sg->out, &sg->nout, k) || !flow_push_str(&sg->out_id, sg->nout - 1, id))
    return ox_fail(c, HARP_E_NO_MEMORY, "out of memory"), -1;
  x->slot = k + 1;
  return k;
}

int oxf_slot_of(ox_ctx *c, ox_val *x) {
  if (x->slot) return x->slot - 1;
  if (x->wid) return weight_slot(c, x);
  if (x->has_i || x->has_t) { /* a weight now: segments and the host read it by its id */
    if (ox_const_value(c, x, false) < 0) return -1;
    return weight_slot(c, x);
  }
  if (ox_value(c, x) < 0) return -1; /* a partial GELU: what it holds so far */
  return export_value(c, x);
}

int oxf_host_in(ox_ctx *c, ox_val *x) {
  if (!x->slot && x->has_i && oxf_val_runtime(c, x)) { /* sizes known at run time: computed in the segment */
    if (ox_value(c, x) < 0) return -1;
    return export_value(c, x);
  }
  if (!x->slot && (x->has_i || x->has_t)) return oxf_konst_slot(c, x);
  return oxf_slot_of(c, x);
}

/* ---- segments -------------------------------------------------------------------------- */
/* The host program, at the first cut: segment 0 is the graph built so far
 * (the model's program, handed over at the end), main's inputs are the
 * model's graph inputs. */
static harp_status flow_start(ox_ctx *c) {
  ox_flowst *fl = c->fl;
  ox_ctx *r = c;
  while (r->parent) r = r->parent;
  if (!(fl->f = ut_xcalloc(1, sizeof *fl->f))) return ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
  int b = flow_add_block(fl->f), s = flow_add_seg(fl->f, NULL), st = flow_add_step(fl->f, FLOW_SEG, "");
  if (b < 0 || s < 0 || st < 0) return ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
  fl->f->main = fl->block = b;
  fl->seg = s;
  fl->f->steps[st].seg = s;
  flow_block *mb = &fl->f->blocks[b];
  if (!flow_push(&mb->steps, &mb->nsteps, st)) return ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
  for (size_t i = 0; i < r->gp->n_input; i++) {
    int *j = ut_strmap_find(&r->byname, r->gp->input[i]->name);
    ox_val *x = j ? &r->vals[*j] : NULL;
    if (!x || x->is_init || x->v <= 0) continue; /* an initializer's default, a fixed input */
    const fe_node *n = fe_node_of(c->g, x->v);
    int k = oxf_new_slot(c, n->name, n->dtype, &n->shape);
    if (k < 0) return c->e->code;
    flow_slot *sl = &fl->f->slots[k];
    for (int d = 0; d < n->shape.rank; d++) {
      const char *sym = fe_dim_is_sym(n->shape.d[d]);
      if (sym && !(sl->sym[d] = strdup(sym))) return ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
    }
    flow_seg *sg = &fl->f->segs[s];
    mb = &fl->f->blocks[b];
    hg_val *inv = ut_xrealloc(fl->inv, sizeof *inv * (size_t)(sg->nin + 1));
    if (!inv) return ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
    fl->inv = inv;
    inv[sg->nin] = x->v;
    if (!flow_push(&mb->in, &mb->nin, k) || !flow_push_str(&mb->in_name, mb->nin - 1, n->name) ||
        !flow_push_str(&sg->in_id, sg->nin, n->name) || !flow_push(&sg->in, &sg->nin, k))
      return ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
    x->slot = k + 1;
  }
  return HARP_OK;
}

/* A step of the current block. */
int oxf_add_step(ox_ctx *c, flow_kind kind, const char *where) {
  flow_program *f = c->fl->f;
  int k = flow_add_step(f, kind, where);
  flow_block *b = &f->blocks[c->fl->block];
  if (k < 0 || !flow_push(&b->steps, &b->nsteps, k)) return ox_fail(c, HARP_E_NO_MEMORY, "out of memory"), -1;
  return k;
}

/* A new segment at the end of the current block; c->g becomes its graph. */
static harp_status seg_new(ox_ctx *c) {
  ox_flowst *fl = c->fl;
  hg_program *p = hg_program_new();
  hg_graph *g = p ? hg_program_add_graph(p, "main") : NULL;
  if (!g) {
    hg_program_free(p);
    return ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
  }
  int s = flow_add_seg(fl->f, p);
  int st = s < 0 ? -1 : oxf_add_step(c, FLOW_SEG, "");
  if (st < 0) return c->e->code ? c->e->code : ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
  fl->f->steps[st].seg = s;
  fl->seg = s;
  memo_reset(fl);
  c->g = g;
  return HARP_OK;
}

/* A dim of a slot as an input's dim here: an integer or a shape variable
 * as it is, an expression a shape variable of its own (bound from the
 * tensor at run time; the same expression, the same variable). */
static const fe_dim *input_dim(ox_ctx *c, const fe_dim *d) {
  int64_t n;
  if (fe_dim_is_int(d, &n) || fe_dim_is_sym(d)) return d;
  ox_flowst *fl = c->fl;
  int *k = ut_strmap_find(&fl->symmemo, d->text);
  if (k) return fl->symdims[*k];
  const char *id = ox_ident(c, "_dim");
  const fe_dim *s = id ? fe_dim_sym(c->A, id) : NULL;
  if (s && oxf_dim_runtime(c, d) && !ut_strmap_put(&fl->rtsyms, id, -1)) s = NULL; /* an expression of run-time sizes */
  const fe_dim **p = s ? ut_xrealloc(fl->symdims, sizeof *p * (size_t)(fl->nsym + 1)) : NULL;
  if (p) fl->symdims = p, p[fl->nsym] = s;
  if (!p || !ut_strmap_put(&fl->symmemo, d->text, fl->nsym++)) return ox_fail(c, HARP_E_NO_MEMORY, "out of memory"), NULL;
  return s;
}

/* Slot k's value as an input of the current segment (once per segment). */
static hg_val slot_import(ox_ctx *c, int k) {
  ox_flowst *fl = c->fl;
  flow_seg *sg = &fl->f->segs[fl->seg];
  for (int i = 0; i < sg->nin; i++)
    if (sg->in[i] == k) return fl->inv[i];
  fe_shape s = fl->shape[k];
  for (int i = 0; i < s.rank; i++)
    if (!(s.d[i] = input_dim(c, s.d[i]))) return -1;
  bind_syms(fl, &s, k);
  const char *id = ox_ident(c, fl->f->slots[k].name);
  hg_val v = id ? fe_input(c->g, id, fl->f->slots[k].dtype, &s) : -1;
  if (ox_check(c, v)) return -1;
  hg_val *inv = ut_xrealloc(fl->inv, sizeof *inv * (size_t)(sg->nin + 1));
  if (!inv) return ox_fail(c, HARP_E_NO_MEMORY, "out of memory"), -1;
  fl->inv = inv;
  inv[sg->nin] = v;
  if (!flow_push_str(&sg->in_id, sg->nin, id) || !flow_push(&sg->in, &sg->nin, k))
    return ox_fail(c, HARP_E_NO_MEMORY, "out of memory"), -1;
  return v;
}

/* A weight as an input of the current segment, by its id (once per segment). */
static hg_val weight_import(ox_ctx *c, const char *wid) {
  ox_flowst *fl = c->fl;
  int *have = ut_strmap_find(&fl->wmemo, wid);
  if (have) return *have;
  int w = weight_index(c, wid);
  if (w < 0) return ox_fail(c, HARP_E_INTERNAL, "weight %s is missing", wid), -1;
  const ut_tensor *t = &c->m->weights[w];
  tiny_dim dims[TINY_MAX_RANK];
  for (int i = 0; i < t->rank; i++) dims[i] = tiny_dim_int(t->shape[i]);
  hg_val v = hg_input(c->g, wid, t->dtype, t->rank, dims);
  if (ox_check(c, v)) return -1;
  if (!ut_strmap_put(&fl->wmemo, wid, v)) return ox_fail(c, HARP_E_NO_MEMORY, "out of memory"), -1;
  return v;
}

harp_status oxf_ensure(ox_ctx *c, const char *why) {
  if (oxf_prepare(c)) return c->e->code;
  if (!c->fl->allowed)
    return ox_fail(c, HARP_E_UNSUPPORTED, "%s: `harp run`, `harp bench` and harp_compile_file run such a model on the host, "
                   "this needs one static graph (an input it depends on can be fixed at import: --param NAME=FILE)", why);
  if (!c->fl->f && flow_start(c)) return c->e->code;
  return HARP_OK;
}

/* A value computed in the current segment and read after a cut: a slot. */
static harp_status export_one(ox_ctx *c, ox_val *x) {
  if (x->slot || x->wid || x->has_i || x->has_t || (x->v <= 0 && x->gstage <= 0)) return HARP_OK;
  return oxf_slot_of(c, x) < 0 ? c->e->code : HARP_OK;
}

/* A value read after a cut, in the new segment: a constant is built again
 * where it is used, a weight read by its id, any other value taken from
 * its slot. */
static harp_status enter_one(ox_ctx *c, ox_val *x) {
  x->gx = 0, x->gstage = 0; /* a GELU pattern does not cross a cut */
  if (x->has_i || x->has_t) x->v = 0;
  else if (x->wid) x->v = weight_import(c, x->wid);
  else if (x->slot) x->v = slot_import(c, x->slot - 1);
  else if (x->v > 0) return ox_fail(c, HARP_E_INTERNAL, "value \"%s\" crosses a segment without a slot", x->name);
  return x->v < 0 ? c->e->code : HARP_OK;
}

/* Every value read from node `from` on, and the pinned ones. */
static harp_status each_live(ox_ctx *c, size_t from, harp_status (*fn)(ox_ctx *, ox_val *)) {
  ut_strmap live = {0};
  harp_status st = live_names(c, from, &live);
  for (int i = 0; i < live.cap && !st; i++) {
    ox_val *x = live.keys[i] ? ox_find(c, live.keys[i]) : NULL;
    if (x) st = fn(c, x);
  }
  ut_strmap_free(&live);
  for (int i = 0; i < c->fl->npins && !st; i++) st = fn(c, c->fl->pins[i]);
  return st;
}

harp_status oxf_export(ox_ctx *c, size_t from) { return each_live(c, from, export_one); }

harp_status oxf_enter(ox_ctx *c, size_t from) {
  if (seg_new(c)) return c->e->code;
  return each_live(c, from, enter_one);
}

harp_status oxf_pin(ox_ctx *c, ox_val *x, int n) {
  ox_flowst *fl = c->fl;
  ox_val **p = ut_xrealloc(fl->pins, sizeof *p * (size_t)(fl->npins + n + 1));
  if (!p) return ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
  fl->pins = p;
  for (int i = 0; i < n; i++) p[fl->npins++] = &x[i];
  return HARP_OK;
}

void oxf_unpin(ox_ctx *c, int n) { c->fl->npins -= n; }

/* ---- scopes ---------------------------------------------------------------------------- */
harp_status oxf_scope_open(ox_ctx *c, Onnx__GraphProto *gp, bool inl, const char *label, ox_ctx *s) {
  harp_status st = oxf_prepare(c);
  *s = *c;
  s->vals = NULL, s->nvals = s->cap = 0;
  memset(&s->byname, 0, sizeof s->byname);
  memset(&s->uses, 0, sizeof s->uses);
  s->gp = gp, s->node = NULL, s->node_index = 0;
  s->parent = c, s->inline_scope = inl;
  if (st) return st;
  s->fl->depth++; /* oxf_scope_close undoes it, whatever happens here */
  char where[200];
  oxf_node_where(c, where, sizeof where);
  s->where = ut_arena_printf(c->A, "%s%s%s %s", c->where ? c->where : "", c->where ? ": " : "", where, label);
  if (!s->where) return ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
  if (s->fl->depth > OXF_MAX_NESTING)
    return ox_fail(c, HARP_E_LIMIT, "subgraphs nest more than %d deep", OXF_MAX_NESTING);
  return ox_scope_alloc(s, gp);
}

void oxf_scope_close(ox_ctx *c, ox_ctx *s) {
  for (int i = 0; i < s->nvals; i++) ut_tensor_free(&s->vals[i].t);
  free(s->vals);
  ut_strmap_free(&s->byname);
  ut_strmap_free(&s->uses);
  if (s->fl) s->fl->depth--;
  ox_ctx own = *c;
  *c = *s; /* the shared fields as the scope left them (the graph, identifiers, weights...) */
  c->vals = own.vals, c->nvals = own.nvals, c->cap = own.cap;
  c->byname = own.byname, c->uses = own.uses;
  c->gp = own.gp, c->node = own.node, c->node_index = own.node_index;
  c->parent = own.parent, c->inline_scope = own.inline_scope, c->where = own.where;
}

void oxf_node_where(const ox_ctx *c, char *out, int cap) {
  char nm[96], op[64];
  ox_printable(c->node->name, nm, sizeof nm);
  ox_printable(c->node->op_type, op, sizeof op);
  snprintf(out, (size_t)cap, "node %d \"%s\" (%s)", c->node_index, nm, op);
}

Onnx__GraphProto *oxf_graph_attr(ox_ctx *c, const char *name) {
  const Onnx__AttributeProto *a = ox_attr(c, name);
  if (!a) ox_fail(c, HARP_E_INVALID_ARG, "attribute %s (a graph) is required", name);
  else if (a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH || !a->g)
    ox_fail(c, HARP_E_INVALID_ARG, "attribute %s must be a graph", name);
  else return a->g;
  return NULL;
}

harp_status oxf_copy(ox_ctx *c, ox_val *y, const ox_val *x) {
  ut_tensor t = {0};
  if (x->has_t && ut_tensor_alloc(c->e, &t, x->t.dtype, x->t.rank, x->t.shape)) return c->e->code;
  if (x->has_t && x->t.nbytes) memcpy(t.data, x->t.data, x->t.nbytes);
  const char *name = y->name ? y->name : x->name; /* a holder takes the value's name */
  ut_tensor_free(&y->t);
  *y = *x;
  y->name = name, y->t = t;
  return HARP_OK;
}

harp_status oxf_def_alias(ox_ctx *c, int k, const ox_val *x) {
  if (k >= (int)c->node->n_output || !c->node->output[k][0]) return HARP_OK; /* an unused output */
  ox_val *y = ox_def_mark(c, k);
  return y ? oxf_copy(c, y, x) : c->e->code;
}

ox_val *oxf_graph_out(ox_ctx *s, const Onnx__GraphProto *gp, int k) {
  char nm[96];
  const char *name = gp->output[k]->name;
  ox_val *x = name && *name ? ox_find(s, name) : NULL;
  if (!x) {
    ox_printable(name, nm, sizeof nm);
    ox_fail(s, HARP_E_DANGLING, "graph output \"%s\" is not computed by any node", nm);
  }
  return x;
}

harp_status oxf_def_scalar(ox_ctx *s, const char *name, int oty, int64_t v) {
  ox_val *x = ox_new_val(s, name);
  if (!x) return s->e->code;
  x->has_i = true, x->oty = oty, x->irank = 0, x->in = 1;
  x->iv = ut_arena_alloc(s->A, sizeof *x->iv);
  if (!x->iv || !(x->iv[0] = fe_dim_int(s->A, v))) return ox_fail(s, HARP_E_NO_MEMORY, "out of memory");
  return HARP_OK;
}

harp_status oxf_host_block(ox_ctx *c, Onnx__GraphProto *gp, const char *label, const int *in, const int *oty, int nin) {
  ox_ctx s;
  harp_status st = oxf_scope_open(c, gp, false, label, &s);
  if (!st && (int)gp->n_input != nin)
    st = ox_fail(c, HARP_E_ARITY, "%s has %zu inputs; it must have %d", label, gp->n_input, nin);
  for (int k = 0; k < nin && !st; k++) {
    ox_val *x = ox_new_val(&s, gp->input[k]->name);
    if (!x) st = s.e->code;
    else x->slot = in[k] + 1, x->oty = oty[k];
  }
  if (!st) st = oxf_enter(&s, 0);
  if (!st) st = ox_scope_run(&s, gp);
  for (size_t k = 0; k < gp->n_output && !st; k++) {
    ox_val *x = oxf_graph_out(&s, gp, (int)k);
    int slot = x ? oxf_slot_of(&s, x) : -1;
    flow_block *b = slot < 0 ? NULL : &s.fl->f->blocks[s.fl->block];
    if (!b) st = s.e->code;
    else if (!flow_push(&b->out, &b->nout, slot)) st = ox_fail(&s, HARP_E_NO_MEMORY, "out of memory");
  }
  oxf_scope_close(c, &s);
  return st;
}

/* ---- If ---------------------------------------------------------------------------------- */
bool oxf_const_truth(ox_ctx *c, const ox_val *x, bool *truth, bool *bad) {
  int64_t n = x->has_t ? ut_tensor_numel(&x->t) : x->in, v;
  if (!x->has_t && !x->has_i) return false;
  if (n != 1) {
    ox_fail(c, HARP_E_INVALID_ARG, "the condition has %" PRId64 " elements (it must have one)", n);
    *bad = true;
    return false;
  }
  if (x->has_t) *truth = ut_tensor_get(&x->t, 0) != 0;
  else if (fe_dim_is_int(x->iv[0], &v)) *truth = v != 0;
  else return false;
  return true;
}

/* The branch the condition takes, imported in place. */
static harp_status if_inline(ox_ctx *c, Onnx__GraphProto *gb, const char *label) {
  ox_ctx s;
  harp_status st = oxf_scope_open(c, gb, true, label, &s);
  if (!st && gb->n_input) st = ox_fail(c, HARP_E_ARITY, "%s has %zu inputs (a branch has none)", label, gb->n_input);
  if (!st && gb->n_output != c->node->n_output)
    st = ox_fail(c, HARP_E_ARITY, "%s has %zu outputs; the If has %zu", label, gb->n_output, c->node->n_output);
  if (!st) st = ox_scope_run(&s, gb);
  for (size_t k = 0; k < gb->n_output && !st; k++) {
    ox_val *x = oxf_graph_out(&s, gb, (int)k);
    st = x ? oxf_def_alias(c, (int)k, x) : s.e->code;
  }
  oxf_scope_close(c, &s);
  return st;
}

/* Output k of a host If: a slot whose dims are the branches' where they
 * agree, known at run time where they do not. */
static int if_out_slot(ox_ctx *c, int k, int ts, int es, const char *const label[2]) {
  flow_program *f = c->fl->f;
  const flow_slot *a = &f->slots[ts], *b = &f->slots[es];
  if (a->dtype != b->dtype)
    return ox_fail(c, HARP_E_DTYPE_MISMATCH, "the branches disagree: output %d is %s in %s, %s in %s", k,
                   tiny_dtype_name(a->dtype), label[0], tiny_dtype_name(b->dtype), label[1]), -1;
  if (a->rank != b->rank)
    return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "the branches disagree: output %d has rank %d in %s, %d in %s", k, a->rank,
                   label[0], b->rank, label[1]), -1;
  fe_shape s = c->fl->shape[ts];
  const char *name = k < (int)c->node->n_output && c->node->output[k][0] ? c->node->output[k] : "if_out";
  for (int i = 0; i < s.rank; i++)
    if (fe_dim_cmp(s.d[i], c->fl->shape[es].d[i]) != FE_SAME && !(s.d[i] = oxf_fresh_dim(c, name, i))) return -1;
  return oxf_new_slot(c, name, a->dtype, &s);
}

/* Whether an import error can come of the shapes given rather than of a
 * malformed branch (a dangling name, a bad attribute, an unknown op, a
 * dtype clash are errors at import whichever branch runs). */
static bool shape_error(harp_status s) {
  return s == HARP_E_AXIS_SIZE_MISMATCH || s == HARP_E_BROADCAST_MISMATCH || s == HARP_E_INPUT_MISMATCH || s == HARP_E_LIMIT ||
         s == HARP_E_UNBOUND_SYMBOL || s == HARP_E_INVALID_PERMUTATION || s == HARP_E_UNSUPPORTED;
}

/* Branch b of host If step st as a block of its own.  A branch that does
 * not import for the shapes given (an 8 kHz path fed 16 kHz frames) becomes
 * one FAIL step holding the error, raised only if the host takes that
 * branch, as ONNX runs the branch taken alone; *failed says so.  Only
 * errors that can come of the shapes are deferred (shape_error). */
static harp_status if_branch(ox_ctx *c, int st, int b, Onnx__GraphProto *gb, const char *label, bool *failed) {
  ox_flowst *fl = c->fl;
  int blk = flow_add_block(fl->f), npins = fl->npins;
  if (blk < 0) return ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
  fl->f->steps[st].body[b] = fl->block = blk;
  harp_status s = oxf_host_block(c, gb, label, NULL, NULL, 0);
  *failed = shape_error(s);
  if (!*failed) return s;
  char msg[sizeof c->e->msg + 80];
  snprintf(msg, sizeof msg, "the If's %s, taken at run time, does not import for the shapes given: %s", label, c->e->msg);
  harp_error_clear(c->e);
  fl->npins = npins; /* what the failed import pinned */
  flow_block *bl = &fl->f->blocks[blk];
  bl->nsteps = bl->nout = 0; /* its partial segments are never run nor checked */
  int k = oxf_add_step(c, FLOW_FAIL, msg);
  if (k < 0) return c->e->code;
  fl->f->steps[k].code = s;
  return HARP_OK;
}

harp_status oxf_if_host(ox_ctx *c, ox_val *cond, Onnx__GraphProto *g[2], const char *const label[2]) {
  char where[200];
  oxf_node_where(c, where, sizeof where);
  if (oxf_ensure(c, "the condition is known only at run time") || oxf_export(c, (size_t)c->node_index)) return c->e->code;
  int cs = oxf_host_in(c, cond), st = cs < 0 ? -1 : oxf_add_step(c, FLOW_IF, where);
  if (st < 0) return c->e->code;
  ox_flowst *fl = c->fl;
  int outer = fl->block;
  if (!flow_push(&fl->f->steps[st].in, &fl->f->steps[st].nin, cs)) return ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
  bool failed[2] = {false, false};
  for (int b = 0; b < 2; b++) {
    if (g[b]->n_input) return ox_fail(c, HARP_E_ARITY, "%s has %zu inputs (a branch has none)", label[b], g[b]->n_input);
    harp_status s = if_branch(c, st, b, g[b], label[b], &failed[b]);
    fl->block = outer;
    if (s) return s;
  }
  if (failed[0] && failed[1]) /* neither can run: the then branch's error now */
    return ox_fail(c, fl->f->steps[fl->f->blocks[fl->f->steps[st].body[0]].steps[0]].code, "neither branch imports: %s",
                   fl->f->steps[fl->f->blocks[fl->f->steps[st].body[0]].steps[0]].where);
  /* a branch that failed takes the other's outputs' shapes (it never gives any) */
  const flow_block *tb = &fl->f->blocks[fl->f->steps[st].body[failed[0]]],
                      *eb = &fl->f->blocks[fl->f->steps[st].body[!failed[1]]];
  if (tb->nout != eb->nout || tb->nout != (int)c->node->n_output)
    return ox_fail(c, HARP_E_ARITY, "the branches disagree: %s has %d outputs, %s %d, the node %zu", label[0], tb->nout, label[1],
                   eb->nout, c->node->n_output);
  for (int k = 0; k < tb->nout; k++) {
    int s = if_out_slot(c, k, tb->out[k], eb->out[k], label);
    if (s < 0) return c->e->code;
    if (!flow_push(&fl->f->steps[st].out, &fl->f->steps[st].nout, s)) return ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
    if (!c->node->output[k][0]) continue;
    ox_val *y = ox_def_mark(c, k);
    if (!y) return c->e->code;
    y->slot = s + 1;
  }
  return oxf_enter(c, (size_t)c->node_index + 1);
}

static harp_status op_if(ox_ctx *c) {
  bool failed = false, truth = false;
  ox_val *cond = ox_in(c, 0, &failed);
  if (failed) return c->e->code;
  if (!cond) return ox_fail(c, HARP_E_ARITY, "input 0 (cond) is required");
  Onnx__GraphProto *g[2] = {oxf_graph_attr(c, "then_branch"), NULL};
  if (g[0]) g[1] = oxf_graph_attr(c, "else_branch");
  if (!g[1] || oxf_prepare(c)) return c->e->code;
  if (oxf_const_truth(c, cond, &truth, &failed)) return if_inline(c, truth ? g[0] : g[1], truth ? "then_branch" : "else_branch");
  if (failed) return c->e->code;
  static const char *const label[2] = {"then_branch", "else_branch"};
  return oxf_if_host(c, cond, g, label);
}

ox_op_fn ox_find_flow(const char *op) {
  if (!strcmp(op, "If")) return op_if;
  if (!strcmp(op, "Loop")) return oxf_op_loop;
  if (!strcmp(op, "Scan")) return oxf_op_scan;
  return NULL;
}

/* ---- the end ------------------------------------------------------------------------------ */
harp_status ox_flow_outputs(ox_ctx *c, const Onnx__GraphProto *gp, const char *const *outid) {
  flow_program *f = c->fl->f;
  for (size_t i = 0; i < gp->n_output; i++) {
    ox_val *x = oxf_graph_out(c, gp, (int)i);
    int s = x ? oxf_slot_of(c, x) : -1;
    flow_block *mb = &f->blocks[f->main];
    if (s < 0) return c->e->code;
    for (int d = 0; d < f->slots[s].rank; d++) { /* a dim that is a shape variable: known once the inputs bind it */
      const char *sym = fe_dim_is_sym(c->fl->shape[s].d[d]);
      if (sym && !f->slots[s].sym[d] && !(f->slots[s].sym[d] = strdup(sym))) return ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
    }
    if (!flow_push(&mb->out, &mb->nout, s) || !flow_push_str(&mb->out_name, mb->nout - 1, outid[i]))
      return ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
  }
  return HARP_OK;
}

/* Drops the steps of segments that write nothing (a branch that only
 * forwards values); their programs stay until the end (the first one's
 * arena holds dims the others point to). */
static void drop_empty(flow_program *f) {
  for (int b = 0; b < f->nblocks; b++) {
    flow_block *bl = &f->blocks[b];
    int n = 0;
    for (int i = 0; i < bl->nsteps; i++) {
      const flow_step *st = &f->steps[bl->steps[i]];
      if (st->kind != FLOW_SEG || f->segs[st->seg].nout) bl->steps[n++] = bl->steps[i];
    }
    bl->nsteps = n;
  }
}

static void put_wanted(void *ctx, const char *name) { ut_strmap_put(ctx, name, 1); }

void oxf_wanted(ox_ctx *c, const ox_val *x) {
  if (!oxf_prepare(c)) ox_needs_data_cb(c, x, put_wanted, &c->fl->wanted);
}

harp_status ox_flow_finish(ox_ctx *c, harp_status st, onnx_model *out) {
  ox_flowst *fl = c->fl;
  for (int i = 0; st && fl && c->opts && c->opts->needs_data && i < fl->wanted.cap; i++) /* the import failed: fixed, they may help */
    if (fl->wanted.keys[i]) c->opts->needs_data(c->opts->needs_ctx, fl->wanted.keys[i]);
  c->fl = NULL;
  if (!fl || !fl->f || st) {
    state_free(fl);
    return st;
  }
  flow_program *f = fl->f;
  fl->f = NULL;
  state_free(fl);
  f->segs[0].program = out->program; /* the graph the import began */
  out->program = NULL;
  out->flow = f;
  drop_empty(f);
  for (int b = 0; b < f->nblocks && !st; b++)
    for (int i = 0; i < f->blocks[b].nsteps && !st; i++) {
      const flow_step *sp = &f->steps[f->blocks[b].steps[i]];
      if (sp->kind == FLOW_SEG) st = hg_program_check(c->e, f->segs[sp->seg].program);
    }
  return st;
}
