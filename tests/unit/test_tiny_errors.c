/* test_tiny_errors.c — every error of the loader, normalizer and verifier,
 * each provoked by a bad model: the right error name, the node id, and for
 * syntax errors the line and column. */
#include "testutil.h"

typedef struct ecase {
  const char *name;
  const char *json;
  const char *syms[4];
  harp_status want;
  const char *node; /* expected e.node, or NULL for "don't care" */
  int line;         /* expected line for parse errors, 0 = don't care */
} ecase;

#define IN(id, dt, shape) "{\"id\":\"" id "\",\"uop\":\"INPUT\",\"arg\":{\"tensor_id\":\"" id "\",\"dtype\":\"" dt "\",\"shape\":" shape "}}"
#define M(items) "{\"uops\":[" items "]}"

static const ecase cases[] = {
    /* syntax */
    {"truncated", "{\"uops\":[\n{\"id\":\"x\",", {0}, HARP_E_PARSE, NULL, 2},
    {"trailing_comma", "{\"uops\":[\n\n  {\"id\":\"x\"},\n]}", {0}, HARP_E_PARSE, NULL, 4},
    {"not_object", "[1,2]", {0}, HARP_E_INVALID_ARG, NULL, 0},
    {"no_uops_or_ops", "{\"nodes\":[]}", {0}, HARP_E_INVALID_ARG, NULL, 0},
    {"duplicate_key", "{\"uops\":[], \"uops\":[]}", {0}, HARP_E_PARSE, NULL, 1},
    /* structure */
    {"unknown_uop", M(IN("x", "fp32", "[2]") ","  "{\"id\":\"y\",\"uop\":\"FROB\",\"src\":[\"x\"]}"), {0}, HARP_E_UNKNOWN_OP, "y", 0},
    {"arity", M(IN("x", "fp32", "[2]") ","  "{\"id\":\"y\",\"uop\":\"ADD\",\"src\":[\"x\"]}"), {0}, HARP_E_ARITY, "y", 0},
    {"dangling", M(IN("x", "fp32", "[2]") ","  "{\"id\":\"y\",\"uop\":\"NEG\",\"src\":[\"nope\"]}"), {0}, HARP_E_DANGLING, "y", 0},
    {"duplicate_id", M(IN("x", "fp32", "[2]") ","  "{\"id\":\"x\",\"uop\":\"NEG\",\"src\":[\"x\"]}"), {0}, HARP_E_DUPLICATE_ID, "x", 0},
    {"cycle", M(IN("x", "fp32", "[2]") ","  "{\"id\":\"a\",\"uop\":\"ADD\",\"src\":[\"x\",\"b\"]}" "," 
                "{\"id\":\"b\",\"uop\":\"NEG\",\"src\":[\"a\"]}"),
     {0}, HARP_E_CYCLE, NULL, 0},
    {"self_cycle", M(IN("x", "fp32", "[2]") ","  "{\"id\":\"a\",\"uop\":\"NEG\",\"src\":[\"a\"]}"), {0}, HARP_E_CYCLE, "a", 0},
    {"missing_id", M("{\"uop\":\"NEG\",\"src\":[]}"), {0}, HARP_E_INVALID_ARG, NULL, 0},
    {"unknown_node_key", M(IN("x", "fp32", "[2]") ","  "{\"id\":\"y\",\"uop\":\"NEG\",\"src\":[\"x\"],\"args\":{}}"), {0}, HARP_E_INVALID_ARG, "y", 0},
    {"missing_arg", M(IN("x", "fp32", "[2]") ","  "{\"id\":\"y\",\"uop\":\"RESHAPE\",\"src\":[\"x\"]}"), {0}, HARP_E_INVALID_ARG, "y", 0},
    {"unknown_arg_key", M(IN("x", "fp32", "[2]") ","  "{\"id\":\"y\",\"uop\":\"FLIP\",\"src\":[\"x\"],\"arg\":{\"axis\":[0]}}"), {0}, HARP_E_INVALID_ARG, "y", 0},
    {"arg_wrong_type", M(IN("x", "fp32", "[2]") ","  "{\"id\":\"y\",\"uop\":\"PERMUTE\",\"src\":[\"x\"],\"arg\":{\"perm\":\"01\"}}"), {0}, HARP_E_INVALID_ARG, "y", 0},
    {"bad_dtype", M(IN("x", "fp64", "[2]")), {0}, HARP_E_INVALID_ARG, "x", 0},
    {"bad_symbol_name", M(IN("x", "fp32", "[\"a b\"]")), {0}, HARP_E_INVALID_ARG, "x", 0},
    {"negative_dim", M(IN("x", "fp32", "[-2]")), {0}, HARP_E_INVALID_ARG, "x", 0},
    {"huge_dim", M(IN("x", "fp32", "[1099511627777]")), {0}, HARP_E_INVALID_ARG, "x", 0},
    {"huge_tensor", M(IN("x", "fp32", "[1099511627776, 2]") ","  "{\"id\":\"y\",\"uop\":\"NEG\",\"src\":[\"x\"]}"), {0}, HARP_E_LIMIT, "x", 0},
    {"no_outputs", M(IN("x", "fp32", "[2]")), {0}, HARP_E_INVALID_ARG, NULL, 0},
    {"output_not_node", "{\"uops\":[" IN("x", "fp32", "[2]") ",{\"id\":\"y\",\"uop\":\"NEG\",\"src\":[\"x\"]}],\"outputs\":[\"z\"]}",
     {0}, HARP_E_DANGLING, "z", 0},
    {"output_file_clash", "{\"uops\":[" IN("x", "fp32", "[2]") ",{\"id\":\"a/b\",\"uop\":\"NEG\",\"src\":[\"x\"]},"
                          "{\"id\":\"a_b\",\"uop\":\"NEG\",\"src\":[\"x\"]}]}",
     {0}, HARP_E_DUPLICATE_ID, "a_b", 0},
    /* seed 001 §4 */
    {"broadcast_mismatch", M(IN("x", "fp32", "[2,3]") ","  IN("y", "fp32", "[4]") ","  "{\"id\":\"r\",\"uop\":\"ADD\",\"src\":[\"x\",\"y\"]}"),
     {0}, HARP_E_BROADCAST_MISMATCH, "r", 0},
    {"broadcast_mismatch_bound", M(IN("x", "fp32", "[\"M\"]") ","  IN("y", "fp32", "[\"N\"]") ","  "{\"id\":\"r\",\"uop\":\"ADD\",\"src\":[\"x\",\"y\"]}"),
     {"M=3", "N=4"}, HARP_E_BROADCAST_MISMATCH, "r", 0},
    {"expand_mismatch", M(IN("x", "fp32", "[2]") ","  "{\"id\":\"r\",\"uop\":\"EXPAND\",\"src\":[\"x\"],\"arg\":{\"result_shape\":[3]}}"),
     {0}, HARP_E_BROADCAST_MISMATCH, "r", 0},
    {"axis_size_mismatch", M(IN("x", "fp32", "[2,3]") ","  "{\"id\":\"r\",\"uop\":\"RESHAPE\",\"src\":[\"x\"],\"arg\":{\"result_shape\":[4]}}"),
     {0}, HARP_E_AXIS_SIZE_MISMATCH, "r", 0},
    {"axis_size_mismatch_symbolic", M(IN("x", "fp32", "[\"M\",\"K\"]") ","  "{\"id\":\"r\",\"uop\":\"RESHAPE\",\"src\":[\"x\"],\"arg\":{\"result_shape\":[\"M\",\"N\"]}}"),
     {"M=2", "K=3", "N=4"}, HARP_E_AXIS_SIZE_MISMATCH, "r", 0},
    {"invalid_permutation_repeat", M(IN("x", "fp32", "[2,3]") ","  "{\"id\":\"r\",\"uop\":\"PERMUTE\",\"src\":[\"x\"],\"arg\":{\"perm\":[0,0]}}"),
     {0}, HARP_E_INVALID_PERMUTATION, "r", 0},
    {"invalid_permutation_short", M(IN("x", "fp32", "[2,3]") ","  "{\"id\":\"r\",\"uop\":\"PERMUTE\",\"src\":[\"x\"],\"arg\":{\"perm\":[1]}}"),
     {0}, HARP_E_INVALID_PERMUTATION, "r", 0},
    {"acc_dtype_missing", M(IN("x", "fp32", "[2,3]") ","  "{\"id\":\"r\",\"uop\":\"REDUCE\",\"src\":[\"x\"],\"arg\":{\"op\":\"SUM\",\"axes\":[1]}}"),
     {0}, HARP_E_ACC_DTYPE_MISSING, "r", 0},
    {"excessive_piecewise",
     M(IN("x", "fp32", "[4,4]") ","  "{\"id\":\"p1\",\"uop\":\"PAD\",\"src\":[\"x\"],\"arg\":{\"pad\":[[1,1],[1,1]]}}" "," 
       "{\"id\":\"p2\",\"uop\":\"PAD\",\"src\":[\"p1\"],\"arg\":{\"pad\":[[1,1],[1,1]]}}" "," 
       "{\"id\":\"p3\",\"uop\":\"PAD\",\"src\":[\"p2\"],\"arg\":{\"pad\":[[1,1],[1,1]]}}" "," 
       "{\"id\":\"p4\",\"uop\":\"PAD\",\"src\":[\"p3\"],\"arg\":{\"pad\":[[1,1],[1,1]]}}" "," 
       "{\"id\":\"r\",\"uop\":\"NEG\",\"src\":[\"p4\"]}"),
     {0}, HARP_E_EXCESSIVE_PIECEWISE, "p4", 0},
    {"negative_stride_view", M(IN("x", "fp32", "[4]") ","  "{\"id\":\"r\",\"uop\":\"VIEW\",\"src\":[\"x\"],\"arg\":{\"result_shape\":[4],\"index_map\":[\"3 - i0\"]}}"),
     {0}, HARP_E_NEGATIVE_STRIDE, "r", 0},
    {"negative_stride_shrink", M(IN("x", "fp32", "[4]") ","  "{\"id\":\"r\",\"uop\":\"SHRINK\",\"src\":[\"x\"],\"arg\":{\"lo\":[0],\"hi\":[4],\"step\":[-1]}}"),
     {0}, HARP_E_NEGATIVE_STRIDE, "r", 0},
    /* dtypes and symbols */
    {"dtype_mismatch", M(IN("x", "fp32", "[2]") ","  IN("y", "i32", "[2]") ","  "{\"id\":\"r\",\"uop\":\"ADD\",\"src\":[\"x\",\"y\"]}"),
     {0}, HARP_E_DTYPE_MISMATCH, "r", 0},
    {"dtype_fp16_bf16", M(IN("x", "fp16", "[2]") ","  IN("y", "bf16", "[2]") ","  "{\"id\":\"r\",\"uop\":\"MUL\",\"src\":[\"x\",\"y\"]}"),
     {0}, HARP_E_DTYPE_MISMATCH, "r", 0},
    {"fdiv_on_i32", M(IN("x", "i32", "[2]") ","  IN("y", "i32", "[2]") ","  "{\"id\":\"r\",\"uop\":\"FDIV\",\"src\":[\"x\",\"y\"]}"),
     {0}, HARP_E_DTYPE_MISMATCH, "r", 0},
    {"where_cond_not_bool", M(IN("x", "fp32", "[2]") ","  "{\"id\":\"r\",\"uop\":\"WHERE\",\"src\":[\"x\",\"x\",\"x\"]}"),
     {0}, HARP_E_DTYPE_MISMATCH, "r", 0},
    {"reduce_int_into_float", M(IN("x", "i32", "[2]") ","  "{\"id\":\"r\",\"uop\":\"REDUCE\",\"src\":[\"x\"],\"arg\":{\"op\":\"SUM\",\"axes\":[0],\"dtype\":\"fp32\"}}"),
     {0}, HARP_E_DTYPE_MISMATCH, "r", 0},
    {"unbound_symbol", M(IN("x", "fp32", "[\"M\"]") ","  "{\"id\":\"r\",\"uop\":\"NEG\",\"src\":[\"x\"]}"), {0}, HARP_E_UNBOUND_SYMBOL, "x", 0},
    /* malformed args */
    {"pad_negative", M(IN("x", "fp32", "[4]") ","  "{\"id\":\"r\",\"uop\":\"PAD\",\"src\":[\"x\"],\"arg\":{\"pad\":[[-1,0]]}}"), {0}, HARP_E_INVALID_ARG, "r", 0},
    {"pad_rank", M(IN("x", "fp32", "[4]") ","  "{\"id\":\"r\",\"uop\":\"PAD\",\"src\":[\"x\"],\"arg\":{\"pad\":[[1,0],[0,0]]}}"), {0}, HARP_E_INVALID_ARG, "r", 0},
    {"shrink_out_of_range", M(IN("x", "fp32", "[4]") ","  "{\"id\":\"r\",\"uop\":\"SHRINK\",\"src\":[\"x\"],\"arg\":{\"lo\":[2],\"hi\":[5]}}"), {0}, HARP_E_INVALID_ARG, "r", 0},
    {"view_out_of_bounds", M(IN("x", "fp32", "[4]") ","  "{\"id\":\"r\",\"uop\":\"VIEW\",\"src\":[\"x\"],\"arg\":{\"result_shape\":[4],\"index_map\":[\"i0 + 1\"]}}"),
     {0}, HARP_E_INVALID_ARG, "r", 0},
    {"view_bad_expr", M(IN("x", "fp32", "[4]") ","  "{\"id\":\"r\",\"uop\":\"VIEW\",\"src\":[\"x\"],\"arg\":{\"result_shape\":[4],\"index_map\":[\"i0 +\"]}}"),
     {0}, HARP_E_INVALID_ARG, "r", 0},
    {"view_unknown_axis", M(IN("x", "fp32", "[4]") ","  "{\"id\":\"r\",\"uop\":\"VIEW\",\"src\":[\"x\"],\"arg\":{\"result_shape\":[4],\"index_map\":[\"i3\"]}}"),
     {0}, HARP_E_INVALID_ARG, "r", 0},
    {"pool_too_large", M(IN("x", "fp32", "[2]") ","  "{\"id\":\"r\",\"uop\":\"POOL\",\"src\":[\"x\"],\"arg\":{\"kernel\":[3]}}"), {0}, HARP_E_AXIS_SIZE_MISMATCH, "r", 0},
    {"pool_zero_stride", M(IN("x", "fp32", "[4]") ","  "{\"id\":\"r\",\"uop\":\"POOL\",\"src\":[\"x\"],\"arg\":{\"kernel\":[2],\"stride\":[0]}}"), {0}, HARP_E_INVALID_ARG, "r", 0},
    {"reduce_axis_range", M(IN("x", "fp32", "[2]") ","  "{\"id\":\"r\",\"uop\":\"REDUCE\",\"src\":[\"x\"],\"arg\":{\"op\":\"SUM\",\"axes\":[1],\"dtype\":\"fp32\"}}"),
     {0}, HARP_E_INVALID_ARG, "r", 0},
    {"reduce_axis_twice", M(IN("x", "fp32", "[2,2]") ","  "{\"id\":\"r\",\"uop\":\"REDUCE\",\"src\":[\"x\"],\"arg\":{\"op\":\"SUM\",\"axes\":[1,1],\"dtype\":\"fp32\"}}"),
     {0}, HARP_E_INVALID_ARG, "r", 0},
    {"reduce_axis_name_ambiguous", M(IN("x", "fp32", "[\"K\",\"K\"]") ","  "{\"id\":\"r\",\"uop\":\"REDUCE\",\"src\":[\"x\"],\"arg\":{\"op\":\"SUM\",\"axes\":[\"K\"],\"dtype\":\"fp32\"}}"),
     {"K=2"}, HARP_E_INVALID_ARG, "r", 0},
    {"reduce_bad_op", M(IN("x", "fp32", "[2]") ","  "{\"id\":\"r\",\"uop\":\"REDUCE\",\"src\":[\"x\"],\"arg\":{\"op\":\"PROD\",\"axes\":[0],\"dtype\":\"fp32\"}}"),
     {0}, HARP_E_INVALID_ARG, "r", 0},
    {"gather_index_dtype", M(IN("x", "fp32", "[2]") ","  IN("i", "fp32", "[2]") ","  "{\"id\":\"r\",\"uop\":\"GATHER\",\"src\":[\"x\",\"i\"],\"arg\":{\"axis\":0}}"),
     {0}, HARP_E_DTYPE_MISMATCH, "r", 0},
    {"immediate_to_movement", M(IN("x", "fp32", "[2]") ","  "{\"id\":\"r\",\"uop\":\"NEG\",\"src\":[1.5]}"), {0}, HARP_E_INVALID_ARG, "r", 0},
    /* the seed 000 dialect */
    {"ops_unknown_class", "{\"ops\":[{\"op\":\"Magic\",\"inputs\":[\"A\"],\"outputs\":[\"B\"]}],\"values\":{\"A\":{\"dtype\":\"fp32\",\"shape\":[2]}}}",
     {0}, HARP_E_UNKNOWN_OP, "B", 0},
    {"ops_unknown_fn", "{\"ops\":[{\"op\":\"Unary\",\"fn\":\"sine\",\"inputs\":[\"A\"],\"outputs\":[\"B\"]}],\"values\":{\"A\":{\"dtype\":\"fp32\",\"shape\":[2]}}}",
     {0}, HARP_E_UNKNOWN_OP, "B", 0},
    {"ops_undeclared_input", "{\"ops\":[{\"op\":\"Unary\",\"fn\":\"relu\",\"inputs\":[\"A\"],\"outputs\":[\"B\"]}],\"values\":{}}",
     {0}, HARP_E_DANGLING, "B", 0},
    {"ops_two_producers", "{\"ops\":[{\"op\":\"Unary\",\"fn\":\"relu\",\"inputs\":[\"A\"],\"outputs\":[\"B\"]},"
                          "{\"op\":\"Unary\",\"fn\":\"neg\",\"inputs\":[\"A\"],\"outputs\":[\"B\"]}],\"values\":{\"A\":{\"dtype\":\"fp32\",\"shape\":[2]}}}",
     {0}, HARP_E_DUPLICATE_ID, "B", 0},
    {"ops_declared_shape_wrong", "{\"ops\":[{\"op\":\"Unary\",\"fn\":\"relu\",\"inputs\":[\"A\"],\"outputs\":[\"B\"]}],"
                                 "\"values\":{\"A\":{\"dtype\":\"fp32\",\"shape\":[2]},\"B\":{\"dtype\":\"fp32\",\"shape\":[3]}}}",
     {0}, HARP_E_AXIS_SIZE_MISMATCH, "B", 0},
    {"ops_two_outputs", "{\"ops\":[{\"op\":\"Unary\",\"fn\":\"relu\",\"inputs\":[\"A\"],\"outputs\":[\"B\",\"C\"]}],\"values\":{\"A\":{\"dtype\":\"fp32\",\"shape\":[2]}}}",
     {0}, HARP_E_INVALID_ARG, NULL, 0},
};

static void run_case(void **state) {
  const ecase *c = *state;
  harp_error e = {0};
  tiny_symtab syms;
  harp_status st;
  tiny_graph *g = tu_prepare(&e, c->json, c->syms, &syms, &st);
  char buf[2048];
  harp_error_format(&e, buf, sizeof buf);
  if (st != c->want) fail_msg("want %s, got: %s", harp_status_name(c->want), st ? buf : "success");
  assert_int_equal(e.code, c->want);
  assert_true(e.msg[0] != 0);
  if (c->node) assert_string_equal(e.node, c->node);
  if (c->line) {
    assert_int_equal(e.line, c->line);
    assert_true(e.col > 0);
    assert_true(strchr(e.snippet, '^') != NULL);
  }
  tiny_graph_free(g);
  tiny_symtab_free(&syms);
}

int main(void) {
  struct CMUnitTest tests[sizeof cases / sizeof cases[0]];
  size_t n = 0;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    tests[n++] = (struct CMUnitTest){cases[i].name, run_case, NULL, NULL, (void *)&cases[i]};
  return _cmocka_run_group_tests("tiny_errors", tests, n, NULL, NULL);
}
