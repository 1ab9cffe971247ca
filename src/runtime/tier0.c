/* tier0.c — tier 0 (tier0.h): a compiled model's Function run region by
 * region, contractions and poolings on libharp's shape-generic kernels,
 * everything else on the reference interpreter.  The regions are read by
 * the kernel layer's readers (ct_kind, ct_read_gemm / conv / pool), the
 * same readers the C and CUDA templates print from, so tier 0 computes the
 * same fused regions (epilogues included) as the compiled object; maps
 * read through floor divisions (ct_read_gmap) run on tier0_map.c too.  Only
 * fp32 regions take the fast path; a region the readers decline, or one
 * with fp16 / bf16 data, runs on the interpreter.  The readers run once,
 * in rt_t0_prep_read (they reach isl through the Poly-View), kernel by
 * kernel in the Function's order, each published as it is read: a run may
 * start while another thread (cpu.c's builder) is still reading, and waits
 * per kernel for its reading.  The runs read only what was kept, so they
 * may overlap the reading, the exact search or a C print on that thread.
 * Needs: fn_playback_ex, src/kernel/contract*.c, tier0_gemm.c, tier0_rows.c,
 * tier0_map.c.
 * Gives: rt_t0_prep_new, rt_t0_prep_read, rt_t0_prepare, rt_t0_prep_free, rt_tier0_run. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harp/function.h"
#include "harp/tiny.h"
#include "tier0.h"
#include "util/util.h"

/* One kernel as rt_t0_prepare read it: the fast kernel that takes it
 * (kind: 'g' GEMM, 'c' convolution, 'p' pooling, 'a' attention, 's'
 * softmax, 'l' layernorm, 'm' map, 'q' map through floor divisions; 0:
 * the interpreter) and its reading. */
typedef struct t0_read {
  char kind;
  union {
    ct_gemm g;
    ct_conv c;
    ct_pool p;
    ct_attn a;
    ct_softmax s;
    ct_layernorm l;
  } u;
  ct_map_set *ms; /* kind 'm' */
  ct_gmap *gm;    /* kind 'q': a map read through floor divisions */
} t0_read;

struct rt_t0_prep {
  const fn_function *f; /* the Function read: the compile's, or tier 0's own partition's (cpu.c) */
  int n;
  t0_read *k;           /* per kernel of the Function */
  int ready;            /* kernels k[0..ready) read (atomic: rt_t0_prep_read publishes each) */
  int stopped;          /* the reading ended: all read, or failed with err (under mu) */
  harp_error err;       /* why it failed (set before stopped) */
  pthread_mutex_t mu;   /* with cv: a run waiting for a kernel's reading */
  pthread_cond_t cv;
};

typedef struct t0_ctx {
  const rt_compile *c;
  rt_t0_prep *prep;
  int threads;
  rt_t0_stats st;
} t0_ctx;

/* The storage of slot `slot` of kernel K (reads, then writes) at element
 * offset off; a model output not yet allocated is allocated here with its
 * node's shape.  NULL (with e set) when out of memory or not fp32. */
/* The buffer of slot `slot` of kernel K (reads, then writes), or -1. */
static int slot_buffer(const fn_kernel *K, int slot) {
  if (slot < 0 || slot >= K->nreads + K->nwrites) return -1;
  return slot < K->nreads ? K->reads[slot] : K->writes[slot - K->nreads];
}

static float *slot_ptr(harp_error *e, const t0_ctx *x, const fn_kernel *K, ut_tensor *storage, int slot, int64_t off) {
  const fn_function *f = x->prep->f;
  int b = slot_buffer(K, slot);
  if (b < 0) return NULL;
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
    if (ep[i].kind == CT_EPI_ROUND || ep[i].kind == CT_EPI_RESFMA || (ep[i].slot >= 0 && ep[i].dtype != TINY_FP32)) return false;
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

/* A convolution's output extent: input n, pads p (both sides), dilation d,
 * kernel k, stride s. */
static int64_t conv_out(int64_t n, int64_t p, int64_t d, int64_t k, int64_t s) { return (n + p - d * (k - 1) - 1) / s + 1; }

/* ---- reading (rt_t0_prepare: once per compile) ------------------------------------ */
/* Kernel r as a GEMM the fast kernel takes (all fp32, no rounding). */
static bool read_gemm(const ct_src *src, int r, ct_gemm *m) {
  const char *why = NULL;
  return ct_read_gemm(src, r, m, &why) && m->B.dtype == TINY_FP32 && m->C.dtype == TINY_FP32 && fp32_epi(m->epi, m->nepi) &&
         m->a_round == TINY_FP32 && (m->nrep ? m->A0.dtype : m->A.dtype) == TINY_FP32;
}

/* Kernel r (writing buffers K->writes) as a convolution the fast kernel
 * takes: fp32, whole groups, an output buffer that holds n x oc x oh x ow. */
static bool read_conv(const ct_src *src, int r, ct_conv *c) {
  const char *why = NULL;
  const fn_kernel *K = &src->f->kernels[r];
  if (!ct_read_conv(src, r, c, &why) || c->X.dtype != TINY_FP32 || c->W.dtype != TINY_FP32 || c->Y.dtype != TINY_FP32 ||
      !fp32_epi(c->epi, c->nepi) || c->groups < 1 || c->c % c->groups || c->oc % c->groups || K->nwrites != 1)
    return false;
  int64_t oh = conv_out(c->h, c->pad[0] + c->pad[2], c->dil[0], c->kh, c->stride[0]);
  int64_t ow = conv_out(c->w, c->pad[1] + c->pad[3], c->dil[1], c->kw, c->stride[1]);
  const fn_buffer *Y = &src->f->buffers[K->writes[0]];
  return oh >= 1 && ow >= 1 && (int64_t)(Y->size / 4) >= c->n * c->oc * oh * ow;
}

/* Whether every step of a pool's epilogue ep[0..n) needs no index of the
 * output point (relu, x*c+d, a clamp: contract_pool.c's chain), so that
 * rt_t0_epilogue can run it with none. */
static bool pool_epi(const ct_epi *ep, int n) {
  for (int i = 0; i < n; i++)
    if (ep[i].kind != CT_EPI_RELU && ep[i].kind != CT_EPI_SCALE && ep[i].kind != CT_EPI_CLAMP) return false;
  return true;
}

static bool read_pool(const ct_src *src, int r, ct_pool *p) {
  const char *why = NULL;
  return ct_read_pool(src, r, p, &why) && p->X.dtype == TINY_FP32 && p->Y.dtype == TINY_FP32 && fp32_epi(p->epi, p->nepi) &&
         pool_epi(p->epi, p->nepi);
}

static bool read_attn(const ct_src *src, int r, ct_attn *t) {
  const char *why = NULL;
  return ct_read_attn(src, r, t, &why) && t->q.dtype == TINY_FP32 && t->k.dtype == TINY_FP32 && t->v.dtype == TINY_FP32 &&
         t->out.dtype == TINY_FP32 && (!t->has_mask || t->mask.dtype == TINY_FP32);
}

/* Kernel r as a row softmax ('s') or layernorm ('l') in fp32, else 0. */
static char read_row(const ct_src *src, int r, t0_read *k) {
  ct_row w;
  const char *why = NULL;
  ct_row_init(&w, src, r);
  if (ct_read_softmax(&w, &k->u.s, &why))
    return k->u.s.x.dtype == TINY_FP32 && k->u.s.y.dtype == TINY_FP32 && ct_softmax_plain(&k->u.s) ? 's' : 0;
  const ct_layernorm *ln = &k->u.l;
  if (!ct_read_layernorm(&w, &k->u.l, &why) || ln->x.dtype != TINY_FP32 || ln->y.dtype != TINY_FP32 ||
      (ln->gamma.slot >= 0 && ln->gamma.dtype != TINY_FP32) || (ln->beta.slot >= 0 && ln->beta.dtype != TINY_FP32))
    return 0;
  return 'l';
}

/* Map set ms all fp32: inputs, y, no rounding CAST. */
static bool map_fp32(const ct_map_set *ms) {
  for (int p = 0; p < ms->npiece; p++) {
    const ct_map *m = &ms->piece[p];
    if (m->y.dtype != TINY_FP32) return false;
    for (int o = 0; o < m->nops; o++)
      if (m->ops[o].op == TINY_CAST && m->ops[o].to != TINY_FP32) return false;
    for (int k = 0; k < m->nin; k++)
      if (m->in[k].t.dtype != TINY_FP32) return false;
  }
  return true;
}

/* Map g's ops keep fp32 (no rounding CAST; ct_read_gmap checks the tensors). */
static bool gmap_fp32(const ct_gmap *g) {
  for (int p = 0; p < g->npiece; p++)
    for (int o = 0; o < g->piece[p].nops; o++)
      if (g->piece[p].ops[o].op == TINY_CAST && g->piece[p].ops[o].to != TINY_FP32) return false;
  return true;
}

/* Kernel r as an elementwise map into k (kind 'm', its set malloc'd), else
 * as one read through floor divisions (kind 'q'), else left alone. */
static harp_status read_map(harp_error *e, const ct_src *src, int r, t0_read *k) {
  const char *why = NULL;
  ct_map_set *set = ut_xmalloc(sizeof *set);
  ct_gmap *gm = set ? ut_xmalloc(sizeof *gm) : NULL;
  if (!gm) {
    free(set);
    return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  }
  if (ct_read_map(src, r, rt_t0_map_op_ok, set, &why) && map_fp32(set)) k->ms = set, k->kind = 'm', set = NULL;
  else if (ct_read_gmap(src, r, rt_t0_map_op_ok, gm, &why) && gmap_fp32(gm)) k->gm = gm, k->kind = 'q', gm = NULL;
  free(set);
  free(gm);
  return HARP_OK;
}

/* Kernel r read into *k: the first reader that takes it. */
static harp_status read_kernel(harp_error *e, const ct_src *src, int r, t0_read *k) {
  char kind = ct_kind(src, r);
  k->kind = 0;
  if (kind == 'g') k->kind = read_gemm(src, r, &k->u.g) ? 'g' : 0;
  else if (kind == 'c') k->kind = read_conv(src, r, &k->u.c) ? 'c' : 0;
  else if (kind == 'a') k->kind = read_attn(src, r, &k->u.a) ? 'a' : 0;
  if (kind) return HARP_OK;
  if (read_pool(src, r, &k->u.p)) k->kind = 'p';
  else if ((k->kind = read_row(src, r, k))) return HARP_OK;
  else return read_map(e, src, r, k);
  return HARP_OK;
}

harp_status rt_t0_prep_new(harp_error *e, const fn_function *f, rt_t0_prep **out) {
  *out = NULL;
  if (!f) return ut_fail(e, HARP_E_INTERNAL, NULL, "tier 0 needs the compile's Function");
  rt_t0_prep *p = ut_xcalloc(1, sizeof *p);
  if (p) p->k = ut_xcalloc((size_t)f->nkernels + 1, sizeof *p->k);
  if (!p || !p->k) {
    free(p);
    return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  }
  p->f = f;
  p->n = f->nkernels;
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->cv, NULL);
  *out = p;
  return HARP_OK;
}

/* The reading of p ended (st: how; its error in e): said to the runs waiting. */
static harp_status read_stop(harp_error *e, rt_t0_prep *p, harp_status st) {
  pthread_mutex_lock(&p->mu);
  if (st) p->err = *e;
  p->stopped = 1;
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
  return st;
}

harp_status rt_t0_prep_read(harp_error *e, const rt_compile *c, rt_t0_prep *p) {
  if (!c->pv) return read_stop(e, p, ut_fail(e, HARP_E_INTERNAL, NULL, "tier 0 needs the compile's Poly-View"));
  ct_src src = {.g = c->g, .pv = c->pv, .f = p->f};
  for (int r = 0; r < p->n; r++) {
    if (read_kernel(e, &src, r, &p->k[r])) return read_stop(e, p, e->code);
    __atomic_store_n(&p->ready, r + 1, __ATOMIC_RELEASE);
    pthread_mutex_lock(&p->mu); /* a run may be waiting for this one */
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
  }
  return read_stop(e, p, HARP_OK);
}

harp_status rt_t0_prepare(harp_error *e, const rt_compile *c, const fn_function *f, rt_t0_prep **out) {
  if (rt_t0_prep_new(e, f, out)) return e->code;
  if (rt_t0_prep_read(e, c, *out)) {
    rt_t0_prep_free(*out);
    *out = NULL;
  }
  return e->code;
}

void rt_t0_prep_free(rt_t0_prep *p) {
  if (!p) return;
  for (int r = 0; r < p->n; r++) free(p->k[r].ms), free(p->k[r].gm);
  free(p->k);
  pthread_cond_destroy(&p->cv);
  pthread_mutex_destroy(&p->mu);
  free(p);
}

/* Kernel r's reading, waited for while another thread reads; its failure
 * into e (the kernels before it stay usable). */
static harp_status wait_read(harp_error *e, rt_t0_prep *p, int r) {
  if (__atomic_load_n(&p->ready, __ATOMIC_ACQUIRE) > r) return HARP_OK;
  pthread_mutex_lock(&p->mu);
  while (__atomic_load_n(&p->ready, __ATOMIC_ACQUIRE) <= r && !p->stopped) pthread_cond_wait(&p->cv, &p->mu);
  harp_status st = __atomic_load_n(&p->ready, __ATOMIC_ACQUIRE) > r ? HARP_OK
                   : ut_fail(e, p->err.code ? p->err.code : HARP_E_INTERNAL, NULL, "tier 0's reading of kernel %s failed: %.400s",
                             p->f->kernels[r].name, p->err.code ? p->err.msg : "it stopped early");
  pthread_mutex_unlock(&p->mu);
  return st;
}

/* ---- running ---------------------------------------------------------------------- */
/* The GEMM m of kernel K on the fast kernel. */
static harp_status run_gemm(harp_error *e, t0_ctx *x, const fn_kernel *K, const ct_gemm *m, ut_tensor *storage, bool *done) {
  rt_t0_gemm g = {.batch = {m->batch[0], m->batch[1]}, .M = m->M, .N = m->N, .K = m->K, .nepi = m->nepi,
                  .a_sb = {m->a_sb[0], m->a_sb[1]}, .a_sm = m->a_sm, .a_sk = m->a_sk,
                  .b_sb = {m->b_sb[0], m->b_sb[1]}, .b_sk = m->b_sk, .b_sn = m->b_sn,
                  .c_sb = {m->c_sb[0], m->c_sb[1]}, .c_sm = m->c_sm, .c_sn = m->c_sn};
  const float *a0 = m->nrep ? slot_ptr(e, x, K, storage, m->A0.slot, m->A0.offset) : NULL;
  g.a = m->nrep ? NULL : slot_ptr(e, x, K, storage, m->A.slot, m->A.offset);
  g.b = slot_ptr(e, x, K, storage, m->B.slot, m->B.offset);
  g.c = slot_ptr(e, x, K, storage, m->C.slot, m->C.offset);
  if (e->code) return e->code;
  if (!(g.a || a0) || !g.b || !g.c || !resolve_epi(e, x, K, storage, m->epi, m->nepi, g.epi)) return e->code;
  float *scratch = a0 ? repack_a(m, a0) : NULL;
  if (a0 && !scratch) return ut_fail(e, HARP_E_NO_MEMORY, K->name, "out of memory repacking A");
  if (scratch) g.a = scratch;
  for (int i = 0; i < 2; i++) g.batch[i] = g.batch[i] > 0 ? g.batch[i] : 1;
  *done = true;
  harp_status st = rt_t0_gemm_run(e, &g, x->threads);
  free(scratch);
  return st;
}

/* The convolution c of kernel K. */
static harp_status run_conv(harp_error *e, t0_ctx *x, const fn_kernel *K, const ct_conv *c, ut_tensor *storage, bool *done) {
  rt_t0_conv cv = {.c = *c, .nepi = c->nepi};
  cv.oh = conv_out(c->h, c->pad[0] + c->pad[2], c->dil[0], c->kh, c->stride[0]);
  cv.ow = conv_out(c->w, c->pad[1] + c->pad[3], c->dil[1], c->kw, c->stride[1]);
  cv.x = slot_ptr(e, x, K, storage, c->X.slot, c->X.offset);
  cv.w = slot_ptr(e, x, K, storage, c->W.slot, c->W.offset);
  cv.y = slot_ptr(e, x, K, storage, c->Y.slot, c->Y.offset);
  if (e->code) return e->code;
  if (!cv.x || !cv.w || !cv.y || !resolve_epi(e, x, K, storage, c->epi, c->nepi, cv.epi)) return e->code;
  *done = true;
  return rt_t0_conv_run(e, &cv, x->threads);
}

/* The 2-D max / sum pooling p of kernel K: one output point at a time. */
static harp_status run_pool(harp_error *e, t0_ctx *x, const fn_kernel *K, const ct_pool *pp, ut_tensor *storage, bool *done) {
  const ct_pool p = *pp;
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

/* The attention t of kernel K. */
static harp_status run_attn(harp_error *e, t0_ctx *x, const fn_kernel *K, const ct_attn *t, ut_tensor *storage, bool *done) {
  rt_t0_attn a = {.t = *t};
  a.q = slot_ptr(e, x, K, storage, t->q.slot, t->q.offset);
  a.k = slot_ptr(e, x, K, storage, t->k.slot, t->k.offset);
  a.v = slot_ptr(e, x, K, storage, t->v.slot, t->v.offset);
  a.out = slot_ptr(e, x, K, storage, t->out.slot, t->out.offset);
  if (t->has_mask) a.mask = slot_ptr(e, x, K, storage, t->mask.slot, t->mask.offset);
  if (e->code || !a.q || !a.k || !a.v || !a.out || (t->has_mask && !a.mask)) return e->code;
  *done = true;
  return rt_t0_attn_run(e, &a, x->threads);
}

/* The row softmax or layernorm k of kernel K. */
static harp_status run_row(harp_error *e, t0_ctx *x, const fn_kernel *K, const t0_read *k, ut_tensor *storage, bool *done) {
  rt_t0_row row;
  if (k->kind == 's') {
    const ct_softmax *sm = &k->u.s;
    row = (rt_t0_row){.rows = sm->rows, .cols = sm->cols, .scale = sm->scale};
    row.x = slot_ptr(e, x, K, storage, sm->x.slot, sm->x.offset);
    row.y = slot_ptr(e, x, K, storage, sm->y.slot, sm->y.offset);
  } else {
    const ct_layernorm *ln = &k->u.l;
    row = (rt_t0_row){.rows = ln->rows, .cols = ln->cols, .eps = ln->eps};
    row.x = slot_ptr(e, x, K, storage, ln->x.slot, ln->x.offset);
    row.y = slot_ptr(e, x, K, storage, ln->y.slot, ln->y.offset);
    if (ln->gamma.slot >= 0 && !(row.gamma = slot_ptr(e, x, K, storage, ln->gamma.slot, ln->gamma.offset))) return e->code;
    if (ln->beta.slot >= 0 && !(row.beta = slot_ptr(e, x, K, storage, ln->beta.slot, ln->beta.offset))) return e->code;
  }
  if (e->code || !row.x || !row.y) return e->code;
  *done = true;
  return k->kind == 's' ? rt_t0_softmax_run(e, &row, x->threads) : rt_t0_layernorm_run(e, &row, x->threads);
}

/* Piece m of a map set resolved into *out; false when a tensor is missing
 * or not fp32 storage. */
static bool map_piece(harp_error *e, const t0_ctx *x, const fn_kernel *K, ut_tensor *storage, const ct_map *m,
                      rt_t0_map *out) {
  out->m = *m;
  for (int k = 0; k < m->nin; k++)
    if (!(out->in[k] = slot_ptr(e, x, K, storage, m->in[k].t.slot, m->in[k].t.offset))) return false;
  return (out->y = slot_ptr(e, x, K, storage, m->y.slot, m->y.offset)) != NULL;
}

/* The map set of kernel K (every piece on the map kernel). */
static harp_status run_map(harp_error *e, t0_ctx *x, const fn_kernel *K, const ct_map_set *set, ut_tensor *storage,
                           bool *done) {
  rt_t0_map *pc = ut_xmalloc(sizeof *pc * CT_MAP_MAX_PIECES);
  if (!pc) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  bool ok = true;
  for (int k = 0; ok && k < set->npiece; k++) ok = map_piece(e, x, K, storage, &set->piece[k], &pc[k]);
  harp_status st = e->code;
  if (!st && ok) {
    *done = true;
    for (int k = 0; k < set->npiece && !st; k++) st = rt_t0_map_run(e, &pc[k], x->threads);
  }
  free(pc);
  return st;
}

/* The map g of kernel K read through floor divisions: each input's
 * strides dense over its buffer's shape (as the kernel layer read it). */
static harp_status run_gmap(harp_error *e, t0_ctx *x, const fn_kernel *K, const ct_gmap *g, ut_tensor *storage, bool *done) {
  const fn_function *f = x->prep->f;
  rt_t0_gmap m = {.g = g};
  for (int kp = 0; kp < g->npiece; kp++)
    for (int k = 0; k < g->piece[kp].nin; k++) {
      const ct_gmap_in *in = &g->piece[kp].in[k];
      int b = slot_buffer(K, in->t.slot);
      const tiny_shape *sh = b < 0 ? NULL : &x->c->g->nodes[f->buffers[b].node].shape;
      if (!sh || sh->rank != in->rank || !(m.in[kp][k] = slot_ptr(e, x, K, storage, in->t.slot, 0))) return e->code;
      int64_t st = 1;
      for (int a = in->rank - 1; a >= 0; st *= sh->d[a].n, a--) m.st[kp][k][a] = st;
    }
  int64_t n = 1;
  for (int v = 0; v < g->nv; v++) n *= g->size[v];
  int yb = slot_buffer(K, g->y.slot);
  if (yb < 0 || (int64_t)(f->buffers[yb].size / 4) < n || !(m.y = slot_ptr(e, x, K, storage, g->y.slot, 0))) return e->code;
  *done = true;
  return rt_t0_gmap_run(e, &m, x->threads);
}

/* Kernel r on the fast kernel its reading names, if any. */
static harp_status run_read(harp_error *e, t0_ctx *x, int r, ut_tensor *storage, bool *done) {
  const t0_read *k = &x->prep->k[r];
  const fn_kernel *K = &x->prep->f->kernels[r];
  switch (k->kind) {
    case 'g': return run_gemm(e, x, K, &k->u.g, storage, done);
    case 'c': return run_conv(e, x, K, &k->u.c, storage, done);
    case 'p': return run_pool(e, x, K, &k->u.p, storage, done);
    case 'a': return run_attn(e, x, K, &k->u.a, storage, done);
    case 's':
    case 'l': return run_row(e, x, K, k, storage, done);
    case 'm': return run_map(e, x, K, k->ms, storage, done);
    case 'q': return run_gmap(e, x, K, k->gm, storage, done);
    default: return HARP_OK;
  }
}

/* fn_playback_ex's hook: kernel r on a fast kernel when one takes it.  A
 * model output a kernel allocated before it declined is freed again (the
 * interpreter's result takes its place). */
static harp_status run_fast(void *ctx, harp_error *e, int r, ut_tensor *storage, bool *done) {
  t0_ctx *x = ctx;
  double t0 = ut_now_ms();
  if (wait_read(e, x->prep, r)) return e->code;
  x->st.wait_ms += ut_now_ms() - t0;
  t0 = ut_now_ms();
  const fn_kernel *K = &x->prep->f->kernels[r];
  uint64_t unset = 0; /* writes without storage yet (the first 64) */
  for (int w = 0; w < K->nwrites && w < 64; w++) unset |= (uint64_t)!storage[K->writes[w]].data << w;
  harp_status st = run_read(e, x, r, storage, done);
  if (*done) x->st.fast++, x->st.fast_ms += ut_now_ms() - t0;
  else x->st.interp++;
  for (int w = 0; !*done && w < K->nwrites && w < 64; w++)
    if (unset >> w & 1) ut_tensor_free(&storage[K->writes[w]]);
  return st;
}

/* Each input as the model declares it (dtype, shape): said before any kernel runs. */
static harp_status check_inputs(harp_error *e, const rt_compile *c, const fn_function *f, const ut_tensor *inputs,
                                int ninputs) {
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

harp_status rt_tier0_run(harp_error *e, const rt_compile *c, rt_t0_prep *prep, const ut_tensor *inputs, int ninputs,
                         ut_tensor *outputs, rt_t0_stats *stats) {
  if (!prep || !prep->f || prep->n != prep->f->nkernels)
    return ut_fail(e, HARP_E_INTERNAL, NULL, "tier 0 needs the compile's reading (rt_t0_prepare)");
  if (check_inputs(e, c, prep->f, inputs, ninputs)) return e->code;
  long nc = sysconf(_SC_NPROCESSORS_ONLN);
  t0_ctx x = {.c = c, .prep = prep, .threads = nc < 1 ? 1 : nc > RT_T0_MAX_THREADS ? RT_T0_MAX_THREADS : (int)nc};
  double t0 = ut_now_ms();
  harp_status st = fn_playback_ex(e, prep->f, c->syms, inputs, ninputs, outputs, run_fast, &x);
  x.st.interp_ms = ut_now_ms() - t0 - x.st.fast_ms - x.st.wait_ms;
  if (stats) *stats = x.st;
  return st;
}
