/* cgen_wino_int.h — what the Winograd generators share.
 * Needs: cgen_int.h.  Gives: cg_wn (the plan of one Winograd conv: tile,
 * transform matrices, blocking, vector width), the emitters both ISAs use
 * (cgen_wino.c: linear combinations, the column transform's store, the
 * output transform's columns, the gather indices) and the AVX2 input and
 * output transforms (cgen_wino_avx2.c). */
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

/* The AVX2 variant's input transform ($P_itrans: masked gathers) and output
 * transform with the epilogue ($P_otrans: stores lane by lane), same
 * signatures as the AVX-512 ones with vectors of 8 tiles. */
void cg_wn_itrans_avx2(cg_out *o, const cg_wn *d);
void cg_wn_otrans_avx2(cg_out *o, const cg_wn *d);

#endif
