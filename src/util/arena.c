/* arena.c — bump allocator (one per compilation).
 * Needs: nothing.  Gives: ut_arena_*, ut_x*alloc (failing when fault.c says so), ut_release_free_memory. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __GLIBC__ /* malloc_trim */
#include <malloc.h>
#endif

#include "util.h"

typedef struct chunk {
  struct chunk *next;
  size_t size, used;
  _Alignas(16) unsigned char data[];
} chunk;

struct ut_arena {
  chunk *head;
  size_t total;
};

void *ut_xmalloc(size_t n) { return ut_fault_should_fail() ? NULL : malloc(n ? n : 1); }
void *ut_xcalloc(size_t n, size_t sz) { return ut_fault_should_fail() ? NULL : calloc(n ? n : 1, sz ? sz : 1); }
void *ut_xrealloc(void *p, size_t n) { return ut_fault_should_fail() ? NULL : realloc(p, n ? n : 1); }

void ut_release_free_memory(void) {
#ifdef __GLIBC__
  malloc_trim(0);
#endif
}

ut_arena *ut_arena_new(void) {
  ut_arena *a = ut_xcalloc(1, sizeof *a);
  return a;
}

void ut_arena_free(ut_arena *a) {
  if (!a) return;
  for (chunk *c = a->head, *n; c; c = n) {
    n = c->next;
    free(c);
  }
  free(a);
}

void *ut_arena_alloc(ut_arena *a, size_t size) {
  if (!a) return NULL;
  if (ut_fault_should_fail()) return NULL;
  size = (size + 15) & ~(size_t)15;
  if (size == 0) size = 16;
  chunk *c = a->head;
  if (!c || c->size - c->used < size) {
    size_t csize = 64 * 1024;
    if (size > csize / 4) csize = size; /* big blocks get their own chunk */
    chunk *n = malloc(sizeof *n + csize);
    if (!n) return NULL;
    n->size = csize;
    n->used = 0;
    if (c && size == csize) {
      /* keep the partly used head for small allocations */
      n->next = c->next;
      c->next = n;
    } else {
      n->next = c;
      a->head = n;
    }
    c = n;
  }
  void *p = c->data + c->used;
  c->used += size;
  a->total += size;
  memset(p, 0, size);
  return p;
}

size_t ut_arena_used(const ut_arena *a) { return a ? a->total : 0; }

char *ut_arena_strndup(ut_arena *a, const char *s, size_t n) {
  char *p = ut_arena_alloc(a, n + 1);
  if (!p) return NULL;
  memcpy(p, s, n);
  p[n] = 0;
  return p;
}

char *ut_arena_strdup(ut_arena *a, const char *s) { return s ? ut_arena_strndup(a, s, strlen(s)) : NULL; }

char *ut_arena_printf(ut_arena *a, const char *fmt, ...) {
  va_list ap, ap2;
  va_start(ap, fmt);
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  char *p = n >= 0 ? ut_arena_alloc(a, (size_t)n + 1) : NULL;
  if (p) vsnprintf(p, (size_t)n + 1, fmt, ap2);
  va_end(ap2);
  return p;
}
