/* contract_splitk_c.c — the region's Schedule Plan's split-K (algo_choice
 * matmul splitk_reduce, splitk N) as the CPU templates' tune.splitk: the
 * skinny GEMM's (cgen_skinny.c) and the implicit-GEMM conv's (cgen_splitk.c).
 * Needs: contract_c_int.h (plan_use, the notes), the plan's cost model
 * (plan_splitk_factor), cgen.h (cgen_gemm_splitk_ok, cgen_conv_splitk_ok).
 * Gives: cc_plan_splitk, cc_conv_plan_splitk, cc_conv1x1_plan_splitk. */
#include <stdio.h>
#include <string.h>

#include "contract_c_int.h"
#include "harp/region.h"

harp_status cc_plan_splitk(rc_ctx *c, int r, plan_use *pu, int *splitk, cc_splitk_ok_fn ok, const void *spec) {
  rt_plan_choice *ch = pu->ch;
  if (!ch || !plan_algo_is_splitk(ch->plan.algo[PLAN_KEY_MATMUL])) return HARP_OK;
  const plan_region_info *ri = &c->f->part->regions[c->f->kernels[r].region].info->plan_info;
  int S = ch->plan.splitk;
  if (!S && c->f->part->formed) {
    const plan_machine *m = &c->f->part->formed->machine;
    plan_resources res;
    plan_resources_of(&ch->plan, m, ri, &res);
    S = plan_splitk_factor(&ch->plan, ri, m, &res);
  }
  *splitk = S > 1 ? S : 0;
  const char *why = "?";
  if (ok(spec, &why)) {
    size_t n = strlen(pu->desc);
    snprintf(pu->desc + n, sizeof pu->desc - n, " splitk %d", S > 1 ? S : 1);
    return HARP_OK;
  }
  *splitk = 0;
  if (ch->source == RT_PLAN_DEFAULT) {
    char msg[200];
    snprintf(msg, sizeof msg, "%s: %s, so implicit_gemm", plan_algo_name(ch->plan.algo[PLAN_KEY_MATMUL]), why);
    cc_note_add(ch, msg);
    ch->plan.algo[PLAN_KEY_MATMUL] = PLAN_ALGO_IMPLICIT_GEMM;
    ch->plan.splitk = 0;
    return HARP_OK;
  }
  return ut_fail(c->e, HARP_E_UNSUPPORTED, NULL, "region '%s': the plan's algo_choice matmul %s%s cannot run on the CPU: %s",
                 ch->region ? ch->region : "?", plan_algo_name(ch->plan.algo[PLAN_KEY_MATMUL]),
                 ch->plan.splitk ? " with that splitk" : "", why);
}

/* cgen_conv_splitk_ok behind cc_splitk_ok_fn. */
static bool conv_splitk_ok(const void *spec, const char **why) { return cgen_conv_splitk_ok(spec, why); }

harp_status cc_conv_plan_splitk(rc_ctx *c, int r, plan_use *pu, cgen_conv_spec *s) {
  if (!pu->ch || !plan_algo_is_splitk(pu->ch->plan.algo[PLAN_KEY_MATMUL])) return HARP_OK;
  if (cc_plan_splitk(c, r, pu, &s->tune.splitk, conv_splitk_ok, s)) return c->e->code;
  if (s->tune.splitk > 1) {
    char msg[160];
    snprintf(msg, sizeof msg, "conv split-K: the implicit GEMM, K in %d slices of whole KC blocks, partials summed in"
             " slice order", s->tune.splitk);
    cc_note_add(pu->ch, msg);
  }
  return HARP_OK;
}

bool cc_conv1x1_plan_splitk(rc_ctx *c, int r, plan_use *pu, cgen_conv_spec *s) {
  if (!pu->ch || !plan_algo_is_splitk(pu->ch->plan.algo[PLAN_KEY_MATMUL])) return false;
  harp_error keep = *c->e;
  if (cc_conv_plan_splitk(c, r, pu, s) == HARP_OK && s->tune.splitk > 1) return true;
  *c->e = keep; /* the GEMM's own split-K decides (cc_plan_splitk) */
  s->tune.splitk = 0;
  return false;
}
