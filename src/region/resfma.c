/* resfma.c — the exact QDQ Add (onnx_qdq.c's exact_add, onnxruntime's
 * QLinearAdd: v = fma(a, ra, fma(b, rb, fixed))) as one epilogue step of the
 * contraction that made one operand (CT_EPI_RESFMA): the two MULADDs, and on
 * the residual's way the ADD of its zero point and a widening CAST, which
 * the contraction does not reach (side nodes: computed from the residual
 * tensor alone, read point for point).
 *   chain_outer   MULADD(v, sc, MULADD(R + z, sr, k))   (v is the Add's input 0)
 *   else          MULADD(R + z, sr, MULADD(v, sc, k))   (v is its input 1)
 * Needs: rg_int.h (the set's blocks), the Tiny graph, Poly-View's strides.
 * Gives: rg_resfma_parse (harp/region.h: for src/kernel too), rg_resfma_at,
 * rg_resfma_part. */
#include <string.h>

#include "region/rg_int.h"

/* The constant node src reads (through RESHAPE / EXPAND views), or an
 * immediate, in *v. */
static bool const_of(const tiny_graph *g, tiny_src s, double *v) {
  for (int d = 0; d < 8; d++) {
    if (s.node < 0) return *v = s.imm, true;
    const tiny_node *n = &g->nodes[s.node];
    if (n->op == TINY_CONST) return *v = n->a.cnst.value, tiny_dtype_is_float(n->dtype);
    if ((n->op != TINY_RESHAPE && n->op != TINY_EXPAND) || n->nsrc != 1) return false;
    s = n->src[0];
  }
  return false;
}

/* The residual's way from node x (side nodes appended to p->side): an ADD of
 * a constant (fp32), then a widening CAST to fp32, each inside the region;
 * p->r is the tensor from outside. */
static bool side_way(const tiny_graph *g, int x, bool (*inside)(const void *, int), const void *env, rg_resfma *p) {
  double z = 0;
  p->z = 0;
  const tiny_node *n = x >= 0 ? &g->nodes[x] : NULL;
  if (n && inside(env, x) && n->op == TINY_ADD && n->dtype == TINY_FP32 && n->nsrc == 2) {
    int k = const_of(g, n->src[1], &z) ? 0 : const_of(g, n->src[0], &z) ? 1 : -1;
    if (k < 0 || z != (double)(float)z) return false;
    p->z = (float)z, p->side[p->nside++] = x, x = n->src[k].node;
    n = x >= 0 ? &g->nodes[x] : NULL;
  }
  if (n && inside(env, x) && n->op == TINY_CAST && n->dtype == TINY_FP32 && n->nsrc == 1 && n->src[0].node >= 0) {
    tiny_dtype from = g->nodes[n->src[0].node].dtype;
    if (from != TINY_FP32 && from != TINY_BF16 && from != TINY_FP16) return false;
    p->side[p->nside++] = x, x = n->src[0].node;
  }
  if (x < 0 || inside(env, x) || g->nodes[x].op == TINY_CONST) return false;
  p->r = x;
  return true;
}

bool rg_resfma_parse(const tiny_graph *g, int outer, bool (*chain)(const void *env, int node),
                     bool (*inside)(const void *env, int node), const void *env, rg_resfma *p) {
  memset(p, 0, sizeof *p);
  const tiny_node *o = &g->nodes[outer];
  if (o->op != TINY_MULADD || o->nsrc != 3 || o->dtype != TINY_FP32) return false;
  int in = o->src[2].node;
  if (in < 0 || !inside(env, in) || g->nodes[in].op != TINY_MULADD || g->nodes[in].nsrc != 3) return false;
  const tiny_node *i = &g->nodes[in];
  double co, ci, k;
  if (!const_of(g, o->src[1], &co) || !const_of(g, i->src[1], &ci) || !const_of(g, i->src[2], &k)) return false;
  p->outer = outer, p->inner = in, p->k = (float)k;
  int side;
  if (o->src[0].node >= 0 && chain(env, o->src[0].node) && !chain(env, in)) { /* fma(v, sc, fma(R + z, sr, k)) */
    p->chain_outer = true, p->sc = (float)co, p->sr = (float)ci, side = i->src[0].node;
  } else if (chain(env, in) && i->src[0].node >= 0 && chain(env, i->src[0].node) && !(o->src[0].node >= 0 && chain(env, o->src[0].node))) {
    p->sc = (float)ci, p->sr = (float)co, side = o->src[0].node; /* fma(R + z, sr, fma(v, sc, k)) */
  } else {
    return false;
  }
  if (!side_way(g, side, inside, env, p)) return false;
  if (p->chain_outer) p->side[p->nside++] = in;
  return true;
}

/* ---- on a candidate set ----------------------------------------------------------- */
typedef struct rs_env {
  rg_ctx *c;
  const int *set;
  int n;
  bool fed[RG_MAX_SET]; /* set[i] reached from the contraction */
} rs_env;

static int block_in(const rs_env *v, int node) {
  int p = rg_producer_block(v->c, node);
  return p >= 0 && rg_in(v->set, v->n, p) ? p : -1;
}

static bool env_inside(const void *env, int node) { return block_in(env, node) >= 0; }

static bool env_chain(const void *env, int node) {
  const rs_env *v = env;
  int b = block_in(v, node);
  for (int i = 0; b >= 0 && i < v->n; i++)
    if (v->set[i] == b) return v->fed[i];
  return false;
}

/* v->fed: which blocks of the set contraction K reaches (the set is in program order). */
static void env_init(rs_env *v, rg_ctx *c, const int *set, int n, int K) {
  v->c = c, v->set = set, v->n = n < RG_MAX_SET ? n : RG_MAX_SET;
  for (int i = 0; i < v->n; i++) {
    const poly_block_info *b = poly_block(c->pv, set[i]);
    v->fed[i] = set[i] == K;
    for (int a = 0; a < b->naccess && !v->fed[i]; a++) {
      int p = b->access[a].write ? -1 : block_in(v, b->access[a].tensor);
      for (int j = 0; p >= 0 && j < i; j++) v->fed[i] |= v->set[j] == p && v->fed[j];
    }
  }
}

/* Whether block b reads its access k point for point: the tensor of b's own
 * shape at the same index (what the residual's way must be, so that its
 * strides are those of the value the chain reads). */
static bool identity_read(rg_ctx *c, int b, int k) {
  const poly_block_info *x = poly_block(c->pv, b);
  const tiny_shape *ys = &c->g->nodes[x->node].shape, *ts = &c->g->nodes[x->access[k].tensor].shape;
  int64_t st[POLY_MAX_VARS], off;
  bool aff;
  if (!tiny_shape_equal(ys, ts) || x->nvars != ys->rank || poly_access_strides(c->e, c->pv, b, k, st, &off, &aff) || !aff || off)
    return false;
  int64_t s = 1;
  for (int d = ys->rank - 1; d >= 0; s *= ys->d[d].n, d--)
    if (ys->d[d].n > 1 && st[d] != s) return false;
  return true;
}

bool rg_resfma_at(rg_ctx *c, const int *set, int n, int K, int b, rg_resfma *p) {
  if (!c->exact_add_steps || plan_arch_is_gpu(c->m.arch) || c->g->nodes[poly_block(c->pv, b)->node].op != TINY_MULADD || n > RG_MAX_SET) return false;
  rs_env v;
  env_init(&v, c, set, n, K);
  if (!env_chain(&v, poly_block(c->pv, b)->node) || !rg_resfma_parse(c->g, poly_block(c->pv, b)->node, env_chain, env_inside, &v, p))
    return false;
  for (int s = 0; s < p->nside; s++) { /* each on the way reads the one before point for point */
    int sb = block_in(&v, p->side[s]);
    const poly_block_info *x = sb >= 0 ? poly_block(c->pv, sb) : NULL;
    /* not the contraction's own operand cast (the residual its input): the loop nest converts that one on load alone */
    if (!x || x->kind != POLY_EWISE || rg_operand_cast(c, set, n, K, sb)) return false;
    bool ok = false;
    for (int a = 0; a < x->naccess; a++) {
      double z;
      if (x->access[a].write || (c->g->nodes[x->access[a].tensor].op == TINY_CONST && const_of(c->g, (tiny_src){x->access[a].tensor, 0}, &z)))
        continue;
      if (!identity_read(c, sb, a)) return false;
      ok = true;
    }
    if (!ok) return false;
  }
  return true;
}

bool rg_resfma_part(rg_ctx *c, const int *set, int n, int K, int b, bool *side) {
  int node = poly_block(c->pv, b)->node;
  *side = false;
  tiny_op op = c->g->nodes[node].op;
  if (op != TINY_MULADD && op != TINY_ADD && op != TINY_CAST) return false;
  for (int i = 0; i < n; i++) {
    rg_resfma p;
    if (set[i] == b || !rg_resfma_at(c, set, n, K, set[i], &p)) continue;
    for (int s = 0; s < p.nside; s++)
      if (p.side[s] == node) return *side = true;
    if (p.inner == node) return true;
  }
  return false;
}
