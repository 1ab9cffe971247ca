/* acc_cache.c — access relations reused across blocks of the same shape.
 * A model repeats its layers (MobileNetV2's blocks, a detector's necks):
 * the same domain read through the same pieces gives the same simplified
 * relation, only the tuple and variable names differ.  isl's operations do
 * not look at names (without parameters nothing aligns by name), so a
 * relation built once is copied and renamed for every later block with the
 * same key — coalescing and gisting, most of poly_build's time, run once
 * per distinct shape.
 * The key is the IndexBook's description of what poly_make_access builds:
 * the domain's constraints, the range's rank, every piece (fill value,
 * constraints, map).  Blocks with parameters (unbound symbols) and the
 * write of an empty reduction are not cached.
 * A dependence between two cached relations is fixed by their two keys:
 * deps.c reuses those the same way, and poly_can_compute_at (region
 * formation's question, asked of every candidate) its answers.
 * Needs: poly_int.h (the view, its arena).  Gives: poly_acc_key,
 * poly_acc_cache_get, poly_acc_cache_put, poly_flow_key,
 * poly_flow_cache_get, poly_flow_cache_put, poly_acc_cache_free,
 * poly_halo_cache_new, poly_halo_cache_get, poly_halo_cache_put,
 * poly_halo_cache_free, poly_domain_cached (a block's domain, the same way). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harp/polycore.h"
#include "poly/poly_int.h"
#include "util/util.h"

struct poly_halo_cache {
  ut_strmap keys; /* key (arena) -> index in v */
  poly_halo *v;
  int n, cap;
};

struct poly_acc_entry {
  isl_map *map; /* owned, with the names of the block that built it */
  isl_set *set; /* owned: a domain (poly_domain_cached) */
  int nfill, pieces; /* a domain: pieces 0 not asked, 1 not empty, 2 empty */
  poly_fill fill[POLY_MAX_FILLS]; /* sets owned */
};

/* Integer v appended to s in hexadecimal after the separator sep (keys
 * are built for every access: no printf). */
static void put_int(ut_str *s, char sep, int64_t v) {
  char buf[20];
  int n = sizeof buf;
  uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
  do buf[--n] = "0123456789abcdef"[u & 15]; while (u >>= 4);
  if (v < 0) buf[--n] = '-';
  buf[--n] = sep;
  ut_str_putn(s, buf + n, sizeof buf - (size_t)n);
}

/* Affine expression a appended to s: constant, variables, symbols, divisions. */
static void put_aff(ut_str *s, const ib_aff *a) {
  put_int(s, '#', a->c);
  for (int j = 0; j < IB_MAX_VARS; j++)
    if (a->v[j]) put_int(s, 'v', j), put_int(s, '*', a->v[j]);
  for (int i = 0; i < a->nsym; i++) {
    put_int(s, 's', a->sym[i].k);
    ut_str_puts(s, a->sym[i].name);
    ut_str_putc(s, '\'');
  }
  for (int i = 0; i < a->ndiv; i++) {
    put_int(s, '[', a->div[i].k);
    put_aff(s, &a->div[i].d->num);
    put_int(s, '/', a->div[i].d->q);
    ut_str_putc(s, ']');
  }
}

/* Constraints c[0..n) appended to s. */
static void put_cons(ut_str *s, const ib_cons *c, int n) {
  put_int(s, '{', n);
  for (int i = 0; i < n; i++) {
    ut_str_putc(s, c[i].eq ? '=' : '>');
    put_aff(s, &c[i].e);
  }
  ut_str_putc(s, '}');
}

/* The key of access a of block b (domain constraints f, range of `rank`
 * dimensions), in the view's arena; NULL where not cached (parameters, the
 * write of an empty reduction) or out of memory. */
const char *poly_acc_key(poly_view *pv, const poly_blk *b, const poly_acc *a, int rank) {
  if (b->nparams || b->out_domain || a->ib.non_affine) return NULL;
  const ib_info *f = ib_get(pv->ib, b->var_node);
  ut_str s;
  ut_str_init(&s);
  put_int(&s, 'n', b->pub.nvars);
  put_int(&s, '>', rank);
  put_cons(&s, f->cons, f->ncons);
  for (int i = 0; i < a->ib.npieces; i++) {
    const ib_piece *p = &a->ib.pieces[i];
    int64_t bits;
    memcpy(&bits, &p->value, sizeof bits);
    if (p->fill) put_int(&s, 'F', bits);
    put_cons(&s, p->cons, p->ncons);
    for (int k = 0; !p->fill && k < p->nmap; k++) {
      ut_str_putc(&s, k ? ',' : '(');
      put_aff(&s, &p->map[k]);
    }
    ut_str_putc(&s, ')');
  }
  char *key = s.oom ? NULL : ut_arena_alloc(pv->arena, s.len + 1);
  if (key) memcpy(key, s.buf, s.len + 1);
  ut_str_free(&s);
  return key;
}

/* Set s renamed to block b's names: its tuple name and variable names. */
static __isl_give isl_set *rename_set(const poly_blk *b, __isl_take isl_set *s) {
  s = isl_set_set_tuple_name(s, b->pub.isl_name);
  for (int j = 0; j < b->pub.nvars && s; j++) s = isl_set_set_dim_name(s, isl_dim_set, (unsigned)j, b->pub.var_names[j]);
  return s;
}

/* Map m's tuple `side` (isl_dim_in / isl_dim_out) renamed to block b's names. */
static __isl_give isl_map *rename_side(const poly_blk *b, __isl_take isl_map *m, enum isl_dim_type side) {
  m = isl_map_set_tuple_name(m, side, b->pub.isl_name);
  for (int j = 0; j < b->pub.nvars && m; j++) m = isl_map_set_dim_name(m, side, (unsigned)j, b->pub.var_names[j]);
  return m;
}

/* Entry *at of the cache under key, or NULL. */
static const struct poly_acc_entry *find(const poly_view *pv, const char *key) {
  int *at = key ? ut_strmap_find(&pv->acc_keys, key) : NULL;
  return at ? &pv->acc_cache[*at] : NULL;
}

/* A new, empty entry under key; NULL when out of memory. */
static struct poly_acc_entry *new_entry(poly_view *pv, const char *key) {
  if (pv->nacc_cache == pv->capacc_cache) {
    int cap = pv->capacc_cache ? 2 * pv->capacc_cache : 64;
    struct poly_acc_entry *n = realloc(pv->acc_cache, sizeof *n * (size_t)cap);
    if (!n) return NULL;
    pv->acc_cache = n, pv->capacc_cache = cap;
  }
  if (!ut_strmap_put(&pv->acc_keys, key, pv->nacc_cache)) return NULL;
  struct poly_acc_entry *en = &pv->acc_cache[pv->nacc_cache++];
  memset(en, 0, sizeof *en);
  return en;
}

/* Access a of block b reading `tname` from the cache entry under key:
 * true when found (a->map and a->fill set, renamed; *pieces its count). */
bool poly_acc_cache_get(poly_view *pv, const poly_blk *b, poly_acc *a, const char *key, const char *tname, int *pieces) {
  const struct poly_acc_entry *en = find(pv, key);
  if (!en) return false;
  a->map = isl_map_set_tuple_name(rename_side(b, isl_map_copy(en->map), isl_dim_in), isl_dim_out, tname);
  a->nfill = en->nfill;
  for (int k = 0; k < en->nfill; k++) a->fill[k] = (poly_fill){en->fill[k].value, rename_set(b, isl_set_copy(en->fill[k].set))};
  *pieces = en->pieces;
  return true;
}

/* Access a (built, `pieces` basic relations) kept under key; nothing when
 * key is NULL or memory runs out (the cache is only a shortcut). */
void poly_acc_cache_put(poly_view *pv, const char *key, const poly_acc *a, int pieces) {
  if (!key || !a->map || find(pv, key)) return;
  struct poly_acc_entry *en = new_entry(pv, key);
  if (!en) return;
  en->map = isl_map_copy(a->map);
  en->nfill = a->nfill, en->pieces = pieces;
  for (int k = 0; k < a->nfill; k++) en->fill[k] = (poly_fill){a->fill[k].value, isl_set_copy(a->fill[k].set)};
}

/* The key of the dependence of a read keyed rkey on a write keyed wkey
 * (deps.c's flow): both relations are fixed by their keys, so is it.  NULL
 * when either is not cached. */
const char *poly_flow_key(poly_view *pv, const char *rkey, const char *wkey) {
  if (!rkey || !wkey) return NULL;
  size_t nr = strlen(rkey), nw = strlen(wkey);
  char *key = ut_arena_alloc(pv->arena, nr + nw + 3);
  if (key) memcpy(key, "D:", 2), memcpy(key + 2, rkey, nr), key[2 + nr] = '|', memcpy(key + 3 + nr, wkey, nw + 1);
  return key;
}

/* The dependence under key from block pb's instances to block b's, renamed
 * to theirs; NULL when not cached. */
__isl_give isl_map *poly_flow_cache_get(poly_view *pv, const char *key, const poly_blk *pb, const poly_blk *b) {
  const struct poly_acc_entry *en = find(pv, key);
  if (!en) return NULL;
  return rename_side(b, rename_side(pb, isl_map_copy(en->map), isl_dim_in), isl_dim_out);
}

/* Dependence dep kept under key (NULL: nothing). */
void poly_flow_cache_put(poly_view *pv, const char *key, __isl_keep isl_map *dep) {
  poly_acc a = {.map = dep};
  poly_acc_cache_put(pv, key, &a, 0);
}

/* Block b's domain: the set of f's constraints in space sp, simplified,
 * from an earlier block with the same constraints where there is one;
 * with check_empty, *empty says whether it has no point. */
__isl_give isl_set *poly_domain_cached(poly_view *pv, const poly_blk *b, const ib_info *f, __isl_keep isl_space *sp,
                                       bool check_empty, bool *empty) {
  const char *key = NULL;
  *empty = false;
  ut_str s;
  ut_str_init(&s);
  if (!pv->no_acc_cache && !b->nparams) {
    put_int(&s, 'Q', b->pub.nvars);
    put_cons(&s, f->cons, f->ncons);
    char *k = s.oom ? NULL : ut_arena_alloc(pv->arena, s.len + 1);
    if (k) memcpy(k, s.buf, s.len + 1), key = k;
  }
  ut_str_free(&s);
  struct poly_acc_entry *en = (struct poly_acc_entry *)find(pv, key);
  isl_set *d = en ? rename_set(b, isl_set_copy(en->set)) : poly_simplify_set(poly_cons_set(pv, sp, f->cons, f->ncons));
  if (!d) return NULL;
  if (!en && key && (en = new_entry(pv, key))) en->set = isl_set_copy(d);
  if (check_empty && en && en->pieces) *empty = en->pieces == 2;
  else if (check_empty) *empty = isl_set_is_empty(d) == isl_bool_true;
  if (check_empty && en) en->pieces = *empty ? 2 : 1;
  return d;
}

void poly_acc_cache_free(poly_view *pv) {
  for (int i = 0; i < pv->nacc_cache; i++) {
    isl_set_free(pv->acc_cache[i].set);
    isl_map_free(pv->acc_cache[i].map);
    for (int k = 0; k < pv->acc_cache[i].nfill; k++) isl_set_free(pv->acc_cache[i].fill[k].set);
  }
  free(pv->acc_cache);
  ut_strmap_free(&pv->acc_keys);
  pv->acc_cache = NULL;
  pv->nacc_cache = pv->capacc_cache = 0;
}

/* ---- poly_can_compute_at's answers (core_tile.c) --------------------------------- */
/* Which footprint a tile of a block has is fixed by the relations it reads
 * through (their keys: domain and pieces), the tile and the element size;
 * only answers that say yes are kept (a no names its block). */
bool poly_halo_cache_get(const poly_view *pv, const poly_blk *b, const int *acc, int nacc, const int64_t *tile, int es,
                         poly_halo *out, const char **key) {
  *key = NULL;
  if (!pv->halos) return false;
  ut_str s;
  ut_str_init(&s);
  put_int(&s, 'e', es);
  for (int v = 0; tile && v < b->pub.nout; v++) put_int(&s, ',', tile[v]); /* one size per output variable */
  for (int k = 0; k < nacc; k++) {
    const char *ak = b->acc[acc[k]].key;
    if (!ak) {
      ut_str_free(&s);
      return false;
    }
    ut_str_putc(&s, '|');
    ut_str_puts(&s, ak);
  }
  int *at = s.oom ? NULL : ut_strmap_find(&pv->halos->keys, s.buf);
  if (at) *out = pv->halos->v[*at];
  else if (!s.oom && (*key = ut_arena_alloc(pv->arena, s.len + 1))) memcpy((char *)*key, s.buf, s.len + 1);
  ut_str_free(&s);
  return at != NULL;
}

void poly_halo_cache_put(const poly_view *pv, const char *key, const poly_halo *h) {
  struct poly_halo_cache *c = pv->halos;
  if (!c || !key || !h->ok) return;
  if (c->n == c->cap) {
    int cap = c->cap ? 2 * c->cap : 64;
    poly_halo *n = realloc(c->v, sizeof *n * (size_t)cap);
    if (!n) return;
    c->v = n, c->cap = cap;
  }
  if (ut_strmap_put(&c->keys, key, c->n)) c->v[c->n++] = *h;
}

void poly_halo_cache_new(poly_view *pv) { pv->halos = ut_xcalloc(1, sizeof *pv->halos); }

void poly_halo_cache_free(poly_view *pv) {
  if (!pv->halos) return;
  free(pv->halos->v);
  ut_strmap_free(&pv->halos->keys);
  free(pv->halos);
  pv->halos = NULL;
}
