/* lex.c — the harp DSL lexer (hand-written).
 * Needs: fe_dsl.h.  Gives: fe_lex (text -> tokens with line/col, the
 * nesting depth the parser uses to resynchronize), fe_diag.
 *
 * Tokens: names, integer and float literals, the keywords graph / return /
 * true / false, the reserved words, punctuation ( ) [ ] { } < > <= >= ==
 * != = , : ; + - * / @ ->.  Comments: // and # to the end of the line,
 * and block comments. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fe_dsl.h"

void fe_diag(fe_diagctx *c, harp_status code, int line, int col, const char *fmt, ...) {
  c->count++;
  if (c->d->n >= HG_MAX_DIAGS) {
    c->d->dropped++;
    return;
  }
  hg_diag *d = &c->d->d[c->d->n++];
  d->code = code;
  d->line = line;
  d->col = col;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(d->msg, sizeof d->msg, fmt, ap);
  va_end(ap);
}

static const char *const reserved[] = {"fused", "fused_reduce", "fused_cumulative", "inf", "nan"};

bool fe_is_reserved(const char *s, int len) {
  static const char *const kw[] = {"graph", "return", "true", "false"};
  for (int i = 0; i < UT_ARRAY_LEN(kw); i++)
    if ((int)strlen(kw[i]) == len && strncmp(s, kw[i], (size_t)len) == 0) return true;
  for (int i = 0; i < UT_ARRAY_LEN(reserved); i++)
    if ((int)strlen(reserved[i]) == len && strncmp(s, reserved[i], (size_t)len) == 0) return true;
  return false;
}

const char *fe_tok_name(fe_tok_kind k) {
  static const char *const n[] = {"end of file", "a name", "an integer", "a number", "'graph'", "'return'", "'true'",
                                  "'false'", "a reserved word", "'('", "')'", "'['", "']'", "'{'", "'}'", "'<'", "'>'",
                                  "'<='", "'>='", "'=='", "'!='", "'='", "','", "':'", "';'", "'+'", "'-'", "'*'",
                                  "'/'", "'@'", "'->'", "a bad character"};
  return (unsigned)k < sizeof n / sizeof n[0] ? n[k] : "?";
}

static bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool is_digit(char c) { return c >= '0' && c <= '9'; }

typedef struct lexer {
  const char *p, *end, *line_start;
  int line;
  bool bol;
  int depth;
  fe_diagctx *dc;
} lexer;

static int col_of(const lexer *L, const char *p) { return (int)(p - L->line_start) + 1; }

static void newline(lexer *L, const char *after) {
  L->line++;
  L->line_start = after;
  L->bol = true;
}

/* Skip blanks and comments; false on an unterminated block comment. */
static void skip_space(lexer *L) {
  while (L->p < L->end) {
    char c = *L->p;
    if (c == '\n') {
      L->p++;
      newline(L, L->p);
    } else if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
      L->p++;
    } else if (c == '#' || (c == '/' && L->p + 1 < L->end && L->p[1] == '/')) {
      while (L->p < L->end && *L->p != '\n') L->p++;
    } else if (c == '/' && L->p + 1 < L->end && L->p[1] == '*') {
      int line = L->line, col = col_of(L, L->p);
      L->p += 2;
      while (L->p < L->end && !(*L->p == '*' && L->p + 1 < L->end && L->p[1] == '/')) {
        if (*L->p == '\n') newline(L, L->p + 1);
        L->p++;
      }
      if (L->p >= L->end) {
        fe_diag(L->dc, HARP_E_PARSE, line, col, "unterminated /* comment");
        return;
      }
      L->p += 2;
    } else {
      return;
    }
  }
}

static bool lex_number(lexer *L, fe_tok *t) {
  const char *s = L->p;
  while (L->p < L->end && is_digit(*L->p)) L->p++;
  bool is_float = false;
  if (L->p < L->end && *L->p == '.' && L->p + 1 <= L->end) {
    is_float = true;
    L->p++;
    while (L->p < L->end && is_digit(*L->p)) L->p++;
  }
  if (L->p < L->end && (*L->p == 'e' || *L->p == 'E')) {
    const char *q = L->p + 1;
    if (q < L->end && (*q == '+' || *q == '-')) q++;
    if (q < L->end && is_digit(*q)) {
      is_float = true;
      L->p = q;
      while (L->p < L->end && is_digit(*L->p)) L->p++;
    }
  }
  if (L->p < L->end && is_alpha(*L->p)) {
    fe_diag(L->dc, HARP_E_PARSE, t->line, t->col, "malformed number '%.*s'", (int)(L->p - s + 1), s);
    while (L->p < L->end && (is_alpha(*L->p) || is_digit(*L->p))) L->p++;
    t->k = T_ERROR;
    return true;
  }
  char buf[128];
  int n = (int)(L->p - s);
  if (n >= (int)sizeof buf) {
    fe_diag(L->dc, HARP_E_PARSE, t->line, t->col, "number literal is too long");
    t->k = T_ERROR;
    return true;
  }
  memcpy(buf, s, (size_t)n);
  buf[n] = 0;
  errno = 0;
  if (is_float) {
    t->k = T_FLOAT;
    t->num = strtod(buf, NULL);
    if (!isfinite(t->num)) {
      fe_diag(L->dc, HARP_E_PARSE, t->line, t->col, "number %s is out of range (write inf)", buf);
      t->k = T_ERROR;
    }
  } else {
    t->k = T_INT;
    long long v = strtoll(buf, NULL, 10);
    if (errno == ERANGE || v > ((long long)1 << 53)) {
      fe_diag(L->dc, HARP_E_PARSE, t->line, t->col, "integer %s is too large", buf);
      t->k = T_ERROR;
    }
    t->ival = v;
    t->num = (double)v;
  }
  return true;
}

static fe_tok_kind punct(lexer *L) {
  char c = *L->p, d = L->p + 1 < L->end ? L->p[1] : 0;
  struct {
    char a, b;
    fe_tok_kind k;
  } two[] = {{'<', '=', T_LE}, {'>', '=', T_GE}, {'=', '=', T_EQEQ}, {'!', '=', T_NE}, {'-', '>', T_ARROW}};
  for (int i = 0; i < UT_ARRAY_LEN(two); i++)
    if (c == two[i].a && d == two[i].b) {
      L->p += 2;
      return two[i].k;
    }
  static const char one[] = "()[]{}<>=,:;+-*/@";
  static const fe_tok_kind kinds[] = {T_LPAREN, T_RPAREN, T_LBRACK, T_RBRACK, T_LBRACE, T_RBRACE, T_LT,   T_GT,   T_ASSIGN,
                                      T_COMMA,  T_COLON,  T_SEMI,   T_PLUS,   T_MINUS,  T_STAR,   T_SLASH, T_AT};
  const char *f = c ? strchr(one, c) : NULL;
  if (!f) return T_ERROR;
  L->p++;
  return kinds[f - one];
}

fe_tok *fe_lex(const char *src, size_t len, fe_diagctx *dc, int *ntok) {
  lexer L = {src, src + len, src, 1, true, 0, dc};
  int cap = 256, n = 0;
  fe_tok *toks = ut_xmalloc(sizeof *toks * (size_t)cap);
  if (!toks) return NULL;
  for (;;) {
    skip_space(&L);
    if (n == cap) {
      cap *= 2;
      fe_tok *t2 = ut_xrealloc(toks, sizeof *toks * (size_t)cap);
      if (!t2) {
        free(toks);
        return NULL;
      }
      toks = t2;
    }
    fe_tok *t = &toks[n++];
    memset(t, 0, sizeof *t);
    t->s = L.p;
    t->line = L.line;
    t->col = col_of(&L, L.p);
    t->bol = L.bol;
    t->depth = L.depth;
    L.bol = false;
    if (L.p >= L.end) {
      t->k = T_EOF;
      break;
    }
    char c = *L.p;
    if (is_alpha(c)) {
      while (L.p < L.end && (is_alpha(*L.p) || is_digit(*L.p))) L.p++;
      t->len = (int)(L.p - t->s);
      t->k = T_NAME;
      static const struct {
        const char *w;
        fe_tok_kind k;
      } kw[] = {{"graph", T_GRAPH}, {"return", T_RETURN}, {"true", T_TRUE}, {"false", T_FALSE}};
      for (int i = 0; i < UT_ARRAY_LEN(kw); i++)
        if ((int)strlen(kw[i].w) == t->len && strncmp(t->s, kw[i].w, (size_t)t->len) == 0) t->k = kw[i].k;
      if (t->k == T_NAME && (t->len == 3 && (strncmp(t->s, "inf", 3) == 0 || strncmp(t->s, "nan", 3) == 0))) {
        t->k = T_FLOAT;
        t->num = t->s[0] == 'i' ? INFINITY : NAN;
      } else if (t->k == T_NAME && fe_is_reserved(t->s, t->len)) {
        t->k = T_RESERVED;
      }
      continue;
    }
    if (is_digit(c) || (c == '.' && L.p + 1 < L.end && is_digit(L.p[1]))) {
      lex_number(&L, t);
      t->len = (int)(L.p - t->s);
      continue;
    }
    t->k = punct(&L);
    if (t->k == T_ERROR) {
      unsigned char uc = (unsigned char)c;
      if (uc >= 32 && uc < 127)
        fe_diag(dc, HARP_E_PARSE, t->line, t->col, "unexpected character '%c'", c);
      else
        fe_diag(dc, HARP_E_PARSE, t->line, t->col, "unexpected byte 0x%02x", uc);
      L.p++;
      /* skip the rest of a UTF-8 sequence so one character is one error */
      while (L.p < L.end && ((unsigned char)*L.p & 0xC0) == 0x80) L.p++;
    }
    t->len = (int)(L.p - t->s);
    if (t->k == T_LPAREN || t->k == T_LBRACK) L.depth++;
    if ((t->k == T_RPAREN || t->k == T_RBRACK) && L.depth > 0) L.depth--;
  }
  *ntok = n;
  return toks;
}
