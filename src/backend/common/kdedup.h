/* kdedup.h — kernels of one translation unit that are the same code (kdedup.c). */
#ifndef HARP_KDEDUP_H
#define HARP_KDEDUP_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "harp/error.h"
#include "util/util.h"

typedef struct cg_kform {
  char *norm; /* the normalized text */
  size_t len;
  uint64_t hash;
  int *order; /* j-th buffer first indexed in the text -> its bufs[] (parameter) index */
  int norder;
  bool matchable; /* bufs only as bufs[<literal>] or the whole array */
} cg_kform;

/* The normal form of kernel `fn`'s text.  params == NULL: the C kernels'
 * buffers, bufs[<literal>]; else the names of the kernel's nparams buffer
 * parameters (CUDA), every one of them in `order`. */
harp_status cg_kform_make(const char *text, const char *fn, const char *const *params, int nparams, harp_error *e,
                        cg_kform *out);
void cg_kform_free(cg_kform *k);
/* Same code, up to names and the order of the buffers. */
bool cg_kform_same(const cg_kform *a, const cg_kform *b);
/* `#define fn_x to_x` for every symbol of kernel fn named in its text. */
void cg_kform_aliases(ut_str *out, const char *text, const char *fn, const char *to);
#endif
