/* select.c — choosing the regions (seed 000 §4.1 step 5).
 * Needs: legal.c, rcost.c.  Gives: rg_eval_set (cached), rg_select,
 * rg_units_blocks, rg_formation_delta.
 *
 * Greedy, for the whole graph: units are taken from the last (the outputs)
 * backwards; each unassigned one starts a region, which then tries its
 * producers, latest first.  A producer is absorbed when
 *   ① it is read by the region only and is no model output (UCC),
 *   ② can_compute_at allows it and its halo is not too large, the region
 *     keeps a shape the backends generate (A / B / C) and its buffers fit,
 *   ③ Δtime < 0 (plan_fusion_delta) and no §4.2 threshold trips.
 * One-step rollback: when a producer fails on ③ (Δtime or a threshold),
 * the previous absorption is undone if taking this producer instead is
 * legal and gives a lower Δtime; the undone unit later starts its own
 * region.
 *
 * Exact, on windows: consecutive greedy regions are grouped into windows of
 * at most `window` units.  In a window every candidate region is
 * enumerated — a sink plus producers closed under "all readers inside"
 * (UCC) — and costed as the Δtime of forming it from its units alone; a
 * branch and bound over the units (latest first: an uncovered unit is the
 * sink of its region) finds the partition with the least total Δtime.  It
 * replaces greedy's regions in the window when strictly better. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "region/rg_int.h"

#define MAX_CANDIDATES 4096 /* per window; beyond, the window keeps greedy's answer */
#define EPS 1e-15

struct rg_cache_entry {
  uint64_t h;
  int n, gather;
  int *blocks;
  rg_eval ev;
  rg_cache_entry *next;
};

static int cmp_int(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

static uint64_t set_hash(const int *blocks, int n, int gather) {
  uint64_t h = ut_hash64(blocks, sizeof(int) * (size_t)n, 1469598103934665603ull);
  return ut_hash64(&gather, sizeof gather, h);
}

harp_status rg_eval_set(rg_ctx *c, const int *blocks, int n, int gather, const rg_eval **out) {
  uint64_t h = set_hash(blocks, n, gather);
  if (!c->capcache) {
    c->capcache = 4096;
    c->cache = ut_arena_alloc(c->arena, sizeof(rg_cache_entry *) * (size_t)c->capcache);
    if (!c->cache) return ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
  }
  rg_cache_entry **slot = &c->cache[h % (uint64_t)c->capcache];
  for (rg_cache_entry *x = *slot; x; x = x->next)
    if (x->h == h && x->n == n && x->gather == gather && !memcmp(x->blocks, blocks, sizeof(int) * (size_t)n)) {
      *out = &x->ev;
      return HARP_OK;
    }
  rg_cache_entry *x = ut_arena_alloc(c->arena, sizeof *x);
  int *bl = ut_arena_alloc(c->arena, sizeof(int) * ((size_t)n + 1));
  if (!x || !bl) return ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
  memcpy(bl, blocks, sizeof(int) * (size_t)n);
  *x = (rg_cache_entry){h, n, gather, bl, {0}, *slot};
  harp_status st = rg_check_set(c, blocks, n, gather, &x->ev);
  if (!st && x->ev.legal) st = rg_cost_set(c, blocks, n, gather, &x->ev);
  if (st) return st;
  /* axis names point into the entry, which does not move */
  for (int i = 0; i < x->ev.info.naxes; i++) x->ev.info.axes[i].name = x->ev.names[i];
  for (int i = 0; i < x->ev.info.ninputs; i++) x->ev.info.inputs[i] = x->ev.inputs[i];
  x->ev.info.name = gather >= 0 ? c->g->nodes[gather].id : rg_block_name(c, blocks[n - 1]);
  *slot = x;
  c->evals++;
  *out = &x->ev;
  return HARP_OK;
}

void rg_eval_forget(rg_ctx *c, const int *blocks, int n, int gather) {
  if (!c->capcache) return;
  uint64_t h = set_hash(blocks, n, gather);
  for (rg_cache_entry **p = &c->cache[h % (uint64_t)c->capcache]; *p; p = &(*p)->next) {
    rg_cache_entry *x = *p;
    if (x->h == h && x->n == n && x->gather == gather && !memcmp(x->blocks, blocks, sizeof(int) * (size_t)n)) {
      *p = x->next;
      return;
    }
  }
}

int rg_units_blocks(const rg_ctx *c, const int *members, int n, int *out, int cap, int *gather) {
  int k = 0;
  *gather = -1;
  for (int i = 0; i < n; i++) {
    const rg_unit *u = &c->units[members[i]];
    if (u->kind == RG_U_GATHER) *gather = u->node;
    for (int j = 0; j < u->nblocks && k < cap; j++) out[k++] = u->blocks[j];
  }
  qsort(out, (size_t)k, sizeof(int), cmp_int);
  return k;
}

static harp_status eval_units(rg_ctx *c, const int *members, int n, const rg_eval **ev) {
  int bl[RG_MAX_SET + 1], gather;
  int nb = rg_units_blocks(c, members, n, bl, RG_MAX_SET + 1, &gather);
  if (nb > RG_MAX_SET) {
    static const rg_eval too_big = {.legal = false, .reason = "unsupported_shape", .detail = "too many blocks"};
    *ev = &too_big;
    return HARP_OK;
  }
  return rg_eval_set(c, bl, nb, gather, ev);
}

harp_status rg_formation_delta(rg_ctx *c, const int *members, int n, double *dtime, const char **stop, char *detail,
                             int cap) {
  const rg_eval *S;
  *dtime = 0;
  *stop = NULL;
  if (detail && cap) detail[0] = 0;
  if (eval_units(c, members, n, &S)) return c->e->code;
  if (!S->legal) {
    *stop = S->reason;
    if (detail) snprintf(detail, (size_t)cap, "%s", S->detail);
    return HARP_OK;
  }
  if (n == 1) return HARP_OK;
  /* the absorbing kernel: the anchor's unit, or for B a unit with the
   * region's loop structure, the sink first */
  int anchor = S->anchor >= 0 ? c->unit_of_block[S->anchor] : members[n - 1];
  const rg_eval *A;
  if (eval_units(c, &anchor, 1, &A)) return c->e->code;
  for (int i = n - 1; i >= 0 && S->shape == RG_SHAPE_ROW && !rg_is_base(S, A, false); i--) {
    if (eval_units(c, &members[i], 1, &A)) return c->e->code;
    anchor = members[i];
  }
  if (S->shape == RG_SHAPE_ROW && !rg_is_base(S, A, false)) {
    anchor = members[n - 1];
    if (eval_units(c, &anchor, 1, &A)) return c->e->code;
  }
  double t = 0, f = 0, b = 0;
  for (int i = 0; i < n; i++) {
    if (members[i] == anchor) continue;
    const rg_eval *P;
    if (eval_units(c, &members[i], 1, &P)) return c->e->code;
    t += P->time, f += P->flops, b += P->bytes;
  }
  if (A->has_plan && !S->has_plan) {
    *stop = "no_plan";
    if (detail) snprintf(detail, (size_t)cap, "no plan of the search space fits the fused region");
    *dtime = 0;
    return HARP_OK;
  }
  plan_fusion_out d;
  rg_delta(c, A, S, t, f, b, &d, detail, cap);
  *dtime = d.dtime;
  *stop = rg_stop_of(&d);
  return HARP_OK;
}

/* The exact search's weight of a region: its estimated time minus that of
 * its units alone (additive over a partition: the partition's total time
 * less a constant).  *stop: not a candidate (illegal, or a §4.2 threshold
 * on its formation). */
static harp_status weight(rg_ctx *c, const int *members, int n, double *w, const char **stop) {
  double dt;
  *w = 0;
  if (rg_formation_delta(c, members, n, &dt, stop, NULL, 0)) return c->e->code;
  if (*stop && !strcmp(*stop, "delta_time_nonneg")) *stop = NULL; /* the time decides here */
  const rg_eval *S;
  if (*stop || eval_units(c, members, n, &S)) return c->e->code;
  *w = S->time;
  for (int i = 0; i < n; i++) {
    const rg_eval *U;
    if (eval_units(c, &members[i], 1, &U)) return c->e->code;
    *w -= U->time;
  }
  return HARP_OK;
}

/* ---- greedy -------------------------------------------------------------------------------- */
static bool member(const int *set, int n, int x) { return rg_in(set, n, x); }

/* Can region R (units) take producer q? */
harp_status rg_try_absorb(rg_ctx *c, const int *R, int n, int q, rg_absorb *out) {
  memset(out, 0, sizeof *out);
  const rg_unit *Q = &c->units[q];
  if (Q->kind == RG_U_GATHER) {
    out->reason = "non_scop";
    snprintf(out->detail, sizeof out->detail, "%s reads at data-dependent positions: it ends a region", Q->name);
    return HARP_OK;
  }
  for (int i = 0; i < n; i++)
    if (c->units[R[i]].kind == RG_U_GATHER) {
      out->reason = "non_scop";
      snprintf(out->detail, sizeof out->detail, "a GATHER region takes nothing else");
      return HARP_OK;
    }
  if (Q->escapes) {
    out->reason = "not_ucc";
    snprintf(out->detail, sizeof out->detail, "%s is a model output", Q->name);
    return HARP_OK;
  }
  for (int k = 0; k < Q->ncons; k++)
    if (!member(R, n, Q->cons[k])) {
      out->reason = "not_ucc";
      snprintf(out->detail, sizeof out->detail, "%s is also read by %s", Q->name, c->units[Q->cons[k]].name);
      return HARP_OK;
    }
  int S[RG_MAX_SET + 1];
  if (n + 1 > RG_MAX_SET) {
    out->reason = "unsupported_shape";
    snprintf(out->detail, sizeof out->detail, "region too large");
    return HARP_OK;
  }
  memcpy(S, R, sizeof(int) * (size_t)n);
  S[n] = q;
  const rg_eval *eS, *eR, *eQ;
  if (eval_units(c, S, n + 1, &eS) || eval_units(c, R, n, &eR) || eval_units(c, &q, 1, &eQ)) return c->e->code;
  if (!eS->legal) {
    out->reason = eS->reason;
    snprintf(out->detail, sizeof out->detail, "%s", eS->detail);
    return HARP_OK;
  }
  /* the absorbing kernel is the one whose loops the fused region keeps:
   * the side holding its anchor (a contraction absorbed into its epilogue
   * chain keeps the contraction's grid) */
  bool q_anchor = eS->anchor >= 0 && c->unit_of_block[eS->anchor] == q;
  bool q_base = rg_is_base(eS, eQ, q_anchor) && !rg_is_base(eS, eR, !q_anchor);
  const rg_eval *base = q_base ? eQ : eR, *other = q_base ? eR : eQ;
  /* a plan lost is the absorbing kernel's, as the exact search's
   * rg_formation_delta has it: a contraction with no plan of its own (a
   * depthwise convolution, on its template) still takes the epilogue whose
   * map had one */
  if (base->has_plan && !eS->has_plan) {
    out->reason = "no_plan";
    snprintf(out->detail, sizeof out->detail, "no plan of the search space fits the region with %s", Q->name);
    return HARP_OK;
  }
  plan_fusion_out d;
  rg_delta(c, base, eS, other->time, other->flops, other->bytes, &d, out->detail, sizeof out->detail);
  out->dtime = d.dtime;
  out->reason = rg_stop_of(&d);
  out->ok = out->reason == NULL;
  return HARP_OK;
}

static bool threshold_stop(const char *r) {
  return r && (!strcmp(r, "delta_time_nonneg") || !strcmp(r, "smem_over_80pct") || !strcmp(r, "cta_drops_to_1") ||
               !strcmp(r, "vector_width_shrinks") || !strcmp(r, "sm90_tile_constraint"));
}

static int by_node_desc(const void *a, const void *b, void *ctx) {
  const rg_ctx *c = ctx;
  return c->units[*(const int *)b].node - c->units[*(const int *)a].node;
}

/* insertion sort (small lists), latest producer first */
static void sort_desc(const rg_ctx *c, int *v, int n) {
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && by_node_desc(&v[j - 1], &v[j], (void *)c) > 0; j--) {
      int t = v[j];
      v[j] = v[j - 1];
      v[j - 1] = t;
    }
}

static harp_status greedy(rg_ctx *c, int *region_of_unit, int *nregions) {
  int *R = ut_xmalloc(sizeof(int) * ((size_t)c->nunits + 1)), *cand = ut_xmalloc(sizeof(int) * ((size_t)c->nunits + 1));
  char *banned = ut_xcalloc((size_t)c->nunits + 1, 1);
  harp_status st = HARP_OK;
  if (!R || !cand || !banned) st = ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
  for (int u = 0; u < c->nunits; u++) region_of_unit[u] = -1;
  *nregions = 0;
  for (int u = c->nunits - 1; u >= 0 && !st; u--) {
    if (region_of_unit[u] >= 0) continue;
    int rid = (*nregions)++, n = 0, last = -1;
    double last_dt = 0;
    R[n++] = u;
    region_of_unit[u] = rid;
    memset(banned, 0, (size_t)c->nunits);
    for (bool grew = true; grew && !st;) {
      grew = false;
      int nc = 0;
      for (int i = 0; i < n; i++)
        for (int k = 0; k < c->units[R[i]].nprod; k++) {
          int p = c->units[R[i]].prod[k];
          if (region_of_unit[p] < 0 && !banned[p] && !member(cand, nc, p)) cand[nc++] = p;
        }
      sort_desc(c, cand, nc);
      for (int i = 0; i < nc && !grew && !st; i++) {
        rg_absorb a;
        if ((st = rg_try_absorb(c, R, n, cand[i], &a))) break;
        if (a.ok) {
          R[n++] = cand[i];
          region_of_unit[cand[i]] = rid;
          last = cand[i];
          last_dt = a.dtime;
          grew = true;
        } else if (threshold_stop(a.reason) && last >= 0 && !c->no_rollback) {
          /* one-step rollback: R without `last`, with cand[i] instead */
          int k = 0;
          while (R[k] != last) k++;
          memmove(&R[k], &R[k + 1], sizeof(int) * (size_t)(n - k - 1));
          rg_absorb b;
          bool readers_inside = true;
          for (int j = 0; j < c->units[cand[i]].ncons; j++) readers_inside &= member(R, n - 1, c->units[cand[i]].cons[j]);
          if (readers_inside && (st = rg_try_absorb(c, R, n - 1, cand[i], &b))) break;
          if (readers_inside && b.ok && b.dtime < last_dt) {
            region_of_unit[last] = -1;
            banned[last] = 1;
            R[n - 1] = cand[i];
            region_of_unit[cand[i]] = rid;
            last = cand[i];
            last_dt = b.dtime;
            grew = true;
          } else {
            memmove(&R[k + 1], &R[k], sizeof(int) * (size_t)(n - k - 1));
            R[k] = last;
          }
        }
      }
    }
  }
  free(R);
  free(cand);
  free(banned);
  return st;
}

/* ---- exact windows ---------------------------------------------------------------------------- */
typedef struct cand {
  int sink, n;
  int *units;
  double dtime;
} cand;

typedef struct window {
  rg_ctx *c;
  int *units; /* of the window, ascending */
  int nu;
  char *in_w; /* per unit */
  char *in_s; /* per unit: in the set enumerate is growing (S) */
  cand *cands;
  int ncand;
  bool overflow;
  /* search */
  char *covered;
  int *pick, *best_pick; /* per window position: candidate index, -1 = singleton */
  double best, cur;
  double *lb; /* per position: least Δ of a region with that sink */
} window;

static harp_status add_cand(window *w, const int *S, int n) {
  if (w->ncand >= MAX_CANDIDATES) {
    w->overflow = true;
    return HARP_OK;
  }
  double dt;
  const char *stop;
  int sorted[RG_MAX_SET];
  memcpy(sorted, S, sizeof(int) * (size_t)n);
  qsort(sorted, (size_t)n, sizeof(int), cmp_int);
  if (weight(w->c, sorted, n, &dt, &stop)) return w->c->e->code;
  if (stop || !(dt < 0)) return HARP_OK;
  int *u = ut_arena_alloc(w->c->arena, sizeof(int) * (size_t)n);
  if (!u) return ut_fail(w->c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
  memcpy(u, sorted, sizeof(int) * (size_t)n);
  w->cands[w->ncand++] = (cand){sorted[n - 1], n, u, dt};
  return HARP_OK;
}

/* Units in one fusable group (poly_make_fusable_groups); GATHERs in none. */
static bool same_group(const rg_ctx *c, int u, int v) {
  const rg_unit *a = &c->units[u], *b = &c->units[v];
  return a->nblocks && b->nblocks && c->group[a->blocks[0]] == c->group[b->blocks[0]];
}

/* Whether unit p is a cast between floats of a model input or weight
 * alone: a contraction may take it as its operand's conversion (legal.c's
 * operand cast: the CPU templates read the weight as stored, packed once),
 * a fusion that is no compute-at and so joins no fusable group. */
static bool weight_cast(const rg_ctx *c, int p) {
  const rg_unit *u = &c->units[p];
  if (u->nblocks != 1 || u->nprod || u->kind == RG_U_GATHER) return false;
  const tiny_node *x = &c->g->nodes[poly_block(c->pv, u->blocks[0])->node];
  return x->op == TINY_CAST && x->src[0].node >= 0 && tiny_dtype_is_float(x->dtype) &&
         tiny_dtype_is_float(c->g->nodes[x->src[0].node].dtype);
}

/* Whether unit p is a widening cast between floats (bf16 -> fp32) of a
 * computed value whose one reader, a contraction, takes it as its operand's
 * conversion (legal.c's operand cast): the templates then read the narrow
 * value as stored, and two bf16 operands multiply on the native bf16 dot
 * product.  As the sink of its producer's region the cast would store the
 * wide type and leave the contraction the slower mixed template (the QDQ
 * ResNet-50's 1x1 convs: 0.20 ms against 0.11), which the estimates do not
 * tell apart, so the exact search grows no region from it. */
static harp_status narrow_operand(rg_ctx *c, int p, bool *yes) {
  const rg_unit *u = &c->units[p];
  *yes = false;
  if (u->kind != RG_U_BLOCK || u->nblocks != 1 || !u->nprod || u->ncons != 1 || u->escapes) return HARP_OK;
  const tiny_node *x = &c->g->nodes[poly_block(c->pv, u->blocks[0])->node];
  if (x->op != TINY_CAST || x->src[0].node < 0) return HARP_OK;
  tiny_dtype from = c->g->nodes[x->src[0].node].dtype;
  if (!tiny_dtype_is_float(x->dtype) || !tiny_dtype_is_float(from) || tiny_dtype_size(x->dtype) <= tiny_dtype_size(from))
    return HARP_OK;
  int pair[2] = {p, u->cons[0]}, bl[RG_MAX_SET + 1], gather;
  const rg_eval *ev;
  if (eval_units(c, pair, 2, &ev)) return c->e->code;
  if (!ev->legal || ev->shape != RG_SHAPE_CONTRACTION || ev->anchor < 0) return HARP_OK;
  int nb = rg_units_blocks(c, pair, 2, bl, RG_MAX_SET + 1, &gather);
  *yes = nb <= RG_MAX_SET && rg_operand_cast(c, bl, nb, ev->anchor, u->blocks[0]);
  return HARP_OK;
}

/* Sets with sink S[0] closed under "every reader inside", built by including
 * or excluding the latest frontier producer.  w->in_s marks S[0..n) (the
 * caller marks S[0]): membership by a flag, not a scan of S. */
static harp_status enumerate(window *w, int *S, int n, char *excluded) {
  if (w->overflow) return HARP_OK;
  rg_ctx *c = w->c;
  int best = -1;
  for (int i = 0; i < n; i++)
    for (int k = 0; k < c->units[S[i]].nprod; k++) {
      int p = c->units[S[i]].prod[k];
      if (!w->in_w[p] || excluded[p] || w->in_s[p] || c->units[p].escapes) continue;
      if (!same_group(c, p, S[0]) && !weight_cast(c, p)) continue; /* make_fusable_groups: no legal edge can join them */
      bool inside = true;
      for (int j = 0; j < c->units[p].ncons && inside; j++) inside = w->in_s[c->units[p].cons[j]];
      if (inside && (best < 0 || c->units[p].node > c->units[best].node)) best = p;
    }
  if (best < 0 || n >= RG_MAX_SET) return HARP_OK;
  S[n] = best;
  w->in_s[best] = 1;
  harp_status st = add_cand(w, S, n + 1);
  if (!st) st = enumerate(w, S, n + 1, excluded);
  w->in_s[best] = 0;
  if (st) return st;
  excluded[best] = 1;
  st = enumerate(w, S, n, excluded);
  excluded[best] = 0;
  return st;
}

static void search(window *w, int pos, double cur) {
  /* positions from the latest unit down */
  while (pos >= 0 && w->covered[w->units[pos]]) pos--;
  if (pos < 0) {
    if (cur < w->best - EPS) {
      w->best = cur;
      memcpy(w->best_pick, w->pick, sizeof(int) * (size_t)w->nu);
    }
    return;
  }
  double bound = cur;
  for (int i = 0; i <= pos; i++)
    if (!w->covered[w->units[i]]) bound += w->lb[i];
  if (bound >= w->best - EPS) return;
  int u = w->units[pos];
  for (int k = 0; k < w->ncand; k++) {
    const cand *cd = &w->cands[k];
    if (cd->sink != u) continue;
    bool free_ = true;
    for (int j = 0; j < cd->n && free_; j++) free_ = !w->covered[cd->units[j]];
    if (!free_) continue;
    for (int j = 0; j < cd->n; j++) w->covered[cd->units[j]] = 1;
    w->pick[pos] = k;
    search(w, pos - 1, cur + cd->dtime);
    for (int j = 0; j < cd->n; j++) w->covered[cd->units[j]] = 0;
  }
  w->covered[u] = 1;
  w->pick[pos] = -1;
  search(w, pos - 1, cur);
  w->covered[u] = 0;
}

static harp_status exact_window(rg_ctx *c, const int *units, int nu, int *region_of_unit, int *nregions, bool *won,
                              double *greedy_w, double *exact_w) {
  *won = false;
  window w = {0};
  w.c = c;
  w.units = (int *)units;
  w.nu = nu;
  w.in_w = ut_xcalloc((size_t)c->nunits + 1, 1);
  w.covered = ut_xcalloc((size_t)c->nunits + 1, 1);
  w.in_s = ut_xcalloc((size_t)c->nunits + 1, 1);
  char *excl = ut_xcalloc((size_t)c->nunits + 1, 1);
  w.cands = ut_xmalloc(sizeof(cand) * MAX_CANDIDATES);
  w.pick = ut_xmalloc(sizeof(int) * ((size_t)nu + 1));
  w.best_pick = ut_xmalloc(sizeof(int) * ((size_t)nu + 1));
  w.lb = ut_xcalloc((size_t)nu + 1, sizeof(double));
  int *S = ut_xmalloc(sizeof(int) * (RG_MAX_SET + 1));
  harp_status st = HARP_OK;
  if (!w.in_w || !w.in_s || !w.covered || !excl || !w.cands || !w.pick || !w.best_pick || !w.lb || !S)
    st = ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
  for (int i = 0; i < nu && !st; i++) w.in_w[units[i]] = 1;
  for (int i = 0; i < nu && !st && !w.overflow; i++) {
    bool narrow = false;
    if ((st = narrow_operand(c, units[i], &narrow)) || narrow) continue;
    S[0] = units[i];
    w.in_s[S[0]] = 1;
    st = enumerate(&w, S, 1, excl);
    w.in_s[S[0]] = 0;
  }
  /* greedy's regions in the window, costed the same way */
  double g = 0;
  for (int i = 0; i < nu && !st; i++) {
    int rid = region_of_unit[units[i]], m = 0;
    bool first = true;
    for (int j = 0; j < i && first; j++) first = region_of_unit[units[j]] != rid;
    if (!first) continue;
    for (int j = 0; j < nu; j++)
      if (region_of_unit[units[j]] == rid) S[m++] = units[j];
    double dt;
    const char *stop;
    if ((st = weight(c, S, m, &dt, &stop))) break;
    g += dt;
  }
  if (!st && !w.overflow) {
    for (int k = 0; k < w.ncand; k++)
      for (int i = 0; i < nu; i++)
        if (units[i] == w.cands[k].sink && w.cands[k].dtime < w.lb[i]) w.lb[i] = w.cands[k].dtime;
    w.best = g + EPS; /* only a strictly better answer replaces greedy's */
    bool found = false;
    double before = w.best;
    search(&w, nu - 1, 0);
    found = w.best < before;
    *greedy_w = g;
    *exact_w = found ? w.best : g;
    if (found) {
      *won = true;
      for (int i = 0; i < nu; i++) region_of_unit[units[i]] = -1;
      for (int i = nu - 1; i >= 0; i--) {
        if (region_of_unit[units[i]] >= 0) continue;
        int rid = (*nregions)++;
        if (w.best_pick[i] < 0) {
          region_of_unit[units[i]] = rid;
        } else {
          const cand *cd = &w.cands[w.best_pick[i]];
          for (int j = 0; j < cd->n; j++) region_of_unit[cd->units[j]] = rid;
        }
      }
    }
  } else if (!st) {
    *greedy_w = *exact_w = g;
  }
  free(w.in_w);
  free(w.in_s);
  free(w.covered);
  free(excl);
  free(w.cands);
  free(w.pick);
  free(w.best_pick);
  free(w.lb);
  free(S);
  return st;
}

static harp_status renumber(rg_ctx *c, int *region_of_unit, int *nregions) {
  int *map = ut_xmalloc(sizeof(int) * ((size_t)*nregions + 1));
  if (!map) return ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
  for (int r = 0; r < *nregions; r++) map[r] = -1;
  int n = 0;
  /* regions numbered by their sink (the latest unit): a topological order */
  for (int u = 0; u < c->nunits; u++) {
    int r = region_of_unit[u];
    bool sink = true;
    for (int v = u + 1; v < c->nunits && sink; v++) sink = region_of_unit[v] != r;
    if (sink) map[r] = n++;
  }
  for (int u = 0; u < c->nunits; u++) region_of_unit[u] = map[region_of_unit[u]];
  *nregions = n;
  free(map);
  return HARP_OK;
}

/* Σ of the regions' estimated times. */
static harp_status total_time(rg_ctx *c, const int *rou, int nreg, double *t) {
  int *m = ut_xmalloc(sizeof(int) * ((size_t)c->nunits + 1));
  if (!m) return ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
  *t = 0;
  harp_status st = HARP_OK;
  for (int r = 0; r < nreg && !st; r++) {
    int n = 0;
    for (int u = 0; u < c->nunits; u++)
      if (rou[u] == r) m[n++] = u;
    const rg_eval *ev;
    if (n && !(st = eval_units(c, m, n, &ev))) *t += ev->time;
  }
  free(m);
  return st;
}

/* The exact search on one window (whole regions); marks its units exact when it wins. */
static harp_status window_at(rg_ctx *c, const int *units, int m, int *rou, int *next_id, char *exact_unit, int *nwindows,
                           int *nexact) {
  double gw = 0, ew = 0;
  bool won = false;
  (*nwindows)++;
  harp_status st = exact_window(c, units, m, rou, next_id, &won, &gw, &ew);
  if (won) {
    (*nexact)++;
    for (int i = 0; i < m; i++) exact_unit[units[i]] = 1;
  }
  return st;
}

/* The units of a window across the boundary between first-pass windows k
 * and k + 1: whole regions of either side, nearest the boundary first (by
 * their sinks), alternately after and before it, while they fit in
 * window_size units.  A region belongs to the last window of its units; one
 * with a unit in no window is left out.  *m = 0 when one side is empty. */
static harp_status straddle(rg_ctx *c, const int *rou, int nids, const int *win, int k, int window_size, int *units, int *m) {
  int *owner = ut_xmalloc(sizeof(int) * ((size_t)nids + 1)), *sink = ut_xmalloc(sizeof(int) * ((size_t)nids + 1));
  int *size = ut_xcalloc((size_t)nids + 1, sizeof(int));
  char *take = ut_xcalloc((size_t)nids + 1, 1);
  *m = 0;
  if (!owner || !sink || !size || !take) {
    free(owner), free(sink), free(size), free(take);
    return ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
  }
  for (int r = 0; r < nids; r++) owner[r] = -2, sink[r] = -1;
  for (int u = 0; u < c->nunits; u++) {
    int r = rou[u];
    if (owner[r] != -1) owner[r] = win[u] < 0 ? -1 : owner[r] > win[u] ? owner[r] : win[u];
    sink[r] = u; /* units ascend: the last is the sink */
    size[r]++;
  }
  int total = 0;
  for (bool grew = true; grew;) {
    grew = false;
    for (int side = 1; side >= 0; side--) { /* after the boundary, then before it */
      int best = -1;
      for (int r = 0; r < nids; r++)
        if (size[r] && !take[r] && owner[r] == k + side && total + size[r] <= window_size &&
            (best < 0 || (side ? sink[r] < sink[best] : sink[r] > sink[best])))
          best = r;
      if (best >= 0) take[best] = 1, total += size[best], grew = true;
    }
  }
  bool sides[2] = {false, false};
  for (int r = 0; r < nids; r++)
    if (take[r]) sides[owner[r] - k] = true;
  if (sides[0] && sides[1])
    for (int u = 0; u < c->nunits; u++)
      if (take[rou[u]]) units[(*m)++] = u;
  free(owner), free(sink), free(size), free(take);
  return HARP_OK;
}

harp_status rg_select(rg_ctx *c, rg_choice *ch, double *greedy_total, double *final_total, int *nwindows, int *nexact,
                    int window_size) {
  int nreg = 0;
  int *rou = ch->region_of_unit;
  harp_status st = greedy(c, rou, &nreg);
  char *exact_region = NULL;
  *nwindows = *nexact = 0;
  *greedy_total = *final_total = 0;
  if (!st) st = renumber(c, rou, &nreg);
  if (!st) st = total_time(c, rou, nreg, greedy_total);
  /* windows: consecutive greedy regions (in sink order), at most window_size units */
  int *units = ut_xmalloc(sizeof(int) * ((size_t)c->nunits + 1)), *count = ut_xcalloc((size_t)nreg + 1, sizeof(int));
  int *win = ut_xmalloc(sizeof(int) * ((size_t)c->nunits + 1)); /* per unit: its window, or -1 */
  if (!st && (!units || !count || !win)) st = ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
  if (!st) {
    exact_region = ut_arena_alloc(c->arena, (size_t)c->nunits + 1); /* per unit: its region is the exact search's */
    c->units_exact = exact_region;
    if (!exact_region) st = ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
    else memset(exact_region, 0, (size_t)c->nunits + 1);
  }
  for (int u = 0; u < c->nunits && !st; u++) count[rou[u]]++, win[u] = -1;
  int next_id = nreg, nwin = 0;
  for (int r0 = 0; r0 < nreg && !st;) {
    int r1 = r0, total = 0;
    while (r1 < nreg && total + count[r1] <= window_size) total += count[r1++];
    if (r1 == r0) { /* a region larger than a window: greedy's */
      r0++;
      continue;
    }
    int m = 0;
    for (int u = 0; u < c->nunits; u++)
      if (rou[u] >= r0 && rou[u] < r1) units[m++] = u, win[u] = nwin;
    nwin++;
    st = window_at(c, units, m, rou, &next_id, exact_region, nwindows, nexact);
    r0 = r1;
  }
  /* then one window across each boundary: a region that would join units on
   * both sides (a GEMM closing one window, its bias and residual opening the
   * next) is seen whole */
  for (int k = 0; k + 1 < nwin && !st; k++) {
    int m = 0;
    if (!(st = straddle(c, rou, next_id, win, k, window_size, units, &m)) && m)
      st = window_at(c, units, m, rou, &next_id, exact_region, nwindows, nexact);
  }
  if (!st) st = renumber(c, rou, &next_id);
  if (!st) st = total_time(c, rou, next_id, final_total);
  if (!st) {
    ch->nregions = next_id;
    ch->selection = ut_arena_alloc(c->arena, sizeof(char *) * ((size_t)next_id + 1));
    if (!ch->selection) st = ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
  }
  for (int u = 0; u < c->nunits && !st; u++) {
    const char **sel = &ch->selection[rou[u]];
    if (exact_region[u]) *sel = "exact";
    else if (!*sel) *sel = "greedy";
  }
  free(units);
  free(count);
  free(win);
  return st;
}
