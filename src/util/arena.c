/* arena.c — bump allocator (one per compilation).  An arena's first
 * MiB comes in 64 KiB chunks from malloc; past that, a big arena's
 * (ut_arena_new_big: the IndexBook, the Poly-View, region formation of a
 * whole model, tens of MB on a CNN) blocks of up to 16 KiB come from 2 MiB
 * chunks mapped on their own and offered to transparent huge pages, so
 * that a compile takes one page fault per 2 MiB instead of 512, and those
 * chunks, zero when mapped, are not cleared again; unless malloc holds
 * enough freed memory, whose pages are there already, or one such chunk
 * was slow to fault (a loaded VM: then malloc for the rest of the process).
 * Needs: nothing.  Gives: ut_arena_* (ut_arena_huge_test for the tests), ut_x*alloc (failing when fault.c says so), ut_release_free_memory. */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef __GLIBC__ /* malloc_trim */
#include <malloc.h>
#endif

#ifdef __linux__
#include <sys/mman.h>
#endif

#include "util.h"

typedef struct chunk {
  struct chunk *next;
  size_t size, used;
  size_t mapped; /* bytes mapped for the chunk (header included), 0: malloc'd */
  _Alignas(16) unsigned char data[];
} chunk;

#define SMALL_CHUNK ((size_t)64 * 1024)
#define HUGE_PAGE ((size_t)2 * 1024 * 1024)
#define HUGE_AFTER ((size_t)1024 * 1024) /* an arena's bytes before its chunks are huge */
/* A huge chunk's first touch (one 2 MiB fault, clearing it) that takes more
 * CPU than this marks huge pages slow for the process: 0.1-0.16 ms on a
 * quiet machine, 512 faults of 4 KiB about 0.4 ms; on a loaded VM some
 * took 5 ms (PP-OCRv4 det: 120 ms of its main thread's 380 in clear_page). */
#define HUGE_SLOW_NS ((int64_t)600 * 1000)

static int64_t huge_limit_ns = HUGE_SLOW_NS; /* the tests' ut_arena_huge_test */
static _Atomic int huge_slow; /* 1: a huge chunk was slow to fault; malloc from then on */

struct ut_arena {
  chunk *head;
  size_t total;
  bool big; /* ut_arena_new_big's: huge chunks past the first MiB */
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

ut_arena *ut_arena_new_big(void) {
  ut_arena *a = ut_arena_new();
  if (a) a->big = true;
  return a;
}

/* Free chunk c, however it was made. */
static void chunk_free(chunk *c) {
#ifdef __linux__
  if (c->mapped) {
    munmap(c, c->mapped);
    return;
  }
#endif
  free(c);
}

void ut_arena_free(ut_arena *a) {
  if (!a) return;
  for (chunk *c = a->head, *n; c; c = n) {
    n = c->next;
    chunk_free(c);
  }
  free(a);
}

/* Whether malloc holds freed memory enough for a few chunks (its pages
 * touched already: cheaper than fresh huge pages). */
static bool heap_has_room(void) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 33)
  return mallinfo2().fordblks >= 4 * HUGE_PAGE;
#else
  return false;
#endif
}

/* The calling thread's CPU time in ns (0 where there is no such clock). */
static int64_t thread_cpu_ns(void) {
#ifdef CLOCK_THREAD_CPUTIME_ID
  struct timespec ts;
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0) return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
#endif
  return 0;
}

int ut_arena_huge_test(int64_t limit_ns) {
  int was = atomic_exchange_explicit(&huge_slow, 0, memory_order_relaxed);
  huge_limit_ns = limit_ns < 0 ? HUGE_SLOW_NS : limit_ns;
  return was;
}

/* A chunk with room for at least `size` bytes for arena a: malloc'd (64
 * KiB, or a block over 16 KiB alone) unless a is big (ut_arena_new_big),
 * past its first MiB, the block small and huge pages not found slow: then
 * one 2 MiB page mapped at a 2 MiB boundary and advised huge (Linux; mapped
 * memory is zero, so such chunks skip the clearing), its first touch timed
 * (HUGE_SLOW_NS); NULL when out of memory.  Big blocks, and other
 * arenas, stay with malloc (which reuses memory freed before): with every
 * arena and block mapped, ResNet-50 took 4-7% more CPU to its first result. */
static chunk *chunk_new(size_t size, const ut_arena *a) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (a->big && a->total >= HUGE_AFTER && size <= SMALL_CHUNK / 4 && !atomic_load_explicit(&huge_slow, memory_order_relaxed) &&
      !heap_has_room()) {
    unsigned char *p = mmap(NULL, 2 * HUGE_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p != MAP_FAILED) {
      size_t lead = (HUGE_PAGE - ((uintptr_t)p & (HUGE_PAGE - 1))) & (HUGE_PAGE - 1);
      if (lead) munmap(p, lead);
      munmap(p + lead + HUGE_PAGE, HUGE_PAGE - lead);
      chunk *n = (chunk *)(p + lead);
      madvise(n, HUGE_PAGE, MADV_HUGEPAGE); /* advice: 4 KiB pages if refused */
      int64_t t = thread_cpu_ns();
      *(volatile size_t *)&n->size = HUGE_PAGE - sizeof(chunk); /* the first touch: the fault */
      if (thread_cpu_ns() - t >= huge_limit_ns) atomic_store_explicit(&huge_slow, 1, memory_order_relaxed);
      n->mapped = HUGE_PAGE;
      return n;
    }
  }
#endif
  (void)a;
  size_t csize = size > SMALL_CHUNK / 4 ? size : SMALL_CHUNK; /* big blocks get their own chunk */
  chunk *n = malloc(sizeof *n + csize);
  if (!n) return NULL;
  n->size = csize;
  n->mapped = 0;
  return n;
}

void *ut_arena_alloc(ut_arena *a, size_t size) {
  if (!a) return NULL;
  if (ut_fault_should_fail()) return NULL;
  size = (size + 15) & ~(size_t)15;
  if (size == 0) size = 16;
  chunk *c = a->head;
  if (!c || c->size - c->used < size) {
    chunk *n = chunk_new(size, a);
    if (!n) return NULL;
    n->used = 0;
    if (c && size == n->size) {
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
  if (!c->mapped) memset(p, 0, size); /* a mapped chunk is zero where it was never handed out */
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
