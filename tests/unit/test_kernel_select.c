/* test_kernel_select.c — the kernel layer (src/kernel/select.c): which
 * kernel a region gets on a target described as data, and the reason it
 * records when a template declines — the order of the candidates, a
 * target's limits (conv tiles, K/V dtypes, the elementwise kernel's ops),
 * and what a printer's refusal does under each decline rule. */
#include "kernel/kernel.h"
#include "rgtest.h"

/* A model formed for the CPU and its Function. */
typedef struct ks {
  rgt t;
  fn_function *f;
  ct_src src;
} ks;

static void ks_load(ks *k, const char *model, const char *const *syms) {
  rgt_load(&k->t, model, syms);
  rgt_form(&k->t, PLAN_ARCH_CPU);
  assert_ok(&k->t.e, fn_build(&k->t.e, k->t.p, "main", &k->f));
  k->src = (ct_src){k->t.g, k->t.p->formed->pv, k->f, false, false, false, NULL, 0};
}

static void ks_free(ks *k) {
  fn_free(k->f);
  rgt_free(&k->t);
}

/* The kernel running the region that computes node `id`. */
static int ks_kernel(const ks *k, const char *id) {
  int region = (int)(rgt_region_of(&k->t, id) - k->t.p->regions);
  for (int r = 0; r < k->f->nkernels; r++)
    if (k->f->kernels[r].region == region) return r;
  fail_msg("no kernel runs the region of %s", id);
  return -1;
}

static bool all_ops(tiny_op op) { return op != TINY_LOG2; }
static bool no_exp2(tiny_op op) { return op != TINY_EXP2 && op != TINY_LOG2; }

/* A target with every template and no limits; tests change what they test. */
static kn_target base_target(void) {
  return (kn_target){.name = "TEST",
                     .cell = true,
                     .nrows = 4,
                     .rows = {{KN_SOFTMAX, KN_DECLINE_STOP}, {KN_LAYERNORM, KN_DECLINE_NEXT}, {KN_REDUCE, KN_DECLINE_NEXT},
                              {KN_EWISE, KN_DECLINE_NEXT}},
                     .conv_depthwise = true,
                     .map_op = all_ops,
                     .ewise = {CT_EW_MAX_RANK, CT_EW_MAX_IN, CT_EW_MAX_INSTR, all_ops}};
}

static void test_order_and_rules(void **state) {
  (void)state;
  ks k;
  ks_load(&k, "softmax_rows.json", (const char *const[]){"R=8", "L=64", NULL});
  int r = ks_kernel(&k, "out");
  kn_target t = base_target();
  kn_sel s;
  assert_ok(&k.t.e, kn_select(&s, &t, &k.src, r, 0, &k.t.e));
  assert_int_equal(s.kind, KN_SOFTMAX);
  assert_int_equal(s.first, KN_SOFTMAX);
  assert_int_equal(s.u.softmax.cols, 64);
  assert_null(s.why);
  /* the printer refuses; STOP: the loop nest, with its reason */
  assert_ok(&k.t.e, kn_decline(&s, "refused for the test"));
  assert_int_equal(s.kind, KN_GENERIC);
  assert_string_equal(s.why, "refused for the test");
  assert_int_equal(s.why_kind, KN_SOFTMAX);
  kn_sel_free(&s);
  /* NEXT: the later templates are read (none takes a softmax), the reason kept */
  t.rows[0].on_decline = KN_DECLINE_NEXT;
  assert_ok(&k.t.e, kn_select(&s, &t, &k.src, r, 0, &k.t.e));
  assert_ok(&k.t.e, kn_decline(&s, "refused for the test"));
  assert_int_equal(s.kind, KN_GENERIC);
  assert_string_equal(s.why, "refused for the test");
  kn_sel_free(&s);
  /* QUIET: dropped */
  t.rows[0].on_decline = KN_DECLINE_QUIET;
  assert_ok(&k.t.e, kn_select(&s, &t, &k.src, r, 0, &k.t.e));
  assert_ok(&k.t.e, kn_decline(&s, "refused for the test"));
  assert_int_equal(s.kind, KN_GENERIC);
  assert_null(s.why);
  kn_sel_free(&s);
  /* no row templates at all (HARP_NO_TEMPLATES on the CPU) */
  assert_ok(&k.t.e, kn_select(&s, &t, &k.src, r, KN_NO_ROW_TEMPLATES, &k.t.e));
  assert_int_equal(s.kind, KN_GENERIC);
  assert_null(s.why);
  kn_sel_free(&s);
  /* a target without a softmax template: the order moves on */
  t.rows[0].kind = KN_CONCAT;
  t.rows[0].on_decline = KN_DECLINE_QUIET;
  assert_ok(&k.t.e, kn_select(&s, &t, &k.src, r, 0, &k.t.e));
  assert_int_equal(s.kind, KN_CONCAT); /* the concatenation printer reads the region itself */
  assert_int_equal(s.step, 0);
  kn_sel_free(&s);
  ks_free(&k);
}

/* exp(x) + 1 over [4, 64]: an elementwise chain, then a row sum. */
static const char ewise_model[] =
    "{\"uops\": [{\"id\": \"x\", \"uop\": \"INPUT\", \"arg\": {\"tensor_id\": \"X\", \"dtype\": \"fp32\", \"shape\": [4, 64]}},"
    " {\"id\": \"e\", \"uop\": \"EXP2\", \"src\": [\"x\"]},"
    " {\"id\": \"y\", \"uop\": \"ADD\", \"src\": [\"e\", 1.0]}], \"outputs\": [\"y\"]}";
static const char reduce_model[] =
    "{\"uops\": [{\"id\": \"x\", \"uop\": \"INPUT\", \"arg\": {\"tensor_id\": \"X\", \"dtype\": \"fp32\", \"shape\": [4, 64]}},"
    " {\"id\": \"y\", \"uop\": \"REDUCE\", \"src\": [\"x\"], \"arg\": {\"op\": \"SUM\", \"axes\": [1], \"dtype\": \"fp32\"}}],"
    " \"outputs\": [\"y\"]}";

static void test_ewise_and_reduce(void **state) {
  (void)state;
  ks k;
  ks_load(&k, ewise_model, NULL);
  int r = ks_kernel(&k, "y");
  kn_target t = base_target();
  kn_sel s;
  assert_ok(&k.t.e, kn_select(&s, &t, &k.src, r, 0, &k.t.e));
  assert_int_equal(s.kind, KN_EWISE);
  assert_int_equal(s.u.ewise.rank, 2);
  assert_int_equal(s.u.ewise.ninputs, 1);
  assert_int_equal(s.u.ewise.ninstr, 4); /* load, exp2, the constant, add */
  assert_int_equal(s.u.ewise.instr[3].op, TINY_ADD);
  assert_int_equal(s.u.ewise.in[0].strides[0], 64);
  assert_int_equal(s.u.ewise.in[0].strides[1], 1);
  kn_sel_free(&s);
  /* an op the target's kernel lacks: no such chain, the loop nest */
  t.ewise.op_ok = no_exp2;
  assert_ok(&k.t.e, kn_select(&s, &t, &k.src, r, 0, &k.t.e));
  assert_int_equal(s.kind, KN_GENERIC);
  kn_sel_free(&s);
  /* too few instructions: no such chain either; four are just enough */
  t = base_target();
  t.ewise.max_instr = 3;
  assert_ok(&k.t.e, kn_select(&s, &t, &k.src, r, 0, &k.t.e));
  assert_int_equal(s.kind, KN_GENERIC);
  kn_sel_free(&s);
  t.ewise.max_instr = 4;
  assert_ok(&k.t.e, kn_select(&s, &t, &k.src, r, 0, &k.t.e));
  assert_int_equal(s.kind, KN_EWISE);
  kn_sel_free(&s);
  /* a refusal under STOP ends the search even where a later step would take the region */
  t = base_target();
  t.nrows = 2;
  t.rows[0] = (kn_step){KN_EWISE, KN_DECLINE_STOP};
  t.rows[1] = (kn_step){KN_EWISE, KN_DECLINE_NEXT};
  assert_ok(&k.t.e, kn_select(&s, &t, &k.src, r, 0, &k.t.e));
  assert_int_equal(s.step, 0);
  assert_ok(&k.t.e, kn_decline(&s, "no"));
  assert_int_equal(s.kind, KN_GENERIC);
  kn_sel_free(&s);
  t.rows[0].on_decline = KN_DECLINE_NEXT; /* under NEXT the second step takes it */
  assert_ok(&k.t.e, kn_select(&s, &t, &k.src, r, 0, &k.t.e));
  assert_ok(&k.t.e, kn_decline(&s, "no"));
  assert_int_equal(s.kind, KN_EWISE);
  assert_int_equal(s.step, 1);
  assert_string_equal(s.why, "no");
  kn_sel_free(&s);
  ks_free(&k);

  ks_load(&k, reduce_model, NULL);
  r = ks_kernel(&k, "y");
  t = base_target();
  assert_ok(&k.t.e, kn_select(&s, &t, &k.src, r, 0, &k.t.e));
  assert_int_equal(s.kind, KN_REDUCE);
  assert_int_equal(s.u.reduce.outer * s.u.reduce.inner, 4);
  assert_int_equal(s.u.reduce.red, 64);
  assert_int_equal(s.u.reduce.s_red, 1);
  assert_int_equal(s.u.reduce.op, TINY_RSUM);
  kn_sel_free(&s);
  ks_free(&k);
}

static int64_t one_tile(const ct_conv *cv) {
  (void)cv;
  return 1;
}
static int64_t many_tiles(const ct_conv *cv) {
  (void)cv;
  return 1000;
}

static void test_contractions(void **state) {
  (void)state;
  ks k;
  ks_load(&k, "conv3x3_bias_silu.json", (const char *const[]){"N=1", "C=32", "H=16", "W=16", "O=32", NULL});
  int r = -1;
  for (int q = 0; q < k.f->nkernels && r < 0; q++) {
    kn_target t = base_target();
    kn_sel s;
    assert_ok(&k.t.e, kn_select(&s, &t, &k.src, q, 0, &k.t.e));
    if (s.kind == KN_CONV) r = q;
    kn_sel_free(&s);
  }
  assert_true(r >= 0);
  kn_target t = base_target();
  kn_sel s;
  /* few output tiles over a long reduction: the loop nest, said so */
  t.conv_tiles = one_tile, t.conv_few_tiles = 32, t.conv_long_k = 1;
  assert_ok(&k.t.e, kn_select(&s, &t, &k.src, r, 0, &k.t.e));
  assert_int_equal(s.kind, KN_GENERIC);
  assert_int_equal(s.first, KN_CONV);
  assert_int_equal(s.why_kind, KN_CONV);
  assert_non_null(strstr(s.why, "few output tiles"));
  kn_sel_free(&s);
  /* enough tiles, or a reduction too short to matter */
  t.conv_tiles = many_tiles;
  assert_ok(&k.t.e, kn_select(&s, &t, &k.src, r, 0, &k.t.e));
  assert_int_equal(s.kind, KN_CONV);
  kn_sel_free(&s);
  t.conv_tiles = one_tile, t.conv_long_k = (int64_t)1 << 40;
  assert_ok(&k.t.e, kn_select(&s, &t, &k.src, r, 0, &k.t.e));
  assert_int_equal(s.kind, KN_CONV);
  /* a contraction's printer refusing ends the search, whatever the rows say */
  assert_ok(&k.t.e, kn_decline(&s, "the template refused the shape"));
  assert_int_equal(s.kind, KN_GENERIC);
  assert_true(kn_is_contraction(s.why_kind));
  assert_string_equal(s.why, "the template refused the shape");
  kn_sel_free(&s);
  ks_free(&k);

  ks_load(&k, "attention_full.json", (const char *const[]){"B=1", "H=2", "M=16", "N=16", "D=16", "Dv=16", NULL});
  r = ks_kernel(&k, "out");
  t = base_target();
  assert_ok(&k.t.e, kn_select(&s, &t, &k.src, r, 0, &k.t.e));
  assert_int_equal(s.kind, KN_ATTENTION);
  assert_string_equal(kn_kind_name(s.kind), "attention");
  kn_sel_free(&s);
  ks_free(&k);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_order_and_rules),
      cmocka_unit_test(test_ewise_and_reduce),
      cmocka_unit_test(test_contractions),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
