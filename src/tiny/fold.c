/* fold.c — constant folding and dead-node removal (shapes may stay symbolic).
 * Needs: tiny_normalize done with every symbol bound.
 * Gives: tiny_fold_constants.
 *
 * A rank-0 value computed from constants only (the frontend's
 * rsqrt(sum(ones[D])) for an attention scale, say) becomes a CONST whose
 * value the reference interpreter computes, so nothing changes numerically;
 * later layers then see a constant (region formation recognises attention
 * by its constant scale).  Nodes no output needs any more are dropped. */
#include <stdlib.h>
#include <string.h>

#include "harp/interp.h"
#include "tiny_int.h"
#include "util/util.h"

/* Evaluate node i (whose ancestors are constants) with the interpreter on a
 * graph of just those ancestors. */
static harp_status eval_const(harp_error *e, const tiny_graph *g, const tiny_symtab *syms, bool allow_unknown, int i,
                            double *v) {
  tiny_graph *s = tiny_graph_new();
  int *map = ut_xmalloc(sizeof(int) * ((size_t)i + 1));
  char *need = ut_xcalloc((size_t)i + 1, 1);
  harp_status st = HARP_OK;
  if (!s || !map || !need) {
    st = ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
    goto done;
  }
  need[i] = 1;
  for (int k = i; k >= 0; k--)
    if (need[k])
      for (int q = 0; q < g->nodes[k].nsrc; q++) need[g->nodes[k].src[q].node] = 1;
  for (int k = 0; k <= i; k++) {
    if (!need[k]) continue;
    const tiny_node *n = &g->nodes[k];
    tiny_src src[TINY_MAX_SRC];
    for (int q = 0; q < n->nsrc; q++) src[q] = (tiny_src){map[n->src[q].node], 0};
    map[k] = tiny_add(s, n->id, n->op, src, n->nsrc, tiny_op_argkind(n->op) == TA_NONE ? NULL : &n->a);
  }
  tiny_mark_output(s, map[i]);
  if (s->err.code) {
    st = ut_fail(e, s->err.code, s->err.node, "%s", s->err.msg);
    goto done;
  }
  ut_tensor out;
  if ((st = tiny_infer(e, s, syms, allow_unknown)) || (st = tiny_interp(e, s, syms, NULL, 0, &out))) goto done;
  *v = g->nodes[i].dtype == TINY_I32 ? (double)((int32_t *)out.data)[0] : (double)ut_tensor_get(&out, 0);
  ut_tensor_free(&out);
done:
  tiny_graph_free(s);
  free(map);
  free(need);
  return st;
}

/* Keep only nodes some output needs (the rebuild of normalize.c). */
static harp_status drop_dead(harp_error *e, tiny_graph *g, const tiny_symtab *syms, bool allow_unknown) {
  char *live = ut_xcalloc((size_t)g->n + 1, 1);
  int *map = ut_xmalloc(sizeof(int) * ((size_t)g->n + 1));
  tiny_graph *ng = tiny_graph_new_sharing(g);
  harp_status st = HARP_OK;
  if (!live || !map || !ng) {
    st = ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
    goto done;
  }
  for (int k = 0; k < g->noutputs; k++) live[g->outputs[k]] = 1;
  for (int i = g->n - 1; i >= 0; i--)
    if (live[i] || g->nodes[i].op == TINY_INPUT) { /* inputs stay: they are the model's signature */
      live[i] = 1;
      for (int q = 0; q < g->nodes[i].nsrc; q++) live[g->nodes[i].src[q].node] = 1;
    }
  int dead = 0;
  for (int i = 0; i < g->n; i++) dead += !live[i];
  if (!dead) goto done;
  for (int i = 0; i < g->n && !st; i++) {
    if (!live[i]) continue;
    const tiny_node *n = &g->nodes[i];
    tiny_src src[TINY_MAX_SRC];
    for (int q = 0; q < n->nsrc; q++) src[q] = (tiny_src){map[n->src[q].node], 0};
    map[i] = tiny_add(ng, n->id, n->op, src, n->nsrc, tiny_op_argkind(n->op) == TA_NONE ? NULL : &n->a);
    if (map[i] < 0) st = ut_fail(e, ng->err.code, ng->err.node, "%s", ng->err.msg);
    else ng->nodes[map[i]].tag = n->tag;
  }
  for (int k = 0; k < g->noutputs && !st; k++)
    if (tiny_mark_output(ng, map[g->outputs[k]]) < 0) st = ut_fail(e, ng->err.code, NULL, "%s", ng->err.msg);
  if (!st) {
    tiny_graph_adopt(g, ng);
    ng = NULL;
    st = tiny_infer(e, g, syms, allow_unknown);
  }
done:
  tiny_graph_discard_sharing(ng);
  free(live);
  free(map);
  return st;
}

harp_status tiny_fold_constants(harp_error *e, tiny_graph *g, const tiny_symtab *syms, bool allow_unknown) {
  if (tiny_compute_outputs(e, g)) return e->code;
  g->explicit_outputs = true; /* the outputs are what they were before folding */
  char *konst = ut_xcalloc((size_t)g->n + 1, 1);
  if (!konst) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  harp_status st = HARP_OK;
  int folded = 0;
  for (int i = 0; i < g->n && !st; i++) {
    tiny_node *n = &g->nodes[i];
    tiny_class cls = tiny_op_class(n->op);
    if (n->op == TINY_CONST) {
      konst[i] = 1;
      continue;
    }
    if (cls == TC_LEAF || cls == TC_GATHER) continue;
    bool all = n->nsrc > 0;
    for (int q = 0; q < n->nsrc; q++) all &= konst[n->src[q].node] != 0;
    if (!all) continue;
    konst[i] = 1;
    if (n->shape.rank != 0 || cls == TC_MOVE) continue; /* only scalars become CONSTs */
    bool is_output = false;
    for (int k = 0; k < g->noutputs; k++) is_output |= g->outputs[k] == i;
    if (is_output) continue;
    double v = 0;
    if ((st = eval_const(e, g, syms, allow_unknown, i, &v))) break;
    tiny_dtype dt = n->dtype;
    n->op = TINY_CONST;
    n->nsrc = 0;
    memset(&n->a, 0, sizeof n->a);
    n->a.cnst = (tiny_arg_const){v, dt};
    folded++;
  }
  free(konst);
  if (st) return st;
  return folded ? drop_dead(e, g, syms, allow_unknown) : HARP_OK;
}
