/* compile.h — C source -> shared object, with an on-disk cache. */
#ifndef HARP_COMPILE_H
#define HARP_COMPILE_H

#include <stdbool.h>

#include "harp/error.h"

/* The generated C's flags (a kernel that needs -fno-trapping-math says so
 * itself: HP_NOTRAP, rc_prelude.c). */
#define RT_CFLAGS_PORTABLE "-O3 -fopenmp-simd -fno-math-errno"
#define RT_CFLAGS_HOST "-O3 -march=native -mprefer-vector-width=512 -fopenmp-simd -fno-math-errno"

typedef struct rt_cc_opts {
  const char *cc;        /* NULL or "": "cc" (the knob cc) */
  const char *cflags;    /* NULL: RT_CFLAGS_PORTABLE (-fPIC -shared always added) */
  const char *cache_dir; /* NULL or "": /tmp/harp-cache-UID (the knob cache_dir) */
  bool parallel;         /* a large source: optimise it on every CPU (GCC's LTO partitions) */
  int jobs;              /* processes for it (the knob cc_jobs); 0: the online CPUs */
} rt_cc_opts;

/* Compile `src` (a whole translation unit) into a shared object cached under
 * a hash of the source, the compiler and its flags; a cache hit runs no
 * compiler.  Writes are atomic (temp file + rename), so concurrent processes
 * are safe.  With `parallel`, a source of RT_CC_PARALLEL_MIN bytes or more
 * is compiled with -flto=N (N: o->jobs, else the online CPUs; at most
 * 16; 1 turns it off): GCC then optimises and assembles its partitions in N
 * processes.  A compiler that refuses it gets the plain command again.  The
 * cache key leaves it out.  *path receives the .so path (malloc'd); *hit
 * whether it was cached. */
#define RT_CC_PARALLEL_MIN (128 * 1024)
harp_status rt_cc_build(harp_error *e, const char *src, const rt_cc_opts *o, char **path, bool *hit);

/* The cache directory in use (malloc'd). */
char *rt_cc_cache_dir(const rt_cc_opts *o);

#endif
