/* plan_list.c — plan lists: the plans of several regions in one JSON file,
 * the format `--dump plan` writes and `--plan FILE` reads back.
 * Needs: plan_json.c (plan_parse_json, plan_json_value_span), jansson.
 * Gives: plan_text_is_list, plan_list_parse.
 *
 *   {"plans": [{"region": NAME, "plan": PLAN | null, ...}, ...], ...}
 *
 * Each nested plan is parsed by plan_parse_json on a copy of the whole text
 * in which everything outside that plan is blanked (newlines kept), so every
 * error — in the plan, or later when plan_validate checks it against its
 * region — is located at the line and column of the list file itself. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan_int.h"
#include "util/util.h"

/* Keys a list entry may carry besides "region" and "plan" (what the dump
 * writes for people; ignored on input), and the list's own top-level keys. */
static const char *const ENTRY_INFO[] = {"source", "applied", "note", "kernel", "time_est", "cache", NULL};
static const char *const TOP_KEYS[] = {"plans", "model", "shapeset", "machine", "binding", NULL};

static bool in_list(const char *const *keys, const char *k) {
  for (int i = 0; keys[i]; i++)
    if (!strcmp(keys[i], k)) return true;
  return false;
}

bool plan_text_is_list(const char *text) {
  if (!text || !plan_text_is_json(text)) return false;
  json_t *root = json_loads(text, JSON_REJECT_DUPLICATES, NULL);
  bool list = root && json_is_object(root) && json_object_get(root, "plans") != NULL;
  json_decref(root);
  return list;
}

/* Fail at the value (or key) at path, located in the list's text. */
static harp_status lfail(harp_error *e, harp_status code, const plan_src *src, const char *path, bool key, const char *fmt,
                       ...) __attribute__((format(printf, 6, 7)));
static harp_status lfail(harp_error *e, harp_status code, const plan_src *src, const char *path, bool key, const char *fmt,
                       ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  plan_pos pos = {0, 0};
  size_t a, b;
  if (key) {
    /* the key's position: the value's span starts after it; search back for the quote */
    if (plan_json_value_span(src->text, path, &a, &b)) {
      size_t i = a;
      while (i > 0 && src->text[i] != ':') i--;
      while (i > 0 && src->text[i] != '"') i--;
      while (i > 0 && src->text[i - 1] != '"') i--;
      if (i > 0) i--;
      a = i;
    } else {
      a = 0;
    }
  } else if (!plan_json_value_span(src->text, path, &a, &b)) {
    a = 0;
  }
  pos.line = 1, pos.col = 1;
  for (size_t i = 0; i < a && src->text[i]; i++) {
    if (src->text[i] == '\n') pos.line++, pos.col = 1;
    else pos.col++;
  }
  return plan_fail(e, code, src, pos, NULL, "%s", msg);
}

static harp_status parse_entry(const char *text, const plan_src *src, json_t *ent, int i, plan_arch arch,
                             plan_list_entry *out, harp_error *e) {
  char path[64];
  snprintf(path, sizeof path, "plans/%d", i);
  memset(out, 0, sizeof *out);
  if (!json_is_object(ent)) return lfail(e, HARP_E_PARSE, src, path, false, "plans[%d] must be an object", i);
  const char *k;
  json_t *v;
  json_object_foreach(ent, k, v) {
    if (!strcmp(k, "region") || !strcmp(k, "plan") || in_list(ENTRY_INFO, k)) continue;
    char kp[160];
    snprintf(kp, sizeof kp, "%s/%.80s", path, k);
    return lfail(e, HARP_E_PARSE, src, kp, true, "unknown key \"%.80s\" in plans[%d] (region, plan)", k, i);
  }
  json_t *r = json_object_get(ent, "region");
  char rp[80];
  snprintf(rp, sizeof rp, "%s/region", path);
  if (!r) return lfail(e, HARP_E_PARSE, src, path, false, "plans[%d] needs \"region\"", i);
  if (!json_is_string(r) || !json_string_value(r)[0])
    return lfail(e, HARP_E_PARSE, src, rp, false, "\"region\" must be a region name");
  if (strlen(json_string_value(r)) >= sizeof out->region)
    return lfail(e, HARP_E_LIMIT, src, rp, false, "region name too long");
  snprintf(out->region, sizeof out->region, "%s", json_string_value(r));
  size_t a, b;
  if (plan_json_value_span(text, rp, &a, &b)) {
    out->region_pos = (plan_pos){1, 1};
    for (size_t q = 0; q < a; q++) {
      if (text[q] == '\n') out->region_pos.line++, out->region_pos.col = 1;
      else out->region_pos.col++;
    }
  }
  json_t *p = json_object_get(ent, "plan");
  char pp[80];
  snprintf(pp, sizeof pp, "%s/plan", path);
  if (!p) return lfail(e, HARP_E_PARSE, src, path, false, "plans[%d] needs \"plan\" (an object, or null)", i);
  if (json_is_null(p)) return HARP_OK;
  if (!json_is_object(p)) return lfail(e, HARP_E_PARSE, src, pp, false, "\"plan\" must be a plan object or null");
  if (!plan_json_value_span(text, pp, &a, &b) || text[a] != '{')
    return lfail(e, HARP_E_INTERNAL, src, pp, false, "cannot find the plan in the text");
  /* the plan in place: same offsets, everything else blank */
  size_t len = strlen(text);
  char *copy = ut_xmalloc(len + 1);
  if (!copy) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  for (size_t q = 0; q < len; q++) copy[q] = (q >= a && q < b) || text[q] == '\n' ? text[q] : ' ';
  copy[len] = 0;
  plan_src keep = *src;
  harp_error pe = {0};
  harp_status st = plan_parse_json(copy, src->file, arch, &out->plan, &pe);
  free(copy);
  if (st) {
    /* re-point the snippet at the real text */
    if (pe.line > 0 && keep.text) ut_error_set_snippet(&pe, keep.text, pe.line, pe.col);
    if (e && e->code == HARP_OK) *e = pe;
    return st;
  }
  out->has_plan = true;
  return HARP_OK;
}

harp_status plan_list_parse(const char *text, const char *file, plan_arch default_arch, plan_list_entry **out, int *n,
                          harp_error *e) {
  *out = NULL;
  *n = 0;
  plan_src src = {file, text};
  if (!text) return ut_fail(e, HARP_E_INTERNAL, NULL, "plan_list_parse: no text");
  size_t len = strlen(text);
  if (len > PLAN_MAX_TEXT) return plan_fail(e, HARP_E_LIMIT, &src, (plan_pos){0, 0}, NULL, "plan list larger than 1 MiB");
  json_error_t je;
  json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
  if (!root)
    return plan_fail(e, HARP_E_PARSE, &src, (plan_pos){je.line, je.column > 0 ? je.column : 1}, NULL, "invalid JSON: %s",
                     je.text);
  harp_status st = HARP_OK;
  json_t *plans = json_is_object(root) ? json_object_get(root, "plans") : NULL;
  if (!plans) {
    st = lfail(e, HARP_E_PARSE, &src, "", false, "a plan list is {\"plans\": [{\"region\": NAME, \"plan\": {...}}, ...]}");
  } else if (!json_is_array(plans)) {
    st = lfail(e, HARP_E_PARSE, &src, "plans", false, "\"plans\" must be an array");
  } else {
    const char *k;
    json_t *v;
    json_object_foreach(root, k, v) {
      if (in_list(TOP_KEYS, k)) continue;
      char kp[100];
      snprintf(kp, sizeof kp, "%.80s", k);
      st = lfail(e, HARP_E_PARSE, &src, kp, true, "unknown key \"%.80s\" in the plan list (plans, model, shapeset, machine)", k);
      break;
    }
  }
  size_t cnt = !st ? json_array_size(plans) : 0;
  plan_list_entry *ents = !st ? ut_xcalloc(cnt + 1, sizeof *ents) : NULL;
  if (!st && !ents) st = ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  for (size_t i = 0; !st && i < cnt; i++) {
    st = parse_entry(text, &src, json_array_get(plans, i), (int)i, default_arch, &ents[i], e);
    for (size_t j = 0; !st && j < i; j++)
      if (!strcmp(ents[j].region, ents[i].region)) {
        char rp[64];
        snprintf(rp, sizeof rp, "plans/%zu/region", i);
        st = lfail(e, HARP_E_INVALID_ARG, &src, rp, false, "region '%.200s' has two plans (plans[%zu] and plans[%zu])",
                   ents[i].region, j, i);
      }
  }
  json_decref(root);
  if (st) {
    free(ents);
    return st;
  }
  *out = ents;
  *n = (int)cnt;
  return HARP_OK;
}
