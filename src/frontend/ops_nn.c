/* ops_nn.c — the builder's contraction and normalization ops: matmul,
 * conv2d, attention, layernorm, softmax, max/avg pooling (type rules).
 * Needs: ops.c helpers.  Gives: hg_matmul, hg_conv2d, hg_attention,
 * hg_layernorm, hg_softmax, hg_max_pool2d, hg_avg_pool2d. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "fe_int.h"

static bool tensor(hg_graph *g, const fe_node *x, const char *op, const char *what) {
  if (!x->weak) return true;
  fe_failv(g, HARP_E_INVALID_ARG, "%s: %s must be a tensor, not a literal", op, what);
  return false;
}

static bool same_dtype(hg_graph *g, const char *op, const fe_node *a, const fe_node *b, const char *what) {
  if (a->dtype == b->dtype) return true;
  fe_failv(g, HARP_E_DTYPE_MISMATCH, "%s: %s is %s but the input is %s; insert a cast", op, what, tiny_dtype_name(b->dtype),
           tiny_dtype_name(a->dtype));
  return false;
}

static bool rank_is(hg_graph *g, const char *op, const fe_node *x, const char *what, int r) {
  if (x->shape.rank == r) return true;
  char s[256];
  fe_shape_text(&x->shape, s, sizeof s);
  fe_failv(g, HARP_E_AXIS_SIZE_MISMATCH, "%s: %s must have rank %d, got %s", op, what, r, s);
  return false;
}

hg_val hg_matmul(hg_graph *g, hg_val av, hg_val bv) {
  if (!g || g->err.code) return -1;
  const fe_node *a = fe_operand(g, av, "matmul"), *b = a ? fe_operand(g, bv, "matmul") : NULL;
  if (!b || !tensor(g, a, "matmul", "the left operand") || !tensor(g, b, "matmul", "the right operand") ||
      !same_dtype(g, "matmul", a, b, "the right operand"))
    return -1;
  if (a->dtype == TINY_BOOL) return fe_failv(g, HARP_E_DTYPE_MISMATCH, "matmul is not defined on bool");
  int ra = a->shape.rank, rb = b->shape.rank;
  char sa[256], sb[256];
  fe_shape_text(&a->shape, sa, sizeof sa);
  fe_shape_text(&b->shape, sb, sizeof sb);
  if (ra < 2 || rb < 2) return fe_failv(g, HARP_E_AXIS_SIZE_MISMATCH, "matmul needs rank >= 2 operands, got %s and %s", sa, sb);
  const fe_dim *K1 = a->shape.d[ra - 1], *K2 = b->shape.d[rb - 2];
  if (fe_dim_cmp(K1, K2) == FE_DIFF)
    return fe_failv(g, HARP_E_AXIS_SIZE_MISMATCH, "matmul %s @ %s: inner dimensions %s and %s differ", sa, sb, K1->text, K2->text);
  fe_shape ba = a->shape, bb = b->shape, s;
  ba.rank -= 2;
  bb.rank -= 2;
  if (!fe_broadcast(g, &ba, &bb, &s)) return -1;
  s.d[s.rank++] = a->shape.d[ra - 2];
  s.d[s.rank++] = b->shape.d[rb - 1];
  if (s.rank > TINY_MAX_RANK - 1) return fe_failv(g, HARP_E_LIMIT, "matmul: rank above %d", TINY_MAX_RANK - 1);
  hg_val in[2] = {av, bv};
  return fe_finish(g, HG_OP_MATMUL, in, 2, a->dtype, &s, NULL);
}

/* (D + lo + hi - dil*(K - 1) - 1) / stride + 1 */
static const fe_dim *window_out(ut_arena *A, const fe_dim *D, int64_t lo, int64_t hi, const fe_dim *K, int64_t dil,
                                int64_t stride) {
  const fe_dim *span = fe_dim_add(A, fe_dim_scale(A, fe_dim_sub(A, K, fe_dim_int(A, 1)), dil), fe_dim_int(A, 1));
  const fe_dim *n = fe_dim_sub(A, fe_dim_add(A, D, fe_dim_int(A, lo + hi)), span);
  return fe_dim_add(A, fe_dim_div(A, n, stride), fe_dim_int(A, 1));
}

static bool positive_out(hg_graph *g, const char *op, const fe_dim *d, int axis) {
  int64_t v;
  if (!d) {
    fe_failv(g, HARP_E_LIMIT, "%s: output size expression too large", op);
    return false;
  }
  if (fe_dim_is_int(d, &v) && v < 1) {
    fe_failv(g, HARP_E_AXIS_SIZE_MISMATCH, "%s: the window is larger than the (padded) input on axis %d", op, axis);
    return false;
  }
  return true;
}

hg_val hg_conv2d(hg_graph *g, hg_val xv, hg_val wv, const hg_conv2d_opts *o) {
  if (!g || g->err.code) return -1;
  hg_conv2d_opts d = o ? *o : (hg_conv2d_opts){0};
  for (int i = 0; i < 2; i++) {
    if (d.stride[i] == 0) d.stride[i] = 1;
    if (d.dilation[i] == 0) d.dilation[i] = 1;
  }
  if (d.groups == 0) d.groups = 1;
  const fe_node *x = fe_operand(g, xv, "conv2d"), *w = x ? fe_operand(g, wv, "conv2d") : NULL, *b = NULL;
  if (!w || !tensor(g, x, "conv2d", "the input") || !tensor(g, w, "conv2d", "the weight") ||
      !rank_is(g, "conv2d", x, "the input (NCHW)", 4) || !rank_is(g, "conv2d", w, "the weight (Cout, Cin/groups, Kh, Kw)", 4) ||
      !same_dtype(g, "conv2d", x, w, "the weight") || !fe_require_float(g, x, "conv2d"))
    return -1;
  for (int i = 0; i < 2; i++)
    if (d.stride[i] < 1 || d.dilation[i] < 1 || d.stride[i] > TINY_MAX_DIM || d.dilation[i] > TINY_MAX_DIM)
      return fe_failv(g, HARP_E_INVALID_ARG, "conv2d: stride and dilation must be >= 1");
  for (int i = 0; i < 4; i++)
    if (d.pad[i] < 0 || d.pad[i] > TINY_MAX_DIM) return fe_failv(g, HARP_E_INVALID_ARG, "conv2d: padding must be >= 0");
  if (d.groups < 1 || d.groups > TINY_MAX_DIM) return fe_failv(g, HARP_E_INVALID_ARG, "conv2d: groups must be >= 1");
  ut_arena *A = g->prog->arena;
  const fe_dim *C = x->shape.d[1], *Cout = w->shape.d[0], *Cin = w->shape.d[1];
  const fe_dim *want = fe_dim_scale(A, Cin, d.groups);
  if (!want) return fe_failv(g, HARP_E_LIMIT, "conv2d: channel count too large");
  if (fe_dim_cmp(want, C) == FE_DIFF)
    return fe_failv(g, HARP_E_AXIS_SIZE_MISMATCH, "conv2d: the input has %s channels, the weight expects %s (groups %" PRId64 " x %s)",
                    C->text, want->text, d.groups, Cin->text);
  int64_t co;
  if (d.groups > 1 && (!fe_dim_is_int(Cout, &co) || co % d.groups != 0))
    return fe_failv(g, HARP_E_AXIS_SIZE_MISMATCH, "conv2d: %s output channels do not split into %" PRId64 " groups", Cout->text, d.groups);
  if (d.bias != HG_NONE) {
    b = fe_operand(g, d.bias, "conv2d bias");
    if (!b || !tensor(g, b, "conv2d", "the bias") || !same_dtype(g, "conv2d", x, b, "the bias") ||
        !rank_is(g, "conv2d", b, "the bias", 1) || !fe_same_dim(g, b->shape.d[0], Cout, "conv2d bias vs output channels"))
      return -1;
  }
  fe_shape s = {0};
  s.rank = 4;
  s.d[0] = x->shape.d[0];
  s.d[1] = Cout;
  for (int i = 0; i < 2; i++) {
    s.d[2 + i] = window_out(A, x->shape.d[2 + i], d.pad[2 * i], d.pad[2 * i + 1], w->shape.d[2 + i], d.dilation[i], d.stride[i]);
    if (!positive_out(g, "conv2d", s.d[2 + i], 2 + i)) return -1;
  }
  hg_val in[3] = {xv, wv, d.bias};
  fe_node *n;
  hg_val v = fe_finish(g, HG_OP_CONV2D, in, d.bias != HG_NONE ? 3 : 2, x->dtype, &s, &n);
  if (v > 0) {
    memcpy(n->a.conv.stride, d.stride, sizeof d.stride);
    memcpy(n->a.conv.pad, d.pad, sizeof d.pad);
    memcpy(n->a.conv.dilation, d.dilation, sizeof d.dilation);
    n->a.conv.groups = d.groups;
  }
  return v;
}

hg_val hg_attention(hg_graph *g, hg_val qv, hg_val kv, hg_val vv, const hg_attention_opts *o) {
  if (!g || g->err.code) return -1;
  hg_attention_opts d = o ? *o : (hg_attention_opts){0};
  if (d.heads == 0) d.heads = 1;
  const fe_node *q = fe_operand(g, qv, "attention"), *k = q ? fe_operand(g, kv, "attention") : NULL,
                *v = k ? fe_operand(g, vv, "attention") : NULL;
  if (!v || !tensor(g, q, "attention", "q") || !tensor(g, k, "attention", "k") || !tensor(g, v, "attention", "v") ||
      !fe_require_float(g, q, "attention") || !same_dtype(g, "attention", q, k, "k") || !same_dtype(g, "attention", q, v, "v"))
    return -1;
  int r = q->shape.rank;
  if (r < 2 || k->shape.rank != r || v->shape.rank != r)
    return fe_failv(g, HARP_E_AXIS_SIZE_MISMATCH, "attention: q, k, v need the same rank >= 2 ([..., M, E], [..., N, E], [..., N, Ev])");
  for (int i = 0; i < r - 2; i++)
    if (!fe_same_dim(g, q->shape.d[i], k->shape.d[i], "attention: batch axis of q vs k") ||
        !fe_same_dim(g, q->shape.d[i], v->shape.d[i], "attention: batch axis of q vs v"))
      return -1;
  const fe_dim *M = q->shape.d[r - 2], *E = q->shape.d[r - 1], *N = k->shape.d[r - 2], *Ev = v->shape.d[r - 1];
  if (!fe_same_dim(g, E, k->shape.d[r - 1], "attention: feature axis of q vs k") ||
      !fe_same_dim(g, N, v->shape.d[r - 2], "attention: key axis of k vs v"))
    return -1;
  if (d.heads < 1 || d.heads > 65536) return fe_failv(g, HARP_E_INVALID_ARG, "attention: heads must be >= 1");
  if (d.heads > 1) {
    int64_t e, ev;
    if (!fe_dim_is_int(E, &e) || !fe_dim_is_int(Ev, &ev) || e % d.heads || ev % d.heads)
      return fe_failv(g, HARP_E_AXIS_SIZE_MISMATCH, "attention: feature sizes %s and %s must be integers divisible by %d heads",
                      E->text, Ev->text, d.heads);
  }
  if (!isfinite(d.scale)) return fe_failv(g, HARP_E_INVALID_ARG, "attention: scale must be finite");
  int nin = 3;
  if (d.mask != HG_NONE) {
    const fe_node *m = fe_operand(g, d.mask, "attention mask");
    if (!m || !tensor(g, m, "attention", "the mask") || !same_dtype(g, "attention", q, m, "the mask")) return -1;
    fe_shape sc = {0}, out; /* the score shape [..., heads?, M, N] */
    for (int i = 0; i < r - 2; i++) sc.d[sc.rank++] = q->shape.d[i];
    if (d.heads > 1 && !(sc.d[sc.rank++] = fe_dim_int(g->prog->arena, d.heads))) return fe_failv(g, HARP_E_NO_MEMORY, "out of memory");
    sc.d[sc.rank++] = M;
    sc.d[sc.rank++] = N;
    if (!fe_broadcast(g, &m->shape, &sc, &out)) return -1;
    char ms[256], ss[256];
    fe_shape_text(&m->shape, ms, sizeof ms);
    fe_shape_text(&sc, ss, sizeof ss);
    bool fits = out.rank == sc.rank;
    for (int i = 0; i < out.rank && fits; i++) fits = strcmp(out.d[i]->text, sc.d[i]->text) == 0;
    if (!fits) return fe_failv(g, HARP_E_BROADCAST_MISMATCH, "attention: mask %s does not broadcast to the scores %s", ms, ss);
    nin = 4;
  }
  fe_shape s = q->shape;
  s.d[r - 1] = Ev;
  hg_val in[4] = {qv, kv, vv, d.mask};
  fe_node *n;
  hg_val res = fe_finish(g, HG_OP_ATTENTION, in, nin, q->dtype, &s, &n);
  if (res > 0) {
    n->a.attn.heads = d.heads;
    n->a.attn.causal = d.causal;
    n->a.attn.scale = d.scale;
  }
  return res;
}

hg_val hg_layernorm(hg_graph *g, hg_val xv, hg_val gv, hg_val bv, int axis, double eps) {
  if (!g || g->err.code) return -1;
  const fe_node *x = fe_operand(g, xv, "layernorm");
  if (!x || !tensor(g, x, "layernorm", "the input") || !fe_require_float(g, x, "layernorm")) return -1;
  int r = x->shape.rank;
  if (r < 1) return fe_failv(g, HARP_E_INVALID_ARG, "layernorm of a rank-0 tensor");
  int a = fe_norm_axis(g, axis, r);
  if (a < 0) return -1;
  if (!(eps >= 0) || !isfinite(eps)) return fe_failv(g, HARP_E_INVALID_ARG, "layernorm: eps must be >= 0");
  hg_val ps[2] = {gv, bv};
  const char *names[2] = {"gamma", "beta"};
  for (int i = 0; i < 2; i++) {
    if (ps[i] == HG_NONE) continue;
    const fe_node *p = fe_operand(g, ps[i], "layernorm");
    if (!p || !tensor(g, p, "layernorm", names[i]) || !same_dtype(g, "layernorm", x, p, names[i])) return -1;
    bool ok = p->shape.rank == r - a;
    for (int k = 0; ok && k < r - a; k++) ok = fe_dim_cmp(p->shape.d[k], x->shape.d[a + k]) != FE_DIFF;
    if (!ok) {
      char sp[256], sx[256];
      fe_shape_text(&p->shape, sp, sizeof sp);
      fe_shape_text(&x->shape, sx, sizeof sx);
      return fe_failv(g, HARP_E_AXIS_SIZE_MISMATCH, "layernorm: %s has shape %s, expected the normalized axes %d.. of %s",
                      names[i], sp, a, sx);
    }
  }
  fe_shape s = x->shape;
  hg_val in[3] = {xv, gv, bv};
  fe_node *n;
  hg_val v = fe_finish(g, HG_OP_LAYERNORM, in, 3, x->dtype, &s, &n);
  if (v > 0) n->a.ln.axis = a, n->a.ln.eps = eps;
  return v;
}

hg_val hg_softmax(hg_graph *g, hg_val xv, int axis) {
  if (!g || g->err.code) return -1;
  const fe_node *x = fe_operand(g, xv, "softmax");
  if (!x || !tensor(g, x, "softmax", "the input") || !fe_require_float(g, x, "softmax")) return -1;
  if (x->shape.rank < 1) return fe_failv(g, HARP_E_INVALID_ARG, "softmax of a rank-0 tensor");
  int a = fe_norm_axis(g, axis, x->shape.rank);
  if (a < 0) return -1;
  fe_shape s = x->shape;
  fe_node *n;
  hg_val v = fe_finish(g, HG_OP_SOFTMAX, &xv, 1, x->dtype, &s, &n);
  if (v > 0) n->a.axis.axis = a;
  return v;
}

static hg_val pool2d(hg_graph *g, hg_op op, hg_val xv, const hg_pool2d_opts *o) {
  if (!g || g->err.code) return -1;
  const char *name = hg_op_name(op);
  if (!o) return fe_failv(g, HARP_E_INVALID_ARG, "%s needs a kernel size", name);
  hg_pool2d_opts d = *o;
  const fe_node *x = fe_operand(g, xv, name);
  if (!x || !tensor(g, x, name, "the input") || !rank_is(g, name, x, "the input (NCHW)", 4) || !fe_require_float(g, x, name))
    return -1;
  fe_shape s = x->shape;
  for (int i = 0; i < 2; i++) {
    if (d.stride[i] == 0) d.stride[i] = d.kernel[i];
    if (d.kernel[i] < 1 || d.stride[i] < 1 || d.kernel[i] > TINY_MAX_DIM || d.stride[i] > TINY_MAX_DIM)
      return fe_failv(g, HARP_E_INVALID_ARG, "%s: kernel and stride must be >= 1", name);
    ut_arena *A = g->prog->arena;
    s.d[2 + i] = window_out(A, x->shape.d[2 + i], 0, 0, fe_dim_int(A, d.kernel[i]), 1, d.stride[i]);
    if (!positive_out(g, name, s.d[2 + i], 2 + i)) return -1;
  }
  fe_node *n;
  hg_val v = fe_finish(g, op, &xv, 1, x->dtype, &s, &n);
  if (v > 0) {
    memcpy(n->a.pool.kernel, d.kernel, sizeof d.kernel);
    memcpy(n->a.pool.stride, d.stride, sizeof d.stride);
  }
  return v;
}

hg_val hg_max_pool2d(hg_graph *g, hg_val x, const hg_pool2d_opts *o) { return pool2d(g, HG_OP_MAX_POOL2D, x, o); }
hg_val hg_avg_pool2d(hg_graph *g, hg_val x, const hg_pool2d_opts *o) { return pool2d(g, HG_OP_AVG_POOL2D, x, o); }
