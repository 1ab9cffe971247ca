/* region_c.c — a region's generic C kernel: isl's loop nest (poly_ast_gen)
 * printed with the statements of src/backend/common/nest*.c, split over
 * the thread pool; a GATHER region as its own loop.
 * Needs: a block-based region of a Function, its Poly-View.
 * Gives: rc_emit_loops, rc_emit_gather (the prelude: rc_prelude.c; the
 * loops' printing: region_loops.c; merging contiguous loops:
 * region_coalesce.c). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernel/contract.h"
#include "harp/poly_ast.h"
#include "harp/polycore.h"
#include "harp/region.h"
#include "tiny/tiny_spell.h"
#include "cgen_int.h"
#include "region_c_int.h"

static const char *storage_type(tiny_dtype t) { return tiny_dtype_c(t); } /* the dtype table's */

static tiny_dtype xs_dt_of(emit *m, int node) { return m->c->f->buffers[m->c->f->buffer_of[node]].dtype; }

/* Size `want` of dims [d0, d1) of s as C text into buf (96 bytes): in a
 * ShapeSet object (c's symbols) the expression of the symbols that is
 * read at run time (rc_size_expr), else the constant. */
static const char *gather_size(const rc_ctx *c, const tiny_shape *s, int d0, int d1, int64_t want, char *buf) {
  if (!rc_size_expr(c, s, d0, d1, want, buf, 96)) snprintf(buf, 96, "%" PRId64 "L", want);
  return buf;
}

/* Region m's GATHER as fn over the output's points, the output's sizes
 * and the table's (its strides, its extent along the axis) through c
 * (gather_size: read at run time in a ShapeSet object, constants else). */
static harp_status emit_gather(const rc_ctx *c, emit *m, const char *fn, long *chunk_len) {
  const tiny_graph *g = m->c->g;
  int node = m->R->out_values[0];
  const tiny_node *n = &g->nodes[node], *x = &g->nodes[n->src[0].node], *ix = &g->nodes[n->src[1].node];
  int sx = ct_slot_of(m->K, m->c->f, n->src[0].node), si = ct_slot_of(m->K, m->c->f, n->src[1].node),
      so = ct_slot_of(m->K, m->c->f, node);
  if (sx < 0 || si < 0 || so < 0)
    return ut_fail(m->c->e, HARP_E_UNSUPPORTED, n->id, "GATHER of a view: materialize its operands first");
  ut_str *o = m->o;
  int axis = n->a.gather.axis, r = n->shape.rank;
  ut_str_printf(o, "static int %s(hprt_pool *pool, void *const *bufs) {\n", fn);
  char b1[96];
  ut_str_printf(o, "  (void)pool;\n  long total = %s;\n", gather_size(c, &n->shape, 0, r, tiny_shape_numel(&n->shape), b1));
  ut_str_puts(o, "  for (long i = 0; i < total; i++) {\n    long rest = i, off = 0;\n");
  int64_t xs[TINY_MAX_RANK], st = 1;
  for (int d = x->shape.rank - 1; d >= 0; d--) xs[d] = st, st *= x->shape.d[d].n;
  for (int d = r - 1; d >= 0; d--) {
    gather_size(c, &n->shape, d, d + 1, n->shape.d[d].n, b1);
    ut_str_printf(o, "    long i%d = rest %% %s; rest /= %s;\n", d, b1, b1);
    if (d != axis) ut_str_printf(o, "    off += i%d * %s;\n", d, gather_size(c, &x->shape, d + 1, x->shape.rank, xs[d], b1));
  }
  ut_str_printf(o, "    const %s *restrict p%d = bufs[%d];\n", storage_type(xs_dt_of(m, n->src[0].node)), sx, sx);
  ut_str_printf(o, "    int32_t k = ((const int32_t *)bufs[%d])[i];\n", si);
  if (!rc_size_expr(c, &x->shape, axis, axis + 1, x->shape.d[axis].n, b1, sizeof b1)) /* the constant as it was, no L */
    snprintf(b1, sizeof b1, "%" PRId64, x->shape.d[axis].n);
  ut_str_printf(o, "    if (k < 0 || k >= %s) return 1;\n", b1);
  ut_str_printf(o, "    off += (long)k * %s;\n", gather_size(c, &x->shape, axis + 1, x->shape.rank, xs[axis], b1));
  /* through the compute representation: either buffer may be a widened temp */
  tiny_dtype xs_dt = m->c->f->buffers[m->c->f->buffer_of[n->src[0].node]].dtype;
  tiny_dtype os_dt = m->c->f->buffers[m->c->f->buffer_of[node]].dtype;
  ut_str v;
  ut_str_init(&v);
  rc_load(&v, xs_dt, sx, "off", false);
  ut_str_printf(o, "    %s g_ = %s;\n", rc_ctype(n->dtype), v.buf ? v.buf : "0");
  ut_str_free(&v);
  switch (os_dt) {
  case TINY_FP16: ut_str_printf(o, "    ((uint16_t *)bufs[%d])[i] = hp_f2h(g_);\n", so); break;
  case TINY_BF16: ut_str_printf(o, "    ((uint16_t *)bufs[%d])[i] = hp_f2b(g_);\n", so); break;
  case TINY_BOOL: ut_str_printf(o, "    ((uint8_t *)bufs[%d])[i] = (uint8_t)(g_ != 0);\n", so); break;
  default: ut_str_printf(o, "    ((%s *)bufs[%d])[i] = g_;\n", storage_type(os_dt), so); break;
  }
  ut_str_puts(o, "  }\n  return 0;\n}\n\n");
  (void)ix;
  *chunk_len = 0;
  return HARP_OK;
}

harp_status rc_emit_gather(rc_ctx *c, int r, const char *fn, ut_str *out, long *chunk_len) {
  rc_nest_ctx nc = {c->e, c->g, c->pv, c->f, c->arena, c->gpu, .half_rows = false};
  emit m;
  if (rc_emit_init(&m, &nc, r, out)) return c->e->code;
  harp_status st = emit_gather(c, &m, fn, chunk_len);
  rc_emit_free(&m);
  return st;
}

/* The entry fn of kernel fn_body (region R of c): the body over the
 * outermost shared loop (opts), whose length is len_expr at run time or
 * chunk_len (outer: s0's extent there at this binding), split over the pool
 * where the work pays.  Threads take slices of that loop (its iterations
 * are independent: every dependence in the region is the identity on the
 * shared loops); small kernels stay on the calling thread. */
static void emit_entry(const rc_ctx *c, const rg_region *R, const char *fn, const poly_ast_opts *opts, const char *len_expr,
                       const tiny_shape *s0, long outer, long chunk_len, ut_str *out) {
  const tiny_graph *g = c->g;
  double work = 0, work_hi = 0;
  for (int k = 0; k < R->nblocks; k++) {
    const poly_block_info *b = poly_block(c->pv, R->blocks[k]);
    const tiny_node *n = &g->nodes[b->node];
    const tiny_shape *ws = b->kind == POLY_REDUCE || b->kind == POLY_CONTRACTION ? &g->nodes[n->src[0].node].shape : &n->shape;
    work += (double)tiny_shape_numel(ws);
    work_hi += (double)rc_size_hi(c, ws, 0, ws->rank);
  }
  if (c->ngen_syms) { /* a ShapeSet object: the sizes passed to the body, the choice at run time */
    double per = opts->chunk_outer ? work_hi / (double)rc_size_hi(c, s0, opts->chunk_var, opts->chunk_var + 1) : 0;
    char clen[32];
    snprintf(clen, sizeof clen, "%ldL", chunk_len > 0 ? chunk_len : 0L);
    rc_emit_sv_entry(c, fn, len_expr ? len_expr : clen, opts->chunk_outer, per, out);
  } else if (len_expr) { /* the same choice as below, at run time */
    ut_str_printf(out,
                  "static void %s_task(void *ctx, int t, int tid) {\n"
                  "  hp_chunks *c = ctx;\n  (void)tid;\n"
                  "  if (%s_body(c->bufs, c->len * t / c->ntasks, c->len * (t + 1) / c->ntasks)) c->rc = 1;\n}\n"
                  "static int %s(hprt_pool *pool, void *const *bufs) {\n"
                  "  long len = %s;\n"
                  "  if (len <= 1 || (double)len * %.17g < 32768.0) return %s_body(bufs, 0, len);\n"
                  "  int nt = 2 * hprt_pool_size(pool);\n"
                  "  hp_chunks c = {bufs, len, (int)(nt < len ? nt : len), 0};\n"
                  "  hprt_pool_run(pool, c.ntasks, %s_task, &c);\n  return c.rc;\n}\n\n",
                  fn, fn, fn, len_expr, work / (double)outer, fn, fn);
  } else if (chunk_len > 1 && work >= 32768.0) {
    ut_str_printf(out,
                  "static void %s_task(void *ctx, int t, int tid) {\n"
                  "  hp_chunks *c = ctx;\n  (void)tid;\n"
                  "  if (%s_body(c->bufs, c->len * t / c->ntasks, c->len * (t + 1) / c->ntasks)) c->rc = 1;\n}\n"
                  "static int %s(hprt_pool *pool, void *const *bufs) {\n"
                  "  long len = %ldL;\n  int nt = 2 * hprt_pool_size(pool);\n"
                  "  hp_chunks c = {bufs, len, (int)(nt < len ? nt : len), 0};\n"
                  "  hprt_pool_run(pool, c.ntasks, %s_task, &c);\n  return c.rc;\n}\n\n",
                  fn, fn, fn, chunk_len, fn);
  } else {
    ut_str_printf(out, "static int %s(hprt_pool *pool, void *const *bufs) {\n  (void)pool;\n  return %s_body(bufs, 0, %ldL);\n}\n\n",
                  fn, fn, chunk_len > 0 ? chunk_len : 0L);
  }
}

harp_status rc_emit_loops(rc_ctx *c, int r, const char *fn, const char *why, ut_str *out, long *chunk_len) {
  const fn_function *f = c->f;
  const rg_region *R = &f->part->regions[f->kernels[r].region];
  const tiny_graph *g = c->g;
  int64_t *now = c->ngen_syms ? ut_arena_alloc(c->arena, sizeof(int64_t) * (size_t)c->ngen_syms) : NULL;
  if (c->ngen_syms && !now) return ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
  if (now) rc_sym_now(c, now);
  rc_nest_ctx nc = {c->e, c->g, c->pv, c->f, c->arena, c->gpu, .half_rows = c->bf16, .nsyms = c->ngen_syms,
                    .syms = c->gen_syms, .sym_now = now, .sym_hi = c->gen_hi};
  emit m;
  if (rc_emit_init(&m, &nc, r, out)) return c->e->code;
  harp_status st = HARP_OK;
  *chunk_len = 0;
  if (why) ut_str_printf(out, "/* generic loops: the template declined (%s) */\n", why);
  rc_nest_setup(&m);
  const poly_block_info *b0 = poly_block(c->pv, R->blocks[0]);
  /* threads split the outermost shared loop that is not of extent 1 (a
   * batch of 1 leads most CNN outputs) */
  const tiny_shape *s0 = &g->nodes[b0->node].shape;
  char len_expr[160]; /* a ShapeSet object: that loop's length read at run time (rc_syms.c) */
  int cv = 0;
  while (cv + 1 < m.prefix && s0->d[cv].n == 1 && !rc_size_expr(c, s0, cv, cv + 1, 1, len_expr, sizeof len_expr)) cv++;
  long outer = m.prefix >= 1 ? (long)s0->d[cv].n : 0;
  bool run_len = m.prefix >= 1 && rc_size_expr(c, s0, cv, cv + 1, outer, len_expr, sizeof len_expr);
  poly_ast_opts opts = {.prefix = m.prefix, .chunk_outer = outer > 1 || run_len, .chunk_var = cv,
                        .chunk_extent = run_len ? outer : 0, .nsyms = c->ngen_syms, .syms = c->gen_syms,
                        .sym_now = now, .sym_hi = c->gen_hi};
  if (run_len && m.prefix >= 1) opts.chunk_sym = rc_nest_sym(&nc, &s0->d[cv]) + 1;
  poly_ast *tree;
  if ((st = poly_ast_gen(c->e, c->pv, m.stmts, m.nstmts, &opts, c->arena, &tree))) goto done;
  if (!rt_knobs_or_default(c->knobs)->no_coalesce && (st = rc_coalesce(&m, tree))) goto done;
  *chunk_len = opts.chunk_outer ? outer : 0;
  bool floors = false; /* HP_NOTRAP (rc_prelude.c) for a kernel that calls floorf */
  for (int k = 0; k < R->nblocks && !floors; k++) floors = g->nodes[poly_block(c->pv, R->blocks[k])->node].op == TINY_FLOOR;
  ut_str_printf(out, "%sHP_KERNEL static int %s_body(void *const *bufs, %slong hp_lo, long hp_hi) {\n", floors ? "HP_NOTRAP " : "",
                fn, c->ngen_syms ? "const long *hp_sv, " : "");
  if (!opts.chunk_outer) ut_str_puts(out, "  (void)hp_lo; (void)hp_hi;\n");
  rc_emit_sv_locals(c, out);
  /* one typed restrict pointer per buffer: live buffers never overlap */
  for (int k = 0; k < m.K->nreads + m.K->nwrites; k++) {
    int b = k < m.K->nreads ? m.K->reads[k] : m.K->writes[k - m.K->nreads];
    tiny_dtype dt = f->buffers[b].dtype;
    ut_str_printf(out, "  %s%s *restrict p%d = bufs[%d];\n", k < m.K->nreads ? "const " : "", storage_type(dt), k, k);
  }
  /* locals: intermediates and accumulators.  Past the stack budget the
   * arrays go to the heap, one block per call: blocks that share no loop (a
   * grouped conv's [n, g, oc/g, oh, ow] sums reshaped to y) keep whole-output
   * arrays, slow but never a reason a valid model fails to compile */
  ut_str probe;
  ut_str_init(&probe);
  int64_t arrays = 0, local_bytes = rc_emit_locals(&m, &probe, "  ", NULL, &arrays);
  ut_str_free(&probe);
  bool heap = local_bytes > c->local_budget;
  if (heap && local_bytes - arrays > c->local_budget) {
    st = ut_fail(c->e, HARP_E_UNSUPPORTED, R->name, "region needs %" PRId64 " bytes of scalar locals (budget %d)",
                 local_bytes - arrays, c->local_budget);
    goto done;
  }
  if (heap)
    ut_str_printf(out, "  unsigned char *hp_heap = malloc(%" PRId64 "); /* %" PRId64 " bytes of locals: past the stack budget */\n"
                       "  if (!hp_heap) return 1;\n", arrays, local_bytes);
  rc_emit_locals(&m, out, "  ", heap ? "hp_heap" : NULL, NULL);
  if ((st = rc_print_ast(&m, tree, 1))) goto done;
  ut_str_puts(out, heap ? "  free(hp_heap);\n  return 0;\n}\n\n" : "  return 0;\n}\n\n");
  emit_entry(c, R, fn, &opts, run_len ? len_expr : NULL, s0, outer, *chunk_len, out);
  if (out->oom) st = ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
done:
  rc_emit_free(&m);
  return st;
}
