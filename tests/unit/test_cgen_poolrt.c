/* test_cgen_poolrt.c — pool kernels whose batch, height and width are read
 * at run time (cgen_pool_spec.n_expr / h_expr / w_expr, as a ShapeSet
 * object's: here the C variables prt_dims[0..3) of the compiled source)
 * against a loop over the window in double, each kernel generated once at
 * its upper corner and run at several smaller bindings.  Without padding
 * the kernel reads the input in place (cgen_pool.c, direct_rt: stride 1,
 * or 2x2 windows at stride 2; a max done again with the NaN-keeping max
 * where a plane holds NaN); with padding it reads a padded copy.  Planes
 * hold NaN and +-inf as in test_cgen_pool.c; rows narrower and wider than
 * a vector, the rest of rows and vectors; AVX-512 and AVX2; with and
 * without the thread pool.  Nothing may be written past a binding's
 * output (poisoned slack).  Under the sanitizers (CT_FLAGS: the kernels
 * compiled with them too), the first two cases. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "cgen_testutil.h"

#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

typedef int (*pool_fn)(hprt_pool *, const void *, void *);

enum { A2 = CGEN_ISA_AVX2, A5 = CGEN_ISA_AVX512 };

typedef struct rcase {
  long n, c, h, w, kh, kw, s, pad; /* upper corner; stride s, padding pad all round */
  bool sum;
  int isa;
  long at[5][3]; /* bindings (n, h, w); 0 ends */
} rcase;

static const rcase CASES[] = {
    /* 2x2 max at stride 2 read in place: one vector pair a row or several, odd widths (the last column unread) */
    {2, 3, 40, 70, 2, 2, 2, 0, false, A5, {{1, 2, 2}, {2, 40, 70}, {1, 9, 33}, {2, 17, 31}, {1, 40, 5}}},
    /* 3x3 sum at stride 1 in place: blocks of one vector by 8 rows, several vectors, masked tails */
    {1, 4, 37, 69, 3, 3, 1, 0, true, A5, {{1, 3, 3}, {1, 37, 69}, {1, 20, 17}, {1, 9, 50}, {1, 36, 19}}},
    /* 3x3 max at stride 1 in place, AVX2 (vectors of 8) */
    {2, 3, 21, 40, 3, 3, 1, 0, false, A2, {{1, 3, 3}, {2, 21, 40}, {2, 11, 9}, {1, 20, 13}}},
    {1, 2, 30, 45, 2, 2, 2, 0, false, A2, {{1, 2, 2}, {1, 30, 45}, {1, 13, 17}, {1, 8, 30}}},
    /* padded: the copy, for contrast */
    {1, 3, 30, 40, 3, 3, 2, 1, false, A5, {{1, 1, 1}, {1, 30, 40}, {1, 15, 21}, {1, 6, 33}}},
};
#define NCASE ((int)(sizeof CASES / sizeof CASES[0]))
static const char *EXPR[3] = {"prt_dims[0]", "prt_dims[1]", "prt_dims[2]"};

static void make_spec(const rcase *c, cgen_pool_spec *s) {
  cgen_pool_spec_init(s, c->n, c->c, c->h, c->w, c->kh, c->kw);
  s->stride[0] = s->stride[1] = c->s;
  for (int i = 0; i < 4; i++) s->pad[i] = c->pad;
  s->sum = c->sum;
  s->fill = c->sum ? 0.0f : -INFINITY;
  s->n_expr = EXPR[0], s->h_expr = EXPR[1], s->w_expr = EXPR[2];
  s->tune.force_isa = c->isa;
  s->tune.isa_mask = 1u << c->isa;
}

/* Values in [-4, 4); plane 0 NaN at (0, 1) and at its centre, plane 1 a row
 * of -inf and a +inf at the end of row 3, the last plane NaN at its far corner. */
static void fill(float *x, long planes, long h, long w) {
  for (long i = 0; i < planes * h * w; i++) {
    long p = i / (h * w), r = i % (h * w) / w, q = i % w;
    float v = ct_rand() * 4.0f;
    if (p == 0 && ((r == 0 && q == 1) || (r == h / 2 && q == w / 2))) v = NAN;
    if (p == 1 && r == 2) v = -INFINITY;
    if (p == 1 && r == 3 && q == w - 1) v = INFINITY;
    if (p == planes - 1 && planes > 2 && r == h - 1 && q == w - 1) v = NAN;
    x[i] = v;
  }
}

/* Case idx at binding (n, h, w); the number of wrong outputs (-1: the run failed). */
static long run_at(void *hd, int idx, hprt_pool *pool, long n, long h, long w) {
  const rcase *c = &CASES[idx];
  char name[16];
  snprintf(name, sizeof name, "q%d", idx);
  pool_fn fn = (pool_fn)dlsym(hd, name);
  long *dims = (long *)dlsym(hd, "prt_dims");
  if (!fn || !dims) return -1;
  dims[0] = n, dims[1] = h, dims[2] = w;
  long oh = (h + 2 * c->pad - c->kh) / c->s + 1, ow = (w + 2 * c->pad - c->kw) / c->s + 1, planes = n * c->c;
  long ny = planes * oh * ow, slack = 64;
  float *x = malloc(sizeof(float) * (size_t)(planes * h * w)), *y = malloc(sizeof(float) * (size_t)(ny + slack));
  assert_non_null(x), assert_non_null(y);
  fill(x, planes, h, w);
  for (long i = 0; i < ny + slack; i++) y[i] = 12345.0f;
  long bad = fn(pool, x, y) ? -1 : 0;
  for (long p = 0; bad >= 0 && p < planes; p++)
    for (long i = 0; i < oh; i++)
      for (long j = 0; j < ow; j++) {
        double acc = c->sum ? 0.0 : -INFINITY;
        bool nan = false;
        for (long a = 0; a < c->kh; a++)
          for (long b = 0; b < c->kw; b++) {
            long r = i * c->s + a - c->pad, q = j * c->s + b - c->pad;
            double v = r < 0 || r >= h || q < 0 || q >= w ? (c->sum ? 0.0 : -INFINITY) : x[(p * h + r) * w + q];
            nan |= isnan(v);
            acc = c->sum ? acc + v : (v > acc ? v : acc);
          }
        double want = nan ? NAN : acc, got = y[(p * oh + i) * ow + j];
        bool ok = isnan(want) ? isnan(got) : isinf(want) ? got == want : fabs(got - want) <= 1e-5 * (1 + fabs(want));
        if (!ok && bad++ < 5)
          fprintf(stderr, "case %d at %ldx%ldx%ld plane %ld (%ld, %ld): got %.9g want %.9g\n", idx, n, h, w, p, i, j, got, want);
      }
  for (long i = ny; bad >= 0 && i < ny + slack; i++)
    if (y[i] != 12345.0f && bad++ < 5) fprintf(stderr, "case %d at %ldx%ldx%ld: written past the output\n", idx, n, h, w);
  free(x), free(y);
  return bad;
}

static bool off_in_asan(int i) { return getenv("CT_FLAGS") && i > 1; }

static void test_bindings(void **st) {
  (void)st;
  ut_str src;
  ut_str_init(&src);
  ut_str_puts(&src, "long prt_dims[3];\n");
  harp_error e;
  memset(&e, 0, sizeof e);
  for (int i = 0; i < NCASE; i++) {
    if (off_in_asan(i)) continue;
    cgen_pool_spec s;
    make_spec(&CASES[i], &s);
    char name[16];
    snprintf(name, sizeof name, "q%d", i);
    assert_int_equal(cgen_pool(&e, &s, name, &src), HARP_OK);
  }
  assert_non_null(strstr(src.buf, "prt_dims[1]")); /* the sizes are read at run time */
  void *h = ct_compile_flags(src.buf, getenv("CT_FLAGS") ? getenv("CT_FLAGS") : "-O1");
  assert_non_null(h);
  hprt_pool *pool = ct_pool_create(h, 3);
  assert_non_null(pool);
  for (int i = 0; i < NCASE; i++)
    for (int b = 0; b < 5 && CASES[i].at[b][0] && !off_in_asan(i); b++) {
      const long *a = CASES[i].at[b];
      assert_int_equal(run_at(h, i, pool, a[0], a[1], a[2]), 0);
      assert_int_equal(run_at(h, i, NULL, a[0], a[1], a[2]), 0);
    }
  ct_pool_destroy(h, pool);
  dlclose(h);
  ut_str_free(&src);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bindings),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
