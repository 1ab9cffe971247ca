/* cgen_skinny_half.c — the skinny GEMM (cgen_skinny.c) under harp_options.precision
 * "bf16" with a weight B: model_init keeps B in 16 bits (prepack_b), and every run
 * streams half the bytes of the fp32 weight (a classifier's 5-8 MB), bound by
 * reading it.  The copy is fp16, not bf16: the same bytes, 3 more significant
 * bits, so the head adds no error a bf16 weight would (MobileNetV2's output
 * against fp32: 6.8e-3 with bf16 weights, base 6.1e-3); a power-of-two scale
 * s puts max |B| s in [2^14, 2^15) (no overflow, full precision for small
 * weights) and the sums are multiplied by 1 / s (exact) before the epilogue.
 * Needs: cgen_gemm_int.h, cgen_int.h.  Gives: cg_skinny_half_ok,
 * cg_emit_skinny_half_pack, cg_skinny_half_view.
 *
 * Packed layout: a 64-byte header (float 0: 1 / s), then B s in fp16, dense:
 * [N][K] where B is stored along K (b_sk 1, x W^T), else [K][N]. */
#include <stdio.h>
#include <string.h>

#include "backend/c/cgen_int.h"

#include "backend/c/cgen_gemm_int.h"

#define SKH_PACK_ROWS 64 /* rows of the packed B a packer task */

bool cg_skinny_half_ok(const cg_mm *p) {
  if (!p->tune.bf16 || !p->prepack_b || p->conv || p->prepack_a || p->m_expr || p->b0_expr || p->rt) return false;
  if (!(cg_isa_set(&p->tune) >> CGEN_ISA_AVX512 & 1u) || p->tune.splitk > 1) return false;
  if (p->M > CGEN_SKINNY_MAX_M || p->c_sn != 1 || (p->b_sn != 1 && p->b_sk != 1)) return false;
  return p->nb[0] * p->nb[1] * p->M * p->K <= (1L << 24);
}

/* p as the skinny kernel reads its packed B: fp16, one batch, dense. */
void cg_skinny_half_view(const cg_mm *p, cg_mm *q) {
  *q = *p;
  q->bdt = TINY_FP16;
  q->b_sb[0] = q->b_sb[1] = 0;
  if (p->b_sk == 1) q->b_sn = p->K;
  else q->b_sk = p->N, q->b_sn = 1;
}

/* $P_packBall_task, $P_pack_b_bytes_run, $P_pack_b_run of the AVX-512
 * variant (after its helpers): the scale from max |B| (one pass), then
 * SKH_PACK_ROWS rows of the packed B a task, 16 elements a vector. */
void cg_emit_skinny_half_pack(cg_out *o, const cg_mm *p) {
  bool dots = p->b_sk == 1;
  int64_t rows = dots ? p->N : p->K, cols = dots ? p->K : p->N, rs = dots ? p->b_sn : p->b_sk;
  int64_t ntask = (rows + SKH_PACK_ROWS - 1) / SKH_PACK_ROWS;
  const char *bt = cg_ctype(p->bdt), *sx = cg_vsuffix(p->bdt);
  cg_emit(o, "static $T void $P_packBall_task(void *vc, int task, int tid) {\n  (void)tid;\n");
  cg_emit(o, "  const $F_ctx *cx = (const $F_ctx *)vc;\n  const %s *B = (const %s *)cx->B;\n", bt, bt);
  cg_emit(o, "  uint16_t *d = (uint16_t *)((char *)cx->Ap + 64);\n  const $P_v s = $P_set1(1.0f / *(const float *)cx->Ap);\n");
  cg_emit(o, "  long r0 = task * %dL, r1 = r0 + %dL < %ldL ? r0 + %dL : %ldL;\n", SKH_PACK_ROWS, SKH_PACK_ROWS, (long)rows,
          SKH_PACK_ROWS, (long)rows);
  cg_emit(o, "  for (long r = r0; r < r1; r++)\n    for (long c = 0; c < %ldL; c += 16) {\n", (long)cols);
  cg_emit(o, "      int n = %ldL - c < 16 ? (int)(%ldL - c) : 16;\n", (long)cols, (long)cols);
  cg_emit(o, "      $P_v x = n == 16 ? $P_ld%s(B + r * %ldL + c) : $P_ldn%s(B + r * %ldL + c, n);\n", sx, (long)rs, sx,
          (long)rs);
  cg_emit(o, "      $P_stnh(d + r * %ldL + c, x * s, n);\n    }\n}\n", (long)cols);
  cg_emit(o, "static $T long $P_pack_b_bytes_run(void) { return %ldL; }\n", (long)(64 + rows * cols * 2));
  /* the scale: 2^(15 - e) for max |B| = f 2^e, f in [0.5, 1); 1 for a B of zeros or not finite */
  cg_emit(o, "static $T int $P_pack_b_run(hprt_pool *pool, const void *B, void *Bp) {\n");
  cg_emit(o, "  $F_ctx cx;\n  memset(&cx, 0, sizeof cx);\n  cx.B = B; cx.Ap = (float *)Bp;\n  float mx = 0.0f;\n");
  char ld[200], idx[64];
  snprintf(idx, sizeof idx, "r * %ldL + c", (long)rs);
  cg_scalar_ld(o, ld, sizeof ld, p->bdt, "B", idx);
  cg_emit(o, "  for (long r = 0; r < %ldL; r++)\n    for (long c = 0; c < %ldL; c++) {\n", (long)rows, (long)cols);
  cg_emit(o, "      float v = fabsf(%s);\n      mx = v > mx || v != v ? v : mx;\n    }\n", ld);
  cg_emit(o, "  int e = 0;\n  if (mx > 0.0f && mx <= 3.0e38f) frexpf(mx, &e);\n  if (e < -100) e = -100; /* 1 / s a normal float */\n");
  cg_emit(o, "  float s = mx > 0.0f && mx <= 3.0e38f ? ldexpf(1.0f, 15 - e) : 1.0f;\n");
  cg_emit(o, "  memset(Bp, 0, 64);\n  *(float *)Bp = 1.0f / s;\n");
  cg_emit(o, "  hprt_pool_run(pool, %ld, $P_packBall_task, &cx);\n  return 0;\n}\n", (long)ntask);
}
