/* region_c.c — C for one region from isl's loop nest (poly_ast_gen), the
 * statements' bodies from the Tiny ops.
 * Needs: a block-based region of a Function, its Poly-View.
 * Gives: rc_emit_region, rc_emit_prelude.
 *
 * Statements: an ewise or copy block is one BODY; a reduction (and the generic
 * contraction, used when no template takes it) is INIT / BODY / FINAL with an
 * accumulator per output point.  The first `prefix` variables are shared
 * loops; a value computed and consumed inside the region lives in a local
 * array over its remaining axes (a scalar when there are none: a register);
 * values the region reads or writes as buffers are indexed row-major.
 * Arithmetic follows the reference interpreter: fp32 (int32 wrapping for
 * i32), rounding at CAST and when storing fp16/bf16, accumulation in the
 * REDUCE dtype. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <ctype.h>
#include <string.h>

#include "backend/contract.h"
#include "harp/poly_ast.h"
#include "harp/polycore.h"
#include "harp/region.h"
#include "cgen_int.h"
#include "contract_c.h"
#include "region_c.h"

typedef enum store_kind { ST_CONST, ST_BUF, ST_LOCAL } store_kind;

typedef struct value {
  store_kind kind;
  int slot;       /* ST_BUF: index in bufs[] */
  tiny_dtype storage; /* ST_BUF: the buffer's dtype (a widened temp is fp32) */
  int64_t lsize;  /* ST_LOCAL: elements (1: a scalar) */
} value;

/* Prefetching the next row (next_row_prefetch): the loop over rows, the
 * pass that issues the prefetches, and what they fetch. */
#define PF_MAX_READS 4
typedef struct pf_plan {
  const poly_ast *outer, *first, *target;
  int nread;
  const tiny_node *node[PF_MAX_READS];
  const poly_ast_access *acc[PF_MAX_READS];
  int slot[PF_MAX_READS];
} pf_plan;

typedef struct emit {
  rc_ctx *c;
  const rg_region *R;
  const fn_kernel *K;
  hp_str *o;
  int prefix;
  poly_stmt_spec stmts[3 * 64];
  int nstmts;
  value *val; /* per node */
  pf_plan pf;
} emit;

static bool is_int(tiny_dtype t) { return !tiny_dtype_is_float(t); }
static const char *ctype(tiny_dtype t) { return is_int(t) ? "int32_t" : "float"; }

static const char *storage_type(tiny_dtype t) {
  switch (t) {
  case TINY_FP16:
  case TINY_BF16: return "uint16_t";
  case TINY_FP32: return "float";
  case TINY_I32: return "int32_t";
  default: return "uint8_t";
  }
}

/* ---- the prelude ---------------------------------------------------------- */
void rc_emit_prelude(hp_str *o) {
  cg_emit_runtime(o); /* the persistent thread pool (hprt_*) every kernel shares */
  hp_str_puts(o,
              "#include <math.h>\n#include <stdint.h>\n#include <stdlib.h>\n#include <string.h>\n#include <unistd.h>\n\n"
              "/* a kernel's outermost shared loop split into tasks */\n"
              "typedef struct hp_chunks { void *const *bufs; long len; int ntasks; int rc; } hp_chunks;\n"
              "/* Region kernels are compiled for AVX-512, AVX2 and baseline x86-64; the\n"
              " * CPU picks one when the object is loaded (GCC ifunc, dispatch by CPUID). */\n"
              "#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(HP_NO_CLONES)\n"
              "#define HP_KERNEL __attribute__((target_clones(\"avx512f\", \"avx2\", \"default\")))\n"
              "#else\n#define HP_KERNEL\n#endif\n"
              "static inline long hp_floord(long a, long b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }\n"
              "static inline long hp_min(long a, long b) { return a < b ? a : b; }\n"
              "static inline long hp_max(long a, long b) { return a > b ? a : b; }\n"
              "static inline float hp_fmax(float a, float b) { return (a != a || b != b) ? NAN : (a > b ? a : b); }\n"
              "static inline float hp_fmin(float a, float b) { return (a != a || b != b) ? NAN : (a < b ? a : b); }\n"
              "/* NaN-propagating max/min as reductions of `omp simd` loops */\n"
              "#pragma omp declare reduction(hp_max : float : omp_out = hp_fmax(omp_out, omp_in)) initializer(omp_priv = -INFINITY)\n"
              "#pragma omp declare reduction(hp_min : float : omp_out = hp_fmin(omp_out, omp_in)) initializer(omp_priv = INFINITY)\n"
              "static inline int32_t hp_f2i(float v) {\n"
              "  return v != v ? 0 : v >= 2147483647.0f ? INT32_MAX : v <= -2147483648.0f ? INT32_MIN : (int32_t)v;\n}\n"
              "static inline float hp_h2f(uint16_t h) {\n"
              "  uint32_t s = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, u;\n"
              "  if (e == 0) { float v = (float)m / 16777216.0f; return s ? -v : v; }\n"
              "  u = e == 31 ? (s | 0x7f800000u | (m << 13)) : (s | ((e + 112u) << 23) | (m << 13));\n"
              "  float f; memcpy(&f, &u, 4); return f;\n}\n"
              "static inline uint16_t hp_f2h(float f) {\n"
              "  uint32_t x; memcpy(&x, &f, 4);\n"
              "  uint32_t sign = (x >> 16) & 0x8000u, exp = (x >> 23) & 0xffu, man = x & 0x7fffffu;\n"
              "  if (exp == 0xff) return (uint16_t)(sign | 0x7c00u | (man ? 0x200u | (man >> 13) : 0));\n"
              "  int e = (int)exp - 112;\n"
              "  if (e >= 31) return (uint16_t)(sign | 0x7c00u);\n"
              "  if (e <= 0) {\n"
              "    if (e < -10) return (uint16_t)sign;\n"
              "    man |= 0x800000u; int sh = 14 - e; uint32_t half = 1u << (sh - 1), rest = man & ((1u << sh) - 1), r = man >> sh;\n"
              "    if (rest > half || (rest == half && (r & 1))) r++;\n"
              "    return (uint16_t)(sign | r);\n  }\n"
              "  uint32_t r = ((uint32_t)e << 10) | (man >> 13), rest = man & 0x1fffu;\n"
              "  if (rest > 0x1000u || (rest == 0x1000u && (r & 1))) r++;\n"
              "  return (uint16_t)(sign | r);\n}\n"
              "static inline float hp_b2f(uint16_t h) { uint32_t u = (uint32_t)h << 16; float f; memcpy(&f, &u, 4); return f; }\n"
              "static inline uint16_t hp_f2b(float f) {\n"
              "  uint32_t x; memcpy(&x, &f, 4);\n"
              "  if ((x & 0x7f800000u) == 0x7f800000u && (x & 0x7fffffu)) return (uint16_t)((x >> 16) | 0x40u);\n"
              "  x += 0x7fffu + ((x >> 16) & 1u); return (uint16_t)(x >> 16);\n}\n"
              "static inline float hp_rh(float f) { return hp_h2f(hp_f2h(f)); }\n"
              "static inline float hp_rb(float f) { return hp_b2f(hp_f2b(f)); }\n\n"
              "/* Transcendentals as straight-line arithmetic, so the compiler vectorizes\n"
              " * loops that call them (libm's calls do not vectorize).  Float selects go\n"
              " * through bit masks: GCC turns a chain of float ?: into branches it then\n"
              " * cannot if-convert.  Cephes-style range reduction and polynomials, about\n"
              " * 1 ulp in fp32; NaN, infinities, zeros and subnormals as libm. */\n"
              "static inline float hp_bits(int32_t i) { float f; memcpy(&f, &i, 4); return f; }\n"
              "static inline int32_t hp_ibits(float f) { int32_t i; memcpy(&i, &f, 4); return i; }\n"
              "static inline float hp_sel(int c, float a, float b) { /* c ? a : b */\n"
              "  int32_t m = -(int32_t)(c != 0);\n"
              "  return hp_bits((hp_ibits(a) & m) | (hp_ibits(b) & ~m));\n"
              "}\n"
              "static inline float hp_clampf(float x, float lo, float hi) { /* NaN -> lo */\n"
              "  x = hp_sel(x > lo, x, lo);\n"
              "  return hp_sel(x < hi, x, hi);\n"
              "}\n"
              "/* nearest integer: one vrndscaleps / vroundps (halves to even) where the\n"
              " * ISA rounds in vector registers; else a truncation and a fix-up (halves\n"
              " * up), which vectorizes anywhere (rintf would be a libm call) */\n"
              "#if defined(__SSE4_1__) || defined(__aarch64__)\n"
              "static inline float hp_rint(float x) { return __builtin_rintf(x); }\n"
              "#else\n"
              "static inline float hp_rint(float x) { /* |x| < 2^22 */\n"
              "  float y = x + 0.5f, t = (float)(int32_t)y;\n"
              "  return t - (float)(t > y);\n"
              "}\n"
              "#endif\n"
              "static inline float hp_scale2(float y, float n) { /* y 2^n, n integral in [-252, 252] */\n"
              "  int32_t k = (int32_t)n, k1 = k >> 1, k2 = k - k1; /* two steps: 2^n alone may overflow */\n"
              "  return y * hp_bits((k1 + 127) << 23) * hp_bits((k2 + 127) << 23);\n"
              "}\n"
              "static inline float hp_exp2f(float x) {\n"
              "  float xc = hp_clampf(x, -151.0f, 129.0f), n = hp_rint(xc), f = xc - n;\n"
              "  float p = 1.535336188319500e-4f;\n"
              "  p = p * f + 1.339887440266574e-3f;\n"
              "  p = p * f + 9.618437357674640e-3f;\n"
              "  p = p * f + 5.550332471162809e-2f;\n"
              "  p = p * f + 2.402264791363012e-1f;\n"
              "  p = p * f + 6.931472028550421e-1f;\n"
              "  return hp_sel(x != x, x, hp_scale2(1.0f + f * p, n));\n"
              "}\n"
              "static inline float hp_expf(float x) {\n"
              "  float xc = hp_clampf(x, -104.0f, 89.0f), n = hp_rint(xc * 1.44269504088896341f);\n"
              "  float r = xc - n * 0.693359375f + n * 2.12194440e-4f; /* Cody-Waite */\n"
              "  float p = 1.9875691500e-4f;\n"
              "  p = p * r + 1.3981999507e-3f;\n"
              "  p = p * r + 8.3334519073e-3f;\n"
              "  p = p * r + 4.1665795894e-2f;\n"
              "  p = p * r + 1.6666665459e-1f;\n"
              "  p = p * r + 5.0000001201e-1f;\n"
              "  return hp_sel(x != x, x, hp_scale2(r * r * p + r + 1.0f, n));\n"
              "}\n"
              "static inline float hp_log2f(float x) {\n"
              "  /* x = m 2^k, m in [sqrt(1/2), sqrt(2)); log(m) by the Cephes logf polynomial */\n"
              "  int sub = x < 1.17549435e-38f; /* subnormals (and what is not positive) scaled up */\n"
              "  int32_t i = hp_ibits(x * hp_sel(sub, 8388608.0f, 1.0f));\n"
              "  int32_t k = ((i >> 23) & 0xff) - 126 - 23 * sub;\n"
              "  float m = hp_bits((i & 0x007fffff) | 0x3f000000); /* [0.5, 1) */\n"
              "  int lo = m < 0.70710678118654752f;\n"
              "  k -= lo;\n"
              "  m = m + (float)lo * m - 1.0f;\n"
              "  float z = m * m, y = 7.0376836292e-2f;\n"
              "  y = y * m - 1.1514610310e-1f;\n"
              "  y = y * m + 1.1676998740e-1f;\n"
              "  y = y * m - 1.2420140846e-1f;\n"
              "  y = y * m + 1.4249322787e-1f;\n"
              "  y = y * m - 1.6668057665e-1f;\n"
              "  y = y * m + 2.0000714765e-1f;\n"
              "  y = y * m - 2.4999993993e-1f;\n"
              "  y = y * m + 3.3333331174e-1f;\n"
              "  float ln = m + (m * z * y - 0.5f * z);\n"
              "  float r = ln * 1.44269504088896341f + (float)k;\n"
              "  r = hp_sel(x == INFINITY, INFINITY, r);\n"
              "  r = hp_sel(x == 0.0f, -INFINITY, r);\n"
              "  return hp_sel(x < 0.0f || x != x, NAN, r);\n"
              "}\n"
              "static inline float hp_erff(float x) {\n"
              "  /* erf = 1 - erfc, erfc by Numerical Recipes' erfcc (rel. err < 1.2e-7) */\n"
              "  float z = fabsf(x), t = 1.0f / (1.0f + 0.5f * z);\n"
              "  float p = 0.17087277f;\n"
              "  p = p * t - 0.82215223f;\n"
              "  p = p * t + 1.48851587f;\n"
              "  p = p * t - 1.13520398f;\n"
              "  p = p * t + 0.27886807f;\n"
              "  p = p * t - 0.18628806f;\n"
              "  p = p * t + 0.09678418f;\n"
              "  p = p * t + 0.37409196f;\n"
              "  p = p * t + 1.00002368f;\n"
              "  float c = t * hp_expf(t * p - 1.26551223f - z * z);\n"
              "  return copysignf(1.0f - c, x);\n"
              "}\n"
              "\n");
}

/* ---- expressions ----------------------------------------------------------- */
static const char *round_fn(tiny_dtype t) { return t == TINY_FP16 ? "hp_rh" : t == TINY_BF16 ? "hp_rb" : ""; }

/* A constant of float dtype t, rounded as the interpreter does: (float)v,
 * then to t. */
static void float_const(hp_str *o, tiny_dtype t, double v) {
  if (isnan(v)) hp_str_puts(o, "NAN");
  else if (isinf(v)) hp_str_puts(o, v > 0 ? "INFINITY" : "(-INFINITY)");
  else hp_str_printf(o, "%s((float)(%.17g))", round_fn(t), v);
}

/* Load element `idx` of a buffer of dtype t, in compute representation. */
static void load(hp_str *o, tiny_dtype t, int slot, const char *idx, bool gpu) {
  /* GPU code reaches buffers through HP_AT (the simulator checks every access) */
  const char *at = gpu ? "HP_AT(p%d, %s)" : "p%d[%s]";
  switch (t) {
  case TINY_FP16: hp_str_puts(o, "hp_h2f("); break;
  case TINY_BF16: hp_str_puts(o, "hp_b2f("); break;
  case TINY_BOOL: hp_str_puts(o, "(int32_t)"); break;
  default: break;
  }
  hp_str_printf(o, at, slot, idx);
  if (t == TINY_FP16 || t == TINY_BF16) hp_str_putc(o, ')');
}

/* Row-major linear index of dims [from, rank) of `shape` from index texts. */
static void linear(hp_str *o, const tiny_shape *shape, const char *const *index, int from) {
  int64_t stride = 1;
  bool any = false;
  hp_str_putc(o, '(');
  for (int d = shape->rank - 1; d >= from; d--) {
    if (shape->d[d].n != 1) {
      hp_str_printf(o, "%s(%s) * %" PRId64 "L", any ? " + " : "", index[d], stride);
      any = true;
    }
    stride *= shape->d[d].n;
  }
  if (!any) hp_str_putc(o, '0');
  hp_str_putc(o, ')');
}

static void local_name(hp_str *o, const tiny_node *n, const char *prefix, int node) {
  char safe[160];
  hp_sanitize_name(n->id, safe, sizeof safe);
  hp_str_printf(o, "%s%d_%.40s", prefix, node, safe);
}

/* The value a statement reads through access a (to node t), as C. */
static void read_value(emit *m, const poly_ast_access *a, int t, tiny_dtype want) {
  const tiny_graph *g = m->c->g;
  const tiny_node *n = &g->nodes[t];
  hp_str *o = m->o;
  hp_str idx;
  hp_str_init(&idx);
  if (a->guard) hp_str_printf(o, "((%s) ? ", a->guard);
  if (m->val[t].kind == ST_CONST) {
    double v = n->a.cnst.value;
    if (is_int(n->dtype)) hp_str_printf(o, "((int32_t)%d)", n->dtype == TINY_BOOL ? v != 0 : (int)v);
    else float_const(o, n->dtype, v);
  } else if (m->val[t].kind == ST_BUF) {
    linear(&idx, &n->shape, a->index, 0);
    load(o, m->val[t].storage, m->val[t].slot, idx.buf, m->c->gpu);
  } else {
    local_name(o, n, "L", t);
    if (m->val[t].lsize > 1) {
      linear(&idx, &n->shape, a->index, m->prefix);
      hp_str_printf(o, "[%s]", idx.buf);
    }
  }
  if (a->guard) {
    hp_str_puts(o, " : ");
    for (int q = 0; q < a->nalt; q++) {
      hp_str_printf(o, "(%s) ? ", a->alt_guard[q]);
      if (is_int(n->dtype)) hp_str_printf(o, "(int32_t)%d", (int)a->alt_fill[q]);
      else float_const(o, n->dtype, a->alt_fill[q]);
      hp_str_puts(o, " : ");
    }
    if (is_int(n->dtype)) hp_str_printf(o, "(int32_t)%d", (int)a->fill);
    else float_const(o, n->dtype, a->fill);
    hp_str_putc(o, ')');
  }
  (void)want;
  hp_str_free(&idx);
}

/* Store `expr` (compute representation of node t) at the write access. */
static void store_value(emit *m, const poly_ast_access *a, int t, const char *expr) {
  const tiny_node *n = &m->c->g->nodes[t];
  hp_str *o = m->o;
  hp_str idx;
  hp_str_init(&idx);
  if (m->val[t].kind == ST_BUF) {
    linear(&idx, &n->shape, a->index, 0);
    int s = m->val[t].slot;
    hp_str_printf(o, m->c->gpu ? "HP_AT(p%d, %s) = " : "p%d[%s] = ", s, idx.buf);
    switch (m->val[t].storage) {
    case TINY_FP16: hp_str_printf(o, "hp_f2h(%s);\n", expr); break;
    case TINY_BF16: hp_str_printf(o, "hp_f2b(%s);\n", expr); break;
    case TINY_BOOL: hp_str_printf(o, "(uint8_t)((%s) != 0);\n", expr); break;
    default: hp_str_printf(o, "%s;\n", expr); break;
    }
  } else {
    local_name(o, n, "L", t);
    if (m->val[t].lsize > 1) {
      linear(&idx, &n->shape, a->index, m->prefix);
      hp_str_printf(o, "[%s]", idx.buf);
    }
    hp_str_printf(o, " = %s;\n", expr);
  }
  hp_str_free(&idx);
}

static void unary(hp_str *o, tiny_op op, bool in_int, const char *x, bool gpu) {
  if (in_int) {
    if (op == TINY_NEG) hp_str_printf(o, "(int32_t)(0u - (uint32_t)(%s))", x);
    else hp_str_printf(o, "(%s < 0 ? 0 : %s)", x, x); /* RELU */
    return;
  }
  switch (op) {
  case TINY_NEG: hp_str_printf(o, "(-(%s))", x); break;
  case TINY_EXP2: hp_str_printf(o, "hp_exp2f(%s)", x); break;
  case TINY_LOG2: hp_str_printf(o, "hp_log2f(%s)", x); break;
  case TINY_EXP: hp_str_printf(o, "hp_expf(%s)", x); break;
  case TINY_SQRT: hp_str_printf(o, "sqrtf(%s)", x); break;
  case TINY_RSQRT: hp_str_printf(o, "(1.0f / sqrtf(%s))", x); break;
  case TINY_RECIP: hp_str_printf(o, "(1.0f / (%s))", x); break;
  case TINY_RELU: hp_str_printf(o, gpu ? "hp_relu(%s)" : "({ float r_ = %s; r_ < 0 ? 0.0f : r_; })", x); break;
  case TINY_GELU:
    hp_str_printf(o, gpu ? "hp_gelu(%s)" : "({ float g_ = %s; 0.5f * g_ * (1.0f + hp_erff(g_ * 0.70710678118654752f)); })", x);
    break;
  default: hp_str_puts(o, "0");
  }
}

static void binary(hp_str *o, tiny_op op, bool in_int, const char *a, const char *b, bool gpu) {
  const char *w = NULL;
  switch (op) {
  case TINY_ADD: w = in_int ? "(int32_t)((uint32_t)(%s) + (uint32_t)(%s))" : "((%s) + (%s))"; break;
  case TINY_SUB: w = in_int ? "(int32_t)((uint32_t)(%s) - (uint32_t)(%s))" : "((%s) - (%s))"; break;
  case TINY_MUL: w = in_int ? "(int32_t)((uint32_t)(%s) * (uint32_t)(%s))" : "((%s) * (%s))"; break;
  case TINY_FDIV: w = "((%s) / (%s))"; break;
  case TINY_MAX: w = in_int ? (gpu ? "hp_imax(%s, %s)" : "({ int32_t a_ = %s, b_ = %s; a_ > b_ ? a_ : b_; })") : "hp_fmax(%s, %s)"; break;
  case TINY_MIN: w = in_int ? (gpu ? "hp_imin(%s, %s)" : "({ int32_t a_ = %s, b_ = %s; a_ < b_ ? a_ : b_; })") : "hp_fmin(%s, %s)"; break;
  case TINY_CMPLT: w = "(int32_t)((%s) < (%s))"; break;
  case TINY_CMPEQ: w = "(int32_t)((%s) == (%s))"; break;
  case TINY_CMPNE: w = "(int32_t)((%s) != (%s))"; break;
  default: w = "0"; break;
  }
  hp_str_printf(o, w, a, b);
}

static void cast(hp_str *o, tiny_dtype from, tiny_dtype to, const char *x) {
  if (to == TINY_BOOL) hp_str_printf(o, "(int32_t)((%s) != 0)", x);
  else if (to == TINY_I32) hp_str_printf(o, is_int(from) ? "(%s)" : "hp_f2i(%s)", x);
  else hp_str_printf(o, "%s((float)(%s))", round_fn(to), x);
}

/* ---- statements -------------------------------------------------------------- */
static bool produced_here(emit *m, int t) {
  for (int k = 0; k < m->R->nblocks; k++) {
    const poly_block_info *b = poly_block(m->c->pv, m->R->blocks[k]);
    for (int i = 0; i < b->nnodes; i++)
      if (b->nodes[i] == t) return true;
  }
  return false;
}

/* C text of one read of block b's access a. */
static char *read_text(emit *m, const poly_ast *u, int a, int t) {
  hp_str *save = m->o, s;
  hp_str_init(&s);
  m->o = &s;
  read_value(m, &u->access[a], t, m->c->g->nodes[t].dtype);
  m->o = save;
  return hp_str_take(&s);
}

/* A contraction operand: the base element with the CASTs on its path
 * applied, base side first (via lists them nearest the block first).  When
 * the base is not readable here (a value inside another region), the
 * statement reads a stage instead (nest_setup): a CAST on the path that is
 * materialized, at its own index, with the CASTs nearer the block applied. */
static bool readable(emit *m, int t) { return m->val[t].kind != ST_LOCAL || produced_here(m, t); }

/* The stage contraction operand a is read at: 0 (the base) when it is
 * readable, else the readable CAST nearest the base; -1: none is. */
static int operand_stage(emit *m, const poly_block_info *b, int a) {
  const poly_access_info *ai = &b->access[a];
  if (readable(m, ai->tensor)) return 0;
  for (int q = ai->nstage; q >= 1; q--)
    if (readable(m, ai->stage[q - 1])) return q;
  return -1;
}

static char *read_through_casts(emit *m, const poly_ast *u, const poly_block_info *b, int a) {
  const tiny_graph *g = m->c->g;
  const poly_access_info *ai = &b->access[a];
  int q = m->stmts[u->stmt].stage[a];
  int start = ai->nvia, src = ai->tensor; /* via[start..] are already applied to src */
  if (q > 0) {
    src = ai->stage[q - 1];
    for (start = ai->nvia - 1; start >= 0 && ai->via[start] != src; start--) {}
    if (start < 0) {
      hp_fail(m->c->e, HP_E_INTERNAL, b->name, "stage %s is not on the operand's path", g->nodes[src].id);
      return NULL;
    }
  } else if (!readable(m, src)) {
    hp_fail(m->c->e, HP_E_UNSUPPORTED, b->name, "operand %s is not readable in this region, nor any CAST on its path",
            g->nodes[ai->tensor].id);
    return NULL;
  }
  char *x = read_text(m, u, a, src);
  tiny_dtype cur = g->nodes[src].dtype;
  for (int v = start - 1; v >= 0 && x; v--) {
    const tiny_node *c = &g->nodes[ai->via[v]];
    if (c->op != TINY_CAST) continue;
    hp_str s;
    hp_str_init(&s);
    cast(&s, cur, c->a.cast.to, x);
    free(x);
    x = hp_str_take(&s);
    cur = c->a.cast.to;
  }
  return x;
}

static void acc_ref(emit *m, const poly_ast *u, const poly_block_info *b, hp_str *o) {
  const tiny_node *n = &m->c->g->nodes[b->node];
  local_name(o, n, "A", b->node);
  int64_t size = 1;
  for (int d = m->prefix; d < b->nout; d++) size *= n->shape.d[d].n;
  if (size > 1) {
    hp_str_putc(o, '[');
    linear(o, &n->shape, u->vars, m->prefix);
    hp_str_putc(o, ']');
  }
}

/* An fp32 max/min into a scalar accumulator keeps NaN in a flag of its own
 * (N<node>_...): the accumulator itself is then a plain max/min, which
 * `omp simd reduction(max:...)` vectorizes to one vmaxps per vector instead
 * of hp_fmax's compare-and-blend chain; FINAL gives NaN when the flag is up,
 * as hp_fmax would.  CPU only (the GPU code has no NAN macro). */
static bool nan_flag(const emit *m, const poly_block_info *b) {
  const tiny_node *n = &m->c->g->nodes[b->node];
  if (m->c->gpu || b->kind != POLY_REDUCE || n->a.reduce.dtype != TINY_FP32 || n->a.reduce.op == TINY_RSUM) return false;
  for (int d = m->prefix; d < b->nout; d++)
    if (n->shape.d[d].n != 1) return false;
  return true;
}

static void flag_name(hp_str *o, const emit *m, const poly_block_info *b) {
  local_name(o, &m->c->g->nodes[b->node], "N", b->node);
}

static hp_status stmt_body(emit *m, const poly_ast *u) {
  const poly_stmt_spec *sp = &m->stmts[u->stmt];
  const poly_block_info *b = poly_block(m->c->pv, sp->block);
  const tiny_graph *g = m->c->g;
  const tiny_node *n = &g->nodes[b->node];
  hp_str *o = m->o, ex, acc;
  hp_str_init(&ex);
  hp_str_init(&acc);
  int w = b->naccess - 1; /* the write */
  bool reduction = b->kind == POLY_REDUCE || b->kind == POLY_CONTRACTION;
  if (reduction) {
    tiny_reduce_op rop = n->a.reduce.op;
    tiny_dtype ad = n->a.reduce.dtype;
    acc_ref(m, u, b, &acc);
    if (sp->role == POLY_STMT_INIT) {
      double init = n->a.reduce.has_init ? n->a.reduce.init : rop == TINY_RSUM ? 0.0 : rop == TINY_RMAX ? -INFINITY : INFINITY;
      if (is_int(ad)) {
        if (n->a.reduce.has_init) hp_str_printf(o, "%s = (int32_t)%.0f;\n", acc.buf, init);
        else hp_str_printf(o, "%s = %s;\n", acc.buf, rop == TINY_RSUM ? "0" : rop == TINY_RMAX ? "INT32_MIN" : "INT32_MAX");
      } else {
        hp_str_printf(o, "%s = ", acc.buf);
        float_const(o, ad, init);
        hp_str_puts(o, ";");
        if (nan_flag(m, b)) {
          hp_str_putc(o, ' ');
          flag_name(o, m, b);
          hp_str_puts(o, " = 0;");
        }
        hp_str_putc(o, '\n');
      }
    } else if (sp->role == POLY_STMT_BODY) {
      char *v;
      if (b->kind == POLY_CONTRACTION) {
        char *l = read_through_casts(m, u, b, 0), *r = read_through_casts(m, u, b, 1);
        if (!l || !r) {
          free(l);
          free(r);
          hp_str_free(&ex);
          hp_str_free(&acc);
          return m->c->e->code ? m->c->e->code : hp_fail(m->c->e, HP_E_NO_MEMORY, NULL, "out of memory");
        }
        /* MUL in its dtype's representation, then the CAST between MUL and REDUCE */
        const tiny_node *mul = &g->nodes[b->con->mul_node];
        bool mi = is_int(mul->dtype);
        hp_str prod;
        hp_str_init(&prod);
        binary(&prod, TINY_MUL, mi, l, r, m->c->gpu);
        int cast_node = n->src[0].node;
        if (cast_node != b->con->mul_node) cast(&ex, mul->dtype, g->nodes[cast_node].dtype, prod.buf);
        else hp_str_puts(&ex, prod.buf);
        hp_str_free(&prod);
        free(l);
        free(r);
      } else {
        v = read_text(m, u, 0, b->access[0].tensor);
        hp_str_puts(&ex, v);
        free(v);
      }
      if (is_int(ad)) {
        hp_str_printf(o, "{ int32_t v_ = %s; %s = ", ex.buf, acc.buf);
        if (rop == TINY_RSUM) hp_str_printf(o, "(int32_t)((uint32_t)%s + (uint32_t)v_); }\n", acc.buf);
        else hp_str_printf(o, "v_ %s %s ? v_ : %s; }\n", rop == TINY_RMAX ? ">" : "<", acc.buf, acc.buf);
      } else {
        hp_str_printf(o, "{ float v_ = %s; %s = %s(", ex.buf, acc.buf, round_fn(ad));
        if (rop == TINY_RSUM) {
          hp_str_printf(o, "%s + v_); }\n", acc.buf);
        } else if (nan_flag(m, b)) {
          hp_str_printf(o, "v_ %s %s ? v_ : %s); ", rop == TINY_RMAX ? ">" : "<", acc.buf, acc.buf);
          flag_name(o, m, b);
          hp_str_puts(o, " |= v_ != v_; }\n");
        } else {
          hp_str_printf(o, "%s(%s, v_)); }\n", rop == TINY_RMAX ? "hp_fmax" : "hp_fmin", acc.buf);
        }
      }
    } else if (nan_flag(m, b)) { /* FINAL */
      hp_str fin;
      hp_str_init(&fin);
      hp_str_putc(&fin, '(');
      flag_name(&fin, m, b);
      hp_str_printf(&fin, " ? NAN : %s)", acc.buf);
      store_value(m, &u->access[w], b->node, fin.buf ? fin.buf : acc.buf);
      if (fin.oom) acc.oom = true;
      hp_str_free(&fin);
    } else { /* FINAL */
      store_value(m, &u->access[w], b->node, acc.buf);
    }
  } else if (b->kind == POLY_MOVEMENT_AFFINE) {
    char *v = read_text(m, u, 0, b->access[0].tensor);
    store_value(m, &u->access[w], b->node, v);
    free(v);
  } else { /* ewise: the node's op on its sources (access k = source k) */
    char *x[TINY_MAX_SRC] = {0};
    for (int k = 0; k < n->nsrc; k++) x[k] = read_text(m, u, k, b->access[k].tensor); /* the base, through views */
    tiny_class cls = tiny_op_class(n->op);
    const tiny_node *ref = &g->nodes[n->src[n->op == TINY_WHERE ? 1 : 0].node];
    bool in_int = is_int(ref->dtype);
    if (n->op == TINY_CAST) cast(&ex, ref->dtype, n->a.cast.to, x[0]);
    else if (cls == TC_UNARY) unary(&ex, n->op, in_int, x[0], m->c->gpu);
    else if (cls == TC_BINARY) binary(&ex, n->op, in_int, x[0], x[1], m->c->gpu);
    else hp_str_printf(&ex, "((%s) ? (%s) : (%s))", x[0], x[1], x[2]);
    store_value(m, &u->access[w], b->node, ex.buf);
    for (int k = 0; k < n->nsrc; k++) free(x[k]);
  }
  bool oom = ex.oom || acc.oom;
  hp_str_free(&ex);
  hp_str_free(&acc);
  return oom ? hp_fail(m->c->e, HP_E_NO_MEMORY, NULL, "out of memory") : HP_OK;
}

static void indent(hp_str *o, int d) {
  for (int i = 0; i < d; i++) hp_str_puts(o, "  ");
}

/* ---- innermost loops as `omp simd` ------------------------------------------ */
typedef struct simd_scan {
  const char *iter;
  bool ok;
  hp_str priv, red; /* private(...) and reduction(...) items */
} simd_scan;

static bool has_token(const char *text, const char *tok) {
  size_t n = strlen(tok);
  for (const char *p = strstr(text, tok); p; p = strstr(p + 1, tok)) {
    bool l = p == text || !(isalnum((unsigned char)p[-1]) || p[-1] == '_');
    bool r = !(isalnum((unsigned char)p[n]) || p[n] == '_');
    if (l && r) return true;
  }
  return false;
}

static bool stmt_in(const poly_ast *a, int k) {
  if (!a) return false;
  switch (a->kind) {
  case PA_USER: return a->stmt == k;
  case PA_IF: return stmt_in(a->then_, k) || stmt_in(a->else_, k);
  case PA_BLOCK:
    for (int i = 0; i < a->nchildren; i++)
      if (stmt_in(a->children[i], k)) return true;
    return false;
  default: return stmt_in(a->body, k);
  }
}

static void simd_item(hp_str *list, const char *item) {
  hp_str_printf(list, "%s%s", list->len ? ", " : "", item);
}

/* One statement of the loop body: which of its scalars are private per
 * iteration, which accumulate across iterations (a reduction clause), and
 * whether anything carries a dependence the clauses cannot express. */
static void simd_stmt(emit *m, const poly_ast *loop, const poly_ast *u, simd_scan *sc) {
  const poly_stmt_spec *sp = &m->stmts[u->stmt];
  const poly_block_info *b = poly_block(m->c->pv, sp->block);
  const tiny_node *n = &m->c->g->nodes[b->node];
  hp_str name;
  hp_str_init(&name);
  if (b->kind == POLY_REDUCE || b->kind == POLY_CONTRACTION) {
    acc_ref(m, u, b, &name);
    bool scalar = !strchr(name.buf ? name.buf : "[", '[');
    if (sp->role == POLY_STMT_FINAL) {
      if (m->val[b->node].kind == ST_LOCAL && m->val[b->node].lsize == 1) {
        hp_str_free(&name);
        hp_str_init(&name);
        local_name(&name, n, "L", b->node);
        simd_item(&sc->priv, name.buf);
      }
      /* its accumulator must then be private (its INIT is here too) */
      int init = -1;
      for (int k = 0; k < m->nstmts; k++)
        if (m->stmts[k].block == sp->block && m->stmts[k].role == POLY_STMT_INIT) init = k;
      if (scalar && (init < 0 || !stmt_in(loop->body, init))) sc->ok = false;
    } else if (!scalar) {
      /* an accumulator array: each iteration must own its element */
      if (!has_token(name.buf ? name.buf : "", sc->iter)) sc->ok = false;
    } else if (sp->role == POLY_STMT_INIT) {
      simd_item(&sc->priv, name.buf);
      if (nan_flag(m, b)) {
        hp_str f;
        hp_str_init(&f);
        flag_name(&f, m, b);
        simd_item(&sc->priv, f.buf ? f.buf : "");
        if (f.oom) sc->ok = false;
        hp_str_free(&f);
      }
    } else {
      int init = -1;
      for (int k = 0; k < m->nstmts; k++)
        if (m->stmts[k].block == sp->block && m->stmts[k].role == POLY_STMT_INIT) init = k;
      if (init >= 0 && stmt_in(loop->body, init)) {
        /* private, listed by its INIT */
      } else {
        tiny_reduce_op rop = n->a.reduce.op;
        tiny_dtype ad = n->a.reduce.dtype;
        const char *op = NULL;
        bool flag = nan_flag(m, b);
        if (ad == TINY_FP32) op = rop == TINY_RSUM ? "+" : rop == TINY_RMAX ? (flag ? "max" : "hp_max") : (flag ? "min" : "hp_min");
        if (!op) sc->ok = false; /* fp16/bf16 accumulators round at each step; int sums wrap */
        else hp_str_printf(&sc->red, " reduction(%s:%s)", op, name.buf);
        if (op && flag) {
          hp_str_puts(&sc->red, " reduction(|:");
          flag_name(&sc->red, m, b);
          hp_str_putc(&sc->red, ')');
        }
      }
    }
  } else if (m->val[b->node].kind == ST_LOCAL && m->val[b->node].lsize == 1) {
    local_name(&name, n, "L", b->node);
    simd_item(&sc->priv, name.buf);
  }
  if (name.oom) sc->ok = false;
  hp_str_free(&name);
}

static void simd_walk(emit *m, const poly_ast *loop, const poly_ast *a, simd_scan *sc) {
  if (!a || !sc->ok) return;
  switch (a->kind) {
  case PA_FOR: sc->ok = false; return; /* not innermost */
  case PA_IF:
    simd_walk(m, loop, a->then_, sc);
    simd_walk(m, loop, a->else_, sc);
    return;
  case PA_BLOCK:
    for (int i = 0; i < a->nchildren; i++) simd_walk(m, loop, a->children[i], sc);
    return;
  case PA_USER: simd_stmt(m, loop, a, sc); return;
  }
}

/* The loop's condition without its outer parentheses, when it has OpenMP's
 * canonical form `iter <= bound` / `iter < bound`; else NULL. */
static char *canonical_cond(const poly_ast *a) {
  const char *c = a->cond;
  size_t n = strlen(c);
  if (n >= 2 && c[0] == '(' && c[n - 1] == ')') {
    int depth = 0;
    bool wraps = true;
    for (size_t i = 0; i < n && wraps; i++) {
      depth += c[i] == '(' ? 1 : c[i] == ')' ? -1 : 0;
      if (depth == 0 && i < n - 1) wraps = false;
    }
    if (wraps) c++, n -= 2;
  }
  size_t l = strlen(a->iter);
  if (strncmp(c, a->iter, l) || c[l] != ' ' || c[l + 1] != '<') return NULL;
  if (memchr(c, '&', n) || memchr(c, '|', n)) return NULL;
  char *r = malloc(n + 1);
  if (r) memcpy(r, c, n), r[n] = 0;
  return r;
}

/* `#pragma omp simd` for an innermost loop when every dependence across its
 * iterations is a scalar reduction: without it GCC will not reorder a float
 * sum (softmax's, layernorm's) nor if-convert the transcendentals. */
/* Loop a's clauses; true when they express every dependence across its
 * iterations.  The caller frees sc->priv and sc->red. */
static bool simd_scan_loop(emit *m, const poly_ast *a, simd_scan *sc) {
  *sc = (simd_scan){a->iter, true, {0}, {0}};
  hp_str_init(&sc->priv);
  hp_str_init(&sc->red);
  simd_walk(m, a, a->body, sc);
  return sc->ok && !sc->priv.oom && !sc->red.oom;
}

static void simd_pragma(emit *m, const poly_ast *a, int d, char **cond) {
  *cond = NULL;
  if (m->c->gpu) return;
  simd_scan sc;
  if (simd_scan_loop(m, a, &sc) && (*cond = canonical_cond(a))) {
    indent(m->o, d);
    hp_str_puts(m->o, "#pragma omp simd");
    if (sc.priv.len) hp_str_printf(m->o, " private(%s)", sc.priv.buf);
    if (sc.red.len) hp_str_puts(m->o, sc.red.buf);
    hp_str_putc(m->o, '\n');
  }
  hp_str_free(&sc.priv);
  hp_str_free(&sc.red);
}

/* ---- prefetching the next row ------------------------------------------------------
 * A row kernel (softmax, layernorm) makes several passes over each row: the
 * first streams the row's inputs from memory, the later ones work on it in
 * L1.  Run as is, the core waits on memory in the first pass and on
 * arithmetic (exp, division) in the others, never both at once.  So a later
 * pass without reductions walks its row in steps of 16 elements and
 * prefetches, at each step, what the first pass will read of the next row:
 * the next row arrives while this one computes (softmax 4096x1024: -20%). */

static hp_status print_ast(emit *m, const poly_ast *a, int d);

/* text with every whole-token occurrence of from[i] replaced by to[i]. */
static char *subst_tokens(const char *text, const char *const *from, const char *const *to, int n) {
  hp_str o;
  hp_str_init(&o);
  for (const char *p = text; *p;) {
    bool word = isalnum((unsigned char)*p) || *p == '_';
    if (word && (p == text || !(isalnum((unsigned char)p[-1]) || p[-1] == '_'))) {
      size_t len = 0;
      while (isalnum((unsigned char)p[len]) || p[len] == '_') len++;
      int k = -1;
      for (int i = 0; i < n && k < 0; i++)
        if (strlen(from[i]) == len && !strncmp(p, from[i], len)) k = i;
      if (k >= 0) hp_str_printf(&o, "(%s)", to[k]);
      else hp_str_printf(&o, "%.*s", (int)len, p);
      p += len;
    } else {
      hp_str_putc(&o, *p++);
    }
  }
  return hp_str_take(&o);
}

static bool unit_step(const poly_ast *a) { return !strcmp(a->inc, "1") || !strcmp(a->inc, "1L"); }

static bool innermost(const poly_ast *a) {
  if (!a) return true;
  switch (a->kind) {
  case PA_FOR: return false;
  case PA_IF: return innermost(a->then_) && innermost(a->else_);
  case PA_BLOCK:
    for (int i = 0; i < a->nchildren; i++)
      if (!innermost(a->children[i])) return false;
    return true;
  default: return true;
  }
}

/* The gmem reads of the first pass that move with the row and run along its
 * inner loop contiguously (the inner iterator in the last index only). */
static void pf_reads(emit *m, const poly_ast *a, pf_plan *p) {
  if (!a) return;
  if (a->kind == PA_IF) {
    pf_reads(m, a->then_, p);
    pf_reads(m, a->else_, p);
  } else if (a->kind == PA_BLOCK) {
    for (int i = 0; i < a->nchildren; i++) pf_reads(m, a->children[i], p);
  } else if (a->kind == PA_USER) {
    const poly_stmt_spec *sp = &m->stmts[a->stmt];
    const poly_block_info *b = poly_block(m->c->pv, sp->block);
    if (b->kind == POLY_CONTRACTION || (b->kind == POLY_REDUCE && sp->role != POLY_STMT_BODY)) return;
    for (int k = 0; k + 1 < b->naccess && k < a->naccess; k++) {
      int t = b->access[k].tensor;
      const poly_ast_access *ac = &a->access[k];
      if (m->val[t].kind != ST_BUF || m->val[t].slot >= m->K->nreads || ac->guard || ac->rank < 1) continue;
      bool ok = has_token(ac->index[ac->rank - 1], p->first->iter), moves = false;
      for (int d = 0; d < ac->rank; d++) {
        if (d < ac->rank - 1 && has_token(ac->index[d], p->first->iter)) ok = false;
        moves |= has_token(ac->index[d], p->outer->iter);
      }
      bool seen = false;
      for (int i = 0; i < p->nread; i++) seen |= p->slot[i] == m->val[t].slot;
      if (!ok || !moves || seen || p->nread == PF_MAX_READS) continue;
      p->node[p->nread] = &m->c->g->nodes[t];
      p->acc[p->nread] = ac;
      p->slot[p->nread++] = m->val[t].slot;
    }
  }
}

/* The statements and loops of a block in order, nested blocks opened (isl
 * nests the sequence of a loop body); at most cap, else n = cap + 1. */
static void flatten(const poly_ast *a, const poly_ast **out, int *n, int cap) {
  if (!a || *n > cap) return;
  if (a->kind != PA_BLOCK) {
    if (*n < cap) out[*n] = a;
    ++*n;
    return;
  }
  for (int i = 0; i < a->nchildren; i++) flatten(a->children[i], out, n, cap);
}

/* For loop `a` over rows whose body is a sequence of passes: the plan, or
 * none (target NULL). */
static void next_row_plan(emit *m, const poly_ast *a) {
  if (m->c->gpu || m->pf.target || !a->body || !unit_step(a)) return;
  pf_plan p = {.outer = a};
  const poly_ast *ch[64];
  int n = 0;
  flatten(a->body, ch, &n, 64);
  for (int i = 0; i < n && n <= 64; i++) {
    const poly_ast *c = ch[i];
    if (c->kind != PA_FOR || !innermost(c->body)) continue;
    if (!p.first) {
      p.first = c;
      continue;
    }
    simd_scan sc;
    char *cond = simd_scan_loop(m, c, &sc) && !sc.red.len && unit_step(c) ? canonical_cond(c) : NULL;
    if (cond) p.target = c; /* the last such pass: the farthest from the next row's first pass */
    free(cond);
    hp_str_free(&sc.priv);
    hp_str_free(&sc.red);
  }
  if (!p.target) return;
  pf_reads(m, p.first->body, &p);
  if (p.nread) m->pf = p;
}

/* The target pass in steps of 16 with the prefetches, then its tail. */
static hp_status print_prefetching(emit *m, const poly_ast *a, int d) {
  hp_str *o = m->o;
  const pf_plan *p = &m->pf;
  char *cond = canonical_cond(a), *tmp = NULL;
  if (!cond) return hp_fail(m->c->e, HP_E_INTERNAL, NULL, "prefetch target lost its canonical loop");
  const char *c = cond + strlen(a->iter) + 1; /* "<= X" or "< X" */
  bool le = c[1] == '=';
  const char *bound = c + (le ? 2 : 1);
  const char *from[2] = {p->outer->iter, p->first->iter}, *to[2] = {"hp_nx", "hp_pf"};
  char next[64];
  snprintf(next, sizeof next, "%s + 1", p->outer->iter);
  const char *nf[1] = {p->outer->iter}, *nt[1] = {next};
  char *more = subst_tokens(p->outer->cond, nf, nt, 1); /* is there a next row in this task? */
  indent(o, d);
  hp_str_puts(o, "{ /* prefetch the next row while this pass computes */\n");
  indent(o, d + 1);
  hp_str_printf(o, "const long hp_nx = (%s) ? %s + 1 : %s;\n", more ? more : "0", p->outer->iter, p->outer->iter);
  free(more);
  indent(o, d + 1);
  hp_str_printf(o, "long hp_pf = %s;\n", a->init);
  indent(o, d + 1);
  hp_str_printf(o, "for (; hp_pf + 16 <= (%s)%s; hp_pf += 16) {\n", bound, le ? " + 1" : "");
  for (int i = 0; i < p->nread; i++) {
    const char *ix[TINY_MAX_RANK];
    char *own[TINY_MAX_RANK] = {0};
    for (int k = 0; k < p->acc[i]->rank; k++) ix[k] = own[k] = subst_tokens(p->acc[i]->index[k], from, to, 2);
    hp_str idx;
    hp_str_init(&idx);
    bool ok = true;
    for (int k = 0; k < p->acc[i]->rank; k++) ok = ok && own[k];
    if (ok) linear(&idx, &p->node[i]->shape, ix, 0);
    indent(o, d + 2);
    if (ok && idx.buf) hp_str_printf(o, "__builtin_prefetch(&p%d[%s], 0, 3);\n", p->slot[i], idx.buf);
    hp_str_free(&idx);
    for (int k = 0; k < p->acc[i]->rank; k++) free(own[k]);
    if (!ok) o->oom = true;
  }
  simd_pragma(m, a, d + 2, &tmp);
  free(tmp);
  indent(o, d + 2);
  hp_str_printf(o, "for (long %s = hp_pf; %s < hp_pf + 16; %s += 1) {\n", a->iter, a->iter, a->iter);
  if (print_ast(m, a->body, d + 3)) goto fail;
  indent(o, d + 2);
  hp_str_puts(o, "}\n");
  indent(o, d + 1);
  hp_str_puts(o, "}\n");
  simd_pragma(m, a, d + 1, &tmp);
  free(tmp);
  indent(o, d + 1);
  hp_str_printf(o, "for (long %s = hp_pf; %s; %s += 1) {\n", a->iter, cond, a->iter);
  if (print_ast(m, a->body, d + 2)) goto fail;
  indent(o, d + 1);
  hp_str_puts(o, "}\n");
  indent(o, d);
  hp_str_puts(o, "}\n");
  free(cond);
  return HP_OK;
fail:
  free(cond);
  return m->c->e->code;
}

static hp_status print_ast(emit *m, const poly_ast *a, int d) {
  if (!a) return HP_OK;
  hp_str *o = m->o;
  switch (a->kind) {
  case PA_FOR: {
    if (a == m->pf.target) return print_prefetching(m, a, d);
    next_row_plan(m, a);
    char *cond;
    simd_pragma(m, a, d, &cond);
    indent(o, d);
    hp_str_printf(o, "for (long %s = %s; %s; %s += %s) {\n", a->iter, a->init, cond ? cond : a->cond, a->iter, a->inc);
    free(cond);
    if (print_ast(m, a->body, d + 1)) return m->c->e->code;
    indent(o, d);
    hp_str_puts(o, "}\n");
    return HP_OK;
  }
  case PA_IF:
    indent(o, d);
    hp_str_printf(o, "if (%s) {\n", a->cond);
    if (print_ast(m, a->then_, d + 1)) return m->c->e->code;
    indent(o, d);
    if (a->else_) {
      hp_str_puts(o, "} else {\n");
      if (print_ast(m, a->else_, d + 1)) return m->c->e->code;
      indent(o, d);
    }
    hp_str_puts(o, "}\n");
    return HP_OK;
  case PA_BLOCK:
    for (int i = 0; i < a->nchildren; i++)
      if (print_ast(m, a->children[i], d)) return m->c->e->code;
    return HP_OK;
  case PA_USER:
    indent(o, d);
    return stmt_body(m, a);
  }
  return HP_OK;
}

/* ---- the region ---------------------------------------------------------------- */
static int slot_of(const fn_kernel *K, const hp_function *f, int node) {
  for (int k = 0; k < K->nreads; k++)
    if (f->buffers[K->reads[k]].node == node) return k;
  for (int k = 0; k < K->nwrites; k++)
    if (f->buffers[K->writes[k]].node == node) return K->nreads + k;
  return -1;
}

static tiny_dtype xs_dt_of(emit *m, int node) { return m->c->f->buffers[m->c->f->buffer_of[node]].dtype; }

static hp_status emit_gather(emit *m, const char *fn, long *chunk_len) {
  const tiny_graph *g = m->c->g;
  int node = m->R->out_values[0];
  const tiny_node *n = &g->nodes[node], *x = &g->nodes[n->src[0].node], *ix = &g->nodes[n->src[1].node];
  int sx = slot_of(m->K, m->c->f, n->src[0].node), si = slot_of(m->K, m->c->f, n->src[1].node),
      so = slot_of(m->K, m->c->f, node);
  if (sx < 0 || si < 0 || so < 0)
    return hp_fail(m->c->e, HP_E_UNSUPPORTED, n->id, "GATHER of a view: materialize its operands first");
  hp_str *o = m->o;
  int axis = n->a.gather.axis, r = n->shape.rank;
  hp_str_printf(o, "static int %s(hprt_pool *pool, void *const *bufs) {\n", fn);
  hp_str_printf(o, "  (void)pool;\n  long total = %" PRId64 "L;\n", tiny_shape_numel(&n->shape));
  hp_str_puts(o, "  for (long i = 0; i < total; i++) {\n    long rest = i, off = 0;\n");
  int64_t xs[TINY_MAX_RANK], st = 1;
  for (int d = x->shape.rank - 1; d >= 0; d--) xs[d] = st, st *= x->shape.d[d].n;
  for (int d = r - 1; d >= 0; d--) {
    hp_str_printf(o, "    long i%d = rest %% %" PRId64 "L; rest /= %" PRId64 "L;\n", d, n->shape.d[d].n, n->shape.d[d].n);
    if (d != axis) hp_str_printf(o, "    off += i%d * %" PRId64 "L;\n", d, xs[d]);
  }
  hp_str_printf(o, "    const %s *restrict p%d = bufs[%d];\n", storage_type(xs_dt_of(m, n->src[0].node)), sx, sx);
  hp_str_printf(o, "    int32_t k = ((const int32_t *)bufs[%d])[i];\n", si);
  hp_str_printf(o, "    if (k < 0 || k >= %" PRId64 ") return 1;\n", x->shape.d[axis].n);
  hp_str_printf(o, "    off += (long)k * %" PRId64 "L;\n", xs[axis]);
  /* through the compute representation: either buffer may be a widened temp */
  tiny_dtype xs_dt = m->c->f->buffers[m->c->f->buffer_of[n->src[0].node]].dtype;
  tiny_dtype os_dt = m->c->f->buffers[m->c->f->buffer_of[node]].dtype;
  hp_str v;
  hp_str_init(&v);
  load(&v, xs_dt, sx, "off", false);
  hp_str_printf(o, "    %s g_ = %s;\n", ctype(n->dtype), v.buf ? v.buf : "0");
  hp_str_free(&v);
  switch (os_dt) {
  case TINY_FP16: hp_str_printf(o, "    ((uint16_t *)bufs[%d])[i] = hp_f2h(g_);\n", so); break;
  case TINY_BF16: hp_str_printf(o, "    ((uint16_t *)bufs[%d])[i] = hp_f2b(g_);\n", so); break;
  case TINY_BOOL: hp_str_printf(o, "    ((uint8_t *)bufs[%d])[i] = (uint8_t)(g_ != 0);\n", so); break;
  default: hp_str_printf(o, "    ((%s *)bufs[%d])[i] = g_;\n", storage_type(os_dt), so); break;
  }
  hp_str_puts(o, "  }\n  return 0;\n}\n\n");
  (void)ix;
  *chunk_len = 0;
  return HP_OK;
}


/* Does block b read tensor t (access a) at its own point: its variables in
 * order are t's axes, at t's row-major strides (extent-1 axes aside)? */
static bool reads_pointwise(rc_ctx *c, const poly_block_info *b, int bi, int a, int t) {
  const tiny_shape *ts = &c->g->nodes[t].shape;
  int64_t size[POLY_MAX_VARS], st[POLY_MAX_VARS], off = 0, want = 1;
  bool affine = false;
  hp_error e = {0};
  if (b->nvars != ts->rank || poly_access_strides(&e, c->pv, bi, a, st, &off, &affine) || !affine || off != 0) return false;
  ct_block_sizes(c->g, b, size);
  for (int v = b->nvars - 1; v >= 0; v--) {
    if (size[v] != ts->d[v].n) return false;
    if (size[v] > 1 && st[v] != want) return false;
    want *= size[v];
  }
  return true;
}

/* Loop fusion: consecutive BODY statements with the same loops beyond the
 * shared prefix join a group (one loop nest, run in order at each point)
 * when they read the group's earlier values pointwise and read no
 * reduction the group has not finished. */
static void group_statements(emit *m) {
  rc_ctx *c = m->c;
  int next = 0, cur = -1, first = -1, pos = 0;
  for (int k = 0; k < m->nstmts; k++) {
    poly_stmt_spec *sp = &m->stmts[k];
    const poly_block_info *b = poly_block(c->pv, sp->block);
    bool join = cur >= 0 && sp->role == POLY_STMT_BODY;
    if (join) { /* same rest loops as the group's first statement */
      const poly_block_info *f = poly_block(c->pv, m->stmts[first].block);
      int64_t sa[POLY_MAX_VARS], sb[POLY_MAX_VARS];
      ct_block_sizes(c->g, f, sa);
      ct_block_sizes(c->g, b, sb);
      join = f->nvars == b->nvars;
      for (int v = m->prefix; join && v < b->nvars; v++) join = sa[v] == sb[v];
    }
    for (int a = 0; join && a < b->naccess; a++) {
      if (b->access[a].write) continue;
      int t = b->access[a].tensor;
      for (int q = first; join && q < k; q++) {
        const poly_block_info *pb = poly_block(c->pv, m->stmts[q].block);
        if (pb->node != t) continue;
        bool reduction = pb->kind == POLY_REDUCE || pb->kind == POLY_CONTRACTION;
        join = !reduction && reads_pointwise(c, b, sp->block, a, t);
      }
    }
    if (join) {
      sp->group = cur;
      sp->pos = ++pos;
    } else {
      sp->group = next++;
      sp->pos = 0;
      pos = 0;
      cur = sp->role == POLY_STMT_BODY ? sp->group : -1;
      first = k;
    }
  }
}

/* need[i] = node y is i or computed from it; stack holds g->n entries. */
static void mark_needs(const tiny_graph *g, int y, bool *need, int *stack) {
  memset(need, 0, (size_t)g->n * sizeof *need);
  int sp = 0;
  need[y] = true;
  stack[sp++] = y;
  while (sp) {
    const tiny_node *n = &g->nodes[stack[--sp]];
    for (int i = 0; i < n->nsrc; i++) {
      int s = n->src[i].node;
      if (s >= 0 && !need[s]) need[s] = true, stack[sp++] = s;
    }
  }
}

/* The output that local array t may live in, or -1: an fp32 output of the
 * same shape whose elementwise statement reads t at its own coordinates,
 * when every other reader of t is something that output needs (so all of
 * them read t before the output overwrites it) and reads t at its own
 * coordinates or reduces it.  The row of a softmax is then written into y
 * and scaled in place: the output's first touch overlaps the exp arithmetic
 * instead of a separate store pass (harp bench 4096x1024, 1 thread: 7.3 -> 6.6 ms). */
static int row_home(emit *m, int t, const bool *taken, bool *need, int *stack) {
  const rg_region *R = m->R;
  const poly_view *pv = m->c->pv;
  const tiny_graph *g = m->c->g;
  int y = -1;
  for (int q = 0; q < R->nblocks; q++) {
    const poly_block_info *qb = poly_block(pv, R->blocks[q]);
    for (int a = 0; a + 1 < qb->naccess; a++) {
      if (qb->access[a].tensor != t) continue;
      bool ident = poly_access_identity(pv, R->blocks[q], a);
      if (qb->kind != POLY_REDUCE && !ident) return -1;
      const value *v = &m->val[qb->node];
      if (y < 0 && qb->kind == POLY_EWISE && ident && v->kind == ST_BUF && v->storage == TINY_FP32 &&
          g->nodes[qb->node].dtype == TINY_FP32 && !taken[qb->node] &&
          tiny_shape_equal(&g->nodes[qb->node].shape, &g->nodes[t].shape) &&
          poly_access_identity(pv, R->blocks[q], qb->naccess - 1))
        y = qb->node;
    }
  }
  if (y < 0) return -1;
  mark_needs(g, y, need, stack);
  for (int q = 0; q < R->nblocks; q++) {
    const poly_block_info *qb = poly_block(pv, R->blocks[q]);
    for (int a = 0; a + 1 < qb->naccess; a++)
      if (qb->access[a].tensor == t && !need[qb->node]) return -1;
  }
  return y;
}

/* CPU only: local arrays moved into the outputs row_home finds. */
static void home_rows(emit *m) {
  const tiny_graph *g = m->c->g;
  const rg_region *R = m->R;
  bool *taken = hp_xcalloc((size_t)g->n + 1, sizeof *taken), *need = hp_xcalloc((size_t)g->n + 1, sizeof *need);
  int *stack = hp_xcalloc((size_t)g->n + 1, sizeof *stack);
  for (int k = 0; taken && need && stack && k < R->nblocks; k++) {
    const poly_block_info *b = poly_block(m->c->pv, R->blocks[k]);
    int t = b->node;
    if (b->kind != POLY_EWISE || m->val[t].kind != ST_LOCAL || m->val[t].lsize <= 1 || g->nodes[t].dtype != TINY_FP32 ||
        !poly_access_identity(m->c->pv, R->blocks[k], b->naccess - 1))
      continue;
    int y = row_home(m, t, taken, need, stack);
    if (y < 0) continue;
    taken[y] = true;
    m->val[t].kind = ST_BUF;
    m->val[t].slot = m->val[y].slot;
    m->val[t].storage = TINY_FP32;
  }
  free(taken);
  free(need);
  free(stack);
}

/* Storage of every value region r touches, its statements (reductions in
 * three steps), their groups, and which values live in registers. */
static void nest_setup(rc_ctx *c, int r, emit *m) {
  const hp_function *f = c->f;
  const rg_region *R = m->R;
  const tiny_graph *g = c->g;
  int prefix = 1 << 30;
  for (int k = 0; k < R->nblocks; k++) {
    const poly_block_info *b = poly_block(c->pv, R->blocks[k]);
    if (b->nout < prefix) prefix = b->nout;
  }
  /* the loops the blocks share: region formation's, checked with isl */
  m->prefix = R->info ? R->info->prefix : R->nblocks == 1 ? poly_block(c->pv, R->blocks[0])->nout : prefix;
  for (int i = 0; i < g->n; i++) {
    m->val[i].kind = g->nodes[i].op == TINY_CONST ? ST_CONST : ST_LOCAL;
    m->val[i].slot = slot_of(m->K, f, i);
    if (m->val[i].slot >= 0) {
      m->val[i].kind = ST_BUF;
      m->val[i].storage = f->buffers[f->buffer_of[i]].dtype;
    }
    int64_t size = 1;
    for (int d = m->prefix; d < g->nodes[i].shape.rank; d++) size *= g->nodes[i].shape.d[d].n;
    m->val[i].lsize = size;
  }
  /* Statements in block order, reductions in three steps; every INIT first
   * (an accumulator's init depends on nothing), so that a reduction's BODY
   * can share the loop of the values it sums. */
  for (int k = 0; k < R->nblocks && m->nstmts + 3 <= (int)(sizeof m->stmts / sizeof m->stmts[0]); k++) {
    const poly_block_info *b = poly_block(c->pv, R->blocks[k]);
    if (b->kind == POLY_REDUCE || b->kind == POLY_CONTRACTION)
      m->stmts[m->nstmts++] = (poly_stmt_spec){R->blocks[k], POLY_STMT_INIT, -1, 0, {0}};
  }
  for (int k = 0; k < R->nblocks && m->nstmts + 2 <= (int)(sizeof m->stmts / sizeof m->stmts[0]); k++) {
    const poly_block_info *b = poly_block(c->pv, R->blocks[k]);
    bool red = b->kind == POLY_REDUCE || b->kind == POLY_CONTRACTION;
    poly_stmt_spec *body = &m->stmts[m->nstmts++];
    *body = (poly_stmt_spec){R->blocks[k], POLY_STMT_BODY, -1, 0, {0}};
    for (int a = 0; a < 2 && b->kind == POLY_CONTRACTION; a++) {
      int q = operand_stage(m, b, a);
      body->stage[a] = q > 0 ? q : 0; /* none: read_through_casts says so */
    }
    if (red) m->stmts[m->nstmts++] = (poly_stmt_spec){R->blocks[k], POLY_STMT_FINAL, -1, 0, {0}};
  }
  group_statements(m);
  /* A value computed and consumed within one group lives in a register. */
  for (int k = 0; k < m->nstmts; k++) {
    const poly_block_info *b = poly_block(c->pv, m->stmts[k].block);
    int t = b->node;
    if (m->stmts[k].role != POLY_STMT_BODY || b->kind == POLY_REDUCE || b->kind == POLY_CONTRACTION ||
        m->val[t].kind != ST_LOCAL)
      continue;
    bool inside = true;
    for (int q = 0; q < m->nstmts && inside; q++) {
      const poly_block_info *qb = poly_block(c->pv, m->stmts[q].block);
      for (int a = 0; a < qb->naccess && inside; a++)
        if (!qb->access[a].write && qb->access[a].tensor == t) inside = m->stmts[q].group == m->stmts[k].group;
    }
    if (inside) m->val[t].lsize = 1;
  }
  if (!c->gpu) home_rows(m);
  (void)r;
}

/* Declarations of the locals (intermediates and accumulators), `ind` before
 * each.  scratch (GPU, NULL: arrays): arrays become pointers into the
 * per-point slice `scratch` (an unsigned char *), each at the next offset.
 * Returns the bytes of all locals and, in *array_bytes, those of the arrays. */
static int64_t emit_locals(emit *m, hp_str *out, const char *ind, const char *scratch, int64_t *array_bytes) {
  const tiny_graph *g = m->c->g;
  const rg_region *R = m->R;
  int64_t local_bytes = 0, arrays = 0;
  for (int k = 0; k < R->nblocks; k++) {
    const poly_block_info *b = poly_block(m->c->pv, R->blocks[k]);
    const tiny_node *n = &g->nodes[b->node];
    for (int acc = 0; acc < 2; acc++) {
      bool red = b->kind == POLY_REDUCE || b->kind == POLY_CONTRACTION;
      if (acc ? !red : m->val[b->node].kind != ST_LOCAL) continue;
      int64_t size = 1;
      if (acc)
        for (int d = m->prefix; d < b->nout; d++) size *= n->shape.d[d].n;
      else size = m->val[b->node].lsize;
      const char *type = ctype(acc ? n->a.reduce.dtype : n->dtype);
      hp_str_printf(out, "%s%s %s", ind, type, scratch && size > 1 ? "*" : "");
      local_name(out, n, acc ? "A" : "L", b->node);
      if (size > 1 && scratch) hp_str_printf(out, " = (%s *)(%s + %" PRId64 ")", type, scratch, arrays);
      else if (size > 1) hp_str_printf(out, "[%" PRId64 "]", size);
      hp_str_puts(out, ";\n");
      if (acc && nan_flag(m, b)) {
        hp_str_printf(out, "%sint ", ind);
        flag_name(out, m, b);
        hp_str_puts(out, ";\n");
      }
      local_bytes += 4 * size;
      if (size > 1) arrays += 4 * size;
    }
  }
  if (array_bytes) *array_bytes = arrays;
  return local_bytes;
}

hp_status rc_emit_region(rc_ctx *c, int r, const char *fn, hp_str *out, long *chunk_len) {
  const hp_function *f = c->f;
  const rg_region *R = &f->part->regions[f->kernels[r].region];
  const tiny_graph *g = c->g;
  emit m = {c, R, &f->kernels[r], out, 0, {{0}}, 0, hp_xcalloc((size_t)g->n + 1, sizeof(value)), {0}};
  if (!m.val) return hp_fail(c->e, HP_E_NO_MEMORY, NULL, "out of memory");
  hp_status st = HP_OK;
  *chunk_len = 0;
  if (R->nblocks == 0) {
    st = emit_gather(&m, fn, chunk_len);
    free(m.val);
    return st;
  }
  bool templated = false;
  const char *why = NULL;
  if ((st = cc_emit_template(c, r, fn, out, &templated, &why)) || templated) {
    free(m.val);
    return st;
  }
  if (why) hp_str_printf(out, "/* generic loops: the template declined (%s) */\n", why);
  nest_setup(c, r, &m);
  const poly_block_info *b0 = poly_block(c->pv, R->blocks[0]);
  long outer = m.prefix >= 1 ? (long)g->nodes[b0->node].shape.d[0].n : 0;
  poly_ast_opts opts = {.prefix = m.prefix, .chunk_outer = outer > 1};
  poly_ast *tree;
  if ((st = poly_ast_gen(c->e, c->pv, m.stmts, m.nstmts, &opts, c->arena, &tree))) goto done;
  *chunk_len = opts.chunk_outer ? outer : 0;
  hp_str_printf(out, "HP_KERNEL static int %s_body(void *const *bufs, long hp_lo, long hp_hi) {\n", fn);
  if (!opts.chunk_outer) hp_str_puts(out, "  (void)hp_lo; (void)hp_hi;\n");
  /* one typed restrict pointer per buffer: live buffers never overlap */
  for (int k = 0; k < m.K->nreads + m.K->nwrites; k++) {
    int b = k < m.K->nreads ? m.K->reads[k] : m.K->writes[k - m.K->nreads];
    tiny_dtype dt = f->buffers[b].dtype;
    hp_str_printf(out, "  %s%s *restrict p%d = bufs[%d];\n", k < m.K->nreads ? "const " : "", storage_type(dt), k, k);
  }
  /* locals: intermediates and accumulators */
  int64_t local_bytes = emit_locals(&m, out, "  ", NULL, NULL);
  if (local_bytes > c->local_budget) {
    st = hp_fail(c->e, HP_E_UNSUPPORTED, R->name, "region needs %" PRId64 " bytes of locals (budget %d)", local_bytes,
                 c->local_budget);
    goto done;
  }
  if ((st = print_ast(&m, tree, 1))) goto done;
  hp_str_puts(out, "  return 0;\n}\n\n");
  /* Threads take slices of the outermost shared loop (its iterations are
   * independent: every dependence in the region is the identity on the
   * shared loops).  Small kernels stay on the calling thread. */
  double work = 0;
  for (int k = 0; k < R->nblocks; k++) {
    const poly_block_info *b = poly_block(c->pv, R->blocks[k]);
    const tiny_node *n = &g->nodes[b->node];
    double w = (double)tiny_shape_numel(&n->shape);
    if (b->kind == POLY_REDUCE || b->kind == POLY_CONTRACTION) w = (double)tiny_shape_numel(&g->nodes[n->src[0].node].shape);
    work += w;
  }
  if (*chunk_len > 1 && work >= 32768.0) {
    hp_str_printf(out,
                  "static void %s_task(void *ctx, int t, int tid) {\n"
                  "  hp_chunks *c = ctx;\n  (void)tid;\n"
                  "  if (%s_body(c->bufs, c->len * t / c->ntasks, c->len * (t + 1) / c->ntasks)) c->rc = 1;\n}\n"
                  "static int %s(hprt_pool *pool, void *const *bufs) {\n"
                  "  long len = %ldL;\n  int nt = 2 * hprt_pool_size(pool);\n"
                  "  hp_chunks c = {bufs, len, (int)(nt < len ? nt : len), 0};\n"
                  "  hprt_pool_run(pool, c.ntasks, %s_task, &c);\n  return c.rc;\n}\n\n",
                  fn, fn, fn, *chunk_len, fn);
  } else {
    hp_str_printf(out, "static int %s(hprt_pool *pool, void *const *bufs) {\n  (void)pool;\n  return %s_body(bufs, 0, %ldL);\n}\n\n",
                  fn, fn, *chunk_len > 0 ? *chunk_len : 0L);
  }
  if (out->oom) st = hp_fail(c->e, HP_E_NO_MEMORY, NULL, "out of memory");
done:
  free(m.val);
  return st;
}

/* ---- the loop nest for other backends ------------------------------------------ */
typedef struct nest_priv {
  emit m;
} nest_priv;

hp_status rc_nest_build(rc_ctx *c, int r, rc_nest *out) {
  const hp_function *f = c->f;
  const rg_region *R = &f->part->regions[f->kernels[r].region];
  const tiny_graph *g = c->g;
  memset(out, 0, sizeof *out);
  if (R->nblocks == 0) return hp_fail(c->e, HP_E_INTERNAL, R->name, "a GATHER region has no loop nest");
  nest_priv *p = hp_xcalloc(1, sizeof *p);
  value *val = hp_xcalloc((size_t)g->n + 1, sizeof(value));
  if (!p || !val) {
    free(p);
    free(val);
    return hp_fail(c->e, HP_E_NO_MEMORY, NULL, "out of memory");
  }
  out->priv = p;
  p->m = (emit){c, R, &f->kernels[r], NULL, 0, {{0}}, 0, val, {0}};
  nest_setup(c, r, &p->m);
  const poly_block_info *b0 = poly_block(c->pv, R->blocks[0]);
  out->fixed = p->m.prefix;
  for (int i = 0; i < out->fixed; i++) out->extent[i] = g->nodes[b0->node].shape.d[i].n;
  poly_ast_opts opts = {p->m.prefix, false, out->fixed, out->extent};
  poly_ast *tree;
  hp_status st = poly_ast_gen(c->e, c->pv, p->m.stmts, p->m.nstmts, &opts, c->arena, &tree);
  if (st) {
    rc_nest_free(out);
    return st;
  }
  out->tree = tree;
  hp_str tmp;
  hp_str_init(&tmp);
  out->local_bytes = emit_locals(&p->m, &tmp, "", NULL, &out->array_bytes);
  hp_str_free(&tmp);
  return HP_OK;
}

void rc_nest_locals(rc_nest *n, const char *scratch, hp_str *out) {
  nest_priv *p = n->priv;
  emit_locals(&p->m, out, "", scratch, NULL);
}

hp_status rc_nest_stmt(rc_nest *n, const poly_ast *u, hp_str *out) {
  nest_priv *p = n->priv;
  p->m.o = out;
  hp_status st = stmt_body(&p->m, u);
  p->m.o = NULL;
  if (!st && out->len && out->buf[out->len - 1] == '\n') out->buf[--out->len] = 0;
  return st;
}

void rc_nest_free(rc_nest *n) {
  nest_priv *p = n->priv;
  if (p) {
    free(p->m.val);
    free(p);
  }
  memset(n, 0, sizeof *n);
}
