/* test_cuda_nvrtc.c — every kernel of the test models compiles with NVRTC for
 * sm_80 and sm_90a, and the PTX of each kernel holds the instructions the
 * template promises (mma.sync, ldmatrix, cp.async for contractions; shuffles
 * and 16-byte vector accesses for the row kernels).  When cuobjdump is
 * installed (or $HARP_CUOBJDUMP names it) the SASS is checked too.
 * Skips when libnvrtc cannot be loaded.  No GPU is needed. */
#include <ctype.h>
#include "cuda_models.h"
#include "cuda_testutil.h"

typedef struct state {
  cuda_rt *rt;
  char cache[256];
} state;

static int setup(void **vs) {
  state *st = calloc(1, sizeof *st);
  *vs = st;
  harp_error e = {0};
  snprintf(st->cache, sizeof st->cache, "/tmp/harp_nvrtc_cache_XXXXXX");
  if (!mkdtemp(st->cache)) return -1;
  cuda_rt_opts o = {.no_driver = true, .cache_dir = st->cache};
  if (cuda_rt_open(&e, &o, &st->rt) != HARP_OK) return -1;
  return 0;
}

static int teardown(void **vs) {
  state *st = *vs;
  cuda_rt_close(st->rt);
  cu_sh("rm -rf %s", st->cache);
  free(st);
  return 0;
}

#define SKIP_IF_NO_NVRTC(st)                                                                     \
  do {                                                                                           \
    if (!cuda_rt_status_of((st)->rt)->nvrtc) {                                                   \
      fprintf(stderr, "NVRTC not available (%s): skipped\n", cuda_rt_status_of((st)->rt)->why_no_nvrtc); \
      skip();                                                                                    \
    }                                                                                            \
  } while (0)

/* The PTX of one entry: from ".entry name(" to the next ".entry" (malloc'd). */
static char *ptx_entry(const char *ptx, const char *name) {
  char pat[160];
  snprintf(pat, sizeof pat, ".entry %s(", name);
  const char *a = strstr(ptx, pat);
  if (!a) return NULL;
  const char *b = strstr(a + 1, ".entry ");
  size_t n = b ? (size_t)(b - a) : strlen(a);
  char *s = malloc(n + 1);
  memcpy(s, a, n);
  s[n] = 0;
  return s;
}

static int count(const char *s, const char *what) {
  int n = 0;
  for (const char *p = s; (p = strstr(p, what)); p++) n++;
  return n;
}

/* PTX ISA (wgmma): the accumulators belong to the wgmma from issue until the
 * wgmma.wait_group that retires it, and a wgmma.fence must separate other
 * accesses from the wgmmas.  In kernel t's PTX: no instruction between the
 * last wgmma.mma_async and `wgmma.wait_group.sync.aligned 0` names one of its
 * accumulator registers, nor any between a wgmma.fence and the wgmma after it.
 * (The CUDA source pins them with hk_wgmma_fence_acc; without that the
 * compiler would be free to move accumulator reads across the wait asm.) */
static bool names_reg(const char *a, const char *b, const char *reg) {
  size_t n = strlen(reg);
  for (const char *p = a; (p = strstr(p, reg)) && p < b; p++)
    if (!isdigit((unsigned char)p[n])) return true;
  return false;
}
static void check_wgmma_acc_order(const char *name, const char *t) {
  const char *w0 = strstr(t, "wgmma.wait_group.sync.aligned 0");
  if (!w0) fail_msg("%s: no wgmma.wait_group 0", name);
  const char *last = NULL;
  for (const char *p = t; (p = strstr(p, "wgmma.mma_async")) && p < w0; p++) last = p;
  if (!last) fail_msg("%s: no wgmma before wgmma.wait_group 0", name);
  const char *lb = strchr(last, '{'), *rb = lb ? strchr(lb, '}') : NULL, *eol = strchr(last, '\n');
  assert_non_null(rb);
  const char *fence = strstr(t, "wgmma.fence.sync.aligned"), *first = fence ? strstr(fence, "wgmma.mma_async") : NULL;
  assert_non_null(first);
  const char *fence_eol = strchr(fence, '\n');
  for (const char *r = lb + 1; r < rb;) {
    char reg[16];
    int len = 0;
    while (r < rb && *r != '%') r++;
    while (r < rb && *r != ',' && len < 15) reg[len++] = *r++;
    reg[len] = 0;
    if (!len) break;
    if (names_reg(eol, w0, reg)) fail_msg("%s: accumulator %s touched before wgmma.wait_group 0", name, reg);
    if (names_reg(fence_eol, first, reg)) fail_msg("%s: accumulator %s touched between wgmma.fence and wgmma", name, reg);
  }
}

/* How a test model's contraction computes: 't' TF32, 's' SIMT, 'h' 16-bit MMA. */
static char model_math(const cu_model *m) {
  tiny_dtype dt = m->kind == CU_M_GEMM ? m->g.a_dtype : m->kind == CU_M_CONV ? m->c.w_dtype : m->a.q_dtype;
  cuda_math math = m->kind == CU_M_GEMM ? m->g.math : m->kind == CU_M_CONV ? m->c.math : m->a.math;
  return dt != TINY_FP32 || math == CUDA_MATH_FP16 || math == CUDA_MATH_BF16 ? 'h' : math == CUDA_MATH_FP32 ? 's' : 't';
}

static void check_ptx(const cu_model *m, const char *ptx) {
  char *t = ptx_entry(ptx, m->name);
  if (!t) fail_msg("no .entry %s in the PTX", m->name);
  char math = m->contraction ? model_math(m) : 0;
  if (math == 't' && !count(t, "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32")) fail_msg("%s: no mma.sync m16n8k8 .tf32", m->name);
  if (math == 's' && (!count(t, "fma.rn.f32") || !count(t, "ld.shared.v4") || count(t, "mma.sync")))
    fail_msg("%s: not FFMA + 128-bit shared loads only", m->name);
  if (m->contraction) {
    if (math == 'h' && !count(t, "mma.sync.aligned.m16n8k16.row.col.f32.")) fail_msg("%s: no mma.sync m16n8k16", m->name);
    if (math != 's' && !count(t, "ldmatrix.sync.aligned.m8n8.x4") && (m->kind != CU_M_GEMM || m->g.a_dtype != TINY_FP32))
      fail_msg("%s: no ldmatrix.x4", m->name);
    if (!count(t, "cp.async.") || !count(t, "cp.async.commit_group") || !count(t, "cp.async.wait_group"))
      fail_msg("%s: no cp.async pipeline", m->name);
  }
  /* C rows 16-byte aligned (N % 8 == 0): SMEM-staged 16-byte stores */
  if (m->kind == CU_M_GEMM && m->g.N % 8 == 0 && !count(t, "st.global.v4.b32"))
    fail_msg("%s: no 16-byte vector store", m->name);
  if (m->kind == CU_M_GEMM && !strcmp(m->name, "gemm_1024") && !count(t, "cp.async.cg.shared.global"))
    fail_msg("%s: aligned operands should use 16-byte cp.async.cg", m->name);
  if ((m->kind == CU_M_SOFTMAX || m->kind == CU_M_LAYERNORM || m->kind == CU_M_REDUCE) && !count(t, "shfl.sync.bfly"))
    fail_msg("%s: no warp shuffle reduction", m->name);
  if ((m->kind == CU_M_LAYERNORM || m->kind == CU_M_EWISE || m->kind == CU_M_REDUCE) && !count(t, "ld.global.v4"))
    fail_msg("%s: loads not vectorised", m->name);
  free(t);
}

/* SASS through cuobjdump, when there is one. */
static void check_sass(const cu_model *ms, int n, const cuda_binary *bin, const char *arch) {
  const char *tool = getenv("HARP_CUOBJDUMP");
  if (!tool) tool = "cuobjdump";
  if (cu_sh("%s --version >/dev/null 2>&1", tool) != 0) {
    fprintf(stderr, "cuobjdump not found: SASS not inspected\n");
    return;
  }
  char dir[] = "/tmp/harp_sass_XXXXXX";
  assert_non_null(mkdtemp(dir));
  char path[128];
  snprintf(path, sizeof path, "%s/k.cubin", dir);
  FILE *f = fopen(path, "wb");
  fwrite(bin->cubin, 1, bin->cubin_size, f);
  fclose(f);
  char sass[160];
  snprintf(sass, sizeof sass, "%s/k.sass", dir);
  assert_int_equal(cu_sh("%s -sass %s > %s 2>/dev/null", tool, path, sass), 0);
  harp_error e = {0};
  char *text = NULL;
  size_t len = 0;
  cu_ok(&e, ut_read_file(&e, sass, (size_t)1 << 28, &text, &len));
  for (int i = 0; i < n; i++) {
    if (!ms[i].contraction) continue;
    char head[160];
    snprintf(head, sizeof head, "Function : %s\n", ms[i].name);
    const char *a = strstr(text, head);
    if (!a) fail_msg("%s: not in the SASS", ms[i].name);
    const char *b = strstr(a + 1, "Function : ");
    size_t nsec = b ? (size_t)(b - a) : strlen(a);
    char *sec = malloc(nsec + 1);
    memcpy(sec, a, nsec);
    sec[nsec] = 0;
    char math = model_math(&ms[i]);
    const char *ops[] = {math == 't' ? "HMMA.1688.F32.TF32" : math == 's' ? "FFMA" : "HMMA.16816.F32",
                         math == 's' ? "LDS.128" : ms[i].kind == CU_M_GEMM && ms[i].g.a_dtype == TINY_FP32 ? "LDS" : "LDSM.16.",
                         "LDGSTS.E", "DEPBAR"};
    for (int j = 0; j < 4; j++)
      if (!strstr(sec, ops[j])) fail_msg("%s (%s): no %s in the SASS", ms[i].name, arch, ops[j]);
    free(sec);
  }
  free(text);
  fprintf(stderr, "SASS checked with %s (%s)\n", tool, arch);
  cu_sh("rm -rf %s", dir);
}

static void compile_models(state *st, cuda_arch arch, const char *nvarch) {
  harp_error e = {0};
  cu_model ms[CU_NMODELS];
  cu_models(ms, CUDA_SM80);
  (void)arch;
  cuda_module *mod;
  cu_ok(&e, cuda_module_new(&e, CUDA_SM80, &mod));
  for (int i = 0; i < CU_NMODELS; i++) cu_ok(&e, cu_model_gen(&e, mod, &ms[i]));
  char *src;
  cu_ok(&e, cuda_print(&e, mod, &src));
  cuda_binary bin;
  cu_ok(&e, cuda_rt_compile(&e, st->rt, src, "models.cu", nvarch, NULL, 0, &bin));
  assert_true(bin.cubin_size > 0);
  for (int i = 0; i < CU_NMODELS; i++) check_ptx(&ms[i], bin.ptx);
  fprintf(stderr, "%d kernels compiled for %s%s\n", CU_NMODELS, nvarch, bin.cached ? " (cache)" : "");
  check_sass(ms, CU_NMODELS, &bin, nvarch);
  /* The same source again comes from the disk cache, byte for byte. */
  cuda_binary again;
  cu_ok(&e, cuda_rt_compile(&e, st->rt, src, "models.cu", nvarch, NULL, 0, &again));
  assert_true(again.cached);
  assert_int_equal(again.cubin_size, bin.cubin_size);
  assert_memory_equal(again.cubin, bin.cubin, bin.cubin_size);
  assert_string_equal(again.ptx, bin.ptx);
  cuda_binary_free(&again);
  cuda_binary_free(&bin);
  free(src);
  cuda_module_free(mod);
}

static void test_models_sm80(void **vs) {
  state *st = *vs;
  SKIP_IF_NO_NVRTC(st);
  compile_models(st, CUDA_SM80, "sm_80");
}

static void test_models_sm90a(void **vs) {
  state *st = *vs;
  SKIP_IF_NO_NVRTC(st);
  compile_models(st, CUDA_SM80, "sm_90a"); /* the SM80 template also runs on Hopper */
}

/* The SM90 template (plan arch sm90): GEMMs within the TMA/WGMMA limits,
 * compiled for sm_90a; the PTX holds wgmma.mma_async, the TMA bulk tensor
 * copies, mbarriers and setmaxnreg.  The tail GEMM with K = 190 is outside
 * TMA's 16-byte stride rule and is refused (it runs on the SM80 template). */
static void test_sm90_template(void **vs) {
  state *st = *vs;
  SKIP_IF_NO_NVRTC(st);
  harp_error e = {0};
  cu_model ms[CU_NMODELS];
  cu_models(ms, CUDA_SM90);
  cuda_module *mod;
  cu_ok(&e, cuda_module_new(&e, CUDA_SM90, &mod));
  assert_int_equal(cuda_gen_gemm(&e, mod, &ms[0].g, "gemm_tail"), HARP_E_UNSUPPORTED);
  assert_non_null(strstr(e.msg, "16-byte"));
  harp_error_clear(&e);
  const char *names[8];
  int n = 0;
  cu_ok(&e, cuda_gen_gemm(&e, mod, &ms[1].g, "gemm_bias_relu90")); /* tile 128x64: BN 64 */
  names[n++] = "gemm_bias_relu90";
  ms[2].g.tune.persistent = true;
  cu_ok(&e, cuda_gen_gemm(&e, mod, &ms[2].g, "gemm_1024_90"));
  names[n++] = "gemm_1024_90";
  cuda_gemm_spec g;
  cuda_gemm_spec_init(&g, 333, 248, 184, TINY_BF16); /* tails everywhere, TMA-aligned; K-major B; fp32 out */
  g.tune.arch = CUDA_SM90;
  g.c_dtype = TINY_FP32;
  g.b_sk = 1, g.b_sn = 184;
  g.n_epi = 2;
  g.epi[0].kind = CUDA_EPI_RESIDUAL, g.epi[0].dtype = TINY_FP32, g.epi[0].s_m = 248, g.epi[0].s_n = 1;
  g.epi[1].kind = CUDA_EPI_GELU;
  cu_ok(&e, cuda_gen_gemm(&e, mod, &g, "gemm_tail_kmajor90"));
  names[n++] = "gemm_tail_kmajor90";
  cuda_gemm_spec_init(&g, 96, 256, 128, TINY_FP16); /* batched 2x3, BN 256, 2 stages */
  g.tune.arch = CUDA_SM90;
  g.batch[0] = 2, g.batch[1] = 3;
  g.tune.bn = 256, g.tune.stages = 2;
  cu_ok(&e, cuda_gen_gemm(&e, mod, &g, "gemm_batched90"));
  names[n++] = "gemm_batched90";
  cuda_gemm_spec_init(&g, 64, 64, 8192, TINY_FP16); /* skinny: split-K parallel */
  g.tune.arch = CUDA_SM90;
  g.c_dtype = TINY_FP32;
  g.tune.splitk = 8, g.tune.splitk_kind = CUDA_SPLITK_ATOMIC;
  g.n_epi = 1;
  g.epi[0].kind = CUDA_EPI_BIAS_N, g.epi[0].dtype = TINY_FP32;
  cu_ok(&e, cuda_gen_gemm(&e, mod, &g, "gemm_splitk90"));
  names[n++] = "gemm_splitk90";
  g.epi[0].kind = CUDA_EPI_RELU;
  assert_int_equal(cuda_gen_gemm(&e, mod, &g, "gemm_splitk_relu90"), HARP_E_UNSUPPORTED);
  harp_error_clear(&e);
  assert_string_equal(ms[12].name, "gemm_tf32_tn");
  cu_ok(&e, cuda_gen_gemm(&e, mod, &ms[12].g, "gemm_tf32_tn90")); /* fp32, B K-major: wgmma .tf32 */
  names[n++] = "gemm_tf32_tn90";
  char *src;
  cu_ok(&e, cuda_print(&e, mod, &src));
  /* the source pins the accumulators at every wgmma.fence / wait_group (one
   * kernel's body: the fences before its wait_group 0 and after it) */
  const char *body = strstr(src, "void __launch_bounds__(384, 1) gemm_bias_relu90(");
  assert_non_null(body);
  const char *f0 = strstr(body, "hk_wgmma_fence_acc<32>(&acc[0][0][0]);\n        hk_wgmma_fence();");
  const char *f1 = strstr(body, "hk_wgmma_wait<1>();\n        hk_wgmma_fence_acc<32>(&acc[0][0][0]);");
  const char *f2 = strstr(body, "hk_wgmma_wait<0>();\n      hk_wgmma_fence_acc<32>(&acc[0][0][0]);");
  if (!f0 || !f1 || !f2) fail_msg("the accumulators are not pinned around wgmma.fence / wait_group (%d %d %d)", !!f0, !!f1, !!f2);
  cuda_binary bin;
  cu_ok(&e, cuda_rt_compile(&e, st->rt, src, "sm90.cu", "sm_90a", NULL, 0, &bin));
  for (int i = 0; i < n; i++) {
    char *t = ptx_entry(bin.ptx, names[i]);
    if (!t) fail_msg("no .entry %s", names[i]);
    const char *need[] = {"wgmma.mma_async.sync.aligned.m64n", "wgmma.fence.sync.aligned", "wgmma.commit_group.sync.aligned",
                          "wgmma.wait_group.sync.aligned 1", "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes",
                          "mbarrier.try_wait.parity", "mbarrier.arrive.expect_tx", "setmaxnreg.inc.sync.aligned.u32 232",
                          "setmaxnreg.dec.sync.aligned.u32 40"};
    for (int j = 0; j < 9; j++)
      if (!count(t, need[j])) fail_msg("%s: no %s in the PTX", names[i], need[j]);
    if (strcmp(names[i], "gemm_splitk90") ? !count(t, "cp.async.bulk.tensor.4d.global.shared::cta") : !count(t, "red.global.add.f32"))
      fail_msg("%s: wrong C store", names[i]);
    if (strstr(names[i], "tf32") && !count(t, "k8.f32.tf32.tf32")) fail_msg("%s: no wgmma .tf32", names[i]);
    check_wgmma_acc_order(names[i], t);
    free(t);
  }
  fprintf(stderr, "%d SM90 kernels compiled for sm_90a\n", n);
  cuda_binary_free(&bin);
  free(src);
  cuda_module_free(mod);
}

/* A compile error is an InternalError carrying the NVRTC log. */
static void test_compile_error(void **vs) {
  state *st = *vs;
  SKIP_IF_NO_NVRTC(st);
  harp_error e = {0};
  cuda_binary bin;
  harp_status s = cuda_rt_compile(&e, st->rt, "extern \"C\" __global__ void k() { undefined_thing(); }", "bad.cu",
                                "sm_80", NULL, 0, &bin);
  assert_int_equal(s, HARP_E_INTERNAL);
  assert_non_null(strstr(e.msg, "undefined_thing"));
  assert_null(bin.cubin);
  harp_error_clear(&e);
  assert_int_equal(cuda_rt_compile(&e, st->rt, "", "x.cu", "compute_80; rm -rf", NULL, 0, &bin), HARP_E_INVALID_ARG);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_models_sm80),
      cmocka_unit_test(test_models_sm90a),
      cmocka_unit_test(test_sm90_template),
      cmocka_unit_test(test_compile_error),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
