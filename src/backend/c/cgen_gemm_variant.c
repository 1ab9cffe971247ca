/* cgen_gemm_variant.c — one ISA variant of the GEMM / implicit-GEMM conv
 * template (cgen_gemm.c drives it over the ISAs): the blocking, the row
 * store with its epilogue, the micro-kernel, the task and $P_run.
 * Needs: cgen_int.h (templating, vector layer, runtime), cgen_gemm_int.h
 * (cg_mm, cg_tile), the packers (cgen_gemm_pack.c), the bf16 and AMX
 * kernels (cgen_bf16.c, cgen_amx.c), split-K's sum (cgen_splitk.c), a
 * conv's sizes read at run time (cgen_gemm_rt.c).
 * Gives: cg_mm_resolve_tile, cg_mm_emit_variant, cg_mm_emit_row(_as),
 * cg_emit_kernel_rows, cg_mm_tt_setup.
 *
 * Shape of the emitted code, per ISA variant (BLIS-style, vectors along N):
 *   phase 0 (conv, fp16/bf16 input, vector variants): widen the input into
 *           fp32 scratch (cg_emit_widen), which the B packer then reads.
 *   phase 1 (parallel): pack all of A into MR-row panels, [k][MR] inside a
 *           KC block, converted to fp32; shared by the compute tasks.
 *   phase 2 (parallel over batch x M-split x N-split tasks), per task:
 *     for jc (NC columns): for pc (KC deep): pack B[pc.., jc..] into NR-wide
 *       panels ([k][NR], fp32; conv gathers them from the input with zero
 *       fill, no im2col buffer); for ir (MR rows): for jr (NR columns):
 *       micro-kernel MR x NR: MR*NR/W accumulators in registers, a broadcast
 *       of A times NR/W vector loads of B per k; the last KC block applies
 *       the epilogue in registers and stores in the output dtype.
 *   Partial sums across KC blocks live in C itself when C is fp32 with unit
 *   column stride, else in a per-thread fp32 buffer.
 * With at most 8 rows (GEMV, decode-time matmuls) the vector variants stream
 * B once instead of packing it (cgen_skinny.c).
 * A conv with tune.splitk > 1 runs its variants on cg_splitk_view: the tasks
 * are slices x tiles, each slice's KC blocks into its fp32 partial, then
 * $P_ksum adds them in slice order with the epilogue (cgen_splitk.c).
 * prepack_a / prepack_b: a constant operand is packed once, by F_pack_a /
 * F_pack_b, in the layout the tasks read (B: per KC block pb, the NR-wide
 * panels of all N, panel j at pb*KC*npan*NR + j*kc*NR); runs skip packing it.
 */
#include <stdio.h>
#include <string.h>

#include "backend/c/cgen_int.h"

#include "backend/c/cgen_gemm_int.h"

/* ---- blocking ------------------------------------------------------------ */
/* The task split of p's nbat batches on variant t (its mr, nr, mp):
 * *sm row blocks by *sn column blocks a batch, as many tasks as
 * cg_split_need asks for, along N or M. */
static void split_tasks(const cg_mm *p, const cg_tile *t, const cg_isa *isa, int64_t nbat, int64_t *sm, int64_t *sn) {
  const cgen_tuning *u = &p->tune;
  int threads = u->threads > 0 ? u->threads : 2;
  int64_t need = cg_split_need((long)nbat, cg_split_target(u));
  bool pm = u->par_m, pn = u->par_n;
  if (!pm && !pn) pm = pn = true;
  *sm = 1, *sn = 1;
  if (need < 2) return;
  int64_t ncol = (p->N + t->nr - 1) / t->nr, nrow = (p->M + t->mr - 1) / t->mr;
  if (pn && pm && p->N >= p->M && ncol >= 2 && nrow >= 2) {
    /* N, unless M lets the slowest thread finish first: N panels are
     * coarse (784 columns in halves of 7 and 5.25 panels of 64), MR rows
     * fine, but each task of an M split packs all of B.  (The AMX variant
     * keeps this rule: weighing N < M too, with its packing at ~48 rows and
     * columns in 32-wide tiles, split 3x3 512->512 at 7x7 and 1x1 1024->256
     * at 14x14 along N and ran 1.49x and 1.15x slower (min times): each task
     * then streams all of A, 4.7 MB at 512x2304 pairs, against half of it;
     * bench/RESULTS.md "amxsplit".  Packing B once needs a shared buffer.) */
    int64_t cn = need < ncol ? need : ncol, cm = need < nrow ? need : nrow;
    double pack = p->prepack_b ? 0 : 16; /* packing a B element ~ 16 multiply-adds */
    int64_t tn = cg_rup((p->N + cn - 1) / cn, t->nr), tm = cg_rup((p->M + cm - 1) / cm, t->mr);
    int64_t rn = (nbat * ((p->N + tn - 1) / tn) + threads - 1) / threads;
    int64_t rm = (nbat * ((p->M + tm - 1) / tm) + threads - 1) / threads;
    double wn = (double)rn * (double)(tn < p->N ? tn : p->N) * ((double)t->mp + pack);
    double wm = (double)rm * (double)cg_rup(p->N, isa->w) * ((double)(tm < p->M ? tm : p->M) + pack);
    if (wm < wn) *sm = cm;
    else *sn = cn;
  } else if (pn && (!pm || p->N >= p->M) && ncol >= 2) *sn = need < ncol ? need : ncol;
  else if (pm && nrow >= 2) *sm = need < nrow ? need : nrow;
  else if (pn) *sn = need < ncol ? need : ncol;
}

/* Variant isa's blocking of p into *t (primary: the tuning's micro-tile
 * applies): MR x NR, KC, NC, MC, the task split, A's packer groups;
 * an error when the tile does not fit the registers or K the slices. */
harp_status cg_mm_resolve_tile(harp_error *e, const cg_mm *p, const cg_isa *isa, bool primary, cg_tile *t) {
  const cgen_tuning *u = &p->tune;
  memset(t, 0, sizeof *t);
  int w = isa->w;
  if (isa->id == CGEN_ISA_AVX512) t->mr = 6, t->nr = 64;
  else if (isa->id == CGEN_ISA_AVX2) t->mr = 6, t->nr = 16;
  else t->mr = 4, t->nr = 4;
  if (primary && u->mr > 0) t->mr = u->mr;
  if (primary && u->nr > 0) t->nr = u->nr;
  if (p->amx) t->mr = t->nr = CG_AMX_MR; /* four 16x16 accumulator tiles, in tiles not registers */
  if (t->nr % w != 0 || t->mr < 1 || t->mr > 64 || t->nr > 256)
    return ut_fail(e, HARP_E_INVALID_ARG, NULL, "cgen: micro-tile %dx%d does not fit SIMD width %d", t->mr, t->nr, w);
  t->nv = t->nr / w;
  if (isa->id != CGEN_ISA_SCALAR && !p->amx && t->mr * t->nv + t->nv + 1 > isa->nregs)
    return ut_fail(e, HARP_E_REG_OVERFLOW, NULL, "cgen: micro-tile %dx%d needs %d vector registers, %s has %d",
                   t->mr, t->nr, t->mr * t->nv + t->nv + 1, isa->tag, isa->nregs);
  t->kc = u->kc > 0 ? u->kc : 256;
  /* a GEMM multiplying in bf16 packs k in pairs, 4 bytes for 2 k: twice the
   * depth the plan sized for fp32 fills the same cache, and halves the
   * passes over C (a conv's view counts pairs in K already) */
  if (p->tune.bf16 && isa->id == CGEN_ISA_AVX512 && !p->pairs) t->kc *= 2;
  /* AMX: 256 pairs a block (A and B panels of 32 KiB), not the AVX-512 plan's */
  if (p->amx) t->kc = p->pairs ? 256 : 512;
  if (t->kc > p->K) t->kc = (int)p->K;
  int64_t nps;
  if (p->full && !(t->kc = cg_splitk_kc(p->K, t->kc, u->splitk, &nps))) /* S slices of whole blocks */
    return ut_fail(e, HARP_E_INVALID_ARG, NULL, "cgen: K = %ld does not cut into %d slices", (long)p->K, u->splitk);
  int64_t nc = u->nc > 0 ? u->nc : 512;
  nc = cg_rup(nc, t->nr);
  t->pf = u->prefetch > 0 ? u->prefetch : u->prefetch < 0 ? 0 : 8;
  /* the A block (mc x kc) stays in L2 while B micro-panels (kc x nr) sit in L1 */
  t->order = u->order >= 0 && u->order <= 2 ? u->order : 0;
  t->jr_outer = t->order == 1;
  t->mc = u->mc > 0 ? u->mc : t->order == 1 ? 393216 / (t->kc * 4) : t->order == 2 ? 240 : p->M;
  t->mc = cg_rup(t->mc < t->mr ? t->mr : t->mc, t->mr);
  t->mp = cg_rup(p->M, t->mr);
  t->nkb = (p->K + t->kc - 1) / t->kc;
  t->direct = p->cdt == TINY_FP32 && p->c_sn == 1;
  t->multi = t->nkb > 1;
  t->ws = t->multi && !t->direct;
  /* task split: batch first, then N or M as bind allows; a batch read at
   * run time: whole batches here (the largest tiles, which size the
   * scratch), the run's split from the table of emit_batch_split */
  int64_t sm = 1, sn = 1;
  if (!p->b0_expr) split_tasks(p, t, isa, p->nb[0] * p->nb[1], &sm, &sn);
  t->tm = cg_rup((p->M + sm - 1) / sm, t->mr);
  t->tn = cg_rup((p->N + sn - 1) / sn, t->nr);
  t->sm = (p->M + t->tm - 1) / t->tm;
  t->sn = (p->N + t->tn - 1) / t->tn;
  t->nc = (int)(nc < cg_rup(t->tn, t->nr) ? nc : cg_rup(t->tn, t->nr));
  t->ncp = t->nc;
  t->nba[0] = p->a_sb[0] ? p->nb[0] : 1;
  t->nba[1] = p->a_sb[1] ? p->nb[1] : 1;
  int64_t npan = t->mp / t->mr;
  t->groups = npan < 8 ? npan : 8;
  t->ppg = (npan + t->groups - 1) / t->groups;
  return HARP_OK;
}

/* NR-wide panels across all of N (a prepacked B holds them all). */
static int64_t cg_npanels(const cg_mm *p, const cg_tile *t) { return (p->N + t->nr - 1) / t->nr; }

#define CG_PF_A_BYTES 1536

/* ---- micro-kernel store + epilogue (one row of nv vectors) ---------------- */
void cg_mm_emit_row(cg_out *o, const cg_mm *p, const cg_tile *t, int nv) { cg_mm_emit_row_as(o, p, t, nv, "row"); }

void cg_mm_emit_row_as(cg_out *o, const cg_mm *p, const cg_tile *t, int nv, const char *name) {
  int w = o->isa->w;
  char buf[256], ldc[48];
  cg_rt_size(ldc, p, p->c_sm, "tt->ldc"); /* C's row stride: this run's pixels where p->rt */
  cg_emit(o, "$I void $P_%s%d(const $F_tt *tt, long m, long n, int nr, int first, int last", name, nv);
  for (int j = 0; j < nv; j++) cg_emit(o, ", $P_v x%d", j);
  cg_emit(o, ") {\n  (void)first; (void)last;\n");
  if (t->direct && t->multi) cg_emit(o, "  float *cp = (float *)tt->c + m * %s + n;\n", ldc);
  if (t->ws) cg_emit(o, "  float *wp = tt->ws + (m - tt->wm0) * %ldL + (n - tt->wn0);\n", (long)t->ncp);
  cg_emit_bias_regs(o, p->epi, p->n_epi, "tt->ep", "m"); /* row m's bias, once */
  for (int j = 0; j < nv; j++) {
    cg_emit(o, "  {\n    int nj = nr - %d;\n    $P_v x = x%d;\n", j * w, j);
    if (j > 0) cg_emit(o, "    if (nj <= 0) return;\n");
    if (t->multi && t->direct) {
      cg_emit(o, "    if (!first) x = x + (nj >= %d ? $P_ld(cp + %d) : $P_ldn(cp + %d, nj));\n", w, j * w, j * w);
      cg_emit(o, "    if (!last) { if (nj >= %d) $P_st(cp + %d, x); else $P_stn(cp + %d, x, nj); }\n    else {\n", w,
              j * w, j * w);
    } else if (t->ws) {
      cg_emit(o, "    if (!first) x = x + $P_ld(wp + %d);\n", j * w);
      cg_emit(o, "    if (!last) $P_st(wp + %d, x);\n    else {\n", j * w);
    } else {
      cg_emit(o, "    {\n");
    }
    for (int i = 0; i < p->n_epi; i++) {
      const cgen_epi *ep = &p->epi[i];
      const char *et = cg_ctype(ep->dtype), *sx = cg_vsuffix(ep->dtype), *op = ep->mul ? "*" : "+";
      if (ep->kind == CGEN_EPI_BIAS_M) {
        cg_emit(o, "      x = x %s eb%d;\n", op, i);
        continue;
      }
      if (cg_emit_epi_common(o, ep, i, "m", "x")) continue;
      switch (ep->kind) {
        case CGEN_EPI_BIAS_N:
          cg_emit(o, "      { const %s *bp = (const %s *)tt->ep[%d] + n + %d;\n", et, et, i, j * w);
          cg_emit(o, "        x = x %s (nj >= %d ? $P_ld%s(bp) : $P_ldn%s(bp, nj)); }\n", op, w, sx, sx);
          break;
        case CGEN_EPI_RESIDUAL:
          if (ep->s_n == 1) {
            char lr[48];
            cg_emit(o, "      { const %s *rp = (const %s *)tt->ep[%d] + m * %s + n + %d;\n", et, et, i,
                    cg_rt_size(lr, p, ep->s_m, "tt->ldc"), j * w);
            cg_emit(o, "        x = x %s (nj >= %d ? $P_ld%s(rp) : $P_ldn%s(rp, nj)); }\n", op, w, sx, sx);
          } else {
            char pname[32], idx[96];
            snprintf(pname, sizeof pname, "tt->ep[%d]", i);
            snprintf(idx, sizeof idx, "m * %ldL + (n + %d + q) * %ldL", (long)ep->s_m, j * w, (long)ep->s_n);
            cg_scalar_ld(o, buf, sizeof buf, ep->dtype, pname, idx);
            cg_emit(o, "      { float tr[%d];\n        for (int q = 0; q < %d; q++) tr[q] = q < nj ? %s : 0.0f;\n", w, w,
                    buf);
            cg_emit(o, "        x = x %s $P_ld(tr); }\n", op);
          }
          break;
        default: break;
      }
    }
    const char *ct = cg_ctype(p->cdt), *cs = cg_vsuffix(p->cdt);
    if (p->c_sn == 1) {
      cg_emit(o, "      %s *cq = (%s *)tt->c + m * %s + n + %d;\n", ct, ct, ldc, j * w);
      cg_emit(o, "      if (nj >= %d) $P_st%s(cq, x); else $P_stn%s(cq, x, nj);\n", w, cs, cs);
    } else {
      cg_scalar_cvt(o, buf, sizeof buf, p->cdt, "tq[q]");
      cg_emit(o, "      float tq[%d]; $P_st(tq, x);\n", w);
      cg_emit(o, "      for (int q = 0; q < nj && q < %d; q++) ((%s *)tt->c)[m * %ldL + (n + %d + q) * %ldL] = %s;\n", w,
              ct, (long)p->c_sm, j * w, (long)p->c_sn, buf);
    }
    cg_emit(o, "    }\n  }\n");
  }
  cg_emit(o, "}\n");
}

static void emit_kernel(cg_out *o, const cg_mm *p, const cg_tile *t, int mr, int nv) {
  int w = o->isa->w;
  if (o->amx) {
    cg_emit_amx_kernel(o, mr, nv, p->pairs);
    return;
  }
  if (cg_mm_use_bf16(p, o)) {
    cg_emit_bf16_kernel(o, mr, nv, t->mr, t->nr, t->pf, t->direct ? (long)p->c_sm : 0, p->pairs,
                        p->prepack_a && p->N <= 256 ? CG_PF_A_BYTES : 0);
    return;
  }
  cg_emit(o, "static $T void $P_k%d_%d(long kc, const float *restrict a, const float *restrict b, const $F_tt *tt,\n"
             "    long m, long n, int nr, int first, int last) {\n", mr, nv);
  for (int i = 0; i < mr; i++)
    for (int j = 0; j < nv; j++) cg_emit(o, "  $P_v c%d_%d = $P_zero();\n", i, j);
  char ldc[48];
  cg_rt_size(ldc, p, p->c_sm, "tt->ldc");
  if (t->direct && o->isa->id != CGEN_ISA_SCALAR)
    for (int i = 0; i < mr; i++)
      for (int l = 0; l < (nv * w * 4 + 63) / 64; l++)
        cg_emit(o, "  __builtin_prefetch((const float *)tt->c + (m + %d) * %s + n + %d, 1);\n", i, ldc, l * 16);
  cg_emit(o, "#pragma GCC unroll %d\n  for (long k = 0; k < kc; k++) {\n", p->tune.unroll_k > 0 ? p->tune.unroll_k : 4);
  if (t->pf > 0)
    for (int l = 0; l < (nv * w * 4 + 63) / 64; l++)
      cg_emit(o, "    __builtin_prefetch(b + (k + %d) * %d + %d);\n", t->pf, t->nr, l * 16);
  /* A packed once (a model's weight) comes from memory on its first use in a
   * run, one MR-wide panel after the other: prefetched ~1.5 KiB ahead, into
   * the next panel (the next micro-tile's, or the next KC block's), where
   * few micro-tiles along N reuse a panel (N <= 256: 1x1 convs at 14x14,
   * 0.28 -> 0.25 ms in ResNet-50's run; at 56x56 the prefetches only cost,
   * 64->256: 0.27 -> 0.30 ms) */
  if (p->prepack_a && o->isa->id != CGEN_ISA_SCALAR && p->N <= 256)
    cg_emit(o, "    __builtin_prefetch((const void *)((uintptr_t)(a + k * %d) + %du));\n", t->mr, CG_PF_A_BYTES);
  for (int j = 0; j < nv; j++) cg_emit(o, "    $P_v b%d = $P_ld(b + k * %d + %d);\n", j, t->nr, j * w);
  for (int i = 0; i < mr; i++) {
    cg_emit(o, "    { $P_v av = $P_set1(a[k * %d + %d]);", t->mr, i);
    for (int j = 0; j < nv; j++) cg_emit(o, " c%d_%d = $P_fma(av, b%d, c%d_%d);", i, j, j, i, j);
    cg_emit(o, " }\n");
  }
  cg_emit_kernel_rows(o, mr, nv);
}

/* The micro-kernel's end (fp32 and bf16 alike): the k loop closed, each of
 * the mr rows of accumulators c<i>_<j> (nv vectors) handed to $P_row<nv>. */
void cg_emit_kernel_rows(cg_out *o, int mr, int nv) {
  cg_emit(o, "  }\n");
  for (int i = 0; i < mr; i++) {
    cg_emit(o, "  $P_row%d(tt, m + %d, n, nr, first, last", nv, i);
    for (int j = 0; j < nv; j++) cg_emit(o, ", c%d_%d", i, j);
    cg_emit(o, ");\n");
  }
  cg_emit(o, "}\n");
}

/* ---- task + run ------------------------------------------------------------ */
static void emit_call(cg_out *o, int mr, int nv) {
  cg_emit(o, "$P_k%d_%d(kc, a, Bp + jr * kc, &tt, ir, jc + jr, nr, first, last);", mr, nv);
}

/* The store context of batch (b0, b1): C and the epilogue tensors there. */
void cg_mm_tt_setup(cg_out *o, const cg_mm *p) {
  char off[96];
  cg_emit(o, "  $F_tt tt;\n  memset(&tt, 0, sizeof tt);\n");
  if (p->rt) cg_emit(o, "  tt.ldc = cx->N;\n"); /* C's row stride: this run's pixels */
  cg_emit(o, "  tt.c = (char *)((%s *)cx->C + %s);\n", cg_ctype(p->cdt), cg_rt_batch_off(off, p, p->c_sb[0], p->c_sb[1]));
  for (int i = 0; i < p->n_epi; i++) {
    const cgen_epi *ep = &p->epi[i];
    const char *et = cg_ctype(ep->dtype);
    if (ep->kind == CGEN_EPI_RESIDUAL)
      cg_emit(o, "  tt.ep[%d] = (const %s *)cx->ep[%d] + %s;\n", i, et, i, cg_rt_batch_off(off, p, ep->s_b0, ep->s_b1));
    else if (ep->kind == CGEN_EPI_BIAS_M)
      cg_emit(o, "  tt.ep[%d] = (const %s *)cx->ep[%d] + b1 * %ldL;\n", i, et, i, (long)p->bias_sb1);
    else if (ep->kind == CGEN_EPI_BIAS_N)
      cg_emit(o, "  tt.ep[%d] = cx->ep[%d];\n", i, i);
  }
}

/* The task's place: its batch (b0, b1), rows [m0, m1) and columns [n0, n1)
 * from `task`, with M or the batches read at run time where p says so, and
 * a split-K slice s first where p->full. */
static void emit_task_range(cg_out *o, const cg_mm *p, const cg_tile *t) {
  if (p->rt) {
    cg_rt_task_range(o, p, t);
  } else if (p->m_expr) { /* batch 1; the rows and their split of this run */
    cg_emit(o, "  long tn = task %% cx->sn, tm = task / cx->sn, b0 = 0, b1 = 0;\n");
    cg_emit(o, "  long m0 = tm * cx->tm, m1 = m0 + cx->tm < cx->M ? m0 + cx->tm : cx->M;\n");
    cg_emit(o, "  long n0 = tn * cx->tn, n1 = n0 + cx->tn < %ldL ? n0 + cx->tn : %ldL;\n", (long)p->N, (long)p->N);
  } else if (p->b0_expr) { /* this run's batches and split (emit_batch_split) */
    cg_emit(o, "  long tn = task %% cx->sn, r = task / cx->sn, tm = r %% cx->sm; r /= cx->sm;\n");
    cg_emit(o, "  long b1 = r %% %ldL, b0 = r / %ldL;\n", (long)p->nb[1], (long)p->nb[1]);
    cg_emit(o, "  long m0 = tm * cx->tm, m1 = m0 + cx->tm < %ldL ? m0 + cx->tm : %ldL;\n", (long)p->M, (long)p->M);
    cg_emit(o, "  long n0 = tn * cx->tn, n1 = n0 + cx->tn < %ldL ? n0 + cx->tn : %ldL;\n", (long)p->N, (long)p->N);
  } else {
    if (p->full) /* split-K: slice s of the tiles (cg_splitk_view) */
      cg_emit(o, "  long s = task / %ldL;\n  task %%= %ldL;\n", (long)(p->nb[0] * p->nb[1] * t->sm * t->sn),
              (long)(p->nb[0] * p->nb[1] * t->sm * t->sn));
    cg_emit(o, "  long tn = task %% %ldL, r = task / %ldL, tm = r %% %ldL; r /= %ldL;\n", (long)t->sn, (long)t->sn,
            (long)t->sm, (long)t->sm);
    cg_emit(o, "  long b1 = r %% %ldL, b0 = r / %ldL;\n", (long)p->nb[1], (long)p->nb[1]);
    cg_emit(o, "  long m0 = tm * %ldL, m1 = m0 + %ldL < %ldL ? m0 + %ldL : %ldL;\n", (long)t->tm, (long)t->tm, (long)p->M,
            (long)t->tm, (long)p->M);
    cg_emit(o, "  long n0 = tn * %ldL, n1 = n0 + %ldL < %ldL ? n0 + %ldL : %ldL;\n", (long)t->tn, (long)t->tn, (long)p->N,
            (long)t->tn, (long)p->N);
  }
}

/* The compute task of p under tile t: its range (emit_task_range), the K
 * blocks with B packed per block, the row panels and their micro-kernel
 * calls (a switch over every row tail where M is read at run time). */
static void emit_task(cg_out *o, const cg_mm *p, const cg_tile *t) {
  int w = o->isa->w;
  int mt = (int)(p->M % t->mr);                  /* row tail of the last task */
  int nrt = (int)(p->N % t->nr);                 /* column tail */
  int nvt = nrt ? (nrt + w - 1) / w : t->nv;     /* vectors the tail needs */
  cg_emit(o, "static $T void $P_task(void *vc, int task, int tid) {\n");
  cg_emit(o, "  const $F_ctx *cx = (const $F_ctx *)vc;\n");
  if (o->amx) cg_emit(o, "  $P_tcfg(); /* released at the end */\n");
  emit_task_range(o, p, t);
  if (p->prepack_b && !t->ws) cg_emit(o, "  (void)tid;\n");
  else cg_emit(o, "  float *Bs = (float *)cx->sc.thr[tid];\n");
  cg_emit(o, "  const float *Ab = cx->Ap + ((%s) * %ldL + (%s)) * cx->K * %ldL;\n",
          t->nba[0] > 1 ? "b0" : "0", (long)t->nba[1], t->nba[1] > 1 ? "b1" : "0", (long)t->mp);
  cg_mm_tt_setup(o, p);
  if (o->amx) cg_emit(o, "  $P_pend pd;\n  pd.pr = pd.h = 0;\n  tt.pd = &pd;\n"); /* cgen_amx.c's pending tile */
  if (t->ws) cg_emit(o, "  tt.ws = Bs + %ldL;\n  tt.wm0 = m0;\n", p->prepack_b ? 0L : (long)t->kc * t->ncp);
  int64_t nps = p->full ? (t->nkb + p->tune.splitk - 1) / p->tune.splitk : 0; /* K blocks a slice */
  if (p->full)
    cg_emit(o, "  tt.c += s * %ldL;\n  long pb0 = s * %ldL, pb1 = pb0 + %ldL < cx->nkb ? pb0 + %ldL : cx->nkb;\n",
            (long)cg_splitk_floats(p, 1) * 4, (long)nps, (long)nps, (long)nps);
  cg_emit(o, "  for (long jc = n0; jc < n1; jc += %d) {\n", t->nc);
  cg_emit(o, "    long nc = n1 - jc < %d ? n1 - jc : %d;\n    tt.wn0 = jc;\n", t->nc, t->nc);
  /* order 2: an MC-row block of C stays in L2 across the whole K loop (B is
   * packed once per block); orders 0/1: B packed once per (jc, pc) */
  const char *icl = "      for (long ic = m0; ic < m1; ic += %ldL) {\n      long ie = ic + %ldL < m1 ? ic + %ldL : m1;\n";
  if (t->order == 2) cg_emit(o, icl, (long)t->mc, (long)t->mc, (long)t->mc);
  cg_emit(o, p->full ? "    for (long pb = pb0; pb < pb1; pb++) {\n" : "    for (long pb = 0; pb < cx->nkb; pb++) {\n");
  cg_emit(o, "      long pc = pb * cx->kc, kc = cx->K - pc < cx->kc ? cx->K - pc : cx->kc;\n");
  cg_emit(o, p->full ? "      int first = pb == pb0, last = pb == pb1 - 1;\n"
                     : "      int first = pb == 0, last = pb == cx->nkb - 1;\n");
  if (p->prepack_b) /* the block's panels from jc on (packed by $P_pack_b) */
    cg_emit(o, "      const float *Bp = (const float *)cx->B + pb * %ldL + jc / %d * kc * %d;\n",
            (long)t->kc * cg_npanels(p, t) * t->nr, t->nr, t->nr);
  else cg_emit(o, "      $P_packB(cx, b0, b1, pc, kc, jc, nc, Bs);\n      const float *Bp = Bs;\n");
  if (!p->prepack_b && cg_mm_use_bfcv(p, o) && !cg_mm_b_pairs(p, o))
    cg_emit(o, "      for (long jq = 0; jq < nc; jq += %d) $P_bfcv(Bs + jq * kc, kc, %d);\n", t->nr, t->nr);
  cg_emit(o, "      const float *Ap = Ab + pc * %ldL;\n", (long)t->mp);
  if (t->order != 2) cg_emit(o, icl, (long)t->mc, (long)t->mc, (long)t->mc);
  /* the row panels: MR rows, or this run's cx->pr (emit_rows_split), each
   * stored at MR rows a k */
  char pr[16], ap[48];
  snprintf(pr, sizeof pr, p->m_expr ? "cx->pr" : "%d", t->mr);
  snprintf(ap, sizeof ap, p->m_expr ? "Ap + ir / cx->pr * %d * kc" : "Ap + ir * kc", t->mr);
  if (t->jr_outer) {
    cg_emit(o, "      for (long jr = 0; jr < nc; jr += %d) {\n", t->nr);
    cg_emit(o, "        int nr = nc - jr < %d ? (int)(nc - jr) : %d;\n", t->nr, t->nr);
    cg_emit(o, "        for (long ir = ic; ir < ie; ir += %s) {\n", pr);
    cg_emit(o, "          const float *a = %s;\n", ap);
    cg_emit(o, "          int mr = ie - ir < %s ? (int)(ie - ir) : %s;\n          (void)mr;\n", pr, pr);
  } else {
    cg_emit(o, "      for (long ir = ic; ir < ie; ir += %s) {\n", pr);
    cg_emit(o, "        const float *a = %s;\n", ap);
    cg_emit(o, "        int mr = ie - ir < %s ? (int)(ie - ir) : %s;\n        (void)mr;\n", pr, pr);
    cg_emit(o, "        for (long jr = 0; jr < nc; jr += %d) {\n", t->nr);
    cg_emit(o, "          int nr = nc - jr < %d ? (int)(nc - jr) : %d;\n", t->nr, t->nr);
  }
  /* the row tail: the last task's M % MR rows, or with M read at run time
   * any of 1..MR-1 (a switch over every tail's kernel) */
  if (p->m_expr) cg_emit(o, "          switch (mr) {\n");
  for (int pass = 0; pass < (p->m_expr ? t->mr : 2); pass++) {
    int mrv = p->m_expr ? t->mr - pass : pass == 0 ? t->mr : mt;
    if (pass == 1 && mt == 0 && !p->m_expr) break;
    if (p->m_expr) cg_emit(o, pass + 1 < t->mr ? "          case %d: {\n" : "          default: {\n", mrv);
    else if (mt) cg_emit(o, pass == 0 ? "          if (mr == %d) {\n" : "          else {\n", t->mr);
    if (p->rt && t->nv > 1) { /* this run's column tail: any of 1..nv vectors */
      cg_emit(o, "            switch ((nr + %d) / %d) {\n", w - 1, w);
      for (int v = 1; v <= t->nv; v++) {
        cg_emit(o, v < t->nv ? "            case %d: " : "            default: ", v);
        emit_call(o, mrv, v);
        cg_emit(o, " break;\n");
      }
      cg_emit(o, "            }\n");
    } else if (nvt != t->nv) {
      cg_emit(o, "            if (nr > %d) ", nvt * w);
      emit_call(o, mrv, t->nv);
      cg_emit(o, "\n            else ");
      emit_call(o, mrv, nvt);
      cg_emit(o, "\n");
    } else {
      cg_emit(o, "            ");
      emit_call(o, mrv, t->nv);
      cg_emit(o, "\n");
    }
    if (p->m_expr) cg_emit(o, "            break;\n          }\n");
    else if (mt) cg_emit(o, "          }\n");
  }
  if (p->m_expr) cg_emit(o, "          }\n");
  cg_emit(o, "        }\n      }\n      }\n    }\n  }\n%s}\n", o->amx ? "  $P_pflush(&pd);\n  _tile_release();\n" : "");
}

/* The depth K, its block KC, A's row stride and the number of blocks
 * travel in the context rather than as constants of packA and the task:
 * kernels that differ only in K (DenseNet's 1x1 convs) then have the same
 * text there, which the model's emitter compiles once (kitems.c); they are
 * loop bounds and a stride, read once a task. */
static void emit_depth(cg_out *o, const cg_mm *p, const cg_tile *t) {
  if (p->k_expr) { /* this run's K (at most the upper corner's), A's row stride */
    cg_emit(o, "  cx.K = %s;\n  if (cx.K < 1 || cx.K > %ldL) return -1;\n", p->k_expr, (long)p->K);
    cg_emit(o, "  cx.kc = %dL; cx.lda = cx.K; cx.nkb = (cx.K + %dL) / %dL;\n", t->kc, t->kc - 1, t->kc);
    return;
  }
  cg_emit(o, "  cx.K = %ldL; cx.kc = %dL; cx.lda = %ldL; cx.nkb = %ldL;\n", (long)p->K, t->kc, (long)p->a_sm, (long)t->nkb);
}

/* M read at run time, an upper corner that split along M alone (t->sn 1):
 * cg_mm_resolve_tile's choice between splitting M and N made again at this run's
 * M (its work per thread of either split), so that a few rows (7 of an
 * upper corner's 512: a task of 6 rows and one of 1) split along N as a
 * specialised object of that M would; then the rows are one task. */
static void emit_cols_split(cg_out *o, const cg_mm *p, const cg_tile *t) {
  const cgen_tuning *u = &p->tune;
  int64_t threads = u->threads > 0 ? u->threads : 2, need = u->tasks > 0 ? u->tasks : threads;
  int64_t ncol = (p->N + t->nr - 1) / t->nr;
  bool pm = u->par_m || !u->par_n, pn = u->par_n || !u->par_m;
  if (t->sn != 1 || need < 2 || ncol < 2 || !pm || !pn) return;
  int64_t cn = need < ncol ? need : ncol, tn = cg_rup((p->N + cn - 1) / cn, t->nr), sn = (p->N + tn - 1) / tn;
  double pack = p->prepack_b ? 0 : 16, wn = (double)((sn + threads - 1) / threads) * (double)(tn < p->N ? tn : p->N);
  cg_emit(o, "  if (cx.M <= %ldL) { /* M or N: resolve_tile's choice at this M */\n", (long)p->N);
  cg_emit(o, "    long cm = nrow < %ldL ? nrow : %ldL, tm = ((cx.M + cm - 1) / cm + %d) / %d * %d;\n", (long)need, (long)need,
          t->mr - 1, t->mr, t->mr);
  cg_emit(o, "    double wm = (double)(((cx.M + tm - 1) / tm + %ldL) / %ldL) * %ldL * ((tm < cx.M ? tm : cx.M) + %.1f);\n",
          (long)threads - 1, (long)threads, (long)cg_rup(p->N, o->isa->w), pack);
  cg_emit(o, "    double wn = %.1f * (nrow * %d + %.1f);\n", wn, t->mr, pack);
  cg_emit(o, "    if (nrow < 2 || !(wm < wn)) { cx.sm = 1; cx.tm = nrow * %d; cx.sn = %ldL; cx.tn = %ldL; }\n  }\n", t->mr, (long)sn,
          (long)tn);
}

/* M read at run time (p->m_expr, in 1..p->M): this run's rows, their split
 * into tasks (at most the upper corner's t->sm, whole MR panels each) and
 * the A packer's panels per task group (t->groups groups). */
static void emit_rows_split(cg_out *o, const cg_mm *p, const cg_tile *t) {
  cg_emit(o, "  cx.M = %s;\n  if (cx.M < 1 || cx.M > %ldL) return -1;\n", p->m_expr, (long)p->M);
  cg_emit(o, "  long nrow = (cx.M + %d) / %d;\n  cx.sm = nrow < %ldL ? nrow : %ldL;\n", t->mr - 1, t->mr, (long)t->sm,
          (long)t->sm);
  /* rows a panel: as even as the panels allow (7 rows: 4 + 3, not 6 and a
   * 1-row tail, which streams B again at a quarter of the FMAs); MR where
   * the rows span several MC blocks (their step stays whole panels) */
  cg_emit(o, "  cx.pr = cx.M <= %ldL ? (cx.M + nrow - 1) / nrow : %d;\n", (long)t->mc, t->mr);
  cg_emit(o, "  cx.tm = ((cx.M + cx.sm - 1) / cx.sm + cx.pr - 1) / cx.pr * cx.pr;\n  cx.sm = (cx.M + cx.tm - 1) / cx.tm;\n");
  cg_emit(o, "  cx.ppg = (nrow + %ldL) / %ldL;\n", (long)t->groups - 1, (long)t->groups);
  cg_emit(o, "  cx.sn = %ldL; cx.tn = %ldL;\n", (long)t->sn, (long)t->tn);
  emit_cols_split(o, p, t);
}

/* The batch nb[0] read at run time (p->b0_expr, in 1..p->nb[0]): this
 * run's batches and the task split that split_tasks gives for them, from a
 * table over the batch counts where it splits (up to 4 rounds per thread;
 * past the table, whole batches: its last row). */
static void emit_batch_split(cg_out *o, const cg_mm *p, const cg_tile *t) {
  int64_t target = cg_split_target(&p->tune);
  int64_t rows = (4 * target + p->nb[1] - 1) / p->nb[1];
  if (rows > p->nb[0]) rows = p->nb[0];
  cg_emit(o, "  cx.nb0 = %s;\n  if (cx.nb0 < 1 || cx.nb0 > %ldL) return -1;\n", p->b0_expr, (long)p->nb[0]);
  cg_emit(o, "  static const long split[%ld][4] = {", (long)rows);
  for (int64_t b = 1; b <= rows; b++) {
    int64_t sm, sn;
    split_tasks(p, t, o->isa, b * p->nb[1], &sm, &sn);
    int64_t tm = cg_rup((p->M + sm - 1) / sm, t->mr), tn = cg_rup((p->N + sn - 1) / sn, t->nr);
    cg_emit(o, "%s{%ld, %ld, %ld, %ld}", b > 1 ? ", " : "", (long)tm, (long)((p->M + tm - 1) / tm), (long)tn,
            (long)((p->N + tn - 1) / tn));
  }
  cg_emit(o, "};\n  const long *sp = split[(cx.nb0 < %ldL ? cx.nb0 : %ldL) - 1];\n", (long)rows, (long)rows);
  cg_emit(o, "  cx.tm = sp[0]; cx.sm = sp[1]; cx.tn = sp[2]; cx.sn = sp[3];\n");
}

/* A prepacked B's packer: KC blocks x groups of panels, one task each
 * ($P_packBall_task), its size and the entry model_init calls. */
static void emit_pack_b_run(cg_out *o, const cg_mm *p, const cg_tile *t) {
  /* B arrives packed: KC blocks x groups of panels, one task each */
  int64_t npan = cg_npanels(p, t), ppt = (npan + 7) / 8, ng = (npan + ppt - 1) / ppt;
  cg_emit(o, "static $T void $P_packBall_task(void *vc, int task, int tid) {\n  (void)tid;\n");
  cg_emit(o, "  const $F_ctx *cx = (const $F_ctx *)vc;\n");
  cg_emit(o, "  long pb = task / %ldL, j0 = task %% %ldL * %ldL, j1 = j0 + %ldL < %ldL ? j0 + %ldL : %ldL;\n", (long)ng,
          (long)ng, (long)ppt, (long)ppt, (long)npan, (long)ppt, (long)npan);
  cg_emit(o, "  long pc = pb * %dL, kc = %ldL - pc < %dL ? %ldL - pc : %dL, n1 = j1 * %d < %ldL ? j1 * %d : %ldL;\n",
          t->kc, (long)p->K, t->kc, (long)p->K, t->kc, t->nr, (long)p->N, t->nr, (long)p->N);
  cg_emit(o, "  $P_packB(cx, 0, 0, pc, kc, j0 * %d, n1 - j0 * %d, cx->Ap + pb * %ldL + j0 * kc * %d);\n", t->nr, t->nr,
          (long)t->kc * npan * t->nr, t->nr);
  if (cg_mm_use_bfcv(p, o) && !cg_mm_b_pairs(p, o))
    cg_emit(o, "  for (long j = j0; j < j1; j++) $P_bfcv(cx->Ap + pb * %ldL + j * kc * %d, kc, %d);\n",
            (long)t->kc * npan * t->nr, t->nr, t->nr);
  cg_emit(o, "}\n");
  cg_emit(o, "static $T long $P_pack_b_bytes_run(void) { return %ldL; }\n", (long)(p->K * npan * t->nr * 4));
  cg_emit(o, "static $T int $P_pack_b_run(hprt_pool *pool, const void *B, void *Bp) {\n");
  cg_emit(o, "  $F_ctx cx;\n  memset(&cx, 0, sizeof cx);\n  cx.B = B; cx.Ap = (float *)Bp;\n");
  cg_emit(o, "  hprt_pool_run(pool, %ld, $P_packBall_task, &cx);\n  return 0;\n}\n", (long)(t->nkb * ng));
}

/* Emits the B packer of GEMM / conv p with tile t, and returns the words
 * of the input widened into fp32 scratch first (0: none). */
static int64_t emit_b_packer(cg_out *o, const cg_mm *p, const cg_tile *t) {
  /* a half-precision conv input is widened into fp32 scratch first (one
   * vector pass), so that the packer takes the fp32 row runs or gathers:
   * with a scalar load and conversion per element, fp16 1x1 s2 256->512
   * 56->28 took 1.75 ms, now 1.21 (fp32 0.96) */
  int64_t xn = p->conv && (p->bdt != TINY_FP32 || p->pairs) && o->isa->id != CGEN_ISA_SCALAR && !p->rt
                   ? p->nb[0] * p->cv_c * p->cv_h * p->cv_w
                   : 0; /* pairs: the interleaved input's words; sizes at run time: the packer converts */
  cg_mm pf = *p;
  if (xn) pf.bdt = TINY_FP32;
  /* a 1x1 window with stride 1 and no padding reads x[c][p] for pixel p:
   * the B panel is rows of the input, copied as a GEMM's B (the 1x1 convs
   * that contract_c.c runs on this template for the direct kernel's sake) */
  bool plain = p->conv && p->cv_kh == 1 && p->cv_kw == 1 && p->cv_sh == 1 && p->cv_sw == 1 && p->cv_pt == 0 &&
               p->cv_pl == 0 && p->cv_ow == p->cv_w && p->N == p->cv_h * p->cv_w;
  if (plain) {
    pf.b_sb[0] = p->cv_c * p->N, pf.b_sb[1] = p->cv_icg * p->N, pf.b_sk = p->N, pf.b_sn = 1;
    cg_emit_pack_b_gemm(o, &pf, t);
  } else if (p->conv && p->cv_sw == 1 && pf.bdt == TINY_FP32 && o->isa->id == CGEN_ISA_AVX512 && !p->tune.conv_gather)
    cg_emit_pack_b_conv_rows(o, &pf, t);
  else if (p->conv) cg_emit_pack_b_conv(o, &pf, t);
  else cg_emit_pack_b_gemm(o, p, t);
  return xn;
}

/* Emits P_pack_a_run / P_pack_a_bytes_run: A (constant weights) packed once,
 * at init, by npack packer tasks into shared bytes. */
static void emit_pack_a_run(cg_out *o, const cg_mm *p, const cg_tile *t, long npack, int64_t shared) {
  /* A arrives packed (constant weights packed once by F_pack_a) */
  cg_emit(o, "static $T long $P_pack_a_bytes_run(void) { return %ldL; }\n", (long)shared);
  cg_emit(o, "static $T int $P_pack_a_run(hprt_pool *pool, const void *A, void *Ap) {\n");
  cg_emit(o, "  $F_ctx cx;\n  memset(&cx, 0, sizeof cx);\n  cx.A = A; cx.Ap = (float *)Ap;\n");
  if (p->pairs) /* the weight as channel pairs first (init time) */
    cg_emit(o, "  uint32_t *w2 = (uint32_t *)malloc(%ldUL);\n  if (!w2) return -1;\n  $P_wpairs(A, w2);\n  cx.A = w2;\n",
            (long)(p->nb[1] * p->M * p->K * 4));
  emit_depth(o, p, t);
  cg_emit(o, "  hprt_pool_run(pool, %ld, $P_packA_task, &cx);\n%s  return 0;\n}\n", npack, p->pairs ? "  free(w2);\n" : "");
}

/* The ISA variant of p with blocking t (o's ISA): row stores, micro-kernels,
 * packers, the task, the packing entries (prepack_a / prepack_b) and $P_run. */
void cg_mm_emit_variant(cg_out *o, const cg_mm *p, const cg_tile *t) {
  int w = o->isa->w;
  cg_emit_isa_helpers(o);
  int mt = (int)(p->M % t->mr), nrt = (int)(p->N % t->nr);
  int nvt = nrt ? (nrt + w - 1) / w : t->nv;
  cg_mm_emit_row(o, p, t, t->nv);
  for (int v = t->nv - 1; p->rt && v >= 1; v--) cg_mm_emit_row(o, p, t, v); /* every column tail */
  if (nvt != t->nv && !p->rt) cg_mm_emit_row(o, p, t, nvt);
  if (cg_mm_use_bfcv(p, o)) cg_emit_bf16_cvt(o);
  if (o->amx) cg_emit_amx_pend(o);
  int mrs[2] = {t->mr, mt}, nvs[2] = {t->nv, nvt};
  for (int a = 0; a < (p->m_expr ? t->mr : 2); a++) { /* M at run time: every row tail */
    if (a == 1 && mt == 0 && !p->m_expr) break;
    for (int b = 0; b < (p->rt ? t->nv : 2); b++) { /* N at run time: every column tail */
      if (b == 1 && nvt == t->nv && !p->rt) break;
      emit_kernel(o, p, t, p->m_expr ? t->mr - a : mrs[a], p->rt ? t->nv - b : nvs[b]);
    }
  }
  if (o->amx && cg_amx_a_direct(p)) {
    cg_emit_amx_pack_a_direct(o, p, t);
  } else {
    cg_emit_pack_a(o, p, t);
    if (o->amx) cg_emit_amx_pack_a(o, t->groups, t->ppg * t->mr, t->mp, t->kc, p->pairs);
  }
  if (o->amx) cg_emit_amx_tilecfg(o);
  if (cg_bt_transposes(p, o->isa, t)) cg_emit_tr16(o);
  int64_t xn = emit_b_packer(o, p, t);
  emit_task(o, p, t);
  if (p->pairs) {
    if (p->sub.sh) cg_emit_bf16_ilv_sub(o, "$F_ctx", p->bf_bdt, p->bf_icg, &p->sub);
    else cg_emit_bf16_ilv(o, "$F_ctx", p->bf_bdt, p->nb[0] * p->nb[1] * p->cv_icg, p->bf_icg, p->cv_h * p->cv_w);
    cg_emit_bf16_wpairs(o, p->bf_adt, p->nb[1] * p->M, p->bf_icg, p->cv_kh * p->cv_kw);
  } else if (xn) {
    cg_emit_widen(o, "$F_ctx", "cx->X", "cx->B", p->bdt, (long)xn);
  }
  int64_t shared = t->nba[0] * t->nba[1] * p->K * t->mp * 4;
  int64_t per_thread = ((p->prepack_b ? 0 : (int64_t)t->kc * t->ncp) + (t->ws ? t->tm * t->ncp : 0)) * 4;
  long npack = (long)(t->nba[0] * t->nba[1] * t->nkb * t->groups), ntask = (long)(p->nb[0] * p->nb[1] * t->sm * t->sn);
  if (p->prepack_a) emit_pack_a_run(o, p, t, npack, shared), shared = 0;
  if (p->prepack_b) emit_pack_b_run(o, p, t);
  int64_t xoff = (shared + 63) / 64 * 64; /* the widened input after packed A */
  int64_t aoff = (xoff + xn * 4 + 63) / 64 * 64; /* pairs, A not prepacked: the paired weight */
  int64_t wbytes = p->pairs && !p->prepack_a ? p->nb[1] * p->M * p->K * 4 : 0;
  int64_t used = wbytes ? aoff + wbytes : xn ? xoff + xn * 4 : shared;
  cg_splitk sk = {0};
  if (p->full) { /* split-K: the slices' partials last, and their sum */
    sk = cg_splitk_grid(p->full, (used + 63) / 64 * 16);
    cg_emit_splitk_sum(o, p->full, &sk);
    used = (sk.off + cg_splitk_floats(p, sk.S)) * 4;
  }
  if (p->rt) cg_emit(o, "static inline long $P_split_need(long nbat, long target) %s\n", CG_SPLIT_NEED_TEXT);
  cg_emit(o, "static $T int $P_run(hprt_pool *pool, const void *A, const void *B, void *C, const void *const *ep) {\n");
  cg_emit(o, "  $F_ctx cx;\n  cx.A = A; cx.B = B; cx.C = C; cx.ep = ep;\n");
  emit_depth(o, p, t);
  char rtask[96] = "";
  if (p->rt) cg_rt_run_sizes(o, p, t, rtask, sizeof rtask);
  if (p->m_expr) emit_rows_split(o, p, t);
  if (p->b0_expr) emit_batch_split(o, p, t);
  cg_emit(o, "  if (hprt_scratch_get(pool, %ldUL, %ldUL, &cx.sc)) return -1;\n", (long)used, (long)per_thread);
  if (xn) {
    cg_emit(o, "  cx.X = B; cx.B = cx.sc.shared + %ldL;\n", (long)xoff);
    if (p->pairs) cg_emit(o, "  hprt_pool_run(pool, %ld, $P_ilv, &cx);\n", (long)(p->nb[0] * p->cv_c));
    else cg_emit(o, "  hprt_pool_run(pool, %ld, $P_widen, &cx);\n", (long)((xn + CG_WIDEN_CHUNK - 1) / CG_WIDEN_CHUNK));
  }
  if (wbytes)
    cg_emit(o, "  { uint32_t *w2 = (uint32_t *)(cx.sc.shared + %ldL); $P_wpairs(A, w2); cx.A = w2; }\n", (long)aoff);
  if (p->m_small > 1)
    cg_emit(o, "  if (cx.M < %ldL) pool = NULL; /* small at this binding: the calling thread alone */\n", (long)p->m_small);
  if (p->prepack_a) {
    cg_emit(o, "  cx.Ap = (float *)A;\n");
  } else {
    cg_emit(o, "  cx.Ap = (float *)cx.sc.shared;\n");
    if (p->b0_expr && t->nba[0] > 1) /* this run's batches of A (the packer's outermost index) */
      cg_emit(o, "  hprt_pool_run(pool, (int)(cx.nb0 * %ldL), $P_packA_task, &cx);\n", npack / t->nba[0]);
    else cg_emit(o, "  hprt_pool_run(pool, %ld, $P_packA_task, &cx);\n", npack);
  }
  if (p->rt) cg_emit(o, "  hprt_pool_run(pool, %s, $P_task, &cx);\n", rtask);
  else if (p->m_expr) cg_emit(o, "  hprt_pool_run(pool, (int)(cx.sm * cx.sn), $P_task, &cx);\n");
  else if (p->b0_expr) cg_emit(o, "  hprt_pool_run(pool, (int)(cx.nb0 * %ldL * cx.sm * cx.sn), $P_task, &cx);\n", (long)p->nb[1]);
  else if (p->full) cg_emit_splitk_run(o, p->full, ntask, &sk);
  else cg_emit(o, "  hprt_pool_run(pool, %ld, $P_task, &cx);\n", ntask);
  cg_emit(o, "  hprt_scratch_put(&cx.sc);\n  return 0;\n}\n");
  if (o->isa->id != CGEN_ISA_SCALAR) cg_emit(o, "#endif /* HPRT_X86 */\n");
}
