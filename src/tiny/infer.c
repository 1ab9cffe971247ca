/* infer.c — shape and dtype inference for Tiny IR.
 * Needs: a graph in topological order.  Gives: node->shape/dtype/pieces,
 * REDUCE axis_idx, and every shape rule it can decide (seed 001 §3, §4).
 *
 * Works before normalization too: binary ops broadcast implicitly (with the
 * same rules normalize.c makes explicit) and immediates act as rank-0
 * tensors of the other operand's dtype. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tiny_int.h"
#include "util/util.h"

#define FAIL(code, ...) ut_fail(e, code, n->id, __VA_ARGS__)

bool tiny_dim_value(tiny_dim d, const tiny_symtab *syms, int64_t *v) {
  if (!d.sym) {
    *v = d.n;
    return true;
  }
  return tiny_symtab_get(syms, d.sym, v);
}

bool tiny_resolve_dim(harp_error *e, const char *id, tiny_dim d, const tiny_symtab *syms, bool allow_unknown,
                      tiny_dim *out) {
  out->sym = d.sym;
  if (!d.sym) {
    out->n = d.n;
    return true;
  }
  int64_t v;
  if (tiny_symtab_get(syms, d.sym, &v)) {
    out->n = v;
    return true;
  }
  out->n = syms && syms->sym_broadcasts && d.n >= 0 ? d.n : -1; /* a ShapeSet's window count: named, its value kept */
  if (allow_unknown || out->n >= 0) return true;
  ut_fail(e, HARP_E_UNBOUND_SYMBOL, id, "symbol %s has no value (bind it with --sym %s=<int> or from an input)", d.sym,
          d.sym);
  return false;
}

harp_status tiny_resolve_shape(harp_error *e, const tiny_node *n, const tiny_shape *arg, const tiny_symtab *syms,
                              bool allow_unknown, tiny_shape *out) {
  out->rank = arg->rank;
  for (int i = 0; i < arg->rank; i++) {
    if (!tiny_resolve_dim(e, n->id, arg->d[i], syms, allow_unknown, &out->d[i])) return e->code;
    if (out->d[i].n > TINY_MAX_DIM) return FAIL(HARP_E_LIMIT, "dimension %d is %" PRId64 ", above the limit 2^40", i, out->d[i].n);
    if (!arg->d[i].sym && arg->d[i].n < 0) return FAIL(HARP_E_INVALID_ARG, "dimension %d is negative", i);
  }
  if (tiny_shape_numel(out) == -2) return FAIL(HARP_E_LIMIT, "tensor has more than 2^40 elements");
  return HARP_OK;
}

/* ---- broadcasting ------------------------------------------------------- */
typedef enum { P_EQ, P_CONFLICT, P_MISMATCH } pair_status;

static bool is_one(const tiny_dim *d) { return d->n == 1; }

static pair_status pair(const tiny_dim *a, const tiny_dim *b) {
  if (is_one(a) || is_one(b)) return P_EQ;
  if (a->n >= 0 && b->n >= 0 && a->n != b->n) return P_MISMATCH;
  if (a->sym && b->sym && strcmp(a->sym, b->sym) != 0) return P_CONFLICT;
  return P_EQ; /* equal, or undecidable until bound (checked then) */
}

bool tiny_dim_mismatch(const tiny_dim *a, const tiny_dim *b) { return pair(a, b) == P_MISMATCH; }

/* Map axes of s (rank r) into t (rank R >= r). */
static bool align(const tiny_shape *s, const tiny_shape *t, int *map, bool *mismatch) {
  int r = s->rank, R = t->rank;
  bool conflict = false;
  *mismatch = false;
  for (int i = 0; i < r; i++) {
    pair_status p = pair(&s->d[i], &t->d[i + R - r]);
    if (p == P_MISMATCH) *mismatch = true;
    if (p == P_CONFLICT) conflict = true;
  }
  if (!conflict && !*mismatch) {
    for (int i = 0; i < r; i++) map[i] = i + R - r;
    return true;
  }
  /* By name: every non-1 axis of s names exactly one axis of t, in order. */
  int last = -1;
  bool ok = true;
  for (int i = 0; i < r && ok; i++) {
    if (!s->d[i].sym) {
      if (s->d[i].n == 1) {
        map[i] = -1;
        continue;
      }
      ok = false;
      break;
    }
    int found = -1, count = 0;
    for (int j = 0; j < R; j++)
      if (t->d[j].sym && strcmp(t->d[j].sym, s->d[i].sym) == 0) found = j, count++;
    if (count != 1 || found <= last || pair(&s->d[i], &t->d[found]) == P_MISMATCH) ok = false;
    map[i] = found;
    last = found;
  }
  if (ok) return true;
  if (*mismatch) return false;
  for (int i = 0; i < r; i++) map[i] = i + R - r; /* names differ but may be equal once bound */
  return true;
}

static void merge_dim(tiny_dim *t, const tiny_dim *s) {
  if (is_one(t) && !is_one(s)) {
    *t = *s;
    return;
  }
  if (t->n < 0 && s->n >= 0 && !is_one(s)) t->n = s->n;
  if (!t->sym && s->sym && !is_one(s)) t->sym = s->sym;
}

harp_status tiny_broadcast(harp_error *e, const char *id, const tiny_shape *const *ops, int nops, tiny_bcast *out) {
  int big = 0;
  for (int k = 1; k < nops; k++)
    if (ops[k]->rank > ops[big]->rank) big = k;
  memset(out, 0, sizeof *out);
  out->out = *ops[big];
  for (int a = 0; a < ops[big]->rank; a++) out->map[big][a] = a;
  for (int k = 0; k < nops; k++) {
    if (k == big) continue;
    bool mismatch;
    if (!align(ops[k], &out->out, out->map[k], &mismatch)) {
      char a[256], b[256];
      tiny_shape_format(ops[k], a, sizeof a);
      tiny_shape_format(&out->out, b, sizeof b);
      return ut_fail(e, HARP_E_BROADCAST_MISMATCH, id, "cannot broadcast %s with %s", a, b);
    }
    for (int a = 0; a < ops[k]->rank; a++)
      if (out->map[k][a] >= 0) merge_dim(&out->out.d[out->map[k][a]], &ops[k]->d[a]);
  }
  /* Every operand must now fit the merged shape (catches 1-vs-n across operands). */
  for (int k = 0; k < nops; k++)
    for (int a = 0; a < ops[k]->rank; a++) {
      int m = out->map[k][a];
      if (m >= 0 && pair(&ops[k]->d[a], &out->out.d[m]) == P_MISMATCH) {
        char sa[256], sb[256];
        tiny_shape_format(ops[k], sa, sizeof sa);
        tiny_shape_format(&out->out, sb, sizeof sb);
        return ut_fail(e, HARP_E_BROADCAST_MISMATCH, id, "cannot broadcast %s to %s", sa, sb);
      }
    }
  return HARP_OK;
}

/* ---- index expression ranges -------------------------------------------- */
bool tiny_expr_range(const tiny_expr *x, const int64_t *sizes, const tiny_symtab *syms, int64_t *lo, int64_t *hi) {
  int64_t al, ah, bl, bh;
  switch (x->k) {
  case TX_CONST: *lo = *hi = x->c; return true;
  case TX_SYM:
    if (!tiny_symtab_get(syms, x->sym, lo)) return false;
    *hi = *lo;
    return true;
  case TX_VAR:
    if (sizes[x->var] <= 0) return false;
    *lo = 0;
    *hi = sizes[x->var] - 1;
    return true;
  default: break;
  }
  if (!tiny_expr_range(x->a, sizes, syms, &al, &ah) || !tiny_expr_range(x->b, sizes, syms, &bl, &bh)) return false;
  switch (x->k) {
  case TX_ADD: return ut_add_ok(al, bl, lo) && ut_add_ok(ah, bh, hi);
  case TX_MUL: {
    if (al != ah && bl != bh) return false; /* not affine */
    int64_t c[4];
    if (!ut_mul_ok(al, bl, &c[0]) || !ut_mul_ok(al, bh, &c[1]) || !ut_mul_ok(ah, bl, &c[2]) || !ut_mul_ok(ah, bh, &c[3]))
      return false;
    *lo = *hi = c[0];
    for (int i = 1; i < 4; i++) *lo = UT_MIN(*lo, c[i]), *hi = UT_MAX(*hi, c[i]);
    return true;
  }
  case TX_FLOORDIV:
    if (bl != bh || bl <= 0) return false;
    *lo = ut_floordiv(al, bl);
    *hi = ut_floordiv(ah, bl);
    return true;
  case TX_MOD:
    if (bl != bh || bl <= 0) return false;
    if (ut_floordiv(al, bl) == ut_floordiv(ah, bl)) {
      *lo = ut_mod(al, bl);
      *hi = ut_mod(ah, bl);
    } else {
      *lo = 0;
      *hi = bl - 1;
    }
    return true;
  default: return false;
  }
}

/* Sign of the coefficient each variable gets, walking products. */
static bool neg_rec(const tiny_expr *x, const tiny_symtab *syms, int64_t sign) {
  int64_t c;
  switch (x->k) {
  case TX_VAR: return sign < 0;
  case TX_CONST:
  case TX_SYM: return false;
  case TX_ADD: return neg_rec(x->a, syms, sign) || neg_rec(x->b, syms, sign);
  case TX_MUL:
    if (tiny_expr_eval(x->a, NULL, syms, &c)) return c != 0 && neg_rec(x->b, syms, sign * (c < 0 ? -1 : 1));
    if (tiny_expr_eval(x->b, NULL, syms, &c)) return c != 0 && neg_rec(x->a, syms, sign * (c < 0 ? -1 : 1));
    return neg_rec(x->a, syms, sign) || neg_rec(x->b, syms, sign);
  case TX_FLOORDIV:
  case TX_MOD: return neg_rec(x->a, syms, sign);
  }
  return false;
}

bool tiny_expr_has_negative_stride(const tiny_expr *x, const tiny_symtab *syms) { return neg_rec(x, syms, 1); }

int tiny_expr_count_mod(const tiny_expr *x) {
  if (!x) return 0;
  return (x->k == TX_MOD) + (x->a ? tiny_expr_count_mod(x->a) : 0) + (x->b ? tiny_expr_count_mod(x->b) : 0);
}

/* ---- per-class rules (movement: infer_move.c) --------------------------- */
typedef tiny_ictx ictx;

static const tiny_shape scalar_shape; /* rank 0 */

static const tiny_shape *src_shape(const tiny_graph *g, const tiny_node *n, int k) {
  return n->src[k].node >= 0 ? &g->nodes[n->src[k].node].shape : &scalar_shape;
}

/* dtype of an elementwise op's operands; immediates take the others' dtype.
 * Mixed fp16/bf16 with fp32 widens to fp32 (normalize inserts the CAST). */
static harp_status operand_dtype(ictx *c, tiny_node *n, int first, tiny_dtype *out) {
  harp_error *e = c->e;
  int have = 0;
  tiny_dtype dt = TINY_FP32;
  for (int k = first; k < n->nsrc; k++) {
    if (n->src[k].node < 0) continue;
    tiny_dtype s = c->g->nodes[n->src[k].node].dtype;
    if (!have) {
      dt = s;
      have = 1;
    } else if (s != dt) {
      bool widen = tiny_dtype_is_float(s) && tiny_dtype_is_float(dt) && (s == TINY_FP32 || dt == TINY_FP32);
      if (!widen)
        return FAIL(HARP_E_DTYPE_MISMATCH, "%s operands are %s and %s; insert an explicit CAST", tiny_op_name(n->op),
                    tiny_dtype_name(dt), tiny_dtype_name(s));
      dt = TINY_FP32;
    }
  }
  *out = dt;
  return HARP_OK;
}

static harp_status infer_elementwise(ictx *c, tiny_node *n) {
  harp_error *e = c->e;
  tiny_graph *g = c->g;
  const tiny_shape *ops[TINY_MAX_SRC];
  for (int k = 0; k < n->nsrc; k++) ops[k] = src_shape(g, n, k);
  tiny_bcast b;
  if (n->nsrc == 1)
    n->shape = *ops[0];
  else {
    if (tiny_broadcast(e, n->id, ops, n->nsrc, &b)) return e->code;
    n->shape = b.out;
  }
  tiny_dtype dt;
  if (n->op == TINY_WHERE) {
    if (n->src[0].node >= 0 && g->nodes[n->src[0].node].dtype != TINY_BOOL)
      return FAIL(HARP_E_DTYPE_MISMATCH, "WHERE condition must be bool, got %s",
                  tiny_dtype_name(g->nodes[n->src[0].node].dtype));
    if (operand_dtype(c, n, 1, &dt)) return e->code;
    if (n->src[1].node < 0 && n->src[2].node < 0)
      return FAIL(HARP_E_INVALID_ARG, "WHERE needs at least one tensor among its values");
  } else {
    if (operand_dtype(c, n, 0, &dt)) return e->code;
    bool any_node = false;
    for (int k = 0; k < n->nsrc; k++) any_node |= n->src[k].node >= 0;
    if (!any_node) return FAIL(HARP_E_INVALID_ARG, "%s needs a tensor operand, not only immediates", tiny_op_name(n->op));
  }
  unsigned rule = tiny_op_dtype_rule(n->op);
  if ((rule & TD_FLOAT) && !tiny_dtype_is_float(dt))
    return FAIL(HARP_E_DTYPE_MISMATCH, "%s needs a floating-point operand, got %s", tiny_op_name(n->op), tiny_dtype_name(dt));
  if ((rule & TD_NUM) && dt == TINY_BOOL)
    return FAIL(HARP_E_DTYPE_MISMATCH, "%s is not defined on bool; CAST first", tiny_op_name(n->op));
  n->dtype = tiny_op_is_compare(n->op) ? TINY_BOOL : dt;
  return HARP_OK;
}

static harp_status infer_reduce(ictx *c, tiny_node *n) {
  harp_error *e = c->e;
  const tiny_node *x = &c->g->nodes[n->src[0].node];
  tiny_arg_reduce *a = &n->a.reduce;
  const tiny_shape *in = &x->shape;
  if (!a->has_dtype)
    return FAIL(HARP_E_ACC_DTYPE_MISSING, "REDUCE needs an accumulation \"dtype\" (fp32 is the usual choice)");
  if (a->dtype == TINY_BOOL || x->dtype == TINY_BOOL)
    return FAIL(HARP_E_DTYPE_MISMATCH, "REDUCE over bool is not defined; CAST first");
  if (tiny_dtype_is_float(x->dtype) != tiny_dtype_is_float(a->dtype))
    return FAIL(HARP_E_DTYPE_MISMATCH, "REDUCE of %s cannot accumulate in %s; CAST first", tiny_dtype_name(x->dtype),
                tiny_dtype_name(a->dtype));
  if (a->n < 1) return FAIL(HARP_E_INVALID_ARG, "REDUCE needs at least one axis");
  bool used[TINY_MAX_RANK] = {0};
  for (int i = 0; i < a->n; i++) {
    int idx = -1;
    if (a->axes[i].sym) {
      int count = 0;
      for (int j = 0; j < in->rank; j++)
        if (in->d[j].sym && strcmp(in->d[j].sym, a->axes[i].sym) == 0) idx = j, count++;
      if (count != 1) {
        char sb[256];
        tiny_shape_format(in, sb, sizeof sb);
        return FAIL(HARP_E_INVALID_ARG, "REDUCE axis \"%s\" names %d axes of %s; it must name exactly one", a->axes[i].sym,
                    count, sb);
      }
    } else {
      idx = (int)a->axes[i].n;
      if (a->axes[i].n < 0 || a->axes[i].n >= in->rank)
        return FAIL(HARP_E_INVALID_ARG, "REDUCE axis %" PRId64 " is out of range for rank %d", a->axes[i].n, in->rank);
    }
    if (used[idx]) return FAIL(HARP_E_INVALID_ARG, "REDUCE axis %d is listed twice", idx);
    used[idx] = true;
  }
  int k = 0;
  for (int j = 0; j < in->rank; j++)
    if (used[j]) a->axis_idx[k++] = j;
  n->shape.rank = 0;
  for (int j = 0; j < in->rank; j++)
    if (!used[j]) n->shape.d[n->shape.rank++] = in->d[j];
  n->dtype = a->dtype;
  return HARP_OK;
}

static harp_status infer_gather(ictx *c, tiny_node *n) {
  harp_error *e = c->e;
  const tiny_node *x = &c->g->nodes[n->src[0].node], *ix = &c->g->nodes[n->src[1].node];
  int axis = n->a.gather.axis;
  if (ix->dtype != TINY_I32) return FAIL(HARP_E_DTYPE_MISMATCH, "GATHER index must be i32, got %s", tiny_dtype_name(ix->dtype));
  if (ix->shape.rank != x->shape.rank)
    return FAIL(HARP_E_INVALID_ARG, "GATHER index has rank %d, the input rank %d", ix->shape.rank, x->shape.rank);
  if (axis < 0 || axis >= x->shape.rank) return FAIL(HARP_E_INVALID_ARG, "GATHER axis %d is out of range", axis);
  for (int d = 0; d < x->shape.rank; d++)
    if (d != axis && ix->shape.d[d].n >= 0 && x->shape.d[d].n >= 0 && ix->shape.d[d].n > x->shape.d[d].n)
      return FAIL(HARP_E_AXIS_SIZE_MISMATCH, "GATHER index axis %d (%lld) exceeds the input's (%lld)", d,
                  (long long)ix->shape.d[d].n, (long long)x->shape.d[d].n);
  n->shape = ix->shape;
  n->dtype = x->dtype;
  return HARP_OK;
}

static harp_status infer_node(ictx *c, tiny_node *n) {
  harp_error *e = c->e;
  n->pieces = 1;
  switch (tiny_op_class(n->op)) {
  case TC_LEAF:
    if (n->op == TINY_INPUT) {
      if (tiny_resolve_shape(e, n, &n->a.input.shape, c->syms, c->allow_unknown, &n->shape)) return e->code;
      n->dtype = n->a.input.dtype;
    } else {
      n->shape.rank = 0;
      n->dtype = n->a.cnst.dtype;
    }
    return HARP_OK;
  case TC_CAST:
    n->shape = c->g->nodes[n->src[0].node].shape;
    n->dtype = n->a.cast.to;
    return HARP_OK;
  case TC_MOVE: return tiny_infer_move(c, n);
  case TC_REDUCE: return infer_reduce(c, n);
  case TC_GATHER: return infer_gather(c, n);
  default: return infer_elementwise(c, n);
  }
}

harp_status tiny_infer(harp_error *e, tiny_graph *g, const tiny_symtab *syms, bool allow_unknown) {
  ictx c = {e, g, syms, allow_unknown};
  for (int i = 0; i < g->n; i++) {
    tiny_node *n = &g->nodes[i];
    int need_node = tiny_op_class(n->op) == TC_MOVE || n->op == TINY_CAST || n->op == TINY_REDUCE ||
                    tiny_op_class(n->op) == TC_UNARY || n->op == TINY_GATHER;
    for (int k = 0; k < n->nsrc; k++) {
      if (n->src[k].node >= i) return ut_fail(e, HARP_E_INTERNAL, n->id, "graph is not in topological order");
      if (need_node && n->src[k].node < 0)
        return ut_fail(e, HARP_E_INVALID_ARG, n->id, "%s takes a tensor, not an immediate", tiny_op_name(n->op));
    }
    if (infer_node(&c, n)) return e->code;
    if (!allow_unknown || tiny_shape_known(&n->shape)) {
      int64_t numel = tiny_shape_numel(&n->shape);
      if (numel == -2) return ut_fail(e, HARP_E_LIMIT, n->id, "tensor has more than 2^40 elements");
      if (numel == -1 && !allow_unknown)
        return ut_fail(e, HARP_E_UNBOUND_SYMBOL, n->id, "shape depends on an unbound symbol");
    }
  }
  return HARP_OK;
}

harp_status tiny_bind_input(harp_error *e, const tiny_graph *g, int node, int rank, const int64_t *dims,
                          tiny_symtab *syms) {
  const tiny_node *n = &g->nodes[node];
  const tiny_shape *s = &n->a.input.shape;
  if (rank != s->rank)
    return ut_fail(e, HARP_E_INPUT_MISMATCH, n->id, "input %s has rank %d, the model declares rank %d",
                   n->a.input.tensor_id, rank, s->rank);
  for (int i = 0; i < rank; i++) {
    if (!s->d[i].sym) {
      if (s->d[i].n != dims[i])
        return ut_fail(e, HARP_E_INPUT_MISMATCH, n->id, "input %s axis %d is %" PRId64 ", the model declares %" PRId64,
                       n->a.input.tensor_id, i, dims[i], s->d[i].n);
      continue;
    }
    int64_t old;
    if (tiny_symtab_get(syms, s->d[i].sym, &old) && old != dims[i])
      return ut_fail(e, HARP_E_INPUT_MISMATCH, n->id, "input %s axis %d is %" PRId64 " but symbol %s is already %" PRId64,
                     n->a.input.tensor_id, i, dims[i], s->d[i].sym, old);
    if (tiny_symtab_set(e, syms, s->d[i].sym, dims[i])) return e->code;
  }
  return HARP_OK;
}
