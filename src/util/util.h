/* util.h — internal helpers shared by every layer: arena allocation, growable
 * strings, overflow-checked arithmetic, fp16/bf16 conversion. */
#ifndef HARP_UTIL_H
#define HARP_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "harp/error.h"

#define UT_ARRAY_LEN(a) ((int)(sizeof(a) / sizeof((a)[0])))
#define UT_MIN(a, b) ((a) < (b) ? (a) : (b))
#define UT_MAX(a, b) ((a) > (b) ? (a) : (b))

/* ---- arena: one per compilation, freed at once ------------------------- */
typedef struct ut_arena ut_arena;
ut_arena *ut_arena_new(void);
/* An arena expected to reach MBs (a whole model's analysis): past its
 * first MiB, small blocks from 2 MiB chunks on transparent huge pages. */
ut_arena *ut_arena_new_big(void);
void ut_arena_free(ut_arena *a);
/* Zeroed, 16-byte aligned.  NULL on failure (real or injected). */
void *ut_arena_alloc(ut_arena *a, size_t size);
char *ut_arena_strdup(ut_arena *a, const char *s);
char *ut_arena_strndup(ut_arena *a, const char *s, size_t n);
char *ut_arena_printf(ut_arena *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
size_t ut_arena_used(const ut_arena *a);
/* Tests: forget that huge chunks were found slow (returns whether they
 * were) and time their first touch against limit_ns (< 0: the default). */
int ut_arena_huge_test(int64_t limit_ns);

/* Fault injection for tests: the Nth allocation from now on (1-based, across
 * all arenas and ut_xmalloc) fails; 0 disables.  Process-wide on purpose: it
 * is a test hook, not state the library reads for behaviour. */
void ut_fault_fail_nth_alloc(long n);
bool ut_fault_should_fail(void);
/* Allocations left before the injected failure (0 once it fired or when off). */
long ut_fault_remaining(void);
/* The same for every kind of fault (fault.c): allocations (ut_x*alloc, arenas),
 * file writes (ut_write_file_atomic, the compile cache's files) and child
 * processes (ut_run_cc: it then reports that the compiler could not start). */
typedef enum ut_fault_kind { UT_FAULT_ALLOC, UT_FAULT_WRITE, UT_FAULT_SPAWN, UT_FAULT_KINDS } ut_fault_kind;
void ut_fault_fail_nth(ut_fault_kind k, long n); /* 0: off */
bool ut_fault_hit(ut_fault_kind k);              /* one event of kind k: true if it must fail */
long ut_fault_left(ut_fault_kind k);             /* events before the failure (0: fired or off) */

/* malloc/realloc that honour fault injection. */
void *ut_xmalloc(size_t n);
void *ut_xcalloc(size_t n, size_t sz);
void *ut_xrealloc(void *p, size_t n);
/* Hand freed heap pages back to the system (glibc keeps them otherwise): after a
 * large structure is freed, so the peak RSS does not carry it into later stages. */
void ut_release_free_memory(void);

/* ---- growable string ---------------------------------------------------- */
typedef struct ut_str {
  char *buf;
  size_t len, cap;
  bool oom; /* set once an append failed; the string is then truncated */
} ut_str;
void ut_str_init(ut_str *s);
void ut_str_free(ut_str *s);
void ut_str_putc(ut_str *s, char c);
void ut_str_puts(ut_str *s, const char *t);
void ut_str_putn(ut_str *s, const char *t, size_t n); /* n bytes of t (no NUL in them) */
void ut_str_printf(ut_str *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Take ownership of the buffer (never NULL unless oom); the ut_str is reset. */
char *ut_str_take(ut_str *s);

/* ---- the CPU (cpu_amx.c) -------------------------------------------------- */
/* The CPU has Intel AMX-BF16 and the OS enables the tile state (CPUID,
 * XCR0): no system call, no permission asked (the compile cache's key). */
bool ut_cpu_has_amx_bf16(void);
/* Linux grants this process the AMX tile data (arch_prctl, requested once,
 * here; false off Linux x86-64): only where AMX code is compiled. */
bool ut_cpu_amx_permit(void);
/* This process may run Intel AMX-BF16 code: ut_cpu_has_amx_bf16, then
 * ut_cpu_amx_permit. */
bool ut_cpu_amx_bf16(void);
/* The CPU has AMX-INT8 (tdpbusd) as well (detection only, as above). */
bool ut_cpu_has_amx_int8(void);
/* This process may run AMX-INT8 code: ut_cpu_has_amx_int8, then
 * ut_cpu_amx_permit. */
bool ut_cpu_amx_int8(void);

/* ---- checked arithmetic ------------------------------------------------- */
/* Return false on overflow of int64. */
bool ut_mul_ok(int64_t a, int64_t b, int64_t *out);
bool ut_add_ok(int64_t a, int64_t b, int64_t *out);
int64_t ut_floordiv(int64_t a, int64_t b); /* b > 0 */
int64_t ut_mod(int64_t a, int64_t b);      /* b > 0, result in [0, b) */
int64_t ut_gcd(int64_t a, int64_t b);      /* >= 0; ut_gcd(0, 0) = 0 */

/* ---- half precision ----------------------------------------------------- */
uint16_t ut_f32_to_f16(float f); /* round to nearest even, inf/nan kept */
float ut_f16_to_f32(uint16_t h);
uint16_t ut_f32_to_bf16(float f); /* round to nearest even */
float ut_bf16_to_f32(uint16_t h);
static inline float ut_round_f16(float f) { return ut_f16_to_f32(ut_f32_to_f16(f)); }
static inline float ut_round_bf16(float f) { return ut_bf16_to_f32(ut_f32_to_bf16(f)); }

/* ---- files -------------------------------------------------------------- */
/* Read a whole file (NUL-terminated).  Refuses files over max_bytes. */
harp_status ut_read_file(harp_error *e, const char *path, size_t max_bytes, char **out, size_t *len);
/* A whole file's bytes (not NUL-terminated): a regular file mapped
 * read-only where the system can (*mapped), else read as ut_read_file
 * does; ut_unmap_file(*out, *len, *mapped) releases either. */
harp_status ut_map_file(harp_error *e, const char *path, size_t max_bytes, const char **out, size_t *len, bool *mapped);
void ut_unmap_file(const char *p, size_t len, bool mapped);
/* Write atomically: a temp file beside path, fsync'd, then rename. */
harp_status ut_write_file_atomic(harp_error *e, const char *path, const void *data, size_t len);
/* Run `cc FLAGS [extra] -fPIC -shared -o so c -lm -lpthread` (flags split on
 * blanks, no shell; stdin /dev/null, stdout and stderr into the file `log`).
 * Returns the compiler's exit status; 127: it could not be started; -1: it
 * did not exit normally; -2: more than 54 flags (spawn.c). */
int ut_run_cc(const char *cc, const char *flags, const char *extra, const char *so, const char *c, const char *log);
/* mkdir -p */
harp_status ut_mkdirs(harp_error *e, const char *path);

/* ---- names -------------------------------------------------------------- */
/* True if s is a safe identifier for a file name: [A-Za-z0-9_.-]+, not
 * starting with '.' or '-', at most 128 chars. */
bool ut_is_safe_name(const char *s);
/* Map any name to a safe file/C identifier into out (cap >= 2). */
void ut_sanitize_name(const char *s, char *out, size_t cap);

/* FNV-1a 64-bit, for content hashes and tables. */
uint64_t ut_hash64(const void *data, size_t n, uint64_t seed);

/* ---- time -------------------------------------------------------------- */
/* Monotonic wall-clock milliseconds (CLOCK_MONOTONIC). */
double ut_now_ms(void);
/* The process's CPU time in milliseconds, all its threads (CLOCK_PROCESS_CPUTIME_ID;
 * 0 where there is no such clock): time the other processes take from it is not counted. */
double ut_cpu_ms(void);

/* ---- string -> int map (strmap.c) ---------------------------------------- */
/* Keys are not copied: they must outlive the map.  Zero-initialised = empty. */
typedef struct ut_strmap {
  const char **keys;
  int *vals;
  int n, cap; /* cap: 0 or a power of two */
} ut_strmap;
int *ut_strmap_find(const ut_strmap *m, const char *key); /* NULL if absent (or m NULL) */
bool ut_strmap_put(ut_strmap *m, const char *key, int val); /* replaces; false on no memory */
void ut_strmap_free(ut_strmap *m);

#endif
