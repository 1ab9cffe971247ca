/* cuda_mma.c — the single MMA template for SM80, as GPU dialect IR:
 * batched GEMM with strides and 2-D convolution as implicit GEMM.
 * Needs: cuda.h.  Gives: cuda_mma_emit, cuda_mma_emit_finish (the front
 * ends of GEMM and conv, cuda_front.c, call them; for SM90 plans they hand
 * over to cuda_sm90.c), cuda_chunk_elems, cuda_store_acc_pair.
 *
 * The skeleton (seed 000 §1.8):
 *   cp.async (16/8/4 B, zero-filled tails) -> S-stage SMEM ring (commit/wait)
 *   -> ldmatrix.x4 (.trans where the SMEM tile is M/N-major) -> mma.sync
 *   m16n8k16 (fp32 accumulators) -> Epilogue on the fragments -> stores
 *   (fragment pairs, or staged through SMEM into 16-byte st.global.v4).
 *
 * Plan -> template (seed 000 §1.7):
 *   bind: blockIdx.x walks N tiles, blockIdx.y M tiles (raster_m_x swaps),
 *         blockIdx.z the batch; warps tile the CTA as (BM/WM) x (BN/WN),
 *         warp w = wm * (BN/WN) + wn; lanes follow the mma fragment layout.
 *   pipeline + cache_read: operand tiles are staged in SMEM by cp.async, one
 *         commit group per k tile, `stages` buffers, wait_group(stages-2).
 *   warp_tile: MF = WM/16 m16 fragments x NF = WN/8 n8 fragments per warp.
 *   vectorize: the C store width; 16 bytes goes through an SMEM stage.
 *   predicate_tail: every tail (M, N, K) is predicated: cp.async src-size 0
 *         zero-fills, stores are guarded per element.
 *   epilogue: on the accumulator registers (Epilogue statement).
 *
 * SMEM layout of an operand tile: rows x C contiguous elements, 16-byte
 * chunks XOR-swizzled:  chunk' = chunk ^ g(row) with g chosen by the chunks
 * per row (CPR): CPR >= 8: row & 7; CPR 4: (row >> 1) & 3; CPR 2:
 * (row >> 2) & 1.  So the 8 row addresses of every ldmatrix 8x8 matrix hit 8
 * distinct 16-byte bank groups (checked by the simulator's conflict counter,
 * tests/unit/test_cuda_sim.c).
 *
 * Fragment addressing (PTX ISA 9.7.14.5.8 and 9.7.14.5.15; lane l, matrix
 * mat = l >> 3 of the x4, row rr = l & 7):
 *   A K-major  [BM][BK], ldmatrix:        row m = base + (mat&1)*8 + rr, col k = kk*16 + (mat>>1)*8
 *   A M-major  [BK][BM], ldmatrix.trans:  row k = kk*16 + (mat>>1)*8 + rr, col m = base + (mat&1)*8
 *   B N-major  [BK][BN], ldmatrix.trans:  row k = kk*16 + (mat&1)*8 + rr, col n = base + (mat>>1)*8
 *   B K-major  [BN][BK], ldmatrix:        row n = base + (mat>>1)*8 + rr, col k = kk*16 + (mat&1)*8
 * giving a0..a3 of one m16 fragment, and b0,b1 of two n8 fragments. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda.h"
#include "backend/cuda/cuda_int.h"

/* ---- operands ---------------------------------------------------------------- */
int cuda_chunk_elems(int64_t s_mn, const int64_t *sb, int nsb) {
  int w = 8;
  while (w > 1) {
    bool ok = s_mn % w == 0;
    for (int i = 0; i < nsb; i++) ok = ok && sb[i] % w == 0;
    if (ok) break;
    w /= 2;
  }
  return w >= 2 ? w : 0;
}

int cuda_chunk_elems_esz(int64_t s_mn, const int64_t *sb, int nsb, int esz) {
  if (esz == 2) return cuda_chunk_elems(s_mn, sb, nsb);
  int w = 16 / esz;
  while (w > 1) {
    bool ok = s_mn % w == 0;
    for (int i = 0; i < nsb; i++) ok = ok && sb[i] % w == 0;
    if (ok) break;
    w /= 2;
  }
  return w * esz >= 4 ? w : 0;
}

/* ---- the template (mma_gen: cuda_int.h) ------------------------------------------ */

/* GEMM coordinates of tile element (r, c) of operand `op` as C text. */
static void opnd_coords(mma_gen *g, const cuda_mma_opnd *op, bool is_a, const char *r, const char *c,
                        const char **mn, const char **k) {
  cuda_b *b = &g->b;
  const char *mn0 = is_a ? "bm0" : "bn0";
  if (op->kmajor) {
    *mn = cuda_fmt(b, "(%s + (%s))", mn0, r);
    *k = cuda_fmt(b, "(k0 + (%s))", c);
  } else {
    *mn = cuda_fmt(b, "(%s + (%s))", mn0, c);
    *k = cuda_fmt(b, "(k0 + (%s))", r);
  }
}

/* M (is_a) or N of p as C text: either may be read at run time (p->Mt, p->Nt). */
static const char *mn_text(cuda_b *b, const cuda_mma_prob *p, bool is_a) {
  const char *t = is_a ? p->Mt : p->Nt;
  return t ? t : cuda_fmt(b, "%lld", (long long)(is_a ? p->M : p->N));
}

/* K of p as C text (read at run time: p->Kt). */
static const char *k_text(cuda_b *b, const cuda_mma_prob *p) { return p->Kt ? p->Kt : cuda_fmt(b, "%lld", (long long)p->K); }

/* A size or stride v as C text: t when it is read at run time. */
static const char *st_text(cuda_b *b, int64_t v, const char *t) { return t ? t : cuda_fmt(b, "%lld", (long long)v); }

/* Element pointer and in-bounds predicate of GEMM element (mn, k). */
static void opnd_elem(mma_gen *g, const cuda_mma_opnd *op, bool is_a, const char *mn, const char *k,
                      const char **ptr, const char **ok) {
  cuda_b *b = &g->b;
  const cuda_mma_prob *p = g->p;
  const char *base = is_a ? "Ab" : "Bb";
  if (!op->conv) {
    *ptr = cuda_fmt(b, "(%s + (hk_i64)%s * %s + (hk_i64)%s * %s)", base, mn, st_text(b, op->s_mn, op->s_mn_t), k,
                    st_text(b, op->s_k, op->s_k_t));
    *ok = cuda_fmt(b, "(%s < %s && %s < %s)", mn, mn_text(b, p, is_a), k, k_text(b, p));
    return;
  }
  /* conv gather: k = (ci, kh, kw), n = (oh, ow); pad -> zero fill */
  const cuda_conv_geom *cg = &op->cv;
  const char *h = st_text(b, cg->h, op->cv_h_t), *w = st_text(b, cg->w, op->cv_w_t), *ow = st_text(b, cg->ow, op->cv_ow_t);
  cuda_decl(b, "const int", "hk_ci", NULL, cuda_fmt(b, "%s / %lld", k, (long long)(cg->kh * cg->kw)));
  cuda_decl(b, "const int", "hk_rk", NULL, cuda_fmt(b, "%s - hk_ci * %lld", k, (long long)(cg->kh * cg->kw)));
  cuda_decl(b, "const int", "hk_kh", NULL, cuda_fmt(b, "hk_rk / %lld", (long long)cg->kw));
  cuda_decl(b, "const int", "hk_kw", NULL, cuda_fmt(b, "hk_rk - hk_kh * %lld", (long long)cg->kw));
  cuda_decl(b, "const int", "hk_oh", NULL, cuda_fmt(b, "%s / %s", mn, ow));
  cuda_decl(b, "const int", "hk_ow", NULL, cuda_fmt(b, "%s - hk_oh * %s", mn, ow));
  cuda_decl(b, "const int", "hk_ih", NULL,
            cuda_fmt(b, "hk_oh * %lld - %lld + hk_kh * %lld", (long long)cg->sh, (long long)cg->pt, (long long)cg->dh));
  cuda_decl(b, "const int", "hk_iw", NULL,
            cuda_fmt(b, "hk_ow * %lld - %lld + hk_kw * %lld", (long long)cg->sw, (long long)cg->pl, (long long)cg->dw));
  *ok = cuda_fmt(b, "(%s < %s && %s < %s && hk_ih >= 0 && hk_ih < %s && hk_iw >= 0 && hk_iw < %s)", mn, mn_text(b, p, is_a), k,
                 k_text(b, p), h, w);
  const char *hw = op->cv_h_t || op->cv_w_t ? cuda_fmt(b, "%s * %s", h, w) : cuda_fmt(b, "%lld", (long long)(cg->h * cg->w));
  *ptr = cuda_fmt(b, "(%s + (hk_i64)hk_ci * %s + (hk_i64)hk_ih * %s + hk_iw)", base, hw, w);
}

static int opnd_rows(const mma_gen *g, bool is_a) { return is_a ? g->a_rows : g->b_rows; }
static int opnd_cols(const mma_gen *g, bool is_a) { return is_a ? g->a_cols : g->b_cols; }

/* cp.async of operand tile kt (k0 in scope) into stage `stage` (C text). */
static void emit_async_load(mma_gen *g, const cuda_mma_opnd *op, bool is_a, const char *stage) {
  cuda_b *b = &g->b;
  int R = opnd_rows(g, is_a), C = opnd_cols(g, is_a), w = op->vec, es = g->esz;
  int per_row = C / w, total = R * per_row, iters = (total + g->T - 1) / g->T;
  const char *tag = is_a ? "a" : "b";
  const char *sbase = cuda_fmt(b, "(hk_sb + (%s) * %lld + %lld)", stage, (long long)g->stage_bytes,
                               (long long)(is_a ? 0 : g->a_bytes));
  cuda_comment(b, cuda_fmt(b, "%s tile: %d x %d, cp.async %d B chunks", is_a ? "A" : "B", R, C, w * es));
  cuda_for(b, cuda_fmt(b, "hk_it%s", tag), "0", cuda_fmt(b, "%d", iters), -1);
  cuda_decl(b, "const int", "hk_q", NULL, cuda_fmt(b, "tid + hk_it%s * %d", tag, g->T));
  if (total % g->T) cuda_if(b, cuda_fmt(b, "hk_q < %d", total));
  cuda_decl(b, "const int", "hk_r", NULL, cuda_fmt(b, "hk_q / %d", per_row));
  cuda_decl(b, "const int", "hk_c", NULL, cuda_fmt(b, "(hk_q %% %d) * %d", per_row, w));
  const char *mn, *k;
  opnd_coords(g, op, is_a, "hk_r", "hk_c", &mn, &k);
  cuda_decl(b, "const int", "hk_mn", NULL, mn);
  cuda_decl(b, "const int", "hk_k", NULL, k);
  /* valid elements of the chunk: a prefix along the contiguous dimension */
  const char *base = is_a ? "Ab" : "Bb";
  const char *lim_mn = mn_text(b, g->p, is_a);
  const char *outer_ok, *inner_left;
  if (op->kmajor) {
    outer_ok = cuda_fmt(b, "hk_mn < %s", lim_mn);
    inner_left = cuda_fmt(b, "%s - hk_k", k_text(b, g->p));
  } else {
    outer_ok = cuda_fmt(b, "hk_k < %s", k_text(b, g->p));
    inner_left = cuda_fmt(b, "%s - hk_mn", lim_mn);
  }
  cuda_decl(b, "const int", "hk_left", NULL, inner_left);
  cuda_decl(b, "const int", "hk_n", NULL,
            cuda_fmt(b, "(%s && hk_left > 0) ? (hk_left < %d ? hk_left : %d) * %d : 0", outer_ok, w, w, es));
  cuda_decl(b, cuda_fmt(b, "const %s *", cuda_ctype(g->p->ab_dtype)), "hk_src", NULL,
            cuda_fmt(b, "hk_n ? %s + (hk_i64)hk_mn * %s + (hk_i64)hk_k * %s : %s", base, st_text(b, op->s_mn, op->s_mn_t),
                     st_text(b, op->s_k, op->s_k_t), base));
  cuda_stmt *cp = cuda_emit_s(b, CU_CP_ASYNC, cuda_fmt(b, "%s + %s", sbase, cuda_mm_tile_off(g, is_a, "hk_r", "hk_c")),
                              "hk_src", "hk_n", NULL);
  cp->i[0] = w * es;
  if (total % g->T) cuda_close(b);
  cuda_close(b);
}

/* Register gather: load phase (into regs hk_g{a,b}[]) or store phase. */
static void emit_gather(mma_gen *g, const cuda_mma_opnd *op, bool is_a, const char *stage, bool load, bool store) {
  cuda_b *b = &g->b;
  int R = opnd_rows(g, is_a), C = opnd_cols(g, is_a);
  int total = R * C, iters = (total + g->T - 1) / g->T;
  const char *tag = is_a ? "a" : "b";
  cuda_comment(b, cuda_fmt(b, "%s tile: %d x %d, element gather through registers (%s)", is_a ? "A" : "B", R, C,
                           load && store ? "load+store" : load ? "load" : "store"));
  cuda_for(b, cuda_fmt(b, "hk_it%s", tag), "0", cuda_fmt(b, "%d", iters), -1);
  cuda_decl(b, "const int", "hk_q", NULL, cuda_fmt(b, "tid + hk_it%s * %d", tag, g->T));
  if (total % g->T) cuda_if(b, cuda_fmt(b, "hk_q < %d", total));
  cuda_decl(b, "const int", "hk_r", NULL, cuda_fmt(b, "hk_q / %d", C));
  cuda_decl(b, "const int", "hk_c", NULL, cuda_fmt(b, "hk_q %% %d", C));
  const char *reg = cuda_fmt(b, "hk_g%s[hk_it%s]", tag, tag);
  if (load) {
    const char *mn, *k, *ptr, *ok;
    opnd_coords(g, op, is_a, "hk_r", "hk_c", &mn, &k);
    cuda_decl(b, "const int", "hk_mn", NULL, mn);
    cuda_decl(b, "const int", "hk_k", NULL, k);
    opnd_elem(g, op, is_a, "hk_mn", "hk_k", &ptr, &ok);
    cuda_stmt *ld = cuda_emit_s(b, CU_LD_GLOBAL, reg, ptr, ok, NULL);
    ld->i[0] = g->esz;
  }
  if (store) {
    const char *dst = cuda_fmt(b, "hk_sb + (%s) * %lld + %lld + %s", stage, (long long)g->stage_bytes,
                               (long long)(is_a ? 0 : g->a_bytes), cuda_mm_tile_off(g, is_a, "hk_r", "hk_c"));
    cuda_stmt *st = cuda_emit_s(b, CU_ST_SHARED, dst, reg, NULL, NULL);
    st->i[0] = g->esz;
  }
  if (total % g->T) cuda_close(b);
  cuda_close(b);
}

/* Load tile `kt` (C text) of both operands into stage `stage`: async parts
 * always; gathered parts either fully (prologue) or only their load phase. */
static void emit_tile_loads(mma_gen *g, const char *kt, const char *stage, bool prologue) {
  cuda_b *b = &g->b;
  cuda_decl(b, "const int", "k0", NULL, cuda_fmt(b, "(%s) * %d", kt, g->BK));
  for (int i = 0; i < 2; i++) {
    const cuda_mma_opnd *op = i == 0 ? &g->p->A : &g->p->B;
    if (op->vec) emit_async_load(g, op, i == 0, stage);
    else emit_gather(g, op, i == 0, stage, true, prologue);
  }
}

/* The staged store of g's accumulators: fragments -> SMEM rows of BN
 * elements (+16 B pitch), then 16-byte vector stores of VE elements of
 * osz bytes, element stores at the N tail. */
static void emit_stores_staged(mma_gen *g, int osz, int VE) {
  cuda_b *b = &g->b;
  const cuda_mma_prob *p = g->p;
  int PB = g->BN * osz + 16;
  cuda_comment(b, cuda_fmt(b, "C staged through SMEM (row pitch %d B), then 16-byte vector stores", PB));
  cuda_for(b, "i", "0", cuda_fmt(b, "%d", g->MF), -1);
  cuda_for(b, "j", "0", cuda_fmt(b, "%d", g->NF), -1);
  cuda_for(b, "h", "0", "2", -1);
  cuda_decl(b, "const int", "hk_rl", NULL, cuda_mm_row(g, "i", "h"));
  cuda_decl(b, "const int", "hk_cl", NULL, cuda_mm_col(g, "j"));
  const char *dst = cuda_fmt(b, "hk_sb + hk_rl * %d + hk_cl * %d", PB, osz);
  cuda_store_acc_pair(b, CU_ST_SHARED, dst, "acc[i][j]", p->c_dtype, osz);
  cuda_close(b);
  cuda_close(b);
  cuda_close(b);
  cuda_emit(b, CU_BARRIER);
  int CH = g->BN * osz / 16, total = g->BM * CH, iters = (total + g->T - 1) / g->T;
  cuda_for(b, "hk_it", "0", cuda_fmt(b, "%d", iters), -1);
  cuda_decl(b, "const int", "hk_q", NULL, cuda_fmt(b, "tid + hk_it * %d", g->T));
  if (total % g->T) cuda_if(b, cuda_fmt(b, "hk_q < %d", total));
  cuda_decl(b, "const int", "hk_rl", NULL, cuda_fmt(b, "hk_q / %d", CH));
  cuda_decl(b, "const int", "hk_cc", NULL, cuda_fmt(b, "hk_q %% %d", CH));
  cuda_decl(b, "const int", "hk_gr", NULL, "bm0 + hk_rl");
  cuda_decl(b, "const int", "hk_gc", NULL, cuda_fmt(b, "bn0 + hk_cc * %d", VE));
  cuda_decl(b, "const hk_saddr", "hk_sa", NULL, cuda_fmt(b, "hk_sb + hk_rl * %d + hk_cc * 16", PB));
  cuda_decl(b, "hk_v4", "hk_v", NULL, NULL);
  cuda_stmt *ls = cuda_emit_s(b, CU_LD_SHARED, "hk_v", "hk_sa", NULL, NULL);
  ls->i[0] = 16;
  const char *gp = cuda_fmt(b, "Cb + (hk_i64)hk_gr * %s + hk_gc", st_text(b, p->c_sm, p->c_sm_t));
  cuda_if(b, cuda_fmt(b, "hk_gr < %s && hk_gc + %d <= %s", mn_text(b, p, true), VE, mn_text(b, p, false)));
  cuda_stmt *sg = cuda_emit_s(b, CU_ST_GLOBAL_VEC, gp, "hk_v", NULL, NULL);
  sg->i[0] = 16;
  cuda_else(b);
  cuda_comment(b, "N tail: element stores");
  cuda_for(b, "hk_e", "0", cuda_fmt(b, "%d", VE), -1);
  cuda_decl(b, "hk_u32", "hk_w", NULL, NULL);
  ls = cuda_emit_s(b, CU_LD_SHARED, "hk_w", cuda_fmt(b, "hk_sa + (hk_e * %d & ~3)", osz), NULL, NULL);
  ls->i[0] = 4;
  const char *ok = cuda_fmt(b, "hk_gr < %s && hk_gc + hk_e < %s", mn_text(b, p, true), mn_text(b, p, false));
  sg = cuda_emit_s(b, CU_ST_GLOBAL_VEC, cuda_fmt(b, "%s + hk_e", gp), osz == 2 ? "(hk_u16)(hk_e & 1 ? hk_w >> 16 : hk_w & 0xffff)" : "hk_w",
                   ok, NULL);
  sg->i[0] = osz == 2 ? 2 : 4;
  cuda_close(b); /* hk_e */
  cuda_close(b); /* if/else */
  if (total % g->T) cuda_close(b);
  cuda_close(b);
  cuda_meta_str(g->k, "c_store", "smem_staged_v4");
}

/* The direct store of g's accumulators from the fragments: element pairs
 * of osz bytes where pair_ok (an element store at the N edge), else single
 * elements converted by cv. */
static void emit_stores_direct(mma_gen *g, int osz, bool pair_ok, const char *cv) {
  cuda_b *b = &g->b;
  const cuda_mma_prob *p = g->p;
  cuda_comment(b, pair_ok ? "C stored from the fragments, element pairs" : "C stored from the fragments, elements");
  cuda_for(b, "i", "0", cuda_fmt(b, "%d", g->MF), -1);
  cuda_for(b, "j", "0", cuda_fmt(b, "%d", g->NF), -1);
  cuda_for(b, "h", "0", "2", -1);
  cuda_decl(b, "const int", "hk_r", NULL, cuda_fmt(b, "bm0 + %s", cuda_mm_row(g, "i", "h")));
  cuda_decl(b, "const int", "hk_c", NULL, cuda_fmt(b, "bn0 + %s", cuda_mm_col(g, "j")));
  const char *csn = st_text(b, p->c_sn, p->c_sn_t), *nt = mn_text(b, p, false);
  const char *rp = cuda_fmt(b, "Cb + (hk_i64)hk_r * %s + (hk_i64)hk_c * %s", st_text(b, p->c_sm, p->c_sm_t), csn);
  const char *mok = cuda_fmt(b, "hk_r < %s", mn_text(b, p, true));
  if (pair_ok) {
    cuda_if(b, cuda_fmt(b, "%s && hk_c + 1 < %s", mok, nt));
    cuda_store_acc_pair(b, CU_ST_GLOBAL_VEC, rp, "acc[i][j]", p->c_dtype, osz);
    cuda_else(b);
  }
  for (int e = 0; e < 2; e++) {
    const char *val = osz == 2 ? cuda_fmt(b, "%s(acc[i][j][2 * h + %d])", cv, e) : cuda_fmt(b, "hk_f2u(acc[i][j][2 * h + %d])", e);
    cuda_stmt *sg = cuda_emit_s(b, CU_ST_GLOBAL_VEC, e ? cuda_fmt(b, "%s + %s", rp, csn) : rp, val,
                                cuda_fmt(b, "%s && hk_c + %d < %s", mok, e, nt), NULL);
    sg->i[0] = osz;
  }
  if (pair_ok) cuda_close(b);
  cuda_close(b);
  cuda_close(b);
  cuda_close(b);
  cuda_meta_str(g->k, "c_store", pair_ok ? "fragment_pairs" : "fragment_elements");
}

/* Stores of the accumulators after the Epilogue: staged through SMEM when
 * g's plan asks for 16-byte vectors and C's strides allow them, else
 * straight from the fragments. */
static void emit_stores(mma_gen *g) {
  const cuda_mma_prob *p = g->p;
  int osz = tiny_dtype_size(p->c_dtype);
  bool pair_ok = p->c_sn == 1 && !p->c_sn_t && p->c_sm % 2 == 0 && p->c_zmul % 2 == 0;
  int VE = 16 / osz;
  bool staged = g->p->tune.vec * osz >= 16 && p->c_sn == 1 && !p->c_sn_t && p->c_sm % VE == 0 && p->c_zmul % VE == 0;
  if (staged) emit_stores_staged(g, osz, VE);
  else emit_stores_direct(g, osz, pair_ok, cuda_cvt_fn(p->c_dtype));
}

/* SMEM base, thread / warp indices and the CTA's first row and column. */
static void emit_cta_indices(mma_gen *g) {
  cuda_b *b = &g->b;
  bool mx = g->p->tune.raster_m_x;
  cuda_call(b, "HK_SMEM_DECL(hk_smem)");
  cuda_decl(b, "const hk_saddr", "hk_sb", NULL, "hk_smem_addr(hk_smem)");
  cuda_decl(b, "const int", "tid", NULL, "threadIdx.x");
  cuda_decl(b, "const int", "lane", NULL, "tid & 31");
  cuda_decl(b, "const int", "warp", NULL, "tid >> 5");
  cuda_decl(b, "const int", "wm", NULL, cuda_fmt(b, "warp / %d", g->WARPS_N));
  cuda_decl(b, "const int", "wn", NULL, cuda_fmt(b, "warp %% %d", g->WARPS_N));
  cuda_decl(b, "const int", "bm0", NULL, cuda_fmt(b, "blockIdx.%c * %d", mx ? 'x' : 'y', g->BM));
  cuda_decl(b, "const int", "bn0", NULL, cuda_fmt(b, "blockIdx.%c * %d", mx ? 'y' : 'x', g->BN));
  if (g->p->Mt) cuda_call(b, cuda_fmt(b, "if (bm0 >= %s) return", g->p->Mt)); /* past the binding's M: the whole CTA */
  if (g->p->Nt) cuda_call(b, cuda_fmt(b, "if (bn0 >= %s) return", g->p->Nt)); /* past its N */
  if (g->p->NZt && g->splits > 1) /* past its batches: blockIdx.z is batch x slices + slice */
    cuda_call(b, cuda_fmt(b, "if (blockIdx.z >= (%s) * %d) return", g->p->NZt, g->splits));
  else if (g->p->NZt) cuda_call(b, cuda_fmt(b, "if (blockIdx.z >= %s) return", g->p->NZt)); /* past its batches */
}

/* Parameters C (with the alignment its stores need) and ep0.. */
static void add_c_params(mma_gen *g) {
  const cuda_mma_prob *p = g->p;
  cuda_kernel *k = g->k;
  cuda_param_add(k, p->pname[2], cuda_ctype(p->c_dtype), CUDA_P_PTR_OUT, p->c_dtype);
  int cs = tiny_dtype_size(p->c_dtype), VE = 16 / cs;
  bool staged = p->tune.vec * cs >= 16 && p->c_sn == 1 && !p->c_sn_t && p->c_sm % VE == 0 && p->c_zmul % VE == 0;
  bool pairs = p->c_sn == 1 && !p->c_sn_t && p->c_sm % 2 == 0 && p->c_zmul % 2 == 0;
  bool partials = g->splits > 1 && g->sk != CUDA_SPLITK_SERIAL; /* element-wise fp32 */
  cuda_param_align(k, partials ? 4 : staged ? 16 : pairs ? 2 * cs : cs);
  cuda_epi_params(&g->b, k, p->epi, p->n_epi);
}

/* A ShapeSet build's size parameters hp_sv0 .. (p->nsyms of them). */
static void add_sym_params(mma_gen *g) {
  for (int i = 0; i < g->p->nsyms; i++) cuda_param_add(g->k, cuda_fmt(&g->b, "hp_sv%d", i), "long", CUDA_P_LONG, TINY_I32);
}

/* The Epilogue statement over the warp's fragments (every op of the spec). */
static void emit_epilogue(mma_gen *g) {
  cuda_b *b = &g->b;
  const cuda_mma_prob *p = g->p;
  bool simt = p->mode == CUDA_MM_SIMT;
  cuda_stmt *ep = cuda_emit_s(b, CU_EPILOGUE, "acc", simt ? "bm0" : cuda_fmt(b, "bm0 + wm * %d", g->WM),
                              simt ? "bn0" : cuda_fmt(b, "bn0 + wn * %d", g->WN), mn_text(b, p, true));
  ep->s[4] = mn_text(b, p, false);
  if (simt) { /* the SIMT layout: element [hk_i][hk_j][2 hk_h + e] at row(i, h), column col(j) + e */
    ep->s[5] = cuda_mm_row(g, "hk_i", "hk_h");
    ep->s[6] = cuda_mm_col(g, "hk_j");
  }
  ep->i[0] = g->MF;
  ep->i[1] = g->NF;
  ep->dtype = p->c_dtype;
  cuda_epi_attach(b, ep, p->epi, p->epi_ptr, p->n_epi);
  for (int i = 0; i < ep->nepi; i++) /* a residual's strides read at run time */
    ep->epi[i].s_m_t = p->epi_st_t[i][0], ep->epi[i].s_n_t = p->epi_st_t[i][1];
}

/* Open loops over the thread's accumulator elements acc[i][j][q] at
 * (hk_r, hk_c) (the m16n8 C layout) and an If on the bounds; close with
 * close_frag_elems. */
static void open_frag_elems(mma_gen *g) {
  cuda_b *b = &g->b;
  cuda_for(b, "i", "0", cuda_fmt(b, "%d", g->MF), -1);
  cuda_for(b, "j", "0", cuda_fmt(b, "%d", g->NF), -1);
  cuda_for(b, "q", "0", "4", -1);
  cuda_decl(b, "const int", "hk_r", NULL, cuda_fmt(b, "bm0 + %s", cuda_mm_row(g, "i", "(q >> 1)")));
  cuda_decl(b, "const int", "hk_c", NULL, cuda_fmt(b, "bn0 + %s + (q & 1)", cuda_mm_col(g, "j")));
  cuda_if(b, cuda_fmt(b, "hk_r < %s && hk_c < %s", mn_text(b, g->p, true), mn_text(b, g->p, false)));
}
static void close_frag_elems(mma_gen *g) {
  for (int i = 0; i < 4; i++) cuda_close(&g->b);
}

/* Split-K ATOMIC / REDUCE: the raw fp32 partial sums go to C (the workspace). */
static void emit_partials(mma_gen *g) {
  cuda_b *b = &g->b;
  const cuda_mma_prob *p = g->p;
  bool atomic = g->sk == CUDA_SPLITK_ATOMIC;
  cuda_comment(b, atomic ? "split-K parallel: fp32 partial sums added into C (zeroed by the caller)"
                         : "split-K reduce: this slice's fp32 partial sums, summed in slice order by the finishing pass");
  open_frag_elems(g);
  const char *ptr = cuda_fmt(b, "Cb + (hk_i64)hk_r * %lld + (hk_i64)hk_c * %lld", (long long)p->c_sm, (long long)p->c_sn);
  if (atomic) cuda_emit_s(b, CU_ATOMIC_ADD, ptr, "acc[i][j][q]", NULL, NULL);
  else
    cuda_emit_s(b, CU_ST_GLOBAL_VEC, cuda_fmt(b, "%s + (hk_i64)ks * %lld", ptr, (long long)p->c_ss), "hk_f2u(acc[i][j][q])",
                NULL, NULL)->i[0] = 4;
  close_frag_elems(g);
  cuda_meta_str(g->k, "c_store", atomic ? "red.global.add.f32" : "st.global.b32 partials");
}

/* Split-K SERIAL: wait for the slices before this one, add their running
 * sum; all but the last slice store it back and release the next.  Leaves
 * an If open whose body (the last slice) gets the epilogue and the stores. */
static void emit_serial(mma_gen *g) {
  cuda_b *b = &g->b;
  const cuda_mma_prob *p = g->p;
  const cuda_kernel *k = g->k;
  cuda_comment(b, "split-K serial: slices of this tile add up in slice order through ws; flags[tile] = slices done");
  cuda_decl(b, "float *", "Wb", NULL, cuda_fmt(b, "ws + (hk_i64)bz * %lld", (long long)(p->M * p->N)));
  cuda_decl(b, "int *", "hk_flag", NULL,
            cuda_fmt(b, "flags + ((hk_i64)bz * %lld + blockIdx.y) * %lld + blockIdx.x", (long long)k->grid[1], (long long)k->grid[0]));
  const char *wp = cuda_fmt(b, "Wb + (hk_i64)hk_r * %lld + hk_c", (long long)p->N);
  cuda_if(b, "ks > 0");
  cuda_if(b, "tid == 0");
  cuda_call(b, "hk_flag_wait(hk_flag, ks)"); /* acquire: slices 0..ks-1 are in ws */
  cuda_close(b);
  cuda_emit(b, CU_BARRIER);
  open_frag_elems(g);
  cuda_assign(b, "acc[i][j][q]", cuda_fmt(b, "hk_ldf_f32(%s) + acc[i][j][q]", wp));
  close_frag_elems(g);
  cuda_close(b);
  cuda_if(b, cuda_fmt(b, "ks < %d", g->splits - 1));
  open_frag_elems(g);
  cuda_emit_s(b, CU_ST_GLOBAL_VEC, wp, "hk_f2u(acc[i][j][q])", NULL, NULL)->i[0] = 4;
  close_frag_elems(g);
  cuda_call(b, "hk_fence_gpu()");
  cuda_emit(b, CU_BARRIER);
  cuda_if(b, "tid == 0");
  cuda_call(b, "hk_flag_set(hk_flag, ks + 1)"); /* release */
  cuda_close(b);
  cuda_else(b);
}

static harp_status check_tile(harp_error *e, const char *name, const cuda_tune *t, cuda_mmode mode, int *T) {
  if (t->bm <= 0 || t->bn <= 0 || t->bk <= 0 || t->warp_m <= 0 || t->warp_n <= 0)
    return ut_fail(e, HARP_E_INVALID_ARG, name, "tile sizes must be positive");
  if (mode == CUDA_MM_SIMT && (t->warp_m != 32 || t->warp_n != 64 || t->bk % 4))
    return ut_fail(e, HARP_E_INVALID_ARG, name, "the SIMT template takes warp tiles of 32x64 and BK a multiple of 4, got %dx%d, BK=%d",
                   t->warp_m, t->warp_n, t->bk);
  if (mode != CUDA_MM_SIMT && (t->bk % 16 || t->warp_m % 16 || t->warp_n % 16))
    return ut_fail(e, HARP_E_INVALID_ARG, name, "BK and the warp tile must be multiples of 16 (mma m16n8k16), got BK=%d warp %dx%d",
                   t->bk, t->warp_m, t->warp_n);
  if (t->bm % t->warp_m || t->bn % t->warp_n)
    return ut_fail(e, HARP_E_INVALID_ARG, name, "warp tile %dx%d does not divide the tile %dx%d", t->warp_m, t->warp_n, t->bm,
                   t->bn);
  if (t->stages < 2 || t->stages > 4) return ut_fail(e, HARP_E_INVALID_ARG, name, "stages must be 2..4, got %d", t->stages);
  *T = 32 * (t->bm / t->warp_m) * (t->bn / t->warp_n);
  if (*T > 1024) return ut_fail(e, HARP_E_LIMIT, name, "%d threads per CTA (at most 1024)", *T);
  int acc = t->warp_m / 16 * t->warp_n / 8 * 4;
  int regs = mode == CUDA_MM_SIMT ? 64 + 64 + 40 : acc + t->warp_m / 16 * 4 + t->warp_n / 8 * 2 + 40;
  if (regs > 255)
    return ut_fail(e, HARP_E_REG_OVERFLOW, name, "warp tile %dx%d needs about %d registers per thread (255 at most)",
                   t->warp_m, t->warp_n, regs);
  return HARP_OK;
}

/* g's tile sizes, split-K slices, SMEM tiles and layout from g->p's tune
 * (checked against m's arch); *smem gets the bytes per CTA, grid[0..1] the
 * grid's x and y: N and M tiles (swapped when rastering M along x). */
static harp_status mma_sizes(harp_error *e, const cuda_module *m, const char *name, mma_gen *g, int64_t *smem, int64_t grid[2]) {
  const cuda_mma_prob *p = g->p;
  const cuda_tune *t = &p->tune;
  if (check_tile(e, name, t, p->mode, &g->T)) return e->code;
  g->BM = t->bm, g->BN = t->bn, g->BK = t->bk, g->S = t->stages, g->WM = t->warp_m, g->WN = t->warp_n;
  g->WARPS_M = g->BM / g->WM, g->WARPS_N = g->BN / g->WN, g->MF = g->WM / 16, g->NF = g->WN / 8;
  if (p->mode == CUDA_MM_SIMT) g->MF = g->NF = 4; /* acc[4][4][4]: 8 x 8 outputs per thread */
  g->esz = p->mode == CUDA_MM_MMA16 ? 2 : 4;
  g->KT = (int)((p->K + g->BK - 1) / g->BK);
  g->splits = t->splitk > 1 ? (t->splitk < g->KT ? t->splitk : g->KT) : 1;
  g->sk = t->splitk_kind;
  g->swz_off = t->no_swizzle;
  g->a_rows = p->A.kmajor ? g->BM : g->BK, g->a_cols = p->A.kmajor ? g->BK : g->BM;
  g->b_rows = p->B.kmajor ? g->BN : g->BK, g->b_cols = p->B.kmajor ? g->BK : g->BN;
  if (!cuda_mm_tiles_ok(g))
    return ut_fail(e, HARP_E_UNSUPPORTED, name, "SMEM tile rows of %d / %d %s elements: the swizzle needs %s", g->a_cols, g->b_cols,
                   g->esz == 2 ? "16-bit" : "fp32",
                   g->esz == 2 ? "8, 16, 32 or a multiple of 64" : "4, 8, 16 or a multiple of 32 (K-major), a multiple of 4 (M/N-major)");
  g->a_bytes = cuda_mm_tile_bytes(g, true), g->b_bytes = cuda_mm_tile_bytes(g, false), g->stage_bytes = g->a_bytes + g->b_bytes;
  int osz = tiny_dtype_size(p->c_dtype);
  *smem = g->stage_bytes * g->S;
  int64_t stage_c = (int64_t)g->BM * (g->BN * osz + 16);
  if (t->vec * osz >= 16 && stage_c > *smem) *smem = stage_c;
  if (*smem > cuda_smem_max(m->arch))
    return ut_fail(e, HARP_E_SMEM_OVERFLOW, name, "the plan needs %lld bytes of shared memory per CTA, %s has %lld",
                   (long long)*smem, cuda_arch_name(m->arch), (long long)cuda_smem_max(m->arch));
  int64_t gx = (p->N + g->BN - 1) / g->BN, gy = (p->M + g->BM - 1) / g->BM;
  grid[0] = t->raster_m_x ? gy : gx, grid[1] = t->raster_m_x ? gx : gy;
  if (grid[1] > 65535 || p->nz > 65535)
    return ut_fail(e, HARP_E_LIMIT, name, "grid too large (%lld M/N tiles, %lld batches)", (long long)grid[1], (long long)p->nz);
  return HARP_OK;
}

/* Kernel k's operand parameters (A, B, C, epilogue; the split-K serial
 * workspace and flags) and its metadata from g. */
static void mma_params_meta(mma_gen *g, cuda_kernel *k) {
  cuda_b *b = &g->b;
  const cuda_mma_prob *p = g->p;
  const cuda_tune *t = &p->tune;
  tiny_dtype ab = p->ab_dtype;
  const char *et = cuda_ctype(ab);
  cuda_param_add(k, p->pname[0], et, CUDA_P_PTR_IN, ab);
  cuda_param_align(k, p->A.vec * g->esz);
  cuda_param_add(k, p->pname[1], et, CUDA_P_PTR_IN, ab);
  cuda_param_align(k, p->B.vec * g->esz);
  add_c_params(g);
  if (g->splits > 1 && g->sk == CUDA_SPLITK_SERIAL) {
    cuda_param_add(k, "ws", "float", CUDA_P_PTR_OUT, TINY_FP32);
    cuda_param_add(k, "flags", "int", CUDA_P_PTR_OUT, TINY_I32);
  }
  add_sym_params(g);
  cuda_meta_str(k, "template", "sm80_mma");
  cuda_meta_int(k, "BM", g->BM);
  cuda_meta_int(k, "BN", g->BN);
  cuda_meta_int(k, "BK", g->BK);
  cuda_meta_int(k, "stages", g->S);
  cuda_meta_str(k, "warp_tile", cuda_fmt(b, "%dx%d", g->WM, g->WN));
  cuda_meta_str(k, "A_smem", p->A.kmajor ? "k_major" : "m_major");
  cuda_meta_str(k, "B_smem", p->B.kmajor ? "k_major" : "n_major");
  cuda_meta_int(k, "A_cp_async_bytes", p->A.vec * g->esz);
  cuda_meta_int(k, "B_cp_async_bytes", p->B.vec * g->esz);
  static const char *const mnames[] = {"mma.sync m16n8k16", "mma.sync m16n8k8 .tf32 (operands rounded to TF32)",
                                       "mma.sync m16n8k16 (fp32 operands rounded to %s)", "SIMT FFMA, 8x8 outputs per thread"};
  cuda_meta_str(k, "math", cuda_fmt(b, mnames[p->mode], tiny_dtype_name(p->mma_dtype)));
  cuda_meta_str(k, "swizzle", g->swz_off ? "none" : "xor16B");
  cuda_meta_str(k, "bind", t->raster_m_x ? "m.o->block.x n.o->block.y batch->block.z" : "n.o->block.x m.o->block.y batch->block.z");
  cuda_meta_str(k, "local_edges", "mainloop->epilogue: reg");
}

/* Registers per thread that gather operand op (A when is_a) of g through,
 * 0 when it is loaded by cp.async. */
static int mma_gather_regs(const mma_gen *g, const cuda_mma_opnd *op, bool is_a) {
  if (op->vec) return 0;
  return ((is_a ? g->a_rows * g->a_cols : g->b_rows * g->b_cols) + g->T - 1) / g->T;
}

/* The prologue: indices, the split-K slice and its k-tile range (sets
 * g->nkt), the batch bases of A, B, C and the gather registers. */
static void mma_prologue(mma_gen *g) {
  cuda_b *b = &g->b;
  const cuda_mma_prob *p = g->p;
  const char *et = cuda_ctype(p->ab_dtype);
  emit_cta_indices(g);
  if (g->splits > 1) {
    int kt_per = (g->KT + g->splits - 1) / g->splits;
    cuda_decl(b, "const int", "ks", NULL, cuda_fmt(b, "blockIdx.z %% %d", g->splits));
    cuda_decl(b, "const int", "bz", NULL, cuda_fmt(b, "blockIdx.z / %d", g->splits));
    if (p->Kt) { /* K read at run time: the binding's k tiles in S chunks (an empty chunk adds zeros) */
      cuda_decl(b, "const int", "hk_ktn", NULL, cuda_fmt(b, "(int)((%s + %d) / %d)", p->Kt, g->BK - 1, g->BK));
      cuda_decl(b, "const int", "hk_ktp", NULL, cuda_fmt(b, "(hk_ktn + %d) / %d", g->splits - 1, g->splits));
      cuda_decl(b, "const int", "kt0", NULL, "ks * hk_ktp");
      cuda_decl(b, "const int", "nkt", NULL, "kt0 + hk_ktp < hk_ktn ? hk_ktp : (hk_ktn > kt0 ? hk_ktn - kt0 : 0)");
    } else {
      cuda_decl(b, "const int", "kt0", NULL, cuda_fmt(b, "ks * %d", kt_per));
      cuda_decl(b, "const int", "nkt", NULL, cuda_fmt(b, "(kt0 + %d < %d ? kt0 + %d : %d) - kt0", kt_per, g->KT, kt_per, g->KT));
    }
    g->nkt = "nkt";
    cuda_meta_int(g->k, "splitk", g->splits);
    cuda_meta_str(g->k, "algo_choice.matmul", cuda_splitk_name(g->sk));
  } else {
    cuda_decl(b, "const int", "bz", NULL, "blockIdx.z");
    cuda_decl(b, "const int", "kt0", NULL, "0");
    g->nkt = cuda_fmt(b, "%d", g->KT);
    if (p->Kt) { /* the binding's k tiles (K read at run time) */
      cuda_decl(b, "const int", "nkt", NULL, cuda_fmt(b, "(int)((%s + %d) / %d)", p->Kt, g->BK - 1, g->BK));
      g->nkt = "nkt";
    }
  }
  cuda_decl(b, cuda_fmt(b, "const %s *", et), "Ab", NULL, cuda_fmt(b, "%s + %s", p->pname[0], p->a_base));
  cuda_decl(b, cuda_fmt(b, "const %s *", et), "Bb", NULL, cuda_fmt(b, "%s + %s", p->pname[1], p->b_base));
  cuda_decl(b, cuda_fmt(b, "%s *", cuda_ctype(p->c_dtype)), "Cb", NULL, cuda_fmt(b, "%s + %s", p->pname[2], p->c_base));
  cuda_call(b, "(void)bz; (void)Ab; (void)Bb");
  cuda_mm_decls(g);
  int ga = mma_gather_regs(g, &p->A, true), gb = mma_gather_regs(g, &p->B, false);
  const char *gt = g->esz == 2 ? "hk_u16" : "hk_u32";
  if (ga) cuda_decl(b, gt, "hk_ga", cuda_fmt(b, "[%d]", ga), NULL);
  if (gb) cuda_decl(b, gt, "hk_gb", cuda_fmt(b, "[%d]", gb), NULL);
}

/* The cp.async pipeline of g: S-1 tiles in flight, then per k tile wait,
 * prefetch tile kt+S-1, the MMAs, and the gathered operands' stores into
 * the freed stage; drained at the end. */
static void mma_mainloop(mma_gen *g) {
  cuda_b *b = &g->b;
  const cuda_mma_prob *p = g->p;
  int ga = mma_gather_regs(g, &p->A, true), gb = mma_gather_regs(g, &p->B, false);
  cuda_comment(b, cuda_fmt(b, "pipeline prologue: %d of %d stages in flight", g->S - 1, g->S));
  cuda_for(b, "s", "0", cuda_fmt(b, "%d", g->S - 1), -1);
  cuda_if(b, cuda_fmt(b, "s < %s", g->nkt));
  emit_tile_loads(g, "kt0 + s", "s", true);
  cuda_close(b);
  cuda_emit(b, CU_COMMIT_GROUP);
  cuda_close(b);
  cuda_comment(b, "main loop: wait for tile kt, prefetch tile kt+S-1 into the stage freed last iteration");
  cuda_for(b, "kt", "0", g->nkt, 1);
  cuda_emit(b, CU_WAIT_GROUP)->i[0] = g->S - 2;
  cuda_emit(b, CU_BARRIER);
  cuda_decl(b, "const int", "nk", NULL, cuda_fmt(b, "kt + %d", g->S - 1));
  cuda_if(b, cuda_fmt(b, "nk < %s", g->nkt));
  emit_tile_loads(g, "kt0 + nk", cuda_fmt(b, "nk %% %d", g->S), false);
  cuda_close(b);
  cuda_emit(b, CU_COMMIT_GROUP);
  cuda_decl(b, "const int", "hk_st", NULL, cuda_fmt(b, "kt %% %d", g->S));
  cuda_mm_inner(g);
  if (ga || gb) {
    cuda_comment(b, "gathered operands: registers -> the stage of tile nk (read by nobody since the barrier above)");
    cuda_if(b, cuda_fmt(b, "nk < %s", g->nkt));
    cuda_decl(b, "const int", "k0", NULL, cuda_fmt(b, "(kt0 + nk) * %d", g->BK));
    cuda_call(b, "(void)k0");
    if (ga) emit_gather(g, &p->A, true, cuda_fmt(b, "nk %% %d", g->S), false, true);
    if (gb) emit_gather(g, &p->B, false, cuda_fmt(b, "nk %% %d", g->S), false, true);
    cuda_close(b);
  }
  cuda_close(b); /* kt */
  cuda_emit(b, CU_WAIT_GROUP)->i[0] = 0;
  cuda_emit(b, CU_BARRIER);
}

cuda_stmt *cuda_store_acc_pair(cuda_b *b, cuda_stmt_kind k, const char *dst, const char *acc, tiny_dtype c_dtype, int osz) {
  cuda_stmt *st;
  if (osz == 2)
    st = cuda_emit_s(b, k, dst,
                     cuda_fmt(b, "%s(%s[2 * h], %s[2 * h + 1])", c_dtype == TINY_BF16 ? "hk_pack_bf2" : "hk_pack_h2", acc, acc),
                     NULL, NULL);
  else st = cuda_emit_s(b, k, dst, cuda_fmt(b, "hk_v2{hk_f2u(%s[2 * h]), hk_f2u(%s[2 * h + 1])}", acc, acc), NULL, NULL);
  st->i[0] = 2 * osz;
  return st;
}

harp_status cuda_mma_emit(harp_error *e, cuda_module *m, const cuda_mma_prob *p, const char *name) {
  mma_gen g;
  memset(&g, 0, sizeof g);
  g.p = p;
  int64_t smem = 0, grid[2] = {0, 0};
  harp_status st = mma_sizes(e, m, name, &g, &smem, grid);
  if (st != HARP_OK) return st;
  cuda_b *b = &g.b;
  cuda_kernel *k = cuda_kernel_new(b, m, e, name, p->kind);
  if (!k) return e->code;
  g.k = k;
  k->grid[0] = grid[0], k->grid[1] = grid[1], k->grid[2] = p->nz * g.splits;
  if (p->Nt) k->grid_items = g.BN, k->grid_axis = p->tune.raster_m_x; /* N's tiles: along y when M's are along x */
  if (k->grid[2] > 65535) return ut_fail(e, HARP_E_LIMIT, name, "batch x split-K slices = %lld > 65535", (long long)k->grid[2]);
  k->block[0] = g.T;
  k->smem_bytes = smem;
  /* the plan's CTAs per SM as a register bound (none by default: SIMT at two
   * CTAs per SM, 128 registers and a few bytes spilled, ran 0.74-0.75x cuBLAS
   * SGEMM on an H200 where one CTA of 183 registers ran 0.79x) */
  k->min_blocks = p->tune.min_blocks;
  mma_params_meta(&g, k);
  if (p->pair && !cuda_own_guard(b, k, p->pair)) return ut_fail(e, HARP_E_NO_MEMORY, name, "out of memory");
  mma_prologue(&g);
  mma_mainloop(&g);
  /* ---- epilogue on the fragments, then the stores ---- */
  if (g.splits > 1 && g.sk != CUDA_SPLITK_SERIAL) {
    if (g.sk == CUDA_SPLITK_ATOMIC && p->n_epi) { /* one slice adds the (linear) epilogue */
      cuda_if(b, "ks == 0");
      emit_epilogue(&g);
      cuda_close(b);
    }
    emit_partials(&g);
    return cuda_b_finish(b, k);
  }
  if (g.splits > 1) emit_serial(&g);
  emit_epilogue(&g);
  emit_stores(&g);
  if (g.splits > 1) cuda_close(b);
  return cuda_b_finish(b, k);
}

/* The finishing pass of split-K: 64x64 tiles, 4 warps of 32x32, the
 * accumulators loaded from the workspace (partials summed in slice order),
 * then the template's Epilogue and stores. */
harp_status cuda_mma_emit_finish(harp_error *e, cuda_module *m, const cuda_mma_prob *p, int parts, const char *name) {
  mma_gen g;
  memset(&g, 0, sizeof g);
  cuda_mma_prob q = *p;
  q.tune.bm = q.tune.bn = 64, q.tune.warp_m = q.tune.warp_n = 32, q.tune.raster_m_x = false;
  q.mode = CUDA_MM_MMA16; /* the m16n8 accumulator layout (no operands) */
  g.p = &q;
  g.BM = g.BN = 64, g.WM = g.WN = 32, g.WARPS_M = g.WARPS_N = 2, g.MF = 2, g.NF = 4, g.T = 128, g.splits = 1;
  int osz = tiny_dtype_size(q.c_dtype);
  int64_t gx = (q.N + 63) / 64, gy = (q.M + 63) / 64;
  if (gy > 65535 || q.nz > 65535) return ut_fail(e, HARP_E_LIMIT, name, "grid too large (%lld M tiles, %lld batches)", (long long)gy, (long long)q.nz);
  cuda_b *b = &g.b;
  cuda_kernel *k = cuda_kernel_new(b, m, e, name, "splitk_finish");
  if (!k) return e->code;
  g.k = k;
  k->grid[0] = gx, k->grid[1] = gy, k->grid[2] = q.nz;
  k->block[0] = g.T;
  k->smem_bytes = q.tune.vec * osz >= 16 ? (int64_t)g.BM * (g.BN * osz + 16) : 0;
  cuda_param_add(k, "ws", "float", CUDA_P_PTR_IN, TINY_FP32);
  add_c_params(&g);
  add_sym_params(&g);
  cuda_meta_int(k, "partials", parts);
  cuda_meta_str(k, "order", "slice 0, 1, ... (fixed: deterministic)");
  emit_cta_indices(&g);
  cuda_decl(b, "const int", "bz", NULL, "blockIdx.z");
  cuda_decl(b, cuda_fmt(b, "%s *", cuda_ctype(q.c_dtype)), "Cb", NULL, cuda_fmt(b, "%s + %s", q.pname[2], q.c_base));
  cuda_call(b, "(void)hk_sb; (void)bz");
  cuda_decl(b, "float", "acc", "[2][4][4]", "{}");
  open_frag_elems(&g);
  cuda_for(b, "hk_s", "0", cuda_fmt(b, "%d", parts), 1);
  cuda_assign(b, "acc[i][j][q]",
              cuda_fmt(b, "acc[i][j][q] + hk_ldf_f32(ws + (((hk_i64)hk_s * %lld + bz) * %lld + hk_r) * %lld + hk_c)",
                       (long long)q.nz, (long long)q.M, (long long)q.N));
  cuda_close(b);
  close_frag_elems(&g);
  emit_epilogue(&g);
  emit_stores(&g);
  return cuda_b_finish(b, k);
}
