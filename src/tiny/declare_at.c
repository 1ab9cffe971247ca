/* declare_at.c — inputs declared at a larger, constant shape and read
 * through a SHRINK: tiny_declare_at.  A ShapeSet object (one compile for a
 * box of symbols) holds a weight whose declared shape reads a symbol (the
 * rotary tables [S, 1, 64] of a decoder layer) as one table at the box's
 * upper corner; the readers read its leading [0, S) slice, a graph op over
 * the symbols like any other (src/runtime/sgen_weights.c).
 * Needs: graph.c (the rebuilding helpers of tiny_int.h).  Gives: tiny_declare_at. */
#include <stdlib.h>
#include <string.h>

#include "tiny_int.h"
#include "util/util.h"

/* Copy INPUT node i of g into ng at shape at (its axes in the mask moving
 * read through a SHRINK [0, declared dim), the others at at's size); the
 * SHRINK takes i's place in remap. */
static harp_status copy_declared(harp_error *e, const tiny_graph *g, tiny_graph *ng, int i, const tiny_shape *at,
                                 unsigned moving, int *remap) {
  const tiny_node *n = &g->nodes[i];
  tiny_arg_input a = n->a.input;
  tiny_arg_shrink sh = {.n = a.shape.rank};
  for (int k = 0; k < a.shape.rank; k++) {
    sh.lo[k] = tiny_dim_int(0);
    sh.hi[k] = moving >> k & 1 ? a.shape.d[k] : tiny_dim_int(at->d[k].n);
    a.shape.d[k] = tiny_dim_int(at->d[k].n);
  }
  int w = tiny_add(ng, n->id, TINY_INPUT, NULL, 0, &a);
  const char *id = w < 0 ? NULL : tiny_fresh_id(ng, g, n->id, "box");
  tiny_src src = {w, 0};
  int k = id ? tiny_add(ng, id, TINY_SHRINK, &src, 1, &sh) : -1;
  if (k < 0)
    return ng->err.code ? ut_fail(e, ng->err.code, ng->err.node, "%s", ng->err.msg)
                        : ut_fail(e, HARP_E_NO_MEMORY, n->id, "out of memory");
  ng->nodes[w].tag = n->tag;
  remap[i] = k;
  return HARP_OK;
}

harp_status tiny_declare_at(harp_error *e, tiny_graph *g, const tiny_shape *const *at, const unsigned *moving) {
  tiny_graph *ng = tiny_graph_new_sharing(g);
  int *remap = ut_xcalloc((size_t)g->n + 1, sizeof *remap);
  harp_status st = ng && remap ? HARP_OK : ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  for (int i = 0; !st && i < g->n; i++) {
    const tiny_node *n = &g->nodes[i];
    if (at[i]) {
      st = n->op != TINY_INPUT || at[i]->rank != n->a.input.shape.rank
               ? ut_fail(e, HARP_E_INTERNAL, n->id, "tiny_declare_at: %s is no input of rank %d", n->id, at[i]->rank)
               : copy_declared(e, g, ng, i, at[i], moving[i], remap);
      continue;
    }
    tiny_src src[TINY_MAX_SRC];
    for (int k = 0; k < n->nsrc; k++) src[k] = n->src[k], src[k].node = src[k].node >= 0 ? remap[src[k].node] : -1;
    int k = tiny_add(ng, n->id, n->op, src, n->nsrc, tiny_op_argkind(n->op) == TA_NONE ? NULL : &n->a);
    if (k < 0) st = ut_fail(e, ng->err.code, ng->err.node, "%s", ng->err.msg);
    else ng->nodes[k].tag = n->tag, remap[i] = k;
  }
  for (int k = 0; !st && g->explicit_outputs && k < g->noutputs; k++)
    if (tiny_mark_output(ng, remap[g->outputs[k]]) < 0) st = ut_fail(e, ng->err.code, ng->err.node, "%s", ng->err.msg);
  free(remap);
  if (st) {
    tiny_graph_discard_sharing(ng);
    return st;
  }
  tiny_graph_adopt(g, ng);
  return HARP_OK;
}
