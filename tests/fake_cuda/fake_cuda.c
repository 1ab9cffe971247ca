/* fake_cuda.c — a fake libcuda (shared library harp_fake_cuda) for tests.
 *
 * CI has NVRTC but no GPU, so the host side of harp's CUDA runtime
 * (src/backend/cuda/cuda_rt.c: loading, argument setup, launches, CUDA Graph
 * capture / instantiate / replay) would never run there.  Loaded through
 * HARP_LIBCUDA, this library implements every driver entry point cuda_rt.c
 * resolves, plus cuGraphExecUpdate_v2, with the CUDA 12/13 signatures
 * (types declared in fake_cuda_impl.h, not taken from cuda.h).  It executes
 * no kernel: launches are checked against the driver's rules and recorded,
 * "device" memory is host memory, and counters say what the host did
 * (fake_cuda.h).  Streams, capture and graphs: fake_cuda_graph.c.
 *
 * Stricter than the driver where a real run would fault later: copies,
 * memsets and tensor maps must stay inside a live allocation, and
 * synchronous calls (alloc, free, copies, memset, synchronize) during a
 * global-mode capture fail with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and
 * invalidate the capture, as the driver does.
 *
 * Environment, read at each call (tests change it with setenv):
 *   HARP_FAKE_CUDA_CC    compute capability "MAJOR.MINOR" (default "8.0")
 *   HARP_FAKE_CUDA_FAIL  comma-separated entry points that fail: 910 for
 *                        cuGraphExecUpdate_v2, 2 (out of memory) for
 *                        cuMemAlloc_v2, 999 for the others
 *   HARP_FAKE_CUDA_DEVICES  how many devices (default 1; all alike)
 *   HARP_FAKE_CUDA_LOG   file that receives the counters as JSON at exit
 * One device, one thread: no locking. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_cuda_impl.h"

typedef struct func {
  int magic;
  char *name;
  int max_dyn_smem; /* cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES) */
  struct func *next;
} func;
typedef struct module {
  int magic;
  unsigned char *image; /* a copy of an ELF image (a cubin), to check names; else NULL */
  size_t image_size;
  func *funcs;
} module;
typedef struct event {
  int magic, recorded;
  long long t;
} event;

fake_state fake;

/* ---- helpers ------------------------------------------------------------------------ */
int fake_injected(const char *sym) {
  const char *l = getenv("HARP_FAKE_CUDA_FAIL");
  size_t n = strlen(sym);
  for (const char *p = l; p && *p;) {
    while (*p == ',' || *p == ' ') p++;
    const char *q = p;
    while (*q && *q != ',' && *q != ' ') q++;
    if ((size_t)(q - p) == n && !strncmp(p, sym, n)) {
      ST(INJECTED_FAILURES)++;
      return 1;
    }
    p = q;
  }
  return 0;
}

static void cc(int *major, int *minor) {
  const char *s = getenv("HARP_FAKE_CUDA_CC");
  *major = 8, *minor = 0;
  if (s && sscanf(s, "%d.%d", major, minor) != 2) *major = 8, *minor = 0;
}

/* A synchronous call while a global / thread-local capture runs: refused,
 * and the capture is invalidated (cudaStreamCaptureModeGlobal semantics). */
int fake_capture_violation(void) {
  int bad = 0;
  for (stream *s = fake.streams; s; s = s->next)
    if (s->capturing && s->mode != 2) s->invalidated = bad = 1;
  if (bad) ST(CAPTURE_VIOLATIONS)++;
  return bad ? CAPTURE_UNSUPPORTED : OK;
}

static int push(nodes *l, const knode *k) {
  if (l->n == l->cap) {
    int cap = l->cap ? 2 * l->cap : 16;
    knode *v = realloc(l->v, (size_t)cap * sizeof *v);
    if (!v) return OUT_OF_MEMORY;
    l->v = v, l->cap = cap;
  }
  l->v[l->n++] = *k;
  return OK;
}

/* The live allocation holding [p, p + n), or -1. */
static int find_alloc(CUdeviceptr p, size_t n) {
  for (int i = 0; i < fake.nallocs; i++) {
    CUdeviceptr a = (CUdeviceptr)(uintptr_t)fake.allocs[i].p;
    if (p >= a && p - a <= fake.allocs[i].n && n <= fake.allocs[i].n - (p - a)) return i;
  }
  return -1;
}

/* ---- init, device, context --------------------------------------------------------- */
CUresult cuInit(unsigned flags) {
  INJECT(UNKNOWN);
  if (flags) return INVALID_VALUE;
  fake.initialized = 1;
  return OK;
}

/* HARP_FAKE_CUDA_DEVICES (1 to 16; default 1): how many devices there are. */
static int devices(void) {
  const char *v = getenv("HARP_FAKE_CUDA_DEVICES");
  int n = v && *v ? atoi(v) : 1;
  return n < 1 ? 1 : n > 16 ? 16 : n;
}

CUresult cuDeviceGetCount(int *count) {
  INJECT(UNKNOWN);
  if (!fake.initialized) return NOT_INITIALIZED;
  if (!count) return INVALID_VALUE;
  *count = devices();
  return OK;
}

CUresult cuDeviceGet(int *dev, int ordinal) {
  INJECT(UNKNOWN);
  if (!fake.initialized) return NOT_INITIALIZED;
  if (!dev) return INVALID_VALUE;
  if (ordinal < 0 || ordinal >= devices()) return INVALID_DEVICE;
  *dev = ordinal;
  return OK;
}

/* Max opt-in shared memory per block of an A100 / other sm_8x / H100. */
static int smem_optin(void) {
  int ma, mi;
  cc(&ma, &mi);
  return ma >= 9 ? 232448 : mi == 0 ? 166912 : 101376;
}

CUresult cuDeviceGetAttribute(int *v, int attr, int dev) {
  INJECT(UNKNOWN);
  if (!v) return INVALID_VALUE;
  if (dev < 0 || dev >= devices()) return INVALID_DEVICE;
  int ma, mi;
  cc(&ma, &mi);
  switch (attr) {
  case 75: *v = ma; break;     /* COMPUTE_CAPABILITY_MAJOR */
  case 76: *v = mi; break;     /* COMPUTE_CAPABILITY_MINOR */
  case 16: *v = 132; break;    /* MULTIPROCESSOR_COUNT */
  case 1: *v = 1024; break;    /* MAX_THREADS_PER_BLOCK */
  case 8: *v = 49152; break;   /* MAX_SHARED_MEMORY_PER_BLOCK */
  case 10: *v = 32; break;     /* WARP_SIZE */
  case 97: *v = smem_optin(); break; /* MAX_SHARED_MEMORY_PER_BLOCK_OPTIN */
  default: *v = 0;
  }
  return OK;
}

CUresult cuDeviceGetName(char *name, int len, int dev) {
  INJECT(UNKNOWN);
  if (!name || len <= 0) return INVALID_VALUE;
  if (dev < 0 || dev >= devices()) return INVALID_DEVICE;
  snprintf(name, (size_t)len, "harp fake GPU");
  return OK;
}

CUresult cuDevicePrimaryCtxRetain(void **ctx, int dev) {
  INJECT(UNKNOWN);
  if (!ctx) return INVALID_VALUE;
  if (dev < 0 || dev >= devices()) return INVALID_DEVICE;
  *ctx = &fake.ctx_token;
  ST(CTX_REFS)++;
  ST(LAST_DEVICE) = dev;
  return OK;
}

CUresult cuDevicePrimaryCtxRelease_v2(int dev) {
  INJECT(UNKNOWN);
  if (dev < 0 || dev >= devices()) return INVALID_DEVICE;
  if (ST(CTX_REFS) <= 0) return INVALID_CONTEXT; /* released more often than retained */
  ST(CTX_REFS)--;
  return OK;
}

CUresult cuCtxSetCurrent(void *ctx) {
  INJECT(UNKNOWN);
  return ctx == NULL || ctx == &fake.ctx_token ? OK : INVALID_CONTEXT;
}

CUresult cuCtxSynchronize(void) {
  INJECT(UNKNOWN);
  return fake_capture_violation();
}

CUresult cuGetErrorString(CUresult r, const char **s) {
  INJECT(UNKNOWN);
  static const struct {
    int code;
    const char *name;
  } names[] = {{0, "CUDA_SUCCESS"}, {1, "CUDA_ERROR_INVALID_VALUE"}, {2, "CUDA_ERROR_OUT_OF_MEMORY"},
               {3, "CUDA_ERROR_NOT_INITIALIZED"}, {100, "CUDA_ERROR_NO_DEVICE"}, {101, "CUDA_ERROR_INVALID_DEVICE"},
               {200, "CUDA_ERROR_INVALID_IMAGE"}, {201, "CUDA_ERROR_INVALID_CONTEXT"},
               {400, "CUDA_ERROR_INVALID_HANDLE"}, {401, "CUDA_ERROR_ILLEGAL_STATE"}, {500, "CUDA_ERROR_NOT_FOUND"},
               {700, "CUDA_ERROR_ILLEGAL_ADDRESS"}, {900, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"},
               {901, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED"}, {910, "CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE"}};
  if (!s) return INVALID_VALUE;
  *s = "CUDA_ERROR_UNKNOWN";
  for (size_t i = 0; i < sizeof names / sizeof *names; i++)
    if (names[i].code == r) *s = names[i].name;
  return OK;
}

/* ---- modules and functions --------------------------------------------------------- */
/* The extent of a 64-bit little-endian ELF image (a cubin), 0 for anything else. */
static size_t elf_size(const unsigned char *p) {
  if (memcmp(p, "\177ELF", 4) || p[4] != 2 || p[5] != 1) return 0;
  uint64_t shoff, phoff;
  uint16_t phentsize, phnum, shentsize, shnum;
  memcpy(&phoff, p + 0x20, 8), memcpy(&shoff, p + 0x28, 8);
  memcpy(&phentsize, p + 0x36, 2), memcpy(&phnum, p + 0x38, 2);
  memcpy(&shentsize, p + 0x3a, 2), memcpy(&shnum, p + 0x3c, 2);
  uint64_t a = shoff + (uint64_t)shentsize * shnum, b = phoff + (uint64_t)phentsize * phnum;
  return (size_t)(a > b ? a : b);
}

CUresult cuModuleLoadData(void **mod, const void *image) {
  INJECT(UNKNOWN);
  if (!mod || !image) return INVALID_VALUE;
  module *m = calloc(1, sizeof *m);
  if (!m) return OUT_OF_MEMORY;
  m->magic = MAGIC_MODULE;
  m->image_size = elf_size(image);
  if (m->image_size && (m->image = malloc(m->image_size))) /* the driver copies too: the caller may free its own */
    memcpy(m->image, image, m->image_size);
  else m->image_size = 0;
  *mod = m;
  ST(MODULES_LOADED)++, ST(LIVE_MODULES)++;
  return OK;
}

CUresult cuModuleUnload(void *mod) {
  INJECT(UNKNOWN);
  module *m = mod;
  if (!m || m->magic != MAGIC_MODULE) return INVALID_HANDLE;
  for (func *f = m->funcs, *nx; f; f = nx) {
    nx = f->next;
    f->magic = 0;
    free(f->name);
    free(f);
  }
  m->magic = 0;
  free(m->image);
  free(m);
  ST(LIVE_MODULES)--;
  return OK;
}

CUresult cuModuleGetFunction(void **fn, void *mod, const char *name) {
  INJECT(UNKNOWN);
  module *m = mod;
  if (!fn || !name) return INVALID_VALUE;
  if (!m || m->magic != MAGIC_MODULE) return INVALID_HANDLE;
  for (func *f = m->funcs; f; f = f->next)
    if (!strcmp(f->name, name)) return *fn = f, OK; /* one handle per name, as the driver */
  /* a cubin holds its kernels' names in its string table */
  if (m->image_size && !memmem(m->image, m->image_size, name, strlen(name) + 1)) return NOT_FOUND;
  func *f = calloc(1, sizeof *f);
  if (!f || !(f->name = strdup(name))) {
    free(f);
    return OUT_OF_MEMORY;
  }
  f->magic = MAGIC_FUNC;
  f->max_dyn_smem = 49152;
  f->next = m->funcs;
  m->funcs = f;
  *fn = f;
  return OK;
}

CUresult cuFuncSetAttribute(void *fn, int attr, int value) {
  INJECT(UNKNOWN);
  func *f = fn;
  if (!f || f->magic != MAGIC_FUNC) return INVALID_HANDLE;
  if (attr == 8) { /* MAX_DYNAMIC_SHARED_SIZE_BYTES */
    if (value < 0 || value > smem_optin()) return INVALID_VALUE;
    f->max_dyn_smem = value;
  }
  return OK;
}

/* ---- launches ----------------------------------------------------------------------- */
CUresult cuLaunchKernel(void *fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned smem, void *hstream, void **params, void **extra) {
  INJECT(UNKNOWN);
  func *f = fn;
  if (!f) return INVALID_VALUE;
  if (f->magic != MAGIC_FUNC) return INVALID_HANDLE;
  if (!gx || !gy || !gz || !bx || !by || !bz) return INVALID_VALUE;
  if (gx > 0x7fffffffu || gy > 65535 || gz > 65535 || (unsigned long long)bx * by * bz > 1024 || bz > 64)
    return INVALID_VALUE;
  if (smem > (unsigned)f->max_dyn_smem) return INVALID_VALUE; /* over 48 KiB needs cuFuncSetAttribute first */
  if (params && extra) return INVALID_VALUE; /* the driver takes one or the other; params are not read */
  if (check_stream(hstream)) return INVALID_HANDLE;
  stream *s = is_legacy(hstream) ? NULL : hstream;
  knode k = {f, {gx, gy, gz}, {bx, by, bz}, smem, 0, {0}, NULL};
  for (int i = 0; fake.record && params && i < FAKE_MAX_ARGS && params[i]; i++)
    memcpy(&k.args[k.nargs++], params[i], sizeof k.args[0]);
  if (s && s->capturing) return push(&s->rec, &k);
  fake_log_launch(&k, hstream);
  ST(DIRECT_LAUNCHES)++;
  fake.clock++;
  return OK;
}

/* ---- memory ------------------------------------------------------------------------- */
CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytes) {
  INJECT(OUT_OF_MEMORY);
  if (!dptr || !bytes) return INVALID_VALUE;
  if (fake_capture_violation()) return CAPTURE_UNSUPPORTED;
  if (fake.nallocs == fake.cap_allocs) {
    int cap = fake.cap_allocs ? 2 * fake.cap_allocs : 64;
    alloc *v = realloc(fake.allocs, (size_t)cap * sizeof *v);
    if (!v) return OUT_OF_MEMORY;
    fake.allocs = v, fake.cap_allocs = cap;
  }
  size_t n = (bytes + 255) / 256 * 256; /* aligned_alloc wants a multiple of the alignment */
  unsigned char *p = aligned_alloc(256, n);
  if (!p) return OUT_OF_MEMORY;
  memset(p, 0, n);
  fake.allocs[fake.nallocs++] = (alloc){p, bytes};
  *dptr = (CUdeviceptr)(uintptr_t)p;
  ST(LIVE_ALLOCS)++, ST(LIVE_BYTES) += (long)bytes;
  return OK;
}

CUresult cuMemFree_v2(CUdeviceptr p) {
  INJECT(UNKNOWN);
  if (fake_capture_violation()) return CAPTURE_UNSUPPORTED;
  if (!p) return OK;
  int i = find_alloc(p, 0);
  if (i < 0 || (CUdeviceptr)(uintptr_t)fake.allocs[i].p != p) return INVALID_VALUE; /* not an allocation's base */
  free(fake.allocs[i].p);
  ST(LIVE_ALLOCS)--, ST(LIVE_BYTES) -= (long)fake.allocs[i].n;
  fake.allocs[i] = fake.allocs[--fake.nallocs];
  return OK;
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n) {
  INJECT(UNKNOWN);
  if (fake_capture_violation()) return CAPTURE_UNSUPPORTED;
  if ((n && !src) || find_alloc(dst, n) < 0) return INVALID_VALUE;
  if (n) memcpy((void *)(uintptr_t)dst, src, n);
  ST(HTOD_BYTES) += (long)n;
  return OK;
}

CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n) {
  INJECT(UNKNOWN);
  if (fake_capture_violation()) return CAPTURE_UNSUPPORTED;
  if ((n && !dst) || find_alloc(src, n) < 0) return INVALID_VALUE;
  if (n) memcpy(dst, (const void *)(uintptr_t)src, n);
  ST(DTOH_BYTES) += (long)n;
  return OK;
}

CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char v, size_t n) {
  INJECT(UNKNOWN);
  if (fake_capture_violation()) return CAPTURE_UNSUPPORTED;
  if (find_alloc(dst, n) < 0) return INVALID_VALUE;
  memset((void *)(uintptr_t)dst, v, n);
  return OK;
}

/* ---- events ------------------------------------------------------------------------- */
CUresult cuEventCreate(void **ev, unsigned flags) {
  INJECT(UNKNOWN);
  if (!ev) return INVALID_VALUE;
  event *e = calloc(1, sizeof *e);
  if (!e) return OUT_OF_MEMORY;
  e->magic = MAGIC_EVENT;
  *ev = e;
  ST(LIVE_EVENTS)++;
  return OK;
}

CUresult cuEventRecord(void *ev, void *hstream) {
  INJECT(UNKNOWN);
  event *e = ev;
  if (!e || e->magic != MAGIC_EVENT || check_stream(hstream)) return INVALID_HANDLE;
  e->t = ++fake.clock;
  e->recorded = 1;
  return OK;
}

CUresult cuStreamWaitEvent(void *hstream, void *ev, unsigned flags) {
  INJECT(UNKNOWN);
  event *e = ev;
  if (flags) return INVALID_VALUE;
  if (!e || e->magic != MAGIC_EVENT || check_stream(hstream)) return INVALID_HANDLE;
  ST(STREAM_WAITS)++;
  return OK;
}

CUresult cuEventSynchronize(void *ev) {
  INJECT(UNKNOWN);
  event *e = ev;
  return e && e->magic == MAGIC_EVENT ? OK : INVALID_HANDLE;
}

CUresult cuEventElapsedTime(float *ms, void *a, void *b) {
  INJECT(UNKNOWN);
  event *x = a, *y = b;
  if (!ms) return INVALID_VALUE;
  if (!x || !y || x->magic != MAGIC_EVENT || y->magic != MAGIC_EVENT || !x->recorded || !y->recorded)
    return INVALID_HANDLE;
  *ms = (float)(y->t - x->t) * 0.001f;
  return OK;
}

CUresult cuEventDestroy_v2(void *ev) {
  INJECT(UNKNOWN);
  event *e = ev;
  if (!e || e->magic != MAGIC_EVENT) return INVALID_HANDLE;
  e->magic = 0;
  free(e);
  ST(LIVE_EVENTS)--;
  return OK;
}

/* ---- SM90 tensor maps: the driver's documented parameter rules ----------------------- */
CUresult cuTensorMapEncodeTiled(void *map, int dtype, uint32_t rank, void *addr, const uint64_t *dims,
                                const uint64_t *strides, const uint32_t *box, const uint32_t *estrides, int interleave,
                                int swizzle, int l2, int oob) {
  INJECT(UNKNOWN);
  static const int esize[13] = {1, 2, 4, 4, 8, 8, 2, 4, 8, 2, 4, 4, 4};
  if (!map || (uintptr_t)map % 64 || dtype < 0 || dtype > 12 || rank < 1 || rank > 5 || !dims || !box || !estrides ||
      (rank > 1 && !strides) || (uintptr_t)addr % 16 || interleave < 0 || interleave > 2 || swizzle < 0 ||
      swizzle > 6 || l2 < 0 || l2 > 3 || oob < 0 || oob > 1 || (interleave && rank < 3))
    return INVALID_VALUE;
  uint64_t es = (uint64_t)esize[dtype], extent = dims[0] * es;
  for (uint32_t i = 0; i < rank; i++) {
    if (!dims[i] || dims[i] > (1ull << 32) || !box[i] || box[i] > 256 || !estrides[i] || estrides[i] > 8)
      return INVALID_VALUE;
    if (i + 1 < rank && (!strides[i] || strides[i] % 16 || strides[i] >= (1ull << 40))) return INVALID_VALUE;
    if (i > 0) extent += (dims[i] - 1) * strides[i - 1];
  }
  uint64_t inner = box[0] * es, span = swizzle >= 3 ? 128 : swizzle ? 16u << swizzle : 0;
  if ((!interleave && inner % 16) || (!interleave && span && inner > span)) return INVALID_VALUE;
  /* stricter than the driver: the described tensor lies in one allocation */
  if (find_alloc((CUdeviceptr)(uintptr_t)addr, (size_t)extent) < 0) return INVALID_VALUE;
  memset(map, 0, 128);
  /* what a test reads back from the launch log (fake_cuda.h) */
  uint64_t tag = (rank > 1 ? dims[1] : dims[0]) & 0xffffffffu;
  if (rank > 2) tag |= strides[1] / 16 << 32;
  memcpy(map, &tag, sizeof tag);
  ST(TENSOR_MAPS)++;
  return OK;
}

/* ---- counters ----------------------------------------------------------------------- */

void harp_fake_cuda_stats(long *out, int n) {
  for (int i = 0; i < n; i++) out[i] = i < FAKE_CUDA_NSTATS ? fake.stat[i] : 0;
}

void harp_fake_cuda_reset(void) {
  for (int i = 0; i < FAKE_CUDA_NSTATS; i++)
    if (!fake_cuda_stat_live[i]) fake.stat[i] = 0;
}

void fake_log_launch(const knode *k, const void *where) {
  if (!fake.record) return;
  knode c = *k;
  c.stream = where;
  push(&fake.log, &c); /* out of memory: the entry is lost, and the test's count says so */
}

void harp_fake_cuda_record(int on) {
  free(fake.log.v);
  memset(&fake.log, 0, sizeof fake.log);
  fake.record = on;
}

int harp_fake_cuda_nlaunches(void) { return fake.log.n; }

int harp_fake_cuda_launch(int i, const void **where, unsigned long long *args, int max) {
  if (i < 0 || i >= fake.log.n) return -1;
  const knode *k = &fake.log.v[i];
  if (where) *where = k->stream;
  for (int a = 0; args && a < k->nargs && a < max; a++) args[a] = k->args[a];
  return k->nargs;
}

int harp_fake_cuda_launch_grid(int i, unsigned grid[3]) {
  if (i < 0 || i >= fake.log.n) return -1;
  memcpy(grid, fake.log.v[i].grid, sizeof fake.log.v[i].grid);
  return 0;
}

/* At exit: the counters for a test that drives the harp CLI (HARP_FAKE_CUDA_LOG). */
__attribute__((destructor)) static void write_log(void) {
  const char *path = getenv("HARP_FAKE_CUDA_LOG");
  FILE *f = path && *path ? fopen(path, "w") : NULL;
  if (!f) return;
  fputc('{', f);
  for (int i = 0; i < FAKE_CUDA_NSTATS; i++) fprintf(f, "%s\"%s\": %ld", i ? ", " : "", fake_cuda_stat_names[i], fake.stat[i]);
  fputs("}\n", f);
  fclose(f);
}
