/* plan_dsl.c — parse the plan DSL of seed 000 §12.6 plus harp's extension
 * statements (docs/plan.md) into a plan_t.
 * Needs: plan_core.c (names, plan_finish, plan_check).  Gives: plan_parse_dsl.
 *
 *   program := stmt ((';' | newline) stmt)*      empty statements allowed
 *   stmt    := split | reorder | fuse | bind | pipeline | cache_read
 *            | vectorize | unroll | predicate_tail | epilogue | algo_choice
 *            | warp_tile | arch | layout_hint | local_edge      (extensions)
 *   '#' starts a comment that runs to the end of the line.
 *
 * Statements may come in any order: the plan is resolved once all are read
 * (first-level splits give `tile` in statement order; a split of m.i / n.i
 * is the warp tile), so every error still points at its statement. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan_int.h"
#include "util/util.h"

typedef enum tkind { TK_WORD, TK_EQ, TK_ARROW, TK_SEP, TK_EOF } tkind;

typedef struct tok {
  tkind k;
  const char *s; /* start in the text */
  int len;
  plan_pos pos;
} tok;

#define MAX_RAW_SPLITS 16

typedef struct raw_split {
  char axis[PLAN_NAME_MAX];
  int64_t factor;
  plan_pos pos, fpos; /* axis token, factor token */
} raw_split;

typedef struct dsl {
  const char *text;
  const char *cur; /* lexer cursor */
  int line, col;
  tok t; /* current token */
  plan_src src;
  harp_error *e;
  plan_t *p;
  plan_seen seen;
  int nraw;
  raw_split raw[MAX_RAW_SPLITS];
  bool warp_stmt, have_reorder, have_pipeline, have_vec, have_epi;
  plan_pos warp_pos;
} dsl;

/* ---- lexer ------------------------------------------------------------------------ */
static bool wordc(char c) { return isalnum((unsigned char)c) || c == '_' || c == '.'; }

static void adv(dsl *d) {
  if (*d->cur == '\n') {
    d->line++;
    d->col = 1;
  } else {
    d->col++;
  }
  d->cur++;
}

static harp_status fail(dsl *d, harp_status code, plan_pos pos, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static harp_status fail(dsl *d, harp_status code, plan_pos pos, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return plan_fail(d->e, code, &d->src, pos, NULL, "%s", msg);
}

static harp_status next(dsl *d) {
  for (;;) {
    char c = *d->cur;
    if (c == ' ' || c == '\t' || c == '\r') {
      adv(d);
    } else if (c == '#') {
      while (*d->cur && *d->cur != '\n') adv(d);
    } else {
      break;
    }
  }
  tok *t = &d->t;
  t->s = d->cur;
  t->pos = (plan_pos){d->line, d->col};
  char c = *d->cur;
  if (c == 0) {
    t->k = TK_EOF;
    t->len = 0;
    return HARP_OK;
  }
  if (c == ';' || c == '\n') {
    t->k = TK_SEP;
    t->len = 1;
    adv(d);
    return HARP_OK;
  }
  if (c == '=') {
    t->k = TK_EQ;
    t->len = 1;
    adv(d);
    return HARP_OK;
  }
  if (c == '-' && d->cur[1] == '>') {
    t->k = TK_ARROW;
    t->len = 2;
    adv(d);
    adv(d);
    return HARP_OK;
  }
  if (wordc(c)) {
    t->k = TK_WORD;
    while (wordc(*d->cur)) adv(d);
    t->len = (int)(d->cur - t->s);
    return HARP_OK;
  }
  if ((unsigned char)c < 32 || (unsigned char)c >= 127)
    return fail(d, HARP_E_PARSE, t->pos, "unexpected byte 0x%02x", (unsigned char)c);
  return fail(d, HARP_E_PARSE, t->pos, "unexpected character '%c'", c);
}

/* ---- token helpers ---------------------------------------------------------------- */
static bool is_word(const dsl *d, const char *w) {
  return d->t.k == TK_WORD && (size_t)d->t.len == strlen(w) && memcmp(d->t.s, w, (size_t)d->t.len) == 0;
}
static bool at_end(const dsl *d) { return d->t.k == TK_SEP || d->t.k == TK_EOF; }

static const char *describe(const dsl *d, char *buf, size_t cap) {
  switch (d->t.k) {
  case TK_EOF: return "the end of the text";
  case TK_SEP: return *d->t.s == ';' ? "';'" : "the end of the line";
  case TK_EQ: return "'='";
  case TK_ARROW: return "'->'";
  default: snprintf(buf, cap, "'%.*s'", d->t.len > 40 ? 40 : d->t.len, d->t.s); return buf;
  }
}

static harp_status expected(dsl *d, const char *what) {
  char b[64];
  return fail(d, HARP_E_PARSE, d->t.pos, "expected %s, found %s", what, describe(d, b, sizeof b));
}

/* Copy the current word into out (PLAN_NAME_MAX) and advance. */
static harp_status take_word(dsl *d, const char *what, char *out) {
  if (d->t.k != TK_WORD) return expected(d, what);
  if (d->t.len >= PLAN_NAME_MAX)
    return fail(d, HARP_E_LIMIT, d->t.pos, "%s is longer than %d characters", what, PLAN_NAME_MAX - 1);
  memcpy(out, d->t.s, (size_t)d->t.len);
  out[d->t.len] = 0;
  return next(d);
}

static harp_status take_axis(dsl *d, char *out, plan_pos *pos) {
  if (pos) *pos = d->t.pos;
  plan_pos at = d->t.pos;
  harp_status st = take_word(d, "an axis", out);
  if (st) return st;
  if (!plan_axis_name_ok(out)) return fail(d, HARP_E_PARSE, at, "'%s' is not an axis name", out);
  return HARP_OK;
}

static harp_status take_int(dsl *d, const char *what, int64_t lo, int64_t hi, int64_t *out, plan_pos *pos) {
  if (pos) *pos = d->t.pos;
  if (d->t.k != TK_WORD) return expected(d, what);
  int64_t v = 0;
  for (int i = 0; i < d->t.len; i++) {
    if (!isdigit((unsigned char)d->t.s[i])) return expected(d, what);
    if (v > 100000000) return fail(d, HARP_E_INVALID_ARG, d->t.pos, "%s is too large", what);
    v = v * 10 + (d->t.s[i] - '0');
  }
  if (v < lo || v > hi)
    return fail(d, HARP_E_INVALID_ARG, d->t.pos, "%s is %lld; it must be in [%lld, %lld]", what, (long long)v,
                (long long)lo, (long long)hi);
  *out = v;
  return next(d);
}

/* key '=' : the key word, then '=' (the value is read by the caller). */
static harp_status take_key_eq(dsl *d, const char *key) {
  if (!is_word(d, key)) {
    char w[64];
    snprintf(w, sizeof w, "'%s='", key);
    return expected(d, w);
  }
  harp_status st = next(d);
  if (st) return st;
  if (d->t.k != TK_EQ) {
    char w[64];
    snprintf(w, sizeof w, "'=' after '%s'", key);
    return expected(d, w);
  }
  return next(d);
}

static harp_status take_bool(dsl *d, bool *out) {
  if (is_word(d, "true"))
    *out = true;
  else if (is_word(d, "false"))
    *out = false;
  else
    return expected(d, "true or false");
  return next(d);
}

static harp_status too_many(dsl *d, plan_pos pos, const char *what, int cap) {
  return fail(d, HARP_E_LIMIT, pos, "more than %d %s", cap, what);
}

/* ---- statements --------------------------------------------------------------------- */
/* split := 'split' axis int */
static harp_status st_split(dsl *d) {
  if (d->nraw >= MAX_RAW_SPLITS) return too_many(d, d->t.pos, "split statements", MAX_RAW_SPLITS);
  raw_split *r = &d->raw[d->nraw];
  harp_status st = take_axis(d, r->axis, &r->pos);
  if (!st) st = take_int(d, "a split factor", 1, PLAN_MAX_FACTOR, &r->factor, &r->fpos);
  if (!st) d->nraw++;
  return st;
}

/* reorder := 'reorder' axis+ */
static harp_status st_reorder(dsl *d, plan_pos kw) {
  plan_t *p = d->p;
  if (d->have_reorder) return fail(d, HARP_E_INVALID_ARG, kw, "reorder is given twice");
  d->have_reorder = true;
  if (at_end(d)) return expected(d, "an axis");
  while (!at_end(d)) {
    if (p->nreorder >= PLAN_MAX_AXLIST) return too_many(d, d->t.pos, "axes in reorder", PLAN_MAX_AXLIST);
    harp_status st = take_axis(d, p->reorder[p->nreorder], &p->pos.reorder[p->nreorder]);
    if (st) return st;
    p->nreorder++;
  }
  return HARP_OK;
}

/* fuse := 'fuse' axis axis '->' axis */
static harp_status st_fuse(dsl *d, plan_pos kw) {
  plan_t *p = d->p;
  if (p->nfuse >= PLAN_MAX_FUSE) return too_many(d, kw, "fuse statements", PLAN_MAX_FUSE);
  plan_fuse *f = &p->fuse[p->nfuse];
  p->pos.fuse[p->nfuse] = d->t.pos;
  harp_status st = take_axis(d, f->a, NULL);
  if (!st) st = take_axis(d, f->b, NULL);
  if (st) return st;
  if (d->t.k != TK_ARROW) return expected(d, "'->'");
  if ((st = next(d))) return st;
  plan_pos at = d->t.pos;
  if ((st = take_axis(d, f->to, NULL))) return st;
  p->pos.fuse[p->nfuse] = at;
  p->nfuse++;
  return HARP_OK;
}

/* bind := 'bind' axis target */
static harp_status st_bind(dsl *d, plan_pos kw) {
  plan_t *p = d->p;
  if (p->nbind >= PLAN_MAX_BIND) return too_many(d, kw, "bind statements", PLAN_MAX_BIND);
  plan_bind *b = &p->bind[p->nbind];
  plan_pos axis_pos;
  harp_status st = take_axis(d, b->axis, &axis_pos);
  if (st) return st;
  plan_pos at = d->t.pos;
  char w[PLAN_NAME_MAX];
  if (d->t.k != TK_WORD) return expected(d, "a target (block.x|y|z, warp.x|y|z)");
  if ((st = take_word(d, "a target", w))) return st;
  int t = plan_target_parse(w);
  if (t < 0) return fail(d, HARP_E_PARSE, at, "unknown bind target '%s' (block.x|y|z, warp.x|y|z)", w);
  b->target = (plan_target)t;
  p->pos.bind[p->nbind++] = axis_pos;
  return HARP_OK;
}

/* pipeline := 'pipeline' axis 'stages=' int */
static harp_status st_pipeline(dsl *d, plan_pos kw) {
  plan_t *p = d->p;
  if (d->have_pipeline) return fail(d, HARP_E_INVALID_ARG, kw, "pipeline is given twice");
  d->have_pipeline = d->seen.pipeline = d->seen.stages = true;
  harp_status st = take_axis(d, p->pipeline_axis, &p->pos.pipeline);
  if (!st) st = take_key_eq(d, "stages");
  int64_t v;
  if (!st) st = take_int(d, "stages", 2, 3, &v, &p->pos.stages);
  if (!st) p->stages = (int)v;
  return st;
}

/* cache_read := 'cache_read' tensor 'smem' 'at=' axis ('pingpong=' bool)? */
static harp_status st_cache(dsl *d, plan_pos kw) {
  plan_t *p = d->p;
  if (p->ncache >= PLAN_MAX_CACHE) return too_many(d, kw, "cache_read statements", PLAN_MAX_CACHE);
  plan_cache *c = &p->cache[p->ncache];
  p->pos.cache[p->ncache] = d->t.pos;
  plan_pos at = d->t.pos;
  harp_status st = take_word(d, "a tensor", c->tensor);
  if (st) return st;
  if (!plan_ident_ok(c->tensor)) return fail(d, HARP_E_PARSE, at, "'%s' is not a tensor name", c->tensor);
  if (!is_word(d, "smem")) return expected(d, "'smem'");
  if ((st = next(d)) || (st = take_key_eq(d, "at")) || (st = take_axis(d, c->at, NULL))) return st;
  c->pingpong = false;
  if (!at_end(d)) {
    if ((st = take_key_eq(d, "pingpong")) || (st = take_bool(d, &c->pingpong))) return st;
  }
  p->ncache++;
  return HARP_OK;
}

/* vectorize := 'vectorize' axis int */
static harp_status st_vectorize(dsl *d, plan_pos kw) {
  plan_t *p = d->p;
  if (d->have_vec) return fail(d, HARP_E_INVALID_ARG, kw, "vectorize is given twice");
  d->have_vec = true;
  int64_t w;
  harp_status st = take_axis(d, p->vec_axis, &p->pos.vec);
  if (!st) st = take_int(d, "a vector width", 1, 16, &w, &p->pos.vec_width);
  if (st) return st;
  if (w != 1 && w != 2 && w != 4 && w != 8 && w != 16)
    return fail(d, HARP_E_INVALID_ARG, p->pos.vec_width, "vector width %lld is not 1, 2, 4, 8 or 16", (long long)w);
  p->vec_width = (int)w;
  return HARP_OK;
}

/* unroll := 'unroll' axis int */
static harp_status st_unroll(dsl *d, plan_pos kw) {
  plan_t *p = d->p;
  if (p->nunroll >= PLAN_MAX_UNROLL) return too_many(d, kw, "unroll statements", PLAN_MAX_UNROLL);
  plan_unroll *u = &p->unroll[p->nunroll];
  int64_t f;
  harp_status st = take_axis(d, u->axis, &p->pos.unroll[p->nunroll]);
  if (!st) st = take_int(d, "an unroll factor", 1, 64, &f, NULL);
  if (st) return st;
  u->factor = (int)f;
  p->nunroll++;
  return HARP_OK;
}

/* predicate_tail := 'predicate_tail' axis+ */
static harp_status st_pred(dsl *d) {
  plan_t *p = d->p;
  if (at_end(d)) return expected(d, "an axis");
  while (!at_end(d)) {
    if (p->npred >= PLAN_MAX_AXLIST) return too_many(d, d->t.pos, "predicate_tail axes", PLAN_MAX_AXLIST);
    harp_status st = take_axis(d, p->pred[p->npred], &p->pos.pred[p->npred]);
    if (st) return st;
    p->npred++;
  }
  return HARP_OK;
}

/* epilogue := 'epilogue' op+ */
static harp_status st_epilogue(dsl *d, plan_pos kw) {
  plan_t *p = d->p;
  if (d->have_epi) return fail(d, HARP_E_INVALID_ARG, kw, "epilogue is given twice");
  d->have_epi = true;
  p->pos.epilogue = kw;
  if (at_end(d)) return expected(d, "an epilogue op (bias, relu, silu, gelu, residual)");
  while (!at_end(d)) {
    plan_pos at = d->t.pos;
    char w[PLAN_NAME_MAX];
    harp_status st = take_word(d, "an epilogue op", w);
    if (st) return st;
    int op = plan_epi_parse(w);
    if (op < 0) return fail(d, HARP_E_PARSE, at, "unknown epilogue op '%s' (bias, relu, silu, gelu, residual)", w);
    if (p->nepi >= PLAN_MAX_EPI) return too_many(d, at, "epilogue ops", PLAN_MAX_EPI);
    p->epi[p->nepi++] = (plan_epi)op;
  }
  return HARP_OK;
}

/* algo_choice := 'algo_choice' key value */
static harp_status st_algo(dsl *d) {
  plan_t *p = d->p;
  plan_pos at = d->t.pos;
  char w[PLAN_NAME_MAX];
  harp_status st = take_word(d, "a pattern (matmul, conv, attention)", w);
  if (st) return st;
  int k = plan_algo_key_parse(w);
  if (k < 0) return fail(d, HARP_E_PARSE, at, "unknown algo_choice key '%s' (matmul, conv, attention)", w);
  if (p->algo[k] != PLAN_ALGO_NONE) return fail(d, HARP_E_INVALID_ARG, at, "algo_choice %s is given twice", w);
  at = d->t.pos;
  if ((st = take_word(d, "an algorithm", w))) return st;
  for (const char *c = w; *c; c++)
    if (!(islower((unsigned char)*c) || isdigit((unsigned char)*c) || *c == '_'))
      return fail(d, HARP_E_PARSE, at, "'%s' is not an algorithm name ([a-z0-9_]+)", w);
  int a = plan_algo_parse(w);
  if (a < 0 && plan_algo_absent(w)) return fail(d, HARP_E_UNSUPPORTED, at, "%s", plan_algo_absent(w));
  if (a < 0 || !plan_algo_fits((plan_algo)a, (plan_algo_key)k))
    return fail(d, HARP_E_INVALID_ARG, at, "'%s' is not an algorithm for %s", w, plan_algo_key_name((plan_algo_key)k));
  p->algo[k] = (plan_algo)a;
  p->pos.algo[k] = at;
  return HARP_OK;
}

/* splitk := 'splitk' int        (extension: K slices of a splitk_* plan) */
static harp_status st_splitk(dsl *d, plan_pos kw) {
  plan_t *p = d->p;
  if (p->splitk) return fail(d, HARP_E_INVALID_ARG, kw, "splitk is given twice");
  int64_t v;
  harp_status st = take_int(d, "the split-K slice count", 1, PLAN_MAX_SPLITK, &v, &p->pos.splitk);
  if (!st) p->splitk = (int)v;
  return st;
}

/* warp_tile := 'warp_tile' int 'x' int        (extension) */
static harp_status st_warp(dsl *d, plan_pos kw) {
  plan_t *p = d->p;
  if (d->warp_stmt) return fail(d, HARP_E_INVALID_ARG, kw, "warp_tile is given twice");
  d->warp_stmt = true;
  d->warp_pos = d->t.pos;
  long long m = 0, n = 0;
  int used = 0;
  char w[PLAN_NAME_MAX];
  if (d->t.k != TK_WORD || d->t.len >= PLAN_NAME_MAX) return expected(d, "a warp tile such as 64x64");
  memcpy(w, d->t.s, (size_t)d->t.len);
  w[d->t.len] = 0;
  if (sscanf(w, "%4lldx%4lld%n", &m, &n, &used) != 2 || used != d->t.len || !isdigit((unsigned char)w[0]) ||
      !isdigit((unsigned char)w[strcspn(w, "x") + 1]))
    return expected(d, "a warp tile such as 64x64");
  if (m < 1 || n < 1) return fail(d, HARP_E_INVALID_ARG, d->t.pos, "warp tile dimensions must be positive");
  p->warp_m = (int)m;
  p->warp_n = (int)n;
  p->pos.warp_tile = d->t.pos;
  return next(d);
}

/* arch := 'arch' ('sm80' | 'sm90' | 'cpu')        (extension) */
static harp_status st_arch(dsl *d, plan_pos kw) {
  plan_t *p = d->p;
  if (d->seen.arch) return fail(d, HARP_E_INVALID_ARG, kw, "arch is given twice");
  plan_pos at = d->t.pos;
  char w[PLAN_NAME_MAX];
  harp_status st = take_word(d, "an arch (sm80, sm90, cpu)", w);
  if (st) return st;
  int a = plan_arch_parse(w);
  if (a < 0) return fail(d, HARP_E_PARSE, at, "unknown arch '%s' (sm80, sm90, cpu)", w);
  p->arch = (plan_arch)a;
  p->pos.arch = at;
  d->seen.arch = true;
  return HARP_OK;
}

/* layout_hint := 'layout_hint' ('A_swizzle'|'B_swizzle') '=' bool
 *              | 'layout_hint' 'C_stride' '=' ('row'|'col')      (extension) */
static harp_status st_layout(dsl *d) {
  plan_t *p = d->p;
  p->pos.layout = d->t.pos;
  harp_status st;
  if (is_word(d, "A_swizzle") || is_word(d, "B_swizzle")) {
    bool a = d->t.s[0] == 'A';
    bool *seen = a ? &d->seen.a_swizzle : &d->seen.b_swizzle;
    if (*seen) return fail(d, HARP_E_INVALID_ARG, d->t.pos, "layout_hint %c_swizzle is given twice", a ? 'A' : 'B');
    *seen = true;
    if ((st = take_key_eq(d, a ? "A_swizzle" : "B_swizzle"))) return st;
    return take_bool(d, a ? &p->a_swizzle : &p->b_swizzle);
  }
  if (is_word(d, "C_stride")) {
    if (d->seen.c_stride) return fail(d, HARP_E_INVALID_ARG, d->t.pos, "layout_hint C_stride is given twice");
    d->seen.c_stride = true;
    if ((st = take_key_eq(d, "C_stride"))) return st;
    if (is_word(d, "row"))
      p->c_col = false;
    else if (is_word(d, "col"))
      p->c_col = true;
    else
      return expected(d, "row or col");
    return next(d);
  }
  return expected(d, "A_swizzle, B_swizzle or C_stride");
}

/* local_edge := 'local_edge' name '->' name buffer ('depth=' int)?   (extension) */
static harp_status st_edge(dsl *d, plan_pos kw) {
  plan_t *p = d->p;
  if (p->nedges >= PLAN_MAX_EDGES) return too_many(d, kw, "local edges", PLAN_MAX_EDGES);
  plan_edge *g = &p->edges[p->nedges];
  p->pos.edges[p->nedges] = d->t.pos;
  plan_pos at = d->t.pos;
  harp_status st = take_word(d, "a node name", g->from);
  if (st) return st;
  if (!plan_ident_ok(g->from)) return fail(d, HARP_E_PARSE, at, "'%s' is not a node name", g->from);
  if (d->t.k != TK_ARROW) return expected(d, "'->'");
  if ((st = next(d))) return st;
  at = d->t.pos;
  if ((st = take_word(d, "a node name", g->to))) return st;
  if (!plan_ident_ok(g->to)) return fail(d, HARP_E_PARSE, at, "'%s' is not a node name", g->to);
  at = d->t.pos;
  char w[PLAN_NAME_MAX];
  if ((st = take_word(d, "a buffer (reg, smem_ring, gmem)", w))) return st;
  int b = plan_buffer_parse(w);
  if (b < 0) return fail(d, HARP_E_PARSE, at, "unknown buffer '%s' (reg, smem_ring, gmem)", w);
  g->buffer = (plan_buffer)b;
  g->depth = 0;
  if (!at_end(d)) {
    int64_t v;
    plan_pos vp;
    if ((st = take_key_eq(d, "depth")) || (st = take_int(d, "depth", 2, 3, &v, &vp))) return st;
    if (g->buffer != PLAN_BUF_SMEM_RING) return fail(d, HARP_E_INVALID_ARG, vp, "only a smem_ring has a depth");
    g->depth = (int)v;
  }
  p->nedges++;
  return HARP_OK;
}

typedef enum stmt_kind {
  S_SPLIT, S_REORDER, S_FUSE, S_BIND, S_PIPELINE, S_CACHE, S_VECTORIZE, S_UNROLL, S_PRED, S_EPILOGUE,
  S_ALGO, S_WARP, S_ARCH, S_LAYOUT, S_EDGE, S_SPLITK, S_COUNT
} stmt_kind;
static const char *const stmt_names[S_COUNT] = {
    "split",     "reorder",        "fuse",     "bind",        "pipeline",  "cache_read", "vectorize",  "unroll",
    "predicate_tail", "epilogue", "algo_choice", "warp_tile", "arch", "layout_hint", "local_edge", "splitk"};

static harp_status statement(dsl *d) {
  plan_pos kw = d->t.pos;
  if (d->t.k != TK_WORD) return expected(d, "a statement");
  int k = 0;
  while (k < S_COUNT && !is_word(d, stmt_names[k])) k++;
  if (k == S_COUNT) {
    char b[64];
    return fail(d, HARP_E_PARSE, kw, "unknown statement %s", describe(d, b, sizeof b));
  }
  harp_status st = next(d);
  if (st) return st;
  switch ((stmt_kind)k) {
  case S_SPLIT: st = st_split(d); break;
  case S_REORDER: st = st_reorder(d, kw); break;
  case S_FUSE: st = st_fuse(d, kw); break;
  case S_BIND: st = st_bind(d, kw); break;
  case S_PIPELINE: st = st_pipeline(d, kw); break;
  case S_CACHE: st = st_cache(d, kw); break;
  case S_VECTORIZE: st = st_vectorize(d, kw); break;
  case S_UNROLL: st = st_unroll(d, kw); break;
  case S_PRED: st = st_pred(d); break;
  case S_EPILOGUE: st = st_epilogue(d, kw); break;
  case S_ALGO: st = st_algo(d); break;
  case S_WARP: st = st_warp(d, kw); break;
  case S_ARCH: st = st_arch(d, kw); break;
  case S_LAYOUT: st = st_layout(d); break;
  case S_EDGE: st = st_edge(d, kw); break;
  case S_SPLITK: st = st_splitk(d, kw); break;
  default: st = ut_fail(d->e, HARP_E_INTERNAL, NULL, "statement table out of sync"); break;
  }
  if (st) return st;
  if (!at_end(d)) {
    char b[64];
    return fail(d, HARP_E_PARSE, d->t.pos, "unexpected %s at the end of the statement; expected ';'",
                describe(d, b, sizeof b));
  }
  return HARP_OK;
}

/* ---- resolution ---------------------------------------------------------------------- */
/* First-level splits are the tile (statement order); splits of the first two
 * tile axes' .i are the warp tile; the rest are extra splits. */
static harp_status resolve_splits(dsl *d) {
  plan_t *p = d->p;
  for (int i = 0; i < d->nraw; i++) {
    raw_split *r = &d->raw[i];
    if (strchr(r->axis, '.')) continue;
    for (int t = 0; t < p->ntile; t++)
      if (strcmp(p->tile_axes[t], r->axis) == 0)
        return fail(d, HARP_E_INVALID_ARG, r->pos, "axis '%s' is already split", r->axis);
    if (p->ntile >= PLAN_MAX_TILE)
      return fail(d, HARP_E_LIMIT, r->pos, "at most 3 axes can be tiled (tile = [BM, BN, BK]); '%s' is a fourth",
                  r->axis);
    memcpy(p->tile_axes[p->ntile], r->axis, PLAN_NAME_MAX);
    p->tile[p->ntile] = r->factor;
    p->pos.tile[p->ntile++] = r->pos;
  }
  for (int i = 0; i < d->nraw; i++) {
    raw_split *r = &d->raw[i];
    if (!strchr(r->axis, '.')) continue;
    int wdim = -1;
    for (int t = 0; t < p->ntile && t < 2; t++) {
      char wi[PLAN_NAME_MAX];
      snprintf(wi, sizeof wi, "%.*s.i", PLAN_NAME_MAX - 3, p->tile_axes[t]);
      if (strcmp(wi, r->axis) == 0) wdim = t;
    }
    if (wdim >= 0) {
      int *slot = wdim == 0 ? &p->warp_m : &p->warp_n;
      if (d->warp_stmt || *slot)
        return fail(d, HARP_E_INVALID_ARG, r->pos, "the warp tile of '%s' is given twice (warp_tile and split %s)",
                    p->tile_axes[wdim], r->axis);
      *slot = (int)r->factor;
      p->pos.warp_tile = r->fpos;
      continue;
    }
    if (p->nsplits >= PLAN_MAX_SPLITS) return too_many(d, r->pos, "extra splits", PLAN_MAX_SPLITS);
    memcpy(p->splits[p->nsplits].axis, r->axis, PLAN_NAME_MAX);
    p->splits[p->nsplits].factor = r->factor;
    p->pos.splits[p->nsplits++] = r->pos;
  }
  if (p->ntile == 0) {
    plan_pos end = {d->line, d->col};
    return fail(d, HARP_E_INVALID_ARG, d->nraw ? d->raw[0].pos : end,
                "a plan needs at least one first-level split (split m 128 gives tile[0] = 128)");
  }
  if (d->warp_stmt && p->ntile < 2) {
    if (p->warp_n != 0 && p->warp_n != 1)
      return fail(d, HARP_E_INVALID_ARG, d->warp_pos, "warp_tile %dx%d needs two tiled axes", p->warp_m, p->warp_n);
    p->warp_n = 0;
  }
  return HARP_OK;
}

harp_status plan_parse_dsl(const char *text, const char *file, plan_arch default_arch, plan_t *out, harp_error *e) {
  if (!text) return ut_fail(e, HARP_E_INTERNAL, NULL, "plan_parse_dsl: no text");
  if (strlen(text) > PLAN_MAX_TEXT)
    return plan_fail(e, HARP_E_LIMIT, &(plan_src){file, NULL}, (plan_pos){0, 0}, NULL, "plan larger than 1 MiB");
  dsl *d = ut_xcalloc(1, sizeof *d);
  if (!d) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  d->text = d->cur = text;
  d->line = d->col = 1;
  d->src = (plan_src){file, text};
  d->e = e;
  d->p = out;
  plan_init(out, default_arch);
  harp_status st = next(d);
  while (!st && d->t.k != TK_EOF) {
    if (d->t.k == TK_SEP) {
      st = next(d);
      continue;
    }
    st = statement(d);
  }
  if (!st) st = resolve_splits(d);
  if (!st) {
    plan_finish(out, &d->seen, default_arch);
    st = plan_check(out, &d->src, e);
  }
  free(d);
  return st;
}
