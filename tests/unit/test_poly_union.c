/* test_poly_union.c — the whole-program isl views agree with the blocks: the
 * dependence edges equal the flow computed from the union of all reads and
 * writes (parameters of different blocks aligned by name), and an access
 * read back as a piecewise multi-affine function maps points as the
 * relation does. */
#include "ibtest.h"
#include "poly/poly_int.h"

static void check_flow(const char *model, const char *const *syms) {
  ibt t;
  assert_ok(&t.e, ibt_load_file(&t, model, syms));
  assert_ok(&t.e, ibt_poly(&t, NULL));
  isl_union_map *r = poly_union_reads(t.pv), *w = poly_union_writes(t.pv);
  isl_union_map *flow = isl_union_map_reverse(isl_union_map_apply_range(r, isl_union_map_reverse(w)));
  isl_union_map *inter = isl_union_map_empty(isl_union_map_get_space(flow));
  for (int k = 0; k < poly_nedges(t.pv); k++) {
    const poly_edge_info *x = poly_edge(t.pv, k);
    if (x->from == x->to) continue;
    inter = isl_union_map_add_map(inter, isl_map_copy(t.pv->edges[k].dep));
  }
  isl_bool eq = isl_union_map_is_equal(flow, inter);
  if (eq != isl_bool_true) {
    char *a = isl_union_map_to_str(flow), *b = isl_union_map_to_str(inter);
    print_message("flow  %s\nedges %s\n", a, b);
    free(a), free(b);
  }
  assert_int_equal(eq, isl_bool_true);
  /* every domain is in the union, each once */
  isl_union_set *d = poly_union_domains(t.pv);
  assert_int_equal(isl_union_set_n_set(d), poly_nblocks(t.pv));
  /* the self edges are exactly the reductions */
  isl_union_map *all = poly_union_deps(t.pv);
  assert_true(isl_union_map_is_subset(inter, all) == isl_bool_true);
  isl_union_map_free(all);
  isl_union_set_free(d);
  isl_union_map_free(flow);
  isl_union_map_free(inter);
  ibt_free(&t);
}

static void test_flow_gemm_bias_relu_symbolic(void **state) {
  (void)state;
  check_flow("tests/models/seed000_gemm_bias_relu.json", NULL);
}

static void test_flow_attention(void **state) {
  (void)state;
  static const char *const syms[] = {"B=1", "H=2", "M=4", "N=8", "D=8", NULL};
  check_flow("tests/models/seed001_attention.json", syms);
  check_flow("tests/models/attention_qkt.json", NULL);
}

static void test_flow_conv(void **state) {
  (void)state;
  static const char *const syms[] = {"N=1", "Cin_total=2", "H=6", "W=6", "Cout=3", "Cin=2", "Kh=3", "Kw=3",
                                     "pt=1", "pb=1", "pl=1", "pr=1", "Sh=1", "Sw=1", "Dh=1", "Dw=1",
                                     "G=1", "Rcout=3", "Oy=6", "Ox=6", NULL};
  check_flow("tests/models/seed001_conv.json", syms);
}

static void test_access_as_function(void **state) {
  (void)state;
  static const char *const syms[] = {"N=1", "Cin_total=1", "H=4", "W=4", "Cout=1", "Cin=1", "Kh=3", "Kw=3",
                                     "pt=1", "pb=1", "pl=1", "pr=1", "Sh=1", "Sw=1", "Dh=1", "Dw=1",
                                     "G=1", "Rcout=1", "Oy=4", "Ox=4", NULL};
  ibt t;
  assert_ok(&t.e, ibt_load_file(&t, "tests/models/seed001_conv.json", syms));
  assert_ok(&t.e, ibt_poly(&t, NULL));
  int b = poly_block_of(t.pv, ibt_node(&t, "yacc"));
  isl_pw_multi_aff *f = poly_access_pma(t.pv, b, 0);
  assert_non_null(f);
  /* the function and the relation have the same graph */
  isl_map *g = isl_map_from_pw_multi_aff(f);
  assert_true(isl_map_is_equal(g, poly_block_access(t.pv, b, 0)) == isl_bool_true);
  /* the read and the fill pieces split the domain */
  isl_set *read = isl_map_domain(isl_map_copy(poly_block_access(t.pv, b, 0)));
  isl_set *fill = isl_set_copy(t.pv->blocks[b].acc[0].fill[0].set);
  assert_true(isl_set_is_disjoint(read, fill) == isl_bool_true);
  isl_set *all = isl_set_union(read, fill);
  assert_true(isl_set_is_equal(all, poly_block_domain(t.pv, b)) == isl_bool_true);
  isl_set_free(all);
  isl_map_free(g);
  ibt_free(&t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_flow_gemm_bias_relu_symbolic),
      cmocka_unit_test(test_flow_attention),
      cmocka_unit_test(test_flow_conv),
      cmocka_unit_test(test_access_as_function),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
