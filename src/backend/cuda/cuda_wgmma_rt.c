/* cuda_wgmma_rt.c — the SM90 wgmma GEMM's tensor maps with run-time sizes
 * (issue 25: one build per ShapeSet box).  In a ShapeSet build the
 * template (cuda_sm90.c) reads M, N, K and the batches as hp_sv<i>
 * formulas; the TMA unit reads them from the tensor maps, so a map's dims
 * and strides are formulas too (cuda_tmap_desc.rt_dims / rt_strides), and
 * the runtime encodes the maps at each binding before the launch
 * (cuda_rt_launch_kernel_at; a graph update carries the new parameters).
 * A stride read at run time must stay a multiple of 16 bytes at every
 * binding (its literal factor), else the GEMM prints its sizes and the box
 * builds per binding.
 * Needs: cuda.h (cuda_gemm_spec, cuda_tmap_desc, cuda_rtsz).
 * Gives: cuda_tmap_at, cuda_tmap_same, cuda_sm90_rt_aligned,
 * cuda_sm90_tmaps_rt. */
#include <string.h>

#include "backend/cuda/cuda.h"

/* z's value at the binding sv (hp_sv<i> = sv[i]). */
static uint64_t rtsz_eval(const cuda_rtsz *z, const int64_t *sv) {
  int64_t v = z->lit;
  for (int i = 0; i < z->n; i++) v *= sv[z->sym[i]];
  return (uint64_t)v;
}

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

bool cuda_sm90_rt_aligned(const cuda_gemm_spec *t) {
  int64_t ab = tiny_dtype_size(t->a_dtype), cb = tiny_dtype_size(t->c_dtype);
  const cuda_rtsz *st[9] = {&t->rt_st[0], &t->rt_sb[0][0], &t->rt_sb[0][1], t->b_sk == 1 ? &t->rt_st[3] : &t->rt_st[2],
                            &t->rt_sb[1][0], &t->rt_sb[1][1], &t->rt_st[4], &t->rt_sb[2][0], &t->rt_sb[2][1]};
  for (int i = 0; i < 9; i++)
    if (st[i]->n && (st[i]->lit * (i < 6 ? ab : cb)) % 16) return false;
  return true;
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
