/* gmap_c.c — the CPU's elementwise map for ShapeSet objects whose inputs
 * are read through floor divisions and remainders by constants (a nearest
 * upsample added to a lateral map, a depth-to-space), every size read at
 * run time (docs/architecture.md, "One object per ShapeSet").
 * Needs: the kernel layer's reading (ct_read_gmap, src/kernel/gmap.h),
 * rc_syms.c's run-time sizes (rc_sum_expr: a piece's bounds), the op table's C spellings.
 * Gives: cc_try_gmap.
 *
 * The kernel walks y row by row (its innermost axis), the rows split over
 * the pool.  Each input's row start is its quasi-affine index over the
 * outer coordinates times its axes' strides (run-time expressions where a
 * symbol moves them).  Along a row the points go in blocks of D, the least
 * common multiple of the divisors on the innermost variable: within a
 * block, point q of input k is at jj * step_k + off_k(q) (jj the block),
 * step_k a constant wherever only constant strides move it.  The loop
 * over blocks is vectorised with the D points of a block as one group (an
 * x2 upsample's x loads contiguous, its math in lanes); the row's last
 * points (fewer than D) one by one.  Scalar C in fp32; no
 * HP_NOTRAP on the kernels: its optimize attribute keeps the prelude's
 * math (hp_exp2f) from inlining, and the loops then stay scalar;
 * ordinary compiles never come here (kernel_c.c asks only with ShapeSet
 * symbols), so their C is unchanged. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "contract_c.h"
#include "kernel/gmap.h"
#include "tiny/tiny_spell.h"

/* Blocks of more points than this along a row: not taken. */
#define GMAP_MAX_D 16
/* Fewer points run on the calling thread (as the map kernel's). */
#define GMAP_SMALL_POINTS 32768.0

/* The Tiny ops this kernel spells in scalar C. */
static bool gm_op_ok(tiny_op op) { return op == TINY_CAST || tiny_op_c(op, false, false) != NULL; }

/* What the printer keeps: the reading, and each size's C text. */
typedef struct gm {
  const ct_gmap *g;
  const ct_gmap_piece *pc;                    /* the piece printed */
  char ext[POLY_MAX_VARS][160];               /* y's axes: an expression or a constant */
  char st[CT_MAP_MAX_IN][TINY_MAX_RANK][160]; /* the inputs' axis strides, likewise */
  int64_t stc[CT_MAP_MAX_IN][TINY_MAX_RANK];  /* the stride when a constant, else -1 */
  int D;
  char rt_lo[160], rt_len[160]; /* the piece's start and extent along the cut axis read at run time, else "" */
  char rt_off[CT_MAP_MAX_IN][160]; /* an input's cut_off read at run time (cx->o[k]) where it is not the piece's start, else "" */
  bool any_off;                    /* some piece reads a cx->o */
} gm;

static int64_t gcd64(int64_t a, int64_t b) { return b ? gcd64(b, a % b) : a; }

/* y's sizes of kernel r's reading g as C text into m (expressions of the
 * symbols where they move, constants else); false when y's shape is not
 * the one read or the pieces cut its innermost axis.  *any: a size moves. */
static bool gm_ysizes(const rc_ctx *c, int r, const ct_gmap *g, gm *m, bool *any) {
  const tiny_shape *ys = rc_slot_shape(c, r, g->y.slot);
  if (!ys || ys->rank != g->nv || g->var == g->nv - 1) return false;
  for (int v = 0; v < g->nv; v++) {
    int64_t hi;
    if (ys->d[v].n != g->size[v]) return false;
    if (rc_axis_expr(c, ys, v, g->size[v], m->ext[v], sizeof m->ext[v], &hi)) *any = true;
    else snprintf(m->ext[v], sizeof m->ext[v], "%" PRId64 "L", g->size[v]);
  }
  return true;
}

/* Piece m->pc's input strides as C text into m, its block length D, and
 * its start and extent along the cut axis where a symbol moves them (a
 * concat's piece, ct_gmap_piece.cut_known); false when a shape is not the
 * one read or D is too large.  *any: a stride or bound moves. */
static bool gm_psizes(const rc_ctx *c, int r, gm *m, bool *any) {
  const ct_gmap_piece *pc = m->pc;
  int64_t D = 1, last = m->g->nv - 1;
  for (int k = 0; k < pc->nin; k++) {
    const ct_gmap_in *in = &pc->in[k];
    const tiny_shape *is = rc_slot_shape(c, r, in->t.slot);
    if (!is || is->rank != in->rank) return false;
    int64_t prod = 1;
    for (int a = in->rank - 1; a >= 0; a--) {
      m->stc[k][a] = prod;
      if (a + 1 < in->rank && rc_size_expr(c, is, a + 1, in->rank, prod, m->st[k][a], sizeof m->st[k][a])) {
        *any = true;
        m->stc[k][a] = -1;
      }
      prod *= is->d[a].n;
      for (int i = 0; i < in->ax[a].ndiv; i++)
        if (in->ax[a].dvar[i] == last) D = D / gcd64(D, in->ax[a].dden[i]) * in->ax[a].dden[i];
      if (D > GMAP_MAX_D) return false;
    }
  }
  m->D = (int)D;
  m->rt_lo[0] = m->rt_len[0] = 0; /* a concat's piece: its bounds as sizes (ct_cut_sizes) */
  if (pc->cut_known && rc_sum_expr(c, &pc->cut_len, m->rt_len)) *any = true;
  else m->rt_len[0] = 0;
  if (pc->cut_known && pc->lo > 0 && rc_sum_expr(c, &pc->cut_lo, m->rt_lo)) *any = true;
  else m->rt_lo[0] = 0;
  for (int k = 0; k < pc->nin && k < CT_MAP_MAX_IN; k++) { /* an input starting elsewhere than the piece, at a run-time position */
    const ct_gmap_in *in = &pc->in[k];
    m->rt_off[k][0] = 0;
    if (m->rt_lo[0] && in->cut_axis >= 0 && !ct_size_same(&in->cut_off, &pc->cut_lo) &&
        rc_sum_expr(c, &in->cut_off, m->rt_off[k]))
      m->any_off = true;
    else m->rt_off[k][0] = 0;
  }
  return true;
}

/* Append "+ v * stride(k, a)" to o (a constant stride folded into *lit). */
static void gm_term(ut_str *o, const gm *m, int k, int a, int64_t v, int64_t *lit) {
  if (!v) return;
  if (m->stc[k][a] >= 0) *lit += v * m->stc[k][a];
  else ut_str_printf(o, " + %" PRId64 "L * cx->s[%d][%d]", v, k, a);
}

/* How input k's index along axis a counts from a run-time position: its
 * text (" - 1L * cx->lo") into ix and the position at this binding into
 * *at, or false (*at 0) where it holds no run-time position.  Where the
 * piece starts at a run-time cx->lo (a concat's piece along a symbolic
 * axis), an index along the cut axis known to count from the piece's
 * start (cut_off the piece's, ct_cut_origins) or from another run-time
 * position (cx->o[k]) counts from that; one known to count from a constant
 * (an addend of y: 0) is y's coordinate, as it is.  Not known: an index
 * that steps with the cut coordinate counts from the piece's start (an
 * index i_var / d: its start divided, as it is). */
static bool gm_from(ut_str *ix, const gm *m, int k, int a, int64_t *at) {
  const ct_gmap_in *in = &m->pc->in[k];
  const poly_qaxis *q = &in->ax[a];
  *at = 0;
  if (!m->rt_lo[0] || m->g->var < 0) return false;
  int64_t coef = q->coef[m->g->var];
  if (!coef) return false;
  if (in->cut_axis == a && m->rt_off[k][0]) {
    *at = coef * in->cut_off.value;
    ut_str_printf(ix, " - %" PRId64 "L * cx->o[%d]", coef, k);
    return true;
  }
  if (in->cut_axis == a && !ct_size_same(&in->cut_off, &m->pc->cut_lo)) return false;
  for (int i = 0; i < q->ndiv; i++)
    if (q->dvar[i] == m->g->var) return false;
  *at = coef * m->pc->lo;
  ut_str_printf(ix, " - %" PRId64 "L * cx->lo", coef);
  return true;
}

/* Input k's row start: its indices over the outer coordinates i0.. (y's
 * axes but the last) times its strides, each counted from its run-time
 * position along the cut axis where it has one (gm_from: its constant at
 * this binding, c0 + the position, is then the input's offset from it). */
static void gm_row_start(ut_str *o, const gm *m, int k) {
  const ct_gmap_in *in = &m->pc->in[k];
  int64_t lit = 0;
  ut_str_printf(o, "    const float *p%d = x%d", k, k);
  for (int a = 0; a < in->rank; a++) {
    const poly_qaxis *q = &in->ax[a];
    int64_t c0 = q->c0, at;
    ut_str ix;
    ut_str_init(&ix);
    if (gm_from(&ix, m, k, a, &at)) c0 += at;
    for (int v = 0; v + 1 < m->g->nv; v++)
      if (q->coef[v]) ut_str_printf(&ix, " + %" PRId64 "L * i%d", q->coef[v], v);
    for (int i = 0; i < q->ndiv; i++)
      if (q->dvar[i] + 1 < m->g->nv) ut_str_printf(&ix, " + %" PRId64 "L * (i%d / %" PRId64 "L)", q->dcoef[i], q->dvar[i], q->dden[i]);
    if (c0 || ix.len) {
      if (m->stc[k][a] >= 0 && !ix.len) lit += c0 * m->stc[k][a];
      else if (m->stc[k][a] >= 0) ut_str_printf(o, " + (%" PRId64 "L%s) * %" PRId64 "L", c0, ix.buf ? ix.buf : "", m->stc[k][a]);
      else ut_str_printf(o, " + (%" PRId64 "L%s) * cx->s[%d][%d]", c0, ix.buf ? ix.buf : "", k, a);
    }
    if (ix.oom) o->oom = true;
    ut_str_free(&ix);
  }
  ut_str_printf(o, " + %" PRId64 "L;\n", lit);
}

/* Input k's offset within a row at point j (jconst < 0: the C variable j;
 * else the constant jconst, as a block's point), as a sum over its axes. */
static void gm_inner(ut_str *o, const gm *m, int k, int64_t jconst) {
  const ct_gmap_in *in = &m->pc->in[k];
  int last = m->g->nv - 1;
  int64_t lit = 0;
  ut_str_puts(o, "0");
  for (int a = 0; a < in->rank; a++) {
    const poly_qaxis *q = &in->ax[a];
    if (jconst >= 0) { /* point jconst of a block: a constant per axis */
      int64_t v = q->coef[last] * jconst;
      for (int i = 0; i < q->ndiv; i++)
        if (q->dvar[i] == last) v += q->dcoef[i] * (jconst / q->dden[i]);
      gm_term(o, m, k, a, v, &lit);
      continue;
    }
    bool any = q->coef[last] != 0;
    for (int i = 0; i < q->ndiv; i++) any |= q->dvar[i] == last;
    if (!any) continue;
    ut_str_printf(o, " + (%" PRId64 "L * j", q->coef[last]);
    for (int i = 0; i < q->ndiv; i++)
      if (q->dvar[i] == last) ut_str_printf(o, " + %" PRId64 "L * (j / %" PRId64 "L)", q->dcoef[i], q->dden[i]);
    if (m->stc[k][a] >= 0) ut_str_printf(o, ") * %" PRId64 "L", m->stc[k][a]);
    else ut_str_printf(o, ") * cx->s[%d][%d]", k, a);
  }
  ut_str_printf(o, " + %" PRId64 "L", lit);
}

/* An op argument's text: an input's load, a value, a constant. */
static void gm_arg(char *buf, size_t cap, const ct_map_arg *a) {
  if (a->kind == 'i') snprintf(buf, cap, "a%d", a->idx);
  else if (a->kind == 'v') snprintf(buf, cap, "v%d", a->idx);
  else if (isnan(a->c)) snprintf(buf, cap, "NAN");
  else if (isinf(a->c)) snprintf(buf, cap, "%sINFINITY", a->c < 0 ? "-" : "");
  else snprintf(buf, cap, "%#.9gf", a->c);
}

/* One point: the loads (input k at p<k>[...]; q >= 0: point q of block
 * jj, else point j), the ops, the result stored to dst. */
static void gm_point(ut_str *o, const gm *m, int64_t q, const char *dst) {
  const ct_gmap_piece *pc = m->pc;
  ut_str_puts(o, "      {\n");
  for (int k = 0; k < pc->nin; k++) {
    if (q >= 0) ut_str_printf(o, "        const float a%d = p%d[jj * st%d + of%d_%" PRId64 "];\n", k, k, k, k, q);
    else {
      ut_str_printf(o, "        const float a%d = p%d[", k, k);
      gm_inner(o, m, k, -1);
      ut_str_puts(o, "];\n");
    }
  }
  for (int j = 0; j < pc->nops; j++) {
    const ct_map_op *op = &pc->ops[j];
    char a[64], b[64];
    gm_arg(a, sizeof a, &op->a);
    gm_arg(b, sizeof b, &op->b);
    const char *x[2] = {a, b};
    ut_str_printf(o, "        const float v%d = ", j);
    if (op->op == TINY_CAST) ut_str_puts(o, a);
    else tiny_op_spell(o, tiny_op_c(op->op, false, false), x, tiny_op_arity(op->op));
    ut_str_puts(o, ";\n");
  }
  ut_str_printf(o, "        %s = v%d;\n      }\n", dst, pc->nops - 1);
}

/* Piece kp's task over its rows [task * chunk, ...): the outer coordinates
 * (the cut one from the piece's start), blocks of D points, then the rest. */
static void gm_task(ut_str *o, const gm *m, const char *fn, int kp) {
  const ct_gmap *g = m->g;
  const ct_gmap_piece *pc = m->pc;
  int nv = g->nv;
  ut_str_printf(o, "static void %s_g%dtask(void *vc, int task, int tid) {\n  const %s_gx *cx = (const %s_gx *)vc;\n"
                   "  (void)tid;\n", fn, kp, fn, fn);
  for (int k = 0; k < pc->nin; k++) ut_str_printf(o, "  const float *x%d = (const float *)cx->bufs[%d];\n", k, pc->in[k].t.slot);
  ut_str_printf(o, "  float *y = (float *)cx->bufs[%d];\n  const long n = cx->e[%d];\n", g->y.slot, nv - 1);
  for (int k = 0; k < pc->nin; k++) {
    ut_str_printf(o, "  const long st%d = ", k); /* the step a block: the offset at point D (that at 0 is 0) */
    gm_inner(o, m, k, m->D);
    ut_str_puts(o, ";\n");
    for (int q = 0; q < m->D; q++) {
      ut_str_printf(o, "  const long of%d_%d = ", k, q);
      gm_inner(o, m, k, q);
      ut_str_puts(o, ";\n");
    }
  }
  ut_str_puts(o, "  long r0 = (long)task * cx->chunk, r1 = r0 + cx->chunk;\n  if (r1 > cx->rows) r1 = cx->rows;\n"
                 "  for (long r = r0; r < r1; r++) {\n    long q = r;\n");
  for (int v = nv - 2; v >= 0; v--) {
    if (v) ut_str_printf(o, "    long i%d = q %% cx->e[%d]; q /= cx->e[%d];\n", v, v, v);
    else ut_str_puts(o, "    long i0 = q;\n");
    if (v == g->var && m->rt_lo[0]) ut_str_printf(o, "    i%d += cx->lo; /* the piece's start */\n", v);
    else if (v == g->var) ut_str_printf(o, "    i%d += %" PRId64 "L; /* the piece's start */\n", v, pc->lo);
  }
  if (nv < 2) ut_str_puts(o, "    (void)q;\n");
  for (int k = 0; k < pc->nin; k++) gm_row_start(o, m, k);
  ut_str_puts(o, "    float *yr = y + ");
  for (int v = 0; v + 1 < nv; v++) ut_str_puts(o, "(");
  ut_str_puts(o, "0");
  for (int v = 0; v + 1 < nv; v++) ut_str_printf(o, " + i%d) * cx->f[%d]", v, v + 1);
  /* blocks of D points: the D points of block jj in one iteration (the
   * compiler vectorises the loop over jj, the points as one group: an x2
   * upsample's x loads contiguous, y's and a lateral input's in pairs) */
  ut_str_printf(o, ";\n    const long nb = n / %d;\n    #pragma omp simd\n    for (long jj = 0; jj < nb; jj++) {\n", m->D);
  for (int q = 0; q < m->D; q++) {
    char dst[48];
    snprintf(dst, sizeof dst, "yr[jj * %d + %d]", m->D, q);
    gm_point(o, m, q, dst);
  }
  ut_str_printf(o, "    }\n    for (long j = nb * %d; j < n; j++) /* the rest: fewer than D points */\n", m->D);
  gm_point(o, m, -1, "yr[j]");
  ut_str_puts(o, "  }\n}\n");
}

/* Piece kp's run in the entry point: its sizes into the context, its rows over the pool. */
static void gm_run_piece(ut_str *o, const gm *m, const char *fn, int kp) {
  const ct_gmap *g = m->g;
  const ct_gmap_piece *pc = m->pc;
  for (int v = 0; v < g->nv; v++) {
    if (v == g->var && m->rt_len[0]) ut_str_printf(o, "  cx.e[%d] = %s;\n", v, m->rt_len);
    else if (v == g->var) ut_str_printf(o, "  cx.e[%d] = %" PRId64 "L;\n", v, pc->hi - pc->lo + 1);
    else ut_str_printf(o, "  cx.e[%d] = cx.f[%d];\n", v, v);
  }
  if (m->rt_lo[0]) ut_str_printf(o, "  cx.lo = %s;\n", m->rt_lo);
  for (int k = 0; k < pc->nin; k++)
    if (m->rt_off[k][0]) ut_str_printf(o, "  cx.o[%d] = %s;\n", k, m->rt_off[k]);
  for (int k = 0; k < pc->nin; k++)
    for (int a = 0; a < pc->in[k].rank; a++)
      if (m->stc[k][a] < 0) ut_str_printf(o, "  cx.s[%d][%d] = %s;\n", k, a, m->st[k][a]);
  ut_str_puts(o, "  cx.rows = 1");
  for (int v = 0; v + 1 < g->nv; v++) ut_str_printf(o, " * cx.e[%d]", v);
  ut_str_printf(o, ";\n  cx.chunk = (cx.rows + nt - 1) / nt;\n  if (cx.chunk < 1) cx.chunk = 1;\n"
                   "  hprt_pool_run(cx.rows > cx.chunk ? pool : NULL, (int)((cx.rows + cx.chunk - 1) / cx.chunk), %s_g%dtask, &cx);\n",
                fn, kp);
}

harp_status cc_try_gmap(rc_ctx *c, int r, const char *fn, ut_str *out, bool *handled) {
  *handled = false;
  if (!c->ngen_syms) return HARP_OK; /* ordinary compiles: the loop nest, as before */
  ct_src src = {c->g, c->pv, c->f, false, false, true, c->gen_syms, c->ngen_syms}; /* a ShapeSet object's (ngen_syms > 0) */
  gm *m = calloc(1, sizeof *m);
  ct_gmap *g = calloc(1, sizeof *g); /* large: kept off the stack */
  ut_str body, run;
  ut_str_init(&body);
  ut_str_init(&run);
  const char *why = NULL;
  bool any = false, ok = m && g && ct_read_gmap(&src, r, gm_op_ok, g, &why);
  if (ok) m->g = g, ok = gm_ysizes(c, r, g, m, &any);
  for (int k = 0; ok && k < g->npiece; k++) {
    m->pc = &g->piece[k];
    ok = gm_psizes(c, r, m, &any);
    if (ok) gm_task(&body, m, fn, k), gm_run_piece(&run, m, fn, k);
  }
  if (ok && any) { /* some size moves: this kernel, else the loop nest as before */
    ut_str_printf(out, "/* ---- %s: a map over run-time sizes in %d piece(s), read through floor divisions (ShapeSet) ---- */\n",
                  fn, g->npiece);
    char offs[32] = ""; /* the inputs' run-time positions, where a piece reads one */
    if (m->any_off) snprintf(offs, sizeof offs, ", o[%d]", CT_MAP_MAX_IN);
    ut_str_printf(out, "typedef struct { void *const *bufs; long rows, chunk, lo, e[%d], f[%d], s[%d][%d]%s; } %s_gx;\n", g->nv, g->nv,
                  CT_MAP_MAX_IN, TINY_MAX_RANK, offs, fn);
    ut_str_puts(out, body.buf);
    ut_str_printf(out, "static int %s(hprt_pool *pool, void *const *bufs) {\n  %s_gx cx;\n  cx.bufs = bufs;\n", fn, fn);
    for (int v = 0; v < g->nv; v++) ut_str_printf(out, "  cx.f[%d] = %s;\n", v, m->ext[v]);
    ut_str_puts(out, "  if (1.0");
    for (int v = 0; v < g->nv; v++) ut_str_printf(out, " * cx.f[%d]", v);
    ut_str_printf(out, " < %.0f) pool = NULL; /* small: the calling thread alone */\n", GMAP_SMALL_POINTS);
    ut_str_printf(out, "  long nt = pool ? hprt_pool_size(pool) * 4 : 1;\n%s  return 0;\n}\n\n", run.buf);
    *handled = true;
  }
  bool oom = !m || !g || body.oom || run.oom || out->oom;
  ut_str_free(&body);
  ut_str_free(&run);
  free(g);
  free(m);
  return oom ? ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory") : HARP_OK;
}
