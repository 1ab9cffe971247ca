/* lower_nn.c — contractions and normalizations -> Tiny IR (seed 000 §2, §7).
 * Needs: lower.c helpers.  Gives: lw_matmul, lw_conv2d, lw_attention,
 * lw_layernorm, lw_softmax, lw_pool2d.
 *
 *   matmul     A[.., M, K] -> RESHAPE [.., M, K, 1]; B[.., K, N] -> [.., 1, K, N];
 *              EXPAND to [.., M, K, N]; MUL; REDUCE SUM over K (fp32)   (seed 000 §1.2)
 *   conv2d     RESHAPE x [N, 1, C, H, W]; PAD; POOL (the sliding window as an
 *              affine VIEW, no im2col); PERMUTE -> [N, 1, Oh, Ow, C, Kh, Kw];
 *              w -> [1, Cout, 1, 1, C, Kh, Kw]; MUL; REDUCE SUM over C, Kh, Kw.
 *              Groups add a G axis: [N, G, Rcout, Oh, Ow, Cin, Kh, Kw] (seed 001 §5.2).
 *   attention  S = REDUCE SUM(MUL(q [.., M, 1, D], k [.., 1, N, D])) * scale (+ mask);
 *              causal: WHERE(j > i + N - M, -inf, S) with i, j from a POOL-made
 *              iota; softmax as max, SUB, EXP2(* log2 e), SUM, FDIV; P V as MUL +
 *              REDUCE SUM over N (seed 001 §5.3).
 *   layernorm  two passes: mean = SUM / n, var = SUM((x - mean)^2) / n, then
 *              (x - mean) * RSQRT(var + eps) * gamma + beta.
 * Reductions accumulate in fp32; fp16/bf16 results are cast back at the end. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "fe_lower.h"

static const fe_dim *ONE(lw *L) { return fe_dim_int(L->fp->arena, 1); }

static fe_shape shape_of(int n, const fe_dim *const *d) {
  fe_shape s = {0};
  s.rank = n;
  for (int i = 0; i < n; i++) s.d[i] = d[i];
  return s;
}

/* s followed by extra dims. */
static fe_shape cat(const fe_shape *s, int n, const fe_dim *const *d) {
  fe_shape r = *s;
  for (int i = 0; i < n && r.rank < TINY_MAX_RANK; i++) r.d[r.rank++] = d[i];
  return r;
}

static tiny_dtype acc_of(tiny_dtype dt) { return tiny_dtype_is_float(dt) ? TINY_FP32 : dt; }

/* ---- matmul ------------------------------------------------------------------ */
/* With A a merge of trailing axes k1..kr of a node (a flatten), the
 * contraction runs over k1..kr of that node and B is split to
 * [.., k1, .., kr, N] instead: both reads stay affine. */
int lw_matmul(lw *L) {
  const fe_node *n = L->cur, *a = lw_in(L, 0), *b = lw_in(L, 1);
  int R = n->shape.rank, ra = a->shape.rank, rb = b->shape.rank;
  const lw_split *sp = &L->split[n->in[0]];
  fe_shape ash = a->shape;
  int r = 1, ta;
  if (sp->node >= 0 && R + sp->r <= TINY_MAX_RANK) {
    ash = sp->shape;
    r = sp->r;
    ta = sp->node;
  } else {
    ta = lw_tin(L, 0, a->dtype);
  }
  const fe_dim *one = ONE(L), *M = a->shape.d[ra - 2], *N = b->shape.d[rb - 1];
  fe_shape as = {0}, bs = {0}, full = {0};
  int T = R + r; /* [batch.., M, k1..kr, N] */
  as.rank = bs.rank = full.rank = T;
  for (int i = 0; i < T; i++) as.d[i] = bs.d[i] = one;
  for (int i = 0; i < ash.rank; i++) as.d[R - ra + i] = ash.d[i];
  for (int i = 0; i < rb - 2; i++) bs.d[R - rb + i] = b->shape.d[i];
  for (int i = 0; i < R - 2; i++) full.d[i] = n->shape.d[i];
  full.d[R - 2] = M;
  int axes[TINY_MAX_RANK];
  for (int j = 0; j < r; j++) {
    const fe_dim *k = r == 1 ? b->shape.d[rb - 2] : ash.d[ash.rank - r + j];
    bs.d[R - 1 + j] = k;
    full.d[R - 1 + j] = ash.d[ash.rank - r + j];
    axes[j] = R - 1 + j;
  }
  bs.d[T - 1] = full.d[T - 1] = N;
  int x = lw_fit(L, lw_reshape(L, ta, &as), &as, &full);
  int y = lw_fit(L, lw_reshape(L, lw_tin(L, 1, b->dtype), &bs), &bs, &full);
  tiny_dtype acc = acc_of(n->dtype);
  int red = lw_reduce(L, lw_bin(L, TINY_MUL, x, y), TINY_RSUM, axes, r, acc);
  return lw_cast_if(L, red, acc, n->dtype);
}

/* ---- conv2d ---------------------------------------------------------------------- */
static int pool(lw *L, int x, const fe_dim *kh, const fe_dim *kw, const int64_t *stride, const int64_t *dil) {
  tiny_arg_pool a = {0};
  a.n = 2;
  if (!lw_dim(L, kh, &a.kernel[0]) || !lw_dim(L, kw, &a.kernel[1])) return -1;
  for (int i = 0; i < 2; i++) {
    a.stride[i] = tiny_dim_int(stride[i]);
    a.dilation[i] = tiny_dim_int(dil ? dil[i] : 1);
  }
  tiny_src s[1] = {{x < 0 ? -2 : x, 0}};
  return lw_emit(L, TINY_POOL, s, 1, &a);
}

static int pad_hw(lw *L, int x, int rank, const int64_t *p) {
  if (!p[0] && !p[1] && !p[2] && !p[3]) return x;
  tiny_arg_pad a = {0};
  a.n = rank;
  for (int i = 0; i < rank; i++) a.lo[i] = a.hi[i] = tiny_dim_int(0);
  a.lo[rank - 2] = tiny_dim_int(p[0]);
  a.hi[rank - 2] = tiny_dim_int(p[1]);
  a.lo[rank - 1] = tiny_dim_int(p[2]);
  a.hi[rank - 1] = tiny_dim_int(p[3]);
  tiny_src s[1] = {{x < 0 ? -2 : x, 0}};
  return lw_emit(L, TINY_PAD, s, 1, &a);
}

/* x read through a PERMUTE (a channel shuffle: reshape -> transpose ->
 * reshape; an NHWC -> NCHW transpose) or a RESHAPE: through the conv's window the input
 * would be indexed with divisions or against the channel-plane layout the
 * conv templates read, and the conv fell to generic loops (a ShuffleNet
 * depthwise layer, 136x28x28, 0.64 ms instead of ~0.07).  Copy it into a
 * tensor of its own (x + 0, a region of its own: one pass) so the conv reads
 * a dense buffer. */
static int dense_conv_input(lw *L, int x) {
  for (int k = x; k >= 0;) {
    const tiny_node *t = &L->t->nodes[k];
    if (tiny_op_class(t->op) != TC_MOVE || t->nsrc < 1) break;
    if (t->op == TINY_PERMUTE)
      for (int a = 0; a < t->a.permute.n; a++)
        if (t->a.permute.perm[a] != a) return lw_bin_imm(L, TINY_ADD, x, 0.0);
    /* a reshape: the templates do not see through one either ("not a
     * strided view"), even a split of a contiguous axis (shapes are not
     * inferred yet here: any reshape counts) */
    if (t->op == TINY_RESHAPE) return lw_bin_imm(L, TINY_ADD, x, 0.0);
    k = t->src[0].node;
  }
  return x;
}

int lw_conv2d(lw *L) {
  const fe_node *n = L->cur, *x = lw_in(L, 0), *w = lw_in(L, 1);
  const fe_dim *one = ONE(L), *N = x->shape.d[0], *C = x->shape.d[1], *H = x->shape.d[2], *W = x->shape.d[3];
  const fe_dim *Cout = w->shape.d[0], *Cin = w->shape.d[1], *Kh = w->shape.d[2], *Kw = w->shape.d[3];
  const fe_dim *Oh = n->shape.d[2], *Ow = n->shape.d[3];
  int64_t G = n->a.conv.groups;
  tiny_dtype dt = n->dtype;
  int tx = lw_tin(L, 0, dt), tw = lw_tin(L, 1, dt), r;
  if (tx >= 0) tx = dense_conv_input(L, tx);
  if (G == 1) {
    fe_shape xs = shape_of(5, (const fe_dim *[]){N, one, C, H, W});
    int xw = pool(L, pad_hw(L, lw_reshape(L, tx, &xs), 5, n->a.conv.pad), Kh, Kw, n->a.conv.stride, n->a.conv.dilation);
    int xp = lw_permute(L, xw, (const int[]){0, 1, 3, 4, 2, 5, 6}, 7);
    fe_shape xps = shape_of(7, (const fe_dim *[]){N, one, Oh, Ow, C, Kh, Kw});
    fe_shape wrs = shape_of(7, (const fe_dim *[]){one, Cout, one, one, Cin, Kh, Kw});
    fe_shape full = shape_of(7, (const fe_dim *[]){N, Cout, Oh, Ow, C, Kh, Kw});
    int a = lw_fit(L, xp, &xps, &full), b = lw_fit(L, lw_reshape(L, tw, &wrs), &wrs, &full);
    r = lw_reduce(L, lw_bin(L, TINY_MUL, a, b), TINY_RSUM, (const int[]){4, 5, 6}, 3, TINY_FP32);
  } else {
    int64_t cout;
    fe_dim_is_int(Cout, &cout); /* the builder requires it */
    const fe_dim *Gd = fe_dim_int(L->fp->arena, G), *Rc = fe_dim_int(L->fp->arena, cout / G);
    fe_shape xs = shape_of(6, (const fe_dim *[]){N, Gd, one, Cin, H, W});
    int xw = pool(L, pad_hw(L, lw_reshape(L, tx, &xs), 6, n->a.conv.pad), Kh, Kw, n->a.conv.stride, n->a.conv.dilation);
    int xp = lw_permute(L, xw, (const int[]){0, 1, 2, 4, 5, 3, 6, 7}, 8);
    fe_shape xps = shape_of(8, (const fe_dim *[]){N, Gd, one, Oh, Ow, Cin, Kh, Kw});
    fe_shape wrs = shape_of(8, (const fe_dim *[]){one, Gd, Rc, one, one, Cin, Kh, Kw});
    fe_shape full = shape_of(8, (const fe_dim *[]){N, Gd, Rc, Oh, Ow, Cin, Kh, Kw});
    int a = lw_fit(L, xp, &xps, &full), b = lw_fit(L, lw_reshape(L, tw, &wrs), &wrs, &full);
    r = lw_reduce(L, lw_bin(L, TINY_MUL, a, b), TINY_RSUM, (const int[]){5, 6, 7}, 3, TINY_FP32);
    r = lw_reshape(L, r, &n->shape);
  }
  if (n->nin > 2 && n->in[2] > 0) {
    fe_shape bs = shape_of(4, (const fe_dim *[]){one, Cout, one, one});
    int b = lw_cast_if(L, lw_tin(L, 2, dt), dt, TINY_FP32);
    r = lw_bin(L, TINY_ADD, r, lw_fit(L, lw_reshape(L, b, &bs), &bs, &n->shape));
  }
  return lw_cast_if(L, r, TINY_FP32, dt);
}

/* ---- attention ---------------------------------------------------------------------- */
/* [X] holding X - i (fp32): ones padded by X zeros, summed over a sliding
 * window of X (a POOL), the first X of the X + 1 window positions. */
static int iota_rev(lw *L, const fe_dim *X) {
  tiny_dim x;
  if (!lw_dim(L, X, &x)) return -1;
  const fe_dim *one = ONE(L);
  fe_shape s1 = shape_of(1, &one), sx = shape_of(1, &X);
  int c = lw_const(L, 1.0, TINY_FP32);
  int e = lw_fit(L, lw_reshape(L, c, &s1), &s1, &sx);
  tiny_arg_pad pa = {0};
  pa.n = 1;
  pa.lo[0] = tiny_dim_int(0);
  pa.hi[0] = x;
  tiny_src src[1] = {{e < 0 ? -2 : e, 0}};
  int p = lw_emit(L, TINY_PAD, src, 1, &pa);
  tiny_arg_pool po = {0};
  po.n = 1;
  po.kernel[0] = x;
  po.stride[0] = po.dilation[0] = tiny_dim_int(1);
  src[0].node = p < 0 ? -2 : p;
  int w = lw_emit(L, TINY_POOL, src, 1, &po);
  int axis = 1;
  int s = lw_reduce(L, w, TINY_RSUM, &axis, 1, TINY_FP32);
  tiny_arg_shrink sh = {0};
  sh.n = 1;
  sh.lo[0] = tiny_dim_int(0);
  sh.hi[0] = x;
  sh.step[0] = tiny_dim_int(1);
  src[0].node = s < 0 ? -2 : s;
  return lw_emit(L, TINY_SHRINK, src, 1, &sh);
}

/* [.., rows, E] -> [.., h, rows, E/h] */
static int split_heads(lw *L, int x, const fe_shape *xs, int h, const fe_dim *d) {
  int r = xs->rank;
  fe_shape s = *xs;
  s.d[r - 1] = fe_dim_int(L->fp->arena, h);
  s.d[r] = d;
  s.rank = r + 1;
  int perm[TINY_MAX_RANK];
  for (int i = 0; i <= r; i++) perm[i] = i;
  perm[r - 2] = r - 1;
  perm[r - 1] = r - 2;
  return lw_permute(L, lw_reshape(L, x, &s), perm, r + 1);
}

int lw_attention(lw *L) {
  const fe_node *n = L->cur, *q = lw_in(L, 0), *k = lw_in(L, 1), *v = lw_in(L, 2);
  const fe_node *mask = n->nin > 3 && n->in[3] > 0 ? lw_in(L, 3) : NULL;
  ut_arena *A = L->fp->arena;
  int r = q->shape.rank, nb = r - 2, h = n->a.attn.heads;
  const fe_dim *one = ONE(L), *M = q->shape.d[r - 2], *E = q->shape.d[r - 1], *N = k->shape.d[r - 2],
               *Ev = v->shape.d[r - 1], *D = E, *Dv = Ev;
  tiny_dtype dt = n->dtype;
  int tq = lw_tin(L, 0, dt), tk = lw_tin(L, 1, dt), tv = lw_tin(L, 2, dt);
  fe_shape bb = q->shape;
  bb.rank = nb;
  if (h > 1) {
    int64_t e, ev;
    fe_dim_is_int(E, &e);
    fe_dim_is_int(Ev, &ev);
    D = fe_dim_int(A, e / h);
    Dv = fe_dim_int(A, ev / h);
    tq = split_heads(L, tq, &q->shape, h, D);
    tk = split_heads(L, tk, &k->shape, h, D);
    tv = split_heads(L, tv, &v->shape, h, Dv);
    bb.d[bb.rank++] = fe_dim_int(A, h);
  }
  int B = bb.rank;
  /* S = q k^T */
  fe_shape qs = cat(&bb, 3, (const fe_dim *[]){M, one, D}), ks = cat(&bb, 3, (const fe_dim *[]){one, N, D});
  fe_shape full = cat(&bb, 3, (const fe_dim *[]){M, N, D}), sc = cat(&bb, 2, (const fe_dim *[]){M, N});
  int a = lw_fit(L, lw_reshape(L, tq, &qs), &qs, &full), b = lw_fit(L, lw_reshape(L, tk, &ks), &ks, &full);
  int axis = B + 2;
  int S = lw_reduce(L, lw_bin(L, TINY_MUL, a, b), TINY_RSUM, &axis, 1, TINY_FP32);
  /* scale */
  int64_t dv;
  if (n->a.attn.scale != 0) {
    S = lw_bin_imm(L, TINY_MUL, S, n->a.attn.scale);
  } else if (fe_dim_is_int(D, &dv) || (L->bind && fe_dim_eval(D, L->bind, &dv))) {
    S = lw_bin_imm(L, TINY_MUL, S, dv > 0 ? 1.0 / sqrt((double)dv) : 1.0);
  } else {
    fe_shape s0 = {0};
    int sc0 = lw_un(L, TINY_RSQRT, lw_count(L, &D, 1));
    S = lw_bin(L, TINY_MUL, S, lw_fit(L, sc0, &s0, &sc));
  }
  if (mask) S = lw_bin(L, TINY_ADD, S, lw_fit(L, lw_cast_if(L, lw_tin(L, 3, dt), dt, TINY_FP32), &mask->shape, &sc));
  bool guard = false;
  if (n->a.attn.causal) {
    /* key j is hidden from query i when N - j < M - i, i.e. j > i + (N - M) */
    int rowv = iota_rev(L, M), colv = fe_dim_cmp(M, N) == FE_SAME ? rowv : iota_rev(L, N);
    fe_shape rs = shape_of(2, (const fe_dim *[]){M, one}), cs = shape_of(2, (const fe_dim *[]){one, N});
    fe_shape mn = shape_of(2, (const fe_dim *[]){M, N});
    int ri = lw_fit(L, lw_reshape(L, rowv, &rs), &rs, &mn), ci = lw_fit(L, lw_reshape(L, colv, &cs), &cs, &mn);
    int hidden = lw_fit(L, lw_bin(L, TINY_CMPLT, ci, ri), &mn, &sc);
    tiny_src ws[3] = {{hidden < 0 ? -2 : hidden, 0}, {-1, -INFINITY}, {S < 0 ? -2 : S, 0}};
    S = lw_emit(L, TINY_WHERE, ws, 3, NULL);
    guard = fe_dim_cmp(M, N) != FE_SAME; /* with M > N the first rows see no key */
  }
  /* softmax over N, max-shifted, with exp2 */
  axis = B + 1;
  fe_shape k1 = cat(&bb, 2, (const fe_dim *[]){M, one});
  int mx = lw_reduce(L, S, TINY_RMAX, &axis, 1, TINY_FP32);
  if (guard) mx = lw_bin_imm(L, TINY_MAX, mx, -FLT_MAX);
  int d = lw_bin(L, TINY_SUB, S, lw_fit(L, lw_reshape(L, mx, &k1), &k1, &sc));
  int ex = lw_un(L, TINY_EXP2, lw_bin_imm(L, TINY_MUL, d, LOG2E));
  int z = lw_reduce(L, ex, TINY_RSUM, &axis, 1, TINY_FP32);
  if (guard) z = lw_bin_imm(L, TINY_MAX, z, 1e-30); /* a row with no visible key gives 0, not NaN */
  int P = lw_bin(L, TINY_FDIV, ex, lw_fit(L, lw_reshape(L, z, &k1), &k1, &sc));
  P = lw_cast_if(L, P, TINY_FP32, dt);
  /* O = P v */
  fe_shape ps = cat(&bb, 3, (const fe_dim *[]){M, N, one}), vs = cat(&bb, 3, (const fe_dim *[]){one, N, Dv});
  fe_shape full2 = cat(&bb, 3, (const fe_dim *[]){M, N, Dv});
  a = lw_fit(L, lw_reshape(L, P, &ps), &ps, &full2);
  b = lw_fit(L, lw_reshape(L, tv, &vs), &vs, &full2);
  int o = lw_reduce(L, lw_bin(L, TINY_MUL, a, b), TINY_RSUM, &axis, 1, TINY_FP32);
  o = lw_cast_if(L, o, TINY_FP32, dt);
  if (h > 1) { /* [.., h, M, Dv] -> [.., M, h, Dv] -> [.., M, Ev] */
    int perm[TINY_MAX_RANK];
    for (int i = 0; i < nb + 3; i++) perm[i] = i;
    perm[nb] = nb + 1;
    perm[nb + 1] = nb;
    int op = lw_permute(L, o, perm, nb + 3);
    fe_shape ms = q->shape; /* [.., M, h, Dv] */
    ms.d[nb + 1] = fe_dim_int(A, h);
    ms.d[nb + 2] = Dv;
    ms.rank = nb + 3;
    lw_note_split(L, op, &ms, &n->shape);
    o = lw_reshape(L, op, &n->shape);
  }
  return o;
}

/* ---- normalizations ---------------------------------------------------------------------- */
/* sum over axes divided by their element count, fp32 */
static int mean_over(lw *L, int x, const fe_shape *xs, const int *axes, int na) {
  const fe_dim *dims[TINY_MAX_RANK];
  int64_t prod = 1, v;
  bool known = true;
  for (int i = 0; i < na; i++) {
    dims[i] = xs->d[axes[i]];
    known = known && (fe_dim_is_int(dims[i], &v) || (L->bind && fe_dim_eval(dims[i], L->bind, &v))) && ut_mul_ok(prod, v, &prod);
  }
  int s = lw_reduce(L, x, TINY_RSUM, axes, na, TINY_FP32);
  return known ? lw_bin_imm(L, TINY_MUL, s, 1.0 / (double)(prod ? prod : 1)) : lw_bin(L, TINY_FDIV, s, lw_count(L, dims, na));
}

int lw_layernorm(lw *L) {
  const fe_node *n = L->cur, *x = lw_in(L, 0);
  int r = x->shape.rank, a0 = n->a.ln.axis, axes[TINY_MAX_RANK], na = r - a0;
  tiny_dtype dt = n->dtype;
  for (int i = 0; i < na; i++) axes[i] = a0 + i;
  fe_shape kept;
  lw_keep1(L, &x->shape, axes, na, &kept);
  int xf = lw_cast_if(L, lw_tin(L, 0, dt), dt, TINY_FP32);
  int mean = mean_over(L, xf, &x->shape, axes, na);
  int xc = lw_bin(L, TINY_SUB, xf, lw_fit(L, lw_reshape(L, mean, &kept), &kept, &x->shape));
  int var = mean_over(L, lw_bin(L, TINY_MUL, xc, xc), &x->shape, axes, na);
  int rs = lw_un(L, TINY_RSQRT, lw_bin_imm(L, TINY_ADD, var, n->a.ln.eps));
  int y = lw_bin(L, TINY_MUL, xc, lw_fit(L, lw_reshape(L, rs, &kept), &kept, &x->shape));
  for (int i = 1; i <= 2; i++) {
    if (n->in[i] <= 0) continue;
    const fe_node *p = lw_in(L, i);
    int tp = lw_fit(L, lw_cast_if(L, lw_tin(L, i, dt), dt, TINY_FP32), &p->shape, &x->shape);
    y = lw_bin(L, i == 1 ? TINY_MUL : TINY_ADD, y, tp);
  }
  return lw_cast_if(L, y, TINY_FP32, dt);
}

int lw_softmax(lw *L) {
  const fe_node *n = L->cur, *x = lw_in(L, 0);
  int axis = n->a.axis.axis;
  tiny_dtype dt = n->dtype;
  fe_shape kept;
  lw_keep1(L, &x->shape, &axis, 1, &kept);
  int xf = lw_cast_if(L, lw_tin(L, 0, dt), dt, TINY_FP32);
  int mx = lw_reduce(L, xf, TINY_RMAX, &axis, 1, TINY_FP32);
  int d = lw_bin(L, TINY_SUB, xf, lw_fit(L, lw_reshape(L, mx, &kept), &kept, &x->shape));
  int e = lw_un(L, TINY_EXP2, lw_bin_imm(L, TINY_MUL, d, LOG2E));
  int z = lw_reduce(L, e, TINY_RSUM, &axis, 1, TINY_FP32);
  int y = lw_bin(L, TINY_FDIV, e, lw_fit(L, lw_reshape(L, z, &kept), &kept, &x->shape));
  return lw_cast_if(L, y, TINY_FP32, dt);
}

/* POOL w's windows [N, C, Oh, Ow, kh, kw] reshaped to n's own sizes where
 * a window count is an expression of symbols lowered for a ShapeSet
 * (L->derive; an ordinary lowering keeps its graph as it was): Tiny's
 * POOL counts its windows as numbers, the reshape gives them the names
 * (derived symbols) the importer gave n's dims, as a conv's result has
 * them, and the reductions keep them; else w. */
static int named_windows(lw *L, const fe_node *n, int w, const fe_dim *kh, const fe_dim *kw) {
  int64_t v;
  bool sym = false;
  for (int i = 0; i < n->shape.rank; i++) sym |= !fe_dim_is_int(n->shape.d[i], &v);
  if (!sym || !L->derive || w < 0 || n->shape.rank != 4) return w;
  fe_shape s = n->shape;
  s.rank = 6, s.d[4] = kh, s.d[5] = kw;
  return lw_reshape(L, w, &s);
}

int lw_pool2d(lw *L) {
  const fe_node *n = L->cur;
  tiny_dtype dt = n->dtype;
  ut_arena *A = L->fp->arena;
  const fe_dim *kh = fe_dim_int(A, n->a.pool.kernel[0]), *kw = fe_dim_int(A, n->a.pool.kernel[1]);
  int w = named_windows(L, n, pool(L, lw_tin(L, 0, dt), kh, kw, n->a.pool.stride, NULL), kh, kw);
  const int axes[2] = {4, 5};
  if (n->op == HG_OP_MAX_POOL2D) return lw_reduce(L, w, TINY_RMAX, axes, 2, dt);
  int s = lw_reduce(L, w, TINY_RSUM, axes, 2, TINY_FP32);
  s = lw_bin_imm(L, TINY_MUL, s, 1.0 / (double)(n->a.pool.kernel[0] * n->a.pool.kernel[1]));
  return lw_cast_if(L, s, TINY_FP32, dt);
}
