/* conv_bench.c — harp's implicit-GEMM conv (+bias) against oneDNN's
 * convolution primitive (+bias), same run, interleaved, median.
 * oneDNN runs twice: with plain NCHW/OIHW memory (what harp gets) and with
 * the layouts it prefers (format_tag any, nChw16c-style; reorders untimed).
 * harp runs three times: as the compiler picks (direct or implicit GEMM, see
 * cgen_conv_direct) packing the weight every call, the same with the weight
 * prepacked once (prepack_w, the inference setting; like oneDNN's untimed
 * weight reorder), and the implicit GEMM forced (packing every call).
 * Shapes: ResNet 1x64x56x56 k64 3x3 and 8x256x14x14 k256 3x3 (pad 1), or
 * CONV_SHAPES="N,C,H,OC N,C,H,OC ..." (square, 3x3, pad 1).
 *   conv_bench [reps]   (HARP_TASKS / HARP_MR / HARP_NR / HARP_KC / HARP_NC;
 *                        HARP_CONV_ALGO 1 gemm, 2 direct for the first two)
 * With HARP_THREADS=1 (and OMP_NUM_THREADS=1) every contender runs on the
 * calling thread and is timed in that thread's CPU time, which time slices
 * given to other processes do not inflate (the machine is shared). */
#include <oneapi/dnnl/dnnl.h>

#include "common.h"

typedef int (*conv_fn)(hprt_pool *, const void *, const void *, void *, const void *const *);

static int cpu_clock; /* 1 thread: CPU time of the calling thread */
static double tnow(void) {
  if (!cpu_clock) return tnow();
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

#define CK(x)                                                 \
  do {                                                        \
    dnnl_status_t s_ = (x);                                   \
    if (s_ != dnnl_success) {                                 \
      fprintf(stderr, "%s:%d dnnl error %d\n", __FILE__, __LINE__, (int)s_); \
      exit(1);                                                \
    }                                                         \
  } while (0)

typedef struct dconv {
  dnnl_primitive_t prim;
  dnnl_memory_t src, wei, bia, dst;
} dconv;

static dnnl_memory_t mem_for(dnnl_engine_t eng, const dnnl_memory_desc_t *md, const float *user, long n) {
  dnnl_memory_t m;
  CK(dnnl_memory_create(&m, md, eng, DNNL_MEMORY_ALLOCATE));
  void *p;
  CK(dnnl_memory_get_data_handle(m, &p));
  size_t sz = dnnl_memory_desc_get_size(md) / 4;
  float *f = p;
  for (size_t i = 0; i < sz; i++) f[i] = user ? user[i % (size_t)n] : 0.0f;
  return m;
}

static void dconv_make(dconv *d, dnnl_engine_t eng, int plain, long N, long C, long H, long W, long OC, long KH,
                       const float *x, const float *w, const float *b) {
  long OH = H, OW = W; /* stride 1, pad 1, 3x3 */
  dnnl_dims_t sd = {N, C, H, W}, wd = {OC, C, KH, KH}, bd = {OC}, dd = {N, OC, OH, OW};
  dnnl_dims_t st = {1, 1}, dl = {0, 0}, pl = {1, 1}, pr = {1, 1};
  dnnl_memory_desc_t smd, wmd, bmd, dmd;
  CK(dnnl_memory_desc_init_by_tag(&smd, 4, sd, dnnl_f32, plain ? dnnl_nchw : dnnl_format_tag_any));
  CK(dnnl_memory_desc_init_by_tag(&wmd, 4, wd, dnnl_f32, plain ? dnnl_oihw : dnnl_format_tag_any));
  CK(dnnl_memory_desc_init_by_tag(&bmd, 1, bd, dnnl_f32, dnnl_x));
  CK(dnnl_memory_desc_init_by_tag(&dmd, 4, dd, dnnl_f32, plain ? dnnl_nchw : dnnl_format_tag_any));
  dnnl_convolution_desc_t cd;
  CK(dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_inference, dnnl_convolution_direct, &smd, &wmd, &bmd,
                                                &dmd, st, dl, pl, pr));
  dnnl_primitive_desc_t pd;
  CK(dnnl_primitive_desc_create(&pd, &cd, NULL, eng, NULL));
  const char *impl = NULL;
  dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
  printf("  onednn %s impl: %s\n", plain ? "plain" : "any  ", impl ? impl : "?");
  d->src = mem_for(eng, dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0), x, N * C * H * W);
  d->wei = mem_for(eng, dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0), w, OC * C * KH * KH);
  d->bia = mem_for(eng, dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 1), b, OC);
  d->dst = mem_for(eng, dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0), NULL, 1);
  CK(dnnl_primitive_create(&d->prim, pd));
  dnnl_primitive_desc_destroy(pd);
}

static void dconv_run(dconv *d, dnnl_stream_t s) {
  dnnl_exec_arg_t args[4] = {
      {DNNL_ARG_SRC, d->src}, {DNNL_ARG_WEIGHTS, d->wei}, {DNNL_ARG_BIAS, d->bia}, {DNNL_ARG_DST, d->dst}};
  CK(dnnl_primitive_execute(d->prim, s, 4, args));
  CK(dnnl_stream_wait(s));
}

static void dconv_free(dconv *d) {
  dnnl_primitive_destroy(d->prim);
  dnnl_memory_destroy(d->src), dnnl_memory_destroy(d->wei), dnnl_memory_destroy(d->bia), dnnl_memory_destroy(d->dst);
}

int main(int argc, char **argv) {
  bn_quiet_peers(argv); /* each contender starts on idle cores */
  int reps = argc > 1 ? atoi(argv[1]) : bn_env_int("BENCH_REPS", 21);
  if (reps > 99) reps = 99;
  int nthreads = bn_env_int("HARP_THREADS", 2);
  long shapes[16][6] = {{1, 64, 56, 56, 64, 3}, {8, 256, 14, 14, 256, 3}};
  int nshape = 2;
  const char *env = getenv("CONV_SHAPES");
  if (env && *env) {
    nshape = 0;
    for (const char *q = env; *q && nshape < 16;) {
      long n, c, h, k;
      int used = 0;
      if (sscanf(q, " %ld,%ld,%ld,%ld%n", &n, &c, &h, &k, &used) != 4) break;
      long *sh = shapes[nshape++];
      sh[0] = n, sh[1] = c, sh[2] = h, sh[3] = h, sh[4] = k, sh[5] = 3;
      q += used;
    }
  }
  dnnl_engine_t eng;
  dnnl_stream_t strm;
  CK(dnnl_engine_create(&eng, dnnl_cpu, 0));
  CK(dnnl_stream_create(&strm, eng, dnnl_stream_default_flags));
  cpu_clock = nthreads == 1 && bn_env_int("OMP_NUM_THREADS", 0) == 1;
  printf("conv 3x3 pad 1 + bias, %d threads, median of %d interleaved repeats (GFLOP/s%s)\n", nthreads, reps,
         cpu_clock ? ", thread CPU time" : "");
  printf("%-22s %9s %9s %9s %10s %10s %8s %8s %8s %8s\n", "shape", "harp", "harp_pw", "gemm", "dnnl_nchw", "dnnl_any",
         "h/nchw", "h/any", "hpw/any", "h/gemm");
  for (int si = 0; si < nshape; si++) {
    long N = shapes[si][0], C = shapes[si][1], H = shapes[si][2], W = shapes[si][3], OC = shapes[si][4], KH = shapes[si][5];
    long nx = N * C * H * W, nw = OC * C * KH * KH, ny = N * OC * H * W;
    float *x = malloc(4 * nx), *w = malloc(4 * nw), *b = malloc(4 * OC), *y = malloc(4 * ny);
    bn_fill(x, nx, 1), bn_fill(w, nw, 2), bn_fill(b, OC, 3);
    cgen_conv_spec s;
    cgen_conv_spec_init(&s, N, C, H, W, OC, KH, KH, TINY_FP32);
    s.pad[0] = s.pad[1] = s.pad[2] = s.pad[3] = 1;
    s.n_epi = 1;
    s.epi[0].kind = CGEN_EPI_BIAS_M;
    s.epi[0].dtype = TINY_FP32;
    s.tune.tasks = bn_env_int("HARP_TASKS", 0);
    s.tune.mr = bn_env_int("HARP_MR", 0), s.tune.nr = bn_env_int("HARP_NR", 0);
    s.tune.kc = bn_env_int("HARP_KC", 0), s.tune.nc = bn_env_int("HARP_NC", 0);
    s.tune.threads = nthreads;
    s.tune.conv_algo = bn_env_int("HARP_CONV_ALGO", 0);
    const char *why = "";
    bool direct = cgen_conv_direct(&s, &why);
    ut_str src;
    ut_str_init(&src);
    harp_error e;
    memset(&e, 0, sizeof e);
    if (cgen_conv(&e, &s, "bench_conv", &src)) {
      fprintf(stderr, "cgen_conv: %s\n", e.msg);
      return 1;
    }
    s.prepack_w = true;
    if (cgen_conv(&e, &s, "bench_conv_pw", &src)) {
      fprintf(stderr, "cgen_conv: %s\n", e.msg);
      return 1;
    }
    s.prepack_w = false;
    s.tune.conv_algo = CGEN_CONV_GEMM;
    if (cgen_conv(&e, &s, "bench_conv_gemm", &src)) {
      fprintf(stderr, "cgen_conv: %s\n", e.msg);
      return 1;
    }
    void *h = bn_build(src.buf);
    ut_str_free(&src);
    conv_fn fn = (conv_fn)bn_sym(h, "bench_conv"), fnp = (conv_fn)bn_sym(h, "bench_conv_pw"),
            fng = (conv_fn)bn_sym(h, "bench_conv_gemm");
    long wbytes = ((long (*)(void))bn_sym(h, "bench_conv_pw_pack_a_bytes"))();
    float *wp = aligned_alloc(64, ((size_t)wbytes + 63) / 64 * 64); /* packed panels: whole cache lines */
    hprt_pool *pool = ((hprt_pool * (*)(int)) bn_sym(h, "hprt_pool_create"))(nthreads);
    dconv dp, da;
    dconv_make(&dp, eng, 1, N, C, H, W, OC, KH, x, w, b);
    dconv_make(&da, eng, 0, N, C, H, W, OC, KH, x, w, b);
    const void *ep[1] = {b};
    ((int (*)(hprt_pool *, const void *, void *))bn_sym(h, "bench_conv_pw_pack_a"))(pool, w, wp);
    /* numerics: harp vs oneDNN (plain layout) */
    fn(pool, w, x, y, ep);
    dconv_run(&dp, strm);
    void *dy;
    CK(dnnl_memory_get_data_handle(dp.dst, &dy));
    double md = 0;
    for (int pass = 0; pass < 3; pass++) {
      if (pass == 1) fnp(pool, wp, x, y, ep);
      if (pass == 2) fng(pool, w, x, y, ep);
      for (long i = 0; i < ny; i++) {
        double d = y[i] - ((float *)dy)[i];
        if (d < 0) d = -d;
        if (d > md) md = d;
      }
    }
    printf("  harp: %s (%s)\n", direct ? "direct" : "implicit GEMM", why);
    double t[5][99];
    for (int r = -3; r < reps; r++) {
      double t0 = tnow();
      fn(pool, w, x, y, ep);
      double d0 = tnow() - t0;
      t0 = tnow();
      fnp(pool, wp, x, y, ep);
      double d3 = tnow() - t0;
      t0 = tnow();
      dconv_run(&dp, strm);
      double d1 = tnow() - t0;
      t0 = tnow();
      dconv_run(&da, strm);
      double d2 = tnow() - t0;
      t0 = tnow();
      fng(pool, w, x, y, ep);
      double d4 = tnow() - t0;
      if (r >= 0) t[0][r] = d0, t[1][r] = d1, t[2][r] = d2, t[3][r] = d3, t[4][r] = d4;
    }
    double fl = 2.0 * ny * C * KH * KH, g[5];
    for (int c = 0; c < 5; c++) g[c] = fl / bn_median(t[c], reps) / 1e9;
    char name[64];
    snprintf(name, sizeof name, "%ldx%ldx%ldx%ld k%ld", N, C, H, W, OC);
    printf("%-22s %9.1f %9.1f %9.1f %10.1f %10.1f %8.2f %8.2f %8.2f %8.2f  (max |harp-dnnl| %.2g)\n", name, g[0], g[3],
           g[4], g[1], g[2], g[0] / g[1], g[0] / g[2], g[3] / g[2], g[0] / g[4], md);
    fflush(stdout);
    dconv_free(&dp), dconv_free(&da);
    ((void (*)(hprt_pool *))bn_sym(h, "hprt_pool_destroy"))(pool);
    dlclose(h);
    free(x), free(w), free(b), free(y), free(wp);
  }
  dnnl_stream_destroy(strm);
  dnnl_engine_destroy(eng);
  return 0;
}
