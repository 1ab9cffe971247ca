/* tier0.h — tier 0: a compiled model's first runs before its shared object
 * exists.  The Function runs region by region (fn_playback_ex): a GEMM,
 * convolution or pooling region that the kernel layer reads as a template
 * (src/kernel/contract*.c) runs on the shape-generic kernels compiled into
 * libharp (run-time sizes and strides, tier0_gemm.c), every other region on
 * the reference interpreter; attention, softmax and layernorm regions on
 * row kernels (tier0_rows.c), elementwise maps (also those read through
 * floor divisions: upsampling, depth-to-space) on tier0_map.c.  No C compiler is involved, so a never-seen
 * model starts at once while its specialised object builds (cpu.c).
 * Internal to src/runtime. */
#ifndef HARP_RT_TIER0_H
#define HARP_RT_TIER0_H

#include <stdbool.h>
#include <stdint.h>

#include "harp/pipeline.h"
#include "kernel/contract.h"
#include "kernel/gmap.h"

#define RT_T0_MAX_THREADS 16

/* An epilogue step with its tensor (bias, residual) resolved: p at the
 * step's element offset, else NULL. */
typedef struct rt_t0_epi {
  ct_epi e;
  const float *p;
} rt_t0_epi;

/* A batched fp32 GEMM: C[b0][b1] = A x B, strided, then the epilogue. */
typedef struct rt_t0_gemm {
  int64_t batch[2], M, N, K;
  const float *a, *b;
  float *c;
  int64_t a_sb[2], a_sm, a_sk;
  int64_t b_sb[2], b_sk, b_sn;
  int64_t c_sb[2], c_sm, c_sn;
  int nepi;
  rt_t0_epi epi[CT_MAX_EPI];
} rt_t0_gemm;

/* A 2-D fp32 convolution (ct_conv's sizes), x / w / y dense NCHW / OIHW /
 * NCHW at their offsets, output oh x ow. */
typedef struct rt_t0_conv {
  ct_conv c;
  int64_t oh, ow;
  const float *x, *w;
  float *y;
  int nepi;
  rt_t0_epi epi[CT_MAX_EPI];
} rt_t0_conv;

/* Attention (ct_attn's sizes and strides) on resolved fp32 tensors. */
typedef struct rt_t0_attn {
  ct_attn t;
  const float *q, *k, *v, *mask;
  float *out;
} rt_t0_attn;

/* A row kernel over rows x cols dense fp32: softmax (scale) or layernorm
 * (eps, gamma / beta NULL when absent). */
typedef struct rt_t0_row {
  int64_t rows, cols;
  const float *x, *gamma, *beta;
  float *y;
  float scale, eps;
} rt_t0_row;

/* An elementwise map (one piece of a ct_map_set): inputs and y resolved at
 * their offsets. */
typedef struct rt_t0_map {
  ct_map m;
  const float *in[CT_MAP_MAX_IN];
  float *y;
} rt_t0_map;

/* An elementwise map read through floor divisions (kernel/gmap.h: a
 * nearest upsample, a depth-to-space, a concatenation of them): g's
 * pieces with their inputs resolved, each input dense row-major with the
 * element strides st (from its buffer's shape), y dense over g's domain. */
typedef struct rt_t0_gmap {
  const ct_gmap *g;
  const float *in[CT_MAP_MAX_PIECES][CT_MAP_MAX_IN];
  int64_t st[CT_MAP_MAX_PIECES][CT_MAP_MAX_IN][TINY_MAX_RANK];
  float *y;
} rt_t0_gmap;
harp_status rt_t0_gmap_run(harp_error *e, const rt_t0_gmap *m, int threads);

/* fn(job) on the calling thread and up to nt - 1 more (fewer when a
 * thread cannot start: the jobs' work counters hand out what is left). */
void rt_t0_on_threads(void *(*fn)(void *), void *job, int nt);

/* The ops the map kernel evaluates (ct_read_map's ok): unary, binary, CAST. */
bool rt_t0_map_op_ok(tiny_op op);
harp_status rt_t0_map_run(harp_error *e, const rt_t0_map *m, int threads);
harp_status rt_t0_attn_run(harp_error *e, const rt_t0_attn *a, int threads);
harp_status rt_t0_softmax_run(harp_error *e, const rt_t0_row *w, int threads);
harp_status rt_t0_layernorm_run(harp_error *e, const rt_t0_row *w, int threads);
harp_status rt_t0_gemm_run(harp_error *e, const rt_t0_gemm *g, int threads);
harp_status rt_t0_conv_run(harp_error *e, const rt_t0_conv *cv, int threads);
/* Epilogue steps ep[0..nep) on x, the sum at (b0, b1, m, n) of a GEMM;
 * conv: m the output channel and roff the output point's element offset.
 * Steps without a tensor (relu, scale, clamp, ...) read no index. */
float rt_t0_epilogue(const rt_t0_epi *ep, int nep, float x, int64_t b0, int64_t b1, int64_t m, int64_t n, int64_t roff,
                     bool conv);
/* The same on n consecutive outputs x[0..n) of row m, from column n0 (a
 * GEMM's residual at stride s_n; conv: the residual's element offset roff
 * of x[0], contiguous). */
void rt_t0_epilogue_row(const rt_t0_epi *ep, int nep, float *x, int64_t n, int64_t b0, int64_t b1, int64_t m, int64_t n0,
                        int64_t roff, bool conv);

/* What one tier-0 run did: kernels on the fast path and on the
 * interpreter, the milliseconds each took, and those it waited for
 * kernels' readings (rt_t0_prep_read on another thread). */
typedef struct rt_t0_stats {
  int fast, interp;
  double fast_ms, interp_ms, wait_ms;
} rt_t0_stats;

/* Every kernel of Function f (the compile's, or one of tier 0's own over
 * the same graph, cpu.c) read once through compile c's analysis (c kept
 * it: the readers reach isl through the Poly-View, which is not to be
 * shared between threads): which fast kernel takes it, with its sizes and
 * strides.  The runs read only this, not the Poly-View; f outlives it.
 * rt_t0_prep_new makes it with nothing read; rt_t0_prep_read reads the
 * kernels in order, publishing each, on one thread (the only one on the
 * Poly-View meanwhile), while runs on others wait per kernel for its
 * reading; a failed reading is the error of the runs that reach a kernel
 * it did not read.  rt_t0_prepare: both at once (freed on failure). */
typedef struct rt_t0_prep rt_t0_prep;
harp_status rt_t0_prep_new(harp_error *e, const struct fn_function *f, rt_t0_prep **out);
harp_status rt_t0_prep_read(harp_error *e, const rt_compile *c, rt_t0_prep *p);
harp_status rt_t0_prepare(harp_error *e, const rt_compile *c, const struct fn_function *f, rt_t0_prep **out);
void rt_t0_prep_free(rt_t0_prep *p);

/* Run the Function prep read (on compile c's graph and symbols), on inputs (tiny_inputs
 * order, weights included; checked against the model's dtypes and shapes
 * before any kernel runs); outputs[] follow g->outputs.  stats may be
 * NULL.  Touches neither c's Poly-View nor its plans or source. */
harp_status rt_tier0_run(harp_error *e, const rt_compile *c, rt_t0_prep *prep, const ut_tensor *inputs, int ninputs,
                         ut_tensor *outputs, rt_t0_stats *stats);

/* target_cpu.c, for tier 0: whether c's object (its code stage ran) is in
 * the disk cache already, and the build stage run by itself after a
 * compile that stopped after code (cpu.c runs it on a thread of its own,
 * with c->e pointing at that thread's error). */
bool rt_cpu_object_cached(const rt_compile *c);
/* After a compile that formed its regions by the greedy pass alone
 * (rt_compile_opts.greedy_regions) and gave its partition and Function
 * away to tier 0: the exact regions, the Function and the plans, as the
 * stages REGIONS, FUNCTION and PLANS (recorded: the stage table is this
 * thread's), or unrecorded on the builder thread with their wall times in
 * ms[0..3) (NULL: not wanted). */
harp_status rt_cpu_exact_stages(rt_compile *c, bool record, double *ms);
harp_status rt_cpu_build_stage(rt_compile *c);
/* The code stage (the C) after a compile that stopped after plans; and
 * the same unrecorded, for the builder thread (its fields: source,
 * source_bytes, plans' notes, c->e; not the stage table). */
harp_status rt_cpu_code_stage(rt_compile *c);
harp_status rt_cpu_code_unrecorded(rt_compile *c);
/* The build alone, on another thread than the compile's reader: it writes
 * only the build's fields (so_path, cache_hit, so_temp, cc_warning, source
 * unless kept) and c->e, not the stage table (ran, ms, status), which the
 * caller fills in once it joined the thread. */
harp_status rt_cpu_build_unrecorded(rt_compile *c);

#endif
