/* fz_plan.c — the Schedule Plan fuzzers, one per form: the bytes are a plan
 * in the JSON of seed 000 §12.5 (or a plan list, docs/plan.md §14) or in
 * the DSL of §12.6.  What parses must print in both canonical forms and
 * parse back to an equal plan (docs/plan.md: both forms round-trip); then it
 * is validated against a GEMM + bias + ReLU region and, when valid, costed,
 * on sm80, sm90 and a fixed CPU.
 * Needs: the plan layer, plan_test_util.h (regions, a fixed CPU).
 * Gives: fz_plan_json, fz_plan_dsl. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fz.h"
#include "harp/error.h"
#include "harp/plan.h"
#include "plan_test_util.h"

/* p printed by `print` parses back (by `parse`) to an equal plan. */
static void round_trip(const plan_t *p, harp_status (*print)(const plan_t *, char **, harp_error *),
                       harp_status (*parse)(const char *, const char *, plan_arch, plan_t *, harp_error *),
                       const char *form) {
  harp_error e = {0};
  char *text = NULL;
  if (print(p, &text, &e)) {
    fz_check(e.code == HARP_E_NO_MEMORY, form);
    return;
  }
  plan_t q;
  harp_status st = parse(text, "printed", p->arch, &q, &e);
  if (st || !plan_equal(p, &q)) fprintf(stderr, "printed (%s):\n%s\n%s\n", form, text, st ? e.msg : "not equal");
  fz_check(!st && plan_equal(p, &q), form);
  free(text);
}

/* Validate p against each region on each machine; cost what is valid. */
static void validate(const plan_t *p, const char *text) {
  plan_region_info r[2] = {gemm_bias_relu_region(100, 64, 96), gemm_region(1000, 1024, 1024)};
  plan_machine m[3];
  plan_machine_get(PLAN_ARCH_SM80, &m[0]);
  plan_machine_get(PLAN_ARCH_SM90, &m[1]);
  m[2] = fixed_cpu();
  for (int i = 0; i < 2; i++)
    for (int k = 0; k < 3; k++) {
      harp_error e = {0};
      plan_t q = *p;
      plan_fill_from_region(&q, &r[i]);
      if (plan_validate(&q, &r[i], &m[k], &(plan_src){"fuzz", text}, &e)) {
        fz_check(e.code != HARP_OK && e.msg[0], "plan_validate failed without a message");
        continue;
      }
      plan_cost c;
      harp_error ce = {0};
      if (!plan_cost_of(&q, &r[i], &m[k], &c, &ce)) fz_check(c.time_est >= 0, "a negative time estimate");
    }
}

static void one_plan(const plan_t *p, const char *text) {
  round_trip(p, plan_to_json, plan_parse_json, "a plan's JSON does not parse back to an equal plan");
  round_trip(p, plan_to_dsl, plan_parse_dsl, "a plan's DSL does not parse back to an equal plan");
  validate(p, text);
}

int fz_plan_json(const uint8_t *data, size_t size) {
  char *text = fz_text(data, size);
  if (!text) return 0;
  harp_error e = {0};
  if (plan_text_is_list(text)) {
    plan_list_entry *l = NULL;
    int n = 0;
    if (!plan_list_parse(text, "fuzz.json", PLAN_ARCH_SM80, &l, &n, &e)) {
      for (int i = 0; i < n; i++)
        if (l[i].has_plan) one_plan(&l[i].plan, text);
      free(l);
    } else {
      fz_check(e.code != HARP_OK && e.msg[0], "plan_list_parse failed without a message");
    }
  } else {
    plan_t p;
    if (!plan_parse_json(text, "fuzz.json", PLAN_ARCH_SM80, &p, &e)) one_plan(&p, text);
    else fz_check(e.code != HARP_OK && e.msg[0], "plan_parse_json failed without a message");
  }
  free(text);
  return 0;
}

int fz_plan_dsl(const uint8_t *data, size_t size) {
  char *text = fz_text(data, size);
  if (!text) return 0;
  harp_error e = {0};
  plan_t p;
  if (!plan_parse_dsl(text, "fuzz.plan", PLAN_ARCH_SM80, &p, &e)) one_plan(&p, text);
  else fz_check(e.code != HARP_OK && e.msg[0], "plan_parse_dsl failed without a message");
  free(text);
  return 0;
}
