/* contract_q8pool.c — a QDQ model's max pool on the bytes int8 kernels
 * hold (q8_hold.c): DQ -> MaxPool -> Q, where the DQ is the requantizing
 * conv before it (its epilogue ends in the DQ's multiplication by s: the
 * conv's fact says ys = s) and the Q divides by that same s, rounds and
 * clamps back to the same bytes.  x -> s (x - z) is increasing (s > 0), so
 * the max of the dequantized window is the dequantized max byte, and the
 * Q of s k (k an integer of [-255, 255], s a normal float) is k again:
 * the output's bytes are the window's largest input byte, bit for bit the
 * fp32 kernel's.  onnxruntime's quantizer gives a max pool's Q the scale
 * and zero point of its input's; where they differ (or the padding is not
 * -inf, or the pool sums) the pool stays on the fp32 template, and the
 * conv before it writes its dequantized floats as before.
 * Needs: contract_c.h (the facts of q8_hold.c, cc_q8_int_steps,
 * cc_q8_whole), the kernel layer's ct_pool.  Gives: cc_emit_q8pool. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#include "contract_c.h"
#include "harp/knobs.h"

/* The padded row the windows read: the largest column read + 1, rounded to 64. */
#define QP_MAX_ROW 65536
/* The bytes of a chunk of window-row maxima (qp_kernel): in L1 with the input rows. */
#define QP_CHUNK 16384

/* Whether pl's steps after the max are a QuantizeLinear that maps a byte b
 * (zero point *xz, dequantized by its scale *s) to byte b again: x / s,
 * rint, then integer steps (q8_int_steps: the zero point added, a clamp to
 * 256 values, the zero point taken off, a rounding exact on them) whose
 * range starts at -xz; the output's bytes then have zero point *zo. */
static bool qp_requant(const ct_pool *pl, float *s, int *xz, int *zo) {
  double lo, hi, off;
  if (pl->nepi < 2 || pl->epi[0].kind != CT_EPI_DIV || pl->epi[1].kind != CT_EPI_RINT) return false;
  if (cc_q8_int_steps(pl->epi, 2, pl->nepi, &lo, &hi, &off) != pl->nepi) return false;
  *s = pl->epi[0].scale; /* normal, and s * 255 finite: s k / s rounds back to k */
  if (!(*s >= 1e-30f && *s <= 1e30f)) return false;
  if (!(isfinite(lo) && hi - lo == 255 && lo <= 0 && lo >= -255 && lo + off <= 0 && lo + off >= -255)) return false;
  *xz = (int)-lo, *zo = (int)-(lo + off);
  return true;
}

/* <fn>_pool(pool, x, y): the max pool of pl on bytes, a task per run of
 * planes.  Per plane, in chunks of ch output rows (the chunk's rows buffer
 * in L1): first each output row's max of its window's rows into its own
 * row of the buffer (padded with zeros: no byte is below the -inf
 * padding's), then each output the max of its window's columns from the
 * buffer (plain loops: the compiler vectorizes them, the strided columns
 * with byte permutes).  The two passes apart: the columns' loads never
 * straddle the rows' recent stores (a row at a time, they waited on the
 * stores' forwarding: half the pool's time in ResNet-50's stem pool). */
static void qp_kernel(ut_str *o, const char *fn, const ct_pool *pl, int64_t rw, int64_t ch) {
  int64_t pt = pl->pad[0], pw = pl->pad[1];
  ut_str_printf(o,
                "/* max pool on held bytes (contract_q8pool.c): %" PRId64 " planes %" PRId64 "x%" PRId64 " -> %" PRId64 "x%" PRId64
                ", window %" PRId64 "x%" PRId64 ", stride %" PRId64 "x%" PRId64 ", rows in chunks of %" PRId64 " */\n",
                pl->n * pl->c, pl->h, pl->w, pl->oh, pl->ow, pl->kh, pl->kw, pl->stride[0], pl->stride[1], ch);
  ut_str_printf(o, "static void %s_q8pl(const uint8_t *restrict x, uint8_t *restrict y, uint8_t *restrict rows) {\n", fn);
  ut_str_printf(o, "  for (long o0 = 0; o0 < %" PRId64 "L; o0 += %" PRId64 "L) {\n    long o1 = o0 + %" PRId64 "L < %" PRId64 "L ? o0 + %" PRId64
                   "L : %" PRId64 "L;\n", pl->oh, ch, ch, pl->oh, ch, pl->oh);
  ut_str_printf(o,
                "    for (long oh = o0; oh < o1; oh++) {\n      uint8_t *restrict row = rows + (oh - o0) * %" PRId64 "L;\n      int any = 0;\n"
                "      for (long kh = 0; kh < %" PRId64 "L; kh++) {\n        long ih = oh * %" PRId64 "L + kh * %" PRId64 "L - %" PRId64 "L;\n"
                "        if (ih < 0 || ih >= %" PRId64 "L) continue;\n"
                "        const uint8_t *restrict r = x + ih * %" PRId64 "L;\n"
                "        if (!any) memcpy(row + %" PRId64 "L, r, %" PRId64 "UL);\n"
                "        else for (long w = 0; w < %" PRId64 "L; w++) row[%" PRId64 "L + w] = row[%" PRId64 "L + w] > r[w] ? row[%" PRId64
                "L + w] : r[w];\n"
                "        any = 1;\n      }\n"
                "      if (!any) memset(row + %" PRId64 "L, 0, %" PRId64 "UL);\n    }\n",
                rw, pl->kh, pl->stride[0], pl->dil[0], pt, pl->h, pl->w, pw, pl->w, pl->w, pw, pw, pw, pw, pl->w);
  ut_str_printf(o,
                "    for (long oh = o0; oh < o1; oh++) {\n      const uint8_t *restrict row = rows + (oh - o0) * %" PRId64 "L;\n"
                "      uint8_t *restrict yr = y + oh * %" PRId64 "L;\n"
                "      for (long ow = 0; ow < %" PRId64 "L; ow++) {\n        const uint8_t *p = row + ow * %" PRId64 "L;\n        uint8_t m = p[0];\n",
                rw, pl->ow, pl->ow, pl->stride[1]);
  for (int64_t kw = 1; kw < pl->kw; kw++)
    ut_str_printf(o, "        { uint8_t v = p[%" PRId64 "]; m = m > v ? m : v; }\n", kw * pl->dil[1]);
  ut_str_puts(o, "        yr[ow] = m;\n      }\n    }\n  }\n}\n");
  ut_str_printf(o,
                "typedef struct { const uint8_t *x; uint8_t *y; int nt; } %s_q8pc;\n"
                "static void %s_q8pt(void *vc, int t, int tid) {\n  (void)tid;\n  const %s_q8pc *cx = (const %s_q8pc *)vc;\n"
                "  uint8_t rows[%" PRId64 "] __attribute__((aligned(64)));\n  memset(rows, 0, sizeof rows);\n"
                "  for (long p = %" PRId64 "L * t / cx->nt; p < %" PRId64 "L * (t + 1) / cx->nt; p++)\n"
                "    %s_q8pl(cx->x + p * %" PRId64 "L, cx->y + p * %" PRId64 "L, rows);\n}\n",
                fn, fn, fn, fn, rw * ch, pl->n * pl->c, pl->n * pl->c, fn, pl->h * pl->w, pl->oh * pl->ow);
  ut_str_printf(o,
                "static int %s_pool(hprt_pool *pool, const void *x, void *y) {\n"
                "  %s_q8pc cx = {(const uint8_t *)x, (uint8_t *)y, pool && hprt_pool_size(pool) > 1 ? 4 * hprt_pool_size(pool) : 1};\n"
                "  if (cx.nt > %" PRId64 "L) cx.nt = %d;\n"
                "  hprt_pool_run(cx.nt > 1 ? pool : NULL, cx.nt, %s_q8pt, &cx);\n  return 0;\n}\n",
                fn, fn, pl->n * pl->c, (int)(pl->n * pl->c), fn);
}

bool cc_emit_q8pool(rc_ctx *c, int r, const char *fn, ut_str *out, const ct_pool *pl) {
  float s;
  int xz, zo;
  bool padded = pl->pad[0] || pl->pad[1] || pl->pad[2] || pl->pad[3];
  if (!c->q8 || c->ngen_syms || rt_knobs_or_default(c->knobs)->int8 == RT_INT8_OFF || pl->sum ||
      (padded && !(isinf(pl->fill) && pl->fill < 0)) || !qp_requant(pl, &s, &xz, &zo))
    return false;
  if (pl->n * pl->c > (1L << 30)) return false; /* the task count is an int */
  int64_t rw = pl->pad[1] + pl->w, last = (pl->ow - 1) * pl->stride[1] + (pl->kw - 1) * pl->dil[1] + 1;
  rw = ((rw > last ? rw : last) + 63) / 64 * 64;
  if (rw > QP_MAX_ROW) return false;
  int xbuf = cc_q8_whole(c, r, &pl->X, pl->n * pl->c * pl->h * pl->w, pl->epi, pl->nepi);
  int ybuf = cc_q8_whole(c, r, &pl->Y, pl->n * pl->c * pl->oh * pl->ow, pl->epi, pl->nepi);
  if (xbuf < 0 || ybuf < 0) return false;
  cc_q8_plan *hp = c->q8;
  bool held = hp->hold[xbuf] == xz && hp->hold[ybuf] == zo; /* q8_hold.c checked the writer's scale is s */
  hp->k[r] = (cc_q8_fact){.q8 = true, .pair = true, .xbuf = xbuf, .ybuf = ybuf, .zo = zo, .xs = s, .xz = xz,
                          .held_in = held, .held_out = held};
  /* the chunk's rows: at most QP_CHUNK bytes (one row where a row is more) */
  int64_t ch = QP_CHUNK / rw < 1 ? 1 : QP_CHUNK / rw;
  if (held) qp_kernel(out, fn, pl, rw, ch > pl->oh ? pl->oh : ch);
  return held;
}
