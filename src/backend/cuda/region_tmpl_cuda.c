/* region_tmpl_cuda.c — a contraction region on its GPU template: the GEMM
 * (SM90 TMA/wgmma or SM80 MMA; A repacked, B packed for wgmma, split-K from
 * the Plan), the implicit-GEMM conv (split-K, Winograd) and attention, each
 * reading its region's Plan and marking it applied, or saying why not (a
 * --plan override a template cannot follow is a located error).
 * Needs: region_int.h (the launch helpers of region_cuda.c), the CUDA
 * generators, the Plan (cuda_plan.h), generic_cuda.c (a ShapeSet build's
 * run-time sizes).  Gives: cr_print_gemm, cr_print_conv, cr_print_attn. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernel/kernel.h"
#include "backend/cuda/cuda_int.h"
#include "backend/cuda/cuda_plan.h"
#include "backend/cuda/region_int.h"
#include "harp/polycore.h"
#include "harp/region.h"
#include "harp/tune.h"

/* The GPU epilogue step of the kernel layer's x. */
static cuda_epi epi_of(const ct_epi *x) {
  static const cuda_epi_kind kinds[] = {
      [CT_EPI_BIAS_M] = CUDA_EPI_BIAS_M, [CT_EPI_BIAS_N] = CUDA_EPI_BIAS_N,     [CT_EPI_RELU] = CUDA_EPI_RELU,
      [CT_EPI_GELU] = CUDA_EPI_GELU,     [CT_EPI_SILU] = CUDA_EPI_SILU,         [CT_EPI_SIGMOID] = CUDA_EPI_SIGMOID,
      [CT_EPI_SCALE] = CUDA_EPI_SCALE,   [CT_EPI_RESIDUAL] = CUDA_EPI_RESIDUAL, [CT_EPI_ROUND] = CUDA_EPI_ROUND,
      [CT_EPI_CLAMP] = CUDA_EPI_CLAMP,   [CT_EPI_RINT] = CUDA_EPI_RINT};
  return (cuda_epi){.kind = kinds[x->kind], .dtype = x->dtype, .scale = x->scale, .shift = x->shift, .s_b0 = x->s_b0,
                    .s_b1 = x->s_b1, .s_m = x->s_m, .s_n = x->s_n, .mul = x->mul, .lo = x->lo, .hi = x->hi};
}

/* Whether every step of epilogue x[0..n) has a GPU form (epi_of's table
 * ends at CT_EPI_RINT: CT_EPI_DIV, a pool's QuantizeLinear, has none). */
static bool epi_gpu_has(const ct_epi *x, int n) {
  for (int i = 0; i < n; i++)
    if ((int)x[i].kind > (int)CT_EPI_RINT) return false;
  return true;
}
#define EPI_NO_GPU "an epilogue step the GPU templates have no form of (a division by a constant)"

/* The contraction generators as cr_gen_fn. */
static harp_status gen_gemm(harp_error *e, cuda_module *m, const void *s, const char *n) { return cuda_gen_gemm(e, m, s, n); }
static harp_status gen_finish(harp_error *e, cuda_module *m, const void *s, const char *n) { return cuda_gen_gemm_finish(e, m, s, n); }
static harp_status gen_conv(harp_error *e, cuda_module *m, const void *s, const char *n) { return cuda_gen_conv(e, m, s, n); }
static harp_status gen_conv_finish(harp_error *e, cuda_module *m, const void *s, const char *n) {
  return cuda_gen_conv_finish(e, m, s, n);
}
static harp_status gen_attn(harp_error *e, cuda_module *m, const void *s, const char *n) { return cuda_gen_attn(e, m, s, n); }
static harp_status gen_pack(harp_error *e, cuda_module *m, const void *s, const char *n) { return cuda_gen_pack_tf32(e, m, s, n); }
static harp_status gen_copy_at(harp_error *e, cuda_module *m, const void *s, const char *n) { return cuda_gen_copy_at(e, m, s, n); }

static harp_status try_gen_finish(cuda_rctx *c, const cuda_gemm_spec *s, const char *name, const char **why) {
  return cr_try_gen(c, gen_finish, s, name, why);
}

/* ---- the Plan -------------------------------------------------------------------- */
static int plan_tile(const plan_t *p, const plan_region_info *ri, int axis) {
  if (axis < 0) return 0;
  for (int i = 0; i < p->ntile; i++)
    if (!strcmp(p->tile_axes[i], ri->axes[axis].name)) return (int)p->tile[i];
  return 0;
}

/* The plan of Function kernel r: its region's choice (c->plans: the
 * --plan override or the cost model's default), else the region's own;
 * NULL when it has none. */
static const plan_t *plan_of(const cuda_rctx *c, int r, const rg_info *info) {
  const rt_plan_choice *ch = c->plans ? &c->plans[c->f->kernels[r].region] : NULL;
  return ch && ch->has_plan ? &ch->plan : info && info->has_plan ? &info->plan : NULL;
}

/* Region r's plan choice (NULL: the caller passed none). */
static rt_plan_choice *choice_of(const cuda_rctx *c, int r) {
  return c->plans ? &c->plans[c->f->kernels[r].region] : NULL;
}

/* Record in plan.json whether region r's kernel follows its plan, with
 * a note (NULL: none) of what it does not take or why. */
static void plan_mark(cuda_rctx *c, int r, bool applied, const char *note) {
  rt_plan_choice *ch = choice_of(c, r);
  if (!ch || !ch->has_plan) return;
  ch->applied = applied;
  ch->fallback = !applied;
  snprintf(ch->note, sizeof ch->note, "%s", note ? note : "");
}

/* A plan the template cannot follow (why): a --plan override is an error
 * located at its region; the cost model's own plan falls back to the
 * template's defaults, marked not applied with why. */
static harp_status plan_refused(cuda_rctx *c, int r, const char *why, const char *instead) {
  rt_plan_choice *ch = choice_of(c, r);
  const char *rn = c->f->part->regions[c->f->kernels[r].region].name;
  if (ch && ch->has_plan && ch->source == RT_PLAN_OVERRIDE)
    return ut_fail(c->e, HARP_E_UNSUPPORTED, rn, "--plan for region '%s' cannot run on the CUDA templates: %s", rn,
                   why ? why : "refused");
  ut_str t;
  ut_str_init(&t);
  ut_str_printf(&t, "%s; %s", why ? why : "refused", instead);
  plan_mark(c, r, false, t.buf ? t.buf : why);
  ut_str_free(&t);
  return HARP_OK;
}

/* The region's Plan as a tuning (tiles by axis name: M, N, K of the GEMM
 * view; split-K slices as plan_splitk_factor counts them on the Plan's
 * machine); false when there is none, it is not a GPU plan, or the
 * templates cannot read it (refused: *st, an override's error). */
static bool plan_tune(cuda_rctx *c, int r, const rg_info *info, cuda_tune *t, harp_status *st) {
  const plan_t *p = plan_of(c, r, info);
  *st = HARP_OK;
  if (!info || !p || !plan_arch_is_gpu(p->arch)) return false;
  harp_error e2 = {0};
  plan_resources res;
  const plan_machine *pm = plan_machine_gpu(p->arch);
  plan_resources_of(p, pm, &info->plan_info, &res);
  if (cuda_tune_from_plan(&e2, p, plan_splitk_factor(p, &info->plan_info, pm, &res), t)) { /* e.g. an algorithm with no kernel */
    *st = plan_refused(c, r, cr_fmt_note(c, "%s", e2.msg), "the template's defaults ran");
    return false;
  }
  t->persistent = plan_persistent(p, &info->plan_info, pm, &res);
  plan_gemm_view gv;
  if (plan_region_gemm_view(&info->plan_info, &gv, NULL) == HARP_OK) {
    t->bm = plan_tile(p, &info->plan_info, gv.m);
    t->bn = plan_tile(p, &info->plan_info, gv.n);
    t->bk = plan_tile(p, &info->plan_info, gv.k);
  }
  return true;
}

/* ---- contractions ------------------------------------------------------------------ */
static cuda_arg targ(const cuda_rctx *c, int r, const ct_tensor *t) { return cuda_arg_slot(c, r, t->slot, t->offset, t->dtype); }

/* Arguments ep0.. of the epilogue steps (the tensor of a bias / residual, else NULL). */
static void epi_args(const cuda_rctx *c, int r, const ct_epi *epi, int n, named_arg *na, char (*names)[16]) {
  for (int i = 0; i < n; i++) {
    snprintf(names[i], sizeof names[i], "ep%d", i);
    na[i] = (named_arg){names[i], epi[i].slot < 0 ? (cuda_arg){CUDA_ARG_NULL, -1, 0}
                                                  : cuda_arg_slot(c, r, epi[i].slot, epi[i].off, epi[i].dtype)};
  }
}

static int64_t up256(int64_t x) { return (x + 255) / 256 * 256; }
/* The launches of a split-K form (n0, l0: the module's kernels and the
 * launches before it, restored on a failure): k[0] (NULL: none) zeroes
 * `out` = flags (serial) or ws; the split kernel k[1] reads io, its C
 * (io[2]) replaced by ws unless serial, plus ws and flags; the finishing
 * pass k[2] (NULL: none) reads ws, C, ep0..  *ok false (*why) when an
 * argument breaks its parameter's alignment. */
static harp_status splitk_launches(cuda_rctx *c, int r, int n0, int l0, bool serial, cuda_arg ws, cuda_arg flags,
                                   const cuda_kernel *const k[3], const named_arg *io, int nio, bool *ok, const char **why) {
  named_arg na[3 + CT_MAX_EPI + 2], fa[2 + CT_MAX_EPI];
  int n = 0, m = 0;
  for (int i = 0; i < nio; i++) na[n++] = io[i];
  if (!serial) na[2].arg = ws; /* "C" / "y" of the split kernel */
  na[n++] = (named_arg){"ws", ws};
  na[n++] = (named_arg){"flags", flags};
  fa[m++] = (named_arg){"ws", ws};
  for (int i = 2; i < nio; i++) fa[m++] = io[i]; /* C, ep0.. */
  named_arg zo = {"out", serial ? flags : ws};
  *ok = true;
  harp_status st = k[0] ? cr_add_launch(c, r, k[0], &zo, 1, ok) : HARP_OK;
  if (!st && *ok) st = cr_add_launch(c, r, k[1], na, n, ok);
  if (!st && *ok && k[2]) st = cr_add_launch(c, r, k[2], fa, m, ok);
  if (st || !*ok) {
    c->mod->n = n0, c->nlaunch = l0;
    if (!*ok) *why = "an operand's element offset breaks the template's alignment";
  }
  return st;
}

/* Split-K from the Plan (s->tune.splitk > 1).  In the scratch area after A's
 * copy (ws_off), an fp32 workspace:
 *   splitk_parallel  zero [batch][M][N]; GEMM adds partials (atomics); finish
 *   splitk_reduce    GEMM writes [S][batch][M][N]; finish sums slice by slice
 *   splitk_serial    zero the flags; GEMM slices add up in order through
 *                    [batch][M][N], the last applies the epilogue
 * The finishing pass applies the whole epilogue, so any epilogue fuses.
 * A ShapeSet build's sizes (s0->nsyms: M, N, K and the batches read at
 * run time, the GEMM cutting the binding's k tiles in S chunks, a CTA past
 * the binding's batches returning; through a workspace the inner batch
 * batch[1] constant, else refused) leave the workspace and the flags laid
 * out at the box's corner hi (constant strides; the zero kernel clears the
 * binding's rows and columns of it, cuda_splitk_zero_at), each kernel
 * guarding the binding's rows and columns.
 * *done false (module and launches as before) when a kernel refuses. */
static harp_status gemm_splitk(cuda_rctx *c, int r, const cuda_gemm_spec *s0, const named_arg *io, int nio, int64_t ws_off,
                             bool *done, const char **why) {
  int n0 = c->mod->n, l0 = c->nlaunch;
  *done = false;
  cuda_splitk kind = s0->tune.splitk_kind;
  /* the workspace's plane of batch (z0, z1) is z0 x batch[1] + z1 at hi's
   * batch[1] (the finishing pass reads plane bz): the inner batch constant */
  if (s0->nsyms && s0->rt_b[1].n && kind != CUDA_SPLITK_SERIAL)
    return *why = "split-K through a workspace with sizes read at run time: over a constant inner batch only", HARP_OK;
  int64_t nz = s0->batch[0] * s0->batch[1], MN = s0->M * s0->N;
  cuda_gemm_spec g = *s0; /* the GEMM kernel's spec */
  if (kind != CUDA_SPLITK_SERIAL) { /* C = the workspace, fp32, contiguous; no epilogue */
    g.c_dtype = TINY_FP32;
    g.c_sm = s0->N, g.c_sn = 1, g.c_sb[1] = MN, g.c_sb[0] = s0->batch[1] * MN, g.c_ss = nz * MN;
    g.n_epi = 0;
    cuda_splitk_ws_const(&g); /* the workspace at the corner hi */
  }
  int S = cuda_gemm_slices(&g);
  int64_t ws_bytes = (kind == CUDA_SPLITK_REDUCE ? S : 1) * nz * MN * 4;
  cuda_arg ws = {CUDA_ARG_SCRATCH, -1, ws_off}, flags = {CUDA_ARG_SCRATCH, -1, ws_off + up256(ws_bytes)};
  if (cr_try_gen(c, gen_gemm, &g, cr_kname(c, r, "gemm"), why)) return HARP_OK;
  const cuda_kernel *gk = c->mod->k[c->mod->n - 1];
  const cuda_kernel *fk = NULL, *zk = NULL;
  int64_t zero_words = 0, end = ws_off + up256(ws_bytes);
  if (kind != CUDA_SPLITK_SERIAL) {
    cuda_gemm_spec f = *s0;
    f.tune = g.tune;
    if (!try_gen_finish(c, &f, cr_kname(c, r, "splitk_finish"), why)) fk = c->mod->k[c->mod->n - 1];
    if (kind == CUDA_SPLITK_ATOMIC) zero_words = nz * MN;
  } else {
    zero_words = gk->grid[0] * gk->grid[1] * (gk->grid[2] / S); /* a flag per output tile */
    end = flags.offset + up256(zero_words * 4);
  }
  harp_error e2 = {0};
  cuda_zero_at za; /* a ShapeSet build: the binding's part of the area only */
  bool zat = zero_words && cuda_splitk_zero_at(s0, kind == CUDA_SPLITK_SERIAL, gk->grid, &za);
  if (zero_words && (zat ? cuda_gen_zero_at(&e2, c->mod, &za, cr_kname(c, r, "splitk_zero"))
                         : cuda_gen_zero(&e2, c->mod, zero_words, cr_kname(c, r, "splitk_zero"))) == HARP_OK)
    zk = c->mod->k[c->mod->n - 1];
  if ((kind != CUDA_SPLITK_SERIAL && !fk) || (zero_words && !zk)) {
    if (!*why) *why = e2.msg[0] ? cr_fmt_note(c, "the zero kernel refused: %s", e2.msg) : "a split-K kernel refused";
    c->mod->n = n0;
    return HARP_OK;
  }
  /* launches: zero, GEMM, finish */
  bool ok = true;
  harp_status st = splitk_launches(c, r, n0, l0, kind == CUDA_SPLITK_SERIAL, ws, flags, (const cuda_kernel *[]){zk, gk, fk},
                                   io, nio, &ok, why);
  if (st || !ok) return st;
  if (s0->nsyms) cuda_launches_sym_args(c, l0);
  if (zat) cuda_zero_grid(c, l0, &za);
  if (end > c->scratch_bytes) c->scratch_bytes = end;
  cuda_kernel *k = c->mod->k[n0];
  cuda_meta_int(k, "splitk_workspace_bytes", end - ws_off);
  *done = true;
  return HARP_OK;
}

/* A into scratch before the GEMM: an elementwise copy over A's moving
 * variables (rounding as the program's CAST does, when it does); *ok and
 * its bytes, or *why the copy kernel or its launch refused (n0: the
 * module's kernels before this region's). */
static harp_status repack_a(cuda_rctx *c, int r, const ct_gemm *gm, int n0, int64_t *a_bytes, bool *ok, const char **why) {
  cuda_copy_at ca; /* a ShapeSet build: the copy at the binding's sizes (refused: the constant one below) */
  const char *cwhy = NULL;
  if (cuda_repack_at_run_time(c, r, gm, &ca) && cr_try_gen(c, gen_copy_at, &ca, cr_kname(c, r, "repack_a"), &cwhy))
    memset(&c->rep_a, 0, sizeof c->rep_a);
  else if (c->rep_a.rank) {
    *ok = false;
    named_arg na[] = {{"in0", targ(c, r, &gm->A0)}, {"out", {CUDA_ARG_SCRATCH, -1, 0}}};
    harp_status st = cr_launch_last(c, r, n0, na, 2, ok, why);
    int64_t numel = 1;
    for (int d = 0; d < ca.rank; d++) numel *= ca.hi[d];
    if (!st && *ok) *a_bytes = numel * tiny_dtype_size(ca.out_dtype), cuda_copy_grid(c, &ca);
    return st;
  }
  cuda_ew_spec cp;
  memset(&cp, 0, sizeof cp);
  *ok = false;
  cp.rank = gm->nrep;
  int64_t numel = 1;
  for (int i = 0; i < gm->nrep; i++) cp.shape[i] = gm->rep_size[i], cp.in[0].strides[i] = gm->rep_src[i], numel *= gm->rep_size[i];
  cp.ninputs = 1;
  cp.in[0].dtype = gm->A0.dtype;
  cp.ninstr = 1;
  cp.instr[0] = (cuda_ew_instr){.op = TINY_INPUT, .input = 0, .dtype = gm->A0.dtype};
  cp.out_dtype = gm->A0.dtype;
  if (gm->a_round != TINY_FP32) /* the program's rounding CAST, done by the copy */
    cp.out_dtype = gm->a_round;
  cp.tune.arch = c->mod->arch;
  if (cr_try_gen(c, cr_gen_ew, &cp, cr_kname(c, r, "repack_a"), why)) return HARP_OK;
  named_arg na[] = {{"in0", targ(c, r, &gm->A0)}, {"out", {CUDA_ARG_SCRATCH, -1, 0}}};
  harp_status st = cr_launch_last(c, r, n0, na, 2, ok, why);
  if (!st && *ok) *a_bytes = numel * tiny_dtype_size(cp.out_dtype);
  return st;
}

/* Does the GEMM s of an sm90 unit want its B packed K-major first?  An fp32
 * B stored N-major ([K][N]: how ONNX MatMul stores a weight) at TF32: wgmma
 * .tf32 reads K-major operands only, and mma.sync .tf32 on Hopper runs at
 * 0.30-0.37x cuBLAS TF32 (H200).  Yes when the SM90 template takes s with B
 * K-major and the GEMM has PACK_MIN_MACS multiply-adds or more (`macs`: a
 * ShapeSet build's at its box's corner hi, so every binding agrees): below that
 * the SM80 template fills the GPU as well, rounds A to TF32 where wgmma
 * truncates it (half the error), and needs no copy.  A ShapeSet build's s
 * is at the corner hi too (its sizes and strides there; the GEMM a pair
 * where a binding's strides are not aligned). */
#define PACK_MIN_MACS ((int64_t)1 << 20)
static bool want_pack_b(const cuda_rctx *c, const cuda_gemm_spec *s, int64_t macs) {
  if (c->mod->arch != CUDA_SM90 || s->a_dtype != TINY_FP32 || s->math != CUDA_MATH_TF32 || s->b_sn != 1 || s->b_sk == 1)
    return false;
  if (macs < PACK_MIN_MACS) return false;
  cuda_gemm_spec k = *s;
  k.b_sk = 1, k.b_sn = s->K;
  cuda_tune_default(&k.tune, CUDA_SM90);
  return cuda_sm90_gemm_ok(&k, NULL, 0);
}

/* The TF32 pack *p of GEMM s's B (N-major) in a ShapeSet build where B's
 * batches, K, N or strides vary (h: s read at run time, its sizes the box's
 * corner hi's): the binding's read at run time, the copy laid out at hi.
 * False when none of them varies (p unchanged). */
static bool pack_at_run_time(const cuda_gemm_spec *s, const cuda_gemm_spec *h, cuda_pack_spec *p) {
  cuda_pack_spec q = {.batch = {s->b_sb[0] ? h->batch[0] : 1, s->b_sb[1] ? h->batch[1] : 1}, .K = h->K, .N = h->N,
                      .s_b = {s->b_sb[0], s->b_sb[1]}, .s_k = s->b_sk, .nsyms = h->nsyms, .rt_k = h->rt_k, .rt_n = h->rt_n,
                      .rt_sk = h->rt_st[2]};
  for (int i = 0; i < 2; i++)
    if (s->b_sb[i]) q.rt_b[i] = h->rt_b[i], q.rt_sb[i] = h->rt_sb[1][i]; /* a broadcast batch (stride 0): one, constant */
  if (!(q.rt_b[0].n || q.rt_b[1].n || q.rt_k.n || q.rt_n.n || q.rt_sk.n || q.rt_sb[0].n || q.rt_sb[1].n)) return false;
  *p = q;
  return true;
}

/* B (N-major, of s) transposed into a contiguous K-major copy [b0][b1][N][K]
 * rounded to TF32 (cuda_gen_pack_tf32 of *ps, s's sizes or, rt, the
 * binding's read at run time into a copy laid out at the box's corner hi;
 * a batch dimension B broadcasts keeps stride 0): once into the packed
 * area after the weights go up when B is a weight, else into scratch at
 * scr_off before the GEMM on every run.  On success *s reads the copy
 * (*b_arg, *bytes; its strides the layout's) and *ok is true; else nothing
 * changed (n0: the module's kernels before the pack) and *why says why. */
static harp_status pack_b(cuda_rctx *c, int r, int n0, cuda_gemm_spec *s, const cuda_pack_spec *ps, bool rt, cuda_arg src,
                          int64_t scr_off, cuda_arg *b_arg, int64_t *bytes, bool *ok, const char **why) {
  *ok = false;
  if (cr_try_gen(c, gen_pack, ps, cr_kname(c, r, "pack_b"), why)) return HARP_OK;
  bool once = src.kind == CUDA_ARG_BUF && c->f->buffers[src.buffer].kind == FN_PARAM;
  cuda_arg dst = once ? (cuda_arg){CUDA_ARG_PACKED, -1, c->packed_bytes} : (cuda_arg){CUDA_ARG_SCRATCH, -1, scr_off};
  named_arg na[] = {{"in", src}, {"out", dst}};
  harp_status st = cr_launch_last(c, r, n0, na, 2, ok, why);
  if (st || !*ok) return st;
  if (rt) cuda_launch_sym_args(c);
  *b_arg = dst;
  const int64_t nb0 = ps->batch[0], nb1 = ps->batch[1], N = ps->N, K = ps->K;
  *bytes = nb0 * nb1 * N * K * 4;
  c->launch[c->nlaunch - 1].once = once;
  cuda_meta_str(c->mod->k[c->mod->n - 1], "pack",
                once ? "an fp32 weight [K][N] transposed to K-major (rounded to TF32) for wgmma, once after the weights go up"
                     : "an fp32 B [K][N] transposed to K-major (rounded to TF32) for wgmma, before the GEMM");
  if (once) c->packed_bytes += up256(*bytes);
  s->b_sk = 1, s->b_sn = K;
  s->b_sb[1] = nb1 > 1 ? N * K : 0, s->b_sb[0] = nb0 > 1 ? nb1 * N * K : 0;
  return HARP_OK;
}

/* The GEMM kernel k's metadata: its region, how it read the plan (text),
 * what happened to A. */
static void gemm_meta(cuda_rctx *c, int r, cuda_kernel *k, const ct_gemm *gm, const char *text) {
  cuda_meta_str(k, "region", c->f->part->regions[c->f->kernels[r].region].name);
  cuda_meta_str(k, "schedule_plan", text);
  if (gm->nrep)
    cuda_meta_str(k, "A", gm->a_round != TINY_FP32 ? "copied into scratch, rounded as the program casts it"
                                                   : "repacked into scratch (its reduced dimensions do not fold)");
}

/* plan_tune for a GEMM of operand dtype ab: an fp32 SM90 plan's BK counts
 * 16-bit elements of the 128-byte TMA atom, so the template takes its own
 * (*note says so). */
static bool gemm_plan_tune(cuda_rctx *c, int r, const rg_info *info, tiny_dtype ab, cuda_tune *t, const char **note,
                           harp_status *st) {
  bool has = plan_tune(c, r, info, t, st);
  if (has && ab == TINY_FP32 && t->arch == CUDA_SM90) {
    t->bk = 0;
    *note = "fp32 on SM90: BK is the 128-byte TMA row (32 fp32), the plan's BK counts 16-bit elements";
  }
  return has;
}

/* The module's kernel and launch counts and packed bytes before a GEMM, to
 * undo what its failed attempts added. */
typedef struct {
  int n0, l0;
  int64_t p0;
} gemm_mark;
static void gemm_undo(cuda_rctx *c, const gemm_mark *mk) { c->mod->n = mk->n0, c->nlaunch = mk->l0, c->packed_bytes = mk->p0; }

/* The GEMM spec s of gm (dtypes, strides, batch, epilogue) in c's math. */
static void gemm_spec_of(const cuda_rctx *c, const ct_gemm *gm, cuda_gemm_spec *s) {
  cuda_gemm_spec_init(s, gm->M, gm->N, gm->K, TINY_FP16);
  s->a_dtype = gm->A.dtype, s->b_dtype = gm->B.dtype, s->c_dtype = gm->C.dtype;
  s->a_sm = gm->a_sm, s->a_sk = gm->a_sk, s->b_sk = gm->b_sk, s->b_sn = gm->b_sn, s->c_sm = gm->c_sm, s->c_sn = gm->c_sn;
  for (int i = 0; i < 2; i++)
    s->batch[i] = gm->batch[i], s->a_sb[i] = gm->a_sb[i], s->b_sb[i] = gm->b_sb[i], s->c_sb[i] = gm->c_sb[i];
  s->n_epi = gm->nepi;
  for (int i = 0; i < gm->nepi; i++) s->epi[i] = epi_of(&gm->epi[i]);
  s->math = c->math;
}

/* The copies before region r's GEMM gm of spec s: A repacked (gm->nrep),
 * B packed where the template wants it; *a_bytes gets the scratch they
 * take, *b_arg B's argument, *b_slot the slot the GEMM reads B's run-time
 * sizes from (B's, -1: constants, CUDA_SLOT_HI: its copy laid out at the
 * box's corner hi), *go false when A cannot be repacked (why). */
static harp_status gemm_pack_operands(cuda_rctx *c, int r, const ct_gemm *gm, cuda_gemm_spec *s, const gemm_mark *mk,
                                      int64_t *a_bytes, cuda_arg *b_arg, int *b_slot, bool *go, const char **why) {
  *go = false;
  if (gm->nrep) {
    bool ok;
    harp_status st = repack_a(c, r, gm, mk->n0, a_bytes, &ok, why);
    if (st || !ok) return st;
  }
  *b_arg = targ(c, r, &gm->B);
  *b_slot = gm->B.slot;
  /* decided at the box's corner hi: the same template at every binding */
  const int slots[3] = {gm->nrep ? -1 : gm->A.slot, gm->B.slot, gm->C.slot};
  const int rt_slots[3] = {gm->nrep ? (c->rep_a.rank ? CUDA_SLOT_REP_A : -1) : gm->A.slot, gm->B.slot, gm->C.slot};
  cuda_pack_spec ps = {.batch = {s->b_sb[0] ? s->batch[0] : 1, s->b_sb[1] ? s->batch[1] : 1}, .K = s->K, .N = s->N,
                       .s_b = {s->b_sb[0], s->b_sb[1]}, .s_k = s->b_sk};
  cuda_gemm_spec h = *s; /* a ShapeSet build's s at the box's corner hi */
  int eslots[CT_MAX_EPI];
  for (int i = 0; i < gm->nepi; i++) eslots[i] = gm->epi[i].slot;
  bool at_hi = cuda_gemm_at_run_time(c, r, rt_slots, eslots, &h);
  if (at_hi) cuda_gemm_strides_at(&h, c->gen.hi);
  /* a weight too: packed once per binding's weights (gpu_upload_consts), at its sizes, into the packed area laid out at hi */
  bool rt = at_hi && pack_at_run_time(s, &h, &ps);
  if (want_pack_b(c, at_hi ? &h : s, cuda_gemm_macs_hi(c, r, slots, s))) { /* scratch: [A's copy | B's | split-K workspace] */
    bool ok;
    const char *pwhy = NULL; /* a pack refused (e.g. > 65535 batches): B as it is, on SM80 */
    int64_t b_bytes = 0, b_off = up256(*a_bytes);
    harp_status st = pack_b(c, r, c->mod->n, s, &ps, rt, *b_arg, b_off, b_arg, &b_bytes, &ok, &pwhy);
    if (st) {
      gemm_undo(c, mk);
      return st;
    }
    if (ok && b_arg->kind == CUDA_ARG_SCRATCH) *a_bytes = b_off + b_bytes;
    /* B's copy: laid out at hi (constant strides) when its sizes are read at run time; else its slot while
     * B's sizes are the box's constants, so its strides, the copy's, stay constants */
    if (ok) *b_slot = rt ? CUDA_SLOT_HI : !cuda_sizes_printed(c, r, gm->B.slot) ? gm->B.slot : -1;
  }
  *go = true;
  return HARP_OK;
}

/* The Plan's split-K pt for region r's GEMM gm (spec s, arguments na[0..
 * 3+nepi), npre copies before it): the SM90 template first, then SM80.
 * *done when one generated; else the refusal is noted (*refused) and
 * pt->splitk cleared so the plan runs without split-K. */
static harp_status gemm_plan_splitk(cuda_rctx *c, int r, const ct_gemm *gm, cuda_gemm_spec *s, cuda_tune *pt, const named_arg *na,
                                    int64_t a_bytes, const gemm_mark *mk, int npre, const char *pnote, const char **refused,
                                    bool *done) {
  bool sdone = false;
  for (int a = pt->arch == CUDA_SM90 && c->mod->arch == CUDA_SM90 ? 0 : 1; a < 2 && !sdone; a++) {
    s->tune = *pt;
    s->tune.arch = a ? CUDA_SM80 : CUDA_SM90;
    harp_status st2 = gemm_splitk(c, r, s, na, 3 + gm->nepi, up256(a_bytes), &sdone, refused);
    if (st2) return st2;
  }
  if (sdone) {
    gemm_meta(c, r, c->mod->k[mk->n0 + npre], gm, "tiles, stages, warp tile, vector width and split-K from the Plan");
    if (a_bytes > c->scratch_bytes) c->scratch_bytes = a_bytes;
    plan_mark(c, r, true, pnote);
    *done = true;
    return HARP_OK;
  }
  harp_status pst = plan_refused(c, r, cr_fmt_note(c, "its split-K: %s", *refused ? *refused : "refused"), "run without split-K");
  if (pst) {
    gemm_undo(c, mk);
    return pst;
  }
  pt->splitk = 0; /* refused: the same plan without split-K */
  return HARP_OK;
}

/* cuda_gen_gemm of region r's GEMM s (its kernel k<r>_gemm, *why on a
 * refusal); a pair's wgmma kernel (s->own 1) from s with its run-time
 * strides at the box's corner hi (the binding's constants may be
 * unaligned; its maps as generated are the hi's), alike at every binding. */
static harp_status try_gemm(cuda_rctx *c, int r, const cuda_gemm_spec *s, const char **why) {
  cuda_gemm_spec t = *s;
  if (s->own > 0) cuda_gemm_strides_at(&t, c->gen.hi);
  return cr_try_gen(c, gen_gemm, &t, cr_kname(c, r, "gemm"), why);
}

/* Region r's GEMM kernel of spec s: the Plan's tiles pt (has_plan; a
 * refusal noted in *refused), then SM90's defaults, then SM80's (why).
 * pair: s's TMA strides are aligned at some bindings only, so a wgmma
 * kernel is the first of a pair (s->own 1; an SM80 one serves them all).
 * *gst gets HARP_OK when one generated; the return is a hard failure. */
static harp_status gemm_generate(cuda_rctx *c, int r, cuda_gemm_spec *s, const cuda_tune *pt, bool has_plan, bool split_refused,
                                 bool pair, const char *pnote, const char **refused, const char **why, harp_status *gst) {
  harp_status st = HARP_E_UNSUPPORTED;
  if (has_plan) {
    s->tune = *pt;
    if (pt->arch == CUDA_SM90 && c->mod->arch != CUDA_SM90) s->tune.arch = CUDA_SM80;
    s->own = pair && s->tune.arch == CUDA_SM90;
    *refused = NULL;
    st = try_gemm(c, r, s, refused);
    if (st && (st = plan_refused(c, r, *refused, "the template's own tiles ran")) != HARP_OK) return st;
    if (!*refused && !split_refused) plan_mark(c, r, true, pnote);
    st = *refused ? HARP_E_UNSUPPORTED : HARP_OK;
  }
  if (st && c->mod->arch == CUDA_SM90) { /* SM90 without (or against) the Plan */
    cuda_tune_default(&s->tune, CUDA_SM90);
    s->tune.persistent = has_plan && pt->persistent; /* the Plan's scheduling holds for the template's tiles too */
    s->own = pair;
    st = try_gemm(c, r, s, why);
  }
  if (st) {
    cuda_tune_default(&s->tune, CUDA_SM80);
    s->own = 0;
    st = cr_try_gen(c, gen_gemm, s, cr_kname(c, r, "gemm"), why);
  }
  *gst = st;
  return HARP_OK;
}

/* The second kernel of region r's GEMM pair (s: the wgmma kernel's spec,
 * just launched with the arguments na[0..n)): the SM80 template at its
 * defaults for the bindings whose TMA strides are not 16-byte aligned,
 * launched after it with the same arguments; *ok false (nothing added,
 * *why) when it refuses. */
static harp_status gemm_pair_sm80(cuda_rctx *c, int r, const ct_gemm *gm, const cuda_gemm_spec *s, const named_arg *na, int n,
                                  bool *ok, const char **why) {
  cuda_gemm_spec t = *s;
  cuda_tune_default(&t.tune, CUDA_SM80);
  t.own = -1;
  int n0 = c->mod->n;
  *ok = false;
  if (cr_try_gen(c, gen_gemm, &t, cr_kname(c, r, "gemm_unaligned"), why)) return HARP_OK;
  harp_status st = cr_launch_last(c, r, n0, na, n, ok, why);
  if (st || !*ok) return st;
  gemm_meta(c, r, c->mod->k[c->mod->n - 1], gm, "none: the SM80 kernel of a pair, the bindings whose TMA strides are not 16-byte aligned");
  cuda_launch_sym_args(c);
  return HARP_OK;
}

harp_status cr_print_gemm(cuda_rctx *c, int r, const ct_gemm *read, bool *done, const char **why) {
  const ct_gemm gm = *read;
  if (!epi_gpu_has(gm.epi, gm.nepi)) return *done = false, *why = EPI_NO_GPU, HARP_OK;
  const rg_info *info = c->f->part->regions[c->f->kernels[r].region].info;
  cuda_gemm_spec s;
  gemm_spec_of(c, &gm, &s);
  const gemm_mark mk = {c->mod->n, c->nlaunch, c->packed_bytes};
  int64_t a_bytes = 0;
  cuda_arg b_arg;
  int b_slot;
  bool go;
  harp_status st = gemm_pack_operands(c, r, &gm, &s, &mk, &a_bytes, &b_arg, &b_slot, &go, why);
  if (st || !go) return st;
  int npre = c->mod->n - mk.n0; /* the copies of A and B before the GEMM */
  /* the Plan's tiles first, then the template's own choice */
  cuda_tune pt;
  harp_status tst;
  const char *pnote = NULL; /* what of the plan the template reads its own way */
  bool has_plan = gemm_plan_tune(c, r, info, s.a_dtype, &pt, &pnote, &tst);
  if (tst) {
    gemm_undo(c, &mk);
    return tst;
  }
  const char *refused = NULL;
  named_arg na[3 + CT_MAX_EPI];
  na[0] = (named_arg){"A", gm.nrep ? (cuda_arg){CUDA_ARG_SCRATCH, -1, 0} : targ(c, r, &gm.A)};
  na[1] = (named_arg){"B", b_arg};
  na[2] = (named_arg){"C", targ(c, r, &gm.C)};
  char epn[CT_MAX_EPI][16];
  epi_args(c, r, gm.epi, gm.nepi, na + 3, epn);
  /* a ShapeSet build's M, N, K and strides (A: its slot, or its copy's
   * shape when the copy reads the sizes at run time, else constants;
   * B: its slot, or its packed copy's, gemm_pack_operands) */
  const int slots[3] = {gm.nrep ? (c->rep_a.rank ? CUDA_SLOT_REP_A : -1) : gm.A.slot, b_slot, gm.C.slot};
  int eslots[CT_MAX_EPI];
  for (int i = 0; i < gm.nepi; i++) eslots[i] = gm.epi[i].slot;
  bool rt = cuda_gemm_at_run_time(c, r, slots, eslots, &s);
  if (has_plan && pt.splitk > 1) { /* the Plan's split-K: SM90 template first, then SM80 */
    st = gemm_plan_splitk(c, r, &gm, &s, &pt, na, a_bytes, &mk, npre, pnote, &refused, done);
    if (st || *done) return st;
  }
  bool split_refused = has_plan && refused; /* the split-K above: marked already */
  bool pair = rt && c->mod->arch == CUDA_SM90 && !cuda_sm90_rt_aligned(&s);
  harp_status gst;
  if ((st = gemm_generate(c, r, &s, &pt, has_plan, split_refused, pair, pnote, &refused, why, &gst)) || gst) {
    gemm_undo(c, &mk);
    return st;
  }
  bool ok = false;
  if ((st = cr_launch_last(c, r, mk.n0, na, 3 + gm.nepi, &ok, why))) return st;
  if (!ok) {
    c->nlaunch = mk.l0, c->packed_bytes = mk.p0;
    plan_mark(c, r, false, *why);
    return HARP_OK;
  }
  gemm_meta(c, r, c->mod->k[c->mod->n - 1], &gm,
            !has_plan ? "none: the template's defaults"
            : refused ? cr_fmt_note(c, "%s; the template's defaults", refused)
                      : "tiles, stages, warp tile, vector width from the Plan");
  if (rt) cuda_launch_sym_args(c);
  if (s.own > 0) { /* the wgmma kernel of a pair: the SM80 one serves the other bindings */
    if ((st = gemm_pair_sm80(c, r, &gm, &s, na, 3 + gm.nepi, &ok, why))) return st;
    if (!ok) {
      gemm_undo(c, &mk);
      plan_mark(c, r, false, *why);
      return HARP_OK;
    }
  }
  if (a_bytes > c->scratch_bytes) c->scratch_bytes = a_bytes;
  *done = true;
  return HARP_OK;
}

/* The conv spec of cv (its epilogue aside) on the SM80 template: implicit
 * GEMM lives there (it runs on sm_90). */
static void conv_spec(const ct_conv *cv, cuda_conv_spec *s) {
  cuda_conv_spec_init(s, cv->n, cv->c, cv->h, cv->w, cv->oc, cv->kh, cv->kw, TINY_FP16);
  s->groups = cv->groups; /* a GEMM per (image, group) */
  s->x_dtype = cv->X.dtype, s->w_dtype = cv->W.dtype, s->y_dtype = cv->Y.dtype;
  memcpy(s->stride, cv->stride, sizeof s->stride);
  memcpy(s->pad, cv->pad, sizeof s->pad);
  memcpy(s->dil, cv->dil, sizeof s->dil);
  cuda_tune_default(&s->tune, CUDA_SM80);
}

/* The region's Plan as the conv template's tuning (*t; false: no plan).
 * The Plan sees a conv as the GEMM [pixels x OC x C*KH*KW] (region
 * formation: M the input's axes, N the filter's), the template as [OC x
 * pixels] per (image, group): M and N trade places, and so do their tiles,
 * warp tiles and raster order.  An SM90 plan runs on the SM80 template
 * (implicit GEMM has no TMA form): its warpgroup tile is not a warp tile
 * there, and an fp32 BK counts 16-bit elements (*note says so). */
static bool conv_plan_tune(cuda_rctx *c, int r, const rg_info *info, int64_t ocg, tiny_dtype dt, cuda_tune *t,
                           const char **note, harp_status *st) {
  *note = NULL;
  if (!plan_tune(c, r, info, t, st)) return false;
  plan_gemm_view gv;
  bool swap = !(plan_region_gemm_view(&info->plan_info, &gv, NULL) == HARP_OK && gv.M == ocg && gv.N != ocg);
  if (swap) {
    int bm = t->bm, wm = t->warp_m;
    t->bm = t->bn, t->bn = bm;
    t->warp_m = t->warp_n, t->warp_n = wm;
    t->raster_m_x = !t->raster_m_x;
  }
  if (t->arch == CUDA_SM90) {
    t->warp_m = t->warp_n = 0;
    if (dt == TINY_FP32) t->bk = 0;
    *note = dt == TINY_FP32 ? "an sm90 plan on the SM80 conv template: the template's own warp tile and fp32 BK"
                            : "an sm90 plan on the SM80 conv template: the template's own warp tile";
  }
  t->arch = CUDA_SM80;
  t->persistent = false;
  return true;
}

/* cuda_conv_at_run_time for conv s of Function kernel r (its input X): a
 * height or width read at run time takes the model's own bottom / right
 * padding (ct_window_pads), so that every binding of the box computes its
 * output size by one formula (the reader's padding holds for the binding's
 * parity alone at stride 2). */
static bool conv_at_run_time(cuda_rctx *c, int r, const ct_tensor *X, cuda_conv_spec *s) {
  if (!cuda_conv_at_run_time(c, r, X->slot, s)) return false;
  const bool rt[2] = {s->rt_h.n > 0, s->rt_w.n > 0};
  if (rt[0] || rt[1]) ct_window_pads(&(ct_src){.g = c->g, .pv = c->pv, .f = c->f}, r, X->node, s->stride, rt, s->pad);
  return true;
}

/* Split-K of conv s (s->tune.splitk > 1) through an fp32 workspace
 * [image*group][OC/G][pixels] in scratch:
 *   splitk_serial    a flag per output tile after it, zeroed first; slices
 *                    add up in order through it, the last runs the epilogue
 *   splitk_parallel  the workspace zeroed; slices add with fp32 atomics;
 *                    the finishing pass (cuda_gen_conv_finish) applies the
 *                    epilogue and stores y
 * (splitk_reduce: refused, *why).  A ShapeSet build whose images, height
 * or width vary (the input X; conv_at_run_time) reads them at
 * run time: the split conv's grid is the box's pixel tiles and images x
 * groups x slices, a CTA past the binding's pixels or images returns, the
 * finishing pass alike; the workspace and the flags laid out at the box's
 * corner hi (the split conv's partials and the finishing pass's reads at
 * its constant strides, cuda_conv_spec.ws_hi), y at the binding.  *done
 * false (module and launches as before) when a kernel refuses (*why). */
static harp_status conv_splitk(cuda_rctx *c, int r, const cuda_conv_spec *s0, const ct_tensor *X, const named_arg *io, int nio,
                               bool *done, const char **why) {
  int n0 = c->mod->n, l0 = c->nlaunch;
  cuda_conv_spec sr = *s0, *s = &sr;
  bool rt = conv_at_run_time(c, r, X, &sr);
  bool serial = s->tune.splitk_kind == CUDA_SPLITK_SERIAL;
  *done = false;
  if (!serial && s->tune.splitk_kind != CUDA_SPLITK_ATOMIC) {
    *why = "a convolution splits K as splitk_serial or splitk_parallel on the GPU (no per-slice partials form)";
    return HARP_OK;
  }
  cuda_conv_spec g = *s; /* the split conv: into the workspace (laid out at hi), no epilogue, unless serial */
  if (!serial) g.y_dtype = TINY_FP32, g.n_epi = 0, g.ws_hi = true;
  if (cr_try_gen(c, gen_conv, &g, cr_kname(c, r, "conv"), why)) return HARP_OK;
  const cuda_kernel *ck = c->mod->k[c->mod->n - 1], *fk = NULL;
  if (!serial && !cr_try_gen(c, gen_conv_finish, s, cr_kname(c, r, "splitk_finish"), why)) fk = c->mod->k[c->mod->n - 1];
  if (!serial && !fk) {
    c->mod->n = n0;
    return HARP_OK;
  }
  int64_t oh = 1, ow = 1, G = s->groups > 0 ? s->groups : 1;
  cuda_conv_out_hw(s, &oh, &ow);
  int64_t nz = s->n * G, ws_words = nz * (s->oc / G) * oh * ow, flag_words = ck->grid[0] * ck->grid[1] * nz;
  harp_error e2 = {0};
  if (cuda_gen_zero(&e2, c->mod, serial ? flag_words : ws_words, cr_kname(c, r, "splitk_zero")) != HARP_OK) {
    c->mod->n = n0;
    *why = cr_fmt_note(c, "the zero kernel refused: %s", e2.msg);
    return HARP_OK;
  }
  const cuda_kernel *zk = c->mod->k[c->mod->n - 1];
  cuda_arg ws = {CUDA_ARG_SCRATCH, -1, 0}, flags = {CUDA_ARG_SCRATCH, -1, up256(ws_words * 4)};
  bool ok = true;
  harp_status st = splitk_launches(c, r, n0, l0, serial, ws, flags, (const cuda_kernel *[]){zk, ck, fk}, io, nio, &ok, why);
  if (st || !ok) return st;
  if (rt) cuda_launches_sym_args(c, l0);
  int64_t end = serial ? flags.offset + up256(flag_words * 4) : up256(ws_words * 4);
  if (end > c->scratch_bytes) c->scratch_bytes = end;
  cuda_meta_int(c->mod->k[n0], "splitk_workspace_bytes", end);
  *done = true;
  return HARP_OK;
}

/* Winograd of conv s (s->tune.winograd, cuda_wino.c): the filter
 * transform (a `once` launch into the packed area when w is a weight, else
 * into scratch before every run), the input transform, the batched GEMM and
 * the output transform with the epilogue; scratch [wv | wm | wu].  A
 * ShapeSet build's images, height and width (the input X) are read
 * at run time by the transforms, the workspace laid out at the box's corner
 * hi (cuda_wino.c), the grids of the kernels over the tiles at the
 * binding's (cuda_wino_grids).  *ok false (module and launches as before, *why) when
 * a kernel refuses or an argument breaks an alignment. */
static harp_status conv_wino(cuda_rctx *c, int r, const cuda_conv_spec *s0, const ct_tensor *X, const named_arg *io, int nio,
                             bool *ok, const char **why) {
  cuda_conv_spec g = *s0, *s = &g;
  bool rt = conv_at_run_time(c, r, X, &g);
  int n0 = c->mod->n, l0 = c->nlaunch, tile = cuda_wino_tile(s, s->tune.winograd);
  cuda_wino_dims d;
  harp_error e2 = {0};
  *ok = false;
  if (s->tune.splitk > 1) return *why = "Winograd does not split K on the GPU (no split-K form)", HARP_OK;
  if (!cuda_wino_dims_of(s, tile, &d) || cuda_gen_conv_wino(&e2, c->mod, s, tile, cr_kname(c, r, "conv"))) {
    c->mod->n = n0;
    *why = cr_fmt_note(c, "the Winograd kernels refused: %s", e2.code ? e2.msg : "the window");
    return HARP_OK;
  }
  int w = -1;
  for (int i = 0; i < nio; i++)
    if (!strcmp(io[i].name, "w")) w = i;
  bool once = w >= 0 && io[w].arg.kind == CUDA_ARG_BUF && c->f->buffers[io[w].arg.buffer].kind == FN_PARAM;
  int64_t m_off = up256(d.v_bytes), u_off = m_off + up256(d.m_bytes);
  cuda_arg V = {CUDA_ARG_SCRATCH, -1, 0}, M = {CUDA_ARG_SCRATCH, -1, m_off};
  cuda_arg U = once ? (cuda_arg){CUDA_ARG_PACKED, -1, c->packed_bytes} : (cuda_arg){CUDA_ARG_SCRATCH, -1, u_off};
  named_arg na[3 + CT_MAX_EPI + 6];
  int n = 0;
  for (int i = 0; i < nio; i++) na[n++] = io[i];
  named_arg ws[] = {{"wu", U}, {"wv", V}, {"wm", M}, {"A", U}, {"B", V}, {"C", M}};
  for (int i = 0; i < UT_ARRAY_LEN(ws); i++) na[n++] = ws[i];
  *ok = true;
  harp_status st = HARP_OK;
  for (int i = 0; i < 4 && !st && *ok; i++) {
    st = cr_add_launch(c, r, c->mod->k[n0 + i], na, n, ok);
    if (!st && *ok && i == 0) c->launch[c->nlaunch - 1].once = once;
  }
  if (st || !*ok) {
    c->mod->n = n0, c->nlaunch = l0;
    if (!*ok) *why = "an operand's element offset breaks the template's alignment";
    return st;
  }
  if (rt) cuda_launches_sym_args(c, l0);
  if (rt) cuda_wino_grids(c, l0, s, tile);
  int64_t end = once ? u_off : u_off + up256(d.u_bytes);
  if (end > c->scratch_bytes) c->scratch_bytes = end;
  if (once) c->packed_bytes += up256(d.u_bytes);
  for (int i = 0; i < 4; i++) cuda_meta_str(c->mod->k[n0 + i], "region", c->f->part->regions[c->f->kernels[r].region].name);
  cuda_meta_str(c->mod->k[n0], "pack", once ? "the filter transform of a weight, once after the weights go up"
                                            : "the filter transform, before the conv on every run");
  cuda_meta_int(c->mod->k[n0 + 2], "winograd_workspace_bytes", end);
  return HARP_OK;
}

/* The conv kernel of spec s (its input X), its launch on io (*ok:
 * bound); the images and the image size read at run time where a ShapeSet
 * build lets it. */
static harp_status conv_launch(cuda_rctx *c, int r, const cuda_conv_spec *s, const ct_tensor *X, const named_arg *io, int nio,
                               bool *ok, const char **why) {
  int n0 = c->mod->n;
  *ok = false;
  if (s->tune.winograd) return conv_wino(c, r, s, X, io, nio, ok, why);
  if (s->tune.splitk > 1) return conv_splitk(c, r, s, X, io, nio, ok, why);
  cuda_conv_spec g = *s;
  bool rt = conv_at_run_time(c, r, X, &g);
  if (cr_try_gen(c, gen_conv, &g, cr_kname(c, r, "conv"), why)) return HARP_OK;
  harp_status st = cr_launch_last(c, r, n0, io, nio, ok, why);
  if (!st && *ok && rt) cuda_launch_sym_args(c);
  return st;
}

/* The plan.json note of a Winograd conv: the tile it runs. */
static const char *wino_note(const cuda_conv_spec *s) {
  return cuda_wino_tile(s, s->tune.winograd) == 4 ? "winograd F(4x4,3x3): filter, input and output transforms around a batched GEMM"
                                                   : "winograd F(2x2,3x3): filter, input and output transforms around a batched GEMM";
}

/* A conv on the implicit-GEMM template: the region's Plan (tiles, stages,
 * warp tile, raster, vector width, split-K), else -- the cost model's plan
 * refused, with a note -- the template's defaults. */
harp_status cr_print_conv(cuda_rctx *c, int r, const ct_conv *read, bool *done, const char **why) {
  const ct_conv cv = *read;
  if (!epi_gpu_has(cv.epi, cv.nepi)) return *done = false, *why = EPI_NO_GPU, HARP_OK;
  const rg_info *info = c->f->part->regions[c->f->kernels[r].region].info;
  cuda_conv_spec s;
  conv_spec(&cv, &s);
  s.n_epi = cv.nepi;
  for (int i = 0; i < cv.nepi; i++) s.epi[i] = epi_of(&cv.epi[i]);
  s.math = c->math;
  named_arg na[3 + CT_MAX_EPI] = {{"x", targ(c, r, &cv.X)}, {"w", targ(c, r, &cv.W)}, {"y", targ(c, r, &cv.Y)}};
  char epn[CT_MAX_EPI][16];
  epi_args(c, r, cv.epi, cv.nepi, na + 3, epn);
  int64_t G = cv.groups > 0 ? cv.groups : 1;
  int n0 = c->mod->n;
  cuda_tune pt;
  const char *pnote = NULL, *refused = NULL;
  harp_status st = HARP_OK;
  bool has_plan = conv_plan_tune(c, r, info, cv.oc / G, cv.W.dtype, &pt, &pnote, &st);
  if (st) return st;
  bool ok = false;
  if (has_plan) {
    s.tune = pt;
    if ((st = conv_launch(c, r, &s, &cv.X, na, 3 + cv.nepi, &ok, &refused))) return st;
    if (!ok && (st = plan_refused(c, r, refused, "the template's own tiles ran"))) return st;
    if (ok) plan_mark(c, r, true, s.tune.winograd ? wino_note(&s) : pnote);
  }
  if (!ok) {
    conv_spec(&cv, &s);
    s.n_epi = cv.nepi;
    for (int i = 0; i < cv.nepi; i++) s.epi[i] = epi_of(&cv.epi[i]);
    s.math = c->math;
    if ((st = conv_launch(c, r, &s, &cv.X, na, 3 + cv.nepi, &ok, why))) return st;
  }
  if (ok) { /* the conv kernel comes first (a split-K zero kernel after it; Winograd: the GEMM third) */
    cuda_kernel *k = c->mod->k[s.tune.winograd ? n0 + 2 : n0];
    cuda_meta_str(k, "region", c->f->part->regions[c->f->kernels[r].region].name);
    cuda_meta_str(k, "schedule_plan", !has_plan ? "none: the template's defaults"
                                      : refused ? cr_fmt_note(c, "%s; the template's defaults", refused)
                                      : s.tune.winograd ? "Winograd from the Plan; its tiles, stages, warp tile on the transformed GEMMs"
                                                : "tiles, stages, warp tile, raster, vector width and split-K from the Plan");
  }
  *done = ok;
  return HARP_OK;
}

/* The attention template's tiles from plan p on region ri (*bm query rows,
 * *bn keys; 0: none given); false (*why) when p asks for what the template
 * does not have: 64 query rows (4 warps of 16), a key tile of 16..128 in
 * steps of 16, each warp 16 rows across it, a 2-stage K/V ring. */
static bool attn_plan_tiles(const plan_t *p, const plan_region_info *ri, int *bm, int *bn, const char **why) {
  plan_gemm_view gv;
  *bm = *bn = 0;
  if (plan_region_gemm_view(ri, &gv, NULL) != HARP_OK) return true;
  int m = plan_tile(p, ri, gv.m), n = plan_tile(p, ri, gv.n), wm = p->arch == PLAN_ARCH_SM90 ? 64 : 16;
  if (m && m != 64) *why = "the attention template's query tile is 64 rows (4 warps x 16)";
  else if (n && (n % 16 || n < 16 || n > 128)) *why = "the attention template's key tile is 16..128, a multiple of 16";
  else if (p->stages && p->stages != 2) *why = "the attention template streams K and V through a 2-stage ring";
  else if (p->warp_m && p->pos.warp_tile.line > 0 && (p->warp_m != wm || (n && p->warp_n != n))) /* written, not defaulted */
    *why = p->arch == PLAN_ARCH_SM90 ? "the attention template's 4 warps hold 64 query rows across the whole key tile (warp_tile 64xBN)"
                                     : "each attention warp holds 16 query rows across the whole key tile (warp_tile 16xBN)";
  else {
    *bm = m, *bn = n;
    return true;
  }
  return false;
}

harp_status cr_print_attn(cuda_rctx *c, int r, const ct_attn *read, bool *done, const char **why) {
  const ct_attn at = *read;
  const rg_info *info = c->f->part->regions[c->f->kernels[r].region].info;
  cuda_attn_spec s;
  cuda_attn_spec_init(&s, at.B, at.H, at.M, at.N, at.D, TINY_FP16);
  s.dv = at.DV;
  s.q_dtype = at.q.dtype, s.kv_dtype = at.k.dtype, s.o_dtype = at.out.dtype; /* V's dtype is K's (gpu_target) */
  s.scale = at.scale;
  s.strided = true;
  memcpy(s.q_s, at.q_s, sizeof s.q_s), memcpy(s.k_s, at.k_s, sizeof s.k_s);
  memcpy(s.v_s, at.v_s, sizeof s.v_s), memcpy(s.o_s, at.o_s, sizeof s.o_s);
  s.causal = at.causal;
  if (at.has_mask) {
    s.has_mask = true;
    s.mask_dtype = at.mask.dtype;
    memcpy(s.mask_s, at.mask_s, sizeof s.mask_s);
  }
  const plan_t *pl = plan_of(c, r, info); /* algo_choice.attention: the --plan override's, else the region's */
  s.online = pl && cuda_attn_online_from_plan(pl);
  s.math = c->math;
  cuda_tune_default(&s.tune, c->mod->arch);
  const char *pwhy = NULL;
  if (pl && info && attn_plan_tiles(pl, &info->plan_info, &s.bm, &s.bn, &pwhy) == false) {
    harp_status pst = plan_refused(c, r, pwhy, "the template's own tiles ran (the algorithm is the plan's)");
    if (pst) return pst;
    s.bm = s.bn = 0;
  }
  const int slots[5] = {at.q.slot, at.k.slot, at.v.slot, at.has_mask ? at.mask.slot : -1, at.out.slot};
  bool rt = cuda_attn_at_run_time(c, r, slots, &s); /* a ShapeSet build's sequence lengths and strides */
  int n0 = c->mod->n;
  if (cr_try_gen(c, gen_attn, &s, cr_kname(c, r, "attn"), why)) return HARP_OK;
  if (pl && !pwhy) plan_mark(c, r, true, "the head dim in one step (D <= 256; the plan's K tile is not read)");
  named_arg na[] = {{"q", targ(c, r, &at.q)}, {"k", targ(c, r, &at.k)}, {"v", targ(c, r, &at.v)},
                    {"mask", at.has_mask ? targ(c, r, &at.mask) : (cuda_arg){CUDA_ARG_NULL, -1, 0}},
                    {"out", targ(c, r, &at.out)}};
  bool ok = false;
  harp_status st = cr_launch_last(c, r, n0, na, 5, &ok, why);
  if (st) return st;
  if (ok && rt) cuda_launch_sym_args(c);
  if (ok) cuda_meta_str(c->mod->k[c->mod->n - 1], "region", c->f->part->regions[c->f->kernels[r].region].name);
  *done = ok;
  return HARP_OK;
}
