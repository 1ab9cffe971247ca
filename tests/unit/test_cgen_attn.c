/* test_cgen_attn.c — the fused streaming-softmax attention kernel against a
 * naive softmax(scale q k^T + mask) v: causal and not, additive masks
 * (contiguous and broadcast), M != N, head sizes that are not a multiple of
 * the vector width, half storage, each ISA variant, errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "cgen_testutil.h"

#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

typedef int (*attn_fn)(hprt_pool *, const void *, const void *, const void *, const void *, void *);

typedef struct acase {
  long b, h, m, n, d, dv;
  tiny_dtype qdt, kdt, odt;
  int causal, mask; /* mask: 0 none, 1 full [b][h][m][n], 2 broadcast [m][n] (strides 0 on b, h), 3 strided [n][m] */
  int isa, bm, bn, tasks;
  float scale;
  int poison; /* NaN in a key of head 0 and a query of head 1, +inf in a key of head 1 */
  int rt;     /* b, m, n and the strides they move read at run time (a ShapeSet object), from a larger box:
               * 1: m + 7, n + 9; more: m and n + rt (a large box: a key tile per binding) */
} acase;

#define F32 TINY_FP32
#define F16 TINY_FP16
#define B16 TINY_BF16
enum { SC = CGEN_ISA_SCALAR, A2 = CGEN_ISA_AVX2, A5 = CGEN_ISA_AVX512 };

static const acase CASES[] = {
    {1, 2, 65, 65, 64, 64, F32, F32, F32, 0, 0, A5},
    {1, 2, 65, 65, 64, 64, F32, F32, F32, 1, 0, A5},
    {2, 1, 33, 130, 40, 24, F32, F32, F32, 0, 1, A5, 16, 32, 3},
    {1, 3, 100, 37, 17, 33, F32, F32, F32, 1, 2, A5, 0, 0, 0, 0.3f},
    {1, 1, 1, 1, 8, 8, F32, F32, F32, 1, 0, A5},
    {1, 2, 70, 70, 64, 64, F16, F16, F16, 1, 1, A5},
    {1, 2, 47, 47, 32, 32, B16, B16, F32, 0, 3, A5},
    {1, 2, 65, 65, 64, 64, F32, F32, F32, 1, 1, A2},
    {2, 1, 33, 50, 20, 12, F16, F32, B16, 0, 2, A2},
    {1, 2, 30, 41, 16, 16, F32, F32, F32, 1, 1, SC},
    {1, 1, 17, 9, 5, 7, F32, F32, F32, 0, 3, SC},
    {1, 8, 128, 128, 64, 64, F32, F32, F32, 1, 0, -1},
    /* NaN and inf come out where the reference has them (causal: rows before
     * the key are untouched); every ISA */
    {1, 2, 40, 40, 16, 16, F32, F32, F32, 1, 0, A5, 0, 0, 0, 0, 1},
    {1, 2, 40, 40, 16, 16, F32, F32, F32, 1, 2, A2, 0, 0, 0, 0, 1},
    {1, 2, 40, 40, 16, 16, F32, F32, F32, 1, 0, SC, 0, 0, 0, 0, 1},
    /* run-time sizes, compiled for b + 1, m + 7, n + 9: row and key tails,
     * the query split, causal and masks, bf16, each ISA */
    {1, 2, 65, 65, 64, 64, F32, F32, F32, 1, 1, A5, 0, 0, 0, 0, 0, 1},
    {2, 1, 33, 130, 40, 24, F32, F32, F32, 0, 1, A5, 16, 32, 3, 0, 0, 1},
    {1, 2, 47, 47, 32, 32, B16, B16, F32, 0, 2, A5, 0, 0, 0, 0, 0, 1},
    {1, 2, 30, 41, 16, 16, F32, F32, F32, 1, 1, A2, 0, 0, 0, 0, 0, 1},
    {1, 1, 17, 9, 5, 7, F32, F32, F32, 0, 2, SC, 0, 0, 0, 0, 0, 1},
    /* a box of up to 256 keys run at small N: each binding's own key tile
     * (16, 32, 48 or 64 on AVX-512; 8 .. 32 on AVX2), key tails, masks, bf16 */
    {2, 2, 37, 37, 16, 16, F32, F32, F32, 0, 0, A5, 0, 0, 0, 0, 0, 219},
    {1, 2, 5, 5, 16, 16, F32, F32, F32, 1, 1, A5, 0, 0, 0, 0, 0, 251},
    {1, 2, 20, 17, 32, 32, B16, B16, F32, 0, 2, A5, 0, 0, 0, 0, 0, 239},
    {1, 1, 100, 100, 24, 24, F32, F32, F32, 1, 0, A5, 0, 0, 0, 0, 0, 156},
    {1, 2, 9, 9, 16, 12, F32, F32, F32, 0, 1, A2, 0, 0, 0, 0, 0, 191},
};
#define NCASE ((int)(sizeof CASES / sizeof CASES[0]))

/* The run-time sizes of the rt cases (set before each run), and their
 * stride expressions, per case. */
#define RT_DECL "long rtv_b, rtv_m, rtv_n;\n"
#define RT_MAX 32
static char rt_ex[RT_MAX][14][48];
_Static_assert(NCASE <= RT_MAX, "rt_ex holds one row per case");

/* Case c's sizes and strides read from rtv_* (case idx), its box larger. */
static void make_rt(const acase *c, int idx, cgen_attn_spec *s) {
  char(*x)[48] = rt_ex[idx];
  s->b = c->b + 1, s->m = c->m + (c->rt > 1 ? c->rt : 7), s->n = c->n + (c->rt > 1 ? c->rt : 9);
  s->rt.b = "rtv_b", s->rt.m = "rtv_m", s->rt.n = "rtv_n";
  s->strided = true;
  snprintf(x[0], 48, "(%ldL * rtv_m * %ldL)", c->h, c->d), snprintf(x[1], 48, "(rtv_m * %ldL)", c->d);
  snprintf(x[2], 48, "(%ldL * rtv_n * %ldL)", c->h, c->d), snprintf(x[3], 48, "(rtv_n * %ldL)", c->d);
  snprintf(x[4], 48, "(%ldL * rtv_n * %ldL)", c->h, c->dv), snprintf(x[5], 48, "(rtv_n * %ldL)", c->dv);
  snprintf(x[6], 48, "(%ldL * rtv_m * %ldL)", c->h, c->dv), snprintf(x[7], 48, "(rtv_m * %ldL)", c->dv);
  const char **st[4] = {s->rt.q, s->rt.k, s->rt.v, s->rt.o};
  for (int i = 0; i < 8; i++) st[i / 2][i % 2] = x[i];
  int64_t H = c->h, M = s->m, N = s->n; /* the constants at the box's top (unused: the expressions stand) */
  int64_t q[3] = {H * M * c->d, M * c->d, c->d}, k[3] = {H * N * c->d, N * c->d, c->d};
  int64_t v[3] = {H * N * c->dv, N * c->dv, c->dv}, o[3] = {H * M * c->dv, M * c->dv, c->dv};
  memcpy(s->q_s, q, sizeof q), memcpy(s->k_s, k, sizeof k), memcpy(s->v_s, v, sizeof v), memcpy(s->o_s, o, sizeof o);
  snprintf(x[8], 48, "(%ldL * rtv_m * rtv_n)", c->h), snprintf(x[9], 48, "(rtv_m * rtv_n)");
  if (c->mask == 1) s->rt.mask[0] = x[8], s->rt.mask[1] = x[9];
  if (c->mask == 1 || c->mask == 2) s->rt.mask[2] = "rtv_n";
}

static void make_spec(const acase *c, int idx, cgen_attn_spec *s) {
  cgen_attn_spec_init(s, c->b, c->h, c->m, c->n, c->d, F32);
  s->dv = c->dv;
  s->q_dtype = c->qdt, s->kv_dtype = c->kdt, s->o_dtype = c->odt, s->mask_dtype = c->kdt;
  s->causal = c->causal;
  s->scale = c->scale;
  s->bm = c->bm, s->bn = c->bn, s->tune.tasks = c->tasks;
  s->tune.force_isa = c->isa;
  if (c->isa >= 0) s->tune.isa_mask = 1u << c->isa;
  s->has_mask = c->mask != 0;
  if (c->mask == 1) s->mask_s[0] = c->h * c->m * c->n, s->mask_s[1] = c->m * c->n, s->mask_s[2] = c->n, s->mask_s[3] = 1;
  if (c->mask == 2) s->mask_s[2] = c->n, s->mask_s[3] = 1;
  if (c->mask == 3) s->mask_s[2] = 1, s->mask_s[3] = c->m;
  if (c->rt) make_rt(c, idx, s);
}

static long run_case(void *h, int idx, hprt_pool *pool) {
  const acase *c = &CASES[idx];
  cgen_attn_spec s;
  make_spec(c, idx, &s);
  char name[32];
  snprintf(name, sizeof name, "a%d", idx);
  attn_fn fn = (attn_fn)dlsym(h, name);
  long *rtv[3] = {dlsym(h, "rtv_b"), dlsym(h, "rtv_m"), dlsym(h, "rtv_n")};
  if (!fn || !rtv[0] || !rtv[1] || !rtv[2]) return -1;
  *rtv[0] = c->b, *rtv[1] = c->m, *rtv[2] = c->n;
  if (c->mask == 1) s.mask_s[0] = c->h * c->m * c->n, s.mask_s[1] = c->m * c->n; /* the reference's: this run's */
  if (c->mask == 1 || c->mask == 2) s.mask_s[2] = c->n;
  long bh = c->b * c->h;
  ct_buf Q, K, V, O, MK;
  ct_alloc(&Q, c->qdt, bh * c->m * c->d, true);
  ct_alloc(&K, c->kdt, bh * c->n * c->d, true);
  ct_alloc(&V, c->kdt, bh * c->n * c->dv, true);
  ct_alloc(&O, c->odt, bh * c->m * c->dv, false);
  long nmask = c->mask == 1 ? bh * c->m * c->n : c->mask ? c->m * c->n : 0;
  ct_alloc(&MK, c->kdt, nmask, true);
  for (long i = 0; i < nmask; i++) /* some -inf entries, never a whole row */
    if (i % 7 == 3) ct_store(&MK, i, -INFINITY), MK.f[i] = -INFINITY;
  if (c->poison) {
    long at[3] = {17 * c->d + 3, (c->m + 5) * c->d + 2, (c->n + 30) * c->d + 1}; /* K h0 key 17, Q h1 row 5, K h1 key 30 */
    ct_store(&K, at[0], NAN), K.f[at[0]] = NAN;
    ct_store(&Q, at[1], NAN), Q.f[at[1]] = NAN;
    ct_store(&K, at[2], INFINITY), K.f[at[2]] = INFINITY;
  }
  if (fn(pool, Q.p, K.p, V.p, nmask ? MK.p : NULL, O.p) != 0) return -1;
  double scale = c->scale != 0 ? c->scale : 1.0 / sqrt((double)c->d);
  double *ref = calloc((size_t)(bh * c->m * c->dv), sizeof(double)), *sc = calloc((size_t)c->n, sizeof(double));
  for (long b = 0; b < c->b; b++)
    for (long hh = 0; hh < c->h; hh++) {
      long z = b * c->h + hh;
      for (long i = 0; i < c->m; i++) {
        double mx = -INFINITY;
        for (long j = 0; j < c->n; j++) {
          double acc = 0;
          for (long d = 0; d < c->d; d++) acc += (double)Q.f[(z * c->m + i) * c->d + d] * K.f[(z * c->n + j) * c->d + d];
          acc *= scale;
          if (c->mask) acc += MK.f[b * s.mask_s[0] + hh * s.mask_s[1] + i * s.mask_s[2] + j * s.mask_s[3]];
          if (c->causal && j > i) acc = -INFINITY;
          sc[j] = acc;
          if (acc > mx) mx = acc;
        }
        double sum = 0;
        for (long j = 0; j < c->n; j++) sum += sc[j] = exp(sc[j] - mx);
        for (long d = 0; d < c->dv; d++) {
          double acc = 0;
          for (long j = 0; j < c->n; j++) acc += sc[j] * V.f[(z * c->n + j) * c->dv + d];
          ref[(z * c->m + i) * c->dv + d] = acc / sum;
        }
      }
    }
  char what[64];
  snprintf(what, sizeof what, "attn case %d", idx);
  long bad = 0;
  if (c->poison) /* NaN where the reference is NaN, and only there */
    for (long i = 0; i < bh * c->m * c->dv; i++) {
      double g = ct_load(&O, i), r = ref[i];
      if (isnan(r) ? !isnan(g) : !(fabs(g - r) <= 1e-3 + 1e-3 * fabs(r)))
        if (bad++ < 5) fprintf(stderr, "%s: [%ld] got %.7g want %.7g\n", what, i, g, r);
    }
  else
    bad = ct_check(&O, ref, bh * c->m * c->dv, what);
  free(ref), free(sc);
  ct_free(&Q), ct_free(&K), ct_free(&V), ct_free(&O), ct_free(&MK);
  return bad;
}

static void test_cases(void **st) {
  (void)st;
  ut_str src;
  ut_str_init(&src);
  harp_error e;
  memset(&e, 0, sizeof e);
  ut_str_puts(&src, RT_DECL);
  for (int i = 0; i < NCASE; i++) {
    cgen_attn_spec s;
    make_spec(&CASES[i], i, &s);
    char name[32];
    snprintf(name, sizeof name, "a%d", i);
    if (cgen_attn(&e, &s, name, &src)) fail_msg("case %d: %s", i, e.msg);
  }
  void *h = ct_compile(src.buf);
  assert_non_null(h);
  hprt_pool *pool = ct_pool_create(h, 2);
  assert_non_null(pool);
  for (int i = 0; i < NCASE; i++) {
    assert_int_equal(run_case(h, i, pool), 0);
    if (i % 4 == 0) assert_int_equal(run_case(h, i, NULL), 0);
  }
  ct_pool_destroy(h, pool);
  dlclose(h);
  ut_str_free(&src);
}

static void test_errors(void **st) {
  (void)st;
  ut_str src;
  ut_str_init(&src);
  harp_error e;
  memset(&e, 0, sizeof e);
  cgen_attn_spec s;
  cgen_attn_spec_init(&s, 1, 1, 8, 8, 8, F32);
  s.d = 0;
  assert_int_equal(cgen_attn(&e, &s, "f", &src), HARP_E_INVALID_ARG);
  harp_error_clear(&e);
  s.d = 8, s.q_dtype = TINY_I32;
  assert_int_equal(cgen_attn(&e, &s, "f", &src), HARP_E_UNSUPPORTED);
  harp_error_clear(&e);
  s.q_dtype = F32, s.scale = NAN;
  assert_int_equal(cgen_attn(&e, &s, "f", &src), HARP_E_INVALID_ARG);
  harp_error_clear(&e);
  s.scale = 0, s.has_mask = true, s.mask_s[2] = -1;
  assert_int_equal(cgen_attn(&e, &s, "f", &src), HARP_E_NEGATIVE_STRIDE);
  harp_error_clear(&e);
  s.has_mask = false, s.strided = true; /* q, k, v, out strides over (b, h, row) */
  int64_t ok[3] = {64, 64, 8};
  memcpy(s.q_s, ok, sizeof ok), memcpy(s.k_s, ok, sizeof ok), memcpy(s.v_s, ok, sizeof ok), memcpy(s.o_s, ok, sizeof ok);
  assert_int_equal(cgen_attn(&e, &s, "f", &src), HARP_OK);
  s.k_s[2] = -8;
  assert_int_equal(cgen_attn(&e, &s, "f", &src), HARP_E_NEGATIVE_STRIDE);
  harp_error_clear(&e);
  s.k_s[2] = 8, s.o_s[2] = 4; /* output rows would overlap */
  assert_int_equal(cgen_attn(&e, &s, "f", &src), HARP_E_INVALID_ARG);
  harp_error_clear(&e);
  s.strided = false;
  assert_int_equal(cgen_attn(&e, &s, "f-1", &src), HARP_E_INVALID_ARG);
  ut_str_free(&src);
}

/* A ShapeSet object's attention over up to 256 keys holds a tiling per
 * key tile (16 apart) and runs, at each N, the one a specialised object takes there:
 * 48 keys and 8-row score kernels at N = 37 (64 and 6 rows at the top). */
static void test_key_tiles(void **st) {
  (void)st;
  harp_error e = {0};
  cgen_attn_spec s;
  ut_str src;
  ut_str_init(&src);
  make_spec(&CASES[NCASE - 5], NCASE - 5, &s);
  assert_int_equal(cgen_attn(&e, &s, "kt", &src), HARP_OK);
  const char *want[] = {"key tiles of 16, 8-row score", "key tiles of 32, 8-row score", "key tiles of 48, 8-row score",
                        "key tiles of 64, 6-row score", "if (n_ <= 16L) return kt_avx512_b16_run(",
                        "if (n_ <= 32L) return kt_avx512_b32_run(", "if (n_ <= 48L) return kt_avx512_b48_run(",
                        "return kt_avx512_b64_run("};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
    if (!strstr(src.buf, want[i])) fail_msg("no \"%s\" in the ShapeSet attention", want[i]);
  assert_null(strstr(src.buf, "kt_avx512_b80_")); /* none past the top's tile */
  ut_str_free(&src);
  /* the specialised object at N = 37 (and a ShapeSet one whose N is fixed): one tiling */
  ut_str_init(&src);
  cgen_attn_spec f = s;
  f.rt.n = NULL, f.n = 37;
  f.k_s[1] = f.v_s[1] = 37 * 16, f.k_s[0] = f.v_s[0] = 2 * 37 * 16;
  assert_int_equal(cgen_attn(&e, &f, "kf", &src), HARP_OK);
  assert_null(strstr(src.buf, "key tiles of"));
  assert_non_null(strstr(src.buf, "kf_avx512_run("));
  ut_str_free(&src);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_errors),
      cmocka_unit_test(test_key_tiles),
      cmocka_unit_test(test_cases),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
