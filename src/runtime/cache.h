/* cache.h — the compile cache's directory and entries (cache.c). */
#ifndef HARP_CACHE_H
#define HARP_CACHE_H

#include <stdbool.h>
#include <stddef.h>

#include "harp/error.h"

#define RT_CACHE_TRAILER 24 /* "HARPSUM1", the object's size, its hash */

/* One build: a private directory for its files, in the cache or (when the
 * cache cannot be used) under $TMPDIR, with the reason in `warning`. */
typedef struct rt_cache_build {
  char work[4200];
  bool temp;
  char warning[512];
} rt_cache_build;

/* This CPU's features ("x86,avx2,fma,..."), for cache keys. */
void rt_cache_cpu_id(char *buf, size_t cap);
/* Make `dir` the user's private cache (0700, not a symlink, not writable by
 * others) and a build directory in it; else a temporary one, b->temp set
 * and b->warning saying why.  Fails only when neither can be had. */
harp_status rt_cache_begin(harp_error *e, const char *dir, const char *tmp, rt_cache_build *b);
/* A build directory under tmp (the knob tmpdir; NULL: /tmp) instead (the cache refused a file: full,
 * read-only), b->warning naming `why`. */
harp_status rt_cache_begin_temp(harp_error *e, const char *dir, const char *tmp, const char *why, rt_cache_build *b);
/* Remove the build directories in the cache `dir` of this host's processes
 * that are gone (killed mid-compile). */
void rt_cache_sweep(const char *dir);
/* Remove the build directory and its files (unless keep: a failed compile's
 * source and log, named in its error). */
void rt_cache_end(rt_cache_build *b, bool keep);
/* Append the checksum trailer to a compiled object. */
harp_status rt_cache_seal(harp_error *e, const char *so);
/* True if `so` is a whole, sealed entry: a regular file of ours (not a
 * symlink) whose trailer matches its size and hash. */
bool rt_cache_verify(const char *so);
/* Rename a sealed object into its entry (atomic). */
harp_status rt_cache_install(harp_error *e, const char *built, const char *entry);
/* Remove a temporary build's object and its directory (after dlopen). */
void rt_cache_discard(const char *so);

#endif
