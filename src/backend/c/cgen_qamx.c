/* cgen_qamx.c — the Intel AMX-INT8 variant of the int8 GEMM (cgen_qgemm.c):
 * $F_amx_run, which the selector runs where the CPU has AMX-INT8 and Linux
 * grants the tile state (hprt_amx8_ok), else the VNNI variant runs.
 * Needs: cgen_qgemm_int.h (the sizes, the epilogue), cgen_int.h (AMX's
 * runtime check, cgen_amx.c).  Gives: cg_qamx_pays, cg_qamx_on,
 * cg_qamx_wwords, cg_qamx_emit_pack, cg_qamx_emit.
 *
 * Products.  tdpbusd (u8 A x s8 B) where the weight is B, tdpbsud (s8 A x
 * u8 B) where it is A (NCHW convs): the same exact int32 sums as vpdpbusd,
 * so the compensation c0 and the multipliers (the packed weight's, shared
 * with the other variants) and the requantizing epilogue are the VNNI
 * tile's (cg_qg_emit_epilogue), applied to the stored tiles.
 *
 * Layout.  The depth is padded to K4p = K4 rounded up to 16 words (one
 * tile's 64 bytes), zeros in the weight (the activation's padding then
 * multiplies zeros, whatever it holds), so there is no K tail.  AMX's
 * A operand is rows of bytes, its B operand rows of 4-byte words of
 * consecutive k (the VNNI B layout):
 *   weight A: panels of 32 rows [32][K4p] words, packed once ($F_amxpk);
 *             B (the activation) per task as the VNNI variant's block
 *             ($F_avx512_pkb, [K4][64] words; rows to K4p unwritten),
 *             or, x held VNNI-4 ([K4][N] words: a producer's y_vnni4)
 *             and K4 whole tiles, its full blocks read in place (rows
 *             4 N bytes apart), no packing;
 *   weight B: blocks [K4p][64] words ($F_pk, packed once); A (the
 *             activation) per call as panels [32][K4p] words (x ^ 0x80 for
 *             s8), a pool task per panel.
 * The packed weight holds the layout of the variant that runs ($F_pack asks
 * $F_sel), so it is no larger than the larger of the two.
 *
 * Tiles.  A task (one 64-column block of B times a chunk of 32-row panels)
 * loads the tile configuration once: tmm0-1 A (rows 0-15, 16-31), tmm2-3 B
 * (columns 0-15, 16-31 of a half), tmm4-7 the 32x32 sums; the two halves
 * of the block in turn, each over all of K4p; the sums stored to a 36 x 64
 * int32 buffer whose six groups of 6 rows go through the epilogue. */
#include <stdio.h>

#include "backend/c/cgen_qgemm_int.h"

#define QX_R 32 /* rows of a panel, columns of a half block */
#define QX_ATTR "__attribute__((target(\"avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,amx-tile,amx-int8\")))"

/* hprt_amx8_ok: hprt_amx_ok (cgen_amx.c) and AMX-INT8 (CPUID.7.0:EDX bit 25). */
static const char AMX8_RUNTIME[] =
    "#ifndef HPRT_AMX8_RUNTIME\n#define HPRT_AMX8_RUNTIME 1\n#ifdef HPRT_AMX\n"
    "static __attribute__((unused)) int hprt_amx8_ok(void) {\n"
    "  unsigned a = 7, b, c = 0, d;\n  __asm__ volatile(\"cpuid\" : \"+a\"(a), \"=b\"(b), \"+c\"(c), \"=d\"(d));\n"
    "  return (d >> 25 & 1u) && hprt_amx_ok();\n}\n#endif\n#endif\n";

/* Does an M x N x K int8 GEMM (per image) pay on AMX?  bench/qamx.py, 2
 * threads, VNNI time / AMX time: 1.4-3.4 on ResNet-50's convs and BERT's
 * GEMMs, 1.69 at 960x49x160, 1.50 at 96x784x96, 1.18 at 32x256x256 (2^21),
 * 1.10 at 32x3136x64; but 0.53-0.86 below 2^18 multiply-adds (a task's
 * tile setup, A's panels and the 32x64 tiles padded past small M, N), and
 * 0.83-0.87 at K = 24, 27, 48 (the depth padded to 64 bytes: up to 2.7x
 * the products), 1.01 at K = 32: at least 16 rows, 16 columns, 64 deep and
 * 2^21 multiply-adds (between 1.02-1.18 measured at 2^21 and 0.8-1.04 at 2^20). */
bool cg_qamx_pays(int64_t M, int64_t N, int64_t K) {
  return M >= 16 && N >= 16 && K >= 64 && (double)M * (double)N * (double)K >= 2097152.0;
}

/* Whether spec s gets the variant: forced (amx 2), or asked (1) where it pays. */
bool cg_qamx_on(const cgen_qgemm_spec *s) {
  return s->amx == 2 || (s->amx == 1 && cg_qamx_pays(s->m, s->n, s->k));
}

/* The depth in words padded to a tile's 16; the 32-row panels of A. */
static long k4p_of(const qg_dims *d) { return (d->K4 + 15) / 16 * 16; }
static long panels_of(const qg_dims *d) { return (d->M + QX_R - 1) / QX_R; }

/* Words of the weight in the AMX layout: A's panels or B's padded blocks. */
long cg_qamx_wwords(const cgen_qgemm_spec *s, const qg_dims *d) {
  return s->weight_a ? panels_of(d) * QX_R * k4p_of(d) : d->NB * k4p_of(d) * QG_NR;
}

/* $F_amxpk(w, d): the weight in the AMX layout (the file's comment), zeros
 * past its rows and K; w as cgen_qgemm.h's F_pack takes it. */
void cg_qamx_emit_pack(cg_out *o, const cgen_qgemm_spec *s, const qg_dims *d) {
  long K4p = k4p_of(d), rs = s->w_kmajor ? 1 : d->K, ks = s->w_kmajor ? d->wrows : 1;
  ut_str_puts(o->s, AMX8_RUNTIME);
  cg_emit(o, "static void $F_amxpk(const int8_t *w, int32_t *d) {\n");
  cg_emit(o, "  memset(d, 0, %ldUL);\n", cg_qamx_wwords(s, d) * 4);
  if (s->weight_a) {
    cg_emit(o, "  int8_t *q = (int8_t *)d;\n  for (long r = 0; r < %ldL; r++)\n", d->M);
    cg_emit(o, "    for (long k = 0; k < %ldL; k++) q[r * %ldL + k] = w[r * %ldL + k * %ldL];\n}\n", d->K, K4p * 4, rs, ks);
  } else
    cg_emit(o, "  for (long b = 0; b < %ldL; b++) $F_pk((const uint8_t *)w, %ldL, %ldL, %ldL, %d, 0u, b, d + b * %ldL);\n}\n", d->NB,
            rs, ks, d->N, QG_NR, K4p * QG_NR);
}

/* $P_ep<nv>(cb, c0, mu, y, m0, n0, mlim): the epilogue of 6 rows of stored
 * sums (cb, rows 64 words apart), nv vectors of 16 columns, rows below mlim. */
static void emit_ep(cg_out *o, const cgen_qgemm_spec *s, const qg_dims *d, int nv) {
  cg_emit(o, "static " QX_ATTR " void $P_ep%d(const int32_t *cb, const int32_t *c0, const float *mu, void *y, long m0, long n0,"
             " long mlim) {\n", nv);
  for (int i = 0; i < QG_MR; i++)
    for (int j = 0; j < nv; j++) cg_emit(o, "  __m512i c%d_%d = _mm512_load_si512(cb + %d);\n", i, j, i * QG_NR + 16 * j);
  cg_qg_emit_epilogue(o, s, d, nv, "mlim");
  cg_emit(o, "}\n");
}

/* $P_apk(vc, task, tid): panel `task` of the activation A ([M][K] bytes)
 * as [32][K4p] words, each byte ^ x, zeros past M and K. */
static void emit_apack(cg_out *o, const cgen_qgemm_spec *s, const qg_dims *d) {
  long K4p = k4p_of(d);
  unsigned x = s->x_dtype == TINY_I8 ? 0x80u : 0u;
  cg_emit(o, "static void $P_apk(void *vc, int task, int tid) {\n  const $F_ctx *cx = (const $F_ctx *)vc;\n  (void)tid;\n");
  cg_emit(o, "  for (long r = task * %dL; r < (task + 1) * %dL; r++) {\n", QX_R, QX_R);
  cg_emit(o, "    uint8_t *q = (uint8_t *)cx->xp + r * %ldL;\n    long n = r < %ldL ? %ldL : 0;\n", K4p * 4, d->M, d->K);
  cg_emit(o, "    const uint8_t *p = (const uint8_t *)cx->x + r * %ldL;\n", d->K);
  if (x) cg_emit(o, "    for (long k = 0; k < n; k++) q[k] = (uint8_t)(p[k] ^ %uu);\n", x);
  else cg_emit(o, "    if (n) memcpy(q, p, (size_t)n);\n");
  cg_emit(o, "    memset(q + n, 0, (size_t)(%ldL - n));\n  }\n}\n", K4p * 4);
}

/* The tile loop of $P_task: the 32x32 sums of half h of the block (B at
 * bb, its rows of 4-byte words bs bytes apart) and the panel at ab, over
 * K4p words, stored into cb. */
static void emit_tiles(cg_out *o, const cgen_qgemm_spec *s, long K4p) {
  const char *dp = s->weight_a ? "_tile_dpbsud" : "_tile_dpbusd";
  cg_emit(o, "      _tile_zero(4); _tile_zero(5); _tile_zero(6); _tile_zero(7);\n");
  cg_emit(o, "      for (long k = 0; k < %ldL; k += 16) {\n", K4p);
  cg_emit(o, "        _tile_loadd(0, ab + k * 4, %ld);\n        _tile_loadd(1, ab + %ldL + k * 4, %ld);\n", K4p * 4, 16 * K4p * 4,
          K4p * 4);
  cg_emit(o, "        _tile_loadd(2, bb + k * bs + h * %d, bs);\n        _tile_loadd(3, bb + k * bs + h * %d + 64, bs);\n", QX_R * 4,
          QX_R * 4);
  cg_emit(o, "        %s(4, 0, 2); %s(5, 0, 3); %s(6, 1, 2); %s(7, 1, 3);\n      }\n", dp, dp, dp, dp);
  cg_emit(o, "      _tile_stored(4, cb + h * %d, %d); _tile_stored(5, cb + h * %d + 16, %d);\n", QX_R, QG_NR * 4, QX_R, QG_NR * 4);
  cg_emit(o, "      _tile_stored(6, cb + %d + h * %d, %d); _tile_stored(7, cb + %d + h * %d + 16, %d);\n", 16 * QG_NR, QX_R,
          QG_NR * 4, 16 * QG_NR, QX_R, QG_NR * 4);
}

/* Whether B's blocks are read in place: x held VNNI-4 (cgen_qgemm.h) with
 * no depth past it (K4 whole tiles); the full blocks then, a partial last
 * one packed (its tile rows would run past x). */
static bool b_in_place(const cgen_qgemm_spec *s, const qg_dims *d) { return s->x_vnni4 && d->K4 % 16 == 0; }

/* $P_task(vc, task, tid): B block jb = task / mc times the panels of chunk
 * task % mc; the tile configuration loaded once for the task. */
static void emit_task(cg_out *o, const cgen_qgemm_spec *s, const qg_dims *d) {
  long K4p = k4p_of(d), MP = panels_of(d);
  int tnv = cg_qg_tail_nv(d);
  cg_emit(o, "static " QX_ATTR " void $P_task(void *vc, int task, int tid) {\n  $F_ctx *cx = ($F_ctx *)vc;\n");
  cg_emit(o, "  long jb = task / cx->mc, ic = task %% cx->mc;\n");
  cg_emit(o, "  long p0 = %ldL * ic / cx->mc, p1 = %ldL * (ic + 1) / cx->mc;\n", MP, MP);
  cg_emit(o, "  const int32_t *c0 = cx->wp + %ldL;\n  const float *mu = (const float *)(c0 + %ldL);\n", d->wwords, d->chpad);
  /* rows 32-35: read by the last group of 6 (never stored) */
  cg_emit(o, "  int32_t cb[%d] __attribute__((aligned(64)));\n  memset(cb + %d, 0, %dU);\n", (QX_R + 4) * QG_NR, QX_R * QG_NR,
          4 * QG_NR * 4);
  cg_emit(o, "  long bs = %d;\n", QG_NR * 4);
  if (s->weight_a) {
    cg_emit(o, "  int32_t *B = (int32_t *)cx->sc.thr[tid];\n");
    if (b_in_place(s, d)) /* a full block of a VNNI-4 x: its rows in place, 4 N bytes apart */
      cg_emit(o, "  if (jb < %ldL) B = (int32_t *)((uint8_t *)cx->x + jb * %dL), bs = %ldL;\n  else\n", d->N / QG_NR, QG_NR * 4,
              4 * d->N);
    /* its rows K4 .. K4p are never written: the weight's zeros there null them */
    cg_emit(o, "  if (cx->pjb[tid] != jb) %s_avx512_pkb(cx, jb, B), cx->pjb[tid] = jb;\n", o->F);
  } else
    cg_emit(o, "  const int32_t *B = cx->wp + jb * %ldL;\n", K4p * QG_NR);
  cg_emit(o, "  const char *bb = (const char *)B;\n");
  cg_emit(o, "  struct { uint8_t pal, start, res[14]; uint16_t colsb[16]; uint8_t rows[16]; } cfg;\n");
  cg_emit(o, "  memset(&cfg, 0, sizeof cfg);\n  cfg.pal = 1;\n");
  cg_emit(o, "  for (int t = 0; t < 8; t++) cfg.colsb[t] = 64, cfg.rows[t] = 16;\n  _tile_loadconfig(&cfg);\n");
  cg_emit(o, "  for (long p = p0; p < p1; p++) {\n");
  cg_emit(o, "    const char *ab = (const char *)(%s + p * %ldL);\n", s->weight_a ? "cx->wp" : "cx->xp", QX_R * K4p);
  /* the second half only where the block has columns there (its epilogue reads them) */
  cg_emit(o, "    for (int h = 0; h < (jb * %d + %d < %ldL ? 2 : 1); h++) {\n", QG_NR, QX_R, d->NT);
  emit_tiles(o, s, K4p);
  cg_emit(o, "    }\n    long m0 = p * %dL, mlim = m0 + %d < %ldL ? m0 + %d : %ldL;\n", QX_R, QX_R, d->M, QX_R, d->M);
  cg_emit(o, "    for (int g = 0; g < %d && m0 + g * %d < mlim; g++)\n", (QX_R + QG_MR - 1) / QG_MR, QG_MR);
  if (tnv < QG_NV)
    cg_emit(o, "      (jb == %ldL ? $P_ep%d : $P_ep%d)(cb + g * %d, c0, mu, cx->y, m0 + g * %d, jb * %d, mlim);\n", d->NB - 1, tnv,
            QG_NV, QG_MR * QG_NR, QG_MR, QG_NR);
  else cg_emit(o, "      $P_ep%d(cb + g * %d, c0, mu, cx->y, m0 + g * %d, jb * %d, mlim);\n", QG_NV, QG_MR * QG_NR, QG_MR, QG_NR);
  cg_qg_emit_post(o, s, d, "m0", "mlim", false); /* the panel's rows while in L1 */
  cg_emit(o, "  }\n  _tile_release();\n}\n");
}

/* $P_run(pool, wp, x, y): the conv's image (the VNNI variant's $P_ctask),
 * A's panels where the activation is A, then the tasks. */
static void emit_run(cg_out *o, const cgen_qgemm_spec *s, const qg_dims *d) {
  long K4p = k4p_of(d), MP = panels_of(d);
  bool conv = s->conv.kh > 0 && !d->ci; /* an image built per call */
  long img = (long)s->conv.c * d->Hp * d->Wp;
  long col = cg_qg_col_bytes(s, d);
  long xp = s->weight_a ? 0 : MP * QX_R * K4p * 4, bb = s->weight_a ? K4p * QG_NR * 4 : 0;
  long nrow = d->cd || d->pg || d->ps ? (long)s->conv.c : d->K;
  if (!s->weight_a) emit_apack(o, s, d);
  emit_task(o, s, d);
  cg_emit(o, "static int $P_run(hprt_pool *pool, const void *wp, const void *x, void *y%s) {\n  $F_ctx cx;\n", cg_qg_post_params(s));
  cg_emit(o, "  cx.wp = (const int32_t *)wp; cx.x = x; cx.y = y;\n  for (int t = 0; t < HPRT_MAXT; t++) cx.pjb[t] = -1;\n");
  if (s->post) cg_emit(o, "  cx.post = post, cx.pctx = pctx;\n");
  cg_emit(o, "  if (hprt_scratch_get(pool, %ldUL, %ldUL, &cx.sc)) return -1;\n", col + xp, bb);
  cg_emit(o, "  cx.col = (uint8_t *)cx.sc.shared;\n  cx.xp = (int32_t *)(cx.sc.shared + %ldL);\n  cx.at = NULL;\n", col);
  bool small = (double)d->M * (double)d->N * (double)d->K < 2e6; /* as the VNNI variant */
  cg_emit(o, "  hprt_pool *p = %s;\n  int P = hprt_pool_size(p);\n", small ? "NULL" : "pool");
  if (conv) {
    cg_emit(o, "  cx.nct = 4 * P < %ldL ? 4 * P : %ldL;\n", nrow, nrow);
    if (d->cd) cg_emit(o, "  memset(cx.col + %ldL, 0, %ldUL);\n", img, col - img);
    cg_emit(o, "  hprt_pool_run(P > 1 ? p : NULL, (int)cx.nct, %s_avx512_ctask, &cx);\n", o->F);
  }
  if (!s->weight_a) cg_emit(o, "  hprt_pool_run(P > 1 ? p : NULL, %ld, $P_apk, &cx);\n", MP);
  cg_emit(o, "  long mc = (4L * P + %ldL - 1) / %ldL;\n  cx.mc = mc < 1 ? 1 : mc > %ldL ? %ldL : mc;\n", d->NB, d->NB, MP, MP);
  cg_emit(o, "  hprt_pool_run(P > 1 ? p : NULL, (int)(cx.mc * %ldL), $P_task, &cx);\n", d->NB);
  cg_emit(o, "  hprt_scratch_put(&cx.sc);\n  return 0;\n}\n");
}

/* The variant (cgen_qgemm_int.h): its epilogues, tasks and $F_amx_run. */
void cg_qamx_emit(cg_out *o, const cgen_qgemm_spec *s, const qg_dims *d) {
  snprintf(o->P, sizeof o->P, "%s_amx", o->F);
  cg_emit(o, "#ifdef HPRT_AMX\n#include <immintrin.h>\n");
  emit_ep(o, s, d, QG_NV);
  if (cg_qg_tail_nv(d) < QG_NV) emit_ep(o, s, d, cg_qg_tail_nv(d));
  emit_run(o, s, d);
  cg_emit(o, "#endif\n");
  cg_set_isa(o, o->isa); /* the prefix back */
}
