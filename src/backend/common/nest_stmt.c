/* nest_stmt.c — the C text of a loop nest's statements: reads (buffers,
 * locals, constants, padding), stores, elementwise ops, reductions in
 * INIT / BODY / FINAL steps, contraction operands through their CASTs.
 * Needs: the nest's state (nest_int.h: storage of every value).
 * Gives: rc_stmt_body, rc_ewise_expr, rc_float_const, rc_linear, names of
 * locals, accumulators and NaN flags, rc_load, rc_has_token.
 *
 * Arithmetic follows the reference interpreter: fp32 (int32 wrapping for
 * i32), rounding at CAST and when storing fp16/bf16, accumulation in the
 * REDUCE dtype.  The same text serves the CPU and (gpu) CUDA C, but for
 * the CPU's bf16 reads at a divided index (through 32-bit words, which GCC
 * gathers). */
#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/common/nest_int.h"
#include "tiny/tiny_spell.h"

static bool is_int(tiny_dtype t) { return !tiny_dtype_is_float(t); }
const char *rc_ctype(tiny_dtype t) { return is_int(t) ? "int32_t" : "float"; }

bool rc_has_token(const char *text, const char *tok) {
  size_t n = strlen(tok);
  for (const char *p = strstr(text, tok); p; p = strstr(p + 1, tok)) {
    bool l = p == text || !(isalnum((unsigned char)p[-1]) || p[-1] == '_');
    bool r = !(isalnum((unsigned char)p[n]) || p[n] == '_');
    if (l && r) return true;
  }
  return false;
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
void rc_load(ut_str *o, tiny_dtype t, int slot, const char *idx, bool gpu) {
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

/* An even element count, known without symbols, of a buffer of shape s. */
static bool even_static(const rc_nest_ctx *c, const tiny_shape *s) {
  bool even = false;
  for (int d = 0; d < s->rank; d++) {
    if (rc_nest_sym(c, &s->d[d]) >= 0) return false;
    even |= s->d[d].n % 2 == 0;
  }
  return even;
}

/* Loads element idx of a bf16 buffer (slot, an even element count) through
 * the 32-bit word holding it: GCC cannot vectorize a gather of 16-bit
 * elements (no vector type), so a loop reading bf16 at an index it divides
 * (a nearest upsample's x / 2) stayed scalar; a word gather vectorizes.
 * The word of elements idx & ~1, idx | 1 lies inside the buffer. */
static void load_bf16_word(ut_str *o, int slot, const char *idx) {
  ut_str_printf(o, "hp_ubf(({ long i_ = (%s); uint32_t w_; memcpy(&w_, p%d + (i_ & ~1L), 4); ", idx, slot);
  ut_str_puts(o, "i_ & 1 ? w_ & 0xffff0000u : w_ << 16; }))");
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

/* The stride text: lit times the symbols of syms[0..n) (hp_sv<i>). */
static void stride_text(ut_str *o, int64_t lit, const int *syms, int n) {
  if (!n) {
    ut_str_printf(o, "%" PRId64 "L", lit);
    return;
  }
  ut_str_putc(o, '(');
  for (int k = 0; k < n; k++) ut_str_printf(o, "hp_sv%d * ", syms[k]);
  ut_str_printf(o, "%" PRId64 "L)", lit);
}

/* Row-major linear index of dims [from, rank) of `shape` from index texts.
 * Two adjacent axes indexed (X / n, X % n), n the inner one's size, are X
 * times the inner stride: C's / and % give (X / n) * n + X % n == X.  With
 * c's symbols, a dim of a symbol's size multiplies the strides outside it
 * by its parameter hp_sv<i> (the literal factor: the other dims). */
void rc_linear(ut_str *o, const rc_nest_ctx *c, const tiny_shape *shape, const char *const *index, int from) {
  int64_t stride = 1;
  int syms[TINY_MAX_RANK], ns = 0;
  bool any = false;
  ut_str_putc(o, '(');
  for (int d = shape->rank - 1; d >= from; d--) {
    size_t x = d > from && shape->d[d].n > 1 ? split_pair(index[d], index[d - 1], shape->d[d].n) : 0;
    if (x) {
      ut_str_printf(o, "%s(%.*s) * ", any ? " + " : "", (int)x, index[d] + 1);
      stride_text(o, stride, syms, ns);
      any = true;
      int i = c ? rc_nest_sym(c, &shape->d[d]) : -1;
      if (i >= 0) syms[ns++] = i;
      else stride *= shape->d[d].n;
      d--;
    } else if (shape->d[d].n != 1 && strcmp(index[d], "0")) { /* "0": an axis left out (uniform_guard_index) */
      ut_str_printf(o, "%s(%s) * ", any ? " + " : "", index[d]);
      stride_text(o, stride, syms, ns);
      any = true;
    }
    int i = c ? rc_nest_sym(c, &shape->d[d]) : -1;
    if (i >= 0) syms[ns++] = i;
    else stride *= shape->d[d].n;
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
  const tiny_shape *sh = rc_acc_shape(a, n);
  for (int d = 0; d < sh->rank; d++) {
    bool k = only_token(a->index[d], v);
    any |= k && rc_has_token(a->index[d], v);
    keep[d] = k ? a->index[d] : "0", rest[d] = k ? "0" : a->index[d];
  }
  if (!any) return false;
  rc_linear(o, m->c, sh, keep, 0);
  ut_str_puts(o, " + ");
  rc_linear(o, m->c, sh, rest, 0);
  ut_str_printf(o, " * (long)(%s)", guard);
  return true;
}

/* Node t's register-local value at access a: its name, then [index] when
 * it holds more than one element (idx: scratch for the index text). */
static void local_ref(emit *m, const poly_ast_access *a, int t, ut_str *idx) {
  const tiny_node *n = &m->c->g->nodes[t];
  ut_str *o = m->o;
  rc_local_name(o, n, "L", t);
  if (m->val[t].lsize > 1) {
    rc_linear(idx, m->c, &n->shape, a->index, m->prefix);
    if (idx->oom) o->oom = true;
    ut_str_printf(o, "[%s]", idx->buf ? idx->buf : "");
  }
}

/* A ShapeSet object's mean: constant t read by m->reader, an FDIV of a
 * REDUCE by t (through reshapes and expands) where t is the count of
 * elements it sums and the count is of symbols' sizes; the count printed
 * as their product, hp_sv<i> (rc_linear's names).  False: t as it is. */
static bool mean_count(emit *m, int t, ut_str *o) {
  const tiny_graph *g = m->c->g;
  if (!m->c->nsyms || m->reader < 0 || g->nodes[m->reader].op != TINY_FDIV) return false;
  const tiny_node *d = &g->nodes[m->reader], *red = &g->nodes[d->src[0].node];
  int c = d->src[1].node;
  while (c >= 0 && c != t && (g->nodes[c].op == TINY_RESHAPE || g->nodes[c].op == TINY_EXPAND)) c = g->nodes[c].src[0].node;
  if (c != t || red->op != TINY_REDUCE || red->nsrc < 1) return false;
  const tiny_shape *xs = &g->nodes[red->src[0].node].shape;
  int64_t lit = 1, count = 1;
  ut_str x;
  ut_str_init(&x);
  for (int k = 0; k < red->a.reduce.n; k++) {
    const tiny_dim *dm = &xs->d[red->a.reduce.axis_idx[k]];
    int i = rc_nest_sym(m->c, dm);
    count *= dm->n;
    if (i >= 0) ut_str_printf(&x, "hp_sv%d * ", i);
    else lit *= dm->n;
  }
  bool ok = x.len && !x.oom && (double)count == g->nodes[t].a.cnst.value;
  if (ok) ut_str_printf(o, "((float)(%s%" PRId64 "L))", x.buf, lit);
  ut_str_free(&x);
  return ok;
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
    else if (!mean_count(m, t, o)) float_const(o, n->dtype, v);
  } else if (m->val[t].kind == ST_BUF) {
    rc_linear(&idx, m->c, rc_acc_shape(a, n), a->index, 0);
    if (idx.oom) o->oom = true; /* the statement is incomplete: the emission fails */
    if (!idx.buf) {
    } else if (sel && !idx.oom) {
      ut_str gi;
      ut_str_init(&gi);
      if (!uniform_guard_index(&gi, m, n, a, guard))
        ut_str_printf(&gi, "(%s) * (long)(%s)", idx.buf, guard); /* a ?: here turns into a pointer phi */
      rc_load(o, m->val[t].storage, m->val[t].slot, gi.oom ? idx.buf : gi.buf, m->c->gpu);
      ut_str_free(&gi);
    } else if (!m->c->gpu && m->val[t].storage == TINY_BF16 && strpbrk(idx.buf, "/%") &&
               even_static(m->c, &n->shape)) {
      load_bf16_word(o, m->val[t].slot, idx.buf); /* an index divided: a gather */
    } else {
      rc_load(o, m->val[t].storage, m->val[t].slot, idx.buf, m->c->gpu);
    }
  } else {
    local_ref(m, a, t, &idx);
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
    rc_linear(&idx, m->c, &n->shape, a->index, 0);
    if (idx.oom || !expr) { /* an allocation failed: the statement would be wrong */
      o->oom = true;
      ut_str_free(&idx);
      return;
    }
    int s = m->val[t].slot;
    if (m->row.iter && t == m->row.node) { /* the float row now, the half store after the loop */
      bool h = m->val[t].storage == TINY_FP16;
      ut_str tmp;
      ut_str_init(&tmp);
      ut_str_printf(o, "hp_row[%s - %ldL] = %s;\n", m->row.iter, m->row.lo, strip_call(expr, h ? "hp_rh" : "hp_rb", &tmp));
      ut_str_printf(m->row.tail, "p%d[%s] = %s(hp_row[%s - %ldL]);", s, idx.buf, h ? "hp_f2h" : "hp_f2b", m->row.iter,
                    m->row.lo);
      ut_str_free(&tmp);
      ut_str_free(&idx);
      return;
    }
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
    local_ref(m, a, t, &idx);
    if (!expr) o->oom = true;
    ut_str_printf(o, " = %s;\n", expr ? expr : "");
  }
  ut_str_free(&idx);
}

static void cast(ut_str *o, tiny_dtype from, tiny_dtype to, const char *x) {
  if (to == TINY_BOOL) ut_str_printf(o, "(int32_t)((%s) != 0)", x);
  else if (to == TINY_I32) ut_str_printf(o, is_int(from) ? "(%s)" : "hp_f2i(%s)", x);
  else if (to == TINY_I8 || to == TINY_U8) /* modulo 256 */
    ut_str_printf(o, is_int(from) ? "(int32_t)(%s)(%s)" : "(int32_t)(%s)hp_f2i(%s)", to == TINY_I8 ? "int8_t" : "uint8_t", x);
  else ut_str_printf(o, "%s((float)(%s))", round_fn(to), x);
}

void rc_ewise_expr(ut_str *o, const tiny_graph *g, const tiny_node *n, const char *const *x, bool gpu) {
  const tiny_node *ref = &g->nodes[n->src[n->op == TINY_WHERE ? 1 : 0].node];
  bool in_int = is_int(ref->dtype);
  const char *text = tiny_op_c(n->op, in_int, gpu); /* the op table's C */
  if (n->op == TINY_CAST) cast(o, ref->dtype, n->a.cast.to, x[0]);
  else if (text) tiny_op_spell(o, text, x, tiny_op_arity(n->op));
  else ut_str_puts(o, "0");
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
  m->reader = poly_block(m->c->pv, m->stmts[u->stmt].block)->node;
  read_value(m, &u->access[a], t, m->c->g->nodes[t].dtype);
  m->reader = -1;
  m->o = save;
  return ut_str_take(&s);
}

/* A contraction operand: the base element with the CASTs on its path
 * applied, base side first (via lists them nearest the block first).  When
 * the base is not readable here (a value inside another region), the
 * statement reads a stage instead (nest_setup): a CAST on the path that is
 * materialized, at its own index, with the CASTs nearer the block applied. */
static bool readable(emit *m, int t) { return m->val[t].kind != ST_LOCAL || produced_here(m, t); }

int rc_operand_stage(emit *m, const poly_block_info *b, int a) {
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
    rc_linear(o, m->c, &n->shape, u->vars, m->prefix);
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

/* The INIT step of reduction b (node n) in m: its accumulator acc set to
 * the REDUCE's init, or the op's identity, and its NaN flag cleared. */
static void reduce_init(emit *m, const poly_block_info *b, const tiny_node *n, const char *acc) {
  ut_str *o = m->o;
  tiny_reduce_op rop = n->a.reduce.op;
  tiny_dtype ad = n->a.reduce.dtype;
  double init = n->a.reduce.has_init ? n->a.reduce.init : rop == TINY_RSUM ? 0.0 : rop == TINY_RMAX ? -INFINITY : INFINITY;
  if (is_int(ad)) {
    if (n->a.reduce.has_init) ut_str_printf(o, "%s = (int32_t)%.0f;\n", acc, init);
    else ut_str_printf(o, "%s = %s;\n", acc, rop == TINY_RSUM ? "0" : rop == TINY_RMAX ? "INT32_MIN" : "INT32_MAX");
  } else {
    ut_str_printf(o, "%s = ", acc);
    float_const(o, ad, init);
    ut_str_puts(o, ";");
    if (rc_nan_flag(m, b)) {
      ut_str_putc(o, ' ');
      rc_flag_name(o, m, b);
      ut_str_puts(o, " = 0;");
    }
    ut_str_putc(o, '\n');
  }
}

/* The product contraction b of m's statement u sums, into ex: the MUL of
 * its operands (read through their CASTs) in the MUL's dtype, then the
 * CAST between MUL and REDUCE (node n's source). */
static harp_status contraction_product(emit *m, const poly_ast *u, const poly_block_info *b, const tiny_node *n,
                                       ut_str *ex) {
  const tiny_graph *g = m->c->g;
  char *l = read_through_casts(m, u, b, 0), *r = read_through_casts(m, u, b, 1);
  if (!l || !r) {
    free(l);
    free(r);
    return m->c->e->code ? m->c->e->code : ut_fail(m->c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
  }
  /* MUL in its dtype's representation, then the CAST between MUL and REDUCE */
  const tiny_node *mul = &g->nodes[b->con->mul_node];
  bool mi = is_int(mul->dtype);
  ut_str prod;
  ut_str_init(&prod);
  const char *lr[2] = {l, r};
  tiny_op_spell(&prod, tiny_op_c(TINY_MUL, mi, m->c->gpu), lr, 2);
  int cast_node = n->src[0].node;
  if (cast_node != b->con->mul_node) cast(ex, mul->dtype, g->nodes[cast_node].dtype, prod.buf);
  else ut_str_puts(ex, prod.buf);
  ut_str_free(&prod);
  free(l);
  free(r);
  return HARP_OK;
}

/* The BODY step's update of reduction b (node n) in m: the value ex
 * folded into the accumulator acc by the REDUCE's op, in its dtype
 * (int32 wrapping; floats rounded, NaN kept by a flag or a select). */
static void reduce_update(emit *m, const poly_block_info *b, const tiny_node *n, const char *ex, const char *acc) {
  ut_str *o = m->o;
  tiny_reduce_op rop = n->a.reduce.op;
  tiny_dtype ad = n->a.reduce.dtype;
  if (is_int(ad)) {
    ut_str_printf(o, "{ int32_t v_ = %s; %s = ", ex, acc);
    if (rop == TINY_RSUM) ut_str_printf(o, "(int32_t)((uint32_t)%s + (uint32_t)v_); }\n", acc);
    else ut_str_printf(o, "v_ %s %s ? v_ : %s; }\n", rop == TINY_RMAX ? ">" : "<", acc, acc);
    return;
  }
  ut_str_printf(o, "{ float v_ = %s; %s = %s(", ex, acc, round_fn(ad));
  if (rop == TINY_RSUM) {
    ut_str_printf(o, "%s + v_); }\n", acc);
  } else if (rc_nan_flag(m, b) && m->simd_outer) {
    /* each lane runs a whole reduction: NaN is kept in the accumulator
     * (GCC's outer-loop vectorizer takes this select, not a flag) */
    ut_str_printf(o, "(%s %s v_ || %s != %s) ? %s : v_); }\n", acc, rop == TINY_RMAX ? ">" : "<", acc, acc, acc);
  } else if (rc_nan_flag(m, b)) {
    ut_str_printf(o, "v_ %s %s ? v_ : %s); ", rop == TINY_RMAX ? ">" : "<", acc, acc);
    rc_flag_name(o, m, b);
    ut_str_puts(o, " |= v_ != v_; }\n");
  } else {
    ut_str_printf(o, "%s(%s, v_)); }\n", rop == TINY_RMAX ? "hp_fmax" : "hp_fmin", acc);
  }
}

/* The FINAL step of reduction b in m's statement u: the accumulator acc
 * (NaN where its flag is set) stored through the write access w; a failed
 * allocation marks acc. */
static void reduce_final(emit *m, const poly_ast *u, const poly_block_info *b, int w, ut_str *acc) {
  if (!rc_nan_flag(m, b)) {
    store_value(m, &u->access[w], b->node, acc->buf);
    return;
  }
  ut_str fin;
  ut_str_init(&fin);
  ut_str_putc(&fin, '(');
  rc_flag_name(&fin, m, b);
  ut_str_printf(&fin, " ? NAN : %s)", acc->buf);
  store_value(m, &u->access[w], b->node, fin.buf ? fin.buf : acc->buf);
  if (fin.oom) acc->oom = true;
  ut_str_free(&fin);
}

harp_status rc_stmt_body(emit *m, const poly_ast *u) {
  const poly_stmt_spec *sp = &m->stmts[u->stmt];
  const poly_block_info *b = poly_block(m->c->pv, sp->block);
  const tiny_graph *g = m->c->g;
  const tiny_node *n = &g->nodes[b->node];
  ut_str ex, acc;
  ut_str_init(&ex);
  ut_str_init(&acc);
  int w = b->naccess - 1; /* the write */
  bool reduction = b->kind == POLY_REDUCE || b->kind == POLY_CONTRACTION;
  if (reduction) {
    rc_acc_ref(m, u, b, &acc);
    if (sp->role == POLY_STMT_INIT) {
      reduce_init(m, b, n, acc.buf);
    } else if (sp->role == POLY_STMT_BODY) {
      if (b->kind == POLY_CONTRACTION) {
        harp_status st = contraction_product(m, u, b, n, &ex);
        if (st) {
          ut_str_free(&ex);
          ut_str_free(&acc);
          return st;
        }
      } else {
        char *v = read_text(m, u, 0, b->access[0].tensor);
        ut_str_puts(&ex, v);
        free(v);
      }
      reduce_update(m, b, n, ex.buf, acc.buf);
    } else { /* FINAL */
      reduce_final(m, u, b, w, &acc);
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
