/* compile.h — C source -> shared object, with an on-disk cache. */
#ifndef HARP_COMPILE_H
#define HARP_COMPILE_H

#include <stdbool.h>

#include "harp/error.h"

typedef struct hp_cc_opts {
  const char *cc;        /* NULL: $CC, else "cc" */
  const char *cflags;    /* NULL: $HARP_CFLAGS, else "-O3" (-fPIC -shared always added) */
  const char *cache_dir; /* NULL: $HARP_CACHE_DIR, else $XDG_CACHE_HOME/harp, else ~/.cache/harp */
} hp_cc_opts;

/* Compile `src` (a whole translation unit) into a shared object cached under
 * a hash of the source, the compiler and its flags; a cache hit runs no
 * compiler.  Writes are atomic (temp file + rename), so concurrent processes
 * are safe.  *path receives the .so path (malloc'd); *hit whether it was
 * cached. */
hp_status hp_cc_build(hp_error *e, const char *src, const hp_cc_opts *o, char **path, bool *hit);

/* The cache directory in use (malloc'd). */
char *hp_cc_cache_dir(const hp_cc_opts *o);

#endif
