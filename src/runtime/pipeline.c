/* pipeline.c — the compile object (harp/pipeline.h): the stage table,
 * the stage runner (order, until, timing, the after-stage hook), the
 * stages every target shares, and variants.
 * Needs: the analysis layers (IndexBook, Poly-View, regions, Function,
 * plans).  Gives: rt_compile_*, rt_stage_name, rt_stage_dump, rt_stage_run,
 * the shared stages (rt_stage_normalize, ..., rt_choose_plans). */
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
} stages[RT_NSTAGES] = {
    [RT_STAGE_LOAD] = {"load", "frontend"},      [RT_STAGE_NORMALIZE] = {"normalize", "tiny"},
    [RT_STAGE_INDEXBOOK] = {"indexbook", "indexbook"}, [RT_STAGE_POLY_VIEW] = {"poly_view", "poly_view"},
    [RT_STAGE_REGIONS] = {"regions", "region"},  [RT_STAGE_FUNCTION] = {"function", "function"},
    [RT_STAGE_PLANS] = {"plans", "plan"},        [RT_STAGE_KERNELS] = {"kernels", NULL},
    [RT_STAGE_CODE] = {"code", NULL},            [RT_STAGE_BUILD] = {"build", NULL},
};

const char *rt_stage_name(rt_stage s) { return s >= 0 && s < RT_NSTAGES ? stages[s].name : "?"; }

const char *rt_stage_dump(rt_stage s, const rt_target *t) {
  if (s == RT_STAGE_KERNELS) return t ? t->kernels_dump : NULL;
  if (s == RT_STAGE_CODE) return t ? t->code_dump : NULL;
  return s >= 0 && s < RT_NSTAGES ? stages[s].dump : NULL;
}

/* ---- running stages -------------------------------------------------------------- */
void rt_stage_run(rt_compile *c, rt_stage s, rt_stage_fn fn) {
  if (c->status || c->stopped) return;
  if (c->opts.until && s > c->opts.until) {
    c->stopped = true;
    return;
  }
  if (s == RT_STAGE_NORMALIZE && !c->opts.normalize) return; /* given prepared */
  if (c->base && s < RT_STAGE_PLANS) return;                  /* a variant: borrowed */
  double t0 = ut_now_ms();
  harp_status st = fn(c);
  c->ms[s] += ut_now_ms() - t0;
  if (!st) {
    c->ran[s] = true;
    if (c->opts.after_stage) st = c->opts.after_stage(c->opts.hook_ctx, c->e, c, s);
  }
  c->status = st;
}

static rt_compile *compile_new(harp_error *e, const rt_target *t, const rt_compile_opts *o) {
  rt_compile *c = ut_xcalloc(1, sizeof *c);
  if (!c || !(c->arena = ut_arena_new())) {
    free(c);
    ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
    return NULL;
  }
  c->target = t;
  c->e = e;
  if (o) c->opts = *o;
  c->knobs = *rt_knobs_or_default(o ? o->knobs : NULL);
  c->opts.knobs = &c->knobs;
  return c;
}

/* Run the target's driver; on failure free c. */
static harp_status drive(rt_compile *c, rt_compile **out) {
  c->target->drive(c);
  harp_status st = c->status;
  if (st) {
    rt_compile_free(c);
    return st;
  }
  *out = c;
  return HARP_OK;
}

harp_status rt_compile_run(harp_error *e, const rt_target *t, tiny_graph *g, const tiny_symtab *syms,
                         const rt_compile_opts *o, rt_compile **out) {
  *out = NULL;
  if (!t) return ut_fail(e, HARP_E_USAGE, NULL, "no target");
  rt_compile *c = compile_new(e, t, o);
  if (!c) return e->code;
  c->g = g;
  c->syms = syms;
  return drive(c, out);
}

harp_status rt_compile_variant(harp_error *e, const rt_compile *base, const rt_compile_opts *o, rt_compile **out) {
  *out = NULL;
  if (!base->part || !base->f || !base->pv)
    return ut_fail(e, HARP_E_INVALID_ARG, NULL, "a variant needs a compile that kept its regions and analysis");
  rt_compile *c = compile_new(e, base->target, o);
  if (!c) return e->code;
  c->base = base;
  c->g = base->g, c->syms = base->syms, c->machine = base->machine;
  c->ib = base->ib, c->pv = base->pv, c->part = base->part, c->f = base->f;
  c->arch = base->arch, c->math = base->math, c->split_attention = base->split_attention;
  for (int s = 0; s < RT_STAGE_PLANS; s++) c->ran[s] = base->ran[s];
  return drive(c, out);
}

void rt_compile_free(rt_compile *c) {
  if (!c) return;
  if (c->target && c->target->release) c->target->release(c);
  rt_plans_free(&c->plans);
  free(c->source);
  free(c->so_path);
  ut_arena_free(c->arena);
  if (!c->base) {
    fn_free(c->f);
    rg_partition_free(c->part); /* the analysis is the compile's, not the partition's */
    poly_free(c->pv);
    ib_free(c->ib);
  }
  free(c);
}

void rt_compile_drop_analysis(rt_compile *c) {
  if (c->opts.keep_analysis || c->base) return;
  if (c->part) rg_formed_drop_analysis(c->part->formed);
  poly_free(c->pv);
  ib_free(c->ib);
  c->pv = NULL;
  c->ib = NULL;
  ut_release_free_memory();
}

void rt_compile_times(const rt_compile *c, char *buf, size_t cap) {
  size_t k = 0;
  buf[0] = 0;
  for (int s = 0; s < RT_NSTAGES && k < cap; s++) {
    if (!c->ran[s]) continue;
    k += (size_t)snprintf(buf + k, cap - k, "%s%s %.1f ms", k ? ", " : "", rt_stage_name((rt_stage)s), c->ms[s]);
    if (k < cap && s == RT_STAGE_CODE && c->source_bytes)
      k += (size_t)snprintf(buf + k, cap - k, " (%zu KiB of C, %d kernels)", (c->source_bytes + 1023) / 1024, c->source_kernels);
    if (k < cap && s == RT_STAGE_BUILD && c->so_path) k += (size_t)snprintf(buf + k, cap - k, c->cache_hit ? " (cached)" : " (cc)");
  }
}

/* ---- the stages every target shares ------------------------------------------------ */
harp_status rt_stage_normalize(rt_compile *c) { return tiny_prepare(c->e, c->g, c->syms, false); }

/* A compile that goes on to regions needs every size bound: said before
 * the analysis, which would otherwise fail on the first unbound use. */
static harp_status sizes_bound(rt_compile *c) {
  if (c->opts.until && c->opts.until < RT_STAGE_REGIONS) return HARP_OK;
  for (int i = 0; i < c->g->n; i++)
    if (!tiny_shape_known(&c->g->nodes[i].shape))
      return ut_fail(c->e, HARP_E_UNBOUND_SYMBOL, c->g->nodes[i].id, "region formation needs every size bound (--sym)");
  return HARP_OK;
}

harp_status rt_stage_indexbook(rt_compile *c) {
  if (sizes_bound(c) || ib_build(c->e, c->g, c->syms, NULL, &c->ib)) return c->e->code;
  return ib_validate(c->e, c->ib);
}

harp_status rt_stage_poly_view(rt_compile *c) {
  poly_options po = {.no_reuse = c->knobs.no_poly_reuse};
  return poly_build(c->e, c->g, c->ib, &po, &c->pv);
}

void rt_stages_analysis(rt_compile *c) {
  rt_stage_run(c, RT_STAGE_NORMALIZE, rt_stage_normalize);
  rt_stage_run(c, RT_STAGE_INDEXBOOK, rt_stage_indexbook);
  rt_stage_run(c, RT_STAGE_POLY_VIEW, rt_stage_poly_view);
}

/* What the stages after regions made, freed: regions run again replace it all. */
static void drop_after_regions(rt_compile *c) {
  if (c->target->release) c->target->release(c);
  rt_plans_free(&c->plans);
  free(c->source);
  c->source = NULL;
  fn_free(c->f);
  c->f = NULL;
  rg_partition_free(c->part);
  c->part = NULL;
}

harp_status rt_form_regions(rt_compile *c, rg_options *ro) {
  drop_after_regions(c);
  ro->machine = &c->machine;
  ro->no_fusion = c->knobs.no_fusion; /* HARP_NO_FUSION: benchmarks compare fused with unfused */
  ro->ib = c->ib;
  ro->pv = c->pv;
  if (rg_form(c->e, c->g, c->syms, ro, &c->part)) return c->e->code;
  return rg_partition_check(c->e, c->part);
}

harp_status rt_build_function(rt_compile *c, const fn_options *fo) {
  fn_free(c->f);
  c->f = NULL;
  return fn_build_ex(c->e, c->part, "main", fo, &c->f);
}

/* Each region of ps takes the plan `from` chose for the same region (a
 * replayed partition), unchecked against this binding's sizes: the object
 * runs from's code; this compile only shows whether it prints the same. */
static void take_plans(rt_plans *ps, const rt_plans *from) {
  for (int i = 0; i < ps->n && i < from->n; i++) {
    const rt_plan_choice *f = &from->choice[i];
    rt_plan_choice *ch = &ps->choice[i];
    if (!f->has_plan || strcmp(f->region, ch->region)) continue;
    ch->plan = f->plan, ch->has_plan = true, ch->source = f->source;
    ch->has_cost = f->has_cost, ch->cost = f->cost;
  }
}

harp_status rt_choose_plans(rt_compile *c, unsigned algo_mask, unsigned explicit_mask, bool no_cache) {
  rt_plans_free(&c->plans);
  rt_plan_opts po = {.overrides = c->opts.plan_overrides,
                     .noverrides = c->opts.nplan_overrides,
                     .no_cache = no_cache,
                     .cache_dir = c->knobs.cache_dir,
                     .search = {algo_mask, c->target ? c->target->name : NULL, c->target == &rt_target_cuda, explicit_mask}};
  harp_status st = rt_plans_choose(c->e, c->part, c->g, c->syms, &c->part->formed->machine, &po, &c->plans);
  if (!st && c->opts.replay_plans) take_plans(&c->plans, c->opts.replay_plans);
  return st;
}

harp_status rt_stage_singleton_regions(rt_compile *c) {
  drop_after_regions(c);
  return rg_partition_singletons(c->e, c->g, &c->part);
}
