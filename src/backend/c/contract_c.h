/* contract_c.h — the CPU's template kernels (contract_c.c), printed from
 * the kernel layer's reading (src/kernel/contract.h). */
#ifndef HARP_CONTRACT_C_H
#define HARP_CONTRACT_C_H

#include "kernel/contract.h"
#include "region_c.h"

/* Each appends `static int fn(hprt_pool *pool, void *const *bufs)` for
 * kernel r on its template (*handled), or nothing with *why saying why the
 * template refused the region (the kernel layer then moves on).
 *
 * *pk (region_c.h): the weights the kernel takes packed once: param buffers
 * that are a conv's weight or a GEMM's A (else B) read as they are, a
 * recurrent cell's GEMV weights (HARP_NO_PREPACK=1: never).  Then out also
 * has, for the packed form i (suffix "" for 0, "1" for 1):
 *   static long fn_wbytes<i>(void);    bytes of the packed form (this process's ISA variant)
 *   static int fn_wpack<i>(hprt_pool *pool, const void *w, void *wp);
 *                                   pack weight buffer w into wp (64-byte aligned); 0 = ok
 * and fn reads the packed form i from bufs[nreads + nwrites + i], which the
 * caller (emit_model.c's model_init) packed once and never writes again. */
harp_status cc_emit_gemm(rc_ctx *c, int r, const char *fn, ut_str *out, const ct_gemm *g, bool *handled, const char **why,
                       rc_packed *pk);
harp_status cc_emit_conv(rc_ctx *c, int r, const char *fn, ut_str *out, const ct_conv *cv, bool *handled, const char **why,
                       rc_packed *pk);
harp_status cc_emit_attention(rc_ctx *c, int r, const char *fn, ut_str *out, const ct_attn *at, bool *handled,
                            const char **why);
harp_status cc_emit_softmax(rc_ctx *c, int r, const char *fn, ut_str *out, const ct_softmax *sm, bool *handled,
                          const char **why);
harp_status cc_emit_pool(rc_ctx *c, int r, const char *fn, ut_str *out, const ct_pool *pl, bool *handled, const char **why);
/* A ShapeSet object's row sum / max over innermost axes, its rows read at
 * run time (reduce_c.c); ordinary compiles decline quietly (*why NULL). */
harp_status cc_emit_reduce(rc_ctx *c, int r, const char *fn, ut_str *out, const ct_reduce *rd, bool *handled,
                           const char **why);
/* A ShapeSet object's elementwise region whose inputs are read through
 * floor divisions (an upsample, a depth-to-space), every size read at run
 * time (gmap_c.c); ordinary compiles and regions it does not take leave
 * *handled false and out untouched. */
harp_status cc_try_gmap(rc_ctx *c, int r, const char *fn, ut_str *out, bool *handled);
/* Epilogue step ep on a scalar float `v` as one C statement or two (RELU,
 * RINT, ROUND, SCALE, CLAMP); false for any other kind (reduce_c.c). */
bool cc_epi_scalar(ut_str *o, const ct_epi *ep);
/* A region cut into pieces (ct_map_set) runs one map kernel per piece, in turn. */
harp_status cc_emit_map(rc_ctx *c, int r, const char *fn, ut_str *out, const ct_map_set *ms, bool *handled, const char **why);
/* The Tiny ops cgen_map has a vector form of (the CPU target's map_op). */
bool cc_map_op_ok(tiny_op op);
/* Kernel r runs the generic loop nest (why: the last template's reason, or
 * NULL): its plan, if any, is noted as not read. */
void cc_note_generic(rc_ctx *c, int r, const char *why);
/* `const void *ep[]` of the epilogue's tensors, from the kernel's bufs. */
void cc_ep_array(ut_str *o, const ct_epi *epi, int n);

/* contract_q8.c: whether Tiny node `node` provably holds integers x with
 * x + *za in [0, 255]; and conv cv (kernel r, wrapper fn, its template's
 * weight packed as form 0 when prepacked) also as the int8 kernel
 * <fn>_q8(pool, bufs): 0 / 2 as a kernel, -1 when the weight turned out
 * not to be int8 at model_init (then the template runs).  True when it
 * was emitted (pk's form 1).  nb_expr: a ShapeSet object's batch as C
 * (the conv run an image at a time, contract_conv_img.c), cv->n the
 * corner's; NULL elsewhere (a ShapeSet object then takes no int8 kernel). */
bool cc_q8_input(const tiny_graph *g, int node, int *za);
bool cc_emit_q8conv(rc_ctx *c, int r, const char *fn, ut_str *out, const ct_conv *cv, bool prepacked, const char *nb_expr,
                    rc_packed *pk);
/* The same for a GEMM that is a 1x1 conv in NCHW (the weight A packed) or
 * x W (the weight B packed); and the wrapper's call of <fn>_q8, falling
 * through to the template on -1. */
bool cc_emit_q8gemm(rc_ctx *c, int r, const char *fn, ut_str *out, const ct_gemm *g, bool prepack_a, bool prepack_b,
                    rc_packed *pk);
void cc_q8_call(ut_str *out, const char *fn);
/* Whether epilogue epi[0..n) has the exact QDQ Add step (CT_EPI_RESFMA),
 * which only the int8 kernels' output pass applies. */
bool cc_has_resfma(const ct_epi *epi, int n);
/* Whether GEMM g of at most a few rows (its A the activation, B a bf16
 * weight, one batch) takes the int8 kernel as x W once B is packed once (a
 * QDQ classifier's GEMV: the packed int8 weight is half the bytes the
 * skinny bf16 kernel streams each run): the layouts cc_emit_q8gemm takes,
 * A proven 8-bit, and the kernel pays with nothing held. */
bool cc_q8_gemv(const rc_ctx *c, const ct_gemm *g);
/* What contract_q8dw.c shares of contract_q8.c: whether c's kernels may
 * take an int8 kernel reading input x (the knob, no ShapeSet, x proven
 * 8-bit: cc_q8_input, its zero point *za); the
 * buffer of tensor t of kernel r when the kernel reads or writes all of it
 * (n elements) from offset 0 and no epilogue step of epi[0..nepi) reads
 * it, else -1; the zero point zo of the bytes y + zo in [0, 255] of an
 * epilogue that requantizes (bias per channel) to dtype yt, else -1; the
 * per-thread scratch hp_q8_scratch(bytes) (guarded, emit before use). */
bool cc_q8_act(const rc_ctx *c, const ct_tensor *x, int *za);
int cc_q8_whole(const rc_ctx *c, int r, const ct_tensor *t, int64_t n, const ct_epi *epi, int nepi);
int cc_q8_out_zo(const ct_epi *ep, int n, tiny_dtype yt);
void cc_q8_scratch(ut_str *out);
/* The epilogue steps ep[from..n) after a RINT while they keep integers of a
 * range: shifts by integers (summed in *off), clamps to integers and relu
 * (the range before the shifts in *lo, *hi), roundings to bf16 / fp16
 * exact on the range; the index of the first other step (n: none), -1
 * where a rounding is not exact or the range is empty. */
int cc_q8_int_steps(const ct_epi *ep, int from, int n, double *lo, double *hi, double *off);
/* contract_q8pool.c: max pool pl (kernel r, wrapper fn) of a QDQ model, as
 * a byte kernel where q8_hold.c holds its input (an int8 conv's
 * requantized bytes, dequantized by the scale the pool's QuantizeLinear
 * divides by) and its output as bytes: max commutes with that monotone
 * requantization, so the output bytes are the window's largest input
 * byte.  True when emitted; else it records what it would take
 * (cc_q8_fact) and emits nothing. */
bool cc_emit_q8pool(rc_ctx *c, int r, const char *fn, ut_str *out, const ct_pool *pl);
/* contract_q8dw.c: depthwise conv cv (kernel r, wrapper fn) of an input
 * proven 8-bit as <fn>_q8(pool, bufs), 0 / 2 as a kernel: integer sums
 * exact in fp32, reading and writing bytes where q8_hold.c holds its
 * buffers; with prepacked (the template's weight packed once as pk's form
 * 0) its own weight as form 1.  False, emitting nothing, when it does not
 * take cv. */
bool cc_emit_q8dw(rc_ctx *c, int r, const char *fn, ut_str *out, const ct_conv *cv, bool prepacked, rc_packed *pk);

/* q8_hold.c: int8 activations kept as bytes between int8 kernels.  A
 * temporary buffer that one int8 kernel writes through its requantizing
 * epilogue (bytes x + zo) and that only int8 kernels read, each as its
 * whole input or as the tensor its output pass adds (a QDQ residual, whose
 * writer's output pass stores its second requantization's bytes), holds
 * those bytes (in the first bytes of its storage)
 * instead of its dtype: the writer stores them, the readers take them as
 * their u8 input of zero point zo, no conversion pass on either side.
 * The kernels are emitted once recording what each int8 kernel is
 * (cc_q8_fact), the held buffers decided from that, emitted again holding
 * them, and once more without, should a kernel not have taken its part.
 * A held buffer whose readers are all 1x1 convs of stride 1 reading it as
 * their input, written by an int8 conv's own epilogue, holds its bytes
 * VNNI-4 (cc_q8_plan.v4): the AMX variant reads its B tiles there, no
 * packing pass. */
typedef struct cc_q8_fact {
  bool q8;                /* emitted with the int8 kernel */
  bool cand;              /* would be, but its conversion passes cost more than it saves (cc_q8_pays)
                             unless a buffer it reads or writes is held */
  double mnk, xel, yel;   /* its multiply-adds (weighted by template, cc_q8_pays), input and output elements (cand) */
  int xbuf, ybuf;         /* its input's / output's buffer, read / written whole from offset 0; else -1 */
  int zo;                 /* its epilogue requantizes: the output's bytes are x + zo; else -1 */
  bool held_in, held_out; /* emitted holding its input / output as bytes */
  bool has_r;             /* its output pass adds a tensor read whole from buffer rbuf (contract_q8.c's q8_res_buf) */
  int rbuf;
  bool held_res;          /* emitted holding that buffer as bytes */
  float ys;               /* > 0: its output is those bytes dequantized, ys * (byte - zo) (a QDQ op's DQ after
                             the requantization, which its readers take on: cc_emit_q8pool); 0: byte - zo */
  float xs;               /* the ys it needs of its input's writer (0 for the int8 convs) */
  int xz;                 /* pair: the zero point it needs its input's bytes at */
  bool pair;              /* it holds its input and its output as bytes, or neither (cc_emit_q8pool) */
  bool v4r, v4w;          /* it can read its input (x only) / write its output held VNNI-4 (cgen_qgemm.h's
                             x_vnni4 / y_vnni4: a 1x1 conv of stride 1 / an int8 conv storing its bytes) */
  bool v4_in, v4_out;     /* emitted holding its input / output VNNI-4 */
  bool qmap;              /* a map kernel (a QuantizeLinear's x / s + z, rint, clamp, ...) whose output, ybuf,
                             provably holds integers x with x + zo in [0, 255]: it may write them as held bytes */
} cc_q8_fact;
typedef struct cc_q8_plan {
  cc_q8_fact *k; /* per kernel */
  int *hold;     /* per buffer: -1, or the zero point of the bytes it holds */
  bool *v4;      /* per held buffer: its bytes laid out VNNI-4 ([C / 4][H W][4] per image: cgen_qgemm.h's
                    x_vnni4), where its writer and every reader can take that (cc_q8_fact.v4w, v4r) */
  int nk, nb;
} cc_q8_plan;
/* Whether the int8 kernel pays for mnk multiply-adds with passes over
 * xel input and yel output elements (0 where held). */
bool cc_q8_pays(double mnk, double xel, double yel);
cc_q8_plan *cc_q8_plan_new(const fn_function *f);
void cc_q8_plan_free(cc_q8_plan *p);
/* The buffers held, from the facts recorded (which it then clears); true when there is one. */
bool cc_q8_plan_decide(cc_q8_plan *p, const fn_function *f);
/* Whether every held buffer's writer and readers were emitted holding it. */
bool cc_q8_plan_kept(const cc_q8_plan *p, const fn_function *f);
/* No buffer held, no facts. */
void cc_q8_plan_clear(cc_q8_plan *p);

#endif
