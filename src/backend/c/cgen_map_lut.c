/* cgen_map_lut.c — an elementwise chain through one byte becomes a table.
 * Needs: cgen_int.h.  Gives: cg_map_lut_find, cg_map_lut_helper.
 *
 * A map chain (cgen_map.c) whose value j is a requantized integer — j is
 * min(max(x, lo), hi) of integer constants lo <= hi, hi - lo < 256, and x is
 * round(t) or round(t) + an integer constant, so that v_j is an integer of
 * [lo, hi] or NaN — and whose later ops read only v_j, each other and
 * constants, is a function of at most 257 values.  Its run then computes
 * that suffix once, with the same vector code, for lo..hi and NaN (a table
 * of fp32 results), and each point looks its result up: bit-identical to
 * the chain (the ops are lanewise, so a lane's result does not depend on
 * where it is computed).  The int8 GELU chain of a quantized transformer
 * (DQ -> Div, Erf, Add, Mul, Mul -> Q -> DQ) is the case it was made for.
 * The lookup: cvttps (NaN -> INT_MIN), an unsigned min with the NaN slot
 * n, a gather (AVX2 / AVX-512), a load (scalar).  A -0 looks up +0's
 * entry: the sign of a zero result may differ from the chain's. */
#include <math.h>
#include <string.h>

#include "backend/c/cgen_int.h"

/* Fewer later ops than this are cheaper than the lookup. */
#define LUT_MIN_SUFFIX 3

/* Whether argument a is a constant that is an integer. */
static bool int_const(const cgen_map_arg *a, float *v) {
  if (a->kind != 'c' || !isfinite(a->c) || a->c != nearbyintf(a->c) || fabsf(a->c) > 65536.0f) return false;
  *v = a->c;
  return true;
}

/* Whether op is the binary `kind` of value `v_<idx>` and an integer constant
 * (either order); the constant in *c. */
static bool op_vc(const cgen_map_op *op, int kind, int *idx, float *c) {
  if (op->kind != kind) return false;
  if (op->a.kind == 'v' && int_const(&op->b, c)) return *idx = op->a.idx, true;
  if (op->b.kind == 'v' && int_const(&op->a, c)) return *idx = op->b.idx, true;
  return false;
}

/* Whether value j of s is an integer of [*lo, *lo + *n - 1] or NaN. */
static bool byte_value(const cgen_map_spec *s, int j, float *lo, int *n) {
  int a, b, r;
  float hi, l, z;
  if (!op_vc(&s->ops[j], TINY_MIN, &a, &hi) || !op_vc(&s->ops[a], TINY_MAX, &b, &l)) return false;
  r = b; /* round(t), or round(t) + z */
  (void)op_vc(&s->ops[b], TINY_ADD, &r, &z);
  if (s->ops[r].kind != TINY_ROUND || !(l <= hi) || hi - l > 255.0f) return false;
  *lo = l, *n = (int)(hi - l) + 1;
  return true;
}

/* Whether ops j+1.. of s read only v_j, each other and constants. */
static bool suffix_closed(const cgen_map_spec *s, int j) {
  for (int k = j + 1; k < s->nops; k++) {
    const cgen_map_op *op = &s->ops[k];
    const cgen_map_arg *args[2] = {&op->a, &op->b};
    int ar = op->kind == CGEN_MAP_COPY || op->kind == CGEN_MAP_ROUND ? 1 : tiny_op_arity((tiny_op)op->kind);
    for (int q = 0; q < ar; q++)
      if (args[q]->kind == 'i' || (args[q]->kind == 'v' && args[q]->idx < j)) return false;
  }
  return true;
}

/* The op index j of s's chain whose suffix becomes a table (the latest that
 * qualifies; lo and n its integers lo..lo+n-1), or -1. */
int cg_map_lut_find(const cgen_map_spec *s, float *lo, int *n) {
  for (int j = s->nops - 1 - LUT_MIN_SUFFIX; j >= 2; j--)
    if (byte_value(s, j, lo, n) && suffix_closed(s, j)) return j;
  return -1;
}

/* The lookup helper of the current ISA: $P_lut(x, t, lo, n) = t[x - lo], or
 * t[n] where x is NaN. */
void cg_map_lut_helper(cg_out *o) {
  cg_emit(o, "static inline $T $P_v $P_lut($P_v x, const float *t, float lo, int n) {\n");
  switch (o->isa->id) {
  case CGEN_ISA_AVX512:
    cg_emit(o, "  __m512i i = _mm512_min_epu32(_mm512_cvttps_epi32(x - $P_set1(lo)), _mm512_set1_epi32(n));\n"
               "  return _mm512_i32gather_ps(i, t, 4);\n}\n");
    break;
  case CGEN_ISA_AVX2:
    cg_emit(o, "  __m256i i = _mm256_min_epu32(_mm256_cvttps_epi32(x - $P_set1(lo)), _mm256_set1_epi32(n));\n"
               "  return _mm256_i32gather_ps(t, i, 4);\n}\n");
    break;
  default:
    cg_emit(o, "  float f = x - lo;\n  return t[f >= 0.0f && f < (float)n ? (int)f : n];\n}\n");
  }
}
