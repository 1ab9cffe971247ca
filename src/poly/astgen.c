/* astgen.c — loop nests from isl's AST generator (isl_ast_build), as PPCG
 * does, turned into the isl-free tree of harp/poly_ast.h.
 * Needs: a Poly-View.  Gives: poly_ast_gen.
 *
 * Each statement gets a domain (its block's, or for a reduction's INIT and
 * FINAL the projection onto the output variables), renamed S<k>, and the
 * schedule [shared prefix, k, rest, 0..].  At each statement instance the
 * build's inverse schedule gives the statement variables as functions of the
 * loop iterators; every access is pulled back through it and printed by
 * isl_ast_build_access_from_pw_multi_aff, and an access that reads padding
 * gets its read domain as a guard (isl_ast_build_expr_from_set). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <isl/ast.h>
#include <isl/ast_build.h>
#include <isl/val.h>

#include "harp/poly_ast.h"
#include "harp/polycore.h"
#include "poly/poly_int.h"
#include "util/util.h"

typedef struct gen {
  harp_error *e;
  poly_view *pv;
  isl_ctx *ctx;
  const poly_stmt_spec *stmts;
  int nstmts;
  const poly_ast_opts *opts;
  ut_arena *A;
  harp_status st;
  bool *symdom; /* per statement: its domain is over the symbols' parameters (astgen_sym.c) */
} gen;

static harp_status gfail(gen *g, const char *what) {
  if (g->st) return g->st;
  const char *msg = isl_ctx_last_error_msg(g->ctx);
  g->st = ut_fail(g->e, HARP_E_INTERNAL, NULL, "isl AST generation failed (%s): %s", what, msg ? msg : "?");
  isl_ctx_reset_error(g->ctx);
  return g->st;
}

/* ---- expressions: isl_ast_expr -> C text -------------------------------- */
static void pexpr(ut_str *s, __isl_keep isl_ast_expr *x);

static void parg(ut_str *s, __isl_keep isl_ast_expr *x, int k) {
  isl_ast_expr *a = isl_ast_expr_op_get_arg(x, k);
  pexpr(s, a);
  isl_ast_expr_free(a);
}

static void pbin(ut_str *s, __isl_keep isl_ast_expr *x, const char *op) {
  ut_str_putc(s, '(');
  parg(s, x, 0);
  ut_str_puts(s, op);
  parg(s, x, 1);
  ut_str_putc(s, ')');
}

static void pfun(ut_str *s, __isl_keep isl_ast_expr *x, const char *fn) {
  /* min/max may have more than two arguments: nest them */
  isl_size n = isl_ast_expr_op_get_n_arg(x);
  for (int k = 0; k < n - 1; k++) ut_str_printf(s, "%s(", fn);
  parg(s, x, 0);
  for (int k = 1; k < n; k++) {
    ut_str_puts(s, ", ");
    parg(s, x, k);
    ut_str_putc(s, ')');
  }
}

static void pexpr(ut_str *s, __isl_keep isl_ast_expr *x) {
  switch (isl_ast_expr_get_type(x)) {
  case isl_ast_expr_int: {
    isl_val *v = isl_ast_expr_get_val(x);
    long c = isl_val_get_num_si(v);
    isl_val_free(v);
    ut_str_printf(s, c < 0 ? "(%ldL)" : "%ldL", c);
    return;
  }
  case isl_ast_expr_id: {
    isl_id *id = isl_ast_expr_get_id(x);
    char buf[160];
    ut_sanitize_name(isl_id_get_name(id), buf, sizeof buf);
    ut_str_puts(s, buf);
    isl_id_free(id);
    return;
  }
  case isl_ast_expr_op: break;
  default: ut_str_puts(s, "/*?*/0"); return;
  }
  switch (isl_ast_expr_op_get_type(x)) {
  case isl_ast_expr_op_and:
  case isl_ast_expr_op_and_then: pbin(s, x, " && "); return;
  case isl_ast_expr_op_or:
  case isl_ast_expr_op_or_else: pbin(s, x, " || "); return;
  case isl_ast_expr_op_max: pfun(s, x, "hp_max"); return;
  case isl_ast_expr_op_min: pfun(s, x, "hp_min"); return;
  case isl_ast_expr_op_minus: ut_str_puts(s, "(-"); parg(s, x, 0); ut_str_putc(s, ')'); return;
  case isl_ast_expr_op_add: pbin(s, x, " + "); return;
  case isl_ast_expr_op_sub: pbin(s, x, " - "); return;
  case isl_ast_expr_op_mul: pbin(s, x, " * "); return;
  case isl_ast_expr_op_div:    /* exact */
  case isl_ast_expr_op_pdiv_q: /* dividend >= 0 */ pbin(s, x, " / "); return;
  case isl_ast_expr_op_fdiv_q:
    ut_str_puts(s, "hp_floord(");
    parg(s, x, 0);
    ut_str_puts(s, ", ");
    parg(s, x, 1);
    ut_str_putc(s, ')');
    return;
  case isl_ast_expr_op_pdiv_r:
  case isl_ast_expr_op_zdiv_r: pbin(s, x, " % "); return;
  case isl_ast_expr_op_cond:
  case isl_ast_expr_op_select:
    ut_str_putc(s, '(');
    parg(s, x, 0);
    ut_str_puts(s, " ? ");
    parg(s, x, 1);
    ut_str_puts(s, " : ");
    parg(s, x, 2);
    ut_str_putc(s, ')');
    return;
  case isl_ast_expr_op_eq: pbin(s, x, " == "); return;
  case isl_ast_expr_op_le: pbin(s, x, " <= "); return;
  case isl_ast_expr_op_lt: pbin(s, x, " < "); return;
  case isl_ast_expr_op_ge: pbin(s, x, " >= "); return;
  case isl_ast_expr_op_gt: pbin(s, x, " > "); return;
  default: ut_str_puts(s, "/*unsupported isl op*/0"); return;
  }
}

static const char *expr_text(gen *g, __isl_take isl_ast_expr *x) {
  if (!x) {
    gfail(g, "expression");
    return NULL;
  }
  ut_str s;
  ut_str_init(&s);
  pexpr(&s, x);
  isl_ast_expr_free(x);
  const char *r = s.oom ? NULL : ut_arena_strdup(g->A, s.buf ? s.buf : "0");
  ut_str_free(&s);
  if (!r && !g->st) g->st = ut_fail(g->e, HARP_E_NO_MEMORY, NULL, "out of memory");
  return r;
}

/* ---- statements ----------------------------------------------------------- */
static char *stmt_name(int k, char *buf, size_t cap) {
  snprintf(buf, cap, "S%d", k);
  return buf;
}

static int stmt_vars(const poly_view *pv, const poly_stmt_spec *s) {
  const poly_blk *b = &pv->blocks[s->block];
  return s->role == POLY_STMT_BODY ? b->pub.nvars : b->pub.nout;
}

/* Rename the set's tuple to S<k> and drop reduced variables for INIT/FINAL. */
static __isl_give isl_set *concrete_domain(gen *g, int k) {
  const poly_stmt_spec *s = &g->stmts[k];
  const poly_blk *b = &g->pv->blocks[s->block];
  isl_set *d = isl_set_copy(b->domain);
  if (s->role != POLY_STMT_BODY && b->pub.nvars > b->pub.nout) {
    unsigned first = (unsigned)b->pub.nout, n = (unsigned)(b->pub.nvars - b->pub.nout);
    /* an empty reduction (an axis of size 0) still initialises and stores
     * every output, the identity: the projection of its empty domain would
     * be empty */
    if (b->out_domain) {
      isl_set_free(d);
      d = isl_set_copy(b->out_domain);
    }
    d = isl_set_project_out(d, isl_dim_set, first, n);
  }
  char name[32];
  return isl_set_set_tuple_name(d, stmt_name(k, name, sizeof name));
}

/* Statement k's domain: over the symbols' parameters where g->symdom[k]
 * (a ShapeSet object), else the block's numbers. */
static __isl_give isl_set *stmt_domain(gen *g, int k) {
  isl_set *d = concrete_domain(g, k);
  if (!g->symdom || !g->symdom[k]) return d;
  char name[32];
  const poly_blk *b = &g->pv->blocks[g->stmts[k].block];
  isl_set *p = poly_sym_domain(g->pv, b, stmt_vars(g->pv, &g->stmts[k]), g->opts, stmt_name(k, name, sizeof name), d);
  if (!p) return d; /* checked when symdom was set: only out of memory */
  isl_set_free(d);
  return p;
}

/* S<k>[v..] -> [v0..v(p-1), g, v(p).., 0.., pos] of length len. */
static __isl_give isl_map *stmt_schedule(gen *g, int k, int len, __isl_keep isl_set *dom) {
  int n = stmt_vars(g->pv, &g->stmts[k]), p = g->opts->prefix;
  int grp = g->stmts[k].group >= 0 ? g->stmts[k].group : k, pos = g->stmts[k].group >= 0 ? g->stmts[k].pos : 0;
  ut_str s;
  ut_str_init(&s);
  char name[32];
  ut_str_printf(&s, "{ %s[", stmt_name(k, name, sizeof name));
  for (int i = 0; i < n; i++) ut_str_printf(&s, "%sv%d", i ? ", " : "", i);
  ut_str_puts(&s, "] -> [");
  int t = 0;
  for (int i = 0; i < p; i++, t++) ut_str_printf(&s, "%sv%d", t ? ", " : "", i);
  ut_str_printf(&s, "%s%d", t ? ", " : "", grp);
  t++;
  for (int i = p; i < n; i++, t++) ut_str_printf(&s, ", v%d", i);
  for (; t < len - 1; t++) ut_str_puts(&s, ", 0");
  ut_str_printf(&s, ", %d] }", pos);
  isl_map *m = s.oom ? NULL : isl_map_read_from_str(g->ctx, s.buf);
  ut_str_free(&s);
  if (!m) return NULL;
  m = isl_map_align_params(m, isl_set_get_space(dom));
  return isl_map_intersect_domain(m, isl_set_copy(dom));
}

/* dom restricted to [params] -> { S<k>[v0, ..] : cond } */
static __isl_give isl_set *restrict_set(gen *g, int k, __isl_keep isl_set *dom, const char *params, const char *cond) {
  int n = stmt_vars(g->pv, &g->stmts[k]);
  ut_str s;
  ut_str_init(&s);
  char name[32];
  ut_str_printf(&s, "[%s] -> { %s[", params, stmt_name(k, name, sizeof name));
  for (int i = 0; i < n; i++) ut_str_printf(&s, "%sv%d", i ? ", " : "", i);
  ut_str_printf(&s, "] : %s }", cond);
  isl_set *c = s.oom ? NULL : isl_set_read_from_str(g->ctx, s.buf);
  ut_str_free(&s);
  if (!c) return NULL;
  isl_set *d = isl_set_align_params(isl_set_copy(dom), isl_set_get_space(c));
  c = isl_set_align_params(c, isl_set_get_space(d));
  return isl_set_intersect(d, c);
}

/* [hp_lo, hp_hi] -> { S<k>[v0, ..] : hp_lo <= v<chunk_var> < hp_hi } */
static __isl_give isl_set *chunk_set(gen *g, int k, __isl_keep isl_set *dom) {
  char cond[64];
  snprintf(cond, sizeof cond, "hp_lo <= v%d < hp_hi", g->opts->chunk_var);
  return restrict_set(g, k, dom, "hp_lo, hp_hi", cond);
}

/* [hp_p0, ..] -> { S<k>[v0, ..] : v0 = hp_p0 and .. } for the fixed variables */
static __isl_give isl_set *fix_set(gen *g, int k, __isl_keep isl_set *dom) {
  ut_str p, c;
  ut_str_init(&p);
  ut_str_init(&c);
  for (int i = 0; i < g->opts->fix_outer; i++) {
    ut_str_printf(&p, "%shp_p%d", i ? ", " : "", i);
    ut_str_printf(&c, "%sv%d = hp_p%d", i ? " and " : "", i, i);
  }
  isl_set *r = p.oom || c.oom ? NULL : restrict_set(g, k, dom, p.buf, c.buf);
  ut_str_free(&p);
  ut_str_free(&c);
  return r;
}

/* What statement k reads for access a: the block's access, or a stage of it. */
static const poly_acc *stmt_acc(gen *g, int k, int a) {
  const poly_stmt_spec *s = &g->stmts[k];
  const poly_blk *b = &g->pv->blocks[s->block];
  return s->stage[a] ? &b->stage[a][s->stage[a] - 1] : &b->acc[a]; /* checked by poly_ast_gen */
}

/* The RESHAPE whose output statement k's access a is indexed by over the
 * symbols (poly_reshape_view), or -1: none, a contraction's stage, or a
 * tensor a statement of this nest computes (its storage may be a local). */
static int stmt_view(gen *g, int k, int a) {
  const poly_stmt_spec *s = &g->stmts[k];
  if (s->stage[a]) return -1;
  int r = poly_reshape_view(g->pv, s->block, a, g->opts->nsyms, g->opts->syms);
  int t = r >= 0 ? g->pv->blocks[s->block].acc[a].ib.src : -1;
  for (int i = 0; r >= 0 && i < g->nstmts; i++)
    if (g->pv->blocks[g->stmts[i].block].pub.node == t) r = -1;
  return r;
}

/* The access of statement k as a function on its domain (S<k> space).  Over
 * the symbols (g->symdom[k]) an access astgen_sym.c cannot rebuild keeps its
 * numbers, less what statement k's concrete domain already says: a guard the
 * domain implies at this corner is implied at every smaller binding.  One
 * read through a RESHAPE that splits an axis by a symbol's size indexes the
 * RESHAPE's output instead (*view that node, else -1; view may be NULL). */
static __isl_give isl_pw_multi_aff *stmt_access(gen *g, int k, int a, __isl_keep isl_set *dom, int *view) {
  const poly_stmt_spec *s = &g->stmts[k];
  const poly_blk *b = &g->pv->blocks[s->block];
  isl_map *m = isl_map_copy(stmt_acc(g, k, a)->map);
  if (s->role != POLY_STMT_BODY && b->pub.nvars > b->pub.nout)
    m = isl_map_project_out(m, isl_dim_in, (unsigned)b->pub.nout, (unsigned)(b->pub.nvars - b->pub.nout));
  char name[32];
  m = isl_map_set_tuple_name(m, isl_dim_in, stmt_name(k, name, sizeof name));
  if (view) *view = -1;
  if (g->symdom && g->symdom[k]) { /* one affine function: over the parameters too */
    isl_set *cd = concrete_domain(g, k);
    int r = view ? stmt_view(g, k, a) : -1;
    isl_map *p = r >= 0 ? poly_sym_access_view(g->pv, b, stmt_acc(g, k, a), r, g->opts, m, dom, cd) : NULL;
    if (p) *view = r;
    else p = poly_sym_access(g->pv, b, stmt_acc(g, k, a), g->opts, isl_map_copy(m), dom, cd);
    if (p) {
      isl_set_free(cd);
      isl_map_free(m);
      return isl_pw_multi_aff_from_map(p);
    }
    m = isl_map_gist_domain(m, cd); /* the numbers: only what the domain does not already say */
  }
  m = isl_map_align_params(m, isl_set_get_space(dom));
  m = isl_map_intersect_domain(m, isl_set_copy(dom));
  return isl_pw_multi_aff_from_map(m);
}

/* The read domain of an access (where it reads a real element). */
static __isl_give isl_set *read_domain(gen *g, int k, int a, __isl_keep isl_set *dom) {
  isl_pw_multi_aff *p = stmt_access(g, k, a, dom, NULL);
  return isl_pw_multi_aff_domain(p);
}

/* The points of statement k's domain where access a reads pad value q. */
static __isl_give isl_set *fill_domain(gen *g, int k, int a, int q, __isl_keep isl_set *dom) {
  const poly_stmt_spec *s = &g->stmts[k];
  const poly_blk *b = &g->pv->blocks[s->block];
  isl_set *f = isl_set_copy(stmt_acc(g, k, a)->fill[q].set);
  if (s->role != POLY_STMT_BODY && b->pub.nvars > b->pub.nout)
    f = isl_set_project_out(f, isl_dim_set, (unsigned)b->pub.nout, (unsigned)(b->pub.nvars - b->pub.nout));
  char name[32];
  f = isl_set_set_tuple_name(f, stmt_name(k, name, sizeof name));
  if (g->symdom && g->symdom[k]) f = isl_set_gist(f, concrete_domain(g, k)); /* as stmt_access */
  f = isl_set_align_params(f, isl_set_get_space(dom));
  return isl_set_intersect(f, isl_set_copy(dom));
}

static __isl_give isl_ast_node *at_domain(__isl_take isl_ast_node *node, __isl_keep isl_ast_build *build, void *user) {
  gen *g = user;
  if (g->st) return node;
  isl_ast_expr *call = isl_ast_node_user_get_expr(node);
  isl_ast_expr *fn = call ? isl_ast_expr_op_get_arg(call, 0) : NULL;
  isl_id *id = fn ? isl_ast_expr_get_id(fn) : NULL;
  const char *nm = id ? isl_id_get_name(id) : NULL;
  int k = nm && nm[0] == 'S' ? atoi(nm + 1) : -1;
  isl_id_free(id);
  isl_ast_expr_free(fn);
  isl_ast_expr_free(call);
  if (k < 0 || k >= g->nstmts) {
    gfail(g, "unknown statement");
    return node;
  }
  const poly_stmt_spec *s = &g->stmts[k];
  const poly_blk *b = &g->pv->blocks[s->block];
  poly_ast *u = ut_arena_alloc(g->A, sizeof *u);
  if (!u) {
    g->st = ut_fail(g->e, HARP_E_NO_MEMORY, NULL, "out of memory");
    return node;
  }
  u->kind = PA_USER;
  u->stmt = k;
  isl_map *sched = isl_map_from_union_map(isl_ast_build_get_schedule(build));
  isl_pw_multi_aff *it = isl_pw_multi_aff_from_map(isl_map_reverse(sched));
  isl_set *dom = stmt_domain(g, k);
  /* the statement's variables */
  isl_ast_expr *vx = isl_ast_build_access_from_pw_multi_aff(build, isl_pw_multi_aff_copy(it));
  if (!vx) gfail(g, "statement variables");
  u->nvars = stmt_vars(g->pv, s);
  for (int i = 0; i < u->nvars && !g->st; i++) u->vars[i] = expr_text(g, isl_ast_expr_op_get_arg(vx, i + 1));
  isl_ast_expr_free(vx);
  /* accesses: a body reads and writes; INIT writes nothing; FINAL writes */
  u->naccess = b->pub.naccess;
  for (int a = 0; a < b->pub.naccess && !g->st; a++) {
    bool write = b->pub.access[a].write;
    if ((s->role == POLY_STMT_INIT) || (s->role == POLY_STMT_FINAL && !write) ||
        (s->role == POLY_STMT_BODY && write && b->pub.nvars > b->pub.nout)) {
      u->access[a].rank = -1; /* not used by this statement */
      continue;
    }
    int view = -1;
    isl_pw_multi_aff *acc = stmt_access(g, k, a, dom, &view);
    if (view >= 0) u->access[a].shape = &g->pv->g->nodes[view].shape;
    acc = isl_pw_multi_aff_pullback_pw_multi_aff(acc, isl_pw_multi_aff_copy(it));
    /* A read of padding only (a slice of a pad's margin) has no element to
     * index, and isl builds no expression for it: index 0 under the guard,
     * which is false everywhere. */
    const poly_acc *pa = stmt_acc(g, k, a);
    isl_set *reads = pa->nfill > 0 ? isl_pw_multi_aff_domain(isl_pw_multi_aff_copy(acc)) : NULL;
    bool none = reads && isl_set_is_empty(reads) == isl_bool_true;
    isl_set_free(reads);
    if (none) {
      u->access[a].rank = (int)isl_pw_multi_aff_dim(acc, isl_dim_out);
      for (int i = 0; i < u->access[a].rank; i++) u->access[a].index[i] = "0";
      isl_pw_multi_aff_free(acc);
    } else {
      isl_ast_expr *ax = isl_ast_build_access_from_pw_multi_aff(build, acc);
      if (!ax) {
        gfail(g, "access");
        break;
      }
      isl_size n = isl_ast_expr_op_get_n_arg(ax);
      u->access[a].rank = n - 1;
      for (int i = 1; i < n && !g->st; i++) u->access[a].index[i - 1] = expr_text(g, isl_ast_expr_op_get_arg(ax, i));
      isl_ast_expr_free(ax);
    }
    if (pa->nfill > 0) {
      isl_set *rd = isl_set_preimage_pw_multi_aff(read_domain(g, k, a, dom), isl_pw_multi_aff_copy(it));
      u->access[a].guard = expr_text(g, isl_ast_build_expr_from_set(build, rd));
      u->access[a].fill = pa->fill[0].value;
      /* The fill sets are disjoint; each further value gets its own guard
       * and the first one is what is left. */
      for (int q = 1; q < pa->nfill && !g->st; q++) {
        if (q > POLY_AST_MAX_ALT) {
          g->st = ut_fail(g->e, HARP_E_UNSUPPORTED, b->pub.name, "an access reads more than %d pad values",
                          POLY_AST_MAX_ALT + 1);
          break;
        }
        isl_set *fs = fill_domain(g, k, a, q, dom);
        fs = isl_set_preimage_pw_multi_aff(fs, isl_pw_multi_aff_copy(it));
        u->access[a].alt_guard[q - 1] = expr_text(g, isl_ast_build_expr_from_set(build, fs));
        u->access[a].alt_fill[q - 1] = pa->fill[q].value;
        u->access[a].nalt = q;
      }
    }
  }
  isl_set_free(dom);
  isl_pw_multi_aff_free(it);
  return isl_ast_node_set_annotation(node, isl_id_alloc(g->ctx, "harp", u));
}

/* ---- isl_ast_node -> poly_ast --------------------------------------------- */
static poly_ast *convert(gen *g, __isl_keep isl_ast_node *n, int depth) {
  if (g->st || !n) return NULL;
  poly_ast *a = NULL;
  switch (isl_ast_node_get_type(n)) {
  case isl_ast_node_for: {
    a = ut_arena_alloc(g->A, sizeof *a);
    if (!a) break;
    a->kind = PA_FOR;
    a->depth = depth;
    a->iter = expr_text(g, isl_ast_node_for_get_iterator(n));
    a->init = expr_text(g, isl_ast_node_for_get_init(n));
    a->cond = expr_text(g, isl_ast_node_for_get_cond(n));
    a->inc = expr_text(g, isl_ast_node_for_get_inc(n));
    isl_ast_node *body = isl_ast_node_for_get_body(n);
    a->body = convert(g, body, depth + 1);
    isl_ast_node_free(body);
    break;
  }
  case isl_ast_node_if: {
    a = ut_arena_alloc(g->A, sizeof *a);
    if (!a) break;
    a->kind = PA_IF;
    a->depth = depth;
    a->cond = expr_text(g, isl_ast_node_if_get_cond(n));
    isl_ast_node *t = isl_ast_node_if_get_then_node(n);
    a->then_ = convert(g, t, depth);
    isl_ast_node_free(t);
    if (isl_ast_node_if_has_else_node(n) == isl_bool_true) {
      isl_ast_node *el = isl_ast_node_if_get_else_node(n);
      a->else_ = convert(g, el, depth);
      isl_ast_node_free(el);
    }
    break;
  }
  case isl_ast_node_block: {
    isl_ast_node_list *l = isl_ast_node_block_get_children(n);
    isl_size cnt = isl_ast_node_list_n_ast_node(l);
    a = ut_arena_alloc(g->A, sizeof *a);
    if (a) a->children = ut_arena_alloc(g->A, sizeof(poly_ast *) * (size_t)(cnt > 0 ? cnt : 1));
    if (a && !a->children) a = NULL; /* out of memory (below): not a zeroed node, which reads as a loop */
    if (a) {
      a->kind = PA_BLOCK;
      a->depth = depth;
      for (int i = 0; i < cnt && !g->st; i++) {
        isl_ast_node *c = isl_ast_node_list_get_ast_node(l, i);
        a->children[a->nchildren++] = convert(g, c, depth);
        isl_ast_node_free(c);
      }
    }
    isl_ast_node_list_free(l);
    break;
  }
  case isl_ast_node_mark: {
    isl_ast_node *c = isl_ast_node_mark_get_node(n);
    a = convert(g, c, depth);
    isl_ast_node_free(c);
    return a;
  }
  case isl_ast_node_user: {
    isl_id *id = isl_ast_node_get_annotation(n);
    a = id ? isl_id_get_user(id) : NULL;
    isl_id_free(id);
    if (!a) gfail(g, "statement without annotation");
    return a;
  }
  default: gfail(g, "unknown AST node"); return NULL;
  }
  if (!a && !g->st) g->st = ut_fail(g->e, HARP_E_NO_MEMORY, NULL, "out of memory");
  return a;
}

/* ctx restricted to c's parameters (taken; NULL: ctx as it was). */
static __isl_give isl_set *with_context(__isl_take isl_set *ctx, __isl_take isl_set *c) {
  if (!c) return ctx;
  c = isl_set_align_params(c, isl_set_get_space(ctx));
  return isl_set_intersect_params(isl_set_align_params(ctx, isl_set_get_space(c)), c);
}

/* g->symdom: which statements loop over the symbols' parameters (a box
 * block with an axis of a symbol's size, checked at the symbols' values). */
static harp_status mark_sym_domains(gen *g) {
  g->symdom = ut_arena_alloc(g->A, sizeof(bool) * (size_t)g->nstmts);
  if (!g->symdom) return g->st = ut_fail(g->e, HARP_E_NO_MEMORY, NULL, "out of memory");
  for (int k = 0; k < g->nstmts; k++) {
    isl_set *d = concrete_domain(g, k);
    char name[32];
    isl_set *p = d ? poly_sym_domain(g->pv, &g->pv->blocks[g->stmts[k].block], stmt_vars(g->pv, &g->stmts[k]), g->opts,
                                     stmt_name(k, name, sizeof name), d)
                   : NULL;
    g->symdom[k] = p != NULL;
    isl_set_free(p);
    isl_set_free(d);
  }
  return HARP_OK;
}

/* The AST build's context (poly_ast_gen): the parameters of doms, all >= 0
 * (symbols, with opts' symbol ranges), hp_lo <= hp_hi within the chunked
 * extent, and each fixed outer loop's 0 <= hp_pi < its extent. */
static isl_set *ast_context(gen *g, isl_union_set *doms) {
  const poly_ast_opts *o = g->opts;
  isl_set *params = isl_union_set_params(isl_union_set_copy(doms));
  isl_set *ctxset = isl_set_universe(isl_set_get_space(params));
  isl_set_free(params);
  if (o->nsyms > 0) ctxset = with_context(ctxset, poly_sym_params(g->ctx, o, false));
  if (o->chunk_outer) {
    char cs[128];
    if (o->chunk_extent > 0 && o->chunk_sym > 0)
      snprintf(cs, sizeof cs, "[hp_lo, hp_hi, hp_sv%d] -> { : 0 <= hp_lo <= hp_hi <= hp_sv%d }", o->chunk_sym - 1,
               o->chunk_sym - 1);
    else if (o->chunk_extent > 0)
      snprintf(cs, sizeof cs, "[hp_lo, hp_hi] -> { : 0 <= hp_lo <= hp_hi <= %lld }", (long long)o->chunk_extent);
    else
      snprintf(cs, sizeof cs, "[hp_lo, hp_hi] -> { : 0 <= hp_lo <= hp_hi }");
    isl_set *c = isl_set_read_from_str(g->ctx, cs);
    c = isl_set_align_params(c, isl_set_get_space(ctxset));
    ctxset = isl_set_intersect_params(isl_set_align_params(ctxset, isl_set_get_space(c)), c);
  }
  if (o->fix_outer) { /* 0 <= hp_pi < extent_i */
    ut_str cs;
    ut_str_init(&cs);
    ut_str_puts(&cs, "[");
    for (int i = 0; i < o->fix_outer; i++) ut_str_printf(&cs, "%shp_p%d", i ? ", " : "", i);
    for (int i = 0; o->fix_sym && i < o->fix_outer; i++) /* a symbol's extent: its parameter */
      if (o->fix_sym[i] > 0) ut_str_printf(&cs, ", hp_sv%d", o->fix_sym[i] - 1);
    ut_str_puts(&cs, "] -> { : ");
    for (int i = 0; i < o->fix_outer; i++)
      if (o->fix_sym && o->fix_sym[i] > 0)
        ut_str_printf(&cs, "%s0 <= hp_p%d < hp_sv%d", i ? " and " : "", i, o->fix_sym[i] - 1);
      else
        ut_str_printf(&cs, "%s0 <= hp_p%d < %lld", i ? " and " : "", i, (long long)o->fix_extent[i]);
    ut_str_puts(&cs, " }");
    isl_set *c = cs.oom ? NULL : isl_set_read_from_str(g->ctx, cs.buf);
    ut_str_free(&cs);
    if (c) {
      c = isl_set_align_params(c, isl_set_get_space(ctxset));
      ctxset = isl_set_intersect_params(isl_set_align_params(ctxset, isl_set_get_space(c)), c);
    }
  }
  return ctxset;
}

harp_status poly_ast_gen(harp_error *e, const poly_view *cpv, const poly_stmt_spec *stmts, int nstmts,
                       const poly_ast_opts *opts, ut_arena *arena, poly_ast **out) {
  poly_view *pv = (poly_view *)cpv; /* isl objects are shared (copied), never changed */
  gen g = {.e = e, .pv = pv, .ctx = pv->ctx, .stmts = stmts, .nstmts = nstmts, .opts = opts, .A = arena, .st = HARP_OK};
  *out = NULL;
  if (nstmts < 1) return ut_fail(e, HARP_E_INTERNAL, NULL, "no statements");
  int len = 0;
  for (int k = 0; k < nstmts; k++) {
    if (stmts[k].block < 0 || stmts[k].block >= pv->nblocks) return ut_fail(e, HARP_E_INTERNAL, NULL, "bad block");
    const poly_block_info *bi = &pv->blocks[stmts[k].block].pub;
    for (int a = 0; a < POLY_MAX_ACC; a++) {
      int q = stmts[k].stage[a];
      if (q && (q < 0 || a >= 2 || bi->kind != POLY_CONTRACTION || q > bi->access[a].nstage))
        return ut_fail(e, HARP_E_INTERNAL, bi->name, "access %d has no stage %d", a, q);
    }
    int n = stmt_vars(pv, &stmts[k]);
    if (opts->prefix > pv->blocks[stmts[k].block].pub.nout)
      return ut_fail(e, HARP_E_INTERNAL, pv->blocks[stmts[k].block].pub.name, "prefix %d exceeds the block's outputs",
                     opts->prefix);
    int l = n + 2; /* the group and the position */
    if (l > len) len = l;
  }
  if (opts->chunk_outer && (opts->chunk_var < 0 || opts->chunk_var >= opts->prefix))
    return ut_fail(e, HARP_E_INTERNAL, NULL, "chunking shared loop %d of %d", opts->chunk_var, opts->prefix);
  if (opts->fix_outer < 0 || opts->fix_outer > opts->prefix || (opts->fix_outer && (opts->chunk_outer || !opts->fix_extent)))
    return ut_fail(e, HARP_E_INTERNAL, NULL, "fixing %d of %d shared loops", opts->fix_outer, opts->prefix);
  if (opts->nsyms > 0 && mark_sym_domains(&g)) return g.st;
  isl_union_map *sched = NULL;
  isl_union_set *doms = NULL;
  for (int k = 0; k < nstmts && !g.st; k++) {
    isl_set *d = stmt_domain(&g, k);
    if (d && opts->chunk_outer) {
      isl_set *c = chunk_set(&g, k, d);
      isl_set_free(d);
      d = c;
    }
    if (d && opts->fix_outer) {
      isl_set *c = fix_set(&g, k, d);
      isl_set_free(d);
      d = c;
    }
    isl_map *m = d ? stmt_schedule(&g, k, len, d) : NULL;
    if (!m) {
      isl_set_free(d);
      gfail(&g, "schedule");
      break;
    }
    sched = sched ? isl_union_map_union(sched, isl_union_map_from_map(m)) : isl_union_map_from_map(m);
    doms = doms ? isl_union_set_union(doms, isl_union_set_from_set(d)) : isl_union_set_from_set(d);
  }
  isl_ast_node *tree = NULL;
  if (!g.st) {
    isl_set *ctxset = ast_context(&g, doms);
    isl_ast_build *build = isl_ast_build_from_context(ctxset);
    build = isl_ast_build_set_at_each_domain(build, at_domain, &g);
    tree = isl_ast_build_node_from_schedule_map(build, isl_union_map_copy(sched));
    isl_ast_build_free(build);
    if (!tree) gfail(&g, "node_from_schedule_map");
  }
  poly_ast *root = g.st ? NULL : convert(&g, tree, 0);
  isl_ast_node_free(tree);
  isl_union_map_free(sched);
  isl_union_set_free(doms);
  if (g.st) return g.st;
  *out = root;
  return HARP_OK;
}
