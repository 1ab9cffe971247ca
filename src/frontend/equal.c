/* equal.c — structural equality of programs (the decompile round trip).
 * Needs: the graph model.  Gives: hg_program_equal.
 *
 * Two programs are equal when they have graphs of the same names with equal
 * signatures (shape variables and defaults, parameters, outputs and their
 * types), and each output's value is the same DAG: same ops, attributes,
 * types and operands, compared from the outputs back.  Value names and
 * node order do not matter; literals compare by value. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fe_int.h"

typedef struct eq {
  const hg_graph *a, *b;
  int *pair; /* a value -> the b value it matched, 0 if not yet */
  char *why;
  int cap;
} eq;

static bool differ(eq *E, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool differ(eq *E, const char *fmt, ...) {
  if (E->why && E->cap > 0 && !E->why[0]) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(E->why, (size_t)E->cap, fmt, ap);
    va_end(ap);
  }
  return false;
}

static bool same_shape(const fe_shape *x, const fe_shape *y) {
  if (x->rank != y->rank) return false;
  for (int i = 0; i < x->rank; i++)
    if (strcmp(x->d[i]->text, y->d[i]->text) != 0) return false;
  return true;
}

static bool same_num(double x, double y) { return x == y ? signbit(x) == signbit(y) : isnan(x) && isnan(y); }

static bool same_attrs(const fe_node *x, const fe_node *y) {
  switch (x->op) {
  case HG_OP_INPUT: return x->a.input.index == y->a.input.index;
  case HG_OP_CONST: return same_num(x->a.cnst.v, y->a.cnst.v);
  case HG_OP_SUM: case HG_OP_RMAX: case HG_OP_RMIN: case HG_OP_MEAN:
    return x->a.reduce.n == y->a.reduce.n && x->a.reduce.keepdim == y->a.reduce.keepdim &&
           !memcmp(x->a.reduce.axes, y->a.reduce.axes, sizeof(int) * (size_t)x->a.reduce.n);
  case HG_OP_CONV2D: return !memcmp(&x->a.conv, &y->a.conv, sizeof x->a.conv);
  case HG_OP_ATTENTION:
    return x->a.attn.heads == y->a.attn.heads && x->a.attn.causal == y->a.attn.causal &&
           same_num(x->a.attn.scale, y->a.attn.scale);
  case HG_OP_LAYERNORM: return x->a.ln.axis == y->a.ln.axis && same_num(x->a.ln.eps, y->a.ln.eps);
  case HG_OP_SOFTMAX: case HG_OP_CONCAT: case HG_OP_GATHER: return x->a.axis.axis == y->a.axis.axis;
  case HG_OP_MAX_POOL2D: case HG_OP_AVG_POOL2D: return !memcmp(&x->a.pool, &y->a.pool, sizeof x->a.pool);
  case HG_OP_RESHAPE: case HG_OP_EXPAND: return same_shape(&x->a.shape.to, &y->a.shape.to);
  case HG_OP_PERMUTE: case HG_OP_FLIP:
    return x->a.perm.n == y->a.perm.n && !memcmp(x->a.perm.v, y->a.perm.v, sizeof(int) * (size_t)x->a.perm.n);
  case HG_OP_PAD:
    return x->a.pad.n == y->a.pad.n && same_num(x->a.pad.value, y->a.pad.value) &&
           !memcmp(x->a.pad.lo, y->a.pad.lo, sizeof(int64_t) * (size_t)x->a.pad.n) &&
           !memcmp(x->a.pad.hi, y->a.pad.hi, sizeof(int64_t) * (size_t)x->a.pad.n);
  case HG_OP_SLICE:
    if (x->a.slice.n != y->a.slice.n) return false;
    for (int i = 0; i < x->a.slice.n; i++)
      if (strcmp(x->a.slice.start[i]->text, y->a.slice.start[i]->text) ||
          strcmp(x->a.slice.end[i]->text, y->a.slice.end[i]->text) || x->a.slice.step[i] != y->a.slice.step[i])
        return false;
    return true;
  case HG_OP_CAST: return x->a.cast.to == y->a.cast.to;
  case HG_OP_CALL:
    return x->a.call.nout == y->a.call.nout && strcmp(x->a.call.callee->name, y->a.call.callee->name) == 0;
  case HG_OP_PROJ: return x->a.proj.k == y->a.proj.k;
  default: return true;
  }
}

/* The node-local part: op, type, attributes, operand count. */
static bool node_alike(eq *E, const fe_node *x, const fe_node *y) {
  char sx[256], sy[256];
  if (x->op != y->op)
    return differ(E, "graph %s: %s (line %d) vs %s (line %d)", E->a->name, hg_op_name(x->op), x->line, hg_op_name(y->op), y->line);
  if (x->weak != y->weak || (!x->weak && x->dtype != y->dtype) || !same_shape(&x->shape, &y->shape)) {
    fe_shape_text(&x->shape, sx, sizeof sx);
    fe_shape_text(&y->shape, sy, sizeof sy);
    return differ(E, "graph %s: %s types differ: %s%s vs %s%s", E->a->name, hg_op_name(x->op), tiny_dtype_name(x->dtype), sx,
                  tiny_dtype_name(y->dtype), sy);
  }
  if (!same_attrs(x, y)) return differ(E, "graph %s: %s attributes differ (line %d)", E->a->name, hg_op_name(x->op), x->line);
  if (x->nin != y->nin) return differ(E, "graph %s: %s operand counts differ", E->a->name, hg_op_name(x->op));
  return true;
}

/* The DAGs under va and vb, walked with an explicit stack (graphs can be
 * long chains).  A pair is recorded when first met: any difference below it
 * fails the whole comparison anyway. */
static bool node_eq(eq *E, hg_val va, hg_val vb) {
  int cap = 64, n = 0;
  hg_val(*st)[2] = ut_xmalloc(sizeof *st * (size_t)cap);
  if (!st) return differ(E, "out of memory");
  st[n][0] = va, st[n][1] = vb, n++;
  bool ok = true;
  while (n > 0 && ok) {
    n--;
    hg_val x = st[n][0], y = st[n][1];
    if (x == HG_NONE || y == HG_NONE) {
      ok = x == y || differ(E, "an optional operand is present in one only");
      continue;
    }
    if (E->pair[x] == y) continue;
    const fe_node *nx = fe_node_of(E->a, x), *ny = fe_node_of(E->b, y);
    if (!nx || !ny) {
      ok = differ(E, "a value is missing");
      break;
    }
    if (!(ok = node_alike(E, nx, ny))) break;
    if (nx->op != HG_OP_CONST) E->pair[x] = y; /* literals may be shared on one side only */
    for (int i = 0; i < nx->nin && ok; i++) {
      if (n == cap) {
        cap *= 2;
        hg_val(*ns)[2] = ut_xrealloc(st, sizeof *st * (size_t)cap);
        if (!ns) {
          ok = differ(E, "out of memory");
          break;
        }
        st = ns;
      }
      st[n][0] = nx->in[i], st[n][1] = ny->in[i], n++;
    }
  }
  free(st);
  return ok;
}

static bool graph_eq(const hg_graph *a, const hg_graph *b, char *why, int cap) {
  eq E = {a, b, ut_xcalloc((size_t)a->n + 1, sizeof(int)), why, cap};
  bool ok = E.pair != NULL || differ(&E, "out of memory");
  if (!ok) return false;
  char sx[256], sy[256];
  if (a->nsv != b->nsv) ok = differ(&E, "graph %s: %d vs %d shape variables", a->name, a->nsv, b->nsv);
  for (int i = 0; ok && i < a->nsv; i++)
    if (strcmp(a->sv[i].name, b->sv[i].name) || a->sv[i].dflt != b->sv[i].dflt)
      ok = differ(&E, "graph %s: shape variable %d differs (%s vs %s)", a->name, i, a->sv[i].name, b->sv[i].name);
  if (ok && a->nparams != b->nparams) ok = differ(&E, "graph %s: %d vs %d parameters", a->name, a->nparams, b->nparams);
  for (int i = 0; ok && i < a->nparams; i++) {
    const fe_node *x = fe_node_of(a, a->params[i]), *y = fe_node_of(b, b->params[i]);
    if (strcmp(x->name, y->name) || x->dtype != y->dtype || !same_shape(&x->shape, &y->shape))
      ok = differ(&E, "graph %s: parameter %d differs (%s vs %s)", a->name, i, x->name, y->name);
    else
      E.pair[a->params[i]] = b->params[i];
  }
  if (ok && a->nout != b->nout) ok = differ(&E, "graph %s: %d vs %d outputs", a->name, a->nout, b->nout);
  for (int k = 0; ok && k < a->nout; k++) {
    const fe_output *x = &a->outs[k], *y = &b->outs[k];
    fe_shape_text(&x->shape, sx, sizeof sx);
    fe_shape_text(&y->shape, sy, sizeof sy);
    if (strcmp(x->name, y->name) || x->dtype != y->dtype || strcmp(sx, sy))
      ok = differ(&E, "graph %s: output %d differs (%s: %s%s vs %s: %s%s)", a->name, k, x->name, tiny_dtype_name(x->dtype), sx,
                  y->name, tiny_dtype_name(y->dtype), sy);
    else
      ok = node_eq(&E, x->v, y->v);
  }
  free(E.pair);
  return ok;
}

bool hg_program_equal(const hg_program *a, const hg_program *b, char *why, int cap) {
  if (why && cap > 0) why[0] = 0;
  eq E = {NULL, NULL, NULL, why, cap};
  if (!a || !b) return differ(&E, "a program is missing");
  if (a->n != b->n) return differ(&E, "%d vs %d graphs", a->n, b->n);
  for (int i = 0; i < a->n; i++) {
    const hg_graph *gb = hg_program_find(b, a->graphs[i]->name);
    if (!gb) return differ(&E, "graph %s is missing", a->graphs[i]->name);
    if (!graph_eq(a->graphs[i], gb, why, cap)) return false;
  }
  return true;
}
