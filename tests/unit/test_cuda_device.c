/* test_cuda_device.c — harp_model_run_device and device ordinals on the fake
 * libcuda (tests/fake_cuda), with its launch log: the kernels get the
 * caller's device pointers, every launch (direct, or a replayed graph's
 * kernel) goes to the caller's stream (NULL: the instance's own), a run
 * copies nothing between host and device (the weights go up once), graphs
 * are captured per set of pointers and updated in place when those change,
 * a run on another stream than the last waits for it (an event),
 * bad pointers and other backends get clear errors, and harp_model_new puts
 * an instance on the device ordinal asked for or says there is none.  The
 * fake executes no kernel: values are not checked here. */
#include "fake_testutil.h"
#include "harp.h"

typedef int (*mem_alloc_fn)(unsigned long long *, size_t);
typedef int (*mem_free_fn)(unsigned long long);
typedef int (*stream_new_fn)(void **, unsigned);
typedef int (*stream_del_fn)(void *);

typedef struct dev {
  mem_alloc_fn alloc;
  mem_free_fn free;
  stream_new_fn stream_new;
  stream_del_fn stream_del;
  void (*record)(int);
  int (*nlaunches)(void);
  int (*launch)(int, const void **, unsigned long long *, int);
} dev;

static dev D;

static void need_dev(void) {
  *(void **)&D.alloc = dlsym(S->lib, "cuMemAlloc_v2");
  *(void **)&D.free = dlsym(S->lib, "cuMemFree_v2");
  *(void **)&D.stream_new = dlsym(S->lib, "cuStreamCreate");
  *(void **)&D.stream_del = dlsym(S->lib, "cuStreamDestroy_v2");
  *(void **)&D.record = dlsym(S->lib, "harp_fake_cuda_record");
  *(void **)&D.nlaunches = dlsym(S->lib, "harp_fake_cuda_nlaunches");
  *(void **)&D.launch = dlsym(S->lib, "harp_fake_cuda_launch");
  assert_true(D.alloc && D.free && D.stream_new && D.stream_del && D.record && D.nlaunches && D.launch);
}

static harp_compiled *compile(bool graphs, harp_backend backend) {
  harp_error e = {0};
  const char *syms[] = {"M=8", "K=16", "N=24", NULL};
  const char *weights[] = {"B", "bias", NULL};
  harp_options o = {.backend = backend, .syms = syms, .params = weights, .cache_dir = S->cache,
                    .target = backend == HARP_BACKEND_CUDA ? "sm80" : NULL, .graphs = graphs};
  harp_compiled *c = NULL;
  assert_ok(&e, harp_compile_file(&e, src_path("tests/models/seed000_gemm_bias_relu.json"), &o, &c));
  return c;
}

/* Whether device address p is one of launch i's arguments. */
static bool launch_has(int i, unsigned long long p) {
  unsigned long long a[16];
  int n = D.launch(i, NULL, a, 16);
  for (int k = 0; k < n && k < 16; k++)
    if (a[k] == p) return true;
  return false;
}

/* The launch log since recording began: every entry on `stream`, at least
 * one reading `in` and one writing `out`; returns how many entries. */
static int check_log(const void *stream, unsigned long long in, unsigned long long out) {
  int n = D.nlaunches(), saw_in = 0, saw_out = 0;
  assert_true(n > 0);
  for (int i = 0; i < n; i++) {
    const void *s = NULL;
    assert_true(D.launch(i, &s, NULL, 0) > 0); /* arguments recorded */
    assert_ptr_equal(s, stream);
    saw_in += launch_has(i, in), saw_out += launch_has(i, out);
  }
  assert_true(saw_in > 0);
  assert_true(saw_out > 0);
  return n;
}

typedef struct bufs {
  unsigned long long A, C, C2;
  void *stream;
  unsigned char *params;
} bufs;

static void bufs_new(bufs *b, const harp_compiled *c) {
  assert_int_equal(D.alloc(&b->A, 8 * 16 * 2), 0);
  assert_int_equal(D.alloc(&b->C, 8 * 24 * 2), 0);
  assert_int_equal(D.alloc(&b->C2, 8 * 24 * 2), 0);
  assert_int_equal(D.stream_new(&b->stream, 1), 0);
  b->params = calloc(1, harp_params_bytes(c));
}

static void bufs_free(bufs *b) {
  D.free(b->A), D.free(b->C), D.free(b->C2);
  D.stream_del(b->stream);
  free(b->params);
}

/* An instance of c on zero weights, with b's buffers and stream made. */
static harp_model *instance(const harp_compiled *c, bufs *b) {
  bufs_new(b, c);
  harp_error e = {0};
  harp_model *m = NULL;
  assert_ok(&e, harp_model_new(&e, c, b->params, harp_params_bytes(c), NULL, &m));
  return m;
}

static harp_status run_dev(harp_error *e, harp_model *m, unsigned long long A, unsigned long long C, void *stream) {
  const void *in[] = {(const void *)(uintptr_t)A};
  void *out[] = {(void *)(uintptr_t)C};
  return harp_model_run_device(e, m, in, out, stream);
}

/* Direct launches: the caller's pointers and stream, no host copy after
 * the first run's weights. */
static void test_device_run(void **vs) {
  NEED_NVRTC();
  need_dev();
  S->reset();
  snap s0 = snapshot();
  harp_compiled *c = compile(false, HARP_BACKEND_CUDA);
  bufs b;
  harp_model *m = instance(c, &b);
  harp_error e = {0};
  long h0 = counter(FAKE_CUDA_HTOD_BYTES), d0 = counter(FAKE_CUDA_DTOH_BYTES);
  assert_ok(&e, run_dev(&e, m, b.A, b.C, b.stream)); /* the weights go up on the first run */
  long weights = counter(FAKE_CUDA_HTOD_BYTES) - h0;
  assert_true(weights >= (16 * 24 + 24) * 2);
  assert_int_equal(counter(FAKE_CUDA_DTOH_BYTES), d0);
  D.record(1);
  assert_ok(&e, run_dev(&e, m, b.A, b.C, b.stream));
  int n = check_log(b.stream, b.A, b.C);
  assert_int_equal(counter(FAKE_CUDA_HTOD_BYTES) - h0, weights); /* nothing more up */
  assert_int_equal(counter(FAKE_CUDA_DTOH_BYTES), d0);            /* nothing down */
  assert_int_equal(counter(FAKE_CUDA_STREAM_WAITS), 0); /* the same stream twice: ordered already */
  D.record(1);
  assert_ok(&e, run_dev(&e, m, b.A, b.C2, NULL)); /* NULL: the instance's own stream */
  assert_int_equal(counter(FAKE_CUDA_STREAM_WAITS), 1); /* another stream: after the last run */
  assert_int_equal(D.nlaunches(), n);
  int saw_c2 = 0;
  for (int i = 0; i < n; i++) {
    const void *s = b.stream;
    D.launch(i, &s, NULL, 0);
    assert_non_null(s);
    assert_ptr_not_equal(s, b.stream);
    saw_c2 += launch_has(i, b.C2);
  }
  assert_true(saw_c2 > 0);
  D.record(0);
  assert_int_equal(counter(FAKE_CUDA_CAPTURES_BEGUN), 0);
  harp_model_free(m);
  harp_compiled_free(c);
  bufs_free(&b);
  assert_released(&s0);
}

/* Graphs: captured once per set of pointers, replayed on the caller's
 * stream; new pointers update the executable graph in place. */
static void test_device_graphs(void **vs) {
  NEED_NVRTC();
  need_dev();
  S->reset();
  snap s0 = snapshot();
  harp_compiled *c = compile(true, HARP_BACKEND_CUDA);
  bufs b;
  harp_model *m = instance(c, &b);
  harp_error e = {0};
  long d0 = counter(FAKE_CUDA_DTOH_BYTES);
  D.record(1);
  for (int i = 0; i < 3; i++) assert_ok(&e, run_dev(&e, m, b.A, b.C, b.stream));
  check_log(b.stream, b.A, b.C);
  assert_int_equal(counter(FAKE_CUDA_CAPTURES_BEGUN), 1);
  assert_int_equal(counter(FAKE_CUDA_GRAPHS_INSTANTIATED), 1);
  assert_int_equal(counter(FAKE_CUDA_GRAPH_LAUNCHES), 3);
  assert_int_equal(counter(FAKE_CUDA_DIRECT_LAUNCHES), 0);
  D.record(1);
  assert_ok(&e, run_dev(&e, m, b.A, b.C2, b.stream)); /* another output buffer: captured again, updated */
  check_log(b.stream, b.A, b.C2);
  assert_int_equal(counter(FAKE_CUDA_CAPTURES_BEGUN), 2);
  assert_int_equal(counter(FAKE_CUDA_EXEC_UPDATES), 1);
  assert_int_equal(counter(FAKE_CUDA_GRAPHS_INSTANTIATED), 1);
  assert_int_equal(counter(FAKE_CUDA_DTOH_BYTES), d0);
  D.record(0);
  harp_model_free(m);
  harp_compiled_free(c);
  bufs_free(&b);
  assert_released(&s0);
}

/* NULL pointers, a CPU model: clear errors, and the instance still runs. */
static void test_device_errors(void **vs) {
  NEED_NVRTC();
  need_dev();
  snap s0 = snapshot();
  harp_compiled *c = compile(false, HARP_BACKEND_CUDA);
  bufs b;
  harp_model *m = instance(c, &b);
  harp_error e = {0};
  assert_int_equal(run_dev(&e, m, 0, b.C, b.stream), HARP_E_USAGE);
  assert_non_null(strstr(e.msg, "input 0"));
  harp_error_clear(&e);
  assert_int_equal(run_dev(&e, m, b.A, 0, b.stream), HARP_E_USAGE);
  assert_non_null(strstr(e.msg, "output 0"));
  harp_error_clear(&e);
  assert_int_equal(run_dev(&e, m, b.A + 1, b.C, b.stream), HARP_E_MISALIGNED);
  harp_error_clear(&e);
  assert_int_equal(harp_model_run_device(&e, m, NULL, NULL, b.stream), HARP_E_USAGE);
  harp_error_clear(&e);
  assert_ok(&e, run_dev(&e, m, b.A, b.C, b.stream));
  harp_model_free(m);
  harp_compiled_free(c);
  harp_compiled *cpu = compile(false, HARP_BACKEND_CPU);
  unsigned char *p = calloc(1, harp_params_bytes(cpu));
  assert_ok(&e, harp_model_new(&e, cpu, p, harp_params_bytes(cpu), NULL, &m));
  assert_int_equal(run_dev(&e, m, b.A, b.C, b.stream), HARP_E_UNSUPPORTED);
  assert_non_null(strstr(e.msg, "CUDA"));
  harp_error_clear(&e);
  harp_model_free(m);
  harp_instance_options io = {.device = 1};
  assert_int_equal(harp_model_new(&e, cpu, p, harp_params_bytes(cpu), &io, &m), HARP_E_USAGE);
  harp_error_clear(&e);
  harp_compiled_free(cpu);
  free(p);
  bufs_free(&b);
  assert_released(&s0);
}

/* Device ordinals: an instance on device 1 of 2 retains device 1's
 * context; device 2 of 2 is an error naming how many there are. */
static void test_device_ordinal(void **vs) {
  NEED_NVRTC();
  snap s0 = snapshot();
  harp_compiled *c = compile(false, HARP_BACKEND_CUDA);
  unsigned char *p = calloc(1, harp_params_bytes(c));
  harp_error e = {0};
  harp_model *m = NULL;
  setenv("HARP_FAKE_CUDA_DEVICES", "2", 1);
  harp_instance_options io = {.device = 1};
  assert_ok(&e, harp_model_new(&e, c, p, harp_params_bytes(c), &io, &m));
  assert_int_equal(counter(FAKE_CUDA_LAST_DEVICE), 1);
  harp_model_free(m);
  io.device = 2;
  assert_int_equal(harp_model_new(&e, c, p, harp_params_bytes(c), &io, &m), HARP_E_UNSUPPORTED);
  assert_null(m);
  assert_non_null(strstr(e.msg, "no CUDA device 2 (2 found)"));
  harp_error_clear(&e);
  unsetenv("HARP_FAKE_CUDA_DEVICES");
  io.device = 1; /* one device now */
  assert_int_equal(harp_model_new(&e, c, p, harp_params_bytes(c), &io, &m), HARP_E_UNSUPPORTED);
  assert_non_null(strstr(e.msg, "(1 found)"));
  harp_error_clear(&e);
  io.device = -1;
  assert_int_equal(harp_model_new(&e, c, p, harp_params_bytes(c), &io, &m), HARP_E_USAGE);
  harp_error_clear(&e);
  harp_compiled_free(c);
  free(p);
  assert_released(&s0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_device_run),
      cmocka_unit_test(test_device_graphs),
      cmocka_unit_test(test_device_errors),
      cmocka_unit_test(test_device_ordinal),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
