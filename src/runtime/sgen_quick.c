/* sgen_quick.c — a ShapeSet object's check of a new binding without
 * loading and preparing the model again (5–14 ms for PP-OCRv4 rec): a
 * shadow of the graph the object runs (prepared at the box's upper corner)
 * re-inferred and verified at the binding (~0.4 ms).  sgen.c uses it
 * where it agreed with the full preparation at the box's probes.
 * Needs: tiny (tiny_dsym_bind, tiny_verify).  Gives: sgen_quick.h. */
#include "sgen_quick.h"

#include "util/util.h"

bool sgq_same_graph(const tiny_graph *a, const tiny_graph *b, bool *bigger) {
  *bigger = false;
  if (a->n != b->n || a->noutputs != b->noutputs) return false;
  for (int i = 0; i < a->noutputs; i++)
    if (a->outputs[i] != b->outputs[i]) return false;
  for (int i = 0; i < a->n; i++) {
    const tiny_node *x = &a->nodes[i], *y = &b->nodes[i];
    if (x->op != y->op || x->nsrc != y->nsrc || x->dtype != y->dtype || x->shape.rank != y->shape.rank) return false;
    for (int k = 0; k < x->nsrc; k++)
      if (x->src[k].node != y->src[k].node || (x->src[k].node < 0 && x->src[k].imm != y->src[k].imm)) return false;
    for (int d = 0; d < x->shape.rank; d++)
      if (x->shape.d[d].n > y->shape.d[d].n) *bigger = true;
  }
  return true;
}

bool sgq_same_sizes(const tiny_graph *a, const tiny_graph *b) {
  for (int i = 0; i < a->n; i++)
    for (int d = 0; d < a->nodes[i].shape.rank; d++)
      if (a->nodes[i].shape.d[d].n != b->nodes[i].shape.d[d].n) return false;
  return true;
}

harp_status sgq_check(harp_error *e, const tiny_graph *ghi, tiny_graph *gfast, const rt_sgen_sym *syms, const bool *follows,
                      int nsyms, const int64_t *vals, bool *bigger) {
  tiny_symtab t;
  tiny_symtab_init(&t);
  t.sym_broadcasts = true; /* as the object's preparation (sgen.c prepare_at) */
  harp_status st = HARP_OK;
  for (int i = 0; !st && i < nsyms; i++)
    if (!follows[i]) st = tiny_symtab_set(e, &t, syms[i].name, vals[i]);
  if (!st) st = tiny_dsym_bind(e, gfast, &t);
  if (!st) st = tiny_verify(e, gfast, &t, false);
  tiny_symtab_free(&t);
  *bigger = false;
  if (!st) sgq_same_graph(gfast, ghi, bigger);
  return st;
}
