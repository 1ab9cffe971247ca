/* harp/function.h — regions (one region = one kernel) and the compiled
 * Function of seed 003: kernels in execution order, buffers as offsets into
 * one arena assigned by liveness, required_memory, args and ret, plus the
 * ConstPool for weights.
 *
 * Region formation (rg_form, harp/region.h) fills an rg_partition; fn_build turns
 * a partition into an fn_function; fn_playback runs it region by region on
 * the reference interpreter against arena-backed buffers. */
#ifndef HARP_FUNCTION_H
#define HARP_FUNCTION_H

#include <stddef.h>
#include <stdint.h>

#include "harp/error.h"
#include "harp/tensor.h"
#include "harp/tiny.h"

/* ---- regions ------------------------------------------------------------- */
/* A region computes a set of Tiny nodes in one kernel.  Movement nodes are
 * views: a region includes those its computation reads through, and the same
 * view may appear in several regions.  Invariants: nodes[] is ascending (so
 * topological); every source of a node in the region is either in the region
 * or in in_values[]; out_values[] are the region's nodes needed by a later
 * region or as model outputs; INPUT and CONST nodes are never region nodes
 * (INPUT values are in_values, CONSTs are folded into the regions that use
 * them). */
typedef struct rg_region {
  const char *name; /* unique; the tag or id of its last compute node */
  int *nodes;
  int nnodes;
  int *in_values; /* materialized values read (node indices), ascending */
  int nin;
  int *out_values; /* values written (node indices), ascending */
  int nout;
  const char *kind;        /* "contraction" | "reduce" | "ewise" | "gather" */
  const char *pattern;     /* "matmul" | "conv" | NULL */
  const char *stop_reason; /* why the region ended (region formation), may be NULL */
  int *blocks;             /* Poly-View blocks it computes, in order (NULL: not block-based) */
  int nblocks;
  /* Region formation's description (harp/region.h): shape, Poly-View blocks,
   * epilogue, local edges, plan summary, attention operands.  NULL in
   * partitions made by rg_partition_singletons. */
  const struct rg_info *info;
} rg_region;

typedef struct rg_partition {
  const tiny_graph *g;
  rg_region *regions; /* in execution order */
  int n;
  int *region_of; /* compute node -> region index that produces it; -1 for views/leaves */
  struct ut_arena *arena;
  struct rg_formed *formed; /* owned: what rg_form built (IndexBook, Poly-View, machine); NULL otherwise */
} rg_partition;

/* The no-fusion partition: one region per compute (non-movement, non-leaf)
 * node.  The baseline region formation starts from and the fallback. */
harp_status rg_partition_singletons(harp_error *e, const tiny_graph *g, rg_partition **out);
void rg_partition_free(rg_partition *p);
/* Check the invariants above (tests and debug builds). */
harp_status rg_partition_check(harp_error *e, const rg_partition *p);

/* ---- the Function --------------------------------------------------------- */
typedef enum fn_buf_kind {
  FN_INPUT,  /* a model input: the caller's memory */
  FN_PARAM,  /* a weight (INPUT with storage "param"): lives in the ConstPool */
  FN_OUTPUT, /* a model output: the caller's memory */
  FN_TEMP    /* an intermediate: an offset into the arena */
} fn_buf_kind;

typedef enum fn_mem_space { FN_HOST, FN_DEVICE } fn_mem_space;

typedef struct fn_buffer {
  int id;
  int node; /* the Tiny node whose value it holds */
  fn_buf_kind kind;
  tiny_dtype dtype; /* storage: the node's dtype, or fp32 for a widened temp (fn_options) */
  int64_t numel;
  size_t size;   /* bytes */
  size_t offset; /* FN_TEMP: in the arena; FN_PARAM: in the ConstPool; else 0 */
  fn_mem_space space;
  int first, last; /* live from kernel `first` (writer; -1 = before all) to `last` (last reader) */
} fn_buffer;

typedef struct fn_kernel {
  const char *name;
  int region;    /* index into the partition */
  int *reads;    /* buffer ids */
  int nreads;
  int *writes;   /* buffer ids */
  int nwrites;
  int *deps;     /* kernels that must finish first (they write what this reads) */
  int ndeps;
  size_t launch_dims[3]; /* set by a backend; 0 until then */
} fn_kernel;

typedef struct fn_function {
  const char *name;
  fn_kernel *kernels; /* execution order */
  int nkernels;
  fn_buffer *buffers;
  int nbuffers;
  size_t required_memory; /* arena bytes (FN_TEMP buffers) */
  size_t const_bytes;     /* ConstPool bytes (FN_PARAM buffers) */
  int *args;              /* buffer ids of model inputs and params, graph order */
  int nargs;
  int *ret; /* buffer ids of the model outputs, in g->outputs order */
  int nret;
  int *buffer_of; /* tiny node -> buffer id, -1 if not materialized */
  const rg_partition *part;
  struct ut_arena *arena;
} fn_function;

#define FN_ALIGN 64 /* every buffer offset is a multiple of this */

typedef struct fn_options {
  /* Store fp16/bf16 intermediates that are not CAST results in fp32.  The
   * reference semantics round only at INPUT, CAST and outputs: a backend
   * that stored an elementwise result in half precision would round where
   * the program does not (docs/tiny-ir.md, "The reference interpreter"). */
  bool widen_half_temps;
  /* ... except a temp that a contraction block (GEMM, convolution,
   * attention) reads as an operand: the GPU's MMA templates load half
   * operands, so it is stored, rounded once, in its own dtype — what a
   * framework that rounds every half op (ONNX, PyTorch) holds there too. */
  bool half_mma_operands;
  /* Store an fp32 temp that a contraction block reads as an operand in bf16
   * (the CPU's --precision bf16, whose contractions round their operands to
   * bf16 anyway): its producer rounds once on the store, every reader widens
   * on the load, and the bytes between the kernels halve.  Readers other than
   * contractions (a residual add) see the rounded value too, as in
   * OpenVINO's bf16 inference. */
  bool bf16_operand_temps;
} fn_options;

/* Kernels, buffers and the arena layout (best fit over lifetime intervals). */
harp_status fn_build(harp_error *e, const rg_partition *p, const char *name, fn_function **out);
harp_status fn_build_ex(harp_error *e, const rg_partition *p, const char *name, const fn_options *o, fn_function **out);
void fn_free(fn_function *f);
/* Peak bytes of TEMP buffers simultaneously live (a lower bound on the arena). */
size_t fn_peak_live_bytes(const fn_function *f);
/* Largest number of TEMP buffers live at once. */
int fn_max_live_temps(const fn_function *f);
/* Check the arena: live buffers never overlap, offsets aligned. */
harp_status fn_check(harp_error *e, const fn_function *f);

/* ---- ConstPool ------------------------------------------------------------ */
/* Weights, contiguous and FN_ALIGN-aligned, at the offsets fn_build gave the
 * FN_PARAM buffers. */
typedef struct fn_constpool {
  unsigned char *data;
  size_t size;
} fn_constpool;

/* Fill from tensors given per param buffer (in f->args order, params only).
 * fn_constpool_from_tensors_upto takes each no larger than its buffer (a
 * ShapeSet build's weights at a binding below its corner hi: dense at their
 * own shape, the rest of the buffer zero). */
harp_status fn_constpool_from_tensors_upto(harp_error *e, const fn_function *f, const ut_tensor *params, int nparams,
                                           fn_constpool *out);
harp_status fn_constpool_from_tensors(harp_error *e, const fn_function *f, const ut_tensor *params, int nparams,
                                    fn_constpool *out);
void fn_constpool_free(fn_constpool *cp);

/* ---- playback ------------------------------------------------------------- */
/* Run the Function region by region on the reference interpreter: each
 * region's nodes become a sub-graph whose inputs are read from the arena (or
 * the caller's tensors / the ConstPool) and whose outputs are stored back.
 * inputs[] follows tiny_inputs() order (params included); outputs[] follows
 * g->outputs. */
harp_status fn_playback(harp_error *e, const fn_function *f, const tiny_symtab *syms, const ut_tensor *inputs,
                      int ninputs, ut_tensor *outputs);
/* The same, where run(ctx, e, r, storage, &done) may run kernel r itself
 * first (tier 0's fast kernels, src/runtime/tier0.c): storage[] is where
 * each buffer lives (a model output's tensor is NULL until some kernel
 * allocates it with its node's shape); done false leaves r to the
 * interpreter. */
typedef harp_status (*fn_play_hook)(void *ctx, harp_error *e, int r, ut_tensor *storage, bool *done);
harp_status fn_playback_ex(harp_error *e, const fn_function *f, const tiny_symtab *syms, const ut_tensor *inputs,
                           int ninputs, ut_tensor *outputs, fn_play_hook run, void *ctx);

/* JSON of the Function (--dump function): kernels, buffers, layout. */
char *fn_dump_json(const fn_function *f);

#endif
