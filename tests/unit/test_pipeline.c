/* test_pipeline.c — the compile object (harp/pipeline.h): each target runs
 * its stages in order and stops after opts.until; the hook sees every
 * stage and an error from it stops the compile there, cleanly (the
 * suite's ASan run checks nothing leaks); the normalize stage prepares a
 * raw graph; a variant borrows its base's regions and Function and makes
 * the same C; the stage and target tables. */
#include "testutil.h"

#include "harp/cpu.h"
#include "harp/frontend.h"
#include "harp/pipeline.h"
#include "harp/region.h"
#include "util/util.h"

#define MODEL "tests/models/gpu/transformer_block_fp16.harp"

static char *src_path(const char *rel) {
  static char path[1024];
  const char *src = getenv("HARP_SOURCE_DIR");
  snprintf(path, sizeof path, "%s/%s", src ? src : HARP_SOURCE_DIR, rel);
  return path;
}

typedef struct model {
  tiny_graph *g;
  tiny_symtab syms;
} model;

/* MODEL lowered (prepared unless raw). */
static void load(model *m, bool raw) {
  harp_error e = {0};
  hg_program *p = NULL;
  tiny_symtab_init(&m->syms);
  assert_ok(&e, hg_harp_load_file(&e, src_path(MODEL), &p));
  assert_ok(&e, hg_lower(&e, p, &m->g, &m->syms));
  hg_program_free(p);
  if (!raw) assert_ok(&e, tiny_prepare(&e, m->g, &m->syms, false));
}

static void unload(model *m) {
  tiny_graph_free(m->g);
  tiny_symtab_free(&m->syms);
}

/* The hook's record: stages seen in order; fail_at: the call that fails (-1: none). */
typedef struct record {
  int n, fail_at;
  rt_stage seen[32];
} record;

static harp_status hook(void *ctx, harp_error *e, const rt_compile *c, rt_stage s) {
  record *r = ctx;
  assert_true(c->ran[s]); /* the stage ran before the hook */
  if (r->n < 32) r->seen[r->n] = s;
  if (r->n++ == r->fail_at) return ut_fail(e, HARP_E_INTERNAL, NULL, "injected at stage %s", rt_stage_name(s));
  return HARP_OK;
}

static const rt_stage cpu_stages[] = {RT_STAGE_INDEXBOOK, RT_STAGE_POLY_VIEW, RT_STAGE_REGIONS, RT_STAGE_FUNCTION,
                                      RT_STAGE_PLANS,     RT_STAGE_CODE,      RT_STAGE_BUILD};

/* The CPU target: its stages in order, each timed, every result there. */
static void test_cpu_stages(void **state) {
  (void)state;
  model m;
  load(&m, false);
  harp_error e = {0};
  record r = {.fail_at = -1};
  rt_compile_opts o = {.after_stage = hook, .hook_ctx = &r, .keep_source = true};
  rt_compile *c = NULL;
  assert_ok(&e, rt_compile_run(&e, &rt_target_cpu, m.g, &m.syms, &o, &c));
  assert_int_equal(r.n, 7);
  for (int i = 0; i < 7; i++) assert_int_equal(r.seen[i], cpu_stages[i]);
  assert_false(c->ran[RT_STAGE_NORMALIZE] || c->ran[RT_STAGE_KERNELS] || c->ran[RT_STAGE_LOAD]);
  for (int i = 0; i < 7; i++) assert_true(c->ran[cpu_stages[i]] && c->ms[cpu_stages[i]] >= 0);
  assert_non_null(c->part);
  assert_non_null(c->f);
  assert_int_equal(c->plans.n, c->part->n);
  assert_non_null(c->source);
  assert_non_null(c->so_path);
  assert_null(c->pv); /* given back after the code */
  assert_null(c->ib);
  assert_int_equal(c->f->nkernels, 15); /* the fp16 CASTs of the layernorms' weights are regions of their own */
  char times[512];
  rt_compile_times(c, times, sizeof times);
  assert_non_null(strstr(times, "regions "));
  assert_non_null(strstr(times, "build "));
  rt_compile_free(c);
  unload(&m);
}

/* until: the stages after it do not run; CUDA: kernels and code, no NVRTC. */
static void test_until(void **state) {
  (void)state;
  model m;
  load(&m, false);
  harp_error e = {0};
  rt_compile_opts o = {.until = RT_STAGE_REGIONS};
  rt_compile *c = NULL;
  assert_ok(&e, rt_compile_run(&e, &rt_target_cpu, m.g, &m.syms, &o, &c));
  assert_true(c->ran[RT_STAGE_REGIONS]);
  assert_false(c->ran[RT_STAGE_FUNCTION]);
  assert_null(c->f);
  assert_non_null(c->pv); /* not dropped: no code ran */
  rt_compile_free(c);
  record r = {.fail_at = -1};
  rt_compile_opts g = {.arch = "sm90", .until = RT_STAGE_CODE, .after_stage = hook, .hook_ctx = &r};
  assert_ok(&e, rt_compile_run(&e, &rt_target_cuda, m.g, &m.syms, &g, &c));
  assert_true(c->ran[RT_STAGE_KERNELS] && c->ran[RT_STAGE_CODE] && !c->ran[RT_STAGE_BUILD]);
  assert_non_null(c->tu);
  assert_non_null(strstr(c->source, "__global__"));
  assert_int_equal(r.seen[r.n - 1], RT_STAGE_CODE);
  assert_int_equal(r.seen[r.n - 2], RT_STAGE_KERNELS);
  rt_compile_free(c);
  g.arch = "sm75";
  assert_int_equal(rt_compile_run(&e, &rt_target_cuda, m.g, &m.syms, &g, &c), HARP_E_USAGE);
  assert_null(c);
  unload(&m);
}

/* An error at each stage (from the hook) stops the compile there: that
 * error, no compile, no later stage; then a whole compile still works. */
static void test_fault_each_stage(void **state) {
  (void)state;
  model m;
  load(&m, false);
  for (int k = 0; k < 7; k++) {
    harp_error e = {0};
    record r = {.fail_at = k};
    rt_compile_opts o = {.after_stage = hook, .hook_ctx = &r};
    rt_compile *c = (rt_compile *)&r; /* must come back NULL */
    assert_int_equal(rt_compile_run(&e, &rt_target_cpu, m.g, &m.syms, &o, &c), HARP_E_INTERNAL);
    assert_null(c);
    assert_int_equal(r.n, k + 1);
    assert_non_null(strstr(e.msg, rt_stage_name(cpu_stages[k])));
  }
  harp_error e = {0};
  record r = {.fail_at = 5}; /* CUDA: after kernels (indexbook, poly_view, regions, function, plans, kernels) */
  rt_compile_opts o = {.after_stage = hook, .hook_ctx = &r};
  rt_compile *c = NULL;
  assert_int_equal(rt_compile_run(&e, &rt_target_cuda, m.g, &m.syms, &o, &c), HARP_E_INTERNAL);
  assert_null(c);
  assert_int_equal(r.seen[5], RT_STAGE_KERNELS);
  unload(&m);
}

/* normalize: a graph not yet prepared is prepared by the compile's first stage. */
static void test_normalize(void **state) {
  (void)state;
  model m;
  load(&m, true);
  harp_error e = {0};
  rt_compile_opts o = {.normalize = true, .until = RT_STAGE_FUNCTION};
  rt_compile *c = NULL;
  assert_ok(&e, rt_compile_run(&e, &rt_target_interp, m.g, &m.syms, &o, &c));
  assert_true(c->ran[RT_STAGE_NORMALIZE] && c->ran[RT_STAGE_REGIONS] && c->ran[RT_STAGE_FUNCTION]);
  int compute = 0; /* the interpreter's partition: a region per node that computes */
  for (int i = 0; i < m.g->n; i++) {
    tiny_class k = tiny_op_class(m.g->nodes[i].op);
    compute += k != TC_LEAF && k != TC_MOVE;
  }
  assert_int_equal(c->part->n, compute);
  assert_int_equal(c->f->nkernels, compute);
  rt_compile_free(c);
  unload(&m);
}

/* A variant makes the base's C again from the base's regions and Function
 * (the same objects: nothing formed twice); an override changes its plan. */
static void test_variant(void **state) {
  (void)state;
  model m;
  load(&m, false);
  harp_error e = {0};
  rt_cpu_opts o = {.keep_analysis = true, .keep_source = true};
  rt_cpu_model *base = NULL, *v = NULL, *w = NULL;
  assert_ok(&e, rt_cpu_compile(&e, m.g, &m.syms, &o, &base));
  rt_cpu_opts vo = {.keep_source = true};
  assert_ok(&e, rt_cpu_compile_variant(&e, base, &vo, &v));
  const rt_compile *b = rt_cpu_stages(base), *c = rt_cpu_stages(v);
  assert_ptr_equal(c->part, b->part);
  assert_ptr_equal(c->f, b->f);
  assert_false(c->ran[RT_STAGE_REGIONS] && c->ms[RT_STAGE_REGIONS] > 0);
  assert_true(c->ran[RT_STAGE_PLANS] && c->ran[RT_STAGE_CODE] && c->ran[RT_STAGE_BUILD]);
  assert_string_equal(rt_cpu_source(v), rt_cpu_source(base));
  /* region h/q's plan overridden: its kernel differs, the rest is the base's */
  const rt_plans *ps = rt_cpu_plans(base);
  int q = -1;
  for (int i = 0; i < ps->n && q < 0; i++)
    if (!strcmp(ps->choice[i].region, "h/q")) q = i;
  assert_true(q >= 0 && ps->choice[q].has_plan);
  rt_plan_override ov = {"h/q", ps->choice[q].plan, NULL, NULL, RT_PLAN_OVERRIDE};
  ov.plan.stages = ov.plan.stages == 2 ? 3 : 2;
  vo.plan_overrides = &ov, vo.nplan_overrides = 1;
  assert_ok(&e, rt_cpu_compile_variant(&e, base, &vo, &w));
  assert_int_equal(rt_cpu_plans(w)->choice[q].source, RT_PLAN_OVERRIDE);
  assert_ptr_equal(rt_cpu_stages(w)->part, b->part);
  rt_cpu_free(w);
  rt_cpu_free(v);
  /* a base that gave its analysis back makes no variant (tier0=off: tier 0
   * keeps the analysis until the model is freed) */
  rt_cpu_model *lean = NULL;
  rt_knobs off;
  rt_knobs_init(&off);
  off.tier0 = RT_TIER0_OFF;
  rt_cpu_opts lo = {.knobs = &off};
  assert_ok(&e, rt_cpu_compile(&e, m.g, &m.syms, &lo, &lean));
  assert_int_equal(rt_cpu_compile_variant(&e, lean, &vo, &v), HARP_E_INVALID_ARG);
  assert_null(v);
  rt_cpu_free(lean);
  rt_cpu_free(base);
  unload(&m);
}

static void test_tables(void **state) {
  (void)state;
  assert_int_equal(rt_stage_of_dump("tiny"), RT_STAGE_NORMALIZE);
  assert_int_equal(rt_stage_of_dump("region"), RT_STAGE_REGIONS);
  assert_int_equal(rt_stage_of_dump("plan"), RT_STAGE_PLANS);
  assert_int_equal(rt_stage_of_dump("gpu"), RT_STAGE_KERNELS);
  assert_int_equal(rt_stage_of_dump("c"), RT_STAGE_CODE);
  assert_int_equal(rt_stage_of_dump("cu"), RT_STAGE_CODE);
  assert_int_equal(rt_stage_of_dump("flow"), -1);
  assert_string_equal(rt_stage_dump(RT_STAGE_CODE, &rt_target_cpu), "c");
  assert_null(rt_stage_dump(RT_STAGE_KERNELS, &rt_target_cpu));
  assert_string_equal(rt_stage_dump(RT_STAGE_KERNELS, &rt_target_cuda), "gpu");
  for (int s = 0; s < RT_NSTAGES; s++) assert_string_not_equal(rt_stage_name((rt_stage)s), "?");
  assert_ptr_equal(rt_target_find("cpu"), &rt_target_cpu);
  assert_ptr_equal(rt_target_find("cuda"), &rt_target_cuda);
  assert_ptr_equal(rt_target_find("interp"), &rt_target_interp);
  assert_null(rt_target_find("regions"));
  assert_null(rt_target_find(NULL));
  /* --target names and the target-only dumps, from the descriptors */
  const char *arch = "x";
  assert_ptr_equal(rt_target_of_machine("cpu", &arch), &rt_target_cpu);
  assert_null(arch);
  assert_ptr_equal(rt_target_of_machine("sm90", &arch), &rt_target_cuda);
  assert_string_equal(arch, "sm90");
  assert_ptr_equal(rt_target_of_machine("sm80", &arch), &rt_target_cuda);
  assert_string_equal(arch, "sm80");
  assert_null(rt_target_of_machine("sm70", &arch));
  assert_null(rt_target_of_machine("cuda", &arch));
  assert_null(rt_target_of_machine(NULL, &arch));
  assert_ptr_equal(rt_target_of_dump("c"), &rt_target_cpu);
  assert_ptr_equal(rt_target_of_dump("gpu"), &rt_target_cuda);
  assert_ptr_equal(rt_target_of_dump("cu"), &rt_target_cuda);
  assert_null(rt_target_of_dump("region"));
  assert_null(rt_target_of_dump(NULL));
}

/* docs/architecture.md's stage list is the pipeline's: one line per stage,
 * in order, "    <name> ... <its --dump on some target>". */
static void test_architecture_doc(void **state) {
  (void)state;
  harp_error e = {0};
  char *doc = NULL;
  size_t len = 0;
  assert_ok(&e, ut_read_file(&e, src_path("docs/architecture.md"), 1 << 20, &doc, &len));
  const char *at = doc;
  for (int s = 0; s < RT_NSTAGES; s++) {
    char key[64];
    snprintf(key, sizeof key, "\n    %s ", rt_stage_name((rt_stage)s));
    const char *line = strstr(at, key);
    if (!line) fail_msg("docs/architecture.md: no line for stage %s after the previous stage's", rt_stage_name((rt_stage)s));
    const char *end = strchr(line + 1, '\n');
    const rt_target *ts[] = {&rt_target_cpu, &rt_target_cuda};
    for (int t = 0; t < 2; t++) {
      const char *d = rt_stage_dump((rt_stage)s, ts[t]);
      char word[32];
      snprintf(word, sizeof word, " %s", d ? d : "");
      const char *hit = d ? strstr(line, word) : NULL;
      if (d && (!hit || hit > end)) fail_msg("docs/architecture.md: stage %s's line lacks its dump %s", rt_stage_name((rt_stage)s), d);
    }
    at = end;
  }
  free(doc);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cpu_stages), cmocka_unit_test(test_until),   cmocka_unit_test(test_fault_each_stage),
      cmocka_unit_test(test_normalize),  cmocka_unit_test(test_variant), cmocka_unit_test(test_tables),
      cmocka_unit_test(test_architecture_doc),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
