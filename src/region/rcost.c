/* rcost.c — what a candidate region costs (seed 000 §4.1 step 4, §5, §6):
 * its plan_region_info summary, its default plan on the machine, the time
 * estimate, and the Δtime of a fusion through plan_fusion_delta.
 * Needs: legal.c (a legal set), the plan layer.  Gives: rg_cost_set,
 * rg_delta, rg_stop_of, rg_epilogue_roles.
 *
 * Summaries by shape:
 *   A / contraction  axes b0.. (batch), m (the m variables together), n, k
 *                    (the reduced variables together): the GEMM view the
 *                    backends tile; the epilogue mapped to plan ops when
 *                    every op maps (bias, relu, silu, gelu, residual; casts
 *                    are free; a scale or a clamp by a constant has no plan
 *                    op: the epilogue is unknown then)
 *   B / ewise, reduce  p0.. the shared loop dimensions, then k: the largest
 *                    amount of work one shared-loop point does (sequential
 *                    inside a CTA / core)
 *   C / attention    b0.., m (queries), n (keys), k (head dim)
 * Bytes are the compulsory traffic of the region: every tensor it reads
 * and writes once.  That is what makes fusion pay: an intermediate kept
 * inside is never written nor read back.
 *
 * Occupancy.  Local buffers (smem_ring) add to the plan's shared memory,
 * which can lower CTAs per SM.  The throughput factor is saturating,
 * min(1, occ / occ_sat) x wave efficiency, with occ_sat = 1/8 on the GPUs
 * (a tensor-core GEMM at 8 of 64 warps per SM runs at full speed) and 1 on
 * the CPU: §5's occupancy used literally charges GPU GEMMs ~8x and would
 * make every occupancy change look like a large Δtime (docs/plan.md). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "region/rg_int.h"

#define LOG2E 1.4426950408889634

static harp_status default_plan(rg_ctx *c, const plan_region_info *r, bool *has_plan, plan_t *plan, plan_cost *cost);

static int64_t extent(const int64_t *lo, const int64_t *hi, int v) { return hi[v] - lo[v] + 1; }

/* A block's variable ranges for the estimates; unknown ones (none should
 * be, every symbol bound) count as extent 1 rather than stack garbage. */
static void ranges(const rg_ctx *c, int b, int64_t *lo, int64_t *hi) {
  if (poly_block_ranges(c->pv, b, lo, hi)) return;
  for (int v = 0; v < POLY_MAX_VARS; v++) lo[v] = hi[v] = 0;
}

static int64_t numel(const tiny_graph *g, int n) {
  int64_t k = tiny_shape_numel(&g->nodes[n].shape);
  return k > 0 ? k : 0;
}

static double nbytes(const tiny_graph *g, int n) { return (double)numel(g, n) * tiny_dtype_size(g->nodes[n].dtype); }

/* ---- epilogue roles ---------------------------------------------------------------- */
static const poly_block_info *PB(const rg_ctx *c, int b) { return poly_block(c->pv, b); }
static tiny_op OP(const rg_ctx *c, int b) { return c->g->nodes[PB(c, b)->node].op; }

static bool is_const(const rg_ctx *c, int b, int k, double *v) {
  const tiny_node *n = &c->g->nodes[PB(c, b)->access[k].tensor];
  if (n->op != TINY_CONST) return false;
  *v = n->a.cnst.value;
  return true;
}

/* access k of b reads a block of the set: which */
static int inner_src(const rg_ctx *c, const int *set, int n, int b, int k) {
  int p = rg_producer_block(c, PB(c, b)->access[k].tensor);
  return p >= 0 && rg_in(set, n, p) ? p : -1;
}

/* MUL(x, RECIP(ADD(EXP2(MUL(x, -log2 e)), 1))) or MUL(x, RECIP(ADD(EXP(NEG(x)), 1))): x * sigmoid(x). */
static bool silu_at(const rg_ctx *c, const int *set, int n, int mul, int *parts, int *np) {
  if (OP(c, mul) != TINY_MUL) return false;
  for (int side = 0; side < 2; side++) {
    int r = inner_src(c, set, n, mul, 1 - side);
    int xt = PB(c, mul)->access[side].tensor;
    double v;
    if (r < 0 || OP(c, r) != TINY_RECIP) continue;
    int a = inner_src(c, set, n, r, 0);
    if (a < 0 || OP(c, a) != TINY_ADD) continue;
    int ka = is_const(c, a, 1, &v) && v == 1.0 ? 0 : is_const(c, a, 0, &v) && v == 1.0 ? 1 : -1;
    if (ka < 0) continue;
    int e = inner_src(c, set, n, a, ka);
    if (e < 0) continue;
    int arg = -1, t = -1;
    if (OP(c, e) == TINY_EXP2) {
      t = inner_src(c, set, n, e, 0);
      if (t < 0 || OP(c, t) != TINY_MUL) continue;
      int kt = is_const(c, t, 1, &v) && fabs(v + LOG2E) < 1e-6 ? 0 : is_const(c, t, 0, &v) && fabs(v + LOG2E) < 1e-6 ? 1 : -1;
      if (kt < 0) continue;
      arg = PB(c, t)->access[kt].tensor;
    } else if (OP(c, e) == TINY_EXP) {
      t = inner_src(c, set, n, e, 0);
      if (t < 0 || OP(c, t) != TINY_NEG) continue;
      arg = PB(c, t)->access[0].tensor;
    } else {
      continue;
    }
    if (arg != xt) continue;
    parts[0] = mul, parts[1] = r, parts[2] = a, parts[3] = e, parts[4] = t;
    *np = 5;
    return true;
  }
  return false;
}

/* Block b's side that reads the chain (a value of the set) when the other
 * is a float constant, not NaN; -1 otherwise. */
static int const_step(const rg_ctx *c, const int *set, int n, int b) {
  double v;
  for (int k = 0; k < 2; k++)
    if (inner_src(c, set, n, b, 1 - k) >= 0 && inner_src(c, set, n, b, k) < 0 && is_const(c, b, k, &v) && !isnan(v) &&
        tiny_dtype_is_float(c->g->nodes[PB(c, b)->access[k].tensor].dtype))
      return 1 - k;
  return -1;
}

/* Position of block b in the set, -1 when absent. */
static int set_pos(const int *set, int n, int b) {
  for (int i = 0; i < n; i++)
    if (set[i] == b) return i;
  return -1;
}

/* MUL(x, g) with g = [MIN]([MAX]([ADD]([MUL](x, a), b), lo), hi) by
 * constants, at least one of them: a gate, x * clamp(x * a + b, lo, hi)
 * (hardswish's x * relu6(x + 3) before its / 6).  The ops of g and the MUL
 * must follow one another in the set right after x's producer, so that the
 * gate applies to the epilogue's value at that point (contract.c reads them
 * as one step).  parts: g's blocks in program order, then the MUL. */
static bool gate_at(const rg_ctx *c, const int *set, int n, int mul, int *parts, int *np) {
  static const tiny_op order[4] = {TINY_MIN, TINY_MAX, TINY_ADD, TINY_MUL}; /* g's ops from its end back */
  if (OP(c, mul) != TINY_MUL) return false;
  for (int side = 0; side < 2; side++) {
    int xt = PB(c, mul)->access[side].tensor, g = inner_src(c, set, n, mul, 1 - side);
    int xp = inner_src(c, set, n, mul, side), chain[4], k = 0;
    if (g < 0 || xp < 0 || g == xp) continue;
    for (int o = 0; o < 4 && g >= 0; o++) {
      int a = OP(c, g) == order[o] ? const_step(c, set, n, g) : -1;
      if (a < 0) continue;
      chain[k++] = g;
      g = PB(c, g)->access[a].tensor == xt ? -2 : inner_src(c, set, n, g, a); /* -2: reached x */
    }
    if (g != -2 || k == 0) continue;
    int at = set_pos(set, n, xp), ok = at >= 0;
    for (int j = 0; ok && j < k; j++) ok = set_pos(set, n, chain[k - 1 - j]) == at + 1 + j;
    if (!ok || set_pos(set, n, mul) != at + 1 + k) continue;
    for (int j = 0; j < k; j++) parts[j] = chain[k - 1 - j];
    parts[k] = mul;
    *np = k + 1;
    return true;
  }
  return false;
}

bool rg_silu_last(const tiny_graph *g, int node) {
  const tiny_node *m = &g->nodes[node];
  return m->op == TINY_MUL && (g->nodes[m->src[0].node].op == TINY_RECIP || g->nodes[m->src[1].node].op == TINY_RECIP);
}

void rg_epilogue_roles(rg_ctx *c, const int *set, int n, int K, int *roles) {
  for (int i = 0; i < n; i++) roles[i] = -1;
  for (int i = 0; i < n; i++) {
    int parts[5], np = 0;
    if (set[i] != K && silu_at(c, set, n, set[i], parts, &np))
      for (int j = 0; j < np; j++)
        for (int q = 0; q < n; q++)
          if (set[q] == parts[j]) roles[q] = PLAN_EPI_SILU;
    if (c->gate_epilogues && set[i] != K && roles[i] < 0 && gate_at(c, set, n, set[i], parts, &np))
      for (int j = 0; j < np; j++) roles[set_pos(set, n, parts[j])] = RG_ROLE_GATE;
  }
  for (int i = 0; i < n; i++) {
    int b = set[i];
    if (b == K || roles[i] >= 0) continue;
    tiny_epi ek = tiny_op_epi(OP(c, b)); /* the op table's epilogue column */
    if (ek == TE_RELU) roles[i] = PLAN_EPI_RELU;
    else if (ek == TE_GELU) roles[i] = PLAN_EPI_GELU;
    else if (ek == TE_SHIFT) {
      int in0 = inner_src(c, set, n, b, 0), in1 = inner_src(c, set, n, b, 1);
      if (in0 >= 0 && rg_operand_cast(c, set, n, K, in0)) in0 = -1; /* a converted operand counts as outside */
      if (in1 >= 0 && rg_operand_cast(c, set, n, K, in1)) in1 = -1;
      if ((in0 < 0) == (in1 < 0)) continue;
      int k = in0 < 0 ? 0 : 1;
      int64_t st[POLY_MAX_VARS], off;
      bool aff;
      if (poly_access_strides(c->e, c->pv, b, k, st, &off, &aff) || !aff) continue;
      bool bcast = false;
      int64_t lo[POLY_MAX_VARS], hi[POLY_MAX_VARS];
      if (!poly_block_ranges(c->pv, b, lo, hi)) continue;
      for (int v = 0; v < PB(c, b)->nvars; v++) bcast |= st[v] == 0 && extent(lo, hi, v) > 1;
      roles[i] = bcast ? PLAN_EPI_BIAS : PLAN_EPI_RESIDUAL;
    }
  }
}

/* Whether block b of the set (K its anchor) is a step the epilogues of the
 * CPU and CUDA templates make: a reshape, a cast between floats, or what
 * the op table's epilogue column says the op is, with its operands in place. */
static bool epilogue_step_ok(rg_ctx *c, const int *set, int n, int K, int b) {
  const tiny_node *x = &c->g->nodes[PB(c, b)->node];
  if (x->op == TINY_RESHAPE) return true;
  if (x->op == TINY_CAST) return tiny_dtype_is_float(x->dtype) && tiny_dtype_is_float(c->g->nodes[x->src[0].node].dtype);
  switch (tiny_op_epi(x->op)) {
  case TE_RELU:
  case TE_GELU:
  case TE_RINT: return true;
  case TE_SHIFT:
  case TE_SCALE: {
    int in[2];
    for (int k = 0; k < 2; k++) {
      in[k] = inner_src(c, set, n, b, k);
      if (in[k] >= 0 && rg_operand_cast(c, set, n, K, in[k])) in[k] = -1; /* a converted operand: outside */
    }
    /* the chain on one side, an operand (a tensor or a constant) on the
     * other: + or x, a step of the CPU and the CUDA epilogues alike */
    return (in[0] < 0) != (in[1] < 0);
  }
  case TE_LOWER:
  case TE_UPPER: {
    /* with a constant (not NaN) on the other side: a clamp step (ReLU6) */
    int k = inner_src(c, set, n, b, 0) >= 0 ? 1 : 0;
    double v;
    return inner_src(c, set, n, b, 1 - k) >= 0 && is_const(c, b, k, &v) && !isnan(v) &&
           tiny_dtype_is_float(c->g->nodes[PB(c, b)->access[k].tensor].dtype);
  }
  default:
    /* x / c by a float constant (not NaN) with rg_options.gate_epilogues:
     * a division step (hardswish's / 6), as exact as the map's */
    if (!c->gate_epilogues || x->op != TINY_FDIV || inner_src(c, set, n, b, 0) < 0 || inner_src(c, set, n, b, 1) >= 0)
      return false;
    double v;
    return is_const(c, b, 1, &v) && !isnan(v) && tiny_dtype_is_float(c->g->nodes[PB(c, b)->access[1].tensor].dtype);
  }
}

/* Whether block b of the set is a GELU or SiLU after a RINT of the set (a
 * requantization: an earlier block, as the set is in program order) on the
 * CPU.  The int8 kernels' epilogue is a requantization (contract_q8.c): a
 * quantized contraction with an activation fused after it runs the bf16
 * template instead (BERT's FFN1 + GELU: ~10x the int8 kernel's time), so the
 * activation goes to the next kernel, with the Q that reads it.  A GELU
 * followed by a second RINT (DQ -> GELU -> Q: a function of the first
 * requantization's byte, one table in the int8 kernel's post hook,
 * contract_q8out.c's cc_q8_lut) stays, as long as only steps without a
 * tensor come between the two RINTs. */
static bool after_requant(rg_ctx *c, const int *set, int n, int K, int i, const int *roles) {
  tiny_op op = c->g->nodes[PB(c, set[i])->node].op;
  if (plan_arch_is_gpu(c->m.arch) || (tiny_op_epi(op) != TE_GELU && roles[i] != PLAN_EPI_SILU)) return false;
  bool before = false;
  for (int j = 0; j < i; j++)
    if (set[j] != K && tiny_op_epi(c->g->nodes[PB(c, set[j])->node].op) == TE_RINT) before = true;
  if (!before || roles[i] == PLAN_EPI_SILU) return before;
  for (int j = i + 1; j < n; j++) {
    if (set[j] == K) continue;
    if (tiny_op_epi(c->g->nodes[PB(c, set[j])->node].op) == TE_RINT) return false; /* a table of bytes */
    if (roles[j] == PLAN_EPI_BIAS || roles[j] == PLAN_EPI_RESIDUAL) return true;
  }
  return true;
}

bool rg_epilogue_template(rg_ctx *c, const int *set, int n, int K, int *bad) {
  int roles[RG_MAX_SET], steps = 0;
  rg_epilogue_roles(c, set, n, K, roles);
  for (int i = 0; i < n; i++) {
    int b = set[i];
    if (b != K && after_requant(c, set, n, K, i, roles)) {
      *bad = b;
      return false;
    }
    if (roles[i] == RG_ROLE_GATE && ++steps > RG_MAX_EPI) { /* one step in all: each op counted, to be safe */
      *bad = b;
      return false;
    }
    if (b == K || roles[i] == PLAN_EPI_SILU || roles[i] == RG_ROLE_GATE || rg_operand_cast(c, set, n, K, b)) continue;
    rg_resfma rf;
    bool side = false, resfma = rg_resfma_at(c, set, n, K, b, &rf);
    if (!resfma && rg_resfma_part(c, set, n, K, b, &side)) continue; /* a side node or the inner MULADD: the outer's step */
    if (!resfma && !epilogue_step_ok(c, set, n, K, b)) {
      *bad = b;
      return false;
    }
    /* the templates apply at most RG_MAX_EPI steps (a max then a min: one clamp) */
    tiny_op op = c->g->nodes[PB(c, b)->node].op;
    steps += op != TINY_RESHAPE && op != TINY_CAST && op != TINY_MIN;
    if (steps > RG_MAX_EPI) {
      *bad = b;
      return false;
    }
  }
  return true;
}

/* The plan's epilogue: roles in order, casts skipped; unknown on anything else or a repeat. */
static void plan_epilogue(rg_ctx *c, const int *set, int n, int K, plan_region_info *r) {
  int roles[RG_MAX_SET];
  rg_epilogue_roles(c, set, n, K, roles);
  r->epilogue_known = true;
  r->nepi = 0;
  bool in_silu = false; /* inside a spelled-out silu: its ops are one step */
  for (int i = 0; i < n; i++) {
    if (set[i] == K || OP(c, set[i]) == TINY_CAST) continue;
    if (roles[i] < 0 || roles[i] >= PLAN_EPI_COUNT) { /* no plan op (a gate, RG_ROLE_GATE) */
      r->epilogue_known = false;
      r->nepi = 0;
      return;
    }
    bool same = in_silu && roles[i] == PLAN_EPI_SILU;
    in_silu = roles[i] == PLAN_EPI_SILU && !rg_silu_last(c->g, PB(c, set[i])->node);
    if (same) continue;
    for (int j = 0; j < r->nepi; j++)
      if (r->epilogue[j] == (plan_epi)roles[i]) {
        r->epilogue_known = false;
        r->nepi = 0;
        return;
      }
    if (r->nepi == PLAN_MAX_EPI) {
      r->epilogue_known = false;
      r->nepi = 0;
      return;
    }
    r->epilogue[r->nepi++] = (plan_epi)roles[i];
  }
}

/* ---- summaries --------------------------------------------------------------------- */
static plan_axis_info *axis(rg_eval *ev, const char *name, int64_t size, bool reduce, plan_role role) {
  plan_region_info *r = &ev->info;
  if (r->naxes >= PLAN_MAX_REGION_AXES) return NULL;
  snprintf(ev->names[r->naxes], sizeof ev->names[0], "%s", name);
  plan_axis_info *a = &r->axes[r->naxes++];
  a->name = ev->names[r->naxes - 1];
  a->size = size > 0 ? size : 1;
  a->reduce = reduce;
  a->role = role;
  return a;
}

/* Node n of g is a model parameter (through views): a conv weight the
 * kernels pack, or transform, once at model_init. */
static bool is_param(const tiny_graph *g, int n) {
  while (n >= 0 && tiny_op_class(g->nodes[n].op) == TC_MOVE) n = g->nodes[n].src[0].node;
  if (n < 0 || g->nodes[n].op != TINY_INPUT) return false;
  const char *st = g->nodes[n].a.input.storage;
  return st && !strcmp(st, "param");
}

static void contraction_axes(rg_ctx *c, int K, rg_eval *ev) {
  const poly_contraction *k = PB(c, K)->con;
  int64_t lo[POLY_MAX_VARS], hi[POLY_MAX_VARS];
  ranges(c, K, lo, hi);
  char nm[16];
  for (int i = 0; i < k->nbatch; i++) {
    snprintf(nm, sizeof nm, "b%d", i);
    axis(ev, nm, extent(lo, hi, k->batch[i]), false, PLAN_ROLE_BATCH);
  }
  int64_t M = 1, N = 1, R = 1;
  for (int i = 0; i < k->nm; i++) M *= extent(lo, hi, k->m[i]);
  for (int i = 0; i < k->nn; i++) N *= extent(lo, hi, k->n[i]);
  for (int v = k->nout; v < k->nout + k->nred; v++) R *= extent(lo, hi, v);
  if (k->nm) axis(ev, "m", M, false, PLAN_ROLE_M);
  if (k->nn) axis(ev, "n", N, false, PLAN_ROLE_N);
  axis(ev, "k", R, true, PLAN_ROLE_K);
  ev->info.pattern = k->pattern == POLY_PAT_CONV ? PLAN_PAT_CONV : PLAN_PAT_MATMUL;
  ev->info.in_dtype = c->g->nodes[k->lhs].dtype;
  ev->info.acc_dtype = c->g->nodes[k->reduce_node].dtype;
  int nwin = 0;
  bool win_side[2] = {false, false};
  for (int side = 0; side < 2; side++) {
    const poly_idx *idx = side ? k->rhs_idx : k->lhs_idx;
    int rank = side ? k->rhs_rank : k->lhs_rank;
    for (int d = 0; d < rank; d++)
      if (idx[d].kind == POLY_IDX_WINDOW && nwin < 2) {
        int64_t w = extent(lo, hi, idx[d].win_var), o = extent(lo, hi, idx[d].out_var);
        int st = (int)idx[d].stride, dl = (int)idx[d].dilation;
        win_side[side] = true;
        if (nwin++ == 0) ev->info.conv_kh = (int)w, ev->info.conv_sh = st, ev->info.conv_dh = dl, ev->info.conv_oh = o;
        else ev->info.conv_kw = (int)w, ev->info.conv_sw = st, ev->info.conv_dw = dl, ev->info.conv_ow = o;
      }
  }
  if (!nwin) ev->info.a_param = is_param(c->g, k->lhs), ev->info.b_param = is_param(c->g, k->rhs);
  /* the output's innermost axis (out variable v is the output's axis v) is
   * one of M's: C is unit-stride along M (contract_c.c, gemm_transpose) */
  for (int i = 0; !nwin && k->nout > 0 && i < k->nm; i++) ev->info.c_m_contig |= k->m[i] == k->nout - 1;
  if (nwin && win_side[0] != win_side[1] && !is_param(c->g, win_side[0] ? k->rhs : k->lhs))
    ev->info.conv_w_per_call = (win_side[0] ? N : M) * R; /* the weight: its own out channels by the reduction */
  double all = 1;
  for (int v = 0; v < k->nout + k->nred; v++) all *= (double)extent(lo, hi, v);
  ev->flops += 2 * all;
}

static void row_axes(rg_ctx *c, const int *set, int n, rg_eval *ev) {
  int64_t lo[POLY_MAX_VARS], hi[POLY_MAX_VARS], inner = 1;
  ranges(c, set[0], lo, hi);
  char nm[16];
  for (int v = 0; v < ev->prefix; v++) {
    snprintf(nm, sizeof nm, "p%d", v);
    axis(ev, nm, extent(lo, hi, v), false, PLAN_ROLE_AUTO);
  }
  bool red = false;
  for (int i = 0; i < n; i++) {
    const poly_block_info *b = PB(c, set[i]);
    int64_t l2[POLY_MAX_VARS], h2[POLY_MAX_VARS], w = 1;
    ranges(c, set[i], l2, h2);
    for (int v = ev->prefix; v < b->nvars; v++) w *= extent(l2, h2, v);
    inner = UT_MAX(inner, w);
    red |= b->kind == POLY_REDUCE;
  }
  if (inner > 1) axis(ev, "k", inner, true, PLAN_ROLE_AUTO);
  if (ev->info.naxes == 0) axis(ev, "p0", 1, false, PLAN_ROLE_AUTO);
  ev->info.pattern = inner > 1 || red ? PLAN_PAT_REDUCE : PLAN_PAT_EWISE;
}

static void attention_axes(rg_ctx *c, const rg_attention *a, rg_eval *ev) {
  int64_t lo[POLY_MAX_VARS], hi[POLY_MAX_VARS], l2[POLY_MAX_VARS], h2[POLY_MAX_VARS];
  ranges(c, a->qk, lo, hi);
  ranges(c, a->pv, l2, h2);
  const poly_contraction *k = PB(c, a->qk)->con;
  char nm[16];
  double B = 1;
  for (int i = 0; i < k->nbatch; i++) {
    snprintf(nm, sizeof nm, "b%d", i);
    axis(ev, nm, extent(lo, hi, k->batch[i]), false, PLAN_ROLE_BATCH);
    B *= (double)extent(lo, hi, k->batch[i]);
  }
  int64_t M = extent(lo, hi, a->q_var), N = extent(lo, hi, a->k_var), D = extent(lo, hi, a->d_var),
          Dv = extent(l2, h2, a->dv_var);
  axis(ev, "m", M, false, PLAN_ROLE_M);
  axis(ev, "n", N, false, PLAN_ROLE_N);
  axis(ev, "k", D, true, PLAN_ROLE_K);
  ev->info.pattern = PLAN_PAT_ATTENTION;
  ev->info.in_dtype = c->g->nodes[a->q.node].dtype;
  ev->info.acc_dtype = TINY_FP32;
  ev->flops = B * (double)M * (double)N * (2.0 * (double)D + 2.0 * (double)Dv + 5.0);
}

static bool rows_aligned(const tiny_graph *g, int node) {
  const tiny_shape *s = &g->nodes[node].shape;
  return s->rank < 2 || s->d[s->rank - 1].n * tiny_dtype_size(g->nodes[node].dtype) % 16 == 0;
}

static double occ_factor(const rg_ctx *c, double occ) {
  double f = occ / c->occ_sat;
  return f > 1 ? 1 : f;
}

harp_status rg_cost_set(rg_ctx *c, const int *blocks, int n, int gather, rg_eval *ev) {
  const tiny_graph *g = c->g;
  plan_region_info *r = &ev->info;
  memset(r, 0, sizeof *r);
  ev->flops = 0;
  int last = gather >= 0 ? gather : PB(c, blocks[n - 1])->node;
  r->name = gather >= 0 ? g->nodes[gather].id : rg_block_name(c, blocks[n - 1]);
  r->acc_dtype = TINY_FP32;
  /* traffic: inputs and outputs once */
  int nn, nin, nout;
  int *outs = c->outs;
  rg_region_nodes(c, blocks, n, gather, &nn, &nin, outs, &nout);
  double bytes = 0, biggest = -1;
  ev->tma_ok = true;
  r->in_dtype = g->nodes[last].dtype;
  const rg_attention *att = ev->shape == RG_SHAPE_ATTENTION ? c->units[c->unit_of_block[blocks[0]]].att : NULL;
  for (int k = 0; k < c->rn_n; k++) {
    int i = c->rn_list[k];
    if (c->rn_mark[i] != 2) continue;
    if (att && att->causal && att->where_mask == i) continue; /* the kernel computes the causal mask itself */
    bytes += nbytes(g, i);
    ev->tma_ok &= rows_aligned(g, i);
    if (nbytes(g, i) > biggest) biggest = nbytes(g, i), r->in_dtype = g->nodes[i].dtype;
    if (r->ninputs < 8) ev->inputs[r->ninputs] = tiny_output_name(g, i), r->inputs[r->ninputs] = ev->inputs[r->ninputs], r->ninputs++;
  }
  if (nout == 0) outs[nout++] = last;
  for (int i = 0; i < nout; i++) bytes += nbytes(g, outs[i]), ev->tma_ok &= rows_aligned(g, outs[i]);
  ev->bytes = bytes;
  r->out_dtype = g->nodes[last].dtype;
  int K = -1;
  for (int i = 0; i < n; i++)
    if (PB(c, blocks[i])->kind == POLY_CONTRACTION) K = blocks[i];
  if (ev->shape == RG_SHAPE_ATTENTION) {
    attention_axes(c, c->units[c->unit_of_block[blocks[0]]].att, ev);
    r->nedges = 0;
  } else if (K >= 0) {
    contraction_axes(c, K, ev);
    plan_epilogue(c, blocks, n, K, r);
    if (n > 1) {
      plan_edge *pe = &r->edges[r->nedges++];
      ut_sanitize_name(rg_block_name(c, K), pe->from, sizeof pe->from); /* plans take identifiers */
      ut_sanitize_name(rg_block_name(c, blocks[n - 1]), pe->to, sizeof pe->to);
      pe->buffer = PLAN_BUF_REG;
    }
  } else if (gather >= 0) {
    ev->prefix = g->nodes[gather].shape.rank;
    char nm[16];
    for (int v = 0; v < ev->prefix; v++) {
      snprintf(nm, sizeof nm, "p%d", v);
      axis(ev, nm, g->nodes[gather].shape.d[v].n, false, PLAN_ROLE_AUTO);
    }
    if (!r->naxes) axis(ev, "p0", 1, false, PLAN_ROLE_AUTO);
    r->pattern = PLAN_PAT_EWISE;
  } else {
    row_axes(c, blocks, n, ev);
  }
  /* the work of the other blocks: one operation per domain point */
  for (int i = 0; i < n && ev->shape != RG_SHAPE_ATTENTION; i++) {
    if (blocks[i] == K) continue;
    int64_t lo[POLY_MAX_VARS], hi[POLY_MAX_VARS];
    double w = 1;
    ranges(c, blocks[i], lo, hi);
    for (int v = 0; v < PB(c, blocks[i])->nvars; v++) w *= (double)extent(lo, hi, v);
    ev->flops += w;
  }
  if (gather >= 0) ev->flops = (double)numel(g, gather);
  r->flops = (int64_t)UT_MIN(ev->flops, 4e18);
  r->bytes = (int64_t)UT_MIN(ev->bytes, 4e18);
  if (r->flops < 1) r->flops = 1;
  if (r->bytes < 1) r->bytes = 1;
  /* the default plan and its cost */
  plan_cost cost;
  if (!(ev->plan = ut_arena_alloc(c->arena, sizeof *ev->plan))) return ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
  if (default_plan(c, r, &ev->has_plan, ev->plan, &cost)) return c->e->code;
  double peak = plan_pattern_is_contraction(r->pattern) ? plan_machine_peak(&c->m, r->in_dtype) : c->m.peak_fp32;
  if (ev->has_plan) {
    plan_resources *res = &ev->res;
    *res = cost.res;
    if (ev->local_smem > 0) {
      res->smem_per_cta += ev->local_smem;
      int64_t by = res->smem_per_cta > 0 ? c->m.smem_per_sm / res->smem_per_cta : res->cta_per_sm;
      if (by < res->cta_per_sm) res->cta_per_sm = (int)by, res->cta_limit = "smem";
      if (res->smem_per_cta > c->m.smem_per_cta_max) res->cta_per_sm = 0;
      double occ = (double)res->cta_per_sm * res->warps_per_cta / c->m.max_warps_per_sm;
      res->occ = occ > 1 ? 1 : occ;
    }
    ev->raw_occ = res->occ;
    res->occ = occ_factor(c, res->occ) * cost.wave_eff;
    ev->time = plan_time_formula(cost.flops, cost.bytes, cost.peak, cost.bw, res->occ, res->pipeline_eff);
  } else {
    memset(&ev->res, 0, sizeof ev->res);
    ev->res.occ = 1;
    ev->raw_occ = 1;
    ev->res.cta_per_sm = 1;
    ev->res.pipeline_eff = 0.5;
    ev->res.smem_per_cta = ev->local_smem;
    ev->time = plan_time_formula(ev->flops, ev->bytes, peak, c->m.mem_bw, 1, 0.5);
  }
  return HARP_OK;
}

/* ---- default plans, memoized ------------------------------------------------------------ */
/* plan_default and plan_cost_of read the summary and the machine (fixed
 * here).  Names enter them only as text: the region's (messages), its
 * inputs' (a cache_read of another tensor than A or B, which a default plan
 * never has) and the local edges' (checked to be identifiers, then copied
 * into the plan).  So the answers are kept by the summary without those
 * names, and a hit takes the edges of its own summary: candidate sets of
 * repeated layers share one plan search. */
#define PLAN_MEMO_BUCKETS 4096

typedef struct rg_plan_memo {
  uint64_t h;
  size_t klen;
  char *key;
  bool has_plan;
  plan_t plan;
  plan_cost cost;
  struct rg_plan_memo *next;
} rg_plan_memo;

static void key_int(ut_str *k, int64_t v) { ut_str_putn(k, (const char *)&v, sizeof v); }
static void key_name(ut_str *k, const char *s) {
  key_int(k, s ? (int64_t)strlen(s) : -1);
  if (s) ut_str_putn(k, s, strlen(s));
}

/* every field the plan layer reads, without padding */
static void summary_key(ut_str *k, const plan_region_info *r) {
  key_int(k, r->pattern);
  key_int(k, r->naxes);
  for (int i = 0; i < r->naxes; i++) {
    key_name(k, r->axes[i].name);
    key_int(k, r->axes[i].size);
    key_int(k, r->axes[i].reduce);
    key_int(k, r->axes[i].role);
  }
  key_int(k, r->in_dtype), key_int(k, r->acc_dtype), key_int(k, r->out_dtype);
  key_int(k, r->flops), key_int(k, r->bytes);
  key_int(k, r->epilogue_known);
  key_int(k, r->nepi);
  for (int i = 0; i < PLAN_MAX_EPI; i++) key_int(k, r->epilogue[i]);
  key_int(k, r->nedges);
  for (int i = 0; i < r->nedges && i < PLAN_MAX_EDGES; i++) {
    key_int(k, plan_ident_ok(r->edges[i].from) && plan_ident_ok(r->edges[i].to));
    key_int(k, r->edges[i].buffer);
    key_int(k, r->edges[i].depth);
  }
  key_int(k, r->ninputs);
  key_int(k, r->conv_kh), key_int(k, r->conv_kw);
  key_int(k, r->conv_sh), key_int(k, r->conv_sw), key_int(k, r->conv_dh), key_int(k, r->conv_dw);
  key_int(k, r->conv_oh), key_int(k, r->conv_ow);
  key_int(k, r->conv_w_per_call), key_int(k, r->a_param), key_int(k, r->b_param), key_int(k, r->c_m_contig);
}

static harp_status default_plan(rg_ctx *c, const plan_region_info *r, bool *has_plan, plan_t *plan, plan_cost *cost) {
  if (!c->plan_memo && !(c->plan_memo = ut_arena_alloc(c->arena, sizeof(rg_plan_memo *) * PLAN_MEMO_BUCKETS)))
    return ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
  ut_str k;
  ut_str_init(&k);
  summary_key(&k, r);
  if (k.oom) {
    ut_str_free(&k);
    return ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
  }
  uint64_t h = ut_hash64(k.buf, k.len, 0x706c616e6d656d6full);
  rg_plan_memo **slot = &c->plan_memo[h % PLAN_MEMO_BUCKETS];
  for (rg_plan_memo *x = *slot; x; x = x->next)
    if (x->h == h && x->klen == k.len && !memcmp(x->key, k.buf, k.len)) {
      ut_str_free(&k);
      *has_plan = x->has_plan;
      *plan = x->plan;
      *cost = x->cost;
      if (plan->nedges > 0) memcpy(plan->edges, r->edges, sizeof(plan_edge) * (size_t)plan->nedges); /* plan_fill_from_region's */
      return HARP_OK;
    }
  harp_error pe = {0};
  memset(cost, 0, sizeof *cost);
  plan_search_opts so = {.algo_mask = c->algo_mask};
  *has_plan = plan_default(r, &c->m, &so, plan, &pe) == HARP_OK && plan_cost_of(plan, r, &c->m, cost, &pe) == HARP_OK;
  rg_plan_memo *x = pe.code == HARP_E_NO_MEMORY ? NULL : ut_arena_alloc(c->arena, sizeof *x);
  char *key = x ? ut_arena_alloc(c->arena, k.len + 1) : NULL;
  if (!key) {
    ut_str_free(&k);
    return ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
  }
  memcpy(key, k.buf, k.len);
  *x = (rg_plan_memo){h, k.len, key, *has_plan, *plan, *cost, *slot};
  *slot = x;
  ut_str_free(&k);
  return HARP_OK;
}

/* §4.2 compares vector widths in elements: a region that now reads fp32
 * where it read fp16 stores its fp16 output 4 wide instead of 8. */
static int vec_width(const rg_ctx *c, const plan_region_info *r, int w) {
  (void)c, (void)r;
  return w;
}

/* The absorbing kernel's plan applied to the fused region: its resources
 * with the fusion's additions (epilogue registers, local buffers) and the
 * widest vector that still fits.  False when the plan cannot describe the
 * fused region (another loop structure). */
static bool same_plan(rg_ctx *c, const rg_eval *base, const rg_eval *S, plan_resources *res, int *vec, double *raw_occ) {
  if (!base->has_plan) return false;
  plan_t p = *base->plan;
  p.nepi = 0;
  if (S->info.epilogue_known) {
    p.nepi = S->info.nepi;
    memcpy(p.epi, S->info.epilogue, sizeof(plan_epi) * (size_t)p.nepi);
  }
  p.nedges = 0;
  harp_error e = {0};
  plan_cost cost;
  /* the widest vector the fused region allows on the same loops */
  for (int w = 16;; w /= 2) {
    p.vec_width = w;
    memset(&e, 0, sizeof e);
    if (plan_validate(&p, &S->info, &c->m, NULL, &e) == HARP_OK) break;
    bool vec_issue = e.code == HARP_E_MISALIGNED || (e.code == HARP_E_INVALID_ARG && strstr(e.msg, "vector"));
    if (!vec_issue || w <= 1) return false;
  }
  if (plan_cost_of(&p, &S->info, &c->m, &cost, &e)) return false;
  *res = cost.res;
  if (S->local_smem > 0) {
    res->smem_per_cta += S->local_smem;
    int64_t by = c->m.smem_per_sm / res->smem_per_cta;
    if (by < res->cta_per_sm) res->cta_per_sm = (int)by, res->cta_limit = "smem";
    if (res->smem_per_cta > c->m.smem_per_cta_max) res->cta_per_sm = 0;
    double occ = (double)res->cta_per_sm * res->warps_per_cta / c->m.max_warps_per_sm;
    res->occ = occ > 1 ? 1 : occ;
  }
  *raw_occ = res->occ;
  double f = res->occ / c->occ_sat;
  res->occ = (f > 1 ? 1 : f) * cost.wave_eff;
  *vec = p.vec_width;
  return true;
}

void rg_delta(rg_ctx *c, const rg_eval *before, const rg_eval *after, double absorbed_time, double absorbed_flops,
              double absorbed_bytes, plan_fusion_out *out, char *detail, int cap) {
  plan_fusion_in in;
  memset(&in, 0, sizeof in);
  in.dflops = UT_MAX(0.0, after->flops - before->flops - absorbed_flops);
  in.dbytes = 0;
  in.saved_bytes = UT_MAX(0.0, before->bytes + absorbed_bytes - after->bytes);
  in.base_time = before->time;
  in.producer_time = absorbed_time;
  in.fanout = 1;
  in.before = before->res;
  int vec_after = 0;
  double raw_occ = 1;
  bool same = same_plan(c, before, after, &in.after, &vec_after, &raw_occ);
  if (same) {
    in.vec_after = vec_width(c, &after->info, vec_after);
  } else { /* another loop structure: the fused region's own plan */
    in.after = after->res;
    raw_occ = after->raw_occ;
    in.vec_after = after->has_plan ? vec_width(c, &after->info, after->plan->vec_width) : 0;
  }
  in.vec_before = before->has_plan ? vec_width(c, &before->info, before->plan->vec_width) : 0;
  /* SM90 TMA / WGMMA shapes concern the MMA template (contractions) */
  bool mma = plan_pattern_is_contraction(after->info.pattern);
  bool ok_before = before->has_plan && before->tma_ok && plan_sm90_tile_ok(before->plan, before->info.in_dtype, NULL, 0);
  bool ok_after = after->has_plan && after->tma_ok && plan_sm90_tile_ok(after->plan, after->info.in_dtype, NULL, 0);
  in.sm90_tile_broken = c->m.arch == PLAN_ARCH_SM90 && mma && ok_before && !ok_after;
  in.in_dtype = after->info.in_dtype;
  plan_fusion_delta(&in, &c->m, out);
  if (plan_smem_near_limit(&in.after, &c->m)) out->stops |= PLAN_STOP_SMEM80; /* also when no CTA fits at all */
  /* §4.2 "CTA/SM drops to 1" matters when it leaves the SM below the
   * occupancy that saturates it (occ_sat): one CTA of 8 warps still runs a
   * tensor-core GEMM at full speed */
  if ((out->stops & PLAN_STOP_CTA1) && in.after.cta_per_sm >= 1 && raw_occ >= c->occ_sat) {
    out->stops &= ~(unsigned)PLAN_STOP_CTA1;
    out->fuse = out->dtime < 0 && out->stops == 0;
  }
  if (detail && cap)
    snprintf(detail, (size_t)cap,
             "dtime %.3g s (benefit %.3g, cost %.3g: occupancy %.3g, layout %.3g); %s plan; throughput %.3g -> %.3g; "
             "smem %lld -> %lld B, %d -> %d CTA/SM, vector width %d -> %d",
             out->dtime, out->benefit, out->cost, out->docc_time, out->layout_penalty, same ? "same" : "own",
             in.before.occ, in.after.occ, (long long)in.before.smem_per_cta,
             (long long)in.after.smem_per_cta, in.before.cta_per_sm, in.after.cta_per_sm, in.vec_before, in.vec_after);
}

/* The absorbing kernel among the parts of a fused region: the one whose
 * loops the region keeps — the part holding a contraction / the attention,
 * else a part with the region's shared-loop prefix and pattern (the sink
 * first). */
bool rg_is_base(const rg_eval *S, const rg_eval *part, bool part_has_anchor) {
  if (S->shape == RG_SHAPE_CONTRACTION || S->shape == RG_SHAPE_ATTENTION) return part_has_anchor;
  return part->legal && part->prefix == S->prefix && part->info.pattern == S->info.pattern;
}

const char *rg_stop_of(const plan_fusion_out *d) {
  if (d->stops & PLAN_STOP_SMEM80) return "smem_over_80pct";
  if (d->stops & PLAN_STOP_CTA1) return "cta_drops_to_1";
  if (d->stops & PLAN_STOP_VEC_SHRINK) return "vector_width_shrinks";
  if (d->stops & PLAN_STOP_SM90_TILE) return "sm90_tile_constraint";
  if (!(d->dtime < 0)) return "delta_time_nonneg";
  return NULL;
}
