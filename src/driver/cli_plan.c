/* cli_plan.c — `--plan` and `--dump plan` for the commands that compile or
 * describe a model (run, bench, dump, tune).
 * Needs: harp/tune.h (plan choice, plan lists), dump_region.c (regions for
 * --target).  Gives: cli_plans_load, cli_plans_free, cli_write_plan_dump,
 * cli_print_plan_notes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "harp/cpu.h"
#include "harp/region.h"
#include "harp/tune.h"

static plan_arch target_arch(const cli_opts *o) {
  int a = o->target ? plan_arch_parse(o->target) : PLAN_ARCH_CPU;
  return a < 0 ? PLAN_ARCH_CPU : (plan_arch)a;
}

harp_status cli_plans_load(harp_error *e, const cli_opts *o, cli_plans *out) {
  memset(out, 0, sizeof *out);
  for (int i = 0; i < o->nplans; i++) {
    harp_status st = rt_plan_overrides_load(e, o->plans[i], target_arch(o), &out->ov, &out->n, &out->keep, &out->nkeep);
    if (st) return st;
  }
  return HARP_OK;
}

void cli_plans_free(cli_plans *p) {
  for (int i = 0; i < p->nkeep; i++) free(p->keep[i]);
  free(p->keep);
  free(p->ov);
  memset(p, 0, sizeof *p);
}

harp_status cli_write_plan_dump(harp_error *e, const cli_opts *o, const cli_model *m, const cli_plans *pl,
                              const rt_plans *compiled) {
  if (!cli_wants_dump(o, "plan")) return HARP_OK;
  rt_plans mine = {0};
  rg_partition *p = NULL;
  harp_status st = HARP_OK;
  const rt_plans *ps = compiled;
  if (!ps) {
    st = cli_form_regions(e, o, m, &p);
    if (!st) {
      plan_arch arch = target_arch(o);
      rt_plan_opts po = {.overrides = pl ? pl->ov : NULL, .noverrides = pl ? pl->n : 0};
      po.search.algo_mask = arch == PLAN_ARCH_CPU ? rt_cpu_algo_mask() : 0;
      st = rt_plans_choose(e, p, m->g, &m->syms, &p->formed->machine, &po, &mine);
      ps = &mine;
    }
  }
  char *text = NULL;
  if (!st) st = rt_plans_dump_json(e, ps, &text);
  if (!st) st = cli_write_text(e, o->dump_dir, "plan.json", text);
  free(text);
  rt_plans_free(&mine);
  rg_partition_free(p);
  return st;
}

void cli_print_plan_notes(const rt_plans *ps) {
  for (int i = 0; ps && i < ps->n; i++)
    if (ps->choice[i].fallback) fprintf(stderr, "harp: note: region %s: %s\n", ps->choice[i].region, ps->choice[i].note);
}
