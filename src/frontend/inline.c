/* inline.c — whole-program checks and the expansion of subgraph calls.
 * Needs: the builder.  Gives: hg_program_check (main exists, outputs
 * returned, call depth within HG_MAX_CALL_DEPTH) and fe_flatten (a
 * program whose main has every call reachable from its outputs replaced
 * by the callee's ops, re-built through the builder so that every type
 * rule is checked again with the call's shapes).
 *
 * Only what the outputs need is visited: a call whose results are unused
 * is never expanded, so a recursive call is legal as long as it is dead
 * or stays within the depth limit (without conditionals, a live
 * recursion always reaches the limit). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fe_int.h"

/* Mark the nodes the outputs in `mask` need (bit k: output k; bit 63 stands
 * for every output from 63 on). */
static bool wanted(int k, uint64_t mask) { return (mask >> (k < 63 ? k : 63)) & 1; }

static char *liveness(const hg_graph *g, uint64_t mask) {
  char *live = ut_xcalloc((size_t)g->n + 1, 1);
  if (!live) return NULL;
  for (int k = 0; k < g->nout; k++)
    if (wanted(k, mask) && g->outs[k].v > 0) live[g->outs[k].v - 1] = 1;
  for (int i = g->n - 1; i >= 0; i--) {
    if (!live[i]) continue;
    const fe_node *n = &g->nodes[i];
    for (int j = 0; j < n->nin; j++)
      if (n->in[j] > 0) live[n->in[j] - 1] = 1;
  }
  return live;
}

/* Outputs of call node c (index ci) that live PROJ nodes use. */
static uint64_t call_mask(const hg_graph *g, const char *live, int ci) {
  uint64_t m = 0;
  for (int i = ci + 1; i < g->n; i++) {
    const fe_node *n = &g->nodes[i];
    if (live[i] && n->op == HG_OP_PROJ && n->in[0] == ci + 1) m |= (uint64_t)1 << (n->a.proj.k < 63 ? n->a.proj.k : 63);
  }
  return m;
}

/* ---- the depth check ------------------------------------------------------------ */
typedef struct memo {
  const hg_graph *g;
  uint64_t mask;
  int height; /* calls nested below; -1 while being computed */
} memo;

typedef struct checker {
  harp_error *e;
  const hg_program *p;
  memo *m;
  int nm, cap;
  const char *trail[HG_MAX_CALL_DEPTH + 2];
} checker;

static memo *find_memo(checker *C, const hg_graph *g, uint64_t mask) {
  for (int i = 0; i < C->nm; i++)
    if (C->m[i].g == g && C->m[i].mask == mask) return &C->m[i];
  return NULL;
}

static harp_status walk(checker *C, const hg_graph *g, uint64_t mask, int depth, int *height) {
  memo *me = find_memo(C, g, mask);
  if (me && me->height >= 0 && depth + me->height <= HG_MAX_CALL_DEPTH) {
    *height = me->height;
    return HARP_OK;
  }
  if (!me) {
    if (C->nm == C->cap) {
      int cap = C->cap ? C->cap * 2 : 16;
      memo *nm = ut_xrealloc(C->m, sizeof *nm * (size_t)cap);
      if (!nm) return ut_fail(C->e, HARP_E_NO_MEMORY, NULL, "out of memory");
      C->m = nm;
      C->cap = cap;
    }
    me = &C->m[C->nm++];
    *me = (memo){g, mask, -1};
  }
  int my = (int)(me - C->m);
  C->trail[depth] = g->name;
  char *live = liveness(g, mask);
  if (!live) return ut_fail(C->e, HARP_E_NO_MEMORY, NULL, "out of memory");
  int h = 0;
  harp_status s = HARP_OK;
  for (int i = 0; i < g->n && !s; i++) {
    const fe_node *n = &g->nodes[i];
    if (!live[i] || n->op != HG_OP_CALL) continue;
    const hg_graph *callee = n->a.call.callee;
    if (depth + 1 > HG_MAX_CALL_DEPTH) {
      char path[512];
      int k = 0;
      for (int d = 0; d <= depth && k < (int)sizeof path; d++)
        k += snprintf(path + k, sizeof path - (size_t)k, "%s -> ", C->trail[d]);
      if (k < (int)sizeof path) snprintf(path + k, sizeof path - (size_t)k, "%s", callee->name);
      bool recursive = false;
      for (int d = 0; d <= depth; d++) recursive |= strcmp(C->trail[d], callee->name) == 0;
      s = fe_fail_node(C->e, C->p, n, HARP_E_LIMIT, "calls nest deeper than the limit of %d (%s)%s", HG_MAX_CALL_DEPTH, path,
                       recursive ? ": a recursion that never ends" : "");
      break;
    }
    int ch = 0;
    s = walk(C, callee, call_mask(g, live, i), depth + 1, &ch);
    if (!s && ch + 1 > h) h = ch + 1;
  }
  free(live);
  if (s) return s;
  C->m[my].height = h;
  *height = h;
  return HARP_OK;
}

harp_status hg_program_check(harp_error *e, const hg_program *p) {
  const hg_graph *main = hg_program_find(p, "main");
  if (!main) return ut_fail(e, HARP_E_INVALID_ARG, NULL, "the program has no graph named main (the entry point)");
  for (int i = 0; i < p->n; i++) {
    const hg_graph *g = p->graphs[i];
    if (g->err.code) return ut_fail(e, g->err.code, NULL, "graph %s: %s", g->name, g->err.msg);
    for (int k = 0; k < g->nout; k++)
      if (g->outs[k].v <= 0)
        return ut_fail(e, HARP_E_INVALID_ARG, g->outs[k].name, "graph %s does not return its output %s", g->name,
                       g->outs[k].name);
  }
  if (main->nout < 1) return ut_fail(e, HARP_E_INVALID_ARG, NULL, "main declares no outputs");
  checker C = {e, p, NULL, 0, 0, {0}};
  int h;
  harp_status s = walk(&C, main, ~(uint64_t)0, 0, &h);
  free(C.m);
  return s;
}

/* ---- expansion ------------------------------------------------------------------------ */
typedef struct flat {
  harp_error *e;
  const hg_program *src;
  hg_graph *out; /* the flat main */
  ut_arena *A;   /* out's arena */
} flat;

typedef struct subst {
  const hg_graph *g;
  const fe_dim *const *bind; /* NULL: identity (main) */
} subst;

static const fe_dim *look(void *ctx, const char *name) {
  subst *s = ctx;
  int k = fe_shape_var_index(s->g, name);
  return s->bind && k >= 0 ? s->bind[k] : NULL;
}

static const fe_dim *sub(flat *F, subst *S, const fe_dim *d) {
  if (!d) return NULL;
  if (!S->bind) return d;
  return fe_dim_subst(F->A, d, look, S);
}

static harp_status replay_error(flat *F, const fe_node *n) {
  hg_graph *o = F->out;
  harp_status code = o->err.code ? o->err.code : HARP_E_NO_MEMORY;
  return fe_fail_node(F->e, F->src, n, code, "%s", o->err.code ? o->err.msg : "out of memory");
}

static harp_status expand(flat *F, const hg_graph *g, const hg_val *argv, const fe_dim *const *bind, uint64_t mask,
                        const char *prefix, int depth, hg_val *outv);

/* Re-create node n of g in the flat graph with operands `in` (flat values). */
static hg_val replay(flat *F, subst *S, const fe_node *n, const hg_val *in) {
  hg_graph *o = F->out;
  switch (n->op) {
  case HG_OP_CONST: return n->weak ? hg_const(o, n->a.cnst.v) : hg_const_typed(o, n->a.cnst.v, n->dtype);
  case HG_OP_WHERE: return hg_where(o, in[0], in[1], in[2]);
  case HG_OP_MULADD: return hg_muladd(o, in[0], in[1], in[2]);
  case HG_OP_SUM:
  case HG_OP_RMAX:
  case HG_OP_RMIN:
  case HG_OP_MEAN: return hg_reduce(o, n->op, in[0], n->a.reduce.axes, n->a.reduce.n, n->a.reduce.keepdim);
  case HG_OP_MATMUL: return hg_matmul(o, in[0], in[1]);
  case HG_OP_CONV2D: {
    hg_conv2d_opts c = {n->nin > 2 ? in[2] : HG_NONE, {0}, {0}, {0}, n->a.conv.groups};
    memcpy(c.stride, n->a.conv.stride, sizeof c.stride);
    memcpy(c.pad, n->a.conv.pad, sizeof c.pad);
    memcpy(c.dilation, n->a.conv.dilation, sizeof c.dilation);
    return hg_conv2d(o, in[0], in[1], &c);
  }
  case HG_OP_ATTENTION: {
    hg_attention_opts a = {n->a.attn.heads, n->a.attn.causal, n->nin > 3 ? in[3] : HG_NONE, n->a.attn.scale};
    return hg_attention(o, in[0], in[1], in[2], &a);
  }
  case HG_OP_LAYERNORM: return hg_layernorm(o, in[0], in[1], in[2], n->a.ln.axis, n->a.ln.eps);
  case HG_OP_SOFTMAX: return hg_softmax(o, in[0], n->a.axis.axis);
  case HG_OP_MAX_POOL2D:
  case HG_OP_AVG_POOL2D: {
    hg_pool2d_opts p;
    memcpy(p.kernel, n->a.pool.kernel, sizeof p.kernel);
    memcpy(p.stride, n->a.pool.stride, sizeof p.stride);
    return n->op == HG_OP_MAX_POOL2D ? hg_max_pool2d(o, in[0], &p) : hg_avg_pool2d(o, in[0], &p);
  }
  case HG_OP_RESHAPE:
  case HG_OP_EXPAND: {
    fe_shape s = n->a.shape.to;
    for (int i = 0; i < s.rank; i++)
      if (!(s.d[i] = sub(F, S, s.d[i]))) return fe_failv(o, HARP_E_LIMIT, "dimension expression too large");
    return n->op == HG_OP_RESHAPE ? fe_reshape(o, in[0], &s) : fe_expand(o, in[0], &s);
  }
  case HG_OP_PERMUTE: return hg_permute(o, in[0], n->a.perm.v, n->a.perm.n);
  case HG_OP_FLIP: return hg_flip(o, in[0], n->a.perm.v, n->a.perm.n);
  case HG_OP_PAD: return hg_pad(o, in[0], n->a.pad.lo, n->a.pad.hi, n->a.pad.n, n->a.pad.value);
  case HG_OP_SLICE: {
    const fe_dim *st[TINY_MAX_RANK], *en[TINY_MAX_RANK];
    for (int i = 0; i < n->a.slice.n; i++)
      if (!(st[i] = sub(F, S, n->a.slice.start[i])) || !(en[i] = sub(F, S, n->a.slice.end[i])))
        return fe_failv(o, HARP_E_LIMIT, "dimension expression too large");
    return fe_slice(o, in[0], st, en, n->a.slice.step);
  }
  case HG_OP_CONCAT: return hg_concat(o, in, n->nin, n->a.axis.axis);
  case HG_OP_CAST: return hg_cast(o, in[0], n->a.cast.to);
  case HG_OP_GATHER: return hg_gather(o, in[0], in[1], n->a.axis.axis);
  default: break;
  }
  switch (hg_op_class_of(n->op)) {
  case HG_C_UNARY: return hg_unary(o, n->op, in[0]);
  case HG_C_BINARY:
  case HG_C_COMPARE: return hg_binary(o, n->op, in[0], in[1]);
  default: return fe_failv(o, HARP_E_INTERNAL, "cannot expand op %s", hg_op_name(n->op));
  }
}

static void set_name(flat *F, hg_val v, int before, const char *prefix, const char *name) {
  fe_node *n = fe_node_of(F->out, v);
  if (!n || v <= before || n->name || !name) return;
  n->name = *prefix ? ut_arena_printf(F->A, "%s%s", prefix, name) : ut_arena_strdup(F->A, name);
}

static harp_status expand_call(flat *F, subst *S, const hg_graph *g, const char *live, int ci, const hg_val *map,
                             const char *prefix, int depth, hg_val *results) {
  const fe_node *c = &g->nodes[ci];
  const hg_graph *callee = c->a.call.callee;
  if (depth + 1 > HG_MAX_CALL_DEPTH)
    return fe_fail_node(F->e, F->src, c, HARP_E_LIMIT, "calls nest deeper than the limit of %d", HG_MAX_CALL_DEPTH);
  /* The callee's shape variables in main's terms. */
  const fe_dim **bind = ut_arena_alloc(F->A, sizeof *bind * (size_t)(callee->nsv + 1));
  hg_val *argv = ut_xmalloc(sizeof *argv * (size_t)(c->nin + 1));
  if (!bind || !argv) {
    free(argv);
    return ut_fail(F->e, HARP_E_NO_MEMORY, NULL, "out of memory");
  }
  for (int k = 0; k < callee->nsv; k++) {
    const fe_dim *d = c->a.call.bind[k];
    if (!d && callee->sv[k].dflt >= 0) d = fe_dim_int(F->A, callee->sv[k].dflt); /* declared after the call */
    if (!d || !(bind[k] = sub(F, S, d))) {
      free(argv);
      return fe_fail_node(F->e, F->src, c, HARP_E_UNBOUND_SYMBOL, "%s: shape variable %s is not bound", callee->name,
                          callee->sv[k].name);
    }
  }
  for (int j = 0; j < c->nin; j++) argv[j] = map[c->in[j] - 1];
  /* name the callee's values after the first variable the call is bound to */
  const char *base = callee->name;
  for (int i = ci + 1; i < g->n; i++)
    if (g->nodes[i].op == HG_OP_PROJ && g->nodes[i].in[0] == ci + 1 && g->nodes[i].name) {
      base = g->nodes[i].name;
      break;
    }
  char pre[256];
  snprintf(pre, sizeof pre, "%s%s/", prefix, base);
  harp_status s = expand(F, callee, argv, bind, call_mask(g, live, ci), pre, depth + 1, results);
  free(argv);
  return s;
}

static harp_status expand(flat *F, const hg_graph *g, const hg_val *argv, const fe_dim *const *bind, uint64_t mask,
                        const char *prefix, int depth, hg_val *outv) {
  subst S = {g, bind};
  char *live = liveness(g, mask);
  hg_val *map = ut_xcalloc((size_t)g->n + 1, sizeof *map);
  hg_val *res = NULL; /* the current call's results */
  harp_status s = HARP_OK;
  if (!live || !map) {
    s = ut_fail(F->e, HARP_E_NO_MEMORY, NULL, "out of memory");
    goto done;
  }
  for (int i = 0; i < g->nparams; i++) map[g->params[i] - 1] = argv[i];
  for (int i = 0; i < g->n && !s; i++) {
    const fe_node *n = &g->nodes[i];
    if (!live[i] || n->op == HG_OP_INPUT) continue;
    F->out->line = n->line;
    F->out->col = n->col;
    if (n->op == HG_OP_CALL) {
      free(res);
      res = ut_xcalloc((size_t)n->a.call.nout + 1, sizeof *res);
      if (!res) s = ut_fail(F->e, HARP_E_NO_MEMORY, NULL, "out of memory");
      else s = expand_call(F, &S, g, live, i, map, prefix, depth, res);
      continue;
    }
    if (n->op == HG_OP_PROJ) {
      map[i] = res ? res[n->a.proj.k] : -1;
      if (map[i] <= 0) s = fe_fail_node(F->e, F->src, n, HARP_E_INTERNAL, "call result %d is missing", n->a.proj.k);
      continue;
    }
    hg_val in[64];
    int nin = n->nin < 64 ? n->nin : 64;
    for (int j = 0; j < nin; j++) in[j] = n->in[j] > 0 ? map[n->in[j] - 1] : HG_NONE;
    hg_val *inp = in;
    hg_val *big = NULL;
    if (n->nin > 64) { /* a long concat */
      big = ut_xmalloc(sizeof *big * (size_t)n->nin);
      if (!big) {
        s = ut_fail(F->e, HARP_E_NO_MEMORY, NULL, "out of memory");
        break;
      }
      for (int j = 0; j < n->nin; j++) big[j] = map[n->in[j] - 1];
      inp = big;
    }
    int before = F->out->n;
    hg_val v = replay(F, &S, n, inp);
    free(big);
    if (v <= 0 || F->out->err.code) {
      s = replay_error(F, n);
      break;
    }
    map[i] = v;
    set_name(F, v, before, prefix, n->name);
  }
  for (int k = 0; k < g->nout && !s; k++)
    if (wanted(k, mask)) outv[k] = map[g->outs[k].v - 1];
done:
  free(res);
  free(live);
  free(map);
  return s;
}

harp_status fe_flatten(harp_error *e, const hg_program *p, hg_program **flat_out) {
  *flat_out = NULL;
  if (hg_program_check(e, p)) return e->code;
  const hg_graph *main = hg_program_find(p, "main");
  hg_program *fp = hg_program_new();
  hg_graph *o = fp ? hg_program_add_graph(fp, "main") : NULL;
  hg_val *argv = ut_xcalloc((size_t)main->nparams + 1, sizeof *argv);
  hg_val *outv = ut_xcalloc((size_t)main->nout + 1, sizeof *outv);
  if (!o || !argv || !outv) {
    free(argv);
    free(outv);
    hg_program_free(fp);
    return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  }
  fp->filename = p->filename;
  fp->src = p->src;
  flat F = {e, p, o, fp->arena};
  harp_status s = HARP_OK;
  for (int i = 0; i < main->nsv && !s; i++)
    if (hg_shape_var(o, main->sv[i].name, main->sv[i].dflt)) s = replay_error(&F, NULL);
  for (int i = 0; i < main->nparams && !s; i++) {
    const fe_node *n = fe_node_of(main, main->params[i]);
    o->line = n->line, o->col = n->col;
    if ((argv[i] = fe_input(o, n->name, n->dtype, &n->shape)) <= 0) s = replay_error(&F, n);
  }
  if (!s) s = expand(&F, main, argv, NULL, ~(uint64_t)0, "", 0, outv);
  for (int k = 0; k < main->nout && !s; k++) {
    const fe_output *d = &main->outs[k];
    o->line = d->line, o->col = d->col;
    if (fe_declare_output(o, d->name, d->dtype, &d->shape) || fe_set_output(o, k, outv[k]) <= 0)
      s = ut_fail(e, o->err.code ? o->err.code : HARP_E_INTERNAL, d->name, "%s", o->err.msg);
  }
  free(argv);
  free(outv);
  if (s) {
    hg_program_free(fp);
    return s;
  }
  *flat_out = fp;
  return HARP_OK;
}
