/* cuda_int.h — internals shared by the CUDA generators: the MMA problem the
 * GEMM and conv front ends reduce to, SMEM swizzle helpers. */
#ifndef HARP_CUDA_INT_H
#define HARP_CUDA_INT_H

#include "backend/cuda/cuda.h"

/* Conv access map of the gathered operand (B = input, [K][N]). */
typedef struct cuda_conv_geom {
  int64_t h, w, kh, kw, oh, ow, sh, sw, pt, pl, dh, dw;
} cuda_conv_geom;

/* One operand of the MMA: how a (row of M or N, k) element is addressed and
 * how its tile is staged.  kmajor: the SMEM tile is contiguous along K
 * (A [BM][BK], B [BN][BK]); else along M/N (A [BK][BM], B [BK][BN]).
 * vec: elements per cp.async chunk (8, 4, 2 = 16, 8, 4 bytes); 0 = element
 * gather through registers (conv, or strides that break alignment). */
typedef struct cuda_mma_opnd {
  bool kmajor;
  int vec;
  int64_t s_mn, s_k; /* element strides (dense operands); read at run time: their literal factor */
  const char *s_mn_t, *s_k_t; /* a stride read at run time as C text (a ShapeSet build), else NULL */
  bool conv;
  cuda_conv_geom cv;
  const char *cv_h_t, *cv_w_t, *cv_ow_t; /* the input's h, w and the output's width read at run time (C text), else NULL */
} cuda_mma_opnd;

/* How the MMA template computes (from the operands' dtype and cuda_math).
 * The SMEM tiles hold the operands' storage: 16-bit for MMA16, fp32 else. */
typedef enum cuda_mmode {
  CUDA_MM_MMA16, /* fp16/bf16 tiles: ldmatrix [.trans] + mma m16n8k16 */
  CUDA_MM_TF32,  /* fp32 tiles: ldmatrix (K-major) or ld.shared.b32 (M/N-major), rounded to TF32, mma m16n8k8 .tf32 */
  CUDA_MM_CVT16, /* fp32 tiles: ld.shared, rounded to fp16/bf16 pairs (cvt), mma m16n8k16 */
  CUDA_MM_SIMT   /* fp32 tiles: 128-bit ld.shared + FFMA, 8x8 outputs per thread, warp tile 32x64 */
} cuda_mmode;

typedef struct cuda_mma_prob {
  const char *kind;
  const char *pname[3]; /* parameter names of A, B, C */
  int64_t M, N, K, nz;  /* nz = grid.z (batch) */
  tiny_dtype ab_dtype, c_dtype;
  cuda_mmode mode;      /* how it computes */
  tiny_dtype mma_dtype; /* MMA16 / CVT16: fp16 or bf16 (the instruction's) */
  cuda_mma_opnd A, B;
  int64_t c_sm, c_sn;                 /* read at run time: their literal factor (what divides them) */
  const char *c_sm_t, *c_sn_t;        /* C's strides read at run time as C text, else NULL */
  int64_t c_ss;                       /* split-K REDUCE: elements between the slices' partials */
  int c_zmul;                         /* largest of 8/2/1 dividing every batch offset of C */
  const char *a_base, *b_base, *c_base; /* element offsets of batch bz (C text in bz) */
  int n_epi;
  cuda_epi epi[CUDA_MAX_EPI];
  const char *epi_ptr[CUDA_MAX_EPI]; /* tensor pointer per epilogue op (batch applied), or NULL */
  const char *epi_st_t[CUDA_MAX_EPI][2]; /* a residual's s_m, s_n read at run time (C text), else NULL */
  cuda_tune tune;                    /* filled: every tile field set */
  const char *Mt, *Nt, *Kt;          /* M, N, K as C text when read at run time (cuda_gemm_spec.rt_*), else NULL */
  const char *NZt;                   /* the batches (grid.z) at run time: a CTA past them returns; else NULL */
  int nsyms;                         /* then the size parameters hp_sv0 .. */
  const cuda_gemm_spec *pair;        /* the SM80 kernel of a pair (cuda_gemm_spec.own): its spec, else NULL */
} cuda_mma_prob;

harp_status cuda_mma_emit(harp_error *e, cuda_module *m, const cuda_mma_prob *p, const char *name);
/* Split-K's finishing pass for problem p (`parts` partial sums in the
 * workspace, added in slice order), then p's Epilogue and stores. */
harp_status cuda_mma_emit_finish(harp_error *e, cuda_module *m, const cuda_mma_prob *p, int parts, const char *name);
/* A store statement of kind k to dst of the accumulator pair acc[2 * h],
 * acc[2 * h + 1] (acc: "acc[i][j]"), packed as the output dtype wants:
 * two halves in one word (osz 2: c_dtype bf16 or fp16) or two fp32 words;
 * its vector width (i[0]) set.  Shared by the SM80 and SM90 epilogues. */
cuda_stmt *cuda_store_acc_pair(cuda_b *b, cuda_stmt_kind k, const char *dst, const char *acc, tiny_dtype c_dtype, int osz);

/* The template's generator state (cuda_mma.c; the inner loops of each
 * cuda_mmode are in cuda_mma_math.c). */
typedef struct mma_gen {
  cuda_b b;
  cuda_kernel *k;
  const cuda_mma_prob *p;
  int BM, BN, BK, S, WM, WN, WARPS_M, WARPS_N, T, MF, NF, KT;
  int esz;        /* bytes per SMEM operand element: 2 (MMA16) or 4 */
  int splits;     /* split-K slices (1: none) */
  cuda_splitk sk; /* how they combine */
  const char *nkt; /* k tiles of this CTA (C text: a constant without split-K) */
  int a_rows, a_cols, b_rows, b_cols; /* SMEM tiles: rows x contiguous cols */
  int64_t a_bytes, b_bytes, stage_bytes;
  bool swz_off;
} mma_gen;

/* Byte offset, inside one stage's A or B tile, of tile element (r, c)
 * (row r, contiguous column c; C text): the tile's swizzle. */
const char *cuda_mm_tile_off(mma_gen *g, bool is_a, const char *r, const char *c);
/* Bytes of one stage's A or B tile (fp32 M/N-major rows are padded). */
int64_t cuda_mm_tile_bytes(const mma_gen *g, bool is_a);
/* false when the tiles' rows do not suit their swizzle. */
bool cuda_mm_tiles_ok(const mma_gen *g);
/* Declarations of the fragment / operand registers of the inner loop. */
void cuda_mm_decls(mma_gen *g);
/* The MMAs (or FFMAs) of one k tile on stage hk_st into acc[MF][NF][4]. */
void cuda_mm_inner(mma_gen *g);
/* Row (in the CTA tile) of accumulator element acc[i][j][2h + e] and the
 * column of its e = 0 element (e = 1: the next column); i, j, h: C text. */
const char *cuda_mm_row(mma_gen *g, const char *i, const char *h);
const char *cuda_mm_col(mma_gen *g, const char *j);
void cuda_tune_fill_mma(cuda_tune *t, int64_t M, int64_t N, tiny_dtype c_dtype, cuda_mmode mode);
/* Largest chunk (8, 4 or 2 elements) all the strides are multiples of; 0 if none. */
int cuda_chunk_elems(int64_t s_mn, const int64_t *sb, int nsb);
/* The same for esz-byte elements: the widest of 16/8/4 bytes, in elements; 0 if none. */
int cuda_chunk_elems_esz(int64_t s_mn, const int64_t *sb, int nsb, int esz);
/* Byte offset of element (r, c) in a swizzled SMEM tile with `cols` contiguous 16-bit columns. */
const char *cuda_swz_off(cuda_b *b, int cols, bool no_swizzle, const char *r, const char *c);
bool cuda_swz_cols_ok(int cols);
/* The same for a tile of `cols` fp32 columns: a K-major one read as twice
 * as many 16-bit columns; an M/N-major one (read per element by the TF32
 * fragments, 4 rows x 8 columns a load) with rows padded by 32 bytes. */
const char *cuda_swz_off32(cuda_b *b, int cols, bool kmajor, bool no_swizzle, const char *r, const char *c);
/* Bytes per row of such an fp32 tile. */
int cuda_pitch32(int cols, bool kmajor, bool no_swizzle);
/* The checks of conv spec s in module m (arch, sizes, padding, groups,
 * dtypes, epilogue, limits); *oh, *ow its output size. */
harp_status cuda_conv_checks(harp_error *e, cuda_module *m, const cuda_conv_spec *s, const char *name, int64_t *oh,
                             int64_t *ow);
/* Parameters ep0.. of epilogue ops epi[0..n) (a bias or residual: its
 * tensor's dtype; any other op: an unused float pointer). */
void cuda_epi_params(cuda_b *b, cuda_kernel *k, const cuda_epi *epi, int n);
/* Give Epilogue statement ep the ops epi[0..n), op i reading the tensor at
 * ptr[i] (C text; NULL: none), copied into b's arena. */
void cuda_epi_attach(cuda_b *b, cuda_stmt *ep, const cuda_epi *epi, const char *const *ptr, int n);
/* Split-K kinds' demands on C and the epilogue (cuda_gen_gemm, both templates). */
harp_status cuda_splitk_check(harp_error *e, const cuda_gemm_spec *s, const char *name);

/* Size z as C text (hp_sv<i> * .. * lit), or NULL when it is a constant
 * (cuda_front.c; the GEMM, conv and attention templates). */
const char *cuda_rtsz_text(cuda_b *b, const cuda_rtsz *z);
/* One kernel of a pair (cuda_wgmma_rt.c): k->own from spec s (nothing when
 * s->own is 0) and, first in its body, the return at a binding it does
 * not serve; false when out of memory. */
bool cuda_own_guard(cuda_b *b, cuda_kernel *k, const cuda_gemm_spec *s);

#endif
