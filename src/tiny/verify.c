/* verify.c — checks a normalized Tiny IR graph (seed 001 §3–4, design.md §3).
 * Needs: tiny_normalize done.  Gives: HARP_OK, or the first violation with the
 * node id.  Structural errors (ids, arity, cycles, unknown ops, malformed
 * args) are caught earlier by the loader and builder; this pass re-checks
 * what later layers rely on. */
#include <string.h>

#include "tiny_int.h"
#include "util/util.h"

static harp_status verify_node(harp_error *e, const tiny_graph *g, const tiny_node *n, const tiny_symtab *syms,
                             bool allow_unknown) {
  tiny_class cls = tiny_op_class(n->op);
  for (int k = 0; k < n->nsrc; k++) {
    if (n->src[k].node < 0) {
      if (allow_unknown) continue;
      return ut_fail(e, HARP_E_INTERNAL, n->id, "immediate survived normalization");
    }
    if (n->src[k].node >= (int)(n - g->nodes)) return ut_fail(e, HARP_E_CYCLE, n->id, "source is not earlier in the graph");
  }
  if (cls == TC_BINARY || cls == TC_TERNARY) {
    int first = n->op == TINY_WHERE ? 1 : 0;
    const tiny_node *ref = NULL;
    for (int k = first; k < n->nsrc; k++) {
      if (n->src[k].node < 0) continue;
      const tiny_node *s = &g->nodes[n->src[k].node];
      if (ref && s->dtype != ref->dtype)
        return ut_fail(e, HARP_E_DTYPE_MISMATCH, n->id, "operands are %s and %s; insert an explicit CAST",
                       tiny_dtype_name(ref->dtype), tiny_dtype_name(s->dtype));
      ref = s;
    }
    for (int k = 0; k < n->nsrc && !allow_unknown; k++) {
      const tiny_node *s = &g->nodes[n->src[k].node];
      if (!tiny_shape_equal(&s->shape, &n->shape)) {
        /* a symbol met a fixed size in a frontend broadcast, which took them
         * equal: a binding that breaks that is the user's, not a bug */
        bool sym = false;
        for (int d = 0; d < s->shape.rank && d < n->shape.rank; d++)
          sym |= (s->shape.d[d].sym || n->shape.d[d].sym) && s->shape.d[d].n != n->shape.d[d].n;
        if (!sym) return ut_fail(e, HARP_E_INTERNAL, n->id, "operand %d was not broadcast to the result shape", k);
        char a[256], b[256];
        tiny_shape_format(&s->shape, a, sizeof a);
        tiny_shape_format(&n->shape, b, sizeof b);
        return ut_fail(e, HARP_E_BROADCAST_MISMATCH, n->id,
                       "operand %d is %s under the bindings, the result %s: a symbolic dimension broadcast against "
                       "a fixed size is taken to equal it; bind it to that size",
                       k, a, b);
      }
    }
  }
  if (n->op == TINY_VIEW)
    for (int j = 0; j < n->a.view.n; j++)
      if (tiny_expr_has_negative_stride(n->a.view.map[j], syms)) {
        char buf[256];
        tiny_expr_print(n->a.view.map[j], buf, sizeof buf);
        return ut_fail(e, HARP_E_NEGATIVE_STRIDE, n->id,
                       "index_map entry %d (%s) walks an axis backwards; use FLIP for reversal", j, buf);
      }
  if (n->op == TINY_SHRINK && n->a.shrink.has_step)
    for (int j = 0; j < n->a.shrink.n; j++) {
      int64_t st;
      if (tiny_dim_value(n->a.shrink.step[j], syms, &st) && st < 1)
        return ut_fail(e, HARP_E_NEGATIVE_STRIDE, n->id, "SHRINK step on axis %d is %lld; use FLIP to reverse", j,
                       (long long)st);
    }
  /* An upper bound before simplification: only a guard against blow-up.
   * Poly-View applies the real limit after isl has coalesced the pieces. */
  if (n->pieces > TINY_VERIFY_MAX_PIECES)
    return ut_fail(e, HARP_E_EXCESSIVE_PIECEWISE, n->id,
                   "the view chain ending here splits into %d pieces (limit %d); materialize an intermediate",
                   n->pieces, TINY_VERIFY_MAX_PIECES);
  return HARP_OK;
}

harp_status tiny_verify(harp_error *e, tiny_graph *g, const tiny_symtab *syms, bool allow_unknown) {
  if (tiny_infer(e, g, syms, allow_unknown)) return e->code;
  for (int i = 0; i < g->n; i++)
    if (verify_node(e, g, &g->nodes[i], syms, allow_unknown)) return e->code;
  if (tiny_compute_outputs(e, g)) return e->code;
  if (g->noutputs == 0) return ut_fail(e, HARP_E_INVALID_ARG, NULL, "the model has no outputs");
  /* Output names become file names: they must be distinct once sanitized. */
  for (int i = 0; i < g->noutputs; i++) {
    char a[160], b[160];
    ut_sanitize_name(tiny_output_name(g, g->outputs[i]), a, sizeof a);
    for (int j = 0; j < i; j++) {
      ut_sanitize_name(tiny_output_name(g, g->outputs[j]), b, sizeof b);
      if (strcmp(a, b) == 0)
        return ut_fail(e, HARP_E_DUPLICATE_ID, tiny_output_name(g, g->outputs[i]),
                       "outputs \"%s\" and \"%s\" would be written to the same file %s.npy",
                       tiny_output_name(g, g->outputs[j]), tiny_output_name(g, g->outputs[i]), a);
    }
  }
  return HARP_OK;
}

harp_status tiny_prepare(harp_error *e, tiny_graph *g, const tiny_symtab *syms, bool allow_unknown) {
  if (tiny_compute_outputs(e, g)) return e->code;
  if (tiny_infer(e, g, syms, allow_unknown)) return e->code;
  if (tiny_normalize(e, g, syms, allow_unknown)) return e->code;
  if (tiny_fold_constants(e, g, syms, allow_unknown)) return e->code;
  return tiny_verify(e, g, syms, allow_unknown);
}
