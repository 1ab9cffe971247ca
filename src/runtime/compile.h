/* compile.h — C source -> shared object, with an on-disk cache. */
#ifndef HARP_COMPILE_H
#define HARP_COMPILE_H

#include <stdbool.h>

#include "harp/error.h"

/* The generated C's flags (a kernel that needs -fno-trapping-math says so
 * itself: HP_NOTRAP, rc_prelude.c). */
#define RT_CFLAGS_PORTABLE "-O3 " RT_CFLAGS_ANY
#define RT_CFLAGS_HOST "-O3 " RT_CFLAGS_NATIVE " " RT_CFLAGS_ANY
/* Their parts after the -O level (the knob cc_opt sets the level). */
#define RT_CFLAGS_ANY "-fopenmp-simd -fno-math-errno"
#define RT_CFLAGS_NATIVE "-march=native -mprefer-vector-width=512"

typedef struct rt_cc_opts {
  const char *cc;        /* NULL or "": "cc" (the knob cc) */
  const char *cflags;    /* NULL: RT_CFLAGS_PORTABLE (-fPIC -shared always added) */
  const char *cache_dir; /* NULL or "": /tmp/harp-cache-UID (the knob cache_dir) */
  bool parallel;         /* a large source: optimise it on every CPU (GCC's LTO partitions) */
  const char *cpu_id;    /* the CPU in the cache key; NULL: this one's features (tests name another) */
  int jobs;              /* processes for it (the knob cc_jobs); 0: the online CPUs */
  const char *tmpdir;    /* where a build goes when the cache is unusable (the knob tmpdir); NULL: /tmp */
} rt_cc_opts;

/* What a build gave: the object's path (malloc'd), whether it came from the
 * cache, and whether it lies in a temporary directory (the cache was not
 * usable: `warning` says why) to be removed with rt_cache_discard once
 * loaded. */
typedef struct rt_cc_result {
  char *path;
  bool hit, temp;
  char warning[512];
} rt_cc_result;

/* Compile `src` (a whole translation unit) into a shared object cached under
 * a hash of the source, the compiler, its flags and the CPU's features; a
 * cache hit (a whole entry whose checksum matches, cache.c) runs no
 * compiler, a damaged entry is rebuilt.  Each build has its own directory
 * and installs by rename, so concurrent and killed processes are safe.  With `parallel`, a source of RT_CC_PARALLEL_MIN bytes or more
 * is compiled with -flto=N (N: o->jobs, else the online CPUs; at most
 * 16; 1 turns it off): GCC then optimises and assembles its partitions in N
 * processes.  A compiler that refuses it gets the plain command again.  The
 * cache key leaves it out.  *path receives the .so path (malloc'd); *hit
 * whether it was cached. */
#define RT_CC_PARALLEL_MIN (128 * 1024)
harp_status rt_cc_build(harp_error *e, const char *src, const rt_cc_opts *o, char **path, bool *hit);
harp_status rt_cc_build_ex(harp_error *e, const char *src, const rt_cc_opts *o, rt_cc_result *r);

/* True when the cache holds a whole object for `src` built as o says (no
 * compiler runs): tier 0 starts only on a cold cache. */
bool rt_cc_cached(const char *src, const rt_cc_opts *o);


/* The cache directory in use (malloc'd). */
char *rt_cc_cache_dir(const rt_cc_opts *o);

#endif
