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
  int64_t s_mn, s_k; /* element strides (dense operands) */
  bool conv;
  cuda_conv_geom cv;
} cuda_mma_opnd;

typedef struct cuda_mma_prob {
  const char *kind;
  const char *pname[3]; /* parameter names of A, B, C */
  int64_t M, N, K, nz;  /* nz = grid.z (batch) */
  tiny_dtype ab_dtype, c_dtype;
  cuda_mma_opnd A, B;
  int64_t c_sm, c_sn;
  int64_t c_ss;                       /* split-K REDUCE: elements between the slices' partials */
  int c_zmul;                         /* largest of 8/2/1 dividing every batch offset of C */
  const char *a_base, *b_base, *c_base; /* element offsets of batch bz (C text in bz) */
  int n_epi;
  cuda_epi epi[CUDA_MAX_EPI];
  const char *epi_ptr[CUDA_MAX_EPI]; /* tensor pointer per epilogue op (batch applied), or NULL */
  cuda_tune tune;                    /* filled: every tile field set */
} cuda_mma_prob;

hp_status cuda_mma_emit(hp_error *e, cuda_module *m, const cuda_mma_prob *p, const char *name);
void cuda_tune_fill_mma(cuda_tune *t, int64_t M, int64_t N, tiny_dtype c_dtype);
/* Largest chunk (8, 4 or 2 elements) all the strides are multiples of; 0 if none. */
int cuda_chunk_elems(int64_t s_mn, const int64_t *sb, int nsb);
/* Byte offset of element (r, c) in a swizzled SMEM tile with `cols` contiguous 16-bit columns. */
const char *cuda_swz_off(cuda_b *b, int cols, bool no_swizzle, const char *r, const char *c);
bool cuda_swz_cols_ok(int cols);
int64_t cuda_smem_max(cuda_arch a);
/* Split-K kinds' demands on C and the epilogue (cuda_gen_gemm, both templates). */
hp_status cuda_splitk_check(hp_error *e, const cuda_gemm_spec *s, const char *name);

#endif
