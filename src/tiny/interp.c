/* interp.c — the reference interpreter: the oracle every backend is checked
 * against, so clarity beats speed.
 * Needs: a prepared graph (tiny_prepare, all symbols bound).
 * Gives: tiny_interp / tiny_interp_nodes.
 *
 * Values are strided views over reference-counted buffers.  Float dtypes are
 * held as fp32 (fp16/bf16 rounded at INPUT, CAST, CONST and on output); i32
 * and bool are held as int32.  Elementwise arithmetic is fp32 (int32 with
 * wrap-around for i32).  REDUCE accumulates in its dtype, rounding after every
 * step when that dtype is fp16/bf16.  PERMUTE, EXPAND, SHRINK, FLIP, affine
 * VIEW/POOL and contiguous RESHAPE are views; PAD, non-affine VIEW, GATHER and
 * non-contiguous RESHAPE materialize (a row of the last axis at a time).  An
 * fp32 or i32 INPUT is a view of the caller's tensor, never written. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harp/interp.h"
#include "tiny_int.h"
#include "util/util.h"

#define R TINY_MAX_RANK

typedef struct ibuf {
  int refs;
  bool is_int;   /* int32 storage (i32, bool) rather than float */
  bool borrowed; /* data is the caller's (an fp32 / i32 INPUT): never written, not freed */
  void *data;
} ibuf;

typedef struct ival {
  ibuf *buf;
  int64_t off;
  int rank;
  int64_t shape[R];
  int64_t stride[R];
} ival;

typedef struct ictx {
  harp_error *e;
  const tiny_graph *g;
  const tiny_symtab *syms;
  ival *vals;
} ictx;

static bool is_int_dtype(tiny_dtype t) { return !tiny_dtype_is_float(t); }

/* An int32 value stored in dtype t: i8 / u8 keep its low 8 bits. */
static int32_t narrow(tiny_dtype t, int32_t v) {
  if (t == TINY_I8) return (int8_t)(uint8_t)(uint32_t)v;
  if (t == TINY_U8) return (uint8_t)(uint32_t)v;
  return v;
}

static float round_to(tiny_dtype t, float v) {
  if (t == TINY_FP16) return ut_round_f16(v);
  if (t == TINY_BF16) return ut_round_bf16(v);
  return v;
}

static int64_t numel_of(const ival *v) {
  int64_t n = 1;
  for (int i = 0; i < v->rank; i++) n *= v->shape[i];
  return n;
}

static void release(ival *v) {
  if (v->buf && --v->buf->refs == 0) {
    if (!v->buf->borrowed) free(v->buf->data);
    free(v->buf);
  }
  v->buf = NULL;
}

/* v's shape and row-major strides: rank dims of shape. */
static void dense(ival *v, int rank, const int64_t *shape) {
  int64_t n = 1;
  v->rank = rank;
  for (int i = rank - 1; i >= 0; i--) {
    v->shape[i] = shape[i];
    v->stride[i] = n;
    n *= shape[i];
  }
}

/* A fresh contiguous value of the given shape. */
static harp_status fresh(ictx *c, const char *id, bool is_int, int rank, const int64_t *shape, ival *out) {
  memset(out, 0, sizeof *out);
  dense(out, rank, shape);
  int64_t n = numel_of(out);
  ibuf *b = ut_xcalloc(1, sizeof *b);
  void *d = ut_xcalloc((size_t)(n ? n : 1), 4);
  if (!b || !d) {
    free(b);
    free(d);
    return ut_fail(c->e, HARP_E_NO_MEMORY, id, "out of memory for %lld elements", (long long)n);
  }
  b->refs = 1;
  b->is_int = is_int;
  b->data = d;
  out->buf = b;
  return HARP_OK;
}

static ival share(const ival *v) {
  ival r = *v;
  r.buf->refs++;
  return r;
}

/* ---- iteration over views ------------------------------------------------ */
typedef struct mit {
  int rank, nv;
  int64_t shape[R], idx[R];
  int64_t off[4];
  const int64_t *strides[4];
} mit;

static void mit_init(mit *it, int rank, const int64_t *shape, int nv, const ival *const *vs) {
  memset(it, 0, sizeof *it);
  it->rank = rank;
  memcpy(it->shape, shape, sizeof(int64_t) * (size_t)rank);
  it->nv = nv;
  for (int v = 0; v < nv; v++) {
    it->off[v] = vs[v]->off;
    it->strides[v] = vs[v]->stride;
  }
}

static void mit_next(mit *it) {
  for (int d = it->rank - 1; d >= 0; d--) {
    it->idx[d]++;
    for (int v = 0; v < it->nv; v++) it->off[v] += it->strides[v][d];
    if (it->idx[d] < it->shape[d]) return;
    for (int v = 0; v < it->nv; v++) it->off[v] -= it->strides[v][d] * it->shape[d];
    it->idx[d] = 0;
  }
}

static float ldf(const ival *v, int64_t off) {
  return v->buf->is_int ? (float)((int32_t *)v->buf->data)[off] : ((float *)v->buf->data)[off];
}
static int32_t ldi(const ival *v, int64_t off) {
  return v->buf->is_int ? ((int32_t *)v->buf->data)[off] : (int32_t)((float *)v->buf->data)[off];
}

/* Copy view src into view dst of the same shape, a row of the last axis
 * at a time (both hold 4-byte elements: fp32 or int32, copied as bits). */
static void copy_view(const ival *dst, const ival *src) {
  int r = src->rank;
  int64_t len = r ? src->shape[r - 1] : 1, n = numel_of(src), rows = len ? n / len : 0;
  int64_t sd = r ? dst->stride[r - 1] : 0, ss = r ? src->stride[r - 1] : 0;
  mit it;
  const ival *vs[2] = {dst, src};
  mit_init(&it, r ? r - 1 : 0, src->shape, 2, vs);
  uint32_t *o = dst->buf->data;
  const uint32_t *x = src->buf->data;
  for (int64_t row = 0; row < rows; row++, mit_next(&it)) {
    uint32_t *po = o + it.off[0];
    const uint32_t *px = x + it.off[1];
    if (sd == 1 && ss == 1) memcpy(po, px, (size_t)len * sizeof *po);
    else
      for (int64_t j = 0; j < len; j++) po[j * sd] = px[j * ss];
  }
}

/* Copy any view into a fresh contiguous buffer. */
static harp_status materialize(ictx *c, const char *id, const ival *v, ival *out) {
  if (fresh(c, id, v->buf->is_int, v->rank, v->shape, out)) return c->e->code;
  copy_view(out, v);
  return HARP_OK;
}

static bool is_contiguous(const ival *v) {
  int64_t want = 1;
  for (int i = v->rank - 1; i >= 0; i--) {
    if (v->shape[i] != 1 && v->stride[i] != want) return false;
    want *= v->shape[i];
  }
  return true;
}

/* ---- elementwise --------------------------------------------------------- */
/* The reference values are the op table's f32 and i32 columns
 * (harp/tiny_ops.h), expressions in the operands a and b (and a ternary
 * op's c). */
static float f_eval(tiny_op op, float a, float b, float c) {
  switch (op) {
#define F32(e, cls, arg, dt, epi, f32, ...) \
  case TINY_##e: return (float)(f32);
    TINY_OPS(F32)
#undef F32
  default: return NAN;
  }
}

static int32_t i_eval(tiny_op op, int32_t a, int32_t b) {
  switch (op) {
#define I32(e, cls, arg, dt, epi, f32, i32, ...) \
  case TINY_##e: return (int32_t)(i32);
    TINY_OPS(I32)
#undef I32
  default: return 0;
  }
}

/* Float unary/binary ops row by row: the op switch is hoisted out of the
 * inner loop, which walks the last axis with a fixed stride per operand and
 * computes the op's f32 column inline. */
static harp_status float_rows(tiny_op op, tiny_class cls, const ival *const *vs, ival *out) {
  int r = out->rank, nv = cls == TC_BINARY ? 2 : 1;
  int64_t len = out->shape[r - 1], rows = numel_of(out) / len;
  mit it;
  mit_init(&it, r - 1, out->shape, nv, vs);
  const float *pa = vs[0]->buf->data, *pb = nv > 1 ? vs[1]->buf->data : NULL;
  int64_t sa = vs[0]->stride[r - 1], sb = nv > 1 ? vs[1]->stride[r - 1] : 0;
  float *o = out->buf->data;
  for (int64_t row = 0; row < rows; row++, mit_next(&it), o += len) {
    const float *x = pa + it.off[0], *y = pb ? pb + it.off[1] : NULL;
    switch (op) {
#define LOOP(e, cls, arg, dt, epi, f32, ...)          \
  case TINY_##e:                                      \
    for (int64_t j = 0; j < len; j++) {               \
      float a = x[j * sa], b = y ? y[j * sb] : 0.0f;  \
      const float c = 0.0f; /* a ternary op's: none here */ \
      (void)a, (void)b, (void)c;                      \
      o[j] = (float)(f32);                            \
    }                                                 \
    break;
      TINY_OPS(LOOP)
#undef LOOP
    default: break;
    }
  }
  return HARP_OK;
}

static harp_status eval_elementwise(ictx *c, const tiny_node *n, ival *out) {
  const ival *vs[TINY_MAX_SRC];
  for (int k = 0; k < n->nsrc; k++) vs[k] = &c->vals[n->src[k].node];
  /* The dtype the arithmetic runs in: that of the value operands. */
  const tiny_node *ref = &c->g->nodes[n->src[n->op == TINY_WHERE ? 1 : 0].node];
  bool int_math = is_int_dtype(ref->dtype);
  bool int_out = is_int_dtype(n->dtype);
  int64_t shape[R];
  for (int i = 0; i < n->shape.rank; i++) shape[i] = n->shape.d[i].n;
  if (fresh(c, n->id, int_out, n->shape.rank, shape, out)) return c->e->code;
  int64_t cnt = numel_of(out);
  float *fo = out->buf->data;
  int32_t *io = out->buf->data;
  tiny_class cls = tiny_op_class(n->op);
  if (!int_math && !int_out && (cls == TC_UNARY || cls == TC_BINARY) && out->rank > 0 && cnt > 0)
    return float_rows(n->op, cls, vs, out);
  mit it;
  mit_init(&it, out->rank, out->shape, n->nsrc, vs);
  for (int64_t i = 0; i < cnt; i++, mit_next(&it)) {
    if (cls == TC_UNARY || cls == TC_BINARY) {
      int nb = cls == TC_BINARY; /* a unary op's b: its a, never read */
      if (int_math) {
        int32_t r = i_eval(n->op, ldi(vs[0], it.off[0]), ldi(vs[nb], it.off[nb]));
        if (int_out) io[i] = narrow(n->dtype, r); else fo[i] = (float)r;
      } else {
        float r = f_eval(n->op, ldf(vs[0], it.off[0]), ldf(vs[nb], it.off[nb]), 0.0f);
        if (int_out) io[i] = narrow(n->dtype, (int32_t)r); else fo[i] = r;
      }
    } else if (n->op != TINY_WHERE) { /* MULADD: floats only (TD_FLOAT) */
      fo[i] = f_eval(n->op, ldf(vs[0], it.off[0]), ldf(vs[1], it.off[1]), ldf(vs[2], it.off[2]));
    } else {
      bool cond = ldi(vs[0], it.off[0]) != 0;
      int v = cond ? 1 : 2;
      if (int_out) io[i] = ldi(vs[v], it.off[v]);
      else fo[i] = ldf(vs[v], it.off[v]);
    }
  }
  return HARP_OK;
}

static harp_status eval_cast(ictx *c, const tiny_node *n, ival *out) {
  const ival *x = &c->vals[n->src[0].node];
  tiny_dtype from = c->g->nodes[n->src[0].node].dtype, to = n->a.cast.to;
  if (fresh(c, n->id, is_int_dtype(to), x->rank, x->shape, out)) return c->e->code;
  int64_t cnt = numel_of(out);
  mit it;
  const ival *vs[1] = {x};
  mit_init(&it, x->rank, x->shape, 1, vs);
  for (int64_t i = 0; i < cnt; i++, mit_next(&it)) {
    if (to == TINY_BOOL) {
      ((int32_t *)out->buf->data)[i] = is_int_dtype(from) ? ldi(x, it.off[0]) != 0 : ldf(x, it.off[0]) != 0;
    } else if (is_int_dtype(to)) { /* i32, i8, u8 */
      if (is_int_dtype(from)) {
        ((int32_t *)out->buf->data)[i] = narrow(to, ldi(x, it.off[0]));
      } else { /* truncate toward zero, saturate to int32, NaN -> 0; then narrow */
        float v = ldf(x, it.off[0]);
        int32_t r = isnan(v) ? 0 : v >= 2147483647.0f ? INT32_MAX : v <= -2147483648.0f ? INT32_MIN : (int32_t)v;
        ((int32_t *)out->buf->data)[i] = narrow(to, r);
      }
    } else {
      float v = is_int_dtype(from) ? (float)ldi(x, it.off[0]) : ldf(x, it.off[0]);
      ((float *)out->buf->data)[i] = round_to(to, v);
    }
  }
  return HARP_OK;
}

/* ---- reduce -------------------------------------------------------------- */
static harp_status eval_reduce(ictx *c, const tiny_node *n, ival *out) {
  const tiny_arg_reduce *a = &n->a.reduce;
  const ival *x = &c->vals[n->src[0].node];
  bool red[R] = {0};
  for (int i = 0; i < a->n; i++) red[a->axis_idx[i]] = true;
  ival kept = *x, inner = *x; /* kept axes / reduced axes as two views */
  kept.rank = inner.rank = 0;
  for (int d = 0; d < x->rank; d++) {
    ival *t = red[d] ? &inner : &kept;
    t->shape[t->rank] = x->shape[d];
    t->stride[t->rank] = x->stride[d];
    t->rank++;
  }
  bool int_acc = is_int_dtype(a->dtype);
  if (fresh(c, n->id, int_acc, kept.rank, kept.shape, out)) return c->e->code;
  double init = a->has_init ? a->init : a->op == TINY_RSUM ? 0.0 : a->op == TINY_RMAX ? -INFINITY : INFINITY;
  int64_t nout = numel_of(out), nin = numel_of(&inner);
  mit ko;
  const ival *kv[1] = {&kept};
  mit_init(&ko, kept.rank, kept.shape, 1, kv);
  for (int64_t o = 0; o < nout; o++, mit_next(&ko)) {
    ival sub = inner;
    sub.off = ko.off[0];
    mit ki;
    const ival *sv[1] = {&sub};
    mit_init(&ki, sub.rank, sub.shape, 1, sv);
    if (int_acc) {
      int32_t acc = a->has_init ? (int32_t)a->init : a->op == TINY_RSUM ? 0 : a->op == TINY_RMAX ? INT32_MIN : INT32_MAX;
      for (int64_t k = 0; k < nin; k++, mit_next(&ki)) {
        int32_t v = ldi(x, ki.off[0]);
        acc = a->op == TINY_RSUM ? (int32_t)((uint32_t)acc + (uint32_t)v) : a->op == TINY_RMAX ? (v > acc ? v : acc) : (v < acc ? v : acc);
      }
      ((int32_t *)out->buf->data)[o] = narrow(a->dtype, acc);
    } else {
      float acc = round_to(a->dtype, (float)init);
      if (a->op == TINY_RSUM && a->dtype == TINY_FP32 && !x->buf->is_int && sub.rank >= 1) {
        /* the common case, a row of the last reduced axis at a time: the
         * same order of additions as the general loop */
        int64_t len = sub.shape[sub.rank - 1], st = sub.stride[sub.rank - 1], rows = len ? nin / len : 0;
        mit_init(&ki, sub.rank - 1, sub.shape, 1, sv);
        for (int64_t q = 0; q < rows; q++, mit_next(&ki)) {
          const float *p = (const float *)x->buf->data + ki.off[0];
          for (int64_t k = 0; k < len; k++) acc += p[k * st];
        }
        ((float *)out->buf->data)[o] = acc;
        continue;
      }
      for (int64_t k = 0; k < nin; k++, mit_next(&ki)) {
        float v = ldf(x, ki.off[0]);
        if (a->op == TINY_RSUM) acc = acc + v;
        else if (isnan(v) || isnan(acc)) acc = NAN;
        else if (a->op == TINY_RMAX) acc = v > acc ? v : acc;
        else acc = v < acc ? v : acc;
        acc = round_to(a->dtype, acc);
      }
      ((float *)out->buf->data)[o] = acc;
    }
  }
  return HARP_OK;
}

/* ---- movement ------------------------------------------------------------ */
/* Linear form of an affine expression: sum coeff[i]*i_i + *cst. */
static bool affine_of(const tiny_expr *x, const tiny_symtab *syms, int nvars, int64_t *coeff, int64_t *cst) {
  int64_t v;
  switch (x->k) {
  case TX_CONST: *cst += x->c; return true;
  case TX_SYM:
    if (!tiny_symtab_get(syms, x->sym, &v)) return false;
    *cst += v;
    return true;
  case TX_VAR: coeff[x->var] += 1; return x->var < nvars;
  case TX_ADD: return affine_of(x->a, syms, nvars, coeff, cst) && affine_of(x->b, syms, nvars, coeff, cst);
  case TX_MUL: {
    const tiny_expr *k = x->a, *e = x->b;
    if (!tiny_expr_eval(k, NULL, syms, &v)) {
      k = x->b;
      e = x->a;
      if (!tiny_expr_eval(k, NULL, syms, &v)) return false;
    }
    int64_t sc[R] = {0}, sk = 0;
    if (!affine_of(e, syms, nvars, sc, &sk)) return false;
    for (int i = 0; i < nvars; i++) coeff[i] += v * sc[i];
    *cst += v * sk;
    return true;
  }
  default: return false; /* floordiv / mod */
  }
}

static harp_status eval_view(ictx *c, const tiny_node *n, const ival *x, ival *out) {
  const tiny_arg_view *a = &n->a.view;
  int r = n->shape.rank;
  int64_t coeff[R][R] = {{0}}, cst[R] = {0};
  bool affine = true;
  for (int j = 0; j < a->n && affine; j++) affine = affine_of(a->map[j], c->syms, r, coeff[j], &cst[j]);
  if (affine) {
    *out = share(x);
    out->rank = r;
    for (int i = 0; i < r; i++) {
      out->shape[i] = n->shape.d[i].n;
      out->stride[i] = 0;
      for (int j = 0; j < a->n; j++) out->stride[i] += coeff[j][i] * x->stride[j];
    }
    for (int j = 0; j < a->n; j++) out->off += cst[j] * x->stride[j];
    return HARP_OK;
  }
  /* General gather through the index map (floordiv / mod). */
  int64_t shape[R];
  for (int i = 0; i < r; i++) shape[i] = n->shape.d[i].n;
  if (fresh(c, n->id, x->buf->is_int, r, shape, out)) return c->e->code;
  int64_t cnt = numel_of(out), idx[R] = {0};
  for (int64_t i = 0; i < cnt; i++) {
    int64_t off = x->off;
    for (int j = 0; j < a->n; j++) {
      int64_t v;
      if (!tiny_expr_eval(a->map[j], idx, c->syms, &v) || v < 0 || v >= x->shape[j]) {
        release(out);
        return ut_fail(c->e, HARP_E_INVALID_ARG, n->id, "index_map entry %d leaves the input", j);
      }
      off += v * x->stride[j];
    }
    if (x->buf->is_int) ((int32_t *)out->buf->data)[i] = ((int32_t *)x->buf->data)[off];
    else ((float *)out->buf->data)[i] = ((float *)x->buf->data)[off];
    for (int d = r - 1; d >= 0 && ++idx[d] == shape[d]; d--) idx[d] = 0;
  }
  return HARP_OK;
}

static harp_status eval_pad(ictx *c, const tiny_node *n, const ival *x, ival *out) {
  const tiny_arg_pad *a = &n->a.pad;
  int64_t shape[R], lo[R];
  for (int i = 0; i < n->shape.rank; i++) {
    shape[i] = n->shape.d[i].n;
    tiny_dim_value(a->lo[i], c->syms, &lo[i]);
  }
  if (fresh(c, n->id, x->buf->is_int, n->shape.rank, shape, out)) return c->e->code;
  int64_t cnt = numel_of(out);
  float fv = round_to(n->dtype, (float)a->value);
  int32_t iv = n->dtype == TINY_BOOL ? a->value != 0 : narrow(n->dtype, (int32_t)a->value);
  for (int64_t i = 0; i < cnt; i++) {
    if (x->buf->is_int) ((int32_t *)out->buf->data)[i] = iv;
    else ((float *)out->buf->data)[i] = fv;
  }
  /* copy the interior: a view of out shifted by lo, iterated with x */
  ival dst = *out;
  dst.rank = x->rank;
  for (int d = 0; d < x->rank; d++) {
    dst.shape[d] = x->shape[d];
    dst.off += lo[d] * out->stride[d];
  }
  copy_view(&dst, x);
  return HARP_OK;
}

static harp_status eval_gather(ictx *c, const tiny_node *n, ival *out) {
  const ival *x = &c->vals[n->src[0].node], *ix = &c->vals[n->src[1].node];
  int axis = n->a.gather.axis;
  if (fresh(c, n->id, x->buf->is_int, ix->rank, ix->shape, out)) return c->e->code;
  int64_t cnt = numel_of(out);
  mit it;
  const ival *vs[1] = {ix};
  mit_init(&it, ix->rank, ix->shape, 1, vs);
  for (int64_t i = 0; i < cnt; i++, mit_next(&it)) {
    int32_t k = ldi(ix, it.off[0]);
    if (k < 0 || k >= x->shape[axis]) {
      release(out);
      return ut_fail(c->e, HARP_E_INVALID_ARG, n->id, "GATHER index %d is outside [0, %lld) at element %lld", k,
                     (long long)x->shape[axis], (long long)i);
    }
    int64_t off = x->off;
    for (int d = 0; d < x->rank; d++) off += (d == axis ? k : it.idx[d]) * x->stride[d];
    if (x->buf->is_int) ((int32_t *)out->buf->data)[i] = ((int32_t *)x->buf->data)[off];
    else ((float *)out->buf->data)[i] = ((float *)x->buf->data)[off];
  }
  return HARP_OK;
}

static harp_status eval_move(ictx *c, const tiny_node *n, ival *out) {
  const ival *x = &c->vals[n->src[0].node];
  int r = n->shape.rank;
  int64_t v;
  switch (n->op) {
  case TINY_RESHAPE: {
    ival base;
    if (is_contiguous(x)) base = share(x);
    else if (materialize(c, n->id, x, &base)) return c->e->code;
    *out = base;
    out->rank = r;
    int64_t s = 1;
    for (int i = r - 1; i >= 0; i--) {
      out->shape[i] = n->shape.d[i].n;
      out->stride[i] = s;
      s *= out->shape[i];
    }
    return HARP_OK;
  }
  case TINY_PERMUTE:
    *out = share(x);
    for (int i = 0; i < r; i++) {
      out->shape[i] = x->shape[n->a.permute.perm[i]];
      out->stride[i] = x->stride[n->a.permute.perm[i]];
    }
    return HARP_OK;
  case TINY_EXPAND:
    if (x->rank != r) return ut_fail(c->e, HARP_E_INTERNAL, n->id, "EXPAND was not normalized");
    *out = share(x);
    for (int i = 0; i < r; i++) {
      out->shape[i] = n->shape.d[i].n;
      if (x->shape[i] == 1 && out->shape[i] != 1) out->stride[i] = 0;
    }
    return HARP_OK;
  case TINY_SHRINK:
    *out = share(x);
    for (int i = 0; i < r; i++) {
      int64_t step = 1;
      tiny_dim_value(n->a.shrink.lo[i], c->syms, &v);
      if (n->a.shrink.has_step) tiny_dim_value(n->a.shrink.step[i], c->syms, &step);
      out->off += v * x->stride[i];
      out->stride[i] = x->stride[i] * step;
      out->shape[i] = n->shape.d[i].n;
    }
    return HARP_OK;
  case TINY_FLIP:
    *out = share(x);
    for (int k = 0; k < n->a.flip.n; k++) {
      int d = n->a.flip.axes[k];
      if (x->shape[d] > 0) out->off += (x->shape[d] - 1) * x->stride[d];
      out->stride[d] = -x->stride[d];
    }
    return HARP_OK;
  case TINY_PAD: return eval_pad(c, n, x, out);
  case TINY_VIEW: return eval_view(c, n, x, out);
  case TINY_POOL: {
    const tiny_arg_pool *p = &n->a.pool;
    int lead = x->rank - p->n;
    *out = share(x);
    out->rank = r;
    for (int m = 0; m < p->n; m++) {
      int64_t s, dl;
      tiny_dim_value(p->stride[m], c->syms, &s);
      tiny_dim_value(p->dilation[m], c->syms, &dl);
      out->stride[lead + m] = s * x->stride[lead + m];
      out->stride[x->rank + m] = dl * x->stride[lead + m];
    }
    for (int i = 0; i < r; i++) out->shape[i] = n->shape.d[i].n;
    return HARP_OK;
  }
  default: return ut_fail(c->e, HARP_E_INTERNAL, n->id, "not a movement op");
  }
}

/* ---- leaves -------------------------------------------------------------- */
static harp_status eval_input(ictx *c, const tiny_node *n, const ut_tensor *t, ival *out) {
  if (t->dtype != n->dtype)
    return ut_fail(c->e, HARP_E_INPUT_MISMATCH, n->id, "input %s is %s, the model expects %s", n->a.input.tensor_id,
                   tiny_dtype_name(t->dtype), tiny_dtype_name(n->dtype));
  bool ok = t->rank == n->shape.rank;
  for (int i = 0; ok && i < t->rank; i++) ok = t->shape[i] == n->shape.d[i].n;
  if (!ok) {
    char want[256];
    tiny_shape_format(&n->shape, want, sizeof want);
    return ut_fail(c->e, HARP_E_INPUT_MISMATCH, n->id, "input %s has the wrong shape; the model expects %s",
                   n->a.input.tensor_id, want);
  }
  if ((t->dtype == TINY_FP32 || t->dtype == TINY_I32) && t->data) { /* held as they are: a view of the caller's data */
    memset(out, 0, sizeof *out);
    if (!(out->buf = ut_xcalloc(1, sizeof *out->buf))) return ut_fail(c->e, HARP_E_NO_MEMORY, n->id, "out of memory");
    *out->buf = (ibuf){.refs = 1, .is_int = t->dtype == TINY_I32, .borrowed = true, .data = t->data};
    dense(out, t->rank, t->shape);
    return HARP_OK;
  }
  if (fresh(c, n->id, is_int_dtype(n->dtype), t->rank, t->shape, out)) return c->e->code;
  int64_t cnt = numel_of(out);
  for (int64_t i = 0; i < cnt; i++) {
    if (out->buf->is_int) ((int32_t *)out->buf->data)[i] = (int32_t)ut_tensor_get(t, i);
    else ((float *)out->buf->data)[i] = ut_tensor_get(t, i);
  }
  if (t->dtype == TINY_I32) /* exact, not through float */
    for (int64_t i = 0; i < cnt; i++) ((int32_t *)out->buf->data)[i] = ((const int32_t *)t->data)[i];
  return HARP_OK;
}

static harp_status eval_const(ictx *c, const tiny_node *n, ival *out) {
  if (fresh(c, n->id, is_int_dtype(n->dtype), 0, NULL, out)) return c->e->code;
  double v = n->a.cnst.value;
  if (n->dtype == TINY_BOOL) ((int32_t *)out->buf->data)[0] = v != 0;
  else if (is_int_dtype(n->dtype))
    ((int32_t *)out->buf->data)[0] = narrow(n->dtype, isnan(v) ? 0 : v >= 2147483647.0 ? INT32_MAX : v <= -2147483648.0 ? INT32_MIN : (int32_t)v);
  else ((float *)out->buf->data)[0] = round_to(n->dtype, (float)v);
  return HARP_OK;
}

/* ---- driver -------------------------------------------------------------- */
static harp_status to_tensor(ictx *c, const tiny_node *n, const ival *v, ut_tensor *t) {
  int64_t shape[R];
  for (int i = 0; i < v->rank; i++) shape[i] = v->shape[i];
  if (ut_tensor_alloc(c->e, t, n->dtype, v->rank, shape)) return c->e->code;
  if (n->dtype == TINY_FP32 || n->dtype == TINY_I32) { /* 4-byte elements held as they are stored: copied as bits */
    ibuf b = {.refs = 1, .is_int = n->dtype == TINY_I32, .borrowed = true, .data = t->data};
    ival dst = {.buf = &b};
    dense(&dst, v->rank, v->shape);
    if (v->buf->is_int == b.is_int) {
      copy_view(&dst, v);
      return HARP_OK;
    }
  }
  int64_t cnt = ut_tensor_numel(t);
  mit it;
  const ival *vs[1] = {v};
  mit_init(&it, v->rank, v->shape, 1, vs);
  for (int64_t i = 0; i < cnt; i++, mit_next(&it)) {
    if (n->dtype == TINY_I32) ((int32_t *)t->data)[i] = ldi(v, it.off[0]);
    else if (n->dtype == TINY_BOOL) ((uint8_t *)t->data)[i] = ldi(v, it.off[0]) != 0;
    else if (n->dtype == TINY_I8) ((int8_t *)t->data)[i] = (int8_t)ldi(v, it.off[0]);
    else if (n->dtype == TINY_U8) ((uint8_t *)t->data)[i] = (uint8_t)ldi(v, it.off[0]);
    else ut_tensor_set(t, i, ldf(v, it.off[0])); /* rounds fp16/bf16 */
  }
  return HARP_OK;
}

static harp_status run(harp_error *e, const tiny_graph *g, const tiny_symtab *syms, const ut_tensor *inputs, int ninputs,
                     const int *want, int nwant, ut_tensor *outs) {
  ictx c = {e, g, syms, ut_xcalloc((size_t)g->n + 1, sizeof(ival))};
  int *uses = ut_xcalloc((size_t)g->n + 1, sizeof(int));
  harp_status st = HARP_OK;
  if (!c.vals || !uses) {
    st = ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
    goto done;
  }
  for (int i = 0; i < nwant; i++) memset(&outs[i], 0, sizeof outs[i]);
  for (int i = 0; i < g->n; i++) {
    const tiny_node *n = &g->nodes[i];
    if (!tiny_shape_known(&n->shape)) {
      st = ut_fail(e, HARP_E_UNBOUND_SYMBOL, n->id, "shape is not bound; run tiny_prepare with every symbol");
      goto done;
    }
    for (int k = 0; k < n->nsrc; k++) {
      if (n->src[k].node < 0) {
        st = ut_fail(e, HARP_E_INTERNAL, n->id, "immediate operand: the graph is not normalized");
        goto done;
      }
      uses[n->src[k].node]++;
    }
  }
  for (int k = 0; k < nwant; k++) uses[want[k]]++;
  int in_k = 0;
  for (int i = 0; i < g->n && !st; i++) {
    const tiny_node *n = &g->nodes[i];
    ival *out = &c.vals[i];
    switch (tiny_op_class(n->op)) {
    case TC_LEAF:
      if (n->op == TINY_INPUT) {
        if (in_k >= ninputs) st = ut_fail(e, HARP_E_INPUT_MISMATCH, n->id, "no tensor given for input %s", n->a.input.tensor_id);
        else st = eval_input(&c, n, &inputs[in_k++], out);
      } else {
        st = eval_const(&c, n, out);
      }
      break;
    case TC_MOVE: st = eval_move(&c, n, out); break;
    case TC_CAST: st = eval_cast(&c, n, out); break;
    case TC_REDUCE: st = eval_reduce(&c, n, out); break;
    case TC_GATHER: st = eval_gather(&c, n, out); break;
    default: st = eval_elementwise(&c, n, out); break;
    }
    if (st) break;
    for (int k = 0; k < n->nsrc; k++)
      if (--uses[n->src[k].node] == 0) release(&c.vals[n->src[k].node]);
    if (uses[i] == 0) release(out);
  }
  if (!st && in_k != ninputs)
    st = ut_fail(e, HARP_E_INPUT_MISMATCH, NULL, "%d input tensors given, the model has %d inputs", ninputs, in_k);
  for (int k = 0; k < nwant && !st; k++) st = to_tensor(&c, &g->nodes[want[k]], &c.vals[want[k]], &outs[k]);
  if (st)
    for (int k = 0; k < nwant; k++) ut_tensor_free(&outs[k]);
done:
  if (c.vals)
    for (int i = 0; i < g->n; i++)
      while (c.vals[i].buf) release(&c.vals[i]);
  free(c.vals);
  free(uses);
  return st;
}

harp_status tiny_interp(harp_error *e, const tiny_graph *g, const tiny_symtab *syms, const ut_tensor *inputs, int ninputs,
                      ut_tensor *outputs) {
  return run(e, g, syms, inputs, ninputs, g->outputs, g->noutputs, outputs);
}

harp_status tiny_interp_nodes(harp_error *e, const tiny_graph *g, const tiny_symtab *syms, const ut_tensor *inputs,
                            int ninputs, const int *want, int nwant, ut_tensor *values) {
  for (int k = 0; k < nwant; k++)
    if (want[k] < 0 || want[k] >= g->n) return ut_fail(e, HARP_E_INTERNAL, NULL, "node index out of range");
  return run(e, g, syms, inputs, ninputs, want, nwant, values);
}
