/* partition.c — region sets: the no-fusion baseline (one region per compute
 * node) and the invariant checker every partition must pass.
 * Needs: a prepared Tiny graph.  Gives: rg_partition_singletons/check/free. */
#include <stdlib.h>
#include <string.h>

#include "harp/function.h"
#include "harp/poly.h"
#include "harp/region.h"
#include "util/util.h"

static bool is_view(const tiny_graph *g, int i) { return tiny_op_class(g->nodes[i].op) == TC_MOVE; }
static bool is_leaf(const tiny_graph *g, int i) { return tiny_op_class(g->nodes[i].op) == TC_LEAF; }

void rg_partition_free(rg_partition *p) {
  if (!p) return;
  rg_formed_free(p->formed);
  free(p->region_of);
  ut_arena_free(p->arena);
  free(p);
}

/* Collect node i and the views and CONSTs it reads through (backwards until a
 * compute node or INPUT), marking them in `in_region`; boundary values go to
 * `is_in`. */
static void collect(const tiny_graph *g, int i, char *in_region, char *is_in, int *stack) {
  int sp = 0;
  stack[sp++] = i;
  in_region[i] = 1;
  while (sp) {
    const tiny_node *n = &g->nodes[stack[--sp]];
    for (int k = 0; k < n->nsrc; k++) {
      int s = n->src[k].node;
      if (s < 0 || in_region[s]) continue;
      if (is_view(g, s) || g->nodes[s].op == TINY_CONST) {
        in_region[s] = 1;
        stack[sp++] = s;
      } else {
        is_in[s] = 1;
      }
    }
  }
}

static int *list_of(ut_arena *a, const char *mark, int n, int *count) {
  int c = 0;
  for (int i = 0; i < n; i++) c += mark[i] != 0;
  int *out = ut_arena_alloc(a, sizeof(int) * (size_t)(c + 1));
  if (!out) return NULL;
  c = 0;
  for (int i = 0; i < n; i++)
    if (mark[i]) out[c++] = i;
  *count = c;
  return out;
}

static const char *kind_of(const tiny_node *n) {
  switch (tiny_op_class(n->op)) {
  case TC_REDUCE: return "reduce";
  case TC_GATHER: return "gather";
  default: return "ewise";
  }
}

harp_status rg_partition_singletons(harp_error *e, const tiny_graph *g, rg_partition **out) {
  *out = NULL;
  rg_partition *p = ut_xcalloc(1, sizeof *p);
  char *in_region = ut_xcalloc((size_t)g->n + 1, 1), *is_in = ut_xcalloc((size_t)g->n + 1, 1);
  char *is_out = ut_xcalloc((size_t)g->n + 1, 1);
  int *stack = ut_xmalloc(sizeof(int) * ((size_t)g->n + 1));
  harp_status st = HARP_OK;
  if (!p || !in_region || !is_in || !is_out || !stack || !(p->arena = ut_arena_new()) ||
      !(p->region_of = ut_xmalloc(sizeof(int) * ((size_t)g->n + 1))) ||
      !(p->regions = ut_arena_alloc(p->arena, sizeof(rg_region) * ((size_t)g->n + 1)))) {
    st = ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
    goto done;
  }
  p->g = g;
  for (int i = 0; i < g->n; i++) p->region_of[i] = -1;
  /* Values a region must write: consumed by another region, or outputs. */
  for (int k = 0; k < g->noutputs; k++) {
    int o = g->outputs[k];
    if (is_leaf(g, o)) {
      st = ut_fail(e, HARP_E_UNSUPPORTED, g->nodes[o].id, "a model output that is itself an input or constant");
      goto done;
    }
    is_out[o] = 1;
  }
  for (int i = 0; i < g->n && !st; i++) {
    bool compute = !is_view(g, i) && !is_leaf(g, i);
    bool output_view = is_view(g, i) && is_out[i];
    if (!compute && !output_view) continue;
    memset(in_region, 0, (size_t)g->n);
    memset(is_in, 0, (size_t)g->n);
    collect(g, i, in_region, is_in, stack);
    rg_region *r = &p->regions[p->n];
    r->nodes = list_of(p->arena, in_region, g->n, &r->nnodes);
    r->in_values = list_of(p->arena, is_in, g->n, &r->nin);
    r->out_values = ut_arena_alloc(p->arena, sizeof(int));
    if (!r->nodes || !r->in_values || !r->out_values) {
      st = ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
      break;
    }
    r->out_values[0] = i;
    r->nout = 1;
    const tiny_node *n = &g->nodes[i];
    r->name = n->tag ? n->tag : n->id;
    r->kind = output_view ? "ewise" : kind_of(n);
    p->region_of[i] = p->n;
    p->n++;
  }
  /* Region names must be unique (tags may repeat). */
  for (int a = 0; a < p->n && !st; a++)
    for (int b = 0; b < a; b++)
      if (!strcmp(p->regions[a].name, p->regions[b].name)) {
        p->regions[a].name = g->nodes[p->regions[a].out_values[0]].id;
        break;
      }
done:
  free(in_region);
  free(is_in);
  free(is_out);
  free(stack);
  if (st) {
    rg_partition_free(p);
    return st;
  }
  *out = p;
  return HARP_OK;
}

harp_status rg_partition_check(harp_error *e, const rg_partition *p) {
  const tiny_graph *g = p->g;
  char *mark = ut_xcalloc((size_t)g->n + 1, 1);
  int *writer = ut_xmalloc(sizeof(int) * ((size_t)g->n + 1));
  harp_status st = HARP_OK;
  if (!mark || !writer) {
    free(mark);
    free(writer);
    return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  }
  for (int i = 0; i < g->n; i++) writer[i] = -1;
  for (int r = 0; r < p->n && !st; r++) {
    const rg_region *R = &p->regions[r];
    memset(mark, 0, (size_t)g->n);
    for (int k = 0; k < R->nnodes && !st; k++) {
      int v = R->nodes[k];
      if (k && v <= R->nodes[k - 1]) st = ut_fail(e, HARP_E_INTERNAL, R->name, "region nodes are not ascending");
      else if (g->nodes[v].op == TINY_INPUT) st = ut_fail(e, HARP_E_INTERNAL, R->name, "an INPUT is a region node");
      mark[v] = 1;
    }
    for (int k = 0; k < R->nin && !st; k++) {
      int v = R->in_values[k];
      if (mark[v]) st = ut_fail(e, HARP_E_INTERNAL, R->name, "value %s is both computed and read", g->nodes[v].id);
      else if (g->nodes[v].op != TINY_INPUT && (writer[v] < 0 || writer[v] >= r))
        st = ut_fail(e, HARP_E_INTERNAL, R->name, "reads %s before any region writes it", g->nodes[v].id);
      mark[v] = 2;
    }
    for (int k = 0; k < R->nnodes && !st; k++) {
      const tiny_node *n = &g->nodes[R->nodes[k]];
      for (int s = 0; s < n->nsrc && !st; s++)
        if (!mark[n->src[s].node])
          st = ut_fail(e, HARP_E_INTERNAL, R->name, "node %s reads %s, neither in the region nor an input", n->id,
                       g->nodes[n->src[s].node].id);
    }
    for (int k = 0; k < R->nout && !st; k++) {
      int v = R->out_values[k];
      if (mark[v] != 1) st = ut_fail(e, HARP_E_INTERNAL, R->name, "writes %s, which it does not compute", g->nodes[v].id);
      else if (writer[v] >= 0) st = ut_fail(e, HARP_E_INTERNAL, R->name, "%s is written twice", g->nodes[v].id);
      else writer[v] = r;
    }
  }
  for (int k = 0; k < g->noutputs && !st; k++)
    if (writer[g->outputs[k]] < 0) st = ut_fail(e, HARP_E_INTERNAL, g->nodes[g->outputs[k]].id, "no region writes this output");
  free(mark);
  free(writer);
  return st;
}
