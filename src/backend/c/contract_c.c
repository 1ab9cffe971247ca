/* contract_c.c — contraction and attention regions on the kernel templates
 * of cgen.h (BLIS-style GEMM, implicit-GEMM conv, streaming-softmax
 * attention).
 * Needs: a region formed by rg_form (rg_info), its Poly-View, the Function.
 * Gives: cc_emit_template.
 *
 * A region maps onto a template when its operands are plain strided tensors
 * (every operand axis indexed by one variable, or a window for conv), its
 * epilogue is a sequence of the template's steps (bias, residual, relu, gelu,
 * silu, sigmoid, scale, and a final cast), and its reduction accumulates in
 * fp32.  Anything else returns *handled = false and the region gets the
 * generic loop nest of region_c.c, which computes the same values. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cgen.h"
#include "contract_c.h"
#include "harp/polycore.h"
#include "harp/region.h"
#include "harp/tune.h"

/* Declining a template: say why (it lands in a comment of the generated C). */
#define DECLINE(msg)    \
  do {                  \
    *why = (msg);       \
    return HP_OK;       \
  } while (0)

typedef struct opnd {
  int node;          /* the tensor the kernel reads (base or a materialized CAST of it) */
  int slot;          /* in bufs[] */
  tiny_dtype dtype;  /* its storage */
  int64_t offset;    /* elements */
  int64_t stride[POLY_MAX_VARS];
} opnd;

static int slot_of(const fn_kernel *K, const hp_function *f, int node) {
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

/* Pick what the kernel reads for contraction operand a: the base tensor if
 * it is a buffer here, else a materialized CAST applied to it directly; the
 * casts left between it and the MUL must not round. */
static bool pick_operand(const rc_ctx *c, const fn_kernel *K, const poly_block_info *b, int a, opnd *o) {
  const tiny_graph *g = c->g;
  const poly_access_info *ai = &b->access[a];
  int start = ai->nvia;
  o->node = ai->tensor;
  o->slot = slot_of(K, c->f, o->node);
  if (o->slot < 0)
    for (int v = ai->nvia - 1; v >= 0 && o->slot < 0; v--) {
      const tiny_node *n = &g->nodes[ai->via[v]];
      if (n->op == TINY_CAST && n->src[0].node == ai->tensor && slot_of(K, c->f, ai->via[v]) >= 0) {
        o->node = ai->via[v];
        o->slot = slot_of(K, c->f, o->node);
        start = v;
      }
    }
  if (o->slot < 0) return false;
  o->dtype = c->f->buffers[c->f->buffer_of[o->node]].dtype;
  tiny_dtype cur = o->dtype;
  for (int v = start - 1; v >= 0; v--) {
    const tiny_node *n = &g->nodes[ai->via[v]];
    if (n->op != TINY_CAST) continue;
    if (!lossless_to(cur, n->a.cast.to)) return false;
    cur = n->a.cast.to;
  }
  return o->dtype == TINY_FP32 || o->dtype == TINY_FP16 || o->dtype == TINY_BF16;
}

/* Sizes of a contraction block's variables. */
static void var_sizes(const tiny_graph *g, const poly_block_info *b, int64_t *size) {
  const tiny_node *r = &g->nodes[b->node];
  const tiny_node *in = &g->nodes[r->src[0].node];
  for (int v = 0; v < b->nout; v++) size[v] = r->shape.d[v].n;
  for (int j = 0; j < b->nvars - b->nout; j++) size[b->nout + j] = in->shape.d[r->a.reduce.axis_idx[j]].n;
}

/* The one variant this machine runs best (the JIT compiles where it runs). */
static unsigned host_isa_mask(void) {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("fma"))
    return 1u << CGEN_ISA_AVX512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c"))
    return 1u << CGEN_ISA_AVX2;
  return 1u << CGEN_ISA_SCALAR;
}

/* ---- the region's Schedule Plan -> the template's tuning ---------------------- */
/* How a plan reads on the CPU templates (design.md §2.8, README.md here):
 *   warp_tile WMxWN      -> mr x nr, the register micro-tile of the primary (widest) variant
 *   tile [BM, BN, BK]    -> mc, nc, kc (attention: bm query rows, bn keys per tile)
 *   vectorize width      -> simd: 16 AVX-512, 8 AVX2, narrower: scalar; the JIT emits the
 *                           widest variant the host and the width allow
 *   stages               -> prefetch distance, 4 x stages k steps (2 -> 8, the measured best)
 *   bind M.o / N.o       -> par_m / par_n and threads = cores; neither bound: one task over
 *                           M x N (batch dimensions are always parallel)
 *   reorder              -> order 1 when N.i.o comes before M.i.o, else order 0
 * Ignored (said in the note): unroll, further splits; silently: layout hints, fuse
 * (batch axes are always parallel), a missing
 * cache_read (the templates always pack), predicate_tail (tails are always handled).
 * Conv: the template's M is the output channels and N the pixels; when the plan's M
 * is the pixels (X is the left operand) only BK is read (kc): the plan's M/N tiles and
 * warp tile are sized for a GEMM's rows and columns and would shrink the pixel panel. */
typedef struct plan_use {
  hp_plan_choice *ch; /* NULL: the template's built-in tuning */
  char desc[320];     /* the plan and the tuning it became, for the generated C */
} plan_use;

static void note_add(hp_plan_choice *ch, const char *what) {
  size_t n = strlen(ch->note);
  if (strstr(ch->note, what)) return;
  snprintf(ch->note + n, sizeof ch->note - n, "%s%s", n ? "; " : "", what);
}

/* The region's plan, or NULL for the built-in tuning (no plan, or
 * HARP_NO_PLANS=1, an A/B switch for benchmarks). */
static hp_plan_choice *choice_of(const rc_ctx *c, int r) {
  if (!c->plans) return NULL;
  hp_plan_choice *ch = &c->plans[c->f->kernels[r].region];
  if (!ch->has_plan) return NULL;
  const char *off = getenv("HARP_NO_PLANS");
  if (off && *off && strcmp(off, "0")) {
    note_add(ch, "HARP_NO_PLANS: the template's built-in tuning");
    return NULL;
  }
  return ch;
}

/* The single ISA variant the JIT emits for a SIMD width: the widest the host
 * has and the width allows. */
static unsigned isa_for_simd(int simd) {
  unsigned host = host_isa_mask();
  int h = host & (1u << CGEN_ISA_AVX512) ? CGEN_ISA_AVX512 : host & (1u << CGEN_ISA_AVX2) ? CGEN_ISA_AVX2 : CGEN_ISA_SCALAR;
  int want = simd <= 0 ? h : simd >= 16 ? CGEN_ISA_AVX512 : simd >= 8 ? CGEN_ISA_AVX2 : CGEN_ISA_SCALAR;
  return 1u << (want < h ? want : h);
}

static int tile_of(const plan_t *p, const plan_region_info *ri, int axis) {
  if (axis < 0) return 0;
  for (int i = 0; i < p->ntile; i++)
    if (!strcmp(p->tile_axes[i], ri->axes[axis].name)) return (int)p->tile[i];
  return 0;
}

static bool bound_block(const plan_t *p, const plan_region_info *ri, int axis) {
  if (axis < 0) return false;
  char nm[PLAN_NAME_MAX];
  snprintf(nm, sizeof nm, "%.50s.o", ri->axes[axis].name);
  for (int i = 0; i < p->nbind; i++)
    if (plan_target_is_block(p->bind[i].target) && (!strcmp(p->bind[i].axis, nm) || !strcmp(p->bind[i].axis, ri->axes[axis].name)))
      return true;
  return false;
}

static int order_pos(const plan_t *p, const char *base, const char *suffix) {
  char nm[PLAN_NAME_MAX];
  snprintf(nm, sizeof nm, "%.50s%s", base, suffix);
  for (int i = 0; i < p->nreorder; i++)
    if (!strcmp(p->reorder[i], nm)) return i;
  return -1;
}

/* Fill t from the region's plan (kind: 'g' GEMM, 'c' conv with the plan's
 * roles swapped when swap, 'a' attention; bm/bn for attention).  Returns the
 * choice, or NULL for the built-in tuning. */
static hp_plan_choice *plan_tuning(const rc_ctx *c, int r, char kind, bool swap, cgen_tuning *t, int *bm, int *bn,
                                   plan_use *u) {
  cgen_tuning_default(t);
  u->ch = NULL;
  u->desc[0] = 0;
  hp_plan_choice *ch = choice_of(c, r);
  const rg_info *info = c->f->part->regions[c->f->kernels[r].region].info;
  plan_gemm_view gv;
  if (!ch || !info || plan_region_gemm_view(&info->plan_info, &gv, NULL)) {
    if (c->host_only) t->isa_mask = host_isa_mask();
    return NULL;
  }
  const plan_t *p = &ch->plan;
  const plan_region_info *ri = &info->plan_info;
  int m_ax = swap ? gv.n : gv.m, n_ax = swap ? gv.m : gv.n;
  int tm = tile_of(p, ri, m_ax), tn = tile_of(p, ri, n_ax), tk = tile_of(p, ri, gv.k);
  bool full = p->ntile == 3 && tm > 0 && tn > 0 && tk > 0;
  if (kind == 'a') {
    *bm = tm > 0 ? (tm > 1024 ? 1024 : tm) : 0;
    *bn = tn > 0 ? (tn > 1024 ? 1024 : tn) : 0;
    note_add(ch, "attention: warp tile and head-dimension tile not used (rows per micro-tile follow the registers)");
  } else if (swap) {
    /* the search space sizes BM/BN for a GEMM's rows/columns; read across
     * (pixels as columns) they would shrink the B panel: keep the template's */
    t->kc = tk;
    note_add(ch, "conv with the pixels as the plan's M: tile M/N and warp tile not used (the template's)");
  } else {
    t->mc = tm, t->nc = tn, t->kc = tk;
    if (full && p->warp_m > 0 && p->warp_n > 0) t->mr = p->warp_m, t->nr = p->warp_n;
    else note_add(ch, "not a [M, N, K] tile: the template's micro-tile");
  }
  t->simd = p->vec_width >= 16 ? 16 : p->vec_width >= 8 ? 8 : p->vec_width > 0 ? 1 : 0;
  if (p->vec_width > 0 && p->vec_width < 8) note_add(ch, "vector width below 8: scalar code (no SSE variant)");
  t->prefetch = 4 * p->stages;
  t->par_m = bound_block(p, ri, m_ax);
  t->par_n = bound_block(p, ri, n_ax);
  int cores = c->f->part->formed ? c->f->part->formed->machine.sm_count : 2;
  t->threads = t->par_m || t->par_n ? (cores < 1 ? 1 : cores > 64 ? 64 : cores) : 1;
  if (!t->par_m && !t->par_n) note_add(ch, "M.o and N.o not bound: one task over M x N");
  if (kind != 'a' && p->nreorder) {
    int pm = order_pos(p, ri->axes[gv.m >= 0 ? gv.m : 0].name, ".i.o");
    int pn = gv.n >= 0 ? order_pos(p, ri->axes[gv.n].name, ".i.o") : -1;
    t->order = pm >= 0 && pn >= 0 && pn < pm ? 1 : 0;
  }
  if (c->host_only) t->isa_mask = isa_for_simd(t->simd);
  if (p->nunroll || p->nsplits) note_add(ch, "unroll and further splits are not used on the CPU");
  if (p->ncache == 0 && kind != 'a') note_add(ch, "no cache_read: the template packs A and B anyway");
  u->ch = ch;
  if (kind == 'a')
    snprintf(u->desc, sizeof u->desc, "bm %d bn %d simd %d threads %d", *bm, *bn, t->simd, t->threads);
  else
    snprintf(u->desc, sizeof u->desc, "mr %d nr %d mc %d nc %d kc %d simd %d prefetch %d threads %d%s%s order %d",
             t->mr, t->nr, t->mc, t->nc, t->kc, t->simd, t->prefetch, t->threads, t->par_m ? " par_m" : "",
             t->par_n ? " par_n" : "", t->order);
  return ch;
}

/* After the generator ran: say in the C what the kernel follows. */
static void plan_comment(hp_str *out, const plan_use *u, bool refused, const hp_error *why) {
  if (!u->ch) return;
  char *one = hp_plan_oneline(&u->ch->plan);
  if (refused) {
    char msg[200];
    snprintf(msg, sizeof msg, "the template refused the plan (%.150s): built-in tuning", why->msg);
    note_add(u->ch, msg);
    u->ch->applied = false;
    u->ch->fallback = true;
    hp_str_printf(out, "/* plan: %s\n   NOT applied: %s */\n", one ? one : "?", msg);
  } else {
    u->ch->applied = true;
    hp_str_printf(out, "/* plan: %s\n   -> %s */\n", one ? one : "?", u->desc);
  }
  free(one);
}

/* ---- epilogues -------------------------------------------------------------- */
typedef struct epi_map {
  int n;
  cgen_epi epi[CGEN_MAX_EPI];
  int slot[CGEN_MAX_EPI]; /* tensor of each step, -1 if none */
  int64_t off[CGEN_MAX_EPI];
  const rg_operand *x[CGEN_MAX_EPI]; /* the tensor added (bias or residual, classified by the caller) */
} epi_map;

/* The region's epilogue as template steps; additions of a tensor are left
 * as CGEN_EPI_RESIDUAL with x[] set, for the caller to place. */
static bool map_epilogue(const rc_ctx *c, const fn_kernel *K, const rg_info *info, epi_map *em) {
  const tiny_graph *g = c->g;
  memset(em, 0, sizeof *em);
  for (int i = 0; i < info->nepi; i++) {
    const rg_epi *ep = &info->epi[i];
    const tiny_node *n = &g->nodes[ep->node];
    if (em->n >= CGEN_MAX_EPI) return false;
    cgen_epi *out = &em->epi[em->n];
    em->slot[em->n] = -1;
    bool last = i == info->nepi - 1;
    /* steps that the following ones continue (silu / gelu spelled out) */
    if (ep->role == PLAN_EPI_SILU || ep->role == PLAN_EPI_GELU) {
      int j = i;
      while (j + 1 < info->nepi && info->epi[j + 1].role == ep->role) j++;
      out->kind = ep->role == PLAN_EPI_SILU ? CGEN_EPI_SILU : CGEN_EPI_GELU;
      em->n++;
      i = j;
      continue;
    }
    switch (n->op) {
    case TINY_RELU: out->kind = CGEN_EPI_RELU; break;
    case TINY_GELU: out->kind = CGEN_EPI_GELU; break;
    case TINY_CAST: {
      if (last) continue; /* the store converts to C's dtype */
      tiny_dtype from = g->nodes[n->src[0].node].dtype, to = n->a.cast.to;
      if (to == TINY_FP32 && (from == TINY_FP16 || from == TINY_BF16 || from == TINY_FP32)) continue; /* exact */
      if (from != TINY_FP32 || (to != TINY_FP16 && to != TINY_BF16)) return false;
      out->kind = CGEN_EPI_ROUND; /* a rounding in the middle of the chain */
      out->dtype = to;
      break;
    }
    case TINY_ADD:
    case TINY_MUL: {
      if (ep->nextra != 1 || !ep->extra[0].affine) return false;
      if (ep->extra[0].cast >= 0) { /* only the exact widening of a half operand */
        const tiny_node *cv = &g->nodes[ep->extra[0].cast];
        if (cv->op != TINY_CAST || cv->a.cast.to != TINY_FP32) return false;
      }
      const rg_operand *x = &ep->extra[0];
      const tiny_node *t = &g->nodes[x->node];
      if (t->op == TINY_CONST) {
        if (n->op != TINY_MUL || !tiny_dtype_is_float(t->dtype)) return false;
        out->kind = CGEN_EPI_SCALE;
        out->scale = (float)t->a.cnst.value;
        break;
      }
      if (n->op != TINY_ADD) return false;
      int s = slot_of(K, c->f, x->node);
      if (s < 0) return false;
      tiny_dtype dt = c->f->buffers[c->f->buffer_of[x->node]].dtype;
      if (dt != TINY_FP32 && dt != TINY_FP16 && dt != TINY_BF16) return false;
      out->kind = CGEN_EPI_RESIDUAL;
      out->dtype = dt;
      em->slot[em->n] = s;
      em->off[em->n] = x->offset;
      em->x[em->n] = x;
      break;
    }
    default: return false;
    }
    em->n++;
  }
  return true;
}

/* Place a tensor-adding step from its strides over the final (folded)
 * dimensions: a contiguous vector along M or N is a bias, else a residual. */
static void place_addend(cgen_epi *ep, int64_t sm, int64_t sn, int64_t sb0, int64_t sb1) {
  if (sb0 == 0 && sb1 == 0 && sn == 0 && sm == 1) ep->kind = CGEN_EPI_BIAS_M;
  else if (sb0 == 0 && sb1 == 0 && sm == 0 && sn == 1) ep->kind = CGEN_EPI_BIAS_N;
  else ep->s_b0 = sb0, ep->s_b1 = sb1, ep->s_m = sm, ep->s_n = sn;
}

static void ep_array(hp_str *o, const epi_map *em) {
  hp_str_puts(o, "  const void *ep[] = {");
  for (int i = 0; i < em->n; i++) {
    if (em->slot[i] < 0) hp_str_puts(o, "NULL, ");
    else hp_str_printf(o, "(const void *)((const char *)bufs[%d] + %" PRId64 " * %d), ", em->slot[i], em->off[i],
                       tiny_dtype_size(em->epi[i].dtype));
  }
  hp_str_puts(o, "NULL};\n");
}

/* ---- GEMM ---------------------------------------------------------------------- */
/* A GEMM dimension: its size and strides in A, B and C (0: not indexed). */
#define NT (3 + CGEN_MAX_EPI) /* A, B, C and the epilogue tensors */
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

/* The copy into the scratch `ap` (nested loops, the destination's innermost
 * dimension innermost), in the tensor's storage type. */
static void emit_repack(hp_str *o, const opnd *A0, const int64_t *vsize, const int64_t *src_stride, int n) {
  const char *t = A0->dtype == TINY_FP32 ? "float" : "uint16_t";
  int64_t total = 1;
  for (int i = 0; i < n; i++) total *= vsize[i];
  hp_str_printf(o, "  %s *ap = aligned_alloc(64, %" PRId64 "UL);\n  if (!ap) return 2;\n", t,
                (total * tiny_dtype_size(A0->dtype) + 63) / 64 * 64);
  hp_str_printf(o, "  { const %s *src = (const %s *)bufs[%d] + %" PRId64 ";\n    long at = 0;\n", t, t, A0->slot,
                A0->offset);
  for (int i = 0; i < n; i++)
    hp_str_printf(o, "    %*sfor (long i%d = 0; i%d < %" PRId64 "L; i%d++)\n", 2 * i, "", i, i, vsize[i], i);
  hp_str_printf(o, "    %*sap[at++] = src[", 2 * n, "");
  for (int i = 0; i < n; i++) hp_str_printf(o, "%si%d * %" PRId64 "L", i ? " + " : "", i, src_stride[i]);
  hp_str_puts(o, "];\n  }\n");
}

static hp_status try_gemm(rc_ctx *c, int r, const char *fn, hp_str *out, bool *handled, const char **why) {
  const hp_function *f = c->f;
  const fn_kernel *K = &f->kernels[r];
  const rg_region *R = &f->part->regions[K->region];
  const rg_info *info = R->info;
  const tiny_graph *g = c->g;
  const poly_block_info *b = poly_block(c->pv, info->anchor);
  const poly_contraction *con = b->con;
  const tiny_node *red = &g->nodes[b->node];
  if (!con || con->pattern != POLY_PAT_MATMUL || red->a.reduce.dtype != TINY_FP32 || R->nout != 1)
    DECLINE("not a matmul with an fp32 accumulation and one output");
  int cast = red->src[0].node;
  if (cast != con->mul_node && !lossless_to(g->nodes[con->mul_node].dtype, g->nodes[cast].a.cast.to))
    DECLINE("the products are rounded before they are summed");
  opnd A, B;
  if (!pick_operand(c, K, b, 0, &A) || !pick_operand(c, K, b, 1, &B))
    DECLINE("an operand is not a readable tensor, or is rounded on its way");
  /* each operand as offset + sum stride[v] * v over the block's variables
   * (any single-piece affine access: transposes, splits, broadcasts) */
  bool aff_a = false, aff_b = false;
  hp_error e2 = {0};
  if (poly_access_strides(&e2, c->pv, info->anchor, 0, A.stride, &A.offset, &aff_a) ||
      poly_access_strides(&e2, c->pv, info->anchor, 1, B.stride, &B.offset, &aff_b) || !aff_a || !aff_b)
    DECLINE("an operand is not a strided view of its tensor");
  for (int v = 0; v < b->nvars; v++)
    if (A.stride[v] < 0 || B.stride[v] < 0) DECLINE("an operand walks a dimension backwards");
  int64_t size[POLY_MAX_VARS];
  var_sizes(g, b, size);
  /* C: the region's output, the contraction's shape (a pointwise epilogue) */
  int cnode = R->out_values[0];
  const tiny_node *C = &g->nodes[cnode];
  if (!tiny_shape_equal(&C->shape, &red->shape)) DECLINE("the epilogue changes the shape");
  int cslot = slot_of(K, f, cnode);
  tiny_dtype cdt = f->buffers[f->buffer_of[cnode]].dtype;
  if (cslot < 0 || (cdt != TINY_FP32 && cdt != TINY_FP16 && cdt != TINY_BF16)) DECLINE("the output is not an fp32/fp16/bf16 buffer");
  int64_t cst[TINY_MAX_RANK];
  rowmajor(&C->shape, cst);
  epi_map em;
  if (!map_epilogue(c, K, info, &em)) DECLINE("the epilogue is not a sequence of template steps");
  /* the dimensions by role, folded where contiguous in every tensor; when
   * A's reduced dimensions do not fold (heads merged back: [b][h][s][d] read
   * as [b][s][h*d]), a second try copies A into a dense scratch first */
  opnd A0 = A; /* A as the tensor holds it */
  int nrep = 0, rep_var[POLY_MAX_VARS];
  int64_t rep_size[POLY_MAX_VARS], rep_src[POLY_MAX_VARS];
  dimv dm[POLY_MAX_VARS], dn[POLY_MAX_VARS], dk[POLY_MAX_VARS], db[POLY_MAX_VARS + 4];
  int nm, nn, nk, nb;
  for (int attempt = 0;; attempt++) {
  nm = 0, nn = 0, nk = 0, nb = 0;
  /* (a variable of extent 1 never moves: it has no dimension) */
  for (int i = 0; i < con->nm; i++)
    if (size[con->m[i]] > 1) dm[nm++] = (dimv){size[con->m[i]], {A.stride[con->m[i]], 0, cst[con->m[i]]}};
  for (int i = 0; i < con->nn; i++)
    if (size[con->n[i]] > 1) dn[nn++] = (dimv){size[con->n[i]], {0, B.stride[con->n[i]], cst[con->n[i]]}};
  for (int v = b->nout; v < b->nvars; v++)
    if (size[v] > 1) dk[nk++] = (dimv){size[v], {A.stride[v], B.stride[v], 0}};
  if (nk == 0) dk[nk++] = (dimv){1, {0}};
  for (int i = 0; i < con->nbatch; i++) {
    int v = con->batch[i];
    if (size[v] > 1) db[nb++] = (dimv){size[v], {A.stride[v], B.stride[v], cst[v]}};
  }
  /* the epilogue tensors' strides ride along (they index output variables) */
  dimv *lists[3] = {dm, dn, db};
  int counts[3] = {nm, nn, nb};
  const int *vars[3] = {con->m, con->n, con->batch};
  for (int l = 0; l < 3; l++)
    for (int i = 0, j = 0; i < (l == 0 ? con->nm : l == 1 ? con->nn : con->nbatch); i++) {
      int v = vars[l][i];
      if (size[v] <= 1) continue;
      for (int q = 0; q < em.n; q++) lists[l][j].s[3 + q] = em.x[q] ? em.x[q]->strides[v] : 0;
      j++;
    }
  (void)counts;
  for (int q = 0; q < em.n; q++) /* an addend must not depend on K */
    if (em.x[q])
      for (int v = b->nout; v < b->nvars; v++)
        if (v < em.x[q]->nvars && em.x[q]->strides[v] && size[v] > 1) DECLINE("an epilogue tensor varies along K");
  if (nm == 0) dm[nm++] = (dimv){1, {0}};
  if (nn == 0) dn[nn++] = (dimv){1, {0}};
  nm = fold(dm, nm, 0);
  nn = fold(dn, nn, 1);
  nk = fold(dk, nk, 0);
  if (nk == 1) break;
  if (attempt > 0 || !repack_a(con, b, size, &A, &B, rep_var, rep_size, rep_src, &nrep))
    DECLINE("the reduced variables do not fold into one K");
  }
  for (int i = 0; i < nm - 1; i++) db[nb++] = dm[i]; /* unfolded outer M / N dimensions: batch */
  for (int i = 0; i < nn - 1; i++) db[nb++] = dn[i];
  if (nb > 0) nb = fold(db, nb, 2);
  if (nb > 2) DECLINE("more than two batch dimensions after folding");
  dimv M = dm[nm - 1], N = dn[nn - 1], Kd = dk[0];
  for (int q = 0; q < em.n; q++)
    if (em.x[q])
      place_addend(&em.epi[q], M.s[3 + q], N.s[3 + q], nb > 0 ? db[0].s[3 + q] : 0, nb > 1 ? db[1].s[3 + q] : 0);
  cgen_gemm_spec s;
  cgen_gemm_spec_init(&s, M.size, N.size, Kd.size, TINY_FP32);
  s.a_dtype = A.dtype;
  s.b_dtype = B.dtype;
  s.c_dtype = cdt;
  s.a_sm = M.s[0], s.a_sk = Kd.s[0];
  s.b_sk = Kd.s[1], s.b_sn = N.s[1];
  s.c_sm = M.s[2], s.c_sn = N.s[2];
  for (int i = 0; i < 2; i++) {
    s.batch[i] = i < nb ? db[i].size : 1;
    s.a_sb[i] = i < nb ? db[i].s[0] : 0;
    s.b_sb[i] = i < nb ? db[i].s[1] : 0;
    s.c_sb[i] = i < nb ? db[i].s[2] : 0;
  }
  s.n_epi = em.n;
  memcpy(s.epi, em.epi, sizeof em.epi);
  plan_use pu;
  plan_tuning(c, r, 'g', false, &s.tune, NULL, NULL, &pu);
  char kfn[128];
  snprintf(kfn, sizeof kfn, "%s_gemm", fn);
  hp_error e3 = {0}, pe = {0};
  hp_str body;
  hp_str_init(&body);
  bool refused = pu.ch && cgen_gemm(&pe, &s, kfn, &body) != HP_OK;
  if (refused || !pu.ch) { /* the built-in tuning */
    hp_str_free(&body);
    hp_str_init(&body);
    cgen_tuning_default(&s.tune);
    if (c->host_only) s.tune.isa_mask = host_isa_mask();
    if (cgen_gemm(&e3, &s, kfn, &body) != HP_OK) { /* a shape the template refuses: generic code */
      hp_str_free(&body);
      if (pu.ch) pu.ch->applied = false;
      DECLINE("the template refused the shape");
    }
  }
  plan_comment(out, &pu, refused, &pe);
  hp_str_puts(out, body.buf);
  hp_str_free(&body);
  hp_str_printf(out, "static int %s(hprt_pool *pool, void *const *bufs) {\n", fn);
  ep_array(out, &em);
  if (nrep) {
    emit_repack(out, &A0, rep_size, rep_src, nrep);
    hp_str_printf(out,
                  "  int rc = %s(pool, ap, (const char *)bufs[%d] + %" PRId64 " * %d, bufs[%d], ep) ? 2 : 0;\n"
                  "  free(ap);\n  return rc;\n}\n\n",
                  kfn, B.slot, B.offset, tiny_dtype_size(B.dtype), cslot);
  } else {
    hp_str_printf(out,
                  "  return %s(pool, (const char *)bufs[%d] + %" PRId64 " * %d, (const char *)bufs[%d] + %" PRId64
                  " * %d, bufs[%d], ep) ? 2 : 0;\n}\n\n",
                  kfn, A.slot, A.offset, tiny_dtype_size(A.dtype), B.slot, B.offset, tiny_dtype_size(B.dtype), cslot);
  }
  *handled = true;
  return HP_OK;
}

/* ---- conv ------------------------------------------------------------------------ */
static hp_status try_conv(rc_ctx *c, int r, const char *fn, hp_str *out, bool *handled, const char **why) {
  const hp_function *f = c->f;
  const fn_kernel *K = &f->kernels[r];
  const rg_region *R = &f->part->regions[K->region];
  const rg_info *info = R->info;
  const tiny_graph *g = c->g;
  const poly_block_info *b = poly_block(c->pv, info->anchor);
  const poly_contraction *con = b->con;
  const tiny_node *red = &g->nodes[b->node];
  if (!con || con->pattern != POLY_PAT_CONV || b->nout != 4 || b->nvars != 7 || red->a.reduce.dtype != TINY_FP32 ||
      R->nout != 1 || red->src[0].node != con->mul_node)
    DECLINE("not a 2-D convolution with an fp32 accumulation");
  /* X[n, c, oh*s + kh*d - p, ow*s + kw*d - p] with out vars (n, oc, oh, ow) and reduced (c, kh, kw) */
  bool lhs_is_x = con->lhs_rank == 4 && con->lhs_idx[2].kind == POLY_IDX_WINDOW;
  const poly_idx *xi = lhs_is_x ? con->lhs_idx : con->rhs_idx, *wi = lhs_is_x ? con->rhs_idx : con->lhs_idx;
  int xa = lhs_is_x ? 0 : 1;
  opnd X, W;
  if (!pick_operand(c, K, b, xa, &X) || !pick_operand(c, K, b, 1 - xa, &W)) DECLINE("an operand is not a readable tensor, or is rounded on its way");
  if (X.node != (lhs_is_x ? con->lhs : con->rhs) || W.node != (lhs_is_x ? con->rhs : con->lhs)) DECLINE("an operand is read through a cast");
  if ((lhs_is_x ? con->rhs_rank : con->lhs_rank) != 4 || (lhs_is_x ? con->lhs_rank : con->rhs_rank) != 4) DECLINE("an operand is not 4-D");
  /* a batch of 1 is the constant index 0 (isl fixes a variable of extent 1) */
  bool n_ok = (xi[0].kind == POLY_IDX_VAR && xi[0].var == 0) || (xi[0].kind == POLY_IDX_CONST && xi[0].c == 0);
  if (!n_ok || xi[1].kind != POLY_IDX_VAR || xi[1].var != 4 ||
      xi[2].kind != POLY_IDX_WINDOW || xi[2].out_var != 2 || xi[2].win_var != 5 || xi[3].kind != POLY_IDX_WINDOW ||
      xi[3].out_var != 3 || xi[3].win_var != 6)
    DECLINE("the input is not read as X[n, c, oh*s + kh*d - p, ow*s + kw*d - p]");
  if (wi[0].kind != POLY_IDX_VAR || wi[0].var != 1 || wi[1].kind != POLY_IDX_VAR || wi[1].var != 4 ||
      wi[2].kind != POLY_IDX_VAR || wi[2].var != 5 || wi[3].kind != POLY_IDX_VAR || wi[3].var != 6)
    DECLINE("the weight is not read as W[oc, c, kh, kw]");
  if ((lhs_is_x ? con->lhs_fill : con->rhs_fill) && (lhs_is_x ? con->lhs_fill_value : con->rhs_fill_value) != 0)
    DECLINE("the padding is not zero");
  const tiny_shape *xs = &g->nodes[X.node].shape, *ws = &g->nodes[W.node].shape;
  int64_t size[POLY_MAX_VARS];
  var_sizes(g, b, size);
  int cnode = R->out_values[0];
  const tiny_node *Y = &g->nodes[cnode];
  if (!tiny_shape_equal(&Y->shape, &red->shape)) DECLINE("the epilogue changes the shape");
  int yslot = slot_of(K, f, cnode);
  tiny_dtype ydt = f->buffers[f->buffer_of[cnode]].dtype;
  if (yslot < 0 || (ydt != TINY_FP32 && ydt != TINY_FP16 && ydt != TINY_BF16)) DECLINE("the output is not an fp32/fp16/bf16 buffer");
  cgen_conv_spec s;
  cgen_conv_spec_init(&s, xs->d[0].n, xs->d[1].n, xs->d[2].n, xs->d[3].n, ws->d[0].n, ws->d[2].n, ws->d[3].n, TINY_FP32);
  s.x_dtype = X.dtype;
  s.w_dtype = W.dtype;
  s.y_dtype = ydt;
  s.groups = 1;
  for (int q = 0; q < 2; q++) {
    const poly_idx *w = &xi[2 + q];
    int64_t in = xs->d[2 + q].n, outn = size[2 + q], k = size[5 + q];
    s.stride[q] = w->stride;
    s.dil[q] = w->dilation;
    int64_t lo = -w->offset;
    int64_t hi = (outn - 1) * w->stride + w->dilation * (k - 1) + 1 - in - lo;
    if (lo < 0 || hi < 0) DECLINE("the window reads outside any padding");
    s.pad[q] = lo;     /* top, left */
    s.pad[2 + q] = hi; /* bottom, right */
  }
  int64_t oh, ow;
  if (!cgen_conv_out_hw(&s, &oh, &ow) || oh != size[2] || ow != size[3] || size[0] != xs->d[0].n ||
      size[4] != xs->d[1].n || ws->d[1].n != xs->d[1].n)
    DECLINE("the output size does not match the window");
  epi_map em;
  if (!map_epilogue(c, K, info, &em)) DECLINE("the epilogue is not a sequence of template steps");
  for (int q = 0; q < em.n; q++) { /* conv: a per-channel bias, or a residual laid out like y */
    if (!em.x[q]) continue;
    const int64_t *st = em.x[q]->strides;
    int64_t yst[4];
    rowmajor(&Y->shape, yst);
    bool bias = st[0] == 0 && st[1] == 1 && st[2] == 0 && st[3] == 0;
    bool resid = st[0] == yst[0] && st[1] == yst[1] && st[2] == yst[2] && st[3] == yst[3];
    if (bias) em.epi[q].kind = CGEN_EPI_BIAS_M;
    else if (!resid) DECLINE("an epilogue tensor is neither a per-channel bias nor laid out like the output");
  }
  s.n_epi = em.n;
  memcpy(s.epi, em.epi, sizeof em.epi);
  plan_use pu;
  /* the plan's M is con->m: the pixels when X is the left operand */
  plan_tuning(c, r, 'c', lhs_is_x, &s.tune, NULL, NULL, &pu);
  char kfn[128];
  snprintf(kfn, sizeof kfn, "%s_conv", fn);
  hp_error e2 = {0}, pe = {0};
  hp_str body;
  hp_str_init(&body);
  bool refused = pu.ch && cgen_conv(&pe, &s, kfn, &body) != HP_OK;
  if (refused || !pu.ch) {
    hp_str_free(&body);
    hp_str_init(&body);
    cgen_tuning_default(&s.tune);
    if (c->host_only) s.tune.isa_mask = host_isa_mask();
    if (cgen_conv(&e2, &s, kfn, &body) != HP_OK) {
      hp_str_free(&body);
      if (pu.ch) pu.ch->applied = false;
      DECLINE("the template refused the shape");
    }
  }
  plan_comment(out, &pu, refused, &pe);
  hp_str_puts(out, body.buf);
  hp_str_free(&body);
  hp_str_printf(out, "static int %s(hprt_pool *pool, void *const *bufs) {\n", fn);
  ep_array(out, &em);
  hp_str_printf(out, "  return %s(pool, bufs[%d], bufs[%d], bufs[%d], ep) ? 2 : 0;\n}\n\n", kfn, W.slot, X.slot, yslot);
  *handled = true;
  return HP_OK;
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

static hp_status try_attention(rc_ctx *c, int r, const char *fn, hp_str *out, bool *handled, const char **why) {
  const hp_function *f = c->f;
  const fn_kernel *K = &f->kernels[r];
  const rg_region *R = &f->part->regions[K->region];
  const rg_info *info = R->info;
  const rg_attention *at = &info->att;
  const tiny_graph *g = c->g;
  if (R->nout != 1 || (at->where_mask >= 0 && !at->causal)) DECLINE("several outputs, or a mask other than causal");
  if ((at->has_max_floor || at->has_sum_floor) && !(at->causal && at->causal_offset == 0 && !at->has_mask)) DECLINE("the row max or sum is clamped where rows can be fully masked");
  const poly_block_info *qk = poly_block(c->pv, at->qk), *pv = poly_block(c->pv, at->pv);
  int64_t qs[POLY_MAX_VARS], ps[POLY_MAX_VARS];
  var_sizes(g, qk, qs);
  var_sizes(g, pv, ps);
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
  int64_t B = vb0 >= 0 ? qs[vb0] : 1, H = vb1 >= 0 ? qs[vb1] : 1;
  int64_t M = qs[at->q_var], N = qs[at->k_var], D = qs[at->d_var], DV = ps[at->dv_var];
  if (at->causal && at->causal_offset != 0) DECLINE("a causal mask that is not top-left aligned");
  int pv_key = pv->nout; /* PV's reduced variable: the keys */
  int qv[4] = {vb0, vb1, at->q_var, at->d_var}, kv[4] = {vb0, vb1, at->k_var, at->d_var};
  int vv[4] = {pb0, pb1, pv_key, at->dv_var};
  int64_t q_s[3], k_s[3], v_s[3], o_s[3];
  if (!head_strides(g, &at->q, qv, qs, q_s) || !head_strides(g, &at->k, kv, qs, k_s) ||
      !head_strides(g, &at->v, vv, ps, v_s))
    DECLINE("Q, K or V does not have unit stride along d, or varies with another variable");
  int qslot = slot_of(K, f, at->q.node), kslot = slot_of(K, f, at->k.node), vslot = slot_of(K, f, at->v.node);
  int oslot = slot_of(K, f, R->out_values[0]);
  if (qslot < 0 || kslot < 0 || vslot < 0 || oslot < 0) DECLINE("a tensor is not a buffer of the kernel");
  tiny_dtype qdt = f->buffers[f->buffer_of[at->q.node]].dtype, kdt = f->buffers[f->buffer_of[at->k.node]].dtype;
  tiny_dtype vdt = f->buffers[f->buffer_of[at->v.node]].dtype, odt = f->buffers[f->buffer_of[R->out_values[0]]].dtype;
  if (kdt != vdt) DECLINE("K and V differ in dtype");
  /* the output: P V's output variables are its axes, dv the last (unit stride) */
  const tiny_shape *os = &g->nodes[R->out_values[0]].shape;
  if (os->rank != pv->nout) DECLINE("the output is not laid out by P V's variables");
  int64_t ost[TINY_MAX_RANK];
  rowmajor(os, ost);
  o_s[0] = pb0 >= 0 ? ost[pb0] : 0, o_s[1] = pb1 >= 0 ? ost[pb1] : 0, o_s[2] = ost[pv_q];
  for (int i = 0; i < info->nepi; i++) /* only casts may follow P V */
    if (g->nodes[info->epi[i].node].op != TINY_CAST || i != info->nepi - 1) DECLINE("an op other than a final cast follows P V");
  cgen_attn_spec s;
  cgen_attn_spec_init(&s, B, H, M, N, D, TINY_FP32);
  s.dv = DV;
  s.q_dtype = qdt;
  s.kv_dtype = kdt;
  s.o_dtype = odt;
  s.scale = (float)at->scale;
  s.strided = true;
  memcpy(s.q_s, q_s, sizeof q_s), memcpy(s.k_s, k_s, sizeof k_s);
  memcpy(s.v_s, v_s, sizeof v_s), memcpy(s.o_s, o_s, sizeof o_s);
  s.causal = at->causal;
  int mslot = -1;
  if (at->has_mask) {
    const rg_operand *mk = &at->mask;
    mslot = slot_of(K, f, mk->node);
    if (mslot < 0 || !mk->affine || mk->cast >= 0) DECLINE("the additive mask is not a strided tensor");
    s.has_mask = true;
    s.mask_dtype = f->buffers[f->buffer_of[mk->node]].dtype;
    int mv[4] = {vb0, vb1, at->q_var, at->k_var};
    for (int i = 0; i < 4; i++) s.mask_s[i] = mv[i] >= 0 ? mk->strides[mv[i]] : 0;
    for (int v = 0; v < mk->nvars; v++)
      if (mk->strides[v] && v != vb0 && v != vb1 && v != at->q_var && v != at->k_var) DECLINE("the mask depends on the head dimension");
  }
  plan_use pu;
  plan_tuning(c, r, 'a', false, &s.tune, &s.bm, &s.bn, &pu);
  char kfn[128];
  snprintf(kfn, sizeof kfn, "%s_attn", fn);
  hp_error e2 = {0}, pe = {0};
  hp_str body;
  hp_str_init(&body);
  bool refused = pu.ch && cgen_attn(&pe, &s, kfn, &body) != HP_OK;
  if (refused || !pu.ch) {
    hp_str_free(&body);
    hp_str_init(&body);
    cgen_tuning_default(&s.tune);
    s.bm = s.bn = 0;
    if (c->host_only) s.tune.isa_mask = host_isa_mask();
    if (cgen_attn(&e2, &s, kfn, &body) != HP_OK) {
      hp_str_free(&body);
      if (pu.ch) pu.ch->applied = false;
      DECLINE("the template refused the shape");
    }
  }
  plan_comment(out, &pu, refused, &pe);
  hp_str_puts(out, body.buf);
  hp_str_free(&body);
  hp_str_printf(out, "static int %s(hprt_pool *pool, void *const *bufs) {\n", fn);
  if (mslot >= 0)
    hp_str_printf(out, "  const void *mask = (const char *)bufs[%d] + %" PRId64 " * %d;\n", mslot, at->mask.offset,
                  tiny_dtype_size(s.mask_dtype));
  else
    hp_str_puts(out, "  const void *mask = NULL;\n");
  hp_str_printf(out,
                "  return %s(pool, (const char *)bufs[%d] + %" PRId64 " * %d, (const char *)bufs[%d] + %" PRId64
                " * %d,\n           (const char *)bufs[%d] + %" PRId64 " * %d, mask, bufs[%d]) ? 2 : 0;\n}\n\n",
                kfn, qslot, at->q.offset, tiny_dtype_size(qdt), kslot, at->k.offset, tiny_dtype_size(kdt), vslot,
                at->v.offset, tiny_dtype_size(vdt), oslot);
  *handled = true;
  return HP_OK;
}

static hp_status emit_template(rc_ctx *c, int r, const char *fn, hp_str *out, bool *handled, const char **why) {
  *handled = false;
  *why = NULL;
  const hp_function *f = c->f;
  const rg_region *R = &f->part->regions[f->kernels[r].region];
  const rg_info *info = R->info;
  if (!info || getenv("HARP_NO_TEMPLATES")) return HP_OK;
  if (info->shape == RG_SHAPE_ATTENTION) return try_attention(c, r, fn, out, handled, why);
  if (info->shape != RG_SHAPE_CONTRACTION && !(info->shape == RG_SHAPE_SINGLE && info->anchor >= 0 &&
                                               poly_block(c->pv, info->anchor)->kind == POLY_CONTRACTION))
    return HP_OK;
  const poly_block_info *b = poly_block(c->pv, info->anchor);
  if (!b->con) return HP_OK;
  return b->con->pattern == POLY_PAT_CONV ? try_conv(c, r, fn, out, handled, why) : try_gemm(c, r, fn, out, handled, why);
}

hp_status cc_emit_template(rc_ctx *c, int r, const char *fn, hp_str *out, bool *handled, const char **why) {
  hp_status st = emit_template(c, r, fn, out, handled, why);
  hp_plan_choice *ch = c->plans ? &c->plans[c->f->kernels[r].region] : NULL;
  if (!st && !*handled && ch && ch->has_plan) {
    char msg[200];
    snprintf(msg, sizeof msg, "generic loops (%.150s): the plan is not read", *why ? *why : "no template for this region");
    note_add(ch, msg);
    ch->applied = false;
  }
  return st;
}
