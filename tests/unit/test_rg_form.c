/* test_rg_form.c — region formation on the acceptance models (issue 4): the
 * regions of seed 000 §7.1 (GEMM + bias + ReLU), §7.2 (conv 3x3 + bias +
 * SiLU, with its halo), §7.3 (attention), LayerNorm, softmax, a chain of 4
 * GEMMs and its arena; every model played back region by region on the arena
 * equals whole-graph interpretation, bit for bit in fp32; a 1x1 conv in NCHW
 * summarised as a matmul with C unit-stride along M.  Each model is
 * formed for this CPU, an A100 and an H100. */
#include "harp/frontend.h"
#include "rgtest.h"

static const plan_arch archs[] = {PLAN_ARCH_CPU, PLAN_ARCH_SM80, PLAN_ARCH_SM90};

/* ---- §7.1 ------------------------------------------------------------------------ */
static void test_gemm_bias_relu(void **state) {
  (void)state;
  static const char *syms[] = {"M=8", "K=16", "N=12", NULL};
  static const char *big[] = {"M=256", "K=512", "N=256", NULL};
  for (int a = 0; a < 3; a++)
    for (int s = 0; s < 2; s++) {
      rgt t;
      rgt_load(&t, "seed000_gemm_bias_relu.json", s ? big : syms);
      rgt_form(&t, archs[a]);
      assert_int_equal(t.p->n, 1);
      const rg_region *R = &t.p->regions[0];
      const rg_info *I = R->info;
      assert_string_equal(R->kind, "contraction");
      assert_string_equal(R->pattern, "matmul");
      assert_int_equal(I->shape, RG_SHAPE_CONTRACTION);
      rgt_expect_blocks(&t, R, "sum_k C0 bias_add relu");
      assert_string_equal(rgt_block(&t, I->anchor), "sum_k");
      assert_int_equal(I->roles[0], RG_ROLE_ANCHOR);
      assert_int_equal(I->roles[3], RG_ROLE_EPILOGUE);
      /* only the output is materialized */
      assert_int_equal(R->nout, 1);
      assert_string_equal(t.g->nodes[R->out_values[0]].id, "C2");
      /* local_edges: sum_k -> relu in registers */
      assert_int_equal(I->nedges, 1);
      assert_string_equal(I->edges[0].from, "sum_k");
      assert_string_equal(I->edges[0].to, "relu");
      assert_int_equal(I->edges[0].buffer, PLAN_BUF_REG);
      /* the epilogue: the CAST, bias (broadcast along m), relu */
      assert_int_equal(I->nepi, 3);
      assert_int_equal(I->epi[1].role, PLAN_EPI_BIAS);
      assert_int_equal(I->epi[1].nextra, 1);
      assert_true(I->epi[1].extra[0].affine);
      assert_int_equal(I->epi[1].extra[0].strides[0], 0);
      assert_int_equal(I->epi[1].extra[0].strides[1], 1);
      assert_int_equal(I->epi[2].role, PLAN_EPI_RELU);
      assert_true(I->plan_info.epilogue_known);
      assert_int_equal(I->plan_info.nepi, 2);
      assert_int_equal(I->plan_info.pattern, PLAN_PAT_MATMUL);
      assert_false(I->plan_info.c_m_contig); /* C[M, N]: unit-stride along N */
      assert_true(I->has_plan);
      assert_true(I->dtime < 0);
      /* Region Buffer SSA: the internal values are deferred */
      json_t *d = rgt_dump(&t), *r = rgt_dump_region(d, "relu");
      json_t *body = json_object_get(r, "body");
      int deferred = 0;
      for (size_t i = 0; i < json_array_size(body); i++) {
        json_t *let = json_array_get(body, i);
        const char *v = json_string_value(json_object_get(let, "let"));
        const char *m = json_string_value(json_object_get(let, "materialize"));
        if (v && (!strcmp(v, "C0.acc") || !strcmp(v, "C0") || !strcmp(v, "C1"))) {
          assert_string_equal(m, "deferred");
          deferred++;
        }
        if (v && !strcmp(v, "C2")) assert_string_equal(m, "gmem");
      }
      assert_int_equal(deferred, 3);
      assert_non_null(json_object_get(json_array_get(body, json_array_size(body) - 1), "yield"));
      json_t *out = json_array_get(json_object_get(r, "outputs"), 0);
      assert_string_equal(json_string_value(json_object_get(out, "materialize")), "gmem");
      json_t *mr = json_object_get(out, "memref");
      assert_int_equal(json_integer_value(json_object_get(mr, "alignment")), FN_ALIGN);
      assert_true(json_is_true(json_object_get(mr, "noalias")));
      assert_int_equal(json_integer_value(json_array_get(json_object_get(mr, "strides"), 1)), 1);
      json_t *le = json_array_get(json_object_get(r, "local_edges"), 0);
      assert_string_equal(json_string_value(json_object_get(le, "from")), "sum_k");
      assert_string_equal(json_string_value(json_object_get(le, "to")), "relu");
      assert_string_equal(json_string_value(json_object_get(le, "buffer")), "reg");
      json_t *locals = json_object_get(r, "locals");
      assert_true(json_array_size(locals) >= 3);
      json_decref(d);
      if (!s) rgt_playback(&t, true); /* one region: the same arithmetic as the whole graph */
      rgt_free(&t);
    }
}

/* ---- §7.2 ------------------------------------------------------------------------- */
static void test_conv_bias_silu(void **state) {
  (void)state;
  static const char *small[] = {"N=2", "C=3", "H=6", "W=5", "O=4", NULL};
  static const char *big[] = {"N=1", "C=32", "H=16", "W=16", "O=32", NULL};
  static const char *files[] = {"conv3x3_bias_silu.json", "conv3x3_bias_silu_fp16.json"};
  for (int f = 0; f < 2; f++)
    for (int a = 0; a < 3; a++)
      for (int s = 0; s < 2; s++) {
        rgt t;
        rgt_load(&t, files[f], s ? big : small);
        rgt_form(&t, archs[a]);
        assert_int_equal(t.p->n, 1);
        const rg_region *R = &t.p->regions[0];
        const rg_info *I = R->info;
        assert_string_equal(R->pattern, "conv");
        assert_string_equal(rgt_block(&t, I->anchor), "conv");
        /* the halo of the padded input, from can_compute_at: +-1 on H and W */
        assert_int_equal(I->nhalos, 1);
        const poly_halo *h = &I->halos[0].halo;
        assert_string_equal(t.g->nodes[I->halos[0].tensor].id, "x_in");
        assert_true(h->ok);
        assert_int_equal(h->lo[2], 1);
        assert_int_equal(h->hi[2], 1);
        assert_int_equal(h->lo[3], 1);
        assert_int_equal(h->hi[3], 1);
        int64_t th = UT_MIN(I->halos[0].tile[2], s ? 16 : 6), tw = UT_MIN(I->halos[0].tile[3], s ? 16 : 5);
        assert_int_equal(h->extent[2], th + 2);
        assert_int_equal(h->extent[3], tw + 2);
        assert_int_equal(h->lo[1] + h->hi[1], 0); /* channels are reduced: no halo */
        /* the input is staged through a ring (seed §7.2 local_edges = smem_ring) */
        bool ring = false;
        for (int i = 0; i < I->nedges; i++) ring |= I->edges[i].from_block < 0 && I->edges[i].buffer == PLAN_BUF_SMEM_RING;
        assert_true(ring);
        assert_int_equal(I->plan_info.conv_kh, 3);
        assert_int_equal(I->plan_info.conv_kw, 3);
        assert_true(I->plan_info.epilogue_known);
        assert_int_equal(I->plan_info.nepi, 2);
        assert_int_equal(I->plan_info.epilogue[0], PLAN_EPI_BIAS);
        assert_int_equal(I->plan_info.epilogue[1], PLAN_EPI_SILU);
        if (f == 1) { /* the fp16 bias is widened when the epilogue loads it */
          const rg_epi *bias = NULL;
          for (int i = 0; i < I->nepi; i++)
            if (I->epi[i].role == PLAN_EPI_BIAS) bias = &I->epi[i];
          assert_non_null(bias);
          assert_int_equal(bias->nextra, 1);
          assert_string_equal(t.g->nodes[bias->extra[0].node].id, "bias_in");
          assert_true(bias->extra[0].cast >= 0);
        }
        if (!s) rgt_playback(&t, f == 0);
        rgt_free(&t);
      }
}

/* A 1x1 conv in NCHW is a matmul with the pixels as M (the input x is its
 * left operand) and its output unit-stride along them: the summary says so
 * (plan_region_info.c_m_contig; the CPU template runs it transposed, and
 * cost_cpu.c models that); at stride 2 (a window) and 3x3 it is a conv. */
static void test_conv1x1_c_m_contig(void **state) {
  (void)state;
  static const char *text =
      "graph<N=1, C=64, H=14, W=14, K=32> main(x: f32[N, C, H, W], w: f32[K, C, 1, 1], v: f32[K, K, 3, 3])\n"
      "    -> (y: f32[N, K, H, W], z: f32[N, K, H / 2, W / 2], u: f32[N, K, H, W]) {\n"
      "    y = conv2d(x, w)\n    z = conv2d(x, w, stride=2)\n    u = conv2d(y, v, pad=1)\n    return y, z, u\n}\n";
  rgt t;
  memset(&t, 0, sizeof t);
  tiny_symtab_init(&t.syms);
  hg_program *prog = NULL;
  assert_ok(&t.e, hg_harp_load_text(&t.e, text, strlen(text), "conv1x1.harp", &prog));
  assert_ok(&t.e, hg_lower(&t.e, prog, &t.g, &t.syms));
  hg_program_free(prog);
  assert_ok(&t.e, tiny_prepare(&t.e, t.g, &t.syms, false));
  rgt_form(&t, PLAN_ARCH_CPU);
  int mm = 0, conv = 0;
  for (int i = 0; i < t.p->n; i++) {
    const plan_region_info *r = t.p->regions[i].info ? &t.p->regions[i].info->plan_info : NULL;
    if (!r || (r->pattern != PLAN_PAT_MATMUL && r->pattern != PLAN_PAT_CONV)) continue;
    if (r->pattern == PLAN_PAT_CONV) conv++, assert_false(r->c_m_contig);
    else mm++, assert_true(r->c_m_contig);
  }
  assert_int_equal(mm, 1);
  assert_int_equal(conv, 2); /* the 3x3, and the 1x1 at stride 2 (a window: a conv) */
  rgt_free(&t);
}

/* ---- §7.3 --------------------------------------------------------------------------- */
static void check_attention(rgt *t, bool causal, bool mask, tiny_dtype dt) {
  const rg_region *R = rgt_region_of(t, "out");
  const rg_info *I = R->info;
  assert_string_equal(R->kind, "contraction");
  assert_string_equal(R->pattern, "attention");
  assert_int_equal(I->shape, RG_SHAPE_ATTENTION);
  const rg_attention *a = &I->att;
  assert_string_equal(rgt_block(t, a->qk), "qk");
  assert_string_equal(rgt_block(t, a->pv), "pv");
  assert_true(R == rgt_region_of(t, "probs") && R == rgt_region_of(t, "row_max"));
  assert_string_equal(t->g->nodes[a->q.node].id, "q_in");
  assert_string_equal(t->g->nodes[a->k.node].id, "k_in");
  assert_string_equal(t->g->nodes[a->v.node].id, "v_in");
  assert_true(fabs(a->scale - 0.125) < 1e-12);
  assert_int_equal(a->causal, causal);
  assert_int_equal(a->has_mask, mask);
  assert_true(a->exp2);
  assert_int_equal(a->out_dtype, dt);
  assert_int_equal(R->nout, 1);
  assert_int_equal(I->plan_info.pattern, PLAN_PAT_ATTENTION);
  assert_true(I->has_plan);
  assert_int_equal(I->plan.algo[PLAN_KEY_ATTENTION], PLAN_ALGO_STREAMING_SOFTMAX_2PASS);
  /* Q: [B, H, M, D] row-major: strides over (b, h, m, n, d) */
  assert_true(a->q.affine);
  assert_int_equal(a->q.strides[a->k_var], 0);
  assert_int_equal(a->q.strides[a->d_var], 1);
  assert_int_equal(a->k.strides[a->q_var], 0);
}

static void test_attention(void **state) {
  (void)state;
  static const char *syms[] = {"B=2", "H=2", "M=5", "N=6", "D=4", "Dv=3", NULL};
  static const char *square[] = {"B=1", "H=2", "M=8", "N=8", "D=8", "Dv=8", NULL};
  struct {
    const char *file;
    bool causal, mask;
    tiny_dtype dt;
  } m[] = {{"attention_full.json", false, false, TINY_FP32},
           {"attention_full_fp16.json", false, false, TINY_FP16},
           {"attention_full_causal.json", true, false, TINY_FP32},
           {"attention_full_causal_fp16.json", true, false, TINY_FP16},
           {"attention_full_mask.json", false, true, TINY_FP32}};
  for (size_t i = 0; i < sizeof m / sizeof m[0]; i++)
    for (int a = 0; a < 3; a++)
      for (int s = 0; s < 2; s++) {
        rgt t;
        rgt_load(&t, m[i].file, s ? square : syms);
        rgt_form(&t, archs[a]);
        check_attention(&t, m[i].causal, m[i].mask, m[i].dt);
        if (m[i].causal) { /* j > i + (N - M): bottom-right aligned, like the frontend's */
          assert_int_equal(rgt_region_of(&t, "out")->info->att.causal_offset, s ? 0 : 1);
          assert_true(t.p->n > 1); /* the mask itself is computed elsewhere */
        } else {
          assert_int_equal(t.p->n, 1);
        }
        if (!s) rgt_playback(&t, m[i].dt == TINY_FP32);
        rgt_free(&t);
      }
}

/* QK^T -> softmax without the second matmul: a matmul and a row-fused softmax. */
static void test_attention_qkt(void **state) {
  (void)state;
  static const char *syms[] = {"B=1", "H=2", "M=5", "N=6", "D=4", NULL};
  for (int a = 0; a < 3; a++) {
    rgt t;
    rgt_load(&t, "attention_qkt.json", syms);
    rgt_form(&t, archs[a]);
    assert_int_equal(t.p->n, 2);
    const rg_region *mm = rgt_region_of(&t, "n8"), *sm = rgt_region_of(&t, "n15");
    assert_string_equal(mm->pattern, "matmul");
    assert_int_equal(mm->info->shape, RG_SHAPE_SINGLE);
    assert_string_equal(sm->kind, "reduce");
    assert_int_equal(sm->info->shape, RG_SHAPE_ROW);
    assert_int_equal(sm->info->prefix, 3); /* b, h, m shared; the keys in sequence */
    rgt_expect_stop(sm, "n8", "unsupported_shape");
    rgt_playback(&t, false);
    rgt_free(&t);
  }
}

/* ---- LayerNorm, softmax ------------------------------------------------------------ */
static void test_layernorm(void **state) {
  (void)state;
  static const char *small[] = {"R=4", NULL}, *big[] = {"R=256", NULL};
  static const char *files[] = {"layernorm.json", "layernorm_fp16.json"};
  for (int f = 0; f < 2; f++)
    for (int a = 0; a < 3; a++)
      for (int s = 0; s < 2; s++) {
        rgt t;
        rgt_load(&t, files[f], s ? big : small);
        rgt_form(&t, archs[a]);
        assert_int_equal(t.p->n, 1);
        const rg_region *R = &t.p->regions[0];
        assert_string_equal(R->kind, "reduce");
        assert_int_equal(R->info->shape, RG_SHAPE_ROW);
        assert_int_equal(R->info->prefix, 1);
        for (int i = 0; i < R->info->nblocks; i++) /* casts of inputs convert on load */
          if (t.g->nodes[poly_block(t.p->formed->pv, R->info->blocks[i])->node].op == TINY_CAST &&
              i + 1 < R->info->nblocks)
            assert_int_equal(R->info->roles[i], RG_ROLE_OPERAND_CAST);
        if (!s) rgt_playback(&t, f == 0);
        rgt_free(&t);
      }
}

static void test_softmax(void **state) {
  (void)state;
  static const char *syms[] = {"R=3", "L=7", NULL};
  for (int a = 0; a < 3; a++) {
    rgt t;
    rgt_load(&t, "softmax_rows.json", syms);
    rgt_form(&t, archs[a]);
    assert_int_equal(t.p->n, 1);
    assert_int_equal(t.p->regions[0].info->prefix, 1);
    /* every value stays with its row: registers only */
    for (int i = 0; i < t.p->regions[0].info->nedges; i++) assert_int_equal(t.p->regions[0].info->edges[i].buffer, PLAN_BUF_REG);
    rgt_playback(&t, true);
    rgt_free(&t);
  }
}

/* ---- the GEMM chain and its arena ----------------------------------------------------- */
static void test_gemm_chain_arena(void **state) {
  (void)state;
  static const char *syms[] = {"M=8", "D=16", NULL};
  for (int a = 0; a < 3; a++) {
    rgt t;
    rgt_load(&t, "gemm_chain4.json", syms);
    rgt_form(&t, archs[a]);
    assert_int_equal(t.p->n, 4);
    for (int r = 0; r < 4; r++) {
      char want[64];
      snprintf(want, sizeof want, "gemm%d bias%d relu%d", r, r, r);
      rgt_expect_blocks(&t, &t.p->regions[r], want);
      /* the next GEMM does not take the ReLU before it: no prologue */
      if (r) rgt_expect_stop(&t.p->regions[r], t.p->regions[r - 1].name, "unsupported_shape");
    }
    fn_function *f;
    assert_ok(&t.e, fn_build(&t.e, t.p, "chain", &f));
    size_t sum = 0;
    int temps = 0;
    for (int b = 0; b < f->nbuffers; b++)
      if (f->buffers[b].kind == FN_TEMP) sum += f->buffers[b].size, temps++;
    assert_int_equal(temps, 3);
    assert_true(fn_max_live_temps(f) <= 2);
    assert_true(f->required_memory < sum);
    fn_free(f);
    rgt_playback(&t, true);
    rgt_free(&t);
  }
}

/* ---- every model, every machine: playback == interpretation ---------------------------- */
static void test_playback_all(void **state) {
  (void)state;
  static const char *conv[] = {"N=2", "C=3", "H=6", "W=5", "O=4", NULL};
  static const char *att[] = {"B=1", "H=2", "M=5", "N=6", "D=4", "Dv=3", NULL};
  static const char *gemm[] = {"M=5", "K=7", "N=3", NULL};
  static const char *seedconv[] = {"N=1", "Cin_total=3", "H=7", "W=6", "Cout=4", "Cin=3", "Kh=3", "Kw=3", "pt=1", "pb=1",
                                   "pl=1", "pr=0", "Sh=2", "Sw=1", "Dh=1", "Dw=2", "G=1", "Rcout=4", "Oy=4", "Ox=3", NULL};
  static const char *rows[] = {"R=3", "L=7", "M=4", "D=8", NULL};
  struct {
    const char *file;
    const char *const *syms;
  } m[] = {{"gemm_chain4.json", rows},          {"conv3x3_bias_silu.json", conv},    {"conv3x3_bias_silu_fp16.json", conv},
           {"layernorm.json", rows},            {"layernorm_fp16.json", rows},       {"softmax_rows.json", rows},
           {"attention_full.json", att},        {"attention_full_fp16.json", att},   {"attention_full_causal.json", att},
           {"attention_full_causal_fp16.json", att}, {"attention_full_mask.json", att}, {"attention_qkt.json", att},
           {"seed001_attention.json", att},     {"seed001_gemm.json", gemm},         {"seed000_gemm_bias_relu.json", gemm},
           {"seed001_conv.json", seedconv}};
  for (size_t i = 0; i < sizeof m / sizeof m[0]; i++)
    for (int a = 0; a < 3; a++) {
      rgt t;
      rgt_load(&t, m[i].file, m[i].syms);
      bool fp32 = true;
      for (int n = 0; n < t.g->n; n++) fp32 &= t.g->nodes[n].dtype != TINY_FP16 && t.g->nodes[n].dtype != TINY_BF16;
      rgt_form(&t, archs[a]);
      rgt_playback(&t, fp32);
      if (archs[a] == PLAN_ARCH_SM80) {
        rg_options o = {.window = -1}; /* greedy only */
        rgt_form_opt(&t, archs[a], &o);
        rgt_playback(&t, fp32);
        o = (rg_options){.no_fusion = true};
        rgt_form_opt(&t, archs[a], &o);
        for (int r = 0; r < t.p->n; r++) assert_true(t.p->regions[r].info->nblocks <= 1);
        rgt_playback(&t, fp32);
      }
      rgt_free(&t);
    }
}

/* A graph built with the builder API: x -> (GEMM -> +0.25 -> relu) x 4. */
static void test_builder_chain(void **state) {
  (void)state;
  rgt t;
  memset(&t, 0, sizeof t);
  tiny_symtab_init(&t.syms);
  t.g = tiny_graph_new();
  int64_t xs[2] = {8, 16}, ws[2] = {16, 16};
  tiny_shape sx = tiny_shape_of(2, xs), sw = tiny_shape_of(2, ws);
  int x = tiny_b_input(t.g, "x", TINY_FP32, &sx);
  for (int l = 0; l < 4; l++) {
    char name[16];
    snprintf(name, sizeof name, "w%d", l);
    int w = tiny_b_input(t.g, name, TINY_FP32, &sw);
    int64_t a3[3] = {8, 16, 1}, b3[3] = {1, 16, 16};
    tiny_shape sa = tiny_shape_of(3, a3), sb = tiny_shape_of(3, b3);
    int prod = tiny_b_binary(t.g, TINY_MUL, tiny_b_reshape(t.g, x, &sa), tiny_b_reshape(t.g, w, &sb));
    int axes[1] = {1};
    x = tiny_b_unary(t.g, TINY_RELU, tiny_b_binary_imm(t.g, TINY_ADD, tiny_b_reduce(t.g, prod, TINY_RSUM, axes, 1, TINY_FP32), 0.25));
  }
  tiny_mark_output(t.g, x);
  assert_int_equal(t.g->err.code, HARP_OK);
  assert_ok(&t.e, tiny_prepare(&t.e, t.g, &t.syms, false));
  rgt_form(&t, PLAN_ARCH_CPU);
  assert_int_equal(t.p->n, 4);
  rgt_playback(&t, true);
  rgt_free(&t);
}

static void test_errors(void **state) {
  (void)state;
  /* sizes must be bound */
  harp_error e = {0};
  tiny_graph *g;
  tiny_symtab st;
  tiny_symtab_init(&st);
  char path[1024];
  snprintf(path, sizeof path, "%s/tests/models/seed001_gemm.json", HARP_SOURCE_DIR);
  assert_ok(&e, tiny_load_file(&e, path, &g));
  assert_ok(&e, tiny_prepare(&e, g, &st, true));
  rg_partition *p = NULL;
  assert_int_equal(rg_form(&e, g, &st, NULL, &p), HARP_E_UNBOUND_SYMBOL);
  assert_null(p);
  tiny_graph_free(g);
  tiny_symtab_free(&st);
  /* a failed allocation anywhere is OutOfMemory, and leaks nothing */
  static const char *syms[] = {"B=1", "H=1", "M=4", "N=4", "D=4", "Dv=4", NULL};
  rgt t;
  rgt_load(&t, "attention_full_causal.json", syms);
  int ok = 0, oom = 0;
  for (long n = 1; n < 3000 && ok < 2; n += 29) {
    harp_error e2 = {0};
    plan_machine m;
    plan_machine_get(PLAN_ARCH_SM80, &m);
    rg_options o = {.machine = &m};
    ut_fault_fail_nth_alloc(n);
    harp_status s = rg_form(&e2, t.g, &t.syms, &o, &p);
    ut_fault_fail_nth_alloc(0);
    if (s == HARP_OK) {
      ok++;
      rg_partition_free(p);
    } else {
      assert_int_equal(s, HARP_E_NO_MEMORY);
      oom++;
    }
  }
  assert_true(oom > 5);
  rgt_free(&t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gemm_bias_relu),   cmocka_unit_test(test_conv_bias_silu), cmocka_unit_test(test_attention),
      cmocka_unit_test(test_attention_qkt),    cmocka_unit_test(test_layernorm),      cmocka_unit_test(test_softmax),
      cmocka_unit_test(test_gemm_chain_arena), cmocka_unit_test(test_playback_all),   cmocka_unit_test(test_builder_chain),
      cmocka_unit_test(test_errors),           cmocka_unit_test(test_conv1x1_c_m_contig),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
