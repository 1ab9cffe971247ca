/* test_cuda_gpu.c — the test models on a real GPU against the naive
 * references, rtol = atol = 1e-3; skips cleanly (cmocka skip) when there is
 * no GPU, no driver or no NVRTC.  The timing against cuBLAS is a benchmark:
 * bench/cuda_gemm.c (make -C bench cuda-gemm).
 *
 * First run on an H100 on 2026-11-22: every model right on both templates.
 * HARP_GPU_MODEL=name runs one model alone (a faulting kernel poisons the
 * context; scripts/gpu_acceptance.sh `models` runs each in turn). */
#include "cuda_models.h"
#include "cuda_ref.h"
#include "cuda_testutil.h"

typedef struct state {
  cuda_rt *rt;
  bool skip;
} state;

static int setup(void **vs) {
  state *st = calloc(1, sizeof *st);
  *vs = st;
  harp_error e = {0};
  if (cuda_rt_open(&e, NULL, &st->rt)) return -1;
  const cuda_rt_status *s = cuda_rt_status_of(st->rt);
  if (!s->gpu || !s->nvrtc) {
    fprintf(stderr, "no GPU run: %s%s\n", s->gpu ? "" : s->why_no_gpu, s->nvrtc ? "" : s->why_no_nvrtc);
    st->skip = true;
  } else {
    fprintf(stderr, "GPU: %s (sm_%d%d, %d SMs), NVRTC %d.%d\n", s->device_name, s->cc_major, s->cc_minor, s->sm_count,
            s->nvrtc_major, s->nvrtc_minor);
  }
  return 0;
}

static int teardown(void **vs) {
  state *st = *vs;
  cuda_rt_close(st->rt);
  free(st);
  return 0;
}

/* Launch kernel `name` of a loaded module with one host buffer per
 * parameter (for a tensor map: the tensor's buffer); every buffer goes to
 * the device and back. */
static void gpu_run(state *st, cuda_rt_module *mod, const cuda_kernel *k, cu_buf *const *host) {
  harp_error e = {0};
  cuda_devptr dev[CUDA_MAX_PARAMS] = {0};
  void *fn;
  cu_ok(&e, cuda_rt_function(&e, st->rt, mod, k->name, &fn));
  for (int i = 0; i < k->nparams; i++) {
    if (!host[i]) continue;
    for (int j = 0; j < i; j++)
      if (host[j] == host[i]) dev[i] = dev[j];
    if (dev[i]) continue;
    cu_ok(&e, cuda_rt_alloc(&e, st->rt, host[i]->bytes, &dev[i]));
    cu_ok(&e, cuda_rt_htod(&e, st->rt, dev[i], host[i]->p, host[i]->bytes));
  }
  cu_ok(&e, cuda_rt_launch_kernel(&e, st->rt, fn, k, dev, 0));
  cu_ok(&e, cuda_rt_sync(&e, st->rt));
  for (int i = 0; i < k->nparams; i++) {
    if (!host[i]) continue;
    bool first = true;
    for (int j = 0; j < i; j++) first = first && host[j] != host[i];
    if (!first) continue;
    cu_ok(&e, cuda_rt_dtoh(&e, st->rt, host[i]->p, dev[i], host[i]->bytes));
    cuda_rt_free(st->rt, dev[i]);
  }
}

/* 0 when model `md` matches its reference; a mismatch is printed and counted
 * (the other models still run), a failed CUDA call fails the test. */
static int64_t check_model(state *st, cuda_rt_module *mod, const cuda_module *m, const cu_model *md) {
  const cuda_kernel *k = cuda_module_find(m, md->name);
  assert_non_null(k);
  cu_rng r = {77};
  cu_buf b[8] = {0};
  cu_buf *args[CUDA_MAX_PARAMS] = {0};
  float *want = NULL;
  cu_buf *out = NULL;
  int64_t n = 0;
  switch (md->kind) {
  case CU_M_GEMM: {
    const cuda_gemm_spec *s = &md->g;
    b[0] = cu_random(s->a_dtype, s->M * s->K, &r, 1), b[1] = cu_random(s->b_dtype, s->K * s->N, &r, 1);
    b[2] = cu_buf_new(s->c_dtype, s->M * s->N);
    cu_buf *ebp[CUDA_MAX_EPI] = {0};
    for (int q = 0; q < s->n_epi; q++)
      if (s->epi[q].kind == CUDA_EPI_BIAS_N) {
        b[3] = cu_random(s->epi[q].dtype, s->N, &r, 1);
        ebp[q] = &b[3];
      }
    bool sm90 = k->params[0].kind == CUDA_P_TMAP;
    args[0] = &b[0], args[1] = &b[1], args[2] = &b[2];
    int ep0 = sm90 ? 4 : 3;
    if (sm90) args[3] = &b[2];
    for (int q = 0; q < s->n_epi; q++) args[ep0 + q] = ebp[q];
    n = s->M * s->N, out = &b[2];
    want = calloc((size_t)n, sizeof(float));
    ref_gemm(s, &b[0], &b[1], ebp, want);
    break;
  }
  case CU_M_CONV: {
    const cuda_conv_spec *s = &md->c;
    int64_t oh, ow;
    assert_true(cuda_conv_out_hw(s, &oh, &ow));
    b[0] = cu_random(s->w_dtype, s->oc * (s->c / s->groups) * s->kh * s->kw, &r, 1);
    b[1] = cu_random(s->x_dtype, s->n * s->c * s->h * s->w, &r, 1);
    n = s->n * s->oc * oh * ow;
    b[2] = cu_buf_new(s->y_dtype, n);
    cu_buf *ebp[CUDA_MAX_EPI] = {0};
    for (int q = 0; q < s->n_epi; q++)
      if (s->epi[q].kind == CUDA_EPI_BIAS_M) {
        b[3] = cu_random(s->epi[q].dtype, s->oc, &r, 1);
        ebp[q] = args[3 + q] = &b[3];
      }
    args[0] = &b[0], args[1] = &b[1], args[2] = &b[2], out = &b[2];
    want = calloc((size_t)n, sizeof(float));
    ref_conv(s, &b[1], &b[0], ebp, want);
    break;
  }
  case CU_M_ATTN: {
    const cuda_attn_spec *s = &md->a;
    b[0] = cu_random(s->q_dtype, s->b * s->h * s->m * s->d, &r, 1);
    b[1] = cu_random(s->kv_dtype, s->b * s->h * s->n * s->d, &r, 1);
    b[2] = cu_random(s->kv_dtype, s->b * s->h * s->n * s->dv, &r, 1);
    n = s->b * s->h * s->m * s->dv;
    b[3] = cu_buf_new(s->o_dtype, n);
    args[0] = &b[0], args[1] = &b[1], args[2] = &b[2], args[4] = &b[3], out = &b[3];
    want = calloc((size_t)n, sizeof(float));
    ref_attn(s, &b[0], &b[1], &b[2], NULL, want);
    break;
  }
  case CU_M_SOFTMAX:
  case CU_M_LAYERNORM: {
    const cuda_rownorm_spec *s = &md->r;
    bool ln = md->kind == CU_M_LAYERNORM;
    b[0] = cu_random(s->in_dtype, (s->rows - 1) * s->row_stride + s->cols, &r, 3);
    n = s->rows * s->cols;
    b[1] = cu_buf_new(s->out_dtype, n);
    if (ln && s->has_gamma) b[2] = cu_random(s->gamma_dtype, s->cols, &r, 1);
    if (ln && s->has_beta) b[3] = cu_random(s->beta_dtype, s->cols, &r, 1);
    args[0] = &b[0];
    if (ln) args[1] = s->has_gamma ? &b[2] : NULL, args[2] = s->has_beta ? &b[3] : NULL, args[3] = &b[1];
    else args[1] = &b[1];
    out = &b[1];
    want = calloc((size_t)n, sizeof(float));
    ref_rownorm(s, ln, &b[0], &b[2], &b[3], want);
    break;
  }
  case CU_M_EWISE: {
    const cuda_ew_spec *s = &md->ew;
    n = 1;
    for (int d = 0; d < s->rank; d++) n *= s->shape[d];
    for (int j = 0; j < s->ninputs; j++) {
      int64_t cnt = 1;
      for (int d = 0; d < s->rank; d++) cnt += (s->shape[d] - 1) * s->in[j].strides[d];
      b[j] = cu_random(s->in[j].dtype, cnt, &r, 2);
      args[j] = &b[j];
    }
    b[7] = cu_buf_new(s->out_dtype, n);
    args[s->ninputs] = &b[7], out = &b[7];
    want = calloc((size_t)n, sizeof(float));
    for (int64_t x = 0; x < n; x++) want[x] = ref_ew_eval(s, args, x);
    break;
  }
  case CU_M_REDUCE: {
    const cuda_reduce_spec *s = &md->red;
    b[0] = cu_random(s->in_dtype, (s->outer - 1) * s->s_outer + (s->red - 1) * s->s_red + (s->inner - 1) * s->s_inner + 1,
                     &r, 1);
    n = s->outer * s->inner;
    b[1] = cu_buf_new(s->out_dtype, n);
    args[0] = &b[0], args[1] = &b[1], out = &b[1];
    want = calloc((size_t)n, sizeof(float));
    ref_reduce(s, &b[0], want);
    break;
  }
  }
  gpu_run(st, mod, k, args);
  int64_t bad = cu_compare(md->name, out, want, n, 1e-3);
  fprintf(stderr, "%s [%s]: %s\n", md->name, k->params[0].kind == CUDA_P_TMAP ? "sm90" : "sm80", bad ? "WRONG" : "ok");
  free(want);
  for (int i = 0; i < 8; i++) cu_buf_free(&b[i]);
  return bad;
}

static void run_models(state *st, cuda_arch arch) {
  harp_error e = {0};
  cu_model ms[CU_NMODELS];
  cu_models(ms, arch);
  cuda_module *m;
  cu_ok(&e, cuda_module_new(&e, arch, &m));
  bool used[CU_NMODELS] = {0};
  const char *only = getenv("HARP_GPU_MODEL"); /* one model alone: a faulting kernel poisons the context */
  for (int i = 0; i < CU_NMODELS; i++) {
    if (arch == CUDA_SM90 && ms[i].kind != CU_M_GEMM) continue; /* SM90: the GEMM template only */
    if (only && strcmp(only, ms[i].name)) continue;
    harp_status s = cu_model_gen(&e, m, &ms[i]);
    if (s == HARP_E_UNSUPPORTED && arch == CUDA_SM90) {
      harp_error_clear(&e);
      continue;
    }
    cu_ok(&e, s);
    used[i] = true;
  }
  char *src;
  cu_ok(&e, cuda_print(&e, m, &src));
  cuda_binary bin;
  cu_ok(&e, cuda_rt_compile(&e, st->rt, src, "gpu.cu", arch == CUDA_SM90 ? "sm_90a" : cuda_rt_arch(st->rt), NULL, 0, &bin));
  cuda_rt_module *mod;
  cu_ok(&e, cuda_rt_load(&e, st->rt, &bin, &mod));
  int64_t bad = 0;
  for (int i = 0; i < CU_NMODELS; i++)
    if (used[i]) bad += check_model(st, mod, m, &ms[i]) != 0;
  assert_int_equal(bad, 0);
  cuda_rt_unload(st->rt, mod);
  cuda_binary_free(&bin);
  free(src);
  cuda_module_free(m);
}

static void test_models_sm80_template(void **vs) {
  state *st = *vs;
  if (st->skip) skip();
  run_models(st, CUDA_SM80);
}

static void test_models_sm90_template(void **vs) {
  state *st = *vs;
  if (st->skip || cuda_rt_status_of(st->rt)->cc_major != 9) skip();
  run_models(st, CUDA_SM90);
}

/* One arena and the ConstPool per model: upload once, read back. */
static void test_model_memory(void **vs) {
  state *st = *vs;
  if (st->skip) skip();
  harp_error e = {0};
  unsigned char consts[4096];
  for (int i = 0; i < 4096; i++) consts[i] = (unsigned char)(i * 7);
  cuda_model_mem mm;
  cu_ok(&e, cuda_model_mem_init(&e, st->rt, 1 << 20, consts, sizeof consts, &mm));
  unsigned char back[4096];
  cu_ok(&e, cuda_rt_dtoh(&e, st->rt, back, mm.constpool, sizeof back));
  assert_memory_equal(back, consts, sizeof back);
  cuda_model_mem_free(st->rt, &mm);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_models_sm80_template),
      cmocka_unit_test(test_models_sm90_template),
      cmocka_unit_test(test_model_memory),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
