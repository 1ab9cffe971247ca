/* metadata.c — the input / output metadata arrays of a model's ABI, the
 * same in the C translation unit (emit_model.c) and the CUDA package's host
 * loader (standalone_cuda.c).
 * Needs: a Function and its graph.  Gives: cgen_emit_metadata. */
#include <inttypes.h>

#include "backend/common/metadata.h"

/* Metadata for hosts that know nothing of harp (the standalone main.c):
 * P_input_names / _dtypes / _shapes and the same for the outputs.  Names
 * are sanitized: they come from the model. */
void cgen_emit_metadata(ut_str *out, const char *P, const fn_function *f, const tiny_graph *g) {
  int nin = 0;
  for (int a = 0; a < f->nargs; a++) nin += f->buffers[f->args[a]].kind == FN_INPUT;
  for (int io = 0; io < 2; io++) {
    const char *what = io ? "output" : "input";
    int count = io ? f->nret : nin;
    ut_str_printf(out, "const char *const %s_%s_names[%d] = {", P, what, count + 1);
    for (int pass = 0; pass < 3; pass++) {
      if (pass == 1) ut_str_printf(out, "NULL};\nconst char *const %s_%s_dtypes[%d] = {", P, what, count + 1);
      if (pass == 2) ut_str_printf(out, "NULL};\nconst long %s_%s_shapes[%d][%d] = {", P, what, count + 1, TINY_MAX_RANK + 1);
      /* inputs in args order (what inputs[] follows), outputs in ret order */
      for (int q = 0; q < (io ? f->nret : f->nargs); q++) {
        const fn_buffer *B = &f->buffers[io ? f->ret[q] : f->args[q]];
        if (!io && B->kind != FN_INPUT) continue;
        const tiny_node *n = &g->nodes[B->node];
        char safe[160];
        ut_sanitize_name(tiny_output_name(g, B->node), safe, sizeof safe);
        if (pass == 0) ut_str_printf(out, "\"%s\", ", safe);
        if (pass == 1) ut_str_printf(out, "\"%s\", ", tiny_dtype_name(n->dtype));
        if (pass == 2) {
          ut_str_printf(out, "{%d", n->shape.rank);
          for (int d = 0; d < n->shape.rank; d++) ut_str_printf(out, ", %" PRId64, n->shape.d[d].n);
          ut_str_puts(out, "}, ");
        }
      }
    }
    ut_str_puts(out, "{0}};\n");
  }
}
