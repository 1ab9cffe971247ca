/* test_cgen_gemm.c — generated GEMM kernels against a naive reference: odd
 * sizes and tails, every storage dtype, every epilogue, batched and broadcast
 * operands, transposed operands, strided C, multi-pass K, each ISA variant
 * (forced, so all run on an AVX-512 machine), CPUID dispatch, error paths.
 * The first half of the cases of cgen_gemm_cases.h; the rest: test_cgen_gemm2.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "cgen_gemm_cases.h"

static void test_cases_a(void **st) { (void)st; run_range(0, NCASE / 2); }

static void test_errors(void **st) {
  (void)st;
  ut_str src;
  ut_str_init(&src);
  harp_error e;
  cgen_gemm_spec s;
  memset(&e, 0, sizeof e);
  cgen_gemm_spec_init(&s, 8, 8, 8, F32);
  assert_int_equal(cgen_gemm(&e, &s, "bad name", &src), HARP_E_INVALID_ARG);
  harp_error_clear(&e);
  assert_int_equal(cgen_gemm(&e, &s, "9x", &src), HARP_E_INVALID_ARG);
  harp_error_clear(&e);
  s.M = 0;
  assert_int_equal(cgen_gemm(&e, &s, "f", &src), HARP_E_INVALID_ARG);
  harp_error_clear(&e);
  s.M = 8, s.b_sk = -1;
  assert_int_equal(cgen_gemm(&e, &s, "f", &src), HARP_E_NEGATIVE_STRIDE);
  harp_error_clear(&e);
  s.b_sk = 8, s.a_dtype = TINY_I32;
  assert_int_equal(cgen_gemm(&e, &s, "f", &src), HARP_E_UNSUPPORTED);
  harp_error_clear(&e);
  s.a_dtype = F32, s.tune.mr = 30, s.tune.nr = 32; /* 30*2+3 > 32 zmm registers */
  assert_int_equal(cgen_gemm(&e, &s, "f", &src), HARP_E_REG_OVERFLOW);
  harp_error_clear(&e);
  s.tune.mr = 4, s.tune.nr = 20; /* not a multiple of 16 */
  assert_int_equal(cgen_gemm(&e, &s, "f", &src), HARP_E_INVALID_ARG);
  harp_error_clear(&e);
  s.tune.nr = 0, s.tune.mr = 0, s.n_epi = 1, s.epi[0].kind = CGEN_EPI_SCALE, s.epi[0].scale = INFINITY;
  assert_int_equal(cgen_gemm(&e, &s, "f", &src), HARP_E_INVALID_ARG);
  harp_error_clear(&e);
  s.epi[0].kind = CGEN_EPI_BIAS_N, s.epi[0].dtype = TINY_BOOL;
  assert_int_equal(cgen_gemm(&e, &s, "f", &src), HARP_E_UNSUPPORTED);
  harp_error_clear(&e);
  s.epi[0].kind = CGEN_EPI_ROUND, s.epi[0].dtype = TINY_FP32; /* rounds to a half type only */
  assert_int_equal(cgen_gemm(&e, &s, "f", &src), HARP_E_UNSUPPORTED);
  harp_error_clear(&e);
  s.n_epi = CGEN_MAX_EPI + 1;
  assert_int_equal(cgen_gemm(&e, &s, "f", &src), HARP_E_LIMIT);
  harp_error_clear(&e);
  /* M at run time where the template would print it as the upper corner's
   * constant (a batch, bf16, a packed A): refused, never a wrong kernel */
  s.n_epi = 0, s.m_expr = "(hp_sym_[0] * 1L)", s.batch[0] = 2;
  assert_int_equal(cgen_gemm(&e, &s, "f", &src), HARP_E_UNSUPPORTED);
  harp_error_clear(&e);
  s.batch[0] = 1, s.tune.bf16 = true;
  assert_int_equal(cgen_gemm(&e, &s, "f", &src), HARP_E_UNSUPPORTED);
  harp_error_clear(&e);
  s.tune.bf16 = false, s.prepack_a = true;
  assert_int_equal(cgen_gemm(&e, &s, "f", &src), HARP_E_UNSUPPORTED);
  harp_error_clear(&e);
  s.prepack_a = false, s.M = 4; /* 4 rows at most: not the skinny kernel, which prints M */
  assert_int_equal(cgen_gemm(&e, &s, "f", &src), HARP_OK);
  assert_non_null(strstr(src.buf, "cx.M = (hp_sym_[0] * 1L);"));
  assert_non_null(strstr(src.buf, "switch (mr)")); /* every row tail */
  assert_non_null(strstr(src.buf, "f_avx2_packA_task")); /* the vector variants too */
  assert_non_null(strstr(src.buf, "f_avx512_packA_task"));
  s.m_expr = NULL;
  /* compile failure is reported, not fatal */
  void *h = NULL;
  assert_int_equal(cgen_compile_so(&e, "int f(void) { return syntax error; }", NULL, &h), HARP_E_INTERNAL);
  assert_null(h);
  assert_non_null(strstr(e.msg, "error"));
  harp_error_clear(&e);
  cgen_cc_opts o = {.cc = "/nonexistent/cc"};
  assert_int_not_equal(cgen_compile_so(&e, "int f(void) { return 0; }", &o, &h), HARP_OK);
  ut_str_free(&src);
}

/* The emitted source stands alone: no harp header, and dispatch picks a variant. */
static void test_standalone(void **st) {
  (void)st;
  ut_str src;
  ut_str_init(&src);
  harp_error e;
  memset(&e, 0, sizeof e);
  cgen_gemm_spec s;
  cgen_gemm_spec_init(&s, 5, 6, 7, F32);
  assert_int_equal(cgen_gemm(&e, &s, "k1", &src), HARP_OK);
  assert_int_equal(cgen_gemm(&e, &s, "k2", &src), HARP_OK); /* runtime emitted once (guarded) */
  assert_null(strstr(src.buf, "#include \"harp"));
  assert_non_null(strstr(src.buf, "__builtin_cpu_supports(\"avx512f\")"));
  void *h = ct_compile(src.buf);
  assert_non_null(h);
  assert_non_null(dlsym(h, "k1"));
  assert_non_null(dlsym(h, "k2"));
  dlclose(h);
  ut_str_free(&src);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_errors),
      cmocka_unit_test(test_standalone),
      cmocka_unit_test(test_cases_a),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
