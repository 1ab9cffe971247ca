/* cuda_print.c — the GPU dialect printed as CUDA C with inline PTX.
 * Needs: cuda.h.  Gives: cuda_print.
 *
 * The translation unit starts with a prelude of hk_* device helpers, each a
 * few lines of inline PTX (no header is included: NVRTC compiles the text as
 * it is).  The prelude is guarded by #ifndef HK_SIM: the CPU SIMT simulator
 * of the tests (tests/cuda_sim/hk_sim.h) defines the same helpers as
 * emulations from the PTX ISA, so the kernel bodies it runs are the very text
 * NVRTC compiles.  After each kernel, under #ifdef HK_SIM, a thunk
 * hk_thunk_<name>(void **params) unpacks cuLaunchKernel-style parameters. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda.h"

/* The SM80 part of the prelude.  Register conventions follow the PTX ISA
 * (9.7.14.5.8 mma.m16n8k16 fragments; 9.7.14.5.15 ldmatrix): a fragment
 * register holds two 16-bit elements, the lower column index in the low half. */
static const char prelude_common[] =
    "#ifndef HK_TYPES\n"
    "#define HK_TYPES\n"
    "typedef unsigned short hk_u16;\n"
    "typedef unsigned int hk_u32;\n"
    "typedef unsigned long long hk_u64;\n"
    "typedef long long hk_i64;\n"
    "struct hk_v2 { hk_u32 x, y; };\n"
    "struct hk_v4 { hk_u32 x, y, z, w; };\n"
    "struct __align__(64) hk_tmap { hk_u64 v[16]; }; /* CUtensorMap: 128 opaque bytes */\n"
    "#endif\n"
    "#ifndef HK_SIM\n"
    "#define HK_DEV __device__ __forceinline__ /* inline, not static: no unused warnings */\n"
    "#define HK_SMEM_DECL(name) extern __shared__ __align__(128) unsigned char name[]\n"
    "typedef hk_u32 hk_saddr; /* a .shared state-space address */\n"
    "HK_DEV hk_saddr hk_smem_addr(const void *p) {\n"
    "  hk_u32 a; asm volatile(\"{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }\" : \"=r\"(a) : \"l\"(p)); return a; }\n"
    "HK_DEV void hk_sync() { __syncthreads(); }\n"
    "HK_DEV float hk_u2f(hk_u32 u) { float f; asm(\"mov.b32 %0, %1;\" : \"=f\"(f) : \"r\"(u)); return f; }\n"
    "HK_DEV hk_u32 hk_f2u(float f) { hk_u32 u; asm(\"mov.b32 %0, %1;\" : \"=r\"(u) : \"f\"(f)); return u; }\n"
    /* conversions (round to nearest even) */
    "HK_DEV float hk_h2f(hk_u16 h) { float f; asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(f) : \"h\"(h)); return f; }\n"
    "HK_DEV float hk_bf2f(hk_u16 h) { return hk_u2f((hk_u32)h << 16); }\n"
    "HK_DEV hk_u16 hk_f2h(float f) { hk_u16 h; asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(f)); return h; }\n"
    "HK_DEV hk_u16 hk_f2bf(float f) { hk_u16 h; asm(\"cvt.rn.bf16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(f)); return h; }\n"
    "HK_DEV float hk_f2f(float f) { return f; }\n"
    "HK_DEV int hk_f2i(float f) { return f != f ? 0 : f >= 2147483647.0f ? 2147483647 : f <= -2147483648.0f ? (int)0x80000000 : (int)f; }\n"
    "HK_DEV unsigned char hk_f2u8(float f) { return f != 0.0f; }\n"
    "HK_DEV hk_u32 hk_pack_h2(float lo, float hi) { return (hk_u32)hk_f2h(lo) | ((hk_u32)hk_f2h(hi) << 16); }\n"
    "HK_DEV hk_u32 hk_pack_bf2(float lo, float hi) { return (hk_u32)hk_f2bf(lo) | ((hk_u32)hk_f2bf(hi) << 16); }\n"
    /* global memory */
    "HK_DEV float hk_ldf_f16(const hk_u16 *p) { return hk_h2f(*p); }\n"
    "HK_DEV float hk_ldf_bf16(const hk_u16 *p) { return hk_bf2f(*p); }\n"
    "HK_DEV float hk_ldf_f32(const float *p) { return *p; }\n"
    "HK_DEV float hk_ldf_i32(const int *p) { return (float)*p; }\n"
    "HK_DEV float hk_ldf_u8(const unsigned char *p) { return (float)*p; }\n"
    "HK_DEV hk_u16 hk_ldg16(const void *p, bool ok) { hk_u16 v = 0; if (ok) v = *(const hk_u16 *)p; return v; }\n"
    "HK_DEV hk_u32 hk_ldg32(const void *p, bool ok) { hk_u32 v = 0; if (ok) v = *(const hk_u32 *)p; return v; }\n"
    "HK_DEV hk_v4 hk_ldg128(const void *p, bool ok) { hk_v4 v = {0, 0, 0, 0};\n"
    "  if (ok) asm volatile(\"ld.global.v4.u32 {%0,%1,%2,%3}, [%4];\" : \"=r\"(v.x), \"=r\"(v.y), \"=r\"(v.z), \"=r\"(v.w) : \"l\"(p)); return v; }\n"
    "HK_DEV void hk_stg16(void *p, hk_u16 v) { asm volatile(\"st.global.b16 [%0], %1;\" :: \"l\"(p), \"h\"(v) : \"memory\"); }\n"
    "HK_DEV void hk_stg32(void *p, hk_u32 v) { asm volatile(\"st.global.b32 [%0], %1;\" :: \"l\"(p), \"r\"(v) : \"memory\"); }\n"
    "HK_DEV void hk_stg64(void *p, hk_v2 v) { asm volatile(\"st.global.v2.b32 [%0], {%1,%2};\" :: \"l\"(p), \"r\"(v.x), \"r\"(v.y) : \"memory\"); }\n"
    "HK_DEV void hk_stg128(void *p, hk_v4 v) { asm volatile(\"st.global.v4.b32 [%0], {%1,%2,%3,%4};\" :: \"l\"(p), \"r\"(v.x), \"r\"(v.y), \"r\"(v.z), \"r\"(v.w) : \"memory\"); }\n"
    "HK_DEV void hk_stg8(void *p, unsigned char v) { *(unsigned char *)p = v; }\n"
    "HK_DEV void hk_red_add_f32(float *p, float v) { asm volatile(\"red.global.add.f32 [%0], %1;\" :: \"l\"(p), \"f\"(v) : \"memory\"); }\n"
    /* split-K serial: a per-tile flag, acquired by one thread before the CTA reads the running sum, released after it is written */
    "HK_DEV void hk_flag_wait(const int *p, int v) { int x;\n"
    "  do { asm volatile(\"ld.acquire.gpu.global.b32 %0, [%1];\" : \"=r\"(x) : \"l\"(p) : \"memory\"); } while (x != v); }\n"
    "HK_DEV void hk_flag_set(int *p, int v) { asm volatile(\"st.release.gpu.global.b32 [%0], %1;\" :: \"l\"(p), \"r\"(v) : \"memory\"); }\n"
    "HK_DEV void hk_fence_gpu() { asm volatile(\"fence.acq_rel.gpu;\" ::: \"memory\"); }\n"
    /* shared memory */
    "HK_DEV void hk_sts16(hk_saddr a, hk_u16 v) { asm volatile(\"st.shared.b16 [%0], %1;\" :: \"r\"(a), \"h\"(v) : \"memory\"); }\n"
    "HK_DEV void hk_sts32(hk_saddr a, hk_u32 v) { asm volatile(\"st.shared.b32 [%0], %1;\" :: \"r\"(a), \"r\"(v) : \"memory\"); }\n"
    "HK_DEV void hk_sts64(hk_saddr a, hk_v2 v) { asm volatile(\"st.shared.v2.b32 [%0], {%1,%2};\" :: \"r\"(a), \"r\"(v.x), \"r\"(v.y) : \"memory\"); }\n"
    "HK_DEV void hk_sts128(hk_saddr a, hk_v4 v) { asm volatile(\"st.shared.v4.b32 [%0], {%1,%2,%3,%4};\" :: \"r\"(a), \"r\"(v.x), \"r\"(v.y), \"r\"(v.z), \"r\"(v.w) : \"memory\"); }\n"
    "HK_DEV hk_u32 hk_lds32(hk_saddr a) { hk_u32 v; asm volatile(\"ld.shared.b32 %0, [%1];\" : \"=r\"(v) : \"r\"(a) : \"memory\"); return v; }\n"
    "HK_DEV hk_v2 hk_lds64(hk_saddr a) { hk_v2 v; asm volatile(\"ld.shared.v2.b32 {%0,%1}, [%2];\" : \"=r\"(v.x), \"=r\"(v.y) : \"r\"(a) : \"memory\"); return v; }\n"
    "HK_DEV hk_v4 hk_lds128(hk_saddr a) { hk_v4 v; asm volatile(\"ld.shared.v4.b32 {%0,%1,%2,%3}, [%4];\" : \"=r\"(v.x), \"=r\"(v.y), \"=r\"(v.z), \"=r\"(v.w) : \"r\"(a) : \"memory\"); return v; }\n"
    /* cp.async: src_bytes < size zero-fills the rest (PTX ISA 9.7.9.25.3.1) */
    "HK_DEV void hk_cp_async16(hk_saddr d, const void *s, int n) { asm volatile(\"cp.async.cg.shared.global [%0], [%1], 16, %2;\" :: \"r\"(d), \"l\"(s), \"r\"(n) : \"memory\"); }\n"
    "HK_DEV void hk_cp_async8(hk_saddr d, const void *s, int n) { asm volatile(\"cp.async.ca.shared.global [%0], [%1], 8, %2;\" :: \"r\"(d), \"l\"(s), \"r\"(n) : \"memory\"); }\n"
    "HK_DEV void hk_cp_async4(hk_saddr d, const void *s, int n) { asm volatile(\"cp.async.ca.shared.global [%0], [%1], 4, %2;\" :: \"r\"(d), \"l\"(s), \"r\"(n) : \"memory\"); }\n"
    "HK_DEV void hk_cp_commit() { asm volatile(\"cp.async.commit_group;\" ::: \"memory\"); }\n"
    "template <int N> HK_DEV void hk_cp_wait() { asm volatile(\"cp.async.wait_group %0;\" :: \"n\"(N) : \"memory\"); }\n"
    /* ldmatrix */
    "HK_DEV void hk_ldsm_x4(hk_u32 *d, hk_saddr a) { asm volatile(\"ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\" : \"=r\"(d[0]), \"=r\"(d[1]), \"=r\"(d[2]), \"=r\"(d[3]) : \"r\"(a)); }\n"
    "HK_DEV void hk_ldsm_x4_t(hk_u32 *d, hk_saddr a) { asm volatile(\"ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\" : \"=r\"(d[0]), \"=r\"(d[1]), \"=r\"(d[2]), \"=r\"(d[3]) : \"r\"(a)); }\n"
    "HK_DEV void hk_ldsm_x2(hk_u32 *d, hk_saddr a) { asm volatile(\"ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\" : \"=r\"(d[0]), \"=r\"(d[1]) : \"r\"(a)); }\n"
    "HK_DEV void hk_ldsm_x2_t(hk_u32 *d, hk_saddr a) { asm volatile(\"ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\" : \"=r\"(d[0]), \"=r\"(d[1]) : \"r\"(a)); }\n"
    /* mma.sync m16n8k16, D = A x B + C in place on the fp32 accumulators */
    "HK_DEV void hk_mma16816_f16(float *c, const hk_u32 *a, const hk_u32 *b) {\n"
    "  asm volatile(\"mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\"\n"
    "    : \"+f\"(c[0]), \"+f\"(c[1]), \"+f\"(c[2]), \"+f\"(c[3]) : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"r\"(b[0]), \"r\"(b[1])); }\n"
    "HK_DEV void hk_mma16816_bf16(float *c, const hk_u32 *a, const hk_u32 *b) {\n"
    "  asm volatile(\"mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\"\n"
    "    : \"+f\"(c[0]), \"+f\"(c[1]), \"+f\"(c[2]), \"+f\"(c[3]) : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"r\"(b[0]), \"r\"(b[1])); }\n"
    /* mma.sync m16n8k8 .tf32: a{0..3} = A rows g, g+8, g, g+8 at k t, t, t+4, t+4; b{0,1} = B k t, t+4 at n g
     * (PTX ISA 9.7.14.5.7); each register one fp32 pattern, of which the tensor core reads the top 19 bits */
    "HK_DEV void hk_mma1688_tf32(float *c, const hk_u32 *a, const hk_u32 *b) {\n"
    "  asm volatile(\"mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\"\n"
    "    : \"+f\"(c[0]), \"+f\"(c[1]), \"+f\"(c[2]), \"+f\"(c[3]) : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"r\"(b[0]), \"r\"(b[1])); }\n"
    "HK_DEV float hk_fma(float a, float b, float c) { return fmaf(a, b, c); }\n"
    /* warp shuffles */
    "HK_DEV float hk_shfl_xor(float v, int m) { float r; asm volatile(\"shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;\" : \"=f\"(r) : \"f\"(v), \"r\"(m)); return r; }\n"
    "HK_DEV float hk_shfl_idx(float v, int src) { float r; asm volatile(\"shfl.sync.idx.b32 %0, %1, %2, 0x1f, 0xffffffff;\" : \"=f\"(r) : \"f\"(v), \"r\"(src)); return r; }\n"
    "HK_DEV int hk_shfl_xor(int v, int m) { int r; asm volatile(\"shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;\" : \"=r\"(r) : \"r\"(v), \"r\"(m)); return r; }\n"
    /* math: exp through ex2.approx (rel. error ~2^-22), the rest from libdevice */
    "HK_DEV float hk_exp2(float x) { float y; asm(\"ex2.approx.ftz.f32 %0, %1;\" : \"=f\"(y) : \"f\"(x)); return y; }\n"
    "HK_DEV float hk_exp(float x) { return hk_exp2(x * 1.44269504088896341f); }\n"
    "HK_DEV float hk_log2(float x) { return log2f(x); }\n"
    "HK_DEV float hk_sqrt(float x) { return sqrtf(x); }\n"
    "HK_DEV float hk_erf(float x) { return erff(x); }\n"
    "#endif /* HK_SIM */\n"
    /* Helpers common to both: pure arithmetic on the ones above. */
    "#define HK_INF hk_u2f(0x7f800000u)\n"
    "HK_DEV float hk_relu(float x) { return x < 0.0f ? 0.0f : x; }\n"
    "HK_DEV float hk_gelu(float x) { return 0.5f * x * (1.0f + hk_erf(x * 0.70710678118654752f)); }\n"
    "HK_DEV float hk_sigmoid(float x) { return 1.0f / (1.0f + hk_exp(-x)); }\n"
    "HK_DEV float hk_silu(float x) { return x / (1.0f + hk_exp(-x)); }\n"
    "HK_DEV float hk_fmax(float a, float b) { return (a != a || b != b) ? a + b : (a > b ? a : b); }\n"
    "HK_DEV float hk_fadd(float a, float b) { return a + b; }\n"
    "HK_DEV float hk_fmin(float a, float b) { return (a != a || b != b) ? a + b : (a < b ? a : b); }\n"
    /* fp32 -> TF32, to nearest with ties away from zero (CUTLASS's round_half_ulp_truncate): half a TF32
     * ulp added to the bits the tensor core drops; Inf and NaN as they are */
    "HK_DEV hk_u32 hk_tf32(hk_u32 u) { return fabsf(hk_u2f(u)) < HK_INF ? u + 0x1000u : u; } /* FSETP + IADD */\n";

/* ---- printing helpers -------------------------------------------------------- */
typedef struct pr {
  ut_str *o;
  int ind;
} pr;

static void line(pr *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void line(pr *p, const char *fmt, ...) {
  for (int i = 0; i < p->ind; i++) ut_str_puts(p->o, "  ");
  char buf[4096];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (n < (int)sizeof buf) {
    ut_str_puts(p->o, buf);
  } else { /* long expression: format again into the string */
    char *big = ut_xmalloc((size_t)n + 1);
    if (!big) {
      p->o->oom = true;
      return;
    }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    ut_str_puts(p->o, big);
    free(big);
  }
  ut_str_putc(p->o, '\n');
}

/* A float literal that C++ reads back exactly (inf/nan through bit patterns). */
static void flit(char *buf, size_t cap, double v) {
  float f = (float)v;
  if (isnan(f)) {
    snprintf(buf, cap, "hk_u2f(0x7fc00000u)");
    return;
  }
  if (isinf(f)) {
    snprintf(buf, cap, f > 0 ? "HK_INF" : "(-HK_INF)");
    return;
  }
  char t[48];
  snprintf(t, sizeof t, "%.9g", (double)f);
  bool dot = strpbrk(t, ".e") != NULL;
  snprintf(buf, cap, "%s%sf", t, dot ? "" : ".0");
}

static int bits_of(int64_t bytes) { return (int)(bytes * 8); }

static void print_stmt(pr *p, const cuda_stmt *st);

static void print_body(pr *p, cuda_stmt *const *list, int n) {
  p->ind++;
  for (int i = 0; i < n; i++) print_stmt(p, list[i]);
  p->ind--;
}

/* One epilogue op on hk_v0 / hk_v1 at (hk_r, hk_c), (hk_r, hk_c + 1).  A
 * tensor step adds, or multiplies (.mul); outside the bounds it applies its
 * identity (the value is not stored there). */
static void print_epi_op(pr *p, const cuda_epi_ir *ep, const char *m_lim, const char *n_lim) {
  const char *ld = ep->ptr ? cuda_ld_fn(ep->e.dtype) : NULL;
  const char *ct = ep->ptr ? cuda_ctype(ep->e.dtype) : NULL;
  const char *op = ep->e.mul ? "*=" : "+=", *id = ep->e.mul ? "1.0f" : "0.0f";
  char f[64], t[64];
  switch (ep->e.kind) {
  case CUDA_EPI_BIAS_M:
    line(p, "{ const float hk_b = hk_r < (%s) ? %s((const %s *)(%s) + hk_r) : %s; hk_v0 %s hk_b; hk_v1 %s hk_b; }", m_lim,
         ld, ct, ep->ptr, id, op, op);
    break;
  case CUDA_EPI_BIAS_N:
    line(p, "hk_v0 %s hk_c < (%s) ? %s((const %s *)(%s) + hk_c) : %s;", op, n_lim, ld, ct, ep->ptr, id);
    line(p, "hk_v1 %s hk_c + 1 < (%s) ? %s((const %s *)(%s) + hk_c + 1) : %s;", op, n_lim, ld, ct, ep->ptr, id);
    break;
  case CUDA_EPI_RELU: line(p, "hk_v0 = hk_relu(hk_v0); hk_v1 = hk_relu(hk_v1);"); break;
  case CUDA_EPI_GELU: line(p, "hk_v0 = hk_gelu(hk_v0); hk_v1 = hk_gelu(hk_v1);"); break;
  case CUDA_EPI_SILU: line(p, "hk_v0 = hk_silu(hk_v0); hk_v1 = hk_silu(hk_v1);"); break;
  case CUDA_EPI_SIGMOID: line(p, "hk_v0 = hk_sigmoid(hk_v0); hk_v1 = hk_sigmoid(hk_v1);"); break;
  case CUDA_EPI_RINT: line(p, "hk_v0 = rintf(hk_v0); hk_v1 = rintf(hk_v1);"); break;
  case CUDA_EPI_SCALE:
    flit(f, sizeof f, ep->e.scale);
    flit(t, sizeof t, ep->e.shift);
    if (ep->e.shift == 0.0f) line(p, "hk_v0 *= %s; hk_v1 *= %s;", f, f);
    else if (ep->e.scale == 1.0f) line(p, "hk_v0 += %s; hk_v1 += %s;", t, t);
    else line(p, "hk_v0 = hk_v0 * %s + %s; hk_v1 = hk_v1 * %s + %s;", f, t, f, t);
    break;
  case CUDA_EPI_RESIDUAL: /* its strides: constants, or read at run time (s_m_t, s_n_t) */
    snprintf(f, sizeof f, "%lld", (long long)ep->e.s_m);
    snprintf(t, sizeof t, "%lld", (long long)ep->e.s_n);
    line(p, "if (hk_r < (%s) && hk_c < (%s)) hk_v0 %s %s((const %s *)(%s) + (hk_i64)hk_r * %s + (hk_i64)hk_c * %s);", m_lim,
         n_lim, op, ld, ct, ep->ptr, ep->s_m_t ? ep->s_m_t : f, ep->s_n_t ? ep->s_n_t : t);
    line(p, "if (hk_r < (%s) && hk_c + 1 < (%s)) hk_v1 %s %s((const %s *)(%s) + (hk_i64)hk_r * %s + (hk_i64)(hk_c + 1) * %s);",
         m_lim, n_lim, op, ld, ct, ep->ptr, ep->s_m_t ? ep->s_m_t : f, ep->s_n_t ? ep->s_n_t : t);
    break;
  case CUDA_EPI_CLAMP: /* compare-and-select: NaN fails both tests and stays, as the reference's max / min */
    flit(f, sizeof f, ep->e.lo);
    flit(t, sizeof t, ep->e.hi);
    if (isfinite(ep->e.lo)) line(p, "hk_v0 = hk_v0 < %s ? %s : hk_v0; hk_v1 = hk_v1 < %s ? %s : hk_v1;", f, f, f, f);
    if (isfinite(ep->e.hi)) line(p, "hk_v0 = hk_v0 > %s ? %s : hk_v0; hk_v1 = hk_v1 > %s ? %s : hk_v1;", t, t, t, t);
    break;
  case CUDA_EPI_ROUND:
    if (ep->e.dtype == TINY_BF16) line(p, "hk_v0 = hk_bf2f(hk_f2bf(hk_v0)); hk_v1 = hk_bf2f(hk_f2bf(hk_v1));");
    else line(p, "hk_v0 = hk_h2f(hk_f2h(hk_v0)); hk_v1 = hk_h2f(hk_f2h(hk_v1));");
    break;
  default: line(p, "/* unknown epilogue op */"); break;
  }
}

/* Epilogue(acc, row0, col0, m_lim, n_lim[, rows, cols]; mf, nf): acc[mf][nf][4]
 * holds the m16n8 accumulator fragments of a warp tile whose first
 * row/column are row0/col0.  Fragment element c{2h}, c{2h+1} of lane l sits
 * at row (l >> 2) + 8h, columns 2(l & 3) + {0, 1} (PTX ISA, m16n8k16 C/D
 * layout).  Another layout (the SIMT template's) gives `rows` and `cols`:
 * the offsets from row0 / col0 of element [hk_i][hk_j][2 hk_h] as C text
 * (element 2 hk_h + 1 is the next column). */
static void print_epilogue(pr *p, const cuda_stmt *st) {
  line(p, "{ /* Epilogue on the accumulator fragments */");
  p->ind++;
  line(p, "const int hk_g = (threadIdx.x & 31) >> 2, hk_t = threadIdx.x & 3;");
  line(p, "#pragma unroll");
  line(p, "for (int hk_i = 0; hk_i < %lld; ++hk_i)", (long long)st->i[0]);
  line(p, "#pragma unroll");
  line(p, "for (int hk_j = 0; hk_j < %lld; ++hk_j)", (long long)st->i[1]);
  line(p, "#pragma unroll");
  line(p, "for (int hk_h = 0; hk_h < 2; ++hk_h) {");
  p->ind++;
  if (st->s[5]) line(p, "const int hk_r = (%s) + (%s);", st->s[1], st->s[5]); /* another layout (SIMT) */
  else line(p, "const int hk_r = (%s) + hk_i * 16 + hk_g + hk_h * 8;", st->s[1]);
  if (st->s[6]) line(p, "const int hk_c = (%s) + (%s);", st->s[2], st->s[6]);
  else line(p, "const int hk_c = (%s) + hk_j * 8 + hk_t * 2;", st->s[2]);
  line(p, "(void)hk_g; (void)hk_t;");
  line(p, "float hk_v0 = %s[hk_i][hk_j][hk_h * 2], hk_v1 = %s[hk_i][hk_j][hk_h * 2 + 1];", st->s[0], st->s[0]);
  for (int i = 0; i < st->nepi; i++) print_epi_op(p, &st->epi[i], st->s[3], st->s[4]);
  line(p, "%s[hk_i][hk_j][hk_h * 2] = hk_v0; %s[hk_i][hk_j][hk_h * 2 + 1] = hk_v1;", st->s[0], st->s[0]);
  line(p, "(void)hk_r; (void)hk_c;");
  p->ind--;
  line(p, "}");
  p->ind--;
  line(p, "}");
}

/* Prints st when it opens a body (block, for, if / else, long loop);
 * false for any other kind. */
static bool print_control(pr *p, const cuda_stmt *st) {
  const char *const *s = st->s;
  switch (st->kind) {
  case CU_BLOCK: line(p, "{"); break;
  case CU_FOR:
    if (st->i[0] < 0) line(p, "#pragma unroll");
    else if (st->i[0] > 1) line(p, "#pragma unroll %lld", (long long)st->i[0]);
    else if (st->i[0] == 1) line(p, "#pragma unroll 1");
    line(p, "for (int %s = %s; %s < %s; %s += %s) {", s[0], s[1], s[0], s[2], s[0], s[3] ? s[3] : "1");
    break;
  case CU_IF: line(p, "if (%s) {", s[0]); break;
  case CU_LOOP: line(p, "for (long %s = %s; %s; %s += %s) {", s[0], s[1], s[2], s[0], s[3]); break;
  default: return false;
  }
  print_body(p, st->body, st->nbody);
  if (st->kind == CU_IF && st->nels) {
    line(p, "} else {");
    print_body(p, st->els, st->nels);
  }
  line(p, "}");
  return true;
}

/* Prints st when it moves data (cp.async, ld/st global and shared,
 * ldmatrix, atomics, TMA); false for any other kind. */
static bool print_memory(pr *p, const cuda_stmt *st) {
  const char *const *s = st->s;
  switch (st->kind) {
  case CU_CP_ASYNC:
    line(p, "hk_cp_async%lld(%s, %s, %s);", (long long)st->i[0], s[0], s[1], s[2] ? s[2] : (st->i[0] == 16 ? "16" : st->i[0] == 8 ? "8" : "4"));
    break;
  case CU_LD_GLOBAL: line(p, "%s = hk_ldg%d(%s, %s);", s[0], bits_of(st->i[0]), s[1], s[2] ? s[2] : "true"); break;
  case CU_ST_SHARED: line(p, "hk_sts%d(%s, %s);", bits_of(st->i[0]), s[0], s[1]); break;
  case CU_LD_SHARED: line(p, "%s = hk_lds%d(%s);", s[0], bits_of(st->i[0]), s[1]); break;
  case CU_LDMATRIX: line(p, "hk_ldsm_x%lld%s(%s, %s);", (long long)st->i[0], st->i[1] ? "_t" : "", s[0], s[1]); break;
  case CU_ST_GLOBAL_VEC:
    if (s[2]) line(p, "if (%s) hk_stg%d(%s, %s);", s[2], bits_of(st->i[0]), s[0], s[1]);
    else line(p, "hk_stg%d(%s, %s);", bits_of(st->i[0]), s[0], s[1]);
    break;
  case CU_ATOMIC_ADD:
    if (s[2]) line(p, "if (%s) hk_red_add_f32(%s, %s);", s[2], s[0], s[1]);
    else line(p, "hk_red_add_f32(%s, %s);", s[0], s[1]);
    break;
  case CU_TMA_LOAD: line(p, "hk_tma_load_%lldd(%s, &%s, %s, %s);", (long long)st->i[0], s[0], s[1], s[2], s[3]); break;
  case CU_TMA_STORE: line(p, "hk_tma_store_%lldd(&%s, %s, %s);", (long long)st->i[0], s[0], s[1], s[2]); break;
  default: return false;
  }
  return true;
}

/* Prints st when it synchronises or drives the SM90 units (barriers,
 * cp.async groups, mbarriers, wgmma, setmaxnreg, proxy fence); false for
 * any other kind. */
static bool print_sync(pr *p, const cuda_stmt *st) {
  const char *const *s = st->s;
  switch (st->kind) {
  case CU_BARRIER: line(p, "hk_sync();"); break;
  case CU_COMMIT_GROUP: line(p, "hk_cp_commit();"); break;
  case CU_WAIT_GROUP: line(p, "hk_cp_wait<%lld>();", (long long)st->i[0]); break;
  case CU_MBAR_INIT: line(p, "hk_mbar_init(%s, %s);", s[0], s[1]); break;
  case CU_MBAR_EXPECT_TX: line(p, "hk_mbar_arrive_expect_tx(%s, %s);", s[0], s[1]); break;
  case CU_MBAR_ARRIVE: line(p, "hk_mbar_arrive(%s);", s[0]); break;
  case CU_MBAR_WAIT: line(p, "hk_mbar_wait(%s, %s);", s[0], s[1]); break;
  case CU_WGMMA:
    line(p, "hk_wgmma_m64n%lldk%lld_%s%s(%s, %s, %s, %s);", (long long)st->i[1], (long long)st->i[2],
         st->dtype == TINY_BF16 ? "bf16" : st->dtype == TINY_FP32 ? "tf32" : "f16", st->i[3] ? "_tb" : "", s[0], s[1], s[2],
         s[3]);
    break;
  case CU_WGMMA_FENCE: line(p, "hk_wgmma_fence();"); break;
  case CU_WGMMA_COMMIT: line(p, "hk_wgmma_commit();"); break;
  case CU_WGMMA_WAIT: line(p, "hk_wgmma_wait<%lld>();", (long long)st->i[0]); break;
  case CU_SETMAXNREG: line(p, "hk_setmaxnreg_%s<%lld>();", st->i[1] ? "inc" : "dec", (long long)st->i[0]); break;
  case CU_FENCE_PROXY_ASYNC: line(p, "hk_fence_proxy_async();"); break;
  default: return false;
  }
  return true;
}

/* Prints st when it is plain C (declaration, assignment, call, comment
 * with any closing comment mark defused, raw code) or register math (mma,
 * shuffle, epilogue); false for any other kind. */
static bool print_plain(pr *p, const cuda_stmt *st) {
  const char *const *s = st->s;
  switch (st->kind) {
  case CU_DECL:
    if (s[3]) line(p, "%s %s%s = %s;", s[0], s[1], s[2] ? s[2] : "", s[3]);
    else line(p, "%s %s%s;", s[0], s[1], s[2] ? s[2] : "");
    break;
  case CU_ASSIGN: line(p, "%s = %s;", s[0], s[1]); break;
  case CU_CALL: line(p, "%s;", s[0]); break;
  case CU_COMMENT: {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", s[0]);
    for (char *c = buf; *c; c++)
      if (*c == '*' && c[1] == '/') *c = '+';
    line(p, "/* %s */", buf);
    break;
  }
  case CU_MMA_SYNC:
    if (st->dtype == TINY_FP32) line(p, "hk_mma1688_tf32(%s, %s, %s);", s[0], s[1], s[2]);
    else line(p, "hk_mma16816_%s(%s, %s, %s);", st->dtype == TINY_BF16 ? "bf16" : "f16", s[0], s[1], s[2]);
    break;
  case CU_EPILOGUE: print_epilogue(p, st); break;
  case CU_SHFL_XOR: line(p, "%s = %s(%s, hk_shfl_xor(%s, %s));", s[0], s[2], s[0], s[0], s[1]); break;
  case CU_CODE: line(p, "%s", s[0]); break;
  default: return false;
  }
  return true;
}

static void print_stmt(pr *p, const cuda_stmt *st) {
  if (!print_control(p, st) && !print_memory(p, st) && !print_sync(p, st) && !print_plain(p, st)) line(p, "/* ? */");
}

static void param_decl(ut_str *o, const cuda_param *pa) {
  switch (pa->kind) {
  case CUDA_P_PTR_IN: ut_str_printf(o, "const %s *__restrict__ %s", pa->ctype, pa->name); break;
  case CUDA_P_PTR_OUT: ut_str_printf(o, "%s *__restrict__ %s", pa->ctype, pa->name); break;
  case CUDA_P_TMAP: ut_str_printf(o, "const __grid_constant__ hk_tmap %s", pa->name); break;
  case CUDA_P_LONG: ut_str_printf(o, "const long %s", pa->name); break;
  }
}

static void print_kernel(ut_str *o, const cuda_kernel *k) {
  ut_str_printf(o, "\n/* kernel %s (%s, %s): grid (%lld,%lld,%lld) block %d, %lld bytes of dynamic shared memory */\n",
                k->name, k->kind, cuda_arch_name(k->arch), (long long)k->grid[0], (long long)k->grid[1],
                (long long)k->grid[2], k->block[0], (long long)k->smem_bytes);
  if (k->min_blocks > 0)
    ut_str_printf(o, "extern \"C\" __global__ void __launch_bounds__(%d, %d) %s(", k->block[0], k->min_blocks, k->name);
  else
    ut_str_printf(o, "extern \"C\" __global__ void __launch_bounds__(%d) %s(", k->block[0], k->name);
  for (int i = 0; i < k->nparams; i++) {
    if (i) ut_str_puts(o, ", ");
    param_decl(o, &k->params[i]);
  }
  ut_str_puts(o, ") {\n");
  pr p = {o, 1};
  for (int i = 0; i < k->nparams; i++)
    if (k->params[i].kind != CUDA_P_TMAP) line(&p, "(void)%s;", k->params[i].name);
  for (int i = 0; i < k->body->nbody; i++) print_stmt(&p, k->body->body[i]);
  ut_str_puts(o, "}\n");
  /* The simulator's entry: cuLaunchKernel-style parameters (pointers to the values). */
  /* (its launch bounds first: the simulator's setmaxnreg starts every warp at
   * the register count ptxas gives such a kernel) */
  ut_str_printf(o, "#ifdef HK_SIM\nextern \"C\" void hk_thunk_%s(void **p) {\n  hks_launch_bounds(%d, %d);\n  %s(", k->name,
                k->block[0], k->min_blocks, k->name);
  for (int i = 0; i < k->nparams; i++) {
    const cuda_param *pa = &k->params[i];
    if (i) ut_str_puts(o, ", ");
    if (pa->kind == CUDA_P_TMAP) ut_str_printf(o, "*(const hk_tmap *)p[%d]", i);
    else if (pa->kind == CUDA_P_LONG) ut_str_printf(o, "*(const long *)p[%d]", i);
    else if (pa->kind == CUDA_P_PTR_IN) ut_str_printf(o, "*(const %s *const *)p[%d]", pa->ctype, i);
    else ut_str_printf(o, "*(%s *const *)p[%d]", pa->ctype, i);
  }
  ut_str_puts(o, ");\n}\n#endif\n");
}

/* The statements of k's body as printed in its function (no signature, no
 * (void) of the parameters): what cuda_dedup.c compares. */
void cuda_print_body(ut_str *o, const cuda_kernel *k) {
  pr p = {o, 1};
  for (int i = 0; i < k->body->nbody; i++) print_stmt(&p, k->body->body[i]);
}

/* The SM90 helpers (TMA, mbarrier, wgmma) live in cuda_sm90.c. */
void cuda_sm90_prelude(const cuda_module *m, ut_str *o);

harp_status cuda_print(harp_error *e, const cuda_module *m, char **out) {
  *out = NULL;
  ut_str o;
  ut_str_init(&o);
  ut_str_printf(&o, "/* Generated by harp (CUDA backend, %s).  CUDA C with inline PTX; needs no header. */\n",
                cuda_arch_name(m->arch));
  ut_str_puts(&o, prelude_common);
  if (m->arch == CUDA_SM90) cuda_sm90_prelude(m, &o);
  for (int i = 0; i < m->nhelpers; i++) ut_str_puts(&o, m->helpers[i]);
  for (int i = 0; i < m->n; i++) print_kernel(&o, m->k[i]);
  if (o.oom) {
    ut_str_free(&o);
    return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory while printing CUDA C");
  }
  *out = ut_str_take(&o);
  if (!*out) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory while printing CUDA C");
  return HARP_OK;
}
