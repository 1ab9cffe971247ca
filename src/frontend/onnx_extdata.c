/* onnx_extdata.c — an initializer whose bytes live in a file beside the
 * model (TensorProto.data_location = EXTERNAL: onnx.save with
 * save_as_external_data, and every model over protobuf's 2 GB).  The file
 * is named by the "location" key, relative to the model's directory, and
 * read from "offset" for "length" bytes (both optional).  A location must
 * stay inside that directory: absolute paths, ".." and symbolic links that
 * lead out are refused, so a model cannot make harp read /etc/passwd.
 * Needs: the model's directory in the context (the caller checks there is
 * one).  Gives: ox_read_external. */
#define _DEFAULT_SOURCE 1 /* realpath */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "onnx_int.h"

/* Largest tensor read from one external file: harp's element limit, 8 bytes each. */
#define MAX_EXTERNAL_BYTES ((uint64_t)OX_MAX_NUMEL * 8)

static bool parse_u64(const char *s, uint64_t *out) {
  if (!s || !*s) return false;
  uint64_t v = 0;
  for (; *s; s++) {
    if (*s < '0' || *s > '9' || v > (UINT64_MAX - 9) / 10) return false;
    v = v * 10 + (uint64_t)(*s - '0');
  }
  *out = v;
  return true;
}

/* location relative, without ".." components or NULs */
static bool safe_location(const char *loc) {
  if (!loc || !*loc || loc[0] == '/') return false;
  for (const char *p = loc; *p;) {
    const char *end = strchr(p, '/');
    size_t n = end ? (size_t)(end - p) : strlen(p);
    if (n == 2 && p[0] == '.' && p[1] == '.') return false;
    p += n + (end ? 1 : 0);
  }
  return true;
}

harp_status ox_read_external(ox_ctx *c, const Onnx__TensorProto *tp, const char *nm, uint8_t **buf, size_t *len) {
  *buf = NULL;
  *len = 0;
  const char *loc = NULL;
  uint64_t off = 0, length = 0;
  bool has_len = false;
  for (size_t i = 0; i < tp->n_external_data; i++) {
    const Onnx__StringStringEntryProto *kv = tp->external_data[i];
    if (!kv || !kv->key) continue;
    if (!strcmp(kv->key, "location")) loc = kv->value;
    else if (!strcmp(kv->key, "offset") && !parse_u64(kv->value, &off))
      return ox_fail(c, HARP_E_INVALID_ARG, "tensor \"%s\": external data offset \"%.40s\" is not a number", nm, kv->value ? kv->value : "");
    else if (!strcmp(kv->key, "length") && !(has_len = parse_u64(kv->value, &length)))
      return ox_fail(c, HARP_E_INVALID_ARG, "tensor \"%s\": external data length \"%.40s\" is not a number", nm, kv->value ? kv->value : "");
  }
  if (!loc) return ox_fail(c, HARP_E_INVALID_ARG, "tensor \"%s\" is external but names no location", nm);
  if (!safe_location(loc))
    return ox_fail(c, HARP_E_INVALID_ARG, "tensor \"%s\": external data location \"%.80s\" is outside the model's directory", nm, loc);
  size_t pl = strlen(c->dir) + strlen(loc) + 2;
  char *path = ut_xmalloc(pl), *real = NULL, *rdir = NULL;
  if (!path) return ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
  snprintf(path, pl, "%s/%s", c->dir, loc);
  harp_status st = HARP_OK;
  FILE *f = NULL;
  /* a symbolic link may still lead out: compare the resolved paths */
  real = realpath(path, NULL);
  rdir = realpath(c->dir, NULL);
  size_t dl = rdir ? strlen(rdir) : 0;
  if (!real || !rdir) {
    st = ox_fail(c, HARP_E_IO, "tensor \"%s\": cannot open external data \"%.80s\": %s", nm, loc, strerror(errno));
    goto done;
  }
  if (strncmp(real, rdir, dl) != 0 || (real[dl] != '/' && strcmp(rdir, "/") != 0)) {
    st = ox_fail(c, HARP_E_INVALID_ARG, "tensor \"%s\": external data location \"%.80s\" is outside the model's directory", nm, loc);
    goto done;
  }
  struct stat sb;
  if (!(f = fopen(real, "rb")) || fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
    st = ox_fail(c, HARP_E_IO, "tensor \"%s\": cannot read external data \"%.80s\"%s%s", nm, loc, f ? " (not a regular file)" : ": ",
                 f ? "" : strerror(errno));
    goto done;
  }
  uint64_t size = (uint64_t)sb.st_size;
  if (off > size || (has_len && length > size - off)) {
    st = ox_fail(c, HARP_E_INVALID_ARG, "tensor \"%s\": external data \"%.80s\" is %" PRIu64 " bytes; offset %" PRIu64 " length %" PRIu64
                 " reads past its end", nm, loc, size, off, has_len ? length : size - off);
    goto done;
  }
  if (!has_len) length = size - off;
  if (length > MAX_EXTERNAL_BYTES || length > SIZE_MAX / 2) {
    st = ox_fail(c, HARP_E_LIMIT, "tensor \"%s\": %" PRIu64 " bytes of external data (at most %" PRIu64 ")", nm, length, MAX_EXTERNAL_BYTES);
    goto done;
  }
  if (!(*buf = ut_xmalloc(length ? (size_t)length : 1))) {
    st = ox_fail(c, HARP_E_NO_MEMORY, "out of memory for %" PRIu64 " bytes of external data", length);
    goto done;
  }
  if (fseeko(f, (off_t)off, SEEK_SET) != 0 || fread(*buf, 1, (size_t)length, f) != (size_t)length) {
    free(*buf);
    *buf = NULL;
    st = ox_fail(c, HARP_E_IO, "tensor \"%s\": reading external data \"%.80s\" failed", nm, loc);
    goto done;
  }
  *len = (size_t)length;
done:
  if (f) fclose(f);
  free(path);
  free(real);
  free(rdir);
  return st;
}
