/* fake_cuda_graph.c — the fake libcuda's streams, stream capture and CUDA
 * Graphs (see fake_cuda.c): a capture records the kernel launches made on
 * the stream, a graph and an exec hold such a list, a graph launch counts
 * its kernels. */
#include <stdlib.h>
#include <string.h>

#include "fake_cuda_impl.h"

typedef struct { /* CUgraphExecUpdateResultInfo (cuda.h, CUDA 12+) */
  int result;   /* CUgraphExecUpdateResult */
  void *errorNode, *errorFromNode;
} CUgraphExecUpdateResultInfo;

typedef struct graph { /* CUgraph and CUgraphExec */
  int magic;
  nodes k;
} graph;

/* ---- streams and capture ------------------------------------------------------------ */
CUresult cuStreamCreate(void **out, unsigned flags) {
  INJECT(UNKNOWN);
  if (!out || flags > 1) return INVALID_VALUE; /* DEFAULT or NON_BLOCKING */
  stream *s = calloc(1, sizeof *s);
  if (!s) return OUT_OF_MEMORY;
  s->magic = MAGIC_STREAM;
  s->next = fake.streams;
  fake.streams = s;
  *out = s;
  ST(LIVE_STREAMS)++;
  return OK;
}

CUresult cuStreamSynchronize(void *hstream) {
  INJECT(UNKNOWN);
  if (check_stream(hstream)) return INVALID_HANDLE;
  return fake_capture_violation();
}

CUresult cuStreamDestroy_v2(void *hstream) {
  INJECT(UNKNOWN);
  stream *s = hstream;
  if (is_legacy(s) || s->magic != MAGIC_STREAM) return INVALID_HANDLE;
  for (stream **p = &fake.streams; *p; p = &(*p)->next)
    if (*p == s) {
      *p = s->next;
      break;
    }
  s->magic = 0;
  free(s->rec.v);
  free(s);
  ST(LIVE_STREAMS)--;
  return OK;
}

CUresult cuStreamBeginCapture_v2(void *hstream, int mode) {
  INJECT(UNKNOWN);
  if (check_stream(hstream)) return INVALID_HANDLE;
  if (is_legacy(hstream)) return CAPTURE_UNSUPPORTED; /* the legacy stream cannot be captured */
  stream *s = hstream;
  if (mode < 0 || mode > 2) return INVALID_VALUE; /* GLOBAL, THREAD_LOCAL, RELAXED */
  if (s->capturing) return ILLEGAL_STATE;
  s->capturing = 1, s->mode = mode, s->invalidated = 0;
  s->rec.n = 0;
  ST(CAPTURES_BEGUN)++;
  return OK;
}

static int new_graph(int magic, const nodes *k, graph **out) {
  graph *g = calloc(1, sizeof *g);
  knode *v = malloc((size_t)(k->n ? k->n : 1) * sizeof *v);
  if (!g || !v) {
    free(g);
    free(v);
    return OUT_OF_MEMORY;
  }
  if (k->n) memcpy(v, k->v, (size_t)k->n * sizeof *v);
  g->magic = magic;
  g->k = (nodes){v, k->n, k->n};
  *out = g;
  if (magic == MAGIC_GRAPH) ST(LIVE_GRAPHS)++;
  else ST(LIVE_EXECS)++;
  return OK;
}

static int free_graph(void *h, int magic) {
  graph *g = h;
  if (!g || g->magic != magic) return INVALID_HANDLE;
  g->magic = 0;
  free(g->k.v);
  free(g);
  if (magic == MAGIC_GRAPH) ST(LIVE_GRAPHS)--;
  else ST(LIVE_EXECS)--;
  return OK;
}

CUresult cuStreamEndCapture(void *hstream, void **out) {
  INJECT(UNKNOWN);
  if (!out) return INVALID_VALUE;
  *out = NULL;
  if (is_legacy(hstream) || check_stream(hstream)) return INVALID_HANDLE;
  stream *s = hstream;
  if (!s->capturing) return ILLEGAL_STATE;
  s->capturing = 0;
  if (s->invalidated) return CAPTURE_INVALIDATED; /* and no graph, as the driver */
  graph *g;
  int r = new_graph(MAGIC_GRAPH, &s->rec, &g);
  if (r) return r;
  *out = g;
  ST(CAPTURES_ENDED)++;
  return OK;
}

/* ---- graphs ------------------------------------------------------------------------- */
CUresult cuGraphInstantiateWithFlags(void **out, void *hgraph, unsigned long long flags) {
  INJECT(UNKNOWN);
  graph *g = hgraph, *x;
  if (!out) return INVALID_VALUE;
  if (!g || g->magic != MAGIC_GRAPH) return INVALID_HANDLE;
  int r = new_graph(MAGIC_EXEC, &g->k, &x);
  if (r) return r;
  *out = x;
  ST(GRAPHS_INSTANTIATED)++;
  for (int i = 0; i < g->k.n; i++) { /* nodes sharing a function (one kernel launched for several regions) count once */
    int j = 0;
    while (j < i && g->k.v[j].fn != g->k.v[i].fn) j++;
    ST(GRAPH_FUNCTIONS) += j == i;
  }
  return OK;
}

CUresult cuGraphLaunch(void *hexec, void *hstream) {
  INJECT(UNKNOWN);
  graph *x = hexec;
  if (!x || x->magic != MAGIC_EXEC || check_stream(hstream)) return INVALID_HANDLE;
  ST(GRAPH_LAUNCHES)++;
  ST(GRAPH_KERNELS) += x->k.n;
  for (int i = 0; i < x->k.n; i++) fake_log_launch(&x->k.v[i], hstream);
  fake.clock += x->k.n;
  return OK;
}

/* In place when the topology is the same (here: as many kernel nodes);
 * kernels, grids and shared memory may change, as with the driver. */
CUresult cuGraphExecUpdate_v2(void *hexec, void *hgraph, CUgraphExecUpdateResultInfo *info) {
  graph *x = hexec, *g = hgraph;
  if (!info) return INVALID_VALUE;
  memset(info, 0, sizeof *info);
  if (fake_injected(__func__)) {
    info->result = 1; /* CU_GRAPH_EXEC_UPDATE_ERROR */
    ST(FAILED_UPDATES)++;
    return EXEC_UPDATE_FAILURE;
  }
  if (!x || x->magic != MAGIC_EXEC || !g || g->magic != MAGIC_GRAPH) return INVALID_HANDLE;
  if (x->k.n != g->k.n) {
    info->result = 2; /* CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED */
    ST(FAILED_UPDATES)++;
    return EXEC_UPDATE_FAILURE;
  }
  if (g->k.n) memcpy(x->k.v, g->k.v, (size_t)g->k.n * sizeof *g->k.v);
  ST(EXEC_UPDATES)++;
  return OK;
}

CUresult cuGraphExecDestroy(void *hexec) {
  INJECT(UNKNOWN);
  return free_graph(hexec, MAGIC_EXEC);
}

CUresult cuGraphDestroy(void *hgraph) {
  INJECT(UNKNOWN);
  return free_graph(hgraph, MAGIC_GRAPH);
}
