/* sema.c — from the DSL syntax tree to a program, through the builder.
 * Needs: parse.c (tree), the builder (ops.c, ops_nn.c, graph.c).
 * Gives: fe_sema.  Two phases: every graph's signature (shape variables,
 * parameters, output types) first, so calls may go forward, backward or
 * recursive; then the bodies, statement by statement.  A failed statement
 * reports once, located at the expression, and poisons the names it binds
 * so later uses stay quiet. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fe_dsl.h"


typedef struct sema {
  hg_program *p;
  fe_diagctx *dc;
  hg_graph *g;
  const fe_ast_graph *ag;
  ut_strmap env; /* name -> value; <= 0: poisoned (its definition failed) */
  bool oom;
  hg_graph **gs; /* gs[i] was built from tree graph i (NULL if not) */
  bool *usable;  /* its signature is sound (calls to it are checked) */
  int ngs;
} sema;

#define FAILED 0 /* an hg_val meaning "failed, already reported" */

static void err(sema *S, harp_status code, int line, int col, const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void err(sema *S, harp_status code, int line, int col, const char *fmt, ...) {
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fe_diag(S->dc, code, line, col, "%s", msg);
}

/* After a builder call: report its error at ex. */
static hg_val chk(sema *S, const fe_ex *ex, hg_val v) {
  if (v > 0 && !S->g->err.code) return v;
  if (S->g->err.code) {
    err(S, S->g->err.code, ex->line, ex->col, "%s", S->g->err.msg);
    fe_clear_error(S->g);
  }
  return FAILED;
}

static void at_ex(sema *S, const fe_ex *ex) {
  S->g->line = ex->line;
  S->g->col = ex->col;
}

/* ---- environment --------------------------------------------------------- */
static int *lookup(sema *S, const char *name) { return ut_strmap_find(&S->env, name); }

static void bind(sema *S, const char *name, hg_val v) {
  if (!ut_strmap_put(&S->env, name, v)) S->oom = true;
}

/* ---- dimensions ------------------------------------------------------------ */
/* dim := INT | SHAPEVAR | dim ('+'|'-'|'*') dim | dim '/' INT | '-' dim */
static const fe_dim *eval_dim(sema *S, const fe_ex *ex) {
  ut_arena *A = S->p->arena;
  const fe_dim *l, *r, *d = NULL;
  int64_t q;
  switch (ex->k) {
  case E_NUM:
    if (!ex->is_int) {
      err(S, HARP_E_INVALID_ARG, ex->line, ex->col, "a dimension must be an integer, got %g", ex->num);
      return NULL;
    }
    d = fe_dim_int(A, ex->ival);
    break;
  case E_NAME:
    if (fe_shape_var_index(S->g, ex->name) < 0) {
      if (lookup(S, ex->name))
        err(S, HARP_E_INVALID_ARG, ex->line, ex->col, "%s is a tensor, not a dimension", ex->name);
      else
        err(S, HARP_E_UNBOUND_SYMBOL, ex->line, ex->col, "shape variable %s is not declared; add it to graph<%s=...>",
            ex->name, ex->name);
      return NULL;
    }
    d = fe_dim_sym(A, ex->name);
    break;
  case E_NEG:
    if (!(l = eval_dim(S, ex->l))) return NULL;
    d = fe_dim_scale(A, l, -1);
    break;
  case E_BIN:
    if (!(l = eval_dim(S, ex->l)) || !(r = eval_dim(S, ex->r))) return NULL;
    if (ex->op == T_PLUS) d = fe_dim_add(A, l, r);
    else if (ex->op == T_MINUS) d = fe_dim_sub(A, l, r);
    else if (ex->op == T_STAR) d = fe_dim_mul(A, l, r);
    else if (ex->op == T_SLASH) {
      if (!fe_dim_is_int(r, &q) || q < 1) {
        err(S, HARP_E_INVALID_ARG, ex->r->line, ex->r->col, "a dimension can only be divided by a positive integer");
        return NULL;
      }
      d = fe_dim_div(A, l, q);
    } else {
      err(S, HARP_E_INVALID_ARG, ex->line, ex->col, "this operator is not allowed in a dimension");
      return NULL;
    }
    break;
  default: err(S, HARP_E_INVALID_ARG, ex->line, ex->col, "expected a dimension (an integer or a shape variable)"); return NULL;
  }
  if (!d) err(S, HARP_E_LIMIT, ex->line, ex->col, "dimension expression too large");
  return d;
}

static bool eval_type(sema *S, const fe_ast_type *t, bool param, fe_shape *s) {
  s->rank = t->rank;
  for (int i = 0; i < t->rank; i++) {
    const fe_ex *ex = t->dims[i];
    if (param && ex->k != E_NAME && !(ex->k == E_NUM && ex->is_int)) {
      err(S, HARP_E_INVALID_ARG, ex->line, ex->col, "a parameter's dimensions must be integers or shape variables");
      return false;
    }
    if (!(s->d[i] = eval_dim(S, ex))) return false;
    int64_t v;
    if (fe_dim_is_int(s->d[i], &v) && (v < 0 || v > TINY_MAX_DIM)) {
      err(S, HARP_E_INVALID_ARG, ex->line, ex->col, "dimension %" PRId64 " is out of range", v);
      return false;
    }
  }
  return true;
}

/* ---- argument binding --------------------------------------------------------- */
typedef enum akind { A_T, A_INTS, A_INT, A_DIMS, A_FLOAT, A_BOOL, A_DTYPE, A_TLIST, A_PADS, A_ANY } akind;
typedef struct pspec {
  const char *name;
  akind kind;
  bool required;
} pspec;

#define MAXP 8
typedef struct args {
  const fe_ex *e[MAXP]; /* NULL: not given */
} argset;

static bool bind_args(sema *S, const fe_ex *call, const pspec *sp, int nsp, argset *out) {
  memset(out, 0, sizeof *out);
  int pos = 0;
  for (int i = 0; i < call->n; i++) {
    const fe_arg *a = &call->args[i];
    int k = -1;
    if (!a->kw) {
      if (pos >= nsp) {
        int req = 0;
        for (int j = 0; j < nsp; j++) req += sp[j].required;
        err(S, HARP_E_ARITY, a->line, a->col, "%s takes at most %d argument%s (%d required), got %d", call->name, nsp,
            nsp == 1 ? "" : "s", req, call->n);
        return false;
      }
      k = pos++;
    } else {
      for (int j = 0; j < nsp; j++)
        if (strcmp(sp[j].name, a->kw) == 0) k = j;
      if (k < 0) {
        err(S, HARP_E_INVALID_ARG, a->line, a->col, "%s has no argument named '%s'", call->name, a->kw);
        return false;
      }
    }
    if (out->e[k]) {
      err(S, HARP_E_INVALID_ARG, a->line, a->col, "%s: argument '%s' is given twice", call->name, sp[k].name);
      return false;
    }
    out->e[k] = a->e;
  }
  for (int j = 0; j < nsp; j++)
    if (sp[j].required && !out->e[j]) {
      err(S, HARP_E_ARITY, call->line, call->col, "%s: missing argument '%s'", call->name, sp[j].name);
      return false;
    }
  return true;
}

static hg_val eval(sema *S, const fe_ex *ex);

static bool get_int_ex(const fe_ex *e, int64_t *v) {
  if (e->k == E_NUM && e->is_int) {
    *v = e->ival;
    return true;
  }
  if (e->k == E_NEG && e->l->k == E_NUM && e->l->is_int) {
    *v = -e->l->ival;
    return true;
  }
  return false;
}

static bool get_int(sema *S, const fe_ex *e, const char *what, int64_t *v) {
  if (get_int_ex(e, v)) return true;
  err(S, HARP_E_INVALID_ARG, e->line, e->col, "%s must be an integer", what);
  return false;
}

/* An integer or a list of them. */
static bool get_ints(sema *S, const fe_ex *e, const char *what, int64_t *v, int *n, int cap) {
  if (e->k != E_LIST) {
    *n = 1;
    return get_int(S, e, what, v);
  }
  if (e->n > cap) {
    err(S, HARP_E_INVALID_ARG, e->line, e->col, "%s has %d entries, at most %d", what, e->n, cap);
    return false;
  }
  for (int i = 0; i < e->n; i++)
    if (!get_int(S, e->args[i].e, what, &v[i])) return false;
  *n = e->n;
  return true;
}

static bool get_float(sema *S, const fe_ex *e, const char *what, double *v) {
  if (e->k == E_NUM) {
    *v = e->num;
    return true;
  }
  if (e->k == E_NEG && e->l->k == E_NUM) {
    *v = -e->l->num;
    return true;
  }
  err(S, HARP_E_INVALID_ARG, e->line, e->col, "%s must be a number", what);
  return false;
}

static bool get_bool(sema *S, const fe_ex *e, const char *what, bool *v) {
  if (e->k == E_BOOL) {
    *v = e->b;
    return true;
  }
  err(S, HARP_E_INVALID_ARG, e->line, e->col, "%s must be true or false", what);
  return false;
}

static bool get_dims(sema *S, const fe_ex *e, const char *what, bool minus1, const fe_dim **d, int *n) {
  if (e->k != E_LIST) {
    err(S, HARP_E_INVALID_ARG, e->line, e->col, "%s must be a list like [B, 64]", what);
    return false;
  }
  if (e->n > TINY_MAX_RANK) {
    err(S, HARP_E_LIMIT, e->line, e->col, "%s has %d entries, at most %d", what, e->n, TINY_MAX_RANK);
    return false;
  }
  for (int i = 0; i < e->n; i++) {
    int64_t v;
    if (minus1 && get_int_ex(e->args[i].e, &v) && v == -1) {
      d[i] = NULL;
      continue;
    }
    if (!(d[i] = eval_dim(S, e->args[i].e))) return false;
  }
  *n = e->n;
  return true;
}

static hg_val get_tensor(sema *S, const fe_ex *e) {
  if (e->k == E_LIST) {
    err(S, HARP_E_INVALID_ARG, e->line, e->col, "expected a tensor, found a list");
    return FAILED;
  }
  if (e->k == E_BOOL) {
    err(S, HARP_E_INVALID_ARG, e->line, e->col, "true/false are option values, not tensors");
    return FAILED;
  }
  return eval(S, e);
}

static bool get_dtype(sema *S, const fe_ex *e, tiny_dtype *dt) {
  int d = e->k == E_NAME ? tiny_dtype_parse(e->name) : -1;
  if (d < 0) {
    err(S, HARP_E_INVALID_ARG, e->line, e->col, "expected a dtype (f16, bf16, f32, i32, bool)");
    return false;
  }
  *dt = (tiny_dtype)d;
  return true;
}

/* ---- builtin ops --------------------------------------------------------------- */
typedef hg_val (*handler)(sema *S, const fe_ex *call, hg_op op);

#define BIND(...)                                                      \
  const pspec sp[] = {__VA_ARGS__};                                    \
  argset A;                                                            \
  if (!bind_args(S, call, sp, UT_ARRAY_LEN(sp), &A)) return FAILED

static hg_val h_unary(sema *S, const fe_ex *call, hg_op op) {
  BIND({"x", A_T, true});
  hg_val x = get_tensor(S, A.e[0]);
  if (x <= 0) return FAILED;
  at_ex(S, call);
  return chk(S, call, hg_unary(S->g, op, x));
}

static hg_val h_binary(sema *S, const fe_ex *call, hg_op op) {
  BIND({"a", A_T, true}, {"b", A_T, true});
  hg_val a = get_tensor(S, A.e[0]), b = a > 0 ? get_tensor(S, A.e[1]) : FAILED;
  if (b <= 0) return FAILED;
  at_ex(S, call);
  return chk(S, call, hg_binary(S->g, op, a, b));
}

static hg_val h_where(sema *S, const fe_ex *call, hg_op op) {
  BIND({"cond", A_T, true}, {"a", A_T, true}, {"b", A_T, true});
  hg_val c = get_tensor(S, A.e[0]), a = c > 0 ? get_tensor(S, A.e[1]) : FAILED, b = a > 0 ? get_tensor(S, A.e[2]) : FAILED;
  if (b <= 0) return FAILED;
  at_ex(S, call);
  return chk(S, call, hg_where(S->g, c, a, b));
}

static hg_val reduce(sema *S, const fe_ex *call, hg_op op, const fe_ex *xe, const fe_ex *axes, const fe_ex *keep) {
  int64_t ax[TINY_MAX_RANK];
  int n = 0, iax[TINY_MAX_RANK];
  bool kd = false;
  hg_val x = get_tensor(S, xe);
  if (x <= 0 || (axes && !get_ints(S, axes, "axes", ax, &n, TINY_MAX_RANK)) || (keep && !get_bool(S, keep, "keepdim", &kd)))
    return FAILED;
  for (int i = 0; i < n; i++) iax[i] = (int)(ax[i] < -64 || ax[i] > 64 ? 64 : ax[i]);
  at_ex(S, call);
  return chk(S, call, hg_reduce(S->g, op, x, iax, n, kd));
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
  bool axes_given = b && (b->k == E_LIST || get_int_ex(b, &dummy));
  if (b && !axes_given && !A.e[2] && !A.e[3]) {
    hg_val x = get_tensor(S, A.e[0]), y = x > 0 ? get_tensor(S, b) : FAILED;
    if (y <= 0) return FAILED;
    at_ex(S, call);
    return chk(S, call, hg_binary(S->g, op, x, y));
  }
  if (b && !axes_given) {
    err(S, HARP_E_INVALID_ARG, b->line, b->col, "%s: axes must be integers", call->name);
    return FAILED;
  }
  if (b && A.e[2]) {
    err(S, HARP_E_INVALID_ARG, call->line, call->col, "%s: axes are given twice", call->name);
    return FAILED;
  }
  return reduce(S, call, op == HG_OP_MAX ? HG_OP_RMAX : HG_OP_RMIN, A.e[0], b ? b : A.e[2], A.e[3]);
}

static hg_val h_matmul(sema *S, const fe_ex *call, hg_op op) {
  (void)op;
  BIND({"a", A_T, true}, {"b", A_T, true});
  hg_val a = get_tensor(S, A.e[0]), b = a > 0 ? get_tensor(S, A.e[1]) : FAILED;
  if (b <= 0) return FAILED;
  at_ex(S, call);
  return chk(S, call, hg_matmul(S->g, a, b));
}

/* An int or a list of `n` ints, or of `alt` ints expanded by `expand`. */
static bool get_pair(sema *S, const fe_ex *e, const char *what, int64_t *out) {
  int64_t v[2];
  int n;
  if (!get_ints(S, e, what, v, &n, 2)) return false;
  out[0] = v[0];
  out[1] = n == 2 ? v[1] : v[0];
  return true;
}

static hg_val h_conv2d(sema *S, const fe_ex *call, hg_op op) {
  (void)op;
  BIND({"x", A_T, true}, {"w", A_T, true}, {"bias", A_T, false}, {"stride", A_INTS, false}, {"pad", A_INTS, false},
       {"dilation", A_INTS, false}, {"groups", A_INT, false});
  hg_conv2d_opts o = {0};
  hg_val x = get_tensor(S, A.e[0]), w = x > 0 ? get_tensor(S, A.e[1]) : FAILED;
  if (w <= 0) return FAILED;
  if (A.e[2] && (o.bias = get_tensor(S, A.e[2])) <= 0) return FAILED;
  if ((A.e[3] && !get_pair(S, A.e[3], "stride", o.stride)) || (A.e[5] && !get_pair(S, A.e[5], "dilation", o.dilation)) ||
      (A.e[6] && !get_int(S, A.e[6], "groups", &o.groups)))
    return FAILED;
  if (A.e[4]) {
    int64_t p[4];
    int n;
    if (!get_ints(S, A.e[4], "pad", p, &n, 4)) return FAILED;
    if (n == 3) {
      err(S, HARP_E_INVALID_ARG, A.e[4]->line, A.e[4]->col, "pad is p, [ph, pw] or [top, bottom, left, right]");
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
  at_ex(S, call);
  return chk(S, call, hg_conv2d(S->g, x, w, &o));
}

static hg_val h_attention(sema *S, const fe_ex *call, hg_op op) {
  (void)op;
  BIND({"q", A_T, true}, {"k", A_T, true}, {"v", A_T, true}, {"heads", A_INT, false}, {"causal", A_BOOL, false},
       {"mask", A_T, false}, {"scale", A_FLOAT, false});
  hg_attention_opts o = {0};
  int64_t heads = 1;
  hg_val q = get_tensor(S, A.e[0]), k = q > 0 ? get_tensor(S, A.e[1]) : FAILED, v = k > 0 ? get_tensor(S, A.e[2]) : FAILED;
  if (v <= 0) return FAILED;
  if ((A.e[3] && !get_int(S, A.e[3], "heads", &heads)) || (A.e[4] && !get_bool(S, A.e[4], "causal", &o.causal)) ||
      (A.e[6] && !get_float(S, A.e[6], "scale", &o.scale)))
    return FAILED;
  if (A.e[5] && (o.mask = get_tensor(S, A.e[5])) <= 0) return FAILED;
  if (heads < 1 || heads > 65536) {
    err(S, HARP_E_INVALID_ARG, A.e[3]->line, A.e[3]->col, "heads must be in [1, 65536]");
    return FAILED;
  }
  if (A.e[6] && o.scale == 0) {
    err(S, HARP_E_INVALID_ARG, A.e[6]->line, A.e[6]->col, "scale must not be 0 (omit it for 1/sqrt(d))");
    return FAILED;
  }
  o.heads = (int)heads;
  at_ex(S, call);
  return chk(S, call, hg_attention(S->g, q, k, v, &o));
}

static hg_val h_layernorm(sema *S, const fe_ex *call, hg_op op) {
  (void)op;
  BIND({"x", A_T, true}, {"gamma", A_T, false}, {"beta", A_T, false}, {"axis", A_INT, false}, {"eps", A_FLOAT, false});
  hg_val x = get_tensor(S, A.e[0]), gm = HG_NONE, bt = HG_NONE;
  int64_t axis = -1;
  double eps = 1e-5;
  if (x <= 0 || (A.e[1] && (gm = get_tensor(S, A.e[1])) <= 0) || (A.e[2] && (bt = get_tensor(S, A.e[2])) <= 0) ||
      (A.e[3] && !get_int(S, A.e[3], "axis", &axis)) || (A.e[4] && !get_float(S, A.e[4], "eps", &eps)))
    return FAILED;
  at_ex(S, call);
  return chk(S, call, hg_layernorm(S->g, x, gm, bt, (int)(axis < -64 || axis > 64 ? 64 : axis), eps));
}

static hg_val h_softmax(sema *S, const fe_ex *call, hg_op op) {
  (void)op;
  BIND({"x", A_T, true}, {"axis", A_INT, false});
  hg_val x = get_tensor(S, A.e[0]);
  int64_t axis = -1;
  if (x <= 0 || (A.e[1] && !get_int(S, A.e[1], "axis", &axis))) return FAILED;
  at_ex(S, call);
  return chk(S, call, hg_softmax(S->g, x, (int)(axis < -64 || axis > 64 ? 64 : axis)));
}

static hg_val h_pool(sema *S, const fe_ex *call, hg_op op) {
  BIND({"x", A_T, true}, {"kernel", A_INTS, true}, {"stride", A_INTS, false});
  hg_pool2d_opts o = {0};
  hg_val x = get_tensor(S, A.e[0]);
  if (x <= 0 || !get_pair(S, A.e[1], "kernel", o.kernel) || (A.e[2] && !get_pair(S, A.e[2], "stride", o.stride)))
    return FAILED;
  if (A.e[2] && (o.stride[0] == 0 || o.stride[1] == 0)) o.stride[0] = o.stride[1] = -1;
  at_ex(S, call);
  return chk(S, call, op == HG_OP_MAX_POOL2D ? hg_max_pool2d(S->g, x, &o) : hg_avg_pool2d(S->g, x, &o));
}

static hg_val h_reshape_expand(sema *S, const fe_ex *call, hg_op op) {
  BIND({"x", A_T, true}, {"shape", A_DIMS, true});
  fe_shape s = {0};
  hg_val x = get_tensor(S, A.e[0]);
  if (x <= 0 || !get_dims(S, A.e[1], "shape", true, s.d, &s.rank)) return FAILED;
  at_ex(S, call);
  return chk(S, call, op == HG_OP_RESHAPE ? fe_reshape(S->g, x, &s) : fe_expand(S->g, x, &s));
}

static bool to_int_list(sema *S, const fe_ex *e, const char *what, int *out, int *n) {
  int64_t v[TINY_MAX_RANK];
  if (!get_ints(S, e, what, v, n, TINY_MAX_RANK)) return false;
  for (int i = 0; i < *n; i++) out[i] = (int)(v[i] < -64 || v[i] > 64 ? 64 : v[i]);
  return true;
}

static hg_val h_permute_flip(sema *S, const fe_ex *call, hg_op op) {
  BIND({"x", A_T, true}, {op == HG_OP_PERMUTE ? "perm" : "axes", A_INTS, true});
  int v[TINY_MAX_RANK], n;
  hg_val x = get_tensor(S, A.e[0]);
  if (x <= 0 || !to_int_list(S, A.e[1], sp[1].name, v, &n)) return FAILED;
  at_ex(S, call);
  return chk(S, call, op == HG_OP_PERMUTE ? hg_permute(S->g, x, v, n) : hg_flip(S->g, x, v, n));
}

/* pads := [[lo, hi], ...] (one pair per axis) | [lo0, hi0, lo1, hi1, ...] */
static hg_val h_pad(sema *S, const fe_ex *call, hg_op op) {
  (void)op;
  BIND({"x", A_T, true}, {"pads", A_PADS, true}, {"value", A_FLOAT, false});
  hg_val x = get_tensor(S, A.e[0]);
  double value = 0;
  if (x <= 0 || (A.e[2] && !get_float(S, A.e[2], "value", &value))) return FAILED;
  const fe_ex *e = A.e[1];
  int64_t lo[TINY_MAX_RANK], hi[TINY_MAX_RANK];
  int n = 0;
  if (e->k != E_LIST || e->n > 2 * TINY_MAX_RANK) {
    err(S, HARP_E_INVALID_ARG, e->line, e->col, "pads must be a list of [lo, hi] pairs");
    return FAILED;
  }
  bool nested = e->n > 0 && e->args[0].e->k == E_LIST;
  if (nested) {
    if (e->n > TINY_MAX_RANK) {
      err(S, HARP_E_INVALID_ARG, e->line, e->col, "too many pad pairs");
      return FAILED;
    }
    for (int i = 0; i < e->n; i++) {
      const fe_ex *p = e->args[i].e;
      int64_t v[2];
      int k;
      if (p->k != E_LIST || p->n != 2 || !get_ints(S, p, "a pad pair", v, &k, 2)) {
        if (p->k != E_LIST || p->n != 2) err(S, HARP_E_INVALID_ARG, p->line, p->col, "each pad entry is a [lo, hi] pair");
        return FAILED;
      }
      lo[i] = v[0], hi[i] = v[1];
    }
    n = e->n;
  } else {
    int64_t v[2 * TINY_MAX_RANK];
    int k;
    if (!get_ints(S, e, "pads", v, &k, 2 * TINY_MAX_RANK)) return FAILED;
    if (k % 2) {
      err(S, HARP_E_INVALID_ARG, e->line, e->col, "a flat pads list needs two entries per axis");
      return FAILED;
    }
    n = k / 2;
    for (int i = 0; i < n; i++) lo[i] = v[2 * i], hi[i] = v[2 * i + 1];
  }
  at_ex(S, call);
  return chk(S, call, hg_pad(S->g, x, lo, hi, n, value));
}

static hg_val h_slice(sema *S, const fe_ex *call, hg_op op) {
  (void)op;
  BIND({"x", A_T, true}, {"starts", A_DIMS, true}, {"ends", A_DIMS, true}, {"axes", A_INTS, false},
       {"steps", A_INTS, false});
  hg_val x = get_tensor(S, A.e[0]);
  const fe_dim *st[TINY_MAX_RANK], *en[TINY_MAX_RANK];
  int ns, ne, na = 0, nst = 0, axes[TINY_MAX_RANK];
  int64_t steps[TINY_MAX_RANK];
  if (x <= 0 || !get_dims(S, A.e[1], "starts", false, st, &ns) || !get_dims(S, A.e[2], "ends", false, en, &ne) ||
      (A.e[3] && !to_int_list(S, A.e[3], "axes", axes, &na)) ||
      (A.e[4] && !get_ints(S, A.e[4], "steps", steps, &nst, TINY_MAX_RANK)))
    return FAILED;
  if (ne != ns || (A.e[3] && na != ns) || (A.e[4] && nst != ns)) {
    err(S, HARP_E_INVALID_ARG, call->line, call->col, "slice: starts, ends, axes and steps need the same length");
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
      err(S, HARP_E_INVALID_ARG, call->line, call->col, "slice: axis %d is out of range or repeated", A.e[3] ? axes[i] : i);
      return FAILED;
    }
    seen[a] = true;
    fs[a] = st[i];
    fe[a] = en[i];
    fst[a] = A.e[4] ? steps[i] : 1;
  }
  at_ex(S, call);
  return chk(S, call, fe_slice(S->g, x, fs, fe, fst));
}

static hg_val h_concat(sema *S, const fe_ex *call, hg_op op) {
  (void)op;
  BIND({"xs", A_TLIST, true}, {"axis", A_INT, false});
  const fe_ex *l = A.e[0];
  int64_t axis = 0;
  if (l->k != E_LIST || l->n < 1) {
    err(S, HARP_E_INVALID_ARG, l->line, l->col, "concat takes a list of tensors: concat([a, b], axis=1)");
    return FAILED;
  }
  if (A.e[1] && !get_int(S, A.e[1], "axis", &axis)) return FAILED;
  hg_val *xs = ut_xmalloc(sizeof *xs * (size_t)l->n);
  if (!xs) {
    S->oom = true;
    return FAILED;
  }
  for (int i = 0; i < l->n; i++)
    if ((xs[i] = get_tensor(S, l->args[i].e)) <= 0) {
      free(xs);
      return FAILED;
    }
  at_ex(S, call);
  hg_val r = chk(S, call, hg_concat(S->g, xs, l->n, (int)(axis < -64 || axis > 64 ? 64 : axis)));
  free(xs);
  return r;
}

static hg_val h_cast(sema *S, const fe_ex *call, hg_op op) {
  (void)op;
  BIND({"x", A_T, true}, {"dtype", A_DTYPE, true});
  tiny_dtype dt;
  hg_val x = get_tensor(S, A.e[0]);
  if (x <= 0 || !get_dtype(S, A.e[1], &dt)) return FAILED;
  at_ex(S, call);
  return chk(S, call, hg_cast(S->g, x, dt));
}

static hg_val h_gather(sema *S, const fe_ex *call, hg_op op) {
  (void)op;
  BIND({"x", A_T, true}, {"index", A_T, true}, {"axis", A_INT, true});
  int64_t axis;
  hg_val x = get_tensor(S, A.e[0]), ix = x > 0 ? get_tensor(S, A.e[1]) : FAILED;
  if (ix <= 0 || !get_int(S, A.e[2], "axis", &axis)) return FAILED;
  at_ex(S, call);
  return chk(S, call, hg_gather(S->g, x, ix, (int)(axis < -64 || axis > 64 ? 64 : axis)));
}

/* constant(value, dtype): a rank-0 tensor of a fixed dtype */
static hg_val h_constant(sema *S, const fe_ex *call, hg_op op) {
  (void)op;
  BIND({"value", A_FLOAT, true}, {"dtype", A_DTYPE, true});
  double v;
  tiny_dtype dt;
  bool b;
  if (A.e[0]->k == E_BOOL) {
    if (!get_bool(S, A.e[0], "value", &b)) return FAILED;
    v = b;
  } else if (!get_float(S, A.e[0], "value", &v)) {
    return FAILED;
  }
  if (!get_dtype(S, A.e[1], &dt)) return FAILED;
  at_ex(S, call);
  return chk(S, call, hg_const_typed(S->g, v, dt));
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
    {"where", HG_OP_WHERE, h_where},     {"sum", HG_OP_SUM, h_reduce},
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

/* ---- subgraph calls -------------------------------------------------------------- */
static bool call_graph(sema *S, const fe_ex *call, hg_graph *callee, hg_val *outs, int nouts) {
  hg_val args[64];
  if (call->n > UT_ARRAY_LEN(args)) {
    err(S, HARP_E_LIMIT, call->line, call->col, "too many arguments");
    return false;
  }
  for (int i = 0; i < call->n; i++) {
    if (call->args[i].kw) {
      err(S, HARP_E_INVALID_ARG, call->args[i].line, call->args[i].col, "graph %s takes positional arguments only", callee->name);
      return false;
    }
    if ((args[i] = get_tensor(S, call->args[i].e)) <= 0) return false;
  }
  for (int i = 0; i < S->ngs; i++)
    if (S->gs[i] == callee && !S->usable[i]) return false; /* its signature failed: reported there */
  at_ex(S, call);
  if (chk(S, call, hg_call(S->g, callee, args, call->n, outs, nouts)) <= 0) return false;
  return true;
}

/* ---- expressions ---------------------------------------------------------------------- */
static hg_op bin_op(fe_tok_kind k) {
  switch (k) {
  case T_PLUS: return HG_OP_ADD;
  case T_MINUS: return HG_OP_SUB;
  case T_STAR: return HG_OP_MUL;
  case T_SLASH: return HG_OP_DIV;
  case T_LT: return HG_OP_LT;
  case T_LE: return HG_OP_LE;
  case T_GT: return HG_OP_GT;
  case T_GE: return HG_OP_GE;
  case T_EQEQ: return HG_OP_EQ;
  default: return HG_OP_NE;
  }
}

static hg_val eval(sema *S, const fe_ex *ex) {
  hg_val a, b;
  switch (ex->k) {
  case E_NUM: at_ex(S, ex); return chk(S, ex, hg_const(S->g, ex->num));
  case E_BOOL: err(S, HARP_E_INVALID_ARG, ex->line, ex->col, "true/false are option values, not tensors"); return FAILED;
  case E_LIST: err(S, HARP_E_INVALID_ARG, ex->line, ex->col, "a list is not a tensor"); return FAILED;
  case E_NAME: {
    int *e = lookup(S, ex->name);
    if (e) return *e > 0 ? *e : FAILED;
    if (fe_shape_var_index(S->g, ex->name) >= 0)
      err(S, HARP_E_INVALID_ARG, ex->line, ex->col, "%s is a shape variable, not a tensor", ex->name);
    else
      err(S, HARP_E_DANGLING, ex->line, ex->col, "undefined name '%s'", ex->name);
    return FAILED;
  }
  case E_NEG:
    if (ex->l->k == E_NUM) {
      at_ex(S, ex);
      return chk(S, ex, hg_const(S->g, -ex->l->num));
    }
    if ((a = eval(S, ex->l)) <= 0) return FAILED;
    at_ex(S, ex);
    return chk(S, ex, hg_unary(S->g, HG_OP_NEG, a));
  case E_BIN:
    if ((a = eval(S, ex->l)) <= 0 || (b = eval(S, ex->r)) <= 0) return FAILED;
    at_ex(S, ex);
    if (ex->op == T_AT) return chk(S, ex, hg_matmul(S->g, a, b));
    return chk(S, ex, hg_binary(S->g, bin_op(ex->op), a, b));
  case E_CALL: {
    hg_graph *callee = hg_program_find(S->p, ex->name);
    if (callee) {
      if (callee->nout > 1) {
        err(S, HARP_E_ARITY, ex->line, ex->col, "%s returns %d values; destructure them: (a, b) = %s(...)", ex->name,
            callee->nout, ex->name);
        return FAILED;
      }
      hg_val out = FAILED;
      return call_graph(S, ex, callee, &out, 1) ? out : FAILED;
    }
    for (int i = 0; i < UT_ARRAY_LEN(builtins); i++)
      if (strcmp(builtins[i].name, ex->name) == 0) return builtins[i].h(S, ex, builtins[i].op);
    err(S, HARP_E_UNKNOWN_OP, ex->line, ex->col, "unknown op '%s'", ex->name);
    return FAILED;
  }
  }
  return FAILED;
}

/* ---- statements and graphs ---------------------------------------------------------- */
static void name_fresh(sema *S, hg_val v, int before, const char *name) {
  fe_node *n = fe_node_of(S->g, v);
  if (n && v > before && !n->name) {
    hg_name(S->g, v, name);
    fe_clear_error(S->g);
  }
}

static bool check_target(sema *S, const char *name, int line, int col) {
  if (fe_shape_var_index(S->g, name) >= 0) {
    err(S, HARP_E_DUPLICATE_ID, line, col, "%s is a shape variable and cannot be assigned", name);
    return false;
  }
  return true;
}

static void stmt(sema *S, const fe_ast_stmt *s, bool *returned) {
  int before = S->g->n;
  if (*returned) {
    err(S, HARP_E_INVALID_ARG, s->line, s->col, "statement after return");
    *returned = false; /* report once */
    return;
  }
  if (s->k == S_ASSIGN) {
    if (!check_target(S, s->names[0], s->nline[0], s->ncol[0])) return;
    hg_val v = eval(S, s->ex[0]);
    bind(S, s->names[0], v);
    if (v > 0) name_fresh(S, v, before, s->names[0]);
    return;
  }
  if (s->k == S_TUPLE) {
    for (int i = 0; i < s->nnames; i++) {
      bind(S, s->names[i], FAILED);
      for (int j = 0; j < i; j++)
        if (strcmp(s->names[i], s->names[j]) == 0) {
          err(S, HARP_E_DUPLICATE_ID, s->nline[i], s->ncol[i], "%s appears twice on the left", s->names[i]);
          return;
        }
      if (!check_target(S, s->names[i], s->nline[i], s->ncol[i])) return;
    }
    const fe_ex *ex = s->ex[0];
    hg_graph *callee = ex->k == E_CALL ? hg_program_find(S->p, ex->name) : NULL;
    if (!callee) {
      err(S, HARP_E_ARITY, ex->line, ex->col, "only a graph call returns several values");
      return;
    }
    if (callee->nout != s->nnames) {
      err(S, HARP_E_ARITY, s->line, s->col, "%s returns %d value%s, %d name%s given", callee->name, callee->nout,
          callee->nout == 1 ? "" : "s", s->nnames, s->nnames == 1 ? "" : "s");
      return;
    }
    hg_val outs[64];
    if (s->nnames > UT_ARRAY_LEN(outs)) {
      err(S, HARP_E_LIMIT, s->line, s->col, "a call returns at most %d values", (int)UT_ARRAY_LEN(outs));
      return;
    }
    if (!call_graph(S, ex, callee, outs, s->nnames)) return;
    for (int i = 0; i < s->nnames; i++) {
      bind(S, s->names[i], outs[i]);
      name_fresh(S, outs[i], before, s->names[i]);
    }
    return;
  }
  /* return */
  *returned = true;
  if (s->nex != S->g->nout) {
    err(S, HARP_E_ARITY, s->line, s->col, "%s declares %d output%s but returns %d value%s", S->g->name, S->g->nout,
        S->g->nout == 1 ? "" : "s", s->nex, s->nex == 1 ? "" : "s");
    return;
  }
  for (int k = 0; k < s->nex; k++) {
    hg_val v = eval(S, s->ex[k]);
    if (v <= 0) continue;
    at_ex(S, s->ex[k]);
    chk(S, s->ex[k], fe_set_output(S->g, k, v));
  }
}

/* Shape variables, parameters, outputs.  False if the graph is unusable. */
static bool signature(sema *S, const fe_ast_graph *ag) {
  hg_graph *g = S->g;
  bool ok = true;
  for (int i = 0; i < ag->nsv; i++) {
    const fe_ast_svar *v = &ag->sv[i];
    g->line = v->line, g->col = v->col;
    if (v->has_default && v->dflt > TINY_MAX_DIM) {
      err(S, HARP_E_LIMIT, v->line, v->col, "default %" PRId64 " of %s is above 2^40", v->dflt, v->name);
      ok = false;
      continue;
    }
    if (fe_shape_var_index(g, v->name) >= 0) {
      err(S, HARP_E_DUPLICATE_ID, v->line, v->col, "shape variable %s is declared twice", v->name);
      ok = false;
      continue;
    }
    if (hg_shape_var(g, v->name, v->has_default ? v->dflt : -1)) {
      err(S, g->err.code, v->line, v->col, "%s", g->err.msg);
      fe_clear_error(g);
      ok = false;
    }
  }
  for (int i = 0; i < ag->nparams; i++) {
    const fe_ast_decl *d = &ag->params[i];
    fe_shape s = {0};
    if (fe_shape_var_index(g, d->name) >= 0) { /* as check_target does for an assignment */
      err(S, HARP_E_DUPLICATE_ID, d->line, d->col, "parameter %s has the name of a shape variable", d->name);
      ok = false;
      continue;
    }
    if (!eval_type(S, &d->type, true, &s)) {
      ok = false;
      continue;
    }
    g->line = d->line, g->col = d->col;
    hg_val v = fe_input(g, d->name, (tiny_dtype)d->type.dtype, &s);
    if (v <= 0) {
      err(S, g->err.code, d->line, d->col, "%s", g->err.msg);
      fe_clear_error(g);
      ok = false;
    }
  }
  for (int i = 0; i < ag->nouts; i++) {
    const fe_ast_decl *d = &ag->outs[i];
    fe_shape s = {0};
    if (!eval_type(S, &d->type, false, &s)) {
      ok = false;
      continue;
    }
    g->line = d->line, g->col = d->col;
    if (fe_declare_output(g, d->name, (tiny_dtype)d->type.dtype, &s)) {
      err(S, g->err.code, d->line, d->col, "%s", g->err.msg);
      fe_clear_error(g);
      ok = false;
    }
  }
  if (ag->nouts == 0) {
    err(S, HARP_E_INVALID_ARG, ag->line, ag->col, "graph %s declares no outputs", ag->name);
    ok = false;
  }
  return ok;
}

static void body(sema *S, const fe_ast_graph *ag) {
  ut_strmap_free(&S->env);
  hg_graph *g = S->g;
  for (int i = 0; i < g->nparams; i++) {
    fe_node *n = fe_node_of(g, g->params[i]);
    bind(S, n->name, g->params[i]);
  }
  bool returned = false, any_return = false;
  for (int i = 0; i < ag->nstmts && !S->oom; i++) {
    stmt(S, &ag->stmts[i], &returned);
    any_return |= ag->stmts[i].k == S_RETURN;
  }
  if (!any_return) err(S, HARP_E_INVALID_ARG, ag->end_line, ag->end_col, "graph %s has no return statement", ag->name);
}

void fe_sema(const fe_ast *ast, hg_program *p, fe_diagctx *dc) {
  sema S = {p, dc, NULL, NULL, {0}, false, NULL, NULL, ast->n};
  bool *usable = ut_xcalloc((size_t)ast->n + 1, sizeof *usable);
  hg_graph **gs = ut_xcalloc((size_t)ast->n + 1, sizeof *gs);
  S.gs = gs;
  S.usable = usable;
  if (!usable || !gs) {
    fe_diag(dc, HARP_E_NO_MEMORY, 0, 0, "out of memory");
    goto done;
  }
  for (int i = 0; i < ast->n; i++) {
    const fe_ast_graph *ag = &ast->graphs[i];
    if (hg_program_find(p, ag->name)) {
      err(&S, HARP_E_DUPLICATE_ID, ag->line, ag->col, "graph %s is defined twice", ag->name);
      continue;
    }
    if (!(gs[i] = hg_program_add_graph(p, ag->name))) {
      err(&S, p->err.code, ag->line, ag->col, "%s", p->err.msg);
      harp_error_clear(&p->err);
      continue;
    }
    S.g = gs[i];
    S.ag = ag;
    usable[i] = signature(&S, ag);
  }
  if (!hg_program_find(p, "main") && dc->count == 0)
    fe_diag(dc, HARP_E_INVALID_ARG, ast->n ? ast->graphs[ast->n - 1].line : 1, ast->n ? ast->graphs[ast->n - 1].col : 1,
            "the program has no graph named main (the entry point)");
  for (int i = 0; i < ast->n && !S.oom; i++) {
    if (!gs[i] || !usable[i]) continue;
    S.g = gs[i];
    S.ag = &ast->graphs[i];
    body(&S, S.ag);
  }
  if (S.oom) fe_diag(dc, HARP_E_NO_MEMORY, 0, 0, "out of memory");
done:
  free(usable);
  free(gs);
  ut_strmap_free(&S.env);
}
