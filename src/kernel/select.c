/* select.c — the kernel each region runs on a target, and why not a
 * template, decided once for every target.
 * Needs: the readers of contract.h, a target's description (kn_target).
 * Gives: kn_select, kn_decline, kn_sel_free, kn_kind_name (kernel.h).
 *
 * The candidates in order: a GATHER region's own kernel; the cell template
 * for a recurrent cell (shape D) where the target has one; for a
 * contraction region (ct_kind) its GEMM, conv or attention template; for
 * any other region the target's row templates, in its order.  Each
 * candidate is read (the target-neutral readers of contract.h), then held
 * to the target's limits; the first that fits is the kernel, unless its
 * printer refuses (kn_decline).  The reasons are the readers' and the
 * limits' own words: they land in comments of the generated code. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harp/region.h"
#include "kernel/kernel.h"

static const char *const kind_names[KN_KIND_COUNT] = {
    [KN_GENERIC] = "generic", [KN_GATHER] = "gather",       [KN_GEMM] = "gemm",       [KN_CONV] = "conv",
    [KN_ATTENTION] = "attention", [KN_CELL] = "cell",       [KN_SOFTMAX] = "softmax", [KN_LAYERNORM] = "layernorm",
    [KN_POOL] = "pool",       [KN_REDUCE] = "reduce",       [KN_CONCAT] = "concat",   [KN_MAP] = "map",
    [KN_EWISE] = "ewise"};

const char *kn_kind_name(kn_kind k) { return k >= 0 && k < KN_KIND_COUNT ? kind_names[k] : "?"; }

bool kn_is_contraction(kn_kind k) { return k == KN_GEMM || k == KN_CONV || k == KN_ATTENTION; }

/* The loop nest, with the reason kind k gave (if any). */
static harp_status generic(kn_sel *s, kn_kind k, const char *why) {
  if (why) s->why = why, s->why_kind = k;
  s->kind = KN_GENERIC;
  s->step = -1;
  return HARP_OK;
}

/* ---- contractions ------------------------------------------------------------- */
/* A conv the target's limits send to the loop nest: why, else NULL. */
static const char *conv_limits(kn_sel *s) {
  const kn_target *t = s->t;
  const ct_conv *cv = &s->u.conv;
  /* one input channel per group: an MMA of K = kh*kw wastes the tensor cores */
  if (!t->conv_depthwise && cv->groups > 1 && cv->groups == cv->c) {
    snprintf(s->buf, sizeof s->buf, "depthwise convolution: no %s template (the generic kernel)", t->name);
    return s->buf;
  }
  /* a few output tiles over a long reduction leave most SMs idle (no split-K
   * for convolutions): the generic kernel, a thread per output, is faster */
  if (t->conv_few_tiles > 0 && t->conv_tiles) {
    int64_t tiles = t->conv_tiles(cv), G = cv->groups > 0 ? cv->groups : 1, kk = cv->c / G * cv->kh * cv->kw;
    if (tiles >= 0 && tiles < t->conv_few_tiles && kk >= t->conv_long_k)
      return "few output tiles over a long reduction (no split-K for convolutions): the generic kernel";
  }
  return NULL;
}

/* Contraction template k for the region: read, then held to the limits. */
static harp_status contraction(kn_sel *s, kn_kind k) {
  const char *why = NULL;
  bool ok = false;
  s->first = k;
  switch (k) {
  case KN_GEMM:
    ok = ct_read_gemm(&s->src, s->kernel, &s->u.gemm, &why);
    if (ok && s->t->gemm_max_repack > 0 && s->u.gemm.nrep > s->t->gemm_max_repack)
      ok = false, why = "A needs a repack of more dimensions than the copy kernel takes";
    break;
  case KN_CONV:
    if ((ok = ct_read_conv(&s->src, s->kernel, &s->u.conv, &why)) && (why = conv_limits(s))) ok = false;
    break;
  default:
    ok = ct_read_attn(&s->src, s->kernel, &s->u.attn, &why);
    if (ok && s->t->attn_same_kv_dtype && s->u.attn.v.dtype != s->u.attn.k.dtype) ok = false, why = "K and V differ in dtype";
    break;
  }
  if (!ok) return generic(s, k, why);
  s->kind = k;
  return HARP_OK;
}

/* ---- row templates -------------------------------------------------------------- */
/* A pool the target's limits send to the loop nest: why, else NULL. */
static const char *pool_limits(kn_sel *s) {
  const kn_target *t = s->t;
  const ct_pool *pl = &s->u.pool;
  /* past stride 2 the CPU's plane splits into a phase row per column: the
   * loop nest's gathers are faster there */
  if (t->pool_max_stride > 0 && pl->stride[1] > t->pool_max_stride) {
    snprintf(s->buf, sizeof s->buf, "pool: stride beyond %d columns", t->pool_max_stride);
    return s->buf;
  }
  /* a window or three per plane (a global pool): the copy is all the work;
   * in a ShapeSet object, the printer's call (ct_pool.small_why) */
  if (pl->oh * pl->ow < t->pool_min_windows) {
    snprintf(s->buf, sizeof s->buf, "pool: under %d windows a plane", t->pool_min_windows);
    if (!s->src.sizes_vary) return s->buf;
    s->u.pool.small_why = s->buf;
  }
  /* windows that neither overlap nor touch padding reuse nothing of the
   * plane: a sum reads faster strided (a max keeps the kernel) */
  bool unpadded = !pl->pad[0] && !pl->pad[1] && !pl->pad[2] && !pl->pad[3];
  if (!t->pool_sum_disjoint && pl->sum && unpadded && pl->kh == pl->stride[0] && pl->kw == pl->stride[1] &&
      pl->dil[0] == 1 && pl->dil[1] == 1)
    return "pool: a sum over disjoint unpadded windows";
  return NULL;
}

/* Read row template k: *ok when the region is one it takes, else *why
 * NULL (not that computation) or why it does not take it.  The cell and
 * concatenation templates read the region themselves (their printers). */
static harp_status read_row(kn_sel *s, kn_kind k, bool *ok, const char **why) {
  switch (k) {
  case KN_SOFTMAX: *ok = ct_read_softmax(&s->row, &s->u.softmax, why); return HARP_OK;
  case KN_LAYERNORM: *ok = ct_read_layernorm(&s->row, &s->u.layernorm, why); return HARP_OK;
  case KN_REDUCE: *ok = ct_read_reduce(&s->row, s->t->reduce_epilogue, &s->u.reduce, why); return HARP_OK;
  case KN_EWISE: return ct_read_ewise(&s->row, &s->t->ewise, s->e, &s->u.ewise, ok, why);
  case KN_POOL:
    if ((*ok = ct_read_pool(&s->src, s->kernel, &s->u.pool, why)) && (*why = pool_limits(s))) *ok = false;
    return HARP_OK;
  case KN_MAP:
    if (!s->map && !(s->map = malloc(sizeof *s->map))) return ut_fail(s->e, HARP_E_NO_MEMORY, NULL, "out of memory");
    *ok = ct_read_map(&s->src, s->kernel, s->t->map_op, s->map, why);
    return HARP_OK;
  default: *ok = true; return HARP_OK;
  }
}

/* Row step i declined, saying why (NULL: it does not apply): true when the
 * search ends there. */
static bool row_declined(kn_sel *s, int i, const char *why) {
  const kn_step *st = &s->t->rows[i];
  if (!why || st->on_decline == KN_DECLINE_QUIET) return false;
  s->why = why, s->why_kind = st->kind;
  return st->on_decline == KN_DECLINE_STOP;
}

/* The first row template from step `from` on that takes the region. */
static harp_status next_row(kn_sel *s, int from) {
  for (int i = from; i < s->t->nrows; i++) {
    const char *why = NULL;
    bool ok = false;
    harp_status st = read_row(s, s->t->rows[i].kind, &ok, &why);
    if (st) return st;
    if (ok) {
      s->kind = s->t->rows[i].kind;
      s->step = i;
      if (s->first == KN_GENERIC) s->first = s->kind;
      return HARP_OK;
    }
    if (row_declined(s, i, why)) break;
  }
  return generic(s, KN_GENERIC, NULL);
}

/* ---- the choice ------------------------------------------------------------------ */
harp_status kn_select(kn_sel *s, const kn_target *t, const ct_src *src, int r, unsigned flags, harp_error *e) {
  memset(s, 0, sizeof *s);
  s->t = t;
  s->src = *src;
  s->src.att_cast_operands = t->att_cast_operands;
  s->src.round_operands = t->round_operands;
  s->kernel = r;
  s->flags = flags;
  s->e = e;
  s->kind = s->first = s->why_kind = KN_GENERIC;
  s->step = -1;
  const rg_region *R = &src->f->part->regions[src->f->kernels[r].region];
  if (R->nblocks == 0) {
    s->kind = s->first = KN_GATHER;
    return HARP_OK;
  }
  if (t->cell && R->info && R->info->shape == RG_SHAPE_CELL) {
    s->kind = s->first = KN_CELL;
    return HARP_OK;
  }
  switch (flags & KN_NO_CONTRACTION_TEMPLATES ? 0 : ct_kind(&s->src, r)) {
  case 'g': return contraction(s, KN_GEMM);
  case 'c': return contraction(s, KN_CONV);
  case 'a': return contraction(s, KN_ATTENTION);
  default: break;
  }
  if (flags & KN_NO_ROW_TEMPLATES) return HARP_OK;
  ct_row_init(&s->row, &s->src, r);
  return next_row(s, 0);
}

harp_status kn_decline(kn_sel *s, const char *why) {
  if (s->step >= 0) {
    int i = s->step;
    if (row_declined(s, i, why)) return generic(s, s->kind, NULL);
    return next_row(s, i + 1);
  }
  return generic(s, s->kind, why);
}

void kn_sel_free(kn_sel *s) {
  free(s->map);
  s->map = NULL;
}
