/* kernel_c.c — the CPU target for the kernel layer: what it has, and each
 * region printed on the kernel the layer chooses.
 * Needs: the kernel layer (src/kernel/kernel.h), the template printers
 * (contract_c.c, cell_c.c, concat_c.c), the loop nest (region_c.c).
 * Gives: rc_emit_region.
 *
 * The decision and its reason are the kernel layer's; this file only says
 * what the CPU has (cpu_target) and prints the choice.  The generic loop
 * nest carries the reason the last template declined in a comment. */
#include <stdlib.h>
#include <string.h>

#include "cell_c.h"
#include "contract_c.h"
#include "kernel/kernel.h"
#include "region_c.h"

static const kn_target cpu_target = {
    .name = "CPU",
    .cell = true,
    /* softmax and pool: a region that is one but that the kernel does not
     * take runs the loop nest; concatenation copies (more pieces than the
     * map cuts slabs) before the map, which says why it declines */
    .nrows = 5,
    .rows = {{KN_SOFTMAX, KN_DECLINE_STOP},
             {KN_POOL, KN_DECLINE_STOP},
             {KN_CONCAT, KN_DECLINE_QUIET},
             {KN_REDUCE, KN_DECLINE_QUIET}, /* ShapeSet objects only (reduce_c.c): else the loop nest, as before */
             {KN_MAP, KN_DECLINE_STOP}},
    .reduce_epilogue = true,
    .conv_depthwise = true,
    /* Pools the loop nest runs faster (cgen_pool.c's padded, phase-split
     * plane is the cost):
     *   past stride 2 the plane splits into a phase row per column, copied
     *   column by column: the nest's gathers are faster (a 7x7 pool of
     *   stride 7 on 2048x7x7: 0.29 ms against 0.085);
     *   a window or three per plane (a global pool): the copy is all the
     *   work, the nest's reduction does without it (7x7 -> 1x1 on 2048
     *   planes: 0.25 ms against 0.045);
     *   a sum over windows that neither overlap nor touch padding reuses
     *   nothing from the plane: the nest's strided reads beat the copy (avg
     *   2x2 on 256x56x56: 0.084 ms against 0.093; a max keeps the kernel,
     *   whose max needs no NaN select: 2x faster there). */
    .pool_max_stride = 2,
    .pool_min_windows = 4,
    .pool_sum_disjoint = false,
    .map_op = cc_map_op_ok,
};

/* Print the kernel s chose for region r: *done, or *why the printer
 * refused it. */
static harp_status print_kernel(rc_ctx *c, int r, const char *fn, ut_str *out, const kn_sel *s, bool *done, const char **why,
                              rc_packed *pk, long *chunk_len) {
  switch (s->kind) {
  case KN_GATHER: *done = true; return rc_emit_gather(c, r, fn, out, chunk_len);
  case KN_CELL: return cc_try_cell(c, r, fn, out, done, why, pk);
  case KN_GEMM: return cc_emit_gemm(c, r, fn, out, &s->u.gemm, done, why, pk);
  case KN_CONV: return cc_emit_conv(c, r, fn, out, &s->u.conv, done, why, pk);
  case KN_ATTENTION: return cc_emit_attention(c, r, fn, out, &s->u.attn, done, why);
  case KN_SOFTMAX: return cc_emit_softmax(c, r, fn, out, &s->u.softmax, done, why);
  case KN_POOL: return cc_emit_pool(c, r, fn, out, &s->u.pool, done, why);
  case KN_CONCAT: return cc_try_concat(c, r, fn, out, done, why);
  case KN_REDUCE: return cc_emit_reduce(c, r, fn, out, &s->u.reduce, done, why);
  case KN_MAP: return cc_emit_map(c, r, fn, out, s->map, done, why);
  default: return HARP_OK; /* no CPU template of that kind */
  }
}

harp_status rc_emit_region(rc_ctx *c, int r, const char *fn, ut_str *out, long *chunk_len, rc_packed *pk) {
  *chunk_len = 0;
  memset(pk, 0, sizeof *pk);
  /* a ShapeSet object: its sizes vary */
  ct_src src = {c->g, c->pv, c->f, false, false, c->ngen_syms > 0, c->gen_syms, c->ngen_syms};
  kn_sel s;
  /* the knob no_templates (HARP_NO_TEMPLATES): loop nests only, but for a cell */
  unsigned flags = rt_knobs_or_default(c->knobs)->no_templates ? KN_NO_ROW_TEMPLATES | KN_NO_CONTRACTION_TEMPLATES : 0;
  harp_status st = kn_select(&s, &cpu_target, &src, r, flags, c->e);
  bool done = false;
  while (!st && !done && s.kind != KN_GENERIC) {
    const char *why = NULL;
    st = print_kernel(c, r, fn, out, &s, &done, &why, pk, chunk_len);
    if (!st && !done) st = kn_decline(&s, why);
  }
  if (!st && !done) /* a ShapeSet object: reads through floor divisions at run-time sizes */
    st = cc_try_gmap(c, r, fn, out, &done);
  if (!st && !done) {
    cc_note_generic(c, r, s.why);
    st = rc_emit_loops(c, r, fn, s.why, out, chunk_len);
  }
  kn_sel_free(&s);
  return st;
}
