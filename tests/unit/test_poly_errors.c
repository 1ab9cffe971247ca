/* test_poly_errors.c — the IndexBook / Poly-View errors of seed 000 §13 and
 * seed 001 §4 (NegativeStride, MissingDivGuard, ExcessivePiecewise, NonScop,
 * Unsupported), a clean isl_ctx at the end (and a check that a leak is
 * seen), allocation failures, and the JSON dumps. */
#include <jansson.h>
#include <unistd.h>

#include "ibtest.h"
#include "poly/poly_int.h"

static harp_status load(ibt *t, const char *uops, const char *const *syms) { return ibt_load_uops(t, uops, syms); }

static void expect_error(const ibt *t, harp_status got, harp_status want, const char *node) {
  char buf[2048];
  harp_error_format(&t->e, buf, sizeof buf);
  if (got != want) fail_msg("expected %s, got %s", harp_status_name(want), buf);
  if (node) assert_string_equal(t->e.node, node);
}

/* ---- NegativeStride ----------------------------------------------------- */
static void test_negative_stride_view(void **state) {
  (void)state;
  /* tiny_verify would refuse this too; the IndexBook checks on its own
   * (it only needs tiny_infer), so build without verifying */
  tiny_graph *g = tiny_graph_new();
  tiny_shape s4 = tiny_shape_of(1, (int64_t[]){4});
  int x = tiny_b_input(g, "x", TINY_FP32, &s4);
  tiny_arg_view v = {.shape = s4, .n = 1};
  harp_error e = {0};
  assert_ok(&e, tiny_expr_parse(&e, g, "3 - i0", 1, &v.map[0]));
  tiny_src src = {x, 0};
  int y = tiny_add(g, "y", TINY_VIEW, &src, 1, &v);
  assert_true(y >= 0);
  tiny_mark_output(g, y);
  tiny_symtab st;
  tiny_symtab_init(&st);
  assert_ok(&e, tiny_infer(&e, g, &st, false));
  ib_book *ib = NULL;
  harp_status s = ib_build(&e, g, &st, NULL, &ib);
  assert_int_equal(s, HARP_E_NEGATIVE_STRIDE);
  assert_string_equal(e.node, "y");
  assert_null(ib);
  tiny_symtab_free(&st);
  tiny_graph_free(g);
}

static void test_negative_stride_shrink_step(void **state) {
  (void)state;
  /* the step is a symbol tiny_infer cannot see yet; the book's binding says 0 */
  tiny_graph *g = tiny_graph_new();
  tiny_shape s8 = tiny_shape_of(1, (int64_t[]){8});
  int x = tiny_b_input(g, "x", TINY_FP32, &s8);
  tiny_arg_shrink a = {.n = 1, .has_step = true};
  a.lo[0] = tiny_dim_int(0), a.hi[0] = tiny_dim_int(8), a.step[0] = tiny_dim_sym("S");
  tiny_src src = {x, 0};
  int y = tiny_add(g, "y", TINY_SHRINK, &src, 1, &a);
  tiny_mark_output(g, y);
  harp_error e = {0};
  tiny_symtab none, bound;
  tiny_symtab_init(&none);
  tiny_symtab_init(&bound);
  assert_ok(&e, tiny_infer(&e, g, &none, true));
  assert_ok(&e, tiny_symtab_set(&e, &bound, "S", 0));
  ib_book *ib = NULL;
  assert_int_equal(ib_build(&e, g, &bound, NULL, &ib), HARP_E_NEGATIVE_STRIDE);
  assert_string_equal(e.node, "y");
  /* unbound, the step multiplies an index: Unsupported, not a crash */
  harp_error_clear(&e);
  assert_int_equal(ib_build(&e, g, &none, NULL, &ib), HARP_E_UNSUPPORTED);
  tiny_symtab_free(&none);
  tiny_symtab_free(&bound);
  tiny_graph_free(g);
}

/* ---- MissingDivGuard ---------------------------------------------------- */
static void test_missing_div_guard(void **state) {
  (void)state;
  ibt t;
  assert_ok(&t.e, load(&t,
                       "{'id':'x','uop':'INPUT','arg':{'tensor_id':'x','dtype':'fp32','shape':[4,3]}},"
                       "{'id':'y','uop':'VIEW','src':['x'],'arg':{'result_shape':[12],'index_map':['i0 floordiv 3','i0 % 3']}}",
                       NULL));
  assert_ok(&t.e, ib_validate(&t.e, t.ib));
  ib_info *f = &t.ib->info[ibt_node(&t, "y")];
  assert_int_equal(f->nmods, 1);
  /* drop the upper half of the guard (r <= q-1) */
  f->ncons--;
  expect_error(&t, ib_validate(&t.e, t.ib), HARP_E_MISSING_DIV_GUARD, "y");
  assert_non_null(strstr(t.e.msg, "mod 3"));
  /* and the lower half (r >= 0) */
  f->ncons++;
  ib_cons keep = f->cons[f->ncons - 2];
  f->cons[f->ncons - 2] = f->cons[0]; /* a box constraint in its place */
  harp_error_clear(&t.e);
  expect_error(&t, ib_validate(&t.e, t.ib), HARP_E_MISSING_DIV_GUARD, "y");
  f->cons[f->ncons - 2] = keep;
  harp_error_clear(&t.e);
  assert_ok(&t.e, ib_validate(&t.e, t.ib));
  ibt_free(&t);
}

/* ---- ExcessivePiecewise ------------------------------------------------- */
#define PAD3                                                                                        \
  "{'id':'x','uop':'INPUT','arg':{'tensor_id':'x','dtype':'fp32','shape':[3,3,3]}},"               \
  "{'id':'y','uop':'PAD','src':['x'],'arg':{'pad':[[1,1],[1,1],[1,1]],'value':0}},"

static void test_excessive_piecewise_after_coalesce(void **state) {
  (void)state;
  ibt t;
  /* a cube padded on all sides: after coalescing, the read and the shell
   * around it still need more than 4 pieces */
  assert_ok(&t.e, load(&t, PAD3 "{'id':'z','uop':'RELU','src':['y']}", NULL));
  poly_options o = {.max_pieces = 4};
  expect_error(&t, ibt_poly(&t, &o), HARP_E_EXCESSIVE_PIECEWISE, "z");
  assert_null(t.pv);
  /* the default limit takes it */
  harp_error_clear(&t.e);
  assert_ok(&t.e, ibt_poly(&t, NULL));
  const poly_block_info *b = poly_block(t.pv, poly_block_of(t.pv, ibt_node(&t, "z")));
  assert_true(b->access[0].npieces + b->access[0].nfill > 4);
  ibt_free(&t);
}

static void test_coalescing_saves_pieces(void **state) {
  (void)state;
  ibt t;
  /* two pads on one side with the same value: the IndexBook has 3 pieces
   * (read, inner fill, outer fill), isl coalesces the fills into one */
  assert_ok(&t.e, load(&t,
                       "{'id':'x','uop':'INPUT','arg':{'tensor_id':'x','dtype':'fp32','shape':[4]}},"
                       "{'id':'p','uop':'PAD','src':['x'],'arg':{'pad':[[1,0]]}},"
                       "{'id':'q','uop':'PAD','src':['p'],'arg':{'pad':[[1,0]]}},"
                       "{'id':'z','uop':'RELU','src':['q']}",
                       NULL));
  assert_int_equal(ib_get(t.ib, ibt_node(&t, "z"))->acc[0].npieces, 3);
  poly_options o = {.max_pieces = 2};
  assert_ok(&t.e, ibt_poly(&t, &o));
  const poly_block_info *b = poly_block(t.pv, poly_block_of(t.pv, ibt_node(&t, "z")));
  assert_int_equal(b->access[0].npieces, 1);
  assert_int_equal(b->access[0].nfill, 1);
  ibt_free(&t);
}

static void test_excessive_piecewise_indexbook(void **state) {
  (void)state;
  ibt t;
  assert_ok(&t.e, load(&t, PAD3 "{'id':'z','uop':'RELU','src':['y']}", NULL));
  ib_free(t.ib);
  t.ib = NULL;
  ib_options o = {.max_pieces_ib = 3};
  expect_error(&t, ib_build(&t.e, t.g, &t.syms, &o, &t.ib), HARP_E_EXCESSIVE_PIECEWISE, NULL);
  assert_null(t.ib);
  ibt_free(&t);
}

/* ---- NonScop, Unsupported ----------------------------------------------- */
static void test_non_scop(void **state) {
  (void)state;
  ibt t;
  assert_ok(&t.e, load(&t,
                       "{'id':'x','uop':'INPUT','arg':{'tensor_id':'x','dtype':'fp32','shape':[4,3]}},"
                       "{'id':'i','uop':'INPUT','arg':{'tensor_id':'i','dtype':'i32','shape':[2,3]}},"
                       "{'id':'g','uop':'GATHER','src':['x','i'],'arg':{'axis':0}},"
                       "{'id':'z','uop':'EXP','src':['g']}",
                       NULL));
  /* marked, not rejected: the gather is a region boundary */
  assert_non_null(ib_get(t.ib, ibt_node(&t, "g"))->non_scop);
  assert_true(ib_get(t.ib, ibt_node(&t, "g"))->acc[0].non_affine);
  assert_false(ib_get(t.ib, ibt_node(&t, "g"))->acc[1].non_affine);
  poly_options strict = {.require_scop = true};
  expect_error(&t, ibt_poly(&t, &strict), HARP_E_NON_SCOP, "g");
  harp_error_clear(&t.e);
  assert_ok(&t.e, ibt_poly(&t, NULL));
  assert_int_equal(poly_nnon_scop(t.pv), 1);
  assert_int_equal(poly_nblocks(t.pv), 1); /* EXP only */
  ibt_free(&t);
}

static void test_unsupported_symbolic(void **state) {
  (void)state;
  ibt t;
  /* seed 001 attention: RESHAPE [B,H,D,N] -> [B,H,1,N,D] needs D and N bound */
  expect_error(&t, ibt_load_file(&t, "tests/models/seed001_attention.json", NULL), HARP_E_UNSUPPORTED, "n4");
  assert_non_null(strstr(t.e.msg, "bind"));
  ibt_free(&t);
  /* seed 001 conv: the stride multiplies an index */
  expect_error(&t, ibt_load_file(&t, "tests/models/seed001_conv.json", NULL), HARP_E_UNSUPPORTED, "xw");
  ibt_free(&t);
}

/* ---- isl frees cleanly -------------------------------------------------- */
/* Free pv (and its isl_ctx) with isl warnings on and stderr captured: isl
 * complains when objects still reference the context.  Returns what it said. */
static char *free_capturing(poly_view *pv) {
  fflush(stderr);
  int saved = dup(2);
  FILE *tmp = tmpfile();
  assert_non_null(tmp);
  dup2(fileno(tmp), 2);
  isl_options_set_on_error(poly_isl_ctx(pv), ISL_ON_ERROR_WARN);
  poly_free(pv);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  long n = ftell(tmp);
  char *buf = calloc((size_t)n + 1, 1);
  rewind(tmp);
  if (n > 0 && fread(buf, 1, (size_t)n, tmp) != (size_t)n) buf[0] = 0;
  fclose(tmp);
  return buf;
}

static void test_isl_ctx_frees_cleanly(void **state) {
  (void)state;
  const char *models[] = {"tests/models/seed001_gemm.json", "tests/models/seed000_gemm_bias_relu.json"};
  for (int m = 0; m < 2; m++) {
    ibt t;
    assert_ok(&t.e, ibt_load_file(&t, models[m], NULL));
    assert_ok(&t.e, ibt_poly(&t, NULL));
    char *j = NULL;
    assert_ok(&t.e, poly_dump_json(&t.e, t.pv, &j)); /* exercises every printer */
    free(j);
    char *said = free_capturing(t.pv);
    t.pv = NULL;
    if (said[0]) fail_msg("isl_ctx_free: %s", said);
    free(said);
    ibt_free(&t);
  }
}

/* The check above can fail: a leaked isl object is reported. */
static void test_isl_leak_is_seen(void **state) {
  (void)state;
  ibt t;
  assert_ok(&t.e, ibt_load_file(&t, "tests/models/seed001_gemm.json", NULL));
  assert_ok(&t.e, ibt_poly(&t, NULL));
  isl_ctx *ctx = poly_isl_ctx(t.pv);
  isl_set *leak = isl_set_universe(isl_space_set_alloc(ctx, 0, 1));
  char *said = free_capturing(t.pv);
  t.pv = NULL;
  assert_non_null(strstr(said, "isl_ctx not freed"));
  free(said);
  isl_set_free(leak); /* the context survived; now it can go */
  isl_ctx_free(ctx);
  ibt_free(&t);
}

/* ---- allocation failures ------------------------------------------------ */
static void test_alloc_failures(void **state) {
  (void)state;
  const char *const conv[] = {"N=1", "Cin_total=2", "H=5", "W=5", "Cout=2", "Cin=2", "Kh=3", "Kw=3",
                              "pt=1", "pb=1", "pl=1", "pr=1", "Sh=2", "Sw=2", "Dh=1", "Dw=1",
                              "G=1", "Rcout=2", "Oy=3", "Ox=3", NULL};
  ibt t;
  assert_ok(&t.e, ibt_load_file(&t, "tests/models/seed001_conv.json", conv));
  ib_free(t.ib);
  t.ib = NULL;
  int failures = 0;
  for (long n = 1; n < 100000; n++) {
    harp_error e = {0};
    ib_book *ib = NULL;
    poly_view *pv = NULL;
    char *j1 = NULL, *j2 = NULL;
    ut_fault_fail_nth_alloc(n);
    harp_status s = ib_build(&e, t.g, &t.syms, NULL, &ib);
    if (!s) s = poly_build(&e, t.g, ib, NULL, &pv);
    if (!s) s = ib_dump_json(&e, ib, &j1);
    if (!s) s = poly_dump_json(&e, pv, &j2);
    ut_fault_fail_nth_alloc(0);
    free(j1), free(j2);
    poly_free(pv);
    ib_free(ib);
    if (s == HARP_OK) break;
    if (s != HARP_E_NO_MEMORY) fail_msg("allocation %ld: %s (%s)", n, harp_status_name(s), e.msg);
    failures++;
  }
  assert_true(failures > 10);
  ibt_free(&t);
}

/* ---- dumps -------------------------------------------------------------- */
static void test_poly_json(void **state) {
  (void)state;
  ibt t;
  assert_ok(&t.e, ibt_load_file(&t, "tests/models/seed001_gemm.json", NULL));
  assert_ok(&t.e, ibt_poly(&t, NULL));
  char *text = NULL;
  assert_ok(&t.e, poly_dump_json(&t.e, t.pv, &text));
  json_error_t err;
  json_t *root = json_loads(text, 0, &err);
  free(text);
  assert_non_null(root);
  json_t *pv = json_object_get(root, "poly_view");
  json_t *blocks = json_object_get(pv, "blocks");
  int ncon = 0;
  for (size_t i = 0; i < json_array_size(blocks); i++) {
    json_t *b = json_array_get(blocks, i);
    if (strcmp(json_string_value(json_object_get(b, "kind")), "contraction_pattern")) continue;
    ncon++;
    json_t *a = json_object_get(b, "attrs");
    assert_string_equal(json_string_value(json_object_get(a, "pattern")), "matmul");
    json_t *red = json_object_get(a, "reduce_idx");
    assert_int_equal(json_array_size(red), 1);
    const char *r = json_string_value(json_array_get(red, 0));
    assert_string_equal(json_string_value(json_object_get(json_object_get(a, "axis_sizes"), r)), "K");
    assert_string_equal(json_string_value(json_object_get(b, "domain_isl")),
                        "[K, M, N] -> { n8[i0, i1, r0] : 0 <= i0 < M and 0 <= i1 < N and 0 <= r0 < K }");
    json_t *acc = json_object_get(b, "accesses");
    assert_int_equal(json_array_size(acc), 3);
    assert_string_equal(json_string_value(json_object_get(json_array_get(acc, 2), "kind")), "write");
  }
  assert_int_equal(ncon, 1);
  /* edges: n8 -> n8 (the accumulator) and n8 -> n9, parameters aligned */
  json_t *edges = json_object_get(pv, "edges");
  assert_int_equal(json_array_size(edges), 2);
  json_t *e1 = json_array_get(edges, 1);
  assert_string_equal(json_string_value(json_object_get(e1, "to")), "n9");
  const char *dep = json_string_value(json_array_get(json_object_get(json_object_get(e1, "deps"), "true"), 0));
  assert_non_null(strstr(dep, "[K, M, N] -> { n8[i0, i1, r0] -> n9[i0' = i0, i1' = i1]"));
  assert_int_equal(json_array_size(json_object_get(json_object_get(e1, "deps"), "anti")), 0);
  json_decref(root);
  ibt_free(&t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_negative_stride_view),
      cmocka_unit_test(test_negative_stride_shrink_step),
      cmocka_unit_test(test_missing_div_guard),
      cmocka_unit_test(test_excessive_piecewise_after_coalesce),
      cmocka_unit_test(test_coalescing_saves_pieces),
      cmocka_unit_test(test_excessive_piecewise_indexbook),
      cmocka_unit_test(test_non_scop),
      cmocka_unit_test(test_unsupported_symbolic),
      cmocka_unit_test(test_isl_ctx_frees_cleanly),
      cmocka_unit_test(test_isl_leak_is_seen),
      cmocka_unit_test(test_alloc_failures),
      cmocka_unit_test(test_poly_json),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
