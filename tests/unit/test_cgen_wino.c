/* test_cgen_wino.c — Winograd convolution kernels (cgen_wino.c) against a
 * direct convolution in double precision: F(2x2,3x3) and F(4x4,3x3),
 * paddings 0 to 3 (asymmetric too, rows wholly in the padding), odd channel
 * counts, batch 1-3, output sizes not a multiple of the tile, one tile and
 * many blocks of tiles, output channels not a multiple of the channel block,
 * fused bias / relu / silu / residual (and multiplying forms), weights
 * transformed once (prepack) or on every call, with and without a pool.
 * rows of tiles (at least 14 a row: contiguous loads and stores) and
 * images of shorter rows (any 16 tiles: gathers and scatters).
 * Checks the error bound (max |got - ref| / max |ref|) of each tile on a
 * 256-channel layer, that no kernel writes past its output, that the source
 * says Winograd, and that cgen_conv refuses a Winograd spec it cannot run
 * (stride, dilation, groups, window, fp16, no vector ISA) instead of running
 * something else.  The AVX2 variant (forced by tune.isa_mask / force_isa, as
 * the other AVX2 tests do; this machine runs it) on every case above and
 * more (channels not a multiple of 8, blocks of one vector, 12-channel
 * blocks), with the same tolerances and error bounds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "backend/c/cgen_int.h"
#include "cgen_testutil.h"

#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

typedef int (*conv_fn)(hprt_pool *, const void *, const void *, void *, const void *const *);

typedef struct wcase {
  long n, c, h, w, oc, pt, pl, pb, pr;
  int algo; /* CGEN_CONV_WINO (the tile cgen_conv_wino_tile picks), WINO2, WINO4 */
  int nepi;
  cgen_epi_kind ek[3];
  int prepack;
  int mulm; /* bit i: tensor step i multiplies */
  int half; /* storage: a row of HALF (0: all fp32) */
} wcase;

/* Storage of input, weight, output and residual by wcase.half. */
static const tiny_dtype HALF[][4] = {{TINY_FP32, TINY_FP32, TINY_FP32, TINY_FP32},
                                     {TINY_FP16, TINY_FP16, TINY_FP16, TINY_FP16},
                                     {TINY_BF16, TINY_BF16, TINY_BF16, TINY_BF16},
                                     {TINY_FP16, TINY_FP16, TINY_FP32, TINY_FP32},
                                     {TINY_FP32, TINY_BF16, TINY_BF16, TINY_FP16}};

enum { W0 = CGEN_CONV_WINO, W2 = CGEN_CONV_WINO2, W4 = CGEN_CONV_WINO4 };
#define BI CGEN_EPI_BIAS_M
#define RE CGEN_EPI_RELU
#define SI CGEN_EPI_SILU
#define RS CGEN_EPI_RESIDUAL

static const wcase CASES[] = {
    {1, 3, 9, 11, 5, 1, 1, 1, 1, W2},
    {1, 3, 9, 11, 5, 1, 1, 1, 1, W4},
    {2, 8, 13, 12, 17, 1, 1, 1, 1, W4, 2, {BI, RE}},
    {3, 7, 10, 10, 9, 0, 0, 0, 0, W4, 1, {RS}},
    {3, 7, 10, 10, 9, 0, 0, 0, 0, W2, 2, {BI, RS}, 0, 2},
    {1, 16, 15, 17, 24, 2, 2, 2, 2, W2, 2, {BI, SI}, 1},
    {2, 5, 6, 7, 8, 2, 1, 0, 2, W4, 3, {BI, RS, RE}, 1},
    {1, 33, 30, 29, 40, 1, 1, 1, 1, W4, 2, {BI, RE}},
    {1, 1, 3, 3, 1, 0, 0, 0, 0, W4},
    {1, 4, 5, 6, 6, 3, 3, 3, 3, W4, 1, {BI}},
    {2, 64, 14, 14, 64, 1, 1, 1, 1, W0, 2, {BI, RS}, 1, 1},
    {1, 19, 7, 7, 30, 1, 1, 1, 1, W0, 1, {SI}},
    /* rows of 14 tiles or more: vectors along a tile row (loads, permutes, row stores) */
    {1, 5, 9, 60, 7, 1, 1, 1, 1, W4},
    {2, 3, 11, 70, 9, 2, 1, 0, 2, W4, 3, {BI, RS, RE}},
    {1, 6, 7, 30, 10, 1, 1, 1, 1, W2, 1, {RS}, 0, 1},
    {3, 4, 5, 33, 17, 0, 0, 0, 0, W2, 1, {BI}, 1},
    {1, 2, 4, 56, 5, 3, 3, 3, 3, W4, 1, {SI}},
    {1, 8, 40, 56, 16, 1, 1, 1, 1, W0, 2, {BI, RE}, 1},
};
#define NCASE ((int)(sizeof CASES / sizeof CASES[0]))

/* The spec of case c for the one variant `isa` (CGEN_ISA_AVX512 or AVX2). */
static void make_spec(const wcase *c, cgen_conv_spec *s, int isa) {
  cgen_conv_spec_init(s, c->n, c->c, c->h, c->w, c->oc, 3, 3, TINY_FP32);
  s->pad[0] = c->pt, s->pad[1] = c->pl, s->pad[2] = c->pb, s->pad[3] = c->pr;
  s->tune.force_isa = isa;
  s->tune.isa_mask = 1u << isa;
  s->tune.conv_algo = c->algo;
  s->n_epi = c->nepi;
  for (int i = 0; i < c->nepi; i++) s->epi[i].kind = c->ek[i], s->epi[i].dtype = TINY_FP32, s->epi[i].mul = c->mulm >> i & 1;
  s->prepack_w = c->prepack;
  s->x_dtype = HALF[c->half][0], s->w_dtype = HALF[c->half][1], s->y_dtype = HALF[c->half][2];
  for (int i = 0; i < c->nepi; i++)
    if (c->ek[i] == RS) s->epi[i].dtype = HALF[c->half][3];
}

/* Direct convolution in double, then the epilogue. */
static void reference(const wcase *c, const ct_buf *X, const ct_buf *W, const ct_buf *E, long OH, long OW, double *ref) {
  for (long n = 0; n < c->n; n++)
    for (long o = 0; o < c->oc; o++)
      for (long oh = 0; oh < OH; oh++)
        for (long ow = 0; ow < OW; ow++) {
          long yi = ((n * c->oc + o) * OH + oh) * OW + ow;
          double acc = 0;
          for (long ic = 0; ic < c->c; ic++)
            for (long kh = 0; kh < 3; kh++)
              for (long kw = 0; kw < 3; kw++) {
                long ih = oh - c->pt + kh, iw = ow - c->pl + kw;
                if (ih < 0 || ih >= c->h || iw < 0 || iw >= c->w) continue;
                acc += (double)X->f[((n * c->c + ic) * c->h + ih) * c->w + iw] * W->f[((o * c->c + ic) * 3 + kh) * 3 + kw];
              }
          for (int i = 0; i < c->nepi; i++) {
            bool mul = c->mulm >> i & 1;
            switch (c->ek[i]) {
              case BI: acc = mul ? acc * E[i].f[o] : acc + E[i].f[o]; break;
              case RS: acc = mul ? acc * E[i].f[yi] : acc + E[i].f[yi]; break;
              case RE: acc = acc > 0 ? acc : 0; break;
              case SI: acc = acc * ct_sigmoid(acc); break;
              default: break;
            }
          }
          ref[yi] = acc;
        }
}

/* Run kernel `name` of case c (pool or not); the largest error relative to
 * the largest |ref| in *rel; the number of bad elements (ct_check's
 * tolerance, and the poisoned slack past the output), -1 on a failure. */
static long run_case(void *h, const wcase *c, const char *name, hprt_pool *pool, double *rel) {
  cgen_conv_spec s;
  make_spec(c, &s, CGEN_ISA_AVX512);
  int64_t OH, OW;
  if (!cgen_conv_out_hw(&s, &OH, &OW)) return -1;
  conv_fn fn = (conv_fn)dlsym(h, name);
  if (!fn) return -1;
  long ny = c->n * c->oc * OH * OW;
  ct_buf X, W, Y, E[3];
  const tiny_dtype *dt = HALF[c->half];
  ct_alloc(&X, dt[0], c->n * c->c * c->h * c->w, true);
  ct_alloc(&W, dt[1], c->oc * c->c * 9, true);
  ct_alloc(&Y, dt[2], ny + 32, false);
  const void *ep[CGEN_MAX_EPI] = {0};
  for (int i = 0; i < c->nepi; i++) {
    long n = c->ek[i] == BI ? c->oc : c->ek[i] == RS ? ny : 0;
    ct_alloc(&E[i], c->ek[i] == RS ? dt[3] : TINY_FP32, n, true);
    ep[i] = n ? E[i].p : NULL;
  }
  void *Wp = NULL;
  if (c->prepack) {
    char pn[48], bn[48];
    snprintf(pn, sizeof pn, "%s_pack_a", name);
    snprintf(bn, sizeof bn, "%s_pack_a_bytes", name);
    int (*pack)(hprt_pool *, const void *, void *) = (int (*)(hprt_pool *, const void *, void *))dlsym(h, pn);
    long (*bytes)(void) = (long (*)(void))dlsym(h, bn);
    if (!pack || !bytes || bytes() <= 0) return -1;
    Wp = malloc((size_t)bytes());
    if (pack(pool, W.p, Wp) != 0) return -1;
  }
  int rc = fn(pool, Wp ? Wp : W.p, X.p, Y.p, ep);
  free(Wp);
  if (rc) return -1;
  double *ref = calloc((size_t)ny, sizeof(double));
  reference(c, &X, &W, E, OH, OW, ref);
  double big = 0, err = 0;
  for (long i = 0; i < ny; i++) {
    big = fabs(ref[i]) > big ? fabs(ref[i]) : big;
    double d = fabs(ct_load(&Y, i) - ref[i]);
    err = d > err || d != d ? d : err;
  }
  *rel = big > 0 ? err / big : err;
  long bad = ct_check(&Y, ref, ny, name);
  for (long i = ny; i < ny + 32; i++)
    if (ct_load(&Y, i) != ct_round(Y.dt, 1234.5f) && bad++ < 4) fprintf(stderr, "%s: [%ld] written past the end\n", name, i);
  free(ref);
  ct_free(&X), ct_free(&W), ct_free(&Y);
  for (int i = 0; i < c->nepi; i++) ct_free(&E[i]);
  return bad;
}

static bool have_avx2(void) {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

static bool have_avx512(void) {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
         __builtin_cpu_supports("avx512dq");
}

/* Whether this machine runs variant isa (else a note that it skips). */
static bool have_isa(int isa) {
  bool ok = isa == CGEN_ISA_AVX512 ? have_avx512() : have_avx2();
  if (!ok) fprintf(stderr, "skipped: no %s here\n", cg_isa_get(isa)->tag);
  return ok;
}

/* The kernels `prefix`<i> of the n cases L for the variant `isa`, compiled
 * into one object; each source says it is Winograd with the tile
 * cgen_conv_wino_tile picks, and (AVX-512) reads rows of tiles exactly
 * where a row has 14 tiles or more; AVX2 always gathers. */
static void *compile_cases(const wcase *L, int n, const char *prefix, int isa) {
  ut_str src;
  ut_str_init(&src);
  harp_error e = {0};
  for (int i = 0; i < n; i++) {
    cgen_conv_spec s;
    make_spec(&L[i], &s, isa);
    char name[32], tag[32];
    snprintf(name, sizeof name, "%s%d", prefix, i);
    size_t at = src.len;
    assert_int_equal(cgen_conv(&e, &s, name, &src), HARP_OK);
    if (L[i].algo == CGEN_CONV_GEMM) { /* the baseline of test_half_error */
      assert_null(strstr(src.buf + at, "winograd F("));
      continue;
    }
    snprintf(tag, sizeof tag, "winograd F(%dx%d,3x3)", cgen_conv_wino_tile(&s), cgen_conv_wino_tile(&s));
    assert_non_null(strstr(src.buf + at, tag));
    int64_t oh, ow, m = cgen_conv_wino_tile(&s);
    assert_true(cgen_conv_out_hw(&s, &oh, &ow));
    bool rows = isa == CGEN_ISA_AVX512 && (ow + m - 1) / m >= 14;
    assert_true(!strstr(src.buf + at, "rows of tiles") == !rows);
    assert_true(!strstr(src.buf + at, "stores lane by lane") == (isa != CGEN_ISA_AVX2));
  }
  void *h = ct_compile(src.buf);
  ut_str_free(&src);
  assert_non_null(h);
  return h;
}

/* The n cases L of variant isa, each kernel with the pool and (every other
 * one) without. */
static void run_cases(const wcase *L, int n, const char *prefix, int isa) {
  void *h = compile_cases(L, n, prefix, isa);
  hprt_pool *pool = ct_pool_create(h, 2);
  assert_non_null(pool);
  char name[32];
  for (int i = 0; i < n; i++) {
    double rel;
    snprintf(name, sizeof name, "%s%d", prefix, i);
    assert_int_equal(run_case(h, &L[i], name, pool, &rel), 0);
    if (i % 2) assert_int_equal(run_case(h, &L[i], name, NULL, &rel), 0);
  }
  ct_pool_destroy(h, pool);
  dlclose(h);
}

/* Every case, each kernel with the pool and (every other one) without. */
static void test_cases(void **st) {
  (void)st;
  if (have_isa(CGEN_ISA_AVX512)) run_cases(CASES, NCASE, "w", CGEN_ISA_AVX512);
}

/* More shapes for AVX2's vectors of 8 tiles: channels and output sizes not
 * a multiple of 8, blocks of one vector (at most 8 tiles: 12 output
 * channels per block) and of two (6 channels), paddings 0 to 2, batch 2,
 * residual + relu. */
static const wcase CASES8[] = {
    {2, 11, 17, 19, 13, 2, 2, 2, 2, W4, 3, {BI, RS, RE}, 1},
    {1, 9, 5, 5, 7, 1, 1, 1, 1, W2},
    {1, 3, 4, 4, 14, 1, 1, 1, 1, W2, 1, {RE}},
    {2, 5, 6, 6, 25, 0, 0, 0, 0, W4, 2, {RS, RE}, 1},
    {2, 24, 28, 28, 20, 1, 1, 1, 1, W0, 2, {RS, RE}, 0, 1},
    {1, 13, 9, 31, 9, 0, 1, 2, 1, W2, 2, {BI, RS}},
};

/* Half-precision storage (math in fp32): fp16 and bf16 throughout, a half
 * input with an fp32 output, and mixed (fp32 input, bf16 weight and output,
 * fp16 residual, multiplying); gathers and (AVX-512) rows of tiles. */
static const wcase HCASES[] = {
    {2, 11, 17, 19, 13, 2, 2, 2, 2, W4, 3, {BI, RS, RE}, 1, 0, 1},
    {1, 9, 30, 29, 7, 1, 1, 1, 1, W2, 2, {BI, RS}, 0, 0, 2},
    {1, 6, 10, 60, 10, 1, 1, 1, 1, W4, 1, {RS}, 1, 1, 4},
    {3, 5, 7, 7, 9, 0, 0, 0, 0, W0, 1, {RE}, 0, 0, 3},
};

/* The half-storage cases on both variants. */
static void test_half(void **st) {
  (void)st;
  int n = (int)(sizeof HCASES / sizeof HCASES[0]);
  if (have_isa(CGEN_ISA_AVX512)) run_cases(HCASES, n, "h", CGEN_ISA_AVX512);
  if (have_isa(CGEN_ISA_AVX2)) run_cases(HCASES, n, "k", CGEN_ISA_AVX2);
}

/* Every case through the AVX2 variant. */
static void test_avx2(void **st) {
  (void)st;
  if (!have_isa(CGEN_ISA_AVX2)) return;
  run_cases(CASES, NCASE, "a", CGEN_ISA_AVX2);
  run_cases(CASES8, (int)(sizeof CASES8 / sizeof CASES8[0]), "b", CGEN_ISA_AVX2);
}

/* The error of each tile on a 256-channel 3x3 layer with inputs and weights
 * in [-1, 1): F(2) within 2e-6 and F(4) within 5e-5 of the largest output
 * (measured 6.7e-7 and 1.1e-5; fp32 direct convolution ~1e-7; the spec's
 * check, seed 000 §9, is rtol = atol = 1e-3 against an fp32 reference). */
static void test_error_bound(void **st) {
  (void)st;
  static const wcase L[] = {{1, 256, 14, 14, 32, 1, 1, 1, 1, W2}, {1, 256, 14, 14, 32, 1, 1, 1, 1, W4}};
  for (int isa = CGEN_ISA_AVX2; isa <= CGEN_ISA_AVX512; isa++) {
    if (!have_isa(isa)) continue;
    void *h = compile_cases(L, 2, "eb", isa);
    double rel[2];
    assert_int_equal(run_case(h, &L[0], "eb0", NULL, &rel[0]), 0);
    assert_int_equal(run_case(h, &L[1], "eb1", NULL, &rel[1]), 0);
    fprintf(stderr, "winograd (%s) error / max|y| at 256 channels: F(2x2) %.3g, F(4x4) %.3g\n", cg_isa_get(isa)->tag,
            rel[0], rel[1]);
    assert_true(rel[0] < 2e-6);
    assert_true(rel[1] < 5e-5);
    dlclose(h);
  }
}

/* Half-precision storage on the same layer: the error against the double
 * reference on the stored inputs, relative to max|y|, of Winograd and of
 * the implicit GEMM (the direct count) storing the same dtypes, on the
 * same data: fp16 input and weight with an fp32 output (the fp32 math's
 * error: that of test_error_bound), then fp16 and bf16 throughout, where
 * the output's rounding dominates.  Winograd stays within 1.25x the GEMM's
 * error plus 2e-5 (measured, both ISAs: fp16 in, fp32 out: F(2) 5.3e-7,
 * F(4) 7.4e-6, GEMM 2.8e-7; fp16: 2.33e-4 all three; bf16: 2.89e-3). */
static void test_half_error(void **st) {
  (void)st;
  static const int HROW[3] = {3, 1, 2};
  static const char *HNAME[3] = {"fp16 in, fp32 out", "fp16", "bf16"};
  wcase L[9];
  for (int t = 0; t < 9; t++) {
    L[t] = (wcase){1, 256, 14, 14, 32, 1, 1, 1, 1, t % 3 == 0 ? W2 : t % 3 == 1 ? W4 : CGEN_CONV_GEMM};
    L[t].half = HROW[t / 3];
  }
  /* one variant (the suite's time: the AVX-512 one measured the same) */
  int isa = have_avx2() ? CGEN_ISA_AVX2 : CGEN_ISA_AVX512;
  if (!have_isa(isa)) return;
  {
    void *h = compile_cases(L, 9, "he", isa);
    double rel[9];
    char name[16];
    for (int i = 0; i < 9; i++) {
      snprintf(name, sizeof name, "he%d", i);
      ct_seed = 2711u; /* the same data for each */
      assert_int_equal(run_case(h, &L[i], name, NULL, &rel[i]), 0);
    }
    for (int t = 0; t < 3; t++) {
      const double *r = rel + 3 * t;
      fprintf(stderr, "%s storage (%s) error / max|y| at 256 channels: F(2x2) %.3g, F(4x4) %.3g, implicit GEMM %.3g\n",
              HNAME[t], cg_isa_get(isa)->tag, r[0], r[1], r[2]);
      assert_true(r[0] < 1.25 * r[2] + 2e-5);
      assert_true(r[1] < 1.25 * r[2] + 2e-5);
    }
    dlclose(h);
  }
}

/* A package's kernel (every variant: Winograd for AVX-512 and AVX2, the
 * implicit GEMM for scalar), each variant forced in turn: the weight
 * packed by that variant's packer, the numbers right. */
static void test_package(void **st) {
  (void)st;
  static const wcase C = {2, 7, 11, 13, 10, 1, 1, 1, 1, W4, 3, {BI, RS, RE}, 1, 0, 1};
  for (int isa = CGEN_ISA_SCALAR; isa <= CGEN_ISA_AVX512; isa++) {
    if (isa != CGEN_ISA_SCALAR && !have_isa(isa)) continue;
    cgen_conv_spec s;
    make_spec(&C, &s, isa);
    s.tune.isa_mask = 0;
    ut_str src;
    ut_str_init(&src);
    harp_error e = {0};
    assert_int_equal(cgen_conv(&e, &s, "pk", &src), HARP_OK);
    assert_non_null(strstr(src.buf, "stores lane by lane"));
    assert_non_null(strstr(src.buf, "gathers and scatters"));
    void *h = ct_compile(src.buf);
    ut_str_free(&src);
    assert_non_null(h);
    double rel;
    assert_int_equal(run_case(h, &C, "pk", NULL, &rel), 0);
    dlclose(h);
  }
}

/* A Winograd spec the kernel cannot honour is refused with the reason. */
static void test_refused(void **st) {
  (void)st;
  static const struct {
    long kh, sh, dh, g;
    tiny_dtype xdt;
    const char *why;
  } R[] = {{3, 2, 1, 1, TINY_FP32, "stride"}, {3, 1, 2, 1, TINY_FP32, "dilation"}, {3, 1, 1, 2, TINY_FP32, "grouped"},
           {5, 1, 1, 1, TINY_FP32, "3x3"},    {3, 1, 1, 1, TINY_I32, "storage other than"}, {3, 1, 1, 1, TINY_FP32, "AVX2 variant"}};
  for (int i = 0; i < (int)(sizeof R / sizeof R[0]); i++) {
    cgen_conv_spec s;
    cgen_conv_spec_init(&s, 1, 8, 12, 12, 8, R[i].kh, R[i].kh, TINY_FP32);
    s.stride[0] = s.stride[1] = R[i].sh;
    s.dil[0] = s.dil[1] = R[i].dh;
    s.groups = R[i].g;
    s.x_dtype = R[i].xdt;
    s.tune.conv_algo = W4;
    if (!strcmp(R[i].why, "AVX2 variant")) s.tune.simd = 4; /* scalar only */
    ut_str src;
    ut_str_init(&src);
    harp_error e = {0};
    assert_int_equal(cgen_conv(&e, &s, "r", &src), HARP_E_UNSUPPORTED);
    assert_non_null(strstr(e.msg, R[i].why));
    ut_str_free(&src);
  }
  /* the tile: F(4) from 8 outputs a side, F(2) below and at 27-52 columns */
  cgen_conv_spec s;
  cgen_conv_spec_init(&s, 1, 8, 7, 7, 8, 3, 3, TINY_FP32);
  s.pad[0] = s.pad[1] = s.pad[2] = s.pad[3] = 1;
  s.tune.conv_algo = W0;
  assert_int_equal(cgen_conv_wino_tile(&s), 2);
  cgen_conv_spec_init(&s, 1, 8, 8, 8, 8, 3, 3, TINY_FP32);
  s.pad[0] = s.pad[1] = s.pad[2] = s.pad[3] = 1;
  s.tune.conv_algo = W0;
  assert_int_equal(cgen_conv_wino_tile(&s), 4);
  for (int w = 20; w <= 60; w += 4) {
    cgen_conv_spec_init(&s, 1, 8, 30, w, 8, 3, 3, TINY_FP32);
    s.pad[0] = s.pad[1] = s.pad[2] = s.pad[3] = 1;
    s.tune.conv_algo = W0;
    assert_int_equal(cgen_conv_wino_tile(&s), w >= 27 && w <= 52 ? 2 : 4);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cases),
      cmocka_unit_test(test_avx2),
      cmocka_unit_test(test_half),
      cmocka_unit_test(test_error_bound),
      cmocka_unit_test(test_half_error),
      cmocka_unit_test(test_package),
      cmocka_unit_test(test_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
