/* harp/error.h — errors as values: the helpers the layers fill an
 * hp_error with (the vocabulary itself is harp/status.h, part of harp.h).
 *
 * A function that can fail returns `hp_fail(e, HP_E_X, node_id, fmt, ...)`;
 * the first error recorded wins until hp_error_clear(). */
#ifndef HARP_ERROR_H
#define HARP_ERROR_H

#include <stdarg.h>

#include "harp/status.h"

/* Record an error and return its code, so callers write `return hp_fail(...)`.
 * node may be NULL.  The first error wins until hp_error_clear(). */
hp_status hp_fail(hp_error *e, hp_status code, const char *node, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
hp_status hp_vfail(hp_error *e, hp_status code, const char *node, const char *fmt, va_list ap);
/* Same, with a source position. */
hp_status hp_fail_at(hp_error *e, hp_status code, const char *file, int line, int col,
                     const char *fmt, ...) __attribute__((format(printf, 6, 7)));
/* Fill e->snippet with the given source line and a caret under col. */
void hp_error_set_snippet(hp_error *e, const char *src, int line, int col);

#endif
