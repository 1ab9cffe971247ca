/* fault.c — test-only fault injection, SQLite style: the Nth allocation,
 * the Nth file write or the Nth child process (the C compiler) from now on
 * fails, once.  Needs: nothing.  Gives: ut_fault_* (util.h).
 *
 * The library never sets these; tests do (tests/unit/test_fault_compile.c
 * steps N = 1, 2, ... through whole compiles until no fault fires).  The
 * counters are process-wide atomics: a hook, not behaviour. */
#include <stdatomic.h>

#include "util.h"

static _Atomic long countdown[UT_FAULT_KINDS];

void ut_fault_fail_nth(ut_fault_kind k, long n) { atomic_store_explicit(&countdown[k], n > 0 ? n : 0, memory_order_relaxed); }

/* One event of kind k happened: true when it is the one to fail.  A plain
 * load first, so the common case (off) writes nothing. */
bool ut_fault_hit(ut_fault_kind k) {
  if (atomic_load_explicit(&countdown[k], memory_order_relaxed) <= 0) return false;
  return atomic_fetch_sub_explicit(&countdown[k], 1, memory_order_relaxed) == 1;
}

long ut_fault_left(ut_fault_kind k) {
  long n = atomic_load_explicit(&countdown[k], memory_order_relaxed);
  return n > 0 ? n : 0;
}

/* The allocation hook's original names (arena.c and older tests use them). */
void ut_fault_fail_nth_alloc(long n) { ut_fault_fail_nth(UT_FAULT_ALLOC, n); }
bool ut_fault_should_fail(void) { return ut_fault_hit(UT_FAULT_ALLOC); }
long ut_fault_remaining(void) { return ut_fault_left(UT_FAULT_ALLOC); }
