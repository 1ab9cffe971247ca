/* plan_int.h — helpers shared by the files of src/plan/ (not public). */
#ifndef HARP_PLAN_INT_H
#define HARP_PLAN_INT_H

#include <stdarg.h>

#include "harp/plan.h"

/* Which optional fields a parser saw; the rest get defaults (plan_finish). */
typedef struct plan_seen {
  bool arch, pipeline, a_swizzle, b_swizzle, c_stride, stages; /* warp tile: 0 = unset */
} plan_seen;

/* Record an error at pos (file:line:col + caret when src has them), else at
 * node.  The first error wins, as with ut_fail. */
harp_status plan_fail(harp_error *e, harp_status code, const plan_src *src, plan_pos pos, const char *node,
                    const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/* Copy a name into a PLAN_NAME_MAX buffer; false if it does not fit. */
bool plan_copy_name(char *dst, const char *src);
/* Axis names: [A-Za-z_][A-Za-z0-9_]* ('.' [A-Za-z0-9_]+)*, shorter than PLAN_NAME_MAX. */
bool plan_axis_name_ok(const char *s);
/* Tensor / node names: [A-Za-z0-9_.]+, not starting with '.'. */
/* The base of an axis name: "m" for "m.i.o".  buf has PLAN_NAME_MAX bytes. */
const char *plan_axis_base(const char *axis, char *buf);
/* Index of the tile axis whose subtree holds axis (base equal), or -1. */
int plan_tile_index_of(const plan_t *p, const char *axis);
/* The default pipeline axis: "<K>.i" for the last tile axis. */
void plan_default_pipeline_axis(const plan_t *p, char *out);
/* Defaults for a fresh parse: warp tile, pipeline axis, layout hints, arch;
 * then the canonical reorder collapses to nreorder = 0. */
void plan_finish(plan_t *p, const plan_seen *seen, plan_arch default_arch);
/* Largest common divisor, for default warp tiles. */
int64_t plan_gcd(int64_t a, int64_t b);

/* SM90 tile rules: 0 fits, 1 wgmma/TMA shape, 2 TMA alignment (why says). */
int plan_sm90_rule(const plan_t *p, tiny_dtype in, char *why, int cap);
/* MMA k-step of one instruction for an input dtype (16 for fp16/bf16). */
int plan_mma_k(tiny_dtype in);
/* Extent of a plan axis (region sizes, tiles, warp tiles, splits, fuses);
 * -1 when unknown. */
int64_t plan_axis_extent(const plan_t *p, const plan_region_info *r, const char *axis);
/* Index of a base axis in r, or -1. */
int plan_region_axis(const plan_region_info *r, const char *name);

/* Byte span of the JSON value at path ('/'-separated keys and indices) in
 * text, which jansson has accepted; false if absent. */
bool plan_json_value_span(const char *text, const char *path, size_t *start, size_t *end);

/* cost.c: the share of `bytes` of operands that misses the caches from one
 * pass (or call) to the next: none while they fit in half of the GPU's L2 or
 * of the CPU's L3 plus its cores' L2, else the part beyond that half. */
double plan_cache_miss(const plan_machine *m, double bytes);
/* cost.c: how many times faster the CPU's Winograd kernel runs than the
 * direct one it replaces (measured factors, by output pixels). */
double plan_cpu_winograd_speedup(const plan_region_info *r, const plan_gemm_view *g);
/* cost_cpu.c: p's seconds on the CPU template from m's calibration; false
 * (nothing written) when m has none or r is not a matmul / conv. */
bool plan_cpu_time(const plan_t *p, const plan_region_info *r, const plan_gemm_view *g, const plan_machine *m,
                   double *out);

#endif
