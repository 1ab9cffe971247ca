/* cost_dconv.c — the CPU's direct conv kernel (src/backend/c/cgen_dconv.c)
 * as the search and the cost model see it: which convs it runs, the tile
 * it picks itself, the tile a Plan gives it, and that tile's time.
 * Needs: plan_int.h (plan_calib, plan_machine).  Gives: plan_cpu_direct_conv,
 * plan_conv_pixels_m, plan_dconv_mr, plan_dconv_own, plan_dconv_of, plan_dconv_time.
 *
 * A Plan's fields as the kernel reads them (contract_c.c, plan_to_dconv; the
 * plan's M is the pixels when the region's M is oh x ow, else the output
 * channels): the warp tile is a register tile of px pixels x oc (16 or 32)
 * output channels; tile K / the window's taps the input channels of a
 * block (partial sums wait in a per-thread scratch between blocks); the
 * pixels' tile / the output width the output rows of a task; the output
 * channels' tile the task order (all of them: a row block's channel blocks
 * run one after the other, sharing its input rows; fewer: a channel
 * block's row blocks, sharing its weights).
 *
 * The time (plan_dconv_time): per channel step of a tile of np pixels the
 * kernel issues np x KW x NV FMAs, loads KW x NV weight vectors and
 * broadcasts each input column it reads, (np - 1) x SW + (KW - 1) x DW + 1;
 * FMAs at two a cycle, loads at LOAD_PER_CYCLE, an accumulator's latency at
 * least; a call per tile and channel block adds its accumulators' loads and
 * stores, and the last the 16 x 16 transposes of its store; a block's
 * weights beyond the L1 + L2 share the kernel keeps (96 KiB) stream from
 * further out (cgen_dconv.c measured 30% at 147 KiB); a task's weights
 * and input rows streamed into L1 once per task at 32 bytes a cycle; the
 * input and the weights that the task order re-reads from beyond L2 at the
 * calibrated packing bandwidth; tasks taken by whichever thread is free. */
#include <math.h>
#include <string.h>

#include "plan_int.h"
#include "util/util.h"

#define DC_REGS 31         /* zmm registers for accumulators, weights and a broadcast */
#define DC_MAX_MR 28       /* cgen_dconv.c's bound on pixels a tile */
#define FMA_PER_CYCLE 2.0
#define LOAD_PER_CYCLE 1.5 /* as cost_cpu.c's micro-kernel model */
#define FMA_LATENCY 4.0
#define BLOCK_FIT (96 * 1024) /* a channel block's weights the kernel keeps near (cgen_dconv.c) */
#define STREAM_PENALTY 1.3    /* its FMAs when they do not fit (cgen_dconv.c: 147 KiB lost 30%) */
#define L2_BYTES_PER_CYCLE 32.0 /* L2 -> L1 sustained, half the 64-byte line a cycle of recent x86 cores */

static int64_t cdiv(int64_t a, int64_t b) { return b > 0 ? (a + b - 1) / b : a; }

bool plan_cpu_direct_conv(const plan_region_info *r, const plan_gemm_view *g, const plan_machine *m) {
  if (!m->avx512 || r->in_dtype != TINY_FP32) return false;
  if (r->pattern == PLAN_PAT_MATMUL && r->c_m_contig) {
    int64_t px = g->M, padded = cdiv(px, 16) * 16;
    return g->N % 16 == 0 && (padded * 10 > px * 11 || g->K >= 256);
  }
  return r->pattern == PLAN_PAT_CONV && r->conv_kw > 0 && r->conv_kw > UT_MAX(r->conv_sw, 1);
}

bool plan_conv_pixels_m(const plan_region_info *r, const plan_gemm_view *g) {
  int64_t px = r->conv_oh * r->conv_ow;
  if (px <= 0) return false;
  bool m = g->M % px == 0, n = g->N % px == 0;
  return m && (!n || g->M >= g->N);
}

/* The conv's sizes as the kernel sees them: false unless r is a conv whose
 * geometry the region layer filled in. */
typedef struct dgeo {
  bool swap; /* the plan's M is the pixels */
  int kh, kw, sw, dw;
  int64_t oh, ow, icg, oc, n;
} dgeo;
static bool geometry(const plan_region_info *r, const plan_gemm_view *g, dgeo *d) {
  if (r->pattern != PLAN_PAT_CONV || r->conv_kh <= 0 || r->conv_kw <= 0 || r->conv_oh <= 0 || r->conv_ow <= 0) return false;
  d->swap = plan_conv_pixels_m(r, g);
  d->kh = r->conv_kh, d->kw = r->conv_kw, d->sw = UT_MAX(r->conv_sw, 1), d->dw = UT_MAX(r->conv_dw, 1);
  d->oh = r->conv_oh, d->ow = r->conv_ow;
  d->icg = UT_MAX(g->K / (d->kh * d->kw), 1);
  d->oc = d->swap ? g->N : g->M;
  d->n = UT_MAX(g->batch, 1) * UT_MAX((d->swap ? g->M : g->N) / (d->oh * d->ow), 1); /* images folded into M or N */
  return true;
}

/* The register bound on pixels a tile at nv vectors of output channels. */
static int mr_bound(const dgeo *d, int nv) { return UT_MIN((DC_REGS - d->kw * nv) / nv, DC_MAX_MR); }

/* Even tiles of at most mx pixels along a row of ow: 14 -> 7 + 7. */
static int even_mr(int64_t ow, int mx) { return (int)cdiv(ow, cdiv(ow, mx)); }

int plan_dconv_mr(const plan_region_info *r, int nv) {
  if (nv < 1 || r->conv_kw <= 0 || r->conv_ow <= 0) return 0;
  int mx = UT_MIN((DC_REGS - r->conv_kw * nv) / nv, DC_MAX_MR);
  return mx < 1 ? 0 : even_mr(r->conv_ow, mx);
}

/* Issue slots per output row and input channel of nv vectors at mr pixels
 * a tile (cgen_dconv.c, choose_nv's count). */
static double row_issue(const dgeo *d, int nv, int mr) {
  double cost = 0;
  for (int64_t q = 0; q < d->ow; q += mr) {
    int64_t np = UT_MIN(d->ow - q, mr);
    cost += (double)(np * d->kw * nv + d->kw * nv + (np - 1) * d->sw + (d->kw - 1) * d->dw + 1);
  }
  return cost * (double)cdiv(d->oc, 16 * nv);
}

bool plan_dconv_own(const plan_region_info *r, const plan_gemm_view *g, plan_dconv *t) {
  dgeo d;
  if (!geometry(r, g, &d)) return false;
  memset(t, 0, sizeof *t);
  double best = -1;
  for (int nv = 1; nv <= 2; nv++) { /* choose_nv: the NV that issues fewer instructions */
    int mx = mr_bound(&d, nv);
    if (mx < 1) continue;
    double c = row_issue(&d, nv, even_mr(d.ow, mx));
    if (best < 0 || c < best - 1e-9) best = c, t->nv = nv, t->mr = even_mr(d.ow, mx);
  }
  if (best < 0) return false;
  /* plan_blocking: all channels up to 96 KiB of weights, else ~20 KiB */
  int64_t ob = 16 * t->nv, wch = d.kh * d.kw * ob * 4, nob = cdiv(d.oc, ob), nt = cdiv(d.ow, t->mr);
  t->cb = d.icg * wch <= BLOCK_FIT ? d.icg : 20480 / wch >= 8 ? 20480 / wch / 8 * 8 : UT_MAX(20480 / wch, 1);
  t->cb = UT_MIN(t->cb, d.icg);
  t->rows = 1;
  if (t->cb < d.icg) {
    int64_t row = nt * t->mr * ob * 4, ntask = d.n * nob, rb = 16384 / row;
    rb = rb < 1 ? 1 : UT_MIN(rb, d.oh);
    while (rb > 1 && ntask * cdiv(d.oh, rb) < 8) rb = (rb + 1) / 2;
    t->rows = cdiv(d.oh, cdiv(d.oh, rb));
  }
  t->order = nob > 1 && nob * d.icg * d.kh * d.kw * ob * 4 <= 512 * 1024 ? 1 : 2;
  return true;
}

bool plan_dconv_of(const plan_t *p, const plan_region_info *r, const plan_gemm_view *g, plan_dconv *t) {
  dgeo d;
  if (!plan_dconv_own(r, g, t) || !geometry(r, g, &d)) return false;
  int64_t tm = 0, tn = 0, tk = 0;
  for (int i = 0; i < p->ntile; i++) {
    if (g->m >= 0 && !strcmp(p->tile_axes[i], r->axes[g->m].name)) tm = p->tile[i];
    if (g->n >= 0 && !strcmp(p->tile_axes[i], r->axes[g->n].name)) tn = p->tile[i];
    if (g->k >= 0 && !strcmp(p->tile_axes[i], r->axes[g->k].name)) tk = p->tile[i];
  }
  int64_t tpx = d.swap ? tm : tn, toc = d.swap ? tn : tm;
  if (p->warp_m > 0 && p->warp_n > 0) {
    int px = d.swap ? p->warp_m : p->warp_n, oc = d.swap ? p->warp_n : p->warp_m;
    if ((oc != 16 && oc != 32) || px < 1 || px > mr_bound(&d, oc / 16)) return false; /* the kernel refuses it */
    t->nv = oc / 16, t->mr = (int)UT_MIN(px, d.ow);
  }
  if (tk > 0) t->cb = UT_MIN(UT_MAX(tk / (d.kh * d.kw), 1), d.icg);
  if (tpx > 0) t->rows = UT_MIN(UT_MAX(tpx / d.ow, 1), d.oh);
  if (toc > 0) t->order = toc >= d.oc ? 1 : 2;
  return true;
}

/* Cycles of one output row of one channel block of cb channels at t's tile
 * (every tile's calls, all kernel rows): FMAs, loads, latency; per call
 * its accumulators' loads and stores when blocked, and the last block's
 * transposed stores. */
static double row_cycles(const dgeo *d, const plan_dconv *t, int64_t cb, bool blocked, bool last) {
  double c = 0;
  int nv = t->nv;
  for (int64_t q = 0; q < d->ow; q += t->mr) {
    int64_t np = UT_MIN(d->ow - q, t->mr);
    double fma = (double)(np * d->kw * nv) / FMA_PER_CYCLE;
    double ld = (double)(d->kw * nv + (np - 1) * d->sw + (d->kw - 1) * d->dw + 1) / LOAD_PER_CYCLE;
    double step = UT_MAX(UT_MAX(fma, ld), FMA_LATENCY);
    c += step * (double)(cb * d->kh);
    double accs = (double)(np * nv);
    if (blocked) c += 2 * accs / LOAD_PER_CYCLE; /* partial sums in and out */
    if (last) c += 3 * accs;                     /* transposes and stores */
  }
  return c;
}

double plan_dconv_time(const plan_region_info *r, const plan_gemm_view *g, const plan_machine *m, const plan_dconv *t,
                       double best_gflops) {
  dgeo d;
  if (!geometry(r, g, &d) || best_gflops <= 0 || t->nv < 1 || t->mr < 1) return INFINITY;
  int lanes = UT_MAX(m->simd_bytes / 4, 1);
  /* the best micro-kernel (6 x 4 vectors) issues 2 FMAs a cycle */
  double cyc_s = FMA_PER_CYCLE * 2.0 * lanes / (best_gflops * 1e9);
  int64_t ob = 16 * t->nv, nob = cdiv(d.oc, ob), cb = UT_MAX(UT_MIN(t->cb, d.icg), 1), nblk = cdiv(d.icg, cb);
  bool blocked = nblk > 1;
  double row = 0;
  for (int64_t b = 0; b < nblk; b++) row += row_cycles(&d, t, UT_MIN(cb, d.icg - b * cb), blocked, b == nblk - 1);
  double wblock = (double)cb * d.kh * d.kw * ob * 4;
  if (wblock > BLOCK_FIT) row *= STREAM_PENALTY;
  int64_t rows = UT_MAX(UT_MIN(t->rows, d.oh), 1), nrb = cdiv(d.oh, rows);
  /* traffic beyond L2 that the task order causes: the input re-read per
   * channel block (rows fastest) or the weights per row block (channel
   * blocks fastest) when they do not stay in a core's L2 */
  double xbytes = (double)d.icg * (double)(rows * d.sw + d.kh - 1) * (double)(d.ow * d.sw + d.kw) * 4;
  double wall = (double)nob * (double)(d.icg * d.kh * d.kw) * (double)ob * 4;
  double l2 = (double)m->l2_bytes, gbs = m->calib.pack_gbs > 0 ? m->calib.pack_gbs * 1e9 : 2e10;
  double task_bytes = t->order == 1 ? (wall > l2 / 2 ? wall / (double)nob : 0) + xbytes / (double)nob
                                    : (xbytes > l2 / 2 ? xbytes : 0) + wall / (double)nob / (double)nrb;
  /* every task streams its channel block's weights and its input rows
   * into L1 once (a channel block's weights are then reused by the task's
   * rows): at L2_BYTES_PER_CYCLE, so tasks of few rows pay it more often */
  double l1_cycles = (wall / (double)nob + xbytes) / L2_BYTES_PER_CYCLE;
  /* the tasks: nrb - 1 of `rows` rows and one of the rest per image and
   * channel block, in rounds over the threads at their mean time */
  double row_s = row * cyc_s, tail = (double)(d.oh - (nrb - 1) * rows);
  double mean_s = ((double)(nrb - 1) * rows + tail) * row_s / (double)nrb + l1_cycles * cyc_s + task_bytes / gbs;
  int64_t ntask = d.n * nob * nrb;
  int threads = UT_MAX(UT_MIN(m->sm_count, 64), 1);
  double span = (double)cdiv(ntask, threads) * mean_s;
  return span + (threads > 1 ? 2 * m->calib.task_us * 1e-6 : 0);
}
