/* cgen_attn.c — fused attention with a streaming (online) softmax.
 * Needs: cgen_int.h.  Gives: cgen_attn, cgen_attn_spec_init.
 *
 * out = softmax(scale * q k^T + mask, causal) v, per (batch, head).  The
 * emitted code never holds more than one BM x BN tile of scores:
 *   per task (b, h, a chunk of query rows): pack k^T [d][n] and v [n][dv]
 *   as fp32 (zero padded); per query block of BM rows: Qs = scale * q;
 *   per key block of BN keys (causal: only blocks at or left of the
 *   diagonal): S = Qs k^T (register-blocked, RS rows x BN), add mask, -inf
 *   outside causal/N, running max m and sum l (flash-attention update:
 *   alpha = exp(m_old - m_new), O = alpha O + exp(S - m_new) v), then
 *   out = O / l in the output dtype.
 * The scores are kept in base 2 (Qs = scale log2(e) q, the mask times
 * log2 e), so each exp is the vector layer's 2^t (no ln 2 range reduction,
 * no clamp: 2^-inf is 0, NaN stays NaN), flushed to 0 below 2^-126: a
 * large negative mask would otherwise underflow, a microcode assist a lane.
 * Fully masked rows give NaN, like the reference softmax.
 * bf16 (tune.bf16, the AVX-512 variant; cgen_bf16.c has the scheme): Qs
 * and k^T are packed as pairs along d ([r][d/2], [j/BN][d/2][BN] words of
 * two bf16), v as pairs of keys ([j/2][dv]); the score kernel stores P as
 * bf16 (adjacent keys are adjacent lanes, so its rows are pairs already);
 * both products run on vdpbf16ps with fp32 accumulation; the running max,
 * the sums l and O stay fp32 (l sums the unrounded P).
 * Sizes read at run time (a ShapeSet object, s->rt): the variant reads
 * them into its context; with N among them it holds up to four key tilings
 * (key_tiles), $P_b<BN>_run each, and $P_run takes the smallest that holds
 * the binding's N, the tile a specialised object would take there. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "backend/c/cgen_int.h"

static const double LOG2E = 1.4426950408889634;

typedef struct cg_at {
  int bm, bn, bnv, dp, nvd, rs, ro;
  int64_t np, qs, chunk, target; /* target: the tasks the work is split into */
  bool bf;    /* bf16 (tune.bf16, AVX-512): Q K^T and P V with vdpbf16ps (below) */
  int64_t d2; /* bf: pairs along d, (d + 1) / 2 */
  int64_t qr, kr, vr, orow; /* the row strides of q, k, v and out (strides_of's innermost) */
  char vx[12]; /* the infix of the variant's function names: "" or, one of several key tiles, "b48_" */
} cg_at;

void cgen_attn_spec_init(cgen_attn_spec *s, int64_t b, int64_t h, int64_t m, int64_t n, int64_t d, tiny_dtype dt) {
  memset(s, 0, sizeof *s);
  s->b = b, s->h = h, s->m = m, s->n = n, s->d = d, s->dv = d;
  s->q_dtype = s->kv_dtype = s->o_dtype = s->mask_dtype = dt;
  cgen_tuning_default(&s->tune);
}

/* The (b, h, row) strides in effect: the spec's, or contiguous. */
static void strides_of(const cgen_attn_spec *s, int64_t *qs, int64_t *ks, int64_t *vs, int64_t *os) {
  if (s->strided) {
    memcpy(qs, s->q_s, sizeof s->q_s), memcpy(ks, s->k_s, sizeof s->k_s);
    memcpy(vs, s->v_s, sizeof s->v_s), memcpy(os, s->o_s, sizeof s->o_s);
    return;
  }
  qs[2] = s->d, qs[1] = s->m * s->d, qs[0] = s->h * qs[1];
  ks[2] = s->d, ks[1] = s->n * s->d, ks[0] = s->h * ks[1];
  vs[2] = s->dv, vs[1] = s->n * s->dv, vs[0] = s->h * vs[1];
  os[2] = s->dv, os[1] = s->m * s->dv, os[0] = s->h * os[1];
}

static void resolve(const cgen_attn_spec *s, const cg_isa *isa, cg_at *t) {
  int w = isa->w;
  t->bm = s->bm > 0 ? s->bm : 64;
  t->bn = s->bn > 0 ? (int)cg_rup(s->bn, w) : (isa->id == CGEN_ISA_SCALAR ? 16 : isa->id == CGEN_ISA_AVX2 ? 32 : 64);
  if (t->bn > cg_rup(s->n, w)) t->bn = (int)cg_rup(s->n, w);
  if (t->bm > s->m) t->bm = (int)s->m;
  t->bnv = t->bn / w;
  t->dp = (int)cg_rup(s->dv, w);
  t->nvd = t->dp / w;
  int regs = isa->id == CGEN_ISA_SCALAR ? 16 : isa->nregs;
  t->rs = (regs - 1 - t->bnv) / t->bnv;
  if (t->rs > 8) t->rs = 8;
  if (t->rs < 1) t->rs = 1;
  t->ro = (regs - 1 - t->nvd) / t->nvd;
  if (t->ro > 8) t->ro = 8;
  if (t->ro < 1) t->ro = 1;
  if (s->bm <= 0) { /* 64 rows: a multiple of BN keeps causal blocks on tile edges; row tails have exact kernels */
    t->bm = 64;
    if (t->bm > s->m) t->bm = (int)s->m;
  }
  t->np = cg_rup(s->n, t->bn);
  int64_t threads = s->tune.threads > 0 ? s->tune.threads : 2;
  int64_t target = t->target = s->tune.tasks > 0 ? s->tune.tasks : threads;
  int64_t bh = s->b * s->h;
  t->qs = bh >= target ? 1 : (target + bh - 1) / bh;
  t->chunk = cg_rup((s->m + t->qs - 1) / t->qs, t->bm);
  t->qs = (s->m + t->chunk - 1) / t->chunk;
  t->bf = s->tune.bf16 && isa->id == CGEN_ISA_AVX512;
  t->d2 = (s->d + 1) / 2;
  int64_t qs[3], ks[3], vs[3], os[3];
  strides_of(s, qs, ks, vs, os);
  t->qr = qs[2], t->kr = ks[2], t->vr = vs[2], t->orow = os[2];
  t->vx[0] = 0;
}

/* What the variant prints for a size or stride: the constant ("64L"), or
 * in a ShapeSet object (rt) the field of the context $P_run fills from the
 * shape symbols.  st: the (b, h) strides of q, k, v, out, then the mask's
 * (b, h, row); sk_*: what the score kernel reads (its own parameters). */
typedef struct cg_atv {
  bool rt;
  char b[24], h[24], m[24], n[24], qs[24], chunk[24], st[11][24];
  char sk_n[24], sk_mi[24], sk_args[40];
} cg_atv;

enum { ST_Q, ST_K = 2, ST_V = 4, ST_O = 6, ST_MASK = 8, ST_N = 11 };

/* The expression of stride i (ST_*) in s->rt, or NULL. */
static const char *rt_stride(const cgen_attn_spec *s, int i) {
  const char *const *v = i < ST_K ? s->rt.q : i < ST_V ? s->rt.k : i < ST_O ? s->rt.v : i < ST_MASK ? s->rt.o : s->rt.mask;
  return v[i < ST_MASK ? i % 2 : i - ST_MASK];
}

/* Whether s reads any size or stride at run time. */
static bool attn_rt(const cgen_attn_spec *s) {
  bool any = s->rt.b || s->rt.m || s->rt.n;
  for (int i = 0; i < ST_N; i++) any = any || rt_stride(s, i);
  return any;
}

/* The strings of the variant t of s into *v (cg_atv). */
static void attn_values(const cgen_attn_spec *s, const cg_at *t, cg_atv *v) {
  int64_t qs[3], ks[3], vs[3], os[3];
  strides_of(s, qs, ks, vs, os);
  int64_t st[ST_N] = {qs[0], qs[1], ks[0], ks[1], vs[0], vs[1], os[0], os[1], s->mask_s[0], s->mask_s[1], s->mask_s[2]};
  v->rt = attn_rt(s);
  snprintf(v->h, sizeof v->h, "%ldL", (long)s->h);
  if (v->rt) {
    snprintf(v->b, sizeof v->b, "cx->B"), snprintf(v->m, sizeof v->m, "cx->M"), snprintf(v->n, sizeof v->n, "cx->N");
    snprintf(v->qs, sizeof v->qs, "cx->qs"), snprintf(v->chunk, sizeof v->chunk, "cx->chunk");
    for (int i = 0; i < ST_N; i++) snprintf(v->st[i], sizeof v->st[i], "cx->st[%d]", i);
    snprintf(v->sk_n, sizeof v->sk_n, "nn"), snprintf(v->sk_mi, sizeof v->sk_mi, "mi");
    snprintf(v->sk_args, sizeof v->sk_args, ", cx->N, cx->st[%d]", ST_MASK + 2);
    return;
  }
  snprintf(v->b, sizeof v->b, "%ldL", (long)s->b), snprintf(v->m, sizeof v->m, "%ldL", (long)s->m);
  snprintf(v->n, sizeof v->n, "%ldL", (long)s->n);
  snprintf(v->qs, sizeof v->qs, "%ldL", (long)t->qs), snprintf(v->chunk, sizeof v->chunk, "%ldL", (long)t->chunk);
  for (int i = 0; i < ST_N; i++) snprintf(v->st[i], sizeof v->st[i], "%ldL", (long)st[i]);
  snprintf(v->sk_n, sizeof v->sk_n, "%ldL", (long)s->n), snprintf(v->sk_mi, sizeof v->sk_mi, "%ldL", (long)s->mask_s[2]);
  v->sk_args[0] = 0;
}

/* The attribute of the variant's functions: bf16 ones need AVX512_BF16. */
static const char *fattr(const cg_at *t) { return t->bf ? "static " CG_BF16_ATTR : "static $T"; }

/* One tile of scores for `rows` query rows, then the online-softmax update in
 * registers: P[r][:] = 2^(S - m_new) (stored for the PV step), m, l, alpha. */
static void emit_skern(cg_out *o, const cgen_attn_spec *s, const cg_at *t, const cg_atv *av, int rows) {
  int w = o->isa->w;
  char ld[200];
  cg_emit(o, "%s void $P_%ss%d(const float *restrict q, const float *restrict kt, float *restrict P, long gi0,"
             " long j0, const void *mk, float *mrow, float *lrow, float *alpha%s) {\n  (void)mk;\n", fattr(t), t->vx, rows,
          av->rt ? ", long nn, long mi" : "");
  if (av->rt) cg_emit(o, "  (void)mi;\n");
  if (s->has_mask) cg_emit(o, "  $P_v vl2e = $P_set1(%#.9gf); /* the mask to base 2 */\n", LOG2E);
  for (int r = 0; r < rows; r++)
    for (int v = 0; v < t->bnv; v++) cg_emit(o, "  $P_v c%d_%d = $P_zero();\n", r, v);
  cg_emit(o, "#pragma GCC unroll 4\n  for (long d = 0; d < %ldL; d++) {\n", (long)(t->bf ? t->d2 : s->d));
  for (int v = 0; v < t->bnv; v++)
    cg_emit(o, t->bf ? "    __m512bh b%d = (__m512bh)_mm512_loadu_ps(kt + d * %d + %d);\n" : "    $P_v b%d = $P_ld(kt + d * %d + %d);\n",
            v, t->bn, v * w);
  for (int r = 0; r < rows; r++) {
    if (t->bf) cg_emit(o, "    { __m512bh a = (__m512bh)_mm512_set1_epi32(((const int *)q)[%ldL + d]);", (long)(r * t->d2));
    else cg_emit(o, "    { $P_v a = $P_set1(q[%ldL + d]);", (long)r * s->d);
    for (int v = 0; v < t->bnv; v++) {
      if (t->bf) cg_emit(o, " c%d_%d = _mm512_dpbf16_ps(c%d_%d, a, b%d);", r, v, r, v, v);
      else cg_emit(o, " c%d_%d = $P_fma(a, b%d, c%d_%d);", r, v, v, r, v);
    }
    cg_emit(o, " }\n");
  }
  cg_emit(o, "  }\n");
  /* the update in phases across rows, so the rows' dependency chains
   * (reduce, exp, reduce) overlap instead of running one after another */
  bool need_keep = s->causal || s->n % t->bn != 0 || av->rt;
  cg_emit(o, "  float mx[%d], ms[%d], ta[%d], sm[%d];\n", rows, rows, rows, rows);
  for (int r = 0; r < rows; r++) {
    cg_emit(o, "  {\n    long gi = gi0 + %d;\n    (void)gi;\n", r);
    if (s->causal) cg_emit(o, "    long lim = gi + 1 < %s ? gi + 1 : %s;\n", av->sk_n, av->sk_n);
    else cg_emit(o, "    long lim = %s;\n", av->sk_n);
    cg_emit(o, "    (void)lim;\n");
    for (int v = 0; v < t->bnv; v++) {
      cg_emit(o, "    { long nv = lim - (j0 + %d); int n = nv > %d ? %d : nv < 0 ? 0 : (int)nv;\n      (void)n;\n", v * w,
              w, w);
      if (s->has_mask) {
        const char *mt = cg_ctype(s->mask_dtype), *mx = cg_vsuffix(s->mask_dtype);
        cg_emit(o, "      const %s *mp = (const %s *)mk + gi * %s + (j0 + %d) * %ldL;\n", mt, mt, av->sk_mi, v * w,
                (long)s->mask_s[3]);
        if (s->mask_s[3] == 1) {
          cg_emit(o, "      c%d_%d = $P_fma(n == %d ? $P_ld%s(mp) : $P_ldn%s(mp, n), vl2e, c%d_%d);\n", r, v, w, mx, mx, r, v);
        } else {
          char idx[64];
          snprintf(idx, sizeof idx, "e * %ldL", (long)s->mask_s[3]);
          cg_scalar_ld(o, ld, sizeof ld, s->mask_dtype, "mp", idx);
          cg_emit(o, "      { float tm[%d]; for (int e = 0; e < %d; e++) tm[e] = e < n ? %s : 0.0f; c%d_%d = $P_fma($P_ld(tm), vl2e, c%d_%d); }\n",
                  w, w, ld, r, v, r, v);
        }
      }
      if (need_keep) cg_emit(o, "      c%d_%d = $P_keep(c%d_%d, n);\n", r, v, r, v);
      cg_emit(o, "    }\n");
    }
    cg_emit(o, "    $P_v vm = c%d_0;\n", r);
    for (int v = 1; v < t->bnv; v++) cg_emit(o, "    vm = $P_max(vm, c%d_%d);\n", r, v);
    cg_emit(o, "    mx[%d] = $P_hmax(vm);\n  }\n", r);
  }
  for (int r = 0; r < rows; r++) {
    cg_emit(o, "  { float mold = mrow[%d], mnew = mx[%d] > mold ? mx[%d] : mold;\n", r, r, r);
    cg_emit(o, "    ms[%d] = mnew == -INFINITY ? 0.0f : mnew; ta[%d] = mold - ms[%d]; mrow[%d] = mnew; }\n", r, r, r, r);
  }
  for (int c = 0; c < rows; c += w) {
    int n = rows - c < w ? rows - c : w;
    if (n == w) cg_emit(o, "  $P_st(alpha + %d, $P_exp2z($P_ld(ta + %d)));\n", c, c);
    else cg_emit(o, "  $P_stn(alpha + %d, $P_exp2z($P_ldn(ta + %d, %d)), %d);\n", c, c, n, n);
  }
  for (int r = 0; r < rows; r++) {
    cg_emit(o, "  { $P_v vms = $P_set1(ms[%d]), vs = $P_zero();\n", r);
    for (int v = 0; v < t->bnv; v++)
      if (t->bf) /* P as bf16: row r at (uint16_t *)P + r * BN */
        cg_emit(o, "    { $P_v pv = $P_exp2z(c%d_%d - vms); _mm256_storeu_si256((__m256i *)((uint16_t *)P + %d),"
                   " (__m256i)_mm512_cvtneps_pbh(pv)); vs = vs + pv; }\n", r, v, r * t->bn + v * w);
      else
        cg_emit(o, "    { $P_v pv = $P_exp2z(c%d_%d - vms); $P_st(P + %d, pv); vs = vs + pv; }\n", r, v, r * t->bn + v * w);
    cg_emit(o, "    sm[%d] = $P_hsum(vs); }\n", r);
  }
  for (int r = 0; r < rows; r++) cg_emit(o, "  lrow[%d] = lrow[%d] * alpha[%d] + sm[%d];\n", r, r, r, r);
  cg_emit(o, "}\n");
}

/* O[r][:] = alpha[r] * O[r][:] + sum_j P[r][j] V[j][:], j < kb */
static void emit_okern(cg_out *o, const cg_at *t, int rows) {
  int w = o->isa->w;
  cg_emit(o, "%s void $P_%so%d(const float *restrict P, const float *restrict V, long kb, const float *alpha,"
             " float *restrict O) {\n", fattr(t), t->vx, rows);
  for (int r = 0; r < rows; r++) {
    cg_emit(o, "  $P_v al%d = $P_set1(alpha[%d]);\n", r, r);
    for (int v = 0; v < t->nvd; v++) cg_emit(o, "  $P_v c%d_%d = $P_ld(O + %d) * al%d;\n", r, v, r * t->dp + v * w, r);
  }
  if (t->bf) { /* pairs of keys: P's bf16 rows (stride BN) and V's pair rows */
    cg_emit(o, "  const int *pp = (const int *)P;\n  long kp = (kb + 1) >> 1;\n");
    cg_emit(o, "#pragma GCC unroll 4\n  for (long j = 0; j < kp; j++) {\n");
    for (int v = 0; v < t->nvd; v++)
      cg_emit(o, "    __m512bh b%d = (__m512bh)_mm512_loadu_ps(V + j * %d + %d);\n", v, t->dp, v * w);
    for (int r = 0; r < rows; r++) {
      cg_emit(o, "    { __m512bh a = (__m512bh)_mm512_set1_epi32(pp[%d + j]);", r * t->bn / 2);
      for (int v = 0; v < t->nvd; v++) cg_emit(o, " c%d_%d = _mm512_dpbf16_ps(c%d_%d, a, b%d);", r, v, r, v, v);
      cg_emit(o, " }\n");
    }
    cg_emit(o, "  }\n");
  } else {
    cg_emit(o, "#pragma GCC unroll 4\n  for (long j = 0; j < kb; j++) {\n");
    for (int v = 0; v < t->nvd; v++) cg_emit(o, "    $P_v b%d = $P_ld(V + j * %d + %d);\n", v, t->dp, v * w);
    for (int r = 0; r < rows; r++) {
      cg_emit(o, "    { $P_v a = $P_set1(P[%d + j]);", r * t->bn);
      for (int v = 0; v < t->nvd; v++) cg_emit(o, " c%d_%d = $P_fma(a, b%d, c%d_%d);", r, v, v, r, v);
      cg_emit(o, " }\n");
    }
    cg_emit(o, "  }\n");
  }
  for (int r = 0; r < rows; r++)
    for (int v = 0; v < t->nvd; v++) cg_emit(o, "  $P_st(O + %d, c%d_%d);\n", r * t->dp + v * w, r, v);
  cg_emit(o, "}\n");
}

/* bf: key j's column of k^T (kr: its row, j < nblk) as d2 pairs of bf16 at
 * [j / BN][d2][j %% BN] (0 past N and past an odd d). */
static void emit_pack_k_bf16(cg_out *o, const cgen_attn_spec *s, const cg_at *t, const char *N) {
  char lo[200], hi[200];
  cg_scalar_ld(o, lo, sizeof lo, s->kv_dtype, "kr", "2 * d");
  cg_scalar_ld(o, hi, sizeof hi, s->kv_dtype, "kr", "2 * d + 1");
  cg_emit(o, "    unsigned *kd = (unsigned *)Kt + j / %d * %ldL + j %% %d;\n", t->bn, (long)(t->d2 * t->bn), t->bn);
  cg_emit(o, "    for (long d = 0; d < %ldL; d++) {\n", (long)t->d2);
  cg_emit(o, "      float a = j < %s ? %s : 0.0f, b = j < %s && 2 * d + 1 < %ldL ? %s : 0.0f;\n", N, lo, N, (long)s->d, hi);
  cg_emit(o, "      kd[d * %d] = (unsigned)$F_f2b(a) | (unsigned)$F_f2b(b) << 16;\n    }\n", t->bn);
}

/* bf: v as pair rows of keys [j / 2][dp] (keys 2p and 2p + 1 interleaved,
 * 0 past N), for the nblk keys; vs2: v's row stride. */
static void emit_pack_v_bf16(cg_out *o, const cgen_attn_spec *s, const cg_at *t, int64_t vs2, const char *N) {
  const char *kt = cg_ctype(s->kv_dtype), *kx = cg_vsuffix(s->kv_dtype);
  cg_emit(o, "  {\n    const __m512i ix = " CG_BF16_IX ";\n");
  cg_emit(o, "    for (long j = 0; j < nblk; j += 2) {\n");
  cg_emit(o, "      const %s *v0 = v + j * %ldL, *v1 = v0 + %ldL;\n", kt, (long)vs2, (long)vs2);
  for (int vv = 0; vv < t->nvd; vv++) {
    int n = (int)(s->dv - vv * 16 < 16 ? s->dv - vv * 16 : 16);
    cg_emit(o, "      { $P_v x0 = j < %s ? $P_ldn%s(v0 + %d, %d) : $P_zero();\n", N, kx, vv * 16, n);
    cg_emit(o, "        $P_v x1 = j + 1 < %s ? $P_ldn%s(v1 + %d, %d) : $P_zero();\n", N, kx, vv * 16, n);
    cg_emit(o, "        _mm512_storeu_si512(Vp + j / 2 * %d + %d, _mm512_permutexvar_epi16(ix, (__m512i)_mm512_cvtne2ps_pbh(x1, x0))); }\n",
            t->dp, vv * 16);
  }
  cg_emit(o, "    }\n  }\n");
}

/* Pack k^T and v (row strides ks2, vs2) for the nblk keys this chunk can
 * see into Kt and Vp: fp32, or the bf16 pairs. */
static void emit_pack_kv(cg_out *o, const cgen_attn_spec *s, const cg_at *t, int64_t ks2, int64_t vs2, const char *N) {
  int w = o->isa->w;
  char ld[200];
  const char *kt = cg_ctype(s->kv_dtype), *kx = cg_vsuffix(s->kv_dtype);
  int64_t D = s->d, DV = s->dv;
  cg_emit(o, "  for (long j = 0; j < nblk; j++) {\n    const %s *kr = k + (j < %s ? j : 0) * %ldL;\n", kt, N, (long)ks2);
  if (t->bf) {
    emit_pack_k_bf16(o, s, t, N);
  } else {
    cg_scalar_ld(o, ld, sizeof ld, s->kv_dtype, "kr", "d");
    /* k^T blocked per key tile: [j / BN][d][j %% BN], so a tile is contiguous */
    cg_emit(o, "    float *kd = Kt + j / %d * %ldL + j %% %d;\n", t->bn, (long)(D * t->bn), t->bn);
    cg_emit(o, "    if (j < %s) for (long d = 0; d < %ldL; d++) kd[d * %d] = %s;\n", N, (long)D, t->bn, ld);
    cg_emit(o, "    else for (long d = 0; d < %ldL; d++) kd[d * %d] = 0.0f;\n", (long)D, t->bn);
    cg_emit(o, "    const %s *vr = v + (j < %s ? j : 0) * %ldL;\n", kt, N, (long)vs2);
    for (int vv = 0; vv < t->nvd; vv++)
      cg_emit(o, "    $P_st(Vp + j * %d + %d, j < %s ? $P_ldn%s(vr + %d, %d) : $P_zero());\n", t->dp, vv * w, N, kx,
              vv * w, (int)(DV - vv * w < w ? DV - vv * w : w));
  }
  cg_emit(o, "  }\n");
  if (t->bf) emit_pack_v_bf16(o, s, t, vs2, N);
}

/* The score and output kernels variant t needs: full micro-tiles, then the
 * row tails of a full block and of the last (shorter) block (every tail when
 * the row count is read at run time). */
static void emit_row_kernels(cg_out *o, const cgen_attn_spec *s, const cg_at *t, const cg_atv *av, int lastbm) {
  for (int r = 1; r <= t->rs; r++)
    if (r == t->rs || r == t->bm % t->rs || r == lastbm % t->rs || av->rt) emit_skern(o, s, t, av, r);
  for (int r = 1; r <= t->ro; r++)
    if (r == t->ro || r == t->bm % t->ro || r == lastbm % t->ro || av->rt) emit_okern(o, t, r);
}

/* The task's head: its (batch, head, query chunk), scratch, operand rows
 * (strides from av), the chunk's rows [q0, q1) and the keys it packs. */
static void emit_task_head(cg_out *o, const cgen_attn_spec *s, const cg_at *t, const cg_atv *av) {
  const char *qt = cg_ctype(s->q_dtype), *kt = cg_ctype(s->kv_dtype), *ot = cg_ctype(s->o_dtype);
  int64_t D = s->d;
  /* per-thread scratch layout (floats) */
  int64_t o_kt = 0, o_v = o_kt + D * t->np, o_q = o_v + t->np * t->dp, o_s = o_q + (int64_t)t->bm * D,
          o_o = o_s + (int64_t)t->bm * t->bn, o_ml = o_o + (int64_t)t->bm * t->dp;
  cg_emit(o, "%s void $P_%stask(void *vc, int task, int tid) {\n", fattr(t), t->vx);
  cg_emit(o, "  const $F_ctx *cx = (const $F_ctx *)vc;\n");
  cg_emit(o, "  long qc = task %% %s, bh = task / %s, bb = bh / %s, hh = bh %% %s;\n", av->qs, av->qs, av->h, av->h);
  cg_emit(o, "  float *ws = (float *)cx->sc.thr[tid];\n");
  cg_emit(o, "  float *Kt = ws + %ldL, *Vp = ws + %ldL, *Qs = ws + %ldL, *S = ws + %ldL, *O = ws + %ldL;\n", (long)o_kt,
          (long)o_v, (long)o_q, (long)o_s, (long)o_o);
  cg_emit(o, "  float *mrow = ws + %ldL, *lrow = mrow + %d, *alpha = lrow + %d;\n", (long)o_ml, t->bm, t->bm);
  cg_emit(o, "  const %s *q = (const %s *)cx->q + bb * %s + hh * %s;\n", qt, qt, av->st[ST_Q], av->st[ST_Q + 1]);
  cg_emit(o, "  const %s *k = (const %s *)cx->k + bb * %s + hh * %s;\n", kt, kt, av->st[ST_K], av->st[ST_K + 1]);
  cg_emit(o, "  const %s *v = (const %s *)cx->v + bb * %s + hh * %s;\n", kt, kt, av->st[ST_V], av->st[ST_V + 1]);
  cg_emit(o, "  %s *out = (%s *)cx->o + bb * %s + hh * %s;\n", ot, ot, av->st[ST_O], av->st[ST_O + 1]);
  if (s->has_mask)
    cg_emit(o, "  const void *mkb = (const %s *)cx->mask + bb * %s + hh * %s;\n", cg_ctype(s->mask_dtype), av->st[ST_MASK],
            av->st[ST_MASK + 1]);
  cg_emit(o, "  (void)bb; (void)hh;\n");
  cg_emit(o, "  long q0 = qc * %s, q1 = q0 + %s < %s ? q0 + %s : %s;\n", av->chunk, av->chunk, av->m, av->chunk, av->m);
  if (s->causal) cg_emit(o, "  long nlim = q1 < %s ? q1 : %s;\n", av->n, av->n);
  else cg_emit(o, "  long nlim = %s;\n", av->n);
  cg_emit(o, "  long nblk = (nlim + %d) / %d * %d;\n", t->bn - 1, t->bn, t->bn);
  emit_pack_kv(o, s, t, t->kr, t->vr, av->n);
}

/* Query rows i0 + [0, bm) into Qs, scaled to base 2 (bf: as d2 pairs), and
 * their running max, sum and O cleared. */
static void emit_load_q(cg_out *o, const cgen_attn_spec *s, const cg_at *t) {
  int w = o->isa->w;
  const char *qt = cg_ctype(s->q_dtype), *qx = cg_vsuffix(s->q_dtype);
  float scale = s->scale != 0.0f ? s->scale : (float)(1.0 / sqrt((double)s->d));
  int64_t D = s->d;
  cg_emit(o, "    for (int r = 0; r < bm; r++) {\n      const %s *qr = q + (i0 + r) * %ldL;\n", qt, (long)t->qr);
  cg_emit(o, "      for (long d = 0; d < %ldL; d += %d) {\n", (long)D, w);
  cg_emit(o, "        int nd = %ldL - d < %d ? (int)(%ldL - d) : %d;\n", (long)D, w, (long)D, w);
  cg_emit(o, "        $P_v x = (nd == %d ? $P_ld%s(qr + d) : $P_ldn%s(qr + d, nd)) * $P_set1(%#.9gf);\n", w, qx, qx,
          (double)scale * LOG2E);
  if (t->bf) /* row r as d2 pairs: an odd d's last pair takes the 0 of lane d */
    cg_emit(o, "        _mm256_mask_storeu_epi16((uint16_t *)Qs + r * %ldL + d, (__mmask16)((1u << ((nd + 1) & ~1)) - 1u),"
               " (__m256i)_mm512_cvtneps_pbh(x));\n      }\n", (long)(2 * t->d2));
  else
    cg_emit(o, "        if (nd == %d) $P_st(Qs + r * %ldL + d, x); else $P_stn(Qs + r * %ldL + d, x, nd);\n      }\n", w,
            (long)D, (long)D);
  cg_emit(o, "      mrow[r] = -INFINITY; lrow[r] = 0.0f;\n");
  for (int vv = 0; vv < t->nvd; vv++) cg_emit(o, "      $P_st(O + r * %d + %d, $P_zero());\n", t->dp, vv * w);
  cg_emit(o, "    }\n");
}

/* One key block's two steps over the bm rows: scores and the softmax update
 * ($P_s<rows>), then O += P V ($P_o<rows>), full micro-tiles then a tail. */
static void emit_key_block(cg_out *o, const cgen_attn_spec *s, const cg_at *t, const cg_atv *av, int lastbm) {
  const char *mk = s->has_mask ? "mkb" : "0";
  /* bf: Qs and k^T rows hold d2 words, P rows BN bf16 (BN / 2 floats), V pair rows of keys */
  long qd = (long)(t->bf ? t->d2 : s->d);
  int ps = t->bf ? t->bn / 2 : t->bn;
  const char *vj = t->bf ? "(j0 >> 1)" : "j0";
  cg_emit(o, "      for (; r + %d <= bm; r += %d) $P_%ss%d(Qs + r * %ldL, Kt + j0 * %ldL, S + r * %d, i0 + r, j0, %s,"
             " mrow + r, lrow + r, alpha + r%s);\n", t->rs, t->rs, t->vx, t->rs, qd, qd, ps, mk, av->sk_args);
  if (t->rs > 1) {
    cg_emit(o, "      switch (bm - r) {\n");
    for (int q = 1; q < t->rs; q++)
      if (q == t->bm % t->rs || q == lastbm % t->rs || av->rt)
      cg_emit(o, "        case %d: $P_%ss%d(Qs + r * %ldL, Kt + j0 * %ldL, S + r * %d, i0 + r, j0, %s, mrow + r, lrow + r,"
                 " alpha + r%s); break;\n", q, t->vx, q, qd, qd, ps, mk, av->sk_args);
    cg_emit(o, "        default: break;\n      }\n");
  }
  cg_emit(o, "      r = 0;\n");
  cg_emit(o, "      for (; r + %d <= bm; r += %d) $P_%so%d(S + r * %d, Vp + %s * %d, kb, alpha + r, O + r * %d);\n", t->ro,
          t->ro, t->vx, t->ro, ps, vj, t->dp, t->dp);
  if (t->ro > 1) {
    cg_emit(o, "      switch (bm - r) {\n");
    for (int q = 1; q < t->ro; q++)
      if (q == t->bm % t->ro || q == lastbm % t->ro || av->rt)
      cg_emit(o, "        case %d: $P_%so%d(S + r * %d, Vp + %s * %d, kb, alpha + r, O + r * %d); break;\n", q, t->vx, q,
              ps, vj, t->dp, t->dp);
    cg_emit(o, "        default: break;\n      }\n");
  }
}

/* The rows' O / l in the output dtype. */
static void emit_store_rows(cg_out *o, const cgen_attn_spec *s, const cg_at *t) {
  int w = o->isa->w;
  const char *ot = cg_ctype(s->o_dtype), *ox = cg_vsuffix(s->o_dtype);
  cg_emit(o, "    for (int r = 0; r < bm; r++) {\n      $P_v il = $P_set1(1.0f / lrow[r]);\n");
  cg_emit(o, "      %s *orow = out + (i0 + r) * %ldL;\n", ot, (long)t->orow);
  for (int vv = 0; vv < t->nvd; vv++) {
    int n = (int)(s->dv - vv * w < w ? s->dv - vv * w : w);
    if (n == w) cg_emit(o, "      $P_st%s(orow + %d, $P_ld(O + r * %d + %d) * il);\n", ox, vv * w, t->dp, vv * w);
    else cg_emit(o, "      $P_stn%s(orow + %d, $P_ld(O + r * %d + %d) * il, %d);\n", ox, vv * w, t->dp, vv * w, n);
  }
  cg_emit(o, "    }\n");
}

/* A ShapeSet object's run: the binding's sizes and strides into cx (each an
 * expression of the symbols or its constant), checked against the largest
 * the scratch is sized for, and its split into query chunks. */
static void emit_run_sizes(cg_out *o, const cgen_attn_spec *s, const cg_at *t) {
  cg_atv cv;
  cgen_attn_spec k = *s;
  memset(&k.rt, 0, sizeof k.rt);
  attn_values(&k, t, &cv); /* the constants */
  const char *e3[3] = {s->rt.b, s->rt.m, s->rt.n}, *f3[3] = {"B", "M", "N"}, *c3[3] = {cv.b, cv.m, cv.n};
  for (int i = 0; i < 3; i++) cg_emit(o, "  cx.%s = %s;\n", f3[i], e3[i] ? e3[i] : c3[i]);
  cg_emit(o, "  if (cx.B < 1 || cx.B > %ldL || cx.M < 1 || cx.M > %ldL || cx.N < 1 || cx.N > %ldL) return -1;\n", (long)s->b,
          (long)s->m, (long)s->n);
  for (int i = 0; i < ST_N; i++) cg_emit(o, "  cx.st[%d] = %s;\n", i, rt_stride(s, i) ? rt_stride(s, i) : cv.st[i]);
  cg_emit(o, "  { long bh = cx.B * %ldL; cx.qs = bh >= %ldL ? 1 : (%ldL + bh - 1) / bh; }\n", (long)s->h, (long)t->target,
          (long)t->target);
  cg_emit(o, "  cx.chunk = ((cx.M + cx.qs - 1) / cx.qs + %d) / %d * %d;\n  cx.qs = (cx.M + cx.chunk - 1) / cx.chunk;\n",
          t->bm - 1, t->bm, t->bm);
}

/* $P_run: the context, the scratch (tot floats a thread), the tasks. */
static void emit_run(cg_out *o, const cgen_attn_spec *s, const cg_at *t, const cg_atv *av, int64_t tot) {
  cg_emit(o, "static $T int $P_%srun(hprt_pool *pool, const void *q, const void *k, const void *v, const void *mask,"
             " void *o) {\n", t->vx);
  cg_emit(o, "  $F_ctx cx;\n  cx.q = q; cx.k = k; cx.v = v; cx.mask = mask; cx.o = o;\n");
  if (av->rt) emit_run_sizes(o, s, t);
  cg_emit(o, "  if (hprt_scratch_get(pool, 0, %ldUL, &cx.sc)) return -1;\n", (long)(tot * 4));
  if (av->rt) cg_emit(o, "  hprt_pool_run(pool, (int)(cx.B * %ldL * cx.qs), $P_%stask, &cx);\n", (long)s->h, t->vx);
  else cg_emit(o, "  hprt_pool_run(pool, %ld, $P_%stask, &cx);\n", (long)(s->b * s->h * t->qs), t->vx);
  cg_emit(o, "  hprt_scratch_put(&cx.sc);\n  return 0;\n}\n");
}

/* The tiling t of the attention s (the ISA's helpers already emitted):
 * kernels, task, run ($P_<t->vx>run). */
static void emit_tiling(cg_out *o, const cgen_attn_spec *s, const cg_at *t) {
  cg_atv av;
  attn_values(s, t, &av);
  if (t->vx[0]) /* one of several (key_tiles) */
    cg_emit(o, "/* key tiles of %d, %d-row score and %d-row output kernels */\n", t->bn, t->rs, t->ro);
  int lastbm = (int)(s->m % t->bm ? s->m % t->bm : t->bm);
  emit_row_kernels(o, s, t, &av, lastbm);
  emit_task_head(o, s, t, &av);
  /* query blocks */
  cg_emit(o, "  for (long i0 = q0; i0 < q1; i0 += %d) {\n", t->bm);
  cg_emit(o, "    int bm = q1 - i0 < %d ? (int)(q1 - i0) : %d;\n", t->bm, t->bm);
  emit_load_q(o, s, t);
  if (s->causal) cg_emit(o, "    long jend = i0 + bm < %s ? i0 + bm : %s;\n", av.n, av.n);
  else cg_emit(o, "    long jend = %s;\n", av.n);
  cg_emit(o, "    for (long j0 = 0; j0 < jend; j0 += %d) {\n", t->bn);
  cg_emit(o, "      long kb = jend - j0 < %d ? jend - j0 : %d;\n", t->bn, t->bn);
  cg_emit(o, "      int r = 0;\n");
  emit_key_block(o, s, t, &av, lastbm);
  cg_emit(o, "    }\n");
  /* normalise and store */
  emit_store_rows(o, s, t);
  cg_emit(o, "  }\n}\n");
  int64_t tot = (int64_t)s->d * t->np + t->np * t->dp + (int64_t)t->bm * s->d + (int64_t)t->bm * t->bn +
                (int64_t)t->bm * t->dp + 3L * t->bm + 16;
  emit_run(o, s, t, &av, tot);
}

/* How many key tiles a ShapeSet object's variant t of s holds, *step keys
 * apart: with N read at run time on a vector ISA, the upper corner's tile
 * (t->bn: the plan's or the default, clipped to that N) and up to 3 smaller
 * ones, each a multiple of the vector w, so that a binding runs the
 * smallest tile that holds its N, as a specialised object with the same
 * tile does (resolve: min(tile, N rounded up to w); the same tile where
 * the step is w, 16 of 64 keys on AVX-512).  Else 1. */
static int key_tiles(const cgen_attn_spec *s, const cg_isa *isa, const cg_at *t, int *step) {
  *step = t->bn;
  if (!s->rt.n || isa->id == CGEN_ISA_SCALAR) return 1;
  *step = (int)cg_rup((t->bn + 3) / 4, isa->w);
  return (t->bn + *step - 1) / *step;
}

/* One ISA's variant t of the attention s: its helpers, then one tiling, or
 * (key_tiles) one per key tile and a $P_run that picks by the binding's N. */
static void emit_variant(cg_out *o, const cgen_attn_spec *s, const cg_at *t) {
  cg_emit_isa_helpers(o);
  int step, nk = key_tiles(s, o->isa, t, &step);
  if (nk == 1) emit_tiling(o, s, t);
  for (int k = 1; nk > 1 && k <= nk; k++) {
    cgen_attn_spec q = *s;
    q.bn = k < nk ? k * step : t->bn;
    cg_at tk;
    resolve(&q, o->isa, &tk);
    snprintf(tk.vx, sizeof tk.vx, "b%d_", tk.bn);
    emit_tiling(o, s, &tk);
  }
  if (nk > 1) {
    cg_emit(o, "static $T int $P_run(hprt_pool *pool, const void *q, const void *k, const void *v, const void *mask,"
               " void *o) {\n  long n_ = %s; /* the keys: the tile a specialised object takes */\n", s->rt.n);
    for (int k = 1; k < nk; k++) cg_emit(o, "  if (n_ <= %dL) return $P_b%d_run(pool, q, k, v, mask, o);\n", k * step, k * step);
    cg_emit(o, "  return $P_b%d_run(pool, q, k, v, mask, o);\n}\n", t->bn);
  }
  if (o->isa->id != CGEN_ISA_SCALAR) cg_emit(o, "#endif /* HPRT_X86 */\n");
}

harp_status cgen_attn(harp_error *e, const cgen_attn_spec *s, const char *fn, ut_str *out) {
  if (!s || !out) return ut_fail(e, HARP_E_INVALID_ARG, NULL, "cgen_attn: NULL argument");
  if (cg_check_name(e, fn)) return e->code;
  if (s->b < 1 || s->h < 1 || s->m < 1 || s->n < 1 || s->d < 1 || s->dv < 1)
    return ut_fail(e, HARP_E_INVALID_ARG, NULL, "cgen_attn: sizes must be >= 1");
  if (s->d > 4096 || s->dv > 4096 || s->b * s->h * s->m * (s->d > s->dv ? s->d : s->dv) >= (1L << 40) ||
      s->n >= (1L << 31) || s->m >= (1L << 31))
    return ut_fail(e, HARP_E_LIMIT, NULL, "cgen_attn: sizes beyond what the kernel handles");
  if (!cg_dtype_ok(s->q_dtype) || !cg_dtype_ok(s->kv_dtype) || !cg_dtype_ok(s->o_dtype) ||
      (s->has_mask && !cg_dtype_ok(s->mask_dtype)))
    return ut_fail(e, HARP_E_UNSUPPORTED, NULL, "cgen_attn: dtypes must be fp32, fp16 or bf16");
  if (!isfinite(s->scale)) return ut_fail(e, HARP_E_INVALID_ARG, NULL, "cgen_attn: scale is not finite");
  for (int i = 0; i < 4; i++)
    if (s->has_mask && s->mask_s[i] < 0) return ut_fail(e, HARP_E_NEGATIVE_STRIDE, NULL, "cgen_attn: mask stride < 0");
  for (int i = 0; s->strided && i < 3; i++) {
    if (s->q_s[i] < 0 || s->k_s[i] < 0 || s->v_s[i] < 0 || s->o_s[i] < 0)
      return ut_fail(e, HARP_E_NEGATIVE_STRIDE, NULL, "cgen_attn: stride < 0");
    if (s->q_s[i] >= (1L << 40) || s->k_s[i] >= (1L << 40) || s->v_s[i] >= (1L << 40) || s->o_s[i] >= (1L << 40))
      return ut_fail(e, HARP_E_LIMIT, NULL, "cgen_attn: stride beyond what the kernel handles");
  }
  if (s->strided && ((s->o_s[2] < s->dv && s->m > 1) || (s->o_s[1] == 0 && s->h > 1) || (s->o_s[0] == 0 && s->b > 1)))
    return ut_fail(e, HARP_E_INVALID_ARG, NULL, "cgen_attn: output rows overlap");
  if (attn_rt(s) && !s->strided) return ut_fail(e, HARP_E_UNSUPPORTED, NULL, "cgen_attn: run-time sizes need strides");
  if (s->bm < 0 || s->bm > 1024 || s->bn < 0 || s->bn > 1024)
    return ut_fail(e, HARP_E_INVALID_ARG, NULL, "cgen_attn: tile %dx%d out of range", s->bm, s->bn);
  unsigned set = cg_isa_set(&s->tune);
  cg_out o = {.s = out, .F = fn, .bf16 = s->tune.bf16 && (set >> CGEN_ISA_AVX512 & 1u)};
  cg_set_isa(&o, NULL);
  cg_emit_runtime(out);
  cg_emit(&o, "/* ---- %s: attention b%ld h%ld m%ld n%ld d%ld dv%ld%s%s ---- */\n", fn, (long)s->b, (long)s->h,
          (long)s->m, (long)s->n, (long)s->d, (long)s->dv, s->causal ? " causal" : "", s->has_mask ? " mask" : "");
  cg_emit_scalar_conv(&o);
  cg_emit(&o, "typedef struct { const void *q, *k, *v, *mask; void *o; hprt_scratch sc;%s } $F_ctx;\n",
          attn_rt(s) ? " long B, M, N, qs, chunk, st[11];" : "");
  for (int i = 0; i < CGEN_ISA_COUNT; i++) {
    if (!(set >> i & 1u)) continue;
    cg_at t;
    resolve(s, cg_isa_get((cgen_isa)i), &t);
    cg_set_isa(&o, cg_isa_get((cgen_isa)i));
    emit_variant(&o, s, &t);
  }
  cg_emit_dispatch(&o, set, s->tune.force_isa,
                   "hprt_pool *pool, const void *q, const void *k, const void *v, const void *mask, void *o",
                   "pool, q, k, v, mask, o");
  if (out->oom) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "cgen: out of memory");
  return HARP_OK;
}
