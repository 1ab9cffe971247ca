/* cpu_amx.c — whether this process may run Intel AMX-BF16 code: the CPU has
 * it (CPUID), the OS enables the tile state (XCR0), and Linux grants this
 * process the tile data (arch_prctl ARCH_REQ_XCOMP_PERM, asked once; the
 * generated code asks again through hprt_amx_ok, harmlessly).
 * Needs: util.h.  Gives: ut_cpu_amx_bf16, ut_cpu_amx_int8. */
#if defined(__linux__) && !defined(_GNU_SOURCE)
#define _GNU_SOURCE 1 /* syscall */
#endif
#include <stdbool.h>
#if defined(__linux__) && defined(__x86_64__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "util.h"

/* The check itself (once per process by ut_cpu_amx_bf16). */
static bool amx_check(void) {
#if defined(__linux__) && defined(__x86_64__)
  unsigned a, b, c, d;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d >> 22 & 1u) || !(d >> 24 & 1u)) return false; /* AMX-BF16, -TILE */
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c >> 27 & 1u)) return false;                          /* OSXSAVE */
  unsigned lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0u));
  (void)hi;
  if ((lo >> 17 & 3u) != 3u) return false; /* XTILECFG, XTILEDATA */
  return syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XFEATURE_XTILEDATA */) == 0;
#else
  return false;
#endif
}

bool ut_cpu_amx_bf16(void) {
  static int st; /* 0 unknown, 1 yes, -1 no */
  int s = __atomic_load_n(&st, __ATOMIC_ACQUIRE);
  if (!s) {
    s = amx_check() ? 1 : -1;
    __atomic_store_n(&st, s, __ATOMIC_RELEASE);
  }
  return s > 0;
}

/* AMX-INT8 (CPUID.7.0:EDX bit 25) on top of what ut_cpu_amx_bf16 checks
 * (every CPU with AMX so far has both). */
bool ut_cpu_amx_int8(void) {
#if defined(__linux__) && defined(__x86_64__)
  unsigned a, b, c, d;
  return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (d >> 25 & 1u) && ut_cpu_amx_bf16();
#else
  return false;
#endif
}
