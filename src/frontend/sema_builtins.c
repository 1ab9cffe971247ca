/* sema_builtins.c — the DSL's builtin ops (relu, matmul, conv2d, pad,
 * slice, constant, ...): each reads its arguments (sema_args.c) and calls
 * the builder, reporting at the call.
 * Needs: sema_int.h, the builder.  Gives: fe_sm_builtin. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sema_int.h"

/* ---- builtin ops --------------------------------------------------------------- */
typedef hg_val (*handler)(sema *S, const fe_ex *call, hg_op op);

#define BIND(...)                                                      \
  const pspec sp[] = {__VA_ARGS__};                                    \
  argset A;                                                            \
  if (!fe_sm_bind_args(S, call, sp, UT_ARRAY_LEN(sp), &A)) return FAILED

static hg_val h_unary(sema *S, const fe_ex *call, hg_op op) {
  BIND({"x", A_T, true});
  hg_val x = fe_sm_tensor(S, A.e[0]);
  if (x <= 0) return FAILED;
  fe_sm_at(S, call);
  return fe_sm_chk(S, call, hg_unary(S->g, op, x));
}

static hg_val h_binary(sema *S, const fe_ex *call, hg_op op) {
  BIND({"a", A_T, true}, {"b", A_T, true});
  hg_val a = fe_sm_tensor(S, A.e[0]), b = a > 0 ? fe_sm_tensor(S, A.e[1]) : FAILED;
  if (b <= 0) return FAILED;
  fe_sm_at(S, call);
  return fe_sm_chk(S, call, hg_binary(S->g, op, a, b));
}

static hg_val h_where(sema *S, const fe_ex *call, hg_op op) {
  BIND({"cond", A_T, true}, {"a", A_T, true}, {"b", A_T, true});
  hg_val c = fe_sm_tensor(S, A.e[0]), a = c > 0 ? fe_sm_tensor(S, A.e[1]) : FAILED, b = a > 0 ? fe_sm_tensor(S, A.e[2]) : FAILED;
  if (b <= 0) return FAILED;
  fe_sm_at(S, call);
  return fe_sm_chk(S, call, hg_where(S->g, c, a, b));
}

static hg_val h_muladd(sema *S, const fe_ex *call, hg_op op) {
  BIND({"a", A_T, true}, {"b", A_T, true}, {"c", A_T, true});
  hg_val a = fe_sm_tensor(S, A.e[0]), b = a > 0 ? fe_sm_tensor(S, A.e[1]) : FAILED, c = b > 0 ? fe_sm_tensor(S, A.e[2]) : FAILED;
  if (c <= 0) return FAILED;
  fe_sm_at(S, call);
  return fe_sm_chk(S, call, hg_muladd(S->g, a, b, c));
}

static hg_val reduce(sema *S, const fe_ex *call, hg_op op, const fe_ex *xe, const fe_ex *axes, const fe_ex *keep) {
  int64_t ax[TINY_MAX_RANK];
  int n = 0, iax[TINY_MAX_RANK];
  bool kd = false;
  hg_val x = fe_sm_tensor(S, xe);
  if (x <= 0 || (axes && !fe_sm_ints(S, axes, "axes", ax, &n, TINY_MAX_RANK)) || (keep && !fe_sm_bool(S, keep, "keepdim", &kd)))
    return FAILED;
  for (int i = 0; i < n; i++) iax[i] = (int)(ax[i] < -64 || ax[i] > 64 ? 64 : ax[i]);
  fe_sm_at(S, call);
  return fe_sm_chk(S, call, hg_reduce(S->g, op, x, iax, n, kd));
}

static hg_val h_reduce(sema *S, const fe_ex *call, hg_op op) {
  BIND({"x", A_T, true}, {"axes", A_INTS, false}, {"keepdim", A_BOOL, false});
  return reduce(S, call, op, A.e[0], A.e[1], A.e[2]);
}

/* max(a, b) is elementwise; max(x), max(x, axes) and max(x, [1]) reduce. */
static hg_val h_maxmin(sema *S, const fe_ex *call, hg_op op) {
  BIND({"x", A_T, true}, {"b", A_ANY, false}, {"axes", A_INTS, false}, {"keepdim", A_BOOL, false});
  const fe_ex *b = A.e[1];
  int64_t dummy;
  bool axes_given = b && (b->k == E_LIST || fe_sm_int_ex(b, &dummy));
  if (b && !axes_given && !A.e[2] && !A.e[3]) {
    hg_val x = fe_sm_tensor(S, A.e[0]), y = x > 0 ? fe_sm_tensor(S, b) : FAILED;
    if (y <= 0) return FAILED;
    fe_sm_at(S, call);
    return fe_sm_chk(S, call, hg_binary(S->g, op, x, y));
  }
  if (b && !axes_given) {
    fe_sm_err(S, HARP_E_INVALID_ARG, b->line, b->col, "%s: axes must be integers", call->name);
    return FAILED;
  }
  if (b && A.e[2]) {
    fe_sm_err(S, HARP_E_INVALID_ARG, call->line, call->col, "%s: axes are given twice", call->name);
    return FAILED;
  }
  return reduce(S, call, op == HG_OP_MAX ? HG_OP_RMAX : HG_OP_RMIN, A.e[0], b ? b : A.e[2], A.e[3]);
}

static hg_val h_matmul(sema *S, const fe_ex *call, hg_op op) {
  (void)op;
  BIND({"a", A_T, true}, {"b", A_T, true});
  hg_val a = fe_sm_tensor(S, A.e[0]), b = a > 0 ? fe_sm_tensor(S, A.e[1]) : FAILED;
  if (b <= 0) return FAILED;
  fe_sm_at(S, call);
  return fe_sm_chk(S, call, hg_matmul(S->g, a, b));
}

/* An int or a list of `n` ints, or of `alt` ints expanded by `expand`. */
static bool get_pair(sema *S, const fe_ex *e, const char *what, int64_t *out) {
  int64_t v[2];
  int n;
  if (!fe_sm_ints(S, e, what, v, &n, 2)) return false;
  out[0] = v[0];
  out[1] = n == 2 ? v[1] : v[0];
  return true;
}

static hg_val h_conv2d(sema *S, const fe_ex *call, hg_op op) {
  (void)op;
  BIND({"x", A_T, true}, {"w", A_T, true}, {"bias", A_T, false}, {"stride", A_INTS, false}, {"pad", A_INTS, false},
       {"dilation", A_INTS, false}, {"groups", A_INT, false});
  hg_conv2d_opts o = {0};
  hg_val x = fe_sm_tensor(S, A.e[0]), w = x > 0 ? fe_sm_tensor(S, A.e[1]) : FAILED;
  if (w <= 0) return FAILED;
  if (A.e[2] && (o.bias = fe_sm_tensor(S, A.e[2])) <= 0) return FAILED;
  if ((A.e[3] && !get_pair(S, A.e[3], "stride", o.stride)) || (A.e[5] && !get_pair(S, A.e[5], "dilation", o.dilation)) ||
      (A.e[6] && !fe_sm_int(S, A.e[6], "groups", &o.groups)))
    return FAILED;
  if (A.e[4]) {
    int64_t p[4];
    int n;
    if (!fe_sm_ints(S, A.e[4], "pad", p, &n, 4)) return FAILED;
    if (n == 3) {
      fe_sm_err(S, HARP_E_INVALID_ARG, A.e[4]->line, A.e[4]->col, "pad is p, [ph, pw] or [top, bottom, left, right]");
      return FAILED;
    }
    int64_t ph = p[0], pw = n >= 2 ? p[1] : p[0];
    if (n == 4) memcpy(o.pad, p, sizeof o.pad);
    else o.pad[0] = o.pad[1] = ph, o.pad[2] = o.pad[3] = pw;
  }
  /* An explicit 0 is invalid, not "the default". */
  if (A.e[6] && o.groups == 0) o.groups = -1;
  for (int i = 0; i < 2; i++) {
    if (A.e[3] && o.stride[i] == 0) o.stride[i] = -1;
    if (A.e[5] && o.dilation[i] == 0) o.dilation[i] = -1;
  }
  fe_sm_at(S, call);
  return fe_sm_chk(S, call, hg_conv2d(S->g, x, w, &o));
}

static hg_val h_attention(sema *S, const fe_ex *call, hg_op op) {
  (void)op;
  BIND({"q", A_T, true}, {"k", A_T, true}, {"v", A_T, true}, {"heads", A_INT, false}, {"causal", A_BOOL, false},
       {"mask", A_T, false}, {"scale", A_FLOAT, false});
  hg_attention_opts o = {0};
  int64_t heads = 1;
  hg_val q = fe_sm_tensor(S, A.e[0]), k = q > 0 ? fe_sm_tensor(S, A.e[1]) : FAILED, v = k > 0 ? fe_sm_tensor(S, A.e[2]) : FAILED;
  if (v <= 0) return FAILED;
  if ((A.e[3] && !fe_sm_int(S, A.e[3], "heads", &heads)) || (A.e[4] && !fe_sm_bool(S, A.e[4], "causal", &o.causal)) ||
      (A.e[6] && !fe_sm_float(S, A.e[6], "scale", &o.scale)))
    return FAILED;
  if (A.e[5] && (o.mask = fe_sm_tensor(S, A.e[5])) <= 0) return FAILED;
  if (heads < 1 || heads > 65536) {
    fe_sm_err(S, HARP_E_INVALID_ARG, A.e[3]->line, A.e[3]->col, "heads must be in [1, 65536]");
    return FAILED;
  }
  if (A.e[6] && o.scale == 0) {
    fe_sm_err(S, HARP_E_INVALID_ARG, A.e[6]->line, A.e[6]->col, "scale must not be 0 (omit it for 1/sqrt(d))");
    return FAILED;
  }
  o.heads = (int)heads;
  fe_sm_at(S, call);
  return fe_sm_chk(S, call, hg_attention(S->g, q, k, v, &o));
}

static hg_val h_layernorm(sema *S, const fe_ex *call, hg_op op) {
  (void)op;
  BIND({"x", A_T, true}, {"gamma", A_T, false}, {"beta", A_T, false}, {"axis", A_INT, false}, {"eps", A_FLOAT, false});
  hg_val x = fe_sm_tensor(S, A.e[0]), gm = HG_NONE, bt = HG_NONE;
  int64_t axis = -1;
  double eps = 1e-5;
  if (x <= 0 || (A.e[1] && (gm = fe_sm_tensor(S, A.e[1])) <= 0) || (A.e[2] && (bt = fe_sm_tensor(S, A.e[2])) <= 0) ||
      (A.e[3] && !fe_sm_int(S, A.e[3], "axis", &axis)) || (A.e[4] && !fe_sm_float(S, A.e[4], "eps", &eps)))
    return FAILED;
  fe_sm_at(S, call);
  return fe_sm_chk(S, call, hg_layernorm(S->g, x, gm, bt, (int)(axis < -64 || axis > 64 ? 64 : axis), eps));
}

static hg_val h_softmax(sema *S, const fe_ex *call, hg_op op) {
  (void)op;
  BIND({"x", A_T, true}, {"axis", A_INT, false});
  hg_val x = fe_sm_tensor(S, A.e[0]);
  int64_t axis = -1;
  if (x <= 0 || (A.e[1] && !fe_sm_int(S, A.e[1], "axis", &axis))) return FAILED;
  fe_sm_at(S, call);
  return fe_sm_chk(S, call, hg_softmax(S->g, x, (int)(axis < -64 || axis > 64 ? 64 : axis)));
}

static hg_val h_pool(sema *S, const fe_ex *call, hg_op op) {
  BIND({"x", A_T, true}, {"kernel", A_INTS, true}, {"stride", A_INTS, false});
  hg_pool2d_opts o = {0};
  hg_val x = fe_sm_tensor(S, A.e[0]);
  if (x <= 0 || !get_pair(S, A.e[1], "kernel", o.kernel) || (A.e[2] && !get_pair(S, A.e[2], "stride", o.stride)))
    return FAILED;
  if (A.e[2] && (o.stride[0] == 0 || o.stride[1] == 0)) o.stride[0] = o.stride[1] = -1;
  fe_sm_at(S, call);
  return fe_sm_chk(S, call, op == HG_OP_MAX_POOL2D ? hg_max_pool2d(S->g, x, &o) : hg_avg_pool2d(S->g, x, &o));
}

static hg_val h_reshape_expand(sema *S, const fe_ex *call, hg_op op) {
  BIND({"x", A_T, true}, {"shape", A_DIMS, true});
  fe_shape s = {0};
  hg_val x = fe_sm_tensor(S, A.e[0]);
  if (x <= 0 || !fe_sm_dims(S, A.e[1], "shape", true, s.d, &s.rank)) return FAILED;
  fe_sm_at(S, call);
  return fe_sm_chk(S, call, op == HG_OP_RESHAPE ? fe_reshape(S->g, x, &s) : fe_expand(S->g, x, &s));
}

static bool to_int_list(sema *S, const fe_ex *e, const char *what, int *out, int *n) {
  int64_t v[TINY_MAX_RANK];
  if (!fe_sm_ints(S, e, what, v, n, TINY_MAX_RANK)) return false;
  for (int i = 0; i < *n; i++) out[i] = (int)(v[i] < -64 || v[i] > 64 ? 64 : v[i]);
  return true;
}

static hg_val h_permute_flip(sema *S, const fe_ex *call, hg_op op) {
  BIND({"x", A_T, true}, {op == HG_OP_PERMUTE ? "perm" : "axes", A_INTS, true});
  int v[TINY_MAX_RANK], n;
  hg_val x = fe_sm_tensor(S, A.e[0]);
  if (x <= 0 || !to_int_list(S, A.e[1], sp[1].name, v, &n)) return FAILED;
  fe_sm_at(S, call);
  return fe_sm_chk(S, call, op == HG_OP_PERMUTE ? hg_permute(S->g, x, v, n) : hg_flip(S->g, x, v, n));
}

/* pads := [[lo, hi], ...] (one pair per axis) | [lo0, hi0, lo1, hi1, ...] */
static hg_val h_pad(sema *S, const fe_ex *call, hg_op op) {
  (void)op;
  BIND({"x", A_T, true}, {"pads", A_PADS, true}, {"value", A_FLOAT, false});
  hg_val x = fe_sm_tensor(S, A.e[0]);
  double value = 0;
  if (x <= 0 || (A.e[2] && !fe_sm_float(S, A.e[2], "value", &value))) return FAILED;
  const fe_ex *e = A.e[1];
  int64_t lo[TINY_MAX_RANK], hi[TINY_MAX_RANK];
  int n = 0;
  if (e->k != E_LIST || e->n > 2 * TINY_MAX_RANK) {
    fe_sm_err(S, HARP_E_INVALID_ARG, e->line, e->col, "pads must be a list of [lo, hi] pairs");
    return FAILED;
  }
  bool nested = e->n > 0 && e->args[0].e->k == E_LIST;
  if (nested) {
    if (e->n > TINY_MAX_RANK) {
      fe_sm_err(S, HARP_E_INVALID_ARG, e->line, e->col, "too many pad pairs");
      return FAILED;
    }
    for (int i = 0; i < e->n; i++) {
      const fe_ex *p = e->args[i].e;
      int64_t v[2];
      int k;
      if (p->k != E_LIST || p->n != 2 || !fe_sm_ints(S, p, "a pad pair", v, &k, 2)) {
        if (p->k != E_LIST || p->n != 2) fe_sm_err(S, HARP_E_INVALID_ARG, p->line, p->col, "each pad entry is a [lo, hi] pair");
        return FAILED;
      }
      lo[i] = v[0], hi[i] = v[1];
    }
    n = e->n;
  } else {
    int64_t v[2 * TINY_MAX_RANK];
    int k;
    if (!fe_sm_ints(S, e, "pads", v, &k, 2 * TINY_MAX_RANK)) return FAILED;
    if (k % 2) {
      fe_sm_err(S, HARP_E_INVALID_ARG, e->line, e->col, "a flat pads list needs two entries per axis");
      return FAILED;
    }
    n = k / 2;
    for (int i = 0; i < n; i++) lo[i] = v[2 * i], hi[i] = v[2 * i + 1];
  }
  fe_sm_at(S, call);
  return fe_sm_chk(S, call, hg_pad(S->g, x, lo, hi, n, value));
}

static hg_val h_slice(sema *S, const fe_ex *call, hg_op op) {
  (void)op;
  BIND({"x", A_T, true}, {"starts", A_DIMS, true}, {"ends", A_DIMS, true}, {"axes", A_INTS, false},
       {"steps", A_INTS, false});
  hg_val x = fe_sm_tensor(S, A.e[0]);
  const fe_dim *st[TINY_MAX_RANK], *en[TINY_MAX_RANK];
  int ns, ne, na = 0, nst = 0, axes[TINY_MAX_RANK];
  int64_t steps[TINY_MAX_RANK];
  if (x <= 0 || !fe_sm_dims(S, A.e[1], "starts", false, st, &ns) || !fe_sm_dims(S, A.e[2], "ends", false, en, &ne) ||
      (A.e[3] && !to_int_list(S, A.e[3], "axes", axes, &na)) ||
      (A.e[4] && !fe_sm_ints(S, A.e[4], "steps", steps, &nst, TINY_MAX_RANK)))
    return FAILED;
  if (ne != ns || (A.e[3] && na != ns) || (A.e[4] && nst != ns)) {
    fe_sm_err(S, HARP_E_INVALID_ARG, call->line, call->col, "slice: starts, ends, axes and steps need the same length");
    return FAILED;
  }
  const fe_node *xn = fe_node_of(S->g, x);
  int r = xn ? xn->shape.rank : 0;
  const fe_dim *fs[TINY_MAX_RANK] = {0}, *fe[TINY_MAX_RANK] = {0};
  int64_t fst[TINY_MAX_RANK];
  bool seen[TINY_MAX_RANK] = {0};
  for (int i = 0; i < r; i++) fst[i] = 1;
  for (int i = 0; i < ns; i++) {
    int a = A.e[3] ? axes[i] : i;
    if (a < 0) a += r;
    if (a < 0 || a >= r || seen[a]) {
      fe_sm_err(S, HARP_E_INVALID_ARG, call->line, call->col, "slice: axis %d is out of range or repeated", A.e[3] ? axes[i] : i);
      return FAILED;
    }
    seen[a] = true;
    fs[a] = st[i];
    fe[a] = en[i];
    fst[a] = A.e[4] ? steps[i] : 1;
  }
  fe_sm_at(S, call);
  return fe_sm_chk(S, call, fe_slice(S->g, x, fs, fe, fst));
}

static hg_val h_concat(sema *S, const fe_ex *call, hg_op op) {
  (void)op;
  BIND({"xs", A_TLIST, true}, {"axis", A_INT, false});
  const fe_ex *l = A.e[0];
  int64_t axis = 0;
  if (l->k != E_LIST || l->n < 1) {
    fe_sm_err(S, HARP_E_INVALID_ARG, l->line, l->col, "concat takes a list of tensors: concat([a, b], axis=1)");
    return FAILED;
  }
  if (A.e[1] && !fe_sm_int(S, A.e[1], "axis", &axis)) return FAILED;
  hg_val *xs = ut_xmalloc(sizeof *xs * (size_t)l->n);
  if (!xs) {
    S->oom = true;
    return FAILED;
  }
  for (int i = 0; i < l->n; i++)
    if ((xs[i] = fe_sm_tensor(S, l->args[i].e)) <= 0) {
      free(xs);
      return FAILED;
    }
  fe_sm_at(S, call);
  hg_val r = fe_sm_chk(S, call, hg_concat(S->g, xs, l->n, (int)(axis < -64 || axis > 64 ? 64 : axis)));
  free(xs);
  return r;
}

static hg_val h_cast(sema *S, const fe_ex *call, hg_op op) {
  (void)op;
  BIND({"x", A_T, true}, {"dtype", A_DTYPE, true});
  tiny_dtype dt;
  hg_val x = fe_sm_tensor(S, A.e[0]);
  if (x <= 0 || !fe_sm_dtype(S, A.e[1], &dt)) return FAILED;
  fe_sm_at(S, call);
  return fe_sm_chk(S, call, hg_cast(S->g, x, dt));
}

static hg_val h_gather(sema *S, const fe_ex *call, hg_op op) {
  (void)op;
  BIND({"x", A_T, true}, {"index", A_T, true}, {"axis", A_INT, true});
  int64_t axis;
  hg_val x = fe_sm_tensor(S, A.e[0]), ix = x > 0 ? fe_sm_tensor(S, A.e[1]) : FAILED;
  if (ix <= 0 || !fe_sm_int(S, A.e[2], "axis", &axis)) return FAILED;
  fe_sm_at(S, call);
  return fe_sm_chk(S, call, hg_gather(S->g, x, ix, (int)(axis < -64 || axis > 64 ? 64 : axis)));
}

/* constant(value, dtype): a rank-0 tensor of a fixed dtype */
static hg_val h_constant(sema *S, const fe_ex *call, hg_op op) {
  (void)op;
  BIND({"value", A_FLOAT, true}, {"dtype", A_DTYPE, true});
  double v;
  tiny_dtype dt;
  bool b;
  if (A.e[0]->k == E_BOOL) {
    if (!fe_sm_bool(S, A.e[0], "value", &b)) return FAILED;
    v = b;
  } else if (!fe_sm_float(S, A.e[0], "value", &v)) {
    return FAILED;
  }
  if (!fe_sm_dtype(S, A.e[1], &dt)) return FAILED;
  fe_sm_at(S, call);
  return fe_sm_chk(S, call, hg_const_typed(S->g, v, dt));
}

static const struct builtin {
  const char *name;
  hg_op op;
  handler h;
} builtins[] = {
    {"relu", HG_OP_RELU, h_unary},       {"gelu", HG_OP_GELU, h_unary},
    {"silu", HG_OP_SILU, h_unary},       {"sigmoid", HG_OP_SIGMOID, h_unary},
    {"tanh", HG_OP_TANH, h_unary},       {"exp", HG_OP_EXP, h_unary},
    {"log", HG_OP_LOG, h_unary},         {"neg", HG_OP_NEG, h_unary},
    {"sqrt", HG_OP_SQRT, h_unary},       {"rsqrt", HG_OP_RSQRT, h_unary},
    {"recip", HG_OP_RECIP, h_unary},     {"abs", HG_OP_ABS, h_unary},
    {"floor", HG_OP_FLOOR, h_unary},     {"ceil", HG_OP_CEIL, h_unary},       {"round", HG_OP_ROUND, h_unary},
    {"add", HG_OP_ADD, h_binary},        {"sub", HG_OP_SUB, h_binary},
    {"mul", HG_OP_MUL, h_binary},        {"div", HG_OP_DIV, h_binary},
    {"max", HG_OP_MAX, h_maxmin},        {"min", HG_OP_MIN, h_maxmin},
    {"lt", HG_OP_LT, h_binary},          {"le", HG_OP_LE, h_binary},
    {"gt", HG_OP_GT, h_binary},          {"ge", HG_OP_GE, h_binary},
    {"eq", HG_OP_EQ, h_binary},          {"ne", HG_OP_NE, h_binary},
    {"where", HG_OP_WHERE, h_where},     {"muladd", HG_OP_MULADD, h_muladd}, {"sum", HG_OP_SUM, h_reduce},
    {"mean", HG_OP_MEAN, h_reduce},      {"matmul", HG_OP_MATMUL, h_matmul},
    {"conv2d", HG_OP_CONV2D, h_conv2d},  {"attention", HG_OP_ATTENTION, h_attention},
    {"layernorm", HG_OP_LAYERNORM, h_layernorm}, {"softmax", HG_OP_SOFTMAX, h_softmax},
    {"max_pool2d", HG_OP_MAX_POOL2D, h_pool},    {"avg_pool2d", HG_OP_AVG_POOL2D, h_pool},
    {"reshape", HG_OP_RESHAPE, h_reshape_expand}, {"expand", HG_OP_EXPAND, h_reshape_expand},
    {"permute", HG_OP_PERMUTE, h_permute_flip},   {"flip", HG_OP_FLIP, h_permute_flip},
    {"pad", HG_OP_PAD, h_pad},           {"slice", HG_OP_SLICE, h_slice},
    {"concat", HG_OP_CONCAT, h_concat},  {"cast", HG_OP_CAST, h_cast},
    {"gather", HG_OP_GATHER, h_gather},  {"constant", HG_OP_CONST, h_constant},
};

/* The builtin op named call->name applied to call's arguments: *v (FAILED
 * once reported); false when no builtin has that name. */
bool fe_sm_builtin(sema *S, const fe_ex *call, hg_val *v) {
  for (int i = 0; i < UT_ARRAY_LEN(builtins); i++)
    if (strcmp(builtins[i].name, call->name) == 0) {
      *v = builtins[i].h(S, call, builtins[i].op);
      return true;
    }
  return false;
}
