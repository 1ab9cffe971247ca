/* nest.c — a region's loop nest: where each value lives (a buffer, a
 * register, a local array over the axes past the shared loops), its
 * statements in order (a reduction in INIT / BODY / FINAL steps), statements
 * of one loop shape fused into a group, and the locals' declarations.
 * Needs: nest_stmt.c (the statements' text), the kernel layer's slots
 * (ct_slot_of, ct_block_sizes).  Gives: rc_emit_init / rc_emit_free,
 * rc_nest_setup, rc_emit_locals (for the CPU's loop printer) and rc_nest_*
 * (for a backend that prints the loops itself: CUDA).
 *
 * The first `prefix` variables are the region's shared loops; a value
 * computed and consumed inside the region lives in a local array over its
 * remaining axes (a scalar when there are none: a register); values the
 * region reads or writes as buffers are indexed row-major. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/common/nest_int.h"
#include "kernel/contract.h"

int rc_nest_sym(const rc_nest_ctx *c, const tiny_dim *d) {
  for (int i = 0; d->sym && i < c->nsyms; i++)
    if (!strcmp(d->sym, c->syms[i]) && d->n == c->sym_now[i]) return i;
  return -1;
}

/* Dim d's size, or the largest its symbol takes (a local array's room). */
static int64_t dim_hi(const rc_nest_ctx *c, const tiny_dim *d) {
  int i = rc_nest_sym(c, d);
  return i < 0 ? d->n : c->sym_hi[i];
}

harp_status rc_emit_init(emit *m, const rc_nest_ctx *c, int r, ut_str *out) {
  const fn_function *f = c->f;
  const rg_region *R = &f->part->regions[f->kernels[r].region];
  *m = (emit){c, R, &f->kernels[r], out, 0, ut_xcalloc(3 * (size_t)R->nblocks + 1, sizeof(poly_stmt_spec)), 0,
              ut_xcalloc((size_t)c->g->n + 1, sizeof(value)), {0}, NULL, {0}, -1};
  if (m->val && m->stmts) return HARP_OK;
  rc_emit_free(m);
  return ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
}

void rc_emit_free(emit *m) {
  free(m->val);
  free(m->stmts);
  m->val = NULL;
  m->stmts = NULL;
}

/* Does block b read tensor t (access a) at its own point: its variables in
 * order are t's axes, at t's row-major strides (extent-1 axes aside)? */
static bool reads_pointwise(const rc_nest_ctx *c, const poly_block_info *b, int bi, int a, int t) {
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
  const rc_nest_ctx *c = m->c;
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

void rc_nest_setup(emit *m) {
  const rc_nest_ctx *c = m->c;
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
    m->val[i].slot = ct_slot_of(m->K, f, i);
    if (m->val[i].slot >= 0) {
      m->val[i].kind = ST_BUF;
      m->val[i].storage = f->buffers[f->buffer_of[i]].dtype;
    }
    int64_t size = 1;
    for (int d = m->prefix; d < g->nodes[i].shape.rank; d++) size *= dim_hi(c, &g->nodes[i].shape.d[d]);
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
      int q = rc_operand_stage(m, b, a);
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
}

int64_t rc_emit_locals(emit *m, ut_str *out, const char *ind, const char *scratch, int64_t *array_bytes) {
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
        for (int d = m->prefix; d < b->nout; d++) size *= dim_hi(m->c, &n->shape.d[d]);
      else size = m->val[b->node].lsize;
      const char *type = rc_ctype(acc ? n->a.reduce.dtype : n->dtype);
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

/* ---- the nest for a backend that prints the loops itself ---------------------------- */
typedef struct nest_priv {
  emit m;
} nest_priv;

harp_status rc_nest_build(const rc_nest_ctx *c, int r, rc_nest *out) {
  const fn_function *f = c->f;
  const rg_region *R = &f->part->regions[f->kernels[r].region];
  const tiny_graph *g = c->g;
  memset(out, 0, sizeof *out);
  if (R->nblocks == 0) return ut_fail(c->e, HARP_E_INTERNAL, R->name, "a GATHER region has no loop nest");
  nest_priv *p = ut_xcalloc(1, sizeof *p);
  if (!p) return ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
  if (rc_emit_init(&p->m, c, r, NULL)) {
    free(p);
    return c->e->code;
  }
  out->priv = p;
  rc_nest_setup(&p->m);
  const poly_block_info *b0 = poly_block(c->pv, R->blocks[0]);
  out->fixed = p->m.prefix;
  for (int i = 0; i < out->fixed; i++) {
    out->extent[i] = g->nodes[b0->node].shape.d[i].n;
    out->fix_sym[i] = rc_nest_sym(c, &g->nodes[b0->node].shape.d[i]) + 1;
  }
  poly_ast_opts opts = {.prefix = p->m.prefix, .fix_outer = out->fixed, .fix_extent = out->extent, .fix_sym = out->fix_sym,
                        .nsyms = c->nsyms, .syms = c->syms, .sym_now = c->sym_now, .sym_hi = c->sym_hi};
  poly_ast *tree;
  harp_status st = poly_ast_gen(c->e, c->pv, p->m.stmts, p->m.nstmts, &opts, c->arena, &tree);
  if (st) {
    rc_nest_free(out);
    return st;
  }
  out->tree = tree;
  ut_str tmp;
  ut_str_init(&tmp);
  out->local_bytes = rc_emit_locals(&p->m, &tmp, "", NULL, &out->array_bytes);
  ut_str_free(&tmp);
  return HARP_OK;
}

void rc_nest_locals(rc_nest *n, const char *scratch, ut_str *out) {
  nest_priv *p = n->priv;
  rc_emit_locals(&p->m, out, "", scratch, NULL);
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
    rc_emit_free(&p->m);
    free(p);
  }
  memset(n, 0, sizeof *n);
}
