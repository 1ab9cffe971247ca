/* sema.c — from the DSL syntax tree to a program, through the builder.
 * Needs: parse.c (tree), the builder (ops.c, ops_nn.c, graph.c),
 * sema_args.c (argument readers), sema_builtins.c (the builtin ops).
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

#include "sema_int.h"

/* ---- subgraph calls -------------------------------------------------------------- */
static bool call_graph(sema *S, const fe_ex *call, hg_graph *callee, hg_val *outs, int nouts) {
  hg_val args[64];
  if (call->n > UT_ARRAY_LEN(args)) {
    fe_sm_err(S, HARP_E_LIMIT, call->line, call->col, "too many arguments");
    return false;
  }
  for (int i = 0; i < call->n; i++) {
    if (call->args[i].kw) {
      fe_sm_err(S, HARP_E_INVALID_ARG, call->args[i].line, call->args[i].col, "graph %s takes positional arguments only", callee->name);
      return false;
    }
    if ((args[i] = fe_sm_tensor(S, call->args[i].e)) <= 0) return false;
  }
  for (int i = 0; i < S->ngs; i++)
    if (S->gs[i] == callee && !S->usable[i]) return false; /* its signature failed: reported there */
  fe_sm_at(S, call);
  if (fe_sm_chk(S, call, hg_call(S->g, callee, args, call->n, outs, nouts)) <= 0) return false;
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
  case E_NUM: fe_sm_at(S, ex); return fe_sm_chk(S, ex, hg_const(S->g, ex->num));
  case E_BOOL: fe_sm_err(S, HARP_E_INVALID_ARG, ex->line, ex->col, "true/false are option values, not tensors"); return FAILED;
  case E_LIST: fe_sm_err(S, HARP_E_INVALID_ARG, ex->line, ex->col, "a list is not a tensor"); return FAILED;
  case E_NAME: {
    int *e = fe_sm_lookup(S, ex->name);
    if (e) return *e > 0 ? *e : FAILED;
    if (fe_shape_var_index(S->g, ex->name) >= 0)
      fe_sm_err(S, HARP_E_INVALID_ARG, ex->line, ex->col, "%s is a shape variable, not a tensor", ex->name);
    else
      fe_sm_err(S, HARP_E_DANGLING, ex->line, ex->col, "undefined name '%s'", ex->name);
    return FAILED;
  }
  case E_NEG:
    if (ex->l->k == E_NUM) {
      fe_sm_at(S, ex);
      return fe_sm_chk(S, ex, hg_const(S->g, -ex->l->num));
    }
    if ((a = eval(S, ex->l)) <= 0) return FAILED;
    fe_sm_at(S, ex);
    return fe_sm_chk(S, ex, hg_unary(S->g, HG_OP_NEG, a));
  case E_BIN:
    if ((a = eval(S, ex->l)) <= 0 || (b = eval(S, ex->r)) <= 0) return FAILED;
    fe_sm_at(S, ex);
    if (ex->op == T_AT) return fe_sm_chk(S, ex, hg_matmul(S->g, a, b));
    return fe_sm_chk(S, ex, hg_binary(S->g, bin_op(ex->op), a, b));
  case E_CALL: {
    hg_graph *callee = hg_program_find(S->p, ex->name);
    if (callee) {
      if (callee->nout > 1) {
        fe_sm_err(S, HARP_E_ARITY, ex->line, ex->col, "%s returns %d values; destructure them: (a, b) = %s(...)", ex->name,
            callee->nout, ex->name);
        return FAILED;
      }
      hg_val out = FAILED;
      return call_graph(S, ex, callee, &out, 1) ? out : FAILED;
    }
    hg_val v;
    if (fe_sm_builtin(S, ex, &v)) return v;
    fe_sm_err(S, HARP_E_UNKNOWN_OP, ex->line, ex->col, "unknown op '%s'", ex->name);
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
    fe_sm_err(S, HARP_E_DUPLICATE_ID, line, col, "%s is a shape variable and cannot be assigned", name);
    return false;
  }
  return true;
}

static void stmt(sema *S, const fe_ast_stmt *s, bool *returned) {
  int before = S->g->n;
  if (*returned) {
    fe_sm_err(S, HARP_E_INVALID_ARG, s->line, s->col, "statement after return");
    *returned = false; /* report once */
    return;
  }
  if (s->k == S_ASSIGN) {
    if (!check_target(S, s->names[0], s->nline[0], s->ncol[0])) return;
    hg_val v = eval(S, s->ex[0]);
    fe_sm_bind(S, s->names[0], v);
    if (v > 0) name_fresh(S, v, before, s->names[0]);
    return;
  }
  if (s->k == S_TUPLE) {
    for (int i = 0; i < s->nnames; i++) {
      fe_sm_bind(S, s->names[i], FAILED);
      for (int j = 0; j < i; j++)
        if (strcmp(s->names[i], s->names[j]) == 0) {
          fe_sm_err(S, HARP_E_DUPLICATE_ID, s->nline[i], s->ncol[i], "%s appears twice on the left", s->names[i]);
          return;
        }
      if (!check_target(S, s->names[i], s->nline[i], s->ncol[i])) return;
    }
    const fe_ex *ex = s->ex[0];
    hg_graph *callee = ex->k == E_CALL ? hg_program_find(S->p, ex->name) : NULL;
    if (!callee) {
      fe_sm_err(S, HARP_E_ARITY, ex->line, ex->col, "only a graph call returns several values");
      return;
    }
    if (callee->nout != s->nnames) {
      fe_sm_err(S, HARP_E_ARITY, s->line, s->col, "%s returns %d value%s, %d name%s given", callee->name, callee->nout,
          callee->nout == 1 ? "" : "s", s->nnames, s->nnames == 1 ? "" : "s");
      return;
    }
    hg_val outs[64];
    if (s->nnames > UT_ARRAY_LEN(outs)) {
      fe_sm_err(S, HARP_E_LIMIT, s->line, s->col, "a call returns at most %d values", (int)UT_ARRAY_LEN(outs));
      return;
    }
    if (!call_graph(S, ex, callee, outs, s->nnames)) return;
    for (int i = 0; i < s->nnames; i++) {
      fe_sm_bind(S, s->names[i], outs[i]);
      name_fresh(S, outs[i], before, s->names[i]);
    }
    return;
  }
  /* return */
  *returned = true;
  if (s->nex != S->g->nout) {
    fe_sm_err(S, HARP_E_ARITY, s->line, s->col, "%s declares %d output%s but returns %d value%s", S->g->name, S->g->nout,
        S->g->nout == 1 ? "" : "s", s->nex, s->nex == 1 ? "" : "s");
    return;
  }
  for (int k = 0; k < s->nex; k++) {
    hg_val v = eval(S, s->ex[k]);
    if (v <= 0) continue;
    fe_sm_at(S, s->ex[k]);
    fe_sm_chk(S, s->ex[k], fe_set_output(S->g, k, v));
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
      fe_sm_err(S, HARP_E_LIMIT, v->line, v->col, "default %" PRId64 " of %s is above 2^40", v->dflt, v->name);
      ok = false;
      continue;
    }
    if (fe_shape_var_index(g, v->name) >= 0) {
      fe_sm_err(S, HARP_E_DUPLICATE_ID, v->line, v->col, "shape variable %s is declared twice", v->name);
      ok = false;
      continue;
    }
    if (hg_shape_var(g, v->name, v->has_default ? v->dflt : -1)) {
      fe_sm_err(S, g->err.code, v->line, v->col, "%s", g->err.msg);
      fe_clear_error(g);
      ok = false;
    }
  }
  for (int i = 0; i < ag->nparams; i++) {
    const fe_ast_decl *d = &ag->params[i];
    fe_shape s = {0};
    if (fe_shape_var_index(g, d->name) >= 0) { /* as check_target does for an assignment */
      fe_sm_err(S, HARP_E_DUPLICATE_ID, d->line, d->col, "parameter %s has the name of a shape variable", d->name);
      ok = false;
      continue;
    }
    if (!fe_sm_type(S, &d->type, true, &s)) {
      ok = false;
      continue;
    }
    g->line = d->line, g->col = d->col;
    hg_val v = fe_input(g, d->name, (tiny_dtype)d->type.dtype, &s);
    if (v <= 0) {
      fe_sm_err(S, g->err.code, d->line, d->col, "%s", g->err.msg);
      fe_clear_error(g);
      ok = false;
    }
  }
  for (int i = 0; i < ag->nouts; i++) {
    const fe_ast_decl *d = &ag->outs[i];
    fe_shape s = {0};
    if (!fe_sm_type(S, &d->type, false, &s)) {
      ok = false;
      continue;
    }
    g->line = d->line, g->col = d->col;
    if (fe_declare_output(g, d->name, (tiny_dtype)d->type.dtype, &s)) {
      fe_sm_err(S, g->err.code, d->line, d->col, "%s", g->err.msg);
      fe_clear_error(g);
      ok = false;
    }
  }
  if (ag->nouts == 0) {
    fe_sm_err(S, HARP_E_INVALID_ARG, ag->line, ag->col, "graph %s declares no outputs", ag->name);
    ok = false;
  }
  return ok;
}

static void body(sema *S, const fe_ast_graph *ag) {
  ut_strmap_free(&S->env);
  hg_graph *g = S->g;
  for (int i = 0; i < g->nparams; i++) {
    fe_node *n = fe_node_of(g, g->params[i]);
    fe_sm_bind(S, n->name, g->params[i]);
  }
  bool returned = false, any_return = false;
  for (int i = 0; i < ag->nstmts && !S->oom; i++) {
    stmt(S, &ag->stmts[i], &returned);
    any_return |= ag->stmts[i].k == S_RETURN;
  }
  if (!any_return) fe_sm_err(S, HARP_E_INVALID_ARG, ag->end_line, ag->end_col, "graph %s has no return statement", ag->name);
}

void fe_sema(const fe_ast *ast, hg_program *p, fe_diagctx *dc) {
  sema S = {p, dc, NULL, NULL, {0}, false, NULL, NULL, ast->n, eval};
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
      fe_sm_err(&S, HARP_E_DUPLICATE_ID, ag->line, ag->col, "graph %s is defined twice", ag->name);
      continue;
    }
    if (!(gs[i] = hg_program_add_graph(p, ag->name))) {
      fe_sm_err(&S, p->err.code, ag->line, ag->col, "%s", p->err.msg);
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
