/* test_sgen.c — one compiled object for every binding of a ShapeSet
 * (harp/sgen.h): a row softmax whose row count is a symbol compiles once
 * and runs at several row counts, each against the interpreter, with no
 * second object; a binding outside the box, or one whose inputs disagree
 * on a symbol, is refused before any kernel runs (outputs untouched), or
 * compiled on its own when asked; the models of tests/models over a box
 * each (a row softmax, an elementwise map, layernorm loop nests, GEMMs
 * over their rows, fused attention over its rows, keys and batches: one
 * object, and since the sskind branch a GEMM's N and K and a softmax's row
 * length; a GEMM whose weight moves with N (gemm_chain4 over D), a causal
 * mask's nests: not generic yet, they say why and compile per binding,
 * still exact). */
#include "sgen_testutil.h"

/* One object, four row counts (the corners and two between), no second object. */
static void test_softmax_one_object(void **state) {
  (void)state;
  rt_sgen_sym box[] = {{"R", 1, 64}, {"L", 33, 33}};
  rt_sgen *s = compile_box("softmax_rows.json", box, 2, false);
  assert_null(rt_sgen_fallback(s));
  if (getenv("SGEN_DEBUG")) fprintf(stderr, "%s", rt_sgen_source(s));
  assert_int_equal(rt_sgen_objects(s), 1);
  assert_non_null(strstr(rt_sgen_source(s), "hp_sym_[0]")); /* the rows are read at run time */
  const char *b1[] = {"R=1", "L=33", NULL}, *b2[] = {"R=64", "L=33", NULL}, *b3[] = {"R=5", "L=33", NULL},
             *b4[] = {"R=37", "L=33", NULL};
  check_at(s, "softmax_rows.json", b3, 1, 1e-5);
  check_at(s, "softmax_rows.json", b2, 1, 1e-5);
  check_at(s, "softmax_rows.json", b1, 1, 1e-5);
  check_at(s, "softmax_rows.json", b4, 1, 1e-5);
  check_at(s, "softmax_rows.json", b3, 1, 1e-5); /* back to a binding seen: the kept graph */
  assert_int_equal(rt_sgen_objects(s), 1);
  rt_sgen_free(s);
}

/* Outside the box: refused before any kernel, outputs untouched; with
 * recompile_outside, an object of its own and the right numbers. */
static void test_outside_box(void **state) {
  (void)state;
  rt_sgen_sym box[] = {{"R", 2, 16}, {"L", 33, 33}};
  rt_sgen *s = compile_box("softmax_rows.json", box, 2, false);
  const char *far[] = {"R=17", "L=33", NULL}, *low[] = {"R=1", "L=33", NULL}, *wide[] = {"R=4", "L=34", NULL};
  const char *const *bad[] = {far, low, wide};
  for (int b = 0; b < 3; b++) {
    ut_tensor in[2] = {0}, ref[1] = {0}, out[1] = {0};
    int n = inputs_at("softmax_rows.json", bad[b], in, ref, 3u);
    harp_error e = {0};
    assert_int_equal(rt_sgen_run(&e, s, in, n, out), HARP_E_INPUT_MISMATCH);
    assert_null(out[0].data);
    harp_error_clear(&e);
    ut_tensor_free(&in[0]);
    ut_tensor_free(&ref[0]);
  }
  assert_int_equal(rt_sgen_objects(s), 1);
  rt_sgen_free(s);
  s = compile_box("softmax_rows.json", box, 2, true);
  check_at(s, "softmax_rows.json", far, 1, 1e-5);
  assert_int_equal(rt_sgen_objects(s), 2);
  rt_sgen_free(s);
}

/* A model of tests/models, one symbol ranging over [lo, hi] and the
 * others fixed, and whether one object serves the box today. */
typedef struct box_case {
  const char *model;
  const char *var;
  int64_t lo, hi, mid;
  const char *fixed[6]; /* "NAME=V" */
  bool generic;
  double tol;
} box_case;

static const box_case CASES[] = {
    {"softmax_rows.json", "R", 1, 48, 19, {"L=33"}, true, 1e-5},
    {"layernorm.json", "R", 1, 48, 20, {NULL}, true, 1e-4},
    {"gelu_bias_rows.json", "R", 1, 3000, 1001, {NULL}, true, 1e-5}, /* a map, small and pooled */
    /* the cost model partitions R = 2 and 40 apart: the lower corner replays the upper's regions */
    {"layernorm_fp16.json", "R", 2, 40, 9, {NULL}, true, 2e-2},
    {"softmax_rows.json", "L", 3, 70, 17, {"R=5"}, true, 1e-5}, /* the row length at run time (cols_expr) */
    /* GEMMs over their rows: M read at run time, every row tail of the
     * micro-tile (2..40 and 1..100 cross MR = 6 several times), the tasks
     * along M split at run time, N tails (D = 21) */
    {"gemm_chain4.json", "M", 2, 40, 13, {"D=16"}, true, 1e-3},
    {"gemm_chain4.json", "M", 1, 100, 53, {"D=21"}, true, 1e-3},
    {"seed000_gemm_bias_relu.json", "M", 3, 61, 29, {"K=19", "N=70"}, true, 1e-3}, /* B an input */
    /* N and K move with the weights W [D, D]: the corners' GEMMs still differ (the context's fields:
     * N read at run time at one corner only; likely the lower corner's B read from the upper
     * corner's table, sgen_weights.c, at a row stride that is not its N: not looked into yet) */
    {"gemm_chain4.json", "D", 3, 20, 7, {"M=9"}, false, 1e-3},
    /* fused attention: query rows, keys and batches read at run time, with
     * the strides they move (every row tail of the micro-kernels, key tails
     * of the tile, the query split across tasks at run time) */
    {"attention_full.json", "M", 2, 70, 33, {"B=1", "H=2", "N=40", "D=16", "Dv=16"}, true, 1e-4},
    {"attention_full.json", "N", 2, 90, 37, {"B=1", "H=2", "M=24", "D=16", "Dv=20"}, true, 1e-4},
    {"attention_full.json", "B", 2, 5, 3, {"H=3", "M=9", "N=17", "D=8", "Dv=8"}, true, 1e-4},
    /* causal: the mask's iota nests over the symbols, the pad guard on the PAD
     * input's box (poly_sym_access); M < N declines the template at both corners */
    {"attention_full_causal.json", "M", 2, 50, 29, {"B=1", "H=2", "N=30", "D=16", "Dv=16"}, true, 1e-4},
    {"attention_full_mask.json", "N", 3, 64, 21, {"B=2", "H=2", "M=12", "D=16", "Dv=16"}, true, 1e-4},
    {"attention_full_mask.json", "M", 2, 40, 23, {"B=1", "H=2", "N=16", "D=16", "Dv=16"}, true, 1e-4},
    /* a lower corner of 1 (batch 1, one row): the object serves 1 as well */
    {"attention_full.json", "B", 1, 5, 3, {"H=3", "M=9", "N=17", "D=8", "Dv=8"}, true, 1e-4},
    {"attention_full_mask.json", "M", 1, 40, 23, {"B=1", "H=2", "N=16", "D=16", "Dv=16"}, true, 1e-4},
    {"attention_full_mask.json", "B", 1, 4, 3, {"H=2", "M=12", "N=16", "D=16", "Dv=16"}, true, 1e-4},
    {"seed000_gemm_bias_relu.json", "M", 1, 61, 29, {"K=19", "N=70"}, true, 1e-3},
};

/* Compile the case's box once; run it at lo, hi and mid against the
 * interpreter; count the objects: one when generic, one per binding else. */
static void run_case(const box_case *k) {
  rt_sgen_sym box[8];
  int n = 0;
  char names[8][32];
  box[n++] = (rt_sgen_sym){k->var, k->lo, k->hi};
  for (int i = 0; k->fixed[i]; i++) {
    const char *eq = strchr(k->fixed[i], '=');
    snprintf(names[n], sizeof names[n], "%.*s", (int)(eq - k->fixed[i]), k->fixed[i]);
    int64_t v = strtoll(eq + 1, NULL, 10);
    box[n] = (rt_sgen_sym){names[n], v, v};
    n++;
  }
  rt_sgen *s = compile_box(k->model, box, n, false);
  if (k->generic && rt_sgen_fallback(s)) fail_msg("%s over %s: not one object: %s", k->model, k->var, rt_sgen_fallback(s));
  if (!k->generic) assert_non_null(rt_sgen_fallback(s));
  if (getenv("SGEN_DEBUG") && rt_sgen_fallback(s)) fprintf(stderr, "%s: %s\n", k->model, rt_sgen_fallback(s));
  int64_t at[4] = {k->lo, k->hi, k->mid, k->lo + 1}; /* a lower corner of 1: 1 and 2 both */
  for (int b = 0; b < 3 + (k->lo == 1); b++) {
    char var[48];
    const char *bind[8] = {var};
    snprintf(var, sizeof var, "%s=%lld", k->var, (long long)at[b]);
    for (int i = 0; k->fixed[i]; i++) bind[i + 1] = k->fixed[i];
    check_at(s, k->model, bind, 1, k->tol);
  }
  /* generic: one object, a lower corner of 1 included (the graph at 1 is the same: tiny_symtab.sym_broadcasts) */
  assert_int_equal(rt_sgen_objects(s), k->generic ? 1 : 3 + (k->lo == 1));
  rt_sgen_free(s);
}

static void test_models(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) run_case(&CASES[i]);
}

/* GEMMs over their rows, 96 columns (a panel of 64 and one of 32): below
 * 2 MR panels of rows the tasks split along N at run time (resolve_tile's
 * choice made again at the run's M; M split at the upper corner), below
 * 228 rows they run on the calling thread, and few rows are cut into
 * even panels; the rest as before */
static void test_gemm_rows_split(void **state) {
  (void)state;
  rt_sgen_sym box[2] = {{"M", 2, 300}, {"D", 96, 96}};
  rt_sgen *s = compile_box("gemm_chain4.json", box, 2, false);
  if (rt_sgen_fallback(s)) fail_msg("not one object: %s", rt_sgen_fallback(s));
  assert_non_null(strstr(rt_sgen_source(s), "resolve_tile's choice at this M"));
  assert_non_null(strstr(rt_sgen_source(s), "if (cx.M < 228L) pool = NULL"));
  /* 7, 13, 25 rows: even row panels at run time (4 + 3, 5 + 5 + 3, 5 x 5) */
  const char *at[8][3] = {{"M=2", "D=96"},   {"M=5", "D=96"},   {"M=7", "D=96"},   {"M=13", "D=96"},
                          {"M=25", "D=96"},  {"M=227", "D=96"}, {"M=228", "D=96"}, {"M=300", "D=96"}};
  assert_non_null(strstr(rt_sgen_source(s), "cx.pr = cx.M <="));
  /* four GEMMs 96 deep, inputs in [-4, 4]: 4.8e-3 at M = 300 (the upper corner's own split; the
   * specialised objects differ from the interpreter as much: summation order) */
  for (int b = 0; b < 8; b++) check_at(s, "gemm_chain4.json", at[b], 1, 1e-2);
  assert_int_equal(rt_sgen_objects(s), 1);
  rt_sgen_free(s);
}

/* Convolutions and pools over their images' size (N, H, W in a box, the
 * channels fixed): one object, the direct conv kernel reading the sizes at
 * run time over a zero-padded copy of its input (or the input itself), a
 * row's rest in narrower tiles, the pools' rows and vectors behind
 * switches; checked against the interpreter at both corners, between
 * them, at odd sizes and at one tall and narrow and one short and wide
 * image. */
typedef struct conv_case {
  const char *model;
  rt_sgen_sym box[6];
  int nbox;
  const char *at[5][6]; /* bindings: "NAME=V", NULL-ended */
  double tol;
  int nout;
} conv_case;

static const conv_case CONV_CASES[] = {
    /* 3 -> 16 channels, a basic block (a residual epilogue), a 1x1 conv (a
     * GEMM over the pixels, split in column blocks), a stride-2 3x3 and a
     * 1x1/2 shortcut; weights as inputs (packed per call); H, W even */
    {"cnn_hw.harp",
     {{"N", 1, 2}, {"H", 6, 40}, {"W", 4, 36}, {"C", 3, 3}, {"K", 16, 16}},
     5,
     {{"N=1", "H=6", "W=4", "C=3", "K=16"},
      {"N=2", "H=40", "W=36", "C=3", "K=16"},
      {"N=1", "H=22", "W=18", "C=3", "K=16"},
      {"N=2", "H=34", "W=6", "C=3", "K=16"},
      {"N=1", "H=8", "W=30", "C=3", "K=16"}},
     5e-3, 1}, /* five convs deep, values in the thousands: the specialised objects differ by 3.6e-3 */
    /* weights packed once, 20 output channels (a partial vector block), odd sizes */
    {"conv3x3_bias_silu.json",
     {{"N", 1, 3}, {"H", 3, 29}, {"W", 5, 33}, {"C", 5, 5}, {"O", 20, 20}},
     5,
     {{"N=1", "H=3", "W=5", "C=5", "O=20"},
      {"N=3", "H=29", "W=33", "C=5", "O=20"},
      {"N=2", "H=17", "W=31", "C=5", "O=20"},
      {"N=1", "H=29", "W=7", "C=5", "O=20"},
      {"N=3", "H=4", "W=19", "C=5", "O=20"}},
     1e-4, 1},
    /* 160 input channels: the weights blocked over channels (partial sums
     * between blocks); an fp16 input widened by the padded copy */
    {"conv3x3_bias_silu_fp16.json",
     {{"N", 1, 1}, {"H", 2, 15}, {"W", 3, 23}, {"C", 200, 200}, {"O", 24, 24}},
     5,
     {{"N=1", "H=2", "W=3", "C=200", "O=24"},
      {"N=1", "H=15", "W=23", "C=200", "O=24"},
      {"N=1", "H=9", "W=13", "C=200", "O=24"},
      {"N=1", "H=14", "W=4", "C=200", "O=24"},
      {"N=1", "H=3", "W=22", "C=200", "O=24"}},
     2e-2, 1},
    /* 3x3 convs of 16 channels or more: the direct kernel or Winograd
     * chosen per binding (cgen_wino_rt.c; from 784 output pixels): 10x12
     * direct, 16x60 F(4x4) rows of tiles, 60x20 F(4x4) gathers (N = 2),
     * 30x40 F(2x2) rows, 64x64 F(4x4) rows; weights packed once (each
     * kernel's layout in one buffer), a SiLU epilogue, 20 output channels
     * (a partial block of 8) */
    {"conv3x3_bias_silu.json",
     {{"N", 1, 2}, {"H", 3, 64}, {"W", 3, 64}, {"C", 16, 16}, {"O", 20, 20}},
     5,
     {{"N=1", "H=10", "W=12", "C=16", "O=20"},
      {"N=1", "H=16", "W=60", "C=16", "O=20"},
      {"N=2", "H=60", "W=20", "C=16", "O=20"},
      {"N=1", "H=30", "W=40", "C=16", "O=20"},
      {"N=2", "H=64", "W=64", "C=16", "O=20"}},
     1e-3, 1}, /* values up to ~240: F(4x4)'s error, as the specialised object's (bitwise equal at 16x60) */
    /* the same choice in a basic block, weights as inputs (each kernel
     * packs per call), the second conv's residual in its epilogue (the
     * stride-2 convs stay direct) */
    {"cnn_hw.harp",
     {{"N", 1, 2}, {"H", 6, 64}, {"W", 4, 64}, {"C", 3, 3}, {"K", 16, 16}},
     5,
     {{"N=1", "H=10", "W=12", "C=3", "K=16"},
      {"N=1", "H=16", "W=60", "C=3", "K=16"},
      {"N=2", "H=60", "W=20", "C=3", "K=16"},
      {"N=1", "H=30", "W=40", "C=3", "K=16"},
      {"N=2", "H=64", "W=64", "C=3", "K=16"}},
     2e-2, 1}, /* five convs deep, values to ~2e5, F(4x4): 8.6e-3 at 60x20, bitwise the specialised object's */
    /* fp32 convs reading their input in place, the columns outside a row
     * as zeros (no padded copy): 96 input channels (blocked), a 5x5 with
     * pad 2, a 3x3 padded only vertically; rows of one tile (5, 9, 11), of
     * several even tiles (13 -> 7 + 6, 19, 33, 40) */
    {"conv_pad_hw.harp",
     {{"N", 1, 1}, {"H", 5, 40}, {"W", 5, 40}, {"C", 96, 96}, {"K", 32, 32}},
     5,
     {{"N=1", "H=5", "W=5", "C=96", "K=32"},
      {"N=1", "H=40", "W=40", "C=96", "K=32"},
      {"N=1", "H=13", "W=19", "C=96", "K=32"},
      {"N=1", "H=9", "W=33", "C=96", "K=32"},
      {"N=1", "H=27", "W=11", "C=96", "K=32"}},
     1e-2, 2}, /* values to ~1e4: 1.1e-4 at 5x5, 3.3e-3 at 40x40 (the 3x3s on Winograd F(4x4)); a lost tap is ~0.1 */
    /* pools: a 2x2 max (stride 2, column phases) and a 3x3 average at
     * stride 1 of a ReLU; rows and vectors of a row behind run-time switches */
    {"pool_hw.harp",
     {{"N", 1, 2}, {"H", 4, 40}, {"W", 4, 36}, {"C", 19, 19}},
     4,
     {{"N=1", "H=4", "W=4", "C=19"},
      {"N=2", "H=40", "W=36", "C=19"},
      {"N=1", "H=22", "W=18", "C=19"},
      {"N=2", "H=38", "W=6", "C=19"},
      {"N=1", "H=6", "W=34", "C=19"}},
     1e-6, 2},
    /* padded stride-2 max pools (pad 1 and 2: both parities of the
     * run-time pair copy) and a padded stride-1 one, odd and even widths: none, one and several
     * whole vector pairs a row, the last pair masked or whole; the box's
     * corners odd (an even one drops the unused right pad: two objects) */
    {"pool_pad_hw.harp",
     {{"N", 1, 2}, {"H", 3, 41}, {"W", 3, 69}, {"C", 7, 7}},
     4,
     {{"N=1", "H=3", "W=3", "C=7"},
      {"N=2", "H=41", "W=69", "C=7"},
      {"N=1", "H=14", "W=33", "C=7"},
      {"N=2", "H=9", "W=64", "C=7"},
      {"N=1", "H=22", "W=17", "C=7"}},
     1e-6, 3},
    /* depthwise convs: 3x3 and 5x5 padded (a residual epilogue, an
     * asymmetric pad); 24 channels; odd and even sizes, one vector or
     * several a row, the rest of rows and vectors behind switches (strided
     * ones: test_cgen_dwrt.c) */
    {"dw_hw.harp",
     {{"N", 1, 2}, {"H", 3, 41}, {"W", 3, 69}},
     3,
     {{"N=1", "H=3", "W=3"},
      {"N=2", "H=41", "W=69"},
      {"N=1", "H=14", "W=33"},
      {"N=2", "H=9", "W=64"},
      {"N=1", "H=22", "W=17"}},
     1e-4, 2}, /* two convs deep, values in the hundreds: the specialised object differs by 4e-5 as well */
    /* a map over rows of H * W with per-channel broadcasts (one outer
     * dimension per input stride pattern): rows, outer sizes and strides
     * read at run time; rows of 16 points or more (shorter ones take the
     * generic loops, so the lower corner has H * W >= 16) */
    {"scale_hw.harp",
     {{"N", 1, 1}, {"C", 16, 16}, {"H", 4, 41}, {"W", 4, 69}},
     4,
     {{"N=1", "C=16", "H=4", "W=4"},
      {"N=1", "C=16", "H=41", "W=69"},
      {"N=1", "C=16", "H=14", "W=33"},
      {"N=1", "C=16", "H=5", "W=9"},
      {"N=1", "C=16", "H=22", "W=17"}},
     1e-5, 1},
    {"scale_hw.harp",
     {{"N", 2, 3}, {"C", 5, 5}, {"H", 4, 41}, {"W", 4, 69}},
     4,
     {{"N=2", "C=5", "H=4", "W=4"},
      {"N=3", "C=5", "H=41", "W=69"},
      {"N=2", "C=5", "H=14", "W=33"},
      {"N=3", "C=5", "H=7", "W=5"},
      {"N=2", "C=5", "H=22", "W=17"}},
     1e-5, 1},
    /* a squeeze-excite block: its mean over H, W a row reduction
     * (reduce_c.c) whose row length H * W and divisor are read at run
     * time; the 1x1 convs on [N, C, 1, 1], the gate and the scaled
     * residual after it (N fixed: the convs' GEMMs over N rows of one
     * point each still print N; H * W >= 16 as for scale_hw.harp) */
    {"se_hw.harp",
     {{"N", 1, 1}, {"C", 16, 16}, {"R", 4, 4}, {"H", 4, 30}, {"W", 4, 33}},
     5,
     {{"N=1", "C=16", "R=4", "H=4", "W=4"},
      {"N=1", "C=16", "R=4", "H=30", "W=33"},
      {"N=1", "C=16", "R=4", "H=13", "W=9"},
      {"N=1", "C=16", "R=4", "H=29", "W=5"},
      {"N=1", "C=16", "R=4", "H=4", "W=31"}},
     1e-5, 1},
    /* a concat along the channels: one map piece per input, each slab's
     * rows, strides and offset in y read at run time */
    {"cat_hw.harp",
     {{"N", 2, 3}, {"H", 4, 41}, {"W", 4, 69}},
     3,
     {{"N=2", "H=4", "W=4"},
      {"N=3", "H=41", "W=69"},
      {"N=2", "H=14", "W=33"},
      {"N=3", "H=7", "W=5"},
      {"N=2", "H=22", "W=17"}},
     1e-6, 1},
    {"cat_hw.harp",
     {{"N", 1, 1}, {"H", 4, 41}, {"W", 4, 69}},
     3,
     {{"N=1", "H=4", "W=4"},
      {"N=1", "H=41", "W=69"},
      {"N=1", "H=15", "W=32"},
      {"N=1", "H=5", "W=9"},
      {"N=1", "H=40", "W=17"}},
     1e-6, 1},
};

/* Fused attention over up to 256 keys: each binding runs the key tile a
 * specialised object takes at its N (16, 32, 48 or 64 keys, cgen_attn.c
 * key_tiles), and a binding of little work runs on the calling thread as a
 * specialised object's does (decided at run time: the constants are the
 * upper corner's, which would wake the pool at every binding); the numbers
 * at N in every tile, against the interpreter (test_cgen_attn checks the
 * kernel itself against a naive softmax) */
static void test_attention_per_binding(void **state) {
  (void)state;
  rt_sgen_sym box[6] = {{"N", 2, 256}, {"B", 1, 1}, {"H", 2, 2}, {"M", 24, 24}, {"D", 16, 16}, {"Dv", 16, 16}};
  rt_sgen *s = compile_box("attention_full.json", box, 6, false);
  if (rt_sgen_fallback(s)) fail_msg("not one object: %s", rt_sgen_fallback(s));
  const char *src = rt_sgen_source(s);
  if (strstr(src, "avx512_run(")) { /* the AVX-512 variant: 64 keys at the top, 16 apart */
    assert_non_null(strstr(src, "if (n_ <= 16L) return "));
    assert_non_null(strstr(src, "if (n_ <= 48L) return "));
    assert_non_null(strstr(src, "_attn_avx512_b48_run(pool, q, k, v, mask, o);"));
    assert_non_null(strstr(src, "_attn_avx512_b64_run(pool, q, k, v, mask, o);\n}"));
  }
  /* B H M N (D + Dv) multiply-adds against SMALL_WORK: B, M at the box's (1, 24), N this run's */
  const char *small = strstr(src, "  if ((double)1.0 * 24.0 * (");
  assert_non_null(small);
  assert_non_null(strstr(small, ") * 64.0 < 2097152) pool = NULL; /* small at this binding"));
  assert_null(strstr(src, "pool = NULL; /* small: the calling thread alone")); /* not at every binding */
  const char *at[5][7] = {{"N=2", "B=1", "H=2", "M=24", "D=16", "Dv=16"}, {"N=17", "B=1", "H=2", "M=24", "D=16", "Dv=16"},
                          {"N=37", "B=1", "H=2", "M=24", "D=16", "Dv=16"}, {"N=100", "B=1", "H=2", "M=24", "D=16", "Dv=16"},
                          {"N=256", "B=1", "H=2", "M=24", "D=16", "Dv=16"}};
  for (int b = 0; b < 5; b++) check_at(s, "attention_full.json", at[b], 1, 1e-4);
  assert_int_equal(rt_sgen_objects(s), 1);
  rt_sgen_free(s);
}

static void test_conv_sizes(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof CONV_CASES / sizeof CONV_CASES[0]; i++) {
    const conv_case *k = &CONV_CASES[i];
    rt_sgen *s = compile_box(k->model, k->box, k->nbox, false);
    if (rt_sgen_fallback(s)) fail_msg("%s: not one object: %s", k->model, rt_sgen_fallback(s));
    assert_non_null(strstr(rt_sgen_source(s), "hp_sym_[")); /* the sizes are read at run time */
    if (strstr(k->model, "pool") || strstr(k->model, "dw_") || strstr(k->model, "cnn_")) /* small bindings on the calling thread, decided at run time */
      assert_non_null(strstr(rt_sgen_source(s), "small at this binding"));
    if (k->box[2].hi == 64 && (strstr(k->model, "conv3x3") || strstr(k->model, "cnn_"))) /* direct or Winograd per binding */
      assert_non_null(strstr(rt_sgen_source(s), "Winograd pays at this size"));
    if (strstr(k->model, "se_")) /* the mean over H, W: the row reduction, not the loop nest */
      assert_non_null(strstr(rt_sgen_source(s), "a row sum over run-time rows"));
    if (getenv("SGEN_DEBUG")) fprintf(stderr, "%s", rt_sgen_source(s));
    for (int b = 0; b < 5; b++) check_at(s, k->model, k->at[b], k->nout, k->tol);
    assert_int_equal(rt_sgen_objects(s), 1);
    rt_sgen_free(s);
  }
}

/* A binding inside the box that breaks the model (4 R != 8 H: the reshape
 * no longer holds) is refused before any kernel, naming why (the tie the
 * box learned from the reshape, R := 2*H); the bindings that keep it run. */
static void test_breaks_model(void **state) {
  (void)state;
  rt_sgen_sym box[] = {{"R", 2, 16}, {"H", 1, 8}};
  rt_sgen *s = compile_box("reshape_rows.json", box, 2, false);
  if (getenv("SGEN_DEBUG") && rt_sgen_fallback(s)) fprintf(stderr, "reshape_rows: %s\n", rt_sgen_fallback(s));
  const char *good[] = {"R=6", "H=3", NULL};
  check_at(s, "reshape_rows.json", good, 1, 1e-6);
  /* R = 6 with H = 2: inputs_at cannot prepare that, so the inputs are made by hand */
  harp_error e = {0};
  ut_tensor in[2] = {0}, out[1] = {0};
  assert_ok(&e, ut_tensor_alloc(&e, &in[0], TINY_FP32, 2, (int64_t[]){6, 4}));
  assert_ok(&e, ut_tensor_alloc(&e, &in[1], TINY_FP32, 2, (int64_t[]){2, 8}));
  assert_int_equal(rt_sgen_run(&e, s, in, 2, out), HARP_E_INPUT_MISMATCH);
  if (!strstr(e.msg, "shape symbol R is 6 (an input's shape), but its definition 2*H gives 4")) fail_msg("%s", e.msg);
  assert_null(out[0].data);
  harp_error_clear(&e);
  ut_tensor_free(&in[0]);
  ut_tensor_free(&in[1]);
  rt_sgen_free(s);
}

/* A bad box is an error at compile time, saying what: lo < 1 or lo > hi,
 * a symbol twice, one no input declares, a corner past the size limits. */
static void test_bad_box(void **state) {
  (void)state;
  static const struct {
    rt_sgen_sym box[2];
    harp_status code;
    const char *says;
  } bad[] = {
      {{{"R", 0, 4}, {"L", 33, 33}}, HARP_E_INVALID_ARG, "is not 1 <= lo <= hi"},
      {{{"R", 5, 4}, {"L", 33, 33}}, HARP_E_INVALID_ARG, "is not 1 <= lo <= hi"},
      {{{"R", 2, 4}, {"R", 33, 33}}, HARP_E_INVALID_ARG, "given twice"},
      {{{"Q", 2, 4}, {"R", 2, 4}}, HARP_E_INVALID_ARG, "no input of the model declares it"},
      {{{"R", 2, INT64_C(1) << 40}, {"L", 33, 33}}, HARP_E_LIMIT, "the ShapeSet's upper corner"},
  };
  tiny_graph *g = load_model("softmax_rows.json");
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    rt_sgen *s = NULL;
    harp_error e = {0};
    rt_sgen_sym box[3] = {bad[i].box[0], bad[i].box[1], {"L", 33, 33}};
    assert_int_equal(rt_sgen_compile(&e, g, box, bad[i].box[0].name[0] == 'Q' ? 3 : 2, NULL, &s), bad[i].code);
    if (!strstr(e.msg, bad[i].says)) fail_msg("case %zu: %s", i, e.msg);
    assert_null(s);
    harp_error_clear(&e);
  }
  tiny_graph_free(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_softmax_one_object),
      cmocka_unit_test(test_outside_box),
      cmocka_unit_test(test_models),
      cmocka_unit_test(test_gemm_rows_split),
      cmocka_unit_test(test_conv_sizes),
      cmocka_unit_test(test_attention_per_binding),
      cmocka_unit_test(test_breaks_model),
      cmocka_unit_test(test_bad_box),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
