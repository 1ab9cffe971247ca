/* test_arena.c — the arena (src/util/arena.c) across its chunk kinds: the
 * malloc'd chunks of an arena's first MiB (and of its blocks over 16 KiB)
 * and the 2 MiB huge chunks past it (mapped, not cleared again).  Every block must come back zeroed,
 * 16-byte aligned and apart from every other (each is filled with its own
 * pattern and all are checked at the end), in arenas made one after
 * another (a freed arena's patterns must not show through) and in two
 * threads at once; blocks of several MiB get chunks of their own; huge
 * chunks slow to fault give way to malloc'd ones. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "util/util.h"

#define NBLK 4000

typedef struct blk {
  unsigned char *p;
  size_t n;
} blk;

/* A size for block i: mostly small, some of tens of KiB, a few of MiB. */
static size_t size_of(unsigned i) {
  unsigned h = i * 2654435761u;
  if (i % 997 == 13) return (size_t)(3u << 20) + h % 4096; /* a chunk of its own, over one huge page */
  if (i % 97 == 5) return 40000 + h % 30000;                 /* a malloc'd chunk of its own while small */
  return 1 + h % 3000;
}

/* Whether n bytes at p are all zero. */
static bool all_zero(const unsigned char *p, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (p[i]) return false;
  return true;
}

/* Allocate NBLK blocks from a, check each zeroed and aligned, fill it with
 * its own byte; then check that no block overwrote another.  Returns the
 * bytes handed out. */
static size_t fill_and_check(ut_arena *a, unsigned seed) {
  static _Thread_local blk b[NBLK];
  size_t total = 0;
  for (unsigned i = 0; i < NBLK; i++) {
    b[i].n = size_of(i + seed);
    b[i].p = ut_arena_alloc(a, b[i].n);
    assert_non_null(b[i].p);
    assert_int_equal((uintptr_t)b[i].p % 16, 0);
    assert_true(all_zero(b[i].p, b[i].n));
    memset(b[i].p, (int)(1 + (i + seed) % 251), b[i].n);
    total += b[i].n;
  }
  for (unsigned i = 0; i < NBLK; i++)
    for (size_t k = 0; k < b[i].n; k += 61) assert_int_equal(b[i].p[k], 1 + (i + seed) % 251);
  assert_true(ut_arena_used(a) >= total);
  return total;
}

/* Arenas past their first MiB, in turn: the freed one's memory (full of
 * patterns, reused by malloc) must not show through in the next. */
static void test_chunks(void **state) {
  (void)state;
  for (unsigned round = 0; round < 3; round++) {
    ut_arena *a = round % 2 ? ut_arena_new() : ut_arena_new_big();
    assert_non_null(a);
    assert_true(fill_and_check(a, round * 7) > (size_t)16 << 20);
    ut_arena_free(a);
  }
}

/* Blocks of 16 KiB (the largest a huge chunk takes) down to 192 bytes
 * less, each followed by a 16-byte one, over several huge chunks: whatever
 * the chunk's header takes, some end a chunk exactly or leave less room
 * than the next needs, and none may land past its chunk's mapping (a
 * crash, or another chunk's header and patterns overwritten); then 16-byte
 * blocks alone, which end each chunk exactly. */
static void test_chunk_ends(void **state) {
  (void)state;
  enum { N = 1000 };
  static unsigned char *p[2 * N];
  static size_t n[2 * N];
  ut_arena *a = ut_arena_new_big();
  assert_non_null(ut_arena_alloc(a, (size_t)1 << 20)); /* past the first MiB: huge chunks from here */
  for (int i = 0; i < 2 * N; i++) {
    n[i] = i % 2 ? 16 : 16384 - 16 * (size_t)(i / 2 % 13);
    p[i] = ut_arena_alloc(a, n[i]);
    assert_non_null(p[i]);
    assert_true(all_zero(p[i], n[i]));
    memset(p[i], 1 + i % 251, n[i]);
  }
  for (int i = 0; i < 2 * N; i++) {
    assert_int_equal(p[i][0], 1 + i % 251);
    assert_int_equal(p[i][n[i] - 1], 1 + i % 251);
    for (size_t k = 0; k < n[i]; k += 127) assert_int_equal(p[i][k], 1 + i % 251);
  }
  ut_arena_free(a);
  /* 16-byte blocks alone fill a huge chunk to its last byte */
  enum { M = 300000 };
  static unsigned char *q[M];
  a = ut_arena_new_big();
  assert_non_null(ut_arena_alloc(a, (size_t)1 << 20));
  for (int i = 0; i < M; i++) {
    q[i] = ut_arena_alloc(a, 16);
    assert_non_null(q[i]);
    assert_true(all_zero(q[i], 16));
    memset(q[i], 1 + i % 253, 16);
  }
  for (int i = 0; i < M; i++)
    for (int k = 0; k < 16; k++) assert_int_equal(q[i][k], 1 + i % 253);
  ut_arena_free(a);
}

/* How many of n fresh 16 KiB blocks of a big arena past its first MiB
 * start a mapped huge chunk (the first block after a 2 MiB boundary's
 * header; a malloc'd chunk lands there by chance 1 in 100 k). */
static int huge_starts(int n) {
  ut_arena *a = ut_arena_new_big();
  assert_non_null(ut_arena_alloc(a, (size_t)1 << 20));
  int starts = 0;
  for (int i = 0; i < n; i++) {
    unsigned char *p = ut_arena_alloc(a, 16384);
    assert_non_null(p);
    assert_true(all_zero(p, 16384));
    memset(p, 7, 16384);
    starts += ((uintptr_t)p & (((uintptr_t)2 << 20) - 1)) < 256;
  }
  ut_arena_free(a);
  return starts;
}

/* Huge chunks whose first touch is slow (the limit 0: every one) stop
 * after the first, for the process; within the limit they go on (300
 * blocks of 16 KiB span 3 chunks); ut_arena_huge_test says what it saw. */
static void test_slow_huge(void **state) {
  (void)state;
  ut_arena_huge_test(INT64_MAX);
  assert_true(huge_starts(300) >= 2);
  assert_int_equal(ut_arena_huge_test(0), 0); /* never slow under no limit */
  assert_int_equal(huge_starts(300), 1);
  assert_int_equal(huge_starts(300), 0); /* still slow: malloc only */
  assert_int_equal(ut_arena_huge_test(INT64_MAX), 1);
  assert_true(huge_starts(300) >= 2); /* forgotten: huge again */
}

static void *thread_main(void *arg) {
  ut_arena *a = ut_arena_new_big();
  if (a) fill_and_check(a, (unsigned)(uintptr_t)arg);
  ut_arena_free(a);
  return NULL;
}

/* Two threads' arenas at once, each past its first MiB. */
static void test_threads(void **state) {
  (void)state;
  pthread_t t[2];
  for (int i = 0; i < 2; i++) assert_int_equal(pthread_create(&t[i], NULL, thread_main, (void *)(uintptr_t)(11 * i + 1)), 0);
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
}

int main(void) {
  ut_arena_huge_test(INT64_MAX); /* huge chunks throughout, however slow this machine's faults */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_chunk_ends), /* first: malloc holds little freed memory yet, so big arenas map their chunks */
      cmocka_unit_test(test_slow_huge),
      cmocka_unit_test(test_chunks),
      cmocka_unit_test(test_threads),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
