/* contract.c — ContractionPattern detection (seed 000 §3.5).
 * Needs: the IndexBook (composed accesses); poly_view's use counts.
 * Gives: poly_detect_contraction.
 *
 * A REDUCE(SUM) over a MUL (optionally MUL -> CAST -> REDUCE) is a candidate
 * when the MUL and that CAST feed nothing else and are no model output, and
 * each MUL operand is a movement expression (a movement or CAST node, or a
 * leaf): "二入力が Movement 以外を含まない".  The two operand accesses are
 * composed into the REDUCE's variables (outputs i.., reduced r..) and
 * followed through movement and CAST nodes to their base tensors; each axis
 * of a base tensor is then classified:
 *   VAR     one variable, coefficient 1, no offset;
 *   CONST   no variable (a size-1 axis that was broadcast);
 *   WINDOW  stride*o + dilation*k + offset with o an output and k a reduced
 *           variable, unless it is a mixed-radix linearization
 *           (stride == dilation*|k|): a sliding window;
 *   AFFINE  any other quasi-affine form without floor division.
 * It is a pattern when every axis classifies, the base is in the SCoP, both
 * operands share a reduced variable, and some output variable is missing
 * from one operand (reuse: otherwise it is a plain dot product per point).
 * pattern = "conv" when some axis is a WINDOW, else "matmul" (batched when
 * output variables are shared by both operands).
 * Gives also poly_access_axes: any block's read classified the same way
 * (how a pooling, a MAX or SUM over a window, reads its input). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "poly/poly_int.h"
#include "util/util.h"

static bool is_output(const tiny_graph *g, int node) {
  for (int k = 0; k < g->noutputs; k++)
    if (g->outputs[k] == node) return true;
  return false;
}

static bool movement_operand(const tiny_graph *g, int node) {
  tiny_class c = tiny_op_class(g->nodes[node].op);
  return c == TC_MOVE || c == TC_CAST || c == TC_LEAF;
}

static bool classify(const ib_env *env, int nout, const ib_aff *e, const ib_size *dim, const char *const *vn,
                     poly_idx *o) {
  memset(o, 0, sizeof *o);
  ut_str s;
  ut_str_init(&s);
  ib_aff_print(&s, e, vn);
  char *t = ut_str_take(&s);
  snprintf(o->text, sizeof o->text, "%s", t ? t : "?");
  free(t);
  if (e->ndiv) return false; /* floor division: not a plain index */
  o->lin = !e->nsym && env->nvars <= POLY_MAX_VARS;
  for (int j = 0; o->lin && j < env->nvars; j++) o->coef[j] = e->v[j];
  o->cst = e->c;
  int outs[IB_MAX_VARS], reds[IB_MAX_VARS], no = 0, nr = 0;
  for (int j = 0; j < env->nvars; j++) {
    if (!e->v[j]) continue;
    if (j < nout) outs[no++] = j;
    else reds[nr++] = j;
  }
  o->kind = POLY_IDX_AFFINE;
  if (no + nr == 0) {
    if (!e->nsym) o->kind = POLY_IDX_CONST, o->c = e->c;
    return true;
  }
  if (no + nr == 1 && e->v[no ? outs[0] : reds[0]] == 1 && e->c == 0 && !e->nsym) {
    o->kind = POLY_IDX_VAR;
    o->var = no ? outs[0] : reds[0];
    return true;
  }
  if (no != 1 || nr != 1) return true;
  int ov = outs[0], kv = reds[0];
  int64_t st = e->v[ov], dl = e->v[kv];
  if (st <= 0 || dl <= 0) return true;
  const ib_range *ro = &env->var[ov], *rk = &env->var[kv];
  bool linear = (rk->has_hi && st == dl * (rk->hi + 1)) || (ro->has_hi && dl == st * (ro->hi + 1));
  if (linear) return true;
  o->kind = POLY_IDX_WINDOW;
  o->out_var = ov, o->win_var = kv;
  o->stride = st, o->dilation = dl, o->offset = e->c;
  if (!e->nsym && ro->has_hi && rk->has_hi && dim->n >= 0) {
    int64_t lo = e->c, hi = e->c + st * ro->hi + dl * rk->hi;
    o->has_pad = true;
    o->pad_lo = lo < 0 ? -lo : 0;
    o->pad_hi = hi > dim->n - 1 ? hi - (dim->n - 1) : 0;
  }
  return true;
}

/* Follow an access through CAST nodes to the tensor the conversion reads;
 * the read as it stood at each CAST is a stage of the operand.  Past
 * POLY_MAX_STAGES CASTs the ones nearest the base are kept (the last one
 * may be applied to the base itself). */
static harp_status through_casts(poly_view *pv, ib_env *env, poly_operand *o) {
  ib_access *a = &o->acc;
  while (!a->non_affine && pv->g->nodes[a->src].op == TINY_CAST) {
    if (o->nstage == POLY_MAX_STAGES) {
      o->nstage--;
      memmove(o->stage, o->stage + 1, sizeof o->stage[0] * (size_t)o->nstage);
    }
    o->stage[o->nstage++] = *a;
    ib_access next;
    if (ib_compose(pv->ib, env, a, &ib_get(pv->ib, a->src)->acc[0], &next)) return pv->e->code;
    *a = next;
  }
  return HARP_OK;
}

/* The MUL (and CAST) are inside the block: not "passed". */
static harp_status drop_inner(poly_view *pv, ib_access *a, int mul, int cast) {
  int *v = ut_arena_alloc(pv->arena, sizeof *v * (size_t)(a->nvia + 1)), nv = 0;
  if (!v) return ut_fail(pv->e, HARP_E_NO_MEMORY, pv->g->nodes[mul].id, "out of memory");
  for (int i = 0; i < a->nvia; i++)
    if (a->via[i] != mul && a->via[i] != cast) v[nv++] = a->via[i];
  a->via = v;
  a->nvia = nv;
  return HARP_OK;
}

/* The templates pad where an index leaves its tensor (a conv's or a pool's
 * zero border), so with padding the read piece must be bounded by the base
 * tensor's extents alone: each of its constraints is implied by
 * 0 <= map[d] <= size[d] - 1 for some axis d.  A pad of a slice (conv over
 * pad(x[1:13])) pads inside the tensor: its read stops at 1 and 12, and a
 * template would read x[0] and x[13] where the program reads zeros. */
static bool fill_is_outside(const ib_env *env, const ib_piece *read, const ib_info *base) {
  for (int i = 0; i < read->ncons; i++) {
    const ib_aff *e = &read->cons[i].e;
    if (read->cons[i].eq || e->nsym || e->ndiv) return false;
    bool implied = false;
    for (int d = 0; d < read->nmap && !implied; d++) {
      const ib_aff *m = &read->map[d];
      if (m->nsym || m->ndiv || base->axes[d].size.n < 0) continue;
      for (int sg = -1; sg <= 1 && !implied; sg += 2) { /* e = sg * map[d] + k */
        bool same = true;
        for (int j = 0; j < env->nvars && same; j++) same = e->v[j] == sg * m->v[j];
        int64_t k = e->c - sg * m->c;
        implied = same && (sg > 0 ? k >= 0 : k >= base->axes[d].size.n - 1);
      }
    }
    if (!implied) return false;
  }
  return true;
}

/* Classify one operand; false when it is no pattern operand. */
static bool operand(poly_view *pv, const ib_env *env, int nout, const char *const *vn, const ib_access *a, int *rank,
                    poly_idx *idx, bool *fill, double *fillv, bool used[IB_MAX_VARS]) {
  if (a->non_affine || ib_get(pv->ib, a->src)->non_scop) return false;
  const ib_piece *read = NULL;
  *fill = false;
  for (int i = 0; i < a->npieces; i++) {
    if (a->pieces[i].fill) {
      /* One pad value per operand is all a template knows (a conv's zero
       * padding); pads of two values (a conv over pad(pad(x, 0), -1)) were
       * taken for the first one alone. */
      if (*fill && !(a->pieces[i].value == *fillv)) return false;
      if (!*fill) *fillv = a->pieces[i].value;
      *fill = true;
    } else if (read) {
      return false; /* several read pieces: not one affine access */
    } else {
      read = &a->pieces[i];
    }
  }
  if (!read) return false;
  const ib_info *base = ib_get(pv->ib, a->src);
  if (*fill && !fill_is_outside(env, read, base)) return false;
  *rank = read->nmap;
  for (int d = 0; d < read->nmap; d++) {
    if (!classify(env, nout, &read->map[d], &base->axes[d].size, vn, &idx[d])) return false;
    for (int j = 0; j < env->nvars; j++) used[j] |= read->map[d].v[j] != 0;
  }
  return true;
}

harp_status poly_detect_contraction(poly_view *pv, int r, bool *found, poly_contraction *con, poly_operand *lhs,
                                  poly_operand *rhs) {
  const tiny_graph *g = pv->g;
  const tiny_node *R = &g->nodes[r];
  *found = false;
  if (R->op != TINY_REDUCE || R->a.reduce.op != TINY_RSUM) return HARP_OK;
  int x = R->src[0].node, cast = -1;
  if (g->nodes[x].op == TINY_CAST) {
    cast = x;
    if (pv->uses[cast] != 1 || is_output(g, cast)) return HARP_OK;
    x = g->nodes[x].src[0].node;
  }
  const tiny_node *M = &g->nodes[x];
  if (M->op != TINY_MUL || pv->uses[x] != 1 || is_output(g, x)) return HARP_OK;
  for (int k = 0; k < 2; k++)
    if (!movement_operand(g, M->src[k].node)) return HARP_OK;
  const ib_info *rf = ib_get(pv->ib, r);
  ib_env env;
  ib_env_for(pv->ib, r, pv->e, &env);
  ib_access to_mul = rf->acc[0];
  if (cast >= 0 && ib_compose(pv->ib, &env, &to_mul, &ib_get(pv->ib, cast)->acc[0], &to_mul)) return pv->e->code;
  poly_operand ops[2] = {0};
  for (int k = 0; k < 2; k++) {
    if (ib_compose(pv->ib, &env, &to_mul, &ib_get(pv->ib, x)->acc[k], &ops[k].acc)) return pv->e->code;
    if (through_casts(pv, &env, &ops[k])) return pv->e->code;
  }
  memset(con, 0, sizeof *con);
  con->mul_node = x;
  con->reduce_node = r;
  con->nout = rf->rank;
  con->nred = rf->nred;
  const char *vn[IB_MAX_VARS];
  ib_var_names(rf, vn);
  bool ul[IB_MAX_VARS] = {0}, ur[IB_MAX_VARS] = {0};
  if (!operand(pv, &env, rf->rank, vn, &ops[0].acc, &con->lhs_rank, con->lhs_idx, &con->lhs_fill, &con->lhs_fill_value, ul) ||
      !operand(pv, &env, rf->rank, vn, &ops[1].acc, &con->rhs_rank, con->rhs_idx, &con->rhs_fill, &con->rhs_fill_value, ur))
    return HARP_OK;
  bool shared_red = false, window = false;
  for (int j = rf->rank; j < rf->nvars; j++) shared_red |= ul[j] && ur[j];
  for (int j = 0; j < rf->rank; j++) {
    if (ul[j] && ur[j]) con->batch[con->nbatch++] = j;
    else if (ul[j]) con->m[con->nm++] = j;
    else if (ur[j]) con->n[con->nn++] = j;
    else if (rf->axes[j].size.n != 1) /* neither operand reads it (a broadcast output axis): A repeats along it */
      con->m[con->nm++] = j;
  }
  if (!shared_red || con->nm + con->nn == 0) return HARP_OK;
  for (int d = 0; d < con->lhs_rank; d++) window |= con->lhs_idx[d].kind == POLY_IDX_WINDOW;
  for (int d = 0; d < con->rhs_rank; d++) window |= con->rhs_idx[d].kind == POLY_IDX_WINDOW;
  con->pattern = window ? POLY_PAT_CONV : POLY_PAT_MATMUL;
  con->lhs = ops[0].acc.src;
  con->rhs = ops[1].acc.src;
  for (int k = 0; k < 2; k++) {
    if (drop_inner(pv, &ops[k].acc, x, cast)) return pv->e->code;
    for (int q = 0; q < ops[k].nstage; q++)
      if (drop_inner(pv, &ops[k].stage[q], x, cast)) return pv->e->code;
  }
  *lhs = ops[0];
  *rhs = ops[1];
  *found = true;
  return HARP_OK;
}

bool poly_access_axes(const poly_view *pv, int block, int access, int *rank, poly_idx *idx, bool *fill,
                      double *fill_value) {
  if (block < 0 || block >= pv->nblocks || access < 0 || access >= pv->blocks[block].pub.naccess) return false;
  const poly_blk *b = &pv->blocks[block];
  if (b->pub.access[access].write) return false;
  harp_error e = {0};
  ib_env env;
  ib_env_for(pv->ib, b->var_node, &e, &env);
  const ib_info *f = ib_get(pv->ib, b->var_node);
  const char *vn[IB_MAX_VARS];
  ib_var_names(f, vn);
  bool used[IB_MAX_VARS] = {0};
  /* operand() only reads the view; it takes it unqualified for its callers */
  return operand((poly_view *)pv, &env, b->pub.nout, vn, &b->acc[access].ib, rank, idx, fill, fill_value, used);
}
