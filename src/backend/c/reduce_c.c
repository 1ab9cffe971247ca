/* reduce_c.c — the CPU's row reduction for ShapeSet objects: a sum or max
 * over the innermost contiguous axes of its input (a global average pool's
 * mean over H, W), then the kernel layer's steps with constants, each row's
 * length and the row count read at run time (docs/architecture.md, "One
 * object per ShapeSet").
 * Needs: the kernel layer's reduction reading (ct_read_reduce with its
 * epilogue), rc_syms.c's run-time sizes.  Gives: cc_emit_reduce,
 * cc_epi_scalar (also contract_q8.c's).
 *
 * Ordinary compiles (no ShapeSet symbols) decline quietly: their reductions
 * stay on the loop nest, whose C is unchanged.  So does a reduction whose
 * sizes are all constants in this object, one whose rows are not dense, or
 * whose input or output is not fp32. */
#include <math.h>
#include <stdio.h>

#include "contract_c.h"

bool cc_epi_scalar(ut_str *o, const ct_epi *ep) {
  switch (ep->kind) {
  case CT_EPI_RELU: ut_str_puts(o, "    v = 0.0f > v ? 0.0f : v;\n"); return true; /* NaN, -0 pass, as vmaxps(0, v) */
  case CT_EPI_RINT: ut_str_puts(o, "    v = hp_rint(v);\n"); return true;
  case CT_EPI_DIV: ut_str_printf(o, "    v = v / %#.9gf;\n", (double)ep->scale); return true;
  case CT_EPI_ROUND: ut_str_printf(o, "    v = hp_r%s(v);\n", ep->dtype == TINY_FP16 ? "h" : "b"); return true;
  case CT_EPI_SCALE:
    if (ep->scale != 1.0f) ut_str_printf(o, "    v = v * %#.9gf;\n", (double)ep->scale);
    if (ep->shift != 0.0f) ut_str_printf(o, "    v = v + %#.9gf;\n", (double)ep->shift);
    return true;
  case CT_EPI_CLAMP:
    if (ep->lo != -INFINITY) ut_str_printf(o, "    v = %#.9gf > v ? %#.9gf : v;\n", (double)ep->lo, (double)ep->lo);
    if (ep->hi != INFINITY) ut_str_printf(o, "    v = %#.9gf < v ? %#.9gf : v;\n", (double)ep->hi, (double)ep->hi);
    return true;
  default: return false;
  }
}

/* The steps after the reduction (r->div_count, r->epi) on `v`, one line
 * each; false when one is a step this kernel does not print. */
static bool print_steps(ut_str *o, const ct_reduce *r) {
  if (r->div_count) ut_str_puts(o, "    v = v / (float)cols;\n");
  for (int i = 0; i < r->nepi; i++)
    if (!cc_epi_scalar(o, &r->epi[i])) return false;
  return true;
}

/* The row length and row count of reduction rd of kernel r as run-time
 * expressions (cols from the input's innermost dims, rows from the
 * output's); false when neither depends on a symbol or one does not match. */
static bool row_exprs(const rc_ctx *c, int r, const ct_reduce *rd, char *cols, char *rows, size_t cap) {
  const tiny_shape *xs = rc_slot_shape(c, r, rd->in.slot), *ys = rc_slot_shape(c, r, rd->out.slot);
  if (!xs || !ys) return false;
  bool cx = rc_stride_expr(c, xs, rd->red, cols, cap), rx = rc_size_expr(c, ys, 0, ys->rank, rd->outer, rows, cap);
  if (!cx) snprintf(cols, cap, "%lldL", (long long)rd->red);
  if (!rx) snprintf(rows, cap, "%lldL", (long long)rd->outer);
  return cx || rx;
}

harp_status cc_emit_reduce(rc_ctx *c, int r, const char *fn, ut_str *out, const ct_reduce *rd, bool *handled,
                           const char **why) {
  *why = NULL; /* a quiet decline: the loop nest, as before */
  bool sum = rd->op == TINY_RSUM, dense = rd->s_red == 1 && rd->inner == 1 && (rd->outer == 1 || rd->s_outer == rd->red);
  if (!c->ngen_syms || !(sum || rd->op == TINY_RMAX) || rd->has_init || !dense || rd->red < 2 || rd->in.offset ||
      rd->in.dtype != TINY_FP32 || rd->out.dtype != TINY_FP32)
    return HARP_OK;
  char cols[160], rows[160];
  if (!row_exprs(c, r, rd, cols, rows, sizeof cols)) return HARP_OK;
  ut_str steps;
  ut_str_init(&steps);
  if (!print_steps(&steps, rd)) {
    ut_str_free(&steps);
    return HARP_OK;
  }
  ut_str_printf(out,
                "/* a row %s over run-time rows (ShapeSet) */\n"
                "HP_NOTRAP static int %s(hprt_pool *pool, void *const *bufs) {\n"
                "  (void)pool;\n"
                "  const float *restrict x = bufs[%d];\n  float *restrict y = bufs[%d];\n"
                "  const long cols = %s, rows = %s;\n"
                "  for (long i = 0; i < rows; i++) {\n"
                "    const float *restrict p = x + i * cols;\n"
                "    float v = %s;\n"
                "    #pragma omp simd reduction(%s:v)\n"
                "    for (long j = 0; j < cols; j++) v = %s;\n",
                sum ? "sum" : "max", fn, rd->in.slot, rd->out.slot, cols, rows, sum ? "0.0f" : "-INFINITY",
                sum ? "+" : "hp_max", sum ? "v + p[j]" : "hp_fmax(v, p[j])");
  ut_str_printf(out, "%s    y[i] = v;\n  }\n  return 0;\n}\n\n", steps.buf ? steps.buf : ""); /* no steps: no buffer */
  ut_str_free(&steps);
  *handled = true;
  return HARP_OK;
}
