/* test_cuda_sim90.c — the SM90 template (TMA, mbarrier, wgmma, warp
 * specialisation, persistent grouped raster, TMA-store epilogue, split-K)
 * executed on the CPU SIMT simulator against the naive GEMM; with sizes
 * read at run time, a residual epilogue whose strides are formulas.
 *
 * The simulator emulates the mbarrier phase/transaction rules, TMA tiles
 * with the 128-byte swizzle and zero fill out of bounds, and wgmma reading
 * its operands through the matrix descriptors with the PTX ISA's canonical
 * layouts (9.7.15.5.1.2) — an independent reading of the same document the
 * generator's descriptor constants (LBO, SBO, k-step offsets) come from.
 * A pipeline with a wrong barrier parity must deadlock (and be reported).
 *
 * Mutants (docs/sm90-review.md): kernel 0 with one hardware rule broken —
 * the SMEM base not rounded to 1024, a fence or a wait dropped, a register
 * budget the pool cannot give, the accumulators read before the last
 * wgmma.wait_group — each must stop the simulator with the rule's message
 * (a simulator that ran them to the right result was more lenient than
 * Hopper).  CPU-simulated only: nothing here ran on Hopper.  Skips without
 * g++. */
#include "cuda_ref.h"
#include "cuda_testutil.h"

#define NMUT 8 /* kernels 4 .. 4 + NMUT - 1: the mutants of kernel 0 */
typedef struct state {
  cuda_module *m;
  cu_sim sim;
  bool skip;
  cuda_gemm_spec g[9 + NMUT]; /* 4 + NMUT: the multiplying epilogue; 5..7 + NMUT: TF32; 8 + NMUT: run-time sizes */
} state;

static void make_specs(cuda_gemm_spec *g) {
  /* 0: fp16, B N-major (imm-trans-b), tails in M and N, bias + ReLU, persistent */
  cuda_gemm_spec_init(&g[0], 200, 136, 160, TINY_FP16);
  g[0].tune.arch = CUDA_SM90;
  g[0].tune.persistent = true;
  g[0].tune.group_m = 2;
  g[0].n_epi = 2;
  g[0].epi[0].kind = CUDA_EPI_BIAS_N, g[0].epi[0].dtype = TINY_FP16;
  g[0].epi[1].kind = CUDA_EPI_RELU;
  /* 1: bf16, B K-major, batch 2, fp32 out with residual + GELU, BN 64, 2 stages */
  cuda_gemm_spec_init(&g[1], 130, 72, 96, TINY_BF16);
  g[1].tune.arch = CUDA_SM90;
  g[1].tune.bn = 64, g[1].tune.stages = 2;
  g[1].batch[0] = 2;
  g[1].b_sk = 1, g[1].b_sn = 96;
  g[1].a_sb[0] = 130 * 96, g[1].b_sb[0] = 72 * 96;
  g[1].c_dtype = TINY_FP32, g[1].c_sb[0] = 130 * 72;
  g[1].n_epi = 2;
  g[1].epi[0].kind = CUDA_EPI_RESIDUAL, g[1].epi[0].dtype = TINY_FP16;
  g[1].epi[0].s_b0 = 130 * 72, g[1].epi[0].s_m = 72, g[1].epi[0].s_n = 1;
  g[1].epi[1].kind = CUDA_EPI_GELU;
  /* 2: skinny, split-K parallel into a zeroed fp32 C, bias from slice 0 */
  cuda_gemm_spec_init(&g[2], 64, 64, 1024, TINY_FP16);
  g[2].tune.arch = CUDA_SM90;
  g[2].tune.splitk = 4, g[2].tune.splitk_kind = CUDA_SPLITK_ATOMIC;
  g[2].c_dtype = TINY_FP32;
  g[2].n_epi = 1;
  g[2].epi[0].kind = CUDA_EPI_BIAS_N, g[2].epi[0].dtype = TINY_FP32;
  /* 3: = 0 with the producer waiting on the wrong parity (must deadlock) */
  g[3] = g[0];
  for (int i = 4; i < 4 + NMUT; i++) g[i] = g[0];
  /* 4 + NMUT: bf16, batch norm and more: x s[m], + t[n], - 0.5, x R, relu, x 3 + 0.125 */
  cuda_gemm_spec *h = &g[4 + NMUT];
  cuda_gemm_spec_init(h, 136, 72, 64, TINY_BF16);
  h->tune.arch = CUDA_SM90;
  h->tune.bn = 64;
  h->n_epi = 6;
  h->epi[0].kind = CUDA_EPI_BIAS_M, h->epi[0].dtype = TINY_FP32, h->epi[0].mul = true;
  h->epi[1].kind = CUDA_EPI_BIAS_N, h->epi[1].dtype = TINY_BF16;
  h->epi[2].kind = CUDA_EPI_SCALE, h->epi[2].scale = 1.0f, h->epi[2].shift = -0.5f;
  h->epi[3].kind = CUDA_EPI_RESIDUAL, h->epi[3].dtype = TINY_FP16, h->epi[3].mul = true;
  h->epi[3].s_m = 72, h->epi[3].s_n = 1;
  h->epi[4].kind = CUDA_EPI_RELU;
  h->epi[5].kind = CUDA_EPI_SCALE, h->epi[5].scale = 3.0f, h->epi[5].shift = 0.125f;
  /* 5 + NMUT: fp32 as TF32 (wgmma k8, truncating), B K-major, tails, persistent, bias + ReLU */
  h = &g[5 + NMUT];
  cuda_gemm_spec_init(h, 200, 136, 100, TINY_FP32);
  h->tune.arch = CUDA_SM90;
  h->tune.persistent = true;
  h->b_sk = 1, h->b_sn = 100;
  h->n_epi = 2;
  h->epi[0].kind = CUDA_EPI_BIAS_N, h->epi[0].dtype = TINY_FP32;
  h->epi[1].kind = CUDA_EPI_RELU;
  /* 6 + NMUT: TF32, BN 256, batch 2, fp16 out */
  h = &g[6 + NMUT];
  cuda_gemm_spec_init(h, 130, 264, 64, TINY_FP32);
  h->tune.arch = CUDA_SM90;
  h->tune.bn = 256;
  h->batch[0] = 2;
  h->b_sk = 1, h->b_sn = 64;
  h->a_sb[0] = 130 * 64, h->b_sb[0] = 264 * 64;
  h->c_dtype = TINY_FP16, h->c_sb[0] = 130 * 264;
  /* 7 + NMUT: TF32 split-K parallel */
  h = &g[7 + NMUT];
  cuda_gemm_spec_init(h, 64, 64, 1024, TINY_FP32);
  h->tune.arch = CUDA_SM90;
  h->b_sk = 1, h->b_sn = 1024;
  h->tune.splitk = 4, h->tune.splitk_kind = CUDA_SPLITK_ATOMIC;
  /* 8 + NMUT: a ShapeSet build (sizes hp_sv0 = M, hp_sv1 = the residual's row
   * length), batch 2, A and C [2][M][64], a residual [2][M][hp_sv1] whose
   * row stride hp_sv1 and batch stride M x hp_sv1 are read at run time in
   * the wgmma Epilogue; made at the corner hi M = 96, rows of 96 */
  h = &g[8 + NMUT];
  cuda_gemm_spec_init(h, 96, 64, 64, TINY_FP16);
  h->tune.arch = CUDA_SM90;
  h->batch[0] = 2;
  h->a_sb[0] = h->c_sb[0] = 96 * 64, h->b_sb[0] = 0;
  h->n_epi = 1;
  h->epi[0].kind = CUDA_EPI_RESIDUAL, h->epi[0].dtype = TINY_FP16;
  h->epi[0].s_b0 = 96 * 96, h->epi[0].s_m = 96, h->epi[0].s_n = 1;
  h->nsyms = 2;
  h->rt_m = (cuda_rtsz){.lit = 1, .n = 1, .sym = {0}};
  h->rt_sb[0][0] = h->rt_sb[2][0] = (cuda_rtsz){.lit = 64, .n = 1, .sym = {0}};
  h->rt_epi[0][0] = (cuda_rtsz){.lit = 1, .n = 2, .sym = {0, 1}};
  h->rt_epi[0][2] = (cuda_rtsz){.lit = 1, .n = 1, .sym = {1}};
}

static int break_parity(cuda_stmt *st) {
  int n = 0;
  for (int i = 0; i < st->nbody; i++) {
    cuda_stmt *c = st->body[i];
    if (c->kind == CU_MBAR_WAIT && !strcmp(c->s[1], "ph ^ 1")) {
      c->s[1] = "ph";
      n++;
    }
    n += break_parity(c);
  }
  for (int i = 0; i < st->nels; i++) n += break_parity(st->els[i]);
  return n;
}

/* ---- mutants ---- */
typedef bool (*stmt_pred)(const cuda_stmt *);
/* Apply f to the n-th statement (pre-order, from 0) of the tree that p
 * matches; returns 1 if it was found. */
static int mutate_nth(cuda_stmt *st, stmt_pred p, int n, void (*f)(cuda_stmt *), int *seen) {
  for (int pass = 0; pass < 2; pass++) {
    int cnt = pass ? st->nels : st->nbody;
    cuda_stmt **v = pass ? st->els : st->body;
    for (int i = 0; i < cnt; i++) {
      if (p(v[i]) && (*seen)++ == n) {
        f(v[i]);
        return 1;
      }
      if (mutate_nth(v[i], p, n, f, seen)) return 1;
    }
  }
  return 0;
}
static void to_comment(cuda_stmt *st) {
  st->kind = CU_COMMENT, st->s[0] = "(mutant: statement removed)", st->nbody = st->nels = 0;
}
static bool is_fence_proxy(const cuda_stmt *st) { return st->kind == CU_FENCE_PROXY_ASYNC; }
static bool is_wgmma_fence(const cuda_stmt *st) { return st->kind == CU_WGMMA_FENCE; }
static bool is_wgmma_wait0(const cuda_stmt *st) { return st->kind == CU_WGMMA_WAIT && st->i[0] == 0; }
static bool is_setmaxnreg_inc(const cuda_stmt *st) { return st->kind == CU_SETMAXNREG && st->i[1] == 1; }
static bool is_bulk_wait(const cuda_stmt *st) { return st->kind == CU_CALL && !strcmp(st->s[0], "hk_bulk_wait_read0()"); }
static bool is_init_fence(const cuda_stmt *st) { return st->kind == CU_CALL && !strcmp(st->s[0], "hk_mbar_init_fence()"); }
static bool is_smem_base(const cuda_stmt *st) { return st->kind == CU_DECL && !strcmp(st->s[1], "hk_sb"); }
static void unrounded_base(cuda_stmt *st) { st->s[3] = "hk_smem_addr(hk_smem)"; }
static void wait1(cuda_stmt *st) { st->i[0] = 1; }
static void inc240(cuda_stmt *st) { st->i[0] = 240; }

/* Mutant i of kernel 0 (kernel 4 + i) and the message the simulator must stop with. */
static const char *const mutant_msg[NMUT] = {
    "not 1024-aligned",                          /* 0: SMEM base not rounded up to 1024 */
    "without a fence.proxy.async",               /* 1: st.shared -> TMA store without fence.proxy.async */
    "changed before cp.async.bulk.wait_group.read", /* 2: staging rewritten before the previous store read it */
    "never waited for",                          /* 3: exit without cp.async.bulk.wait_group.read */
    "setmaxnreg.inc",                            /* 4: consumers ask 240 registers: 2 x 128 x 72 > the producer's 128 x 128 */
    "wgmma results in flight",                   /* 5: the epilogue after wait_group 1 instead of 0 */
    "without a wgmma.fence",                     /* 6: no wgmma.fence before the wgmmas */
    "no fence.mbarrier_init / fence.proxy.async", /* 7: mbarrier.init not fenced before TMA completes on it */
};
static void make_mutant(cuda_kernel *k, int i) {
  int seen = 0, n = 0;
  switch (i) {
  case 0: n = mutate_nth(k->body, is_smem_base, 0, unrounded_base, &seen); break;
  case 1: n = mutate_nth(k->body, is_fence_proxy, 1, to_comment, &seen); break; /* [0] follows the mbarrier inits */
  case 2:
    n = mutate_nth(k->body, is_bulk_wait, 0, to_comment, &seen);
    k->grid[0] = 1; /* one CTA walks every tile: the staging tile is reused */
    break;
  case 3: n = mutate_nth(k->body, is_bulk_wait, 1, to_comment, &seen); break;
  case 4: n = mutate_nth(k->body, is_setmaxnreg_inc, 0, inc240, &seen); break;
  case 5: n = mutate_nth(k->body, is_wgmma_wait0, 0, wait1, &seen); break;
  case 6: n = mutate_nth(k->body, is_wgmma_fence, 0, to_comment, &seen); break;
  case 7:
    n = mutate_nth(k->body, is_init_fence, 0, to_comment, &seen);
    seen = 0;
    n &= mutate_nth(k->body, is_fence_proxy, 0, to_comment, &seen);
    break;
  }
  assert_int_equal(n, 1);
}

static int setup(void **vs) {
  state *st = calloc(1, sizeof *st);
  *vs = st;
  harp_error e = {0};
  make_specs(st->g);
  cu_ok(&e, cuda_module_new(&e, CUDA_SM90, &st->m));
  char nm[16];
  for (int i = 0; i < 9 + NMUT; i++) {
    snprintf(nm, sizeof nm, "h%d", i);
    cu_ok(&e, cuda_gen_gemm(&e, st->m, &st->g[i], nm));
    if (i >= 4 && i < 4 + NMUT) make_mutant((cuda_kernel *)cuda_module_find(st->m, nm), i - 4);
  }
  assert_int_equal(break_parity(((cuda_kernel *)cuda_module_find(st->m, "h3"))->body), 1);
  char *src;
  cu_ok(&e, cuda_print(&e, st->m, &src));
  st->skip = !cu_sim_build(&st->sim, src);
  free(src);
  return 0;
}

static int teardown(void **vs) {
  state *st = *vs;
  cu_sim_free(&st->sim);
  cuda_module_free(st->m);
  free(st);
  return 0;
}

static int64_t span(int64_t sb0, int64_t sb1, const int64_t *batch, int64_t last) {
  return (batch[0] - 1) * sb0 + (batch[1] - 1) * sb1 + last + 1;
}

/* Run SM90 kernel i; returns the simulator status (0) and fills *bad. */
static int run(state *st, int i, int64_t *bad, unsigned long long stats[7]) {
  const cuda_gemm_spec *s = &st->g[i];
  cu_rng r = {(uint64_t)i + 900};
  int64_t na = span(s->a_sb[0], s->a_sb[1], s->batch, (s->M - 1) * s->a_sm + (s->K - 1) * s->a_sk);
  int64_t nb = span(s->b_sb[0], s->b_sb[1], s->batch, (s->K - 1) * s->b_sk + (s->N - 1) * s->b_sn);
  int64_t nc = span(s->c_sb[0], s->c_sb[1], s->batch, (s->M - 1) * s->c_sm + (s->N - 1) * s->c_sn);
  cu_buf A = cu_random(s->a_dtype, na, &r, 1), B = cu_random(s->b_dtype, nb, &r, 1), C = cu_buf_new(s->c_dtype, nc),
         Cx = cu_buf_new(s->c_dtype, nc);
  bool splitk = s->tune.splitk > 1;
  if (!splitk) memset(Cx.p, 0xFF, Cx.bytes); /* the TMA store must write every element */
  char nm[16];
  snprintf(nm, sizeof nm, "h%d", i);
  const cuda_kernel *k = cuda_module_find(st->m, nm);
  cu_buf blobs[3], eb[CUDA_MAX_EPI];
  cu_buf *ebp[CUDA_MAX_EPI] = {0};
  cu_buf *args[4 + CUDA_MAX_EPI] = {0};
  for (int p = 0; p < 3; p++) {
    blobs[p] = cu_tmap_blob(k->params[p].tmap, 32 + p);
    args[p] = &blobs[p];
  }
  args[3] = &C;
  for (int q = 0; q < s->n_epi; q++) {
    const cuda_epi *ep = &s->epi[q];
    int64_t n = ep->kind == CUDA_EPI_BIAS_M ? s->M : ep->kind == CUDA_EPI_BIAS_N ? s->N : ep->kind == CUDA_EPI_RESIDUAL ? nc : 0;
    if (!n) continue;
    eb[q] = cu_random(ep->dtype, n, &r, 1);
    ebp[q] = args[4 + q] = &eb[q];
  }
  cu_buf *extra[3] = {&A, &B, &Cx};
  int rc = cu_sim_run_x(&st->sim, k, args, extra, 3, stats, 5);
  if (rc == 0) {
    float *want = calloc((size_t)nc, sizeof(float));
    ref_gemm(s, &A, &B, ebp, want);
    /* fp32 operands: the reference truncates them to TF32 as wgmma does; fp32 accumulation is what is left */
    double tol = s->a_dtype == TINY_BF16 ? 2e-3 : s->a_dtype == TINY_FP32 && s->c_dtype == TINY_FP32 ? 1e-4 : 1e-3;
    *bad = cu_compare(nm, splitk ? &C : &Cx, want, nc, tol);
    free(want);
  }
  cu_buf_free(&A);
  cu_buf_free(&B);
  cu_buf_free(&C);
  cu_buf_free(&Cx);
  for (int p = 0; p < 3; p++) cu_buf_free(&blobs[p]);
  for (int q = 0; q < s->n_epi; q++)
    if (ebp[q]) cu_buf_free(ebp[q]);
  return rc;
}

#define SKIP_IF_NO_SIM(st) \
  do {                     \
    if ((st)->skip) skip(); \
  } while (0)

static void test_wgmma_nmajor_bias_relu(void **vs) {
  state *st = *vs;
  SKIP_IF_NO_SIM(st);
  int64_t bad = -1;
  unsigned long long stats[7];
  assert_int_equal(run(st, 0, &bad, stats), 0);
  assert_int_equal(bad, 0);
  assert_true(stats[5] > 0 && stats[6] > 0); /* wgmma and TMA ran */
  assert_int_equal(stats[2], 0);            /* no mma.sync: this is the SM90 path */
}

static void test_wgmma_kmajor_batched_fp32(void **vs) {
  state *st = *vs;
  SKIP_IF_NO_SIM(st);
  int64_t bad = -1;
  assert_int_equal(run(st, 1, &bad, NULL), 0);
  assert_int_equal(bad, 0);
}

static void test_splitk_parallel(void **vs) {
  state *st = *vs;
  SKIP_IF_NO_SIM(st);
  int64_t bad = -1;
  assert_int_equal(run(st, 2, &bad, NULL), 0);
  assert_int_equal(bad, 0);
}

/* x tensor and + constant steps on the wgmma accumulators */
static void test_wgmma_mul_shift(void **vs) {
  state *st = *vs;
  SKIP_IF_NO_SIM(st);
  int64_t bad = -1;
  assert_int_equal(run(st, 4 + NMUT, &bad, NULL), 0);
  assert_int_equal(bad, 0);
}

/* fp32 operands on wgmma .tf32: K-major B, BN 128 and 256, batch, split-K */
static void test_wgmma_tf32(void **vs) {
  state *st = *vs;
  SKIP_IF_NO_SIM(st);
  for (int i = 5; i < 8; i++) {
    int64_t bad = -1;
    unsigned long long stats[7];
    assert_int_equal(run(st, i + NMUT, &bad, stats), 0);
    assert_int_equal(bad, 0);
    assert_true(stats[5] > 0);
  }
  /* TF32 wgmma has no transpose: an N-major B is refused (the SM80 template takes it) */
  cuda_module *m;
  harp_error e = {0};
  cu_ok(&e, cuda_module_new(&e, CUDA_SM90, &m));
  cuda_gemm_spec s;
  cuda_gemm_spec_init(&s, 128, 128, 64, TINY_FP32);
  s.tune.arch = CUDA_SM90;
  assert_int_equal(cuda_gen_gemm(&e, m, &s, "nmajor"), HARP_E_UNSUPPORTED);
  assert_non_null(strstr(e.msg, "K-major"));
  s.b_sk = 1, s.b_sn = 64, s.math = CUDA_MATH_FP32;
  assert_int_equal(cuda_gen_gemm(&e, m, &s, "strict"), HARP_E_UNSUPPORTED);
  cuda_module_free(m);
}

/* Kernel 8 + NMUT (built at M = 96, residual rows of 96) at the binding
 * M = 40, residual rows of 72: its maps encoded at the binding, the
 * residual's strides from the sizes, against the naive GEMM at the binding
 * (the residual's buffer holds the binding's elements only: a stride of
 * the corner's reads past it, which the simulator refuses). */
static void test_wgmma_rt_residual(void **vs) {
  state *st = *vs;
  SKIP_IF_NO_SIM(st);
  const int64_t sv[2] = {40, 72};
  cuda_gemm_spec b = st->g[8 + NMUT]; /* the GEMM at the binding */
  b.nsyms = 0, b.M = sv[0];
  b.a_sb[0] = b.c_sb[0] = sv[0] * 64;
  b.epi[0].s_b0 = sv[0] * sv[1], b.epi[0].s_m = sv[1];
  cu_rng r = {77};
  int64_t nc = 2 * sv[0] * 64;
  cu_buf A = cu_random(TINY_FP16, nc, &r, 1), B = cu_random(TINY_FP16, 64 * 64, &r, 1), C = cu_buf_new(TINY_FP16, nc),
         Cx = cu_buf_new(TINY_FP16, nc), R = cu_random(TINY_FP16, 2 * sv[0] * sv[1], &r, 1);
  memset(Cx.p, 0xFF, Cx.bytes);
  char nm[16];
  snprintf(nm, sizeof nm, "h%d", 8 + NMUT);
  const cuda_kernel *k = cuda_module_find(st->m, nm);
  assert_non_null(k);
  assert_int_equal(k->params[k->nparams - 1].kind, CUDA_P_LONG);
  cu_buf blobs[3];
  cu_buf *args[CUDA_MAX_PARAMS] = {0}, *eb[1] = {&R};
  for (int p = 0; p < 3; p++) {
    cuda_tmap_desc d;
    cuda_tmap_at(k->params[p].tmap, sv, &d);
    blobs[p] = cu_tmap_blob(&d, 32 + p);
    args[p] = &blobs[p];
  }
  args[3] = &C, args[4] = &R;
  cu_buf *extra[3] = {&A, &B, &Cx};
  st->sim.sv = sv;
  int rc = cu_sim_run_x(&st->sim, k, args, extra, 3, NULL, 5);
  st->sim.sv = NULL;
  assert_int_equal(rc, 0);
  float *want = calloc((size_t)nc, sizeof(float));
  ref_gemm(&b, &A, &B, eb, want);
  assert_int_equal(cu_compare("wgmma rt residual", &Cx, want, nc, 1e-3), 0);
  free(want);
  cu_buf *all[] = {&A, &B, &C, &Cx, &R, &blobs[0], &blobs[1], &blobs[2]};
  for (int i = 0; i < 8; i++) cu_buf_free(all[i]);
}
static void test_wrong_parity_deadlocks(void **vs) {
  state *st = *vs;
  SKIP_IF_NO_SIM(st);
  int64_t bad = -1;
  assert_int_equal(run(st, 3, &bad, NULL), 3);
}

/* The simulator's stderr of the last run holds `what`. */
static bool sim_said(const state *st, const char *what) {
  char path[512], buf[4096] = {0};
  snprintf(path, sizeof path, "%s/stderr.txt", st->sim.dir);
  FILE *f = fopen(path, "r");
  if (!f) return false;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  return strstr(buf, what) != NULL;
}

static void test_mutants_stop(void **vs) {
  state *st = *vs;
  SKIP_IF_NO_SIM(st);
  int missed = 0;
  for (int i = 0; i < NMUT; i++) {
    int64_t bad = -1;
    int rc = run(st, 4 + i, &bad, NULL);
    if (rc != 3 || !sim_said(st, mutant_msg[i])) {
      print_message("mutant %d: the simulator returned %d (%lld elements off) without \"%s\"\n", i, rc, (long long)bad,
                    mutant_msg[i]);
      missed++;
    }
  }
  assert_int_equal(missed, 0);
}

/* A tensor map the driver would refuse (a row stride not a multiple of 16
 * bytes) is refused by the simulator's TMA too. */
static void test_bad_tensor_map(void **vs) {
  state *st = *vs;
  SKIP_IF_NO_SIM(st);
  cuda_kernel *k = (cuda_kernel *)cuda_module_find(st->m, "h0");
  cuda_tmap_desc *a = (cuda_tmap_desc *)k->params[0].tmap, keep = *a;
  a->strides[0] += 8;
  a->dims[1] = 150; /* (the rows still fit in the buffer) */
  int64_t bad = -1;
  int rc = run(st, 0, &bad, NULL);
  *a = keep;
  assert_int_equal(rc, 3);
  assert_true(sim_said(st, "globalStrides[0]"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_wgmma_nmajor_bias_relu),
      cmocka_unit_test(test_wgmma_kmajor_batched_fp32),
      cmocka_unit_test(test_splitk_parallel),
      cmocka_unit_test(test_wgmma_mul_shift),
      cmocka_unit_test(test_wgmma_tf32),
      cmocka_unit_test(test_wgmma_rt_residual),
      cmocka_unit_test(test_wrong_parity_deadlocks),
      cmocka_unit_test(test_mutants_stop),
      cmocka_unit_test(test_bad_tensor_map),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
