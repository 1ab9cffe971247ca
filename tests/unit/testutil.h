/* testutil.h — helpers for harp's cmocka tests. */
#ifndef HARP_TESTUTIL_H
#define HARP_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harp/interp.h"
#include "harp/tensor.h"
#include "harp/tiny.h"

/* Print the error when a status is not HARP_OK, then fail. */
#define assert_ok(e, expr)                                                 \
  do {                                                                     \
    if ((expr) != HARP_OK) {                                               \
      char buf_[2048];                                                     \
      harp_error_format((e), buf_, sizeof buf_);                           \
      fail_msg("%s failed: %s", #expr, buf_);                              \
    }                                                                      \
  } while (0)

/* Load JSON text, prepare with "NAME=V" symbol bindings (NULL-terminated). */
static inline tiny_graph *tu_prepare(harp_error *e, const char *json, const char *const *syms, tiny_symtab *st,
                                     harp_status *status) {
  tiny_graph *g = NULL;
  tiny_symtab_init(st);
  *status = tiny_load_json(e, json, strlen(json), "test.json", &g);
  for (int i = 0; syms && syms[i] && *status == HARP_OK; i++) *status = tiny_symtab_parse_assign(e, st, syms[i]);
  if (*status == HARP_OK) *status = tiny_prepare(e, g, st, false);
  return g;
}

/* Make an fp32/i32/bool/fp16 tensor from doubles. */
static inline ut_tensor tu_tensor(tiny_dtype dt, int rank, const int64_t *shape, const double *vals) {
  ut_tensor t;
  harp_error e = {0};
  if (ut_tensor_alloc(&e, &t, dt, rank, shape) != HARP_OK) fail_msg("alloc failed");
  for (int64_t i = 0; i < ut_tensor_numel(&t); i++) {
    if (dt == TINY_I32) ((int32_t *)t.data)[i] = (int32_t)vals[i];
    else ut_tensor_set(&t, i, (float)vals[i]);
  }
  return t;
}

static inline void tu_expect(const ut_tensor *t, const double *want, int64_t n, double tol) {
  assert_int_equal(ut_tensor_numel(t), n);
  for (int64_t i = 0; i < n; i++) {
    double got = t->dtype == TINY_I32 ? (double)((int32_t *)t->data)[i] : (double)ut_tensor_get(t, i);
    double diff = got == want[i] ? 0 : got - want[i]; /* equal infinities too */
    if (diff < 0) diff = -diff;
    if (!(diff <= tol) && !(got != got && want[i] != want[i]))
      fail_msg("element %lld: got %.9g, want %.9g", (long long)i, got, want[i]);
  }
}

/* Fixed pseudo-random inputs for every INPUT node of g (weights included),
 * in its dtype: values in [-scale, scale] in steps of scale/1000, from an
 * LCG seeded with seed, each from its state's bits from `shift` up (8; the
 * ShapeSet tests, whose tolerances were measured on their sequence, 16).
 * n: how many; free each with ut_tensor_free, then the array. */
static inline ut_tensor *tu_random_inputs_shift(const tiny_graph *g, int *n, unsigned seed, float scale, int shift) {
  int *ins;
  *n = tiny_inputs(g, &ins);
  ut_tensor *t = calloc((size_t)*n + 1, sizeof *t);
  harp_error e = {0};
  for (int k = 0; k < *n; k++) {
    const tiny_node *x = &g->nodes[ins[k]];
    int64_t shape[TINY_MAX_RANK];
    for (int d = 0; d < x->shape.rank; d++) shape[d] = x->shape.d[d].n;
    assert_ok(&e, ut_tensor_alloc(&e, &t[k], x->dtype, x->shape.rank, shape));
    for (int64_t i = 0; i < ut_tensor_numel(&t[k]); i++) {
      seed = seed * 1103515245u + 12345u;
      ut_tensor_set(&t[k], i, (float)((seed >> shift) % 2001) / (1000.0f / scale) - scale);
    }
  }
  free(ins);
  return t;
}

/* tu_random_inputs_shift from bit 8. */
static inline ut_tensor *tu_random_inputs(const tiny_graph *g, int *n, unsigned seed, float scale) {
  return tu_random_inputs_shift(g, n, seed, scale, 8);
}

#endif
