/* plan_json.c — read the plan JSON of seed 000 §12.5 (plus the extension
 * keys of docs/plan.md) into a plan_t.
 * Needs: jansson, plan_core.c.  Gives: plan_parse_json, plan_parse,
 * plan_load_file, plan_text_is_json.
 *
 * jansson keeps no positions for values, so errors about a value are located
 * by walking the (already valid) text along the value's path: "cache/1/at"
 * is the "at" member of the second cache entry. */
#include <ctype.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan_int.h"
#include "util/json_kind.h"
#include "util/util.h"

/* ---- locating a path in JSON text ----------------------------------------------- */
typedef struct jloc {
  const char *t;
  size_t i;
  int line, col;
} jloc;

static void jl_adv(jloc *s) {
  if (!s->t[s->i]) return;
  if (s->t[s->i] == '\n') {
    s->line++;
    s->col = 1;
  } else {
    s->col++;
  }
  s->i++;
}
static char jl_c(const jloc *s) { return s->t[s->i]; }
static void jl_ws(jloc *s) {
  while (jl_c(s) == ' ' || jl_c(s) == '\t' || jl_c(s) == '\n' || jl_c(s) == '\r') jl_adv(s);
}
/* At '"': read the string (escapes kept raw) into buf, stop after the quote. */
static void jl_string(jloc *s, char *buf, size_t cap) {
  size_t n = 0;
  jl_adv(s);
  while (jl_c(s) && jl_c(s) != '"') {
    if (jl_c(s) == '\\') {
      if (n + 1 < cap) buf[n++] = '\\';
      jl_adv(s);
    }
    if (n + 1 < cap) buf[n++] = jl_c(s);
    jl_adv(s);
  }
  jl_adv(s);
  if (cap) buf[n] = 0;
}
static void jl_skip(jloc *s, int depth) {
  jl_ws(s);
  char c = jl_c(s);
  if (c == '"') {
    jl_string(s, NULL, 0);
  } else if (c == '{' || c == '[') {
    char close = c == '{' ? '}' : ']';
    jl_adv(s);
    for (;;) {
      jl_ws(s);
      if (!jl_c(s) || jl_c(s) == close) break;
      if (depth > 64) { /* jansson caps nesting too; stay bounded anyway */
        jl_adv(s);
        continue;
      }
      jl_skip(s, depth + 1); /* a value, or a key */
      jl_ws(s);
      if (jl_c(s) == ':' || jl_c(s) == ',') jl_adv(s);
    }
    jl_adv(s);
  } else {
    while (jl_c(s) && !strchr(",]} \t\r\n", jl_c(s))) jl_adv(s);
  }
}

/* Position of the value at path ('/'-separated keys and indices) or, with
 * want_key, of its key.  Falls back to the innermost container found. */
static plan_pos json_locate(const char *text, const char *path, bool want_key) {
  jloc s = {text, 0, 1, 1};
  jl_ws(&s);
  plan_pos best = {s.line, s.col};
  while (*path) {
    const char *slash = strchr(path, '/');
    size_t n = slash ? (size_t)(slash - path) : strlen(path);
    char elem[PLAN_NAME_MAX * 2];
    snprintf(elem, sizeof elem, "%.*s", (int)(n < sizeof elem ? n : sizeof elem - 1), path);
    path += n + (slash ? 1 : 0);
    bool last = !*path;
    jl_ws(&s);
    best = (plan_pos){s.line, s.col};
    if (jl_c(&s) == '{') {
      jl_adv(&s);
      bool found = false;
      for (;;) {
        jl_ws(&s);
        if (jl_c(&s) != '"') break;
        plan_pos kp = {s.line, s.col};
        char key[PLAN_NAME_MAX * 2];
        jl_string(&s, key, sizeof key);
        jl_ws(&s);
        if (jl_c(&s) == ':') jl_adv(&s);
        jl_ws(&s);
        if (strcmp(key, elem) == 0) {
          if (last && want_key) return kp;
          found = true;
          break;
        }
        jl_skip(&s, 0);
        jl_ws(&s);
        if (jl_c(&s) == ',') jl_adv(&s);
      }
      if (!found) return best;
    } else if (jl_c(&s) == '[') {
      long idx = strtol(elem, NULL, 10);
      jl_adv(&s);
      for (long k = 0; k < idx; k++) {
        jl_ws(&s);
        if (jl_c(&s) == ']' || !jl_c(&s)) return best;
        jl_skip(&s, 0);
        jl_ws(&s);
        if (jl_c(&s) == ',') jl_adv(&s);
      }
      jl_ws(&s);
      if (jl_c(&s) == ']' || !jl_c(&s)) return best;
    } else {
      return best;
    }
  }
  jl_ws(&s);
  return (plan_pos){s.line, s.col};
}

/* Byte span [*start, *end) of the value at path; false when the path is not
 * there.  (For plan lists: a nested plan is parsed in place.) */
bool plan_json_value_span(const char *text, const char *path, size_t *start, size_t *end) {
  plan_pos want = json_locate(text, path, false);
  jloc s = {text, 0, 1, 1};
  while (jl_c(&s) && (s.line < want.line || (s.line == want.line && s.col < want.col))) jl_adv(&s);
  if (!jl_c(&s)) return false;
  *start = s.i;
  jl_skip(&s, 0);
  *end = s.i;
  return *end > *start;
}

/* ---- reading ------------------------------------------------------------------------ */
typedef struct jctx {
  const char *text;
  plan_src src;
  harp_error *e;
  plan_t *p;
  plan_seen seen;
} jctx;

static plan_pos at(jctx *c, const char *path) { return json_locate(c->text, path, false); }

static harp_status jfail(jctx *c, harp_status code, const char *path, bool key, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static harp_status jfail(jctx *c, harp_status code, const char *path, bool key, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return plan_fail(c->e, code, &c->src, json_locate(c->text, path, key), path, "%s", msg);
}

static harp_status want(jctx *c, const json_t *v, json_type t, const char *path, const char *what) {
  bool ok = t == JSON_TRUE ? json_is_boolean(v) : json_typeof(v) == t;
  if (ok) return HARP_OK;
  return jfail(c, HARP_E_PARSE, path, false, "\"%s\" must be %s, got %s", path, what, ut_json_kind(v));
}

static harp_status get_int(jctx *c, const json_t *v, const char *path, int64_t lo, int64_t hi, int64_t *out) {
  harp_status st = want(c, v, JSON_INTEGER, path, "an integer");
  if (st) return st;
  json_int_t x = json_integer_value(v);
  if (x < lo || x > hi)
    return jfail(c, HARP_E_INVALID_ARG, path, false, "\"%s\" is %lld; it must be in [%lld, %lld]", path, (long long)x,
                 (long long)lo, (long long)hi);
  *out = x;
  return HARP_OK;
}

/* A string naming an axis (axis = true) or a tensor / node, copied to out. */
static harp_status get_name(jctx *c, const json_t *v, const char *path, bool axis, char *out) {
  harp_status st = want(c, v, JSON_STRING, path, "a string");
  if (st) return st;
  const char *s = json_string_value(v);
  if (axis ? !plan_axis_name_ok(s) : !plan_ident_ok(s))
    return jfail(c, HARP_E_PARSE, path, false, "\"%s\": '%.80s' is not %s name", path, s, axis ? "an axis" : "a tensor or node");
  return plan_copy_name(out, s) ? HARP_OK : jfail(c, HARP_E_LIMIT, path, false, "\"%s\": name too long", path);
}

/* Members of an object must come from `keys` (NULL-terminated). */
static harp_status only_keys(jctx *c, json_t *o, const char *path, const char *const *keys) {
  const char *k;
  json_t *v;
  json_object_foreach(o, k, v) {
    bool ok = false;
    for (int i = 0; keys[i] && !ok; i++) ok = strcmp(keys[i], k) == 0;
    if (!ok) {
      char p2[256];
      snprintf(p2, sizeof p2, "%s%s%.80s", path, *path ? "/" : "", k);
      return jfail(c, HARP_E_PARSE, p2, true, "unknown key \"%.80s\" in %s", k, *path ? path : "the plan");
    }
  }
  return HARP_OK;
}

static harp_status need(jctx *c, json_t *o, const char *path, const char *key, json_t **out) {
  *out = json_object_get(o, key);
  if (*out) return HARP_OK;
  return jfail(c, HARP_E_PARSE, path, false, "%s needs \"%s\"", path, key);
}

static harp_status rd_tile(jctx *c, json_t *tile, json_t *axes) {
  plan_t *p = c->p;
  harp_status st = want(c, tile, JSON_ARRAY, "tile", "an array [BM, BN, BK]");
  if (st) return st;
  size_t n = json_array_size(tile);
  if (n < 1 || n > PLAN_MAX_TILE)
    return jfail(c, HARP_E_INVALID_ARG, "tile", false, "\"tile\" has %zu entries; a plan tiles 1 to 3 axes", n);
  static const char *const dflt[] = {"m", "n", "k"};
  for (size_t i = 0; i < n; i++) {
    char path[32];
    snprintf(path, sizeof path, "tile/%zu", i);
    if ((st = get_int(c, json_array_get(tile, i), path, 1, PLAN_MAX_FACTOR, &p->tile[i]))) return st;
    p->pos.tile[i] = at(c, path);
    strcpy(p->tile_axes[i], dflt[i]);
  }
  p->ntile = (int)n;
  if (axes) {
    if ((st = want(c, axes, JSON_ARRAY, "tile_axes", "an array of axis names"))) return st;
    if (json_array_size(axes) != n)
      return jfail(c, HARP_E_INVALID_ARG, "tile_axes", false, "\"tile_axes\" has %zu names for %zu tile entries",
                   json_array_size(axes), n);
    for (size_t i = 0; i < n; i++) {
      char path[32];
      snprintf(path, sizeof path, "tile_axes/%zu", i);
      if ((st = get_name(c, json_array_get(axes, i), path, true, p->tile_axes[i]))) return st;
    }
  }
  return HARP_OK;
}

static harp_status rd_warp(jctx *c, json_t *v) {
  plan_t *p = c->p;
  if (json_is_null(v)) return HARP_OK;
  harp_status st = want(c, v, JSON_STRING, "warp_tile", "a string such as \"64x64\"");
  if (st) return st;
  const char *s = json_string_value(v);
  long long m = 0, n = 0;
  int used = 0;
  p->pos.warp_tile = at(c, "warp_tile");
  if (!isdigit((unsigned char)s[0]) || sscanf(s, "%4lldx%4lld%n", &m, &n, &used) != 2 || s[used] ||
      !isdigit((unsigned char)s[strcspn(s, "x") + 1]))
    return jfail(c, HARP_E_PARSE, "warp_tile", false, "\"warp_tile\" must look like \"64x64\", got \"%.40s\"", s);
  if (m < 1 || n < 1) return jfail(c, HARP_E_INVALID_ARG, "warp_tile", false, "warp tile dimensions must be positive");
  p->warp_m = (int)m;
  p->warp_n = (int)n;
  if (p->ntile < 2) {
    if (n != 1) return jfail(c, HARP_E_INVALID_ARG, "warp_tile", false, "warp_tile %s needs two tiled axes", s);
    p->warp_n = 0;
  }
  return HARP_OK;
}

static harp_status rd_bind(jctx *c, json_t *v) {
  plan_t *p = c->p;
  harp_status st = want(c, v, JSON_OBJECT, "bind", "an object {axis: target}");
  if (st) return st;
  const char *k;
  json_t *t;
  json_object_foreach(v, k, t) {
    char path[PLAN_NAME_MAX + 16];
    snprintf(path, sizeof path, "bind/%.*s", PLAN_NAME_MAX, k);
    if (p->nbind >= PLAN_MAX_BIND)
      return jfail(c, HARP_E_LIMIT, path, true, "more than %d binds", PLAN_MAX_BIND);
    if (!plan_axis_name_ok(k)) return jfail(c, HARP_E_PARSE, path, true, "bind: '%.80s' is not an axis name", k);
    plan_copy_name(p->bind[p->nbind].axis, k);
    if ((st = want(c, t, JSON_STRING, path, "a target string"))) return st;
    int tg = plan_target_parse(json_string_value(t));
    if (tg < 0)
      return jfail(c, HARP_E_PARSE, path, false, "unknown bind target \"%.40s\" (block.x|y|z, warp.x|y|z)",
                   json_string_value(t));
    p->bind[p->nbind].target = (plan_target)tg;
    p->pos.bind[p->nbind++] = json_locate(c->text, path, true);
  }
  return HARP_OK;
}

static harp_status rd_cache(jctx *c, json_t *v) {
  plan_t *p = c->p;
  static const char *const keys[] = {"tensor", "where", "at", "pingpong", NULL};
  harp_status st = want(c, v, JSON_ARRAY, "cache", "an array");
  if (st) return st;
  for (size_t i = 0; i < json_array_size(v); i++) {
    char path[64], sub[80];
    snprintf(path, sizeof path, "cache/%zu", i);
    if (i >= PLAN_MAX_CACHE) return jfail(c, HARP_E_LIMIT, path, false, "more than %d cache entries", PLAN_MAX_CACHE);
    json_t *o = json_array_get(v, i), *x;
    plan_cache *ce = &p->cache[i];
    if ((st = want(c, o, JSON_OBJECT, path, "an object")) || (st = only_keys(c, o, path, keys))) return st;
    p->pos.cache[i] = at(c, path);
    snprintf(sub, sizeof sub, "%s/tensor", path);
    if ((st = need(c, o, path, "tensor", &x)) || (st = get_name(c, x, sub, false, ce->tensor))) return st;
    snprintf(sub, sizeof sub, "%s/where", path);
    if ((st = need(c, o, path, "where", &x)) || (st = want(c, x, JSON_STRING, sub, "a string"))) return st;
    if (strcmp(json_string_value(x), "smem") != 0)
      return jfail(c, HARP_E_PARSE, sub, false, "cache \"where\" must be \"smem\", got \"%.40s\"", json_string_value(x));
    snprintf(sub, sizeof sub, "%s/at", path);
    if ((st = need(c, o, path, "at", &x)) || (st = get_name(c, x, sub, true, ce->at))) return st;
    x = json_object_get(o, "pingpong");
    snprintf(sub, sizeof sub, "%s/pingpong", path);
    if (x && (st = want(c, x, JSON_TRUE, sub, "a boolean"))) return st;
    ce->pingpong = x && json_is_true(x);
    p->ncache++;
  }
  return HARP_OK;
}

static harp_status rd_vectorize(jctx *c, json_t *v) {
  plan_t *p = c->p;
  static const char *const keys[] = {"axis", "width", NULL};
  if (json_is_null(v)) return HARP_OK;
  json_t *x;
  int64_t w;
  harp_status st = want(c, v, JSON_OBJECT, "vectorize", "an object or null");
  if (!st) st = only_keys(c, v, "vectorize", keys);
  if (!st) st = need(c, v, "vectorize", "axis", &x);
  if (!st) st = get_name(c, x, "vectorize/axis", true, p->vec_axis);
  if (!st) st = need(c, v, "vectorize", "width", &x);
  if (!st) st = get_int(c, x, "vectorize/width", 1, 16, &w);
  if (st) return st;
  p->pos.vec = at(c, "vectorize/axis");
  p->pos.vec_width = at(c, "vectorize/width");
  if (w != 1 && w != 2 && w != 4 && w != 8 && w != 16)
    return jfail(c, HARP_E_INVALID_ARG, "vectorize/width", false, "vector width %lld is not 1, 2, 4, 8 or 16", (long long)w);
  p->vec_width = (int)w;
  return HARP_OK;
}

/* An array of axis names into names[], positions into pos[]. */
static harp_status rd_axes(jctx *c, json_t *v, const char *key, char (*names)[PLAN_NAME_MAX], plan_pos *pos, int *n) {
  char what[64];
  snprintf(what, sizeof what, "an array of axis names");
  harp_status st = want(c, v, JSON_ARRAY, key, what);
  if (st) return st;
  for (size_t i = 0; i < json_array_size(v); i++) {
    char path[64];
    snprintf(path, sizeof path, "%s/%zu", key, i);
    if (i >= PLAN_MAX_AXLIST) return jfail(c, HARP_E_LIMIT, path, false, "more than %d axes in \"%s\"", PLAN_MAX_AXLIST, key);
    if ((st = get_name(c, json_array_get(v, i), path, true, names[i]))) return st;
    pos[i] = at(c, path);
    *n = (int)i + 1;
  }
  return HARP_OK;
}

static harp_status rd_epilogue(jctx *c, json_t *v) {
  plan_t *p = c->p;
  harp_status st = want(c, v, JSON_ARRAY, "epilogue", "an array of ops");
  if (st) return st;
  p->pos.epilogue = at(c, "epilogue");
  for (size_t i = 0; i < json_array_size(v); i++) {
    char path[64];
    snprintf(path, sizeof path, "epilogue/%zu", i);
    if (i >= PLAN_MAX_EPI) return jfail(c, HARP_E_LIMIT, path, false, "more than %d epilogue ops", PLAN_MAX_EPI);
    json_t *x = json_array_get(v, i);
    if ((st = want(c, x, JSON_STRING, path, "a string"))) return st;
    int op = plan_epi_parse(json_string_value(x));
    if (op < 0)
      return jfail(c, HARP_E_PARSE, path, false, "unknown epilogue op \"%.40s\" (bias, relu, silu, gelu, residual)",
                   json_string_value(x));
    p->epi[p->nepi++] = (plan_epi)op;
  }
  return HARP_OK;
}

static harp_status rd_layout(jctx *c, json_t *v) {
  plan_t *p = c->p;
  static const char *const keys[] = {"A_swizzle", "B_swizzle", "C_stride", NULL};
  harp_status st = want(c, v, JSON_OBJECT, "layout_hints", "an object");
  if (!st) st = only_keys(c, v, "layout_hints", keys);
  if (st) return st;
  p->pos.layout = at(c, "layout_hints");
  json_t *x;
  if ((x = json_object_get(v, "A_swizzle"))) {
    if ((st = want(c, x, JSON_TRUE, "layout_hints/A_swizzle", "a boolean"))) return st;
    p->a_swizzle = json_is_true(x);
    c->seen.a_swizzle = true;
  }
  if ((x = json_object_get(v, "B_swizzle"))) {
    if ((st = want(c, x, JSON_TRUE, "layout_hints/B_swizzle", "a boolean"))) return st;
    p->b_swizzle = json_is_true(x);
    c->seen.b_swizzle = true;
  }
  if ((x = json_object_get(v, "C_stride"))) {
    if ((st = want(c, x, JSON_STRING, "layout_hints/C_stride", "\"row\" or \"col\""))) return st;
    const char *s = json_string_value(x);
    if (strcmp(s, "row") && strcmp(s, "col"))
      return jfail(c, HARP_E_PARSE, "layout_hints/C_stride", false, "C_stride must be \"row\" or \"col\", got \"%.40s\"", s);
    p->c_col = s[0] == 'c';
    c->seen.c_stride = true;
  }
  return HARP_OK;
}

static harp_status rd_algo(jctx *c, json_t *v) {
  plan_t *p = c->p;
  harp_status st = want(c, v, JSON_OBJECT, "algo_choice", "an object {pattern: algorithm}");
  if (st) return st;
  const char *k;
  json_t *x;
  json_object_foreach(v, k, x) {
    char path[128];
    snprintf(path, sizeof path, "algo_choice/%.80s", k);
    int key = plan_algo_key_parse(k);
    if (key < 0) return jfail(c, HARP_E_PARSE, path, true, "unknown algo_choice key \"%.80s\" (matmul, conv, attention)", k);
    if ((st = want(c, x, JSON_STRING, path, "a string"))) return st;
    int a = plan_algo_parse(json_string_value(x));
    if (a < 0 && plan_algo_absent(json_string_value(x)))
      return jfail(c, HARP_E_UNSUPPORTED, path, false, "%s", plan_algo_absent(json_string_value(x)));
    if (a < 0 || !plan_algo_fits((plan_algo)a, (plan_algo_key)key))
      return jfail(c, HARP_E_INVALID_ARG, path, false, "\"%.40s\" is not an algorithm for %s", json_string_value(x), k);
    p->algo[key] = (plan_algo)a;
    p->pos.algo[key] = at(c, path);
  }
  return HARP_OK;
}

static harp_status rd_edges(jctx *c, json_t *v) {
  plan_t *p = c->p;
  static const char *const keys[] = {"from", "to", "buffer", "depth", NULL};
  harp_status st = want(c, v, JSON_ARRAY, "local_edges", "an array");
  if (st) return st;
  for (size_t i = 0; i < json_array_size(v); i++) {
    char path[64], sub[80];
    snprintf(path, sizeof path, "local_edges/%zu", i);
    if (i >= PLAN_MAX_EDGES) return jfail(c, HARP_E_LIMIT, path, false, "more than %d local edges", PLAN_MAX_EDGES);
    json_t *o = json_array_get(v, i), *x;
    plan_edge *g = &p->edges[i];
    if ((st = want(c, o, JSON_OBJECT, path, "an object")) || (st = only_keys(c, o, path, keys))) return st;
    p->pos.edges[i] = at(c, path);
    snprintf(sub, sizeof sub, "%s/from", path);
    if ((st = need(c, o, path, "from", &x)) || (st = get_name(c, x, sub, false, g->from))) return st;
    snprintf(sub, sizeof sub, "%s/to", path);
    if ((st = need(c, o, path, "to", &x)) || (st = get_name(c, x, sub, false, g->to))) return st;
    snprintf(sub, sizeof sub, "%s/buffer", path);
    if ((st = need(c, o, path, "buffer", &x)) || (st = want(c, x, JSON_STRING, sub, "a string"))) return st;
    int b = plan_buffer_parse(json_string_value(x));
    if (b < 0)
      return jfail(c, HARP_E_PARSE, sub, false, "unknown buffer \"%.40s\" (reg, smem_ring, gmem)", json_string_value(x));
    g->buffer = (plan_buffer)b;
    if ((x = json_object_get(o, "depth"))) {
      int64_t dpt;
      snprintf(sub, sizeof sub, "%s/depth", path);
      if ((st = get_int(c, x, sub, 2, 3, &dpt))) return st;
      if (g->buffer != PLAN_BUF_SMEM_RING)
        return jfail(c, HARP_E_INVALID_ARG, sub, false, "only a smem_ring has a depth");
      g->depth = (int)dpt;
    }
    p->nedges++;
  }
  return HARP_OK;
}

/* "splits" / "unroll": arrays of {"axis", "factor"}. */
static harp_status rd_factors(jctx *c, json_t *v, const char *key, int cap, int64_t hi, bool is_unroll) {
  plan_t *p = c->p;
  static const char *const keys[] = {"axis", "factor", NULL};
  harp_status st = want(c, v, JSON_ARRAY, key, "an array");
  if (st) return st;
  for (size_t i = 0; i < json_array_size(v); i++) {
    char path[64], sub[80];
    snprintf(path, sizeof path, "%s/%zu", key, i);
    if ((int)i >= cap) return jfail(c, HARP_E_LIMIT, path, false, "more than %d entries in \"%s\"", cap, key);
    json_t *o = json_array_get(v, i), *x;
    char *axis = is_unroll ? p->unroll[i].axis : p->splits[i].axis;
    int64_t f = 0;
    if ((st = want(c, o, JSON_OBJECT, path, "an object")) || (st = only_keys(c, o, path, keys))) return st;
    snprintf(sub, sizeof sub, "%s/axis", path);
    if ((st = need(c, o, path, "axis", &x)) || (st = get_name(c, x, sub, true, axis))) return st;
    snprintf(sub, sizeof sub, "%s/factor", path);
    if ((st = need(c, o, path, "factor", &x)) || (st = get_int(c, x, sub, 1, hi, &f))) return st;
    if (is_unroll) {
      p->unroll[i].factor = (int)f;
      p->pos.unroll[i] = at(c, path);
      p->nunroll++;
    } else {
      p->splits[i].factor = f;
      p->pos.splits[i] = at(c, path);
      p->nsplits++;
    }
  }
  return HARP_OK;
}

static harp_status rd_fuse(jctx *c, json_t *v) {
  plan_t *p = c->p;
  static const char *const keys[] = {"axes", "to", NULL};
  harp_status st = want(c, v, JSON_ARRAY, "fuse", "an array");
  if (st) return st;
  for (size_t i = 0; i < json_array_size(v); i++) {
    char path[64], sub[80];
    snprintf(path, sizeof path, "fuse/%zu", i);
    if (i >= PLAN_MAX_FUSE) return jfail(c, HARP_E_LIMIT, path, false, "more than %d fuses", PLAN_MAX_FUSE);
    json_t *o = json_array_get(v, i), *x;
    plan_fuse *f = &p->fuse[i];
    if ((st = want(c, o, JSON_OBJECT, path, "an object")) || (st = only_keys(c, o, path, keys))) return st;
    snprintf(sub, sizeof sub, "%s/axes", path);
    if ((st = need(c, o, path, "axes", &x)) || (st = want(c, x, JSON_ARRAY, sub, "an array of two axes"))) return st;
    if (json_array_size(x) != 2) return jfail(c, HARP_E_PARSE, sub, false, "fuse \"axes\" must name two axes");
    snprintf(sub, sizeof sub, "%s/axes/0", path);
    if ((st = get_name(c, json_array_get(x, 0), sub, true, f->a))) return st;
    snprintf(sub, sizeof sub, "%s/axes/1", path);
    if ((st = get_name(c, json_array_get(x, 1), sub, true, f->b))) return st;
    snprintf(sub, sizeof sub, "%s/to", path);
    if ((st = need(c, o, path, "to", &x)) || (st = get_name(c, x, sub, true, f->to))) return st;
    p->pos.fuse[i] = at(c, sub);
    p->nfuse++;
  }
  return HARP_OK;
}

static harp_status rd_plan(jctx *c, json_t *root) {
  static const char *const keys[] = {"tile",        "stages",      "bind",        "warp_tile",   "cache",
                                     "vectorize",   "predicate_tail", "epilogue", "arch",        "layout_hints",
                                     "algo_choice", "local_edges", "tile_axes",   "pipeline_axis", "reorder",
                                     "splits",      "fuse",        "unroll",      "splitk",      NULL};
  plan_t *p = c->p;
  harp_status st = only_keys(c, root, "", keys);
  if (st) return st;
  json_t *v = json_object_get(root, "tile");
  if (!v) return jfail(c, HARP_E_PARSE, "", false, "a plan needs \"tile\"");
  if ((st = rd_tile(c, v, json_object_get(root, "tile_axes")))) return st;
  if ((v = json_object_get(root, "stages"))) {
    int64_t s;
    if ((st = get_int(c, v, "stages", 2, 3, &s))) return st;
    p->stages = (int)s;
    p->pos.stages = at(c, "stages");
    c->seen.stages = true;
  }
  if ((v = json_object_get(root, "arch"))) {
    if ((st = want(c, v, JSON_STRING, "arch", "a string"))) return st;
    int a = plan_arch_parse(json_string_value(v));
    if (a < 0) return jfail(c, HARP_E_PARSE, "arch", false, "unknown arch \"%.40s\" (sm80, sm90, cpu)", json_string_value(v));
    p->arch = (plan_arch)a;
    p->pos.arch = at(c, "arch");
    c->seen.arch = true;
  }
  if ((v = json_object_get(root, "bind")) && (st = rd_bind(c, v))) return st;
  if ((v = json_object_get(root, "warp_tile")) && (st = rd_warp(c, v))) return st;
  if ((v = json_object_get(root, "cache")) && (st = rd_cache(c, v))) return st;
  if ((v = json_object_get(root, "vectorize")) && (st = rd_vectorize(c, v))) return st;
  if ((v = json_object_get(root, "predicate_tail")) && (st = rd_axes(c, v, "predicate_tail", p->pred, p->pos.pred, &p->npred)))
    return st;
  if ((v = json_object_get(root, "epilogue")) && (st = rd_epilogue(c, v))) return st;
  if ((v = json_object_get(root, "layout_hints")) && (st = rd_layout(c, v))) return st;
  if ((v = json_object_get(root, "algo_choice")) && (st = rd_algo(c, v))) return st;
  if ((v = json_object_get(root, "local_edges")) && (st = rd_edges(c, v))) return st;
  if ((v = json_object_get(root, "pipeline_axis"))) {
    if ((st = get_name(c, v, "pipeline_axis", true, p->pipeline_axis))) return st;
    p->pos.pipeline = at(c, "pipeline_axis");
    c->seen.pipeline = true;
  }
  if ((v = json_object_get(root, "reorder")) && (st = rd_axes(c, v, "reorder", p->reorder, p->pos.reorder, &p->nreorder)))
    return st;
  if ((v = json_object_get(root, "splits")) && (st = rd_factors(c, v, "splits", PLAN_MAX_SPLITS, PLAN_MAX_FACTOR, false)))
    return st;
  if ((v = json_object_get(root, "unroll")) && (st = rd_factors(c, v, "unroll", PLAN_MAX_UNROLL, 64, true))) return st;
  if ((v = json_object_get(root, "fuse")) && (st = rd_fuse(c, v))) return st;
  if ((v = json_object_get(root, "splitk"))) { /* extension: explicit split-K slices */
    int64_t s;
    if ((st = get_int(c, v, "splitk", 1, PLAN_MAX_SPLITK, &s))) return st;
    p->splitk = (int)s;
    p->pos.splitk = at(c, "splitk");
  }
  return HARP_OK;
}

harp_status plan_parse_json(const char *text, const char *file, plan_arch default_arch, plan_t *out, harp_error *e) {
  if (!text) return ut_fail(e, HARP_E_INTERNAL, NULL, "plan_parse_json: no text");
  plan_src src = {file, text};
  size_t len = strlen(text);
  if (len > PLAN_MAX_TEXT) return plan_fail(e, HARP_E_LIMIT, &src, (plan_pos){0, 0}, NULL, "plan larger than 1 MiB");
  plan_init(out, default_arch);
  json_error_t je;
  json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
  if (!root) return plan_fail(e, HARP_E_PARSE, &src, (plan_pos){je.line, je.column > 0 ? je.column : 1}, NULL,
                              "invalid JSON: %s", je.text);
  jctx c = {.text = text, .src = src, .e = e, .p = out};
  harp_status st;
  if (!json_is_object(root))
    st = plan_fail(e, HARP_E_PARSE, &src, json_locate(text, "", false), NULL, "a plan is a JSON object, got %s", ut_json_kind(root));
  else
    st = rd_plan(&c, root);
  json_decref(root);
  if (st) return st;
  plan_finish(out, &c.seen, default_arch);
  return plan_check(out, &src, e);
}

bool plan_text_is_json(const char *text) {
  while (*text && isspace((unsigned char)*text)) text++;
  return *text == '{' || *text == '[';
}

harp_status plan_parse(const char *text, const char *file, plan_arch default_arch, plan_t *out, harp_error *e) {
  return plan_text_is_json(text) ? plan_parse_json(text, file, default_arch, out, e)
                                 : plan_parse_dsl(text, file, default_arch, out, e);
}

harp_status plan_load_file(const char *path, plan_arch default_arch, plan_t *out, harp_error *e) {
  char *buf = NULL;
  size_t len = 0;
  harp_status st = ut_read_file(e, path, PLAN_MAX_TEXT, &buf, &len);
  if (st) return st;
  if (strlen(buf) != len)
    st = plan_fail(e, HARP_E_PARSE, &(plan_src){path, NULL}, (plan_pos){0, 0}, NULL, "plan file contains a NUL byte");
  else
    st = plan_parse(buf, path, default_arch, out, e);
  free(buf);
  return st;
}
