/* test_polycore.c — Poly Core (seed 000 §1.6) on isl: dependences, axis
 * kinds, affine closure, tails for non-dividing tiles, can_compute_at with
 * the halo of 3x3 convs (stride 1 and 2, with and without pad),
 * min_buffer_for_edge (reg / smem_ring / gmem), pointwise reads, strides,
 * the fusion prefix, fusable groups and the hints. */
#include "harp/polycore.h"
#include "ibtest.h"

static void load(ibt *t, const char *uops, const char *const *syms) {
  assert_ok(&t->e, ibt_load_uops(t, uops, syms));
  assert_ok(&t->e, ibt_poly(t, NULL));
}

static void load_file(ibt *t, const char *file, const char *const *syms) {
  char rel[256];
  snprintf(rel, sizeof rel, "tests/models/%s", file);
  assert_ok(&t->e, ibt_load_file(t, rel, syms));
  assert_ok(&t->e, ibt_poly(t, NULL));
}

static int blk(const ibt *t, const char *id) {
  int b = poly_block_of(t->pv, ibt_node(t, id));
  if (b < 0) fail_msg("node %s has no block", id);
  return b;
}

static bool dep(ibt *t, int from, int to, poly_dep_kind k) {
  bool ex;
  assert_ok(&t->e, poly_dependence(&t->e, t->pv, from, to, k, &ex, NULL));
  return ex;
}

/* ---- dependences and axes ------------------------------------------------------ */
static const char *gemm_syms[] = {"M=10", "K=3", "N=5", NULL};

static void test_dependences(void **state) {
  (void)state;
  ibt t;
  load_file(&t, "seed001_gemm.json", gemm_syms);
  int c = blk(&t, "n8"), cast = blk(&t, "n9");
  /* the accumulator: read and written at every reduced point */
  assert_true(dep(&t, c, c, POLY_DEP_TRUE));
  assert_true(dep(&t, c, c, POLY_DEP_ANTI));
  assert_true(dep(&t, c, c, POLY_DEP_OUTPUT));
  assert_true(dep(&t, c, cast, POLY_DEP_TRUE));
  assert_false(dep(&t, c, cast, POLY_DEP_ANTI));
  assert_false(dep(&t, c, cast, POLY_DEP_OUTPUT));
  assert_false(dep(&t, cast, c, POLY_DEP_TRUE));
  assert_false(dep(&t, cast, cast, POLY_DEP_OUTPUT));
  bool ex;
  char *txt;
  assert_ok(&t.e, poly_dependence(&t.e, t.pv, c, c, POLY_DEP_OUTPUT, &ex, &txt));
  assert_non_null(strstr(txt, "r0' > r0") ? txt : strstr(txt, "r0 < r0'"));
  free(txt);
  /* true dependences between blocks are exactly the Poly-View edges */
  for (int a = 0; a < poly_nblocks(t.pv); a++)
    for (int b = 0; b < poly_nblocks(t.pv); b++) {
      if (a == b) continue;
      bool edge = false;
      for (int k = 0; k < poly_nedges(t.pv); k++) edge |= poly_edge(t.pv, k)->from == a && poly_edge(t.pv, k)->to == b;
      assert_int_equal(dep(&t, a, b, POLY_DEP_TRUE), edge);
    }
  poly_axis_kind kinds[POLY_MAX_VARS];
  assert_ok(&t.e, poly_axis_kinds(&t.e, t.pv, c, kinds));
  assert_int_equal(kinds[0], POLY_AXIS_PARALLEL);
  assert_int_equal(kinds[1], POLY_AXIS_PARALLEL);
  assert_int_equal(kinds[2], POLY_AXIS_REDUCTION);
  assert_ok(&t.e, poly_axis_kinds(&t.e, t.pv, cast, kinds));
  assert_int_equal(kinds[0], POLY_AXIS_PARALLEL);
  assert_int_equal(kinds[1], POLY_AXIS_PARALLEL);
  ibt_free(&t);
}

static void test_axis_kinds_softmax(void **state) {
  (void)state;
  static const char *syms[] = {"R=3", "L=7", NULL};
  ibt t;
  load_file(&t, "softmax_rows.json", syms);
  poly_axis_kind k[POLY_MAX_VARS];
  int mx = poly_block_of(t.pv, ibt_node(&t, "t0"));
  assert_int_equal(poly_block(t.pv, mx)->kind, POLY_REDUCE);
  assert_ok(&t.e, poly_axis_kinds(&t.e, t.pv, mx, k));
  assert_int_equal(k[0], POLY_AXIS_PARALLEL);
  assert_int_equal(k[1], POLY_AXIS_REDUCTION);
  int exp = blk(&t, "t4");
  assert_ok(&t.e, poly_axis_kinds(&t.e, t.pv, exp, k));
  assert_int_equal(k[0], POLY_AXIS_PARALLEL);
  assert_int_equal(k[1], POLY_AXIS_PARALLEL);
  ibt_free(&t);
}

static void test_affine_closure(void **state) {
  (void)state;
  static const char *syms[] = {"N=1", "C=2", "H=6", "W=5", "O=3", NULL};
  ibt t;
  load_file(&t, "conv3x3_bias_silu.json", syms);
  for (int b = 0; b < poly_nblocks(t.pv); b++)
    for (int a = 0; a < poly_block(t.pv, b)->naccess; a++) {
      bool closed;
      assert_ok(&t.e, poly_access_affine(&t.e, t.pv, b, a, &closed));
      assert_true(closed);
    }
  ibt_free(&t);
}

/* ---- tails -------------------------------------------------------------------------- */
static void test_tails(void **state) {
  (void)state;
  ibt t;
  load_file(&t, "seed001_gemm.json", gemm_syms);
  int c = blk(&t, "n8");
  int64_t tile[3] = {4, 5, 0};
  bool tail[3];
  char *set;
  assert_ok(&t.e, poly_tail_axes(&t.e, t.pv, c, tile, tail, &set));
  assert_true(tail[0]);   /* 10 = 2 x 4 + 2 */
  assert_false(tail[1]);  /* 5 = 1 x 5 */
  assert_false(tail[2]);  /* untiled */
  assert_non_null(strstr(set, "8 <= i0 <= 9"));
  free(set);
  int64_t tile2[3] = {5, 2, 3};
  assert_ok(&t.e, poly_tail_axes(&t.e, t.pv, c, tile2, tail, NULL));
  assert_false(tail[0]);
  assert_true(tail[1]);
  assert_false(tail[2]);
  ibt_free(&t);
  /* symbolic: M unbound, a tail exists for some M */
  load_file(&t, "seed001_gemm.json", NULL);
  assert_ok(&t.e, poly_tail_axes(&t.e, t.pv, blk(&t, "n8"), tile, tail, &set));
  assert_true(tail[0]);
  free(set);
  ibt_free(&t);
}

/* ---- can_compute_at ------------------------------------------------------------------ */
/* A 3x3 conv over X[1, 2, 8, 8] with stride s and pad p, written as seed
 * 001 does (PAD + POOL + views + MUL + REDUCE). */
static void conv_model(ibt *t, int s, int p) {
  char js[4096];
  int o = (8 + 2 * p - 3) / s + 1;
  snprintf(js, sizeof js,
           "{'id':'x','uop':'INPUT','arg':{'tensor_id':'X','dtype':'fp32','shape':[1,2,8,8]}},"
           "{'id':'w','uop':'INPUT','arg':{'tensor_id':'W','dtype':'fp32','shape':[4,2,3,3]}},"
           "{'id':'xp','uop':'PAD','src':['x'],'arg':{'pad':[[0,0],[0,0],[%d,%d],[%d,%d]]}},"
           "{'id':'xw','uop':'POOL','src':['xp'],'arg':{'kernel':[3,3],'stride':[%d,%d]}},"
           "{'id':'x1','uop':'RESHAPE','src':['xw'],'arg':{'result_shape':[1,1,2,%d,%d,3,3]}},"
           "{'id':'x2','uop':'PERMUTE','src':['x1'],'arg':{'perm':[0,1,3,4,2,5,6]}},"
           "{'id':'x3','uop':'EXPAND','src':['x2'],'arg':{'result_shape':[1,4,%d,%d,2,3,3]}},"
           "{'id':'w1','uop':'RESHAPE','src':['w'],'arg':{'result_shape':[1,4,1,1,2,3,3]}},"
           "{'id':'w2','uop':'EXPAND','src':['w1'],'arg':{'result_shape':[1,4,%d,%d,2,3,3]}},"
           "{'id':'m','uop':'MUL','src':['x3','w2']},"
           "{'id':'y','uop':'REDUCE','src':['m'],'arg':{'op':'SUM','axes':[4,5,6],'dtype':'fp32'}},"
           "{'id':'r','uop':'RELU','src':['y']}",
           p, p, p, p, s, s, o, o, o, o, o, o);
  load(t, js, NULL);
}

static void expect_halo(const poly_halo *h, int axis, int64_t extent, int64_t lo, int64_t hi) {
  if (h->extent[axis] != extent || h->lo[axis] != lo || h->hi[axis] != hi)
    fail_msg("axis %d: extent %lld lo %lld hi %lld, want %lld %lld %lld", axis, (long long)h->extent[axis],
             (long long)h->lo[axis], (long long)h->hi[axis], (long long)extent, (long long)lo, (long long)hi);
}

static void test_halo_conv(void **state) {
  (void)state;
  ibt t;
  poly_halo h;
  int64_t tile[4] = {1, 1, 4, 4};
  /* stride 1, pad 1: a Th x Tw tile needs (Th+2) x (Tw+2), +-1 each side, pad included */
  conv_model(&t, 1, 1);
  int c = blk(&t, "y"), x = ibt_node(&t, "x");
  assert_ok(&t.e, poly_can_compute_at(&t.e, t.pv, x, c, tile, &h));
  assert_true(h.ok);
  assert_int_equal(h.rank, 4);
  expect_halo(&h, 0, 1, 0, 0);
  expect_halo(&h, 1, 2, 0, 0); /* channels: reduced, the whole axis, no halo */
  expect_halo(&h, 2, 6, 1, 1);
  expect_halo(&h, 3, 6, 1, 1);
  assert_int_equal(h.elems, 2 * 6 * 6);
  assert_int_equal(h.bytes, 2 * (36 - 16) * 4);
  assert_false(h.pointwise);
  /* one output point: the 3x3 window */
  assert_ok(&t.e, poly_can_compute_at(&t.e, t.pv, x, c, NULL, &h));
  expect_halo(&h, 2, 3, 1, 1);
  expect_halo(&h, 3, 3, 1, 1);
  /* the whole output: 8 + 2 rows (both pad rows) */
  int64_t all[4] = {-1, -1, -1, -1};
  assert_ok(&t.e, poly_can_compute_at(&t.e, t.pv, x, c, all, &h));
  expect_halo(&h, 2, 10, 1, 1);
  /* the RELU reads the conv pointwise */
  assert_ok(&t.e, poly_can_compute_at(&t.e, t.pv, ibt_node(&t, "y"), blk(&t, "r"), tile, &h));
  assert_true(h.ok && h.pointwise);
  assert_int_equal(h.bytes, 0);
  ibt_free(&t);
  /* stride 2, pad 1: rows 2*oy + kh - 1, a 4-row tile needs 2*4 + 1 */
  conv_model(&t, 2, 1);
  assert_ok(&t.e, poly_can_compute_at(&t.e, t.pv, ibt_node(&t, "x"), blk(&t, "y"), tile, &h));
  assert_true(h.ok);
  expect_halo(&h, 2, 9, 1, 1);
  expect_halo(&h, 3, 9, 1, 1);
  ibt_free(&t);
  /* stride 1, no pad: the window reaches 2 past the tile, none before */
  conv_model(&t, 1, 0);
  assert_ok(&t.e, poly_can_compute_at(&t.e, t.pv, ibt_node(&t, "x"), blk(&t, "y"), tile, &h));
  expect_halo(&h, 2, 6, 0, 2);
  expect_halo(&h, 3, 6, 0, 2);
  /* a node the block does not read */
  assert_ok(&t.e, poly_can_compute_at(&t.e, t.pv, ibt_node(&t, "x"), blk(&t, "r"), tile, &h));
  assert_false(h.ok);
  assert_non_null(strstr(h.why, "not read"));
  ibt_free(&t);
}

/* ---- min_buffer, pointwise, strides, prefix ------------------------------------------ */
static const char *sm_syms[] = {"R=3", "L=7", NULL};

static void test_min_buffer(void **state) {
  (void)state;
  ibt t;
  poly_min_buffer mb;
  /* seed 000 §7.1: the accumulator feeds its epilogue in registers */
  load_file(&t, "seed000_gemm_bias_relu.json", gemm_syms);
  assert_ok(&t.e, poly_min_buffer_for_edge(&t.e, t.pv, ibt_node(&t, "C0.acc"), blk(&t, "C0"), NULL, 65536, &mb));
  assert_int_equal(mb.buffer, PLAN_BUF_REG);
  assert_ok(&t.e, poly_min_buffer_for_edge(&t.e, t.pv, ibt_node(&t, "C1"), blk(&t, "C2"), NULL, 65536, &mb));
  assert_int_equal(mb.buffer, PLAN_BUF_REG);
  ibt_free(&t);
  /* softmax: per row, the max is one value (register), exp -> probs pointwise */
  load_file(&t, "softmax_rows.json", sm_syms);
  int64_t row[2] = {1, -1};
  assert_ok(&t.e, poly_min_buffer_for_edge(&t.e, t.pv, ibt_node(&t, "t0"), blk(&t, "t2"), row, 65536, &mb));
  assert_int_equal(mb.buffer, PLAN_BUF_REG);
  assert_ok(&t.e, poly_min_buffer_for_edge(&t.e, t.pv, ibt_node(&t, "t4"), blk(&t, "out"), row, 65536, &mb));
  assert_int_equal(mb.buffer, PLAN_BUF_REG);
  /* the row sum streams exp in its own order: a register too */
  assert_ok(&t.e, poly_min_buffer_for_edge(&t.e, t.pv, ibt_node(&t, "t4"), blk(&t, "t5"), row, 65536, &mb));
  assert_int_equal(mb.buffer, PLAN_BUF_REG);
  ibt_free(&t);
  /* a transposed read: a row of the consumer is a column of the producer */
  load(&t,
       "{'id':'x','uop':'INPUT','arg':{'tensor_id':'X','dtype':'fp32','shape':[16,8]}},"
       "{'id':'a','uop':'RELU','src':['x']},"
       "{'id':'at','uop':'PERMUTE','src':['a'],'arg':{'perm':[1,0]}},"
       "{'id':'b','uop':'NEG','src':['at']}",
       NULL);
  assert_ok(&t.e, poly_min_buffer_for_edge(&t.e, t.pv, ibt_node(&t, "a"), blk(&t, "b"), row, 65536, &mb));
  assert_int_equal(mb.buffer, PLAN_BUF_SMEM_RING);
  assert_int_equal(mb.halo.extent[0], 16);
  assert_int_equal(mb.halo.extent[1], 1);
  assert_int_equal(mb.depth, 2);
  assert_int_equal(mb.bytes, 2 * 16 * 4);
  /* one column fits, two do not: a single buffer; less: global memory */
  assert_ok(&t.e, poly_min_buffer_for_edge(&t.e, t.pv, ibt_node(&t, "a"), blk(&t, "b"), row, 100, &mb));
  assert_int_equal(mb.buffer, PLAN_BUF_SMEM_RING);
  assert_int_equal(mb.depth, 0);
  assert_int_equal(mb.bytes, 16 * 4);
  assert_ok(&t.e, poly_min_buffer_for_edge(&t.e, t.pv, ibt_node(&t, "a"), blk(&t, "b"), row, 32, &mb));
  assert_int_equal(mb.buffer, PLAN_BUF_GMEM);
  bool pw;
  assert_ok(&t.e, poly_access_is_pointwise(&t.e, t.pv, blk(&t, "b"), 0, &pw));
  assert_false(pw);
  int p, both[2] = {blk(&t, "a"), blk(&t, "b")};
  assert_ok(&t.e, poly_fusion_prefix(&t.e, t.pv, both, 2, &p));
  assert_int_equal(p, 0);
  int64_t st[2], off;
  bool aff;
  assert_ok(&t.e, poly_access_strides(&t.e, t.pv, blk(&t, "b"), 0, st, &off, &aff));
  assert_true(aff);
  assert_int_equal(st[0], 1);
  assert_int_equal(st[1], 8);
  ibt_free(&t);
}

static void test_pointwise_and_strides(void **state) {
  (void)state;
  static const char *syms[] = {"N=1", "C=2", "H=6", "W=5", "O=3", NULL};
  ibt t;
  bool pw;
  /* conv [N, O, H, W] -> + bias[O] (through RESHAPE [1, O, 1, 1] + EXPAND) */
  load_file(&t, "conv3x3_bias_silu.json", syms);
  int add = blk(&t, "t10");
  assert_int_equal(poly_block(t.pv, add)->access[0].tensor, ibt_node(&t, "t8"));
  assert_ok(&t.e, poly_access_is_pointwise(&t.e, t.pv, add, 0, &pw));
  assert_true(pw);
  assert_ok(&t.e, poly_access_is_pointwise(&t.e, t.pv, add, 1, &pw));
  assert_false(pw);
  int64_t st[4], off;
  bool aff;
  assert_ok(&t.e, poly_access_strides(&t.e, t.pv, add, 1, st, &off, &aff));
  assert_true(aff);
  assert_int_equal(st[0], 0);
  assert_int_equal(st[1], 1);
  assert_int_equal(st[2], 0);
  assert_int_equal(st[3], 0);
  assert_int_equal(off, 0);
  /* the padded conv input is not one affine piece */
  assert_ok(&t.e, poly_access_strides(&t.e, t.pv, blk(&t, "t8"), 0, st, &off, &aff));
  assert_false(aff);
  ibt_free(&t);
  /* a reshape that keeps the order is pointwise; a flip is not */
  load(&t,
       "{'id':'x','uop':'INPUT','arg':{'tensor_id':'X','dtype':'fp32','shape':[4,6]}},"
       "{'id':'a','uop':'EXP','src':['x']},"
       "{'id':'ar','uop':'RESHAPE','src':['a'],'arg':{'result_shape':[2,2,3,2]}},"
       "{'id':'b','uop':'NEG','src':['ar']},"
       "{'id':'af','uop':'FLIP','src':['a'],'arg':{'axes':[1]}},"
       "{'id':'c','uop':'NEG','src':['af']}",
       NULL);
  assert_ok(&t.e, poly_access_is_pointwise(&t.e, t.pv, blk(&t, "b"), 0, &pw));
  assert_true(pw);
  assert_ok(&t.e, poly_access_is_pointwise(&t.e, t.pv, blk(&t, "c"), 0, &pw));
  assert_false(pw);
  ibt_free(&t);
  /* a reduction over the innermost axis streams its input; over the outer one it does not */
  load(&t,
       "{'id':'x','uop':'INPUT','arg':{'tensor_id':'X','dtype':'fp32','shape':[4,6]}},"
       "{'id':'a','uop':'EXP','src':['x']},"
       "{'id':'r1','uop':'REDUCE','src':['a'],'arg':{'op':'SUM','axes':[1],'dtype':'fp32'}},"
       "{'id':'r0','uop':'REDUCE','src':['a'],'arg':{'op':'SUM','axes':[0],'dtype':'fp32'}}",
       NULL);
  assert_ok(&t.e, poly_access_is_pointwise(&t.e, t.pv, blk(&t, "r1"), 0, &pw));
  assert_true(pw);
  assert_ok(&t.e, poly_access_is_pointwise(&t.e, t.pv, blk(&t, "r0"), 0, &pw));
  assert_false(pw);
  ibt_free(&t);
}

static void test_fusion_prefix(void **state) {
  (void)state;
  ibt t;
  int p;
  load_file(&t, "softmax_rows.json", sm_syms);
  int all[5] = {blk(&t, "t0"), blk(&t, "t2"), blk(&t, "t4"), blk(&t, "t5"), blk(&t, "out")};
  assert_ok(&t.e, poly_fusion_prefix(&t.e, t.pv, all, 5, &p));
  assert_int_equal(p, 1); /* rows shared; within a row the blocks run in sequence */
  int ew[2] = {blk(&t, "t4"), blk(&t, "out")};
  assert_ok(&t.e, poly_fusion_prefix(&t.e, t.pv, ew, 2, &p));
  assert_int_equal(p, 2);
  ibt_free(&t);
  static const char *ln[] = {"R=3", NULL};
  load_file(&t, "layernorm.json", ln);
  int nb = poly_nblocks(t.pv), bl[64];
  for (int b = 0; b < nb; b++) bl[b] = b;
  assert_ok(&t.e, poly_fusion_prefix(&t.e, t.pv, bl, nb, &p));
  assert_int_equal(p, 1);
  ibt_free(&t);
}

static void test_fusable_groups(void **state) {
  (void)state;
  ibt t;
  load(&t,
       "{'id':'x','uop':'INPUT','arg':{'tensor_id':'X','dtype':'fp32','shape':[8]}},"
       "{'id':'ix','uop':'INPUT','arg':{'tensor_id':'I','dtype':'i32','shape':[8]}},"
       "{'id':'a','uop':'EXP','src':['x']},"
       "{'id':'g','uop':'GATHER','src':['a','ix'],'arg':{'axis':0}},"
       "{'id':'b','uop':'RELU','src':['g']},"
       "{'id':'c','uop':'NEG','src':['b']},"
       "{'id':'d','uop':'SQRT','src':['x']},"
       "{'id':'e','uop':'NEG','src':['d']}",
       NULL);
  int group[8], n;
  assert_ok(&t.e, poly_make_fusable_groups(&t.e, t.pv, group, &n));
  assert_int_equal(group[blk(&t, "b")], group[blk(&t, "c")]);
  assert_int_equal(group[blk(&t, "d")], group[blk(&t, "e")]);
  assert_int_not_equal(group[blk(&t, "a")], group[blk(&t, "b")]); /* the GATHER between them */
  assert_int_not_equal(group[blk(&t, "c")], group[blk(&t, "e")]);
  assert_int_equal(n, 3);
  ibt_free(&t);
}

static void test_hints(void **state) {
  (void)state;
  assert_int_equal(poly_barrier_hint(PLAN_BUF_REG, 0, PLAN_ARCH_SM80), POLY_BARRIER_NONE);
  assert_int_equal(poly_barrier_hint(PLAN_BUF_SMEM_RING, 2, PLAN_ARCH_SM80), POLY_BARRIER_COMMIT_WAIT);
  assert_int_equal(poly_barrier_hint(PLAN_BUF_SMEM_RING, 3, PLAN_ARCH_SM90), POLY_BARRIER_MBARRIER);
  assert_int_equal(poly_barrier_hint(PLAN_BUF_SMEM_RING, 0, PLAN_ARCH_SM80), POLY_BARRIER_SYNC);
  assert_int_equal(poly_barrier_hint(PLAN_BUF_SMEM_RING, 2, PLAN_ARCH_CPU), POLY_BARRIER_NONE);
  assert_string_equal(poly_barrier_name(POLY_BARRIER_MBARRIER), "mbarrier");
  ibt t;
  load_file(&t, "seed001_gemm.json", gemm_syms);
  int c = blk(&t, "n8"), ways;
  /* B[r0, i1]: threads along r0 walk down a column of the staged tile */
  assert_ok(&t.e, poly_bank_conflict_hint(&t.e, t.pv, c, 1, 2, 32, 4, &ways));
  assert_int_equal(ways, 32);
  assert_ok(&t.e, poly_bank_conflict_hint(&t.e, t.pv, c, 1, 2, 33, 4, &ways));
  assert_int_equal(ways, 1);
  assert_ok(&t.e, poly_bank_conflict_hint(&t.e, t.pv, c, 1, 1, 32, 4, &ways)); /* along a row */
  assert_int_equal(ways, 1);
  ibt_free(&t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_dependences),     cmocka_unit_test(test_axis_kinds_softmax),
      cmocka_unit_test(test_affine_closure),  cmocka_unit_test(test_tails),
      cmocka_unit_test(test_halo_conv),       cmocka_unit_test(test_min_buffer),
      cmocka_unit_test(test_pointwise_and_strides), cmocka_unit_test(test_fusion_prefix),
      cmocka_unit_test(test_fusable_groups),  cmocka_unit_test(test_hints),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
