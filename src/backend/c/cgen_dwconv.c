/* cgen_dwconv.c — depthwise convolution (groups == input == output channels).
 * Needs: cgen_int.h (the plane copy: cg_emit_plane_row, cgen_pool.c).
 * Gives: cg_dw_applies, cg_dwconv (cgen_conv's kernel for that case).
 *
 * A depthwise layer has K = kh*kw per output: as an implicit GEMM every
 * group is a 1-row GEMM with a 9-deep reduction, all packing and no
 * arithmetic.  Here each task is a run of (image, channel) planes, four
 * tasks per thread; per plane:
 *   the input plane is copied by vectors, converted to fp32 and
 *   zero-padded, into a per-thread scratch wide enough that every vector
 *   load stays inside it (no bounds checks in the loop), its columns split
 *   into stride phases (even and odd columns for stride 2, vector pairs
 *   split in registers) so that every tap of every stride and dilation is
 *   a contiguous load; the zeros are the same in every plane, so the task
 *   writes them once and each plane only its input's columns;
 *   the output is computed in blocks of up to 4 vectors of a row times as
 *   many rows as make 8 accumulators (4 on AVX2, with wide windows, and on
 *   the scalar variant), the last vector of a row masked: independent FMA
 *   chains at ow = 56, 28, 14, 7 too.  Each tap is a weight broadcast times
 *   the phase row at that offset;
 *   on AVX-512 a tap off a vector boundary is two aligned loads shifted
 *   together (valignd, tap_ld), not a load split across cache lines;
 *   the epilogue (per-channel bias, activations, a residual laid out like
 *   the output, roundings) runs in registers before the store.
 * Small planes (fixed sizes, rows of at most half a vector: 7x7 on
 * AVX-512) put several output rows into one vector instead (the flat
 * variant, emit_variant_flat): 7 of 9 lanes do useful work, not 7 of 16.
 * With prepack_w the weights are converted to fp32 once (fn_pack_a).
 * Small fixed-size planes (a scratch of at most CG_DW_PIPE_BYTES) take two
 * scratch planes: a task copies plane i + 1 into one before it computes
 * plane i from the other (emit_plane_loop).  Copied just before, a plane's
 * rows were still in the store queue when the taps read them across two
 * stores each: the loads waited for the stores to reach the cache (3x on
 * 7x7 planes on Zen 5).  Larger planes keep one (their first rows are
 * written long before they are read, and two would not fit in L1). */
#include <stdio.h>
#include <string.h>

#include "backend/c/cgen_int.h"

bool cg_dw_applies(const cgen_conv_spec *s) { return s->groups > 1 && s->groups == s->c && s->oc == s->c; }

/* The scratch holds the padded plane with its columns split by phase: padded
 * row r, phase f (0 <= f < stride), index i is padded column i*stride + f, at
 * xp + r*rs + f*wq + i.  Output column ow of tap kw reads padded column
 * ow*stride + kw*dil, i.e. phase (kw*dil) % stride at index ow + (kw*dil) /
 * stride: every tap of every stride is a contiguous vector load.  With
 * stride 1 this is the plain padded plane. */
typedef struct dw_geo {
  int64_t oh, ow, hp; /* output size; padded rows */
  int64_t wq, rs;     /* a phase row (a multiple of 16, covers every vector load); a padded row: stride phase rows */
  int rows, vecs;     /* a block: output rows x vectors per row (rows * vecs accumulators) */
  bool rt;            /* sizes read at run time (n_expr, h_expr, w_expr): the plane's ow, wq and
                         rs are the C variables ow_, wq, rs (the fields here are the upper
                         corner's, which size the scratch) */
} dw_geo;

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

static void geometry(const cgen_conv_spec *s, int w, int nacc, dw_geo *g) {
  memset(g, 0, sizeof *g);
  cgen_conv_out_hw(s, &g->oh, &g->ow);
  int64_t st = s->stride[1];
  g->hp = s->h + s->pad[0] + s->pad[2];
  g->wq = cg_rup(cg_rup(g->ow, w) + (s->kw - 1) * s->dil[1] / st, 16);
  g->rs = st * g->wq;
  /* up to 4 vectors of a row, then as many rows as the accumulators allow,
   * the rows split evenly (14 rows, 8 at most -> 7 + 7) */
  int64_t nv = cdiv(g->ow, w);
  g->vecs = (int)(nv < 4 ? nv : 4);
  int64_t rmax = nacc / g->vecs > 1 ? nacc / g->vecs : 1;
  g->rows = (int)cdiv(g->oh, cdiv(g->oh, rmax));
}

/* Accumulators per block: enough independent FMA chains to cover the FMA
 * latency, leaving registers for the broadcast taps (32 zmm, 16 ymm). */
static int n_acc(const cgen_conv_spec *s, const cg_isa *isa) {
  return isa->id != CGEN_ISA_SCALAR && s->kh * s->kw + 8 + 2 <= isa->nregs ? 8 : 4;
}

/* The epilogue of vector x (a C variable) and its store at y + at (C
 * variable at): all lanes when full, else the first nl (a C expression);
 * per-channel operands from cg_emit_bias_regs. */
static void emit_epi_store(cg_out *o, const cgen_conv_spec *s, const char *x, bool full, const char *nl) {
  for (int e = 0; e < s->n_epi; e++) {
    const cgen_epi *ep = &s->epi[e];
    if (ep->kind == CGEN_EPI_BIAS_M) {
      cg_emit(o, "          %s = %s %s eb%d;\n", x, x, ep->mul ? "*" : "+", e);
    } else if (ep->kind == CGEN_EPI_RESIDUAL) {
      const char *sx = cg_vsuffix(ep->dtype);
      const char *op = ep->mul ? "*" : "+";
      if (full) cg_emit(o, "          %s = %s %s $P_ld%s(res%d + at);\n", x, x, op, sx, e);
      else cg_emit(o, "          %s = %s %s $P_ldn%s(res%d + at, %s);\n", x, x, op, sx, e, nl);
    } else {
      cg_emit_epi_common(o, ep, e, "c", x);
    }
  }
  const char *ys = cg_vsuffix(s->y_dtype);
  if (full) cg_emit(o, "          $P_st%s(y + at, %s); }\n", ys, x);
  else cg_emit(o, "          $P_stn%s(y + at, %s, %s); }\n", ys, x, nl);
}

/* The tap vector at r + off (off a C expression) into ld: a load, or with
 * sft > 0 (AVX-512) lanes sft.. of the aligned pair at r + off, r + off +
 * 16 shifted together (valignd). */
static void tap_ld(char *ld, size_t cap, const char *off, int sft) {
  if (sft)
    snprintf(ld, cap,
             "_mm512_castsi512_ps(_mm512_alignr_epi32(_mm512_castps_si512($P_ld(r + %s + 16)), "
             "_mm512_castps_si512($P_ld(r + %s)), %d))",
             off, off, sft);
  else snprintf(ld, cap, "$P_ld(r + %s)", off);
}

/* One block: `rows` output rows from C variable oh by `u` vectors from ow,
 * the last vector holding `last` outputs (a masked store when < W; -1: the
 * run-time count lastc).  On AVX-512 a tap whose phase-row offset is not a
 * whole vector (sft columns past one) reads the two aligned vectors around
 * it and shifts them together (valignd): the unaligned load split two cache
 * lines, and the aligned ones are shared with the taps of other columns
 * (stride 1, 1-thread CPU time on Zen 5: 32x112x112 -18%, 192x28x28 -15%).
 * The second vector stays inside the phase row (wq covers the widest tap
 * past the last vector, rounded up to a whole one). */
static void emit_block(cg_out *o, const cgen_conv_spec *s, const dw_geo *g, int rows, int u, int last) {
  int w = o->isa->w;
  int64_t SH = s->stride[0], SW = s->stride[1];
  bool al = o->isa->id == CGEN_ISA_AVX512;
  char ow[32], nl[16]; /* the plane's width, the last vector's lanes */
  snprintf(ow, sizeof ow, g->rt ? "ow_" : "%ldL", (long)g->ow);
  snprintf(nl, sizeof nl, last < 0 ? "lastc" : "%d", last);
  cg_emit(o, "      {\n");
  for (int i = 0; i < rows; i++)
    for (int j = 0; j < u; j++) cg_emit(o, "        $P_v a%d_%d = $P_zero();\n", i, j);
  for (int kh = 0; kh < s->kh; kh++)
    for (int kw = 0; kw < s->kw; kw++) {
      int64_t cw = kw * s->dil[1], sft = al ? cw / SW % w : 0;
      cg_emit_tap_row(o, g->rt, SH, kh * s->dil[0], cw - sft * SW, SW, g->rs, g->wq);
      for (int i = 0; i < rows; i++)
        for (int j = 0; j < u; j++) {
          char off[64], ld[320];
          cg_tap_off(off, sizeof off, g->rt, i * SH, j * w, g->rs);
          tap_ld(ld, sizeof ld, off, (int)sft);
          cg_emit(o, "          a%d_%d = $P_fma(%s, w%d, a%d_%d);\n", i, j, ld, (int)(kh * s->kw + kw), i, j);
        }
      cg_emit(o, "        }\n");
    }
  for (int i = 0; i < rows; i++)
    for (int j = 0; j < u; j++) {
      char x[32];
      snprintf(x, sizeof x, "a%d_%d", i, j);
      cg_emit(o, "        { long at = (oh + %d) * %s + ow + %d;\n", i, ow, j * w);
      emit_epi_store(o, s, x, j < u - 1 || last == w, nl);
    }
  cg_emit(o, "      }\n");
}

/* `rows` output rows from oh: blocks of g->vecs full vectors, then one block
 * for the rest of the row (its last vector masked). */
static void emit_row_blocks(cg_out *o, const cgen_conv_spec *s, const dw_geo *g, int rows) {
  int w = o->isa->w;
  int64_t step = (int64_t)g->vecs * w, nfull = g->ow / step, rem = g->ow - nfull * step;
  if (nfull > 1) cg_emit(o, "    for (long ow = 0; ow < %ldL; ow += %ldL)\n", (long)(nfull * step), (long)step);
  else if (nfull == 1) cg_emit(o, "    { const long ow = 0;\n");
  if (nfull) emit_block(o, s, g, rows, g->vecs, w);
  if (nfull == 1) cg_emit(o, "    }\n");
  if (rem) {
    int u = (int)cdiv(rem, w);
    cg_emit(o, "    { const long ow = %ldL;\n", (long)(nfull * step));
    emit_block(o, s, g, rows, u, (int)(rem - (int64_t)(u - 1) * w));
    cg_emit(o, "    }\n");
  }
}

/* Channel c's taps (C variable c), as broadcasts w0 .. w<kh*kw - 1>. */
static void emit_taps(cg_out *o, const cgen_conv_spec *s) {
  tiny_dtype wdt = s->prepack_w ? TINY_FP32 : s->w_dtype;
  long khw = (long)(s->kh * s->kw);
  char buf[256], idx[96];
  for (int t = 0; t < khw; t++) {
    snprintf(idx, sizeof idx, "c * %ldL + %d", khw, t);
    cg_scalar_ld(o, buf, sizeof buf, wdt, "cx->A", idx);
    cg_emit(o, "  const $P_v w%d = $P_set1(%s);\n", t, buf);
  }
}

/* With prepack_w: the weights converted to fp32 once (fn_pack_a). */
static void emit_pack(cg_out *o, const cgen_conv_spec *s) {
  if (!s->prepack_w) return;
  long n = (long)(s->c * s->kh * s->kw);
  char ldw[200];
  cg_scalar_ld(o, ldw, sizeof ldw, s->w_dtype, "A", "i");
  cg_emit(o, "static $T long $P_pack_a_bytes_run(void) { return %ldL; }\n", n * 4);
  cg_emit(o, "static $T int $P_pack_a_run(hprt_pool *pool, const void *A, void *Ap) {\n  (void)pool;\n");
  cg_emit(o, "  for (long i = 0; i < %ldL; i++) ((float *)Ap)[i] = %s;\n  return 0;\n}\n", n, ldw);
}

/* Scratch bytes up to which a fixed-size plane is double-buffered. */
#define CG_DW_PIPE_BYTES 8192L

/* Scratch planes for a fixed-size plane of `floats` floats: 2 (pipelined
 * copies, emit_plane_loop) when small, else 1. */
static int plane_bufs(int64_t floats) { return floats * 4 <= CG_DW_PIPE_BYTES ? 2 : 1; }

/* The arguments that name plane v (C text) to $P_cp / $P_chan: its image
 * and channel (v / C, v % C), or with C 0 the plane index itself. */
static void plane_args(char *b, size_t cap, const char *v, long C) {
  if (C) snprintf(b, cap, "%s / %ldL, %s %% %ldL", v, C, v, C);
  else snprintf(b, cap, "%s", v);
}

/* The task's planes [p0, p1) of np (C text; C channels an image, 0: the
 * planes by index) over its scratch xp0 (C variable) of nb planes of sp
 * floats: with one, each plane copied ($P_cp) then computed ($P_chan);
 * with two, plane pi + 1 copied into the other before plane pi is
 * computed. */
static void emit_plane_loop(cg_out *o, const char *np, long C, int nb, int64_t sp) {
  char a0[64], a1[64], a[64];
  plane_args(a0, sizeof a0, "p0", C), plane_args(a1, sizeof a1, "(pi + 1)", C), plane_args(a, sizeof a, "pi", C);
  cg_emit(o, "  long p0 = %s * task / cx->ntasks, p1 = %s * (task + 1) / cx->ntasks;\n", np, np);
  if (nb == 1) {
    cg_emit(o, "  for (long pi = p0; pi < p1; pi++) {\n");
    cg_emit(o, "    $P_cp(cx, xp0, %s);\n    $P_chan(cx, xp0, %s);\n  }\n}\n", a, a);
    return;
  }
  cg_emit(o, "  if (p0 < p1) $P_cp(cx, xp0, %s);\n", a0);
  cg_emit(o, "  for (long pi = p0; pi < p1; pi++) {\n");
  cg_emit(o, "    if (pi + 1 < p1) $P_cp(cx, xp0 + ((pi + 1 - p0) & 1) * %ldL, %s);\n", (long)sp, a1);
  cg_emit(o, "    $P_chan(cx, xp0 + ((pi - p0) & 1) * %ldL, %s);\n  }\n}\n", (long)sp, a);
}

/* ---- sizes read at run time (n_expr, h_expr, w_expr) ---------------------- */
/* The depthwise block for cg_emit_plane_rt: k is a dw_blk. */
typedef struct dw_blk {
  const cgen_conv_spec *s;
  const dw_geo *g;
} dw_blk;

static void dw_block(cg_out *o, const void *k, int rows, int u, int last) {
  const dw_blk *b = k;
  emit_block(o, b->s, b->g, rows, u, last);
}

/* The columns [lo, hi) of phase f (C variable f) that hold input columns,
 * for this run's width w and phase row wq (C variables). */
static void emit_phase_bounds(cg_out *o, const cgen_conv_spec *s) {
  long st = (long)s->stride[1], pl = (long)s->pad[1];
  cg_emit(o, "      long lo = %ldL - f > 0 ? (%ldL - f + %ldL) / %ldL : 0, hi = (%ldL + w - f + %ldL) / %ldL;\n", pl, pl, st - 1,
          st, pl, st - 1, st);
  cg_emit(o, "      if (hi > wq) hi = wq;\n      if (lo > hi) lo = hi;\n");
}

/* One plane's input rows into the padded scratch xp of this run (the
 * zeros around them the task wrote): stride 1 by vectors, stride 2 by
 * vector pairs split into the phases, the tails masked (the pool's bounds,
 * cg_emit_*_consts_rt); other strides column by column. */
static void emit_data_rt(cg_out *o, const cgen_conv_spec *s) {
  int w = o->isa->w;
  long st = (long)s->stride[1], pl = (long)s->pad[1], pt = (long)s->pad[0];
  const char *xs = cg_vsuffix(s->x_dtype), *xt = cg_ctype(s->x_dtype);
  bool vec = (st == 1 || st == 2) && w > 1;
  if (vec && st == 2) cg_emit_pair_consts_rt(o, pl);
  else if (vec) cg_emit_unit_consts_rt(o, pl);
  if (vec) cg_emit(o, "  (void)full; (void)nw; (void)ie;\n");
  cg_emit(o, "  long r1 = %ldL + h < hp ? %ldL + h : hp;\n", pt, pt);
  cg_emit(o, "  for (long r = %ldL; r < r1; r++) {\n    float *d = xp + r * rs;\n", pt);
  cg_emit(o, "    const %s *xr = x + (r - %ldL) * w;\n", xt, pt);
  if (vec && st == 1) {
    cg_emit(o, "    for (long i = lo; i < im; i += %d) $P_st(d + i, $P_ld%s(xr + i - %ldL));\n", w, xs, pl);
    cg_emit(o, "    if (tail) $P_stn(d + im, $P_ldn%s(xr + im - %ldL, nt), nt);\n  }\n", xs, pl);
    return;
  }
  if (vec) {
    if (pl % 2) { /* phase 1's index v0 - 1 is column 0 */
      char ld[300];
      cg_scalar_ld(o, ld, sizeof ld, s->x_dtype, "xr", "0");
      cg_emit(o, "    if (%ldL < h1) d[wq + %ldL] = %s;\n", (pl - 1) / 2, (pl - 1) / 2, ld);
    }
    cg_emit(o, "    for (long i = v0; i < im; i += %d) {\n", w);
    cg_emit(o, "      const %s *p = xr + 2 * i - %ldL;\n", xt, pl);
    cg_emit(o, "      $P_v a = $P_ld%s(p), b = $P_ld%s(p + %d), ev, od;\n      $P_dei2(a, b, &ev, &od);\n", xs, xs, w);
    cg_emit(o, "      $P_st(d + i, ev);\n      $P_st(d + wq + i, od);\n    }\n");
    cg_emit(o, "    if (tail) {\n      $P_v a = $P_ldn%s(xr + c0, na), b = $P_ldn%s(xr + c0 + %d, nb), ev, od;\n", xs, xs, w);
    cg_emit(o, "      $P_dei2(a, b, &ev, &od);\n      $P_stn(d + im, ev, ne);\n      $P_stn(d + wq + im, od, no);\n    }\n  }\n");
    return;
  }
  char idx[96], ld[300];
  snprintf(idx, sizeof idx, "i * %ldL + f - %ldL", st, pl);
  cg_scalar_ld(o, ld, sizeof ld, s->x_dtype, "xr", idx);
  cg_emit(o, "    for (long f = 0; f < %ldL; f++, d += wq) {\n", st);
  emit_phase_bounds(o, s);
  cg_emit(o, "      for (long i = lo; i < hi; i++) d[i] = %s;\n    }\n  }\n", ld);
}

/* The zeros of this run's padded plane, written once a task: the rows
 * above and below the input, and in each of its rows every phase's columns
 * outside the input's.  The plane keeps the upper corner's (g) row step rs
 * and phase row wq at every binding (a run's rows are as wide or narrower),
 * so that every tap's offset is a constant. */
static void emit_fill_rt(cg_out *o, const cgen_conv_spec *s, const dw_geo *g, int nb) {
  long pt = (long)s->pad[0];
  cg_emit(o, "  long h = cx->h, w = cx->w, hp = cx->hp;\n  const long wq = %ldL, rs = %ldL;\n", (long)g->wq, (long)g->rs);
  cg_emit(o, "  float *xp0 = (float *)cx->sc.thr[tid];\n");
  cg_emit(o, "  for (long r = 0; r < %d * hp; r++) {\n    float *d = xp0 + r / hp * %ldL + r %% hp * rs;\n", nb,
          (long)(g->hp * g->rs));
  cg_emit(o, "    long rr = r %% hp;\n");
  cg_emit(o, "    if (rr < %ldL || rr >= %ldL + h) { memset(d, 0, sizeof(float) * (size_t)rs); continue; }\n", pt, pt);
  cg_emit(o, "    for (long f = 0; f < %ldL; f++, d += wq) {\n", (long)s->stride[1]);
  emit_phase_bounds(o, s);
  cg_emit(o, "      for (long i = 0; i < lo; i++) d[i] = 0.0f;\n      for (long i = hi; i < wq; i++) d[i] = 0.0f;\n    }\n  }\n");
}

/* The output plane of this run in blocks shaped for its width, as a
 * specialised plane's (geometry()): rows of one vector in blocks of one
 * vector by as many rows as there are accumulators, rows of two in blocks
 * of two by half as many, wider rows in the upper corner's (g). */
static void emit_plane_rt_any(cg_out *o, const cgen_conv_spec *s, const dw_geo *g, int nacc) {
  dw_blk b = {s, g};
  int w = o->isa->w;
  if (g->vecs == 1) {
    cg_emit_plane_rt(o, g->rows, 1, dw_block, &b);
    return;
  }
  cg_emit(o, "  if (ow_ <= %d) {\n", w);
  cg_emit_plane_rt(o, nacc, 1, dw_block, &b);
  if (g->vecs > 2 && nacc >= 4) {
    cg_emit(o, "  } else if (ow_ <= %d) {\n", 2 * w);
    cg_emit_plane_rt(o, nacc / 2, 2, dw_block, &b);
  }
  cg_emit(o, "  } else {\n");
  cg_emit_plane_rt(o, g->rows, g->vecs, dw_block, &b);
  cg_emit(o, "  }\n");
}

/* The entry point with sizes read at run time: this run's geometry into
 * the context (cx), the scratch of the upper corner's (g). */
static void emit_run_rt(cg_out *o, const cgen_conv_spec *s, const dw_geo *g, int nb) {
  cg_emit(o, "static $T int $P_run(hprt_pool *pool, const void *A, const void *B, void *C, const void *const *ep) {\n");
  cg_emit(o, "  $F_ctx cx;\n  cx.A = A; cx.B = B; cx.C = C; cx.ep = ep;\n");
  cg_rt_window k = {s->n_expr, s->h_expr, s->w_expr, s->n, s->h, s->w, s->kh, s->kw, s->stride, s->pad, s->dil};
  char hp[48]; /* every padded row */
  snprintf(hp, sizeof hp, "cx.h + %ldL", (long)(s->pad[0] + s->pad[2]));
  cg_emit_rt_window(o, &k, hp);
  cg_emit(o, "  cx.np = n * %ldL;\n", (long)s->c);
  cg_emit(o, "  cx.ntasks = hprt_pool_size(pool) > 1 ? 4 * hprt_pool_size(pool) : 1; /* one fill on a thread alone */\n");
  cg_emit(o, "  if (cx.ntasks > cx.np) cx.ntasks = cx.np;\n");
  cg_emit(o, "  if (hprt_scratch_get(pool, 0, %ldUL, &cx.sc)) return -1;\n", (long)(nb * g->hp * g->rs * 4));
  cg_emit(o, "  hprt_pool_run(pool, (int)cx.ntasks, $P_task, &cx);\n");
  cg_emit(o, "  hprt_scratch_put(&cx.sc);\n  return 0;\n}\n");
}

/* The variant with sizes read at run time: per task the zeros of this
 * run's padded plane, per plane its input rows ($P_cp), the taps, the
 * output in blocks with the rest of rows and planes behind switches
 * ($P_chan).  Where the upper corner's plane is small (plane_bufs) the
 * task keeps two and copies the next plane before it computes this one,
 * as a fixed-size plane does: MobileNetV2's 3x3 depthwise layers at 5x5
 * (a box of 160..320 images) took 2.3x the specialised kernel's time. */
static void emit_variant_rt(cg_out *o, const cgen_conv_spec *s, const dw_geo *g, int nacc) {
  long C = (long)s->c;
  int nb = plane_bufs(g->hp * g->rs);
  const char *xt = cg_ctype(s->x_dtype), *yt = cg_ctype(s->y_dtype);
  static const char *const head = "  long h = cx->h, w = cx->w, oh_ = cx->oh, ow_ = cx->ow, hp = cx->hp, c = pi %% %ldL;\n"
                                  "  (void)h, (void)w, (void)oh_, (void)ow_, (void)hp, (void)c;\n"
                                  "  const long wq = %ldL, rs = %ldL; /* the upper corner's plane layout: taps at constant offsets */\n";
  cg_emit(o, "static $T void $P_cp(const $F_ctx *cx, float *xp, long pi) {\n");
  cg_emit(o, head, C, (long)g->wq, (long)g->rs);
  cg_emit(o, "  const %s *x = (const %s *)cx->B + pi * h * w;\n", xt, xt);
  emit_data_rt(o, s);
  cg_emit(o, "}\n");
  cg_emit(o, "static $T void $P_chan(const $F_ctx *cx, const float *xp, long pi) {\n");
  cg_emit(o, head, C, (long)g->wq, (long)g->rs);
  emit_taps(o, s);
  cg_emit_bias_regs(o, s->epi, s->n_epi, "cx->ep", "c");
  cg_emit(o, "  const struct { const void *const *ep; } tt0 = {cx->ep}, *tt = &tt0;\n  (void)tt;\n");
  cg_emit(o, "  %s *y = (%s *)cx->C + pi * oh_ * ow_;\n", yt, yt);
  for (int i = 0; i < s->n_epi; i++)
    if (s->epi[i].kind == CGEN_EPI_RESIDUAL)
      cg_emit(o, "  const %s *res%d = (const %s *)cx->ep[%d] + pi * oh_ * ow_;\n", cg_ctype(s->epi[i].dtype), i,
              cg_ctype(s->epi[i].dtype), i);
  emit_plane_rt_any(o, s, g, nacc);
  cg_emit(o, "}\n");
  cg_emit(o, "static $T void $P_task(void *vc, int task, int tid) {\n  const $F_ctx *cx = (const $F_ctx *)vc;\n");
  emit_fill_rt(o, s, g, nb);
  cg_emit(o, "  (void)h; (void)w;\n");
  emit_plane_loop(o, "cx->np", 0, nb, g->hp * g->rs);
  emit_run_rt(o, s, g, nb);
}

/* A fixed-size channel's (C variables n, c) taps as broadcasts, its output
 * y and residuals res<i> (planes of `plane` outputs); the epilogue steps
 * name their tensors tt->ep[i] (cg_emit_epi_common). */
static void emit_chan_io(cg_out *o, const cgen_conv_spec *s, int64_t plane) {
  long C = (long)s->c;
  const char *yt = cg_ctype(s->y_dtype);
  emit_taps(o, s);
  cg_emit_bias_regs(o, s->epi, s->n_epi, "cx->ep", "c");
  cg_emit(o, "  const struct { const void *const *ep; } tt0 = {cx->ep}, *tt = &tt0;\n  (void)tt;\n");
  cg_emit(o, "  %s *y = (%s *)cx->C + (n * %ldL + c) * %ldL;\n", yt, yt, C, (long)plane);
  for (int i = 0; i < s->n_epi; i++)
    if (s->epi[i].kind == CGEN_EPI_RESIDUAL)
      cg_emit(o, "  const %s *res%d = (const %s *)cx->ep[%d] + (n * %ldL + c) * %ldL;\n", cg_ctype(s->epi[i].dtype), i,
              cg_ctype(s->epi[i].dtype), i, C, (long)plane);
}

/* ---- small planes: output rows side by side in the lanes ----------------
 * A row shorter than half a vector fills few lanes (7 of 16 at 7x7).  Here
 * the padded plane is split by row and column stride phase into sub-planes
 * of hq x wq (wq = the padded width / column stride): padded row r, column
 * c is at sub-plane (r % SH) * SW + c % SW, row r / SH, index c / SW.  Then
 * output (oh, ow) at flat index q = oh * wq + ow reads every tap at q plus a
 * constant, so a vector holds w / wq rows' outputs (7 of 9 lanes useful at
 * 7x7); the lanes past ow compute wrapped columns, never stored.  Each
 * vector's useful lanes are consecutive outputs: a constant permutation
 * moves them to its front, the epilogue runs there, one masked store. */
typedef struct dw_flat {
  int64_t oh, ow, hq, wq, sp; /* output size; a sub-plane: rows, row step, size */
  int64_t nq, nv, total;      /* flat outputs (the last one's q + 1), in vectors; scratch floats */
} dw_flat;

static void flat_geometry(const cgen_conv_spec *s, int w, dw_flat *f) {
  memset(f, 0, sizeof *f);
  cgen_conv_out_hw(s, &f->oh, &f->ow);
  int64_t SH = s->stride[0], SW = s->stride[1];
  f->hq = cdiv(s->h + s->pad[0] + s->pad[2], SH);
  f->wq = cdiv(s->w + s->pad[1] + s->pad[3], SW);
  f->sp = f->hq * f->wq;
  f->nq = (f->oh - 1) * f->wq + f->ow;
  f->nv = cdiv(f->nq, w);
  f->total = cg_rup(SH * SW * f->sp + f->nv * w + w, 16); /* the last vector's taps read past the plane */
}

/* The rule: sizes fixed at compile time, a vector ISA, rows of at most half
 * a vector whose padded sub-plane rows are shorter than one (more useful
 * lanes than a row a vector), column stride 1 or 2 (vector copies), at
 * most 16 vectors a plane (every vector's code is unrolled). */
static bool flat_applies(const cgen_conv_spec *s, int w) {
  if (s->n_expr || s->h_expr || s->w_expr || w < 8 || s->stride[1] > 2) return false;
  dw_flat f;
  flat_geometry(s, w, &f);
  return 2 * f.ow <= w && f.wq < w && f.nv <= 16;
}

/* One input row (C variables xr, and d: its sub-plane row in phase 0) into
 * the sub-planes: stride 1 by (masked) vectors, stride 2 by vector pairs
 * split into the two column phases. */
static void emit_flat_copy(cg_out *o, const cgen_conv_spec *s, const dw_flat *f) {
  int w = o->isa->w;
  int64_t W = s->w, pl = s->pad[1];
  const char *xs = cg_vsuffix(s->x_dtype);
  for (int64_t j = 0; j < W; j += s->stride[1] * w) {
    int64_t na = W - j < w ? W - j : w;
    if (s->stride[1] == 1) {
      cg_emit(o, "    $P_stn(d + %ldL, $P_ldn%s(xr + %ldL, %d), %d);\n", (long)(pl + j), xs, (long)j, (int)na, (int)na);
      continue;
    }
    int64_t nb = W - j - w < 0 ? 0 : W - j - w < w ? W - j - w : w, ne = cdiv(na + nb, 2), no = (na + nb) / 2;
    cg_emit(o, "    { $P_v a = $P_ldn%s(xr + %ldL, %d), b = ", xs, (long)j, (int)na);
    if (nb) cg_emit(o, "$P_ldn%s(xr + %ldL, %d), ev, od;\n", xs, (long)(j + w), (int)nb);
    else cg_emit(o, "$P_zero(), ev, od;\n");
    cg_emit(o, "      $P_dei2(a, b, &ev, &od);\n");
    cg_emit(o, "      $P_stn(d + %ldL, ev, %d);\n", (long)((pl % 2) * f->sp + j / 2 + pl / 2), (int)ne);
    if (no) cg_emit(o, "      $P_stn(d + %ldL, od, %d);\n", (long)(((pl + 1) % 2) * f->sp + j / 2 + (pl + 1) / 2), (int)no);
    cg_emit(o, "    }\n");
  }
}

/* Flat output vector a<j> (flat index q0 on): its useful lanes (ow < the
 * output width) permuted to its front, the epilogue, a store of them at
 * their place in the output. */
static void emit_flat_store(cg_out *o, const cgen_conv_spec *s, const dw_flat *f, int j, int64_t q0) {
  int w = o->isa->w, n = 0, idx[16];
  for (int l = 0; l < w; l++)
    if (q0 + l < f->nq && (q0 + l) % f->wq < f->ow) idx[n++] = l;
  if (!n) return;
  bool moved = false;
  for (int l = 0; l < n; l++) moved |= idx[l] != l;
  if (moved) {
    char lst[128] = "";
    for (int l = 0; l < w; l++) snprintf(lst + strlen(lst), sizeof lst - strlen(lst), "%s%d", l ? ", " : "", l < n ? idx[l] : 0);
    if (o->isa->id == CGEN_ISA_AVX512) cg_emit(o, "      a%d = _mm512_permutexvar_ps(_mm512_setr_epi32(%s), a%d);\n", j, lst, j);
    else cg_emit(o, "      a%d = _mm256_permutevar8x32_ps(a%d, _mm256_setr_epi32(%s));\n", j, j, lst);
  }
  int64_t q = q0 + idx[0];
  char x[16], nl[16];
  snprintf(x, sizeof x, "a%d", j);
  snprintf(nl, sizeof nl, "%d", n);
  cg_emit(o, "        { long at = %ldL;\n", (long)(q / f->wq * f->ow + q % f->wq));
  emit_epi_store(o, s, x, n == w, nl);
}

/* A block of u flat output vectors from flat index q: per tap a broadcast
 * weight times the sub-plane at the tap's offset (on AVX-512 from the
 * aligned vectors around it, tap_ld: q is a whole number of vectors, the
 * plane's slack covers the second one), then each vector's outputs stored
 * (emit_flat_store). */
static void emit_flat_block(cg_out *o, const cgen_conv_spec *s, const dw_flat *f, int64_t q, int u) {
  int w = o->isa->w;
  int64_t SH = s->stride[0], SW = s->stride[1];
  cg_emit(o, "    {\n");
  for (int j = 0; j < u; j++) cg_emit(o, "      $P_v a%d = $P_zero();\n", j);
  for (int kh = 0; kh < s->kh; kh++)
    for (int kw = 0; kw < s->kw; kw++) {
      int64_t rh = kh * s->dil[0], cw = kw * s->dil[1];
      int64_t off = ((rh % SH) * SW + cw % SW) * f->sp + (rh / SH) * f->wq + cw / SW;
      int sft = o->isa->id == CGEN_ISA_AVX512 ? (int)(off % w) : 0;
      cg_emit(o, "      { const float *r = xp + %ldL;\n", (long)(q + off - sft));
      for (int j = 0; j < u; j++) {
        char at[32], ld[320];
        snprintf(at, sizeof at, "%d", j * w);
        tap_ld(ld, sizeof ld, at, sft);
        cg_emit(o, "        a%d = $P_fma(%s, w%d, a%d);\n", j, ld, (int)(kh * s->kw + kw), j);
      }
      cg_emit(o, "      }\n");
    }
  for (int j = 0; j < u; j++) emit_flat_store(o, s, f, j, q + (int64_t)j * w);
  cg_emit(o, "    }\n");
}

/* One channel (n, c): $P_cp, its input rows into the sub-planes over the
 * zeros the task wrote; $P_chan, the taps, the flat sums and their stores. */
static void emit_flat_chan(cg_out *o, const cgen_conv_spec *s, const dw_flat *f, int nacc) {
  int w = o->isa->w;
  int64_t C = s->c, SH = s->stride[0], SW = s->stride[1], plane = f->oh * f->ow;
  const char *xt = cg_ctype(s->x_dtype);
  cg_emit(o, "static $T void $P_cp(const $F_ctx *cx, float *xp, long n, long c) {\n");
  cg_emit(o, "  const %s *x = (const %s *)cx->B + (n * %ldL + c) * %ldL;\n", xt, xt, (long)C, (long)(s->h * s->w));
  cg_emit(o, "  for (long i = 0; i < %ldL; i++) {\n    long r = i + %ldL;\n", (long)s->h, (long)s->pad[0]);
  cg_emit(o, "    float *d = xp + (r %% %ldL) * %ldL + (r / %ldL) * %ldL;\n", (long)SH, (long)(SW * f->sp), (long)SH, (long)f->wq);
  cg_emit(o, "    const %s *xr = x + i * %ldL;\n", xt, (long)s->w);
  emit_flat_copy(o, s, f);
  cg_emit(o, "  }\n}\n");
  cg_emit(o, "static $T void $P_chan(const $F_ctx *cx, const float *xp, long n, long c) {\n");
  emit_chan_io(o, s, plane);
  for (int64_t v = 0; v < f->nv; v += nacc) emit_flat_block(o, s, f, v * w, (int)(f->nv - v < nacc ? f->nv - v : nacc));
  cg_emit(o, "}\n");
}

/* The small-plane variant: a task is a run of channels, the scratch (one
 * or two planes, plane_bufs) zeroed once for the run (each plane writes
 * only its input's places). */
static void emit_variant_flat(cg_out *o, const cgen_conv_spec *s, int nacc) {
  dw_flat f;
  flat_geometry(s, o->isa->w, &f);
  emit_flat_chan(o, s, &f, nacc);
  long np = (long)(s->n * s->c), C = (long)s->c;
  int nb = plane_bufs(f.total);
  cg_emit(o, "static $T void $P_task(void *vc, int task, int tid) {\n  const $F_ctx *cx = (const $F_ctx *)vc;\n");
  cg_emit(o, "  float *xp0 = (float *)cx->sc.thr[tid];\n  memset(xp0, 0, sizeof(float) * %ldL);\n", (long)(nb * f.total));
  char npt[32];
  snprintf(npt, sizeof npt, "%ldL", np);
  emit_plane_loop(o, npt, C, nb, f.total);
  emit_pack(o, s);
  cg_emit(o, "static $T int $P_run(hprt_pool *pool, const void *A, const void *B, void *C, const void *const *ep) {\n");
  cg_emit(o, "  $F_ctx cx;\n  cx.A = A; cx.B = B; cx.C = C; cx.ep = ep;\n");
  cg_emit(o, "  cx.ntasks = hprt_pool_size(pool) > 1 ? 4 * hprt_pool_size(pool) : 1;\n");
  cg_emit(o, "  if (cx.ntasks > %ld) cx.ntasks = %ld;\n", np, np);
  cg_emit(o, "  if (hprt_scratch_get(pool, 0, %ldUL, &cx.sc)) return -1;\n", (long)(nb * f.total * 4));
  cg_emit(o, "  hprt_pool_run(pool, cx.ntasks, $P_task, &cx);\n");
  cg_emit(o, "  hprt_scratch_put(&cx.sc);\n  return 0;\n}\n");
}

static void emit_variant(cg_out *o, const cgen_conv_spec *s) {
  int w = o->isa->w;
  dw_geo g;
  geometry(s, w, n_acc(s, o->isa), &g);
  int64_t C = s->c, H = s->h, W = s->w, plane = g.oh * g.ow;
  bool rt = s->n_expr || s->h_expr || s->w_expr;
  const char *xt = cg_ctype(s->x_dtype);
  cg_emit_isa_helpers(o);
  if (s->stride[1] == 2) cg_emit_dei2(o);
  if (rt) {
    g.rt = true;
    emit_variant_rt(o, s, &g, n_acc(s, o->isa));
    emit_pack(o, s);
    if (o->isa->id != CGEN_ISA_SCALAR) cg_emit(o, "#endif /* HPRT_X86 */\n");
    return;
  }
  if (flat_applies(s, w)) {
    emit_variant_flat(o, s, n_acc(s, o->isa));
    cg_emit(o, "#endif /* HPRT_X86 */\n");
    return;
  }
  /* one channel: its input rows over the padding the task wrote (only the
   * rows and columns the input covers), then the output plane */
  int64_t r0 = s->pad[0] < g.hp ? s->pad[0] : g.hp, r1 = s->pad[0] + H < g.hp ? s->pad[0] + H : g.hp;
  cg_plane_row pr = {s->x_dtype, s->w, s->pad[1], s->stride[1], g.wq};
  int nb = plane_bufs(g.hp * g.rs);
  cg_emit(o, "static $T void $P_cp(const $F_ctx *cx, float *xp, long n, long c) {\n");
  cg_emit(o, "  const %s *x = (const %s *)cx->B + (n * %ldL + c) * %ldL;\n", xt, xt, (long)C, (long)(H * W));
  cg_emit(o, "  for (long r = %ldL; r < %ldL; r++) {\n    float *d = xp + r * %ldL;\n", (long)r0, (long)r1, (long)g.rs);
  cg_emit(o, "    const %s *xr = x + (r - %ldL) * %ldL;\n", xt, (long)s->pad[0], (long)W);
  cg_emit_plane_row(o, &pr, "0.0f", false, CG_ROW_DATA);
  cg_emit(o, "  }\n}\n");
  cg_emit(o, "static $T void $P_chan(const $F_ctx *cx, const float *xp, long n, long c) {\n");
  emit_chan_io(o, s, plane);
  /* blocks of g.rows output rows, then one block of the rows left */
  int64_t nblk = g.oh / g.rows, rrem = g.oh - nblk * g.rows;
  if (nblk > 1) cg_emit(o, "  for (long oh = 0; oh < %ldL; oh += %d) {\n", (long)(nblk * g.rows), g.rows);
  else cg_emit(o, "  { const long oh = 0;\n");
  emit_row_blocks(o, s, &g, g.rows);
  cg_emit(o, "  }\n");
  if (rrem) {
    cg_emit(o, "  { const long oh = %ldL;\n", (long)(nblk * g.rows));
    emit_row_blocks(o, s, &g, (int)rrem);
    cg_emit(o, "  }\n");
  }
  cg_emit(o, "}\n");
  /* a task is a run of channels (a few per thread): the padding of the
   * scratch (each of its nb planes) is written once for the run, zero rows
   * above and below and the zero columns of each row, each row split into
   * its phases */
  long np = (long)(s->n * C);
  cg_emit(o, "static $T void $P_task(void *vc, int task, int tid) {\n  const $F_ctx *cx = (const $F_ctx *)vc;\n");
  cg_emit(o, "  float *xp0 = (float *)cx->sc.thr[tid];\n");
  if (nb == 1) {
    cg_emit(o, "  for (long r = 0; r < %ldL; r++) {\n    float *d = xp0 + r * %ldL;\n", (long)g.hp, (long)g.rs);
    cg_emit(o, "    if (r < %ldL || r >= %ldL) { memset(d, 0, sizeof(float) * %ldL); continue; }\n", (long)r0, (long)r1,
            (long)g.rs);
  } else { /* row r of plane r / hp */
    cg_emit(o, "  for (long r = 0; r < %ldL; r++) {\n    float *d = xp0 + r %% %ldL * %ldL + r / %ldL * %ldL;\n",
            (long)(nb * g.hp), (long)g.hp, (long)g.rs, (long)g.hp, (long)(g.hp * g.rs));
    cg_emit(o, "    if (r %% %ldL < %ldL || r %% %ldL >= %ldL) { memset(d, 0, sizeof(float) * %ldL); continue; }\n",
            (long)g.hp, (long)r0, (long)g.hp, (long)r1, (long)g.rs);
  }
  cg_emit_plane_row(o, &pr, "0.0f", false, CG_ROW_FILL);
  cg_emit(o, "  }\n");
  char npt[32];
  snprintf(npt, sizeof npt, "%ldL", np);
  emit_plane_loop(o, npt, (long)C, nb, g.hp * g.rs);
  emit_pack(o, s);
  cg_emit(o, "static $T int $P_run(hprt_pool *pool, const void *A, const void *B, void *C, const void *const *ep) {\n");
  cg_emit(o, "  $F_ctx cx;\n  cx.A = A; cx.B = B; cx.C = C; cx.ep = ep;\n");
  cg_emit(o, "  cx.ntasks = hprt_pool_size(pool) > 1 ? 4 * hprt_pool_size(pool) : 1; /* one fill on a thread alone */\n");
  cg_emit(o, "  if (cx.ntasks > %ld) cx.ntasks = %ld;\n", np, np);
  cg_emit(o, "  if (hprt_scratch_get(pool, 0, %ldUL, &cx.sc)) return -1;\n", (long)(nb * g.hp * g.rs * 4));
  cg_emit(o, "  hprt_pool_run(pool, cx.ntasks, $P_task, &cx);\n");
  cg_emit(o, "  hprt_scratch_put(&cx.sc);\n  return 0;\n}\n");
  if (o->isa->id != CGEN_ISA_SCALAR) cg_emit(o, "#endif /* HPRT_X86 */\n");
}

harp_status cg_dwconv(harp_error *e, const cgen_conv_spec *s, const char *fn, ut_str *out) {
  for (int i = 0; i < s->n_epi; i++)
    if (s->epi[i].kind == CGEN_EPI_BIAS_N)
      return ut_fail(e, HARP_E_UNSUPPORTED, NULL, "cgen_conv: bias along N (spatial) is not a conv epilogue");
  if (s->stride[1] > 16) /* a phase row per column of the stride, each with its own copy loops */
    return ut_fail(e, HARP_E_LIMIT, NULL, "cgen_conv: depthwise stride beyond 16 columns");
  dw_geo g; /* the widest variant's plane (16 lanes) is the largest */
  geometry(s, 16, 8, &g);
  if (g.hp * g.rs > (1L << 26))
    return ut_fail(e, HARP_E_LIMIT, NULL, "cgen_conv: depthwise plane beyond 256 MiB of scratch");
  if (s->kh * s->kw > 121) /* every tap is unrolled code and a register broadcast */
    return ut_fail(e, HARP_E_LIMIT, NULL, "cgen_conv: depthwise window beyond 11x11 taps");
  unsigned set = cg_isa_set(&s->tune);
  cg_out o = {.s = out, .F = fn, .bf16_cvt = s->tune.bf16_cvt && s->y_dtype == TINY_BF16 && (set >> CGEN_ISA_AVX512 & 1u)};
  cg_set_isa(&o, NULL);
  cg_emit_runtime(out);
  cg_emit(&o, "/* ---- %s: depthwise conv n%ld c%ld %ldx%ld, %ldx%ld window, %s*%s->%s ---- */\n", fn, (long)s->n,
          (long)s->c, (long)s->h, (long)s->w, (long)s->kh, (long)s->kw, tiny_dtype_name(s->x_dtype),
          tiny_dtype_name(s->w_dtype), tiny_dtype_name(s->y_dtype));
  cg_emit_scalar_conv(&o);
  cg_emit(&o, "typedef struct { const void *A, *B; void *C; const void *const *ep; hprt_scratch sc; long ntasks;%s } $F_ctx;\n",
          s->n_expr || s->h_expr || s->w_expr ? " long np, h, w, oh, ow, hp, wq, rs;" : "");
  for (int i = 0; i < CGEN_ISA_COUNT; i++) {
    if (!(set >> i & 1u)) continue;
    cg_set_isa(&o, cg_isa_get((cgen_isa)i));
    emit_variant(&o, s);
  }
  cg_emit_dispatch(&o, set, s->tune.force_isa, "hprt_pool *pool, const void *A, const void *B, void *C, const void *const *ep",
                   "pool, A, B, C, ep");
  if (s->prepack_w) {
    cg_emit_entry(&o, set, "long", "_pack_a_bytes", "void", "");
    cg_emit_entry(&o, set, "int", "_pack_a", "hprt_pool *pool, const void *A, void *Ap", "pool, A, Ap");
  }
  if (out->oom) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "cgen: out of memory");
  return HARP_OK;
}
