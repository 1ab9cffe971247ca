/* test_prelude.c — the fp16/bf16 conversions of the generated code's prelude
 * (rc_prelude.c), compiled the way models are (-O3 -march=native: the loops
 * below vectorize, as loops over half data in a model do) and at -O0,
 * against the library's reference conversions (tiny/dtype): every half to
 * float; float to half and bf16 at every half's value, the midpoints between
 * neighbours (ties to even), one ulp either side of them, NaN payloads,
 * infinities, the overflow and subnormal edges, and random bit patterns.
 * And that a loop over each transcendental vectorizes (x86-64: packed
 * multiplies in its assembly), with the host's flags and the portable ones. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "backend/c/region_c.h"
#include "runtime/compile.h"
#include "cgen_testutil.h"
#include "util/util.h"

static const char LOOPS[] =
    "void t_h2f(const uint16_t *in, float *out, long n) { for (long i = 0; i < n; i++) out[i] = hp_h2f(in[i]); }\n"
    "void t_f2h(const float *in, uint16_t *out, long n) { for (long i = 0; i < n; i++) out[i] = hp_f2h(in[i]); }\n"
    "void t_f2b(const float *in, uint16_t *out, long n) { for (long i = 0; i < n; i++) out[i] = hp_f2b(in[i]); }\n"
    "void t_b2f(const uint16_t *in, float *out, long n) { for (long i = 0; i < n; i++) out[i] = hp_b2f(in[i]); }\n";

typedef void (*h2f_fn)(const uint16_t *, float *, long);
typedef void (*f2h_fn)(const float *, uint16_t *, long);

static float bits_f(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static uint32_t f_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

/* The float probes: around every half value and midpoint, edges, random bits. */
static long probes(float *p) {
  long n = 0;
  for (uint32_t h = 0; h < 0x10000u; h++) {
    float v = ut_f16_to_f32((uint16_t)h);
    uint32_t b = f_bits(v);
    p[n++] = v;
    if ((h & 0x7c00u) == 0x7c00u) continue;
    float w = ut_f16_to_f32((uint16_t)(h + 1)); /* the next half away from zero (or inf) */
    if ((h & 0x7fffu) == 0x7bffu) w = (h & 0x8000u) ? -65536.0f : 65536.0f;
    float mid = (float)(((double)v + (double)w) / 2);
    uint32_t mb = f_bits(mid);
    p[n++] = mid, p[n++] = bits_f(mb + 1), p[n++] = bits_f(mb - 1);
    p[n++] = bits_f(b + 1), p[n++] = bits_f(b - 1 + (b == 0 || b == 0x80000000u)); /* no wrap at zeros */
  }
  static const uint32_t edge[] = {0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00001u, 0x7f800001u, 0x7fbfffffu,
                                  0x7fffe000u, 0x477fe000u, 0x477fefffu, 0x477ff000u, 0x47800000u, 0x7f7fffffu,
                                  0x33000000u, 0x33000001u, 0x32ffffffu, 0x00000001u, 0x80000001u, 0x38800000u,
                                  0x387fffffu, 0x387fe000u, 0x387ff000u};
  for (size_t i = 0; i < sizeof edge / sizeof edge[0]; i++) p[n++] = bits_f(edge[i]);
  uint64_t s = 42;
  for (int i = 0; i < 1 << 20; i++) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    p[n++] = bits_f((uint32_t)(s >> 32));
  }
  return n;
}

static void check_flags(const char *flags) {
  ut_str src;
  ut_str_init(&src);
  rc_emit_prelude(&src);
  ut_str_puts(&src, LOOPS);
  assert_false(src.oom);
  void *h = ct_compile_flags(src.buf, flags);
  assert_non_null(h);
  h2f_fn h2f = (h2f_fn)dlsym(h, "t_h2f"), b2f = (h2f_fn)dlsym(h, "t_b2f");
  f2h_fn f2h = (f2h_fn)dlsym(h, "t_f2h"), f2b = (f2h_fn)dlsym(h, "t_f2b");
  assert_true(h2f && b2f && f2h && f2b);

  uint16_t *all = malloc(sizeof(uint16_t) << 16);
  float *out = malloc(sizeof(float) << 16);
  for (uint32_t i = 0; i < 0x10000u; i++) all[i] = (uint16_t)i;
  h2f(all, out, 0x10000);
  for (uint32_t i = 0; i < 0x10000u; i++) {
    float want = ut_f16_to_f32((uint16_t)i);
    if (f_bits(out[i]) != f_bits(want)) fail_msg("%s: h2f(0x%04x) = 0x%08x, want 0x%08x", flags, i, f_bits(out[i]), f_bits(want));
  }
  b2f(all, out, 0x10000);
  for (uint32_t i = 0; i < 0x10000u; i++)
    if (f_bits(out[i]) != i << 16) fail_msg("%s: b2f(0x%04x) = 0x%08x", flags, i, f_bits(out[i]));

  float *p = malloc(sizeof(float) * ((6L << 16) + 64 + (1L << 20)));
  long n = probes(p);
  uint16_t *r = malloc(sizeof(uint16_t) * (size_t)n);
  f2h(p, r, n);
  for (long i = 0; i < n; i++) {
    uint16_t want = ut_f32_to_f16(p[i]);
    if (r[i] != want) fail_msg("%s: f2h(0x%08x) = 0x%04x, want 0x%04x", flags, f_bits(p[i]), r[i], want);
  }
  f2b(p, r, n);
  for (long i = 0; i < n; i++) {
    uint16_t want = ut_f32_to_bf16(p[i]);
    if (r[i] != want) fail_msg("%s: f2b(0x%08x) = 0x%04x, want 0x%04x", flags, f_bits(p[i]), r[i], want);
  }
  free(r), free(p), free(out), free(all);
  dlclose(h);
  ut_str_free(&src);
}

static void test_vectorized(void **st) {
  (void)st;
  check_flags(RT_CFLAGS_HOST);
}

static void test_plain(void **st) {
  (void)st;
  check_flags(getenv("CT_FLAGS") ? getenv("CT_FLAGS") : "-O0");
}

/* A || in a select's condition, or a bool converted to float, became a
 * branch that GCC could not if-convert: the loop stayed scalar (an LRN's
 * log and exp ran at 40 ns an element). */
static const char *const MATH[] = {"hp_exp2f", "hp_expf", "hp_log2f", "hp_erff"};

#if defined(__x86_64__)
/* `src` compiled with `flags -S`: the assembly (malloc'd) */
static char *to_asm(const char *src, const char *flags) {
  char dir[] = "/tmp/harp-prelude-XXXXXX", cpath[64], spath[64], lpath[64], all[256];
  assert_non_null(mkdtemp(dir));
  snprintf(cpath, sizeof cpath, "%s/k.c", dir), snprintf(spath, sizeof spath, "%s/k.s", dir);
  snprintf(lpath, sizeof lpath, "%s/cc.log", dir), snprintf(all, sizeof all, "%s -S", flags);
  FILE *fp = fopen(cpath, "w");
  assert_non_null(fp);
  fputs(src, fp);
  fclose(fp);
  const char *cc = getenv("CC") && *getenv("CC") ? getenv("CC") : "cc";
  assert_int_equal(ut_run_cc(cc, all, NULL, spath, cpath, lpath), 0);
  size_t n = 0;
  char *as = NULL;
  harp_error e;
  memset(&e, 0, sizeof e);
  assert_int_equal(ut_read_file(&e, spath, (size_t)1 << 26, &as, &n), HARP_OK);
  remove(cpath), remove(spath), remove(lpath), remove(dir);
  return as;
}
#endif

static void check_vectorizes(const char *flags) {
#if defined(__x86_64__)
  ut_str src;
  ut_str_init(&src);
  rc_emit_prelude(&src);
  for (size_t f = 0; f < sizeof MATH / sizeof *MATH; f++)
    ut_str_printf(&src,
                  "void t_%s(const float *restrict in, float *restrict out, long n) {\n"
                  "  _Pragma(\"omp simd\") for (long i = 0; i < n; i++) out[i] = %s(in[i]);\n}\n",
                  MATH[f], MATH[f]);
  assert_false(src.oom);
  char *as = to_asm(src.buf, flags);
  for (size_t f = 0; f < sizeof MATH / sizeof *MATH; f++) {
    char label[64];
    snprintf(label, sizeof label, "\nt_%s:", MATH[f]);
    const char *b = strstr(as, label), *end = b ? strstr(b, ".cfi_endproc") : NULL;
    assert_true(b && end);
    bool packed = false;
    for (const char *m = strstr(b, "mulps"); m && m < end && !packed; m = strstr(m + 1, "mulps")) packed = true;
    if (!packed) fail_msg("%s: the loop over %s did not vectorize (no packed multiply)", flags, MATH[f]);
  }
  free(as);
  ut_str_free(&src);
#else
  (void)flags;
#endif
}

static void test_math_vectorizes(void **st) {
  (void)st;
  check_vectorizes(RT_CFLAGS_HOST);
  check_vectorizes(RT_CFLAGS_PORTABLE); /* harp compile's packages, target_clones */
}

/* A floorf whose value a select keeps only in some lanes (a trig reduction
 * past pi/4): GCC predicates it, and a predicated call it vectorizes only
 * without FP traps.  region_c.c marks a kernel that floors HP_NOTRAP (the
 * prelude's no-trapping-math): Sin of 4M elements 94 -> 20 ms.  With the
 * host flags, such a kernel must stay packed. */
static void test_predicated_floor_vectorizes(void **st) {
  (void)st;
#if defined(__x86_64__)
  ut_str src;
  ut_str_init(&src);
  rc_emit_prelude(&src);
  ut_str_puts(&src, "HP_NOTRAP void t(const float *restrict in, float *restrict out, long n) {\n"
                    "  _Pragma(\"omp simd\") for (long i = 0; i < n; i++) {\n"
                    "    float x = in[i], a = x * 0.637f, f = floorf(a), r = (a - f) * 1.57f;\n"
                    "    out[i] = fabsf(x) < 0.785f ? x : r * r * 0.5f - f * 3.0e-8f;\n  }\n}\n");
  assert_false(src.oom);
  char *as = to_asm(src.buf, RT_CFLAGS_HOST);
  const char *b = strstr(as, "\nt:"), *end = b ? strstr(b, ".cfi_endproc") : NULL;
  assert_true(b && end);
  const char *m = strstr(b, "mulps");
  if (!m || m > end) fail_msg("%s: the predicated floorf loop did not vectorize", RT_CFLAGS_HOST);
  free(as);
  ut_str_free(&src);
#endif
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_vectorized), cmocka_unit_test(test_predicated_floor_vectorizes),
      cmocka_unit_test(test_plain),
      cmocka_unit_test(test_math_vectorizes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
