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
  hp_error e = {0};
  hp_program *p = NULL;
  tiny_symtab_init(&m->syms);
  assert_ok(&e, hp_harp_load_file(&e, src_path(MODEL), &p));
  assert_ok(&e, hp_lower(&e, p, &m->g, &m->syms));
  hp_program_free(p);
  if (!raw) assert_ok(&e, tiny_prepare(&e, m->g, &m->syms, false));
}

static void unload(model *m) {
  tiny_graph_free(m->g);
  tiny_symtab_free(&m->syms);
}

/* The hook's record: stages seen in order; fail_at: the call that fails (-1: none). */
typedef struct record {
  int n, fail_at;
  hp_stage seen[32];
} record;

static hp_status hook(void *ctx, hp_error *e, const hp_compile *c, hp_stage s) {
  record *r = ctx;
  assert_true(c->ran[s]); /* the stage ran before the hook */
  if (r->n < 32) r->seen[r->n] = s;
  if (r->n++ == r->fail_at) return hp_fail(e, HP_E_INTERNAL, NULL, "injected at stage %s", hp_stage_name(s));
  return HP_OK;
}

static const hp_stage cpu_stages[] = {HP_STAGE_INDEXBOOK, HP_STAGE_POLY_VIEW, HP_STAGE_REGIONS, HP_STAGE_FUNCTION,
                                      HP_STAGE_PLANS,     HP_STAGE_CODE,      HP_STAGE_BUILD};

/* The CPU target: its stages in order, each timed, every result there. */
static void test_cpu_stages(void **state) {
  (void)state;
  model m;
  load(&m, false);
  hp_error e = {0};
  record r = {.fail_at = -1};
  hp_compile_opts o = {.after_stage = hook, .hook_ctx = &r, .keep_source = true};
  hp_compile *c = NULL;
  assert_ok(&e, hp_compile_run(&e, &hp_target_cpu, m.g, &m.syms, &o, &c));
  assert_int_equal(r.n, 7);
  for (int i = 0; i < 7; i++) assert_int_equal(r.seen[i], cpu_stages[i]);
  assert_false(c->ran[HP_STAGE_NORMALIZE] || c->ran[HP_STAGE_KERNELS] || c->ran[HP_STAGE_LOAD]);
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
  hp_compile_times(c, times, sizeof times);
  assert_non_null(strstr(times, "regions "));
  assert_non_null(strstr(times, "build "));
  hp_compile_free(c);
  unload(&m);
}

/* until: the stages after it do not run; CUDA: kernels and code, no NVRTC. */
static void test_until(void **state) {
  (void)state;
  model m;
  load(&m, false);
  hp_error e = {0};
  hp_compile_opts o = {.until = HP_STAGE_REGIONS};
  hp_compile *c = NULL;
  assert_ok(&e, hp_compile_run(&e, &hp_target_cpu, m.g, &m.syms, &o, &c));
  assert_true(c->ran[HP_STAGE_REGIONS]);
  assert_false(c->ran[HP_STAGE_FUNCTION]);
  assert_null(c->f);
  assert_non_null(c->pv); /* not dropped: no code ran */
  hp_compile_free(c);
  record r = {.fail_at = -1};
  hp_compile_opts g = {.arch = "sm90", .until = HP_STAGE_CODE, .after_stage = hook, .hook_ctx = &r};
  assert_ok(&e, hp_compile_run(&e, &hp_target_cuda, m.g, &m.syms, &g, &c));
  assert_true(c->ran[HP_STAGE_KERNELS] && c->ran[HP_STAGE_CODE] && !c->ran[HP_STAGE_BUILD]);
  assert_non_null(c->tu);
  assert_non_null(strstr(c->source, "__global__"));
  assert_int_equal(r.seen[r.n - 1], HP_STAGE_CODE);
  assert_int_equal(r.seen[r.n - 2], HP_STAGE_KERNELS);
  hp_compile_free(c);
  g.arch = "sm75";
  assert_int_equal(hp_compile_run(&e, &hp_target_cuda, m.g, &m.syms, &g, &c), HP_E_USAGE);
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
    hp_error e = {0};
    record r = {.fail_at = k};
    hp_compile_opts o = {.after_stage = hook, .hook_ctx = &r};
    hp_compile *c = (hp_compile *)&r; /* must come back NULL */
    assert_int_equal(hp_compile_run(&e, &hp_target_cpu, m.g, &m.syms, &o, &c), HP_E_INTERNAL);
    assert_null(c);
    assert_int_equal(r.n, k + 1);
    assert_non_null(strstr(e.msg, hp_stage_name(cpu_stages[k])));
  }
  hp_error e = {0};
  record r = {.fail_at = 5}; /* CUDA: after kernels (indexbook, poly_view, regions, function, plans, kernels) */
  hp_compile_opts o = {.after_stage = hook, .hook_ctx = &r};
  hp_compile *c = NULL;
  assert_int_equal(hp_compile_run(&e, &hp_target_cuda, m.g, &m.syms, &o, &c), HP_E_INTERNAL);
  assert_null(c);
  assert_int_equal(r.seen[5], HP_STAGE_KERNELS);
  unload(&m);
}

/* normalize: a graph not yet prepared is prepared by the compile's first stage. */
static void test_normalize(void **state) {
  (void)state;
  model m;
  load(&m, true);
  hp_error e = {0};
  hp_compile_opts o = {.normalize = true, .until = HP_STAGE_FUNCTION};
  hp_compile *c = NULL;
  assert_ok(&e, hp_compile_run(&e, &hp_target_interp, m.g, &m.syms, &o, &c));
  assert_true(c->ran[HP_STAGE_NORMALIZE] && c->ran[HP_STAGE_REGIONS] && c->ran[HP_STAGE_FUNCTION]);
  int compute = 0; /* the interpreter's partition: a region per node that computes */
  for (int i = 0; i < m.g->n; i++) {
    tiny_class k = tiny_op_class(m.g->nodes[i].op);
    compute += k != TC_LEAF && k != TC_MOVE;
  }
  assert_int_equal(c->part->n, compute);
  assert_int_equal(c->f->nkernels, compute);
  hp_compile_free(c);
  unload(&m);
}

/* A variant makes the base's C again from the base's regions and Function
 * (the same objects: nothing formed twice); an override changes its plan. */
static void test_variant(void **state) {
  (void)state;
  model m;
  load(&m, false);
  hp_error e = {0};
  hp_cpu_opts o = {.keep_analysis = true, .keep_source = true};
  hp_cpu_model *base = NULL, *v = NULL, *w = NULL;
  assert_ok(&e, hp_cpu_compile(&e, m.g, &m.syms, &o, &base));
  hp_cpu_opts vo = {.keep_source = true};
  assert_ok(&e, hp_cpu_compile_variant(&e, base, &vo, &v));
  const hp_compile *b = hp_cpu_stages(base), *c = hp_cpu_stages(v);
  assert_ptr_equal(c->part, b->part);
  assert_ptr_equal(c->f, b->f);
  assert_false(c->ran[HP_STAGE_REGIONS] && c->ms[HP_STAGE_REGIONS] > 0);
  assert_true(c->ran[HP_STAGE_PLANS] && c->ran[HP_STAGE_CODE] && c->ran[HP_STAGE_BUILD]);
  assert_string_equal(hp_cpu_source(v), hp_cpu_source(base));
  /* region h/q's plan overridden: its kernel differs, the rest is the base's */
  const hp_plans *ps = hp_cpu_plans(base);
  int q = -1;
  for (int i = 0; i < ps->n && q < 0; i++)
    if (!strcmp(ps->choice[i].region, "h/q")) q = i;
  assert_true(q >= 0 && ps->choice[q].has_plan);
  hp_plan_override ov = {"h/q", ps->choice[q].plan, NULL, NULL, HP_PLAN_OVERRIDE};
  ov.plan.stages = ov.plan.stages == 2 ? 3 : 2;
  vo.plan_overrides = &ov, vo.nplan_overrides = 1;
  assert_ok(&e, hp_cpu_compile_variant(&e, base, &vo, &w));
  assert_int_equal(hp_cpu_plans(w)->choice[q].source, HP_PLAN_OVERRIDE);
  assert_ptr_equal(hp_cpu_stages(w)->part, b->part);
  hp_cpu_free(w);
  hp_cpu_free(v);
  /* a base that gave its analysis back makes no variant */
  hp_cpu_model *lean = NULL;
  hp_cpu_opts lo = {0};
  assert_ok(&e, hp_cpu_compile(&e, m.g, &m.syms, &lo, &lean));
  assert_int_equal(hp_cpu_compile_variant(&e, lean, &vo, &v), HP_E_INVALID_ARG);
  assert_null(v);
  hp_cpu_free(lean);
  hp_cpu_free(base);
  unload(&m);
}

static void test_tables(void **state) {
  (void)state;
  assert_int_equal(hp_stage_of_dump("tiny"), HP_STAGE_NORMALIZE);
  assert_int_equal(hp_stage_of_dump("region"), HP_STAGE_REGIONS);
  assert_int_equal(hp_stage_of_dump("plan"), HP_STAGE_PLANS);
  assert_int_equal(hp_stage_of_dump("gpu"), HP_STAGE_KERNELS);
  assert_int_equal(hp_stage_of_dump("c"), HP_STAGE_CODE);
  assert_int_equal(hp_stage_of_dump("cu"), HP_STAGE_CODE);
  assert_int_equal(hp_stage_of_dump("flow"), -1);
  assert_string_equal(hp_stage_dump(HP_STAGE_CODE, &hp_target_cpu), "c");
  assert_null(hp_stage_dump(HP_STAGE_KERNELS, &hp_target_cpu));
  assert_string_equal(hp_stage_dump(HP_STAGE_KERNELS, &hp_target_cuda), "gpu");
  for (int s = 0; s < HP_NSTAGES; s++) assert_string_not_equal(hp_stage_name((hp_stage)s), "?");
  assert_ptr_equal(hp_target_find("cpu"), &hp_target_cpu);
  assert_ptr_equal(hp_target_find("cuda"), &hp_target_cuda);
  assert_ptr_equal(hp_target_find("interp"), &hp_target_interp);
  assert_null(hp_target_find("regions"));
  assert_null(hp_target_find(NULL));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cpu_stages), cmocka_unit_test(test_until),   cmocka_unit_test(test_fault_each_stage),
      cmocka_unit_test(test_normalize),  cmocka_unit_test(test_variant), cmocka_unit_test(test_tables),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
