/* cli_plan.c — `--plan` for the commands that compile or describe a model
 * (run, bench, dump, tune); `--dump plan` is the plans stage's
 * (cli_stages.c).
 * Needs: harp/tune.h (plan lists).  Gives: cli_plans_load, cli_plans_free,
 * cli_print_plan_notes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
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

void cli_print_plan_notes(const rt_plans *ps) {
  for (int i = 0; ps && i < ps->n; i++)
    if (ps->choice[i].fallback) fprintf(stderr, "harp: note: region %s: %s\n", ps->choice[i].region, ps->choice[i].note);
}
