/* test_flow_api.c — harp.h on an ONNX model with run-time control flow (a
 * host program, harp/flow.h), packed here with protobuf-c:
 *
 *   y = If(c) then (x + w) * 2 else Concat(x, x)     c: bool scalar, x: float [3], w: initializer
 *   z = Relu(y)
 *
 * The branches' shapes differ ([3] or [6]): harp_output_shape gives -1, the
 * output is read with harp_model_output (harp_model_run takes NULL for it, and fails
 * cleanly with a buffer); the weight comes in the parameter block; both
 * branches run on the interpreter and the cpu backend against values
 * computed here.  With then (x + x) * 2, else Neg(x) and x of dim "N"
 * bound by harp_options' syms, the output's shape is known (N) and
 * harp_model_run writes it into a buffer.  The importer without host_flow refuses the model, naming the
 * node.  The options' knobs are scribbled on after the compile: the runs do
 * not read the caller's strings. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harp.h"
#include "harp/flow.h"
#include "harp/onnx.h"
#include "onnx.pb-c.h"
#include "testutil.h"

typedef struct vinfo {
  Onnx__ValueInfoProto v;
  Onnx__TypeProto t;
  Onnx__TypeProto__Tensor tt;
  Onnx__TensorShapeProto sh;
  Onnx__TensorShapeProto__Dimension d, *dp[1];
} vinfo;

/* A value of element type ety, rank 0 or [n] (n < 0: no dim value; -2: the dim "N"). */
static void vinfo_init(vinfo *a, const char *name, int ety, int rank, int64_t n) {
  onnx__value_info_proto__init(&a->v);
  onnx__type_proto__init(&a->t);
  onnx__type_proto__tensor__init(&a->tt);
  onnx__tensor_shape_proto__init(&a->sh);
  onnx__tensor_shape_proto__dimension__init(&a->d);
  if (n >= 0) a->d.value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE, a->d.dim_value = n;
  if (n == -2) a->d.value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM, a->d.dim_param = "N";
  a->dp[0] = &a->d;
  a->sh.n_dim = (size_t)rank, a->sh.dim = a->dp;
  a->tt.has_elem_type = 1, a->tt.elem_type = ety, a->tt.shape = &a->sh;
  a->t.value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE, a->t.tensor_type = &a->tt;
  a->v.name = (char *)name, a->v.type = &a->t;
}

typedef struct mb {
  Onnx__ModelProto m;
  Onnx__OperatorSetIdProto op, *ops[1];
  Onnx__GraphProto g, tg, eg;
  Onnx__NodeProto nif, nrelu, tadd, tmul, econ, *nodes[2], *tnodes[2], *enodes[1];
  Onnx__AttributeProto at, ae, aaxis, *ifattrs[2], *conattrs[1];
  char *ifin[1], *ifout[1], *reluin[1], *reluout[1], *addin[2], *addout[1], *mulin[2], *mulout[1], *conin[2], *conout[1];
  Onnx__TensorProto w, two, *inits[2];
  int64_t wdims[1];
  float wdata[3], twodata[1];
  vinfo c, x, z, to, eo;
  Onnx__ValueInfoProto *gin[2], *gout[1], *tout[1], *eout[1];
} mb;

static void node(Onnx__NodeProto *n, const char *op, char **in, int nin, char **out) {
  onnx__node_proto__init(n);
  n->op_type = (char *)op, n->name = (char *)op, n->n_input = (size_t)nin, n->input = in, n->n_output = 1, n->output = out;
}

/* same: else is Neg(x), x is ["N"] */
static void build(mb *b, bool same) {
  memset(b, 0, sizeof *b);
  onnx__model_proto__init(&b->m);
  onnx__operator_set_id_proto__init(&b->op);
  b->op.domain = "", b->op.has_version = 1, b->op.version = 17;
  b->ops[0] = &b->op;
  b->m.n_opset_import = 1, b->m.opset_import = b->ops, b->m.has_ir_version = 1, b->m.ir_version = 8;
  /* then: (x + w) * 2 */
  b->addin[0] = "x", b->addin[1] = "w", b->addout[0] = "s";
  b->mulin[0] = "s", b->mulin[1] = "two", b->mulout[0] = "t";
  node(&b->tadd, "Add", b->addin, 2, b->addout);
  node(&b->tmul, "Mul", b->mulin, 2, b->mulout);
  b->tnodes[0] = &b->tadd, b->tnodes[1] = &b->tmul;
  onnx__graph_proto__init(&b->tg);
  vinfo_init(&b->to, "t", 1, 1, -1);
  b->tout[0] = &b->to.v;
  b->tg.name = "then", b->tg.n_node = 2, b->tg.node = b->tnodes, b->tg.n_output = 1, b->tg.output = b->tout;
  /* else: Concat(x, x) */
  b->conin[0] = b->conin[1] = "x", b->conout[0] = "u";
  node(&b->econ, "Concat", b->conin, 2, b->conout);
  onnx__attribute_proto__init(&b->aaxis);
  b->aaxis.name = "axis", b->aaxis.has_type = 1, b->aaxis.type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT, b->aaxis.has_i = 1;
  b->conattrs[0] = &b->aaxis;
  b->econ.n_attribute = 1, b->econ.attribute = b->conattrs;
  b->enodes[0] = &b->econ;
  if (same) b->econ.op_type = "Neg", b->econ.n_input = 1, b->econ.n_attribute = 0, b->addin[1] = "x"; /* then (x + x) * 2 */
  onnx__graph_proto__init(&b->eg);
  vinfo_init(&b->eo, "u", 1, 1, -1);
  b->eout[0] = &b->eo.v;
  b->eg.name = "else", b->eg.n_node = 1, b->eg.node = b->enodes, b->eg.n_output = 1, b->eg.output = b->eout;
  /* main: y = If(c); z = Relu(y) */
  b->ifin[0] = "c", b->ifout[0] = "y", b->reluin[0] = "y", b->reluout[0] = "z";
  node(&b->nif, "If", b->ifin, 1, b->ifout);
  b->nif.name = "the_if";
  onnx__attribute_proto__init(&b->at);
  onnx__attribute_proto__init(&b->ae);
  b->at.name = "then_branch", b->at.has_type = 1, b->at.type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH, b->at.g = &b->tg;
  b->ae.name = "else_branch", b->ae.has_type = 1, b->ae.type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH, b->ae.g = &b->eg;
  b->ifattrs[0] = &b->at, b->ifattrs[1] = &b->ae;
  b->nif.n_attribute = 2, b->nif.attribute = b->ifattrs;
  node(&b->nrelu, "Relu", b->reluin, 1, b->reluout);
  b->nodes[0] = &b->nif, b->nodes[1] = &b->nrelu;
  onnx__tensor_proto__init(&b->w);
  onnx__tensor_proto__init(&b->two);
  b->wdims[0] = 3;
  b->wdata[0] = 1.5f, b->wdata[1] = -4.0f, b->wdata[2] = 0.25f, b->twodata[0] = 2.0f;
  b->w.name = "w", b->w.has_data_type = 1, b->w.data_type = 1, b->w.n_dims = 1, b->w.dims = b->wdims;
  b->w.n_float_data = 3, b->w.float_data = b->wdata;
  b->two.name = "two", b->two.has_data_type = 1, b->two.data_type = 1, b->two.n_float_data = 1, b->two.float_data = b->twodata;
  b->inits[0] = &b->w, b->inits[1] = &b->two;
  onnx__graph_proto__init(&b->g);
  vinfo_init(&b->c, "c", 9, 0, -1);
  vinfo_init(&b->x, "x", 1, 1, same ? -2 : 3);
  vinfo_init(&b->z, "z", 1, 1, -1);
  b->gin[0] = &b->c.v, b->gin[1] = &b->x.v, b->gout[0] = &b->z.v;
  b->g.name = "main", b->g.n_node = 2, b->g.node = b->nodes, b->g.n_initializer = 2, b->g.initializer = b->inits;
  b->g.n_input = 2, b->g.input = b->gin, b->g.n_output = 1, b->g.output = b->gout;
  b->m.graph = &b->g;
}

/* The model written to a temporary .onnx file (path: its name). */
static void write_model(mb *b, char *path) {
  size_t n = onnx__model_proto__get_packed_size(&b->m);
  uint8_t *buf = malloc(n);
  assert_non_null(buf);
  onnx__model_proto__pack(&b->m, buf);
  int fd = mkstemps(path, 5);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, buf, n), (ssize_t)n);
  close(fd);
  free(buf);
}

static void compile_run(harp_backend backend) {
  mb b;
  build(&b, false);
  char path[] = "/tmp/harp_flow_XXXXXX.onnx";
  write_model(&b, path);
  harp_error e = {0};
  /* the knobs' strings are the caller's only until the compile returns (as a
   * binding's temporaries are): scribbled on after it, they must not matter */
  char knob[] = "no_dedup=1";
  const char *knobs[] = {knob, NULL};
  harp_options o = {.backend = backend, .knobs = knobs};
  harp_compiled *c;
  assert_ok(&e, harp_compile_file(&e, path, &o, &c));
  unlink(path);
  memset(knob, 'x', sizeof knob - 1);
  knobs[0] = "no_such_knob";
  assert_int_equal(harp_num_inputs(c), 2);
  assert_string_equal(harp_input_name(c, 0), "c");
  assert_int_equal(harp_input_dtype(c, 0), HARP_BOOL);
  int64_t shape[HARP_MAX_RANK];
  assert_int_equal(harp_input_shape(c, 1, shape), 1);
  assert_int_equal(shape[0], 3);
  assert_int_equal(harp_num_outputs(c), 1);
  assert_string_equal(harp_output_name(c, 0), "z");
  assert_int_equal(harp_output_shape(c, 0, shape), 1);
  assert_int_equal(shape[0], -1); /* [3] or [6]: known at run time */
  const unsigned char *params = harp_embedded_params(c);
  int64_t off = harp_param_offset(c, "w");
  assert_true(off >= 0);
  assert_memory_equal(params + off, b.wdata, sizeof b.wdata);
  harp_model *m = harp_model_init(c, params, harp_params_bytes(c));
  assert_non_null(m);
  float x[3] = {-1.0f, 2.0f, 0.5f}, buf[6];
  for (int cv = 0; cv < 2; cv++) {
    unsigned char cond = (unsigned char)cv;
    const void *in[] = {&cond, x};
    void *with_buf[] = {buf}, *none[] = {NULL};
    assert_int_not_equal(harp_model_run(m, in, with_buf), 0); /* a buffer for a shape known at run time */
    assert_non_null(strstr(harp_model_error(m), "harp_model_output"));
    assert_null(harp_model_output(m, 0, shape, NULL));
    assert_int_equal(harp_model_run(m, in, none), 0);
    int rank;
    const float *y = harp_model_output(m, 0, shape, &rank);
    assert_non_null(y);
    assert_int_equal(rank, 1);
    assert_int_equal(shape[0], cv ? 3 : 6);
    for (int i = 0; i < shape[0]; i++) {
      float want = cv ? (x[i] + b.wdata[i]) * 2.0f : x[i % 3];
      assert_true(fabsf(y[i] - (want > 0 ? want : 0)) <= 1e-6f);
    }
  }
  harp_model_free(m);
  harp_compiled_free(c);
}

/* The branches agree on [N]: the output's shape is known from the binding. */
static void known_shape(harp_backend backend) {
  mb b;
  build(&b, true);
  char path[] = "/tmp/harp_flow_XXXXXX.onnx";
  write_model(&b, path);
  harp_error e = {0};
  const char *syms[] = {"N=3", NULL};
  harp_options o = {.backend = backend, .syms = syms};
  harp_compiled *c;
  assert_ok(&e, harp_compile_file(&e, path, &o, &c));
  unlink(path);
  int64_t shape[HARP_MAX_RANK];
  assert_int_equal(harp_input_shape(c, 1, shape), 1);
  assert_int_equal(shape[0], 3);
  assert_int_equal(harp_output_shape(c, 0, shape), 1);
  assert_int_equal(shape[0], 3);
  harp_model *m = harp_model_init(c, harp_embedded_params(c), harp_params_bytes(c));
  assert_non_null(m);
  float x[3] = {-1.0f, 2.0f, 0.5f}, y[3];
  for (int cv = 0; cv < 2; cv++) {
    unsigned char cond = (unsigned char)cv;
    const void *in[] = {&cond, x};
    void *out[] = {y};
    assert_int_equal(harp_model_run(m, in, out), 0);
    for (int i = 0; i < 3; i++) {
      float want = cv ? (x[i] + x[i]) * 2.0f : -x[i];
      assert_true(fabsf(y[i] - (want > 0 ? want : 0)) <= 1e-6f);
    }
  }
  harp_model_free(m);
  harp_compiled_free(c);
}

static void test_c_api(void **state) {
  (void)state;
  compile_run(HARP_BACKEND_INTERP);
  compile_run(HARP_BACKEND_CPU);
  known_shape(HARP_BACKEND_INTERP);
  known_shape(HARP_BACKEND_CPU);
}

/* onnx_load without host_flow: one static graph is not possible. */
static void test_static_refused(void **state) {
  (void)state;
  mb b;
  build(&b, false);
  size_t n = onnx__model_proto__get_packed_size(&b.m);
  uint8_t *buf = malloc(n);
  assert_non_null(buf);
  onnx__model_proto__pack(&b.m, buf);
  harp_error e = {0};
  onnx_model om;
  assert_int_equal(onnx_load_buffer(&e, buf, n, "t.onnx", &om), HARP_E_UNSUPPORTED);
  assert_non_null(strstr(e.msg, "\"the_if\" (If)"));
  assert_non_null(strstr(e.msg, "known only at run time"));
  assert_null(om.program);
  assert_null(om.flow);
  onnx_opts o = {.host_flow = true};
  harp_error_clear(&e);
  assert_ok(&e, onnx_load_buffer_opts(&e, buf, n, "t.onnx", &o, &om));
  assert_non_null(om.flow);
  assert_null(om.program);
  char *text = flow_describe(om.flow);
  assert_non_null(text);
  assert_non_null(strstr(text, "If node 0 \"the_if\" (If)"));
  free(text);
  onnx_model_free(&om);
  free(buf);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_static_refused), cmocka_unit_test(test_c_api)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
