/* cgen_emit.c — text layer shared by the CPU kernel generators.
 * Needs: cgen_int.h.  Gives: "$P/$F" templating, the per-ISA vector helpers
 * (loads/stores in fp32/fp16/bf16, the math: 2^t, e^x, 1/x, a/b, sigmoid,
 * silu, gelu, NaN-keeping max/min; reductions), the
 * hprt thread-pool runtime text and the CPUID dispatcher. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/c/cgen_int.h"

static const cg_isa ISAS[CGEN_ISA_COUNT] = {
    {CGEN_ISA_SCALAR, "scalar", 1, "", "static inline __attribute__((unused))", 16},
    {CGEN_ISA_AVX2, "avx2", 8, "__attribute__((target(\"avx2,fma,f16c\")))",
     "static inline __attribute__((always_inline, unused, target(\"avx2,fma,f16c\")))", 16},
    {CGEN_ISA_AVX512, "avx512", 16, "__attribute__((target(\"avx512f,avx512bw,avx512vl,avx512dq,fma,f16c\")))",
     "static inline __attribute__((always_inline, unused, target(\"avx512f,avx512bw,avx512vl,avx512dq,fma,f16c\")))",
     32},
};

const cg_isa *cg_isa_get(cgen_isa id) { return &ISAS[id]; }

/* The AVX-512 variant's attributes with AVX512_BF16 (cg_out.bf16_cvt). */
#define BF16_T "__attribute__((target(\"avx512f,avx512bw,avx512vl,avx512dq,fma,f16c,avx512bf16\")))"
#define BF16_I "static inline __attribute__((always_inline, unused, target(\"avx512f,avx512bw,avx512vl,avx512dq,fma,f16c,avx512bf16\")))"

int64_t cg_rup(int64_t a, int64_t b) { return (a + b - 1) / b * b; }

void cg_set_isa(cg_out *o, const cg_isa *isa) {
  o->isa = isa;
  o->amx = false;
  snprintf(o->P, sizeof o->P, "%s_%s", o->F, isa ? isa->tag : "x");
}

void cg_set_amx(cg_out *o) {
  cg_set_isa(o, cg_isa_get(CGEN_ISA_AVX512));
  o->amx = o->has_amx = true;
  snprintf(o->P, sizeof o->P, "%s_amx", o->F);
}

void cg_emit(cg_out *o, const char *fmt, ...) {
  char small[2048];
  char *buf = small;
  va_list ap, ap2;
  va_start(ap, fmt);
  va_copy(ap2, ap);
  int n = vsnprintf(small, sizeof small, fmt, ap);
  va_end(ap);
  if (n < 0) {
    va_end(ap2);
    o->s->oom = true;
    return;
  }
  if ((size_t)n >= sizeof small) {
    buf = ut_xmalloc((size_t)n + 1);
    if (!buf) {
      va_end(ap2);
      o->s->oom = true;
      return;
    }
    vsnprintf(buf, (size_t)n + 1, fmt, ap2);
  }
  va_end(ap2);
  const char *T = o->isa ? o->isa->attr : "";
  const char *I = o->isa ? o->isa->iattr : "static inline";
  if (o->bf16_cvt && o->isa && o->isa->id == CGEN_ISA_AVX512) T = BF16_T, I = BF16_I;
  /* the AMX variant's functions ($T) may use the tiles: its task loads the
   * tile configuration and releases it, which a function without amx-tile
   * cannot inline (a package built without -march=native failed); its
   * inline helpers stay AVX-512 BF16, callable from its bf16 packers */
  if (o->amx && o->isa && o->isa->id == CGEN_ISA_AVX512) T = CG_AMX_ATTR, I = BF16_I;
  for (const char *p = buf; *p; p++) {
    if (p[0] == '$' && (p[1] == 'P' || p[1] == 'F' || p[1] == 'T' || p[1] == 'I')) {
      ut_str_puts(o->s, p[1] == 'P' ? o->P : p[1] == 'F' ? o->F : p[1] == 'T' ? T : I);
      p++;
    } else {
      ut_str_putc(o->s, *p);
    }
  }
  if (buf != small) free(buf);
}

bool cg_dtype_ok(tiny_dtype t) { return t == TINY_FP32 || t == TINY_FP16 || t == TINY_BF16; }
const char *cg_ctype(tiny_dtype t) { return t == TINY_FP32 ? "float" : "uint16_t"; }
const char *cg_vsuffix(tiny_dtype t) { return t == TINY_FP32 ? "" : t == TINY_FP16 ? "h" : "b"; }

void cg_scalar_ld(cg_out *o, char *buf, int cap, tiny_dtype t, const char *ptr, const char *idx) {
  if (t == TINY_FP32)
    snprintf(buf, cap, "((const float *)(%s))[%s]", ptr, idx);
  else
    snprintf(buf, cap, "%s_%s(((const uint16_t *)(%s))[%s])", o->F, t == TINY_FP16 ? "h2f" : "b2f", ptr, idx);
}

void cg_scalar_cvt(cg_out *o, char *buf, int cap, tiny_dtype t, const char *expr) {
  if (t == TINY_FP32)
    snprintf(buf, cap, "(%s)", expr);
  else
    snprintf(buf, cap, "%s_%s(%s)", o->F, t == TINY_FP16 ? "f2h" : "f2b", expr);
}

unsigned cg_isa_set(const cgen_tuning *t) {
  unsigned m = 1u << CGEN_ISA_SCALAR;
  if (t->simd == 0 || t->simd >= 8) m |= 1u << CGEN_ISA_AVX2;
  if (t->simd == 0 || t->simd >= 16) m |= 1u << CGEN_ISA_AVX512;
  if (t->isa_mask) m &= t->isa_mask | (1u << CGEN_ISA_SCALAR);
  if (t->no_fallback && (m & ~(1u << CGEN_ISA_SCALAR))) m &= ~(1u << CGEN_ISA_SCALAR);
  return m;
}

harp_status cg_check_name(harp_error *e, const char *fn) {
  if (!fn || !*fn || strlen(fn) > 100) return ut_fail(e, HARP_E_INVALID_ARG, NULL, "cgen: bad function name");
  for (const char *p = fn; *p; p++) {
    char c = *p;
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (p != fn && c >= '0' && c <= '9');
    if (!ok) return ut_fail(e, HARP_E_INVALID_ARG, NULL, "cgen: function name '%s' is not a C identifier", fn);
  }
  return HARP_OK;
}

/* ---- runtime: includes + thread pool ------------------------------------ */
static const char RUNTIME[] =
    "#ifndef HPRT_RUNTIME\n"
    "#define HPRT_RUNTIME 1\n"
    "/* hprt: persistent thread pool and scratch memory for harp's CPU kernels. */\n"
    "#if defined(__linux__) && !defined(_GNU_SOURCE)\n"
    "#define _GNU_SOURCE 1 /* where the workers start: sched_getcpu, pthread_attr_setaffinity_np */\n"
    "#endif\n"
    "#include <math.h>\n#include <pthread.h>\n#include <stdint.h>\n#include <stdlib.h>\n#include <string.h>\n"
    "#if defined(__linux__)\n#include <sched.h>\n#include <sys/mman.h>\n#endif\n"
    "#if defined(__linux__) && defined(CPU_SET) /* not when a header came before _GNU_SOURCE */\n"
    "#define HPRT_AFFINITY 1\n"
    "#endif\n"
    "#if defined(__x86_64__) || defined(__i386__)\n#include <immintrin.h>\n#define HPRT_X86 1\n"
    "#define HPRT_PAUSE() _mm_pause()\n#else\n#define HPRT_PAUSE() ((void)0)\n#endif\n"
    "#define HPRT_MAXT 64\n"
    "#ifndef HPRT_TEST_DELAY /* test_hprt_pool widens the pool's races with a spin here */\n"
    "#define HPRT_TEST_DELAY() ((void)0)\n"
    "#endif\n"
    "#ifndef HPRT_TEST_MOVED /* test_hprt_pool counts the workers' moves off the caller's CPU */\n"
    "#define HPRT_TEST_MOVED() ((void)0)\n"
    "#endif\n"
    "typedef struct hprt_pool hprt_pool;\n"
    "typedef void (*hprt_fn)(void *ctx, int task, int tid);\n"
    "struct hprt_warg { hprt_pool *p; int tid; };\n"
    "/* A job's tasks are split into one range per thread, each in a word of its\n"
    " * own cache line: (the job's tag << 40) | (lo << 20) | hi. */\n"
    "#define HPRT_TB 20\n"
    "#define HPRT_TMAX ((1 << HPRT_TB) - 1) /* tasks of one job; more run as several */\n"
    "#define HPRT_CLOSED 0x80000000u\n"
    "struct hprt_rng { _Alignas(64) unsigned long long w; };\n"
    "struct hprt_pool {\n"
    "  /* written by the caller once a job, read by the workers: one line */\n"
    "  _Alignas(64) unsigned gen, cur; /* cur: the open job's number, HPRT_CLOSED while its fields change */\n"
    "  int ntasks, base, stop, n;\n"
    "  hprt_fn fn;\n"
    "  void *ctx;\n"
    "#ifdef HPRT_AFFINITY\n"
    "  int ccpu; /* the CPU the caller opened the last job on; -1 before the first */\n"
    "#endif\n"
    "  _Alignas(64) int done; /* the tasks run, added once a thread and job */\n"
    "  struct hprt_rng rg[HPRT_MAXT];\n"
    "  int nstarted;\n"
    "  unsigned job;\n"
    "  pthread_t th[HPRT_MAXT];\n"
    "  struct hprt_warg wa[HPRT_MAXT];\n"
    "  pthread_mutex_t mu;\n"
    "  pthread_cond_t cv, cv_done;\n"
    "  void *shared; size_t shared_cap;\n"
    "  void *scr[HPRT_MAXT]; size_t scr_cap[HPRT_MAXT];\n"
    "#ifdef HPRT_AFFINITY\n"
    "  cpu_set_t allowed; int spread;\n"
    "#endif\n"
    "};\n"
    "/* Each thread runs its own range of the job (thread t: tasks t n / P to\n"
    " * (t + 1) n / P) from the bottom, in chunks of a quarter of what is left\n"
    " * (at least a sixteenth of a thread's share), then takes half of what is\n"
    " * left of another's range from the top, until every range is empty.  On a\n"
    " * VM whose two vCPUs sat on different CCDs (a cache line between them\n"
    " * ~200 ns one way against ~45 on one CCD) the old pool's one shared\n"
    " * counter, taken alternately, cost 2-5 us a job, and its interleaved\n"
    " * chunks put neighbouring output columns (rows of 784 or 196 bytes, not\n"
    " * whole lines) on both cores: a 1x1 int8 conv ran slower on two threads\n"
    " * than on one.  Here a thread's takes from its own range stay in its\n"
    " * cache, each pair of threads shares at most one boundary, and a thread\n"
    " * works on the same part of every job (bench/RESULTS.md, z9mb).  The\n"
    " * tasks of a worker that wakes late, or not at all, are taken from the\n"
    " * top by the others, so the caller never waits for a thread the OS has\n"
    " * not scheduled.  A worker reads fn, ctx, ntasks and base between two\n"
    " * loads of cur that show the same open job; the caller changes them only\n"
    " * while cur shows a newer, closed one, and every range word carries the\n"
    " * job's tag, so a late worker's take of an old job fails (the tag is 24\n"
    " * bits: a worker would have to sleep through 2^24 jobs between its read\n"
    " * and its take). */\n"
    "static void hprt_work(hprt_pool *p, int tid) {\n"
    "  const unsigned job = __atomic_load_n(&p->cur, __ATOMIC_ACQUIRE);\n"
    "  if (job & HPRT_CLOSED) return; /* being set up: this job's gen wakes us again */\n"
    "  const int n = __atomic_load_n(&p->ntasks, __ATOMIC_RELAXED), base = __atomic_load_n(&p->base, __ATOMIC_RELAXED);\n"
    "  const hprt_fn fn = __atomic_load_n(&p->fn, __ATOMIC_RELAXED);\n"
    "  void *const ctx = __atomic_load_n(&p->ctx, __ATOMIC_RELAXED);\n"
    "  HPRT_TEST_DELAY();\n"
    "  __atomic_thread_fence(__ATOMIC_ACQUIRE);\n"
    "  if (__atomic_load_n(&p->cur, __ATOMIC_ACQUIRE) != job) return;\n"
    "  const unsigned long long tag = (unsigned long long)(job & 0xffffffu) << (2 * HPRT_TB), m = HPRT_TMAX;\n"
    "  const int P = p->n, least = n / (16 * P) > 1 ? n / (16 * P) : 1;\n"
    "  int did = 0;\n"
    "  for (int k = 0; k < P; k++) {\n"
    "    struct hprt_rng *r = &p->rg[(tid + k) % P];\n"
    "    unsigned long long w = __atomic_load_n(&r->w, __ATOMIC_ACQUIRE);\n"
    "    for (;;) {\n"
    "      if ((w >> (2 * HPRT_TB)) << (2 * HPRT_TB) != tag) { k = P; break; } /* a newer job: this one is done */\n"
    "      int lo = (int)((w >> HPRT_TB) & m), hi = (int)(w & m), ch, t;\n"
    "      if (lo >= hi) break;\n"
    "      if (k == 0) ch = (hi - lo) / 4 > least ? (hi - lo) / 4 : least, ch = ch < hi - lo ? ch : hi - lo, t = lo;\n"
    "      else ch = (hi - lo + 1) / 2, t = hi - ch;\n"
    "      unsigned long long nw = k == 0 ? tag | (unsigned long long)(lo + ch) << HPRT_TB | (unsigned long long)hi\n"
    "                                     : tag | (unsigned long long)lo << HPRT_TB | (unsigned long long)(hi - ch);\n"
    "      if (!__atomic_compare_exchange_n(&r->w, &w, nw, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) continue;\n"
    "      for (int e = t + ch; t < e; t++) fn(ctx, base + t, tid);\n"
    "      did += ch;\n"
    "      w = __atomic_load_n(&r->w, __ATOMIC_ACQUIRE);\n"
    "    }\n"
    "  }\n"
    "  if (did && __atomic_add_fetch(&p->done, did, __ATOMIC_ACQ_REL) == n && tid) { /* the last task: the caller may sleep */\n"
    "    pthread_mutex_lock(&p->mu);\n"
    "    pthread_cond_signal(&p->cv_done);\n"
    "    pthread_mutex_unlock(&p->mu);\n"
    "  }\n"
    "}\n"
    "#ifdef HPRT_AFFINITY\n"
    "/* A worker on the CPU where the caller opened the last job time-shares it\n"
    " * with the caller: the job runs serially, and the worker's spin takes the\n"
    " * caller's time.  When another busy process holds the other CPU the\n"
    " * scheduler leaves the two there (2 threads against 1 counts as balanced),\n"
    " * so a process stayed slow for good (a 2-task GEMM at 0.30 ms instead of\n"
    " * 0.155 in whole runs of harp bench).  The worker moves itself: its own mask\n"
    " * without that CPU, then its mask back, so it stays where it went and is\n"
    " * free to move again (no thread of the user's is touched).  Where no other\n"
    " * CPU is allowed (*stuck > 0: retried after that many calls) the worker\n"
    " * neither spins nor takes tasks there: the caller runs them, without\n"
    " * waiting for a thread that needs its CPU.  Returns 1 while the worker\n"
    " * shares the caller's CPU, 0 otherwise. */\n"
    "static int hprt_leave(hprt_pool *p, int *stuck) {\n"
    "  int c = __atomic_load_n(&p->ccpu, __ATOMIC_RELAXED);\n"
    "  if (c < 0 || sched_getcpu() != c) return 0;\n"
    "  if (*stuck > 0 && --*stuck > 0) return 1;\n"
    "  cpu_set_t mine, other;\n"
    "  if (pthread_getaffinity_np(pthread_self(), sizeof mine, &mine) == 0) {\n"
    "    other = mine;\n"
    "    CPU_CLR(c, &other);\n"
    "    if (CPU_COUNT(&other) > 0 && pthread_setaffinity_np(pthread_self(), sizeof other, &other) == 0) {\n"
    "      pthread_setaffinity_np(pthread_self(), sizeof mine, &mine);\n"
    "      HPRT_TEST_MOVED();\n"
    "      return 0;\n"
    "    }\n"
    "  }\n"
    "  *stuck = 256;\n"
    "  return 1;\n"
    "}\n"
    "#define HPRT_ALONE(p, stuck) hprt_leave(p, stuck)\n"
    "#else\n"
    "#define HPRT_ALONE(p, stuck) ((void)(stuck), 0)\n"
    "#endif\n"
    "/* A worker: spins briefly for the next job, then sleeps on the condition\n"
    " * variable; on the caller's CPU it moves, or sleeps and sits the job out. */\n"
    "static void *hprt_main(void *arg) {\n"
    "  struct hprt_warg *wa = (struct hprt_warg *)arg;\n"
    "  hprt_pool *p = wa->p;\n"
    "  unsigned seen = 0;\n"
    "  int stuck = 0;\n"
    "#ifdef HPRT_AFFINITY\n"
    "  /* started on a CPU of its own (hprt_pool_create): from here on free to move */\n"
    "  if (p->spread) pthread_setaffinity_np(pthread_self(), sizeof p->allowed, &p->allowed);\n"
    "#endif\n"
    "  for (;;) {\n"
    "    int spins = 0;\n"
    "    for (;;) {\n"
    "      if (__atomic_load_n(&p->stop, __ATOMIC_ACQUIRE)) return NULL;\n"
    "      if (__atomic_load_n(&p->gen, __ATOMIC_ACQUIRE) != seen) break;\n"
    "      if (++spins < 4000 && ((spins & 255) != 1 || !HPRT_ALONE(p, &stuck))) { HPRT_PAUSE(); continue; }\n"
    "      pthread_mutex_lock(&p->mu);\n"
    "      while (!p->stop && p->gen == seen) pthread_cond_wait(&p->cv, &p->mu);\n"
    "      pthread_mutex_unlock(&p->mu);\n"
    "    }\n"
    "    seen = __atomic_load_n(&p->gen, __ATOMIC_ACQUIRE);\n"
    "    if (!HPRT_ALONE(p, &stuck)) hprt_work(p, wa->tid);\n"
    "  }\n"
    "}\n"
    "__attribute__((weak)) void hprt_pool_destroy(hprt_pool *p) {\n"
    "  if (!p) return;\n"
    "  pthread_mutex_lock(&p->mu);\n"
    "  __atomic_store_n(&p->stop, 1, __ATOMIC_RELEASE);\n"
    "  pthread_cond_broadcast(&p->cv);\n"
    "  pthread_mutex_unlock(&p->mu);\n"
    "  for (int i = 0; i < p->nstarted; i++) pthread_join(p->th[i], NULL);\n"
    "  for (int i = 0; i < HPRT_MAXT; i++) free(p->scr[i]);\n"
    "  free(p->shared);\n"
    "  pthread_mutex_destroy(&p->mu);\n"
    "  pthread_cond_destroy(&p->cv);\n"
    "  pthread_cond_destroy(&p->cv_done);\n"
    "  free(p);\n"
    "}\n"
    "/* nthreads counts the caller, who works as thread 0 in hprt_pool_run. */\n"
    "__attribute__((weak)) hprt_pool *hprt_pool_create(int nthreads) {\n"
    "  if (nthreads < 1) nthreads = 1;\n"
    "  if (nthreads > HPRT_MAXT) nthreads = HPRT_MAXT;\n"
    "  hprt_pool *p = (hprt_pool *)aligned_alloc(64, (sizeof *p + 63) & ~(size_t)63); /* the lines apart */\n"
    "  if (!p) return NULL;\n"
    "  memset(p, 0, sizeof *p);\n"
    "  p->n = nthreads;\n"
    "  p->cur = HPRT_CLOSED;\n"
    "  pthread_mutex_init(&p->mu, NULL);\n"
    "  pthread_cond_init(&p->cv, NULL);\n"
    "  pthread_cond_init(&p->cv_done, NULL);\n"
    "#ifdef HPRT_AFFINITY\n"
    "  /* each worker starts on a CPU other than the caller's: a spinning worker\n"
    "   * born next to the caller halves both until the scheduler moves it,\n"
    "   * which took hundreds of runs of a small kernel */\n"
    "  int cpus[HPRT_MAXT], ncpu = 0, self = sched_getcpu();\n"
    "  if (sched_getaffinity(0, sizeof p->allowed, &p->allowed) == 0)\n"
    "    for (int c = 0; c < CPU_SETSIZE && ncpu < HPRT_MAXT; c++)\n"
    "      if (CPU_ISSET(c, &p->allowed) && c != self) cpus[ncpu++] = c;\n"
    "  p->spread = ncpu > 0;\n"
    "  p->ccpu = -1;\n"
    "#endif\n"
    "  for (int i = 1; i < nthreads; i++) {\n"
    "    p->wa[i].p = p; p->wa[i].tid = i;\n"
    "    pthread_attr_t at;\n"
    "    int have_at = pthread_attr_init(&at) == 0;\n"
    "#ifdef HPRT_AFFINITY\n"
    "    if (have_at && p->spread) {\n"
    "      cpu_set_t one;\n"
    "      CPU_ZERO(&one);\n"
    "      CPU_SET(cpus[(i - 1) % ncpu], &one);\n"
    "      pthread_attr_setaffinity_np(&at, sizeof one, &one);\n"
    "    }\n"
    "#endif\n"
    "    int rc = pthread_create(&p->th[p->nstarted], have_at ? &at : NULL, hprt_main, &p->wa[i]);\n"
    "    if (have_at) pthread_attr_destroy(&at);\n"
    "    if (rc != 0) { hprt_pool_destroy(p); return NULL; }\n"
    "    p->nstarted++;\n"
    "  }\n"
    "  return p;\n"
    "}\n"
    "__attribute__((weak)) int hprt_pool_size(const hprt_pool *p) { return p ? p->n : 1; }\n"
    "/* Run fn(ctx, task, tid) for every task; returns when all are done.  Not reentrant. */\n"
    "__attribute__((weak)) void hprt_pool_run(hprt_pool *p, int ntasks, hprt_fn fn, void *ctx) {\n"
    "  if (!p || p->n <= 1 || ntasks <= 1) { for (int t = 0; t < ntasks; t++) fn(ctx, t, 0); return; }\n"
    "  for (int base = 0; base < ntasks; base += HPRT_TMAX) {\n"
    "    const int n = ntasks - base < HPRT_TMAX ? ntasks - base : HPRT_TMAX, P = p->n;\n"
    "    const unsigned job = ++p->job & ~HPRT_CLOSED;\n"
    "#ifdef HPRT_AFFINITY\n"
    "    __atomic_store_n(&p->ccpu, sched_getcpu(), __ATOMIC_RELAXED); /* published with the job */\n"
    "#endif\n"
    "    __atomic_store_n(&p->cur, job | HPRT_CLOSED, __ATOMIC_RELAXED); /* closed: the fields change */\n"
    "    HPRT_TEST_DELAY();\n"
    "    __atomic_thread_fence(__ATOMIC_RELEASE);\n"
    "    __atomic_store_n(&p->fn, fn, __ATOMIC_RELAXED);\n"
    "    __atomic_store_n(&p->ctx, ctx, __ATOMIC_RELAXED);\n"
    "    __atomic_store_n(&p->ntasks, n, __ATOMIC_RELAXED);\n"
    "    __atomic_store_n(&p->base, base, __ATOMIC_RELAXED);\n"
    "    __atomic_store_n(&p->done, 0, __ATOMIC_RELAXED);\n"
    "    const unsigned long long tag = (unsigned long long)(job & 0xffffffu) << (2 * HPRT_TB);\n"
    "    for (int i = 0; i < P; i++)\n"
    "      __atomic_store_n(&p->rg[i].w, tag | (unsigned long long)((long)n * i / P) << HPRT_TB | (unsigned long long)((long)n * (i + 1) / P),\n"
    "                       __ATOMIC_RELAXED);\n"
    "    __atomic_store_n(&p->cur, job, __ATOMIC_RELEASE); /* open */\n"
    "    pthread_mutex_lock(&p->mu);\n"
    "    __atomic_store_n(&p->gen, p->gen + 1, __ATOMIC_RELEASE);\n"
    "    pthread_cond_broadcast(&p->cv);\n"
    "    pthread_mutex_unlock(&p->mu);\n"
    "    hprt_work(p, 0);\n"
    "    int spins = 0;\n"
    "    while (__atomic_load_n(&p->done, __ATOMIC_ACQUIRE) != n) { /* the tasks others took */\n"
    "      if (++spins < 20000) { HPRT_PAUSE(); continue; }\n"
    "      pthread_mutex_lock(&p->mu);\n"
    "      while (__atomic_load_n(&p->done, __ATOMIC_ACQUIRE) != n) pthread_cond_wait(&p->cv_done, &p->mu);\n"
    "      pthread_mutex_unlock(&p->mu);\n"
    "    }\n"
    "  }\n"
    "}\n"
    "/* bytes (rounded up into *cap when cap is not NULL), from 2 MiB on on 2 MiB\n"
    " * pages where the OS allows, else 64-aligned; NULL when out of memory; free()\n"
    " * frees it.  Measured on a Xeon (int8 ResNet-50, 2 threads): its kernels'\n"
    " * sum in whole runs 10.0-10.6 ms with the madvise, 11.2-11.3 with it off;\n"
    " * at one thread, after a TLB-cold sweep, the page size made no difference,\n"
    " * so why it helps (TLB or not) is not known (bench/RESULTS.md, issues\n"
    " * 27/28). */\n"
    "static __attribute__((unused)) void *hprt_alloc(size_t bytes, size_t *cap) {\n"
    "  size_t big = (size_t)1 << 21, al = bytes >= big ? big : 64;\n"
    "  size_t sz = (bytes + al - 1) & ~(al - 1);\n"
    "  void *nb = aligned_alloc(al, sz ? sz : al);\n"
    "  if (!nb) return NULL;\n"
    "#ifdef MADV_HUGEPAGE\n"
    "  if (al == big) madvise(nb, sz, MADV_HUGEPAGE);\n"
    "#endif\n"
    "  if (cap) *cap = sz;\n"
    "  return nb;\n"
    "}\n"
    "/* Scratch grown to bytes (hprt_alloc): 0, or -1 when out of memory. */\n"
    "static int hprt_grow(void **buf, size_t *cap, size_t bytes) {\n"
    "  if (bytes <= *cap) return 0;\n"
    "  size_t sz;\n"
    "  void *nb = hprt_alloc(bytes, &sz);\n"
    "  if (!nb) return -1;\n"
    "  free(*buf); *buf = nb; *cap = sz;\n"
    "  return 0;\n"
    "}\n"
    "/* Scratch kept by the pool between calls: one shared block and one per thread.\n"
    " * Called by the caller thread only, outside hprt_pool_run. */\n"
    "__attribute__((weak)) int hprt_pool_reserve(hprt_pool *p, size_t shared, size_t per_thread) {\n"
    "  if (hprt_grow(&p->shared, &p->shared_cap, shared ? shared : 64)) return -1;\n"
    "  for (int i = 0; i < p->n; i++)\n"
    "    if (hprt_grow(&p->scr[i], &p->scr_cap[i], per_thread ? per_thread : 64)) return -1;\n"
    "  return 0;\n"
    "}\n"
    "/* The scratch of one call: from the pool, or malloc'd when there is none. */\n"
    "typedef struct hprt_scratch { char *shared; char *thr[HPRT_MAXT]; void *own; } hprt_scratch;\n"
    "static __attribute__((unused)) int hprt_scratch_get(hprt_pool *p, size_t shared, size_t per_thread, hprt_scratch *s) {\n"
    "  memset(s, 0, sizeof *s);\n"
    "  shared = (shared + 63) & ~(size_t)63; per_thread = (per_thread + 63) & ~(size_t)63;\n"
    "  if (p) {\n"
    "    if (hprt_pool_reserve(p, shared, per_thread)) return -1;\n"
    "    s->shared = (char *)p->shared;\n"
    "    for (int i = 0; i < p->n; i++) s->thr[i] = (char *)p->scr[i];\n"
    "    return 0;\n"
    "  }\n"
    "  s->own = aligned_alloc(64, shared + per_thread + 64);\n"
    "  if (!s->own) return -1;\n"
    "  s->shared = (char *)s->own; s->thr[0] = (char *)s->own + shared;\n"
    "  return 0;\n"
    "}\n"
    "static __attribute__((unused)) void hprt_scratch_put(hprt_scratch *s) { free(s->own); s->own = NULL; }\n"
    "#endif /* HPRT_RUNTIME */\n";

void cg_emit_runtime(ut_str *s) { ut_str_puts(s, RUNTIME); }

/* Scalar conversions (round to nearest even; NaN kept) — used by packing and
 * strided stores in every variant, and by the scalar variant everywhere. */
static const char SCONV[] =
    "static inline __attribute__((unused)) float $F_h2f(uint16_t h) {\n"
    "  uint32_t s = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, u;\n"
    "  float f;\n"
    "  if (e == 0) { f = (float)m * 5.9604644775390625e-8f; memcpy(&u, &f, 4); u |= s; }\n"
    "  else if (e == 31) u = s | 0x7f800000u | (m << 13);\n"
    "  else u = s | ((e + 112) << 23) | (m << 13);\n"
    "  memcpy(&f, &u, 4);\n"
    "  return f;\n"
    "}\n"
    "static inline __attribute__((unused)) uint16_t $F_f2h(float f) {\n"
    "  uint32_t x; memcpy(&x, &f, 4);\n"
    "  uint32_t sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;\n"
    "  if (ax >= 0x7f800000u) return (uint16_t)(sign | (ax > 0x7f800000u ? 0x7e00u : 0x7c00u));\n"
    "  if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);\n"
    "  if (ax < 0x38800000u) {\n"
    "    float a; memcpy(&a, &ax, 4);\n"
    "    volatile float t = a * 16777216.0f + 12582912.0f;\n"
    "    return (uint16_t)(sign | (uint32_t)(t - 12582912.0f));\n"
    "  }\n"
    "  uint32_t r = ax - 0x38000000u;\n"
    "  r += 0x0fffu + ((r >> 13) & 1u);\n"
    "  return (uint16_t)(sign | (r >> 13));\n"
    "}\n"
    "static inline __attribute__((unused)) float $F_b2f(uint16_t h) { uint32_t u = (uint32_t)h << 16; float f; memcpy(&f, &u, 4); return f; }\n"
    "static inline __attribute__((unused)) uint16_t $F_f2b(float f) {\n"
    "  uint32_t x; memcpy(&x, &f, 4);\n"
    "  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);\n"
    "  return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);\n"
    "}\n";

void cg_emit_scalar_conv(cg_out *o) { cg_emit(o, "%s", SCONV); }

static const char H512[] =
    "typedef __m512 $P_v;\n"
    "$I $P_v $P_zero(void) { return _mm512_setzero_ps(); }\n"
    "$I $P_v $P_set1(float x) { return _mm512_set1_ps(x); }\n"
    "$I $P_v $P_fma($P_v a, $P_v b, $P_v c) { return _mm512_fmadd_ps(a, b, c); }\n"
    "$I $P_v $P_fnma($P_v a, $P_v b, $P_v c) { return _mm512_fnmadd_ps(a, b, c); }\n"
    "$I $P_v $P_max($P_v a, $P_v b) { return _mm512_max_ps(a, b); }\n"
    "$I $P_v $P_min($P_v a, $P_v b) { return _mm512_min_ps(a, b); }\n"
    "$I $P_v $P_abs($P_v a) { return _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(a), _mm512_set1_epi32(0x7fffffff))); }\n"
    "$I __mmask16 $P_mk(int n) { n = n < 0 ? 0 : n > 16 ? 16 : n; return (__mmask16)((1u << n) - 1u); }\n"
    "$I $P_v $P_ld(const float *p) { return _mm512_loadu_ps(p); }\n"
    "$I $P_v $P_ldn(const float *p, int n) { return _mm512_maskz_loadu_ps($P_mk(n), p); }\n"
    "$I void $P_st(float *p, $P_v x) { _mm512_storeu_ps(p, x); }\n"
    "$I void $P_stn(float *p, $P_v x, int n) { _mm512_mask_storeu_ps(p, $P_mk(n), x); }\n"
    "$I $P_v $P_ldh(const uint16_t *p) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p)); }\n"
    "$I $P_v $P_ldnh(const uint16_t *p, int n) { return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16($P_mk(n), p)); }\n"
    "$I __m256i $P_f2h($P_v x) { return _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }\n"
    "$I void $P_sth(uint16_t *p, $P_v x) { _mm256_storeu_si256((__m256i *)p, $P_f2h(x)); }\n"
    "$I void $P_stnh(uint16_t *p, $P_v x, int n) { _mm256_mask_storeu_epi16(p, $P_mk(n), $P_f2h(x)); }\n"
    "$I $P_v $P_b2v(__m256i h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); }\n"
    "$I $P_v $P_ldb(const uint16_t *p) { return $P_b2v(_mm256_loadu_si256((const __m256i *)p)); }\n"
    "$I $P_v $P_ldnb(const uint16_t *p, int n) { return $P_b2v(_mm256_maskz_loadu_epi16($P_mk(n), p)); }\n"
    "$I __m256i $P_f2b($P_v x) {\n"
    "  __m512i u = _mm512_castps_si512(x), hi = _mm512_srli_epi32(u, 16);\n"
    "  __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff),\n"
    "      _mm512_and_si512(hi, _mm512_set1_epi32(1)))), 16);\n"
    "  r = _mm512_mask_mov_epi32(r, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), _mm512_or_si512(hi, _mm512_set1_epi32(0x40)));\n"
    "  return _mm512_cvtepi32_epi16(r);\n"
    "}\n"
    "$I void $P_stb(uint16_t *p, $P_v x) { _mm256_storeu_si256((__m256i *)p, $P_f2b(x)); }\n"
    "$I void $P_stnb(uint16_t *p, $P_v x, int n) { _mm256_mask_storeu_epi16(p, $P_mk(n), $P_f2b(x)); }\n"
    "$I $P_v $P_keep($P_v x, int n) { return _mm512_mask_mov_ps(_mm512_set1_ps(-INFINITY), $P_mk(n), x); }\n"
    "$I float $P_hmax($P_v x) { return _mm512_reduce_max_ps(x); }\n"
    "$I float $P_hsum($P_v x) { return _mm512_reduce_add_ps(x); }\n"
    "$I $P_v $P_selneg($P_v x, $P_v a, $P_v b) {\n"
    "  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ), b, a);\n"
    "}\n"
    "$I $P_v $P_sqrt($P_v x) { return _mm512_sqrt_ps(x); }\n"
    "$I $P_v $P_rint($P_v t) { return _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }\n"
    "$I $P_v $P_floor($P_v t) { return _mm512_roundscale_ps(t, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC); }\n"
    "$I $P_v $P_ceil($P_v t) { return _mm512_roundscale_ps(t, _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC); }\n"
    "/* p 2^n, n integral or +-inf: vscalefps, exact where the result is subnormal */\n"
    "$I $P_v $P_ldexp($P_v p, $P_v n) { return _mm512_scalef_ps(p, n); }\n"
    "/* 1/x: vrcp14ps and one Newton step (about 1 ulp) instead of vdivps (~10 cycles a\n"
    " * vector on Skylake-SP); where rcp14 gives 0, inf or NaN (x inf, 0 or NaN) that is exact */\n"
    "$I $P_v $P_rcp($P_v x) {\n"
    "  __m512 r = _mm512_rcp14_ps(x);\n"
    "  __mmask16 ok = _knot_mask16(_mm512_fpclass_ps_mask(r, 0x1f));\n"
    "  return _mm512_mask_fmadd_ps(r, ok, _mm512_fnmadd_ps(x, r, _mm512_set1_ps(1.0f)), r);\n"
    "}\n"
    "/* a/b: vdivps; a (1/b) with a correction and the fix-ups that keep IEEE's special\n"
    " * values measured slower (4.2 against 3.7 ns a vector) */\n"
    "$I $P_v $P_div($P_v a, $P_v b) { return _mm512_div_ps(a, b); }\n"
    "/* max / min that give NaN where either operand is (vmaxps gives its second operand) */\n"
    "$I $P_v $P_maxn($P_v a, $P_v b) { return _mm512_mask_mov_ps(_mm512_max_ps(a, b), _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q), a); }\n"
    "$I $P_v $P_minn($P_v a, $P_v b) { return _mm512_mask_mov_ps(_mm512_min_ps(a, b), _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q), a); }\n";

static const char H256[] =
    "typedef __m256 $P_v;\n"
    "$I $P_v $P_zero(void) { return _mm256_setzero_ps(); }\n"
    "$I $P_v $P_set1(float x) { return _mm256_set1_ps(x); }\n"
    "$I $P_v $P_fma($P_v a, $P_v b, $P_v c) { return _mm256_fmadd_ps(a, b, c); }\n"
    "$I $P_v $P_fnma($P_v a, $P_v b, $P_v c) { return _mm256_fnmadd_ps(a, b, c); }\n"
    "$I $P_v $P_max($P_v a, $P_v b) { return _mm256_max_ps(a, b); }\n"
    "$I $P_v $P_min($P_v a, $P_v b) { return _mm256_min_ps(a, b); }\n"
    "$I $P_v $P_abs($P_v a) { return _mm256_and_ps(a, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff))); }\n"
    "$I __m256i $P_mk(int n) { return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)); }\n"
    "$I $P_v $P_ld(const float *p) { return _mm256_loadu_ps(p); }\n"
    "$I $P_v $P_ldn(const float *p, int n) { return _mm256_maskload_ps(p, $P_mk(n)); }\n"
    "$I void $P_st(float *p, $P_v x) { _mm256_storeu_ps(p, x); }\n"
    "$I void $P_stn(float *p, $P_v x, int n) { _mm256_maskstore_ps(p, $P_mk(n), x); }\n"
    "$I $P_v $P_ldh(const uint16_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }\n"
    "$I $P_v $P_ldnh(const uint16_t *p, int n) {\n"
    "  uint16_t t[8] = {0}; if (n > 0) memcpy(t, p, (size_t)(n > 8 ? 8 : n) * 2); return $P_ldh(t);\n"
    "}\n"
    "$I void $P_sth(uint16_t *p, $P_v x) { _mm_storeu_si128((__m128i *)p, _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT)); }\n"
    "$I void $P_stnh(uint16_t *p, $P_v x, int n) {\n"
    "  uint16_t t[8]; $P_sth(t, x); if (n > 0) memcpy(p, t, (size_t)(n > 8 ? 8 : n) * 2);\n"
    "}\n"
    "$I $P_v $P_ldb(const uint16_t *p) {\n"
    "  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16));\n"
    "}\n"
    "$I $P_v $P_ldnb(const uint16_t *p, int n) {\n"
    "  uint16_t t[8] = {0}; if (n > 0) memcpy(t, p, (size_t)(n > 8 ? 8 : n) * 2); return $P_ldb(t);\n"
    "}\n"
    "$I void $P_stb(uint16_t *p, $P_v x) {\n"
    "  __m256i u = _mm256_castps_si256(x), hi = _mm256_srli_epi32(u, 16);\n"
    "  __m256i r = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(_mm256_set1_epi32(0x7fff),\n"
    "      _mm256_and_si256(hi, _mm256_set1_epi32(1)))), 16);\n"
    "  r = _mm256_blendv_epi8(r, _mm256_or_si256(hi, _mm256_set1_epi32(0x40)), _mm256_castps_si256(_mm256_cmp_ps(x, x, _CMP_UNORD_Q)));\n"
    "  r = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);\n"
    "  _mm_storeu_si128((__m128i *)p, _mm256_castsi256_si128(r));\n"
    "}\n"
    "$I void $P_stnb(uint16_t *p, $P_v x, int n) {\n"
    "  uint16_t t[8]; $P_stb(t, x); if (n > 0) memcpy(p, t, (size_t)(n > 8 ? 8 : n) * 2);\n"
    "}\n"
    "$I $P_v $P_keep($P_v x, int n) { return _mm256_blendv_ps(_mm256_set1_ps(-INFINITY), x, _mm256_castsi256_ps($P_mk(n))); }\n"
    "$I float $P_hmax($P_v x) {\n"
    "  __m128 m = _mm_max_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));\n"
    "  m = _mm_max_ps(m, _mm_shuffle_ps(m, m, 0x4e)); m = _mm_max_ps(m, _mm_shuffle_ps(m, m, 0xb1));\n"
    "  return _mm_cvtss_f32(m);\n"
    "}\n"
    "$I float $P_hsum($P_v x) {\n"
    "  __m128 m = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));\n"
    "  m = _mm_add_ps(m, _mm_shuffle_ps(m, m, 0x4e)); m = _mm_add_ps(m, _mm_shuffle_ps(m, m, 0xb1));\n"
    "  return _mm_cvtss_f32(m);\n"
    "}\n"
    "$I $P_v $P_selneg($P_v x, $P_v a, $P_v b) { return _mm256_blendv_ps(b, a, x); }\n"
    "$I $P_v $P_sqrt($P_v x) { return _mm256_sqrt_ps(x); }\n"
    "$I $P_v $P_rint($P_v t) { return _mm256_round_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }\n"
    "$I $P_v $P_floor($P_v t) { return _mm256_round_ps(t, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC); }\n"
    "$I $P_v $P_ceil($P_v t) { return _mm256_round_ps(t, _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC); }\n"
    "/* p 2^n, n integral in [-152, 129]: two exponent multiplies, so a subnormal result is kept */\n"
    "$I $P_v $P_ldexp($P_v p, $P_v n) {\n"
    "  __m256i k = _mm256_cvtps_epi32(n), k1 = _mm256_srai_epi32(k, 1), k2 = _mm256_sub_epi32(k, k1);\n"
    "  __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k1, _mm256_set1_epi32(127)), 23));\n"
    "  __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k2, _mm256_set1_epi32(127)), 23));\n"
    "  return _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);\n"
    "}\n"
    "$I $P_v $P_rcp($P_v x) { return _mm256_div_ps(_mm256_set1_ps(1.0f), x); }\n"
    "$I $P_v $P_div($P_v a, $P_v b) { return _mm256_div_ps(a, b); }\n"
    "/* max / min that give NaN where either operand is (vmaxps gives its second operand) */\n"
    "$I $P_v $P_maxn($P_v a, $P_v b) { return _mm256_blendv_ps(_mm256_max_ps(a, b), a, _mm256_cmp_ps(a, a, _CMP_UNORD_Q)); }\n"
    "$I $P_v $P_minn($P_v a, $P_v b) { return _mm256_blendv_ps(_mm256_min_ps(a, b), a, _mm256_cmp_ps(a, a, _CMP_UNORD_Q)); }\n";

static const char HSCALAR[] =
    "typedef float $P_v;\n"
    "$I $P_v $P_zero(void) { return 0.0f; }\n"
    "$I $P_v $P_set1(float x) { return x; }\n"
    "$I $P_v $P_fma($P_v a, $P_v b, $P_v c) { return a * b + c; }\n"
    "$I $P_v $P_fnma($P_v a, $P_v b, $P_v c) { return c - a * b; }\n"
    "$I $P_v $P_max($P_v a, $P_v b) { return a > b ? a : b; }\n"
    "$I $P_v $P_min($P_v a, $P_v b) { return a < b ? a : b; }\n"
    "$I $P_v $P_abs($P_v a) { return fabsf(a); }\n"
    "$I $P_v $P_ld(const float *p) { return *p; }\n"
    "$I $P_v $P_ldn(const float *p, int n) { return n > 0 ? *p : 0.0f; }\n"
    "$I void $P_st(float *p, $P_v x) { *p = x; }\n"
    "$I void $P_stn(float *p, $P_v x, int n) { if (n > 0) *p = x; }\n"
    "$I $P_v $P_ldh(const uint16_t *p) { return $F_h2f(*p); }\n"
    "$I $P_v $P_ldnh(const uint16_t *p, int n) { return n > 0 ? $F_h2f(*p) : 0.0f; }\n"
    "$I void $P_sth(uint16_t *p, $P_v x) { *p = $F_f2h(x); }\n"
    "$I void $P_stnh(uint16_t *p, $P_v x, int n) { if (n > 0) *p = $F_f2h(x); }\n"
    "$I $P_v $P_ldb(const uint16_t *p) { return $F_b2f(*p); }\n"
    "$I $P_v $P_ldnb(const uint16_t *p, int n) { return n > 0 ? $F_b2f(*p) : 0.0f; }\n"
    "$I void $P_stb(uint16_t *p, $P_v x) { *p = $F_f2b(x); }\n"
    "$I void $P_stnb(uint16_t *p, $P_v x, int n) { if (n > 0) *p = $F_f2b(x); }\n"
    "$I $P_v $P_keep($P_v x, int n) { return n > 0 ? x : -INFINITY; }\n"
    "$I float $P_hmax($P_v x) { return x; }\n"
    "$I float $P_hsum($P_v x) { return x; }\n"
    "$I $P_v $P_selneg($P_v x, $P_v a, $P_v b) { return x < 0.0f ? a : b; }\n"
    "$I $P_v $P_sqrt($P_v x) { return sqrtf(x); }\n"
    "$I $P_v $P_floor($P_v x) { return __builtin_floorf(x); }\n"
    "$I $P_v $P_ceil($P_v x) { return __builtin_ceilf(x); }\n"
    "$I $P_v $P_rint($P_v x) { return __builtin_rintf(x); }\n"
    "$I $P_v $P_exp2($P_v t) { return exp2f(t); }\n"
    "$I $P_v $P_exp2z($P_v t) { return t < -126.0f ? 0.0f : exp2f(t); }\n"
    "$I $P_v $P_exp($P_v x) { return expf(x); }\n"
    "$I $P_v $P_rcp($P_v x) { return 1.0f / x; }\n"
    "$I $P_v $P_div($P_v a, $P_v b) { return a / b; }\n"
    "$I $P_v $P_maxn($P_v a, $P_v b) { return a != a ? a : b != b ? b : a > b ? a : b; }\n"
    "$I $P_v $P_minn($P_v a, $P_v b) { return a != a ? a : b != b ? b : a < b ? a : b; }\n";

/* 2^f on [-0.5, 0.5], c0 = 1 (fitted for relative error: 1.3 ulp). */
static const char *const POLY2[] = {"1.5353361959569156e-4f", "1.3398875016719103e-3f", "9.61843691766262e-3f",
                                    "5.5503323674201965e-2f", "2.4022647738456726e-1f", "6.931471824645996e-1f"};
/* e^r on [-ln2/2, ln2/2] beyond 1 + r (Cephes expf). */
static const char *const POLYE[] = {"1.9875691500e-4f", "1.3981999507e-3f", "8.3334519073e-3f",
                                    "4.1665795894e-2f", "1.6666665459e-1f", "5.0000001201e-1f"};

/* 2^t of the vector ISAs, on $P_rint and $P_ldexp, as $P_<name>.  The
 * clamps keep NaN: vminps / vmaxps return their second operand when one is
 * NaN.  flush: 0 below 2^-126 (NaN kept), never a subnormal, which the
 * softmax wants: a subnormal result or input costs a microcode assist (rows
 * with a wide range ran 8x slower: 18 against 2.2 ms at 4096x1024). */
static void emit_exp2(cg_out *o, const char *name, bool flush) {
  cg_emit(o, "$I $P_v $P_%s($P_v t) {\n", name);
  if (o->isa->id == CGEN_ISA_AVX512) /* f = t - round(t) in one vreduceps: 0 for +-inf, so 2^+-inf = scalef(1, +-inf) */
    cg_emit(o, "  $P_v f = _mm512_reduce_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), n = t - f, p = $P_set1(%s);\n",
            POLY2[0]);
  else /* flushed: t from -126 on, so no product is subnormal */
    cg_emit(o, "%s  t = $P_min($P_set1(129.0f), $P_max($P_set1(%s), t));\n"
               "  $P_v n = $P_rint(t), f = t - n, p = $P_set1(%s);\n",
            flush ? "  $P_v keep = _mm256_cmp_ps(t, $P_set1(-126.0f), _CMP_NLT_UQ);\n" : "", flush ? "-126.0f" : "-152.0f",
            POLY2[0]);
  for (int i = 1; i < 6; i++) cg_emit(o, "  p = $P_fma(p, f, $P_set1(%s));\n", POLY2[i]);
  if (!flush) cg_emit(o, "  return $P_ldexp($P_fma(p, f, $P_set1(1.0f)), n);\n}\n");
  else if (o->isa->id == CGEN_ISA_AVX512) /* the masked-off lanes are not computed */
    cg_emit(o, "  __mmask16 k = _mm512_cmp_ps_mask(t, $P_set1(-126.0f), _CMP_NLT_UQ);\n"
               "  return _mm512_maskz_scalef_ps(k, $P_fma(p, f, $P_set1(1.0f)), n);\n}\n");
  else
    cg_emit(o, "  return _mm256_and_ps($P_ldexp($P_fma(p, f, $P_set1(1.0f)), n), keep);\n}\n");
}

/* 2^t (exact and flushed) and e^x of the vector ISAs. */
static void emit_exps(cg_out *o) {
  emit_exp2(o, "exp2", false);
  emit_exp2(o, "exp2z", true);
  /* Cody-Waite: x - n ln2 in two steps, exact enough for 1.5 ulp (2^(x log2 e)
   * would lose |x| 2^-24 relative in the product) */
  cg_emit(o, "$I $P_v $P_exp($P_v x) {\n"
             "  x = $P_min($P_set1(88.8f), $P_max($P_set1(-104.0f), x));\n"
             "  $P_v n = $P_rint(x * $P_set1(1.44269504088896341f));\n"
             "  $P_v r = $P_fma(n, $P_set1(-0.693359375f), x);\n"
             "  r = $P_fma(n, $P_set1(2.12194440e-4f), r);\n"
             "  $P_v p = $P_set1(%s);\n", POLYE[0]);
  for (int i = 1; i < 6; i++) cg_emit(o, "  p = $P_fma(p, r, $P_set1(%s));\n", POLYE[i]);
  cg_emit(o, "  return $P_ldexp($P_fma(p, r * r, r + $P_set1(1.0f)), n);\n}\n");
}

/* Numerical Recipes' erfcc: erfc(z) = t e^(-z^2 + P(t)), t = 1 / (1 + z/2),
 * P's coefficients from t^0 up (rel. error < 1.2e-7). */
static const double ERFCC[] = {-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806,
                               0.27886807, -1.13520398, 1.48851587, -0.82215223, 0.17087277};

/* Built on the layer above; the same text for every variant. */
static const char HCOMMON[] =
    "/* rounding to a half type and back, through the stores that convert */\n"
    "$I $P_v $P_rh($P_v x) { uint16_t t[16]; $P_sth(t, x); return $P_ldh(t); }\n"
    "$I $P_v $P_rb($P_v x) { uint16_t t[16]; $P_stb(t, x); return $P_ldb(t); }\n"
    "/* 1 / (1 + 2^(-x log2 e)), the reference's own spelling; a vdivps: the divider\n"
    " * runs beside the FMA port, which 2^t keeps busy (a Newton reciprocal was slower) */\n"
    "$I $P_v $P_sigmoid($P_v x) { return $P_set1(1.0f) / ($P_set1(1.0f) + $P_exp2(x * $P_set1(-1.44269504088896341f))); }\n"
    "$I $P_v $P_silu($P_v x) { return x * $P_sigmoid(x); }\n";

/* gelu(x) = x Phi(x) = 0.5 x erfc(-x/sqrt2): h = 0.5 erfc(|x|/sqrt2), x h
 * below 0, x - x h above.  erfc by ERFCC with its exponent taken to base 2
 * (z scaled by sqrt(log2 e), P(t) times log2 e), so 2^t needs no range
 * reduction by ln 2; z^2 is exact in the FMA, which makes the far tail more
 * accurate than e^(P(t) - z^2) with z^2 rounded.  x is clamped to FLT_MAX in
 * the product: +inf would make inf * 0 where h underflows; NaN and -inf still
 * give NaN, as the reference does. */
static void emit_gelu(cg_out *o) {
  const double L = 1.4426950408889634;
  double s = sqrt(L / 2); /* z = |x| s: z^2 = (x/sqrt2)^2 log2 e */
  cg_emit(o, "$I $P_v $P_gelu($P_v x) {\n  $P_v z = $P_abs(x) * $P_set1(%#.9gf);\n", s);
  cg_emit(o, "  $P_v t = $P_set1(1.0f) / $P_fma(z, $P_set1(%#.9gf), $P_set1(1.0f));\n", 0.5 / sqrt(2.0) / s);
  int n = (int)(sizeof ERFCC / sizeof ERFCC[0]);
  cg_emit(o, "  $P_v p = $P_set1(%#.9gf);\n", ERFCC[n - 1]);
  for (int i = n - 2; i >= 0; i--) cg_emit(o, "  p = $P_fma(p, t, $P_set1(%#.9gf));\n", ERFCC[i]);
  cg_emit(o, "  $P_v y = $P_min($P_set1(3.40282347e38f), x) * ($P_set1(0.5f) * t * $P_exp2($P_fnma(z, z, p * $P_set1(%#.9gf))));\n"
             "  return $P_selneg(x, y, x - y);\n}\n", L);
}

/* H512 with its bf16 rounding (the integer spelling: no AVX512_BF16 needed)
 * replaced by vcvtneps2bf16 (cg_out.bf16_cvt): one instruction for nine;
 * NaN stays a quiet NaN, subnormals become 0. */
static void emit_h512(cg_out *o) {
  static const char from[] = "$I __m256i $P_f2b($P_v x) {\n", to[] = "  return _mm512_cvtepi32_epi16(r);\n}\n";
  const char *a = o->bf16_cvt ? strstr(H512, from) : NULL, *b = a ? strstr(a, to) : NULL;
  if (!b) {
    cg_emit(o, "#ifdef HPRT_X86\n%s", H512);
    return;
  }
  cg_emit(o, "#ifdef HPRT_X86\n%.*s", (int)(a - H512), H512);
  cg_emit(o, "$I __m256i $P_f2b($P_v x) { return (__m256i)_mm512_cvtneps_pbh(x); }\n");
  cg_emit(o, "%s", b + strlen(to));
}

void cg_emit_isa_helpers(cg_out *o) {
  switch (o->isa->id) {
    case CGEN_ISA_AVX512: emit_h512(o); break;
    case CGEN_ISA_AVX2: cg_emit(o, "#ifdef HPRT_X86\n%s", H256); break;
    default: cg_emit(o, "%s", HSCALAR); break;
  }
  if (o->isa->id != CGEN_ISA_SCALAR) emit_exps(o);
  cg_emit(o, "%s", HCOMMON);
  emit_gelu(o);
}

void cg_emit_tr16(cg_out *o) {
  cg_emit(o, "$I void $P_tr16(__m512 *r) {\n  __m512 t[16];\n");
  cg_emit(o, "  for (int i = 0; i < 8; i++) { t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);"
             " t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]); }\n");
  cg_emit(o, "  for (int i = 0; i < 4; i++) {\n"
             "    r[4 * i] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);"
             " r[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);\n"
             "    r[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);"
             " r[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);\n  }\n");
  cg_emit(o, "  for (int i = 0; i < 4; i++) {\n"
             "    t[i] = _mm512_shuffle_f32x4(r[i], r[4 + i], 0x88); t[4 + i] = _mm512_shuffle_f32x4(r[i], r[4 + i], 0xDD);\n"
             "    t[8 + i] = _mm512_shuffle_f32x4(r[8 + i], r[12 + i], 0x88);"
             " t[12 + i] = _mm512_shuffle_f32x4(r[8 + i], r[12 + i], 0xDD);\n  }\n");
  cg_emit(o, "  for (int i = 0; i < 4; i++) {\n"
             "    r[i] = _mm512_shuffle_f32x4(t[i], t[8 + i], 0x88); r[8 + i] = _mm512_shuffle_f32x4(t[i], t[8 + i], 0xDD);\n"
             "    r[4 + i] = _mm512_shuffle_f32x4(t[4 + i], t[12 + i], 0x88);"
             " r[12 + i] = _mm512_shuffle_f32x4(t[4 + i], t[12 + i], 0xDD);\n  }\n}\n");
}

void cg_emit_cvt(cg_out *o, const char *name, const char *ctx, const char *src, const char *dst, tiny_dtype t, long n,
                 bool narrow) {
  const char *sx = cg_vsuffix(t), *ls = narrow ? "" : sx, *ss = narrow ? sx : "";
  const char *st = narrow ? "float" : "uint16_t", *dt = narrow ? "uint16_t" : "float";
  cg_emit(o, "static $T void $P_%s(void *vc, int task, int tid) {\n  const %s *cx = (const %s *)vc;\n  (void)tid;\n", name,
          ctx, ctx);
  cg_emit(o, "  long i0 = (long)task * %ldL, i1 = i0 + %ldL < %ldL ? i0 + %ldL : %ldL;\n", CG_WIDEN_CHUNK, CG_WIDEN_CHUNK, n,
          CG_WIDEN_CHUNK, n);
  cg_emit(o, "  const %s *s = (const %s *)%s;\n  %s *d = (%s *)%s;\n  long i = i0;\n", st, st, src, dt, dt, dst);
  cg_emit(o, "  for (; i + %d <= i1; i += %d) $P_st%s(d + i, $P_ld%s(s + i));\n", o->isa->w, o->isa->w, ss, ls);
  cg_emit(o, "  if (i < i1) $P_stn%s(d + i, $P_ldn%s(s + i, (int)(i1 - i)), (int)(i1 - i));\n}\n", ss, ls);
}

void cg_emit_widen(cg_out *o, const char *ctx, const char *src, const char *dst, tiny_dtype t, long n) {
  cg_emit_cvt(o, "widen", ctx, src, dst, t, n, false);
}

void cg_emit_activation(cg_out *o, cgen_epi_kind k, float scale, float shift, const char *x) {
  switch (k) {
    /* max(0, x): NaN and -0 pass through, as the reference relu (x < 0 ? 0 : x) */
    case CGEN_EPI_RELU: cg_emit(o, "      %s = $P_max($P_zero(), %s);\n", x, x); break;
    case CGEN_EPI_GELU: cg_emit(o, "      %s = $P_gelu(%s);\n", x, x); break;
    case CGEN_EPI_SILU: cg_emit(o, "      %s = $P_silu(%s);\n", x, x); break;
    case CGEN_EPI_SIGMOID: cg_emit(o, "      %s = $P_sigmoid(%s);\n", x, x); break;
    case CGEN_EPI_RINT: cg_emit(o, "      %s = $P_rint(%s);\n", x, x); break;
    case CGEN_EPI_DIV: cg_emit(o, "      %s = %s / $P_set1(%#.9gf);\n", x, x, (double)scale); break;
    case CGEN_EPI_SCALE:
      if (scale != 1.0f) cg_emit(o, "      %s = %s * $P_set1(%#.9gf);\n", x, x, (double)scale);
      if (shift != 0.0f) cg_emit(o, "      %s = %s + $P_set1(%#.9gf);\n", x, x, (double)shift);
      break;
    default: break;
  }
}

/* Read in each vector's epilogue, a BIAS_M operand is read again after
 * every store (the vector stores may alias the tensor pointers): two loads
 * in the chain before the store.  Broadcast once instead. */
void cg_emit_bias_regs(cg_out *o, const cgen_epi *epi, int n, const char *ep, const char *bias_idx) {
  char buf[256], pname[48];
  for (int i = 0; i < n; i++) {
    if (epi[i].kind != CGEN_EPI_BIAS_M) continue;
    snprintf(pname, sizeof pname, "%s[%d]", ep, i);
    cg_scalar_ld(o, buf, sizeof buf, epi[i].dtype, pname, bias_idx);
    cg_emit(o, "  const $P_v eb%d = $P_set1(%s);\n", i, buf);
  }
}

bool cg_emit_epi_common(cg_out *o, const cgen_epi *ep, int i, const char *bias_idx, const char *x) {
  char buf[256];
  switch (ep->kind) {
    case CGEN_EPI_BIAS_M: {
      char pname[32];
      snprintf(pname, sizeof pname, "tt->ep[%d]", i);
      cg_scalar_ld(o, buf, sizeof buf, ep->dtype, pname, bias_idx);
      cg_emit(o, "      %s = %s %s $P_set1(%s);\n", x, x, ep->mul ? "*" : "+", buf);
      return true;
    }
    case CGEN_EPI_BIAS_N:
    case CGEN_EPI_RESIDUAL: return false;
    case CGEN_EPI_ROUND: cg_emit(o, "      %s = $P_r%s(%s);\n", x, ep->dtype == TINY_FP16 ? "h" : "b", x); return true;
    case CGEN_EPI_CLAMP: /* x second: vmaxps / vminps return it on NaN, as the reference's max / min */
      if (ep->lo != -INFINITY) cg_emit(o, "      %s = $P_max($P_set1(%#.9gf), %s);\n", x, (double)ep->lo, x);
      if (ep->hi != INFINITY) cg_emit(o, "      %s = $P_min($P_set1(%#.9gf), %s);\n", x, (double)ep->hi, x);
      return true;
    case CGEN_EPI_GATE: { /* the same ops as the map it replaces: g = x * a + b, clamped, then x * g */
      cg_emit(o, "      { $P_v g_ = %s;", x);
      if (ep->scale != 1.0f) cg_emit(o, " g_ = g_ * $P_set1(%#.9gf);", (double)ep->scale);
      if (ep->shift != 0.0f) cg_emit(o, " g_ = g_ + $P_set1(%#.9gf);", (double)ep->shift);
      if (ep->lo != -INFINITY) cg_emit(o, " g_ = $P_max($P_set1(%#.9gf), g_);", (double)ep->lo);
      if (ep->hi != INFINITY) cg_emit(o, " g_ = $P_min($P_set1(%#.9gf), g_);", (double)ep->hi);
      cg_emit(o, " %s = %s * g_; }\n", x, x);
      return true;
    }
    default: cg_emit_activation(o, ep->kind, ep->scale, ep->shift, x); return true;
  }
}

void cg_emit_selector(cg_out *o, unsigned m, int force) {
  cg_set_isa(o, NULL);
  cg_emit(o, "/* the variant this process runs: %s3 avx512, 2 avx2, 1 scalar (decided once) */\n", o->has_amx ? "4 amx, " : "");
  cg_emit(o, "static int $F_sel(void) {\n");
  if (force >= 0 && (m >> force & 1u)) {
    cg_emit(o, "  return %d;\n}\n", force + 1);
    return;
  }
  cg_emit(o, "  static int sel;\n  int s = __atomic_load_n(&sel, __ATOMIC_RELAXED);\n");
  cg_emit(o, "  if (!s) {\n    s = 1;\n#ifdef HPRT_X86\n    __builtin_cpu_init();\n");
  if (m >> CGEN_ISA_AVX512 & 1u)
    cg_emit(o, "    if (__builtin_cpu_supports(\"avx512f\") && __builtin_cpu_supports(\"avx512bw\") &&\n"
               "        __builtin_cpu_supports(\"avx512vl\") && __builtin_cpu_supports(\"avx512dq\") &&\n"
               "        __builtin_cpu_supports(\"fma\")%s) s = 3;\n",
            o->bf16 || o->bf16_cvt ? " && __builtin_cpu_supports(\"avx512bf16\")" : "");
  if (o->has_amx) cg_emit(o, "#ifdef HPRT_AMX\n    if (s == 3 && hprt_amx_ok()) s = 4;\n#endif\n");
  if (m >> CGEN_ISA_AVX2 & 1u)
    cg_emit(o, "    if (s == 1 && __builtin_cpu_supports(\"avx2\") && __builtin_cpu_supports(\"fma\")) s = 2;\n");
  cg_emit(o, "#endif\n    __atomic_store_n(&sel, s, __ATOMIC_RELAXED);\n  }\n  return s;\n}\n");
}

void cg_emit_entry(cg_out *o, unsigned m, const char *ret, const char *suffix, const char *params, const char *args) {
  cg_set_isa(o, NULL);
  cg_emit(o, "%s $F%s(%s) {\n  int s = $F_sel();\n  (void)s;\n#ifdef HPRT_X86\n", ret, suffix, params);
  if (o->has_amx) cg_emit(o, "#ifdef HPRT_AMX\n  if (s == 4) return $F_amx%s_run(%s);\n#endif\n", suffix, args);
  if (m >> CGEN_ISA_AVX512 & 1u) cg_emit(o, "  if (s == 3) return $F_avx512%s_run(%s);\n", suffix, args);
  if (m >> CGEN_ISA_AVX2 & 1u) cg_emit(o, "  if (s == 2) return $F_avx2%s_run(%s);\n", suffix, args);
  /* no scalar variant: the JIT's host runs the widest one (cg_isa_set) */
  const char *last = m >> CGEN_ISA_SCALAR & 1u ? "scalar" : m >> CGEN_ISA_AVX512 & 1u ? "avx512" : "avx2";
  cg_emit(o, "#endif\n  return $F_%s%s_run(%s);\n}\n", last, suffix, args);
}

void cg_emit_dispatch(cg_out *o, unsigned m, int force, const char *params, const char *args) {
  cg_emit_selector(o, m, force);
  cg_emit_entry(o, m, "int", "", params, args);
}
