/* test_sgen_quick.c — a new binding of a ShapeSet object checked quickly
 * (sgen.c quick_at: the graph the object runs, prepared at the box's upper
 * corner, re-inferred and verified at the binding; the model not prepared
 * again):
 *  - over every binding of a box (dsym_cnn.harp over H, W: derived sizes
 *    after a stride-2 conv and a pool; dsym_reshape.harp over n, which an
 *    n that 4 does not divide breaks), the output shapes it gives are the
 *    model's prepared at that binding, and it refuses exactly the bindings
 *    where that preparation fails;
 *  - one object run at a run of new bindings (up, down, one symbol alone,
 *    back to one seen) gives the interpreter's outputs at each. */
#include "sgen_testutil.h"

/* Input tensors (shapes only, no data) of model g at the binding bind
 * ("A=1", NULL-ended), its derived sizes computed, into in[]; their number. */
static int shapes_at(const tiny_graph *g, const char *const *bind, ut_tensor *in) {
  harp_error e = {0};
  tiny_symtab t;
  tiny_symtab_init(&t);
  for (int i = 0; bind[i]; i++) assert_ok(&e, tiny_symtab_parse_assign(&e, &t, bind[i]));
  assert_ok(&e, tiny_dsym_bind(&e, g, &t));
  int *ins = NULL, n = tiny_inputs(g, &ins);
  for (int k = 0; k < n; k++) {
    const tiny_node *x = &g->nodes[ins[k]];
    in[k] = (ut_tensor){.dtype = x->dtype, .rank = x->a.input.shape.rank};
    for (int d = 0; d < in[k].rank; d++) {
      tiny_dim dim = x->a.input.shape.d[d];
      int64_t v = dim.n;
      if (dim.sym) assert_true(tiny_symtab_get(&t, dim.sym, &v));
      in[k].shape[d] = v;
    }
  }
  free(ins);
  tiny_symtab_free(&t);
  return n;
}

/* Model name prepared at bind: its outputs' shapes into shapes[]; false
 * when the binding breaks it. */
static bool prepared_at(const char *name, const char *const *bind, tiny_shape *shapes) {
  harp_error e = {0};
  tiny_graph *g = load_model(name);
  tiny_symtab t;
  tiny_symtab_init(&t);
  t.sym_broadcasts = true;
  for (int i = 0; bind[i]; i++) assert_ok(&e, tiny_symtab_parse_assign(&e, &t, bind[i]));
  bool ok = !tiny_dsym_bind(&e, g, &t) && !tiny_prepare(&e, g, &t, false);
  for (int k = 0; ok && k < g->noutputs; k++) {
    shapes[k] = g->nodes[g->outputs[k]].shape;
    for (int d = 0; d < shapes[k].rank; d++) shapes[k].d[d].sym = NULL; /* (the names die with g) */
  }
  harp_error_clear(&e);
  tiny_symtab_free(&t);
  tiny_graph_free(g);
  return ok;
}

/* Every binding of box[0..nbox) (its first two symbols varying, the rest
 * fixed): rt_sgen_output_shapes on one object against the model prepared
 * there; returns how many bindings it refused. */
static int every_binding(const char *name, const rt_sgen_sym *box, int nbox) {
  rt_sgen *s = compile_box(name, box, nbox, false);
  if (rt_sgen_fallback(s)) fail_msg("%s: not one object: %s", name, rt_sgen_fallback(s));
  assert_true(rt_sgen_quick(s));
  tiny_graph *g = load_model(name);
  int refused = 0;
  int64_t hi1 = nbox > 1 ? box[1].hi : 0, lo1 = nbox > 1 ? box[1].lo : 0;
  for (int64_t a = box[0].lo; a <= box[0].hi; a++)
    for (int64_t b = lo1; b <= hi1; b++) {
      char v[8][48];
      const char *bind[9] = {0};
      for (int i = 0; i < nbox; i++) {
        snprintf(v[i], sizeof v[i], "%s=%lld", box[i].name, (long long)(i == 0 ? a : i == 1 ? b : box[i].lo));
        bind[i] = v[i];
      }
      ut_tensor in[16];
      tiny_shape want[4], got[4];
      int n = shapes_at(g, bind, in);
      bool ok = prepared_at(name, bind, want);
      harp_error e = {0};
      harp_status st = rt_sgen_output_shapes(&e, s, in, n, got);
      if (!ok) {
        if (st != HARP_E_INPUT_MISMATCH) fail_msg("%s at %s %s: taken (%d), the model does not prepare there", name, v[0], v[1], st);
        refused++;
      } else if (st) {
        fail_msg("%s at %s %s: %s", name, v[0], v[1], e.msg);
      }
      for (int k = 0; ok && k < g->noutputs; k++) {
        char x[256], y[256];
        tiny_shape_format(&got[k], x, sizeof x);
        tiny_shape_format(&want[k], y, sizeof y);
        assert_int_equal(got[k].rank, want[k].rank);
        for (int d = 0; d < want[k].rank; d++)
          if (got[k].d[d].n != want[k].d[d].n) fail_msg("%s at %s %s: output %d is %s, the model's %s", name, v[0], v[1], k, x, y);
      }
      harp_error_clear(&e);
    }
  tiny_graph_free(g);
  rt_sgen_free(s);
  return refused;
}

static void test_every_binding(void **state) {
  (void)state;
  rt_sgen_sym cnn[] = {{"H", 7, 30}, {"W", 7, 27}, {"N", 1, 1}, {"C", 3, 3}, {"K", 8, 8}};
  assert_int_equal(every_binding("dsym_cnn.harp", cnn, 5), 0);
  rt_sgen_sym quarter[] = {{"n", 4, 64}};
  assert_int_equal(every_binding("dsym_reshape.harp", quarter, 1), 61 - 16); /* all but the 16 multiples of 4 */
}

/* One object, new bindings one after another (each checked quickly): up,
 * down, W alone, H alone, N alone, back to the first; the interpreter's
 * outputs at each. */
static void test_new_bindings_run(void **state) {
  (void)state;
  rt_sgen_sym box[] = {{"N", 1, 2}, {"H", 6, 40}, {"W", 4, 36}, {"C", 3, 3}, {"K", 16, 16}};
  rt_sgen *s = compile_box("cnn_hw.harp", box, 5, false);
  if (rt_sgen_fallback(s)) fail_msg("cnn_hw: not one object: %s", rt_sgen_fallback(s));
  assert_true(rt_sgen_quick(s));
  static const char *const at[][6] = {
      {"N=1", "H=10", "W=8", "C=3", "K=16", NULL},  {"N=1", "H=30", "W=26", "C=3", "K=16", NULL},
      {"N=1", "H=12", "W=6", "C=3", "K=16", NULL},  {"N=1", "H=12", "W=22", "C=3", "K=16", NULL},
      {"N=1", "H=36", "W=22", "C=3", "K=16", NULL}, {"N=2", "H=36", "W=22", "C=3", "K=16", NULL},
      {"N=1", "H=10", "W=8", "C=3", "K=16", NULL},
  };
  for (size_t b = 0; b < sizeof at / sizeof at[0]; b++) check_at(s, "cnn_hw.harp", at[b], 1, 5e-3);
  assert_int_equal(rt_sgen_objects(s), 1);
  rt_sgen_free(s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_binding),
      cmocka_unit_test(test_new_bindings_run),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
