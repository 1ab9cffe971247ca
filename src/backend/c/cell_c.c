/* cell_c.c — a recurrent cell region (shape D, src/region/cell.c) as one
 * kernel: the GEMVs S = A Bᵀ of its state with the gate math in their
 * epilogue, column block by column block.
 * Needs: the region's rg_info (cell), its Poly-View, the Function;
 * the loop nest's op spellings (rc_ewise_expr).  Gives: cc_try_cell.
 *
 * A task takes 16 columns j of the gate math (and up to CELL_MT of its M
 * rows).  For every column block S_c[m, col + j] the gate math reads, it
 * accumulates the 16 dot products over k in vector registers from the
 * GEMV's weight packed once by model_init as [read][j / 16][k][16] (zero
 * past H): one broadcast of A[m, k] and one aligned 64-byte load per read
 * and k.  Then the gate math runs on those 16 lanes, one C statement per
 * Tiny op (the loop nest's spellings, so the numerics are the generic
 * kernel's), and the values the region writes are stored.  The weight
 * packs of every step of an RNN are one (the same buffer and key,
 * emit_model.c).  Tasks spread over the pool when the packed weights pass
 * CELL_POOL_BYTES (the GEMV streams them from L2 or L3); below, the
 * calling thread runs them all.  What a step reads at an offset (the input
 * projection's rows of step t) is added by the small entry function, so
 * the task code of every step is the same text (kitems.c shares it). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/common/nest.h"
#include "kernel/contract.h"
#include "cell_c.h"
#include "harp/polycore.h"
#include "harp/region.h"

#define CELL_JB 16            /* columns per task: one 512-bit vector */
#define CELL_MT 4             /* rows per task */
#define CELL_MAX_READS 8      /* column blocks of the GEMVs the gate math reads */
#define CELL_MAX_TENSORS 16   /* other tensors it reads */
#define CELL_MAX_STORES 8     /* values it writes (one may go to several buffers) */
#define CELL_MAX_OPS 240
#define CELL_POOL_BYTES (1024 * 1024) /* an L2: below, one core streams the weights fast enough */

#define DECLINE(msg) \
  do {               \
    *why = (msg);    \
    return false;    \
  } while (0)

typedef struct cell_gemv {
  int block;
  int64_t N, K;
  int a_slot, b_slot;
  int64_t a_off, a_sm, a_sk; /* A[m, k] */
  int64_t b_off, b_sn, b_sk; /* S[m, n] = sum_k A[m, k] B(n, k) */
} cell_gemv;

typedef struct cell_read {
  int gemv;
  int64_t col; /* S_gemv[m, col + j] */
} cell_read;

typedef struct cell_tensor {
  int slot;
  tiny_dtype dt;
  int64_t off, sm, sj; /* element off + m sm + j sj */
} cell_tensor;

typedef struct cell_arg {
  char kind; /* 'g' a read, 'v' an op's value, 'c' a constant, 't' a tensor */
  int idx;
  double c;
  tiny_dtype dt;
} cell_arg;

typedef struct cell_op {
  int node;
  cell_arg a[TINY_MAX_SRC];
} cell_op;

typedef struct cell_store {
  int op, slot;
  tiny_dtype dt;
} cell_store;

typedef struct cell_spec {
  int64_t M, H;
  int ngemv, nreads, nt, nops, nstores;
  cell_gemv gemv[RG_CELL_MAX_CON];
  cell_read reads[CELL_MAX_READS];
  cell_tensor t[CELL_MAX_TENSORS];
  cell_op ops[CELL_MAX_OPS];
  cell_store stores[CELL_MAX_STORES];
} cell_spec;

static bool is_int(tiny_dtype t) { return !tiny_dtype_is_float(t); }

static const char *stype(tiny_dtype t) { return t == TINY_FP32 ? "float" : t == TINY_I32 ? "int32_t" : "uint8_t"; }

/* ---- reading the region ------------------------------------------------------------- */
/* Contraction block b as a GEMV (A's and B's strides over m, n and the one
 * reduced variable that moves). */
static bool read_gemv(const rc_ctx *c, const fn_kernel *K, int b, cell_gemv *gv, const char **why) {
  const poly_block_info *pb = poly_block(c->pv, b);
  int64_t lo[POLY_MAX_VARS], hi[POLY_MAX_VARS], st[2][POLY_MAX_VARS], off[2];
  if (!poly_block_ranges(c->pv, b, lo, hi) || pb->naccess != 3) DECLINE("a GEMV's sizes");
  int kv = pb->nvars - 1;
  for (int v = 2; v < pb->nvars; v++)
    if (hi[v] > lo[v]) kv = v;
  for (int a = 0; a < 2; a++) {
    bool aff = false;
    if (poly_access_strides(c->e, c->pv, b, a, st[a], &off[a], &aff) || !aff) DECLINE("a GEMV operand is not strided");
  }
  int ia = st[0][1] != 0 || (hi[1] == lo[1] && st[1][0] != 0) ? 1 : 0, ib = 1 - ia; /* A does not move with n */
  gv->block = b;
  gv->N = hi[1] + 1, gv->K = hi[kv] - lo[kv] + 1;
  gv->a_slot = ct_slot_of(K, c->f, pb->access[ia].tensor);
  gv->b_slot = ct_slot_of(K, c->f, pb->access[ib].tensor);
  if (gv->a_slot < 0 || gv->b_slot < 0 || gv->b_slot >= K->nreads) DECLINE("a GEMV operand is no buffer of the kernel");
  if (c->f->buffers[K->reads[gv->a_slot]].dtype != TINY_FP32 || c->f->buffers[K->reads[gv->b_slot]].dtype != TINY_FP32)
    DECLINE("a GEMV operand is not fp32");
  if (c->f->buffers[K->reads[gv->b_slot]].kind != FN_PARAM) DECLINE("a GEMV weight is no param (packed once at model_init)");
  if ((hi[1] > 0 && st[ia][1] != 0) || (hi[0] > 0 && st[ib][0] != 0)) DECLINE("a GEMV operand moves with both rows and columns");
  gv->a_off = off[ia], gv->a_sm = hi[0] > 0 ? st[ia][0] : 0, gv->a_sk = st[ia][kv];
  gv->b_off = off[ib], gv->b_sn = st[ib][1], gv->b_sk = st[ib][kv];
  if (gv->a_off < 0 || gv->a_sm < 0 || gv->a_sk < 0 || gv->b_off < 0 || gv->b_sn < 0 || gv->b_sk < 0) DECLINE("negative strides");
  return true;
}

static int gemv_of_node(const cell_spec *s, const rc_ctx *c, int node) {
  for (int i = 0; i < s->ngemv; i++)
    if (poly_block(c->pv, s->gemv[i].block)->node == node) return i;
  return -1;
}

static int op_of_node(const cell_spec *s, int node) {
  for (int i = 0; i < s->nops; i++)
    if (s->ops[i].node == node) return i;
  return -1;
}

/* Access k of ewise block b as an argument of op o. */
static bool read_arg(const rc_ctx *c, const fn_kernel *K, cell_spec *s, int b, int k, cell_arg *a, const char **why) {
  const poly_block_info *pb = poly_block(c->pv, b);
  int t = pb->access[k].tensor;
  const tiny_node *tn = &c->g->nodes[t];
  int64_t st[POLY_MAX_VARS], off;
  bool aff = false;
  if (tn->op == TINY_CONST) { /* a literal only where no point reads a pad of it */
    if (pb->access[k].nfill) DECLINE("a gate math read of a constant through padding");
    *a = (cell_arg){'c', 0, tn->a.cnst.value, tn->dtype};
    return true;
  }
  if (poly_access_strides(c->e, c->pv, b, k, st, &off, &aff) || !aff) DECLINE("a gate math read is not strided");
  int64_t sm = s->M > 1 ? st[0] : 0, sj = s->H > 1 ? st[1] : 0;
  int gi = gemv_of_node(s, c, t), oi = op_of_node(s, t);
  if (gi >= 0) { /* a column block of a GEMV */
    if (sj != 1 || (s->M > 1 && sm != s->gemv[gi].N) || off < 0 || off + s->H > s->gemv[gi].N) DECLINE("a GEMV read is no column block");
    int r = 0;
    while (r < s->nreads && (s->reads[r].gemv != gi || s->reads[r].col != off)) r++;
    if (r == s->nreads) {
      if (s->nreads == CELL_MAX_READS) DECLINE("too many column blocks");
      s->reads[s->nreads++] = (cell_read){gi, off};
    }
    *a = (cell_arg){'g', r, 0, TINY_FP32};
    return true;
  }
  if (oi >= 0) { /* a value of the gate math, at its own point */
    if (off != 0 || (s->H > 1 && sj != 1) || (s->M > 1 && sm != s->H)) DECLINE("a gate math value read at another point");
    *a = (cell_arg){'v', oi, 0, tn->dtype};
    return true;
  }
  int slot = ct_slot_of(K, c->f, t);
  if (slot < 0 || off < 0 || sm < 0 || sj < 0) DECLINE("a gate math operand is no buffer of the kernel");
  tiny_dtype dt = c->f->buffers[c->f->buffer_of[t]].dtype;
  if (dt != TINY_FP32 && dt != TINY_I32 && dt != TINY_BOOL) DECLINE("a gate math operand is not fp32, i32 or bool");
  int i = 0;
  while (i < s->nt && (s->t[i].slot != slot || s->t[i].off != off || s->t[i].sm != sm || s->t[i].sj != sj)) i++;
  if (i == s->nt) {
    if (s->nt == CELL_MAX_TENSORS) DECLINE("too many tensors");
    s->t[s->nt++] = (cell_tensor){slot, dt, off, sm, sj};
  }
  *a = (cell_arg){'t', i, 0, dt};
  return true;
}

/* A value the region writes to node's buffer (a copy block's too). */
static bool add_store(const rc_ctx *c, const fn_kernel *K, cell_spec *s, int op, int node, const char **why) {
  int slot = ct_slot_of(K, c->f, node);
  if (slot < K->nreads) DECLINE("a written value is no buffer the kernel writes");
  tiny_dtype dt = c->f->buffers[c->f->buffer_of[node]].dtype;
  if (dt != TINY_FP32 && dt != TINY_I32 && dt != TINY_BOOL) DECLINE("a written value is not fp32, i32 or bool");
  if (s->nstores == CELL_MAX_STORES) DECLINE("too many outputs");
  s->stores[s->nstores++] = (cell_store){op, slot, dt};
  return true;
}

static bool is_output(const rg_region *R, int node) {
  for (int i = 0; i < R->nout; i++)
    if (R->out_values[i] == node) return true;
  return false;
}

static bool read_cell(const rc_ctx *c, int r, cell_spec *s, const char **why) {
  const fn_kernel *K = &c->f->kernels[r];
  const rg_region *R = &c->f->part->regions[K->region];
  const rg_cell *cl = &R->info->cell;
  memset(s, 0, sizeof *s);
  s->M = cl->M, s->H = cl->H;
  for (int i = 0; i < cl->ncon; i++)
    if (!read_gemv(c, K, cl->con[i], &s->gemv[s->ngemv++], why)) return false;
  for (int i = 0; i < R->nblocks; i++) {
    int b = R->blocks[i];
    const poly_block_info *pb = poly_block(c->pv, b);
    const tiny_node *n = &c->g->nodes[pb->node];
    if (pb->kind == POLY_CONTRACTION) continue;
    if (pb->kind == POLY_MOVEMENT_AFFINE) { /* a copy of a value: one more store */
      int o = op_of_node(s, pb->access[0].tensor);
      if (o < 0) DECLINE("a copy of no gate math value");
      if (!add_store(c, K, s, o, pb->node, why)) return false;
      continue;
    }
    if (pb->kind != POLY_EWISE || n->shape.rank != 2 || n->shape.d[0].n != s->M || n->shape.d[1].n != s->H)
      DECLINE("a gate math block is not elementwise on [M, H]");
    if (s->nops == CELL_MAX_OPS) DECLINE("too many gate math ops");
    cell_op *op = &s->ops[s->nops];
    op->node = pb->node;
    for (int k = 0; k < n->nsrc; k++)
      if (!read_arg(c, K, s, b, k, &op->a[k], why)) return false;
    s->nops++;
    if (is_output(R, pb->node) && !add_store(c, K, s, s->nops - 1, pb->node, why)) return false;
  }
  if (!s->nops) DECLINE("no gate math");
  return true;
}

/* ---- the code ------------------------------------------------------------------------- */
/* The GEMV's reads, in order. */
static int gemv_reads(const cell_spec *s, int gi, int *out) {
  int n = 0;
  for (int r = 0; r < s->nreads; r++)
    if (s->reads[r].gemv == gi) out[n++] = r;
  return n;
}

static int64_t njb(const cell_spec *s) { return (s->H + CELL_JB - 1) / CELL_JB; }

static int64_t packed_bytes(const cell_spec *s, int gi) {
  int rd[CELL_MAX_READS];
  return (int64_t)gemv_reads(s, gi, rd) * njb(s) * s->gemv[gi].K * CELL_JB * 4;
}

/* fn_wbytes<i> / fn_wpack<i>: GEMV gi's weight as [read][j / 16][k][16], zero past H. */
static void emit_pack(ut_str *o, const cell_spec *s, const char *fn, int gi) {
  const cell_gemv *gv = &s->gemv[gi];
  int rd[CELL_MAX_READS], nr = gemv_reads(s, gi, rd);
  char sfx[4] = "";
  if (gi) snprintf(sfx, sizeof sfx, "%d", gi);
  ut_str_printf(o, "static long %s_wbytes%s(void) { return %" PRId64 "L; }\n", fn, sfx, packed_bytes(s, gi));
  ut_str_printf(o, "static int %s_wpack%s(hprt_pool *pool, const void *w, void *wp) {\n  (void)pool;\n", fn, sfx);
  ut_str_printf(o, "  const float *b = (const float *)w + %" PRId64 ";\n  float *p = (float *)wp;\n  static const long col[%d] = {", gv->b_off,
                nr);
  for (int i = 0; i < nr; i++) ut_str_printf(o, "%" PRId64 ", ", s->reads[rd[i]].col);
  ut_str_printf(o,
                "};\n  for (int r = 0; r < %d; r++)\n    for (long jb = 0; jb < %" PRId64 "; jb++)\n"
                "      for (long k = 0; k < %" PRId64 "; k++)\n        for (int l = 0; l < %d; l++) {\n"
                "          long n = jb * %d + l;\n"
                "          *p++ = n < %" PRId64 " ? b[(col[r] + n) * %" PRId64 "L + k * %" PRId64 "L] : 0.0f;\n        }\n"
                "  return 0;\n}\n",
                nr, njb(s), gv->K, CELL_JB, CELL_JB, s->H, gv->b_sn, gv->b_sk);
}

/* The dot products of GEMV gi for this task's rows and columns into g[read][row][lane]. */
static void emit_gemv(ut_str *o, const cell_spec *s, const char *fn, int gi) {
  const cell_gemv *gv = &s->gemv[gi];
  int rd[CELL_MAX_READS], nr = gemv_reads(s, gi, rd);
  int mt = s->M < CELL_MT ? (int)s->M : CELL_MT;
  ut_str_printf(o, "  { /* GEMV %d: %d column blocks, K = %" PRId64 " */\n", gi, nr, gv->K);
  ut_str_printf(o, "    const float *A = x->a[%d];\n    const %s_v16 *P = (const %s_v16 *)x->w[%d] + jb * %" PRId64 "L;\n", gi, fn, fn, gi,
                gv->K);
  for (int i = 0; i < nr; i++)
    for (int q = 0; q < mt; q++) ut_str_printf(o, "    %s_v16 acc%d_%d = {0};\n", fn, i, q);
  for (int q = 0; q < mt; q++) /* rows past M read row 0 (their lanes are never used) */
    ut_str_printf(o, "    const float *A%d = A + (m0 + %d < %" PRId64 " ? m0 + %d : 0) * %" PRId64 "L;\n", q, q, s->M, q, gv->a_sm);
  ut_str_printf(o, "#pragma GCC unroll 4\n    for (long k = 0; k < %" PRId64 "; k++) {\n", gv->K);
  for (int q = 0; q < mt; q++) ut_str_printf(o, "      const float a%d = A%d[k * %" PRId64 "L];\n", q, q, gv->a_sk);
  for (int i = 0; i < nr; i++) {
    ut_str_printf(o, "      const %s_v16 w%d = P[%" PRId64 "L * %d + k];\n", fn, i, njb(s) * gv->K, i);
    for (int q = 0; q < mt; q++) ut_str_printf(o, "      acc%d_%d += a%d * w%d;\n", i, q, q, i);
  }
  ut_str_puts(o, "    }\n");
  for (int i = 0; i < nr; i++)
    for (int q = 0; q < mt; q++) ut_str_printf(o, "    memcpy(g[%d][%d], &acc%d_%d, sizeof acc%d_%d);\n", rd[i], q, i, q, i, q);
  ut_str_puts(o, "  }\n");
}

static void arg_text(ut_str *o, const cell_spec *s, const cell_arg *a) {
  switch (a->kind) {
  case 'g': ut_str_printf(o, "g[%d][mm][l]", a->idx); break;
  case 'v': ut_str_printf(o, "v%d", a->idx); break;
  case 'c':
    if (is_int(a->dt)) ut_str_printf(o, "(int32_t)%.0f", a->c);
    else rc_float_const(o, a->dt, a->c);
    break;
  default: {
    const cell_tensor *t = &s->t[a->idx];
    ut_str_printf(o, "%s((const %s *)x->t[%d])[m * %" PRId64 "L + j * %" PRId64 "L]", t->dt == TINY_BOOL ? "(int32_t)" : "", stype(t->dt),
                  a->idx, t->sm, t->sj);
  }
  }
}

/* The gate math of row mm, lanes l < w, and the stores. */
static harp_status emit_math(ut_str *o, const rc_ctx *c, const cell_spec *s) {
  ut_str_puts(o, "  for (int mm = 0; mm < mn; mm++) {\n    const long m = m0 + mm;\n#pragma omp simd\n    for (int l = 0; l < w; l++) {\n"
                 "      const long j = j0 + l;\n      (void)m; (void)j;\n");
  for (int i = 0; i < s->nops; i++) {
    const tiny_node *n = &c->g->nodes[s->ops[i].node];
    ut_str x[TINY_MAX_SRC];
    const char *xs[TINY_MAX_SRC];
    for (int k = 0; k < n->nsrc; k++) {
      ut_str_init(&x[k]);
      arg_text(&x[k], s, &s->ops[i].a[k]);
      xs[k] = x[k].buf ? x[k].buf : "0";
    }
    ut_str_printf(o, "      const %s v%d = ", is_int(n->dtype) ? "int32_t" : "float", i);
    rc_ewise_expr(o, c->g, n, xs, false);
    ut_str_puts(o, ";\n");
    for (int k = 0; k < n->nsrc; k++) {
      if (x[k].oom) o->oom = true;
      ut_str_free(&x[k]);
    }
  }
  for (int i = 0; i < s->nstores; i++) {
    const cell_store *st = &s->stores[i];
    ut_str_printf(o, "      ((%s *)x->o[%d])[m * %" PRId64 "L + j] = ", stype(st->dt), i, s->H);
    if (st->dt == TINY_BOOL) ut_str_printf(o, "(uint8_t)(v%d != 0);\n", st->op);
    else if (st->dt == TINY_I32 && !is_int(c->g->nodes[s->ops[st->op].node].dtype)) ut_str_printf(o, "hp_f2i(v%d);\n", st->op);
    else ut_str_printf(o, "v%d;\n", st->op);
  }
  ut_str_puts(o, "    }\n  }\n");
  return o->oom ? ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory") : HARP_OK;
}

/* The entry: operand pointers at their offsets, then the tasks. */
static void emit_entry(ut_str *o, const cell_spec *s, const fn_kernel *K, const char *fn, int64_t ntasks) {
  int64_t bytes = 0;
  for (int i = 0; i < s->ngemv; i++) bytes += packed_bytes(s, i);
  ut_str_printf(o, "static int %s(hprt_pool *pool, void *const *bufs) {\n  %s_ctx x;\n", fn, fn);
  for (int i = 0; i < s->ngemv; i++) {
    ut_str_printf(o, "  x.a[%d] = (const float *)bufs[%d] + %" PRId64 ";\n", i, s->gemv[i].a_slot, s->gemv[i].a_off);
    ut_str_printf(o, "  x.w[%d] = bufs[%d];\n", i, K->nreads + K->nwrites + i);
  }
  for (int i = 0; i < s->nt; i++)
    ut_str_printf(o, "  x.t[%d] = (const %s *)bufs[%d] + %" PRId64 ";\n", i, stype(s->t[i].dt), s->t[i].slot, s->t[i].off);
  for (int i = 0; i < s->nstores; i++) ut_str_printf(o, "  x.o[%d] = bufs[%d];\n", i, s->stores[i].slot);
  if (bytes < CELL_POOL_BYTES) ut_str_printf(o, "  pool = NULL; /* %" PRId64 " bytes of weights: the calling thread alone */\n", bytes);
  ut_str_printf(o, "  hprt_pool_run(pool, %" PRId64 ", %s_task, &x);\n  return 0;\n}\n\n", ntasks, fn);
}

static harp_status emit_cell(rc_ctx *c, int r, const cell_spec *s, const char *fn, ut_str *o) {
  const fn_kernel *K = &c->f->kernels[r];
  int64_t nm = (s->M + CELL_MT - 1) / CELL_MT, ntasks = nm * njb(s);
  ut_str_printf(o, "/* recurrent cell: %d GEMV%s of %" PRId64 " x %" PRId64 " and %d ops of gate math on [%" PRId64 ", %" PRId64 "] */\n",
                s->ngemv, s->ngemv > 1 ? "s" : "", s->M, s->gemv[0].K, s->nops, s->M, s->H);
  ut_str_printf(o, "typedef float __attribute__((vector_size(64))) %s_v16;\n", fn);
  ut_str_printf(o, "typedef struct %s_ctx { const float *a[%d]; const void *w[%d]; const void *t[%d]; void *o[%d]; } %s_ctx;\n", fn,
                RG_CELL_MAX_CON, RG_CELL_MAX_CON, CELL_MAX_TENSORS, CELL_MAX_STORES, fn);
  for (int i = 0; i < s->ngemv; i++) emit_pack(o, s, fn, i);
  ut_str_printf(o, "HP_KERNEL static void %s_task(void *vx, int task, int tid) {\n  (void)tid;\n  const %s_ctx *x = (const %s_ctx *)vx;\n",
                fn, fn, fn);
  ut_str_printf(o,
                "  const long jb = task %% %" PRId64 ", m0 = task / %" PRId64 " * %d, j0 = jb * %d;\n"
                "  const int w = %" PRId64 " - j0 < %d ? (int)(%" PRId64 " - j0) : %d;\n"
                "  const int mn = %" PRId64 " - m0 < %d ? (int)(%" PRId64 " - m0) : %d;\n"
                "  float g[%d][%d][%d];\n",
                njb(s), njb(s), CELL_MT, CELL_JB, s->H, CELL_JB, s->H, CELL_JB, s->M, CELL_MT, s->M, CELL_MT,
                s->nreads ? s->nreads : 1, CELL_MT, CELL_JB);
  for (int i = 0; i < s->ngemv; i++) emit_gemv(o, s, fn, i);
  harp_status st = emit_math(o, c, s);
  ut_str_puts(o, "}\n");
  emit_entry(o, s, K, fn, ntasks);
  return st;
}

harp_status cc_try_cell(rc_ctx *c, int r, const char *fn, ut_str *out, bool *handled, const char **why, rc_packed *pk) {
  cell_spec *s = malloc(sizeof *s);
  if (!s) return ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
  *handled = false;
  if (rt_knobs_or_default(c->knobs)->no_prepack) *why = "HARP_NO_PREPACK: the cell template packs its weights";
  else if (read_cell(c, r, s, why)) {
    const fn_kernel *K = &c->f->kernels[r];
    pk->n = s->ngemv;
    for (int i = 0; i < s->ngemv; i++) {
      const cell_gemv *gv = &s->gemv[i];
      int rd[CELL_MAX_READS], nr = gemv_reads(s, i, rd), n;
      pk->slot[i] = gv->b_slot;
      n = snprintf(pk->key[i], RC_PACK_KEY, "cell %" PRId64 " %" PRId64 " %" PRId64 " %" PRId64 " %" PRId64 ":", gv->b_off, gv->b_sn, gv->b_sk,
                   gv->K, s->H);
      for (int q = 0; q < nr && n > 0 && n < RC_PACK_KEY; q++) n += snprintf(pk->key[i] + n, (size_t)(RC_PACK_KEY - n), " %" PRId64, s->reads[rd[q]].col);
      if (n <= 0 || n >= RC_PACK_KEY) pk->key[i][0] = 0; /* too long to name: packed apart */
    }
    if (c->packed_only) { /* the weights are only read packed, unless the gate math reads them too */
      bool only = true;
      for (int i = 0; i < s->nt; i++)
        for (int q = 0; q < s->ngemv; q++) only &= s->t[i].slot != s->gemv[q].b_slot;
      for (int q = 0; q < s->ngemv; q++) only &= s->gemv[q].a_slot != s->gemv[q].b_slot;
      c->packed_only[r] = only;
    }
    harp_status st = emit_cell(c, r, s, fn, out);
    free(s);
    if (!st) *handled = true;
    (void)K;
    return st;
  }
  free(s);
  return HARP_OK;
}
