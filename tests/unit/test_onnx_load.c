/* test_onnx_load.c — onnx_load_buffer on models packed here with
 * protobuf-c: a good one (weights, name map, symbolic dims) and one broken
 * thing at a time, each a clear error and an empty result. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harp.h"
#include "harp/onnx.h"
#include "onnx.pb-c.h"
#include "testutil.h"

/* y = Relu(MatMul(x, w)) with x ["batch", 3] and w [3, 2] (float_data). */
typedef struct mb {
  Onnx__ModelProto m;
  Onnx__OperatorSetIdProto op, *ops[1];
  Onnx__GraphProto g;
  Onnx__NodeProto n0, n1, *nodes[2];
  char *in0[2], *out0[1], *in1[1], *out1[1];
  Onnx__TensorProto w, *inits[1];
  int64_t wdims[2];
  float wdata[6];
  Onnx__ValueInfoProto x, y, *xs[1], *ys[1];
  Onnx__TypeProto xt;
  Onnx__TypeProto__Tensor xtt;
  Onnx__TensorShapeProto xsh;
  Onnx__TensorShapeProto__Dimension d0, d1, *dims[2];
} mb;

static void build(mb *b) {
  onnx__model_proto__init(&b->m);
  onnx__operator_set_id_proto__init(&b->op);
  b->op.domain = "", b->op.has_version = 1, b->op.version = 17;
  b->ops[0] = &b->op;
  b->m.n_opset_import = 1, b->m.opset_import = b->ops;
  b->m.has_ir_version = 1, b->m.ir_version = 8;
  onnx__graph_proto__init(&b->g);
  b->m.graph = &b->g;
  onnx__node_proto__init(&b->n0);
  onnx__node_proto__init(&b->n1);
  b->in0[0] = "input.1", b->in0[1] = "onnx::MatMul_1", b->out0[0] = "/mm/MatMul_output_0";
  b->n0.op_type = "MatMul", b->n0.name = "/mm/MatMul", b->n0.n_input = 2, b->n0.input = b->in0, b->n0.n_output = 1,
  b->n0.output = b->out0;
  b->in1[0] = "/mm/MatMul_output_0", b->out1[0] = "out/y";
  b->n1.op_type = "Relu", b->n1.name = "relu", b->n1.n_input = 1, b->n1.input = b->in1, b->n1.n_output = 1, b->n1.output = b->out1;
  b->nodes[0] = &b->n0, b->nodes[1] = &b->n1;
  b->g.n_node = 2, b->g.node = b->nodes;
  onnx__tensor_proto__init(&b->w);
  b->wdims[0] = 3, b->wdims[1] = 2;
  for (int i = 0; i < 6; i++) b->wdata[i] = (float)i;
  b->w.name = "onnx::MatMul_1", b->w.has_data_type = 1, b->w.data_type = 1, b->w.n_dims = 2, b->w.dims = b->wdims;
  b->w.n_float_data = 6, b->w.float_data = b->wdata;
  b->inits[0] = &b->w;
  b->g.n_initializer = 1, b->g.initializer = b->inits;
  onnx__tensor_shape_proto__dimension__init(&b->d0);
  onnx__tensor_shape_proto__dimension__init(&b->d1);
  b->d0.value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM, b->d0.dim_param = "batch";
  b->d1.value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE, b->d1.dim_value = 3;
  b->dims[0] = &b->d0, b->dims[1] = &b->d1;
  onnx__tensor_shape_proto__init(&b->xsh);
  b->xsh.n_dim = 2, b->xsh.dim = b->dims;
  onnx__type_proto__tensor__init(&b->xtt);
  b->xtt.has_elem_type = 1, b->xtt.elem_type = 1, b->xtt.shape = &b->xsh;
  onnx__type_proto__init(&b->xt);
  b->xt.value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE, b->xt.tensor_type = &b->xtt;
  onnx__value_info_proto__init(&b->x);
  onnx__value_info_proto__init(&b->y);
  b->x.name = "input.1", b->x.type = &b->xt, b->y.name = "out/y";
  b->xs[0] = &b->x, b->ys[0] = &b->y;
  b->g.n_input = 1, b->g.input = b->xs, b->g.n_output = 1, b->g.output = b->ys;
}

/* Pack b and load it; returns the status, e gets the error. */
static harp_status load(mb *b, harp_error *e, onnx_model *out) {
  size_t n = onnx__model_proto__get_packed_size(&b->m);
  uint8_t *buf = malloc(n + 1);
  assert_non_null(buf);
  onnx__model_proto__pack(&b->m, buf);
  harp_status st = onnx_load_buffer(e, buf, n, "t.onnx", out);
  free(buf);
  return st;
}

static void expect_error(mb *b, harp_status code, const char *needle) {
  harp_error e = {0};
  onnx_model m;
  assert_int_equal(load(b, &e, &m), code);
  if (!strstr(e.msg, needle)) fail_msg("'%s' not in '%s'", needle, e.msg);
  assert_null(m.program);
  assert_int_equal(m.nweights, 0);
}

static void test_good(void **state) {
  (void)state;
  mb b;
  build(&b);
  harp_error e = {0};
  onnx_model m;
  assert_ok(&e, load(&b, &e, &m));
  assert_non_null(m.program);
  assert_int_equal(m.opset, 17);
  assert_int_equal(m.nweights, 1);
  assert_string_equal(m.weight_ids[0], "onnx__MatMul_1");
  assert_int_equal(m.weights[0].rank, 2);
  assert_memory_equal(m.weights[0].data, b.wdata, sizeof b.wdata);
  assert_string_equal(onnx_id_of(&m, "input.1"), "input_1");
  assert_string_equal(onnx_id_of(&m, "batch"), "batch");
  tiny_graph *g = NULL;
  tiny_symtab defaults;
  tiny_symtab_init(&defaults);
  assert_ok(&e, hg_lower(&e, m.program, &g, &defaults));
  assert_true(tiny_find(g, "out_y") >= 0); /* the output's id */
  tiny_graph_free(g);
  tiny_symtab_free(&defaults);
  onnx_model_free(&m);
}

/* onnx_load_buffer_opts: the graph input fixed at import is a weight, not an input */
typedef struct reader {
  ut_tensor t;
  int calls, last;
  bool fail;
} reader;

static harp_status read_one(harp_error *e, void *ctx, int i, ut_tensor *out) {
  reader *r = ctx;
  r->calls++, r->last = i;
  if (r->fail) return ut_fail(e, HARP_E_IO, "x.npy", "cannot read");
  if (ut_tensor_alloc(e, out, r->t.dtype, r->t.rank, r->t.shape)) return e->code;
  memcpy(out->data, r->t.data, r->t.nbytes);
  return HARP_OK;
}

static void test_fixed_input(void **state) {
  (void)state;
  mb b;
  build(&b);
  b.d0.value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE, b.d0.dim_value = 2;
  size_t n = onnx__model_proto__get_packed_size(&b.m);
  uint8_t *buf = malloc(n);
  assert_non_null(buf);
  onnx__model_proto__pack(&b.m, buf);
  harp_error e = {0};
  int64_t shape[2] = {2, 3};
  double v[6] = {1, 2, 3, 4, 5, 6};
  ut_tensor x = tu_tensor(TINY_FP32, 2, shape, v);
  const char *names[2] = {"input.1", "not_an_input"};
  ut_tensor fixed[2] = {x, x};
  bool used[2] = {false, true};
  onnx_opts o = {.nfixed = 2, .fixed_names = names, .fixed = fixed, .used = used};
  onnx_model m;
  assert_ok(&e, onnx_load_buffer_opts(&e, buf, n, "t.onnx", &o, &m));
  assert_true(used[0]);
  assert_false(used[1]);
  assert_int_equal(m.nweights, 2);
  tiny_graph *g = NULL;
  tiny_symtab defaults;
  tiny_symtab_init(&defaults);
  assert_ok(&e, hg_lower(&e, m.program, &g, &defaults));
  int inputs = 0;
  for (int i = 0; i < g->n; i++) inputs += g->nodes[i].op == TINY_INPUT;
  assert_int_equal(inputs, 2); /* both weights; no run-time input left */
  tiny_graph_free(g);
  tiny_symtab_free(&defaults);
  onnx_model_free(&m);
  /* data of another shape is refused */
  shape[0] = 4;
  double v4[12] = {0};
  ut_tensor x4 = tu_tensor(TINY_FP32, 2, shape, v4);
  fixed[0] = x4;
  harp_error_clear(&e);
  assert_int_equal(onnx_load_buffer_opts(&e, buf, n, "t.onnx", &o, &m), HARP_E_INPUT_MISMATCH);
  assert_non_null(strstr(e.msg, "dim 0 is 2"));
  assert_null(m.program);
  /* without `fixed`, the reader is asked for the graph input alone */
  shape[0] = 2;
  reader r = {.t = x};
  onnx_opts lazy = {.nfixed = 2, .fixed_names = names, .read = read_one, .read_ctx = &r, .used = used};
  harp_error_clear(&e);
  assert_ok(&e, onnx_load_buffer_opts(&e, buf, n, "t.onnx", &lazy, &m));
  assert_int_equal(r.calls, 1);
  assert_int_equal(r.last, 0);
  assert_true(used[0]);
  assert_false(used[1]);
  assert_int_equal(m.nweights, 2);
  onnx_model_free(&m);
  /* its failure is the import's */
  r.fail = true;
  harp_error_clear(&e);
  assert_int_equal(onnx_load_buffer_opts(&e, buf, n, "t.onnx", &lazy, &m), HARP_E_IO);
  assert_null(m.program);
  ut_tensor_free(&x);
  ut_tensor_free(&x4);
  free(buf);
}

static void test_bytes(void **state) {
  (void)state;
  harp_error e = {0};
  onnx_model m;
  assert_int_equal(onnx_load_buffer(&e, "", 0, "t.onnx", &m), HARP_E_PARSE);
  harp_error_clear(&e);
  assert_int_equal(onnx_load_buffer(&e, "\xff\xff\xff\xff\xff", 5, "t.onnx", &m), HARP_E_PARSE);
  assert_null(m.program);
  harp_error_clear(&e);
  assert_int_equal(onnx_load_file(&e, "/nonexistent/m.onnx", &m), HARP_E_IO);
  /* every truncation of a good model is an error or a model, never a crash */
  mb b;
  build(&b);
  size_t n = onnx__model_proto__get_packed_size(&b.m);
  uint8_t *buf = malloc(n);
  onnx__model_proto__pack(&b.m, buf);
  for (size_t k = 0; k < n; k++) {
    harp_error_clear(&e);
    if (!onnx_load_buffer(&e, buf, k, "t.onnx", &m)) onnx_model_free(&m);
    else assert_true(e.code != HARP_OK && e.msg[0]);
  }
  free(buf);
}

static void test_broken(void **state) {
  (void)state;
  mb b;
  build(&b);
  b.op.version = 5000;
  expect_error(&b, HARP_E_UNSUPPORTED, "opset 5000");
  build(&b);
  b.n1.op_type = "NoSuchOp";
  expect_error(&b, HARP_E_UNKNOWN_OP, "node 1 \"relu\" (NoSuchOp)");
  build(&b);
  b.n0.domain = "com.example";
  expect_error(&b, HARP_E_UNSUPPORTED, "com.example");
  build(&b);
  b.w.n_float_data = 5; /* the dims say 6 */
  expect_error(&b, HARP_E_INVALID_ARG, "onnx::MatMul_1");
  build(&b);
  b.wdims[0] = (int64_t)1 << 40;
  expect_error(&b, HARP_E_LIMIT, "onnx::MatMul_1");
  build(&b);
  b.w.has_data_location = 1, b.w.data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
  expect_error(&b, HARP_E_UNSUPPORTED, "external");
  build(&b);
  b.in1[0] = "nowhere";
  expect_error(&b, HARP_E_DANGLING, "nowhere");
  build(&b);
  b.wdims[0] = 4, b.w.n_float_data = 6; /* MatMul [batch, 3] @ [4, 2]: 24 != 6 first */
  expect_error(&b, HARP_E_INVALID_ARG, "6 elements");
  build(&b);
  b.d1.dim_value = 4; /* [batch, 4] @ [3, 2] */
  expect_error(&b, HARP_E_AXIS_SIZE_MISMATCH, "node 0 \"/mm/MatMul\" (MatMul)");
  build(&b);
  b.xtt.elem_type = 8; /* string */
  expect_error(&b, HARP_E_UNSUPPORTED, "string");
}

/* harp.h on a .onnx file: the initializers come back as the parameter
 * block (harp_embedded_params), so a C caller needs nothing else. */
static void compile_run(harp_backend backend) {
  mb b;
  build(&b);
  size_t n = onnx__model_proto__get_packed_size(&b.m);
  uint8_t *buf = malloc(n);
  assert_non_null(buf);
  onnx__model_proto__pack(&b.m, buf);
  char path[] = "/tmp/harp_capi_XXXXXX.onnx";
  int fd = mkstemps(path, 5);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, buf, n), (ssize_t)n);
  close(fd);
  free(buf);
  harp_error e = {0};
  harp_compiled *c;
  harp_options none = {.backend = backend}; /* batch is dynamic: no default */
  assert_int_equal(harp_compile_file(&e, path, &none, &c), HARP_E_UNBOUND_SYMBOL);
  assert_true(strstr(e.msg, "harp_options.shapes input.1=<batch>x3") != NULL);
  assert_null(c);
  harp_error_clear(&e);
  const char *bad[] = {"nope=2x3", NULL};
  harp_options ob = {.backend = backend, .shapes = bad};
  assert_int_equal(harp_compile_file(&e, path, &ob, &c), HARP_E_USAGE);
  harp_error_clear(&e);
  const char *syms[] = {"batch=2", NULL}, *shapes[] = {"input.1=2x3", NULL};
  harp_options o = {.backend = backend, .syms = syms}, os = {.backend = backend, .shapes = shapes};
  assert_ok(&e, harp_compile_file(&e, path, &os, &c)); /* the same by its shape */
  assert_int_equal(harp_input_shape(c, 0, (int64_t[TINY_MAX_RANK]){0}), 2);
  harp_compiled_free(c);
  assert_ok(&e, harp_compile_file(&e, path, &o, &c));
  unlink(path);
  assert_int_equal(harp_num_inputs(c), 1); /* the weight is not an input */
  assert_string_equal(harp_input_name(c, 0), "input_1");
  assert_int_equal(harp_params_bytes(c) >= sizeof b.wdata, 1);
  const unsigned char *params = harp_embedded_params(c);
  assert_non_null(params);
  assert_memory_equal(params + harp_param_offset(c, "onnx__MatMul_1"), b.wdata, sizeof b.wdata);
  harp_model *m = harp_model_init(c, params, harp_params_bytes(c));
  assert_non_null(m);
  float x[6] = {1, -2, 3, 0.5f, 0, -1}, y[4], want[4];
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 2; j++) {
      float acc = 0;
      for (int k = 0; k < 3; k++) acc += x[i * 3 + k] * b.wdata[k * 2 + j];
      want[i * 2 + j] = acc > 0 ? acc : 0;
    }
  const void *in[] = {x};
  void *out[] = {y};
  assert_int_equal(harp_model_run(m, in, out), 0);
  for (int i = 0; i < 4; i++) assert_true(fabsf(y[i] - want[i]) <= 1e-5f);
  harp_model_free(m);
  harp_compiled_free(c);
}

/* onnx_parse_shape: NAME=DIMS split at the last '=', 'x' or ',' between dims. */
static void test_parse_shape(void **state) {
  (void)state;
  harp_error e = {0};
  onnx_shape s;
  assert_ok(&e, onnx_parse_shape(&e, "input.1=1x3x224x224", &s));
  assert_string_equal(s.name, "input.1");
  assert_int_equal(s.rank, 4);
  assert_int_equal(s.dims[0], 1), assert_int_equal(s.dims[3], 224);
  assert_ok(&e, onnx_parse_shape(&e, "a=b=2,0", &s));
  assert_string_equal(s.name, "a=b");
  assert_int_equal(s.rank, 2), assert_int_equal(s.dims[1], 0);
  assert_ok(&e, onnx_parse_shape(&e, "sr=", &s));
  assert_int_equal(s.rank, 0);
  static const char *const bad[] = {"x", "=1x2", "x=1x", "x=ax2", "x=1xx2", "x=-1", "x=2147483648", "x=1x1x1x1x1x1x1x1x1x1x1x1x1", NULL}; /* 13 > TINY_MAX_RANK */
  for (int i = 0; bad[i]; i++) {
    harp_error_clear(&e);
    if (onnx_parse_shape(&e, bad[i], &s) != HARP_E_USAGE) fail_msg("'%s' parsed", bad[i]);
    assert_true(strstr(e.msg, "--shape") != NULL);
  }
}

/* Pack b and load it with options. */
static harp_status load_opts(mb *b, harp_error *e, const onnx_opts *o, onnx_model *out) {
  size_t n = onnx__model_proto__get_packed_size(&b->m);
  uint8_t *buf = malloc(n + 1);
  assert_non_null(buf);
  onnx__model_proto__pack(&b->m, buf);
  harp_status st = onnx_load_buffer_opts(e, buf, n, "t.onnx", o, out);
  free(buf);
  return st;
}

/* Shapes and symbols given at import: "batch" becomes a number; without
 * them it is a dynamic dim the model lists, with the option to give. */
static void test_shapes(void **state) {
  (void)state;
  mb b;
  build(&b);
  harp_error e = {0};
  onnx_model m;
  assert_ok(&e, load(&b, &e, &m)); /* no shapes: dynamic, no default */
  assert_int_equal(m.ndyn, 1);
  assert_string_equal(m.dyn[0].input, "input.1");
  assert_int_equal(m.dyn[0].dim, 0);
  assert_string_equal(m.dyn[0].sym, "batch");
  assert_string_equal(m.dyn[0].hint, "--shape input.1=<batch>x3");
  assert_int_equal(onnx_require_shapes(&e, &m), HARP_E_UNBOUND_SYMBOL);
  assert_true(strstr(e.msg, "graph input \"input.1\" (dim 0): give --shape input.1=<batch>x3") != NULL);
  onnx_model_free(&m);
  harp_error_clear(&e);
  onnx_shape s[2];
  bool used[2];
  assert_ok(&e, onnx_parse_shape(&e, "input_1=4x3", &s[0])); /* by its harp id */
  assert_ok(&e, onnx_parse_shape(&e, "other=1", &s[1]));
  onnx_opts o = {.nshapes = 2, .shapes = s, .shape_used = used};
  assert_ok(&e, load_opts(&b, &e, &o, &m));
  assert_true(used[0]), assert_false(used[1]);
  assert_int_equal(m.ndyn, 0);
  assert_ok(&e, onnx_require_shapes(&e, &m));
  tiny_graph *g = NULL;
  tiny_symtab defaults;
  tiny_symtab_init(&defaults);
  assert_ok(&e, hg_lower(&e, m.program, &g, &defaults)); /* every dim a number: no binding needed */
  int x = tiny_find(g, "input_1");
  assert_true(x >= 0);
  assert_int_equal(g->nodes[x].shape.d[0].n, 4);
  tiny_graph_free(g);
  tiny_symtab_free(&defaults);
  onnx_model_free(&m);
  s[0].dims[1] = 5; /* against the static 3 */
  assert_int_equal(load_opts(&b, &e, &o, &m), HARP_E_INPUT_MISMATCH);
  assert_true(strstr(e.msg, "dim 1 is 3 in the model") != NULL);
  assert_null(m.program);
  harp_error_clear(&e);
  tiny_symtab syms;
  tiny_symtab_init(&syms);
  assert_ok(&e, tiny_symtab_set(&e, &syms, "batch", 6));
  onnx_opts os = {.syms = &syms};
  assert_ok(&e, load_opts(&b, &e, &os, &m));
  assert_int_equal(m.ndyn, 0);
  onnx_model_free(&m);
  tiny_symtab_free(&syms);
}

static void test_c_api(void **state) {
  (void)state;
  compile_run(HARP_BACKEND_INTERP);
  compile_run(HARP_BACKEND_CPU);
  harp_error e = {0};
  harp_compiled *c;
  assert_int_equal(harp_compile_file(&e, "/nonexistent/m.onnx", NULL, &c), HARP_E_IO);
  assert_null(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_good), cmocka_unit_test(test_bytes), cmocka_unit_test(test_broken),
                                     cmocka_unit_test(test_fixed_input), cmocka_unit_test(test_parse_shape), cmocka_unit_test(test_shapes),
                                     cmocka_unit_test(test_c_api)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
