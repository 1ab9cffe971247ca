/* cgen_map.c — elementwise chains on the CPU vector layer.
 * Needs: cgen_int.h, cgen_map_lut.c (a suffix through one byte as a table).
 * Gives: cgen_map, cgen_map_spec_init.
 *
 * y = f(inputs) point by point, f a list of ops on fp32 vectors.  The
 * domain is rows (outer dimensions) x cols; a task takes a range of the
 * flattened index (multiples of 64 elements, so of whole cache lines of y)
 * and walks it as row segments: full vectors, two at a time, then one
 * masked tail.  An input with `bcast` is one scalar per row, broadcast once
 * per segment.  y_u8: y stored as held int8 bytes (q8_hold.c), v + y_zo
 * clamped in the vector, a NaN as 0 (emit_u8_store).
 *
 * The math (2^t, e^x, 1/x, a / b, gelu, NaN-keeping max / min, sqrt) is
 * the vector layer's (cgen_emit.c; its accuracy in src/backend/c/README.md),
 * which keeps the reference's NaN, infinities and subnormal results. */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "backend/c/cgen_int.h"
#include "tiny/tiny_spell.h"

void cgen_map_spec_init(cgen_map_spec *s, int64_t cols) {
  memset(s, 0, sizeof *s);
  s->cols = cols;
  s->y_dtype = TINY_FP32;
  cgen_tuning_default(&s->tune);
}

/* Operands of map op kind k. */
static int arity(int k) { return k == CGEN_MAP_COPY || k == CGEN_MAP_ROUND ? 1 : tiny_op_arity((tiny_op)k); }

/* Whether kind k is a map op: COPY, ROUND, or a Tiny op with a vector form. */
static bool kind_ok(int k) {
  return k == CGEN_MAP_COPY || k == CGEN_MAP_ROUND || ((unsigned)k < TINY_OP_COUNT && tiny_op_vec((tiny_op)k));
}

/* The name of op's kind (the kernel's header comment, errors): the Tiny
 * op's in lower case, "copy", or "to_fp16" / "to_bf16". */
static const char *kind_name(const cgen_map_op *op, char *buf, size_t cap) {
  if (op->kind == CGEN_MAP_COPY) snprintf(buf, cap, "copy");
  else if (op->kind == CGEN_MAP_ROUND) snprintf(buf, cap, "to_%s", tiny_dtype_name(op->dtype));
  else snprintf(buf, cap, "%s", (unsigned)op->kind < TINY_OP_COUNT ? tiny_op_name((tiny_op)op->kind) : "?");
  for (char *p = buf; *p; p++) *p = (char)tolower((unsigned char)*p);
  return buf;
}

/* The C text of argument a for vector slot u ("a<k>_<u>", "v<k>_<u>", a constant). */
static void arg_text(char *buf, size_t cap, const cgen_map_arg *a, int u) {
  if (a->kind == 'i') snprintf(buf, cap, "a%d_%d", a->idx, u);
  else if (a->kind == 'v') snprintf(buf, cap, "v%d_%d", a->idx, u);
  else if (isnan(a->c)) snprintf(buf, cap, "$P_set1(NAN)");
  else if (isinf(a->c)) snprintf(buf, cap, "$P_set1(%sINFINITY)", a->c < 0 ? "-" : "");
  else snprintf(buf, cap, "$P_set1(%#.9gf)", (double)a->c);
}

/* Whether the chain has a 2^t (exp, exp2, gelu): its polynomial keeps the FMA
 * port busy, and a recip as vdivps, whose divider runs beside that port, then
 * costs less than the layer's Newton reciprocal, which adds uops to it (a
 * sigmoid 1 / (1 + 2^t): 5.0 against 6.5 ns a vector; a lone 1/x: 3.7
 * against 1.9; silu 1x256x56x56 on 2 threads 0.195 -> 0.178 ms). */
static bool fma_bound(const cgen_map_spec *s) {
  for (int j = 0; j < s->nops; j++)
    if (s->ops[j].kind == TINY_EXP || s->ops[j].kind == TINY_EXP2 || s->ops[j].kind == TINY_GELU) return true;
  return false;
}

/* Op j of s's chain for vector slot u: "$P_v v<j>_<u> = ...;". */
static void emit_op(cg_out *o, const cgen_map_spec *s, int j, int u, bool divps) {
  const cgen_map_op *op = &s->ops[j];
  char a[64], b[64];
  arg_text(a, sizeof a, &op->a, u);
  if (arity(op->kind) > 1) arg_text(b, sizeof b, &op->b, u);
  const char *x[2] = {a, b};
  cg_emit(o, "    $P_v v%d_%d = ", j, u);
  if (op->kind == CGEN_MAP_COPY) cg_emit(o, "%s;\n", a);
  else if (op->kind == CGEN_MAP_ROUND) cg_emit(o, "$P_r%s(%s);\n", op->dtype == TINY_FP16 ? "h" : "b", a);
  else if (op->kind == TINY_RECIP && divps) cg_emit(o, "$P_set1(1.0f) / %s;\n", a);
  else {
    ut_str t; /* the op table's vector text */
    ut_str_init(&t);
    tiny_op_spell(&t, tiny_op_vec((tiny_op)op->kind), x, arity(op->kind));
    if (t.oom) o->s->oom = true;
    cg_emit(o, "%s;\n", t.buf ? t.buf : "");
    ut_str_free(&t);
  }
}

/* The op whose value held bytes store (s->y_u8): the last, less the
 * roundings to bf16 / fp16 and copies that end the chain on the value
 * before them, which are the identity there: the values are integers x with
 * x + y_zo in [0, 255] (|x| <= 255: exact in bf16 and fp16), or a NaN,
 * stored as 0 either way.  (Rounding to bf16 went through memory a vector.) */
static int u8_value(const cgen_map_spec *s) {
  int j = s->nops - 1;
  while (j > 0 && (s->ops[j].kind == CGEN_MAP_ROUND || s->ops[j].kind == CGEN_MAP_COPY) && s->ops[j].a.kind == 'v' &&
         s->ops[j].a.idx == j - 1)
    j--;
  return j;
}

/* The store of value v of vector u (output offset off; n: the masked lane
 * count, NULL full) as held bytes (s->y_u8): v + zo clamped to [0, 255], a NaN to 0 (the
 * max with 0 takes its second operand where the first is a NaN), as u8.
 * The values are integers (the map's proven 8-bit output), so the
 * conversion is exact.  AVX-512: a truncating vpmovdb, one 16-byte store
 * (masked for a tail); AVX2: two saturating packs, 8 bytes; scalar: the
 * same clamp a lane at a time. */
static void emit_u8_store(cg_out *o, const cgen_map_spec *s, int v, int u, int off, const char *n) {
  if (o->isa->id == CGEN_ISA_AVX512) {
    cg_emit(o, "    { __m128i b_ = _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(_mm512_min_ps(_mm512_max_ps(_mm512_add_ps(v%d_%d, "
               "_mm512_set1_ps(%d.0f)), _mm512_setzero_ps()), _mm512_set1_ps(255.0f))));\n", v, u, s->y_zo);
    if (n) cg_emit(o, "      _mm_mask_storeu_epi8(y + i + %d, (__mmask16)((1u << (%s)) - 1u), b_); }\n", off, n);
    else cg_emit(o, "      _mm_storeu_si128((__m128i *)(y + i + %d), b_); }\n", off);
    return;
  }
  if (o->isa->id == CGEN_ISA_AVX2) {
    cg_emit(o, "    { __m256i d_ = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(_mm256_add_ps(v%d_%d, _mm256_set1_ps(%d.0f)), "
               "_mm256_setzero_ps()), _mm256_set1_ps(255.0f)));\n", v, u, s->y_zo);
    cg_emit(o, "      __m128i w_ = _mm_packus_epi32(_mm256_castsi256_si128(d_), _mm256_extracti128_si256(d_, 1));\n"
               "      __m128i b_ = _mm_packus_epi16(w_, w_);\n");
    if (n) cg_emit(o, "      uint8_t t_[16]; _mm_storeu_si128((__m128i *)t_, b_);\n      for (int l = 0; l < %s; l++) y[i + %d + l] = t_[l]; }\n", n, off);
    else cg_emit(o, "      _mm_storel_epi64((__m128i *)(y + i + %d), b_); }\n", off);
    return;
  }
  if (n) cg_emit(o, "    { float t_[%d]; $P_stn(t_, v%d_%d, %s);\n      for (int l = 0; l < %s; l++)", o->isa->w, v, u, n, n);
  else cg_emit(o, "    { float t_[%d]; $P_st(t_, v%d_%d);\n      for (int l = 0; l < %d; l++)", o->isa->w, v, u, o->isa->w);
  cg_emit(o, " { float q_ = t_[l] + %d.0f; y[i + %d + l] = (uint8_t)(q_ > 0.0f ? (q_ < 255.0f ? q_ : 255.0f) : 0.0f); }\n    }\n",
          s->y_zo, off);
}

/* One vector (slot u) of the body at y + i + off: loads, ops, store; n: the
 * masked lane count (NULL: full).  lut: the op whose later ops are the table
 * lt (cgen_map_lut.c), or -1. */
static void emit_vec(cg_out *o, const cgen_map_spec *s, int u, int off, const char *n, const map_lut *lut) {
  bool divps = fma_bound(s);
  for (int k = 0; k < s->nin; k++) {
    if (s->in[k].bcast) {
      cg_emit(o, "    $P_v a%d_%d = b%d;\n", k, u, k);
      continue;
    }
    const char *sx = cg_vsuffix(s->in[k].dtype);
    if (n) cg_emit(o, "    $P_v a%d_%d = $P_ldn%s(x%d + i + %d, %s);\n", k, u, sx, k, off, n);
    else cg_emit(o, "    $P_v a%d_%d = $P_ld%s(x%d + i + %d);\n", k, u, sx, k, off);
  }
  int last = lut->j >= 0 ? lut->j : s->y_u8 ? u8_value(s) : s->nops - 1;
  for (int j = 0; j <= last; j++) emit_op(o, s, j, u, divps);
  if (lut->j >= 0)
    cg_emit(o, "    $P_v v%d_%d = $P_lut(v%d_%d, lt, %#.9gf, %d);\n", s->nops - 1, u, lut->j, u, (double)lut->lo, lut->n);
  const char *sy = cg_vsuffix(s->y_dtype);
  if (s->y_u8) {
    emit_u8_store(o, s, lut->j >= 0 ? s->nops - 1 : last, u, off, n);
    return;
  }
  if (n) cg_emit(o, "    $P_stn%s(y + i + %d, v%d_%d, %s);\n", sy, off, s->nops - 1, u, n);
  else cg_emit(o, "    $P_st%s(y + i + %d, v%d_%d);\n", sy, off, s->nops - 1, u);
}

/* The run's table (lut->j >= 0): ops lut->j+1.. of s's chain on lo..lo+n-1
 * and NaN (the rest of the padding) into cx.lt, with the points' own code. */
static void emit_lut_table(cg_out *o, const cgen_map_spec *s, const map_lut *lut) {
  if (lut->j < 0) return;
  int w = o->isa->w;
  cg_emit(o, "  float lx[%d];\n  for (int k = 0; k < %d; k++) lx[k] = k < %d ? %#.9gf + (float)k : NAN;\n", MAP_LUT_PAD,
          MAP_LUT_PAD, lut->n, (double)lut->lo);
  cg_emit(o, "  for (int k = 0; k < %d; k += %d) {\n    $P_v v%d_0 = $P_ld(lx + k);\n", MAP_LUT_PAD, w, lut->j);
  for (int j = lut->j + 1; j < s->nops; j++) emit_op(o, s, j, 0, fma_bound(s));
  cg_emit(o, "    $P_st(cx.lt + k, v%d_0);\n  }\n", s->nops - 1);
}

/* Whether any of s's row length, outer sizes, strides or offsets is read at
 * run time: the task then reads them from the context (cx->cols,
 * cx->outer[d], cx->ost[k][d], cx->yost[d], cx->ioff[k], cx->yoff), which the
 * entry point fills. */
static bool map_rt(const cgen_map_spec *s) {
  bool rt = s->cols_expr || s->y_offset_expr;
  for (int k = 0; k < s->nin; k++) rt |= s->in[k].offset_expr != NULL;
  for (int d = 0; d < s->nouter; d++) {
    rt |= s->outer_expr[d] || s->y_ostride_expr[d];
    for (int k = 0; k < s->nin; k++) rt |= s->in[k].ostride_expr[d] != NULL;
  }
  return rt;
}

/* A size of the task's row walk as C text: the constant v, or (rt) the
 * context's field f. */
static const char *walk_size(char *buf, size_t cap, bool rt, const char *f, int64_t v) {
  if (rt) snprintf(buf, cap, "cx->%s", f);
  else snprintf(buf, cap, "%lldL", (long long)v);
  return buf;
}

static void emit_variant(cg_out *o, const cgen_map_spec *s, const map_lut *lut) {
  int w = o->isa->w;
  const char *yt = s->y_u8 ? "uint8_t" : cg_ctype(s->y_dtype);
  cg_emit_isa_helpers(o);
  if (lut->j >= 0) cg_map_lut_helper(o);
  /* one row segment of n points */
  cg_emit(o, "static $T void $P_seg(");
  for (int k = 0; k < s->nin; k++) cg_emit(o, "const %s *restrict x%d, ", cg_ctype(s->in[k].dtype), k);
  if (lut->j >= 0) cg_emit(o, "const float *restrict lt, ");
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
    emit_vec(o, s, 0, 0, NULL, lut);
    emit_vec(o, s, 1, w, NULL, lut);
    cg_emit(o, "  }\n");
  }
  cg_emit(o, "  for (; i + %d <= n; i += %d) {\n", w, w);
  emit_vec(o, s, 0, 0, NULL, lut);
  cg_emit(o, "  }\n");
  if (w > 1) {
    cg_emit(o, "  if (i < n) {\n    int m = (int)(n - i);\n");
    emit_vec(o, s, 0, 0, "m", lut);
    cg_emit(o, "  }\n");
  }
  cg_emit(o, "}\n");
  /* a task: flat points [a, b) as row segments */
  long cols = (long)s->cols;
  cg_emit(o, "static $T void $P_task(void *vc, int task, int tid) {\n  const $F_ctx *cx = (const $F_ctx *)vc;\n  (void)tid;\n");
  cg_emit(o, "  long a = (long)task * cx->chunk, b = a + cx->chunk;\n  if (b > cx->total) b = cx->total;\n");
  char sz[48], f[32];
  bool rt = map_rt(s);
  for (int k = 0; k < s->nin; k++) {
    snprintf(f, sizeof f, "ioff[%d]", k);
    cg_emit(o, "  const %s *p%d = (const %s *)cx->in[%d] + %s;\n", cg_ctype(s->in[k].dtype), k, cg_ctype(s->in[k].dtype), k,
            walk_size(sz, sizeof sz, rt, f, s->in[k].offset));
  }
  if (s->y_strided) cg_emit(o, "  %s *y = (%s *)cx->y + %s;\n", yt, yt, walk_size(sz, sizeof sz, rt, "yoff", s->y_offset));
  else cg_emit(o, "  %s *y = (%s *)cx->y;\n", yt, yt);
  if (s->nouter == 0) {
    cg_emit(o, "  $P_seg(");
    for (int k = 0; k < s->nin; k++) cg_emit(o, s->in[k].bcast ? "p%d, " : "p%d + a, ", k);
    if (lut->j >= 0) cg_emit(o, "cx->lt, ");
    cg_emit(o, "y + a, b - a);\n}\n");
    return;
  }
  if (rt) cg_emit(o, "  long r = a / cx->cols, j = a - r * cx->cols;\n");
  else cg_emit(o, "  long r = a / %ldL, j = a - r * %ldL;\n", cols, cols);
  walk_size(sz, sizeof sz, rt, "cols", cols);
  cg_emit(o, "  while (a < b) {\n    long n = %s - j < b - a ? %s - j : b - a;\n", sz, sz);
  /* the row's coordinates over the outer dimensions, innermost last */
  cg_emit(o, "    long q = r;\n");
  for (int d = s->nouter - 1; d >= 1; d--) {
    snprintf(f, sizeof f, "outer[%d]", d);
    walk_size(sz, sizeof sz, rt, f, s->outer[d]);
    cg_emit(o, "    long i%d = q %% %s; q /= %s;\n", d, sz, sz);
  }
  cg_emit(o, "    long i0 = q;\n");
  for (int k = 0; k < s->nin; k++) {
    cg_emit(o, "    long o%d = %s", k, s->in[k].bcast ? "0" : "j");
    for (int d = 0; d < s->nouter; d++) {
      snprintf(f, sizeof f, "ost[%d][%d]", k, d);
      if (s->in[k].ostride[d]) cg_emit(o, " + i%d * %s", d, walk_size(sz, sizeof sz, rt, f, s->in[k].ostride[d]));
    }
    cg_emit(o, ";\n");
  }
  if (s->y_strided) { /* a piece of y: its rows apart */
    cg_emit(o, "    long oy = j");
    for (int d = 0; d < s->nouter; d++) {
      snprintf(f, sizeof f, "yost[%d]", d);
      cg_emit(o, " + i%d * %s", d, walk_size(sz, sizeof sz, rt, f, s->y_ostride[d]));
    }
    cg_emit(o, ";\n");
  }
  cg_emit(o, "    $P_seg(");
  for (int k = 0; k < s->nin; k++) cg_emit(o, "p%d + o%d, ", k, k);
  if (lut->j >= 0) cg_emit(o, "cx->lt, ");
  cg_emit(o, s->y_strided ? "y + oy, n);\n" : "y + a, n);\n");
  cg_emit(o, "    a += n; r++; j = 0;\n  }\n}\n");
}

/* The row walk's sizes of this run into the context (map_rt), each an
 * expression or its constant; the point count their product unless
 * total_expr gives it. */
static void emit_walk_sizes(cg_out *o, const cgen_map_spec *s) {
  cg_emit(o, "  cx.cols = %s", s->cols_expr ? s->cols_expr : "");
  if (!s->cols_expr) cg_emit(o, "%lldL", (long long)s->cols);
  cg_emit(o, ";\n");
  for (int k = 0; k < s->nin; k++) {
    if (s->in[k].offset_expr) cg_emit(o, "  cx.ioff[%d] = %s;\n", k, s->in[k].offset_expr);
    else cg_emit(o, "  cx.ioff[%d] = %lldL;\n", k, (long long)s->in[k].offset);
  }
  if (s->y_strided && s->y_offset_expr) cg_emit(o, "  cx.yoff = %s;\n", s->y_offset_expr);
  else if (s->y_strided) cg_emit(o, "  cx.yoff = %lldL;\n", (long long)s->y_offset);
  for (int d = 0; d < s->nouter; d++) {
    if (s->outer_expr[d]) cg_emit(o, "  cx.outer[%d] = %s;\n", d, s->outer_expr[d]);
    else cg_emit(o, "  cx.outer[%d] = %lldL;\n", d, (long long)s->outer[d]);
    for (int k = 0; k < s->nin; k++) {
      if (s->in[k].ostride_expr[d]) cg_emit(o, "  cx.ost[%d][%d] = %s;\n", k, d, s->in[k].ostride_expr[d]);
      else cg_emit(o, "  cx.ost[%d][%d] = %lldL;\n", k, d, (long long)s->in[k].ostride[d]);
    }
    if (!s->y_strided) continue;
    if (s->y_ostride_expr[d]) cg_emit(o, "  cx.yost[%d] = %s;\n", d, s->y_ostride_expr[d]);
    else cg_emit(o, "  cx.yost[%d] = %lldL;\n", d, (long long)s->y_ostride[d]);
  }
  if (s->total_expr) return;
  cg_emit(o, "  cx.total = cx.cols");
  for (int d = 0; d < s->nouter; d++) cg_emit(o, " * cx.outer[%d]", d);
  cg_emit(o, ";\n");
}

static void emit_run(cg_out *o, const cgen_map_spec *s, int64_t total, const map_lut *lut) {
  cg_emit(o, "static $T int $P_run(hprt_pool *pool, const void *const *in, void *y) {\n  $F_ctx cx;\n");
  emit_lut_table(o, s, lut);
  if (s->total_expr) cg_emit(o, "  cx.in = in; cx.y = y; cx.total = %s;\n", s->total_expr);
  else if (map_rt(s)) cg_emit(o, "  cx.in = in; cx.y = y;\n");
  else cg_emit(o, "  cx.in = in; cx.y = y; cx.total = %lldL;\n", (long long)total);
  if (map_rt(s)) emit_walk_sizes(o, s);
  /* chunks of whole 64-element blocks, a few per thread (noisy cores) */
  cg_emit(o, "  long nt = pool ? hprt_pool_size(pool) * 4 : 1;\n");
  cg_emit(o, "  cx.chunk = (cx.total + nt - 1) / nt;\n  cx.chunk = (cx.chunk + 63) / 64 * 64;\n"
             "  int ntasks = (int)((cx.total + cx.chunk - 1) / cx.chunk);\n"
             "  hprt_pool_run(ntasks > 1 ? pool : NULL, ntasks, $P_task, &cx);\n  return 0;\n}\n");
  if (o->isa->id != CGEN_ISA_SCALAR) cg_emit(o, "#endif /* HPRT_X86 */\n");
}

static harp_status check(harp_error *e, const cgen_map_spec *s, int64_t *total) {
  if (s->cols < 1 || s->nouter < 0 || s->nouter > CGEN_MAP_MAX_OUTER)
    return ut_fail(e, HARP_E_INVALID_ARG, NULL, "cgen_map: bad domain");
  *total = s->cols;
  for (int d = 0; d < s->nouter; d++) {
    if (s->outer[d] < 1) return ut_fail(e, HARP_E_INVALID_ARG, NULL, "cgen_map: bad domain");
    if (*total > (INT64_C(1) << 40) / s->outer[d]) return ut_fail(e, HARP_E_LIMIT, NULL, "cgen_map: domain too large");
    *total *= s->outer[d];
  }
  if (s->nin < 0 || s->nin > CGEN_MAP_MAX_IN || s->nops < 1 || s->nops > CGEN_MAP_MAX_OPS)
    return ut_fail(e, HARP_E_INVALID_ARG, NULL, "cgen_map: bad input or op count");
  if (!cg_dtype_ok(s->y_dtype)) return ut_fail(e, HARP_E_UNSUPPORTED, NULL, "cgen_map: y must be fp32, fp16 or bf16");
  for (int k = 0; k < s->nin; k++) {
    if (!cg_dtype_ok(s->in[k].dtype)) return ut_fail(e, HARP_E_UNSUPPORTED, NULL, "cgen_map: inputs must be fp32, fp16 or bf16");
    if (s->in[k].offset < 0) return ut_fail(e, HARP_E_INVALID_ARG, NULL, "cgen_map: negative offset");
  }
  if (s->y_strided && s->y_offset < 0) return ut_fail(e, HARP_E_INVALID_ARG, NULL, "cgen_map: negative offset");
  if (s->y_u8 && (s->y_zo < 0 || s->y_zo > 255)) return ut_fail(e, HARP_E_INVALID_ARG, NULL, "cgen_map: byte zero point out of [0, 255]");
  for (int j = 0; j < s->nops; j++) {
    const cgen_map_op *op = &s->ops[j];
    if (!kind_ok(op->kind)) return ut_fail(e, HARP_E_INVALID_ARG, NULL, "cgen_map: bad op %d", j);
    if (op->kind == CGEN_MAP_ROUND && op->dtype != TINY_FP16 && op->dtype != TINY_BF16)
      return ut_fail(e, HARP_E_INVALID_ARG, NULL, "cgen_map: op %d rounds to fp16 or bf16 only", j);
    const cgen_map_arg *args[2] = {&op->a, &op->b};
    for (int q = 0; q < arity(op->kind); q++) {
      const cgen_map_arg *a = args[q];
      bool ok = (a->kind == 'i' && a->idx >= 0 && a->idx < s->nin) || (a->kind == 'v' && a->idx >= 0 && a->idx < j) ||
                a->kind == 'c';
      char nm[32];
      if (!ok) return ut_fail(e, HARP_E_INVALID_ARG, NULL, "cgen_map: op %d (%s) reads a bad argument", j, kind_name(op, nm, sizeof nm));
    }
  }
  return HARP_OK;
}

harp_status cgen_map(harp_error *e, const cgen_map_spec *s, const char *fn, ut_str *out) {
  if (!s || !out) return ut_fail(e, HARP_E_INVALID_ARG, NULL, "cgen_map: NULL argument");
  if (cg_check_name(e, fn)) return e->code;
  int64_t total = 0;
  if (check(e, s, &total)) return e->code;
  unsigned set = cg_isa_set(&s->tune);
  cg_out o = {.s = out, .F = fn, .bf16_cvt = s->tune.bf16_cvt && s->y_dtype == TINY_BF16 && (set >> CGEN_ISA_AVX512 & 1u)};
  cg_set_isa(&o, NULL);
  cg_emit_runtime(out);
  cg_emit(&o, "/* ---- %s: map %lld points (rows of %lld), %d inputs ->", fn, (long long)total, (long long)s->cols, s->nin);
  for (int j = 0; j < s->nops; j++) {
    char nm[32];
    cg_emit(&o, " %s", kind_name(&s->ops[j], nm, sizeof nm));
  }
  if (s->y_u8) cg_emit(&o, " -> u8 (+%d, held) ---- */\n", s->y_zo);
  else cg_emit(&o, " -> %s ---- */\n", tiny_dtype_name(s->y_dtype));
  cg_emit_scalar_conv(&o);
  map_lut lut;
  lut.j = cg_map_lut_find(s, &lut.lo, &lut.n);
  cg_emit(&o, "typedef struct { const void *const *in; void *y; long total, chunk");
  if (map_rt(s))
    cg_emit(&o, ", cols, outer[%d], ost[%d][%d], yost[%d], ioff[%d], yoff", CGEN_MAP_MAX_OUTER, CGEN_MAP_MAX_IN, CGEN_MAP_MAX_OUTER,
            CGEN_MAP_MAX_OUTER, CGEN_MAP_MAX_IN);
  if (lut.j >= 0) cg_emit(&o, "; float lt[%d]", MAP_LUT_PAD);
  cg_emit(&o, "; } $F_ctx;\n");
  for (int i = 0; i < CGEN_ISA_COUNT; i++) {
    if (!(set >> i & 1u)) continue;
    cg_set_isa(&o, cg_isa_get((cgen_isa)i));
    emit_variant(&o, s, &lut);
    emit_run(&o, s, total, &lut);
  }
  cg_emit_dispatch(&o, set, s->tune.force_isa, "hprt_pool *pool, const void *const *in, void *y", "pool, in, y");
  if (out->oom) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "cgen: out of memory");
  return HARP_OK;
}
