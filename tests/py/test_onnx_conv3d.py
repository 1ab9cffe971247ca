"""3-D Conv, ConvTranspose (3-D and 1-D) and pooling (src/frontend/onnx_conv3d.c)
against onnxruntime on the interpreter and the cpu backend: strides,
dilations, pads and auto_pad, groups, bias and a folded BatchNormalization;
output_padding and output_shape; MaxPool / AveragePool / LpPool with
ceil_mode, count_include_pad and dilations.  Several nodes share a model so
that the cpu backend compiles a few models."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import harp_test as ht  # noqa: E402

ht.onnx_or_skip()
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
from onnx import TensorProto  # noqa: E402
from onnx_models import init, mk, model, vi  # noqa: E402

rng = np.random.default_rng(3)
ort.set_default_logger_severity(3)
S = ht.Suite("onnx_conv3d")
BACKENDS = [b for b in ("interp", "cpu") if b in ht.BACKENDS]


def rand(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def check(name, nodes, x, outs, inits=(), opset=17, rtol=1e-4, atol=1e-4):
    m = model(nodes, [vi("x", x.shape)], [vi(o, None) for o in outs], [init(k, v) for k, v in dict(inits).items()], opset)
    path = os.path.join(ht.tempfile.mkdtemp(), "m.onnx")
    onnx.save(m, path)
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x})
    for be in BACKENDS:
        got, err = ht.run_model(path, {"x": x}, backend=be)
        S.check(f"{name} {be}: runs", err is None, (err or "")[-600:])
        if err:
            continue
        for o, w in zip(outs, want):
            ok, why = ht.close(got[o], w, rtol=rtol, atol=atol)
            S.check(f"{name} {be} {o}: matches onnxruntime", ok, why)


# ---- Conv ----------------------------------------------------------------------------------------
x = rand(2, 4, 7, 9, 8)
convs = [("plain", dict(), (6, 4, 3, 3, 3)), ("strided, padded", dict(strides=[2, 1, 2], pads=[1, 0, 2, 1, 1, 0]), (5, 4, 3, 2, 3)),
         ("dilated", dict(dilations=[2, 2, 1], pads=[2, 1, 1, 2, 1, 1]), (3, 4, 3, 3, 2)),
         ("groups", dict(group=2, strides=[1, 2, 1]), (6, 2, 2, 3, 3)), ("depthwise", dict(group=4, pads=[1, 1, 1, 1, 1, 1]), (4, 1, 3, 3, 3)),
         ("SAME_UPPER", dict(auto_pad="SAME_UPPER", strides=[2, 2, 2]), (4, 4, 3, 3, 3)),
         ("SAME_LOWER", dict(auto_pad="SAME_LOWER", strides=[1, 2, 3]), (4, 4, 2, 3, 4)), ("1x1x1", dict(), (8, 4, 1, 1, 1))]
nodes, inits, outs = [], {}, []
for i, (label, kw, ws) in enumerate(convs):
    inits[f"w{i}"] = rand(*ws) * 0.3
    if i % 2:
        inits[f"b{i}"] = rand(ws[0])
    nodes.append(mk("Conv", ["x", f"w{i}", f"b{i}"] if i % 2 else ["x", f"w{i}"], [f"c{i}"], **kw))
    outs.append(f"c{i}")
check("Conv 3-D (" + ", ".join(lb for lb, _, _ in convs) + ")", nodes, x, outs, inits)
bn = {"w": rand(6, 4, 3, 3, 3) * 0.3, "s": rand(6), "bb": rand(6), "m": rand(6), "v": np.abs(rand(6)) + 0.5}
check("Conv 3-D + BatchNormalization (folded) + Relu",
      [mk("Conv", ["x", "w"], ["c"], pads=[1] * 6), mk("BatchNormalization", ["c", "s", "bb", "m", "v"], ["n"]), mk("Relu", ["n"], ["y"])],
      x, ["y"], bn)

# ---- ConvTranspose -------------------------------------------------------------------------------
xt = rand(1, 4, 3, 4, 5)
cts = [("plain", dict(), (4, 3, 3, 3, 3)), ("strided", dict(strides=[2, 2, 1], pads=[1, 0, 1, 0, 1, 0]), (4, 2, 3, 2, 3)),
       ("output_padding", dict(strides=[2, 3, 2], output_padding=[1, 2, 0]), (4, 3, 2, 3, 2)),
       ("groups, dilated", dict(group=2, dilations=[1, 2, 1]), (4, 2, 2, 2, 2)),
       ("output_shape", dict(strides=[2, 2, 2], output_shape=[6, 8, 9]), (4, 2, 2, 2, 2))]
nodes, inits, outs = [], {}, []
for i, (label, kw, ws) in enumerate(cts):
    inits[f"w{i}"] = rand(*ws) * 0.3
    ins = ["x", f"w{i}"]
    if i % 2:
        inits[f"b{i}"] = rand(ws[1] * kw.get("group", 1))
        ins.append(f"b{i}")
    nodes.append(mk("ConvTranspose", ins, [f"t{i}"], **kw))
    outs.append(f"t{i}")
check("ConvTranspose 3-D (" + ", ".join(lb for lb, _, _ in cts) + ")", nodes, xt, outs, inits)
x1 = rand(2, 3, 9)
check("ConvTranspose 1-D", [mk("ConvTranspose", ["x", "w"], ["a"], strides=[3], pads=[1, 2]),
                            mk("ConvTranspose", ["x", "w2", "b2"], ["b"], group=3, output_padding=[1], strides=[2])], x1, ["a", "b"],
      {"w": rand(3, 2, 4), "w2": rand(3, 2, 3), "b2": rand(6)})

# ---- pooling --------------------------------------------------------------------------------------
xp = rand(2, 3, 9, 10, 7)
pools = [("MaxPool", dict(kernel_shape=[3, 3, 3])), ("MaxPool", dict(kernel_shape=[2, 3, 2], strides=[2, 2, 2], pads=[1, 1, 0, 0, 1, 1])),
         ("MaxPool", dict(kernel_shape=[3, 2, 3], strides=[2, 3, 2], ceil_mode=1)),
         ("MaxPool", dict(kernel_shape=[2, 2, 2], dilations=[2, 1, 3])), ("MaxPool", dict(kernel_shape=[3, 3, 3], auto_pad="SAME_UPPER", strides=[2, 2, 2])),
         ("AveragePool", dict(kernel_shape=[3, 3, 3])), ("AveragePool", dict(kernel_shape=[3, 2, 3], pads=[1, 1, 1, 1, 0, 1])),
         ("AveragePool", dict(kernel_shape=[3, 2, 3], pads=[1, 1, 1, 1, 0, 1], count_include_pad=1)),
         ("AveragePool", dict(kernel_shape=[2, 3, 3], strides=[2, 2, 2], ceil_mode=1, pads=[1, 0, 1, 0, 1, 1])),
         ("AveragePool", dict(kernel_shape=[2, 3, 3], strides=[2, 2, 2], ceil_mode=1, count_include_pad=1)),
         ("AveragePool", dict(kernel_shape=[3, 3, 3], auto_pad="SAME_LOWER")),
         ("LpPool", dict(kernel_shape=[2, 2, 2], p=2, strides=[2, 2, 2])), ("LpPool", dict(kernel_shape=[3, 1, 2], p=1, pads=[1, 0, 0, 1, 0, 1]))]
nodes, outs = [], []
for i, (op, kw) in enumerate(pools):
    nodes.append(mk(op, ["x"], [f"p{i}"], **kw))
    outs.append(f"p{i}")
check("pooling 3-D (max, average, Lp; pads, ceil_mode, count_include_pad, dilations, auto_pad)", nodes, xp, outs, opset=18)
xd = rand(1, 2, 10, 9, 11)
check("AveragePool 3-D dilated", [mk("AveragePool", ["x"], ["a"], kernel_shape=[2, 2, 2], dilations=[2, 2, 3], pads=[1, 0, 1, 1, 1, 0]),
                                  mk("AveragePool", ["x"], ["b"], kernel_shape=[2, 3, 2], dilations=[3, 2, 2], count_include_pad=1,
                                     pads=[1, 1, 1, 1, 1, 1], ceil_mode=1, strides=[2, 2, 2])], xd, ["a", "b"], opset=19)


x2 = rand(2, 3, 11, 13)
check("AveragePool 2-D dilated (as 3-D)", [mk("AveragePool", ["x"], ["a"], kernel_shape=[2, 3], dilations=[2, 2], pads=[1, 0, 1, 1]),
                                          mk("AveragePool", ["x"], ["b"], kernel_shape=[3, 2], dilations=[2, 3], strides=[2, 1],
                                             count_include_pad=1, ceil_mode=1, pads=[1, 1, 0, 1])], x2, ["a", "b"], opset=19)

# ---- refusals -------------------------------------------------------------------------------------
def refused(label, m, x, kind, text):
    path = os.path.join(ht.tempfile.mkdtemp(), "m.onnx")
    onnx.save(m, path)
    p, d = ht.run(path, {"x": x})
    S.check(f"{label}: refused", p.returncode == 1 and f"error[{kind}]" in p.stderr and text in p.stderr, p.stderr[-400:])


refused("Conv 3-D, kernel_shape disagreeing", model([mk("Conv", ["x", "w"], ["y"], kernel_shape=[3, 3, 2], name="cv")], [vi("x", [1, 2, 5, 5, 5])],
                                                   [vi("y", None)], [init("w", rand(2, 2, 3, 3, 3))], 17),
        rand(1, 2, 5, 5, 5), "AxisSizeMismatch", 'node 0 "cv" (Conv): kernel_shape')
refused("MaxPool 3-D, strides of 2 values", model([mk("MaxPool", ["x"], ["y"], kernel_shape=[2, 2, 2], strides=[2, 2], name="mp")],
                                                  [vi("x", [1, 2, 5, 5, 5])], [vi("y", None)], [], 17),
        rand(1, 2, 5, 5, 5), "InvalidArgument", "strides must have 3 values")
refused("ConvTranspose 3-D of a run-time weight", model([mk("ConvTranspose", ["x", "w"], ["y"], name="ct")], [vi("x", [1, 2, 3, 3, 3]), vi("w", [2, 2, 2, 2, 2])],
                                                        [vi("y", None)], [], 17),
        rand(1, 2, 3, 3, 3), "Unsupported", "float32 constant of rank 5")
S.close()
