/* cuda_wgmma_rt.c — the SM90 wgmma GEMM's tensor maps with run-time sizes
 * (issue 25: one build per ShapeSet box).  In a ShapeSet build the
 * template (cuda_sm90.c) reads M, N, K and the batches as hp_sv<i>
 * formulas; the TMA unit reads them from the tensor maps, so a map's dims
 * and strides are formulas too (cuda_tmap_desc.rt_dims / rt_strides), and
 * the runtime encodes the maps at each binding before the launch
 * (cuda_rt_launch_kernel_at; a graph update carries the new parameters).
 * A stride read at run time that is not a multiple of 16 bytes at every
 * binding (its literal factor) makes the GEMM a pair (cuda_own): the
 * wgmma kernel serves the bindings where it is aligned, the SM80 kernel
 * (any stride) the others, each returning at once at a binding not its
 * own; the runtime encodes the wgmma maps at its own bindings only.
 * Needs: cuda.h (cuda_gemm_spec, cuda_tmap_desc, cuda_rtsz), cuda_int.h.
 * Gives: cuda_tmap_at, cuda_tmap_same, cuda_sm90_rt_aligned,
 * cuda_sm90_tmaps_rt, cuda_gemm_own, cuda_gemm_strides_at, cuda_kernel_own_at,
 * cuda_own_guard, cuda_rtsz_at. */
#include <string.h>

#include "backend/cuda/cuda.h"
#include "backend/cuda/cuda_int.h"

int64_t cuda_rtsz_at(const cuda_rtsz *z, const int64_t *sv) {
  int64_t v = z->lit;
  for (int i = 0; i < z->n; i++) v *= sv[z->sym[i]];
  return v;
}

/* z's value at the binding sv, unsigned (a map's dim or stride). */
static uint64_t rtsz_eval(const cuda_rtsz *z, const int64_t *sv) { return (uint64_t)cuda_rtsz_at(z, sv); }

void cuda_tmap_at(const cuda_tmap_desc *d, const int64_t *sv, cuda_tmap_desc *out) {
  *out = *d;
  for (int i = 0; sv && i < d->rank && i < CUDA_TMAP_MAX_RANK; i++) {
    if (d->rt_dims[i].n) out->dims[i] = rtsz_eval(&d->rt_dims[i], sv);
    if (i + 1 < d->rank && d->rt_strides[i].n) out->strides[i] = rtsz_eval(&d->rt_strides[i], sv);
  }
}

/* Whether formulas a and b are the same (n 0: both constants). */
static bool rtsz_same(const cuda_rtsz *a, const cuda_rtsz *b) {
  if (a->n != b->n || (a->n && a->lit != b->lit)) return false;
  for (int i = 0; i < a->n; i++)
    if (a->sym[i] != b->sym[i]) return false;
  return true;
}

bool cuda_tmap_same(const cuda_tmap_desc *a, const cuda_tmap_desc *b) {
  if (a->rank != b->rank || a->dtype != b->dtype || a->swizzle != b->swizzle || memcmp(a->box, b->box, sizeof a->box))
    return false;
  for (int i = 0; i < a->rank && i < CUDA_TMAP_MAX_RANK; i++) {
    if (!rtsz_same(&a->rt_dims[i], &b->rt_dims[i]) || (!a->rt_dims[i].n && a->dims[i] != b->dims[i])) return false;
    if (i + 1 < a->rank &&
        (!rtsz_same(&a->rt_strides[i], &b->rt_strides[i]) || (!a->rt_strides[i].n && a->strides[i] != b->strides[i])))
      return false;
  }
  return true;
}

/* The run-time strides of t's TMA maps (A's row and batch strides, B's,
 * C's) that are not a multiple of 16 bytes at every binding, in bytes,
 * into out[0..9); their count. */
static int sm90_rt_unaligned(const cuda_gemm_spec *t, cuda_rtsz out[9]) {
  int64_t ab = tiny_dtype_size(t->a_dtype), cb = tiny_dtype_size(t->c_dtype);
  const cuda_rtsz *st[9] = {&t->rt_st[0], &t->rt_sb[0][0], &t->rt_sb[0][1], t->b_sk == 1 ? &t->rt_st[3] : &t->rt_st[2],
                            &t->rt_sb[1][0], &t->rt_sb[1][1], &t->rt_st[4], &t->rt_sb[2][0], &t->rt_sb[2][1]};
  int n = 0;
  for (int i = 0; i < 9; i++)
    if (st[i]->n && (st[i]->lit * (i < 6 ? ab : cb)) % 16) {
      out[n] = *st[i];
      out[n++].lit *= i < 6 ? ab : cb;
    }
  return n;
}

bool cuda_sm90_rt_aligned(const cuda_gemm_spec *t) {
  cuda_rtsz st[9];
  return sm90_rt_unaligned(t, st) == 0;
}

const cuda_own *cuda_gemm_own(ut_arena *a, const cuda_gemm_spec *s, bool *oom) {
  *oom = false;
  if (!s->own) return NULL;
  cuda_own *o = ut_arena_alloc(a, sizeof *o);
  if (!o) return *oom = true, NULL;
  memset(o, 0, sizeof *o);
  o->aligned = s->own > 0;
  cuda_rtsz st[9];
  int n = sm90_rt_unaligned(s, st);
  for (int i = 0; i < n; i++) { /* each formula once (B's and C's rows of N elements: one) */
    bool seen = false;
    for (int j = 0; j < o->n && !seen; j++) seen = rtsz_same(&o->st[j], &st[i]) && o->st[j].lit == st[i].lit;
    if (!seen) o->st[o->n++] = st[i];
  }
  return o;
}

void cuda_gemm_strides_at(cuda_gemm_spec *s, const int64_t *sv) {
  int64_t *st[6] = {&s->a_sm, &s->a_sk, &s->b_sk, &s->b_sn, &s->c_sm, &s->c_sn};
  int64_t *sb[3] = {s->a_sb, s->b_sb, s->c_sb};
  for (int i = 0; i < 6; i++) {
    if (s->rt_st[i].n) *st[i] = (int64_t)rtsz_eval(&s->rt_st[i], sv);
    if (s->rt_sb[i / 2][i % 2].n) sb[i / 2][i % 2] = (int64_t)rtsz_eval(&s->rt_sb[i / 2][i % 2], sv);
  }
  for (int i = 0; i < s->n_epi && i < CUDA_MAX_EPI; i++) {
    int64_t *es[4] = {&s->epi[i].s_b0, &s->epi[i].s_b1, &s->epi[i].s_m, &s->epi[i].s_n};
    for (int j = 0; j < 4; j++)
      if (s->rt_epi[i][j].n) *es[j] = (int64_t)rtsz_eval(&s->rt_epi[i][j], sv);
  }
}

bool cuda_kernel_own_at(const cuda_kernel *k, const int64_t *sv) {
  if (!k->own || !sv) return true;
  bool all = true;
  for (int i = 0; i < k->own->n; i++) all = all && rtsz_eval(&k->own->st[i], sv) % 16 == 0;
  return all == k->own->aligned;
}

bool cuda_own_guard(cuda_b *b, cuda_kernel *k, const cuda_gemm_spec *s) {
  bool oom;
  if (!(k->own = cuda_gemm_own(b->a, s, &oom))) return !oom;
  const char *all = NULL;
  for (int i = 0; i < k->own->n; i++)
    all = cuda_fmt(b, "%s%s%s %% 16 == 0", all ? all : "", all ? " && " : "", cuda_rtsz_text(b, &k->own->st[i]));
  /* a pair's kernel: at a binding it does not serve, the other one runs */
  cuda_call(b, cuda_fmt(b, "if (%s(%s)) return", k->own->aligned ? "!" : "", all));
  return !b->oom;
}

/* z, or the constant v when z is none. */
static cuda_rtsz rtsz_or(const cuda_rtsz *z, uint64_t v) { return z->n ? *z : (cuda_rtsz){.lit = (int64_t)v}; }

/* a x b into *out; false when it takes more than 8 symbols. */
static bool rtsz_mul(const cuda_rtsz *a, const cuda_rtsz *b, cuda_rtsz *out) {
  if (a->n + b->n > 8) return false;
  cuda_rtsz z = *a;
  z.lit *= b->lit;
  for (int i = 0; i < b->n; i++) z.sym[z.n++] = b->sym[i];
  *out = z;
  return true;
}

/* Map d's run-time dims (dim[i] of each, NULL: constant) and strides in
 * bytes (st[i] elements x esz; orig[i] the spec's value).  A dim of extent
 * 1 (a batch of one, or a broadcast folded to one) stays a constant; its
 * zero stride the packed one at the binding (cuda_sm90.c's
 * packed_unit_strides: the previous stride times the previous extent,
 * rounded up to 16 bytes: its literal factor rounded). */
static bool map_rt(cuda_tmap_desc *d, const cuda_rtsz *const dim[4], const cuda_rtsz *const st[3], const int64_t orig[3],
                   int esz) {
  for (int i = 0; i < 4; i++)
    if (dim[i] && dim[i]->n && d->dims[i] != 1) d->rt_dims[i] = *dim[i];
  for (int i = 0; i < 3; i++) {
    if (orig[i] == 0 && d->dims[i + 1] == 1) { /* packed: stride[i-1] x dims[i] (esz x dims[0] for i = 0) */
      cuda_rtsz prev = i ? rtsz_or(&d->rt_strides[i - 1], d->strides[i - 1]) : (cuda_rtsz){.lit = esz};
      cuda_rtsz ext = rtsz_or(&d->rt_dims[i], d->dims[i]), z;
      if (!rtsz_mul(&prev, &ext, &z)) return false;
      z.lit = (z.lit + 15) / 16 * 16;
      if (z.n) d->rt_strides[i] = z;
    } else if (st[i]->n) {
      d->rt_strides[i] = *st[i];
      d->rt_strides[i].lit *= esz;
    }
  }
  return true;
}

bool cuda_sm90_tmaps_rt(const cuda_gemm_spec *s, cuda_tmap_desc tm[3]) {
  int ab = tiny_dtype_size(s->a_dtype), cb = tiny_dtype_size(s->c_dtype);
  bool bkm = s->b_sk == 1;
  const cuda_rtsz *const dA[4] = {&s->rt_k, &s->rt_m, &s->rt_b[1], &s->rt_b[0]};
  const cuda_rtsz *const dB[4] = {bkm ? &s->rt_k : &s->rt_n, bkm ? &s->rt_n : &s->rt_k, &s->rt_b[1], &s->rt_b[0]};
  const cuda_rtsz *const dC[4] = {&s->rt_n, &s->rt_m, &s->rt_b[1], &s->rt_b[0]};
  const cuda_rtsz *const sA[3] = {&s->rt_st[0], &s->rt_sb[0][1], &s->rt_sb[0][0]};
  const cuda_rtsz *const sB[3] = {bkm ? &s->rt_st[3] : &s->rt_st[2], &s->rt_sb[1][1], &s->rt_sb[1][0]};
  const cuda_rtsz *const sC[3] = {&s->rt_st[4], &s->rt_sb[2][1], &s->rt_sb[2][0]};
  const int64_t oA[3] = {s->a_sm, s->a_sb[1], s->a_sb[0]}, oB[3] = {bkm ? s->b_sn : s->b_sk, s->b_sb[1], s->b_sb[0]};
  const int64_t oC[3] = {s->c_sm, s->c_sb[1], s->c_sb[0]};
  return map_rt(&tm[0], dA, sA, oA, ab) && map_rt(&tm[1], dB, sB, oB, ab) && map_rt(&tm[2], dC, sC, oC, cb);
}
