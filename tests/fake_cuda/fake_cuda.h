/* fake_cuda.h — the counters of the fake libcuda (fake_cuda.c), for tests
 * that load it through HARP_LIBCUDA and dlopen the same path to read them.
 *
 * harp_fake_cuda_stats(out, n) writes the counters in the order of
 * FAKE_CUDA_STATS below (out[FAKE_CUDA_<NAME>]); n < FAKE_CUDA_NSTATS
 * writes the first n, n > FAKE_CUDA_NSTATS zero-fills the rest.
 * harp_fake_cuda_reset() zeroes every counter except the live ones (what is
 * allocated / retained / created now).  With HARP_FAKE_CUDA_LOG=FILE the
 * counters are written to FILE at exit as one JSON object keyed by the
 * lower-case names. */
#ifndef HARP_FAKE_CUDA_H
#define HARP_FAKE_CUDA_H

/* X(NAME, "json key", live) — live counters survive harp_fake_cuda_reset. */
#define FAKE_CUDA_STATS(X)                                                                                   \
  X(DIRECT_LAUNCHES, "direct_launches", 0)         /* cuLaunchKernel outside a capture */                   \
  X(CAPTURES_BEGUN, "captures_begun", 0)           /* cuStreamBeginCapture_v2 that succeeded */             \
  X(CAPTURES_ENDED, "captures_ended", 0)           /* cuStreamEndCapture that returned a graph */           \
  X(GRAPHS_INSTANTIATED, "graphs_instantiated", 0) /* cuGraphInstantiateWithFlags */                        \
  X(GRAPH_LAUNCHES, "graph_launches", 0)           /* cuGraphLaunch */                                      \
  X(GRAPH_KERNELS, "graph_kernels", 0)             /* kernel nodes run by those graph launches */           \
  X(GRAPH_FUNCTIONS, "graph_functions", 0)         /* distinct functions among an instantiated graph's nodes */ \
  X(EXEC_UPDATES, "exec_updates", 0)               /* cuGraphExecUpdate_v2 that succeeded */                \
  X(FAILED_UPDATES, "failed_updates", 0)           /* cuGraphExecUpdate_v2 that failed */                   \
  X(MODULES_LOADED, "modules_loaded", 0)           /* cuModuleLoadData */                                   \
  X(TENSOR_MAPS, "tensor_maps", 0)                 /* cuTensorMapEncodeTiled that succeeded */              \
  X(LIVE_ALLOCS, "live_allocs", 1)                 /* cuMemAlloc_v2 not yet freed */                        \
  X(LIVE_BYTES, "live_bytes", 1)                   /* their sizes */                                        \
  X(HTOD_BYTES, "htod_bytes", 0)                   /* cuMemcpyHtoD_v2 */                                    \
  X(DTOH_BYTES, "dtoh_bytes", 0)                   /* cuMemcpyDtoH_v2 */                                    \
  X(LIVE_MODULES, "live_modules", 1)               /* loaded, not unloaded */                               \
  X(LIVE_GRAPHS, "live_graphs", 1)                 /* CUgraph not destroyed */                              \
  X(LIVE_EXECS, "live_execs", 1)                   /* CUgraphExec not destroyed */                          \
  X(LIVE_STREAMS, "live_streams", 1)               /* cuStreamCreate not destroyed */                       \
  X(LIVE_EVENTS, "live_events", 1)                 /* cuEventCreate not destroyed */                        \
  X(CTX_REFS, "ctx_refs", 1)                       /* primary context retains minus releases */             \
  X(STREAM_WAITS, "stream_waits", 0)               /* cuStreamWaitEvent */                                  \
  X(LAST_DEVICE, "last_device", 0)                 /* the ordinal of the last primary context retained */   \
  X(CAPTURE_VIOLATIONS, "capture_violations", 0)   /* synchronous calls refused during a capture */         \
  X(INJECTED_FAILURES, "injected_failures", 0)     /* calls failed by HARP_FAKE_CUDA_FAIL */

enum {
#define FAKE_CUDA_ENUM_(name, key, live) FAKE_CUDA_##name,
  FAKE_CUDA_STATS(FAKE_CUDA_ENUM_)
#undef FAKE_CUDA_ENUM_
      FAKE_CUDA_NSTATS
};

/* Each counter's JSON key, and whether it is live, in FAKE_CUDA_STATS order. */
static const char *const fake_cuda_stat_names[] = {
#define FAKE_CUDA_NAME_(name, key, live) key,
    FAKE_CUDA_STATS(FAKE_CUDA_NAME_)
#undef FAKE_CUDA_NAME_
};
static const int fake_cuda_stat_live[] = {
#define FAKE_CUDA_LIVE_(name, key, live) live,
    FAKE_CUDA_STATS(FAKE_CUDA_LIVE_)
#undef FAKE_CUDA_LIVE_
};

void harp_fake_cuda_stats(long *out, int n);
void harp_fake_cuda_reset(void);

/* The launch log.  harp_fake_cuda_record(1) empties it and starts logging
 * every kernel that runs (a direct cuLaunchKernel, or a kernel node of a
 * cuGraphLaunch) with the stream it went to and its arguments: the first 8
 * bytes of each kernelParams entry up to the first NULL entry (harp's
 * cuda_rt_launch_kernel ends its array with one; at most 16).  Record only
 * around harp's own launches.  harp_fake_cuda_record(0) stops.
 * harp_fake_cuda_launch(i, &stream, args, max) gives entry i: its argument
 * count (-1 past the end), up to max arguments into args. */
void harp_fake_cuda_record(int on);
int harp_fake_cuda_nlaunches(void);
int harp_fake_cuda_launch(int i, const void **where, unsigned long long *args, int max);
/* A tensor map (cuTensorMapEncodeTiled) logged as an argument: its first 8
 * bytes hold dims[1] (dims[0] for rank 1) in the low 32 bits and, rank > 2,
 * strides[1] / 16 in the high 32 (the rest of the map is zeros). */
/* Entry i's grid (-1 past the end). */
int harp_fake_cuda_launch_grid(int i, unsigned grid[3]);

#endif
