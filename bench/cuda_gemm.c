/* cuda_gemm.c — harp's MMA templates against cuBLAS on one GPU, same run.
 *
 *   make -C bench cuda-gemm                    (fp16 and bf16, 4096 and 8192)
 *   build/cuda_gemm [fp16|bf16|tf32|fp32]... [N]... [sm80|sm90] [nn|tn] [bn=64|128|256] [bm=..] [stages=S] [group=G] [occ=N]
 *                                              one line per (dtype, N, template)
 *
 * Row-major C = A B, N x N x N, fp32 accumulation, C in the input dtype.
 * tf32 and fp32 are fp32 data: harp --precision tf32 (mma.sync m16n8k8
 * .tf32 / wgmma .tf32) against cuBLAS CUBLAS_COMPUTE_32F_FAST_TF32 (what
 * torch.backends.cuda.matmul.allow_tf32 selects), and harp's strict-fp32
 * SIMT template against cuBLAS SGEMM (CUBLAS_COMPUTE_32F); both also report
 * their error against cuBLAS SGEMM.  Layout nn (default): B row-major [K][N];
 * tn: B stored [N][K] (K-major: torch's Linear weight, and what TF32 wgmma
 * reads, which has no transpose).  TF32 nn on the SM90 template does what a
 * model does with such a weight: B is packed K-major once by harp's pack
 * kernel (timed on its own: "pack"), the GEMM reads the copy; cuBLAS gets
 * the row-major B.
 * Inputs are random in [-1, 1) (zeros run faster than real data and hide
 * unwritten outputs); each point's C is checked against cuBLAS's on the same
 * inputs, ||C - C_blas|| / ||C_blas||, and a point over 1e-2 fails.  The
 * tile options override the plan's defaults (a sweep runs one process per
 * tile, so that a faulting kernel does not poison the others).  The SM80 template (mma.sync)
 * runs on any sm_80+ device, the SM90 one (TMA + wgmma, persistent grid of
 * one CTA per SM) only on compute capability 9.x.  cuBLAS (cublasGemmEx,
 * CUBLAS_COMPUTE_32F) is dlopen'd; without it only harp's figures print.
 * Each time is the median of 30 launches after 5 warm-ups, device events.
 * Without a GPU the kernels are still generated and compiled with NVRTC, and
 * the program says why nothing was timed (exit 1). */
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda.h"
#include "backend/cuda/cuda_rt.h"
#include "util/util.h"

typedef struct blas {
  void *lib, *h;
  int (*create)(void **);
  int (*set_stream)(void *, void *);
  int (*gemm_ex)(void *, int, int, int, int, int, const void *, const void *, int, int, const void *, int, int,
                 const void *, void *, int, int, int, int);
  int64_t n;
  int dtype;   /* cudaDataType: CUDA_R_16F = 2, CUDA_R_16BF = 14, CUDA_R_32F = 0 */
  int compute; /* CUBLAS_COMPUTE_32F = 68, CUBLAS_COMPUTE_32F_FAST_TF32 = 77 */
  bool tn;     /* B stored [N][K] */
  cuda_devptr a, b, c;
} blas;

typedef struct tile_opts {
  int bm, bn, bk, wm, wn, stages, group, occ;
  bool only80, only90, tn;
} tile_opts;

/* A benchmark dtype: storage, harp's math, cuBLAS's types. */
typedef struct mode {
  const char *name;
  tiny_dtype dt;
  cuda_math math;
  int blas_dtype, blas_compute;
} mode;
static const mode MODES[] = {{"fp16", TINY_FP16, CUDA_MATH_TF32, 2, 68},
                             {"bf16", TINY_BF16, CUDA_MATH_TF32, 14, 68},
                             {"tf32", TINY_FP32, CUDA_MATH_TF32, 0, 77},
                             {"fp32", TINY_FP32, CUDA_MATH_FP32, 0, 68}};

static uint64_t rng_next(uint64_t *s) {
  *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
  return *s;
}

/* n random fp16 / bf16 / fp32 values in [-1, 1) */
static void *random_elems(tiny_dtype dt, size_t n, uint64_t seed) {
  void *h = malloc(n * (size_t)tiny_dtype_size(dt));
  if (!h) return NULL;
  for (size_t i = 0; i < n; i++) {
    float v = (float)(rng_next(&seed) >> 40) / (float)(1 << 24) * 2.0f - 1.0f;
    if (dt == TINY_FP32) ((float *)h)[i] = v;
    else ((uint16_t *)h)[i] = dt == TINY_BF16 ? ut_f32_to_bf16(v) : ut_f32_to_f16(v);
  }
  return h;
}

static double elem(tiny_dtype dt, const void *p, size_t i) {
  if (dt == TINY_FP32) return ((const float *)p)[i];
  uint16_t u = ((const uint16_t *)p)[i];
  return dt == TINY_BF16 ? ut_bf16_to_f32(u) : ut_f16_to_f32(u);
}

/* ||got - want|| / ||want|| over n values; NaN when either holds one */
static double rel_err(tiny_dtype dt, const void *got, const void *want, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; i++) {
    double g = elem(dt, got, i), w = elem(dt, want, i);
    if (g != g || w != w) return 0.0 / 0.0;
    num += (g - w) * (g - w), den += w * w;
  }
  return den > 0 ? sqrt(num / den) : sqrt(num);
}

static int blas_call(void *ctx) {
  blas *x = ctx;
  float one = 1, zero = 0;
  int n = (int)x->n;
  /* row-major C = A B is column-major C^T = B^T A^T: B's memory as the first operand (a K-major B,
   * [N][K], is a column-major K x N matrix: op T), A's as the second; default algo -1 */
  return x->gemm_ex(x->h, x->tn ? 1 : 0, 0, n, n, n, &one, (void *)(uintptr_t)x->b, x->dtype, n, (void *)(uintptr_t)x->a,
                    x->dtype, n, &zero, (void *)(uintptr_t)x->c, x->dtype, n, x->compute, -1);
}

static bool blas_open(blas *x, cuda_rt *rt) {
  const char *libs[] = {"libcublas.so.13", "libcublas.so.12", "libcublas.so"};
  for (int i = 0; i < 3 && !x->lib; i++) x->lib = dlopen(libs[i], RTLD_NOW | RTLD_LOCAL);
  if (!x->lib) return false;
  *(void **)&x->create = dlsym(x->lib, "cublasCreate_v2");
  *(void **)&x->set_stream = dlsym(x->lib, "cublasSetStream_v2");
  *(void **)&x->gemm_ex = dlsym(x->lib, "cublasGemmEx");
  return x->create && x->set_stream && x->gemm_ex && !x->create(&x->h) && !x->set_stream(x->h, cuda_rt_stream(rt));
}

typedef struct ours {
  cuda_rt *rt;
  void *fn;
  const cuda_kernel *k;
  cuda_devptr args[4];
} ours;

/* B [n][n] row-major -> Bt [n][n] K-major, rounded to TF32: harp's pack of
 * an fp32 weight (region_cuda.c), into module m as "pack". */
static harp_status gen_pack(harp_error *e, cuda_module *m, int64_t n) {
  cuda_pack_spec ps = {.batch = {1, 1}, .K = n, .N = n, .s_k = n};
  return cuda_gen_pack_tf32(e, m, &ps, "pack");
}

static int ours_call(void *ctx) {
  ours *o = ctx;
  harp_error e = {0};
  /* persistent SM90 kernels: one CTA per SM */
  int64_t gx = o->k->params[0].kind == CUDA_P_TMAP ? cuda_rt_status_of(o->rt)->sm_count : 0;
  return cuda_rt_launch_kernel(&e, o->rt, o->fn, o->k, o->args, gx) != HARP_OK;
}

static double tflops(int64_t n, double ms) { return 2.0 * (double)n * n * n / (ms * 1e-3) / 1e12; }

/* Time cuBLAS on the harp run's inputs into a fresh C (its compute type
 * from x); copies its C into host buffer out.  0 on success. */
static int blas_point(harp_error *e, cuda_rt *rt, blas *x, cuda_devptr a, cuda_devptr b, size_t bytes, void *out, double *ms) {
  cuda_devptr c = 0;
  x->a = a, x->b = b;
  int rc = cuda_rt_alloc(e, rt, bytes, &c) != HARP_OK;
  x->c = c;
  if (!rc) rc = cuda_rt_time_fn(e, rt, blas_call, x, 5, 30, ms) != HARP_OK;
  if (!rc) rc = cuda_rt_dtoh(e, rt, out, c, bytes) != HARP_OK;
  if (c) cuda_rt_free(rt, c);
  return rc;
}

/* One (mode, N, arch) point; 0 on success (or a template that refuses the
 * layout: said), 1 when something failed (printed). */
static int bench_one(cuda_rt *rt, blas *x, bool have_blas, const mode *md, int64_t n, cuda_arch arch, const tile_opts *to) {
  harp_error e = {0};
  const cuda_rt_status *s = cuda_rt_status_of(rt);
  cuda_module *m = NULL;
  char *src = NULL;
  cuda_binary bin = {0};
  cuda_rt_module *mod = NULL;
  ours o = {.rt = rt};
  int rc = 1;
  tiny_dtype dt = md->dt;
  cuda_gemm_spec g;
  cuda_gemm_spec_init(&g, n, n, n, dt);
  g.math = md->math;
  /* TF32, B row-major, SM90: the GEMM reads B packed K-major */
  bool pack = arch == CUDA_SM90 && dt == TINY_FP32 && md->math == CUDA_MATH_TF32 && !to->tn;
  if (to->tn || pack) g.b_sk = 1, g.b_sn = n; /* B stored [N][K] */
  ours po = {.rt = rt};
  cuda_devptr bt = 0;
  g.tune.arch = arch;
  g.tune.persistent = true;
  if (to->bm) g.tune.bm = to->bm;
  if (to->bn) g.tune.bn = to->bn;
  if (to->stages) g.tune.stages = to->stages;
  if (to->group) g.tune.group_m = to->group;
  if (to->occ) g.tune.min_blocks = to->occ;
  if (to->bk) g.tune.bk = to->bk;
  if (to->wm) g.tune.warp_m = to->wm;
  if (to->wn) g.tune.warp_n = to->wn;
  void *ha = NULL, *hb = NULL, *hc = NULL, *hr = NULL, *hs = NULL;
  const char *dname = md->name, *lay = to->tn ? "tn" : "nn";
  const char *tname = arch == CUDA_SM90 ? "SM90" : md->math == CUDA_MATH_FP32 && dt == TINY_FP32 ? "SIMT" : "SM80";
  const char *target = arch == CUDA_SM90 ? "sm_90a" : s->gpu ? cuda_rt_arch(rt) : "sm_80";
  if (cuda_module_new(&e, arch, &m)) goto out;
  if (pack && gen_pack(&e, m, n)) goto out;
  if (cuda_gen_gemm(&e, m, &g, "bench")) {
    if (e.code == HARP_E_UNSUPPORTED) { /* e.g. TF32 wgmma and an N-major B */
      printf("%s GEMM %lld^3 %s %s template: refused (%s)\n", dname, (long long)n, lay, tname, e.msg);
      rc = 0;
    }
    goto out;
  }
  if (cuda_print(&e, m, &src) || cuda_rt_compile(&e, rt, src, "bench.cu", target, NULL, 0, &bin)) goto out;
  const char *dump = getenv("CUDA_GEMM_PTX"); /* write the PTX there (ptxas -v, cuobjdump) */
  if (dump) {
    FILE *f = fopen(dump, "w");
    if (f) fputs(bin.ptx, f), fclose(f);
  }
  if (!s->gpu) {
    printf("%s GEMM %lld^3 %s %s template: compiled for %s (%zu bytes of PTX); not timed\n", dname, (long long)n, lay, tname,
           target, strlen(bin.ptx));
    rc = 0;
    goto out;
  }
  o.k = cuda_module_find(m, "bench");
  if (cuda_rt_load(&e, rt, &bin, &mod) || cuda_rt_function(&e, rt, mod, "bench", &o.fn)) goto out;
  size_t elems = (size_t)(n * n), bytes = elems * (size_t)tiny_dtype_size(dt);
  ha = random_elems(dt, elems, 0x9E3779B97F4A7C15ull + (uint64_t)n);
  hb = random_elems(dt, elems, 0xD1B54A32D192ED03ull + (uint64_t)n);
  hc = malloc(bytes), hr = malloc(bytes), hs = malloc(bytes);
  if (!ha || !hb || !hc || !hr || !hs) {
    ut_fail(&e, HARP_E_NO_MEMORY, "cuda_gemm", "host buffers");
    goto out;
  }
  for (int q = 0; q < 3; q++)
    if (cuda_rt_alloc(&e, rt, bytes, &o.args[q])) goto out;
  if (cuda_rt_htod(&e, rt, o.args[0], ha, bytes) || cuda_rt_htod(&e, rt, o.args[1], hb, bytes) ||
      cuda_rt_memset0(&e, rt, o.args[2], bytes))
    goto out;
  o.args[3] = o.args[2];
  double ms = 0, ms_blas = 0, ms_sgemm = 0, ms_pack = 0;
  cuda_devptr b_rowmajor = o.args[1];
  if (pack) { /* Bt = pack(B), timed on its own; the GEMM reads Bt */
    po.k = cuda_module_find(m, "pack");
    if (cuda_rt_function(&e, rt, mod, "pack", &po.fn) || cuda_rt_alloc(&e, rt, bytes, &bt)) goto out;
    po.args[0] = o.args[1], po.args[1] = bt;
    if (cuda_rt_time_fn(&e, rt, ours_call, &po, 2, 10, &ms_pack)) goto out;
    o.args[1] = bt;
  }
  if (cuda_rt_time_fn(&e, rt, ours_call, &o, 5, 30, &ms)) goto out;
  const cuda_kernel *kk = o.k;
  const char *tile = "";
  for (int q = 0; q < kk->nmeta; q++)
    if (!strcmp(kk->meta[q].key, "warp_tile")) tile = kk->meta[q].str;
  long long mv[4] = {0, 0, 0, 0}; /* the tile the template used: BM BN BK stages */
  const char *mk[4] = {"BM", "BN", "BK", "stages"};
  for (int q = 0; q < kk->nmeta; q++)
    for (int r = 0; r < 4; r++)
      if (!strcmp(kk->meta[q].key, mk[r])) mv[r] = kk->meta[q].num;
  printf("%s GEMM %lld^3 %s %s template (%lldx%lldx%lld, %lld stages, warps %s, %d CTA/SM bound): %.3f ms, %.1f TFLOP/s", dname,
         (long long)n, lay, tname, mv[0], mv[1], mv[2], mv[3], tile, kk->min_blocks, ms, tflops(n, ms));
  if (pack) printf(" (B packed K-major once: pack %.3f ms; GEMM + pack %.3f ms)", ms_pack, ms + ms_pack);
  if (have_blas) {
    x->n = n, x->dtype = md->blas_dtype, x->compute = md->blas_compute, x->tn = to->tn;
    if (blas_point(&e, rt, x, o.args[0], b_rowmajor, bytes, hr, &ms_blas)) goto out;
    if (cuda_rt_dtoh(&e, rt, hc, o.args[2], bytes)) goto out;
    double err = rel_err(dt, hc, hr, elems);
    printf("; cuBLAS%s %.3f ms, %.1f TFLOP/s; harp/cuBLAS %.2f; rel err vs cuBLAS %.2e%s", md->blas_compute == 77 ? " TF32" : "",
           ms_blas, tflops(n, ms_blas), ms_blas / ms, err, err <= 1e-2 ? "" : " WRONG");
    if (pack) printf("; with the pack every call %.2f", ms_blas / (ms + ms_pack));
    if (dt == TINY_FP32) { /* both against strict SGEMM: what TF32 costs in accuracy */
      x->compute = 68;
      if (blas_point(&e, rt, x, o.args[0], b_rowmajor, bytes, hs, &ms_sgemm)) goto out;
      printf("; vs SGEMM: harp %.2e, cuBLAS %.2e", rel_err(dt, hc, hs, elems), rel_err(dt, hr, hs, elems));
    }
    printf("\n");
    fflush(stdout);
    if (!(err <= 1e-2)) goto out;
  } else {
    printf("; cuBLAS not available (not checked)\n");
  }
  rc = 0;
out:
  if (rc) fprintf(stderr, "cuda_gemm: %s GEMM %lld^3 %s: %s\n", dname, (long long)n, tname, e.msg);
  if (bt) o.args[1] = po.args[0]; /* the row-major B, freed below */
  for (int q = 0; q < 3; q++)
    if (o.args[q]) cuda_rt_free(rt, o.args[q]);
  if (bt) cuda_rt_free(rt, bt);
  free(ha), free(hb), free(hc), free(hr), free(hs);
  if (mod) cuda_rt_unload(rt, mod);
  cuda_binary_free(&bin);
  free(src);
  cuda_module_free(m);
  return rc;
}

int main(int argc, char **argv) {
  const mode *dts[8];
  int64_t sizes[8];
  int ndt = 0, nsz = 0;
  tile_opts to = {0};
  for (int i = 1; i < argc; i++) {
    char *end;
    long long v = strtoll(argv[i], &end, 10);
    int t;
    if (sscanf(argv[i], "bm=%d", &t) == 1 && t > 0 && t <= 256) to.bm = t;
    else if (sscanf(argv[i], "bn=%d", &t) == 1 && t > 0 && t <= 256) to.bn = t;
    else if (sscanf(argv[i], "stages=%d", &t) == 1 && t > 0 && t <= 8) to.stages = t;
    else if (sscanf(argv[i], "group=%d", &t) == 1 && t > 0 && t <= 64) to.group = t;
    else if (sscanf(argv[i], "occ=%d", &t) == 1 && t > 0 && t <= 4) to.occ = t;
    else if (sscanf(argv[i], "bk=%d", &t) == 1 && t > 0 && t <= 128) to.bk = t;
    else if (sscanf(argv[i], "wm=%d", &t) == 1 && t > 0 && t <= 128) to.wm = t;
    else if (sscanf(argv[i], "wn=%d", &t) == 1 && t > 0 && t <= 128) to.wn = t;
    else if (!strcmp(argv[i], "sm80")) to.only80 = true;
    else if (!strcmp(argv[i], "sm90")) to.only90 = true;
    else if (!strcmp(argv[i], "tn")) to.tn = true;
    else if (!strcmp(argv[i], "nn")) to.tn = false;
    else if (ndt < 8 && (!strcmp(argv[i], "fp16") || !strcmp(argv[i], "bf16") || !strcmp(argv[i], "tf32") ||
                         !strcmp(argv[i], "fp32")))
      for (int q = 0; q < 4; q++) {
        if (!strcmp(argv[i], MODES[q].name)) dts[ndt++] = &MODES[q];
      }
    else if (*argv[i] && !*end && v >= 16 && v <= 32768 && nsz < 8) sizes[nsz++] = v;
    else {
      fprintf(stderr, "usage: cuda_gemm [fp16|bf16|tf32|fp32]... [N]... [sm80|sm90] [nn|tn] [bm=B] [bn=B] [bk=B] [wm=W] [wn=W] [stages=S] [group=G] [occ=1..4]"
                      "  (16 <= N <= 32768)\n");
      return 2;
    }
  }
  if (!ndt) dts[ndt++] = &MODES[0], dts[ndt++] = &MODES[1];
  if (!nsz) sizes[nsz++] = 4096, sizes[nsz++] = 8192;
  harp_error e = {0};
  cuda_rt *rt;
  if (cuda_rt_open(&e, NULL, &rt)) {
    fprintf(stderr, "cuda_gemm: %s\n", e.msg);
    return 1;
  }
  const cuda_rt_status *s = cuda_rt_status_of(rt);
  if (!s->nvrtc) {
    fprintf(stderr, "cuda_gemm: no NVRTC: %s\n", s->why_no_nvrtc);
    cuda_rt_close(rt);
    return 1;
  }
  if (s->gpu)
    printf("# GPU: %s (sm_%d%d, %d SMs), NVRTC %d.%d\n", s->device_name, s->cc_major, s->cc_minor, s->sm_count,
           s->nvrtc_major, s->nvrtc_minor);
  else printf("# no GPU (%s): kernels are compiled, not timed\n", s->why_no_gpu);
  blas x = {0};
  bool have_blas = s->gpu && blas_open(&x, rt);
  int rc = 0;
  for (int d = 0; d < ndt; d++)
    for (int i = 0; i < nsz; i++)
      for (int a = 0; a < 2; a++) {
        cuda_arch arch = a ? CUDA_SM90 : CUDA_SM80;
        if (arch == CUDA_SM90 && s->gpu && s->cc_major != 9) continue; /* wgmma is sm_90a only */
        if ((to.only80 && arch != CUDA_SM80) || (to.only90 && arch != CUDA_SM90)) continue;
        rc |= bench_one(rt, &x, have_blas, dts[d], sizes[i], arch, &to);
      }
  bool timed = s->gpu;
  cuda_rt_close(rt); /* s points into rt */
  return rc || !timed;
}
