/* test_tune.c — plans in use (issue 5): ShapeSet classes and keys, plan
 * lists with located errors, plan_retarget, the plan cache (round trip,
 * misses, corrupt entries), Spearman's rank correlation, the CSV log, the
 * plan choice (override > cache > default) and how the CPU templates follow
 * a plan — or visibly fall back when they refuse one. */
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/c/emit_model.h"
#include "backend/c/region_c.h"
#include "harp/cpu.h"
#include "harp/tune.h"
#include "rgtest.h"

/* A fresh directory under $TMPDIR (removed by the caller with rm_tree). */
static void tmpdir(char *buf, size_t cap) {
  const char *t = getenv("TMPDIR");
  snprintf(buf, cap, "%s/harp_tune_XXXXXX", t && *t ? t : "/tmp");
  assert_non_null(mkdtemp(buf));
}

static void rm_tree(const char *dir) {
  char cmd[4200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
}

static char *slurp(const char *path) {
  harp_error e = {0};
  char *buf = NULL;
  size_t len = 0;
  assert_ok(&e, ut_read_file(&e, path, 1 << 20, &buf, &len));
  return buf;
}

static void spit(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

/* ---- ShapeSets ------------------------------------------------------------------- */
static void test_shapeset_classes(void **state) {
  (void)state;
  static const int64_t table[][2] = {{0, 0},       {1, 1},       {2, 2},       {3, 4},       {4, 4},
                                     {5, 8},       {8, 8},       {9, 16},      {63, 64},     {64, 64},
                                     {65, 128},    {512, 512},   {513, 1024},  {1000, 1024}, {1024, 1024},
                                     {1025, 2048}, {4096, 4096}, {4097, 8192}, {(int64_t)1 << 40, (int64_t)1 << 40}};
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
    if (plan_shapeset_class(table[i][0]) != table[i][1])
      fail_msg("class(%lld) = %lld, want %lld", (long long)table[i][0], (long long)plan_shapeset_class(table[i][0]),
               (long long)table[i][1]);
  /* a class is a range: every member maps to its top, monotonically */
  for (int64_t v = 2; v < 5000; v++) {
    int64_t c = plan_shapeset_class(v);
    assert_true(c >= v && c < 2 * v && (c & (c - 1)) == 0);
    assert_true(plan_shapeset_class(c) == c);
  }
}

static void test_shapeset_key(void **state) {
  (void)state;
  harp_error e = {0};
  tiny_symtab s;
  tiny_symtab_init(&s);
  char key[PLAN_SHAPESET_MAX], bind[PLAN_SHAPESET_MAX];
  plan_shapeset_key(&s, NULL, key, sizeof key);
  assert_string_equal(key, "static");
  assert_ok(&e, tiny_symtab_set(&e, &s, "N", 1));
  assert_ok(&e, tiny_symtab_set(&e, &s, "M", 1000));
  assert_ok(&e, tiny_symtab_set(&e, &s, "K", 3));
  plan_shapeset_key(&s, NULL, key, sizeof key);
  assert_string_equal(key, "K:4;M:1024;N:1"); /* sorted, classes */
  plan_binding_text(&s, NULL, bind, sizeof bind);
  assert_string_equal(bind, "K=3;M=1000;N=1");
  /* 1000 and 600 share a class, 1025 does not */
  tiny_symtab t2;
  tiny_symtab_init(&t2);
  assert_ok(&e, tiny_symtab_set(&e, &t2, "K", 4));
  assert_ok(&e, tiny_symtab_set(&e, &t2, "M", 600));
  assert_ok(&e, tiny_symtab_set(&e, &t2, "N", 1));
  char k2[PLAN_SHAPESET_MAX];
  plan_shapeset_key(&t2, NULL, k2, sizeof k2);
  assert_string_equal(k2, key);
  tiny_symtab_free(&t2);
  /* with a graph: only the symbols its shapes name (X is not one) */
  rgt t;
  static const char *syms[] = {"M=100", "K=16", "N=12", "X=7", NULL};
  rgt_load(&t, "seed000_gemm_bias_relu.json", syms);
  plan_shapeset_key(&t.syms, t.g, key, sizeof key);
  assert_string_equal(key, "K:16;M:128;N:16");
  plan_binding_text(&t.syms, t.g, bind, sizeof bind);
  assert_string_equal(bind, "K=16;M=100;N=12");
  /* a key that does not fit is cut at a symbol and ends in a hash */
  for (int i = 0; i < 8; i++) {
    char nm[8];
    snprintf(nm, sizeof nm, "S%d", i);
    assert_ok(&e, tiny_symtab_set(&e, &s, nm, 100 + i));
  }
  char small[32];
  plan_shapeset_key(&s, NULL, small, sizeof small);
  assert_true(strlen(small) < sizeof small);
  assert_non_null(strstr(small, ";#"));
  rgt_free(&t);
  tiny_symtab_free(&s);
}

/* ---- plan lists -------------------------------------------------------------------- */
static const char LIST[] =
    "{\n"
    "  \"model\": \"x\",\n"
    "  \"plans\": [\n"
    "    {\"region\": \"C\", \"source\": \"default\", \"plan\": {\"tile\": [96, 512, 256], \"warp_tile\": \"6x64\"}},\n"
    "    {\"region\": \"relu\", \"note\": \"n\", \"plan\": null}\n"
    "  ]\n"
    "}\n";

static void test_plan_list(void **state) {
  (void)state;
  harp_error e = {0};
  assert_true(plan_text_is_list(LIST));
  assert_false(plan_text_is_list("{\"tile\": [1]}"));
  assert_false(plan_text_is_list("split m 64"));
  plan_list_entry *ents = NULL;
  int n = 0;
  assert_ok(&e, plan_list_parse(LIST, "l.json", PLAN_ARCH_CPU, &ents, &n, &e));
  assert_int_equal(n, 2);
  assert_string_equal(ents[0].region, "C");
  assert_true(ents[0].has_plan);
  assert_int_equal(ents[0].plan.tile[1], 512);
  assert_int_equal(ents[0].plan.warp_n, 64);
  assert_int_equal(ents[0].plan.arch, PLAN_ARCH_CPU);
  assert_int_equal(ents[0].plan.pos.tile[0].line, 4); /* positions in the list's text */
  assert_false(ents[1].has_plan);
  free(ents);
  /* errors inside a nested plan are located in the list file, with its line */
  static const char bad[] =
      "{\"plans\": [\n"
      "  {\"region\": \"C\",\n"
      "   \"plan\": {\"tile\": [96, 512, 256],\n"
      "            \"stages\": 7}}\n"
      "]}\n";
  assert_int_equal(plan_list_parse(bad, "bad.json", PLAN_ARCH_CPU, &ents, &n, &e), HARP_E_INVALID_ARG);
  assert_string_equal(e.file, "bad.json");
  assert_int_equal(e.line, 4);
  assert_int_equal(e.col, 23);
  assert_non_null(strstr(e.snippet, "\"stages\": 7"));
  harp_error_clear(&e);
  /* unknown keys, a missing region, duplicates */
  static const char *const wrong[][2] = {
      {"{\"plans\": [{\"region\": \"C\", \"plan\": null, \"tile\": 3}]}", "unknown key \"tile\""},
      {"{\"plans\": [{\"plan\": null}]}", "needs \"region\""},
      {"{\"plans\": [{\"region\": \"C\", \"plan\": null}, {\"region\": \"C\", \"plan\": null}]}", "two plans"},
      {"{\"plans\": {}}", "must be an array"},
      {"{\"plans\": [], \"extra\": 1}", "unknown key \"extra\""},
      {"{\"plans\": [{\"region\": \"C\", \"plan\": 5}]}", "plan object or null"},
      {"{\"plans\": [", "invalid JSON"},
  };
  for (size_t i = 0; i < sizeof wrong / sizeof wrong[0]; i++) {
    harp_error_clear(&e);
    if (plan_list_parse(wrong[i][0], "w.json", PLAN_ARCH_CPU, &ents, &n, &e) == HARP_OK) fail_msg("accepted %s", wrong[i][0]);
    if (!strstr(e.msg, wrong[i][1])) fail_msg("%s: %s", wrong[i][0], e.msg);
    assert_true(e.line >= 1);
  }
}

/* ---- plan_retarget ------------------------------------------------------------------- */
static plan_machine cpu_machine(void) {
  plan_machine m;
  plan_machine_get(PLAN_ARCH_CPU, &m);
  return m;
}

static plan_region_info gemm_info(int64_t M, int64_t N, int64_t K) {
  plan_region_info r;
  memset(&r, 0, sizeof r);
  r.name = "C";
  r.pattern = PLAN_PAT_MATMUL;
  r.naxes = 3;
  r.axes[0] = (plan_axis_info){"m", M, false, PLAN_ROLE_AUTO};
  r.axes[1] = (plan_axis_info){"n", N, false, PLAN_ROLE_AUTO};
  r.axes[2] = (plan_axis_info){"k", K, true, PLAN_ROLE_AUTO};
  r.in_dtype = r.acc_dtype = r.out_dtype = TINY_FP32;
  return r;
}

static void test_retarget(void **state) {
  (void)state;
  harp_error e = {0};
  plan_machine m = cpu_machine();
  plan_region_info big = gemm_info(1024, 1024, 1024), odd = gemm_info(1000, 1000, 1000);
  plan_t p, q;
  assert_ok(&e, plan_parse("split m 64; split n 64; split k 256; warp_tile 4x16; vectorize n.i.i 16", "p", PLAN_ARCH_CPU, &p, &e));
  assert_int_equal(p.npred, 0);
  plan_fill_from_region(&p, &big);
  assert_ok(&e, plan_validate(&p, &big, &m, NULL, &e));
  /* the same plan does not fit 1000 (no tails) until retargeted */
  assert_int_equal(plan_validate(&p, &odd, &m, NULL, &e), HARP_E_INVALID_ARG);
  harp_error_clear(&e);
  q = p;
  plan_retarget(&q, &odd);
  assert_int_equal(q.npred, 3); /* m, n (tile and vector), k */
  assert_ok(&e, plan_validate(&q, &odd, &m, NULL, &e));
  /* and back: no tails left */
  plan_retarget(&q, &big);
  assert_int_equal(q.npred, 0);
  assert_true(plan_equal(&q, &p));
}

/* ---- the plan cache ------------------------------------------------------------------- */
static void test_plan_cache(void **state) {
  (void)state;
  harp_error e = {0};
  char dir[512];
  tmpdir(dir, sizeof dir);
  rt_plan_key k = {"0123456789abcdef", "C", "K:1024;M:1024;N:1024", "cpu:test"};
  rt_plan_entry in, out;
  memset(&in, 0, sizeof in);
  assert_ok(&e, plan_parse("split m 96; split n 512; split k 256; warp_tile 6x64; vectorize n.i.i 16; predicate_tail m.i.i",
                           "p", PLAN_ARCH_CPU, &in.plan, &e));
  snprintf(in.binding, sizeof in.binding, "K=1000;M=1000;N=1000");
  in.median_ms = 9.5, in.default_ms = 10.25, in.points = 12, in.repeat = 20;
  snprintf(in.tuned_at, sizeof in.tuned_at, "2026-01-01T00:00:00Z");
  bool found = true;
  char note[RT_PLAN_NOTE_MAX];
  /* a miss: no note */
  assert_ok(&e, rt_plan_cache_load(&e, dir, &k, PLAN_ARCH_CPU, &out, &found, note, sizeof note));
  assert_false(found);
  assert_string_equal(note, "");
  char *path = NULL;
  assert_ok(&e, rt_plan_cache_store(&e, dir, &k, &in, &path));
  assert_non_null(strstr(path, "/plans/"));
  char *want = rt_plan_cache_path(dir, &k);
  assert_string_equal(path, want);
  free(want);
  assert_ok(&e, rt_plan_cache_load(&e, dir, &k, PLAN_ARCH_CPU, &out, &found, note, sizeof note));
  assert_true(found);
  assert_true(plan_equal(&in.plan, &out.plan));
  assert_string_equal(out.binding, in.binding);
  assert_string_equal(out.tuned_at, in.tuned_at);
  assert_true(out.median_ms == 9.5 && out.default_ms == 10.25 && out.points == 12 && out.repeat == 20);
  /* another ShapeSet or machine is another entry */
  rt_plan_key k2 = k;
  k2.shapeset = "K:2048;M:1024;N:1024";
  assert_ok(&e, rt_plan_cache_load(&e, dir, &k2, PLAN_ARCH_CPU, &out, &found, note, sizeof note));
  assert_false(found);
  /* an entry copied under another key's name reads as a miss, with a note */
  char *p2 = rt_plan_cache_path(dir, &k2), *text = slurp(path);
  spit(p2, text);
  assert_ok(&e, rt_plan_cache_load(&e, dir, &k2, PLAN_ARCH_CPU, &out, &found, note, sizeof note));
  assert_false(found);
  assert_non_null(strstr(note, "another model"));
  /* corrupt entries are ignored with a note, never an error */
  static const char *const corrupt[][2] = {
      {"{\"harp_plan_cache\": 1, \"model\"", "not a JSON object"},
      {"[1, 2]", "not a JSON object"},
      {"{\"harp_plan_cache\": 9}", "version"},
      {"", "not a JSON object"},
  };
  for (size_t i = 0; i < sizeof corrupt / sizeof corrupt[0]; i++) {
    spit(path, corrupt[i][0]);
    found = true;
    assert_ok(&e, rt_plan_cache_load(&e, dir, &k, PLAN_ARCH_CPU, &out, &found, note, sizeof note));
    assert_false(found);
    if (!strstr(note, corrupt[i][1]) || !strstr(note, "ignored")) fail_msg("%s: %s", corrupt[i][0], note);
  }
  /* a bad plan inside an otherwise good entry */
  char *bad = text ? strstr(text, "\"warp_tile\"") : NULL;
  assert_non_null(bad);
  memcpy(bad, "\"warp_tilX\"", 11);
  spit(path, text);
  assert_ok(&e, rt_plan_cache_load(&e, dir, &k, PLAN_ARCH_CPU, &out, &found, note, sizeof note));
  assert_false(found);
  assert_non_null(strstr(note, "malformed"));
  /* a store replaces whatever is there */
  assert_ok(&e, rt_plan_cache_store(&e, dir, &k, &in, NULL));
  assert_ok(&e, rt_plan_cache_load(&e, dir, &k, PLAN_ARCH_CPU, &out, &found, note, sizeof note));
  assert_true(found);
  free(text);
  free(p2);
  free(path);
  rm_tree(dir);
}

/* ---- Spearman and the log --------------------------------------------------------------- */
static void test_spearman(void **state) {
  (void)state;
  double x[] = {1, 2, 3, 4, 5}, up[] = {10, 20, 25, 40, 100}, down[] = {5, 4, 3, 2, 1}, flat[] = {7, 7, 7, 7, 7};
  assert_true(fabs(rt_spearman(x, up, 5) - 1) < 1e-12);
  assert_true(fabs(rt_spearman(x, down, 5) + 1) < 1e-12);
  assert_true(isnan(rt_spearman(x, flat, 5)));
  assert_true(isnan(rt_spearman(x, up, 1)));
  /* ties get average ranks: ranks x = 1, 2.5, 2.5, 4; y = 1, 2, 3, 4 -> rho = 0.9487 */
  double tx[] = {1, 2, 2, 3}, ty[] = {1, 2, 3, 4};
  assert_true(fabs(rt_spearman(tx, ty, 4) - 0.9486832980505138) < 1e-9);
  /* a textbook example: d^2 sum 4 over n = 5 -> 1 - 6*4/(5*24) = 0.8 */
  double a[] = {1, 2, 3, 4, 5}, b[] = {2, 1, 4, 3, 5};
  assert_true(fabs(rt_spearman(a, b, 5) - 0.8) < 1e-12);
}

static void test_csv_log(void **state) {
  (void)state;
  harp_error e = {0};
  char dir[512], path[600];
  tmpdir(dir, sizeof dir);
  snprintf(path, sizeof path, "%s/sub/tune.csv", dir);
  plan_t p;
  assert_ok(&e, plan_parse("split m 96; split n 512; split k 256", "p", PLAN_ARCH_CPU, &p, &e));
  char *one = rt_plan_oneline(&p);
  assert_non_null(one);
  assert_null(strchr(one, '\n'));
  assert_non_null(strstr(one, "split m 96; split n 512; split k 256;"));
  rt_tune_row rows[2] = {
      {"2026-01-01T00:00:00Z", "cpu:x", "abc", "M:1024", "M=1000", "C", 0, true, false, 2e9, 1.2e7, 1, 10.5, 9.25, 20, &p},
      {"2026-01-01T00:00:00Z", "cpu:x", "abc", "M:1024", "M=1000", "a,\"b\"", 1, false, true, 2e9, 1.2e7, 0.5, 12, 8, 20, &p},
  };
  assert_ok(&e, rt_tune_log_append(&e, path, rows, 2));
  assert_ok(&e, rt_tune_log_append(&e, path, rows, 1));
  char *text = slurp(path);
  /* one header, then three rows */
  int lines = 0;
  for (char *c = text; *c; c++) lines += *c == '\n';
  assert_int_equal(lines, 4);
  assert_memory_equal(text, rt_tune_csv_header(), strlen(rt_tune_csv_header()));
  assert_non_null(strstr(rt_tune_csv_header(), "FLOPs,Bytes,occ,estimate,actual"));
  assert_non_null(strstr(text, "\n2026-01-01T00:00:00Z,cpu:x,abc,M:1024,M=1000,C,0,1,0,2000000000,12000000,1,10.5,9.25,20,split m 96;"));
  assert_non_null(strstr(text, ",\"a,\"\"b\"\"\",1,0,1,")); /* quoted */
  assert_non_null(strstr(text, "split m 96; split n 512"));
  free(text);
  free(one);
  rm_tree(dir);
}

/* ---- choosing plans, and the CPU templates following them ---------------------------------- */
typedef struct emitted {
  fn_function *f;
  ut_arena *arena;
  ut_str src;
} emitted;

/* The C of t's partition with plans ps; the knobs of the code generator:
 * emit_knobs (NULL: the defaults). */
static const rt_knobs *emit_knobs;
static void emit(rgt *t, rt_plans *ps, emitted *out) {
  memset(out, 0, sizeof *out);
  fn_options fo = {.widen_half_temps = true};
  assert_ok(&t->e, fn_build_ex(&t->e, t->p, "main", &fo, &out->f));
  out->arena = ut_arena_new();
  ut_str_init(&out->src);
  rc_ctx rc = {&t->e, t->g, t->p->formed->pv, out->f, &t->syms, out->arena, 1 << 20, true, ps->choice, false, NULL,
               emit_knobs, false, false, NULL, NULL, 0, NULL};
  assert_ok(&t->e, cgen_emit_model(&rc, "model", &out->src));
}

static void emitted_free(emitted *x) {
  ut_str_free(&x->src);
  ut_arena_free(x->arena);
  fn_free(x->f);
}

/* fp32 GEMM + bias + ReLU (bench/models/gemm_bias_relu.json): one region on the template */
static const char GEMM_BIAS_RELU[] =
    "{\"uops\": ["
    "{\"id\":\"A\",\"uop\":\"INPUT\",\"arg\":{\"tensor_id\":\"A\",\"dtype\":\"fp32\",\"shape\":[\"M\",\"K\"]}},"
    "{\"id\":\"B\",\"uop\":\"INPUT\",\"arg\":{\"tensor_id\":\"B\",\"dtype\":\"fp32\",\"shape\":[\"K\",\"N\"]}},"
    "{\"id\":\"bias\",\"uop\":\"INPUT\",\"arg\":{\"tensor_id\":\"bias\",\"dtype\":\"fp32\",\"shape\":[\"N\"]}},"
    "{\"id\":\"a\",\"uop\":\"RESHAPE\",\"src\":[\"A\"],\"arg\":{\"result_shape\":[\"M\",\"K\",1]}},"
    "{\"id\":\"b\",\"uop\":\"RESHAPE\",\"src\":[\"B\"],\"arg\":{\"result_shape\":[1,\"K\",\"N\"]}},"
    "{\"id\":\"p\",\"uop\":\"MUL\",\"src\":[\"a\",\"b\"]},"
    "{\"id\":\"mm\",\"uop\":\"REDUCE\",\"src\":[\"p\"],\"arg\":{\"op\":\"SUM\",\"axes\":[\"K\"],\"dtype\":\"fp32\"}},"
    "{\"id\":\"biased\",\"uop\":\"ADD\",\"src\":[\"mm\",\"bias\"]},"
    "{\"id\":\"C\",\"uop\":\"RELU\",\"src\":[\"biased\"]}]}";

static void test_choose_and_follow(void **state) {
  (void)state;
  char dir[512];
  tmpdir(dir, sizeof dir);
  rgt t;
  static const char *syms[] = {"M=200", "K=64", "N=96", NULL};
  rgt_load(&t, GEMM_BIAS_RELU, syms);
  rg_options ro = {.no_operand_casts = true};
  rgt_form_opt(&t, PLAN_ARCH_CPU, &ro);
  assert_int_equal(t.p->n, 1);
  const char *name = t.p->regions[0].name;
  rt_plan_opts po = {.cache_dir = dir, .search = {rt_cpu_algo_mask()}};
  /* the default */
  rt_plans ps;
  assert_ok(&t.e, rt_plans_choose(&t.e, t.p, t.g, &t.syms, &t.m, &po, &ps));
  assert_int_equal(ps.n, 1);
  assert_int_equal(ps.choice[0].source, RT_PLAN_DEFAULT);
  plan_t def;
  assert_ok(&t.e, plan_default(&t.p->regions[0].info->plan_info, &t.m, &po.search, &def, &t.e));
  assert_true(plan_equal(&def, &ps.choice[0].plan));
  assert_string_equal(ps.shapeset, "K:64;M:256;N:128");
  emitted x;
  emit(&t, &ps, &x);
  if (!ps.choice[0].applied) fail_msg("not applied: %s", ps.choice[0].note);
  char want[128];
  snprintf(want, sizeof want, "-> mr %d nr %d mc %lld nc %lld kc %lld simd 16", def.warp_m, def.warp_n,
           (long long)def.tile[0], (long long)def.tile[1], (long long)def.tile[2]);
  if (t.m.avx512 && !strstr(x.src.buf, want)) fail_msg("no '%s' in the generated C", want);
  emitted_free(&x);
  char *dump = NULL;
  assert_ok(&t.e, rt_plans_dump_json(&t.e, &ps, &dump));
  assert_non_null(strstr(dump, "\"source\": \"default\""));
  free(dump);
  rt_plans_free(&ps);
  /* a cached plan wins over the default; an override over both */
  rt_plan_key k = {NULL, name, NULL, NULL};
  char model[17], machine[RT_MACHINE_ID_MAX];
  snprintf(model, sizeof model, "%016llx", (unsigned long long)rt_model_hash(t.g));
  rt_machine_id(&t.m, machine, sizeof machine);
  k.model = model, k.machine = machine, k.shapeset = "K:64;M:256;N:128";
  rt_plan_entry ent;
  memset(&ent, 0, sizeof ent);
  assert_ok(&t.e, plan_parse("split m 48; split n 32; split k 32; warp_tile 8x32; vectorize n.i.i 16; "
                             "bind m.o block.x",
                             "c", PLAN_ARCH_CPU, &ent.plan, &t.e));
  assert_ok(&t.e, rt_plan_cache_store(&t.e, dir, &k, &ent, NULL));
  assert_ok(&t.e, rt_plans_choose(&t.e, t.p, t.g, &t.syms, &t.m, &po, &ps));
  assert_int_equal(ps.choice[0].source, RT_PLAN_CACHED);
  assert_int_equal(ps.choice[0].plan.npred, 1); /* retargeted: 200 % 48 needs m.i.i */
  emit(&t, &ps, &x);
  assert_true(ps.choice[0].applied);
  if (t.m.avx512) {
    assert_non_null(strstr(x.src.buf, "-> mr 8 nr 32 mc 48 nc 32 kc 32 simd 16 prefetch 8 threads"));
    assert_non_null(strstr(x.src.buf, " par_m order 0")); /* only M bound */
  }
  emitted_free(&x);
  rt_plans_free(&ps);
  /* the knob no_plans (HARP_NO_PLANS): the built-in tuning, said in the note */
  rt_knobs nk;
  rt_knobs_init(&nk);
  assert_ok(&t.e, rt_knob_set(&t.e, &nk, "HARP_NO_PLANS", "1"));
  emit_knobs = &nk;
  assert_ok(&t.e, rt_plans_choose(&t.e, t.p, t.g, &t.syms, &t.m, &po, &ps));
  emit(&t, &ps, &x);
  emit_knobs = NULL;
  assert_false(ps.choice[0].applied);
  assert_non_null(strstr(ps.choice[0].note, "HARP_NO_PLANS"));
  assert_null(strstr(x.src.buf, "/* plan:"));
  emitted_free(&x);
  rt_plans_free(&ps);
  /* no_cache: the default again */
  po.no_cache = true;
  assert_ok(&t.e, rt_plans_choose(&t.e, t.p, t.g, &t.syms, &t.m, &po, &ps));
  assert_int_equal(ps.choice[0].source, RT_PLAN_DEFAULT);
  rt_plans_free(&ps);
  po.no_cache = false;
  /* a cached plan that no longer fits: ignored, with a note (a 3-row warp tile on 1 lane... here: an
   * arch the machine is not) */
  ent.plan.arch = PLAN_ARCH_SM80;
  assert_ok(&t.e, rt_plan_cache_store(&t.e, dir, &k, &ent, NULL));
  assert_ok(&t.e, rt_plans_choose(&t.e, t.p, t.g, &t.syms, &t.m, &po, &ps));
  assert_int_equal(ps.choice[0].source, RT_PLAN_DEFAULT);
  assert_true(ps.choice[0].fallback);
  assert_non_null(strstr(ps.choice[0].note, "does not fit"));
  rt_plans_free(&ps);
  /* overrides: validated against the region, located errors, unknown regions */
  static const char ovtext[] = "split m 64; split n 64; split k 64;\nwarp_tile 4x64;\nvectorize n.i.i 16;\n";
  rt_plan_override ov = {name, {0}, "o.plan", ovtext, RT_PLAN_OVERRIDE};
  assert_ok(&t.e, plan_parse(ovtext, "o.plan", PLAN_ARCH_CPU, &ov.plan, &t.e));
  po.overrides = &ov, po.noverrides = 1;
  assert_int_equal(rt_plans_choose(&t.e, t.p, t.g, &t.syms, &t.m, &po, &ps), HARP_E_INVALID_ARG); /* 200 % 64: no tail */
  assert_string_equal(t.e.file, "o.plan");
  assert_int_equal(t.e.line, 1);
  assert_non_null(strstr(t.e.msg, "predicate_tail"));
  rt_plans_free(&ps);
  harp_error_clear(&t.e);
  static const char ovtext2[] = "split m 40; split n 32; split k 64;\nwarp_tile 4x32;\nvectorize n.i.i 16;\n";
  ov.text = ovtext2;
  assert_ok(&t.e, plan_parse(ovtext2, "o.plan", PLAN_ARCH_CPU, &ov.plan, &t.e));
  assert_ok(&t.e, rt_plans_choose(&t.e, t.p, t.g, &t.syms, &t.m, &po, &ps));
  assert_int_equal(ps.choice[0].source, RT_PLAN_OVERRIDE);
  assert_int_equal(ps.choice[0].plan.nepi, 2); /* filled from the region: bias, relu */
  /* a plan the template refuses (bypassing validation: a 40-column micro-tile
   * is no multiple of the vector): built-in tuning, said in the C and the note */
  ps.choice[0].plan.warp_n = 40;
  ps.choice[0].plan.tile[1] = 40;
  emit(&t, &ps, &x);
  if (t.m.avx512 || t.m.avx2) {
    assert_false(ps.choice[0].applied);
    assert_true(ps.choice[0].fallback);
    assert_non_null(strstr(ps.choice[0].note, "refused"));
    assert_non_null(strstr(x.src.buf, "NOT applied"));
  }
  emitted_free(&x);
  rt_plans_free(&ps);
  rt_plan_override bad = {"nope", ov.plan, "x.plan", NULL, RT_PLAN_OVERRIDE};
  po.overrides = &bad;
  assert_int_equal(rt_plans_choose(&t.e, t.p, t.g, &t.syms, &t.m, &po, &ps), HARP_E_INVALID_ARG);
  assert_non_null(strstr(t.e.msg, "region 'nope'"));
  assert_non_null(strstr(t.e.msg, name));
  rt_plans_free(&ps);
  harp_error_clear(&t.e);
  /* split-K is not a CPU algorithm */
  assert_ok(&t.e, plan_parse("split m 40; split n 32; split k 64;\nwarp_tile 4x32; vectorize n.i.i 16;\n"
                             "algo_choice matmul splitk_serial;\n",
                             "s.plan", PLAN_ARCH_CPU, &ov.plan, &t.e));
  po.overrides = &ov;
  ov.text = NULL;
  assert_int_equal(rt_plans_choose(&t.e, t.p, t.g, &t.syms, &t.m, &po, &ps), HARP_E_UNSUPPORTED);
  assert_int_equal(t.e.line, 3);
  rt_plans_free(&ps);
  rgt_free(&t);
  rm_tree(dir);
}

/* --plan arguments: REGION=FILE (JSON or DSL), FILE (a plan list), errors */
static void test_overrides_load(void **state) {
  (void)state;
  harp_error e = {0};
  char dir[512], f1[600], f2[600], f3[600], arg[700];
  tmpdir(dir, sizeof dir);
  snprintf(f1, sizeof f1, "%s/a.plan", dir);
  snprintf(f2, sizeof f2, "%s/l.json", dir);
  snprintf(f3, sizeof f3, "%s/one.json", dir);
  spit(f1, "split m 64; split n 64; split k 64\n");
  spit(f2, LIST);
  spit(f3, "{\"tile\": [32, 32, 32]}");
  rt_plan_override *ov = NULL;
  char **keep = NULL;
  int n = 0, nk = 0;
  snprintf(arg, sizeof arg, "relu=%s", f1);
  assert_ok(&e, rt_plan_overrides_load(&e, arg, PLAN_ARCH_CPU, &ov, &n, &keep, &nk));
  assert_ok(&e, rt_plan_overrides_load(&e, f2, PLAN_ARCH_CPU, &ov, &n, &keep, &nk));
  snprintf(arg, sizeof arg, "X=%s", f3);
  assert_ok(&e, rt_plan_overrides_load(&e, arg, PLAN_ARCH_CPU, &ov, &n, &keep, &nk));
  assert_int_equal(n, 3); /* relu, C (the list's null plan is skipped), X */
  assert_string_equal(ov[0].region, "relu");
  assert_int_equal(ov[0].plan.tile[0], 64);
  assert_string_equal(ov[0].file, f1);
  assert_string_equal(ov[1].region, "C");
  assert_int_equal(ov[1].plan.tile[1], 512);
  assert_non_null(strstr(ov[1].text, "\"plans\""));
  assert_string_equal(ov[2].region, "X");
  /* a single plan without REGION=, a missing file, a list without the region */
  assert_int_equal(rt_plan_overrides_load(&e, f1, PLAN_ARCH_CPU, &ov, &n, &keep, &nk), HARP_E_USAGE);
  harp_error_clear(&e);
  snprintf(arg, sizeof arg, "%s/missing.plan", dir);
  assert_int_equal(rt_plan_overrides_load(&e, arg, PLAN_ARCH_CPU, &ov, &n, &keep, &nk), HARP_E_IO);
  harp_error_clear(&e);
  snprintf(arg, sizeof arg, "zz=%s", f2);
  assert_int_equal(rt_plan_overrides_load(&e, arg, PLAN_ARCH_CPU, &ov, &n, &keep, &nk), HARP_E_INVALID_ARG);
  harp_error_clear(&e);
  spit(f1, "split m 64;\nsplit q;\n");
  snprintf(arg, sizeof arg, "relu=%s", f1);
  assert_int_equal(rt_plan_overrides_load(&e, arg, PLAN_ARCH_CPU, &ov, &n, &keep, &nk), HARP_E_PARSE);
  assert_int_equal(e.line, 2);
  assert_int_equal(n, 3);
  for (int i = 0; i < nk; i++) free(keep[i]);
  free(keep);
  free(ov);
  rm_tree(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_shapeset_classes), cmocka_unit_test(test_shapeset_key),
      cmocka_unit_test(test_plan_list),        cmocka_unit_test(test_retarget),
      cmocka_unit_test(test_plan_cache),       cmocka_unit_test(test_spearman),
      cmocka_unit_test(test_csv_log),          cmocka_unit_test(test_choose_and_follow),
      cmocka_unit_test(test_overrides_load),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
