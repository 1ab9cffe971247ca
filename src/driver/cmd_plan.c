/* cmd_plan.c — `harp plan FILE [--to json|dsl] [-o OUT]`: read a Schedule
 * Plan in either form (JSON of seed 000 §12.5, DSL of §12.6), check it, and
 * print it in the other form or the one --to names.  Plan lists too. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "harp/plan.h"
#include "util/util.h"

static const char plan_help[] =
    "usage: harp plan FILE [--to json|dsl] [-o OUT]\n\n"
    "Read a Schedule Plan, JSON (seed 000 §12.5) or DSL (§12.6), check it and\n"
    "print it in canonical form: in the other form by default, or the one --to\n"
    "names.  -o writes OUT (atomically) instead of standard output.  Fields the\n"
    "plan leaves out get the defaults of docs/plan.md (arch sm80).\n"
    "A plan list ({\"plans\": [...]}, what --dump plan writes) is checked whole and\n"
    "printed as one DSL block per region, or with --to json as a plan list.\n";

/* A plan list (what --dump plan writes): every plan checked, then each in
 * DSL under a "# region NAME" line, or the list as {"plans": [...]} JSON. */
static harp_status convert_list(harp_error *e, const char *text, const char *file, const char *to, char **out) {
  plan_list_entry *ents = NULL;
  int n = 0;
  harp_status st = plan_list_parse(text, file, PLAN_ARCH_SM80, &ents, &n, e);
  if (st) return st;
  const char **names = calloc((size_t)n + 1, sizeof *names);
  plan_t *plans = calloc((size_t)n + 1, sizeof *plans);
  ut_str s;
  ut_str_init(&s);
  int k = 0;
  if (!names || !plans) st = ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  for (int i = 0; i < n && !st; i++) {
    if (!ents[i].has_plan) continue;
    names[k] = ents[i].region;
    plans[k++] = ents[i].plan;
  }
  if (!st && to && !strcmp(to, "json")) {
    st = plan_dump_json(names, plans, k, out, e);
  } else {
    for (int i = 0; i < k && !st; i++) {
      char *dsl = NULL;
      if (!(st = plan_to_dsl(&plans[i], &dsl, e))) ut_str_printf(&s, "%s# region %s\n%s", i ? "\n" : "", names[i], dsl);
      free(dsl);
    }
    if (!st) *out = ut_str_take(&s);
    if (!st && !*out) st = ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  }
  ut_str_free(&s);
  free(names);
  free(plans);
  free(ents);
  return st;
}

int cmd_plan(int argc, char **argv) {
  const char *file = NULL, *to = NULL, *out = NULL;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      fputs(plan_help, stdout);
      return 0;
    }
    if (!strcmp(a, "--to") || !strcmp(a, "-o") || !strcmp(a, "--out")) {
      if (i + 1 >= argc) return cli_usage_error("plan", "option %s needs a value", a);
      if (!strcmp(a, "--to"))
        to = argv[++i];
      else
        out = argv[++i];
    } else if (!strncmp(a, "--to=", 5)) {
      to = a + 5;
    } else if (a[0] == '-' && a[1]) {
      return cli_usage_error("plan", "unknown option '%s'", a);
    } else if (file) {
      return cli_usage_error("plan", "unexpected argument '%s' (FILE is '%s')", a, file);
    } else {
      file = a;
    }
  }
  if (!file) return cli_usage_error("plan", "usage: harp plan FILE [--to json|dsl] [-o OUT]");
  if (to && strcmp(to, "json") && strcmp(to, "dsl")) return cli_usage_error("plan", "--to takes json or dsl, not '%s'", to);
  harp_error e = {0};
  char *text = NULL, *result = NULL;
  size_t len = 0;
  int rc = 0;
  if (ut_read_file(&e, file, PLAN_MAX_TEXT, &text, &len) ||
      (plan_text_is_list(text) ? convert_list(&e, text, file, to, &result) : plan_convert(text, file, to, &result, &e))) {
    rc = cli_report(&e);
  } else if (out) {
    if (ut_write_file_atomic(&e, out, result, strlen(result))) rc = cli_report(&e);
  } else {
    fputs(result, stdout);
  }
  free(text);
  free(result);
  return rc;
}
