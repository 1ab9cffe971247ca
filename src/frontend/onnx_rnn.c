/* onnx_rnn.c — the ONNX recurrent layers LSTM, GRU and RNN, unrolled over
 * their time steps into the builder's ops.
 * Needs: onnx_load.c (values, attributes, errors), onnx_ops_act.c (softplus),
 * the builder.
 * Gives: ox_op_LSTM, ox_op_GRU, ox_op_RNN for the dispatch table in onnx_ops.c.
 *
 * Per direction, the input projection of every step is one matmul up front,
 * XW = X Wᵀ + (Wb + Rb) over [T·B, G·H] (G gates), and each step is
 *
 *   S  = h_{t-1} Rᵀ                          one matmul [B, G·H]
 *   g  = S[:, k·H:(k+1)·H] + XW[t][:, k·H:(k+1)·H]   per gate k (views)
 *   the gate math (activations, clip, peepholes, cell update) on [B, H]
 *
 * which region formation runs as one kernel (a "cell" region,
 * src/region/cell.c): the recurrent GEMV with the gate math in its epilogue.
 * GRU with linear_before_reset = 0 has a second matmul, (r ⊙ h) Rhᵀ.
 *
 * Semantics follow onnxruntime where the spec leaves room: activation_alpha
 * and activation_beta are consumed in order by the activations that take
 * them (Affine, LeakyRelu, ThresholdedRelu, ScaledTanh, HardSigmoid, Elu
 * take alpha; Affine, ScaledTanh, HardSigmoid take beta), a missing one
 * being LeakyRelu 0.01, HardSigmoid 0.2 / 0.5, Elu 1, else 0;
 * ThresholdedRelu passes x > alpha; clip bounds the gates' inputs (not the
 * cell state's); LSTM's input_forget couples the gates, f = 1 - i.  With
 * sequence_lens, a batch entry's outputs past its length are 0 and Y_h / Y_c
 * hold its state at its last step (0 for a length of 0, as onnxruntime);
 * the reverse direction runs each entry from its own last step (the input
 * and output reordered by a gather).  The sequence length must be known at
 * import (the steps are unrolled): at most OX_RNN_MAX_STEPS steps in all
 * directions. */
#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "onnx_int.h"

enum { RK_RNN, RK_GRU, RK_LSTM };
static const int n_gates[] = {1, 3, 4}, n_acts[] = {1, 2, 3};

/* The activations of the spec, one row each: name, takes alpha / beta, defaults. */
enum { A_SIGMOID, A_TANH, A_RELU, A_AFFINE, A_LEAKY, A_THRESH, A_SCALEDTANH, A_HARDSIG, A_ELU, A_SOFTSIGN, A_SOFTPLUS };
static const struct {
  const char *name;
  bool alpha, beta;
  double a, b;
} act_tab[] = {
    {"Sigmoid", 0, 0, 0, 0},       {"Tanh", 0, 0, 0, 0},     {"Relu", 0, 0, 0, 0},           {"Affine", 1, 1, 0, 0},
    {"LeakyRelu", 1, 0, 0.01, 0},  {"ThresholdedRelu", 1, 0, 0, 0}, {"ScaledTanh", 1, 1, 0, 0}, {"HardSigmoid", 1, 1, 0.2, 0.5},
    {"Elu", 1, 0, 1.0, 0},         {"Softsign", 0, 0, 0, 0}, {"Softplus", 0, 0, 0, 0},
};
#define N_ACT_KINDS ((int)(sizeof act_tab / sizeof *act_tab))

typedef struct rnn_act {
  int kind;
  double a, b;
} rnn_act;

typedef struct rnn_spec {
  int kind, G, D;
  bool reverse;          /* direction "reverse" (D == 1) */
  int64_t T, I, H;
  const fe_dim *B;       /* the batch (may be symbolic) */
  int layout;
  bool has_clip, lbr, input_forget;
  double clip;
  rnn_act act[6];        /* n_acts[kind] per direction */
} rnn_spec;

/* The node's inputs as values (-1: absent) in layout 0. */
typedef struct rnn_in {
  hg_val X;              /* [T, B, I] */
  hg_val W, R;           /* [D, G·H, I], [D, G·H, H] */
  ox_val *Bv;            /* B (a constant is folded at import) */
  hg_val Bias;           /* B as a value when not constant */
  hg_val lens;           /* [B] i32, -1 when absent or every length is T */
  hg_val h0, c0;         /* [D, B, H] */
  hg_val P;              /* [D, 3·H] */
} rnn_in;

static hg_val K(ox_ctx *c, double v) { return hg_const(c->g, v); }

/* ---- attributes ------------------------------------------------------------------------- */
static harp_status parse_acts(ox_ctx *c, rnn_spec *s) {
  int per = n_acts[s->kind], want = per * s->D;
  static const int dflt[3][3] = {{A_TANH}, {A_SIGMOID, A_TANH}, {A_SIGMOID, A_TANH, A_TANH}};
  for (int i = 0; i < want; i++) s->act[i].kind = dflt[s->kind][i % per];
  const Onnx__AttributeProto *a = ox_attr(c, "activations");
  if (a) {
    if (a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS)
      return ox_fail(c, HARP_E_INVALID_ARG, "attribute activations must be a list of strings");
    if ((int)a->n_strings != want)
      return ox_fail(c, HARP_E_INVALID_ARG, "activations has %zu names; %s with %d direction%s takes %d (%d per direction)", a->n_strings,
                     c->node->op_type, s->D, s->D > 1 ? "s" : "", want, per);
    for (int i = 0; i < want; i++) {
      char nm[32];
      size_t len = a->strings[i].len;
      if (len >= sizeof nm) len = sizeof nm - 1;
      for (size_t k = 0; k < len; k++) nm[k] = isprint(a->strings[i].data[k]) ? (char)a->strings[i].data[k] : '?';
      nm[len] = 0;
      int k = 0;
      while (k < N_ACT_KINDS && strcasecmp(act_tab[k].name, nm) != 0) k++;
      if (k == N_ACT_KINDS || a->strings[i].len >= sizeof nm)
        return ox_fail(c, HARP_E_INVALID_ARG, "unknown activation \"%s\" (activations[%d]); the spec lists Sigmoid, Tanh, Relu, Affine, "
                       "LeakyRelu, ThresholdedRelu, ScaledTanh, HardSigmoid, Elu, Softsign, Softplus", nm, i);
      s->act[i].kind = k;
    }
  }
  const Onnx__AttributeProto *al = ox_attr(c, "activation_alpha"), *be = ox_attr(c, "activation_beta");
  if ((al && al->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS) || (be && be->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS))
    return ox_fail(c, HARP_E_INVALID_ARG, "activation_alpha and activation_beta must be lists of floats");
  size_t ia = 0, ib = 0;
  for (int i = 0; i < want; i++) {
    int k = s->act[i].kind;
    s->act[i].a = act_tab[k].alpha && al && ia < al->n_floats ? al->floats[ia++] : act_tab[k].a;
    s->act[i].b = act_tab[k].beta && be && ib < be->n_floats ? be->floats[ib++] : act_tab[k].b;
  }
  return HARP_OK;
}

static harp_status parse_attrs(ox_ctx *c, int kind, rnn_spec *s) {
  memset(s, 0, sizeof *s);
  s->kind = kind;
  s->G = n_gates[kind];
  char dir[32];
  int64_t layout, lbr = 0, inf = 0;
  if (ox_attr_str(c, "direction", "forward", dir, sizeof dir) || ox_attr_int(c, "layout", 0, &layout) ||
      ox_attr_int(c, "linear_before_reset", 0, &lbr) || ox_attr_int(c, "input_forget", 0, &inf))
    return c->e->code;
  if (!strcmp(dir, "forward") || !strcmp(dir, "reverse")) s->D = 1, s->reverse = dir[0] == 'r';
  else if (!strcmp(dir, "bidirectional")) s->D = 2;
  else return ox_fail(c, HARP_E_INVALID_ARG, "direction \"%s\" (expected forward, reverse or bidirectional)", dir);
  if (layout != 0 && layout != 1) return ox_fail(c, HARP_E_INVALID_ARG, "layout %" PRId64 " (expected 0 or 1)", layout);
  if (ox_attr_int(c, "output_sequence", 0, &(int64_t){0})) return c->e->code;
  s->layout = (int)layout;
  s->lbr = lbr != 0;
  s->input_forget = inf != 0;
  if (kind != RK_GRU && ox_attr(c, "linear_before_reset")) return ox_fail(c, HARP_E_INVALID_ARG, "linear_before_reset is a GRU attribute");
  if (kind != RK_LSTM && ox_attr(c, "input_forget")) return ox_fail(c, HARP_E_INVALID_ARG, "input_forget is an LSTM attribute");
  if (ox_attr(c, "clip")) {
    if (ox_attr_float(c, "clip", 0, &s->clip)) return c->e->code;
    if (!(s->clip > 0)) return ox_fail(c, HARP_E_INVALID_ARG, "clip %g must be positive", s->clip);
    s->has_clip = true;
  }
  return parse_acts(c, s);
}

/* ---- inputs ----------------------------------------------------------------------------- */
/* The graph inputs whose shapes hold a symbol of d, as "x, y" in buf. */
typedef struct sym_hunt {
  const fe_dim *d;
  bool hit;
} sym_hunt;
static void note_sym(void *ctx, const char *sym) {
  sym_hunt *h = ctx;
  const char *want = fe_dim_is_sym(h->d);
  h->hit |= want && !strcmp(want, sym);
}
static void inputs_with(ox_ctx *c, const fe_dim *d, char *buf, size_t cap) {
  buf[0] = 0;
  for (size_t i = 0; i < c->gp->n_input; i++) {
    ox_val *x = ox_find(c, c->gp->input[i]->name);
    const fe_shape *sh = x && x->v > 0 ? ox_shape_of(c, x->v) : NULL;
    bool hit = false;
    for (int k = 0; sh && k < sh->rank && !hit; k++) {
      sym_hunt h = {sh->d[k], false};
      fe_dim_syms(d, note_sym, &h); /* a symbol of d that is this dim */
      hit = h.hit;
    }
    if (hit && strlen(buf) + strlen(c->gp->input[i]->name) + 5 < cap) {
      if (buf[0]) strcat(buf, ", ");
      strcat(buf, "\"");
      strcat(buf, c->gp->input[i]->name);
      strcat(buf, "\"");
    }
  }
}

/* An integer dim of input v's axis ax, named `what` in the error. */
static harp_status int_dim(ox_ctx *c, hg_val v, int ax, const char *what, int64_t *out) {
  const fe_dim *d = ox_shape_of(c, v)->d[ax];
  if (fe_dim_is_int(d, out)) return HARP_OK;
  char from[160];
  inputs_with(c, d, from, sizeof from);
  return ox_fail(c, HARP_E_UNSUPPORTED, "%s is the symbolic size %s%s%s; %s unrolls its time steps, so harp needs it known at import: "
                 "give the shape of %s (--shape NAME=DIMS)", what, d->text, from[0] ? " of graph input " : "", from,
                 c->node->op_type, from[0] ? from : "the graph inputs it comes from");
}

/* Optional input i: its value (rank checked against dims, which may hold NULL = any), or 0 when absent. */
static harp_status opt_input(ox_ctx *c, int i, const char *what, int rank, const fe_dim *const *dims, hg_val *out) {
  *out = 0;
  bool failed = false;
  ox_val *x = ox_in(c, i, &failed);
  if (failed) return c->e->code;
  if (!x) return HARP_OK;
  hg_val v = ox_value(c, x);
  if (v < 0) return c->e->code;
  if (ox_need_rank(c, v, rank, rank, what)) return c->e->code;
  const fe_shape *sh = ox_shape_of(c, v);
  for (int k = 0; k < rank; k++)
    if (dims[k] && fe_dim_cmp(sh->d[k], dims[k]) == FE_DIFF)
      return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "%s has dim %d = %s, expected %s", what, k, sh->d[k]->text, dims[k]->text);
  *out = v;
  return HARP_OK;
}

/* sequence_lens: -1 when every length is known to be T. */
static harp_status read_lens(ox_ctx *c, const rnn_spec *s, rnn_in *in) {
  in->lens = -1;
  bool failed = false;
  ox_val *x = ox_in(c, 4, &failed);
  if (failed) return c->e->code;
  if (!x) return HARP_OK;
  if (x->has_i) {
    bool all_t = true;
    for (int64_t k = 0; k < x->in; k++) {
      int64_t v;
      if (!fe_dim_is_int(x->iv[k], &v)) return HARP_OK;
      if (v < 0 || v > s->T) return ox_fail(c, HARP_E_INVALID_ARG, "sequence_lens[%" PRId64 "] = %" PRId64 " is outside [0, %" PRId64 "]", k, v, s->T);
      all_t &= v == s->T;
    }
    if (all_t && x->in > 0) return HARP_OK;
  }
  hg_val v = ox_value(c, x);
  if (v < 0) return c->e->code;
  if (ox_need_rank(c, v, 1, 1, "sequence_lens")) return c->e->code;
  if (tiny_dtype_is_float(hg_val_dtype(c->g, v))) return ox_fail(c, HARP_E_DTYPE_MISMATCH, "sequence_lens must be an integer tensor");
  if (fe_dim_cmp(ox_shape_of(c, v)->d[0], s->B) == FE_DIFF)
    return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "sequence_lens has %s entries for a batch of %s", ox_shape_of(c, v)->d[0]->text, s->B->text);
  in->lens = v;
  return HARP_OK;
}

/* A [B, D, H] state input (layout 1) as [D, B, H]. */
static hg_val state_layout0(ox_ctx *c, const rnn_spec *s, hg_val v) {
  static const int p[3] = {1, 0, 2};
  return v > 0 && s->layout ? hg_permute(c->g, v, p, 3) : v;
}

static harp_status read_inputs(ox_ctx *c, rnn_spec *s, rnn_in *in) {
  memset(in, 0, sizeof *in);
  hg_val X = ox_tensor(c, 0), W = X > 0 ? ox_tensor(c, 1) : -1, R = W > 0 ? ox_tensor(c, 2) : -1;
  if (X < 0 || W < 0 || R < 0) return c->e->code;
  if (ox_need_rank(c, X, 3, 3, "X") || ox_need_rank(c, W, 3, 3, "W") || ox_need_rank(c, R, 3, 3, "R")) return c->e->code;
  if (!tiny_dtype_is_float(hg_val_dtype(c->g, X))) return ox_fail(c, HARP_E_DTYPE_MISMATCH, "X must be a float tensor");
  int64_t d0, gh, gh2, hr;
  if (int_dim(c, X, s->layout ? 1 : 0, "the sequence length (X's time axis)", &s->T) || int_dim(c, W, 2, "W's input size", &s->I) ||
      int_dim(c, R, 2, "R's hidden size", &hr) || int_dim(c, W, 0, "W's direction count", &d0) || int_dim(c, W, 1, "W's gate rows", &gh) ||
      int_dim(c, R, 1, "R's gate rows", &gh2))
    return c->e->code;
  int64_t hs;
  if (ox_attr_int(c, "hidden_size", hr, &hs)) return c->e->code;
  if (hs != hr) return ox_fail(c, HARP_E_INVALID_ARG, "hidden_size %" PRId64 " does not match R's hidden size %" PRId64 " (R is [D, %d*H, H])", hs, hr, s->G);
  s->H = hr;
  if (s->H < 1) return ox_fail(c, HARP_E_INVALID_ARG, "hidden size %" PRId64 " (must be >= 1)", s->H);
  if (d0 != s->D) return ox_fail(c, HARP_E_INVALID_ARG, "W has %" PRId64 " directions; direction needs %d", d0, s->D);
  if (gh != s->G * s->H || gh2 != s->G * s->H)
    return ox_fail(c, HARP_E_INVALID_ARG, "W has %" PRId64 " and R %" PRId64 " gate rows; %s with hidden size %" PRId64 " needs %d*%" PRId64 " = %" PRId64,
                   gh, gh2, c->node->op_type, s->H, s->G, s->H, s->G * s->H);
  const fe_shape *xs = ox_shape_of(c, X);
  if (!fe_dim_is_int(xs->d[2], &(int64_t){0}) || fe_dim_cmp(xs->d[2], fe_dim_int(c->A, s->I)) == FE_DIFF)
    return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "X has %s input features, W takes %" PRId64, xs->d[2]->text, s->I);
  if (fe_dim_cmp(ox_shape_of(c, R)->d[0], fe_dim_int(c->A, s->D)) == FE_DIFF)
    return ox_fail(c, HARP_E_INVALID_ARG, "R has %s directions; direction needs %d", ox_shape_of(c, R)->d[0]->text, s->D);
  if (s->T < 1) return ox_fail(c, HARP_E_INVALID_ARG, "the sequence length is 0");
  if (s->T * s->D > OX_RNN_MAX_STEPS)
    return ox_fail(c, HARP_E_LIMIT, "%" PRId64 " time steps x %d direction%s exceed the %d steps harp unrolls in one node", s->T, s->D,
                   s->D > 1 ? "s" : "", OX_RNN_MAX_STEPS);
  s->B = xs->d[s->layout ? 0 : 1];
  static const int p[3] = {1, 0, 2};
  in->X = s->layout ? hg_permute(c->g, X, p, 3) : X;
  in->W = W, in->R = R;
  const fe_dim *Dd = fe_dim_int(c->A, s->D), *Hd = fe_dim_int(c->A, s->H);
  const fe_dim *st[3] = {s->layout ? s->B : Dd, s->layout ? Dd : s->B, Hd};
  const fe_dim *pd[2] = {Dd, fe_dim_int(c->A, 3 * s->H)};
  if (opt_input(c, 5, "initial_h", 3, st, &in->h0)) return c->e->code;
  if (s->kind == RK_LSTM && (opt_input(c, 6, "initial_c", 3, st, &in->c0) || opt_input(c, 7, "P", 2, pd, &in->P))) return c->e->code;
  if (s->kind != RK_LSTM && c->node->n_input > 6) return ox_fail(c, HARP_E_ARITY, "%s takes at most 6 inputs", c->node->op_type);
  in->h0 = in->h0 ? state_layout0(c, s, in->h0) : -1;
  in->c0 = in->c0 ? state_layout0(c, s, in->c0) : -1;
  if (!in->P) in->P = -1;
  bool failed = false;
  in->Bv = ox_in(c, 3, &failed);
  if (failed) return c->e->code;
  in->Bias = -1;
  if (in->Bv && !in->Bv->has_t) {
    const fe_dim *bd[2] = {Dd, fe_dim_int(c->A, 2 * s->G * s->H)};
    if (opt_input(c, 3, "B", 2, bd, &in->Bias)) return c->e->code;
  } else if (in->Bv && (in->Bv->t.rank != 2 || in->Bv->t.shape[0] != s->D || in->Bv->t.shape[1] != 2 * s->G * s->H)) {
    return ox_fail(c, HARP_E_AXIS_SIZE_MISMATCH, "B must be [%d, %" PRId64 "]", s->D, 2 * s->G * s->H);
  }
  return read_lens(c, s, in);
}

/* ---- biases ----------------------------------------------------------------------------- */
/* Direction d's bias of the input projection ([G·H]: Wb + Rb, but Wbh alone
 * for a GRU with linear_before_reset, whose Rbh goes inside r ⊙ (.): *rbh
 * [H]); -1 (*rbh -1) when there is none.  A constant B is folded here. */
static harp_status biases(ox_ctx *c, const rnn_spec *s, const rnn_in *in, int d, hg_val *xb, hg_val *rbh) {
  *xb = *rbh = -1;
  int64_t GH = s->G * s->H, H = s->H, h0 = 2 * H; /* the GRU's hidden gate starts at 2H */
  bool split = s->kind == RK_GRU && s->lbr;
  if (in->Bv && in->Bv->has_t) {
    ut_tensor tx, tr;
    if (ut_tensor_alloc(c->e, &tx, TINY_FP32, 1, &GH)) return c->e->code;
    if (split && ut_tensor_alloc(c->e, &tr, TINY_FP32, 1, &H)) {
      ut_tensor_free(&tx);
      return c->e->code;
    }
    const ut_tensor *b = &in->Bv->t;
    bool any = false, anyr = false;
    for (int64_t k = 0; k < GH; k++) {
      float w = ut_tensor_get(b, d * 2 * GH + k), r = ut_tensor_get(b, d * 2 * GH + GH + k);
      bool own = split && k >= h0;
      ut_tensor_set(&tx, k, own ? w : w + r);
      if (own) ut_tensor_set(&tr, k - h0, r), anyr |= r != 0;
      any |= (own ? w : w + r) != 0;
    }
    char nm[32];
    snprintf(nm, sizeof nm, "bias_x%d", d);
    if (any) *xb = ox_weight(c, nm, &tx);
    ut_tensor_free(&tx);
    if (split) {
      snprintf(nm, sizeof nm, "bias_rh%d", d);
      if (anyr) *rbh = ox_weight(c, nm, &tr);
      ut_tensor_free(&tr);
    }
    return (any && *xb < 0) || (split && anyr && *rbh < 0) ? c->e->code : HARP_OK;
  }
  if (in->Bias < 0) return HARP_OK;
  int ax[2] = {0, 1};
  hg_val row = hg_reshape(c->g, hg_slice(c->g, in->Bias, 1, ax, (int64_t[]){d}, (int64_t[]){d + 1}, NULL), 1,
                          (tiny_dim[]){tiny_dim_int(2 * GH)});
  hg_val wb = hg_slice(c->g, row, 1, ax, (int64_t[]){0}, (int64_t[]){GH}, NULL);
  hg_val rb = hg_slice(c->g, row, 1, ax, (int64_t[]){GH}, (int64_t[]){2 * GH}, NULL);
  if (!split) {
    *xb = hg_add(c->g, wb, rb);
  } else {
    hg_val zr = hg_add(c->g, hg_slice(c->g, wb, 1, ax, (int64_t[]){0}, (int64_t[]){h0}, NULL),
                       hg_slice(c->g, rb, 1, ax, (int64_t[]){0}, (int64_t[]){h0}, NULL));
    *xb = hg_concat(c->g, (hg_val[]){zr, hg_slice(c->g, wb, 1, ax, (int64_t[]){h0}, (int64_t[]){GH}, NULL)}, 2, 0);
    *rbh = hg_slice(c->g, rb, 1, ax, (int64_t[]){h0}, (int64_t[]){GH}, NULL);
  }
  return ox_check(c, *xb) || (*rbh != -1 && ox_check(c, *rbh)) ? c->e->code : HARP_OK;
}

/* ---- activations ------------------------------------------------------------------------ */
static hg_val activation(ox_ctx *c, const rnn_act *a, hg_val x) {
  hg_graph *g = c->g;
  switch (a->kind) {
  case A_SIGMOID: return hg_sigmoid(g, x);
  case A_TANH: return hg_tanh(g, x);
  case A_RELU: return hg_relu(g, x);
  case A_AFFINE: return hg_add(g, hg_mul(g, x, K(c, a->a)), K(c, a->b));
  case A_LEAKY: return hg_where(g, hg_binary(g, HG_OP_LT, x, K(c, 0)), hg_mul(g, x, K(c, a->a)), x);
  case A_THRESH: return hg_where(g, hg_binary(g, HG_OP_GT, x, K(c, a->a)), x, K(c, 0));
  case A_SCALEDTANH: return hg_mul(g, hg_tanh(g, hg_mul(g, x, K(c, a->b))), K(c, a->a));
  case A_HARDSIG: return hg_min(g, hg_max(g, hg_add(g, hg_mul(g, x, K(c, a->a)), K(c, a->b)), K(c, 0)), K(c, 1));
  case A_ELU: return hg_where(g, hg_binary(g, HG_OP_LT, x, K(c, 0)), hg_mul(g, hg_sub(g, hg_exp(g, x), K(c, 1)), K(c, a->a)), x);
  case A_SOFTSIGN: return hg_div(g, x, hg_add(g, hg_abs(g, x), K(c, 1)));
  default: return ox_softplus(c, x);
  }
}

/* the clip of the gates' inputs, then activation a */
static hg_val gate_act(ox_ctx *c, const rnn_spec *s, const rnn_act *a, hg_val x) {
  if (s->has_clip) x = hg_min(c->g, hg_max(c->g, x, K(c, -s->clip)), K(c, s->clip));
  return activation(c, a, x);
}

/* ---- the steps -------------------------------------------------------------------------- */
/* One direction while its steps are built. */
typedef struct rnn_dir {
  hg_val XW;         /* [T, B, G·H]: the input projection with its bias */
  hg_val RT, RhT;    /* [H, G·H] = R[d]ᵀ (a GRU without linear_before_reset: its z and r
                        gates, RhT [H, H] the hidden one) */
  hg_val rbh;        /* GRU with linear_before_reset: Rbh [H], or -1 */
  hg_val p[3];       /* peepholes i, o, f [H], or -1 */
  hg_val h, c;       /* the state; -1 while it is known to be 0 */
  bool flat;         /* XW is [T·B, G·H] (else [T, B, G·H]) */
  hg_val xb;         /* [G·H]: the bias the steps add (one step), or -1 (in XW) */
  const rnn_act *act;
} rnn_dir;

/* Columns [k·H, (k+1)·H) of a [B, G·H] value. */
static hg_val gate_cols(ox_ctx *c, const rnn_spec *s, hg_val v, int k) {
  int ax = 1;
  return hg_slice(c->g, v, 1, &ax, (int64_t[]){k * s->H}, (int64_t[]){(k + 1) * s->H}, NULL);
}

/* v plus gate k of the bias the step adds (one step: then the cell takes
 * the GEMV x Wᵀ in, whose output only the gate math reads), or v. */
static hg_val add_xb(ox_ctx *c, const rnn_spec *s, const rnn_dir *r, hg_val v, int k) {
  if (r->xb < 0) return v;
  int ax = 0;
  return hg_add(c->g, v, hg_slice(c->g, r->xb, 1, &ax, (int64_t[]){k * s->H}, (int64_t[]){(k + 1) * s->H}, NULL));
}

/* Gate k's input: S's (when there is one) plus xw's, plus the bias. */
static hg_val pre_gate(ox_ctx *c, const rnn_spec *s, const rnn_dir *r, hg_val xw, hg_val S, int k) {
  hg_val x = gate_cols(c, s, xw, k);
  return add_xb(c, s, r, S > 0 ? hg_add(c->g, gate_cols(c, s, S, k), x) : x, k);
}

/* a + p ⊙ v, with p or v absent (0): a */
static hg_val peep(ox_ctx *c, hg_val a, hg_val p, hg_val v) { return p > 0 && v > 0 ? hg_add(c->g, a, hg_mul(c->g, v, p)) : a; }

/* One LSTM step: the new h and c from xw [B, 4H]. */
static void lstm_step(ox_ctx *c, const rnn_spec *s, const rnn_dir *r, hg_val xw, hg_val *h, hg_val *cs) {
  hg_graph *g = c->g;
  hg_val S = r->h > 0 ? hg_matmul(g, r->h, r->RT) : -1;
  hg_val i = gate_act(c, s, &r->act[0], peep(c, pre_gate(c, s, r, xw, S, 0), r->p[0], r->c));
  hg_val f = s->input_forget ? hg_sub(g, K(c, 1), i) : gate_act(c, s, &r->act[0], peep(c, pre_gate(c, s, r, xw, S, 2), r->p[2], r->c));
  hg_val cand = gate_act(c, s, &r->act[1], pre_gate(c, s, r, xw, S, 3));
  hg_val cn = hg_mul(g, i, cand);
  if (r->c > 0) cn = hg_add(g, hg_mul(g, f, r->c), cn);
  hg_val o = gate_act(c, s, &r->act[0], peep(c, pre_gate(c, s, r, xw, S, 1), r->p[1], cn));
  *h = hg_mul(g, o, activation(c, &r->act[2], cn));
  *cs = cn;
}

/* One GRU step: the new h from xw [B, 3H]. */
static hg_val gru_step(ox_ctx *c, const rnn_spec *s, const rnn_dir *r, hg_val xw) {
  hg_graph *g = c->g;
  hg_val S = r->h > 0 ? hg_matmul(g, r->h, r->RT) : -1;
  hg_val z = gate_act(c, s, &r->act[0], pre_gate(c, s, r, xw, S, 0));
  hg_val rg = gate_act(c, s, &r->act[0], pre_gate(c, s, r, xw, S, 1));
  hg_val hh = gate_cols(c, s, xw, 2);
  if (s->lbr) {
    hg_val lin = S > 0 ? gate_cols(c, s, S, 2) : -1;
    if (r->rbh > 0) lin = lin > 0 ? hg_add(g, lin, r->rbh) : r->rbh;
    if (lin > 0) hh = hg_add(g, hh, hg_mul(g, rg, lin));
  } else if (r->h > 0) {
    hh = hg_add(g, hh, hg_matmul(g, hg_mul(g, rg, r->h), r->RhT));
  }
  hh = gate_act(c, s, &r->act[1], add_xb(c, s, r, hh, 2));
  hg_val nz = hg_sub(g, K(c, 1), z), hn = hg_mul(g, nz, hh);
  return r->h > 0 ? hg_add(g, hn, hg_mul(g, z, r->h)) : hn;
}

/* where(valid, v, old) with old absent (0) */
static hg_val keep(ox_ctx *c, hg_val valid, hg_val v, hg_val old) {
  if (valid < 0) return v;
  return hg_where(c->g, valid, v, old > 0 ? old : K(c, 0));
}

/* Step t (of the direction's own order): updates r's state, returns y_t [B, H].
 * valid: [B, 1] bool (which entries are within their length), or -1. */
static hg_val step(ox_ctx *c, const rnn_spec *s, rnn_dir *r, int64_t t, hg_val valid) {
  int ax = 0;
  hg_val xw;
  if (r->flat) {
    const fe_dim *st[2] = {fe_dim_scale(c->A, s->B, t), NULL}, *en[2] = {fe_dim_scale(c->A, s->B, t + 1), NULL};
    xw = fe_slice(c->g, r->XW, st, en, (int64_t[]){1, 1});
  } else {
    xw = hg_slice(c->g, r->XW, 1, &ax, (int64_t[]){t}, (int64_t[]){t + 1}, NULL);
    xw = fe_reshape(c->g, xw, &(fe_shape){.rank = 2, .d = {s->B, fe_dim_int(c->A, s->G * s->H)}});
  }
  hg_val h, cs = -1;
  if (s->kind == RK_LSTM) lstm_step(c, s, r, xw, &h, &cs);
  else if (s->kind == RK_GRU) h = gru_step(c, s, r, xw);
  else h = gate_act(c, s, &r->act[0], pre_gate(c, s, r, xw, r->h > 0 ? hg_matmul(c->g, r->h, r->RT) : -1, 0));
  hg_val y = keep(c, valid, h, -1);
  r->h = r->h > 0 ? keep(c, valid, h, r->h) : y;
  if (cs > 0) r->c = keep(c, valid, cs, r->c);
  return y;
}

/* ---- directions -------------------------------------------------------------------------- */
/* v [D, ...rest] at index d, the leading axis dropped (rank r -> r - 1). */
static hg_val take(ox_ctx *c, hg_val v, int d) {
  int ax = 0;
  const fe_shape *sh = ox_shape_of(c, v);
  fe_shape to = {.rank = sh->rank - 1};
  for (int k = 1; k < sh->rank; k++) to.d[k - 1] = sh->d[k];
  return fe_reshape(c->g, hg_slice(c->g, v, 1, &ax, (int64_t[]){d}, (int64_t[]){d + 1}, NULL), &to);
}

/* rows [lo, hi) of m [G·H, K], transposed: [K, hi - lo] */
static hg_val rows_t(ox_ctx *c, hg_val m, int64_t lo, int64_t hi) {
  int ax = 0;
  static const int p[2] = {1, 0};
  return hg_permute(c->g, hg_slice(c->g, m, 1, &ax, &lo, &hi, NULL), p, 2);
}

/* The [T, B] i32 time index each entry's reversed run reads: t < len ? len - 1 - t : t
 * (iota [T, 1]: 0 .. T-1). */
static hg_val reverse_index(ox_ctx *c, const rnn_spec *s, hg_val iota, hg_val lens) {
  hg_graph *g = c->g;
  fe_shape tb = {.rank = 2, .d = {fe_dim_int(c->A, s->T), s->B}};
  hg_val L = fe_reshape(g, lens, &(fe_shape){.rank = 2, .d = {fe_dim_int(c->A, 1), s->B}});
  hg_val back = hg_sub(g, hg_sub(g, L, hg_const_typed(g, 1, TINY_I32)), iota);
  return hg_where(g, hg_binary(g, HG_OP_LT, iota, L), back, fe_expand(g, iota, &tb));
}

/* x [T, B, n] reordered along time by idx [T, B] (a permutation per entry). */
static hg_val reorder(ox_ctx *c, const rnn_spec *s, hg_val x, hg_val idx, int64_t n) {
  const fe_dim *T = fe_dim_int(c->A, s->T), *N = fe_dim_int(c->A, n);
  hg_val e = fe_reshape(c->g, idx, &(fe_shape){.rank = 3, .d = {T, s->B, fe_dim_int(c->A, 1)}});
  return hg_gather(c->g, x, fe_expand(c->g, e, &(fe_shape){.rank = 3, .d = {T, s->B, N}}), 0);
}

/* Direction d's weights, biases and initial state in r. */
static harp_status setup_direction(ox_ctx *c, const rnn_spec *s, const rnn_in *in, int d, hg_val X3, rnn_dir *r) {
  memset(r, 0, sizeof *r);
  int64_t GH = s->G * s->H, H = s->H;
  hg_val xb, rbh;
  if (biases(c, s, in, d, &xb, &rbh)) return c->e->code;
  hg_val Wd = take(c, in->W, d), Rd = take(c, in->R, d);
  /* one GEMM [T·B, I] x [I, G·H] when the rows are contiguous (a step's
   * rows are then a [B, G·H] block: with T = 1, a GEMV the cell takes in) */
  r->flat = !s->layout || s->T == 1 || fe_dim_is_one(s->B);
  if (r->flat)
    X3 = fe_reshape(c->g, X3, &(fe_shape){.rank = 2, .d = {fe_dim_scale(c->A, s->B, s->T), fe_dim_int(c->A, s->I)}});
  r->XW = hg_matmul(c->g, X3, rows_t(c, Wd, 0, GH));
  /* the bias in the GEMM's epilogue; with one step, in the step's gate math
   * instead, so the cell takes the GEMV x Wᵀ in (read by it alone) */
  if (xb > 0 && s->T > 1) r->XW = hg_add(c->g, r->XW, xb);
  r->xb = s->T > 1 ? -1 : xb;
  bool two = s->kind == RK_GRU && !s->lbr; /* (r ⊙ h) Rhᵀ: the hidden gate's rows apart */
  r->RT = rows_t(c, Rd, 0, two ? 2 * H : GH);
  r->RhT = two ? rows_t(c, Rd, 2 * H, 3 * H) : -1;
  r->rbh = rbh;
  for (int k = 0; k < 3; k++) {
    r->p[k] = -1;
    if (in->P > 0) {
      int ax = 0;
      r->p[k] = hg_slice(c->g, take(c, in->P, d), 1, &ax, (int64_t[]){k * H}, (int64_t[]){(k + 1) * H}, NULL);
    }
  }
  r->h = in->h0 > 0 ? take(c, in->h0, d) : -1;
  r->c = in->c0 > 0 ? take(c, in->c0, d) : -1;
  r->act = &s->act[d * n_acts[s->kind]];
  return ox_check(c, r->XW) || ox_check(c, r->RT) ? c->e->code : HARP_OK;
}

/* Direction d: y [T, 1, B, H] in time order (when need_y), the final h and c.
 * valid_all [T, B] bool or -1; ridx [T, B] the per-entry reversal or -1. */
static harp_status run_direction(ox_ctx *c, const rnn_spec *s, const rnn_in *in, int d, hg_val valid_all, hg_val ridx, bool need_y,
                               hg_val *Y, hg_val *hf, hg_val *cf) {
  bool rev = s->reverse || d == 1, reordered = rev && ridx > 0;
  rnn_dir r;
  if (setup_direction(c, s, in, d, reordered ? reorder(c, s, in->X, ridx, s->I) : in->X, &r)) return c->e->code;
  hg_val *ys = ut_xmalloc(sizeof(hg_val) * (size_t)s->T);
  if (!ys) return ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
  harp_status st = HARP_OK;
  const fe_dim *one = fe_dim_int(c->A, 1), *Hd = fe_dim_int(c->A, s->H);
  for (int64_t k = 0; k < s->T && !st; k++) {
    int64_t t = rev && !reordered ? s->T - 1 - k : k;
    hg_val valid = -1;
    if (valid_all > 0) {
      int ax = 0;
      valid = fe_reshape(c->g, hg_slice(c->g, valid_all, 1, &ax, &t, (int64_t[]){t + 1}, NULL), &(fe_shape){.rank = 2, .d = {s->B, one}});
    }
    hg_val y = step(c, s, &r, t, valid);
    st = ox_check(c, y);
    if (!st && need_y) ys[t] = fe_reshape(c->g, y, &(fe_shape){.rank = 4, .d = {one, one, s->B, Hd}});
  }
  if (!st && need_y) { /* [T, 1, B, H]: Y's own shape, so the concatenation is Y (no copy after it) */
    *Y = hg_concat(c->g, ys, (int)s->T, 0);
    if (reordered) {
      fe_shape tbh = {.rank = 3, .d = {fe_dim_int(c->A, s->T), s->B, Hd}}, t1bh = {.rank = 4, .d = {fe_dim_int(c->A, s->T), one, s->B, Hd}};
      *Y = fe_reshape(c->g, reorder(c, s, fe_reshape(c->g, *Y, &tbh), ridx, s->H), &t1bh);
    }
    st = ox_check(c, *Y);
  }
  free(ys);
  *hf = r.h, *cf = r.c;
  return st;
}

/* Per-direction values stacked along axis ax: [B, H] ones into [D, B, H]
 * (ax 0), [T, 1, B, H] ones into [T, D, B, H] (ax 1); zeroed where keep is false. */
static hg_val stack_dirs(ox_ctx *c, const rnn_spec *s, const hg_val *v, int ax, hg_val keep_mask) {
  hg_val parts[2];
  for (int d = 0; d < s->D; d++) {
    const fe_shape *sh = ox_shape_of(c, v[d]);
    if (ax == 1) {
      parts[d] = v[d];
      continue;
    }
    fe_shape to = {.rank = sh->rank + 1};
    for (int k = 0, j = 0; k < to.rank; k++) to.d[k] = k == ax ? fe_dim_int(c->A, 1) : sh->d[j++];
    parts[d] = fe_reshape(c->g, v[d], &to);
  }
  hg_val out = s->D == 1 ? parts[0] : hg_concat(c->g, parts, 2, ax);
  if (keep_mask > 0) out = hg_where(c->g, keep_mask, out, K(c, 0));
  if (s->layout) { /* [T, D, B, H] -> [B, T, D, H]; [D, B, H] -> [B, D, H] */
    static const int p4[4] = {2, 0, 1, 3}, p3[3] = {1, 0, 2};
    out = ax == 1 ? hg_permute(c->g, out, p4, 4) : hg_permute(c->g, out, p3, 3);
  }
  return out;
}

static bool wanted(const ox_ctx *c, int i) { return i < (int)c->node->n_output && c->node->output[i][0]; }

/* The masks sequence_lens gives: valid [T, B] (t < len), the per-entry
 * reversal index (when a direction runs backwards) and nonzero [1, B, 1]
 * (len > 0: which final states are kept). */
static harp_status length_masks(ox_ctx *c, const rnn_spec *s, hg_val lens, hg_val *valid, hg_val *ridx, hg_val *nonzero) {
  ut_tensor t;
  if (ut_tensor_alloc(c->e, &t, TINY_I32, 2, (int64_t[]){s->T, 1})) return c->e->code;
  for (int64_t k = 0; k < s->T; k++) ((int32_t *)t.data)[k] = (int32_t)k;
  hg_val iota = ox_weight(c, "time", &t);
  ut_tensor_free(&t);
  if (iota < 0) return c->e->code;
  hg_val L = fe_reshape(c->g, lens, &(fe_shape){.rank = 2, .d = {fe_dim_int(c->A, 1), s->B}});
  *valid = hg_binary(c->g, HG_OP_LT, iota, L);
  *ridx = s->reverse || s->D == 2 ? reverse_index(c, s, iota, lens) : -1;
  *nonzero = fe_reshape(c->g, hg_binary(c->g, HG_OP_GT, lens, hg_const_typed(c->g, 0, TINY_I32)),
                        &(fe_shape){.rank = 3, .d = {fe_dim_int(c->A, 1), s->B, fe_dim_int(c->A, 1)}});
  return ox_check(c, *valid) || (*ridx != -1 && ox_check(c, *ridx)) || ox_check(c, *nonzero) ? c->e->code : HARP_OK;
}

static harp_status rnn_op(ox_ctx *c, int kind) {
  rnn_spec s;
  rnn_in in;
  if (parse_attrs(c, kind, &s) || read_inputs(c, &s, &in)) return c->e->code;
  int nout = kind == RK_LSTM ? 3 : 2;
  if ((int)c->node->n_output > nout) return ox_fail(c, HARP_E_ARITY, "%s has at most %d outputs", c->node->op_type, nout);
  hg_val valid = -1, ridx = -1, nonzero = -1;
  if (in.lens > 0 && length_masks(c, &s, in.lens, &valid, &ridx, &nonzero)) return c->e->code;
  hg_val Y[2] = {-1, -1}, hf[2], cf[2];
  for (int d = 0; d < s.D; d++)
    if (run_direction(c, &s, &in, d, valid, ridx, wanted(c, 0), &Y[d], &hf[d], &cf[d])) return c->e->code;
  if (wanted(c, 0) && ox_def(c, 0, stack_dirs(c, &s, Y, 1, -1))) return c->e->code;
  if (wanted(c, 1) && ox_def(c, 1, stack_dirs(c, &s, hf, 0, nonzero))) return c->e->code;
  if (kind == RK_LSTM && wanted(c, 2) && ox_def(c, 2, stack_dirs(c, &s, cf, 0, nonzero))) return c->e->code;
  return HARP_OK;
}

harp_status ox_op_LSTM(ox_ctx *c) { return rnn_op(c, RK_LSTM); }
harp_status ox_op_GRU(ox_ctx *c) { return rnn_op(c, RK_GRU); }
harp_status ox_op_RNN(ox_ctx *c) { return rnn_op(c, RK_RNN); }
