/* cpu_amx.c — Intel AMX-BF16 on this CPU, in two steps: whether the CPU has
 * it (CPUID) and the OS enables the tile state (XCR0), which asks nothing of
 * the kernel (the compile cache's CPU key, cache.c); and whether Linux grants
 * this process the tile data (arch_prctl ARCH_REQ_XCOMP_PERM, asked once),
 * asked only where an AMX variant is compiled (ut_cpu_amx_bf16, contract_plan_c.c;
 * the generated code asks again through hprt_amx_ok where it is loaded,
 * harmlessly).  The permission covers every AMX type: AMX-INT8's detection
 * (ut_cpu_has_amx_int8) goes beside the bf16 one and shares ut_cpu_amx_permit.
 * Needs: util.h.  Gives: ut_cpu_has_amx_bf16, ut_cpu_has_amx_int8,
 * ut_cpu_amx_permit, ut_cpu_amx_bf16, ut_cpu_amx_int8. */
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

/* The answer of check() in *st (0 unknown, 1 yes, -1 no), computed once. */
static bool once(int *st, bool (*check)(void)) {
  int s = __atomic_load_n(st, __ATOMIC_ACQUIRE);
  if (!s) {
    s = check() ? 1 : -1;
    __atomic_store_n(st, s, __ATOMIC_RELEASE);
  }
  return s > 0;
}

/* CPUID's AMX-BF16 and AMX-TILE, OSXSAVE, and XCR0's tile bits: no system call. */
static bool has_check(void) {
#if defined(__linux__) && defined(__x86_64__)
  unsigned a, b, c, d;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d >> 22 & 1u) || !(d >> 24 & 1u)) return false; /* AMX-BF16, -TILE */
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c >> 27 & 1u)) return false;                          /* OSXSAVE */
  unsigned lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0u));
  (void)hi;
  return (lo >> 17 & 3u) == 3u; /* XTILECFG, XTILEDATA */
#else
  return false;
#endif
}

/* Linux's permission for the tile data (ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA). */
static bool permit_check(void) {
#if defined(__linux__) && defined(__x86_64__)
  return syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XFEATURE_XTILEDATA */) == 0;
#else
  return false;
#endif
}

bool ut_cpu_has_amx_bf16(void) {
  static int st;
  return once(&st, has_check);
}

bool ut_cpu_amx_permit(void) {
  static int st;
  return once(&st, permit_check);
}

bool ut_cpu_amx_bf16(void) { return ut_cpu_has_amx_bf16() && ut_cpu_amx_permit(); }

/* AMX-INT8 (CPUID.7.0:EDX bit 25) on top of what ut_cpu_has_amx_bf16
 * checks (every CPU with AMX so far has both); asks Linux for nothing. */
bool ut_cpu_has_amx_int8(void) {
#if defined(__linux__) && defined(__x86_64__)
  unsigned a, b, c, d;
  return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (d >> 25 & 1u) && ut_cpu_has_amx_bf16();
#else
  return false;
#endif
}

/* AMX-INT8 usable by this process: detected and the tile permission granted. */
bool ut_cpu_amx_int8(void) { return ut_cpu_has_amx_int8() && ut_cpu_amx_permit(); }
