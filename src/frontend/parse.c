/* parse.c — the harp DSL parser (recursive descent).
 * Needs: lex.c tokens.  Gives: fe_parse (tokens -> syntax tree), reporting
 * every syntax error: after one, it skips to the next statement (a token
 * that starts a line outside brackets, or ';' / '}') or the next graph.
 *
 *   program := graph* EOF
 * The grammar rule each function implements is written above it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fe_dsl.h"

typedef struct parser {
  const fe_tok *t;
  int n, i;
  ut_arena *a;
  fe_diagctx *dc;
  bool oom;
  bool panic; /* inside an error: stay quiet until resynchronized */
  int nest;   /* recursion depth of the expression parser */
} parser;

/* A growable array that ends in the arena. */
typedef struct vec {
  void *p;
  int n, cap;
  size_t sz;
} vec;

static void *vec_push(parser *P, vec *v) {
  if (v->n == v->cap) {
    int cap = v->cap ? v->cap * 2 : 8;
    void *np = ut_xrealloc(v->p, v->sz * (size_t)cap);
    if (!np) {
      P->oom = true;
      return NULL;
    }
    v->p = np;
    v->cap = cap;
  }
  void *e = (char *)v->p + v->sz * (size_t)v->n++;
  memset(e, 0, v->sz);
  return e;
}

static void *vec_done(parser *P, vec *v) {
  void *r = NULL;
  if (v->n) {
    r = ut_arena_alloc(P->a, v->sz * (size_t)v->n);
    if (r) memcpy(r, v->p, v->sz * (size_t)v->n);
    else P->oom = true;
  }
  free(v->p);
  v->p = NULL;
  return r;
}

static const fe_tok *peek(parser *P) { return &P->t[P->i]; }
static const fe_tok *peek2(parser *P) { return &P->t[P->i + 1 < P->n ? P->i + 1 : P->n - 1]; }
static bool at(parser *P, fe_tok_kind k) { return P->t[P->i].k == k; }
static const fe_tok *next(parser *P) {
  const fe_tok *t = &P->t[P->i];
  if (t->k != T_EOF) P->i++;
  return t;
}

static void error_at(parser *P, const fe_tok *t, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void error_at(parser *P, const fe_tok *t, const char *fmt, ...) {
  if (P->panic) return;
  P->panic = true;
  if (t->k == T_ERROR) return; /* the lexer said it already */
  char msg[200];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fe_diag(P->dc, HARP_E_PARSE, t->line, t->col, "%s", msg);
}

static void expected(parser *P, const char *what) {
  const fe_tok *t = peek(P);
  /* Something missing at the end of a line is reported there, not at the
   * start of the next one. */
  fe_tok at_end = *t;
  if (t->bol && P->i > 0 && P->t[P->i - 1].line < t->line) {
    const fe_tok *prev = &P->t[P->i - 1];
    at_end.line = prev->line;
    at_end.col = prev->col + prev->len;
    at_end.k = T_EOF;
  }
  if (t->k == T_NAME || t->k == T_INT || t->k == T_FLOAT || t->k == T_RESERVED)
    error_at(P, &at_end, "expected %s, found '%.*s'", what, t->len, t->s);
  else
    error_at(P, &at_end, "expected %s, found %s", what, fe_tok_name(t->k));
}

static bool expect(parser *P, fe_tok_kind k, const char *what) {
  if (at(P, k)) {
    next(P);
    return true;
  }
  expected(P, what);
  return false;
}

static const char *tok_str(parser *P, const fe_tok *t) {
  const char *s = ut_arena_strndup(P->a, t->s, (size_t)t->len);
  if (!s) P->oom = true;
  return s;
}

/* NAME, not a reserved word. */
static const char *ident(parser *P, const char *what) {
  const fe_tok *t = peek(P);
  if (t->k == T_NAME) return tok_str(P, next(P));
  if (t->k == T_RESERVED || t->k == T_GRAPH || t->k == T_RETURN || t->k == T_TRUE || t->k == T_FALSE)
    error_at(P, t, "'%.*s' is a reserved word and cannot be used as %s", t->len, t->s, what);
  else
    expected(P, what);
  return NULL;
}

/* Does token i start a line that looks like a statement even though an
 * unclosed bracket precedes it ('return', '}', 'graph', or NAME '=' not
 * continuing a ',' or '(' of the line before)? */
static bool looks_like_stmt(const parser *P, int i) {
  const fe_tok *t = &P->t[i];
  if (!t->bol) return false;
  if (t->k == T_RETURN || t->k == T_RBRACE || t->k == T_GRAPH) return true;
  fe_tok_kind prev = i > 0 ? P->t[i - 1].k : T_EOF;
  return t->k == T_NAME && i + 1 < P->n && P->t[i + 1].k == T_ASSIGN && prev != T_COMMA && prev != T_LPAREN &&
         prev != T_LBRACK;
}

/* Skip to where a statement can start: a token opening a line at the
 * bracket depth the broken statement started at (or one that looks like a
 * statement: brackets may be unbalanced), ';' or '}' (not consumed), EOF. */
static void sync_stmt(parser *P, int start) {
  int d0 = P->t[start].depth;
  bool first = true;
  while (!at(P, T_EOF)) {
    const fe_tok *t = peek(P);
    if (!first && P->i > start && (looks_like_stmt(P, P->i) || (t->bol && t->depth <= d0))) break;
    /* a 'graph' the broken statement starts with (mid-line: "x = f,graph ...")
     * is skipped, else the statement loop would stop here again and again */
    if (t->depth <= d0 && (t->k == T_RBRACE || t->k == T_GRAPH) && P->i > start) break;
    if (t->depth <= d0 && t->k == T_SEMI) {
      next(P);
      break;
    }
    next(P);
    first = false;
  }
  P->panic = false;
}

/* Skip to the next 'graph' that starts a line (or EOF). */
static void sync_graph(parser *P) {
  while (!at(P, T_EOF) && !(at(P, T_GRAPH) && peek(P)->bol)) next(P);
  P->panic = false;
}

static fe_ex *new_ex(parser *P, fe_ex_kind k, const fe_tok *t) {
  fe_ex *e = ut_arena_alloc(P->a, sizeof *e);
  if (!e) {
    P->oom = true;
    return NULL;
  }
  e->k = k;
  e->line = t->line;
  e->col = t->col;
  return e;
}

static fe_ex *expr_inner(parser *P);

/* Bounds the parser's recursion and the height of the tree it builds (the
 * later passes recurse over it). */
static fe_ex *expr(parser *P) {
  if (P->nest >= FE_MAX_EXPR_HEIGHT / 4) {
    error_at(P, peek(P), "expression nested too deeply");
    return NULL;
  }
  P->nest++;
  fe_ex *e = expr_inner(P);
  P->nest--;
  return e;
}

static int height_of(const fe_ex *e) { return e ? e->height : 0; }

/* The height of a node over its children; an error when too tall. */
static fe_ex *grown(parser *P, fe_ex *e, const fe_tok *t) {
  if (!e) return NULL;
  int h = height_of(e->l) > height_of(e->r) ? height_of(e->l) : height_of(e->r);
  for (int i = 0; i < e->n; i++)
    if (height_of(e->args[i].e) > h) h = height_of(e->args[i].e);
  e->height = h + 1;
  if (e->height > FE_MAX_EXPR_HEIGHT) {
    error_at(P, t, "expression too deep (more than %d levels); split it over several statements", FE_MAX_EXPR_HEIGHT);
    return NULL;
  }
  return e;
}

/* args := arg (',' arg)* [','] ; arg := NAME '=' expr | expr
 * Used for call arguments (close = ')') and list items (close = ']'). */
static bool arg_list(parser *P, fe_tok_kind close, bool allow_kw, fe_ex *into) {
  vec v = {NULL, 0, 0, sizeof(fe_arg)};
  bool seen_kw = false;
  while (!at(P, close)) {
    fe_arg *a = vec_push(P, &v);
    if (!a) break;
    const fe_tok *t = peek(P);
    a->line = t->line;
    a->col = t->col;
    if (allow_kw && t->k == T_NAME && peek2(P)->k == T_ASSIGN) {
      a->kw = tok_str(P, next(P));
      next(P);
      seen_kw = true;
    } else if (seen_kw) {
      error_at(P, t, "a positional argument cannot follow keyword arguments");
    }
    if (!(a->e = expr(P))) break;
    if (!at(P, T_COMMA)) break;
    next(P);
  }
  into->n = v.n;
  into->args = vec_done(P, &v);
  return !P->panic && !P->oom && expect(P, close, close == T_RPAREN ? "',' or ')'" : "',' or ']'");
}

/* primary := NUMBER | 'true' | 'false' | NAME | NAME '(' args ')'
 *          | '(' expr ')' | '[' items ']' */
static fe_ex *primary(parser *P) {
  const fe_tok *t = peek(P);
  fe_ex *e;
  switch (t->k) {
  case T_INT:
  case T_FLOAT:
    next(P);
    if (!(e = new_ex(P, E_NUM, t))) return NULL;
    e->num = t->num;
    e->is_int = t->k == T_INT;
    e->ival = t->ival;
    e->height = 1;
    return e;
  case T_TRUE:
  case T_FALSE:
    next(P);
    if (!(e = new_ex(P, E_BOOL, t))) return NULL;
    e->b = t->k == T_TRUE;
    e->height = 1;
    return e;
  case T_NAME: {
    next(P);
    /* A '(' that opens a line outside brackets starts the next statement
     * ('(a, b) = f(x)'), it does not call the name that ended this one. */
    const fe_tok *lp = peek(P);
    bool call = lp->k == T_LPAREN && !(lp->bol && lp->depth == 0);
    if (!(e = new_ex(P, call ? E_CALL : E_NAME, t))) return NULL;
    e->name = tok_str(P, t);
    if (e->k == E_CALL) {
      next(P);
      if (!arg_list(P, T_RPAREN, true, e)) return NULL;
    }
    return grown(P, e, t);
  }
  case T_LPAREN:
    next(P);
    e = expr(P);
    return e && expect(P, T_RPAREN, "')'") ? e : NULL;
  case T_LBRACK:
    next(P);
    if (!(e = new_ex(P, E_LIST, t))) return NULL;
    return arg_list(P, T_RBRACK, false, e) ? grown(P, e, t) : NULL;
  case T_RESERVED:
    error_at(P, t, "'%.*s' is a reserved word", t->len, t->s);
    return NULL;
  default: expected(P, "an expression"); return NULL;
  }
}

/* unary := '-' unary | primary */
static fe_ex *unary(parser *P) {
  if (at(P, T_MINUS)) {
    const fe_tok *t = next(P);
    if (P->nest >= FE_MAX_EXPR_HEIGHT / 4) {
      error_at(P, t, "expression nested too deeply");
      return NULL;
    }
    fe_ex *e = new_ex(P, E_NEG, t);
    P->nest++;
    if (e) e->l = unary(P);
    P->nest--;
    return e && e->l ? grown(P, e, t) : NULL;
  }
  return primary(P);
}

static fe_ex *binary(parser *P, fe_tok_kind op, const fe_tok *t, fe_ex *l, fe_ex *r) {
  if (!l || !r) return NULL;
  fe_ex *e = new_ex(P, E_BIN, t);
  if (!e) return NULL;
  e->op = op;
  e->l = l;
  e->r = r;
  return grown(P, e, t);
}

/* term := unary (('*' | '/' | '@') unary)* */
static fe_ex *term(parser *P) {
  fe_ex *e = unary(P);
  while (e && (at(P, T_STAR) || at(P, T_SLASH) || at(P, T_AT))) {
    const fe_tok *t = next(P);
    e = binary(P, t->k, t, e, unary(P));
  }
  return e;
}

/* sum := term (('+' | '-') term)* */
static fe_ex *sum(parser *P) {
  fe_ex *e = term(P);
  while (e && (at(P, T_PLUS) || at(P, T_MINUS))) {
    const fe_tok *t = next(P);
    e = binary(P, t->k, t, e, term(P));
  }
  return e;
}

/* expr := sum [('<' | '<=' | '>' | '>=' | '==' | '!=') sum] */
static fe_ex *expr_inner(parser *P) {
  fe_ex *e = sum(P);
  fe_tok_kind k = peek(P)->k;
  if (e && (k == T_LT || k == T_LE || k == T_GT || k == T_GE || k == T_EQEQ || k == T_NE)) {
    const fe_tok *t = next(P);
    e = binary(P, t->k, t, e, sum(P));
    k = peek(P)->k;
    if (e && (k == T_LT || k == T_LE || k == T_GT || k == T_GE || k == T_EQEQ || k == T_NE)) {
      error_at(P, peek(P), "comparisons do not chain; use parentheses");
      return NULL;
    }
  }
  return e;
}

/* type := DTYPE '[' [sum (',' sum)*] ']' | DTYPE   (a bare dtype is rank 0) */
static bool type(parser *P, fe_ast_type *ty) {
  const fe_tok *t = peek(P);
  ty->line = t->line;
  ty->col = t->col;
  if (t->k != T_NAME) {
    expected(P, "a dtype (f16, bf16, f32, i32, bool)");
    return false;
  }
  char buf[32];
  snprintf(buf, sizeof buf, "%.*s", t->len < 31 ? t->len : 31, t->s);
  ty->dtype = tiny_dtype_parse(buf);
  if (ty->dtype < 0) {
    error_at(P, t, "unknown dtype '%.*s' (expected f16, bf16, f32, i32 or bool)", t->len, t->s);
    return false;
  }
  next(P);
  if (!at(P, T_LBRACK)) return true;
  next(P);
  vec v = {NULL, 0, 0, sizeof(fe_ex *)};
  while (!at(P, T_RBRACK)) {
    fe_ex **d = vec_push(P, &v);
    if (!d || !(*d = sum(P))) break;
    if (!at(P, T_COMMA)) break;
    next(P);
  }
  ty->rank = v.n;
  ty->dims = vec_done(P, &v);
  if (P->panic || P->oom || !expect(P, T_RBRACK, "',' or ']'")) return false;
  if (ty->rank > TINY_MAX_RANK) {
    error_at(P, t, "rank %d is above the limit %d", ty->rank, TINY_MAX_RANK);
    return false;
  }
  return true;
}

/* decls := [decl (',' decl)*] ; decl := NAME ':' type */
static bool decls(parser *P, fe_tok_kind close, fe_ast_decl **out, int *n, const char *what) {
  vec v = {NULL, 0, 0, sizeof(fe_ast_decl)};
  while (!at(P, close)) {
    fe_ast_decl *d = vec_push(P, &v);
    if (!d) break;
    d->line = peek(P)->line;
    d->col = peek(P)->col;
    if (!(d->name = ident(P, what)) || !expect(P, T_COLON, "':' and a type") || !type(P, &d->type)) break;
    if (!at(P, T_COMMA)) break;
    next(P);
  }
  *n = v.n;
  *out = vec_done(P, &v);
  return !P->panic && !P->oom && expect(P, close, close == T_RPAREN ? "',' or ')'" : "','");
}

/* svars := '<' svar (',' svar)* '>' ; svar := NAME ['=' INT] */
static bool svars(parser *P, fe_ast_graph *g) {
  vec v = {NULL, 0, 0, sizeof(fe_ast_svar)};
  next(P); /* '<' */
  while (!at(P, T_GT)) {
    fe_ast_svar *s = vec_push(P, &v);
    if (!s) break;
    s->line = peek(P)->line;
    s->col = peek(P)->col;
    if (!(s->name = ident(P, "a shape variable name"))) break;
    if (at(P, T_ASSIGN)) {
      next(P);
      if (!at(P, T_INT)) {
        expected(P, "an integer default");
        break;
      }
      s->has_default = true;
      s->dflt = next(P)->ival;
    }
    if (!at(P, T_COMMA)) break;
    next(P);
  }
  g->nsv = v.n;
  g->sv = vec_done(P, &v);
  return !P->panic && !P->oom && expect(P, T_GT, "',' or '>'");
}

/* stmt := NAME '=' expr
 *       | '(' NAME (',' NAME)* ')' '=' expr
 *       | 'return' expr (',' expr)*
 * followed by an optional ';'. */
static bool stmt(parser *P, fe_ast_stmt *s) {
  const fe_tok *t = peek(P);
  s->line = t->line;
  s->col = t->col;
  vec names = {NULL, 0, 0, sizeof(const char *)}, lines = {NULL, 0, 0, sizeof(int)}, cols = {NULL, 0, 0, sizeof(int)};
  vec ex = {NULL, 0, 0, sizeof(fe_ex *)};
  if (t->k == T_RETURN) {
    s->k = S_RETURN;
    next(P);
    do {
      fe_ex **e = vec_push(P, &ex);
      if (!e || !(*e = expr(P))) break;
    } while (at(P, T_COMMA) && next(P));
  } else {
    bool tuple = t->k == T_LPAREN;
    s->k = tuple ? S_TUPLE : S_ASSIGN;
    if (tuple) next(P);
    do {
      const fe_tok *nt = peek(P);
      const char **nm = vec_push(P, &names);
      int *l = vec_push(P, &lines), *c = vec_push(P, &cols);
      if (!nm || !l || !c || !(*nm = ident(P, tuple ? "a name" : "a statement (NAME = expression, or return)"))) break;
      *l = nt->line;
      *c = nt->col;
    } while (tuple && at(P, T_COMMA) && next(P));
    if (!P->panic && (!tuple || expect(P, T_RPAREN, "',' or ')'")) && expect(P, T_ASSIGN, "'='")) {
      fe_ex **e = vec_push(P, &ex);
      if (e) *e = expr(P);
    }
  }
  s->nnames = names.n;
  s->names = vec_done(P, &names);
  s->nline = vec_done(P, &lines);
  s->ncol = vec_done(P, &cols);
  s->nex = ex.n;
  s->ex = vec_done(P, &ex);
  if (P->panic || P->oom) return false;
  if (at(P, T_SEMI)) {
    next(P);
  } else if (!at(P, T_RBRACE) && !at(P, T_EOF) && !peek(P)->bol) {
    expected(P, "the end of the statement (a new line or ';')");
    return false;
  }
  return true;
}

/* graph := 'graph' [svars] NAME '(' decls ')' '->' '(' decls ')' '{' stmt* '}' */
static bool graph(parser *P, fe_ast_graph *g) {
  const fe_tok *t = next(P); /* 'graph' */
  g->line = t->line;
  g->col = t->col;
  if (at(P, T_LT) && !svars(P, g)) return false;
  g->line = peek(P)->line;
  g->col = peek(P)->col;
  if (!(g->name = ident(P, "a graph name")) || !expect(P, T_LPAREN, "'(' and the parameters") ||
      !decls(P, T_RPAREN, &g->params, &g->nparams, "a parameter name") || !expect(P, T_ARROW, "'->' and the outputs") ||
      !expect(P, T_LPAREN, "'(' and the outputs (name: type, ...)") ||
      !decls(P, T_RPAREN, &g->outs, &g->nouts, "an output name") || !expect(P, T_LBRACE, "'{'"))
    return false;
  vec v = {NULL, 0, 0, sizeof(fe_ast_stmt)};
  while (!at(P, T_RBRACE) && !at(P, T_EOF)) {
    if (at(P, T_GRAPH) && peek(P)->bol) break; /* a missing '}' */
    fe_ast_stmt *s = vec_push(P, &v);
    if (!s) break;
    int start = P->i;
    if (!stmt(P, s)) {
      v.n--; /* drop the broken statement */
      sync_stmt(P, start);
    }
  }
  g->nstmts = v.n;
  g->stmts = vec_done(P, &v);
  g->end_line = peek(P)->line;
  g->end_col = peek(P)->col;
  return expect(P, T_RBRACE, "'}' to close the graph");
}

bool fe_parse(const fe_tok *toks, int ntok, ut_arena *a, fe_diagctx *dc, fe_ast *out) {
  parser P = {toks, ntok, 0, a, dc, false, false, 0};
  vec v = {NULL, 0, 0, sizeof(fe_ast_graph)};
  memset(out, 0, sizeof *out);
  while (!at(&P, T_EOF) && !P.oom) {
    if (!at(&P, T_GRAPH)) {
      expected(&P, "'graph'");
      next(&P);
      sync_graph(&P);
      continue;
    }
    fe_ast_graph *g = vec_push(&P, &v);
    if (!g) break;
    if (!graph(&P, g)) {
      next(&P);
      sync_graph(&P);
    }
  }
  out->n = v.n;
  out->graphs = vec_done(&P, &v);
  return !P.oom;
}
