/* kitems.h — definitions shared between kernels of one translation unit (kitems.c). */
#ifndef HARP_KITEMS_H
#define HARP_KITEMS_H
#include <stdbool.h>

#include "harp/error.h"
#include "util/util.h"

typedef struct cg_kitems {
  ut_arena *a;    /* the keys */
  ut_strmap seen; /* normal form of a definition -> the kernel that defines it */
  bool off;       /* a kernel defined a macro of its own: no more sharing */
  int shared;     /* definitions replaced by a #define so far */
} cg_kitems;

void cg_kitems_init(cg_kitems *t);
void cg_kitems_free(cg_kitems *t);
/* Append the text of kernel k (prefix P_k<k>) to out, each top-level
 * function or typedef that an earlier kernel defines the same way (same
 * text up to the kernel prefixes, same definitions behind the names it uses)
 * replaced by `#define P_k<k>_x P_k<j>_x`. */
harp_status cg_kitems_emit(cg_kitems *t, harp_error *e, const char *text, const char *P, int k, ut_str *out);
#endif
