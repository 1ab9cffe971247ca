/* contract_q8_int.h — what contract_q8.c takes from contract_q8out.c: the
 * int8 kernel's job (q8_job), its requantization (q8_rq), the epilogue
 * printers, the post hook and the exact-Add fallback.
 * Needs: cgen_qgemm.h, contract_c.h, kernel/contract.h.  Gives: q8_rq,
 * q8_job, q8_span and contract_q8out.c's cc_q8_load, cc_q8_span_step,
 * cc_q8_epilogue, cc_q8_rows, cc_q8_vec_steps, cc_q8_post, cc_q8_slow. */
#ifndef HARP_BACKEND_C_CONTRACT_Q8_INT_H
#define HARP_BACKEND_C_CONTRACT_Q8_INT_H

#include "backend/c/cgen_qgemm.h"
#include "contract_c.h"
#include "kernel/contract.h"

/* An epilogue that is a requantization (q8_requant): v = (acc + bias[ch]) *
 * mult[ch] (the steps `bias`, `mult`: -1 none; mscale a constant multiplier),
 * then y = clamp(rint(v), lo, hi) + off, all integers, lo <= 0 <= hi and
 * hi - lo <= 255: the int8 kernel's own epilogue writes the byte
 * clamp(rint(v), lo, hi) - lo, one pass then stores y.  post >= 0: that
 * pass applies the steps from `post` on to those integers first (a QDQ
 * residual add: the other operand added, requantized again). */
typedef struct q8_rq {
  bool ok;
  int bias, mult;
  float mscale;
  int lo, hi, off;
  int post;
} q8_rq;

/* What the int8 kernel of one template kernel computes: per batch
 * element (nb of them, x_bs / y_bs elements apart), the input of xrows x
 * xlen as u8 (a task per row), q's sums into yrows x ylen, the epilogue
 * per output row (a task each), the bias per row (conv channels) or, with
 * bias_col, per column (a weight B's channels). */
typedef struct q8_job {
  cgen_qgemm_spec q;
  ct_tensor X, W, Y;
  int64_t nb, x_bs, y_bs, xrows, xlen, yrows, ylen, wch, wk;
  const char *nb_expr; /* a ShapeSet object's batch read at run time (C), else NULL: nb */
  bool bias_col;
  bool direct; /* on the direct conv template (not a GEMM's): its multiply-adds weigh Q8_DIRECT */
  int nepi;
  const ct_epi *epi;
  q8_rq rq;
  bool res_ok;            /* a residual step's tensor is laid out like the output (CT_EPI_RESIDUAL) */
  int xbuf, ybuf;         /* cc_q8_fact's */
  bool held_in, held_out; /* the input / output held as bytes (q8_hold.c) */
  int zo;                 /* the zero point of the output's bytes (q8_zo, q8_post_zo, q8_dq_zo), else -1 */
  float ys;               /* q8_dq_zo's scale: the output is ys * (byte - zo) (cc_q8_fact.ys); else 0 */
  int ri, rbuf;           /* the residual step the output pass adds (else -1) and its tensor's buffer, read whole (else -1) */
  bool held_res;          /* that buffer held as bytes of zero point rz */
  int rz;
  const ct_gemm *rep;     /* x gathered (a GEMM's A copied dense, ct_gemm.nrep: a patchify conv's patches):
                             element i of row t of x at sum i_j rep_src[j] over rep_size of A's dense index
                             t xlen + i (rep_t: i xrows + t, x is A^T); else NULL */
  bool rep_t;
  int rep_b;              /* rep_size[0 .. rep_b) are A's rows (their product M), the rest its columns (K) */
} q8_job;

/* What the epilogue's steps so far make of v: an integer (or NaN) of
 * [lo, hi] when whole, else anything. */
typedef struct {
  bool whole;
  float lo, hi;
} q8_span;

/* Step ep applied to span sp; true when ep is a rounding left out (contract_q8out.c). */
bool cc_q8_span_step(q8_span *sp, const ct_epi *ep);
/* A load of element i of a tensor of dtype dt at pointer expression p, as fp32, into buf. */
void cc_q8_load(char *buf, size_t cap, tiny_dtype dt, const char *p, const char *i);
/* The epilogue steps from `from` on of j printed on the fp32 `v` (contract_q8out.c). */
bool cc_q8_epilogue(ut_str *o, const q8_job *j, int from, bool pre);
/* A task over output row t applying j's steps from `from` on, storing y (contract_q8out.c). */
bool cc_q8_rows(ut_str *o, const q8_job *j, int from, const char *yt, const char *ys);
/* The AVX-512 form of the steps from `from` on, step norint left to the conversion (its integers added in *off); false for a step it lacks (contract_q8out.c). */
bool cc_q8_vec_steps(ut_str *o, const q8_job *j, int from, int norint, int *off);
/* Whether every step of j's output pass from rq.post on has its AVX-512 form (contract_q8out.c). */
bool cc_q8_vec_ok(const q8_job *j);
/* The bytes j's output pass stores for each byte of its requantization, where its steps read no tensor (contract_q8out.c). */
bool cc_q8_lut(const q8_job *j, uint8_t lut[256]);
/* <fn>_q8out of job j as a table lookup per element where its steps read no tensor and lack a vector form (contract_q8out.c). */
bool cc_q8_out_table(ut_str *o, const char *fn, const q8_job *j, const char *yt, const char *ys);
/* <fn>_q8post, the kernel's post hook for job j (contract_q8out.c). */
bool cc_q8_post(ut_str *o, const char *fn, const q8_job *j);
/* <fn>_q8slow, the fp32 fallback of a job with an exact QDQ Add step (contract_q8out.c). */
bool cc_q8_slow(ut_str *o, const char *fn, const q8_job *j0);

#endif
