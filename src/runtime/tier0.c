/* tier0.c — tier 0 (tier0.h): a compiled model's Function run region by
 * region, contractions and poolings on libharp's shape-generic kernels,
 * everything else on the reference interpreter.  The regions are read by
 * the kernel layer's readers (ct_kind, ct_read_gemm / conv / pool), the
 * same readers the C and CUDA templates print from, so tier 0 computes the
 * same fused regions (epilogues included) as the compiled object.  Only
 * fp32 regions take the fast path; a region the readers decline, or one
 * with fp16 / bf16 data, runs on the interpreter.
 * Needs: fn_playback_ex, src/kernel/contract*.c, tier0_gemm.c, tier0_rows.c,
 * tier0_map.c.
 * Gives: rt_tier0_run. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harp/function.h"
#include "harp/tiny.h"
#include "tier0.h"
#include "util/util.h"

typedef struct t0_ctx {
  const rt_compile *c;
  ct_src src;
  int threads;
  rt_t0_stats st;
} t0_ctx;

/* The storage of slot `slot` of kernel K (reads, then writes) at element
 * offset off; a model output not yet allocated is allocated here with its
 * node's shape.  NULL (with e set) when out of memory or not fp32. */
static float *slot_ptr(harp_error *e, const t0_ctx *x, const fn_kernel *K, ut_tensor *storage, int slot, int64_t off) {
  const fn_function *f = x->c->f;
  if (slot < 0 || slot >= K->nreads + K->nwrites) return NULL;
  int b = slot < K->nreads ? K->reads[slot] : K->writes[slot - K->nreads];
  ut_tensor *t = &storage[b];
  if (!t->data && f->buffers[b].kind == FN_OUTPUT) {
    const tiny_node *n = &x->c->g->nodes[f->buffers[b].node];
    int64_t shape[TINY_MAX_RANK];
    for (int d = 0; d < n->shape.rank; d++) shape[d] = n->shape.d[d].n;
    if (ut_tensor_alloc(e, t, f->buffers[b].dtype, n->shape.rank, shape)) return NULL;
  }
  if (!t->data || t->dtype != TINY_FP32) return NULL;
  return (float *)t->data + off;
}

/* Every tensor of the kernel fp32, no rounding step: the fast kernels' domain. */
static bool fp32_epi(const ct_epi *ep, int n) {
  for (int i = 0; i < n; i++)
    if (ep[i].kind == CT_EPI_ROUND || (ep[i].slot >= 0 && ep[i].dtype != TINY_FP32)) return false;
  return true;
}

/* The epilogue's tensors resolved; false when one is not fp32 storage. */
static bool resolve_epi(harp_error *e, const t0_ctx *x, const fn_kernel *K, ut_tensor *storage, const ct_epi *in, int n,
                        rt_t0_epi *out) {
  for (int i = 0; i < n; i++) {
    out[i] = (rt_t0_epi){in[i], NULL};
    if (in[i].slot >= 0 && !(out[i].p = slot_ptr(e, x, K, storage, in[i].slot, in[i].off))) return false;
  }
  return true;
}

/* A GEMM's A copied into dense scratch (m->nrep > 0: its reduced
 * dimensions do not fold): element i0..i(nrep-1), row-major over
 * rep_size, from a0 at sum i_j * rep_src[j].  NULL when out of memory. */
static float *repack_a(const ct_gemm *m, const float *a0) {
  int64_t total = 1, idx[POLY_MAX_VARS] = {0};
  for (int i = 0; i < m->nrep; i++) total *= m->rep_size[i];
  float *ap = ut_xmalloc((size_t)total * sizeof *ap + 1);
  for (int64_t at = 0; ap && at < total; at++) {
    int64_t off = 0;
    for (int i = 0; i < m->nrep; i++) off += idx[i] * m->rep_src[i];
    ap[at] = a0[off];
    for (int i = m->nrep - 1; i >= 0 && ++idx[i] == m->rep_size[i]; i--) idx[i] = 0;
  }
  return ap;
}

/* Kernel r as a GEMM, when it reads as one the fast kernel takes. */
static harp_status try_gemm(harp_error *e, t0_ctx *x, int r, ut_tensor *storage, bool *done) {
  ct_gemm m;
  const char *why = NULL;
  const fn_kernel *K = &x->c->f->kernels[r];
  if (!ct_read_gemm(&x->src, r, &m, &why) || m.B.dtype != TINY_FP32 || m.C.dtype != TINY_FP32 ||
      !fp32_epi(m.epi, m.nepi) || m.a_round != TINY_FP32 || (m.nrep ? m.A0.dtype : m.A.dtype) != TINY_FP32)
    return HARP_OK;
  rt_t0_gemm g = {.batch = {m.batch[0], m.batch[1]}, .M = m.M, .N = m.N, .K = m.K, .nepi = m.nepi,
                  .a_sb = {m.a_sb[0], m.a_sb[1]}, .a_sm = m.a_sm, .a_sk = m.a_sk,
                  .b_sb = {m.b_sb[0], m.b_sb[1]}, .b_sk = m.b_sk, .b_sn = m.b_sn,
                  .c_sb = {m.c_sb[0], m.c_sb[1]}, .c_sm = m.c_sm, .c_sn = m.c_sn};
  const float *a0 = m.nrep ? slot_ptr(e, x, K, storage, m.A0.slot, m.A0.offset) : NULL;
  g.a = m.nrep ? NULL : slot_ptr(e, x, K, storage, m.A.slot, m.A.offset);
  g.b = slot_ptr(e, x, K, storage, m.B.slot, m.B.offset);
  g.c = slot_ptr(e, x, K, storage, m.C.slot, m.C.offset);
  if (e->code) return e->code;
  if (!(g.a || a0) || !g.b || !g.c || !resolve_epi(e, x, K, storage, m.epi, m.nepi, g.epi)) return e->code;
  float *scratch = a0 ? repack_a(&m, a0) : NULL;
  if (a0 && !scratch) return ut_fail(e, HARP_E_NO_MEMORY, x->c->f->kernels[r].name, "out of memory repacking A");
  if (scratch) g.a = scratch;
  for (int i = 0; i < 2; i++) g.batch[i] = g.batch[i] > 0 ? g.batch[i] : 1;
  *done = true;
  harp_status st = rt_t0_gemm_run(e, &g, x->threads);
  free(scratch);
  return st;
}

/* Kernel r as a convolution. */
static harp_status try_conv(harp_error *e, t0_ctx *x, int r, ut_tensor *storage, bool *done) {
  rt_t0_conv cv = {0};
  const char *why = NULL;
  const fn_kernel *K = &x->c->f->kernels[r];
  ct_conv *c = &cv.c;
  if (!ct_read_conv(&x->src, r, c, &why) || c->X.dtype != TINY_FP32 || c->W.dtype != TINY_FP32 ||
      c->Y.dtype != TINY_FP32 || !fp32_epi(c->epi, c->nepi) || c->groups < 1 || c->c % c->groups || c->oc % c->groups)
    return HARP_OK;
  cv.oh = (c->h + c->pad[0] + c->pad[2] - c->dil[0] * (c->kh - 1) - 1) / c->stride[0] + 1;
  cv.ow = (c->w + c->pad[1] + c->pad[3] - c->dil[1] * (c->kw - 1) - 1) / c->stride[1] + 1;
  /* the output buffer must hold n x oc x oh x ow: else the reading is not one this kernel knows */
  const fn_buffer *Y = &x->c->f->buffers[K->writes[0]];
  if (cv.oh < 1 || cv.ow < 1 || K->nwrites != 1 || (int64_t)(Y->size / 4) < c->n * c->oc * cv.oh * cv.ow) return HARP_OK;
  cv.x = slot_ptr(e, x, K, storage, c->X.slot, c->X.offset);
  cv.w = slot_ptr(e, x, K, storage, c->W.slot, c->W.offset);
  cv.y = slot_ptr(e, x, K, storage, c->Y.slot, c->Y.offset);
  if (e->code) return e->code;
  if (!cv.x || !cv.w || !cv.y || !resolve_epi(e, x, K, storage, c->epi, c->nepi, cv.epi)) return e->code;
  cv.nepi = c->nepi;
  *done = true;
  return rt_t0_conv_run(e, &cv, x->threads);
}

/* Whether every step of a pool's epilogue ep[0..n) needs no index of the
 * output point (relu, x*c+d, a clamp: contract_pool.c's chain), so that
 * rt_t0_epilogue can run it with none. */
static bool pool_epi(const ct_epi *ep, int n) {
  for (int i = 0; i < n; i++)
    if (ep[i].kind != CT_EPI_RELU && ep[i].kind != CT_EPI_SCALE && ep[i].kind != CT_EPI_CLAMP) return false;
  return true;
}

/* Kernel r as a 2-D max / sum pooling: one output point at a time. */
static harp_status try_pool(harp_error *e, t0_ctx *x, int r, ut_tensor *storage, bool *done) {
  ct_pool p;
  const char *why = NULL;
  const fn_kernel *K = &x->c->f->kernels[r];
  if (!ct_read_pool(&x->src, r, &p, &why) || p.X.dtype != TINY_FP32 || p.Y.dtype != TINY_FP32 || !fp32_epi(p.epi, p.nepi) ||
      !pool_epi(p.epi, p.nepi))
    return HARP_OK;
  const float *in = slot_ptr(e, x, K, storage, p.X.slot, p.X.offset);
  float *out = slot_ptr(e, x, K, storage, p.Y.slot, p.Y.offset);
  rt_t0_epi ep[CT_MAX_EPI];
  if (!in || !out || !resolve_epi(e, x, K, storage, p.epi, p.nepi, ep)) return e->code;
  *done = true;
  for (int64_t pl = 0; pl < p.n * p.c; pl++)
    for (int64_t oh = 0; oh < p.oh; oh++)
      for (int64_t ow = 0; ow < p.ow; ow++) {
        float acc = p.sum ? 0.0f : -INFINITY;
        for (int64_t i = 0; i < p.kh; i++)
          for (int64_t j = 0; j < p.kw; j++) {
            int64_t ih = oh * p.stride[0] - p.pad[0] + i * p.dil[0], iw = ow * p.stride[1] - p.pad[1] + j * p.dil[1];
            float v = ih >= 0 && ih < p.h && iw >= 0 && iw < p.w ? in[(pl * p.h + ih) * p.w + iw] : (float)p.fill;
            acc = p.sum ? acc + v : (v > acc || v != v ? v : acc); /* a NaN wins, as the reference's max */
          }
        acc = rt_t0_epilogue(ep, p.nepi, acc, 0, 0, 0, 0, 0, false);
        out[(pl * p.oh + oh) * p.ow + ow] = acc;
      }
  return HARP_OK;
}

/* Kernel r as attention. */
static harp_status try_attn(harp_error *e, t0_ctx *x, int r, ut_tensor *storage, bool *done) {
  rt_t0_attn a = {0};
  const char *why = NULL;
  const fn_kernel *K = &x->c->f->kernels[r];
  ct_attn *t = &a.t;
  if (!ct_read_attn(&x->src, r, t, &why) || t->q.dtype != TINY_FP32 || t->k.dtype != TINY_FP32 ||
      t->v.dtype != TINY_FP32 || t->out.dtype != TINY_FP32 || (t->has_mask && t->mask.dtype != TINY_FP32))
    return HARP_OK;
  a.q = slot_ptr(e, x, K, storage, t->q.slot, t->q.offset);
  a.k = slot_ptr(e, x, K, storage, t->k.slot, t->k.offset);
  a.v = slot_ptr(e, x, K, storage, t->v.slot, t->v.offset);
  a.out = slot_ptr(e, x, K, storage, t->out.slot, t->out.offset);
  if (t->has_mask) a.mask = slot_ptr(e, x, K, storage, t->mask.slot, t->mask.offset);
  if (e->code || !a.q || !a.k || !a.v || !a.out || (t->has_mask && !a.mask)) return e->code;
  *done = true;
  return rt_t0_attn_run(e, &a, x->threads);
}

/* Kernel r as a row softmax or a layernorm. */
static harp_status try_row(harp_error *e, t0_ctx *x, int r, ut_tensor *storage, bool *done) {
  ct_row w;
  ct_softmax sm;
  ct_layernorm ln;
  const char *why = NULL;
  const fn_kernel *K = &x->c->f->kernels[r];
  ct_row_init(&w, &x->src, r);
  rt_t0_row row = {0};
  bool soft = ct_read_softmax(&w, &sm, &why);
  if (soft) {
    if (sm.x.dtype != TINY_FP32 || sm.y.dtype != TINY_FP32) return HARP_OK;
    row = (rt_t0_row){.rows = sm.rows, .cols = sm.cols, .scale = sm.scale};
    row.x = slot_ptr(e, x, K, storage, sm.x.slot, sm.x.offset);
    row.y = slot_ptr(e, x, K, storage, sm.y.slot, sm.y.offset);
  } else if (ct_read_layernorm(&w, &ln, &why)) {
    if (ln.x.dtype != TINY_FP32 || ln.y.dtype != TINY_FP32 || (ln.gamma.slot >= 0 && ln.gamma.dtype != TINY_FP32) ||
        (ln.beta.slot >= 0 && ln.beta.dtype != TINY_FP32))
      return HARP_OK;
    row = (rt_t0_row){.rows = ln.rows, .cols = ln.cols, .eps = ln.eps};
    row.x = slot_ptr(e, x, K, storage, ln.x.slot, ln.x.offset);
    row.y = slot_ptr(e, x, K, storage, ln.y.slot, ln.y.offset);
    if (ln.gamma.slot >= 0 && !(row.gamma = slot_ptr(e, x, K, storage, ln.gamma.slot, ln.gamma.offset))) return e->code;
    if (ln.beta.slot >= 0 && !(row.beta = slot_ptr(e, x, K, storage, ln.beta.slot, ln.beta.offset))) return e->code;
  } else {
    return HARP_OK;
  }
  if (e->code || !row.x || !row.y) return e->code;
  *done = true;
  return soft ? rt_t0_softmax_run(e, &row, x->threads) : rt_t0_layernorm_run(e, &row, x->threads);
}

/* Piece k of map set ms resolved into *out; false when it is not all fp32
 * (inputs, y, no rounding CAST) or a tensor is missing. */
static bool map_piece(harp_error *e, const t0_ctx *x, const fn_kernel *K, ut_tensor *storage, const ct_map *m,
                      rt_t0_map *out) {
  out->m = *m;
  if (m->y.dtype != TINY_FP32) return false;
  for (int o = 0; o < m->nops; o++)
    if (m->ops[o].op == TINY_CAST && m->ops[o].to != TINY_FP32) return false;
  for (int k = 0; k < m->nin; k++)
    if (m->in[k].t.dtype != TINY_FP32 || !(out->in[k] = slot_ptr(e, x, K, storage, m->in[k].t.slot, m->in[k].t.offset)))
      return false;
  return (out->y = slot_ptr(e, x, K, storage, m->y.slot, m->y.offset)) != NULL;
}

/* Kernel r as an elementwise map (every piece on the map kernel). */
static harp_status try_map(harp_error *e, t0_ctx *x, int r, ut_tensor *storage, bool *done) {
  const char *why = NULL;
  const fn_kernel *K = &x->c->f->kernels[r];
  ct_map_set *set = ut_xmalloc(sizeof *set);
  rt_t0_map *pc = ut_xmalloc(sizeof *pc * CT_MAP_MAX_PIECES);
  harp_status st = !set || !pc ? ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory") : HARP_OK;
  bool ok = !st && ct_read_map(&x->src, r, rt_t0_map_op_ok, set, &why);
  for (int k = 0; ok && k < set->npiece; k++) ok = map_piece(e, x, K, storage, &set->piece[k], &pc[k]);
  if (!st) st = e->code;
  if (!st && ok) {
    *done = true;
    for (int k = 0; k < set->npiece && !st; k++) st = rt_t0_map_run(e, &pc[k], x->threads);
  }
  free(set);
  free(pc);
  return st;
}

/* fn_playback_ex's hook: kernel r on a fast kernel when one takes it.  A
 * model output a reader allocated before it declined is freed again (the
 * interpreter's result takes its place). */
static harp_status run_fast(void *ctx, harp_error *e, int r, ut_tensor *storage, bool *done) {
  t0_ctx *x = ctx;
  double t0 = ut_now_ms();
  const fn_kernel *K = &x->c->f->kernels[r];
  uint64_t unset = 0; /* writes without storage yet (the first 64) */
  for (int w = 0; w < K->nwrites && w < 64; w++) unset |= (uint64_t)!storage[K->writes[w]].data << w;
  char kind = ct_kind(&x->src, r);
  harp_status st = HARP_OK;
  if (kind == 'g') st = try_gemm(e, x, r, storage, done);
  else if (kind == 'c') st = try_conv(e, x, r, storage, done);
  else if (kind == 'a') st = try_attn(e, x, r, storage, done);
  else if (!kind) st = try_pool(e, x, r, storage, done);
  if (!st && !kind && !*done) st = try_row(e, x, r, storage, done);
  if (!st && !kind && !*done) st = try_map(e, x, r, storage, done);
  if (*done) x->st.fast++, x->st.fast_ms += ut_now_ms() - t0;
  else x->st.interp++;
  for (int w = 0; !*done && w < K->nwrites && w < 64; w++)
    if (unset >> w & 1) ut_tensor_free(&storage[K->writes[w]]);
  return st;
}

/* Each input as the model declares it (dtype, shape): said before any kernel runs. */
static harp_status check_inputs(harp_error *e, const rt_compile *c, const ut_tensor *inputs, int ninputs) {
  const fn_function *f = c->f;
  if (ninputs != f->nargs) return ut_fail(e, HARP_E_INPUT_MISMATCH, NULL, "%d inputs given, the model has %d", ninputs, f->nargs);
  for (int a = 0; a < f->nargs; a++) {
    const tiny_node *n = &c->g->nodes[f->buffers[f->args[a]].node];
    const ut_tensor *t = &inputs[a];
    bool ok = t->dtype == n->dtype && t->rank == n->shape.rank;
    for (int d = 0; ok && d < t->rank; d++) ok = t->shape[d] == n->shape.d[d].n;
    if (!ok || !t->data)
      return ut_fail(e, HARP_E_INPUT_MISMATCH, n->id, "input %s does not match the model's dtype or shape", n->a.input.tensor_id);
  }
  return HARP_OK;
}

harp_status rt_tier0_run(harp_error *e, const rt_compile *c, const ut_tensor *inputs, int ninputs, ut_tensor *outputs,
                         rt_t0_stats *stats) {
  if (!c->f || !c->pv) return ut_fail(e, HARP_E_INTERNAL, NULL, "tier 0 needs the compile's Function and Poly-View");
  if (check_inputs(e, c, inputs, ninputs)) return e->code;
  long nc = sysconf(_SC_NPROCESSORS_ONLN);
  t0_ctx x = {.c = c, .src = {.g = c->g, .pv = c->pv, .f = c->f}, .threads = nc < 1 ? 1 : nc > RT_T0_MAX_THREADS ? RT_T0_MAX_THREADS : (int)nc};
  double t0 = ut_now_ms();
  harp_status st = fn_playback_ex(e, c->f, c->syms, inputs, ninputs, outputs, run_fast, &x);
  x.st.interp_ms = ut_now_ms() - t0 - x.st.fast_ms;
  if (stats) *stats = x.st;
  return st;
}
