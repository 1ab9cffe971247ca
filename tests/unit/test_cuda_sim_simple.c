/* test_cuda_sim_simple.c — the non-contraction kernels (elementwise chains,
 * reductions, softmax, layernorm) run on the CPU SIMT simulator against
 * naive references.  Skips when g++ is missing. */
#include <math.h>

#include "cuda_ref.h"
#include "cuda_testutil.h"

typedef struct state {
  cuda_module *m;
  cu_sim sim;
  bool skip;
  cuda_ew_spec ew[3];
  cuda_reduce_spec red[3];
  cuda_rownorm_spec sm[3], ln[2];
  cuda_rownorm_spec rt[3]; /* row lengths (and rows) read at run time: rt_specs */
} state;

static void ew_in(cuda_ew_instr *in, tiny_op op, int a, int b, int c) {
  memset(in, 0, sizeof *in);
  in->op = op, in->a = a, in->b = b, in->c = c;
  in->dtype = TINY_FP32;
}

static void make_specs(state *st) {
  /* ew0: [4][33][21] fp16 + bias[21] (broadcast) -> gelu -> where(gelu < s[4], 0.25*gelu, gelu) -> fp16 */
  cuda_ew_spec *e = &st->ew[0];
  memset(e, 0, sizeof *e);
  e->rank = 3, e->shape[0] = 4, e->shape[1] = 33, e->shape[2] = 21;
  e->ninputs = 3;
  e->in[0].dtype = TINY_FP16, e->in[0].strides[0] = 33 * 21, e->in[0].strides[1] = 21, e->in[0].strides[2] = 1;
  e->in[1].dtype = TINY_FP16, e->in[1].strides[2] = 1;
  e->in[2].dtype = TINY_FP32, e->in[2].strides[0] = 1;
  cuda_ew_instr *I = e->instr;
  ew_in(&I[0], TINY_INPUT, 0, 0, 0), I[0].input = 0;
  ew_in(&I[1], TINY_INPUT, 0, 0, 0), I[1].input = 1;
  ew_in(&I[2], TINY_ADD, 0, 1, 0);
  ew_in(&I[3], TINY_GELU, 2, 0, 0);
  ew_in(&I[4], TINY_INPUT, 0, 0, 0), I[4].input = 2;
  ew_in(&I[5], TINY_CMPLT, 3, 4, 0);
  ew_in(&I[6], TINY_CONST, 0, 0, 0), I[6].imm = 0.25;
  ew_in(&I[7], TINY_MUL, 3, 6, 0);
  ew_in(&I[8], TINY_WHERE, 5, 7, 3);
  ew_in(&I[9], TINY_CAST, 8, 0, 0), I[9].dtype = TINY_BF16;
  e->ninstr = 10;
  e->out_dtype = TINY_FP16;
  /* ew1: fp32 [1000] and bf16 [1000] contiguous -> max(a, b) * exp2(a) - sqrt(|b|)... fp32 out */
  e = &st->ew[1];
  memset(e, 0, sizeof *e);
  e->rank = 1, e->shape[0] = 1000, e->ninputs = 2;
  e->in[0].dtype = TINY_FP32, e->in[0].strides[0] = 1;
  e->in[1].dtype = TINY_BF16, e->in[1].strides[0] = 1;
  I = e->instr;
  ew_in(&I[0], TINY_INPUT, 0, 0, 0), I[0].input = 0;
  ew_in(&I[1], TINY_INPUT, 0, 0, 0), I[1].input = 1;
  ew_in(&I[2], TINY_MAX, 0, 1, 0);
  ew_in(&I[3], TINY_EXP2, 0, 0, 0);
  ew_in(&I[4], TINY_MUL, 2, 3, 0);
  ew_in(&I[5], TINY_MUL, 1, 1, 0);
  ew_in(&I[6], TINY_SQRT, 5, 0, 0);
  ew_in(&I[7], TINY_SUB, 4, 6, 0);
  ew_in(&I[8], TINY_RECIP, 7, 0, 0);
  ew_in(&I[9], TINY_RELU, 8, 0, 0);
  e->ninstr = 10;
  e->out_dtype = TINY_FP32;
  /* ew2: bool output, transposed (strided) input: out[i][j] = x[j][i] != y[i][j] */
  e = &st->ew[2];
  memset(e, 0, sizeof *e);
  e->rank = 2, e->shape[0] = 19, e->shape[1] = 23, e->ninputs = 2;
  e->in[0].dtype = TINY_FP16, e->in[0].strides[0] = 1, e->in[0].strides[1] = 19;
  e->in[1].dtype = TINY_FP16, e->in[1].strides[0] = 23, e->in[1].strides[1] = 1;
  I = e->instr;
  ew_in(&I[0], TINY_INPUT, 0, 0, 0), I[0].input = 0;
  ew_in(&I[1], TINY_INPUT, 0, 0, 0), I[1].input = 1;
  ew_in(&I[2], TINY_CMPLT, 0, 1, 0);
  e->ninstr = 3;
  e->out_dtype = TINY_BOOL;

  cuda_reduce_spec *r = st->red;
  memset(r, 0, sizeof st->red);
  r[0] = (cuda_reduce_spec){.outer = 37, .red = 100, .inner = 1, .s_outer = 100, .s_red = 1, .s_inner = 1,
                            .op = TINY_RSUM, .in_dtype = TINY_FP16, .out_dtype = TINY_FP32};
  r[1] = (cuda_reduce_spec){.outer = 64, .red = 256, .inner = 1, .s_outer = 256, .s_red = 1, .s_inner = 1,
                            .op = TINY_RMAX, .has_init = true, .init = 0.5, .in_dtype = TINY_FP32, .out_dtype = TINY_FP32};
  r[2] = (cuda_reduce_spec){.outer = 3, .red = 50, .inner = 17, .s_outer = 850, .s_red = 17, .s_inner = 1,
                            .op = TINY_RMIN, .in_dtype = TINY_FP16, .out_dtype = TINY_FP16};

  cuda_rownorm_spec *s = st->sm;
  memset(s, 0, sizeof st->sm);
  s[0] = (cuda_rownorm_spec){.rows = 50, .cols = 77, .row_stride = 77, .in_dtype = TINY_FP16, .out_dtype = TINY_FP16};
  s[1] = (cuda_rownorm_spec){.rows = 64, .cols = 128, .row_stride = 128, .in_dtype = TINY_FP32, .out_dtype = TINY_FP32,
                             .scale = 0.5f};
  s[2] = (cuda_rownorm_spec){.rows = 9, .cols = 40, .row_stride = 48, .in_dtype = TINY_BF16, .out_dtype = TINY_FP32};
  cuda_rownorm_spec *l = st->ln;
  memset(l, 0, sizeof st->ln);
  l[0] = (cuda_rownorm_spec){.rows = 40, .cols = 96, .row_stride = 96, .in_dtype = TINY_FP16, .out_dtype = TINY_FP16,
                             .eps = 1e-5f, .has_gamma = true, .has_beta = true, .gamma_dtype = TINY_FP16,
                             .beta_dtype = TINY_FP32};
  l[1] = (cuda_rownorm_spec){.rows = 33, .cols = 50, .row_stride = 50, .in_dtype = TINY_FP32, .out_dtype = TINY_FP32,
                             .eps = 1e-3f};
}

/* Row kernels of a ShapeSet build (one size parameter hp_sv0 = D, the
 * box's corner D = hi in rows / cols): rt0 a softmax of 9 fp16 rows of
 * 8 x D (16-byte vectors at every D), rt1 a layernorm of 33 fp32 rows of D
 * (fp16 gamma, fp32 beta, fp16 out), rt2 a softmax of 2 x D rows of D
 * (the rows vary too: the grid and the row guard). */
static void rt_specs(state *st) {
  cuda_rownorm_spec *s = st->rt;
  memset(s, 0, sizeof st->rt);
  s[0] = (cuda_rownorm_spec){.rows = 9, .cols = 96, .row_stride = 96, .in_dtype = TINY_FP16, .out_dtype = TINY_FP16,
                             .nsyms = 1, .rt_cols = {8, 1, {0}}};
  s[1] = (cuda_rownorm_spec){.rows = 33, .cols = 70, .row_stride = 70, .in_dtype = TINY_FP32, .out_dtype = TINY_FP16,
                             .eps = 1e-5f, .has_gamma = true, .has_beta = true, .gamma_dtype = TINY_FP16,
                             .beta_dtype = TINY_FP32, .nsyms = 1, .rt_cols = {1, 1, {0}}};
  s[2] = (cuda_rownorm_spec){.rows = 80, .cols = 40, .row_stride = 40, .in_dtype = TINY_FP32, .out_dtype = TINY_FP32,
                             .scale = 0.5f, .nsyms = 1, .nrows_sym = 1, .rows_sym = {0}, .rows_lit = 2,
                             .rt_cols = {1, 1, {0}}};
}

static int setup(void **vs) {
  state *st = calloc(1, sizeof *st);
  *vs = st;
  harp_error e = {0};
  make_specs(st);
  cu_ok(&e, cuda_module_new(&e, CUDA_SM80, &st->m));
  char nm[32];
  for (int i = 0; i < 3; i++) {
    snprintf(nm, sizeof nm, "ew%d", i);
    cu_ok(&e, cuda_gen_ewise(&e, st->m, &st->ew[i], nm));
    snprintf(nm, sizeof nm, "red%d", i);
    cu_ok(&e, cuda_gen_reduce(&e, st->m, &st->red[i], nm));
    snprintf(nm, sizeof nm, "sm%d", i);
    cu_ok(&e, cuda_gen_softmax(&e, st->m, &st->sm[i], nm));
  }
  for (int i = 0; i < 2; i++) {
    snprintf(nm, sizeof nm, "ln%d", i);
    cu_ok(&e, cuda_gen_layernorm(&e, st->m, &st->ln[i], nm));
  }
  rt_specs(st);
  cu_ok(&e, cuda_gen_softmax(&e, st->m, &st->rt[0], "rt0"));
  cu_ok(&e, cuda_gen_layernorm(&e, st->m, &st->rt[1], "rt1"));
  cu_ok(&e, cuda_gen_softmax(&e, st->m, &st->rt[2], "rt2"));
  char *src = NULL;
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

#define SKIP_IF_NO_SIM(st) \
  do {                     \
    if ((st)->skip) skip(); \
  } while (0)

static void test_ewise(void **vs) {
  state *st = *vs;
  SKIP_IF_NO_SIM(st);
  for (int i = 0; i < 3; i++) {
    const cuda_ew_spec *s = &st->ew[i];
    cu_rng r = {(uint64_t)i + 300};
    int64_t numel = 1;
    for (int d = 0; d < s->rank; d++) numel *= s->shape[d];
    cu_buf in[CUDA_MAX_EW_IN], out = cu_buf_new(s->out_dtype, numel);
    cu_buf *args[CUDA_MAX_EW_IN + 1];
    for (int j = 0; j < s->ninputs; j++) {
      int64_t n = 1;
      for (int d = 0; d < s->rank; d++) n += (s->shape[d] - 1) * s->in[j].strides[d];
      in[j] = cu_random(s->in[j].dtype, n, &r, 2);
      args[j] = &in[j];
    }
    memset(out.p, 0xEE, out.bytes);
    args[s->ninputs] = &out;
    char nm[16];
    snprintf(nm, sizeof nm, "ew%d", i);
    assert_int_equal(cu_sim_run(&st->sim, cuda_module_find(st->m, nm), args, NULL, 3), 0);
    float *want = malloc(sizeof(float) * (size_t)numel);
    for (int64_t x = 0; x < numel; x++) want[x] = ref_ew_eval(s, args, x);
    assert_int_equal(cu_compare(nm, &out, want, numel, 1e-3), 0);
    free(want);
    for (int j = 0; j < s->ninputs; j++) cu_buf_free(&in[j]);
    cu_buf_free(&out);
  }
}

static void test_reduce(void **vs) {
  state *st = *vs;
  SKIP_IF_NO_SIM(st);
  for (int i = 0; i < 3; i++) {
    const cuda_reduce_spec *s = &st->red[i];
    cu_rng r = {(uint64_t)i + 400};
    int64_t nin = (s->outer - 1) * s->s_outer + (s->red - 1) * s->s_red + (s->inner - 1) * s->s_inner + 1;
    int64_t nout = s->outer * s->inner;
    cu_buf in = cu_random(s->in_dtype, nin, &r, 1), out = cu_buf_new(s->out_dtype, nout);
    memset(out.p, 0xEE, out.bytes);
    cu_buf *args[2] = {&in, &out};
    char nm[16];
    snprintf(nm, sizeof nm, "red%d", i);
    assert_int_equal(cu_sim_run(&st->sim, cuda_module_find(st->m, nm), args, NULL, 4), 0);
    float *want = malloc(sizeof(float) * (size_t)nout);
    ref_reduce(s, &in, want);
    assert_int_equal(cu_compare(nm, &out, want, nout, 1e-3), 0);
    free(want);
    cu_buf_free(&in);
    cu_buf_free(&out);
  }
}

static void test_softmax_layernorm(void **vs) {
  state *st = *vs;
  SKIP_IF_NO_SIM(st);
  for (int i = 0; i < 5; i++) {
    bool ln = i >= 3;
    const cuda_rownorm_spec *s = ln ? &st->ln[i - 3] : &st->sm[i];
    cu_rng r = {(uint64_t)i + 500};
    int64_t nin = (s->rows - 1) * s->row_stride + s->cols, nout = s->rows * s->cols;
    cu_buf x = cu_random(s->in_dtype, nin, &r, 3), y = cu_buf_new(s->out_dtype, nout), g = {0}, bt = {0};
    memset(y.p, 0xEE, y.bytes);
    if (ln && s->has_gamma) g = cu_random(s->gamma_dtype, s->cols, &r, 1);
    if (ln && s->has_beta) bt = cu_random(s->beta_dtype, s->cols, &r, 1);
    cu_buf *args_sm[2] = {&x, &y};
    cu_buf *args_ln[4] = {&x, s->has_gamma ? &g : NULL, s->has_beta ? &bt : NULL, &y};
    char nm[16];
    snprintf(nm, sizeof nm, ln ? "ln%d" : "sm%d", ln ? i - 3 : i);
    assert_int_equal(cu_sim_run(&st->sim, cuda_module_find(st->m, nm), ln ? args_ln : args_sm, NULL, 5), 0);
    float *want = malloc(sizeof(float) * (size_t)nout);
    ref_rownorm(s, ln, &x, &g, &bt, want);
    assert_int_equal(cu_compare(nm, &y, want, nout, 1e-3), 0);
    free(want);
    cu_buf_free(&x);
    cu_buf_free(&y);
    cu_buf_free(&g);
    cu_buf_free(&bt);
  }
}

/* Run rt kernel i (spec s, the box's corner) at D = v as the size
 * parameter says sv (v, or one short): y is the hi corner's size, poisoned;
 * returns the mismatches against the reference at D = v, *past whether
 * something was written past the binding's elements. */
static int64_t rt_run(state *st, int i, int64_t v, int64_t sv, bool *past) {
  const cuda_rownorm_spec *s = &st->rt[i];
  bool ln = i == 1;
  cuda_rownorm_spec b = *s; /* the binding's sizes */
  b.cols = b.row_stride = s->rt_cols.lit * v;
  if (s->nrows_sym) b.rows = s->rows_lit * v;
  cu_rng r = {(uint64_t)i + 700};
  int64_t nout = b.rows * b.cols, nhi = s->rows * s->cols;
  cu_buf x = cu_random(s->in_dtype, nout, &r, 3), y = cu_buf_new(s->out_dtype, nhi), g = {0}, bt = {0};
  memset(y.p, 0xEE, y.bytes);
  if (ln) g = cu_random(s->gamma_dtype, b.cols, &r, 1), bt = cu_random(s->beta_dtype, b.cols, &r, 1);
  cu_buf *args_sm[3] = {&x, &y, NULL}, *args_ln[5] = {&x, &g, &bt, &y, NULL};
  char nm[16];
  snprintf(nm, sizeof nm, "rt%d", i);
  st->sim.sv = &sv;
  assert_int_equal(cu_sim_run(&st->sim, cuda_module_find(st->m, nm), ln ? args_ln : args_sm, NULL, 7), 0);
  st->sim.sv = NULL;
  float *want = malloc(sizeof(float) * (size_t)nout);
  ref_rownorm(&b, ln, &x, &g, &bt, want);
  int64_t bad = cu_compare(nm, &y, want, nout, 1e-3);
  size_t isz = (size_t)tiny_dtype_size(s->out_dtype);
  *past = false;
  for (size_t k = (size_t)nout * isz; k < y.bytes; k++) *past = *past || ((unsigned char *)y.p)[k] != 0xEE;
  free(want);
  cu_buf_free(&x);
  cu_buf_free(&y);
  cu_buf_free(&g);
  cu_buf_free(&bt);
  return bad;
}

/* The rt kernels at D = hi and below, from the one build: right, nothing
 * written past the binding's rows; the size one short gives another result. */
static void test_rowlen_at_run_time(void **vs) {
  state *st = *vs;
  SKIP_IF_NO_SIM(st);
  const int64_t at[3][2] = {{12, 5}, {70, 37}, {40, 23}};
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 2; j++) {
      bool past;
      assert_int_equal(rt_run(st, i, at[i][j], at[i][j], &past), 0);
      assert_false(past);
      if (j) assert_true(rt_run(st, i, at[i][j], at[i][j] - 1, &past) > 0);
    }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ewise),
      cmocka_unit_test(test_reduce),
      cmocka_unit_test(test_softmax_layernorm),
      cmocka_unit_test(test_rowlen_at_run_time),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
