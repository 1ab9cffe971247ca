#!/usr/bin/env python3
"""test_python_shapeset.py — harp.InferenceSession(model, shapesets=...)
(harp_options.shapesets): an ONNX model of MatMul + Add + Softmax + Mul
with a dim_param "batch" compiled once for batch in 2..48 on a cache of its
own, fed numpy arrays of four sizes: one object, one C compile
(shapeset_objects), the outputs right-sized and against onnxruntime; out=
buffers; a feed outside the ShapeSet is InputMismatch, or compiled on its own
with shapeset_recompile; a Reshape to (n / 4, 4) (a derived symbol) whose
copy kernel still prints its sizes compiles per feed shape, saying why; a
bad ShapeSet is UsageError, one past the limits LimitExceeded."""
import os
import tempfile

from harp_py import Suite, harp, np, ort

s = Suite("python_shapeset")
rng = np.random.default_rng(25)

if ort is None:
    print("onnxruntime not installed: skipped")
    raise SystemExit(77)
import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

D = tempfile.mkdtemp()
w = rng.standard_normal((16, 24)).astype(np.float32) * 0.5
b = rng.standard_normal(24).astype(np.float32)
g = helper.make_graph(
    [helper.make_node("MatMul", ["x", "W"], ["h"]), helper.make_node("Add", ["h", "b"], ["hb"]),
     helper.make_node("Softmax", ["hb"], ["p"], axis=-1), helper.make_node("Mul", ["p", "two"], ["y"])], "g",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 16])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    [numpy_helper.from_array(w, "W"), numpy_helper.from_array(b, "b"), numpy_helper.from_array(np.array(2.0, np.float32), "two")])
path = os.path.join(D, "dense_softmax.onnx")
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
opts = {"cache_dir": tempfile.mkdtemp(), "progress": False}


def close(got, want):
    return got.shape == want.shape and np.allclose(got, want, rtol=1e-5, atol=1e-6)


sess = harp.InferenceSession(path, opts, shapesets={"batch": (2, 48)})
for n in (7, 48, 2, 31):
    x = rng.standard_normal((n, 16)).astype(np.float32)
    (y,) = sess.run(None, {"x": x})
    s.check(f"batch={n}: shape {y.shape}", y.shape == (n, 24))
    s.check(f"batch={n} vs onnxruntime", close(y, ref.run(None, {"x": x})[0]))
s.check("one object, one C compile", sess.shapeset_objects() == (1, 1, None), str(sess.shapeset_objects()))
s.check("get_outputs: the varying dim", sess.get_outputs()[0].shape == [None, 24], str(sess.get_outputs()[0].shape))

# out= buffer, right-sized
x = rng.standard_normal((5, 16)).astype(np.float32)
buf = np.zeros((5, 24), np.float32)
(y,) = sess.run(None, {"x": x}, out=[buf])
s.check("out=: written in place", y is buf and close(buf, ref.run(None, {"x": x})[0]))

# outside: InputMismatch, no compile
try:
    sess.run(None, {"x": np.zeros((49, 16), np.float32)})
    s.check("batch=49: refused", False)
except harp.InputMismatch as ex:
    s.check("batch=49: refused", "outside the compiled ShapeSet" in str(ex), str(ex))
s.check("batch=49: nothing compiled", sess.shapeset_objects()[0] == 1)

# shapeset_recompile: a compile of its own
sess2 = harp.InferenceSession(path, dict(opts, shapeset_recompile=True), shapesets=["batch=2..48"])
x = rng.standard_normal((60, 16)).astype(np.float32)
(y,) = sess2.run(None, {"x": x})
s.check("recompile: batch=60 vs onnxruntime", close(y, ref.run(None, {"x": x})[0]))
s.check("recompile: two objects", sess2.shapeset_objects()[0] == 2, str(sess2.shapeset_objects()))

# a Reshape to (n / 4, 4) from Shape: n / 4 a derived symbol, 1 at the box's lower corner n = 4 (its loop one
# point there): the corners compared from n = 8 (sgen.c, raise_derived_ones), one object serves every n
nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Gather", ["s", "zero"], ["n"]),
         helper.make_node("Div", ["n", "four"], ["q"]), helper.make_node("Unsqueeze", ["q", "ax"], ["q1"]),
         helper.make_node("Concat", ["q1", "four1"], ["shape"], axis=0), helper.make_node("Reshape", ["x", "shape"], ["y"])]
inits = [numpy_helper.from_array(np.array(0, np.int64), "zero"), numpy_helper.from_array(np.array(4, np.int64), "four"),
         numpy_helper.from_array(np.array([0], np.int64), "ax"), numpy_helper.from_array(np.array([4], np.int64), "four1")]
g2 = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"])],
                       [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
path2 = os.path.join(D, "reshape4.onnx")
onnx.save(helper.make_model(g2, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path2)
sess3 = harp.InferenceSession(path2, opts, shapesets={"n": (4, 64)})
for n in (12, 40, 4, 64, 28):
    x = rng.standard_normal(n).astype(np.float32)
    (y,) = sess3.run(None, {"x": x})
    s.check(f"reshape n={n}: on the one object, vs numpy", y.shape == (n // 4, 4) and np.array_equal(y, x.reshape(-1, 4)))
objs = sess3.shapeset_objects()
s.check("reshape: one object for the box", objs[0] == 1 and objs[2] is None, str(objs))

for bad in ({"batch": 5}, ["batch=9"], {"nosuch": (1, 4)}):
    try:
        harp.InferenceSession(path, opts, shapesets=bad)
        s.check(f"shapesets={bad!r}: refused", False)
    except harp.HarpError as ex:
        s.check(f"shapesets={bad!r}: refused", isinstance(ex, harp.UsageError), repr(ex))
# a box whose upper corner passes the limits (2^40 rows): LimitExceeded, located, when the session is made
try:
    harp.InferenceSession(path, opts, shapesets={"batch": (2, 2 ** 40)})
    s.check("batch up to 2^40: refused", False)
except harp.HarpError as ex:
    s.check("batch up to 2^40: LimitExceeded at the box's corner", isinstance(ex, harp.LimitExceeded) and "upper corner" in str(ex),
            repr(ex))
s.close()
