/* region_c.c — C for one region from isl's loop nest (poly_ast_gen), the
 * statements' bodies from the Tiny ops.
 * Needs: a block-based region of a Function, its Poly-View.
 * Gives: rc_emit_region, rc_nest_* (the prelude: rc_prelude.c; the loops'
 * printing: region_loops.c; merging contiguous loops: region_coalesce.c).
 *
 * Statements: an ewise or copy block is one BODY; a reduction (and the generic
 * contraction, used when no template takes it) is INIT / BODY / FINAL with an
 * accumulator per output point.  The first `prefix` variables are shared
 * loops; a value computed and consumed inside the region lives in a local
 * array over its remaining axes (a scalar when there are none: a register);
 * values the region reads or writes as buffers are indexed row-major.
 * Arithmetic follows the reference interpreter: fp32 (int32 wrapping for
 * i32), rounding at CAST and when storing fp16/bf16, accumulation in the
 * REDUCE dtype. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <ctype.h>
#include <string.h>

#include "backend/contract.h"
#include "harp/poly_ast.h"
#include "harp/polycore.h"
#include "harp/region.h"
#include "cgen_int.h"
#include "contract_c.h"
#include "region_c_int.h"


static bool is_int(tiny_dtype t) { return !tiny_dtype_is_float(t); }
static const char *ctype(tiny_dtype t) { return is_int(t) ? "int32_t" : "float"; }

static const char *storage_type(tiny_dtype t) {
  switch (t) {
  case TINY_FP16:
  case TINY_BF16: return "uint16_t";
  case TINY_FP32: return "float";
  case TINY_I32: return "int32_t";
  default: return "uint8_t";
  }
}

/* ---- expressions ----------------------------------------------------------- */
static const char *round_fn(tiny_dtype t) { return t == TINY_FP16 ? "hp_rh" : t == TINY_BF16 ? "hp_rb" : ""; }

/* A constant of float dtype t, rounded as the interpreter does: (float)v,
 * then to t. */
static void float_const(ut_str *o, tiny_dtype t, double v) {
  if (isnan(v)) ut_str_puts(o, "NAN");
  else if (isinf(v)) ut_str_puts(o, v > 0 ? "INFINITY" : "(-INFINITY)");
  else ut_str_printf(o, "%s((float)(%.17g))", round_fn(t), v);
}

/* Load element `idx` of a buffer of dtype t, in compute representation. */
static void load(ut_str *o, tiny_dtype t, int slot, const char *idx, bool gpu) {
  /* GPU code reaches buffers through HP_AT (the simulator checks every access) */
  const char *at = gpu ? "HP_AT(p%d, %s)" : "p%d[%s]";
  switch (t) {
  case TINY_FP16: ut_str_puts(o, "hp_h2f("); break;
  case TINY_BF16: ut_str_puts(o, "hp_b2f("); break;
  case TINY_BOOL: ut_str_puts(o, "(int32_t)"); break;
  default: break;
  }
  ut_str_printf(o, at, slot, idx);
  if (t == TINY_FP16 || t == TINY_BF16) ut_str_putc(o, ')');
}

/* The length of X when rem is "(X % nL)" and quo is "(X / nL)" (isl's
 * split of one index over two axes, as a reshape's view reads them), else 0.
 * X's parentheses balanced: "(a % 3L) + (b % nL)" is no such pair. */
static size_t split_pair(const char *rem, const char *quo, int64_t n) {
  char tail[32];
  int tl = snprintf(tail, sizeof tail, " %% %" PRId64 "L)", n);
  size_t len = strlen(rem);
  if (len < (size_t)tl + 2 || rem[0] != '(' || strcmp(rem + len - tl, tail)) return 0;
  size_t x = len - tl - 1;
  int depth = 0;
  for (size_t i = 1; i <= x; i++) {
    depth += rem[i] == '(' ? 1 : rem[i] == ')' ? -1 : 0;
    if (depth < 0) return 0;
  }
  tail[1] = '/';
  if (depth || strlen(quo) != len || strncmp(quo, rem, x + 1) || strcmp(quo + x + 1, tail)) return 0;
  return x;
}

/* Row-major linear index of dims [from, rank) of `shape` from index texts.
 * Two adjacent axes indexed (X / n, X % n), n the inner one's size, are X
 * times the inner stride: C's / and % give (X / n) * n + X % n == X. */
void rc_linear(ut_str *o, const tiny_shape *shape, const char *const *index, int from) {
  int64_t stride = 1;
  bool any = false;
  ut_str_putc(o, '(');
  for (int d = shape->rank - 1; d >= from; d--) {
    size_t x = d > from && shape->d[d].n > 1 ? split_pair(index[d], index[d - 1], shape->d[d].n) : 0;
    if (x) {
      ut_str_printf(o, "%s(%.*s) * %" PRId64 "L", any ? " + " : "", (int)x, index[d] + 1, stride);
      any = true;
      stride *= shape->d[d--].n;
    } else if (shape->d[d].n != 1 && strcmp(index[d], "0")) { /* "0": an axis left out (uniform_guard_index) */
      ut_str_printf(o, "%s(%s) * %" PRId64 "L", any ? " + " : "", index[d], stride);
      any = true;
    }
    stride *= shape->d[d].n;
  }
  if (!any) ut_str_putc(o, '0');
  ut_str_putc(o, ')');
}

void rc_local_name(ut_str *o, const tiny_node *n, const char *prefix, int node) {
  char safe[160];
  ut_sanitize_name(n->id, safe, sizeof safe);
  ut_str_printf(o, "%s%d_%.40s", prefix, node, safe);
}

/* A guard (comparisons joined by && and ||, each 0 or 1) with bitwise
 * operators: the same value, without the branches of short-circuiting. */
static char *branchless(const char *guard) {
  ut_str o;
  ut_str_init(&o);
  for (const char *p = guard; *p; p++) {
    ut_str_putc(&o, *p);
    if ((p[0] == '&' || p[0] == '|') && p[1] == p[0]) p++;
  }
  return ut_str_take(&o);
}

/* Is every identifier of text tok (a number's suffix is no identifier)? */
static bool only_token(const char *text, const char *tok) {
  size_t tl = strlen(tok);
  for (const char *p = text; *p;) {
    const char *q = p;
    if (isdigit((unsigned char)*p)) {
      while (isalnum((unsigned char)*q)) q++;
    } else if (isalpha((unsigned char)*p) || *p == '_') {
      while (isalnum((unsigned char)*q) || *q == '_') q++;
      if ((size_t)(q - p) != tl || strncmp(p, tok, tl)) return false;
    } else {
      q++;
    }
    p = q;
  }
  return true;
}

/* A padded read whose guard is the same for every lane of the outer simd
 * loop (an LRN's window over channels, the lanes along a plane): the axes
 * indexed by the simd variable alone keep their index in the padding and
 * only the rest is multiplied by the guard, so the lanes read neighbours
 * rather than a gather at a guard-scaled stride.  In bounds: those axes'
 * indices and the simd loop's bounds do not depend on the guard's
 * variables, so each lane reads where it does at a point inside.  False
 * when it does not apply (o untouched). */
static bool uniform_guard_index(ut_str *o, emit *m, const tiny_node *n, const poly_ast_access *a, const char *guard) {
  const poly_ast *l = m->simd_outer;
  const char *v = l->iter, *keep[TINY_MAX_RANK], *rest[TINY_MAX_RANK];
  if (!v || rc_has_token(guard, v) || !l->init || !l->cond || !only_token(l->init, v) || !only_token(l->cond, v))
    return false; /* the lanes' range the same at every point, as the guard's variables move */
  bool any = false;
  for (int d = 0; d < n->shape.rank; d++) {
    bool k = only_token(a->index[d], v);
    any |= k && rc_has_token(a->index[d], v);
    keep[d] = k ? a->index[d] : "0", rest[d] = k ? "0" : a->index[d];
  }
  if (!any) return false;
  rc_linear(o, &n->shape, keep, 0);
  ut_str_puts(o, " + ");
  rc_linear(o, &n->shape, rest, 0);
  ut_str_printf(o, " * (long)(%s)", guard);
  return true;
}

/* The value a statement reads through access a (to node t), as C. */
static void read_value(emit *m, const poly_ast_access *a, int t, tiny_dtype want) {
  const tiny_graph *g = m->c->g;
  const tiny_node *n = &g->nodes[t];
  ut_str *o = m->o;
  ut_str idx;
  ut_str_init(&idx);
  /* a padded read in an outer simd loop: loaded unconditionally (element 0
   * in the padding), then selected; GCC gathers that, not a masked load */
  bool sel = a->guard && m->simd_outer && m->val[t].kind == ST_BUF && !is_int(n->dtype) && a->nalt == 0;
  char *guard = sel ? branchless(a->guard) : NULL; /* && would branch */
  if (sel && !guard) sel = false;
  if (sel) ut_str_puts(o, "({ float l_ = ");
  else if (a->guard) ut_str_printf(o, "((%s) ? ", a->guard);
  if (m->val[t].kind == ST_CONST) {
    double v = n->a.cnst.value;
    if (is_int(n->dtype)) ut_str_printf(o, "((int32_t)%d)", n->dtype == TINY_BOOL ? v != 0 : (int)v);
    else float_const(o, n->dtype, v);
  } else if (m->val[t].kind == ST_BUF) {
    rc_linear(&idx, &n->shape, a->index, 0);
    if (sel && !idx.oom) {
      ut_str gi;
      ut_str_init(&gi);
      if (!uniform_guard_index(&gi, m, n, a, guard))
        ut_str_printf(&gi, "(%s) * (long)(%s)", idx.buf, guard); /* a ?: here turns into a pointer phi */
      load(o, m->val[t].storage, m->val[t].slot, gi.oom ? idx.buf : gi.buf, m->c->gpu);
      ut_str_free(&gi);
    } else {
      load(o, m->val[t].storage, m->val[t].slot, idx.buf, m->c->gpu);
    }
  } else {
    rc_local_name(o, n, "L", t);
    if (m->val[t].lsize > 1) {
      rc_linear(&idx, &n->shape, a->index, m->prefix);
      ut_str_printf(o, "[%s]", idx.buf);
    }
  }
  if (sel) { /* a bitwise select: a ?: here would be sunk into a masked load again */
    ut_str_printf(o, "; hp_sel(%s, l_, ", guard);
    float_const(o, n->dtype, a->fill);
    ut_str_puts(o, "); })");
  } else if (a->guard) {
    ut_str_puts(o, " : ");
    for (int q = 0; q < a->nalt; q++) {
      ut_str_printf(o, "(%s) ? ", a->alt_guard[q]);
      if (is_int(n->dtype)) ut_str_printf(o, "(int32_t)%d", (int)a->alt_fill[q]);
      else float_const(o, n->dtype, a->alt_fill[q]);
      ut_str_puts(o, " : ");
    }
    if (is_int(n->dtype)) ut_str_printf(o, "(int32_t)%d", (int)a->fill);
    else float_const(o, n->dtype, a->fill);
    ut_str_putc(o, ')');
  }
  free(guard);
  (void)want;
  ut_str_free(&idx);
}

/* expr without an outer call `fn(...)` when it is exactly one (the rounding
 * hp_rh / hp_rb before a store that rounds the same way: once is enough). */
static const char *strip_call(const char *expr, const char *fn, ut_str *tmp) {
  size_t n = strlen(fn), len = strlen(expr);
  if (strncmp(expr, fn, n) || expr[n] != '(' || len < n + 2 || expr[len - 1] != ')') return expr;
  int depth = 0;
  for (size_t i = n; i < len - 1; i++) {
    depth += expr[i] == '(' ? 1 : expr[i] == ')' ? -1 : 0;
    if (depth == 0) return expr; /* the call closes before the end: fn(a) + (b) */
  }
  ut_str_printf(tmp, "%.*s", (int)(len - n - 2), expr + n + 1);
  return tmp->oom ? expr : tmp->buf;
}

/* Store `expr` (compute representation of node t) at the write access. */
static void store_value(emit *m, const poly_ast_access *a, int t, const char *expr) {
  const tiny_node *n = &m->c->g->nodes[t];
  ut_str *o = m->o;
  ut_str idx;
  ut_str_init(&idx);
  if (m->val[t].kind == ST_BUF) {
    rc_linear(&idx, &n->shape, a->index, 0);
    int s = m->val[t].slot;
    ut_str_printf(o, m->c->gpu ? "HP_AT(p%d, %s) = " : "p%d[%s] = ", s, idx.buf);
    ut_str tmp;
    ut_str_init(&tmp);
    switch (m->val[t].storage) {
    case TINY_FP16: ut_str_printf(o, "hp_f2h(%s);\n", strip_call(expr, "hp_rh", &tmp)); break;
    case TINY_BF16: ut_str_printf(o, "hp_f2b(%s);\n", strip_call(expr, "hp_rb", &tmp)); break;
    case TINY_BOOL: ut_str_printf(o, "(uint8_t)((%s) != 0);\n", expr); break;
    default: ut_str_printf(o, "%s;\n", expr); break;
    }
    ut_str_free(&tmp);
  } else {
    rc_local_name(o, n, "L", t);
    if (m->val[t].lsize > 1) {
      rc_linear(&idx, &n->shape, a->index, m->prefix);
      ut_str_printf(o, "[%s]", idx.buf);
    }
    ut_str_printf(o, " = %s;\n", expr);
  }
  ut_str_free(&idx);
}

static void unary(ut_str *o, tiny_op op, bool in_int, const char *x, bool gpu) {
  if (in_int) {
    if (op == TINY_NEG) ut_str_printf(o, "(int32_t)(0u - (uint32_t)(%s))", x);
    else ut_str_printf(o, "(%s < 0 ? 0 : %s)", x, x); /* RELU */
    return;
  }
  switch (op) {
  case TINY_NEG: ut_str_printf(o, "(-(%s))", x); break;
  case TINY_EXP2: ut_str_printf(o, "hp_exp2f(%s)", x); break;
  case TINY_LOG2: ut_str_printf(o, "hp_log2f(%s)", x); break;
  case TINY_EXP: ut_str_printf(o, "hp_expf(%s)", x); break;
  case TINY_SQRT: ut_str_printf(o, "sqrtf(%s)", x); break;
  case TINY_RSQRT: ut_str_printf(o, "(1.0f / sqrtf(%s))", x); break;
  case TINY_RECIP: ut_str_printf(o, "(1.0f / (%s))", x); break;
  case TINY_FLOOR: ut_str_printf(o, "floorf(%s)", x); break;
  case TINY_CEIL: ut_str_printf(o, "ceilf(%s)", x); break;
  case TINY_ROUND: ut_str_printf(o, "rintf(%s)", x); break;
  case TINY_RELU: ut_str_printf(o, gpu ? "hp_relu(%s)" : "({ float r_ = %s; r_ < 0 ? 0.0f : r_; })", x); break;
  case TINY_GELU:
    ut_str_printf(o, gpu ? "hp_gelu(%s)" : "({ float g_ = %s; 0.5f * g_ * (1.0f + hp_erff(g_ * 0.70710678118654752f)); })", x);
    break;
  default: ut_str_puts(o, "0");
  }
}

static void binary(ut_str *o, tiny_op op, bool in_int, const char *a, const char *b, bool gpu) {
  const char *w = NULL;
  switch (op) {
  case TINY_ADD: w = in_int ? "(int32_t)((uint32_t)(%s) + (uint32_t)(%s))" : "((%s) + (%s))"; break;
  case TINY_SUB: w = in_int ? "(int32_t)((uint32_t)(%s) - (uint32_t)(%s))" : "((%s) - (%s))"; break;
  case TINY_MUL: w = in_int ? "(int32_t)((uint32_t)(%s) * (uint32_t)(%s))" : "((%s) * (%s))"; break;
  case TINY_FDIV: w = "((%s) / (%s))"; break;
  case TINY_MAX: w = in_int ? (gpu ? "hp_imax(%s, %s)" : "({ int32_t a_ = %s, b_ = %s; a_ > b_ ? a_ : b_; })") : "hp_fmax(%s, %s)"; break;
  case TINY_MIN: w = in_int ? (gpu ? "hp_imin(%s, %s)" : "({ int32_t a_ = %s, b_ = %s; a_ < b_ ? a_ : b_; })") : "hp_fmin(%s, %s)"; break;
  case TINY_CMPLT: w = "(int32_t)((%s) < (%s))"; break;
  case TINY_CMPEQ: w = "(int32_t)((%s) == (%s))"; break;
  case TINY_CMPNE: w = "(int32_t)((%s) != (%s))"; break;
  default: w = "0"; break;
  }
  ut_str_printf(o, w, a, b);
}

static void cast(ut_str *o, tiny_dtype from, tiny_dtype to, const char *x) {
  if (to == TINY_BOOL) ut_str_printf(o, "(int32_t)((%s) != 0)", x);
  else if (to == TINY_I32) ut_str_printf(o, is_int(from) ? "(%s)" : "hp_f2i(%s)", x);
  else ut_str_printf(o, "%s((float)(%s))", round_fn(to), x);
}

void rc_ewise_expr(ut_str *o, const tiny_graph *g, const tiny_node *n, const char *const *x, bool gpu) {
  tiny_class cls = tiny_op_class(n->op);
  const tiny_node *ref = &g->nodes[n->src[n->op == TINY_WHERE ? 1 : 0].node];
  bool in_int = is_int(ref->dtype);
  if (n->op == TINY_CAST) cast(o, ref->dtype, n->a.cast.to, x[0]);
  else if (cls == TC_UNARY) unary(o, n->op, in_int, x[0], gpu);
  else if (cls == TC_BINARY) binary(o, n->op, in_int, x[0], x[1], gpu);
  else ut_str_printf(o, "((%s) ? (%s) : (%s))", x[0], x[1], x[2]);
}

void rc_float_const(ut_str *o, tiny_dtype t, double v) { float_const(o, t, v); }

/* ---- statements -------------------------------------------------------------- */
static bool produced_here(emit *m, int t) {
  for (int k = 0; k < m->R->nblocks; k++) {
    const poly_block_info *b = poly_block(m->c->pv, m->R->blocks[k]);
    for (int i = 0; i < b->nnodes; i++)
      if (b->nodes[i] == t) return true;
  }
  return false;
}

/* C text of one read of block b's access a. */
static char *read_text(emit *m, const poly_ast *u, int a, int t) {
  ut_str *save = m->o, s;
  ut_str_init(&s);
  m->o = &s;
  read_value(m, &u->access[a], t, m->c->g->nodes[t].dtype);
  m->o = save;
  return ut_str_take(&s);
}

/* A contraction operand: the base element with the CASTs on its path
 * applied, base side first (via lists them nearest the block first).  When
 * the base is not readable here (a value inside another region), the
 * statement reads a stage instead (nest_setup): a CAST on the path that is
 * materialized, at its own index, with the CASTs nearer the block applied. */
static bool readable(emit *m, int t) { return m->val[t].kind != ST_LOCAL || produced_here(m, t); }

/* The stage contraction operand a is read at: 0 (the base) when it is
 * readable, else the readable CAST nearest the base; -1: none is. */
static int operand_stage(emit *m, const poly_block_info *b, int a) {
  const poly_access_info *ai = &b->access[a];
  if (readable(m, ai->tensor)) return 0;
  for (int q = ai->nstage; q >= 1; q--)
    if (readable(m, ai->stage[q - 1])) return q;
  return -1;
}

static char *read_through_casts(emit *m, const poly_ast *u, const poly_block_info *b, int a) {
  const tiny_graph *g = m->c->g;
  const poly_access_info *ai = &b->access[a];
  int q = m->stmts[u->stmt].stage[a];
  int start = ai->nvia, src = ai->tensor; /* via[start..] are already applied to src */
  if (q > 0) {
    src = ai->stage[q - 1];
    for (start = ai->nvia - 1; start >= 0 && ai->via[start] != src; start--) {}
    if (start < 0) {
      ut_fail(m->c->e, HARP_E_INTERNAL, b->name, "stage %s is not on the operand's path", g->nodes[src].id);
      return NULL;
    }
  } else if (!readable(m, src)) {
    ut_fail(m->c->e, HARP_E_UNSUPPORTED, b->name, "operand %s is not readable in this region, nor any CAST on its path",
            g->nodes[ai->tensor].id);
    return NULL;
  }
  char *x = read_text(m, u, a, src);
  tiny_dtype cur = g->nodes[src].dtype;
  for (int v = start - 1; v >= 0 && x; v--) {
    const tiny_node *c = &g->nodes[ai->via[v]];
    if (c->op != TINY_CAST) continue;
    ut_str s;
    ut_str_init(&s);
    cast(&s, cur, c->a.cast.to, x);
    free(x);
    x = ut_str_take(&s);
    cur = c->a.cast.to;
  }
  return x;
}

void rc_acc_ref(emit *m, const poly_ast *u, const poly_block_info *b, ut_str *o) {
  const tiny_node *n = &m->c->g->nodes[b->node];
  rc_local_name(o, n, "A", b->node);
  int64_t size = 1;
  for (int d = m->prefix; d < b->nout; d++) size *= n->shape.d[d].n;
  if (size > 1) {
    ut_str_putc(o, '[');
    rc_linear(o, &n->shape, u->vars, m->prefix);
    ut_str_putc(o, ']');
  }
}

/* An fp32 max/min into a scalar accumulator keeps NaN in a flag of its own
 * (N<node>_...): the accumulator itself is then a plain max/min, which
 * `omp simd reduction(max:...)` vectorizes to one vmaxps per vector instead
 * of hp_fmax's compare-and-blend chain; FINAL gives NaN when the flag is up,
 * as hp_fmax would.  CPU only (the GPU code has no NAN macro). */
bool rc_nan_flag(const emit *m, const poly_block_info *b) {
  const tiny_node *n = &m->c->g->nodes[b->node];
  if (m->c->gpu || b->kind != POLY_REDUCE || n->a.reduce.dtype != TINY_FP32 || n->a.reduce.op == TINY_RSUM) return false;
  for (int d = m->prefix; d < b->nout; d++)
    if (n->shape.d[d].n != 1) return false;
  return true;
}

void rc_flag_name(ut_str *o, const emit *m, const poly_block_info *b) {
  rc_local_name(o, &m->c->g->nodes[b->node], "N", b->node);
}

harp_status rc_stmt_body(emit *m, const poly_ast *u) {
  const poly_stmt_spec *sp = &m->stmts[u->stmt];
  const poly_block_info *b = poly_block(m->c->pv, sp->block);
  const tiny_graph *g = m->c->g;
  const tiny_node *n = &g->nodes[b->node];
  ut_str *o = m->o, ex, acc;
  ut_str_init(&ex);
  ut_str_init(&acc);
  int w = b->naccess - 1; /* the write */
  bool reduction = b->kind == POLY_REDUCE || b->kind == POLY_CONTRACTION;
  if (reduction) {
    tiny_reduce_op rop = n->a.reduce.op;
    tiny_dtype ad = n->a.reduce.dtype;
    rc_acc_ref(m, u, b, &acc);
    if (sp->role == POLY_STMT_INIT) {
      double init = n->a.reduce.has_init ? n->a.reduce.init : rop == TINY_RSUM ? 0.0 : rop == TINY_RMAX ? -INFINITY : INFINITY;
      if (is_int(ad)) {
        if (n->a.reduce.has_init) ut_str_printf(o, "%s = (int32_t)%.0f;\n", acc.buf, init);
        else ut_str_printf(o, "%s = %s;\n", acc.buf, rop == TINY_RSUM ? "0" : rop == TINY_RMAX ? "INT32_MIN" : "INT32_MAX");
      } else {
        ut_str_printf(o, "%s = ", acc.buf);
        float_const(o, ad, init);
        ut_str_puts(o, ";");
        if (rc_nan_flag(m, b)) {
          ut_str_putc(o, ' ');
          rc_flag_name(o, m, b);
          ut_str_puts(o, " = 0;");
        }
        ut_str_putc(o, '\n');
      }
    } else if (sp->role == POLY_STMT_BODY) {
      char *v;
      if (b->kind == POLY_CONTRACTION) {
        char *l = read_through_casts(m, u, b, 0), *r = read_through_casts(m, u, b, 1);
        if (!l || !r) {
          free(l);
          free(r);
          ut_str_free(&ex);
          ut_str_free(&acc);
          return m->c->e->code ? m->c->e->code : ut_fail(m->c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
        }
        /* MUL in its dtype's representation, then the CAST between MUL and REDUCE */
        const tiny_node *mul = &g->nodes[b->con->mul_node];
        bool mi = is_int(mul->dtype);
        ut_str prod;
        ut_str_init(&prod);
        binary(&prod, TINY_MUL, mi, l, r, m->c->gpu);
        int cast_node = n->src[0].node;
        if (cast_node != b->con->mul_node) cast(&ex, mul->dtype, g->nodes[cast_node].dtype, prod.buf);
        else ut_str_puts(&ex, prod.buf);
        ut_str_free(&prod);
        free(l);
        free(r);
      } else {
        v = read_text(m, u, 0, b->access[0].tensor);
        ut_str_puts(&ex, v);
        free(v);
      }
      if (is_int(ad)) {
        ut_str_printf(o, "{ int32_t v_ = %s; %s = ", ex.buf, acc.buf);
        if (rop == TINY_RSUM) ut_str_printf(o, "(int32_t)((uint32_t)%s + (uint32_t)v_); }\n", acc.buf);
        else ut_str_printf(o, "v_ %s %s ? v_ : %s; }\n", rop == TINY_RMAX ? ">" : "<", acc.buf, acc.buf);
      } else {
        ut_str_printf(o, "{ float v_ = %s; %s = %s(", ex.buf, acc.buf, round_fn(ad));
        if (rop == TINY_RSUM) {
          ut_str_printf(o, "%s + v_); }\n", acc.buf);
        } else if (rc_nan_flag(m, b) && m->simd_outer) {
          /* each lane runs a whole reduction: NaN is kept in the accumulator
           * (GCC's outer-loop vectorizer takes this select, not a flag) */
          ut_str_printf(o, "(%s %s v_ || %s != %s) ? %s : v_); }\n", acc.buf, rop == TINY_RMAX ? ">" : "<", acc.buf,
                        acc.buf, acc.buf);
        } else if (rc_nan_flag(m, b)) {
          ut_str_printf(o, "v_ %s %s ? v_ : %s); ", rop == TINY_RMAX ? ">" : "<", acc.buf, acc.buf);
          rc_flag_name(o, m, b);
          ut_str_puts(o, " |= v_ != v_; }\n");
        } else {
          ut_str_printf(o, "%s(%s, v_)); }\n", rop == TINY_RMAX ? "hp_fmax" : "hp_fmin", acc.buf);
        }
      }
    } else if (rc_nan_flag(m, b)) { /* FINAL */
      ut_str fin;
      ut_str_init(&fin);
      ut_str_putc(&fin, '(');
      rc_flag_name(&fin, m, b);
      ut_str_printf(&fin, " ? NAN : %s)", acc.buf);
      store_value(m, &u->access[w], b->node, fin.buf ? fin.buf : acc.buf);
      if (fin.oom) acc.oom = true;
      ut_str_free(&fin);
    } else { /* FINAL */
      store_value(m, &u->access[w], b->node, acc.buf);
    }
  } else if (b->kind == POLY_MOVEMENT_AFFINE) {
    char *v = read_text(m, u, 0, b->access[0].tensor);
    store_value(m, &u->access[w], b->node, v);
    free(v);
  } else { /* ewise: the node's op on its sources (access k = source k) */
    char *x[TINY_MAX_SRC] = {0};
    for (int k = 0; k < n->nsrc; k++) x[k] = read_text(m, u, k, b->access[k].tensor); /* the base, through views */
    rc_ewise_expr(&ex, g, n, (const char *const *)x, m->c->gpu);
    store_value(m, &u->access[w], b->node, ex.buf);
    for (int k = 0; k < n->nsrc; k++) free(x[k]);
  }
  bool oom = ex.oom || acc.oom;
  ut_str_free(&ex);
  ut_str_free(&acc);
  return oom ? ut_fail(m->c->e, HARP_E_NO_MEMORY, NULL, "out of memory") : HARP_OK;
}


/* ---- the region ---------------------------------------------------------------- */
static int slot_of(const fn_kernel *K, const fn_function *f, int node) {
  for (int k = 0; k < K->nreads; k++)
    if (f->buffers[K->reads[k]].node == node) return k;
  for (int k = 0; k < K->nwrites; k++)
    if (f->buffers[K->writes[k]].node == node) return K->nreads + k;
  return -1;
}

static tiny_dtype xs_dt_of(emit *m, int node) { return m->c->f->buffers[m->c->f->buffer_of[node]].dtype; }

static harp_status emit_gather(emit *m, const char *fn, long *chunk_len) {
  const tiny_graph *g = m->c->g;
  int node = m->R->out_values[0];
  const tiny_node *n = &g->nodes[node], *x = &g->nodes[n->src[0].node], *ix = &g->nodes[n->src[1].node];
  int sx = slot_of(m->K, m->c->f, n->src[0].node), si = slot_of(m->K, m->c->f, n->src[1].node),
      so = slot_of(m->K, m->c->f, node);
  if (sx < 0 || si < 0 || so < 0)
    return ut_fail(m->c->e, HARP_E_UNSUPPORTED, n->id, "GATHER of a view: materialize its operands first");
  ut_str *o = m->o;
  int axis = n->a.gather.axis, r = n->shape.rank;
  ut_str_printf(o, "static int %s(hprt_pool *pool, void *const *bufs) {\n", fn);
  ut_str_printf(o, "  (void)pool;\n  long total = %" PRId64 "L;\n", tiny_shape_numel(&n->shape));
  ut_str_puts(o, "  for (long i = 0; i < total; i++) {\n    long rest = i, off = 0;\n");
  int64_t xs[TINY_MAX_RANK], st = 1;
  for (int d = x->shape.rank - 1; d >= 0; d--) xs[d] = st, st *= x->shape.d[d].n;
  for (int d = r - 1; d >= 0; d--) {
    ut_str_printf(o, "    long i%d = rest %% %" PRId64 "L; rest /= %" PRId64 "L;\n", d, n->shape.d[d].n, n->shape.d[d].n);
    if (d != axis) ut_str_printf(o, "    off += i%d * %" PRId64 "L;\n", d, xs[d]);
  }
  ut_str_printf(o, "    const %s *restrict p%d = bufs[%d];\n", storage_type(xs_dt_of(m, n->src[0].node)), sx, sx);
  ut_str_printf(o, "    int32_t k = ((const int32_t *)bufs[%d])[i];\n", si);
  ut_str_printf(o, "    if (k < 0 || k >= %" PRId64 ") return 1;\n", x->shape.d[axis].n);
  ut_str_printf(o, "    off += (long)k * %" PRId64 "L;\n", xs[axis]);
  /* through the compute representation: either buffer may be a widened temp */
  tiny_dtype xs_dt = m->c->f->buffers[m->c->f->buffer_of[n->src[0].node]].dtype;
  tiny_dtype os_dt = m->c->f->buffers[m->c->f->buffer_of[node]].dtype;
  ut_str v;
  ut_str_init(&v);
  load(&v, xs_dt, sx, "off", false);
  ut_str_printf(o, "    %s g_ = %s;\n", ctype(n->dtype), v.buf ? v.buf : "0");
  ut_str_free(&v);
  switch (os_dt) {
  case TINY_FP16: ut_str_printf(o, "    ((uint16_t *)bufs[%d])[i] = hp_f2h(g_);\n", so); break;
  case TINY_BF16: ut_str_printf(o, "    ((uint16_t *)bufs[%d])[i] = hp_f2b(g_);\n", so); break;
  case TINY_BOOL: ut_str_printf(o, "    ((uint8_t *)bufs[%d])[i] = (uint8_t)(g_ != 0);\n", so); break;
  default: ut_str_printf(o, "    ((%s *)bufs[%d])[i] = g_;\n", storage_type(os_dt), so); break;
  }
  ut_str_puts(o, "  }\n  return 0;\n}\n\n");
  (void)ix;
  *chunk_len = 0;
  return HARP_OK;
}


/* Does block b read tensor t (access a) at its own point: its variables in
 * order are t's axes, at t's row-major strides (extent-1 axes aside)? */
static bool reads_pointwise(rc_ctx *c, const poly_block_info *b, int bi, int a, int t) {
  const tiny_shape *ts = &c->g->nodes[t].shape;
  int64_t size[POLY_MAX_VARS], st[POLY_MAX_VARS], off = 0, want = 1;
  bool affine = false;
  harp_error e = {0};
  if (b->nvars != ts->rank || poly_access_strides(&e, c->pv, bi, a, st, &off, &affine) || !affine || off != 0) return false;
  ct_block_sizes(c->g, b, size);
  for (int v = b->nvars - 1; v >= 0; v--) {
    if (size[v] != ts->d[v].n) return false;
    if (size[v] > 1 && st[v] != want) return false;
    want *= size[v];
  }
  return true;
}

/* Loop fusion: consecutive BODY statements with the same loops beyond the
 * shared prefix join a group (one loop nest, run in order at each point)
 * when they read the group's earlier values pointwise and read no
 * reduction the group has not finished. */
static void group_statements(emit *m) {
  rc_ctx *c = m->c;
  int next = 0, cur = -1, first = -1, pos = 0;
  for (int k = 0; k < m->nstmts; k++) {
    poly_stmt_spec *sp = &m->stmts[k];
    const poly_block_info *b = poly_block(c->pv, sp->block);
    bool join = cur >= 0 && sp->role == POLY_STMT_BODY;
    if (join) { /* same rest loops as the group's first statement */
      const poly_block_info *f = poly_block(c->pv, m->stmts[first].block);
      int64_t sa[POLY_MAX_VARS], sb[POLY_MAX_VARS];
      ct_block_sizes(c->g, f, sa);
      ct_block_sizes(c->g, b, sb);
      join = f->nvars == b->nvars;
      for (int v = m->prefix; join && v < b->nvars; v++) join = sa[v] == sb[v];
    }
    for (int a = 0; join && a < b->naccess; a++) {
      if (b->access[a].write) continue;
      int t = b->access[a].tensor;
      for (int q = first; join && q < k; q++) {
        const poly_block_info *pb = poly_block(c->pv, m->stmts[q].block);
        if (pb->node != t) continue;
        bool reduction = pb->kind == POLY_REDUCE || pb->kind == POLY_CONTRACTION;
        join = !reduction && reads_pointwise(c, b, sp->block, a, t);
      }
    }
    if (join) {
      sp->group = cur;
      sp->pos = ++pos;
    } else {
      sp->group = next++;
      sp->pos = 0;
      pos = 0;
      cur = sp->role == POLY_STMT_BODY ? sp->group : -1;
      first = k;
    }
  }
}

/* need[i] = node y is i or computed from it; stack holds g->n entries. */
static void mark_needs(const tiny_graph *g, int y, bool *need, int *stack) {
  memset(need, 0, (size_t)g->n * sizeof *need);
  int sp = 0;
  need[y] = true;
  stack[sp++] = y;
  while (sp) {
    const tiny_node *n = &g->nodes[stack[--sp]];
    for (int i = 0; i < n->nsrc; i++) {
      int s = n->src[i].node;
      if (s >= 0 && !need[s]) need[s] = true, stack[sp++] = s;
    }
  }
}

/* The output that local array t may live in, or -1: an fp32 output of the
 * same shape whose elementwise statement reads t at its own coordinates,
 * when every other reader of t is something that output needs (so all of
 * them read t before the output overwrites it) and reads t at its own
 * coordinates or reduces it.  The row of a softmax is then written into y
 * and scaled in place: the output's first touch overlaps the exp arithmetic
 * instead of a separate store pass (harp bench 4096x1024, 1 thread: 7.3 -> 6.6 ms). */
static int row_home(emit *m, int t, const bool *taken, bool *need, int *stack) {
  const rg_region *R = m->R;
  const poly_view *pv = m->c->pv;
  const tiny_graph *g = m->c->g;
  int y = -1;
  for (int q = 0; q < R->nblocks; q++) {
    const poly_block_info *qb = poly_block(pv, R->blocks[q]);
    for (int a = 0; a + 1 < qb->naccess; a++) {
      if (qb->access[a].tensor != t) continue;
      bool ident = poly_access_identity(pv, R->blocks[q], a);
      if (qb->kind != POLY_REDUCE && !ident) return -1;
      const value *v = &m->val[qb->node];
      if (y < 0 && qb->kind == POLY_EWISE && ident && v->kind == ST_BUF && v->storage == TINY_FP32 &&
          g->nodes[qb->node].dtype == TINY_FP32 && !taken[qb->node] &&
          tiny_shape_equal(&g->nodes[qb->node].shape, &g->nodes[t].shape) &&
          poly_access_identity(pv, R->blocks[q], qb->naccess - 1))
        y = qb->node;
    }
  }
  if (y < 0) return -1;
  mark_needs(g, y, need, stack);
  for (int q = 0; q < R->nblocks; q++) {
    const poly_block_info *qb = poly_block(pv, R->blocks[q]);
    for (int a = 0; a + 1 < qb->naccess; a++)
      if (qb->access[a].tensor == t && !need[qb->node]) return -1;
  }
  return y;
}

/* CPU only: local arrays moved into the outputs row_home finds. */
static void home_rows(emit *m) {
  const tiny_graph *g = m->c->g;
  const rg_region *R = m->R;
  bool *taken = ut_xcalloc((size_t)g->n + 1, sizeof *taken), *need = ut_xcalloc((size_t)g->n + 1, sizeof *need);
  int *stack = ut_xcalloc((size_t)g->n + 1, sizeof *stack);
  for (int k = 0; taken && need && stack && k < R->nblocks; k++) {
    const poly_block_info *b = poly_block(m->c->pv, R->blocks[k]);
    int t = b->node;
    if (b->kind != POLY_EWISE || m->val[t].kind != ST_LOCAL || m->val[t].lsize <= 1 || g->nodes[t].dtype != TINY_FP32 ||
        !poly_access_identity(m->c->pv, R->blocks[k], b->naccess - 1))
      continue;
    int y = row_home(m, t, taken, need, stack);
    if (y < 0) continue;
    taken[y] = true;
    m->val[t].kind = ST_BUF;
    m->val[t].slot = m->val[y].slot;
    m->val[t].storage = TINY_FP32;
  }
  free(taken);
  free(need);
  free(stack);
}

/* Storage of every value region r touches, its statements (reductions in
 * three steps), their groups, and which values live in registers. */
static void nest_setup(rc_ctx *c, int r, emit *m) {
  const fn_function *f = c->f;
  const rg_region *R = m->R;
  const tiny_graph *g = c->g;
  int prefix = 1 << 30;
  for (int k = 0; k < R->nblocks; k++) {
    const poly_block_info *b = poly_block(c->pv, R->blocks[k]);
    if (b->nout < prefix) prefix = b->nout;
  }
  /* the loops the blocks share: region formation's, checked with isl */
  m->prefix = R->info ? R->info->prefix : R->nblocks == 1 ? poly_block(c->pv, R->blocks[0])->nout : prefix;
  for (int i = 0; i < g->n; i++) {
    m->val[i].kind = g->nodes[i].op == TINY_CONST ? ST_CONST : ST_LOCAL;
    m->val[i].slot = slot_of(m->K, f, i);
    if (m->val[i].slot >= 0) {
      m->val[i].kind = ST_BUF;
      m->val[i].storage = f->buffers[f->buffer_of[i]].dtype;
    }
    int64_t size = 1;
    for (int d = m->prefix; d < g->nodes[i].shape.rank; d++) size *= g->nodes[i].shape.d[d].n;
    m->val[i].lsize = size;
  }
  /* Statements in block order, reductions in three steps; every INIT first
   * (an accumulator's init depends on nothing), so that a reduction's BODY
   * can share the loop of the values it sums. */
  for (int k = 0; k < R->nblocks; k++) {
    const poly_block_info *b = poly_block(c->pv, R->blocks[k]);
    if (b->kind == POLY_REDUCE || b->kind == POLY_CONTRACTION)
      m->stmts[m->nstmts++] = (poly_stmt_spec){R->blocks[k], POLY_STMT_INIT, -1, 0, {0}};
  }
  for (int k = 0; k < R->nblocks; k++) {
    const poly_block_info *b = poly_block(c->pv, R->blocks[k]);
    bool red = b->kind == POLY_REDUCE || b->kind == POLY_CONTRACTION;
    poly_stmt_spec *body = &m->stmts[m->nstmts++];
    *body = (poly_stmt_spec){R->blocks[k], POLY_STMT_BODY, -1, 0, {0}};
    for (int a = 0; a < 2 && b->kind == POLY_CONTRACTION; a++) {
      int q = operand_stage(m, b, a);
      body->stage[a] = q > 0 ? q : 0; /* none: read_through_casts says so */
    }
    if (red) m->stmts[m->nstmts++] = (poly_stmt_spec){R->blocks[k], POLY_STMT_FINAL, -1, 0, {0}};
  }
  group_statements(m);
  /* A value computed and consumed within one group lives in a register. */
  for (int k = 0; k < m->nstmts; k++) {
    const poly_block_info *b = poly_block(c->pv, m->stmts[k].block);
    int t = b->node;
    if (m->stmts[k].role != POLY_STMT_BODY || b->kind == POLY_REDUCE || b->kind == POLY_CONTRACTION ||
        m->val[t].kind != ST_LOCAL)
      continue;
    bool inside = true;
    for (int q = 0; q < m->nstmts && inside; q++) {
      const poly_block_info *qb = poly_block(c->pv, m->stmts[q].block);
      for (int a = 0; a < qb->naccess && inside; a++)
        if (!qb->access[a].write && qb->access[a].tensor == t) inside = m->stmts[q].group == m->stmts[k].group;
    }
    if (inside) m->val[t].lsize = 1;
  }
  if (!c->gpu) home_rows(m);
  (void)r;
}

/* Declarations of the locals (intermediates and accumulators), `ind` before
 * each.  scratch (GPU, NULL: arrays): arrays become pointers into the
 * per-point slice `scratch` (an unsigned char *), each at the next offset.
 * Returns the bytes of all locals and, in *array_bytes, those of the arrays. */
static int64_t emit_locals(emit *m, ut_str *out, const char *ind, const char *scratch, int64_t *array_bytes) {
  const tiny_graph *g = m->c->g;
  const rg_region *R = m->R;
  int64_t local_bytes = 0, arrays = 0;
  for (int k = 0; k < R->nblocks; k++) {
    const poly_block_info *b = poly_block(m->c->pv, R->blocks[k]);
    const tiny_node *n = &g->nodes[b->node];
    for (int acc = 0; acc < 2; acc++) {
      bool red = b->kind == POLY_REDUCE || b->kind == POLY_CONTRACTION;
      if (acc ? !red : m->val[b->node].kind != ST_LOCAL) continue;
      int64_t size = 1;
      if (acc)
        for (int d = m->prefix; d < b->nout; d++) size *= n->shape.d[d].n;
      else size = m->val[b->node].lsize;
      const char *type = ctype(acc ? n->a.reduce.dtype : n->dtype);
      ut_str_printf(out, "%s%s %s", ind, type, scratch && size > 1 ? "*" : "");
      rc_local_name(out, n, acc ? "A" : "L", b->node);
      if (size > 1 && scratch) ut_str_printf(out, " = (%s *)(%s + %" PRId64 ")", type, scratch, arrays);
      else if (size > 1) ut_str_printf(out, "[%" PRId64 "]", size);
      ut_str_puts(out, ";\n");
      if (acc && rc_nan_flag(m, b)) {
        ut_str_printf(out, "%sint ", ind);
        rc_flag_name(out, m, b);
        ut_str_puts(out, ";\n");
      }
      local_bytes += 4 * size;
      if (size > 1) arrays += 4 * size;
    }
  }
  if (array_bytes) *array_bytes = arrays;
  return local_bytes;
}

harp_status rc_emit_region(rc_ctx *c, int r, const char *fn, ut_str *out, long *chunk_len, rc_packed *pk) {
  const fn_function *f = c->f;
  const rg_region *R = &f->part->regions[f->kernels[r].region];
  const tiny_graph *g = c->g;
  emit m = {c, R, &f->kernels[r], out, 0, ut_xcalloc(3 * (size_t)R->nblocks + 1, sizeof(poly_stmt_spec)), 0,
            ut_xcalloc((size_t)g->n + 1, sizeof(value)), {0}, NULL};
  if (!m.val || !m.stmts) {
    free(m.val);
    free(m.stmts);
    return ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
  }
  harp_status st = HARP_OK;
  *chunk_len = 0;
  memset(pk, 0, sizeof *pk);
  if (R->nblocks == 0) {
    st = emit_gather(&m, fn, chunk_len);
    goto done;
  }
  bool templated = false;
  const char *why = NULL;
  if ((st = cc_emit_template(c, r, fn, out, &templated, &why, pk)) || templated) goto done;
  if (why) ut_str_printf(out, "/* generic loops: the template declined (%s) */\n", why);
  nest_setup(c, r, &m);
  const poly_block_info *b0 = poly_block(c->pv, R->blocks[0]);
  /* threads split the outermost shared loop that is not of extent 1 (a
   * batch of 1 leads most CNN outputs) */
  int cv = 0;
  while (cv + 1 < m.prefix && g->nodes[b0->node].shape.d[cv].n == 1) cv++;
  long outer = m.prefix >= 1 ? (long)g->nodes[b0->node].shape.d[cv].n : 0;
  poly_ast_opts opts = {.prefix = m.prefix, .chunk_outer = outer > 1, .chunk_var = cv};
  poly_ast *tree;
  if ((st = poly_ast_gen(c->e, c->pv, m.stmts, m.nstmts, &opts, c->arena, &tree))) goto done;
  if (!rt_knobs_or_default(c->knobs)->no_coalesce && (st = rc_coalesce(&m, tree))) goto done;
  *chunk_len = opts.chunk_outer ? outer : 0;
  bool floors = false; /* HP_NOTRAP (rc_prelude.c) for a kernel that calls floorf */
  for (int k = 0; k < R->nblocks && !floors; k++) floors = g->nodes[poly_block(c->pv, R->blocks[k])->node].op == TINY_FLOOR;
  ut_str_printf(out, "%sHP_KERNEL static int %s_body(void *const *bufs, long hp_lo, long hp_hi) {\n", floors ? "HP_NOTRAP " : "",
                fn);
  if (!opts.chunk_outer) ut_str_puts(out, "  (void)hp_lo; (void)hp_hi;\n");
  /* one typed restrict pointer per buffer: live buffers never overlap */
  for (int k = 0; k < m.K->nreads + m.K->nwrites; k++) {
    int b = k < m.K->nreads ? m.K->reads[k] : m.K->writes[k - m.K->nreads];
    tiny_dtype dt = f->buffers[b].dtype;
    ut_str_printf(out, "  %s%s *restrict p%d = bufs[%d];\n", k < m.K->nreads ? "const " : "", storage_type(dt), k, k);
  }
  /* locals: intermediates and accumulators.  Past the stack budget the
   * arrays go to the heap, one block per call: blocks that share no loop (a
   * grouped conv's [n, g, oc/g, oh, ow] sums reshaped to y) keep whole-output
   * arrays, slow but never a reason a valid model fails to compile */
  ut_str probe;
  ut_str_init(&probe);
  int64_t arrays = 0, local_bytes = emit_locals(&m, &probe, "  ", NULL, &arrays);
  ut_str_free(&probe);
  bool heap = local_bytes > c->local_budget;
  if (heap && local_bytes - arrays > c->local_budget) {
    st = ut_fail(c->e, HARP_E_UNSUPPORTED, R->name, "region needs %" PRId64 " bytes of scalar locals (budget %d)",
                 local_bytes - arrays, c->local_budget);
    goto done;
  }
  if (heap)
    ut_str_printf(out, "  unsigned char *hp_heap = malloc(%" PRId64 "); /* %" PRId64 " bytes of locals: past the stack budget */\n"
                       "  if (!hp_heap) return 1;\n", arrays, local_bytes);
  emit_locals(&m, out, "  ", heap ? "hp_heap" : NULL, NULL);
  if ((st = rc_print_ast(&m, tree, 1))) goto done;
  ut_str_puts(out, heap ? "  free(hp_heap);\n  return 0;\n}\n\n" : "  return 0;\n}\n\n");
  /* Threads take slices of the outermost shared loop (its iterations are
   * independent: every dependence in the region is the identity on the
   * shared loops).  Small kernels stay on the calling thread. */
  double work = 0;
  for (int k = 0; k < R->nblocks; k++) {
    const poly_block_info *b = poly_block(c->pv, R->blocks[k]);
    const tiny_node *n = &g->nodes[b->node];
    double w = (double)tiny_shape_numel(&n->shape);
    if (b->kind == POLY_REDUCE || b->kind == POLY_CONTRACTION) w = (double)tiny_shape_numel(&g->nodes[n->src[0].node].shape);
    work += w;
  }
  if (*chunk_len > 1 && work >= 32768.0) {
    ut_str_printf(out,
                  "static void %s_task(void *ctx, int t, int tid) {\n"
                  "  hp_chunks *c = ctx;\n  (void)tid;\n"
                  "  if (%s_body(c->bufs, c->len * t / c->ntasks, c->len * (t + 1) / c->ntasks)) c->rc = 1;\n}\n"
                  "static int %s(hprt_pool *pool, void *const *bufs) {\n"
                  "  long len = %ldL;\n  int nt = 2 * hprt_pool_size(pool);\n"
                  "  hp_chunks c = {bufs, len, (int)(nt < len ? nt : len), 0};\n"
                  "  hprt_pool_run(pool, c.ntasks, %s_task, &c);\n  return c.rc;\n}\n\n",
                  fn, fn, fn, *chunk_len, fn);
  } else {
    ut_str_printf(out, "static int %s(hprt_pool *pool, void *const *bufs) {\n  (void)pool;\n  return %s_body(bufs, 0, %ldL);\n}\n\n",
                  fn, fn, *chunk_len > 0 ? *chunk_len : 0L);
  }
  if (out->oom) st = ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
done:
  free(m.val);
  free(m.stmts);
  return st;
}

/* ---- the loop nest for other backends ------------------------------------------ */
typedef struct nest_priv {
  emit m;
} nest_priv;

harp_status rc_nest_build(rc_ctx *c, int r, rc_nest *out) {
  const fn_function *f = c->f;
  const rg_region *R = &f->part->regions[f->kernels[r].region];
  const tiny_graph *g = c->g;
  memset(out, 0, sizeof *out);
  if (R->nblocks == 0) return ut_fail(c->e, HARP_E_INTERNAL, R->name, "a GATHER region has no loop nest");
  nest_priv *p = ut_xcalloc(1, sizeof *p);
  value *val = ut_xcalloc((size_t)g->n + 1, sizeof(value));
  poly_stmt_spec *stmts = ut_xcalloc(3 * (size_t)R->nblocks + 1, sizeof *stmts);
  if (!p || !val || !stmts) {
    free(p);
    free(val);
    free(stmts);
    return ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
  }
  out->priv = p;
  p->m = (emit){c, R, &f->kernels[r], NULL, 0, stmts, 0, val, {0}, NULL};
  nest_setup(c, r, &p->m);
  const poly_block_info *b0 = poly_block(c->pv, R->blocks[0]);
  out->fixed = p->m.prefix;
  for (int i = 0; i < out->fixed; i++) out->extent[i] = g->nodes[b0->node].shape.d[i].n;
  poly_ast_opts opts = {.prefix = p->m.prefix, .fix_outer = out->fixed, .fix_extent = out->extent};
  poly_ast *tree;
  harp_status st = poly_ast_gen(c->e, c->pv, p->m.stmts, p->m.nstmts, &opts, c->arena, &tree);
  if (st) {
    rc_nest_free(out);
    return st;
  }
  out->tree = tree;
  ut_str tmp;
  ut_str_init(&tmp);
  out->local_bytes = emit_locals(&p->m, &tmp, "", NULL, &out->array_bytes);
  ut_str_free(&tmp);
  return HARP_OK;
}

void rc_nest_locals(rc_nest *n, const char *scratch, ut_str *out) {
  nest_priv *p = n->priv;
  emit_locals(&p->m, out, "", scratch, NULL);
}

harp_status rc_nest_stmt(rc_nest *n, const poly_ast *u, ut_str *out) {
  nest_priv *p = n->priv;
  p->m.o = out;
  harp_status st = rc_stmt_body(&p->m, u);
  p->m.o = NULL;
  if (!st && out->len && out->buf[out->len - 1] == '\n') out->buf[--out->len] = 0;
  return st;
}

void rc_nest_free(rc_nest *n) {
  nest_priv *p = n->priv;
  if (p) {
    free(p->m.val);
    free(p->m.stmts);
    free(p);
  }
  memset(n, 0, sizeof *n);
}
