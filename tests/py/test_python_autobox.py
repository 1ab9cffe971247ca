#!/usr/bin/env python3
"""test_python_autobox.py — the default for dynamic models (issue 25): a
CPU harp.InferenceSession over an ONNX model with dynamic H and W, given no
shapes and no ShapeSets, compiles one ShapeSet object per power-of-two
bucket of the dims the feeds set, tiered: a bucket's first feed shape
compiles alone (exact, as fast to its first result as before), its second
distinct shape compiles the bucket's one object.  A small conv net (two 3x3 convs, a
strided one, Relu, an Add of a skip) fed six sizes inside the bucket
H, W in [16, 31] compiles twice (the first shape alone, then the box:
compile_count, shapeset_objects: one object, one C compile), a size in the
next bucket (H = 32) alone, a second size there its box, a size already
met nothing; every output against onnxruntime.  An input of
H = 1 keeps H a constant (its own compile).  shapesets="exact" compiles per
feed shape as before; a model whose import needs a size as a number
(Sqrt of it) falls back to a compile per feed shape after its first box
fails, saying why; a bad word is UsageError."""
import os
import tempfile

from harp_py import Suite, harp, np, ort

s = Suite("python_autobox")
rng = np.random.default_rng(2501)

if ort is None:
    print("onnxruntime not installed: skipped")
    raise SystemExit(77)
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
import onnx  # noqa: E402

D = tempfile.mkdtemp()


def weight(name, *shape):
    return numpy_helper.from_array((rng.standard_normal(shape) * 0.3).astype(np.float32), name)


nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["c1"], ["r1"]),
         helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
         helper.make_node("Add", ["c2", "r1"], ["a"]),
         helper.make_node("Conv", ["a", "w3", "b3"], ["y"], pads=[1, 1, 1, 1], strides=[2, 2])]
g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, "H", "W"])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                      [weight("w1", 8, 3, 3, 3), weight("b1", 8), weight("w2", 8, 8, 3, 3), weight("b2", 8),
                       weight("w3", 4, 8, 3, 3), weight("b3", 4)])
path = os.path.join(D, "convnet_hw.onnx")
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
opts = {"cache_dir": tempfile.mkdtemp(), "progress": False, "intra_op_num_threads": 2}


def feed(h, w):
    return {"x": rng.standard_normal((1, 3, h, w)).astype(np.float32)}


def check(sess, h, w, what):
    x = feed(h, w)
    (y,) = sess.run(None, x)
    want = ref.run(None, x)[0]
    ok = y.shape == want.shape and np.allclose(y, want, rtol=1e-4, atol=1e-4)
    s.check(f"{what} {h}x{w}: vs onnxruntime", ok, f"{y.shape} vs {want.shape}")


inside = [(16, 16), (20, 24), (31, 17), (25, 30), (18, 29), (31, 31)]
sess = harp.InferenceSession(path, opts)
for h, w in inside:
    check(sess, h, w, "auto")
s.check("auto: six sizes in one bucket, two compiles (the first alone, then the box)", sess.compile_count() == 2,
        str(sess.compile_count()))
def boxes(sess):
    """The shapeset_objects() of each box the session compiled (its tiered first shapes' objects left out)."""
    return [b.c.shapeset_objects() for b in sess._buckets.values() if b is not None]


s.check("auto: two objects, the box one object of one C compile", sess.shapeset_objects()[0] == 2 and
        boxes(sess) == [(1, 1, None)], f"{sess.shapeset_objects()} {boxes(sess)}")
check(sess, 32, 20, "auto, the next bucket of H:")
s.check("auto: H = 32, a new bucket's first shape, compiles alone", sess.compile_count() == 3
        and sess.shapeset_objects()[0] == 3 and len(boxes(sess)) == 1, f"{sess.compile_count()} {boxes(sess)}")
check(sess, 40, 27, "auto, in that bucket:")
check(sess, 20, 24, "auto, met before:")
s.check("auto: its second shape the box, then nothing more", sess.compile_count() == 4
        and sess.shapeset_objects()[0] == 4 and boxes(sess) == [(1, 1, None)] * 2,
        f"{sess.compile_count()} {sess.shapeset_objects()}")
check(sess, 1, 20, "auto, H at 1:")
s.check("auto: H = 1 a constant, its own compile", sess.compile_count() == 5, str(sess.compile_count()))

ex = harp.InferenceSession(path, dict(opts, shapesets="exact"))
for h, w in inside[:3]:
    check(ex, h, w, "exact")
s.check("exact: one compile per feed shape", ex.compile_count() == 3, str(ex.compile_count()))
s.check("exact: no ShapeSet object", ex.shapeset_objects() == (0, 0, None), str(ex.shapeset_objects()))

# a model whose import needs its size as a number (Sqrt of a size cast to float): the first shape compiles
# alone, the box (at the second shape, 6: the same bucket) fails at import, that feed and every later one
# compile alone (no second box tried), saying why
nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Gather", ["s", "zero"], ["n"]),
         helper.make_node("Cast", ["n"], ["f"], to=TensorProto.FLOAT), helper.make_node("Sqrt", ["f"], ["r"]),
         helper.make_node("Mul", ["x", "r"], ["y"])]
g2 = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"])],
                       [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                       [numpy_helper.from_array(np.array(0, np.int64), "zero")])
path2 = os.path.join(D, "sqrt_n.onnx")
onnx.save(helper.make_model(g2, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path2)
sq = harp.InferenceSession(path2, opts)
for n in (5, 6, 12):
    x = rng.standard_normal(n).astype(np.float32)
    (y,) = sq.run(None, {"x": x})
    s.check(f"sqrt n={n}: per feed shape, vs numpy", y.shape == (n,) and np.allclose(y, x * np.float32(np.sqrt(n))))
objs = sq.shapeset_objects()
s.check("sqrt: one failed box, then a compile per feed shape", sq.compile_count() == 4, str(sq.compile_count()))
s.check("sqrt: three objects, why", objs[0] == 3 and objs[1] is None and "needs as a number" in str(objs[2]), str(objs))

# harp.h's own default (shapesets {"auto"}: the tier kept in the cache's record, api_autobox.c), through the
# extension: the sqrt model at n = 5 alone, at n = 6 the box, which fails at import (recorded "failed"), so that
# binding compiles alone, and n = 7 alone without trying the box again; the convnet at 20 x 24 alone, 24 x 20 the box
# (the one the session compiled, from the cache)
import glob  # noqa: E402

from harp import _harp  # noqa: E402

lib_cache = opts["cache_dir"]  # the sessions' objects above: the box and most bindings come from there


def lib_compile(p, shape):
    return _harp.compile(p, "onnx", os.path.basename(p), "cpu", [shape], [], [], [], "", lib_cache, "", 0, None,
                         ["auto"], False)


def records():
    return sorted(open(f).read() for f in glob.glob(os.path.join(lib_cache, "autobox", "*")))


objs = [lib_compile(path2, f"x={n}").shapeset_objects() for n in (5, 6, 7)]
s.check("harp.h auto, sqrt: three exact objects (the box failed)", objs == [(0, 0, None)] * 3, str(objs))
rec = records()
s.check("harp.h auto, sqrt: the bucket recorded as failed, why", len(rec) == 1 and rec[0].startswith("failed: ")
        and "needs" in rec[0] and "as a number" in rec[0], str(rec))
first = lib_compile(path, "x=1x3x20x24").shapeset_objects()
box = lib_compile(path, "x=1x3x24x20").shapeset_objects()
s.check("harp.h auto, convnet: 20 x 24 alone, then 24 x 20 the box (the session's)", first == (0, 0, None) and
        box == (1, 0, None),
        f"{first} {box}")

try:
    harp.InferenceSession(path, opts, shapesets="sometimes")
    s.check("shapesets='sometimes': refused", False)
except harp.HarpError as e:
    s.check("shapesets='sometimes': UsageError", isinstance(e, harp.UsageError) and "exact" in str(e), repr(e))

# one-point boxes (H = 20..20, W = 24..24): one object for that binding, run there; another size refused
one = harp.InferenceSession(path, opts, shapesets={"H": (20, 20), "W": (24, 24)})
check(one, 20, 24, "one-point box")
s.check("one-point box: one object", one.shapeset_objects()[0] == 1, str(one.shapeset_objects()))
try:
    one.run(None, feed(21, 24))
    s.check("one-point box: 21 x 24 refused", False)
except harp.HarpError as e:
    s.check("one-point box: 21 x 24 InputMismatch", isinstance(e, harp.InputMismatch), repr(e))

# the CPU detector of an OCR service, where the corpus has it: one bucket, one compile
det = os.path.join(os.path.expanduser("~/.cache/harp/realmodels/models"), "ppocr_v4_det.onnx")
if os.environ.get("HARP_TEST_SLOW") and os.path.exists(det):
    dref = ort.InferenceSession(det, providers=["CPUExecutionProvider"])
    ds = harp.InferenceSession(det, opts)
    for h, w in ((320, 320), (352, 480), (480, 384)):
        x = {"x": rng.random((1, 3, h, w), dtype=np.float32)}
        (y,) = ds.run(None, x)
        want = dref.run(None, x)[0]
        s.check(f"det {h}x{w}: vs onnxruntime", y.shape == want.shape and np.abs(y - want).max() < 1e-3,
                f"{y.shape} {np.abs(y - want).max() if y.shape == want.shape else ''}")
    s.check("det: two compiles for three sizes (the first alone, then the box)", ds.compile_count() == 2,
            str(ds.compile_count()))
s.close()
