/* test_cuda_ir.c — the GPU dialect and the runtime without a GPU: JSON dump
 * (--dump gpu) shape and statements, printer determinism, every spec error,
 * the verifier, allocation-failure injection, and the runtime's "no GPU"
 * behaviour (missing libcuda, the toolkit's stub libcuda, missing NVRTC). */
#include <jansson.h>

#include "cuda_models.h"
#include "cuda_testutil.h"
#include "backend/cuda/region_cuda.h"

static void collect_ops(json_t *list, char *seen, size_t cap) {
  size_t i;
  json_t *st;
  json_array_foreach(list, i, st) {
    const char *op = json_string_value(json_object_get(st, "op"));
    assert_non_null(op);
    char tag[40];
    snprintf(tag, sizeof tag, "|%s|", op);
    if (!strstr(seen, tag) && strlen(seen) + strlen(tag) < cap) strcat(seen, tag);
    json_t *body = json_object_get(st, "body");
    if (body) collect_ops(body, seen, cap);
    json_t *els = json_object_get(st, "else");
    if (els) collect_ops(els, seen, cap);
  }
}

static void test_dump_json(void **s) {
  (void)s;
  harp_error e = {0};
  cuda_module *m;
  cu_ok(&e, cuda_module_new(&e, CUDA_SM80, &m));
  cu_model ms[CU_NMODELS];
  cu_models(ms, CUDA_SM80);
  for (int i = 0; i < CU_NMODELS; i++) cu_ok(&e, cu_model_gen(&e, m, &ms[i]));
  char *js;
  cu_ok(&e, cuda_dump_json(&e, m, &js));
  json_error_t je;
  json_t *root = json_loads(js, 0, &je);
  assert_non_null(root);
  json_t *gpu = json_object_get(root, "gpu");
  assert_string_equal(json_string_value(json_object_get(gpu, "arch")), "sm80");
  json_t *ks = json_object_get(gpu, "kernels");
  assert_int_equal(json_array_size(ks), CU_NMODELS);
  for (size_t i = 0; i < json_array_size(ks); i++) {
    json_t *k = json_array_get(ks, i);
    assert_string_equal(json_string_value(json_object_get(k, "name")), ms[i].name);
    assert_int_equal(json_array_size(json_object_get(k, "grid")), 3);
    assert_true(json_integer_value(json_array_get(json_object_get(k, "block"), 0)) % 32 == 0);
    char seen[1024] = "";
    collect_ops(json_object_get(k, "body"), seen, sizeof seen);
    if (ms[i].contraction) {
      /* strict fp32 (SIMT): shared loads and FFMA, no ldmatrix / mma */
      bool simt = ms[i].kind == CU_M_GEMM && ms[i].g.a_dtype == TINY_FP32 && ms[i].g.math == CUDA_MATH_FP32;
      /* fp32 operands rounded to fp16: their fragments read with ld.shared and packed */
      bool lds = simt || (ms[i].kind == CU_M_GEMM && ms[i].g.a_dtype == TINY_FP32 && ms[i].g.math == CUDA_MATH_FP16);
      const char *need[] = {"|CpAsync|", "|CommitGroup|", "|WaitGroup|", "|Barrier|", lds ? "|LdShared|" : "|LdMatrix|",
                            simt ? "|Assign|" : "|MmaSync|", "|Epilogue|", "|StGlobalVec|"};
      for (int j = 0; j < 8; j++)
        if (!strstr(seen, need[j])) fail_msg("%s: no %s in the dialect (%s)", ms[i].name, need[j], seen);
      if (simt && strstr(seen, "|MmaSync|")) fail_msg("%s: SIMT with an MmaSync", ms[i].name);
      json_t *plan = json_object_get(k, "plan");
      assert_non_null(json_object_get(plan, "BM"));
      assert_non_null(json_object_get(plan, "stages"));
      assert_non_null(json_object_get(plan, "warp_tile"));
    }
    if (ms[i].kind == CU_M_SOFTMAX || ms[i].kind == CU_M_REDUCE || ms[i].kind == CU_M_LAYERNORM)
      assert_non_null(strstr(seen, ms[i].kind == CU_M_REDUCE ? "|ShflXor|" : "|StGlobalVec|"));
  }
  /* gemm_bias_relu: the Epilogue lists bias then relu, in order */
  json_t *k1 = json_array_get(ks, 1);
  char *k1s = json_dumps(k1, JSON_COMPACT);
  char *pb = strstr(k1s, "\"op\":\"bias_n\""), *pr = strstr(k1s, "\"op\":\"relu\"");
  assert_true(pb && pr && pb < pr);
  free(k1s);
  json_decref(root);
  free(js);
  /* the printer is deterministic */
  char *a, *b;
  cu_ok(&e, cuda_print(&e, m, &a));
  cu_ok(&e, cuda_print(&e, m, &b));
  assert_string_equal(a, b);
  assert_non_null(strstr(a, "#ifndef HK_SIM"));
  assert_null(strstr(a, "#include"));
  free(a);
  free(b);
  cuda_module_free(m);
}

/* Each bad spec: the expected error code. */
/* The SM90 GEMM of a ShapeSet build (issue 25): M = hp_sv0 and the outer
 * batch hp_sv1 (B broadcast over it) in its TMA maps as formulas, encoded at
 * a binding by cuda_tmap_at (the runtime's, before each launch): A and C
 * [b0][M][..] with their packed and batch strides; B's folded batch stays a
 * constant.  Maps are alike when their formulas are (cuda_tmap_same); a
 * stride that is not 16 bytes at every binding, or split-K, is refused. */
static void test_tmap_rt(void **s) {
  (void)s;
  harp_error e = {0};
  cuda_module *m;
  cu_ok(&e, cuda_module_new(&e, CUDA_SM90, &m));
  cuda_gemm_spec g;
  cuda_gemm_spec_init(&g, 96, 128, 64, TINY_FP16); /* A [b0][M][64], B [64][128], C [b0][M][128] */
  cuda_tune_default(&g.tune, CUDA_SM90);
  g.batch[0] = 3, g.a_sb[1] = g.c_sb[1] = 0, g.a_sb[0] = 96 * 64, g.c_sb[0] = 96 * 128, g.b_sb[0] = g.b_sb[1] = 0;
  g.nsyms = 2;
  g.rt_m = (cuda_rtsz){.lit = 1, .n = 1, .sym = {0}};
  g.rt_b[0] = (cuda_rtsz){.lit = 1, .n = 1, .sym = {1}};
  g.rt_sb[0][0] = (cuda_rtsz){.lit = 64, .n = 1, .sym = {0}};
  g.rt_sb[2][0] = (cuda_rtsz){.lit = 128, .n = 1, .sym = {0}};
  cu_ok(&e, cuda_gen_gemm(&e, m, &g, "g_rt"));
  const cuda_kernel *k = m->k[m->n - 1];
  assert_int_equal(k->nparams, 6); /* tmA, tmB, tmC, C, hp_sv0, hp_sv1 */
  assert_int_equal(k->params[4].kind, CUDA_P_LONG);
  assert_string_equal(k->params[5].name, "hp_sv1");
  const int64_t sv[2] = {40, 2};
  cuda_tmap_desc d;
  cuda_tmap_at(k->params[0].tmap, sv, &d); /* A */
  const uint64_t a_dims[4] = {64, 40, 1, 2}, a_st[3] = {128, 128 * 40, 128 * 40};
  assert_memory_equal(d.dims, a_dims, sizeof a_dims);
  assert_memory_equal(d.strides, a_st, sizeof a_st);
  cuda_tmap_at(k->params[2].tmap, sv, &d); /* C */
  const uint64_t c_dims[4] = {128, 40, 1, 2}, c_st[3] = {256, 256 * 40, 256 * 40};
  assert_memory_equal(d.dims, c_dims, sizeof c_dims);
  assert_memory_equal(d.strides, c_st, sizeof c_st);
  cuda_tmap_at(k->params[1].tmap, sv, &d); /* B: N-major [64][128], its batch folded */
  const uint64_t b_dims[4] = {128, 64, 1, 1}, b_st[3] = {256, 256 * 64, 256 * 64};
  assert_memory_equal(d.dims, b_dims, sizeof b_dims);
  assert_memory_equal(d.strides, b_st, sizeof b_st);
  cuda_tmap_at(k->params[0].tmap, NULL, &d); /* no binding: the corner the spec was made at */
  assert_int_equal(d.dims[1], 96);
  assert_int_equal(d.dims[3], 3);
  cuda_tmap_desc x = *k->params[0].tmap;
  assert_true(cuda_tmap_same(&x, k->params[0].tmap));
  x.dims[1] = 77; /* a run-time dim's value at another corner: alike */
  assert_true(cuda_tmap_same(&x, k->params[0].tmap));
  x.rt_dims[1].sym[0] = 1;
  assert_false(cuda_tmap_same(&x, k->params[0].tmap));
  x = *k->params[0].tmap, x.rt_strides[2].lit = 32;
  assert_false(cuda_tmap_same(&x, k->params[0].tmap));
  x = *k->params[0].tmap, x.dims[0] = 32; /* a constant dim */
  assert_false(cuda_tmap_same(&x, k->params[0].tmap));
  g.rt_st[0] = (cuda_rtsz){.lit = 1, .n = 1, .sym = {0}}; /* A's row stride 2 x hp_sv0 bytes */
  assert_false(cuda_sm90_rt_aligned(&g));
  harp_error_clear(&e);
  assert_int_equal(cuda_gen_gemm(&e, m, &g, "g_rt_unaligned"), HARP_E_UNSUPPORTED);
  /* a pair: the wgmma kernel serves the bindings where 2 x hp_sv0 is a multiple of 16, the SM80 one the others */
  const int64_t sv40[2] = {40, 2}, sv37[2] = {37, 2};
  g.own = 1;
  cu_ok(&e, cuda_gen_gemm(&e, m, &g, "g_pair_wgmma"));
  k = m->k[m->n - 1];
  assert_non_null(k->own);
  assert_true(k->own->aligned);
  assert_int_equal(k->own->n, 1);
  assert_int_equal(k->own->st[0].lit, 2);
  assert_int_equal(k->own->st[0].sym[0], 0);
  assert_true(cuda_kernel_own_at(k, sv40));
  assert_false(cuda_kernel_own_at(k, sv37));
  assert_true(cuda_kernel_own_at(k, NULL));
  g.own = -1;
  harp_error_clear(&e);
  assert_int_equal(cuda_gen_gemm(&e, m, &g, "g_pair_wrong"), HARP_E_UNSUPPORTED); /* the wgmma kernel serves aligned ones */
  cuda_tune_default(&g.tune, CUDA_SM80);
  cu_ok(&e, cuda_gen_gemm(&e, m, &g, "g_pair_mma"));
  k = m->k[m->n - 1];
  assert_string_equal(k->kind, "mma_gemm");
  assert_false(k->own->aligned);
  assert_false(cuda_kernel_own_at(k, sv40));
  assert_true(cuda_kernel_own_at(k, sv37));
  g.own = 1;
  harp_error_clear(&e);
  assert_int_equal(cuda_gen_gemm(&e, m, &g, "g_pair_wrong2"), HARP_E_INVALID_ARG);
  g.own = 0;
  cuda_tune_default(&g.tune, CUDA_SM90);
  g.rt_st[0].lit = 8; /* 16 bytes x hp_sv0 */
  assert_true(cuda_sm90_rt_aligned(&g));
  g.K = 256, g.tune.splitk = 2, g.tune.splitk_kind = CUDA_SPLITK_ATOMIC, g.c_dtype = TINY_FP32; /* 4 k tiles */
  harp_error_clear(&e);
  assert_int_equal(cuda_gen_gemm(&e, m, &g, "g_rt_splitk"), HARP_E_UNSUPPORTED);
  assert_non_null(strstr(e.msg, "run time"));
  cuda_module_free(m);
}

/* A run-time grid over tile counts (Winograd's P = images x ceil(oh / 2)
 * x ceil(ow / 2), cuda_wino_grids): 64 tiles a block along grid.y, at
 * most the kernel's 8 (the corner hi's 2 x 16 x 16 tiles). */
static void test_launch_grid_tiles(void **s) {
  (void)s;
  cuda_kernel k = {.grid = {1, 8, 16}};
  cuda_launch l = {.k = &k, .grid_lit = 1, .grid_div = 64, .ngrid_tile = 3, .grid_axis = 1};
  l.grid_tile[0] = (cuda_rtsz){.lit = 2}; /* two images */
  l.grid_tile[1] = (cuda_rtsz){.lit = 1, .n = 1, .sym = {0}}, l.grid_tile_add[1] = 1, l.grid_tile_per[1] = 2; /* ceil(H / 2) */
  l.grid_tile[2] = (cuda_rtsz){.lit = 32}, l.grid_tile_add[2] = 1, l.grid_tile_per[2] = 2;          /* ceil(32 / 2) */
  l.grid_tile_per[0] = 1;
  const int64_t h32[1] = {32}, h20[1] = {20}, h17[1] = {17}, h3[1] = {3};
  assert_int_equal(cuda_launch_grid(&l, h32), 8);
  assert_int_equal(cuda_launch_grid(&l, h20), 5); /* 320 tiles */
  assert_int_equal(cuda_launch_grid(&l, h17), 5); /* 288 */
  assert_int_equal(cuda_launch_grid(&l, h3), 1);  /* 64 */
  assert_int_equal(cuda_launch_grid(&l, NULL), 8);
  l.grid_axis = 0; /* along x: at most grid[0] */
  assert_int_equal(cuda_launch_grid(&l, h20), 1);
}

static void test_spec_errors(void **s) {
  (void)s;
  harp_error e = {0};
  cuda_module *m;
  cu_ok(&e, cuda_module_new(&e, CUDA_SM80, &m));
  cuda_gemm_spec g;
#define EXPECT(code, call)                                                       \
  do {                                                                           \
    harp_error_clear(&e);                                                        \
    harp_status st_ = (call);                                                    \
    if (st_ != (code)) fail_msg("%s: got %s (%s), want %s", #call, harp_status_name(st_), e.msg, harp_status_name(code)); \
  } while (0)
  cuda_gemm_spec_init(&g, 64, 64, 64, TINY_I32);
  EXPECT(HARP_E_UNSUPPORTED, cuda_gen_gemm(&e, m, &g, "g_i32"));
  cuda_gemm_spec_init(&g, 64, 64, 64, TINY_FP32); /* fp32: TF32 by default, or as math says */
  EXPECT(HARP_OK, cuda_gen_gemm(&e, m, &g, "g_fp32"));
  g.math = (cuda_math)7;
  EXPECT(HARP_E_INVALID_ARG, cuda_gen_gemm(&e, m, &g, "g_math"));
  g.math = CUDA_MATH_FP32, g.tune.bm = 64, g.tune.bn = 96; /* SIMT: BN a multiple of the 64-wide warp tile */
  EXPECT(HARP_E_INVALID_ARG, cuda_gen_gemm(&e, m, &g, "g_simt_tile"));
  cuda_gemm_spec_init(&g, 64, 64, 64, TINY_FP32);
  g.b_dtype = TINY_FP16;
  EXPECT(HARP_E_UNSUPPORTED, cuda_gen_gemm(&e, m, &g, "g_mixed32"));
  cuda_gemm_spec_init(&g, 64, 64, 64, TINY_FP16);
  g.b_dtype = TINY_BF16;
  EXPECT(HARP_E_UNSUPPORTED, cuda_gen_gemm(&e, m, &g, "g_mixed"));
  cuda_gemm_spec_init(&g, 64, 64, 64, TINY_FP16);
  g.a_sm = -64;
  EXPECT(HARP_E_NEGATIVE_STRIDE, cuda_gen_gemm(&e, m, &g, "g_neg"));
  cuda_gemm_spec_init(&g, 0, 64, 64, TINY_FP16);
  EXPECT(HARP_E_INVALID_ARG, cuda_gen_gemm(&e, m, &g, "g_zero"));
  cuda_gemm_spec_init(&g, 64, 64, 64, TINY_FP16);
  g.tune.bm = 64, g.tune.warp_m = 48;
  EXPECT(HARP_E_INVALID_ARG, cuda_gen_gemm(&e, m, &g, "g_warp"));
  cuda_gemm_spec_init(&g, 64, 64, 64, TINY_FP16);
  g.tune.bk = 24;
  EXPECT(HARP_E_INVALID_ARG, cuda_gen_gemm(&e, m, &g, "g_bk"));
  cuda_gemm_spec_init(&g, 64, 64, 64, TINY_FP16);
  g.tune.bm = g.tune.bn = 256, g.tune.bk = 128, g.tune.stages = 4, g.tune.warp_m = g.tune.warp_n = 64;
  EXPECT(HARP_E_SMEM_OVERFLOW, cuda_gen_gemm(&e, m, &g, "g_smem"));
  cuda_gemm_spec_init(&g, 64, 64, 64, TINY_FP16);
  g.tune.bm = g.tune.bn = 128, g.tune.warp_m = g.tune.warp_n = 128;
  EXPECT(HARP_E_REG_OVERFLOW, cuda_gen_gemm(&e, m, &g, "g_regs"));
  cuda_gemm_spec_init(&g, 64, 64, 64, TINY_FP16);
  g.tune.bm = 64, g.tune.bn = 48, g.tune.warp_n = 16;
  EXPECT(HARP_E_UNSUPPORTED, cuda_gen_gemm(&e, m, &g, "g_swz")); /* 48-wide rows: no swizzle */
  cuda_gemm_spec_init(&g, 64, 64, 64, TINY_FP16);
  g.n_epi = 1, g.epi[0].kind = CUDA_EPI_BIAS_N, g.epi[0].dtype = TINY_I32;
  EXPECT(HARP_E_UNSUPPORTED, cuda_gen_gemm(&e, m, &g, "g_epi"));
  cuda_gemm_spec_init(&g, 64, 64, 64, TINY_FP16);
  EXPECT(HARP_E_INVALID_ARG, cuda_gen_gemm(&e, m, &g, "bad name"));
  EXPECT(HARP_OK, cuda_gen_gemm(&e, m, &g, "g_ok"));
  EXPECT(HARP_E_DUPLICATE_ID, cuda_gen_gemm(&e, m, &g, "g_ok"));
  g.tune.arch = CUDA_SM90;
  EXPECT(HARP_E_INVALID_ARG, cuda_gen_gemm(&e, m, &g, "g_arch"));

  cuda_conv_spec c;
  cuda_conv_spec_init(&c, 1, 6, 8, 8, 8, 3, 3, TINY_FP16);
  c.groups = 4;
  EXPECT(HARP_E_INVALID_ARG, cuda_gen_conv(&e, m, &c, "c_groups"));
  cuda_conv_spec_init(&c, 1, 8, 2, 2, 8, 3, 3, TINY_FP16);
  EXPECT(HARP_E_INVALID_ARG, cuda_gen_conv(&e, m, &c, "c_window"));

  cuda_attn_spec a;
  cuda_attn_spec_init(&a, 1, 1, 16, 16, 12, TINY_FP16);
  EXPECT(HARP_E_UNSUPPORTED, cuda_gen_attn(&e, m, &a, "a_d12"));
  cuda_attn_spec_init(&a, 1, 1, 16, 16, 64, TINY_FP32); /* fp32: TF32 only */
  EXPECT(HARP_OK, cuda_gen_attn(&e, m, &a, "a_tf32"));
  a.math = CUDA_MATH_FP16;
  EXPECT(HARP_E_UNSUPPORTED, cuda_gen_attn(&e, m, &a, "a_fp32"));
  cuda_attn_spec_init(&a, 1, 1, 16, 16, 64, TINY_I32);
  EXPECT(HARP_E_UNSUPPORTED, cuda_gen_attn(&e, m, &a, "a_i32"));
  cuda_attn_spec_init(&a, 1, 1, 16, 16, 256, TINY_FP16);
  a.bn = 128;
  EXPECT(HARP_E_REG_OVERFLOW, cuda_gen_attn(&e, m, &a, "a_regs"));

  cuda_ew_spec w;
  memset(&w, 0, sizeof w);
  w.rank = 1, w.shape[0] = 10, w.ninputs = 1, w.in[0].dtype = TINY_FP16, w.in[0].strides[0] = 1;
  w.instr[0] = (cuda_ew_instr){.op = TINY_INPUT};
  w.instr[1] = (cuda_ew_instr){.op = TINY_ADD, .a = 0, .b = 2};
  w.ninstr = 2, w.out_dtype = TINY_FP16;
  EXPECT(HARP_E_DANGLING, cuda_gen_ewise(&e, m, &w, "w_later"));
  w.instr[1] = (cuda_ew_instr){.op = TINY_REDUCE, .a = 0};
  EXPECT(HARP_E_UNSUPPORTED, cuda_gen_ewise(&e, m, &w, "w_reduce"));
  w.instr[1] = (cuda_ew_instr){.op = TINY_NEG, .a = 0};
  w.in[0].strides[0] = -1;
  EXPECT(HARP_E_NEGATIVE_STRIDE, cuda_gen_ewise(&e, m, &w, "w_neg"));

  cuda_reduce_spec r = {.outer = 4, .red = 8, .inner = 1, .s_outer = 8, .s_red = 1, .op = TINY_RSUM,
                        .in_dtype = TINY_FP16, .out_dtype = TINY_BOOL};
  EXPECT(HARP_E_UNSUPPORTED, cuda_gen_reduce(&e, m, &r, "r_bool"));
  cuda_rownorm_spec n = {.rows = 4, .cols = 8, .row_stride = 4, .in_dtype = TINY_FP16, .out_dtype = TINY_FP16};
  EXPECT(HARP_E_INVALID_ARG, cuda_gen_softmax(&e, m, &n, "n_stride"));
  n.row_stride = 8;
  n.tune.threads = 48;
  EXPECT(HARP_E_INVALID_ARG, cuda_gen_layernorm(&e, m, &n, "n_threads"));
#undef EXPECT
  cuda_module_free(m);
}

/* The verifier rejects malformed statements. */
static void test_verifier(void **s) {
  (void)s;
  harp_error e = {0};
  cuda_module *m;
  cu_ok(&e, cuda_module_new(&e, CUDA_SM80, &m));
  cuda_b b;
  cuda_kernel *k = cuda_kernel_new(&b, m, &e, "kv", "test");
  assert_non_null(k);
  cuda_stmt *cp = cuda_emit_s(&b, CU_CP_ASYNC, "0", "p", "0", NULL);
  cp->i[0] = 3;
  assert_int_equal(cuda_b_finish(&b, k), HARP_E_INTERNAL);
  assert_non_null(strstr(e.msg, "CpAsync"));
  harp_error_clear(&e);
  cp->i[0] = 16;
  assert_int_equal(cuda_b_finish(&b, k), HARP_OK);
  cuda_emit_s(&b, CU_LDMATRIX, NULL, "0", NULL, NULL)->i[0] = 4; /* no destination */
  assert_int_equal(cuda_kernel_verify(&e, k), HARP_E_INTERNAL);
  harp_error_clear(&e);
  k->body->nbody--;
  k->block[0] = 100;
  assert_int_equal(cuda_kernel_verify(&e, k), HARP_E_INTERNAL);
  k->block[0] = 128;
  harp_error_clear(&e);
  cuda_for(&b, "i", "0", "4", 0);
  assert_int_equal(cuda_b_finish(&b, k), HARP_E_INTERNAL); /* unbalanced nesting */
  cuda_module_free(m);
}

/* Allocation failures at every point: an error, never a crash or a leak. */
static void test_alloc_failures(void **s) {
  (void)s;
  int failed = 0;
  for (long nth = 1; nth < 4000; nth += 7) {
    harp_error e = {0};
    ut_fault_fail_nth_alloc(nth);
    cuda_module *m = NULL;
    harp_status st = cuda_module_new(&e, CUDA_SM80, &m);
    cu_model ms[CU_NMODELS];
    cu_models(ms, CUDA_SM80);
    for (int i = 0; i < 4 && st == HARP_OK; i++) st = cu_model_gen(&e, m, &ms[i * 2]);
    char *src = NULL;
    if (st == HARP_OK) st = cuda_print(&e, m, &src);
    bool fired = ut_fault_remaining() == 0;
    ut_fault_fail_nth_alloc(0);
    if (st != HARP_OK) {
      assert_int_equal(st, HARP_E_NO_MEMORY);
      failed++;
    } else {
      assert_false(fired);
    }
    free(src);
    cuda_module_free(m);
    if (!fired) break;
  }
  assert_true(failed > 0);
}

/* ---- runtime without a GPU ---- */
static void test_rt_no_driver(void **s) {
  (void)s;
  harp_error e = {0};
  cuda_rt *rt;
  cuda_rt_opts o = {.cuda_path = "/nonexistent/libcuda.so.1"};
  cu_ok(&e, cuda_rt_open(&e, &o, &rt));
  const cuda_rt_status *st = cuda_rt_status_of(rt);
  assert_false(st->gpu);
  assert_false(st->driver);
  assert_non_null(strstr(st->why_no_gpu, "no NVIDIA driver"));
  assert_string_equal(cuda_rt_arch(rt), "sm_80");
  cuda_devptr p;
  assert_int_equal(cuda_rt_alloc(&e, rt, 64, &p), HARP_E_UNSUPPORTED);
  assert_non_null(strstr(e.msg, "no GPU"));
  harp_error_clear(&e);
  cuda_model_mem mm;
  assert_int_equal(cuda_model_mem_init(&e, rt, 1024, "abc", 3, &mm), HARP_E_UNSUPPORTED);
  harp_error_clear(&e);
  cuda_binary bin = {0};
  cuda_rt_module *mod;
  assert_int_equal(cuda_rt_load(&e, rt, &bin, &mod), HARP_E_UNSUPPORTED);
  cuda_rt_close(rt);
}

/* Misaligned views are refused before any launch (no GPU needed). */
static void test_rt_misaligned(void **s) {
  (void)s;
  harp_error e = {0};
  cuda_module *m;
  cu_ok(&e, cuda_module_new(&e, CUDA_SM80, &m));
  cu_model ms[CU_NMODELS];
  cu_models(ms, CUDA_SM80);
  cu_ok(&e, cu_model_gen(&e, m, &ms[2])); /* gemm_1024: 16-byte cp.async and stores */
  const cuda_kernel *k = cuda_module_find(m, "gemm_1024");
  assert_int_equal(k->params[0].align, 16);
  assert_int_equal(k->params[2].align, 16);
  cuda_rt *rt;
  cuda_rt_opts o = {.no_driver = true, .nvrtc_path = "/nonexistent"};
  cu_ok(&e, cuda_rt_open(&e, &o, &rt));
  cuda_devptr args[3] = {0x10000, 0x10008, 0x20000};
  assert_int_equal(cuda_rt_launch_kernel(&e, rt, NULL, k, args, 0), HARP_E_MISALIGNED);
  assert_string_equal(e.node, "B");
  harp_error_clear(&e);
  args[1] = 0x10010;
  assert_int_equal(cuda_rt_launch_kernel(&e, rt, NULL, k, args, 0), HARP_E_UNSUPPORTED); /* aligned: now "no GPU" */
  cuda_rt_close(rt);
  cuda_module_free(m);
}

static void test_rt_stub_driver(void **s) {
  (void)s;
  const char *stubs[] = {"/usr/local/cuda/lib64/stubs/libcuda.so", "/usr/local/cuda/targets/x86_64-linux/lib/stubs/libcuda.so"};
  const char *stub = NULL;
  for (int i = 0; i < 2; i++)
    if (access(stubs[i], R_OK) == 0) stub = stubs[i];
  if (!stub) skip();
  harp_error e = {0};
  cuda_rt *rt;
  cuda_rt_opts o = {.cuda_path = stub};
  cu_ok(&e, cuda_rt_open(&e, &o, &rt));
  const cuda_rt_status *st = cuda_rt_status_of(rt);
  assert_true(st->driver);  /* the stub has every symbol ... */
  assert_false(st->gpu);    /* ... but cuInit fails */
  assert_non_null(strstr(st->why_no_gpu, "cuInit"));
  cuda_rt_close(rt);
}

static void test_rt_no_nvrtc(void **s) {
  (void)s;
  harp_error e = {0};
  cuda_rt *rt;
  cuda_rt_opts o = {.nvrtc_path = "/nonexistent/libnvrtc.so", .no_driver = true};
  cu_ok(&e, cuda_rt_open(&e, &o, &rt));
  assert_false(cuda_rt_status_of(rt)->nvrtc);
  cuda_binary bin;
  assert_int_equal(cuda_rt_compile(&e, rt, "", "x.cu", "sm_80", NULL, 0, &bin), HARP_E_UNSUPPORTED);
  assert_non_null(strstr(e.msg, "no NVRTC"));
  cuda_rt_close(rt);
}

static void test_cache_key(void **s) {
  (void)s;
  char a[33], b[33], c[33], d[33];
  const char *o1[] = {"-x"};
  cuda_rt_cache_key("src", "sm_80", o1, 1, 1300, a);
  cuda_rt_cache_key("src", "sm_80", o1, 1, 1300, b);
  cuda_rt_cache_key("src", "sm_90a", o1, 1, 1300, c);
  cuda_rt_cache_key("src", "sm_80", o1, 1, 1301, d);
  assert_string_equal(a, b);
  assert_string_not_equal(a, c);
  assert_string_not_equal(a, d);
  assert_int_equal(strlen(a), 32);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_dump_json),      cmocka_unit_test(test_spec_errors),    cmocka_unit_test(test_verifier),
      cmocka_unit_test(test_alloc_failures), cmocka_unit_test(test_rt_no_driver),   cmocka_unit_test(test_rt_misaligned),   cmocka_unit_test(test_rt_stub_driver),
      cmocka_unit_test(test_rt_no_nvrtc),    cmocka_unit_test(test_cache_key),      cmocka_unit_test(test_tmap_rt),
      cmocka_unit_test(test_launch_grid_tiles),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
