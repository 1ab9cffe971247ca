/* sgen_testutil.h — the ShapeSet tests' pieces (test_sgen.c, test_dsym.c):
 * a model of tests/models as loaded for a box, its inputs at a binding
 * with the interpreter's outputs, and a ShapeSet object's run checked
 * against them.
 * Needs: testutil.h, harp/frontend.h, harp/sgen.h.  Gives: load_model,
 * inputs_at, check_at, compile_box. */
#ifndef HARP_SGEN_TESTUTIL_H
#define HARP_SGEN_TESTUTIL_H

#include <math.h>

#include "harp/frontend.h"
#include "harp/interp.h"
#include "harp/knobs.h"
#include "harp/sgen.h"
#include "testutil.h"
#include "util/util.h"

/* tests/models/NAME as loaded (not prepared): a .harp model lowered with
 * its symbols unbound, expression sizes derived symbols (hg_lower_derive,
 * as for a box); a .json one as it is. */
static tiny_graph *load_model(const char *name) {
  char path[1024];
  snprintf(path, sizeof path, "%s/tests/models/%s", HARP_SOURCE_DIR, name);
  harp_error e = {0};
  tiny_graph *g = NULL;
  size_t nl = strlen(name);
  if (nl > 5 && !strcmp(name + nl - 5, ".harp")) {
    hg_program *p = NULL;
    tiny_symtab defaults;
    tiny_symtab_init(&defaults);
    assert_ok(&e, hg_harp_load_file(&e, path, &p));
    assert_ok(&e, hg_lower_derive(&e, p, NULL, NULL, &g, &defaults));
    tiny_symtab_free(&defaults);
    hg_program_free(p);
    return g;
  }
  assert_ok(&e, tiny_load_file(&e, path, &g));
  return g;
}

/* Inputs of model name at the binding "A=1", "B=2", ... (NULL-ended; the
 * derived sizes computed from it), tu_random_inputs_shift's values in [-4,
 * 4] (bits 16 up: the tolerances of the tests were measured on them); the
 * interpreter's outputs into ref.  Returns the number of inputs (<= 16). */
static int inputs_at(const char *name, const char *const *bind, ut_tensor *in, ut_tensor *ref, unsigned seed) {
  harp_error e = {0};
  tiny_graph *g = load_model(name);
  tiny_symtab t;
  tiny_symtab_init(&t);
  for (int i = 0; bind[i]; i++) assert_ok(&e, tiny_symtab_parse_assign(&e, &t, bind[i]));
  assert_ok(&e, tiny_dsym_bind(&e, g, &t));
  assert_ok(&e, tiny_prepare(&e, g, &t, false));
  int n;
  ut_tensor *rnd = tu_random_inputs_shift(g, &n, seed, 4.0f, 16);
  assert_true(n <= 16);
  memcpy(in, rnd, (size_t)n * sizeof *in);
  free(rnd);
  assert_ok(&e, tiny_interp(&e, g, &t, in, n, ref));
  tiny_symtab_free(&t);
  tiny_graph_free(g);
  return n;
}

/* Run s at the binding and compare every output (nout <= 4) with the
 * interpreter's: shapes equal, |a - b| / (1 + |b|) <= tol. */
static void check_at(rt_sgen *s, const char *name, const char *const *bind, int nout, double tol) {
  ut_tensor in[16] = {0}, ref[4] = {0}, out[4] = {0};
  int n = inputs_at(name, bind, in, ref, 7u);
  harp_error e = {0};
  assert_ok(&e, rt_sgen_run(&e, s, in, n, out));
  for (int k = 0; k < nout; k++) {
    assert_int_equal(out[k].rank, ref[k].rank);
    for (int d = 0; d < ref[k].rank; d++) assert_int_equal(out[k].shape[d], ref[k].shape[d]);
    double worst = 0;
    for (int64_t i = 0; i < ut_tensor_numel(&ref[k]); i++) {
      double a = ut_tensor_get(&out[k], i), b = ut_tensor_get(&ref[k], i);
      double d = fabs(a - b) / (1.0 + fabs(b));
      if (!(d <= worst)) worst = d;
    }
    if (!(worst <= tol))
      fail_msg("%s at %s %s %s...: relative difference %g", name, bind[0], bind[1] ? bind[1] : "", bind[1] && bind[2] ? bind[2] : "",
               worst);
    ut_tensor_free(&out[k]);
    ut_tensor_free(&ref[k]);
  }
  for (int k = 0; k < n; k++) ut_tensor_free(&in[k]);
}

static rt_knobs knobs;

/* Model name compiled for the box syms[0..n) (the source kept); outside:
 * a binding outside the box compiles on its own. */
static rt_sgen *compile_box(const char *name, const rt_sgen_sym *syms, int n, bool outside) {
  rt_knobs_init(&knobs);
  rt_cpu_opts co = {.knobs = &knobs, .keep_source = true};
  rt_sgen_opts so = {.cpu = &co, .recompile_outside = outside};
  harp_error e = {0};
  tiny_graph *g = load_model(name);
  rt_sgen *s = NULL;
  assert_ok(&e, rt_sgen_compile(&e, g, syms, n, &so, &s));
  tiny_graph_free(g);
  return s;
}

#endif
