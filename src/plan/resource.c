/* resource.c — the resource model of seed 000 §5 and the §4.2 thresholds.
 * Needs: harp/plan.h, a machine description.  Gives: plan_resources_of,
 * plan_resources_check, plan_smem_near_limit, plan_cta_dropped_to_one,
 * plan_vec_shrunk, plan_sm90_tile_ok.
 *
 *   smem_per_CTA = Σ_cached (tile elements) × sizeof(T) × (pingpong ? stages : 1)
 *                  + epilogue_smem               (A: BM×BK, B: BK×BN, other: BM×BN)
 *   regs_per_thr = base + acc_regs(BM, BN, warp_tile) + frag_regs + epilogue_regs
 *   cta_per_SM   = min(SMEM_lim / smem_per_CTA, REG_lim / (regs × thr_per_CTA),
 *                      BLK_lim, max_warps / warps_per_CTA)
 *   occ          = min(1, cta_per_SM × warps_per_CTA / max_warps_SM)
 *   pipeline_eff = 1 − 1/stages
 *
 * With both A and B cached ping-pong this is exactly §5's
 * (BM·BK + BK·BN)·sizeof(T)·stages.  The warp cap in cta_per_SM is the
 * hardware's fourth limit; it only matters when occ is already 1.
 * docs/plan.md explains each term and the CPU reading. */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "plan_int.h"
#include "util/util.h"

/* Registers an epilogue op holds per thread on a GPU: bias and residual keep
 * a fragment of their operand, silu / gelu a few temporaries. */
static int epi_regs_gpu(plan_epi op) {
  switch (op) {
  case PLAN_EPI_BIAS: return 8;
  case PLAN_EPI_RESIDUAL: return 8;
  case PLAN_EPI_SILU: return 4;
  case PLAN_EPI_GELU: return 6;
  default: return 0;
  }
}

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* MMA k per instruction for an input dtype size: m16n8k16 (16-bit),
 * k8 (tf32), k32 (8-bit). */
static int mma_k(int tsize) { return tsize >= 4 ? 8 : tsize == 2 ? 16 : 32; }

void plan_resources_of(const plan_t *p, const plan_machine *m, const plan_region_info *r, plan_resources *out) {
  memset(out, 0, sizeof *out);
  int tin = r ? tiny_dtype_size(r->in_dtype) : 2;
  int tacc = r ? tiny_dtype_size(r->acc_dtype) : 4;
  int tout = r ? tiny_dtype_size(r->out_dtype) : 2;
  if (tin <= 0) tin = 2;
  if (tacc <= 0) tacc = 4;
  if (tout <= 0) tout = 2;
  bool gpu = plan_arch_is_gpu(m->arch);
  bool contraction = r ? plan_pattern_is_contraction(r->pattern) : p->ntile == 3;
  /* The CPU micro-kernel computes in fp32, so panels are packed as fp32. */
  int tpanel = gpu ? tin : 4;
  int64_t BM = p->ntile >= 1 ? p->tile[0] : 1, BN = p->ntile >= 2 ? p->tile[1] : 1, BK = p->ntile >= 3 ? p->tile[2] : 1;
  int64_t WM = p->warp_m > 0 ? p->warp_m : BM, WN = p->ntile >= 2 && p->warp_n > 0 ? p->warp_n : BN;

  int64_t smem = 0;
  for (int i = 0; i < p->ncache; i++) {
    const char *t = p->cache[i].tensor;
    int64_t elems = !strcmp(t, "A") ? BM * BK : !strcmp(t, "B") ? BK * BN : BM * BN;
    smem += elems * tpanel * (p->cache[i].pingpong ? p->stages : 1);
  }
  if (gpu)
    for (int i = 0; i < p->nepi; i++)
      if (p->epi[i] == PLAN_EPI_BIAS) out->epilogue_smem = BN * tout; /* the bias slice of the CTA */
  out->smem_per_cta = smem + out->epilogue_smem;

  int64_t units = (BM / (WM > 0 ? WM : 1)) * (BN / (WN > 0 ? WN : 1));
  if (units < 1) units = 1;
  if (m->arch == PLAN_ARCH_SM90) { /* warp_tile is a warpgroup tile (wgmma) */
    out->warps_per_cta = (int)UT_MIN(units * 4, INT_MAX / 128);
  } else if (gpu) {
    out->warps_per_cta = (int)UT_MIN(units, INT_MAX / 128);
  } else {
    out->warps_per_cta = 1;
  }
  out->threads_per_cta = out->warps_per_cta * (gpu ? 32 : 1);

  out->base_regs = m->base_regs;
  if (gpu) {
    int unit_threads = m->arch == PLAN_ARCH_SM90 ? 128 : 32;
    out->acc_regs = (int)UT_MIN(ceil_div(WM * WN * tacc, 4LL * unit_threads), 1 << 20);
    /* SM80 keeps A and B fragments of one MMA k-step in registers (ldmatrix);
     * SM90's wgmma reads them from shared memory. */
    if (contraction && m->arch == PLAN_ARCH_SM80)
      out->frag_regs = (int)UT_MIN(ceil_div((WM + WN) * mma_k(tin) * tin, 4 * 32), 1 << 20);
    for (int i = 0; i < p->nepi; i++) out->epilogue_regs += epi_regs_gpu(p->epi[i]);
  } else {
    int lanes = UT_MAX(m->simd_bytes / 4, 1);
    out->acc_regs = (int)UT_MIN(ceil_div(WM * WN, lanes), 1 << 20);
    if (contraction) out->frag_regs = (int)ceil_div(WN, lanes) + 1; /* B vectors + one A broadcast */
    out->epilogue_regs = p->nepi ? 2 : 0;
  }
  out->regs_per_thr = out->base_regs + out->acc_regs + out->frag_regs + out->epilogue_regs;

  /* cta_per_SM: registers are allocated in units of 8 per thread on GPUs. */
  int64_t regs_alloc = gpu ? ceil_div(out->regs_per_thr, 8) * 8 : out->regs_per_thr;
  int64_t by_smem = out->smem_per_cta > 0 ? m->smem_per_sm / out->smem_per_cta : INT_MAX;
  int64_t by_regs = regs_alloc > 0 ? m->regs_per_sm / (regs_alloc * out->threads_per_cta) : INT_MAX;
  int64_t by_blk = m->max_cta_per_sm;
  int64_t by_warps = m->max_warps_per_sm / out->warps_per_cta;
  int64_t cta = by_blk;
  out->cta_limit = "blocks";
  if (by_smem < cta) cta = by_smem, out->cta_limit = "smem";
  if (by_regs < cta) cta = by_regs, out->cta_limit = "regs";
  if (by_warps < cta) cta = by_warps, out->cta_limit = "warps";
  if (out->smem_per_cta > m->smem_per_cta_max) cta = 0, out->cta_limit = "smem";
  if (out->regs_per_thr > m->regs_per_thread_max) cta = 0, out->cta_limit = "regs";
  if (out->threads_per_cta > m->max_threads_per_cta) cta = 0, out->cta_limit = "warps";
  out->cta_per_sm = (int)(cta < 0 ? 0 : cta);
  double occ = (double)out->cta_per_sm * out->warps_per_cta / m->max_warps_per_sm;
  out->occ = occ > 1.0 ? 1.0 : occ;
  out->pipeline_eff = 1.0 - 1.0 / p->stages;
}

harp_status plan_resources_check(const plan_t *p, const plan_resources *res, const plan_machine *m, const plan_src *src,
                               harp_error *e) {
  bool gpu = plan_arch_is_gpu(m->arch);
  char tile[64];
  snprintf(tile, sizeof tile, "%lld", (long long)p->tile[0]);
  for (int i = 1; i < p->ntile; i++)
    snprintf(tile + strlen(tile), sizeof tile - strlen(tile), "x%lld", (long long)p->tile[i]);
  if (res->smem_per_cta > m->smem_per_cta_max)
    return plan_fail(e, HARP_E_SMEM_OVERFLOW, src, p->pos.tile[0], "tile",
                     gpu ? "tile %s with %d stages needs %lld bytes of shared memory per CTA; %s allows %lld"
                         : "tile %s with %d stages packs %lld bytes of panels per core; the %s L2 per core is %lld",
                     tile, p->stages, (long long)res->smem_per_cta, plan_arch_name(m->arch),
                     (long long)m->smem_per_cta_max);
  if (res->regs_per_thr > m->regs_per_thread_max)
    return plan_fail(e, HARP_E_REG_OVERFLOW, src, p->pos.warp_tile, "warp_tile",
                     "warp tile %dx%d needs about %d registers per thread (%d accumulator, %d fragment, %d epilogue, "
                     "%d base); %s has %d",
                     p->warp_m, p->warp_n, res->regs_per_thr, res->acc_regs, res->frag_regs, res->epilogue_regs,
                     res->base_regs, plan_arch_name(m->arch), m->regs_per_thread_max);
  if (res->threads_per_cta > m->max_threads_per_cta)
    return plan_fail(e, HARP_E_LIMIT, src, p->pos.warp_tile, "warp_tile",
                     "tile %s with warp tile %dx%d needs %d threads per CTA; %s allows %d", tile, p->warp_m, p->warp_n,
                     res->threads_per_cta, plan_arch_name(m->arch), m->max_threads_per_cta);
  int64_t regs_alloc = gpu ? (res->regs_per_thr + 7) / 8 * 8 : res->regs_per_thr;
  if (regs_alloc * res->threads_per_cta > m->regs_per_sm)
    return plan_fail(e, HARP_E_REG_OVERFLOW, src, p->pos.warp_tile, "warp_tile",
                     "one CTA needs %lld registers (%d threads x %lld); an SM has %d", (long long)(regs_alloc * res->threads_per_cta),
                     res->threads_per_cta, (long long)regs_alloc, m->regs_per_sm);
  return HARP_OK;
}

/* ---- §4.2 thresholds -------------------------------------------------------------- */
bool plan_smem_near_limit(const plan_resources *res, const plan_machine *m) {
  return (double)res->smem_per_cta > 0.8 * (double)m->smem_per_cta_max;
}

bool plan_cta_dropped_to_one(const plan_resources *before, const plan_resources *after) {
  return before->cta_per_sm > 1 && after->cta_per_sm <= 1;
}

bool plan_vec_shrunk(int width_before, int width_after) { return width_after < width_before; }

/* 0: fits; 1: outside the wgmma / TMA shapes; 2: a TMA box is misaligned. */
int plan_sm90_rule(const plan_t *p, tiny_dtype in, char *why, int cap) {
  char dummy[8];
  if (!why) why = dummy, cap = sizeof dummy;
  why[0] = 0;
  int t = tiny_dtype_size(in);
  if (t <= 0) t = 2;
  if (p->ntile == 3) {
    if (p->warp_m % 64) {
      snprintf(why, (size_t)cap, "wgmma needs M = %d per warpgroup to be a multiple of 64", p->warp_m);
      return 1;
    }
    if (p->warp_n % 8 || p->warp_n < 8 || p->warp_n > 256) {
      snprintf(why, (size_t)cap, "wgmma needs N = %d to be a multiple of 8 in [8, 256]", p->warp_n);
      return 1;
    }
    if (p->tile[2] % mma_k(t)) {
      snprintf(why, (size_t)cap, "wgmma needs K = %lld to be a multiple of %d for %s", (long long)p->tile[2], mma_k(t),
               tiny_dtype_name(in));
      return 1;
    }
  }
  for (int i = 0; i < p->ntile; i++)
    if (p->tile[i] > 256) {
      snprintf(why, (size_t)cap, "a TMA box dimension is at most 256, tile has %lld", (long long)p->tile[i]);
      return 1;
    }
  /* Inner (contiguous) extents of the boxes: BK for A (K-major), BN for B
   * and C (row-major). */
  int64_t inner[2] = {p->ntile == 3 ? p->tile[2] : 0, p->ntile >= 2 ? p->tile[1] : p->tile[0]};
  for (int i = 0; i < 2; i++)
    if (inner[i] && inner[i] * t % 16) {
      snprintf(why, (size_t)cap, "a TMA box's inner extent must be a multiple of 16 bytes; %lld x %d bytes is not",
               (long long)inner[i], t);
      return 2;
    }
  return 0;
}

bool plan_sm90_tile_ok(const plan_t *p, tiny_dtype in, char *why, int cap) { return plan_sm90_rule(p, in, why, cap) == 0; }

int plan_mma_k(tiny_dtype in) { return mma_k(tiny_dtype_size(in) > 0 ? tiny_dtype_size(in) : 2); }
