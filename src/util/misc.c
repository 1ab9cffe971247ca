/* misc.c — strings, checked arithmetic, half floats, files, names, hashing.
 * Needs: util.h.  Gives: the non-arena helpers of util.h. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#ifdef __linux__
#include <sys/mman.h>
#endif
#include <unistd.h>

#include "util.h"

/* ---- ut_str ------------------------------------------------------------- */
void ut_str_init(ut_str *s) { memset(s, 0, sizeof *s); }
void ut_str_free(ut_str *s) {
  free(s->buf);
  ut_str_init(s);
}

static bool str_reserve(ut_str *s, size_t extra) {
  if (s->oom) return false;
  if (s->len + extra + 1 <= s->cap) return true;
  size_t cap = s->cap ? s->cap : 256;
  while (cap < s->len + extra + 1) cap *= 2;
  char *b = ut_xrealloc(s->buf, cap);
  if (!b) {
    s->oom = true;
    return false;
  }
  s->buf = b;
  s->cap = cap;
  return true;
}

void ut_str_putc(ut_str *s, char c) {
  if (!str_reserve(s, 1)) return;
  s->buf[s->len++] = c;
  s->buf[s->len] = 0;
}

void ut_str_puts(ut_str *s, const char *t) {
  if (!t) { /* a piece whose own allocation failed: the string is incomplete */
    s->oom = true;
    return;
  }
  ut_str_putn(s, t, strlen(t));
}

void ut_str_putn(ut_str *s, const char *t, size_t n) {
  if (!str_reserve(s, n)) return;
  memcpy(s->buf + s->len, t, n);
  s->len += n;
  s->buf[s->len] = 0;
}

void ut_str_printf(ut_str *s, const char *fmt, ...) {
  va_list ap, ap2;
  va_start(ap, fmt);
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n > 0 && str_reserve(s, (size_t)n)) {
    vsnprintf(s->buf + s->len, (size_t)n + 1, fmt, ap2);
    s->len += (size_t)n;
  }
  va_end(ap2);
}

char *ut_str_take(ut_str *s) {
  char *b = s->oom ? NULL : s->buf;
  if (!b && !s->oom) {
    b = ut_xmalloc(1);
    if (b) b[0] = 0;
  }
  if (s->oom) free(s->buf);
  ut_str_init(s);
  return b;
}

/* ---- arithmetic --------------------------------------------------------- */
bool ut_mul_ok(int64_t a, int64_t b, int64_t *out) { return !__builtin_mul_overflow(a, b, out); }
bool ut_add_ok(int64_t a, int64_t b, int64_t *out) { return !__builtin_add_overflow(a, b, out); }
int64_t ut_floordiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) q--;
  return q;
}
int64_t ut_mod(int64_t a, int64_t b) { return a - ut_floordiv(a, b) * b; }
int64_t ut_gcd(int64_t a, int64_t b) {
  if (a < 0) a = -a;
  if (b < 0) b = -b;
  while (b) {
    int64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

/* ---- half floats -------------------------------------------------------- */
static uint32_t f2u(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
static float u2f(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

uint16_t ut_f32_to_f16(float f) {
  uint32_t x = f2u(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t exp = (x >> 23) & 0xffu;
  uint32_t man = x & 0x7fffffu;
  if (exp == 0xff) return (uint16_t)(sign | 0x7c00u | (man ? 0x200u | (man >> 13) : 0));
  int e = (int)exp - 127 + 15;
  if (e >= 31) return (uint16_t)(sign | 0x7c00u); /* overflow -> inf */
  if (e <= 0) {                                   /* subnormal or zero */
    if (e < -10) return (uint16_t)sign;
    man |= 0x800000u;
    int shift = 14 - e;
    uint32_t half = 1u << (shift - 1);
    uint32_t rest = man & ((1u << shift) - 1);
    uint32_t r = man >> shift;
    if (rest > half || (rest == half && (r & 1))) r++;
    return (uint16_t)(sign | r);
  }
  uint32_t r = ((uint32_t)e << 10) | (man >> 13);
  uint32_t rest = man & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (r & 1))) r++; /* may carry into exp: correct */
  return (uint16_t)(sign | r);
}

float ut_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  if (exp == 0) {
    if (man == 0) return u2f(sign);
    float v = (float)man / 16777216.0f; /* man * 2^-24 */
    return sign ? -v : v;
  }
  if (exp == 31) return u2f(sign | 0x7f800000u | (man << 13));
  return u2f(sign | ((exp - 15 + 127) << 23) | (man << 13));
}

uint16_t ut_f32_to_bf16(float f) {
  uint32_t x = f2u(f);
  if ((x & 0x7f800000u) == 0x7f800000u && (x & 0x7fffffu)) return (uint16_t)((x >> 16) | 0x40u);
  uint32_t lsb = (x >> 16) & 1u;
  x += 0x7fffu + lsb;
  return (uint16_t)(x >> 16);
}

float ut_bf16_to_f32(uint16_t h) { return u2f((uint32_t)h << 16); }

/* ---- files -------------------------------------------------------------- */
harp_status ut_read_file(harp_error *e, const char *path, size_t max_bytes, char **out, size_t *len) {
  *out = NULL;
  FILE *f = fopen(path, "rb");
  if (!f) return ut_fail_at(e, HARP_E_IO, path, 0, 0, "cannot open: %s", strerror(errno));
  struct stat st;
  bool have_st = fstat(fileno(f), &st) == 0;
  if (have_st && S_ISDIR(st.st_mode)) {
    fclose(f);
    return ut_fail_at(e, HARP_E_IO, path, 0, 0, "is a directory");
  }
  ut_str s;
  ut_str_init(&s);
  /* a regular file's size up front: one buffer, no doubling (model files
   * run to hundreds of MB) */
  if (have_st && S_ISREG(st.st_mode) && st.st_size > 0 && (size_t)st.st_size <= max_bytes) str_reserve(&s, (size_t)st.st_size);
  /* straight into the buffer while it has room (a regular file's whole
   * size: no second copy of the weights), then through buf */
  while (!s.oom && s.cap > s.len + 1 && s.len <= max_bytes) {
    size_t room = s.cap - s.len - 1;
    if (max_bytes - s.len < room) room = max_bytes - s.len + 1; /* one byte past the limit says it is over */
    size_t n = fread(s.buf + s.len, 1, room, f);
    s.len += n;
    s.buf[s.len] = 0;
    if (n == 0) break;
  }
  if (s.len > max_bytes) { /* it grew since fstat */
    fclose(f);
    ut_str_free(&s);
    return ut_fail_at(e, HARP_E_LIMIT, path, 0, 0, "file larger than %zu bytes", max_bytes);
  }
  char buf[65536];
  size_t n;
  while (!ferror(f) && (n = fread(buf, 1, sizeof buf, f)) > 0) {
    if (s.len + n > max_bytes) {
      fclose(f);
      ut_str_free(&s);
      return ut_fail_at(e, HARP_E_LIMIT, path, 0, 0, "file larger than %zu bytes", max_bytes);
    }
    if (!str_reserve(&s, n)) break;
    memcpy(s.buf + s.len, buf, n);
    s.len += n;
    s.buf[s.len] = 0;
  }
  bool err = ferror(f);
  fclose(f);
  if (err) {
    ut_str_free(&s);
    return ut_fail_at(e, HARP_E_IO, path, 0, 0, "read error");
  }
  size_t l = s.len;
  char *b = ut_str_take(&s);
  if (!b) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory reading %s", path);
  *out = b;
  if (len) *len = l;
  return HARP_OK;
}

/* The regular file at path (1 to max_bytes bytes) mapped read-only and its
 * pages populated: no anonymous copy to fault in and fill, as a read into
 * a buffer has (a model's weights: MobileNetV2 14 MB, 3.4 k page faults).
 * Anything else (no mmap, a pipe, an empty or larger file) is read by
 * ut_read_file, whose errors it returns; *mapped says which to undo. */
harp_status ut_map_file(harp_error *e, const char *path, size_t max_bytes, const char **out, size_t *len, bool *mapped) {
  *out = NULL, *len = 0, *mapped = false;
#if defined(__linux__) && defined(MAP_POPULATE)
  if (ut_fault_should_fail()) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory reading %s", path);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 && (uint64_t)st.st_size <= max_bytes) {
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    if (p != MAP_FAILED) {
      close(fd);
      *out = p, *len = (size_t)st.st_size, *mapped = true;
      return HARP_OK;
    }
  }
  if (fd >= 0) close(fd);
#endif
  char *b = NULL;
  harp_status s = ut_read_file(e, path, max_bytes, &b, len);
  *out = b;
  return s;
}

void ut_unmap_file(const char *p, size_t len, bool mapped) {
#if defined(__linux__) && defined(MAP_POPULATE)
  if (mapped) {
    munmap((void *)p, len);
    return;
  }
#endif
  (void)len, (void)mapped;
  free((void *)p);
}

harp_status ut_write_file_atomic(harp_error *e, const char *path, const void *data, size_t len) {
  size_t pl = strlen(path);
  char *tmp = ut_xmalloc(pl + 32);
  if (!tmp) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  snprintf(tmp, pl + 32, "%s.tmp.%ld", path, (long)getpid());
  /* never through a link planted at the temp name; a stale one (a killed run
   * of the same pid) is removed once */
  int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0644);
  if (fd < 0 && errno == EEXIST && unlink(tmp) == 0) fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0644);
  if (fd < 0) {
    harp_status s = ut_fail_at(e, HARP_E_IO, path, 0, 0, "cannot create: %s", strerror(errno));
    free(tmp);
    return s;
  }
  const unsigned char *p = data;
  size_t left = len;
  while (left > 0) {
    ssize_t w = ut_fault_hit(UT_FAULT_WRITE) ? (errno = ENOSPC, -1) : write(fd, p, left);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      int er = errno;
      close(fd);
      unlink(tmp);
      free(tmp);
      return ut_fail_at(e, HARP_E_IO, path, 0, 0, "write failed: %s", strerror(er));
    }
    p += w;
    left -= (size_t)w;
  }
  if (close(fd) != 0 || rename(tmp, path) != 0) {
    int er = errno;
    unlink(tmp);
    free(tmp);
    return ut_fail_at(e, HARP_E_IO, path, 0, 0, "cannot write: %s", strerror(er));
  }
  free(tmp);
  return HARP_OK;
}

harp_status ut_mkdirs(harp_error *e, const char *path) {
  char buf[4096];
  if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
    return ut_fail_at(e, HARP_E_IO, path, 0, 0, "path too long");
  for (char *p = buf + 1; *p; p++) {
    if (*p != '/') continue;
    *p = 0;
    if (mkdir(buf, 0755) != 0 && errno != EEXIST)
      return ut_fail_at(e, HARP_E_IO, path, 0, 0, "cannot create directory %s: %s", buf, strerror(errno));
    *p = '/';
  }
  if (mkdir(buf, 0755) != 0 && errno != EEXIST)
    return ut_fail_at(e, HARP_E_IO, path, 0, 0, "cannot create directory: %s", strerror(errno));
  struct stat st;
  if (stat(buf, &st) != 0 || !S_ISDIR(st.st_mode))
    return ut_fail_at(e, HARP_E_IO, path, 0, 0, "not a directory");
  return HARP_OK;
}

/* ---- names -------------------------------------------------------------- */
static bool safe_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '-';
}

bool ut_is_safe_name(const char *s) {
  if (!s || !*s || s[0] == '.' || s[0] == '-' || strlen(s) > 128) return false;
  for (; *s; s++)
    if (!safe_char(*s)) return false;
  return true;
}

void ut_sanitize_name(const char *s, char *out, size_t cap) {
  size_t k = 0;
  if (!s || !*s || s[0] == '.' || s[0] == '-' || (s[0] >= '0' && s[0] <= '9')) out[k++] = '_';
  for (; s && *s && k + 1 < cap; s++) out[k++] = (safe_char(*s) && *s != '.' && *s != '-') ? *s : '_';
  out[k] = 0;
}

uint64_t ut_hash64(const void *data, size_t n, uint64_t seed) {
  const unsigned char *p = data;
  uint64_t h = 1469598103934665603ull ^ seed;
  for (size_t i = 0; i < n; i++) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

double ut_now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

double ut_cpu_ms(void) {
#ifdef CLOCK_PROCESS_CPUTIME_ID
  struct timespec t;
  if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t) == 0) return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
#endif
  return 0;
}
