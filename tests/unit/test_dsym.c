/* test_dsym.c — derived shape symbols (tiny_dsym, hg_lower_derive): a size
 * that is an expression of a ShapeSet's symbols ((H + 1)/2 after a stride-2
 * conv, n/4 after a Reshape) becomes a symbol of its own, bound with the
 * others, so one object serves the box:
 *  - tests/models/dsym_cnn.harp (a stride-2 conv, a stride-1 conv on its
 *    output with a residual, a 2x2 max pool) over H, W:
 *    one object, exact against the interpreter at the corners and between,
 *    odd sizes included;
 *  - dsym_reshape.harp over n: one object, exact; an n that 4 does not
 *    divide is refused before any kernel;
 *  - dsym_skip.json declares an input at a derived size: exact, and an
 *    input whose size disagrees with its definition is refused, naming it;
 *  - dsym_names.json adds two tensors whose last axes are of one size under
 *    two names: exact (the IndexBook keeps them right-aligned);
 *  - a ShapeSet preparation names a POOL's window count over named sizes
 *    (the causal mask's iota: M + 1) by a derived symbol;
 *  - derived symbols survive the Tiny JSON round trip, and the definitions
 *    the frontend's dims give evaluate as floor divisions, nested, scaled
 *    and multiplied (a ceiling, or a lost parenthesis, fails). */
#include "frontend/fe_int.h"
#include "sgen_testutil.h"

/* The CNN over H, W: the strided conv's sizes derived, one object, exact at
 * five bindings (both corners, odd and even, tall and wide). */
static void test_cnn_one_object(void **state) {
  (void)state;
  rt_sgen_sym box[] = {{"H", 7, 41}, {"W", 7, 37}, {"N", 1, 1}, {"C", 3, 3}, {"K", 8, 8}};
  rt_sgen *s = compile_box("dsym_cnn.harp", box, 5, false);
  if (getenv("DSYM_DEBUG")) fprintf(stderr, "%s\n", rt_sgen_source(s) ? rt_sgen_source(s) : rt_sgen_fallback(s));
  if (rt_sgen_fallback(s)) fail_msg("dsym_cnn: not one object: %s", rt_sgen_fallback(s));
  assert_non_null(strstr(rt_sgen_source(s), "hp_sym_[2]")); /* a derived size read at run time */
  static const char *const at[][6] = {{"H=7", "W=7", "N=1", "C=3", "K=8", NULL},   {"H=41", "W=37", "N=1", "C=3", "K=8", NULL},
                                      {"H=17", "W=23", "N=1", "C=3", "K=8", NULL}, {"H=33", "W=8", "N=1", "C=3", "K=8", NULL},
                                      {"H=8", "W=29", "N=1", "C=3", "K=8", NULL}};
  for (int b = 0; b < 5; b++) check_at(s, "dsym_cnn.harp", at[b], 1, 1e-4);
  assert_int_equal(rt_sgen_objects(s), 1);
  rt_sgen_free(s);
}

/* dsym_skip.json (y declared at ds_h = (H + 1) floordiv 2 rows) over H:
 * exact at odd and even H; a y of 9 rows where H = 19 gives 10 is refused
 * before any kernel, naming the derived size and both values. */
static void test_mismatch_refused(void **state) {
  (void)state;
  rt_sgen_sym box[] = {{"H", 3, 41}, {"N", 2, 2}};
  rt_sgen *s = compile_box("dsym_skip.json", box, 2, false);
  if (getenv("DSYM_DEBUG") && rt_sgen_fallback(s)) fprintf(stderr, "dsym_skip: %s\n", rt_sgen_fallback(s));
  static const char *const at[][3] = {{"H=3", "N=2", NULL}, {"H=41", "N=2", NULL}, {"H=20", "N=2", NULL}, {"H=19", "N=2", NULL}};
  for (int b = 0; b < 4; b++) check_at(s, "dsym_skip.json", at[b], 1, 0);
  harp_error e = {0};
  ut_tensor in[2] = {0}, out[1] = {0};
  assert_ok(&e, ut_tensor_alloc(&e, &in[0], TINY_FP32, 2, (int64_t[]){2, 19}));
  assert_ok(&e, ut_tensor_alloc(&e, &in[1], TINY_FP32, 2, (int64_t[]){2, 9}));
  assert_int_equal(rt_sgen_run(&e, s, in, 2, out), HARP_E_INPUT_MISMATCH);
  if (!strstr(e.msg, "ds_h is 9") || !strstr(e.msg, "(H + 1) floordiv 2 gives 10")) fail_msg("%s", e.msg);
  assert_null(out[0].data);
  ut_tensor_free(&in[0]);
  ut_tensor_free(&in[1]);
  rt_sgen_free(s);
}

/* dsym_names.json: x[3, W] + y[3, ds_w] with ds_w = 2*(W floordiv 2), two
 * names of one size at even W: exact (the axes right-aligned, not matched
 * by name) at four bindings; an odd W breaks the model (y's columns
 * disagree with the definition). */
static void test_two_names(void **state) {
  (void)state;
  rt_sgen_sym box[] = {{"W", 2, 64}};
  rt_sgen *s = compile_box("dsym_names.json", box, 1, false);
  static const char *const at[][2] = {{"W=2", NULL}, {"W=64", NULL}, {"W=18", NULL}, {"W=40", NULL}};
  for (int b = 0; b < 4; b++) check_at(s, "dsym_names.json", at[b], 1, 1e-6);
  harp_error e = {0};
  ut_tensor in[2] = {0}, out[1] = {0};
  assert_ok(&e, ut_tensor_alloc(&e, &in[0], TINY_FP32, 2, (int64_t[]){3, 7}));
  assert_ok(&e, ut_tensor_alloc(&e, &in[1], TINY_FP32, 2, (int64_t[]){3, 7}));
  assert_int_equal(rt_sgen_run(&e, s, in, 2, out), HARP_E_INPUT_MISMATCH);
  assert_null(out[0].data);
  ut_tensor_free(&in[0]);
  ut_tensor_free(&in[1]);
  rt_sgen_free(s);
}

/* A Reshape to n/4 rows over n: one object, exact; n = 10 breaks it. */
static void test_reshape_quarter(void **state) {
  (void)state;
  rt_sgen_sym box[] = {{"n", 4, 64}};
  rt_sgen *s = compile_box("dsym_reshape.harp", box, 1, false);
  if (rt_sgen_fallback(s)) fail_msg("dsym_reshape: not one object: %s", rt_sgen_fallback(s));
  static const char *const at[][2] = {{"n=4", NULL}, {"n=64", NULL}, {"n=28", NULL}, {"n=12", NULL}};
  for (int b = 0; b < 4; b++) check_at(s, "dsym_reshape.harp", at[b], 1, 1e-6);
  assert_int_equal(rt_sgen_objects(s), 1);
  harp_error e = {0};
  ut_tensor in[1] = {0}, out[1] = {0};
  assert_ok(&e, ut_tensor_alloc(&e, &in[0], TINY_FP32, 1, (int64_t[]){10}));
  assert_int_equal(rt_sgen_run(&e, s, in, 1, out), HARP_E_INPUT_MISMATCH);
  assert_non_null(strstr(e.msg, "this binding breaks the model"));
  assert_null(out[0].data);
  ut_tensor_free(&in[0]);
  rt_sgen_free(s);
}

/* The Tiny JSON keeps the derived symbols ("derived"), and they evaluate as
 * floor divisions; bad definitions are clear errors. */
static void test_json_round_trip(void **state) {
  (void)state;
  tiny_graph *g = load_model("dsym_cnn.harp");
  char *a = tiny_write_json(g);
  if (getenv("DSYM_DEBUG")) fprintf(stderr, "%s", a);
  assert_int_equal(g->ndsyms, 4); /* the conv's rows and columns, and the pool's (its windows named) */
  assert_non_null(strstr(a, "\"derived\""));
  assert_non_null(strstr(a, "\"ds_H_p1_d2\": \"(H + 1) floordiv 2\""));
  assert_non_null(strstr(a, "\"ds_W_p1_d2_d2\": \"(W + 1) floordiv 2 floordiv 2\""));
  harp_error e = {0};
  tiny_graph *h = NULL;
  assert_ok(&e, tiny_load_json(&e, a, strlen(a), "round", &h));
  char *b = tiny_write_json(h);
  assert_string_equal(a, b);
  tiny_symtab t;
  tiny_symtab_init(&t);
  assert_ok(&e, tiny_symtab_parse_assign(&e, &t, "H=7"));
  assert_ok(&e, tiny_dsym_bind(&e, h, &t));
  int64_t v = 0;
  assert_true(tiny_symtab_get(&t, "ds_H_p1_d2", &v));
  assert_int_equal(v, 4);
  tiny_symtab_free(&t);
  static const char *const bad[][2] = {{"{\"uops\": [], \"derived\": {\"a\": \"a + 1\"}}", "reads itself"},
                                       {"{\"uops\": [], \"derived\": {\"1x\": \"H\"}}", "not an identifier"},
                                       {"{\"uops\": [], \"derived\": {\"a\": 3}}", "must be a string"},
                                       {"{\"uops\": [], \"derived\": {\"a\": \"b + 1\", \"b\": \"H\"}}", "define it first"},
                                       {"{\"uops\": [], \"derived\": {\"a\": \"H +\"}}", "unexpected end"}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    tiny_graph *x = NULL;
    harp_error_clear(&e);
    assert_int_not_equal(tiny_load_json(&e, bad[i][0], strlen(bad[i][0]), "bad", &x), HARP_OK);
    if (!strstr(e.msg, bad[i][1])) fail_msg("case %zu: %s", i, e.msg);
    assert_null(x);
  }
  free(a);
  free(b);
  tiny_graph_free(g);
  tiny_graph_free(h);
}

/* fe_dim sizes as derived definitions: floor divisions, nested, under a
 * coefficient and in products, evaluated at odd and even sizes against
 * C's own arithmetic (H, W >= 1: / is floor). */
static void test_dim_text(void **state) {
  (void)state;
  ut_arena *A = ut_arena_new();
  const fe_dim *H = fe_dim_sym(A, "H"), *W = fe_dim_sym(A, "W");
  const fe_dim *h2 = fe_dim_div(A, fe_dim_add(A, H, fe_dim_int(A, 1)), 2); /* (H + 1)/2 */
  const fe_dim *d[] = {
      h2,
      fe_dim_div(A, fe_dim_add(A, h2, fe_dim_int(A, 1)), 2),                  /* ((H + 1)/2 + 1)/2 */
      fe_dim_add(A, fe_dim_scale(A, h2, 2), fe_dim_int(A, 1)),                /* 2*((H + 1)/2) + 1 */
      fe_dim_mul(A, h2, fe_dim_div(A, fe_dim_add(A, W, fe_dim_int(A, 3)), 4)), /* (H + 1)/2 * (W + 3)/4 */
      fe_dim_sub(A, fe_dim_div(A, H, 4), fe_dim_int(A, 1)),                   /* H/4 - 1 */
  };
  tiny_graph *g = tiny_graph_new();
  for (int i = 0; i < 5; i++) {
    char text[512], name[16];
    assert_true(fe_dim_tiny_text(d[i], text, sizeof text));
    snprintf(name, sizeof name, "d%d", i);
    if (tiny_dsym_add(g, name, text) < 0) fail_msg("%s: %s", text, g->err.msg);
  }
  for (int64_t h = 1; h <= 9; h++)
    for (int64_t w = 1; w <= 6; w++) {
      harp_error e = {0};
      tiny_symtab t;
      tiny_symtab_init(&t);
      assert_ok(&e, tiny_symtab_set(&e, &t, "H", h));
      assert_ok(&e, tiny_symtab_set(&e, &t, "W", w));
      if (h >= 4) assert_ok(&e, tiny_dsym_bind(&e, g, &t));
      else assert_int_equal(tiny_dsym_bind(&e, g, &t), HARP_E_AXIS_SIZE_MISMATCH); /* H/4 - 1 < 0 */
      const int64_t want[] = {(h + 1) / 2, ((h + 1) / 2 + 1) / 2, 2 * ((h + 1) / 2) + 1, (h + 1) / 2 * ((w + 3) / 4), h / 4 - 1};
      for (int i = 0; i < (h >= 4 ? 5 : 4); i++) {
        char name[16];
        int64_t v = -1;
        snprintf(name, sizeof name, "d%d", i);
        assert_true(tiny_symtab_get(&t, name, &v));
        if (v != want[i]) fail_msg("%s at H=%lld, W=%lld: %lld, want %lld", d[i]->text, (long long)h, (long long)w, (long long)v, (long long)want[i]);
      }
      tiny_symtab_free(&t);
    }
  assert_true(tiny_dsym_monotone(g->dsyms[3].def));
  assert_true(tiny_dsym_monotone(g->dsyms[4].def));
  /* a chain: d5 reads d0 (H), so H's readers are d0..d4 and d5 */
  assert_true(tiny_dsym_add(g, "d5", "d0 + d0") >= 0);
  bool reads[8] = {0};
  tiny_dsym_readers(g, "H", reads);
  for (int i = 0; i < 6; i++) assert_true(reads[i]);
  tiny_dsym_readers(g, "W", reads);
  assert_true(reads[3] && !reads[0] && !reads[5]);
  const tiny_expr *shrink = NULL;
  harp_error e = {0};
  assert_ok(&e, tiny_expr_parse(&e, g, "10 - H", 0, &shrink));
  assert_false(tiny_dsym_monotone(shrink));
  for (int i = 6; i < TINY_MAX_DSYMS; i++) { /* the limit: a clear error past it */
    char name[16];
    snprintf(name, sizeof name, "e%d", i);
    assert_true(tiny_dsym_add(g, name, "H + 1") >= 0);
  }
  assert_int_equal(tiny_dsym_add(g, "over", "H + 1"), -1);
  assert_int_equal(g->err.code, HARP_E_LIMIT);
  tiny_graph_free(g);
  ut_arena_free(A);
}

/* g's node id prepared at syms ("M=7", ...; ShapeSet: sym_broadcasts) in a
 * copy; its axis a's name into name[cap] ("" when none), its size the result. */
static int64_t axis_at(const tiny_graph *g, const char *id, int a, const char *const *syms, bool shapeset, char *name, size_t cap) {
  harp_error e = {0};
  char *text = tiny_write_json(g);
  tiny_graph *h = NULL;
  tiny_symtab t;
  tiny_symtab_init(&t);
  t.sym_broadcasts = shapeset;
  assert_ok(&e, tiny_load_json(&e, text, strlen(text), "copy", &h));
  for (int i = 0; syms[i]; i++) assert_ok(&e, tiny_symtab_parse_assign(&e, &t, syms[i]));
  assert_ok(&e, tiny_prepare(&e, h, &t, false));
  int k = tiny_find(h, id);
  assert_true(k >= 0);
  const tiny_dim *d = &h->nodes[k].shape.d[a];
  name[0] = 0;
  if (d->sym) {
    int q = tiny_dsym_find(h, d->sym);
    char def[128] = "";
    if (q >= 0) tiny_expr_print(h->dsyms[q].def, def, sizeof def);
    snprintf(name, cap, "%s := %s", d->sym, q >= 0 ? def : d->sym);
  }
  int64_t n = d->n;
  tiny_symtab_free(&t);
  tiny_graph_free(h);
  free(text);
  return n;
}

/* A ShapeSet preparation names a POOL's window count over sizes of named
 * symbols (tiny_infer_move: the causal mask's iota, M windows over M padded
 * by M): a derived symbol of its expression, the same at every binding; a
 * stride a floor division; an axis with no name, or an ordinary
 * preparation, names nothing. */
static void test_window_count_named(void **state) {
  (void)state;
  tiny_graph *g = load_model("attention_full_causal.json");
  char name[256];
  const char *at24[] = {"B=1", "H=2", "N=24", "D=16", "Dv=16", "M=24", NULL}, *at7[] = {"B=1", "H=2", "N=24", "D=16", "Dv=16", "M=7", NULL};
  assert_int_equal(axis_at(g, "t11", 0, at24, true, name, sizeof name), 25);
  assert_string_equal(name, "ds_M_p1 := M + 1");
  assert_int_equal(axis_at(g, "t11", 0, at7, true, name, sizeof name), 8);
  assert_string_equal(name, "ds_M_p1 := M + 1");
  assert_int_equal(axis_at(g, "t11", 1, at7, true, name, sizeof name), 7); /* the kernel's axis keeps its own */
  assert_string_equal(name, "M := M");
  assert_int_equal(axis_at(g, "t11", 0, at7, false, name, sizeof name), 8); /* ordinary: as before */
  assert_string_equal(name, "");
  tiny_graph_free(g);
  static const char *strided = "{\"uops\": [{\"id\": \"x\", \"uop\": \"INPUT\", \"arg\": {\"tensor_id\": \"x\", \"dtype\": \"fp32\", "
                               "\"shape\": [\"L\", 6]}},\n {\"id\": \"p\", \"uop\": \"PAD\", \"src\": [\"x\"], \"arg\": {\"pad\": [[1, 1], [0, 1]]}},\n"
                               " {\"id\": \"w\", \"uop\": \"POOL\", \"src\": [\"p\"], \"arg\": {\"kernel\": [3, 2], \"stride\": [2, 1]}}]}";
  harp_error e = {0};
  assert_ok(&e, tiny_load_json(&e, strided, strlen(strided), "strided", &g));
  const char *l9[] = {"L=9", NULL}, *l10[] = {"L=10", NULL}, *l12[] = {"L=12", NULL};
  assert_int_equal(axis_at(g, "w", 0, l9, true, name, sizeof name), 5); /* (9 + 2 - 3) / 2 + 1 */
  assert_string_equal(name, "ds_L_m1floordiv2_p1 := (L + (-1)) floordiv 2 + 1");
  assert_int_equal(axis_at(g, "w", 0, l10, true, name, sizeof name), 5);
  assert_int_equal(axis_at(g, "w", 0, l12, true, name, sizeof name), 6);
  assert_string_equal(name, "ds_L_m1floordiv2_p1 := (L + (-1)) floordiv 2 + 1");
  assert_int_equal(axis_at(g, "w", 1, l9, true, name, sizeof name), 6); /* 6 + 1 - 2 + 1 windows: no name to go by */
  assert_string_equal(name, "");
  tiny_graph_free(g);
}

/* Whether derived symbol k of g never shrinks as H or W steps by one over
 * H, W in 0..40 (the reference: every binding evaluated). */
static bool steps_up_by_values(const tiny_graph *g, int k) {
  int64_t v[41][41];
  for (int64_t h = 0; h <= 40; h++)
    for (int64_t w = 0; w <= 40; w++) {
      harp_error e = {0};
      tiny_symtab t;
      tiny_symtab_init(&t);
      assert_ok(&e, tiny_symtab_set(&e, &t, "H", h));
      assert_ok(&e, tiny_symtab_set(&e, &t, "W", w));
      int64_t dd = 0;
      assert_true(tiny_expr_eval(g->dsyms[0].def, NULL, &t, &dd)); /* dd, the one the others read */
      assert_ok(&e, tiny_symtab_set(&e, &t, g->dsyms[0].name, dd));
      assert_true(tiny_expr_eval(g->dsyms[k].def, NULL, &t, &v[h][w]));
      tiny_symtab_free(&t);
    }
  for (int h = 0; h <= 40; h++)
    for (int w = 0; w <= 40; w++)
      if ((h < 40 && v[h + 1][w] < v[h][w]) || (w < 40 && v[h][w + 1] < v[h][w])) return false;
  return true;
}

/* tiny_dsym_steps_up: growth proven from the form (the least change of each
 * term as one symbol steps by one) where a term is negative: ceilings and
 * roundings as the importer spells them pass, sizes that do shrink (10 - H,
 * H mod 2 spelled H - 2 * (H / 2), a derived 2 * H read through its
 * definition, a product of changing terms, a remainder) do not; each answer against every binding's value. */
static void test_steps_up(void **state) {
  (void)state;
  tiny_graph *g = tiny_graph_new();
  assert_true(tiny_dsym_add(g, "dd", "2 * H") >= 0);
  const struct {
    const char *def;
    bool up;
  } rows[] = {
      {"(-1) * (2 * H floordiv 3) + H", true},       /* ceil(H / 3) */
      {"H + (-1) * ((2 * H + 1) floordiv 3)", true}, /* round(H / 3) */
      {"H - (dd floordiv 3)", true},                 /* H - floor(2H / 3) through dd */
      {"H - dd floordiv 2", true},                   /* 0 */
      {"W - (H + W) floordiv 2", false},             /* shrinks as H grows */
      {"10 - H", false},
      {"H - 2 * (H floordiv 2)", false},             /* H mod 2 */
      {"H - 2 * (dd floordiv 3)", false},            /* shrinks: read through dd, not as a constant */
      {"(H + 5) floordiv 3 * 4 + W", true},
      {"(10 - H) * H", false},                       /* two changing factors */
      {"H % 3", false},
  };
  for (int i = 0; i < (int)(sizeof rows / sizeof rows[0]); i++) {
    char name[16];
    snprintf(name, sizeof name, "s%d", i);
    int k = tiny_dsym_add(g, name, rows[i].def);
    if (k < 0) fail_msg("%s: %s", rows[i].def, g->err.msg);
    bool proven = tiny_dsym_steps_up(g, g->dsyms[k].def), ref = steps_up_by_values(g, k);
    if (proven && !ref) fail_msg("%s: proven, yet it shrinks", rows[i].def);
    if (proven != rows[i].up || ref != rows[i].up)
      fail_msg("%s: proven %d, by values %d, want %d", rows[i].def, proven, ref, rows[i].up);
  }
  tiny_graph_free(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_dim_text),
      cmocka_unit_test(test_json_round_trip),
      cmocka_unit_test(test_reshape_quarter),
      cmocka_unit_test(test_cnn_one_object),
      cmocka_unit_test(test_mismatch_refused),
      cmocka_unit_test(test_two_names),
      cmocka_unit_test(test_window_count_named),
      cmocka_unit_test(test_steps_up),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
