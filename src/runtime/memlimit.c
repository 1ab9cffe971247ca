/* memlimit.c — sizes refused before anything is allocated for them: a
 * model's arena beyond the memory cap (--max-memory, harp_options.max_memory;
 * by default the machine's memory) and generated C beyond RT_MAX_SOURCE.
 * Needs: harp/function.h.  Gives: rt_memory_cap, rt_check_memory,
 * rt_check_source (memlimit.h). */
#include <stdio.h>
#include <unistd.h>

#include "harp/function.h"
#include "memlimit.h"
#include "util/util.h"

uint64_t rt_memory_cap(uint64_t asked) {
  if (asked) return asked;
  long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
  return pages > 0 && size > 0 ? (uint64_t)pages * (uint64_t)size : UINT64_MAX;
}

/* Bytes as "1.5 GiB" into buf. */
static const char *human(uint64_t n, char *buf, size_t cap) {
  static const char *const unit[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = (double)n;
  int u = 0;
  while (v >= 1024 && u < 6) v /= 1024, u++;
  snprintf(buf, cap, u ? "%.1f %s" : "%.0f %s", v, unit[u]);
  return buf;
}

harp_status rt_check_memory(harp_error *e, const fn_function *f, uint64_t max_memory) {
  uint64_t cap = rt_memory_cap(max_memory), need = (uint64_t)f->required_memory + (uint64_t)f->const_bytes;
  if (need < f->required_memory) need = UINT64_MAX; /* overflow */
  if (need <= cap) return HARP_OK;
  char a[32], w[32], c[32], k[32];
  return ut_fail(e, HARP_E_LIMIT, NULL,
                 "an instance of this model needs %s (arena %s, weights %s), more than the memory cap of %s "
                 "(%s): raise --max-memory (harp_options.max_memory) or bind smaller shapes (--sym, --shape)",
                 human(need, a, sizeof a), human(f->required_memory, c, sizeof c), human(f->const_bytes, w, sizeof w),
                 human(cap, k, sizeof k), max_memory ? "as set" : "this machine's memory");
}

harp_status rt_check_source(harp_error *e, size_t bytes, int nkernels) {
  if (bytes <= RT_MAX_SOURCE && nkernels <= RT_MAX_KERNELS) return HARP_OK;
  char b[32];
  return ut_fail(e, HARP_E_LIMIT, NULL,
                 "the generated C would be %s in %d kernels (at most %s and %d are compiled): bind smaller shapes "
                 "(--sym, --shape) or split the model",
                 human(bytes, b, sizeof b), nkernels, "256 MiB", RT_MAX_KERNELS);
}
