/* test_tier0_read.c — tier 0's reading on one thread while a run on another
 * waits per kernel (src/runtime/tier0.c: rt_t0_prep_new, rt_t0_prep_read,
 * what cpu.c's builder thread does while the first run starts).  A run
 * started before any kernel is read must block, not run the kernels unread
 * (on the interpreter), then finish once they are read: every kernel on
 * the fast kernels, as many as a run after a whole reading, the same bits,
 * within tolerance of the interpreter, its wait counted.
 * Needs: src/runtime/tier0.h, the CPU pipeline.  Gives: a cmocka test. */
#include <math.h>
#include <pthread.h>
#include <time.h>

#include "harp/frontend.h"
#include "harp/pipeline.h"
#include "runtime/tier0.h"
#include "testutil.h"

#define MODEL "tests/models/cnn_hw.harp"

/* A run on its own thread: its inputs, outputs, stats and status. */
typedef struct runner {
  const rt_compile *c;
  rt_t0_prep *prep;
  const ut_tensor *in;
  int nin;
  ut_tensor out[4];
  rt_t0_stats st;
  harp_error e;
  int finished; /* atomic */
} runner;

static void *run_main(void *arg) {
  runner *r = arg;
  rt_tier0_run(&r->e, r->c, r->prep, r->in, r->nin, r->out, &r->st);
  __atomic_store_n(&r->finished, 1, __ATOMIC_RELEASE);
  return NULL;
}

static void test_run_waits_for_reading(void **state) {
  (void)state;
  char path[1024];
  const char *src = getenv("HARP_SOURCE_DIR");
  snprintf(path, sizeof path, "%s/%s", src ? src : HARP_SOURCE_DIR, MODEL);
  harp_error e = {0};
  hg_program *p = NULL;
  tiny_graph *g = NULL;
  tiny_symtab syms;
  tiny_symtab_init(&syms);
  assert_ok(&e, hg_harp_load_file(&e, path, &p));
  assert_ok(&e, hg_lower(&e, p, &g, &syms));
  hg_program_free(p);
  assert_ok(&e, tiny_prepare(&e, g, &syms, false));
  rt_compile_opts o = {.until = RT_STAGE_PLANS, .keep_analysis = true};
  rt_compile *c = NULL;
  assert_ok(&e, rt_compile_run(&e, &rt_target_cpu, g, &syms, &o, &c));
  int nin;
  ut_tensor *in = tu_random_inputs(g, &nin, 7, 0.25f);
  assert_true(g->noutputs == 1);

  /* the reference: read first, then run; and the interpreter */
  rt_t0_prep *whole = NULL;
  assert_ok(&e, rt_t0_prepare(&e, c, c->f, &whole));
  ut_tensor ref[1] = {0}, interp[1] = {0};
  rt_t0_stats st_ref = {0};
  assert_ok(&e, rt_tier0_run(&e, c, whole, in, nin, ref, &st_ref));
  assert_true(st_ref.fast >= 4 && st_ref.fast == c->f->nkernels); /* the convs on the fast kernels */
  assert_ok(&e, tiny_interp(&e, g, &syms, in, nin, interp));

  /* the run first, on a thread: it must wait, nothing read yet */
  runner r = {.c = c, .in = in, .nin = nin};
  assert_ok(&e, rt_t0_prep_new(&e, c->f, &r.prep));
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, run_main, &r), 0);
  nanosleep(&(struct timespec){0, 60 * 1000 * 1000}, NULL);
  assert_int_equal(__atomic_load_n(&r.finished, __ATOMIC_ACQUIRE), 0); /* blocked at the first kernel */
  assert_ok(&e, rt_t0_prep_read(&e, c, r.prep));                       /* this thread reads meanwhile */
  pthread_join(th, NULL);
  assert_int_equal(r.e.code, HARP_OK);
  assert_int_equal(r.st.fast, st_ref.fast);
  assert_int_equal(r.st.interp, st_ref.interp);
  assert_true(r.st.wait_ms >= 40); /* its wait, apart from the kernels' time */
  assert_int_equal(r.out[0].nbytes, ref[0].nbytes);
  assert_memory_equal(r.out[0].data, ref[0].data, ref[0].nbytes);
  for (int64_t i = 0; i < ut_tensor_numel(&interp[0]); i++) {
    float a = ut_tensor_get(&r.out[0], i), b = ut_tensor_get(&interp[0], i);
    if (fabsf(a - b) > 1e-4f + 1e-4f * fabsf(b)) fail_msg("element %lld: %g vs the interpreter's %g", (long long)i, a, b);
  }

  /* a reading that never read a kernel (it stopped at once): the run says so, it does not hang */
  rt_t0_prep *none = NULL;
  assert_ok(&e, rt_t0_prep_new(&e, c->f, &none));
  rt_compile bare = *c;
  bare.pv = NULL; /* rt_t0_prep_read fails at once without a Poly-View */
  harp_error re = {0};
  assert_int_equal(rt_t0_prep_read(&re, &bare, none), HARP_E_INTERNAL);
  ut_tensor out2[1] = {0};
  harp_error e2 = {0};
  assert_int_equal(rt_tier0_run(&e2, c, none, in, nin, out2, NULL), HARP_E_INTERNAL);
  assert_non_null(strstr(e2.msg, "reading"));

  rt_t0_prep_free(none);
  rt_t0_prep_free(r.prep);
  rt_t0_prep_free(whole);
  ut_tensor_free(&r.out[0]);
  ut_tensor_free(&ref[0]);
  ut_tensor_free(&interp[0]);
  for (int k = 0; k < nin; k++) ut_tensor_free(&in[k]);
  free(in);
  rt_compile_free(c);
  tiny_graph_free(g);
  tiny_symtab_free(&syms);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_run_waits_for_reading)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
