/* validate.c — check a plan against the region it schedules and the machine
 * it runs on.
 * Needs: plan_core.c (plan_check), resource.c.  Gives: plan_validate,
 * plan_fill_from_region, plan_region_gemm_view, plan_axis_extent,
 * plan_axis_bound_block.
 *
 * Order of the checks (the first failure is reported): the plan's own
 * consistency, arch, axes, the roles of the tiled axes, tails, vector
 * widths, algo_choice, binds, epilogue, cached tensors, the SM80 / SM90
 * instruction shapes, then resources — SmemOverflow and RegOverflow come from
 * the resource model here, before any code exists. */
#include <stdio.h>
#include <string.h>

#include "plan_int.h"
#include "util/util.h"

int plan_region_axis(const plan_region_info *r, const char *name) {
  for (int i = 0; i < r->naxes; i++)
    if (r->axes[i].name && strcmp(r->axes[i].name, name) == 0) return i;
  return -1;
}

harp_status plan_region_gemm_view(const plan_region_info *r, plan_gemm_view *g, harp_error *e) {
  memset(g, 0, sizeof *g);
  g->m = g->n = g->k = -1;
  if (r->naxes < 0 || r->naxes > PLAN_MAX_REGION_AXES)
    return ut_fail(e, HARP_E_INVALID_ARG, r->name, "region has %d axes (at most %d)", r->naxes, PLAN_MAX_REGION_AXES);
  int par[PLAN_MAX_REGION_AXES], npar = 0, red = -1;
  for (int i = 0; i < r->naxes; i++) {
    const plan_axis_info *a = &r->axes[i];
    if (!a->name || !plan_axis_name_ok(a->name) || strchr(a->name, '.') || a->size < 1)
      return ut_fail(e, HARP_E_INVALID_ARG, r->name, "region axis %d: a base name and a positive size are needed", i);
    if (plan_region_axis(r, a->name) != i)
      return ut_fail(e, HARP_E_INVALID_ARG, r->name, "region axis '%s' appears twice", a->name);
    int *slot = a->role == PLAN_ROLE_M ? &g->m : a->role == PLAN_ROLE_N ? &g->n : a->role == PLAN_ROLE_K ? &g->k : NULL;
    if (slot) {
      if (*slot >= 0) return ut_fail(e, HARP_E_INVALID_ARG, r->name, "two region axes have the same role");
      *slot = i;
    } else if (a->role == PLAN_ROLE_AUTO) {
      if (a->reduce && red < 0) red = i;
      if (!a->reduce) par[npar++] = i;
    }
  }
  /* AUTO roles: the innermost parallel axes are N then M, the first reduce axis K. */
  if (r->pattern == PLAN_PAT_REDUCE) {
    if (g->m < 0 && npar > 0) g->m = par[--npar];
  } else {
    if (g->n < 0 && npar > 0) g->n = par[--npar];
    if (g->m < 0 && npar > 0) g->m = par[--npar];
  }
  if (g->k < 0 && r->pattern != PLAN_PAT_EWISE) g->k = red;
  g->M = g->m >= 0 ? r->axes[g->m].size : 1;
  g->N = g->n >= 0 ? r->axes[g->n].size : 1;
  g->K = g->k >= 0 ? r->axes[g->k].size : 1;
  g->batch = 1;
  for (int i = 0; i < r->naxes; i++)
    if (i != g->m && i != g->n && i != g->k && !r->axes[i].reduce) {
      if (!ut_mul_ok(g->batch, r->axes[i].size, &g->batch))
        return ut_fail(e, HARP_E_LIMIT, r->name, "region too large");
    }
  return HARP_OK;
}

/* ---- axis extents ------------------------------------------------------------------- */
static const plan_fuse *fuse_of(const plan_t *p, const char *axis) {
  for (int i = 0; i < p->nfuse; i++)
    if (strcmp(p->fuse[i].to, axis) == 0) return &p->fuse[i];
  return NULL;
}

/* The factor `parent` is split by, or 0 if it is not split. */
static int64_t split_factor(const plan_t *p, const plan_region_info *r, const char *parent) {
  for (int i = 0; i < p->nsplits; i++)
    if (strcmp(p->splits[i].axis, parent) == 0) return p->splits[i].factor;
  for (int t = 0; t < p->ntile; t++) {
    if (strcmp(p->tile_axes[t], parent) == 0) return p->tile[t];
    char wi[PLAN_NAME_MAX + 4];
    snprintf(wi, sizeof wi, "%s.i", p->tile_axes[t]);
    if (strcmp(wi, parent) == 0) {
      if (t == 0) return p->warp_m;
      if (t == 1) return p->warp_n;
      /* k.i -> k.i.o, k.i.i by one MMA k-step unless split explicitly */
      int64_t kk = plan_mma_k(r ? r->in_dtype : TINY_FP16);
      return UT_MIN(kk, p->tile[t]);
    }
  }
  return 0;
}

static int64_t extent_rec(const plan_t *p, const plan_region_info *r, const char *axis, int depth) {
  if (depth > 32) return -1;
  const plan_fuse *f = fuse_of(p, axis);
  if (f) {
    int64_t a = extent_rec(p, r, f->a, depth + 1), b = extent_rec(p, r, f->b, depth + 1), x;
    return a > 0 && b > 0 && ut_mul_ok(a, b, &x) ? x : -1;
  }
  const char *dot = strrchr(axis, '.');
  if (!dot) {
    int i = r ? plan_region_axis(r, axis) : -1;
    return i >= 0 ? r->axes[i].size : -1;
  }
  char parent[PLAN_NAME_MAX];
  snprintf(parent, sizeof parent, "%.*s", (int)(dot - axis), axis);
  int64_t fct = split_factor(p, r, parent);
  if (fct <= 0) return -1;
  if (strcmp(dot, ".i") == 0) return fct;
  if (strcmp(dot, ".o") != 0) return -1;
  int64_t pe = extent_rec(p, r, parent, depth + 1);
  return pe > 0 ? (pe + fct - 1) / fct : -1;
}

int64_t plan_axis_extent(const plan_t *p, const plan_region_info *r, const char *axis) {
  return extent_rec(p, r, axis, 0);
}

bool plan_axis_bound_block(const plan_t *p, const plan_region_info *r, int axis) {
  if (axis < 0) return false;
  char nm[PLAN_NAME_MAX];
  snprintf(nm, sizeof nm, "%.50s.o", r->axes[axis].name);
  for (int i = 0; i < p->nbind; i++)
    if (plan_target_is_block(p->bind[i].target) && (!strcmp(p->bind[i].axis, nm) || !strcmp(p->bind[i].axis, r->axes[axis].name)))
      return true;
  return false;
}

/* ---- validation --------------------------------------------------------------------- */
typedef struct vctx {
  const plan_t *p;
  const plan_region_info *r;
  const plan_machine *m;
  const plan_src *src;
  harp_error *e;
  plan_gemm_view g;
} vctx;

static bool base_is_reduce(const vctx *v, const char *axis) {
  char b[PLAN_NAME_MAX];
  int i = plan_region_axis(v->r, plan_axis_base(axis, b));
  return i >= 0 && v->r->axes[i].reduce;
}

static bool has_pred_on(const plan_t *p, const char *base) {
  char b[PLAN_NAME_MAX];
  for (int i = 0; i < p->npred; i++)
    if (strcmp(plan_axis_base(p->pred[i], b), base) == 0) return true;
  return false;
}

static harp_status v_axis(vctx *v, const char *axis, plan_pos pos, const char *what) {
  if (fuse_of(v->p, axis)) return HARP_OK;
  char b[PLAN_NAME_MAX];
  plan_axis_base(axis, b);
  if (plan_region_axis(v->r, b) >= 0) return HARP_OK;
  /* a base name may be a fuse output too ("bh.o" after "fuse b h -> bh") */
  if (fuse_of(v->p, b)) return HARP_OK;
  return plan_fail(v->e, HARP_E_INVALID_ARG, v->src, pos, axis, "%s: region '%s' has no axis '%s'", what,
                   v->r->name ? v->r->name : "?", b);
}

static harp_status v_axes(vctx *v) {
  const plan_t *p = v->p;
  harp_status st;
  for (int i = 0; i < p->ntile; i++) {
    int a = plan_region_axis(v->r, p->tile_axes[i]);
    if (a < 0) return v_axis(v, p->tile_axes[i], p->pos.tile[i], "tile");
  }
  if ((st = v_axis(v, p->pipeline_axis, p->pos.pipeline, "pipeline"))) return st;
  for (int i = 0; i < p->nbind; i++)
    if ((st = v_axis(v, p->bind[i].axis, p->pos.bind[i], "bind"))) return st;
  for (int i = 0; i < p->ncache; i++)
    if ((st = v_axis(v, p->cache[i].at, p->pos.cache[i], "cache_read"))) return st;
  if (p->vec_width && (st = v_axis(v, p->vec_axis, p->pos.vec, "vectorize"))) return st;
  for (int i = 0; i < p->npred; i++)
    if ((st = v_axis(v, p->pred[i], p->pos.pred[i], "predicate_tail"))) return st;
  for (int i = 0; i < p->nreorder; i++)
    if ((st = v_axis(v, p->reorder[i], p->pos.reorder[i], "reorder"))) return st;
  for (int i = 0; i < p->nunroll; i++)
    if ((st = v_axis(v, p->unroll[i].axis, p->pos.unroll[i], "unroll"))) return st;
  for (int i = 0; i < p->nsplits; i++)
    if ((st = v_axis(v, p->splits[i].axis, p->pos.splits[i], "split"))) return st;
  for (int i = 0; i < p->nfuse; i++)
    if ((st = v_axis(v, p->fuse[i].a, p->pos.fuse[i], "fuse")) || (st = v_axis(v, p->fuse[i].b, p->pos.fuse[i], "fuse")))
      return st;
  return HARP_OK;
}

/* matmul / conv: tile = [M, N, K] with K a reduction and M, N parallel; a
 * contraction with one parallel axis (matrix-vector) tiles [M, K]. */
static harp_status v_roles(vctx *v) {
  const plan_t *p = v->p;
  const plan_region_info *r = v->r;
  if (r->pattern != PLAN_PAT_MATMUL && r->pattern != PLAN_PAT_CONV) return HARP_OK;
  int npar = 0, nred = 0;
  for (int i = 0; i < r->naxes; i++) r->axes[i].reduce ? nred++ : npar++;
  int want = nred ? (npar >= 2 ? 3 : 2) : UT_MIN(npar, 2);
  const char *shape = want == 3 ? "[M, N, K]" : want == 2 && nred ? "[M, K]" : "[M, N]";
  if (p->ntile != want)
    return plan_fail(v->e, HARP_E_INVALID_ARG, v->src, p->pos.tile[0], "tile", "a %s plan for region '%s' tiles %s; this one tiles %d axes",
                     plan_pattern_name(r->pattern), r->name ? r->name : "?", shape, p->ntile);
  for (int i = 0; i < p->ntile; i++) {
    bool red = base_is_reduce(v, p->tile_axes[i]), last = i == p->ntile - 1;
    if (red != (last && nred > 0))
      return plan_fail(v->e, HARP_E_INVALID_ARG, v->src, p->pos.tile[i], p->tile_axes[i],
                       red ? "tile[%d] ('%s') is a reduction axis; a %s plan tiles %s with K last"
                           : "tile[%d] ('%s') must be the reduction axis of the %s plan %s",
                       i, p->tile_axes[i], plan_pattern_name(r->pattern), shape);
  }
  return HARP_OK;
}

static harp_status v_tails(vctx *v) {
  const plan_t *p = v->p;
  for (int i = 0; i < p->ntile; i++) {
    int a = plan_region_axis(v->r, p->tile_axes[i]);
    if (a < 0) continue;
    int64_t size = v->r->axes[a].size;
    if (size % p->tile[i] && !has_pred_on(p, p->tile_axes[i]))
      return plan_fail(v->e, HARP_E_INVALID_ARG, v->src, p->pos.tile[i], p->tile_axes[i],
                       "tile %lld does not divide %s = %lld; add %s.i.i to predicate_tail", (long long)p->tile[i],
                       p->tile_axes[i], (long long)size, p->tile_axes[i]);
  }
  return HARP_OK;
}

static harp_status v_vector(vctx *v) {
  const plan_t *p = v->p;
  const plan_machine *m = v->m;
  if (!p->vec_width) return HARP_OK;
  int w = p->vec_width;
  int64_t ext = plan_axis_extent(p, v->r, p->vec_axis);
  if (ext > 0 && ext % w)
    return plan_fail(v->e, HARP_E_INVALID_ARG, v->src, p->pos.vec_width, p->vec_axis,
                     "vector width %d does not divide the extent %lld of %s", w, (long long)ext, p->vec_axis);
  int tin = tiny_dtype_size(v->r->in_dtype), tout = tiny_dtype_size(v->r->out_dtype);
  int elem = plan_arch_is_gpu(m->arch) ? UT_MAX(tin, tout) : 4;
  if (elem > 0 && w * elem > m->simd_bytes)
    return plan_fail(v->e, HARP_E_INVALID_ARG, v->src, p->pos.vec_width, p->vec_axis,
                     "vector width %d x %d bytes exceeds the %d-byte vector access of %s", w, elem, m->simd_bytes,
                     plan_arch_name(m->arch));
  char b[PLAN_NAME_MAX];
  plan_axis_base(p->vec_axis, b);
  int a = plan_region_axis(v->r, b);
  if (a >= 0 && v->r->axes[a].size % w && !has_pred_on(p, b))
    return plan_fail(v->e, HARP_E_MISALIGNED, v->src, p->pos.vec_width, p->vec_axis,
                     "%s = %lld is not a multiple of the vector width %d; add %s.i.i to predicate_tail", b,
                     (long long)v->r->axes[a].size, w, b);
  return HARP_OK;
}

static harp_status v_algo(vctx *v) {
  const plan_t *p = v->p;
  const plan_region_info *r = v->r;
  for (int k = 0; k < PLAN_KEY_COUNT; k++) {
    if (p->algo[k] == PLAN_ALGO_NONE) continue;
    /* a conv as implicit GEMM splits its K like a matmul (algo_choice matmul splitk_*) */
    bool conv_splitk = r->pattern == PLAN_PAT_CONV && plan_algo_is_splitk(p->algo[k]) &&
                       (p->algo[PLAN_KEY_CONV] == PLAN_ALGO_NONE || p->algo[PLAN_KEY_CONV] == PLAN_ALGO_IMPLICIT_GEMM);
    bool fits = (k == PLAN_KEY_MATMUL && (r->pattern == PLAN_PAT_MATMUL || conv_splitk)) ||
                (k == PLAN_KEY_CONV && r->pattern == PLAN_PAT_CONV) ||
                (k == PLAN_KEY_ATTENTION && r->pattern == PLAN_PAT_ATTENTION);
    if (!fits)
      return plan_fail(v->e, HARP_E_INVALID_ARG, v->src, p->pos.algo[k], "algo_choice",
                       "algo_choice %s does not fit region '%s', whose Poly-View pattern is %s",
                       plan_algo_key_name((plan_algo_key)k), r->name ? r->name : "?", plan_pattern_name(r->pattern));
    if (plan_algo_is_winograd(p->algo[k]) && r->conv_kh && r->conv_kw && (r->conv_kh != 3 || r->conv_kw != 3))
      return plan_fail(v->e, HARP_E_INVALID_ARG, v->src, p->pos.algo[k], "algo_choice",
                       "winograd_3x3 needs a 3x3 window; region '%s' has %dx%d", r->name ? r->name : "?", r->conv_kh,
                       r->conv_kw);
    if (plan_algo_is_winograd(p->algo[k]) && !plan_conv_unit_stride(r))
      return plan_fail(v->e, HARP_E_INVALID_ARG, v->src, p->pos.algo[k], "algo_choice",
                       "winograd_3x3 needs stride 1 and dilation 1; region '%s' has stride %dx%d, dilation %dx%d",
                       r->name ? r->name : "?", r->conv_sh, r->conv_sw, r->conv_dh, r->conv_dw);
  }
  bool splitk = plan_algo_is_splitk(p->algo[PLAN_KEY_MATMUL]);
  if (p->splitk && !splitk)
    return plan_fail(v->e, HARP_E_INVALID_ARG, v->src, p->pos.splitk, "splitk",
                     "splitk %d needs algo_choice matmul splitk_serial, splitk_parallel or splitk_reduce", p->splitk);
  if (p->splitk > 1 && v->g.k >= 0) { /* every slice needs at least one K tile */
    char b[PLAN_NAME_MAX];
    int64_t bk = 0, K = v->g.K;
    for (int t = 0; t < p->ntile; t++)
      if (!strcmp(p->tile_axes[t], plan_axis_base(r->axes[v->g.k].name, b))) bk = p->tile[t];
    int64_t kt = bk > 0 ? (K + bk - 1) / bk : K;
    if (p->splitk > kt)
      return plan_fail(v->e, HARP_E_INVALID_ARG, v->src, p->pos.splitk, "splitk",
                       "splitk %d: K = %lld has only %lld K tiles of %lld; each slice needs one", p->splitk, (long long)K,
                       (long long)kt, (long long)(bk > 0 ? bk : 1));
  }
  for (int i = 0; i < p->nbind; i++)
    if (plan_target_is_block(p->bind[i].target) && base_is_reduce(v, p->bind[i].axis) && !splitk &&
        r->pattern != PLAN_PAT_ATTENTION)
      return plan_fail(v->e, HARP_E_INVALID_ARG, v->src, p->pos.bind[i], p->bind[i].axis,
                       "bind: '%s' is a reduction axis; spreading it over %s needs algo_choice matmul splitk_*",
                       p->bind[i].axis, plan_target_name(p->bind[i].target));
  return HARP_OK;
}

static harp_status v_epilogue_cache(vctx *v) {
  const plan_t *p = v->p;
  const plan_region_info *r = v->r;
  if (r->epilogue_known) {
    bool same = r->nepi == p->nepi;
    for (int i = 0; same && i < p->nepi; i++) same = r->epilogue[i] == p->epi[i];
    if (!same) {
      char want[128] = "";
      for (int i = 0; i < r->nepi && i < PLAN_MAX_EPI; i++)
        snprintf(want + strlen(want), sizeof want - strlen(want), " %s", plan_epi_name(r->epilogue[i]));
      return plan_fail(v->e, HARP_E_INVALID_ARG, v->src, p->pos.epilogue, "epilogue",
                       "epilogue does not match region '%s', which fuses:%s", r->name ? r->name : "?",
                       want[0] ? want : " nothing");
    }
  }
  for (int i = 0; i < p->ncache; i++) {
    const char *t = p->cache[i].tensor;
    bool ok = !strcmp(t, "A") || !strcmp(t, "B");
    for (int j = 0; !ok && j < r->ninputs && j < 8; j++) ok = r->inputs[j] && !strcmp(r->inputs[j], t);
    if (!ok)
      return plan_fail(v->e, HARP_E_INVALID_ARG, v->src, p->pos.cache[i], t,
                       "cache_read: '%s' is neither A, B nor an input of region '%s'", t, r->name ? r->name : "?");
  }
  return HARP_OK;
}

/* SM80 mma.sync m16n8k{16,8,32}; SM90 wgmma + TMA. */
static harp_status v_shapes(vctx *v) {
  const plan_t *p = v->p;
  if (!plan_pattern_is_contraction(v->r->pattern) || p->ntile != 3) return HARP_OK;
  int kk = plan_mma_k(v->r->in_dtype);
  if (v->m->arch == PLAN_ARCH_SM80) {
    if (p->warp_m % 16 || p->warp_n % 8)
      return plan_fail(v->e, HARP_E_INVALID_ARG, v->src, p->pos.warp_tile, "warp_tile",
                       "warp tile %dx%d: mma.sync m16n8k%d needs M a multiple of 16 and N of 8", p->warp_m, p->warp_n, kk);
    if (p->tile[2] % kk)
      return plan_fail(v->e, HARP_E_INVALID_ARG, v->src, p->pos.tile[2], p->tile_axes[2],
                       "tile K = %lld is not a multiple of the mma k-step %d", (long long)p->tile[2], kk);
  } else if (v->m->arch == PLAN_ARCH_SM90) {
    char why[160];
    int rule = plan_sm90_rule(p, v->r->in_dtype, why, sizeof why);
    if (rule)
      return plan_fail(v->e, rule == 2 ? HARP_E_MISALIGNED : HARP_E_INVALID_ARG, v->src,
                       strstr(why, "wgmma") && !strstr(why, "K =") ? p->pos.warp_tile : p->pos.tile[0], "tile",
                       "sm90: %s", why);
  }
  return HARP_OK;
}

/* True when `axis` (a base name or a fuse output) stands for batch axes only:
 * parallel region axes that are neither the GEMM view's M, N nor K. */
static bool batch_only(const vctx *v, const char *axis, int depth) {
  const plan_fuse *f = fuse_of(v->p, axis);
  if (f) return depth < PLAN_MAX_FUSE && batch_only(v, f->a, depth + 1) && batch_only(v, f->b, depth + 1);
  int a = plan_region_axis(v->r, axis);
  return a >= 0 && !v->r->axes[a].reduce && a != v->g.m && a != v->g.n && a != v->g.k;
}

static bool same_edges(const plan_t *p, const plan_region_info *r) {
  if (p->nedges != r->nedges) return false;
  for (int i = 0; i < p->nedges; i++)
    if (strcmp(p->edges[i].from, r->edges[i].from) || strcmp(p->edges[i].to, r->edges[i].to) ||
        p->edges[i].buffer != r->edges[i].buffer || p->edges[i].depth != r->edges[i].depth)
      return false;
  return true;
}

/* binds on the CPU: block.* spreads X.o (or a batch axis) over the threads;
 * there are no warps. */
static harp_status v_cpu_binds(vctx *v) {
  const plan_t *p = v->p;
  for (int i = 0; i < p->nbind; i++) {
    const char *ax = p->bind[i].axis;
    char b[PLAN_NAME_MAX];
    plan_axis_base(ax, b);
    if (!plan_target_is_block(p->bind[i].target))
      return plan_fail(v->e, HARP_E_UNSUPPORTED, v->src, p->pos.bind[i], ax,
                       "bind %s %s: the CPU has no warps (its register micro-tile is warp_tile MRxNR)", ax,
                       plan_target_name(p->bind[i].target));
    bool outer = !strcmp(ax, b) || (strlen(ax) == strlen(b) + 2 && !strcmp(ax + strlen(b), ".o"));
    if (!outer)
      return plan_fail(v->e, HARP_E_UNSUPPORTED, v->src, p->pos.bind[i], ax,
                       "bind %s %s: the CPU spreads outer tiles (X.o) or batch axes over its threads, not '%s'", ax,
                       plan_target_name(p->bind[i].target), ax);
  }
  return HARP_OK;
}

/* What the CPU templates cannot follow (docs/plan.md §5 "CPU"): a located
 * Unsupported error, never a statement dropped in silence. */
static harp_status v_cpu(vctx *v) {
  const plan_t *p = v->p;
  const plan_region_info *r = v->r;
  harp_status st;
  if (v->m->arch != PLAN_ARCH_CPU) return HARP_OK;
  /* unroll: the micro-kernel's K loop of a GEMM / conv (K.i, or K.i.i inside it), once */
  char ki[PLAN_NAME_MAX + 4], kii[PLAN_NAME_MAX + 4];
  snprintf(ki, sizeof ki, "%.50s.i", p->ntile == 3 ? p->tile_axes[2] : "?");
  snprintf(kii, sizeof kii, "%.50s.i.i", p->ntile == 3 ? p->tile_axes[2] : "?");
  for (int i = 0; i < p->nunroll; i++)
    if (i > 0 || (r->pattern != PLAN_PAT_MATMUL && r->pattern != PLAN_PAT_CONV) ||
        (strcmp(p->unroll[i].axis, ki) && strcmp(p->unroll[i].axis, kii)))
      return plan_fail(v->e, HARP_E_UNSUPPORTED, v->src, p->pos.unroll[i], p->unroll[i].axis,
                       "unroll %s %d: the CPU unrolls one loop, the GEMM / conv micro-kernel's K loop (%s); its register"
                       " tile is warp_tile", p->unroll[i].axis, p->unroll[i].factor, ki);
  if (p->nsplits)
    return plan_fail(v->e, HARP_E_UNSUPPORTED, v->src, p->pos.splits[0], p->splits[0].axis,
                     "split %s: the CPU loop nest has two levels per axis, the tile and the register micro-tile"
                     " (warp_tile); no further split", p->splits[0].axis);
  for (int i = 0; i < p->nfuse; i++)
    if (!batch_only(v, p->fuse[i].a, 0) || !batch_only(v, p->fuse[i].b, 0))
      return plan_fail(v->e, HARP_E_UNSUPPORTED, v->src, p->pos.fuse[i], p->fuse[i].to,
                       "fuse %s %s: on the CPU only batch axes fuse (into the one parallel batch loop)", p->fuse[i].a,
                       p->fuse[i].b);
  if ((st = v_cpu_binds(v))) return st;
  char kdef[PLAN_NAME_MAX];
  plan_default_pipeline_axis(p, kdef);
  if (strcmp(p->pipeline_axis, kdef))
    return plan_fail(v->e, HARP_E_UNSUPPORTED, v->src, p->pos.pipeline, p->pipeline_axis,
                     "pipeline %s: the CPU prefetches along %s only (stages sets the distance)", p->pipeline_axis, kdef);
  /* pingpong stays accepted: the resource model counts it in the L2 budget
   * (docs/plan.md §9), though the templates pack each panel once */
  for (int i = 0; i < p->ncache; i++)
    if (strcmp(p->cache[i].tensor, "A") && strcmp(p->cache[i].tensor, "B"))
      return plan_fail(v->e, HARP_E_UNSUPPORTED, v->src, p->pos.cache[i], p->cache[i].tensor,
                       "cache_read %s: the CPU templates pack A and B only", p->cache[i].tensor);
  if (p->a_swizzle || p->b_swizzle)
    return plan_fail(v->e, HARP_E_UNSUPPORTED, v->src, p->pos.layout, "layout_hint",
                     "layout_hint %s_swizzle=true: the CPU packs panels unswizzled", p->a_swizzle ? "A" : "B");
  if (p->nedges && !same_edges(p, r))
    return plan_fail(v->e, HARP_E_UNSUPPORTED, v->src, p->pos.edges[0], "local_edge",
                     "local_edges: the CPU's fused kernel keeps the edges region formation chose for '%s'; a plan"
                     " cannot move them", r->name ? r->name : "?");
  /* a conv on the direct kernel (cost_dconv.c): its register tile is
   * pixels x 16 or 32 output channels, as many pixels as the registers hold */
  plan_dconv dt;
  if (r->pattern == PLAN_PAT_CONV && p->warp_m > 0 && p->warp_n > 0 && !plan_algo_is_winograd(p->algo[PLAN_KEY_CONV]) &&
      !plan_algo_is_splitk(p->algo[PLAN_KEY_MATMUL]) && p->splitk <= 1 && plan_cpu_direct_conv(r, &v->g, v->m) &&
      plan_dconv_own(r, &v->g, &dt) && !plan_dconv_of(p, r, &v->g, &dt))
    return plan_fail(v->e, HARP_E_UNSUPPORTED, v->src, p->pos.warp_tile, "warp_tile",
                     "warp_tile %dx%d: region '%s' runs on the direct conv kernel, whose register tile is %s (16 or"
                     " 32 output channels, at most %d pixels with 16 and %d with 32 for %d-tap rows)", p->warp_m,
                     p->warp_n, r->name ? r->name : "?",
                     plan_conv_pixels_m(r, &v->g) ? "pixels x output channels" : "output channels x pixels",
                     UT_MIN(31 - r->conv_kw, 28), UT_MIN((31 - 2 * r->conv_kw) / 2, 28), r->conv_kw);
  if (plan_algo_is_splitk(p->algo[PLAN_KEY_MATMUL]) && p->algo[PLAN_KEY_MATMUL] != PLAN_ALGO_SPLITK_REDUCE)
    return plan_fail(v->e, HARP_E_UNSUPPORTED, v->src, p->pos.algo[PLAN_KEY_MATMUL], "algo_choice",
                     "algo_choice matmul %s: the CPU's split-K is splitk_reduce (partials summed in slice order by a"
                     " second pass; no flags, no atomics)", plan_algo_name(p->algo[PLAN_KEY_MATMUL]));
  return HARP_OK;
}

harp_status plan_validate(const plan_t *p, const plan_region_info *r, const plan_machine *m, const plan_src *src,
                        harp_error *e) {
  harp_status st = plan_check(p, src, e);
  if (st) return st;
  if (p->arch != m->arch)
    return plan_fail(e, HARP_E_INVALID_ARG, src, p->pos.arch, "arch", "plan is for %s but the target is %s",
                     plan_arch_name(p->arch), plan_arch_name(m->arch));
  vctx v = {p, r, m, src, e, {0}};
  if ((st = plan_region_gemm_view(r, &v.g, e))) return st;
  if ((st = v_axes(&v)) || (st = v_roles(&v)) || (st = v_tails(&v)) || (st = v_vector(&v)) || (st = v_algo(&v)) ||
      (st = v_epilogue_cache(&v)) || (st = v_shapes(&v)) || (st = v_cpu(&v)))
    return st;
  plan_resources res;
  plan_resources_of(p, m, r, &res);
  return plan_resources_check(p, &res, m, src, e);
}

void plan_fill_from_region(plan_t *p, const plan_region_info *r) {
  static const plan_algo dflt[PLAN_KEY_COUNT] = {PLAN_ALGO_IMPLICIT_GEMM, PLAN_ALGO_IMPLICIT_GEMM,
                                                 PLAN_ALGO_STREAMING_SOFTMAX_2PASS};
  int key = r->pattern == PLAN_PAT_MATMUL ? PLAN_KEY_MATMUL
            : r->pattern == PLAN_PAT_CONV ? PLAN_KEY_CONV
            : r->pattern == PLAN_PAT_ATTENTION ? PLAN_KEY_ATTENTION
                                               : -1;
  if (key >= 0 && p->algo[key] == PLAN_ALGO_NONE) p->algo[key] = dflt[key];
  if (r->epilogue_known && p->nepi == 0) {
    p->nepi = UT_MAX(UT_MIN(r->nepi, PLAN_MAX_EPI), 0);
    memcpy(p->epi, r->epilogue, sizeof(plan_epi) * (size_t)p->nepi);
  }
  if (p->nedges == 0) {
    p->nedges = UT_MAX(UT_MIN(r->nedges, PLAN_MAX_EDGES), 0);
    memcpy(p->edges, r->edges, sizeof(plan_edge) * (size_t)p->nedges);
  }
}
