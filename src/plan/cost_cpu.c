/* cost_cpu.c — the calibrated CPU cost model: a contraction plan's time on
 * the CPU template (src/backend/c/cgen_gemm.c) from this machine's measured
 * figures (plan_calib, docs/plan.md §19).
 * Needs: plan_calib_rate (calib.c), cpu_winograd_speedup's factors and
 * plan_cache_miss (cost.c), the direct conv kernel's model (cost_dconv.c).
 * Gives: plan_cpu_time, plan_cpu_wino_filter_s, plan_cpu_winograd_min_pixels(_w).
 *
 * The template as the model sees it (cgen_gemm_variant.c, cg_mm_resolve_tile; gemm_time):
 *   - the plan's warp tile is the register micro-tile MR x NR, its tile
 *     [BM, BN, BK] the blocking mc, nc, kc (kc at most K);
 *   - the work splits into tasks exactly as cg_mm_resolve_tile splits it (batch,
 *     then N or M), taken by whichever thread is free (thread balance);
 *   - a task calls the full micro-kernel and the tails' (whole vectors of
 *     the last columns, the last rows), each at its cycles a k step from
 *     FMAs, loads and latency, scaled to the calibrated rate of the full
 *     tile (tile efficiency, tails), plus a per-call cost per K block;
 *   - A is packed every call unless a model parameter, B once at model_init
 *     when it is one (else per task), and every K block but the first adds
 *     its partial C, from L3 when it does not stay in L2 (packing traffic,
 *     at the measured packing bandwidth);
 *   - the parallel calls at their measured cost; DRAM traffic of the
 *     operands that do not stay in the caches bounds it from below.
 * Convolutions the template runs on the direct kernel (fp32, AVX-512,
 * overlapping windows) at the plan's tile: cost_dconv.c's model; 1x1 convs
 * in NCHW that it runs on the direct kernel (as matmuls, 256 or more input
 * channels) read no tile: the shape's FLOPs at DIRECT_EFF; the others run
 * transposed on the template at the plan's warp tile and BK.  Winograd
 * reads none of the tiles: its time against the direct kernel's at the
 * kernel's own tile is the
 * speed-up harp tune measured at the nearest shape (plan_calib's wino
 * entries), else cost.c's factors from another machine; plus, when the
 * weight is no parameter, its filter transform every call (at the rate
 * harp calibrate measured, wfilter_ns, else WINO_FILTER_NS_PER_MAC). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "plan_int.h"
#include "util/util.h"

/* The direct conv kernel's rate against the best micro-kernel's for a 1x1
 * conv run as a matmul (bench/RESULTS.md: it runs 3x3 layers 1.15-1.8x
 * faster than the implicit GEMM, which reaches ~0.6-0.7 of the
 * micro-kernel): about 0.8; wider windows: cost_dconv.c. */
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
 * alone would make a toss-up.  Used when the calibration has no wfilter_ns
 * (uncalibrated, or a file from before it): harp calibrate times the
 * transform's loop (calib_wf.c) with its output within L2 and beyond, and
 * the transformed weights' bytes pick one (this AMX host, one thread, the
 * loop storing runs of MR floats: 0.2 ns in L2, 0.4 beyond; 64->64 @56 on
 * costrank 5% faster on Winograd than direct, quiet, 19:25 UTC). */
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

/* The micro-kernel's cycles per k step for `rows` rows by `vecs` vectors
 * (cgen_gemm_variant.c's emit_kernel: one FMA per row and vector, a load per
 * vector of B and a broadcast per row of A): x86 cores issue two FMAs a
 * cycle, and an accumulator waits ~4 cycles for its last FMA, so fewer
 * than 8 accumulators leave the FMA units idle; loads and broadcasts at
 * 1.5 a cycle fit harp tune's 480x64x512 (8x48's 8 x 1-vector tail, 8 FMAs
 * and 9 loads a step: 8x48 1.12-1.15x the 6x64's time, about 6 cycles a
 * step for the tail).  The full tiles (6x4, 8x3 vectors) are FMA-bound;
 * the tails the template emits for the last rows (M % MR) and columns
 * (N % NR, in whole vectors) may not be. */
#define FMA_PER_CYCLE 2.0
#define LOAD_PER_CYCLE 1.5
#define FMA_LATENCY 4.0
static double step_cycles(int rows, int vecs) {
  if (rows <= 0 || vecs <= 0) return 0;
  double fma = rows * vecs / FMA_PER_CYCLE, ld = (rows + vecs) / LOAD_PER_CYCLE;
  return UT_MAX(UT_MAX(fma, ld), FMA_LATENCY);
}

/* The FMA units' share of the cycles of a k step of rows x vecs. */
static double fma_share(int rows, int vecs) {
  double c = step_cycles(rows, vecs);
  return c > 0 ? rows * vecs / FMA_PER_CYCLE / c : 0;
}

/* The micro-kernel's rate for a plan: the calibration's at (mr, nr, kc, nc),
 * except that rates within RATE_NOISE of the best measured for that
 * micro-tile (any kc, nc) count as that best: harp calibrate's figures
 * scatter by ~2-3% from one (kc, nc) to the next and from run to run, so a
 * 1% difference between two depths in the file ranks nothing, while the
 * best of a tile's six measurements is a steady figure for the tile (the
 * depth's own cost is the per-call term of task_cycles).  A micro-tile the
 * calibration did not time (an older file, or one that the epilogue's
 * registers moved the search to): the timed tile of the nearest
 * accumulator count, scaled by the two tiles' FMA share of step_cycles
 * and, with fewer accumulators, by the square root of their ratio (the
 * step model calls 6x32 and 4x48 FMA-bound, yet this host's calibration,
 * 19:25 UTC, timed them at 0.88 and 0.73 of 6x64's rate: 12 accumulators
 * against 24, sqrt 0.71; ranked behind the timed tiles rather than level). */
#define RATE_NOISE 0.97
static double tile_rate(const plan_calib *c, int mr, int nr, int lanes, int64_t kc, int64_t nc) {
  double best = 0, r = plan_calib_rate(c, mr, nr, kc, nc);
  for (int i = 0; i < c->nmk; i++)
    if (c->mk[i].mr == mr && c->mk[i].nr == nr) best = UT_MAX(best, c->mk[i].gflops);
  if (best > 0) return r >= RATE_NOISE * best ? best : r;
  int nv = UT_MAX(nr / lanes, 1), near = -1, dn = 0;
  for (int i = 0; i < c->nmk; i++) {
    const plan_calib_mk *k = &c->mk[i];
    int d = k->mr * UT_MAX(k->nr / lanes, 1) - mr * nv;
    d = d < 0 ? -d : d;
    if (near < 0 || d < dn || (d == dn && k->gflops > c->mk[near].gflops)) near = i, dn = d;
  }
  if (near < 0) return 0;
  const plan_calib_mk *k = &c->mk[near];
  double acc = (double)mr * nv, kacc = (double)k->mr * UT_MAX(k->nr / lanes, 1);
  double fewer = acc < kacc ? sqrt(acc / kacc) : 1;
  return k->gflops * fewer * fma_share(mr, nv) / fma_share(k->mr, UT_MAX(k->nr / lanes, 1));
}

/* Each call of the micro-kernel loads and stores its C tile and enters and
 * leaves its K loop: about this many k steps' worth (the calibrated rate
 * rises ~1-2% from kc 128 to 384; a K block of 2 left by kc 128 on K 130
 * ran ~4% slower than one of 130). */
#define CALL_STEPS 4.0

/* The template's task split for a plan (cgen_gemm_variant.c, cg_mm_resolve_tile, in the
 * same order of tests): the number of tasks along M and N per batch, each
 * tm x tn (whole micro-tiles), so that the tasks fill the threads; both
 * bound, the split whose slowest thread computes fewer rows x columns
 * (plus, when B is packed per task, 16 multiply-adds' worth a B element). */
typedef struct gemm_split {
  int64_t tm, tn, sm, sn;
} gemm_split;
static gemm_split task_split(int64_t M, int64_t N, int64_t nbat, int threads, int mr, int nr, int lanes, bool pm,
                             bool pn, bool b_packed) {
  int64_t need = nbat >= 4 * threads ? 1 : threads / plan_gcd(nbat, threads);
  int64_t ncol = cdiv(N, nr), nrow = cdiv(M, mr), sm = 1, sn = 1;
  if (!pm && !pn) pm = pn = true;
  if (need > 1) {
    if (pn && pm && N >= M && ncol >= 2 && nrow >= 2) {
      int64_t cn = UT_MIN(need, ncol), cm = UT_MIN(need, nrow);
      double pack = b_packed ? 0 : 16;
      int64_t tn = rup(cdiv(N, cn), nr), tm = rup(cdiv(M, cm), mr);
      int64_t rn = cdiv(nbat * cdiv(N, tn), threads), rm = cdiv(nbat * cdiv(M, tm), threads);
      double wn = (double)rn * (double)UT_MIN(tn, N) * ((double)rup(M, mr) + pack);
      double wm = (double)rm * (double)rup(N, lanes) * ((double)UT_MIN(tm, M) + pack);
      if (wm < wn) sm = cm;
      else sn = cn;
    } else if (pn && (!pm || N >= M) && ncol >= 2) sn = UT_MIN(need, ncol);
    else if (pm && nrow >= 2) sm = UT_MIN(need, nrow);
    else if (pn) sn = UT_MIN(need, ncol);
  }
  gemm_split s = {rup(cdiv(M, sm), mr), rup(cdiv(N, sn), nr), 0, 0};
  s.sm = cdiv(M, s.tm), s.sn = cdiv(N, s.tn);
  return s;
}

/* A call's C tile comes from L2 and goes back there every K block (the
 * template's loop order 0 touches every C tile of its block once a K block,
 * so none stays in L1): MR x NR floats loaded and stored at about this many
 * bytes a cycle, lanes / 2 k steps of a full tile, whatever its shape (16
 * on AVX-512: 8 steps, 12% of a kc 64 call of 6x64, 3% at kc 256; harp tune
 * under load, 02:10 UTC: kc 64 ran 10-25% slower than 256 at 130^3 and
 * 1000x512x50, 0-7% at 200x256x100, where CALL_STEPS alone said 1-6%). */
#define C_L2_BYTES_PER_CYCLE 32.0

/* The micro-kernel cycles of one task of rows x cols: full MR x NR calls,
 * the row tail's and the column tail's (in whole vectors; only the task at
 * M's or N's end has one, as tasks hold whole micro-tiles), each K block's
 * depth plus CALL_STEPS, and each K block's pass of the task's C through L2
 * (the first block's a store alone). */
static double task_cycles(int64_t rows, int64_t cols, int64_t K, int64_t nkb, int mr, int nr, int lanes) {
  int nv = UT_MAX(nr / lanes, 1);
  int64_t fr = rows / mr, fc = cols / nr;
  int rt = (int)(rows % mr), vt = (int)cdiv(cols % nr, lanes);
  double per_step = (double)fr * (double)fc * step_cycles(mr, nv) + (double)fr * step_cycles(mr, vt) +
                    (double)fc * step_cycles(rt, nv) + step_cycles(rt, vt);
  /* the first K block stores its C without loading it: half a pass */
  double c_pass = (double)rows * (double)rup(cols, lanes) * 4 * 2 / C_L2_BYTES_PER_CYCLE;
  return per_step * ((double)K + (double)nkb * CALL_STEPS) + ((double)nkb - 0.5) * c_pass;
}

/* The slowest thread's seconds over the tasks: they are taken in order by
 * whichever thread is free (hprt_pool_run), each of `task_s(i)` seconds.
 * Few tasks are simulated one by one; many (a batch split) in rounds. */
static double makespan(const double *task_s, int64_t ntask, int threads) {
  double load[64] = {0}, worst = 0;
  threads = UT_MAX(UT_MIN(threads, 64), 1);
  for (int64_t i = 0; i < ntask; i++) {
    int t = 0;
    for (int j = 1; j < threads; j++)
      if (load[j] < load[t]) t = j;
    load[t] += task_s[i];
  }
  for (int j = 0; j < threads; j++) worst = UT_MAX(worst, load[j]);
  return worst;
}

/* The template's work below this (M N K, B under 1 MiB) runs on the calling
 * thread alone (contract_c.c, SMALL_WORK / SMALL_BYTES). */
#define SMALL_WORK (double)(1 << 21)
#define SMALL_BYTES (double)(1 << 20)

/* Seconds of a GEMM-shaped plan on the template (cgen_gemm.c):
 *   - the plan's warp tile is MR x NR, its tile [BM, BN, BK] mc, nc, kc (kc
 *     at most K); B packed once at model_init when it is a parameter (and A
 *     is not), else per task; A packed every call unless a parameter;
 *   - the tasks (task_split) are taken by the threads as they come; each
 *     computes its rows x columns in micro-kernel calls (task_cycles, at the
 *     calibrated rate of the full tile), packs its B columns (unless packed
 *     once) and adds its partial C for every K block but the first;
 *   - the parallel calls (pack A, tasks) cost the calibrated task_us; DRAM
 *     traffic of the operands beyond the caches bounds the whole from below. */
static double gemm_time(const plan_t *p, const plan_region_info *r, const plan_gemm_view *g, const plan_machine *m) {
  const plan_calib *c = &m->calib;
  int64_t M = g->M, N = g->N, K = g->K, nbat = UT_MAX(g->batch, 1);
  int lanes = UT_MAX(m->simd_bytes / 4, 1);
  /* the template's own micro-tile (cg_mm_resolve_tile): 6x64 AVX-512, 6x16 AVX2 */
  int mr = lanes >= 8 ? 6 : 4, nr = lanes >= 16 ? 4 * lanes : lanes >= 8 ? 2 * lanes : 4;
  int64_t kc = tile_on(p, r, g->k), nc = 0;
  /* a conv whose plan has the pixels as M, and a matmul whose C is
   * unit-stride along M (gemm_transpose: a 1x1 conv in NCHW), run with the
   * plan's M as the template's N and read BK and the warp tile (as the
   * template's MR x NR) of the plan (contract_c.c, cc_plan_tuning) */
  bool swap = r->pattern == PLAN_PAT_CONV ? plan_conv_pixels_m(r, g) : r->c_m_contig;
  if (p->warp_m > 0 && p->warp_n > 0) mr = p->warp_m, nr = p->warp_n;
  if (swap) M = g->N, N = g->M;
  else nc = tile_on(p, r, g->n);
  kc = kc > 0 ? UT_MIN(kc, K) : UT_MIN(256, K);
  nc = rup(nc > 0 ? nc : 512, nr);
  int tin = UT_MAX(tiny_dtype_size(r->in_dtype), 1), tout = UT_MAX(tiny_dtype_size(r->out_dtype), 1);
  /* a conv's weight is the template's A (packed once when a parameter);
   * a transposed matmul's A is the plan's B */
  bool conv = r->pattern == PLAN_PAT_CONV;
  bool a_param = conv ? r->conv_w_per_call == 0 : swap ? r->b_param : r->a_param;
  bool b_param = !conv && (swap ? r->a_param : r->b_param);
  bool a_once = a_param && r->in_dtype == TINY_FP32, b_once = !a_once && b_param && M > 8 && nbat == 1;
  bool pm = plan_axis_bound_block(p, r, swap ? g->n : g->m), pn = plan_axis_bound_block(p, r, swap ? g->m : g->n);
  int threads = pm || pn ? UT_MAX(UT_MIN(m->sm_count, 64), 1) : 1;
  if ((double)M * N * K * nbat < SMALL_WORK && (double)K * N * tin < SMALL_BYTES) threads = 1;
  gemm_split s = task_split(M, N, nbat, threads, mr, nr, lanes, pm, pn, b_once);
  int64_t nkb = cdiv(K, kc);
  double rate = tile_rate(c, mr, nr, lanes, kc, UT_MIN(nc, s.tn));
  if (rate <= 0) return INFINITY;
  /* seconds per cycle of step_cycles: the full tile at the calibrated rate */
  int nv = UT_MAX(nr / lanes, 1);
  double cyc = 2.0 * mr * nv * lanes / (rate * 1e9) / step_cycles(mr, nv);
  double gbs = c->pack_gbs * 1e9;
  double task_s[4]; /* a full task; the last along N; along M; both */
  for (int i = 0; i < 4; i++) {
    int64_t rows = i & 2 ? M - (s.sm - 1) * s.tm : s.tm, cols = i & 1 ? N - (s.sn - 1) * s.tn : s.tn;
    double t = task_cycles(rows, cols, K, nkb, mr, nr, lanes) * cyc;
    if (!b_once) t += (double)cols * (double)K * 8 / gbs;                    /* pack B: read + write */
    /* C += per K block: the block of C a K block updates (the task's rows
     * by nc columns) is read back from L3 unless it stays in L2 beside the
     * packed B block (then its re-reads hide behind the calls: CALL_STEPS) */
    double cblk = (double)rows * (double)UT_MIN(nc, cols) * 4, bblk = (double)kc * (double)UT_MIN(nc, cols) * 4;
    if (cblk + bblk > (double)m->l2_bytes) t += (double)(nkb - 1) * (double)rows * (double)cols * 8 / gbs;
    task_s[i] = t;
  }
  int64_t ntask = nbat * s.sm * s.sn;
  double span;
  if (ntask <= 4096) {
    double tt[4096];
    for (int64_t i = 0; i < ntask; i++) {
      int64_t tn = i % s.sn, tm = i / s.sn % s.sm;
      tt[i] = task_s[(tn == s.sn - 1 ? 1 : 0) | (tm == s.sm - 1 ? 2 : 0)];
    }
    span = makespan(tt, ntask, threads);
  } else {
    span = (double)cdiv(ntask, threads) * task_s[0];
  }
  double pack_a = a_once ? 0 : (double)rup(M, mr) * (double)K * 8 * (double)nbat / gbs / threads;
  double t = span + pack_a + (threads > 1 ? 2 * c->task_us * 1e-6 : 0);
  /* DRAM bounds it from below for the operands' bytes that do not stay in
   * the caches from one call to the next (plan_cache_miss), not for all of
   * them: a GEMM whose operands fit runs from cache (harp tune times it
   * called again and again, and in a model its input was just written),
   * and a floor of every byte at mem_gbs tied all its plans (a calibration
   * measured under load, mem_gbs 4.2 GB/s: every GEMM of bench/costrank.py
   * but 1024^3, whose estimates then said nothing). */
  double bytes = ((double)(M * K + K * N) * tin + (double)(M * N) * tout) * (double)nbat;
  double dram = bytes * plan_cache_miss(m, bytes) / (c->mem_gbs * 1e9);
  return t > dram ? t : dram;
}

/* The transformed points a side cgen_conv_wino_tile gives a conv of ow
 * output columns: F(4x4) (6) from 8 columns except at 27-52, F(2x2) (4). */
static int wino_points_side(int64_t ow) { return ow < 8 || (ow >= 27 && ow <= 52) ? 4 : 6; }

/* Seconds of the per-call filter transform of a Winograd conv whose weight
 * is no parameter (r->conv_w_per_call elements): output x input channels,
 * each a*9 + a*a*3 multiply-adds for a x a points, over m's cores, at the
 * calibrated rate for where its a*a floats a filter land (one core's L2 or
 * beyond), plus its own parallel call; uncalibrated: WINO_FILTER_NS_PER_MAC. */
double plan_cpu_wino_filter_s(const plan_region_info *r, const plan_gemm_view *g, const plan_machine *m) {
  (void)g;
  if (r->conv_w_per_call <= 0 || r->pattern != PLAN_PAT_CONV || m->arch != PLAN_ARCH_CPU) return 0;
  double a = wino_points_side(r->conv_ow), macs = a * 9 + a * a * 3;
  double pairs = (double)r->conv_w_per_call / (double)UT_MAX(r->conv_kh * r->conv_kw, 1); /* out x in channels */
  const plan_calib *c = &m->calib;
  double ns = WINO_FILTER_NS_PER_MAC;
  if (c->valid && c->wf_ns[0] > 0 && c->wf_ns[1] > 0) ns = pairs * a * a * 4 <= (double)m->l2_bytes ? c->wf_ns[0] : c->wf_ns[1];
  /* the transform is a parallel call of its own before the kernel's
   * (cgen_wino.c: hprt_pool_run of wtask, then of the tiles) */
  double call = c->valid ? c->task_us * 1e-6 : 0;
  return pairs * macs * ns * 1e-9 / UT_MAX(m->sm_count, 1) + call;
}

bool plan_cpu_time(const plan_t *p, const plan_region_info *r, const plan_gemm_view *g, const plan_machine *m,
                   double *out) {
  if (m->arch != PLAN_ARCH_CPU || !m->calib.valid || m->calib.nmk == 0) return false;
  if (r->pattern != PLAN_PAT_MATMUL && r->pattern != PLAN_PAT_CONV) return false;
  if (g->m < 0 || g->n < 0 || g->k < 0) return false;
  bool wino = r->pattern == PLAN_PAT_CONV && plan_algo_is_winograd(p->algo[PLAN_KEY_CONV]);
  if (!wino && !plan_cpu_direct_conv(r, g, m)) {
    *out = gemm_time(p, r, g, m);
    return true;
  }
  /* the direct kernel at the plan's tile (cost_dconv.c), Winograd by its
   * measured speed-up over that kernel at its own tile; a 1x1 conv run as
   * a matmul (its tiles are not the direct kernel's): tile-independent, the
   * shape's FLOPs on all cores at DIRECT_EFF of the best rate */
  plan_dconv own, dt;
  double t;
  if (plan_dconv_own(r, g, &own)) {
    if (!plan_dconv_of(p, r, g, &dt)) dt = own; /* the kernel refuses the plan's tile: its own runs */
    t = plan_dconv_time(r, g, m, wino ? &own : &dt, best_rate(&m->calib));
  } else {
    double flops = 2.0 * (double)g->M * (double)g->N * (double)g->K * (double)UT_MAX(g->batch, 1);
    t = flops / (best_rate(&m->calib) * 1e9 * DIRECT_EFF * UT_MAX(m->sm_count, 1)) + 2 * m->calib.task_us * 1e-6;
  }
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

/* What Winograd gains at a size: its speed-up there (wino_speedup_at),
 * and, for a weight transformed every call, the direct kernel's seconds a
 * pixel (direct_s_px) against the transform's (filter_s). */
typedef struct wino_gain {
  const plan_machine *m;
  tiny_dtype in;
  int64_t k;
  double direct_s_px, filter_s;
} wino_gain;

/* Whether Winograd is faster at px output pixels: sped up, by more than
 * the filter transform costs. */
static bool wino_pays_at(const wino_gain *w, int64_t px) {
  double sp = wino_speedup_at(w->m, w->in, px, w->k);
  return sp > 1 && w->direct_s_px * (double)px * (1 - 1 / sp) > w->filter_s;
}

/* The fewest output pixels from which Winograd is faster (over a 5% grid,
 * the last step bisected to the pixel), at every larger grid point too. */
static int64_t min_pixels(const wino_gain *w) {
  int64_t first = 0, below = 0, prev = 0;
  for (double x = 16; x < (double)(1 << 24); x *= 1.05) {
    int64_t px = (int64_t)x;
    if (!wino_pays_at(w, px)) first = 0;
    else if (!first) first = px, below = prev;
    prev = px;
  }
  while (first && first - below > 1) { /* pays at first, not at below */
    int64_t mid = below + (first - below) / 2;
    if (wino_pays_at(w, mid)) first = mid;
    else below = mid;
  }
  return first;
}

int64_t plan_cpu_winograd_min_pixels(const plan_machine *m, tiny_dtype in, int64_t k) {
  wino_gain w = {m, in, k, 1, 0};
  return min_pixels(&w);
}

int64_t plan_cpu_winograd_min_pixels_w(const plan_machine *m, tiny_dtype in, int64_t k, int64_t w_per_call, int64_t ow) {
  if (!m || m->arch != PLAN_ARCH_CPU || w_per_call <= 0) return plan_cpu_winograd_min_pixels(m, in, k);
  plan_region_info r;
  memset(&r, 0, sizeof r);
  r.pattern = PLAN_PAT_CONV, r.conv_kh = r.conv_kw = 3, r.conv_ow = ow, r.conv_w_per_call = w_per_call;
  const plan_calib *c = &m->calib;
  /* the direct kernel: 2 w_per_call FLOPs a pixel, at the calibrated rate (plan_cpu_time's) or 0.8 of the peak (cost.c's) */
  double rate = c->valid && c->nmk > 0 ? best_rate(c) * 1e9 * DIRECT_EFF * UT_MAX(m->sm_count, 1) : plan_machine_peak(m, in) * 0.8;
  if (rate <= 0) return plan_cpu_winograd_min_pixels(m, in, k);
  wino_gain w = {m, in, k, 2.0 * (double)w_per_call / rate, plan_cpu_wino_filter_s(&r, NULL, m)};
  return min_pixels(&w);
}
