/* build.c — IndexBook construction: the update rules of seed 000 §1.3.
 * Needs: a graph after tiny_infer; affine.c; compose.c (chains).
 * Gives: ib_build / ib_free / ib_env_for / ib_is_movement.
 *
 * One rule per node class, in topological order:
 *   leaf: fresh axes, box domain;  unary/CAST: identity, axes passed on;
 *   binary/WHERE: fresh axes, each operand identity with constant 0 on
 *     broadcast axes (right-aligned, else by symbol name, as tiny_infer);
 *   PERMUTE: permutation;  RESHAPE: axes matched in groups of equal
 *     products; inside a group linearize, then decompose with floordiv and
 *     mod (each surviving mod gets its guard);  EXPAND: constant 0;
 *   PAD: centre piece x-lo, the outside as fill pieces;  SHRINK: lo + step*x;
 *   FLIP: D-1-x;  VIEW: its index_map (mod -> div + guard, NegativeStride);
 *   POOL: stride*o + dilation*k;  REDUCE: reduced axes removed, recorded,
 *     kept axes renumbered;  GATHER: NonScop mark.
 * After each node its composed accesses are built (compose.c). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "index/ib_int.h"
#include "util/util.h"

#define FAIL(code, ...) ut_fail(c->e, code, c->n->id, __VA_ARGS__)

typedef struct bctx {
  harp_error *e;
  ib_book *b;
  const tiny_graph *g;
  const tiny_node *n;
  ib_info *info;
  ib_env env; /* over info's iteration variables, valid once the axes exist */
  int capcons, capmods; /* room in info->cons / info->mods */
} bctx;

bool ib_is_movement(const ib_book *b, int node) { return tiny_op_class(b->g->nodes[node].op) == TC_MOVE; }

const char *ib_axis_kind_name(ib_axis_kind k) {
  return k == IB_REDUCE ? "reduce" : k == IB_BROADCAST ? "broadcast" : "iter";
}

/* ---- sizes -------------------------------------------------------------- */
static void size_const(ib_size *s, int64_t n, const char *sym) {
  s->n = n;
  s->sym = sym;
  ib_aff_const(&s->e, n);
}

/* A Tiny arg dim (integer or symbol) as an expression; bound symbols become
 * their value. */
static harp_status dim_aff(bctx *c, tiny_dim d, ib_aff *out) {
  int64_t v;
  if (!d.sym) {
    ib_aff_const(out, d.n);
    return HARP_OK;
  }
  if (c->b->syms && tiny_symtab_get(c->b->syms, d.sym, &v)) {
    ib_aff_const(out, v);
    return HARP_OK;
  }
  ib_aff_zero(out);
  return ib_aff_add_sym(&c->env, out, d.sym, 1);
}

static harp_status dim_size(bctx *c, tiny_dim d, ib_size *s) {
  if (dim_aff(c, d, &s->e)) return c->e->code;
  s->sym = d.sym;
  s->n = ib_aff_is_const(&s->e) ? s->e.c : -1;
  if (ib_aff_is_const(&s->e) && s->e.c < 0) return FAIL(HARP_E_INVALID_ARG, "negative size");
  return HARP_OK;
}

/* A value that must be a known integer (strides, steps): bound or constant. */
static harp_status dim_const(bctx *c, tiny_dim d, const char *what, int64_t *v) {
  if (!d.sym) {
    *v = d.n;
    return HARP_OK;
  }
  if (c->b->syms && tiny_symtab_get(c->b->syms, d.sym, v)) return HARP_OK;
  return FAIL(HARP_E_UNSUPPORTED, "%s %s multiplies an index: bind it (--sym %s=N) to build the IndexBook", what, d.sym,
              d.sym);
}

static void size_from_aff(ib_size *s, const ib_aff *e, const char *sym) {
  s->e = *e;
  s->sym = sym;
  s->n = ib_aff_is_const(e) ? e->c : -1;
}

static bool size_is_one(const ib_size *s) { return s->n == 1; }

static bool size_equal(const ib_size *a, const ib_size *b) { return ib_aff_cmp(&a->e, &b->e) == 0; }

/* ---- axes and domain ---------------------------------------------------- */
static harp_status alloc_axes(bctx *c, int rank, int nred) {
  ib_info *f = c->info;
  f->rank = rank;
  f->nred = nred;
  f->nvars = rank + nred;
  if (f->nvars > IB_MAX_VARS) return FAIL(HARP_E_LIMIT, "more than %d iteration variables", IB_MAX_VARS);
  f->axes = ut_arena_alloc(c->b->arena, sizeof(ib_axis) * (size_t)(rank + nred + 1));
  if (!f->axes) return FAIL(HARP_E_NO_MEMORY, "out of memory");
  f->red = f->axes + rank;
  for (int k = 0; k < rank + nred; k++) {
    ib_axis *a = &f->axes[k];
    a->id = c->b->next_axis_id++;
    a->kind = k < rank ? IB_ITER : IB_REDUCE;
    if (k < rank) snprintf(a->name, sizeof a->name, "i%d", k);
    else snprintf(a->name, sizeof a->name, "r%d", k - rank);
  }
  return HARP_OK;
}

static void inherit(ib_axis *dst, const ib_axis *src) {
  dst->id = src->id;
  dst->size = src->size;
  dst->kind = src->kind == IB_REDUCE ? IB_ITER : src->kind;
}

static const ib_axis *var_axis(const ib_info *f, int j) { return &f->axes[j]; }

void ib_env_for(const ib_book *b, int node, harp_error *e, ib_env *env) {
  const ib_info *f = &b->info[node];
  memset(env, 0, sizeof *env);
  env->arena = b->arena;
  env->e = e;
  env->node = b->g->nodes[node].id;
  env->nvars = f->nvars;
  for (int j = 0; j < f->nvars; j++) {
    const ib_size *s = &var_axis(f, j)->size;
    env->var[j] = (ib_range){true, s->n >= 0, 0, s->n - 1};
  }
}

static harp_status push_cons(bctx *c, ib_cons *list, int *n, int cap, const ib_aff *e, bool eq) {
  if (*n >= cap) return FAIL(HARP_E_INTERNAL, "constraint list overflow");
  list[(*n)++] = (ib_cons){*e, eq};
  return HARP_OK;
}

/* The box 0 <= x_j <= size_j - 1 over every iteration variable; add_mod
 * makes room for the mod guards when a node has any (few do: an ib_cons is
 * ~600 bytes, and room for 64 guards on every node was most of the book). */
#define IB_MAX_MODS 64
static harp_status make_domain(bctx *c) {
  ib_info *f = c->info;
  c->capcons = 2 * f->nvars;
  c->capmods = 0;
  f->cons = ut_arena_alloc(c->b->arena, sizeof(ib_cons) * (size_t)(c->capcons + 1));
  f->mods = NULL;
  if (!f->cons) return FAIL(HARP_E_NO_MEMORY, "out of memory");
  f->ncons = 0;
  for (int j = 0; j < f->nvars; j++) {
    ib_aff lo, hi;
    ib_aff_var(&lo, j);
    hi = var_axis(f, j)->size.e;
    hi.c -= 1;
    if (ib_aff_add(&c->env, &hi, &lo, -1)) return c->e->code;
    if (push_cons(c, f->cons, &f->ncons, c->capcons, &lo, false) ||
        push_cons(c, f->cons, &f->ncons, c->capcons, &hi, false))
      return c->e->code;
  }
  ib_env_for(c->b, (int)(c->n - c->g->nodes), c->e, &c->env);
  return HARP_OK;
}

/* Room for one more mod and its two guard constraints (arena: the old
 * arrays stay behind, doubling keeps that small). */
static harp_status grow_mods(bctx *c) {
  ib_info *f = c->info;
  if (f->nmods < c->capmods) return HARP_OK;
  int cap = c->capmods ? 2 * c->capmods : 4;
  if (cap > IB_MAX_MODS) cap = IB_MAX_MODS;
  ib_mod *m = ut_arena_alloc(c->b->arena, sizeof(ib_mod) * (size_t)cap);
  ib_cons *k = ut_arena_alloc(c->b->arena, sizeof(ib_cons) * (size_t)(2 * f->nvars + 2 * cap + 1));
  if (!m || !k) return FAIL(HARP_E_NO_MEMORY, "out of memory");
  if (f->nmods) memcpy(m, f->mods, sizeof(ib_mod) * (size_t)f->nmods);
  memcpy(k, f->cons, sizeof(ib_cons) * (size_t)f->ncons);
  f->mods = m;
  f->cons = k;
  c->capmods = cap;
  c->capcons = 2 * f->nvars + 2 * cap;
  return HARP_OK;
}

/* Record `e mod q` (already expanded into r) and its guard 0 <= r <= q-1. */
static harp_status add_mod(bctx *c, const ib_aff *e, int64_t q, const ib_aff *r) {
  ib_info *f = c->info;
  if (f->nmods >= IB_MAX_MODS) return FAIL(HARP_E_EXCESSIVE_PIECEWISE, "more than %d guarded remainders", IB_MAX_MODS);
  if (grow_mods(c)) return c->e->code;
  f->mods[f->nmods++] = (ib_mod){*e, q};
  ib_aff hi;
  ib_aff_const(&hi, q - 1);
  if (ib_aff_add(&c->env, &hi, r, -1)) return c->e->code;
  if (push_cons(c, f->cons, &f->ncons, c->capcons, r, false) || push_cons(c, f->cons, &f->ncons, c->capcons, &hi, false))
    return c->e->code;
  return HARP_OK;
}

/* mod with its guard when a division survives. */
static harp_status mod_guarded(bctx *c, ib_aff *out, const ib_aff *e, int64_t q) {
  bool made;
  if (ib_aff_mod(&c->env, out, e, q, &made)) return c->e->code;
  return made ? add_mod(c, e, q, out) : HARP_OK;
}

/* ---- step maps ---------------------------------------------------------- */
/* One read piece without guard: the common case. */
static harp_status single_map(bctx *c, int k, int src, ib_aff **map, int nmap) {
  ib_piece *p = ut_arena_alloc(c->b->arena, sizeof *p);
  ib_aff *m = ut_arena_alloc(c->b->arena, sizeof(ib_aff) * (size_t)(nmap + 1));
  if (!p || !m) return FAIL(HARP_E_NO_MEMORY, "out of memory");
  p->nmap = nmap;
  p->map = m;
  *map = m;
  ib_access *a = &c->info->in[k];
  memset(a, 0, sizeof *a);
  a->src = src;
  a->nvars = c->info->nvars;
  a->npieces = 1;
  a->pieces = p;
  return HARP_OK;
}

static harp_status identity_map(bctx *c, int k, int src) {
  ib_aff *m;
  int r = c->b->info[src].rank;
  if (single_map(c, k, src, &m, r)) return c->e->code;
  for (int j = 0; j < r; j++) ib_aff_var(&m[j], j);
  return HARP_OK;
}

static const ib_info *src_info(bctx *c, int k) { return &c->b->info[c->n->src[k].node]; }

/* ---- rules -------------------------------------------------------------- */
static harp_status rule_leaf(bctx *c) {
  if (c->n->op == TINY_CONST) return alloc_axes(c, 0, 0);
  const tiny_shape *s = &c->n->a.input.shape;
  if (alloc_axes(c, s->rank, 0)) return c->e->code;
  for (int j = 0; j < s->rank; j++)
    if (dim_size(c, s->d[j], &c->info->axes[j].size)) return c->e->code;
  return HARP_OK;
}

static harp_status rule_unary(bctx *c) {
  const ib_info *x = src_info(c, 0);
  if (alloc_axes(c, x->rank, 0)) return c->e->code;
  for (int j = 0; j < x->rank; j++) inherit(&c->info->axes[j], &x->axes[j]), c->info->axes[j].kind = IB_ITER;
  return HARP_OK;
}

/* Operand axis a -> output axis (right-aligned; by symbol name when the
 * names conflict, as tiny_infer does); -1 when dropped.  When the names do
 * not place every axis of size other than 1 (two names of one size: a
 * derived symbol beside another expression of the same value), the axes
 * stay right-aligned, as tiny_infer keeps them. */
static void align(const ib_info *op, const tiny_shape *out, const tiny_shape *ops, int *map) {
  int r = op->rank, R = out->rank;
  bool conflict = false, mismatch = false;
  for (int a = 0; a < r; a++) {
    const tiny_dim *s = &ops->d[a], *t = &out->d[a + R - r];
    if (s->n != 1 && t->n != 1 && s->sym && t->sym && strcmp(s->sym, t->sym) != 0) conflict = true;
    if (s->n >= 0 && t->n >= 0 && s->n != 1 && s->n != t->n) conflict = mismatch = true;
    map[a] = a + R - r;
  }
  if (!conflict) return;
  int by_name[TINY_MAX_RANK], last = -1;
  bool placed = true;
  for (int a = 0; a < r; a++) {
    by_name[a] = -1;
    for (int j = last + 1; ops->d[a].sym && j < R; j++)
      if (out->d[j].sym && strcmp(out->d[j].sym, ops->d[a].sym) == 0) {
        by_name[a] = last = j;
        break;
      }
    placed &= by_name[a] >= 0 || ops->d[a].n == 1;
  }
  if (!placed && !mismatch) return; /* names differ, sizes agree: right-aligned */
  memcpy(map, by_name, sizeof by_name[0] * (size_t)r);
}

static harp_status rule_elementwise(bctx *c) {
  const tiny_node *n = c->n;
  int R = n->shape.rank;
  if (alloc_axes(c, R, 0)) return c->e->code;
  bool have[TINY_MAX_RANK] = {0};
  int maps[TINY_MAX_SRC][TINY_MAX_RANK];
  for (int k = 0; k < n->nsrc; k++) {
    const ib_info *x = src_info(c, k);
    align(x, &n->shape, &c->g->nodes[n->src[k].node].shape, maps[k]);
    for (int a = 0; a < x->rank; a++) {
      int m = maps[k][a];
      if (m < 0 || (have[m] && !size_is_one(&c->info->axes[m].size))) continue;
      if (!have[m] || !size_is_one(&x->axes[a].size)) c->info->axes[m].size = x->axes[a].size, have[m] = true;
    }
  }
  for (int m = 0; m < R; m++)
    if (!have[m]) size_const(&c->info->axes[m].size, 1, NULL);
  if (make_domain(c)) return c->e->code;
  for (int k = 0; k < n->nsrc; k++) {
    const ib_info *x = src_info(c, k);
    ib_aff *mp;
    if (single_map(c, k, n->src[k].node, &mp, x->rank)) return c->e->code;
    for (int a = 0; a < x->rank; a++) {
      int m = maps[k][a];
      if (m < 0 || (size_is_one(&x->axes[a].size) && !size_is_one(&c->info->axes[m].size))) ib_aff_const(&mp[a], 0);
      else ib_aff_var(&mp[a], m);
    }
  }
  return HARP_OK;
}

static harp_status rule_permute(bctx *c) {
  const ib_info *x = src_info(c, 0);
  const tiny_arg_permute *p = &c->n->a.permute;
  if (p->n != x->rank) return FAIL(HARP_E_INVALID_PERMUTATION, "perm has %d entries for rank %d", p->n, x->rank);
  if (alloc_axes(c, x->rank, 0)) return c->e->code;
  for (int k = 0; k < x->rank; k++) inherit(&c->info->axes[k], &x->axes[p->perm[k]]);
  if (make_domain(c)) return c->e->code;
  ib_aff *m;
  if (single_map(c, 0, c->n->src[0].node, &m, x->rank)) return c->e->code;
  for (int k = 0; k < x->rank; k++) ib_aff_var(&m[p->perm[k]], k);
  return HARP_OK;
}

/* A size as a monomial coef * product(atoms); an atom is a symbol or, for a
 * size that is no monomial (H + pt + pb), the whole size. */
typedef struct mono {
  int64_t coef;
  int n;
  const ib_size *atom[2 * TINY_MAX_RANK * IB_MAX_SYMS];
  const char *name[2 * TINY_MAX_RANK * IB_MAX_SYMS];
} mono;

static bool mono_mul(mono *m, const ib_size *s) {
  const ib_aff *e = &s->e;
  bool plain = e->ndiv == 0 && e->c == 0 && e->nsym == 1 && e->sym[0].k == 1;
  if (ib_aff_is_const(e)) return ut_mul_ok(m->coef, e->c, &m->coef);
  if (m->n >= UT_ARRAY_LEN(m->atom)) return false;
  m->atom[m->n] = plain ? NULL : s;
  m->name[m->n] = plain ? e->sym[0].name : NULL;
  m->n++;
  return true;
}

/* Does a divide b (coefficient and atoms)?  Equal when both ways. */
static bool mono_divides(const mono *a, const mono *b) {
  if (a->coef == 0 || b->coef % a->coef) return false;
  bool used[UT_ARRAY_LEN(b->atom)];
  memset(used, 0, sizeof used);
  for (int i = 0; i < a->n; i++) {
    int j = 0;
    for (; j < b->n; j++) {
      if (used[j]) continue;
      bool same = a->name[i] ? b->name[j] && strcmp(a->name[i], b->name[j]) == 0
                             : !b->name[j] && size_equal(a->atom[i], b->atom[j]);
      if (same) break;
    }
    if (j == b->n) return false;
    used[j] = true;
  }
  return true;
}

static harp_status rule_reshape(bctx *c) {
  const ib_info *x = src_info(c, 0);
  const tiny_shape *rs = &c->n->a.reshape.shape;
  int R = rs->rank, r = x->rank;
  if (alloc_axes(c, R, 0)) return c->e->code;
  ib_info *f = c->info;
  for (int k = 0; k < R; k++)
    if (dim_size(c, rs->d[k], &f->axes[k].size)) return c->e->code;
  ib_aff *m;
  if (single_map(c, 0, c->n->src[0].node, &m, r)) return c->e->code;
  for (int j = 0; j < r; j++) ib_aff_const(&m[j], 0);
  bool empty = false;
  for (int j = 0; j < r; j++) empty |= x->axes[j].size.n == 0;
  for (int k = 0; k < R; k++) empty |= f->axes[k].size.n == 0;
  if (make_domain(c)) return c->e->code;
  if (empty) return HARP_OK; /* no element: any map will do */
  int A[TINY_MAX_RANK], B[TINY_MAX_RANK], na = 0, nb = 0;
  for (int j = 0; j < r; j++)
    if (!size_is_one(&x->axes[j].size)) A[na++] = j;
  for (int k = 0; k < R; k++)
    if (!size_is_one(&f->axes[k].size)) B[nb++] = k;
  int ia = 0, ib = 0;
  while (ia < na || ib < nb) {
    if (ia == na || ib == nb)
      return FAIL(HARP_E_UNSUPPORTED, "RESHAPE: cannot match the input axes with the result axes (bind the symbols)");
    int a0 = ia, b0 = ib;
    mono pa = {1, 0, {0}, {0}}, pb = {1, 0, {0}, {0}};
    if (!mono_mul(&pa, &x->axes[A[ia++]].size) || !mono_mul(&pb, &f->axes[B[ib++]].size))
      return FAIL(HARP_E_LIMIT, "RESHAPE sizes overflow");
    for (;;) {
      bool ab = mono_divides(&pa, &pb), ba = mono_divides(&pb, &pa);
      if (ab && ba) break;
      bool grow_a = ab ? true : ba ? false : (pa.n == pb.n ? pa.coef <= pb.coef : pa.n < pb.n);
      if (grow_a ? ia == na : ib == nb) grow_a = !grow_a;
      if (grow_a ? ia == na : ib == nb)
        return FAIL(HARP_E_UNSUPPORTED, "RESHAPE: cannot match the input axes with the result axes (bind the symbols)");
      if (!(grow_a ? mono_mul(&pa, &x->axes[A[ia++]].size) : mono_mul(&pb, &f->axes[B[ib++]].size)))
        return FAIL(HARP_E_LIMIT, "RESHAPE sizes overflow");
    }
    if (ia - a0 == 1 && ib - b0 == 1) { /* one axis to one axis */
      ib_aff_var(&m[A[a0]], B[b0]);
      ib_size keep = f->axes[B[b0]].size;
      inherit(&f->axes[B[b0]], &x->axes[A[a0]]);
      if (keep.sym) f->axes[B[b0]].size.sym = keep.sym;
      continue;
    }
    /* Linearize the result axes of the group, decompose into the input axes.
     * Every stride is a product of inner sizes, which must be known. */
    ib_aff L, stride[TINY_MAX_RANK];
    ib_aff_zero(&L);
    int64_t s = 1;
    for (int t = ib - 1; t >= b0; t--) {
      ib_aff v;
      ib_aff_var(&v, B[t]);
      if (ib_aff_add(&c->env, &L, &v, s)) return c->e->code;
      if (t > b0) {
        const ib_size *sz = &f->axes[B[t]].size;
        if (sz->n < 0 || !ut_mul_ok(s, sz->n, &s))
          return FAIL(HARP_E_UNSUPPORTED, "RESHAPE regroups axes of unbound size %s (not affine): bind the symbols (--sym) to build the IndexBook",
                      sz->sym ? sz->sym : "?");
      }
    }
    s = 1;
    for (int t = ia - 1; t >= a0; t--) {
      ib_aff_const(&stride[t - a0], s);
      const ib_size *sz = &x->axes[A[t]].size;
      if (t > a0 && (sz->n < 0 || !ut_mul_ok(s, sz->n, &s)))
        return FAIL(HARP_E_UNSUPPORTED, "RESHAPE regroups axes of unbound size %s (not affine): bind the symbols (--sym) to build the IndexBook",
                    sz->sym ? sz->sym : "?");
    }
    for (int t = a0; t < ia; t++) {
      ib_aff q;
      if (ib_aff_floordiv(&c->env, &q, &L, stride[t - a0].c)) return c->e->code;
      if (t == a0) m[A[t]] = q;
      else if (mod_guarded(c, &m[A[t]], &q, x->axes[A[t]].size.n)) return c->e->code;
    }
  }
  return HARP_OK;
}

static harp_status rule_expand(bctx *c) {
  const ib_info *x = src_info(c, 0);
  const tiny_arg_expand *a = &c->n->a.expand;
  int R = a->shape.rank, r = x->rank;
  if (alloc_axes(c, R, 0)) return c->e->code;
  ib_info *f = c->info;
  for (int k = 0; k < R; k++)
    if (dim_size(c, a->shape.d[k], &f->axes[k].size)) return c->e->code;
  int map[TINY_MAX_RANK];
  for (int j = 0; j < r; j++) map[j] = (a->has_bd && r < R) ? a->bd[j] : j + R - r;
  if (r > R) return FAIL(HARP_E_BROADCAST_MISMATCH, "EXPAND to a smaller rank");
  bool from[TINY_MAX_RANK] = {0};
  for (int j = 0; j < r; j++) {
    if (map[j] < 0 || map[j] >= R) return FAIL(HARP_E_INVALID_ARG, "broadcast_dimensions out of range");
    from[map[j]] = true;
    ib_axis *o = &f->axes[map[j]];
    if (size_is_one(&x->axes[j].size) && !size_is_one(&o->size)) o->kind = IB_BROADCAST;
    else {
      ib_size keep = o->size;
      inherit(o, &x->axes[j]);
      if (keep.sym && !o->size.sym) o->size.sym = keep.sym;
    }
  }
  for (int k = 0; k < R; k++)
    if (!from[k] && !size_is_one(&f->axes[k].size)) f->axes[k].kind = IB_BROADCAST;
  if (make_domain(c)) return c->e->code;
  ib_aff *m;
  if (single_map(c, 0, c->n->src[0].node, &m, r)) return c->e->code;
  for (int j = 0; j < r; j++) {
    if (f->axes[map[j]].kind == IB_BROADCAST && size_is_one(&x->axes[j].size)) ib_aff_const(&m[j], 0);
    else ib_aff_var(&m[j], map[j]);
  }
  return HARP_OK;
}

static harp_status rule_pad(bctx *c) {
  const ib_info *x = src_info(c, 0);
  const tiny_arg_pad *a = &c->n->a.pad;
  int r = x->rank;
  if (a->n != r) return FAIL(HARP_E_INVALID_ARG, "pad has %d entries for rank %d", a->n, r);
  if (alloc_axes(c, r, 0)) return c->e->code;
  ib_info *f = c->info;
  ib_aff lo[TINY_MAX_RANK], hi[TINY_MAX_RANK];
  int P[TINY_MAX_RANK], np = 0;
  for (int j = 0; j < r; j++) {
    if (dim_aff(c, a->lo[j], &lo[j]) || dim_aff(c, a->hi[j], &hi[j])) return c->e->code;
    bool zero = ib_aff_is_const(&lo[j]) && lo[j].c == 0 && ib_aff_is_const(&hi[j]) && hi[j].c == 0;
    if ((ib_aff_is_const(&lo[j]) && lo[j].c < 0) || (ib_aff_is_const(&hi[j]) && hi[j].c < 0))
      return FAIL(HARP_E_INVALID_ARG, "pad amounts must be >= 0");
    if (zero) {
      inherit(&f->axes[j], &x->axes[j]);
      continue;
    }
    P[np++] = j;
    ib_aff e = x->axes[j].size.e;
    if (ib_aff_add(&c->env, &e, &lo[j], 1) || ib_aff_add(&c->env, &e, &hi[j], 1)) return c->e->code;
    size_from_aff(&f->axes[j].size, &e, NULL);
  }
  if (make_domain(c)) return c->e->code;
  /* Pieces: the centre, then per padded axis t its low and high outside with
   * axes before t inside (pairwise disjoint, together the whole box). */
  int maxp = 1 + 2 * np;
  ib_piece *pc = ut_arena_alloc(c->b->arena, sizeof *pc * (size_t)maxp);
  ib_cons *cons = ut_arena_alloc(c->b->arena, sizeof *cons * (size_t)(maxp * (2 * np + 1) + 1));
  ib_aff *m = ut_arena_alloc(c->b->arena, sizeof *m * (size_t)(r + 1));
  if (!pc || !cons || !m) return FAIL(HARP_E_NO_MEMORY, "out of memory");
  ib_aff in_lo[TINY_MAX_RANK], in_hi[TINY_MAX_RANK], out_lo[TINY_MAX_RANK], out_hi[TINY_MAX_RANK];
  for (int t = 0; t < np; t++) {
    int j = P[t];
    ib_aff v;
    ib_aff_var(&v, j);
    in_lo[t] = v; /* x - lo >= 0 */
    if (ib_aff_add(&c->env, &in_lo[t], &lo[j], -1)) return c->e->code;
    in_hi[t] = lo[j]; /* lo + D - 1 - x >= 0 */
    in_hi[t].c -= 1;
    if (ib_aff_add(&c->env, &in_hi[t], &x->axes[j].size.e, 1) || ib_aff_add(&c->env, &in_hi[t], &v, -1))
      return c->e->code;
    ib_aff_const(&out_lo[t], -1); /* lo - 1 - x >= 0 */
    if (ib_aff_add(&c->env, &out_lo[t], &in_lo[t], -1)) return c->e->code;
    ib_aff_const(&out_hi[t], -1); /* x - lo - D >= 0 */
    if (ib_aff_add(&c->env, &out_hi[t], &in_hi[t], -1)) return c->e->code;
  }
  for (int j = 0; j < r; j++) {
    ib_aff_var(&m[j], j);
    if (ib_aff_add(&c->env, &m[j], &lo[j], -1)) return c->e->code;
  }
  int npc = 0, nc = 0;
  pc[npc] = (ib_piece){.ncons = 0, .cons = cons + nc, .map = m, .nmap = r};
  for (int t = 0; t < np; t++) cons[nc++] = (ib_cons){in_lo[t], false}, cons[nc++] = (ib_cons){in_hi[t], false};
  pc[npc].ncons = 2 * np;
  npc++;
  for (int t = 0; t < np; t++)
    for (int side = 0; side < 2; side++) {
      const ib_aff *amount = side ? &hi[P[t]] : &lo[P[t]];
      if (ib_aff_is_const(amount) && amount->c == 0) continue;
      ib_piece *p = &pc[npc++];
      *p = (ib_piece){.cons = cons + nc, .fill = true, .value = a->value};
      for (int u = 0; u < t; u++) cons[nc++] = (ib_cons){in_lo[u], false}, cons[nc++] = (ib_cons){in_hi[u], false};
      cons[nc++] = (ib_cons){side ? out_hi[t] : out_lo[t], false};
      p->ncons = 2 * t + 1;
    }
  ib_access *in = &f->in[0];
  *in = (ib_access){.src = c->n->src[0].node, .nvars = r, .npieces = npc, .pieces = pc};
  return ib_prune_access(c->b, &c->env, in);
}

static harp_status rule_shrink(bctx *c) {
  const ib_info *x = src_info(c, 0);
  const tiny_arg_shrink *a = &c->n->a.shrink;
  int r = x->rank;
  if (a->n != r) return FAIL(HARP_E_INVALID_ARG, "shrink has %d entries for rank %d", a->n, r);
  if (alloc_axes(c, r, 0)) return c->e->code;
  ib_info *f = c->info;
  ib_aff lo[TINY_MAX_RANK];
  int64_t step[TINY_MAX_RANK];
  for (int j = 0; j < r; j++) {
    ib_aff hi;
    step[j] = 1;
    if (dim_aff(c, a->lo[j], &lo[j]) || dim_aff(c, a->hi[j], &hi)) return c->e->code;
    if (a->has_step && dim_const(c, a->step[j], "SHRINK step", &step[j])) return c->e->code;
    if (step[j] < 1) return FAIL(HARP_E_NEGATIVE_STRIDE, "SHRINK step on axis %d is %" PRId64 "; use FLIP to reverse", j, step[j]);
    ib_aff len = hi, sz; /* ceil((hi - lo) / step) */
    if (ib_aff_add(&c->env, &len, &lo[j], -1)) return c->e->code;
    len.c += step[j] - 1;
    if (ib_aff_floordiv(&c->env, &sz, &len, step[j])) return c->e->code;
    if (ib_aff_is_const(&sz) && sz.c < 0) return FAIL(HARP_E_INVALID_ARG, "SHRINK axis %d: lo > hi", j);
    bool same = ib_aff_cmp(&sz, &x->axes[j].size.e) == 0 && ib_aff_is_const(&lo[j]) && lo[j].c == 0;
    if (same) inherit(&f->axes[j], &x->axes[j]);
    else size_from_aff(&f->axes[j].size, &sz, NULL);
  }
  if (make_domain(c)) return c->e->code;
  ib_aff *m;
  if (single_map(c, 0, c->n->src[0].node, &m, r)) return c->e->code;
  for (int j = 0; j < r; j++) {
    ib_aff v;
    ib_aff_var(&v, j);
    m[j] = lo[j];
    if (ib_aff_add(&c->env, &m[j], &v, step[j])) return c->e->code;
  }
  return HARP_OK;
}

static harp_status rule_flip(bctx *c) {
  const ib_info *x = src_info(c, 0);
  const tiny_arg_flip *a = &c->n->a.flip;
  int r = x->rank;
  bool flip[TINY_MAX_RANK] = {0};
  for (int i = 0; i < a->n; i++) {
    if (a->axes[i] < 0 || a->axes[i] >= r) return FAIL(HARP_E_INVALID_ARG, "FLIP axis %d is out of range", a->axes[i]);
    flip[a->axes[i]] = true;
  }
  if (alloc_axes(c, r, 0)) return c->e->code;
  for (int j = 0; j < r; j++) {
    int id = c->info->axes[j].id;
    inherit(&c->info->axes[j], &x->axes[j]);
    if (flip[j]) c->info->axes[j].id = id; /* reversed: a new axis */
  }
  if (make_domain(c)) return c->e->code;
  ib_aff *m;
  if (single_map(c, 0, c->n->src[0].node, &m, r)) return c->e->code;
  for (int j = 0; j < r; j++) {
    ib_aff v;
    ib_aff_var(&v, j);
    if (!flip[j]) {
      m[j] = v;
      continue;
    }
    m[j] = x->axes[j].size.e; /* D - 1 - x */
    m[j].c -= 1;
    if (ib_aff_add(&c->env, &m[j], &v, -1)) return c->e->code;
  }
  return HARP_OK;
}

/* Sign walk of a VIEW expression: does some variable get a negative
 * coefficient?  (FLIP is the way to reverse an axis.) */
static bool negative_stride(const tiny_expr *x, const tiny_symtab *syms, int sign) {
  int64_t v;
  switch (x->k) {
  case TX_VAR: return sign < 0;
  case TX_CONST:
  case TX_SYM: return false;
  case TX_ADD: return negative_stride(x->a, syms, sign) || negative_stride(x->b, syms, sign);
  case TX_MUL:
    if (tiny_expr_eval(x->a, NULL, syms, &v)) return v != 0 && negative_stride(x->b, syms, v < 0 ? -sign : sign);
    if (tiny_expr_eval(x->b, NULL, syms, &v)) return v != 0 && negative_stride(x->a, syms, v < 0 ? -sign : sign);
    return negative_stride(x->a, syms, sign) || negative_stride(x->b, syms, sign);
  case TX_FLOORDIV:
  case TX_MOD: return negative_stride(x->a, syms, sign);
  }
  return false;
}

static harp_status view_expr(bctx *c, const tiny_expr *x, ib_aff *out, int depth) {
  ib_aff a, b;
  if (depth > 64) return FAIL(HARP_E_LIMIT, "index_map nested too deeply");
  switch (x->k) {
  case TX_CONST: ib_aff_const(out, x->c); return HARP_OK;
  case TX_VAR:
    if (x->var < 0 || x->var >= c->info->nvars) return FAIL(HARP_E_INVALID_ARG, "index_map uses i%d out of range", x->var);
    ib_aff_var(out, x->var);
    return HARP_OK;
  case TX_SYM: return dim_aff(c, tiny_dim_sym(x->sym), out);
  default: break;
  }
  if (view_expr(c, x->a, &a, depth + 1) || view_expr(c, x->b, &b, depth + 1)) return c->e->code;
  switch (x->k) {
  case TX_ADD:
    *out = a;
    return ib_aff_add(&c->env, out, &b, 1);
  case TX_MUL:
    if (!ib_aff_is_const(&a) && !ib_aff_is_const(&b)) {
      bool vars = ib_aff_nvars(&a) || ib_aff_nvars(&b) || a.ndiv || b.ndiv;
      if (!vars || (a.nsym && !ib_aff_nvars(&a) && !a.ndiv) || (b.nsym && !ib_aff_nvars(&b) && !b.ndiv))
        return FAIL(HARP_E_UNSUPPORTED, "index_map multiplies an index by an unbound symbol: bind it");
      return FAIL(HARP_E_NON_SCOP, "index_map multiplies two indices: not affine");
    }
    if (ib_aff_is_const(&a)) {
      ib_aff_zero(out);
      return ib_aff_add(&c->env, out, &b, a.c);
    }
    ib_aff_zero(out);
    return ib_aff_add(&c->env, out, &a, b.c);
  case TX_FLOORDIV:
  case TX_MOD:
    if (!ib_aff_is_const(&b)) return FAIL(HARP_E_UNSUPPORTED, "index_map divides by an unbound symbol: bind it");
    if (b.c <= 0) return FAIL(HARP_E_INVALID_ARG, "index_map divides by %" PRId64, b.c);
    if (x->k == TX_FLOORDIV) return ib_aff_floordiv(&c->env, out, &a, b.c);
    return mod_guarded(c, out, &a, b.c);
  default: return FAIL(HARP_E_INTERNAL, "bad expression");
  }
}

static harp_status rule_view(bctx *c) {
  const ib_info *x = src_info(c, 0);
  const tiny_arg_view *a = &c->n->a.view;
  if (a->n != x->rank) return FAIL(HARP_E_INVALID_ARG, "index_map has %d entries for rank %d", a->n, x->rank);
  if (alloc_axes(c, a->shape.rank, 0)) return c->e->code;
  for (int k = 0; k < a->shape.rank; k++)
    if (dim_size(c, a->shape.d[k], &c->info->axes[k].size)) return c->e->code;
  if (make_domain(c)) return c->e->code;
  ib_aff *m;
  if (single_map(c, 0, c->n->src[0].node, &m, x->rank)) return c->e->code;
  for (int j = 0; j < x->rank; j++) {
    if (!a->map[j]) return FAIL(HARP_E_INVALID_ARG, "index_map entry %d is missing", j);
    if (negative_stride(a->map[j], c->b->syms, 1)) {
      char buf[256];
      tiny_expr_print(a->map[j], buf, sizeof buf);
      return FAIL(HARP_E_NEGATIVE_STRIDE, "index_map entry %d (%s) walks an axis backwards; use FLIP for reversal", j, buf);
    }
    if (view_expr(c, a->map[j], &m[j], 0)) return c->e->code;
  }
  return HARP_OK;
}

static harp_status rule_pool(bctx *c) {
  const ib_info *x = src_info(c, 0);
  const tiny_arg_pool *a = &c->n->a.pool;
  int r = x->rank, lead = r - a->n;
  if (a->n < 1 || a->n > r || r + a->n > IB_MAX_VARS) return FAIL(HARP_E_INVALID_ARG, "POOL window has %d axes for rank %d", a->n, r);
  if (alloc_axes(c, r + a->n, 0)) return c->e->code;
  ib_info *f = c->info;
  int64_t s[TINY_MAX_RANK], d[TINY_MAX_RANK];
  for (int j = 0; j < lead; j++) inherit(&f->axes[j], &x->axes[j]);
  for (int t = 0; t < a->n; t++) {
    ib_aff k, span, o;
    if (dim_const(c, a->stride[t], "POOL stride", &s[t]) || dim_const(c, a->dilation[t], "POOL dilation", &d[t]))
      return c->e->code;
    if (s[t] < 1 || d[t] < 1) return FAIL(HARP_E_INVALID_ARG, "POOL stride and dilation must be >= 1");
    if (dim_size(c, a->kernel[t], &f->axes[r + t].size)) return c->e->code;
    k = f->axes[r + t].size.e; /* o = floor((D - d*(k-1) - 1) / s) + 1 */
    span = x->axes[lead + t].size.e;
    span.c += d[t] - 1;
    if (ib_aff_add(&c->env, &span, &k, -d[t]) || ib_aff_floordiv(&c->env, &o, &span, s[t])) return c->e->code;
    o.c += 1;
    size_from_aff(&f->axes[lead + t].size, &o, NULL);
  }
  if (make_domain(c)) return c->e->code;
  ib_aff *m;
  if (single_map(c, 0, c->n->src[0].node, &m, r)) return c->e->code;
  for (int j = 0; j < r; j++) {
    ib_aff_var(&m[j], j);
    if (j < lead) continue;
    m[j].v[j] = s[j - lead];   /* stride*o + dilation*k */
    m[j].v[r + j - lead] = d[j - lead];
  }
  return HARP_OK;
}

static harp_status rule_reduce(bctx *c) {
  const ib_info *x = src_info(c, 0);
  const tiny_arg_reduce *a = &c->n->a.reduce;
  bool red[TINY_MAX_RANK] = {0};
  for (int i = 0; i < a->n; i++) {
    int ax = a->axis_idx[i];
    if (ax < 0 || ax >= x->rank) return FAIL(HARP_E_INTERNAL, "REDUCE axes not inferred");
    red[ax] = true;
  }
  if (alloc_axes(c, x->rank - a->n, a->n)) return c->e->code;
  ib_info *f = c->info;
  int var[TINY_MAX_RANK], k = 0, m = 0;
  for (int j = 0; j < x->rank; j++) {
    if (red[j]) {
      var[j] = f->rank + m;
      ib_axis *ax = &f->red[m++];
      inherit(ax, &x->axes[j]);
      ax->kind = IB_REDUCE;
    } else {
      var[j] = k;
      inherit(&f->axes[k++], &x->axes[j]);
    }
  }
  if (make_domain(c)) return c->e->code;
  ib_aff *mp;
  if (single_map(c, 0, c->n->src[0].node, &mp, x->rank)) return c->e->code;
  for (int j = 0; j < x->rank; j++) ib_aff_var(&mp[j], var[j]);
  return HARP_OK;
}

static harp_status rule_gather(bctx *c) {
  const ib_info *ix = src_info(c, 1);
  int axis = c->n->a.gather.axis;
  if (alloc_axes(c, ix->rank, 0)) return c->e->code;
  for (int j = 0; j < ix->rank; j++) inherit(&c->info->axes[j], &ix->axes[j]), c->info->axes[j].kind = IB_ITER;
  if (make_domain(c) || identity_map(c, 1, c->n->src[1].node)) return c->e->code;
  c->info->in[0] = (ib_access){.src = c->n->src[0].node, .nvars = c->info->nvars, .non_affine = true};
  c->info->non_scop = ut_arena_printf(c->b->arena, "GATHER reads axis %d at data-dependent positions", axis);
  return c->info->non_scop ? HARP_OK : FAIL(HARP_E_NO_MEMORY, "out of memory");
}

/* Sizes the graph knows must agree with ours: catches rule bugs early. */
static harp_status check_sizes(bctx *c) {
  const tiny_shape *s = &c->n->shape;
  if (s->rank != c->info->rank) return FAIL(HARP_E_INTERNAL, "IndexBook rank %d != shape rank %d", c->info->rank, s->rank);
  for (int j = 0; j < s->rank; j++) {
    const ib_size *z = &c->info->axes[j].size;
    if (s->d[j].n >= 0 && z->n >= 0 && s->d[j].n != z->n)
      return FAIL(HARP_E_INTERNAL, "IndexBook size %" PRId64 " != shape size %" PRId64 " on axis %d", z->n, s->d[j].n, j);
    if (!z->sym && s->d[j].sym) c->info->axes[j].size.sym = s->d[j].sym;
  }
  return HARP_OK;
}

static harp_status build_node(bctx *c) {
  const tiny_node *n = c->n;
  for (int k = 0; k < n->nsrc; k++)
    if (n->src[k].node < 0) return FAIL(HARP_E_UNSUPPORTED, "immediate operand: run tiny_prepare first");
  c->info->nin = n->nsrc;
  harp_status s;
  switch (tiny_op_class(n->op)) {
  case TC_LEAF: s = rule_leaf(c); if (!s) s = make_domain(c); break;
  case TC_UNARY:
  case TC_CAST: s = rule_unary(c); if (!s) s = make_domain(c); if (!s) s = identity_map(c, 0, n->src[0].node); break;
  case TC_BINARY:
  case TC_TERNARY: s = rule_elementwise(c); break;
  case TC_REDUCE: s = rule_reduce(c); break;
  case TC_GATHER: s = rule_gather(c); break;
  case TC_MOVE:
    switch (n->op) {
    case TINY_PERMUTE: s = rule_permute(c); break;
    case TINY_RESHAPE: s = rule_reshape(c); break;
    case TINY_EXPAND: s = rule_expand(c); break;
    case TINY_PAD: s = rule_pad(c); break;
    case TINY_SHRINK: s = rule_shrink(c); break;
    case TINY_FLIP: s = rule_flip(c); break;
    case TINY_VIEW: s = rule_view(c); break;
    case TINY_POOL: s = rule_pool(c); break;
    default: s = FAIL(HARP_E_INTERNAL, "unknown movement op");
    }
    break;
  default: s = FAIL(HARP_E_INTERNAL, "unknown op class");
  }
  if (s) return s;
  if (check_sizes(c)) return c->e->code;
  return ib_compose_node(c->b, (int)(n - c->g->nodes), c->e);
}

harp_status ib_build(harp_error *e, const tiny_graph *g, const tiny_symtab *syms, const ib_options *opt, ib_book **out) {
  *out = NULL;
  ib_book *b = ut_xcalloc(1, sizeof *b);
  if (!b) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  b->arena = ut_arena_new_big();
  b->info = ut_xcalloc((size_t)g->n + 1, sizeof *b->info);
  if (!b->arena || !b->info) {
    ib_free(b);
    return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  }
  b->g = g;
  b->syms = syms;
  b->n = g->n;
  b->max_pieces_ib = opt && opt->max_pieces_ib > 0 ? opt->max_pieces_ib : 1024;
  for (int i = 0; i < g->n; i++) {
    bctx c = {e, b, g, &g->nodes[i], &b->info[i], {0}, 0, 0};
    c.info->node = i;
    c.env.arena = b->arena;
    c.env.e = e;
    c.env.node = g->nodes[i].id;
    if (build_node(&c)) {
      ib_free(b);
      return e->code;
    }
  }
  *out = b;
  return HARP_OK;
}

void ib_free(ib_book *b) {
  if (!b) return;
  ut_arena_free(b->arena);
  free(b->info);
  free(b);
}
