/* region_loops.c — prints a region's isl loop tree as C: innermost loops
 * as `omp simd` with their reduction/private clauses, and the pass of a
 * loop over rows that prefetches the next row (next_row_plan).
 * Needs: the loop nest's state (src/backend/common/nest_int.h).
 * Gives: rc_print_ast, rc_subst_tokens, rc_const_trips. */
#include <stdio.h>
#include <stdlib.h>
#include <ctype.h>
#include <string.h>

#include "cgen_int.h"
#include "region_c_int.h"
static void indent(ut_str *o, int d) {
  for (int i = 0; i < d; i++) ut_str_puts(o, "  ");
}

/* ---- innermost loops as `omp simd` ------------------------------------------ */
typedef struct simd_scan {
  const char *iter;
  bool ok;
  ut_str priv, red; /* private(...) and reduction(...) items */
  bool outer;       /* the loop may hold loops (outer-loop simd: their iterations run in each lane) */
} simd_scan;

static bool stmt_in(const poly_ast *a, int k) {
  if (!a) return false;
  switch (a->kind) {
  case PA_USER: return a->stmt == k;
  case PA_IF: return stmt_in(a->then_, k) || stmt_in(a->else_, k);
  case PA_BLOCK:
    for (int i = 0; i < a->nchildren; i++)
      if (stmt_in(a->children[i], k)) return true;
    return false;
  default: return stmt_in(a->body, k);
  }
}

static void simd_item(ut_str *list, const char *item) {
  ut_str_printf(list, "%s%s", list->len ? ", " : "", item);
}

/* One statement of the loop body: which of its scalars are private per
 * iteration, which accumulate across iterations (a reduction clause), and
 * whether anything carries a dependence the clauses cannot express. */
static void simd_stmt(emit *m, const poly_ast *loop, const poly_ast *u, simd_scan *sc) {
  const poly_stmt_spec *sp = &m->stmts[u->stmt];
  const poly_block_info *b = poly_block(m->c->pv, sp->block);
  const tiny_node *n = &m->c->g->nodes[b->node];
  ut_str name;
  ut_str_init(&name);
  if (b->kind == POLY_REDUCE || b->kind == POLY_CONTRACTION) {
    rc_acc_ref(m, u, b, &name);
    bool scalar = !strchr(name.buf ? name.buf : "[", '[');
    if (sp->role == POLY_STMT_FINAL) {
      if (m->val[b->node].kind == ST_LOCAL && m->val[b->node].lsize == 1) {
        ut_str_free(&name);
        ut_str_init(&name);
        rc_local_name(&name, n, "L", b->node);
        simd_item(&sc->priv, name.buf);
      }
      /* its accumulator must then be private (its INIT is here too) */
      int init = -1;
      for (int k = 0; k < m->nstmts; k++)
        if (m->stmts[k].block == sp->block && m->stmts[k].role == POLY_STMT_INIT) init = k;
      if (scalar && (init < 0 || !stmt_in(loop->body, init))) sc->ok = false;
    } else if (!scalar) {
      /* an accumulator array: each iteration must own its element */
      if (!rc_has_token(name.buf ? name.buf : "", sc->iter)) sc->ok = false;
    } else if (sp->role == POLY_STMT_INIT) {
      simd_item(&sc->priv, name.buf);
      if (rc_nan_flag(m, b)) {
        ut_str f;
        ut_str_init(&f);
        rc_flag_name(&f, m, b);
        simd_item(&sc->priv, f.buf ? f.buf : "");
        if (f.oom) sc->ok = false;
        ut_str_free(&f);
      }
    } else {
      int init = -1;
      for (int k = 0; k < m->nstmts; k++)
        if (m->stmts[k].block == sp->block && m->stmts[k].role == POLY_STMT_INIT) init = k;
      if (init >= 0 && stmt_in(loop->body, init)) {
        /* private, listed by its INIT */
      } else {
        tiny_reduce_op rop = n->a.reduce.op;
        tiny_dtype ad = n->a.reduce.dtype;
        const char *op = NULL;
        bool flag = rc_nan_flag(m, b);
        if (ad == TINY_FP32) op = rop == TINY_RSUM ? "+" : rop == TINY_RMAX ? (flag ? "max" : "hp_max") : (flag ? "min" : "hp_min");
        if (!op) sc->ok = false; /* fp16/bf16 accumulators round at each step; int sums wrap */
        else ut_str_printf(&sc->red, " reduction(%s:%s)", op, name.buf);
        if (op && flag) {
          ut_str_puts(&sc->red, " reduction(|:");
          rc_flag_name(&sc->red, m, b);
          ut_str_putc(&sc->red, ')');
        }
      }
    }
  } else if (m->val[b->node].kind == ST_LOCAL && m->val[b->node].lsize == 1) {
    rc_local_name(&name, n, "L", b->node);
    simd_item(&sc->priv, name.buf);
  }
  if (name.oom) sc->ok = false;
  ut_str_free(&name);
}

static void simd_walk(emit *m, const poly_ast *loop, const poly_ast *a, simd_scan *sc) {
  if (!a || !sc->ok) return;
  switch (a->kind) {
  case PA_FOR:
    if (sc->outer) simd_walk(m, loop, a->body, sc);
    else sc->ok = false; /* not innermost */
    return;
  case PA_IF:
    simd_walk(m, loop, a->then_, sc);
    simd_walk(m, loop, a->else_, sc);
    return;
  case PA_BLOCK:
    for (int i = 0; i < a->nchildren; i++) simd_walk(m, loop, a->children[i], sc);
    return;
  case PA_USER: simd_stmt(m, loop, a, sc); return;
  }
}

/* The loop's condition without its outer parentheses, when it has OpenMP's
 * canonical form `iter <= bound` / `iter < bound`; else NULL. */
static char *canonical_cond(const poly_ast *a) {
  const char *c = a->cond;
  size_t n = strlen(c);
  if (n >= 2 && c[0] == '(' && c[n - 1] == ')') {
    int depth = 0;
    bool wraps = true;
    for (size_t i = 0; i < n && wraps; i++) {
      depth += c[i] == '(' ? 1 : c[i] == ')' ? -1 : 0;
      if (depth == 0 && i < n - 1) wraps = false;
    }
    if (wraps) c++, n -= 2;
  }
  size_t l = strlen(a->iter);
  if (strncmp(c, a->iter, l) || c[l] != ' ' || c[l + 1] != '<') return NULL;
  if (memchr(c, '&', n) || memchr(c, '|', n)) return NULL;
  char *r = malloc(n + 1);
  if (r) memcpy(r, c, n), r[n] = 0;
  return r;
}

/* `#pragma omp simd` for an innermost loop when every dependence across its
 * iterations is a scalar reduction: without it GCC will not reorder a float
 * sum (softmax's, layernorm's) nor if-convert the transcendentals. */
/* Loop a's clauses; true when they express every dependence across its
 * iterations.  The caller frees sc->priv and sc->red. */
static bool simd_scan_loop(emit *m, const poly_ast *a, simd_scan *sc, bool outer) {
  *sc = (simd_scan){a->iter, true, {0}, {0}, outer};
  ut_str_init(&sc->priv);
  ut_str_init(&sc->red);
  simd_walk(m, a, a->body, sc);
  return sc->ok && !sc->priv.oom && !sc->red.oom;
}

static bool unit_step(const poly_ast *a) { return !strcmp(a->inc, "1") || !strcmp(a->inc, "1L"); }

static bool innermost(const poly_ast *a) {
  if (!a) return true;
  switch (a->kind) {
  case PA_FOR: return false;
  case PA_IF: return innermost(a->then_) && innermost(a->else_);
  case PA_BLOCK:
    for (int i = 0; i < a->nchildren; i++)
      if (!innermost(a->children[i])) return false;
    return true;
  default: return true;
  }
}

/* ---- outer-loop simd --------------------------------------------------------
 * A reduction whose loops sit inside an output loop is vectorized along its
 * innermost loop, which is poor in two cases the output loop does better
 * (each lane then runs the whole reduction of one output, in order):
 *  - the reduction is a small constant window (a 3x3 pool: 9 taps, lanes of
 *    3 with a NaN flag), which the compiler unrolls completely;
 *  - its innermost loop strides across rows while the output loop runs
 *    along them (a sum over axis 0: one cache line per element, vs whole
 *    rows in each vector).  GCC vectorizes such outer loops directly. */
typedef struct outer_scan {
  const char *outer, *inner; /* the candidate loop's iterator; the innermost loop's */
  long trips;                /* the product of the inner loops' constant trip counts; -1: not constant */
  int depth, nupd;           /* inner loop depth; reduction updates seen inside the loops */
  bool inner_strided, outer_strided, outer_last;
} outer_scan;

/* A loop `for (v = 0; v <= C; v += 1)` / `v < C`: its trip count, else -1. */
long rc_const_trips(const poly_ast *a) {
  char *end;
  long lo = strtol(a->init, &end, 10);
  if (end == a->init || (*end && strcmp(end, "L")) || !unit_step(a)) return -1;
  char *c = canonical_cond(a);
  if (!c) return -1;
  const char *b = c + strlen(a->iter) + 1; /* "<= X" or "< X" */
  bool le = b[1] == '=';
  b += le ? 2 : 1;
  while (*b == ' ') b++;
  long hi = strtol(b, &end, 10);
  bool ok = end != b && (!*end || !strcmp(end, "L"));
  free(c);
  return ok && hi + le > lo ? hi + le - lo : -1;
}

/* A loop `for (v = 0; v < X; v += 1)` (or `v <= X - 1`): X's text,
 * malloc'd (a constant, or a ShapeSet's run-time bound such as hp_sv3),
 * else NULL. */
char *rc_zero_bound(const poly_ast *a) {
  char *end;
  long lo = strtol(a->init, &end, 10);
  if (end == a->init || (*end && strcmp(end, "L")) || lo != 0 || !unit_step(a)) return NULL;
  char *c = canonical_cond(a);
  if (!c) return NULL;
  char *b = c + strlen(a->iter) + 1; /* "<= X" or "< X" */
  bool le = b[1] == '=';
  b += le ? 2 : 1;
  while (*b == ' ') b++;
  size_t n = strlen(b);
  if (le) { /* X - 1 */
    static const char *const tails[] = {" - 1", " - 1L"};
    bool cut = false;
    for (int k = 0; k < 2 && !cut; k++) {
      size_t t = strlen(tails[k]);
      if (n > t && !strcmp(b + n - t, tails[k])) n -= t, cut = true;
    }
    if (!cut) n = 0;
  }
  char *r = n ? malloc(n + 1) : NULL;
  if (r) memcpy(r, b, n), r[n] = 0;
  free(c);
  return r;
}

static void outer_walk(emit *m, const poly_ast *a, int depth, outer_scan *os) {
  if (!a) return;
  switch (a->kind) {
  case PA_FOR: {
    long t = rc_const_trips(a);
    os->trips = t < 0 || os->trips < 0 ? -1 : os->trips * t;
    if (depth + 1 > os->depth) os->depth = depth + 1, os->inner = a->iter;
    outer_walk(m, a->body, depth + 1, os);
    return;
  }
  case PA_IF:
    outer_walk(m, a->then_, depth, os);
    outer_walk(m, a->else_, depth, os);
    return;
  case PA_BLOCK:
    for (int i = 0; i < a->nchildren; i++) outer_walk(m, a->children[i], depth, os);
    return;
  case PA_USER: {
    const poly_stmt_spec *sp = &m->stmts[a->stmt];
    const poly_block_info *b = poly_block(m->c->pv, sp->block);
    if (depth == 0 || sp->role != POLY_STMT_BODY || (b->kind != POLY_REDUCE && b->kind != POLY_CONTRACTION)) return;
    os->nupd++;
    for (int k = 0; k + 1 < a->naccess; k++) { /* the reads */
      const poly_ast_access *ac = &a->access[k];
      for (int d = 0; d < ac->rank; d++) {
        bool last = d == ac->rank - 1;
        if (os->inner && rc_has_token(ac->index[d], os->inner) && !last) os->inner_strided = true;
        if (rc_has_token(ac->index[d], os->outer)) {
          if (last) os->outer_last = true;
          else os->outer_strided = true;
        }
      }
    }
    return;
  }
  }
}

/* Should loop a (not innermost) carry the simd pragma? */
static bool outer_simd_pays(emit *m, const poly_ast *a) {
  if (innermost(a->body)) return false;
  outer_scan os = {.outer = a->iter, .trips = 1};
  outer_walk(m, a->body, 0, &os);
  if (os.nupd == 0) return false;
  bool window = os.trips > 0 && os.trips <= 16;
  bool rows = os.depth == 1 && os.inner_strided && os.outer_last && !os.outer_strided;
  return window || rows;
}

static void simd_pragma(emit *m, const poly_ast *a, int d, char **cond) {
  *cond = NULL;
  if (m->c->gpu || m->simd_outer) return; /* inside an outer simd loop: its inner loops run per lane */
  simd_scan sc;
  bool outer = !innermost(a->body);
  if (outer && !outer_simd_pays(m, a)) return;
  if (simd_scan_loop(m, a, &sc, outer) && (*cond = canonical_cond(a))) {
    if (outer) m->simd_outer = a;
    indent(m->o, d);
    ut_str_puts(m->o, "#pragma omp simd");
    if (sc.priv.len) ut_str_printf(m->o, " private(%s)", sc.priv.buf);
    if (sc.red.len) ut_str_puts(m->o, sc.red.buf);
    ut_str_putc(m->o, '\n');
  }
  ut_str_free(&sc.priv);
  ut_str_free(&sc.red);
}

/* ---- half-precision stores through a float row ---------------------------------
 * GCC leaves scalar an innermost loop that mixes masked (guarded) float
 * reads with an fp16/bf16 store (its vectorizer fails on the masked loads
 * once the 16-bit store sets the lane count): PP-OCR's concat of upsampled
 * maps took 3.0 ms against 0.6 storing fp32 (one thread, the JIT's flags).
 * With rc_nest_ctx.half_rows (--precision bf16), such a loop stores its
 * values to a float row on the stack and a second loop (`omp simd`)
 * converts the row: 0.66 ms.  Taken for a loop of constant trip count that
 * is innermost, holds only non-reduction statements (no conditions), and
 * whose last statement is the one store to a half buffer that no statement
 * of the loop reads. */
#define ROW_MAX 4096 /* floats of stack a row may take */

/* The statements of body in order into us (at most n); false when it holds
 * a loop or a condition, or more than n. */
static bool row_users(const poly_ast *body, const poly_ast **us, int n, int *k) {
  if (!body) return true;
  if (body->kind == PA_USER) {
    if (*k >= n) return false;
    us[(*k)++] = body;
    return true;
  }
  if (body->kind != PA_BLOCK) return false;
  for (int i = 0; i < body->nchildren; i++)
    if (!row_users(body->children[i], us, n, k)) return false;
  return true;
}

/* The half buffer node loop a's statements store through a row, or -1. */
static int half_row_node(emit *m, const poly_ast *a) {
  const poly_ast *us[32];
  int n = 0, node = -1;
  if (!row_users(a->body, us, 32, &n)) return -1;
  for (int i = 0; i < n; i++) {
    const poly_block_info *b = poly_block(m->c->pv, m->stmts[us[i]->stmt].block);
    if (b->kind == POLY_REDUCE || b->kind == POLY_CONTRACTION) return -1;
    for (int k = 0; k + 1 < b->naccess; k++)
      if (b->access[k].tensor == b->node || (node >= 0 && b->access[k].tensor == node)) return -1;
    const value *v = &m->val[b->node];
    bool half = v->kind == ST_BUF && (v->storage == TINY_BF16 || v->storage == TINY_FP16);
    if (half && (node >= 0 || i != n - 1)) return -1;
    if (half) node = b->node;
  }
  return node;
}

/* Opens loop a's row (and a block holding it) when it should take one. */
static bool half_row_begin(emit *m, const poly_ast *a, int d) {
  long trips = m->c->half_rows && !m->c->gpu && !m->simd_outer && innermost(a->body) ? rc_const_trips(a) : -1;
  int node = trips >= 16 && trips <= ROW_MAX ? half_row_node(m, a) : -1;
  if (node < 0 || !(m->row.tail = ut_xcalloc(1, sizeof(ut_str)))) return false;
  ut_str_init(m->row.tail);
  m->row.iter = a->iter, m->row.lo = strtol(a->init, NULL, 10), m->row.node = node;
  indent(m->o, d);
  ut_str_printf(m->o, "{\n");
  indent(m->o, d + 1);
  ut_str_printf(m->o, "float hp_row[%ld];\n", trips);
  return true;
}

/* After loop a: the second loop, storing the converted row; the block closed. */
static void half_row_end(emit *m, const poly_ast *a, int d) {
  char *cond = canonical_cond(a); /* without the pragma GCC vectorizes it poorly (0.6 ms more on the concat) */
  if (cond) {
    indent(m->o, d + 1);
    ut_str_puts(m->o, "#pragma omp simd\n");
  }
  indent(m->o, d + 1);
  ut_str_printf(m->o, "for (long %s = %s; %s; %s += 1) %s\n", a->iter, a->init, cond ? cond : a->cond, a->iter,
                m->row.tail->len ? m->row.tail->buf : ";");
  free(cond);
  indent(m->o, d);
  ut_str_puts(m->o, "}\n");
  if (m->row.tail->oom) m->o->oom = true;
  ut_str_free(m->row.tail);
  free(m->row.tail);
  m->row.tail = NULL, m->row.iter = NULL;
}

/* ---- prefetching the next row ------------------------------------------------------
 * A row kernel (softmax, layernorm) makes several passes over each row: the
 * first streams the row's inputs from memory, the later ones work on it in
 * L1.  Run as is, the core waits on memory in the first pass and on
 * arithmetic (exp, division) in the others, never both at once.  So a later
 * pass without reductions walks its row in steps of 16 elements and
 * prefetches, at each step, what the first pass will read of the next row:
 * the next row arrives while this one computes (softmax 4096x1024: -20%). */


/* text with every whole-token occurrence of from[i] replaced by to[i]. */
char *rc_subst_tokens(const char *text, const char *const *from, const char *const *to, int n) {
  ut_str o;
  ut_str_init(&o);
  for (const char *p = text; *p;) {
    bool word = isalnum((unsigned char)*p) || *p == '_';
    if (word && (p == text || !(isalnum((unsigned char)p[-1]) || p[-1] == '_'))) {
      size_t len = 0;
      while (isalnum((unsigned char)p[len]) || p[len] == '_') len++;
      int k = -1;
      for (int i = 0; i < n && k < 0; i++)
        if (strlen(from[i]) == len && !strncmp(p, from[i], len)) k = i;
      if (k >= 0) ut_str_printf(&o, "(%s)", to[k]);
      else ut_str_printf(&o, "%.*s", (int)len, p);
      p += len;
    } else {
      ut_str_putc(&o, *p++);
    }
  }
  return ut_str_take(&o);
}

/* The gmem reads of the first pass that move with the row and run along its
 * inner loop contiguously (the inner iterator in the last index only). */
static void pf_reads(emit *m, const poly_ast *a, pf_plan *p) {
  if (!a) return;
  if (a->kind == PA_IF) {
    pf_reads(m, a->then_, p);
    pf_reads(m, a->else_, p);
  } else if (a->kind == PA_BLOCK) {
    for (int i = 0; i < a->nchildren; i++) pf_reads(m, a->children[i], p);
  } else if (a->kind == PA_USER) {
    const poly_stmt_spec *sp = &m->stmts[a->stmt];
    const poly_block_info *b = poly_block(m->c->pv, sp->block);
    if (b->kind == POLY_CONTRACTION || (b->kind == POLY_REDUCE && sp->role != POLY_STMT_BODY)) return;
    for (int k = 0; k + 1 < b->naccess && k < a->naccess; k++) {
      int t = b->access[k].tensor;
      const poly_ast_access *ac = &a->access[k];
      if (m->val[t].kind != ST_BUF || m->val[t].slot >= m->K->nreads || ac->guard || ac->rank < 1) continue;
      bool ok = rc_has_token(ac->index[ac->rank - 1], p->first->iter), moves = false;
      for (int d = 0; d < ac->rank; d++) {
        if (d < ac->rank - 1 && rc_has_token(ac->index[d], p->first->iter)) ok = false;
        moves |= rc_has_token(ac->index[d], p->outer->iter);
      }
      bool seen = false;
      for (int i = 0; i < p->nread; i++) seen |= p->slot[i] == m->val[t].slot;
      if (!ok || !moves || seen || p->nread == PF_MAX_READS) continue;
      p->node[p->nread] = &m->c->g->nodes[t];
      p->acc[p->nread] = ac;
      p->slot[p->nread++] = m->val[t].slot;
    }
  }
}

/* The statements and loops of a block in order, nested blocks opened (isl
 * nests the sequence of a loop body); at most cap, else n = cap + 1. */
static void flatten(const poly_ast *a, const poly_ast **out, int *n, int cap) {
  if (!a || *n > cap) return;
  if (a->kind != PA_BLOCK) {
    if (*n < cap) out[*n] = a;
    ++*n;
    return;
  }
  for (int i = 0; i < a->nchildren; i++) flatten(a->children[i], out, n, cap);
}

/* For loop `a` over rows whose body is a sequence of passes: the plan, or
 * none (target NULL). */
static void next_row_plan(emit *m, const poly_ast *a) {
  if (m->c->gpu || m->pf.target || !a->body || !unit_step(a)) return;
  pf_plan p = {.outer = a};
  const poly_ast *ch[64];
  int n = 0;
  flatten(a->body, ch, &n, 64);
  for (int i = 0; i < n && n <= 64; i++) {
    const poly_ast *c = ch[i];
    if (c->kind != PA_FOR || !innermost(c->body)) continue;
    if (!p.first) {
      p.first = c;
      continue;
    }
    simd_scan sc;
    char *cond = simd_scan_loop(m, c, &sc, false) && !sc.red.len && unit_step(c) ? canonical_cond(c) : NULL;
    if (cond) p.target = c; /* the last such pass: the farthest from the next row's first pass */
    free(cond);
    ut_str_free(&sc.priv);
    ut_str_free(&sc.red);
  }
  if (!p.target) return;
  pf_reads(m, p.first->body, &p);
  if (p.nread) m->pf = p;
}

/* The target pass in steps of 16 with the prefetches, then its tail. */
static harp_status print_prefetching(emit *m, const poly_ast *a, int d) {
  ut_str *o = m->o;
  const pf_plan *p = &m->pf;
  char *cond = canonical_cond(a), *tmp = NULL;
  if (!cond) return ut_fail(m->c->e, HARP_E_INTERNAL, NULL, "prefetch target lost its canonical loop");
  const char *c = cond + strlen(a->iter) + 1; /* "<= X" or "< X" */
  bool le = c[1] == '=';
  const char *bound = c + (le ? 2 : 1);
  const char *from[2] = {p->outer->iter, p->first->iter}, *to[2] = {"hp_nx", "hp_pf"};
  char next[64];
  snprintf(next, sizeof next, "%s + 1", p->outer->iter);
  const char *nf[1] = {p->outer->iter}, *nt[1] = {next};
  char *more = rc_subst_tokens(p->outer->cond, nf, nt, 1); /* is there a next row in this task? */
  indent(o, d);
  ut_str_puts(o, "{ /* prefetch the next row while this pass computes */\n");
  indent(o, d + 1);
  ut_str_printf(o, "const long hp_nx = (%s) ? %s + 1 : %s;\n", more ? more : "0", p->outer->iter, p->outer->iter);
  free(more);
  indent(o, d + 1);
  ut_str_printf(o, "long hp_pf = %s;\n", a->init);
  indent(o, d + 1);
  ut_str_printf(o, "for (; hp_pf + 16 <= (%s)%s; hp_pf += 16) {\n", bound, le ? " + 1" : "");
  for (int i = 0; i < p->nread; i++) {
    const char *ix[TINY_MAX_RANK];
    char *own[TINY_MAX_RANK] = {0};
    for (int k = 0; k < p->acc[i]->rank; k++) ix[k] = own[k] = rc_subst_tokens(p->acc[i]->index[k], from, to, 2);
    ut_str idx;
    ut_str_init(&idx);
    bool ok = true;
    for (int k = 0; k < p->acc[i]->rank; k++) ok = ok && own[k];
    if (ok) rc_linear(&idx, m->c, rc_acc_shape(p->acc[i], p->node[i]), ix, 0);
    indent(o, d + 2);
    if (ok && idx.buf) ut_str_printf(o, "__builtin_prefetch(&p%d[%s], 0, 3);\n", p->slot[i], idx.buf);
    ut_str_free(&idx);
    for (int k = 0; k < p->acc[i]->rank; k++) free(own[k]);
    if (!ok) o->oom = true;
  }
  simd_pragma(m, a, d + 2, &tmp);
  free(tmp);
  indent(o, d + 2);
  ut_str_printf(o, "for (long %s = hp_pf; %s < hp_pf + 16; %s += 1) {\n", a->iter, a->iter, a->iter);
  if (rc_print_ast(m, a->body, d + 3)) goto fail;
  indent(o, d + 2);
  ut_str_puts(o, "}\n");
  indent(o, d + 1);
  ut_str_puts(o, "}\n");
  simd_pragma(m, a, d + 1, &tmp);
  free(tmp);
  indent(o, d + 1);
  ut_str_printf(o, "for (long %s = hp_pf; %s; %s += 1) {\n", a->iter, cond, a->iter);
  if (rc_print_ast(m, a->body, d + 2)) goto fail;
  indent(o, d + 1);
  ut_str_puts(o, "}\n");
  indent(o, d);
  ut_str_puts(o, "}\n");
  free(cond);
  return HARP_OK;
fail:
  free(cond);
  return m->c->e->code;
}

harp_status rc_print_ast(emit *m, const poly_ast *a, int d) {
  if (!a) return HARP_OK;
  ut_str *o = m->o;
  switch (a->kind) {
  case PA_FOR: {
    if (a == m->pf.target) return print_prefetching(m, a, d);
    next_row_plan(m, a);
    bool row = half_row_begin(m, a, d);
    int dl = row ? d + 1 : d;
    char *cond;
    simd_pragma(m, a, dl, &cond);
    indent(o, dl);
    ut_str_printf(o, "for (long %s = %s; %s; %s += %s) {\n", a->iter, a->init, cond ? cond : a->cond, a->iter, a->inc);
    free(cond);
    harp_status st = rc_print_ast(m, a->body, dl + 1);
    if (m->simd_outer == a) m->simd_outer = NULL;
    indent(o, dl);
    ut_str_puts(o, "}\n");
    if (row) half_row_end(m, a, d);
    return st ? m->c->e->code : HARP_OK;
  }
  case PA_IF:
    indent(o, d);
    ut_str_printf(o, "if (%s) {\n", a->cond);
    if (rc_print_ast(m, a->then_, d + 1)) return m->c->e->code;
    indent(o, d);
    if (a->else_) {
      ut_str_puts(o, "} else {\n");
      if (rc_print_ast(m, a->else_, d + 1)) return m->c->e->code;
      indent(o, d);
    }
    ut_str_puts(o, "}\n");
    return HARP_OK;
  case PA_BLOCK:
    for (int i = 0; i < a->nchildren; i++)
      if (rc_print_ast(m, a->children[i], d)) return m->c->e->code;
    return HARP_OK;
  case PA_USER:
    indent(o, d);
    return rc_stmt_body(m, a);
  }
  return HARP_OK;
}
