/* standalone.h — model.h, main.c and Makefile of a standalone CPU package. */
#ifndef HARP_STANDALONE_H
#define HARP_STANDALONE_H

#include "harp/function.h"
#include "harp/sgen.h"
#include "harp/tiny.h"
#include "util/util.h"

void cgen_standalone_header(ut_str *o);
void cgen_standalone_main(ut_str *o);
void cgen_standalone_npy_common(ut_str *o);
void cgen_standalone_npy_write(ut_str *o);
void cgen_standalone_npy_open(ut_str *o);
void cgen_standalone_npy_data(ut_str *o);
/* extra: another source file of model_main (NULL: none) */
void cgen_standalone_makefile(ut_str *o, const char *extra);

/* A ShapeSet package (standalone_ss.c, standalone_ss_text.c): the one
 * object's Function f over g, prepared at the box's upper corner; syms every
 * symbol's value there; gen[0..ngen) the symbols P_run_syms takes (the
 * box's nbase, then the derived ones), lo / hi the range each serves. */
typedef struct cgen_ss {
  const tiny_graph *g;
  const tiny_symtab *syms;
  const fn_function *f;
  const char *const *gen;
  int ngen, nbase;
  const int64_t *lo, *hi;
  const rt_sgen_dim (*codes)[TINY_MAX_RANK]; /* per node and dim: rt_sgen_dim_codes */
} cgen_ss;

/* model_shapes.c of s into o; false when a derived size, or an input's or
 * output's dim, is not one the package can compute. */
bool cgen_ss_shapes(const cgen_ss *s, ut_str *o);
/* Output k's dims at the binding t (every symbol bound, derived ones
 * included) as the package computes them; false when one is unbound. */
bool cgen_ss_output_dims(const cgen_ss *s, const tiny_symtab *t, int k, int64_t *dims);
/* The ShapeSet declarations appended to model.h, main.c and README.md. */
void cgen_ss_header(ut_str *o);
void cgen_ss_main(ut_str *o);
void cgen_ss_readme(const cgen_ss *s, ut_str *o);

#endif
