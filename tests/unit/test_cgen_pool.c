/* test_cgen_pool.c — the pool kernel against a direct loop over the
 * padded window in double: max and sum, strides 1 to 3, dilation, asymmetric
 * and zero padding, pad values -inf / 0 / 1.5, half storage in and out, an
 * epilogue (scale, relu, a rounding), planes holding NaN (the window's max is
 * NaN) or +-inf, rows narrower and wider than a vector, every ISA variant,
 * threads, -O3, errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "cgen_testutil.h"

#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

typedef int (*pool_fn)(hprt_pool *, const void *, void *);

typedef struct pcase {
  long n, c, h, w, k, s; /* square window k, stride s both ways */
  long pt, pl, pb, pr, dil;
  bool sum;
  float fill;
  tiny_dtype xdt, ydt;
  int isa;
  bool epi; /* avg scale, relu, then round to fp16 */
} pcase;

#define F32 TINY_FP32
#define F16 TINY_FP16
#define B16 TINY_BF16
enum { SC = CGEN_ISA_SCALAR, A2 = CGEN_ISA_AVX2, A5 = CGEN_ISA_AVX512 };
#define NI (-INFINITY)

static const pcase CASES[] = {
    {1, 6, 30, 30, 3, 2, 1, 1, 1, 1, 1, false, NI, F32, F32, A5},   /* the ResNet stem pool, smaller */
    {2, 3, 31, 45, 3, 2, 0, 0, 0, 0, 1, false, NI, F32, F32, A5},   /* floor: the last column unread */
    {1, 4, 13, 70, 3, 1, 1, 1, 1, 1, 1, false, NI, F32, F32, A5},   /* stride 1, a masked tail */
    {1, 3, 9, 9, 2, 2, 0, 1, 1, 0, 1, false, NI, F16, F16, A5},     /* asymmetric padding, fp16 */
    {1, 3, 20, 33, 3, 3, 1, 1, 1, 1, 1, false, NI, B16, F32, A5},   /* stride 3: column by column */
    {1, 2, 17, 40, 3, 2, 2, 2, 2, 2, 2, false, NI, F32, F32, A5},   /* dilation 2 */
    {1, 5, 16, 16, 2, 2, 0, 0, 0, 0, 1, true, 0.0f, F32, F32, A5, true}, /* avg 2x2, relu, fp16 rounding */
    {2, 3, 11, 37, 3, 1, 1, 1, 1, 1, 1, true, 1.5f, F16, F32, A5},  /* a sum padded with 1.5 */
    {1, 4, 30, 30, 3, 2, 1, 1, 1, 1, 1, false, NI, F32, F32, A2},
    {1, 3, 12, 41, 3, 1, 1, 1, 1, 1, 1, false, NI, F16, B16, A2},
    {1, 3, 15, 15, 3, 2, 1, 0, 1, 0, 1, true, 0.0f, F32, F32, A2, true},
    {1, 3, 14, 19, 3, 2, 1, 1, 1, 1, 1, false, NI, F32, F32, SC},
    {1, 2, 9, 10, 2, 1, 0, 0, 1, 1, 1, true, 0.0f, B16, F32, SC, true},
    {3, 7, 23, 23, 3, 2, 1, 1, 1, 1, 1, false, NI, F32, F32, -1},   /* dispatch by CPUID */
};
#define NCASE ((int)(sizeof CASES / sizeof CASES[0]))

static void make_spec(const pcase *c, cgen_pool_spec *s) {
  cgen_pool_spec_init(s, c->n, c->c, c->h, c->w, c->k, c->k);
  s->stride[0] = s->stride[1] = c->s;
  s->dil[0] = s->dil[1] = c->dil;
  s->pad[0] = c->pt, s->pad[1] = c->pl, s->pad[2] = c->pb, s->pad[3] = c->pr;
  s->sum = c->sum;
  s->fill = c->fill;
  s->x_dtype = c->xdt, s->y_dtype = c->ydt;
  if (c->epi) {
    s->n_epi = 3;
    s->epi[0] = (cgen_epi){.kind = CGEN_EPI_SCALE, .scale = 1.0f / (float)(c->k * c->k)};
    s->epi[1] = (cgen_epi){.kind = CGEN_EPI_RELU};
    s->epi[2] = (cgen_epi){.kind = CGEN_EPI_ROUND, .dtype = F16};
  }
  s->tune.force_isa = c->isa;
  if (c->isa >= 0) s->tune.isa_mask = 1u << c->isa;
}

/* Random values; plane 0 holds a NaN near its corner and one inside, plane 1
 * a row of -inf and a +inf, the last plane NaN at its far corner. */
static void fill(ct_buf *X, const pcase *c) {
  long hw = c->h * c->w, planes = c->n * c->c;
  for (long i = 0; i < planes * hw; i++) {
    long p = i / hw, r = i % hw / c->w, q = i % c->w;
    float v = ct_rand() * 4.0f;
    if (p == 0 && ((r == 0 && q == 1) || (r == c->h / 2 && q == c->w / 2))) v = NAN;
    if (p == 1 && r == 2) v = -INFINITY;
    if (p == 1 && r == 3 && q == c->w - 1) v = INFINITY;
    if (p == planes - 1 && planes > 2 && r == c->h - 1 && q == c->w - 1) v = NAN;
    ct_store(X, i, v);
    X->f[i] = ct_load(X, i);
  }
}

static long run_case(void *h, int idx, hprt_pool *pool) {
  const pcase *c = &CASES[idx];
  char name[32];
  snprintf(name, sizeof name, "p%d", idx);
  pool_fn fn = (pool_fn)dlsym(h, name);
  if (!fn) return -1;
  long oh = (c->h + c->pt + c->pb - c->dil * (c->k - 1) - 1) / c->s + 1;
  long ow = (c->w + c->pl + c->pr - c->dil * (c->k - 1) - 1) / c->s + 1, planes = c->n * c->c;
  ct_buf X, Y;
  ct_alloc(&X, c->xdt, planes * c->h * c->w, false);
  ct_alloc(&Y, c->ydt, planes * oh * ow, false);
  fill(&X, c);
  if (fn(pool, X.p, Y.p) != 0) return -1;
  double fillv = ct_round(c->xdt, c->fill); /* the pad value as the input's dtype holds it */
  long bad = 0;
  for (long p = 0; p < planes; p++)
    for (long i = 0; i < oh; i++)
      for (long j = 0; j < ow; j++) {
        double acc = c->sum ? 0.0 : -INFINITY;
        bool nan = false;
        for (long a = 0; a < c->k; a++)
          for (long b = 0; b < c->k; b++) {
            long r = i * c->s + a * c->dil - c->pt, q = j * c->s + b * c->dil - c->pl;
            double v = r < 0 || r >= c->h || q < 0 || q >= c->w ? fillv : X.f[(p * c->h + r) * c->w + q];
            nan |= isnan(v);
            acc = c->sum ? acc + v : (v > acc ? v : acc);
          }
        double want = nan ? NAN : acc;
        if (c->epi) {
          want = want / (double)(c->k * c->k);
          want = want > 0 ? want : (isnan(want) ? want : 0.0);
          want = ct_round(F16, (float)want);
        }
        if (!isnan(want)) want = ct_round(c->ydt, (float)want);
        double got = ct_load(&Y, (p * oh + i) * ow + j);
        double tol = c->ydt == F32 && c->xdt == F32 && !c->epi ? 1e-5 : 1e-2;
        bool ok = isnan(want) ? isnan(got) : isinf(want) ? got == want : fabs(got - want) <= tol * (1 + fabs(want));
        if (!ok && bad++ < 5)
          fprintf(stderr, "pool case %d plane %ld (%ld, %ld): got %.9g want %.9g\n", idx, p, i, j, got, want);
      }
  ct_free(&X), ct_free(&Y);
  return bad;
}

/* Case i's kernel into src. */
static void emit_case(int i, ut_str *src) {
  harp_error e = {0};
  cgen_pool_spec s;
  make_spec(&CASES[i], &s);
  char name[32];
  snprintf(name, sizeof name, "p%d", i);
  assert_int_equal(cgen_pool(&e, &s, name, src), HARP_OK);
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
  cgen_pool_spec s;
  cgen_pool_spec_init(&s, 1, 2, 4, 4, 5, 5); /* window larger than the input */
  assert_int_equal(cgen_pool(&e, &s, "f", &src), HARP_E_INVALID_ARG);
  harp_error_clear(&e);
  s.kh = s.kw = 3, s.pad[1] = -1;
  assert_int_equal(cgen_pool(&e, &s, "f", &src), HARP_E_INVALID_ARG);
  harp_error_clear(&e);
  s.pad[1] = 0, s.fill = NAN;
  assert_int_equal(cgen_pool(&e, &s, "f", &src), HARP_E_UNSUPPORTED);
  harp_error_clear(&e);
  s.fill = 0, s.n_epi = 1, s.epi[0] = (cgen_epi){.kind = CGEN_EPI_RESIDUAL};
  assert_int_equal(cgen_pool(&e, &s, "f", &src), HARP_E_UNSUPPORTED);
  harp_error_clear(&e);
  s.n_epi = 0, s.stride[1] = 17;
  assert_int_equal(cgen_pool(&e, &s, "f", &src), HARP_E_LIMIT);
  harp_error_clear(&e);
  s.stride[1] = 1, s.x_dtype = TINY_I32;
  assert_int_equal(cgen_pool(&e, &s, "f", &src), HARP_E_UNSUPPORTED);
  harp_error_clear(&e);
  s.x_dtype = F32;
  assert_int_equal(cgen_pool(&e, &s, "f-1", &src), HARP_E_INVALID_ARG);
  harp_error_clear(&e);
  assert_int_equal(cgen_pool(&e, NULL, "f", &src), HARP_E_INVALID_ARG);
  harp_error_clear(&e);
  assert_int_equal(src.len, 0);
  assert_int_equal(cgen_pool(&e, &s, "f", &src), HARP_OK);
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
