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

/* A row's length as the C prints it: constants ("33L", "32L", "1"), or, a
 * ShapeSet object's row length read at run time (s->cols_expr), the row
 * function's C and its locals full and tail; has_tail: whether a tail block
 * is printed (a constant tail, or any where a vector holds more than one). */
typedef struct {
  char C[32], full[32], tail[32];
  bool rt, has_tail;
} sm_len;

static void len_init(sm_len *L, const cgen_softmax_spec *s, int w) {
  L->rt = s->cols_expr != NULL;
  long C = (long)s->cols, full = C / w * w;
  if (L->rt) {
    snprintf(L->C, sizeof L->C, "C"), snprintf(L->full, sizeof L->full, "full"), snprintf(L->tail, sizeof L->tail, "tail");
    L->has_tail = w > 1;
    return;
  }
  snprintf(L->C, sizeof L->C, "%ldL", C), snprintf(L->full, sizeof L->full, "%ldL", full);
  snprintf(L->tail, sizeof L->tail, "%d", (int)(C - full));
  L->has_tail = C != full;
}

/* Pass 1 of a QDQ softmax (s->npro steps): the row's x through the prologue
 * into d (fp32) and its max into m0 / m1; L's columns, full of them in whole
 * vectors, the tail after. */
static void emit_pro_max(cg_out *o, const cgen_softmax_spec *s, const sm_len *L) {
  int w = o->isa->w;
  const char *xs = cg_vsuffix(s->x_dtype), *t = L->tail;
  cg_emit(o, "  $P_v m0 = $P_set1(-INFINITY), m1 = m0, m2 = m0, m3 = m0;\n  long j = 0;\n");
  cg_emit(o, "  for (; j + %d <= %s; j += %d) {\n    $P_v v = $P_ld%s(x + j);\n", w, L->C, w, xs);
  emit_steps(o, s->pro, s->npro);
  cg_emit(o, "    $P_st(d + j, v);\n    m0 = $P_max(m0, v);\n  }\n");
  if (L->has_tail) {
    cg_emit(o, "  %s{\n    $P_v v = $P_ldn%s(x + %s, %s);\n", L->rt ? "if (tail) " : "", xs, L->full, t);
    emit_steps(o, s->pro, s->npro);
    cg_emit(o, "    $P_stn(d + %s, v, %s);\n    m1 = $P_max(m1, $P_keep(v, %s));\n  }\n", L->full, t, t);
  }
}

/* Pass 3 of a QDQ softmax: y = d * vi through s->epi (a quantize) into y. */
static void emit_quant_store(cg_out *o, const cgen_softmax_spec *s, const sm_len *L) {
  int w = o->isa->w;
  const char *ys = cg_vsuffix(s->y_dtype);
  cg_emit(o, "  for (j = 0; j + %d <= %s; j += %d) {\n    $P_v v = $P_ld(d + j) * vi;\n", w, L->C, w);
  emit_steps(o, s->epi, s->nepi);
  cg_emit(o, "    $P_st%s(y + j, v);\n  }\n", ys);
  if (L->has_tail) {
    cg_emit(o, "  %s{\n    $P_v v = $P_ldn(d + %s, %s) * vi;\n", L->rt ? "if (tail) " : "", L->full, L->tail);
    emit_steps(o, s->epi, s->nepi);
    cg_emit(o, "    $P_stn%s(y + %s, v, %s);\n  }\n", ys, L->full, L->tail);
  }
}

/* Pass 1 without a prologue: the row's max into m0..m3 (L's columns). */
static void emit_max(cg_out *o, const cgen_softmax_spec *s, const sm_len *L) {
  int w = o->isa->w;
  long C = (long)s->cols;
  const char *xs = cg_vsuffix(s->x_dtype);
  cg_emit(o, "  $P_v m0 = $P_set1(-INFINITY), m1 = m0, m2 = m0, m3 = m0;\n  long j = 0;\n");
  cg_emit(o, "  for (; j + %d <= %s; j += %d) {\n", 4 * w, L->C, 4 * w);
  for (int u = 0; u < 4; u++) cg_emit(o, "    m%d = $P_max(m%d, $P_ld%s(x + j + %d));\n", u, u, xs, u * w);
  cg_emit(o, "  }\n");
  /* leftover loops only where they run: GCC warns about loops it proves empty */
  if (L->rt || C % (4 * w) >= w) cg_emit(o, "  for (; j + %d <= %s; j += %d) m0 = $P_max(m0, $P_ld%s(x + j));\n", w, L->C, w, xs);
  if (L->has_tail)
    cg_emit(o, "  %sm1 = $P_max(m1, $P_keep($P_ldn%s(x + %s, %s), %s));\n", L->rt ? "if (tail) " : "", xs, L->full, L->tail,
            L->tail);
}

/* Pass 2: e = 2^((x - max) * scale * log2(e)) into d, summed into s0 + s1;
 * the next row (nx) prefetched. */
static void emit_exp(cg_out *o, const cgen_softmax_spec *s, const sm_len *L) {
  int w = o->isa->w;
  long C = (long)s->cols;
  const char *xs = cg_vsuffix(s->x_dtype);
  const char *src = s->npro ? "d" : "x", *ss = s->npro ? "" : xs; /* a prologue's values wait in d */
  cg_emit(o, "  for (j = 0; j + %d <= %s; j += %d) {\n", 2 * w, L->C, 2 * w);
  /* the next row's input, a line at a time, while the exp pass computes
   * (one core alone does not keep enough loads in flight: ~15% here) */
  int xsz = tiny_dtype_size(s->x_dtype), step = 2 * w * xsz;
  for (int b = 0; w > 1 && b < step; b += 64)
    cg_emit(o, "    __builtin_prefetch((const char *)(nx + j) + %d, 0, 3);\n", b);
  for (int u = 0; u < 2; u++)
    cg_emit(o, "    { $P_v e = $P_exp2z(($P_ld%s(%s + j + %d) - vm) * vl); $P_st(d + j + %d, e); s%d = s%d + e; }\n", ss, src,
            u * w, u * w, u, u);
  cg_emit(o, "  }\n");
  if (L->rt || C % (2 * w) >= w)
    cg_emit(o, "  for (; j + %d <= %s; j += %d) { $P_v e = $P_exp2z(($P_ld%s(%s + j) - vm) * vl); $P_st(d + j, e); s0 = s0 + e; }\n",
            w, L->C, w, ss, src);
  if (L->has_tail) /* the lanes past the row are not summed: read back what was stored */
    cg_emit(o, "  %s$P_stn(d + %s, $P_exp2z(($P_ldn%s(%s + %s, %s) - vm) * vl), %s);\n  %ss1 = s1 + $P_ldn(d + %s, %s);\n%s",
            L->rt ? "if (tail) {\n    " : "", L->full, ss, src, L->full, L->tail, L->tail, L->rt ? "  " : "", L->full, L->tail,
            L->rt ? "  }\n" : "");
}

/* The task (a chunk of rows) and the entry point $P_run of one variant. */
static void emit_task_run(cg_out *o, const cgen_softmax_spec *s, const sm_len *L) {
  long C = (long)s->cols;
  const char *xt = cg_ctype(s->x_dtype), *yt = cg_ctype(s->y_dtype);
  bool y32 = s->y_dtype == TINY_FP32;
  cg_emit(o, "static $T void $P_task(void *vc, int task, int tid) {\n  const $F_ctx *cx = (const $F_ctx *)vc;\n");
  cg_emit(o, "  long r0 = cx->rows * task / cx->ntasks, r1 = cx->rows * (task + 1) / cx->ntasks;\n");
  cg_emit(o, "  const %s *x = (const %s *)cx->x;\n  %s *y = (%s *)cx->y;\n", xt, xt, yt, yt);
  if (L->rt) cg_emit(o, "  long C = cx->cols;\n");
  const char *Cs = L->C, *arg = L->rt ? ", C" : "";
  if (y32) cg_emit(o, "  (void)tid;\n  for (long r = r0; r < r1; r++) $P_row(x + r * %s, x + (r + 1 < r1 ? r + 1 : r) * %s, y + r * %s, y + r * %s%s);\n", Cs, Cs, Cs, Cs, arg);
  else cg_emit(o, "  float *d = (float *)cx->sc.thr[tid];\n  for (long r = r0; r < r1; r++) $P_row(x + r * %s, x + (r + 1 < r1 ? r + 1 : r) * %s, y + r * %s, d%s);\n", Cs, Cs, Cs, arg);
  cg_emit(o, "}\n");
  cg_emit(o, "static $T int $P_run(hprt_pool *pool, const void *x, void *y) {\n  $F_ctx cx;\n");
  /* below ~64K elements a wake-up of the pool costs more than it saves */
  if (s->rows_expr || L->rt) { /* the same decisions, at run time */
    char rows[32], cols[32];
    snprintf(rows, sizeof rows, "%ldL", (long)s->rows);
    snprintf(cols, sizeof cols, L->rt ? "cx.cols" : "%ldL", C);
    cg_emit(o, "  cx.x = x; cx.y = y; cx.rows = %s;\n", s->rows_expr ? s->rows_expr : rows);
    if (L->rt) cg_emit(o, "  cx.cols = %s;\n  if (cx.cols < 1 || cx.cols > %ldL) return -1;\n", s->cols_expr, (long)s->cols_hi);
    cg_emit(o, "  cx.ntasks = cx.rows * %s < 65536 || cx.rows == 1 ? 1 : hprt_pool_size(pool) * 4;\n", cols);
    cg_emit(o, "  if (cx.ntasks > (cx.rows < 1024 ? cx.rows : 1024)) cx.ntasks = (int)(cx.rows < 1024 ? cx.rows : 1024);\n");
  } else {
    cg_emit(o, "  cx.x = x; cx.y = y; cx.rows = %ldL;\n", (long)s->rows);
    if (s->rows * s->cols < 65536 || s->rows == 1) cg_emit(o, "  cx.ntasks = 1;\n");
    else
      cg_emit(o, "  cx.ntasks = hprt_pool_size(pool) * 4;\n  if (cx.ntasks > %ld) cx.ntasks = %ld;\n",
              (long)(s->rows < 1024 ? s->rows : 1024), (long)(s->rows < 1024 ? s->rows : 1024));
  }
  /* the scratch: a row of fp32 per thread, for the longest row (cols_hi) where it is read at run time */
  cg_emit(o, "  if (hprt_scratch_get(pool, 0, %ldUL, &cx.sc)) return -1;\n", y32 ? 0L : (L->rt ? (long)s->cols_hi : C) * 4);
  cg_emit(o, "  hprt_pool_run(cx.ntasks > 1 ? pool : NULL, cx.ntasks, $P_task, &cx);\n");
  cg_emit(o, "  hprt_scratch_put(&cx.sc);\n  return 0;\n}\n");
}

/* One ISA's variant of the kernel: the row function, its task and $P_run. */
static void emit_variant(cg_out *o, const cgen_softmax_spec *s) {
  int w = o->isa->w;
  sm_len L;
  len_init(&L, s, w);
  const char *xt = cg_ctype(s->x_dtype), *yt = cg_ctype(s->y_dtype);
  const char *ys = cg_vsuffix(s->y_dtype);
  cg_emit_isa_helpers(o);
  /* one row; d is y itself when y is fp32, so neither is restrict */
  cg_emit(o, "static $T void $P_row(const %s *restrict x, const %s *nx, %s *y, float *d%s) {\n", xt, xt, yt, L.rt ? ", long C" : "");
  cg_emit(o, "  (void)nx;\n");
  if (L.rt) cg_emit(o, "  long full = C / %d * %d;\n  int tail = (int)(C - full);\n  (void)full, (void)tail;\n", w, w);
  if (s->npro) emit_pro_max(o, s, &L);
  else emit_max(o, s, &L);
  cg_emit(o, "  $P_v vm = $P_set1($P_hmax($P_max($P_max(m0, m1), $P_max(m2, m3))));\n");
  cg_emit(o, "  $P_v vl = $P_set1(%#.9gf), s0 = $P_zero(), s1 = s0;\n", (double)s->scale * 1.4426950408889634);
  emit_exp(o, s, &L);
  if (s->ymul == 1.0f) cg_emit(o, "  $P_v vi = $P_set1(1.0f / $P_hsum(s0 + s1));\n");
  else cg_emit(o, "  $P_v vi = $P_set1(%#.9gf / $P_hsum(s0 + s1));\n", (double)s->ymul); /* e * ymul / sum */
  if (s->nepi) emit_quant_store(o, s, &L);
  else {
    cg_emit(o, "  for (j = 0; j + %d <= %s; j += %d) $P_st%s(y + j, $P_ld(d + j) * vi);\n", w, L.C, w, ys);
    if (L.has_tail)
      cg_emit(o, "  %s$P_stn%s(y + %s, $P_ldn(d + %s, %s) * vi, %s);\n", L.rt ? "if (tail) " : "", ys, L.full, L.full, L.tail,
              L.tail);
  }
  cg_emit(o, "}\n");
  emit_task_run(o, s, &L);
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
  if (s->cols_expr && s->cols_hi < s->cols)
    return ut_fail(e, HARP_E_INVALID_ARG, NULL, "cgen_softmax: a row length read at run time needs cols_hi >= cols");
  int64_t cmax = s->cols_expr ? s->cols_hi : s->cols;
  if (cmax >= (1L << 24) || s->rows >= (1L << 40) / cmax)
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
  cg_emit(&o, "typedef struct { const void *x; void *y; long rows%s; int ntasks; hprt_scratch sc; } $F_ctx;\n",
          s->cols_expr ? ", cols" : "");
  for (int i = 0; i < CGEN_ISA_COUNT; i++) {
    if (!(set >> i & 1u)) continue;
    cg_set_isa(&o, cg_isa_get((cgen_isa)i));
    emit_variant(&o, s);
  }
  cg_emit_dispatch(&o, set, s->tune.force_isa, "hprt_pool *pool, const void *x, void *y", "pool, x, y");
  if (out->oom) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "cgen: out of memory");
  return HARP_OK;
}
