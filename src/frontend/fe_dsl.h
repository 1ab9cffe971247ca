/* fe_dsl.h — the harp DSL's tokens, syntax tree and diagnostics, shared by
 * lex.c, parse.c, sema.c and load.c (not public). */
#ifndef HARP_FE_DSL_H
#define HARP_FE_DSL_H

#include "fe_int.h"

/* ---- diagnostics --------------------------------------------------------- */
typedef struct fe_diagctx {
  hg_diags *d; /* never NULL (load.c supplies one) */
  int count;   /* all errors, kept or not */
} fe_diagctx;

void fe_diag(fe_diagctx *c, harp_status code, int line, int col, const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* ---- tokens ------------------------------------------------------------------ */
typedef enum fe_tok_kind {
  T_EOF,
  T_NAME,
  T_INT,
  T_FLOAT,
  T_GRAPH,  /* keywords */
  T_RETURN,
  T_TRUE,
  T_FALSE,
  T_RESERVED, /* fused, fused_reduce, fused_cumulative, inf/nan used as names */
  T_LPAREN,
  T_RPAREN,
  T_LBRACK,
  T_RBRACK,
  T_LBRACE,
  T_RBRACE,
  T_LT,
  T_GT,
  T_LE,
  T_GE,
  T_EQEQ,
  T_NE,
  T_ASSIGN,
  T_COMMA,
  T_COLON,
  T_SEMI,
  T_PLUS,
  T_MINUS,
  T_STAR,
  T_SLASH,
  T_AT,
  T_ARROW,
  T_ERROR /* a character the lexer could not use (already reported) */
} fe_tok_kind;

typedef struct fe_tok {
  fe_tok_kind k;
  const char *s; /* points into the source */
  int len;
  int line, col;
  bool bol;   /* first token on its line */
  int depth;  /* ( and [ nesting before this token */
  double num; /* T_INT / T_FLOAT */
  int64_t ival;
} fe_tok;

/* Tokenize the whole text (ends with T_EOF).  Bad characters become T_ERROR
 * tokens and a diagnostic.  Returns a malloc'd array, NULL on no memory. */
fe_tok *fe_lex(const char *src, size_t len, fe_diagctx *dc, int *ntok);
const char *fe_tok_name(fe_tok_kind k);

/* ---- syntax tree (arena-allocated) --------------------------------------------- */
typedef enum fe_ex_kind { E_NUM, E_BOOL, E_NAME, E_CALL, E_BIN, E_NEG, E_LIST } fe_ex_kind;

typedef struct fe_ex fe_ex;
typedef struct fe_arg {
  const char *kw; /* NULL: positional */
  int line, col;
  fe_ex *e;
} fe_arg;

struct fe_ex {
  fe_ex_kind k;
  int line, col;
  double num;    /* NUM */
  bool is_int;   /* NUM written without '.' or exponent */
  int64_t ival;  /* NUM when is_int */
  bool b;        /* BOOL */
  const char *name; /* NAME; CALL: the function */
  fe_tok_kind op;   /* BIN */
  fe_ex *l, *r;     /* BIN; NEG uses l */
  int n;            /* CALL args / LIST items */
  fe_arg *args;
  int height;       /* of the subtree (bounded: the passes over it recurse) */
};

#define FE_MAX_EXPR_HEIGHT 1000 /* deeper expressions are a ParseError */

typedef struct fe_ast_type {
  int dtype;
  int rank;
  fe_ex **dims;
  int line, col;
} fe_ast_type;

typedef struct fe_ast_decl { /* a parameter or an output */
  const char *name;
  int line, col;
  fe_ast_type type;
} fe_ast_decl;

typedef struct fe_ast_svar {
  const char *name;
  bool has_default;
  int64_t dflt;
  int line, col;
} fe_ast_svar;

typedef enum fe_st_kind { S_ASSIGN, S_TUPLE, S_RETURN } fe_st_kind;
typedef struct fe_ast_stmt {
  fe_st_kind k;
  int line, col;
  int nnames; /* ASSIGN: 1; TUPLE: >= 1 */
  const char **names;
  int *nline, *ncol;
  int nex; /* ASSIGN/TUPLE: 1; RETURN: >= 1 */
  fe_ex **ex;
} fe_ast_stmt;

typedef struct fe_ast_graph {
  const char *name;
  int line, col;
  int nsv, nparams, nouts, nstmts;
  fe_ast_svar *sv;
  fe_ast_decl *params, *outs;
  fe_ast_stmt *stmts;
  int end_line, end_col; /* the closing brace */
} fe_ast_graph;

typedef struct fe_ast {
  int n;
  fe_ast_graph *graphs;
} fe_ast;

/* Parse tokens into a tree allocated from `a`.  Syntax errors go to dc; the
 * parser resynchronizes at the next statement or graph.  Returns false on
 * no memory. */
bool fe_parse(const fe_tok *toks, int ntok, ut_arena *a, fe_diagctx *dc, fe_ast *out);

/* Build p's graphs from the tree through the builder (sema.c).  Semantic
 * errors go to dc, located; each failing statement poisons its names so
 * one mistake is reported once. */
void fe_sema(const fe_ast *ast, hg_program *p, fe_diagctx *dc);

/* Words that cannot name a graph, a variable or a shape variable. */
bool fe_is_reserved(const char *s, int len);

#endif
