/* test_cgen_conv.c — implicit-GEMM convolution kernels against a direct
 * convolution: stride, dilation, asymmetric padding, groups (incl.
 * depthwise), 1x1 and 3x3 windows, bias/silu/relu/residual epilogues, half
 * storage, each ISA variant (fp32 gathers and the scalar path), errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "cgen_testutil.h"

#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

typedef int (*conv_fn)(hprt_pool *, const void *, const void *, void *, const void *const *);

typedef struct ccase {
  long n, c, h, w, oc, kh, kw, sh, sw, pt, pl, pb, pr, dh, dw, g;
  tiny_dtype xdt, wdt, ydt;
  int isa, kc, tasks;
  int nepi;
  cgen_epi_kind ek[3];
  int prepack; /* weight packed once by cN_pack_a */
} ccase;

#define F32 TINY_FP32
#define F16 TINY_FP16
#define B16 TINY_BF16
enum { SC = CGEN_ISA_SCALAR, A2 = CGEN_ISA_AVX2, A5 = CGEN_ISA_AVX512 };

static const ccase CASES[] = {
    {1, 3, 9, 11, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, F32, F32, F32, A5},
    {2, 8, 13, 12, 17, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, F32, F32, F32, A5, 0, 3},
    {1, 6, 15, 15, 9, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2, 1, F32, F32, F32, A5, 16},
    {2, 8, 10, 9, 8, 3, 2, 1, 2, 0, 1, 2, 0, 1, 1, 2, F32, F32, F32, A5, 0, 0, 2, {CGEN_EPI_BIAS_M, CGEN_EPI_SILU}},
    {1, 8, 7, 7, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 8, F32, F32, F32, A5, 0, 0, 3, {CGEN_EPI_BIAS_M, CGEN_EPI_RESIDUAL, CGEN_EPI_RELU}},
    {1, 16, 6, 6, 20, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, F32, F32, F32, A5},
    {1, 3, 9, 11, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, F32, F32, F32, A2, 8, 0, 1, {CGEN_EPI_RELU}},
    {2, 4, 11, 10, 6, 3, 3, 2, 1, 1, 0, 1, 1, 2, 1, 2, F32, F32, F32, A2, 0, 0, 2, {CGEN_EPI_BIAS_M, CGEN_EPI_SILU}},
    {1, 3, 9, 11, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, F32, F32, F32, SC, 0, 0, 1, {CGEN_EPI_BIAS_M}},
    {1, 4, 8, 8, 4, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 4, F32, F32, F32, SC},
    {1, 8, 10, 10, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, F16, F16, F16, A5, 0, 0, 2, {CGEN_EPI_BIAS_M, CGEN_EPI_RESIDUAL}},
    {1, 8, 10, 10, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 2, B16, B16, F32, A2},
    {1, 8, 12, 12, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, F32, F32, F32, -1, 0, 0, 1, {CGEN_EPI_SILU}},
    {2, 8, 9, 9, 12, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 2, F32, F32, F32, A5, 32, 0, 1, {CGEN_EPI_BIAS_M}, 1},
    {2, 8, 9, 9, 12, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 2, F32, F16, F32, A2, 0, 0, 0, {0}, 1},
};
#define NCASE ((int)(sizeof CASES / sizeof CASES[0]))

static void make_spec(const ccase *c, cgen_conv_spec *s) {
  cgen_conv_spec_init(s, c->n, c->c, c->h, c->w, c->oc, c->kh, c->kw, F32);
  s->stride[0] = c->sh, s->stride[1] = c->sw, s->dil[0] = c->dh, s->dil[1] = c->dw, s->groups = c->g;
  s->pad[0] = c->pt, s->pad[1] = c->pl, s->pad[2] = c->pb, s->pad[3] = c->pr;
  s->x_dtype = c->xdt, s->w_dtype = c->wdt, s->y_dtype = c->ydt;
  s->tune.force_isa = c->isa;
  if (c->isa >= 0) s->tune.isa_mask = 1u << c->isa;
  s->tune.kc = c->kc, s->tune.tasks = c->tasks;
  s->n_epi = c->nepi;
  for (int i = 0; i < c->nepi; i++) s->epi[i].kind = c->ek[i], s->epi[i].dtype = c->ydt;
  s->prepack_w = c->prepack;
}

static long run_case(void *h, int idx, hprt_pool *pool) {
  const ccase *c = &CASES[idx];
  cgen_conv_spec s;
  make_spec(c, &s);
  int64_t OH, OW;
  if (!cgen_conv_out_hw(&s, &OH, &OW)) return -1;
  char name[32];
  snprintf(name, sizeof name, "c%d", idx);
  conv_fn fn = (conv_fn)dlsym(h, name);
  if (!fn) return -1;
  long icg = c->c / c->g, ocg = c->oc / c->g, ny = c->n * c->oc * OH * OW;
  ct_buf X, W, Y, E[3];
  ct_alloc(&X, c->xdt, c->n * c->c * c->h * c->w, true);
  ct_alloc(&W, c->wdt, c->oc * icg * c->kh * c->kw, true);
  ct_alloc(&Y, c->ydt, ny, false);
  const void *ep[CGEN_MAX_EPI] = {0};
  for (int i = 0; i < c->nepi; i++) {
    long n = c->ek[i] == CGEN_EPI_BIAS_M ? c->oc : c->ek[i] == CGEN_EPI_RESIDUAL ? ny : 0;
    ct_alloc(&E[i], c->ydt, n, true);
    ep[i] = n ? E[i].p : NULL;
  }
  void *Wp = NULL;
  if (c->prepack) {
    char pn[48], bn[48];
    snprintf(pn, sizeof pn, "c%d_pack_a", idx);
    snprintf(bn, sizeof bn, "c%d_pack_a_bytes", idx);
    int (*pack)(hprt_pool *, const void *, void *) = (int (*)(hprt_pool *, const void *, void *))dlsym(h, pn);
    long (*bytes)(void) = (long (*)(void))dlsym(h, bn);
    if (!pack || !bytes || bytes() <= 0) return -1;
    Wp = malloc((size_t)bytes());
    if (pack(pool, W.p, Wp) != 0) return -1;
  }
  if (fn(pool, Wp ? Wp : W.p, X.p, Y.p, ep) != 0) return -1;
  free(Wp);
  double *ref = calloc((size_t)ny, sizeof(double));
  for (long n = 0; n < c->n; n++)
    for (long o = 0; o < c->oc; o++)
      for (long oh = 0; oh < OH; oh++)
        for (long ow = 0; ow < OW; ow++) {
          long g = o / ocg, yi = ((n * c->oc + o) * OH + oh) * OW + ow;
          double acc = 0;
          for (long ic = 0; ic < icg; ic++)
            for (long kh = 0; kh < c->kh; kh++)
              for (long kw = 0; kw < c->kw; kw++) {
                long ih = oh * c->sh - c->pt + kh * c->dh, iw = ow * c->sw - c->pl + kw * c->dw;
                if (ih < 0 || ih >= c->h || iw < 0 || iw >= c->w) continue;
                acc += (double)X.f[((n * c->c + g * icg + ic) * c->h + ih) * c->w + iw] *
                       W.f[((o * icg + ic) * c->kh + kh) * c->kw + kw];
              }
          for (int i = 0; i < c->nepi; i++) {
            switch (c->ek[i]) {
              case CGEN_EPI_BIAS_M: acc += E[i].f[o]; break;
              case CGEN_EPI_RESIDUAL: acc += E[i].f[yi]; break;
              case CGEN_EPI_RELU: acc = acc > 0 ? acc : 0; break;
              case CGEN_EPI_SILU: acc = acc * ct_sigmoid(acc); break;
              default: break;
            }
          }
          ref[yi] = acc;
        }
  char what[64];
  snprintf(what, sizeof what, "conv case %d", idx);
  long bad = ct_check(&Y, ref, ny, what);
  free(ref);
  ct_free(&X), ct_free(&W), ct_free(&Y);
  for (int i = 0; i < c->nepi; i++) ct_free(&E[i]);
  return bad;
}

static void test_cases(void **st) {
  (void)st;
  hp_str src;
  hp_str_init(&src);
  hp_error e;
  memset(&e, 0, sizeof e);
  for (int i = 0; i < NCASE; i++) {
    cgen_conv_spec s;
    make_spec(&CASES[i], &s);
    char name[32];
    snprintf(name, sizeof name, "c%d", i);
    assert_int_equal(cgen_conv(&e, &s, name, &src), HP_OK);
  }
  void *h = ct_compile(src.buf);
  assert_non_null(h);
  hprt_pool *(*pc)(int) = (hprt_pool * (*)(int)) dlsym(h, "hprt_pool_create");
  void (*pd)(hprt_pool *) = (void (*)(hprt_pool *))dlsym(h, "hprt_pool_destroy");
  hprt_pool *pool = pc(2);
  assert_non_null(pool);
  for (int i = 0; i < NCASE; i++) {
    assert_int_equal(run_case(h, i, pool), 0);
    if (i % 4 == 0) assert_int_equal(run_case(h, i, NULL), 0);
  }
  pd(pool);
  dlclose(h);
  hp_str_free(&src);
}

static void test_errors(void **st) {
  (void)st;
  hp_str src;
  hp_str_init(&src);
  hp_error e;
  memset(&e, 0, sizeof e);
  cgen_conv_spec s;
  cgen_conv_spec_init(&s, 1, 4, 8, 8, 4, 3, 3, F32);
  s.groups = 3;
  assert_int_equal(cgen_conv(&e, &s, "f", &src), HP_E_INVALID_ARG);
  hp_error_clear(&e);
  s.groups = 1, s.kh = 9; /* window larger than the padded input */
  assert_int_equal(cgen_conv(&e, &s, "f", &src), HP_E_INVALID_ARG);
  hp_error_clear(&e);
  s.kh = 3, s.pad[0] = -1;
  assert_int_equal(cgen_conv(&e, &s, "f", &src), HP_E_INVALID_ARG);
  hp_error_clear(&e);
  s.pad[0] = 0, s.stride[1] = 0;
  assert_int_equal(cgen_conv(&e, &s, "f", &src), HP_E_INVALID_ARG);
  hp_error_clear(&e);
  s.stride[1] = 1, s.n_epi = 1, s.epi[0].kind = CGEN_EPI_BIAS_N, s.epi[0].dtype = F32;
  assert_int_equal(cgen_conv(&e, &s, "f", &src), HP_E_UNSUPPORTED);
  hp_str_free(&src);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_errors),
      cmocka_unit_test(test_cases),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
