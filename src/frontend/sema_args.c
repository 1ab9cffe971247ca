/* sema_args.c — the DSL analysis's readers: diagnostics located at an
 * expression, the name environment, dimension and type expressions, and a
 * builtin call's arguments bound to its parameters and read as integers,
 * lists, numbers, flags, dims, dtypes or tensors (tensors through the
 * evaluator sema.c gives in S->eval).
 * Needs: sema_int.h, the builder.  Gives: fe_sm_err ... fe_sm_dtype. */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sema_int.h"

void fe_sm_err(sema *S, harp_status code, int line, int col, const char *fmt, ...) {
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fe_diag(S->dc, code, line, col, "%s", msg);
}

/* After a builder call: report its error at ex. */
hg_val fe_sm_chk(sema *S, const fe_ex *ex, hg_val v) {
  if (v > 0 && !S->g->err.code) return v;
  if (S->g->err.code) {
    fe_sm_err(S, S->g->err.code, ex->line, ex->col, "%s", S->g->err.msg);
    fe_clear_error(S->g);
  }
  return FAILED;
}

void fe_sm_at(sema *S, const fe_ex *ex) {
  S->g->line = ex->line;
  S->g->col = ex->col;
}

/* ---- environment --------------------------------------------------------- */
int *fe_sm_lookup(sema *S, const char *name) { return ut_strmap_find(&S->env, name); }

void fe_sm_bind(sema *S, const char *name, hg_val v) {
  if (!ut_strmap_put(&S->env, name, v)) S->oom = true;
}

/* ---- dimensions ------------------------------------------------------------ */
/* dim := INT | SHAPEVAR | dim ('+'|'-'|'*') dim | dim '/' INT | '-' dim */
const fe_dim *fe_sm_dim(sema *S, const fe_ex *ex) {
  ut_arena *A = S->p->arena;
  const fe_dim *l, *r, *d = NULL;
  int64_t q;
  switch (ex->k) {
  case E_NUM:
    if (!ex->is_int) {
      fe_sm_err(S, HARP_E_INVALID_ARG, ex->line, ex->col, "a dimension must be an integer, got %g", ex->num);
      return NULL;
    }
    d = fe_dim_int(A, ex->ival);
    break;
  case E_NAME:
    if (fe_shape_var_index(S->g, ex->name) < 0) {
      if (fe_sm_lookup(S, ex->name))
        fe_sm_err(S, HARP_E_INVALID_ARG, ex->line, ex->col, "%s is a tensor, not a dimension", ex->name);
      else
        fe_sm_err(S, HARP_E_UNBOUND_SYMBOL, ex->line, ex->col, "shape variable %s is not declared; add it to graph<%s=...>",
            ex->name, ex->name);
      return NULL;
    }
    d = fe_dim_sym(A, ex->name);
    break;
  case E_NEG:
    if (!(l = fe_sm_dim(S, ex->l))) return NULL;
    d = fe_dim_scale(A, l, -1);
    break;
  case E_BIN:
    if (!(l = fe_sm_dim(S, ex->l)) || !(r = fe_sm_dim(S, ex->r))) return NULL;
    if (ex->op == T_PLUS) d = fe_dim_add(A, l, r);
    else if (ex->op == T_MINUS) d = fe_dim_sub(A, l, r);
    else if (ex->op == T_STAR) d = fe_dim_mul(A, l, r);
    else if (ex->op == T_SLASH) {
      if (!fe_dim_is_int(r, &q) || q < 1) {
        fe_sm_err(S, HARP_E_INVALID_ARG, ex->r->line, ex->r->col, "a dimension can only be divided by a positive integer");
        return NULL;
      }
      d = fe_dim_div(A, l, q);
    } else {
      fe_sm_err(S, HARP_E_INVALID_ARG, ex->line, ex->col, "this operator is not allowed in a dimension");
      return NULL;
    }
    break;
  default: fe_sm_err(S, HARP_E_INVALID_ARG, ex->line, ex->col, "expected a dimension (an integer or a shape variable)"); return NULL;
  }
  if (!d) fe_sm_err(S, HARP_E_LIMIT, ex->line, ex->col, "dimension expression too large");
  return d;
}

bool fe_sm_type(sema *S, const fe_ast_type *t, bool param, fe_shape *s) {
  s->rank = t->rank;
  for (int i = 0; i < t->rank; i++) {
    const fe_ex *ex = t->dims[i];
    if (param && ex->k != E_NAME && !(ex->k == E_NUM && ex->is_int)) {
      fe_sm_err(S, HARP_E_INVALID_ARG, ex->line, ex->col, "a parameter's dimensions must be integers or shape variables");
      return false;
    }
    if (!(s->d[i] = fe_sm_dim(S, ex))) return false;
    int64_t v;
    if (fe_dim_is_int(s->d[i], &v) && (v < 0 || v > TINY_MAX_DIM)) {
      fe_sm_err(S, HARP_E_INVALID_ARG, ex->line, ex->col, "dimension %" PRId64 " is out of range", v);
      return false;
    }
  }
  return true;
}

/* ---- argument binding --------------------------------------------------------- */

bool fe_sm_bind_args(sema *S, const fe_ex *call, const pspec *sp, int nsp, argset *out) {
  memset(out, 0, sizeof *out);
  int pos = 0;
  for (int i = 0; i < call->n; i++) {
    const fe_arg *a = &call->args[i];
    int k = -1;
    if (!a->kw) {
      if (pos >= nsp) {
        int req = 0;
        for (int j = 0; j < nsp; j++) req += sp[j].required;
        fe_sm_err(S, HARP_E_ARITY, a->line, a->col, "%s takes at most %d argument%s (%d required), got %d", call->name, nsp,
            nsp == 1 ? "" : "s", req, call->n);
        return false;
      }
      k = pos++;
    } else {
      for (int j = 0; j < nsp; j++)
        if (strcmp(sp[j].name, a->kw) == 0) k = j;
      if (k < 0) {
        fe_sm_err(S, HARP_E_INVALID_ARG, a->line, a->col, "%s has no argument named '%s'", call->name, a->kw);
        return false;
      }
    }
    if (out->e[k]) {
      fe_sm_err(S, HARP_E_INVALID_ARG, a->line, a->col, "%s: argument '%s' is given twice", call->name, sp[k].name);
      return false;
    }
    out->e[k] = a->e;
  }
  for (int j = 0; j < nsp; j++)
    if (sp[j].required && !out->e[j]) {
      fe_sm_err(S, HARP_E_ARITY, call->line, call->col, "%s: missing argument '%s'", call->name, sp[j].name);
      return false;
    }
  return true;
}

bool fe_sm_int_ex(const fe_ex *e, int64_t *v) {
  if (e->k == E_NUM && e->is_int) {
    *v = e->ival;
    return true;
  }
  if (e->k == E_NEG && e->l->k == E_NUM && e->l->is_int) {
    *v = -e->l->ival;
    return true;
  }
  return false;
}

bool fe_sm_int(sema *S, const fe_ex *e, const char *what, int64_t *v) {
  if (fe_sm_int_ex(e, v)) return true;
  fe_sm_err(S, HARP_E_INVALID_ARG, e->line, e->col, "%s must be an integer", what);
  return false;
}

/* An integer or a list of them. */
bool fe_sm_ints(sema *S, const fe_ex *e, const char *what, int64_t *v, int *n, int cap) {
  if (e->k != E_LIST) {
    *n = 1;
    return fe_sm_int(S, e, what, v);
  }
  if (e->n > cap) {
    fe_sm_err(S, HARP_E_INVALID_ARG, e->line, e->col, "%s has %d entries, at most %d", what, e->n, cap);
    return false;
  }
  for (int i = 0; i < e->n; i++)
    if (!fe_sm_int(S, e->args[i].e, what, &v[i])) return false;
  *n = e->n;
  return true;
}

bool fe_sm_float(sema *S, const fe_ex *e, const char *what, double *v) {
  if (e->k == E_NUM) {
    *v = e->num;
    return true;
  }
  if (e->k == E_NEG && e->l->k == E_NUM) {
    *v = -e->l->num;
    return true;
  }
  fe_sm_err(S, HARP_E_INVALID_ARG, e->line, e->col, "%s must be a number", what);
  return false;
}

bool fe_sm_bool(sema *S, const fe_ex *e, const char *what, bool *v) {
  if (e->k == E_BOOL) {
    *v = e->b;
    return true;
  }
  fe_sm_err(S, HARP_E_INVALID_ARG, e->line, e->col, "%s must be true or false", what);
  return false;
}

bool fe_sm_dims(sema *S, const fe_ex *e, const char *what, bool minus1, const fe_dim **d, int *n) {
  if (e->k != E_LIST) {
    fe_sm_err(S, HARP_E_INVALID_ARG, e->line, e->col, "%s must be a list like [B, 64]", what);
    return false;
  }
  if (e->n > TINY_MAX_RANK) {
    fe_sm_err(S, HARP_E_LIMIT, e->line, e->col, "%s has %d entries, at most %d", what, e->n, TINY_MAX_RANK);
    return false;
  }
  for (int i = 0; i < e->n; i++) {
    int64_t v;
    if (minus1 && fe_sm_int_ex(e->args[i].e, &v) && v == -1) {
      d[i] = NULL;
      continue;
    }
    if (!(d[i] = fe_sm_dim(S, e->args[i].e))) return false;
  }
  *n = e->n;
  return true;
}

hg_val fe_sm_tensor(sema *S, const fe_ex *e) {
  if (e->k == E_LIST) {
    fe_sm_err(S, HARP_E_INVALID_ARG, e->line, e->col, "expected a tensor, found a list");
    return FAILED;
  }
  if (e->k == E_BOOL) {
    fe_sm_err(S, HARP_E_INVALID_ARG, e->line, e->col, "true/false are option values, not tensors");
    return FAILED;
  }
  return S->eval(S, e);
}

bool fe_sm_dtype(sema *S, const fe_ex *e, tiny_dtype *dt) {
  int d = e->k == E_NAME ? tiny_dtype_parse(e->name) : -1;
  if (d < 0) {
    fe_sm_err(S, HARP_E_INVALID_ARG, e->line, e->col, "expected a dtype (f16, bf16, f32, i32, bool)");
    return false;
  }
  *dt = (tiny_dtype)d;
  return true;
}
