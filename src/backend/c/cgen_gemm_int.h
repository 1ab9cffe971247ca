/* cgen_gemm_int.h — what the GEMM generator's files share: its driver
 * (cgen_gemm.c), the conv front end (cgen_conv.c), the template's variant
 * (cgen_gemm_variant.c), the skinny variant (cgen_skinny.c) and the
 * packers: the contraction they reduce to, the per-variant blocking, the
 * row store with its epilogue, the task setup.  Not public. */
#ifndef HARP_CGEN_GEMM_INT_H
#define HARP_CGEN_GEMM_INT_H

#include "backend/c/cgen_int.h"

/* The contraction every generator here reduces to. */
typedef struct cg_mm {
  int64_t nb[2], M, N, K;
  tiny_dtype adt, bdt, cdt;
  int64_t a_sb[2], a_sm, a_sk, b_sb[2], b_sk, b_sn, c_sb[2], c_sm, c_sn;
  int64_t bias_sb1; /* conv: bias offset per group */
  int n_epi;
  cgen_epi epi[CGEN_MAX_EPI];
  cgen_tuning tune;
  bool conv, prepack_a, prepack_b;
  const cgen_conv_spec *cs; /* conv: the spec; direct: its AVX-512 variant is cgen_dconv.c's */
  bool direct, wino; /* the AVX-512 variant is cgen_dconv.c's / cgen_wino.c's */
  int64_t cv_c, cv_h, cv_w, cv_icg, cv_kh, cv_kw, cv_sh, cv_sw, cv_pt, cv_pl, cv_dh, cv_dw, cv_ow;
  /* a conv's bf16 view (bf16_pairs): A, B and K count channel pairs, 32-bit
   * words of two bf16; the original weight and input dtypes and channels */
  bool pairs;
  bool amx; /* the AMX variant's view (cgen_amx.c): MR = NR = 32, no register budget */
  tiny_dtype bf_adt, bf_bdt;
  int64_t bf_c, bf_icg;
  cg_bf16_sub sub; /* pairs, sub.sh > 0: a strided 1x1 conv whose interleave keeps the pixels it reads
                      (cgen_gemm.c bf16_sub); cv_h, cv_w, cv_sh, cv_sw are then the view's */
  /* a ShapeSet object: M read at run time (cgen_gemm_spec.m_expr; M is then
   * the upper corner's, the tiles' and the scratch's), the tasks along M and
   * the packer's panels per task split at run time (ctx M, tm, sm, ppg) */
  const char *m_expr;
  int64_t m_small; /* cgen_gemm_spec.m_small */
  /* a ShapeSet object: batch nb[0] read at run time (cgen_gemm_spec.b0_expr;
   * nb[0] is then the upper corner's), the tasks' split per run (ctx nb0,
   * tm, sm, tn, sn from a table of cg_mm_resolve_tile's splits) */
  const char *b0_expr;
  /* a ShapeSet object's implicit-GEMM conv (cs->n_expr / h_expr / w_expr;
   * the AVX-512 variant is the direct kernel's run-time one): the other
   * variants read the batch, the input plane and so N, the pixels, at run
   * time into the context (nb0, h, w, oh, ow, N, and the split along N, tn
   * and sn), C's row stride into the store context (tt.ldc); nb[0], N and
   * cv_h, cv_w, cv_ow are the upper corner's, which size the tiles and the
   * scratch (cgen_gemm_rt.c) */
  bool rt;
  /* a ShapeSet object's GEMM whose N is read at run time
   * (cgen_gemm_spec.n_expr): rt set, cs NULL, the run's N from this
   * expression (cg_rt_run_sizes), C's and B's row strides cx->N */
  const char *n_expr;
  /* a GEMM whose depth K is read at run time (cgen_gemm_spec.k_expr): the
   * context's K, A's row stride lda and the KC blocks nkb from it
   * (emit_depth); K is the upper corner's, which picks KC */
  const char *k_expr;
  /* split-K's view of a conv (cg_splitk_view): the slices' fp32 partials as
   * C, no epilogue; full is the contraction their sum ends in */
  const struct cg_mm *full;
} cg_mm;

/* The task split's rule, spelled once: the tasks to cut nbat batches into
 * on target tasks a round (the threads): enough that the count is a
 * multiple of target (3 images on 2 threads: 6 halves, not 2 rounds for one
 * thread and 1 for the other); from 4 rounds per thread on, whole batches
 * (1).  Compiled here for split_tasks (cgen_gemm_variant.c) and emitted as
 * text, CG_SPLIT_NEED_TEXT, for a run that reads its batches and pixels at
 * run time (cg_rt_run_sizes), so that both split alike. */
#define CG_SPLIT_NEED_BODY                                                                                             \
  {                                                                                                                    \
    long a = nbat, b = target;                                                                                         \
    while (b) {                                                                                                        \
      long r = a % b;                                                                                                  \
      a = b, b = r;                                                                                                    \
    }                                                                                                                  \
    return nbat >= 4 * target ? 1 : target / a;                                                                        \
  }
static inline long cg_split_need(long nbat, long target) CG_SPLIT_NEED_BODY
#define CG_STR_(...) #__VA_ARGS__
#define CG_STR(...) CG_STR_(__VA_ARGS__)
#define CG_SPLIT_NEED_TEXT CG_STR(CG_SPLIT_NEED_BODY)

/* The tasks a round the split aims at: the tuning's tasks, else its threads
 * (2 when unset). */
static inline long cg_split_target(const cgen_tuning *u) {
  return u->tasks > 0 ? u->tasks : u->threads > 0 ? u->threads : 2;
}

/* Per-variant blocking, resolved from the tuning. */
typedef struct cg_tile {
  int mr, nr, nv, kc, nc, pf;
  int64_t mc, mp, ncp, nkb, tm, tn, sm, sn, nba[2], groups, ppg;
  bool direct, multi, ws, jr_outer;
  int order;
} cg_tile;

/* The driver (cgen_gemm.c): contraction p's kernel, named fn, appended to out. */
harp_status cg_mm_gen(harp_error *e, const cg_mm *p, const char *fn, ut_str *out);
/* The template's variant (cgen_gemm_variant.c): p's blocking on isa into *t
 * (primary: the tuning's micro-tile applies), and the variant itself. */
harp_status cg_mm_resolve_tile(harp_error *e, const cg_mm *p, const cg_isa *isa, bool primary, cg_tile *t);
void cg_mm_emit_variant(cg_out *o, const cg_mm *p, const cg_tile *t);

/* One row of nv vectors of C: the epilogue applied in registers, the store
 * in the output dtype (the micro-kernels' and the skinny variant's). */
void cg_mm_emit_row(cg_out *o, const cg_mm *p, const cg_tile *t, int nv);
/* The same row store named $P_<name><nv>. */
void cg_mm_emit_row_as(cg_out *o, const cg_mm *p, const cg_tile *t, int nv, const char *name);
/* The store context of batch (b0, b1): C and the epilogue tensors there. */
void cg_mm_tt_setup(cg_out *o, const cg_mm *p);
/* The skinny variant applies (at most 8 rows, vector ISA, plain operands). */
bool cg_skinny_ok(const cg_mm *p, const cg_isa *isa);
/* Split-K (tune.splitk > 1) is the skinny kernel's: its primary variant must be it. */
bool cg_skinny_splitk_ok(const cg_mm *p);
void cg_emit_skinny_variant(cg_out *o, const cg_mm *p);
/* bf16 with a prepacked weight B (cgen_skinny_bf16.c): the AVX-512 variant streams
 * B rounded to bf16 once, at init, and multiplies with vdpbf16ps. */
bool cg_skinny_bf16_ok(const cg_mm *p);
void cg_emit_skinny_bf16_variant(cg_out *o, const cg_mm *p);

/* Split-K's partials and their sum (cgen_splitk.c).  Slice s's fp32
 * partial of batch r (b0 * nb[1] + b1), row m, column n sits at
 * off + ((s * nbat + r) * M + m) * N + n floats into cx->sc.shared; the
 * pass $P_ksum adds the S partials in slice order over tiles of tm rows by
 * tn columns (sm x sn a batch) and applies the epilogue and the store of p. */
typedef struct cg_splitk {
  int S;
  int64_t sm, tm, sn, tn, off;
} cg_splitk;
void cg_emit_splitk_sum(cg_out *o, const cg_mm *p, const cg_splitk *k);
/* Floats of the S partials of p. */
int64_t cg_splitk_floats(const cg_mm *p, int S);
/* KC for S slices of whole KC blocks over K (at most kc0 deep); *nps: the
 * blocks a slice.  Returns 0 when K does not cut into S non-empty slices. */
int cg_splitk_kc(int64_t K, int kc0, int S, int64_t *nps);
/* The implicit-GEMM conv p seen by its slices (tune.splitk > 1): C the fp32
 * partials, no epilogue, tasks over the tiles a slice. */
void cg_splitk_view(const cg_mm *p, cg_mm *q);
/* The sum's grid for the conv p (its slices' partials at off floats into
 * the shared scratch), and the slices' tasks (ntask tiles a slice) and the
 * sum in its $P_run. */
cg_splitk cg_splitk_grid(const cg_mm *p, int64_t off);
void cg_emit_splitk_run(cg_out *o, const cg_mm *p, int64_t ntask, const cg_splitk *k);

/* A conv's sizes read at run time (p->rt; cgen_gemm_rt.c): a size's C text
 * into b (cap 48): `rt` where p->rt, else the constant v as "<v>L"; the
 * task's place (batch, rows, columns) from this run's split; the offset
 * of batch (b0, b1) of a tensor with batch strides s0, s1 (C's, a
 * residual's: multiples of this run's pixels where p->rt) into b (cap 96);
 * $P_run's sizes and split, and its task count as C text into ntask. */
const char *cg_rt_size(char *b, const cg_mm *p, int64_t v, const char *rt);
void cg_rt_task_range(cg_out *o, const cg_mm *p, const cg_tile *t);
const char *cg_rt_batch_off(char *b, const cg_mm *p, int64_t s0, int64_t s1);
void cg_rt_run_sizes(cg_out *o, const cg_mm *p, const cg_tile *t, char *ntask, size_t cap);

/* Does this variant multiply in bf16 (tune.bf16, AVX-512; cgen_bf16.c)?
 * And are its fp32 panels rewritten as pairs after packing (a GEMM; a
 * conv's view packs pairs already)? */
static inline bool cg_mm_use_bf16(const cg_mm *p, const cg_out *o) { return p->tune.bf16 && o->isa->id == CGEN_ISA_AVX512; }
static inline bool cg_mm_use_bfcv(const cg_mm *p, const cg_out *o) { return cg_mm_use_bf16(p, o) && !p->pairs; }
/* ... and is B (unit stride along N) packed as pairs straight away? */
static inline bool cg_mm_b_pairs(const cg_mm *p, const cg_out *o) { return cg_mm_use_bfcv(p, o) && !p->conv && p->b_sn == 1; }
/* ... and is A (bf16, unit stride along K) packed as pairs straight away? */
/* AMX (cgen_amx.c): whether p's A goes straight into the tile layout, and
 * that packer ($P_amxpk, $P_packA_task). */
bool cg_amx_a_direct(const cg_mm *p);
void cg_emit_amx_pack_a_direct(cg_out *o, const cg_mm *p, const cg_tile *t);
static inline bool cg_mm_a_pairs(const cg_mm *p, const cg_out *o) { return cg_mm_use_bfcv(p, o) && p->adt == TINY_BF16 && p->a_sk == 1; }

/* A bf16 stride-1 conv on AMX with its B tiles read in place from padded
 * channel-pair planes (cgen_amx_conv.c): whether the AMX view q gets it,
 * the columns of its padded-width grid (the N its tasks split), and the
 * variant, t resolved on q with that N. */
bool cg_amx_conv_inplace(const cg_mm *q);
int64_t cg_amx_conv_grid(const cg_mm *q);
void cg_emit_amx_conv_variant(cg_out *o, const cg_mm *q, const cg_tile *t);

/* The packers (cgen_gemm_pack.c): A's MR-row panels; a GEMM's B; a conv's B
 * gathered by rows / by points; whether B^T is read by 16x16 transposes. */
void cg_emit_pack_a(cg_out *o, const cg_mm *p, const cg_tile *t);
void cg_emit_pack_b_gemm(cg_out *o, const cg_mm *p, const cg_tile *t);
void cg_emit_pack_b_conv_rows(cg_out *o, const cg_mm *p, const cg_tile *t);
void cg_emit_pack_b_conv(cg_out *o, const cg_mm *p, const cg_tile *t);
bool cg_bt_transposes(const cg_mm *p, const cg_isa *isa, const cg_tile *t);

#endif
