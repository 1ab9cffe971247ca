/* contract_row.c — softmax and layernorm regions read as row kernels, for
 * every target.
 * Needs: a region's blocks in the Poly-View, the Function.
 * Gives: ct_row_* and ct_read_softmax, ct_read_layernorm (contract.h).
 *
 * The row kernels (the CPU's cgen_softmax, the CUDA backend's row kernels)
 * take dense rows along the last axis.  The readers match the block
 * sequence the frontend lowers softmax and layernorm to, check every read is
 * row-major (the row statistics broadcast along the row) and say which
 * buffers the kernel reads.  A decline says which check failed; it lands in
 * a comment of the generated code. */
#include <math.h>
#include <string.h>

#include "kernel/contract.h"
#include "harp/polycore.h"
#include "harp/region.h"

#define DECLINE(msg) \
  do {               \
    *why = (msg);    \
    return false;    \
  } while (0)

static const tiny_node *node(const ct_row *w, int n) { return &w->s->g->nodes[n]; }

int ct_row_slot_of(const ct_row *w, int n) { return ct_slot_of(w->K, w->s->f, n); }

tiny_dtype ct_row_storage(const ct_row *w, int n) { return w->s->f->buffers[w->s->f->buffer_of[n]].dtype; }

int ct_row_block_of(const ct_row *w, int n) {
  for (int k = 0; k < w->R->nblocks; k++)
    if (poly_block(w->s->pv, w->R->blocks[k])->node == n) return w->R->blocks[k];
  return -1;
}

bool ct_row_strides(const ct_row *w, int bi, int a, int64_t *st, int64_t *off) {
  const poly_block_info *b = poly_block(w->s->pv, bi);
  harp_error e2 = {0};
  bool aff = false;
  if (poly_access_strides(&e2, w->s->pv, bi, a, st, off, &aff) || !aff) return false;
  int64_t size[POLY_MAX_VARS];
  ct_block_sizes(w->s->g, b, size);
  for (int v = 0; v < b->nvars; v++) {
    if (size[v] <= 1) st[v] = 0;
    if (st[v] < 0) return false;
  }
  return true;
}

/* Does read a of block bi walk its variables row-major (the last `bcast`
 * variables not at all), from offset 0? */
static bool reads_rowmajor(const ct_row *w, int bi, int a, int bcast) {
  if (bi < 0 || a < 0) return false;
  const poly_block_info *b = poly_block(w->s->pv, bi);
  int64_t st[POLY_MAX_VARS], off, size[POLY_MAX_VARS], want = 1;
  if (!ct_row_strides(w, bi, a, st, &off) || off != 0) return false;
  ct_block_sizes(w->s->g, b, size);
  for (int v = b->nvars - 1; v >= 0; v--) {
    bool moves = v < b->nvars - bcast && size[v] > 1;
    if (st[v] != (moves ? want : 0)) return false;
    if (moves) want *= size[v];
  }
  return true;
}

/* The access of block bi that reads node t (-1: none). */
static int access_of(const ct_row *w, int bi, int t) {
  if (bi < 0) return -1;
  const poly_block_info *b = poly_block(w->s->pv, bi);
  for (int a = 0; a < b->naccess; a++)
    if (!b->access[a].write && b->access[a].tensor == t) return a;
  return -1;
}

/* The base of source k of n through views (its block's access). */
static int base_src(const ct_row *w, int n, int k) {
  int bi = ct_row_block_of(w, n);
  return bi < 0 ? -1 : poly_block(w->s->pv, bi)->access[k].tensor;
}

/* Whether source k of n is a constant read as one value (no pad of it
 * read anywhere: a padded fill is no scale or eps), its value into *v. */
static bool const_src(const ct_row *w, int n, int k, double *v) {
  int bi = ct_row_block_of(w, n), c = base_src(w, n, k);
  if (c < 0 || node(w, c)->op != TINY_CONST || poly_block(w->s->pv, bi)->access[k].nfill) return false;
  if (v) *v = node(w, c)->a.cnst.value;
  return true;
}

/* A REDUCE of op over the last axis of its input, fp32 accumulation, no init. */
static bool last_axis_reduce(const ct_row *w, int n, tiny_reduce_op op) {
  const tiny_node *x = node(w, n);
  if (x->op != TINY_REDUCE || x->a.reduce.op != op || x->a.reduce.dtype != TINY_FP32 || x->a.reduce.has_init) return false;
  const tiny_node *in = node(w, x->src[0].node);
  return x->a.reduce.n == 1 && x->a.reduce.axis_idx[0] == in->shape.rank - 1;
}

int ct_row_unpeel(const ct_row *w, int n) {
  for (int i = 0; i < w->npeel; i++)
    if (w->peel[i] == n) return w->peel_src[i];
  return n;
}

int ct_row_compute_nodes(const ct_row *w, int *out, int cap) {
  int n = 0;
  for (int k = 0; k < w->R->nblocks; k++) {
    int nd = poly_block(w->s->pv, w->R->blocks[k])->node;
    if (ct_row_unpeel(w, nd) != nd) continue;
    if (n >= cap) return -1;
    out[n++] = nd;
  }
  return n;
}

void ct_row_init(ct_row *w, const ct_src *s, int kernel) {
  memset(w, 0, sizeof *w);
  w->s = s;
  w->kernel = kernel;
  w->K = &s->f->kernels[kernel];
  w->R = &s->f->part->regions[w->K->region];
  /* the widening CASTs of outside tensors read point for point */
  for (int k = 0; k < w->R->nblocks && w->npeel < CT_MAX_PEEL; k++) {
    int bi = w->R->blocks[k];
    const poly_block_info *b = poly_block(s->pv, bi);
    const tiny_node *n = &s->g->nodes[b->node];
    if (b->kind != POLY_EWISE || n->op != TINY_CAST || n->a.cast.to != TINY_FP32) continue;
    int src = b->access[0].tensor;
    tiny_dtype from = s->g->nodes[src].dtype;
    if ((from != TINY_FP16 && from != TINY_BF16 && from != TINY_FP32) || ct_row_block_of(w, src) >= 0 ||
        ct_row_slot_of(w, src) < 0 || !tiny_shape_equal(&n->shape, &s->g->nodes[src].shape) ||
        !reads_rowmajor(w, bi, 0, 0))
      continue;
    w->peel[w->npeel] = b->node;
    w->peel_src[w->npeel++] = src;
  }
}

/* The rows a row reduction `red` walks: its kept variables (rows) by its one
 * reduced variable (cols).  The iteration space, not the shape of the
 * tensor read: a reshape may regroup the base tensor's axes. */
static bool row_space(const ct_row *w, int red, int64_t *rows, int64_t *cols) {
  int bi = ct_row_block_of(w, red);
  if (bi < 0) return false;
  const poly_block_info *b = poly_block(w->s->pv, bi);
  if (b->nvars != b->nout + 1) return false;
  int64_t size[POLY_MAX_VARS];
  ct_block_sizes(w->s->g, b, size);
  *rows = 1;
  for (int v = 0; v < b->nout; v++) *rows *= size[v];
  *cols = size[b->nout];
  return *cols >= 1;
}

/* t read row-major (dense from offset 0 in the readers' iteration order) by
 * every reader. */
static bool read_by_rows(const ct_row *w, int x, const int *readers, int nreaders) {
  for (int i = 0; i < nreaders; i++) {
    int bi = ct_row_block_of(w, readers[i]);
    if (!reads_rowmajor(w, bi, access_of(w, bi, x), 0)) return false;
  }
  return true;
}

/* x (as the readers see it: the tensor, or a peeled CAST of it) read so, and
 * a buffer of the kernel. */
static bool row_input(const ct_row *w, int x, const int *readers, int nreaders) {
  return ct_row_slot_of(w, ct_row_unpeel(w, x)) >= 0 && read_by_rows(w, x, readers, nreaders);
}

/* The kernel's tensor for node (read through a peel), offset 0. */
static ct_tensor tensor_of(const ct_row *w, int n) {
  n = ct_row_unpeel(w, n);
  return (ct_tensor){n, ct_row_slot_of(w, n), ct_row_storage(w, n), 0};
}

/* The prologue of a QDQ softmax: ns[0..nn) elementwise steps with constants
 * (ct_epi_chain) from the outside tensor ns[0] reads, into out->pro; each
 * read point for point.  The chain's last node into *last, the tensor it
 * starts from into *x; false when the steps are not such a chain. */
static bool softmax_pro(const ct_row *w, const int *ns, int nn, ct_softmax *out, int *x, int *last) {
  const tiny_graph *g = w->s->g;
  const tiny_node *n0 = node(w, ns[0]);
  *x = -1;
  for (int k = 0; k < n0->nsrc && *x < 0; k++) /* the operand that is no constant */
    if (!const_src(w, ns[0], k, NULL)) *x = n0->src[k].node;
  const char *why = NULL;
  if (*x < 0 || !ct_epi_chain(g, ns, nn, *x, false, out->pro, &out->npro, last, &why)) return false;
  if (node(w, *last)->dtype != TINY_FP32 || !row_input(w, *x, &ns[0], 1)) return false;
  for (int i = 1; i < nn; i++)
    if (!read_by_rows(w, ns[i - 1], &ns[i], 1)) return false;
  return true;
}

/* The epilogue of a QDQ softmax: ns[0..nn) after y, into out->epi, the
 * node stored into *o; each read point for point. */
static bool softmax_epi(const ct_row *w, const int *ns, int nn, int y, ct_softmax *out, int *o) {
  const char *why = NULL;
  *o = y;
  if (!nn) return true;
  if (!ct_epi_chain(w->s->g, ns, nn, y, false, out->epi, &out->nepi, o, &why)) return false;
  for (int i = 0; i < nn; i++)
    if (!read_by_rows(w, i ? ns[i - 1] : y, &ns[i], 1)) return false;
  return true;
}

/* softmax: y = e [* k] / bcast(SUM e), e = EXP2(MUL(SUB(x, bcast(MAX x)), c)) | EXP(SUB(..)) | EXP(MUL(..)),
 * x: the input, the input times a constant, or (QDQ) a chain of elementwise steps of it; then a chain
 * after y ([CAST], or a QuantizeLinear's steps) */
bool ct_read_softmax(const ct_row *w, ct_softmax *out, const char **why) {
  *why = NULL;
  memset(out, 0, sizeof *out);
  out->ymul = 1.0f;
  int ns[64], n = ct_row_compute_nodes(w, ns, 64);
  if (n < 5) return false;
  int imx = 0; /* the row max: what comes before it is the prologue */
  while (imx < n && !last_axis_reduce(w, ns[imx], TINY_RMAX)) imx++;
  if (imx >= n || imx > CT_MAX_EPI) return false;
  /* a positive constant scale first (softmax(x / T), softmax(x * s)): the
   * max of c x is c times the max of x, so c folds into the kernel's scale
   * (unless c x overflows where x does not) */
  int k = 0, pre = -1, pre_x = -1, chain_x = -1, chain_last = -1; /* the scaling node and the x it scales */
  double pc = 1;
  const tiny_node *p0 = node(w, ns[0]);
  if (imx == 1 && n >= 6 && (p0->op == TINY_MUL || p0->op == TINY_FDIV)) {
    int a = base_src(w, ns[0], 0), b = base_src(w, ns[0], 1);
    bool cb = const_src(w, ns[0], 1, &pc), ca = p0->op == TINY_MUL && !cb && const_src(w, ns[0], 0, &pc);
    if ((cb || ca) && pc > 0 && isfinite(pc)) {
      pre = ns[k++];
      pre_x = cb ? a : b;
      if (p0->op == TINY_FDIV) pc = 1 / pc;
    }
  }
  if (imx > k) { /* a QDQ prologue */
    if (k || !softmax_pro(w, ns, imx, out, &chain_x, &chain_last)) return false;
    k = imx;
  }
  if (n - k < 5) return false;
  int mx = ns[k++], d = ns[k++], t = -1, ex;
  double c = 1.4426950408889634, ym = 1;
  if (node(w, ns[k])->op == TINY_MUL) t = ns[k++];
  if (n - k < 3) return false;
  ex = ns[k++];
  int z = -1, num = ex; /* the SUM, the numerator (e, or e times a constant) */
  for (int r = 0; r < 2 && k < n; r++) {
    int q = ns[k];
    if (z < 0 && last_axis_reduce(w, q, TINY_RSUM)) z = q, k++;
    else if (num == ex && node(w, q)->op == TINY_MUL && base_src(w, q, 0) == ex && const_src(w, q, 1, &ym) && ym > 0 &&
             isfinite(ym))
      num = q, k++;
    else break;
  }
  if (z < 0 || k >= n) return false;
  int y = ns[k++], o = y;
  int xin = base_src(w, mx, 0); /* what MAX and SUB read: x, the scaled x or the prologue's last value */
  if (pre >= 0 && xin != pre) return false;
  if (chain_last >= 0 && xin != chain_last) return false;
  int x = pre >= 0 ? pre_x : chain_x >= 0 ? chain_x : xin;
  if (!last_axis_reduce(w, mx, TINY_RMAX) || node(w, d)->op != TINY_SUB || base_src(w, d, 0) != xin ||
      base_src(w, d, 1) != mx)
    return false;
  if (t >= 0 && (base_src(w, t, 0) != d || !const_src(w, t, 1, &c) || !(c > 0))) return false;
  bool e2 = node(w, ex)->op == TINY_EXP2, e1 = node(w, ex)->op == TINY_EXP;
  if (!((t >= 0 && (e2 || e1) && base_src(w, ex, 0) == t) || (t < 0 && e1 && base_src(w, ex, 0) == d))) return false;
  if (t >= 0 && e1) c *= 1.4426950408889634; /* exp(c u) = exp2(c log2(e) u) */
  if (base_src(w, z, 0) != ex || node(w, y)->op != TINY_FDIV || base_src(w, y, 0) != num || base_src(w, y, 1) != z)
    return false;
  if (!softmax_epi(w, ns + k, n - k, y, out, &o)) return false;
  if (w->R->nout != 1 || w->R->out_values[0] != o || !tiny_dtype_is_float(node(w, x)->dtype)) return false;
  int64_t rows, cols;
  int rd[2] = {mx, d};
  bool rows_ok = chain_x >= 0 ? read_by_rows(w, xin, rd, 2)
                 : pre < 0    ? row_input(w, x, rd, 2)
                              : row_input(w, x, &pre, 1) && read_by_rows(w, pre, rd, 2);
  if (!row_space(w, mx, &rows, &cols) || !rows_ok) DECLINE("softmax input is not read row by row");
  int bd = ct_row_block_of(w, d), by = ct_row_block_of(w, y);
  if (!reads_rowmajor(w, bd, access_of(w, bd, mx), 1) || !reads_rowmajor(w, by, access_of(w, by, z), 1) ||
      !reads_rowmajor(w, by, access_of(w, by, num), 0) || (num != ex && !read_by_rows(w, ex, &num, 1)))
    DECLINE("softmax reads its row statistics other than broadcast along the row");
  if (ct_row_slot_of(w, o) < 0) DECLINE("softmax output is not a buffer of the kernel");
  out->cols = cols;
  out->rows = rows;
  out->x = tensor_of(w, x);
  out->y = tensor_of(w, o);
  out->scale = (float)(pc * c / 1.4426950408889634);
  out->ymul = (float)ym;
  if (!(out->scale > 0) || !isfinite(out->scale)) DECLINE("softmax scale out of range");
  return true;
}

bool ct_softmax_plain(const ct_softmax *s) { return !s->npro && !s->nepi && s->ymul == 1.0f; }

/* layernorm: mean = SUM x * 1/n; xc = x - mean; var = SUM xc*xc * 1/n;
 * y = xc * bcast(RSQRT(var + eps)) [* gamma] [+ beta] [CAST] */
bool ct_read_layernorm(const ct_row *w, ct_layernorm *out, const char **why) {
  *why = NULL;
  memset(out, 0, sizeof *out);
  int ns[16], n = ct_row_compute_nodes(w, ns, 16);
  if (n < 9 || n > 12) return false;
  int s1 = ns[0], mean = ns[1], xc = ns[2], sq = ns[3], s2 = ns[4], var = ns[5], ve = ns[6], rs = ns[7], y = ns[8];
  int x = base_src(w, s1, 0);
  double inv = 0, inv2 = 0, eps = 0;
  if (!last_axis_reduce(w, s1, TINY_RSUM) || node(w, mean)->op != TINY_MUL || base_src(w, mean, 0) != s1 ||
      !const_src(w, mean, 1, &inv))
    return false;
  if (node(w, xc)->op != TINY_SUB || base_src(w, xc, 0) != x || base_src(w, xc, 1) != mean) return false;
  if (node(w, sq)->op != TINY_MUL || base_src(w, sq, 0) != xc || base_src(w, sq, 1) != xc) return false;
  if (!last_axis_reduce(w, s2, TINY_RSUM) || base_src(w, s2, 0) != sq || node(w, var)->op != TINY_MUL ||
      base_src(w, var, 0) != s2 || !const_src(w, var, 1, &inv2))
    return false;
  if (node(w, ve)->op != TINY_ADD || base_src(w, ve, 0) != var || !const_src(w, ve, 1, &eps)) return false;
  if (node(w, rs)->op != TINY_RSQRT || base_src(w, rs, 0) != ve) return false;
  if (node(w, y)->op != TINY_MUL || base_src(w, y, 0) != xc || base_src(w, y, 1) != rs) return false;
  int k = 9, gamma = -1, beta = -1, cur = y, pb[2] = {-1, -1};
  if (k < n && node(w, ns[k])->op == TINY_MUL && base_src(w, ns[k], 0) == cur)
    gamma = base_src(w, ns[k], 1), pb[0] = ct_row_block_of(w, ns[k]), cur = ns[k++];
  if (k < n && node(w, ns[k])->op == TINY_ADD && base_src(w, ns[k], 0) == cur)
    beta = base_src(w, ns[k], 1), pb[1] = ct_row_block_of(w, ns[k]), cur = ns[k++];
  if (k < n && node(w, ns[k])->op == TINY_CAST && base_src(w, ns[k], 0) == cur) cur = ns[k++];
  if (k != n || w->R->nout != 1 || w->R->out_values[0] != cur || !tiny_dtype_is_float(node(w, x)->dtype)) return false;
  int64_t rows, cols;
  if (!row_space(w, s1, &rows, &cols)) return false;
  if (fabs(inv * (double)cols - 1) > 1e-6 || fabs(inv2 * (double)cols - 1) > 1e-6) return false;
  int rd[2] = {s1, xc};
  if (!row_input(w, x, rd, 2)) DECLINE("layernorm input is not read row by row");
  int bxc = ct_row_block_of(w, xc), by = ct_row_block_of(w, y);
  if (!reads_rowmajor(w, bxc, access_of(w, bxc, mean), 1) || !reads_rowmajor(w, by, access_of(w, by, rs), 1))
    DECLINE("layernorm reads its row statistics other than broadcast along the row");
  if (ct_row_slot_of(w, cur) < 0) DECLINE("layernorm output is not a buffer of the kernel");
  /* gamma / beta: vectors along the row (strides 0 .. 0 1), buffers of the kernel */
  int pt[2] = {gamma, beta};
  for (int i = 0; i < 2; i++) {
    if (pt[i] < 0) continue;
    int64_t st[POLY_MAX_VARS], off;
    const poly_block_info *b = pb[i] >= 0 ? poly_block(w->s->pv, pb[i]) : NULL;
    if (!b || ct_row_slot_of(w, ct_row_unpeel(w, pt[i])) < 0 || !ct_row_strides(w, pb[i], 1, st, &off) || off != 0 ||
        st[b->nvars - 1] != 1)
      DECLINE("layernorm's gamma or beta is not a vector along the row");
    for (int v = 0; v + 1 < b->nvars; v++)
      if (st[v]) DECLINE("layernorm's gamma or beta varies across rows");
  }
  out->cols = cols;
  out->rows = rows;
  out->x = tensor_of(w, x);
  out->y = tensor_of(w, cur);
  out->gamma = gamma >= 0 ? tensor_of(w, gamma) : (ct_tensor){-1, -1, TINY_FP32, 0};
  out->beta = beta >= 0 ? tensor_of(w, beta) : (ct_tensor){-1, -1, TINY_FP32, 0};
  out->eps = (float)eps;
  return true;
}
