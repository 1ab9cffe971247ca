/* cuda_front.c — the GEMM and conv front ends of the MMA template: specs,
 * their checks, the problem (cuda_mma_prob) each becomes, split-K's
 * finishing pass; SM90 plans go to cuda_sm90.c.
 * Needs: cuda_mma.c (cuda_mma_emit, cuda_mma_emit_finish), cuda_sm90.c.
 * Gives: cuda_gemm_spec_init, cuda_tune_fill_mma, cuda_gemm_slices,
 * cuda_splitk_check, cuda_gen_gemm, cuda_gen_gemm_finish,
 * cuda_conv_spec_init, cuda_conv_out_hw, cuda_conv_checks, cuda_gen_conv,
 * cuda_gen_conv_finish. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda.h"
#include "backend/cuda/cuda_int.h"

/* ---- GEMM and conv front ends -------------------------------------------------- */
void cuda_gemm_spec_init(cuda_gemm_spec *s, int64_t M, int64_t N, int64_t K, tiny_dtype dt) {
  memset(s, 0, sizeof *s);
  s->batch[0] = s->batch[1] = 1;
  s->M = M, s->N = N, s->K = K;
  s->a_dtype = s->b_dtype = s->c_dtype = dt;
  s->a_sm = K, s->a_sk = 1;
  s->b_sk = N, s->b_sn = 1;
  s->c_sm = N, s->c_sn = 1;
  s->a_sb[0] = s->a_sb[1] = M * K;
  s->b_sb[0] = s->b_sb[1] = K * N;
  s->c_sb[0] = s->c_sb[1] = M * N;
  cuda_tune_default(&s->tune, CUDA_SM80);
}

/* Fill the tile fields left at 0 from the problem size.  SIMT: warp tiles
 * are 32x64 (the plan's are not), BK 32; fp32 on the tensor cores: BK 16
 * (64-byte rows, 48 KB for 128x128 and 3 stages).  H200, 4096^3: TF32
 * 128x128 with 64x64 warps ran 140 TFLOP/s at BK 16 (0.37x cuBLAS TF32), 105
 * at BK 32; SIMT 0.80x cuBLAS SGEMM at BK 32, 0.78 at 16, 0.71 at 8. */
void cuda_tune_fill_mma(cuda_tune *t, int64_t M, int64_t N, tiny_dtype c_dtype, cuda_mmode mode) {
  bool big = M >= 128 && N >= 128;
  if (!t->bm) t->bm = big ? 128 : 64;
  if (!t->bn) t->bn = big ? 128 : 64;
  if (!t->bk) t->bk = mode == CUDA_MM_SIMT ? 32 : mode == CUDA_MM_MMA16 ? 32 : 16;
  if (!t->stages) t->stages = 3;
  if (mode == CUDA_MM_SIMT) t->warp_m = 32, t->warp_n = 64;
  if (!t->warp_m) t->warp_m = t->bm >= 128 ? 64 : 32;
  if (!t->warp_n) t->warp_n = t->bn >= 128 ? 64 : 32;
  if (!t->vec) t->vec = 16 / tiny_dtype_size(c_dtype);
}

/* How fp32 operands compute under `math` (16-bit operands: their MMA). */
static void mma_mode(tiny_dtype ab, cuda_math math, cuda_mmode *mode, tiny_dtype *mma_dt) {
  *mma_dt = ab;
  if (ab != TINY_FP32) *mode = CUDA_MM_MMA16;
  else if (math == CUDA_MATH_FP32) *mode = CUDA_MM_SIMT;
  else if (math == CUDA_MATH_FP16 || math == CUDA_MATH_BF16) {
    *mode = CUDA_MM_CVT16;
    *mma_dt = math == CUDA_MATH_BF16 ? TINY_BF16 : TINY_FP16;
  } else *mode = CUDA_MM_TF32;
}

static harp_status check_epi(harp_error *e, const char *name, const cuda_epi *epi, int n) {
  if (n < 0 || n > CUDA_MAX_EPI) return ut_fail(e, HARP_E_LIMIT, name, "%d epilogue ops (at most %d)", n, CUDA_MAX_EPI);
  for (int i = 0; i < n; i++) {
    if ((unsigned)epi[i].kind >= CUDA_EPI_COUNT) return ut_fail(e, HARP_E_INVALID_ARG, name, "unknown epilogue op %d", epi[i].kind);
    bool has = epi[i].kind == CUDA_EPI_BIAS_M || epi[i].kind == CUDA_EPI_BIAS_N || epi[i].kind == CUDA_EPI_RESIDUAL;
    if (has && epi[i].dtype != TINY_FP16 && epi[i].dtype != TINY_BF16 && epi[i].dtype != TINY_FP32)
      return ut_fail(e, HARP_E_UNSUPPORTED, name, "epilogue %s of dtype %s", cuda_epi_name(epi[i].kind),
                     tiny_dtype_name(epi[i].dtype));
    if (epi[i].kind == CUDA_EPI_ROUND && epi[i].dtype != TINY_FP16 && epi[i].dtype != TINY_BF16)
      return ut_fail(e, HARP_E_INVALID_ARG, name, "epilogue round to %s (fp16 or bf16)", tiny_dtype_name(epi[i].dtype));
    if (epi[i].kind == CUDA_EPI_CLAMP && (isnan(epi[i].lo) || isnan(epi[i].hi)))
      return ut_fail(e, HARP_E_INVALID_ARG, name, "a clamp bound is NaN");
  }
  return HARP_OK;
}

static harp_status check_ab_dtypes(harp_error *e, const char *name, tiny_dtype a, tiny_dtype b2, tiny_dtype c, cuda_math math) {
  if ((a != TINY_FP16 && a != TINY_BF16 && a != TINY_FP32) || a != b2)
    return ut_fail(e, HARP_E_UNSUPPORTED, name, "the MMA template takes fp16, bf16 or fp32 operands of one dtype, got %s x %s",
                   tiny_dtype_name(a), tiny_dtype_name(b2));
  if ((unsigned)math >= CUDA_MATH_COUNT) return ut_fail(e, HARP_E_INVALID_ARG, name, "unknown math %d", (int)math);
  if (c != TINY_FP16 && c != TINY_BF16 && c != TINY_FP32)
    return ut_fail(e, HARP_E_UNSUPPORTED, name, "output dtype %s (fp16, bf16 or fp32)", tiny_dtype_name(c));
  return HARP_OK;
}

harp_status cuda_sm90_gemm(harp_error *e, cuda_module *m, const cuda_gemm_spec *s, const char *name);

int cuda_gemm_slices(const cuda_gemm_spec *s) {
  if (s->tune.splitk <= 1) return 1;
  bool simt = s->a_dtype == TINY_FP32 && s->math == CUDA_MATH_FP32;
  int64_t bk = s->tune.arch == CUDA_SM90 ? 128 / tiny_dtype_size(s->a_dtype) /* cuda_sm90.c: 128-byte rows */
               : s->tune.bk ? s->tune.bk : simt || s->a_dtype != TINY_FP32 ? 32 : 16; /* cuda_tune_fill_mma */
  int64_t kt = (s->K + bk - 1) / bk;
  return (int)(s->tune.splitk < kt ? s->tune.splitk : kt);
}

static harp_status gemm_checks(harp_error *e, cuda_module *m, const cuda_gemm_spec *s, const char *name) {
  if (!cuda_arch_runs_on(s->tune.arch, m->arch))
    return ut_fail(e, HARP_E_INVALID_ARG, name, "plan arch %s in a %s module", cuda_arch_name(s->tune.arch),
                   cuda_arch_name(m->arch));
  if (s->M < 1 || s->N < 1 || s->K < 1 || s->batch[0] < 1 || s->batch[1] < 1)
    return ut_fail(e, HARP_E_INVALID_ARG, name, "GEMM sizes must be >= 1");
  if (s->M > INT32_MAX / 2 || s->N > INT32_MAX / 2 || s->K > INT32_MAX / 2)
    return ut_fail(e, HARP_E_LIMIT, name, "GEMM dimension beyond 2^30");
  int64_t st[] = {s->a_sb[0], s->a_sb[1], s->a_sm, s->a_sk, s->b_sb[0], s->b_sb[1], s->b_sk, s->b_sn,
                  s->c_sb[0], s->c_sb[1], s->c_sm, s->c_sn};
  for (int i = 0; i < UT_ARRAY_LEN(st); i++)
    if (st[i] < 0) return ut_fail(e, HARP_E_NEGATIVE_STRIDE, name, "negative stride");
  if (check_ab_dtypes(e, name, s->a_dtype, s->b_dtype, s->c_dtype, s->math)) return e->code;
  return check_epi(e, name, s->epi, s->n_epi);
}

/* The split-K kinds' demands on C and the epilogue (both templates). */
harp_status cuda_splitk_check(harp_error *e, const cuda_gemm_spec *s, const char *name) {
  if (s->tune.splitk <= 1) return HARP_OK;
  if ((unsigned)s->tune.splitk_kind > CUDA_SPLITK_SERIAL) return ut_fail(e, HARP_E_INVALID_ARG, name, "unknown split-K kind");
  if (s->tune.splitk_kind == CUDA_SPLITK_SERIAL) return HARP_OK;
  if (s->c_dtype != TINY_FP32)
    return ut_fail(e, HARP_E_UNSUPPORTED, name, "%s writes fp32 partial sums: C must be the fp32 workspace",
                   cuda_splitk_name(s->tune.splitk_kind));
  if (s->tune.splitk_kind == CUDA_SPLITK_REDUCE && (s->n_epi || s->c_ss < 1))
    return ut_fail(e, HARP_E_INVALID_ARG, name, "splitk_reduce: no epilogue (the finishing pass applies it) and a slice stride c_ss >= 1");
  /* slice 0 alone applies the epilogue to its partial: only a sum distributes that way */
  for (int i = 0; i < s->n_epi; i++)
    if ((s->epi[i].kind != CUDA_EPI_BIAS_M && s->epi[i].kind != CUDA_EPI_BIAS_N && s->epi[i].kind != CUDA_EPI_RESIDUAL) ||
        s->epi[i].mul)
      return ut_fail(e, HARP_E_UNSUPPORTED, name, "split-K with the epilogue %s%s, not an add (run it in the finishing pass)",
                     s->epi[i].mul ? "x " : "", cuda_epi_name(s->epi[i].kind));
  return HARP_OK;
}

/* Size z as C text (hp_sv<i> * .. * lit), or NULL when it is a constant. */
const char *cuda_rtsz_text(cuda_b *b, const cuda_rtsz *z) {
  if (!z->n) return NULL;
  const char *t = "";
  for (int i = 0; i < z->n; i++) t = cuda_fmt(b, "%shp_sv%d * ", t, z->sym[i]);
  return cuda_fmt(b, "(%s%lldL)", t, (long long)z->lit);
}

/* Stride *v read at run time as z says: *t its text, *v its literal factor
 * (what divides it at every binding: the chunk widths and store pairs). */
static void rt_stride(cuda_b *b, const cuda_rtsz *z, int64_t *v, const char **t) {
  if (!z->n) return;
  *t = cuda_rtsz_text(b, z);
  *v = z->lit;
}

/* The batches of spec s (batch[0] x batch[1], either read at run time:
 * rt_b) in problem p: the batch bases of A, B, C from the batch index bz
 * and their strides (rt_sb), the guard of the batches at run time (NZt);
 * sb the strides' literal factors. */
static void gemm_rt_batch(cuda_b *b, const cuda_gemm_spec *s, cuda_mma_prob *p, int64_t sb[3][2]) {
  const char *b0 = s->rt_b[0].n ? cuda_rtsz_text(b, &s->rt_b[0]) : cuda_fmt(b, "%lldL", (long long)s->batch[0]);
  const char *b1 = s->rt_b[1].n ? cuda_rtsz_text(b, &s->rt_b[1]) : cuda_fmt(b, "%lldL", (long long)s->batch[1]);
  if (s->rt_b[0].n || s->rt_b[1].n) p->NZt = cuda_fmt(b, "%s * %s", b0, b1);
  const char *z = cuda_fmt(b, "(hk_i64)(bz / %s)", b1), *z1 = cuda_fmt(b, "(hk_i64)(bz %% %s)", b1);
  const int64_t *v[3] = {s->a_sb, s->b_sb, s->c_sb};
  const char **base[3] = {&p->a_base, &p->b_base, &p->c_base};
  for (int o = 0; o < 3; o++) {
    const char *st[2] = {NULL, NULL};
    for (int i = 0; i < 2; i++) {
      sb[o][i] = v[o][i];
      rt_stride(b, &s->rt_sb[o][i], &sb[o][i], &st[i]);
    }
    *base[o] = cuda_fmt(b, "%s * %s + %s * %s", z, st[0] ? st[0] : cuda_fmt(b, "%lld", (long long)sb[o][0]), z1,
                        st[1] ? st[1] : cuda_fmt(b, "%lld", (long long)sb[o][1]));
  }
  for (int i = 0; i < s->n_epi; i++) { /* a residual's batch strides: constants or read at run time (rt_epi) */
    if (s->epi[i].kind != CUDA_EPI_RESIDUAL) continue;
    const char *e0 = cuda_rtsz_text(b, &s->rt_epi[i][0]), *e1 = cuda_rtsz_text(b, &s->rt_epi[i][1]);
    p->epi_ptr[i] = cuda_fmt(b, "(ep%d + %s * %s + %s * %s)", i, z, e0 ? e0 : cuda_fmt(b, "%lld", (long long)s->epi[i].s_b0), z1,
                             e1 ? e1 : cuda_fmt(b, "%lld", (long long)s->epi[i].s_b1));
  }
}

/* A ShapeSet build's run-time sizes and strides of spec s in problem p (its
 * operands' layouts chosen at the binding); the chunk widths from what
 * divides the strides at every binding.  True when out of memory. */
static bool gemm_rt(cuda_b *b, const cuda_gemm_spec *s, cuda_mma_prob *p) {
  p->nsyms = s->nsyms;
  p->Mt = cuda_rtsz_text(b, &s->rt_m), p->Nt = cuda_rtsz_text(b, &s->rt_n), p->Kt = cuda_rtsz_text(b, &s->rt_k);
  if (s->n_text) p->Nt = cuda_fmt(b, "%s", s->n_text);
  rt_stride(b, &s->rt_st[0], &p->A.s_mn, &p->A.s_mn_t);
  rt_stride(b, &s->rt_st[1], &p->A.s_k, &p->A.s_k_t);
  rt_stride(b, &s->rt_st[2], &p->B.s_k, &p->B.s_k_t);
  rt_stride(b, &s->rt_st[3], &p->B.s_mn, &p->B.s_mn_t);
  rt_stride(b, &s->rt_st[4], &p->c_sm, &p->c_sm_t);
  rt_stride(b, &s->rt_st[5], &p->c_sn, &p->c_sn_t);
  int esz = tiny_dtype_size(s->a_dtype);
  int64_t sb[3][2] = {{0, 0}, {0, 0}, {0, 0}}; /* the batch strides' literal factors (one batch: its bases are 0) */
  if (p->nz > 1 || s->rt_b[0].n || s->rt_b[1].n) gemm_rt_batch(b, s, p, sb);
  else p->a_base = p->b_base = p->c_base = "0";
  if (p->A.vec) p->A.vec = cuda_chunk_elems_esz(p->A.kmajor ? p->A.s_mn : p->A.s_k, sb[0], 2, esz);
  if (p->B.vec) p->B.vec = cuda_chunk_elems_esz(p->B.kmajor ? p->B.s_mn : p->B.s_k, sb[1], 2, esz);
  p->c_zmul = sb[2][0] % 2 == 0 && sb[2][1] % 2 == 0 ? (sb[2][0] % 8 == 0 && sb[2][1] % 8 == 0 ? 8 : 2) : 1;
  for (int i = 0; i < s->n_epi; i++) {
    if (s->epi[i].kind != CUDA_EPI_RESIDUAL) continue;
    if (p->nz == 1) p->epi_ptr[i] = cuda_fmt(b, "ep%d", i);
    p->epi_st_t[i][0] = cuda_rtsz_text(b, &s->rt_epi[i][2]), p->epi_st_t[i][1] = cuda_rtsz_text(b, &s->rt_epi[i][3]);
  }
  return b->oom;
}

/* The MMA problem of a GEMM spec (the batch bases as C text in bz). */
static harp_status gemm_prob(harp_error *e, cuda_module *m, const cuda_gemm_spec *s, const char *name, cuda_mma_prob *pp) {
  cuda_mma_prob p;
  memset(&p, 0, sizeof p);
  p.kind = "mma_gemm";
  p.M = s->M, p.N = s->N, p.K = s->K, p.nz = s->batch[0] * s->batch[1];
  p.ab_dtype = s->a_dtype, p.c_dtype = s->c_dtype;
  mma_mode(s->a_dtype, s->math, &p.mode, &p.mma_dtype);
  int esz = tiny_dtype_size(s->a_dtype);
  p.pname[0] = "A", p.pname[1] = "B", p.pname[2] = "C";
  /* A: K-major when k is contiguous, else M-major (m contiguous). */
  if (s->a_sk == 1) p.A = (cuda_mma_opnd){.kmajor = true, .s_mn = s->a_sm, .s_k = 1};
  else if (s->a_sm == 1) p.A = (cuda_mma_opnd){.kmajor = false, .s_mn = 1, .s_k = s->a_sk};
  else p.A = (cuda_mma_opnd){.kmajor = true, .s_mn = s->a_sm, .s_k = s->a_sk};
  if (s->b_sn == 1) p.B = (cuda_mma_opnd){.kmajor = false, .s_mn = 1, .s_k = s->b_sk};
  else if (s->b_sk == 1) p.B = (cuda_mma_opnd){.kmajor = true, .s_mn = s->b_sn, .s_k = 1};
  else p.B = (cuda_mma_opnd){.kmajor = false, .s_mn = s->b_sn, .s_k = s->b_sk};
  bool a_contig = p.A.kmajor ? p.A.s_k == 1 : p.A.s_mn == 1;
  bool b_contig = p.B.kmajor ? p.B.s_k == 1 : p.B.s_mn == 1;
  /* chunk size: the other stride and the batch strides must keep chunks 2^n-aligned */
  p.A.vec = a_contig ? cuda_chunk_elems_esz(p.A.kmajor ? s->a_sm : s->a_sk, s->a_sb, 2, esz) : 0;
  p.B.vec = b_contig ? cuda_chunk_elems_esz(p.B.kmajor ? s->b_sn : s->b_sk, s->b_sb, 2, esz) : 0;
  p.c_sm = s->c_sm, p.c_sn = s->c_sn;
  p.c_zmul = s->c_sb[0] % 2 == 0 && s->c_sb[1] % 2 == 0 ? (s->c_sb[0] % 8 == 0 && s->c_sb[1] % 8 == 0 ? 8 : 2) : 1;
  cuda_b tb = {.a = m->arena};
  const char *z = cuda_fmt(&tb, "(hk_i64)(bz / %lld)", (long long)s->batch[1]);
  const char *z1 = cuda_fmt(&tb, "(hk_i64)(bz %% %lld)", (long long)s->batch[1]);
  p.a_base = cuda_fmt(&tb, "%s * %lld + %s * %lld", z, (long long)s->a_sb[0], z1, (long long)s->a_sb[1]);
  p.b_base = cuda_fmt(&tb, "%s * %lld + %s * %lld", z, (long long)s->b_sb[0], z1, (long long)s->b_sb[1]);
  p.c_base = cuda_fmt(&tb, "%s * %lld + %s * %lld", z, (long long)s->c_sb[0], z1, (long long)s->c_sb[1]);
  p.n_epi = s->n_epi;
  for (int i = 0; i < s->n_epi; i++) {
    p.epi[i] = s->epi[i];
    const cuda_epi *ep = &s->epi[i];
    if (ep->kind == CUDA_EPI_BIAS_M || ep->kind == CUDA_EPI_BIAS_N) p.epi_ptr[i] = cuda_fmt(&tb, "ep%d", i);
    else if (ep->kind == CUDA_EPI_RESIDUAL)
      p.epi_ptr[i] = cuda_fmt(&tb, "(ep%d + %s * %lld + %s * %lld)", i, z, (long long)ep->s_b0, z1, (long long)ep->s_b1);
  }
  if (tb.oom) return ut_fail(e, HARP_E_NO_MEMORY, name, "out of memory");
  p.c_ss = s->c_ss;
  p.tune = s->tune;
  if (s->nsyms && s->tune.arch == CUDA_SM90) return ut_fail(e, HARP_E_UNSUPPORTED, name, "sizes read at run time: the SM80 template");
  if (s->nsyms && gemm_rt(&tb, s, &p)) return ut_fail(e, HARP_E_NO_MEMORY, name, "out of memory");
  if (s->own && (s->own > 0 || s->tune.splitk > 1 || !s->nsyms))
    return ut_fail(e, HARP_E_INVALID_ARG, name, "the SM80 kernel of a pair serves the unaligned bindings, without split-K");
  p.pair = s->own ? s : NULL;
  cuda_tune_fill_mma(&p.tune, s->M, s->N, s->c_dtype, p.mode);
  *pp = p;
  return HARP_OK;
}

harp_status cuda_gen_gemm(harp_error *e, cuda_module *m, const cuda_gemm_spec *s, const char *name) {
  if (gemm_checks(e, m, s, name) || cuda_splitk_check(e, s, name)) return e->code;
  if (s->tune.arch == CUDA_SM90) return cuda_sm90_gemm(e, m, s, name);
  cuda_mma_prob p;
  if (gemm_prob(e, m, s, name, &p)) return e->code;
  return cuda_mma_emit(e, m, &p, name);
}

harp_status cuda_gen_gemm_finish(harp_error *e, cuda_module *m, const cuda_gemm_spec *s, const char *name) {
  if (gemm_checks(e, m, s, name)) return e->code;
  if (s->tune.splitk <= 1 || s->tune.splitk_kind == CUDA_SPLITK_SERIAL)
    return ut_fail(e, HARP_E_INVALID_ARG, name, "a finishing pass is for splitk_parallel / splitk_reduce");
  cuda_gemm_spec f = *s;
  f.tune.arch = CUDA_SM80;
  f.tune.splitk = 0;
  f.own = 0;
  cuda_mma_prob p;
  if (gemm_prob(e, m, &f, name, &p)) return e->code;
  return cuda_mma_emit_finish(e, m, &p, s->tune.splitk_kind == CUDA_SPLITK_REDUCE ? cuda_gemm_slices(s) : 1, name);
}

void cuda_conv_spec_init(cuda_conv_spec *s, int64_t n, int64_t c, int64_t h, int64_t w, int64_t oc, int64_t kh,
                         int64_t kw, tiny_dtype dt) {
  memset(s, 0, sizeof *s);
  s->n = n, s->c = c, s->h = h, s->w = w, s->oc = oc, s->kh = kh, s->kw = kw;
  s->stride[0] = s->stride[1] = 1;
  s->dil[0] = s->dil[1] = 1;
  s->groups = 1;
  s->x_dtype = s->w_dtype = s->y_dtype = dt;
  cuda_tune_default(&s->tune, CUDA_SM80);
}

bool cuda_conv_out_hw(const cuda_conv_spec *s, int64_t *oh, int64_t *ow) {
  int64_t eh = s->dil[0] * (s->kh - 1) + 1, ew = s->dil[1] * (s->kw - 1) + 1;
  int64_t ph = s->h + s->pad[0] + s->pad[2], pw = s->w + s->pad[1] + s->pad[3];
  if (s->stride[0] < 1 || s->stride[1] < 1 || ph < eh || pw < ew) return false;
  *oh = (ph - eh) / s->stride[0] + 1;
  *ow = (pw - ew) / s->stride[1] + 1;
  return true;
}

/* The checks of conv spec s (the conv kernel, its finishing pass, the
 * Winograd kernels); *oh, *ow its output size. */
harp_status cuda_conv_checks(harp_error *e, cuda_module *m, const cuda_conv_spec *s, const char *name, int64_t *oh_, int64_t *ow_) {
  if (!cuda_arch_runs_on(s->tune.arch, m->arch))
    return ut_fail(e, HARP_E_INVALID_ARG, name, "plan arch %s in a %s module", cuda_arch_name(s->tune.arch),
                   cuda_arch_name(m->arch));
  if (s->tune.arch == CUDA_SM90)
    return ut_fail(e, HARP_E_UNSUPPORTED, name, "conv on the SM90 template (use an sm80 plan: the SM80 template runs on sm_90)");
  if (s->n < 1 || s->c < 1 || s->h < 1 || s->w < 1 || s->oc < 1 || s->kh < 1 || s->kw < 1 || s->groups < 1 ||
      s->dil[0] < 1 || s->dil[1] < 1)
    return ut_fail(e, HARP_E_INVALID_ARG, name, "conv sizes must be >= 1");
  for (int i = 0; i < 4; i++)
    if (s->pad[i] < 0) return ut_fail(e, HARP_E_INVALID_ARG, name, "negative padding");
  if (s->c % s->groups || s->oc % s->groups)
    return ut_fail(e, HARP_E_INVALID_ARG, name, "groups %lld does not divide channels %lld / %lld", (long long)s->groups,
                   (long long)s->c, (long long)s->oc);
  if (!cuda_conv_out_hw(s, oh_, ow_)) return ut_fail(e, HARP_E_INVALID_ARG, name, "the conv window does not fit the input");
  if (check_ab_dtypes(e, name, s->w_dtype, s->x_dtype, s->y_dtype, s->math)) return e->code;
  if (check_epi(e, name, s->epi, s->n_epi)) return e->code;
  int64_t cg = s->c / s->groups, K = cg * s->kh * s->kw, N = *oh_ * *ow_;
  if (s->n * s->c * s->h * s->w > ((int64_t)1 << 40) || K > INT32_MAX / 2 || N > INT32_MAX / 2)
    return ut_fail(e, HARP_E_LIMIT, name, "conv too large");
  return HARP_OK;
}

/* A ShapeSet build's run-time images, height and width of conv s in problem
 * p (pointwise: B is the input itself): the output's size from them as C
 * text, the pixel decode, the input's bounds and strides, the batch bases;
 * a chunk width or a store pair from what divides them at every binding
 * (s->ws_hi: C is a workspace laid out at the box's corner hi, its base
 * and row stride kept constant).  True when out of memory. */
static bool conv_rt(cuda_b *b, const cuda_conv_spec *s, cuda_mma_prob *p, bool pointwise) {
  const char *n = s->rt_n.n ? cuda_rtsz_text(b, &s->rt_n) : cuda_fmt(b, "%lldL", (long long)s->n);
  const char *h = s->rt_h.n ? cuda_rtsz_text(b, &s->rt_h) : cuda_fmt(b, "%lldL", (long long)s->h);
  const char *w = s->rt_w.n ? cuda_rtsz_text(b, &s->rt_w) : cuda_fmt(b, "%lldL", (long long)s->w);
  int64_t eh = s->dil[0] * (s->kh - 1) + 1, ew = s->dil[1] * (s->kw - 1) + 1, G = s->groups, cg = s->c / G, ocg = s->oc / G;
  const char *oh = cuda_fmt(b, "((%s + %lld) / %lld + 1)", h, (long long)(s->pad[0] + s->pad[2] - eh), (long long)s->stride[0]);
  const char *ow = cuda_fmt(b, "((%s + %lld) / %lld + 1)", w, (long long)(s->pad[1] + s->pad[3] - ew), (long long)s->stride[1]);
  const char *np = cuda_fmt(b, "(%s * %s)", oh, ow), *hw = cuda_fmt(b, "(%s * %s)", h, w);
  p->nsyms = s->nsyms;
  if (s->rt_n.n) p->NZt = cuda_fmt(b, "%s * %lld", n, (long long)G);
  if (s->rt_h.n || s->rt_w.n) {
    p->Nt = np;
    if (!s->ws_hi) p->c_sm = 1, p->c_sm_t = np; /* the pixels' count: no store pairs */
    if (pointwise) {
      p->B.s_k = 1, p->B.s_k_t = hw;
      if (p->B.vec) p->B.vec = cuda_chunk_elems_esz(1, NULL, 0, tiny_dtype_size(s->x_dtype));
    } else {
      p->B.cv_h_t = h, p->B.cv_w_t = w, p->B.cv_ow_t = ow;
    }
  }
  const char *img = cuda_fmt(b, "(hk_i64)(bz / %lld)", (long long)G), *grp = cuda_fmt(b, "(hk_i64)(bz %% %lld)", (long long)G);
  p->b_base = cuda_fmt(b, "%s * %lld * %s + %s * %lld * %s", img, (long long)s->c, hw, grp, (long long)cg, hw);
  if (!s->ws_hi) { /* y at the binding (a workspace at hi: conv_prob's constant base and strides) */
    p->c_base = cuda_fmt(b, "%s * %lld * %s + %s * %lld * %s", img, (long long)s->oc, np, grp, (long long)ocg, np);
    p->c_zmul = ocg % 8 == 0 ? 8 : ocg % 2 == 0 ? 2 : 1; /* every batch offset: a multiple of ocg */
  }
  for (int i = 0; i < s->n_epi; i++) { /* a residual laid out like y: its row stride the pixels' count too */
    if (s->epi[i].kind != CUDA_EPI_RESIDUAL) continue;
    p->epi_ptr[i] = cuda_fmt(b, "(ep%d + %s)", i, p->c_base);
    if (s->rt_h.n || s->rt_w.n) p->epi_st_t[i][0] = np;
  }
  return b->oom;
}

/* The MMA problem of conv spec s (checked; output oh x ow): per (image,
 * group) the GEMM [OC/G x OH*OW] over C/G*KH*KW, B gathered through the
 * window (a 1x1 stride-1 unpadded conv reads the input as it is). */
static harp_status conv_prob(harp_error *e, cuda_module *m, const cuda_conv_spec *s, const char *name, int64_t oh, int64_t ow,
                             cuda_mma_prob *pp, bool *pointwise_) {
  int64_t cg = s->c / s->groups, ocg = s->oc / s->groups, K = cg * s->kh * s->kw, N = oh * ow;
  cuda_mma_prob p;
  memset(&p, 0, sizeof p);
  p.kind = "mma_conv";
  p.M = ocg, p.N = N, p.K = K, p.nz = s->n * s->groups;
  p.ab_dtype = s->w_dtype, p.c_dtype = s->y_dtype;
  mma_mode(s->w_dtype, s->math, &p.mode, &p.mma_dtype);
  int esz = tiny_dtype_size(s->w_dtype);
  p.pname[0] = "w", p.pname[1] = "x", p.pname[2] = "y";
  int64_t gsb[1] = {ocg * K};
  p.A = (cuda_mma_opnd){.kmajor = true, .s_mn = K, .s_k = 1};
  p.A.vec = cuda_chunk_elems_esz(K, gsb, 1, esz);
  bool pointwise = s->kh == 1 && s->kw == 1 && s->stride[0] == 1 && s->stride[1] == 1 && !s->pad[0] && !s->pad[1] &&
                   !s->pad[2] && !s->pad[3];
  if (pointwise) { /* 1x1: B is the input itself, [c][h*w] */
    int64_t xsb[2] = {s->c * s->h * s->w, cg * s->h * s->w};
    p.B = (cuda_mma_opnd){.kmajor = false, .s_mn = 1, .s_k = s->h * s->w};
    p.B.vec = cuda_chunk_elems_esz(s->h * s->w, xsb, 2, esz);
  } else {
    p.B = (cuda_mma_opnd){.kmajor = false, .conv = true};
    p.B.cv = (cuda_conv_geom){.h = s->h, .w = s->w, .kh = s->kh, .kw = s->kw, .oh = oh, .ow = ow, .sh = s->stride[0],
                              .sw = s->stride[1], .pt = s->pad[0], .pl = s->pad[1], .dh = s->dil[0], .dw = s->dil[1]};
    p.B.vec = 0;
  }
  p.c_sm = N, p.c_sn = 1;
  p.c_zmul = (ocg * N) % 8 == 0 ? 8 : (ocg * N) % 2 == 0 ? 2 : 1;
  cuda_b tb = {.a = m->arena};
  const char *img = cuda_fmt(&tb, "(hk_i64)(bz / %lld)", (long long)s->groups);
  const char *grp = cuda_fmt(&tb, "(hk_i64)(bz %% %lld)", (long long)s->groups);
  p.a_base = cuda_fmt(&tb, "%s * %lld", grp, (long long)(ocg * K));
  p.b_base = cuda_fmt(&tb, "%s * %lld + %s * %lld", img, (long long)(s->c * s->h * s->w), grp,
                      (long long)(cg * s->h * s->w));
  p.c_base = cuda_fmt(&tb, "%s * %lld + %s * %lld", img, (long long)(s->oc * N), grp, (long long)(ocg * N));
  p.n_epi = s->n_epi;
  for (int i = 0; i < s->n_epi; i++) {
    p.epi[i] = s->epi[i];
    switch (s->epi[i].kind) {
    case CUDA_EPI_BIAS_M: p.epi_ptr[i] = cuda_fmt(&tb, "(ep%d + %s * %lld)", i, grp, (long long)ocg); break;
    case CUDA_EPI_BIAS_N: p.epi_ptr[i] = cuda_fmt(&tb, "ep%d", i); break;
    case CUDA_EPI_RESIDUAL:
      p.epi[i].s_m = N, p.epi[i].s_n = 1;
      p.epi_ptr[i] = cuda_fmt(&tb, "(ep%d + %s)", i, p.c_base);
      break;
    default: break;
    }
  }
  if (tb.oom) return ut_fail(e, HARP_E_NO_MEMORY, name, "out of memory");
  p.tune = s->tune;
  if (s->nsyms && conv_rt(&tb, s, &p, pointwise)) return ut_fail(e, HARP_E_NO_MEMORY, name, "out of memory");
  cuda_tune_fill_mma(&p.tune, p.M, p.N, s->y_dtype, p.mode);
  *pp = p;
  *pointwise_ = pointwise;
  return HARP_OK;
}

harp_status cuda_gen_conv(harp_error *e, cuda_module *m, const cuda_conv_spec *s, const char *name) {
  int64_t oh, ow;
  cuda_mma_prob p;
  bool pointwise;
  if (s->tune.winograd) return ut_fail(e, HARP_E_INVALID_ARG, name, "a Winograd tuning (cuda_gen_conv_wino runs it)");
  if (cuda_conv_checks(e, m, s, name, &oh, &ow) || conv_prob(e, m, s, name, oh, ow, &p, &pointwise)) return e->code;
  harp_status st = cuda_mma_emit(e, m, &p, name);
  if (st == HARP_OK) {
    cuda_kernel *k = m->k[m->n - 1];
    cuda_meta_str(k, "algo_choice.conv", "implicit_gemm");
    cuda_meta_str(k, "B_gather", pointwise ? "dense (1x1)" : "conv access map, pad -> zero fill");
  }
  return st;
}

harp_status cuda_gen_conv_finish(harp_error *e, cuda_module *m, const cuda_conv_spec *s, const char *name) {
  if (s->tune.splitk <= 1 || s->tune.splitk_kind != CUDA_SPLITK_ATOMIC)
    return ut_fail(e, HARP_E_INVALID_ARG, name, "a conv's finishing pass is for splitk_parallel");
  cuda_conv_spec f = *s;
  f.tune.arch = CUDA_SM80;
  f.tune.splitk = 0;
  int64_t oh, ow;
  cuda_mma_prob p;
  bool pointwise;
  if (cuda_conv_checks(e, m, &f, name, &oh, &ow) || conv_prob(e, m, &f, name, oh, ow, &p, &pointwise)) return e->code;
  return cuda_mma_emit_finish(e, m, &p, 1, name);
}
