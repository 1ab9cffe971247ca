/* cgen_softmax.c — row softmax on the CPU vector layer.
 * Needs: cgen_int.h.  Gives: cgen_softmax, cgen_softmax_spec_init.
 *
 * y = exp(scale (x - max)) / sum, per dense row of `cols`, in three passes
 * over the row (the second and third hit L1 for rows up to ~8K floats):
 *   1. the row's max, four vector accumulators;
 *   2. e = 2^t, t = (x - max) * scale * log2(e), stored in fp32 (into y
 *      itself when y is fp32, else a per-thread row of scratch, so a half
 *      output is rounded once), summed;
 *   3. y = e * (1 / sum).
 * The exp pass prefetches the next row of the task.
 * 2^t is the vector layer's $P_exp2z (vreduceps + polynomial + vscalefps on
 * AVX-512): terms below 2^-126 flush to 0, which keeps subnormals (and their
 * microcode assists) out of the sums; NaN propagates, so a row holding NaN
 * or inf (max - max = NaN) comes out NaN like the reference's division chain.
 * Rows go to tasks in chunks; small problems stay on the calling thread.
 * A QDQ softmax (an int8 BERT's DQ -> Q -> DQ -> Softmax -> Q): pass 1 runs
 * x through the spec's prologue steps and keeps the codes in d, pass 2
 * reads d; pass 3 scales by ymul / sum and runs the epilogue steps (rint,
 * clamp) before the store. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "backend/c/cgen_int.h"

void cgen_softmax_spec_init(cgen_softmax_spec *s, int64_t rows, int64_t cols, tiny_dtype dt) {
  memset(s, 0, sizeof *s);
  s->rows = rows, s->cols = cols;
  s->x_dtype = s->y_dtype = dt;
  s->scale = 1.0f;
  s->ymul = 1.0f;
  cgen_tuning_default(&s->tune);
}

/* The steps n of list ep applied to vector `v` (cgen_emit's chain). */
static void emit_steps(cg_out *o, const cgen_epi *ep, int n) {
  for (int i = 0; i < n; i++) cg_emit_epi_common(o, &ep[i], i, "0", "v");
}

/* Pass 1 of a QDQ softmax (s->npro steps): the row's x through the prologue
 * into d (fp32) and its max into m0 / m1; C columns, full of them in whole
 * vectors, tail after. */
static void emit_pro_max(cg_out *o, const cgen_softmax_spec *s, long C, long full, int tail) {
  int w = o->isa->w;
  const char *xs = cg_vsuffix(s->x_dtype);
  cg_emit(o, "  $P_v m0 = $P_set1(-INFINITY), m1 = m0, m2 = m0, m3 = m0;\n  long j = 0;\n");
  cg_emit(o, "  for (; j + %d <= %ldL; j += %d) {\n    $P_v v = $P_ld%s(x + j);\n", w, C, w, xs);
  emit_steps(o, s->pro, s->npro);
  cg_emit(o, "    $P_st(d + j, v);\n    m0 = $P_max(m0, v);\n  }\n");
  if (tail) {
    cg_emit(o, "  {\n    $P_v v = $P_ldn%s(x + %ldL, %d);\n", xs, full, tail);
    emit_steps(o, s->pro, s->npro);
    cg_emit(o, "    $P_stn(d + %ldL, v, %d);\n    m1 = $P_max(m1, $P_keep(v, %d));\n  }\n", full, tail, tail);
  }
}

/* Pass 3 of a QDQ softmax: y = d * vi through s->epi (a quantize) into y. */
static void emit_quant_store(cg_out *o, const cgen_softmax_spec *s, long C, long full, int tail) {
  int w = o->isa->w;
  const char *ys = cg_vsuffix(s->y_dtype);
  cg_emit(o, "  for (j = 0; j + %d <= %ldL; j += %d) {\n    $P_v v = $P_ld(d + j) * vi;\n", w, C, w);
  emit_steps(o, s->epi, s->nepi);
  cg_emit(o, "    $P_st%s(y + j, v);\n  }\n", ys);
  if (tail) {
    cg_emit(o, "  {\n    $P_v v = $P_ldn(d + %ldL, %d) * vi;\n", full, tail);
    emit_steps(o, s->epi, s->nepi);
    cg_emit(o, "    $P_stn%s(y + %ldL, v, %d);\n  }\n", ys, full, tail);
  }
}

static void emit_variant(cg_out *o, const cgen_softmax_spec *s) {
  int w = o->isa->w;
  long C = (long)s->cols, full = C / w * w;
  int tail = (int)(C - full);
  const char *xt = cg_ctype(s->x_dtype), *yt = cg_ctype(s->y_dtype);
  const char *xs = cg_vsuffix(s->x_dtype), *ys = cg_vsuffix(s->y_dtype);
  bool y32 = s->y_dtype == TINY_FP32;
  cg_emit_isa_helpers(o);
  /* one row; d is y itself when y is fp32, so neither is restrict */
  cg_emit(o, "static $T void $P_row(const %s *restrict x, const %s *nx, %s *y, float *d) {\n", xt, xt, yt);
  cg_emit(o, "  (void)nx;\n");
  if (s->npro) emit_pro_max(o, s, C, full, tail);
  else {
    cg_emit(o, "  $P_v m0 = $P_set1(-INFINITY), m1 = m0, m2 = m0, m3 = m0;\n  long j = 0;\n");
    cg_emit(o, "  for (; j + %d <= %ldL; j += %d) {\n", 4 * w, C, 4 * w);
    for (int u = 0; u < 4; u++) cg_emit(o, "    m%d = $P_max(m%d, $P_ld%s(x + j + %d));\n", u, u, xs, u * w);
    cg_emit(o, "  }\n");
    /* leftover loops only where they run: GCC warns about loops it proves empty */
    if (C % (4 * w) >= w) cg_emit(o, "  for (; j + %d <= %ldL; j += %d) m0 = $P_max(m0, $P_ld%s(x + j));\n", w, C, w, xs);
    if (tail) cg_emit(o, "  m1 = $P_max(m1, $P_keep($P_ldn%s(x + %ldL, %d), %d));\n", xs, full, tail, tail);
  }
  cg_emit(o, "  $P_v vm = $P_set1($P_hmax($P_max($P_max(m0, m1), $P_max(m2, m3))));\n");
  cg_emit(o, "  $P_v vl = $P_set1(%#.9gf), s0 = $P_zero(), s1 = s0;\n", (double)s->scale * 1.4426950408889634);
  const char *src = s->npro ? "d" : "x", *ss = s->npro ? "" : xs; /* a prologue's values wait in d */
  cg_emit(o, "  for (j = 0; j + %d <= %ldL; j += %d) {\n", 2 * w, C, 2 * w);
  /* the next row's input, a line at a time, while the exp pass computes
   * (one core alone does not keep enough loads in flight: ~15% here) */
  int xsz = tiny_dtype_size(s->x_dtype), step = 2 * w * xsz;
  for (int b = 0; w > 1 && b < step; b += 64)
    cg_emit(o, "    __builtin_prefetch((const char *)(nx + j) + %d, 0, 3);\n", b);
  for (int u = 0; u < 2; u++)
    cg_emit(o, "    { $P_v e = $P_exp2z(($P_ld%s(%s + j + %d) - vm) * vl); $P_st(d + j + %d, e); s%d = s%d + e; }\n", ss, src,
            u * w, u * w, u, u);
  cg_emit(o, "  }\n");
  if (C % (2 * w) >= w)
    cg_emit(o, "  for (; j + %d <= %ldL; j += %d) { $P_v e = $P_exp2z(($P_ld%s(%s + j) - vm) * vl); $P_st(d + j, e); s0 = s0 + e; }\n",
            w, C, w, ss, src);
  if (tail) /* the lanes past the row are not summed: read back what was stored */
    cg_emit(o, "  $P_stn(d + %ldL, $P_exp2z(($P_ldn%s(%s + %ldL, %d) - vm) * vl), %d);\n  s1 = s1 + $P_ldn(d + %ldL, %d);\n",
            full, ss, src, full, tail, tail, full, tail);
  if (s->ymul == 1.0f) cg_emit(o, "  $P_v vi = $P_set1(1.0f / $P_hsum(s0 + s1));\n");
  else cg_emit(o, "  $P_v vi = $P_set1(%#.9gf / $P_hsum(s0 + s1));\n", (double)s->ymul); /* e * ymul / sum */
  if (s->nepi) emit_quant_store(o, s, C, full, tail);
  else {
    cg_emit(o, "  for (j = 0; j + %d <= %ldL; j += %d) $P_st%s(y + j, $P_ld(d + j) * vi);\n", w, C, w, ys);
    if (tail) cg_emit(o, "  $P_stn%s(y + %ldL, $P_ldn(d + %ldL, %d) * vi, %d);\n", ys, full, full, tail, tail);
  }
  cg_emit(o, "}\n");
  /* a task: a chunk of rows */
  cg_emit(o, "static $T void $P_task(void *vc, int task, int tid) {\n  const $F_ctx *cx = (const $F_ctx *)vc;\n");
  cg_emit(o, "  long r0 = cx->rows * task / cx->ntasks, r1 = cx->rows * (task + 1) / cx->ntasks;\n");
  cg_emit(o, "  const %s *x = (const %s *)cx->x;\n  %s *y = (%s *)cx->y;\n", xt, xt, yt, yt);
  if (y32) cg_emit(o, "  (void)tid;\n  for (long r = r0; r < r1; r++) $P_row(x + r * %ldL, x + (r + 1 < r1 ? r + 1 : r) * %ldL, y + r * %ldL, y + r * %ldL);\n", C, C, C, C);
  else cg_emit(o, "  float *d = (float *)cx->sc.thr[tid];\n  for (long r = r0; r < r1; r++) $P_row(x + r * %ldL, x + (r + 1 < r1 ? r + 1 : r) * %ldL, y + r * %ldL, d);\n", C, C, C);
  cg_emit(o, "}\n");
  cg_emit(o, "static $T int $P_run(hprt_pool *pool, const void *x, void *y) {\n  $F_ctx cx;\n");
  /* below ~64K elements a wake-up of the pool costs more than it saves */
  if (s->rows_expr) { /* the same decisions, at run time */
    cg_emit(o, "  cx.x = x; cx.y = y; cx.rows = %s;\n", s->rows_expr);
    cg_emit(o, "  cx.ntasks = cx.rows * %ldL < 65536 || cx.rows == 1 ? 1 : hprt_pool_size(pool) * 4;\n", C);
    cg_emit(o, "  if (cx.ntasks > (cx.rows < 1024 ? cx.rows : 1024)) cx.ntasks = (int)(cx.rows < 1024 ? cx.rows : 1024);\n");
  } else {
    cg_emit(o, "  cx.x = x; cx.y = y; cx.rows = %ldL;\n", (long)s->rows);
    if (s->rows * s->cols < 65536 || s->rows == 1) cg_emit(o, "  cx.ntasks = 1;\n");
    else
      cg_emit(o, "  cx.ntasks = hprt_pool_size(pool) * 4;\n  if (cx.ntasks > %ld) cx.ntasks = %ld;\n",
              (long)(s->rows < 1024 ? s->rows : 1024), (long)(s->rows < 1024 ? s->rows : 1024));
  }
  cg_emit(o, "  if (hprt_scratch_get(pool, 0, %ldUL, &cx.sc)) return -1;\n", y32 ? 0L : C * 4);
  cg_emit(o, "  hprt_pool_run(cx.ntasks > 1 ? pool : NULL, cx.ntasks, $P_task, &cx);\n");
  cg_emit(o, "  hprt_scratch_put(&cx.sc);\n  return 0;\n}\n");
  if (o->isa->id != CGEN_ISA_SCALAR) cg_emit(o, "#endif /* HPRT_X86 */\n");
}

/* Whether steps ep[0..n) are ones with constants only (no tensor read). */
static bool steps_ok(const cgen_epi *ep, int n) {
  if (n < 0 || n > CGEN_MAX_EPI) return false;
  for (int i = 0; i < n; i++)
    if (ep[i].kind == CGEN_EPI_BIAS_M || ep[i].kind == CGEN_EPI_BIAS_N || ep[i].kind == CGEN_EPI_RESIDUAL ||
        (unsigned)ep[i].kind >= CGEN_EPI_COUNT)
      return false;
  return true;
}

harp_status cgen_softmax(harp_error *e, const cgen_softmax_spec *s, const char *fn, ut_str *out) {
  if (!s || !out) return ut_fail(e, HARP_E_INVALID_ARG, NULL, "cgen_softmax: NULL argument");
  if (cg_check_name(e, fn)) return e->code;
  if (s->rows < 1 || s->cols < 1) return ut_fail(e, HARP_E_INVALID_ARG, NULL, "cgen_softmax: sizes must be >= 1");
  if (s->cols >= (1L << 24) || s->rows >= (1L << 40) / s->cols)
    return ut_fail(e, HARP_E_LIMIT, NULL, "cgen_softmax: sizes beyond what the kernel handles");
  if (!cg_dtype_ok(s->x_dtype) || !cg_dtype_ok(s->y_dtype))
    return ut_fail(e, HARP_E_UNSUPPORTED, NULL, "cgen_softmax: dtypes must be fp32, fp16 or bf16");
  if (!isfinite(s->scale) || !(s->scale > 0))
    return ut_fail(e, HARP_E_INVALID_ARG, NULL, "cgen_softmax: scale must be finite and > 0");
  if (!isfinite(s->ymul) || !(s->ymul > 0))
    return ut_fail(e, HARP_E_INVALID_ARG, NULL, "cgen_softmax: ymul must be finite and > 0");
  if (!steps_ok(s->pro, s->npro) || !steps_ok(s->epi, s->nepi))
    return ut_fail(e, HARP_E_UNSUPPORTED, NULL, "cgen_softmax: QDQ steps must be constants' steps, at most %d", CGEN_MAX_EPI);
  unsigned set = cg_isa_set(&s->tune);
  cg_out o = {.s = out, .F = fn};
  cg_set_isa(&o, NULL);
  cg_emit_runtime(out);
  cg_emit(&o, "/* ---- %s: softmax %s%ld rows x %ld, %s -> %s, scale %.9g ---- */\n", fn, s->rows_expr ? "run-time " : "", (long)s->rows, (long)s->cols,
          tiny_dtype_name(s->x_dtype), tiny_dtype_name(s->y_dtype), (double)s->scale);
  cg_emit_scalar_conv(&o);
  cg_emit(&o, "typedef struct { const void *x; void *y; long rows; int ntasks; hprt_scratch sc; } $F_ctx;\n");
  for (int i = 0; i < CGEN_ISA_COUNT; i++) {
    if (!(set >> i & 1u)) continue;
    cg_set_isa(&o, cg_isa_get((cgen_isa)i));
    emit_variant(&o, s);
  }
  cg_emit_dispatch(&o, set, s->tune.force_isa, "hprt_pool *pool, const void *x, void *y", "pool, x, y");
  if (out->oom) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "cgen: out of memory");
  return HARP_OK;
}
