/* fz_plan.c — the Schedule Plan fuzzers, one per form: the bytes are a plan
 * in the JSON of seed 000 §12.5 (or a plan list, docs/plan.md §14) or in
 * the DSL of §12.6.  What parses must print in both canonical forms and
 * parse back to an equal plan (docs/plan.md: both forms round-trip); then it
 * is validated against a GEMM + bias + ReLU region and, when valid, costed,
 * on sm80, sm90 and a fixed CPU.
 * fz_calib: the bytes are a CPU calibration file (docs/plan.md §19); what
 * parses prints and parses back to the same figures, and the calibrated
 * cost model times the search space of a GEMM and a 3x3 conv on the fixed
 * CPU with it (finite, positive estimates).
 * Needs: the plan layer, plan_test_util.h (regions, a fixed CPU).
 * Gives: fz_plan_json, fz_plan_dsl, fz_calib. */
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

/* The calibrated model over r's whole search space: finite, positive times. */
static void cost_space(const plan_region_info *r, const plan_machine *m) {
  plan_t pts[PLAN_TUNE_POINTS];
  plan_cost costs[PLAN_TUNE_POINTS];
  int n = 0;
  harp_error e = {0};
  if (plan_enumerate(r, m, NULL, pts, costs, PLAN_TUNE_POINTS, &n, &e)) return;
  for (int i = 0; i < n; i++)
    fz_check(costs[i].time_est > 0 && costs[i].time_est < 1e30, "a calibrated estimate is not a positive number");
}

int fz_calib(const uint8_t *data, size_t size) {
  char *text = fz_text(data, size);
  if (!text) return 0;
  harp_error e = {0};
  plan_calib c;
  if (plan_calib_parse(text, "fuzz.txt", NULL, &c, &e)) {
    fz_check(e.code == HARP_E_PARSE && e.msg[0], "plan_calib_parse failed without a ParseError");
    fz_check(!c.valid, "a rejected calibration is marked valid");
    free(text);
    return 0;
  }
  char *printed = plan_calib_format(&c, "cpu:fuzz");
  plan_calib back;
  fz_check(printed && !plan_calib_parse(printed, "printed", "cpu:fuzz", &back, &e) && back.nmk == c.nmk &&
               back.nwino == c.nwino,
           "a calibration does not print and parse back");
  free(printed);
  plan_machine m = fixed_cpu();
  m.calib = c;
  plan_region_info g = gemm_region(100, 200, 300), v = gemm_region(64, 56 * 56, 64 * 9);
  g.in_dtype = g.acc_dtype = g.out_dtype = TINY_FP32;
  v.in_dtype = v.acc_dtype = v.out_dtype = TINY_FP32;
  v.pattern = PLAN_PAT_CONV;
  v.conv_kh = v.conv_kw = 3, v.conv_sh = v.conv_sw = v.conv_dh = v.conv_dw = 1, v.conv_oh = v.conv_ow = 56;
  cost_space(&g, &m);
  cost_space(&v, &m);
  free(text);
  return 0;
}
