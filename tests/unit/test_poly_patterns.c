/* test_poly_patterns.c — ContractionPattern detection (seed 000 §3.5) and the
 * PolyBlock structure of the seed examples: GEMM (seed 001, seed 000 with
 * bias + ReLU), conv (stride 2; stride 2 + dilation 2), attention, a batched
 * matmul, reads through CASTs, and the negative cases. */
#include "harp/polycore.h"
#include "ibtest.h"

static void load(ibt *t, const char *uops, const char *const *syms) {
  assert_ok(&t->e, ibt_load_uops(t, uops, syms));
  assert_ok(&t->e, ibt_poly(t, NULL));
}

static const poly_block_info *block_of(const ibt *t, const char *id) {
  int b = poly_block_of(t->pv, ibt_node(t, id));
  if (b < 0) fail_msg("node %s has no block", id);
  return poly_block(t->pv, b);
}

static int count_kind(const ibt *t, poly_kind k) {
  int n = 0;
  for (int b = 0; b < poly_nblocks(t->pv); b++) n += poly_block(t->pv, b)->kind == k;
  return n;
}

static void expect_vars(const poly_block_info *b, const int *vars, int n, const char *want) {
  char buf[256] = "";
  for (int k = 0; k < n; k++) snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s%s", k ? " " : "", b->var_names[vars[k]]);
  assert_string_equal(buf, want);
}

static void expect_idx(const poly_idx *x, int n, const char *want) {
  char buf[512] = "";
  for (int k = 0; k < n; k++) snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s%s", k ? ", " : "", x[k].text);
  assert_string_equal(buf, want);
}

/* ---- GEMM --------------------------------------------------------------- */
static void test_seed001_gemm(void **state) {
  (void)state;
  ibt t;
  assert_ok(&t.e, ibt_load_file(&t, "tests/models/seed001_gemm.json", NULL));
  assert_ok(&t.e, ibt_poly(&t, NULL));
  assert_int_equal(count_kind(&t, POLY_CONTRACTION), 1);
  const poly_block_info *b = block_of(&t, "n8");
  assert_int_equal(b->kind, POLY_CONTRACTION);
  assert_ptr_equal(block_of(&t, "n7"), b); /* the MUL is absorbed */
  const poly_contraction *c = b->con;
  assert_int_equal(c->pattern, POLY_PAT_MATMUL);
  assert_int_equal(c->lhs, ibt_node(&t, "n0"));
  assert_int_equal(c->rhs, ibt_node(&t, "n1"));
  expect_idx(c->lhs_idx, c->lhs_rank, "i0, r0");
  expect_idx(c->rhs_idx, c->rhs_rank, "r0, i1");
  assert_int_equal(c->nred, 1);
  /* K is the reduce axis */
  const ib_info *r = ib_get(t.ib, ibt_node(&t, "n8"));
  assert_string_equal(r->red[0].size.sym, "K");
  assert_string_equal(b->var_names[c->nout], "r0");
  expect_vars(b, c->m, c->nm, "i0");
  expect_vars(b, c->n, c->nn, "i1");
  assert_int_equal(c->nbatch, 0);
  char *dom = poly_domain_str(t.pv, poly_block_of(t.pv, ibt_node(&t, "n8")));
  assert_string_equal(dom, "[K, M, N] -> { n8[i0, i1, r0] : 0 <= i0 < M and 0 <= i1 < N and 0 <= r0 < K }");
  free(dom);
  char *acc = poly_access_str(t.pv, poly_block_of(t.pv, ibt_node(&t, "n8")), 1);
  assert_string_equal(acc, "[K, M, N] -> { n8[i0, i1, r0] -> B[r0, i1] : 0 <= i0 < M and 0 <= i1 < N and 0 <= r0 < K }");
  free(acc);
  /* the CAST after it is an ewise block fed by the contraction */
  assert_int_equal(block_of(&t, "n9")->kind, POLY_EWISE);
  ibt_free(&t);
}

static void test_seed000_gemm_bias_relu(void **state) {
  (void)state;
  ibt t;
  assert_ok(&t.e, ibt_load_file(&t, "tests/models/seed000_gemm_bias_relu.json", NULL));
  assert_ok(&t.e, ibt_poly(&t, NULL));
  const poly_block_info *b = block_of(&t, "C0.acc");
  assert_int_equal(b->kind, POLY_CONTRACTION);
  assert_string_equal(b->name, "sum_k"); /* the tag names the block */
  assert_int_equal(b->con->pattern, POLY_PAT_MATMUL);
  expect_idx(b->con->lhs_idx, b->con->lhs_rank, "i0, r0");
  expect_idx(b->con->rhs_idx, b->con->rhs_rank, "r0, i1");
  assert_string_equal(block_of(&t, "C2")->name, "relu");
  assert_string_equal(block_of(&t, "C1")->name, "bias_add");
  assert_int_equal(block_of(&t, "C1")->kind, POLY_EWISE);
  /* the bias is read through its broadcast: bias[i1] */
  int add = poly_block_of(t.pv, ibt_node(&t, "C1"));
  char *acc = poly_access_str(t.pv, add, 1);
  assert_string_equal(acc, "[M, N] -> { bias_add[i0, i1] -> bias[i1] : 0 <= i0 < M and 0 <= i1 < N }");
  free(acc);
  assert_int_equal(poly_block(t.pv, add)->access[1].nvia, 2);
  /* sum_k -> C0 (the CAST) -> bias_add -> relu, plus the reduction's self edge */
  int chain = 0, self = 0;
  for (int k = 0; k < poly_nedges(t.pv); k++) {
    const poly_edge_info *x = poly_edge(t.pv, k);
    self += x->from == x->to;
    chain += x->from != x->to;
  }
  assert_int_equal(chain, 3);
  assert_int_equal(self, 1);
  ibt_free(&t);
}

/* ---- conv --------------------------------------------------------------- */
static const char *const conv_s2[] = {"N=2", "Cin_total=4", "H=8", "W=8", "Cout=8", "Cin=4", "Kh=3", "Kw=3",
                                      "pt=1", "pb=1", "pl=1", "pr=1", "Sh=2", "Sw=2", "Dh=1", "Dw=1",
                                      "G=1", "Rcout=8", "Oy=4", "Ox=4", NULL};

static void expect_window(const poly_block_info *b, const poly_idx *x, const char *out, const char *win, int64_t stride,
                          int64_t dil, int64_t off) {
  assert_int_equal(x->kind, POLY_IDX_WINDOW);
  assert_string_equal(b->var_names[x->out_var], out);
  assert_string_equal(b->var_names[x->win_var], win);
  assert_int_equal(x->stride, stride);
  assert_int_equal(x->dilation, dil);
  assert_int_equal(x->offset, off);
}

static void test_seed001_conv_stride2(void **state) {
  (void)state;
  ibt t;
  assert_ok(&t.e, ibt_load_file(&t, "tests/models/seed001_conv.json", conv_s2));
  assert_ok(&t.e, ibt_poly(&t, NULL));
  const poly_block_info *b = block_of(&t, "yacc");
  assert_int_equal(b->kind, POLY_CONTRACTION);
  const poly_contraction *c = b->con;
  assert_int_equal(c->pattern, POLY_PAT_CONV);
  assert_int_equal(c->lhs, ibt_node(&t, "x"));
  assert_int_equal(c->rhs, ibt_node(&t, "w"));
  expect_idx(c->lhs_idx, c->lhs_rank, "i0, r0, 2*i3 + r1 - 1, 2*i4 + r2 - 1");
  expect_idx(c->rhs_idx, c->rhs_rank, "i2, r0, r1, r2");
  expect_window(b, &c->lhs_idx[2], "i3", "r1", 2, 1, -1);
  expect_window(b, &c->lhs_idx[3], "i4", "r2", 2, 1, -1);
  /* padding included: one row/column read before the image, none after
   * (stride 2 never reaches the last pad row) */
  assert_true(c->lhs_idx[2].has_pad);
  assert_int_equal(c->lhs_idx[2].pad_lo, 1);
  assert_int_equal(c->lhs_idx[2].pad_hi, 0);
  assert_true(c->lhs_fill);
  assert_true(c->lhs_fill_value == 0.0);
  assert_false(c->rhs_fill);
  assert_int_equal(c->nred, 3);
  expect_vars(b, c->n, c->nn, "i2");
  expect_vars(b, c->batch, c->nbatch, "");
  assert_int_equal(b->access[0].nfill, 2); /* top band and left band */
  ibt_free(&t);
}

static void test_conv_stride2_dilation2(void **state) {
  (void)state;
  static const char *const syms[] = {"N=1", "Cin_total=3", "H=9", "W=9", "Cout=4", "Cin=3", "Kh=3", "Kw=3",
                                     "pt=1", "pb=1", "pl=1", "pr=1", "Sh=2", "Sw=2", "Dh=2", "Dw=2",
                                     "G=1", "Rcout=4", "Oy=4", "Ox=4", NULL};
  ibt t;
  assert_ok(&t.e, ibt_load_file(&t, "tests/models/seed001_conv.json", syms));
  assert_ok(&t.e, ibt_poly(&t, NULL));
  const poly_block_info *b = block_of(&t, "yacc");
  assert_int_equal(b->kind, POLY_CONTRACTION);
  assert_int_equal(b->con->pattern, POLY_PAT_CONV);
  expect_idx(b->con->lhs_idx, b->con->lhs_rank, "0, r0, 2*i3 + 2*r1 - 1, 2*i4 + 2*r2 - 1");
  expect_window(b, &b->con->lhs_idx[2], "i3", "r1", 2, 2, -1);
  expect_window(b, &b->con->lhs_idx[3], "i4", "r2", 2, 2, -1);
  /* reads rows -1 .. 2*3 + 2*2 - 1 = 9 of a 9-row image: pad 1 on both sides */
  assert_int_equal(b->con->lhs_idx[2].pad_lo, 1);
  assert_int_equal(b->con->lhs_idx[2].pad_hi, 1);
  ibt_free(&t);
}

/* ---- attention ---------------------------------------------------------- */
static void test_seed001_attention(void **state) {
  (void)state;
  static const char *const syms[] = {"B=2", "H=3", "M=8", "N=16", "D=16", NULL};
  ibt t;
  assert_ok(&t.e, ibt_load_file(&t, "tests/models/seed001_attention.json", syms));
  assert_ok(&t.e, ibt_poly(&t, NULL));
  const poly_block_info *qk = block_of(&t, "n8");
  assert_int_equal(qk->kind, POLY_CONTRACTION);
  assert_int_equal(qk->con->pattern, POLY_PAT_MATMUL); /* QK^T */
  expect_idx(qk->con->lhs_idx, qk->con->lhs_rank, "i0, i1, i2, r0");
  expect_idx(qk->con->rhs_idx, qk->con->rhs_rank, "i0, i1, r0, i3");
  expect_vars(qk, qk->con->batch, qk->con->nbatch, "i0 i1");
  expect_vars(qk, qk->con->m, qk->con->nm, "i2");
  expect_vars(qk, qk->con->n, qk->con->nn, "i3");
  /* the softmax: reduce(max), sub, mul, exp2, reduce(sum), fdiv, cast */
  assert_int_equal(block_of(&t, "n9")->kind, POLY_REDUCE);
  assert_int_equal(block_of(&t, "n13")->kind, POLY_REDUCE);
  const char *ew[] = {"n10", "n11", "n12", "n14", "n15"};
  for (int k = 0; k < 5; k++) assert_int_equal(block_of(&t, ew[k])->kind, POLY_EWISE);
  assert_int_equal(count_kind(&t, POLY_CONTRACTION), 1);
  assert_int_equal(poly_nblocks(t.pv), 8);
  ibt_free(&t);
}

/* Seed 001's K^T is RESHAPEd [B,H,D,N] -> [B,H,1,N,D]: a reinterpretation,
 * not a transpose.  With D != N the read is no longer a plain index (a
 * floordiv appears) and the product is, correctly, not a matmul. */
static void test_seed001_attention_reshape_d_ne_n(void **state) {
  (void)state;
  static const char *const syms[] = {"B=1", "H=2", "M=4", "N=8", "D=4", NULL};
  ibt t;
  assert_ok(&t.e, ibt_load_file(&t, "tests/models/seed001_attention.json", syms));
  assert_ok(&t.e, ibt_poly(&t, NULL));
  assert_int_equal(block_of(&t, "n8")->kind, POLY_REDUCE);
  assert_int_equal(block_of(&t, "n7")->kind, POLY_EWISE);
  assert_int_equal(count_kind(&t, POLY_CONTRACTION), 0);
  ibt_free(&t);
}

/* ---- batched matmul, casts ---------------------------------------------- */
#define BMM_INPUTS                                                                          \
  "{'id':'a','uop':'INPUT','arg':{'tensor_id':'a','dtype':'fp16','shape':['Bt','M','K']}}," \
  "{'id':'b','uop':'INPUT','arg':{'tensor_id':'b','dtype':'fp16','shape':['Bt','K','N']}},"

static void test_batched_matmul(void **state) {
  (void)state;
  ibt t;
  load(&t,
       BMM_INPUTS "{'id':'a1','uop':'RESHAPE','src':['a'],'arg':{'result_shape':['Bt','M',1,'K']}},"
                  "{'id':'a2','uop':'EXPAND','src':['a1'],'arg':{'result_shape':['Bt','M','N','K']}},"
                  "{'id':'bt','uop':'PERMUTE','src':['b'],'arg':{'perm':[0,2,1]}},"
                  "{'id':'b1','uop':'RESHAPE','src':['bt'],'arg':{'result_shape':['Bt',1,'N','K']}},"
                  "{'id':'b2','uop':'EXPAND','src':['b1'],'arg':{'result_shape':['Bt','M','N','K']}},"
                  "{'id':'p','uop':'MUL','src':['a2','b2']},"
                  "{'id':'c','uop':'REDUCE','src':['p'],'arg':{'op':'SUM','axes':['K'],'dtype':'fp32'}}",
       NULL);
  const poly_block_info *b = block_of(&t, "c");
  assert_int_equal(b->kind, POLY_CONTRACTION);
  assert_int_equal(b->con->pattern, POLY_PAT_MATMUL);
  expect_idx(b->con->lhs_idx, b->con->lhs_rank, "i0, i1, r0");
  expect_idx(b->con->rhs_idx, b->con->rhs_rank, "i0, r0, i2");
  expect_vars(b, b->con->batch, b->con->nbatch, "i0");
  expect_vars(b, b->con->m, b->con->nm, "i1");
  expect_vars(b, b->con->n, b->con->nn, "i2");
  ibt_free(&t);
}

static void test_matmul_through_casts(void **state) {
  (void)state;
  ibt t;
  load(&t,
       BMM_INPUTS "{'id':'ac','uop':'CAST','src':['a'],'arg':{'to':'fp32'}},"
                  "{'id':'a1','uop':'RESHAPE','src':['ac'],'arg':{'result_shape':['Bt','M','K',1]}},"
                  "{'id':'a2','uop':'EXPAND','src':['a1'],'arg':{'result_shape':['Bt','M','K','N']}},"
                  "{'id':'b1','uop':'RESHAPE','src':['b'],'arg':{'result_shape':['Bt',1,'K','N']}},"
                  "{'id':'b2','uop':'EXPAND','src':['b1'],'arg':{'result_shape':['Bt','M','K','N']}},"
                  "{'id':'bc','uop':'CAST','src':['b2'],'arg':{'to':'fp32'}},"
                  "{'id':'p','uop':'MUL','src':['a2','bc']},"
                  "{'id':'pc','uop':'CAST','src':['p'],'arg':{'to':'fp16'}},"
                  "{'id':'c','uop':'REDUCE','src':['pc'],'arg':{'op':'SUM','axes':[2],'dtype':'fp32'}}",
       NULL);
  const poly_block_info *b = block_of(&t, "c");
  assert_int_equal(b->kind, POLY_CONTRACTION);
  assert_int_equal(b->nnodes, 3); /* MUL, CAST, REDUCE */
  assert_int_equal(b->con->lhs, ibt_node(&t, "a"));
  assert_int_equal(b->con->rhs, ibt_node(&t, "b"));
  expect_idx(b->con->lhs_idx, b->con->lhs_rank, "i0, i1, r0");
  expect_idx(b->con->rhs_idx, b->con->rhs_rank, "i0, r0, i2");
  /* the reads name the casts they pass */
  bool saw = false;
  for (int k = 0; k < b->access[0].nvia; k++) saw |= b->access[0].via[k] == ibt_node(&t, "ac");
  assert_true(saw);
  /* each CAST passed is a stage of its operand */
  assert_int_equal(b->access[0].nstage, 1);
  assert_int_equal(b->access[0].stage[0], ibt_node(&t, "ac"));
  assert_int_equal(b->access[1].nstage, 1);
  assert_int_equal(b->access[1].stage[0], ibt_node(&t, "bc"));
  /* "ac" and "bc" feed only the contraction, but they stay blocks of their own */
  assert_int_equal(block_of(&t, "ac")->kind, POLY_EWISE);
  ibt_free(&t);
}

/* A stage is the read in the CAST's own coordinates: cast(permute(x)) is
 * read as c[i0, r0] where x is read as x[r0, i0]. */
static void test_stage_of_cast_of_permute(void **state) {
  (void)state;
  ibt t;
  load(&t,
       "{'id':'x','uop':'INPUT','arg':{'tensor_id':'x','dtype':'fp32','shape':[4,6]}},"
       "{'id':'y','uop':'INPUT','arg':{'tensor_id':'y','dtype':'fp16','shape':[4,5]}},"
       "{'id':'xt','uop':'PERMUTE','src':['x'],'arg':{'perm':[1,0]}},"
       "{'id':'c','uop':'CAST','src':['xt'],'arg':{'to':'fp16'}},"
       "{'id':'c1','uop':'RESHAPE','src':['c'],'arg':{'result_shape':[6,4,1]}},"
       "{'id':'c2','uop':'EXPAND','src':['c1'],'arg':{'result_shape':[6,4,5]}},"
       "{'id':'y1','uop':'RESHAPE','src':['y'],'arg':{'result_shape':[1,4,5]}},"
       "{'id':'y2','uop':'EXPAND','src':['y1'],'arg':{'result_shape':[6,4,5]}},"
       "{'id':'p','uop':'MUL','src':['c2','y2']},"
       "{'id':'z','uop':'REDUCE','src':['p'],'arg':{'op':'SUM','axes':[1],'dtype':'fp32'}}",
       NULL);
  int blk = poly_block_of(t.pv, ibt_node(&t, "z"));
  const poly_block_info *b = poly_block(t.pv, blk);
  assert_int_equal(b->kind, POLY_CONTRACTION);
  assert_int_equal(b->con->lhs, ibt_node(&t, "x"));
  assert_int_equal(b->access[0].nstage, 1);
  assert_int_equal(b->access[0].stage[0], ibt_node(&t, "c"));
  assert_int_equal(b->access[1].nstage, 0);
  int64_t st[POLY_MAX_VARS], off = -1;
  bool aff = false;
  assert_ok(&t.e, poly_access_strides(&t.e, t.pv, blk, 0, st, &off, &aff)); /* x[r0, i0] */
  assert_true(aff);
  assert_true(st[0] == 1 && st[2] == 6 && off == 0);
  assert_ok(&t.e, poly_stage_strides(&t.e, t.pv, blk, 0, 1, st, &off, &aff)); /* c[i0, r0] */
  assert_true(aff);
  assert_true(st[0] == 4 && st[2] == 1 && off == 0);
  assert_int_equal(poly_stage_strides(&t.e, t.pv, blk, 1, 1, st, &off, &aff), HARP_E_INTERNAL); /* y has none */
  ibt_free(&t);
}

/* ---- negative cases ----------------------------------------------------- */
#define GEMM_OPERANDS                                                                     \
  "{'id':'a','uop':'INPUT','arg':{'tensor_id':'a','dtype':'fp32','shape':['M','K']}},"   \
  "{'id':'b','uop':'INPUT','arg':{'tensor_id':'b','dtype':'fp32','shape':['K','N']}},"   \
  "{'id':'a1','uop':'RESHAPE','src':['a'],'arg':{'result_shape':['M','K',1]}},"          \
  "{'id':'a2','uop':'EXPAND','src':['a1'],'arg':{'result_shape':['M','K','N']}},"        \
  "{'id':'b1','uop':'RESHAPE','src':['b'],'arg':{'result_shape':[1,'K','N']}},"          \
  "{'id':'b2','uop':'EXPAND','src':['b1'],'arg':{'result_shape':['M','K','N']}},"

static void test_reduce_max_of_product(void **state) {
  (void)state;
  ibt t;
  load(&t,
       GEMM_OPERANDS "{'id':'p','uop':'MUL','src':['a2','b2']},"
                     "{'id':'c','uop':'REDUCE','src':['p'],'arg':{'op':'MAX','axes':['K'],'dtype':'fp32'}}",
       NULL);
  assert_int_equal(count_kind(&t, POLY_CONTRACTION), 0);
  assert_int_equal(block_of(&t, "c")->kind, POLY_REDUCE);
  assert_int_equal(block_of(&t, "p")->kind, POLY_EWISE);
  ibt_free(&t);
}

static void test_gather_operand(void **state) {
  (void)state;
  ibt t;
  load(&t,
       GEMM_OPERANDS "{'id':'ix','uop':'INPUT','arg':{'tensor_id':'ix','dtype':'i32','shape':['M','K','N']}},"
                     "{'id':'ga','uop':'GATHER','src':['a2','ix'],'arg':{'axis':1}},"
                     "{'id':'p','uop':'MUL','src':['ga','b2']},"
                     "{'id':'c','uop':'REDUCE','src':['p'],'arg':{'op':'SUM','axes':['K'],'dtype':'fp32'}}",
       NULL);
  assert_int_equal(count_kind(&t, POLY_CONTRACTION), 0);
  assert_int_equal(poly_nnon_scop(t.pv), 1);
  assert_int_equal(poly_non_scop(t.pv, 0), ibt_node(&t, "ga"));
  assert_int_equal(poly_block_of(t.pv, ibt_node(&t, "ga")), -1);
  assert_non_null(ib_get(t.ib, ibt_node(&t, "ga"))->non_scop);
  /* the product reads the gathered tensor like an input: no edge from it */
  for (int k = 0; k < poly_nedges(t.pv); k++) assert_int_not_equal(poly_edge(t.pv, k)->tensor, ibt_node(&t, "ga"));
  ibt_free(&t);
}

static void test_gather_behind_views(void **state) {
  (void)state;
  ibt t;
  load(&t,
       "{'id':'a','uop':'INPUT','arg':{'tensor_id':'a','dtype':'fp32','shape':['M','K']}},"
       "{'id':'ix','uop':'INPUT','arg':{'tensor_id':'ix','dtype':'i32','shape':['M','K']}},"
       "{'id':'ga','uop':'GATHER','src':['a','ix'],'arg':{'axis':1}},"
       "{'id':'b','uop':'INPUT','arg':{'tensor_id':'b','dtype':'fp32','shape':['K','N']}},"
       "{'id':'a1','uop':'RESHAPE','src':['ga'],'arg':{'result_shape':['M','K',1]}},"
       "{'id':'a2','uop':'EXPAND','src':['a1'],'arg':{'result_shape':['M','K','N']}},"
       "{'id':'b1','uop':'RESHAPE','src':['b'],'arg':{'result_shape':[1,'K','N']}},"
       "{'id':'b2','uop':'EXPAND','src':['b1'],'arg':{'result_shape':['M','K','N']}},"
       "{'id':'p','uop':'MUL','src':['a2','b2']},"
       "{'id':'c','uop':'REDUCE','src':['p'],'arg':{'op':'SUM','axes':['K'],'dtype':'fp32'}}",
       NULL);
  /* a data-dependent base: no pattern (the base leaves the SCoP) */
  assert_int_equal(count_kind(&t, POLY_CONTRACTION), 0);
  ibt_free(&t);
}

static void test_operand_not_movement_only(void **state) {
  (void)state;
  ibt t;
  load(&t,
       GEMM_OPERANDS "{'id':'e','uop':'EXP','src':['a2']},"
                     "{'id':'p','uop':'MUL','src':['e','b2']},"
                     "{'id':'c','uop':'REDUCE','src':['p'],'arg':{'op':'SUM','axes':['K'],'dtype':'fp32'}}",
       NULL);
  assert_int_equal(count_kind(&t, POLY_CONTRACTION), 0);
  assert_int_equal(block_of(&t, "p")->kind, POLY_EWISE);
  ibt_free(&t);
}

static void test_product_used_twice(void **state) {
  (void)state;
  ibt t;
  load(&t,
       GEMM_OPERANDS "{'id':'p','uop':'MUL','src':['a2','b2']},"
                     "{'id':'c','uop':'REDUCE','src':['p'],'arg':{'op':'SUM','axes':['K'],'dtype':'fp32'}},"
                     "{'id':'d','uop':'REDUCE','src':['p'],'arg':{'op':'MAX','axes':['K'],'dtype':'fp32'}}",
       NULL);
  assert_int_equal(count_kind(&t, POLY_CONTRACTION), 0);
  ibt_free(&t);
}

static void test_dot_without_reuse(void **state) {
  (void)state;
  ibt t;
  load(&t,
       "{'id':'a','uop':'INPUT','arg':{'tensor_id':'a','dtype':'fp32','shape':['M','K']}},"
       "{'id':'b','uop':'INPUT','arg':{'tensor_id':'b','dtype':'fp32','shape':['M','K']}},"
       "{'id':'p','uop':'MUL','src':['a','b']},"
       "{'id':'c','uop':'REDUCE','src':['p'],'arg':{'op':'SUM','axes':['K'],'dtype':'fp32'}}",
       NULL);
  assert_int_equal(count_kind(&t, POLY_CONTRACTION), 0);
  ibt_free(&t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_seed001_gemm),
      cmocka_unit_test(test_seed000_gemm_bias_relu),
      cmocka_unit_test(test_seed001_conv_stride2),
      cmocka_unit_test(test_conv_stride2_dilation2),
      cmocka_unit_test(test_seed001_attention),
      cmocka_unit_test(test_seed001_attention_reshape_d_ne_n),
      cmocka_unit_test(test_batched_matmul),
      cmocka_unit_test(test_matmul_through_casts),
      cmocka_unit_test(test_stage_of_cast_of_permute),
      cmocka_unit_test(test_reduce_max_of_product),
      cmocka_unit_test(test_gather_operand),
      cmocka_unit_test(test_gather_behind_views),
      cmocka_unit_test(test_operand_not_movement_only),
      cmocka_unit_test(test_product_used_twice),
      cmocka_unit_test(test_dot_without_reuse),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
