/* plans.c — which Schedule Plan each region of a formed partition runs with:
 * an override (`--plan`), else the plan cache, else the default; and the
 * plan list `--dump plan` writes.
 * Needs: rg_form's rg_info per region, the plan format, plan_cache.c.
 * Gives: rt_plans_choose, rt_plans_free, rt_plans_dump_json,
 * rt_plan_overrides_load, rt_plan_source_name. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harp/region.h"
#include "harp/tune.h"
#include "util/json_kind.h"
#include "util/util.h"

const char *rt_plan_source_name(rt_plan_source s) {
  switch (s) {
  case RT_PLAN_DEFAULT: return "default";
  case RT_PLAN_OVERRIDE: return "override";
  case RT_PLAN_CACHED: return "cache";
  case RT_PLAN_TUNING: return "tuning";
  default: return "none";
  }
}

void rt_plans_free(rt_plans *ps) {
  if (!ps) return;
  free(ps->choice);
  ps->choice = NULL;
  ps->n = 0;
}

/* The names of the regions that have a plan, for error messages. */
static void region_list(const rg_partition *p, char *buf, size_t cap) {
  size_t k = 0;
  buf[0] = 0;
  for (int i = 0; i < p->n && k + 8 < cap; i++) {
    if (!p->regions[i].info || !p->regions[i].info->has_plan) continue;
    k += (size_t)snprintf(buf + k, cap - k, "%s%s", k ? ", " : "", p->regions[i].name);
  }
  if (k >= cap) snprintf(buf + cap - 5, 5, "...");
  if (!buf[0]) snprintf(buf, cap, "none has a plan");
}

/* The cached plan for region r, fitted to this binding; false (with a note)
 * when there is none or it does not fit. */
static harp_status from_cache(harp_error *e, const rt_plans *ps, const rg_region *R, const plan_machine *m,
                            const rt_plan_opts *o, rt_plan_choice *ch, bool *got) {
  *got = false;
  rt_plan_key k = {ps->model, R->name, ps->shapeset, ps->machine};
  rt_plan_entry ent;
  bool found = false;
  harp_status st = rt_plan_cache_load(e, o ? o->cache_dir : NULL, &k, m->arch, &ent, &found, ch->note, sizeof ch->note);
  if (ch->note[0]) ch->fallback = true;
  if (st || !found) return st;
  const plan_region_info *r = &R->info->plan_info;
  plan_retarget(&ent.plan, r);
  plan_fill_from_region(&ent.plan, r);
  harp_error ve = {0};
  if (plan_for_region(r, m, o ? &o->search : NULL, &ent.plan, NULL, &ch->plan, &ve)) {
    if (ve.code == HARP_E_NO_MEMORY) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
    snprintf(ch->note, sizeof ch->note, "the cached plan (tuned at %.40s) does not fit this binding: %.200s; default used",
             ent.binding, ve.msg);
    ch->fallback = true;
    return HARP_OK;
  }
  *got = true;
  return HARP_OK;
}

harp_status rt_plans_choose(harp_error *e, const rg_partition *p, const tiny_graph *g, const tiny_symtab *syms,
                          const plan_machine *m, const rt_plan_opts *o, rt_plans *out) {
  memset(out, 0, sizeof *out);
  snprintf(out->model, sizeof out->model, "%016llx", (unsigned long long)rt_model_hash(g));
  plan_shapeset_key(syms, g, out->shapeset, sizeof out->shapeset);
  plan_binding_text(syms, g, out->binding, sizeof out->binding);
  rt_machine_id(m, out->machine, sizeof out->machine);
  out->mach = *m;
  out->choice = ut_xcalloc((size_t)p->n + 1, sizeof *out->choice);
  if (!out->choice) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  out->n = p->n;
  const plan_search_opts *search = o ? &o->search : NULL;
  int nov = o ? o->noverrides : 0;
  /* every override names a region with a plan, at most once */
  for (int k = 0; k < nov; k++) {
    const rt_plan_override *ov = &o->overrides[k];
    bool found = false;
    for (int i = 0; i < p->n && !found; i++) found = p->regions[i].info && !strcmp(p->regions[i].name, ov->region);
    for (int j = 0; j < k && found; j++)
      if (!strcmp(o->overrides[j].region, ov->region))
        return ut_fail(e, HARP_E_INVALID_ARG, ov->region, "--plan gives region '%s' two plans", ov->region);
    if (!found) {
      char names[512];
      region_list(p, names, sizeof names);
      if (ov->file)
        return ut_fail_at(e, HARP_E_INVALID_ARG, ov->file, 0, 0, "--plan names region '%.200s'; the model's regions are: %s",
                          ov->region, names);
      return ut_fail(e, HARP_E_INVALID_ARG, ov->region, "--plan names region '%.200s'; the model's regions are: %s",
                     ov->region, names);
    }
  }
  for (int i = 0; i < p->n; i++) {
    const rg_region *R = &p->regions[i];
    rt_plan_choice *ch = &out->choice[i];
    ch->region = R->name;
    ch->source = RT_PLAN_NONE;
    if (!R->info) continue;
    const plan_region_info *r = &R->info->plan_info;
    const rt_plan_override *ov = NULL;
    for (int k = 0; k < nov && !ov; k++)
      if (!strcmp(o->overrides[k].region, R->name)) ov = &o->overrides[k];
    harp_status st = HARP_OK;
    if (ov) {
      plan_src src = {ov->file, ov->text};
      if ((st = plan_for_region(r, m, search, &ov->plan, &src, &ch->plan, e))) return st;
      ch->source = ov->source == RT_PLAN_TUNING ? RT_PLAN_TUNING : RT_PLAN_OVERRIDE;
      ch->has_plan = true;
    }
    if (!ch->has_plan && !(o && o->no_cache) && R->info->has_plan) {
      bool got = false;
      if ((st = from_cache(e, out, R, m, o, ch, &got))) return st;
      if (got) ch->source = RT_PLAN_CACHED, ch->has_plan = true;
    }
    if (!ch->has_plan) {
      harp_error de = {0};
      if (plan_default(r, m, search, &ch->plan, &de) == HARP_OK) {
        ch->source = RT_PLAN_DEFAULT;
        ch->has_plan = true;
      } else if (de.code == HARP_E_NO_MEMORY) {
        return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
      } else if (!ch->note[0]) {
        snprintf(ch->note, sizeof ch->note, "no plan: %.280s", de.msg);
      }
    }
    if (ch->has_plan) {
      harp_error ce = {0};
      ch->has_cost = plan_cost_of(&ch->plan, r, m, &ch->cost, &ce) == HARP_OK;
    }
  }
  return HARP_OK;
}

harp_status rt_plans_dump_json(harp_error *e, const rt_plans *ps, char **out) {
  *out = NULL;
  json_t *arr = json_array();
  bool ok = arr != NULL;
  for (int i = 0; ok && i < ps->n; i++) {
    const rt_plan_choice *ch = &ps->choice[i];
    json_t *pj = NULL;
    if (ch->has_plan) {
      char *txt = NULL;
      harp_error pe = {0};
      if (plan_to_json(&ch->plan, &txt, &pe) == HARP_OK) pj = json_loads(txt, 0, NULL);
      free(txt);
      ok = pj != NULL;
    } else {
      pj = json_null();
    }
    json_t *r = ok ? json_object() : NULL;
    ok = r != NULL;
    if (ok) {
      json_object_set_new(r, "region", json_string(ch->region ? ch->region : ""));
      json_object_set_new(r, "source", json_string(rt_plan_source_name(ch->source)));
      if (ps->compiled) json_object_set_new(r, "applied", json_boolean(ch->applied));
      if (ch->note[0]) json_object_set_new(r, "note", json_string(ch->note));
      if (ch->has_cost) json_object_set_new(r, "time_est", json_real(ch->cost.time_est));
      json_object_set(r, "plan", pj);
      ok = json_array_append_new(arr, r) == 0;
    }
    json_decref(pj);
  }
  json_t *root = ok ? json_object() : NULL;
  if (root) {
    json_object_set_new(root, "model", json_string(ps->model));
    json_object_set_new(root, "shapeset", json_string(ps->shapeset));
    json_object_set_new(root, "binding", json_string(ps->binding));
    json_object_set_new(root, "machine", json_string(ps->machine));
    json_object_set(root, "plans", arr);
  }
  json_decref(arr);
  return ut_json_text(e, root, JSON_INDENT(2) | JSON_PRESERVE_ORDER, out);
}

/* ---- --plan ------------------------------------------------------------------------ */
static harp_status push(harp_error *e, rt_plan_override **ov, int *n, const rt_plan_override *x) {
  rt_plan_override *q = ut_xrealloc(*ov, sizeof **ov * (size_t)(*n + 1));
  if (!q) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  q[*n] = *x;
  *ov = q;
  (*n)++;
  return HARP_OK;
}

harp_status rt_plan_overrides_load(harp_error *e, const char *arg, plan_arch arch, rt_plan_override **ov, int *n,
                                 char ***keep, int *nkeep) {
  /* REGION=FILE (region names may hold '/' and '='... the first '=' splits),
   * unless the whole argument names an existing file */
  const char *eq = strchr(arg, '=');
  const char *file = arg, *region = NULL;
  size_t rlen = 0;
  if (eq && eq > arg && access(arg, F_OK) != 0) {
    region = arg;
    rlen = (size_t)(eq - arg);
    file = eq + 1;
  }
  if (!*file) return ut_fail(e, HARP_E_USAGE, NULL, "--plan expects REGION=FILE or FILE, got '%s'", arg);
  char *text = NULL;
  size_t len = 0;
  harp_status st = ut_read_file(e, file, PLAN_MAX_TEXT, &text, &len);
  if (st) return st;
  if (strlen(text) != len) {
    free(text);
    return ut_fail_at(e, HARP_E_PARSE, file, 0, 0, "plan file contains a NUL byte");
  }
  /* one block that owns the file name, the region name and the text */
  size_t fl = strlen(file), total = fl + 1 + rlen + 1 + len + 1;
  char *blk = ut_xmalloc(total);
  char **kk = blk ? ut_xrealloc(*keep, sizeof **keep * (size_t)(*nkeep + 1)) : NULL;
  if (!blk || !kk) {
    free(blk);
    free(text);
    return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  }
  *keep = kk;
  kk[(*nkeep)++] = blk;
  char *fname = blk, *rname = blk + fl + 1, *body = rname + rlen + 1;
  memcpy(fname, file, fl + 1);
  memcpy(rname, region ? region : "", rlen);
  rname[rlen] = 0;
  memcpy(body, text, len + 1);
  free(text);
  if (plan_text_is_list(body)) {
    plan_list_entry *ents = NULL;
    int ne = 0;
    if ((st = plan_list_parse(body, fname, arch, &ents, &ne, e))) return st;
    bool used = false;
    for (int i = 0; i < ne && !st; i++) {
      if (!ents[i].has_plan || (region && strcmp(ents[i].region, rname))) continue;
      /* the region name lives in the text block: point at a copy in it */
      rt_plan_override x = {NULL, ents[i].plan, fname, body, RT_PLAN_OVERRIDE};
      char *nm = ut_xmalloc(strlen(ents[i].region) + 1);
      char **k2 = nm ? ut_xrealloc(*keep, sizeof **keep * (size_t)(*nkeep + 1)) : NULL;
      if (!nm || !k2) {
        free(nm);
        st = ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
        break;
      }
      strcpy(nm, ents[i].region);
      *keep = k2;
      k2[(*nkeep)++] = nm;
      x.region = nm;
      st = push(e, ov, n, &x);
      used = true;
    }
    free(ents);
    if (!st && region && !used)
      st = ut_fail_at(e, HARP_E_INVALID_ARG, fname, 0, 0, "the plan list has no plan for region '%s'", rname);
    return st;
  }
  if (!region)
    return ut_fail_at(e, HARP_E_USAGE, fname, 0, 0,
                      "--plan FILE expects a plan list ({\"plans\": [{\"region\": ..., \"plan\": ...}]}); "
                      "for one plan write --plan REGION=FILE");
  rt_plan_override x = {rname, {0}, fname, body, RT_PLAN_OVERRIDE};
  if ((st = plan_parse(body, fname, arch, &x.plan, e))) return st;
  return push(e, ov, n, &x);
}
