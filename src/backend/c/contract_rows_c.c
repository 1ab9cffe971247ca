/* contract_rows_c.c — the CPU's attention, row softmax, pooling and
 * elementwise-map kernels printed from what the kernel layer read, on the
 * templates cgen_attn, cgen_softmax, cgen_pool and cgen_map (the
 * contractions: contract_c.c, whose plan helpers, contract_c_int.h, these
 * share).  A ShapeSet object's attention reads its batches, rows, keys and
 * the strides they move at run time (attn_rt_exprs).
 * Needs: contract_c_int.h, the kernel layer's reading (src/kernel/contract.h),
 * contract_q8.c's cc_q8_act / cc_q8_whole (a map writing held int8 bytes).
 * Gives: cc_emit_attention, cc_emit_softmax, cc_emit_pool, cc_emit_map,
 * cc_map_op_ok. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "contract_c_int.h"
#include "tiny/tiny_spell.h"

/* The generators behind one signature, for cc_template_body. */
static harp_status gen_attn(harp_error *e, const void *s, const char *fn, ut_str *o) { return cgen_attn(e, s, fn, o); }
static harp_status gen_softmax(harp_error *e, const void *s, const char *fn, ut_str *o) { return cgen_softmax(e, s, fn, o); }
static harp_status gen_pool(harp_error *e, const void *s, const char *fn, ut_str *o) { return cgen_pool(e, s, fn, o); }
static harp_status gen_map(harp_error *e, const void *s, const char *fn, ut_str *o) { return cgen_map(e, s, fn, o); }

/* ---- attention --------------------------------------------------------------------- */
/* Size *v (axis d of shape sh) read at run time: its expression into buf
 * and *e, and *v the largest value, when a symbol moves it. */
static void rt_size(const rc_ctx *c, const tiny_shape *sh, int d, int64_t *v, char *buf, const char **e) {
  if (rc_axis_expr(c, sh, d, *v, buf, 160, v)) *e = buf;
}

/* A ShapeSet object: attention *at's batch, rows and keys and the strides
 * of its operands that the symbols move, as expressions into ex (16 rows)
 * and *s; the sizes become the largest, which the template sizes for. */
static void attn_rt_exprs(const rc_ctx *c, ct_attn *at, cgen_attn_rt *s, char (*ex)[160]) {
  if (!c->ngen_syms) return;
  const tiny_node *N = c->g->nodes;
  const tiny_shape *os = &N[at->out.node].shape, *ks = &N[at->key_node].shape;
  rt_size(c, os, at->odim[0], &at->B, ex[0], &s->b);
  rt_size(c, os, at->odim[2], &at->M, ex[1], &s->m);
  rt_size(c, ks, at->key_dim, &at->N, ex[2], &s->n);
  const tiny_shape *sh[4] = {&N[at->q.node].shape, &N[at->k.node].shape, &N[at->v.node].shape, os};
  const int64_t *st[4] = {at->q_s, at->k_s, at->v_s, at->o_s};
  const char **rt[4] = {s->q, s->k, s->v, s->o};
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 2; j++)
      if (rc_stride_expr(c, sh[i], st[i][j], ex[3 + 2 * i + j], 160)) rt[i][j] = ex[3 + 2 * i + j];
  for (int j = 0; at->has_mask && j < 3; j++)
    if (rc_stride_expr(c, &N[at->mask.node].shape, at->mask_s[j], ex[11 + j], 160)) s->mask[j] = ex[11 + j];
}

harp_status cc_emit_attention(rc_ctx *c, int r, const char *fn, ut_str *out, const ct_attn *read, bool *handled,
                            const char **why) {
  ct_attn at = *read;
  char ex[16][160];
  cgen_attn_rt rt = {0};
  attn_rt_exprs(c, &at, &rt, ex);
  /* the kernel layer takes a causal mask where it is top-left aligned at
   * this binding; where M and N move apart, whether it is at another one
   * (at M = N a bottom-right mask is too) is not known: the nests then,
   * at every binding alike */
  if (at.causal && (rt.m || rt.n) && !(rt.m && rt.n && !strcmp(rt.m, rt.n)))
    DECLINE("a causal mask whose alignment may move with the binding (M and N apart)");
  cgen_attn_spec s;
  cgen_attn_spec_init(&s, at.B, at.H, at.M, at.N, at.D, TINY_FP32);
  s.rt = rt;
  s.dv = at.DV;
  s.q_dtype = at.q.dtype;
  s.kv_dtype = at.k.dtype;
  s.o_dtype = at.out.dtype;
  s.scale = at.scale;
  s.strided = true;
  memcpy(s.q_s, at.q_s, sizeof at.q_s), memcpy(s.k_s, at.k_s, sizeof at.k_s);
  memcpy(s.v_s, at.v_s, sizeof at.v_s), memcpy(s.o_s, at.o_s, sizeof at.o_s);
  s.causal = at.causal;
  if (at.has_mask) {
    s.has_mask = true;
    s.mask_dtype = at.mask.dtype;
    memcpy(s.mask_s, at.mask_s, sizeof s.mask_s);
  }
  plan_use pu;
  cc_plan_tuning(c, r, 'a', false, &s.tune, &s.bm, &s.bn, &pu);
  char kfn[128];
  snprintf(kfn, sizeof kfn, "%s_attn", fn);
  if (!cc_template_body(c, &pu, gen_attn, &s, &s.tune, &s.bm, &s.bn, kfn, out))
    DECLINE("the template refused the shape");
  ut_str_printf(out, "static int %s(hprt_pool *pool, void *const *bufs) {\n", fn);
  const char *fx[3] = {rt.b, rt.m, rt.n};
  const int64_t fv[3] = {at.B, at.M, at.N};
  cc_small_on_caller_rt(out, fx, fv, 3, (double)at.H * (at.D + at.DV));
  if (at.has_mask)
    ut_str_printf(out, "  const void *mask = (const char *)bufs[%d] + %" PRId64 " * %d;\n", at.mask.slot, at.mask.offset,
                  tiny_dtype_size(s.mask_dtype));
  else
    ut_str_puts(out, "  const void *mask = NULL;\n");
  ut_str_printf(out,
                "  return %s(pool, (const char *)bufs[%d] + %" PRId64 " * %d, (const char *)bufs[%d] + %" PRId64
                " * %d,\n           (const char *)bufs[%d] + %" PRId64 " * %d, mask, bufs[%d]) ? 2 : 0;\n}\n\n",
                kfn, at.q.slot, at.q.offset, tiny_dtype_size(at.q.dtype), at.k.slot, at.k.offset,
                tiny_dtype_size(at.k.dtype), at.v.slot, at.v.offset, tiny_dtype_size(at.v.dtype), at.out.slot);
  *handled = true;
  return HARP_OK;
}

/* ---- row kernels (softmax, pool) ------------------------------------------------------ */
/* Kernel `kfn` of a row kernel (`what`) into out: a plan reads as its
 * vector width (`note` says so in the plan's notes), and the C says which.
 * *refused: the generator refused the shape (out untouched). */
static harp_status row_kernel(rc_ctx *c, int r, gen_fn gen, const void *spec, cgen_tuning *tune, const char *what,
                            const char *note, const char *kfn, ut_str *out, bool *refused) {
  *refused = false;
  rt_plan_choice *ch = cc_choice_of(c, r);
  if (ch) {
    int vw = ch->plan.vec_width;
    tune->simd = vw >= 16 ? 16 : vw >= 8 ? 8 : vw > 0 ? 1 : 0;
    cc_note_add(ch, note);
  }
  cc_jit_variant(c, tune, ch ? cc_isa_for_simd(tune->simd) : cc_host_isa_mask());
  harp_error e2 = {0};
  ut_str body;
  ut_str_init(&body);
  if (gen(&e2, spec, kfn, &body)) {
    ut_str_free(&body);
    if (e2.code == HARP_E_NO_MEMORY) return ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
    *refused = true;
    return HARP_OK;
  }
  if (ch) {
    ch->applied = true;
    char *one = rt_plan_oneline(&ch->plan);
    ut_str_printf(out, "/* plan: %s\n   -> %s, simd %d */\n", one ? one : "?", what, tune->simd);
    free(one);
  }
  ut_str_puts(out, body.buf);
  ut_str_free(&body);
  return HARP_OK;
}

/* ---- row softmax ------------------------------------------------------------------ */
harp_status cc_emit_softmax(rc_ctx *c, int r, const char *fn, ut_str *out, const ct_softmax *read, bool *handled,
                          const char **why) {
  const ct_softmax sm = *read;
  cgen_softmax_spec s;
  cgen_softmax_spec_init(&s, sm.rows, sm.cols, sm.x.dtype);
  s.y_dtype = sm.y.dtype;
  s.scale = sm.scale;
  s.ymul = sm.ymul;
  s.npro = sm.npro, s.nepi = sm.nepi;
  if (!cc_epi_to_cgen(sm.pro, sm.npro, s.pro) || !cc_epi_to_cgen(sm.epi, sm.nepi, s.epi))
    DECLINE("a QDQ softmax step the kernel has no step for");
  char rows[160], cols[160]; /* a ShapeSet object: the rows of y and their length read at run time */
  const tiny_shape *ys = rc_slot_shape(c, r, sm.y.slot);
  bool dense = ys && ys->rank >= 1 && ys->d[ys->rank - 1].n == sm.cols;
  if (dense && rc_size_expr(c, ys, 0, ys->rank - 1, sm.rows, rows, sizeof rows)) s.rows_expr = rows;
  if (dense && rc_size_expr(c, ys, ys->rank - 1, ys->rank, sm.cols, cols, sizeof cols))
    s.cols_expr = cols, s.cols_hi = rc_size_hi(c, ys, ys->rank - 1, ys->rank);
  char kfn[128];
  snprintf(kfn, sizeof kfn, "%s_softmax", fn);
  bool refused;
  harp_status st = row_kernel(c, r, gen_softmax, &s, &s.tune, "softmax",
                            "softmax: the row kernel reads the vector width; rows split over the pool, the rest not used",
                            kfn, out, &refused);
  if (st) return st;
  if (refused) DECLINE("the softmax kernel refused the shape");
  ut_str_printf(out,
                "static int %s(hprt_pool *pool, void *const *bufs) {\n"
                "  return %s(pool, bufs[%d], bufs[%d]) ? 2 : 0;\n}\n\n",
                fn, kfn, sm.x.slot, sm.y.slot);
  *handled = true;
  return HARP_OK;
}

/* ---- pooling ---------------------------------------------------------------------- */
/* Pools below this many bytes read and written run on the calling thread
 * (a pool of 3 MB on two threads takes ~0.15 ms; waking a worker ~0.05). */
#define POOL_SMALL_BYTES (double)(1 << 18)

/* A ShapeSet object's pool s (n_expr, h_expr or w_expr set): the same
 * choice as POOL_SMALL_BYTES at run time, from this binding's sizes (the
 * spec's are the upper corner's, which would wake the pool for every
 * binding). */
static void pool_small_rt(ut_str *out, const cgen_pool_spec *s, tiny_dtype xt, tiny_dtype yt) {
  cc_rt_geometry g = {s->n_expr, s->h_expr, s->w_expr, s->n, s->h, s->w,
                      s->pad[0] + s->pad[2] - s->dil[0] * (s->kh - 1) - 1, s->stride[0],
                      s->pad[1] + s->pad[3] - s->dil[1] * (s->kw - 1) - 1, s->stride[1]};
  cc_emit_rt_out_hw(out, &g);
  ut_str_printf(out, "    if ((double)n_ * %" PRId64 ".0 * ((double)h_ * w_ * %d + (double)oh_ * ow_ * %d) < %.0f)\n", s->c,
                tiny_dtype_size(xt), tiny_dtype_size(yt), POOL_SMALL_BYTES);
  ut_str_puts(out, "      pool = NULL; /* small at this binding: the calling thread alone */\n  }\n");
}

/* The pools the kernel layer sends here (kernel_c.c's limits: stride, windows
 * a plane, sums over disjoint windows go to the loop nest). */
harp_status cc_emit_pool(rc_ctx *c, int r, const char *fn, ut_str *out, const ct_pool *read, bool *handled,
                       const char **why) {
  const ct_pool pl = *read;
  cgen_pool_spec s;
  cgen_pool_spec_init(&s, pl.n, pl.c, pl.h, pl.w, pl.kh, pl.kw);
  memcpy(s.stride, pl.stride, sizeof s.stride);
  memcpy(s.dil, pl.dil, sizeof s.dil);
  memcpy(s.pad, pl.pad, sizeof s.pad);
  s.sum = pl.sum;
  s.fill = (float)pl.fill;
  s.x_dtype = pl.X.dtype;
  s.y_dtype = pl.Y.dtype;
  s.n_epi = pl.nepi;
  if (!cc_epi_to_cgen(pl.epi, pl.nepi, s.epi)) DECLINE("an epilogue step the pool template has no form of");
  /* a ShapeSet object: the batch, height and width of X read at run time,
   * the spec's sizes then the upper corner's */
  char rtx[3][160];
  const tiny_shape *xs = c->ngen_syms ? rc_slot_shape(c, r, pl.X.slot) : NULL;
  const int64_t want[4] = {pl.n, pl.c, pl.h, pl.w};
  bool dims = xs && xs->rank == 4;
  for (int d = 0; dims && d < 4; d++) dims = xs->d[d].n == want[d];
  const char **ex[3] = {&s.n_expr, &s.h_expr, &s.w_expr};
  int64_t *sz[3] = {&s.n, &s.h, &s.w};
  for (int i = 0; dims && i < 3; i++) {
    int d = i ? i + 1 : 0;
    if (rc_axis_expr(c, xs, d, want[d], rtx[i], sizeof rtx[i], sz[i])) *ex[i] = rtx[i];
  }
  const bool rt[2] = {s.h_expr != NULL, s.w_expr != NULL};
  if (rt[0] || rt[1]) rc_window_pads(c, r, pl.X.node, s.stride, rt, s.pad);
  if (pl.small_why && !rt[0] && !rt[1]) DECLINE(pl.small_why); /* small at every binding */
  int64_t oh = pl.oh, ow = pl.ow; /* the upper corner's where the sizes are read at run time */
  if (s.n_expr || s.h_expr || s.w_expr) cgen_pool_out_hw(&s, &oh, &ow);
  char kfn[128];
  snprintf(kfn, sizeof kfn, "%s_pool", fn);
  bool q8 = cc_emit_q8pool(c, r, fn, out, &pl); /* on bytes held between int8 kernels: <fn>_pool too */
  if (!q8) {
    bool refused;
    harp_status st = row_kernel(c, r, gen_pool, &s, &s.tune, "pool",
                                "pool: the window kernel reads the vector width; planes split over the pool, the rest not used",
                                kfn, out, &refused);
    if (st) return st;
    if (refused) DECLINE("the pool kernel refused the shape");
  }
  int xsz = q8 ? 1 : tiny_dtype_size(pl.X.dtype), ysz = q8 ? 1 : tiny_dtype_size(pl.Y.dtype);
  double bytes = (double)s.n * pl.c * ((double)s.h * s.w * xsz + (double)oh * ow * ysz);
  ut_str_printf(out, "static int %s(hprt_pool *pool, void *const *bufs) {\n", fn);
  if (s.n_expr || s.h_expr || s.w_expr) pool_small_rt(out, &s, pl.X.dtype, pl.Y.dtype);
  else if (bytes < POOL_SMALL_BYTES) ut_str_puts(out, "  pool = NULL; /* small: the calling thread alone */\n");
  ut_str_printf(out, "  return %s(pool, bufs[%d], bufs[%d]) ? 2 : 0;\n}\n\n", kfn, pl.X.slot, pl.Y.slot);
  *handled = true;
  return HARP_OK;
}

/* ---- elementwise maps --------------------------------------------------------------- */
/* The Tiny ops cgen_map has a vector form of: the op table's vec column, and CAST (cpu_target's op filter). */
bool cc_map_op_ok(tiny_op op) { return op == TINY_CAST || tiny_op_vec(op) != NULL; }

/* The map op of a Tiny op: itself; a CAST copies, or rounds to a half. */
static int map_kind(const ct_map_op *op) {
  if (op->op != TINY_CAST) return (int)op->op;
  return op->to == TINY_FP16 || op->to == TINY_BF16 ? CGEN_MAP_ROUND : CGEN_MAP_COPY;
}

static cgen_map_arg map_arg(const ct_map_arg *a) { return (cgen_map_arg){a->kind, a->idx, (float)a->c}; }

/* Maps of fewer points run on the calling thread (a wake-up of the pool
 * costs about what 32K points of arithmetic do). */
#define MAP_SMALL_POINTS 32768.0

/* The first of the fewest dims [d0, d1) of s whose product is want, or -1
 * (d0 = 0 when outermost: every dim left). */
static int dims_ending(const tiny_shape *s, int d1, int64_t want, bool outermost) {
  int64_t prod = 1;
  for (int d0 = d1 - 1; d0 >= 0; d0--) {
    prod *= s->d[d0].n;
    if (prod == want && (!outermost || d0 == 0)) return d0;
    if (prod > want) return -1;
  }
  return want == 1 && d1 == 0 ? 0 : -1;
}

/* An element offset off into a tensor of shape s as a run-time expression
 * into buf (160 bytes): a whole number of the outermost product of s's
 * innermost dims that holds a symbol and divides it (a piece of a concat
 * along channels starts at m * H * W).  False when off is 0 or none does. */
static bool offset_expr(const rc_ctx *c, const tiny_shape *s, int64_t off, char *buf) {
  int64_t prod = 1;
  char in[160];
  bool found = false;
  for (int d = s && off > 0 ? s->rank - 1 : -1; d >= 0; d--) {
    prod *= s->d[d].n;
    if (prod > off) break;
    if (off % prod || !rc_size_expr(c, s, d, s->rank, prod, in, sizeof in)) continue;
    int w = snprintf(buf, 160, "%" PRId64 "L * %s", off / prod, in);
    found = w > 0 && w < 160;
  }
  return found;
}

/* Input k's offset in ShapeSet piece mp where it is its start along the
 * cut axis (ct_map_in.cut_axis): (the piece's start - where the axis'
 * index 0 lies in y) times the axis' stride, as an expression into buf
 * (160 bytes); false where none is, or it names no symbol that moves. */
static bool cut_offset_expr(const rc_ctx *c, int r, const ct_map *mp, int k, char *buf) {
  const ct_map_in *in = &mp->in[k];
  const tiny_shape *s = rc_slot_shape(c, r, in->t.slot), *ts = &c->g->nodes[in->t.node].shape;
  int a = in->cut_axis;
  if (!mp->cut_known || a < 0 || !s || s->rank != ts->rank || a >= s->rank || ct_size_same(&mp->cut_lo, &in->cut_off)) return false;
  int64_t stride = 1;
  for (int d = 0; d < s->rank; d++)
    if (s->d[d].n != ts->d[d].n) return false;
    else if (d > a) stride *= s->d[d].n;
  char lo[160], off[160], st[160];
  bool x = rc_sum_expr(c, &mp->cut_lo, lo);
  if (!x) snprintf(lo, sizeof lo, "%" PRId64 "L", mp->cut_lo.value);
  bool xo = rc_sum_expr(c, &in->cut_off, off);
  if (!xo) snprintf(off, sizeof off, "%" PRId64 "L", in->cut_off.value);
  bool xs = a + 1 < s->rank && rc_size_expr(c, s, a + 1, s->rank, stride, st, sizeof st);
  if (!xs) snprintf(st, sizeof st, "%" PRId64 "L", stride);
  int w = snprintf(buf, 160, "(%s - %s) * %s", lo, off, st);
  return (x || xo || xs) && w > 0 && w < 160;
}

/* A ShapeSet object's piece mp of a slab along y's axis mp->cut_axis whose
 * bounds are sizes of the graph (ct_map.cut_known, a concat's pieces): its
 * row length (the slab's extent times y's dims inside it) or its outer
 * size along the axis, and its y offset (its start times those dims), as
 * expressions into x[*nx..]. */
static void map_cut_exprs(const rc_ctx *c, const ct_map *mp, const tiny_shape *ys, cgen_map_spec *s, char x[][160], int *nx) {
  int a = mp->cut_axis;
  if (!mp->ystrided || !mp->cut_known || !ys || a < 0 || a >= ys->rank) return;
  int64_t inner = 1;
  for (int d = a + 1; d < ys->rank; d++) inner *= ys->d[d].n;
  char in[160], lo[160], len[160];
  bool xin = rc_size_expr(c, ys, a + 1, ys->rank, inner, in, sizeof in);
  if (!xin) snprintf(in, sizeof in, "%" PRId64 "L", inner);
  bool xlo = rc_sum_expr(c, &mp->cut_lo, lo), xlen = rc_sum_expr(c, &mp->cut_len, len);
  int w;
  if ((xlo || xin) && mp->y.offset == mp->cut_lo.value * inner && mp->y.offset > 0 &&
      (w = snprintf(x[*nx], 160, "%s * %s", lo, in)) > 0 && w < 160)
    s->y_offset_expr = x[(*nx)++];
  if (mp->cols == mp->cut_len.value * inner) {
    if ((xlen || xin) && (w = snprintf(x[*nx], 160, "%s * %s", len, in)) > 0 && w < 160) s->cols_expr = x[(*nx)++];
    return;
  }
  for (int d = mp->nouter - 1; d >= 0 && xlen; d--)
    if (mp->outer[d] == mp->cut_len.value && mp->yostride[d] == inner && snprintf(x[*nx], 160, "%s", len) < 160) {
      s->outer_expr[d] = x[(*nx)++];
      break;
    }
}

/* A ShapeSet object: map piece mp's row length, outer sizes and strides as
 * run-time expressions of the symbols (into x, NULL in s where a constant
 * holds), from the dims ys of y's buffer (the row's dims innermost, each
 * outer dimension the fewest dims before those; a piece's slab axis, which
 * matches none, and the dims outside it keep their constants) and the
 * inputs' and y's buffers' dims (a stride: the fewest innermost dims whose
 * product it is; a piece's row: a point-for-point input's innermost dims;
 * offsets: offset_expr).  A size matched wrongly prints differently at the
 * box's other corner, so the object is refused rather than wrong. */
static void map_walk_exprs(const rc_ctx *c, int r, const ct_map *mp, const tiny_shape *ys, cgen_map_spec *s,
                           char x[][160]) {
  int nx = 0;
  if (!c->ngen_syms) return;
  map_cut_exprs(c, mp, ys, s, x, &nx); /* a concat's piece: its bounds along the cut axis */
  /* the row and outer sizes: y's dims, then (a piece) a point-for-point input's */
  for (int k = -1; k < (mp->ystrided ? mp->nin : 0); k++) {
    const tiny_shape *t = k < 0 ? ys : mp->in[k].bcast ? NULL : rc_slot_shape(c, r, mp->in[k].t.slot);
    int d1 = t ? dims_ending(t, t->rank, mp->cols, mp->nouter == 0) : -1;
    bool slab = false; /* a slab of y cut along an inner axis (a fill's piece of a concat): its rows are y's outer dims */
    if (d1 < 0 && k < 0 && t && mp->ystrided && mp->nouter > 0) slab = (d1 = dims_ending(t, t->rank, mp->yostride[mp->nouter - 1], false)) > 0;
    if (d1 < 0) continue;
    if (!slab && !s->cols_expr && rc_size_expr(c, t, d1, t->rank, mp->cols, x[nx], 160)) s->cols_expr = x[nx++];
    for (int d = mp->nouter - 1; d >= 0 && d1 > 0; d--) {
      int d0 = dims_ending(t, d1, mp->outer[d], d == 0);
      if (d0 < 0) break;
      if (!s->outer_expr[d] && rc_size_expr(c, t, d0, d1, mp->outer[d], x[nx], 160)) s->outer_expr[d] = x[nx++];
      d1 = d0;
    }
  }
  for (int k = 0; k < mp->nin; k++) /* a concat's piece: from its start along the cut axis; else a whole number of inner dims */
    if (cut_offset_expr(c, r, mp, k, x[nx]) || offset_expr(c, rc_slot_shape(c, r, mp->in[k].t.slot), mp->in[k].t.offset, x[nx]))
      s->in[k].offset_expr = x[nx++];
  if (mp->ystrided && !s->y_offset_expr && offset_expr(c, ys, mp->y.offset, x[nx])) s->y_offset_expr = x[nx++];
  for (int d = 0; d < mp->nouter; d++) {
    for (int k = 0; k < mp->nin; k++) { /* over a RESHAPE's shape where the read passes one (ct_map_in.shape) */
      const tiny_shape *is = mp->in[k].shape ? mp->in[k].shape : rc_slot_shape(c, r, mp->in[k].t.slot);
      if (rc_stride_expr(c, is, mp->in[k].ostride[d], x[nx], 160)) s->in[k].ostride_expr[d] = x[nx++];
    }
    if (mp->ystrided && rc_stride_expr(c, ys, mp->yostride[d], x[nx], 160)) s->y_ostride_expr[d] = x[nx++];
  }
}

/* Whether source s of graph g is a constant: an immediate, or a CONST node
 * through views. */
static bool const_src(const tiny_graph *g, tiny_src s) {
  for (int d = 0; s.node >= 0 && d < 8; d++) {
    const tiny_node *n = &g->nodes[s.node];
    if (n->op == TINY_CONST) return true;
    if (!(n->op == TINY_EXPAND || n->op == TINY_RESHAPE || n->op == TINY_PERMUTE) || n->nsrc != 1) return false;
    s = n->src[0];
  }
  return s.node < 0;
}

/* Whether node of g takes a NaN to the lowest value of its proven 8-bit
 * range (cc_q8_input) where onnxruntime takes it: a chain from a rounding
 * (a QuantizeLinear's, whose saturation onnxruntime gives a NaN as the
 * type's lowest value) or an 8-bit tensor through non-decreasing steps
 * only (views, casts, relu, + / max / min with a constant, - a constant),
 * so that the value onnxruntime computes from the NaN is the lowest, the
 * byte 0 a held buffer stores for it (cgen_map's y_u8).  Not so through a
 * negation, nor where two tensors meet (one NaN, the other not). */
static bool nan_low(const tiny_graph *g, int node, int depth) {
  const tiny_node *n = &g->nodes[node];
  if (n->dtype == TINY_U8 || n->dtype == TINY_I8 || n->op == TINY_ROUND) return true;
  if (depth > 32 || n->nsrc < 1 || n->src[0].node < 0) return false;
  switch (n->op) {
    case TINY_RESHAPE:
    case TINY_EXPAND:
    case TINY_PERMUTE:
    case TINY_CAST:
    case TINY_RELU: return n->nsrc == 1 && nan_low(g, n->src[0].node, depth + 1);
    case TINY_SUB: return n->nsrc == 2 && const_src(g, n->src[1]) && nan_low(g, n->src[0].node, depth + 1);
    case TINY_ADD:
    case TINY_MAX:
    case TINY_MIN: {
      if (n->nsrc != 2) return false;
      bool c0 = const_src(g, n->src[0]), c1 = const_src(g, n->src[1]);
      if (c0 == c1) return false;
      return nan_low(g, n->src[c0 ? 1 : 0].node, depth + 1);
    }
    default: return false;
  }
}

/* Where c's int8 kernels may hold bytes (c->q8, contract_c.h), the zero
 * point of the bytes map ms (kernel r) writes held, else -1: one dense piece
 * whose output, written whole from offset 0, provably holds integers x with
 * x + zo in [0, 255] (cc_q8_act: a QuantizeLinear's rint, clamp, zero point
 * taken off) and takes a NaN where onnxruntime does (nan_low); it is
 * recorded as such a writer (cc_q8_fact.qmap), and holds its bytes once
 * q8_hold.c has decided its buffer held at that zero point. */
static int map_q8_out(rc_ctx *c, int r, const ct_map_set *ms) {
  const ct_map *mp = &ms->piece[0];
  int za = -1;
  if (!c->q8 || ms->npiece != 1 || mp->ystrided || mp->y.offset != 0 || !cc_q8_act(c, &mp->y, &za) || mp->y.node < 0 ||
      !nan_low(c->g, mp->y.node, 0))
    return -1;
  int64_t n = mp->cols;
  for (int d = 0; d < mp->nouter; d++) n *= mp->outer[d];
  int b = cc_q8_whole(c, r, &mp->y, n, NULL, 0);
  if (b < 0) return -1;
  bool held = c->q8->hold[b] >= 0 && c->q8->hold[b] == za;
  c->q8->k[r] = (cc_q8_fact){.qmap = true, .xbuf = -1, .ybuf = b, .zo = za, .held_out = held};
  return held ? za : -1;
}

/* One map kernel kfn for piece mp (its bytes held at zero point zo >= 0: map_q8_out); *points grows by its points. */
/* texpr[160]: the point count as a run-time expression, when the kernel
 * reads it so (a ShapeSet object, a whole dense y), else "".  Rows shorter
 * than 16 points (mp->short_rows, a ShapeSet object) only where their
 * length is read at run time: else *refused, *why saying so. */
static harp_status map_kernel(rc_ctx *c, int r, const ct_map *mp, const char *kfn, ut_str *out, bool *refused,
                            double *points, char *texpr, const char **why, int zo) {
  cgen_map_spec s;
  cgen_map_spec_init(&s, mp->cols);
  const tiny_shape *ys = mp->ystrided ? NULL : rc_slot_shape(c, r, mp->y.slot);
  int64_t total = mp->cols;
  for (int d = 0; d < mp->nouter; d++) total *= mp->outer[d];
  texpr[0] = 0;
  if (ys && rc_size_expr(c, ys, 0, ys->rank, total, texpr, 160)) s.total_expr = texpr;
  s.nouter = mp->nouter;
  memcpy(s.outer, mp->outer, sizeof s.outer);
  s.nin = mp->nin;
  double pts = (double)mp->cols;
  for (int d = 0; d < mp->nouter; d++) pts *= (double)mp->outer[d];
  *points += pts;
  for (int k = 0; k < mp->nin; k++) {
    s.in[k].dtype = mp->in[k].t.dtype;
    s.in[k].bcast = mp->in[k].bcast;
    s.in[k].offset = mp->in[k].t.offset;
    memcpy(s.in[k].ostride, mp->in[k].ostride, sizeof s.in[k].ostride);
  }
  s.y_dtype = mp->y.dtype;
  s.y_strided = mp->ystrided;
  s.y_offset = mp->y.offset;
  s.y_u8 = zo >= 0, s.y_zo = zo;
  memcpy(s.y_ostride, mp->yostride, sizeof s.y_ostride);
  s.nops = mp->nops;
  for (int j = 0; j < mp->nops; j++) {
    const ct_map_op *op = &mp->ops[j];
    s.ops[j] = (cgen_map_op){map_kind(op), op->to, map_arg(&op->a), map_arg(&op->b)};
  }
  char wx[2 + CGEN_MAP_MAX_IN + CGEN_MAP_MAX_OUTER * (CGEN_MAP_MAX_IN + 2)][160]; /* at most one each */
  map_walk_exprs(c, r, mp, rc_slot_shape(c, r, mp->y.slot), &s, wx);
  if (mp->short_rows && !s.cols_expr) {
    *refused = true, *why = CT_MAP_SHORT_ROWS;
    return HARP_OK;
  }
  return row_kernel(c, r, gen_map, &s, &s.tune, "map",
                    "map: the elementwise kernel reads the vector width; points split over the pool, the rest not used",
                    kfn, out, refused);
}

/* The point count of pieces that cover y (piece p0's; points in all) as a
 * run-time expression into texpr (160 bytes), else "". */
static void pieces_points_expr(const rc_ctx *c, int r, const ct_map *p0, double points, char *texpr) {
  const tiny_shape *ys = rc_slot_shape(c, r, p0->y.slot);
  double n = 1;
  for (int d = 0; ys && d < ys->rank; d++) n *= (double)ys->d[d].n;
  texpr[0] = 0;
  if (!ys || n != points || !rc_size_expr(c, ys, 0, ys->rank, (int64_t)n, texpr, 160)) texpr[0] = 0;
}

/* A region cut into pieces (ct_map_set) runs one map kernel per piece, in turn. */
harp_status cc_emit_map(rc_ctx *c, int r, const char *fn, ut_str *out, const ct_map_set *ms, bool *handled,
                      const char **why) {
  ut_str body;
  ut_str_init(&body);
  double points = 0;
  bool refused = false;
  harp_status st = HARP_OK;
  char texpr[160] = "";
  int zo = map_q8_out(c, r, ms);
  for (int k = 0; k < ms->npiece && !st && !refused; k++) {
    char kfn[128];
    if (ms->npiece == 1) snprintf(kfn, sizeof kfn, "%s_map", fn);
    else snprintf(kfn, sizeof kfn, "%s_map%d", fn, k);
    st = map_kernel(c, r, &ms->piece[k], kfn, &body, &refused, &points, texpr, why, zo);
  }
  if (st || refused) {
    ut_str_free(&body);
    if (st || *why) return st;
    DECLINE("the map kernel refused the shape");
  }
  ut_str_puts(out, body.buf);
  ut_str_free(&body);
  ut_str_printf(out, "static int %s(hprt_pool *pool, void *const *bufs) {\n", fn);
  if (ms->npiece > 1) /* pieces that cover y: its size, read at run time in a ShapeSet object */
    pieces_points_expr(c, r, &ms->piece[0], points, texpr);
  if (texpr[0]) /* the same choice at run time */
    ut_str_printf(out, "  if (%s < %.0fL) pool = NULL; /* small: the calling thread alone */\n", texpr, MAP_SMALL_POINTS);
  else if (points < MAP_SMALL_POINTS) ut_str_puts(out, "  pool = NULL; /* small: the calling thread alone */\n");
  for (int k = 0; k < ms->npiece; k++) {
    const ct_map *mp = &ms->piece[k];
    ut_str_puts(out, "  const void *in");
    if (ms->npiece > 1) ut_str_printf(out, "%d", k);
    ut_str_puts(out, "[] = {");
    for (int i = 0; i < mp->nin; i++) ut_str_printf(out, "bufs[%d], ", mp->in[i].t.slot);
    ut_str_puts(out, "NULL};\n");
  }
  if (ms->npiece == 1) {
    ut_str_printf(out, "  return %s_map(pool, in, bufs[%d]) ? 2 : 0;\n}\n\n", fn, ms->piece[0].y.slot);
  } else {
    for (int k = 0; k < ms->npiece; k++)
      ut_str_printf(out, "  if (%s_map%d(pool, in%d, bufs[%d])) return 2;\n", fn, k, k, ms->piece[k].y.slot);
    ut_str_puts(out, "  return 0;\n}\n\n");
  }
  *handled = true;
  return HARP_OK;
}

void cc_note_generic(rc_ctx *c, int r, const char *why) {
  rt_plan_choice *ch = c->plans ? &c->plans[c->f->kernels[r].region] : NULL;
  if (!ch || !ch->has_plan) return;
  char msg[200];
  snprintf(msg, sizeof msg, "generic loops (%.150s): the plan is not read", why ? why : "no template for this region");
  cc_note_add(ch, msg);
  ch->applied = false;
}
