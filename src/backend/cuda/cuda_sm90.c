/* cuda_sm90.c — the SM90 branch of the MMA template: TMA, mbarrier, wgmma.
 * Needs: cuda.h, cuda_int.h.  Gives: cuda_sm90_gemm (through cuda_gen_gemm
 * when the plan's arch is sm90) and the SM90 part of the printed prelude.
 *
 * Structure (one persistent, warp-specialised kernel):
 *   384 threads = 3 warpgroups.  Warpgroup 0 is the producer: it drops to 40
 *   registers (setmaxnreg.dec) and one thread issues the TMA loads
 *   (cp.async.bulk.tensor.4d ... mbarrier::complete_tx) of the A and B tiles
 *   into an S-stage ring.  Warpgroups 1 and 2 are consumers (setmaxnreg.inc
 *   232): each owns 64 rows of the 128-row tile and runs
 *   wgmma.mma_async.m64nBNk16 straight from SMEM descriptors.
 *   full[s] (count 1 + tx bytes) says a stage has landed; empty[s] (count
 *   256) says it may be refilled: a consumer keeps one k tile's MMAs in
 *   flight (wgmma.wait_group 1 after issuing the next tile's) and every
 *   consumer thread arrives on the previous tile's stage once that wait has
 *   retired it; after the k loop, wait_group 0 and the last stage.  Parities: iteration it uses stage it % S with phase
 *   (it / S) & 1; consumers wait full with that parity, the producer waits
 *   empty with the opposite one (a fresh barrier counts as "the previous
 *   phase completed", so the first S waits pass).
 *   Tiles: a persistent loop (tile = blockIdx.x; tile += gridDim.x) over a
 *   grouped raster (group_m M tiles share each N tile, for L2 reuse), batch
 *   outermost.
 *   Epilogue: the fused ops on the accumulator registers (the same Epilogue
 *   statement as SM80), then registers -> SMEM staging -> one TMA store per
 *   tile (out-of-bounds rows/columns are clipped by the TMA unit).
 *
 * SMEM operand layouts (PTX ISA 9.7.15.5.1.2, 128-byte swizzle, every stage
 * 1024-byte aligned so the descriptor base offset is 0):
 *   A  K-major:  BM rows of 64 elements (128 B), TMA box {64, BM}; descriptor
 *                LBO = 16 (unused), SBO = 1024 (8 rows); k-step kk adds 32 B.
 *   B  K-major:  BN rows of 64 elements, same as A (imm-trans-b = 0).
 *   B  N-major:  BN/64 panels of 64 rows (k) x 64 elements (n), TMA box {64, 64}
 *                per panel; LBO = panel stride (64 x 128 B), SBO = 1024;
 *                k-step kk adds 16 rows = 2048 B (imm-trans-b = 1).
 * Accumulators (m64nNk16, f32): warp w of a warpgroup holds rows 16w..16w+15;
 * d[4j + 2h + e] is row g + 8h, column 8j + 2t + e — the m16n8 C layout per
 * 8 columns, so the SM80 Epilogue statement applies as is.
 *
 * fp32 operands (cuda_math TF32): wgmma m64nNk8 .tf32 over the same bytes:
 * a 128-byte row is 32 fp32 elements (BK 32, TMA box {32, rows}), a k step
 * of 8 still 32 bytes, so descriptors, swizzle and stages are unchanged; the
 * tensor core reads the top 19 bits of each operand (truncation, where the
 * SM80 template rounds).  TF32 wgmma has no transpose: B must be K-major.
 *
 * Constraints (else Unsupported; the resource model rejects such plans):
 * fp16/bf16 operands, or fp32 as TF32 with B K-major; A K-major (a_sk == 1); B K- or N-major; every TMA
 * stride a multiple of 16 bytes (K, and N for N-major B / C, multiples of 8
 * 16-bit or 4 fp32 elements); BM = 128; BK = 128 bytes; BN in {64, 128, 256}; 2..4 stages; C fp16,
 * bf16 or fp32 with c_sn == 1.
 *
 * Split-K: slices of K are separate tiles of the queue.  splitk_parallel:
 * they add their raw fp32 partial sums into C with red.global.add.f32 (C
 * fp32 and zeroed; epilogue ops other than bias/residual adds are refused
 * since they do not distribute over the sum); splitk_reduce: each stores its
 * partial at C + ks * c_ss (cuda_gen_gemm_finish sums them and applies the
 * epilogue).  splitk_serial is the SM80 template's.
 *
 * A ShapeSet build (spec nsyms > 0, issue 25; no split-K): M, N, K and the
 * batches are formulas of the size parameters hp_sv<i> (sm90_rt_plan): the
 * tile loops run the binding's tiles (sm90_rt_counts: a CTA past them
 * leaves at once; the grid keeps the box's), the raster and the k loop
 * decode them at run time, the Epilogue's bounds and a residual's strides
 * are formulas, and the TMA maps' dims and strides too
 * (cuda_wgmma_rt.c), which the runtime encodes per binding.
 *
 * Status: runs right on an H100 (test_cuda_gpu, every test model, split-K;
 * compute-sanitizer clean) and at 0.97-1.01x cuBLAS with 128x256 tiles and
 * 3 stages (bench/cuda_gemm.c, docs/cuda.md "On a GPU"). */
#include <stdio.h>
#include <string.h>

#include "backend/cuda/cuda.h"
#include "backend/cuda/cuda_int.h"

/* ---- the prelude --------------------------------------------------------------------- */
static const char sm90_helpers[] =
    "#ifndef HK_SIM\n"
    "HK_DEV void hk_mbar_init(hk_saddr b, int n) { asm volatile(\"mbarrier.init.shared::cta.b64 [%0], %1;\" :: \"r\"(b), \"r\"(n) : \"memory\"); }\n"
    "HK_DEV void hk_mbar_init_fence() { asm volatile(\"fence.mbarrier_init.release.cluster;\" ::: \"memory\"); }\n"
    "HK_DEV void hk_mbar_arrive_expect_tx(hk_saddr b, int bytes) {\n"
    "  asm volatile(\"mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\" :: \"r\"(b), \"r\"(bytes) : \"memory\"); }\n"
    "HK_DEV void hk_mbar_arrive(hk_saddr b) { asm volatile(\"mbarrier.arrive.shared::cta.b64 _, [%0];\" :: \"r\"(b) : \"memory\"); }\n"
    "HK_DEV int hk_mbar_try_wait(hk_saddr b, int parity) { hk_u32 ok;\n"
    "  asm volatile(\"{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }\"\n"
    "    : \"=r\"(ok) : \"r\"(b), \"r\"(parity) : \"memory\"); return (int)ok; }\n"
    "HK_DEV void hk_mbar_wait(hk_saddr b, int parity) { while (!hk_mbar_try_wait(b, parity)) { } }\n"
    "HK_DEV void hk_fence_proxy_async() { asm volatile(\"fence.proxy.async.shared::cta;\" ::: \"memory\"); }\n"
    "HK_DEV void hk_bar_named(int id, int n) { asm volatile(\"bar.sync %0, %1;\" :: \"r\"(id), \"r\"(n) : \"memory\"); }\n"
    "HK_DEV void hk_tma_load_4d(hk_saddr dst, const hk_tmap *m, int c0, int c1, int c2, int c3, hk_saddr bar) {\n"
    "  asm volatile(\"cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], [%6];\"\n"
    "    :: \"r\"(dst), \"l\"(m), \"r\"(c0), \"r\"(c1), \"r\"(c2), \"r\"(c3), \"r\"(bar) : \"memory\"); }\n"
    "HK_DEV void hk_tma_store_4d(const hk_tmap *m, hk_saddr src, int c0, int c1, int c2, int c3) {\n"
    "  asm volatile(\"cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [%0, {%2, %3, %4, %5}], [%1];\"\n"
    "    :: \"l\"(m), \"r\"(src), \"r\"(c0), \"r\"(c1), \"r\"(c2), \"r\"(c3) : \"memory\"); }\n"
    "HK_DEV void hk_bulk_commit() { asm volatile(\"cp.async.bulk.commit_group;\" ::: \"memory\"); }\n"
    "HK_DEV void hk_bulk_wait_read0() { asm volatile(\"cp.async.bulk.wait_group.read 0;\" ::: \"memory\"); }\n"
    "HK_DEV void hk_wgmma_fence() { asm volatile(\"wgmma.fence.sync.aligned;\" ::: \"memory\"); }\n"
    "HK_DEV void hk_wgmma_commit() { asm volatile(\"wgmma.commit_group.sync.aligned;\" ::: \"memory\"); }\n"
    "template <int N> HK_DEV void hk_wgmma_wait() { asm volatile(\"wgmma.wait_group.sync.aligned %0;\" :: \"n\"(N) : \"memory\"); }\n"
    "template <int R> HK_DEV void hk_setmaxnreg_inc() { asm volatile(\"setmaxnreg.inc.sync.aligned.u32 %0;\" :: \"n\"(R)); }\n"
    "template <int R> HK_DEV void hk_setmaxnreg_dec() { asm volatile(\"setmaxnreg.dec.sync.aligned.u32 %0;\" :: \"n\"(R)); }\n"
    /* the accumulators pinned in place: an empty volatile asm that reads and
     * writes each register, so the compiler cannot move their zeroing past
     * wgmma.fence or their reads above wgmma.wait_group (the asm statements'
     * "memory" clobbers order memory, not registers; CUTLASS's
     * warpgroup_fence_operand) */
    "template <int N> HK_DEV void hk_wgmma_fence_acc(float *d) {\n"
    "#pragma unroll\n"
    "  for (int i = 0; i < N; i++) asm volatile(\"\" : \"+f\"(d[i]) :: \"memory\"); }\n"
    "#endif /* HK_SIM */\n"
    /* matrix descriptor, 128-byte swizzle (PTX ISA 9.7.15.5.1.2.2) */
    "HK_DEV hk_u64 hk_gdesc(hk_saddr a, hk_u32 lbo, hk_u32 sbo) {\n"
    "  return (hk_u64)((a & 0x3FFFFu) >> 4) | ((hk_u64)((lbo & 0x3FFFFu) >> 4) << 16) | ((hk_u64)((sbo & 0x3FFFFu) >> 4) << 32) | (1ull << 62); }\n";

/* wgmma.mma_async m64nNk16 (f16/bf16) or m64nNk8 (tf32: no transpose
 * operands, K-major A and B only), fp32 accumulators d[N/2], A and B from SMEM. */
static void wgmma_helper(ut_str *o, int n, tiny_dtype dt, bool trans_b) {
  const char *ty = dt == TINY_BF16 ? "bf16" : dt == TINY_FP32 ? "tf32" : "f16";
  int kk = dt == TINY_FP32 ? 8 : 16;
  ut_str_printf(o, "HK_DEV void hk_wgmma_m64n%dk%d_%s%s(float *d, hk_u64 da, hk_u64 db, int scale_d) {\n", n, kk, ty,
                trans_b ? "_tb" : "");
  ut_str_printf(o, "  asm volatile(\"{ .reg .pred p; setp.ne.b32 p, %%%d, 0; wgmma.mma_async.sync.aligned.m64n%dk%d.f32.%s.%s {", n / 2 + 2, n, kk, ty, ty);
  for (int i = 0; i < n / 2; i++) ut_str_printf(o, "%s%%%d", i ? "," : "", i);
  if (dt == TINY_FP32) ut_str_printf(o, "}, %%%d, %%%d, p, 1, 1; }\"\n    : ", n / 2, n / 2 + 1);
  else ut_str_printf(o, "}, %%%d, %%%d, p, 1, 1, 0, %d; }\"\n    : ", n / 2, n / 2 + 1, trans_b ? 1 : 0);
  for (int i = 0; i < n / 2; i++) ut_str_printf(o, "%s\"+f\"(d[%d])", i ? ", " : "", i);
  ut_str_puts(o, "\n    : \"l\"(da), \"l\"(db), \"r\"(scale_d) : \"memory\"); }\n");
}

void cuda_sm90_prelude(const cuda_module *m, ut_str *o) {
  ut_str_puts(o, sm90_helpers);
  /* one wgmma helper per (N, dtype, B major-ness) the module's kernels use */
  char done[64][24];
  int nd = 0;
  ut_str_puts(o, "#ifndef HK_SIM\n");
  for (int i = 0; i < m->n; i++) {
    const cuda_kernel *k = m->k[i];
    int n = 0, tb = 0;
    const char *dt = NULL;
    for (int j = 0; j < k->nmeta; j++) {
      if (!strcmp(k->meta[j].key, "wgmma_n")) n = (int)k->meta[j].num;
      if (!strcmp(k->meta[j].key, "wgmma_trans_b")) tb = (int)k->meta[j].num;
      if (!strcmp(k->meta[j].key, "wgmma_dtype")) dt = k->meta[j].str;
    }
    if (!n || !dt) continue;
    char key[24];
    snprintf(key, sizeof key, "%d%s%d", n, dt, tb);
    bool seen = false;
    for (int j = 0; j < nd; j++) seen = seen || !strcmp(done[j], key);
    if (seen || nd >= 64) continue;
    snprintf(done[nd++], sizeof done[0], "%s", key);
    wgmma_helper(o, n, !strcmp(dt, "bf16") ? TINY_BF16 : !strcmp(dt, "tf32") ? TINY_FP32 : TINY_FP16, tb);
  }
  ut_str_puts(o, "#endif /* HK_SIM */\n");
}

/* ---- the generator ---------------------------------------------------------------------- */

/* A size-1 dimension (batch 1) has stride 0 in the region's view.  Only
 * coordinate 0 is ever read there, so any stride addresses the same bytes;
 * give it the packed one (the previous stride times the previous extent),
 * as cuTensorMapEncodeTiled's documentation lays strides out, rather than
 * rely on the driver accepting 0. */
static void packed_unit_strides(cuda_tmap_desc *d) {
  uint64_t prev = (uint64_t)tiny_dtype_size(d->dtype) * d->dims[0];
  for (int i = 1; i < d->rank; i++) {
    if (d->dims[i] == 1 && d->strides[i - 1] == 0) d->strides[i - 1] = (prev + 15) / 16 * 16;
    prev = d->strides[i - 1] * d->dims[i];
  }
}
/* A batch dimension that broadcasts (extent > 1, stride 0) is folded to
 * extent 1 and the kernel loads it at coordinate 0: the driver documents no
 * zero stride, and a map over one batch entry is all such an operand needs.
 * Writes the coordinate expressions of the two batch dimensions. */
static void fold_broadcast_batch(cuda_tmap_desc *d, const char *coord[2]) {
  static const char *const name[2] = {"b1", "b0"};
  for (int i = 2; i < 4; i++) {
    coord[i - 2] = name[i - 2];
    if (d->dims[i] > 1 && d->strides[i - 1] == 0) d->dims[i] = 1, coord[i - 2] = "0";
  }
}
static harp_status unsupported(harp_error *e, const char *name, const char *why) {
  return ut_fail(e, HARP_E_UNSUPPORTED, name, "outside the SM90 TMA/WGMMA template: %s (use an sm80 plan)", why);
}

/* The default tile width: 256 where the 128x256 tiles still number at least
 * one per SM of an H100 (measured there: 8192^3 fp16/bf16 1.01x cuBLAS with
 * 3 stages, against 0.88-0.90x for 128x128 with 4), else 128, or 64 for a
 * narrow N. */
static int default_bn(const cuda_gemm_spec *s) {
  int64_t tiles256 = (s->M + 127) / 128 * ((s->N + 255) / 256) * s->batch[0] * s->batch[1];
  if (s->N >= 256 && tiles256 >= 132 && s->tune.splitk <= 1) return 256;
  return s->N > 64 ? 128 : 64;
}

bool cuda_sm90_gemm_ok(const cuda_gemm_spec *s, char *why, int cap) {
  const cuda_tune *t = &s->tune;
  int bn = t->bn ? t->bn : default_bn(s);
  int al = 16 / tiny_dtype_size(s->a_dtype); /* elements per 16 bytes */
  const char *w = NULL;
  bool f32 = s->a_dtype == TINY_FP32;
  if (f32 && s->math != CUDA_MATH_TF32) w = "fp32 operands compute as TF32 only here (strict fp32 and fp16/bf16 rounding: SM80)";
  else if (f32 && s->b_sk != 1) w = "TF32 wgmma reads K-major operands only (B is N-major)";
  else if (s->a_sk != 1) w = "A must be K-major (a_sk == 1)";
  else if (s->b_sk != 1 && s->b_sn != 1) w = "B must be K-major or N-major";
  else if (s->c_sn != 1) w = "C must have unit column stride";
  else if ((s->M > 1 && s->a_sm == 0) || (s->b_sk == 1 ? s->N > 1 && s->b_sn == 0 : s->K > 1 && s->b_sk == 0))
    w = "an operand broadcast along its rows (stride 0) has no TMA map";
  else if (s->K % al || s->a_sm % al || s->a_sb[0] % al || s->a_sb[1] % al)
    w = "A rows must be 16-byte aligned (K, strides multiples of 16 bytes)";
  else if ((s->b_sk == 1 ? s->b_sn : s->b_sk) % al || s->b_sb[0] % al || s->b_sb[1] % al) w = "B rows must be 16-byte aligned";
  else if ((s->c_sm * tiny_dtype_size(s->c_dtype)) % 16 || (s->c_sb[0] * tiny_dtype_size(s->c_dtype)) % 16 ||
           (s->c_sb[1] * tiny_dtype_size(s->c_dtype)) % 16)
    w = "C rows must be 16-byte aligned";
  else if (t->bm && t->bm != 128) w = "BM must be 128 (two consumer warpgroups x m64)";
  else if (t->bk && t->bk != 128 / tiny_dtype_size(s->a_dtype)) w = "BK must be one 128-byte swizzle atom of K (64 fp16/bf16, 32 fp32)";
  else if (bn != 64 && bn != 128 && bn != 256) w = "BN must be 64, 128 or 256 (wgmma n)";
  else if (t->stages && (t->stages < 2 || t->stages > 4)) w = "stages must be 2..4";
  if (w && why) snprintf(why, (size_t)cap, "%s", w);
  return w == NULL;
}

/* The sizes cuda_sm90_gemm derives from a spec and its tune: tiles, ring
 * depth, shared-memory offsets, and the batch coordinates of A and B. */
typedef struct {
  int BM, BN, BK, S, GM, splitk, osz, CW;
  bool tf32, bkm, reduce; /* bkm: B K-major */
  int64_t KT, kt_per, TM, TN, ntiles, a_bytes, stage, c_off, bar_off, smem;
  const char *ca[2], *cb[2]; /* batch coordinates (b1, b0 or 0) of A, B */
  /* a ShapeSet build (spec nsyms > 0): M, N, the batches as C text (the
   * binding's, formulas of hp_sv<i>, or constants); NULL otherwise */
  const char *Mt, *Nt, *B0t, *B1t, *Kt;
} sm90_plan;

/* Fills p from the spec s (already accepted by cuda_sm90_gemm_ok); fails
 * with name on a split-K form, tile count, shared memory or register budget
 * the template cannot take. */
static harp_status sm90_plan_sizes(harp_error *e, const cuda_gemm_spec *s, const char *name, sm90_plan *p) {
  const cuda_tune *t = &s->tune;
  int esz = tiny_dtype_size(s->a_dtype);
  p->BM = 128, p->BK = 128 / esz, p->BN = t->bn ? t->bn : default_bn(s);
  p->tf32 = s->a_dtype == TINY_FP32;
  p->S = t->stages, p->GM = t->group_m ? t->group_m : 8;
  p->splitk = t->splitk > 1 ? t->splitk : 1;
  p->bkm = s->b_sk == 1;
  p->osz = tiny_dtype_size(s->c_dtype);
  p->reduce = p->splitk > 1 && t->splitk_kind == CUDA_SPLITK_REDUCE;
  if (p->splitk > 1 && t->splitk_kind == CUDA_SPLITK_SERIAL)
    return unsupported(e, name, "splitk_serial is on the SM80 template (it runs on sm_90)");
  p->KT = (s->K + p->BK - 1) / p->BK;
  if (p->splitk > p->KT) p->splitk = (int)p->KT;
  p->kt_per = (p->KT + p->splitk - 1) / p->splitk;
  p->TM = (s->M + p->BM - 1) / p->BM, p->TN = (s->N + p->BN - 1) / p->BN;
  p->ntiles = p->TM * p->TN * s->batch[0] * s->batch[1] * p->splitk;
  if (p->ntiles > INT32_MAX) return ut_fail(e, HARP_E_LIMIT, name, "too many tiles");
  p->a_bytes = (int64_t)p->BM * 128;
  p->stage = p->a_bytes + (int64_t)p->BN * 128;
  /* C is staged and stored CW columns at a time: fp32 C of 128 x 256 would
   * take 128 KB and leave room for 2 stages (0.62-0.74x cuBLAS TF32 on an
   * H200); 64-column chunks (32 KB) leave room for 4 */
  p->CW = p->osz == 4 && p->BN > 64 ? 64 : p->BN;
  int64_t c_bytes = (int64_t)p->BM * p->CW * p->osz;
  if (!p->S) /* the deepest ring that fits next to the C staging tile */
    for (p->S = 4; p->S > 2 && p->stage * p->S + c_bytes + 16 * p->S + 1024 > cuda_smem_max(CUDA_SM90); p->S--) {
    }
  p->c_off = p->stage * p->S;
  p->bar_off = p->c_off + c_bytes;
  p->smem = p->bar_off + 16 * p->S + 1024; /* + slack to align the base to 1024 */
  if (p->smem > cuda_smem_max(CUDA_SM90))
    return ut_fail(e, HARP_E_SMEM_OVERFLOW, name, "the plan needs %lld bytes of shared memory per CTA, sm90 has %lld",
                   (long long)p->smem, (long long)cuda_smem_max(CUDA_SM90));
  if (p->BN / 2 + 60 > 232) return ut_fail(e, HARP_E_REG_OVERFLOW, name, "BN %d needs too many accumulator registers", p->BN);
  return HARP_OK;
}

/* The three 4-D tensor maps (inner, outer, batch1, batch0) of A, B and C
 * of spec s in tm[0..2]; writes p's batch coordinates of A and B. */
static void sm90_tmaps(const cuda_gemm_spec *s, sm90_plan *p, cuda_tmap_desc *tm) {
  int abs = tiny_dtype_size(s->a_dtype), osz = p->osz;
  tm[0] = (cuda_tmap_desc){.tensor = "A", .dtype = s->a_dtype, .rank = 4, .swizzle = 3};
  tm[0].dims[0] = (uint64_t)s->K, tm[0].dims[1] = (uint64_t)s->M, tm[0].dims[2] = (uint64_t)s->batch[1],
  tm[0].dims[3] = (uint64_t)s->batch[0];
  tm[0].strides[0] = (uint64_t)(s->a_sm * abs), tm[0].strides[1] = (uint64_t)(s->a_sb[1] * abs),
  tm[0].strides[2] = (uint64_t)(s->a_sb[0] * abs);
  tm[0].box[0] = (uint32_t)p->BK, tm[0].box[1] = (uint32_t)p->BM, tm[0].box[2] = tm[0].box[3] = 1;
  tm[1] = (cuda_tmap_desc){.tensor = "B", .dtype = s->b_dtype, .rank = 4, .swizzle = 3};
  if (p->bkm) {
    tm[1].dims[0] = (uint64_t)s->K, tm[1].dims[1] = (uint64_t)s->N;
    tm[1].strides[0] = (uint64_t)(s->b_sn * abs);
    tm[1].box[0] = (uint32_t)p->BK, tm[1].box[1] = (uint32_t)p->BN;
  } else {
    tm[1].dims[0] = (uint64_t)s->N, tm[1].dims[1] = (uint64_t)s->K;
    tm[1].strides[0] = (uint64_t)(s->b_sk * abs);
    tm[1].box[0] = 64, tm[1].box[1] = 64;
  }
  tm[1].dims[2] = (uint64_t)s->batch[1], tm[1].dims[3] = (uint64_t)s->batch[0];
  tm[1].strides[1] = (uint64_t)(s->b_sb[1] * abs), tm[1].strides[2] = (uint64_t)(s->b_sb[0] * abs);
  tm[1].box[2] = tm[1].box[3] = 1;
  tm[2] = (cuda_tmap_desc){.tensor = "C", .dtype = s->c_dtype, .rank = 4, .swizzle = 0};
  tm[2].dims[0] = (uint64_t)s->N, tm[2].dims[1] = (uint64_t)s->M, tm[2].dims[2] = (uint64_t)s->batch[1],
  tm[2].dims[3] = (uint64_t)s->batch[0];
  tm[2].strides[0] = (uint64_t)(s->c_sm * osz), tm[2].strides[1] = (uint64_t)(s->c_sb[1] * osz),
  tm[2].strides[2] = (uint64_t)(s->c_sb[0] * osz);
  tm[2].box[0] = (uint32_t)p->CW, tm[2].box[1] = (uint32_t)p->BM, tm[2].box[2] = tm[2].box[3] = 1;
  fold_broadcast_batch(&tm[0], p->ca);
  fold_broadcast_batch(&tm[1], p->cb);
  for (int i = 0; i < 3; i++) packed_unit_strides(&tm[i]);
}

/* Kernel k's parameters (the tensor maps tm, C for split-K atomics, one
 * pointer per epilogue op of s) and its metadata from p. */
static void sm90_params_meta(cuda_b *b, cuda_kernel *k, const cuda_gemm_spec *s, const sm90_plan *p, cuda_tmap_desc *tm) {
  const cuda_tune *t = &s->tune;
  cuda_param_add(k, "tmA", "hk_tmap", CUDA_P_TMAP, s->a_dtype);
  k->params[k->nparams - 1].tmap = &tm[0];
  cuda_param_add(k, "tmB", "hk_tmap", CUDA_P_TMAP, s->b_dtype);
  k->params[k->nparams - 1].tmap = &tm[1];
  cuda_param_add(k, "tmC", "hk_tmap", CUDA_P_TMAP, s->c_dtype);
  k->params[k->nparams - 1].tmap = &tm[2];
  cuda_param_add(k, "C", cuda_ctype(s->c_dtype), CUDA_P_PTR_OUT, s->c_dtype); /* split-K atomics */
  cuda_epi_params(b, k, s->epi, s->n_epi);
  for (int i = 0; i < s->nsyms; i++) cuda_param_add(k, cuda_fmt(b, "hp_sv%d", i), "long", CUDA_P_LONG, TINY_I32);
  cuda_meta_str(k, "template", "sm90_wgmma");
  if (s->nsyms)
    cuda_meta_str(k, "sizes", "M, N, K and the batches at run time (hp_sv<i>); the tensor maps encoded per binding");
  cuda_meta_int(k, "BM", p->BM);
  cuda_meta_int(k, "BN", p->BN);
  cuda_meta_int(k, "BK", p->BK);
  cuda_meta_int(k, "stages", p->S);
  cuda_meta_int(k, "c_store_columns", p->CW);
  cuda_meta_str(k, "warp_tile", cuda_fmt(b, "64x%d per consumer warpgroup", p->BN));
  cuda_meta_int(k, "wgmma_n", p->BN);
  cuda_meta_int(k, "wgmma_trans_b", !p->bkm);
  cuda_meta_str(k, "wgmma_dtype", p->tf32 ? "tf32" : s->a_dtype == TINY_BF16 ? "bf16" : "f16");
  if (p->tf32) cuda_meta_str(k, "math", "wgmma m64nNk8 .tf32 (the hardware reads the top 19 bits of each fp32 operand)");
  cuda_meta_str(k, "warp_specialization", "1 producer warpgroup (TMA, 40 regs) + 2 consumer warpgroups (wgmma, 232 regs)");
  cuda_meta_str(k, "scheduler", t->persistent ? cuda_fmt(b, "persistent (grid.x = min(tiles, SMs)), grouped raster group_m=%d", p->GM)
                                              : cuda_fmt(b, "one CTA per tile, grouped raster group_m=%d", p->GM));
  cuda_meta_int(k, "tiles", p->ntiles);
  cuda_meta_int(k, "splitk", p->splitk);
  if (p->splitk > 1) cuda_meta_str(k, "algo_choice.matmul", cuda_splitk_name(t->splitk_kind));
  cuda_meta_str(k, "c_store", p->splitk > 1 ? (p->reduce ? "st.global.b32 partials" : "red.global.add.f32")
                                            : "registers -> smem -> TMA store");
  cuda_meta_str(k, "arch_note", "build for sm_90a (wgmma, setmaxnreg)");
}

/* A ShapeSet build's tile counts at the binding (p's size texts): the M
 * and N tiles hk_tm, hk_tn, the k tiles hk_kt, the inner batches hk_nb1
 * and the tiles hk_ntiles the tile loops run (the grid keeps the box's:
 * a CTA past them leaves its loop at once). */
static void sm90_rt_counts(cuda_b *b, const sm90_plan *p) {
  cuda_decl(b, "const int", "hk_tm", NULL, cuda_fmt(b, "(int)((%s + %d) / %d)", p->Mt, p->BM - 1, p->BM));
  cuda_decl(b, "const int", "hk_tn", NULL, cuda_fmt(b, "(int)((%s + %d) / %d)", p->Nt, p->BN - 1, p->BN));
  cuda_decl(b, "const int", "hk_kt", NULL, cuda_fmt(b, "(int)((%s + %d) / %d)", p->Kt, p->BK - 1, p->BK));
  cuda_decl(b, "const int", "hk_nb1", NULL, cuda_fmt(b, "(int)(%s)", p->B1t));
  cuda_decl(b, "const int", "hk_ntiles", NULL, cuda_fmt(b, "hk_tm * hk_tn * (int)(%s) * hk_nb1", p->B0t));
}

/* The shared-memory base and the S full/empty mbarrier pairs at p's
 * bar_off, initialised by thread 0 and fenced for the async proxy. */
static void sm90_prologue(cuda_b *b, const sm90_plan *p) {
  cuda_call(b, "HK_SMEM_DECL(hk_smem)");
  cuda_decl(b, "const hk_saddr", "hk_sb", NULL, "(hk_smem_addr(hk_smem) + 1023u) & ~1023u");
  cuda_decl(b, "const int", "tid", NULL, "threadIdx.x");
  cuda_decl(b, "const int", "wg", NULL, "tid >> 7");
  cuda_decl(b, "const hk_saddr", "full0", NULL, cuda_fmt(b, "hk_sb + %lld", (long long)p->bar_off));
  cuda_decl(b, "const hk_saddr", "empty0", NULL, cuda_fmt(b, "hk_sb + %lld", (long long)(p->bar_off + 8 * p->S)));
  cuda_if(b, "tid == 0");
  cuda_for(b, "s", "0", cuda_fmt(b, "%d", p->S), -1);
  cuda_emit_s(b, CU_MBAR_INIT, "full0 + s * 8", "1", NULL, NULL);
  cuda_emit_s(b, CU_MBAR_INIT, "empty0 + s * 8", "256", NULL, NULL);
  cuda_close(b);
  cuda_call(b, "hk_mbar_init_fence()");
  cuda_close(b);
  cuda_emit(b, CU_FENCE_PROXY_ASYNC);
  cuda_emit(b, CU_BARRIER);
  if (p->Mt) sm90_rt_counts(b, p);
}

/* sm90_decode_tile in a ShapeSet build (no split-K): the grouped raster
 * over the binding's tiles (sm90_rt_counts), the k tiles [0, hk_kt). */
static void sm90_decode_tile_rt(cuda_b *b, const sm90_plan *p) {
  int GM = p->GM;
  cuda_decl(b, "const int", "bz", NULL, "tile / (hk_tm * hk_tn)");
  cuda_decl(b, "const int", "r", NULL, "tile % (hk_tm * hk_tn)");
  cuda_decl(b, "const int", "grp", NULL, cuda_fmt(b, "r / (%d * hk_tn)", GM));
  cuda_decl(b, "const int", "fm", NULL, cuda_fmt(b, "grp * %d", GM));
  cuda_decl(b, "const int", "gsz", NULL, cuda_fmt(b, "hk_tm - fm < %d ? hk_tm - fm : %d", GM, GM));
  cuda_decl(b, "const int", "tm", NULL, cuda_fmt(b, "fm + (r %% (%d * hk_tn)) %% gsz", GM));
  cuda_decl(b, "const int", "tn", NULL, cuda_fmt(b, "(r %% (%d * hk_tn)) / gsz", GM));
  cuda_decl(b, "const int", "b0", NULL, "bz / hk_nb1");
  cuda_decl(b, "const int", "b1", NULL, "bz % hk_nb1");
  cuda_decl(b, "const int", "kt0", NULL, "0");
  cuda_decl(b, "const int", "kt1", NULL, "hk_kt");
  cuda_call(b, "(void)b0; (void)b1; (void)tn");
}

/* Decodes the loop variable tile into the split-K slice ks, the grouped
 * raster's tile row tm and column tn, the batch indices b0, b1 (of s's
 * batch) and the k-tile range [kt0, kt1) of p's slices. */
static void sm90_decode_tile(cuda_b *b, const cuda_gemm_spec *s, const sm90_plan *p) {
  if (p->Mt) {
    sm90_decode_tile_rt(b, p);
    return;
  }
  long long TM = p->TM, TN = p->TN, GM = p->GM, KT = p->KT, kt_per = p->kt_per;
  cuda_decl(b, "const int", "ks", NULL, cuda_fmt(b, "tile %% %d", p->splitk));
  cuda_decl(b, "const int", "t1", NULL, cuda_fmt(b, "tile / %d", p->splitk));
  cuda_decl(b, "const int", "bz", NULL, cuda_fmt(b, "t1 / %lld", TM * TN));
  cuda_decl(b, "const int", "r", NULL, cuda_fmt(b, "t1 %% %lld", TM * TN));
  cuda_decl(b, "const int", "grp", NULL, cuda_fmt(b, "r / %lld", GM * TN));
  cuda_decl(b, "const int", "fm", NULL, cuda_fmt(b, "grp * %d", p->GM));
  cuda_decl(b, "const int", "gsz", NULL, cuda_fmt(b, "%lld - fm < %d ? %lld - fm : %d", TM, p->GM, TM, p->GM));
  cuda_decl(b, "const int", "tm", NULL, cuda_fmt(b, "fm + (r %% %lld) %% gsz", GM * TN));
  cuda_decl(b, "const int", "tn", NULL, cuda_fmt(b, "(r %% %lld) / gsz", GM * TN));
  cuda_decl(b, "const int", "b0", NULL, cuda_fmt(b, "bz / %lld", (long long)s->batch[1]));
  cuda_decl(b, "const int", "b1", NULL, cuda_fmt(b, "bz %% %lld", (long long)s->batch[1]));
  cuda_decl(b, "const int", "kt0", NULL, cuda_fmt(b, "ks * %lld", kt_per));
  cuda_decl(b, "const int", "kt1", NULL, cuda_fmt(b, "kt0 + %lld < %lld ? kt0 + %lld : %lld", kt_per, KT, kt_per, KT));
  cuda_call(b, "(void)b0; (void)b1; (void)tn");
}

/* The producer warpgroup: drops to 40 registers; thread 0 walks the tiles
 * and, per k tile, waits for a free stage and TMA-loads A and B (one box if
 * B is K-major, BN/64 panels if not) into it. */
static void sm90_producer(cuda_b *b, const cuda_gemm_spec *s, const sm90_plan *p) {
  long long stage = p->stage, a_bytes = p->a_bytes;
  cuda_stmt *sr = cuda_emit(b, CU_SETMAXNREG);
  sr->i[0] = 40, sr->i[1] = 0;
  cuda_if(b, "tid == 0");
  cuda_decl(b, "int", "it", NULL, "0");
  cuda_for_step(b, "tile", "blockIdx.x", p->Mt ? "hk_ntiles" : cuda_fmt(b, "%lld", (long long)p->ntiles), "gridDim.x", 1);
  sm90_decode_tile(b, s, p);
  cuda_for(b, "kt", "kt0", "kt1", 1);
  cuda_decl(b, "const int", "st", NULL, cuda_fmt(b, "it %% %d", p->S));
  cuda_decl(b, "const int", "ph", NULL, cuda_fmt(b, "(it / %d) & 1", p->S));
  cuda_emit_s(b, CU_MBAR_WAIT, "empty0 + st * 8", "ph ^ 1", NULL, NULL);
  cuda_emit_s(b, CU_MBAR_EXPECT_TX, "full0 + st * 8", cuda_fmt(b, "%lld", stage), NULL, NULL);
  cuda_stmt *tl = cuda_emit_s(b, CU_TMA_LOAD, cuda_fmt(b, "hk_sb + st * %lld", stage), "tmA",
                              cuda_fmt(b, "kt * %d, tm * %d, %s, %s", p->BK, p->BM, p->ca[0], p->ca[1]), "full0 + st * 8");
  tl->i[0] = 4;
  if (p->bkm) {
    tl = cuda_emit_s(b, CU_TMA_LOAD, cuda_fmt(b, "hk_sb + st * %lld + %lld", stage, a_bytes), "tmB",
                     cuda_fmt(b, "kt * %d, tn * %d, %s, %s", p->BK, p->BN, p->cb[0], p->cb[1]), "full0 + st * 8");
    tl->i[0] = 4;
  } else {
    cuda_for(b, "p", "0", cuda_fmt(b, "%d", p->BN / 64), -1);
    tl = cuda_emit_s(b, CU_TMA_LOAD, cuda_fmt(b, "hk_sb + st * %lld + %lld + p * 8192", stage, a_bytes), "tmB",
                     cuda_fmt(b, "tn * %d + p * 64, kt * %d, %s, %s", p->BN, p->BK, p->cb[0], p->cb[1]), "full0 + st * 8");
    tl->i[0] = 4;
    cuda_close(b);
  }
  cuda_assign(b, "it", "it + 1");
  cuda_close(b); /* kt */
  cuda_close(b); /* tile */
  cuda_close(b); /* tid == 0 */
}

/* A consumer's k loop over [kt0, kt1): per k tile wait for its stage, issue
 * four wgmma k steps of a_dtype (of s) on acc, keep one tile's MMAs in
 * flight and release the previous tile's stage; then drain the last. */
static void sm90_consumer_kloop(cuda_b *b, const cuda_gemm_spec *s, const sm90_plan *p) {
  long long stage = p->stage, a_bytes = p->a_bytes;
  int S = p->S;
  cuda_for(b, "kt", "kt0", "kt1", 1);
  cuda_decl(b, "const int", "st", NULL, cuda_fmt(b, "it %% %d", S));
  cuda_decl(b, "const int", "ph", NULL, cuda_fmt(b, "(it / %d) & 1", S));
  cuda_emit_s(b, CU_MBAR_WAIT, "full0 + st * 8", "ph", NULL, NULL);
  const char *pin = cuda_fmt(b, "hk_wgmma_fence_acc<%d>(&acc[0][0][0])", p->BN / 2);
  cuda_call(b, pin);
  cuda_emit(b, CU_WGMMA_FENCE);
  cuda_for(b, "kk", "0", "4", -1);
  cuda_decl(b, "const hk_u64", "da", NULL, cuda_fmt(b, "hk_gdesc(hk_sb + st * %lld + cw * 8192 + kk * 32, 16, 1024)", stage));
  if (p->bkm)
    cuda_decl(b, "const hk_u64", "db", NULL, cuda_fmt(b, "hk_gdesc(hk_sb + st * %lld + %lld + kk * 32, 16, 1024)", stage, a_bytes));
  else
    cuda_decl(b, "const hk_u64", "db", NULL,
              cuda_fmt(b, "hk_gdesc(hk_sb + st * %lld + %lld + kk * 2048, 8192, 1024)", stage, a_bytes));
  cuda_stmt *wm = cuda_emit_s(b, CU_WGMMA, "&acc[0][0][0]", "da", "db", "1");
  wm->i[0] = 64, wm->i[1] = p->BN, wm->i[2] = p->tf32 ? 8 : 16, wm->i[3] = !p->bkm;
  wm->dtype = s->a_dtype;
  cuda_close(b); /* kk */
  cuda_emit(b, CU_WGMMA_COMMIT);
  /* keep this k tile's MMAs in flight while the next one issues: wait for
   * the previous tile's group only, then release its stage */
  cuda_emit(b, CU_WGMMA_WAIT)->i[0] = 1;
  cuda_call(b, pin);
  cuda_if(b, "kt > kt0");
  cuda_emit_s(b, CU_MBAR_ARRIVE, cuda_fmt(b, "empty0 + ((it + %d) %% %d) * 8", S - 1, S), NULL, NULL, NULL);
  cuda_close(b);
  cuda_assign(b, "it", "it + 1");
  cuda_close(b); /* kt */
  /* the last tile's MMAs, then its stage */
  cuda_emit(b, CU_WGMMA_WAIT)->i[0] = 0;
  cuda_call(b, cuda_fmt(b, "hk_wgmma_fence_acc<%d>(&acc[0][0][0])", p->BN / 2));
  cuda_if(b, "kt1 > kt0");
  cuda_emit_s(b, CU_MBAR_ARRIVE, cuda_fmt(b, "empty0 + ((it + %d) %% %d) * 8", S - 1, S), NULL, NULL, NULL);
  cuda_close(b);
}

/* Size z as C text, or the constant v (a ShapeSet build's sizes). */
static const char *rt_or(cuda_b *b, const cuda_rtsz *z, int64_t v) {
  return z->n ? cuda_rtsz_text(b, z) : cuda_fmt(b, "%lldL", (long long)v);
}

/* The Epilogue statement of s's fused ops on the accumulator registers
 * (in split-K only slice 0 adds them); its op list lives in m's arena. */
static void sm90_epilogue(cuda_b *b, cuda_module *m, const cuda_gemm_spec *s, const sm90_plan *p) {
  if (p->splitk > 1) cuda_if(b, "ks == 0"); /* one slice adds the bias / residual */
  cuda_stmt *ep = cuda_emit_s(b, CU_EPILOGUE, "acc", "row0", "col0", p->Mt ? p->Mt : cuda_fmt(b, "%lld", (long long)s->M));
  ep->s[4] = p->Nt ? p->Nt : cuda_fmt(b, "%lld", (long long)s->N);
  ep->i[0] = 1, ep->i[1] = p->BN / 8;
  ep->dtype = s->c_dtype;
  const char *ptr[CUDA_MAX_EPI] = {0};
  for (int i = 0; i < s->n_epi && i < CUDA_MAX_EPI; i++) {
    const cuda_epi *x = &s->epi[i];
    if (x->kind == CUDA_EPI_BIAS_M || x->kind == CUDA_EPI_BIAS_N) ptr[i] = cuda_fmt(b, "ep%d", i);
    else if (x->kind == CUDA_EPI_RESIDUAL && p->Mt) /* a ShapeSet build: its batch strides may be formulas */
      ptr[i] = cuda_fmt(b, "(ep%d + (hk_i64)b0 * %s + (hk_i64)b1 * %s)", i, rt_or(b, &s->rt_epi[i][0], x->s_b0),
                        rt_or(b, &s->rt_epi[i][1], x->s_b1));
    else if (x->kind == CUDA_EPI_RESIDUAL)
      ptr[i] = cuda_fmt(b, "(ep%d + (hk_i64)b0 * %lld + (hk_i64)b1 * %lld)", i, (long long)x->s_b0, (long long)x->s_b1);
  }
  cuda_epi_attach(b, ep, s->epi, ptr, s->n_epi);
  for (int i = 0; p->Mt && i < ep->nepi; i++) /* a residual's row and column strides at run time */
    ep->epi[i].s_m_t = cuda_rtsz_text(b, &s->rt_epi[i][2]), ep->epi[i].s_n_t = cuda_rtsz_text(b, &s->rt_epi[i][3]);
  if (p->splitk > 1) cuda_close(b);
}

/* Split-K store of the raw partial sums: red.global.add.f32 per element
 * into C of s, or (p->reduce) a store into this slice's part of C. */
static void sm90_store_splitk(cuda_b *b, const cuda_gemm_spec *s, const sm90_plan *p) {
  cuda_for(b, "j", "0", cuda_fmt(b, "%d", p->BN / 8), -1);
  cuda_for(b, "q", "0", "4", -1);
  cuda_decl(b, "const int", "hk_r", NULL, "row0 + (lane >> 2) + (q >> 1) * 8");
  cuda_decl(b, "const int", "hk_c", NULL, "col0 + j * 8 + (lane & 3) * 2 + (q & 1)");
  const char *ptr = cuda_fmt(b, "C + (hk_i64)b0 * %lld + (hk_i64)b1 * %lld + (hk_i64)hk_r * %lld + hk_c", (long long)s->c_sb[0],
                             (long long)s->c_sb[1], (long long)s->c_sm);
  const char *ok = cuda_fmt(b, "hk_r < %lld && hk_c < %lld", (long long)s->M, (long long)s->N);
  if (p->reduce)
    cuda_emit_s(b, CU_ST_GLOBAL_VEC, cuda_fmt(b, "%s + (hk_i64)ks * %lld", ptr, (long long)s->c_ss), "hk_f2u(acc[0][j][q])", ok,
                NULL)->i[0] = 4;
  else cuda_emit_s(b, CU_ATOMIC_ADD, ptr, "acc[0][j][q]", ok, NULL);
  cuda_close(b);
  cuda_close(b);
}

/* The tile store: p->CW columns at a time, registers -> the SMEM staging
 * tile at p->c_off (once the previous TMA store has read it) -> one TMA
 * store of c_dtype (of s) by thread 128. */
static void sm90_store_tma(cuda_b *b, const cuda_gemm_spec *s, const sm90_plan *p) {
  int CW = p->CW, osz = p->osz;
  cuda_comment(b, cuda_fmt(b, "registers -> SMEM staging (after the previous TMA store has read it) -> TMA store, %d columns at a time", CW));
  cuda_for(b, "cq", "0", cuda_fmt(b, "%d", p->BN / CW), -1);
  cuda_if(b, "tid == 128");
  cuda_call(b, "hk_bulk_wait_read0()");
  cuda_close(b);
  cuda_call(b, "hk_bar_named(1, 256)");
  cuda_for(b, "j", "0", cuda_fmt(b, "%d", CW / 8), -1);
  cuda_for(b, "h", "0", "2", -1);
  cuda_decl(b, "const int", "rl", NULL, "cw * 64 + wiw * 16 + (lane >> 2) + h * 8");
  cuda_decl(b, "const int", "cl", NULL, "j * 8 + (lane & 3) * 2");
  cuda_decl(b, "const int", "ja", NULL, cuda_fmt(b, "cq * %d + j", CW / 8));
  const char *dst = cuda_fmt(b, "hk_sb + %lld + (rl * %d + cl) * %d", (long long)p->c_off, CW, osz);
  cuda_store_acc_pair(b, CU_ST_SHARED, dst, "acc[0][ja]", s->c_dtype, osz);
  cuda_close(b);
  cuda_close(b);
  cuda_emit(b, CU_FENCE_PROXY_ASYNC);
  cuda_call(b, "hk_bar_named(1, 256)");
  cuda_if(b, "tid == 128");
  cuda_stmt *ts = cuda_emit_s(b, CU_TMA_STORE, "tmC", cuda_fmt(b, "hk_sb + %lld", (long long)p->c_off),
                              cuda_fmt(b, "tn * %d + cq * %d, tm * %d, b1, b0", p->BN, CW, p->BM), NULL);
  ts->i[0] = 4;
  cuda_call(b, "hk_bulk_commit()");
  cuda_close(b);
  cuda_close(b); /* cq */
}

/* The consumer warpgroups: raise to 232 registers; per tile zero acc, run
 * the k loop, apply s's epilogue and store (split-K or through TMA). */
static void sm90_consumers(cuda_b *b, cuda_module *m, const cuda_gemm_spec *s, const sm90_plan *p) {
  cuda_stmt *sr = cuda_emit(b, CU_SETMAXNREG);
  sr->i[0] = 232, sr->i[1] = 1;
  cuda_decl(b, "const int", "cw", NULL, "wg - 1");
  cuda_decl(b, "const int", "wiw", NULL, "(tid >> 5) & 3");
  cuda_decl(b, "const int", "lane", NULL, "tid & 31");
  cuda_decl(b, "float", "acc", cuda_fmt(b, "[1][%d][4]", p->BN / 8), NULL);
  cuda_decl(b, "int", "it", NULL, "0");
  cuda_for_step(b, "tile", "blockIdx.x", p->Mt ? "hk_ntiles" : cuda_fmt(b, "%lld", (long long)p->ntiles), "gridDim.x", 1);
  sm90_decode_tile(b, s, p);
  cuda_for(b, "j", "0", cuda_fmt(b, "%d", p->BN / 8), -1);
  cuda_assign(b, "acc[0][j][0]", "0.0f");
  cuda_assign(b, "acc[0][j][1]", "0.0f");
  cuda_assign(b, "acc[0][j][2]", "0.0f");
  cuda_assign(b, "acc[0][j][3]", "0.0f");
  cuda_close(b);
  sm90_consumer_kloop(b, s, p);
  /* epilogue on the accumulator registers */
  cuda_decl(b, "const int", "row0", NULL, cuda_fmt(b, "tm * %d + cw * 64 + wiw * 16", p->BM));
  cuda_decl(b, "const int", "col0", NULL, cuda_fmt(b, "tn * %d", p->BN));
  if (s->n_epi) sm90_epilogue(b, m, s, p);
  if (p->splitk > 1) sm90_store_splitk(b, s, p);
  else sm90_store_tma(b, s, p);
  cuda_close(b); /* tile */
  cuda_if(b, "tid == 128");
  cuda_call(b, "hk_bulk_wait_read0()");
  cuda_close(b);
}

/* A ShapeSet build (s->nsyms > 0): p's size texts from s's formulas (or
 * its constants) and the run-time dims and strides of the maps tm; false
 * when a map's size takes more than 8 symbols. */
static bool sm90_rt_plan(cuda_b *b, const cuda_gemm_spec *s, sm90_plan *p, cuda_tmap_desc *tm) {
  p->Mt = rt_or(b, &s->rt_m, s->M), p->Nt = rt_or(b, &s->rt_n, s->N), p->Kt = rt_or(b, &s->rt_k, s->K);
  p->B0t = rt_or(b, &s->rt_b[0], s->batch[0]), p->B1t = rt_or(b, &s->rt_b[1], s->batch[1]);
  return cuda_sm90_tmaps_rt(s, tm);
}

harp_status cuda_sm90_gemm(harp_error *e, cuda_module *m, const cuda_gemm_spec *s, const char *name) {
  char why[160];
  if (!cuda_sm90_gemm_ok(s, why, sizeof why)) return unsupported(e, name, why);
  const cuda_tune *t = &s->tune;
  sm90_plan p = {0};
  harp_status st = sm90_plan_sizes(e, s, name, &p);
  if (st != HARP_OK) return st;
  if (s->own < 0 || (s->own && !s->nsyms)) return unsupported(e, name, "the wgmma kernel of a pair serves the aligned bindings");
  if (s->nsyms && (p.splitk > 1 || (!s->own && !cuda_sm90_rt_aligned(s))))
    return unsupported(e, name, p.splitk > 1 ? "split-K with sizes read at run time"
                                             : "a TMA stride read at run time is not 16-byte aligned at every binding "
                                               "(the wgmma kernel of a pair serves the aligned ones)");
  cuda_b bb, *b = &bb;
  cuda_kernel *k = cuda_kernel_new(b, m, e, name, "wgmma_gemm");
  if (!k) return e->code;
  /* persistent: one CTA per SM (the launch reads the device's count; an
   * H100 SXM5's 132 here); the tile loop is correct for any grid */
  int64_t grid = t->persistent ? (p.ntiles < CUDA_DEFAULT_SMS ? p.ntiles : CUDA_DEFAULT_SMS) : p.ntiles;
  if (t->persistent) k->persistent_tiles = p.ntiles;
  k->grid[0] = grid;
  k->block[0] = 384;
  k->min_blocks = 1;
  k->smem_bytes = p.smem;
  cuda_tmap_desc *tm = ut_arena_alloc(m->arena, sizeof(cuda_tmap_desc) * 3);
  if (!tm) return ut_fail(e, HARP_E_NO_MEMORY, name, "out of memory");
  sm90_tmaps(s, &p, tm);
  if (s->nsyms && !sm90_rt_plan(b, s, &p, tm)) return unsupported(e, name, "a tensor map's size takes more than 8 symbols");
  sm90_params_meta(b, k, s, &p, tm);
  if (!cuda_own_guard(b, k, s)) return ut_fail(e, HARP_E_NO_MEMORY, name, "out of memory");
  sm90_prologue(b, &p);
  cuda_if(b, "wg == 0");
  sm90_producer(b, s, &p);
  cuda_else(b);
  sm90_consumers(b, m, s, &p);
  cuda_close(b); /* consumers */
  return cuda_b_finish(b, k);
}
