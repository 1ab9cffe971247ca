/* test_cgen_map.c — the elementwise map kernel against a double-precision
 * evaluation of the same op list, on every ISA variant (the JIT runs only
 * the host's, so the AVX2 and scalar variants of a package are tested
 * here): every op kind (each Tiny op the op table gives a vector form must
 * be in a chain: the coverage test), one row with a masked tail, rows over two outer
 * dimensions with a dense, a per-row (bcast) and a per-column input, fp16
 * and bf16 storage, a rounding in the chain, and inputs holding NaN, +-inf,
 * +-0 and values whose exp is subnormal; with and without a pool, -O0 and
 * -O3; argument errors; a chain through a requantized byte (a table,
 * cgen_map_lut.c) and one that must not become one; the held-byte output
 * (y_u8) on every ISA. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "backend/c/cgen_int.h"
#include "cgen_testutil.h"
#include "tiny/tiny_spell.h"

#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

typedef int (*map_fn)(hprt_pool *, const void *const *, void *);

#define F32 TINY_FP32
#define F16 TINY_FP16
#define B16 TINY_BF16
enum { SC = CGEN_ISA_SCALAR, A2 = CGEN_ISA_AVX2, A5 = CGEN_ISA_AVX512 };

#define I(k) ((cgen_map_arg){'i', k, 0})
#define V(k) ((cgen_map_arg){'v', k, 0})
#define C(x) ((cgen_map_arg){'c', 0, x})

/* The op lists: y is the last op. */
typedef struct chain {
  const char *name;
  int nops;
  cgen_map_op ops[12];
  double tol; /* relative to the largest |y| of finite values (gelu: erfc's error) */
} chain;

static const chain CHAINS[] = {
    {"silu", 5,
     {{TINY_MUL, F32, I(0), C(-1.44269504f)}, {TINY_EXP2, F32, V(0)}, {TINY_ADD, F32, V(1), C(1.0f)},
      {TINY_RECIP, F32, V(2)}, {TINY_MUL, F32, I(0), V(3)}}, 0},
    {"tanh", 5,
     {{TINY_MUL, F32, I(0), C(2.88539008f)}, {TINY_EXP2, F32, V(0)}, {TINY_ADD, F32, V(1), C(1.0f)},
      {TINY_FDIV, F32, C(2.0f), V(2)}, {TINY_SUB, F32, C(1.0f), V(3)}}, 3e-7},
    {"gelu", 1, {{TINY_GELU, F32, I(0)}}, 3e-7},
    {"exp", 1, {{TINY_EXP, F32, I(0)}}, 0},
    {"exp2", 1, {{TINY_EXP2, F32, I(0)}}, 0},
    {"div", 1, {{TINY_FDIV, F32, I(0), I(1)}}, 0},
    {"recip", 1, {{TINY_RECIP, F32, I(1)}}, 0},
    {"max min neg relu", 5,
     {{TINY_MAX, F32, I(0), I(1)}, {TINY_MIN, F32, I(1), I(0)}, {TINY_NEG, F32, V(1)},
      {TINY_ADD, F32, V(0), V(2)}, {TINY_RELU, F32, V(3)}}, 0},
    {"sqrt rsqrt copy", 4,
     {{TINY_SQRT, F32, I(0)}, {TINY_RSQRT, F32, I(1)}, {TINY_MUL, F32, V(0), V(1)},
      {CGEN_MAP_COPY, F32, V(2)}}, 0},
    /* constants that print with an exponent (layer norm's eps; "1e-05e0f" did not compile) */
    {"tiny and huge constants", 3,
     {{TINY_ADD, F32, I(0), C(9.99999975e-06f)}, {TINY_MUL, F32, V(0), C(3e-30f)}, {TINY_MUL, F32, V(1), C(2e29f)}}, 0},
    /* floor(x) + 0.5 is a half: rint takes it to the even neighbour */
    {"floor ceil rint", 7,
     {{TINY_FLOOR, F32, I(0)}, {TINY_ADD, F32, V(0), C(0.5f)}, {TINY_ROUND, F32, V(1)}, {TINY_CEIL, F32, I(1)},
      {TINY_ROUND, F32, I(0)}, {TINY_SUB, F32, V(2), V(3)}, {TINY_ADD, F32, V(5), V(4)}}, 0},
    /* sign: +-1 of every x != 0, subnormals and infinities too; NaN and 0 kept (-0 gives 0) */
    {"sign", 3, {{TINY_SIGN, F32, I(0)}, {TINY_SIGN, F32, I(1)}, {TINY_ADD, F32, V(0), V(1)}}, 0},
    {"round fp16 / bf16", 3,
     {{CGEN_MAP_ROUND, F16, I(0)}, {CGEN_MAP_ROUND, B16, I(1)}, {TINY_SUB, F32, V(0), V(1)}}, 0},
    /* requantize to u8, then DQ -> gelu -> Q to s8: ops 5.. a table (cgen_map_lut.c) */
    {"u8 gelu s8 table", 12,
     {{TINY_MUL, F32, I(0), C(21.3f)}, {TINY_ROUND, F32, V(0)}, {TINY_ADD, F32, V(1), C(128.0f)},
      {TINY_MAX, F32, V(2), C(0.0f)}, {TINY_MIN, F32, C(255.0f), V(3)}, {TINY_ADD, F32, V(4), C(-128.0f)},
      {TINY_MUL, F32, V(5), C(0.0313f)}, {TINY_GELU, F32, V(6)}, {TINY_FDIV, F32, V(7), C(0.0217f)},
      {TINY_ROUND, F32, V(8)}, {TINY_MAX, F32, V(9), C(-128.0f)}, {TINY_MIN, F32, V(10), C(127.0f)}}, 0},
    /* the same byte, but op 8 reads an input: no table */
    {"u8 gelu, not a table", 10,
     {{TINY_MUL, F32, I(0), C(21.3f)}, {TINY_ROUND, F32, V(0)}, {TINY_ADD, F32, V(1), C(128.0f)},
      {TINY_MAX, F32, V(2), C(0.0f)}, {TINY_MIN, F32, V(3), C(255.0f)}, {TINY_ADD, F32, V(4), C(-128.0f)},
      {TINY_MUL, F32, V(5), C(0.0313f)}, {TINY_GELU, F32, V(6)}, {TINY_MUL, F32, V(7), I(1)},
      {TINY_FDIV, F32, V(8), C(0.0217f)}}, 3e-7},
};
#define NCHAIN ((int)(sizeof CHAINS / sizeof CHAINS[0]))

/* Layouts: one row with a tail, or rows over [3][5] with per-row and
 * per-column inputs. */
typedef struct layout {
  int nouter;
  int64_t outer[2], cols;
  tiny_dtype dt0, dt1, ydt;
} layout;
static const layout LAYOUTS[] = {
    {0, {0}, 1001, F32, F32, F32},
    {2, {3, 5}, 37, F32, F32, F32},
    {0, {0}, 300, F16, B16, F32},
    {2, {3, 5}, 21, F32, F16, B16},
};
#define NLAYOUT ((int)(sizeof LAYOUTS / sizeof LAYOUTS[0]))

static double ref_op(const cgen_map_op *op, double a, double b) {
  switch (op->kind) {
    case CGEN_MAP_COPY: return a;
    case TINY_NEG: return -a;
    case TINY_EXP2: return exp2(a);
    case TINY_EXP: return exp(a);
    case TINY_RECIP: return 1.0 / a;
    case TINY_RELU: return a < 0 ? 0.0 : a;
    case TINY_GELU: return 0.5 * a * erfc(-a / sqrt(2.0));
    case TINY_SQRT: return sqrt(a);
    case TINY_RSQRT: return 1.0 / sqrt(a);
    case CGEN_MAP_ROUND: return ct_round(op->dtype, (float)a);
    case TINY_FLOOR: return floor(a);
    case TINY_CEIL: return ceil(a);
    case TINY_ROUND: return nearbyint(a);
    case TINY_SIGN: return a > 0 ? 1.0 : a < 0 ? -1.0 : a == 0 ? 0.0 : a;
    case TINY_ADD: return a + b;
    case TINY_SUB: return a - b;
    case TINY_MUL: return a * b;
    case TINY_FDIV: return a / b;
    case TINY_MAX: return isnan(a) || isnan(b) ? NAN : a > b ? a : b;
    case TINY_MIN: return isnan(a) || isnan(b) ? NAN : a < b ? a : b;
  }
  return NAN;
}

static double ref_arg(const cgen_map_arg *a, const double *in, const double *v) {
  return a->kind == 'i' ? in[a->idx] : a->kind == 'v' ? v[a->idx] : (double)a->c;
}

static void make_spec(const chain *ch, const layout *l, int isa, cgen_map_spec *s) {
  cgen_map_spec_init(s, l->cols);
  s->nouter = l->nouter;
  s->outer[0] = l->outer[0], s->outer[1] = l->outer[1];
  s->nin = 2;
  s->in[0] = (cgen_map_in){l->dt0, false, 3, {l->nouter ? 5 * l->cols : 0, l->cols}};
  /* the second input: per row (bcast) in a [3][5] layout, else dense */
  if (l->nouter) s->in[1] = (cgen_map_in){l->dt1, true, 1, {5, 1}};
  else s->in[1] = (cgen_map_in){l->dt1, false, 0, {0}};
  s->y_dtype = l->ydt;
  s->nops = ch->nops;
  memcpy(s->ops, ch->ops, sizeof(cgen_map_op) * (size_t)ch->nops);
  s->tune.force_isa = isa;
  s->tune.isa_mask = 1u << isa;
}

static const float SPECIAL[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 100.0f, -100.0f, 90.0f, -90.0f,
                                150.0f, -150.0f, 1e-30f, 3e38f, -3e38f, 20.0f, -20.0f, 12.0f, -5.5f};
#define NSPECIAL ((int)(sizeof SPECIAL / sizeof SPECIAL[0]))

/* Runs chain ch on layout l; the number of wrong points. */
static long run_case(void *h, const char *name, const chain *ch, const layout *l, hprt_pool *pool) {
  map_fn fn = (map_fn)dlsym(h, name);
  if (!fn) return -1;
  long rows = l->nouter ? l->outer[0] * l->outer[1] : 1, n = rows * l->cols;
  ct_buf X0, X1, Y;
  ct_alloc(&X0, l->dt0, 3 + n, false);
  ct_alloc(&X1, l->dt1, 1 + (l->nouter ? rows : n), false);
  ct_alloc(&Y, l->ydt, n, false);
  for (long i = 0; i < X0.n; i++) {
    float v = i - 3 < NSPECIAL && i >= 3 ? SPECIAL[i - 3] : ct_rand() * 6.0f;
    ct_store(&X0, i, v), X0.f[i] = ct_load(&X0, i);
  }
  for (long i = 0; i < X1.n; i++) {
    float v = i % 97 == 5 ? SPECIAL[(i / 97) % NSPECIAL] : ct_rand() * 4.0f;
    ct_store(&X1, i, v), X1.f[i] = ct_load(&X1, i);
  }
  const void *in[] = {X0.p, X1.p};
  if (fn(pool, in, Y.p) != 0) return -1;
  double *want = calloc((size_t)n, sizeof(double)), big = 0;
  for (long p = 0; p < n; p++) {
    long r = p / l->cols, j = p % l->cols;
    double x[2], v[12];
    x[0] = X0.f[3 + p];
    x[1] = l->nouter ? X1.f[1 + r] : X1.f[p];
    for (int k = 0; k < ch->nops; k++) {
      const cgen_map_op *op = &ch->ops[k];
      v[k] = ref_op(op, ref_arg(&op->a, x, v), ref_arg(&op->b, x, v));
      if (op->kind != CGEN_MAP_ROUND) v[k] = (float)v[k]; /* the kernel's values are fp32 */
    }
    want[p] = ct_round(l->ydt, (float)v[ch->nops - 1]);
    if (isfinite(want[p]) && fabs(want[p]) > big) big = fabs(want[p]);
    (void)j;
  }
  double rtol = l->ydt == F32 ? 3e-7 : l->ydt == F16 ? 1.0 / 1024 : 1.0 / 128;
  long bad = 0;
  for (long p = 0; p < n; p++) {
    double got = ct_load(&Y, p), w = want[p];
    bool ok = isnan(w) ? isnan(got) : isinf(w) ? got == w : fabs(got - w) <= rtol * fabs(w) + ch->tol * big + 1e-44;
    if (!ok && bad++ < 5) fprintf(stderr, "%s point %ld: got %.9g want %.9g\n", name, p, got, w);
  }
  free(want);
  ct_free(&X0), ct_free(&X1), ct_free(&Y);
  return bad;
}

static void check_all(const char *flags) {
  const int isas[] = {SC, A2, A5};
  ut_str src;
  ut_str_init(&src);
  harp_error e;
  memset(&e, 0, sizeof e);
  __builtin_cpu_init();
  bool have[3] = {true, __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"),
                  __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
                      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl")};
  for (int q = 0; q < 3; q++)
    for (int c = 0; c < NCHAIN; c++)
      for (int l = 0; l < NLAYOUT; l++) {
        cgen_map_spec s;
        make_spec(&CHAINS[c], &LAYOUTS[l], isas[q], &s);
        char name[32];
        snprintf(name, sizeof name, "m%d_%d_%d", q, c, l);
        assert_int_equal(cgen_map(&e, &s, name, &src), HARP_OK);
      }
  void *h = ct_compile_flags(src.buf, flags);
  assert_non_null(h);
  hprt_pool *pool = ct_pool_create(h, 3);
  assert_non_null(pool);
  for (int q = 0; q < 3; q++) {
    if (!have[q]) continue;
    for (int c = 0; c < NCHAIN; c++)
      for (int l = 0; l < NLAYOUT; l++) {
        char name[32];
        snprintf(name, sizeof name, "m%d_%d_%d", q, c, l);
        assert_int_equal(run_case(h, name, &CHAINS[c], &LAYOUTS[l], pool), 0);
        assert_int_equal(run_case(h, name, &CHAINS[c], &LAYOUTS[l], NULL), 0);
      }
  }
  ct_pool_destroy(h, pool);
  dlclose(h);
  ut_str_free(&src);
}

static void test_cases(void **st) {
  (void)st;
  check_all("-O0");
}

static void test_cases_o3(void **st) {
  (void)st;
  check_all("-O3");
}

/* Which chains become a table (cgen_map_lut.c): the u8 gelu one from op 4
 * on 0..255, none other (a later op reading an input, no clamp to a byte). */
static void test_lut_find(void **st) {
  (void)st;
  for (int c = 0; c < NCHAIN; c++) {
    cgen_map_spec s;
    make_spec(&CHAINS[c], &LAYOUTS[0], SC, &s);
    float lo = -1;
    int n = 0, j = cg_map_lut_find(&s, &lo, &n);
    bool want = !strcmp(CHAINS[c].name, "u8 gelu s8 table");
    assert_int_equal(j, want ? 4 : -1);
    if (want) assert_true(lo == 0.0f && n == 256);
  }
  cgen_map_spec s;
  make_spec(&CHAINS[NCHAIN - 2], &LAYOUTS[0], SC, &s);
  float lo;
  int n;
  s.ops[4].a.c = 256.0f; /* 257 values: too many */
  assert_int_equal(cg_map_lut_find(&s, &lo, &n), -1);
  s.ops[4].a.c = 254.5f; /* not an integer */
  assert_int_equal(cg_map_lut_find(&s, &lo, &n), -1);
  s.ops[4].a.c = 255.0f, s.ops[1].kind = TINY_FLOOR; /* no rounding before */
  assert_int_equal(cg_map_lut_find(&s, &lo, &n), -1);
}

/* The held-byte output (y_u8, q8_hold.c's input Q): x * 21.3, rint, + z,
 * clamp to [0, 255], - z (the map's value q - z; then a rounding to bf16,
 * or to fp16 and a copy, which the store leaves out), stored as the byte
 * q - z + zo with zo = z: q itself, a NaN as 0 (onnxruntime's
 * QuantizeLinear), +-inf and the range's ends saturated; zero points 0, 77,
 * 255; every ISA variant the CPU has, rows of 1001 (full vectors and a
 * masked tail) and of 5 (a tail alone), with and without a pool. */
static void test_u8_held(void **st) {
  (void)st;
  const int isas[] = {SC, A2, A5}, zs[] = {0, 77, 255};
  const int64_t cols[] = {1001, 5};
  __builtin_cpu_init();
  bool have[3] = {true, __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"),
                  __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
                      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl")};
  ut_str src;
  ut_str_init(&src);
  harp_error e;
  memset(&e, 0, sizeof e);
  for (int q = 0; q < 3; q++)
    for (int z = 0; z < 3; z++)
      for (int c = 0; c < 2; c++) {
        cgen_map_spec s;
        cgen_map_spec_init(&s, cols[c]);
        s.nin = 1, s.in[0] = (cgen_map_in){F32, false, 0, {0}};
        s.y_dtype = F32, s.y_u8 = true, s.y_zo = zs[z];
        cgen_map_op ops[] = {{TINY_MUL, F32, I(0), C(21.3f)}, {TINY_ROUND, F32, V(0)}, {TINY_ADD, F32, V(1), C((float)zs[z])},
                             {TINY_MAX, F32, V(2), C(0.0f)}, {TINY_MIN, F32, V(3), C(255.0f)}, {TINY_ADD, F32, V(4), C((float)-zs[z])}};
        s.nops = 6;
        memcpy(s.ops, ops, sizeof ops);
        /* ending in a rounding to bf16 (z 0), to fp16 and a copy (z 77), as the QDQ import's maps do: left out */
        if (z == 0) s.ops[s.nops++] = (cgen_map_op){CGEN_MAP_ROUND, B16, V(5)};
        if (z == 1) s.ops[s.nops++] = (cgen_map_op){CGEN_MAP_ROUND, F16, V(5)}, s.ops[s.nops++] = (cgen_map_op){CGEN_MAP_COPY, F32, V(6)};
        s.tune.force_isa = isas[q], s.tune.isa_mask = 1u << isas[q];
        char name[32];
        snprintf(name, sizeof name, "u%d_%d_%d", q, z, c);
        assert_int_equal(cgen_map(&e, &s, name, &src), HARP_OK);
      }
  void *h = ct_compile_flags(src.buf, "-O2");
  assert_non_null(h);
  hprt_pool *pool = ct_pool_create(h, 3);
  assert_non_null(pool);
  float x[1001];
  uint8_t y[1001 + 16];
  for (int i = 0; i < 1001; i++) x[i] = i < NSPECIAL ? SPECIAL[i] : ct_rand() * 8.0f;
  x[NSPECIAL] = 12.0f / 21.3f, x[NSPECIAL + 1] = -12.0f / 21.3f; /* near the ends for z = 0 / 255 */
  for (int q = 0; q < 3; q++)
    for (int z = 0; z < 3 && have[q]; z++)
      for (int c = 0; c < 2; c++)
        for (int withpool = 0; withpool < 2; withpool++) {
          char name[32];
          snprintf(name, sizeof name, "u%d_%d_%d", q, z, c);
          map_fn fn = (map_fn)dlsym(h, name);
          assert_non_null(fn);
          memset(y, 0xA5, sizeof y);
          const void *in[] = {x};
          assert_int_equal(fn(withpool ? pool : NULL, in, y), 0);
          long bad = 0;
          for (int i = 0; i < cols[c]; i++) {
            double v = nearbyint((double)(float)(x[i] * 21.3f)) + zs[z];
            int want = isnan(x[i]) ? 0 : v < 0 ? 0 : v > 255 ? 255 : (int)v;
            if (y[i] != want && bad++ < 5) fprintf(stderr, "%s point %d (x %g): got %d want %d\n", name, i, x[i], y[i], want);
          }
          for (int i = (int)cols[c]; i < (int)sizeof y; i++) bad += y[i] != 0xA5; /* nothing past the row */
          assert_int_equal(bad, 0);
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
  cgen_map_spec s;
  cgen_map_spec_init(&s, 0);
  s.nops = 1;
  s.ops[0] = (cgen_map_op){CGEN_MAP_COPY, F32, C(1.0f)};
  assert_int_equal(cgen_map(&e, &s, "f", &src), HARP_E_INVALID_ARG); /* no points */
  harp_error_clear(&e);
  s.cols = 8, s.nops = 0;
  assert_int_equal(cgen_map(&e, &s, "f", &src), HARP_E_INVALID_ARG); /* no op */
  harp_error_clear(&e);
  s.nops = 1, s.ops[0].a = V(0);
  assert_int_equal(cgen_map(&e, &s, "f", &src), HARP_E_INVALID_ARG); /* reads itself */
  harp_error_clear(&e);
  s.ops[0].a = I(0);
  assert_int_equal(cgen_map(&e, &s, "f", &src), HARP_E_INVALID_ARG); /* no such input */
  harp_error_clear(&e);
  s.nin = 1, s.in[0].dtype = TINY_I32;
  assert_int_equal(cgen_map(&e, &s, "f", &src), HARP_E_UNSUPPORTED);
  harp_error_clear(&e);
  s.in[0].dtype = F32, s.ops[0] = (cgen_map_op){CGEN_MAP_ROUND, F32, I(0)};
  assert_int_equal(cgen_map(&e, &s, "f", &src), HARP_E_INVALID_ARG); /* rounds to fp32 */
  harp_error_clear(&e);
  s.ops[0].dtype = F16, s.nouter = 1, s.outer[0] = 1L << 35, s.cols = 1L << 10;
  assert_int_equal(cgen_map(&e, &s, "f", &src), HARP_E_LIMIT);
  harp_error_clear(&e);
  s.nouter = 0, s.ops[0] = (cgen_map_op){TINY_LOG2, F32, I(0)}; /* no vector form */
  assert_int_equal(cgen_map(&e, &s, "f", &src), HARP_E_INVALID_ARG);
  harp_error_clear(&e);
  s.ops[0] = (cgen_map_op){TINY_WHERE, F32, I(0), I(0)};
  assert_int_equal(cgen_map(&e, &s, "f", &src), HARP_E_INVALID_ARG);
  harp_error_clear(&e);
  s.ops[0] = (cgen_map_op){CGEN_MAP_ROUND, F16, I(0)};
  assert_int_equal(cgen_map(&e, &s, "f-1", &src), HARP_E_INVALID_ARG);
  harp_error_clear(&e);
  assert_int_equal(cgen_map(&e, NULL, "f", &src), HARP_E_INVALID_ARG);
  harp_error_clear(&e);
  assert_int_equal(src.len, 0);
  assert_int_equal(cgen_map(&e, &s, "f", &src), HARP_OK);
  ut_str_free(&src);
}

/* Every op with a vector form (harp/tiny_ops.h's vec column) is in a chain,
 * with a reference (test_errors: an op without one is refused). */
static void test_coverage(void **st) {
  (void)st;
  for (int op = 0; op < TINY_OP_COUNT; op++) {
    if (!tiny_op_vec((tiny_op)op)) continue;
    bool seen = false;
    for (int c = 0; c < NCHAIN && !seen; c++)
      for (int j = 0; j < CHAINS[c].nops; j++) seen |= CHAINS[c].ops[j].kind == op;
    if (!seen) fail_msg("%s has a vector form but no chain of this test runs it", tiny_op_name((tiny_op)op));
    cgen_map_op o = {op, F32, C(1.0f), C(2.0f)};
    if (isnan(ref_op(&o, 1.0, 2.0))) fail_msg("%s: no reference in ref_op", tiny_op_name((tiny_op)op));
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_coverage),
      cmocka_unit_test(test_lut_find),
      cmocka_unit_test(test_errors),
      cmocka_unit_test(test_cases),
      cmocka_unit_test(test_cases_o3),
      cmocka_unit_test(test_u8_held),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
