/* pipeline.c — the compile object (harp/pipeline.h): the stage table,
 * the stage runner (order, until, timing, the after-stage hook), the
 * stages every target shares, the interpreter's target, and variants.
 * Needs: the analysis layers (IndexBook, Poly-View, regions, Function,
 * plans).  Gives: hp_compile_*, hp_stage_*, hp_target_find. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harp/pipeline.h"
#include "harp/poly.h"
#include "harp/region.h"
#include "index/indexbook.h"
#include "util/util.h"

static const struct {
  const char *name, *dump;
} stages[HP_NSTAGES] = {
    [HP_STAGE_LOAD] = {"load", "frontend"},      [HP_STAGE_NORMALIZE] = {"normalize", "tiny"},
    [HP_STAGE_INDEXBOOK] = {"indexbook", "indexbook"}, [HP_STAGE_POLY_VIEW] = {"poly_view", "poly_view"},
    [HP_STAGE_REGIONS] = {"regions", "region"},  [HP_STAGE_FUNCTION] = {"function", "function"},
    [HP_STAGE_PLANS] = {"plans", "plan"},        [HP_STAGE_KERNELS] = {"kernels", NULL},
    [HP_STAGE_CODE] = {"code", NULL},            [HP_STAGE_BUILD] = {"build", NULL},
};

const char *hp_stage_name(hp_stage s) { return s >= 0 && s < HP_NSTAGES ? stages[s].name : "?"; }

const char *hp_stage_dump(hp_stage s, const hp_target *t) {
  if (s == HP_STAGE_KERNELS) return t ? t->kernels_dump : NULL;
  if (s == HP_STAGE_CODE) return t ? t->code_dump : NULL;
  return s >= 0 && s < HP_NSTAGES ? stages[s].dump : NULL;
}

int hp_stage_of_dump(const char *dump) {
  static const hp_target *const all[] = {&hp_target_interp, &hp_target_cpu, &hp_target_cuda};
  for (int s = 0; dump && s < HP_NSTAGES; s++)
    for (size_t t = 0; t < sizeof all / sizeof all[0]; t++) {
      const char *d = hp_stage_dump((hp_stage)s, all[t]);
      if (d && !strcmp(d, dump)) return s;
    }
  return -1;
}

const hp_target *hp_target_find(const char *name) {
  static const hp_target *const all[] = {&hp_target_interp, &hp_target_cpu, &hp_target_cuda};
  for (size_t t = 0; name && t < sizeof all / sizeof all[0]; t++)
    if (!strcmp(all[t]->name, name)) return all[t];
  return NULL;
}

/* ---- running stages -------------------------------------------------------------- */
void hp_stage_run(hp_compile *c, hp_stage s, hp_stage_fn fn) {
  if (c->status || c->stopped) return;
  if (c->opts.until && s > c->opts.until) {
    c->stopped = true;
    return;
  }
  if (s == HP_STAGE_NORMALIZE && !c->opts.normalize) return; /* given prepared */
  if (c->base && s < HP_STAGE_PLANS) return;                  /* a variant: borrowed */
  double t0 = hp_now_ms();
  hp_status st = fn(c);
  c->ms[s] += hp_now_ms() - t0;
  if (!st) {
    c->ran[s] = true;
    if (c->opts.after_stage) st = c->opts.after_stage(c->opts.hook_ctx, c->e, c, s);
  }
  c->status = st;
}

static hp_compile *compile_new(hp_error *e, const hp_target *t, const hp_compile_opts *o) {
  hp_compile *c = hp_xcalloc(1, sizeof *c);
  if (!c || !(c->arena = hp_arena_new())) {
    free(c);
    hp_fail(e, HP_E_NO_MEMORY, NULL, "out of memory");
    return NULL;
  }
  c->target = t;
  c->e = e;
  if (o) c->opts = *o;
  c->knobs = *hp_knobs_or_default(o ? o->knobs : NULL);
  c->opts.knobs = &c->knobs;
  return c;
}

/* Run the target's driver; on failure free c. */
static hp_status drive(hp_compile *c, hp_compile **out) {
  c->target->drive(c);
  hp_status st = c->status;
  if (st) {
    hp_compile_free(c);
    return st;
  }
  *out = c;
  return HP_OK;
}

hp_status hp_compile_run(hp_error *e, const hp_target *t, tiny_graph *g, const tiny_symtab *syms,
                         const hp_compile_opts *o, hp_compile **out) {
  *out = NULL;
  if (!t) return hp_fail(e, HP_E_USAGE, NULL, "no target");
  hp_compile *c = compile_new(e, t, o);
  if (!c) return e->code;
  c->g = g;
  c->syms = syms;
  return drive(c, out);
}

hp_status hp_compile_variant(hp_error *e, const hp_compile *base, const hp_compile_opts *o, hp_compile **out) {
  *out = NULL;
  if (!base->part || !base->f || !base->pv)
    return hp_fail(e, HP_E_INVALID_ARG, NULL, "a variant needs a compile that kept its regions and analysis");
  hp_compile *c = compile_new(e, base->target, o);
  if (!c) return e->code;
  c->base = base;
  c->g = base->g, c->syms = base->syms, c->machine = base->machine;
  c->ib = base->ib, c->pv = base->pv, c->part = base->part, c->f = base->f;
  c->arch = base->arch, c->math = base->math, c->split_attention = base->split_attention;
  for (int s = 0; s < HP_STAGE_PLANS; s++) c->ran[s] = base->ran[s];
  return drive(c, out);
}

void hp_compile_free(hp_compile *c) {
  if (!c) return;
  if (c->target && c->target->release) c->target->release(c);
  hp_plans_free(&c->plans);
  free(c->source);
  free(c->so_path);
  hp_arena_free(c->arena);
  if (!c->base) {
    fn_free(c->f);
    rg_partition_free(c->part); /* the analysis is the compile's, not the partition's */
    poly_free(c->pv);
    ib_free(c->ib);
  }
  free(c);
}

void hp_compile_drop_analysis(hp_compile *c) {
  if (c->opts.keep_analysis || c->base) return;
  if (c->part) rg_formed_drop_analysis(c->part->formed);
  poly_free(c->pv);
  ib_free(c->ib);
  c->pv = NULL;
  c->ib = NULL;
  hp_release_free_memory();
}

void hp_compile_times(const hp_compile *c, char *buf, size_t cap) {
  size_t k = 0;
  buf[0] = 0;
  for (int s = 0; s < HP_NSTAGES && k < cap; s++)
    if (c->ran[s])
      k += (size_t)snprintf(buf + k, cap - k, "%s%s %.1f ms", k ? ", " : "", hp_stage_name((hp_stage)s), c->ms[s]);
}

/* ---- the stages every target shares ------------------------------------------------ */
hp_status hp_stage_normalize(hp_compile *c) { return tiny_prepare(c->e, c->g, c->syms, false); }

/* A compile that goes on to regions needs every size bound: said before
 * the analysis, which would otherwise fail on the first unbound use. */
static hp_status sizes_bound(hp_compile *c) {
  if (c->opts.until && c->opts.until < HP_STAGE_REGIONS) return HP_OK;
  for (int i = 0; i < c->g->n; i++)
    if (!tiny_shape_known(&c->g->nodes[i].shape))
      return hp_fail(c->e, HP_E_UNBOUND_SYMBOL, c->g->nodes[i].id, "region formation needs every size bound (--sym)");
  return HP_OK;
}

hp_status hp_stage_indexbook(hp_compile *c) {
  if (sizes_bound(c) || ib_build(c->e, c->g, c->syms, NULL, &c->ib)) return c->e->code;
  return ib_validate(c->e, c->ib);
}

hp_status hp_stage_poly_view(hp_compile *c) { return poly_build(c->e, c->g, c->ib, NULL, &c->pv); }

/* What the stages after regions made, freed: regions run again replace it all. */
static void drop_after_regions(hp_compile *c) {
  if (c->target->release) c->target->release(c);
  hp_plans_free(&c->plans);
  free(c->source);
  c->source = NULL;
  fn_free(c->f);
  c->f = NULL;
  rg_partition_free(c->part);
  c->part = NULL;
}

hp_status hp_form_regions(hp_compile *c, rg_options *ro) {
  drop_after_regions(c);
  ro->machine = &c->machine;
  ro->no_fusion = c->knobs.no_fusion; /* HARP_NO_FUSION: benchmarks compare fused with unfused */
  ro->ib = c->ib;
  ro->pv = c->pv;
  if (rg_form(c->e, c->g, c->syms, ro, &c->part)) return c->e->code;
  return rg_partition_check(c->e, c->part);
}

hp_status hp_build_function(hp_compile *c, const fn_options *fo) {
  fn_free(c->f);
  c->f = NULL;
  return fn_build_ex(c->e, c->part, "main", fo, &c->f);
}

hp_status hp_choose_plans(hp_compile *c, unsigned algo_mask, bool no_cache) {
  hp_plans_free(&c->plans);
  hp_plan_opts po = {.overrides = c->opts.plan_overrides,
                     .noverrides = c->opts.nplan_overrides,
                     .no_cache = no_cache,
                     .cache_dir = c->knobs.cache_dir,
                     .search = {algo_mask}};
  return hp_plans_choose(c->e, c->part, c->g, c->syms, &c->part->formed->machine, &po, &c->plans);
}

/* ---- the interpreter: one region per node, a layout for harp.h ------------------------ */
static hp_status interp_regions(hp_compile *c) {
  drop_after_regions(c);
  return rg_partition_singletons(c->e, c->g, &c->part);
}

static hp_status interp_function(hp_compile *c) {
  fn_free(c->f);
  c->f = NULL;
  return fn_build(c->e, c->part, "main", &c->f);
}

static hp_status interp_drive(hp_compile *c) {
  hp_stage_run(c, HP_STAGE_NORMALIZE, hp_stage_normalize);
  hp_stage_run(c, HP_STAGE_REGIONS, interp_regions);
  hp_stage_run(c, HP_STAGE_FUNCTION, interp_function);
  return c->status;
}

const hp_target hp_target_interp = {"interp", NULL, NULL, HP_STAGE_REGIONS, interp_drive, NULL};
