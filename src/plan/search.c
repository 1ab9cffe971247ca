/* search.c — the tuner's search space (§6) and the default plan of a region.
 * Needs: validate.c, resource.c, cost.c.  Gives: plan_enumerate, plan_retarget,
 * plan_default, plan_for_region.
 *
 * Space per region and machine:
 *   contractions: tile (4 per arch; 2 on the CPU) × stages {2,3} (the CPU:
 *                 2) × warp_tile (2 per arch; on the CPU the first four
 *                 micro-tiles that fit the registers)
 *                 × vec {4,8,16} × algo_choice (matmul: implicit_gemm,
 *                 and splitk_parallel on GPUs, splitk_reduce on the CPU
 *                 for skinny GEMMs; conv: implicit_gemm,
 *                 winograd_3x3 for 3x3 windows; attention: both softmaxes)
 *   ewise / reduce: tile (3) × warp_tile (2) × vec {4,8,16}, stages 2
 * Pruning: the CPU's Winograd at the first tile only (it reads none),
 * plan_validate (shapes, resources), smem above 80% of the CTA
 * maximum (§4.2), vector widths below the widest legal one (§4.2 "16→8/4"),
 * split-K where it would not split, algorithms opts->algo_mask leaves out;
 * then rank by time_est and keep the best PLAN_TUNE_POINTS. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan_int.h"
#include "util/util.h"

typedef struct cand_space {
  int ntiles;
  int64_t tiles[4][3];
  int nwarps;
  int warps[4][2]; /* (WM, WN); WN <= 0 means BN / -WN */
  int nstages; /* stages 2 .. 1 + nstages */
  int nalgos;
  plan_algo algos[4];
} cand_space;

/* Attention on the CUDA template (cuda_attn.c): 64 query rows, 4 warps of
 * 16 rows each across the whole key tile (16..128), a 2-stage K/V ring; an
 * SM90 plan counts the 4 warps as one warpgroup, 64 x BN. */
static void gpu_attention_space(const plan_machine *m, cand_space *s) {
  static const int64_t tiles[4][3] = {{64, 64, 64}, {64, 128, 64}, {64, 32, 64}, {64, 16, 64}};
  memcpy(s->tiles, tiles, sizeof s->tiles);
  s->ntiles = 4;
  s->warps[0][0] = m->arch == PLAN_ARCH_SM80 ? 16 : 64, s->warps[0][1] = -1; /* x BN */
  s->nwarps = 1, s->nstages = 1;
}

/* CPU split-K is the skinny kernel's (cgen_skinny.c: at most
 * CPU_SPLITK_MAX_M rows, B streamed in column strips): offered over a long
 * K with CPU_SPLITK_SLICES slices, the count measured best
 * (bench/splitk_bench.c); the cost model's cpu_splitk_speedup ranks it. */
#define CPU_SPLITK_MAX_M 8
#define CPU_SPLITK_MIN_K 4096
#define CPU_SPLITK_SLICES 4
static bool cpu_splitk_wanted(const plan_gemm_view *g) {
  return g->M <= CPU_SPLITK_MAX_M && g->K >= CPU_SPLITK_MIN_K;
}

/* A conv the CPU runs on its direct kernel (cost_dconv.c): warp tiles of
 * pixels x output channels, the kernel's own choice first, then the other
 * vector count at its widest even tile; tiles (pixels, output channels,
 * reduction; in the plan's roles) its own blocking, then that blocking
 * with one field changed: twice the input channels a block (all of them
 * when they were one block: half), twice the rows a task (one when it was
 * more), the other task order.  Stages are not the kernel's: one. */
static void cpu_direct_space(const plan_region_info *r, const plan_gemm_view *g, const plan_dconv *own, cand_space *s) {
  bool swap = plan_conv_pixels_m(r, g);
  int64_t taps = (int64_t)r->conv_kh * r->conv_kw, icg = UT_MAX(g->K / taps, 1), oc = swap ? g->N : g->M;
  int px[2] = {own->mr, plan_dconv_mr(r, 3 - own->nv)}, ov[2] = {16 * own->nv, 16 * (3 - own->nv)};
  s->nwarps = 0;
  for (int i = 0; i < 2; i++)
    if (px[i] > 0) {
      s->warps[s->nwarps][swap ? 0 : 1] = px[i];
      s->warps[s->nwarps++][swap ? 1 : 0] = ov[i];
    }
  int64_t cb[4] = {own->cb, own->cb < icg ? UT_MIN(2 * own->cb, icg) : UT_MAX(icg / 2, 1), own->cb, own->cb};
  int64_t rows[4] = {own->rows, own->rows, own->rows > 1 ? 1 : UT_MIN(2, r->conv_oh), own->rows};
  int order[4] = {own->order, own->order, own->order, 3 - own->order};
  for (int i = 0; i < 4; i++) {
    int64_t tpx = rows[i] * r->conv_ow, toc = order[i] == 1 ? oc : 16;
    s->tiles[i][0] = swap ? tpx : toc;
    s->tiles[i][1] = swap ? toc : tpx;
    s->tiles[i][2] = cb[i] * taps;
  }
  s->ntiles = 4;
  s->nstages = 1;
}

/* The CPU GEMM's space (space_for): its two blockings (kc 256 and 64: one
 * K block or four times the micro-kernel calls and passes over C), up to
 * four micro-tiles, one prefetch distance.  A micro-tile of fewer than
 * CPU_MIN_ACC accumulators leaves the FMA units waiting on latency
 * (cost_cpu.c, step_cycles): offered only when none larger fits. */
#define CPU_GEMM_TILES 2
#define CPU_GEMM_WARPS 4
#define CPU_MIN_ACC 8

/* The CPU GEMM's register micro-tiles (space_for) into s->warps: MR x NV
 * vectors of lanes floats, the first CPU_GEMM_WARPS whose MR*NV
 * accumulators, NV B vectors, one A broadcast and r's epilogue registers fit
 * m's registers, with at least CPU_MIN_ACC accumulators (6x4, 8x3, 6x2 and
 * 4x3 with 32 registers: 6x64, 8x48, 6x32 and 4x48 on AVX-512, the tiles
 * harp calibrate times; 5x2 and 4x2 with AVX2's 16).  They differ by 15-40%
 * in the calibrated rate and in the tails they leave at N % NR and M % MR,
 * which the model weighs. */
static void cpu_gemm_micro_tiles(const plan_region_info *r, const plan_machine *m, int lanes, cand_space *s) {
  static const int cand[][2] = {{6, 4}, {8, 3}, {6, 2}, {4, 3}, {5, 2}, {4, 2}, {2, 2}, {1, 1}};
  int epi = r->nepi ? 2 : 0;
  for (int pass = 0; pass < 2 && s->nwarps == 0; pass++) { /* pass 1: none of CPU_MIN_ACC fits */
    for (int i = 0; i < UT_ARRAY_LEN(cand) && s->nwarps < CPU_GEMM_WARPS; i++)
      if (cand[i][0] * cand[i][1] + cand[i][1] + 1 + epi + m->base_regs <= m->regs_per_thread_max &&
          (pass || cand[i][0] * cand[i][1] >= CPU_MIN_ACC)) {
        s->warps[s->nwarps][0] = cand[i][0];
        s->warps[s->nwarps++][1] = cand[i][1] * lanes;
      }
  }
}

/* The algorithms of a contraction r (space_for) on m into s->algos. */
static void contraction_algos(const plan_region_info *r, const plan_machine *m, const plan_gemm_view *g,
                              const plan_search_opts *opts, cand_space *s) {
  if (r->pattern == PLAN_PAT_MATMUL) {
    s->algos[s->nalgos++] = PLAN_ALGO_IMPLICIT_GEMM;
    /* H100 (bench/cuda_splitk.py): the serial form's in-order hand-offs
     * and the reduce form's partials pass ran 1.4-3.5x slower than the
     * atomics of the parallel one at every skinny shape, so on GPUs they
     * are a Plan's explicit choice, not the default search's.  The CPU
     * has splitk_reduce alone, in its skinny kernel (cpu_splitk_wanted) */
    if (plan_arch_is_gpu(m->arch)) s->algos[s->nalgos++] = PLAN_ALGO_SPLITK_PARALLEL;
    else if (cpu_splitk_wanted(g)) s->algos[s->nalgos++] = PLAN_ALGO_SPLITK_REDUCE;
  } else if (r->pattern == PLAN_PAT_CONV) {
    s->algos[s->nalgos++] = PLAN_ALGO_IMPLICIT_GEMM;
    plan_dconv own;
    if (m->arch == PLAN_ARCH_CPU && plan_cpu_direct_conv(r, g, m) && plan_dconv_own(r, g, &own))
      cpu_direct_space(r, g, &own, s);
    if (r->conv_kh == 3 && r->conv_kw == 3 && plan_conv_unit_stride(r)) s->algos[s->nalgos++] = PLAN_ALGO_WINOGRAD_3X3;
    /* GPU: few output tiles over a long reduction split K (the conv
     * template's forms: slices add up in order, the last running the
     * epilogue, or add with atomics and a finishing pass runs it); kept
     * only where conv_splitk_wanted */
    if (plan_arch_is_gpu(m->arch)) {
      s->algos[s->nalgos++] = PLAN_ALGO_SPLITK_SERIAL;
      s->algos[s->nalgos++] = PLAN_ALGO_SPLITK_PARALLEL;
    }
  } else {
    s->algos[s->nalgos++] = PLAN_ALGO_STREAMING_SOFTMAX_2PASS;
    s->algos[s->nalgos++] = PLAN_ALGO_ONLINE_SOFTMAX;
    if (opts && opts->gpu_attention_template && plan_arch_is_gpu(m->arch)) gpu_attention_space(m, s);
  }
}

/* The space of a region that is no contraction of three known sizes
 * (space_for): a row reduction, a matrix-vector product, or a map over one
 * or two parallel axes. */
static void streaming_space(const plan_region_info *r, const plan_machine *m, const plan_gemm_view *g, int lanes,
                            cand_space *s) {
  s->nstages = 1;
  s->nalgos = 1; /* PLAN_ALGO_NONE */
  s->ntiles = 3;
  s->nwarps = 2;
  bool gpu = plan_arch_is_gpu(m->arch);
  /* matrix-vector contractions (one parallel axis) tile like a row reduction */
  bool gemv = plan_pattern_is_contraction(r->pattern) && g->k >= 0;
  bool rowred = r->pattern == PLAN_PAT_REDUCE || gemv;
  bool two = rowred ? ((g->m >= 0 || g->n >= 0) && g->k >= 0) : (g->m >= 0 && g->n >= 0);
  if (two) {
    static const int64_t gpu2[3][3] = {{16, 256, 0}, {32, 128, 0}, {8, 512, 0}};
    static const int64_t gpur[3][3] = {{4, 1024, 0}, {8, 512, 0}, {16, 256, 0}};
    static const int64_t cpu2[3][3] = {{32, 256, 0}, {64, 512, 0}, {8, 1024, 0}};
    static const int64_t cpur[3][3] = {{8, 4096, 0}, {32, 1024, 0}, {4, 16384, 0}};
    const int64_t(*t)[3] = gpu ? (rowred ? gpur : gpu2) : (rowred ? cpur : cpu2);
    memcpy(s->tiles, t, sizeof(int64_t) * 9);
    /* GPU: 4 or 8 warps stacked along M, each a full row of the tile;
     * CPU: one row of 2 or 4 vectors */
    if (gpu) {
      s->warps[0][0] = -4, s->warps[0][1] = -1;
      s->warps[1][0] = -8, s->warps[1][1] = -1;
    } else {
      s->warps[0][0] = 1, s->warps[0][1] = 2 * lanes;
      s->warps[1][0] = 1, s->warps[1][1] = 4 * lanes;
    }
  } else {
    static const int64_t gpu1[3][3] = {{1024, 0, 0}, {2048, 0, 0}, {4096, 0, 0}};
    static const int64_t cpu1[3][3] = {{4096, 0, 0}, {16384, 0, 0}, {65536, 0, 0}};
    memcpy(s->tiles, gpu ? gpu1 : cpu1, sizeof(int64_t) * 9);
    if (gpu) {
      s->warps[0][0] = -4, s->warps[1][0] = -8;
    } else {
      s->warps[0][0] = 2 * lanes, s->warps[1][0] = 4 * lanes;
    }
  }
}

static void space_for(const plan_region_info *r, const plan_machine *m, const plan_gemm_view *g, const plan_search_opts *opts,
                      cand_space *s) {
  memset(s, 0, sizeof *s);
  int lanes = UT_MAX(m->simd_bytes / 4, 1);
  if (plan_pattern_is_contraction(r->pattern) && g->k >= 0 && g->m >= 0 && g->n >= 0) {
    static const int64_t sm80[4][3] = {{128, 128, 32}, {128, 64, 64}, {64, 64, 64}, {256, 128, 32}};
    static const int64_t sm90[4][3] = {{128, 128, 64}, {128, 256, 64}, {64, 128, 64}, {256, 128, 64}};
    /* CPU: [rows of A per block, columns of the packed B panel, its depth];
     * BM and BN are rounded up to whole micro-tiles (build) */
    static const int64_t cpu[4][3] = {{96, 512, 256}, {96, 512, 64}, {0, 0, 0}, {0, 0, 0}};
    /* CPU attention: [query rows, keys per tile, head dim]; the streaming
     * kernel sizes its register micro-tile itself, so one warp tile */
    static const int64_t cpu_att[4][3] = {{64, 64, 64}, {64, 128, 64}, {128, 64, 64}, {32, 64, 64}};
    bool cpu_attention = m->arch == PLAN_ARCH_CPU && r->pattern == PLAN_PAT_ATTENTION;
    memcpy(s->tiles, m->arch == PLAN_ARCH_SM80 ? sm80 : m->arch == PLAN_ARCH_SM90 ? sm90 : cpu_attention ? cpu_att : cpu,
           sizeof s->tiles);
    s->ntiles = m->arch == PLAN_ARCH_CPU && !cpu_attention ? CPU_GEMM_TILES : 4;
    s->nwarps = plan_arch_is_gpu(m->arch) ? 2 : 0;
    if (m->arch == PLAN_ARCH_SM80) {
      s->warps[0][0] = 64, s->warps[0][1] = 64;
      s->warps[1][0] = 64, s->warps[1][1] = 32;
    } else if (m->arch == PLAN_ARCH_SM90) { /* a warpgroup: 64 rows, all or half of BN */
      s->warps[0][0] = 64, s->warps[0][1] = -1;
      s->warps[1][0] = 64, s->warps[1][1] = -2;
    } else if (cpu_attention) {
      s->warps[0][0] = 4, s->warps[0][1] = lanes;
      s->nwarps = 1;
    } else {
      cpu_gemm_micro_tiles(r, m, lanes, s);
    }
    /* the CPU's stages are the prefetch distance: 8 and 12 k steps ran
     * within 1-2% of each other (noise, bench/RESULTS.md rank9), so the
     * search offers 8 alone and spends its points on the tiles above */
    s->nstages = m->arch == PLAN_ARCH_CPU && !cpu_attention ? 1 : 2;
    contraction_algos(r, m, g, opts, s);
    return;
  }
  streaming_space(r, m, g, lanes, s);
}

static int pick(int v, int64_t of) { return v > 0 ? v : (int)(of / -v); }

/* Bind the batch axes (parallel, untiled) to block.z, fusing them when there
 * are several. */
static void bind_batch(plan_t *p, const plan_region_info *r, const plan_gemm_view *g) {
  char cur[PLAN_NAME_MAX] = "";
  for (int i = 0; i < r->naxes; i++) {
    if (i == g->m || i == g->n || i == g->k || r->axes[i].reduce) continue;
    if (!cur[0]) {
      snprintf(cur, sizeof cur, "%s", r->axes[i].name);
      continue;
    }
    if (p->nfuse >= PLAN_MAX_FUSE) return;
    plan_fuse *f = &p->fuse[p->nfuse++];
    snprintf(f->a, sizeof f->a, "%s", cur);
    snprintf(f->b, sizeof f->b, "%s", r->axes[i].name);
    snprintf(f->to, sizeof f->to, "%.30s_%.30s", cur, r->axes[i].name);
    snprintf(cur, sizeof cur, "%s", f->to);
  }
  if (cur[0] && p->nbind < PLAN_MAX_BIND) {
    snprintf(p->bind[p->nbind].axis, PLAN_NAME_MAX, "%s", cur);
    p->bind[p->nbind++].target = PLAN_T_BLOCK_Z;
  }
}

static void add_bind(plan_t *p, const char *axis, const char *suffix, plan_target t) {
  snprintf(p->bind[p->nbind].axis, PLAN_NAME_MAX, "%.50s%s", axis, suffix);
  p->bind[p->nbind++].target = t;
}

/* Build one candidate; false when its shape cannot exist. */
static bool build(plan_t *p, const plan_region_info *r, const plan_machine *m, const plan_gemm_view *g,
                  const cand_space *s, int ti, int wi, int stages, int vec, plan_algo algo) {
  plan_init(p, m->arch);
  bool gpu = plan_arch_is_gpu(m->arch);
  bool contraction = plan_pattern_is_contraction(r->pattern) && g->k >= 0 && g->m >= 0 && g->n >= 0;
  bool gemv = plan_pattern_is_contraction(r->pattern) && g->k >= 0 && !contraction;
  int idx[3], n = 0;
  if (contraction) {
    idx[n++] = g->m, idx[n++] = g->n, idx[n++] = g->k;
  } else if ((r->pattern == PLAN_PAT_REDUCE || gemv) && g->k >= 0) {
    if (g->m >= 0) idx[n++] = g->m;
    else if (g->n >= 0) idx[n++] = g->n;
    idx[n++] = g->k;
  } else {
    if (g->m >= 0) idx[n++] = g->m;
    if (g->n >= 0) idx[n++] = g->n;
  }
  if (n == 0) return false;
  if (n == 1 && s->tiles[ti][1] != 0) return false; /* 2-D tiles for a 1-D region: no */
  p->ntile = n;
  for (int i = 0; i < n; i++) {
    snprintf(p->tile_axes[i], PLAN_NAME_MAX, "%s", r->axes[idx[i]].name);
    p->tile[i] = s->tiles[ti][i];
    if (p->tile[i] <= 0) return false;
  }
  if (!gpu && contraction && r->pattern != PLAN_PAT_ATTENTION) /* the CPU's M and N tiles hold whole micro-tiles */
    for (int i = 0; i < 2; i++)
      if (s->warps[wi][i] > 0) p->tile[i] = (p->tile[i] + s->warps[wi][i] - 1) / s->warps[wi][i] * s->warps[wi][i];
  p->warp_m = pick(s->warps[wi][0], p->tile[0]);
  p->warp_n = n >= 2 ? pick(s->warps[wi][1], p->tile[1]) : 0;
  if (p->warp_m < 1 || p->tile[0] % p->warp_m || (n >= 2 && (p->warp_n < 1 || p->tile[1] % p->warp_n))) return false;
  p->stages = stages;
  plan_default_pipeline_axis(p, p->pipeline_axis);
  const char *M = p->tile_axes[0], *N = n >= 2 ? p->tile_axes[1] : NULL;
  /* Only parallel axes spread over blocks: a reduction's K loops inside the
   * CTA (a full reduction is then one CTA). */
  bool m_par = !r->axes[idx[0]].reduce, n_par = N && !r->axes[idx[1]].reduce;
  if (m_par && n_par) add_bind(p, M, ".o", PLAN_T_BLOCK_Y), add_bind(p, N, ".o", PLAN_T_BLOCK_X);
  else if (m_par) add_bind(p, M, ".o", PLAN_T_BLOCK_X);
  if (gpu && contraction) add_bind(p, M, ".i.o", PLAN_T_WARP_Y), add_bind(p, N, ".i.o", PLAN_T_WARP_X);
  else if (gpu && m_par && p->tile[0] > p->warp_m) add_bind(p, M, ".i.o", PLAN_T_WARP_Y);
  bind_batch(p, r, g);
  if (contraction) {
    char at[PLAN_NAME_MAX];
    snprintf(at, sizeof at, "%.50s.i", p->tile_axes[2]);
    static const char *const ops[2] = {"A", "B"};
    for (int i = 0; i < 2; i++) {
      snprintf(p->cache[i].tensor, PLAN_NAME_MAX, "%s", ops[i]);
      snprintf(p->cache[i].at, PLAN_NAME_MAX, "%s", at);
      p->cache[i].pingpong = gpu; /* the CPU packs each panel once (stages = prefetch distance) */
    }
    p->ncache = 2;
  }
  /* vectorize the innermost tiled parallel axis (n of a GEMM, the reduced
   * axis of a row reduction): contiguous in memory */
  const char *vaxis = contraction ? N : p->tile_axes[n - 1];
  snprintf(p->vec_axis, PLAN_NAME_MAX, "%.50s.i.i", vaxis);
  p->vec_width = vec;
  for (int i = 0; i < n; i++)
    if (r->axes[idx[i]].size % p->tile[i] || (!strcmp(p->tile_axes[i], vaxis) && r->axes[idx[i]].size % vec))
      snprintf(p->pred[p->npred++], PLAN_NAME_MAX, "%.50s.i.i", p->tile_axes[i]);
  if (algo != PLAN_ALGO_NONE) {
    plan_algo_key k = r->pattern == PLAN_PAT_MATMUL ? PLAN_KEY_MATMUL : r->pattern == PLAN_PAT_CONV ? PLAN_KEY_CONV : PLAN_KEY_ATTENTION;
    if (r->pattern == PLAN_PAT_CONV && plan_algo_is_splitk(algo)) /* an implicit GEMM split along K */
      p->algo[PLAN_KEY_CONV] = PLAN_ALGO_IMPLICIT_GEMM, k = PLAN_KEY_MATMUL;
    p->algo[k] = algo;
  }
  plan_fill_from_region(p, r);
  return true;
}

/* A conv is split along K by the default search only where it has few
 * output tiles over a long reduction: the shapes the GPU used to send to the
 * generic kernel (H100, ResNet-18 batch 1 fp16: a 3x3 512->512 conv on 7x7
 * took 0.23 ms as 8 template CTAs, about 0.06 ms generic).  Elsewhere the
 * unsplit template was measured; the serial form's in-order hand-offs are
 * not (GPU timings of conv split-K: unmeasured, scripts/gpu_acceptance.sh). */
#define CONV_SPLITK_MIN_K 1024
#define CONV_SPLITK_MAX_TILES 32
static bool conv_splitk_wanted(const plan_gemm_view *g, const plan_cost *c) {
  return g->K >= CONV_SPLITK_MIN_K && c->splitk > 0 && c->ctas / c->splitk < CONV_SPLITK_MAX_TILES;
}

typedef struct scored {
  plan_t plan;
  plan_cost cost;
  int order;
  int depth; /* SM90 GEMMs: the ring depth, which breaks ties (below) */
} scored;

static int by_time(const void *a, const void *b) {
  const scored *x = a, *y = b;
  if (x->cost.rank_time < y->cost.rank_time) return -1;
  if (x->cost.rank_time > y->cost.rank_time) return 1;
  /* equal estimates (a memory-bound model does not see the ring): the
   * deeper one, which the wgmma template needs to hide TMA latency */
  if (x->depth != y->depth) return y->depth - x->depth;
  return x->order - y->order;
}

/* x into top[0..*nt), which holds the best `keep` candidates so far in
 * by_time order: after its equals, as the stable sort of every candidate
 * that this replaces put them (no pool of every plan copied and sorted:
 * most of a default plan's time was writing it). */
static void keep_best(scored *top, int *nt, int keep, const scored *x) {
  int i = *nt;
  while (i > 0 && by_time(x, &top[i - 1]) < 0) i--;
  if (i >= keep) return;
  int last = *nt < keep ? *nt : keep - 1;
  memmove(&top[i + 1], &top[i], sizeof *top * (size_t)(last - i));
  top[i] = *x;
  if (*nt < keep) (*nt)++;
}

harp_status plan_enumerate(const plan_region_info *r, const plan_machine *m, const plan_search_opts *opts, plan_t *out,
                         plan_cost *costs, int cap, int *n, harp_error *e) {
  *n = 0;
  plan_gemm_view g;
  harp_status st = plan_region_gemm_view(r, &g, e);
  if (st) return st;
  cand_space s;
  space_for(r, m, &g, opts, &s);
  static const int vecs[3] = {16, 8, 4}; /* widest first: only the widest legal one stays */
  /* GPU split-K: the slice count is searched too (2..64, written into the
   * Plan); the CPU keeps the count plan_splitk_factor derives */
  enum { NFACTORS = 6 };
  int maxc = s.ntiles * s.nwarps * s.nstages * s.nalgos * NFACTORS;
  int keep = UT_MAX(1, UT_MIN(cap, PLAN_TUNE_POINTS)), nt = 0;
  scored *pool = ut_xmalloc(sizeof *pool * (size_t)(keep + 1)); /* the best `keep` (keep_best) */
  plan_t *tmp = ut_xmalloc(sizeof *tmp);
  if (!pool || !tmp) {
    free(pool);
    free(tmp);
    return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  }
  int np = 0, order = 0;
  for (int ti = 0; ti < s.ntiles; ti++)
    for (int si = 0; si < s.nstages; si++)
      for (int wi = 0; wi < s.nwarps; wi++)
        for (int ai = 0; ai < s.nalgos; ai++) {
          int stages = 2 + si;
          if (opts && opts->algo_mask && s.algos[ai] != PLAN_ALGO_NONE && !(opts->algo_mask >> s.algos[ai] & 1u)) continue;
          /* the CPU's Winograd reads no tile, warp tile or stages: one point */
          if (m->arch == PLAN_ARCH_CPU && plan_algo_is_winograd(s.algos[ai]) && (ti || si || wi)) continue;
          for (int vi = 0; vi < 3; vi++) {
            order++;
            harp_error ve = {0};
            if (!build(tmp, r, m, &g, &s, ti, wi, stages, vecs[vi], s.algos[ai])) break;
            if (plan_validate(tmp, r, m, NULL, &ve) == HARP_E_NO_MEMORY) {
              free(pool);
              free(tmp);
              return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
            }
            if (ve.code) {
              /* a narrower vector may still be legal; any other failure
               * holds for every width */
              if (ve.code == HARP_E_INVALID_ARG || ve.code == HARP_E_MISALIGNED) continue;
              break;
            }
            plan_cost c;
            if (plan_cost_of(tmp, r, m, &c, &ve)) break;
            if (plan_smem_near_limit(&c.res, m)) break;
            bool splitk = plan_algo_is_splitk(s.algos[ai]);
            if (splitk && !plan_arch_is_gpu(m->arch)) { /* the CPU's count, in the Plan */
              tmp->splitk = CPU_SPLITK_SLICES;
              ve = (harp_error){0};
              if (plan_validate(tmp, r, m, NULL, &ve) || plan_cost_of(tmp, r, m, &c, &ve)) break;
            }
            if (splitk && c.splitk < 2) break;
            if (splitk && r->pattern == PLAN_PAT_CONV && !conv_splitk_wanted(&g, &c)) break;
            int depth = m->arch == PLAN_ARCH_SM90 && r->pattern == PLAN_PAT_MATMUL ? stages : 0;
            if (splitk && plan_arch_is_gpu(m->arch)) {
              /* every count up to the one that fills the machine: more
               * slices fill more SMs but add atomics (H100: 256x256x16384
               * ran best split 16 ways, 128x128x32768 64 ways) */
              int most = c.splitk;
              for (int f = 2; f <= most && np < maxc; f *= 2) {
                tmp->splitk = f;
                harp_error fe = {0};
                plan_cost fc;
                if (plan_validate(tmp, r, m, NULL, &fe) || plan_cost_of(tmp, r, m, &fc, &fe)) break;
                scored x = {.plan = *tmp, .cost = fc, .order = order, .depth = depth};
                keep_best(pool, &nt, keep, &x);
                np++;
              }
              break;
            }
            scored x = {.plan = *tmp, .cost = c, .order = order, .depth = depth};
            keep_best(pool, &nt, keep, &x);
            np++;
            break; /* the widest legal vector; narrower ones would be a §4.2 shrink */
          }
        }
  keep = UT_MIN(nt, cap);
  for (int i = 0; i < keep; i++) {
    out[i] = pool[i].plan;
    if (costs) costs[i] = pool[i].cost;
  }
  *n = keep;
  free(pool);
  free(tmp);
  if (np == 0)
    return ut_fail(e, HARP_E_UNSUPPORTED, r->name, "no plan of the search space fits region '%s' (%s) on %s",
                   r->name ? r->name : "?", plan_pattern_name(r->pattern), plan_arch_name(m->arch));
  return HARP_OK;
}

harp_status plan_default(const plan_region_info *r, const plan_machine *m, const plan_search_opts *opts, plan_t *out,
                       harp_error *e) {
  plan_t *best = ut_xmalloc(sizeof *best);
  if (!best) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  int n = 0;
  harp_status st = plan_enumerate(r, m, opts, best, NULL, 1, &n, e);
  if (!st) *out = *best;
  free(best);
  return st;
}

void plan_retarget(plan_t *p, const plan_region_info *r) {
  char vbase[PLAN_NAME_MAX], tname[PLAN_NAME_MAX];
  plan_axis_base(p->vec_axis, vbase);
  bool need[PLAN_MAX_TILE] = {false};
  for (int t = 0; t < p->ntile; t++) {
    int a = plan_region_axis(r, p->tile_axes[t]);
    if (a < 0) return; /* not this region's plan: plan_validate will say so */
    int64_t size = r->axes[a].size;
    need[t] = size % p->tile[t] != 0 || (p->vec_width > 1 && !strcmp(vbase, p->tile_axes[t]) && size % p->vec_width != 0);
  }
  /* drop the tails of tiled axes, then add back the ones this binding needs */
  int k = 0;
  for (int i = 0; i < p->npred; i++) {
    bool tiled_tail = false;
    for (int t = 0; t < p->ntile && !tiled_tail; t++) {
      snprintf(tname, sizeof tname, "%.50s.i.i", p->tile_axes[t]);
      tiled_tail = !strcmp(p->pred[i], tname);
    }
    if (tiled_tail) continue;
    if (k != i) {
      memcpy(p->pred[k], p->pred[i], PLAN_NAME_MAX);
      p->pos.pred[k] = p->pos.pred[i];
    }
    k++;
  }
  p->npred = k;
  for (int t = 0; t < p->ntile && p->npred < PLAN_MAX_AXLIST; t++)
    if (need[t]) {
      snprintf(p->pred[p->npred], PLAN_NAME_MAX, "%.50s.i.i", p->tile_axes[t]);
      p->pos.pred[p->npred++] = (plan_pos){0, 0};
    }
}

harp_status plan_for_region(const plan_region_info *r, const plan_machine *m, const plan_search_opts *opts,
                          const plan_t *override, const plan_src *src, plan_t *out, harp_error *e) {
  if (!override) return plan_default(r, m, opts, out, e);
  if (opts && opts->algo_mask)
    for (int k = 0; k < PLAN_KEY_COUNT; k++) {
      plan_algo a = override->algo[k];
      if (a != PLAN_ALGO_NONE && !((opts->algo_mask | opts->explicit_mask) >> a & 1u))
        return plan_fail(e, HARP_E_UNSUPPORTED, src, override->pos.algo[k], r->name,
                         "algo_choice %s: %s is not implemented on the %s backend (no kernel of its own there)",
                         plan_algo_key_name((plan_algo_key)k), plan_algo_name(a), opts->backend ? opts->backend : "chosen");
    }
  plan_t *p = ut_xmalloc(sizeof *p);
  if (!p) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  *p = *override;
  plan_fill_from_region(p, r);
  harp_status st = plan_validate(p, r, m, src, e);
  if (!st) *out = *p;
  free(p);
  return st;
}
