"""The ONNX ops the backend test models (onnx/backend/test/data) brought in,
each a tiny graph run (ht.run_model) and compared with onnxruntime (numpy
for opset 6, which onnxruntime no longer reads): LRN, AveragePool with
count_include_pad=0 and ceil_mode windows, 1-D Conv and pooling, Mean,
Dropout's mask, Softmax / LogSoftmax before opset 13 on a middle axis, the
activations (LeakyRelu, Elu, Selu, PRelu, Softplus, Sign), a ConstantOfShape
weight above 2^24 elements, opset 6's broadcast attribute, and the fold of
a BatchNormalization into the Conv before it (and where it must not fold)."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import harp_test as ht  # noqa: E402

ht.onnx_or_skip()
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
from onnx_models import init, mk, model, vi  # noqa: E402

rng = np.random.default_rng(2)
S = ht.Suite("onnx_layers")


def rand(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def case(name, nodes, inputs, inits=(), opset=17, backends=("interp",), want=None, outputs=("y",)):
    m = model(nodes, [vi(k, v.shape, onnx.helper.np_dtype_to_tensor_dtype(v.dtype)) for k, v in inputs.items()],
              [vi(o, None) for o in outputs], [init(k, v) for k, v in dict(inits).items()], opset=opset)
    path = os.path.join(ht.tempfile.mkdtemp(), "m.onnx")
    onnx.save(m, path)
    if want is None:
        want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, inputs)
    for be in backends:
        outs, err = ht.run_model(path, inputs, backend=be)
        S.check(f"{name} {be}: runs", err is None, (err or "")[-600:])
        if err is None:
            for o, w in zip(outputs, want):
                got = outs[o]
                ok, why = ht.close(got, w, rtol=1e-4, atol=1e-5)
                S.check(f"{name} {be}: {o} matches", ok, why)


x4 = rand(2, 7, 9, 9)
both = ("interp", "cpu")
case("LRN", [mk("LRN", ["x"], ["y"], size=5, alpha=1e-2, beta=0.75, bias=1.0)], {"x": x4}, backends=both)


def lrn(x, size, alpha, beta, bias):
    """The ONNX definition: channels c - floor((size-1)/2) .. c + ceil((size-1)/2)."""
    sq, C = x.astype(np.float64) ** 2, x.shape[1]
    s = np.stack([sq[:, max(0, c - (size - 1) // 2):min(C, c + size // 2 + 1)].sum(1) for c in range(C)], 1)
    return (x / (bias + alpha / size * s) ** beta).astype(np.float32)


xl = rand(1, 6, 3, 5)  # onnxruntime takes odd sizes only
case("LRN even size", [mk("LRN", ["x"], ["y"], size=4, alpha=0.3, beta=0.5, bias=2.0)], {"x": xl},
     want=[lrn(xl, 4, 0.3, 0.5, 2.0)])
for cip in (0, 1):
    case(f"AveragePool pads count_include_pad={cip}",
         [mk("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], count_include_pad=cip)],
         {"x": x4}, backends=both)
    case(f"AveragePool ceil_mode count_include_pad={cip}",
         [mk("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], pads=[0, 1, 1, 0], ceil_mode=1,
             count_include_pad=cip)], {"x": rand(1, 2, 8, 8)})
case("AveragePool 1-D", [mk("AveragePool", ["x"], ["y"], kernel_shape=[3], strides=[2], pads=[1, 1])], {"x": rand(2, 3, 10)})
case("MaxPool 1-D", [mk("MaxPool", ["x"], ["y"], kernel_shape=[2], strides=[1])], {"x": rand(2, 3, 10)})
case("Conv 1-D", [mk("Conv", ["x", "w", "b"], ["y"], strides=[2], pads=[1, 2], dilations=[2])], {"x": rand(2, 4, 17)},
     {"w": rand(6, 4, 3), "b": rand(6)}, backends=both)
case("Conv 1-D groups", [mk("Conv", ["x", "w"], ["y"], group=2)], {"x": rand(1, 4, 9)}, {"w": rand(6, 2, 2)})
case("Mean of three", [mk("Mean", ["x", "a", "b"], ["y"])], {"x": rand(3, 4)}, {"a": rand(3, 4), "b": rand(4)})
xd = rand(3, 4)
case("Dropout mask", [mk("Dropout", ["x"], ["y", "mask"])], {"x": xd}, outputs=("y", "mask"), want=[xd, np.ones((3, 4), bool)])
case("Softmax opset 11 axis 1", [mk("Softmax", ["x"], ["y"], axis=1)], {"x": rand(2, 3, 4)}, opset=11, backends=both)
case("LogSoftmax opset 11 axis 1", [mk("LogSoftmax", ["x"], ["y"], axis=1)], {"x": rand(2, 3, 4) * 30}, opset=11)
case("LogSoftmax", [mk("LogSoftmax", ["x"], ["y"])], {"x": rand(2, 3, 4) * 30}, backends=both)
xa = rand(3, 4, 5) * 3
for op, attrs in (("LeakyRelu", {"alpha": 0.2}), ("Elu", {"alpha": 1.5}), ("Selu", {}), ("Softplus", {}), ("Sign", {})):
    case(op, [mk(op, ["x"], ["y"], **attrs)], {"x": np.concatenate([xa, np.zeros((1, 4, 5), np.float32), xa * 30])},
         backends=both)
case("PRelu", [mk("PRelu", ["x", "s"], ["y"])], {"x": xa}, {"s": rand(4, 1)})
for mode in ("edge", "reflect"):
    case(f"Pad {mode}", [mk("Pad", ["x", "p"], ["y"], mode=mode)], {"x": rand(2, 3, 5, 6)},
         {"p": np.array([0, 1, 2, 0, 0, 0, 3, 4], np.int64)}, backends=both)
case("InstanceNormalization", [mk("InstanceNormalization", ["x", "s", "b"], ["y"], epsilon=1e-3)], {"x": rand(2, 3, 5, 6)},
     {"s": rand(3), "b": rand(3)}, backends=both)
case("Shrink", [mk("Shrink", ["x"], ["y"], lambd=0.7, bias=0.2)], {"x": rand(4, 5)})
# opset 6: a slope per channel, and Add's broadcast=1 axis=1 (B's dims at A's dims 1, 2, ...)
x6, s6 = rand(2, 3, 4, 5), rand(3)
case("PRelu opset 6", [mk("PRelu", ["x", "s"], ["y"])], {"x": x6}, {"s": s6}, opset=6,
     want=[np.where(x6 < 0, x6 * s6[:, None, None], x6)])
case("Add opset 6 broadcast axis", [mk("Add", ["x", "b"], ["y"], broadcast=1, axis=1)], {"x": x6}, {"b": s6}, opset=6,
     want=[x6 + s6[:, None, None]])
# BatchNormalization after a Conv folds into the Conv's weight and bias when
# the Conv's output, weight and bias have no other reader; else it stays.
def bn_params(C):
    return {"s": rng.uniform(0.5, 1.5, C).astype(np.float32), "bb": rand(C), "mu": rand(C),
            "var": rng.uniform(0.5, 1.5, C).astype(np.float32)}


def frontend_names(nodes, inputs, inits):
    m = model(nodes, [vi(k, v.shape) for k, v in inputs.items()], [vi("y", None)], [init(k, v) for k, v in inits.items()])
    path, d = os.path.join(ht.tempfile.mkdtemp(), "m.onnx"), ht.tempfile.mkdtemp()
    onnx.save(m, path)
    ht.subprocess.run([ht.HARP, "dump", path, "--dump", "frontend", "--dump-dir", d], capture_output=True)
    with open(os.path.join(d, "frontend.json")) as f:
        return f.read()


xb, bn = rand(1, 4, 6, 6), mk("BatchNormalization", ["c", "s", "bb", "mu", "var"], ["n"], epsilon=1e-3)
for bias in (True, False):
    nodes = [mk("Conv", ["x", "w", "b"] if bias else ["x", "w"], ["c"], pads=[1, 1, 1, 1]), bn, mk("Relu", ["n"], ["y"])]
    inits = {"w": rand(5, 4, 3, 3), **({"b": rand(5)} if bias else {}), **bn_params(5)}
    case(f"Conv BatchNormalization bias={bias}", nodes, {"x": xb}, inits, backends=both)
    fe = frontend_names(nodes, {"x": xb}, inits)
    S.check(f"Conv BatchNormalization bias={bias}: folded", "bn_w" in fe and "bn_b" in fe and "bn_scale" not in fe, fe[:300])
# the Conv's output read twice: no fold
nodes = [mk("Conv", ["x", "w"], ["c"]), bn, mk("Add", ["n", "c"], ["y"])]
inits = {"w": rand(5, 4, 1, 1), **bn_params(5)}
case("Conv BatchNormalization, conv read twice", nodes, {"x": xb}, inits)
S.check("Conv read twice: not folded", "bn_scale" in frontend_names(nodes, {"x": xb}, inits), "")
# the weight shared by two Convs: no fold
nodes = [mk("Conv", ["x", "w"], ["c"]), bn, mk("Conv", ["x", "w"], ["c2"]), mk("Add", ["n", "c2"], ["y"])]
case("Conv BatchNormalization, weight shared", nodes, {"x": xb}, inits)
S.check("weight shared: not folded", "bn_scale" in frontend_names(nodes, {"x": xb}, inits), "")
# a ConstantOfShape weight above the old 2^24-element limit, summed
# MeanVarianceNormalization: default axes (0, 2, 3) and explicit ones
case("MeanVarianceNormalization", [mk("MeanVarianceNormalization", ["x"], ["y"])], {"x": x4}, opset=13, backends=both)
case("MeanVarianceNormalization axes", [mk("MeanVarianceNormalization", ["x"], ["y"], axes=[1, -1])], {"x": x4}, opset=13)
# CausalConvWithState (opset 27): past state, bias, SiLU, both outputs, against onnx's reference
from onnx.reference import ReferenceEvaluator  # noqa: E402

cx, cw, cb, cp = rand(2, 5, 7), rand(5, 1, 4), rand(5), rand(2, 5, 3)
for name, ins, kw in (("past, bias, silu", ["x", "w", "b", "p"], {"activation": "silu"}), ("no past", ["x", "w"], {})):
    feeds = {k: v for k, v in {"x": cx, "w": cw, "b": cb, "p": cp}.items() if k in ins}
    mc = model([mk("CausalConvWithState", ins, ["y", "st"], **kw)], [vi(k, v.shape) for k, v in feeds.items()],
               [vi("y", None), vi("st", None)], [], opset=27)
    case(f"CausalConvWithState {name}", [mk("CausalConvWithState", ins, ["y", "st"], **kw)], feeds, opset=27, backends=both,
         want=ReferenceEvaluator(mc).run(None, feeds), outputs=("y", "st"))
n = (1 << 24) + 3
case("ConstantOfShape 2^24+3", [mk("ConstantOfShape", ["shp"], ["c"], value=onnx.helper.make_tensor("v", 1, [1], [0.5])),
                                mk("ReduceSum", ["c"], ["s"], keepdims=0), mk("Add", ["x", "s"], ["y"])],
     {"x": rand(2)}, {"shp": np.array([n], np.int64)}, opset=11, want=None)
S.close()
