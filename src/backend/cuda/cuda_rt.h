/* cuda_rt.h — the CUDA runtime of harp: NVRTC and the CUDA driver API,
 * both loaded with dlopen so that harp builds and runs where CUDA is absent.
 *
 *   cuda_rt_open        load libnvrtc / libcuda (each optional), cuInit, pick
 *                       a device, create a context.  Never fails for a
 *                       missing library or GPU: the status says what exists.
 *   cuda_rt_compile     CUDA C -> cubin (+ PTX) for an architecture, through
 *                       a disk cache keyed by the content hash (atomic writes).
 *   cuda_rt_load        cuModuleLoadData + cuModuleGetFunction.
 *   cuda_rt_launch      cuLaunchKernel (opting in to > 48 KB shared memory).
 *   device memory       one arena per model (the Function's required_memory),
 *                       the ConstPool uploaded once, copies both ways.
 *
 * No CUDA header is needed: the few driver / NVRTC types are declared here.
 * Library search: the options' explicit paths, then the sonames
 * libnvrtc.so.13, .12, .11.2, libnvrtc.so and libcuda.so.1, libcuda.so, then
 * /usr/local/cuda/lib64 and /usr/local/cuda/lib. */
#ifndef HARP_CUDA_RT_H
#define HARP_CUDA_RT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/cuda/cuda.h"
#include "harp/error.h"

typedef uint64_t cuda_devptr; /* CUdeviceptr */

typedef struct cuda_rt_opts {
  const char *nvrtc_path; /* NULL: search */
  const char *cuda_path;  /* NULL: search (tests point it at the toolkit's stub libcuda) */
  const char *cache_dir;  /* NULL: no disk cache */
  int device;             /* ordinal */
  bool no_driver;         /* compile only: do not load libcuda */
} cuda_rt_opts;

typedef struct cuda_rt cuda_rt;

/* What was found.  why_* are human-readable reasons when something is absent. */
typedef struct cuda_rt_status {
  bool nvrtc;        /* NVRTC loaded */
  int nvrtc_major, nvrtc_minor;
  bool driver;       /* libcuda loaded */
  bool gpu;          /* a device and a context are ready */
  int cc_major, cc_minor; /* compute capability of the device */
  int sm_count;           /* multiprocessors (persistent grids) */
  char device_name[128];
  char why_no_nvrtc[256];
  char why_no_gpu[256];
} cuda_rt_status;

/* Allocates the handle; fails only for OutOfMemory. */
harp_status cuda_rt_open(harp_error *e, const cuda_rt_opts *opts, cuda_rt **out);
void cuda_rt_close(cuda_rt *rt);
const cuda_rt_status *cuda_rt_status_of(const cuda_rt *rt);

/* The NVRTC architecture name for this device ("sm_80", "sm_90a", ...), or
 * "sm_80" when there is no GPU. */
const char *cuda_rt_arch(const cuda_rt *rt);

/* A compiled translation unit. */
typedef struct cuda_binary {
  unsigned char *cubin;
  size_t cubin_size;
  char *ptx;  /* NUL-terminated */
  char *log;  /* compiler log (may be empty) */
  bool cached; /* came from the disk cache */
} cuda_binary;
void cuda_binary_free(cuda_binary *b);

/* Compile src (the name is used in messages) for arch ("sm_80", "sm_90a").
 * extra_opts may be NULL.  A compile error is an InternalError (generated
 * code must compile) whose message ends with the start of the NVRTC log;
 * no NVRTC is Unsupported. */
harp_status cuda_rt_compile(harp_error *e, cuda_rt *rt, const char *src, const char *name, const char *arch,
                          const char *const *extra_opts, int nextra, cuda_binary *out);

/* ---- needs a GPU (else Unsupported "no GPU: <reason>") ---- */
typedef struct cuda_rt_module cuda_rt_module;
harp_status cuda_rt_load(harp_error *e, cuda_rt *rt, const cuda_binary *bin, cuda_rt_module **out);
void cuda_rt_unload(cuda_rt *rt, cuda_rt_module *m);
/* CUfunction of a kernel, as an opaque pointer. */
harp_status cuda_rt_function(harp_error *e, cuda_rt *rt, cuda_rt_module *m, const char *name, void **fn);
harp_status cuda_rt_launch(harp_error *e, cuda_rt *rt, void *fn, const int64_t grid[3], const int block[3],
                         int64_t smem_bytes, void **params);
harp_status cuda_rt_sync(harp_error *e, cuda_rt *rt);
harp_status cuda_rt_alloc(harp_error *e, cuda_rt *rt, size_t bytes, cuda_devptr *out);
void cuda_rt_free(cuda_rt *rt, cuda_devptr p);
harp_status cuda_rt_memset0(harp_error *e, cuda_rt *rt, cuda_devptr p, size_t bytes);
harp_status cuda_rt_htod(harp_error *e, cuda_rt *rt, cuda_devptr dst, const void *src, size_t bytes);
harp_status cuda_rt_dtoh(harp_error *e, cuda_rt *rt, void *dst, cuda_devptr src, size_t bytes);
/* Launch generated kernel k: args[i] is the device pointer of parameter i;
 * for a tensor-map parameter (SM90), the device pointer of the tensor it
 * maps (the map is encoded here from k->params[i].tmap).  grid_x > 0
 * overrides grid.x (persistent kernels: the SM count). */
harp_status cuda_rt_launch_kernel(harp_error *e, cuda_rt *rt, void *fn, const cuda_kernel *k, const cuda_devptr *args,
                                int64_t grid_x);
/* cuda_rt_launch_kernel of a ShapeSet build at the binding sv (the box's
 * symbols' values; NULL: the maps as generated): a tensor map's run-time
 * dims and strides encoded at sv (cuda_tmap_at). */
harp_status cuda_rt_launch_kernel_at(harp_error *e, cuda_rt *rt, void *fn, const cuda_kernel *k, const cuda_devptr *args,
                                     int64_t grid_x, const int64_t *sv);
/* cuda_rt_launch_kernel_at with grid.y too (grid_y > 0 overrides k's: a
 * run-time grid along y, cuda_launch.grid_axis). */
harp_status cuda_rt_launch_kernel_xy(harp_error *e, cuda_rt *rt, void *fn, const cuda_kernel *k, const cuda_devptr *args,
                                     int64_t grid_x, int64_t grid_y, const int64_t *sv);
/* cuTensorMapEncodeTiled for one descriptor at base: 128 bytes into out. */
harp_status cuda_rt_encode_tmap(harp_error *e, cuda_rt *rt, const cuda_tmap_desc *d, cuda_devptr base, void *out);

/* CUDA Graphs: capture the launches between begin and end on harp's stream,
 * then replay them with one call.  rt_gpu_run keeps one graph per built model
 * (one shape binding); a GPU session (rt_gpu_session) keeps one executable
 * graph per ShapeSet and updates it in place for each binding of the cluster.
 * A cuda_rt_graph holds a captured graph, an executable one, or both. */
typedef struct cuda_rt_graph cuda_rt_graph;
harp_status cuda_rt_graph_begin(harp_error *e, cuda_rt *rt);
/* End the capture (always, also when the launches failed); instantiate too
 * unless asked not to. */
harp_status cuda_rt_graph_end(harp_error *e, cuda_rt *rt, bool instantiate, cuda_rt_graph **out);
/* A new executable graph from a captured one. */
harp_status cuda_rt_graph_instantiate(harp_error *e, cuda_rt *rt, const cuda_rt_graph *src, cuda_rt_graph **out);
/* Update exec from src in place; *updated false when the driver refuses
 * (another topology, no cuGraphExecUpdate): instantiate instead. */
harp_status cuda_rt_graph_update(harp_error *e, cuda_rt *rt, cuda_rt_graph *exec, const cuda_rt_graph *src, bool *updated);
harp_status cuda_rt_graph_launch(harp_error *e, cuda_rt *rt, cuda_rt_graph *g);
void cuda_rt_graph_free(cuda_rt *rt, cuda_rt_graph *g);

/* Median milliseconds of one kernel launched reps times (after 3 untimed
 * launches), timed with an event pair each; bench helper. */
harp_status cuda_rt_time_launches(harp_error *e, cuda_rt *rt, void *fn, const int64_t grid[3], const int block[3],
                                int64_t smem_bytes, void **params, int reps, double *ms_median);

/* harp's CUstream (for libraries such as cuBLAS in benchmarks), NULL without a GPU. */
void *cuda_rt_stream(const cuda_rt *rt);
/* Send launches, graph captures and replays to stream (a caller's CUstream;
 * NULL: harp's own) from now on; returns the one used until now, to put
 * back.  The synchronous copies and cuda_rt_sync are unaffected in meaning:
 * cuda_rt_sync waits for this stream and the context. */
void *cuda_rt_use_stream(cuda_rt *rt, void *stream);
/* Record *ev (a CUevent made on first use, without timing) on the current
 * stream; cuda_rt_wait makes the current stream wait for its last record
 * (cuStreamWaitEvent; an old driver without it: the host waits).
 * cuda_rt_event_free destroys one (NULL: nothing). */
harp_status cuda_rt_record(harp_error *e, cuda_rt *rt, void **ev);
harp_status cuda_rt_wait(harp_error *e, cuda_rt *rt, void *ev);
void cuda_rt_event_free(cuda_rt *rt, void *ev);
/* Median milliseconds of reps calls of fn(ctx) on harp's stream, after
 * `warmup` untimed calls, timed with events.  fn returns 0 on success. */
harp_status cuda_rt_time_fn(harp_error *e, cuda_rt *rt, int (*fn)(void *), void *ctx, int warmup, int reps,
                          double *ms_median);
/* A sequence step(ctx, 0) .. step(ctx, n-1) on harp's stream, reps times
 * after `warmup` untimed passes, with an event between steps: ms[i] the
 * median milliseconds of step i where it stands in the sequence (a step that
 * needs its predecessors, e.g. split-K's zeroing, keeps them). */
harp_status cuda_rt_time_seq(harp_error *e, cuda_rt *rt, int n, int (*step)(void *, int), void *ctx, int warmup, int reps,
                           double *ms);

/* The device memory of one model: the arena (temporaries at the Function's
 * offsets) and the ConstPool (weights, uploaded once). */
typedef struct cuda_model_mem {
  cuda_devptr arena, constpool;
  size_t arena_bytes, const_bytes;
} cuda_model_mem;
harp_status cuda_model_mem_init(harp_error *e, cuda_rt *rt, size_t arena_bytes, const void *consts, size_t const_bytes,
                              cuda_model_mem *out);
void cuda_model_mem_free(cuda_rt *rt, cuda_model_mem *mm);

/* ---- the disk cache (also used without a GPU) ---- */
/* Key = FNV-1a of (src, arch, options, NVRTC version); files <dir>/<key>.cubin
 * and .ptx, written atomically.  Exposed for tests. */
void cuda_rt_cache_key(const char *src, const char *arch, const char *const *opts, int nopts, int nvrtc_ver,
                       char out[33]);

#endif
