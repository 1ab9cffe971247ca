/* cgen_pool.c — 2-D max / sum (average) pooling, NCHW, every ISA.
 * Needs: cgen_int.h.  Gives: cgen_pool, cgen_pool_spec_init, cgen_pool_out_hw,
 * and the padded plane's row copy the depthwise conv shares (cg_emit_plane_row,
 * cg_emit_dei2), the run-time window's sizes (cg_emit_rt_window, cg_emit_rt_out_hw).
 *
 * The depthwise conv kernel's layout (cgen_dwconv.c) without weights: each
 * task is one (image, channel) plane, copied, converted to fp32 and padded
 * with the pad value (-inf for a max pool) into a per-thread scratch whose
 * columns are split into stride phases, so that every tap of every stride
 * is a contiguous vector load with no bounds check and no gather; the
 * output is computed in blocks of up to 4 vectors of a row times as many
 * rows as make 8 accumulators, the last vector of a row masked.  Each tap
 * is a vmaxps (or vaddps) into the accumulator; the epilogue (an average's
 * scale, relu, roundings) runs in registers before the store.
 *
 * NaN: the reference's max gives NaN when any element of the window is
 * NaN, which vmaxps does not (it returns one operand).  The copy notes
 * whether the plane holds a NaN (one unordered compare per vector copied);
 * such a plane takes a second copy of the blocks whose max keeps NaN (two
 * more instructions a tap), the others the plain one.  A sum needs
 * neither. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "backend/c/cgen_int.h"

void cgen_pool_spec_init(cgen_pool_spec *s, int64_t n, int64_t c, int64_t h, int64_t w, int64_t kh, int64_t kw) {
  memset(s, 0, sizeof *s);
  s->n = n, s->c = c, s->h = h, s->w = w, s->kh = kh, s->kw = kw;
  s->stride[0] = s->stride[1] = s->dil[0] = s->dil[1] = 1;
  s->fill = -INFINITY;
  s->x_dtype = s->y_dtype = TINY_FP32;
  cgen_tuning_default(&s->tune);
}

bool cgen_pool_out_hw(const cgen_pool_spec *s, int64_t *oh, int64_t *ow) {
  if (s->stride[0] < 1 || s->stride[1] < 1 || s->dil[0] < 1 || s->dil[1] < 1) return false;
  int64_t eh = s->h + s->pad[0] + s->pad[2] - s->dil[0] * (s->kh - 1) - 1;
  int64_t ew = s->w + s->pad[1] + s->pad[3] - s->dil[1] * (s->kw - 1) - 1;
  if (eh < 0 || ew < 0) return false;
  *oh = eh / s->stride[0] + 1;
  *ow = ew / s->stride[1] + 1;
  return true;
}

/* The scratch: padded row r, phase f (0 <= f < stride), index i is padded
 * column i*stride + f, at xp + r*rs + f*wq + i (cgen_dwconv.c's layout).
 * Only the rows the windows read are made (a floor-mode pool may leave
 * the last ones unread). */
typedef struct pl_geo {
  int64_t oh, ow, hp; /* output size; padded rows read */
  int64_t wq, rs;     /* a phase row (a multiple of 16, covers every vector load); a padded row */
  int rows, vecs;     /* a block: output rows x vectors per row */
  bool rt;            /* sizes read at run time (h_expr / w_expr / n_expr): the plane's
                         oh, ow, wq, rs are the C variables of those names (the fields
                         here are the upper corner's, which size the scratch) */
} pl_geo;

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

static void geometry(const cgen_pool_spec *s, int w, pl_geo *g) {
  memset(g, 0, sizeof *g);
  cgen_pool_out_hw(s, &g->oh, &g->ow);
  int64_t st = s->stride[1];
  g->hp = (g->oh - 1) * s->stride[0] + (s->kh - 1) * s->dil[0] + 1;
  g->wq = cg_rup(cg_rup(g->ow, w) + (s->kw - 1) * s->dil[1] / st, 16);
  g->rs = st * g->wq;
  /* 8 accumulators cover vmaxps' latency at two a cycle; rows split evenly */
  int64_t nv = cdiv(g->ow, w), nacc = 8;
  g->vecs = (int)(nv < 4 ? nv : 4);
  int64_t rmax = nacc / g->vecs > 1 ? nacc / g->vecs : 1;
  g->rows = (int)cdiv(g->oh, cdiv(g->oh, rmax));
}

/* A float constant as C text (-inf included). */
static void fconst(char *buf, size_t cap, double v) {
  if (isinf(v)) snprintf(buf, cap, "%sINFINITY", v < 0 ? "-" : "");
  else snprintf(buf, cap, "%#.9gf", v);
}

void cg_emit_tap_row(cg_out *o, bool rt, int64_t sh, int64_t rh, int64_t cw, int64_t sw, int64_t rs, int64_t wq) {
  if (rt)
    cg_emit(o, "        { const float *r = xp + (oh * %ldL + %ldL) * rs + ow + %ldL * wq + %ldL;\n", (long)sh, (long)rh,
            (long)(cw % sw), (long)(cw / sw));
  else
    cg_emit(o, "        { const float *r = xp + (oh * %ldL + %ldL) * %ldL + ow + %ldL;\n", (long)sh, (long)rh, (long)rs,
            (long)((cw % sw) * wq + cw / sw));
}

void cg_tap_off(char *buf, size_t cap, bool rt, int64_t rows, int64_t cols, int64_t rs) {
  if (rt) snprintf(buf, cap, "%ld * rs + %ldL", (long)rows, (long)cols);
  else snprintf(buf, cap, "%ldL", (long)(rows * rs + cols));
}

/* How a tap combines into accumulator a: 0 sum, 1 max, 2 max keeping NaN. */
enum { OP_SUM, OP_MAX, OP_MAXN };

/* A block of rows x u vectors of output from (oh, ow): every tap loaded
 * from the padded plane xp and combined (op), then the epilogue and the
 * store, the last vector's `last` lanes (-1: the run-time count lastc). */
static void emit_block(cg_out *o, const cgen_pool_spec *s, const pl_geo *g, int rows, int u, int last, int op) {
  int w = o->isa->w;
  int64_t SH = s->stride[0], SW = s->stride[1];
  char rs[32], ow[32], nl[16]; /* the plane's row step and width, the last vector's lanes */
  snprintf(rs, sizeof rs, g->rt ? "rs" : "%ldL", (long)g->rs);
  snprintf(ow, sizeof ow, g->rt ? "ow_" : "%ldL", (long)g->ow);
  snprintf(nl, sizeof nl, last < 0 ? "lastc" : "%d", last);
  cg_emit(o, "      {\n");
  for (int i = 0; i < rows; i++)
    for (int j = 0; j < u; j++) cg_emit(o, "        $P_v a%d_%d;\n", i, j);
  for (int kh = 0; kh < s->kh; kh++)
    for (int kw = 0; kw < s->kw; kw++) {
      int64_t cw = kw * s->dil[1];
      bool first = kh == 0 && kw == 0;
      cg_emit_tap_row(o, g->rt, SH, kh * s->dil[0], cw, SW, g->rs, g->wq);
      for (int i = 0; i < rows; i++)
        for (int j = 0; j < u; j++) {
          char off[64];
          cg_tap_off(off, sizeof off, g->rt, i * SH, j * w, g->rs);
          if (first) cg_emit(o, "          a%d_%d = $P_ld(r + %s);\n", i, j, off);
          else if (op == OP_SUM) cg_emit(o, "          a%d_%d = a%d_%d + $P_ld(r + %s);\n", i, j, i, j, off);
          else if (op == OP_MAX) cg_emit(o, "          a%d_%d = $P_max($P_ld(r + %s), a%d_%d);\n", i, j, off, i, j);
          else cg_emit(o, "          a%d_%d = $P_maxn(a%d_%d, $P_ld(r + %s));\n", i, j, i, j, off);
        }
      cg_emit(o, "        }\n");
    }
  const char *ys = cg_vsuffix(s->y_dtype);
  for (int i = 0; i < rows; i++)
    for (int j = 0; j < u; j++) {
      char x[32];
      snprintf(x, sizeof x, "a%d_%d", i, j);
      bool full = j < u - 1 || last == w;
      cg_emit(o, "        { long at = (oh + %d) * %s + ow + %d;\n", i, ow, j * w);
      for (int e = 0; e < s->n_epi; e++) cg_emit_epi_common(o, &s->epi[e], e, "c", x);
      if (full) cg_emit(o, "          $P_st%s(y + at, %s); }\n", ys, x);
      else cg_emit(o, "          $P_stn%s(y + at, %s, %s); }\n", ys, x, nl);
    }
  cg_emit(o, "      }\n");
}

/* `rows` output rows from oh: blocks of g->vecs full vectors, then one block
 * for the rest of the row (its last vector masked). */
static void emit_row_blocks(cg_out *o, const cgen_pool_spec *s, const pl_geo *g, int rows, int op) {
  int w = o->isa->w;
  int64_t step = (int64_t)g->vecs * w, nfull = g->ow / step, rem = g->ow - nfull * step;
  if (nfull > 1) cg_emit(o, "    for (long ow = 0; ow < %ldL; ow += %ldL)\n", (long)(nfull * step), (long)step);
  else if (nfull == 1) cg_emit(o, "    { const long ow = 0;\n");
  if (nfull) emit_block(o, s, g, rows, g->vecs, w, op);
  if (nfull == 1) cg_emit(o, "    }\n");
  if (rem) {
    int u = (int)cdiv(rem, w);
    cg_emit(o, "    { const long ow = %ldL;\n", (long)(nfull * step));
    emit_block(o, s, g, rows, u, (int)(rem - (int64_t)(u - 1) * w), op);
    cg_emit(o, "    }\n");
  }
}

/* The whole output plane: blocks of g->rows rows, then the rows left. */
static void emit_plane(cg_out *o, const cgen_pool_spec *s, const pl_geo *g, int op) {
  int64_t nblk = g->oh / g->rows, rrem = g->oh - nblk * g->rows;
  if (nblk > 1) cg_emit(o, "  for (long oh = 0; oh < %ldL; oh += %d) {\n", (long)(nblk * g->rows), g->rows);
  else cg_emit(o, "  { const long oh = 0;\n");
  emit_row_blocks(o, s, g, g->rows, op);
  cg_emit(o, "  }\n");
  if (rrem) {
    cg_emit(o, "  { const long oh = %ldL;\n", (long)(nblk * g->rows));
    emit_row_blocks(o, s, g, (int)rrem, op);
    cg_emit(o, "  }\n");
  }
}

/* Scalar copies of padded columns i*st + f for i in [a, b) of phase f from
 * input row xr, noting NaN in nm when chk. */
static void copy_scalar(cg_out *o, const cg_plane_row *r, int64_t f, int64_t a, int64_t b, bool chk) {
  if (b <= a) return;
  int64_t st = r->stride, k = r->pad - f; /* input column i*st - k */
  char idx[64], ldx[300];
  if (k) snprintf(idx, sizeof idx, "i * %ldL %c %ldL", (long)st, k > 0 ? '-' : '+', (long)(k > 0 ? k : -k));
  else snprintf(idx, sizeof idx, "i * %ldL", (long)st);
  cg_scalar_ld(o, ldx, sizeof ldx, r->x_dtype, "xr", idx);
  cg_emit(o, "    for (long i = %ldL; i < %ldL; i++) { float v_ = %s; d[%ldL + i] = v_;%s }\n", (long)a, (long)b, ldx,
          (long)(f * r->wq), chk ? " nm |= v_ != v_;" : "");
}

static void fill_cols(cg_out *o, const cg_plane_row *r, int64_t f, int64_t a, int64_t b, const char *fv) {
  if (b > a) cg_emit(o, "    for (long i = %ldL; i < %ldL; i++) d[%ldL + i] = %s;\n", (long)a, (long)b, (long)(f * r->wq), fv);
}

/* Stride 2 from index i0 (>= the first whole pair, cdiv(pad, 2)) to the
 * end of both phases: masked vector pairs (lanes past the row load 0 and
 * are not stored). */
static void emit_pair_tail(cg_out *o, const cg_plane_row *r, int64_t i0, bool chk) {
  int w = o->isa->w;
  int64_t pl = r->pad, W = r->w, hi[2];
  const char *xs = cg_vsuffix(r->x_dtype);
  for (int f = 0; f < 2; f++) {
    hi[f] = cdiv(pl + W - f, 2);
    if (hi[f] > r->wq) hi[f] = r->wq;
  }
  for (int64_t i = i0; i < hi[0] || i < hi[1]; i += w) {
    int64_t c0 = 2 * i - pl, n = W - c0; /* input columns from c0; n left in the row */
    int na = (int)(n < w ? n : w), nb = (int)(n - w < 0 ? 0 : n - w < w ? n - w : w);
    int ne = (int)(hi[0] - i < w ? hi[0] - i : w), no = (int)(hi[1] - i < w ? hi[1] - i : w);
    cg_emit(o, "    { $P_v a = $P_ldn%s(xr + %ldL, %d), b = $P_ldn%s(xr + %ldL, %d), ev, od;\n", xs, (long)c0, na, xs,
            (long)(c0 + w), nb);
    cg_emit(o, "      $P_dei2(a, b, &ev, &od);\n");
    if (ne > 0) cg_emit(o, "      $P_stn(d + %ldL, ev, %d);\n", (long)i, ne);
    if (no > 0) cg_emit(o, "      $P_stn(d + %ldL, od, %d);\n", (long)(r->wq + i), no);
    cg_emit(o, chk ? "      nm |= $P_unord(a, b); }\n" : "    }\n");
  }
}

void cg_emit_plane_row(cg_out *o, const cg_plane_row *r, const char *fv, bool chk, int parts) {
  int w = o->isa->w;
  bool fill = parts & CG_ROW_FILL;
  int64_t st = r->stride, pl = r->pad, W = r->w;
  const char *xs = cg_vsuffix(r->x_dtype);
  for (int64_t f = 0; f < st; f++) {
    int64_t lo = pl - f > 0 ? cdiv(pl - f, st) : 0, hi = cdiv(pl + W - f, st);
    if (hi > r->wq) hi = r->wq;
    if (lo > r->wq) lo = r->wq;
    if (hi < lo) hi = lo;
    if (fill) fill_cols(o, r, f, 0, lo, fv);
    if (!(parts & CG_ROW_DATA)) {
      /* the fill alone */
    } else if (w > 1 && st == 1 && hi > lo) { /* input column i - pl */
      int64_t nfull = (hi - lo) / w * w, rem = hi - lo - nfull;
      if (nfull) {
        cg_emit(o, "    for (long i = %ldL; i < %ldL; i += %d) {\n", (long)lo, (long)(lo + nfull), w);
        cg_emit(o, "      $P_v v = $P_ld%s(xr + i - %ldL);\n      $P_st(d + i, v);\n", xs, (long)pl);
        cg_emit(o, chk ? "      nm |= $P_unord(v, v);\n    }\n" : "    }\n");
      }
      if (rem) {
        int64_t i0 = lo + nfull;
        cg_emit(o, "    { $P_v v = $P_ldn%s(xr + %ldL, %d);\n      $P_stn(d + %ldL, v, %d);%s }\n", xs, (long)(i0 - pl), (int)rem,
                (long)i0, (int)rem, chk ? " nm |= $P_unord(v, v);" : "");
      }
    } else if (w > 1 && st == 2) {
      /* [v0, v1): i + w <= (W + pl) / 2 keeps both loads inside the row */
      int64_t end = (W + pl) / 2 < r->wq ? (W + pl) / 2 : r->wq, v0 = cdiv(pl, 2);
      int64_t v1 = end > v0 ? v0 + (end - v0) / w * w : v0;
      if (f == 0) { /* both phases at once: whole vector pairs, then masked ones to the row's end */
        if (v1 > v0) {
          cg_emit(o, "    for (long i = %ldL; i < %ldL; i += %d) {\n", (long)v0, (long)v1, w);
          cg_emit(o, "      const %s *p = xr + 2 * i - %ldL;\n", cg_ctype(r->x_dtype), (long)pl);
          cg_emit(o, "      $P_v a = $P_ld%s(p), b = $P_ld%s(p + %d), ev, od;\n      $P_dei2(a, b, &ev, &od);\n", xs, xs, w);
          cg_emit(o, "      $P_st(d + i, ev);\n      $P_st(d + %ldL + i, od);\n", (long)r->wq);
          cg_emit(o, chk ? "      nm |= $P_unord(a, b);\n    }\n" : "    }\n");
        }
        emit_pair_tail(o, r, v1, chk);
      }
      copy_scalar(o, r, f, lo, v0 < hi ? v0 : hi, chk);
    } else {
      copy_scalar(o, r, f, lo, hi, chk);
    }
    if (fill) fill_cols(o, r, f, hi, r->wq, fv);
  }
}

void cg_emit_dei2(cg_out *o) {
  if (o->isa->id == CGEN_ISA_AVX512) { /* (a, b) -> even lanes, odd lanes */
    cg_emit(o, "$I void $P_dei2($P_v a, $P_v b, $P_v *ev, $P_v *od) {\n");
    cg_emit(o, "  *ev = _mm512_permutex2var_ps(a, _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30), b);\n");
    cg_emit(o, "  *od = _mm512_permutex2var_ps(a, _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31), b);\n}\n");
  } else if (o->isa->id == CGEN_ISA_AVX2) {
    cg_emit(o, "$I void $P_dei2($P_v a, $P_v b, $P_v *ev, $P_v *od) {\n");
    cg_emit(o, "  *ev = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0x88)), 0xd8));\n");
    cg_emit(o, "  *od = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0xdd)), 0xd8));\n}\n");
  }
}

/* The vector helpers only this kernel uses: the stride-2 lane split, an
 * unordered test (the max that keeps NaN is the layer's $P_maxn). */
static void emit_helpers(cg_out *o, const cgen_pool_spec *s) {
  if (s->stride[1] == 2) cg_emit_dei2(o);
  bool rt = s->n_expr || s->h_expr || s->w_expr; /* the run-time copy's lanes past n become the pad value f */
  switch (o->isa->id) {
  case CGEN_ISA_AVX512:
    cg_emit(o, "$I unsigned $P_unord($P_v a, $P_v b) { return (unsigned)_mm512_cmp_ps_mask(a, b, _CMP_UNORD_Q); }\n");
    if (rt) cg_emit(o, "$I $P_v $P_keepn($P_v x, int n, float f) { return _mm512_mask_blend_ps($P_mk(n), _mm512_set1_ps(f), x); }\n");
    break;
  case CGEN_ISA_AVX2:
    cg_emit(o, "$I unsigned $P_unord($P_v a, $P_v b) { return (unsigned)_mm256_movemask_ps(_mm256_cmp_ps(a, b, _CMP_UNORD_Q)); }\n");
    if (rt)
      cg_emit(o, "$I $P_v $P_keepn($P_v x, int n, float f) { return _mm256_blendv_ps(_mm256_set1_ps(f), x, "
                 "_mm256_castsi256_ps($P_mk(n))); }\n");
    break;
  default: break;
  }
}

/* ---- sizes read at run time (n_expr, h_expr, w_expr) ---------------------- */
/* `rows` output rows from oh: blocks of `vecs` vectors while they fit this
 * run's width ow_, then the rest of the row (1 .. vecs vectors, the last
 * one's lastc lanes) behind a switch; blk emits each block. */
static void emit_row_blocks_rt(cg_out *o, int rows, int vecs, cg_block_fn blk, const void *k) {
  int w = o->isa->w;
  long step = (long)vecs * w;
  cg_emit(o, "    long ow = 0;\n    for (; ow + %ld <= ow_; ow += %ld)\n", step, step);
  blk(o, k, rows, vecs, w);
  cg_emit(o, "    if (ow < ow_) {\n      long rem = ow_ - ow;\n      int lastc = (int)(rem - (rem - 1) / %d * %d);\n", w, w);
  cg_emit(o, "      (void)lastc;\n      switch ((rem + %d) / %d) {\n", w - 1, w);
  for (int u = 1; u <= vecs; u++) {
    cg_emit(o, "      case %d:\n", u);
    blk(o, k, rows, u, -1);
    cg_emit(o, "      break;\n");
  }
  cg_emit(o, "      default: break;\n      }\n    }\n");
}

void cg_emit_plane_rt(cg_out *o, int rows, int vecs, cg_block_fn blk, const void *k) {
  cg_emit(o, "  long oh = 0;\n  for (; oh + %d <= oh_; oh += %d) {\n", rows, rows);
  emit_row_blocks_rt(o, rows, vecs, blk, k);
  cg_emit(o, "  }\n  switch (oh_ - oh) {\n");
  for (int r = 1; r < rows; r++) {
    cg_emit(o, "  case %d: {\n", r);
    emit_row_blocks_rt(o, r, vecs, blk, k);
    cg_emit(o, "  } break;\n");
  }
  cg_emit(o, "  default: break;\n  }\n");
}

/* The output plane of a run whose rows are u vectors, the last one's
 * lastc lanes: the whole row a block, blocks of `rows` rows, then the rows
 * left behind a switch. */
static void emit_plane_exact(cg_out *o, int rows, int u, cg_block_fn blk, const void *k) {
  cg_emit(o, "  const int lastc = (int)(ow_ - %d);\n  const long ow = 0;\n  long oh = 0;\n", (u - 1) * o->isa->w);
  cg_emit(o, "  for (; oh + %d <= oh_; oh += %d)\n", rows, rows);
  blk(o, k, rows, u, -1);
  if (rows == 1) return;
  cg_emit(o, "  switch (oh_ - oh) {\n");
  for (int r = 1; r < rows; r++) {
    cg_emit(o, "  case %d:\n", r);
    blk(o, k, r, u, -1);
    cg_emit(o, "  break;\n");
  }
  cg_emit(o, "  default: break;\n  }\n");
}

/* The output plane of this run in blocks shaped for its width: a run whose
 * rows are u < vecs vectors takes blocks of u vectors by 8 / u rows (8
 * accumulators, as a specialised plane of that width has: 28 x 28 is 4
 * rows of 2 vectors, where the upper corner's 2 rows of 4 would leave it 2
 * rows of 2), a wider one the upper corner's blocks of rows x vecs and the
 * rest of each row behind a switch. */
static void emit_plane_by_width(cg_out *o, int rows, int vecs, cg_block_fn blk, const void *k) {
  int w = o->isa->w;
  if (vecs == 1) {
    cg_emit_plane_rt(o, rows, 1, blk, k);
    return;
  }
  cg_emit(o, "  switch ((ow_ + %d) / %d) {\n", w - 1, w);
  for (int u = 1; u < vecs; u++) {
    cg_emit(o, "  case %d: {\n", u);
    emit_plane_exact(o, 8 / u, u, blk, k);
    cg_emit(o, "  } break;\n");
  }
  cg_emit(o, "  default: {\n");
  cg_emit_plane_rt(o, rows, vecs, blk, k);
  cg_emit(o, "  } break;\n  }\n");
}

/* The pool's block for cg_emit_plane_rt: k is a pool_blk. */
typedef struct pool_blk {
  const cgen_pool_spec *s;
  const pl_geo *g;
  int op;
} pool_blk;

static void pool_block(cg_out *o, const void *k, int rows, int u, int last) {
  const pool_blk *b = k;
  emit_block(o, b->s, b->g, rows, u, last, b->op);
}

/* Stride 2 of the plane copy of this run, what every row shares (emitted
 * before emit_copy_rt's row loop): phase f's data ends at hf, whole vector
 * pairs from v0 (the first whole pair: the pad's parity) while both loads
 * stay in the row (v1), then at most one masked pair at im (from input
 * column c0; lanes past the data the pad value), the rest of both phases
 * the pad value from ie.  The masks' counts are the same for every row, so
 * the C compiler makes the masks once. */
void cg_emit_pair_consts_rt(cg_out *o, long pl) {
  int w = o->isa->w;
  cg_emit(o, "  long h0 = (%ldL + w + 1) / 2, h1 = (%ldL + w) / 2, v0 = %ldL, v1 = (%ldL + w) / 2;\n", pl, pl, (pl + 1) / 2, pl);
  cg_emit(o, "  if (h0 > wq) h0 = wq;\n  if (h1 > wq) h1 = wq;\n  if (v0 > wq) v0 = wq;\n  if (v1 > wq) v1 = wq;\n");
  cg_emit(o, "  long im = v0 + (v1 > v0 ? (v1 - v0) / %d * %d : 0), c0 = 2 * im - %ldL;\n", w, w, pl);
  cg_emit(o, "  int tail = im < h0 || im < h1, full = im + %d <= wq;\n", w);
  cg_emit(o, "  int na = (int)(w - c0 < %d ? w - c0 : %d), nb = (int)(w - c0 - %d), ne = (int)(h0 - im), no = (int)(h1 - im);\n", w, w, w);
  cg_emit(o, "  int nw = (int)(wq - im);\n  long ie = !tail ? im : full ? im + %d : wq;\n", w);
}

/* Stride 2 of the plane copy of this run, one row: input row xr into d and
 * d + wq (the phases), with cg_emit_pair_consts_rt's bounds; a max notes NaN
 * (chk). */
static void emit_pair_row_rt(cg_out *o, const cgen_pool_spec *s, const char *fv, bool chk) {
  int w = o->isa->w;
  long pl = (long)s->pad[1];
  const char *xs = cg_vsuffix(s->x_dtype);
  cg_emit(o, "    for (long i = 0; i < v0; i++) d[i] = d[wq + i] = %s;\n", fv);
  if (pl % 2) { /* phase 1's index v0 - 1 is column 0 */
    char ld[300];
    cg_scalar_ld(o, ld, sizeof ld, s->x_dtype, "xr", "0");
    cg_emit(o, "    if (%ldL < h1) { float v_ = %s; d[wq + %ldL] = v_;%s }\n", (pl - 1) / 2, ld, (pl - 1) / 2,
            chk ? " nm |= v_ != v_;" : "");
  }
  cg_emit(o, "    for (long i = v0; i < im; i += %d) {\n", w);
  cg_emit(o, "      const %s *p = xr + 2 * i - %ldL;\n", cg_ctype(s->x_dtype), pl);
  cg_emit(o, "      $P_v a = $P_ld%s(p), b = $P_ld%s(p + %d), ev, od;\n      $P_dei2(a, b, &ev, &od);\n", xs, xs, w);
  cg_emit(o, "      $P_st(d + i, ev);\n      $P_st(d + wq + i, od);%s\n    }\n", chk ? " nm |= $P_unord(a, b);" : "");
  cg_emit(o, "    if (tail) {\n      $P_v a = $P_ldn%s(xr + c0, na), b = $P_ldn%s(xr + c0 + %d, nb), ev, od;\n", xs, xs, w);
  cg_emit(o, "      $P_dei2(a, b, &ev, &od);%s\n", chk ? " nm |= $P_unord(a, b);" : "");
  cg_emit(o, "      ev = $P_keepn(ev, ne, %s); od = $P_keepn(od, no, %s);\n", fv, fv);
  cg_emit(o, "      if (full) { $P_st(d + im, ev); $P_st(d + wq + im, od); }\n");
  cg_emit(o, "      else { $P_stn(d + im, ev, nw); $P_stn(d + wq + im, od, nw); }\n    }\n");
  cg_emit(o, "    for (long i = ie; i < wq; i++) d[i] = d[wq + i] = %s;\n", fv);
}

/* The output plane of this run in blocks shaped for its width
 * (emit_plane_by_width). */
static void emit_plane_rt_any(cg_out *o, const cgen_pool_spec *s, const pl_geo *g, int op) {
  pool_blk b = {s, g, op};
  emit_plane_by_width(o, g->rows, g->vecs, pool_block, &b);
}

/* Stride 1 of the plane copy of this run, what every row shares (before
 * emit_copy_rt's row loop): the data at [lo, hi), whole vectors to im,
 * then at most one masked vector (nt lanes of data, the rest the pad
 * value), the pad value from ie. */
void cg_emit_unit_consts_rt(cg_out *o, long pl) {
  int w = o->isa->w;
  cg_emit(o, "  long lo = %ldL, hi = %ldL + w;\n  if (hi > wq) hi = wq;\n  if (lo > hi) lo = hi;\n", pl, pl);
  cg_emit(o, "  long im = lo + (hi - lo) / %d * %d;\n  int tail = im < hi, full = im + %d <= wq, nt = (int)(hi - im), nw = (int)(wq - im);\n",
          w, w, w);
  cg_emit(o, "  long ie = !tail ? im : full ? im + %d : wq;\n", w);
}

/* Stride 1 of the plane copy of this run, one row: input row xr into d with
 * cg_emit_unit_consts_rt's bounds; a max notes NaN (chk). */
static void emit_unit_row_rt(cg_out *o, const cgen_pool_spec *s, const char *fv, bool chk) {
  int w = o->isa->w;
  long pl = (long)s->pad[1];
  const char *xs = cg_vsuffix(s->x_dtype);
  cg_emit(o, "    for (long i = 0; i < lo; i++) d[i] = %s;\n", fv);
  cg_emit(o, "    for (long i = lo; i < im; i += %d) {\n", w);
  cg_emit(o, "      $P_v v = $P_ld%s(xr + i - %ldL);\n      $P_st(d + i, v);%s\n    }\n", xs, pl, chk ? " nm |= $P_unord(v, v);" : "");
  cg_emit(o, "    if (tail) {\n      $P_v v = $P_ldn%s(xr + im - %ldL, nt);%s\n", xs, pl, chk ? " nm |= $P_unord(v, v);" : "");
  cg_emit(o, "      v = $P_keepn(v, nt, %s);\n      if (full) $P_st(d + im, v);\n      else $P_stn(d + im, v, nw);\n    }\n", fv);
  cg_emit(o, "    for (long i = ie; i < wq; i++) d[i] = %s;\n", fv);
}

/* The padded plane of this run (hp rows of st phases of wq): the pad value
 * around the input, phase f's index i the padded column i * st + f; a max
 * notes NaN (chk). */
static void emit_copy_rt(cg_out *o, const cgen_pool_spec *s, const char *fv, bool chk) {
  long st = (long)s->stride[1], pl = (long)s->pad[1];
  int w = o->isa->w;
  char idx[96], ld[300];
  snprintf(idx, sizeof idx, "i * %ldL + f - %ldL", st, pl);
  cg_scalar_ld(o, ld, sizeof ld, s->x_dtype, "xr", idx);
  bool vec = (st == 1 || st == 2) && w > 1; /* the bounds every row shares made once */
  if (st == 2 && vec) cg_emit_pair_consts_rt(o, pl);
  else if (vec) cg_emit_unit_consts_rt(o, pl);
  cg_emit(o, "  for (long r = 0; r < hp; r++) {\n    float *d = xp + r * rs;\n    long ih = r - %ldL;\n", (long)s->pad[0]);
  cg_emit(o, "    if (ih < 0 || ih >= h) {\n      for (long i = 0; i < rs; i++) d[i] = %s;\n      continue;\n    }\n", fv);
  cg_emit(o, "    const %s *xr = x + ih * w;\n", cg_ctype(s->x_dtype));
  if (vec) {
    if (st == 2) emit_pair_row_rt(o, s, fv, chk);
    else emit_unit_row_rt(o, s, fv, chk);
    cg_emit(o, "  }\n");
    return;
  }
  cg_emit(o, "    for (long f = 0; f < %ldL; f++, d += wq) {\n", st);
  cg_emit(o, "      long lo = %ldL - f > 0 ? (%ldL - f + %ldL) / %ldL : 0, hi = (%ldL + w - f + %ldL) / %ldL;\n", pl, pl, st - 1, st,
          pl, st - 1, st);
  cg_emit(o, "      if (hi > wq) hi = wq;\n      if (lo > hi) lo = hi;\n");
  cg_emit(o, "      for (long i = 0; i < lo; i++) d[i] = %s;\n", fv);
  cg_emit(o, "      for (long i = lo; i < hi; i++) { float v_ = %s; d[i] = v_;%s }\n", ld, chk ? " nm |= v_ != v_;" : "");
  cg_emit(o, "      for (long i = hi; i < wq; i++) d[i] = %s;\n    }\n  }\n", fv);
}

void cg_emit_rt_out_hw(cg_out *o, const cg_rt_window *k) {
  char nx[24], hx[24], wx[24];
  snprintf(nx, sizeof nx, "%ldL", (long)k->n), snprintf(hx, sizeof hx, "%ldL", (long)k->h), snprintf(wx, sizeof wx, "%ldL", (long)k->w);
  cg_emit(o, "  long n = %s;\n  cx.h = %s; cx.w = %s;\n", k->n_expr ? k->n_expr : nx, k->h_expr ? k->h_expr : hx,
          k->w_expr ? k->w_expr : wx);
  cg_emit(o, "  if (n < 1 || n > %ldL || cx.h < 1 || cx.h > %ldL || cx.w < 1 || cx.w > %ldL) return -1;\n", (long)k->n, (long)k->h,
          (long)k->w);
  cg_emit(o, "  long eh = cx.h + %ldL, ew = cx.w + %ldL;\n  if (eh < 0 || ew < 0) return -1;\n",
          (long)(k->pad[0] + k->pad[2] - k->dil[0] * (k->kh - 1) - 1), (long)(k->pad[1] + k->pad[3] - k->dil[1] * (k->kw - 1) - 1));
  cg_emit(o, "  cx.oh = eh / %ldL + 1; cx.ow = ew / %ldL + 1;\n", (long)k->stride[0], (long)k->stride[1]);
}

void cg_emit_rt_window(cg_out *o, const cg_rt_window *k, const char *hp) {
  cg_emit_rt_out_hw(o, k);
  cg_emit(o, "  cx.hp = %s;\n", hp);
  cg_emit(o, "  cx.wq = ((cx.ow + %d) / %d * %d + %ldL + 15) / 16 * 16;\n  cx.rs = %ldL * cx.wq;\n", o->isa->w - 1, o->isa->w,
          o->isa->w, (long)((k->kw - 1) * k->dil[1] / k->stride[1]), (long)k->stride[1]);
}

/* The output plane by fn with s's op: a sum; a max with $P_max where the
 * plane holds no NaN (nm), else with $P_maxn: nm known before (after false:
 * the copy noted it) or noted by the first pass (after true). */
typedef void (*plane_fn)(cg_out *o, const cgen_pool_spec *s, const pl_geo *g, int op);
static void emit_ops(cg_out *o, const cgen_pool_spec *s, const pl_geo *g, plane_fn fn, bool after) {
  if (s->sum) {
    fn(o, s, g, OP_SUM);
    return;
  }
  cg_emit(o, after ? "  {\n" : "  if (!nm) {\n");
  fn(o, s, g, OP_MAX);
  cg_emit(o, after ? "  }\n  if (nm) {\n" : "  } else {\n");
  fn(o, s, g, OP_MAXN);
  cg_emit(o, "  }\n");
}

/* ---- sizes read at run time, no padding: the input read in place -------- */
/* Whether the run-time variant reads the input itself rather than a padded
 * copy: fp32, no padding, no dilation, stride 1, or stride 2 with a window
 * two columns wide (each tap a phase of one vector pair), a vector ISA.  The
 * copy was most of a small pool's time (2x2/2 max at 56x56: 1.8x the
 * specialised kernel's). */
static bool direct_rt(const cg_out *o, const cgen_pool_spec *s) {
  for (int i = 0; i < 4; i++)
    if (s->pad[i]) return false;
  if (s->x_dtype != TINY_FP32 || s->dil[0] != 1 || s->dil[1] != 1 || o->isa->w < 8) return false;
  return s->stride[1] == 1 || (s->stride[1] == 2 && s->kw == 2);
}

/* Combine v into accumulator a (first: a = v), noting NaN for a max (op
 * OP_MAX: nm, so that the plane is done again with OP_MAXN). */
static void combine(cg_out *o, const char *a, const char *v, bool first, int op) {
  if (first) cg_emit(o, "          %s = %s;\n", a, v);
  else if (op == OP_SUM) cg_emit(o, "          %s = %s + %s;\n", a, a, v);
  else if (op == OP_MAX) cg_emit(o, "          %s = $P_max(%s, %s);\n", a, v, a);
  else cg_emit(o, "          %s = $P_maxn(%s, %s);\n", a, a, v);
  if (op == OP_MAX) cg_emit(o, "          nm |= $P_unord(%s, %s);\n", v, v);
}

/* A block of rows x u vectors of output from (oh, ow) read from the input x
 * (run-time row w): each tap row's vectors (stride 1: one load a tap;
 * stride 2: a vector pair split into even and odd columns, taps 0 and 1),
 * the last vector's loads masked to its `last` lanes (-1: lastc), then the
 * epilogue and the stores as emit_block's. */
static void emit_block_direct(cg_out *o, const void *k, int rows, int u, int last) {
  const pool_blk *b = k;
  const cgen_pool_spec *s = b->s;
  int w = o->isa->w, op = b->op;
  long SH = (long)s->stride[0], SW = (long)s->stride[1];
  char nl[16], a[32], v[80];
  snprintf(nl, sizeof nl, last < 0 ? "lastc" : "%d", last);
  cg_emit(o, "      {\n");
  for (int i = 0; i < rows; i++)
    for (int j = 0; j < u; j++) cg_emit(o, "        $P_v a%d_%d;\n", i, j);
  for (int kh = 0; kh < s->kh; kh++) {
    cg_emit(o, "        { const float *r = x + (oh * %ldL + %dL) * w + ow * %ldL;\n", SH, kh, SW);
    /* a pointer per input row: the taps' offsets from it constants (row
     * offsets i * w kept apart spilled registers: 2 x 4 vectors, 3x3) */
    for (int i = 0; i < rows; i++) cg_emit(o, "          const float *r%d = r + %ld * w;\n", i, (long)i * SH);
    for (int i = 0; i < rows; i++)
      for (int j = 0; j < u; j++) {
        bool part = j == u - 1 && last != w;
        snprintf(a, sizeof a, "a%d_%d", i, j);
        if (SW == 1) {
          for (int kw = 0; kw < s->kw; kw++) {
            if (part) snprintf(v, sizeof v, "$P_ldn(r%d + %d, %s)", i, j * w + kw, nl);
            else snprintf(v, sizeof v, "$P_ld(r%d + %d)", i, j * w + kw);
            cg_emit(o, "          { $P_v t_ = %s;\n", v);
            combine(o, a, "t_", kh == 0 && kw == 0, op);
            cg_emit(o, "          }\n");
          }
          continue;
        }
        cg_emit(o, "          { const float *p_ = r%d + %d;\n", i, 2 * j * w);
        if (part)
          cg_emit(o, "            $P_v l_ = $P_ldn(p_, 2 * %s), h_ = $P_ldn(p_ + %d, 2 * %s - %d), ev, od;\n", nl, w, nl, w);
        else cg_emit(o, "            $P_v l_ = $P_ld(p_), h_ = $P_ld(p_ + %d), ev, od;\n", w);
        cg_emit(o, "            $P_dei2(l_, h_, &ev, &od);\n");
        combine(o, a, "ev", kh == 0, op);
        combine(o, a, "od", false, op);
        cg_emit(o, "          }\n");
      }
    cg_emit(o, "        }\n");
  }
  const char *ys = cg_vsuffix(s->y_dtype);
  for (int i = 0; i < rows; i++)
    for (int j = 0; j < u; j++) {
      snprintf(a, sizeof a, "a%d_%d", i, j);
      cg_emit(o, "        { long at = (oh + %d) * ow_ + ow + %d;\n", i, j * w);
      for (int e = 0; e < s->n_epi; e++) cg_emit_epi_common(o, &s->epi[e], e, "c", a);
      if (j < u - 1 || last == w) cg_emit(o, "          $P_st%s(y + at, %s); }\n", ys, a);
      else cg_emit(o, "          $P_stn%s(y + at, %s, %s); }\n", ys, a, nl);
    }
  cg_emit(o, "      }\n");
}

/* The output plane of this run read in place, in emit_plane_by_width's
 * blocks. */
static void emit_plane_direct(cg_out *o, const cgen_pool_spec *s, const pl_geo *g, int op) {
  pool_blk b = {s, g, op};
  emit_plane_by_width(o, g->rows, g->vecs, emit_block_direct, &b);
}

/* $P_plane of the run-time variant reading the input in place (direct_rt):
 * a max first with $P_max, noting NaN, and again with $P_maxn where the
 * plane holds one. */
static void emit_plane_fn_direct(cg_out *o, const cgen_pool_spec *s, const pl_geo *g) {
  const char *yt = cg_ctype(s->y_dtype);
  cg_emit(o, "static $T void $P_plane(const $F_ctx *cx, float *xp, long pi) {\n  (void)xp;\n");
  cg_emit(o, "  long h = cx->h, w = cx->w, oh_ = cx->oh, ow_ = cx->ow;\n");
  cg_emit(o, "  const float *x = (const float *)cx->x + pi * h * w;\n  %s *y = (%s *)cx->y + pi * oh_ * ow_;\n", yt, yt);
  cg_emit(o, "  unsigned nm = 0;\n  (void)nm;\n");
  emit_ops(o, s, g, emit_plane_direct, true);
  cg_emit(o, "}\n");
}

/* $P_plane of the run-time variant reading a padded copy of the input. */
static void emit_plane_fn_copy(cg_out *o, const cgen_pool_spec *s, const pl_geo *g) {
  const char *xt = cg_ctype(s->x_dtype), *yt = cg_ctype(s->y_dtype);
  char fv[48];
  fconst(fv, sizeof fv, s->fill);
  cg_emit(o, "static $T void $P_plane(const $F_ctx *cx, float *xp, long pi) {\n");
  cg_emit(o, "  long h = cx->h, w = cx->w, oh_ = cx->oh, ow_ = cx->ow, hp = cx->hp, wq = cx->wq, rs = cx->rs;\n");
  cg_emit(o, "  const %s *x = (const %s *)cx->x + pi * h * w;\n  %s *y = (%s *)cx->y + pi * oh_ * ow_;\n", xt, xt, yt, yt);
  cg_emit(o, "  unsigned nm = 0;\n  (void)nm;\n");
  emit_copy_rt(o, s, fv, !s->sum);
  emit_ops(o, s, g, emit_plane_rt_any, false);
  cg_emit(o, "}\n");
}

/* The variant with sizes read at run time: the plane's geometry of this
 * run (cx), the scratch of the upper corner's (g). */
static void emit_variant_rt(cg_out *o, const cgen_pool_spec *s, const pl_geo *g) {
  if (direct_rt(o, s)) emit_plane_fn_direct(o, s, g);
  else emit_plane_fn_copy(o, s, g);
  cg_emit(o, "static $T void $P_task(void *vc, int task, int tid) {\n  const $F_ctx *cx = (const $F_ctx *)vc;\n");
  cg_emit(o, "  for (long pi = cx->np * task / cx->ntasks; pi < cx->np * (task + 1) / cx->ntasks; pi++)\n");
  cg_emit(o, "    $P_plane(cx, (float *)cx->sc.thr[tid], pi);\n}\n");
  cg_emit(o, "static $T int $P_run(hprt_pool *pool, const void *x, void *y) {\n  $F_ctx cx;\n  cx.x = x; cx.y = y;\n");
  cg_rt_window k = {s->n_expr, s->h_expr, s->w_expr, s->n, s->h, s->w, s->kh, s->kw, s->stride, s->pad, s->dil};
  char hp[64]; /* the rows the windows read */
  snprintf(hp, sizeof hp, "(cx.oh - 1) * %ldL + %ldL", (long)s->stride[0], (long)((s->kh - 1) * s->dil[0] + 1));
  cg_emit_rt_window(o, &k, hp);
  cg_emit(o, "  cx.np = n * %ldL;\n  cx.ntasks = 4 * hprt_pool_size(pool);\n  if (cx.ntasks > cx.np) cx.ntasks = (int)cx.np;\n",
          (long)s->c);
  /* the plane of this run (read in place: none) */
  if (direct_rt(o, s)) cg_emit(o, "  if (hprt_scratch_get(pool, 0, 0, &cx.sc)) return -1;\n");
  else cg_emit(o, "  if (hprt_scratch_get(pool, 0, (size_t)(cx.hp * cx.rs * 4), &cx.sc)) return -1;\n");
  cg_emit(o, "  hprt_pool_run(pool, cx.ntasks, $P_task, &cx);\n");
  cg_emit(o, "  hprt_scratch_put(&cx.sc);\n  return 0;\n}\n");
  if (o->isa->id != CGEN_ISA_SCALAR) cg_emit(o, "#endif /* HPRT_X86 */\n");
}

static void emit_variant(cg_out *o, const cgen_pool_spec *s) {
  pl_geo g;
  geometry(s, o->isa->w, &g);
  int64_t C = s->c, H = s->h, W = s->w, plane = g.oh * g.ow;
  const char *xt = cg_ctype(s->x_dtype), *yt = cg_ctype(s->y_dtype);
  bool chk = !s->sum; /* a max notes NaN in the plane */
  char fv[48];
  fconst(fv, sizeof fv, s->fill);
  cg_emit_isa_helpers(o);
  emit_helpers(o, s);
  if (s->n_expr || s->h_expr || s->w_expr) {
    g.rt = true;
    emit_variant_rt(o, s, &g);
    return;
  }
  cg_emit(o, "static $T void $P_plane(const $F_ctx *cx, float *xp, long pi) {\n");
  cg_emit(o, "  const %s *x = (const %s *)cx->x + pi * %ldL;\n", xt, xt, (long)(H * W));
  cg_emit(o, "  %s *y = (%s *)cx->y + pi * %ldL;\n", yt, yt, (long)plane);
  cg_emit(o, "  unsigned nm = 0;\n  (void)nm;\n");
  /* the padded plane: rows of the pad value above and below, each row split into its phases */
  cg_emit(o, "  for (long r = 0; r < %ldL; r++) {\n    float *d = xp + r * %ldL;\n    long ih = r - %ldL;\n", (long)g.hp,
          (long)g.rs, (long)s->pad[0]);
  cg_emit(o, "    if (ih < 0 || ih >= %ldL) {\n      for (long i = 0; i < %ldL; i++) d[i] = %s;\n      continue;\n    }\n",
          (long)H, (long)g.rs, fv);
  cg_emit(o, "    const %s *xr = x + ih * %ldL;\n", xt, (long)W);
  cg_plane_row pr = {s->x_dtype, s->w, s->pad[1], s->stride[1], g.wq};
  cg_emit_plane_row(o, &pr, fv, chk, CG_ROW_ALL);
  cg_emit(o, "  }\n");
  if (s->sum) {
    emit_plane(o, s, &g, OP_SUM);
  } else {
    cg_emit(o, "  if (!nm) {\n");
    emit_plane(o, s, &g, OP_MAX);
    cg_emit(o, "  } else {\n");
    emit_plane(o, s, &g, OP_MAXN);
    cg_emit(o, "  }\n");
  }
  cg_emit(o, "}\n");
  /* a task is a run of planes: a few per thread balance a noisy machine */
  long np = (long)(s->n * C);
  cg_emit(o, "static $T void $P_task(void *vc, int task, int tid) {\n  const $F_ctx *cx = (const $F_ctx *)vc;\n");
  cg_emit(o, "  for (long pi = %ldL * task / cx->ntasks; pi < %ldL * (task + 1) / cx->ntasks; pi++)\n", np, np);
  cg_emit(o, "    $P_plane(cx, (float *)cx->sc.thr[tid], pi);\n}\n");
  cg_emit(o, "static $T int $P_run(hprt_pool *pool, const void *x, void *y) {\n");
  cg_emit(o, "  $F_ctx cx;\n  cx.x = x; cx.y = y;\n");
  cg_emit(o, "  cx.ntasks = 4 * hprt_pool_size(pool);\n  if (cx.ntasks > %ld) cx.ntasks = %ld;\n", np, np);
  cg_emit(o, "  if (hprt_scratch_get(pool, 0, %ldUL, &cx.sc)) return -1;\n", (long)(g.hp * g.rs * 4));
  cg_emit(o, "  hprt_pool_run(pool, cx.ntasks, $P_task, &cx);\n");
  cg_emit(o, "  hprt_scratch_put(&cx.sc);\n  return 0;\n}\n");
  if (o->isa->id != CGEN_ISA_SCALAR) cg_emit(o, "#endif /* HPRT_X86 */\n");
}

harp_status cgen_pool(harp_error *e, const cgen_pool_spec *s, const char *fn, ut_str *out) {
  if (!s || !out) return ut_fail(e, HARP_E_INVALID_ARG, NULL, "cgen_pool: NULL argument");
  if (cg_check_name(e, fn)) return e->code;
  int64_t oh, ow;
  if (s->n < 1 || s->c < 1 || s->kh < 1 || s->kw < 1 || !cgen_pool_out_hw(s, &oh, &ow))
    return ut_fail(e, HARP_E_INVALID_ARG, NULL, "cgen_pool: the window does not fit the padded input");
  for (int i = 0; i < 4; i++)
    if (s->pad[i] < 0) return ut_fail(e, HARP_E_INVALID_ARG, NULL, "cgen_pool: negative padding");
  if (!cg_dtype_ok(s->x_dtype) || !cg_dtype_ok(s->y_dtype))
    return ut_fail(e, HARP_E_UNSUPPORTED, NULL, "cgen_pool: dtypes must be fp32, fp16 or bf16");
  if (isnan(s->fill)) return ut_fail(e, HARP_E_UNSUPPORTED, NULL, "cgen_pool: a NaN pad value");
  for (int i = 0; i < s->n_epi; i++) {
    cgen_epi_kind k = s->epi[i].kind;
    if (k == CGEN_EPI_BIAS_M || k == CGEN_EPI_BIAS_N || k == CGEN_EPI_RESIDUAL)
      return ut_fail(e, HARP_E_UNSUPPORTED, NULL, "cgen_pool: only steps without a tensor follow a pool");
  }
  if (s->stride[1] > 16) /* a phase row per column of the stride, each with its own copy loops */
    return ut_fail(e, HARP_E_LIMIT, NULL, "cgen_pool: stride beyond 16 columns");
  if (s->kh * s->kw > 121) /* every tap is unrolled code */
    return ut_fail(e, HARP_E_LIMIT, NULL, "cgen_pool: window beyond 11x11 taps");
  if (s->n * s->c >= (1L << 31)) return ut_fail(e, HARP_E_LIMIT, NULL, "cgen_pool: more planes than tasks");
  pl_geo g; /* the widest variant's plane (16 lanes) is the largest */
  geometry(s, 16, &g);
  if (g.hp * g.rs > (1L << 26)) return ut_fail(e, HARP_E_LIMIT, NULL, "cgen_pool: plane beyond 256 MiB of scratch");
  unsigned set = cg_isa_set(&s->tune);
  cg_out o = {.s = out, .F = fn, .bf16_cvt = s->tune.bf16_cvt && s->y_dtype == TINY_BF16 && (set >> CGEN_ISA_AVX512 & 1u)};
  cg_set_isa(&o, NULL);
  cg_emit_runtime(out);
  cg_emit(&o, "/* ---- %s: %s pool n%ld c%ld %ldx%ld, %ldx%ld window, stride %ldx%ld, %s->%s ---- */\n", fn,
          s->sum ? "sum" : "max", (long)s->n, (long)s->c, (long)s->h, (long)s->w, (long)s->kh, (long)s->kw,
          (long)s->stride[0], (long)s->stride[1], tiny_dtype_name(s->x_dtype), tiny_dtype_name(s->y_dtype));
  cg_emit_scalar_conv(&o);
  cg_emit(&o, "typedef struct { const void *x; void *y; int ntasks; hprt_scratch sc;%s } $F_ctx;\n",
          s->n_expr || s->h_expr || s->w_expr ? " long np, h, w, oh, ow, hp, wq, rs;" : "");
  for (int i = 0; i < CGEN_ISA_COUNT; i++) {
    if (!(set >> i & 1u)) continue;
    cg_set_isa(&o, cg_isa_get((cgen_isa)i));
    emit_variant(&o, s);
  }
  cg_emit_dispatch(&o, set, s->tune.force_isa, "hprt_pool *pool, const void *x, void *y", "pool, x, y");
  if (out->oom) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "cgen: out of memory");
  return HARP_OK;
}
