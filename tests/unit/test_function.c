/* test_function.c — Function and arena: partitions pass their invariants,
 * live buffers never share memory, memory is reused, and region-by-region
 * playback on the arena equals whole-graph interpretation bit for bit
 * (rgtest.h's rgt_playback_check). */
#include <math.h>

#include "harp/function.h"
#include "rgtest.h"

static void check_playback(tiny_graph *g, const tiny_symtab *syms, rg_partition *p, bool bitwise) {
  harp_error e = {0};
  fn_function *f;
  assert_ok(&e, rg_partition_check(&e, p));
  assert_ok(&e, fn_build(&e, p, "main", &f));
  assert_ok(&e, fn_check(&e, f));
  assert_true(f->required_memory >= fn_peak_live_bytes(f));
  rgt_playback_check(g, syms, f, 42, bitwise);
  char *js = fn_dump_json(f);
  assert_non_null(js);
  assert_non_null(strstr(js, "\"required_memory\""));
  free(js);
  fn_free(f);
}

static tiny_graph *load_model(const char *file, const char *const *syms, tiny_symtab *st) {
  harp_error e = {0};
  char path[1024];
  snprintf(path, sizeof path, "%s/tests/models/%s", HARP_SOURCE_DIR, file);
  tiny_graph *g;
  assert_ok(&e, tiny_load_file(&e, path, &g));
  tiny_symtab_init(st);
  for (int i = 0; syms[i]; i++) assert_ok(&e, tiny_symtab_parse_assign(&e, st, syms[i]));
  assert_ok(&e, tiny_prepare(&e, g, st, false));
  return g;
}

static void test_seed_models_singletons(void **state) {
  (void)state;
  static const char *gemm[] = {"M=5", "K=7", "N=3", NULL};
  static const char *attn[] = {"B=1", "H=2", "M=5", "N=6", "D=4", NULL};
  static const char *conv[] = {"N=1", "Cin_total=3", "H=7", "W=6", "Cout=4", "Cin=3", "Kh=3", "Kw=3", "pt=1", "pb=1",
                               "pl=1", "pr=0", "Sh=2", "Sw=1", "Dh=1", "Dw=2", "G=1", "Rcout=4", "Oy=4", "Ox=3", NULL};
  struct {
    const char *file;
    const char *const *syms;
    bool fp32;
  } models[] = {{"seed001_gemm.json", gemm, false},
                {"seed000_gemm_bias_relu.json", gemm, false},
                {"seed001_attention.json", attn, false},
                {"attention_qkt.json", attn, false},
                {"seed001_conv.json", conv, false}};
  for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
    tiny_symtab st;
    tiny_graph *g = load_model(models[i].file, models[i].syms, &st);
    rg_partition *p;
    harp_error e = {0};
    assert_ok(&e, rg_partition_singletons(&e, g, &p));
    /* fp16 models round at region boundaries, so compare with tolerance */
    check_playback(g, &st, p, models[i].fp32);
    rg_partition_free(p);
    tiny_graph_free(g);
    tiny_symtab_free(&st);
  }
}

/* x -> (GEMM -> +bias -> relu) x 4, all fp32: built with the builder API. */
static tiny_graph *gemm_chain(int layers, int64_t m, int64_t d) {
  tiny_graph *g = tiny_graph_new();
  int64_t xs[2] = {m, d}, ws[2] = {d, d};
  tiny_shape sx = tiny_shape_of(2, xs), sw = tiny_shape_of(2, ws);
  int x = tiny_b_input(g, "x", TINY_FP32, &sx);
  for (int l = 0; l < layers; l++) {
    char name[16];
    snprintf(name, sizeof name, "w%d", l);
    int w = tiny_b_input(g, name, TINY_FP32, &sw);
    int64_t a3[3] = {m, d, 1}, b3[3] = {1, d, d};
    tiny_shape sa = tiny_shape_of(3, a3), sb = tiny_shape_of(3, b3);
    int a = tiny_b_reshape(g, x, &sa), b = tiny_b_reshape(g, w, &sb);
    int prod = tiny_b_binary(g, TINY_MUL, a, b);
    int axes[1] = {1};
    int mm = tiny_b_reduce(g, prod, TINY_RSUM, axes, 1, TINY_FP32);
    int biased = tiny_b_binary_imm(g, TINY_ADD, mm, 0.25);
    x = tiny_b_unary(g, TINY_RELU, biased);
  }
  tiny_mark_output(g, x);
  return g;
}

static void test_gemm_chain_arena(void **state) {
  (void)state;
  tiny_graph *g = gemm_chain(4, 8, 16);
  harp_error e = {0};
  tiny_symtab st;
  tiny_symtab_init(&st);
  assert_int_equal(g->err.code, HARP_OK);
  assert_ok(&e, tiny_prepare(&e, g, &st, false));
  rg_partition *p;
  assert_ok(&e, rg_partition_singletons(&e, g, &p));
  check_playback(g, &st, p, true);
  fn_function *f;
  assert_ok(&e, fn_build(&e, p, "chain", &f));
  size_t sum = 0;
  int temps = 0;
  for (int b = 0; b < f->nbuffers; b++)
    if (f->buffers[b].kind == FN_TEMP) sum += f->buffers[b].size, temps++;
  assert_true(temps >= 12);
  assert_int_equal(fn_max_live_temps(f), 2); /* a chain: what a kernel reads and what it writes */
  assert_true(f->required_memory < sum);
  fn_free(f);
  rg_partition_free(p);
  tiny_graph_free(g);
  tiny_symtab_free(&st);
}

/* A hand-made layout problem: the allocator reuses freed blocks best-fit. */
static void test_diamond_reuse(void **state) {
  (void)state;
  /* x -> a=neg(x) -> b=exp(a), c=relu(a) -> d=b+c -> out */
  const char *js = "{\"uops\":[{\"id\":\"x\",\"uop\":\"INPUT\",\"arg\":{\"tensor_id\":\"x\",\"dtype\":\"fp32\",\"shape\":[64]}},"
                   "{\"id\":\"a\",\"uop\":\"NEG\",\"src\":[\"x\"]},{\"id\":\"b\",\"uop\":\"EXP\",\"src\":[\"a\"]},"
                   "{\"id\":\"c\",\"uop\":\"RELU\",\"src\":[\"a\"]},{\"id\":\"d\",\"uop\":\"ADD\",\"src\":[\"b\",\"c\"]},"
                   "{\"id\":\"e\",\"uop\":\"SQRT\",\"src\":[\"d\"]}]}";
  harp_error e = {0};
  tiny_symtab st;
  harp_status s;
  tiny_graph *g = tu_prepare(&e, js, NULL, &st, &s);
  assert_ok(&e, s);
  rg_partition *p;
  assert_ok(&e, rg_partition_singletons(&e, g, &p));
  fn_function *f;
  assert_ok(&e, fn_build(&e, p, "diamond", &f));
  assert_ok(&e, fn_check(&e, f));
  /* a, b, c live together at kernel c; d reuses a's slot */
  assert_int_equal(fn_max_live_temps(f), 3);
  assert_int_equal(f->required_memory, 3 * 256);
  check_playback(g, &st, p, true);
  fn_free(f);
  rg_partition_free(p);
  tiny_graph_free(g);
  tiny_symtab_free(&st);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_seed_models_singletons),
      cmocka_unit_test(test_gemm_chain_arena),
      cmocka_unit_test(test_diamond_reuse),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
