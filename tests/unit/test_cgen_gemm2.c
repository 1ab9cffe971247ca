/* test_cgen_gemm2.c — the second half of the GEMM cases of cgen_gemm_cases.h
 * (epilogues, half storage, prepacked A and B, loop orders, skinny M), against the naive
 * reference; the first half and the error paths are in test_cgen_gemm.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "cgen_gemm_cases.h"

static void test_cases_b(void **st) { (void)st; run_range(NCASE / 2, NCASE); }

/* What the backend ships is -O3: a cross-section (each ISA, tails, epilogues,
 * half storage, broadcast batch) compiled that way. */
static void test_cases_o3(void **st) {
  (void)st;
  static const int pick[] = {3, 16, 28, 31, NCASE - 23, NCASE - 22, NCASE - 18, NCASE - 14, NCASE - 11, NCASE - 7,
                             NCASE - 5, NCASE - 2};
  /* skinny (4 from NCASE - 23), prepacked B (2), tensor products (the last five) */
  run_list(pick, (int)(sizeof pick / sizeof pick[0]), "-O3");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cases_b),
      cmocka_unit_test(test_cases_o3),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
