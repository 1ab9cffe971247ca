/* test_cgen_vecmath.c — the vector layer's math ($P_exp2, $P_exp, $P_rcp,
 * $P_div, $P_sigmoid, $P_silu, $P_gelu, $P_maxn, $P_minn, $P_sqrt, $P_exp2z of
 * cgen_emit.c) on every ISA variant against double precision: a sweep over
 * the whole fp32 range the functions care about, random values, and the
 * special inputs the reference interpreter gives a meaning to (NaN, +-inf,
 * +-0, subnormal inputs, results that overflow or are subnormal).  The
 * bounds are the ones src/backend/c/README.md states. */
#include <float.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "backend/c/cgen_int.h"
#include "cgen_testutil.h"

typedef void (*vm_fn)(const float *, const float *, float *, long);

/* One function of the layer: its C text on vectors a and b, and how close
 * it must be: |got - want| <= rel |want| + absx |a| + abs (abs: ulps of the
 * subnormals; absx: silu's x times a subnormal sigmoid's ulp, and gelu's far
 * tail, where the rounding of (x/sqrt2)^2 in e^(-x^2/2) costs up to 2e-5 of a
 * value below 1e-8 |x|). */
typedef struct vfun {
  const char *name, *expr;
  double rel, abs, absx;
} vfun;

static const vfun FUNS[] = {
    {"exp2", "$P_exp2(a)", 2.4e-7, 1.5e-45, 0},  {"exp", "$P_exp(a)", 2.4e-7, 1.5e-45, 0},
    {"rcp", "$P_rcp(a)", 1.2e-7, 1.5e-45, 0},    {"div", "$P_div(a, b)", 1.2e-7, 1.5e-45, 0},
    {"sigmoid", "$P_sigmoid(a)", 3e-7, 3e-45, 0}, {"silu", "$P_silu(a)", 3e-7, 3e-45, 1.5e-45},
    {"gelu", "$P_gelu(a)", 3e-7, 1.5e-45, 2e-8}, {"maxn", "$P_maxn(a, b)", 0, 0, 0},
    {"minn", "$P_minn(a, b)", 0, 0, 0},          {"sqrt", "$P_sqrt(a)", 0, 0, 0},
    {"exp2z", "$P_exp2z(a)", 2.4e-7, 0, 0},
};
#define NFUN ((int)(sizeof FUNS / sizeof FUNS[0]))

/* sigmoid as the frontend spells it and the interpreter rounds it:
 * 1 / (1 + 2^t), t = x * -log2 e, each step in fp32. */
static double ref_sigmoid(float x) {
  float t = x * -1.44269504f, e = (float)exp2((double)t);
  return (float)(1.0 / (1.0 + (double)e));
}

/* What the reference computes, in double except where it rounds to fp32 on
 * the way (sigmoid, silu), which this does too. */
static double ref(int f, float a, float b) {
  double x = a;
  switch (f) {
    case 0: return exp2(x);
    case 1: return exp(x);
    case 2: return 1.0 / x;
    case 3: return x / b;
    case 4: return ref_sigmoid(a);
    case 5: return x * ref_sigmoid(a);
    case 6: return isinf(x) && x < 0 ? NAN : 0.5 * x * erfc(-x / sqrt(2.0));
    case 7: return isnan(a) || isnan(b) ? NAN : a > b ? a : b;
    case 8: return isnan(a) || isnan(b) ? NAN : a < b ? a : b;
    case 9: return sqrt(x);
    default: return x < -126 ? 0.0 : exp2(x); /* flushed: never a subnormal */
  }
}

static const float SPECIAL[] = {NAN, -NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1e-45f, -1e-45f, 1e-40f, 1.17549435e-38f,
                                FLT_MAX, -FLT_MAX, 3e38f, -3e38f, 1e38f, 1.5e-39f, 88.72f, 88.73f, 88.8f, 89.0f,
                                -87.3f, -87.4f, -88.0f, -88.7f, -88.75f, -90.0f, -100.0f, -103.9f, -103.98f, -104.0f,
                                -110.0f, 127.99f, 128.0f, 128.5f, 129.0f, 130.0f, -125.5f, -126.0f, -126.5f, -130.0f,
                                -140.3f, -148.9f, -149.0f, -149.5f, -150.0f, -151.0f, -152.0f, -160.0f, 9.99f, 10.0f,
                                10.01f, -9.99f, -10.0f, -10.01f, 0.5f, -0.5f, 1.0f, -1.0f, 20.0f, -20.0f};
#define NSPECIAL ((int)(sizeof SPECIAL / sizeof SPECIAL[0]))

/* a: the specials, a sweep of [-160, 160], random values in [-12, 12]; b: the
 * specials against every a (div, max, min), else a reversed. */
static long make_inputs(float **pa, float **pb) {
  long nsweep = 64001, nrand = 4000, n = NSPECIAL * NSPECIAL + nsweep + nrand;
  float *a = malloc((size_t)n * sizeof(float)), *b = malloc((size_t)n * sizeof(float));
  long i = 0;
  for (int p = 0; p < NSPECIAL; p++)
    for (int q = 0; q < NSPECIAL; q++, i++) a[i] = SPECIAL[p], b[i] = SPECIAL[q];
  for (long k = 0; k < nsweep; k++, i++) a[i] = (float)(-160.0 + 320.0 * (double)k / (double)(nsweep - 1));
  for (long k = 0; k < nrand; k++, i++) a[i] = ct_rand() * 12.0f;
  for (long k = NSPECIAL * NSPECIAL; k < n; k++) b[k] = a[n - 1 - k + NSPECIAL * NSPECIAL];
  *pa = a, *pb = b;
  return n;
}

static void emit_variant(cg_out *o, const cg_isa *isa) {
  cg_set_isa(o, isa);
  cg_emit_isa_helpers(o);
  int w = isa->w;
  for (int f = 0; f < NFUN; f++) {
    cg_emit(o, "$T void $P_f%d(const float *pa, const float *pb, float *y, long n) {\n  long i = 0;\n", f);
    cg_emit(o, "  for (; i + %d <= n; i += %d) { $P_v a = $P_ld(pa + i), b = $P_ld(pb + i); (void)b; $P_st(y + i, %s); }\n", w,
            w, FUNS[f].expr);
    if (w > 1)
      cg_emit(o, "  if (i < n) { int m = (int)(n - i); $P_v a = $P_ldn(pa + i, m), b = $P_ldn(pb + i, m); (void)b;"
                 " $P_stn(y + i, %s, m); }\n", FUNS[f].expr);
    cg_emit(o, "}\n");
  }
  if (isa->id != CGEN_ISA_SCALAR) cg_emit(o, "#endif\n");
}

static long check_fun(void *h, const cg_isa *isa, int f, const float *a, const float *b, long n) {
  char name[64];
  snprintf(name, sizeof name, "vm_%s_f%d", isa->tag, f);
  vm_fn fn = (vm_fn)dlsym(h, name);
  if (!fn) return -1;
  float *y = malloc((size_t)n * sizeof(float));
  fn(a, b, y, n);
  long bad = 0;
  double worst = 0;
  for (long i = 0; i < n; i++) {
    double w = (float)ref(f, a[i], b[i]), g = y[i];
    double err = fabs(g - w), lim = FUNS[f].rel * fabs(w) + (FUNS[f].absx ? FUNS[f].absx * fabs(a[i]) : 0) + FUNS[f].abs;
    bool ok = isnan(w) ? isnan(g) : isinf(w) ? g == w : err <= lim;
    if (fabs(w) >= FLT_MIN && !isinf(w) && err / fabs(w) > worst) worst = err / fabs(w);
    if (!ok && bad++ < 6)
      fprintf(stderr, "%s %s(%.9g, %.9g): got %.9g want %.9g\n", isa->tag, FUNS[f].name, (double)a[i], (double)b[i], g, w);
  }
  if (getenv("VM_VERBOSE") || bad) fprintf(stderr, "%s %s: %ld wrong, worst relative error %.3g\n", isa->tag, FUNS[f].name, bad, worst);
  free(y);
  return bad;
}

static void check_all(const char *flags) {
  ut_str src;
  ut_str_init(&src);
  cg_emit_runtime(&src);
  cg_out o = {.s = &src, .F = "vm"};
  cg_set_isa(&o, NULL);
  cg_emit_scalar_conv(&o);
  for (int i = 0; i < CGEN_ISA_COUNT; i++) emit_variant(&o, cg_isa_get((cgen_isa)i));
  assert_false(src.oom);
  void *h = ct_compile_flags(src.buf, flags);
  assert_non_null(h);
  __builtin_cpu_init();
  bool have[CGEN_ISA_COUNT] = {0};
  have[CGEN_ISA_SCALAR] = true;
  have[CGEN_ISA_AVX2] = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  have[CGEN_ISA_AVX512] = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
                          __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
  float *a, *b;
  long n = make_inputs(&a, &b);
  long bad = 0;
  for (int i = 0; i < CGEN_ISA_COUNT; i++)
    for (int f = 0; have[i] && f < NFUN; f++) {
      long k = check_fun(h, cg_isa_get((cgen_isa)i), f, a, b, n);
      bad += k < 0 ? 1 : k;
    }
  assert_int_equal(bad, 0);
  free(a), free(b);
  dlclose(h);
  ut_str_free(&src);
}

static void test_vecmath(void **st) {
  (void)st;
  check_all(getenv("CT_FLAGS") ? getenv("CT_FLAGS") : "-O0");
}

static void test_vecmath_o3(void **st) {
  (void)st;
  if (!getenv("CT_FLAGS")) check_all("-O3");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_vecmath),
      cmocka_unit_test(test_vecmath_o3),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
