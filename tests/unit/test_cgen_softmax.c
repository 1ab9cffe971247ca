/* test_cgen_softmax.c — the row softmax kernel against a double-precision
 * softmax: row lengths with and without a vector tail, one column, half
 * storage in and out, a scale, rows holding NaN / +inf / only -inf (NaN
 * rows, like the reference), rows whose small terms flush to 0, large
 * magnitudes, every ISA variant, threads, -O3, errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "cgen_testutil.h"

#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

typedef int (*sm_fn)(hprt_pool *, const void *, void *);

typedef struct scase {
  long rows, cols;
  tiny_dtype xdt, ydt;
  int isa;
  float scale; /* 0: 1 */
} scase;

#define F32 TINY_FP32
#define F16 TINY_FP16
#define B16 TINY_BF16
enum { SC = CGEN_ISA_SCALAR, A2 = CGEN_ISA_AVX2, A5 = CGEN_ISA_AVX512 };

static const scase CASES[] = {
    {37, 1024, F32, F32, A5},      {80, 1000, F32, F32, A5},  /* several tasks, a tail of 8 */
    {9, 1, F32, F32, A5},          {12, 17, F32, F32, A5},     {11, 100, F16, F32, A5},
    {10, 77, B16, B16, A5},        {12, 64, F32, F16, A5, 0.5f}, {70, 1030, F32, F32, A2},
    {12, 13, F16, B16, A2, 1.7f},  {12, 40, F32, F32, SC},    {9, 3, B16, F32, SC, 0.25f},
    {300, 300, F32, F32, -1},
};
#define NCASE ((int)(sizeof CASES / sizeof CASES[0]))

static void make_spec(const scase *c, cgen_softmax_spec *s) {
  cgen_softmax_spec_init(s, c->rows, c->cols, c->xdt);
  s->y_dtype = c->ydt;
  if (c->scale != 0) s->scale = c->scale;
  s->tune.force_isa = c->isa;
  if (c->isa >= 0) s->tune.isa_mask = 1u << c->isa;
}

/* Row r's special contents (rows 0..6), else random values. */
static void fill(ct_buf *X, const scase *c) {
  for (long r = 0; r < c->rows; r++)
    for (long j = 0; j < c->cols; j++) {
      long i = r * c->cols + j;
      float v = ct_rand() * 4.0f;
      switch (r) {
        case 0: v = j == c->cols / 2 ? NAN : v; break;             /* a NaN: the row is NaN */
        case 1: v = j == c->cols - 1 ? INFINITY : v; break;       /* +inf: NaN */
        case 2: v = -INFINITY; break;                             /* only -inf: NaN */
        case 3: v = j == c->cols - 1 ? 0.0f : -1e30f; break;      /* one term, the others 0 */
        case 4: v = -200.0f * (float)j / (float)c->cols; break;  /* terms that flush to 0 */
        case 5: v = 3000.0f + v; break;                           /* large magnitudes */
        case 6: v = j % 3 ? -INFINITY : v; break;                 /* -inf among finite */
        default: break;
      }
      ct_store(X, i, v);
      X->f[i] = ct_load(X, i);
    }
}

static long run_case(void *h, int idx, hprt_pool *pool) {
  const scase *c = &CASES[idx];
  char name[32];
  snprintf(name, sizeof name, "s%d", idx);
  sm_fn fn = (sm_fn)dlsym(h, name);
  if (!fn) return -1;
  long n = c->rows * c->cols;
  ct_buf X, Y;
  ct_alloc(&X, c->xdt, n, false);
  ct_alloc(&Y, c->ydt, n, false);
  fill(&X, c);
  if (fn(pool, X.p, Y.p) != 0) return -1;
  double scale = c->scale != 0 ? c->scale : 1.0;
  /* fp32 out: a few ulp; half out: the reference rounded, within one ulp */
  double rtol = c->ydt == F32 ? 4e-6 : c->ydt == F16 ? 1.0 / 1024 : 1.0 / 128;
  long bad = 0;
  for (long r = 0; r < c->rows; r++) {
    const float *x = X.f + r * c->cols;
    double mx = -INFINITY, sum = 0;
    bool nan = false;
    for (long j = 0; j < c->cols; j++) nan |= isnan(x[j]), mx = x[j] > mx ? x[j] : mx;
    nan |= isinf(mx);
    for (long j = 0; j < c->cols && !nan; j++) sum += exp(scale * ((double)x[j] - mx));
    for (long j = 0; j < c->cols; j++) {
      double want = nan ? NAN : exp(scale * ((double)x[j] - mx)) / sum, got = ct_load(&Y, r * c->cols + j);
      if (!nan) want = ct_round(c->ydt, (float)want);
      bool ok = nan ? isnan(got) : fabs(got - want) <= rtol * fabs(want) + 1e-30;
      if (!ok && bad++ < 5)
        fprintf(stderr, "softmax case %d row %ld col %ld: got %.9g want %.9g\n", idx, r, j, got, want);
    }
  }
  ct_free(&X), ct_free(&Y);
  return bad;
}

/* Case i's kernel into src. */
static void emit_case(int i, ut_str *src) {
  harp_error e = {0};
  cgen_softmax_spec s;
  make_spec(&CASES[i], &s);
  char name[32];
  snprintf(name, sizeof name, "s%d", i);
  assert_int_equal(cgen_softmax(&e, &s, name, src), HARP_OK);
}

static void test_cases(void **st) {
  (void)st;
  ct_check_cases(NCASE, emit_case, run_case, ct_flags());
}

static void test_cases_o3(void **st) {
  (void)st;
  ct_check_cases(NCASE, emit_case, run_case, "-O3");
}

static void test_errors(void **st) {
  (void)st;
  ut_str src;
  ut_str_init(&src);
  harp_error e;
  memset(&e, 0, sizeof e);
  cgen_softmax_spec s;
  cgen_softmax_spec_init(&s, 4, 0, F32);
  assert_int_equal(cgen_softmax(&e, &s, "f", &src), HARP_E_INVALID_ARG);
  harp_error_clear(&e);
  s.cols = 1L << 24;
  assert_int_equal(cgen_softmax(&e, &s, "f", &src), HARP_E_LIMIT);
  harp_error_clear(&e);
  s.cols = 8, s.rows = 1L << 38;
  assert_int_equal(cgen_softmax(&e, &s, "f", &src), HARP_E_LIMIT);
  harp_error_clear(&e);
  s.rows = 4, s.y_dtype = TINY_I32;
  assert_int_equal(cgen_softmax(&e, &s, "f", &src), HARP_E_UNSUPPORTED);
  harp_error_clear(&e);
  s.y_dtype = F32;
  float bad_scale[] = {NAN, INFINITY, 0.0f, -1.0f};
  for (int i = 0; i < 4; i++) {
    s.scale = bad_scale[i];
    assert_int_equal(cgen_softmax(&e, &s, "f", &src), HARP_E_INVALID_ARG);
    harp_error_clear(&e);
  }
  s.scale = 1;
  assert_int_equal(cgen_softmax(&e, &s, "f-1", &src), HARP_E_INVALID_ARG);
  harp_error_clear(&e);
  assert_int_equal(cgen_softmax(&e, NULL, "f", &src), HARP_E_INVALID_ARG);
  harp_error_clear(&e);
  assert_int_equal(src.len, 0);
  assert_int_equal(cgen_softmax(&e, &s, "f", &src), HARP_OK);
  ut_str_free(&src);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_errors),
      cmocka_unit_test(test_cases),
      cmocka_unit_test(test_cases_o3),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
