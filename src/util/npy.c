/* npy.c — host tensors and the NumPy .npy format (versions 1.0 to 3.0).
 * Needs: util.h.  Gives: harp/tensor.h. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harp/tensor.h"
#include "util.h"

#define MAX_NPY_BYTES ((size_t)16 << 30)

static uint64_t splitmix(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* A tensor of dtype dt and the given shape filled from the RNG *state:
 * floats uniform in [-1, 1), i32 in 0..9, bool 0/1, i8/u8 their whole
 * range (as `--random-inputs` and the tuner make them). */
harp_status ut_tensor_random(harp_error *e, tiny_dtype dt, int rank, const int64_t *shape, uint64_t *state, ut_tensor *t) {
  if (ut_tensor_alloc(e, t, dt, rank, shape)) return e->code;
  int64_t cnt = ut_tensor_numel(t);
  for (int64_t i = 0; i < cnt; i++) {
    uint64_t r = splitmix(state);
    if (dt == TINY_I32) ((int32_t *)t->data)[i] = (int32_t)(r % 10);
    else if (dt == TINY_BOOL) ((uint8_t *)t->data)[i] = (uint8_t)(r & 1);
    else if (dt == TINY_I8) ((int8_t *)t->data)[i] = (int8_t)(uint8_t)r; /* the whole range */
    else if (dt == TINY_U8) ((uint8_t *)t->data)[i] = (uint8_t)r;
    else ut_tensor_set(t, i, (float)((double)(r >> 11) / 9007199254740992.0 * 2.0 - 1.0));
  }
  return HARP_OK;
}

int64_t ut_tensor_numel(const ut_tensor *t) {
  int64_t n = 1;
  for (int i = 0; i < t->rank; i++) n *= t->shape[i];
  return n;
}

harp_status ut_tensor_alloc(harp_error *e, ut_tensor *t, tiny_dtype dt, int rank, const int64_t *shape) {
  memset(t, 0, sizeof *t);
  if (rank < 0 || rank > TINY_MAX_RANK) return ut_fail(e, HARP_E_LIMIT, NULL, "rank %d is out of range", rank);
  int64_t n = 1;
  for (int i = 0; i < rank; i++) {
    if (shape[i] < 0 || !ut_mul_ok(n, shape[i], &n) || n > TINY_MAX_ELEMS)
      return ut_fail(e, HARP_E_LIMIT, NULL, "tensor too large");
    t->shape[i] = shape[i];
  }
  t->dtype = dt;
  t->rank = rank;
  int64_t bytes;
  if (!ut_mul_ok(n, tiny_dtype_size(dt), &bytes) || (uint64_t)bytes > MAX_NPY_BYTES)
    return ut_fail(e, HARP_E_LIMIT, NULL, "tensor of %" PRId64 " bytes is too large", bytes);
  t->nbytes = (size_t)bytes;
  t->data = ut_xcalloc(t->nbytes ? t->nbytes : 1, 1);
  if (!t->data) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory for a %zu-byte tensor", t->nbytes);
  return HARP_OK;
}

void ut_tensor_free(ut_tensor *t) {
  if (!t) return;
  free(t->data);
  memset(t, 0, sizeof *t);
}

/* v truncated toward zero into int32, saturating; NaN -> 0. */
static int32_t f2i32(float v) { return isnan(v) ? 0 : v >= 2147483647.0f ? INT32_MAX : v <= -2147483648.0f ? INT32_MIN : (int32_t)v; }

float ut_tensor_get(const ut_tensor *t, int64_t i) {
  switch (t->dtype) {
  case TINY_FP16: return ut_f16_to_f32(((const uint16_t *)t->data)[i]);
  case TINY_BF16: return ut_bf16_to_f32(((const uint16_t *)t->data)[i]);
  case TINY_FP32: return ((const float *)t->data)[i];
  case TINY_I32: return (float)((const int32_t *)t->data)[i];
  case TINY_BOOL: return ((const uint8_t *)t->data)[i] ? 1.0f : 0.0f;
  case TINY_I8: return (float)((const int8_t *)t->data)[i];
  case TINY_U8: return (float)((const uint8_t *)t->data)[i];
  default: return 0;
  }
}

void ut_tensor_set(ut_tensor *t, int64_t i, float v) {
  switch (t->dtype) {
  case TINY_FP16: ((uint16_t *)t->data)[i] = ut_f32_to_f16(v); break;
  case TINY_BF16: ((uint16_t *)t->data)[i] = ut_f32_to_bf16(v); break;
  case TINY_FP32: ((float *)t->data)[i] = v; break;
  case TINY_I32: ((int32_t *)t->data)[i] = (int32_t)v; break;
  case TINY_BOOL: ((uint8_t *)t->data)[i] = v != 0; break;
  case TINY_I8: ((int8_t *)t->data)[i] = (int8_t)f2i32(v); break; /* modulo 256, as numpy's astype */
  case TINY_U8: ((uint8_t *)t->data)[i] = (uint8_t)f2i32(v); break;
  default: break;
  }
}

/* ---- header ------------------------------------------------------------- */
static const char *descr_of(tiny_dtype t) { return tiny_dtype_npy(t); } /* the dtype table's */

/* Find 'key': in the header dict and return a pointer after the colon. */
static const char *find_key(const char *h, const char *key) {
  char pat[32];
  snprintf(pat, sizeof pat, "'%s'", key);
  const char *p = strstr(h, pat);
  if (!p) {
    snprintf(pat, sizeof pat, "\"%s\"", key);
    p = strstr(h, pat);
  }
  if (!p) return NULL;
  p += strlen(pat);
  while (*p == ' ') p++;
  if (*p != ':') return NULL;
  p++;
  while (*p == ' ') p++;
  return p;
}

static harp_status bad(harp_error *e, const char *name, const char *what) {
  return ut_fail_at(e, HARP_E_INPUT_MISMATCH, name, 0, 0, "not a valid .npy file: %s", what);
}

/* The header of the .npy bytes b[0..len): descr, rank and shape, and
 * where the data starts (*off). */
static harp_status header(harp_error *e, const unsigned char *b, size_t len, const char *name, char descr[16], int *rank, int64_t *shape,
                        size_t *off) {
  if (len < 10 || memcmp(b, "\x93NUMPY", 6) != 0) return bad(e, name, "missing the \\x93NUMPY magic");
  int major = b[6];
  size_t hlen, hstart;
  if (major == 1) {
    hlen = (size_t)b[8] | ((size_t)b[9] << 8);
    hstart = 10;
  } else if (major == 2 || major == 3) {
    if (len < 12) return bad(e, name, "truncated header");
    hlen = (size_t)b[8] | ((size_t)b[9] << 8) | ((size_t)b[10] << 16) | ((size_t)b[11] << 24);
    hstart = 12;
  } else {
    return bad(e, name, "unsupported format version");
  }
  if (hlen > 1 << 20 || hstart + hlen > len) return bad(e, name, "truncated header");
  *off = hstart + hlen;
  char *h = ut_xmalloc(hlen + 1);
  if (!h) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  memcpy(h, b + hstart, hlen);
  h[hlen] = 0;
  if (strlen(h) != hlen) { /* NUL inside the header */
    free(h);
    return bad(e, name, "header contains a NUL byte");
  }
  harp_status st = HARP_OK;
  const char *d = find_key(h, "descr"), *f = find_key(h, "fortran_order"), *s = find_key(h, "shape");
  memset(descr, 0, 16);
  *rank = 0;
  if (!d || !f || !s || (*d != '\'' && *d != '"')) {
    st = bad(e, name, "header lacks descr, fortran_order or shape");
    goto done;
  }
  {
    char q = *d++;
    int k = 0;
    while (*d && *d != q && k < 15) descr[k++] = *d++;
    if (*d != q) {
      st = bad(e, name, "malformed descr");
      goto done;
    }
  }
  if (strncmp(f, "True", 4) == 0) {
    st = ut_fail_at(e, HARP_E_INPUT_MISMATCH, name, 0, 0, "Fortran-order arrays are not supported; save with np.ascontiguousarray");
    goto done;
  }
  if (strncmp(f, "False", 5) != 0) {
    st = bad(e, name, "malformed fortran_order");
    goto done;
  }
  if (*s != '(') {
    st = bad(e, name, "malformed shape");
    goto done;
  }
  for (s++;;) {
    while (*s == ' ' || *s == ',') s++;
    if (*s == ')') break;
    if (!isdigit((unsigned char)*s) || *rank >= TINY_MAX_RANK) {
      st = bad(e, name, *rank >= TINY_MAX_RANK ? "too many dimensions" : "malformed shape");
      goto done;
    }
    int64_t v = 0;
    while (isdigit((unsigned char)*s)) {
      if (!ut_mul_ok(v, 10, &v) || !ut_add_ok(v, *s - '0', &v) || v > TINY_MAX_DIM) {
        st = ut_fail_at(e, HARP_E_LIMIT, name, 0, 0, "dimension too large");
        goto done;
      }
      s++;
    }
    shape[(*rank)++] = v;
  }
done:
  free(h);
  return st;
}

harp_status ut_npy_parse(harp_error *e, const void *buf, size_t len, const char *name, int want_dtype, ut_tensor *out) {
  const unsigned char *b = buf;
  memset(out, 0, sizeof *out);
  char descr[16];
  int64_t shape[TINY_MAX_RANK];
  int rank = 0;
  size_t off;
  harp_status st = header(e, b, len, name, descr, &rank, shape, &off);
  if (st) return st;
  tiny_dtype ft;
  bool i64 = false; /* numpy's default integer: read as int32, each value checked */
  if (!strcmp(descr, "<i8")) ft = TINY_I32, i64 = true;
  else if (!strcmp(descr, "<f2")) ft = TINY_FP16;
  else if (!strcmp(descr, "<f4")) ft = TINY_FP32;
  else if (!strcmp(descr, "<i4")) ft = TINY_I32;
  else if (!strcmp(descr, "|b1")) ft = TINY_BOOL;
  else if (!strcmp(descr, "|i1")) ft = TINY_I8;
  else if (!strcmp(descr, "|u1")) ft = TINY_U8;
  else {
    st = ut_fail_at(e, HARP_E_INPUT_MISMATCH, name, 0, 0,
                    "dtype '%s' is not supported (use float16 '<f2', float32 '<f4', int32 '<i4' or '<i8', int8 '|i1', uint8 '|u1' or bool '|b1')", descr);
    goto done;
  }
  tiny_dtype target = ft;
  if (want_dtype >= 0) {
    target = (tiny_dtype)want_dtype;
    bool ok = target == ft || (target == TINY_BF16 && ft == TINY_FP32);
    if (!ok) {
      st = ut_fail_at(e, HARP_E_INPUT_MISMATCH, name, 0, 0, "file holds %s ('%s') but the model expects %s%s",
                      tiny_dtype_name(ft), descr, tiny_dtype_name(target),
                      target == TINY_BF16 ? " (bf16 is read from float32 files)" : "; convert with .astype(...)");
      goto done;
    }
  }
  /* the data's size against the shape before allocating: a header may claim
   * gigabytes that the file does not hold */
  int64_t numel = 1, need64 = 0;
  for (int i = 0; i < rank; i++)
    if (!ut_mul_ok(numel, shape[i], &numel) || numel > TINY_MAX_ELEMS) {
      st = ut_fail_at(e, HARP_E_LIMIT, name, 0, 0, "tensor too large");
      goto done;
    }
  if (!ut_mul_ok(numel, i64 ? 8 : tiny_dtype_size(ft), &need64)) need64 = INT64_MAX;
  size_t need = (size_t)need64;
  if ((uint64_t)need64 > len - off) {
    st = bad(e, name, "data shorter than the shape says");
    goto done;
  }
  if (len - off > need) {
    st = bad(e, name, "trailing bytes after the data");
    goto done;
  }
  if ((st = ut_tensor_alloc(e, out, target, rank, shape))) goto done;
  if (i64) {
    for (int64_t i = 0; i < ut_tensor_numel(out); i++) {
      int64_t v;
      memcpy(&v, b + off + 8 * i, 8);
      if (v < INT32_MIN || v > INT32_MAX) {
        ut_tensor_free(out);
        st = ut_fail_at(e, HARP_E_LIMIT, name, 0, 0, "int64 element %" PRId64 " is %" PRId64 ", outside int32 (harp's integer type)", i, v);
        goto done;
      }
      ((int32_t *)out->data)[i] = (int32_t)v;
    }
  } else if (target == ft) {
    memcpy(out->data, b + off, need);
    if (ft == TINY_BOOL)
      for (size_t i = 0; i < need; i++) ((uint8_t *)out->data)[i] = ((uint8_t *)out->data)[i] != 0;
  } else { /* fp32 file -> bf16 */
    const unsigned char *p = b + off;
    for (int64_t i = 0; i < ut_tensor_numel(out); i++) {
      float v;
      memcpy(&v, p + 4 * i, 4);
      ((uint16_t *)out->data)[i] = ut_f32_to_bf16(v);
    }
  }
done:
  return st;
}

harp_status ut_npy_read_shape(harp_error *e, const char *path, int *rank, int64_t *shape) {
  *rank = 0;
  FILE *f = fopen(path, "rb");
  if (!f) return ut_fail_at(e, HARP_E_IO, path, 0, 0, "cannot open: %s", strerror(errno));
  unsigned char head[12];
  size_t got = fread(head, 1, sizeof head, f), end = 0; /* where the header ends */
  if (got == 12) end = head[6] == 1 ? ((size_t)head[8] | ((size_t)head[9] << 8)) + 10
                      : ((size_t)head[8] | ((size_t)head[9] << 8) | ((size_t)head[10] << 16) | ((size_t)head[11] << 24)) + 12;
  unsigned char *b = ut_xmalloc(end > 12 && end <= (1 << 20) + 12 ? end : 12);
  char descr[16];
  size_t off;
  harp_status st = b ? HARP_OK : ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  if (b) {
    memcpy(b, head, got);
    if (end > 12 && end <= (1 << 20) + 12) got += fread(b + 12, 1, end - 12, f);
    st = header(e, b, got, path, descr, rank, shape, &off); /* a short or bad header fails here */
  }
  free(b);
  fclose(f);
  return st;
}

harp_status ut_npy_read(harp_error *e, const char *path, int want_dtype, ut_tensor *out) {
  char *buf;
  size_t len;
  memset(out, 0, sizeof *out);
  if (ut_read_file(e, path, MAX_NPY_BYTES, &buf, &len)) return e->code;
  harp_status s = ut_npy_parse(e, buf, len, path, want_dtype, out);
  free(buf);
  return s;
}

harp_status ut_npy_write(harp_error *e, const char *path, const ut_tensor *t) {
  char header[512];
  int k = snprintf(header, sizeof header, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr_of(t->dtype));
  for (int i = 0; i < t->rank; i++) k += snprintf(header + k, sizeof header - (size_t)k, "%" PRId64 "%s", t->shape[i], t->rank == 1 ? "," : (i + 1 < t->rank ? ", " : ""));
  k += snprintf(header + k, sizeof header - (size_t)k, "), }");
  /* pad with spaces so the data starts 64-byte aligned, end with '\n' */
  size_t total = 10 + (size_t)k + 1;
  size_t pad = (64 - total % 64) % 64;
  size_t hlen = (size_t)k + pad + 1;
  int64_t numel = ut_tensor_numel(t);
  size_t data_bytes = (size_t)numel * (t->dtype == TINY_BF16 ? 4 : (size_t)tiny_dtype_size(t->dtype));
  size_t size = 10 + hlen + data_bytes;
  unsigned char *buf = ut_xmalloc(size);
  if (!buf) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  memcpy(buf, "\x93NUMPY\x01\x00", 8);
  buf[8] = (unsigned char)(hlen & 0xff);
  buf[9] = (unsigned char)(hlen >> 8);
  memcpy(buf + 10, header, (size_t)k);
  memset(buf + 10 + k, ' ', pad);
  buf[10 + hlen - 1] = '\n';
  unsigned char *p = buf + 10 + hlen;
  if (t->dtype == TINY_BF16) {
    for (int64_t i = 0; i < numel; i++) {
      float v = ut_bf16_to_f32(((const uint16_t *)t->data)[i]);
      memcpy(p + 4 * i, &v, 4);
    }
  } else if (data_bytes) {
    memcpy(p, t->data, data_bytes);
  }
  harp_status s = ut_write_file_atomic(e, path, buf, size);
  free(buf);
  return s;
}
