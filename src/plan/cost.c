/* cost.c — the cost model of seed 000 §6 and the fusion Δtime of §4.1/§6.
 * Needs: resource.c, validate.c (GEMM view), cost_cpu.c (a calibrated CPU).
 * Gives: plan_time_formula, plan_cache_miss, plan_cost_of,
 * plan_cpu_winograd_speedup, plan_splitk_factor, plan_fusion_delta.
 *
 *   time_est = max(FLOPs / (peak × occ × pipeline_eff), Bytes / (BW × occ))
 *
 * `occ` here is the achieved occupancy: §5's occ times the wave efficiency
 * (the last wave of CTAs leaves SMs idle), which is 1 for large problems.
 * Bytes are the region's compulsory traffic plus, for contractions, the tile
 * re-reads that miss in L2 and the split-K partial sums.  The figures rank
 * plans and weigh fusions; the tuner measures. */
#include <math.h>
#include <string.h>

#include "plan_int.h"
#include "util/util.h"

/* Falling back from TMA/WGMMA to cp.async/mma.sync costs about half the
 * kernel again; a narrower vector access a quarter of the kernel per
 * halving of the width.  Both are rough, and both are also §4.2 STOPs. */
#define LAYOUT_PENALTY_SM90 0.5
#define LAYOUT_PENALTY_VEC 0.25
/* Winograd F(2x2, 3x3) does 2.25x fewer multiplies and moves ~30% more. */
#define WINOGRAD_FLOPS 2.25
#define WINOGRAD_BYTES 1.3
/* Split-K on GPUs: an fp32 atomic add costs about 8 plain bytes' worth of
 * bandwidth per byte; each extra launch (zeroing, finishing pass) ~3 us. */
#define SPLITK_ATOMIC_COST 8.0
#define GPU_LAUNCH_S 3e-6

double plan_cache_miss(const plan_machine *m, double bytes) {
  double cache = plan_arch_is_gpu(m->arch) ? (double)m->l2_bytes : (double)m->l3_bytes + (double)m->l2_bytes * m->sm_count;
  return bytes <= cache / 2 ? 0 : 1 - cache / 2 / bytes;
}

double plan_time_formula(double flops, double bytes, double peak, double bw, double occ, double pipeline_eff) {
  if (occ <= 0 || pipeline_eff <= 0 || peak <= 0 || bw <= 0) return INFINITY;
  double tc = flops / (peak * occ * pipeline_eff), tm = bytes / (bw * occ);
  return tc > tm ? tc : tm;
}

/* CPU: how many times faster Winograd (cgen_wino.c) runs than the direct
 * kernel it replaces, measured (bench/conv3x3.py; bench/RESULTS.md,
 * "Winograd on the CPU"): by output pixels per image, 1.4-2x from 56x56
 * up, 1.3-1.6x at 28x28, slower at 14x14 (0.7-0.8x) and 7x7 (0.4x: the
 * transformed weights, 1.8-4x the direct's, are read for a few tiles);
 * few input channels leave the transforms most of the work.  Storage
 * other than fp32 (cgen_wino.c widens and narrows around the fp32 kernel)
 * is unmeasured: never chosen, a plan may name it. */
double plan_cpu_winograd_speedup(const plan_region_info *r, const plan_gemm_view *g) {
  if (r->in_dtype != TINY_FP32) return 0.1;
  double px = (double)r->conv_oh * (double)r->conv_ow;
  if (px <= 0) return WINOGRAD_FLOPS;
  if (g->K > 0 && g->K < 16 * 9) return 0.5;
  return px >= 3136 ? 1.5 : px >= 784 ? 1.3 : px >= 196 ? 0.75 : 0.4;
}

/* CPU split-K (splitk_reduce in the skinny kernel) over unsplit, as
 * measured (bench/splitk_bench.c, 2 threads, bench/RESULTS.md; an EPYC VM
 * whose L3 reads 32 MiB in lscpu, 384 in sysconf): a GEMV whose B streams
 * 8 to 32 MiB ran 1.1-1.9x faster split 4 ways (16 MiB: 1.6-1.9x); at
 * 64 MiB 0.45-2.75x over runs, no verdict; smaller ones gained nothing or lost to the second pass and the
 * workers' wake-up (0.1-1.9x, 1.0 typical), while the model credits split-K
 * with the idle cores it fills (2x for one strip on 2 cores): 0.4 takes
 * that back, so those stay unsplit by default. */
static double cpu_splitk_speedup(const plan_region_info *r, const plan_gemm_view *g, const plan_machine *m) {
  double b_bytes = (double)g->batch * (double)g->K * (double)g->N * UT_MAX(tiny_dtype_size(r->in_dtype), 1);
  (void)m; /* the range is this measurement's, not yet a function of the caches */
  return g->M <= 8 && b_bytes >= 8.0 * (1 << 20) && b_bytes <= 32.0 * (1 << 20) ? 1.4 : 0.4;
}

static int64_t cdiv(int64_t a, int64_t b) { return b > 0 ? (a + b - 1) / b : a; }

/* ctas over `slots` resident CTAs: the share of the waves' slots they fill */
static double wave_eff(int64_t ctas, double slots) {
  double waves = ceil((double)ctas / slots);
  return waves > 0 ? (double)ctas / (waves * slots) : 0;
}

/* Outer tiles = CTAs before split-K: every parallel axis, tiled or not. */
static int64_t outer_tiles(const plan_t *p, const plan_region_info *r) {
  double n = 1;
  for (int i = 0; i < r->naxes; i++) {
    if (r->axes[i].reduce) continue;
    int64_t s = r->axes[i].size;
    for (int t = 0; t < p->ntile; t++)
      if (strcmp(p->tile_axes[t], r->axes[i].name) == 0) s = cdiv(s, p->tile[t]);
    n *= (double)s;
  }
  return n > 4e18 ? (int64_t)4e18 : (int64_t)n;
}

static int64_t k_tile(const plan_t *p, const plan_gemm_view *g, const plan_region_info *r) {
  if (g->k < 0) return 0;
  for (int t = 0; t < p->ntile; t++)
    if (strcmp(p->tile_axes[t], r->axes[g->k].name) == 0) return p->tile[t];
  return 0;
}

int plan_splitk_factor(const plan_t *p, const plan_region_info *r, const plan_machine *m, const plan_resources *res) {
  if ((r->pattern != PLAN_PAT_MATMUL && r->pattern != PLAN_PAT_CONV) || !plan_algo_is_splitk(p->algo[PLAN_KEY_MATMUL]))
    return 1;
  if (p->splitk) return p->splitk; /* the plan's own count (plan_validate bounds it by the K tiles) */
  plan_gemm_view g;
  if (plan_region_gemm_view(r, &g, NULL)) return 1;
  int64_t bk = k_tile(p, &g, r);
  if (bk <= 0) return 1;
  int64_t ktiles = cdiv(g.K, bk), tiles = outer_tiles(p, r);
  int64_t slots = (int64_t)m->sm_count * UT_MAX(res->cta_per_sm, 1);
  int s = 1;
  while (tiles * s < slots && s * 2 <= 64 && ktiles / (s * 2) >= 4) s *= 2;
  return s;
}

bool plan_persistent(const plan_t *p, const plan_region_info *r, const plan_machine *m, const plan_resources *res) {
  if (m->arch != PLAN_ARCH_SM90 || r->pattern != PLAN_PAT_MATMUL) return false;
  int64_t slots = (int64_t)m->sm_count * UT_MAX(res->cta_per_sm, 1);
  return outer_tiles(p, r) * plan_splitk_factor(p, r, m, res) > 2 * slots;
}

harp_status plan_cost_of(const plan_t *p, const plan_region_info *r, const plan_machine *m, plan_cost *out,
                       harp_error *e) {
  memset(out, 0, sizeof *out);
  plan_gemm_view g;
  harp_status st = plan_region_gemm_view(r, &g, e);
  if (st) return st;
  plan_resources_of(p, m, r, &out->res);
  if ((st = plan_resources_check(p, &out->res, m, NULL, e))) return st;
  const plan_resources *res = &out->res;
  bool contraction = plan_pattern_is_contraction(r->pattern);
  int tin = UT_MAX(tiny_dtype_size(r->in_dtype), 1), tout = UT_MAX(tiny_dtype_size(r->out_dtype), 1);
  double numel = 1, out_numel = 1;
  for (int i = 0; i < r->naxes; i++) {
    numel *= (double)r->axes[i].size;
    if (!r->axes[i].reduce) out_numel *= (double)r->axes[i].size;
  }
  double M = (double)g.M, N = (double)g.N, K = (double)g.K, B = (double)g.batch;
  double flops = (double)r->flops, bytes = (double)r->bytes;
  if (flops <= 0) flops = r->pattern == PLAN_PAT_ATTENTION ? 4 * M * N * K * B : contraction ? 2 * M * N * K * B : numel;
  if (bytes <= 0)
    bytes = contraction ? (M * K + K * N) * B * tin + M * N * B * tout : numel * tin + out_numel * tout;

  /* the CPU's direct conv kernel reads no GEMM panels and splits rows, not
   * tiles: its tiles (cost_dconv.c) are ranked by the calibrated model alone,
   * and uncalibrated none beats the kernel's own */
  bool cpu_dconv = m->arch == PLAN_ARCH_CPU && r->pattern == PLAN_PAT_CONV && g.m >= 0 && g.n >= 0 && g.k >= 0 &&
                   plan_cpu_direct_conv(r, &g, m);
  out->splitk = plan_splitk_factor(p, r, m, res);
  out->ctas = outer_tiles(p, r) * out->splitk;
  int extra_launches = 0;
  if (contraction && g.m >= 0 && g.n >= 0 && g.k >= 0) {
    /* A is read once per column of tiles, B once per row of tiles; the
     * re-reads hit in L2 (GPU) or the shared LLC (CPU) while the operands
     * fit in half of it. */
    int64_t bm = 1, bn = 1;
    for (int t = 0; t < p->ntile; t++) {
      if (!strcmp(p->tile_axes[t], r->axes[g.m].name)) bm = p->tile[t];
      if (!strcmp(p->tile_axes[t], r->axes[g.n].name)) bn = p->tile[t];
    }
    double a_bytes = M * K * B * tin, b_bytes = K * N * B * tin;
    double reread = a_bytes * (double)(cdiv(g.N, bn) - 1) + b_bytes * (double)(cdiv(g.M, bm) - 1);
    if (cpu_dconv) reread = 0;
    bytes += reread * plan_cache_miss(m, a_bytes + b_bytes);
    if (out->splitk > 1) {
      double part = M * N * B * 4; /* fp32 partial tiles */
      /* parallel: every slice writes (or adds) its partial tile and the
       * finishing pass reads them back; serial: slice s reads the running
       * sum of slices < s and writes it, the last applies the epilogue */
      bool serial = p->algo[PLAN_KEY_MATMUL] == PLAN_ALGO_SPLITK_SERIAL;
      bool atomics = p->algo[PLAN_KEY_MATMUL] == PLAN_ALGO_SPLITK_PARALLEL && plan_arch_is_gpu(m->arch);
      /* fp32 atomics into L2 move about as slowly as SPLITK_ATOMIC_COST
       * times their bytes (H100: 1024x1024x4096 ran 2.4x slower split 8
       * ways than not at all; 512x512x8192 1.5x faster split 8 ways, and
       * 16 ways cost 18 us more for 8 MB more of atomics) */
      bytes += serial ? 2 * part * (out->splitk - 1) : atomics ? part * out->splitk * SPLITK_ATOMIC_COST + 2 * part
                                                               : 2 * part * out->splitk;
      extra_launches = serial ? 1 : atomics ? 2 : 1; /* the zeroing of the workspace / flags, the finishing pass */
    }
    if (plan_algo_is_winograd(p->algo[PLAN_KEY_CONV])) {
      flops /= plan_arch_is_gpu(m->arch) ? WINOGRAD_FLOPS : plan_cpu_winograd_speedup(r, &g);
      /* a CPU Winograd transforms a weight that is no parameter every call:
       * its seconds as the FLOPs the direct kernel (~0.8 of the peak) does
       * in them, so the formula's efficiency scales both alike */
      flops += plan_cpu_wino_filter_s(r, &g, m) * plan_machine_peak(m, r->in_dtype) * 0.8;
      bytes *= WINOGRAD_BYTES;
    }
  }
  out->flops = flops;
  out->bytes = bytes;
  out->peak = contraction ? plan_machine_peak(m, r->in_dtype) : m->peak_fp32;
  out->bw = m->mem_bw;
  out->wave_eff = wave_eff(out->ctas, (double)m->sm_count * res->cta_per_sm);
  if (cpu_dconv) out->wave_eff = 1; /* its tasks are rows, not the plan's tiles (cost_dconv.c) */
  out->occ_eff = res->occ * out->wave_eff;
  double occ = out->occ_eff, eff = res->pipeline_eff;
  double launches = plan_arch_is_gpu(m->arch) ? extra_launches * GPU_LAUNCH_S : 0;
  out->t_compute = occ > 0 && eff > 0 ? flops / (out->peak * occ * eff) : INFINITY;
  out->t_memory = occ > 0 ? bytes / (out->bw * occ) : INFINITY;
  out->time_est = plan_time_formula(flops, bytes, out->peak, out->bw, occ, eff) + launches;
  /* SM90 GEMMs run on the persistent, warp-specialised wgmma template: one
   * CTA per SM keeps the tensor cores fed, so a second resident CTA buys
   * nothing and the ring depth is what counts (H100: 128x256 tiles with 3
   * stages 1.01x cuBLAS, with 2 stages 0.67x; split-K choices measured in
   * bench/cuda_splitk.py).  The search ranks their plans at occupancy 1,
   * waves over the SMs (rank_time).  time_est keeps §5's occupancy, which
   * the region former's fusion estimates compare, and GEMMs of fewer than
   * four 128x128 tiles keep §5's ranking (no measurement says otherwise). */
  out->rank_time = out->time_est;
  if (m->arch == PLAN_ARCH_SM90 && r->pattern == PLAN_PAT_MATMUL && res->cta_per_sm >= 1 &&
      M * N * B >= 4.0 * 128 * 128)
    out->rank_time = plan_time_formula(flops, bytes, out->peak, out->bw, wave_eff(out->ctas, m->sm_count), eff) + launches;
  /* a calibrated CPU: the template's time from the measured figures (cost_cpu.c) */
  double t;
  if (plan_cpu_time(p, r, &g, m, &t)) out->time_est = out->rank_time = t;
  if (m->arch == PLAN_ARCH_CPU && r->pattern == PLAN_PAT_MATMUL && out->splitk > 1)
    out->rank_time /= cpu_splitk_speedup(r, &g, m);
  return HARP_OK;
}

void plan_fusion_delta(const plan_fusion_in *in, const plan_machine *m, plan_fusion_out *out) {
  memset(out, 0, sizeof *out);
  double occ = in->after.occ, eff = in->after.pipeline_eff > 0 ? in->after.pipeline_eff : 0.5;
  double peak = plan_machine_peak(m, in->in_dtype), bw = m->mem_bw;
  if (occ <= 0) {
    out->dtime = out->cost = INFINITY;
    out->stops |= PLAN_STOP_CTA1;
    return;
  }
  double tc = in->dflops / (peak * occ * eff), tm = in->dbytes / (bw * occ);
  out->dwork = tc > tm ? tc : tm;
  if (in->before.occ > 0) out->docc_time = in->base_time * (in->before.occ / occ - 1);
  if (in->fanout > 1) out->fanout_penalty = (in->fanout - 1) * in->producer_time;
  if (in->sm90_tile_broken && m->arch == PLAN_ARCH_SM90) out->layout_penalty += LAYOUT_PENALTY_SM90 * in->base_time;
  if (in->vec_after > 0 && in->vec_after < in->vec_before)
    out->layout_penalty += LAYOUT_PENALTY_VEC * log2((double)in->vec_before / in->vec_after) * in->base_time;
  out->benefit = in->saved_bytes / bw;
  out->cost = out->dwork + out->docc_time + out->fanout_penalty + out->layout_penalty;
  out->dtime = out->cost - out->benefit;
  if (plan_smem_near_limit(&in->after, m)) out->stops |= PLAN_STOP_SMEM80;
  if (plan_cta_dropped_to_one(&in->before, &in->after)) out->stops |= PLAN_STOP_CTA1;
  if (in->vec_after > 0 && plan_vec_shrunk(in->vec_before, in->vec_after)) out->stops |= PLAN_STOP_VEC_SHRINK;
  if (in->sm90_tile_broken && m->arch == PLAN_ARCH_SM90) out->stops |= PLAN_STOP_SM90_TILE;
  out->fuse = out->dtime < 0 && out->stops == 0;
}
