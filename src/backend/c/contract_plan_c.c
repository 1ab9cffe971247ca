/* contract_plan_c.c — the region's Schedule Plan as the CPU templates'
 * tuning, and the template's kernel printed under it (or, refused, under
 * the built-in tuning) with the comment that says which.
 * Needs: contract_c_int.h (plan_use, gen_fn, cc_host_isa_mask), the region's
 * plan info (harp/region.h, harp/tune.h), the knobs (HARP_NO_PLANS, AMX).
 * Gives: cc_note_add, cc_choice_of, cc_isa_for_simd, cc_jit_variant,
 * cc_plan_tuning, cc_template_body (split out of contract_c.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "contract_c_int.h"
#include "harp/region.h"

/* ---- the region's Schedule Plan -> the template's tuning ---------------------- */
/* ---- the region's Schedule Plan -> the template's tuning ---------------------- */
/* How a plan reads on the CPU templates (design.md §2.8, README.md here):
 *   warp_tile WMxWN      -> mr x nr, the register micro-tile of the primary (widest) variant
 *   tile [BM, BN, BK]    -> mc, nc, kc (attention: bm query rows, bn keys per tile)
 *   vectorize width      -> simd: 16 AVX-512, 8 AVX2, narrower: scalar; the JIT emits the
 *                           widest variant the host and the width allow
 *   stages               -> prefetch distance, 4 x stages k steps (2 -> 8, the measured best)
 *   bind M.o / N.o       -> par_m / par_n and threads = cores; neither bound: one task over
 *                           M x N (batch dimensions are always parallel)
 *   reorder              -> order 1 when N.i.o comes before M.i.o, else order 0
 *   algo_choice matmul splitk_reduce -> splitk (the skinny kernel, a conv's implicit GEMM; contract_splitk_c.c)
 *   unroll K.i F         -> unroll_k: the micro-kernel's K loop (#pragma GCC unroll F)
 * What the templates cannot follow (other unrolls, further splits, warp binds, ...)
 * plan_validate refuses on a cpu plan (docs/plan.md §18); fuse of batch axes is
 * the batch loop, a C_stride col runs transposed, tails are always masked,
 * A and B always packed (a missing cache_read: the note says so).
 * Conv: the template's M is the output channels and N the pixels; when the plan's M
 * is the pixels (X is the left operand) BK is read (kc) and the warp tile as the
 * template's micro-tile MR x NR (rows = output channels); the plan's M/N tiles are
 * sized for a GEMM's rows and columns and would shrink the pixel panel.
 * A GEMM with a column-major C runs transposed (gemm_transpose) and reads the plan
 * the same way.
 * When cgen_conv_direct picks the direct kernel for the AVX-512 variant (few output
 * channels), that variant reads none of the tiles; the note says so. */

/* Append `what` to ch's notes (plan.json), once. */
void cc_note_add(rt_plan_choice *ch, const char *what) {
  size_t n = strlen(ch->note);
  if (strstr(ch->note, what)) return;
  snprintf(ch->note + n, sizeof ch->note - n, "%s%s", n ? "; " : "", what);
}

/* The region's plan, or NULL for the built-in tuning (no plan, or
 * HARP_NO_PLANS=1, an A/B switch for benchmarks). */
rt_plan_choice *cc_choice_of(const rc_ctx *c, int r) {
  if (!c->plans) return NULL;
  rt_plan_choice *ch = &c->plans[c->f->kernels[r].region];
  if (!ch->has_plan) return NULL;
  if (rt_knobs_or_default(c->knobs)->no_plans) {
    cc_note_add(ch, "HARP_NO_PLANS: the template's built-in tuning");
    return NULL;
  }
  return ch;
}

/* The single ISA variant the JIT emits for a SIMD width: the widest the host
 * has and the width allows. */
unsigned cc_isa_for_simd(int simd) {
  unsigned host = cc_host_isa_mask();
  int h = host & (1u << CGEN_ISA_AVX512) ? CGEN_ISA_AVX512 : host & (1u << CGEN_ISA_AVX2) ? CGEN_ISA_AVX2 : CGEN_ISA_SCALAR;
  int want = simd <= 0 ? h : simd >= 16 ? CGEN_ISA_AVX512 : simd >= 8 ? CGEN_ISA_AVX2 : CGEN_ISA_SCALAR;
  return 1u << (want < h ? want : h);
}

/* The JIT's variant: the one ISA `mask` names, without the scalar fallback
 * (harp run / bench compile for the host alone); packages keep every one. */
void cc_jit_variant(const rc_ctx *c, cgen_tuning *t, unsigned mask) {
  t->bf16 = c->bf16;
  t->bf16_native = c->bf16_native;
  t->bf16_cvt = c->bf16;
  /* the AMX variant where this host runs it (a package built elsewhere: none) */
  t->amx = c->bf16 && rt_knobs_or_default(c->knobs)->amx != RT_AMX_OFF && ut_cpu_amx_bf16();
  t->amx_im2col = rt_knobs_or_default(c->knobs)->amx == RT_AMX_IM2COL;
  if (c->host_only) t->isa_mask = mask, t->no_fallback = true;
}

/* The plan p's tile of region axis `axis` (ri's), 0 when it has none. */
static int tile_of(const plan_t *p, const plan_region_info *ri, int axis) {
  if (axis < 0) return 0;
  for (int i = 0; i < p->ntile; i++)
    if (!strcmp(p->tile_axes[i], ri->axes[axis].name)) return (int)p->tile[i];
  return 0;
}

/* Where loop base+suffix stands in p's reorder, -1 when absent. */
static int order_pos(const plan_t *p, const char *base, const char *suffix) {
  char nm[PLAN_NAME_MAX];
  snprintf(nm, sizeof nm, "%.50s%s", base, suffix);
  for (int i = 0; i < p->nreorder; i++)
    if (!strcmp(p->reorder[i], nm)) return i;
  return -1;
}

/* The plan p's tile for the direct conv kernel (cgen_dconv.c) into
 * t->dconv, the plan's M the pixels when swap (else the output channels):
 * its warp tile is pixels x output channels of a register tile, tile K /
 * the window's taps the input channels of a block, the pixels' tile / the
 * output width the rows of a task, and the output channels' tile the task
 * order (all of them: a row block's channel blocks run on; fewer: a channel
 * block's rows).  0 where the plan has no such field. */
static void plan_to_dconv(const plan_t *p, const plan_region_info *ri, const plan_gemm_view *gv, bool swap,
                       cgen_tuning *t) {
  int px_ax = swap ? gv->m : gv->n, oc_ax = swap ? gv->n : gv->m;
  int tpx = tile_of(p, ri, px_ax), toc = tile_of(p, ri, oc_ax), tk = tile_of(p, ri, gv->k);
  int taps = ri->conv_kh * ri->conv_kw;
  if (p->warp_m > 0 && p->warp_n > 0) t->dconv.px = swap ? p->warp_m : p->warp_n, t->dconv.oc = swap ? p->warp_n : p->warp_m;
  if (tk > 0 && taps > 0) t->dconv.cb = tk / taps > 1 ? tk / taps : 1;
  if (tpx > 0 && ri->conv_ow > 0) t->dconv.rows = tpx / ri->conv_ow > 1 ? (int)(tpx / ri->conv_ow) : 1;
  if (toc > 0 && oc_ax >= 0) t->dconv.order = toc >= ri->axes[oc_ax].size ? 1 : 2;
}

/* Region r's plan, its region info into *ri and its GEMM view into *gv;
 * NULL when the region has no plan or the plan no GEMM view. */
static rt_plan_choice *plan_gemm_of(const rc_ctx *c, int r, const plan_region_info **ri, plan_gemm_view *gv) {
  rt_plan_choice *ch = cc_choice_of(c, r);
  const rg_info *info = c->f->part->regions[c->f->kernels[r].region].info;
  if (!ch || !info || plan_region_gemm_view(&info->plan_info, gv, NULL)) return NULL;
  *ri = &info->plan_info;
  return ch;
}

int cc_plan_tile_k(const rc_ctx *c, int r) {
  const plan_region_info *ri;
  plan_gemm_view gv;
  const rt_plan_choice *ch = plan_gemm_of(c, r, &ri, &gv);
  return ch ? tile_of(&ch->plan, ri, gv.k) : 0;
}

/* Fill t from the region's plan (kind: 'g' GEMM, 'c' conv with the plan's
 * roles swapped when swap, 'a' attention; bm/bn for attention).  Returns the
 * choice, or NULL for the built-in tuning. */
rt_plan_choice *cc_plan_tuning(const rc_ctx *c, int r, char kind, bool swap, cgen_tuning *t, int *bm, int *bn,
                                   plan_use *u) {
  cgen_tuning_default(t);
  u->ch = NULL;
  u->desc[0] = 0;
  const plan_region_info *ri;
  plan_gemm_view gv;
  rt_plan_choice *ch = plan_gemm_of(c, r, &ri, &gv);
  if (!ch) {
    cc_jit_variant(c, t, cc_host_isa_mask());
    return NULL;
  }
  const plan_t *p = &ch->plan;
  int m_ax = swap ? gv.n : gv.m, n_ax = swap ? gv.m : gv.n;
  int tm = tile_of(p, ri, m_ax), tn = tile_of(p, ri, n_ax), tk = tile_of(p, ri, gv.k);
  bool full = p->ntile == 3 && tm > 0 && tn > 0 && tk > 0;
  if (kind == 'a') {
    *bm = tm > 0 ? (tm > 1024 ? 1024 : tm) : 0;
    *bn = tn > 0 ? (tn > 1024 ? 1024 : tn) : 0;
    cc_note_add(ch, "attention: warp tile and head-dimension tile not used (rows per micro-tile follow the registers)");
  } else if (kind == 'd') { /* a conv whose AVX-512 variant is the direct kernel */
    plan_to_dconv(p, ri, &gv, swap, t);
    cc_note_add(ch, "conv on the direct kernel (AVX-512): warp tile = pixels x output channels a register tile, tile K /"
                    " window taps = input channels a block, pixel tile / output width = rows a task, output-channel"
                    " tile = task order; stages not used; other variants (implicit GEMM): the template's tiles");
  } else if (swap) {
    /* the search space sizes BM/BN for a GEMM's rows/columns; read across
     * (pixels as columns) they would shrink the B panel: keep the template's.
     * The warp tile is the register micro-tile MR x NR as the template runs
     * (Winograd's transformed-domain GEMMs read no tile: cost_cpu.c) */
    t->kc = tk;
    if (full && p->warp_m > 0 && p->warp_n > 0 && !plan_algo_is_winograd(p->algo[PLAN_KEY_CONV]))
      t->mr = p->warp_m, t->nr = p->warp_n;
    cc_note_add(ch, kind == 'c' ? "conv with the pixels as the plan's M: tile M/N not used (the template's panel); warp"
                                  " tile = the transposed kernel's micro-tile"
                             : "GEMM run transposed (C^T = B^T A^T): tile M/N not used (the template's panel); warp tile"
                               " = the transposed kernel's micro-tile");
  } else {
    t->mc = tm, t->nc = tn, t->kc = tk;
    if (full && p->warp_m > 0 && p->warp_n > 0) t->mr = p->warp_m, t->nr = p->warp_n;
    else cc_note_add(ch, "not a [M, N, K] tile: the template's micro-tile");
  }
  t->simd = p->vec_width >= 16 ? 16 : p->vec_width >= 8 ? 8 : p->vec_width > 0 ? 1 : 0;
  if (p->vec_width > 0 && p->vec_width < 8) cc_note_add(ch, "vector width below 8: scalar code (no SSE variant)");
  t->prefetch = 4 * p->stages;
  t->par_m = plan_axis_bound_block(p, ri, m_ax);
  t->par_n = plan_axis_bound_block(p, ri, n_ax);
  int cores = c->f->part->formed ? c->f->part->formed->machine.sm_count : 2;
  t->threads = t->par_m || t->par_n ? (cores < 1 ? 1 : cores > 64 ? 64 : cores) : 1;
  if (!t->par_m && !t->par_n) cc_note_add(ch, "M.o and N.o not bound: one task over M x N");
  if (kind != 'a' && p->nreorder) {
    int pm = order_pos(p, ri->axes[gv.m >= 0 ? gv.m : 0].name, ".i.o");
    int pn = gv.n >= 0 ? order_pos(p, ri->axes[gv.n].name, ".i.o") : -1;
    t->order = pm >= 0 && pn >= 0 && pn < pm ? 1 : 0;
  }
  cc_jit_variant(c, t, cc_isa_for_simd(t->simd));
  if (p->nunroll && kind != 'a') t->unroll_k = p->unroll[0].factor; /* plan_validate: K.i / K.i.i only */
  if (p->ncache == 0 && kind != 'a' && kind != 'd') cc_note_add(ch, "no cache_read: the template packs A and B anyway");
  u->ch = ch;
  if (kind == 'a')
    snprintf(u->desc, sizeof u->desc, "bm %d bn %d simd %d threads %d", *bm, *bn, t->simd, t->threads);
  else
    snprintf(u->desc, sizeof u->desc, "mr %d nr %d mc %d nc %d kc %d simd %d prefetch %d threads %d%s%s order %d",
             t->mr, t->nr, t->mc, t->nc, t->kc, t->simd, t->prefetch, t->threads, t->par_m ? " par_m" : "",
             t->par_n ? " par_n" : "", t->order);
  if (t->unroll_k) snprintf(u->desc + strlen(u->desc), sizeof u->desc - strlen(u->desc), " unroll_k %d", t->unroll_k);
  if (kind == 'd')
    snprintf(u->desc + strlen(u->desc), sizeof u->desc - strlen(u->desc), "; direct: px %d oc %d cb %d rows %d order %d",
             t->dconv.px, t->dconv.oc, t->dconv.cb, t->dconv.rows, t->dconv.order);
  return ch;
}

/* After the generator ran: say in the C what the kernel follows. */
static void plan_comment(ut_str *out, const plan_use *u, bool refused, const harp_error *why) {
  if (!u->ch) return;
  char *one = rt_plan_oneline(&u->ch->plan);
  if (refused) {
    char msg[200];
    snprintf(msg, sizeof msg, "the template refused the plan (%.150s): built-in tuning", why->msg);
    cc_note_add(u->ch, msg);
    u->ch->applied = false;
    u->ch->fallback = true;
    ut_str_printf(out, "/* plan: %s\n   NOT applied: %s */\n", one ? one : "?", msg);
  } else {
    u->ch->applied = true;
    ut_str_printf(out, "/* plan: %s\n   -> %s */\n", one ? one : "?", u->desc);
  }
  free(one);
}

/* The template's kernel `kfn` into out, under the plan's tuning (already in
 * *tune, a member of spec); when the template refuses the plan, or there is
 * none, under the built-in tuning (bm/bn, when given, back to the template's
 * own choice), and the plan's comment says which.  False: the template
 * refuses the shape itself (out untouched, the plan not applied). */
bool cc_template_body(rc_ctx *c, plan_use *pu, gen_fn gen, const void *spec, cgen_tuning *tune, int *bm, int *bn,
                      const char *kfn, ut_str *out) {
  harp_error pe = {0}, e2 = {0};
  ut_str body;
  ut_str_init(&body);
  bool refused = pu->ch && gen(&pe, spec, kfn, &body) != HARP_OK;
  if (refused || !pu->ch) { /* the built-in tuning (the conv algorithm is not the plan's; without a plan
                                * the K block the caller set: a ShapeSet conv's, cc_emit_conv) */
    ut_str_free(&body);
    ut_str_init(&body);
    int conv_algo = tune->conv_algo, kc = refused ? 0 : tune->kc;
    cgen_tuning_default(tune);
    tune->conv_algo = conv_algo, tune->kc = kc;
    if (bm) *bm = *bn = 0;
    cc_jit_variant(c, tune, cc_host_isa_mask());
    if (gen(&e2, spec, kfn, &body) != HARP_OK) {
      ut_str_free(&body);
      if (pu->ch) pu->ch->applied = false;
      return false;
    }
  }
  plan_comment(out, pu, refused, &pe);
  ut_str_puts(out, body.buf);
  ut_str_free(&body);
  return true;
}
