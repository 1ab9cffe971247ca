/* test_ib_property.c — random movement chains (reshape, permute, expand, pad,
 * shrink with step, flip, pool) over small random shapes.  The input holds
 * element k = k + 1 (pads use negative values), so the reference
 * interpreter's output names, for every output element, the input element
 * it reads.  Two independent readings of the composed access must agree
 * with it:
 *   - the IndexBook's pieces, evaluated directly (exactly one guard holds,
 *     its map gives the element or its fill value);
 *   - the isl access relation of the chain's movement_affine block,
 *     enumerated point by point (every output element exactly once).
 * The RNG is seeded: the run is deterministic. */
#include "ibtest.h"

#define CHAINS 400
#define MAX_ELEMS 1500

typedef struct rng {
  uint64_t s;
} rng;

static uint64_t next(rng *r) { /* xorshift64* */
  r->s ^= r->s >> 12;
  r->s ^= r->s << 25;
  r->s ^= r->s >> 27;
  return r->s * 2685821657736338717ull;
}

static int rnd(rng *r, int lo, int hi) { return lo + (int)(next(r) % (uint64_t)(hi - lo + 1)); }

typedef struct shp {
  int r;
  int64_t d[TINY_MAX_RANK];
} shp;

static int64_t numel(const shp *s) {
  int64_t n = 1;
  for (int i = 0; i < s->r; i++) n *= s->d[i];
  return n;
}

static tiny_shape tshape(const shp *s) { return tiny_shape_of(s->r, s->d); }

/* One random movement op on node cur of shape *s; -1 if none was applicable. */
static int random_op(rng *R, tiny_graph *g, int cur, shp *s, ut_str *desc) {
  for (int tries = 0; tries < 20; tries++) {
    int kind = rnd(R, 0, 6);
    shp o = *s;
    switch (kind) {
    case 0: { /* RESHAPE: spread the prime factors over a new rank, maybe with unit axes */
      int64_t n = numel(s), f[64];
      int nf = 0;
      for (int64_t p = 2; n > 1 && nf < 64; p++)
        while (n % p == 0 && nf < 64) f[nf++] = p, n /= p;
      o.r = rnd(R, 1, 4);
      for (int i = 0; i < o.r; i++) o.d[i] = 1;
      for (int i = 0; i < nf; i++) o.d[rnd(R, 0, o.r - 1)] *= f[i];
      tiny_shape t = tshape(&o);
      ut_str_printf(desc, " reshape%dd", o.r);
      *s = o;
      return tiny_b_reshape(g, cur, &t);
    }
    case 1: { /* PERMUTE */
      int perm[TINY_MAX_RANK];
      for (int i = 0; i < s->r; i++) perm[i] = i;
      for (int i = s->r - 1; i > 0; i--) {
        int j = rnd(R, 0, i), t = perm[i];
        perm[i] = perm[j], perm[j] = t;
      }
      for (int i = 0; i < s->r; i++) o.d[i] = s->d[perm[i]];
      ut_str_puts(desc, " permute");
      *s = o;
      return tiny_b_permute(g, cur, perm, s->r);
    }
    case 2: { /* EXPAND the size-1 axes */
      bool any = false;
      for (int i = 0; i < s->r; i++)
        if (s->d[i] == 1 && rnd(R, 0, 3)) o.d[i] = rnd(R, 2, 3), any = true;
      if (!any || numel(&o) > MAX_ELEMS) continue;
      tiny_shape t = tshape(&o);
      ut_str_puts(desc, " expand");
      *s = o;
      return tiny_b_expand(g, cur, &t);
    }
    case 3: { /* PAD */
      int64_t lo[TINY_MAX_RANK], hi[TINY_MAX_RANK];
      bool any = false;
      for (int i = 0; i < s->r; i++) {
        lo[i] = rnd(R, 0, 2) == 0 ? rnd(R, 1, 2) : 0;
        hi[i] = rnd(R, 0, 2) == 0 ? rnd(R, 1, 2) : 0;
        o.d[i] = s->d[i] + lo[i] + hi[i];
        any |= lo[i] || hi[i];
      }
      if (!any || numel(&o) > MAX_ELEMS) continue;
      double v = -rnd(R, 1, 9);
      ut_str_printf(desc, " pad(%g)", v);
      *s = o;
      return tiny_b_pad(g, cur, lo, hi, s->r, v);
    }
    case 4: { /* SHRINK with step */
      int64_t lo[TINY_MAX_RANK], hi[TINY_MAX_RANK], st[TINY_MAX_RANK];
      for (int i = 0; i < s->r; i++) {
        lo[i] = rnd(R, 0, (int)s->d[i] - 1);
        hi[i] = rnd(R, (int)lo[i] + 1, (int)s->d[i]);
        st[i] = rnd(R, 1, 3);
        o.d[i] = (hi[i] - lo[i] + st[i] - 1) / st[i];
      }
      ut_str_puts(desc, " shrink");
      *s = o;
      return tiny_b_shrink(g, cur, lo, hi, st, s->r);
    }
    case 5: { /* FLIP */
      int axes[TINY_MAX_RANK], n = 0;
      for (int i = 0; i < s->r; i++)
        if (rnd(R, 0, 1)) axes[n++] = i;
      if (!n) axes[n++] = rnd(R, 0, s->r - 1);
      ut_str_puts(desc, " flip");
      return tiny_b_flip(g, cur, axes, n);
    }
    case 6: { /* POOL over the last 1-2 axes */
      int nw = rnd(R, 1, s->r < 2 ? 1 : 2);
      if (s->r + nw > 6) continue;
      tiny_arg_pool a = {.n = nw};
      o.r = s->r + nw;
      for (int t = 0; t < nw; t++) {
        int ax = s->r - nw + t;
        int64_t d = s->d[ax], dil = rnd(R, 1, 2), k = rnd(R, 1, 3), str = rnd(R, 1, 2);
        while (k > 1 && dil * (k - 1) + 1 > d) k--;
        a.kernel[t] = tiny_dim_int(k), a.stride[t] = tiny_dim_int(str), a.dilation[t] = tiny_dim_int(dil);
        o.d[ax] = (d - dil * (k - 1) - 1) / str + 1;
        o.d[s->r + t] = k;
      }
      if (numel(&o) > MAX_ELEMS) continue;
      ut_str_printf(desc, " pool%d", nw);
      *s = o;
      tiny_src src = {cur, 0};
      return tiny_add(g, NULL, TINY_POOL, &src, 1, &a);
    }
    }
  }
  return -1;
}

/* ---- direct evaluation of IndexBook pieces ------------------------------ */
static int64_t ev(const ib_aff *a, const int64_t *v) {
  int64_t r = a->c;
  for (int j = 0; j < IB_MAX_VARS; j++) r += a->v[j] ? a->v[j] * v[j] : 0;
  assert_int_equal(a->nsym, 0);
  for (int i = 0; i < a->ndiv; i++) r += a->div[i].k * ut_floordiv(ev(&a->div[i].d->num, v), a->div[i].d->q);
  return r;
}

static bool holds(const ib_piece *p, const int64_t *v) {
  for (int k = 0; k < p->ncons; k++) {
    int64_t x = ev(&p->cons[k].e, v);
    if (p->cons[k].eq ? x != 0 : x < 0) return false;
  }
  return true;
}

static int64_t flat(const int64_t *idx, const int64_t *dims, int r) {
  int64_t f = 0;
  for (int i = 0; i < r; i++) f = f * dims[i] + idx[i];
  return f;
}

typedef struct scan_ctx {
  const ut_tensor *out, *in;
  int *seen;
  int bad;
  const char *desc;
} scan_ctx;

static int on_point(void *user, const int64_t *pt, int nvars, const int64_t *elem, int rank, bool fill, double value) {
  scan_ctx *c = user;
  int64_t p = flat(pt, c->out->shape, nvars);
  if (p < 0 || p >= ut_tensor_numel(c->out)) {
    c->bad++;
    return 1;
  }
  c->seen[p]++;
  double want = ut_tensor_get(c->out, p), got;
  if (fill) got = value;
  else {
    for (int d = 0; d < rank; d++)
      if (elem[d] < 0 || elem[d] >= c->in->shape[d]) c->bad++;
    got = (double)flat(elem, c->in->shape, rank) + 1;
  }
  if (got != want) {
    if (c->bad < 3) print_message("chain%s: isl says element %lld reads %g, the interpreter %g\n", c->desc, (long long)p, got, want);
    c->bad++;
  }
  return 0;
}

static void check_chain(rng *R, int trial, int *checked, int *skipped) {
  tiny_graph *g = tiny_graph_new();
  shp s = {rnd(R, 1, 3), {0}};
  for (int i = 0; i < s.r; i++) s.d[i] = rnd(R, 1, 5);
  shp s0 = s;
  tiny_shape t0 = tshape(&s);
  int cur = tiny_b_input(g, "x", TINY_FP32, &t0);
  ut_str desc;
  ut_str_init(&desc);
  int nops = rnd(R, 1, 6), done = 0;
  for (int k = 0; k < nops; k++) {
    int nx = random_op(R, g, cur, &s, &desc);
    if (nx >= 0) cur = nx, done++;
  }
  char *d = ut_str_take(&desc);
  if (!done) { /* nothing applied: no movement to check */
    free(d);
    tiny_graph_free(g);
    return;
  }
  tiny_mark_output(g, cur);
  harp_error e = {0};
  tiny_symtab syms;
  tiny_symtab_init(&syms);
  if (g->err.code) fail_msg("trial %d (%s): builder: %s", trial, d, g->err.msg);
  harp_status ps = tiny_prepare(&e, g, &syms, false);
  if (ps == HARP_E_EXCESSIVE_PIECEWISE) { /* tiny_verify's conservative piece count (before coalescing) */
    (*skipped)++;
    free(d);
    tiny_symtab_free(&syms);
    tiny_graph_free(g);
    return;
  }
  assert_ok(&e, ps);
  int last = g->outputs[0];
  /* the interpreter's answer */
  ut_tensor in, out;
  assert_ok(&e, ut_tensor_alloc(&e, &in, TINY_FP32, s0.r, s0.d));
  for (int64_t k = 0; k < ut_tensor_numel(&in); k++) ut_tensor_set(&in, k, (float)(k + 1));
  assert_ok(&e, tiny_interp(&e, g, &syms, &in, 1, &out));
  int64_t n = ut_tensor_numel(&out);
  /* (1) the IndexBook pieces */
  ib_book *ib;
  assert_ok(&e, ib_build(&e, g, &syms, NULL, &ib));
  assert_ok(&e, ib_validate(&e, ib));
  const ib_info *f = ib_get(ib, last);
  const ib_access *a = &f->acc[0];
  assert_int_equal(a->src, 0); /* the chain ends at the input */
  int64_t idx[IB_MAX_VARS] = {0};
  int bad = 0;
  for (int64_t p = 0; p < n; p++) {
    for (int64_t q = p, j = f->rank - 1; j >= 0; j--) idx[j] = q % out.shape[j], q /= out.shape[j];
    int hits = 0;
    double got = 0;
    for (int i = 0; i < a->npieces; i++) {
      const ib_piece *pc = &a->pieces[i];
      if (!holds(pc, idx)) continue;
      hits++;
      if (pc->fill) {
        got = pc->value;
        continue;
      }
      int64_t el[TINY_MAX_RANK];
      for (int k = 0; k < pc->nmap; k++) el[k] = ev(&pc->map[k], idx);
      got = (double)flat(el, in.shape, in.rank) + 1;
    }
    if (hits != 1 || got != ut_tensor_get(&out, p)) {
      if (bad < 3)
        print_message("chain%s: IndexBook: element %lld: %d pieces hold, reads %g, interpreter %g\n", d, (long long)p, hits,
                      got, ut_tensor_get(&out, p));
      bad++;
    }
  }
  /* (2) the isl relation */
  poly_view *pv;
  assert_ok(&e, poly_build(&e, g, ib, NULL, &pv));
  int b = poly_block_of(pv, last);
  assert_true(b >= 0);
  assert_int_equal(poly_block(pv, b)->kind, POLY_MOVEMENT_AFFINE);
  scan_ctx c = {&out, &in, calloc((size_t)n + 1, sizeof(int)), 0, d};
  assert_ok(&e, poly_access_scan(&e, pv, b, 0, on_point, &c));
  for (int64_t p = 0; p < n; p++)
    if (c.seen[p] != 1) {
      if (c.bad < 3) print_message("chain%s: isl visits element %lld %d times\n", d, (long long)p, c.seen[p]);
      c.bad++;
    }
  if (bad || c.bad) fail_msg("trial %d: chain%s: %d IndexBook and %d isl mismatches", trial, d, bad, c.bad);
  free(c.seen);
  poly_free(pv);
  ib_free(ib);
  ut_tensor_free(&in);
  ut_tensor_free(&out);
  tiny_symtab_free(&syms);
  tiny_graph_free(g);
  free(d);
  (*checked)++;
}

static void test_random_chains(void **state) {
  (void)state;
  rng R = {0x9e3779b97f4a7c15ull};
  int checked = 0, skipped = 0;
  for (int t = 0; t < CHAINS; t++) check_chain(&R, t, &checked, &skipped);
  print_message("%d random movement chains checked (%d refused by tiny_verify's piece count)\n", checked, skipped);
  assert_true(checked >= 200);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_random_chains)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
