/* expr.c — index expressions of VIEW maps: parse, print, evaluate.
 * Needs: graph.c (constructors).  Gives: tiny_expr_parse/print/eval.
 *
 * Grammar (whitespace ignored):
 *   expr  := term (('+' | '-') term)*
 *   term  := unary (('*' | 'floordiv' | '//' | '%' | 'mod') unary)*
 *   unary := '-' unary | atom
 *   atom  := INT | 'i' DIGITS | IDENT | '(' expr ')'
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "harp/tiny.h"
#include "util/util.h"

typedef struct parser {
  tiny_graph *g;
  harp_error *e;
  const char *text, *p;
  int nvars;
  int depth;
} parser;

static const tiny_expr *p_expr(parser *ps);

static void skip(parser *ps) {
  while (*ps->p == ' ' || *ps->p == '\t') ps->p++;
}

static const tiny_expr *fail(parser *ps, const char *what) {
  ut_fail(ps->e, HARP_E_INVALID_ARG, NULL, "index_map \"%s\": %s at column %d", ps->text, what,
          (int)(ps->p - ps->text) + 1);
  return NULL;
}

static bool word(parser *ps, const char *w) {
  size_t n = strlen(w);
  if (strncmp(ps->p, w, n) == 0 && !isalnum((unsigned char)ps->p[n]) && ps->p[n] != '_') {
    ps->p += n;
    return true;
  }
  return false;
}

static const tiny_expr *p_atom(parser *ps) {
  skip(ps);
  const char *s = ps->p;
  if (*s == '(') {
    ps->p++;
    const tiny_expr *x = p_expr(ps);
    if (!x) return NULL;
    skip(ps);
    if (*ps->p != ')') return fail(ps, "expected ')'");
    ps->p++;
    return x;
  }
  if (isdigit((unsigned char)*s)) {
    int64_t v = 0;
    while (isdigit((unsigned char)*ps->p)) {
      if (!ut_mul_ok(v, 10, &v) || !ut_add_ok(v, *ps->p - '0', &v)) return fail(ps, "integer too large");
      ps->p++;
    }
    return tiny_x_const(ps->g, v);
  }
  if (isalpha((unsigned char)*s) || *s == '_') {
    while (isalnum((unsigned char)*ps->p) || *ps->p == '_') ps->p++;
    size_t n = (size_t)(ps->p - s);
    if (n > 64) return fail(ps, "name too long");
    char name[80];
    memcpy(name, s, n);
    name[n] = 0;
    if (strcmp(name, "floordiv") == 0 || strcmp(name, "mod") == 0) {
      ps->p = s;
      return fail(ps, "operand expected");
    }
    if (name[0] == 'i' && n > 1) {
      bool digits = true;
      for (size_t k = 1; k < n; k++) digits &= isdigit((unsigned char)name[k]) != 0;
      if (digits) {
        int v = 0;
        for (size_t k = 1; k < n && v <= TINY_MAX_RANK; k++) v = v * 10 + (name[k] - '0');
        if (v >= ps->nvars) {
          ps->p = s;
          return fail(ps, "axis variable out of range");
        }
        return tiny_x_var(ps->g, v);
      }
    }
    return tiny_x_sym(ps->g, name);
  }
  return fail(ps, *s ? "unexpected character" : "unexpected end");
}

static const tiny_expr *p_unary(parser *ps) {
  skip(ps);
  if (*ps->p == '-') {
    ps->p++;
    if (++ps->depth > 64) return fail(ps, "expression nested too deeply");
    const tiny_expr *x = p_unary(ps);
    ps->depth--;
    if (!x) return NULL;
    if (x->k == TX_CONST) return tiny_x_const(ps->g, -x->c);
    return tiny_x_bin(ps->g, TX_MUL, tiny_x_const(ps->g, -1), x);
  }
  return p_atom(ps);
}

static const tiny_expr *p_term(parser *ps) {
  const tiny_expr *x = p_unary(ps);
  while (x) {
    skip(ps);
    tiny_expr_kind k;
    if (*ps->p == '*')
      ps->p++, k = TX_MUL;
    else if (ps->p[0] == '/' && ps->p[1] == '/')
      ps->p += 2, k = TX_FLOORDIV;
    else if (*ps->p == '%')
      ps->p++, k = TX_MOD;
    else if (word(ps, "floordiv"))
      k = TX_FLOORDIV;
    else if (word(ps, "mod"))
      k = TX_MOD;
    else
      break;
    const tiny_expr *y = p_unary(ps);
    if (!y) return NULL;
    x = tiny_x_bin(ps->g, k, x, y);
  }
  return x;
}

static const tiny_expr *p_expr(parser *ps) {
  if (++ps->depth > 64) return fail(ps, "expression nested too deeply");
  const tiny_expr *x = p_term(ps);
  while (x) {
    skip(ps);
    char c = *ps->p;
    if (c != '+' && c != '-') break;
    ps->p++;
    const tiny_expr *y = p_term(ps);
    if (!y) return NULL;
    if (c == '-') y = y->k == TX_CONST ? tiny_x_const(ps->g, -y->c) : tiny_x_bin(ps->g, TX_MUL, tiny_x_const(ps->g, -1), y);
    x = tiny_x_bin(ps->g, TX_ADD, x, y);
  }
  ps->depth--;
  return x;
}

harp_status tiny_expr_parse(harp_error *e, tiny_graph *g, const char *text, int nvars, const tiny_expr **out) {
  parser ps = {g, e, text, text, nvars, 0};
  *out = NULL;
  if (strlen(text) > 4096) return ut_fail(e, HARP_E_LIMIT, NULL, "index_map expression too long");
  const tiny_expr *x = p_expr(&ps);
  if (!x) {
    if (e->code == HARP_OK) ut_fail(e, g->err.code ? g->err.code : HARP_E_NO_MEMORY, NULL, "out of memory");
    return e->code;
  }
  skip(&ps);
  if (*ps.p) {
    fail(&ps, "unexpected trailing text");
    return e->code;
  }
  *out = x;
  return HARP_OK;
}

/* ---- printing ----------------------------------------------------------- */
typedef struct pbuf {
  char *b;
  int cap, n;
} pbuf;

static void put(pbuf *p, const char *s) {
  int k = snprintf(p->b + p->n, p->cap > p->n ? (size_t)(p->cap - p->n) : 0, "%s", s);
  if (k > 0) p->n += k;
  if (p->n >= p->cap) p->n = p->cap - 1;
}

static void print_rec(pbuf *p, const tiny_expr *x, int prec) {
  char tmp[32];
  switch (x->k) {
  case TX_CONST:
    snprintf(tmp, sizeof tmp, "%lld", (long long)x->c);
    if (x->c < 0 && prec > 0) {
      put(p, "(");
      put(p, tmp);
      put(p, ")");
    } else
      put(p, tmp);
    return;
  case TX_VAR: snprintf(tmp, sizeof tmp, "i%d", x->var); put(p, tmp); return;
  case TX_SYM: put(p, x->sym); return;
  case TX_ADD:
    if (prec > 0) put(p, "(");
    print_rec(p, x->a, 0);
    put(p, " + ");
    print_rec(p, x->b, 1);
    if (prec > 0) put(p, ")");
    return;
  default: {
    const char *op = x->k == TX_MUL ? "*" : x->k == TX_FLOORDIV ? " floordiv " : " % ";
    if (prec > 1) put(p, "(");
    print_rec(p, x->a, 1);
    put(p, op);
    print_rec(p, x->b, 2);
    if (prec > 1) put(p, ")");
    return;
  }
  }
}

void tiny_expr_print(const tiny_expr *x, char *buf, int cap) {
  if (cap <= 0) return;
  buf[0] = 0;
  pbuf p = {buf, cap, 0};
  if (x) print_rec(&p, x, 0);
}

bool tiny_expr_eval(const tiny_expr *x, const int64_t *vars, const tiny_symtab *syms, int64_t *out) {
  int64_t a, b;
  switch (x->k) {
  case TX_CONST: *out = x->c; return true;
  case TX_VAR: *out = vars ? vars[x->var] : 0; return vars != NULL;
  case TX_SYM: return tiny_symtab_get(syms, x->sym, out);
  default: break;
  }
  if (!tiny_expr_eval(x->a, vars, syms, &a) || !tiny_expr_eval(x->b, vars, syms, &b)) return false;
  switch (x->k) {
  case TX_ADD: return ut_add_ok(a, b, out);
  case TX_MUL: return ut_mul_ok(a, b, out);
  case TX_FLOORDIV:
    if (b <= 0) return false;
    *out = ut_floordiv(a, b);
    return true;
  case TX_MOD:
    if (b <= 0) return false;
    *out = ut_mod(a, b);
    return true;
  default: return false;
  }
}
