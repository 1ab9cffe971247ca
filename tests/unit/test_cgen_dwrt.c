/* test_cgen_dwrt.c — depthwise conv kernels whose batch, height and width
 * are read at run time (cgen_conv_spec.n_expr / h_expr / w_expr, as a
 * ShapeSet object's: here the C variables dwrt_dims[0..3) of the compiled
 * source) against a plain loop nest in double, each kernel generated once at
 * its upper corner and run at several smaller bindings: odd and even sizes,
 * 1x1 to the corner, one vector or several a row; strides 1, 2 (both pad
 * parities, asymmetric padding) and 3 (column by column), dilation, 3x3 and
 * 5x5 windows, bias / residual / ReLU epilogues, prepacked weights, an fp16
 * input, the AVX-512, AVX2 and scalar variants, with and without the thread
 * pool.  Nothing may be written past a binding's output (poisoned slack).
 * Under the sanitizers, four of the cases (off_in_asan()).
 * tests/models/dw_hw.harp covers the same kernels through a ShapeSet
 * object (test_sgen). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "cgen_testutil.h"

#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

typedef int (*conv_fn)(hprt_pool *, const void *, const void *, void *, const void *const *);

enum { SC = CGEN_ISA_SCALAR, A2 = CGEN_ISA_AVX2, A5 = CGEN_ISA_AVX512 };
enum { RN = 1, RH = 2, RW = 4 }; /* which sizes are read at run time */

typedef struct dcase {
  long n, c, h, w, k, kw, s, pt, pl, pb, pr, dil; /* upper corner; a k x kw window */
  int isa, rt;
  tiny_dtype xdt;
  int bias, res, relu, prepack;
  long at[5][3]; /* bindings (n, h, w); 0 ends */
  int ybf16;     /* a bf16 output (else fp32) */
} dcase;

#define F32 TINY_FP32
static const dcase CASES[] = {
    {2, 5, 13, 37, 3, 3, 1, 1, 1, 1, 1, 1, A5, RN | RH | RW, F32, 1, 0, 1, 0,
     {{1, 1, 1}, {2, 13, 37}, {1, 7, 16}, {2, 3, 33}, {1, 13, 5}}},
    {1, 4, 21, 70, 5, 5, 1, 2, 2, 2, 2, 1, A5, RH | RW, F32, 1, 1, 1, 1, {{1, 21, 70}, {1, 2, 3}, {1, 9, 17}, {1, 20, 48}}},
    {2, 6, 15, 45, 3, 3, 2, 1, 1, 1, 1, 1, A5, RN | RH | RW, F32, 0, 0, 0, 0,
     {{2, 15, 45}, {1, 3, 3}, {1, 8, 32}, {2, 11, 17}, {1, 14, 33}}},
    {1, 3, 19, 67, 5, 5, 2, 2, 2, 2, 2, 1, A5, RH | RW, F32, 1, 0, 1, 0, {{1, 19, 67}, {1, 5, 5}, {1, 10, 34}, {1, 17, 31}}},
    {1, 4, 14, 40, 3, 3, 2, 0, 0, 1, 1, 1, A5, RH | RW, F32, 0, 1, 0, 0, {{1, 14, 40}, {1, 2, 2}, {1, 9, 33}, {1, 6, 17}}},
    {1, 4, 17, 41, 3, 3, 1, 2, 1, 0, 1, 1, A5, RW, F32, 1, 1, 0, 1, {{1, 17, 41}, {1, 17, 2}, {1, 17, 16}, {1, 17, 31}}},
    {1, 3, 12, 35, 3, 3, 1, 2, 2, 2, 2, 2, A5, RH | RW, F32, 0, 0, 1, 0, {{1, 12, 35}, {1, 1, 1}, {1, 7, 19}}},
    {1, 5, 16, 50, 3, 3, 3, 1, 1, 1, 1, 1, A5, RH | RW, F32, 1, 0, 0, 0, {{1, 16, 50}, {1, 2, 2}, {1, 9, 23}}},
    {1, 5, 11, 29, 3, 3, 1, 1, 1, 1, 1, 1, A2, RH | RW, TINY_FP16, 1, 0, 1, 0, {{1, 11, 29}, {1, 1, 1}, {1, 6, 9}}},
    {2, 3, 13, 35, 5, 5, 2, 2, 1, 2, 1, 1, A2, RN | RH | RW, F32, 0, 1, 0, 0, {{2, 13, 35}, {1, 3, 3}, {2, 8, 18}}},
    {1, 3, 9, 21, 3, 3, 2, 1, 1, 1, 1, 1, SC, RH | RW, F32, 1, 0, 1, 0, {{1, 9, 21}, {1, 1, 1}, {1, 6, 10}}},
};
#define NCASE ((int)(sizeof CASES / sizeof CASES[0]))

/* Sizes fixed at compile time, planes small enough for the flat variant
 * (output rows side by side in the lanes: 2 * ow <= 16 on AVX-512): 7x7,
 * 5x9 and 14x14 at stride 2 (both pad parities), 20x6, 3x3 and 5x5 windows,
 * dilation, residual, ReLU6 (relu 2: a clamp to [0, 0.5]), bf16 input and
 * output; then a 14x14 at stride 1 and a 7x7 on AVX2 (rows of a vector),
 * a 4x4 on AVX2 (flat). */
#define B16 TINY_BF16
static const dcase FIXED[] = {
    {2, 5, 7, 7, 3, 3, 1, 1, 1, 1, 1, 1, A5, 0, F32, 1, 1, 2, 0, {{0}}, 0},
    {1, 3, 5, 9, 3, 3, 2, 1, 1, 1, 1, 1, A5, 0, F32, 1, 0, 1, 1, {{0}}, 0},
    {1, 4, 14, 14, 3, 3, 2, 0, 0, 1, 1, 1, A5, 0, F32, 1, 1, 2, 0, {{0}}, 0},
    {1, 4, 14, 14, 3, 3, 2, 1, 1, 1, 1, 1, A5, 0, B16, 1, 0, 2, 1, {{0}}, 1},
    {1, 3, 15, 13, 5, 5, 2, 2, 1, 2, 2, 1, A5, 0, B16, 0, 1, 0, 0, {{0}}, 0},
    {1, 3, 7, 7, 5, 5, 1, 2, 2, 2, 2, 1, A5, 0, B16, 1, 1, 2, 0, {{0}}, 1},
    {1, 2, 9, 8, 3, 3, 1, 2, 2, 2, 2, 2, A5, 0, F32, 0, 1, 1, 0, {{0}}, 0},
    {1, 3, 20, 6, 3, 3, 1, 1, 1, 1, 1, 1, A5, 0, F32, 1, 1, 2, 0, {{0}}, 0},
    {1, 4, 14, 14, 3, 3, 1, 1, 1, 1, 1, 1, A5, 0, B16, 1, 1, 2, 0, {{0}}, 1},
    {1, 3, 7, 7, 3, 3, 1, 1, 1, 1, 1, 1, A2, 0, B16, 1, 1, 2, 0, {{0}}, 0},
    {2, 3, 4, 4, 3, 3, 1, 1, 1, 1, 1, 1, A2, 0, F32, 1, 1, 2, 0, {{0}}, 1},
};
#define NFIXED ((int)(sizeof FIXED / sizeof FIXED[0]))

static const char *EXPR[3] = {"dwrt_dims[0]", "dwrt_dims[1]", "dwrt_dims[2]"};

static void make_spec(const dcase *c, cgen_conv_spec *s) {
  cgen_conv_spec_init(s, c->n, c->c, c->h, c->w, c->c, c->k, c->kw, F32);
  s->y_dtype = c->ybf16 ? TINY_BF16 : F32;
  s->groups = c->c;
  s->stride[0] = s->stride[1] = c->s;
  s->dil[0] = s->dil[1] = c->dil;
  s->pad[0] = c->pt, s->pad[1] = c->pl, s->pad[2] = c->pb, s->pad[3] = c->pr;
  s->x_dtype = c->xdt;
  s->tune.force_isa = c->isa, s->tune.isa_mask = 1u << c->isa;
  s->prepack_w = c->prepack;
  if (c->bias) s->epi[s->n_epi++].kind = CGEN_EPI_BIAS_M;
  if (c->res) s->epi[s->n_epi++].kind = CGEN_EPI_RESIDUAL;
  if (c->relu == 1) s->epi[s->n_epi++].kind = CGEN_EPI_RELU;
  if (c->relu == 2) s->epi[s->n_epi].kind = CGEN_EPI_CLAMP, s->epi[s->n_epi].lo = 0, s->epi[s->n_epi++].hi = 0.5f;
  for (int i = 0; i < s->n_epi; i++) s->epi[i].dtype = F32;
  if (c->rt & RN) s->n_expr = EXPR[0];
  if (c->rt & RH) s->h_expr = EXPR[1];
  if (c->rt & RW) s->w_expr = EXPR[2];
}

/* The output size of case c at input size h x w. */
static void out_hw(const dcase *c, long h, long w, long *oh, long *ow) {
  *oh = (h + c->pt + c->pb - c->dil * (c->k - 1) - 1) / c->s + 1;
  *ow = (w + c->pl + c->pr - c->dil * (c->kw - 1) - 1) / c->s + 1;
}

/* Case c at binding b (n, h, w) on kernel "<pre><idx>" of h: against the
 * loop nest, |got - ref| <= 1e-5 (1 + |ref|) (a bf16 output: against the
 * reference rounded to bf16, one bf16 step); the number of bad outputs. */
static long run_at(void *h, const dcase *c, const char *pre, int idx, const long *b, hprt_pool *pool) {
  long N = c->rt & RN ? b[0] : c->n, H = c->rt & RH ? b[1] : c->h, W = c->rt & RW ? b[2] : c->w, OH, OW;
  out_hw(c, H, W, &OH, &OW);
  long *dims = (long *)dlsym(h, "dwrt_dims");
  char name[32];
  snprintf(name, sizeof name, "%s%d", pre, idx);
  conv_fn fn = (conv_fn)dlsym(h, name);
  if (!dims || !fn) return -1;
  dims[0] = N, dims[1] = H, dims[2] = W;
  long C = c->c, ny = N * C * OH * OW, khw = c->k * c->kw;
  ct_buf X, Wt, Y, B, R;
  ct_alloc(&X, c->xdt, N * C * H * W, true);
  ct_alloc(&Wt, F32, C * khw, true);
  ct_alloc(&B, F32, C, true);
  ct_alloc(&R, F32, ny, true);
  ct_alloc(&Y, c->ybf16 ? TINY_BF16 : F32, ny + 64, false); /* the poisoned slack past the end must stay so */
  const void *ep[3] = {0};
  int ne = 0;
  if (c->bias) ep[ne++] = B.p;
  if (c->res) ep[ne++] = R.p;
  void *Wp = NULL;
  if (c->prepack) {
    char pn[48], bn[48];
    snprintf(pn, sizeof pn, "%s%d_pack_a", pre, idx);
    snprintf(bn, sizeof bn, "%s%d_pack_a_bytes", pre, idx);
    int (*pack)(hprt_pool *, const void *, void *) = (int (*)(hprt_pool *, const void *, void *))dlsym(h, pn);
    long (*bytes)(void) = (long (*)(void))dlsym(h, bn);
    if (!pack || !bytes || bytes() <= 0) return -1;
    Wp = malloc((size_t)bytes());
    if (pack(pool, Wt.p, Wp) != 0) return -1;
  }
  long bad = fn(pool, Wp ? Wp : Wt.p, X.p, Y.p, ep) != 0 ? 1 : 0;
  free(Wp);
  for (long p = 0; p < N * C; p++)
    for (long oh = 0; oh < OH; oh++)
      for (long ow = 0; ow < OW; ow++) {
        long ch = p % C, yi = (p * OH + oh) * OW + ow;
        double acc = 0;
        for (long kh = 0; kh < c->k; kh++)
          for (long kw = 0; kw < c->kw; kw++) {
            long ih = oh * c->s - c->pt + kh * c->dil, iw = ow * c->s - c->pl + kw * c->dil;
            if (ih >= 0 && ih < H && iw >= 0 && iw < W) acc += (double)X.f[(p * H + ih) * W + iw] * Wt.f[ch * khw + kh * c->kw + kw];
          }
        if (c->bias) acc += B.f[ch];
        if (c->res) acc += R.f[yi];
        if (c->relu && acc < 0) acc = 0;
        if (c->relu == 2 && acc > 0.5) acc = 0.5;
        double got = ct_load(&Y, yi), tol = 1e-5 * (1 + fabs(acc));
        if (c->ybf16) acc = ct_round(TINY_BF16, (float)acc), tol = (1e-5 + 1.0 / 128) * fabs(acc) + 1e-5;
        if (!(fabs(got - acc) <= tol) && bad++ < 4)
          fprintf(stderr, "%s%d at %ldx%ldx%ld: [%ld] got %.8g want %.8g\n", pre, idx, N, H, W, yi, got, acc);
      }
  for (long i = ny; i < ny + 64; i++)
    if (ct_load(&Y, i) != ct_round(Y.dt, 1234.5f) && bad++ < 4) fprintf(stderr, "%s%d at %ldx%ldx%ld: [%ld] written past the end\n", pre, idx, N, H, W, i);
  ct_free(&X), ct_free(&Wt), ct_free(&Y), ct_free(&B), ct_free(&R);
  return bad;
}

/* Under the sanitizers (CT_FLAGS set: the kernels compiled with them, a
 * few times slower to build and run) four cases: stride 1 and 2 on
 * AVX-512, an fp16 input on AVX2, the scalar variant. */
static bool off_in_asan(int i) { return getenv("CT_FLAGS") && i != 0 && i != 2 && i != 8 && i != 10; }

/* The kernels "<pre><i>" of cases cs[0..n) not off(i) into src (after the
 * sizes dwrt_dims); those with run-time sizes must be allowed them. */
static void add_kernels(ut_str *src, const dcase *cs, int n, const char *pre, bool (*off)(int)) {
  ut_str_puts(src, "long dwrt_dims[3];\n");
  harp_error e;
  memset(&e, 0, sizeof e);
  for (int i = 0; i < n; i++) {
    if (off(i)) continue;
    cgen_conv_spec s;
    make_spec(&cs[i], &s);
    const char *why;
    assert_true(!cs[i].rt || cgen_conv_rt_ok(&s, &why));
    char name[32];
    snprintf(name, sizeof name, "%s%d", pre, i);
    assert_int_equal(cgen_conv(&e, &s, name, src), HARP_OK);
  }
}

static void test_bindings(void **st) {
  (void)st;
  ut_str src;
  ut_str_init(&src);
  add_kernels(&src, CASES, NCASE, "d", off_in_asan);
  assert_non_null(strstr(src.buf, "dwrt_dims[1]")); /* the sizes are read at run time */
  void *h = ct_compile(src.buf);
  assert_non_null(h);
  hprt_pool *pool = ct_pool_create(h, 2);
  assert_non_null(pool);
  /* each binding right after the upper corner on the same scratch: a
   * kernel that reads what it did not write this run reads the corner's data */
  for (int i = 0; i < NCASE; i++)
    for (int b = 0; b < 5 && CASES[i].at[b][0] && !off_in_asan(i); b++) {
      const long up[3] = {CASES[i].n, CASES[i].h, CASES[i].w};
      hprt_pool *p = b % 2 ? NULL : pool;
      if (run_at(h, &CASES[i], "d", i, up, p) || run_at(h, &CASES[i], "d", i, CASES[i].at[b], p)) fail_msg("case d%d, binding %d", i, b);
    }
  /* a binding past the upper corner is refused, nothing written */
  long *dims = (long *)dlsym(h, "dwrt_dims");
  conv_fn fn = (conv_fn)dlsym(h, "d0");
  float x[4] = {0}, w[45] = {0}, bias[5] = {0}, y[4] = {1234.5f};
  const void *ep[1] = {bias};
  dims[0] = 1, dims[1] = CASES[0].h + 1, dims[2] = 1;
  assert_int_not_equal(fn(pool, w, x, y, ep), 0);
  assert_true(y[0] == 1234.5f);
  ct_pool_destroy(h, pool);
  dlclose(h);
  ut_str_free(&src);
}

/* The cases with sizes fixed at compile time (FIXED), with and without
 * the pool; the small planes take the flat variant (its lane permutations). */
static bool fixed_off_in_asan(int i) { return getenv("CT_FLAGS") && i != 0 && i != 3 && i != 4; } /* 7x7, stride 2, 5x5 */

static void test_fixed(void **st) {
  (void)st;
  ut_str src;
  ut_str_init(&src);
  add_kernels(&src, FIXED, NFIXED, "f", fixed_off_in_asan);
  assert_non_null(strstr(src.buf, "_mm512_permutexvar_ps"));
  void *h = ct_compile(src.buf);
  assert_non_null(h);
  hprt_pool *pool = ct_pool_create(h, 2);
  assert_non_null(pool);
  for (int i = 0; i < NFIXED; i++) {
    if (fixed_off_in_asan(i)) continue;
    const long up[3] = {FIXED[i].n, FIXED[i].h, FIXED[i].w};
    if (run_at(h, &FIXED[i], "f", i, up, pool) || run_at(h, &FIXED[i], "f", i, up, NULL)) fail_msg("fixed case f%d", i);
  }
  ct_pool_destroy(h, pool);
  dlclose(h);
  ut_str_free(&src);
}

/* A stride beyond 16 columns or a window beyond 11x11 is refused with sizes
 * read at run time as without. */
static void test_limits(void **st) {
  (void)st;
  cgen_conv_spec s;
  make_spec(&CASES[0], &s);
  s.stride[1] = 17;
  ut_str src;
  ut_str_init(&src);
  harp_error e;
  memset(&e, 0, sizeof e);
  assert_int_equal(cgen_conv(&e, &s, "bad", &src), HARP_E_LIMIT);
  ut_str_free(&src);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bindings),
      cmocka_unit_test(test_fixed),
      cmocka_unit_test(test_limits),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
