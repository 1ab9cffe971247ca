/* autobox.c — the ShapeSet harp chooses by itself (harp/autobox.h): the
 * power-of-two bucket around each dynamic dim a binding sets
 * (harp_auto_box, which a Python session calls too), the boxes of an ONNX
 * import's given dims, and the cache directory's record of each bucket's
 * first binding (the tier across processes).
 * Needs: harp.h, util (files, hashing), compile.c (the cache directory).
 * Gives: harp_auto_box, rt_autobox_*. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "compile.h"
#include "harp.h"
#include "harp/autobox.h"
#include "util/util.h"

int harp_auto_box(int n, const char *const *names, const int64_t *values, const char **out_names, int64_t *lo, int64_t *hi) {
  int m = 0;
  for (int i = 0; i < n; i++) {
    int k = 0;
    while (k < m && strcmp(out_names[k], names[i])) k++;
    int64_t v = values[i];
    if (k < m) { /* a name met before: the same size */
      for (int j = 0; j < i; j++)
        if (!strcmp(names[j], names[i])) {
          if (values[j] != v) return -1;
          break;
        }
      continue;
    }
    out_names[m] = names[i];
    if (v < 2) {
      lo[m] = hi[m] = v;
    } else {
      int64_t b = 1;
      while (b <= v / 2) b *= 2;
      lo[m] = b, hi[m] = 2 * b - 1;
    }
    m++;
  }
  return m;
}

void rt_autobox_free(char **boxes) {
  for (int i = 0; boxes && boxes[i]; i++) free(boxes[i]);
  free(boxes);
}

/* Append "NAME=V" (lo == hi) or "NAME=LO..HI" to buf[cap] at *len, comma-separated. */
static void append(char *buf, size_t cap, size_t *len, const char *name, int64_t lo, int64_t hi) {
  int w = lo == hi ? snprintf(buf + *len, cap - *len, "%s%s=%lld", *len ? "," : "", name, (long long)lo)
                   : snprintf(buf + *len, cap - *len, "%s%s=%lld..%lld", *len ? "," : "", name, (long long)lo, (long long)hi);
  if (w > 0) *len = *len + (size_t)w < cap ? *len + (size_t)w : cap - 1;
}

harp_status rt_autobox_onnx(harp_error *e, const onnx_model *m, char ***boxes, char *key, char *binding, size_t cap) {
  *boxes = NULL;
  key[0] = binding[0] = 0;
  int n = m->nbound;
  char(*names)[300] = ut_xcalloc((size_t)n + 1, sizeof *names);
  const char **np = ut_xcalloc((size_t)n + 1, sizeof *np), **out = ut_xcalloc((size_t)n + 1, sizeof *out);
  int64_t *v = ut_xcalloc((size_t)n + 1, sizeof *v), *lo = ut_xcalloc((size_t)n + 1, sizeof *lo),
          *hi = ut_xcalloc((size_t)n + 1, sizeof *hi);
  harp_status st = names && np && out && v && lo && hi ? HARP_OK : ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  for (int i = 0; !st && i < n; i++) {
    const onnx_bound *b = &m->bound[i];
    if (b->param) snprintf(names[i], sizeof names[i], "%s", b->param);
    else snprintf(names[i], sizeof names[i], "%s:%d", b->input, b->dim);
    np[i] = names[i], v[i] = b->value;
  }
  int k = st ? -1 : harp_auto_box(n, np, v, out, lo, hi), nbox = 0;
  size_t klen = 0, blen = 0;
  for (int i = 0; i < k; i++) {
    nbox += lo[i] < hi[i];
    append(key, cap, &klen, out[i], lo[i], hi[i]);
  }
  for (int i = 0; i < n; i++) append(binding, cap, &blen, np[i], v[i], v[i]);
  char **r = !st && nbox ? ut_xcalloc((size_t)nbox + 1, sizeof *r) : NULL;
  if (!st && nbox && !r) st = ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  for (int i = 0, j = 0; r && !st && i < k; i++) {
    if (lo[i] == hi[i]) continue;
    size_t len = strlen(out[i]) + 48;
    if (!(r[j] = ut_xmalloc(len))) st = ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
    else snprintf(r[j++], len, "%s=%lld..%lld", out[i], (long long)lo[i], (long long)hi[i]);
  }
  if (st) rt_autobox_free(r);
  else *boxes = r;
  free(names), free(np), free(out), free(v), free(lo), free(hi);
  return st;
}

uint64_t rt_autobox_model_id(const char *path, const void *data, size_t len) {
  if (data) return ut_hash64(data, len, 0x6175746f626f78ull);
  char abs[PATH_MAX];
  struct stat sb;
  uint64_t h = ut_hash64(realpath(path, abs) ? abs : path, strlen(realpath(path, abs) ? abs : path), 0x6175746f626f78ull);
  if (!stat(path, &sb)) {
    int64_t meta[3] = {(int64_t)sb.st_size, (int64_t)sb.st_mtim.tv_sec, (int64_t)sb.st_mtim.tv_nsec};
    h = ut_hash64(meta, sizeof meta, h);
  }
  return h;
}

/* The record's path for the bucket key of model_id (to free), its folder made; NULL when neither can be had. */
static char *record_path(const char *cache_dir, uint64_t model_id, const char *key) {
  rt_cc_opts co = {.cache_dir = cache_dir};
  char *dir = rt_cc_cache_dir(&co);
  size_t len = dir ? strlen(dir) + 64 : 0;
  char *path = dir ? ut_xmalloc(len) : NULL;
  harp_error e = {0};
  if (path) snprintf(path, len, "%s/autobox", dir);
  if (path && ut_mkdirs(&e, path)) {
    harp_error_clear(&e);
    free(path);
    path = NULL;
  }
  if (path)
    snprintf(path, len, "%s/autobox/%016llx-%016llx", dir, (unsigned long long)model_id,
             (unsigned long long)ut_hash64(key, strlen(key), 0x6b6579ull));
  free(dir);
  return path;
}

rt_autobox_tier rt_autobox_tier_of(const char *cache_dir, uint64_t model_id, const char *key, const char *binding) {
  char *path = record_path(cache_dir, model_id, key), *text = NULL;
  if (!path) return RT_AUTOBOX_EXACT;
  size_t len = 0;
  harp_error e = {0};
  rt_autobox_tier t = RT_AUTOBOX_EXACT;
  if (!ut_read_file(&e, path, 1 << 16, &text, &len)) {
    if (!strncmp(text, "failed", 6)) t = RT_AUTOBOX_FAILED;
    else if (len != strlen(binding) + 1 || strncmp(text, binding, len - 1)) t = RT_AUTOBOX_BOX;
  } else { /* the bucket's first binding: remembered for the next process */
    harp_error_clear(&e);
    char line[4200];
    int w = snprintf(line, sizeof line, "%s\n", binding);
    ut_write_file_atomic(&e, path, line, w > 0 && (size_t)w < sizeof line ? (size_t)w : 0);
  }
  harp_error_clear(&e);
  free(text);
  free(path);
  return t;
}

void rt_autobox_failed(const char *cache_dir, uint64_t model_id, const char *key, const char *why) {
  char *path = record_path(cache_dir, model_id, key);
  if (!path) return;
  char line[1200];
  int w = snprintf(line, sizeof line, "failed: %.1000s\n", why ? why : "");
  harp_error e = {0};
  ut_write_file_atomic(&e, path, line, w > 0 && (size_t)w < sizeof line ? (size_t)w : 0);
  harp_error_clear(&e);
  free(path);
}
