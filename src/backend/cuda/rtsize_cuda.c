/* rtsize_cuda.c — a ShapeSet build's sizes read at run time (issue 25): which
 * size or stride of a template or row kernel is a formula of the box's
 * symbols (lit x hp_sv<i> x ..: cuda_rtsz), found from the shapes of the
 * buffers the kernel reads and writes, and the launches' size arguments and
 * grids.  A size it cannot write as a formula stays the binding's constant:
 * the box's two corners then differ and the session builds per binding,
 * naming the kernel (gpu_box.c).  A residual epilogue's strides are
 * formulas of its own tensor's shape (a GEMM's) or the output's (a conv's).
 * In an sm90 module a GEMM whose run-time TMA strides are 16-byte aligned
 * at some bindings only (cuda_sm90_rt_aligned) is a pair of kernels
 * (region_tmpl_cuda.c, cuda_gemm_spec.own).
 * A derived symbol (tiny_dsym: a strided pool's (H + 1) floordiv 2) that
 * reads a box symbol joins the box's symbols (cuda_syms_derived): its dims
 * are read at run time like the others', its value computed on the host at
 * each binding (tiny_dsym_bind), its largest at the box's corner hi.
 * Needs: region_cuda.h (cuda_rctx: the box's symbols, their values now).
 * Gives: cuda_syms_derived, cuda_gen_sym, cuda_dims_formula, cuda_sizes_printed, cuda_rows_at_run_time,
 * cuda_gemm_at_run_time, cuda_gemm_macs_hi, cuda_conv_at_run_time, cuda_attn_at_run_time,
 * cuda_launch_sym_args, cuda_wino_grids,
 * cuda_launch_rows, cuda_splitk_ws_const, cuda_splitk_zero_at, cuda_zero_grid,
 * cuda_launches_sym_args, cuda_repack_at_run_time, cuda_copy_grid. */
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/region_cuda.h"
#include "kernel/contract.h"

harp_status cuda_syms_derived(harp_error *e, const tiny_graph *g, const tiny_symtab *at, const char **names, int64_t *hi,
                              int n, int cap, int *out) {
  *out = n;
  if (!n || !g->ndsyms) return HARP_OK;
  bool *varies = ut_xcalloc((size_t)g->ndsyms, sizeof *varies), *r = ut_xcalloc((size_t)g->ndsyms, sizeof *r);
  tiny_symtab t; /* the base symbols at the corner hi: names at hi, the others as at binds them */
  tiny_symtab_init(&t);
  harp_status st = varies && r ? HARP_OK : ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  for (int i = 0; !st && i < n; i++) {
    tiny_dsym_readers(g, names[i], r);
    for (int k = 0; k < g->ndsyms; k++) varies[k] |= r[k];
    st = tiny_symtab_set(e, &t, names[i], hi[i]);
  }
  for (int i = 0; !st && i < at->n; i++) {
    int64_t v;
    if (tiny_dsym_find(g, at->names[i]) < 0 && !tiny_symtab_get(&t, at->names[i], &v))
      st = tiny_symtab_set(e, &t, at->names[i], at->values[i]);
  }
  if (!st) st = tiny_dsym_bind(e, g, &t);
  for (int k = 0; !st && k < g->ndsyms; k++) {
    int64_t v;
    /* one that may shrink as the box grows has no largest value at hi: it stays the binding's (the corners differ) */
    if (!varies[k] || (!tiny_dsym_monotone(g->dsyms[k].def) && !tiny_dsym_steps_up(g, g->dsyms[k].def))) continue;
    if (!tiny_symtab_get(&t, g->dsyms[k].name, &v)) continue; /* reads a symbol this binding leaves unbound */
    if (*out == cap) {
      st = ut_fail(e, HARP_E_LIMIT, NULL, "more than %d varying sizes in one ShapeSet build", cap);
      break;
    }
    names[*out] = g->dsyms[k].name, hi[(*out)++] = v;
  }
  tiny_symtab_free(&t);
  free(varies);
  free(r);
  return st;
}

int cuda_gen_sym(const cuda_rctx *c, const tiny_dim *d) {
  for (int i = 0; d->sym && i < c->gen.n; i++)
    if (!strcmp(d->sym, c->gen.names[i]) && d->n == c->gen_now[i]) return i;
  return -1;
}

/* The shape of the buffer at Function kernel r's slot (CUDA_SLOT_REP_A:
 * the repacked A's copy), or NULL. */
static const tiny_shape *slot_shape(const cuda_rctx *c, int r, int slot) {
  if (slot == CUDA_SLOT_REP_A) return c->rep_a.rank ? &c->rep_a : NULL;
  const fn_kernel *K = &c->f->kernels[r];
  int buf = slot < 0 ? -1 : slot < K->nreads ? K->reads[slot] : slot < K->nreads + K->nwrites ? K->writes[slot - K->nreads] : -1;
  return buf < 0 ? NULL : &c->g->nodes[c->f->buffers[buf].node].shape;
}

const char *cuda_sizes_printed(const cuda_rctx *c, int r, int slot) {
  const tiny_shape *sh = c->gen.n ? slot_shape(c, r, slot) : NULL;
  for (int d = 0; sh && d < sh->rank; d++)
    if (cuda_gen_sym(c, &sh->d[d]) >= 0) return "a ShapeSet build: the loop nest reads the sizes at run time";
  return NULL;
}

/* The product of dims [d0, d1) of sh as a formula *z of c's symbols (z->n
 * 0: none among them), *hi its value at the box's corner hi; false when it
 * takes more than 8 symbols. */
static bool span_formula(const cuda_rctx *c, const tiny_shape *sh, int d0, int d1, cuda_rtsz *z, int64_t *hi) {
  memset(z, 0, sizeof *z);
  z->lit = *hi = 1;
  for (int d = d0; d < d1; d++) {
    int i = cuda_gen_sym(c, &sh->d[d]);
    *hi *= i < 0 ? sh->d[d].n : c->gen.hi[i];
    if (i < 0) z->lit *= sh->d[d].n;
    else if (z->n < 8) z->sym[z->n++] = i;
    else return false;
  }
  return true;
}

bool cuda_dims_formula(const cuda_rctx *c, const tiny_shape *sh, int d0, int d1, cuda_rtsz *z, int64_t *hi) {
  return span_formula(c, sh, d0, d1, z, hi);
}

/* The product of dims [d0, d1) of sh at the binding. */
static int64_t span_now(const tiny_shape *sh, int d0, int d1) {
  int64_t p = 1;
  for (int d = d0; d < d1; d++) p *= sh->d[d].n;
  return p;
}

/* The first dim j of the shortest run of sh's dims [j, end) of `want`
 * elements, or -1. */
static int suffix_in(const tiny_shape *sh, int end, int64_t want) {
  int64_t p = 1;
  for (int j = end; j >= 0 && p <= want; j--) {
    if (j < end) p *= sh->d[j].n; /* dims [j, end) */
    if (p == want) return j;
  }
  return -1;
}

/* The first dim of sh's shortest suffix of `want` elements, or -1. */
static int suffix_of(const tiny_shape *sh, int64_t want) { return suffix_in(sh, sh->rank, want); }

/* The rows (the dims but the last) and the row length (the last dim) of
 * the buffer at Function kernel r's slot as s's formulas when they are
 * s->rows and s->cols and one is a ShapeSet symbol of c: rows and cols
 * become the box's corner hi's (the grid, the checks); a constant part
 * stays.  False otherwise (s unchanged). */
bool cuda_rows_at_run_time(const cuda_rctx *c, int r, int slot, cuda_rownorm_spec *s) {
  const tiny_shape *sh = c->gen.n ? slot_shape(c, r, slot) : NULL;
  cuda_rtsz z, w;
  int64_t hi, whi;
  if (!sh || sh->rank < 1 || span_now(sh, 0, sh->rank - 1) != s->rows || sh->d[sh->rank - 1].n != s->cols ||
      s->row_stride != s->cols)
    return false; /* not these rows, or not dense */
  if (!span_formula(c, sh, 0, sh->rank - 1, &z, &hi) || !span_formula(c, sh, sh->rank - 1, sh->rank, &w, &whi) || !(z.n || w.n))
    return false;
  s->nsyms = c->gen.n;
  if (z.n) {
    s->nrows_sym = z.n, s->rows_lit = z.lit, s->rows = hi;
    memcpy(s->rows_sym, z.sym, sizeof z.sym[0] * (size_t)z.n);
  }
  if (w.n) s->rt_cols = w, s->cols = s->row_stride = whi;
  return true;
}

/* Stride v of a dense operand of shape sh as a formula *z: the shortest
 * suffix of sh of v elements (v 0 or 1, or none: a constant, z->n 0). */
static bool stride_formula(const cuda_rctx *c, const tiny_shape *sh, int64_t v, cuda_rtsz *z) {
  int64_t hi;
  int j = v > 1 && sh ? suffix_of(sh, v) : -1; /* sh NULL: an operand laid out at hi (CUDA_SLOT_HI) */
  memset(z, 0, sizeof *z);
  return j < 0 || span_formula(c, sh, j, sh->rank, z, &hi);
}

/* K of s as a formula *z (*hi at the corner hi): A's suffix when k is A's
 * contiguous dimension (A [M..][K..]), else B's suffix (B [N..][K..]), the
 * dims of B before N's suffix (B [K..][N..]) or of A before M's (A
 * [K..][M..]; sb NULL: B laid out at hi, A's only).  False when none is K. */
static bool k_formula(const cuda_rctx *c, const cuda_gemm_spec *s, const tiny_shape *sa, const tiny_shape *sb, cuda_rtsz *z,
                      int64_t *hi) {
  int j;
  if (s->a_sk == 1 && (j = suffix_of(sa, s->K)) >= 0) return span_formula(c, sa, j, sa->rank, z, hi);
  if (sb && s->b_sk == 1 && (j = suffix_of(sb, s->K)) >= 0) return span_formula(c, sb, j, sb->rank, z, hi);
  int e;
  if (sb && s->b_sn == 1 && (e = suffix_of(sb, s->N)) >= 0 && (j = suffix_in(sb, e, s->K)) >= 0) return span_formula(c, sb, j, e, z, hi);
  if (s->a_sm == 1 && (e = suffix_of(sa, s->M)) >= 0 && (j = suffix_in(sa, e, s->K)) >= 0) return span_formula(c, sa, j, e, z, hi);
  return false;
}

/* The strides s_b0, s_b1, s_m, s_n of each residual epilogue op of s (its
 * tensor at epi_slot[i]; -1: none, its strides stay constants) as formulas
 * t->rt_epi of the tensor's shape; *any true when one is read at run time.
 * False when a stride takes more than 8 symbols. */
static bool epi_formulas(const cuda_rctx *c, int r, const int *epi_slot, const cuda_gemm_spec *s, cuda_gemm_spec *t, bool *any) {
  for (int i = 0; i < s->n_epi; i++) {
    const tiny_shape *sr = s->epi[i].kind == CUDA_EPI_RESIDUAL ? slot_shape(c, r, epi_slot[i]) : NULL;
    const int64_t st[4] = {s->epi[i].s_b0, s->epi[i].s_b1, s->epi[i].s_m, s->epi[i].s_n};
    for (int j = 0; sr && j < 4; j++) {
      if (!stride_formula(c, sr, st[j], &t->rt_epi[i][j])) return false;
      *any = *any || t->rt_epi[i][j].n;
    }
  }
  return true;
}

bool cuda_gemm_at_run_time(const cuda_rctx *c, int r, const int slot[3], const int *epi_slot, cuda_gemm_spec *s) {
  const tiny_shape *sa = c->gen.n ? slot_shape(c, r, slot[0]) : NULL, *sb = sa ? slot_shape(c, r, slot[1]) : NULL;
  const tiny_shape *sc = sb || (sa && slot[1] == CUDA_SLOT_HI) ? slot_shape(c, r, slot[2]) : NULL; /* B at hi: constant strides */
  bool cm = s->c_sn != 1 && s->c_sm == 1; /* C's rows contiguous: [..][N..][M..] */
  if (!sc || s->tune.splitk > 1 || (s->c_sn != 1 && !cm)) return false;
  cuda_gemm_spec t = *s;
  /* C [batch[0]..][batch[1]..][M..][N..] (or N, M): each the shortest run of its elements before the next */
  int64_t in = cm ? s->M : s->N, out = cm ? s->N : s->M;
  int ji = suffix_of(sc, in), jo = ji < 0 ? -1 : suffix_in(sc, ji, out), jb = jo < 0 ? -1 : suffix_in(sc, jo, s->batch[1]);
  if (jb < 0 || span_now(sc, 0, jb) != s->batch[0]) return false;
  if (!span_formula(c, sc, jo, ji, cm ? &t.rt_n : &t.rt_m, cm ? &t.N : &t.M) ||
      !span_formula(c, sc, ji, sc->rank, cm ? &t.rt_m : &t.rt_n, cm ? &t.M : &t.N) ||
      !span_formula(c, sc, 0, jb, &t.rt_b[0], &t.batch[0]) || !span_formula(c, sc, jb, jo, &t.rt_b[1], &t.batch[1]) ||
      !k_formula(c, s, sa, sb, &t.rt_k, &t.K))
    return false;
  const tiny_shape *of[6] = {sa, sa, sb, sb, sc, sc};
  const int64_t st[6] = {s->a_sm, s->a_sk, s->b_sk, s->b_sn, s->c_sm, s->c_sn};
  bool any = t.rt_m.n || t.rt_n.n || t.rt_k.n || t.rt_b[0].n || t.rt_b[1].n;
  for (int i = 0; i < 6; i++) {
    if (!stride_formula(c, of[i], st[i], &t.rt_st[i])) return false;
    any = any || t.rt_st[i].n;
  }
  const int64_t *sbs[3] = {s->a_sb, s->b_sb, s->c_sb};
  for (int i = 0; i < 6; i++) { /* the batch strides of A, B, C */
    if (!stride_formula(c, of[i / 2 * 2], sbs[i / 2][i % 2], &t.rt_sb[i / 2][i % 2])) return false;
    any = any || t.rt_sb[i / 2][i % 2].n;
  }
  if (!epi_formulas(c, r, epi_slot, s, &t, &any) || !any) return false;
  /* on sm90, TMA strides aligned at some bindings only: a pair (cuda_gemm_spec.own) */
  t.nsyms = c->gen.n;
  *s = t;
  return true;
}

int64_t cuda_gemm_macs_hi(const cuda_rctx *c, int r, const int slot[3], const cuda_gemm_spec *s) {
  int64_t now = s->M * s->N * s->K * s->batch[0] * s->batch[1];
  const tiny_shape *sa = c->gen.n ? slot_shape(c, r, slot[0]) : NULL, *sb = c->gen.n ? slot_shape(c, r, slot[1]) : NULL;
  const tiny_shape *sc = c->gen.n ? slot_shape(c, r, slot[2]) : NULL;
  cuda_rtsz z;
  int64_t c_hi, k_hi = s->K; /* K: the binding's unless A's or B's dims give it */
  if (!sc || span_now(sc, 0, sc->rank) != s->M * s->N * s->batch[0] * s->batch[1] || !span_formula(c, sc, 0, sc->rank, &z, &c_hi))
    return now; /* not a ShapeSet build, or C not this shape: the binding's */
  if (sa && sb && !k_formula(c, s, sa, sb, &z, &k_hi)) k_hi = s->K;
  return c_hi * k_hi;
}

bool cuda_conv_at_run_time(const cuda_rctx *c, int r, int x_slot, cuda_conv_spec *s) {
  const tiny_shape *sx = c->gen.n ? slot_shape(c, r, x_slot) : NULL;
  if (!sx || sx->rank != 4 || sx->d[0].n != s->n || sx->d[1].n != s->c ||
      sx->d[2].n != s->h || sx->d[3].n != s->w || cuda_gen_sym(c, &sx->d[1]) >= 0)
    return false; /* not a dense NCHW input of these sizes, or its channels vary */
  cuda_conv_spec t = *s;
  if (!span_formula(c, sx, 0, 1, &t.rt_n, &t.n) || !span_formula(c, sx, 2, 3, &t.rt_h, &t.h) ||
      !span_formula(c, sx, 3, 4, &t.rt_w, &t.w) || !(t.rt_n.n || t.rt_h.n || t.rt_w.n))
    return false;
  t.nsyms = c->gen.n;
  *s = t;
  return true;
}

/* The dims [d0, d1) of dense sh spanning `size` elements at stride `src`
 * (the suffix after them: a copied dim of a repacked A, an attention's
 * batches), or false. */
static bool rep_run(const tiny_shape *sh, int64_t size, int64_t src, int *d0, int *d1) {
  int j1 = src >= 1 ? suffix_of(sh, src) : -1, j0 = j1;
  int64_t p = 1;
  while (j0 > 0 && p < size) p *= sh->d[--j0].n;
  *d0 = j0, *d1 = j1;
  return j1 >= 0 && p == size;
}

/* The sequence length of a row dimension whose row stride is `rs` in a
 * tensor of shape sh (the dim just before the suffix of rs elements) as
 * *z (*hi at the corner hi); false when no such dim is `want` long. */
static bool seq_formula(const cuda_rctx *c, const tiny_shape *sh, int64_t rs, int64_t want, cuda_rtsz *z, int64_t *hi) {
  int j = rs >= 1 ? suffix_of(sh, rs) : -1;
  return j >= 1 && sh->d[j - 1].n == want && span_formula(c, sh, j - 1, j, z, hi);
}

bool cuda_attn_at_run_time(const cuda_rctx *c, int r, const int slot[5], cuda_attn_spec *s) {
  const tiny_shape *sh[5];
  for (int i = 0; i < 5; i++) sh[i] = c->gen.n && (i != 3 || s->has_mask) ? slot_shape(c, r, slot[i]) : NULL;
  if (!sh[0] || !sh[1] || !sh[2] || !sh[4] || (s->has_mask && !sh[3]) || !s->strided) return false;
  cuda_attn_spec t = *s;
  /* m: out's rows (q's alike), n: k's rows */
  if (!seq_formula(c, sh[4], s->o_s[2], s->m, &t.rt_m, &t.m) || !seq_formula(c, sh[1], s->k_s[2], s->n, &t.rt_n, &t.n)) return false;
  int b0, b1; /* b: out's dims before its batch stride's suffix (not found: a constant, which prints) */
  if (s->b > 1 && rep_run(sh[4], s->b, s->o_s[0], &b0, &b1) && !span_formula(c, sh[4], b0, b1, &t.rt_b, &t.b)) return false;
  if (s->h > 1 && rep_run(sh[4], s->h, s->o_s[1], &b0, &b1) && !span_formula(c, sh[4], b0, b1, &t.rt_h, &t.h)) return false;
  const tiny_shape *of[4] = {sh[0], sh[1], sh[2], sh[4]};
  const int64_t *st[4] = {s->q_s, s->k_s, s->v_s, s->o_s};
  int64_t al = s->q_dtype == TINY_FP32 ? 4 : 8; /* a 16-byte cp.async chunk's elements; out's pairs: 2 */
  bool any = t.rt_m.n || t.rt_n.n || t.rt_b.n || t.rt_h.n;
  for (int o = 0; o < 4; o++)
    for (int i = 0; i < 3; i++) {
      if (!stride_formula(c, of[o], st[o][i], &t.rt_st[o][i]) || (t.rt_st[o][i].n && t.rt_st[o][i].lit % (o == 3 ? 2 : al)))
        return false; /* a stride whose alignment is not the same at every binding */
      any = any || t.rt_st[o][i].n;
    }
  for (int i = 0; s->has_mask && i < 4; i++) {
    if (!stride_formula(c, sh[3], s->mask_s[i], &t.rt_mask[i])) return false;
    any = any || t.rt_mask[i].n;
  }
  if (!any) return false;
  t.nsyms = c->gen.n;
  *s = t;
  return true;
}

/* Launch l's size parameters (hp_sv<i>) bound to the symbols. */
static void bind_sym_args(cuda_launch *l) {
  for (int p = 0; p < l->k->nparams; p++) /* the sizes hp_sv<i> */
    if (l->k->params[p].kind == CUDA_P_LONG) l->args[p] = (cuda_arg){CUDA_ARG_SYM, atoi(l->k->params[p].name + 5), 0};
}

void cuda_launch_sym_args(cuda_rctx *c) { bind_sym_args(&c->launch[c->nlaunch - 1]); }

void cuda_launch_rows(cuda_rctx *c, const cuda_rownorm_spec *s) {
  cuda_launch *l = &c->launch[c->nlaunch - 1];
  if (s->nrows_sym) /* else the rows are constant: the grid too */
    l->grid_div = (s->tune.threads ? s->tune.threads : 256) / 32, l->grid_lit = s->rows_lit, l->ngrid_sym = s->nrows_sym;
  memcpy(l->grid_sym, s->rows_sym, sizeof s->rows_sym[0] * (size_t)s->nrows_sym);
  cuda_launch_sym_args(c);
}

/* ---- split-K ---- */
void cuda_splitk_ws_const(cuda_gemm_spec *g) {
  g->rt_st[4].n = g->rt_st[5].n = 0; /* C's strides c_sm, c_sn */
  g->rt_sb[2][0].n = g->rt_sb[2][1].n = 0; /* and its batch strides */
}

/* A formula of the constant v (no symbol). */
static cuda_rtsz rtsz_const(int64_t v) { return (cuda_rtsz){.lit = v}; }

bool cuda_splitk_zero_at(const cuda_gemm_spec *s, bool flags, const int64_t grid[3], cuda_zero_at *z) {
  if (!s->nsyms || s->rt_b[0].n || s->rt_b[1].n || !(s->rt_m.n || s->rt_n.n)) return false;
  memset(z, 0, sizeof *z);
  z->nsyms = s->nsyms;
  z->planes = s->batch[0] * s->batch[1];
  if (!flags) { /* the workspace [batch][M][N] at hi: the binding's M rows of N words */
    z->plane_stride = s->M * s->N, z->row_stride = s->N, z->hi_rows = s->M, z->hi_cols = s->N, z->rows_div = z->cols_div = 1;
    z->rows_sz = s->rt_m.n ? s->rt_m : rtsz_const(s->M);
    z->cols_sz = s->rt_n.n ? s->rt_n : rtsz_const(s->N);
    return true;
  }
  /* a flag per tile [batch][grid y][grid x] at hi: the binding's tiles (M tiles along y unless rastered along x) */
  bool mx = s->tune.raster_m_x;
  const cuda_rtsz *ry = mx ? &s->rt_n : &s->rt_m, *rx = mx ? &s->rt_m : &s->rt_n;
  int64_t hy = mx ? s->N : s->M, hx = mx ? s->M : s->N, by = mx ? s->tune.bn : s->tune.bm, bx = mx ? s->tune.bm : s->tune.bn;
  z->plane_stride = grid[0] * grid[1], z->row_stride = grid[0], z->hi_rows = grid[1], z->hi_cols = grid[0];
  z->rows_sz = ry->n ? *ry : rtsz_const(hy), z->rows_div = by;
  z->cols_sz = rx->n ? *rx : rtsz_const(hx), z->cols_div = bx;
  return by > 0 && bx > 0 && (hy + by - 1) / by == grid[1] && (hx + bx - 1) / bx == grid[0];
}

void cuda_zero_grid(cuda_rctx *c, int li, const cuda_zero_at *z) {
  cuda_launch *l = &c->launch[li];
  l->grid_div = 256 * z->rows_div * z->cols_div, l->grid_lit = z->planes * z->rows_sz.lit * z->cols_sz.lit, l->ngrid_sym = 0;
  for (int i = 0; i < z->rows_sz.n; i++) l->grid_sym[l->ngrid_sym++] = z->rows_sz.sym[i];
  for (int i = 0; i < z->cols_sz.n; i++) l->grid_sym[l->ngrid_sym++] = z->cols_sz.sym[i];
}

/* Tile count j of launch l: (z at the binding + add) / per. */
static void grid_tile(cuda_launch *l, const cuda_rtsz *z, int64_t v, int64_t add, int64_t per) {
  int j = l->ngrid_tile++;
  l->grid_tile[j] = z->n ? *z : rtsz_const(v), l->grid_tile_add[j] = add, l->grid_tile_per[j] = per;
}

void cuda_wino_grids(cuda_rctx *c, int l0, const cuda_conv_spec *s, int m) {
  for (int i = l0; i < c->nlaunch; i++) {
    cuda_launch *l = &c->launch[i];
    if (l->k->grid_items <= 0 || !s->nsyms) continue;
    l->grid_lit = 1, l->grid_div = l->k->grid_items, l->ngrid_sym = 0, l->ngrid_tile = 0, l->grid_axis = l->k->grid_axis;
    grid_tile(l, &s->rt_n, s->n, 0, 1);                                   /* the images */
    grid_tile(l, &s->rt_h, s->h, s->pad[0] + s->pad[2] - 2 + m - 1, m);  /* tile rows: ceil(oh / m) */
    grid_tile(l, &s->rt_w, s->w, s->pad[1] + s->pad[3] - 2 + m - 1, m);  /* tile columns */
  }
}

void cuda_launches_sym_args(cuda_rctx *c, int l0) {
  for (int i = l0; i < c->nlaunch; i++) bind_sym_args(&c->launch[i]);
}

bool cuda_repack_at_run_time(cuda_rctx *c, int r, const ct_gemm *gm, cuda_copy_at *s) {
  memset(&c->rep_a, 0, sizeof c->rep_a);
  const tiny_shape *sh = c->gen.n && gm->nrep ? slot_shape(c, r, gm->A0.slot) : NULL;
  if (!sh) return false;
  memset(s, 0, sizeof *s);
  tiny_shape a = {0};
  bool any = false;
  for (int j = 0; j < gm->nrep; j++) {
    int d0, d1;
    if (!rep_run(sh, gm->rep_size[j], gm->rep_src[j], &d0, &d1)) return false;
    for (int d = d0; d < d1; d++) {
      if (sh->d[d].n == 1) continue;
      int64_t hi;
      if (s->rank == CUDA_MAX_RANK || !span_formula(c, sh, d, d + 1, &s->size[s->rank], &s->hi[s->rank]) ||
          !span_formula(c, sh, d + 1, sh->rank, &s->src_stride[s->rank], &hi))
        return false;
      any = any || s->size[s->rank].n || s->src_stride[s->rank].n;
      a.d[a.rank++] = sh->d[d];
      s->rank++;
    }
  }
  int nsym = 0; /* the launch's grid formula takes them all */
  for (int d = 0; d < s->rank; d++) nsym += s->size[d].n;
  if (!any || nsym > CUDA_MAX_PARAMS) return false;
  s->in_dtype = gm->A0.dtype;
  s->out_dtype = gm->a_round != TINY_FP32 ? gm->a_round : gm->A0.dtype;
  s->nsyms = c->gen.n;
  c->rep_a = a;
  return true;
}

void cuda_copy_grid(cuda_rctx *c, const cuda_copy_at *s) {
  cuda_launch *l = &c->launch[c->nlaunch - 1];
  l->grid_lit = 1, l->grid_div = CUDA_COPY_THREADS, l->ngrid_sym = 0;
  for (int d = 0; d < s->rank; d++) { /* a constant dim's formula is its size (lit) */
    l->grid_lit *= s->size[d].lit;
    for (int i = 0; i < s->size[d].n; i++) l->grid_sym[l->ngrid_sym++] = s->size[d].sym[i];
  }
  cuda_launch_sym_args(c);
}
