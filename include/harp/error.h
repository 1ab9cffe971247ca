/* harp/error.h — errors as values: the helpers the layers fill an
 * harp_error with (the vocabulary itself is harp/status.h, part of harp.h).
 *
 * A function that can fail returns `ut_fail(e, HARP_E_X, node_id, fmt, ...)`;
 * the first error recorded wins until harp_error_clear(). */
#ifndef HARP_ERROR_H
#define HARP_ERROR_H

#include <stdarg.h>

#include "harp/status.h"

/* Record an error and return its code, so callers write `return ut_fail(...)`.
 * node may be NULL.  The first error wins until harp_error_clear(). */
harp_status ut_fail(harp_error *e, harp_status code, const char *node, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
harp_status ut_vfail(harp_error *e, harp_status code, const char *node, const char *fmt, va_list ap);
/* Same, with a source position. */
harp_status ut_fail_at(harp_error *e, harp_status code, const char *file, int line, int col,
                     const char *fmt, ...) __attribute__((format(printf, 6, 7)));
/* Fill e->snippet with the given source line and a caret under col. */
void ut_error_set_snippet(harp_error *e, const char *src, int line, int col);

#endif
