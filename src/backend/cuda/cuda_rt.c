/* cuda_rt.c — NVRTC + CUDA driver runtime, both dlopen'd.
 * Needs: cuda_rt.h, util (files, hashing), libdl.  Gives: cuda_rt_*.
 * Nothing here needs a CUDA header or a GPU to build; without libcuda (or
 * with the toolkit's stub) the status says "no GPU" and every GPU entry point
 * returns Unsupported with the reason. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backend/cuda/cuda_rt.h"
#include "util/util.h"

/* ---- the few driver / NVRTC declarations we need --------------------------- */
typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext;
typedef void *CUmodule;
typedef void *CUfunction;
typedef void *CUstream;
typedef void *CUevent;
typedef void *CUgraph;
typedef void *CUgraphExec;
typedef struct { /* CUgraphExecUpdateResultInfo */
  int result;
  void *error_node, *error_from_node;
} CUgraphExecUpdateInfo;
typedef int nvrtcResult;
typedef void *nvrtcProgram;

#define CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR 75
#define CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR 76
#define CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES 8
#define CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT 16
#define CU_STREAM_DEFAULT 0 /* blocking: ordered with the legacy stream the synchronous copies use */
#define CU_STREAM_CAPTURE_MODE_GLOBAL 0
/* cuTensorMapEncodeTiled enums (cuda.h, CUDA 12/13) */
#define CU_TENSOR_MAP_DATA_TYPE_FLOAT16 6
#define CU_TENSOR_MAP_DATA_TYPE_FLOAT32 7
#define CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 9
#define CU_TENSOR_MAP_L2_PROMOTION_L2_128B 2

typedef struct drv_api {
  CUresult (*Init)(unsigned);
  CUresult (*DeviceGetCount)(int *);
  CUresult (*DeviceGet)(CUdevice *, int);
  CUresult (*DeviceGetAttribute)(int *, int, CUdevice);
  CUresult (*DeviceGetName)(char *, int, CUdevice);
  CUresult (*PrimaryCtxRetain)(CUcontext *, CUdevice);
  CUresult (*PrimaryCtxRelease)(CUdevice);
  CUresult (*CtxSetCurrent)(CUcontext);
  CUresult (*CtxSynchronize)(void);
  CUresult (*ModuleLoadData)(CUmodule *, const void *);
  CUresult (*ModuleUnload)(CUmodule);
  CUresult (*ModuleGetFunction)(CUfunction *, CUmodule, const char *);
  CUresult (*FuncSetAttribute)(CUfunction, int, int);
  CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                           void **, void **);
  CUresult (*MemAlloc)(cuda_devptr *, size_t);
  CUresult (*MemFree)(cuda_devptr);
  CUresult (*MemcpyHtoD)(cuda_devptr, const void *, size_t);
  CUresult (*MemcpyDtoH)(void *, cuda_devptr, size_t);
  CUresult (*MemsetD8)(cuda_devptr, unsigned char, size_t);
  CUresult (*EventCreate)(CUevent *, unsigned);
  CUresult (*EventRecord)(CUevent, CUstream);
  CUresult (*EventSynchronize)(CUevent);
  CUresult (*EventElapsedTime)(float *, CUevent, CUevent);
  CUresult (*EventDestroy)(CUevent);
  CUresult (*GetErrorString)(CUresult, const char **);
  CUresult (*StreamWaitEvent)(CUstream, CUevent, unsigned); /* optional too */
  /* optional (SM90 and graphs): NULL when the driver lacks them */
  CUresult (*TensorMapEncodeTiled)(void *, int, uint32_t, void *, const uint64_t *, const uint64_t *, const uint32_t *,
                                   const uint32_t *, int, int, int, int);
  CUresult (*StreamCreate)(CUstream *, unsigned);
  CUresult (*StreamSynchronize)(CUstream);
  CUresult (*StreamDestroy)(CUstream);
  CUresult (*StreamBeginCapture)(CUstream, int);
  CUresult (*StreamEndCapture)(CUstream, CUgraph *);
  CUresult (*GraphInstantiate)(CUgraphExec *, CUgraph, unsigned long long);
  CUresult (*GraphLaunch)(CUgraphExec, CUstream);
  CUresult (*GraphExecDestroy)(CUgraphExec);
  CUresult (*GraphDestroy)(CUgraph);
  CUresult (*GraphExecUpdate)(CUgraphExec, CUgraph, CUgraphExecUpdateInfo *);
} drv_api;

typedef struct nvrtc_api {
  nvrtcResult (*Version)(int *, int *);
  nvrtcResult (*CreateProgram)(nvrtcProgram *, const char *, const char *, int, const char *const *,
                               const char *const *);
  nvrtcResult (*CompileProgram)(nvrtcProgram, int, const char *const *);
  nvrtcResult (*GetProgramLogSize)(nvrtcProgram, size_t *);
  nvrtcResult (*GetProgramLog)(nvrtcProgram, char *);
  nvrtcResult (*GetCUBINSize)(nvrtcProgram, size_t *);
  nvrtcResult (*GetCUBIN)(nvrtcProgram, char *);
  nvrtcResult (*GetPTXSize)(nvrtcProgram, size_t *);
  nvrtcResult (*GetPTX)(nvrtcProgram, char *);
  nvrtcResult (*DestroyProgram)(nvrtcProgram *);
  const char *(*GetErrorString)(nvrtcResult);
} nvrtc_api;

struct cuda_rt {
  cuda_rt_status st;
  void *nvrtc_lib, *cuda_lib;
  nvrtc_api nv;
  drv_api cu;
  CUdevice dev;
  CUcontext ctx;
  CUstream stream; /* where launches go: harp's stream, or a caller's (cuda_rt_use_stream) */
  CUstream own;    /* harp's own stream: copies' ordering, graph capture */
  char *cache_dir;
  char arch[16];
};

struct cuda_rt_module {
  CUmodule mod;
};

const cuda_rt_status *cuda_rt_status_of(const cuda_rt *rt) { return &rt->st; }
const char *cuda_rt_arch(const cuda_rt *rt) { return rt->arch; }

/* dlopen the first library of the list that loads; `why` collects failures. */
static void *open_first(const char *explicit_path, const char *const *names, char *why, size_t cap) {
  if (explicit_path) {
    void *h = dlopen(explicit_path, RTLD_NOW | RTLD_LOCAL);
    if (!h) snprintf(why, cap, "%s", dlerror());
    return h;
  }
  for (int i = 0; names[i]; i++) {
    void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (h) return h;
  }
  snprintf(why, cap, "none of %s, ... could be loaded", names[0]);
  return NULL;
}

#define SYM(api, lib, field, name, bad)                 \
  do {                                                  \
    *(void **)(&(api).field) = dlsym((lib), (name));    \
    if (!(api).field) (bad) = (name);                   \
  } while (0)

static void load_nvrtc(cuda_rt *rt, const char *path) {
  static const char *const names[] = {"libnvrtc.so.13",
                                      "libnvrtc.so.12",
                                      "libnvrtc.so.11.2",
                                      "libnvrtc.so",
                                      "/usr/local/cuda/lib64/libnvrtc.so.13",
                                      "/usr/local/cuda/lib64/libnvrtc.so.12",
                                      "/usr/local/cuda/lib64/libnvrtc.so",
                                      "/usr/local/cuda/lib/libnvrtc.so",
                                      NULL};
  rt->nvrtc_lib = open_first(path, names, rt->st.why_no_nvrtc, sizeof rt->st.why_no_nvrtc);
  if (!rt->nvrtc_lib) return;
  const char *bad = NULL;
  nvrtc_api *a = &rt->nv;
  SYM(*a, rt->nvrtc_lib, Version, "nvrtcVersion", bad);
  SYM(*a, rt->nvrtc_lib, CreateProgram, "nvrtcCreateProgram", bad);
  SYM(*a, rt->nvrtc_lib, CompileProgram, "nvrtcCompileProgram", bad);
  SYM(*a, rt->nvrtc_lib, GetProgramLogSize, "nvrtcGetProgramLogSize", bad);
  SYM(*a, rt->nvrtc_lib, GetProgramLog, "nvrtcGetProgramLog", bad);
  SYM(*a, rt->nvrtc_lib, GetCUBINSize, "nvrtcGetCUBINSize", bad);
  SYM(*a, rt->nvrtc_lib, GetCUBIN, "nvrtcGetCUBIN", bad);
  SYM(*a, rt->nvrtc_lib, GetPTXSize, "nvrtcGetPTXSize", bad);
  SYM(*a, rt->nvrtc_lib, GetPTX, "nvrtcGetPTX", bad);
  SYM(*a, rt->nvrtc_lib, DestroyProgram, "nvrtcDestroyProgram", bad);
  SYM(*a, rt->nvrtc_lib, GetErrorString, "nvrtcGetErrorString", bad);
  if (bad) {
    snprintf(rt->st.why_no_nvrtc, sizeof rt->st.why_no_nvrtc, "libnvrtc lacks %s", bad);
    rt->nvrtc_lib = NULL; /* left loaded, see cuda_rt_close */
    return;
  }
  rt->st.nvrtc = true;
  rt->nv.Version(&rt->st.nvrtc_major, &rt->st.nvrtc_minor);
}

static const char *cu_err(cuda_rt *rt, CUresult r) {
  const char *s = NULL;
  if (rt->cu.GetErrorString && rt->cu.GetErrorString(r, &s) == 0 && s) return s;
  return "unknown CUDA error";
}

static void load_driver(cuda_rt *rt, const char *path, int device) {
  static const char *const names[] = {"libcuda.so.1", "libcuda.so", NULL};
  char why[200];
  rt->cuda_lib = open_first(path, names, why, sizeof why);
  if (!rt->cuda_lib) {
    snprintf(rt->st.why_no_gpu, sizeof rt->st.why_no_gpu, "no NVIDIA driver (%s)", why);
    return;
  }
  const char *bad = NULL;
  drv_api *a = &rt->cu;
  void *l = rt->cuda_lib;
  SYM(*a, l, Init, "cuInit", bad);
  SYM(*a, l, DeviceGetCount, "cuDeviceGetCount", bad);
  SYM(*a, l, DeviceGet, "cuDeviceGet", bad);
  SYM(*a, l, DeviceGetAttribute, "cuDeviceGetAttribute", bad);
  SYM(*a, l, DeviceGetName, "cuDeviceGetName", bad);
  SYM(*a, l, PrimaryCtxRetain, "cuDevicePrimaryCtxRetain", bad);
  SYM(*a, l, PrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", bad);
  SYM(*a, l, CtxSetCurrent, "cuCtxSetCurrent", bad);
  SYM(*a, l, CtxSynchronize, "cuCtxSynchronize", bad);
  SYM(*a, l, ModuleLoadData, "cuModuleLoadData", bad);
  SYM(*a, l, ModuleUnload, "cuModuleUnload", bad);
  SYM(*a, l, ModuleGetFunction, "cuModuleGetFunction", bad);
  SYM(*a, l, FuncSetAttribute, "cuFuncSetAttribute", bad);
  SYM(*a, l, LaunchKernel, "cuLaunchKernel", bad);
  SYM(*a, l, MemAlloc, "cuMemAlloc_v2", bad);
  SYM(*a, l, MemFree, "cuMemFree_v2", bad);
  SYM(*a, l, MemcpyHtoD, "cuMemcpyHtoD_v2", bad);
  SYM(*a, l, MemcpyDtoH, "cuMemcpyDtoH_v2", bad);
  SYM(*a, l, MemsetD8, "cuMemsetD8_v2", bad);
  SYM(*a, l, EventCreate, "cuEventCreate", bad);
  SYM(*a, l, EventRecord, "cuEventRecord", bad);
  SYM(*a, l, EventSynchronize, "cuEventSynchronize", bad);
  SYM(*a, l, EventElapsedTime, "cuEventElapsedTime", bad);
  SYM(*a, l, EventDestroy, "cuEventDestroy_v2", bad);
  SYM(*a, l, GetErrorString, "cuGetErrorString", bad);
  if (bad) {
    snprintf(rt->st.why_no_gpu, sizeof rt->st.why_no_gpu, "libcuda lacks %s", bad);
    return;
  }
  const char *opt = NULL; /* optional entry points */
  SYM(*a, l, TensorMapEncodeTiled, "cuTensorMapEncodeTiled", opt);
  SYM(*a, l, StreamCreate, "cuStreamCreate", opt);
  SYM(*a, l, StreamWaitEvent, "cuStreamWaitEvent", opt);
  SYM(*a, l, StreamSynchronize, "cuStreamSynchronize", opt);
  SYM(*a, l, StreamDestroy, "cuStreamDestroy_v2", opt);
  SYM(*a, l, StreamBeginCapture, "cuStreamBeginCapture_v2", opt);
  SYM(*a, l, StreamEndCapture, "cuStreamEndCapture", opt);
  SYM(*a, l, GraphInstantiate, "cuGraphInstantiateWithFlags", opt);
  SYM(*a, l, GraphLaunch, "cuGraphLaunch", opt);
  SYM(*a, l, GraphExecDestroy, "cuGraphExecDestroy", opt);
  SYM(*a, l, GraphDestroy, "cuGraphDestroy", opt);
  SYM(*a, l, GraphExecUpdate, "cuGraphExecUpdate_v2", opt);
  (void)opt;
  rt->st.driver = true;
  CUresult r = a->Init(0);
  if (r) {
    snprintf(rt->st.why_no_gpu, sizeof rt->st.why_no_gpu, "cuInit failed: %s (%d)", cu_err(rt, r), r);
    return;
  }
  int count = 0;
  if ((r = a->DeviceGetCount(&count)) || count <= device || device < 0) {
    snprintf(rt->st.why_no_gpu, sizeof rt->st.why_no_gpu, "no CUDA device %d (%d found)", device, count);
    return;
  }
  if ((r = a->DeviceGet(&rt->dev, device)) ||
      (r = a->DeviceGetAttribute(&rt->st.cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, rt->dev)) ||
      (r = a->DeviceGetAttribute(&rt->st.cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, rt->dev)) ||
      (r = a->DeviceGetName(rt->st.device_name, (int)sizeof rt->st.device_name - 1, rt->dev)) ||
      (r = a->PrimaryCtxRetain(&rt->ctx, rt->dev)) || (r = a->CtxSetCurrent(rt->ctx))) {
    snprintf(rt->st.why_no_gpu, sizeof rt->st.why_no_gpu, "device setup failed: %s (%d)", cu_err(rt, r), r);
    if (rt->ctx) a->PrimaryCtxRelease(rt->dev);
    rt->ctx = NULL;
    return;
  }
  if (rt->st.cc_major < 8) {
    snprintf(rt->st.why_no_gpu, sizeof rt->st.why_no_gpu, "%s is sm_%d%d; harp's CUDA kernels need sm_80 or newer",
             rt->st.device_name, rt->st.cc_major, rt->st.cc_minor);
    a->PrimaryCtxRelease(rt->dev);
    rt->ctx = NULL;
    return;
  }
  a->DeviceGetAttribute(&rt->st.sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, rt->dev);
  if (a->StreamCreate && a->StreamCreate(&rt->stream, CU_STREAM_DEFAULT)) rt->stream = NULL;
  rt->own = rt->stream;
  rt->st.gpu = true;
  if (rt->st.cc_major == 9 && rt->st.cc_minor == 0) snprintf(rt->arch, sizeof rt->arch, "sm_90a");
  else snprintf(rt->arch, sizeof rt->arch, "sm_%d%d", rt->st.cc_major, rt->st.cc_minor);
}

harp_status cuda_rt_open(harp_error *e, const cuda_rt_opts *opts, cuda_rt **out) {
  *out = NULL;
  cuda_rt_opts def = {0};
  if (!opts) opts = &def;
  cuda_rt *rt = ut_xcalloc(1, sizeof *rt);
  if (!rt) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  snprintf(rt->arch, sizeof rt->arch, "sm_80");
  if (opts->cache_dir) {
    rt->cache_dir = ut_xmalloc(strlen(opts->cache_dir) + 1);
    if (!rt->cache_dir) {
      free(rt);
      return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
    }
    strcpy(rt->cache_dir, opts->cache_dir);
  }
  load_nvrtc(rt, opts->nvrtc_path);
  if (opts->no_driver) snprintf(rt->st.why_no_gpu, sizeof rt->st.why_no_gpu, "the driver was not requested");
  else load_driver(rt, opts->cuda_path, opts->device);
  *out = rt;
  return HARP_OK;
}

void cuda_rt_close(cuda_rt *rt) {
  if (!rt) return;
  if (rt->own && rt->cu.StreamDestroy) rt->cu.StreamDestroy(rt->own);
  if (rt->ctx) rt->cu.PrimaryCtxRelease(rt->dev);
  /* libcuda and libnvrtc stay loaded: both carry static C++ runtimes whose
   * allocations (e.g. libstdc++'s exception pool) would dangle after
   * dlclose, and unloading the driver under a live process is unsafe.  A
   * later dlopen of the same library only bumps its reference count. */
  free(rt->cache_dir);
  free(rt);
}

void cuda_binary_free(cuda_binary *b) {
  if (!b) return;
  free(b->cubin);
  free(b->ptx);
  free(b->log);
  memset(b, 0, sizeof *b);
}

/* ---- compile + cache ------------------------------------------------------------- */
void cuda_rt_cache_key(const char *src, const char *arch, const char *const *opts, int nopts, int nvrtc_ver,
                       char out[33]) {
  uint64_t h1 = ut_hash64(src, strlen(src), 0x68617270ULL); /* "harp" */
  uint64_t h2 = ut_hash64(src, strlen(src), 0x63756461ULL); /* "cuda" */
  const char *parts[2] = {arch, "|"};
  for (int i = 0; i < 2; i++) {
    h1 = ut_hash64(parts[i], strlen(parts[i]), h1);
    h2 = ut_hash64(parts[i], strlen(parts[i]), h2 ^ 0x9e3779b97f4a7c15ULL);
  }
  for (int i = 0; i < nopts; i++) {
    h1 = ut_hash64(opts[i], strlen(opts[i]) + 1, h1);
    h2 = ut_hash64(opts[i], strlen(opts[i]) + 1, h2);
  }
  h1 = ut_hash64(&nvrtc_ver, sizeof nvrtc_ver, h1);
  h2 = ut_hash64(&nvrtc_ver, sizeof nvrtc_ver, h2);
  snprintf(out, 33, "%016llx%016llx", (unsigned long long)h1, (unsigned long long)h2);
}

static bool cache_read(cuda_rt *rt, const char *key, cuda_binary *out) {
  if (!rt->cache_dir) return false;
  char path[4096];
  harp_error e = {0};
  char *cubin = NULL, *ptx = NULL;
  size_t n1 = 0, n2 = 0;
  snprintf(path, sizeof path, "%s/%s.cubin", rt->cache_dir, key);
  if (ut_read_file(&e, path, (size_t)1 << 30, &cubin, &n1) != HARP_OK) return false;
  snprintf(path, sizeof path, "%s/%s.ptx", rt->cache_dir, key);
  if (ut_read_file(&e, path, (size_t)1 << 30, &ptx, &n2) != HARP_OK || n1 == 0) {
    free(cubin);
    free(ptx);
    return false;
  }
  out->cubin = (unsigned char *)cubin;
  out->cubin_size = n1;
  out->ptx = ptx;
  out->log = ut_xcalloc(1, 1);
  out->cached = true;
  return true;
}

static void cache_write(cuda_rt *rt, const char *key, const cuda_binary *b) {
  if (!rt->cache_dir) return;
  harp_error e = {0};
  if (ut_mkdirs(&e, rt->cache_dir) != HARP_OK) return;
  char path[4096];
  /* .ptx first: a reader needs both, and the .cubin appearing last makes the pair whole. */
  snprintf(path, sizeof path, "%s/%s.ptx", rt->cache_dir, key);
  if (ut_write_file_atomic(&e, path, b->ptx, strlen(b->ptx)) != HARP_OK) return;
  snprintf(path, sizeof path, "%s/%s.cubin", rt->cache_dir, key);
  ut_write_file_atomic(&e, path, b->cubin, b->cubin_size);
}

harp_status cuda_rt_compile(harp_error *e, cuda_rt *rt, const char *src, const char *name, const char *arch,
                          const char *const *extra_opts, int nextra, cuda_binary *out) {
  memset(out, 0, sizeof *out);
  if (!rt->st.nvrtc) return ut_fail(e, HARP_E_UNSUPPORTED, name, "no NVRTC: %s", rt->st.why_no_nvrtc);
  if (!arch || strncmp(arch, "sm_", 3) != 0 || strlen(arch) > 8)
    return ut_fail(e, HARP_E_INVALID_ARG, name, "bad GPU architecture '%s'", arch ? arch : "(null)");
  if (nextra < 0 || nextra > 16) return ut_fail(e, HARP_E_INVALID_ARG, name, "too many NVRTC options");
  char archopt[48];
  snprintf(archopt, sizeof archopt, "--gpu-architecture=%s", arch);
  const char *opts[24];
  int n = 0;
  opts[n++] = archopt;
  opts[n++] = "--std=c++17";
  opts[n++] = "-default-device";
  for (int i = 0; i < nextra; i++) opts[n++] = extra_opts[i];
  char key[33];
  cuda_rt_cache_key(src, arch, opts, n, rt->st.nvrtc_major * 100 + rt->st.nvrtc_minor, key);
  if (cache_read(rt, key, out)) return HARP_OK;

  nvrtcProgram prog = NULL;
  nvrtcResult r = rt->nv.CreateProgram(&prog, src, name ? name : "harp.cu", 0, NULL, NULL);
  if (r) return ut_fail(e, HARP_E_INTERNAL, name, "nvrtcCreateProgram: %s", rt->nv.GetErrorString(r));
  nvrtcResult cr = rt->nv.CompileProgram(prog, n, opts);
  size_t logn = 0;
  rt->nv.GetProgramLogSize(prog, &logn);
  out->log = ut_xmalloc(logn + 1);
  if (!out->log) {
    rt->nv.DestroyProgram(&prog);
    return ut_fail(e, HARP_E_NO_MEMORY, name, "out of memory");
  }
  out->log[0] = 0;
  if (logn) rt->nv.GetProgramLog(prog, out->log);
  out->log[logn] = 0;
  if (cr) {
    harp_status s = ut_fail(e, HARP_E_INTERNAL, name, "NVRTC (%s) failed: %s: %.700s", arch, rt->nv.GetErrorString(cr),
                          out->log);
    rt->nv.DestroyProgram(&prog);
    cuda_binary_free(out);
    return s;
  }
  size_t cn = 0, pn = 0;
  rt->nv.GetCUBINSize(prog, &cn);
  rt->nv.GetPTXSize(prog, &pn);
  out->cubin = ut_xmalloc(cn ? cn : 1);
  out->ptx = ut_xmalloc(pn + 1);
  if (!out->cubin || !out->ptx) {
    rt->nv.DestroyProgram(&prog);
    cuda_binary_free(out);
    return ut_fail(e, HARP_E_NO_MEMORY, name, "out of memory");
  }
  rt->nv.GetCUBIN(prog, (char *)out->cubin);
  rt->nv.GetPTX(prog, out->ptx);
  out->ptx[pn] = 0;
  out->cubin_size = cn;
  rt->nv.DestroyProgram(&prog);
  cache_write(rt, key, out);
  return HARP_OK;
}

/* ---- GPU entry points ------------------------------------------------------------- */
static harp_status need_gpu(harp_error *e, cuda_rt *rt) {
  if (rt->st.gpu) return HARP_OK;
  return ut_fail(e, HARP_E_UNSUPPORTED, NULL, "no GPU: %s", rt->st.why_no_gpu);
}

#define CU_CHECK(call, what)                                                                             \
  do {                                                                                                   \
    CUresult r_ = (call);                                                                                \
    if (r_) return ut_fail(e, HARP_E_INTERNAL, NULL, "%s failed: %s (%d)", (what), cu_err(rt, r_), r_);  \
  } while (0)

harp_status cuda_rt_load(harp_error *e, cuda_rt *rt, const cuda_binary *bin, cuda_rt_module **out) {
  *out = NULL;
  if (need_gpu(e, rt)) return e->code;
  cuda_rt_module *m = ut_xcalloc(1, sizeof *m);
  if (!m) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  CUresult r = rt->cu.ModuleLoadData(&m->mod, bin->cubin);
  if (r) {
    free(m);
    return ut_fail(e, HARP_E_INTERNAL, NULL, "cuModuleLoadData failed: %s (%d)", cu_err(rt, r), r);
  }
  *out = m;
  return HARP_OK;
}

void cuda_rt_unload(cuda_rt *rt, cuda_rt_module *m) {
  if (!m) return;
  if (rt->st.gpu) rt->cu.ModuleUnload(m->mod);
  free(m);
}

harp_status cuda_rt_function(harp_error *e, cuda_rt *rt, cuda_rt_module *m, const char *name, void **fn) {
  if (need_gpu(e, rt)) return e->code;
  CUfunction f = NULL;
  CU_CHECK(rt->cu.ModuleGetFunction(&f, m->mod, name), "cuModuleGetFunction");
  *fn = f;
  return HARP_OK;
}

harp_status cuda_rt_launch(harp_error *e, cuda_rt *rt, void *fn, const int64_t grid[3], const int block[3],
                         int64_t smem_bytes, void **params) {
  if (need_gpu(e, rt)) return e->code;
  if (smem_bytes > 48 * 1024)
    CU_CHECK(rt->cu.FuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)smem_bytes),
             "cuFuncSetAttribute(max dynamic shared memory)");
  CU_CHECK(rt->cu.LaunchKernel(fn, (unsigned)grid[0], (unsigned)grid[1], (unsigned)grid[2], (unsigned)block[0],
                               (unsigned)block[1], (unsigned)block[2], (unsigned)smem_bytes, rt->stream, params, NULL),
           "cuLaunchKernel");
  return HARP_OK;
}

harp_status cuda_rt_sync(harp_error *e, cuda_rt *rt) {
  if (need_gpu(e, rt)) return e->code;
  if (rt->stream && rt->cu.StreamSynchronize) CU_CHECK(rt->cu.StreamSynchronize(rt->stream), "kernel execution");
  CU_CHECK(rt->cu.CtxSynchronize(), "kernel execution");
  return HARP_OK;
}

harp_status cuda_rt_alloc(harp_error *e, cuda_rt *rt, size_t bytes, cuda_devptr *out) {
  *out = 0;
  if (need_gpu(e, rt)) return e->code;
  CUresult r = rt->cu.MemAlloc(out, bytes ? bytes : 1);
  if (r) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "cuMemAlloc(%zu) failed: %s", bytes, cu_err(rt, r));
  return HARP_OK;
}

void cuda_rt_free(cuda_rt *rt, cuda_devptr p) {
  if (p && rt->st.gpu) rt->cu.MemFree(p);
}

harp_status cuda_rt_memset0(harp_error *e, cuda_rt *rt, cuda_devptr p, size_t bytes) {
  if (need_gpu(e, rt)) return e->code;
  CU_CHECK(rt->cu.MemsetD8(p, 0, bytes), "cuMemsetD8");
  return HARP_OK;
}

harp_status cuda_rt_htod(harp_error *e, cuda_rt *rt, cuda_devptr dst, const void *src, size_t bytes) {
  if (need_gpu(e, rt)) return e->code;
  if (bytes) CU_CHECK(rt->cu.MemcpyHtoD(dst, src, bytes), "cuMemcpyHtoD");
  return HARP_OK;
}

harp_status cuda_rt_dtoh(harp_error *e, cuda_rt *rt, void *dst, cuda_devptr src, size_t bytes) {
  if (need_gpu(e, rt)) return e->code;
  if (bytes) CU_CHECK(rt->cu.MemcpyDtoH(dst, src, bytes), "cuMemcpyDtoH");
  return HARP_OK;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* A timing's start: *t, reps doubles (zero), and the events *a, *b it
 * records between (each NULL until made; time_end frees what was made). */
static harp_status time_begin(harp_error *e, cuda_rt *rt, int reps, double **t, CUevent *a, CUevent *b) {
  if (!(*t = ut_xcalloc((size_t)reps, sizeof **t))) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  if (rt->cu.EventCreate(a, 0) || rt->cu.EventCreate(b, 0)) return ut_fail(e, HARP_E_INTERNAL, NULL, "cuEventCreate failed");
  return HARP_OK;
}

/* A timing's end (s its status so far): where s is OK, *ms_median the
 * median of t's reps times; the events a, b and t freed.  Returns s. */
static harp_status time_end(cuda_rt *rt, harp_status s, double *t, int reps, CUevent a, CUevent b, double *ms_median) {
  if (!s) {
    qsort(t, (size_t)reps, sizeof *t, cmp_double);
    *ms_median = t[reps / 2];
  }
  if (a) rt->cu.EventDestroy(a);
  if (b) rt->cu.EventDestroy(b);
  free(t);
  return s;
}

harp_status cuda_rt_time_launches(harp_error *e, cuda_rt *rt, void *fn, const int64_t grid[3], const int block[3],
                                int64_t smem_bytes, void **params, int reps, double *ms_median) {
  *ms_median = 0;
  if (need_gpu(e, rt)) return e->code;
  if (reps < 1 || reps > 10000) return ut_fail(e, HARP_E_INVALID_ARG, NULL, "reps must be 1..10000");
  double *t = NULL;
  CUevent a = NULL, b = NULL;
  harp_status s = time_begin(e, rt, reps, &t, &a, &b);
  for (int i = 0; i < 3 && !s; i++) s = cuda_rt_launch(e, rt, fn, grid, block, smem_bytes, params); /* warm up */
  for (int i = 0; i < reps && !s; i++) {
    float ms = 0;
    if (rt->cu.EventRecord(a, rt->stream)) s = ut_fail(e, HARP_E_INTERNAL, NULL, "cuEventRecord failed");
    if (!s) s = cuda_rt_launch(e, rt, fn, grid, block, smem_bytes, params);
    if (!s && (rt->cu.EventRecord(b, rt->stream) || rt->cu.EventSynchronize(b) || rt->cu.EventElapsedTime(&ms, a, b)))
      s = ut_fail(e, HARP_E_INTERNAL, NULL, "timing kernel launches failed");
    t[i] = ms;
  }
  return time_end(rt, s, t, reps, a, b, ms_median);
}

void *cuda_rt_stream(const cuda_rt *rt) { return rt->st.gpu ? rt->own : NULL; }

harp_status cuda_rt_record(harp_error *e, cuda_rt *rt, void **ev) {
  if (need_gpu(e, rt)) return e->code;
  if (!*ev) CU_CHECK(rt->cu.EventCreate((CUevent *)ev, 2 /* CU_EVENT_DISABLE_TIMING */), "cuEventCreate");
  CU_CHECK(rt->cu.EventRecord(*ev, rt->stream), "cuEventRecord");
  return HARP_OK;
}

harp_status cuda_rt_wait(harp_error *e, cuda_rt *rt, void *ev) {
  if (need_gpu(e, rt)) return e->code;
  if (!ev) return HARP_OK;
  if (!rt->cu.StreamWaitEvent) { /* an old driver: wait here instead */
    CU_CHECK(rt->cu.EventSynchronize(ev), "cuEventSynchronize");
    return HARP_OK;
  }
  CU_CHECK(rt->cu.StreamWaitEvent(rt->stream, ev, 0), "cuStreamWaitEvent");
  return HARP_OK;
}

void cuda_rt_event_free(cuda_rt *rt, void *ev) {
  if (ev && rt->st.gpu) rt->cu.EventDestroy(ev);
}

void *cuda_rt_use_stream(cuda_rt *rt, void *stream) {
  void *was = rt->stream;
  rt->stream = stream ? stream : rt->own;
  return was;
}

harp_status cuda_rt_time_fn(harp_error *e, cuda_rt *rt, int (*fn)(void *), void *ctx, int warmup, int reps,
                          double *ms_median) {
  *ms_median = 0;
  if (need_gpu(e, rt)) return e->code;
  if (reps < 1 || reps > 10000 || warmup < 0 || warmup > 10000)
    return ut_fail(e, HARP_E_INVALID_ARG, NULL, "reps must be 1..10000, warmup 0..10000");
  double *t = NULL;
  CUevent a = NULL, b = NULL;
  harp_status s = time_begin(e, rt, reps, &t, &a, &b);
  for (int i = 0; i < warmup && !s; i++)
    if (fn(ctx)) s = ut_fail(e, HARP_E_INTERNAL, NULL, "timed function failed");
  for (int i = 0; i < reps && !s; i++) {
    float ms = 0;
    if (rt->cu.EventRecord(a, rt->stream) || fn(ctx) || rt->cu.EventRecord(b, rt->stream) ||
        rt->cu.EventSynchronize(b) || rt->cu.EventElapsedTime(&ms, a, b))
      s = ut_fail(e, HARP_E_INTERNAL, NULL, "timing failed");
    t[i] = ms;
  }
  return time_end(rt, s, t, reps, a, b, ms_median);
}

harp_status cuda_rt_time_seq(harp_error *e, cuda_rt *rt, int n, int (*step)(void *, int), void *ctx, int warmup, int reps,
                           double *ms) {
  if (need_gpu(e, rt)) return e->code;
  if (n < 1 || n > 100000 || reps < 1 || reps > 10000 || warmup < 0 || warmup > 10000)
    return ut_fail(e, HARP_E_INVALID_ARG, NULL, "steps must be 1..100000, reps 1..10000, warmup 0..10000");
  CUevent *ev = ut_xcalloc((size_t)n + 1, sizeof *ev);
  double *t = ut_xcalloc((size_t)n * (size_t)reps, sizeof *t); /* [step][rep] */
  harp_status s = ev && t ? HARP_OK : ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  for (int i = 0; i <= n && !s; i++)
    if (rt->cu.EventCreate(&ev[i], 0)) s = ut_fail(e, HARP_E_INTERNAL, NULL, "cuEventCreate failed");
  for (int r = 0; r < warmup + reps && !s; r++) {
    bool timed = r >= warmup;
    if (timed && rt->cu.EventRecord(ev[0], rt->stream)) s = ut_fail(e, HARP_E_INTERNAL, NULL, "cuEventRecord failed");
    for (int i = 0; i < n && !s; i++) {
      if (step(ctx, i)) s = ut_fail(e, HARP_E_INTERNAL, NULL, "step %d of the timed sequence failed", i);
      else if (timed && rt->cu.EventRecord(ev[i + 1], rt->stream)) s = ut_fail(e, HARP_E_INTERNAL, NULL, "cuEventRecord failed");
    }
    if (!s && !timed && cuda_rt_sync(e, rt)) s = e->code;
    if (!s && timed && rt->cu.EventSynchronize(ev[n])) s = ut_fail(e, HARP_E_INTERNAL, NULL, "cuEventSynchronize failed");
    for (int i = 0; i < n && !s && timed; i++) {
      float x = 0;
      if (rt->cu.EventElapsedTime(&x, ev[i], ev[i + 1])) s = ut_fail(e, HARP_E_INTERNAL, NULL, "cuEventElapsedTime failed");
      t[(size_t)i * (size_t)reps + (size_t)(r - warmup)] = x;
    }
  }
  for (int i = 0; i < n && !s; i++) {
    double *ti = t + (size_t)i * (size_t)reps;
    qsort(ti, (size_t)reps, sizeof *ti, cmp_double);
    ms[i] = ti[reps / 2];
  }
  for (int i = 0; ev && i <= n; i++)
    if (ev[i]) rt->cu.EventDestroy(ev[i]);
  free(ev);
  free(t);
  return s;
}

harp_status cuda_model_mem_init(harp_error *e, cuda_rt *rt, size_t arena_bytes, const void *consts, size_t const_bytes,
                              cuda_model_mem *out) {
  memset(out, 0, sizeof *out);
  if (need_gpu(e, rt)) return e->code;
  if (cuda_rt_alloc(e, rt, arena_bytes, &out->arena)) return e->code;
  out->arena_bytes = arena_bytes;
  if (const_bytes) {
    if (cuda_rt_alloc(e, rt, const_bytes, &out->constpool) ||
        cuda_rt_htod(e, rt, out->constpool, consts, const_bytes)) {
      cuda_model_mem_free(rt, out);
      return e->code;
    }
    out->const_bytes = const_bytes;
  }
  return HARP_OK;
}

void cuda_model_mem_free(cuda_rt *rt, cuda_model_mem *mm) {
  cuda_rt_free(rt, mm->arena);
  cuda_rt_free(rt, mm->constpool);
  memset(mm, 0, sizeof mm[0]);
}

/* ---- SM90 tensor maps ----------------------------------------------------------- */
harp_status cuda_rt_encode_tmap(harp_error *e, cuda_rt *rt, const cuda_tmap_desc *d, cuda_devptr base, void *out) {
  if (need_gpu(e, rt)) return e->code;
  if (!rt->cu.TensorMapEncodeTiled) return ut_fail(e, HARP_E_UNSUPPORTED, NULL, "the driver has no cuTensorMapEncodeTiled");
  if (d->rank < 1 || d->rank > CUDA_TMAP_MAX_RANK) return ut_fail(e, HARP_E_INVALID_ARG, d->tensor, "tensor map rank %d", d->rank);
  if (base % 16) return ut_fail(e, HARP_E_MISALIGNED, d->tensor, "TMA needs a 16-byte aligned base");
  for (int i = 0; i + 1 < d->rank; i++)
    if (d->strides[i] % 16)
      return ut_fail(e, HARP_E_MISALIGNED, d->tensor, "TMA stride %llu is not a multiple of 16 bytes",
                     (unsigned long long)d->strides[i]);
  int dt = d->dtype == TINY_FP16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
           : d->dtype == TINY_BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                   : CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
  uint32_t es[CUDA_TMAP_MAX_RANK] = {1, 1, 1, 1, 1};
  CU_CHECK(rt->cu.TensorMapEncodeTiled(out, dt, (uint32_t)d->rank, (void *)(uintptr_t)base, d->dims, d->strides, d->box,
                                       es, 0 /* no interleave */, d->swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                                       0 /* out of bounds: zeros */),
           "cuTensorMapEncodeTiled");
  return HARP_OK;
}

harp_status cuda_rt_launch_kernel(harp_error *e, cuda_rt *rt, void *fn, const cuda_kernel *k, const cuda_devptr *args,
                                int64_t grid_x) {
  return cuda_rt_launch_kernel_at(e, rt, fn, k, args, grid_x, NULL);
}

harp_status cuda_rt_launch_kernel_at(harp_error *e, cuda_rt *rt, void *fn, const cuda_kernel *k, const cuda_devptr *args,
                                     int64_t grid_x, const int64_t *sv) {
  return cuda_rt_launch_kernel_xy(e, rt, fn, k, args, grid_x, 0, sv);
}

harp_status cuda_rt_launch_kernel_xy(harp_error *e, cuda_rt *rt, void *fn, const cuda_kernel *k, const cuda_devptr *args,
                                     int64_t grid_x, int64_t grid_y, const int64_t *sv) {
  /* alignment first: a misaligned view is the caller's error, GPU or not */
  for (int i = 0; i < k->nparams; i++) {
    const cuda_param *p = &k->params[i];
    int need = p->kind == CUDA_P_TMAP ? 16 : p->kind == CUDA_P_LONG ? 0 : p->align; /* a size: no address */
    if (args[i] && need > 1 && args[i] % (cuda_devptr)need)
      return ut_fail(e, HARP_E_MISALIGNED, p->name, "kernel %s needs parameter %s aligned to %d bytes", k->name, p->name,
                     need);
  }
  if (need_gpu(e, rt)) return e->code;
  typedef struct {
    _Alignas(64) unsigned char b[128];
  } tmap_blob;
  /* cuTensorMapEncodeTiled needs a 64-byte aligned map; ut_xcalloc aligns to 16 */
  unsigned char *raw = ut_xcalloc(1, ((size_t)k->nparams + 1) * sizeof(tmap_blob) + 63);
  tmap_blob *maps = raw ? (tmap_blob *)(((uintptr_t)raw + 63) & ~(uintptr_t)63) : NULL;
  void **params = ut_xcalloc((size_t)k->nparams + 1, sizeof *params);
  if (!maps || !params) {
    free(raw);
    free(params);
    return ut_fail(e, HARP_E_NO_MEMORY, k->name, "out of memory");
  }
  harp_status s = HARP_OK;
  for (int i = 0; i < k->nparams && !s; i++) {
    if (k->params[i].kind == CUDA_P_TMAP) {
      if (!k->params[i].tmap) s = ut_fail(e, HARP_E_INTERNAL, k->name, "tensor map parameter without a descriptor");
      else {
        cuda_tmap_desc d; /* a ShapeSet build's map: at the binding sv; as generated where a pair's other kernel runs */
        cuda_tmap_at(k->params[i].tmap, cuda_kernel_own_at(k, sv) ? sv : NULL, &d);
        s = cuda_rt_encode_tmap(e, rt, &d, args[i], maps[i].b);
      }
      params[i] = maps[i].b;
    } else {
      params[i] = (void *)&args[i];
    }
  }
  int64_t grid[3] = {grid_x > 0 ? grid_x : k->grid[0], grid_y > 0 ? grid_y : k->grid[1], k->grid[2]};
  if (!s) s = cuda_rt_launch(e, rt, fn, grid, k->block, k->smem_bytes, params);
  free(raw);
  free(params);
  return s;
}

/* ---- CUDA Graphs ------------------------------------------------------------------ */
struct cuda_rt_graph {
  CUgraph g;
  CUgraphExec x;
};

static harp_status need_graphs(harp_error *e, cuda_rt *rt) {
  if (need_gpu(e, rt)) return e->code;
  if (!rt->stream || !rt->cu.StreamBeginCapture || !rt->cu.StreamEndCapture || !rt->cu.GraphInstantiate ||
      !rt->cu.GraphLaunch || !rt->cu.GraphExecDestroy || !rt->cu.GraphDestroy)
    return ut_fail(e, HARP_E_UNSUPPORTED, NULL, "the driver has no stream capture / CUDA Graphs");
  return HARP_OK;
}

harp_status cuda_rt_graph_begin(harp_error *e, cuda_rt *rt) {
  if (need_graphs(e, rt)) return e->code;
  CU_CHECK(rt->cu.StreamBeginCapture(rt->stream, CU_STREAM_CAPTURE_MODE_GLOBAL), "cuStreamBeginCapture");
  return HARP_OK;
}

harp_status cuda_rt_graph_end(harp_error *e, cuda_rt *rt, bool instantiate, cuda_rt_graph **out) {
  *out = NULL;
  if (need_graphs(e, rt)) return e->code;
  cuda_rt_graph *g = ut_xcalloc(1, sizeof *g);
  if (!g) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  CUresult r = rt->cu.StreamEndCapture(rt->stream, &g->g);
  if (!r && instantiate) r = rt->cu.GraphInstantiate(&g->x, g->g, 0);
  if (r) {
    if (g->g) rt->cu.GraphDestroy(g->g);
    free(g);
    return ut_fail(e, HARP_E_INTERNAL, NULL, "graph capture failed: %s (%d)", cu_err(rt, r), r);
  }
  *out = g;
  return HARP_OK;
}

harp_status cuda_rt_graph_instantiate(harp_error *e, cuda_rt *rt, const cuda_rt_graph *src, cuda_rt_graph **out) {
  *out = NULL;
  if (need_graphs(e, rt)) return e->code;
  if (!src || !src->g) return ut_fail(e, HARP_E_INTERNAL, NULL, "no captured graph to instantiate");
  cuda_rt_graph *x = ut_xcalloc(1, sizeof *x);
  if (!x) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  CUresult r = rt->cu.GraphInstantiate(&x->x, src->g, 0);
  if (r) {
    free(x);
    return ut_fail(e, HARP_E_INTERNAL, NULL, "cuGraphInstantiate failed: %s (%d)", cu_err(rt, r), r);
  }
  *out = x;
  return HARP_OK;
}

/* In-place update of an executable graph (kernels, grids, arguments) from a
 * graph of the same shape: far cheaper than instantiating a new one.  Any
 * refusal (another topology, an old driver) leaves *updated false and the
 * exec untouched in what matters: the caller re-instantiates. */
harp_status cuda_rt_graph_update(harp_error *e, cuda_rt *rt, cuda_rt_graph *exec, const cuda_rt_graph *src, bool *updated) {
  *updated = false;
  if (need_graphs(e, rt)) return e->code;
  if (!exec || !exec->x || !src || !src->g) return ut_fail(e, HARP_E_INTERNAL, NULL, "graph update without graphs");
  if (!rt->cu.GraphExecUpdate) return HARP_OK;
  CUgraphExecUpdateInfo info = {0};
  *updated = rt->cu.GraphExecUpdate(exec->x, src->g, &info) == 0 && info.result == 0;
  return HARP_OK;
}

harp_status cuda_rt_graph_launch(harp_error *e, cuda_rt *rt, cuda_rt_graph *g) {
  if (need_graphs(e, rt)) return e->code;
  CU_CHECK(rt->cu.GraphLaunch(g->x, rt->stream), "cuGraphLaunch");
  return HARP_OK;
}

void cuda_rt_graph_free(cuda_rt *rt, cuda_rt_graph *g) {
  if (!g) return;
  if (rt->st.gpu) {
    if (g->x) rt->cu.GraphExecDestroy(g->x);
    if (g->g) rt->cu.GraphDestroy(g->g);
  }
  free(g);
}
