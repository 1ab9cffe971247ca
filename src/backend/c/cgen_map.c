/* cgen_map.c — elementwise chains on the CPU vector layer.
 * Needs: cgen_int.h.  Gives: cgen_map, cgen_map_spec_init.
 *
 * y = f(inputs) point by point, f a list of ops on fp32 vectors.  The
 * domain is rows (outer dimensions) x cols; a task takes a range of the
 * flattened index (multiples of 64 elements, so of whole cache lines of y)
 * and walks it as row segments: full vectors, two at a time, then one
 * masked tail.  An input with `bcast` is one scalar per row, broadcast once
 * per segment.
 *
 * The transcendentals are this file's own, built to keep the reference's
 * special values where the GEMM epilogues' forms need not (their inputs are
 * finite sums):
 *   2^t   n = round(t), 2^(t-n) by the softmax's degree-6 polynomial
 *         (1.3 ulp), scaled by vscalefps (AVX-512; subnormal results exact)
 *         or two exponent multiplies (AVX2); t clamped to [-152, 129]
 *         keeping NaN (vmaxps/vminps return their second operand on NaN);
 *   e^x   Cody-Waite reduction by ln 2, the same scaling;
 *   1/x   AVX-512: vrcp14ps and one Newton step (~1 ulp, no vdivps: 10
 *         cycles a vector on Skylake-SP), rcp14's own result where it is
 *         0, inf or NaN; a / b: a * (1/b) and one residual correction
 *         (nearly always correctly rounded), the plain product where an
 *         operand is 0, inf or NaN.  AVX2 divides;
 *   gelu  0.5 x erfc(-x/sqrt2) as the vector layer's $P_gelu (Numerical
 *         Recipes' erfcc), with the reciprocal above and x itself above 10
 *         (where erfc's underflow would make inf * 0);
 *   max / min  NaN when either operand is NaN (the reference's).
 * The scalar variant calls libm (exp2f, expf) and divides. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "backend/c/cgen_int.h"

void cgen_map_spec_init(cgen_map_spec *s, int64_t cols) {
  memset(s, 0, sizeof *s);
  s->cols = cols;
  s->y_dtype = TINY_FP32;
  cgen_tuning_default(&s->tune);
}

/* 2^f on [-0.5, 0.5], c0 = 1 (cgen_softmax.c's fit). */
static const char *const POLY2[] = {"1.5353361959569156e-4f", "1.3398875016719103e-3f", "9.61843691766262e-3f",
                                    "5.5503323674201965e-2f", "2.4022647738456726e-1f", "6.931471824645996e-1f"};

/* e^r on [-ln2/2, ln2/2] beyond 1 + r (Cephes expf). */
static const char *const POLYE[] = {"1.9875691500e-4f", "1.3981999507e-3f", "8.3334519073e-3f",
                                    "4.1665795894e-2f", "1.6666665459e-1f", "5.0000001201e-1f"};

static const char M512[] =
    "$I __m512 $P_m2n(__m512 p, __m512 n) { return _mm512_scalef_ps(p, n); }\n"
    "$I __m512 $P_mround(__m512 t) { return _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }\n"
    "$I __m512 $P_mrcp(__m512 x) {\n"
    "  __m512 r = _mm512_rcp14_ps(x);\n"
    "  /* the step where r is finite and not 0: 1/(+-0), 1/(+-inf) and NaN are rcp14's own */\n"
    "  __mmask16 ok = _knot_mask16(_mm512_fpclass_ps_mask(r, 0x1f));\n"
    "  return _mm512_mask_fmadd_ps(r, ok, _mm512_fnmadd_ps(x, r, _mm512_set1_ps(1.0f)), r);\n"
    "}\n"
    "$I __m512 $P_mdiv(__m512 a, __m512 b) {\n"
    "  __m512 r = $P_mrcp(b), q = _mm512_mul_ps(a, r);\n"
    "  __m512 q1 = _mm512_fmadd_ps(r, _mm512_fnmadd_ps(b, q, a), q);\n"
    "  /* q zero, inf or NaN, or 1/b zero or inf: q is the quotient (and its sign) already */\n"
    "  __mmask16 k = _mm512_fpclass_ps_mask(q, 0x9f) | _mm512_fpclass_ps_mask(r, 0x1e);\n"
    "  return _mm512_mask_mov_ps(q1, k, q);\n"
    "}\n"
    "$I __m512 $P_mmax(__m512 a, __m512 b) {\n"
    "  return _mm512_mask_add_ps(_mm512_max_ps(a, b), _mm512_cmp_ps_mask(a, b, _CMP_UNORD_Q), a, b);\n"
    "}\n"
    "$I __m512 $P_mmin(__m512 a, __m512 b) {\n"
    "  return _mm512_mask_add_ps(_mm512_min_ps(a, b), _mm512_cmp_ps_mask(a, b, _CMP_UNORD_Q), a, b);\n"
    "}\n"
    "$I __m512 $P_mbig(__m512 x, __m512 r) { return _mm512_mask_mov_ps(r, _mm512_cmp_ps_mask(x, _mm512_set1_ps(10.0f), _CMP_GT_OQ), x); }\n"
    "$I __m512 $P_msqrt(__m512 x) { return _mm512_sqrt_ps(x); }\n";

static const char M256[] =
    "$I __m256 $P_m2n(__m256 p, __m256 n) { /* p 2^n, n integral in [-152, 129]: two steps keep subnormals */\n"
    "  __m256i k = _mm256_cvtps_epi32(n), k1 = _mm256_srai_epi32(k, 1), k2 = _mm256_sub_epi32(k, k1);\n"
    "  __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k1, _mm256_set1_epi32(127)), 23));\n"
    "  __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k2, _mm256_set1_epi32(127)), 23));\n"
    "  return _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);\n"
    "}\n"
    "$I __m256 $P_mround(__m256 t) { return _mm256_round_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }\n"
    "$I __m256 $P_mrcp(__m256 x) { return _mm256_div_ps(_mm256_set1_ps(1.0f), x); }\n"
    "$I __m256 $P_mdiv(__m256 a, __m256 b) { return _mm256_div_ps(a, b); }\n"
    "$I __m256 $P_mmax(__m256 a, __m256 b) {\n"
    "  return _mm256_blendv_ps(_mm256_max_ps(a, b), _mm256_add_ps(a, b), _mm256_cmp_ps(a, b, _CMP_UNORD_Q));\n"
    "}\n"
    "$I __m256 $P_mmin(__m256 a, __m256 b) {\n"
    "  return _mm256_blendv_ps(_mm256_min_ps(a, b), _mm256_add_ps(a, b), _mm256_cmp_ps(a, b, _CMP_UNORD_Q));\n"
    "}\n"
    "$I __m256 $P_mbig(__m256 x, __m256 r) { return _mm256_blendv_ps(r, x, _mm256_cmp_ps(x, _mm256_set1_ps(10.0f), _CMP_GT_OQ)); }\n"
    "$I __m256 $P_msqrt(__m256 x) { return _mm256_sqrt_ps(x); }\n";

static const char MSCALAR[] =
    "$I float $P_mexp2(float t) { return exp2f(t); }\n"
    "$I float $P_mexp(float x) { return expf(x); }\n"
    "$I float $P_mrcp(float x) { return 1.0f / x; }\n"
    "$I float $P_mdiv(float a, float b) { return a / b; }\n"
    "$I float $P_mmax(float a, float b) { return (a != a || b != b) ? a + b : a > b ? a : b; }\n"
    "$I float $P_mmin(float a, float b) { return (a != a || b != b) ? a + b : a < b ? a : b; }\n"
    "$I float $P_mbig(float x, float r) { return x > 10.0f ? x : r; }\n"
    "$I float $P_msqrt(float x) { return sqrtf(x); }\n";

/* 2^t and e^x on the vector ISAs, from $P_mround and $P_m2n. */
static void emit_exps(cg_out *o) {
  if (o->isa->id == CGEN_ISA_AVX512) /* f = t - round(t) in one vreduceps (0 for +-inf, so 2^+-inf is scalef(1, +-inf)) */
    cg_emit(o, "$I $P_v $P_mexp2($P_v t) {\n"
               "  $P_v f = _mm512_reduce_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), n = t - f, p = $P_set1(%s);\n",
            POLY2[0]);
  else
    cg_emit(o, "$I $P_v $P_mexp2($P_v t) {\n"
               "  t = $P_min($P_set1(129.0f), $P_max($P_set1(-152.0f), t)); /* NaN kept: the second operand */\n"
               "  $P_v n = $P_mround(t), f = t - n, p = $P_set1(%s);\n", POLY2[0]);
  for (int i = 1; i < 6; i++) cg_emit(o, "  p = $P_fma(p, f, $P_set1(%s));\n", POLY2[i]);
  cg_emit(o, "  return $P_m2n($P_fma(p, f, $P_set1(1.0f)), n);\n}\n");
  cg_emit(o, "$I $P_v $P_mexp($P_v x) {\n"
             "  x = $P_min($P_set1(88.8f), $P_max($P_set1(-104.0f), x));\n"
             "  $P_v n = $P_mround(x * $P_set1(1.44269504088896341f));\n"
             "  $P_v r = $P_fma(n, $P_set1(-0.693359375f), x);\n"
             "  r = $P_fma(n, $P_set1(2.12194440e-4f), r);\n"
             "  $P_v p = $P_set1(%s);\n", POLYE[0]);
  for (int i = 1; i < 6; i++) cg_emit(o, "  p = $P_fma(p, r, $P_set1(%s));\n", POLYE[i]);
  cg_emit(o, "  return $P_m2n($P_fma(p, r * r, r + $P_set1(1.0f)), n);\n}\n");
}

/* gelu on the helpers above, every ISA. */
static const char MGELU[] =
    "$I $P_v $P_mgelu($P_v x) {\n"
    "  $P_v z = $P_abs(x) * $P_set1(0.70710678118654752f);\n"
    "  $P_v t = $P_mrcp($P_set1(1.0f) + $P_set1(0.5f) * z);\n"
    "  $P_v p = $P_set1(0.17087277f);\n"
    "  p = $P_fma(p, t, $P_set1(-0.82215223f));\n"
    "  p = $P_fma(p, t, $P_set1(1.48851587f));\n"
    "  p = $P_fma(p, t, $P_set1(-1.13520398f));\n"
    "  p = $P_fma(p, t, $P_set1(0.27886807f));\n"
    "  p = $P_fma(p, t, $P_set1(-0.18628806f));\n"
    "  p = $P_fma(p, t, $P_set1(0.09678418f));\n"
    "  p = $P_fma(p, t, $P_set1(0.37409196f));\n"
    "  p = $P_fma(p, t, $P_set1(1.00002368f));\n"
    "  $P_v ec = t * $P_mexp($P_fma(t, p, $P_set1(-1.26551223f)) - z * z);\n"
    "  $P_v r = $P_set1(0.5f) * x * ec;\n"
    "  return $P_mbig(x, $P_selneg(x, r, x - r));\n"
    "}\n";

/* The C text of argument a for vector slot u ("a<k>_<u>", "v<k>_<u>", a constant). */
static void arg_text(char *buf, size_t cap, const cgen_map_arg *a, int u) {
  if (a->kind == 'i') snprintf(buf, cap, "a%d_%d", a->idx, u);
  else if (a->kind == 'v') snprintf(buf, cap, "v%d_%d", a->idx, u);
  else if (isnan(a->c)) snprintf(buf, cap, "$P_set1(NAN)");
  else if (isinf(a->c)) snprintf(buf, cap, "$P_set1(%sINFINITY)", a->c < 0 ? "-" : "");
  else snprintf(buf, cap, "$P_set1(%.9ge0f)", (double)a->c);
}

/* One vector (slot u) of the body at y + i + off: loads, ops, store; n: the
 * masked lane count (NULL: full). */
static void emit_vec(cg_out *o, const cgen_map_spec *s, int u, int off, const char *n) {
  for (int k = 0; k < s->nin; k++) {
    if (s->in[k].bcast) {
      cg_emit(o, "    $P_v a%d_%d = b%d;\n", k, u, k);
      continue;
    }
    const char *sx = cg_vsuffix(s->in[k].dtype);
    if (n) cg_emit(o, "    $P_v a%d_%d = $P_ldn%s(x%d + i + %d, %s);\n", k, u, sx, k, off, n);
    else cg_emit(o, "    $P_v a%d_%d = $P_ld%s(x%d + i + %d);\n", k, u, sx, k, off);
  }
  for (int j = 0; j < s->nops; j++) {
    const cgen_map_op *op = &s->ops[j];
    char a[64], b[64];
    arg_text(a, sizeof a, &op->a, u);
    if (op->kind >= CGEN_MAP_ADD) arg_text(b, sizeof b, &op->b, u);
    cg_emit(o, "    $P_v v%d_%d = ", j, u);
    switch (op->kind) {
      case CGEN_MAP_COPY: cg_emit(o, "%s;\n", a); break;
      case CGEN_MAP_NEG: cg_emit(o, "-%s;\n", a); break;
      case CGEN_MAP_EXP2: cg_emit(o, "$P_mexp2(%s);\n", a); break;
      case CGEN_MAP_EXP: cg_emit(o, "$P_mexp(%s);\n", a); break;
      case CGEN_MAP_RECIP: cg_emit(o, "$P_mrcp(%s);\n", a); break;
      case CGEN_MAP_RELU: cg_emit(o, "$P_max($P_zero(), %s); /* NaN and -0 pass */\n", a); break;
      case CGEN_MAP_GELU: cg_emit(o, "$P_mgelu(%s);\n", a); break;
      case CGEN_MAP_SQRT: cg_emit(o, "$P_msqrt(%s);\n", a); break;
      case CGEN_MAP_RSQRT: cg_emit(o, "$P_set1(1.0f) / $P_msqrt(%s);\n", a); break;
      case CGEN_MAP_ROUND: cg_emit(o, "$P_r%s(%s);\n", op->dtype == TINY_FP16 ? "h" : "b", a); break;
      case CGEN_MAP_ADD: cg_emit(o, "%s + %s;\n", a, b); break;
      case CGEN_MAP_SUB: cg_emit(o, "%s - %s;\n", a, b); break;
      case CGEN_MAP_MUL: cg_emit(o, "%s * %s;\n", a, b); break;
      case CGEN_MAP_DIV: cg_emit(o, "$P_mdiv(%s, %s);\n", a, b); break;
      case CGEN_MAP_MAX: cg_emit(o, "$P_mmax(%s, %s);\n", a, b); break;
      case CGEN_MAP_MIN: cg_emit(o, "$P_mmin(%s, %s);\n", a, b); break;
    }
  }
  const char *sy = cg_vsuffix(s->y_dtype);
  if (n) cg_emit(o, "    $P_stn%s(y + i + %d, v%d_%d, %s);\n", sy, off, s->nops - 1, u, n);
  else cg_emit(o, "    $P_st%s(y + i + %d, v%d_%d);\n", sy, off, s->nops - 1, u);
}

static void emit_variant(cg_out *o, const cgen_map_spec *s) {
  int w = o->isa->w;
  const char *yt = cg_ctype(s->y_dtype);
  cg_emit_isa_helpers(o);
  switch (o->isa->id) {
    case CGEN_ISA_AVX512: cg_emit(o, "%s", M512); break;
    case CGEN_ISA_AVX2: cg_emit(o, "%s", M256); break;
    default: cg_emit(o, "%s", MSCALAR); break;
  }
  if (o->isa->id != CGEN_ISA_SCALAR) emit_exps(o);
  cg_emit(o, "%s", MGELU);
  /* one row segment of n points */
  cg_emit(o, "static $T void $P_seg(");
  for (int k = 0; k < s->nin; k++) cg_emit(o, "const %s *restrict x%d, ", cg_ctype(s->in[k].dtype), k);
  cg_emit(o, "%s *restrict y, long n) {\n", yt);
  for (int k = 0; k < s->nin; k++) {
    if (!s->in[k].bcast) continue;
    char ld[128];
    char px[16];
    snprintf(px, sizeof px, "x%d", k);
    cg_scalar_ld(o, ld, sizeof ld, s->in[k].dtype, px, "0");
    cg_emit(o, "  $P_v b%d = $P_set1(%s);\n", k, ld);
  }
  cg_emit(o, "  long i = 0;\n");
  /* two vectors a step: two independent chains for the out-of-order core */
  if (w > 1) {
    cg_emit(o, "  for (; i + %d <= n; i += %d) {\n", 2 * w, 2 * w);
    emit_vec(o, s, 0, 0, NULL);
    emit_vec(o, s, 1, w, NULL);
    cg_emit(o, "  }\n");
  }
  cg_emit(o, "  for (; i + %d <= n; i += %d) {\n", w, w);
  emit_vec(o, s, 0, 0, NULL);
  cg_emit(o, "  }\n");
  if (w > 1) {
    cg_emit(o, "  if (i < n) {\n    int m = (int)(n - i);\n");
    emit_vec(o, s, 0, 0, "m");
    cg_emit(o, "  }\n");
  }
  cg_emit(o, "}\n");
  /* a task: flat points [a, b) as row segments */
  long cols = (long)s->cols;
  cg_emit(o, "static $T void $P_task(void *vc, int task, int tid) {\n  const $F_ctx *cx = (const $F_ctx *)vc;\n  (void)tid;\n");
  cg_emit(o, "  long a = (long)task * cx->chunk, b = a + cx->chunk;\n  if (b > cx->total) b = cx->total;\n");
  for (int k = 0; k < s->nin; k++)
    cg_emit(o, "  const %s *p%d = (const %s *)cx->in[%d] + %lldL;\n", cg_ctype(s->in[k].dtype), k,
            cg_ctype(s->in[k].dtype), k, (long long)s->in[k].offset);
  cg_emit(o, "  %s *y = (%s *)cx->y;\n", yt, yt);
  if (s->nouter == 0) {
    cg_emit(o, "  $P_seg(");
    for (int k = 0; k < s->nin; k++) cg_emit(o, s->in[k].bcast ? "p%d, " : "p%d + a, ", k);
    cg_emit(o, "y + a, b - a);\n}\n");
    return;
  }
  cg_emit(o, "  long r = a / %ldL, j = a - r * %ldL;\n", cols, cols);
  cg_emit(o, "  while (a < b) {\n    long n = %ldL - j < b - a ? %ldL - j : b - a;\n", cols, cols);
  /* the row's coordinates over the outer dimensions, innermost last */
  cg_emit(o, "    long q = r;\n");
  for (int d = s->nouter - 1; d >= 1; d--)
    cg_emit(o, "    long i%d = q %% %lldL; q /= %lldL;\n", d, (long long)s->outer[d], (long long)s->outer[d]);
  cg_emit(o, "    long i0 = q;\n");
  for (int k = 0; k < s->nin; k++) {
    cg_emit(o, "    long o%d = %s", k, s->in[k].bcast ? "0" : "j");
    for (int d = 0; d < s->nouter; d++)
      if (s->in[k].ostride[d]) cg_emit(o, " + i%d * %lldL", d, (long long)s->in[k].ostride[d]);
    cg_emit(o, ";\n");
  }
  cg_emit(o, "    $P_seg(");
  for (int k = 0; k < s->nin; k++) cg_emit(o, "p%d + o%d, ", k, k);
  cg_emit(o, "y + a, n);\n    a += n; r++; j = 0;\n  }\n}\n");
}

static void emit_run(cg_out *o, const cgen_map_spec *s, int64_t total) {
  cg_emit(o, "static $T int $P_run(hprt_pool *pool, const void *const *in, void *y) {\n  $F_ctx cx;\n");
  cg_emit(o, "  cx.in = in; cx.y = y; cx.total = %lldL;\n", (long long)total);
  /* chunks of whole 64-element blocks, a few per thread (noisy cores) */
  cg_emit(o, "  long nt = pool ? hprt_pool_size(pool) * 4 : 1;\n");
  cg_emit(o, "  cx.chunk = (cx.total + nt - 1) / nt;\n  cx.chunk = (cx.chunk + 63) / 64 * 64;\n"
             "  int ntasks = (int)((cx.total + cx.chunk - 1) / cx.chunk);\n"
             "  hprt_pool_run(ntasks > 1 ? pool : NULL, ntasks, $P_task, &cx);\n  return 0;\n}\n");
  if (o->isa->id != CGEN_ISA_SCALAR) cg_emit(o, "#endif /* HPRT_X86 */\n");
}

static const char *const KIND_NAME[] = {"copy", "neg", "exp2", "exp", "recip", "relu", "gelu", "sqrt",
                                        "rsqrt", "round", "add", "sub", "mul", "div", "max", "min"};

static hp_status check(hp_error *e, const cgen_map_spec *s, int64_t *total) {
  if (s->cols < 1 || s->nouter < 0 || s->nouter > CGEN_MAP_MAX_OUTER)
    return hp_fail(e, HP_E_INVALID_ARG, NULL, "cgen_map: bad domain");
  *total = s->cols;
  for (int d = 0; d < s->nouter; d++) {
    if (s->outer[d] < 1) return hp_fail(e, HP_E_INVALID_ARG, NULL, "cgen_map: bad domain");
    if (*total > (INT64_C(1) << 40) / s->outer[d]) return hp_fail(e, HP_E_LIMIT, NULL, "cgen_map: domain too large");
    *total *= s->outer[d];
  }
  if (s->nin < 0 || s->nin > CGEN_MAP_MAX_IN || s->nops < 1 || s->nops > CGEN_MAP_MAX_OPS)
    return hp_fail(e, HP_E_INVALID_ARG, NULL, "cgen_map: bad input or op count");
  if (!cg_dtype_ok(s->y_dtype)) return hp_fail(e, HP_E_UNSUPPORTED, NULL, "cgen_map: y must be fp32, fp16 or bf16");
  for (int k = 0; k < s->nin; k++) {
    if (!cg_dtype_ok(s->in[k].dtype)) return hp_fail(e, HP_E_UNSUPPORTED, NULL, "cgen_map: inputs must be fp32, fp16 or bf16");
    if (s->in[k].offset < 0) return hp_fail(e, HP_E_INVALID_ARG, NULL, "cgen_map: negative offset");
  }
  for (int j = 0; j < s->nops; j++) {
    const cgen_map_op *op = &s->ops[j];
    if ((unsigned)op->kind > CGEN_MAP_MIN) return hp_fail(e, HP_E_INVALID_ARG, NULL, "cgen_map: bad op %d", j);
    if (op->kind == CGEN_MAP_ROUND && op->dtype != TINY_FP16 && op->dtype != TINY_BF16)
      return hp_fail(e, HP_E_INVALID_ARG, NULL, "cgen_map: op %d rounds to fp16 or bf16 only", j);
    const cgen_map_arg *args[2] = {&op->a, &op->b};
    for (int q = 0; q < (op->kind >= CGEN_MAP_ADD ? 2 : 1); q++) {
      const cgen_map_arg *a = args[q];
      bool ok = (a->kind == 'i' && a->idx >= 0 && a->idx < s->nin) || (a->kind == 'v' && a->idx >= 0 && a->idx < j) ||
                a->kind == 'c';
      if (!ok) return hp_fail(e, HP_E_INVALID_ARG, NULL, "cgen_map: op %d (%s) reads a bad argument", j, KIND_NAME[op->kind]);
    }
  }
  return HP_OK;
}

hp_status cgen_map(hp_error *e, const cgen_map_spec *s, const char *fn, hp_str *out) {
  if (!s || !out) return hp_fail(e, HP_E_INVALID_ARG, NULL, "cgen_map: NULL argument");
  if (cg_check_name(e, fn)) return e->code;
  int64_t total = 0;
  if (check(e, s, &total)) return e->code;
  unsigned set = cg_isa_set(&s->tune);
  cg_out o = {.s = out, .F = fn};
  cg_set_isa(&o, NULL);
  cg_emit_runtime(out);
  cg_emit(&o, "/* ---- %s: map %lld points (rows of %lld), %d inputs ->", fn, (long long)total, (long long)s->cols, s->nin);
  for (int j = 0; j < s->nops; j++) cg_emit(&o, " %s", KIND_NAME[s->ops[j].kind]);
  cg_emit(&o, " -> %s ---- */\n", tiny_dtype_name(s->y_dtype));
  cg_emit_scalar_conv(&o);
  cg_emit(&o, "typedef struct { const void *const *in; void *y; long total, chunk; } $F_ctx;\n");
  for (int i = 0; i < CGEN_ISA_COUNT; i++) {
    if (!(set >> i & 1u)) continue;
    cg_set_isa(&o, cg_isa_get((cgen_isa)i));
    emit_variant(&o, s);
    emit_run(&o, s, total);
  }
  cg_emit_dispatch(&o, set, s->tune.force_isa, "hprt_pool *pool, const void *const *in, void *y", "pool, in, y");
  if (out->oom) return hp_fail(e, HP_E_NO_MEMORY, NULL, "cgen: out of memory");
  return HP_OK;
}
