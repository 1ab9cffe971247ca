/* fake_cuda_impl.h — what fake_cuda.c (device, modules, launches, memory,
 * events, tensor maps, counters) and fake_cuda_graph.c (streams, capture,
 * graphs) share: the driver types they declare themselves (no cuda.h), the
 * handles, and the one state of the fake.  Internal to the library. */
#ifndef HARP_FAKE_CUDA_IMPL_H
#define HARP_FAKE_CUDA_IMPL_H

#include <stddef.h>

#include "fake_cuda.h"

typedef int CUresult;
typedef unsigned long long CUdeviceptr;

enum { /* CUresult values the fake returns (cuda.h's CUDA_ERROR_*) */
  OK = 0, INVALID_VALUE = 1, OUT_OF_MEMORY = 2, NOT_INITIALIZED = 3, INVALID_DEVICE = 101, INVALID_CONTEXT = 201,
  INVALID_HANDLE = 400, ILLEGAL_STATE = 401, NOT_FOUND = 500, CAPTURE_UNSUPPORTED = 900, CAPTURE_INVALIDATED = 901,
  EXEC_UPDATE_FAILURE = 910, UNKNOWN = 999
};
/* Every handle starts with its kind: a handle of the wrong kind is INVALID_HANDLE. */
enum { MAGIC_MODULE = 0x6d6f64, MAGIC_FUNC, MAGIC_STREAM, MAGIC_EVENT, MAGIC_GRAPH, MAGIC_EXEC };

#define FAKE_MAX_ARGS 16
typedef struct knode { /* one recorded kernel launch */
  const void *fn;
  unsigned grid[3], block[3], smem;
  int nargs;                               /* recorded arguments (harp_fake_cuda_record on), else 0 */
  unsigned long long args[FAKE_MAX_ARGS];  /* each parameter's first 8 bytes */
  const void *stream;                      /* in the launch log: the stream it went to */
} knode;
typedef struct nodes {
  knode *v;
  int n, cap;
} nodes;
typedef struct stream {
  int magic;
  int capturing, mode, invalidated;
  nodes rec; /* the launches captured so far */
  struct stream *next;
} stream;
typedef struct alloc {
  unsigned char *p;
  size_t n;
} alloc;

typedef struct fake_state {
  long stat[FAKE_CUDA_NSTATS];
  int initialized;
  long long clock; /* fake device time: ticks on launches and event records */
  alloc *allocs;
  int nallocs, cap_allocs;
  stream *streams; /* every live stream: a synchronous call looks for captures */
  int ctx_token;   /* its address is the primary context */
  int record;      /* harp_fake_cuda_record: log launches and their arguments */
  nodes log;       /* direct launches and graph-replayed kernels, in order */
} fake_state;

#define HIDDEN __attribute__((visibility("hidden")))
extern HIDDEN fake_state fake;
#define ST(name) fake.stat[FAKE_CUDA_##name]

/* true when HARP_FAKE_CUDA_FAIL lists sym (counted) */
HIDDEN int fake_injected(const char *sym);
#define INJECT(code) do { if (fake_injected(__func__)) return (code); } while (0)

static inline int is_legacy(const void *s) { return s == NULL || s == (void *)1 || s == (void *)2; }
/* OK for the legacy / per-thread stream or a live fake stream */
static inline int check_stream(const void *s) {
  return is_legacy(s) || ((const stream *)s)->magic == MAGIC_STREAM ? OK : INVALID_HANDLE;
}
/* Append k (run on stream) to the launch log when recording. */
HIDDEN void fake_log_launch(const knode *k, const void *where);
/* CAPTURE_UNSUPPORTED (and the capture invalidated) while a capture runs */
HIDDEN int fake_capture_violation(void);

#endif
