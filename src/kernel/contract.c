/* contract.c — contraction and attention regions read as template kernels,
 * for every target.
 * Needs: a region formed by rg_form (rg_info), its Poly-View, the Function.
 * Gives: ct_kind, ct_read_gemm, ct_read_conv, ct_read_attn, ct_window_pads (contract.h).
 *
 * What both backends' templates share: which tensors the kernel reads (the
 * base tensor or a materialized CAST of it, never through a rounding), each
 * operand as offset + strides over the block's variables, dimensions of one
 * role folded where they are contiguous in every tensor, the epilogue as
 * template steps with each added tensor placed as a bias or a residual.  The
 * decline messages land in comments of the generated code, so they say which
 * check failed. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernel/contract.h"
#include "harp/polycore.h"
#include "harp/region.h"

/* Declining a template: say why. */
#define DECLINE(msg)    \
  do {                  \
    *why = (msg);       \
    return false;       \
  } while (0)

typedef struct opnd {
  int node;          /* the tensor the kernel reads (base or a materialized CAST of it) */
  int stage;         /* 0: the base; k > 0: the operand's stage k (poly_access_info.stage), node */
  int slot;          /* in bufs[] */
  tiny_dtype dtype;  /* its storage */
  tiny_dtype round;  /* the fp16/bf16 a CAST on the way rounds it to (ct_src.round_operands), else FP32 */
  int64_t offset;    /* elements */
  int64_t stride[POLY_MAX_VARS];
} opnd;

int ct_slot_of(const fn_kernel *K, const fn_function *f, int node) {
  for (int k = 0; k < K->nreads; k++)
    if (f->buffers[K->reads[k]].node == node) return k;
  for (int k = 0; k < K->nwrites; k++)
    if (f->buffers[K->writes[k]].node == node) return K->nreads + k;
  return -1;
}

static void rowmajor(const tiny_shape *s, int64_t *st) {
  int64_t x = 1;
  for (int d = s->rank - 1; d >= 0; d--) st[d] = x, x *= s->d[d].n;
}

static bool lossless_to(tiny_dtype from, tiny_dtype to) {
  return from == to || (to == TINY_FP32 && (from == TINY_FP16 || from == TINY_BF16));
}

static ct_tensor tensor_of(const opnd *o) { return (ct_tensor){o->node, o->slot, o->dtype, o->offset}; }

/* Pick what the kernel reads for contraction operand a: the base tensor if
 * it is a buffer here, else the stage nearest the base that is (a
 * materialized CAST on the way, read at its own index); the casts left
 * between it and the MUL must not round. */
static bool pick_operand(const ct_src *c, const fn_kernel *K, const poly_block_info *b, int a, opnd *o) {
  const tiny_graph *g = c->g;
  const poly_access_info *ai = &b->access[a];
  int start = ai->nvia;
  o->node = ai->tensor;
  o->stage = 0;
  o->slot = ct_slot_of(K, c->f, o->node);
  for (int q = ai->nstage; q >= 1 && o->slot < 0; q--)
    if (ct_slot_of(K, c->f, ai->stage[q - 1]) >= 0) {
      o->node = ai->stage[q - 1];
      o->stage = q;
      o->slot = ct_slot_of(K, c->f, o->node);
    }
  if (o->slot < 0) return false;
  if (o->stage) { /* a stage is on the path: the casts nearer the block remain */
    for (start = ai->nvia - 1; start >= 0 && ai->via[start] != o->node; start--) {}
    if (start < 0) return false;
  }
  o->dtype = c->f->buffers[c->f->buffer_of[o->node]].dtype;
  o->round = TINY_FP32;
  tiny_dtype cur = o->dtype;
  for (int v = start - 1; v >= 0; v--) {
    const tiny_node *n = &g->nodes[ai->via[v]];
    if (n->op != TINY_CAST) continue;
    tiny_dtype to = n->a.cast.to;
    if (!lossless_to(cur, to)) {
      /* one rounding fp32 -> fp16/bf16, done when the operand is copied (GPU) */
      if (!c->round_operands || o->round != TINY_FP32 || cur != TINY_FP32 || (to != TINY_FP16 && to != TINY_BF16))
        return false;
      o->round = to;
    }
    cur = to;
  }
  return o->dtype == TINY_FP32 || o->dtype == TINY_FP16 || o->dtype == TINY_BF16;
}

/* The operand as offset + strides over the block's variables, in the
 * coordinates of the tensor picked. */
static harp_status operand_strides(harp_error *e, const poly_view *pv, int block, int a, opnd *o, bool *affine) {
  if (o->stage) return poly_stage_strides(e, pv, block, a, o->stage, o->stride, &o->offset, affine);
  return poly_access_strides(e, pv, block, a, o->stride, &o->offset, affine);
}

void ct_block_sizes(const tiny_graph *g, const poly_block_info *b, int64_t *size) {
  const tiny_node *n = &g->nodes[b->node];
  for (int v = 0; v < b->nout; v++) size[v] = n->shape.d[v].n;
  if (b->nvars > b->nout) {
    const tiny_node *in = &g->nodes[n->src[0].node];
    for (int j = 0; j < b->nvars - b->nout; j++) size[b->nout + j] = in->shape.d[n->a.reduce.axis_idx[j]].n;
  }
}

/* ---- epilogues -------------------------------------------------------------- */
typedef struct epi_map {
  int n;
  ct_epi epi[CT_MAX_EPI];
  const rg_operand *x[CT_MAX_EPI]; /* the tensor added (bias or residual, classified by the caller) */
} epi_map;

/* Whether block bi reads tensor t through padding anywhere (a constant
 * padded with another value is no literal). */
static bool reads_pad_of(const ct_src *c, int bi, int t) {
  const poly_block_info *b = poly_block(c->pv, bi);
  for (int a = 0; a < b->naccess; a++)
    if (!b->access[a].write && b->access[a].tensor == t && b->access[a].nfill) return true;
  return false;
}

/* Epilogue op ep's one extra operand as a float constant, not NaN, one
 * value at every point: *v; false otherwise. */
static bool epi_const(const ct_src *c, const rg_epi *ep, float *v) {
  if (ep->nextra != 1 || ep->extra[0].cast >= 0) return false;
  const tiny_node *t = &c->g->nodes[ep->extra[0].node];
  if (t->op != TINY_CONST || !tiny_dtype_is_float(t->dtype) || isnan(t->a.cnst.value)) return false;
  if (reads_pad_of(c, ep->block, ep->extra[0].node)) return false;
  *v = (float)t->a.cnst.value;
  return true;
}

/* The gate that starts at info->epi[*i] (RG_ROLE_GATE: MUL, ADD, MAX, MIN by
 * constants, in that order, each optional, then the MUL of x by them) as one
 * CT_EPI_GATE step in *out; *i moves to its MUL. */
static bool map_gate(const ct_src *c, const rg_info *info, int *i, ct_epi *out) {
  *out = (ct_epi){.kind = CT_EPI_GATE, .scale = 1.0f, .lo = -INFINITY, .hi = INFINITY, .slot = -1};
  static const tiny_op order[4] = {TINY_MUL, TINY_ADD, TINY_MAX, TINY_MIN};
  int o = 0;
  for (int j = *i; j < info->nepi && info->epi[j].role == RG_ROLE_GATE; j++) {
    const rg_epi *ep = &info->epi[j];
    tiny_op op = c->g->nodes[ep->node].op;
    if (op == TINY_MUL && ep->nextra == 0) { /* x times the gate: its end */
      *i = j;
      return o > 0;
    }
    float v;
    while (o < 4 && order[o] != op) o++;
    if (o == 4 || !epi_const(c, ep, &v)) return false;
    if (op == TINY_MUL) out->scale = v;
    else if (op == TINY_ADD) out->shift = v;
    else if (op == TINY_MAX) out->lo = v;
    else out->hi = v;
    o++;
  }
  return false;
}

/* Where map_epilogue stands: the chain's nodes are the anchor's and the
 * epilogue's before step `upto`; the region's, those it computes. */
typedef struct rf_env {
  const ct_src *c;
  const rg_region *R;
  const rg_info *info;
  int upto;
} rf_env;

static bool rf_chain(const void *env, int node) {
  const rf_env *v = env;
  if (node == poly_block(v->c->pv, v->info->anchor)->node) return true;
  for (int j = 0; j < v->upto; j++)
    if (v->info->epi[j].node == node) return true;
  return false;
}

static bool rf_inside(const void *env, int node) {
  const rf_env *v = env;
  return ct_region_block(v->c, v->R, node) >= 0;
}

/* Epilogue op i (a MULADD) as the exact QDQ Add step (rg_resfma) into *out,
 * its tensor's operand in *x: 1; 2 when it is the inner MULADD on the chain
 * of the next op's step (left to it); 0 when neither or its tensor is no
 * fp32 / fp16 / bf16 buffer read affinely. */
static int map_resfma(const ct_src *c, const fn_kernel *K, const rg_info *info, int i, ct_epi *out, const rg_operand **x) {
  rf_env v = {c, &c->f->part->regions[K->region], info, i};
  rg_resfma p;
  if (!rg_resfma_parse(c->g, info->epi[i].node, rf_chain, rf_inside, &v, &p)) {
    v.upto = i + 1;
    return i + 1 < info->nepi && rg_resfma_parse(c->g, info->epi[i + 1].node, rf_chain, rf_inside, &v, &p) && !p.chain_outer &&
                   p.inner == info->epi[i].node
               ? 2
               : 0;
  }
  const rg_epi *ep = &info->epi[i];
  *x = NULL;
  for (int k = 0; k < ep->nextra; k++)
    if (c->g->nodes[ep->extra[k].node].op != TINY_CONST) *x = *x ? NULL : &ep->extra[k];
  if (!*x || !(*x)->affine || (*x)->cast >= 0) return 0;
  int s = ct_slot_of(K, c->f, (*x)->node);
  tiny_dtype dt = s < 0 ? TINY_FP32 : c->f->buffers[c->f->buffer_of[(*x)->node]].dtype;
  if (s < 0 || (dt != TINY_FP32 && dt != TINY_FP16 && dt != TINY_BF16)) return 0;
  *out = (ct_epi){.kind = CT_EPI_RESFMA, .dtype = dt, .scale = p.sc, .shift = p.k, .rscale = p.sr, .rz = p.z,
                  .chain_outer = p.chain_outer, .slot = s, .off = (*x)->offset};
  return 1;
}

/* Epilogue cast n as a step into *out (last: it ends the chain): 1 a
 * rounding to fp16 / bf16 in the middle of the chain; 0 no step (the last
 * cast, which the store makes, or an exact widening); -1 no template step. */
static int map_cast(const tiny_graph *g, const tiny_node *n, bool last, ct_epi *out) {
  if (last) return 0; /* the store converts to C's dtype */
  tiny_dtype from = g->nodes[n->src[0].node].dtype, to = n->a.cast.to;
  if (to == TINY_FP32 && (from == TINY_FP16 || from == TINY_BF16 || from == TINY_FP32)) return 0; /* exact */
  if (from != TINY_FP32 || (to != TINY_FP16 && to != TINY_BF16)) return -1;
  out->kind = CT_EPI_ROUND; /* a rounding in the middle of the chain */
  out->dtype = to;
  return 1;
}

/* Epilogue op ep, a max (ek TE_LOWER) or min (TE_UPPER) with a constant, as
 * a clamp (ReLU6 = min(max(x, 0), 6)) into *out: 1 a new step; 0 the min
 * merged into the previous step em->epi[em->n - 1] (a max then a min are
 * one step, min(max(x, lo), hi) in that order); -1 no constant. */
static int map_clamp(const ct_src *c, const rg_epi *ep, tiny_epi ek, epi_map *em, ct_epi *out) {
  float v;
  if (!epi_const(c, ep, &v)) return -1;
  ct_epi *prev = em->n ? &em->epi[em->n - 1] : NULL;
  if (ek == TE_UPPER && prev && prev->kind == CT_EPI_CLAMP && prev->hi == INFINITY) {
    prev->hi = v;
    return 0;
  }
  out->kind = CT_EPI_CLAMP;
  out->lo = ek == TE_LOWER ? v : -INFINITY;
  out->hi = ek == TE_UPPER ? v : INFINITY;
  return 1;
}

/* Epilogue op ep, an add (ek TE_SHIFT) or multiply (TE_SCALE) by one
 * affine operand, into *out: by a float constant, a CT_EPI_SCALE; by an
 * fp32 / fp16 / bf16 tensor of kernel K, a CT_EPI_RESIDUAL whose operand
 * goes to *x.  False when it is neither. */
static bool map_scale(const ct_src *c, const fn_kernel *K, const rg_epi *ep, tiny_epi ek, ct_epi *out, const rg_operand **x) {
  const tiny_graph *g = c->g;
  if (ep->nextra != 1 || !ep->extra[0].affine) return false;
  if (ep->extra[0].cast >= 0) { /* only the exact widening of a half operand */
    const tiny_node *cv = &g->nodes[ep->extra[0].cast];
    if (cv->op != TINY_CAST || cv->a.cast.to != TINY_FP32) return false;
  }
  const rg_operand *xo = &ep->extra[0];
  const tiny_node *t = &g->nodes[xo->node];
  if (t->op == TINY_CONST) {
    if (!tiny_dtype_is_float(t->dtype)) return false;
    out->kind = CT_EPI_SCALE;
    out->scale = ek == TE_SCALE ? (float)t->a.cnst.value : 1.0f;
    out->shift = ek == TE_SHIFT ? (float)t->a.cnst.value : 0.0f;
    return true;
  }
  int s = ct_slot_of(K, c->f, xo->node);
  if (s < 0) return false;
  tiny_dtype dt = c->f->buffers[c->f->buffer_of[xo->node]].dtype;
  if (dt != TINY_FP32 && dt != TINY_FP16 && dt != TINY_BF16) return false;
  out->kind = CT_EPI_RESIDUAL;
  out->mul = ek == TE_SCALE;
  out->dtype = dt;
  out->slot = s;
  out->off = xo->offset;
  *x = xo;
  return true;
}

/* Epilogue op ep by the op table's epilogue column into *out (its tensor,
 * if any, to *x; the previous steps em): 1 a step, 0 merged into the
 * previous one, -1 no template step. */
static int map_table_op(const ct_src *c, const fn_kernel *K, const rg_epi *ep, epi_map *em, ct_epi *out, const rg_operand **x) {
  tiny_epi ek = tiny_op_epi(c->g->nodes[ep->node].op);
  switch (ek) {
  case TE_RELU: out->kind = CT_EPI_RELU; return 1;
  case TE_GELU: out->kind = CT_EPI_GELU; return 1;
  case TE_RINT: out->kind = CT_EPI_RINT; return 1;
  case TE_LOWER:
  case TE_UPPER: return map_clamp(c, ep, ek, em, out);
  case TE_SHIFT:
  case TE_SCALE: return map_scale(c, K, ep, ek, out, x) ? 1 : -1;
  default: return -1;
  }
}

/* Epilogue op *i of the region (info) as the next step of em into *out;
 * *i moves past the ops the step spans (a silu spelled out, a gate).
 * reshape_ok: as for map_epilogue.  1 a step, 0 none, -1 no template step. */
static int map_step(const ct_src *c, const fn_kernel *K, const rg_info *info, int *i, bool reshape_ok, epi_map *em, ct_epi *out) {
  const tiny_graph *g = c->g;
  const rg_epi *ep = &info->epi[*i];
  const tiny_node *n = &g->nodes[ep->node];
  /* a silu spelled out is several ops: one step, up to the MUL by the
   * RECIP that ends it (silu(silu(x)) is two steps, not one) */
  if (ep->role == PLAN_EPI_SILU) {
    int j = *i;
    while (j + 1 < info->nepi && info->epi[j + 1].role == PLAN_EPI_SILU && !rg_silu_last(g, info->epi[j].node)) j++;
    out->kind = CT_EPI_SILU;
    *i = j;
    return 1;
  }
  if (ep->role == RG_ROLE_GATE) return map_gate(c, info, i, out) ? 1 : -1;
  if (n->op == TINY_FDIV) { /* x / c (rg_options.gate_epilogues) */
    float v;
    if (!epi_const(c, ep, &v)) return -1;
    out->kind = CT_EPI_DIV;
    out->scale = v;
    return 1;
  }
  if (n->op == TINY_RESHAPE && reshape_ok) return 0;
  if (n->op == TINY_CAST) return map_cast(g, n, *i == info->nepi - 1, out);
  if (n->op == TINY_MULADD) { /* the exact QDQ Add: one step of its two MULADDs */
    int st = map_resfma(c, K, info, *i, out, &em->x[em->n]);
    return st ? st == 1 : -1;
  }
  return map_table_op(c, K, ep, em, out, &em->x[em->n]);
}

/* The region's epilogue as template steps; additions of a tensor are left
 * as CT_EPI_RESIDUAL with x[] set, for the caller to place.  reshape_ok: a
 * RESHAPE is no step (the grouped conv's [n, g, oc/g, oh, ow] -> [n, oc, oh, ow]:
 * the same elements in the same order, which the caller checks; the added
 * tensors' strides are over the anchor's variables either way). */
static bool map_epilogue(const ct_src *c, const fn_kernel *K, const rg_info *info, bool reshape_ok, epi_map *em) {
  memset(em, 0, sizeof *em);
  for (int i = 0; i < info->nepi; i++) {
    if (em->n >= CT_MAX_EPI) return false;
    ct_epi *out = &em->epi[em->n];
    out->slot = -1;
    int st = map_step(c, K, info, &i, reshape_ok, em, out);
    if (st < 0) return false;
    em->n += st;
  }
  return true;
}

/* Place a tensor-adding step from its strides over the final (folded)
 * dimensions: a contiguous vector along M or N is a bias, else a residual. */
static void place_addend(ct_epi *ep, int64_t sm, int64_t sn, int64_t sb0, int64_t sb1) {
  bool vec = ep->kind != CT_EPI_RESFMA; /* an exact QDQ Add's tensor: always a residual's strides */
  if (vec && sb0 == 0 && sb1 == 0 && sn == 0 && sm == 1) ep->kind = CT_EPI_BIAS_M;
  else if (vec && sb0 == 0 && sb1 == 0 && sm == 0 && sn == 1) ep->kind = CT_EPI_BIAS_N;
  else ep->s_b0 = sb0, ep->s_b1 = sb1, ep->s_m = sm, ep->s_n = sn;
}

/* ---- GEMM ---------------------------------------------------------------------- */
/* A GEMM dimension: its size and strides in A, B and C (0: not indexed). */
#define NT (3 + CT_MAX_EPI) /* A, B, C and the epilogue tensors */
typedef struct dimv {
  int64_t size, s[NT];
} dimv;

/* Merge the dimensions of one role (all M, all N, ...) that are contiguous
 * in every tensor indexing them: outer = inner * size(inner) in each.
 * Returns how many remain (the innermost merge first). */
static int fold(dimv *d, int n, int key) {
  for (int i = 0; i < n; i++) /* by the key tensor's stride, outermost first */
    for (int j = i + 1; j < n; j++)
      if (d[j].s[key] > d[i].s[key]) {
        dimv t = d[i];
        d[i] = d[j];
        d[j] = t;
      }
  int m = n;
  for (int i = m - 2; i >= 0; i--) {
    bool ok = true;
    for (int t = 0; t < NT && ok; t++)
      ok = (d[i].s[t] == 0 && d[i + 1].s[t] == 0) || (d[i].s[t] == d[i + 1].s[t] * d[i + 1].size && d[i + 1].s[t] != 0);
    if (!ok) continue;
    d[i].size *= d[i + 1].size;
    memcpy(d[i].s, d[i + 1].s, sizeof d[i].s);
    memmove(&d[i + 1], &d[i + 2], sizeof *d * (size_t)(m - i - 2));
    m--;
  }
  return m;
}

/* A's moving variables as a dense scratch tensor: batch, then M, then the
 * reduced ones in B's order (outermost first), so K folds whenever it folds
 * in B.  Rewrites A's strides (offset 0); the lists say what to copy. */
static bool repack_a(const poly_contraction *con, const poly_block_info *b, const int64_t *size, opnd *A, const opnd *B,
                     int *var, int64_t *vsize, int64_t *src_stride, int *n) {
  int k = 0;
  for (int i = 0; i < con->nbatch; i++)
    if (size[con->batch[i]] > 1 && A->stride[con->batch[i]]) var[k++] = con->batch[i];
  for (int i = 0; i < con->nm; i++)
    if (size[con->m[i]] > 1 && A->stride[con->m[i]]) var[k++] = con->m[i];
  int k0 = k;
  for (int v = b->nout; v < b->nvars; v++)
    if (size[v] > 1 && A->stride[v]) var[k++] = v;
  for (int i = k0; i < k; i++) /* by B's stride, outermost first */
    for (int j = i + 1; j < k; j++)
      if (B->stride[var[j]] > B->stride[var[i]]) {
        int t = var[i];
        var[i] = var[j];
        var[j] = t;
      }
  if (k == 0) return false;
  int64_t st = 1;
  for (int i = k - 1; i >= 0; i--) {
    vsize[i] = size[var[i]];
    st *= vsize[i];
  }
  if (st > (1L << 28)) return false; /* a scratch copy of over 1 GiB: not worth it */
  for (int i = 0; i < k; i++) src_stride[i] = A->stride[var[i]];
  int64_t x = 1;
  for (int i = k - 1; i >= 0; i--) {
    A->stride[var[i]] = x;
    x *= vsize[i];
  }
  A->offset = 0;
  *n = k;
  return true;
}

/* A GEMM's dimensions by role: M, N, K and the batch ones. */
typedef struct gemm_dims {
  dimv dm[POLY_MAX_VARS], dn[POLY_MAX_VARS], dk[POLY_MAX_VARS], db[POLY_MAX_VARS + 4];
  int nm, nn, nk, nb;
} gemm_dims;

/* The dimensions of contraction con (block b, its variables' extents
 * size) by role into *d, with the strides along each of A, B, C (C's
 * row-major strides cst) and of the epilogue tensors of em; M, N and K
 * folded where contiguous in every tensor.  False (*why) when an epilogue
 * tensor varies along K. */
static bool role_dims(const poly_contraction *con, const poly_block_info *b, const int64_t *size, const int64_t *cst,
                      const opnd *A, const opnd *B, const epi_map *em, gemm_dims *d, const char **why) {
  dimv *dm = d->dm, *dn = d->dn, *dk = d->dk, *db = d->db;
  int nm = 0, nn = 0, nk = 0, nb = 0;
  /* (a variable of extent 1 never moves: it has no dimension) */
  for (int i = 0; i < con->nm; i++)
    if (size[con->m[i]] > 1) dm[nm++] = (dimv){size[con->m[i]], {A->stride[con->m[i]], 0, cst[con->m[i]]}};
  for (int i = 0; i < con->nn; i++)
    if (size[con->n[i]] > 1) dn[nn++] = (dimv){size[con->n[i]], {0, B->stride[con->n[i]], cst[con->n[i]]}};
  for (int v = b->nout; v < b->nvars; v++)
    if (size[v] > 1) dk[nk++] = (dimv){size[v], {A->stride[v], B->stride[v], 0}};
  if (nk == 0) dk[nk++] = (dimv){1, {0}};
  for (int i = 0; i < con->nbatch; i++) {
    int v = con->batch[i];
    if (size[v] > 1) db[nb++] = (dimv){size[v], {A->stride[v], B->stride[v], cst[v]}};
  }
  /* the epilogue tensors' strides ride along (they index output variables) */
  dimv *lists[3] = {dm, dn, db};
  const int *vars[3] = {con->m, con->n, con->batch};
  for (int l = 0; l < 3; l++)
    for (int i = 0, j = 0; i < (l == 0 ? con->nm : l == 1 ? con->nn : con->nbatch); i++) {
      int v = vars[l][i];
      if (size[v] <= 1) continue;
      for (int q = 0; q < em->n; q++) lists[l][j].s[3 + q] = em->x[q] ? em->x[q]->strides[v] : 0;
      j++;
    }
  for (int q = 0; q < em->n; q++) /* an addend must not depend on K */
    if (em->x[q])
      for (int v = b->nout; v < b->nvars; v++)
        if (v < em->x[q]->nvars && em->x[q]->strides[v] && size[v] > 1) DECLINE("an epilogue tensor varies along K");
  if (nm == 0) dm[nm++] = (dimv){1, {0}};
  if (nn == 0) dn[nn++] = (dimv){1, {0}};
  d->nm = fold(dm, nm, 0);
  d->nn = fold(dn, nn, 1);
  d->nk = fold(dk, nk, 0);
  d->nb = nb;
  return true;
}

/* d's unfolded outer M and N dimensions moved to its batch ones, folded;
 * false (*why) when more than two remain. */
static bool batch_dims(gemm_dims *d, const char **why) {
  for (int i = 0; i < d->nm - 1; i++) d->db[d->nb++] = d->dm[i]; /* unfolded outer M / N dimensions: batch */
  for (int i = 0; i < d->nn - 1; i++) d->db[d->nb++] = d->dn[i];
  if (d->nb > 0) d->nb = fold(d->db, d->nb, 2);
  if (d->nb > 2) DECLINE("more than two batch dimensions after folding");
  return true;
}

char ct_kind(const ct_src *c, int r) {
  const fn_function *f = c->f;
  const rg_region *R = &f->part->regions[f->kernels[r].region];
  const rg_info *info = R->info;
  if (!info) return 0;
  if (info->shape == RG_SHAPE_ATTENTION) return 'a';
  if (info->shape != RG_SHAPE_CONTRACTION && !(info->shape == RG_SHAPE_SINGLE && info->anchor >= 0 &&
                                               poly_block(c->pv, info->anchor)->kind == POLY_CONTRACTION))
    return 0;
  const poly_block_info *b = poly_block(c->pv, info->anchor);
  if (!b->con) return 0;
  return b->con->pattern == POLY_PAT_CONV ? 'c' : 'g';
}

bool ct_read_gemm(const ct_src *c, int r, ct_gemm *out, const char **why) {
  const fn_function *f = c->f;
  const fn_kernel *K = &f->kernels[r];
  const rg_region *R = &f->part->regions[K->region];
  const rg_info *info = R->info;
  const tiny_graph *g = c->g;
  const poly_block_info *b = poly_block(c->pv, info->anchor);
  const poly_contraction *con = b->con;
  const tiny_node *red = &g->nodes[b->node];
  memset(out, 0, sizeof *out);
  if (!con || con->pattern != POLY_PAT_MATMUL || red->a.reduce.dtype != TINY_FP32 || R->nout != 1)
    DECLINE("not a matmul with an fp32 accumulation and one output");
  int cast = red->src[0].node;
  if (cast != con->mul_node && !lossless_to(g->nodes[con->mul_node].dtype, g->nodes[cast].a.cast.to))
    DECLINE("the products are rounded before they are summed");
  opnd A, B;
  if (!pick_operand(c, K, b, 0, &A) || !pick_operand(c, K, b, 1, &B))
    DECLINE("an operand is not a readable tensor, or is rounded on its way");
  if (B.round != TINY_FP32) DECLINE("the right operand is rounded on its way");
  /* each operand as offset + sum stride[v] * v over the block's variables
   * (any single-piece affine access: transposes, splits, broadcasts) */
  bool aff_a = false, aff_b = false;
  harp_error e2 = {0};
  if (operand_strides(&e2, c->pv, info->anchor, 0, &A, &aff_a) || operand_strides(&e2, c->pv, info->anchor, 1, &B, &aff_b) ||
      !aff_a || !aff_b)
    DECLINE("an operand is not a strided view of its tensor");
  for (int v = 0; v < b->nvars; v++)
    if (A.stride[v] < 0 || B.stride[v] < 0) DECLINE("an operand walks a dimension backwards");
  int64_t size[POLY_MAX_VARS];
  ct_block_sizes(g, b, size);
  /* C: the region's output, the contraction's shape (a pointwise epilogue) */
  int cnode = R->out_values[0];
  const tiny_node *C = &g->nodes[cnode];
  /* a RESHAPE on the way keeps the elements in order (a grouped 1x1 conv's
   * [n, g, oc/g, h, w] -> [n, oc, h, w]): C is addressed in red's shape */
  if (!tiny_shape_equal(&C->shape, &red->shape) && tiny_shape_numel(&C->shape) != tiny_shape_numel(&red->shape))
    DECLINE("the epilogue changes the shape");
  int cslot = ct_slot_of(K, f, cnode);
  tiny_dtype cdt = f->buffers[f->buffer_of[cnode]].dtype;
  if (cslot < 0 || (cdt != TINY_FP32 && cdt != TINY_FP16 && cdt != TINY_BF16)) DECLINE("the output is not an fp32/fp16/bf16 buffer");
  int64_t cst[TINY_MAX_RANK];
  rowmajor(&red->shape, cst);
  epi_map em;
  if (!map_epilogue(c, K, info, true, &em)) DECLINE("the epilogue is not a sequence of template steps");
  /* the dimensions by role, folded where contiguous in every tensor; when
   * A's reduced dimensions do not fold (heads merged back: [b][h][s][d] read
   * as [b][s][h*d]), a second try copies A into a dense scratch first */
  opnd A0 = A; /* A as the tensor holds it */
  int nrep = 0, rep_var[POLY_MAX_VARS];
  gemm_dims d;
  for (int attempt = 0;; attempt++) {
    if (!role_dims(con, b, size, cst, &A, &B, &em, &d, why)) return false;
    if (d.nk == 1 && (attempt > 0 || A.round == TINY_FP32)) break; /* a rounded A is copied (rounding) anyway */
    if (attempt > 0 || !repack_a(con, b, size, &A, &B, rep_var, out->rep_size, out->rep_src, &nrep))
      DECLINE("the reduced variables do not fold into one K");
  }
  if (!batch_dims(&d, why)) return false;
  const dimv *db = d.db;
  int nb = d.nb;
  dimv M = d.dm[d.nm - 1], N = d.dn[d.nn - 1], Kd = d.dk[0];
  for (int q = 0; q < em.n; q++)
    if (em.x[q])
      place_addend(&em.epi[q], M.s[3 + q], N.s[3 + q], nb > 0 ? db[0].s[3 + q] : 0, nb > 1 ? db[1].s[3 + q] : 0);
  out->M = M.size, out->N = N.size, out->K = Kd.size;
  out->A = tensor_of(&A);
  out->B = tensor_of(&B);
  out->C = (ct_tensor){cnode, cslot, cdt, 0};
  out->a_sm = M.s[0], out->a_sk = Kd.s[0];
  out->b_sk = Kd.s[1], out->b_sn = N.s[1];
  out->c_sm = M.s[2], out->c_sn = N.s[2];
  for (int i = 0; i < 2; i++) {
    out->batch[i] = i < nb ? db[i].size : 1;
    out->a_sb[i] = i < nb ? db[i].s[0] : 0;
    out->b_sb[i] = i < nb ? db[i].s[1] : 0;
    out->c_sb[i] = i < nb ? db[i].s[2] : 0;
  }
  out->nepi = em.n;
  memcpy(out->epi, em.epi, sizeof em.epi);
  out->nrep = nrep;
  out->A0 = tensor_of(&A0);
  out->a_round = A.round;
  if (A.round != TINY_FP32) out->A.dtype = A.round;
  if (nrep) out->A.slot = -1;
  return true;
}

/* ---- conv ------------------------------------------------------------------------ */
/* The axis is read as sum want[v] * v + cst over the block's variables
 * (a variable of extent 1 never moves the index, whatever its coefficient). */
static bool idx_is(const poly_idx *ix, int nvars, const int64_t *size, const int64_t *want, int64_t cst) {
  if (!ix->lin || ix->cst != cst) return false;
  for (int v = 0; v < nvars; v++)
    if (size[v] > 1 && ix->coef[v] != want[v]) return false;
  return true;
}

/* idx_is with one or two variables: want a*va (+ b*vb). */
static bool idx_of(const poly_idx *ix, int nvars, const int64_t *size, int va, int64_t a, int vb, int64_t b) {
  int64_t want[POLY_MAX_VARS] = {0};
  want[va] = a;
  if (vb >= 0) want[vb] = b;
  return idx_is(ix, nvars, size, want, 0);
}

/* The shape, strides, dilations and padding of a convolution's window
 * into *out, from its input and weight shapes xs, ws, the input's indices
 * xi and the extents size of the block's variables (oh, ow, kh, kw at
 * 2 + vo, 3 + vo, 5 + vo, 6 + vo); false (*why) when the window starts
 * inside the input or gives another output size. */
static bool conv_window(const tiny_shape *xs, const tiny_shape *ws, const poly_idx *xi, const int64_t *size, int vo,
                        ct_conv *out, const char **why) {
  out->n = xs->d[0].n, out->c = xs->d[1].n, out->h = xs->d[2].n, out->w = xs->d[3].n;
  out->oc = ws->d[0].n, out->kh = ws->d[2].n, out->kw = ws->d[3].n;
  for (int q = 0; q < 2; q++) {
    const poly_idx *w = &xi[2 + q];
    int64_t in = xs->d[2 + q].n, outn = size[2 + q + vo], k = size[5 + q + vo];
    out->stride[q] = w->stride;
    out->dil[q] = w->dilation;
    int64_t lo = -w->offset;
    int64_t hi = (outn - 1) * w->stride + w->dilation * (k - 1) + 1 - in - lo;
    if (lo < 0) DECLINE("the window starts inside the input");
    /* hi < 0: the last rows are never read (a 1x1 stride-2 conv on an even
     * size); the floor in the output size below skips them, and it declines
     * when they are more than a stride */
    out->pad[q] = lo;                 /* top, left */
    out->pad[2 + q] = hi < 0 ? 0 : hi; /* bottom, right */
  }
  /* the output size the window gives (cgen_conv_out_hw / cuda_conv_out_hw) */
  int64_t oh = -1, ow = -1;
  if (out->stride[0] >= 1 && out->stride[1] >= 1 && out->dil[0] >= 1 && out->dil[1] >= 1) {
    int64_t eh = out->h + out->pad[0] + out->pad[2] - out->dil[0] * (out->kh - 1) - 1;
    int64_t ew = out->w + out->pad[1] + out->pad[3] - out->dil[1] * (out->kw - 1) - 1;
    if (eh >= 0 && ew >= 0) oh = eh / out->stride[0] + 1, ow = ew / out->stride[1] + 1;
  }
  if (oh < 0 || oh != size[2 + vo] || ow != size[3 + vo] || size[0] != xs->d[0].n)
    DECLINE("the output size does not match the window");
  return true;
}

/* The PAD a read of tensor node x in Function kernel `kernel` passes (the
 * window's padding as the model wrote it), or NULL. */
static const tiny_node *pad_before(const ct_src *s, int kernel, int x) {
  const rg_region *R = &s->f->part->regions[s->f->kernels[kernel].region];
  for (int k = 0; k < R->nblocks; k++) {
    const poly_block_info *b = poly_block(s->pv, R->blocks[k]);
    for (int a = 0; a < b->naccess; a++) {
      if (b->access[a].write || b->access[a].tensor != x) continue;
      for (int v = 0; v < b->access[a].nvia; v++)
        if (s->g->nodes[b->access[a].via[v]].op == TINY_PAD) return &s->g->nodes[b->access[a].via[v]];
    }
  }
  return NULL;
}

void ct_window_pads(const ct_src *s, int kernel, int x, const int64_t *stride, const bool *rt, int64_t *pad) {
  const tiny_node *p = pad_before(s, kernel, x);
  if (!p || p->a.pad.n < 2) return;
  for (int q = 0; q < 2; q++) {
    int64_t hi = p->a.pad.hi[p->a.pad.n - 2 + q].n, lo = p->a.pad.lo[p->a.pad.n - 2 + q].n;
    if (rt[q] && lo == pad[q] && hi > pad[2 + q] && hi < pad[2 + q] + stride[q]) pad[2 + q] = hi;
  }
}

/* The epilogue tensors of em classified for a convolution (block b, its
 * variables' extents size; grouped: grp, OCG output channels a group): a
 * bias per output channel becomes CT_EPI_BIAS_M; false (*why) for one
 * neither that nor laid out like the output. */
static bool conv_epilogue(const poly_block_info *b, const int64_t *size, bool grp, int64_t OCG, epi_map *em,
                          const char **why) {
  const int vo = grp ? 1 : 0, vg = grp ? 1 : -1, voc = 1 + vo;
  /* conv: a bias per output channel (g*OCG + o), or a residual laid out like y */
  int64_t bst[POLY_MAX_VARS] = {0}, yst[POLY_MAX_VARS];
  bst[voc] = 1;
  if (grp) bst[vg] = OCG;
  tiny_shape ys = {.rank = b->nout};
  for (int v = 0; v < b->nout; v++) ys.d[v].n = size[v];
  rowmajor(&ys, yst);
  for (int q = 0; q < em->n; q++) {
    if (!em->x[q]) continue;
    bool bias = true, resid = true;
    for (int v = 0; v < b->nout; v++) {
      if (size[v] == 1) continue; /* an extent-1 dimension never moves the address */
      int64_t st = v < em->x[q]->nvars ? em->x[q]->strides[v] : 0;
      bias = bias && st == bst[v];
      resid = resid && st == yst[v];
    }
    if (bias && em->epi[q].kind != CT_EPI_RESFMA) em->epi[q].kind = CT_EPI_BIAS_M;
    else if (!resid) DECLINE("an epilogue tensor is neither a per-channel bias nor laid out like the output");
  }
  return true;
}

bool ct_read_conv(const ct_src *c, int r, ct_conv *out, const char **why) {
  const fn_function *f = c->f;
  const fn_kernel *K = &f->kernels[r];
  const rg_region *R = &f->part->regions[K->region];
  const rg_info *info = R->info;
  const tiny_graph *g = c->g;
  const poly_block_info *b = poly_block(c->pv, info->anchor);
  const poly_contraction *con = b->con;
  const tiny_node *red = &g->nodes[b->node];
  memset(out, 0, sizeof *out);
  /* dense: out vars (n, oc, oh, ow), reduced (c, kh, kw).  grouped
   * (frontend/lower_nn.c): out vars (n, g, o, oh, ow) with o the output
   * channel within group g, reduced (c, kh, kw) with c the input channel
   * within the group; depthwise is the case of one channel per group */
  bool grp = b->nout == 5 && b->nvars == 8;
  if (!con || con->pattern != POLY_PAT_CONV || !((b->nout == 4 && b->nvars == 7) || grp) ||
      red->a.reduce.dtype != TINY_FP32 || R->nout != 1 || red->src[0].node != con->mul_node)
    DECLINE("not a 2-D convolution with an fp32 accumulation");
  const int vo = grp ? 1 : 0; /* where oh, ow (2 + vo, 3 + vo) and c, kh, kw (4 + vo ..) are */
  const int vg = grp ? 1 : -1, voc = 1 + vo, vc = 4 + vo; /* group, output channel (in the group), input channel */
  int64_t size[POLY_MAX_VARS];
  ct_block_sizes(g, b, size);
  const int64_t G = grp ? size[1] : 1, OCG = size[voc], ICG = size[vc];
  /* X[n, g*ICG + c, oh*s + kh*d - p, ow*s + kw*d - p], W[g*OCG + o, c, kh, kw] */
  bool lhs_is_x = con->lhs_rank == 4 && con->lhs_idx[2].kind == POLY_IDX_WINDOW;
  const poly_idx *xi = lhs_is_x ? con->lhs_idx : con->rhs_idx, *wi = lhs_is_x ? con->rhs_idx : con->lhs_idx;
  int xa = lhs_is_x ? 0 : 1;
  opnd X = {0}, W = {0}; /* conv operands are whole tensors: offset 0 */
  if (!pick_operand(c, K, b, xa, &X) || !pick_operand(c, K, b, 1 - xa, &W) || X.round != TINY_FP32 || W.round != TINY_FP32)
    DECLINE("an operand is not a readable tensor, or is rounded on its way");
  /* the base, or a materialized CAST of it (a stage: the casts Poly-View
   * composed the read through are pointwise, so the indices are the base's;
   * pick_operand saw only exact widenings after it) */
  if ((X.node != (lhs_is_x ? con->lhs : con->rhs) && !X.stage) || (W.node != (lhs_is_x ? con->rhs : con->lhs) && !W.stage))
    DECLINE("an operand is read through a cast");
  if ((lhs_is_x ? con->rhs_rank : con->lhs_rank) != 4 || (lhs_is_x ? con->lhs_rank : con->rhs_rank) != 4) DECLINE("an operand is not 4-D");
  /* (a batch of 1 is the constant index 0: isl fixes a variable of extent 1) */
  if (!idx_of(&xi[0], b->nvars, size, 0, 1, -1, 0) || !idx_of(&xi[1], b->nvars, size, vc, 1, vg, ICG) ||
      xi[2].kind != POLY_IDX_WINDOW || xi[2].out_var != 2 + vo || xi[2].win_var != 5 + vo ||
      xi[3].kind != POLY_IDX_WINDOW || xi[3].out_var != 3 + vo || xi[3].win_var != 6 + vo)
    DECLINE(grp ? "the input is not read as X[n, g*C/G + c, oh*s + kh*d - p, ow*s + kw*d - p]"
                : "the input is not read as X[n, c, oh*s + kh*d - p, ow*s + kw*d - p]");
  if (!idx_of(&wi[0], b->nvars, size, voc, 1, vg, OCG) || !idx_of(&wi[1], b->nvars, size, vc, 1, -1, 0) ||
      !idx_of(&wi[2], b->nvars, size, 5 + vo, 1, -1, 0) || !idx_of(&wi[3], b->nvars, size, 6 + vo, 1, -1, 0))
    DECLINE(grp ? "the weight is not read as W[g*OC/G + o, c, kh, kw]" : "the weight is not read as W[oc, c, kh, kw]");
  if ((lhs_is_x ? con->lhs_fill : con->rhs_fill) && (lhs_is_x ? con->lhs_fill_value : con->rhs_fill_value) != 0)
    DECLINE("the padding is not zero");
  const tiny_shape *xs = &g->nodes[X.node].shape, *ws = &g->nodes[W.node].shape;
  int cnode = R->out_values[0];
  const tiny_node *Y = &g->nodes[cnode];
  /* grouped: y is [n, oc, oh, ow] or the reduction's [n, g, o, oh, ow], the same layout */
  bool y_ok = tiny_shape_equal(&Y->shape, &red->shape) ||
              (grp && Y->shape.rank == 4 && Y->shape.d[0].n == size[0] && Y->shape.d[1].n == G * OCG &&
               Y->shape.d[2].n == size[3] && Y->shape.d[3].n == size[4]);
  if (!y_ok) DECLINE("the epilogue changes the shape");
  int yslot = ct_slot_of(K, f, cnode);
  tiny_dtype ydt = f->buffers[f->buffer_of[cnode]].dtype;
  if (yslot < 0 || (ydt != TINY_FP32 && ydt != TINY_FP16 && ydt != TINY_BF16)) DECLINE("the output is not an fp32/fp16/bf16 buffer");
  if (!conv_window(xs, ws, xi, size, vo, out, why)) return false;
  if (G * ICG != xs->d[1].n || ws->d[1].n != ICG || ws->d[0].n != G * OCG) DECLINE("the channels do not match");
  out->groups = G;
  epi_map em;
  if (!map_epilogue(c, K, info, grp, &em)) DECLINE("the epilogue is not a sequence of template steps");
  if (!conv_epilogue(b, size, grp, OCG, &em, why)) return false;
  out->X = tensor_of(&X);
  out->W = tensor_of(&W);
  out->Y = (ct_tensor){cnode, yslot, ydt, 0};
  out->x_is_lhs = lhs_is_x;
  out->nepi = em.n;
  memcpy(out->epi, em.epi, sizeof em.epi);
  return true;
}

/* ---- attention --------------------------------------------------------------------- */
/* The element strides of o over (b, h, row) when its last listed variable
 * (d) has unit stride and no unlisted variable moves it (vars: -1 = absent;
 * vsize: the block's variable extents; extent-1 variables never move). */
static bool head_strides(const tiny_graph *g, const rg_operand *o, const int *vars, const int64_t *vsize,
                         int64_t *out) {
  if (!o->affine || o->offset < 0) return false;
  if (o->cast >= 0) { /* only the exact widening of a half operand */
    const tiny_node *cv = &g->nodes[o->cast];
    if (cv->op != TINY_CAST || !lossless_to(g->nodes[o->node].dtype, cv->a.cast.to)) return false;
  }
  if (vars[3] >= 0 && vsize[vars[3]] > 1 && o->strides[vars[3]] != 1) return false;
  for (int i = 0; i < 3; i++) out[i] = vars[i] >= 0 && vsize[vars[i]] > 1 ? o->strides[vars[i]] : 0;
  for (int v = 0; v < o->nvars; v++) {
    if (!o->strides[v] || vsize[v] <= 1) continue;
    bool listed = false;
    for (int i = 0; i < 4; i++) listed |= vars[i] == v;
    if (!listed) return false;
  }
  return true;
}

/* The tensor an attention operand is read from: o's node when it is a
 * buffer of the kernel, else a materialized CAST of it that the block's read
 * passes (a rounding the program applies, so its buffer holds exactly the
 * values read), with only exact widenings after it. */
static bool att_operand(const ct_src *c, const fn_kernel *K, int block, const rg_operand *o, int *node, int *slot) {
  *node = o->node;
  *slot = ct_slot_of(K, c->f, o->node);
  if (*slot >= 0) return true;
  if (!c->att_cast_operands) return false;
  const poly_block_info *b = poly_block(c->pv, block);
  for (int a = 0; a < b->naccess; a++) {
    const poly_access_info *ai = &b->access[a];
    if (ai->write || ai->tensor != o->node) continue;
    for (int v = ai->nvia - 1; v >= 0; v--) {
      const tiny_node *n = &c->g->nodes[ai->via[v]];
      int s = ct_slot_of(K, c->f, ai->via[v]);
      if (n->op != TINY_CAST || n->src[0].node != o->node || s < 0) continue;
      tiny_dtype cur = c->f->buffers[c->f->buffer_of[ai->via[v]]].dtype;
      for (int w = v - 1; w >= 0; w--) {
        const tiny_node *x = &c->g->nodes[ai->via[w]];
        if (x->op != TINY_CAST) continue;
        if (!lossless_to(cur, x->a.cast.to)) return false;
        cur = x->a.cast.to;
      }
      *node = ai->via[v];
      *slot = s;
      return true;
    }
  }
  return false;
}

bool ct_read_attn(const ct_src *c, int r, ct_attn *out, const char **why) {
  const fn_function *f = c->f;
  const fn_kernel *K = &f->kernels[r];
  const rg_region *R = &f->part->regions[K->region];
  const rg_info *info = R->info;
  const rg_attention *at = &info->att;
  const tiny_graph *g = c->g;
  memset(out, 0, sizeof *out);
  if (R->nout != 1 || (at->where_mask >= 0 && !at->causal)) DECLINE("several outputs, or a mask other than causal");
  if ((at->has_max_floor || at->has_sum_floor) && !(at->causal && at->causal_offset == 0 && !at->has_mask)) DECLINE("the row max or sum is clamped where rows can be fully masked");
  const poly_block_info *qk = poly_block(c->pv, at->qk), *pv = poly_block(c->pv, at->pv);
  int64_t qs[POLY_MAX_VARS], ps[POLY_MAX_VARS];
  ct_block_sizes(g, qk, qs);
  ct_block_sizes(g, pv, ps);
  /* batch variables: the output variables that are neither query nor key
   * (QK^T) / query nor value dim (PV), extent-1 ones aside, in order */
  if (at->dv_var != pv->nout - 1) DECLINE("the output is not [b][h][m][dv]");
  int pv_q = pv->nout - 2;
  int bq[POLY_MAX_VARS], bp[POLY_MAX_VARS], nbq = 0, nbp = 0;
  for (int v = 0; v < qk->nout; v++)
    if (v != at->q_var && v != at->k_var && qs[v] > 1) bq[nbq++] = v;
  for (int v = 0; v < pv->nout; v++)
    if (v != pv_q && v != at->dv_var && ps[v] > 1) bp[nbp++] = v;
  if (nbq > 2 || nbq != nbp) DECLINE("more than two batch variables");
  for (int i = 0; i < nbq; i++)
    if (qs[bq[i]] != ps[bp[i]]) DECLINE("the two contractions disagree on a batch variable");
  int vb0 = nbq == 2 ? bq[0] : -1, vb1 = nbq >= 1 ? bq[nbq - 1] : -1;
  int pb0 = nbq == 2 ? bp[0] : -1, pb1 = nbq >= 1 ? bp[nbq - 1] : -1;
  out->B = vb0 >= 0 ? qs[vb0] : 1, out->H = vb1 >= 0 ? qs[vb1] : 1;
  out->M = qs[at->q_var], out->N = qs[at->k_var], out->D = qs[at->d_var], out->DV = ps[at->dv_var];
  if (at->causal && at->causal_offset != 0) DECLINE("a causal mask that is not top-left aligned");
  int pv_key = pv->nout; /* PV's reduced variable: the keys */
  int qv[4] = {vb0, vb1, at->q_var, at->d_var}, kv[4] = {vb0, vb1, at->k_var, at->d_var};
  int vv[4] = {pb0, pb1, pv_key, at->dv_var};
  if (!head_strides(g, &at->q, qv, qs, out->q_s) || !head_strides(g, &at->k, kv, qs, out->k_s) ||
      !head_strides(g, &at->v, vv, ps, out->v_s))
    DECLINE("Q, K or V does not have unit stride along d, or varies with another variable");
  int qn, kn, vn, qslot, kslot, vslot, oslot = ct_slot_of(K, f, R->out_values[0]);
  if (!att_operand(c, K, at->qk, &at->q, &qn, &qslot) || !att_operand(c, K, at->qk, &at->k, &kn, &kslot) ||
      !att_operand(c, K, at->pv, &at->v, &vn, &vslot) || oslot < 0)
    DECLINE("a tensor is not a buffer of the kernel");
  tiny_dtype qdt = f->buffers[f->buffer_of[qn]].dtype, kdt = f->buffers[f->buffer_of[kn]].dtype;
  tiny_dtype vdt = f->buffers[f->buffer_of[vn]].dtype, odt = f->buffers[f->buffer_of[R->out_values[0]]].dtype;
  if (kdt != vdt) DECLINE("K and V differ in dtype");
  /* the output: P V's output variables are its axes, dv the last (unit stride) */
  const tiny_shape *os = &g->nodes[R->out_values[0]].shape;
  if (os->rank != pv->nout) DECLINE("the output is not laid out by P V's variables");
  int64_t ost[TINY_MAX_RANK];
  rowmajor(os, ost);
  out->o_s[0] = pb0 >= 0 ? ost[pb0] : 0, out->o_s[1] = pb1 >= 0 ? ost[pb1] : 0, out->o_s[2] = ost[pv_q];
  out->odim[0] = pb0, out->odim[1] = pb1, out->odim[2] = pv_q;
  out->key_node = qk->node, out->key_dim = at->k_var;
  for (int i = 0; i < info->nepi; i++) /* only casts may follow P V */
    if (g->nodes[info->epi[i].node].op != TINY_CAST || i != info->nepi - 1) DECLINE("an op other than a final cast follows P V");
  out->q = (ct_tensor){qn, qslot, qdt, at->q.offset};
  out->k = (ct_tensor){kn, kslot, kdt, at->k.offset};
  out->v = (ct_tensor){vn, vslot, vdt, at->v.offset};
  out->out = (ct_tensor){R->out_values[0], oslot, odt, 0};
  out->scale = (float)at->scale;
  out->causal = at->causal;
  if (at->has_mask) {
    const rg_operand *mk = &at->mask;
    int mslot = ct_slot_of(K, f, mk->node);
    if (mslot < 0 || !mk->affine || mk->cast >= 0) DECLINE("the additive mask is not a strided tensor");
    out->has_mask = true;
    out->mask = (ct_tensor){mk->node, mslot, f->buffers[f->buffer_of[mk->node]].dtype, mk->offset};
    int mv[4] = {vb0, vb1, at->q_var, at->k_var};
    for (int i = 0; i < 4; i++) out->mask_s[i] = mv[i] >= 0 ? mk->strides[mv[i]] : 0;
    for (int v = 0; v < mk->nvars; v++)
      if (mk->strides[v] && v != vb0 && v != vb1 && v != at->q_var && v != at->k_var) DECLINE("the mask depends on the head dimension");
  }
  return true;
}
