/* ops.c — the builder: parameters, literals, elementwise ops, reductions,
 * movement, cast, gather and subgraph calls, each with its type rule.
 * Needs: graph.c, dim.c.  Gives: hg_input ... hg_call (public) and the
 * fe_* variants taking symbolic dims (used by the DSL).
 * The contraction and normalization ops are in ops_nn.c. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fe_int.h"

/* ---- shared checks ------------------------------------------------------------ */
const fe_node *fe_operand(hg_graph *g, hg_val v, const char *what) {
  if (!g || g->err.code) return NULL;
  const fe_node *n = fe_node_of(g, v);
  if (!n) {
    fe_failv(g, v < 0 ? HARP_E_INVALID_ARG : HARP_E_DANGLING, "%s: not a value of graph %s", what, g->name);
    return NULL;
  }
  if (n->op == HG_OP_CALL) {
    fe_failv(g, HARP_E_INVALID_ARG, "%s: a call with several outputs is not one value; destructure it", what);
    return NULL;
  }
  return n;
}

bool fe_require_float(hg_graph *g, const fe_node *x, const char *op) {
  if (x->weak || tiny_dtype_is_float(x->dtype)) return true;
  fe_failv(g, HARP_E_DTYPE_MISMATCH, "%s needs a floating-point tensor, got %s", op, tiny_dtype_name(x->dtype));
  return false;
}

bool fe_same_dim(hg_graph *g, const fe_dim *a, const fe_dim *b, const char *what) {
  if (fe_dim_cmp(a, b) != FE_DIFF) return true;
  fe_failv(g, HARP_E_AXIS_SIZE_MISMATCH, "%s: %s and %s differ", what, a->text, b->text);
  return false;
}

int fe_norm_axis(hg_graph *g, int axis, int rank) {
  int a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank) {
    fe_failv(g, HARP_E_INVALID_ARG, "axis %d is out of range for rank %d", axis, rank);
    return -1;
  }
  return a;
}

static const fe_dim *D(hg_graph *g, const fe_dim *d) {
  if (!d) fe_failv(g, HARP_E_LIMIT, "a dimension expression is too large");
  return d;
}

bool fe_broadcast(hg_graph *g, const fe_shape *a, const fe_shape *b, fe_shape *out) {
  int R = a->rank > b->rank ? a->rank : b->rank;
  fe_shape o = {0};
  o.rank = R;
  for (int i = 0; i < R; i++) {
    int ia = i - (R - a->rank), ib = i - (R - b->rank);
    const fe_dim *da = ia >= 0 ? a->d[ia] : NULL, *db = ib >= 0 ? b->d[ib] : NULL;
    if (!da || fe_dim_is_one(da)) {
      o.d[i] = db ? db : da;
      continue;
    }
    if (!db || fe_dim_is_one(db)) {
      o.d[i] = da;
      continue;
    }
    fe_cmp c = fe_dim_cmp(da, db);
    if (c == FE_DIFF) {
      char sa[256], sb[256];
      fe_shape_text(a, sa, sizeof sa);
      fe_shape_text(b, sb, sizeof sb);
      fe_failv(g, HARP_E_BROADCAST_MISMATCH, "cannot broadcast %s with %s (%s vs %s)", sa, sb, da->text, db->text);
      return false;
    }
    /* Undecided until bound: keep the more informative one. */
    o.d[i] = fe_dim_is_int(db, NULL) || (!fe_dim_is_int(da, NULL) && fe_dim_is_sym(db) && !fe_dim_is_sym(da)) ? db : da;
  }
  *out = o;
  return true;
}

hg_val fe_finish(hg_graph *g, hg_op op, const hg_val *in, int nin, tiny_dtype dt, const fe_shape *s, fe_node **out) {
  fe_node *n = fe_new_node(g, op, in, nin);
  if (!n) return -1;
  n->dtype = dt;
  if (s) n->shape = *s;
  if (out) *out = n;
  return fe_val_of(g, n);
}

/* ---- leaves ------------------------------------------------------------------------ */
static bool name_taken(const hg_graph *g, const char *name) {
  for (int i = 0; i < g->nparams; i++)
    if (strcmp(fe_node_of(g, g->params[i])->name, name) == 0) return true;
  return false;
}

hg_val fe_input(hg_graph *g, const char *name, tiny_dtype dt, const fe_shape *s) {
  if (!g || g->err.code) return -1;
  if (!fe_is_ident(name)) return fe_failv(g, HARP_E_INVALID_ARG, "parameter name \"%s\" is not an identifier", name ? name : "");
  if (name_taken(g, name) || fe_output_index(g, name) >= 0)
    return fe_failv(g, HARP_E_DUPLICATE_ID, "parameter %s: the name is already used", name);
  if ((unsigned)dt >= TINY_DTYPE_COUNT) return fe_failv(g, HARP_E_INVALID_ARG, "parameter %s: unknown dtype", name);
  if (s->rank < 0 || s->rank > TINY_MAX_RANK) return fe_failv(g, HARP_E_LIMIT, "parameter %s: rank above %d", name, TINY_MAX_RANK);
  for (int i = 0; i < s->rank; i++) {
    int64_t n;
    const char *sym = fe_dim_is_sym(s->d[i]);
    if (sym) {
      if (fe_shape_var_index(g, sym) < 0 && hg_shape_var(g, sym, -1)) return -1;
    } else if (!fe_dim_is_int(s->d[i], &n) || n < 0 || n > TINY_MAX_DIM) {
      return fe_failv(g, HARP_E_INVALID_ARG, "parameter %s: dimension %d (%s) must be an integer in [0, 2^40] or a shape variable",
                      name, i, s->d[i]->text);
    }
  }
  if (g->nparams == g->pcap) {
    int cap = g->pcap ? g->pcap * 2 : 8;
    hg_val *p = ut_xrealloc(g->params, sizeof *p * (size_t)cap);
    if (!p) return fe_failv(g, HARP_E_NO_MEMORY, "out of memory");
    g->params = p;
    g->pcap = cap;
  }
  const char *nm = fe_strdup(g, name);
  fe_node *n;
  hg_val v = nm ? fe_finish(g, HG_OP_INPUT, NULL, 0, dt, s, &n) : -1;
  if (v < 0) return -1;
  n->name = nm;
  n->a.input.index = g->nparams;
  g->params[g->nparams++] = v;
  return v;
}

hg_val hg_input(hg_graph *g, const char *name, tiny_dtype dt, int rank, const tiny_dim *dims) {
  if (!g || g->err.code) return -1;
  if (rank < 0 || rank > TINY_MAX_RANK) return fe_failv(g, HARP_E_LIMIT, "parameter %s: rank above %d", name, TINY_MAX_RANK);
  fe_shape s = {0};
  s.rank = rank;
  for (int i = 0; i < rank; i++) {
    if (dims[i].sym && !fe_is_ident(dims[i].sym))
      return fe_failv(g, HARP_E_INVALID_ARG, "parameter %s: \"%s\" is not a shape variable name", name, dims[i].sym);
    s.d[i] = D(g, dims[i].sym ? fe_dim_sym(g->prog->arena, dims[i].sym) : fe_dim_int(g->prog->arena, dims[i].n));
    if (!s.d[i]) return -1;
  }
  return fe_input(g, name, dt, &s);
}

hg_val hg_const(hg_graph *g, double v) {
  if (!g || g->err.code) return -1;
  fe_node *n;
  hg_val r = fe_finish(g, HG_OP_CONST, NULL, 0, TINY_FP32, NULL, &n);
  if (r > 0) n->weak = true, n->a.cnst.v = v;
  return r;
}

hg_val hg_const_typed(hg_graph *g, double v, tiny_dtype dt) {
  if (!g || g->err.code) return -1;
  if ((unsigned)dt >= TINY_DTYPE_COUNT) return fe_failv(g, HARP_E_INVALID_ARG, "unknown dtype");
  fe_node *n;
  hg_val r = fe_finish(g, HG_OP_CONST, NULL, 0, dt, NULL, &n);
  if (r > 0) n->a.cnst.v = v;
  return r;
}

/* ---- elementwise ------------------------------------------------------------------ */
static bool unary_op(hg_op op) { return hg_op_class_of(op) == HG_C_UNARY; }

hg_val hg_unary(hg_graph *g, hg_op op, hg_val xv) {
  if (!g || g->err.code) return -1;
  if (!unary_op(op)) return fe_failv(g, HARP_E_UNKNOWN_OP, "%s is not an elementwise function of one tensor", hg_op_name(op));
  const fe_node *x = fe_operand(g, xv, hg_op_name(op));
  if (!x) return -1;
  tiny_dtype dt = x->weak ? TINY_FP32 : x->dtype;
  if (dt == TINY_BOOL) return fe_failv(g, HARP_E_DTYPE_MISMATCH, "%s is not defined on bool", hg_op_name(op));
  if (op != HG_OP_RELU && op != HG_OP_NEG && op != HG_OP_ABS && !fe_require_float(g, x, hg_op_name(op))) return -1;
  fe_shape s = x->shape;
  return fe_finish(g, op, &xv, 1, dt, &s, NULL);
}

static double fold(hg_op op, double a, double b) {
  switch (op) {
  case HG_OP_ADD: return a + b;
  case HG_OP_SUB: return a - b;
  case HG_OP_MUL: return a * b;
  case HG_OP_DIV: return a / b;
  case HG_OP_MAX: return a > b ? a : b;
  case HG_OP_MIN: return a < b ? a : b;
  case HG_OP_LT: return a < b;
  case HG_OP_LE: return a <= b;
  case HG_OP_GT: return a > b;
  case HG_OP_GE: return a >= b;
  case HG_OP_EQ: return a == b;
  case HG_OP_NE: return a != b;
  default: return 0;
  }
}

/* The dtype operands agree on; a weak literal takes its partner's. */
static bool unify_dtype(hg_graph *g, const char *op, const fe_node *a, const fe_node *b, tiny_dtype *out) {
  if (a->weak && b->weak) {
    *out = TINY_FP32;
    return true;
  }
  const fe_node *t = a->weak ? b : a, *o = a->weak ? a : b;
  if (!o->weak && o->dtype != t->dtype) {
    fe_failv(g, HARP_E_DTYPE_MISMATCH, "%s operands are %s and %s; insert a cast", op, tiny_dtype_name(a->dtype),
             tiny_dtype_name(b->dtype));
    return false;
  }
  if (o->weak && t->dtype == TINY_BOOL) {
    fe_failv(g, HARP_E_DTYPE_MISMATCH, "%s: a number literal cannot meet a bool tensor", op);
    return false;
  }
  if (o->weak && t->dtype == TINY_I32 && (o->a.cnst.v != floor(o->a.cnst.v) || fabs(o->a.cnst.v) > 2147483647.0)) {
    fe_failv(g, HARP_E_DTYPE_MISMATCH, "%s: literal %g is not an i32 value", op, o->a.cnst.v);
    return false;
  }
  *out = t->dtype;
  return true;
}

hg_val hg_binary(hg_graph *g, hg_op op, hg_val av, hg_val bv) {
  if (!g || g->err.code) return -1;
  hg_op_class cls = hg_op_class_of(op);
  if (cls != HG_C_BINARY && cls != HG_C_COMPARE)
    return fe_failv(g, HARP_E_UNKNOWN_OP, "%s is not an elementwise function of two tensors", hg_op_name(op));
  const fe_node *a = fe_operand(g, av, hg_op_name(op)), *b = a ? fe_operand(g, bv, hg_op_name(op)) : NULL;
  if (!a || !b) return -1;
  if (a->weak && b->weak) { /* two literals: fold */
    double r = fold(op, a->a.cnst.v, b->a.cnst.v);
    return cls == HG_C_COMPARE ? hg_const_typed(g, r, TINY_BOOL) : hg_const(g, r);
  }
  tiny_dtype dt;
  if (!unify_dtype(g, hg_op_name(op), a, b, &dt)) return -1;
  bool arith = op == HG_OP_ADD || op == HG_OP_SUB || op == HG_OP_MUL || op == HG_OP_DIV;
  bool order = op == HG_OP_LT || op == HG_OP_LE || op == HG_OP_GT || op == HG_OP_GE;
  if (dt == TINY_BOOL && (arith || order))
    return fe_failv(g, HARP_E_DTYPE_MISMATCH, "%s is not defined on bool", hg_op_name(op));
  if (op == HG_OP_DIV && !tiny_dtype_is_float(dt))
    return fe_failv(g, HARP_E_DTYPE_MISMATCH, "div needs floating-point operands, got %s", tiny_dtype_name(dt));
  fe_shape s;
  if (!fe_broadcast(g, &a->shape, &b->shape, &s)) return -1;
  hg_val in[2] = {av, bv};
  return fe_finish(g, op, in, 2, cls == HG_C_COMPARE ? TINY_BOOL : dt, &s, NULL);
}

hg_val hg_where(hg_graph *g, hg_val cv, hg_val av, hg_val bv) {
  if (!g || g->err.code) return -1;
  const fe_node *c = fe_operand(g, cv, "where"), *a = c ? fe_operand(g, av, "where") : NULL,
                *b = a ? fe_operand(g, bv, "where") : NULL;
  if (!b) return -1;
  if (c->weak || c->dtype != TINY_BOOL)
    return fe_failv(g, HARP_E_DTYPE_MISMATCH, "where: the condition must be bool, got %s",
                    c->weak ? "a number literal" : tiny_dtype_name(c->dtype));
  tiny_dtype dt;
  if (!unify_dtype(g, "where", a, b, &dt)) return -1;
  fe_shape s, s2;
  if (!fe_broadcast(g, &a->shape, &b->shape, &s) || !fe_broadcast(g, &c->shape, &s, &s2)) return -1;
  hg_val in[3] = {cv, av, bv};
  return fe_finish(g, HG_OP_WHERE, in, 3, dt, &s2, NULL);
}

hg_val hg_muladd(hg_graph *g, hg_val av, hg_val bv, hg_val cv) {
  if (!g || g->err.code) return -1;
  const fe_node *a = fe_operand(g, av, "muladd"), *b = a ? fe_operand(g, bv, "muladd") : NULL,
                *c = b ? fe_operand(g, cv, "muladd") : NULL;
  if (!c) return -1;
  tiny_dtype dab, dt;
  if (!unify_dtype(g, "muladd", a, b, &dab)) return -1;
  const fe_node *ab = a->weak ? b : a; /* the dtype a and b agree on, as a node unify_dtype reads */
  if (!unify_dtype(g, "muladd", ab, c, &dt)) return -1;
  if (a->weak && b->weak && c->weak) return fe_failv(g, HARP_E_INVALID_ARG, "muladd needs a tensor operand, not only literals");
  if (!tiny_dtype_is_float(dt))
    return fe_failv(g, HARP_E_DTYPE_MISMATCH, "muladd needs floating-point operands, got %s", tiny_dtype_name(dt));
  fe_shape s, s2;
  if (!fe_broadcast(g, &a->shape, &b->shape, &s) || !fe_broadcast(g, &s, &c->shape, &s2)) return -1;
  hg_val in[3] = {av, bv, cv};
  return fe_finish(g, HG_OP_MULADD, in, 3, dt, &s2, NULL);
}

/* ---- reductions ------------------------------------------------------------------- */
hg_val hg_reduce(hg_graph *g, hg_op op, hg_val xv, const int *axes, int naxes, bool keepdim) {
  if (!g || g->err.code) return -1;
  if (hg_op_class_of(op) != HG_C_REDUCE) return fe_failv(g, HARP_E_UNKNOWN_OP, "%s is not a reduction", hg_op_name(op));
  const fe_node *x = fe_operand(g, xv, hg_op_name(op));
  if (!x) return -1;
  if (x->weak) return fe_failv(g, HARP_E_INVALID_ARG, "%s of a literal", hg_op_name(op));
  if (x->dtype == TINY_BOOL) return fe_failv(g, HARP_E_DTYPE_MISMATCH, "%s is not defined on bool; cast first", hg_op_name(op));
  if (op == HG_OP_MEAN && !fe_require_float(g, x, "mean")) return -1;
  int r = x->shape.rank;
  if (naxes < 0 || naxes > r) return fe_failv(g, HARP_E_INVALID_ARG, "%s: %d axes for rank %d", hg_op_name(op), naxes, r);
  if (r == 0) return fe_failv(g, HARP_E_INVALID_ARG, "%s of a rank-0 tensor", hg_op_name(op));
  bool used[TINY_MAX_RANK] = {0};
  for (int i = 0; i < naxes; i++) {
    int a = fe_norm_axis(g, axes[i], r);
    if (a < 0) return -1;
    if (used[a]) return fe_failv(g, HARP_E_INVALID_ARG, "%s: axis %d is listed twice", hg_op_name(op), a);
    used[a] = true;
  }
  if (naxes == 0)
    for (int i = 0; i < r; i++) used[i] = true;
  fe_shape s = {0};
  fe_node *n;
  for (int i = 0; i < r; i++) {
    if (!used[i])
      s.d[s.rank++] = x->shape.d[i];
    else if (keepdim && !(s.d[s.rank++] = D(g, fe_dim_int(g->prog->arena, 1))))
      return -1;
  }
  hg_val v = fe_finish(g, op, &xv, 1, x->dtype, &s, &n);
  if (v < 0) return -1;
  n->a.reduce.keepdim = keepdim;
  for (int i = 0; i < r; i++)
    if (used[i]) n->a.reduce.axes[n->a.reduce.n++] = i;
  return v;
}

/* ---- element counts ------------------------------------------------------------------ */
/* A shape's element count as coefficient * multiset of irreducible factors. */
typedef struct numel {
  int64_t k;
  int n;
  const fe_dim *f[4 * TINY_MAX_RANK];
  bool ok; /* false: overflow, too many factors, or no memory */
} numel;

static void numel_put(numel *m, const fe_dim *f) {
  if (!f || m->n == UT_ARRAY_LEN(m->f)) m->ok = false;
  else m->f[m->n++] = f;
}

static void numel_add(ut_arena *A, numel *m, const fe_dim *d) {
  int64_t v;
  if (!m->ok) return;
  if (fe_dim_is_int(d, &v)) {
    if (!ut_mul_ok(m->k, v, &m->k)) m->ok = false;
    return;
  }
  if (d->nt == 1 && d->c == 0) {
    const fe_atom *at = d->t[0].atom;
    if (!ut_mul_ok(m->k, d->t[0].k, &m->k)) m->ok = false;
    if (at->kind == FE_A_PROD)
      for (int i = 0; i < at->nf; i++) numel_put(m, at->f[i]);
    else
      numel_put(m, fe_dim_atom(A, at));
    return;
  }
  numel_put(m, d);
}

static numel numel_of(ut_arena *A, const fe_shape *s, int skip) {
  numel m = {1, 0, {0}, true};
  for (int i = 0; i < s->rank; i++)
    if (i != skip) numel_add(A, &m, s->d[i]);
  return m;
}

/* Remove b's factors from a; false if one is missing. */
static bool numel_cancel(numel *a, const numel *b) {
  for (int i = 0; i < b->n; i++) {
    int j = 0;
    while (j < a->n && strcmp(a->f[j]->text, b->f[i]->text) != 0) j++;
    if (j == a->n) return false;
    a->f[j] = a->f[--a->n];
  }
  return true;
}

/* ---- movement ------------------------------------------------------------------------ */
hg_val fe_reshape(hg_graph *g, hg_val xv, const fe_shape *to) {
  if (!g || g->err.code) return -1;
  const fe_node *x = fe_operand(g, xv, "reshape");
  if (!x) return -1;
  if (to->rank < 0 || to->rank > TINY_MAX_RANK) return fe_failv(g, HARP_E_LIMIT, "reshape: rank above %d", TINY_MAX_RANK);
  ut_arena *A = g->prog->arena;
  fe_shape s = *to;
  int infer = -1;
  for (int i = 0; i < s.rank; i++) {
    int64_t v;
    if (!s.d[i]) {
      if (infer >= 0) return fe_failv(g, HARP_E_INVALID_ARG, "reshape: only one dimension can be -1");
      infer = i;
    } else if (fe_dim_is_int(s.d[i], &v) && (v < 0 || v > TINY_MAX_DIM)) {
      return fe_failv(g, HARP_E_INVALID_ARG, "reshape: dimension %d is %" PRId64, i, v);
    }
  }
  numel nx = numel_of(A, &x->shape, -1), nt = numel_of(A, &s, infer);
  if (!nx.ok || !nt.ok) return fe_failv(g, HARP_E_LIMIT, "reshape: element count too large");
  char sx[256], st[256];
  fe_shape_text(&x->shape, sx, sizeof sx);
  if (infer >= 0) {
    numel rest = nx;
    if (!numel_cancel(&rest, &nt) || nt.k == 0 || rest.k % nt.k != 0)
      return fe_failv(g, HARP_E_INVALID_ARG, "reshape of %s: the -1 dimension is not a whole number of elements", sx);
    const fe_dim *d = fe_dim_int(A, rest.k / nt.k);
    for (int i = 0; i < rest.n; i++) d = fe_dim_mul(A, d, rest.f[i]);
    if (!(s.d[infer] = D(g, d))) return -1;
  } else {
    numel a = nx;
    fe_shape_text(&s, st, sizeof st);
    if (a.n == nt.n && numel_cancel(&a, &nt) && a.k != nt.k)
      return fe_failv(g, HARP_E_AXIS_SIZE_MISMATCH, "reshape %s -> %s changes the element count", sx, st);
  }
  fe_node *n;
  hg_val v = fe_finish(g, HG_OP_RESHAPE, &xv, 1, x->dtype, &s, &n);
  if (v > 0) n->a.shape.to = s;
  return v;
}

static bool dims_from_tiny(hg_graph *g, int rank, const tiny_dim *dims, fe_shape *s, bool allow_minus1) {
  if (rank < 0 || rank > TINY_MAX_RANK) {
    fe_failv(g, HARP_E_LIMIT, "rank %d is out of range", rank);
    return false;
  }
  s->rank = rank;
  for (int i = 0; i < rank; i++) {
    if (!dims[i].sym && dims[i].n == -1 && allow_minus1) {
      s->d[i] = NULL;
      continue;
    }
    if (dims[i].sym && !fe_is_ident(dims[i].sym)) {
      fe_failv(g, HARP_E_INVALID_ARG, "\"%s\" is not a shape variable name", dims[i].sym);
      return false;
    }
    if (!dims[i].sym && dims[i].n < 0) {
      fe_failv(g, HARP_E_INVALID_ARG, "dimension %d is negative", i);
      return false;
    }
    s->d[i] = D(g, dims[i].sym ? fe_dim_sym(g->prog->arena, dims[i].sym) : fe_dim_int(g->prog->arena, dims[i].n));
    if (!s->d[i]) return false;
  }
  return true;
}

hg_val hg_reshape(hg_graph *g, hg_val x, int rank, const tiny_dim *dims) {
  fe_shape s = {0};
  if (!g || g->err.code || !dims_from_tiny(g, rank, dims, &s, true)) return -1;
  return fe_reshape(g, x, &s);
}

hg_val hg_permute(hg_graph *g, hg_val xv, const int *perm, int n) {
  if (!g || g->err.code) return -1;
  const fe_node *x = fe_operand(g, xv, "permute");
  if (!x) return -1;
  int r = x->shape.rank;
  if (n != r) return fe_failv(g, HARP_E_INVALID_PERMUTATION, "permute: %d entries for rank %d", n, r);
  bool seen[TINY_MAX_RANK] = {0};
  fe_shape s = {0};
  s.rank = r;
  int p[TINY_MAX_RANK];
  for (int i = 0; i < r; i++) {
    int a = perm[i] < 0 ? perm[i] + r : perm[i];
    if (a < 0 || a >= r || seen[a])
      return fe_failv(g, HARP_E_INVALID_PERMUTATION, "permute: entry %d (%d) is out of range or repeated", i, perm[i]);
    seen[a] = true;
    p[i] = a;
    s.d[i] = x->shape.d[a];
  }
  fe_node *nd;
  hg_val v = fe_finish(g, HG_OP_PERMUTE, &xv, 1, x->dtype, &s, &nd);
  if (v > 0) {
    nd->a.perm.n = r;
    memcpy(nd->a.perm.v, p, sizeof(int) * (size_t)r);
  }
  return v;
}

hg_val fe_expand(hg_graph *g, hg_val xv, const fe_shape *to) {
  if (!g || g->err.code) return -1;
  const fe_node *x = fe_operand(g, xv, "expand");
  if (!x) return -1;
  int r = x->shape.rank, R = to->rank;
  if (R < r || R > TINY_MAX_RANK) return fe_failv(g, HARP_E_BROADCAST_MISMATCH, "expand: rank %d to rank %d", r, R);
  fe_shape s = *to;
  for (int i = 0; i < R; i++) {
    int j = i - (R - r);
    const fe_dim *xd = j >= 0 ? x->shape.d[j] : NULL;
    if (!s.d[i]) {
      if (!xd) return fe_failv(g, HARP_E_INVALID_ARG, "expand: -1 is only allowed for existing axes");
      s.d[i] = xd;
      continue;
    }
    int64_t v;
    if (fe_dim_is_int(s.d[i], &v) && v < 0) return fe_failv(g, HARP_E_INVALID_ARG, "expand: dimension %d is negative", i);
    if (xd && !fe_dim_is_one(xd) && fe_dim_cmp(xd, s.d[i]) == FE_DIFF) {
      char a[256], b[256];
      fe_shape_text(&x->shape, a, sizeof a);
      fe_shape_text(&s, b, sizeof b);
      return fe_failv(g, HARP_E_BROADCAST_MISMATCH, "expand %s -> %s: axis %d is neither equal nor 1", a, b, j);
    }
  }
  fe_node *n;
  hg_val v = fe_finish(g, HG_OP_EXPAND, &xv, 1, x->dtype, &s, &n);
  if (v > 0) n->a.shape.to = s;
  return v;
}

hg_val hg_expand(hg_graph *g, hg_val x, int rank, const tiny_dim *dims) {
  fe_shape s = {0};
  if (!g || g->err.code || !dims_from_tiny(g, rank, dims, &s, true)) return -1;
  return fe_expand(g, x, &s);
}

hg_val hg_pad(hg_graph *g, hg_val xv, const int64_t *lo, const int64_t *hi, int n, double value) {
  if (!g || g->err.code) return -1;
  const fe_node *x = fe_operand(g, xv, "pad");
  if (!x) return -1;
  int r = x->shape.rank;
  if (n != r) return fe_failv(g, HARP_E_INVALID_ARG, "pad: %d (lo, hi) pairs for rank %d", n, r);
  fe_shape s = x->shape;
  for (int i = 0; i < r; i++) {
    if (lo[i] < 0 || hi[i] < 0 || lo[i] > TINY_MAX_DIM || hi[i] > TINY_MAX_DIM)
      return fe_failv(g, HARP_E_INVALID_ARG, "pad: amounts must be in [0, 2^40] (use slice to cut)");
    s.d[i] = D(g, fe_dim_add(g->prog->arena, s.d[i], fe_dim_int(g->prog->arena, lo[i] + hi[i])));
    if (!s.d[i]) return -1;
  }
  fe_node *nd;
  hg_val v = fe_finish(g, HG_OP_PAD, &xv, 1, x->dtype, &s, &nd);
  if (v > 0) {
    nd->a.pad.n = r;
    nd->a.pad.value = value;
    memcpy(nd->a.pad.lo, lo, sizeof(int64_t) * (size_t)r);
    memcpy(nd->a.pad.hi, hi, sizeof(int64_t) * (size_t)r);
  }
  return v;
}

hg_val fe_slice(hg_graph *g, hg_val xv, const fe_dim *const *start, const fe_dim *const *end, const int64_t *step) {
  if (!g || g->err.code) return -1;
  const fe_node *x = fe_operand(g, xv, "slice");
  if (!x) return -1;
  ut_arena *A = g->prog->arena;
  int r = x->shape.rank;
  fe_shape s = x->shape;
  const fe_dim *st[TINY_MAX_RANK], *en[TINY_MAX_RANK];
  for (int i = 0; i < r; i++) {
    const fe_dim *dim = x->shape.d[i];
    int64_t sv, ev, dv;
    if (step[i] < 1) return fe_failv(g, HARP_E_NEGATIVE_STRIDE, "slice: step %" PRId64 " on axis %d; use flip to reverse", step[i], i);
    st[i] = start[i] ? start[i] : fe_dim_int(A, 0);
    en[i] = end[i] ? end[i] : dim;
    bool known = fe_dim_is_int(dim, &dv);
    /* Negative literal bounds count from the end; known bounds clamp like numpy. */
    if (fe_dim_is_int(st[i], &sv) && sv < 0) st[i] = known ? fe_dim_int(A, sv + dv < 0 ? 0 : sv + dv) : fe_dim_add(A, dim, st[i]);
    if (fe_dim_is_int(en[i], &ev) && ev < 0) en[i] = known ? fe_dim_int(A, ev + dv < 0 ? 0 : ev + dv) : fe_dim_add(A, dim, en[i]);
    if (!D(g, st[i]) || !D(g, en[i])) return -1;
    if (known && fe_dim_is_int(st[i], &sv) && fe_dim_is_int(en[i], &ev)) {
      if (sv > dv) sv = dv;
      if (ev > dv) ev = dv;
      if (ev < sv) ev = sv;
      st[i] = fe_dim_int(A, sv);
      en[i] = fe_dim_int(A, ev);
    }
    const fe_dim *len = fe_dim_sub(A, en[i], st[i]);
    if (len && step[i] > 1) len = fe_dim_div(A, fe_dim_add(A, len, fe_dim_int(A, step[i] - 1)), step[i]);
    if (!(s.d[i] = D(g, len))) return -1;
    int64_t lv;
    if (fe_dim_is_int(len, &lv) && lv < 0) return fe_failv(g, HARP_E_INVALID_ARG, "slice: end before start on axis %d", i);
  }
  fe_node *n;
  hg_val v = fe_finish(g, HG_OP_SLICE, &xv, 1, x->dtype, &s, &n);
  if (v > 0) {
    n->a.slice.n = r;
    for (int i = 0; i < r; i++) n->a.slice.start[i] = st[i], n->a.slice.end[i] = en[i], n->a.slice.step[i] = step[i];
  }
  return v;
}

hg_val hg_slice(hg_graph *g, hg_val xv, int n, const int *axes, const int64_t *starts, const int64_t *ends,
                const int64_t *steps) {
  if (!g || g->err.code) return -1;
  const fe_node *x = fe_operand(g, xv, "slice");
  if (!x) return -1;
  int r = x->shape.rank;
  if (n < 0 || n > r) return fe_failv(g, HARP_E_INVALID_ARG, "slice: %d axes for rank %d", n, r);
  const fe_dim *st[TINY_MAX_RANK] = {0}, *en[TINY_MAX_RANK] = {0};
  int64_t sp[TINY_MAX_RANK];
  bool seen[TINY_MAX_RANK] = {0};
  for (int i = 0; i < r; i++) sp[i] = 1;
  for (int i = 0; i < n; i++) {
    int a = fe_norm_axis(g, axes ? axes[i] : i, r);
    if (a < 0) return -1;
    if (seen[a]) return fe_failv(g, HARP_E_INVALID_ARG, "slice: axis %d is listed twice", a);
    seen[a] = true;
    if (starts[i] > TINY_MAX_DIM || starts[i] < -TINY_MAX_DIM || (ends[i] != INT64_MAX && (ends[i] > TINY_MAX_DIM || ends[i] < -TINY_MAX_DIM)))
      return fe_failv(g, HARP_E_LIMIT, "slice: bound beyond 2^40");
    st[a] = fe_dim_int(g->prog->arena, starts[i]);
    en[a] = ends[i] == INT64_MAX ? NULL : fe_dim_int(g->prog->arena, ends[i]);
    sp[a] = steps ? steps[i] : 1;
  }
  return fe_slice(g, xv, st, en, sp);
}

hg_val hg_flip(hg_graph *g, hg_val xv, const int *axes, int n) {
  if (!g || g->err.code) return -1;
  const fe_node *x = fe_operand(g, xv, "flip");
  if (!x) return -1;
  int r = x->shape.rank;
  if (n < 1 || n > r) return fe_failv(g, HARP_E_INVALID_ARG, "flip: %d axes for rank %d", n, r);
  bool seen[TINY_MAX_RANK] = {0};
  int ax[TINY_MAX_RANK];
  for (int i = 0; i < n; i++) {
    int a = fe_norm_axis(g, axes[i], r);
    if (a < 0) return -1;
    if (seen[a]) return fe_failv(g, HARP_E_INVALID_ARG, "flip: axis %d is listed twice", a);
    seen[a] = true;
    ax[i] = a;
  }
  fe_shape s = x->shape;
  fe_node *nd;
  hg_val v = fe_finish(g, HG_OP_FLIP, &xv, 1, x->dtype, &s, &nd);
  if (v > 0) {
    nd->a.perm.n = n;
    memcpy(nd->a.perm.v, ax, sizeof(int) * (size_t)n);
  }
  return v;
}

hg_val hg_concat(hg_graph *g, const hg_val *xs, int n, int axis) {
  if (!g || g->err.code) return -1;
  if (n < 1) return fe_failv(g, HARP_E_ARITY, "concat needs at least one tensor");
  const fe_node *x0 = fe_operand(g, xs[0], "concat");
  if (!x0) return -1;
  if (x0->weak) return fe_failv(g, HARP_E_INVALID_ARG, "concat of a literal");
  int r = x0->shape.rank;
  int a = fe_norm_axis(g, axis, r);
  if (a < 0) return -1;
  fe_shape s = x0->shape;
  for (int i = 1; i < n; i++) {
    const fe_node *x = fe_operand(g, xs[i], "concat");
    if (!x) return -1;
    if (x->weak || x->dtype != x0->dtype)
      return fe_failv(g, HARP_E_DTYPE_MISMATCH, "concat: tensor %d is %s, tensor 1 is %s", i + 1,
                      x->weak ? "a literal" : tiny_dtype_name(x->dtype), tiny_dtype_name(x0->dtype));
    if (x->shape.rank != r) return fe_failv(g, HARP_E_AXIS_SIZE_MISMATCH, "concat: tensor %d has rank %d, not %d", i + 1, x->shape.rank, r);
    for (int d = 0; d < r; d++)
      if (d != a && !fe_same_dim(g, x->shape.d[d], x0->shape.d[d], "concat: a non-concatenated axis")) return -1;
    if (!(s.d[a] = D(g, fe_dim_add(g->prog->arena, s.d[a], x->shape.d[a])))) return -1;
  }
  fe_node *nd;
  hg_val v = fe_finish(g, HG_OP_CONCAT, xs, n, x0->dtype, &s, &nd);
  if (v > 0) nd->a.axis.axis = a;
  return v;
}

hg_val hg_cast(hg_graph *g, hg_val xv, tiny_dtype to) {
  if (!g || g->err.code) return -1;
  const fe_node *x = fe_operand(g, xv, "cast");
  if (!x) return -1;
  if ((unsigned)to >= TINY_DTYPE_COUNT) return fe_failv(g, HARP_E_INVALID_ARG, "cast: unknown dtype");
  fe_shape s = x->shape;
  fe_node *n;
  hg_val v = fe_finish(g, HG_OP_CAST, &xv, 1, to, &s, &n);
  if (v > 0) n->a.cast.to = to;
  return v;
}

hg_val hg_gather(hg_graph *g, hg_val xv, hg_val iv, int axis) {
  if (!g || g->err.code) return -1;
  const fe_node *x = fe_operand(g, xv, "gather"), *ix = x ? fe_operand(g, iv, "gather") : NULL;
  if (!ix) return -1;
  if (x->weak) return fe_failv(g, HARP_E_INVALID_ARG, "gather from a literal");
  if (ix->weak || ix->dtype != TINY_I32)
    return fe_failv(g, HARP_E_DTYPE_MISMATCH, "gather: the index must be i32, got %s", ix->weak ? "a literal" : tiny_dtype_name(ix->dtype));
  if (ix->shape.rank != x->shape.rank)
    return fe_failv(g, HARP_E_INVALID_ARG, "gather: the index has rank %d, the input %d", ix->shape.rank, x->shape.rank);
  int a = fe_norm_axis(g, axis, x->shape.rank);
  if (a < 0) return -1;
  for (int d = 0; d < x->shape.rank; d++) {
    int64_t vi, vx;
    if (d != a && fe_dim_is_int(ix->shape.d[d], &vi) && fe_dim_is_int(x->shape.d[d], &vx) && vi > vx)
      return fe_failv(g, HARP_E_AXIS_SIZE_MISMATCH, "gather: index axis %d (%" PRId64 ") exceeds the input's (%" PRId64 ")", d, vi, vx);
  }
  fe_shape s = ix->shape;
  hg_val in[2] = {xv, iv};
  fe_node *n;
  hg_val v = fe_finish(g, HG_OP_GATHER, in, 2, x->dtype, &s, &n);
  if (v > 0) n->a.axis.axis = a;
  return v;
}

/* ---- subgraph calls ------------------------------------------------------------------ */
typedef struct binding {
  const hg_graph *callee;
  const fe_dim **bind;
} binding;

static const fe_dim *bind_lookup(void *ctx, const char *name) {
  binding *b = ctx;
  int k = fe_shape_var_index(b->callee, name);
  return k >= 0 ? b->bind[k] : NULL;
}

hg_val hg_call(hg_graph *g, hg_graph *callee, const hg_val *args, int nargs, hg_val *outs, int nouts) {
  if (!g || g->err.code) return -1;
  if (!callee || callee->prog != g->prog) return fe_failv(g, HARP_E_INVALID_ARG, "call: the callee is not a graph of this program");
  if (nargs != callee->nparams)
    return fe_failv(g, HARP_E_ARITY, "%s takes %d argument%s, got %d", callee->name, callee->nparams,
                    callee->nparams == 1 ? "" : "s", nargs);
  if (callee->nout < 1) return fe_failv(g, HARP_E_INVALID_ARG, "%s declares no outputs", callee->name);
  ut_arena *A = g->prog->arena;
  const fe_dim **bind = ut_arena_alloc(A, sizeof *bind * (size_t)(callee->nsv + 1));
  if (!bind) return fe_failv(g, HARP_E_NO_MEMORY, "out of memory");
  for (int i = 0; i < nargs; i++) {
    const fe_node *a = fe_operand(g, args[i], callee->name);
    if (!a) return -1;
    const fe_node *p = fe_node_of(callee, callee->params[i]);
    if (a->weak ? !(p->shape.rank == 0 && tiny_dtype_is_float(p->dtype)) : a->dtype != p->dtype)
      return fe_failv(g, HARP_E_DTYPE_MISMATCH, "%s: argument %d (%s) is %s, the parameter is %s", callee->name, i + 1,
                      p->name, a->weak ? "a literal" : tiny_dtype_name(a->dtype), tiny_dtype_name(p->dtype));
    char sa[256], sp[256];
    fe_shape_text(&a->shape, sa, sizeof sa);
    fe_shape_text(&p->shape, sp, sizeof sp);
    if (a->shape.rank != p->shape.rank)
      return fe_failv(g, HARP_E_AXIS_SIZE_MISMATCH, "%s: argument %d (%s) has shape %s, the parameter %s", callee->name,
                      i + 1, p->name, sa, sp);
    for (int d = 0; d < p->shape.rank; d++) {
      const char *sym = fe_dim_is_sym(p->shape.d[d]);
      int k = sym ? fe_shape_var_index(callee, sym) : -1;
      const fe_dim *want = k >= 0 ? bind[k] : p->shape.d[d];
      if (k >= 0 && !want) {
        bind[k] = a->shape.d[d];
        continue;
      }
      if (fe_dim_cmp(want, a->shape.d[d]) == FE_DIFF)
        return fe_failv(g, HARP_E_AXIS_SIZE_MISMATCH, "%s: argument %d (%s) has shape %s, the parameter %s%s%s%s",
                        callee->name, i + 1, p->name, sa, sp, sym ? " (" : "", sym ? sym : "",
                        sym ? " is bound already)" : "");
    }
  }
  for (int k = 0; k < callee->nsv; k++) {
    if (bind[k]) continue;
    if (callee->sv[k].dflt < 0)
      return fe_failv(g, HARP_E_UNBOUND_SYMBOL, "%s: shape variable %s is not bound by the arguments and has no default",
                      callee->name, callee->sv[k].name);
    if (!(bind[k] = D(g, fe_dim_int(A, callee->sv[k].dflt)))) return -1;
  }
  fe_node *cn = fe_new_node(g, HG_OP_CALL, args, nargs);
  if (!cn) return -1;
  cn->a.call.callee = callee;
  cn->a.call.nout = callee->nout;
  cn->a.call.bind = bind;
  hg_val cv = fe_val_of(g, cn), first = -1;
  binding b = {callee, bind};
  for (int k = 0; k < callee->nout; k++) {
    const fe_output *o = &callee->outs[k];
    fe_shape s = {0};
    s.rank = o->shape.rank;
    for (int d = 0; d < s.rank; d++)
      if (!(s.d[d] = D(g, fe_dim_subst(A, o->shape.d[d], bind_lookup, &b)))) return -1;
    fe_node *pn;
    hg_val pv = fe_finish(g, HG_OP_PROJ, &cv, 1, o->dtype, &s, &pn);
    if (pv < 0) return -1;
    pn->a.proj.k = k;
    if (k == 0) first = pv;
    if (outs && k < nouts) outs[k] = pv;
  }
  return first;
}
