/* contract_q8.c — convolutions and GEMMs of 8-bit integers on the int8
 * VNNI kernel (cgen_qgemm): a conv or GEMM template kernel (contract_c.c)
 * whose input provably holds integers of an 8-bit range and whose weight
 * is a bf16 param packed once also runs as exact u8 x s8 -> s32 products,
 * its epilogue applied to the sums.
 * Needs: contract_c.h, cgen_qgemm.h, the Tiny graph.  Gives: cc_q8_input,
 * cc_emit_q8conv, cc_emit_q8gemm, cc_q8_gemv, cc_q8_call, cc_q8_pays, and for
 * contract_q8dw.c cc_q8_act, cc_q8_whole, cc_q8_out_zo, cc_q8_scratch.
 *
 * What a QDQ import (src/frontend/onnx_qdq.c) makes of DQ -> Conv -> Q is a
 * conv of bf16(q - z) by a bf16 weight of integers; the proof of the input
 * is read off the graph (cc_q8_input: a chain of ROUND, MAX / MIN, ADD of
 * integer constants, casts that keep the integers), the weight's is made at
 * model_init: its packer (<fn>_wpack1) converts the bf16 weight to int8
 * and flags the packed form invalid when a value is not an integer of
 * [-128, 127].  The kernel <fn>_q8 then returns -1 and the caller runs the
 * bf16 template as before.  Per image: the input plus its zero point as u8
 * (a task per input row), the int8 kernel's int32 sums (as fp32, exact
 * below 2^24 as the template's), the epilogue steps per output row; or,
 * where the epilogue is a requantization (q8_requant), the kernel's own
 * epilogue writes bytes and one pass stores them (applying the steps after
 * it first: a QDQ residual add's scale, tensor, requantization); or, for the buffers
 * q8_hold.c holds as bytes, the kernel reads / writes them directly.  The
 * per-call buffers are one block per calling thread, grown and kept (at
 * most the largest kernel's input + sums), freed when the thread exits or,
 * for the thread that unloads the object, with it (Q8_SCRATCH_SRC).
 * HARP_INT8=off leaves them on the template alone (A/B), =force takes
 * the int8 kernel wherever it fits, not only where it pays (q8_emit).  A
 * kernel with an exact QDQ Add step, which no template applies, gets
 * <fn>_q8slow as its run-time fallback (q8_slow, cc_emit_resfma); the knob
 * int8_decline (HARP_INT8_DECLINE) makes every int8 kernel decline at run
 * time, so that tests reach the fallbacks.  A ShapeSet object takes none
 * but a conv run an image at a time over a run-time batch
 * (contract_conv_img.c): its sizes are one image's, its loop over the
 * images reads the batch (q8_job.nb_expr), no buffer held as bytes. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "backend/c/cgen_qgemm.h"
#include "backend/c/contract_q8_int.h"
#include "contract_c.h"
#include "harp/knobs.h"
#include "kernel/contract.h"

#define Q8_DEPTH 24
#define Q8_GAIN 256.0
/* What a multiply-add of the direct conv template (strided, k x k, the
 * stem) costs against one of the GEMM template's (1x1 stride 1, x W):
 * ResNet-50 QDQ, harp bench --profile, 2 threads, ms alone: the direct
 * template ~3.5 ps a multiply-add (conv2d_556 3.8, conv2d_354 3.3, the 7x7
 * stem 3.6), the GEMM template ~2.4, the int8 kernel ~1.4; the strided convs
 * ran 1.5-2.4x faster on it at M N K / (input + output) 85-230, where
 * stride-1 1x1 convs at 51-85 ran slower. */
#define Q8_DIRECT 4.0
/* ... and where the int8 kernels have their AMX-INT8 variant (this host has
 * it, HARP_AMX not off): a Xeon with AMX-INT8, ResNet-50 / MobileNetV2 QDQ,
 * harp bench --profile, 2 threads, int8=force vs auto, ms alone: every
 * 1x1 conv the rule left on the template ran 1.3-8x faster int8, at M N K /
 * elements 19-102 (256x3136x64 2.3-5.9x, 512x784x128 3.5-8.3x, 128x3136x256
 * 3.4x, MobileNetV2's 24x3136x96 2.1x, 144x3136x24 1.3-1.8x; the same
 * convs 2.2-5.3x with HARP_AMX=off: the template is the slow side on such a
 * CPU), none slower: its multiply-adds weigh 16 times more (the line at
 * M N K / elements >= 16 for the GEMM template, 4 for the direct one). */
#define Q8_AMX 16.0

/* The int8 kernels' per-call buffers (the input as u8, the sums): one block
 * per calling thread, grown and kept, so that no call maps fresh pages
 * (malloc / free of megabytes did, page faults every run).  A thread's
 * block (its capacity in a 64-byte header) is a pthread key's value, freed
 * when the thread exits; the unloading thread's goes with the object, whose
 * destructor deletes the key (blocks of threads still alive then stay). */
static const char Q8_SCRATCH_SRC[] =
    "#ifndef HP_Q8_SCRATCH\n#define HP_Q8_SCRATCH\n#include <pthread.h>\n"
    "static pthread_key_t hp_q8_key;\nstatic pthread_once_t hp_q8_once = PTHREAD_ONCE_INIT;\nstatic int hp_q8_keyok;\n"
    "static void hp_q8_mkkey(void) { hp_q8_keyok = !pthread_key_create(&hp_q8_key, free); }\n"
    "static char *hp_q8_scratch(size_t n) {\n"
    "  pthread_once(&hp_q8_once, hp_q8_mkkey);\n  if (!hp_q8_keyok) return NULL;\n"
    "  char *b = (char *)pthread_getspecific(hp_q8_key);\n"
    "  if (!b || *(size_t *)b < n) {\n    free(b);\n"
    "    b = (char *)aligned_alloc(64, 64 + ((n + 63) & ~(size_t)63));\n    if (b) *(size_t *)b = n;\n"
    "    if (pthread_setspecific(hp_q8_key, b)) { free(b); b = NULL; }\n  }\n"
    "  return b ? b + 64 : NULL;\n}\n"
    "__attribute__((destructor)) static void hp_q8_scratch_free(void) {\n"
    "  if (!hp_q8_keyok) return;\n  free(pthread_getspecific(hp_q8_key));\n  pthread_key_delete(hp_q8_key);\n  hp_q8_keyok = 0;\n}\n"
    "#endif\n";

void cc_q8_scratch(ut_str *out) { ut_str_puts(out, Q8_SCRATCH_SRC); }

/* Whether source s holds integers only; their bounds in *lo, *hi (infinite
 * when unknown).  Follows views, casts that keep the integers, ROUND (of
 * anything), ADD / SUB / MAX / MIN / NEG / RELU of integers, integer
 * constants and 8-bit tensors. */
static bool int_range(const tiny_graph *g, tiny_src s, double *lo, double *hi, int depth) {
  if (s.node < 0) return *lo = *hi = s.imm, isfinite(s.imm) && s.imm == nearbyint(s.imm);
  const tiny_node *n = &g->nodes[s.node];
  if (n->dtype == TINY_U8 || n->dtype == TINY_I8) { /* any value stored as 8 bits */
    *lo = n->dtype == TINY_U8 ? 0 : -128, *hi = n->dtype == TINY_U8 ? 255 : 127;
    return true;
  }
  if (n->op == TINY_CONST) return *lo = *hi = n->a.cnst.value, isfinite(*lo) && *lo == nearbyint(*lo);
  double a0 = -INFINITY, a1 = INFINITY, b0 = 0, b1 = 0;
  bool ok0 = depth < Q8_DEPTH && n->nsrc >= 1 && int_range(g, n->src[0], &a0, &a1, depth + 1);
  if (n->op == TINY_ROUND) return *lo = ok0 ? a0 : -INFINITY, *hi = ok0 ? a1 : INFINITY, true;
  if (!ok0 || (n->nsrc > 1 && !int_range(g, n->src[1], &b0, &b1, depth + 1))) return false;
  switch (n->op) {
    case TINY_RESHAPE:
    case TINY_EXPAND:
    case TINY_PERMUTE: *lo = a0, *hi = a1; return n->nsrc == 1;
    case TINY_CAST: { /* exact for integers up to 2^8 (bf16), 2^11 (fp16), 2^24 (fp32) */
      tiny_dtype to = n->a.cast.to;
      double lim = to == TINY_BF16 ? 256 : to == TINY_FP16 ? 2048 : to == TINY_FP32 ? 16777216 : 0;
      *lo = a0, *hi = a1;
      return a0 >= -lim && a1 <= lim;
    }
    case TINY_NEG: *lo = -a1, *hi = -a0; return true;
    case TINY_RELU: *lo = fmax(a0, 0), *hi = fmax(a1, 0); return true;
    case TINY_ADD: *lo = a0 + b0, *hi = a1 + b1; return true;
    case TINY_SUB: *lo = a0 - b1, *hi = a1 - b0; return true;
    case TINY_MAX: *lo = fmax(a0, b0), *hi = fmax(a1, b1); return true;
    case TINY_MIN: *lo = fmin(a0, b0), *hi = fmin(a1, b1); return true;
    default: return false;
  }
}

/* Whether node holds integers u - *za with u in [0, 255]: its u8 form. */
bool cc_q8_input(const tiny_graph *g, int node, int *za) {
  double lo, hi;
  if (node < 0 || !int_range(g, (tiny_src){node, 0}, &lo, &hi, 0) || !isfinite(lo) || !isfinite(hi)) return false;
  double z = lo < 0 ? -lo : 0; /* u = x + z in [0, 255] */
  if (z > 255 || hi + z > 255) return false;
  *za = (int)z;
  return true;
}

/* The steps ep[from..n) that follow a RINT while they keep integers of a
 * range: shifts by integers (summed in *off), clamps to integers and relu
 * (the range before the shifts in *lo, *hi), roundings to bf16 / fp16 exact
 * on the range.  Returns the index of the first other step (n: none), -1
 * where a rounding is not exact or the range is empty. */
static int q8_int_steps(const ct_epi *ep, int from, int n, double *lo, double *hi, double *off) {
  *lo = -INFINITY, *hi = INFINITY, *off = 0;
  for (int i = from; i < n; i++) {
    const ct_epi *e = &ep[i];
    double a = e->kind == CT_EPI_RELU ? 0 : e->lo, b = e->kind == CT_EPI_RELU ? INFINITY : e->hi;
    if (e->kind == CT_EPI_SCALE && e->scale == 1.0f && e->shift == nearbyintf(e->shift)) *off += e->shift;
    else if (e->kind == CT_EPI_ROUND) { /* exact only for the integers of a finite range */
      double l = e->dtype == TINY_BF16 ? 256 : 2048;
      if (!(fabs(*lo + *off) <= l && fabs(*hi + *off) <= l)) return -1;
    }
    else if ((e->kind == CT_EPI_CLAMP || e->kind == CT_EPI_RELU) && (isinf(a) || a == nearbyint(a)) && (isinf(b) || b == nearbyint(b)))
      *lo = fmax(*lo, a - *off), *hi = fmin(*hi, b - *off);
    else return i;
    if (*lo > *hi) return -1;
  }
  return n;
}

/* Whether the epilogue steps ep[0..n) (bias per column when bias_col) are
 * a requantization, into *rq (see q8_rq); storing y as dtype yt exactly.
 * The order is the QDQ import's: bias, multiplier, RINT, then shifts by
 * integers, clamps to integers, relu, a rounding to bf16 / fp16 of the
 * integers (exact within +-256 / +-2048). */
static bool q8_requant(const ct_epi *ep, int n, bool bias_col, tiny_dtype yt, q8_rq *rq) {
  int i = 0;
  *rq = (q8_rq){.bias = -1, .mult = -1, .mscale = 1.0f, .post = -1};
  for (int pass = 0; pass < 2 && i < n; pass++) { /* the bias (+), then the multiplier (x) */
    bool tensor = ep[i].kind == (bias_col ? CT_EPI_BIAS_N : CT_EPI_BIAS_M);
    if (pass == 0 && tensor && !ep[i].mul) rq->bias = i++;
    else if (pass == 1 && tensor && ep[i].mul) rq->mult = i++;
    else if (pass == 1 && ep[i].kind == CT_EPI_SCALE && ep[i].shift == 0.0f) rq->mscale = ep[i++].scale;
  }
  if (i >= n || ep[i].kind != CT_EPI_RINT) return false;
  double lo, hi, off;
  int s = q8_int_steps(ep, i + 1, n, &lo, &hi, &off);
  if (s < 0) return false;
  if (s < n) {
    ct_epi_kind k = ep[s].kind;
    if (!(k == CT_EPI_SCALE || k == CT_EPI_RESIDUAL || k == CT_EPI_RESFMA || k == CT_EPI_RELU || k == CT_EPI_CLAMP)) return false;
    rq->post = s; /* the output pass applies the rest to the integers */
  }
  double lim = rq->post >= 0 ? 16777216 : yt == TINY_BF16 ? 256 : yt == TINY_FP16 ? 2048 : 16777216;
  if (!(lo <= 0 && 0 <= hi && hi - lo <= 255 && fabs(lo + off) <= lim && fabs(hi + off) <= lim)) return false;
  rq->lo = (int)lo, rq->hi = (int)hi, rq->off = (int)off, rq->ok = true;
  return true;
}

/* The zero point of the bytes requantization rq's output holds (y + zo in
 * [0, 255]), or -1. */
static int q8_zo(const q8_rq *rq) {
  return rq->ok && rq->post < 0 && rq->lo + rq->off <= 0 && rq->lo + rq->off >= -255 ? -(rq->lo + rq->off) : -1;
}

/* Where requantization rq is followed by more steps (rq->post, a QDQ
 * residual add) that end in a second one, a RINT and after it only what
 * q8_int_steps takes over at most 256 integers: the zero point of the
 * bytes the output pass can store (y + zo in [0, 255]), else -1. */
static int q8_post_zo(const ct_epi *ep, int n, const q8_rq *rq) {
  if (!rq->ok || rq->post < 0) return -1;
  int last = -1;
  for (int i = rq->post; i < n; i++)
    if (ep[i].kind == CT_EPI_RINT) last = i;
  double lo, hi, off;
  if (last < 0 || q8_int_steps(ep, last + 1, n, &lo, &hi, &off) != n) return -1;
  if (!(isfinite(lo) && isfinite(hi) && hi - lo <= 255 && lo + off <= 0 && lo + off >= -255)) return -1;
  return (int)-(lo + off);
}

/* Where requantization rq is followed by one step alone, a multiplication
 * by a positive constant (the DQ of a QDQ op the kernel ends before: a
 * max pool's), the zero point of the bytes the kernel writes, that
 * scale in *ys; else -1. */
static int q8_dq_zo(const ct_epi *ep, int n, const q8_rq *rq, float *ys) {
  if (!rq->ok || rq->post != n - 1 || ep[n - 1].kind != CT_EPI_SCALE || ep[n - 1].shift != 0.0f) return -1;
  if (!(ep[n - 1].scale > 0.0f && isfinite(ep[n - 1].scale))) return -1;
  q8_rq r = *rq;
  r.post = -1;
  int zo = q8_zo(&r);
  if (zo >= 0) *ys = ep[n - 1].scale;
  return zo;
}

int cc_q8_int_steps(const ct_epi *ep, int from, int n, double *lo, double *hi, double *off) {
  return q8_int_steps(ep, from, n, lo, hi, off);
}

int cc_q8_out_zo(const ct_epi *ep, int n, tiny_dtype yt) {
  q8_rq rq;
  return q8_requant(ep, n, false, yt, &rq) ? q8_zo(&rq) : -1;
}

/* The packed form 1 of the weight (int8, flagged valid in its first word)
 * of M rows of K bf16 at element offset off, for kernel kfn. */
static void q8_wpack(ut_str *o, const char *fn, const char *kfn, int64_t M, int64_t K, int64_t off) {
  ut_str_printf(o, "static long %s_wbytes1(void) { return 64 + %s_wsize(); }\n", fn, kfn);
  ut_str_printf(o,
                "static int %s_wpack1(hprt_pool *pool, const void *w, void *wp) {\n"
                "  (void)pool;\n"
                "  const uint16_t *s = (const uint16_t *)w + %" PRId64 "L;\n"
                "  int8_t *q = (int8_t *)malloc(%" PRId64 "UL);\n  float *mu = (float *)malloc(%" PRId64 "UL * 4);\n"
                "  if (!q || !mu) { free(q); free(mu); return -1; }\n  int ok = 1;\n"
                "  for (long i = 0; i < %" PRId64 "L; i++) { /* an integer of [-128, 127], else the bf16 kernel */\n"
                "    float v = hp_b2f(s[i]);\n"
                "    if (!(v >= -128.0f && v <= 127.0f) || v != hp_rint(v)) ok = 0;\n"
                "    q[i] = ok ? (int8_t)v : 0;\n  }\n"
                "  for (long m = 0; m < %" PRId64 "L; m++) mu[m] = 1.0f;\n"
                "  memset(wp, 0, 64);\n"
                "  int rc = ok ? %s_pack(q, NULL, mu, (char *)wp + 64) : 0;\n"
                "  if (!rc) *(int *)wp = ok;\n  free(q);\n  free(mu);\n  return rc ? -1 : 0;\n}\n",
                fn, off, M * K, M, M * K, M, kfn);
}

/* Whether j's epilogue adds (or multiplies by) a tensor laid out like the
 * output (a residual step, or the exact QDQ Add's: cc_has_resfma). */
static bool q8_has_res(const q8_job *j) {
  for (int i = 0; i < j->nepi; i++)
    if (j->epi[i].kind == CT_EPI_RESIDUAL || j->epi[i].kind == CT_EPI_RESFMA) return true;
  return false;
}

bool cc_has_resfma(const ct_epi *epi, int n) {
  for (int i = 0; i < n; i++)
    if (epi[i].kind == CT_EPI_RESFMA) return true;
  return false;
}

/* The loops of row t of job j's gathered x (j->rep) that end at `long
 * src`, where its element i lies: A's dense index is (m, k) over rep_size,
 * its first rep_b dimensions m's, the rest k's (each part times its
 * rep_src); row t (m, or k where x is A^T: j->rep_t) taken apart once, the
 * row's dimensions (k's, or m's) as nested loops, i counting. */
static void q8_rep_loops(ut_str *o, const q8_job *j) {
  const ct_gemm *g = j->rep;
  int r0 = j->rep_t ? j->rep_b : 0, r1 = j->rep_t ? g->nrep : j->rep_b; /* row t's dimensions */
  int c0 = j->rep_t ? 0 : j->rep_b, c1 = j->rep_t ? j->rep_b : g->nrep; /* the row's */
  ut_str_puts(o, "  long s0 = 0, fi = t, i = 0;\n");
  for (int d = r1 - 1; d >= r0; d--)
    ut_str_printf(o, "  s0 += fi %% %" PRId64 "L * %" PRId64 "L;\n  fi /= %" PRId64 "L;\n", g->rep_size[d], g->rep_src[d], g->rep_size[d]);
  for (int d = c0; d < c1; d++)
    ut_str_printf(o, "  %*sfor (long a%d = 0; a%d < %" PRId64 "L; a%d++)\n", 2 * (d - c0), "", d, d, g->rep_size[d], d);
  ut_str_printf(o, "  %*s{\n    long src = s0", 2 * (c1 - c0), "");
  for (int d = c0; d < c1; d++) ut_str_printf(o, " + a%d * %" PRId64 "L", d, g->rep_src[d]);
  ut_str_puts(o, ";\n");
}

/* True when job j's output is the kernel's fp32 sums as they are (no
 * epilogue step, no requantization, y fp32 and not held): the kernel then
 * stores them into y itself, rows ylen apart as its sums, and no output
 * pass copies them (a QDQ GEMM before a SiLU: its output written and read
 * twice). */
static bool q8_sums_are_y(const q8_job *j) {
  return j->nepi == 0 && !j->rq.ok && !j->held_out && !j->q.post && j->Y.dtype == TINY_FP32;
}

/* The per-batch tasks of job j: the input as u8 (x + za, clamped; a NaN
 * flags the context, and the caller then runs the template, which
 * propagates it) and the epilogue, on local restrict pointers so that the
 * loops vectorize. */
static bool q8_tasks(ut_str *o, const char *fn, const q8_job *j) {
  const char *xt = j->X.dtype == TINY_FP32 ? "float" : "uint16_t", *yt = j->Y.dtype == TINY_FP32 ? "float" : "uint16_t";
  const char *xl = j->X.dtype == TINY_FP32 ? "" : j->X.dtype == TINY_BF16 ? "hp_b2f" : "hp_h2f";
  const char *ys = j->Y.dtype == TINY_FP32 ? "" : j->Y.dtype == TINY_BF16 ? "hp_f2b" : "hp_f2h";
  ut_str_printf(o, "typedef struct { const char *x; uint8_t *u; const void *acc; char *y; const void *const *ep; int nan;%s } %s_q8ctx;\n",
                q8_has_res(j) ? " long bn;" : "", fn);
  if (!j->held_in) {
    ut_str_printf(o, "static void %s_q8in(void *ctx, int t, int tid) {\n  (void)tid;\n  %s_q8ctx *x = (%s_q8ctx *)ctx;\n", fn, fn, fn);
    ut_str_printf(o,
                "  const %s *restrict s = (const %s *)x->x + (long)t * %" PRId64 "L;\n"
                "  uint8_t *restrict u = x->u + (long)t * %" PRId64 "L;\n  int nan = 0;\n",
                xt, xt, j->rep ? 0 : j->xlen, j->xlen);
    if (j->rep) q8_rep_loops(o, j);
    else ut_str_printf(o, "  for (long i = 0; i < %" PRId64 "L; i++) {\n", j->xlen);
    ut_str_printf(o,
                "    float f = %s(s[%s]) + %d.0f;\n    nan |= f != f;\n    f = f > 0.0f ? f : 0.0f;\n    f = f < 255.0f ? f : 255.0f;\n"
                "    u[i%s] = (uint8_t)(int32_t)f;\n  }\n"
                "  if (nan) __atomic_store_n(&x->nan, 1, __ATOMIC_RELAXED);\n}\n",
                xl, j->rep ? "src" : "i", (int)j->q.za, j->rep ? "++" : "");
  }
  if (j->held_out && j->rq.post < 0) return true; /* the kernel stores the bytes */
  if (q8_sums_are_y(j)) return true;              /* the kernel stores y */
  if (j->q.post) return cc_q8_post(o, fn, j);
  if (cc_q8_out_table(o, fn, j, yt, ys)) return true;
  ut_str_printf(o, "static void %s_q8out(void *ctx, int t, int tid) {\n  (void)tid;\n  %s_q8ctx *x = (%s_q8ctx *)ctx;\n", fn, fn, fn);
  if (j->rq.ok && j->rq.post >= 0) { /* the kernel requantized: the steps after it on its bytes + lo + off */
    if (!cc_q8_epilogue(o, j, j->rq.post, true)) return false;
    const char *ot = j->held_out ? "uint8_t" : yt; /* held: the second requantization's bytes */
    ut_str_printf(o,
                  "  const uint8_t *restrict b = (const uint8_t *)x->acc + (long)t * %" PRId64 "L;\n"
                  "  %s *restrict y = (%s *)x->y + (long)t * %" PRId64 "L;\n"
                  "  for (long col = 0; col < %" PRId64 "L; col++) {\n    float v = (float)b[col] + %d.0f;\n",
                  j->ylen, ot, ot, j->ylen, j->ylen, j->rq.lo + j->rq.off);
    if (!cc_q8_epilogue(o, j, j->rq.post, false)) return false;
    if (j->held_out) /* a NaN (a NaN residual) stored as byte 0, as q8_convert does */
      ut_str_printf(o, "    y[col] = v == v ? (uint8_t)(int32_t)(v + %d.0f) : 0;\n  }\n}\n", j->zo);
    else ut_str_printf(o, "    y[col] = %s(v);\n  }\n}\n", ys);
    return true;
  }
  if (j->rq.ok) { /* the kernel requantized: its bytes + lo + off */
    ut_str_printf(o,
                  "  const uint8_t *restrict b = (const uint8_t *)x->acc + (long)t * %" PRId64 "L;\n"
                  "  %s *restrict y = (%s *)x->y + (long)t * %" PRId64 "L;\n"
                  "  for (long col = 0; col < %" PRId64 "L; col++) y[col] = %s((float)b[col] + %d.0f);\n}\n",
                  j->ylen, yt, yt, j->ylen, j->ylen, ys, j->rq.lo + j->rq.off);
    return true;
  }
  return cc_q8_rows(o, j, 0, yt, ys);
}

/* <fn>_q8rq(wp, ep): the requantization's bias and multipliers of job j
 * (kernel kfn) set in its packed weight wp once per instance, the outcome
 * in wp[1] (1 set, 2 a bias no integer: the kernel then runs the template);
 * -1 when out of memory. */
static void q8_rq_setup(ut_str *out, const char *fn, const char *kfn, const q8_job *j) {
  char ld[160], pe[32];
  ut_str_printf(out, "static int %s_q8rq(int *wp, const void *const *ep) {\n  (void)ep;\n", fn);
  ut_str_printf(out, "  float *b = (float *)malloc(%" PRId64 "UL * 8);\n  if (!b) return -1;\n  float *m = b + %" PRId64 "L;\n", j->wch,
                j->wch);
  ut_str_printf(out, "  for (long c = 0; c < %" PRId64 "L; c++) {\n", j->wch);
  if (j->rq.bias >= 0) {
    snprintf(pe, sizeof pe, "ep[%d]", j->rq.bias);
    cc_q8_load(ld, sizeof ld, j->epi[j->rq.bias].dtype, pe, "c");
    ut_str_printf(out, "    b[c] = %s;\n", ld);
  }
  if (j->rq.mult >= 0) {
    snprintf(pe, sizeof pe, "ep[%d]", j->rq.mult);
    cc_q8_load(ld, sizeof ld, j->epi[j->rq.mult].dtype, pe, "c");
  } else snprintf(ld, sizeof ld, "%#.9gf", (double)j->rq.mscale);
  ut_str_printf(out, "    m[c] = %s;\n  }\n", ld);
  ut_str_printf(out, "  wp[1] = %s_requant((char *)wp + 64, %s, m) ? 2 : 1;\n  free(b);\n  return 0;\n}\n", kfn,
                j->rq.bias >= 0 ? "b" : "NULL");
}

/* A conversion loop over the n elements of tensor `to` (dtype dt) from
 * bytes `from` (x = byte - z) or, back, to bytes (a NaN becomes byte 0, as
 * onnxruntime's QuantizeLinear makes q = 0 of it); s > 0: x = s (byte - z),
 * back rint(x / s) + z.  v4 > 0: the bytes VNNI-4 (cgen_qgemm.h's
 * x_vnni4), planes of v4 elements, channels a multiple of 4. */
static void q8_convert(ut_str *out, tiny_dtype dt, const char *to, const char *from, int64_t n, int z, float s, bool back, int64_t v4) {
  char bi[160]; /* the byte of element i */
  if (v4) snprintf(bi, sizeof bi, "i / %" PRId64 "L * %" PRId64 "L + i %% %" PRId64 "L * 4 + i / %" PRId64 "L %% 4", 4 * v4, 4 * v4, v4, v4);
  else snprintf(bi, sizeof bi, "i");
  const char *t = dt == TINY_FP32 ? "float" : "uint16_t";
  const char *ld = dt == TINY_FP32 ? "" : dt == TINY_BF16 ? "hp_b2f" : "hp_h2f", *st = dt == TINY_FP32 ? "" : dt == TINY_BF16 ? "hp_f2b" : "hp_f2h";
  if (!back) {
    ut_str_printf(out, "    for (long i = 0; i < %" PRId64 "L; i++) ((%s *)%s)[i] = %s((float)((const uint8_t *)%s)[%s] - %d.0f);\n", n, t, to, st,
                  from, bi, z);
    return;
  }
  if (s > 0.0f) { /* the bytes of a requantization dequantized by s (q8_dq_zo): integers again */
    ut_str_printf(out,
                  "    for (long i = 0; i < %" PRId64 "L; i++) {\n      float v = hp_rint(%s(((const %s *)%s)[i]) / %#.9gf) + %d.0f;\n"
                  "      ((uint8_t *)%s)[%s] = v == v ? (uint8_t)(v < 0.0f ? 0.0f : v > 255.0f ? 255.0f : v) : 0;\n    }\n",
                  n, ld, t, from, s, z, to, bi);
    return;
  }
  ut_str_printf(out,
                "    for (long i = 0; i < %" PRId64 "L; i++) {\n      float v = %s(((const %s *)%s)[i]) + %d.0f;\n"
                "      ((uint8_t *)%s)[%s] = v == v ? (uint8_t)(v < 0.0f ? 0.0f : v > 255.0f ? 255.0f : v) : 0;\n    }\n",
                n, ld, t, from, z, to, bi);
}

/* <fn>_q8fb(pool, bufs) of job j (kernel r) holding its input or output as
 * bytes: the template's run when the int8 kernel cannot (a weight no int8,
 * a NaN): on a copy of the input in its dtype, into a copy of the output
 * stored back as bytes; the template reached through <fn> with the int8
 * form replaced by <fn>_q8off (which <fn>_q8 declines at once). */
static void q8_fallback(ut_str *out, const rc_ctx *c, int r, const char *fn, const q8_job *j) {
  const fn_kernel *K = &c->f->kernels[r];
  int nargs = K->nreads + K->nwrites + 2;
  int64_t nx = j->nb * j->x_bs, ny = j->nb * j->y_bs;
  ut_str_printf(out, "static int %s(hprt_pool *pool, void *const *bufs);\nstatic int %s_q8off[16];\n", fn, fn);
  ut_str_printf(out, "static int %s_q8fb(hprt_pool *pool, void *const *bufs) {\n  void *b2[%d];\n  memcpy(b2, bufs, sizeof b2);\n", fn,
                nargs);
  char xsrc[64], ydst[64];
  snprintf(xsrc, sizeof xsrc, "bufs[%d]", j->X.slot);
  snprintf(ydst, sizeof ydst, "bufs[%d]", j->Y.slot);
  ut_str_puts(out, "  void *xs = NULL, *ys = NULL, *rs = NULL;\n  int rc = 2;\n");
  if (j->held_in) ut_str_printf(out, "  xs = malloc(%" PRId64 "UL);\n", nx * tiny_dtype_size(j->X.dtype));
  if (j->held_out) ut_str_printf(out, "  ys = malloc(%" PRId64 "UL);\n", ny * tiny_dtype_size(j->Y.dtype));
  if (j->held_res) ut_str_printf(out, "  rs = malloc(%" PRId64 "UL);\n", ny * tiny_dtype_size(j->epi[j->ri].dtype));
  ut_str_printf(out, "  if (%s && %s && %s) {\n", j->held_in ? "xs" : "1", j->held_out ? "ys" : "1", j->held_res ? "rs" : "1");
  if (j->held_in) {
    ut_str_printf(out, "    b2[%d] = xs;\n", j->X.slot);
    q8_convert(out, j->X.dtype, "xs", xsrc, nx, (int)j->q.za, 0.0f, false, j->q.x_vnni4 ? j->xlen : 0);
  }
  if (j->held_res) { /* the residual's tensor (laid out like y, q8_res_buf) */
    char rsrc[64];
    snprintf(rsrc, sizeof rsrc, "bufs[%d]", j->epi[j->ri].slot);
    ut_str_printf(out, "    b2[%d] = rs;\n", j->epi[j->ri].slot);
    q8_convert(out, j->epi[j->ri].dtype, "rs", rsrc, ny, j->rz, 0.0f, false, 0);
  }
  if (j->held_out) ut_str_printf(out, "    b2[%d] = ys;\n", j->Y.slot);
  ut_str_printf(out, "    b2[%d] = (void *)%s_q8off;\n    rc = %s(pool, b2);\n", K->nreads + K->nwrites + 1, fn, fn);
  if (j->held_out) {
    ut_str_puts(out, "    if (!rc) {\n");
    q8_convert(out, j->Y.dtype, ydst, "ys", ny, j->zo, j->ys, true, j->q.y_vnni4 ? j->ylen : 0);
    ut_str_puts(out, "    }\n");
  }
  ut_str_puts(out, "  }\n  free(xs);\n  free(ys);\n  free(rs);\n  return rc;\n}\n");
}

/* <fn>_q8(pool, bufs) of job j (kernel r, the int8 kernel kfn): per batch
 * element the input as u8 (or held so), the kernel, the output pass (none
 * when held); -1 when the weight (or a requantization's bias) is no int8
 * (int32): the caller then runs the template (or <fn>_q8fb does). */
static void q8_wrapper(ut_str *out, const rc_ctx *c, int r, const char *fn, const char *kfn, const q8_job *j) {
  const fn_kernel *K = &c->f->kernels[r];
  int xs = tiny_dtype_size(j->X.dtype), ys = tiny_dtype_size(j->Y.dtype);
  bool held = j->held_in || j->held_out || j->held_res;
  /* the kernel stores the held output itself (its post hook the output pass's steps), or its sums
   * as y (q8_sums_are_y): no output pass */
  bool kout = (j->held_out && (j->rq.post < 0 || j->q.post)) || q8_sums_are_y(j);
  int64_t yb = kout ? 0 : (j->yrows * j->ylen * (j->rq.ok ? 1 : 4) + 63) / 64 * 64; /* bytes, or fp32 sums */
  int64_t xb = j->held_in ? 0 : j->xrows * j->xlen;
  char no[96], nb[200];
  snprintf(no, sizeof no, held ? "return %s_q8fb(pool, bufs)" : "return -1", fn);
  if (j->nb_expr) snprintf(nb, sizeof nb, "(%s)", j->nb_expr); /* this binding's images */
  else snprintf(nb, sizeof nb, "%" PRId64 "L", j->nb);
  if (held) q8_fallback(out, c, r, fn, j);
  ut_str_printf(out, "/* the int8 kernel (the input %s u8 - %d%s%s%s%s), -1: the weight is no int8 */\n", j->held_in ? "held as" : "proven",
                (int)j->q.za, j->rq.ok ? ", its epilogue requantizing to bytes" : "", j->held_out ? " held as the output" : "",
                j->rq.ok && j->rq.post >= 0 && q8_has_res(j) ? ", a tensor added, requantized again" : "",
                j->held_res ? ", the tensor added held as bytes" : "");
  ut_str_printf(out, "static int %s_q8(hprt_pool *pool, void *const *bufs) {\n  int *wp = (int *)bufs[%d];\n", fn,
                K->nreads + K->nwrites + 1);
  if (held) ut_str_printf(out, "  if (wp == %s_q8off) return -1; /* <fn>_q8fb's call of the template */\n", fn);
  if (rt_knobs_or_default(c->knobs)->int8_decline) ut_str_printf(out, "  if (wp) %s; /* the knob int8_decline */\n", no);
  else ut_str_printf(out, "  if (!wp[0]) %s;\n", no);
  cc_ep_array(out, j->epi, j->nepi);
  if (j->rq.ok) ut_str_printf(out, "  if (!wp[1] && %s_q8rq(wp, ep)) return 2;\n  if (wp[1] != 1) %s;\n", fn, no);
  ut_str_printf(out,
                "  char *acc = hp_q8_scratch(%" PRId64 "UL + %" PRId64 "UL + 1);\n"
                "  uint8_t *u = (uint8_t *)(acc + %" PRId64 "L);\n"
                "  int rc = !acc ? 2 : 0;\n"
                "  for (long n = 0; n < %s && !rc; n++) {\n"
                "    %s_q8ctx cx = {(const char *)bufs[%d] + (%" PRId64 "L + n * %" PRId64 "L) * %d, u, acc,\n"
                "                   (char *)bufs[%d] + (%" PRId64 "L + n * %" PRId64 "L) * %d, ep, 0%s};\n",
                yb, xb, yb, nb, fn, j->X.slot, j->X.offset, j->x_bs, j->held_in ? 1 : xs, j->Y.slot, j->Y.offset, j->y_bs,
                j->held_out ? 1 : ys, q8_has_res(j) ? ", n" : "");
  if (!j->held_in)
    ut_str_printf(out, "    hprt_pool_run(pool, %d, %s_q8in, &cx);\n"
                       "    if (cx.nan) %s; /* the template propagates it (and writes all of y) */\n",
                  (int)j->xrows, fn, no);
  char hook[200] = "";
  if (j->q.post) snprintf(hook, sizeof hook, ", %s_q8post, &cx", fn);
  ut_str_printf(out, "    if (%s(pool, (const char *)wp + 64, %s, %s%s)) rc = 2;\n", kfn, j->held_in ? "cx.x" : "u", kout ? "cx.y" : "acc", hook);
  if (!kout) ut_str_printf(out, "    else hprt_pool_run(pool, %d, %s_q8out, &cx);\n", (int)j->yrows, fn);
  ut_str_puts(out, "  }\n  return rc;\n}\n");
}

/* Worth it when the multiply-adds saved (the int8 kernel does about twice
 * the bf16 GEMM template's rate: ~2 ps saved per multiply-add at 2 threads)
 * outweigh the extra passes over the input and the output (~0.5 ns an
 * element): M N K >= Q8_GAIN (input + output elements); mnk is weighted by
 * the template's own cost (Q8_DIRECT for the direct conv template) and by
 * Q8_AMX where the AMX-INT8 variant is emitted (q8_emit). */
bool cc_q8_pays(double mnk, double xel, double yel) { return mnk >= Q8_GAIN * (xel + yel); }

int cc_q8_whole(const rc_ctx *c, int r, const ct_tensor *t, int64_t n, const ct_epi *epi, int nepi) {
  const fn_kernel *K = &c->f->kernels[r];
  if (t->slot < 0 || t->offset != 0 || t->slot >= K->nreads + K->nwrites) return -1;
  for (int i = 0; i < nepi; i++)
    if (epi[i].slot == t->slot) return -1;
  int b = t->slot < K->nreads ? K->reads[t->slot] : K->writes[t->slot - K->nreads];
  return c->f->buffers[b].numel == n ? b : -1;
}

/* j->ri, j->rbuf: where j's output pass adds a tensor (one RESIDUAL step,
 * not a product, after its first requantization), that step and the buffer
 * of its tensor when it is read whole from offset 0 (laid out like the
 * output: res_ok) by no other operand of kernel r; else -1. */
static void q8_res_buf(const rc_ctx *c, int r, q8_job *j) {
  const fn_kernel *K = &c->f->kernels[r];
  j->ri = j->rbuf = -1;
  if (!j->rq.ok || j->rq.post < 0 || !j->res_ok) return;
  for (int i = j->rq.post; i < j->nepi; i++) {
    if (j->epi[i].kind != CT_EPI_RESIDUAL && j->epi[i].kind != CT_EPI_RESFMA) continue;
    if (j->ri >= 0 || (j->epi[i].kind == CT_EPI_RESIDUAL && j->epi[i].mul)) return (void)(j->ri = -1);
    j->ri = i;
  }
  int sl = j->ri < 0 ? -1 : j->epi[j->ri].slot;
  if (sl < 0 || sl >= K->nreads || j->epi[j->ri].off != 0 || sl == j->X.slot || sl == j->Y.slot) return (void)(j->ri = -1);
  for (int i = 0; i < j->nepi; i++)
    if (i != j->ri && j->epi[i].slot == sl) return (void)(j->ri = -1);
  int b = K->reads[sl];
  if (c->f->buffers[b].numel != j->nb * j->y_bs) return (void)(j->ri = -1);
  j->rbuf = b;
}

/* Whether job j's output pass runs as its kernel's post hook (q8_post):
 * the output held as bytes, requantized twice (rq.post), y the kernel's
 * [M][N] row-major (no stride-1 conv but 1x1, whose grid has other
 * columns), and every step of the pass in its vector form (q8_vec_steps:
 * a residual held as bytes; the scalar hook is slower than the pass) or
 * none reading a tensor (a QDQ GELU: one table of bytes, cc_q8_lut). */
static bool q8_fuse_post(const q8_job *j) {
  const cgen_qgemm_spec *q = &j->q;
  if (!(j->held_out && j->rq.ok && j->rq.post >= 0 && cgen_qgemm_post_ok(q) && q->y_dtype == TINY_U8 && j->yrows == q->m &&
        j->ylen == q->n))
    return false;
  uint8_t lut[256];
  return cc_q8_vec_ok(j) || cc_q8_lut(j, lut); /* else one table (cc_q8_post) */
}

/* Job j as <fn>_q8(pool, bufs) (kernel r): 0 / 2 as a kernel, -1 when the
 * weight is no int8 (the caller then runs the template); the packed form
 * 1 (pk).  False, emitting nothing, when the generator or an epilogue
 * step refuses it. */
static bool q8_emit(rc_ctx *c, int r, const char *fn, ut_str *out, const q8_job *j, rc_packed *pk) {
  q8_job jr = *j; /* the epilogue as the kernel's own requantization, where it is one */
  /* the AMX-INT8 variant where this host runs it and it pays (cgen_qamx.c) */
  jr.q.amx = rt_knobs_or_default(c->knobs)->amx != RT_AMX_OFF && ut_cpu_amx_int8() ? 1 : 0;
  int isa = rt_knobs_or_default(c->knobs)->int8_isa; /* HARP_INT8_ISA: a variant forced (no AMX then) */
  if (isa != RT_INT8_ISA_AUTO) jr.q.amx = 0, jr.q.force_isa = isa == RT_INT8_ISA_AVX2 ? CGEN_ISA_AVX2 : CGEN_ISA_SCALAR;
  int order = rt_knobs_or_default(c->knobs)->int8_order; /* HARP_INT8_ORDER */
  jr.q.ws = order == RT_INT8_ORDER_WS ? 1 : order == RT_INT8_ORDER_TILES ? -1 : 0;
  if (q8_requant(j->epi, j->nepi, j->bias_col, j->Y.dtype, &jr.rq))
    jr.q.y_dtype = TINY_U8, jr.q.zy = -jr.rq.lo, jr.q.lo = 0, jr.q.hi = jr.rq.hi - jr.rq.lo;
  /* VNNI-4 bytes (cc_q8_plan.v4): a 1x1 conv of stride 1 reads them, an int8 conv storing its own writes them */
  const cgen_qgemm_spec *q = &j->q;
  bool v4r = q->weight_a && q->k % 4 == 0 && cgen_qgemm_c11(q);
  bool v4w = q->weight_a && q->m % 4 == 0 && jr.rq.ok && jr.rq.post < 0;
  int zo = jr.zo = jr.rq.post >= 0 ? q8_post_zo(j->epi, j->nepi, &jr.rq) : q8_zo(&jr.rq);
  if (zo < 0) zo = jr.zo = q8_dq_zo(j->epi, j->nepi, &jr.rq, &jr.ys);
  jr.xbuf = j->rep ? -1 : cc_q8_whole(c, r, &j->X, j->nb * j->x_bs, j->epi, j->nepi); /* gathered: never held */
  jr.ybuf = cc_q8_whole(c, r, &j->Y, j->nb * j->y_bs, j->epi, j->nepi);
  q8_res_buf(c, r, &jr);
  /* the buffers held as bytes, decided from the first emission's facts; none
   * over a run-time batch (their passes print the element counts) */
  const cc_q8_plan *hp = j->nb_expr ? NULL : c->q8;
  if (hp && jr.xbuf >= 0 && hp->hold[jr.xbuf] >= 0) jr.held_in = true, jr.q.za = hp->hold[jr.xbuf];
  if (hp && jr.rbuf >= 0 && hp->hold[jr.rbuf] >= 0) jr.held_res = true, jr.rz = hp->hold[jr.rbuf];
  if (hp && jr.ybuf >= 0 && hp->hold[jr.ybuf] >= 0 && hp->hold[jr.ybuf] == zo) jr.held_out = true;
  if (jr.held_out && jr.ys > 0) jr.rq.post = -1; /* the DQ is the readers' (q8_hold.c checked they take it) */
  jr.q.x_vnni4 = jr.held_in && v4r && hp->v4[jr.xbuf];
  jr.q.y_vnni4 = jr.held_out && v4w && hp->v4[jr.ybuf];
  jr.q.post = q8_fuse_post(&jr);
  j = &jr;
  char kfn[160];
  snprintf(kfn, sizeof kfn, "%s_q", fn);
  ut_str body, tasks;
  ut_str_init(&body);
  ut_str_init(&tasks);
  harp_error e2 = {0};
  bool ok = cgen_qgemm(&e2, &j->q, kfn, &body) == HARP_OK && q8_tasks(&tasks, fn, j) &&
            (!cc_has_resfma(j->epi, j->nepi) || cc_q8_slow(&tasks, fn, j));
  double mnk = (double)j->q.m * (double)j->q.n * (double)j->q.k * (j->direct ? Q8_DIRECT : 1.0) * (j->q.amx ? Q8_AMX : 1.0);
  double xel = (double)j->xrows * j->xlen, yel = (double)j->yrows * j->ylen;
  /* an exact QDQ Add step: no template applies it (cc_emit_resfma), the int8 kernel whether it pays or not */
  if (ok && rt_knobs_or_default(c->knobs)->int8 != RT_INT8_FORCE && !cc_has_resfma(j->epi, j->nepi) &&
      !cc_q8_pays(mnk, j->held_in ? 0 : xel, j->held_out ? 0 : yel)) {
    ok = false; /* a candidate should buffers it touches be held */
    if (hp)
      c->q8->k[r] = (cc_q8_fact){.cand = true, .mnk = mnk, .xel = xel, .yel = yel, .xbuf = j->xbuf, .ybuf = j->ybuf, .zo = zo,
                                 .has_r = j->rbuf >= 0, .rbuf = j->rbuf, .ys = j->ys, .v4r = v4r, .v4w = v4w};
  }
  if (ok) {
    cc_q8_scratch(out);
    ut_str_puts(out, body.buf);
    q8_wpack(out, fn, kfn, j->wch, j->wk, j->W.offset);
    ut_str_puts(out, tasks.buf);
    if (j->rq.ok) q8_rq_setup(out, fn, kfn, j);
    q8_wrapper(out, c, r, fn, kfn, j);
    pk->n = 2, pk->slot[1] = j->W.slot, pk->key[1][0] = 0;
    if (hp)
      c->q8->k[r] = (cc_q8_fact){.q8 = true, .xbuf = j->xbuf, .ybuf = j->ybuf, .zo = zo, .held_in = j->held_in, .held_out = j->held_out,
                                 .has_r = j->rbuf >= 0, .rbuf = j->rbuf, .held_res = j->held_res, .ys = j->ys, .v4r = v4r,
                                 .v4w = v4w, .v4_in = j->q.x_vnni4, .v4_out = j->q.y_vnni4};
  }
  ut_str_free(&body);
  ut_str_free(&tasks);
  return ok;
}

/* cc_q8_act, or, rt_batch, in a ShapeSet object too (a conv run an image at
 * a time over a run-time batch: every size the int8 kernel prints is one image's). */
static bool q8_act(const rc_ctx *c, const ct_tensor *x, int *za, bool rt_batch) {
  return rt_knobs_or_default(c->knobs)->int8 != RT_INT8_OFF && (!c->ngen_syms || rt_batch) && cc_q8_input(c->g, x->node, za);
}

bool cc_q8_act(const rc_ctx *c, const ct_tensor *x, int *za) { return q8_act(c, x, za, false); }

/* Whether kernel r may take the int8 kernel with weight w and input x
 * (its zero point *za); rt_batch: q8_act's. */
static bool q8_ok(const rc_ctx *c, bool prepacked, const ct_tensor *w, const ct_tensor *x, int *za, bool rt_batch) {
  return prepacked && w->dtype == TINY_BF16 && q8_act(c, x, za, rt_batch);
}

/* The int8 form of conv cv (kernel r, its template's wrapper named fn):
 * emits <fn>_q8(pool, bufs), 0 / 2 as a kernel, -1 when the weight is no
 * int8 (the caller then runs the template), and the packed form 1 (pk).
 * False, emitting nothing, when cv is not one it takes: groups, a weight
 * not packed once, an input not proven 8-bit (cc_q8_input), padding not
 * the same on both sides, an epilogue step it does not apply.  direct: cv
 * is on the direct conv template (not a 1x1 GEMM's), priced as such;
 * nb_expr: a ShapeSet object's batch (C), cv->n its corner's, else NULL. */
static bool q8_conv(rc_ctx *c, int r, const char *fn, ut_str *out, const ct_conv *cv, bool prepacked, bool direct, bool res_ok,
                    const char *nb_expr, rc_packed *pk) {
  int za;
  if (cv->groups != 1 || !q8_ok(c, prepacked, &cv->W, &cv->X, &za, nb_expr != NULL)) return false;
  int64_t oh = (cv->h + cv->pad[0] + cv->pad[2] - cv->dil[0] * (cv->kh - 1) - 1) / cv->stride[0] + 1;
  int64_t ow = (cv->w + cv->pad[1] + cv->pad[3] - cv->dil[1] * (cv->kw - 1) - 1) / cv->stride[1] + 1;
  int64_t oh2 = (cv->h + 2 * cv->pad[0] - cv->dil[0] * (cv->kh - 1) - 1) / cv->stride[0] + 1;
  int64_t ow2 = (cv->w + 2 * cv->pad[1] - cv->dil[1] * (cv->kw - 1) - 1) / cv->stride[1] + 1;
  if (oh != oh2 || ow != ow2 || oh < 1 || ow < 1) return false;
  q8_job j = {.X = cv->X, .W = cv->W, .Y = cv->Y, .nb = cv->n, .nb_expr = nb_expr, .nepi = cv->nepi, .epi = cv->epi, .direct = direct,
              .res_ok = res_ok};
  cgen_qgemm_spec *q = &j.q;
  cgen_qgemm_spec_init(q, cv->oc, oh * ow, cv->c * cv->kh * cv->kw);
  q->weight_a = true, q->w_kmajor = false;
  q->x_dtype = TINY_U8, q->y_dtype = TINY_FP32, q->za = za;
  q->conv.c = cv->c, q->conv.h = cv->h, q->conv.w = cv->w, q->conv.kh = cv->kh, q->conv.kw = cv->kw;
  q->conv.sh = cv->stride[0], q->conv.sw = cv->stride[1], q->conv.ph = cv->pad[0], q->conv.pw = cv->pad[1];
  q->conv.dh = cv->dil[0], q->conv.dw = cv->dil[1];
  j.xrows = cv->c, j.xlen = cv->h * cv->w, j.yrows = cv->oc, j.ylen = oh * ow;
  j.x_bs = j.xrows * j.xlen, j.y_bs = j.yrows * j.ylen, j.wch = cv->oc, j.wk = q->k;
  return q8_emit(c, r, fn, out, &j, pk);
}

/* cc_emit_q8conv: a conv of the direct conv template's. */
bool cc_emit_q8conv(rc_ctx *c, int r, const char *fn, ut_str *out, const ct_conv *cv, bool prepacked, const char *nb_expr,
                    rc_packed *pk) {
  return q8_conv(c, r, fn, out, cv, prepacked, true, true, nb_expr, pk); /* a residual is laid out like y (ct_read_conv) */
}

/* g, or (one row: the rows' strides, any in the read, unused) its copy in
 * *d with them dense, as the checks below read them. */
static const ct_gemm *q8_one_row(const ct_gemm *g, ct_gemm *d) {
  if (g->M != 1) return g;
  *d = *g;
  d->a_sm = d->K, d->c_sm = d->N;
  for (int i = 0; i < d->nepi; i++)
    if (d->epi[i].kind == CT_EPI_RESIDUAL || d->epi[i].kind == CT_EPI_RESFMA) d->epi[i].s_m = d->N;
  return d;
}

/* GEMM g on the int8 kernel: a 1x1 conv in NCHW (C[n][oc][p] = W[oc][c]
 * x[n][c][p], the weight A as cc_emit_q8conv's), or x W with the weight B
 * shared by the batches (C[b][m][n] = x[b][m][k] W[k][n] or W^T's); x
 * gathered dense first (g->nrep, one image: a patchify conv's patches) is
 * read through the gather, and its C^T output (NCHW) computed as W^T x^T. */
bool cc_emit_q8gemm(rc_ctx *c, int r, const char *fn, ut_str *out, const ct_gemm *g0, bool prepack_a, bool prepack_b,
                    rc_packed *pk) {
  ct_gemm gd;
  const ct_gemm *g = q8_one_row(g0, &gd);
  int64_t M = g->M, N = g->N, K = g->K, nb = g->batch[0];
  int za;
  /* C^T dense ([N][M]: a patchify conv's NCHW output) from a gathered A: the weight as A then */
  bool ct = g->nrep && nb == 1 && M > 1 && g->c_sm == 1 && g->c_sn == M;
  if (g->batch[1] != 1 || (!ct && (g->c_sn != 1 || g->c_sm != N)) || (nb > 1 && g->c_sb[0] != M * N)) return false;
  /* A gathered dense first (nrep: a patchify conv's patches), one image: the int8 kernel reads
   * its input through the same gather (a copy rounding to bf16 / fp16 keeps the 8-bit integers) */
  int64_t rn = 1;
  int rb = -1; /* the dimensions of the gather that make A's rows */
  for (int i = 0; i < g->nrep; i++) rn *= g->rep_size[i], rb = rb < 0 && rn == M ? i + 1 : rb;
  if (g->nrep ? nb != 1 || rn != M * K || rb < 0 || g->A0.slot < 0 : g->a_round != TINY_FP32) return false;
  bool res_ok = true; /* each tensor added laid out like C */
  ct_epi et[CT_MAX_EPI]; /* ct: the steps of C^T (a bias per column one per row) */
  for (int i = 0; i < g->nepi; i++) {
    et[i] = g->epi[i];
    if (ct && (et[i].kind == CT_EPI_BIAS_N || et[i].kind == CT_EPI_BIAS_M))
      et[i].kind = et[i].kind == CT_EPI_BIAS_N ? CT_EPI_BIAS_M : CT_EPI_BIAS_N;
    if (g->epi[i].kind == CT_EPI_RESIDUAL || g->epi[i].kind == CT_EPI_RESFMA)
      res_ok &= ct ? g->epi[i].s_m == 1 && g->epi[i].s_n == M
                   : g->epi[i].s_n == 1 && g->epi[i].s_m == N && (nb <= 1 || g->epi[i].s_b0 == M * N);
  }
  q8_job j = {.Y = g->C, .nb = nb, .y_bs = M * N, .nepi = g->nepi, .epi = ct ? et : g->epi, .res_ok = res_ok};
  if (prepack_a) { /* the 1x1 conv: a 1-row image of N pixels */
    if (g->a_sk != 1 || g->a_sm != K || g->a_sb[0] || g->b_sn != 1 || g->b_sk != N || (nb > 1 && g->b_sb[0] != K * N) ||
        !q8_ok(c, true, &g->A, &g->B, &za, false))
      return false;
    ct_conv cv = {.n = nb, .c = K, .h = 1, .w = N, .oc = M, .kh = 1, .kw = 1, .groups = 1, .X = g->B, .W = g->A, .Y = g->C,
                  .nepi = g->nepi};
    cv.stride[0] = cv.stride[1] = cv.dil[0] = cv.dil[1] = 1;
    memcpy(cv.epi, g->epi, sizeof cv.epi);
    return q8_conv(c, r, fn, out, &cv, true, false, res_ok, NULL, pk);
  }
  bool kmaj = g->b_sn == 1 && g->b_sk == N, cmaj = g->b_sk == 1 && g->b_sn == K;
  const ct_tensor *ax = g->nrep ? &g->A0 : &g->A;
  if (!prepack_b || g->b_sb[0] || !(kmaj || cmaj) || g->a_sk != 1 || g->a_sm != K || (nb > 1 && g->a_sb[0] != M * K) ||
      !q8_ok(c, true, &g->B, ax, &za, false))
    return false;
  j.X = *ax, j.W = g->B, j.x_bs = M * K, j.bias_col = !ct, j.rep = g->nrep ? g : NULL, j.rep_t = ct, j.rep_b = rb;
  if (ct) { /* C^T = B^T A^T: the weight [N][K] as A (K-major where B is [K][N]), x = A^T [K][M] */
    cgen_qgemm_spec_init(&j.q, N, M, K);
    j.q.weight_a = true, j.q.w_kmajor = kmaj;
    j.xrows = K, j.xlen = M, j.yrows = N, j.ylen = M;
  } else {
    cgen_qgemm_spec_init(&j.q, M, N, K);
    j.q.weight_a = false, j.q.w_kmajor = kmaj;
    j.xrows = M, j.xlen = K, j.yrows = M, j.ylen = N;
  }
  j.q.x_dtype = TINY_U8, j.q.y_dtype = TINY_FP32, j.q.za = za;
  j.wch = N, j.wk = K;
  return q8_emit(c, r, fn, out, &j, pk);
}

bool cc_q8_gemv(const rc_ctx *c, const ct_gemm *g0) {
  ct_gemm gd;
  const ct_gemm *g = q8_one_row(g0, &gd);
  int za;
  bool kmaj = g->b_sn == 1 && g->b_sk == g->N, cmaj = g->b_sk == 1 && g->b_sn == g->K;
  double m = (double)g->M, n = (double)g->N, k = (double)g->K;
  return g->B.dtype == TINY_BF16 && g->batch[0] == 1 && g->batch[1] == 1 && !g->nrep && g->a_round == TINY_FP32 &&
         g->a_sk == 1 && g->a_sm == g->K && g->c_sn == 1 && g->c_sm == g->N && (kmaj || cmaj) && cc_q8_act(c, &g->A, &za) &&
         (rt_knobs_or_default(c->knobs)->int8 == RT_INT8_FORCE || cc_q8_pays(m * n * k, m * k, m * n));
}

void cc_q8_call(ut_str *out, const char *fn) { ut_str_printf(out, "  int q8 = %s_q8(pool, bufs);\n  if (q8 >= 0) return q8;\n", fn); }
