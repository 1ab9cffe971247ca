/* test_fe_dsl.c — the frontend's pieces one by one: symbolic dimensions,
 * the lexer, the parser's grammar, the builder API (and that the DSL builds
 * the same graphs), the shapes of the lowered Tiny IR (seed 000 §1.2 / §7),
 * output naming, the decompile round trip, the call depth limit, dumps. */
#include <jansson.h>

#include "fe_testutil.h"
#include "frontend/fe_dsl.h"
#include "frontend/fe_int.h"

#ifndef HARP_SOURCE_DIR
#define HARP_SOURCE_DIR "."
#endif

/* ---- dims ----------------------------------------------------------------- */
static void test_dims(void **st) {
  (void)st;
  ut_arena *A = ut_arena_new();
  const fe_dim *H = fe_dim_sym(A, "H"), *W = fe_dim_sym(A, "W"), *B = fe_dim_sym(A, "B"), *S = fe_dim_sym(A, "S");
  const fe_dim *one = fe_dim_int(A, 1), *two = fe_dim_int(A, 2);
  /* same-padding conv output: (H + 2 - 3)/1 + 1 = H */
  const fe_dim *d = fe_dim_add(A, fe_dim_div(A, fe_dim_sub(A, fe_dim_add(A, H, two), fe_dim_int(A, 3)), 1), one);
  assert_string_equal(d->text, "H");
  assert_string_equal(fe_dim_is_sym(d), "H");
  /* (H - 1)/2 + 1 = (H + 1)/2 */
  d = fe_dim_add(A, fe_dim_div(A, fe_dim_sub(A, H, one), 2), one);
  assert_string_equal(d->text, "(H + 1)/2");
  /* (2H + 3)/2 = H + 1 exactly */
  d = fe_dim_div(A, fe_dim_add(A, fe_dim_scale(A, H, 2), fe_dim_int(A, 3)), 2);
  assert_string_equal(d->text, "H + 1");
  /* products are canonical whatever the grouping */
  const fe_dim *p1 = fe_dim_mul(A, fe_dim_mul(A, B, S), W), *p2 = fe_dim_mul(A, B, fe_dim_mul(A, W, S));
  assert_string_equal(p1->text, "B*S*W");
  assert_string_equal(p2->text, "B*S*W");
  assert_string_equal(fe_dim_scale(A, fe_dim_div(A, H, 2), 2)->text, "2*(H/2)");
  assert_string_equal(fe_dim_scale(A, fe_dim_div(A, H, 2), -1)->text, "-(H/2)");
  assert_string_equal(fe_dim_sub(A, fe_dim_add(A, W, H), fe_dim_int(A, 4))->text, "H + W - 4");
  assert_string_equal(fe_dim_sub(A, H, H)->text, "0");
  /* comparison */
  assert_int_equal(fe_dim_cmp(H, fe_dim_add(A, fe_dim_sub(A, H, one), one)), FE_SAME);
  assert_int_equal(fe_dim_cmp(H, fe_dim_add(A, H, one)), FE_DIFF);
  assert_int_equal(fe_dim_cmp(H, W), FE_DIFF);
  assert_int_equal(fe_dim_cmp(H, fe_dim_int(A, 4)), FE_MAYBE);
  assert_int_equal(fe_dim_cmp(fe_dim_int(A, 3), fe_dim_int(A, 4)), FE_DIFF);
  /* evaluation and substitution */
  tiny_symtab t;
  tiny_symtab_init(&t);
  harp_error e = {0};
  assert_ok(&e, tiny_symtab_set(&e, &t, "H", 7));
  int64_t v;
  assert_true(fe_dim_eval(fe_dim_div(A, fe_dim_add(A, H, one), 2), &t, &v));
  assert_int_equal(v, 4);
  assert_false(fe_dim_eval(W, &t, &v));
  tiny_symtab_free(&t);
  /* overflow is an error, not a wrap */
  assert_null(fe_dim_scale(A, fe_dim_int(A, (int64_t)1 << 61), 4));
  ut_arena_free(A);
}

/* A dim printed in a type and parsed back is the same dim. */
static void test_dim_text_round_trip(void **st) {
  (void)st;
  const char *dims[] = {"(H + 1)/2", "2*(H/2) + W - 3", "B*S", "-(H/2) + 8", "3*B*S - 1", "(H/2)*W"};
  for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++) {
    char src[512];
    snprintf(src, sizeof src, "graph<H=8, W=8, B=1, S=2> main(x: f32[H, W, B, S]) -> (y: f32[%s]) {\n  return x\n}\n", dims[i]);
    harp_error e = {0};
    hg_program *p = NULL;
    /* the type check fails (the value is rank 4) but the type must parse to the same text */
    hg_diags d;
    hg_harp_load_text_diags(&e, src, strlen(src), "t.harp", &p, &d);
    assert_true(strstr(e.msg, dims[i]) != NULL);
  }
}

/* ---- lexer --------------------------------------------------------------------- */
static void test_lexer(void **st) {
  (void)st;
  const char *src = "graph<B=1> f(x: f32[B]) -> (y: f32[B]) { // c\n  y = x*2.5e-1 + .5 # c\n  /* block\n */ return y <= inf\n}";
  hg_diags ds = {0};
  fe_diagctx dc = {&ds, 0};
  int n;
  fe_tok *t = fe_lex(src, strlen(src), &dc, &n);
  assert_non_null(t);
  assert_int_equal(dc.count, 0);
  fe_tok_kind want[] = {T_GRAPH, T_LT, T_NAME, T_ASSIGN, T_INT, T_GT, T_NAME, T_LPAREN, T_NAME, T_COLON, T_NAME, T_LBRACK,
                        T_NAME, T_RBRACK, T_RPAREN, T_ARROW, T_LPAREN, T_NAME, T_COLON, T_NAME, T_LBRACK, T_NAME, T_RBRACK,
                        T_RPAREN, T_LBRACE, T_NAME, T_ASSIGN, T_NAME, T_STAR, T_FLOAT, T_PLUS, T_FLOAT, T_RETURN, T_NAME,
                        T_LE, T_FLOAT, T_RBRACE, T_EOF};
  assert_int_equal(n, (int)(sizeof want / sizeof want[0]));
  for (int i = 0; i < n; i++) assert_int_equal(t[i].k, want[i]);
  assert_true(t[25].bol); /* y at line 2 */
  assert_int_equal(t[25].line, 2);
  assert_int_equal(t[25].col, 3);
  assert_true(t[29].num == 0.25);
  assert_true(t[31].num == 0.5);
  assert_true(isinf(t[35].num));
  assert_int_equal(t[32].line, 4); /* return after the block comment */
  assert_int_equal(t[8].depth, 1); /* x inside ( */
  free(t);
  /* bad characters are reported, each once */
  const char *bad = "a $ b \x80\x81 c ` 1x";
  hg_diags d2 = {0};
  fe_diagctx dc2 = {&d2, 0};
  t = fe_lex(bad, strlen(bad), &dc2, &n);
  assert_int_equal(dc2.count, 4);
  assert_int_equal(d2.d[0].col, 3);
  free(t);
}

/* ---- parser forms ---------------------------------------------------------------- */
static void test_grammar(void **st) {
  (void)st;
  const char *src =
      "// comments, ';', tuples, several returns, keyword arguments, nested lists,\n"
      "// a call spread over lines, recursion-free subgraphs defined after use\n"
      "graph<N=4> main(x: f32[N, 3], w: f32[3, 2]) -> (a: f32[N, 2], b: f32[N, 2], c: f32[N, 3]) {\n"
      "  (p, q) = pair(x @ w); r = pad(x, [[0, 0], [1, 0]], value=-inf)\n"
      "  s = slice(r,\n"
      "            [0, 1],   # starts\n"
      "            [N, 4])\n"
      "  return p, q, s\n"
      "}\n"
      "graph<M=1> pair(v: f32[M, 2]) -> (u: f32[M, 2], w: f32[M, 2]) {\n"
      "  return relu(v), -v\n"
      "}\n";
  hg_program *p = fu_load(src);
  assert_int_equal(hg_program_ngraphs(p), 2);
  hg_graph *m = hg_program_find(p, "main");
  assert_non_null(m);
  assert_int_equal(m->nout, 3);
  assert_int_equal(m->nparams, 2);
  hg_program_free(p);
}

/* ---- builder API ------------------------------------------------------------------ */
static hg_program *build_mlp(void) {
  hg_graph *g = hg_graph_new();
  hg_shape_var(g, "B", 4);
  tiny_dim B = tiny_dim_sym("B");
  hg_val x = hg_input(g, "x", TINY_FP32, 2, (tiny_dim[]){B, tiny_dim_int(64)});
  hg_val w1 = hg_input(g, "w1", TINY_FP32, 2, (tiny_dim[]){tiny_dim_int(64), tiny_dim_int(128)});
  hg_val b1 = hg_input(g, "b1", TINY_FP32, 1, (tiny_dim[]){tiny_dim_int(128)});
  hg_val w2 = hg_input(g, "w2", TINY_FP32, 2, (tiny_dim[]){tiny_dim_int(128), tiny_dim_int(10)});
  hg_val b2 = hg_input(g, "b2", TINY_FP32, 1, (tiny_dim[]){tiny_dim_int(10)});
  hg_val h = hg_name(g, hg_relu(g, hg_add(g, hg_matmul(g, x, w1), b1)), "h");
  hg_output(g, "y", hg_add(g, hg_matmul(g, h, w2), b2));
  assert_int_equal(hg_graph_error(g)->code, HARP_OK);
  return hg_graph_program(g);
}

static char *read_example(const char *name) {
  char path[1024];
  snprintf(path, sizeof path, "%s/examples/%s", HARP_SOURCE_DIR, name);
  char *text = NULL;
  size_t len;
  harp_error e = {0};
  assert_ok(&e, ut_read_file(&e, path, 1 << 20, &text, &len));
  return text;
}

/* The API and the DSL build the same graph. */
static void test_builder_matches_dsl(void **st) {
  (void)st;
  hg_program *api = build_mlp();
  char *text = read_example("mlp.harp");
  hg_program *dsl = fu_load(text);
  char why[256];
  if (!hg_program_equal(api, dsl, why, sizeof why)) fail_msg("API vs DSL: %s", why);
  hg_graph_free(hg_program_find(api, "main"));
  hg_program_free(dsl);
  free(text);
}

static void test_builder_errors(void **st) {
  (void)st;
  hg_graph *g = hg_graph_new();
  hg_val a = hg_input(g, "a", TINY_FP32, 2, (tiny_dim[]){tiny_dim_int(4), tiny_dim_int(3)});
  hg_val b = hg_input(g, "b", TINY_FP32, 2, (tiny_dim[]){tiny_dim_int(5), tiny_dim_int(2)});
  assert_true(a > 0 && b > 0);
  assert_true(hg_matmul(g, a, b) < 0); /* 3 vs 5 */
  assert_int_equal(hg_graph_error(g)->code, HARP_E_AXIS_SIZE_MISMATCH);
  char first[1100];
  snprintf(first, sizeof first, "%s", hg_graph_error(g)->msg);
  /* sticky: later calls fail too and keep the first error */
  assert_true(hg_relu(g, a) < 0);
  assert_true(hg_input(g, "c", TINY_FP32, 0, NULL) < 0);
  assert_string_equal(hg_graph_error(g)->msg, first);
  hg_graph_free(g);

  struct {
    const char *what;
    harp_status code;
  } cases[] = {{"bad value", HARP_E_INVALID_ARG}, {"dangling", HARP_E_DANGLING}, {"dup param", HARP_E_DUPLICATE_ID},
               {"bool add", HARP_E_DTYPE_MISMATCH}, {"perm", HARP_E_INVALID_PERMUTATION}, {"conv groups", HARP_E_AXIS_SIZE_MISMATCH},
               {"axis", HARP_E_INVALID_ARG}, {"i32 div", HARP_E_DTYPE_MISMATCH}, {"mask", HARP_E_BROADCAST_MISMATCH},
               {"call arity", HARP_E_ARITY}, {"gather idx", HARP_E_DTYPE_MISMATCH}, {"slice step", HARP_E_NEGATIVE_STRIDE}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    g = hg_graph_new();
    hg_val x = hg_input(g, "x", TINY_FP32, 2, (tiny_dim[]){tiny_dim_int(4), tiny_dim_int(6)});
    hg_val c = hg_input(g, "c", TINY_BOOL, 1, (tiny_dim[]){tiny_dim_int(6)});
    hg_val n = hg_input(g, "n", TINY_I32, 1, (tiny_dim[]){tiny_dim_int(6)});
    hg_val r = 1;
    switch (i) {
    case 0: r = hg_relu(g, -1); break;
    case 1: r = hg_relu(g, 99); break;
    case 2: r = hg_input(g, "x", TINY_FP32, 0, NULL); break;
    case 3: r = hg_add(g, c, c); break;
    case 4: r = hg_permute(g, x, (int[]){0, 0}, 2); break;
    case 5: {
      hg_val w = hg_input(g, "w", TINY_FP32, 4, (tiny_dim[]){tiny_dim_int(3), tiny_dim_int(2), tiny_dim_int(1), tiny_dim_int(1)});
      hg_val x4 = hg_reshape(g, x, 4, (tiny_dim[]){tiny_dim_int(1), tiny_dim_int(4), tiny_dim_int(6), tiny_dim_int(1)});
      r = hg_conv2d(g, x4, w, &(hg_conv2d_opts){.groups = 2}); /* 3 output channels into 2 groups */
      break;
    }
    case 6: r = hg_softmax(g, x, 2); break;
    case 7: r = hg_div(g, n, n); break;
    case 8: {
      hg_val q = hg_reshape(g, x, 3, (tiny_dim[]){tiny_dim_int(1), tiny_dim_int(4), tiny_dim_int(6)});
      hg_val m = hg_input(g, "m", TINY_FP32, 2, (tiny_dim[]){tiny_dim_int(3), tiny_dim_int(4)});
      r = hg_attention(g, q, q, q, &(hg_attention_opts){.mask = m});
      break;
    }
    case 9: {
      hg_graph *f = hg_program_add_graph(hg_graph_program(g), "f");
      hg_val fx = hg_input(f, "x", TINY_FP32, 0, NULL);
      hg_output(f, "y", fx);
      r = hg_call(g, f, (hg_val[]){x, x}, 2, NULL, 0);
      break;
    }
    case 10: r = hg_gather(g, x, x, 0); break;
    case 11: r = hg_slice(g, x, 1, (int[]){1}, (int64_t[]){0}, (int64_t[]){6}, (int64_t[]){0}); break;
    }
    if (r > 0) fail_msg("%s: succeeded", cases[i].what);
    if (hg_graph_error(g)->code != cases[i].code)
      fail_msg("%s: want %s, got %s (%s)", cases[i].what, harp_status_name(cases[i].code), harp_status_name(hg_graph_error(g)->code),
               hg_graph_error(g)->msg);
    hg_graph_free(g);
  }
}

static void test_builder_types(void **st) {
  (void)st;
  hg_graph *g = hg_graph_new();
  hg_shape_var(g, "N", 2);
  hg_shape_var(g, "H", 8);
  hg_val x = hg_input(g, "x", TINY_FP16, 4, (tiny_dim[]){tiny_dim_sym("N"), tiny_dim_int(3), tiny_dim_sym("H"), tiny_dim_sym("H")});
  hg_val w = hg_input(g, "w", TINY_FP16, 4, (tiny_dim[]){tiny_dim_int(8), tiny_dim_int(3), tiny_dim_int(3), tiny_dim_int(3)});
  hg_val y = hg_conv2d(g, x, w, &(hg_conv2d_opts){.stride = {2, 2}, .pad = {1, 1, 1, 1}});
  char b[64];
  assert_true(hg_val_dim_text(g, y, 2, b, sizeof b));
  assert_string_equal(b, "(H + 1)/2");
  assert_int_equal(hg_val_dtype(g, y), TINY_FP16);
  hg_val f = hg_reshape(g, y, 2, (tiny_dim[]){tiny_dim_sym("N"), tiny_dim_int(-1)});
  assert_true(hg_val_dim_text(g, f, 1, b, sizeof b));
  assert_string_equal(b, "8*((H + 1)/2)*((H + 1)/2)");
  hg_val s = hg_sum(g, f, (int[]){-1}, 1, true);
  assert_int_equal(hg_val_rank(g, s), 2);
  assert_true(hg_val_dim_text(g, s, 1, b, sizeof b));
  assert_string_equal(b, "1");
  hg_val c = hg_concat(g, (hg_val[]){x, x}, 2, 1);
  assert_true(hg_val_dim_text(g, c, 1, b, sizeof b));
  assert_string_equal(b, "6");
  /* a literal takes the tensor's dtype */
  hg_val h = hg_mul(g, x, hg_const(g, 0.5));
  assert_int_equal(hg_val_dtype(g, h), TINY_FP16);
  assert_int_equal(hg_val_dtype(g, hg_binary(g, HG_OP_LT, x, hg_const(g, 0))), TINY_BOOL);
  assert_int_equal(hg_graph_error(g)->code, HARP_OK);
  hg_graph_free(g);
}

/* ---- lowering shapes -------------------------------------------------------------- */
static tiny_graph *lower(const char *src, hg_program **pp) {
  hg_program *p = fu_load(src);
  harp_error e = {0};
  tiny_graph *g = NULL;
  assert_ok(&e, hg_lower(&e, p, &g, NULL));
  if (pp) *pp = p;
  else hg_program_free(p);
  return g;
}

static int count_op(const tiny_graph *g, tiny_op op) {
  int n = 0;
  for (int i = 0; i < g->n; i++) n += g->nodes[i].op == op;
  return n;
}

static void shape_is(const tiny_shape *s, const char *want) {
  char buf[256];
  tiny_shape_format(s, buf, sizeof buf);
  assert_string_equal(buf, want);
}

/* seed 000 §1.2: A -> [M, K, 1], B -> [1, K, N], MUL over [M, K, N], REDUCE SUM over K. */
static void test_lower_gemm(void **st) {
  (void)st;
  tiny_graph *g = lower("graph<M=8, K=4, N=3> main(A: f16[M, K], B: f16[K, N], bias: f16[N]) -> (C: f16[M, N]) {\n"
                        "  C = relu(A @ B + bias)\n  return C\n}\n",
                        NULL);
  int a = tiny_find(g, "A"), b = tiny_find(g, "B");
  assert_true(a >= 0 && b >= 0);
  assert_string_equal(g->nodes[a].a.input.tensor_id, "A");
  int red = -1;
  for (int i = 0; i < g->n; i++)
    if (g->nodes[i].op == TINY_REDUCE) red = i;
  assert_true(red >= 0);
  const tiny_node *r = &g->nodes[red];
  assert_int_equal(r->a.reduce.op, TINY_RSUM);
  assert_int_equal(r->a.reduce.dtype, TINY_FP32);
  assert_int_equal(r->a.reduce.n, 1);
  assert_int_equal(r->a.reduce.axes[0].n, 1);
  const tiny_node *mul = &g->nodes[r->src[0].node];
  assert_int_equal(mul->op, TINY_MUL);
  const tiny_node *ea = &g->nodes[mul->src[0].node], *eb = &g->nodes[mul->src[1].node];
  assert_int_equal(ea->op, TINY_EXPAND);
  shape_is(&ea->a.expand.shape, "[M, K, N]");
  const tiny_node *ra = &g->nodes[ea->src[0].node], *rb = &g->nodes[eb->src[0].node];
  assert_int_equal(ra->op, TINY_RESHAPE);
  shape_is(&ra->a.reshape.shape, "[M, K, 1]");
  shape_is(&rb->a.reshape.shape, "[1, K, N]");
  assert_int_equal(ra->src[0].node, a);
  /* the output node is named after the output; it is the RELU */
  assert_int_equal(g->noutputs, 1);
  assert_string_equal(g->nodes[g->outputs[0]].id, "C");
  assert_int_equal(g->nodes[g->outputs[0]].op, TINY_RELU);
  /* it passes tiny_prepare symbolically and once bound */
  harp_error e = {0};
  tiny_symtab t;
  tiny_symtab_init(&t);
  assert_ok(&e, tiny_prepare(&e, g, &t, true));
  assert_ok(&e, tiny_symtab_parse_assign(&e, &t, "M=8"));
  assert_ok(&e, tiny_symtab_parse_assign(&e, &t, "K=4"));
  assert_ok(&e, tiny_symtab_parse_assign(&e, &t, "N=3"));
  assert_ok(&e, tiny_prepare(&e, g, &t, false));
  tiny_symtab_free(&t);
  tiny_graph_free(g);
}

/* seed 000 §7.2: pad + POOL (affine window view) + mul + reduce(sum over ic, kh, kw) + silu, no im2col. */
static void test_lower_conv(void **st) {
  (void)st;
  char *text = read_example("conv_block.harp");
  tiny_graph *g = lower(text, NULL);
  free(text);
  assert_int_equal(count_op(g, TINY_PAD), 1);
  assert_int_equal(count_op(g, TINY_POOL), 1);
  assert_int_equal(count_op(g, TINY_GATHER), 0);
  int red = -1;
  for (int i = 0; i < g->n; i++)
    if (g->nodes[i].op == TINY_REDUCE) red = i;
  const tiny_node *r = &g->nodes[red];
  assert_int_equal(r->a.reduce.n, 3);
  assert_int_equal(r->a.reduce.axes[0].n, 4);
  assert_int_equal(r->a.reduce.axes[2].n, 6);
  const tiny_node *mul = &g->nodes[r->src[0].node];
  assert_int_equal(mul->op, TINY_MUL);
  /* the weight side: w -> [1, 16, 1, 1, 8, 3, 3] -> EXPAND [N, 16, H, W, 8, 3, 3] */
  const tiny_node *we = &g->nodes[mul->src[1].node];
  assert_int_equal(we->op, TINY_EXPAND);
  shape_is(&we->a.expand.shape, "[N, 16, H, W, 8, 3, 3]");
  shape_is(&g->nodes[we->src[0].node].a.reshape.shape, "[1, 16, 1, 1, 8, 3, 3]");
  /* the input side: a PERMUTE of the POOL of the PAD of x */
  const tiny_node *xe = &g->nodes[mul->src[0].node];
  const tiny_node *xp = &g->nodes[xe->src[0].node];
  assert_int_equal(xp->op, TINY_PERMUTE);
  assert_int_equal(g->nodes[xp->src[0].node].op, TINY_POOL);
  assert_string_equal(g->nodes[g->outputs[0]].id, "y");
  tiny_graph_free(g);
}

static void test_lower_attention_layernorm(void **st) {
  (void)st;
  char *text = read_example("transformer_block.harp");
  tiny_graph *g = lower(text, NULL);
  free(text);
  assert_true(count_op(g, TINY_EXP2) >= 1);
  assert_int_equal(count_op(g, TINY_WHERE), 1);  /* causal mask */
  assert_int_equal(count_op(g, TINY_CMPLT), 1);
  assert_int_equal(count_op(g, TINY_RSQRT), 2);  /* two layernorms */
  assert_int_equal(count_op(g, TINY_GELU), 1);
  int inputs = count_op(g, TINY_INPUT);
  assert_int_equal(inputs, 13);
  /* the scores contraction: REDUCE SUM over D of [B, 4, S, S, 16] */
  bool found = false;
  for (int i = 0; i < g->n && !found; i++) {
    const tiny_node *n = &g->nodes[i];
    if (n->op != TINY_REDUCE || n->a.reduce.op != TINY_RSUM) continue;
    const tiny_node *m = &g->nodes[n->src[0].node];
    if (m->op == TINY_MUL && m->shape.rank == 5 && m->shape.d[4].n == 16 && n->a.reduce.axes[0].n == 4) found = true;
  }
  assert_true(found);
  tiny_graph_free(g);
}

/* A matmul after a flatten contracts over the unflattened axes (affine
 * reads) and the flatten itself disappears; the numbers are unchanged. */
static void test_lower_flatten_matmul(void **st) {
  (void)st;
  const char *src = "graph main(x: f32[2, 3, 2, 2], w: f32[12, 5]) -> (y: f32[2, 5]) {\n"
                    "  return reshape(relu(x), [2, -1]) @ w\n}\n";
  tiny_graph *g = lower(src, NULL);
  const tiny_node *red = NULL;
  for (int i = 0; i < g->n; i++)
    if (g->nodes[i].op == TINY_REDUCE) red = &g->nodes[i];
  assert_non_null(red);
  assert_int_equal(red->a.reduce.n, 3);
  for (int i = 0; i < g->n; i++)
    if (g->nodes[i].op == TINY_RESHAPE && g->nodes[i].a.reshape.shape.rank == 2) fail_msg("the flatten is still there");
  tiny_graph_free(g);
  uint64_t seed = 6;
  ut_tensor in[2] = {fu_random(TINY_FP32, 4, (int64_t[]){2, 3, 2, 2}, &seed), fu_random(TINY_FP32, 2, (int64_t[]){12, 5}, &seed)},
            out;
  fu_run(src, NULL, in, 2, &out);
  double want[10];
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 5; j++) {
      want[i * 5 + j] = 0;
      for (int k = 0; k < 12; k++) want[i * 5 + j] += fmax(fu_get(&in[0], i * 12 + k), 0) * fu_get(&in[1], k * 5 + j);
    }
  fu_expect(&out, want, 10, 1e-6, 1e-6);
  for (int i = 0; i < 2; i++) ut_tensor_free(&in[i]);
  ut_tensor_free(&out);
}

/* Outputs: ids are the output names, in order; a parameter, a repeated value
 * or a literal is copied by an identity CAST. */
static void test_output_names(void **st) {
  (void)st;
  tiny_graph *g = lower("graph main(x: f32[4]) -> (a: f32[4], b: f32[4], c: f32[4], d: f32[], e: f32[4]) {\n"
                        "  y = relu(x)\n  b = neg(x)\n  return y, x, y, 2.0, b * 3.0\n}\n",
                        NULL);
  assert_int_equal(g->noutputs, 5);
  const char *want[] = {"a", "b", "c", "d", "e"};
  for (int k = 0; k < 5; k++) assert_string_equal(tiny_output_name(g, g->outputs[k]), want[k]);
  assert_int_equal(g->nodes[g->outputs[0]].op, TINY_RELU);
  assert_int_equal(g->nodes[g->outputs[1]].op, TINY_CAST); /* the parameter */
  assert_int_equal(g->nodes[g->outputs[2]].op, TINY_CAST); /* y again */
  assert_int_equal(g->nodes[g->outputs[3]].op, TINY_CAST); /* the literal: no region writes a CONST */
  assert_int_equal(g->nodes[g->nodes[g->outputs[3]].src[0].node].op, TINY_CONST);
  /* the body's variable "b" did not take the output's name */
  assert_true(tiny_find(g, "b.2") >= 0);
  harp_error e = {0};
  tiny_symtab t;
  tiny_symtab_init(&t);
  assert_ok(&e, tiny_prepare(&e, g, &t, false));
  tiny_graph_free(g);
}

/* ---- decompile ------------------------------------------------------------------ */
static void round_trip(const hg_program *p, const char *what) {
  char *t1 = hg_decompile(p);
  assert_non_null(t1);
  harp_error e = {0};
  hg_program *q = NULL;
  if (hg_harp_load_text(&e, t1, strlen(t1), what, &q)) {
    char buf[4096];
    harp_error_format(&e, buf, sizeof buf);
    fail_msg("%s: the decompiled text does not load: %s\n%s", what, buf, t1);
  }
  char why[512];
  if (!hg_program_equal(p, q, why, sizeof why)) fail_msg("%s: %s\n%s", what, why, t1);
  char *t2 = hg_decompile(q);
  assert_string_equal(t1, t2); /* a fixpoint */
  free(t1);
  free(t2);
  hg_program_free(q);
}

static void test_decompile_examples(void **st) {
  (void)st;
  const char *ex[] = {"mlp.harp", "conv_block.harp", "transformer_block.harp", "cnn.harp"};
  for (int i = 0; i < 4; i++) {
    char *text = read_example(ex[i]);
    hg_program *p = fu_load(text);
    round_trip(p, ex[i]);
    hg_program_free(p);
    free(text);
  }
}

static void test_decompile_everything(void **st) {
  (void)st;
  const char *src =
      "graph<N=2, H=6> main(x: f32[N, 4, H, H], w: f32[4, 2, 3, 3], q: f16[N, 5, 8], m: f16[5, 5], ix: i32[N, 4, H, H],\n"
      "                     c: bool[H], f: f32[H]) -> (a: f32[N, 4, (H + 1)/2, (H + 1)/2], b: f16[N, 5, 8], r: f32[N, 4, H, H],\n"
      "                     s: f32[2, H - 2, N, H], t: i32[N, 4, H, H], u: f32[1, H], v: bool[H]) {\n"
      "  a = conv2d(x, w, stride=2, pad=[1, 0, 1, 0], dilation=1, groups=2)\n"
      "  b = attention(q, q, q, heads=2, causal=true, mask=m, scale=0.3)\n"
      "  k = layernorm(x, axis=1, eps=0.001) + softmax(x, axis=0) * (sum(x, axes=[0], keepdim=true) - mean(x, [1, 2], keepdim=true))\n"
      "  r = where(x > k, max(x, 0.5), min(x, constant(-1, f32))) / exp(tanh(sigmoid(silu(gelu(log(abs(x)))))))\n"
      "  z = reshape(max_pool2d(x, kernel=2), [N, -1])\n"
      "  zz = expand(reshape(sum(z, axes=[1]), [N, 1, 1, 1]), [N, 4, H, H])\n"
      "  s = permute(flip(slice(r + zz, [0, 0, 1, 0], [N, 4, H - 1, H], steps=[1, 2, 1, 1]), [0]), [1, 2, 0, 3])\n"
      "  n1 = cast(abs(neg(x)) <= rsqrt(sqrt(recip(x))), i32)\n"
      "  t = gather(ix, ix, axis=1) * 2 - n1\n"
      "  u = reshape(concat([slice(f, [0], [2]), slice(f, [2], [H])], axis=0), [1, H]) @ expand(reshape(f, [H, 1]), [H, H]) + f\n"
      "  v = concat([slice(c, [0], [2]), slice(c, [2], [H])], axis=0) == (c != c)\n"
      "  return a, b, r, s, t, u, v\n}\n";
  hg_program *p = fu_load(src);
  round_trip(p, "everything");
  hg_program_free(p);
}

/* A program built through the API (anonymous values, literals, typed
 * constants, calls with several outputs, names that are not identifiers). */
static void test_decompile_builder(void **st) {
  (void)st;
  hg_program *p = hg_program_new();
  hg_graph *f = hg_program_add_graph(p, "split2");
  hg_shape_var(f, "K", -1);
  hg_val fx = hg_input(f, "x", TINY_FP32, 1, (tiny_dim[]){tiny_dim_sym("K")});
  hg_output(f, "lo", hg_relu(f, fx));
  hg_output(f, "hi", hg_neg(f, fx));
  hg_graph *g = hg_program_add_graph(p, "main");
  hg_val x = hg_input(g, "x", TINY_FP32, 1, (tiny_dim[]){tiny_dim_int(5)});
  hg_val outs[2];
  hg_call(g, f, &x, 1, outs, 2);
  hg_val k = hg_const_typed(g, 3, TINY_FP32);
  hg_val sum2 = hg_add(g, hg_mul(g, outs[0], hg_const(g, -2.5)), outs[1]);
  hg_val named = hg_name(g, hg_add(g, sum2, k), "return_value");
  hg_output(g, "y", named);
  hg_output(g, "z", hg_add(g, sum2, sum2));
  assert_int_equal(hg_graph_error(g)->code, HARP_OK);
  assert_int_equal(hg_graph_error(f)->code, HARP_OK);
  harp_error e = {0};
  assert_ok(&e, hg_program_check(&e, p));
  round_trip(p, "builder");
  hg_program_free(p);
}

/* ---- calls --------------------------------------------------------------------- */
static void test_call_depth(void **st) {
  (void)st;
  /* a recursive call whose result is unused is never expanded */
  tiny_graph *g = lower("graph<N=1> f(x: f32[N]) -> (y: f32[N]) {\n  unused = f(x)\n  return relu(x)\n}\n"
                        "graph main(x: f32[3]) -> (y: f32[3]) {\n  return f(x)\n}\n",
                        NULL);
  assert_int_equal(count_op(g, TINY_RELU), 1);
  tiny_graph_free(g);
  /* a chain of exactly 10 nested calls is allowed */
  ut_str t;
  ut_str_init(&t);
  for (int i = 1; i <= 10; i++)
    if (i < 10) ut_str_printf(&t, "graph<N=1> g%d(x: f32[N]) -> (y: f32[N]) {\n  return g%d(x) + 1.0\n}\n", i, i + 1);
    else ut_str_printf(&t, "graph<N=1> g%d(x: f32[N]) -> (y: f32[N]) {\n  return relu(x)\n}\n", i);
  ut_str_puts(&t, "graph main(x: f32[3]) -> (y: f32[3]) {\n  return g1(x)\n}\n");
  g = lower(t.buf, NULL);
  assert_int_equal(count_op(g, TINY_ADD), 9);
  tiny_graph_free(g);
  /* mutual recursion */
  const char *mut = "graph<N=1> a(x: f32[N]) -> (y: f32[N]) {\n  return b(x)\n}\n"
                    "graph<N=1> b(x: f32[N]) -> (y: f32[N]) {\n  return a(x)\n}\n"
                    "graph main(x: f32[3]) -> (y: f32[3]) {\n  return a(x)\n}\n";
  harp_error e = {0};
  hg_program *p = NULL;
  assert_int_equal(hg_harp_load_text(&e, mut, strlen(mut), "m.harp", &p), HARP_E_LIMIT);
  assert_non_null(strstr(e.msg, "never ends"));
  /* shape variables of a callee bind to the caller's symbols */
  g = lower("graph<N=1, D=1> scale(x: f32[N, D]) -> (y: f32[N, D]) {\n  return x * 2.0\n}\n"
            "graph<B=3> main(x: f32[B, 7]) -> (y: f32[B, 7]) {\n  return scale(x)\n}\n",
            NULL);
  int o = g->outputs[0];
  const tiny_node *n = &g->nodes[o];
  assert_int_equal(n->op, TINY_MUL);
  ut_str_free(&t);
  tiny_graph_free(g);
}

/* ---- dumps ------------------------------------------------------------------------ */
static void test_dumps(void **st) {
  (void)st;
  char *text = read_example("transformer_block.harp");
  hg_program *p = fu_load(text);
  free(text);
  char *js = hg_frontend_json(p);
  json_error_t je;
  json_t *root = json_loads(js, 0, &je);
  assert_non_null(root);
  assert_string_equal(json_string_value(json_object_get(root, "entry")), "main");
  assert_int_equal(json_array_size(json_object_get(root, "graphs")), 3);
  json_t *m = json_array_get(json_object_get(root, "graphs"), 2);
  assert_string_equal(json_string_value(json_object_get(m, "name")), "main");
  json_t *sh = json_object_get(json_array_get(json_object_get(m, "params"), 0), "shape");
  assert_string_equal(json_string_value(json_array_get(sh, 0)), "B");
  assert_int_equal(json_integer_value(json_array_get(sh, 2)), 64);
  json_decref(root);
  free(js);
  char *dot = hg_frontend_dot(p);
  assert_non_null(strstr(dot, "digraph harp_frontend"));
  assert_non_null(strstr(dot, "attention"));
  free(dot);
  harp_error e = {0};
  tiny_graph *g = NULL;
  assert_ok(&e, hg_lower(&e, p, &g, NULL));
  dot = hg_tiny_dot(g);
  assert_non_null(strstr(dot, "digraph harp_tiny"));
  assert_non_null(strstr(dot, "REDUCE"));
  free(dot);
  tiny_graph_free(g);
  /* binding main's shape variables from an input's shape */
  tiny_symtab t;
  tiny_symtab_init(&t);
  assert_ok(&e, hg_program_bind_input(&e, p, "x", 3, (int64_t[]){5, 7, 64}, &t));
  int64_t v;
  assert_true(tiny_symtab_get(&t, "S", &v) && v == 7);
  assert_int_equal(hg_program_bind_input(&e, p, "x", 3, (int64_t[]){5, 7, 63}, &t), HARP_E_INPUT_MISMATCH);
  tiny_symtab_free(&t);
  hg_program_free(p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_dims),
      cmocka_unit_test(test_dim_text_round_trip),
      cmocka_unit_test(test_lexer),
      cmocka_unit_test(test_grammar),
      cmocka_unit_test(test_builder_matches_dsl),
      cmocka_unit_test(test_builder_errors),
      cmocka_unit_test(test_builder_types),
      cmocka_unit_test(test_lower_gemm),
      cmocka_unit_test(test_lower_conv),
      cmocka_unit_test(test_lower_attention_layernorm),
      cmocka_unit_test(test_lower_flatten_matmul),
      cmocka_unit_test(test_output_names),
      cmocka_unit_test(test_decompile_examples),
      cmocka_unit_test(test_decompile_everything),
      cmocka_unit_test(test_decompile_builder),
      cmocka_unit_test(test_call_depth),
      cmocka_unit_test(test_dumps),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
