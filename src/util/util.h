/* util.h — internal helpers shared by every layer: arena allocation, growable
 * strings, overflow-checked arithmetic, fp16/bf16 conversion. */
#ifndef HARP_UTIL_H
#define HARP_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "harp/error.h"

#define HP_ARRAY_LEN(a) ((int)(sizeof(a) / sizeof((a)[0])))
#define HP_MIN(a, b) ((a) < (b) ? (a) : (b))
#define HP_MAX(a, b) ((a) > (b) ? (a) : (b))

/* ---- arena: one per compilation, freed at once ------------------------- */
typedef struct hp_arena hp_arena;
hp_arena *hp_arena_new(void);
void hp_arena_free(hp_arena *a);
/* Zeroed, 16-byte aligned.  NULL on failure (real or injected). */
void *hp_arena_alloc(hp_arena *a, size_t size);
char *hp_arena_strdup(hp_arena *a, const char *s);
char *hp_arena_strndup(hp_arena *a, const char *s, size_t n);
char *hp_arena_printf(hp_arena *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
size_t hp_arena_used(const hp_arena *a);

/* Fault injection for tests: the Nth allocation from now on (1-based, across
 * all arenas and hp_xmalloc) fails; 0 disables.  Process-wide on purpose: it
 * is a test hook, not state the library reads for behaviour. */
void hp_fault_fail_nth_alloc(long n);
bool hp_fault_should_fail(void);
/* Allocations left before the injected failure (0 once it fired or when off). */
long hp_fault_remaining(void);

/* malloc/realloc that honour fault injection. */
void *hp_xmalloc(size_t n);
void *hp_xcalloc(size_t n, size_t sz);
void *hp_xrealloc(void *p, size_t n);
/* Hand freed heap pages back to the system (glibc keeps them otherwise): after a
 * large structure is freed, so the peak RSS does not carry it into later stages. */
void hp_release_free_memory(void);

/* ---- growable string ---------------------------------------------------- */
typedef struct hp_str {
  char *buf;
  size_t len, cap;
  bool oom; /* set once an append failed; the string is then truncated */
} hp_str;
void hp_str_init(hp_str *s);
void hp_str_free(hp_str *s);
void hp_str_putc(hp_str *s, char c);
void hp_str_puts(hp_str *s, const char *t);
void hp_str_putn(hp_str *s, const char *t, size_t n); /* n bytes of t (no NUL in them) */
void hp_str_printf(hp_str *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Take ownership of the buffer (never NULL unless oom); the hp_str is reset. */
char *hp_str_take(hp_str *s);

/* ---- checked arithmetic ------------------------------------------------- */
/* Return false on overflow of int64. */
bool hp_mul_ok(int64_t a, int64_t b, int64_t *out);
bool hp_add_ok(int64_t a, int64_t b, int64_t *out);
int64_t hp_floordiv(int64_t a, int64_t b); /* b > 0 */
int64_t hp_mod(int64_t a, int64_t b);      /* b > 0, result in [0, b) */
int64_t hp_gcd(int64_t a, int64_t b);      /* >= 0; hp_gcd(0, 0) = 0 */

/* ---- half precision ----------------------------------------------------- */
uint16_t hp_f32_to_f16(float f); /* round to nearest even, inf/nan kept */
float hp_f16_to_f32(uint16_t h);
uint16_t hp_f32_to_bf16(float f); /* round to nearest even */
float hp_bf16_to_f32(uint16_t h);
static inline float hp_round_f16(float f) { return hp_f16_to_f32(hp_f32_to_f16(f)); }
static inline float hp_round_bf16(float f) { return hp_bf16_to_f32(hp_f32_to_bf16(f)); }

/* ---- files -------------------------------------------------------------- */
/* Read a whole file (NUL-terminated).  Refuses files over max_bytes. */
hp_status hp_read_file(hp_error *e, const char *path, size_t max_bytes, char **out, size_t *len);
/* Write atomically: a temp file beside path, fsync'd, then rename. */
hp_status hp_write_file_atomic(hp_error *e, const char *path, const void *data, size_t len);
/* Run `cc FLAGS [extra] -fPIC -shared -o so c -lm -lpthread` (flags split on
 * blanks, no shell; stdin /dev/null, stdout and stderr into the file `log`).
 * Returns the compiler's exit status; 127: it could not be started; -1: it
 * did not exit normally; -2: more than 54 flags (spawn.c). */
int hp_run_cc(const char *cc, const char *flags, const char *extra, const char *so, const char *c, const char *log);
/* mkdir -p */
hp_status hp_mkdirs(hp_error *e, const char *path);

/* ---- names -------------------------------------------------------------- */
/* True if s is a safe identifier for a file name: [A-Za-z0-9_.-]+, not
 * starting with '.' or '-', at most 128 chars. */
bool hp_is_safe_name(const char *s);
/* Map any name to a safe file/C identifier into out (cap >= 2). */
void hp_sanitize_name(const char *s, char *out, size_t cap);

/* FNV-1a 64-bit, for content hashes and tables. */
uint64_t hp_hash64(const void *data, size_t n, uint64_t seed);

/* ---- time -------------------------------------------------------------- */
/* Monotonic wall-clock milliseconds (CLOCK_MONOTONIC). */
double hp_now_ms(void);

/* ---- string -> int map (strmap.c) ---------------------------------------- */
/* Keys are not copied: they must outlive the map.  Zero-initialised = empty. */
typedef struct hp_strmap {
  const char **keys;
  int *vals;
  int n, cap; /* cap: 0 or a power of two */
} hp_strmap;
int *hp_strmap_find(const hp_strmap *m, const char *key); /* NULL if absent (or m NULL) */
bool hp_strmap_put(hp_strmap *m, const char *key, int val); /* replaces; false on no memory */
void hp_strmap_free(hp_strmap *m);

#endif
