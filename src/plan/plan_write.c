/* plan_write.c — print a plan_t as canonical JSON (§12.5) or DSL (§12.6).
 * Needs: jansson (values and escaping), plan_core.c, util/json_kind.h.  Gives: plan_to_json,
 * plan_to_dsl, plan_convert, plan_dump_json.
 *
 * Canonical means: the same plan always prints the same bytes, and printing
 * then parsing gives back an equal plan (plan_equal), in either form. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan_int.h"
#include "util/json_kind.h"
#include "util/util.h"

/* ---- JSON ------------------------------------------------------------------------ */
static json_t *jstrs(const char (*names)[PLAN_NAME_MAX], int n) {
  json_t *a = json_array();
  for (int i = 0; i < n; i++) json_array_append_new(a, json_string(names[i]));
  return a;
}

static bool default_tile_axes(const plan_t *p) {
  static const char *const d[] = {"m", "n", "k"};
  for (int i = 0; i < p->ntile; i++)
    if (strcmp(p->tile_axes[i], d[i]) != 0) return false;
  return true;
}

/* The (key, value) pairs of the plan in canonical order; values are new refs. */
typedef struct jfield {
  const char *key;
  json_t *val;
} jfield;

static int plan_fields(const plan_t *p, jfield *f) {
  int n = 0;
  json_t *a = json_array();
  for (int i = 0; i < p->ntile; i++) json_array_append_new(a, json_integer(p->tile[i]));
  f[n++] = (jfield){"tile", a};
  f[n++] = (jfield){"stages", json_integer(p->stages)};
  json_t *o = json_object();
  for (int i = 0; i < p->nbind; i++) json_object_set_new(o, p->bind[i].axis, json_string(plan_target_name(p->bind[i].target)));
  f[n++] = (jfield){"bind", o};
  char wt[32];
  snprintf(wt, sizeof wt, "%dx%d", p->warp_m, p->ntile >= 2 ? p->warp_n : 1);
  f[n++] = (jfield){"warp_tile", json_string(wt)};
  a = json_array();
  for (int i = 0; i < p->ncache; i++)
    json_array_append_new(a, json_pack("{s:s, s:s, s:s, s:b}", "tensor", p->cache[i].tensor, "where", "smem", "at",
                                       p->cache[i].at, "pingpong", p->cache[i].pingpong));
  f[n++] = (jfield){"cache", a};
  f[n++] = (jfield){"vectorize", p->vec_width ? json_pack("{s:s, s:i}", "axis", p->vec_axis, "width", p->vec_width)
                                              : json_null()};
  f[n++] = (jfield){"predicate_tail", jstrs(p->pred, p->npred)};
  a = json_array();
  for (int i = 0; i < p->nepi; i++) json_array_append_new(a, json_string(plan_epi_name(p->epi[i])));
  f[n++] = (jfield){"epilogue", a};
  f[n++] = (jfield){"arch", json_string(plan_arch_name(p->arch))};
  f[n++] = (jfield){"layout_hints", json_pack("{s:b, s:b, s:s}", "A_swizzle", p->a_swizzle, "B_swizzle", p->b_swizzle,
                                              "C_stride", p->c_col ? "col" : "row")};
  o = json_object();
  for (int k = 0; k < PLAN_KEY_COUNT; k++)
    if (p->algo[k] != PLAN_ALGO_NONE)
      json_object_set_new(o, plan_algo_key_name((plan_algo_key)k), json_string(plan_algo_name(p->algo[k])));
  f[n++] = (jfield){"algo_choice", o};
  a = json_array();
  for (int i = 0; i < p->nedges; i++) {
    const plan_edge *g = &p->edges[i];
    json_t *e = json_pack("{s:s, s:s, s:s}", "from", g->from, "to", g->to, "buffer", plan_buffer_name(g->buffer));
    if (g->depth) json_object_set_new(e, "depth", json_integer(g->depth));
    json_array_append_new(a, e);
  }
  f[n++] = (jfield){"local_edges", a};
  /* extensions, only when they say something */
  if (!default_tile_axes(p)) f[n++] = (jfield){"tile_axes", jstrs(p->tile_axes, p->ntile)};
  char dp[PLAN_NAME_MAX];
  plan_default_pipeline_axis(p, dp);
  if (strcmp(dp, p->pipeline_axis) != 0) f[n++] = (jfield){"pipeline_axis", json_string(p->pipeline_axis)};
  if (p->nreorder) f[n++] = (jfield){"reorder", jstrs(p->reorder, p->nreorder)};
  if (p->nsplits) {
    a = json_array();
    for (int i = 0; i < p->nsplits; i++)
      json_array_append_new(a, json_pack("{s:s, s:I}", "axis", p->splits[i].axis, "factor", (json_int_t)p->splits[i].factor));
    f[n++] = (jfield){"splits", a};
  }
  if (p->nfuse) {
    a = json_array();
    for (int i = 0; i < p->nfuse; i++)
      json_array_append_new(a, json_pack("{s:[s, s], s:s}", "axes", p->fuse[i].a, p->fuse[i].b, "to", p->fuse[i].to));
    f[n++] = (jfield){"fuse", a};
  }
  if (p->nunroll) {
    a = json_array();
    for (int i = 0; i < p->nunroll; i++)
      json_array_append_new(a, json_pack("{s:s, s:i}", "axis", p->unroll[i].axis, "factor", p->unroll[i].factor));
    f[n++] = (jfield){"unroll", a};
  }
  if (p->splitk) f[n++] = (jfield){"splitk", json_integer(p->splitk)};
  return n;
}

#define MAX_FIELDS 24

static json_t *plan_json_value(const plan_t *p) {
  jfield f[MAX_FIELDS];
  int n = plan_fields(p, f);
  json_t *o = json_object();
  for (int i = 0; i < n; i++) {
    if (!f[i].val) {
      json_decref(o);
      o = NULL;
    }
    if (o)
      json_object_set_new(o, f[i].key, f[i].val);
    else
      json_decref(f[i].val);
  }
  return o;
}

harp_status plan_to_json(const plan_t *p, char **out, harp_error *e) {
  *out = NULL;
  jfield f[MAX_FIELDS];
  int n = plan_fields(p, f);
  ut_str s;
  ut_str_init(&s);
  ut_str_puts(&s, "{\n");
  bool ok = true;
  for (int i = 0; i < n; i++) {
    char *v = f[i].val ? json_dumps(f[i].val, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    if (!v) ok = false;
    if (ok) ut_str_printf(&s, "  \"%s\":%s%s\n", f[i].key, v, i + 1 < n ? "," : "");
    free(v);
    json_decref(f[i].val);
  }
  ut_str_puts(&s, "}\n");
  if (!ok || s.oom) {
    ut_str_free(&s);
    return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory printing a plan");
  }
  *out = ut_str_take(&s);
  return HARP_OK;
}

harp_status plan_dump_json(const char *const *region_names, const plan_t *plans, int n, char **out, harp_error *e) {
  *out = NULL;
  json_t *arr = json_array();
  bool ok = arr != NULL;
  for (int i = 0; ok && i < n; i++) {
    json_t *pv = plan_json_value(&plans[i]);
    json_t *r = pv ? json_pack("{s:s, s:o}", "region", region_names[i] ? region_names[i] : "", "plan", pv) : NULL;
    ok = r && json_array_append_new(arr, r) == 0;
  }
  json_t *root = ok ? json_pack("{s:o}", "plans", arr) : (json_decref(arr), NULL);
  return ut_json_text(e, root, JSON_INDENT(2), out);
}

/* ---- DSL ------------------------------------------------------------------------- */
harp_status plan_to_dsl(const plan_t *p, char **out, harp_error *e) {
  *out = NULL;
  ut_str s;
  ut_str_init(&s);
  for (int i = 0; i < p->ntile; i++) ut_str_printf(&s, "split %s %lld;\n", p->tile_axes[i], (long long)p->tile[i]);
  if (p->ntile >= 1) ut_str_printf(&s, "split %s.i %d;\n", p->tile_axes[0], p->warp_m);
  if (p->ntile >= 2) ut_str_printf(&s, "split %s.i %d;\n", p->tile_axes[1], p->warp_n);
  for (int i = 0; i < p->nsplits; i++)
    ut_str_printf(&s, "split %s %lld;\n", p->splits[i].axis, (long long)p->splits[i].factor);
  for (int i = 0; i < p->nfuse; i++) ut_str_printf(&s, "fuse %s %s -> %s;\n", p->fuse[i].a, p->fuse[i].b, p->fuse[i].to);
  char canon[PLAN_MAX_AXLIST][PLAN_NAME_MAX];
  const char(*order)[PLAN_NAME_MAX] = p->reorder;
  int nord = p->nreorder;
  if (!nord) {
    nord = plan_canonical_order(p, canon, PLAN_MAX_AXLIST);
    order = canon;
  }
  if (nord) {
    ut_str_puts(&s, "reorder");
    for (int i = 0; i < nord; i++) ut_str_printf(&s, " %s", order[i]);
    ut_str_puts(&s, ";\n");
  }
  for (int i = 0; i < p->nbind; i++) ut_str_printf(&s, "bind %s %s;\n", p->bind[i].axis, plan_target_name(p->bind[i].target));
  ut_str_printf(&s, "pipeline %s stages=%d;\n", p->pipeline_axis, p->stages);
  for (int i = 0; i < p->ncache; i++)
    ut_str_printf(&s, "cache_read %s smem at=%s pingpong=%s;\n", p->cache[i].tensor, p->cache[i].at,
                  p->cache[i].pingpong ? "true" : "false");
  if (p->vec_width) ut_str_printf(&s, "vectorize %s %d;\n", p->vec_axis, p->vec_width);
  for (int i = 0; i < p->nunroll; i++) ut_str_printf(&s, "unroll %s %d;\n", p->unroll[i].axis, p->unroll[i].factor);
  if (p->npred) {
    ut_str_puts(&s, "predicate_tail");
    for (int i = 0; i < p->npred; i++) ut_str_printf(&s, " %s", p->pred[i]);
    ut_str_puts(&s, ";\n");
  }
  if (p->nepi) {
    ut_str_puts(&s, "epilogue");
    for (int i = 0; i < p->nepi; i++) ut_str_printf(&s, " %s", plan_epi_name(p->epi[i]));
    ut_str_puts(&s, ";\n");
  }
  for (int k = 0; k < PLAN_KEY_COUNT; k++)
    if (p->algo[k] != PLAN_ALGO_NONE)
      ut_str_printf(&s, "algo_choice %s %s;\n", plan_algo_key_name((plan_algo_key)k), plan_algo_name(p->algo[k]));
  if (p->splitk) ut_str_printf(&s, "splitk %d;\n", p->splitk);
  ut_str_printf(&s, "arch %s;\n", plan_arch_name(p->arch));
  bool as, bs, cc;
  plan_default_layout(p->arch, &as, &bs, &cc);
  if (p->a_swizzle != as) ut_str_printf(&s, "layout_hint A_swizzle=%s;\n", p->a_swizzle ? "true" : "false");
  if (p->b_swizzle != bs) ut_str_printf(&s, "layout_hint B_swizzle=%s;\n", p->b_swizzle ? "true" : "false");
  if (p->c_col != cc) ut_str_printf(&s, "layout_hint C_stride=%s;\n", p->c_col ? "col" : "row");
  for (int i = 0; i < p->nedges; i++) {
    const plan_edge *g = &p->edges[i];
    ut_str_printf(&s, "local_edge %s -> %s %s", g->from, g->to, plan_buffer_name(g->buffer));
    if (g->depth) ut_str_printf(&s, " depth=%d", g->depth);
    ut_str_puts(&s, ";\n");
  }
  if (s.oom || !s.buf) {
    ut_str_free(&s);
    return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory printing a plan");
  }
  *out = ut_str_take(&s);
  return HARP_OK;
}

/* ---- conversion ------------------------------------------------------------------ */
harp_status plan_convert(const char *text, const char *file, const char *to, char **out, harp_error *e) {
  *out = NULL;
  bool from_json = plan_text_is_json(text);
  bool to_json;
  if (!to)
    to_json = !from_json;
  else if (strcmp(to, "json") == 0)
    to_json = true;
  else if (strcmp(to, "dsl") == 0)
    to_json = false;
  else
    return ut_fail(e, HARP_E_USAGE, NULL, "--to takes json or dsl, not '%s'", to);
  plan_t *p = ut_xmalloc(sizeof *p);
  if (!p) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  /* sm80 is the arch of the seed's examples (§7.1); a plan may say otherwise. */
  harp_status st = plan_parse(text, file, PLAN_ARCH_SM80, p, e);
  if (!st) st = to_json ? plan_to_json(p, out, e) : plan_to_dsl(p, out, e);
  free(p);
  return st;
}
