/* harp/sgen.h — one compiled CPU object for every binding of a ShapeSet
 * (issue 25; docs/architecture.md, "One object per ShapeSet").
 *
 *   rt_sgen_compile  a model whose shape symbols range over a box
 *                    (lo..hi each): one object when every kernel reads its
 *                    sizes at run time, else a compile per binding met
 *                    (rt_sgen_fallback says why)
 *   rt_sgen_run      one run at the binding its inputs' shapes give
 *
 * A binding outside the box, or one that breaks the model (a reshape that
 * no longer divides, a size past the limits, a broadcast that changes the
 * graph), is refused with HARP_E_INPUT_MISMATCH before any kernel runs;
 * with recompile_outside it gets an object of its own instead. */
#ifndef HARP_SGEN_H
#define HARP_SGEN_H

#include <stdbool.h>
#include <stdint.h>

#include "harp/cpu.h"
#include "harp/error.h"
#include "harp/tensor.h"
#include "harp/tiny.h"

/* The most varying symbols one object reads, derived ones included
 * (tiny_dsym: a strided conv's (H + 1)/2): rt_sgen_bind's syms[] holds as many. */
#define RT_SGEN_MAX_GEN 256

/* A shape symbol of the model and its range, lo <= hi (lo >= 1); lo == hi
 * binds it to one value. */
typedef struct rt_sgen_sym {
  const char *name;
  int64_t lo, hi;
} rt_sgen_sym;

/* "NAME=LO..HI" into *y, its name copied into name[cap] (y->name points
 * there); option names the setting in messages ("--shapeset"). */
harp_status rt_sgen_parse_box(harp_error *e, const char *spec, const char *option, char *name, size_t cap, rt_sgen_sym *y);

typedef struct rt_sgen_opts {
  const rt_cpu_opts *cpu;  /* the CPU compile's options (NULL: defaults) */
  bool recompile_outside;  /* a binding outside the box: a compile of its own, not an error */
  bool per_binding;        /* never one object: a compile per binding (the exactly-specialised
                              build, for comparison) */
} rt_sgen_opts;

typedef struct rt_sgen rt_sgen;

/* A ShapeSet model of g (as loaded: not prepared, its symbols unbound) for
 * the box syms[0..nsyms), which names every symbol of g.  The code stage runs
 * at both corners of the box (every symbol at lo, every one at hi) with the
 * varying symbols' sizes printed as run-time reads where the templates can;
 * when the two translation units' kernels are the same text and the two
 * Functions the same structure, the corner hi is built and serves every
 * binding (its arena sized for hi).  Otherwise no object yet: each binding
 * met is compiled when first run. */
harp_status rt_sgen_compile(harp_error *e, const tiny_graph *g, const rt_sgen_sym *syms, int nsyms,
                            const rt_sgen_opts *o, rt_sgen **out);
/* inputs[] follow tiny_inputs of the prepared graph (weights included);
 * outputs[] follow its outputs, allocated here at this binding's shapes. */
harp_status rt_sgen_run(harp_error *e, rt_sgen *s, const ut_tensor *inputs, int ninputs, ut_tensor *outputs);
/* The shapes of the outputs (g->outputs order) at the binding inputs[]
 * give (only their dtypes, ranks and shapes are read), checked as
 * rt_sgen_run checks it. */
harp_status rt_sgen_output_shapes(harp_error *e, rt_sgen *s, const ut_tensor *inputs, int ninputs, tiny_shape *shapes);
/* For a caller running instances itself (harp bench): the one object
 * (NULL in fallback), and the binding of inputs checked as rt_sgen_run
 * checks it, its varying symbols' values into syms[] for
 * rt_cpu_instance_run_syms (an error when the object does not serve it). */
rt_cpu_model *rt_sgen_object(const rt_sgen *s);
/* A weight whose declared shape reads a symbol the box varies (rotary
 * tables [S, 1, 64]) is one table at the box's upper corner in the object,
 * whose kernels read the binding's leading slice.  The tensors for
 * rt_sgen_object's instances: inputs (in the model's input order) with each
 * such weight given at a binding's shape placed in the leading corner of
 * a zeroed table at the upper corner (right for that binding and every one
 * below it), the others borrowed; *out is freed by rt_sgen_weights_free. */
harp_status rt_sgen_weights(harp_error *e, const rt_sgen *s, const ut_tensor *inputs, int ninputs, ut_tensor **out);
void rt_sgen_weights_free(const rt_sgen *s, const ut_tensor *inputs, ut_tensor *made, int ninputs);
harp_status rt_sgen_bind(harp_error *e, rt_sgen *s, const ut_tensor *inputs, int ninputs, long long *syms);
/* NULL when one object serves the box; else why each binding compiles. */
const char *rt_sgen_fallback(const rt_sgen *s);
/* The objects built (or taken from the disk cache) so far. */
int rt_sgen_objects(const rt_sgen *s);
/* Of them, those the C compiler built (the rest came from the disk cache). */
int rt_sgen_cc_runs(const rt_sgen *s);
/* Whether the box's decision (the one object, or the fallback's reason)
 * came from the compile cache's manifest of an earlier process with the
 * same model, box, options and harp build: no corner was compiled. */
bool rt_sgen_from_manifest(const rt_sgen *s);
/* Whether a new binding on the one object is checked quickly: the graph
 * it runs (prepared at the upper corner) re-inferred and verified at the
 * binding, not the model prepared again, which it agreed with at the box's
 * probes (sgen.c quick_setup); a binding below the corner the object was
 * compared from is always prepared. */
bool rt_sgen_quick(const rt_sgen *s);
/* The generated C of the one object (NULL in fallback or from a manifest). */
const char *rt_sgen_source(const rt_sgen *s);
/* The model as the object compiles it (canonical JSON, symbols unbound):
 * the one given, each weight whose shape moves with the box declared at its
 * upper corner and read through a SHRINK (rt_sgen_weights). */
const char *rt_sgen_text(const rt_sgen *s);
/* What a standalone package of the one object needs to check a binding and
 * size its outputs without harp (harp compile --shapeset): the graph
 * prepared at the corner hi (its dims name the symbols they read), every
 * symbol's value there, and the varying symbols in P_run_syms' order (the
 * box's first, then the derived ones), each with the range the object
 * serves (a derived one: 1..its value at hi). */
typedef struct rt_sgen_layout {
  const tiny_graph *g;
  const tiny_symtab *syms;
  const char *const *gen;
  int ngen, nbase;
  int64_t lo[RT_SGEN_MAX_GEN], hi[RT_SGEN_MAX_GEN];
} rt_sgen_layout;
/* s's layout into *l; false in fallback (no one object). */
bool rt_sgen_layout_of(const rt_sgen *s, rt_sgen_layout *l);
/* Each dim of the layout's graph (codes[node][d]) as the bindings make it:
 * sym -1: the constant c; sym i >= 0: fdiv(a * v + c, k), v varying symbol
 * i's value (a conv's or a pool's output size, a Resize's); sym -2:
 * neither.  Found from the graph prepared at the box's corners and at
 * interior points with the symbols apart (a dim the preparation made a
 * number, an Expand's or a pool's, has no sym). */
typedef struct rt_sgen_dim {
  int sym;
  int64_t a, c, k;
} rt_sgen_dim;
harp_status rt_sgen_dim_codes(harp_error *e, const rt_sgen *s, rt_sgen_dim (*codes)[TINY_MAX_RANK]);
void rt_sgen_free(rt_sgen *s);

#endif
