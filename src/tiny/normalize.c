/* normalize.c — make the implicit explicit (design.md §2.2–2.4).
 * Needs: tiny_infer done on g.  Gives: a graph where
 *   - every elementwise op's operands have the op's exact shape: implicit
 *     broadcasting became RESHAPE (+ EXPAND), right-aligned or by name;
 *   - scalar immediates became CONST + RESHAPE + EXPAND, one for each
 *     value, dtype and shape (a graph of many alike ops, such as an
 *     unrolled RNN, reads each constant's views over and over);
 *   - fp16/bf16 operands meeting fp32 got an explicit widening CAST (the one
 *     implicit conversion harp allows, needed by seed 001's conv bias add);
 *   - EXPAND has equal input and output rank;
 *   - POOL became the equivalent VIEW (once its sizes are known).
 * Re-runs tiny_infer at the end. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tiny_int.h"
#include "util/util.h"

typedef struct nctx {
  harp_error *e;
  tiny_graph *g;  /* old graph (read) */
  tiny_graph *ng; /* new graph (written), shares g's arena */
  int *remap;     /* old index -> new index */
  bool allow_unknown;
  bool changed;
  bool sym_broadcasts; /* tiny_symtab.sym_broadcasts */
  ut_strmap imm;  /* an immediate broadcast to a shape (value, dtype, shape) -> its new node: one CONST + views per kind */
} nctx;

/* A dim as it should appear in an arg: its symbol if it has one, else its size. */
static bool arg_dim(const tiny_dim *d, tiny_dim *out) {
  if (d->sym) { /* its value kept beside: a name the symbols do not bind (a ShapeSet's window count) reads it */
    *out = (tiny_dim){d->n, d->sym};
    return true;
  }
  if (d->n >= 0) {
    *out = tiny_dim_int(d->n);
    return true;
  }
  return false;
}

static bool arg_shape(const tiny_shape *s, tiny_shape *out) {
  out->rank = s->rank;
  for (int i = 0; i < s->rank; i++)
    if (!arg_dim(&s->d[i], &out->d[i])) return false;
  return true;
}

static int add(nctx *c, const char *base, const char *suffix, tiny_op op, int src, const void *arg) {
  tiny_src s = {src, 0};
  const char *id = tiny_fresh_id(c->ng, c->g, base, suffix);
  if (!id) {
    ut_fail(c->e, HARP_E_NO_MEMORY, base, "out of memory");
    return -1;
  }
  int k = tiny_add(c->ng, id, op, &s, src >= 0 ? 1 : 0, arg);
  if (k < 0) ut_fail(c->e, c->ng->err.code, c->ng->err.node, "%s", c->ng->err.msg);
  c->changed = true;
  return k;
}

/* Bring one operand (new-graph index, or immediate) to shape `out` via the
 * axis map from broadcasting.  Returns the new-graph index, -1 on error, -2
 * if it cannot be expressed yet (unknown sizes). */
static int fit_operand(nctx *c, const tiny_node *n, int k, const tiny_shape *in, const int *map,
                       const tiny_shape *out, tiny_dtype in_dt, tiny_dtype want_dt) {
  char suffix[32];
  int cur;
  const char *key = NULL;
  if (n->src[k].node < 0) { /* the same immediate at the same shape before: its nodes */
    ut_str ks;
    ut_str_init(&ks);
    ut_str_printf(&ks, "%a/%d/", n->src[k].imm, (int)want_dt);
    for (int a = 0; a < out->rank; a++) {
      if (out->d[a].sym) ut_str_printf(&ks, "%s,", out->d[a].sym);
      else ut_str_printf(&ks, "%" PRId64 ",", out->d[a].n);
    }
    key = ks.oom ? NULL : ut_arena_strdup(c->g->arena, ks.buf);
    ut_str_free(&ks);
    if (!key) return ut_fail(c->e, HARP_E_NO_MEMORY, n->id, "out of memory"), -1;
    int *hit = ut_strmap_find(&c->imm, key);
    if (hit) return *hit;
  }
  if (n->src[k].node < 0) {
    tiny_arg_const a = {n->src[k].imm, want_dt};
    snprintf(suffix, sizeof suffix, "imm%d", k);
    cur = add(c, n->id, suffix, TINY_CONST, -1, &a);
    if (cur < 0) return -1;
    in_dt = want_dt;
  } else {
    cur = c->remap[n->src[k].node];
  }
  if (in_dt != want_dt) { /* fp16/bf16 -> fp32 widening, validated by infer */
    tiny_arg_cast a = {want_dt};
    snprintf(suffix, sizeof suffix, "widen%d", k);
    if ((cur = add(c, n->id, suffix, TINY_CAST, cur, &a)) < 0) return -1;
  }
  int R = out->rank;
  bool identity = in->rank == R;
  for (int a = 0; a < in->rank && identity; a++) identity = map[a] == a;
  tiny_shape mid = {0};
  if (!identity) {
    mid.rank = R;
    for (int a = 0; a < R; a++) mid.d[a] = tiny_dim_int(1);
    for (int a = 0; a < in->rank; a++)
      if (map[a] >= 0 && !arg_dim(&in->d[a], &mid.d[map[a]])) return -2;
    tiny_arg_reshape ra = {mid};
    snprintf(suffix, sizeof suffix, "bc%d.reshape", k);
    if ((cur = add(c, n->id, suffix, TINY_RESHAPE, cur, &ra)) < 0) return -1;
  } else {
    for (int a = 0; a < R; a++)
      if (!arg_dim(&in->d[a], &mid.d[a])) return -2;
    mid.rank = R;
  }
  bool needs_expand = false;
  for (int a = 0; a < R; a++) {
    const tiny_dim *m = &mid.d[a];
    needs_expand |= (!m->sym && m->n == 1) && !(out->d[a].n == 1 && !(c->sym_broadcasts && out->d[a].sym));
  }
  if (needs_expand) {
    tiny_arg_expand ea = {0};
    if (!arg_shape(out, &ea.shape)) return -2;
    snprintf(suffix, sizeof suffix, "bc%d.expand", k);
    if ((cur = add(c, n->id, suffix, TINY_EXPAND, cur, &ea)) < 0) return -1;
  }
  if (key && !ut_strmap_put(&c->imm, key, cur)) return ut_fail(c->e, HARP_E_NO_MEMORY, n->id, "out of memory"), -1;
  return cur;
}

/* Append n (possibly a modified copy of old node `old`) to the new graph. */
static harp_status copy_node(nctx *c, int old, const tiny_node *n, const tiny_src *src) {
  int k = tiny_add(c->ng, n->id, n->op, src, n->nsrc, tiny_op_argkind(n->op) == TA_NONE ? NULL : &n->a);
  if (k < 0) return ut_fail(c->e, c->ng->err.code, c->ng->err.node, "%s", c->ng->err.msg);
  c->ng->nodes[k].tag = n->tag;
  c->remap[old] = k;
  return HARP_OK;
}

static harp_status norm_elementwise(nctx *c, const tiny_node *n, tiny_src *src) {
  const tiny_shape *shapes[TINY_MAX_SRC];
  static const tiny_shape scalar;
  tiny_dtype dts[TINY_MAX_SRC];
  for (int k = 0; k < n->nsrc; k++) {
    const tiny_node *s = n->src[k].node >= 0 ? &c->g->nodes[n->src[k].node] : NULL;
    shapes[k] = s ? &s->shape : &scalar;
    dts[k] = s ? s->dtype : TINY_FP32;
  }
  tiny_bcast b;
  if (tiny_broadcast(c->e, n->id, shapes, n->nsrc, &b)) return c->e->code;
  /* The value operands' common dtype (what infer settled on). */
  int first = n->op == TINY_WHERE ? 1 : 0;
  tiny_dtype common = n->op == TINY_WHERE || tiny_op_is_compare(n->op) ? TINY_FP32 : n->dtype;
  if (n->op == TINY_WHERE || tiny_op_is_compare(n->op)) {
    bool have = false;
    for (int k = first; k < n->nsrc; k++) {
      if (n->src[k].node < 0) continue;
      if (!have || dts[k] == TINY_FP32) common = dts[k];
      have = true;
    }
  }
  for (int k = 0; k < n->nsrc; k++) {
    tiny_dtype want = (n->op == TINY_WHERE && k == 0) ? TINY_BOOL : common;
    bool same_shape = tiny_shape_equal(shapes[k], &b.out) && n->src[k].node >= 0;
    for (int a = 0; same_shape && c->sym_broadcasts && a < b.out.rank; a++) /* a 1 broadcast to a symbol at 1 */
      same_shape = !(b.out.d[a].sym && !shapes[k]->d[a].sym);
    bool same_dt = n->src[k].node < 0 || dts[k] == want;
    if (same_shape && same_dt) continue;
    int r = fit_operand(c, n, k, shapes[k], b.map[k], &b.out, n->src[k].node >= 0 ? dts[k] : want, want);
    if (r == -1) return c->e->code;
    if (r == -2) {
      if (c->allow_unknown) continue; /* left implicit until symbols are bound */
      return ut_fail(c->e, HARP_E_UNBOUND_SYMBOL, n->id, "operand %d's shape depends on an unbound symbol", k);
    }
    src[k].node = r;
  }
  return HARP_OK;
}

/* EXPAND from a lower rank (or with XLA-style broadcast_dimensions) becomes
 * RESHAPE to equal rank + EXPAND. */
static harp_status norm_expand(nctx *c, const tiny_node *n, tiny_src *src, tiny_arg_expand *arg) {
  const tiny_node *x = &c->g->nodes[n->src[0].node];
  int r = x->shape.rank, R = n->shape.rank;
  if (r == R) {
    arg->has_bd = false; /* checked by infer; the plain form says the same */
    arg->nbd = 0;
    return HARP_OK;
  }
  tiny_shape mid = {0};
  mid.rank = R;
  for (int a = 0; a < R; a++) mid.d[a] = tiny_dim_int(1);
  for (int a = 0; a < r; a++) {
    int to = arg->has_bd ? arg->bd[a] : a + R - r;
    if (!arg_dim(&x->shape.d[a], &mid.d[to])) {
      if (c->allow_unknown) return HARP_OK;
      return ut_fail(c->e, HARP_E_UNBOUND_SYMBOL, n->id, "input shape depends on an unbound symbol");
    }
  }
  tiny_arg_reshape ra = {mid};
  int k = add(c, n->id, "rank.reshape", TINY_RESHAPE, src[0].node, &ra);
  if (k < 0) return c->e->code;
  src[0].node = k;
  arg->has_bd = false;
  arg->nbd = 0;
  return HARP_OK;
}

/* POOL(kernel K, stride S, dilation D) over the last n axes:
 *   out[..., o_1..o_n, k_1..k_n] = in[..., S_m*o_m + D_m*k_m ...] */
static harp_status norm_pool(nctx *c, const tiny_node *n, tiny_arg_view *view) {
  const tiny_arg_pool *p = &n->a.pool;
  const tiny_node *x = &c->g->nodes[n->src[0].node];
  int r = x->shape.rank, lead = r - p->n;
  if (!tiny_shape_known(&n->shape)) return HARP_E_UNSUPPORTED; /* keep POOL */
  memset(view, 0, sizeof *view);
  if (!arg_shape(&n->shape, &view->shape)) return HARP_E_UNSUPPORTED;
  view->n = r;
  tiny_graph *g = c->ng;
  for (int j = 0; j < r; j++) {
    if (j < lead) {
      view->map[j] = tiny_x_var(g, j);
      continue;
    }
    int m = j - lead;
    const tiny_expr *s = p->stride[m].sym ? tiny_x_sym(g, p->stride[m].sym) : tiny_x_const(g, p->stride[m].n);
    const tiny_expr *d = p->dilation[m].sym ? tiny_x_sym(g, p->dilation[m].sym) : tiny_x_const(g, p->dilation[m].n);
    view->map[j] = tiny_x_bin(g, TX_ADD, tiny_x_bin(g, TX_MUL, s, tiny_x_var(g, lead + m)),
                              tiny_x_bin(g, TX_MUL, d, tiny_x_var(g, r + m)));
    if (!view->map[j]) return ut_fail(c->e, HARP_E_NO_MEMORY, n->id, "out of memory");
  }
  return HARP_OK;
}

static harp_status normalize_once(nctx *c) {
  tiny_graph *g = c->g;
  for (int i = 0; i < g->n; i++) {
    const tiny_node *n = &g->nodes[i];
    tiny_src src[TINY_MAX_SRC];
    for (int k = 0; k < n->nsrc; k++) {
      src[k] = n->src[k];
      if (src[k].node >= 0) src[k].node = c->remap[src[k].node];
    }
    tiny_class cls = tiny_op_class(n->op);
    if (cls == TC_BINARY || cls == TC_TERNARY) {
      if (norm_elementwise(c, n, src)) return c->e->code;
    } else if (n->op == TINY_EXPAND) {
      tiny_node copy = *n;
      if (norm_expand(c, n, src, &copy.a.expand)) return c->e->code;
      if (copy_node(c, i, &copy, src)) return c->e->code;
      continue;
    } else if (n->op == TINY_POOL) {
      tiny_node copy = *n;
      harp_status s = norm_pool(c, n, &copy.a.view);
      if (s == HARP_OK) {
        copy.op = TINY_VIEW;
        c->changed = true;
      } else if (s != HARP_E_UNSUPPORTED) {
        return s;
      }
      if (copy_node(c, i, &copy, src)) return c->e->code;
      continue;
    }
    if (copy_node(c, i, n, src)) return c->e->code;
  }
  if (g->explicit_outputs)
    for (int k = 0; k < g->noutputs; k++)
      if (tiny_mark_output(c->ng, c->remap[g->outputs[k]]) < 0)
        return ut_fail(c->e, c->ng->err.code, NULL, "%s", c->ng->err.msg);
  return HARP_OK;
}

harp_status tiny_normalize(harp_error *e, tiny_graph *g, const tiny_symtab *syms, bool allow_unknown) {
  nctx c = {e, g, tiny_graph_new_sharing(g), ut_xcalloc((size_t)g->n + 1, sizeof(int)), allow_unknown, false,
            syms && syms->sym_broadcasts, {0}};
  if (!c.ng || !c.remap) {
    tiny_graph_discard_sharing(c.ng);
    free(c.remap);
    return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  }
  harp_status s = normalize_once(&c);
  free(c.remap);
  ut_strmap_free(&c.imm);
  if (s != HARP_OK) {
    tiny_graph_discard_sharing(c.ng);
    return s;
  }
  tiny_graph_adopt(g, c.ng);
  if (tiny_infer(e, g, syms, allow_unknown)) return e->code;
  if (!g->explicit_outputs) return tiny_compute_outputs(e, g);
  return HARP_OK;
}
