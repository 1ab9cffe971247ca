/* plan_cache.c — the on-disk plan cache: the best plan `harp tune` measured
 * per (model hash, region, ShapeSet, machine).
 * Needs: the plan format (plan_to_json / plan_parse_json), the compile
 * cache's directory, jansson.  Gives: rt_model_hash, rt_machine_id,
 * rt_plan_cache_path, rt_plan_cache_load, rt_plan_cache_store.
 *
 * Layout: DIR/plans/<h>.json, h = 16 hex digits of a hash of the four key
 * strings.  The file repeats the key verbatim (a collision, or a file copied
 * from elsewhere, reads as a miss), the binding it was measured at, the
 * medians and the plan:
 *   {"harp_plan_cache": 1, "model": "...", "region": "...", "shapeset": "...",
 *    "machine": "...", "binding": "...", "median_ms": x, "default_ms": y,
 *    "points": n, "repeat": r, "tuned_at": "...", "plan": {...}}
 * Writes go through ut_write_file_atomic (a per-process temp file, then
 * rename), so readers never see half a file and concurrent writers of one
 * key leave one whole entry. */
#include <ctype.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compile.h"
#include "harp/tune.h"
#include "util/json_kind.h"
#include "util/util.h"

#define CACHE_VERSION 1

uint64_t rt_model_hash(const tiny_graph *g) {
  char *txt = tiny_write_json(g);
  uint64_t h = txt ? ut_hash64(txt, strlen(txt), 0x706c616e73ull) : 0;
  free(txt);
  return h;
}

void rt_machine_id(const plan_machine *m, char *out, size_t cap) {
  if (!cap) return;
  size_t k = (size_t)snprintf(out, cap, "%s:", plan_arch_name(m->arch));
  bool dash = false;
  for (const char *s = m->name; *s && k + 1 < cap; s++) {
    unsigned char c = (unsigned char)*s;
    if (isalnum(c) || c == '.' || c == '@') {
      if (dash && out[k - 1] != ':') out[k++] = '-';
      if (k + 1 < cap) out[k++] = (char)tolower(c);
      dash = false;
    } else {
      dash = true;
    }
  }
  if (k >= cap) k = cap - 1;
  out[k] = 0;
}

static uint64_t key_hash(const rt_plan_key *k) {
  const char *parts[4] = {k->model, k->region, k->shapeset, k->machine};
  uint64_t h = 0x63616368ull;
  for (int i = 0; i < 4; i++) {
    const char *s = parts[i] ? parts[i] : "";
    h = ut_hash64(s, strlen(s) + 1, h); /* the NUL separates the parts */
  }
  return h;
}

char *rt_plan_cache_path(const char *cache_dir, const rt_plan_key *k) {
  rt_cc_opts co = {.cache_dir = cache_dir};
  char *dir = rt_cc_cache_dir(&co);
  if (!dir) return NULL;
  size_t n = strlen(dir) + 40;
  char *p = ut_xmalloc(n);
  if (p) snprintf(p, n, "%s/plans/%016llx.json", dir, (unsigned long long)key_hash(k));
  free(dir);
  return p;
}

static bool str_is(json_t *o, const char *key, const char *want) {
  json_t *v = json_object_get(o, key);
  return v && json_is_string(v) && !strcmp(json_string_value(v), want ? want : "");
}

static double num_of(json_t *o, const char *key) {
  json_t *v = json_object_get(o, key);
  return v && json_is_number(v) ? json_number_value(v) : 0;
}

harp_status rt_plan_cache_load(harp_error *e, const char *cache_dir, const rt_plan_key *k, plan_arch arch,
                             rt_plan_entry *out, bool *found, char *note, size_t cap) {
  *found = false;
  if (note && cap) note[0] = 0;
  memset(out, 0, sizeof *out);
  char *path = rt_plan_cache_path(cache_dir, k);
  if (!path) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  FILE *f = fopen(path, "rb");
  if (!f) { /* no entry */
    free(path);
    return HARP_OK;
  }
  fclose(f);
  char *text = NULL;
  size_t len = 0;
  harp_error re = {0};
  harp_status st = ut_read_file(&re, path, PLAN_MAX_TEXT, &text, &len);
  const char *why = NULL;
  char buf[RT_PLAN_NOTE_MAX];
  json_t *root = NULL;
  if (st == HARP_E_NO_MEMORY) {
    free(path);
    return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  }
  if (st) {
    snprintf(buf, sizeof buf, "cannot read it: %.200s", re.msg);
    why = buf;
  } else if (strlen(text) != len || !(root = json_loadb(text, len, JSON_REJECT_DUPLICATES, NULL)) ||
             !json_is_object(root)) {
    why = "it is not a JSON object";
  } else if (!json_is_integer(json_object_get(root, "harp_plan_cache")) ||
             json_integer_value(json_object_get(root, "harp_plan_cache")) != CACHE_VERSION) {
    why = "unknown format version";
  } else if (!str_is(root, "model", k->model) || !str_is(root, "region", k->region) ||
             !str_is(root, "shapeset", k->shapeset) || !str_is(root, "machine", k->machine)) {
    why = "it is for another model, region, ShapeSet or machine";
  } else {
    json_t *pj = json_object_get(root, "plan");
    char *ptxt = pj && json_is_object(pj) ? json_dumps(pj, JSON_COMPACT) : NULL;
    harp_error pe = {0};
    if (!ptxt) {
      why = "it has no plan";
    } else if (plan_parse_json(ptxt, path, arch, &out->plan, &pe)) {
      snprintf(buf, sizeof buf, "its plan is malformed: %.200s", pe.msg);
      why = buf;
    } else {
      json_t *b = json_object_get(root, "binding");
      if (b && json_is_string(b)) snprintf(out->binding, sizeof out->binding, "%s", json_string_value(b));
      json_t *t = json_object_get(root, "tuned_at");
      if (t && json_is_string(t)) snprintf(out->tuned_at, sizeof out->tuned_at, "%s", json_string_value(t));
      out->median_ms = num_of(root, "median_ms");
      out->default_ms = num_of(root, "default_ms");
      out->points = (int)num_of(root, "points");
      out->repeat = (int)num_of(root, "repeat");
      *found = true;
    }
    free(ptxt);
  }
  if (why && note) snprintf(note, cap, "plan cache entry %s ignored: %s", path, why);
  json_decref(root);
  free(text);
  free(path);
  return HARP_OK;
}

harp_status rt_plan_cache_store(harp_error *e, const char *cache_dir, const rt_plan_key *k, const rt_plan_entry *in,
                              char **path_out) {
  if (path_out) *path_out = NULL;
  char *path = rt_plan_cache_path(cache_dir, k);
  char *ptxt = NULL, *txt = NULL;
  json_t *root = NULL, *pj = NULL;
  harp_status st = HARP_OK;
  if (!path) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  if ((st = plan_to_json(&in->plan, &ptxt, e))) goto done;
  pj = json_loads(ptxt, 0, NULL);
  root = pj ? json_pack("{s:i, s:s, s:s, s:s, s:s, s:s, s:f, s:f, s:i, s:i, s:s, s:O}", "harp_plan_cache", CACHE_VERSION,
                        "model", k->model ? k->model : "", "region", k->region ? k->region : "", "shapeset",
                        k->shapeset ? k->shapeset : "", "machine", k->machine ? k->machine : "", "binding", in->binding,
                        "median_ms", in->median_ms, "default_ms", in->default_ms, "points", in->points, "repeat",
                        in->repeat, "tuned_at", in->tuned_at, "plan", pj)
            : NULL;
  json_decref(pj); /* "O" took its own reference */
  st = ut_json_text(e, root, JSON_INDENT(1) | JSON_PRESERVE_ORDER, &txt); /* root released */
  root = NULL;
  if (st) goto done;
  /* the directory: DIR/plans */
  char *slash = strrchr(path, '/');
  *slash = 0;
  st = ut_mkdirs(e, path);
  *slash = '/';
  if (!st) st = ut_write_file_atomic(e, path, txt, strlen(txt));
done:
  json_decref(root);
  free(txt);
  free(ptxt);
  if (!st && path_out) *path_out = path;
  else free(path);
  return st;
}
