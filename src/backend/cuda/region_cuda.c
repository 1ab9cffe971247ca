/* region_cuda.c — one region of a Function as GPU kernels: the GPU target
 * for the kernel layer and the printers of the kernels it chooses.
 * Needs: the kernel layer (src/kernel/kernel.h: which kernel, and what it
 * reads), the CUDA generators, region_tmpl_cuda.c (the contraction
 * templates), generic_cuda.c.  Gives: cuda_emit_region and the launch
 * helpers of region_int.h.
 *
 * What the GPU has (gpu_target), in the kernel layer's order:
 *   1. contraction regions on the MMA templates: matmul -> cuda_gen_gemm
 *      (the SM90 TMA/wgmma branch when the Plan's arch is sm90 and the shape
 *      fits it, else SM80; A copied into scratch first when its reduced
 *      dimensions do not fold), conv -> cuda_gen_conv (implicit GEMM, split
 *      along K when the Plan says; not depthwise), attention ->
 *      cuda_gen_attn (strided q/k/v/out, K and V of one dtype); each reads
 *      its region's Plan and marks it applied, or says why not (a --plan
 *      override a template cannot follow is a located error);
 *   2. other regions the simple kernels cover, each tried in turn: softmax
 *      and layernorm over the last axis, a single reduction, an elementwise
 *      chain;
 *   3. anything else: the generic loop nest (generic_cuda.c).
 * The decision is the kernel layer's; a template that declines says why
 * (the reason travels with the launch, --dump gpu, and as a comment in the
 * generic kernel), and a generator that refuses sends the region on. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernel/kernel.h"
#include "backend/cuda/cuda_int.h"
#include "backend/cuda/cuda_plan.h"
#include "backend/cuda/region_int.h"
#include "harp/polycore.h"
#include "harp/region.h"
#include "harp/tune.h"

/* Kernel name k<r>_<what>. */
const char *cr_kname(cuda_rctx *c, int r, const char *what) {
  char buf[64];
  snprintf(buf, sizeof buf, "k%d_%s", r, what);
  return ut_arena_strdup(c->arena, buf);
}

/* fmt has one %s (a reason); the result lives in the context's arena. */
const char *cr_fmt_note(cuda_rctx *c, const char *fmt, const char *a) {
  ut_str s;
  ut_str_init(&s);
  ut_str_printf(&s, fmt, a);
  const char *r = s.buf ? ut_arena_strdup(c->arena, s.buf) : "?";
  ut_str_free(&s);
  return r;
}

/* Bind every parameter of k; false when a pointer breaks the alignment its
 * parameter declares (an element offset the template cannot take). */
static bool bind(cuda_launch *l, const cuda_kernel *k, const named_arg *na, int n) {
  for (int i = 0; i < k->nparams; i++) {
    const cuda_param *p = &k->params[i];
    const char *want = p->kind == CUDA_P_TMAP && p->tmap ? p->tmap->tensor : p->name;
    l->args[i] = (cuda_arg){CUDA_ARG_NULL, -1, 0};
    for (int j = 0; j < n; j++)
      if (na[j].name && !strcmp(na[j].name, want)) l->args[i] = na[j].arg;
    int align = p->kind == CUDA_P_TMAP ? 16 : p->align; /* TMA: 16-byte global addresses */
    if (l->args[i].kind != CUDA_ARG_NULL && align > 0 && l->args[i].offset % align) return false;
  }
  return true;
}

/* Run a generator; on a refusal drop what it added to the module. */
harp_status cr_try_gen(cuda_rctx *c, cr_gen_fn fn, const void *spec, const char *name, const char **why) {
  int n0 = c->mod->n;
  harp_error e2 = {0};
  if (fn(&e2, c->mod, spec, name) == HARP_OK) return HARP_OK;
  c->mod->n = n0;
  *why = cr_fmt_note(c, "the template refused: %s", e2.msg);
  return e2.code;
}

harp_status cr_gen_ew(harp_error *e, cuda_module *m, const void *s, const char *n) { return cuda_gen_ewise(e, m, s, n); }
static harp_status gen_red(harp_error *e, cuda_module *m, const void *s, const char *n) { return cuda_gen_reduce(e, m, s, n); }
static harp_status gen_sm(harp_error *e, cuda_module *m, const void *s, const char *n) { return cuda_gen_softmax(e, m, s, n); }
static harp_status gen_ln(harp_error *e, cuda_module *m, const void *s, const char *n) { return cuda_gen_layernorm(e, m, s, n); }

/* Add the launch of the kernel just generated, or drop it when its
 * arguments break an alignment (*why). */
harp_status cr_launch_last(cuda_rctx *c, int r, int n0, const named_arg *na, int n, bool *ok, const char **why) {
  const cuda_kernel *k = c->mod->k[c->mod->n - 1];
  cuda_launch *l = cuda_launch_add(c, k, r);
  if (!l) return ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
  *ok = bind(l, k, na, n);
  if (!*ok) {
    c->nlaunch--;
    c->mod->n = n0;
    *why = "an operand's element offset breaks the template's alignment";
  }
  return HARP_OK;
}

/* Launch of kernel k (already in the module) with arguments by name; false
 * (and no launch) when an argument breaks its parameter's alignment. */
harp_status cr_add_launch(cuda_rctx *c, int r, const cuda_kernel *k, const named_arg *na, int n, bool *ok) {
  cuda_launch *l = cuda_launch_add(c, k, r);
  if (!l) return ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
  *ok = bind(l, k, na, n);
  if (!*ok) c->nlaunch--;
  return HARP_OK;
}

/* ---- row regions ---------------------------------------------------------------------- */
static cuda_arg tensor_arg(const cuda_rctx *c, int r, const ct_tensor *t) {
  return t->slot < 0 ? (cuda_arg){CUDA_ARG_NULL, -1, 0} : cuda_arg_slot(c, r, t->slot, t->offset, t->dtype);
}

/* The rows of a row kernel: in -> out, dense, cols per row. */
static void rownorm_of(const cuda_rctx *c, int64_t rows, int64_t cols, const ct_tensor *in, const ct_tensor *out,
                       cuda_rownorm_spec *s) {
  memset(s, 0, sizeof *s);
  s->cols = cols;
  s->rows = rows;
  s->row_stride = cols;
  s->in_dtype = in->dtype;
  s->out_dtype = out->dtype;
  s->tune.arch = c->mod->arch;
}

static harp_status print_softmax(cuda_rctx *c, int r, const ct_softmax *sm, bool *done, const char **why) {
  if (!ct_softmax_plain(sm)) { /* the row kernel has no QDQ steps: the loop nests */
    *why = "a QDQ softmax (steps before the max or after the division): not on the row kernel";
    return HARP_OK;
  }
  cuda_rownorm_spec s;
  rownorm_of(c, sm->rows, sm->cols, &sm->x, &sm->y, &s);
  s.scale = sm->scale;
  bool rt = cuda_rows_at_run_time(c, r, sm->y.slot, &s); /* a ShapeSet build's rows */
  int n0 = c->mod->n;
  if (cr_try_gen(c, gen_sm, &s, cr_kname(c, r, "softmax"), why)) return HARP_OK;
  named_arg na[] = {{"x", tensor_arg(c, r, &sm->x)}, {"y", tensor_arg(c, r, &sm->y)}};
  harp_status st = cr_launch_last(c, r, n0, na, 2, done, why);
  if (!st && *done && rt) cuda_launch_rows(c, &s);
  return st;
}

static harp_status print_layernorm(cuda_rctx *c, int r, const ct_layernorm *ln, bool *done, const char **why) {
  cuda_rownorm_spec s;
  rownorm_of(c, ln->rows, ln->cols, &ln->x, &ln->y, &s);
  s.eps = ln->eps;
  s.has_gamma = ln->gamma.slot >= 0, s.has_beta = ln->beta.slot >= 0;
  s.gamma_dtype = ln->gamma.dtype, s.beta_dtype = ln->beta.dtype;
  bool rt = cuda_rows_at_run_time(c, r, ln->y.slot, &s); /* a ShapeSet build's rows */
  int n0 = c->mod->n;
  if (cr_try_gen(c, gen_ln, &s, cr_kname(c, r, "layernorm"), why)) return HARP_OK;
  named_arg na[] = {{"x", tensor_arg(c, r, &ln->x)},
                    {"gamma", tensor_arg(c, r, &ln->gamma)},
                    {"beta", tensor_arg(c, r, &ln->beta)},
                    {"y", tensor_arg(c, r, &ln->y)}};
  harp_status st = cr_launch_last(c, r, n0, na, 4, done, why);
  if (!st && *done && rt) cuda_launch_rows(c, &s);
  return st;
}

/* a single REDUCE (sum/max/min, fp32 accumulation) of a strided buffer:
 * [outer][red][inner] */
static harp_status print_reduce(cuda_rctx *c, int r, const ct_reduce *rd, bool *done, const char **why) {
  if ((*why = cuda_sizes_printed(c, r, rd->in.slot))) return HARP_OK;
  cuda_reduce_spec s;
  memset(&s, 0, sizeof s);
  s.outer = rd->outer, s.red = rd->red, s.inner = rd->inner;
  s.s_outer = rd->s_outer, s.s_red = rd->s_red, s.s_inner = rd->s_inner;
  s.op = rd->op;
  s.has_init = rd->has_init;
  s.init = rd->init;
  s.in_dtype = rd->in.dtype;
  s.out_dtype = rd->out.dtype;
  s.tune.arch = c->mod->arch;
  int n0 = c->mod->n;
  if (cr_try_gen(c, gen_red, &s, cr_kname(c, r, "reduce"), why)) return HARP_OK;
  named_arg na[] = {{"in", cuda_arg_slot(c, r, rd->in.slot, rd->in.offset, s.in_dtype)},
                    {"out", cuda_arg_slot(c, r, rd->out.slot, 0, s.out_dtype)}};
  return cr_launch_last(c, r, n0, na, 2, done, why);
}

/* The ops the elementwise kernel spells (gpu_target's op filter): every elementwise row of the op table, and CAST. */
static bool ew_op_ok(tiny_op op) { return tiny_op_is_elementwise(op) || op == TINY_CAST; }

/* an elementwise chain: every block over the output's points */
static harp_status print_ewise(cuda_rctx *c, int r, const ct_ewise *ew, bool *done, const char **why) {
  if ((*why = cuda_sizes_printed(c, r, ew->out.slot))) return HARP_OK;
  cuda_ew_spec s;
  memset(&s, 0, sizeof s);
  s.rank = ew->rank;
  memcpy(s.shape, ew->shape, sizeof(int64_t) * (size_t)ew->rank);
  s.ninputs = ew->ninputs;
  for (int i = 0; i < ew->ninputs; i++) {
    s.in[i].dtype = ew->in[i].t.dtype;
    memcpy(s.in[i].strides, ew->in[i].strides, sizeof(int64_t) * (size_t)ew->rank);
  }
  s.ninstr = ew->ninstr;
  for (int i = 0; i < ew->ninstr; i++) {
    const ct_ew_instr *x = &ew->instr[i];
    s.instr[i] = (cuda_ew_instr){.op = x->op, .a = x->a, .b = x->b, .c = x->c, .input = x->input, .imm = x->imm, .dtype = x->dtype};
  }
  s.out_dtype = ew->out.dtype;
  s.tune.arch = c->mod->arch;
  int n0 = c->mod->n;
  if (cr_try_gen(c, cr_gen_ew, &s, cr_kname(c, r, "ewise"), why)) return HARP_OK;
  named_arg na[CUDA_MAX_EW_IN + 1];
  char nm[CUDA_MAX_EW_IN][16]; /* "in" and any int: no truncation warning */
  for (int i = 0; i < s.ninputs; i++) {
    snprintf(nm[i], sizeof nm[i], "in%d", i);
    na[i] = (named_arg){nm[i], cuda_arg_slot(c, r, ew->in[i].t.slot, ew->in[i].t.offset, s.in[i].dtype)};
  }
  na[s.ninputs] = (named_arg){"out", cuda_arg_slot(c, r, ew->out.slot, 0, s.out_dtype)};
  return cr_launch_last(c, r, n0, na, s.ninputs + 1, done, why);
}

/* ---- the kernel of a region ----------------------------------------------------------- */
_Static_assert(CUDA_MAX_RANK <= CT_EW_MAX_RANK && CUDA_MAX_EW_IN <= CT_EW_MAX_IN && CUDA_MAX_EW_INSTR <= CT_EW_MAX_INSTR,
               "the kernel layer's elementwise reading holds the GPU kernel's");

/* What the GPU has, for the kernel layer (src/kernel/select.c decides). */
static const kn_target gpu_target = {
    .name = "GPU",
    /* the attention template rounds P to the operands' dtype as the
     * reference does, so it reads q/k/v from a rounding CAST; a GEMM's A
     * rounded on its way is copied, rounding, into scratch first */
    .att_cast_operands = true,
    .round_operands = true,
    /* every simple kernel is tried in turn; the last reason is kept */
    .nrows = 4,
    .rows = {{KN_SOFTMAX, KN_DECLINE_NEXT}, {KN_LAYERNORM, KN_DECLINE_NEXT}, {KN_REDUCE, KN_DECLINE_NEXT}, {KN_EWISE, KN_DECLINE_NEXT}},
    .gemm_max_repack = CUDA_MAX_RANK, /* the elementwise copy kernel's rank */
    .attn_same_kv_dtype = true,
    /* one input channel per group: an MMA of K = kh*kw wastes the tensor cores */
    .conv_depthwise = false,
    /* few output tiles over a long reduction: the Plan splits K (the cost
     * model chooses splitk_serial there), no longer the generic kernel */
    .conv_few_tiles = 0,
    .ewise = {CUDA_MAX_RANK, CUDA_MAX_EW_IN, CUDA_MAX_EW_INSTR, ew_op_ok},
};

/* Print the template kernel s chose for region r: *done, or *why it
 * refused. */
static harp_status print_kernel(cuda_rctx *c, int r, const kn_sel *s, bool *done, const char **why) {
  switch (s->kind) {
  case KN_GEMM: return cr_print_gemm(c, r, &s->u.gemm, done, why);
  case KN_CONV: return cr_print_conv(c, r, &s->u.conv, done, why);
  case KN_ATTENTION: return cr_print_attn(c, r, &s->u.attn, done, why);
  case KN_SOFTMAX: return print_softmax(c, r, &s->u.softmax, done, why);
  case KN_LAYERNORM: return print_layernorm(c, r, &s->u.layernorm, done, why);
  case KN_REDUCE: return print_reduce(c, r, &s->u.reduce, done, why);
  case KN_EWISE: return print_ewise(c, r, &s->u.ewise, done, why);
  default: return HARP_OK; /* no GPU template of that kind */
  }
}

harp_status cuda_emit_region(cuda_rctx *c, int r) {
  ct_src src = {c->g, c->pv, c->f, true, true, false, NULL, 0};
  kn_sel s;
  /* the knob no_templates (HARP_NO_TEMPLATES): contractions as loop nests */
  unsigned flags = rt_knobs_or_default(c->knobs)->no_templates ? KN_NO_CONTRACTION_TEMPLATES : 0;
  harp_status st = kn_select(&s, &gpu_target, &src, r, flags, c->e);
  bool done = false;
  while (!st && !done && s.kind != KN_GENERIC && s.kind != KN_GATHER) {
    const char *why = NULL;
    st = print_kernel(c, r, &s, &done, &why);
    if (!st && !done) st = kn_decline(&s, why);
  }
  if (!st && !done) { /* the generic kernel (a GATHER region's too), with the reason in a comment */
    if (s.first == KN_ATTENTION) c->nattn_generic++;
    const char *note = !s.why ? NULL
                       : cr_fmt_note(c, kn_is_contraction(s.why_kind) ? "the template declined (%s)" : "the simple kernel declined (%s)",
                                  s.why);
    st = cuda_gen_generic(c, r, cr_kname(c, r, "generic"), note);
  }
  kn_sel_free(&s);
  return st;
}
