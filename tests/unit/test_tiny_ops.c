/* test_tiny_ops.c — every uop on the reference interpreter against values
 * computed by hand.  Each row: a one-op model, its inputs, the expected
 * output.  (tests/py/test_uops.py cross-checks the same uops with numpy.) */
#include <math.h>

#include "testutil.h"

typedef struct tin {
  const char *dtype;
  int rank;
  int64_t shape[4];
  double v[32];
} tin;

typedef struct ocase {
  const char *name;
  const char *body; /* uops after the INPUT nodes x (and y, z); output id "r" */
  tin in[3];
  int nin;
  tiny_dtype out_dtype;
  int out_rank;
  int64_t out_shape[4];
  double want[32];
  double tol;
} ocase;

#define F "fp32"
static const ocase cases[] = {
    {"add_imm", "{\"id\":\"r\",\"uop\":\"ADD\",\"src\":[\"x\",2.5]}", {{F, 1, {3}, {1, 2, -3}}}, 1, TINY_FP32, 1, {3}, {3.5, 4.5, -0.5}, 0},
    {"reshape", "{\"id\":\"r\",\"uop\":\"RESHAPE\",\"src\":[\"x\"],\"arg\":{\"result_shape\":[3,2]}}",
     {{F, 2, {2, 3}, {0, 1, 2, 3, 4, 5}}}, 1, TINY_FP32, 2, {3, 2}, {0, 1, 2, 3, 4, 5}, 0},
    {"permute", "{\"id\":\"r\",\"uop\":\"PERMUTE\",\"src\":[\"x\"],\"arg\":{\"perm\":[1,0]}}",
     {{F, 2, {2, 3}, {0, 1, 2, 3, 4, 5}}}, 1, TINY_FP32, 2, {3, 2}, {0, 3, 1, 4, 2, 5}, 0},
    {"permute_then_reshape", /* a reshape of a non-contiguous view must copy in logical order */
     "{\"id\":\"p\",\"uop\":\"PERMUTE\",\"src\":[\"x\"],\"arg\":{\"perm\":[1,0]}},"
     "{\"id\":\"r\",\"uop\":\"RESHAPE\",\"src\":[\"p\"],\"arg\":{\"result_shape\":[6]}}",
     {{F, 2, {2, 3}, {0, 1, 2, 3, 4, 5}}}, 1, TINY_FP32, 1, {6}, {0, 3, 1, 4, 2, 5}, 0},
    {"expand", "{\"id\":\"r\",\"uop\":\"EXPAND\",\"src\":[\"x\"],\"arg\":{\"result_shape\":[2,3]}}",
     {{F, 2, {1, 3}, {7, 8, 9}}}, 1, TINY_FP32, 2, {2, 3}, {7, 8, 9, 7, 8, 9}, 0},
    {"expand_right_aligned", "{\"id\":\"r\",\"uop\":\"EXPAND\",\"src\":[\"x\"],\"arg\":{\"result_shape\":[2,3]}}",
     {{F, 1, {3}, {7, 8, 9}}}, 1, TINY_FP32, 2, {2, 3}, {7, 8, 9, 7, 8, 9}, 0},
    {"expand_bd_xla", "{\"id\":\"r\",\"uop\":\"EXPAND\",\"src\":[\"x\"],\"arg\":{\"result_shape\":[2,3],\"broadcast_dimensions\":[0]}}",
     {{F, 1, {2}, {7, 8}}}, 1, TINY_FP32, 2, {2, 3}, {7, 7, 7, 8, 8, 8}, 0},
    {"expand_bd_seed", "{\"id\":\"r\",\"uop\":\"EXPAND\",\"src\":[\"x\"],\"arg\":{\"result_shape\":[2,2],\"broadcast_dimensions\":[1]}}",
     {{F, 2, {1, 2}, {7, 8}}}, 1, TINY_FP32, 2, {2, 2}, {7, 8, 7, 8}, 0},
    {"pad", "{\"id\":\"r\",\"uop\":\"PAD\",\"src\":[\"x\"],\"arg\":{\"pad\":[[1,2]],\"value\":9}}",
     {{F, 1, {2}, {1, 2}}}, 1, TINY_FP32, 1, {5}, {9, 1, 2, 9, 9}, 0},
    {"pad_2d_neg_inf", "{\"id\":\"r\",\"uop\":\"PAD\",\"src\":[\"x\"],\"arg\":{\"pad\":[[0,1],[1,0]],\"value\":\"-inf\"}}",
     {{F, 2, {1, 2}, {1, 2}}}, 1, TINY_FP32, 2, {2, 3}, {-INFINITY, 1, 2, -INFINITY, -INFINITY, -INFINITY}, 0},
    {"shrink_step", "{\"id\":\"r\",\"uop\":\"SHRINK\",\"src\":[\"x\"],\"arg\":{\"lo\":[1],\"hi\":[6],\"step\":[2]}}",
     {{F, 1, {6}, {0, 1, 2, 3, 4, 5}}}, 1, TINY_FP32, 1, {3}, {1, 3, 5}, 0},
    {"shrink_2d", "{\"id\":\"r\",\"uop\":\"SHRINK\",\"src\":[\"x\"],\"arg\":{\"lo\":[1,0],\"hi\":[2,2]}}",
     {{F, 2, {2, 3}, {0, 1, 2, 3, 4, 5}}}, 1, TINY_FP32, 2, {1, 2}, {3, 4}, 0},
    {"flip", "{\"id\":\"r\",\"uop\":\"FLIP\",\"src\":[\"x\"],\"arg\":{\"axes\":[1]}}",
     {{F, 2, {2, 3}, {0, 1, 2, 3, 4, 5}}}, 1, TINY_FP32, 2, {2, 3}, {2, 1, 0, 5, 4, 3}, 0},
    {"flip_then_shrink", "{\"id\":\"f\",\"uop\":\"FLIP\",\"src\":[\"x\"],\"arg\":{\"axes\":[0]}},"
     "{\"id\":\"r\",\"uop\":\"SHRINK\",\"src\":[\"f\"],\"arg\":{\"lo\":[1],\"hi\":[5],\"step\":[2]}}",
     {{F, 1, {5}, {0, 1, 2, 3, 4}}}, 1, TINY_FP32, 1, {2}, {3, 1}, 0},
    {"view_window", "{\"id\":\"r\",\"uop\":\"VIEW\",\"src\":[\"x\"],\"arg\":{\"result_shape\":[3,3],\"index_map\":[\"i0 + i1\"]}}",
     {{F, 1, {5}, {0, 1, 2, 3, 4}}}, 1, TINY_FP32, 2, {3, 3}, {0, 1, 2, 1, 2, 3, 2, 3, 4}, 0},
    {"view_floordiv", "{\"id\":\"r\",\"uop\":\"VIEW\",\"src\":[\"x\"],\"arg\":{\"result_shape\":[6],\"index_map\":[\"i0 floordiv 2\"]}}",
     {{F, 1, {3}, {5, 6, 7}}}, 1, TINY_FP32, 1, {6}, {5, 5, 6, 6, 7, 7}, 0},
    {"view_mod", "{\"id\":\"r\",\"uop\":\"VIEW\",\"src\":[\"x\"],\"arg\":{\"result_shape\":[2,3],\"index_map\":[\"(i0*3 + i1) % 2\"]}}",
     {{F, 1, {2}, {5, 6}}}, 1, TINY_FP32, 2, {2, 3}, {5, 6, 5, 6, 5, 6}, 0},
    {"pool", "{\"id\":\"r\",\"uop\":\"POOL\",\"src\":[\"x\"],\"arg\":{\"kernel\":[3],\"stride\":[2]}}",
     {{F, 1, {5}, {0, 1, 2, 3, 4}}}, 1, TINY_FP32, 2, {2, 3}, {0, 1, 2, 2, 3, 4}, 0},
    {"pool_dilation", "{\"id\":\"r\",\"uop\":\"POOL\",\"src\":[\"x\"],\"arg\":{\"kernel\":[2],\"dilation\":[3]}}",
     {{F, 1, {5}, {0, 1, 2, 3, 4}}}, 1, TINY_FP32, 2, {2, 2}, {0, 3, 1, 4}, 0},
    {"cast_i32", "{\"id\":\"r\",\"uop\":\"CAST\",\"src\":[\"x\"],\"arg\":{\"to\":\"i32\"}}",
     {{F, 1, {4}, {1.9, -1.9, 3e10, -3e10}}}, 1, TINY_I32, 1, {4}, {1, -1, 2147483647, -2147483648.0}, 0},
    {"cast_bool", "{\"id\":\"c\",\"uop\":\"CAST\",\"src\":[\"x\"],\"arg\":{\"to\":\"bool\"}},"
     "{\"id\":\"r\",\"uop\":\"CAST\",\"src\":[\"c\"],\"arg\":{\"to\":\"fp32\"}}",
     {{F, 1, {3}, {0, -2, 0.5}}}, 1, TINY_FP32, 1, {3}, {0, 1, 1}, 0},
    {"cast_fp16_rounds", "{\"id\":\"h\",\"uop\":\"CAST\",\"src\":[\"x\"],\"arg\":{\"to\":\"fp16\"}},"
     "{\"id\":\"r\",\"uop\":\"CAST\",\"src\":[\"h\"],\"arg\":{\"to\":\"fp32\"}}",
     {{F, 1, {3}, {0.1, 65520, 2049}}}, 1, TINY_FP32, 1, {3}, {0.0999755859375, INFINITY, 2048}, 0},
    {"cast_bf16_rounds", "{\"id\":\"h\",\"uop\":\"CAST\",\"src\":[\"x\"],\"arg\":{\"to\":\"bf16\"}},"
     "{\"id\":\"r\",\"uop\":\"CAST\",\"src\":[\"h\"],\"arg\":{\"to\":\"fp32\"}}",
     {{F, 1, {2}, {0.1, 257}}}, 1, TINY_FP32, 1, {2}, {0.10009765625, 256}, 0},
    {"neg", "{\"id\":\"r\",\"uop\":\"NEG\",\"src\":[\"x\"]}", {{F, 1, {2}, {1, -2}}}, 1, TINY_FP32, 1, {2}, {-1, 2}, 0},
    {"exp2", "{\"id\":\"r\",\"uop\":\"EXP2\",\"src\":[\"x\"]}", {{F, 1, {3}, {0, 3, -1}}}, 1, TINY_FP32, 1, {3}, {1, 8, 0.5}, 1e-6},
    {"log2", "{\"id\":\"r\",\"uop\":\"LOG2\",\"src\":[\"x\"]}", {{F, 1, {3}, {1, 8, 0.25}}}, 1, TINY_FP32, 1, {3}, {0, 3, -2}, 1e-6},
    {"exp", "{\"id\":\"r\",\"uop\":\"EXP\",\"src\":[\"x\"]}", {{F, 1, {2}, {0, 1}}}, 1, TINY_FP32, 1, {2}, {1, 2.718281828459045}, 1e-6},
    {"sqrt", "{\"id\":\"r\",\"uop\":\"SQRT\",\"src\":[\"x\"]}", {{F, 1, {2}, {4, 2}}}, 1, TINY_FP32, 1, {2}, {2, 1.4142135623730951}, 1e-6},
    {"rsqrt", "{\"id\":\"r\",\"uop\":\"RSQRT\",\"src\":[\"x\"]}", {{F, 1, {2}, {4, 0.25}}}, 1, TINY_FP32, 1, {2}, {0.5, 2}, 1e-6},
    {"recip", "{\"id\":\"r\",\"uop\":\"RECIP\",\"src\":[\"x\"]}", {{F, 1, {2}, {4, -0.5}}}, 1, TINY_FP32, 1, {2}, {0.25, -2}, 0},
    {"relu", "{\"id\":\"r\",\"uop\":\"RELU\",\"src\":[\"x\"]}", {{F, 1, {3}, {-1, 0, 2}}}, 1, TINY_FP32, 1, {3}, {0, 0, 2}, 0},
    {"gelu", "{\"id\":\"r\",\"uop\":\"GELU\",\"src\":[\"x\"]}", {{F, 1, {3}, {1, -1, 0}}}, 1, TINY_FP32, 1, {3},
     {0.8413447460685429, -0.15865525393145707, 0}, 1e-6},
    {"floor", "{\"id\":\"r\",\"uop\":\"FLOOR\",\"src\":[\"x\"]}", {{F, 1, {4}, {1.5, -1.5, -0.25, 3}}}, 1, TINY_FP32, 1, {4},
     {1, -2, -1, 3}, 0},
    {"ceil", "{\"id\":\"r\",\"uop\":\"CEIL\",\"src\":[\"x\"]}", {{F, 1, {4}, {1.5, -1.5, 0.25, 3}}}, 1, TINY_FP32, 1, {4},
     {2, -1, 1, 3}, 0},
    {"round halves to even", "{\"id\":\"r\",\"uop\":\"ROUND\",\"src\":[\"x\"]}", {{F, 1, {5}, {0.5, 1.5, 2.5, -2.5, 2.75}}}, 1,
     TINY_FP32, 1, {5}, {0, 2, 2, -2, 3}, 0},
    {"sign", "{\"id\":\"r\",\"uop\":\"SIGN\",\"src\":[\"x\"]}", {{F, 1, {6}, {2.5, -1e-40, 0, -INFINITY, NAN, 1e-45}}}, 1,
     TINY_FP32, 1, {6}, {1, -1, 0, -1, NAN, 1}, 0},
    {"sign_i32", "{\"id\":\"r\",\"uop\":\"SIGN\",\"src\":[\"x\"]}", {{"i32", 1, {3}, {-7, 0, 2147483647}}}, 1, TINY_I32, 1,
     {3}, {-1, 0, 1}, 0},
    {"sub", "{\"id\":\"r\",\"uop\":\"SUB\",\"src\":[\"x\",\"y\"]}", {{F, 1, {2}, {5, 1}}, {F, 1, {2}, {2, 3}}}, 2, TINY_FP32, 1, {2}, {3, -2}, 0},
    {"mul", "{\"id\":\"r\",\"uop\":\"MUL\",\"src\":[\"x\",\"y\"]}", {{F, 1, {2}, {5, 1}}, {F, 1, {2}, {2, -3}}}, 2, TINY_FP32, 1, {2}, {10, -3}, 0},
    {"fdiv", "{\"id\":\"r\",\"uop\":\"FDIV\",\"src\":[\"x\",\"y\"]}", {{F, 1, {2}, {5, 1}}, {F, 1, {2}, {2, -4}}}, 2, TINY_FP32, 1, {2}, {2.5, -0.25}, 0},
    {"max_nan", "{\"id\":\"r\",\"uop\":\"MAX\",\"src\":[\"x\",\"y\"]}", {{F, 1, {3}, {5, 1, NAN}}, {F, 1, {3}, {2, 3, 0}}}, 2, TINY_FP32, 1, {3}, {5, 3, NAN}, 0},
    {"min", "{\"id\":\"r\",\"uop\":\"MIN\",\"src\":[\"x\",\"y\"]}", {{F, 1, {2}, {5, 1}}, {F, 1, {2}, {2, 3}}}, 2, TINY_FP32, 1, {2}, {2, 1}, 0},
    {"add_i32_wraps", "{\"id\":\"r\",\"uop\":\"ADD\",\"src\":[\"x\",\"y\"]}", {{"i32", 1, {2}, {2147483647, -5}}, {"i32", 1, {2}, {1, 3}}},
     2, TINY_I32, 1, {2}, {-2147483648.0, -2}, 0},
    /* (1 + 2^-12)^2 - fl((1 + 2^-12)^2) = 2^-24: one rounding, where MUL then ADD give 0 */
    {"muladd_once", "{\"id\":\"r\",\"uop\":\"MULADD\",\"src\":[\"x\",\"y\",\"z\"]}",
     {{F, 1, {2}, {1.000244140625, 2}}, {F, 1, {2}, {1.000244140625, 3}}, {F, 1, {2}, {-1.00048828125, 1}}}, 3, TINY_FP32, 1,
     {2}, {5.9604644775390625e-08, 7}, 0},
    {"cmplt_where", "{\"id\":\"c\",\"uop\":\"CMPLT\",\"src\":[\"x\",\"y\"]},{\"id\":\"r\",\"uop\":\"WHERE\",\"src\":[\"c\",\"x\",\"y\"]}",
     {{F, 1, {3}, {1, 5, 2}}, {F, 1, {3}, {4, 3, 2}}}, 2, TINY_FP32, 1, {3}, {1, 3, 2}, 0},
    {"cmpeq_cmpne", "{\"id\":\"a\",\"uop\":\"CMPEQ\",\"src\":[\"x\",\"y\"]},{\"id\":\"b\",\"uop\":\"CMPNE\",\"src\":[\"x\",\"y\"]},"
     "{\"id\":\"r\",\"uop\":\"WHERE\",\"src\":[\"a\",10,\"z\"]},{\"id\":\"u\",\"uop\":\"WHERE\",\"src\":[\"b\",\"r\",-1]}",
     {{F, 1, {3}, {1, 5, 2}}, {F, 1, {3}, {1, 3, 2}}, {F, 1, {3}, {7, 8, 9}}}, 3, TINY_FP32, 1, {3}, {10, 8, 10}, 0},
    {"reduce_sum_axes", "{\"id\":\"r\",\"uop\":\"REDUCE\",\"src\":[\"x\"],\"arg\":{\"op\":\"SUM\",\"axes\":[1],\"dtype\":\"fp32\"}}",
     {{F, 2, {2, 3}, {0, 1, 2, 3, 4, 5}}}, 1, TINY_FP32, 1, {2}, {3, 12}, 0},
    {"reduce_max_first_axis", "{\"id\":\"r\",\"uop\":\"REDUCE\",\"src\":[\"x\"],\"arg\":{\"op\":\"MAX\",\"axes\":[0],\"dtype\":\"fp32\"}}",
     {{F, 2, {2, 3}, {0, 7, 2, 3, 4, -5}}}, 1, TINY_FP32, 1, {3}, {3, 7, 2}, 0},
    {"reduce_min_all_init", "{\"id\":\"r\",\"uop\":\"REDUCE\",\"src\":[\"x\"],\"arg\":{\"op\":\"MIN\",\"axes\":[0,1],\"dtype\":\"fp32\",\"init\":-10}}",
     {{F, 2, {2, 2}, {0, 7, 2, 3}}}, 1, TINY_FP32, 0, {0}, {-10}, 0},
    {"reduce_fp16_accumulator", "{\"id\":\"h\",\"uop\":\"CAST\",\"src\":[\"x\"],\"arg\":{\"to\":\"fp16\"}},"
     "{\"id\":\"s\",\"uop\":\"REDUCE\",\"src\":[\"h\"],\"arg\":{\"op\":\"SUM\",\"axes\":[0],\"dtype\":\"fp16\"}},"
     "{\"id\":\"r\",\"uop\":\"CAST\",\"src\":[\"s\"],\"arg\":{\"to\":\"fp32\"}}",
     {{F, 1, {3}, {2048, 1, 1}}}, 1, TINY_FP32, 0, {0}, {2048}, 0},
    {"reduce_fp32_accumulator", "{\"id\":\"r\",\"uop\":\"REDUCE\",\"src\":[\"x\"],\"arg\":{\"op\":\"SUM\",\"axes\":[0],\"dtype\":\"fp32\"}}",
     {{F, 1, {3}, {2048, 1, 1}}}, 1, TINY_FP32, 0, {0}, {2050}, 0},
    {"reduce_i32", "{\"id\":\"r\",\"uop\":\"REDUCE\",\"src\":[\"x\"],\"arg\":{\"op\":\"SUM\",\"axes\":[0],\"dtype\":\"i32\"}}",
     {{"i32", 1, {3}, {5, -2, 10}}}, 1, TINY_I32, 0, {0}, {13}, 0},
    {"gather", "{\"id\":\"r\",\"uop\":\"GATHER\",\"src\":[\"x\",\"y\"],\"arg\":{\"axis\":1}}",
     {{F, 2, {2, 2}, {1, 2, 3, 4}}, {"i32", 2, {2, 2}, {0, 0, 1, 0}}}, 2, TINY_FP32, 2, {2, 2}, {1, 1, 4, 3}, 0},
    /* views copied a row at a time (interp.c's copy_view): nearest
     * upsampling (a stride-0 row), a pad of a transposed view, a reduction
     * over several rows of a permuted view */
    {"upsample_nearest",
     "{\"id\":\"a\",\"uop\":\"RESHAPE\",\"src\":[\"x\"],\"arg\":{\"result_shape\":[2,1,2,1]}},"
     "{\"id\":\"b\",\"uop\":\"EXPAND\",\"src\":[\"a\"],\"arg\":{\"result_shape\":[2,2,2,2]}},"
     "{\"id\":\"r\",\"uop\":\"RESHAPE\",\"src\":[\"b\"],\"arg\":{\"result_shape\":[4,4]}}",
     {{F, 2, {2, 2}, {1, 2, 3, 4}}}, 1, TINY_FP32, 2, {4, 4}, {1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}, 0},
    {"pad_of_permuted",
     "{\"id\":\"p\",\"uop\":\"PERMUTE\",\"src\":[\"x\"],\"arg\":{\"perm\":[1,0]}},"
     "{\"id\":\"r\",\"uop\":\"PAD\",\"src\":[\"p\"],\"arg\":{\"pad\":[[1,0],[0,1]],\"value\":9}}",
     {{F, 2, {2, 3}, {0, 1, 2, 3, 4, 5}}}, 1, TINY_FP32, 2, {4, 3}, {9, 9, 9, 0, 3, 9, 1, 4, 9, 2, 5, 9}, 0},
    {"reduce_sum_rows_of_permuted",
     "{\"id\":\"p\",\"uop\":\"PERMUTE\",\"src\":[\"x\"],\"arg\":{\"perm\":[1,2,0]}},"
     "{\"id\":\"r\",\"uop\":\"REDUCE\",\"src\":[\"p\"],\"arg\":{\"op\":\"SUM\",\"axes\":[1,2],\"dtype\":\"fp32\"}}",
     {{F, 3, {2, 2, 3}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}}}, 1, TINY_FP32, 1, {2}, {24, 42}, 0},
    {"broadcast_right_aligned", "{\"id\":\"r\",\"uop\":\"ADD\",\"src\":[\"x\",\"y\"]}",
     {{F, 2, {2, 3}, {0, 1, 2, 3, 4, 5}}, {F, 1, {3}, {10, 20, 30}}}, 2, TINY_FP32, 2, {2, 3}, {10, 21, 32, 13, 24, 35}, 0},
    {"broadcast_both_sides", "{\"id\":\"r\",\"uop\":\"MUL\",\"src\":[\"x\",\"y\"]}",
     {{F, 2, {2, 1}, {1, 2}}, {F, 2, {1, 3}, {1, 10, 100}}}, 2, TINY_FP32, 2, {2, 3}, {1, 10, 100, 2, 20, 200}, 0},
};

static char *model_text(const ocase *c) {
  static char buf[8192];
  int k = snprintf(buf, sizeof buf, "{\"uops\":[");
  const char *names[3] = {"x", "y", "z"};
  for (int i = 0; i < c->nin; i++) {
    k += snprintf(buf + k, sizeof buf - (size_t)k,
                  "{\"id\":\"%s\",\"uop\":\"INPUT\",\"arg\":{\"tensor_id\":\"%s\",\"dtype\":\"%s\",\"shape\":[", names[i],
                  names[i], c->in[i].dtype);
    for (int d = 0; d < c->in[i].rank; d++) k += snprintf(buf + k, sizeof buf - (size_t)k, "%s%lld", d ? "," : "", (long long)c->in[i].shape[d]);
    k += snprintf(buf + k, sizeof buf - (size_t)k, "]}},");
  }
  snprintf(buf + k, sizeof buf - (size_t)k, "%s],\"outputs\":[\"r\"]}", c->body);
  return buf;
}

static void run_case(void **state) {
  const ocase *c = *state;
  harp_error e = {0};
  tiny_symtab syms;
  harp_status st;
  tiny_graph *g = tu_prepare(&e, model_text(c), NULL, &syms, &st);
  assert_ok(&e, st);
  ut_tensor in[3], out[1];
  for (int i = 0; i < c->nin; i++)
    in[i] = tu_tensor((tiny_dtype)tiny_dtype_parse(c->in[i].dtype), c->in[i].rank, c->in[i].shape, c->in[i].v);
  assert_ok(&e, tiny_interp(&e, g, &syms, in, c->nin, out));
  assert_int_equal(out[0].dtype, c->out_dtype);
  assert_int_equal(out[0].rank, c->out_rank);
  int64_t n = 1;
  for (int d = 0; d < c->out_rank; d++) {
    assert_int_equal(out[0].shape[d], c->out_shape[d]);
    n *= c->out_shape[d];
  }
  tu_expect(&out[0], c->want, n, c->tol);
  for (int i = 0; i < c->nin; i++) ut_tensor_free(&in[i]);
  ut_tensor_free(&out[0]);
  tiny_graph_free(g);
  tiny_symtab_free(&syms);
}

/* The table must cover every uop of the vocabulary. */
static void test_coverage(void **state) {
  (void)state;
  bool seen[TINY_OP_COUNT] = {0};
  seen[TINY_INPUT] = true;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    for (int op = 0; op < TINY_OP_COUNT; op++) {
      char pat[40];
      snprintf(pat, sizeof pat, "\"uop\":\"%s\"", tiny_op_name((tiny_op)op));
      if (strstr(cases[i].body, pat)) seen[op] = true;
    }
    if (strstr(cases[i].body, ",2.5]") || strstr(cases[i].body, ",10,")) seen[TINY_CONST] = true; /* immediates */
  }
  for (int op = 0; op < TINY_OP_COUNT; op++)
    if (!seen[op]) fail_msg("no test case for uop %s", tiny_op_name((tiny_op)op));
}

int main(void) {
  struct CMUnitTest tests[sizeof cases / sizeof cases[0] + 1];
  size_t n = 0;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    tests[n++] = (struct CMUnitTest){cases[i].name, run_case, NULL, NULL, (void *)&cases[i]};
  tests[n++] = (struct CMUnitTest){"coverage", test_coverage, NULL, NULL, NULL};
  return _cmocka_run_group_tests("tiny_ops", tests, n, NULL, NULL);
}
