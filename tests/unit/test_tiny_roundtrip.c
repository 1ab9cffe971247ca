/* test_tiny_roundtrip.c — load -> write -> load gives the same graph, for
 * every model in tests/models (raw and normalized); the builder API makes the
 * same graph as JSON; allocation failures at every point are clean errors. */
#include <dirent.h>
#include <math.h>

#include "testutil.h"
#include "util/util.h"

static void assert_same_graph(const tiny_graph *a, const tiny_graph *b) {
  assert_int_equal(a->n, b->n);
  for (int i = 0; i < a->n; i++) {
    const tiny_node *x = &a->nodes[i], *y = &b->nodes[i];
    assert_string_equal(x->id, y->id);
    assert_int_equal(x->op, y->op);
    assert_int_equal(x->nsrc, y->nsrc);
    for (int k = 0; k < x->nsrc; k++) {
      assert_int_equal(x->src[k].node, y->src[k].node);
      if (x->src[k].node < 0) assert_true(x->src[k].imm == y->src[k].imm);
    }
    if ((x->tag == NULL) != (y->tag == NULL)) fail_msg("tag differs at %s", x->id);
    if (x->tag) assert_string_equal(x->tag, y->tag);
  }
  assert_int_equal(a->explicit_outputs, b->explicit_outputs);
  if (a->explicit_outputs) {
    assert_int_equal(a->noutputs, b->noutputs);
    for (int k = 0; k < a->noutputs; k++) assert_int_equal(a->outputs[k], b->outputs[k]);
  }
  /* Arguments are compared through their canonical text: write both. */
  char *ta = tiny_write_json(a), *tb = tiny_write_json(b);
  assert_non_null(ta);
  assert_non_null(tb);
  assert_string_equal(ta, tb);
  free(ta);
  free(tb);
}

static tiny_graph *reload(const tiny_graph *g) {
  harp_error e = {0};
  char *text = tiny_write_json(g);
  assert_non_null(text);
  tiny_graph *h = NULL;
  assert_ok(&e, tiny_load_json(&e, text, strlen(text), "roundtrip.json", &h));
  free(text);
  return h;
}

static void roundtrip_file(const char *path, bool normalize) {
  harp_error e = {0};
  tiny_graph *g = NULL;
  assert_ok(&e, tiny_load_file(&e, path, &g));
  if (normalize) {
    tiny_symtab syms;
    tiny_symtab_init(&syms);
    assert_ok(&e, tiny_prepare(&e, g, &syms, true));
    tiny_symtab_free(&syms);
  }
  tiny_graph *h = reload(g);
  assert_same_graph(g, h);
  tiny_graph *k = reload(h);
  assert_same_graph(h, k);
  tiny_graph_free(g);
  tiny_graph_free(h);
  tiny_graph_free(k);
}

static void test_models_roundtrip(void **state) {
  (void)state;
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/tests/models", HARP_SOURCE_DIR);
  DIR *d = opendir(dir);
  assert_non_null(d);
  int count = 0;
  for (struct dirent *de; (de = readdir(d));) {
    size_t n = strlen(de->d_name);
    if (n < 5 || strcmp(de->d_name + n - 5, ".json")) continue;
    char path[2048];
    snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
    roundtrip_file(path, false);
    roundtrip_file(path, true);
    count++;
  }
  closedir(d);
  assert_true(count >= 4);
}

/* Expressions print and re-parse to the same text. */
/* A non-finite immediate source is written as "inf" / "-inf" / "nan" and
 * read back as that immediate (a node of that id would come first). */
static void test_nonfinite_immediates(void **state) {
  (void)state;
  static const char text[] = "{\"uops\": [{\"id\": \"x\", \"uop\": \"INPUT\", \"arg\": {\"tensor_id\": \"X\", "
                             "\"dtype\": \"fp32\", \"shape\": [4]}},"
                             "{\"id\": \"m\", \"uop\": \"MAX\", \"src\": [\"x\", \"-inf\"]},"
                             "{\"id\": \"a\", \"uop\": \"ADD\", \"src\": [\"m\", \"inf\"]},"
                             "{\"id\": \"n\", \"uop\": \"ADD\", \"src\": [\"a\", \"nan\"]}]}";
  harp_error e = {0};
  tiny_graph *g = NULL;
  assert_ok(&e, tiny_load_json(&e, text, strlen(text), "nonfinite.json", &g));
  assert_int_equal(g->nodes[1].src[1].node, -1);
  assert_true(isinf(g->nodes[1].src[1].imm) && g->nodes[1].src[1].imm < 0);
  assert_true(isinf(g->nodes[2].src[1].imm) && g->nodes[2].src[1].imm > 0);
  assert_true(isnan(g->nodes[3].src[1].imm));
  tiny_graph *h = reload(g);
  assert_int_equal(h->nodes[1].src[1].node, -1);
  assert_true(isinf(h->nodes[1].src[1].imm) && h->nodes[1].src[1].imm < 0);
  assert_true(isnan(h->nodes[3].src[1].imm));
  tiny_graph_free(g);
  tiny_graph_free(h);
}

static void test_expr_roundtrip(void **state) {
  (void)state;
  const char *exprs[] = {"i0", "2*i0 + i1", "i0 floordiv 4", "(i0 + 3) % 5", "-1*i0 + 7", "Sh*i2 + Dh*i4",
                         "(i0*3 + i1) floordiv 2 + i2 % 3", "i0 // 2", "i0 - i1", "-(i0 + 2)"};
  tiny_graph *g = tiny_graph_new();
  for (size_t i = 0; i < sizeof exprs / sizeof exprs[0]; i++) {
    harp_error e = {0};
    const tiny_expr *x, *y;
    assert_ok(&e, tiny_expr_parse(&e, g, exprs[i], 5, &x));
    char a[256], b[256];
    tiny_expr_print(x, a, sizeof a);
    assert_ok(&e, tiny_expr_parse(&e, g, a, 5, &y));
    tiny_expr_print(y, b, sizeof b);
    assert_string_equal(a, b);
    /* and evaluate the same */
    int64_t vars[5] = {7, 3, 2, 1, 4}, va, vb;
    tiny_symtab syms;
    tiny_symtab_init(&syms);
    tiny_symtab_set(&e, &syms, "Sh", 2);
    tiny_symtab_set(&e, &syms, "Dh", 3);
    assert_true(tiny_expr_eval(x, vars, &syms, &va));
    assert_true(tiny_expr_eval(y, vars, &syms, &vb));
    assert_int_equal(va, vb);
    tiny_symtab_free(&syms);
  }
  tiny_graph_free(g);
}

/* The builder API gives the graph the JSON loader gives. */
static void test_builder_matches_json(void **state) {
  (void)state;
  tiny_graph *g = tiny_graph_new();
  const char *ab[] = {"M", "K"}, *bb[] = {"K", "N"};
  tiny_shape sa = tiny_shape_syms(2, ab), sb = tiny_shape_syms(2, bb);
  int a = tiny_b_input(g, "A", TINY_FP32, &sa);
  int b = tiny_b_input(g, "B", TINY_FP32, &sb);
  const char *a3[] = {"M", "K", NULL}, *b3[] = {NULL, "K", "N"};
  tiny_shape ra = tiny_shape_syms(3, a3), rb = tiny_shape_syms(3, b3);
  int x = tiny_b_reshape(g, a, &ra);
  int y = tiny_b_reshape(g, b, &rb);
  int m = tiny_b_binary(g, TINY_MUL, x, y);
  int axes[] = {1};
  int r = tiny_b_reduce(g, m, TINY_RSUM, axes, 1, TINY_FP32);
  assert_true(r >= 0);
  assert_int_equal(g->err.code, HARP_OK);
  harp_error e = {0};
  tiny_symtab syms;
  tiny_symtab_init(&syms);
  tiny_symtab_set(&e, &syms, "M", 2);
  tiny_symtab_set(&e, &syms, "K", 3);
  tiny_symtab_set(&e, &syms, "N", 4);
  assert_ok(&e, tiny_prepare(&e, g, &syms, false));
  const tiny_node *out = &g->nodes[g->outputs[0]];
  assert_int_equal(out->shape.rank, 2);
  assert_int_equal(out->shape.d[0].n, 2);
  assert_int_equal(out->shape.d[1].n, 4);
  tiny_graph *h = reload(g);
  assert_same_graph(g, h);
  tiny_graph_free(h);
  /* a builder error sticks and is reported once */
  assert_int_equal(tiny_b_binary(g, TINY_ADD, 0, 999), -1);
  assert_int_equal(g->err.code, HARP_E_DANGLING);
  assert_int_equal(tiny_b_unary(g, TINY_NEG, 0), -1);
  tiny_symtab_free(&syms);
  tiny_graph_free(g);
}

/* Fail the Nth allocation for every N until the whole pipeline succeeds:
 * each failure must be a clean HARP_E_NO_MEMORY (ASan checks for leaks). */
static void test_fault_injection(void **state) {
  (void)state;
  char path[1024];
  snprintf(path, sizeof path, "%s/tests/models/seed001_attention.json", HARP_SOURCE_DIR);
  char *text;
  size_t len;
  harp_error e0 = {0};
  assert_ok(&e0, ut_read_file(&e0, path, 1 << 20, &text, &len));
  int failures = 0;
  for (long n = 1; n < 100000; n++) {
    harp_error e = {0};
    tiny_graph *g = NULL;
    tiny_symtab syms;
    tiny_symtab_init(&syms);
    ut_fault_fail_nth_alloc(n);
    harp_status st = tiny_load_json(&e, text, len, "a.json", &g);
    if (!st) st = tiny_symtab_parse_assign(&e, &syms, "B=1");
    if (!st) st = tiny_symtab_parse_assign(&e, &syms, "H=2");
    if (!st) st = tiny_symtab_parse_assign(&e, &syms, "M=3");
    if (!st) st = tiny_symtab_parse_assign(&e, &syms, "N=4");
    if (!st) st = tiny_symtab_parse_assign(&e, &syms, "D=5");
    if (!st) st = tiny_prepare(&e, g, &syms, false);
    bool never_fired = ut_fault_remaining() > 0; /* fewer than n allocations */
    ut_fault_fail_nth_alloc(0);
    tiny_graph_free(g);
    tiny_symtab_free(&syms);
    if (never_fired) {
      assert_int_equal(st, HARP_OK);
      break;
    }
    if (st != HARP_OK) {
      if (st != HARP_E_NO_MEMORY) fail_msg("allocation %ld failed: expected OutOfMemory, got %s (%s)", n, harp_status_name(st), e.msg);
      failures++;
    }
  }
  assert_true(failures > 20);
  free(text);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_models_roundtrip),
      cmocka_unit_test(test_expr_roundtrip),
      cmocka_unit_test(test_nonfinite_immediates),
      cmocka_unit_test(test_builder_matches_json),
      cmocka_unit_test(test_fault_injection),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
