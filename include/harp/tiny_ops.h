/* harp/tiny_ops.h — the op table: one row per Tiny uop, one column per fact.
 * Needs: nothing (tiny.h includes it and builds enum tiny_op from it).
 * Gives: TINY_OPS(X), the column enums tiny_class, tiny_argkind, tiny_dtype_rule
 * and tiny_epi.  The columns are read through core.c's lookups
 * (tiny_op_class, tiny_op_c, ...), never positionally outside src/tiny;
 * docs/adding-an-op.md walks through adding a row.
 *
 * X(OP, class, arg, dtype, epi,            -- what the op is
 *   f32, i32,                               -- what it computes (interpreter)
 *   c, c_int, gpu, gpu_int, cuda, vec)      -- how each renderer spells it
 *
 *  class    TC_*; the arity follows from it (tiny_op_arity).
 *  arg      TA_*: the member of tiny_args the op reads.
 *  dtype    TD_* flags, for elementwise ops: the operands a row refuses and
 *           the result (the operands' dtype, or bool).
 *  epi      TE_*: the step a contraction's epilogue makes of the op.
 *  f32      the reference value on fp32 operands: an expression in a (and b,
 *           and a ternary op's c), floats.  i32: the same on int32 operands
 *           (wrapping); 0 where the dtype rule refuses integers.  Both 0
 *           outside elementwise ops and for WHERE (it selects; the other
 *           classes have their own evaluators).
 *  A row that is not elementwise has 0 in every column from f32 on.
 *  c        the C text of the generic loops (src/backend/c/region_c.c), each
 *           "%s" an operand in turn (a unary op's "%s" all name its one
 *           operand); helpers hp_* are the CPU prelude's (rc_prelude.c).
 *  c_int    the C text on int32 operands; 0: c's.
 *  gpu, gpu_int  the text in CUDA generic kernels, where it differs from
 *           c / c_int (no statement expressions there; generic_cuda.c's hp_*).
 *  cuda     the CUDA elementwise kernel's text (cuda_simple.c; its hk_*
 *           helpers, values in named registers); 0: c's, which must then use
 *           CUDA's own math functions only (the unit test checks).
 *  vec      the CPU vector layer's text (cgen_map.c; $P_* helpers of
 *           cgen_emit.c); 0: no vector form, chains with the op run as
 *           generic loops.
 *
 * A row that lacks a column does not compile; tests/unit/test_tiny_optable.c
 * checks that the columns agree (an elementwise op has a reference value and
 * C text, a "%s" per operand, ...), and tests/py/test_uops.py runs every row
 * `harp ops` lists on every backend against numpy. */
#ifndef HARP_TINY_OPS_H
#define HARP_TINY_OPS_H

typedef enum tiny_class {
  TC_LEAF,    /* INPUT, CONST */
  TC_MOVE,    /* views */
  TC_UNARY,   /* elementwise, one source */
  TC_BINARY,  /* elementwise, two sources of one shape */
  TC_TERNARY, /* WHERE(cond, a, b), MULADD(a, b, c) */
  TC_REDUCE,
  TC_CAST,
  TC_GATHER /* GATHER(input, index): data-dependent, Non-SCoP */
} tiny_class;

typedef enum tiny_argkind {
  TA_NONE,
  TA_INPUT,   /* tensor_id, dtype, shape, storage? */
  TA_CONST,   /* value, dtype */
  TA_RESHAPE, /* result_shape */
  TA_PERMUTE, /* perm */
  TA_EXPAND,  /* result_shape, broadcast_dimensions? */
  TA_PAD,     /* pad [[lo,hi]...], value? */
  TA_SHRINK,  /* lo, hi, step? */
  TA_FLIP,    /* axes */
  TA_VIEW,    /* result_shape, index_map */
  TA_POOL,    /* kernel, stride?, dilation? */
  TA_CAST,    /* to */
  TA_REDUCE,  /* op, axes, dtype, init? */
  TA_GATHER   /* axis */
} tiny_argkind;

/* Operand and result dtypes of an elementwise op (flags). */
typedef enum tiny_dtype_rule {
  TD_ANY = 0,   /* every dtype; the result has the operands' */
  TD_NUM = 1,   /* not bool (CAST first) */
  TD_FLOAT = 2, /* fp16, bf16 or fp32 only */
  TD_BOOL = 4   /* the result is bool (a comparison) */
} tiny_dtype_rule;

/* The epilogue step of a GEMM / conv / pool template an op can be. */
typedef enum tiny_epi {
  TE_NONE,
  TE_RELU,  /* max(x, 0) */
  TE_GELU,  /* x Phi(x) */
  TE_RINT,  /* to the nearest integer, halves to even (a requantization's rounding) */
  TE_SHIFT, /* x + t: t a constant, a bias or a residual */
  TE_SCALE, /* x * t: t a constant, or a tensor (a residual product) */
  TE_LOWER, /* max(x, c), c a constant: a clamp's lower bound */
  TE_UPPER  /* min(x, c): a clamp's upper bound (ReLU6 = min(max(x, 0), 6)) */
} tiny_epi;

/* clang-format off */
#define TINY_OPS(X)                                                                                                   \
  X(INPUT, TC_LEAF, TA_INPUT, TD_ANY, TE_NONE, 0, 0, 0, 0, 0, 0, 0, 0)                                                \
  X(CONST, TC_LEAF, TA_CONST, TD_ANY, TE_NONE, 0, 0, 0, 0, 0, 0, 0, 0)                                                \
  X(RESHAPE, TC_MOVE, TA_RESHAPE, TD_ANY, TE_NONE, 0, 0, 0, 0, 0, 0, 0, 0)                                            \
  X(PERMUTE, TC_MOVE, TA_PERMUTE, TD_ANY, TE_NONE, 0, 0, 0, 0, 0, 0, 0, 0)                                            \
  X(EXPAND, TC_MOVE, TA_EXPAND, TD_ANY, TE_NONE, 0, 0, 0, 0, 0, 0, 0, 0)                                              \
  X(PAD, TC_MOVE, TA_PAD, TD_ANY, TE_NONE, 0, 0, 0, 0, 0, 0, 0, 0)                                                    \
  X(SHRINK, TC_MOVE, TA_SHRINK, TD_ANY, TE_NONE, 0, 0, 0, 0, 0, 0, 0, 0)                                              \
  X(FLIP, TC_MOVE, TA_FLIP, TD_ANY, TE_NONE, 0, 0, 0, 0, 0, 0, 0, 0)                                                  \
  X(VIEW, TC_MOVE, TA_VIEW, TD_ANY, TE_NONE, 0, 0, 0, 0, 0, 0, 0, 0)                                                  \
  X(POOL, TC_MOVE, TA_POOL, TD_ANY, TE_NONE, 0, 0, 0, 0, 0, 0, 0, 0)                                                  \
  X(CAST, TC_CAST, TA_CAST, TD_ANY, TE_NONE, 0, 0, 0, 0, 0, 0, 0, 0)                                                  \
  X(NEG, TC_UNARY, TA_NONE, TD_NUM, TE_NONE,                                                                           \
    -a, (int32_t)(0u - (uint32_t)a),                                                                                   \
    "(-(%s))", "(int32_t)(0u - (uint32_t)(%s))", 0, 0, "-%s", "-%s")                                                  \
  X(EXP2, TC_UNARY, TA_NONE, TD_FLOAT, TE_NONE,                                                                        \
    exp2f(a), 0,                                                                                                       \
    "hp_exp2f(%s)", 0, 0, 0, "hk_exp2(%s)", "$P_exp2(%s)")                                                            \
  X(LOG2, TC_UNARY, TA_NONE, TD_FLOAT, TE_NONE,                                                                        \
    log2f(a), 0,                                                                                                       \
    "hp_log2f(%s)", 0, 0, 0, "hk_log2(%s)", 0)                                                                        \
  X(EXP, TC_UNARY, TA_NONE, TD_FLOAT, TE_NONE,                                                                         \
    expf(a), 0,                                                                                                        \
    "hp_expf(%s)", 0, 0, 0, "hk_exp(%s)", "$P_exp(%s)")                                                               \
  X(SQRT, TC_UNARY, TA_NONE, TD_FLOAT, TE_NONE,                                                                        \
    sqrtf(a), 0,                                                                                                       \
    "sqrtf(%s)", 0, 0, 0, "hk_sqrt(%s)", "$P_sqrt(%s)")                                                               \
  X(RSQRT, TC_UNARY, TA_NONE, TD_FLOAT, TE_NONE,                                                                       \
    1.0f / sqrtf(a), 0,                                                                                                \
    "(1.0f / sqrtf(%s))", 0, 0, 0, "1.0f / hk_sqrt(%s)", "$P_set1(1.0f) / $P_sqrt(%s)")                               \
  X(RECIP, TC_UNARY, TA_NONE, TD_FLOAT, TE_NONE,                                                                       \
    1.0f / a, 0,                                                                                                       \
    "(1.0f / (%s))", 0, 0, 0, "1.0f / %s", "$P_rcp(%s)")                                                              \
  /* RELU: NaN stays NaN and -0 passes (vec: max_ps(0, x) returns x for NaN and zeros) */                            \
  X(RELU, TC_UNARY, TA_NONE, TD_NUM, TE_RELU,                                                                          \
    a < 0 ? 0.0f : a, a < 0 ? 0 : a,                                                                                   \
    "({ float r_ = %s; r_ < 0 ? 0.0f : r_; })", "(%s < 0 ? 0 : %s)", "hp_relu(%s)", 0, "hk_relu(%s)",                 \
    "$P_max($P_zero(), %s)")                                                                                           \
  X(GELU, TC_UNARY, TA_NONE, TD_FLOAT, TE_GELU,                                                                        \
    0.5f * a * (1.0f + erff(a * 0.70710678118654752f)), 0,                                                             \
    "({ float g_ = %s; 0.5f * g_ * (1.0f + hp_erff(g_ * 0.70710678118654752f)); })", 0, "hp_gelu(%s)", 0,            \
    "hk_gelu(%s)", "$P_gelu(%s)")                                                                                      \
  X(FLOOR, TC_UNARY, TA_NONE, TD_FLOAT, TE_NONE,                                                                       \
    floorf(a), 0,                                                                                                      \
    "floorf(%s)", 0, 0, 0, 0, "$P_floor(%s)")                                                                          \
  X(CEIL, TC_UNARY, TA_NONE, TD_FLOAT, TE_NONE,                                                                        \
    ceilf(a), 0,                                                                                                       \
    "ceilf(%s)", 0, 0, 0, 0, "$P_ceil(%s)")                                                                            \
  /* ROUND: to the nearest integer, halves to even (the default rounding mode) */                                     \
  X(ROUND, TC_UNARY, TA_NONE, TD_FLOAT, TE_RINT,                                                                       \
    nearbyintf(a), 0,                                                                                                  \
    "rintf(%s)", 0, 0, 0, 0, "$P_rint(%s)")                                                                            \
  /* SIGN: -1, 0 or 1 (NaN stays NaN, -0 gives 0); vec: x * 1e38 * 1e38 is +-inf for every x != 0, clamped */   \
  X(SIGN, TC_UNARY, TA_NONE, TD_NUM, TE_NONE,                                                                          \
    a > 0 ? 1.0f : a < 0 ? -1.0f : a == 0 ? 0.0f : a, (a > 0) - (a < 0),                                              \
    "((%s) > 0.0f ? 1.0f : (%s) < 0.0f ? -1.0f : (%s) == 0.0f ? 0.0f : (%s))", "(((%s) > 0) - ((%s) < 0))", 0, 0, 0,  \
    "$P_minn($P_maxn(%s * $P_set1(1e38f) * $P_set1(1e38f), $P_set1(-1.0f)), $P_set1(1.0f)) + $P_zero()")             \
  X(ADD, TC_BINARY, TA_NONE, TD_NUM, TE_SHIFT,                                                                         \
    a + b, (int32_t)((uint32_t)a + (uint32_t)b),                                                                       \
    "((%s) + (%s))", "(int32_t)((uint32_t)(%s) + (uint32_t)(%s))", 0, 0, "%s + %s", "%s + %s")                        \
  X(SUB, TC_BINARY, TA_NONE, TD_NUM, TE_NONE,                                                                          \
    a - b, (int32_t)((uint32_t)a - (uint32_t)b),                                                                       \
    "((%s) - (%s))", "(int32_t)((uint32_t)(%s) - (uint32_t)(%s))", 0, 0, "%s - %s", "%s - %s")                        \
  X(MUL, TC_BINARY, TA_NONE, TD_ANY, TE_SCALE,                                                                         \
    a * b, (int32_t)((uint32_t)a * (uint32_t)b),                                                                       \
    "((%s) * (%s))", "(int32_t)((uint32_t)(%s) * (uint32_t)(%s))", 0, 0, "%s * %s", "%s * %s")                        \
  X(FDIV, TC_BINARY, TA_NONE, TD_FLOAT, TE_NONE,                                                                       \
    a / b, 0,                                                                                                          \
    "((%s) / (%s))", 0, 0, 0, "%s / %s", "$P_div(%s, %s)")                                                            \
  /* MAX, MIN: NaN wins */                                                                                             \
  X(MAX, TC_BINARY, TA_NONE, TD_ANY, TE_LOWER,                                                                         \
    (isnan(a) || isnan(b)) ? NAN : (a > b ? a : b), a > b ? a : b,                                                     \
    "hp_fmax(%s, %s)", "({ int32_t a_ = %s, b_ = %s; a_ > b_ ? a_ : b_; })", 0, "hp_imax(%s, %s)",                    \
    "hk_fmax(%s, %s)", "$P_maxn(%s, %s)")                                                                              \
  X(MIN, TC_BINARY, TA_NONE, TD_ANY, TE_UPPER,                                                                         \
    (isnan(a) || isnan(b)) ? NAN : (a < b ? a : b), a < b ? a : b,                                                     \
    "hp_fmin(%s, %s)", "({ int32_t a_ = %s, b_ = %s; a_ < b_ ? a_ : b_; })", 0, "hp_imin(%s, %s)",                    \
    "hk_fmin(%s, %s)", "$P_minn(%s, %s)")                                                                              \
  X(CMPLT, TC_BINARY, TA_NONE, TD_NUM | TD_BOOL, TE_NONE,                                                              \
    a < b, a < b,                                                                                                      \
    "(int32_t)((%s) < (%s))", 0, 0, 0, "(%s < %s ? 1.0f : 0.0f)", 0)                                                  \
  X(CMPEQ, TC_BINARY, TA_NONE, TD_BOOL, TE_NONE,                                                                       \
    a == b, a == b,                                                                                                    \
    "(int32_t)((%s) == (%s))", 0, 0, 0, "(%s == %s ? 1.0f : 0.0f)", 0)                                                \
  X(CMPNE, TC_BINARY, TA_NONE, TD_BOOL, TE_NONE,                                                                       \
    a != b, a != b,                                                                                                    \
    "(int32_t)((%s) != (%s))", 0, 0, 0, "(%s != %s ? 1.0f : 0.0f)", 0)                                                \
  X(WHERE, TC_TERNARY, TA_NONE, TD_ANY, TE_NONE,                                                                       \
    0, 0,                                                                                                              \
    "((%s) ? (%s) : (%s))", 0, 0, 0, "(%s != 0.0f ? %s : %s)", 0)                                                     \
  /* MULADD(a, b, c) = a * b + c rounded once (fma); no pass splits or reassociates it */                            \
  X(MULADD, TC_TERNARY, TA_NONE, TD_FLOAT, TE_NONE,                                                                    \
    fmaf(a, b, c), 0,                                                                                                  \
    "fmaf(%s, %s, %s)", 0, "__fmaf_rn(%s, %s, %s)", 0, "__fmaf_rn(%s, %s, %s)", 0)                                    \
  X(REDUCE, TC_REDUCE, TA_REDUCE, TD_ANY, TE_NONE, 0, 0, 0, 0, 0, 0, 0, 0)                                            \
  X(GATHER, TC_GATHER, TA_GATHER, TD_ANY, TE_NONE, 0, 0, 0, 0, 0, 0, 0, 0)
/* clang-format on */

#endif
