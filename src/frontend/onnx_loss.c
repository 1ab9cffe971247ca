/* onnx_loss.c — NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss.
 * Needs: onnx_load.c (values, attributes, errors), onnx_ops.c
 * (ox_log_softmax), the builder.
 * Gives: ox_op_<Name> for the dispatch table in onnx_ops.c.
 *
 * input [N, C, d...], target [N, d...]: loss[n, d] = -input[n, t, d] * w[t]
 * (w = 1 without weights), 0 where t is ignore_index; the pick is harp's
 * gather along axis 1 (an ignored target reads class 0).  reduction "none"
 * keeps [N, d...], "sum" sums, "mean" divides the sum by the sum of the
 * weights picked (by the element count when every weight is 1). */
#include <inttypes.h>
#include <string.h>

#include "onnx_int.h"

static harp_status nll(ox_ctx *c, hg_val x, int ti, int wi) {
  hg_graph *g = c->g;
  char red[8];
  int64_t ii = 0;
  bool has_ii = ox_attr(c, "ignore_index") != NULL;
  if (ox_attr_str(c, "reduction", "mean", red, sizeof red) || (has_ii && ox_attr_int(c, "ignore_index", 0, &ii))) return c->e->code;
  bool mean = !strcmp(red, "mean"), sum = !strcmp(red, "sum");
  if (!mean && !sum && strcmp(red, "none") != 0) return ox_fail(c, HARP_E_INVALID_ARG, "reduction \"%s\"", red);
  hg_val t = ox_tensor(c, ti), w = HG_NONE;
  if (t < 0) return c->e->code;
  if (wi < (int)c->node->n_input && c->node->input[wi][0] && (w = ox_tensor(c, wi)) < 0) return c->e->code;
  if (!strcmp(c->node->op_type, "NegativeLogLikelihoodLoss") && has_ii && ii == -1 && w == HG_NONE && mean)
    return ox_fail(c, HARP_E_UNSUPPORTED, "ignore_index -1 with reduction mean and no weight (onnx's reference divides by every element, "
                   "the spec by the ones not ignored)");
  int r = ox_rank_of(c, x);
  if (r < 2 || ox_rank_of(c, t) != r - 1) return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "input must be [N, C, d...] and target [N, d...]");
  if (hg_val_dtype(g, t) != TINY_I32) return ox_fail(c, HARP_E_DTYPE_MISMATCH, "target must be integers");
  if (w != HG_NONE && ox_rank_of(c, w) != 1) return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "weight must be [C]");
  const fe_shape ts = *ox_shape_of(c, t);
  hg_val i0 = hg_const_typed(g, 0, TINY_I32), valid = HG_NONE, safe = t;
  if (has_ii) {
    valid = hg_binary(g, HG_OP_NE, t, hg_const_typed(g, (double)ii, TINY_I32));
    safe = hg_where(g, valid, t, i0);
  }
  fe_shape is = {.rank = r};
  is.d[0] = ts.d[0], is.d[1] = fe_dim_int(c->A, 1);
  for (int i = 1; i < ts.rank; i++) is.d[i + 1] = ts.d[i];
  hg_val pick = hg_gather(g, x, fe_reshape(g, safe, &is), 1);
  hg_val loss = hg_neg(g, fe_reshape(g, pick, &ts)), gw = HG_NONE;
  if (w != HG_NONE) { /* w[t], flattened through a rank-1 gather */
    const fe_dim *m = fe_dim_int(c->A, 1);
    for (int i = 0; i < ts.rank && m; i++) m = fe_dim_mul(c->A, m, ts.d[i]);
    if (!m) return ox_fail(c, HARP_E_LIMIT, "the size expression is too large");
    hg_val flat = fe_reshape(g, safe, &(fe_shape){.rank = 1, .d = {m}});
    gw = fe_reshape(g, hg_gather(g, w, flat, 0), &ts);
    if (has_ii) gw = hg_where(g, valid, gw, hg_const(g, 0));
  } else if (has_ii) {
    gw = hg_where(g, valid, hg_const_typed(g, 1, hg_val_dtype(g, x)), hg_const(g, 0));
  }
  if (gw != HG_NONE) loss = hg_mul(g, loss, gw);
  if (mean && gw != HG_NONE) loss = hg_div(g, hg_reduce(g, HG_OP_SUM, loss, NULL, 0, false), hg_reduce(g, HG_OP_SUM, gw, NULL, 0, false));
  else if (mean) loss = hg_reduce(g, HG_OP_MEAN, loss, NULL, 0, false);
  else if (sum) loss = hg_reduce(g, HG_OP_SUM, loss, NULL, 0, false);
  return ox_def(c, 0, loss);
}

harp_status ox_op_NegativeLogLikelihoodLoss(ox_ctx *c) {
  hg_val x = ox_tensor(c, 0);
  return x < 0 ? c->e->code : nll(c, x, 1, 2);
}

/* NLL of log_softmax(scores) along the classes; output 1 is the log_softmax */
harp_status ox_op_SoftmaxCrossEntropyLoss(ox_ctx *c) {
  hg_val x = ox_tensor(c, 0);
  if (x < 0 || ox_need_rank(c, x, 2, TINY_MAX_RANK, "scores")) return c->e->code;
  hg_val lp = ox_log_softmax(c, x, 1);
  if (ox_def(c, 1, lp)) return c->e->code;
  return nll(c, lp, 1, 2);
}
