/* test_tiny_optable.c — the op table (harp/tiny_ops.h) is whole: every row
 * has the columns its class needs, and they agree with each other.  A row
 * with a column too few or too many does not compile; this test fails on a
 * row whose column is there but empty (0) where the class needs it, or
 * filled where it must not be:
 *  - an elementwise op has a reference value, C text, CUDA text; its i32
 *    reference is empty exactly when its dtype rule is float only;
 *  - every text names each operand ("%s" per operand; a unary op's at least
 *    once), and text that the CUDA elementwise kernel borrows from the C
 *    column uses CUDA's own functions only (no hp_* helper, no statement
 *    expression), as does any GPU text;
 *  - dtype rules, epilogue steps and vector forms fit the class;
 *  - names parse back; tiny_op_spell fills text in;
 *  - the dtype table's backend columns are filled in and fit the size. */
#include <string.h>

#include "testutil.h"
#include "tiny/tiny_spell.h"
#include "util/util.h"

/* The interpreter's columns as written (they are C expressions). */
static const struct {
  const char *f32, *i32;
} REF[] = {
#define COLS(e, cls, arg, dt, epi, f32, i32, ...) {#f32, #i32},
    TINY_OPS(COLS)
#undef COLS
};

/* The raw cuda column (tiny_op_cuda falls back to c). */
static const char *const CUDA_COL[] = {
#define COLS(e, cls, arg, dt, epi, f32, i32, c, ci, g, gi, cu, v) cu,
    TINY_OPS(COLS)
#undef COLS
};

static int count_s(const char *t) {
  int n = 0;
  for (const char *p = t; (p = strstr(p, "%s")); p += 2) n++;
  return n;
}

/* Text t of op (renderer `what`) names its operands: one "%s" each, a unary
 * op's one operand at least once. */
static void check_operands(tiny_op op, const char *what, const char *t) {
  if (!t) fail_msg("%s: no %s text", tiny_op_name(op), what);
  int k = count_s(t), ar = tiny_op_arity(op);
  if (ar == 1 ? k < 1 : k != ar) fail_msg("%s: %s text \"%s\" has %d \"%%s\" for %d operands", tiny_op_name(op), what, t, k, ar);
}

static void test_names(void **st) {
  (void)st;
  for (int i = 0; i < TINY_OP_COUNT; i++) {
    const char *n = tiny_op_name((tiny_op)i);
    assert_int_equal(tiny_op_parse(n), i);
    assert_string_not_equal(tiny_class_name(tiny_op_class((tiny_op)i)), "?");
  }
  assert_int_equal(tiny_op_parse("NOPE"), -1);
  assert_string_equal(tiny_op_name(TINY_OP_COUNT), "?");
}

static void test_reference_columns(void **st) {
  (void)st;
  for (int i = 0; i < TINY_OP_COUNT; i++) {
    tiny_op op = (tiny_op)i;
    bool ew = tiny_op_is_elementwise(op) && op != TINY_WHERE; /* WHERE selects: the interpreter's own code */
    bool f32 = strcmp(REF[i].f32, "0") != 0, i32 = strcmp(REF[i].i32, "0") != 0;
    if (ew && !f32) fail_msg("%s: elementwise without an f32 reference", tiny_op_name(op));
    if (!ew && (f32 || i32)) fail_msg("%s: a reference value outside elementwise ops (or on WHERE)", tiny_op_name(op));
    bool float_only = tiny_op_dtype_rule(op) & TD_FLOAT;
    if (ew && i32 == float_only)
      fail_msg("%s: the i32 reference must be given exactly when the dtype rule allows integers", tiny_op_name(op));
  }
}

static void test_spelling_columns(void **st) {
  (void)st;
  for (int i = 0; i < TINY_OP_COUNT; i++) {
    tiny_op op = (tiny_op)i;
    if (!tiny_op_is_elementwise(op)) {
      if (tiny_op_c(op, false, false) || tiny_op_cuda(op) || tiny_op_vec(op))
        fail_msg("%s: renderer text on an op that is not elementwise", tiny_op_name(op));
      continue;
    }
    bool ints = !(tiny_op_dtype_rule(op) & TD_FLOAT);
    for (int in_int = 0; in_int <= ints; in_int++)
      for (int gpu = 0; gpu <= 1; gpu++) {
        const char *t = tiny_op_c(op, in_int, gpu);
        check_operands(op, gpu ? "gpu" : "c", t);
        if (gpu && strstr(t, "({")) fail_msg("%s: a statement expression in GPU text \"%s\"", tiny_op_name(op), t);
      }
    check_operands(op, "cuda", tiny_op_cuda(op));
    if (!CUDA_COL[i] && (strstr(tiny_op_cuda(op), "hp_") || strstr(tiny_op_cuda(op), "({")))
      fail_msg("%s: the CUDA kernel borrows C text \"%s\" that needs the CPU prelude; give a cuda column",
               tiny_op_name(op), tiny_op_cuda(op));
    if (tiny_op_vec(op)) check_operands(op, "vec", tiny_op_vec(op));
  }
}

static void test_rules_fit_class(void **st) {
  (void)st;
  for (int i = 0; i < TINY_OP_COUNT; i++) {
    tiny_op op = (tiny_op)i;
    tiny_class c = tiny_op_class(op);
    unsigned r = tiny_op_dtype_rule(op);
    tiny_epi k = tiny_op_epi(op);
    if (!tiny_op_is_elementwise(op) && r) fail_msg("%s: a dtype rule outside elementwise ops", tiny_op_name(op));
    if ((r & TD_BOOL) && c != TC_BINARY) fail_msg("%s: only a binary op compares", tiny_op_name(op));
    if ((r & TD_FLOAT) && (r & TD_NUM)) fail_msg("%s: TD_FLOAT already refuses bool", tiny_op_name(op));
    if ((k == TE_RELU || k == TE_GELU || k == TE_RINT) && c != TC_UNARY) fail_msg("%s: an activation step is unary", tiny_op_name(op));
    if (k >= TE_SHIFT && c != TC_BINARY) fail_msg("%s: a shift/scale/clamp step is binary", tiny_op_name(op));
    if (tiny_op_vec(op) && c != TC_UNARY && c != TC_BINARY) fail_msg("%s: a vector form is unary or binary", tiny_op_name(op));
    assert_string_not_equal(tiny_epi_name(k), "?");
  }
  assert_true(tiny_op_is_compare(TINY_CMPLT));
  assert_false(tiny_op_is_compare(TINY_ADD));
  assert_int_equal(tiny_op_arity(TINY_WHERE), 3);
  assert_int_equal(tiny_op_arity(TINY_MULADD), 3);
}

/* The dtype table: every row names its C and CUDA types and helpers, and its
 * C storage type has the row's size. */
static void test_dtype_columns(void **st) {
  (void)st;
  static const struct {
    const char *c;
    int size;
  } C_SIZE[] = {{"uint16_t", 2}, {"float", 4}, {"int32_t", 4}, {"uint8_t", 1}, {"int8_t", 1}};
  for (int i = 0; i < TINY_DTYPE_COUNT; i++) {
    tiny_dtype t = (tiny_dtype)i;
    assert_int_equal(tiny_dtype_parse(tiny_dtype_name(t)), i);
    const char *cols[] = {tiny_dtype_c(t), tiny_dtype_cuda(t), tiny_dtype_cuda_ld(t), tiny_dtype_cuda_cvt(t), tiny_dtype_npy(t)};
    for (size_t k = 0; k < sizeof cols / sizeof cols[0]; k++)
      if (!cols[k] || !*cols[k] || !strcmp(cols[k], "?")) fail_msg("dtype %s: column %zu is empty", tiny_dtype_name(t), k);
    int size = 0;
    for (size_t k = 0; k < sizeof C_SIZE / sizeof C_SIZE[0]; k++)
      if (!strcmp(C_SIZE[k].c, tiny_dtype_c(t))) size = C_SIZE[k].size;
    if (size != tiny_dtype_size(t)) fail_msg("dtype %s: C type %s for %d bytes", tiny_dtype_name(t), tiny_dtype_c(t), tiny_dtype_size(t));
  }
  assert_string_equal(tiny_dtype_c(TINY_DTYPE_COUNT), "?");
}

static void test_spell(void **st) {
  (void)st;
  ut_str o;
  ut_str_init(&o);
  const char *x[2] = {"p", "q"};
  tiny_op_spell(&o, "(%s < 0 ? 0 : %s)", x, 1);
  assert_string_equal(o.buf, "(p < 0 ? 0 : p)");
  ut_str_free(&o);
  ut_str_init(&o);
  tiny_op_spell(&o, "f(%s, %s) %% 2%", x, 2);
  assert_string_equal(o.buf, "f(p, q) % 2%");
  ut_str_free(&o);
  ut_str_init(&o);
  tiny_op_spell(&o, tiny_op_c(TINY_MAX, true, true), x, 2);
  assert_string_equal(o.buf, "hp_imax(p, q)");
  ut_str_free(&o);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_names),
      cmocka_unit_test(test_reference_columns),
      cmocka_unit_test(test_spelling_columns),
      cmocka_unit_test(test_rules_fit_class),
      cmocka_unit_test(test_dtype_columns),
      cmocka_unit_test(test_spell),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
