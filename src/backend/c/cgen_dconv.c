/* cgen_dconv.c — direct convolution kernel generator (AVX-512).
 * Needs: cgen_int.h (templating, vector layer, runtime; cgen_bf16.c's
 * interleave and weight pairs).  Gives: cg_dconv_plan, cg_dconv_variant
 * (the AVX-512 variant of a cgen_conv kernel), cg_dconv_pairs,
 * cg_dconv_cols_ok.
 *
 * bf16 (cg_dconv_variant's bf): the same kernel over channel pairs.  The
 * conv is seen as one of ceil(icg / 2) "channels" of 32-bit words (each
 * {bf16(x[2c]), bf16(x[2c + 1])}, cg_dconv_pairs), so the planner, the
 * packer and the tiles are the fp32 ones moving words; the input is
 * interleaved into pair planes first (cg_emit_bf16_ilv, one pass), the
 * weight into pairs before packing (cg_emit_bf16_wpairs), and the FMA is
 * vdpbf16ps on a broadcast pair word.  With fewer than CG_BF16_MIN_ICG
 * input channels (a stem) the pairs are adjacent columns of a row instead
 * (dconv_cols: the taps 2t and 2t + 1 one tap of dilation 2 over a plane
 * of words {x[j], x[j + 1]}, cg_emit_bf16_ilv_cols).
 *
 * A Schedule Plan's tile (spec tune.dconv, docs/plan.md §18) replaces the
 * choices of choose_nv and plan_blocking: NV and MR, the channel block, the
 * rows a task, the task order; one the registers cannot hold fails.
 *
 * Why: the implicit GEMM (cgen_gemm.c) packs an im2col panel that is reused
 * only M = OC/groups times; with few output channels the packing and the
 * L2 traffic of the streamed panel dominate.  Here nothing of the input is
 * copied: the vectors run along output channels and the input is broadcast
 * straight from NCHW, one scalar per (pixel, tap).
 *
 * Shape of the emitted code:
 *   a half-precision input is first widened into fp32 scratch by the pool
 *     (one pass; 10x faster than the GEMM's converting gathers at 64 channels);
 *   weights packed once per call (or once, prepack_w) to
 *     Wp[g][ocb][c][kh][kw][OB], OB = 16*NV output channels, zero-padded;
 *   tasks (n, g, ocb, block of rows), channel blocks fastest while all the
 *     weights fit L2 (the input is read once), else rows (one block's weights
 *     stay in L2), dynamic over the pool; input channels in blocks of ~20 KiB of
 *     weights when all of them would exceed 96 KiB (partial sums in a
 *     per-thread scratch between blocks); per row the valid kh range is
 *     computed (vertical padding = fewer rows), then the row is cut into
 *     tiles of MR pixels;
 *   micro-kernel per tile: MR x NV zmm accumulators; per (c, kh) the KW x NV
 *     weight vectors are loaded, then every input column j the tile touches
 *     is broadcast once and feeds each (pixel, kw) with p*SW + kw*DW == j
 *     ("row broadcast": KW*NV + MR*NV + 1 registers).  Taps that fall into
 *     the left/right padding are left out at generation time: tiles with
 *     the same pattern share one function, the interior tiles a loop;
 *   store: 16x16 in-register transposes turn [pixel][oc] into output-channel
 *     rows of MR contiguous pixels, the epilogue runs on those and they are
 *     stored in the output dtype (NCHW).
 */
#include <stdio.h>
#include <string.h>

#include "backend/c/cgen_int.h"

#define DC_MAX_KW 15   /* taps per row the signature tables hold */
#define DC_MAX_EDGE 16 /* edge tiles per side; more (huge padding): implicit GEMM */
#define DC_MAX_MR 28

/* One tile pattern: np pixels, and per kw the valid pixel range [lo, hi). */
typedef struct dc_sig {
  int np, lo[DC_MAX_KW], hi[DC_MAX_KW];
} dc_sig;

typedef struct dc {
  const cgen_conv_spec *s;  /* bf: the pair view (cg_dconv_pairs), the original at s0 */
  const cgen_conv_spec *s0;
  bool bf;                  /* channel pairs multiplied with vdpbf16ps (cgen_bf16.c's scheme) */
  bool rt;                  /* sizes read at run time (s->n_expr, h_expr, w_expr): sizes here are the
                               upper corner's; the input read in place or a zero-padded copy (rt_copies) */
  int64_t G, ICG, OCG, OH, OW, HW, OHW, K;
  int nv, ob, nob, mr, nt;
  int64_t cb, nrb;          /* channels per block (cb >= ICG: one block), row blocks */
  int rb;                   /* output rows per task */
  int npf;                  /* lines of the next block's weights prefetched per channel step (0: none) */
  int pfd;                  /* input rows prefetched this many channels ahead */
  bool ocb_fast;            /* task order: channel blocks fastest (else row blocks) */
  bool rtcopy;              /* rt: the input through a zero-padded copy (rt_copies) */
  bool edge;                /* rt, no copy, padding left or right: the kernels take the tile's columns left
                               (zl) and right (zr) of the row as arguments and broadcast zeros there */
  int nl, nr;               /* edge tiles on the left (0..nl-1) and right (nt-nr..nt-1) */
  int nsig, tsig[2 * DC_MAX_EDGE + 1]; /* edge tiles' signature index; last: interior */
  dc_sig sig[2 * DC_MAX_EDGE + 1];
} dc;

static void tile_sig(const dc *d, int64_t t, dc_sig *g) {
  const cgen_conv_spec *s = d->s;
  int64_t ow0 = t * d->mr;
  memset(g, 0, sizeof *g);
  g->np = (int)(d->OW - ow0 < d->mr ? d->OW - ow0 : d->mr);
  for (int kw = 0; kw < s->kw; kw++) {
    int lo = g->np, hi = 0;
    for (int p = 0; p < g->np; p++) {
      int64_t iw = (ow0 + p) * s->stride[1] - s->pad[1] + kw * s->dil[1];
      if (iw >= 0 && iw < s->w) {
        if (p < lo) lo = p;
        hi = p + 1;
      }
    }
    g->lo[kw] = lo < hi ? lo : 0, g->hi[kw] = lo < hi ? hi : 0;
  }
}

static bool sig_interior(const dc *d, const dc_sig *g) {
  if (g->np != d->mr) return false;
  for (int kw = 0; kw < d->s->kw; kw++)
    if (g->lo[kw] != 0 || g->hi[kw] != g->np) return false;
  return true;
}

static int sig_index(dc *d, const dc_sig *g) {
  for (int i = 0; i < d->nsig; i++)
    if (!memcmp(&d->sig[i], g, sizeof *g)) return i;
  d->sig[d->nsig] = *g;
  return d->nsig++;
}

/* Whether the direct kernel with run-time sizes reads a zero-padded copy
 * of the input: a half-precision input (widened there), or more columns
 * of padding than a window spans (a column could lie left and right of
 * the row at once).  Else it reads the input itself: the kernel rows
 * inside it (emit_kh_range), and the columns left or right of it as
 * zeros (d->edge). */
static bool rt_copies(const cgen_conv_spec *s) {
  return s->x_dtype != TINY_FP32 || s->pad[1] + s->pad[3] > (s->kw - 1) * s->dil[1];
}

/* The tile patterns of a conv whose sizes are read at run time (d->rt,
 * a zero-padded input: every tile reads all of its taps): every width from
 * mr down to rt_half(d) (a row of ow >= rt_half pixels is cut into
 * ceil(ow / mr) tiles of even widths, which lie in that range: 14 -> 7 + 7,
 * not mr = 11 and a tile of 3), then half of the last, its half ... 1 (a
 * narrower row in those, each taken when it fits). */
static int rt_half(const dc *d) { return (d->mr + 1) / 2; }

static void rt_patterns(dc *d) {
  dc_sig g;
  d->nsig = 0;
  for (int np = d->mr;; np = np > rt_half(d) ? np - 1 : (np + 1) / 2) {
    memset(&g, 0, sizeof g);
    g.np = np;
    for (int kw = 0; kw < d->s->kw; kw++) g.hi[kw] = np;
    d->sig[d->nsig++] = g;
    if (np == 1) break;
  }
  d->tsig[2 * DC_MAX_EDGE] = 0;
}

/* d's NV (1 or 2 vectors of output channels) and MR (pixels a tile) for
 * spec s, nr the forced kernel's NR (0: any), forced: the direct kernel
 * was asked for (its MR bounds the tile); *bmx the chosen NV's register
 * bound on MR.  False when no NV leaves registers for the weights. */
static bool choose_nv(dc *d, const cgen_conv_spec *s, bool forced, int nr, int *bmx) {
  /* NV 1 or 2 vectors of output channels: the one that issues fewer
   * instructions per output row and input channel.  Per (c, kh) a tile of np
   * pixels issues np*KW*NV FMAs and loads KW*NV weight vectors plus one
   * broadcast per input column it reads, (np-1)*SW + (KW-1)*DW + 1 of them;
   * summed over a row's tiles and the channel blocks (FMAs on the padded
   * channels of the last block count too).  NV 2 halves the broadcasts per
   * FMA, which a stride-2 tile needs most (its 28 pixels read 57 columns):
   * 10 x 32 runs 3x3 s2 128->128 56->28 in 0.93 ms where 28 x 16 took
   * 1.12, and stride 1 gains too (128 @28 0.88 -> 0.81 ms, 64 @56 0.90 ->
   * 0.82, 2 threads). */
  double best = -1;
  for (int nv = 1; nv <= 2; nv++) {
    int mx = (31 - (int)s->kw * nv) / nv; /* registers: MR*NV acc, KW*NV weights, a broadcast */
    if (mx > DC_MAX_MR) mx = DC_MAX_MR;
    if (forced && s->tune.mr > 0 && s->tune.mr < mx) mx = s->tune.mr;
    if (mx < 1 || (nr && nr != 16 * nv)) continue;
    int64_t nt = (d->OW + mx - 1) / mx, nob = (d->OCG + 16 * nv - 1) / (16 * nv);
    int64_t mr = (d->OW + nt - 1) / nt; /* even tiles: 14 -> 7 + 7 */
    double cost = 0;
    for (int64_t q = 0; q < d->OW; q += mr) {
      int64_t np = d->OW - q < mr ? d->OW - q : mr;
      cost += (double)(np * s->kw * nv + s->kw * nv + (np - 1) * s->stride[1] + (s->kw - 1) * s->dil[1] + 1);
    }
    cost *= (double)nob;
    if (best < 0 || cost < best - 1e-9) best = cost, d->nv = nv, d->mr = (int)mr, *bmx = mx;
  }
  return best >= 0;
}

/* Whether spec s carries a Schedule Plan's tile for this kernel
 * (tune.dconv, contract_plan_c.c): its fields then replace the choices below. */
static bool plan_given(const cgen_conv_spec *s) {
  return s->tune.dconv.px || s->tune.dconv.oc || s->tune.dconv.cb || s->tune.dconv.rows || s->tune.dconv.order;
}

/* The plan's register tile (s->tune.dconv: px pixels x oc output channels)
 * into d's NV and MR, *bmx the register bound on MR at that NV; false
 * (*why) when oc is not 16 or 32 or px pixels do not fit the registers
 * (MR*NV accumulators, KW*NV weights and a broadcast in 32). */
static bool plan_regs(dc *d, const cgen_conv_spec *s, int *bmx, const char **why) {
  int oc = s->tune.dconv.oc, px = s->tune.dconv.px, nv = oc / 16;
  if (oc != 16 && oc != 32) return *why = "the plan's warp tile: the direct kernel takes 16 or 32 output channels", false;
  int mx = (31 - (int)s->kw * nv) / nv;
  if (mx > DC_MAX_MR) mx = DC_MAX_MR;
  if (px < 1 || px > mx)
    return *why = "the plan's warp tile: more pixels than the registers hold (pixels x vectors + taps x vectors + 1 <= 32)",
           false;
  d->nv = nv, d->mr = px > d->OW ? (int)d->OW : px, *bmx = mx;
  return true;
}

/* d's channel blocking for spec s (forced: the direct kernel's KC was
 * asked for): the channel block cb, the rows rb a task, the weight
 * prefetch npf and input prefetch distance pfd, and the task order
 * ocb_fast. */
static void plan_blocking(dc *d, const cgen_conv_spec *s, bool forced) {
  /* A block's weights (all channels up to 96 KiB, else ~20 KiB, an L1's
   * worth) are reused by every tile of rb rows; partial sums wait in a
   * per-thread scratch between channel blocks.  Measured: 147 KiB of weights
   * streamed per tile (14x14, 256 channels) lose 30%; blocking 73 KiB costs
   * nothing, blocking at 32 x 12 tiles loses 5-10%. */
  int64_t wch = s->kh * s->kw * d->ob * 4; /* weight bytes per input channel */
  d->cb = d->ICG * wch <= 96 * 1024 ? d->ICG : 20480 / wch >= 8 ? 20480 / wch / 8 * 8 : 20480 / wch;
  if (forced && s->tune.kc > 0) d->cb = s->tune.kc;
  if (s->tune.dconv.cb > 0) d->cb = s->tune.dconv.cb; /* the plan's tile K */
  if (d->cb < 1) d->cb = 1;
  if (d->cb > d->ICG) d->cb = d->ICG;
  d->rb = 1;
  if (d->cb < d->ICG) {
    int64_t row = (int64_t)d->nt * d->mr * d->ob * 4, ntask = s->n * d->G * d->nob, rb = 16384 / row;
    rb = rb < 1 ? 1 : rb > d->OH ? d->OH : rb;
    while (rb > 1 && ntask * ((d->OH + rb - 1) / rb) < 8) rb = (rb + 1) / 2; /* work for every thread */
    int64_t nrb = (d->OH + rb - 1) / rb;
    d->rb = (int)((d->OH + nrb - 1) / nrb); /* even blocks: 14 -> 7 + 7 */
  }
  if (s->tune.dconv.rows > 0) d->rb = (int)(s->tune.dconv.rows < d->OH ? s->tune.dconv.rows : d->OH); /* the plan's */
  d->nrb = (d->OH + d->rb - 1) / d->rb;
  /* A block's weights (cb channels of one output channel block) are read
   * from memory by its first tile and from L1 by the others: a burst that
   * the hardware prefetchers do not run ahead of (a 3x3 512 @7 layer has
   * 9.4 MB of weights, read from DRAM in a whole model's run).  The calls
   * of a block (rows x tiles, cb channel steps each) prefetch the weights
   * that follow it in memory (the next channels', or the next output
   * channel block's), npf lines a channel step, so they stream while the
   * block computes.  Blocked channels always (the next block is the next
   * use); whole blocks when the weights exceed L2 and a task is all of the
   * block's rows (the next task's block is the next in memory). */
  int64_t wall = d->G * d->nob * d->K * d->ob * 4;
  if (d->cb < d->ICG || (wall > 1024 * 1024 && d->nrb == 1)) {
    int64_t lines = (d->cb * wch + 63) / 64, steps = (int64_t)d->rb * d->nt * d->cb;
    d->npf = (int)((lines + steps - 1) / steps);
  }
  /* The input rows of a channel step are prefetched pfd channels ahead,
   * ~128 cycles of FMAs (a step of a tile issues MR x KW x NV per kernel
   * row, two a cycle): one channel for 3x3 tiles of 10 to 14 pixels, ~10
   * for a 1x1's, whose steps are short. */
  {
    int64_t cyc = (int64_t)d->mr * s->kh * s->kw * d->nv / 2;
    int64_t pfd = cyc > 0 ? 128 / cyc : 16;
    d->pfd = (int)(pfd < 1 ? 1 : pfd > 16 ? 16 : pfd);
  }
  /* Consecutive tasks share the input rows when the channel blocks are
   * fastest, one block's weights when the rows are: the first while all of
   * a group's weights stay in L2 (else they would come from L3 per row), so
   * the input is read once, not once per channel block (56x56x64: +5%). */
  d->ocb_fast = d->nob > 1 && d->nob * d->K * d->ob * 4 <= 512 * 1024;
  if (s->tune.dconv.order && d->nob > 1) d->ocb_fast = s->tune.dconv.order == 1; /* the plan's (one block: no order) */
}

/* d's tile signatures: the padded tiles at the left (nl) and right (nr)
 * of a row and the interior one; false (*why) when more than DC_MAX_EDGE
 * tiles on a side are padded. */
static bool edge_tiles(dc *d, const char **why) {
  dc_sig g;
  int nl = 0, nrt = 0;
  while (nl < d->nt) {
    tile_sig(d, nl, &g);
    if (sig_interior(d, &g)) break;
    if (nl == DC_MAX_EDGE) return *why = "too many padded tiles", false;
    d->tsig[nl++] = sig_index(d, &g);
  }
  while (nl + nrt < d->nt) {
    tile_sig(d, d->nt - 1 - nrt, &g);
    if (sig_interior(d, &g)) break;
    if (nrt == DC_MAX_EDGE) return *why = "too many padded tiles", false;
    d->tsig[DC_MAX_EDGE + nrt++] = sig_index(d, &g);
  }
  d->nl = nl, d->nr = nrt;
  if (nl + nrt < d->nt) {
    tile_sig(d, nl, &g);
    d->tsig[2 * DC_MAX_EDGE] = sig_index(d, &g);
  }
  return true;
}

/* Blocking and the tile patterns; false (with *why) when the direct kernel
 * does not apply. */
static bool plan_tiles(dc *d, const cgen_conv_spec *s, const char **why) {
  memset(d, 0, sizeof *d);
  d->s = s;
  d->rt = s->n_expr || s->h_expr || s->w_expr;
  if (!cgen_conv_out_hw(s, &d->OH, &d->OW)) return *why = "window does not fit", false;
  if (s->kw > DC_MAX_KW) return *why = "kernel wider than 15 taps", false;
  d->G = s->groups, d->ICG = s->c / s->groups, d->OCG = s->oc / s->groups;
  d->HW = s->h * s->w, d->OHW = d->OH * d->OW, d->K = d->ICG * s->kh * s->kw;
  /* mr / nr are a GEMM micro-tile unless the direct kernel was asked for */
  bool forced = s->tune.conv_algo == CGEN_CONV_DIRECT;
  int nr = forced ? s->tune.nr : 0;
  int bmx = 0; /* the chosen nv's register bound on mr */
  if (!d->rt && (s->tune.dconv.px || s->tune.dconv.oc)) {
    if (!plan_regs(d, s, &bmx, why)) return false;
  } else if (!choose_nv(d, s, forced, nr, &bmx)) {
    return *why = "the kernel's weights do not fit the registers", false;
  }
  if (d->rt) d->mr = bmx; /* a run's row: even tiles of at most bmx pixels (rt_patterns) */
  d->ob = 16 * d->nv;
  d->nob = (int)((d->OCG + d->ob - 1) / d->ob);
  if (s->n * d->G * d->OH * d->nob >= (1L << 30)) return *why = "too many row tasks", false;
  d->nt = (int)((d->OW + d->mr - 1) / d->mr);
  plan_blocking(d, s, forced);
  d->rtcopy = d->rt && rt_copies(s);
  d->edge = d->rt && !d->rtcopy && (s->pad[1] || s->pad[3]);
  if (d->rt) return rt_patterns(d), true;
  return edge_tiles(d, why);
}

bool cg_dconv_plan(const cgen_conv_spec *s, const char **why) {
  dc d;
  *why = NULL;
  if (s->tune.conv_algo == CGEN_CONV_GEMM) return *why = "implicit GEMM asked for", false;
  /* a plan's tile the kernel refuses: still the direct kernel, whose
   * cg_dconv_variant then fails with *why (the plan is not applied) */
  if (!plan_tiles(&d, s, why)) return plan_given(s) && !d.rt;
  if (s->tune.conv_algo == CGEN_CONV_DIRECT) return *why = "direct asked for", true;
  /* Measured (single thread, bench/RESULTS.md): with overlapping windows the
   * direct kernel beats the implicit GEMM on every shape tried, 1.15-1.8x on
   * 3x3 layers of 16 to 512 channels, stride 1 or 2, 1.6x on a 7x7 stem; a
   * 1x1 window gives each broadcast a single tap: 0.64-1.03x, mostly a loss. */
  if (s->kw <= s->stride[1]) {
    /* A 1x1 window (groups 1, whole vectors of output channels): the
     * implicit GEMM's vectors run along the pixels, so a count short of a
     * multiple of 16 pads lanes (7x7: 64 for 49), and it packs the input
     * as its B panel, each element of which serves the output channels of
     * a task.  The direct kernel pads nothing here and reads the input as
     * it is.  Measured in ResNet-50 (2 threads, in a whole run): direct
     * wins at 7x7 (2048->512: 0.30 -> 0.24 ms) and from 256 input channels
     * on at every size (256->64 @56 0.25 -> 0.22, 1024->256 @14 0.25 ->
     * 0.22, the s2 downsamples 0.57 -> 0.49); with 64 input channels into
     * 256 @56 it loses (0.24 -> 0.29: per tile few channel steps to spread
     * its transposes and 14-pixel stores over), at 128 it is even. */
    int64_t P = d.OH * d.OW, padded = (P + 15) / 16 * 16;
    if (s->kh == 1 && s->kw == 1 && s->groups == 1 && d.OCG % 16 == 0 && (padded * 10 > P * 11 || d.ICG >= 256))
      return *why = padded * 10 > P * 11 ? "1x1 over few pixels (the GEMM's pixel vectors would be padded)"
                                         : "1x1 with 256 or more input channels", true;
    return *why = "windows do not overlap along a row (1x1): implicit GEMM", false;
  }
  return *why = "overlapping windows: direct", true;
}

/* ---- emission ------------------------------------------------------------ */
/* Weights OIHW (any dtype) -> Wp[g][ocb][k][OB] fp32, k = (c*KH + kh)*KW + kw:
 * 16 output channels x 16 k loaded as rows, transposed, stored as k rows. */
static void emit_pack(cg_out *o, const dc *d) {
  const cgen_conv_spec *s = d->s;
  const char *wt = cg_ctype(s->w_dtype), *sx = cg_vsuffix(s->w_dtype);
  cg_emit(o, "static $T void $P_dpack(void *vc, int task, int tid) {\n  (void)tid;\n");
  cg_emit(o, "  const $P_dctx *cx = (const $P_dctx *)vc;\n");
  cg_emit(o, "  long ocb = task %% %dL, g = task / %dL;\n", d->nob, d->nob);
  cg_emit(o, "  const %s *A = (const %s *)cx->A + (g * %ldL + ocb * %dL) * %ldL;\n", wt, wt, (long)d->OCG, d->ob,
          (long)d->K);
  cg_emit(o, "  float *dst = cx->Wp + (long)task * %ldL;\n", (long)(d->K * d->ob));
  cg_emit(o, "  int nrow = %ldL - ocb * %dL < %d ? (int)(%ldL - ocb * %dL) : %d;\n", (long)d->OCG, d->ob, d->ob,
          (long)d->OCG, d->ob, d->ob);
  cg_emit(o, "  for (long k0 = 0; k0 < %ldL; k0 += 16) {\n", (long)d->K);
  cg_emit(o, "    int kn = %ldL - k0 < 16 ? (int)(%ldL - k0) : 16;\n", (long)d->K, (long)d->K);
  cg_emit(o, "    for (int v = 0; v < %d; v++) {\n      __m512 r[16];\n", d->nv);
  cg_emit(o, "      for (int i = 0; i < 16; i++) r[i] = v * 16 + i < nrow ? $P_ldn%s(A + (v * 16 + i) * %ldL + k0, kn)"
             " : _mm512_setzero_ps();\n", sx, (long)d->K);
  cg_emit(o, "      $P_tr16(r);\n");
  cg_emit(o, "      for (int i = 0; i < kn; i++) _mm512_storeu_ps(dst + (k0 + i) * %dL + v * 16, r[i]);\n", d->ob);
  cg_emit(o, "    }\n  }\n}\n");
}

/* The epilogue on x (16 pixels q.. of output channel o of this group, cnt valid)
 * and the store. */
static void emit_store_row(cg_out *o, const dc *d, int cnt) {
  const cgen_conv_spec *s = d->s;
  char ohw[32]; /* the output plane: a constant, or this run's (tt) */
  if (d->rt) snprintf(ohw, sizeof ohw, "tt->ohw");
  else snprintf(ohw, sizeof ohw, "%ldL", (long)d->OHW);
  for (int i = 0; i < s->n_epi; i++) {
    const cgen_epi *ep = &s->epi[i];
    const char *et = cg_ctype(ep->dtype), *sx = cg_vsuffix(ep->dtype);
    if (cg_emit_epi_common(o, ep, i, "oc", "x")) continue;
    switch (ep->kind) {
      case CGEN_EPI_RESIDUAL:
        cg_emit(o, "      { const %s *rp = (const %s *)tt->ep[%d] + oc * %s + q;\n", et, et, i, ohw);
        if (cnt == 16) cg_emit(o, "        x = x %s $P_ld%s(rp); }\n", ep->mul ? "*" : "+", sx);
        else cg_emit(o, "        x = x %s $P_ldn%s(rp, %d); }\n", ep->mul ? "*" : "+", sx, cnt);
        break;
      default: break; /* BIAS_N: no conv epilogue (cgen_conv refuses it) */
    }
  }
  const char *yt = cg_ctype(s->y_dtype), *ys = cg_vsuffix(s->y_dtype);
  cg_emit(o, "      %s *yq = (%s *)tt->y + oc * %s + q;\n", yt, yt, ohw);
  if (cnt == 16) cg_emit(o, "      $P_st%s(yq, x);\n", ys);
  else cg_emit(o, "      $P_stn%s(yq, x, %d);\n", ys, cnt);
}

/* Is pixel p of pattern g fed by tap kw? */
static bool valid(const dc_sig *g, int p, int kw) { return p >= g->lo[kw] && p < g->hi[kw]; }

/* The prefetch of the input rows pfd channels ahead that d's tile reads,
 * its columns jlo..jhi (jlo < 0: none), each row rs bytes on (text). */
static void emit_prefetch_rows(cg_out *o, const dc *d, int jlo, int jhi, const char *rs) {
  if (jlo < 0) return;
  /* the rows of the channel pfd ahead: their stride (H*W floats) is beyond
   * what the hardware prefetchers follow.  Every line the tile reads: a stride-2
   * tile of 28 pixels spans 57 columns, and prefetching only its first
   * and last column left two lines in the middle to miss (3x3 s2
   * 128->128 56->28, 28 x 16 tiles: 1.38 -> 1.08 ms) */
  cg_emit(o, "    for (int r = 0; r < nkh; r++) {\n");
  for (int j = jlo, more = 1; more; more = j < jhi, j = j + 16 < jhi ? j + 16 : jhi)
    if (d->rt)
      cg_emit(o, "      __builtin_prefetch((const void *)(xa + %du * hs + %du + (uintptr_t)r * rs));\n", d->pfd, j * 4);
    else
      cg_emit(o, "      __builtin_prefetch((const void *)(xa + %ldu + (uintptr_t)r * %s));\n", (long)(d->pfd * d->HW + j) * 4, rs);
  cg_emit(o, "    }\n");
}

/* The FMAs of d's tile pattern g for one kernel row: per input column j in
 * jlo..jhi (of 0..jmax) one broadcast (zero where padding may lie outside
 * the row) into every accumulator whose pixel and tap read it. */
static void emit_taps(cg_out *o, const dc *d, const dc_sig *g, int jlo, int jhi, int jmax) {
  const cgen_conv_spec *s = d->s;
  int np = g->np, nv = d->nv, kw_n = (int)s->kw, sw = (int)s->stride[1], dw = (int)s->dil[1];
  for (int j = jlo; j >= 0 && j <= jhi; j++) {
    bool any = false;
    for (int p = 0; p < np; p++)
      for (int kw = 0; kw < kw_n; kw++)
        if (p * sw + kw * dw == j && valid(g, p, kw)) {
          if (!any && d->bf) cg_emit(o, "      { __m512bh b = (__m512bh)_mm512_set1_epi32(((const int *)xr)[%d]);", j);
          else if (!any && d->edge && (j < s->pad[1] || jmax - j < s->pad[3])) /* maybe outside the row */
            cg_emit(o, "      { __m512 b = _mm512_set1_ps(*(%s > %d ? &zf : xr + %d));", j < s->pad[1] ? "zl" : "zr",
                    j < s->pad[1] ? j : jmax - j, j);
          else if (!any) cg_emit(o, "      { __m512 b = _mm512_set1_ps(xr[%d]);", j);
          any = true;
          for (int v = 0; v < nv; v++)
            if (d->bf) cg_emit(o, " a%d_%d = _mm512_dpbf16_ps(a%d_%d, b, w%d_%d);", p, v, p, v, kw, v);
            else cg_emit(o, " a%d_%d = _mm512_fmadd_ps(b, w%d_%d, a%d_%d);", p, v, kw, v, p, v);
        }
    if (any) cg_emit(o, " }\n");
  }
}

/* The end of d's micro-kernel for np pixels: blocked, the accumulators
 * parked in the scratch until the last channel block; then transposed to
 * rows of output channels and stored through the epilogue. */
static void emit_store_tile(cg_out *o, const dc *d, int np, bool blocked) {
  int nv = d->nv;
  if (blocked) {
    cg_emit(o, "  if (!last) {\n");
    for (int p = 0; p < np; p++)
      for (int v = 0; v < nv; v++) cg_emit(o, "    _mm512_store_ps(ws + %d, a%d_%d);\n", (p * nv + v) * 16, p, v);
    cg_emit(o, "    return;\n  }\n");
  }
  /* [pixel][oc] -> oc rows of pixels, 16 x 16 at a time */
  for (int p0 = 0; p0 < np; p0 += 16) {
    int cnt = np - p0 < 16 ? np - p0 : 16;
    for (int v = 0; v < nv; v++) {
      cg_emit(o, "  {\n    __m512 r[16] = {");
      for (int i = 0; i < 16; i++)
        if (i < cnt) cg_emit(o, "a%d_%d%s", p0 + i, v, i < 15 ? ", " : "");
        else cg_emit(o, "_mm512_setzero_ps()%s", i < 15 ? ", " : "");
      cg_emit(o, "};\n    $P_tr16(r);\n");
      cg_emit(o, "    long q = q0 + %d;\n", p0);
      cg_emit(o, "#pragma GCC unroll 16\n    for (int k = 0; k < 16; k++) {\n");
      cg_emit(o, "      long oc = o0 + %d + k;\n", v * 16);
      if (d->OCG % d->ob) cg_emit(o, "      if (oc >= %ldL) break;\n", (long)d->OCG);
      cg_emit(o, "      __m512 x = r[k];\n");
      emit_store_row(o, d, cnt);
      cg_emit(o, "    }\n  }\n");
    }
  }
}

/* The micro-kernel of d's tile pattern si: the accumulators of its
 * pixels over the channel steps (taps, prefetches), then stored, or
 * parked in the scratch between channel blocks. */
static void emit_kernel(cg_out *o, const dc *d, int si) {
  const cgen_conv_spec *s = d->s;
  const dc_sig *g = &d->sig[si];
  int np = g->np, nv = d->nv, kw_n = (int)s->kw, sw = (int)s->stride[1], dw = (int)s->dil[1];
  bool blocked = d->cb < d->ICG;
  cg_emit(o, "static %s void $P_dk%d(const $P_dtt *tt, const float *restrict xr0, long col0,"
             " const float *restrict wt, int nkh, long o0, long q0%s%s%s) {\n", d->bf ? CG_BF16_ATTR : "$T", si,
          blocked ? ", long ncb, float *restrict ws, int first, int last" : "", d->npf ? ", uintptr_t pf" : "",
          d->edge ? ", int zl, int zr" : "");
  if (d->edge) cg_emit(o, "  static const float zf = 0.0f;\n");
  /* the input's plane and row steps in bytes: constants, or the padded copy's (run-time sizes) */
  char hs[32], rs[32];
  if (d->rt) {
    cg_emit(o, "  const uintptr_t hs = tt->hs, rs = tt->rs;\n");
    snprintf(hs, sizeof hs, "hs"), snprintf(rs, sizeof rs, "rs");
  } else {
    snprintf(hs, sizeof hs, "%ldu", (long)d->HW * 4), snprintf(rs, sizeof rs, "%ldu", (long)(s->dil[0] * s->w) * 4);
  }
  for (int p = 0; p < np; p++)
    for (int v = 0; v < nv; v++)
      if (blocked)
        cg_emit(o, "  __m512 a%d_%d = first ? _mm512_setzero_ps() : _mm512_load_ps(ws + %d);\n", p, v, (p * nv + v) * 16);
      else
        cg_emit(o, "  __m512 a%d_%d = _mm512_setzero_ps();\n", p, v);
  /* the input columns this pattern reads, and the first/last for the prefetch */
  int jmax = (np - 1) * sw + (kw_n - 1) * dw, jlo = -1, jhi = -1;
  for (int j = 0; j <= jmax; j++)
    for (int p = 0; p < np; p++)
      for (int kw = 0; kw < kw_n; kw++)
        if (p * sw + kw * dw == j && valid(g, p, kw)) {
          if (jlo < 0) jlo = j;
          jhi = j;
        }
  /* addresses as integers: the tile's column 0 may lie left of the row (only
   * valid columns are loaded), and the prefetch runs one channel ahead */
  cg_emit(o, "  uintptr_t xa = (uintptr_t)xr0 + (uintptr_t)col0 * 4u;\n");
  if (blocked) cg_emit(o, "  for (long c = 0; c < ncb; c++, xa += %s) {\n", hs);
  else cg_emit(o, "  for (long c = 0; c < %ldL; c++, xa += %s) {\n", (long)d->ICG, hs);
  cg_emit(o, "    const float *wc = wt + c * %ldL;\n", (long)(s->kh * s->kw * d->ob));
  /* the next block's weights, npf lines a channel step (prefetches never fault) */
  for (int l = 0; l < d->npf; l++)
    cg_emit(o, "    __builtin_prefetch((const void *)(pf + (uintptr_t)c * %du + %du));\n", d->npf * 64, l * 64);
  emit_prefetch_rows(o, d, jlo, jhi, rs);
  cg_emit(o, "    for (int r = 0; r < nkh; r++) {\n");
  cg_emit(o, "      const float *xr = (const float *)(xa + (uintptr_t)r * %s);\n", rs);
  cg_emit(o, "      const float *wr = wc + r * %dL;\n", kw_n * d->ob);
  for (int kw = 0; kw < kw_n; kw++)
    for (int v = 0; v < nv; v++)
      cg_emit(o, "      %s w%d_%d = %s(wr + %d);\n", d->bf ? "__m512bh" : "__m512", kw, v, d->bf ? "(__m512bh)_mm512_loadu_ps" : "_mm512_loadu_ps",
              kw * d->ob + v * 16);
  emit_taps(o, d, g, jlo, jhi, jmax);
  for (int kw = 0; kw < kw_n; kw++)
    for (int v = 0; v < nv; v++) cg_emit(o, "      (void)w%d_%d;\n", kw, v);
  cg_emit(o, "    }\n  }\n");
  emit_store_tile(o, d, np, blocked);
  cg_emit(o, "}\n");
}

/* Vertical padding: the kernel rows [kh0, kh1) of output row oh that land
 * inside the input of h rows (an expression: a constant, or this run's). */
static void emit_kh_range(cg_out *o, const dc *d, const char *h) {
  const cgen_conv_spec *s = d->s;
  cg_emit(o, "  long ih = oh * %ldL - %ldL;\n  int kh0 = 0, kh1 = %d;\n", (long)s->stride[0], (long)s->pad[0], (int)s->kh);
  cg_emit(o, "  while (kh0 < %d && ih + kh0 * %ldL < 0) kh0++;\n", (int)s->kh, (long)s->dil[0]);
  cg_emit(o, "  while (kh1 > kh0 && ih + (kh1 - 1) * %ldL >= %s) kh1--;\n", (long)s->dil[0], h);
}

static void emit_task(cg_out *o, const dc *d) {
  const cgen_conv_spec *s = d->s;
  bool blocked = d->cb < d->ICG;
  int tw = d->mr * d->nv * 16; /* scratch floats per tile */
  cg_emit(o, "static $T void $P_dtask(void *vc, int task, int tid) {\n  (void)tid;\n");
  cg_emit(o, "  const $P_dctx *cx = (const $P_dctx *)vc;\n");
  if (d->ocb_fast)
    cg_emit(o, "  long ocb = task %% %dL, r = task / %dL, rb = r %% %ldL; r /= %ldL;\n", d->nob, d->nob, (long)d->nrb,
            (long)d->nrb);
  else
    cg_emit(o, "  long rb = task %% %ldL, r = task / %ldL, ocb = r %% %dL; r /= %dL;\n", (long)d->nrb, (long)d->nrb, d->nob,
            d->nob);
  cg_emit(o, "  long g = r %% %ldL, n = r / %ldL;\n", (long)d->G, (long)d->G);
  cg_emit(o, "  $P_dtt tt;\n");
  cg_emit(o, "  tt.y = (%s *)cx->C + (n * %ldL + g * %ldL) * %ldL;\n", cg_ctype(s->y_dtype), (long)s->oc, (long)d->OCG,
          (long)d->OHW);
  for (int i = 0; i < s->n_epi; i++) {
    const cgen_epi *ep = &s->epi[i];
    const char *et = cg_ctype(ep->dtype);
    if (ep->kind == CGEN_EPI_RESIDUAL)
      cg_emit(o, "  tt.ep[%d] = (const %s *)cx->ep[%d] + (n * %ldL + g * %ldL) * %ldL;\n", i, et, i, (long)s->oc,
              (long)d->OCG, (long)d->OHW);
    else if (ep->kind == CGEN_EPI_BIAS_M)
      cg_emit(o, "  tt.ep[%d] = (const %s *)cx->ep[%d] + g * %ldL;\n", i, et, i, (long)d->OCG);
    else cg_emit(o, "  tt.ep[%d] = 0;\n", i);
  }
  cg_emit(o, "  const float *x = (const float *)cx->B + (n * %ldL + g * %ldL) * %ldL;\n", (long)s->c, (long)d->ICG,
          (long)d->HW);
  cg_emit(o, "  const float *wb = cx->Wp + (g * %dL + ocb) * %ldL;\n", d->nob, (long)(d->K * d->ob));
  cg_emit(o, "  long o0 = ocb * %dL, oh1 = rb * %dL + %dL < %ldL ? rb * %dL + %dL : %ldL;\n", d->ob, d->rb, d->rb,
          (long)d->OH, d->rb, d->rb, (long)d->OH);
  const char *bargs = "";
  if (blocked) {
    cg_emit(o, "  float *ws = (float *)cx->sc.thr[tid];\n");
    cg_emit(o, "  for (long c0 = 0; c0 < %ldL; c0 += %ldL) {\n", (long)d->ICG, (long)d->cb);
    cg_emit(o, "  long ncb = %ldL - c0 < %ldL ? %ldL - c0 : %ldL;\n", (long)d->ICG, (long)d->cb, (long)d->ICG, (long)d->cb);
    cg_emit(o, "  int first = c0 == 0, last = c0 + ncb == %ldL;\n", (long)d->ICG);
    bargs = ", ncb, ws + ((oh - rb * %dL) * %dL + %s) * %dL, first, last";
  } else {
    cg_emit(o, "  const long c0 = 0, ncb = %ldL;\n  (void)ncb;\n", (long)d->ICG);
  }
  /* the weights after this block in memory (the next channels', or the next
   * output channel block's): this call's share of them */
  if (d->npf)
    cg_emit(o, "  uintptr_t pfb = (uintptr_t)wb + (uintptr_t)(c0 + ncb) * %ldu;\n", (long)(s->kh * s->kw * d->ob) * 4);
  cg_emit(o, "  for (long oh = rb * %dL; oh < oh1; oh++) {\n", d->rb);
  char hx[24];
  snprintf(hx, sizeof hx, "%ldL", (long)s->h);
  emit_kh_range(o, d, hx);
  cg_emit(o, "  const float *xr0 = x + c0 * %ldL + (kh1 > kh0 ? (ih + kh0 * %ldL) * %ldL : 0);\n", (long)d->HW,
          (long)s->dil[0], (long)s->w);
  cg_emit(o, "  const float *wt = wb + c0 * %ldL + kh0 * %ldL;\n", (long)(s->kh * s->kw * d->ob), (long)(s->kw * d->ob));
  cg_emit(o, "  int nkh = kh1 - kh0;\n  long q0 = oh * %ldL;\n", (long)d->OW);
  long step = (long)d->mr * s->stride[1];
  char ba[320], tix[32];
  for (int t = 0; t < d->nt; t++) {
    bool loop = t == d->nl && d->nl + d->nr < d->nt;
    if (t >= d->nl && t < d->nt - d->nr && !loop) continue; /* interior: the loop below */
    int si = t < d->nl ? d->tsig[t] : loop ? d->tsig[2 * DC_MAX_EDGE] : d->tsig[DC_MAX_EDGE + (d->nt - 1 - t)];
    if (loop) snprintf(tix, sizeof tix, "t");
    else snprintf(tix, sizeof tix, "%d", t);
    ba[0] = 0;
    if (blocked) snprintf(ba, sizeof ba, bargs, d->rb, d->nt, tix, tw);
    if (d->npf) {
      size_t l = strlen(ba);
      snprintf(ba + l, sizeof ba - l, ", pfb + (uintptr_t)(((oh - rb * %dL) * %dL + %s) * ncb) * %du", d->rb, d->nt, tix,
               d->npf * 64);
    }
    if (loop)
      cg_emit(o, "  for (long t = %d; t < %d; t++) $P_dk%d(&tt, xr0, t * %ldL - %ldL, wt, nkh, o0, q0 + t * %dL%s);\n",
              d->nl, d->nt - d->nr, si, step, (long)s->pad[1], d->mr, ba);
    else
      cg_emit(o, "  $P_dk%d(&tt, xr0, %ldL, wt, nkh, o0, q0 + %ldL%s);\n", si, t * step - (long)s->pad[1], (long)t * d->mr,
              ba);
  }
  cg_emit(o, "  }\n");
  if (blocked) cg_emit(o, "  }\n");
  cg_emit(o, "}\n");
}

/* ---- sizes read at run time ------------------------------------------------ */
/* Partial-sum slots per output row of a task, sizes read at run time: one
 * per whole tile of the upper corner's row, one per narrower pattern. */
static int rt_slots(const dc *d) { return d->nt + d->nsig; }

/* The blocked channels' and the weight prefetch's arguments of a call
 * whose partial-sum slot in its row is `slot` (d->rt) into ba. */
static void rt_tile_args(const dc *d, const char *slot, char *ba, size_t cap) {
  size_t l = 0;
  ba[0] = 0;
  if (d->cb < d->ICG)
    l = (size_t)snprintf(ba, cap, ", ncb, ws + ((oh - rb * %dL) * %dL + %s) * %dL, first, last", d->rb, rt_slots(d), slot,
                         d->mr * d->nv * 16);
  if (d->npf && l < cap)
    snprintf(ba + l, cap - l, ", pfb + (uintptr_t)(((oh - rb * %dL) * %dL + %s) * ncb) * %du", d->rb, rt_slots(d), slot,
             d->npf * 64);
}

/* d->edge: zl and zr, the columns of a tile at pixel q of np pixels (an
 * expression) that lie left and right of the input row (at most pad[1]
 * and pad[3]; emit_kernel broadcasts zeros there). */
static void rt_edge_args(cg_out *o, const dc *d, const char *np, const char *ind) {
  const cgen_conv_spec *s = d->s;
  if (!d->edge) return;
  cg_emit(o, "%slong cl_ = q * %ldL - %ldL, ce_ = cl_ + (%s - 1) * %ldL + %ldL;\n", ind, (long)s->stride[1], (long)s->pad[1], np,
          (long)s->stride[1], (long)((s->kw - 1) * s->dil[1]));
  cg_emit(o, "%sint zl = cl_ < 0 ? (int)-cl_ : 0, zr = ce_ >= cx->w ? (int)(ce_ - cx->w + 1) : 0;\n", ind);
}

/* The task of a conv whose sizes are read at run time (d->rt; d's sizes
 * are the upper corner's): this run's rows, row blocks and column blocks
 * (cx->ncol of cx->cw tiles each: work for every thread
 * where the rows are few, as a 1x1 conv's single row of pixels) from cx, over the
 * zero-padded copy cx->xp (planes of cx->hp x cx->wp), so every tile reads
 * all of its taps along a row (the kernel rows are those inside the input,
 * as emit_task's); a row in even tiles (rt_patterns). */
static void emit_task_rt(cg_out *o, const dc *d) {
  const cgen_conv_spec *s = d->s;
  bool blocked = d->cb < d->ICG;
  long kstep = (long)(s->kh * s->kw * d->ob);
  cg_emit(o, "static $T void $P_dtask(void *vc, int task, int tid) {\n  (void)tid;\n");
  /* the column block slowest: a block's tasks share its input columns */
  cg_emit(o, "  const $P_dctx *cx = (const $P_dctx *)vc;\n  long nb = cx->n * %ldL * cx->nrb, col = task / nb, tk = task %% nb;\n",
          (long)(d->G * d->nob));
  if (d->ocb_fast)
    cg_emit(o, "  long ocb = tk %% %dL, r = tk / %dL, rb = r %% cx->nrb; r /= cx->nrb;\n", d->nob, d->nob);
  else
    cg_emit(o, "  long rb = tk %% cx->nrb, r = tk / cx->nrb, ocb = r %% %dL; r /= %dL;\n", d->nob, d->nob);
  cg_emit(o, "  long g = r %% %ldL, n = r / %ldL, ohw = cx->oh * cx->ow, hwp = cx->hp * cx->wp;\n", (long)d->G, (long)d->G);
  cg_emit(o, "  $P_dtt tt;\n  tt.ohw = ohw, tt.hs = (uintptr_t)hwp * 4u, tt.rs = (uintptr_t)(%ldL * cx->wp) * 4u;\n",
          (long)s->dil[0]);
  cg_emit(o, "  tt.y = (%s *)cx->C + (n * %ldL + g * %ldL) * ohw;\n", cg_ctype(s->y_dtype), (long)s->oc, (long)d->OCG);
  for (int i = 0; i < s->n_epi; i++) {
    const cgen_epi *ep = &s->epi[i];
    const char *et = cg_ctype(ep->dtype);
    if (ep->kind == CGEN_EPI_RESIDUAL)
      cg_emit(o, "  tt.ep[%d] = (const %s *)cx->ep[%d] + (n * %ldL + g * %ldL) * ohw;\n", i, et, i, (long)s->oc, (long)d->OCG);
    else if (ep->kind == CGEN_EPI_BIAS_M)
      cg_emit(o, "  tt.ep[%d] = (const %s *)cx->ep[%d] + g * %ldL;\n", i, et, i, (long)d->OCG);
    else cg_emit(o, "  tt.ep[%d] = 0;\n", i);
  }
  cg_emit(o, "  const float *x = cx->xp + (n * %ldL + g * %ldL) * hwp;\n", (long)s->c, (long)d->ICG);
  cg_emit(o, "  const float *wb = cx->Wp + (g * %dL + ocb) * %ldL;\n", d->nob, (long)(d->K * d->ob));
  cg_emit(o, "  long o0 = ocb * %dL, oh1 = rb * %dL + %dL < cx->oh ? rb * %dL + %dL : cx->oh;\n", d->ob, d->rb, d->rb, d->rb,
          d->rb);
  if (blocked) { /* the partial sums: slot q / mr for a whole tile at q, ow / mr + i for pattern i (rt_slots) */
    cg_emit(o, "  float *ws = (float *)cx->sc.thr[tid];\n");
    cg_emit(o, "  for (long c0 = 0; c0 < %ldL; c0 += %ldL) {\n", (long)d->ICG, (long)d->cb);
    cg_emit(o, "  long ncb = %ldL - c0 < %ldL ? %ldL - c0 : %ldL;\n", (long)d->ICG, (long)d->cb, (long)d->ICG, (long)d->cb);
    cg_emit(o, "  int first = c0 == 0, last = c0 + ncb == %ldL;\n", (long)d->ICG);
  } else {
    cg_emit(o, "  const long c0 = 0, ncb = %ldL;\n  (void)ncb;\n", (long)d->ICG);
  }
  if (d->npf) cg_emit(o, "  uintptr_t pfb = (uintptr_t)wb + (uintptr_t)(c0 + ncb) * %ldu;\n", kstep * 4);
  cg_emit(o, "  for (long oh = rb * %dL; oh < oh1; oh++) {\n", d->rb);
  emit_kh_range(o, d, "cx->h");
  if (d->rtcopy) /* the padded plane: row ih + pad[0] */
    cg_emit(o, "  const float *xr0 = x + c0 * hwp + (oh * %ldL + kh0 * %ldL) * cx->wp;\n", (long)s->stride[0], (long)s->dil[0]);
  else
    cg_emit(o, "  const float *xr0 = x + c0 * hwp + (kh1 > kh0 ? (ih + kh0 * %ldL) * cx->wp : 0);\n", (long)s->dil[0]);
  cg_emit(o, "  const float *wt = wb + c0 * %ldL + kh0 * %ldL;\n", kstep, (long)(s->kw * d->ob));
  cg_emit(o, "  int nkh = kh1 - kh0;\n  long q0 = oh * cx->ow;\n");
  /* even tiles t of this column block (cx->cw of them), tile t at pixel
   * t * ow / nt, each width's kernel behind a switch; a row narrower than
   * rt_half(d) in the narrower patterns (one column block) */
  char ba[320], col0[48];
  int nbal = d->mr - rt_half(d) + 1;
  const char *za = d->edge ? ", zl, zr" : "";
  /* the tile's first column: in the padded plane, or in the row itself (maybe left of it) */
  if (d->rtcopy) snprintf(col0, sizeof col0, "q * %ldL", (long)s->stride[1]);
  else snprintf(col0, sizeof col0, "q * %ldL - %ldL", (long)s->stride[1], (long)s->pad[1]);
  rt_tile_args(d, "t", ba, sizeof ba);
  cg_emit(o, "  if (cx->ow >= %d) {\n", rt_half(d));
  cg_emit(o, "    long te = (col + 1) * cx->cw < cx->nt ? (col + 1) * cx->cw : cx->nt;\n");
  cg_emit(o, "    for (long t = col * cx->cw; t < te; t++) {\n");
  cg_emit(o, "      long q = t * cx->ow / cx->nt, np = (t + 1) * cx->ow / cx->nt - q;\n");
  rt_edge_args(o, d, "np", "      ");
  cg_emit(o, "      switch (np) {\n");
  for (int i = 0; i < nbal; i++) {
    char lab[24];
    if (i + 1 < nbal) snprintf(lab, sizeof lab, "case %d", d->sig[i].np);
    else snprintf(lab, sizeof lab, "default");
    cg_emit(o, "      %s: $P_dk%d(&tt, xr0, %s, wt, nkh, o0, q0 + q%s%s); break;\n", lab, i, col0, ba, za);
  }
  /* (the default: mr - nbal + 1 pixels, the narrowest even width) */
  cg_emit(o, "      }\n    }\n  } else {\n    long q = 0;\n");
  for (int i = nbal; i < d->nsig; i++) {
    char slot[16];
    snprintf(slot, sizeof slot, "%d", i - nbal);
    rt_tile_args(d, slot, ba, sizeof ba);
    char np[16];
    snprintf(np, sizeof np, "%dL", d->sig[i].np);
    cg_emit(o, "    if (q + %d <= cx->ow) {\n", d->sig[i].np);
    rt_edge_args(o, d, np, "      ");
    cg_emit(o, "      $P_dk%d(&tt, xr0, %s, wt, nkh, o0, q0 + q%s%s);\n      q += %d;\n    }\n", i, col0, ba, za, d->sig[i].np);
  }
  cg_emit(o, "  }\n");
  cg_emit(o, blocked ? "  }\n  }\n}\n" : "  }\n}\n");
}

/* One (image, channel) plane of the input per task into the zero-padded
 * copy: cx->hp rows of cx->wp columns, the input at row pad[0], column
 * pad[1]; rows no tile reads (emit_kh_range) are left out.  A row by
 * vectors of 16 columns, each a masked load of the input's columns in it
 * (none outside the row is touched; half precision widened) and a store
 * with the padding as zeros: no per-row library calls, which cost more
 * than the copy at 14 x 14. */
static void emit_pad_copy(cg_out *o, const dc *d) {
  const cgen_conv_spec *s = d->s;
  const char *xt = cg_ctype(s->x_dtype);
  long pl = (long)s->pad[1];
  cg_emit(o, "static $T void $P_dpad(void *vc, int task, int tid) {\n  (void)tid;\n");
  cg_emit(o, "  const $P_dctx *cx = (const $P_dctx *)vc;\n  long h = cx->h, w = cx->w, wp = cx->wp;\n");
  cg_emit(o, "  const %s *x = (const %s *)cx->B + (long)task * h * w;\n", xt, xt);
  cg_emit(o, "  float *d = cx->xp + (long)task * cx->hp * wp;\n");
  cg_emit(o, "  for (long r = 0; r < cx->hp; r++, d += wp) {\n    long ih = r - %ldL;\n", (long)s->pad[0]);
  cg_emit(o, "    if (ih < 0 || ih >= h) continue;\n");
  cg_emit(o, "    uintptr_t xr = (uintptr_t)(x + ih * w);\n");
  cg_emit(o, "    for (long j = 0; j < wp; j += 16) {\n");
  cg_emit(o, "      __mmask16 k = (__mmask16)($P_mk((int)(%ldL + w - j)) & ~$P_mk((int)(%ldL - j)));\n", pl, pl);
  char ptr[96];
  snprintf(ptr, sizeof ptr, "(const void *)(xr + (uintptr_t)(j - %ldL) * %du)", pl, s->x_dtype == TINY_FP32 ? 4 : 2);
  if (s->x_dtype == TINY_FP32) cg_emit(o, "      __m512 v = _mm512_maskz_loadu_ps(k, %s);\n", ptr);
  else if (s->x_dtype == TINY_FP16) cg_emit(o, "      __m512 v = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(k, %s));\n", ptr);
  else if (s->x_dtype == TINY_BF16) cg_emit(o, "      __m512 v = $P_b2v(_mm256_maskz_loadu_epi16(k, %s));\n", ptr);
  else { /* another type: element by element */
    char ld[300];
    cg_scalar_ld(o, ld, sizeof ld, s->x_dtype, "xs", "i");
    cg_emit(o, "      float t[16];\n      const %s *xs = (const %s *)%s;\n", xt, xt, ptr);
    cg_emit(o, "      for (int i = 0; i < 16; i++) t[i] = k >> i & 1 ? %s : 0.0f;\n      __m512 v = _mm512_loadu_ps(t);\n", ld);
  }
  cg_emit(o, "      _mm512_mask_storeu_ps(d + j, $P_mk((int)(wp - j)), v);\n    }\n  }\n}\n");
}

/* The packing and the convolution in one pool run (sizes read at run
 * time), as $P_dall: the weight's npack packing tasks first, the
 * convolution's wait for them (the pool hands tasks out in order). */
static void emit_all_rt(cg_out *o, long npack) {
  cg_emit(o, "static $T void $P_drt(void *vc, int task, int tid) {\n");
  cg_emit(o, "  const $P_dctx *cx = (const $P_dctx *)vc;\n");
  cg_emit(o, "  if (task < %ldL) { $P_dpack(vc, task, tid); __atomic_add_fetch(cx->packed, 1, __ATOMIC_RELEASE); return; }\n", npack);
  cg_emit(o, "  while (__atomic_load_n(cx->packed, __ATOMIC_ACQUIRE) < %ld) HPRT_PAUSE();\n", npack);
  cg_emit(o, "  $P_dtask(vc, (int)(task - %ldL), tid);\n}\n", npack);
}

/* $P_run with run-time sizes: this run's n, h, w (checked against the
 * upper corner's), its output size, tiles and row blocks, the padded copy
 * (scratch sized for this run), then the packing and the tasks. */
static void emit_run_rt(cg_out *o, const dc *d, long wbytes, long npack, long wsb) {
  const cgen_conv_spec *s = d->s;
  if (s->prepack_w) npack = 0;
  else emit_all_rt(o, npack);
  long xoff = s->prepack_w ? 0L : wbytes;
  char nx[24], hx[24], wx[24];
  snprintf(nx, sizeof nx, "%ldL", (long)s->n), snprintf(hx, sizeof hx, "%ldL", (long)s->h), snprintf(wx, sizeof wx, "%ldL", (long)s->w);
  cg_emit(o, "static $T int $P_run(hprt_pool *pool, const void *A, const void *B, void *C, const void *const *ep) {\n");
  cg_emit(o, "  $P_dctx cx;\n  cx.A = A; cx.B = B; cx.C = C; cx.ep = ep;\n");
  cg_emit(o, "  cx.c = %ldL; cx.n = %s; cx.h = %s; cx.w = %s;\n", (long)s->c, s->n_expr ? s->n_expr : nx, s->h_expr ? s->h_expr : hx,
          s->w_expr ? s->w_expr : wx);
  cg_emit(o, "  if (cx.n < 1 || cx.n > %ldL || cx.h < 1 || cx.h > %ldL || cx.w < 1 || cx.w > %ldL) return -1;\n", (long)s->n,
          (long)s->h, (long)s->w);
  cg_emit(o, "  long eh = cx.h + %ldL, ew = cx.w + %ldL;\n  if (eh < 0 || ew < 0) return -1;\n",
          (long)(s->pad[0] + s->pad[2] - s->dil[0] * (s->kh - 1) - 1), (long)(s->pad[1] + s->pad[3] - s->dil[1] * (s->kw - 1) - 1));
  cg_emit(o, "  cx.oh = eh / %ldL + 1; cx.ow = ew / %ldL + 1;\n", (long)s->stride[0], (long)s->stride[1]);
  cg_emit(o, "  cx.nt = (cx.ow + %d) / %d; cx.nrb = (cx.oh + %d) / %d;\n", d->mr - 1, d->mr, d->rb - 1, d->rb);
  if (d->rtcopy) {
    cg_emit(o, "  cx.hp = (cx.oh - 1) * %ldL + %ldL;\n", (long)s->stride[0], (long)((s->kh - 1) * s->dil[0] + 1));
    /* the row's tiles end at its last pixel (emit_task_rt) */
    cg_emit(o, "  cx.wp = (cx.ow - 1) * %ldL + %ldL;\n  if (cx.wp < %ldL + cx.w) cx.wp = %ldL + cx.w;\n",
            (long)s->stride[1], (long)((s->kw - 1) * s->dil[1] + 1), (long)s->pad[1], (long)s->pad[1]);
    /* this run's plane (the pool keeps the largest; without one, a malloc of the run's size) */
    cg_emit(o, "  if (hprt_scratch_get(pool, (size_t)(%ldL + cx.n * %ldL * cx.hp * cx.wp * 4), %ldUL, &cx.sc)) return -1;\n", xoff,
            (long)s->c, wsb);
    cg_emit(o, "  cx.xp = (float *)(cx.sc.shared + %ldL);\n", xoff);
  } else { /* the input itself (d->edge: the columns outside it as zeros) */
    cg_emit(o, "  cx.hp = cx.h; cx.wp = cx.w;\n");
    cg_emit(o, "  if (hprt_scratch_get(pool, %ldUL, %ldUL, &cx.sc)) return -1;\n", xoff, wsb);
    cg_emit(o, "  cx.xp = (float *)B;\n");
  }
  /* the padded copy in a pool run of its own (its tasks would make the
   * convolution's wait for them longer than a hand-over) */
  if (d->rtcopy) cg_emit(o, "  hprt_pool_run(pool, (int)(cx.n * cx.c), $P_dpad, &cx);\n");
  cg_emit(o, "  long ntask = cx.n * %ldL * cx.nrb;\n", (long)(d->G * d->nob));
  /* column blocks while the tasks are fewer than 8, or of at most ~256
   * pixels (a 1x1 conv's single row: the input of a block stays in cache
   * for its output channel blocks); cx.cw tiles a block, at least one */
  cg_emit(o, "  cx.ncol = ntask < 8 ? (8 + ntask - 1) / ntask : 1;\n  if (cx.ncol < cx.ow / 256) cx.ncol = cx.ow / 256;\n");
  cg_emit(o, "  if (cx.ncol > cx.nt) cx.ncol = cx.nt;\n");
  cg_emit(o, "  cx.cw = (cx.nt + cx.ncol - 1) / cx.ncol;\n  cx.ncol = (cx.nt + cx.cw - 1) / cx.cw;\n  ntask *= cx.ncol;\n");
  if (s->prepack_w) {
    cg_emit(o, "  cx.Wp = (float *)A;\n  hprt_pool_run(pool, (int)ntask, $P_dtask, &cx);\n");
  } else {
    cg_emit(o, "  cx.Wp = (float *)cx.sc.shared;\n  int packed = 0;\n  cx.packed = &packed;\n");
    cg_emit(o, "  hprt_pool_run(pool, (int)(%ldL + ntask), $P_drt, &cx);\n", npack);
  }
  cg_emit(o, "  hprt_scratch_put(&cx.sc);\n  return 0;\n}\n");
}

bool cg_dconv_rt_ok(const cgen_conv_spec *s, const char **why) {
  dc d;
  if (cg_isa_set(&s->tune) != 1u << CGEN_ISA_AVX512) return *why = "only the AVX-512 variant reads them", false;
  if (s->tune.conv_algo != CGEN_CONV_AUTO && s->tune.conv_algo != CGEN_CONV_DIRECT)
    return *why = "the implicit GEMM or Winograd asked for", false;
  if (cg_conv_bf16_asked(s)) return *why = "bf16 multiplication", false;
  if (cg_dw_applies(s)) return *why = "depthwise (its own kernel)", false;
  if (!plan_tiles(&d, s, why)) return false;
  return *why = "sizes read at run time: the direct kernel on a zero-padded copy", true;
}

/* conv s seen as channel pairs: ceil(icg / 2) "channels" per group of
 * 32-bit words {bf16(x[2c]), bf16(x[2c + 1])} (cgen_bf16.c), fp32 to the
 * planner and the packer, which move words. */
cgen_conv_spec cg_dconv_pairs(const cgen_conv_spec *s) {
  cgen_conv_spec q = *s;
  q.c = s->groups * ((s->c / s->groups + 1) / 2);
  q.x_dtype = q.w_dtype = TINY_FP32;
  return q;
}

/* conv s seen as column pairs (fewer than CG_BF16_MIN_ICG input channels
 * per group): each input row becomes w + sh 32-bit words, word u
 * {bf16(x[u - sh]), bf16(x[u - sh + 1])} (sh = 1 with left padding: word 0
 * holds the pad and x[0]), the taps kw = 2t, 2t + 1 one word tap t at
 * dilation 2, so the output size stays; fp32 to the planner and packer. */
static cgen_conv_spec dconv_cols(const cgen_conv_spec *s) {
  cgen_conv_spec q = *s;
  int sh = s->pad[1] >= 1;
  q.w = s->w + sh;
  q.pad[1] = s->pad[1] - sh;
  q.pad[3] = s->pad[3] - (s->kw % 2 == 0); /* an even kw's last word tap ends one column short */
  q.kw = (s->kw + 1) / 2;
  q.dil[1] = 2;
  q.x_dtype = q.w_dtype = TINY_FP32;
  return q;
}

#define CG_COLS_MIN_FMA 96
static bool cols(const cgen_conv_spec *s) { return s->c / s->groups < CG_BF16_MIN_ICG; }

bool cg_dconv_cols_ok(const cgen_conv_spec *s, const char **why) {
  dc d;
  if (!cols(s) || cg_dw_applies(s)) return *why = "column pairs: fewer input channels and not depthwise only", false;
  if (s->n_expr || s->h_expr || s->w_expr) return *why = "column pairs: sizes read at run time", false;
  if (s->dil[1] != 1 || s->kw < 3) return *why = "column pairs: a row of 3 taps or more, no dilation", false;
  if (s->w > 4096) return *why = "column pairs: rows of more than 4096 columns", false;
  /* the interleaved copy (one more pass over the input) pays only where
   * the window does enough per output pixel: fp32 FMAs per pixel, icg *
   * kh * kw per 16 output channels, at least CG_COLS_MIN_FMA.  Measured
   * alone (1x3x224x224, 2 threads, bf16 / fp32 direct): 7x7/2 64 out (588)
   * 0.32 / 0.51 ms, 11x11/4 96 out (2178) 0.25 / 0.53, 3x3/2 64 out (108)
   * 0.10 / 0.14, 3x3/1 64 out (108) 1.14 / 1.11; below it a loss: 3x3/1 32
   * out (54) 0.64 / 0.54, 3x3/2 16 out at 640x640 (27) 0.64 / 0.34 */
  if ((s->c / s->groups) * s->kh * s->kw * ((s->oc / s->groups + 15) / 16) < CG_COLS_MIN_FMA)
    return *why = "column pairs: too little work per output pixel for the interleaved copy", false;
  if (s->kw % 2 == 0 && s->pad[3] < 1) return *why = "column pairs: an even kw without right padding", false;
  cgen_conv_spec q = dconv_cols(s);
  if (!plan_tiles(&d, &q, why)) return false;
  return *why = "bf16, few input channels: the direct kernel on column pairs", true;
}

harp_status cg_dconv_variant(harp_error *e, cg_out *o, const cgen_conv_spec *s0, bool bf) {
  dc d;
  const char *why = NULL;
  bool bc = bf && cols(s0); /* column pairs (cg_dconv_cols_ok said so) */
  cgen_conv_spec sp = bc ? dconv_cols(s0) : bf ? cg_dconv_pairs(s0) : *s0;
  const cgen_conv_spec *s = &sp;
  if (!plan_tiles(&d, s, &why))
    return ut_fail(e, plan_given(s) ? HARP_E_INVALID_ARG : HARP_E_INTERNAL, NULL, "cgen_conv: direct kernel: %s", why);
  d.bf = bf, d.s0 = s0;
  cg_dconv_plan(s, &why);
  if (bf) why = bc ? "bf16, column pairs on vdpbf16ps" : "bf16, channel pairs on vdpbf16ps";
  if (d.rt) why = "sizes read at run time, a zero-padded copy of the input";
  cg_emit_isa_helpers(o);
  cg_emit(o, "/* direct conv (%s): %d x %d tiles (pixels x output channels), %d per row, %d patterns;"
             " %ld input channels per block, %d rows per task */\n", why, d.mr, d.ob, d.nt, d.nsig, (long)d.cb, d.rb);
  cg_emit(o, "typedef struct { const void *A, *B, *A2, *X; void *C; const void *const *ep; float *Wp; hprt_scratch sc;"
             " int *packed;%s } $P_dctx;\n", d.rt ? " long c, n, h, w, oh, ow, nt, nrb, ncol, cw, hp, wp; float *xp;" : "");
  cg_emit(o, "typedef struct { void *y; const void *ep[%d];%s } $P_dtt;\n", CGEN_MAX_EPI,
          d.rt ? " long ohw; uintptr_t hs, rs;" : "");
  cg_emit_tr16(o);
  emit_pack(o, &d);
  long nilv = s->n * s->c; /* bf: the input's interleave tasks */
  if (bc) {
    nilv *= cg_emit_bf16_ilv_cols(o, "$P_dctx", s0->x_dtype, s0->h, s0->w, (int)(s->w - s0->w));
    cg_emit_bf16_wpairs_cols(o, s0->w_dtype, s0->oc * (s0->c / s0->groups) * s0->kh, s0->kw);
  } else if (bf) {
    cg_emit_bf16_ilv(o, "$P_dctx", s0->x_dtype, s->n * s->c, s0->c / s0->groups, d.HW);
    cg_emit_bf16_wpairs(o, s0->w_dtype, s->oc, s0->c / s0->groups, s->kh * s->kw);
  }
  for (int i = 0; i < d.nsig; i++) emit_kernel(o, &d, i);
  if (d.rt) emit_task_rt(o, &d);
  else emit_task(o, &d);
  long wbytes = (long)(d.G * d.nob * d.K * d.ob * 4), npack = (long)(d.G * d.nob);
  long ntask = (long)(s->n * d.G * d.nrb * d.nob);
  long wsb = d.cb < d.ICG ? (long)d.rb * (d.rt ? rt_slots(&d) : d.nt) * d.mr * d.nv * 64 : 0; /* per thread */
  /* packing and convolution in one pool run (one hand-over less per call):
   * the pack tasks come first in the pool's order, so a convolution task
   * only waits for pack tasks already running on other threads */
  if (!s->prepack_w && !d.rt) { /* prepacked: the convolution tasks alone */
    cg_emit(o, "static $T void $P_dall(void *vc, int task, int tid) {\n");
    cg_emit(o, "  const $P_dctx *cx = (const $P_dctx *)vc;\n");
    cg_emit(o, "  if (task < %ld) { $P_dpack(vc, task, tid); __atomic_add_fetch(cx->packed, 1, __ATOMIC_RELEASE); return; }\n",
            npack);
    cg_emit(o, "  while (__atomic_load_n(cx->packed, __ATOMIC_ACQUIRE) < %ld) HPRT_PAUSE();\n", npack);
    cg_emit(o, "  $P_dtask(vc, task - %ld, tid);\n}\n", npack);
  }
  if (s->prepack_w) {
    cg_emit(o, "static $T long $P_pack_a_bytes_run(void) { return %ldL; }\n", wbytes);
    cg_emit(o, "static $T int $P_pack_a_run(hprt_pool *pool, const void *A, void *Ap) {\n");
    cg_emit(o, "  $P_dctx cx;\n  memset(&cx, 0, sizeof cx);\n  cx.A = A; cx.Wp = (float *)Ap;\n");
    if (bf) /* the weight as channel pairs first (init time) */
      cg_emit(o, "  uint32_t *w2 = (uint32_t *)malloc(%ldUL);\n  if (!w2) return -1;\n  $P_wpairs(A, w2);\n  cx.A = w2;\n",
              (long)(s->oc * d.K * 4));
    cg_emit(o, "  hprt_pool_run(pool, %ld, $P_dpack, &cx);\n%s  return 0;\n}\n", npack, bf ? "  free(w2);\n" : "");
  }
  if (d.rt) { /* the padded copy (which widens a half-precision input) and the run */
    if (d.rtcopy) emit_pad_copy(o, &d);
    emit_run_rt(o, &d, wbytes, npack, wsb);
    cg_emit(o, "#endif /* HPRT_X86 */\n");
    return HARP_OK;
  }
  /* a half-precision input is widened into scratch first (the kernel
   * broadcasts fp32 straight from the input; one pass over it) */
  long xn = s0->x_dtype == TINY_FP32 && !bf ? 0 : (long)(s->n * s->c * s->h * s->w), xoff = s->prepack_w ? 0L : wbytes;
  long w2b = bf && !s->prepack_w ? (long)(s->oc * d.K * 4) : 0; /* bf: the weight's pairs, per call */
  if (xn && !bf) {
    cg_emit_widen(o, "$P_dctx", "cx->A2", "cx->B", s->x_dtype, xn);
  }
  cg_emit(o, "static $T int $P_run(hprt_pool *pool, const void *A, const void *B, void *C, const void *const *ep) {\n");
  cg_emit(o, "  $P_dctx cx;\n  cx.A = A; cx.B = B; cx.C = C; cx.ep = ep;\n");
  cg_emit(o, "  if (hprt_scratch_get(pool, %ldUL, %ldUL, &cx.sc)) return -1;\n", xoff + xn * 4 + w2b, wsb);
  if (bf) { /* the input as channel-pair planes, the weight as pairs */
    cg_emit(o, "  cx.X = B;\n  cx.B = cx.sc.shared + %ldL;\n", xoff);
    cg_emit(o, "  hprt_pool_run(pool, %ld, $P_ilv, &cx);\n", nilv);
    if (w2b) cg_emit(o, "  $P_wpairs(A, (uint32_t *)(cx.sc.shared + %ldL));\n  cx.A = cx.sc.shared + %ldL;\n", xoff + xn * 4, xoff + xn * 4);
  } else if (xn) {
    cg_emit(o, "  cx.A2 = B;\n  cx.B = cx.sc.shared + %ldL;\n", xoff);
    cg_emit(o, "  hprt_pool_run(pool, %ld, $P_widen, &cx);\n", (xn + CG_WIDEN_CHUNK - 1) / CG_WIDEN_CHUNK);
  }
  if (s->prepack_w) {
    cg_emit(o, "  cx.Wp = (float *)A;\n");
    cg_emit(o, "  hprt_pool_run(pool, %ld, $P_dtask, &cx);\n", ntask);
  } else {
    cg_emit(o, "  cx.Wp = (float *)cx.sc.shared;\n  int packed = 0;\n  cx.packed = &packed;\n");
    cg_emit(o, "  hprt_pool_run(pool, %ld, $P_dall, &cx);\n", npack + ntask);
  }
  cg_emit(o, "  hprt_scratch_put(&cx.sc);\n  return 0;\n}\n");
  cg_emit(o, "#endif /* HPRT_X86 */\n");
  return HARP_OK;
}
