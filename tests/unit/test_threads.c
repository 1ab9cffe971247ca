/* test_threads.c — harp_model_run from many threads, as docs/c-api.md
 * allows: separate instances of one compiled model at once (16 threads x
 * 1,000 runs, each thread its own inputs, every output checked against the
 * interpreter's for those inputs and against the thread's first run, bit
 * for bit), and one instance used by one thread at a time, handed between
 * threads under a mutex.  HARP_THREAD_RUNS changes the 1,000.  Also built
 * under ThreadSanitizer (make test-tsan: ctest label "threads"). */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <unistd.h>
#include <cmocka.h>

#include "runmodel.h"

#define NTHREADS 16
#define TOL 1e-4

typedef struct shared {
  harp_compiled *c;
  void *params;             /* the weights' block */
  float *in[NTHREADS];      /* thread t's input (the model has one) */
  rm_out ref[NTHREADS];     /* the interpreter's output for it */
  int runs;
  harp_model *one;          /* the instance handed around */
  pthread_mutex_t lock;
  int bad[NTHREADS];        /* wrong outputs seen by thread t */
} shared;

typedef struct job {
  shared *s;
  int t;
} job;

static const char *model(void) {
  static char p[1024];
  snprintf(p, sizeof p, "%s/examples/mlp.harp", getenv("HARP_SOURCE_DIR") ? getenv("HARP_SOURCE_DIR") : HARP_SOURCE_DIR);
  return p;
}

/* Run instance m on thread t's input; count outputs that differ from the
 * reference, or (first non-NULL) from the thread's first output. */
static void run_check(shared *s, harp_model *m, int t, float *y, float *first) {
  const void *in[1] = {s->in[t]};
  void *out[1] = {y};
  if (harp_model_run(m, in, out) != 0) {
    s->bad[t]++;
    return;
  }
  rm_out got = {y, s->ref[t].n};
  if (rm_diff(&got, &s->ref[t]) > TOL || (first && memcmp(y, first, got.n * sizeof *y))) s->bad[t]++;
}

static void *own_instance(void *arg) {
  job *j = arg;
  shared *s = j->s;
  harp_model *m = harp_model_init(s->c, s->params, harp_params_bytes(s->c));
  if (!m) {
    s->bad[j->t] = -1;
    return NULL;
  }
  size_t n = s->ref[j->t].n;
  float *y = calloc(n, sizeof *y), *first = calloc(n, sizeof *first);
  run_check(s, m, j->t, first, NULL);
  for (int r = 1; r < s->runs; r++) run_check(s, m, j->t, y, first);
  free(y);
  free(first);
  harp_model_free(m);
  return NULL;
}

static void *handed_instance(void *arg) {
  job *j = arg;
  shared *s = j->s;
  float *y = calloc(s->ref[j->t].n, sizeof *y);
  for (int r = 0; r < s->runs / 8; r++) {
    pthread_mutex_lock(&s->lock);
    run_check(s, s->one, j->t, y, NULL);
    pthread_mutex_unlock(&s->lock);
  }
  free(y);
  return NULL;
}

/* The model compiled for the CPU and the interpreter; 16 inputs, their
 * reference outputs. */
static void prepare(shared *s) {
  memset(s, 0, sizeof *s);
  s->runs = getenv("HARP_THREAD_RUNS") ? atoi(getenv("HARP_THREAD_RUNS")) : 1000;
  static const char *const w[] = {"w1", "b1", "w2", "b2", NULL};
  static const size_t counts[] = {64 * 128, 128, 128 * 10, 10};
  harp_options o = {.backend = HARP_BACKEND_CPU, .cache_dir = rm_dir, .params = w};
  harp_error e = {0};
  if (harp_compile_file(&e, model(), &o, &s->c)) fail_msg("compile: %s", e.msg);
  assert_int_equal(harp_num_inputs(s->c), 1); /* x; the rest are weights */
  s->params = rm_params(s->c, w, counts);
  harp_compiled *ic = NULL;
  o.backend = HARP_BACKEND_INTERP;
  if (harp_compile_file(&e, model(), &o, &ic)) fail_msg("compile (interp): %s", e.msg);
  void *iparams = rm_params(ic, w, counts);
  size_t n = rm_numel(s->c, 0, false);
  for (int t = 0; t < NTHREADS; t++) {
    s->in[t] = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) s->in[t][i] = (float)(((i + 1) * (size_t)(t + 3) * 7919) % 2003) / 1000.0f - 1.0f;
    char err[256];
    if (rm_run_with(ic, iparams, &s->in[t], &s->ref[t], err, sizeof err)) fail_msg("reference: %s", err);
  }
  free(iparams);
  harp_compiled_free(ic);
  pthread_mutex_init(&s->lock, NULL);
}

static void release(shared *s) {
  for (int t = 0; t < NTHREADS; t++) {
    free(s->in[t]);
    free(s->ref[t].y);
  }
  pthread_mutex_destroy(&s->lock);
  free(s->params);
  harp_compiled_free(s->c);
}

static void spawn_all(shared *s, void *(*fn)(void *)) {
  pthread_t th[NTHREADS];
  job jobs[NTHREADS];
  for (int t = 0; t < NTHREADS; t++) {
    jobs[t] = (job){s, t};
    assert_int_equal(pthread_create(&th[t], NULL, fn, &jobs[t]), 0);
  }
  for (int t = 0; t < NTHREADS; t++) pthread_join(th[t], NULL);
  for (int t = 0; t < NTHREADS; t++)
    if (s->bad[t]) fail_msg("thread %d: %d wrong or failed runs", t, s->bad[t]);
}

static void test_separate_instances(void **state) {
  (void)state;
  static shared s;
  prepare(&s);
  spawn_all(&s, own_instance);
  printf("%d threads x %d runs on their own instances: all outputs right\n", NTHREADS, s.runs);
  release(&s);
}

static void test_one_instance_in_turn(void **state) {
  (void)state;
  static shared s;
  prepare(&s);
  s.one = harp_model_init(s.c, s.params, harp_params_bytes(s.c));
  assert_non_null(s.one);
  spawn_all(&s, handed_instance);
  harp_model_free(s.one);
  release(&s);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_separate_instances), cmocka_unit_test(test_one_instance_in_turn)};
  return (rm_dir_template = "/tmp/harp-threads-XXXXXX", cmocka_run_group_tests(tests, rm_setup, rm_teardown));
}
