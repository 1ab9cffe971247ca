/* nest_int.h — the state of one region's loop nest while its statements
 * are printed: shared by nest.c (storage, statements, locals),
 * nest_stmt.c (the statements' text) and the CPU backend's loop printers
 * (src/backend/c/region_loops.c, region_coalesce.c). */
#ifndef HARP_BACKEND_NEST_INT_H
#define HARP_BACKEND_NEST_INT_H

#include "backend/common/nest.h"
#include "harp/polycore.h"
#include "harp/region.h"

typedef enum store_kind { ST_CONST, ST_BUF, ST_LOCAL } store_kind;

typedef struct value {
  store_kind kind;
  int slot;       /* ST_BUF: index in bufs[] */
  tiny_dtype storage; /* ST_BUF: the buffer's dtype (a widened temp is fp32) */
  int64_t lsize;  /* ST_LOCAL: elements (1: a scalar) */
} value;

/* Prefetching the next row (next_row_prefetch): the loop over rows, the
 * pass that issues the prefetches, and what they fetch. */
#define PF_MAX_READS 4
typedef struct pf_plan {
  const poly_ast *outer, *first, *target;
  int nread;
  const tiny_node *node[PF_MAX_READS];
  const poly_ast_access *acc[PF_MAX_READS];
  int slot[PF_MAX_READS];
} pf_plan;

typedef struct emit {
  const rc_nest_ctx *c;
  const rg_region *R;
  const fn_kernel *K;
  ut_str *o;
  int prefix;
  poly_stmt_spec *stmts; /* 3 per block at most (a reduction's INIT, BODY, FINAL) */
  int nstmts;
  value *val; /* per node */
  pf_plan pf;
  const poly_ast *simd_outer; /* the loop carrying an outer `omp simd` being printed, or NULL */
  /* A loop whose one half-precision buffer store goes through a float row
   * (region_loops.c, half_row_begin): its iterator and first value, the
   * node stored, and the converting stores printed after the loop. */
  struct { const char *iter; long lo; int node; ut_str *tail; } row;
  int reader; /* the node whose statement is reading (read_text), or -1 */
} emit;

/* Names and references the loop printers share (nest_stmt.c): a local's
 * C name, a reduction's accumulator and NaN flag, a row-major offset. */
void rc_acc_ref(emit *m, const poly_ast *u, const poly_block_info *b, ut_str *o);
void rc_local_name(ut_str *o, const tiny_node *n, const char *prefix, int node);
bool rc_nan_flag(const emit *m, const poly_block_info *b);
void rc_flag_name(ut_str *o, const emit *m, const poly_block_info *b);
/* The shape access a's index runs over when it reads node n: a RESHAPE's
 * output (poly_ast_access.shape), else n's own. */
static inline const tiny_shape *rc_acc_shape(const poly_ast_access *a, const tiny_node *n) {
  return a->shape ? a->shape : &n->shape;
}
/* c (NULL: numbers only): a stride over symbols' dims printed with hp_sv<i> */
void rc_linear(ut_str *o, const rc_nest_ctx *c, const tiny_shape *shape, const char *const *index, int from);
/* One PA_USER node as C. */
harp_status rc_stmt_body(emit *m, const poly_ast *u);
/* Whether text holds tok as a whole identifier. */
bool rc_has_token(const char *text, const char *tok);
/* The C type of a value of dtype t in compute representation. */
const char *rc_ctype(tiny_dtype t);
/* Load element `idx` of buffer p<slot> of storage dtype t, in compute
 * representation (GPU: through HP_AT). */
void rc_load(ut_str *o, tiny_dtype t, int slot, const char *idx, bool gpu);
/* The stage contraction operand a of block b is read at: 0 (the base) when
 * it is readable, else the readable CAST nearest the base; -1: none is. */
int rc_operand_stage(emit *m, const poly_block_info *b, int a);

/* m for kernel r of c->f, printing into out: its per-node values and room
 * for its statements (an error only when out of memory). */
harp_status rc_emit_init(emit *m, const rc_nest_ctx *c, int r, ut_str *out);
void rc_emit_free(emit *m);
/* Storage of every value the region touches, its statements (reductions in
 * three steps), their groups, and which values live in registers. */
void rc_nest_setup(emit *m);
/* Declarations of the locals (intermediates and accumulators), `ind` before
 * each.  scratch (GPU, NULL: arrays): arrays become pointers into the
 * per-point slice `scratch` (an unsigned char *), each at the next offset.
 * Returns the bytes of all locals and, in *array_bytes, those of the arrays. */
int64_t rc_emit_locals(emit *m, ut_str *out, const char *ind, const char *scratch, int64_t *array_bytes);

#endif
