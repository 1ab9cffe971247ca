/* machine.c — machine descriptions: NVIDIA A100 (sm80), H100 (sm90), and
 * the CPU harp runs on, detected at run time.
 * Needs: harp/plan.h.  Gives: plan_machine_gpu, plan_machine_detect_cpu,
 * plan_machine_get, plan_machine_peak.
 *
 * Sources for the GPU figures (checked against public documentation):
 *  [CG]   NVIDIA CUDA C++ Programming Guide, "Technical Specifications per
 *         Compute Capability" (CC 8.0 and 9.0): 64 K 32-bit registers per
 *         SM, 255 per thread, 64 resident warps and 32 resident blocks per
 *         SM, 1024 threads per block; shared memory per SM 164 KB (8.0) and
 *         228 KB (9.0), per block at most 163 KB (8.0) and 227 KB (9.0)
 *         with the opt-in attribute.
 *  [A100] NVIDIA A100 Tensor Core GPU Architecture whitepaper (2020) and the
 *         A100 datasheet: 108 SMs, boost 1410 MHz, 40 MB L2, 192 KB L1+SMEM
 *         per SM, 312 TFLOP/s dense FP16/BF16 tensor (FP32 accumulate),
 *         19.5 TFLOP/s FP32; HBM2e 2039 GB/s for A100-SXM4-80GB (the 40 GB
 *         part has 1555 GB/s).
 *  [H100] NVIDIA H100 Tensor Core GPU datasheet and Hopper architecture
 *         whitepaper (2022), H100 SXM5: 132 SMs, boost 1.98 GHz, 50 MB L2,
 *         256 KB L1+SMEM per SM, 989.4 TFLOP/s dense FP16/BF16 tensor
 *         (1979 with sparsity), 66.9 TFLOP/s FP32, HBM3 3.35 TB/s.
 */
#include <ctype.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harp/plan.h"

#define KiB ((int64_t)1024)
#define MiB (KiB * 1024)

static const plan_machine a100 = {
    .arch = PLAN_ARCH_SM80,
    .name = "NVIDIA A100-SXM4-80GB (sm80)",
    .sm_count = 108,
    .clock_ghz = 1.41,
    .peak_fp32 = 19.5e12,
    .peak_tc16 = 312e12,
    .mem_bw = 2039e9,
    .l1_bytes = 192 * KiB,
    .l2_bytes = 40 * MiB,
    .l3_bytes = 0,
    .smem_per_sm = 164 * KiB,
    .smem_per_cta_max = 163 * KiB,
    .regs_per_sm = 65536,
    .regs_per_thread_max = 255,
    .max_warps_per_sm = 64,
    .max_threads_per_cta = 1024,
    .max_cta_per_sm = 32,
    .warp_size = 32,
    .simd_bytes = 16,
    .fma_units = 0,
    .base_regs = 32,
};

static const plan_machine h100 = {
    .arch = PLAN_ARCH_SM90,
    .name = "NVIDIA H100-SXM5-80GB (sm90)",
    .sm_count = 132,
    .clock_ghz = 1.98,
    .peak_fp32 = 66.9e12,
    .peak_tc16 = 989.4e12,
    .mem_bw = 3350e9,
    .l1_bytes = 256 * KiB,
    .l2_bytes = 50 * MiB,
    .l3_bytes = 0,
    .smem_per_sm = 228 * KiB,
    .smem_per_cta_max = 227 * KiB,
    .regs_per_sm = 65536,
    .regs_per_thread_max = 255,
    .max_warps_per_sm = 64,
    .max_threads_per_cta = 1024,
    .max_cta_per_sm = 32,
    .warp_size = 32,
    .simd_bytes = 16,
    .fma_units = 0,
    .base_regs = 32,
};

const plan_machine *plan_machine_gpu(plan_arch arch) {
  if (arch == PLAN_ARCH_SM80) return &a100;
  if (arch == PLAN_ARCH_SM90) return &h100;
  return NULL;
}

/* ---- the CPU --------------------------------------------------------------------- */
/* First line of a small file, or "" */
static void read_line(const char *path, char *buf, size_t cap) {
  buf[0] = 0;
  FILE *f = fopen(path, "r");
  if (!f) return;
  if (!fgets(buf, (int)cap, f)) buf[0] = 0;
  fclose(f);
  buf[strcspn(buf, "\n")] = 0;
}

/* "32K" / "1024K" / "32M" -> bytes */
static int64_t parse_size(const char *s) {
  char *end;
  long long v = strtoll(s, &end, 10);
  if (v <= 0) return 0;
  if (*end == 'K') v *= 1024;
  if (*end == 'M') v *= 1024 * 1024;
  return v;
}

/* Data or unified cache of the given level from /sys, 0 if not found. */
static int64_t sys_cache(int level) {
  for (int i = 0; i < 8; i++) {
    char path[128], buf[64];
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
    read_line(path, buf, sizeof buf);
    if (!buf[0]) continue;
    if (atoi(buf) != level) continue;
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/type", i);
    read_line(path, buf, sizeof buf);
    if (strcmp(buf, "Instruction") == 0) continue;
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
    read_line(path, buf, sizeof buf);
    return parse_size(buf);
  }
  return 0;
}

static int64_t cache_size(int level, int sc_name, int64_t fallback) {
  long v = sysconf(sc_name);
  if (v > 0) return v;
  int64_t s = sys_cache(level);
  return s > 0 ? s : fallback;
}

/* "model name" from /proc/cpuinfo into name; its "@ x.yzGHz" or "cpu MHz"
 * into *ghz when found. */
static void cpuinfo(char *name, size_t cap, double *ghz) {
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f) return;
  char line[512];
  double mhz = 0;
  while (fgets(line, sizeof line, f)) {
    char *colon = strchr(line, ':');
    if (!colon) continue;
    char *val = colon + 1;
    while (*val == ' ') val++;
    val[strcspn(val, "\n")] = 0;
    if (!name[0] && (strncmp(line, "model name", 10) == 0 || strncmp(line, "Model", 5) == 0)) {
      snprintf(name, cap, "%s", val);
      const char *at = strstr(val, "@ ");
      if (at && *ghz <= 0) {
        double g = atof(at + 2);
        if (g > 0.3 && g < 10) *ghz = g;
      }
    }
    if (mhz <= 0 && strncmp(line, "cpu MHz", 7) == 0) mhz = atof(val);
  }
  fclose(f);
  if (*ghz <= 0 && mhz > 300 && mhz < 10000) *ghz = mhz / 1000;
}

void plan_machine_detect_cpu(plan_machine *m) { plan_machine_detect_cpu_at(m, 0, 0); }

void plan_machine_detect_cpu_at(plan_machine *m, double ghz_given, double bw_given) {
  memset(m, 0, sizeof *m);
  m->arch = PLAN_ARCH_CPU;
  int cores = 0;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) cores = CPU_COUNT(&set);
  if (cores <= 0) cores = (int)sysconf(_SC_NPROCESSORS_ONLN);
  if (cores <= 0) cores = 1;
  m->sm_count = cores;

  bool avx512 = false, avx2 = false, fma = false;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  avx512 = __builtin_cpu_supports("avx512f");
  avx2 = __builtin_cpu_supports("avx2");
  fma = __builtin_cpu_supports("fma");
  m->simd_bytes = avx512 ? 64 : avx2 ? 32 : 16;
  m->regs_per_thread_max = avx512 ? 32 : 16;
#elif defined(__aarch64__)
  fma = true; /* NEON: 4 fp32 lanes, 32 vector registers, FMLA */
  m->simd_bytes = 16;
  m->regs_per_thread_max = 32;
#else
  m->simd_bytes = 16;
  m->regs_per_thread_max = 16;
#endif
  m->avx512 = avx512;
  m->avx2 = avx2;
  m->fma = fma;
  /* Two FMA pipes per core is what current server cores have (Skylake-SP
   * Gold/Platinum and later, Zen); a part with one reads 2x optimistic. */
  m->fma_units = fma && (avx512 || avx2) ? 2 : 1;

  char name[160] = "";
  double ghz = ghz_given > 0 ? ghz_given : 0;
  double ghz_info = 0;
  cpuinfo(name, sizeof name, &ghz_info);
  if (ghz <= 0) {
    char buf[64];
    read_line("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq", buf, sizeof buf);
    double khz = atof(buf);
    if (khz > 3e5 && khz < 1e7) ghz = khz / 1e6;
  }
  if (ghz <= 0) ghz = ghz_info;
  if (ghz <= 0) ghz = 2.5;
  m->clock_ghz = ghz;
  snprintf(m->name, sizeof m->name, "%.60s, %d cores (cpu, %s)", name[0] ? name : "CPU", cores,
           avx512 ? "avx512" : avx2 ? "avx2" : "simd128");

  int lanes = m->simd_bytes / 4; /* fp32: the micro-kernel computes in fp32 */
  m->peak_fp32 = (double)cores * ghz * 1e9 * m->fma_units * lanes * 2;
  m->peak_tc16 = m->peak_fp32;
  /* No measurement: ~10 GB/s per core, between one and twenty channels of
   * DDR.  The knob cpu_bw_gbs (HARP_CPU_BW_GBS) states the real figure. */
  double bw = bw_given > 0 ? bw_given : 0;
  if (bw <= 0) {
    bw = 10.0 * cores;
    if (bw > 200) bw = 200;
  }
  m->mem_bw = bw * 1e9;

  m->l1_bytes = cache_size(1, _SC_LEVEL1_DCACHE_SIZE, 32 * KiB);
  m->l2_bytes = cache_size(2, _SC_LEVEL2_CACHE_SIZE, 1 * MiB);
  m->l3_bytes = cache_size(3, _SC_LEVEL3_CACHE_SIZE, 8 * MiB);
  /* The packed A and B panels of one core live in its L2 (design.md §2.8). */
  m->smem_per_sm = m->l2_bytes;
  m->smem_per_cta_max = m->l2_bytes;
  m->regs_per_sm = m->regs_per_thread_max;
  m->max_warps_per_sm = 1;
  m->max_threads_per_cta = 1;
  m->max_cta_per_sm = 1;
  m->warp_size = 1;
  m->base_regs = 0;
}

void plan_machine_get(plan_arch arch, plan_machine *out) {
  const plan_machine *g = plan_machine_gpu(arch);
  if (g)
    *out = *g;
  else
    plan_machine_detect_cpu(out);
}

double plan_machine_peak(const plan_machine *m, tiny_dtype in) {
  if (plan_arch_is_gpu(m->arch) && (in == TINY_FP16 || in == TINY_BF16)) return m->peak_tc16;
  return m->peak_fp32;
}
