/* onnx_attn.c — ONNX Attention (opsets 23 to 25) on the frontend builder.
 * Needs: onnx_load.c (values, attributes, errors), onnx_ops.c and onnx_nn.c
 * (helpers, ox_weight), the builder.
 * Gives: ox_op_Attention for the dispatch table in onnx_ops.c.
 *
 * Q, K, V are [B, H, S, D] or [B, S, H*D] (3-D, with q_num_heads and
 * kv_num_heads); past_key / past_value are concatenated in front of K / V
 * (present_key / present_value are the results).  Without a mask, causal
 * mask offset or softcap it is harp's attention (the fused template).
 * Otherwise it is composed as onnx's reference computes it: Q and K scaled
 * by sqrt(scale), QK^T, softcap, + bias (the mask, bool as 0 / -inf, padded
 * with -inf up to the key length, and the causal 0 / -inf triangle, bottom
 * right: key j is visible to query i iff j <= i + past length), a softmax
 * whose fully masked rows are 0 (not NaN), then @ V.  Grouped heads (H_q a
 * multiple of H_kv) repeat each K / V head.  nonpad_kv_seqlen and the
 * sliding windows are refused. */
#include <inttypes.h>
#include <stdio.h>
#include <math.h>
#include <string.h>

#include "onnx_int.h"

static hg_val K(ox_ctx *c, double v) { return hg_const(c->g, v); }

static harp_status dim_of(ox_ctx *c, hg_val v, int i, const char *what, int64_t *out) {
  const fe_shape *s = ox_shape_of(c, v);
  if (i >= s->rank) return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "Attention: %s is axis %d of a rank-%d input", what, i, s->rank);
  const fe_dim *d = s->d[i];
  char w[96];
  snprintf(w, sizeof w, "Attention's %s", what);
  return ox_known(c, d, w, out);
}

/* [B, S, H*D] -> [B, H, S, D] */
static hg_val split_heads(ox_ctx *c, hg_val x, int64_t h, const char *what) {
  int64_t hd;
  if (dim_of(c, x, 2, what, &hd)) return -1;
  if (h < 1 || hd % h) return ox_fail(c, HARP_E_INVALID_ARG, "%s's hidden size %" PRId64 " is not a multiple of %" PRId64 " heads", what, hd, h), -1;
  const fe_shape *s = ox_shape_of(c, x);
  fe_shape u = {.rank = 4, .d = {s->d[0], s->d[1], fe_dim_int(c->A, h), fe_dim_int(c->A, hd / h)}};
  static const int perm[4] = {0, 2, 1, 3};
  return hg_permute(c->g, fe_reshape(c->g, x, &u), perm, 4);
}

/* [B, Hkv, N, D] with each head repeated r times -> [B, Hkv*r, N, D] */
static hg_val repeat_heads(ox_ctx *c, hg_val x, int64_t r) {
  if (r == 1) return x;
  const fe_shape *s = ox_shape_of(c, x);
  const fe_dim *one = fe_dim_int(c->A, 1), *R = fe_dim_int(c->A, r);
  fe_shape u = {.rank = 5, .d = {s->d[0], s->d[1], one, s->d[2], s->d[3]}}, e = u, o = {.rank = 4, .d = {s->d[0], fe_dim_mul(c->A, s->d[1], R), s->d[2], s->d[3]}};
  e.d[2] = R;
  return fe_reshape(c->g, fe_expand(c->g, fe_reshape(c->g, x, &u), &e), &o);
}

/* input i when present (HG_NONE when absent), -1 on failure */
static hg_val opt_in(ox_ctx *c, int i) {
  if (i >= (int)c->node->n_input || !c->node->input[i][0]) return HG_NONE;
  return ox_tensor(c, i);
}

static hg_val concat2(ox_ctx *c, hg_val a, hg_val b, int axis) {
  hg_val xs[2] = {a, b};
  return hg_concat(c->g, xs, 2, axis);
}

/* the softmax of onnx's reference: a row of -inf is all 0 */
static hg_val safe_softmax(ox_ctx *c, hg_val x) {
  hg_graph *g = c->g;
  int ax = 3;
  hg_val m = hg_reduce(g, HG_OP_RMAX, x, &ax, 1, true);
  m = hg_where(g, hg_binary(g, HG_OP_EQ, m, K(c, -INFINITY)), K(c, 0), m);
  hg_val t = hg_exp(g, hg_sub(g, x, m));
  hg_val s = hg_reduce(g, HG_OP_SUM, t, &ax, 1, true);
  return hg_div(g, t, hg_where(g, hg_binary(g, HG_OP_EQ, s, K(c, 0)), K(c, 1), s));
}

harp_status ox_op_Attention(ox_ctx *c) {
  hg_graph *g = c->g;
  int64_t causal, qh = 0, kvh = 0, mode, prec, lw, rw;
  double scale, softcap;
  if (ox_attr_int(c, "is_causal", 0, &causal) || ox_attr_int(c, "q_num_heads", 0, &qh) || ox_attr_int(c, "kv_num_heads", 0, &kvh) ||
      ox_attr_int(c, "qk_matmul_output_mode", 0, &mode) || ox_attr_int(c, "softmax_precision", 0, &prec) ||
      ox_attr_int(c, "left_window_size", -1, &lw) || ox_attr_int(c, "right_window_size", -1, &rw) ||
      ox_attr_float(c, "scale", 0, &scale) || ox_attr_float(c, "softcap", 0, &softcap))
    return c->e->code;
  if (lw >= 0 || rw >= 0) return ox_fail(c, HARP_E_UNSUPPORTED, "sliding windows (left_window_size / right_window_size)");
  if (c->node->n_input > 6 && c->node->input[6][0]) return ox_fail(c, HARP_E_UNSUPPORTED, "nonpad_kv_seqlen (an external KV cache)");
  bool qk_out = c->node->n_output > 3 && c->node->output[3][0];
  if (qk_out && (mode < 0 || mode > 3)) return ox_fail(c, HARP_E_INVALID_ARG, "qk_matmul_output_mode %" PRId64, mode);
  if (qk_out && mode == 0 && softcap > 0)
    return ox_fail(c, HARP_E_UNSUPPORTED, "qk_matmul_output mode 0 with a softcap (the spec and onnx's reference disagree)");
  hg_val q = ox_tensor(c, 0), k = q > 0 ? ox_tensor(c, 1) : -1, v = k > 0 ? ox_tensor(c, 2) : -1;
  hg_val mask = v > 0 ? opt_in(c, 3) : -1, pk = mask >= 0 ? opt_in(c, 4) : -1, pv = pk >= 0 ? opt_in(c, 5) : -1;
  if (pv < 0) return c->e->code;
  int r = ox_rank_of(c, q);
  if (r != 3 && r != 4) return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "Q must have rank 3 or 4, got %d", r);
  if (ox_rank_of(c, k) != r || ox_rank_of(c, v) != r) return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "Q, K and V must have the same rank");
  if ((pk == HG_NONE) != (pv == HG_NONE)) return ox_fail(c, HARP_E_ARITY, "past_key and past_value go together");
  if (pk != HG_NONE && (ox_rank_of(c, pk) != 4 || ox_rank_of(c, pv) != 4))
    return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "past_key and past_value must have rank 4 (batch, heads, length, head size)");
  tiny_dtype dt = hg_val_dtype(g, q);
  if (dt != TINY_FP32 && dt != TINY_FP16 && dt != TINY_BF16) return ox_fail(c, HARP_E_DTYPE_MISMATCH, "Q must be a float tensor");
  if (r == 3) {
    if (qh < 1 || kvh < 1) return ox_fail(c, HARP_E_INVALID_ARG, "3-D inputs need q_num_heads and kv_num_heads");
    if ((q = split_heads(c, q, qh, "Q")) < 0 || (k = split_heads(c, k, kvh, "K")) < 0 || (v = split_heads(c, v, kvh, "V")) < 0)
      return c->e->code;
  }
  int64_t past = 0, m, n, hq, hk, d;
  if (pk != HG_NONE) {
    if (dim_of(c, pk, 2, "the past length", &past)) return c->e->code;
    k = concat2(c, pk, k, 2), v = concat2(c, pv, v, 2);
  }
  if (ox_def(c, 1, k) || ox_def(c, 2, v)) return c->e->code;
  if (dim_of(c, q, 1, "Q's heads", &hq) || dim_of(c, k, 1, "K's heads", &hk) || dim_of(c, q, 3, "the head size", &d) ||
      dim_of(c, q, 2, "the query length", &m) || dim_of(c, k, 2, "the key length", &n))
    return c->e->code;
  if (hk < 1 || hq % hk) return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "%" PRId64 " query heads for %" PRId64 " key heads", hq, hk);
  if (scale == 0) scale = 1 / sqrt((double)d);
  hg_val kr = repeat_heads(c, k, hq / hk), vr = repeat_heads(c, v, hq / hk), y;
  bool composed = mask != HG_NONE || (causal && (past || m != n)) || softcap > 0 || qk_out ||
                  (prec && prec != (dt == TINY_FP32 ? OX_FLOAT : dt == TINY_FP16 ? OX_FLOAT16 : OX_BFLOAT16));
  if (!composed) {
    hg_attention_opts o = {.causal = causal != 0, .scale = scale};
    y = hg_attention(g, q, kr, vr, &o);
  } else {
    hg_val s = K(c, sqrt(scale));
    static const int kt[4] = {0, 1, 3, 2};
    hg_val qk = hg_matmul(g, hg_mul(g, q, s), hg_permute(g, hg_mul(g, kr, s), kt, 4)), raw = qk;
    if (softcap > 0) qk = hg_mul(g, hg_tanh(g, hg_div(g, qk, K(c, softcap))), K(c, softcap));
    hg_val capped = qk, bias = HG_NONE;
    if (mask != HG_NONE) {
      int64_t mn;
      int mr = ox_rank_of(c, mask), ax = mr - 1;
      if (mr < 1 || dim_of(c, mask, ax, "the mask's key length", &mn)) return c->e->code;
      if (mn > n) return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "the mask has %" PRId64 " keys, K %" PRId64, mn, n);
      bias = hg_val_dtype(g, mask) == TINY_BOOL ? hg_where(g, mask, hg_const_typed(g, 0, dt), K(c, -INFINITY)) : mask;
      if (mn < n) { /* keys past the mask's are masked */
        int64_t los[TINY_MAX_RANK] = {0}, his[TINY_MAX_RANK] = {0};
        his[ax] = n - mn;
        bias = hg_pad(g, bias, los, his, mr, -INFINITY);
      }
    }
    if (causal) {
      ut_tensor t;
      if (m * n > OX_MAX_FILL) return ox_fail(c, HARP_E_LIMIT, "a %" PRId64 "x%" PRId64 " causal mask is too large", m, n);
      if (ut_tensor_alloc(c->e, &t, dt, 2, (int64_t[]){m, n})) return c->e->code;
      for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) ut_tensor_set(&t, i * n + j, j <= i + past ? 0.0f : -INFINITY);
      hg_val cm = ox_weight(c, "causal", &t);
      if (cm < 0) return c->e->code;
      bias = bias == HG_NONE ? cm : hg_add(g, bias, cm);
    }
    if (bias != HG_NONE) qk = hg_add(g, qk, bias);
    hg_val withbias = qk;
    tiny_dtype st = prec == OX_FLOAT ? TINY_FP32 : prec == OX_FLOAT16 ? TINY_FP16 : prec == OX_BFLOAT16 ? TINY_BF16 : dt;
    if (prec && prec != OX_FLOAT && prec != OX_FLOAT16 && prec != OX_BFLOAT16)
      return ox_fail(c, HARP_E_UNSUPPORTED, "softmax_precision %s", ox_type_name((int)prec));
    hg_val p = safe_softmax(c, st == dt ? qk : hg_cast(g, qk, st));
    if (st != dt) p = hg_cast(g, p, dt);
    if (qk_out && ox_def(c, 3, mode == 0 ? raw : mode == 1 ? capped : mode == 2 ? withbias : p)) return c->e->code;
    y = hg_matmul(g, p, vr);
  }
  if (ox_check(c, y)) return c->e->code;
  if (r == 3) { /* [B, H, S, Dv] -> [B, S, H*Dv] */
    static const int perm[4] = {0, 2, 1, 3};
    const fe_shape s = *ox_shape_of(c, y);
    y = hg_permute(g, y, perm, 4);
    y = fe_reshape(g, y, &(fe_shape){.rank = 3, .d = {s.d[0], s.d[2], fe_dim_mul(c->A, s.d[1], s.d[3])}});
  }
  return ox_def(c, 0, y);
}
