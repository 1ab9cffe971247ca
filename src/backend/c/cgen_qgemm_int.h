/* cgen_qgemm_int.h — what the int8 GEMM's generator (cgen_qgemm.c) shares
 * with its AMX-INT8 variant (cgen_qamx.c) and its AVX2 tile
 * (cgen_qgemm_avx2.c): the sizes of one GEMM, the requantizing epilogue of
 * a tile, the AMX pieces, the AVX2 tile.
 * Needs: cgen_int.h, cgen_qgemm.h.  Gives: qg_dims, cg_qg_dims,
 * cg_qg_tail_nv, cg_qg_col_bytes, cg_qg_emit_epilogue, cg_qg_post_params, cg_qg_emit_post
 * (cgen_qgemm.c); cg_qamx_pays,
 * cg_qamx_on, cg_qamx_wwords, cg_qamx_emit (cgen_qamx.c);
 * cg_qg2_emit_tile (cgen_qgemm_avx2.c); cg_qg_emit_pad, cg_qg_emit_phase,
 * cg_qg_emit_bpack (cgen_qgemm_b.c). */
#ifndef HARP_CGEN_QGEMM_INT_H
#define HARP_CGEN_QGEMM_INT_H

#include "backend/c/cgen_int.h"
#include "backend/c/cgen_qgemm.h"

#define QG_MR 6
#define QG_NV 4
#define QG_NR (16 * QG_NV)
#define QG_ATTR "__attribute__((target(\"avx512f,avx512bw,avx512vl,avx512dq,avx512vnni\")))"
#define QG_ATTR2 "__attribute__((target(\"avx2,fma\")))" /* the AVX2 variant: no AVX-512 instruction */

/* The sizes every emitted function shares. */
typedef struct qg_dims {
  long M, N, K, K4, MB, NB; /* blocks of A (MR rows) and of B (NR rows) */
  bool cd;                   /* a stride-1 conv read in place (the padded-width grid) */
  bool ci;                   /* a stride-1 conv as wide as its image (OW = W): B's blocks read from x
                                itself, masked loads, the output's own grid (cgen_qgemm.c's
                                emit_inplace), no padded copy */
  bool pg;                   /* a strided conv of few channels that ps does not take: B's blocks gathered from the padded image
                                ($F_pad into col), no im2col (cgen_qgemm.c's emit_gather) */
  bool ps;                   /* a strided conv whose output rows are as wide as its image's phase
                                planes (OW = ceil(W / sw), every phase read): the image split into
                                sh sw phase planes per channel ($F_phs into col), B's blocks read
                                from them as ci's from x (emit_inplace), no im2col */
  long NT, Hp, Wp, OW;       /* the tiles' columns (N, or OH Wp), the padded image, OW */
  long Hs, Ws;               /* ps: a phase plane's rows ceil(H / sh) and columns ceil(W / sw) */
  long wrows, wblk, wblocks; /* the weight's rows (channels), block width, blocks */
  long chpad;                /* channels padded to the blocks */
  bool amx;                  /* an AMX variant is emitted (cg_qamx_on) */
  long wwords;               /* words of the packed weight before c0: the VNNI blocks or,
                                where the AMX variant runs, its panels (the larger) */
} qg_dims;

qg_dims cg_qg_dims(const cgen_qgemm_spec *s);
/* Vectors of 16 columns in the last block of B (QG_NV when it is full). */
int cg_qg_tail_nv(const qg_dims *d);
/* Bytes of the conv's image built per call (the padded copy, the phase
 * planes or the im2col) in the shared scratch; 0 when B is read from x. */
long cg_qg_col_bytes(const cgen_qgemm_spec *s, const qg_dims *d);
/* The requantizing epilogue of one VNNI-shaped tile: the int32 sums in
 * __m512i cI_J (I < QG_MR rows from m0, J < nv vectors from column n0),
 * c0 and mu (the packed weight's), y; rows from mlim on (an expression of
 * the emitted function) are not stored. */
void cg_qg_emit_epilogue(cg_out *o, const cgen_qgemm_spec *s, const qg_dims *d, int nv, const char *mlim);
/* The post hook's parameters of $F and the variants' $P_run (cgen_qgemm.h's
 * spec.post): "" without it. */
const char *cg_qg_post_params(const cgen_qgemm_spec *s);
/* A task's call of the post hook (spec.post; else nothing) on rows [m0,
 * m1) (expressions of the emitted task) of the columns of B block jb, or
 * (all) of every column. */
void cg_qg_emit_post(cg_out *o, const cgen_qgemm_spec *s, const qg_dims *d, const char *m0, const char *m1, bool all);

/* cgen_qamx.c.  Whether an M x N x K int8 GEMM pays on AMX (measured). */
bool cg_qamx_pays(int64_t M, int64_t N, int64_t K);
/* Whether spec s gets an AMX variant (s->amx, and where it pays unless forced). */
bool cg_qamx_on(const cgen_qgemm_spec *s);
/* Words of the AMX variant's packed weight. */
long cg_qamx_wwords(const cgen_qgemm_spec *s, const qg_dims *d);
/* $F_amxpk (the weight in the AMX layout, from $F_pack) and the variant
 * $F_amx_run (after the AVX-512 variant, whose $P_pkb and $P_ctask it calls). */
void cg_qamx_emit_pack(cg_out *o, const cgen_qgemm_spec *s, const qg_dims *d);
void cg_qamx_emit(cg_out *o, const cgen_qgemm_spec *s, const qg_dims *d);

/* cgen_qgemm_avx2.c.  The AVX2 micro-kernel $P_<name>: the contract of the
 * VNNI tile (cgen_qgemm.c's emit_tile_vnni: MR rows of packed A times the
 * first nv vectors of 16 of NR columns of packed B, depth blocks through
 * acc, the requantizing epilogue on the last), exact, with AVX2 only. */
void cg_qg2_emit_tile(cg_out *o, const cgen_qgemm_spec *s, const qg_dims *d, const char *name, int nv);

/* cgen_qgemm_b.c.  $F_pad: channel c of a stride-1 conv's image with its
 * padding (za), Hp x Wp bytes (d->cd). */
void cg_qg_emit_pad(cg_out *o, const cgen_qgemm_spec *s, const qg_dims *d);
/* $F_phs (vec: $P_phs too): channel c of a strided conv's image as its sh sw
 * phase planes (d->ps). */
void cg_qg_emit_phase(cg_out *o, const cgen_qgemm_spec *s, const qg_dims *d, bool vec);
/* $P_pkb: B block jb packed (or read in place: d->ci, d->ps, d->pg) for the
 * tiles (vec: the AVX-512 variant's). */
void cg_qg_emit_bpack(cg_out *o, const cgen_qgemm_spec *s, const qg_dims *d, bool vec);

#endif
