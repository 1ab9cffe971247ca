/* test_kitems.c — definitions that kernels of one model define alike
 * (src/backend/c/kitems.c): a function or typedef repeated under another
 * kernel's prefix becomes a #define to the first; one that names a kernel
 * symbol defined differently, sits under other #if conditions, was declared
 * before (a prototype) or names a symbol of unknown definition stays; a
 * foreign macro stops the sharing.  The shared text compiles and runs. The
 * models end to end are in tests/py/test_kdedup.py. */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "backend/c/cgen.h"
#include "backend/c/kitems.h"
#include "testutil.h"

/* The texts of kernels 0..n-1 of prefix P through one table. */
static char *emit(const char *const *texts, int n) {
  harp_error e = {0};
  cg_kitems t;
  cg_kitems_init(&t);
  ut_str out;
  ut_str_init(&out);
  for (int k = 0; k < n; k++) assert_ok(&e, cg_kitems_emit(&t, &e, texts[k], "P", k, &out));
  cg_kitems_free(&t);
  return ut_str_take(&out);
}

static void test_shared_definitions(void **state) {
  (void)state;
  const char *k[] = {
      "/* kernel 0 */\n"
      "typedef struct { float *c; long ld; } P_k0_tt;\n"
      "static inline float P_k0_twice(float x) { return 2 * x; }\n"
      "static void P_k0_row(const P_k0_tt *tt, long m,\n"
      "    float v) {\n"
      "  tt->c[m * tt->ld] = P_k0_twice(v); /* a comment { */\n"
      "}\n"
      "static int P_k0(float *c) { P_k0_tt tt = {c, 4}; P_k0_row(&tt, 1, 3.0f); return 0; }\n",
      /* the same but for the prefix, comments and the entry's constant */
      "/* kernel 1: another region */\n"
      "typedef struct { float *c; long ld; } P_k1_tt;\n"
      "static inline float P_k1_twice(float x) { return 2 * x; }\n"
      "static void P_k1_row(const P_k1_tt *tt, long m,\n"
      "    float v) {\n"
      "  tt->c[m * tt->ld] = P_k1_twice(v);\n"
      "}\n"
      "static int P_k1(float *c) { P_k1_tt tt = {c, 8}; P_k1_row(&tt, 1, 3.0f); return 0; }\n",
      /* twice differs: row names another definition and stays */
      "typedef struct { float *c; long ld; } P_k2_tt;\n"
      "static inline float P_k2_twice(float x) { return x + x + 0.0f; }\n"
      "static void P_k2_row(const P_k2_tt *tt, long m,\n"
      "    float v) {\n"
      "  tt->c[m * tt->ld] = P_k2_twice(v);\n"
      "}\n"
      "static int P_k2(float *c) { P_k2_tt tt = {c, 2}; P_k2_row(&tt, 1, 3.0f); return 0; }\n",
  };
  char *s = emit(k, 3);
  assert_non_null(strstr(s, "#define P_k1_tt P_k0_tt\n"));
  assert_non_null(strstr(s, "#define P_k1_twice P_k0_twice\n"));
  assert_non_null(strstr(s, "#define P_k1_row P_k0_row\n"));
  assert_non_null(strstr(s, "static int P_k1(float *c) { P_k1_tt tt = {c, 8};")); /* other constant: kept */
  assert_null(strstr(s, "static void P_k1_row"));
  assert_non_null(strstr(s, "#define P_k2_tt P_k0_tt\n"));
  assert_non_null(strstr(s, "static inline float P_k2_twice"));
  assert_non_null(strstr(s, "static void P_k2_row")); /* names a twice of its own */
  assert_non_null(strstr(s, "/* kernel 1: another region */")); /* comments stay */

  /* it compiles, and each kernel stores what its own code computes */
  char *src = malloc(strlen(s) + 512);
  assert_non_null(src);
  sprintf(src, "%s\nint run(int k, float *c) { return k == 0 ? P_k0(c) : k == 1 ? P_k1(c) : P_k2(c); }\n", s);
  harp_error e = {0};
  void *h = NULL;
  assert_ok(&e, cgen_compile_so(&e, src, NULL, &h));
  int (*run)(int, float *) = (int (*)(int, float *))dlsym(h, "run");
  assert_non_null(run);
  float c[16] = {0};
  run(0, c);
  run(1, c);
  run(2, c);
  assert_true(c[4] == 6.0f && c[8] == 6.0f && c[2] == 6.0f);
  dlclose(h);
  free(src);
  free(s);
}

static void test_kept_definitions(void **state) {
  (void)state;
  const char *k[] = {
      "static int P_k0_f(int x) { return x + 1; }\n"
      "#ifdef A\n"
      "static int P_k0_g(int x) { return x; }\n"
      "#endif\n"
      "static const int P_k0_tab[2] = {1, 2};\n"
      "static int P_k0_h(int i) { return P_k0_tab[i]; }\n",
      /* f declared before: kept; g under another condition: kept; h names a
       * table (not a shared definition): kept */
      "static int P_k1_f(int x);\n"
      "static int P_k1_f(int x) { return x + 1; }\n"
      "#ifdef B\n"
      "static int P_k1_g(int x) { return x; }\n"
      "#endif\n"
      "static const int P_k1_tab[2] = {1, 2};\n"
      "static int P_k1_h(int i) { return P_k1_tab[i]; }\n",
      /* a macro of another name: no sharing from there on */
      "static int P_k2_f(int x) { return x + 1; }\n"
      "#define ONE 1\n"
      "static int P_k2_g(int x) { return x; }\n",
      "#ifdef A\n"
      "static int P_k3_g(int x) { return x; }\n"
      "#endif\n",
  };
  char *s = emit(k, 4);
  assert_non_null(strstr(s, "static int P_k1_f(int x) { return x + 1; }"));
  assert_non_null(strstr(s, "static int P_k1_g(int x) { return x; }"));
  assert_non_null(strstr(s, "static int P_k1_h(int i)"));
  assert_non_null(strstr(s, "#define P_k2_f P_k0_f\n")); /* before the macro */
  assert_non_null(strstr(s, "static int P_k2_g(int x)"));
  assert_non_null(strstr(s, "static int P_k3_g(int x)"));
  assert_null(strstr(s, "#define P_k3"));
  free(s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_shared_definitions),
      cmocka_unit_test(test_kept_definitions),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
