/* fz_npy.c — the .npy fuzzer: the bytes are a NumPy file, read as what it
 * holds and as each dtype harp asks for (a conversion or InputMismatch).
 * What reads must hold exactly rank/shape's elements, and every element
 * must be readable.
 * Needs: ut_npy_parse.  Gives: fz_npy. */
#include "fz.h"
#include "harp/error.h"
#include "harp/tensor.h"

int fz_npy(const uint8_t *data, size_t size) {
  for (int want = -1; want < (int)TINY_DTYPE_COUNT; want++) {
    harp_error e = {0};
    ut_tensor t;
    if (ut_npy_parse(&e, data, size, "fuzz.npy", want, &t)) {
      fz_check(e.code != HARP_OK && e.msg[0], "ut_npy_parse failed without a message");
      if (want < 0) return 0; /* not a tensor at all */
      continue;
    }
    int64_t n = ut_tensor_numel(&t);
    fz_check(n >= 0 && (want < 0 || (int)t.dtype == want), "a tensor of the wrong dtype or size");
    fz_check(t.nbytes == (size_t)n * tiny_dtype_size(t.dtype), "nbytes differs from numel x element size");
    float acc = 0;
    for (int64_t i = 0; i < n; i++) acc += ut_tensor_get(&t, i) * 0.0f;
    (void)acc;
    ut_tensor_free(&t);
  }
  return 0;
}
