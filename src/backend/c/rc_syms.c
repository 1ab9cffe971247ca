/* rc_syms.c — sizes read at run time: the pieces of a ShapeSet object's C
 * (docs/architecture.md, "One object per ShapeSet").  A template that can
 * take a size at run time asks rc_size_expr for it as an expression of the
 * shape symbols, hp_sym_[i], which P_run_syms sets before the kernels run
 * (on the calling thread: a kernel reads its sizes there, before it hands
 * work to the pool).  Symbols are printed as indices, never by name.
 * Needs: region_c.h (rc_ctx.gen_syms), kernel/contract.h (ct_size).  Gives: rc_size_expr, rc_axis_expr, rc_stride_expr,
 * rc_sum_expr, rc_size_hi, rc_slot_shape,
 * rc_emit_sym_block, rc_emit_run_syms (rc_layout.c: the arena), and for a generic
 * loop nest (region_c.c) rc_sym_now, rc_emit_sv_locals, rc_emit_sv_entry:
 * its body takes the run's symbols as hp_sv[] (a pool thread has no
 * hp_sym_ of its own) and names them hp_sv<i>, isl's parameters. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "region_c.h"
#include "kernel/contract.h"

/* The index of symbol `sym` among c's ShapeSet symbols, or -1. */
static int sym_index(const rc_ctx *c, const char *sym) {
  for (int i = 0; sym && i < c->ngen_syms; i++)
    if (!strcmp(c->gen_syms[i], sym)) return i;
  return -1;
}

bool rc_size_expr(const rc_ctx *c, const tiny_shape *s, int d0, int d1, int64_t want, char *buf, size_t cap) {
  if (!c->ngen_syms || !s || d0 < 0 || d1 > s->rank || d0 > d1) return false;
  int64_t lit = 1, prod = 1;
  bool any = false;
  size_t k = 0;
  buf[0] = 0;
  for (int d = d0; d < d1; d++) {
    prod *= s->d[d].n;
    int i = sym_index(c, s->d[d].sym);
    if (i < 0) {
      lit *= s->d[d].n;
      continue;
    }
    int w = snprintf(buf + k, cap - k, "%shp_sym_[%d]", any ? " * " : "(", i);
    if (w < 0 || (size_t)w >= cap - k) return false;
    k += (size_t)w, any = true;
  }
  if (!any || prod != want) return false; /* the reader's size is not this product: keep the constant */
  int w = snprintf(buf + k, cap - k, " * %" PRId64 "L)", lit);
  return w >= 0 && (size_t)w < cap - k;
}

bool rc_stride_expr(const rc_ctx *c, const tiny_shape *s, int64_t stride, char *buf, size_t cap) {
  if (!c->ngen_syms || !s || stride <= 1) return false;
  int64_t prod = 1;
  for (int d0 = s->rank - 1; d0 >= 0; d0--) { /* the fewest innermost dims whose product it is */
    prod *= s->d[d0].n;
    if (prod == stride) return rc_size_expr(c, s, d0, s->rank, stride, buf, cap);
    if (prod > stride) return false;
  }
  return false;
}

bool rc_axis_expr(const rc_ctx *c, const tiny_shape *s, int d, int64_t want, char *buf, size_t cap, int64_t *hi) {
  if (!s || d < 0 || d >= s->rank || !rc_size_expr(c, s, d, d + 1, want, buf, cap)) return false;
  *hi = rc_size_hi(c, s, d, d + 1);
  return true;
}

bool rc_sum_expr(const rc_ctx *c, const ct_size *z, char *buf) {
  int k = snprintf(buf, 160, "(%" PRId64 "L", z->lit);
  bool any = false;
  for (int i = 0; i < z->nterm && k > 0 && k < 160; i++) {
    char t[160];
    tiny_shape one = {1, {{z->tval[i], z->term[i]}}};
    bool x = rc_size_expr(c, &one, 0, 1, z->tval[i], t, sizeof t);
    if (!x) snprintf(t, sizeof t, "%" PRId64 "L", z->tval[i]);
    any |= x;
    k += snprintf(buf + k, 160 - (size_t)k, " + %" PRId64 "L * %s", z->coef[i], t);
  }
  if (k > 0 && k < 159) buf[k++] = ')', buf[k] = 0;
  return any && k > 0 && k < 160;
}

int64_t rc_size_hi(const rc_ctx *c, const tiny_shape *s, int d0, int d1) {
  int64_t prod = 1;
  for (int d = d0; s && d < d1 && d < s->rank; d++) {
    int i = sym_index(c, s->d[d].sym);
    prod *= i < 0 ? s->d[d].n : c->gen_hi[i];
  }
  return prod;
}

const tiny_shape *rc_slot_shape(const rc_ctx *c, int r, int slot) {
  const fn_function *f = c->f;
  for (int k = 0; k < f->nkernels; k++) {
    const fn_kernel *K = &f->kernels[k];
    if (K->region != r) continue;
    int b = slot < K->nreads ? K->reads[slot] : slot < K->nreads + K->nwrites ? K->writes[slot - K->nreads] : -1;
    return b < 0 || slot < 0 ? NULL : &c->g->nodes[f->buffers[b].node].shape;
  }
  return NULL;
}

void rc_emit_sym_block(const rc_ctx *c, ut_str *out) {
  if (!c->ngen_syms) return;
  ut_str_printf(out, "/* the shape symbols of this run (P_run_syms); P_run: the values compiled for */\n"
                     "static _Thread_local long hp_sym_[%d] = {", c->ngen_syms);
  for (int i = 0; i < c->ngen_syms; i++) ut_str_printf(out, "%s%" PRId64 "L", i ? ", " : "", c->gen_hi[i]);
  ut_str_puts(out, "};\n");
  ut_str_printf(out, "/* a generic loop nest's slices of a run, with the run's symbols (rc_emit_sv_entry) */\n"
                     "typedef struct hp_chunks_sv { void *const *bufs; long len; int ntasks; int rc; long sv[%d]; } hp_chunks_sv;\n",
                c->ngen_syms);
}

void rc_sym_now(const rc_ctx *c, int64_t *now) {
  for (int i = 0; i < c->ngen_syms; i++) {
    now[i] = -1;
    for (int k = 0; k < c->g->n && now[i] < 0; k++)
      for (int d = 0; d < c->g->nodes[k].shape.rank && now[i] < 0; d++)
        if (c->g->nodes[k].shape.d[d].sym && !strcmp(c->g->nodes[k].shape.d[d].sym, c->gen_syms[i]))
          now[i] = c->g->nodes[k].shape.d[d].n;
  }
}

void rc_emit_sv_locals(const rc_ctx *c, ut_str *out) {
  for (int i = 0; i < c->ngen_syms; i++)
    ut_str_printf(out, "  const long hp_sv%d = hp_sv[%d];\n  (void)hp_sv%d;\n", i, i, i);
}

void rc_emit_sv_entry(const rc_ctx *c, const char *fn, const char *len, bool chunks, double per, ut_str *out) {
  if (!chunks) {
    ut_str_printf(out, "static int %s(hprt_pool *pool, void *const *bufs) {\n  (void)pool;\n  return %s_body(bufs, hp_sym_, 0, %s);\n}\n\n",
                  fn, fn, len);
    return;
  }
  ut_str_printf(out,
                "static void %s_task(void *ctx, int t, int tid) {\n"
                "  hp_chunks_sv *c = ctx;\n  (void)tid;\n"
                "  if (%s_body(c->bufs, c->sv, c->len * t / c->ntasks, c->len * (t + 1) / c->ntasks)) c->rc = 1;\n}\n"
                "static int %s(hprt_pool *pool, void *const *bufs) {\n"
                "  long len = %s;\n"
                "  if (len <= 1 || (double)len * %.17g < 32768.0) return %s_body(bufs, hp_sym_, 0, len);\n"
                "  int nt = 2 * hprt_pool_size(pool);\n"
                "  hp_chunks_sv c = {bufs, len, (int)(nt < len ? nt : len), 0, {0}};\n"
                "  for (int i = 0; i < %d; i++) c.sv[i] = hp_sym_[i];\n"
                "  hprt_pool_run(pool, c.ntasks, %s_task, &c);\n  return c.rc;\n}\n\n",
                fn, fn, fn, len, per, fn, c->ngen_syms, fn);
}

void rc_emit_run_syms(const rc_ctx *c, const char *P, ut_str *out) {
  if (!c->ngen_syms) return;
  ut_str_printf(out,
                "\n/* one run at the binding syms[0..%d) (the caller checked it against the ShapeSet) */\n"
                "int %s_num_syms(void) { return %d; }\n"
                "int %s_run_syms(%s_t *m, const long long *syms, const void *const *inputs, void *const *outputs) {\n"
                "  long keep[%d];\n"
                "  for (int i = 0; i < %d; i++) keep[i] = hp_sym_[i], hp_sym_[i] = (long)syms[i];\n"
                "  int rc = %s_run(m, inputs, outputs);\n"
                "  for (int i = 0; i < %d; i++) hp_sym_[i] = keep[i];\n"
                "  return rc;\n}\n",
                c->ngen_syms, P, c->ngen_syms, P, P, c->ngen_syms, c->ngen_syms, P, c->ngen_syms);
  /* kernel k alone at a binding (harp bench --profile --shapeset): its
   * buffers hold what an earlier P_run_syms at the same binding left */
  ut_str_printf(out,
                "int %s_run_kernel_syms(%s_t *m, const long long *syms, int k, const void *const *inputs, void *const *outputs) {\n"
                "  long keep[%d];\n"
                "  for (int i = 0; i < %d; i++) keep[i] = hp_sym_[i], hp_sym_[i] = (long)syms[i];\n"
                "  int rc = %s_run_kernel(m, k, inputs, outputs);\n"
                "  for (int i = 0; i < %d; i++) hp_sym_[i] = keep[i];\n"
                "  return rc;\n}\n",
                P, P, c->ngen_syms, c->ngen_syms, P, c->ngen_syms);
}

void rc_window_pads(const rc_ctx *c, int r, int x, const int64_t *stride, const bool *rt, int64_t *pad) {
  ct_window_pads(&(ct_src){.g = c->g, .pv = c->pv, .f = c->f}, r, x, stride, rt, pad);
}
