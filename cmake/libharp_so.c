/* libharp_so.c — libharp.so's own translation unit: the library is
 * libharp.a's objects, linked whole (cmake/shared.cmake); this file only
 * gives the shared library target a source.
 * Needs: nothing.  Gives: nothing exported. */
#include "harp.h"

static const char *harp_so_note __attribute__((unused)) = "libharp.so: the public API of harp.h";
