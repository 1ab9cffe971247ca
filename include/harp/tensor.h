/* harp/tensor.h — dense host tensors and NumPy .npy files.
 *
 * Storage is row-major (C order) in the dtype's own format: fp16 and bf16
 * as their 16-bit patterns, fp32 as float, i32 as int32_t, bool as one byte
 * (0 or 1). */
#ifndef HARP_TENSOR_H
#define HARP_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "harp/error.h"
#include "harp/tiny.h"

typedef struct ut_tensor {
  tiny_dtype dtype;
  int rank;
  int64_t shape[TINY_MAX_RANK];
  void *data; /* owned; NULL when numel == 0 is allowed */
  size_t nbytes;
} ut_tensor;

/* Zero-filled. */
harp_status ut_tensor_alloc(harp_error *e, ut_tensor *t, tiny_dtype dt, int rank, const int64_t *shape);
void ut_tensor_free(ut_tensor *t);
int64_t ut_tensor_numel(const ut_tensor *t);
/* Element i (flat index) as float / stored from float (rounding to dtype). */
float ut_tensor_get(const ut_tensor *t, int64_t i);
void ut_tensor_set(ut_tensor *t, int64_t i, float v);
/* A tensor filled from the seeded RNG *state (--random-inputs, the tuner):
 * floats uniform in [-1, 1), i32 0..9, bool 0/1, i8/u8 their whole range. */
harp_status ut_tensor_random(harp_error *e, tiny_dtype dt, int rank, const int64_t *shape, uint64_t *state, ut_tensor *t);

/* Half-precision conversions (round to nearest even). */
uint16_t ut_f32_to_f16(float f);
float ut_f16_to_f32(uint16_t h);
uint16_t ut_f32_to_bf16(float f);
float ut_bf16_to_f32(uint16_t h);

/* .npy read: accepts '<f2' (fp16), '<f4' (fp32), '<i4' (i32), '|b1' (bool),
 * '<i8' (read as i32; a value outside int32 is LimitExceeded),
 * C order, format versions 1.0-3.0.  want_dtype >= 0 asks for that dtype:
 * bf16 is read from '<f4' and rounded; any other difference is InputMismatch.
 * Pass -1 to accept what the file holds. */
harp_status ut_npy_read(harp_error *e, const char *path, int want_dtype, ut_tensor *out);
/* Only the rank and shape of a .npy file (its header; any dtype). */
harp_status ut_npy_read_shape(harp_error *e, const char *path, int *rank, int64_t *shape);
/* Parse from memory (name is used in messages). */
harp_status ut_npy_parse(harp_error *e, const void *buf, size_t len, const char *name, int want_dtype, ut_tensor *out);
/* .npy write, atomically (temp file + rename).  bf16 is written as '<f4'. */
harp_status ut_npy_write(harp_error *e, const char *path, const ut_tensor *t);

#endif
