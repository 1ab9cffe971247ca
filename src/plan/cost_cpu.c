/* cost_cpu.c — the calibrated CPU cost model: a contraction plan's time on
 * the CPU template (src/backend/c/cgen_gemm.c) from this machine's measured
 * figures (plan_calib, docs/plan.md §19).
 * Needs: plan_calib_rate (calib.c), cpu_winograd_speedup's factors (cost.c).
 * Gives: plan_cpu_time, plan_cpu_wino_filter_s, plan_cpu_winograd_min_pixels.
 *
 * The template as the model sees it (cgen_gemm.c, resolve_tile):
 *   - the plan's warp tile is the register micro-tile MR x NR, its tile
 *     [BM, BN, BK] the blocking mc, nc, kc (kc at most K, nc at most a task's
 *     columns);
 *   - the work splits into tasks over batch, then N (or M) so that their
 *     count is a multiple of the threads; a thread runs ceil(tasks/threads)
 *     rounds (thread balance);
 *   - a task multiplies whole micro-tiles: its rows and columns rounded up
 *     to MR and NR (edge waste), at the micro-kernel's measured rate for
 *     (MR, NR, kc, nc) (tile efficiency);
 *   - A is packed once over all threads, each task packs the B columns it
 *     reads, and every K block but the last adds its partial C (packing
 *     traffic, at the measured packing bandwidth);
 *   - two parallel calls (pack, compute) per kernel; DRAM traffic of the
 *     operands bounds it from below.
 * Convolutions the template runs on the direct kernel (fp32, AVX-512,
 * overlapping windows) or on Winograd read none of the tiles: their time
 * depends on the shape alone; Winograd's against the direct kernel's is the
 * speed-up harp tune measured at the nearest shape (plan_calib's wino
 * entries), else cost.c's factors from another machine; plus, when the
 * weight is no parameter, its filter transform every call. */
#include <math.h>
#include <string.h>

#include "plan_int.h"
#include "util/util.h"

/* The direct conv kernel's rate against the best micro-kernel's
 * (bench/RESULTS.md: it runs 3x3 layers 1.15-1.8x faster than the implicit
 * GEMM, which reaches ~0.6-0.7 of the micro-kernel): about 0.8.  It ranks
 * only against Winograd, whose factors are measured against it. */
#define DIRECT_EFF 0.8
/* The filter transform (cgen_wino.c, emit_wpack: U = G g G^T in scalar
 * double, per output and input channel a*9 + a*a*3 multiply-adds for a x a
 * transformed points) runs each call when the weight is no parameter.
 * Measured with harp tune on the EPYC VM (bench/RESULTS.md, "Winograd's
 * filter transform"): a weight input against the same conv with its weight
 * an initializer, 64->64 @56 (F(4x4)) 0.39-0.43 ms more, 128->128 @28
 * (F(2x2)) 0.24-0.31 ms more, on 2 cores: 0.4-1.4 ns a multiply-add on a
 * core; 256->256 @14 (4 MB of transformed weights) ran ~30 ms more, far
 * slower still (not modelled).  1.0 taken: it keeps the direct kernel for a
 * weight input at 64->64 @56, whose Winograd the rate of the transform
 * alone would make a toss-up. */
#define WINO_FILTER_NS_PER_MAC 1.0

static int64_t rup(int64_t a, int64_t b) { return b > 0 ? (a + b - 1) / b * b : a; }
static int64_t cdiv(int64_t a, int64_t b) { return b > 0 ? (a + b - 1) / b : a; }

static int64_t tile_on(const plan_t *p, const plan_region_info *r, int axis) {
  if (axis < 0) return 0;
  for (int t = 0; t < p->ntile; t++)
    if (!strcmp(p->tile_axes[t], r->axes[axis].name)) return p->tile[t];
  return 0;
}

/* The best measured micro-kernel rate (GFLOP/s, one core). */
static double best_rate(const plan_calib *c) {
  double b = 0;
  for (int i = 0; i < c->nmk; i++) b = UT_MAX(b, c->mk[i].gflops);
  return b;
}

/* The template's task split (resolve_tile): *sm x *sn tasks per batch. */
static void task_split(int64_t M, int64_t N, int64_t nbat, int threads, int mr, int nr, int64_t *sm, int64_t *sn) {
  int64_t need = nbat >= 4 * threads ? 1 : threads / plan_gcd(nbat, threads);
  int64_t ncol = cdiv(N, nr), nrow = cdiv(M, mr);
  *sm = *sn = 1;
  if (need <= 1) return;
  if (N >= M && ncol >= 2) *sn = UT_MIN(need, ncol);
  else if (nrow >= 2) *sm = UT_MIN(need, nrow);
  else *sn = UT_MIN(need, ncol);
}

/* Seconds of a GEMM-shaped plan on the template. */
static double gemm_time(const plan_t *p, const plan_region_info *r, const plan_gemm_view *g, const plan_machine *m) {
  const plan_calib *c = &m->calib;
  int64_t M = g->M, N = g->N, K = g->K, nbat = UT_MAX(g->batch, 1);
  int mr = p->warp_m > 0 ? p->warp_m : 6, nr = p->warp_n > 0 ? p->warp_n : UT_MAX(m->simd_bytes / 4, 1) * 4;
  int64_t kc = tile_on(p, r, g->k), nc = tile_on(p, r, g->n);
  kc = kc > 0 ? UT_MIN(kc, K) : UT_MIN(256, K);
  nc = rup(nc > 0 ? nc : 512, nr);
  int threads = UT_MAX(UT_MIN(m->sm_count, 64), 1);
  int64_t sm, sn;
  task_split(M, N, nbat, threads, mr, nr, &sm, &sn);
  int64_t tm = rup(cdiv(M, sm), mr), tn = rup(cdiv(N, sn), nr);
  nc = UT_MIN(nc, tn);
  int64_t tasks = nbat * cdiv(M, tm) * cdiv(N, tn), rounds = cdiv(tasks, threads);
  double rate = plan_calib_rate(c, mr, nr, kc, nc);
  if (rate <= 0) rate = best_rate(c);
  double task_flops = 2.0 * (double)tm * (double)tn * (double)K; /* whole micro-tiles: edge waste */
  double gbs = c->pack_gbs * 1e9;
  double pack_b = (double)tn * (double)K * 8 / gbs;                           /* read + write */
  double partial = (double)(cdiv(K, kc) - 1) * (double)tm * (double)tn * 8 / gbs; /* C += per K block */
  double task = task_flops / (rate * 1e9) + pack_b + partial;
  double pack_a = (double)rup(M, mr) * (double)K * 8 * (double)nbat / gbs / threads;
  double t = (double)rounds * task + pack_a + 2 * c->task_us * 1e-6;
  int tin = UT_MAX(tiny_dtype_size(r->in_dtype), 1), tout = UT_MAX(tiny_dtype_size(r->out_dtype), 1);
  double dram = ((double)(M * K + K * N) * tin + (double)(M * N) * tout) * (double)nbat / (c->mem_gbs * 1e9);
  return t > dram ? t : dram;
}

/* The conv the template runs on its direct kernel (cgen_conv_direct): fp32,
 * an AVX-512 variant, windows overlapping along a row. */
static bool direct_conv(const plan_region_info *r, const plan_machine *m) {
  return r->pattern == PLAN_PAT_CONV && m->avx512 && r->in_dtype == TINY_FP32 && r->conv_kw > 0 &&
         r->conv_kw > UT_MAX(r->conv_sw, 1);
}

/* The transformed points a side cgen_conv_wino_tile gives a conv of ow
 * output columns: F(4x4) (6) from 8 columns except at 27-52, F(2x2) (4). */
static int wino_points_side(int64_t ow) { return ow < 8 || (ow >= 27 && ow <= 52) ? 4 : 6; }

double plan_cpu_wino_filter_s(const plan_region_info *r, const plan_gemm_view *g, const plan_machine *m) {
  (void)g;
  if (r->conv_w_per_call <= 0 || r->pattern != PLAN_PAT_CONV || m->arch != PLAN_ARCH_CPU) return 0;
  double a = wino_points_side(r->conv_ow), macs = a * 9 + a * a * 3;
  double pairs = (double)r->conv_w_per_call / (double)UT_MAX(r->conv_kh * r->conv_kw, 1); /* out x in channels */
  return pairs * macs * WINO_FILTER_NS_PER_MAC * 1e-9 / UT_MAX(m->sm_count, 1);
}

bool plan_cpu_time(const plan_t *p, const plan_region_info *r, const plan_gemm_view *g, const plan_machine *m,
                   double *out) {
  if (m->arch != PLAN_ARCH_CPU || !m->calib.valid || m->calib.nmk == 0) return false;
  if (r->pattern != PLAN_PAT_MATMUL && r->pattern != PLAN_PAT_CONV) return false;
  if (g->m < 0 || g->n < 0 || g->k < 0) return false;
  bool wino = r->pattern == PLAN_PAT_CONV && plan_algo_is_winograd(p->algo[PLAN_KEY_CONV]);
  if (!wino && !direct_conv(r, m)) {
    *out = gemm_time(p, r, g, m);
    return true;
  }
  /* tile-independent: the shape's FLOPs on all cores at the direct kernel's
   * rate, Winograd by its measured speed-up over that kernel */
  double flops = 2.0 * (double)g->M * (double)g->N * (double)g->K * (double)UT_MAX(g->batch, 1);
  double t = flops / (best_rate(&m->calib) * 1e9 * DIRECT_EFF * UT_MAX(m->sm_count, 1)) + 2 * m->calib.task_us * 1e-6;
  double px = (double)r->conv_oh * (double)r->conv_ow;
  double measured = plan_calib_wino_speedup(&m->calib, px > 0 ? (int64_t)px : g->N, g->K);
  *out = wino ? t / (measured > 0 ? measured : plan_cpu_winograd_speedup(r, g)) + plan_cpu_wino_filter_s(r, g, m) : t;
  return true;
}

/* Winograd's speed-up over the direct kernel that plan_cpu_time uses for a
 * 3x3 conv of px output pixels, k = 9 x input channels, storage in. */
static double wino_speedup_at(const plan_machine *m, tiny_dtype in, int64_t px, int64_t k) {
  plan_region_info r;
  memset(&r, 0, sizeof r);
  r.in_dtype = in, r.conv_oh = px, r.conv_ow = 1;
  plan_gemm_view g = {.K = k};
  double measured = m && m->calib.valid ? plan_calib_wino_speedup(&m->calib, px, k) : 0;
  return measured > 0 ? measured : plan_cpu_winograd_speedup(&r, &g);
}

/* The fewest output pixels from which Winograd is faster (over a 5% grid,
 * the last step bisected to the pixel), at every larger grid point too. */
int64_t plan_cpu_winograd_min_pixels(const plan_machine *m, tiny_dtype in, int64_t k) {
  int64_t first = 0, below = 0, prev = 0;
  for (double x = 16; x < (double)(1 << 24); x *= 1.05) {
    int64_t px = (int64_t)x;
    if (wino_speedup_at(m, in, px, k) <= 1) first = 0;
    else if (!first) first = px, below = prev;
    prev = px;
  }
  while (first && first - below > 1) { /* pays at first, not at below */
    int64_t mid = below + (first - below) / 2;
    if (wino_speedup_at(m, in, mid, k) > 1) first = mid;
    else below = mid;
  }
  return first;
}
