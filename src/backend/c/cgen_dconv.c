/* cgen_dconv.c — direct convolution kernel generator (AVX-512): the plan
 * (tile patterns, blocking, which convs it takes) and the variant's driver.
 * Needs: cgen_int.h (templating, vector layer, runtime; cgen_bf16.c's
 * interleave and weight pairs), cgen_dconv_int.h (the plan's type), the
 * emitters of cgen_dconv_kern.c (packer, micro-kernels, task) and of
 * cgen_dconv_rt.c (sizes read at run time).  Gives: cg_dconv_plan,
 * cg_dconv_variant (the AVX-512 variant of a cgen_conv kernel),
 * cg_dconv_pairs, cg_dconv_cols_ok, cg_dconv_rt_ok.
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

#include "backend/c/cgen_dconv_int.h"
#include "backend/c/cgen_int.h"

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
 * inside it (dc_emit_kh_range), and the columns left or right of it as
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
     * its transposes and 14-pixel stores over), at 128 it is even.  A
     * strided 1x1 (a downsample) broadcasts every other input column, so
     * each line it brings into L1 serves half as many FMAs, while the
     * implicit GEMM gathers the columns once into its dense B panel: on the
     * AVX-512 Xeon (bench/RESULTS.md, "fp27") the GEMM at the plan's tile
     * ran ResNet-50's 256->512 @56/2 and 512->1024 @28/2 in 0.86x the
     * direct kernel's time on 2 threads (even on one); with the pixels
     * padded (@14/2: 49) the direct kernel stays (1024->2048: 0.6x the
     * GEMM's).  bf16 on channel pairs (s the pair view: ICG counts pairs)
     * on Zen 5 (no AMX, bench/RESULTS.md "zbf3"), 1 thread, GEMM -> direct:
     * 128 pairs into 1024 @14 0.28 -> 0.24 ms, 64 into 512 @28 0.254 ->
     * 0.245 (and 128 into 512 @28, a downsample's view, 0.469 -> 0.485), 32
     * into 256 and 128 into 64 @56 lose (0.23 -> 0.39, 0.26 -> 0.33): from
     * 64 pairs on at 196 pixels and fewer. */
    int64_t P = d.OH * d.OW, padded = (P + 15) / 16 * 16;
    bool bf = cg_conv_bf16_asked(s), unit = (s->stride[0] == 1 && s->stride[1] == 1) || bf;
    bool deep = d.ICG >= 256 || (bf && d.ICG >= 64 && P <= 196);
    if (s->kh == 1 && s->kw == 1 && s->groups == 1 && d.OCG % 16 == 0 && (padded * 10 > P * 11 || (unit && deep)))
      return *why = padded * 10 > P * 11 ? "1x1 over few pixels (the GEMM's pixel vectors would be padded)"
                                         : "1x1 with 256 or more input channels (bf16: pairs, 64 at 196 pixels or fewer)", true;
    return *why = "windows do not overlap along a row (1x1): implicit GEMM", false;
  }
  return *why = "overlapping windows: direct", true;
}

bool cg_dconv_rt_ok(const cgen_conv_spec *s, const char **why) {
  dc d;
  /* the AVX-512 variant reads them in the direct kernel (cgen_dconv_rt.c), the others in the implicit GEMM
   * (cgen_gemm_rt.c): a portable object serves the box too */
  if (s->tune.conv_algo != CGEN_CONV_AUTO && s->tune.conv_algo != CGEN_CONV_DIRECT)
    return *why = "the implicit GEMM or Winograd asked for", false;
  if (cg_conv_bf16_asked(s)) return *why = "bf16 multiplication", false;
  if (cg_dw_applies(s)) return *why = "depthwise (its own kernel)", false;
  if (!plan_tiles(&d, s, why)) return false;
  return *why = "sizes read at run time: the direct kernel on a zero-padded copy", true;
}

/* Whether conv s's pair view reads through view *g (cg_bf16_sub_ok: a
 * strided 1x1, sizes known): its interleave then keeps only the pixels the
 * window reads (cg_emit_bf16_ilv_sub), which cg_dconv_pairs sees as the
 * input of a conv of stride 1. */
static bool pair_sub(const cgen_conv_spec *s, cg_bf16_sub *g) {
  int64_t oh, ow;
  if (s->n_expr || s->h_expr || s->w_expr || !cgen_conv_out_hw(s, &oh, &ow)) return false;
  *g = (cg_bf16_sub){s->h, s->w, s->stride[0], s->stride[1], oh, ow};
  return cg_bf16_sub_ok(g, s->kh, s->kw, s->pad[0], s->pad[1]);
}

/* conv s seen as channel pairs: ceil(icg / 2) "channels" per group of
 * 32-bit words {bf16(x[2c]), bf16(x[2c + 1])} (cgen_bf16.c), fp32 to the
 * planner and the packer, which move words. */
cgen_conv_spec cg_dconv_pairs(const cgen_conv_spec *s) {
  cgen_conv_spec q = *s;
  cg_bf16_sub g;
  q.c = s->groups * ((s->c / s->groups + 1) / 2);
  q.x_dtype = q.w_dtype = TINY_FP32;
  if (pair_sub(s, &g)) { /* the pixels a strided 1x1 reads, as a conv of stride 1 */
    /* over rows of L of its oh * ow pixels (a 1x1 window without padding
     * is the same conv over any split of them): all of them up to 56 (7x7:
     * tiles of 13 pixels, not 7), else two rows where they make at most 56
     * (14x14: rows of 28, tiles of 14), else rows as they are */
    int64_t n = g.oh * g.ow, l = n <= 56 ? n : 2 * g.ow <= 56 && g.oh % 2 == 0 ? 2 * g.ow : g.ow;
    q.h = n / l, q.w = l;
    q.stride[0] = q.stride[1] = 1;
    q.pad[2] = q.pad[3] = 0;
  }
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
  dc_emit_pack(o, &d);
  long nilv = s->n * s->c; /* bf: the input's interleave tasks */
  if (bc) {
    nilv *= cg_emit_bf16_ilv_cols(o, "$P_dctx", s0->x_dtype, s0->h, s0->w, (int)(s->w - s0->w));
    cg_emit_bf16_wpairs_cols(o, s0->w_dtype, s0->oc * (s0->c / s0->groups) * s0->kh, s0->kw);
  } else if (bf) {
    cg_bf16_sub g;
    if (pair_sub(s0, &g)) cg_emit_bf16_ilv_sub(o, "$P_dctx", s0->x_dtype, s0->c / s0->groups, &g);
    else cg_emit_bf16_ilv(o, "$P_dctx", s0->x_dtype, s->n * s->c, s0->c / s0->groups, d.HW);
    cg_emit_bf16_wpairs(o, s0->w_dtype, s->oc, s0->c / s0->groups, s->kh * s->kw);
  }
  for (int i = 0; i < d.nsig; i++) dc_emit_kernel(o, &d, i);
  if (d.rt) dc_emit_task_rt(o, &d);
  else dc_emit_task(o, &d);
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
    if (d.rtcopy) dc_emit_pad_copy(o, &d);
    dc_emit_run_rt(o, &d, wbytes, npack, wsb);
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
