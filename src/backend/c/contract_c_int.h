/* contract_c_int.h — what the CPU's template printers share
 * (contract_c.c: the contractions and these helpers; contract_plan_c.c: the
 * plan as the templates' tuning; contract_rows_c.c: attention, softmax,
 * pooling, maps). */
#ifndef HARP_CONTRACT_C_INT_H
#define HARP_CONTRACT_C_INT_H

#include "cgen.h"
#include "contract_c.h"
#include "harp/tune.h"
#include "kernel/contract.h"

/* Declining a template: say why (it lands in a comment of the generated C). */
#define DECLINE(msg)    \
  do {                  \
    *why = (msg);       \
    return HARP_OK;     \
  } while (0)

/* A region's plan as a template reads it: the choice (NULL: the template's
 * built-in tuning) and the plan and tuning it became, for the generated C. */
typedef struct plan_use {
  rt_plan_choice *ch;
  char desc[320];
} plan_use;

/* A template generator behind one signature (cc_template_body). */
typedef harp_status (*gen_fn)(harp_error *e, const void *spec, const char *fn, ut_str *out);

/* The template steps of the shared reading as the C templates' epilogue;
 * false for a step they have no form of (CT_EPI_RESFMA: cc_emit_resfma). */
bool cc_epi_to_cgen(const ct_epi *in, int n, cgen_epi *out);
/* Whether kernel r may take the operand in `slot` packed once (a param read as stored). */
bool cc_packs_once(const rc_ctx *c, int r, int slot);
/* Kernel r (conv cv, else GEMM g) with an exact QDQ Add step: the int8
 * kernel, <fn>_q8slow its fallback (contract_resfma_c.c); *handled false
 * (*why) when the int8 kernel does not take it. */
harp_status cc_emit_resfma(rc_ctx *c, int r, const char *fn, ut_str *out, const ct_conv *cv, const ct_gemm *g, bool *handled,
                           const char **why, rc_packed *pk);
/* The one variant this machine runs best (the JIT compiles where it runs). */
unsigned cc_host_isa_mask(void);
/* The single ISA variant the JIT emits for a SIMD width. */
unsigned cc_isa_for_simd(int simd);
/* The JIT's variant: the one ISA `mask` names (packages keep every one). */
void cc_jit_variant(const rc_ctx *c, cgen_tuning *t, unsigned mask);
/* Append `what` to the plan's notes once. */
void cc_note_add(rt_plan_choice *ch, const char *what);
/* Region r's plan, or NULL for the built-in tuning. */
rt_plan_choice *cc_choice_of(const rc_ctx *c, int r);
/* Fill t from region r's plan (kind: 'g' GEMM, 'c' conv with the plan's
 * roles swapped when swap, 'a' attention; bm/bn for attention); the
 * choice, or NULL for the built-in tuning. */
rt_plan_choice *cc_plan_tuning(const rc_ctx *c, int r, char kind, bool swap, cgen_tuning *t, int *bm, int *bn,
                               plan_use *u);
/* Region r's plan's tile of its GEMM view's K (the template's KC), 0 when
 * it has no plan or the plan no such tile. */
int cc_plan_tile_k(const rc_ctx *c, int r);
/* The template's kernel kfn into out under the plan's tuning, else the
 * built-in one (with no plan, tune's conv_algo and kc kept); false: the
 * template refuses the shape itself. */
bool cc_template_body(rc_ctx *c, plan_use *pu, gen_fn gen, const void *spec, cgen_tuning *tune, int *bm, int *bn,
                      const char *kfn, ut_str *out);
/* Whether a template's spec takes its tune.splitk (set), and why not. */
typedef bool (*cc_splitk_ok_fn)(const void *spec, const char **why);
/* Region r's plan's split-K (algo_choice matmul splitk_reduce; its splitk,
 * else plan_splitk_factor's count) into *splitk, a member of spec, where ok
 * says the template takes it (the tuning line then says "splitk S").
 * Otherwise *splitk 0: a searched plan becomes implicit_gemm with a note,
 * so that plan.json says what runs; a plan given by the user is refused
 * (HARP_E_UNSUPPORTED, with ok's reason). contract_splitk_c.c. */
harp_status cc_plan_splitk(rc_ctx *c, int r, plan_use *pu, int *splitk, cc_splitk_ok_fn ok, const void *spec);
/* The same for conv s (cgen_conv_splitk_ok), with a note when it splits. */
harp_status cc_conv_plan_splitk(rc_ctx *c, int r, plan_use *pu, cgen_conv_spec *s);
/* A GEMM that is a 1x1 conv (s): the plan's split-K as the conv's, true
 * when it splits; else false, *c->e untouched, and the GEMM decides. */
bool cc_conv1x1_plan_splitk(rc_ctx *c, int r, plan_use *pu, cgen_conv_spec *s);
/* A kernel of fewer multiply-adds than a pool wake-up pays for runs on the
 * calling thread: the line that says so, into out. */
void cc_small_on_caller(ut_str *out, double work);
/* The same where some factors of the work are read at run time (a
 * ShapeSet object): work times the n factors, each the C expression fx[i]
 * or, where that is NULL, the constant fv[i]; the choice is made at run
 * time when any is an expression (the constants are the upper corner's,
 * which would wake the pool at every binding). */
void cc_small_on_caller_rt(ut_str *out, const char *const *fx, const int64_t *fv, int n, double work);
/* A window's sizes read at run time (a ShapeSet object's conv or pool): the
 * batch, height and width of its input as C expressions (NULL: the
 * constant n, h, w), and per axis the padded extent past the window (eh:
 * pad top + bottom - dilation (kh - 1) - 1) and the stride.
 * cc_emit_rt_out_hw opens a block "{ long n_, h_, w_, oh_, ow_" with this
 * run's values (the caller closes it). */
typedef struct cc_rt_geometry {
  const char *n_expr, *h_expr, *w_expr;
  int64_t n, h, w, eh, sh, ew, sw;
} cc_rt_geometry;
void cc_emit_rt_out_hw(ut_str *out, const cc_rt_geometry *g);

/* A ShapeSet object's batched GEMM, its rows read at run time
 * (contract_batch_c.c): the batch counts, one batch's rows as an
 * expression of the symbols, and the batch strides of A, B, C and each
 * epilogue tensor as C text (an expression or a constant); b_shared: B's
 * strides are 0 (one B for every batch: packed once where it is a weight). */
typedef struct cc_gemm_batch {
  int64_t n[2];
  char m[160], a[2][96], b[2][96], c[2][96], e[CT_MAX_EPI][2][96];
  bool b_shared;
} cc_gemm_batch;
/* Whether GEMM *gm (region r of c; not swapped) of more than one batch
 * runs a batch at a time with its rows at run time: then *bx filled and
 * *gm made one batch (batch 1, batch strides 0) of the upper corner's rows
 * (M), as the template sees it. */
bool cc_gemm_batch_rows(const rc_ctx *c, int r, ct_gemm *gm, bool swapped, cc_gemm_batch *bx);
/* The loop over bx's batches calling kfn (pool, A, B, C, epilogue
 * tensors) with a and b (C text of the operands' base) and C and the
 * epilogue tensors (`ep`, cc_ep_array) moved by each batch's strides; sets
 * the wrapper's `rc`. */
void cc_emit_gemm_batch_call(ut_str *out, const cc_gemm_batch *bx, const ct_gemm *gm, const char *kfn, const char *a,
                             const char *b);

/* A ShapeSet object's conv of which only the batch is read at run time,
 * run one image at a time on the constant-size kernel
 * (contract_conv_img.c): the batch's C expression, one image's elements
 * of X and Y (a residual's: Y's), its output pixels. */
typedef struct cc_conv_img {
  char n[160];
  int64_t x_stride, y_stride, pixels;
} cc_conv_img;
/* Whether conv *s (sizes read at run time, wino_min_px set where Winograd
 * may run; fp32, or any_dtype: x, y and a residual of 16 or 32 bits; dense,
 * its weight packed at model_init) runs an image at a time: then *img
 * filled and *s made one image of constant sizes (n 1, no n_expr, no
 * Winograd per binding). */
bool cc_conv_one_image(cgen_conv_spec *s, cc_conv_img *img, bool any_dtype);
/* The body of such a conv's wrapper after its `ep` array (cc_ep_array):
 * the small-work rule at this binding's images (per_pixel multiply-adds
 * an output pixel), then kfn (pool, W, X, Y, epilogue) per image, the
 * weight bufs[w], X bufs[x] and Y bufs[y] and a residual moved by one
 * image each; closes the function. */
void cc_emit_conv_images(ut_str *out, const char *kfn, const cgen_conv_spec *s, const cc_conv_img *img, double per_pixel,
                         int w, int x, int y);

#endif
