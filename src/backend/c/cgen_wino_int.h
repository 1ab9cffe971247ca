/* cgen_wino_int.h — what the Winograd generators share.
 * Needs: cgen_int.h.  Gives: cg_wn (the plan of one Winograd conv: tile,
 * transform matrices, blocking, vector width), the emitters both ISAs use
 * (cgen_wino.c: linear combinations, the column transform's store, the
 * output transform's columns, the epilogue) and the AVX2 pieces of the
 * input and output transforms (cgen_wino_avx2.c). */
#ifndef HARP_CGEN_WINO_INT_H
#define HARP_CGEN_WINO_INT_H

#include "backend/c/cgen_int.h"

typedef struct cg_wn {
  const cgen_conv_spec *s;
  int m, a, T;                 /* output tile, patch side, transformed points */
  int64_t OH, OW, TH, TW, NTI; /* output size, tiles per column / row / image */
  int vw;                      /* lanes per vector: 16 (AVX-512) or 8 (AVX2) */
  const char *vt, *vp;         /* the vector type ("__m512") and intrinsics' prefix ("_mm512") */
  int nv, nbt, mr;             /* vectors of tiles per block, tiles per block, channels per block */
  int64_t nblk, nob, ocp, nos; /* tile blocks per image, channel blocks, padded channels, channel parts */
  bool rows;                   /* a vector is 16 tiles of one tile row (else any vw of the image; AVX-512 only) */
  int64_t nseg, nvec;          /* rows: vectors per tile row, per image */
  const double *bt, *g, *at;   /* [a][a], [a][3], [m][a] */
  bool rt;                     /* sizes read at run time: the image's sizes, tiles and blocks, the channel
                                  parts from g (the run's $P_wg, a parameter of each emitted function);
                                  OH .. NTI, nblk, nos and nseg, nvec are then the upper corner's */
} cg_wn;

/* "dst = sum_k row[k] in_k;" over n inputs named fmt % k, the coefficients
 * folded in (0 skipped, +-1 as add / sub), in d's vectors. */
void cg_wn_lin(cg_out *o, const cg_wn *d, const char *dst, const double *row, int n, const char *fmt);
/* The column transform of the row-transformed points e[r][j] of the vw
 * tiles of vector v, stored into V[t][c][NBT]. */
void cg_wn_vstore(cg_out *o, const cg_wn *d);
/* The T points of row r of M for vector v into q[], and A^T q down the
 * columns into sm[m][A]. */
void cg_wn_ocols(cg_out *o, const cg_wn *d);

/* The epilogue on x (output channel oc's points of a vector): bias,
 * activations, and each residual gathered from its plane at the indices oi
 * under the mask (AVX-512: __mmask16 k; AVX2: the bits b, $P_wbm). */
void cg_wn_epilogue(cg_out *o, const cg_wn *d);

/* AVX2 (cgen_wino_avx2.c): $P_wbm, the mask of a lane bitset (emitted once,
 * before the input transform); "d[k] =" point (r, k) of vector v's 8 tiles
 * by a masked gather from plane x; output point (i, j) of vector v, x after
 * A^T M A: the epilogue, then the lanes stored one by one into y (AVX2 has
 * no scatter), closing the point's block. */
void cg_wn_avx2_helpers(cg_out *o);
void cg_wn_gather_avx2(cg_out *o, const cg_wn *d, int r, int k);
void cg_wn_opoint_avx2(cg_out *o, const cg_wn *d, int i, int j);

/* The AVX-512 or AVX2 (o->isa) Winograd F(m x m, 3x3) of conv s (its
 * n_expr / h_expr / w_expr set: sizes at run time; cgen_wino_rt.c's
 * dispatcher picks it per binding) in row mode (rows; AVX-512 only) or
 * gather mode, prefixed o->P: $P_run and,
 * with prepack_w, $P_pack_a_bytes_run / $P_pack_a_run; its channel blocks
 * into *mr. */
void cg_wino_rt_variant(cg_out *o, const cgen_conv_spec *s, int m, bool rows, int *mr);

#endif
