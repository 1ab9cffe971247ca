/* test_npy.c — .npy read/write: round trips for every dtype, bf16 through
 * float32, and malformed files rejected with InputMismatch/LimitExceeded. */
#include <unistd.h>

#include "testutil.h"

static void roundtrip(tiny_dtype dt) {
  harp_error e = {0};
  int64_t shape[3] = {2, 3, 4};
  double vals[24];
  for (int i = 0; i < 24; i++) vals[i] = dt == TINY_BOOL ? (i % 3 == 0) : (i - 10) * 0.5;
  ut_tensor t = tu_tensor(dt, 3, shape, vals), r;
  char path[] = "/tmp/harp_npy_XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  assert_ok(&e, ut_npy_write(&e, path, &t));
  assert_ok(&e, ut_npy_read(&e, path, (int)dt, &r));
  assert_int_equal(r.dtype, dt);
  assert_int_equal(r.rank, 3);
  for (int i = 0; i < 3; i++) assert_int_equal(r.shape[i], shape[i]);
  assert_int_equal(r.nbytes, t.nbytes);
  assert_memory_equal(r.data, t.data, t.nbytes);
  ut_tensor_free(&r);
  if (dt == TINY_BF16) { /* on disk it is float32 */
    assert_ok(&e, ut_npy_read(&e, path, -1, &r));
    assert_int_equal(r.dtype, TINY_FP32);
    ut_tensor_free(&r);
  }
  unlink(path);
  ut_tensor_free(&t);
}

static void test_roundtrips(void **state) {
  (void)state;
  for (int dt = 0; dt < TINY_DTYPE_COUNT; dt++) roundtrip((tiny_dtype)dt);
}

static void test_scalar_and_empty(void **state) {
  (void)state;
  harp_error e = {0};
  ut_tensor t, r;
  double v = 3;
  t = tu_tensor(TINY_FP32, 0, NULL, &v);
  assert_ok(&e, ut_npy_write(&e, "/tmp/harp_npy_scalar.npy", &t));
  assert_ok(&e, ut_npy_read(&e, "/tmp/harp_npy_scalar.npy", TINY_FP32, &r));
  assert_int_equal(r.rank, 0);
  assert_true(ut_tensor_get(&r, 0) == 3.0f);
  ut_tensor_free(&t);
  ut_tensor_free(&r);
  int64_t zero[2] = {0, 5};
  assert_ok(&e, ut_tensor_alloc(&e, &t, TINY_FP16, 2, zero));
  assert_ok(&e, ut_npy_write(&e, "/tmp/harp_npy_empty.npy", &t));
  assert_ok(&e, ut_npy_read(&e, "/tmp/harp_npy_empty.npy", TINY_FP16, &r));
  assert_int_equal(ut_tensor_numel(&r), 0);
  ut_tensor_free(&t);
  ut_tensor_free(&r);
  unlink("/tmp/harp_npy_scalar.npy");
  unlink("/tmp/harp_npy_empty.npy");
}

typedef struct bad {
  const char *name;
  const char *header; /* NULL: use raw */
  size_t data_bytes;
  int want_dtype;
  harp_status want;
} bad;

static void test_malformed(void **state) {
  (void)state;
  const bad cases[] = {
      {"f8", "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }", 16, -1, HARP_E_INPUT_MISMATCH},
      {"big-endian", "{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", 8, -1, HARP_E_INPUT_MISMATCH},
      {"fortran", "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", 16, -1, HARP_E_INPUT_MISMATCH},
      {"short data", "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", 8, -1, HARP_E_INPUT_MISMATCH},
      {"trailing", "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", 8, -1, HARP_E_INPUT_MISMATCH},
      {"no shape", "{'descr': '<f4', 'fortran_order': False, }", 4, -1, HARP_E_INPUT_MISMATCH},
      {"bad shape", "{'descr': '<f4', 'fortran_order': False, 'shape': (2, x), }", 8, -1, HARP_E_INPUT_MISMATCH},
      {"huge dim", "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", 0, -1, HARP_E_LIMIT},
      {"huge tensor", "{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776, 1099511627776), }", 0, -1, HARP_E_LIMIT},
      {"wrong dtype", "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", 8, TINY_FP16, HARP_E_INPUT_MISMATCH},
      {"i4 for fp32", "{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }", 8, TINY_FP32, HARP_E_INPUT_MISMATCH},
      {"too many dims", "{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1,1,1,1,1), }", 4, -1, HARP_E_INPUT_MISMATCH},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const bad *c = &cases[i];
    unsigned char buf[1024] = {0};
    size_t hl = strlen(c->header);
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (unsigned char)hl;
    buf[9] = 0;
    memcpy(buf + 10, c->header, hl);
    harp_error e = {0};
    ut_tensor t;
    harp_status st = ut_npy_parse(&e, buf, 10 + hl + c->data_bytes, c->name, c->want_dtype, &t);
    if (st != c->want) fail_msg("%s: want %s, got %s (%s)", c->name, harp_status_name(c->want), harp_status_name(st), e.msg);
  }
  /* not npy at all, and truncated magic */
  harp_error e = {0};
  ut_tensor t;
  assert_int_equal(ut_npy_parse(&e, "hello world", 11, "txt", -1, &t), HARP_E_INPUT_MISMATCH);
  harp_error_clear(&e);
  assert_int_equal(ut_npy_parse(&e, "\x93NUM", 4, "short", -1, &t), HARP_E_INPUT_MISMATCH);
  harp_error_clear(&e);
  assert_int_equal(ut_npy_read(&e, "/nonexistent/x.npy", -1, &t), HARP_E_IO);
}

/* numpy's default integer ('<i8') is read as int32, each value range-checked */
static void test_int64(void **state) {
  (void)state;
  unsigned char buf[256] = {0};
  const char *h = "{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }";
  size_t hl = strlen(h);
  memcpy(buf, "\x93NUMPY\x01\x00", 8);
  buf[8] = (unsigned char)hl;
  memcpy(buf + 10, h, hl);
  int64_t v[3] = {-7, 2147483647, 5};
  memcpy(buf + 10 + hl, v, sizeof v);
  harp_error e = {0};
  ut_tensor t;
  assert_ok(&e, ut_npy_parse(&e, buf, 10 + hl + sizeof v, "i8", -1, &t));
  assert_int_equal(t.dtype, TINY_I32);
  assert_int_equal(((int32_t *)t.data)[0], -7);
  assert_int_equal(((int32_t *)t.data)[1], 2147483647);
  assert_int_equal(((int32_t *)t.data)[2], 5);
  ut_tensor_free(&t);
  assert_ok(&e, ut_npy_parse(&e, buf, 10 + hl + sizeof v, "i8", TINY_I32, &t));
  ut_tensor_free(&t);
  assert_int_equal(ut_npy_parse(&e, buf, 10 + hl + sizeof v, "i8", TINY_FP32, &t), HARP_E_INPUT_MISMATCH);
  harp_error_clear(&e);
  v[1] = (int64_t)1 << 40;
  memcpy(buf + 10 + hl, v, sizeof v);
  assert_int_equal(ut_npy_parse(&e, buf, 10 + hl + sizeof v, "i8", -1, &t), HARP_E_LIMIT);
  assert_non_null(strstr(e.msg, "outside int32"));
  harp_error_clear(&e);
  assert_int_equal(ut_npy_parse(&e, buf, 10 + hl + 16, "i8 short", -1, &t), HARP_E_INPUT_MISMATCH);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_roundtrips),
      cmocka_unit_test(test_scalar_and_empty),
      cmocka_unit_test(test_malformed),
      cmocka_unit_test(test_int64),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
