/* sgen_weights.h — a ShapeSet model's weights whose shape moves with a
 * symbol of its box: declared at the box's upper corner, read through a
 * SHRINK by the binding (sgen_weights.c).
 * Needs: harp/sgen.h, tiny.  Gives: sgw_*. */
#ifndef HARP_SGEN_WEIGHTS_H
#define HARP_SGEN_WEIGHTS_H

#include "harp/sgen.h"
#include "harp/tiny.h"
#include "util/util.h"

/* The weights that moved: per model input (tiny_inputs order). */
typedef struct sgw_moved {
  tiny_graph *raw; /* the model as given, unprepared: the weights' own declarations */
  int n;           /* its inputs */
  int *raw_node;   /* per input: its node in raw when the weight moved, else -1 */
  tiny_shape *hi;  /* per input that moved: its shape at the box's upper corner */
  int nmoved;
} sgw_moved;

/* Whether the model text has a weight with an axis that moves with the box
 * syms[0..nsyms) (a symbol it does not fix). */
bool sgw_any(const char *text, const rt_sgen_sym *syms, int nsyms);
/* The model text with each weight that moves declared at its shape in ghi
 * (the model prepared at the box's upper corner) and read through a
 * SHRINK [0, dim) on the axes that move: *out (malloc'd JSON); *mv says
 * which (sgw_free). */
harp_status sgw_move(harp_error *e, const char *text, const tiny_graph *ghi, const rt_sgen_sym *syms, int nsyms, char **out,
                     sgw_moved *mv);
/* Whether input i is a weight that moved. */
bool sgw_is_moved(const sgw_moved *mv, int i);
/* Input i (a moved weight) t's symbols into syms: none at the upper
 * corner's shape, else as the model declares it. */
harp_status sgw_bind_input(harp_error *e, const sgw_moved *mv, int i, const ut_tensor *t, tiny_symtab *syms);
/* inputs with each moved weight given at a binding's shape placed in the
 * leading corner of a zeroed table at the upper corner (*out: a copy of
 * the array; sgw_inputs_free). */
harp_status sgw_inputs(harp_error *e, const sgw_moved *mv, const ut_tensor *inputs, int ninputs, ut_tensor **out);
void sgw_inputs_free(const sgw_moved *mv, const ut_tensor *inputs, ut_tensor *made, int ninputs);
void sgw_free(sgw_moved *mv);

#endif
