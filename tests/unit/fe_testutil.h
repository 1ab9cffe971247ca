/* fe_testutil.h — helpers for the frontend's cmocka tests: load DSL text,
 * lower it, bind, prepare and run it on the reference interpreter. */
#ifndef HARP_FE_TESTUTIL_H
#define HARP_FE_TESTUTIL_H

#include <math.h>

#include "testutil.h"

#include "harp/frontend.h"

static inline hg_program *fu_load(const char *text) {
  harp_error e = {0};
  hg_program *p = NULL;
  if (hg_harp_load_text(&e, text, strlen(text), "test.harp", &p) != HARP_OK) {
    char buf[4096];
    harp_error_format(&e, buf, sizeof buf);
    fail_msg("load failed: %s\n--- program:\n%s", buf, text);
  }
  return p;
}

/* Lower p, bind symbols from the inputs (graph order = parameter order),
 * then syms ("N=V", NULL-terminated), then the defaults; prepare; run.
 * outs receives the outputs (free them).  Returns the prepared graph. */
static inline tiny_graph *fu_run_program(const hg_program *p, const char *const *syms, const ut_tensor *in, int nin,
                                         ut_tensor *outs) {
  harp_error e = {0};
  tiny_graph *g = NULL;
  tiny_symtab st, dflt;
  tiny_symtab_init(&st);
  tiny_symtab_init(&dflt);
  assert_ok(&e, hg_lower(&e, p, &g, &dflt));
  int *ins = NULL;
  int n = tiny_inputs(g, &ins);
  assert_int_equal(n, nin);
  for (int k = 0; k < n; k++) assert_ok(&e, tiny_bind_input(&e, g, ins[k], in[k].rank, in[k].shape, &st));
  free(ins);
  for (int i = 0; syms && syms[i]; i++) assert_ok(&e, tiny_symtab_parse_assign(&e, &st, syms[i]));
  for (int i = 0; i < dflt.n; i++)
    if (!tiny_symtab_get(&st, dflt.names[i], NULL)) assert_ok(&e, tiny_symtab_set(&e, &st, dflt.names[i], dflt.values[i]));
  assert_ok(&e, tiny_prepare(&e, g, &st, false));
  assert_ok(&e, tiny_interp(&e, g, &st, in, nin, outs));
  tiny_symtab_free(&st);
  tiny_symtab_free(&dflt);
  return g;
}

static inline void fu_run(const char *text, const char *const *syms, const ut_tensor *in, int nin, ut_tensor *outs) {
  hg_program *p = fu_load(text);
  tiny_graph *g = fu_run_program(p, syms, in, nin, outs);
  tiny_graph_free(g);
  hg_program_free(p);
}

/* Deterministic pseudo-random values in [-1, 1). */
static inline double fu_rand(uint64_t *s) {
  *s = *s * 6364136223846793005ull + 1442695040888963407ull;
  return (double)(*s >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

static inline ut_tensor fu_random(tiny_dtype dt, int rank, const int64_t *shape, uint64_t *seed) {
  ut_tensor t;
  harp_error e = {0};
  if (ut_tensor_alloc(&e, &t, dt, rank, shape) != HARP_OK) fail_msg("alloc failed");
  for (int64_t i = 0; i < ut_tensor_numel(&t); i++) {
    double v = fu_rand(seed);
    if (dt == TINY_I32) ((int32_t *)t.data)[i] = (int32_t)((v + 1) * 4);
    else if (dt == TINY_BOOL) ((uint8_t *)t.data)[i] = v > 0;
    else ut_tensor_set(&t, i, (float)v);
  }
  return t;
}

/* got vs want (doubles), |got - want| <= atol + rtol |want| */
static inline void fu_expect(const ut_tensor *t, const double *want, int64_t n, double rtol, double atol) {
  assert_int_equal(ut_tensor_numel(t), n);
  for (int64_t i = 0; i < n; i++) {
    double got = t->dtype == TINY_I32 ? (double)((int32_t *)t->data)[i]
                 : t->dtype == TINY_BOOL ? (double)((uint8_t *)t->data)[i]
                                         : (double)ut_tensor_get(t, i);
    if (got == want[i]) continue; /* equal infinities too */
    double d = fabs(got - want[i]);
    if (!(d <= atol + rtol * fabs(want[i])) && !(isnan(got) && isnan(want[i])))
      fail_msg("element %lld: got %.9g, want %.9g", (long long)i, got, want[i]);
  }
}

static inline double fu_get(const ut_tensor *t, int64_t i) {
  return t->dtype == TINY_I32 ? (double)((int32_t *)t->data)[i] : (double)ut_tensor_get(t, i);
}

#endif
