/* compose.c — composing movement chains (seed 000 §1.3, §3.2: "逐次合成").
 * Needs: affine.c, build.c's step maps.  Gives: ib_compose, ib_follow,
 * ib_prune_access, ib_compose_node.
 *
 * An access is a list of disjoint pieces (guard -> map | fill value).  The
 * composition of outer (node vars -> X) with inner (X vars -> Y) substitutes
 * outer's map into each inner piece's guard and map, simplifies, and keeps
 * the pieces whose guards can still hold.  A node's composed access to
 * source k is compose(step map k, chain of the source), where the chain of
 * a movement node is its own composed access and that of any other node is
 * the identity: so every chain is built once, step by step. */
#include <stdlib.h>
#include <string.h>

#include "index/ib_int.h"
#include "util/util.h"

/* memcpy that accepts (NULL, 0): empty lists have no storage. */
static void copy(void *dst, const void *src, size_t n) {
  if (n) memcpy(dst, src, n);
}

/* Simplify one guard list in place: false if it cannot hold. */
static bool prune_cons(const ib_env *env, ib_cons *c, int *n) {
  int k = 0;
  for (int i = 0; i < *n; i++) {
    ib_range r = ib_aff_range(env, &c[i].e);
    if (c[i].eq) {
      if ((r.has_lo && r.lo > 0) || (r.has_hi && r.hi < 0)) return false;
      if (r.has_lo && r.has_hi && r.lo == 0 && r.hi == 0) continue;
    } else {
      if (r.has_hi && r.hi < 0) return false;
      if (r.has_lo && r.lo >= 0) continue;
    }
    bool dup = false;
    for (int j = 0; j < k && !dup; j++) dup = c[j].eq == c[i].eq && ib_aff_cmp(&c[j].e, &c[i].e) == 0;
    if (!dup) c[k++] = c[i];
  }
  *n = k;
  return true;
}

harp_status ib_prune_access(const ib_book *b, ib_env *env, ib_access *a) {
  ib_piece *p = ut_arena_alloc(b->arena, sizeof *p * (size_t)(a->npieces + 1));
  if (!p) return ut_fail(env->e, HARP_E_NO_MEMORY, env->node, "out of memory");
  int np = 0;
  for (int i = 0; i < a->npieces; i++) {
    ib_cons *c = ut_arena_alloc(b->arena, sizeof *c * (size_t)(a->pieces[i].ncons + 1));
    if (!c) return ut_fail(env->e, HARP_E_NO_MEMORY, env->node, "out of memory");
    int n = a->pieces[i].ncons;
    copy(c, a->pieces[i].cons, sizeof *c * (size_t)n);
    if (!prune_cons(env, c, &n)) continue;
    p[np] = a->pieces[i];
    p[np].cons = c;
    p[np].ncons = n;
    np++;
  }
  a->pieces = p;
  a->npieces = np;
  return HARP_OK;
}

static harp_status join_via(const ib_book *b, ib_env *env, const ib_access *outer, const ib_access *inner, ib_access *out) {
  int n = outer->nvia + 1 + inner->nvia;
  int *v = ut_arena_alloc(b->arena, sizeof *v * (size_t)(n + 1));
  if (!v) return ut_fail(env->e, HARP_E_NO_MEMORY, env->node, "out of memory");
  copy(v, outer->via, sizeof *v * (size_t)outer->nvia);
  v[outer->nvia] = outer->src;
  copy(v + outer->nvia + 1, inner->via, sizeof *v * (size_t)inner->nvia);
  out->via = v;
  out->nvia = n;
  return HARP_OK;
}

harp_status ib_compose(const ib_book *b, ib_env *env, const ib_access *outer, const ib_access *inner, ib_access *out) {
  ib_access r = {.src = inner->src, .nvars = outer->nvars};
  if (join_via(b, env, outer, inner, &r)) return env->e->code;
  if (outer->non_affine || inner->non_affine) {
    r.non_affine = true;
    *out = r;
    return HARP_OK;
  }
  int cap = outer->npieces * (inner->npieces > 0 ? inner->npieces : 1);
  if (cap > b->max_pieces_ib)
    return ut_fail(env->e, HARP_E_EXCESSIVE_PIECEWISE, env->node,
                   "the view chain splits into %d pieces (limit %d); materialize an intermediate", cap, b->max_pieces_ib);
  ib_piece *pc = ut_arena_alloc(b->arena, sizeof *pc * (size_t)(cap + 1));
  if (!pc) return ut_fail(env->e, HARP_E_NO_MEMORY, env->node, "out of memory");
  int np = 0;
  for (int i = 0; i < outer->npieces; i++) {
    const ib_piece *P = &outer->pieces[i];
    if (P->fill) {
      pc[np++] = *P;
      continue;
    }
    for (int j = 0; j < inner->npieces; j++) {
      const ib_piece *Q = &inner->pieces[j];
      if (P->nmap != inner->nvars)
        return ut_fail(env->e, HARP_E_INTERNAL, env->node, "composing a map of %d axes with one over %d variables", P->nmap,
                       inner->nvars);
      int n = P->ncons + Q->ncons;
      ib_cons *c = ut_arena_alloc(b->arena, sizeof *c * (size_t)(n + 1));
      if (!c) return ut_fail(env->e, HARP_E_NO_MEMORY, env->node, "out of memory");
      copy(c, P->cons, sizeof *c * (size_t)P->ncons);
      for (int k = 0; k < Q->ncons; k++) {
        c[P->ncons + k].eq = Q->cons[k].eq;
        if (ib_aff_subst(env, &c[P->ncons + k].e, &Q->cons[k].e, P->map, P->nmap)) return env->e->code;
      }
      if (!prune_cons(env, c, &n)) continue;
      ib_piece *o = &pc[np++];
      *o = (ib_piece){.ncons = n, .cons = c, .fill = Q->fill, .value = Q->value};
      if (Q->fill) continue;
      ib_aff *m = ut_arena_alloc(b->arena, sizeof *m * (size_t)(Q->nmap + 1));
      if (!m) return ut_fail(env->e, HARP_E_NO_MEMORY, env->node, "out of memory");
      for (int k = 0; k < Q->nmap; k++)
        if (ib_aff_subst(env, &m[k], &Q->map[k], P->map, P->nmap)) return env->e->code;
      o->map = m;
      o->nmap = Q->nmap;
    }
  }
  r.pieces = pc;
  r.npieces = np;
  *out = r;
  return HARP_OK;
}

harp_status ib_follow(const ib_book *b, ib_env *env, const ib_access *outer, ib_access *out) {
  if (outer->non_affine || !ib_is_movement(b, outer->src)) {
    *out = *outer;
    return HARP_OK;
  }
  return ib_compose(b, env, outer, &b->info[outer->src].acc[0], out);
}

harp_status ib_compose_node(ib_book *b, int node, harp_error *e) {
  ib_info *f = &b->info[node];
  ib_env env;
  ib_env_for(b, node, e, &env);
  for (int k = 0; k < f->nin; k++)
    if (ib_follow(b, &env, &f->in[k], &f->acc[k])) return e->code;
  return HARP_OK;
}
