/* hk_sim.h — a CPU SIMT simulator for harp's generated CUDA C (tests only).
 *
 * Force-included (g++ -DHK_SIM -include hk_sim.h) in front of the very text
 * cuda_print emits; the printer's prelude is #ifndef HK_SIM, so the kernels
 * call the emulations below instead of inline PTX.  Every CUDA thread is a
 * ucontext fiber; the CTAs of a grid run one after another.
 *
 * What is emulated, from the PTX ISA (9.7.14.5.8 mma.m16n8k16 fragments,
 * 9.7.14.5.15 ldmatrix, 9.7.9.25 cp.async):
 *   - bar.sync (__syncthreads) over all threads of the CTA;
 *   - warp collectives (ldmatrix, mma.sync, shfl.bfly): all 32 lanes must
 *     arrive with the same op, then it is computed from every lane's operands;
 *   - cp.async really is asynchronous: copies are queued per thread and land
 *     only at cp.async.wait_group (a missing wait reads stale SMEM);
 *   - SMEM starts poisoned with 0xFF bytes (NaN in fp16/bf16/fp32);
 *   - every SMEM and global access goes through a helper that checks bounds
 *     (SMEM size; the registered global buffers) and alignment;
 *   - the fiber order is shuffled at every synchronisation point (seeded),
 *     so a missing barrier shows as a wrong result;
 *   - ldmatrix bank conflicts are counted: per 8x8 matrix, the 8 row
 *     addresses should fall in 8 distinct 16-byte bank groups;
 *   - the dynamic shared memory starts at a 128-byte but never 1024-byte
 *     aligned address (below it: the reserved window, out of bounds), so a
 *     kernel that needs 1024-byte alignment must round up itself.
 * The SM90 part (mbarrier, TMA, wgmma, setmaxnreg) is described below.
 * Errors print "hk_sim: error: ..." and exit(3). */
#ifndef HK_SIM_H
#define HK_SIM_H

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

#include <algorithm>
#include <vector>

#define HK_TYPES /* the printed prelude's types are defined here */
typedef unsigned short hk_u16;
typedef unsigned int hk_u32;
typedef unsigned long long hk_u64;
typedef long long hk_i64;
struct hk_v2 {
  hk_u32 x, y;
};
struct hk_v4 {
  hk_u32 x, y, z, w;
};
struct alignas(64) hk_tmap {
  hk_u64 v[16];
};
typedef hk_u32 hk_saddr; /* byte offset into the CTA's shared memory */

#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __grid_constant__
#define __align__(n) alignas(n)
#define HK_DEV static inline

namespace hks {

struct dim3s {
  unsigned x, y, z;
};

struct CpAsync {
  hk_u32 dst;
  const unsigned char *src;
  int size, src_bytes;
};

struct Fiber {
  ucontext_t ctx;
  char *stack;
  dim3s tidx;
  unsigned tid;
  bool done;
  std::vector<CpAsync> open;                /* not yet committed */
  std::vector<std::vector<CpAsync>> groups; /* committed, oldest first */
  /* wgmma (tracked by each warpgroup's thread 0): the SMEM operand bytes an
   * MMA read, to be re-checked when wgmma.wait_group retires its group */
  std::vector<hk_u64> wg_open;                /* hashes, not yet committed */
  std::vector<std::vector<hk_u64>> wg_groups; /* committed, oldest first */
  /* this thread's wgmma accumulators in flight: they land at the
   * wgmma.wait_group that retires their group (NaN until then) */
  struct AccPend {
    float *d;
    int n;
    float v[128];
  };
  std::vector<AccPend> acc_open;
  std::vector<std::vector<AccPend>> acc_groups;
  bool wg_fenced; /* a wgmma.fence since the start or the last wgmma.wait_group */
  /* TMA stores (bulk groups): the SMEM source must stay unchanged until
   * cp.async.bulk.wait_group.read retires the group */
  struct BulkRead {
    hk_u32 s, n;
    hk_u64 hash;
  };
  std::vector<BulkRead> bulk_open;
  std::vector<std::vector<BulkRead>> bulk_groups;
  hk_u32 fence_stamp; /* g->stamp at this thread's last fence.proxy.async */
  const char *at;     /* what it waits for, while it waits */
  void reset() {
    done = false;
    open.clear(), groups.clear();
    wg_open.clear(), wg_groups.clear();
    acc_open.clear(), acc_groups.clear();
    wg_fenced = false;
    bulk_open.clear(), bulk_groups.clear();
    fence_stamp = 0;
    at = nullptr;
  }
};

/* Per-lane operands and results of a warp collective. */
struct Slot {
  int op;
  hk_u32 addr;
  hk_u32 a[4], b[2], r[4];
  float c[4], f;
  int i;
};

struct Warp {
  int arrived;
  unsigned gen;
  Slot s[32];
};

/* mbarrier state (PTX ISA 9.7.13.15): a phase completes when its pending
 * arrivals reach 0 and its transaction count is 0. */
struct Mbar {
  hk_u32 addr;
  int count, pending;
  long long tx;
  unsigned phase; /* completed phases */
  unsigned init_tid;
  bool fenced; /* its initialising thread ran fence.mbarrier_init / fence.proxy.async since */
};

/* setmaxnreg state of one warp (PTX ISA: setmaxnreg). */
struct WarpRegs {
  int regs;      /* per-thread registers the warp owns */
  int lanes;     /* lanes arrived at the current setmaxnreg */
  int passed;    /* lanes through it */
  int target;    /* its imm-reg-count, * 2 + (inc) */
  bool granted;  /* the warp's registers were moved to / from the pool */
  unsigned seq;  /* setmaxnreg instructions completed */
};

struct NamedBar {
  int arrived;
  unsigned gen;
};

/* Per-warpgroup collective (wgmma) state. */
struct WgSlot {
  hk_u64 da, db;
  int scale_d, op;
  float d[128];
};
struct Wg {
  int arrived;
  unsigned gen;
  WgSlot s[128];
};

struct Buf {
  const unsigned char *p;
  size_t n;
  const char *name;
};

struct Sim {
  dim3s grid, block, bidx;
  bool reverse_ctas; /* run the CTAs last to first (job line `reverse`): results must not depend on CTA order */
  std::vector<unsigned char> smem;
  std::vector<Fiber> f;
  std::vector<Warp> warps;
  std::vector<Buf> bufs;
  std::vector<Mbar> mbars;
  NamedBar named[16];
  std::vector<Wg> wgs;
  hk_u32 smem_base; /* the dynamic shared memory's address: 128-aligned, never 1024-aligned */
  /* generic-proxy writes (st.shared) not yet behind a fence.proxy.async of
   * their thread: per byte, writer tid + 1 (0: none) and the write's stamp */
  std::vector<unsigned short> gw_tid;
  std::vector<hk_u32> gw_stamp;
  hk_u32 stamp;
  /* setmaxnreg: the kernel's __launch_bounds__ (from the thunk), the CTA's
   * register pool, each warp's registers, each warpgroup's sequence */
  int lb_threads, lb_blocks, reg_pool;
  std::vector<WarpRegs> wregs;
  std::vector<std::vector<int>> wg_nreg;
  ucontext_t sched;
  int cur;
  int bar_arrived;
  unsigned bar_gen;
  bool progress;
  unsigned long long rng;
  void *thunk_fn;
  void **params;
  /* statistics */
  unsigned long long ldsm, ldsm_conflicts, mma, cp_bytes, barriers, wgmma, tma_bytes;
  const char *kernel;
};

extern Sim *g;

[[noreturn]] static inline void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline void fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "hk_sim: error: kernel %s, block (%u,%u,%u), thread %d: ", g->kernel ? g->kernel : "?", g->bidx.x,
          g->bidx.y, g->bidx.z, g->cur >= 0 ? (int)g->f[g->cur].tid : -1);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(3);
}

static inline Fiber &me() { return g->f[g->cur]; }
/* give the scheduler back the CPU; `at` names what the thread waits for (a
 * deadlock report lists it) */
static inline void yield(const char *at = "?") {
  g->f[g->cur].at = at;
  swapcontext(&g->f[g->cur].ctx, &g->sched);
  g->f[g->cur].at = nullptr;
}

/* ---- memory checks ---- */
static inline void check_smem(hk_u32 a, int n, int align, const char *what) {
  if ((size_t)a + (size_t)n > g->smem.size()) fail("%s: shared address %u+%d beyond %zu bytes", what, a, n, g->smem.size());
  if (a < g->smem_base) fail("%s: shared address %u below the dynamic shared memory (it starts at %u)", what, a, g->smem_base);
  if (a % (hk_u32)align) fail("%s: shared address %u not %d-byte aligned", what, a, align);
}
static inline void check_gmem(const void *p, size_t n, size_t align, const char *what) {
  const unsigned char *q = (const unsigned char *)p;
  if ((uintptr_t)q % align) fail("%s: global address %p not %zu-byte aligned", what, p, align);
  for (const Buf &b : g->bufs)
    if (q >= b.p && q + n <= b.p + b.n) return;
  fail("%s: global access %p+%zu outside every buffer", what, p, n);
}

/* ---- half precision (round to nearest even) ---- */
static inline float u2f(hk_u32 u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static inline hk_u32 f2u(float f) {
  hk_u32 u;
  memcpy(&u, &f, 4);
  return u;
}
static inline float h2f(hk_u16 h) {
  hk_u32 sign = (hk_u32)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  if (exp == 0) {
    float v = (float)man / 16777216.0f;
    return sign ? -v : v;
  }
  if (exp == 31) return u2f(sign | 0x7f800000u | (man << 13));
  return u2f(sign | ((exp - 15 + 127) << 23) | (man << 13));
}
static inline hk_u16 f2h(float f) {
  hk_u32 x = f2u(f), sign = (x >> 16) & 0x8000u, exp = (x >> 23) & 0xffu, man = x & 0x7fffffu;
  if (exp == 0xff) return (hk_u16)(sign | 0x7c00u | (man ? 0x200u | (man >> 13) : 0));
  int e = (int)exp - 127 + 15;
  if (e >= 31) return (hk_u16)(sign | 0x7c00u);
  if (e <= 0) {
    if (e < -10) return (hk_u16)sign;
    man |= 0x800000u;
    int shift = 14 - e;
    hk_u32 half = 1u << (shift - 1), rest = man & ((1u << shift) - 1), r = man >> shift;
    if (rest > half || (rest == half && (r & 1))) r++;
    return (hk_u16)(sign | r);
  }
  hk_u32 r = ((hk_u32)e << 10) | (man >> 13), rest = man & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (r & 1))) r++;
  return (hk_u16)(sign | r);
}
static inline float bf2f(hk_u16 h) { return u2f((hk_u32)h << 16); }
static inline hk_u16 f2bf(float f) {
  hk_u32 x = f2u(f);
  if ((x & 0x7f800000u) == 0x7f800000u && (x & 0x7fffffu)) return (hk_u16)((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return (hk_u16)(x >> 16);
}

static inline unsigned rnd() {
  g->rng = g->rng * 6364136223846793005ULL + 1442695040888963407ULL;
  return (unsigned)(g->rng >> 33);
}

/* ---- synchronisation ---- */
static inline void barrier() {
  unsigned gen = g->bar_gen;
  g->barriers++;
  if (++g->bar_arrived == (int)g->f.size()) {
    g->bar_arrived = 0;
    g->bar_gen++;
    g->progress = true;
    return;
  }
  g->progress = true;
  while (g->bar_gen == gen) yield("bar.sync");
}

/* Arrive at a warp collective with this lane's slot; returns once all 32
 * lanes arrived and `compute` ran over the slots. */
template <typename F>
static inline Slot &collective(int op, const Slot &in, F compute) {
  unsigned tid = me().tid, w = tid / 32, lane = tid % 32;
  Warp &W = g->warps[w];
  W.s[lane] = in;
  W.s[lane].op = op;
  unsigned gen = W.gen;
  g->progress = true;
  if (++W.arrived == 32) {
    for (int l = 1; l < 32; l++)
      if (W.s[l].op != W.s[0].op) fail("warp %u diverged at a collective (op %d vs %d)", w, W.s[l].op, W.s[0].op);
    compute(W.s);
    W.arrived = 0;
    W.gen++;
  } else {
    while (W.gen == gen) yield("a warp collective");
  }
  return W.s[lane];
}

}  // namespace hks

/* ---- what the kernels see ---- */
#define threadIdx (hks::g->f[hks::g->cur].tidx)
#define blockIdx (hks::g->bidx)
#define blockDim (hks::g->block)
#define gridDim (hks::g->grid)
#define HK_SMEM_DECL(name) unsigned char *name = hks::g->smem.data() + hks::g->smem_base
#define __syncthreads() hks::barrier()

HK_DEV hk_saddr hk_smem_addr(const void *p) { return (hk_saddr)((const unsigned char *)p - hks::g->smem.data()); }
HK_DEV void hk_sync() { hks::barrier(); }
HK_DEV float hk_u2f(hk_u32 u) { return hks::u2f(u); }
HK_DEV hk_u32 hk_f2u(float f) { return hks::f2u(f); }
HK_DEV float hk_h2f(hk_u16 h) { return hks::h2f(h); }
HK_DEV float hk_bf2f(hk_u16 h) { return hks::bf2f(h); }
HK_DEV hk_u16 hk_f2h(float f) { return hks::f2h(f); }
HK_DEV hk_u16 hk_f2bf(float f) { return hks::f2bf(f); }
HK_DEV float hk_f2f(float f) { return f; }
HK_DEV int hk_f2i(float f) {
  return f != f ? 0 : f >= 2147483647.0f ? 2147483647 : f <= -2147483648.0f ? (int)0x80000000 : (int)f;
}
HK_DEV unsigned char hk_f2u8(float f) { return f != 0.0f; }
HK_DEV hk_u32 hk_pack_h2(float lo, float hi) { return (hk_u32)hk_f2h(lo) | ((hk_u32)hk_f2h(hi) << 16); }
HK_DEV hk_u32 hk_pack_bf2(float lo, float hi) { return (hk_u32)hk_f2bf(lo) | ((hk_u32)hk_f2bf(hi) << 16); }

template <typename T>
HK_DEV T hk_gld(const T *p) {
  hks::check_gmem(p, sizeof(T), sizeof(T), "load");
  return *p;
}
/* The generic kernels reach buffer elements through HP_AT(p, i): checked. */
template <typename T>
HK_DEV T &hk_at(T *p, long long i) {
  hks::check_gmem(p + i, sizeof(T), sizeof(T), "access");
  return p[i];
}
#define HP_AT(p, i) hk_at((p), (long long)(i))
HK_DEV float hk_ldf_f16(const hk_u16 *p) { return hk_h2f(hk_gld(p)); }
HK_DEV float hk_ldf_bf16(const hk_u16 *p) { return hk_bf2f(hk_gld(p)); }
HK_DEV float hk_ldf_f32(const float *p) { return hk_gld(p); }
HK_DEV float hk_ldf_i32(const int *p) { return (float)hk_gld(p); }
HK_DEV float hk_ldf_u8(const unsigned char *p) { return (float)hk_gld(p); }
HK_DEV hk_u16 hk_ldg16(const void *p, bool ok) { return ok ? hk_gld((const hk_u16 *)p) : (hk_u16)0; }
HK_DEV hk_u32 hk_ldg32(const void *p, bool ok) { return ok ? hk_gld((const hk_u32 *)p) : 0u; }
HK_DEV hk_v4 hk_ldg128(const void *p, bool ok) {
  hk_v4 v = {0, 0, 0, 0};
  if (ok) {
    hks::check_gmem(p, 16, 16, "ld.global.v4");
    memcpy(&v, p, 16);
  }
  return v;
}
HK_DEV void hk_stg_n(void *p, const void *v, size_t n, const char *what) {
  hks::check_gmem(p, n, n, what);
  memcpy(p, v, n);
}
HK_DEV void hk_stg8(void *p, unsigned char v) { hk_stg_n(p, &v, 1, "st.global.b8"); }
HK_DEV void hk_stg16(void *p, hk_u16 v) { hk_stg_n(p, &v, 2, "st.global.b16"); }
HK_DEV void hk_stg32(void *p, hk_u32 v) { hk_stg_n(p, &v, 4, "st.global.b32"); }
HK_DEV void hk_stg64(void *p, hk_v2 v) { hk_stg_n(p, &v, 8, "st.global.v2.b32"); }
HK_DEV void hk_stg128(void *p, hk_v4 v) { hk_stg_n(p, &v, 16, "st.global.v4.b32"); }
HK_DEV void hk_red_add_f32(float *p, float v) {
  hks::check_gmem(p, 4, 4, "red.global.add.f32");
  *p += v; /* fibers never interleave inside a helper: atomic by construction */
}

/* Split-K serial flags.  CTAs run one after another in launch order, so a
 * flag that is not yet set when a CTA waits would never be: a deadlock. */
HK_DEV void hk_flag_wait(const int *p, int v) {
  hks::check_gmem(p, 4, 4, "ld.acquire.gpu");
  while (*(volatile const int *)p != v) hks::yield("a split-K flag");
}
HK_DEV void hk_flag_set(int *p, int v) {
  hks::check_gmem(p, 4, 4, "st.release.gpu");
  *p = v;
  hks::g->progress = true;
}
HK_DEV void hk_fence_gpu() {}

HK_DEV void hk_sts_n(hk_saddr a, const void *v, int n, const char *what) {
  hks::check_smem(a, n, n, what);
  memcpy(&hks::g->smem[a], v, (size_t)n);
  hks::Sim *s = hks::g;
  s->stamp++;
  for (int i = 0; i < n; i++) s->gw_tid[a + i] = (unsigned short)(hks::me().tid + 1), s->gw_stamp[a + i] = s->stamp;
}
HK_DEV void hk_sts16(hk_saddr a, hk_u16 v) { hk_sts_n(a, &v, 2, "st.shared.b16"); }
HK_DEV void hk_sts32(hk_saddr a, hk_u32 v) { hk_sts_n(a, &v, 4, "st.shared.b32"); }
HK_DEV void hk_sts64(hk_saddr a, hk_v2 v) { hk_sts_n(a, &v, 8, "st.shared.v2"); }
HK_DEV void hk_sts128(hk_saddr a, hk_v4 v) { hk_sts_n(a, &v, 16, "st.shared.v4"); }
HK_DEV hk_u32 hk_lds32(hk_saddr a) {
  hks::check_smem(a, 4, 4, "ld.shared.b32");
  hk_u32 v;
  memcpy(&v, &hks::g->smem[a], 4);
  return v;
}
HK_DEV hk_v2 hk_lds64(hk_saddr a) {
  hks::check_smem(a, 8, 8, "ld.shared.v2");
  hk_v2 v;
  memcpy(&v, &hks::g->smem[a], 8);
  return v;
}
HK_DEV hk_v4 hk_lds128(hk_saddr a) {
  hks::check_smem(a, 16, 16, "ld.shared.v4");
  hk_v4 v;
  memcpy(&v, &hks::g->smem[a], 16);
  return v;
}

/* cp.async: queued; lands at wait_group.  src_bytes < size zero-fills. */
HK_DEV void hk_cp_async_n(hk_saddr d, const void *s, int n, int size) {
  hks::check_smem(d, size, size, "cp.async dst");
  if ((uintptr_t)s % (uintptr_t)size) hks::fail("cp.async: source %p not %d-byte aligned", s, size);
  if (n < 0 || n > size) hks::fail("cp.async: src-size %d outside 0..%d", n, size);
  if (n > 0) hks::check_gmem(s, (size_t)n, 1, "cp.async src");
  hks::me().open.push_back({d, (const unsigned char *)s, size, n});
  hks::g->cp_bytes += (unsigned long long)size;
}
HK_DEV void hk_cp_async16(hk_saddr d, const void *s, int n) { hk_cp_async_n(d, s, n, 16); }
HK_DEV void hk_cp_async8(hk_saddr d, const void *s, int n) { hk_cp_async_n(d, s, n, 8); }
HK_DEV void hk_cp_async4(hk_saddr d, const void *s, int n) { hk_cp_async_n(d, s, n, 4); }
HK_DEV void hk_cp_commit() {
  hks::Fiber &f = hks::me();
  f.groups.push_back(f.open);
  f.open.clear();
}
HK_DEV void hks_cp_land(const hks::CpAsync &c) {
  unsigned char *d = &hks::g->smem[c.dst];
  if (c.src_bytes) memcpy(d, c.src, (size_t)c.src_bytes);
  memset(d + c.src_bytes, 0, (size_t)(c.size - c.src_bytes));
}
template <int N>
HK_DEV void hk_cp_wait() {
  hks::Fiber &f = hks::me();
  while ((int)f.groups.size() > N) {
    for (const hks::CpAsync &c : f.groups.front()) hks_cp_land(c);
    f.groups.erase(f.groups.begin());
  }
}

/* ldmatrix .m8n8 .b16: lanes 8i..8i+7 give the row addresses of matrix i;
 * lane t receives row t/4, columns 2(t%4), 2(t%4)+1 of each matrix (.trans:
 * rows 2(t%4), 2(t%4)+1 of column t/4), the lower column/row in the low half. */
enum { HKS_OP_LDSM = 1, HKS_OP_MMA_F16, HKS_OP_MMA_BF16, HKS_OP_SHFL, HKS_OP_MMA_TF32 };
static inline void hks_ldsm(hk_u32 *d, hk_saddr a, int num, bool trans) {
  hks::Slot in = {};
  in.addr = a;
  hks::Slot &out = hks::collective(HKS_OP_LDSM * 16 + num * 2 + trans, in, [&](hks::Slot *s) {
    hks::g->ldsm++;
    for (int m = 0; m < num; m++) {
      int seen[8] = {0};
      int worst = 0;
      for (int r = 0; r < 8; r++) {
        hk_u32 ra = s[8 * m + r].addr;
        hks::check_smem(ra, 16, 16, "ldmatrix row");
        int bg = (ra / 16) % 8;
        if (++seen[bg] > worst) worst = seen[bg];
      }
      hks::g->ldsm_conflicts += (unsigned long long)(worst - 1);
      for (int t = 0; t < 32; t++) {
        hk_u16 lo, hi;
        if (!trans) {
          hk_u32 ra = s[8 * m + t / 4].addr + (hk_u32)(t % 4) * 4;
          memcpy(&lo, &hks::g->smem[ra], 2);
          memcpy(&hi, &hks::g->smem[ra + 2], 2);
        } else {
          hk_u32 r0 = s[8 * m + 2 * (t % 4)].addr + (hk_u32)(t / 4) * 2;
          hk_u32 r1 = s[8 * m + 2 * (t % 4) + 1].addr + (hk_u32)(t / 4) * 2;
          memcpy(&lo, &hks::g->smem[r0], 2);
          memcpy(&hi, &hks::g->smem[r1], 2);
        }
        s[t].r[m] = (hk_u32)lo | ((hk_u32)hi << 16);
      }
    }
  });
  for (int m = 0; m < num; m++) d[m] = out.r[m];
}
HK_DEV void hk_ldsm_x4(hk_u32 *d, hk_saddr a) { hks_ldsm(d, a, 4, false); }
HK_DEV void hk_ldsm_x4_t(hk_u32 *d, hk_saddr a) { hks_ldsm(d, a, 4, true); }
HK_DEV void hk_ldsm_x2(hk_u32 *d, hk_saddr a) { hks_ldsm(d, a, 2, false); }
HK_DEV void hk_ldsm_x2_t(hk_u32 *d, hk_saddr a) { hks_ldsm(d, a, 2, true); }

/* mma.m16n8k16.row.col f32 += {f16,bf16}: fragments per the PTX ISA tables:
 *   A: a{0,1,2,3} = rows g, g+8, g, g+8; cols 2t+{0,1} (+8 for a2, a3)
 *   B: b{0,1}     = rows (k) 2t+{0,1} (+8 for b1); col (n) g
 *   C: c{0,1,2,3} = rows g, g, g+8, g+8; cols 2t, 2t+1, 2t, 2t+1
 * with g = lane >> 2, t = lane & 3. */
static inline void hks_mma(float *c, const hk_u32 *a, const hk_u32 *b, bool bf) {
  hks::Slot in = {};
  memcpy(in.a, a, 16);
  memcpy(in.b, b, 8);
  memcpy(in.c, c, 16);
  hks::Slot &out = hks::collective(bf ? HKS_OP_MMA_BF16 : HKS_OP_MMA_F16, in, [&](hks::Slot *s) {
    hks::g->mma++;
    float A[16][16], B[16][8], C[16][8];
    for (int l = 0; l < 32; l++) {
      int gq = l >> 2, t = l & 3;
      for (int r = 0; r < 4; r++)
        for (int h = 0; h < 2; h++) {
          hk_u16 v = (hk_u16)(s[l].a[r] >> (16 * h));
          int row = gq + ((r & 1) ? 8 : 0), col = 2 * t + h + ((r & 2) ? 8 : 0);
          A[row][col] = bf ? hks::bf2f(v) : hks::h2f(v);
        }
      for (int r = 0; r < 2; r++)
        for (int h = 0; h < 2; h++) {
          hk_u16 v = (hk_u16)(s[l].b[r] >> (16 * h));
          B[2 * t + h + 8 * r][gq] = bf ? hks::bf2f(v) : hks::h2f(v);
        }
      for (int r = 0; r < 4; r++) C[gq + ((r & 2) ? 8 : 0)][2 * t + (r & 1)] = s[l].c[r];
    }
    for (int i = 0; i < 16; i++)
      for (int j = 0; j < 8; j++) {
        float acc = C[i][j];
        for (int k = 0; k < 16; k++) acc += A[i][k] * B[k][j];
        C[i][j] = acc;
      }
    for (int l = 0; l < 32; l++) {
      int gq = l >> 2, t = l & 3;
      for (int r = 0; r < 4; r++) s[l].c[r] = C[gq + ((r & 2) ? 8 : 0)][2 * t + (r & 1)];
    }
  });
  memcpy(c, out.c, 16);
}
/* mma.m16n8k8.row.col f32 += tf32 x tf32 (PTX ISA 9.7.14.5.7): each register
 * one element, of which the tensor core reads the top 19 bits (sign, 8-bit
 * exponent, 10-bit mantissa: the low 13 bits dropped):
 *   A: a{0,1,2,3} = rows g, g+8, g, g+8; cols t, t, t+4, t+4
 *   B: b{0,1}     = rows (k) t, t+4; col (n) g
 *   C: as m16n8k16. */
static inline float hks_tf32(hk_u32 u) { return hks::u2f(u & 0xffffe000u); }
HK_DEV void hk_mma1688_tf32(float *c, const hk_u32 *a, const hk_u32 *b) {
  hks::Slot in = {};
  memcpy(in.a, a, 16);
  memcpy(in.b, b, 8);
  memcpy(in.c, c, 16);
  hks::Slot &out = hks::collective(HKS_OP_MMA_TF32, in, [&](hks::Slot *s) {
    hks::g->mma++;
    float A[16][8], B[8][8], C[16][8];
    for (int l = 0; l < 32; l++) {
      int gq = l >> 2, t = l & 3;
      for (int r = 0; r < 4; r++) A[gq + ((r & 1) ? 8 : 0)][t + ((r & 2) ? 4 : 0)] = hks_tf32(s[l].a[r]);
      for (int r = 0; r < 2; r++) B[t + 4 * r][gq] = hks_tf32(s[l].b[r]);
      for (int r = 0; r < 4; r++) C[gq + ((r & 2) ? 8 : 0)][2 * t + (r & 1)] = s[l].c[r];
    }
    for (int i = 0; i < 16; i++)
      for (int j = 0; j < 8; j++) {
        float acc = C[i][j];
        for (int k = 0; k < 8; k++) acc += A[i][k] * B[k][j];
        C[i][j] = acc;
      }
    for (int l = 0; l < 32; l++) {
      int gq = l >> 2, t = l & 3;
      for (int r = 0; r < 4; r++) s[l].c[r] = C[gq + ((r & 2) ? 8 : 0)][2 * t + (r & 1)];
    }
  });
  memcpy(c, out.c, 16);
}
HK_DEV float hk_fma(float a, float b, float c) { return fmaf(a, b, c); }
HK_DEV void hk_mma16816_f16(float *c, const hk_u32 *a, const hk_u32 *b) { hks_mma(c, a, b, false); }
HK_DEV void hk_mma16816_bf16(float *c, const hk_u32 *a, const hk_u32 *b) { hks_mma(c, a, b, true); }

/* shfl.sync.bfly.b32 with c = 0x1f, full mask: lane l reads lane l ^ m. */
static inline hk_u32 hks_shfl(hk_u32 v, int m) {
  hks::Slot in = {};
  in.a[0] = v;
  in.i = m;
  hks::Slot &out = hks::collective(HKS_OP_SHFL, in, [&](hks::Slot *s) {
    for (int l = 1; l < 32; l++)
      if (s[l].i != s[0].i) hks::fail("shfl.bfly with different lane masks");
    for (int l = 0; l < 32; l++) s[l].r[0] = s[l ^ (s[0].i & 31)].a[0];
  });
  return out.r[0];
}
/* shfl.sync.idx.b32 with c = 0x1f, full mask: lane l reads lane src_l. */
enum { HKS_OP_SHFL_IDX = 100 };
static inline hk_u32 hks_shfl_idx(hk_u32 v, int src) {
  hks::Slot in = {};
  in.a[0] = v;
  in.i = src;
  hks::Slot &out = hks::collective(HKS_OP_SHFL_IDX, in, [&](hks::Slot *s) {
    for (int l = 0; l < 32; l++) {
      if (s[l].i < 0 || s[l].i > 31) hks::fail("shfl.idx from lane %d", s[l].i);
      s[l].r[0] = s[s[l].i].a[0];
    }
  });
  return out.r[0];
}
HK_DEV float hk_shfl_idx(float v, int src) { return hk_u2f(hks_shfl_idx(hk_f2u(v), src)); }
HK_DEV float hk_shfl_xor(float v, int m) { return hk_u2f(hks_shfl(hk_f2u(v), m)); }
HK_DEV int hk_shfl_xor(int v, int m) { return (int)hks_shfl((hk_u32)v, m); }

HK_DEV float hk_exp2(float x) { return exp2f(x); }
HK_DEV float hk_exp(float x) { return expf(x); }
HK_DEV float hk_log2(float x) { return log2f(x); }
HK_DEV float hk_sqrt(float x) { return sqrtf(x); }
HK_DEV float hk_erf(float x) { return erff(x); }
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); } /* one rounding, as CUDA's */

/* ---- SM90: mbarrier, TMA, wgmma, setmaxnreg (PTX ISA 9.7.13.15, 9.7.9.25-27, 9.7.15, setmaxnreg) ----
 *
 * What is checked beyond the data movement (each is a rule of the ISA or of
 * cuTensorMapEncodeTiled, read independently of the generator):
 *   - mbarrier: init count in 1..2^20-1, expect-tx bytes in 0..2^20-1; a TMA
 *     completes on a barrier only once its initialising thread ran
 *     fence.mbarrier_init or fence.proxy.async after the init;
 *   - tensor maps: the driver's parameter rules (dims 1..2^32, byte strides
 *     positive multiples of 16 below 2^40, box 1..256, inner box a multiple
 *     of 16 bytes, 16-byte aligned base);
 *   - TMA store: every source byte written with st.shared must be behind a
 *     fence.proxy.async of its writer (generic -> async proxy); the source
 *     must be unchanged when cp.async.bulk.wait_group.read retires the store's
 *     bulk group, and no thread exits with a store it never waited for;
 *   - wgmma: a wgmma.fence before the first wgmma after the start or a
 *     wgmma.wait_group; the accumulators are NaN from issue until the
 *     wait_group that retires their group (a chained wgmma on the same
 *     registers sees the in-flight value, as the hardware orders them); no
 *     thread exits with wgmma in flight; SMEM operands written with st.shared
 *     need a fence.proxy.async as well;
 *   - setmaxnreg: imm-reg-count a multiple of 8 in 24..256, the same
 *     instruction in every warp of the warpgroup, .dec not above / .inc not
 *     below the warp's count; every warp starts at the count ptxas gives the
 *     kernel's __launch_bounds__ (65536 / (threads x min blocks), rounded down
 *     to 8, at most 256), the CTA's pool starts empty, .dec puts registers in
 *     it and .inc waits until it holds enough (never: a deadlock). */
namespace hks {
static inline Mbar &mbar(hk_u32 a) {
  for (Mbar &m : g->mbars)
    if (m.addr == a) return m;
  fail("mbarrier at %u used before mbarrier.init", a);
}
static inline void mbar_progress(Mbar &m) {
  if (m.pending == 0 && m.tx == 0) {
    m.phase++;
    m.pending = m.count;
    g->progress = true;
  }
}
/* byte a of SMEM was written with st.shared and its writer has run no
 * fence.proxy.async since: an async-proxy reader (TMA, wgmma) may not see it */
static inline bool generic_unfenced(hk_u32 a) {
  unsigned short t = g->gw_tid[a];
  return t && g->f[t - 1].fence_stamp < g->gw_stamp[a];
}
static inline void async_read_check(hk_u32 a, int n, const char *what) {
  for (int i = 0; i < n; i++)
    if (generic_unfenced(a + (hk_u32)i))
      fail("%s reads shared byte %u that thread %u wrote with st.shared without a fence.proxy.async after it", what,
           a + (hk_u32)i, (unsigned)g->gw_tid[a + (hk_u32)i] - 1);
}
static inline hk_u64 smem_hash(hk_u32 a, hk_u32 n) {
  hk_u64 h = 1469598103934665603ull;
  for (hk_u32 i = 0; i < n; i++) h = (h ^ g->smem[a + i]) * 1099511628211ull;
  return h;
}
/* The sim's CUtensorMap: v[0] magic, v[1] base pointer (patched at launch),
 * v[2] element bytes, v[3] rank, v[4..8] dims, v[9..12] byte strides of dims
 * 1..rank-1, v[13] box (4 x 16 bits), v[14] swizzle (0 none, 3 128B). */
static const hk_u64 TMAP_MAGIC = 0x484b544d41500001ULL;
static inline hk_u32 swz128(hk_u32 off) { return off ^ (((off >> 7) & 7u) << 4); }
static inline void tma(const hk_tmap *m, hk_saddr s, const int *c, bool store, hk_u32 bar) {
  const hk_u64 *v = m->v;
  if (v[0] != TMAP_MAGIC) fail("TMA with a tensor map the harness did not encode");
  unsigned char *base = (unsigned char *)(uintptr_t)v[1];
  int es = (int)v[2], rank = (int)v[3];
  if (rank != 4) fail("the sim's TMA handles rank 4 maps");
  hk_u64 dims[4] = {v[4], v[5], v[6], v[7]}, str[4] = {(hk_u64)es, v[9], v[10], v[11]};
  int box[4];
  for (int i = 0; i < 4; i++) box[i] = (int)((v[13] >> (16 * i)) & 0xffff);
  bool sw = v[14] == 3;
  /* what cuTensorMapEncodeTiled would have refused */
  if ((uintptr_t)base % 16) fail("tensor map: global address %p not 16-byte aligned", (void *)base);
  for (int d = 0; d < 4; d++) {
    if (dims[d] < 1 || dims[d] > (1ull << 32)) fail("tensor map: globalDim[%d] = %llu outside 1..2^32", d, (unsigned long long)dims[d]);
    if (box[d] < 1 || box[d] > 256) fail("tensor map: boxDim[%d] = %d outside 1..256", d, box[d]);
    if (d && (str[d] == 0 || str[d] % 16 || str[d] >= (1ull << 40)))
      fail("tensor map: globalStrides[%d] = %llu is not a positive multiple of 16 below 2^40", d - 1, (unsigned long long)str[d]);
  }
  if (box[0] * es % 16) fail("tensor map: the inner box (%d bytes) is not a multiple of 16 bytes", box[0] * es);
  if (sw && box[0] * es != 128) fail("128B swizzle needs a 128-byte inner box");
  if (s % (sw ? 1024u : 128u)) fail("TMA smem address %u not %u-aligned", s, sw ? 1024u : 128u);
  hk_u32 bytes = (hk_u32)(box[0] * box[1] * box[2] * box[3] * es);
  check_smem(s, (int)bytes, 1, "TMA smem");
  if (store) async_read_check(s, (int)bytes, "TMA store");
  else {
    Mbar &mb = mbar(bar);
    if (!mb.fenced)
      fail("TMA completes on mbarrier %u, whose mbarrier.init no fence.mbarrier_init / fence.proxy.async of thread %u "
           "followed",
           bar, mb.init_tid);
  }
  for (int i3 = 0; i3 < box[3]; i3++)
    for (int i2 = 0; i2 < box[2]; i2++)
      for (int i1 = 0; i1 < box[1]; i1++)
        for (int i0 = 0; i0 < box[0]; i0++) {
          long long x[4] = {(long long)c[0] + i0, (long long)c[1] + i1, (long long)c[2] + i2, (long long)c[3] + i3};
          bool in = true;
          for (int d = 0; d < 4; d++) in = in && x[d] >= 0 && x[d] < (long long)dims[d];
          hk_u32 off = (hk_u32)((((i3 * box[2] + i2) * box[1] + i1) * box[0] + i0) * es);
          if (sw) off = swz128(off);
          check_smem(s + off, es, es, "TMA smem");
          unsigned char *gp = base + x[0] * (long long)str[0] + x[1] * (long long)str[1] + x[2] * (long long)str[2] +
                              x[3] * (long long)str[3];
          if (store) {
            if (in) {
              check_gmem(gp, (size_t)es, (size_t)es, "TMA store");
              memcpy(gp, &g->smem[s + off], (size_t)es);
            }
          } else {
            if (in) check_gmem(gp, (size_t)es, (size_t)es, "TMA load");
            if (in) memcpy(&g->smem[s + off], gp, (size_t)es);
            else memset(&g->smem[s + off], 0, (size_t)es); /* out of bounds: zeros */
            for (int b = 0; b < es; b++) g->gw_tid[s + off + (hk_u32)b] = 0; /* now written by the async proxy */
          }
        }
  g->tma_bytes += bytes;
  if (store) {
    /* the TMA unit reads the source any time until the bulk group's
     * wait_group.read: it must not change before then */
    me().bulk_open.push_back({s, bytes, smem_hash(s, bytes)});
  } else {
    Mbar &mb = mbar(bar);
    mb.tx -= bytes;
    mbar_progress(mb);
  }
}
/* Element address of a K-major or MN-major 128B-swizzled SMEM operand
 * through its descriptor, from the canonical layouts of 9.7.15.5.1.2.1.3
 * (T = 8 16-bit elements per 16 bytes):
 *   K-major:  ((8,m),(T,2k)):((8T,SBO),(1,T))   row r, column k
 *   MN-major: ((T,8,m),(8,k)):((1,T,LBO),(8T,SBO))  mn index, k index
 * then Swizzle<3,4,3> on the byte address. */
static inline hk_u32 desc_addr(hk_u64 desc, bool mn_major, int mn, int k, int esz = 2) {
  hk_u32 start = (hk_u32)(desc & 0x3FFF) << 4, lbo = (hk_u32)((desc >> 16) & 0x3FFF) << 4,
         sbo = (hk_u32)((desc >> 32) & 0x3FFF) << 4;
  if ((desc >> 62) != 1) fail("wgmma descriptor: only 128-byte swizzle is emulated");
  if ((desc >> 49) & 7) fail("wgmma descriptor: non-zero base offset");
  hk_u32 off;
  if (!mn_major) off = (hk_u32)(mn % 8) * 128 + (hk_u32)(mn / 8) * sbo + (hk_u32)(k * esz);
  else off = (hk_u32)(mn % 64) * 2 + (hk_u32)(mn / 64) * lbo + (hk_u32)(k % 8) * 128 + (hk_u32)(k / 8) * sbo;
  return swz128(start + off);
}

/* setmaxnreg (see the comment above) */
static inline void setmaxnreg(int R, bool inc) {
  Sim *s = g;
  unsigned tid = me().tid, w = tid / 32;
  const char *what = inc ? "setmaxnreg.inc" : "setmaxnreg.dec";
  if (!s->lb_threads) fail("%s in a kernel without __launch_bounds__: the ISA gives it no effect then", what);
  if (s->f.size() % 128) fail("%s in a block that is not whole warpgroups", what);
  WarpRegs &wr = s->wregs[w];
  if (!wr.regs) /* at launch: what ptxas gives the kernel's launch bounds (168 for 384 x 1) */
    wr.regs = std::min(256, (65536 / (s->lb_threads * s->lb_blocks)) & ~7);
  int key = R * 2 + inc;
  if (wr.lanes == 0) {
    /* the first lane of the warp: the same instruction as the warpgroup's other warps */
    std::vector<int> &h = s->wg_nreg[w / 4];
    if (h.size() > wr.seq) {
      if (h[wr.seq] != key)
        fail("warp %u: %s %d, but another warp of warpgroup %u ran setmaxnreg.%s %d there", w, what, R, w / 4,
             h[wr.seq] & 1 ? "inc" : "dec", h[wr.seq] / 2);
    } else h.push_back(key);
    if (inc ? R < wr.regs : R > wr.regs) fail("warp %u: %s %d from %d registers", w, what, R, wr.regs);
    wr.target = key;
  } else if (wr.target != key) fail("warp %u: lanes disagree at setmaxnreg (%d vs %d)", w, key, wr.target);
  wr.lanes++;
  if (!wr.granted) {
    if (!inc) {
      s->reg_pool += (wr.regs - R) * 32;
      wr.granted = true;
      s->progress = true;
    } else {
      int need = (R - wr.regs) * 32;
      while (!wr.granted) {
        if (s->reg_pool >= need) {
          s->reg_pool -= need;
          wr.granted = true;
          s->progress = true;
        } else yield("setmaxnreg.inc"); /* waits for a .dec (no progress: a deadlock if none comes) */
      }
    }
  }
  if (++wr.passed == 32) wr.regs = R, wr.lanes = wr.passed = 0, wr.granted = false, wr.seq++;
}

/* A thread ends: nothing asynchronous of its own may still be in flight. */
static inline void thread_exit_checks() {
  Fiber &f = me();
  if (!f.acc_open.empty() || !f.acc_groups.empty())
    fail("thread exited with wgmma results in flight (no wgmma.commit_group / wait_group 0 after them)");
  if (!f.bulk_open.empty() || !f.bulk_groups.empty())
    fail("thread exited with TMA stores whose shared-memory reads it never waited for "
         "(cp.async.bulk.commit_group + wait_group.read)");
}
/* A CTA ends: every warp of a warpgroup ran the same setmaxnreg sequence. */
static inline void cta_end_checks() {
  for (size_t w = 0; w < g->wregs.size(); w++)
    if (g->wregs[w].seq != g->wregs[w - w % 4].seq)
      fail("warp %zu ran %u setmaxnreg, warp %zu of its warpgroup %u", w, g->wregs[w].seq, w - w % 4,
           g->wregs[w - w % 4].seq);
}
}  // namespace hks

/* the kernel's __launch_bounds__ (the thunk calls it first) */
HK_DEV void hks_launch_bounds(int threads, int min_blocks) {
  hks::g->lb_threads = threads;
  hks::g->lb_blocks = min_blocks > 0 ? min_blocks : 1;
}

HK_DEV void hk_mbar_init(hk_saddr b, int n) {
  hks::check_smem(b, 8, 8, "mbarrier.init");
  if (n < 1 || n > (1 << 20) - 1) hks::fail("mbarrier.init: count %d outside 1..2^20-1", n);
  hks::Mbar nb = {b, n, n, 0, 0, hks::me().tid, false};
  for (hks::Mbar &m : hks::g->mbars)
    if (m.addr == b) {
      m = nb;
      return;
    }
  hks::g->mbars.push_back(nb);
}
HK_DEV void hks_fence_inits() {
  for (hks::Mbar &m : hks::g->mbars)
    if (m.init_tid == hks::me().tid) m.fenced = true;
}
HK_DEV void hk_mbar_init_fence() { hks_fence_inits(); }
HK_DEV void hk_fence_proxy_async() {
  hks::g->stamp++;
  hks::me().fence_stamp = hks::g->stamp;
  hks_fence_inits();
}
HK_DEV void hk_mbar_arrive(hk_saddr b) {
  hks::Mbar &m = hks::mbar(b);
  if (--m.pending < 0) hks::fail("mbarrier %u: more arrivals than its count", b);
  hks::mbar_progress(m);
}
HK_DEV void hk_mbar_arrive_expect_tx(hk_saddr b, int bytes) {
  if (bytes < 0 || bytes > (1 << 20) - 1) hks::fail("mbarrier.expect_tx: %d bytes outside 0..2^20-1", bytes);
  hks::mbar(b).tx += bytes;
  hk_mbar_arrive(b);
}
HK_DEV int hk_mbar_try_wait(hk_saddr b, int parity) { return (int)(hks::mbar(b).phase & 1) != (parity & 1); }
HK_DEV void hk_mbar_wait(hk_saddr b, int parity) {
  while (!hk_mbar_try_wait(b, parity)) hks::yield("mbarrier.try_wait");
}
HK_DEV void hk_bar_named(int id, int n) {
  hks::NamedBar &nb = hks::g->named[id & 15];
  unsigned gen = nb.gen;
  hks::g->progress = true;
  if (++nb.arrived == n) {
    nb.arrived = 0;
    nb.gen++;
    return;
  }
  while (nb.gen == gen) hks::yield("a named barrier");
}
HK_DEV void hk_tma_load_4d(hk_saddr dst, const hk_tmap *m, int c0, int c1, int c2, int c3, hk_saddr bar) {
  int c[4] = {c0, c1, c2, c3};
  hks::tma(m, dst, c, false, bar);
}
HK_DEV void hk_tma_store_4d(const hk_tmap *m, hk_saddr src, int c0, int c1, int c2, int c3) {
  int c[4] = {c0, c1, c2, c3};
  hks::tma(m, src, c, true, 0);
}
HK_DEV void hk_bulk_commit() {
  hks::Fiber &f = hks::me();
  f.bulk_groups.push_back(f.bulk_open);
  f.bulk_open.clear();
}
HK_DEV void hk_bulk_wait_read0() {
  for (auto &grp : hks::me().bulk_groups)
    for (auto &r : grp)
      if (hks::smem_hash(r.s, r.n) != r.hash)
        hks::fail("the shared-memory source of a TMA store (%u+%u) changed before cp.async.bulk.wait_group.read "
                  "retired it",
                  r.s, r.n);
  hks::me().bulk_groups.clear();
}
HK_DEV void hk_wgmma_fence() { hks::me().wg_fenced = true; }
template <int N>
HK_DEV void hk_wgmma_fence_acc(float *) {} /* a compiler-ordering fence: nothing to do here */
/* wgmma runs at issue here, but on hardware it reads its SMEM operands at any
 * time until wgmma.wait_group retires it: a stage released (mbarrier arrive)
 * before that may be refilled under the MMA.  Each group's operand bytes are
 * hashed at issue and must be unchanged when the wait retires the group. */
namespace hks {
static hk_u64 wgmma_operand_hash(hk_u64 da, hk_u64 db, int N, int tb);
}
HK_DEV void hk_wgmma_commit() {
  hks::Fiber &f = hks::me();
  f.acc_groups.push_back(f.acc_open);
  f.acc_open.clear();
  if (f.tid % 128) return;
  f.wg_groups.push_back(f.wg_open);
  f.wg_open.clear();
}
template <int N>
HK_DEV void hk_wgmma_wait() {
  hks::Fiber &f = hks::me();
  f.wg_fenced = false; /* the thread may touch the accumulators now: the next wgmma needs a fence */
  while (f.acc_groups.size() > (size_t)N) {
    for (auto &p : f.acc_groups.front()) {
      bool newer = false; /* a later wgmma on the same registers is still in flight: they stay undefined */
      for (size_t gi = 1; gi < f.acc_groups.size(); gi++)
        for (auto &q : f.acc_groups[gi]) newer = newer || q.d == p.d;
      for (auto &q : f.acc_open) newer = newer || q.d == p.d;
      if (!newer) memcpy(p.d, p.v, sizeof(float) * (size_t)p.n);
    }
    f.acc_groups.erase(f.acc_groups.begin());
  }
  if (f.tid % 128) return;
  while (f.wg_groups.size() > (size_t)N) {
    const std::vector<hk_u64> &grp = f.wg_groups.front();
    for (size_t i = 0; i + 5 <= grp.size(); i += 5)
      if (hks::wgmma_operand_hash(grp[i + 1], grp[i + 2], (int)grp[i + 3], (int)(long long)grp[i + 4]) != grp[i])
        hks::fail("warpgroup %u: a wgmma's SMEM operands changed before wgmma.wait_group retired it "
                  "(stage released too early)", f.tid / 128);
    f.wg_groups.erase(f.wg_groups.begin());
  }
}
template <int R>
HK_DEV void hk_setmaxnreg_inc() {
  static_assert(R >= 24 && R <= 256 && R % 8 == 0, "setmaxnreg: imm-reg-count must be a multiple of 8 in 24..256");
  hks::setmaxnreg(R, true);
}
template <int R>
HK_DEV void hk_setmaxnreg_dec() {
  static_assert(R >= 24 && R <= 256 && R % 8 == 0, "setmaxnreg: imm-reg-count must be a multiple of 8 in 24..256");
  hks::setmaxnreg(R, false);
}

namespace hks {
/* FNV-1a over the elements an m64nNk16 (2-byte) or m64nNk8 .tf32 (4-byte,
 * tb < 0 in the record) reads through its descriptors. */
static hk_u64 wgmma_operand_hash(hk_u64 da, hk_u64 db, int N, int tb) {
  hk_u64 h = 1469598103934665603ull;
  int es = tb < 0 ? 4 : 2, K = 32 / es;
  auto mix = [&](hk_u32 a) {
    check_smem(a, es, es, "wgmma operand");
    for (int i = 0; i < es; i++) h = (h ^ g->smem[a + i]) * 1099511628211ull;
  };
  for (int r = 0; r < 64; r++)
    for (int k = 0; k < K; k++) mix(desc_addr(da, false, r, k, es));
  for (int n = 0; n < N; n++)
    for (int k = 0; k < K; k++) mix(desc_addr(db, tb > 0, n, k, es));
  return h;
}
} // namespace hks

/* wgmma.mma_async m64nNk16 (f32 += f16/bf16 x f16/bf16) or m64nNk8 .tf32
 * (tf: 4-byte elements, K-major only, the top 19 bits of each read), a
 * warpgroup collective: D row 16w + g + 8h, column 8j + 2t + e is d[4j + 2h + e]. */
static inline void hks_wgmma(float *d, hk_u64 da, hk_u64 db, int scale_d, int N, bool bf, bool tb, bool tf = false) {
  hks::Fiber &f = hks::me();
  unsigned wgi = f.tid / 128, l = f.tid % 128;
  if (!f.wg_fenced) hks::fail("wgmma.mma_async without a wgmma.fence since the start or the last wgmma.wait_group");
  if (hks::g->wgs.size() <= wgi) hks::g->wgs.resize(wgi + 1);
  hks::Wg &W = hks::g->wgs[wgi];
  W.s[l].da = da, W.s[l].db = db, W.s[l].scale_d = scale_d, W.s[l].op = N * 8 + tf * 4 + bf * 2 + tb;
  /* the accumulators this wgmma reads: an earlier wgmma's still in flight on
   * the same registers (the hardware chains them), else the registers */
  const float *in = d;
  for (auto &p : f.acc_open)
    if (p.d == d) in = p.v;
  if (in == d)
    for (size_t gi = f.acc_groups.size(); gi-- > 0 && in == d;)
      for (auto &p : f.acc_groups[gi])
        if (p.d == d) in = p.v;
  memcpy(W.s[l].d, in, sizeof(float) * (size_t)(N / 2));
  unsigned gen = W.gen;
  hks::g->progress = true;
  if (++W.arrived == 128) {
    for (int q = 1; q < 128; q++)
      if (W.s[q].op != W.s[0].op || W.s[q].da != W.s[0].da || W.s[q].db != W.s[0].db)
        hks::fail("warpgroup %u: wgmma operands differ between threads", wgi);
    hks::g->wgmma++;
    hks::Fiber &f0 = hks::g->f[hks::me().tid - l]; /* the warpgroup's thread 0 keeps the record */
    int tbr = tf ? -1 : tb ? 1 : 0, es = tf ? 4 : 2, K = 32 / es;
    hk_u64 rec[5] = {hks::wgmma_operand_hash(da, db, N, tbr), da, db, (hk_u64)N, (hk_u64)(long long)tbr};
    f0.wg_open.insert(f0.wg_open.end(), rec, rec + 5);
    static float A[64][16], B[16][256];
    auto elem = [&](hk_u32 a, const char *what) {
      hks::check_smem(a, es, es, what);
      hks::async_read_check(a, es, what);
      if (tf) {
        hk_u32 u;
        memcpy(&u, &hks::g->smem[a], 4);
        return hks::u2f(u & 0xffffe000u);
      }
      hk_u16 v;
      memcpy(&v, &hks::g->smem[a], 2);
      return bf ? hks::bf2f(v) : hks::h2f(v);
    };
    for (int r = 0; r < 64; r++)
      for (int k = 0; k < K; k++) A[r][k] = elem(hks::desc_addr(da, false, r, k, es), "wgmma A");
    for (int n = 0; n < N; n++)
      for (int k = 0; k < K; k++) B[k][n] = elem(hks::desc_addr(db, tb, n, k, es), "wgmma B");
    for (int q = 0; q < 128; q++) {
      int w = q / 32, lane = q % 32, gq = lane >> 2, t = lane & 3;
      for (int i = 0; i < N / 2; i++) {
        int j = i / 4, h = (i / 2) & 1, e = i & 1;
        int r = 16 * w + gq + 8 * h, c = 8 * j + 2 * t + e;
        float acc = W.s[q].scale_d ? W.s[q].d[i] : 0.0f;
        for (int k = 0; k < K; k++) acc += A[r][k] * B[k][c];
        W.s[q].d[i] = acc;
      }
    }
    W.arrived = 0;
    W.gen++;
  } else {
    while (hks::g->wgs[wgi].gen == gen) hks::yield("wgmma (the warpgroup)");
  }
  /* (re-read: another warpgroup's first wgmma may have grown the vector meanwhile) */
  hks::Fiber::AccPend p;
  p.d = d, p.n = N / 2;
  memcpy(p.v, hks::g->wgs[wgi].s[l].d, sizeof(float) * (size_t)(N / 2));
  hks::me().acc_open.push_back(p);
  for (int i = 0; i < N / 2; i++) d[i] = NAN; /* the registers are the wgmma's until wait_group retires it */
}
#define HKS_WGMMA(N)                                                                                                       \
  HK_DEV void hk_wgmma_m64n##N##k16_f16(float *d, hk_u64 a, hk_u64 b, int s) { hks_wgmma(d, a, b, s, N, false, false); } \
  HK_DEV void hk_wgmma_m64n##N##k16_f16_tb(float *d, hk_u64 a, hk_u64 b, int s) { hks_wgmma(d, a, b, s, N, false, true); } \
  HK_DEV void hk_wgmma_m64n##N##k16_bf16(float *d, hk_u64 a, hk_u64 b, int s) { hks_wgmma(d, a, b, s, N, true, false); } \
  HK_DEV void hk_wgmma_m64n##N##k16_bf16_tb(float *d, hk_u64 a, hk_u64 b, int s) { hks_wgmma(d, a, b, s, N, true, true); }
HKS_WGMMA(64)
HKS_WGMMA(128)
HKS_WGMMA(256)
#define HKS_WGMMA_TF32(N) \
  HK_DEV void hk_wgmma_m64n##N##k8_tf32(float *d, hk_u64 a, hk_u64 b, int s) { hks_wgmma(d, a, b, s, N, false, false, true); }
HKS_WGMMA_TF32(64)
HKS_WGMMA_TF32(128)
HKS_WGMMA_TF32(256)

/* ---- launching ---- */
extern "C" int hk_sim_launch(const char *kernel, void (*thunk)(void **), const unsigned grid[3], const unsigned block[3],
                             size_t smem, void **params, unsigned long long seed);
extern "C" void hk_sim_add_buffer(const void *p, size_t n, const char *name);
extern "C" void hk_sim_stats(unsigned long long out[5]);

#endif
