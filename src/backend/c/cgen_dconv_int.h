/* cgen_dconv_int.h — what the direct conv generator's files share:
 * cgen_dconv.c plans a kernel (dc: sizes, register tile, blocking, tile
 * patterns) and emits it through cgen_dconv_kern.c (packer, micro-kernels,
 * task) and cgen_dconv_rt.c (the task and run of sizes read at run time).
 * Needs: cgen_int.h.  Gives: dc, dc_sig, DC_MAX_*, rt_half, rt_slots and
 * the dc_emit_* emitters.  Not public. */
#ifndef HARP_CGEN_DCONV_INT_H
#define HARP_CGEN_DCONV_INT_H

#include "backend/c/cgen_int.h"

#define DC_MAX_KW 15   /* taps per row the signature tables hold */
#define DC_MAX_EDGE 16 /* edge tiles per side; more (huge padding): implicit GEMM */
#define DC_MAX_MR 28

/* One tile pattern: np pixels, and per kw the valid pixel range [lo, hi). */
typedef struct dc_sig {
  int np, lo[DC_MAX_KW], hi[DC_MAX_KW];
} dc_sig;

typedef struct dc {
  const cgen_conv_spec *s;  /* bf: the pair view (cg_dconv_pairs), the original at s0 */
  const cgen_conv_spec *s0;
  bool bf;                  /* channel pairs multiplied with vdpbf16ps (cgen_bf16.c's scheme) */
  bool rt;                  /* sizes read at run time (s->n_expr, h_expr, w_expr): sizes here are the
                               upper corner's; the input read in place or a zero-padded copy (rt_copies) */
  int64_t G, ICG, OCG, OH, OW, HW, OHW, K;
  int nv, ob, nob, mr, nt;
  int64_t cb, nrb;          /* channels per block (cb >= ICG: one block), row blocks */
  int rb;                   /* output rows per task */
  int npf;                  /* lines of the next block's weights prefetched per channel step (0: none) */
  int pfd;                  /* input rows prefetched this many channels ahead */
  bool ocb_fast;            /* task order: channel blocks fastest (else row blocks) */
  bool rtcopy;              /* rt: the input through a zero-padded copy (rt_copies) */
  bool edge;                /* rt, no copy, padding left or right: the kernels take the tile's columns left
                               (zl) and right (zr) of the row as arguments and broadcast zeros there */
  int nl, nr;               /* edge tiles on the left (0..nl-1) and right (nt-nr..nt-1) */
  int nsig, tsig[2 * DC_MAX_EDGE + 1]; /* edge tiles' signature index; last: interior */
  dc_sig sig[2 * DC_MAX_EDGE + 1];
} dc;

/* The narrowest even tile width of d's run-time rows (rt_patterns). */
static inline int rt_half(const dc *d) { return (d->mr + 1) / 2; }
/* Partial-sum slots per output row of a task, sizes read at run time: one
 * per whole tile of the upper corner's row, one per narrower pattern. */
static inline int rt_slots(const dc *d) { return d->nt + d->nsig; }

/* cgen_dconv_kern.c: the weight packer $P_dpack of d; the micro-kernel
 * $P_dk<si> of tile pattern si; the rows [kh0, kh1) of output row oh
 * inside an input of h rows (an expression); the task $P_dtask of a
 * conv of constant sizes. */
void dc_emit_pack(cg_out *o, const dc *d);
void dc_emit_kernel(cg_out *o, const dc *d, int si);
void dc_emit_kh_range(cg_out *o, const dc *d, const char *h);
void dc_emit_task(cg_out *o, const dc *d);

/* cgen_dconv_rt.c (d->rt, sizes read at run time): the task $P_dtask; the
 * zero-padded copy $P_dpad of the input (d->rtcopy); $P_run with the
 * weight's wbytes packed by npack tasks, wsb scratch bytes a thread. */
void dc_emit_task_rt(cg_out *o, const dc *d);
void dc_emit_pad_copy(cg_out *o, const dc *d);
void dc_emit_run_rt(cg_out *o, const dc *d, long wbytes, long npack, long wsb);

#endif
