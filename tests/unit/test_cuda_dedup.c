/* test_cuda_dedup.c — kernels of one GPU translation unit that are the same
 * code (src/backend/cuda/cuda_dedup.c over src/backend/common/kdedup.c): a
 * repeat leaves the module and its launches take the kept kernel with their
 * arguments in its parameter order; equal code with another grid, block,
 * shared memory size or parameter type is not shared; a member named like
 * a parameter is not renamed.  The models end to end (simulator, packages,
 * graphs) are in tests/py/test_cuda_dedup.py and test_cuda_fake.c. */
#include <stdlib.h>
#include <string.h>

#include "backend/common/kdedup.h"
#include "backend/cuda/region_cuda.h"
#include "testutil.h"

/* A kernel of three float pointers p0, p1 (in) and p2 (out) whose body is
 * one statement. */
static cuda_kernel *kernel(cuda_module *m, const char *name, const char *code) {
  harp_error e = {0};
  cuda_b b;
  cuda_kernel *k = cuda_kernel_new(&b, m, &e, name, "generic");
  assert_non_null(k);
  cuda_param_add(k, "p0", "float", CUDA_P_PTR_IN, TINY_FP32);
  cuda_param_add(k, "p1", "float", CUDA_P_PTR_IN, TINY_FP32);
  cuda_param_add(k, "p2", "float", CUDA_P_PTR_OUT, TINY_FP32);
  k->grid[0] = 4;
  cuda_comment(&b, name); /* comments name regions: they do not count */
  cuda_emit_s(&b, CU_CODE, code, NULL, NULL, NULL);
  assert_ok(&e, cuda_b_finish(&b, k));
  return k;
}

typedef struct unit {
  cuda_model_tu t;
  cuda_launch l[8];
} unit;

/* One launch per kernel of m, kernel i's parameter p on buffer 10 i + p. */
static void launches(unit *u, cuda_module *m) {
  memset(u, 0, sizeof *u);
  u->t.mod = m;
  u->t.launch = u->l;
  u->t.nlaunch = m->n;
  for (int i = 0; i < m->n; i++) {
    u->l[i].k = m->k[i];
    u->l[i].fn_kernel = i;
    u->l[i].nargs = m->k[i]->nparams;
    for (int p = 0; p < m->k[i]->nparams; p++) u->l[i].args[p] = (cuda_arg){CUDA_ARG_BUF, 10 * i + p, 0};
  }
}

static int buf(const unit *u, int l, int p) { return u->l[l].args[p].buffer; }

/* k1 computes p2 = p1 - p0 where k0 computes p2 = p0 - p1: the same code
 * with p0 and p1 swapped, so k1's launch passes its p1 as k0's p0. */
static void test_permuted_buffers(void **s) {
  (void)s;
  harp_error e = {0};
  cuda_module *m;
  assert_ok(&e, cuda_module_new(&e, CUDA_SM80, &m));
  kernel(m, "k0_generic", "for (int L0_i = 0; L0_i < 8; L0_i++) p2[L0_i] = p0[L0_i] - p1[L0_i];");
  kernel(m, "k1_generic", "for (int L7_i = 0; L7_i < 8; L7_i++) p2[L7_i] = p1[L7_i] - p0[L7_i];");
  kernel(m, "k2_generic", "for (int L9_i = 0; L9_i < 8; L9_i++) p2[L9_i] = p0[L9_i] + p1[L9_i];");
  unit u;
  launches(&u, m);
  assert_ok(&e, cuda_model_dedup(&e, &u.t));
  assert_int_equal(m->n, 2); /* k0, k2 */
  assert_string_equal(m->k[0]->name, "k0_generic");
  assert_string_equal(m->k[1]->name, "k2_generic");
  assert_ptr_equal(u.l[1].k, m->k[0]);
  assert_ptr_equal(u.l[2].k, m->k[1]);
  /* k0's launch as it was; k1's: (its p1, its p0, its p2) */
  for (int p = 0; p < 3; p++) assert_int_equal(buf(&u, 0, p), p);
  assert_int_equal(buf(&u, 1, 0), 11);
  assert_int_equal(buf(&u, 1, 1), 10);
  assert_int_equal(buf(&u, 1, 2), 12);
  for (int p = 0; p < 3; p++) assert_int_equal(buf(&u, 2, p), 20 + p);
  char *src;
  assert_ok(&e, cuda_print(&e, m, &src));
  assert_null(strstr(src, "k1_generic")); /* its code is k0's */
  int globals = 0;
  for (const char *p = src; (p = strstr(p, "__global__")); p++) globals++;
  assert_int_equal(globals, 2);
  free(src);
  cuda_module_free(m);
}

/* The same code is not the same kernel when a launch would differ: grid,
 * block, dynamic shared memory, launch bounds, tile count, a parameter's
 * type or alignment. */
static void test_launch_config_counts(void **s) {
  (void)s;
  for (int what = 0; what < 7; what++) {
    harp_error e = {0};
    cuda_module *m;
    assert_ok(&e, cuda_module_new(&e, CUDA_SM80, &m));
    kernel(m, "k0_generic", "p2[0] = p0[0] * p1[0];");
    cuda_kernel *k = kernel(m, "k1_generic", "p2[0] = p0[0] * p1[0];");
    switch (what) {
    case 0: break; /* the control: shared */
    case 1: k->grid[0] = 5; break;
    case 2: k->block[0] = 256; break;
    case 3: k->smem_bytes = 1024; break;
    case 4: k->min_blocks = 2; break;
    case 5: k->params[1].ctype = "hk_u16", k->params[1].dtype = TINY_FP16; break;
    case 6: k->params[0].align = 16; break;
    }
    unit u;
    launches(&u, m);
    assert_ok(&e, cuda_model_dedup(&e, &u.t));
    assert_int_equal(m->n, what == 0 ? 1 : 2);
    assert_ptr_equal(u.l[1].k, what == 0 ? m->k[0] : k);
    cuda_module_free(m);
  }
}

/* The normal form with parameter names: renumbered by first use, unused
 * ones last in declared order, members (after . or ->) kept. */
static void test_kform_params(void **s) {
  (void)s;
  harp_error e = {0};
  const char *const xy[] = {"x", "y", "z"};
  cg_kform a, b, c, d;
  assert_ok(&e, cg_kform_make("y[0] = x[0]; /* k1 */", "k1", xy, 3, &e, &a));
  assert_ok(&e, cg_kform_make("x[0] = y[0]; /* k2 */", "k2", xy, 3, &e, &b));
  assert_true(cg_kform_same(&a, &b));
  assert_int_equal(a.norder, 3);
  assert_int_equal(a.order[0], 1); /* y first */
  assert_int_equal(a.order[1], 0);
  assert_int_equal(a.order[2], 2); /* z unused: last */
  assert_int_equal(b.order[0], 0);
  assert_int_equal(b.order[1], 1);
  /* v.x is a member: x and y swapped would read another one */
  assert_ok(&e, cg_kform_make("y[0] = v.x + x[0];", "k1", xy, 3, &e, &c));
  assert_ok(&e, cg_kform_make("x[0] = v.y + y[0];", "k2", xy, 3, &e, &d));
  assert_false(cg_kform_same(&c, &d));
  cg_kform_free(&c);
  cg_kform_free(&d);
  assert_ok(&e, cg_kform_make("y[0] = v->x + x[0];", "k1", xy, 3, &e, &c));
  assert_ok(&e, cg_kform_make("x[0] = v->x + y[0];", "k2", xy, 3, &e, &d));
  assert_true(cg_kform_same(&c, &d));
  cg_kform_free(&a);
  cg_kform_free(&b);
  cg_kform_free(&c);
  cg_kform_free(&d);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_permuted_buffers),
      cmocka_unit_test(test_launch_config_counts),
      cmocka_unit_test(test_kform_params),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
