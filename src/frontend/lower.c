/* lower.c — frontend -> Tiny IR (seed 000 §2).
 * Needs: inline.c (fe_flatten), lower_nn.c.  Gives: hg_lower,
 * hg_lower_bound, and the emission helpers of fe_lower.h.
 *
 * main (calls expanded) is lowered op by op in graph order: parameters
 * become INPUT nodes (tensor_id = the parameter's name), elementwise ops
 * their Tiny equivalents (sigmoid, tanh, silu, log, abs and the <=, >=
 * comparisons as short compositions), reductions REDUCE (+ CAST back from
 * the fp32 accumulator), movement the Tiny movement ops (concat as PAD +
 * ADD).  Shapes keep the DSL's symbols.  A final pass renames the nodes:
 * each output's node takes the output's name (or an identity CAST does,
 * when the value is a parameter or already an earlier output; a literal
 * output is always one). */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fe_lower.h"

/* ---- emission --------------------------------------------------------------- */
harp_status lw_unsupported(lw *L, const char *fmt, ...) {
  char msg[900];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return fe_fail_node(L->e, L->fp, L->cur, HARP_E_UNSUPPORTED, "%s", msg);
}

int lw_emit(lw *L, tiny_op op, const tiny_src *src, int nsrc, const void *arg) {
  if (L->e->code) return -1;
  for (int i = 0; i < nsrc; i++)
    if (src[i].node < -1) return -1; /* an operand failed (reported) */
  char id[32];
  snprintf(id, sizeof id, "~%d", L->seq++);
  int k = tiny_add(L->t, id, op, src, nsrc, arg);
  if (k < 0) {
    harp_status code = L->t->err.code == HARP_E_NO_MEMORY || L->t->err.code == HARP_E_LIMIT ? L->t->err.code : HARP_E_INTERNAL;
    fe_fail_node(L->e, L->fp, L->cur, code, "lowering %s: %s", L->cur ? hg_op_name(L->cur->op) : "?", L->t->err.msg);
    return -1;
  }
  if (k >= L->cap_owner) {
    int cap = L->cap_owner ? L->cap_owner * 2 : 256;
    while (cap <= k) cap *= 2;
    int *o = ut_xrealloc(L->owner, sizeof *o * (size_t)cap);
    if (!o) {
      ut_fail(L->e, HARP_E_NO_MEMORY, NULL, "out of memory");
      return -1;
    }
    L->owner = o;
    L->cap_owner = cap;
  }
  L->owner[k] = L->cur ? fe_val_of(L->g, L->cur) : 0;
  return k;
}

static tiny_src S(int node) { return (tiny_src){node < 0 ? -2 : node, 0}; }

int lw_un(lw *L, tiny_op op, int x) {
  tiny_src s[1] = {S(x)};
  return lw_emit(L, op, s, 1, NULL);
}
int lw_bin(lw *L, tiny_op op, int a, int b) {
  tiny_src s[2] = {S(a), S(b)};
  return lw_emit(L, op, s, 2, NULL);
}
int lw_bin_imm(lw *L, tiny_op op, int a, double imm) {
  tiny_src s[2] = {S(a), {-1, imm}};
  return lw_emit(L, op, s, 2, NULL);
}
int lw_imm_bin(lw *L, tiny_op op, double imm, int b) {
  tiny_src s[2] = {{-1, imm}, S(b)};
  return lw_emit(L, op, s, 2, NULL);
}
int lw_cast(lw *L, int x, tiny_dtype to) {
  tiny_arg_cast a = {to};
  tiny_src s[1] = {S(x)};
  return lw_emit(L, TINY_CAST, s, 1, &a);
}
int lw_cast_if(lw *L, int x, tiny_dtype from, tiny_dtype to) { return from == to ? x : lw_cast(L, x, to); }

int lw_reduce(lw *L, int x, tiny_reduce_op op, const int *axes, int n, tiny_dtype acc) {
  tiny_arg_reduce a = {0};
  a.op = op;
  a.n = n;
  for (int i = 0; i < n; i++) a.axes[i] = tiny_dim_int(axes[i]);
  a.has_dtype = true;
  a.dtype = acc;
  tiny_src s[1] = {S(x)};
  return lw_emit(L, TINY_REDUCE, s, 1, &a);
}

int lw_permute(lw *L, int x, const int *perm, int n) {
  tiny_arg_permute a = {0};
  a.n = n;
  memcpy(a.perm, perm, sizeof(int) * (size_t)n);
  tiny_src s[1] = {S(x)};
  return lw_emit(L, TINY_PERMUTE, s, 1, &a);
}

int lw_const(lw *L, double v, tiny_dtype dt) {
  tiny_arg_const a = {v, dt};
  return lw_emit(L, TINY_CONST, NULL, 0, &a);
}

/* ---- dims and shapes ----------------------------------------------------------- */
bool lw_can_dim(const lw *L, const fe_dim *d) {
  int64_t v;
  return fe_dim_is_int(d, NULL) || fe_dim_is_sym(d) || (L->bind && fe_dim_eval(d, L->bind, &v)) || (d && L->derive);
}

/* Whether a shape symbol of L's graph so far (an INPUT's dim) is named name. */
static bool input_sym(const lw *L, const char *name) {
  for (int i = 0; i < L->t->n; i++) {
    const tiny_node *n = &L->t->nodes[i];
    for (int d = 0; n->op == TINY_INPUT && d < n->a.input.shape.rank; d++)
      if (n->a.input.shape.d[d].sym && !strcmp(n->a.input.shape.d[d].sym, name)) return true;
  }
  return false;
}

/* d, an expression of symbols, as a derived symbol of L's graph (the same
 * expression, the same symbol) into *out; false when its text does not fit
 * (nothing reported) or on an error (reported). */
static bool lw_derive(lw *L, const fe_dim *d, tiny_dim *out) {
  char def[1024], mine[1024], theirs[1024], base[80], name[96];
  if (!fe_dim_tiny_text(d, def, sizeof def)) return false;
  harp_error e;
  harp_error_clear(&e);
  const tiny_expr *x = NULL;
  if (tiny_expr_parse(&e, L->t, def, 0, &x)) {
    fe_fail_node(L->e, L->fp, L->cur, e.code, "dimension %s: %s", d->text, e.msg);
    return false;
  }
  tiny_expr_print(x, mine, sizeof mine);
  tiny_dsym_name(d->text, base, sizeof base);
  snprintf(name, sizeof name, "%s", base);
  for (int k = 2; k < 1000; k++) { /* a clash with another definition or an input's symbol: the next suffix */
    int at = tiny_dsym_find(L->t, name);
    if (at >= 0) tiny_expr_print(L->t->dsyms[at].def, theirs, sizeof theirs);
    if (at >= 0 ? !strcmp(mine, theirs) : !input_sym(L, name)) break;
    snprintf(name, sizeof name, "%s_%d", base, k);
  }
  int k = tiny_dsym_add(L->t, name, mine);
  if (k < 0) {
    fe_fail_node(L->e, L->fp, L->cur, L->t->err.code, "dimension %s: %s", d->text, L->t->err.msg);
    return false;
  }
  *out = tiny_dim_sym(L->t->dsyms[k].name);
  return true;
}

bool lw_dim(lw *L, const fe_dim *d, tiny_dim *out) {
  int64_t v;
  const char *sym;
  if (!d) { /* a dim whose allocation failed (fe_dim_int and kin give NULL) */
    ut_fail(L->e, HARP_E_NO_MEMORY, NULL, "out of memory");
    return false;
  }
  if (fe_dim_is_int(d, &v)) {
    *out = tiny_dim_int(v);
    return true;
  }
  if ((sym = fe_dim_is_sym(d))) {
    *out = tiny_dim_sym(sym);
    return true;
  }
  if (L->bind && fe_dim_eval(d, L->bind, &v)) {
    if (v < 0 || v > TINY_MAX_DIM) {
      fe_fail_node(L->e, L->fp, L->cur, HARP_E_AXIS_SIZE_MISMATCH, "dimension %s is %" PRId64 " under the given bindings",
                   d->text, v);
      return false;
    }
    *out = tiny_dim_int(v);
    return true;
  }
  if (L->derive) {
    if (lw_derive(L, d, out)) return true;
    if (L->e->code) return false;
  }
  lw_unsupported(L, "%s: dimension %s is an expression of shape variables, which a Tiny IR arg cannot hold; "
                    "bind its symbols (--sym) or reshape so that it stays one variable",
                 L->cur ? hg_op_name(L->cur->op) : "lowering", d->text);
  return false;
}

bool lw_can_shape(const lw *L, const fe_shape *s) {
  for (int i = 0; i < s->rank; i++)
    if (!lw_can_dim(L, s->d[i])) return false;
  return true;
}

bool lw_shape(lw *L, const fe_shape *s, tiny_shape *out) {
  memset(out, 0, sizeof *out);
  out->rank = s->rank;
  for (int i = 0; i < s->rank; i++)
    if (!lw_dim(L, s->d[i], &out->d[i])) return false;
  return true;
}

bool lw_same_shape(const fe_shape *a, const fe_shape *b) {
  if (a->rank != b->rank) return false;
  for (int i = 0; i < a->rank; i++)
    if (strcmp(a->d[i]->text, b->d[i]->text) != 0) return false;
  return true;
}

int lw_reshape(lw *L, int x, const fe_shape *s) {
  tiny_arg_reshape a;
  if (x < 0 || !lw_shape(L, s, &a.shape)) return -1;
  tiny_src src[1] = {S(x)};
  return lw_emit(L, TINY_RESHAPE, src, 1, &a);
}

int lw_fit(lw *L, int x, const fe_shape *xs, const fe_shape *to) {
  if (x < 0) return -1;
  if (lw_same_shape(xs, to)) return x;
  fe_shape mid = *xs;
  if (xs->rank < to->rank) {
    mid.rank = to->rank;
    int pad = to->rank - xs->rank;
    for (int i = to->rank - 1; i >= 0; i--) mid.d[i] = i >= pad ? xs->d[i - pad] : fe_dim_int(L->fp->arena, 1);
    for (int i = 0; i < pad; i++)
      if (!mid.d[i]) return ut_fail(L->e, HARP_E_NO_MEMORY, NULL, "out of memory"), -1;
    if (!lw_can_shape(L, &mid)) return x; /* Tiny inserts the leading axes itself */
    if ((x = lw_reshape(L, x, &mid)) < 0) return -1;
  }
  bool need = false;
  for (int i = 0; i < to->rank; i++) need |= fe_dim_is_one(mid.d[i]) && !fe_dim_is_one(to->d[i]);
  if (!need || !lw_can_shape(L, to)) return x;
  tiny_arg_expand a = {0};
  if (!lw_shape(L, to, &a.shape)) return -1;
  tiny_src src[1] = {S(x)};
  return lw_emit(L, TINY_EXPAND, src, 1, &a);
}

int lw_count(lw *L, const fe_dim *const *dims, int n) {
  int64_t prod = 1, v;
  bool known = true;
  for (int i = 0; i < n && known; i++) {
    known = fe_dim_is_int(dims[i], &v) || (L->bind && fe_dim_eval(dims[i], L->bind, &v));
    if (known && !ut_mul_ok(prod, v, &prod)) known = false;
  }
  if (known) return lw_const(L, (double)prod, TINY_FP32);
  /* sum of ones over the symbolic extent */
  fe_shape ones = {0}, full = {0};
  ones.rank = full.rank = n;
  int axes[TINY_MAX_RANK];
  for (int i = 0; i < n; i++) {
    ones.d[i] = fe_dim_int(L->fp->arena, 1);
    full.d[i] = dims[i];
    axes[i] = i;
  }
  int c = lw_const(L, 1.0, TINY_FP32);
  c = lw_fit(L, lw_reshape(L, c, &ones), &ones, &full);
  if (c >= 0 && !lw_can_shape(L, &full)) {
    tiny_shape ts;
    lw_shape(L, &full, &ts); /* reports the dim */
    return -1;
  }
  return lw_reduce(L, c, TINY_RSUM, axes, n, TINY_FP32);
}

void lw_keep1(lw *L, const fe_shape *s, const int *axes, int n, fe_shape *out) {
  *out = *s;
  for (int i = 0; i < n; i++) out->d[axes[i]] = fe_dim_int(L->fp->arena, 1);
}

void lw_drop(const fe_shape *s, const int *axes, int n, fe_shape *out) {
  memset(out, 0, sizeof *out);
  for (int i = 0, k = 0; i < s->rank; i++) {
    if (k < n && axes[k] == i) {
      k++;
      continue;
    }
    out->d[out->rank++] = s->d[i];
  }
}

void lw_note_split(lw *L, int node, const fe_shape *s, const fe_shape *merged) {
  int rm = merged->rank, r = s->rank - rm + 1;
  if (node < 0 || rm < 1 || r < 2 || !lw_can_shape(L, s)) return;
  for (int i = 0; i < rm - 1; i++)
    if (strcmp(s->d[i]->text, merged->d[i]->text) != 0) return;
  const fe_dim *k = fe_dim_int(L->fp->arena, 1);
  for (int i = rm - 1; i < s->rank; i++) k = fe_dim_mul(L->fp->arena, k, s->d[i]);
  if (!k || strcmp(k->text, merged->d[rm - 1]->text) != 0) return;
  lw_split *sp = &L->split[fe_val_of(L->g, L->cur)];
  sp->node = node;
  sp->shape = *s;
  sp->r = r;
}

/* ---- operands ---------------------------------------------------------------------- */
const fe_node *lw_in(const lw *L, int i) { return fe_node_of(L->g, L->cur->in[i]); }

int lw_tin(lw *L, int i, tiny_dtype dt) {
  hg_val v = L->cur->in[i];
  if (v <= 0) return -1;
  if (L->tn[v] >= 0) return L->tn[v];
  const fe_node *n = fe_node_of(L->g, v);
  if (n->op == HG_OP_CONST && n->weak) return lw_const(L, n->a.cnst.v, dt); /* per use: it takes the user's dtype */
  return fe_fail_node(L->e, L->fp, L->cur, HARP_E_INTERNAL, "operand %d was not lowered", i), -1;
}

/* Operand i as a source of an elementwise op with result shape `to`. */
static tiny_src operand(lw *L, int i, const fe_shape *to, tiny_dtype dt) {
  const fe_node *n = lw_in(L, i);
  if (n->op == HG_OP_CONST && n->weak) return (tiny_src){-1, n->a.cnst.v};
  return S(lw_fit(L, lw_tin(L, i, dt), &n->shape, to));
}

/* t (of dtype dt), or a copy of it (t + 0; != 0 for bool) when t is a view (a movement
 * node): the backends' gather reads its operands from buffers of their own. */
static int lw_buffer(lw *L, int t, tiny_dtype dt) {
  if (t < 0 || tiny_op_class(L->t->nodes[t].op) != TC_MOVE) return t;
  if (dt == TINY_BOOL) return lw_bin(L, TINY_CMPNE, t, lw_const(L, 0, TINY_BOOL));
  return lw_bin_imm(L, TINY_ADD, t, 0.0);
}

/* ---- elementwise ---------------------------------------------------------------------- */
/* tanh(x) = (ta + tb) / (1 + ta tb) with x = a + b, a = clamp(x, -1/4, 1/4):
 * ta = tanh(a) by its series (relative error ~1e-8), tb = tanh(b) as
 * 1 - 2 / (2^(2b log2 e) + 1), which saturates to +-1 without inf/inf but
 * is only absolutely accurate (1 - ... cancels near 0): b is 0 wherever
 * |x| <= 1/4, so small x keep their relative precision (x * tanh(tiny) in
 * Mish).  Elementwise ops only (no select), so the CPU map still runs it. */
static int lower_tanh(lw *L, int x) {
  int a = lw_bin_imm(L, TINY_MIN, lw_bin_imm(L, TINY_MAX, x, -0.25), 0.25), b = lw_bin(L, TINY_SUB, x, a);
  /* a (1 + s (-1/3 + s (2/15 + s (-17/315 + s 62/2835)))), s = a^2 */
  int s = lw_bin(L, TINY_MUL, a, a), p = lw_bin_imm(L, TINY_MUL, s, 62.0 / 2835);
  static const double coef[] = {-17.0 / 315, 2.0 / 15, -1.0 / 3};
  for (int i = 0; i < 3; i++) p = lw_bin(L, TINY_MUL, lw_bin_imm(L, TINY_ADD, p, coef[i]), s);
  int ta = lw_bin(L, TINY_MUL, a, lw_bin_imm(L, TINY_ADD, p, 1.0));
  int e = lw_bin_imm(L, TINY_ADD, lw_un(L, TINY_EXP2, lw_bin_imm(L, TINY_MUL, b, 2.0 * LOG2E)), 1.0);
  int tb = lw_imm_bin(L, TINY_SUB, 1.0, lw_imm_bin(L, TINY_FDIV, 2.0, e));
  return lw_bin(L, TINY_FDIV, lw_bin(L, TINY_ADD, ta, tb), lw_bin_imm(L, TINY_ADD, lw_bin(L, TINY_MUL, ta, tb), 1.0));
}

static int lower_unary(lw *L, const fe_node *n) {
  int x = lw_tin(L, 0, n->dtype), t;
  switch (n->op) {
  case HG_OP_RELU: return lw_un(L, TINY_RELU, x);
  case HG_OP_GELU: return lw_un(L, TINY_GELU, x);
  case HG_OP_EXP: return lw_un(L, TINY_EXP, x);
  case HG_OP_NEG: return lw_un(L, TINY_NEG, x);
  case HG_OP_SQRT: return lw_un(L, TINY_SQRT, x);
  case HG_OP_RSQRT: return lw_un(L, TINY_RSQRT, x);
  case HG_OP_RECIP: return lw_un(L, TINY_RECIP, x);
  case HG_OP_FLOOR: return lw_un(L, TINY_FLOOR, x);
  case HG_OP_CEIL: return lw_un(L, TINY_CEIL, x);
  case HG_OP_ROUND: return lw_un(L, TINY_ROUND, x);
  case HG_OP_LOG: return lw_bin_imm(L, TINY_MUL, lw_un(L, TINY_LOG2, x), LN2);
  case HG_OP_ABS: return lw_bin(L, TINY_MAX, x, lw_un(L, TINY_NEG, x));
  case HG_OP_SIGMOID:
  case HG_OP_SILU:
    /* 1 / (1 + 2^(-x log2 e)) */
    t = lw_un(L, TINY_RECIP, lw_bin_imm(L, TINY_ADD, lw_un(L, TINY_EXP2, lw_bin_imm(L, TINY_MUL, x, -LOG2E)), 1.0));
    return n->op == HG_OP_SILU ? lw_bin(L, TINY_MUL, x, t) : t;
  case HG_OP_TANH: return lower_tanh(L, x);
  default: return fe_fail_node(L->e, L->fp, n, HARP_E_INTERNAL, "no lowering for %s", hg_op_name(n->op)), -1;
  }
}

static int lower_binary(lw *L, const fe_node *n) {
  const fe_node *a = lw_in(L, 0), *b = lw_in(L, 1);
  tiny_dtype dt = a->weak ? b->dtype : a->dtype; /* the operands' dtype (n->dtype is bool for comparisons) */
  tiny_src x = operand(L, 0, &n->shape, dt), y = operand(L, 1, &n->shape, dt);
  tiny_src xy[2] = {x, y}, yx[2] = {y, x};
  static const tiny_op direct[] = {[HG_OP_ADD] = TINY_ADD, [HG_OP_SUB] = TINY_SUB, [HG_OP_MUL] = TINY_MUL,
                                   [HG_OP_DIV] = TINY_FDIV, [HG_OP_MAX] = TINY_MAX, [HG_OP_MIN] = TINY_MIN,
                                   [HG_OP_EQ] = TINY_CMPEQ, [HG_OP_NE] = TINY_CMPNE, [HG_OP_LT] = TINY_CMPLT};
  switch (n->op) {
  case HG_OP_ADD: case HG_OP_SUB: case HG_OP_MUL: case HG_OP_DIV: case HG_OP_MAX: case HG_OP_MIN:
  case HG_OP_EQ: case HG_OP_NE: case HG_OP_LT:
    return lw_emit(L, direct[n->op], xy, 2, NULL);
  case HG_OP_GT: return lw_emit(L, TINY_CMPLT, yx, 2, NULL);
  case HG_OP_LE:
  case HG_OP_GE: {
    /* a <= b is (a < b) or (a == b): false when either is NaN, like numpy */
    int lt = lw_emit(L, TINY_CMPLT, n->op == HG_OP_LE ? xy : yx, 2, NULL);
    int eq = lw_emit(L, TINY_CMPEQ, xy, 2, NULL);
    return lw_bin(L, TINY_MAX, lt, eq);
  }
  default: return fe_fail_node(L->e, L->fp, n, HARP_E_INTERNAL, "no lowering for %s", hg_op_name(n->op)), -1;
  }
}

/* muladd(a, b, c): one MULADD of the operands in n's dtype and shape. */
static int lower_muladd(lw *L, const fe_node *n) {
  tiny_src s[3];
  for (int k = 0; k < 3; k++) s[k] = operand(L, k, &n->shape, n->dtype);
  return lw_emit(L, TINY_MULADD, s, 3, NULL);
}

static int lower_where(lw *L, const fe_node *n) {
  tiny_src s[3];
  s[0] = S(lw_fit(L, lw_tin(L, 0, TINY_BOOL), &lw_in(L, 0)->shape, &n->shape));
  bool both_weak = lw_in(L, 1)->weak && lw_in(L, 2)->weak;
  s[1] = both_weak ? S(lw_fit(L, lw_tin(L, 1, n->dtype), &lw_in(L, 1)->shape, &n->shape)) : operand(L, 1, &n->shape, n->dtype);
  s[2] = operand(L, 2, &n->shape, n->dtype);
  return lw_emit(L, TINY_WHERE, s, 3, NULL);
}

/* ---- reductions ------------------------------------------------------------------------ */
static int lower_reduce(lw *L, const fe_node *n) {
  const fe_node *x = lw_in(L, 0);
  int r = lw_tin(L, 0, x->dtype);
  const int *axes = n->a.reduce.axes;
  int na = n->a.reduce.n;
  tiny_dtype dt = x->dtype, acc = dt;
  if (n->op == HG_OP_SUM || n->op == HG_OP_MEAN) acc = tiny_dtype_is_float(dt) ? TINY_FP32 : dt;
  tiny_reduce_op op = n->op == HG_OP_RMAX ? TINY_RMAX : n->op == HG_OP_RMIN ? TINY_RMIN : TINY_RSUM;
  r = lw_reduce(L, r, op, axes, na, acc);
  if (n->op == HG_OP_MEAN) {
    const fe_dim *dims[TINY_MAX_RANK];
    for (int i = 0; i < na; i++) dims[i] = x->shape.d[axes[i]];
    int64_t cnt;
    bool known = true;
    int64_t prod = 1;
    for (int i = 0; i < na && known; i++)
      known = (fe_dim_is_int(dims[i], &cnt) || (L->bind && fe_dim_eval(dims[i], L->bind, &cnt))) && ut_mul_ok(prod, cnt, &prod);
    r = known ? lw_bin_imm(L, TINY_MUL, r, 1.0 / (double)prod) : lw_bin(L, TINY_FDIV, r, lw_count(L, dims, na));
  }
  r = lw_cast_if(L, r, acc, dt);
  if (n->a.reduce.keepdim) r = lw_reshape(L, r, &n->shape);
  return r;
}

/* ---- movement -------------------------------------------------------------------------- */
static int lower_pad_axis(lw *L, int x, int rank, int axis, const fe_dim *lo, const fe_dim *hi, double value) {
  tiny_arg_pad a = {0};
  a.n = rank;
  a.value = value;
  for (int i = 0; i < rank; i++) a.lo[i] = a.hi[i] = tiny_dim_int(0);
  if (!lw_dim(L, lo, &a.lo[axis]) || !lw_dim(L, hi, &a.hi[axis])) return -1;
  tiny_src s[1] = {S(x)};
  return lw_emit(L, TINY_PAD, s, 1, &a);
}

/* Whether frontend value v is a fill of +0 (a scalar constant 0 through
 * reshapes and expands). */
static bool zero_fill(const lw *L, hg_val v) {
  for (int d = 0; v > 0 && d < 8; d++) {
    const fe_node *x = fe_node_of(L->g, v);
    if (x->op == HG_OP_CONST) return x->a.cnst.v == 0 && !signbit(x->a.cnst.v);
    if ((x->op != HG_OP_RESHAPE && x->op != HG_OP_EXPAND) || x->nin < 1) return false;
    v = x->in[0];
  }
  return false;
}

/* concat: each piece padded with zeros to the full extent, then summed
 * (OR for bool): no data moves, every piece stays a view.  A piece that is
 * a fill of +0 adds nothing (the others' pads are +0 there) and is left
 * out, unless all are: its PAD would start at the pieces before it, a size
 * a ShapeSet's loop nest could not read at run time (iota_sym's zeros). */
static int lower_concat(lw *L, const fe_node *n) {
  int ax = n->a.axis.axis, r = n->shape.rank;
  ut_arena *A = L->fp->arena;
  if (n->nin == 1) return lw_tin(L, 0, n->dtype);
  const fe_dim *before = fe_dim_int(A, 0), *total = n->shape.d[ax];
  int acc = -1, nzero = 0;
  for (int i = 0; i < n->nin; i++) nzero += zero_fill(L, n->in[i]);
  for (int i = 0; i < n->nin && !L->e->code; i++) {
    const fe_node *x = lw_in(L, i);
    const fe_dim *after = fe_dim_sub(A, fe_dim_sub(A, total, before), x->shape.d[ax]);
    if (!after) return ut_fail(L->e, HARP_E_LIMIT, NULL, "concat: extent too large"), -1;
    if (nzero < n->nin && zero_fill(L, n->in[i])) {
      before = fe_dim_add(A, before, x->shape.d[ax]);
      continue;
    }
    int p = lower_pad_axis(L, lw_tin(L, i, n->dtype), r, ax, before, after, 0.0);
    acc = acc < 0 ? p : lw_bin(L, n->dtype == TINY_BOOL ? TINY_MAX : TINY_ADD, acc, p);
    before = fe_dim_add(A, before, x->shape.d[ax]);
  }
  /* lowered for a ShapeSet (L->derive), a concat along an axis whose size
   * is an expression of symbols is reshaped to its own sizes: the PADs'
   * sum of sizes gets the importer's derived symbol, which the nests and
   * kernels after it read at run time (as named_windows does a pool's) */
  int64_t v;
  if (L->derive && acc >= 0 && !fe_dim_is_int(total, &v) && lw_can_shape(L, &n->shape)) acc = lw_reshape(L, acc, &n->shape);
  return acc;
}

static int lower_slice(lw *L, const fe_node *n) {
  const fe_node *x = lw_in(L, 0);
  int r = x->shape.rank;
  tiny_arg_shrink a = {0};
  a.n = r;
  bool identity = true;
  for (int i = 0; i < r; i++) {
    if (!lw_dim(L, n->a.slice.start[i], &a.lo[i]) || !lw_dim(L, n->a.slice.end[i], &a.hi[i])) return -1;
    a.step[i] = tiny_dim_int(n->a.slice.step[i]);
    a.has_step |= n->a.slice.step[i] != 1;
    int64_t s;
    identity &= fe_dim_is_int(n->a.slice.start[i], &s) && s == 0 && n->a.slice.step[i] == 1 &&
                strcmp(n->a.slice.end[i]->text, x->shape.d[i]->text) == 0;
  }
  int t = lw_tin(L, 0, x->dtype);
  if (identity) return t;
  tiny_src s[1] = {S(t)};
  return lw_emit(L, TINY_SHRINK, s, 1, &a);
}

static int lower_move(lw *L, const fe_node *n) {
  const fe_node *x = lw_in(L, 0);
  int t = lw_tin(L, 0, x->dtype);
  switch (n->op) {
  case HG_OP_RESHAPE:
    if (lw_same_shape(&x->shape, &n->shape)) return t;
    lw_note_split(L, t, &x->shape, &n->shape);
    return lw_reshape(L, t, &n->shape);
  case HG_OP_PERMUTE: return lw_permute(L, t, n->a.perm.v, n->a.perm.n);
  case HG_OP_EXPAND: {
    if (lw_same_shape(&x->shape, &n->shape)) return t;
    tiny_arg_expand a = {0};
    fe_shape mid = x->shape;
    if (x->shape.rank < n->shape.rank) { /* explicit rank first, like seed 001 */
      int pad = n->shape.rank - x->shape.rank;
      mid.rank = n->shape.rank;
      for (int i = mid.rank - 1; i >= 0; i--) mid.d[i] = i >= pad ? x->shape.d[i - pad] : fe_dim_int(L->fp->arena, 1);
      if (lw_can_shape(L, &mid)) t = lw_reshape(L, t, &mid);
    }
    if (!lw_shape(L, &n->shape, &a.shape)) return -1;
    tiny_src s[1] = {S(t)};
    return lw_emit(L, TINY_EXPAND, s, 1, &a);
  }
  case HG_OP_PAD: {
    tiny_arg_pad a = {0};
    a.n = n->a.pad.n;
    a.value = n->a.pad.value;
    for (int i = 0; i < a.n; i++) a.lo[i] = tiny_dim_int(n->a.pad.lo[i]), a.hi[i] = tiny_dim_int(n->a.pad.hi[i]);
    tiny_src s[1] = {S(t)};
    return lw_emit(L, TINY_PAD, s, 1, &a);
  }
  case HG_OP_FLIP: {
    tiny_arg_flip a = {0};
    a.n = n->a.perm.n;
    memcpy(a.axes, n->a.perm.v, sizeof(int) * (size_t)a.n);
    tiny_src s[1] = {S(t)};
    return lw_emit(L, TINY_FLIP, s, 1, &a);
  }
  case HG_OP_CAST: return lw_cast(L, t, n->a.cast.to);
  case HG_OP_GATHER: {
    tiny_arg_gather a = {n->a.axis.axis};
    tiny_src s[2] = {S(lw_buffer(L, t, n->dtype)), S(lw_buffer(L, lw_tin(L, 1, TINY_I32), TINY_I32))};
    return lw_emit(L, TINY_GATHER, s, 2, &a);
  }
  default: return fe_fail_node(L->e, L->fp, n, HARP_E_INTERNAL, "no lowering for %s", hg_op_name(n->op)), -1;
  }
}

static int lower_node(lw *L, const fe_node *n) {
  switch (n->op) {
  case HG_OP_CONST:
    if (n->weak) return -3; /* becomes an immediate or a CONST where used */
    return lw_const(L, n->a.cnst.v, n->dtype);
  case HG_OP_WHERE: return lower_where(L, n);
  case HG_OP_MULADD: return lower_muladd(L, n);
  case HG_OP_SUM: case HG_OP_RMAX: case HG_OP_RMIN: case HG_OP_MEAN: return lower_reduce(L, n);
  case HG_OP_MATMUL: return lw_matmul(L);
  case HG_OP_CONV2D: return lw_conv2d(L);
  case HG_OP_ATTENTION: return lw_attention(L);
  case HG_OP_LAYERNORM: return lw_layernorm(L);
  case HG_OP_SOFTMAX: return lw_softmax(L);
  case HG_OP_MAX_POOL2D: case HG_OP_AVG_POOL2D: return lw_pool2d(L);
  case HG_OP_CONCAT: return lower_concat(L, n);
  case HG_OP_SLICE: return lower_slice(L, n);
  case HG_OP_RESHAPE: case HG_OP_PERMUTE: case HG_OP_EXPAND: case HG_OP_PAD: case HG_OP_FLIP: case HG_OP_CAST:
  case HG_OP_GATHER:
    return lower_move(L, n);
  default: break;
  }
  switch (hg_op_class_of(n->op)) {
  case HG_C_UNARY: return lower_unary(L, n);
  case HG_C_BINARY:
  case HG_C_COMPARE: return lower_binary(L, n);
  default: return fe_fail_node(L->e, L->fp, n, HARP_E_INTERNAL, "no lowering for %s", hg_op_name(n->op)), -1;
  }
}

/* ---- naming ---------------------------------------------------------------------------- */
typedef struct namer {
  tiny_graph *t;        /* the renamed copy */
  const char **resv;    /* output names, kept for their nodes */
  int nresv;
  char buf[300];
} namer;

static bool name_free(namer *N, const char *s, const char *mine) {
  if (tiny_find(N->t, s) >= 0) return false;
  for (int i = 0; i < N->nresv; i++)
    if (strcmp(N->resv[i], s) == 0 && !(mine && strcmp(mine, s) == 0)) return false;
  return true;
}

static const char *unique(namer *N, const char *base) {
  snprintf(N->buf, sizeof N->buf, "%.200s", base);
  for (int k = 2; !name_free(N, N->buf, NULL) && k < 1000000; k++) snprintf(N->buf, sizeof N->buf, "%.200s.%d", base, k);
  return N->buf;
}

static const char *lower_name(const char *s, char *b, int cap) {
  int i = 0;
  for (; s[i] && i < cap - 1; i++) b[i] = (char)(s[i] >= 'A' && s[i] <= 'Z' ? s[i] - 'A' + 'a' : s[i]);
  b[i] = 0;
  return b;
}

/* Copy L->t into a graph with readable ids and mark the outputs. */
static harp_status rename_and_finish(lw *L, tiny_graph **out) {
  const hg_graph *g = L->g;
  int n = L->t->n;
  const char **final = ut_xcalloc((size_t)n + 1, sizeof *final); /* node -> name of the value it is */
  bool *is_out = ut_xcalloc((size_t)n + 1, sizeof *is_out);       /* final[j] is an output's name */
  const char **resv = ut_xcalloc((size_t)g->nout + 1, sizeof *resv);
  int *remap = ut_xcalloc((size_t)n + 1, sizeof *remap);
  tiny_graph *t = tiny_graph_new();
  harp_status s = HARP_OK;
  namer N = {t, resv, 0, {0}};
  if (!final || !is_out || !resv || !remap || !t) {
    s = ut_fail(L->e, HARP_E_NO_MEMORY, NULL, "out of memory");
    goto done;
  }
  ut_arena *A = L->fp->arena;
  /* an output's node takes the output's name, unless it is an INPUT, a
   * CONST (no region writes one: readers inline it, so the output gets an
   * identity copy below) or already another output's */
  for (int k = 0; k < g->nout; k++) {
    resv[N.nresv++] = g->outs[k].name;
    int j = L->tn[g->outs[k].v];
    tiny_op op = j >= 0 ? L->t->nodes[j].op : TINY_INPUT;
    if (j >= 0 && !final[j] && op != TINY_INPUT && op != TINY_CONST) final[j] = g->outs[k].name, is_out[j] = true;
  }
  for (int v = 1; v <= g->n; v++) {
    int j = L->tn[v];
    const fe_node *fn = fe_node_of(g, v);
    if (j < 0 || final[j] || L->t->nodes[j].op == TINY_INPUT || L->owner[j] != v) continue;
    final[j] = fn->name ? fn->name : ut_arena_printf(A, "%s_%d", hg_op_name(fn->op), v);
  }
  /* only what the outputs need (a merge that matmul read around, say) */
  char *live = ut_xcalloc((size_t)n + 1, 1);
  if (!live) {
    s = ut_fail(L->e, HARP_E_NO_MEMORY, NULL, "out of memory");
    goto done;
  }
  for (int k = 0; k < g->nout; k++)
    if (L->tn[g->outs[k].v] >= 0) live[L->tn[g->outs[k].v]] = 1;
  for (int j = n - 1; j >= 0; j--)
    for (int k = 0; live[j] && k < L->t->nodes[j].nsrc; k++)
      if (L->t->nodes[j].src[k].node >= 0) live[L->t->nodes[j].src[k].node] = 1;
  for (int j = 0; j < n && !s; j++) {
    const tiny_node *nd = &L->t->nodes[j];
    if (!live[j] && nd->op != TINY_INPUT) continue;
    tiny_src src[TINY_MAX_SRC];
    for (int k = 0; k < nd->nsrc; k++) {
      src[k] = nd->src[k];
      if (src[k].node >= 0) src[k].node = remap[src[k].node];
    }
    const char *id;
    if (nd->op == TINY_INPUT) {
      id = nd->a.input.tensor_id;
    } else if (final[j]) {
      id = name_free(&N, final[j], is_out[j] ? final[j] : NULL) ? final[j] : unique(&N, final[j]);
    } else {
      int o = L->owner[j];
      const fe_node *fn = o > 0 ? fe_node_of(g, o) : NULL;
      char base[260], op[32];
      const char *stem = o > 0 && L->tn[o] >= 0 && final[L->tn[o]] ? final[L->tn[o]]
                         : fn && fn->name                         ? fn->name
                                                                  : "t";
      snprintf(base, sizeof base, "%.200s.%s", stem, lower_name(tiny_op_name(nd->op), op, sizeof op));
      id = unique(&N, base);
    }
    int k = tiny_add(t, id, nd->op, src, nd->nsrc, tiny_op_argkind(nd->op) == TA_NONE ? NULL : &nd->a);
    if (k < 0) s = ut_fail(L->e, t->err.code == HARP_E_NO_MEMORY ? HARP_E_NO_MEMORY : HARP_E_INTERNAL, id, "%s", t->err.msg);
    remap[j] = k;
  }
  for (int k = 0; k < g->nout && !s; k++) {
    const fe_output *o = &g->outs[k];
    int j = remap[L->tn[o->v]];
    if (strcmp(t->nodes[j].id, o->name) != 0 || t->nodes[j].op == TINY_INPUT || t->nodes[j].op == TINY_CONST) {
      /* an identity copy */
      tiny_arg_cast a = {o->dtype};
      tiny_src src[1] = {{j, 0}};
      j = tiny_add(t, o->name, TINY_CAST, src, 1, &a);
    }
    if (j < 0 || tiny_mark_output(t, j) < 0) s = ut_fail(L->e, HARP_E_INTERNAL, o->name, "%s", t->err.msg);
  }
  free(live);
  for (int k = 0; k < L->t->ndsyms && !s; k++) { /* the derived symbols, as defined */
    char def[1024];
    tiny_expr_print(L->t->dsyms[k].def, def, sizeof def);
    if (tiny_dsym_add(t, L->t->dsyms[k].name, def) < 0) s = ut_fail(L->e, t->err.code, NULL, "%s", t->err.msg);
  }
done:
  free(final);
  free(is_out);
  free(resv);
  free(remap);
  if (s) {
    tiny_graph_free(t);
    return s;
  }
  *out = t;
  return HARP_OK;
}

/* ---- the driver ------------------------------------------------------------------------- */
/* hg_lower_bound; derive: dims that are expressions of unbound symbols
 * become derived symbols (hg_lower_derive). */
static harp_status lower_impl(harp_error *e, const hg_program *p, const tiny_symtab *bind, bool derive, tiny_graph **out,
                              tiny_symtab *defaults) {
  *out = NULL;
  hg_program *fp = NULL;
  if (fe_flatten(e, p, &fp)) return e->code;
  const hg_graph *g = hg_program_find(fp, "main");
  lw L = {e, fp, g, tiny_graph_new(), bind, ut_xcalloc((size_t)g->n + 1, sizeof(int)),
          ut_xcalloc((size_t)g->n + 1, sizeof(lw_split)), NULL, 0, NULL, 0, derive};
  harp_status s = HARP_OK;
  if (!L.t || !L.tn || !L.split) {
    s = ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
    goto done;
  }
  for (int i = 0; i < g->nsv && defaults && !s; i++)
    if (g->sv[i].dflt >= 0 && tiny_symtab_set(e, defaults, g->sv[i].name, g->sv[i].dflt)) s = e->code;
  for (int v = 0; v <= g->n; v++) L.tn[v] = -1, L.split[v].node = -1;
  for (int i = 0; i < g->nparams && !s; i++) {
    const fe_node *n = fe_node_of(g, g->params[i]);
    L.cur = n;
    tiny_arg_input a = {0};
    a.tensor_id = n->name;
    a.dtype = n->dtype;
    if (!lw_shape(&L, &n->shape, &a.shape)) break;
    L.tn[g->params[i]] = lw_emit(&L, TINY_INPUT, NULL, 0, &a);
  }
  for (int v = 1; v <= g->n && !e->code; v++) {
    const fe_node *n = fe_node_of(g, v);
    if (n->op == HG_OP_INPUT) continue;
    L.cur = n;
    int r = lower_node(&L, n);
    if (r == -3) continue;
    if (r < 0 && !e->code) fe_fail_node(e, fp, n, HARP_E_INTERNAL, "lowering %s failed", hg_op_name(n->op));
    L.tn[v] = r;
  }
  /* outputs that are bare literals: an identity CAST of the constant, as
   * for a parameter (no backend region writes a CONST: readers inline it) */
  for (int k = 0; k < g->nout && !e->code; k++) {
    hg_val v = g->outs[k].v;
    const fe_node *n = fe_node_of(g, v);
    L.cur = n;
    if (L.tn[v] < 0) L.tn[v] = lw_cast(&L, lw_const(&L, n->a.cnst.v, g->outs[k].dtype), g->outs[k].dtype);
  }
  s = e->code;
  if (!s) {
    tiny_graph *t = NULL;
    s = rename_and_finish(&L, &t);
    if (!s) {
      tiny_graph_free(L.t);
      L.t = t;
    }
  }
  if (!s) { /* what we built must type-check symbolically; a failure is a lowering bug */
    harp_error ie;
    harp_error_clear(&ie);
    if (tiny_infer(&ie, L.t, bind, true) && !bind)
      s = ut_fail(e, HARP_E_INTERNAL, ie.node, "the lowered Tiny graph does not type-check: %s", ie.msg);
    else if (ie.code) /* a symbol the frontend took equal to a size (broadcast, concat) is bound otherwise */
      s = ut_fail(e, ie.code == HARP_E_INTERNAL ? HARP_E_AXIS_SIZE_MISMATCH : ie.code, ie.node,
                  "the model's shapes disagree under the symbol bindings: %s (a symbolic dimension that meets a fixed "
                  "size in a broadcast or a concatenation is taken to equal it)",
                  ie.msg);
  }
done:
  free(L.tn);
  free(L.split);
  free(L.owner);
  if (s) tiny_graph_free(L.t);
  else *out = L.t;
  hg_program_free(fp);
  return s;
}

harp_status hg_lower_bound(harp_error *e, const hg_program *p, const tiny_symtab *bind, tiny_graph **out,
                         tiny_symtab *defaults) {
  return lower_impl(e, p, bind, false, out, defaults);
}

harp_status hg_lower(harp_error *e, const hg_program *p, tiny_graph **out, tiny_symtab *defaults) {
  return lower_impl(e, p, NULL, false, out, defaults);
}

/* hg_lower_or_bind, derived symbols or not. */
static harp_status lower_or_bind(harp_error *e, const hg_program *p, hg_bind_fill fill, void *ctx, bool derive,
                                 tiny_graph **out, tiny_symtab *defaults) {
  harp_status s = lower_impl(e, p, NULL, derive, out, defaults);
  if (s != HARP_E_UNSUPPORTED) return s;
  tiny_symtab bind;
  tiny_symtab_init(&bind);
  harp_error_clear(e);
  s = fill ? fill(e, &bind, ctx) : HARP_OK;
  for (int i = 0; !s && i < defaults->n; i++)
    if (!tiny_symtab_get(&bind, defaults->names[i], NULL)) s = tiny_symtab_set(e, &bind, defaults->names[i], defaults->values[i]);
  if (!s) s = lower_impl(e, p, &bind, derive, out, NULL);
  tiny_symtab_free(&bind);
  return s;
}

harp_status hg_lower_or_bind(harp_error *e, const hg_program *p, hg_bind_fill fill, void *ctx, tiny_graph **out,
                             tiny_symtab *defaults) {
  return lower_or_bind(e, p, fill, ctx, false, out, defaults);
}

harp_status hg_lower_derive(harp_error *e, const hg_program *p, hg_bind_fill fill, void *ctx, tiny_graph **out,
                            tiny_symtab *defaults) {
  return lower_or_bind(e, p, fill, ctx, true, out, defaults);
}
