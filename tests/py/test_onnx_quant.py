"""int8 / uint8 tensors and the ONNX quantization ops against onnxruntime:
handmade edge cases (saturation, zero points at the ends of the range,
per-channel scales, halves that round to even, odd sizes), the com.microsoft
QLinearAdd / QLinearMul, bad quantization parameters (a clear error naming
the node and no output file), and a small CNN quantized by onnxruntime's own
quantize_static (QDQ, per-channel, random calibration): harp's outputs within
one step of the output scale of onnxruntime's int8 run on >= 99.9% of
elements (harp fuses DQ -> Conv / Gemm / Add -> Q as onnxruntime does and
computes what its int8 kernels compute: onnx_qdq.c).  Runs on the interpreter and the cpu backend (HARP_TEST_BACKENDS).
"""
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import harp_test as ht  # noqa: E402

ht.onnx_or_skip()
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
from onnx import TensorProto as T  # noqa: E402
from onnx import helper as h  # noqa: E402
from onnx import numpy_helper as nh  # noqa: E402

S = ht.Suite("onnx_quant")
ht.compiled_only()  # the compiled C's numbers, not tier 0's (harp run answers its first run from tier 0)
# The kernels at -O1 (the knob cc_opt): this test checks what they compute, not
# their speed, and CI compiles them with a cold cache (-O3: 1.7x the compiler's
# time, bench/RESULTS.md "health3"); the ISA flags and the C are the same.
os.environ.setdefault("HARP_CC_OPT", "1")
# these models are too small for the int8 kernel to pay (contract_q8.c): taken anyway, to test it
Q8_FORCE = ["--knob", "int8=force"]
# the QDQ residual add written as a residual step of the int8 conv's epilogue, its roundings apart (the
# default, qdq_add=exact, computes it as onnxruntime's QLinearAdd does, bit for bit, as the conv's
# epilogue step CT_EPI_RESFMA: src/region/resfma.c)
Q8_FUSED = Q8_FORCE + ["--knob", "qdq_add=fused"]
RNG = np.random.default_rng(7)


def model(nodes, inputs, outputs, inits=(), ms=False, opset=21):
    g = h.make_graph(nodes, "q", inputs, outputs, initializer=list(inits))
    ops = [h.make_opsetid("", opset)] + ([h.make_opsetid("com.microsoft", 1)] if ms else [])
    m = h.make_model(g, opset_imports=ops)
    m.ir_version = 10
    path = os.path.join(tempfile.mkdtemp(), "m.onnx")
    onnx.save(m, path)
    return path


def ort_run(path, feeds):
    s = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in s.get_outputs()], s.run(None, feeds)))


def same(name, path, feeds, exact=True, backends=None):
    """harp on each backend against onnxruntime: equal dtypes and shapes, and
    equal values (exact) or within one unit (quantized results of fp32
    contractions summed in another order)."""
    want = ort_run(path, feeds)
    for be in backends or ht.BACKENDS:
        p, d = ht.run(path, feeds, backend=be)
        S.check(f"{name} ({be}): runs", p.returncode == 0, p.stderr[-800:])
        if p.returncode:
            continue
        for k, w in want.items():
            got = np.load(os.path.join(d, k + ".npy"))
            ok = got.dtype == w.dtype and got.shape == w.shape
            diff = np.abs(got.astype(np.float64) - w.astype(np.float64)) if ok else None
            ok = ok and (np.array_equal(got, w) if exact else diff.max(initial=0) <= 1)
            S.check(f"{name} ({be}): {k} matches onnxruntime", ok,
                    f"{got.dtype}{got.shape} vs {w.dtype}{w.shape}" + (f", max diff {diff.max()}" if diff is not None else ""))


def vi(name, t, shape):
    return h.make_tensor_value_info(name, t, shape)


def init(name, arr):
    return nh.from_array(np.asarray(arr), name)


def test_quantize_edges():
    """Q / DQ per tensor and per axis; zero points at both ends; saturation;
    x/s exactly k + 1/2 (rounds to even); Cast to and from the 8-bit types."""
    x = (RNG.standard_normal((3, 5, 7)) * 4).astype(np.float32)
    x.flat[:8] = np.array([0.5, 1.5, 2.5, -0.5, -1.5, 1e6, -1e6, 0.0], np.float32) * 0.25  # halves of the scale 0.25
    sc = np.array([0.25, 0.5, 0.03, 1.0, 0.0625], np.float32)
    zi = np.array([127, -128, 0, 5, -3], np.int8)
    nodes = [
        h.make_node("QuantizeLinear", ["x", "s", "zu"], ["qu"]),
        h.make_node("QuantizeLinear", ["x", "s", "zi"], ["qi"]),
        h.make_node("QuantizeLinear", ["x", "sc", "zc"], ["qc"], axis=1),
        h.make_node("DequantizeLinear", ["qc", "sc", "zc"], ["dc"], axis=1),
        h.make_node("DequantizeLinear", ["qu", "s", "zu"], ["du"]),
        h.make_node("Cast", ["qi"], ["ci"], to=T.FLOAT),
        h.make_node("Cast", ["qu"], ["cu"], to=T.INT32),
        h.make_node("Cast", ["k"], ["k8"], to=T.INT8),
        h.make_node("Cast", ["k"], ["ku8"], to=T.UINT8),
        h.make_node("Cast", ["k"], ["t8"], to=T.INT8),  # not an output: no int8 buffer between the casts
        h.make_node("Cast", ["t8"], ["k32"], to=T.INT32),  # the wrapped value, not k
        h.make_node("Add", ["ku8", "ku8"], ["k2"]),  # uint8 arithmetic wraps
        h.make_node("Cast", ["kc"], ["kc8"], to=T.INT8),  # a constant: folded at import, wrapped the same
        h.make_node("Cast", ["kc"], ["kcu8"], to=T.UINT8),
    ]
    path = model(nodes, [vi("x", T.FLOAT, x.shape), vi("k", T.INT32, [6])],
                 [vi("qu", T.UINT8, x.shape), vi("qi", T.INT8, x.shape), vi("qc", T.INT8, x.shape), vi("dc", T.FLOAT, x.shape),
                  vi("du", T.FLOAT, x.shape), vi("ci", T.FLOAT, x.shape), vi("cu", T.INT32, x.shape), vi("k8", T.INT8, [6]),
                  vi("ku8", T.UINT8, [6]), vi("k32", T.INT32, [6]), vi("k2", T.UINT8, [6]),
                  vi("kc8", T.INT8, [4]), vi("kcu8", T.UINT8, [4])],
                 [init("s", np.float32(0.25)), init("zu", np.uint8(255)), init("zi", np.int8(-128)), init("sc", sc), init("zc", zi),
                  init("kc", np.array([1, 200, -300, 127], np.int64))])
    same("Q/DQ edges", path, {"x": x, "k": np.array([-129, 128, 255, 256, -1, 1000], np.int32)})


def test_contractions():
    """QLinearConv (u8 x, per-channel s8 w, bias, pads, stride 2, odd
    sizes), QLinearMatMul (odd sizes), MatMulInteger and ConvInteger with
    zero points, against onnxruntime."""
    x = RNG.integers(0, 256, (1, 3, 9, 11), dtype=np.uint8)
    w = RNG.integers(-127, 128, (5, 3, 3, 3), dtype=np.int8)
    ws = (RNG.random(5) * 0.02 + 0.001).astype(np.float32)
    b = RNG.integers(-2000, 2000, 5).astype(np.int32)
    a = RNG.integers(0, 256, (7, 13), dtype=np.uint8)
    bm = RNG.integers(-128, 128, (13, 9), dtype=np.int8)
    nodes = [
        h.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"], ["y"], pads=[1, 1, 1, 1], strides=[2, 2]),
        h.make_node("QLinearMatMul", ["a", "as", "az", "bu", "bs", "bu_z", "ms", "mz"], ["m"]),
        h.make_node("MatMulInteger", ["a", "bm", "az", "bz"], ["mi"]),
        h.make_node("ConvInteger", ["x", "w", "xz", "wz1"], ["ci"], pads=[0, 1, 0, 1]),
    ]
    inits = [init("xs", np.float32(0.02)), init("xz", np.uint8(131)), init("w", w), init("ws", ws), init("wz", np.zeros(5, np.int8)),
             init("ys", np.float32(0.05)), init("yz", np.uint8(3)), init("b", b), init("as", np.float32(0.01)),
             init("az", np.uint8(255)), init("bm", bm), init("bs", np.float32(0.003)), init("bz", np.int8(-128)),
             init("ms", np.float32(0.07)), init("mz", np.uint8(0)), init("bu", bm.view(np.uint8)), init("bu_z", np.uint8(255)), init("wz1", np.int8(3))]
    path = model(nodes, [vi("x", T.UINT8, x.shape), vi("a", T.UINT8, a.shape)],
                 [vi("y", T.UINT8, None), vi("m", T.UINT8, None), vi("mi", T.INT32, None), vi("ci", T.INT32, None)], inits, opset=13)
    same("QLinearConv / QLinearMatMul / *Integer", path, {"x": x, "a": a}, exact=False)


def test_integer_big_k():
    """ConvInteger and MatMulInteger over K = 576 / 600 products of 255 x
    ~128: int32 sums past 2^24, exact (the conv split in two, the matmul in
    int32)."""
    x = RNG.integers(0, 256, (1, 64, 6, 7), dtype=np.uint8)
    w = RNG.choice(np.array([-128, 127], np.int8), (8, 64, 3, 3))
    a = RNG.integers(200, 256, (5, 600), dtype=np.uint8)
    b = RNG.choice(np.array([-128, 127], np.int8), (600, 3))
    nodes = [h.make_node("ConvInteger", ["x", "w", "xz"], ["ci"], pads=[1, 1, 1, 1]),
             h.make_node("MatMulInteger", ["a", "b", "az"], ["mi"])]
    path = model(nodes, [vi("x", T.UINT8, x.shape), vi("a", T.UINT8, a.shape)], [vi("ci", T.INT32, None), vi("mi", T.INT32, None)],
                 [init("w", w), init("xz", np.uint8(0)), init("b", b), init("az", np.uint8(0))], opset=13)
    same("ConvInteger / MatMulInteger, big K", path, {"x": x, "a": a})


def test_matmul_integer_slices():
    """MatMulInteger past K * 255 * 255 >= 2^24 as a transformer's dynamic
    quantization has it: fp32 matmuls of the bf16-held operands over slices
    of K joined in int32, exact where one fp32 sum is not (K = 601 products
    of 255 x 127: an odd sum above 2^24), and a [2, 7, 768] x [768, 9] with
    zero points and odd sizes."""
    a = np.full((3, 601), 255, np.uint8)
    a[1, ::7] = 0
    b = np.full((601, 5), 127, np.int8)
    b[::5, 1] = -128
    x = RNG.integers(0, 256, (2, 7, 768), dtype=np.uint8)
    w = RNG.integers(-128, 128, (768, 9), dtype=np.int8)
    nodes = [h.make_node("MatMulInteger", ["a", "b"], ["y"]), h.make_node("MatMulInteger", ["x", "w", "xz", "wz"], ["z"])]
    path = model(nodes, [vi("a", T.UINT8, a.shape), vi("x", T.UINT8, x.shape)], [vi("y", T.INT32, None), vi("z", T.INT32, None)],
                 [init("b", b), init("w", w), init("xz", np.uint8(3)), init("wz", np.int8(-5))], opset=13)
    S.check("K = 601: the exact sum is odd and above 2^24", int(a[0].astype(np.int64) @ b[:, 0].astype(np.int64)) % 2 == 1
            and int(a[0].astype(np.int64) @ b[:, 0].astype(np.int64)) > 2 ** 24)
    same("MatMulInteger over slices of K", path, {"a": a, "x": x})


def test_qdq_softmax():
    """Q -> DQ -> Softmax -> Q -> DQ over the last axis: onnxruntime's
    QLinearSoftmax (a table of exp, the row's max shifted to its top,
    floor(1 / y_scale)); harp computes the same."""
    x = (RNG.standard_normal((6, 37)) * 3).astype(np.float32)
    nodes = [h.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"]), h.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"]),
             h.make_node("Softmax", ["xd"], ["p"], axis=-1), h.make_node("QuantizeLinear", ["p", "sy", "zy"], ["pq"]),
             h.make_node("DequantizeLinear", ["pq", "sy", "zy"], ["y"])]
    path = model(nodes, [vi("x", T.FLOAT, x.shape)], [vi("y", T.FLOAT, x.shape)],
                 [init("sx", np.float32(0.05)), init("zx", np.uint8(128)), init("sy", np.float32(1 / 250.7)), init("zy", np.uint8(0))],
                 opset=13)
    same("QDQ Softmax", path, {"x": x})


def test_microsoft_binary():
    """com.microsoft QLinearAdd / QLinearMul with broadcasting, and
    DynamicQuantizeLinear."""
    a = RNG.integers(0, 256, (2, 3, 5), dtype=np.uint8)
    b = RNG.integers(0, 256, (5,), dtype=np.uint8)
    f = (RNG.standard_normal((4, 7)) * 3).astype(np.float32)
    nodes = [h.make_node("QLinearAdd", ["a", "sa", "za", "b", "sb", "zb", "sc", "zc"], ["add"], domain="com.microsoft"),
             h.make_node("QLinearMul", ["a", "sa", "za", "b", "sb", "zb", "sc", "zc"], ["mul"], domain="com.microsoft"),
             h.make_node("DynamicQuantizeLinear", ["f"], ["dq", "ds", "dz"])]
    inits = [init("sa", np.float32(0.05)), init("za", np.uint8(128)), init("sb", np.float32(0.11)), init("zb", np.uint8(0)),
             init("sc", np.float32(0.09)), init("zc", np.uint8(250))]
    path = model(nodes, [vi("a", T.UINT8, a.shape), vi("b", T.UINT8, b.shape), vi("f", T.FLOAT, f.shape)],
                 [vi("add", T.UINT8, None), vi("mul", T.UINT8, None), vi("dq", T.UINT8, None), vi("ds", T.FLOAT, None),
                  vi("dz", T.UINT8, None)], inits, ms=True, opset=13)
    same("QLinearAdd / QLinearMul / DynamicQuantizeLinear", path, {"a": a, "b": b, "f": f}, exact=False)


def test_bad_params():
    """Bad scales and zero points: exit 1, an error naming the node, no output."""
    x = np.ones((2, 4), np.float32)
    cases = [("scale 0", np.float32(0), np.uint8(0), {}, "positive"),
             ("scale NaN", np.float32("nan"), np.uint8(0), {}, "positive"),
             ("negative scale", np.float32(-1), np.uint8(0), {}, "positive"),
             ("per-axis scale of the wrong length", np.ones(3, np.float32), np.zeros(3, np.uint8), {"axis": 1}, "per-axis"),
             ("zero point shape differs from the scale's", np.ones(4, np.float32), np.zeros(2, np.uint8), {"axis": 1}, "zero point"),
             ("zero point of another type", np.float32(1), np.int32(0), {}, "int32")]
    for what, s, z, attrs, word in cases:
        nodes = [h.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], name="quant_me", **attrs)]
        path = model(nodes, [vi("x", T.FLOAT, x.shape)], [vi("y", T.UINT8 if z.dtype == np.uint8 else T.INT8, None)],
                     [init("s", s), init("z", z)])
        p, d = ht.run(path, {"x": x}, backend="interp")
        S.check(f"bad Q params, {what}: a clear error", p.returncode == 1 and "quant_me" in p.stderr and word in p.stderr
                and "error[" in p.stderr, p.stderr[-400:])
        S.check(f"bad Q params, {what}: no output file", not os.path.exists(os.path.join(d, "y.npy")))
    a = np.ones((2, 3), np.uint8)
    others = [("DequantizeLinear zero point of another type", [h.make_node("DequantizeLinear", ["a", "s1", "zi"], ["y"], name="quant_me")],
               "zero point"),
              ("QLinearMatMul with y scale 0", [h.make_node("QLinearMatMul", ["a", "s1", "zu", "b", "s1", "zu", "s0", "zu"], ["y"],
                                                             name="quant_me")], "positive"),
              ("blocked scale of the wrong shape", [h.make_node("DequantizeLinear", ["a", "sb", "zb"], ["y"], axis=1, block_size=2,
                                                                name="quant_me")], "blocks")]
    for what, nodes, word in others:
        path = model(nodes, [vi("a", T.UINT8, a.shape)], [vi("y", T.FLOAT if "Deq" in what or "blocked" in what else T.UINT8, None)],
                     [init("s1", np.float32(0.5)), init("s0", np.float32(0)), init("zu", np.uint8(1)), init("zi", np.int8(1)),
                      init("b", np.ones((3, 2), np.uint8)), init("sb", np.ones((2, 3), np.float32)), init("zb", np.ones((2, 3), np.uint8))])
        p, d = ht.run(path, {"a": a}, backend="interp")
        S.check(f"bad params, {what}: a clear error", p.returncode == 1 and "quant_me" in p.stderr and word in p.stderr, p.stderr[-400:])
        S.check(f"bad params, {what}: no output file", not os.path.exists(os.path.join(d, "y.npy")))
    # a Q whose 8-bit output a float op reads without a DequantizeLinear
    x = np.ones((2, 4), np.float32)
    path = model([h.make_node("QuantizeLinear", ["x", "s1", "zu"], ["q"]), h.make_node("Add", ["q", "x"], ["y"], name="quant_me")],
                 [vi("x", T.FLOAT, x.shape)], [vi("y", T.FLOAT, None)], [init("s1", np.float32(0.5)), init("zu", np.uint8(1))])
    p, d = ht.run(path, {"x": x}, backend="interp")
    S.check("a Q with no DQ before a float op: a clear error", p.returncode == 1 and "quant_me" in p.stderr and "u8" in p.stderr,
            p.stderr[-400:])
    S.check("a Q with no DQ before a float op: no output file", not os.path.exists(os.path.join(d, "y.npy")))


def small_cnn():
    """A float CNN (conv 3x3 + relu, depthwise 3x3, conv 1x1, a residual Add,
    max pool, global average pool, Gemm) with random weights."""
    def w(*shape, k=0.3):
        return (RNG.standard_normal(shape) * k).astype(np.float32)
    nodes = [h.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]), h.make_node("Relu", ["c1"], ["r1"]),
             h.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], group=8, strides=[2, 2]),
             h.make_node("Relu", ["c2"], ["r2"]), h.make_node("Conv", ["r2", "w3", "b3"], ["c3"]),
             h.make_node("Add", ["c3", "r2"], ["c4"]),
             h.make_node("MaxPool", ["c4"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             h.make_node("GlobalAveragePool", ["p"], ["g"]), h.make_node("Flatten", ["g"], ["f"]),
             h.make_node("Gemm", ["f", "wf", "bf"], ["y"], transB=1)]
    inits = [init("w1", w(8, 3, 3, 3)), init("b1", w(8)), init("w2", w(8, 1, 3, 3)), init("b2", w(8)), init("w3", w(8, 8, 1, 1)),
             init("b3", w(8)), init("wf", w(10, 8)), init("bf", w(10))]
    return model(nodes, [vi("x", T.FLOAT, [1, 3, 33, 33])], [vi("y", T.FLOAT, [1, 10]), vi("c4", T.FLOAT, [1, 8, 17, 17])], inits, opset=13)


def test_qdq_model():
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.data = iter([{"x": RNG.standard_normal((1, 3, 33, 33)).astype(np.float32)} for _ in range(8)])

        def get_next(self):
            return next(self.data, None)

    fp32 = small_cnn()
    qdq = os.path.join(os.path.dirname(fp32), "qdq.onnx")
    quantize_static(fp32, qdq, Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    m = onnx.load(qdq)
    inits = {i.name: nh.to_array(i) for i in m.graph.initializer}
    steps = {}
    for out in ("y", "c4"):
        last = [n for n in m.graph.node if n.output[0] == out][0]
        steps[out] = float(inits[last.input[1]]) if last.op_type == "DequantizeLinear" else None
        S.check(f"QDQ model: {out} comes from a DequantizeLinear", steps[out] is not None, last.op_type)
    xs = [RNG.standard_normal((1, 3, 33, 33)).astype(np.float32) for _ in range(4)]
    want = [ort_run(qdq, {"x": x}) for x in xs]
    for be in ht.BACKENDS:
        got = []
        for x in xs:
            p, d = ht.run(qdq, {"x": x}, backend=be)
            S.check(f"QDQ model ({be}): runs", p.returncode == 0, p.stderr[-600:])
            if p.returncode:
                break
            got.append({k: np.load(os.path.join(d, k + ".npy")) for k in steps})
        if len(got) < len(xs) or None in steps.values():
            continue
        for k, step in steps.items():
            err = np.abs(np.concatenate([g[k] for g in got]) - np.concatenate([w[k] for w in want])) / step
            frac, exact = float(np.mean(err <= 1.0 + 1e-3)), float(np.mean(err <= 1e-3))
            print(f"QDQ model ({be}) {k}: {frac:.4%} of {err.size} within one step, {exact:.4%} equal, max {err.max():.2f} steps")
            S.check(f"QDQ model ({be}) {k}: within one output step of onnxruntime's int8 run on >= 99.9%", frac >= 0.999, f"{frac:.4%}")
            # computed as onnxruntime's int8 kernels compute it, not as the fp32 graph: equal
            S.check(f"QDQ model ({be}) {k}: equal to onnxruntime's int8 run on >= 99.9%", exact >= 0.999, f"{exact:.4%}")


def qdq_check(name, fp32, shape, activation_type=None):
    """fp32 model `fp32` through quant_pre_process and quantize_static (QDQ,
    per-channel; activations uint8 unless activation_type) on the cpu
    backend against onnxruntime's int8 run: within one step of the output
    scale on >= 99.9%, equal on >= 99%."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process
    d = tempfile.mkdtemp()
    raw, pre, qdq = (os.path.join(d, f"{k}.onnx") for k in ("raw", "pre", "qdq"))
    onnx.save(fp32, raw)
    quant_pre_process(raw, pre, skip_symbolic_shape=True)
    rng = np.random.default_rng(0)

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter([{"x": rng.standard_normal(shape).astype(np.float32)} for _ in range(2)])

        def get_next(self):
            return next(self.it, None)

    quantize_static(pre, qdq, Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                    **({"activation_type": activation_type} if activation_type is not None else {}))
    m = onnx.load(qdq)
    inits = {i.name: nh.to_array(i) for i in m.graph.initializer}
    step = float(inits[[n for n in m.graph.node if n.output[0] == "y"][0].input[1]])
    x = rng.standard_normal(shape).astype(np.float32)
    want = ort_run(qdq, {"x": x})["y"]
    p, d = ht.run(qdq, {"x": x}, backend="cpu")
    S.check(f"QDQ {name} (cpu): runs", p.returncode == 0, p.stderr[-600:])
    if p.returncode == 0:
        err = np.abs(np.load(os.path.join(d, "y.npy")) - want) / step
        frac, exact = float(np.mean(err <= 1.0 + 1e-3)), float(np.mean(err <= 1e-3))
        print(f"QDQ {name} (cpu): {frac:.2%} within one step, {exact:.2%} equal, max {err.max():.2f} steps")
        S.check(f"QDQ {name} (cpu): within one step of onnxruntime's int8 run on >= 99.9%", frac >= 0.999, f"{frac:.2%}")
        S.check(f"QDQ {name} (cpu): equal to onnxruntime's int8 run on >= 99%", exact >= 0.99, f"{exact:.2%}")


def test_qdq_mobilenetv2():
    """MobileNetV2 1.0 at 64x64 (bench/e2e.py's weights): 53 layers deep, so
    that computing the QDQ graph in fp32 instead of as onnxruntime's int8
    kernels do shows (80% of the logits within one step, 35% equal, without
    the fusion).  On the cpu backend only (the interpreter takes long)."""
    if "cpu" not in ht.BACKENDS:
        return
    sys.path.insert(0, os.path.join(ht.SRC, "bench"))
    import e2e
    import onnx_models as om
    qdq_check("MobileNetV2", om.mobilenetv2(e2e.mobilenetv2_weights(), e2e.mobilenetv2_blocks(), hw=64), (1, 3, 64, 64))


def test_qdq_bert():
    """A BERT encoder layer (s64, E128, 4 heads; bench/e2e.py's weights) with
    int8 activations: QGemm with an fp32 bias, QLinearMatMul of two
    activations, QLinearMul, QLinearSoftmax, QLinearAdd (67% of the outputs
    equal and 97.4% within a step before the Softmax was emulated)."""
    if "cpu" not in ht.BACKENDS:
        return
    sys.path.insert(0, os.path.join(ht.SRC, "bench"))
    import e2e
    import onnx_models as om
    from onnxruntime.quantization import QuantType
    c = e2e.case_bert(1, 64, 128, 4, 256)
    fp32 = om.bert({k: v for k, (kind, v) in c["tensors"].items() if kind == "param"}, 1, 64, 128, 4, 256, gelu_op=True)
    qdq_check("BERT layer", fp32, (1, 64, 128), QuantType.QInt8)


def test_round_epilogue():
    """Round after a MatMul and a Conv: the templates' round-to-integer
    epilogue step (halves to even), as requantization uses it."""
    a = (RNG.integers(-8, 8, (16, 24)) * 0.5).astype(np.float32)
    b = RNG.integers(-3, 4, (24, 32)).astype(np.float32)
    x = (RNG.integers(-8, 8, (1, 8, 9, 9)) * 0.5).astype(np.float32)
    w = RNG.integers(-2, 3, (16, 8, 3, 3)).astype(np.float32)
    nodes = [h.make_node("MatMul", ["a", "b"], ["m"]), h.make_node("Mul", ["m", "half"], ["mh"]), h.make_node("Round", ["mh"], ["y"]),
             h.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), h.make_node("Mul", ["c", "half"], ["ch"]),
             h.make_node("Round", ["ch"], ["z"])]
    path = model(nodes, [vi("a", T.FLOAT, a.shape), vi("x", T.FLOAT, x.shape)], [vi("y", T.FLOAT, None), vi("z", T.FLOAT, None)],
                 [init("b", b), init("w", w), init("half", np.float32(0.5))], opset=13)
    same("Round after MatMul / Conv", path, {"a": a, "x": x})


def qdq_edges_model(zx):
    """DQ -> Conv (3x3, pads, per-channel int8 weights at -128 / 127 among
    others, int32 bias) -> Q, DQ -> MatMul (odd sizes, per-column weights) ->
    Q and DQ -> Gemm (transB, bias) -> Q, each output DQ'd; uint8 activations
    with zero point zx, half of them saturated at 0 or 255: |q - zx| reaches
    255.  Returns the path and the feeds."""
    x = (RNG.standard_normal((1, 32, 9, 11)) * 3).astype(np.float32)
    x[:, ::2] = RNG.choice(np.array([-1e3, 1e3], np.float32), x[:, ::2].shape)
    a = (RNG.standard_normal((23, 40)) * 3).astype(np.float32)
    a[::3] = RNG.choice(np.array([-1e3, 1e3], np.float32), a[::3].shape)
    w = RNG.integers(-128, 128, (16, 32, 3, 3), dtype=np.int8)
    w[:, :4] = RNG.choice(np.array([-128, 127], np.int8), w[:, :4].shape)
    wm = RNG.integers(-128, 128, (40, 19), dtype=np.int8)
    wg = RNG.integers(-128, 128, (13, 40), dtype=np.int8)
    sx, ws, wms, wgs = np.float32(0.02), (RNG.random(16) * 0.01 + 0.001).astype(np.float32), \
        (RNG.random(19) * 0.01 + 0.001).astype(np.float32), (RNG.random(13) * 0.01 + 0.001).astype(np.float32)
    b = RNG.integers(-300000, 300000, 16).astype(np.int32)
    bg = RNG.integers(-300000, 300000, 13).astype(np.int32)
    # output scales that spread the results over the 8 bits (~40 steps per sigma)
    sy, sm, sg = np.float32(3.0), np.float32(1.0), np.float32(1.0)

    def q(v, s, z):
        return h.make_node("QuantizeLinear", [v, s, z], [v + "_q"])

    def dq(v, s, z, ax=None):
        return h.make_node("DequantizeLinear", [v, s, z], [v + "_d"], **({"axis": ax} if ax is not None else {}))
    nodes = [q("x", "sx", "zx"), dq("x_q", "sx", "zx"), dq("w", "ws", "wz", 0), dq("b", "bs", "bz", 0),
             h.make_node("Conv", ["x_q_d", "w_d", "b_d"], ["c"], pads=[1, 1, 1, 1]), q("c", "sy", "zy"), dq("c_q", "sy", "zy"),
             q("a", "sx", "zx"), dq("a_q", "sx", "zx"), dq("wm", "wms", "wmz", 1),
             h.make_node("MatMul", ["a_q_d", "wm_d"], ["m"]), q("m", "sm", "zy"), dq("m_q", "sm", "zy"),
             dq("wg", "wgs", "wgz", 0), dq("bg", "bgs", "bgz", 0),
             h.make_node("Gemm", ["a_q_d", "wg_d", "bg_d"], ["g"], transB=1), q("g", "sg", "zy"), dq("g_q", "sg", "zy")]
    inits = [init("sx", sx), init("zx", np.uint8(zx)), init("w", w), init("ws", ws), init("wz", np.zeros(16, np.int8)),
             init("b", b), init("bs", (sx * ws).astype(np.float32)), init("bz", np.zeros(16, np.int32)),
             init("sy", sy), init("zy", np.uint8(128)), init("wm", wm), init("wms", wms), init("wmz", np.zeros(19, np.int8)),
             init("sm", sm), init("wg", wg), init("wgs", wgs), init("wgz", np.zeros(13, np.int8)), init("bg", bg),
             init("bgs", (sx * wgs).astype(np.float32)), init("bgz", np.zeros(13, np.int32)), init("sg", sg)]
    path = model(nodes, [vi("x", T.FLOAT, x.shape), vi("a", T.FLOAT, a.shape)],
                 [vi("c_q_d", T.FLOAT, None), vi("m_q_d", T.FLOAT, None), vi("g_q_d", T.FLOAT, None)], inits, opset=13)
    return path, {"x": x, "a": a}, {"c_q_d": sy, "m_q_d": sm, "g_q_d": sg}


def test_qdq_range_ends():
    """Fused QDQ Conv / MatMul / Gemm with the activations' zero point at
    either end (|q - z| up to 255), weights at -128 and 127, int32 biases
    past bf16's range: the contractions read their integers in bf16 (exact
    to 256) and equal onnxruntime's int8 run; the generated C multiplies
    them with vdpbf16ps, on the templates (the conv reads the bf16 buffer its
    input's producer wrote); all three run on the int8 VNNI kernel."""
    for zx in (0, 255):
        path, feeds, steps = qdq_edges_model(zx)
        want = ort_run(path, feeds)
        p, d = ht.run(path, feeds, backend="cpu", extra=Q8_FORCE)
        S.check(f"QDQ range ends zx={zx} (cpu): runs", p.returncode == 0, p.stderr[-600:])
        if p.returncode:
            continue
        for k, step in steps.items():
            got = np.load(os.path.join(d, k + ".npy"))
            err = np.abs(got.astype(np.float64) - want[k]) / step
            inside = float(np.mean((want[k] / step > -127) & (want[k] / step < 126)))
            print(f"QDQ range ends zx={zx} {k}: {np.mean(err <= 1e-3):.4%} equal, max {err.max():.2f} steps, {inside:.1%} unsaturated")
            S.check(f"QDQ range ends zx={zx} {k}: outputs not all saturated", inside > 0.5, f"{inside:.1%}")
            S.check(f"QDQ range ends zx={zx} {k}: equal to onnxruntime's int8 run", float(np.mean(err <= 1e-3)) >= 0.999 and err.max() <= 1,
                    f"{np.mean(err <= 1e-3):.4%} equal, max {err.max():.2f} steps")
    out = tempfile.mkdtemp(prefix="harp_py_qc_")
    p = subprocess.run([ht.HARP, "compile", path, "--target", "cpu", "--sources-only", "-o", out, *Q8_FORCE], capture_output=True, text=True,
                       timeout=300)
    S.check("QDQ range ends: harp compile runs", p.returncode == 0, p.stderr[-600:])
    src = "".join(open(os.path.join(r, f)).read() for r, _, fs in os.walk(out) for f in fs if f.endswith(".c"))
    S.check("QDQ range ends: the generated C multiplies with vdpbf16ps", "_mm512_dpbf16_ps" in src, f"{len(src)} bytes of C")
    # the conv, the MatMul and the Gemm (their inputs proven u8 - zx) also on the int8 VNNI kernel
    # (contract_q8.c), which runs unless model_init finds a weight not int8: the equalities above are its results
    q8 = src.count("_q8(pool, bufs);")
    S.check("QDQ range ends: conv, MatMul and Gemm on the int8 kernel (vpdpbusd)", q8 == 3 and "vpdpbusd" in src,
            f"{q8} int8 kernel calls")
    # the conv reads its input from the bf16 buffer its producer wrote: a template, not the generic loops
    generic = [ln for ln in src.splitlines() if ln.startswith("/* generic loops")]
    S.check("QDQ range ends: every contraction on a template", not generic, "; ".join(generic[:3]))


def test_int8_kernel_fallback():
    """QLinearConv of uint8 data by uint8 weights (zero point 0): the
    compiled C also has the int8 kernel (its input proven 8-bit, its weight
    a bf16 param); model_init packs the weight as int8 only when every value
    is an integer of [-128, 127] (weights up to 127), else (up to 255) the
    bf16 template runs.  Both equal to onnxruntime's."""
    x = RNG.integers(0, 256, (2, 16, 10, 9), dtype=np.uint8)
    for name, hi in (("int8 weight", 128), ("weight past int8", 256)):
        w = RNG.integers(0, hi, (24, 16, 3, 3), dtype=np.uint8)
        nodes = [h.make_node("QLinearConv", ["x", "sx", "zx", "w", "sw", "zw", "sy", "zy"], ["y"], pads=[1, 1, 1, 1],
                             strides=[2, 1])]
        path = model(nodes, [vi("x", T.UINT8, x.shape)], [vi("y", T.UINT8, None)],
                     [init("sx", np.float32(0.05)), init("zx", np.uint8(100)), init("w", w), init("sw", np.float32(0.01)),
                      init("zw", np.uint8(0)), init("sy", np.float32(40.0)), init("zy", np.uint8(7))], opset=13)
        want = ort_run(path, {"x": x})["y"]
        p, d = ht.run(path, {"x": x}, backend="cpu", extra=Q8_FORCE)
        S.check(f"int8 kernel fallback, {name}: runs", p.returncode == 0, p.stderr[-600:])
        if p.returncode == 0:
            got = np.load(os.path.join(d, "y.npy"))
            inside = float(np.mean((want > 0) & (want < 255)))
            S.check(f"int8 kernel fallback, {name}: equal to onnxruntime", np.array_equal(got, want) and inside > 0.5,
                    f"{np.mean(got == want):.4%} equal, {inside:.1%} unsaturated")
        out = tempfile.mkdtemp(prefix="harp_py_q8_")
        p = subprocess.run([ht.HARP, "compile", path, "--target", "cpu", "--sources-only", "-o", out, *Q8_FORCE], capture_output=True, text=True,
                           timeout=300)
        src = "".join(open(os.path.join(r, f)).read() for r, _, fs in os.walk(out) for f in fs if f.endswith(".c"))
        S.check(f"int8 kernel fallback, {name}: the C has the int8 kernel", "_q8(pool, bufs);" in src, p.stderr[-300:])


def conv_chain():
    """fp32: y = relu(conv3(conv2(relu(conv1(x)))) + relu(conv1(x))), 3x3 convs
    of 16 channels on 12x12 (conv2's output has no relu: a zero point inside
    the range), as the QDQ file under a temporary directory."""
    rng = np.random.default_rng(11)
    C = 16
    nodes = [h.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]), h.make_node("Relu", ["c1"], ["r1"]),
             h.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
             h.make_node("Conv", ["c2", "w3", "b3"], ["c3"], pads=[1, 1, 1, 1]),
             h.make_node("Add", ["c3", "r1"], ["a"]), h.make_node("Relu", ["a"], ["y"])]
    inits = [init(f"{k}{i}", (rng.standard_normal((C, C, 3, 3) if k == "w" else C) * 0.15).astype(np.float32))
             for i in (1, 2, 3) for k in ("w", "b")]
    fp32 = model(nodes, [vi("x", T.FLOAT, [1, C, 12, 12])], [vi("y", T.FLOAT, [1, C, 12, 12])], inits, opset=13)
    return quantize_random(fp32, (1, C, 12, 12), rng)


def quantize_random(fp32, shape, rng):
    """The fp32 model file `fp32` through quantize_static (QDQ, per-channel,
    uint8 activations, int8 weights; 4 random inputs x of `shape` from rng
    to calibrate), as qdq.onnx beside it."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter([{"x": rng.standard_normal(shape).astype(np.float32)} for _ in range(4)])

        def get_next(self):
            return next(self.it, None)

    qdq = os.path.join(os.path.dirname(fp32), "qdq.onnx")
    quantize_static(fp32, qdq, Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    return qdq


def test_requant_epilogue():
    """A QDQ chain of convs with a residual add on the int8 kernel: the convs
    whose epilogue is a requantization (bias, per-channel multiplier, rint,
    zero point, clamp) have the int8 kernel write the bytes itself
    (contract_q8.c, cgen_qgemm's F_requant), equal to onnxruntime's int8 run;
    a NaN in the input runs the template (as HARP_INT8=off does), not a 0."""
    qdq = conv_chain()
    m = onnx.load(qdq)
    inits = {i.name: nh.to_array(i) for i in m.graph.initializer}
    step = float(inits[[n for n in m.graph.node if n.output[0] == "y"][0].input[1]])
    xs = [RNG.standard_normal((1, 16, 12, 12)).astype(np.float32) for _ in range(2)]
    for i, x in enumerate(xs):
        want = ort_run(qdq, {"x": x})["y"]
        p, d = ht.run(qdq, {"x": x}, backend="cpu", extra=Q8_FORCE)
        S.check(f"requant epilogue, input {i}: runs", p.returncode == 0, p.stderr[-600:])
        if p.returncode == 0:
            err = np.abs(np.load(os.path.join(d, "y.npy")) - want) / step
            exact, inside = float(np.mean(err <= 1e-3)), float(np.mean(want > 0))
            print(f"requant epilogue, input {i}: {exact:.4%} equal, max {err.max():.2f} steps, {inside:.1%} above 0")
            S.check(f"requant epilogue, input {i}: equal to onnxruntime's int8 run", exact >= 0.999 and err.max() <= 1 and inside > 0.3,
                    f"{exact:.4%} equal, max {err.max():.2f} steps, {inside:.1%} above 0")
    out = tempfile.mkdtemp(prefix="harp_py_rq_")
    p = subprocess.run([ht.HARP, "compile", qdq, "--target", "cpu", "--sources-only", "-o", out, *Q8_FORCE], capture_output=True, text=True,
                       timeout=300)
    src = "".join(open(os.path.join(r, f)).read() for r, _, fs in os.walk(out) for f in fs if f.endswith(".c"))
    rq = src.count("its epilogue requantizing to bytes")
    # conv1 (relu: clamp [z, 255]), conv2 (zero point inside) and conv3, whose output the add (with conv1's) and
    # the relu requantize again in the same kernel's output pass
    S.check("requant epilogue: conv1, conv2 and conv3 + the add requantize in the int8 kernel",
            rq == 3 and src.count("a tensor added, requantized again") == 1 and "_requant((char *)wp + 64" in src,
            f"{rq} kernels; {p.stderr[-300:]}")
    # conv2's output, read by conv3 alone, stays bytes between them: conv2's kernel writes them, conv3's reads them;
    # conv1's, read by conv2 and added by conv3's output pass, too (q8_hold.c); and x's, which the input's Q map
    # writes as held bytes (contract_rows_c.c's map_q8_out) for conv1: three held inputs, no input pass, one
    # output pass (conv3's: the add)
    S.check("requant epilogue: x -> conv1, conv1 -> conv2, conv3's add and conv2 -> conv3 held as bytes",
            src.count("held as the output") == 2 and src.count("the input held as u8") == 3 and
            src.count("the tensor added held as bytes") == 1 and held_maps(src) == 1 and
            src.count("_q8in, &cx);") == 0 and src.count("_q8out, &cx);") == 1,
            f"{src.count('held as the output')} held outputs, {src.count('the input held as u8')} held inputs, "
            f"{src.count('the tensor added held as bytes')} held added, {held_maps(src)} held Q maps, "
            f"{src.count('_q8in, &cx);')} input passes, {src.count('_q8out, &cx);')} output passes")
    # a NaN in the input: conv1 runs its template (which propagates it); conv1's output is held as bytes, where
    # a NaN becomes byte 0 (onnxruntime's QuantizeLinear makes q = 0 of it): y has no NaN, as onnxruntime's int8
    # run has none; beyond the NaN's reach (int8=off's NaN), the same as with the int8 kernels off
    x = xs[0].copy()
    x[0, 3, 5, 5] = np.nan
    outs = []
    # the held bytes (int8=off adds in an elementwise kernel, where the NaN stays a NaN)
    for knob in (Q8_FORCE, ["--knob", "int8=off"]):
        p, d = ht.run(qdq, {"x": x}, backend="cpu", extra=knob)
        S.check(f"requant epilogue, NaN input {knob[1]}: runs", p.returncode == 0, p.stderr[-600:])
        outs.append(np.load(os.path.join(d, "y.npy")) if p.returncode == 0 else None)
    if outs[0] is not None and outs[1] is not None:
        got, off = outs
        far = ~np.isnan(off)
        ref = ort_run(qdq, {"x": x})["y"]
        ok = np.isnan(off).any() and not np.isnan(got).any() and not np.isnan(ref).any() and np.array_equal(got[far], off[far])
        S.check("requant epilogue: a NaN input held as byte 0, no NaN in y (as onnxruntime), equal to int8=off beyond its reach", ok,
                f"{int(np.isnan(got).sum())} vs {int(np.isnan(off).sum())} NaN (onnxruntime {int(np.isnan(ref).sum())}), "
                f"{float(np.mean(got[far] == off[far])):.4%} equal beyond")

def held_maps(src):
    """How many map kernels of the generated C `src` store held bytes (a Q's,
    contract_rows_c.c's map_q8_out)."""
    return len(re.findall(r"map \d+ points.*-> u8 \(\+\d+, held\) ----", src))


def compiled_c(path, extra=()):
    """The C `harp compile` makes of `path` for the cpu (all its files), and its stderr."""
    out = tempfile.mkdtemp(prefix="harp_py_c_")
    p = subprocess.run([ht.HARP, "compile", path, "--target", "cpu", "--sources-only", "-o", out, *extra], capture_output=True, text=True,
                       timeout=300)
    return "".join(open(os.path.join(r, f)).read() for r, _, fs in os.walk(out) for f in fs if f.endswith(".c")), p.stderr


def test_q8_depthwise():
    """DQ -> depthwise Conv -> Q on the int8 depthwise kernel
    (contract_q8dw.c): 13 channels of odd sizes, per-channel int8 weights
    with -128 / 127 among them, int32 biases, the input's zero point at 0,
    255 and inside, strides 1 and 2, asymmetric pads, a 5x5 dilated window;
    equal to onnxruntime's int8 run (its QLinearConv)."""
    cases = [(0, 1, [1, 1, 1, 1], 3, 1), (255, 2, [0, 1, 2, 1], 3, 1), (77, 2, [4, 3, 4, 3], 5, 2), (128, 2, [1, 0, 1, 2], 3, 1)]
    for zx, st, pads, k, dil in cases:
        C = 13
        x = (RNG.standard_normal((2, C, 15, 11)) * 3).astype(np.float32)
        x[:, ::3] = RNG.choice(np.array([-1e3, 1e3], np.float32), x[:, ::3].shape)
        w = RNG.integers(-128, 128, (C, 1, k, k), dtype=np.int8)
        w[::2, :, 0] = RNG.choice(np.array([-128, 127], np.int8), w[::2, :, 0].shape)
        ws = (RNG.random(C) * 0.01 + 0.001).astype(np.float32)
        sx, sy = np.float32(0.02), np.float32(1.5)
        nodes = [h.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"]), h.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"]),
                 h.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"], axis=0),
                 h.make_node("DequantizeLinear", ["b", "bs", "bz"], ["bd"], axis=0),
                 h.make_node("Conv", ["xd", "wd", "bd"], ["c"], group=C, strides=[st, st], pads=pads, dilations=[dil, dil]),
                 h.make_node("QuantizeLinear", ["c", "sy", "zy"], ["cq"]), h.make_node("DequantizeLinear", ["cq", "sy", "zy"], ["y"])]
        inits = [init("sx", sx), init("zx", np.uint8(zx)), init("w", w), init("ws", ws), init("wz", np.zeros(C, np.int8)),
                 init("b", RNG.integers(-30000, 30000, C).astype(np.int32)), init("bs", (sx * ws).astype(np.float32)),
                 init("bz", np.zeros(C, np.int32)), init("sy", sy), init("zy", np.uint8(120))]
        path = model(nodes, [vi("x", T.FLOAT, x.shape)], [vi("y", T.FLOAT, None)], inits, opset=13)
        name = f"int8 depthwise zx={zx} stride {st} {k}x{k} dil {dil}"
        want = ort_run(path, {"x": x})["y"]
        p, d = ht.run(path, {"x": x}, backend="cpu")
        S.check(f"{name}: runs", p.returncode == 0, p.stderr[-600:])
        if p.returncode == 0:
            got = np.load(os.path.join(d, "y.npy"))
            err = np.abs(got.astype(np.float64) - want) / sy
            inside = float(np.mean((want / sy > -119) & (want / sy < 134)))
            print(f"{name}: {np.mean(err <= 1e-3):.4%} equal, max {err.max():.2f} steps, {inside:.1%} unsaturated")
            S.check(f"{name}: equal to onnxruntime's int8 run", got.shape == want.shape and float(np.mean(err <= 1e-3)) >= 0.999 and
                    err.max() <= 1 and inside > 0.5, f"{np.mean(err <= 1e-3):.4%} equal, max {err.max():.2f}, {inside:.1%} unsaturated")
    # the last case's x: its Q map writes held bytes that the depthwise kernel reads (its only reader)
    src, err = compiled_c(path)
    S.check("int8 depthwise: on the int8 depthwise kernel, x's Q bytes held", held_maps(src) == 1 and
            src.count("the int8 depthwise kernel (the input held as bytes") == 1, err[-300:])


def inverted_residual(relu6=True):
    """fp32 MobileNetV2 block at odd sizes, y = x + project(relu6(dw3x3(relu6(expand(x))))),
    16 -> 48 -> 16 channels on 13x11 (relu6=False: no activations, the zero
    points of the depthwise conv's input and output inside the range), as the
    QDQ file under a temporary directory."""
    rng = np.random.default_rng(5)
    C, E = 16, 48

    r1, r2 = ("r1", "r2") if relu6 else ("c1", "c2")
    nodes = [h.make_node("Conv", ["x", "w1", "b1"], ["c1"]), h.make_node("Conv", [r1, "w2", "b2"], ["c2"], group=E, pads=[1, 1, 1, 1]),
             h.make_node("Conv", [r2, "w3", "b3"], ["c3"]), h.make_node("Add", ["c3", "x"], ["y"])]
    if relu6:
        nodes[1:1] = [h.make_node("Clip", ["c1", "lo", "hi"], ["r1"])]
        nodes[3:3] = [h.make_node("Clip", ["c2", "lo", "hi"], ["r2"])]
    shapes = {"w1": (E, C, 1, 1), "b1": (E,), "w2": (E, 1, 3, 3), "b2": (E,), "w3": (C, E, 1, 1), "b3": (C,)}
    inits = [init(k, (rng.standard_normal(v) * 0.3).astype(np.float32)) for k, v in shapes.items()]
    inits += [init("lo", np.float32(0)), init("hi", np.float32(6))]
    fp32 = model(nodes, [vi("x", T.FLOAT, [1, C, 13, 11])], [vi("y", T.FLOAT, [1, C, 13, 11])], inits, opset=13)
    return quantize_random(fp32, (1, C, 13, 11), rng)


def test_q8_depthwise_held():
    """An inverted-residual block: the 1x1 expand writes bytes, the int8
    depthwise kernel reads them and writes bytes, the 1x1 project reads them
    (q8_hold.c): no conversion pass between the three; equal to onnxruntime's
    int8 run.  With relu6 (zero points 0) and without (zero points inside)."""
    for relu6 in (True, False):
        name = f"int8 depthwise held, relu6={relu6}"
        qdq = inverted_residual(relu6)
        m = onnx.load(qdq)
        inits = {i.name: nh.to_array(i) for i in m.graph.initializer}
        step = float(inits[[n for n in m.graph.node if n.output[0] == "y"][0].input[1]])
        zps = [int(inits[n.input[2]]) for n in m.graph.node if n.op_type == "QuantizeLinear" and n.input[0] in ("r1", "r2", "c1", "c2")]
        x = RNG.standard_normal((1, 16, 13, 11)).astype(np.float32)
        want = ort_run(qdq, {"x": x})["y"]
        p, d = ht.run(qdq, {"x": x}, backend="cpu", extra=Q8_FORCE)
        S.check(f"{name}: runs", p.returncode == 0, p.stderr[-600:])
        if p.returncode == 0:
            err = np.abs(np.load(os.path.join(d, "y.npy")) - want) / step
            exact = float(np.mean(err <= 1e-3))
            print(f"{name}: {exact:.4%} equal, max {err.max():.2f} steps, zero points {zps}")
            S.check(f"{name}: equal to onnxruntime's int8 run", exact >= 0.999 and err.max() <= 1 and
                    all((z == 0) == relu6 for z in zps), f"{exact:.4%} equal, max {err.max():.2f} steps, zero points {zps}")
        # expand -> depthwise -> project held; and x's Q map writes held bytes for the expand: two 1x1 convs
        # reading bytes (the expand x's, the project the depthwise's), one writing them (the expand)
        src, err = compiled_c(qdq, Q8_FORCE)
        S.check(f"{name}: input and output held as bytes",
                src.count("the int8 depthwise kernel (the input held as bytes, the output held as bytes)") == 1 and
                src.count("held as the output") == 1 and src.count("the input held as u8") == 2 and held_maps(src) == 1,
                f"{src.count('held as the output')} held outputs, {src.count('the input held as u8')} held inputs, "
                f"{held_maps(src)} held Q maps {err[-300:]}")


def test_q8_depthwise_chain():
    """Two int8 depthwise convs in a row, then a 1x1 conv too small to pay
    for the int8 kernel (it stays on the bf16 template): the first, unpadded,
    leaves its plane in the per-thread scratch where the second, padded and
    strided, must find zeros at its padding (contract_q8dw.c's <fn>_dwpad);
    the second's output, stored as bf16 for the template, takes the exact
    store of 8-bit integers.  Equal to onnxruntime's int8 run."""
    rng = np.random.default_rng(11)
    C = 13
    nodes = [h.make_node("Conv", ["x", "w1", "b1"], ["c1"], group=C), h.make_node("Relu", ["c1"], ["r1"]),
             h.make_node("Conv", ["r1", "w2", "b2"], ["c2"], group=C, pads=[1, 1, 1, 1], strides=[2, 2]),
             h.make_node("Conv", ["c2", "w3", "b3"], ["y"])]
    shapes = {"w1": (C, 1, 3, 3), "b1": (C,), "w2": (C, 1, 3, 3), "b2": (C,), "w3": (C, C, 1, 1), "b3": (C,)}
    inits = [init(k, (rng.standard_normal(v) * 0.5).astype(np.float32)) for k, v in shapes.items()]
    fp32 = model(nodes, [vi("x", T.FLOAT, [2, C, 15, 13])], [vi("y", T.FLOAT, None)], inits, opset=13)
    qdq = quantize_random(fp32, (2, C, 15, 13), rng)
    m = onnx.load(qdq)
    step = float(nh.to_array([i for i in m.graph.initializer if i.name == [n for n in m.graph.node if n.output[0] == "y"][0].input[1]][0]))
    x = (rng.standard_normal((2, C, 15, 13)) * 2).astype(np.float32)
    want = ort_run(qdq, {"x": x})["y"]
    p, d = ht.run(qdq, {"x": x}, backend="cpu")
    S.check("int8 depthwise chain: runs", p.returncode == 0, p.stderr[-600:])
    if p.returncode == 0:
        err = np.abs(np.load(os.path.join(d, "y.npy")) - want) / step
        exact = float(np.mean(err <= 1e-3))
        print(f"int8 depthwise chain: {exact:.4%} equal, max {err.max():.2f} steps")
        S.check("int8 depthwise chain: equal to onnxruntime's int8 run", exact >= 0.999 and err.max() <= 1,
                f"{exact:.4%} equal, max {err.max():.2f} steps")
    src, err = compiled_c(qdq)
    S.check("int8 depthwise chain: two int8 depthwise kernels, the second's bf16 output stored exactly",
            src.count("the int8 depthwise kernel (") == 2 and "_mm512_srli_epi32(_mm512_castps_si512(v), 16)" in src, err[-300:])


def bottleneck():
    """fp32 ResNet bottleneck, y = relu(x + conv1x1(relu(conv3x3(relu(conv1x1(x)))))),
    128 -> 32 -> 128 channels on 14x14, as the QDQ file under a temporary directory."""
    rng = np.random.default_rng(3)
    C, E = 128, 32
    nodes = [h.make_node("Conv", ["x", "w1", "b1"], ["c1"]), h.make_node("Relu", ["c1"], ["r1"]),
             h.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]), h.make_node("Relu", ["c2"], ["r2"]),
             h.make_node("Conv", ["r2", "w3", "b3"], ["c3"]), h.make_node("Add", ["c3", "x"], ["a"]), h.make_node("Relu", ["a"], ["y"])]
    shapes = {"w1": (E, C, 1, 1), "b1": (E,), "w2": (E, E, 3, 3), "b2": (E,), "w3": (C, E, 1, 1), "b3": (C,)}
    inits = [init(k, (rng.standard_normal(v) * (1 / np.sqrt(np.prod(v[1:])) if len(v) > 1 else 0.1)).astype(np.float32))
             for k, v in shapes.items()]
    fp32 = model(nodes, [vi("x", T.FLOAT, [1, C, 14, 14])], [vi("y", T.FLOAT, [1, C, 14, 14])], inits, opset=13)
    return quantize_random(fp32, (1, C, 14, 14), rng)


def check_within_step(tag, qdq, feeds, outs, extra=()):
    """Runs QDQ model qdq on feeds on the cpu (harp run with extra): each
    output named in outs within one step of its DequantizeLinear's scale of
    onnxruntime's int8 run on >= 99.9% of its elements, at most 2 steps."""
    want = ort_run(qdq, feeds)
    m = onnx.load(qdq)
    inits = {i.name: nh.to_array(i) for i in m.graph.initializer}
    p, d = ht.run(qdq, feeds, backend="cpu", extra=list(extra))
    S.check(f"{tag}: runs", p.returncode == 0, p.stderr[-600:])
    for y in outs if p.returncode == 0 else ():
        step = float(inits[[n for n in m.graph.node if n.output[0] == y][0].input[1]])
        e = np.abs(np.load(os.path.join(d, y + ".npy")) - want[y]) / step
        within = float(np.mean(e <= 1 + 1e-3))
        print(f"{tag}: {y} {within:.4%} within one step, max {e.max():.2f} steps")
        S.check(f"{tag}: {y} within one step of onnxruntime's int8 run", within >= 0.999 and e.max() <= 2,
                f"{within:.4%} within one step, max {e.max():.2f} steps")


def test_narrow_operand_kept():
    """A QDQ bottleneck: each conv's u8 output is stored as bf16 (exact) and
    the next conv converts it as it reads it (its operand cast), so the next
    conv multiplies bf16 by bf16.  Region selection must not make the cast
    to fp32 its producer's epilogue instead (the next conv would then read
    fp32: the slower mixed template; ResNet-50 int8 ran 8% slower so):
    every contraction that reads another's output reads it as bf16.  The
    output within one step of onnxruntime's int8 run."""
    qdq = bottleneck()
    d = tempfile.mkdtemp(prefix="harp_py_nar_")
    # the uncalibrated cost model (as CI has it): its estimates leave main's rule a near tie
    p = subprocess.run([ht.HARP, "dump", qdq, "--dump", "region", "--dump-dir", d], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "HARP_CPU_CALIB": "off"})
    S.check("narrow operand: dump runs", p.returncode == 0, p.stderr[-600:])
    if p.returncode == 0:
        regions = json.load(open(os.path.join(d, "region.json")))["regions"]
        made = {o["name"]: r for r in regions for o in r["outputs"]}
        reads = [(r["name"], i["name"], i["memref"]["dtype"]) for r in regions if r["kind"] == "contraction" for i in r["inputs"]
                 if i["name"] in made and made[i["name"]]["kind"] == "contraction"]
        print("narrow operand: reads", reads)
        S.check("narrow operand: a conv reads the conv before it as bf16", len(reads) == 2 and all(t == "bf16" for _, _, t in reads),
                f"{reads}")
    check_within_step("narrow operand", qdq, {"x": RNG.standard_normal((1, 128, 14, 14)).astype(np.float32)}, ["y"])


def two_convs(grouped=False):
    """fp32: y1 = relu(conv1x1 stride 2 (x)) 256 -> 512 and y2 = relu(conv1x1 (x))
    256 -> 128 on x of 14x14, both at M N K / (input + output elements) 85.3
    (ResNet-50's conv2d_354 and cast_377), as the QDQ file under a temporary directory;
    grouped: a third output y3 = a 1x1 conv of x in 2 groups (256 -> 8, on no int8 kernel),
    so that x's bytes have a reader that is no int8 kernel and are not held."""
    rng = np.random.default_rng(13)
    C = 256
    nodes = [h.make_node("Conv", ["x", "ws", "bs"], ["cs"], strides=[2, 2]), h.make_node("Relu", ["cs"], ["y1"]),
             h.make_node("Conv", ["x", "wg", "bg"], ["cg"]), h.make_node("Relu", ["cg"], ["y2"])]
    shapes = {"ws": (512, C, 1, 1), "bs": (512,), "wg": (128, C, 1, 1), "bg": (128,)}
    outs = [vi("y1", T.FLOAT, [1, 512, 7, 7]), vi("y2", T.FLOAT, [1, 128, 14, 14])]
    if grouped:
        nodes.append(h.make_node("Conv", ["x", "wq", "bq"], ["y3"], group=2))
        shapes.update({"wq": (8, C // 2, 1, 1), "bq": (8,)})
        outs.append(vi("y3", T.FLOAT, [1, 8, 14, 14]))
    inits = [init(k, (rng.standard_normal(v) * (1 / np.sqrt(C) if len(v) > 1 else 0.1)).astype(np.float32)) for k, v in shapes.items()]
    fp32 = model(nodes, [vi("x", T.FLOAT, [1, C, 14, 14])], outs, inits, opset=13)
    return quantize_random(fp32, (1, C, 14, 14), rng)


def test_q8_pays_by_template():
    """Which convs take the int8 kernel by default (cc_q8_pays, contract_q8.c):
    at the same ratio of multiply-adds to converted elements (85.3), with
    HARP_AMX off the strided 1x1 conv (the direct conv template, ~1.5x the
    GEMM template's time a multiply-add) goes int8 and the stride-1 1x1 (the
    GEMM template) stays bf16; on a CPU with AMX-INT8 (the variant on,
    Q8_AMX) both go int8 — x's bytes not held (a grouped conv, no int8
    kernel, reads them too).  With x's bytes held (the two convs its only
    readers: its Q map writes them, q8_hold.c) the input costs no conversion
    pass and the ratio is K = 256, so both go int8 either way.  The outputs
    within one step of onnxruntime's int8 run, each way."""
    amx = "amx_int8" in open("/proc/cpuinfo").read()
    x = RNG.standard_normal((1, 256, 14, 14)).astype(np.float32)
    for grouped in (True, False):
        qdq = two_convs(grouped)
        outs = ["y1", "y2", "y3"] if grouped else ["y1", "y2"]
        for knobs, expect in ((["--knob", "amx=off"], ["y1"] if grouped else ["y1", "y2"]),
                              ([], ["y1", "y2"] if amx or not grouped else ["y1"])):
            tag = f"q8 pays by template ({' '.join(knobs) or 'default'}, x {'not held' if grouped else 'held'})"
            src, err = compiled_c(qdq, knobs)
            names = dict(re.findall(r"/\* kernel (\d+): region (\w+) \*/", src))  # the kernels by the regions' names (their outputs')
            q8 = sorted(names.get(k, "?") for k in re.findall(r"static int \w+?_k(\d+)_q8\(hprt_pool", src))
            print(f"{tag}: int8 kernels of", q8, "of", sorted(names.values()), f"{held_maps(src)} held Q maps")
            S.check(f"{tag}: int8 kernels {expect}", q8 == expect and "y2" in names.values() and held_maps(src) == (0 if grouped else 1),
                    f"{q8}, {held_maps(src)} held Q maps {err[-300:]}")
            check_within_step(tag, qdq, {"x": x}, outs, knobs)


def check_fused_residual(name, path, feeds, sy, zs, knobs=Q8_FORCE):
    """Runs QDQ model path (output y of scale sy, zero points zs) on feeds with
    the int8 kernels forced: equal to onnxruntime's int8 run, bit for bit in
    the default exact mode (qdq_add=exact), within one step on >= 99.9% with
    qdq_add=fused (and not mostly saturated), and the residual sum in one
    int8 conv's epilogue: no kernel writes the conv's sums for another to add
    the tensor to, none adds apart."""
    exact_mode = "qdq_add=fused" not in knobs
    want = ort_run(path, feeds)["y"]
    p, d = ht.run(path, feeds, backend="cpu", extra=knobs)
    S.check(f"{name}: runs", p.returncode == 0, p.stderr[-600:])
    if p.returncode == 0:
        got = np.load(os.path.join(d, "y.npy"))
        err = np.abs(got.astype(np.float64) - want) / sy
        exact = float(np.mean(err <= 1e-3))
        yq = np.rint(want / sy) + zs[3]
        inside = float(np.mean((yq > 0) & (yq < 255)))
        print(f"{name}: {exact:.4%} equal, max {err.max():.2f} steps, {inside:.1%} unsaturated")
        ok = got.shape == want.shape and (np.array_equal(got, want) if exact_mode else exact >= 0.999 and err.max() <= 1) and inside > 0.3
        S.check(f"{name}: equal to onnxruntime's int8 run{' bit for bit' if exact_mode else ''}", ok,
                f"{exact:.4%} equal, max {err.max():.2f} steps, {inside:.1%} unsaturated")
    src, err = compiled_c(path, knobs)
    kernels = re.findall(r"/\* kernel \d+: region ([\w.]+) \*/", src)
    # exact: onnxruntime's two fused multiply-adds in the output pass, in its order (contract_q8.c's q8_resfma)
    fma = all(len(re.findall(r"v = fmaf\(", f)) == 1 for f in re.findall(r"static void \w+_q8out\(.*?\n}\n", src, re.S)
              if "fmaf(" in f)
    S.check(f"{name}: the sum in the int8 conv's epilogue", not any(n.endswith(".reduce") for n in kernels) and
            src.count("its epilogue requantizing to bytes, a tensor added, requantized again") == 1 and
            (src.count("v = fmaf(") == 1 and fma if exact_mode else "v = fmaf(" not in src),
            f"{kernels} {src.count('v = fmaf(')} fmaf steps {err[-300:]}")


def residual_model(k, zs, relu, sum_op, skip_first):
    """Handmade QDQ residual block: y = Q(relu?(DQ(Q(conv_k x k(DQ(Q(x))))) +
    DQ(Q(s)))) of 13 channels on 9x7, batch 2, per-channel int8 weights with
    -128 / 127 among them, int32 biases; zs the zero points of x, of the
    conv's output, of the skip s and of y (at the range's ends among them);
    the sum as an Add or a Sum, the skip its first or second operand; the
    skip also the input of a second conv of the same weight (output z), as
    a real model's skip is the next block's input too."""
    C, zx, zc, zk, zy = 13, *zs
    w = RNG.integers(-128, 128, (C, C, k, k), dtype=np.int8)
    w[::3, 0, 0, 0] = RNG.choice(np.array([-128, 127], np.int8), w[::3, 0, 0, 0].shape)
    ws = (RNG.random(C) * 0.004 + 0.001).astype(np.float32)
    sx, sc, sk, sy = np.float32(0.03), np.float32(0.11), np.float32(0.05), np.float32(0.13)
    conv, skip = "cd", "sd"
    ops = [skip, conv] if skip_first else [conv, skip]
    nodes = [h.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"]), h.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"]),
             h.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"], axis=0),
             h.make_node("DequantizeLinear", ["b", "bs", "bz"], ["bd"], axis=0),
             h.make_node("Conv", ["xd", "wd", "bd"], ["c"], pads=[k // 2] * 4),
             h.make_node("QuantizeLinear", ["c", "sc", "zc"], ["cq"]), h.make_node("DequantizeLinear", ["cq", "sc", "zc"], ["cd"]),
             h.make_node("QuantizeLinear", ["s", "sk", "zk"], ["sq"]), h.make_node("DequantizeLinear", ["sq", "sk", "zk"], ["sd"]),
             h.make_node("Sum" if sum_op else "Add", ops, ["a"])]
    nodes += [h.make_node("Conv", ["sd", "wd", "bd"], ["c2"], pads=[k // 2] * 4),
              h.make_node("QuantizeLinear", ["c2", "sc", "zc"], ["c2q"]), h.make_node("DequantizeLinear", ["c2q", "sc", "zc"], ["z"])]
    nodes += [h.make_node("Relu", ["a"], ["r"])] if relu else []
    nodes += [h.make_node("QuantizeLinear", ["r" if relu else "a", "sy", "zy"], ["yq"]),
              h.make_node("DequantizeLinear", ["yq", "sy", "zy"], ["y"])]
    u8 = lambda v: np.uint8(v)  # noqa: E731
    inits = [init("sx", sx), init("zx", u8(zx)), init("w", w), init("ws", ws), init("wz", np.zeros(C, np.int8)),
             init("b", RNG.integers(-3000, 3000, C).astype(np.int32)), init("bs", (sx * ws).astype(np.float32)),
             init("bz", np.zeros(C, np.int32)), init("sc", sc), init("zc", u8(zc)), init("sk", sk), init("zk", u8(zk)),
             init("sy", sy), init("zy", u8(zy))]
    shape = [2, C, 9, 7]
    return model(nodes, [vi("x", T.FLOAT, shape), vi("s", T.FLOAT, shape)], [vi("y", T.FLOAT, None), vi("z", T.FLOAT, None)], inits,
                 opset=13), sy


def test_q8_residual():
    """The QDQ residual add fused into the int8 conv's epilogue (onnx_qdq.c's
    ox_qdq_binary, contract_q8.c's q8_requant post steps): the conv's output
    requantized, the skip added as stored, the sum requantized, in the int8
    kernel's output pass — as an Add (onnxruntime's QLinearAdd) or a Sum
    then a Relu (fp32 in onnxruntime, as in ResNet-50's QDQ file); 3x3
    (the direct conv template) and 1x1 (the GEMM template) convs, the skip
    either operand, zero points at the range's ends; batch 2.  Equal to
    onnxruntime's int8 run; one kernel for the conv and the sum (the
    quantizations of x and s besides), not a separate elementwise one."""
    cases = [(3, (0, 255, 0, 0), True, True, False), (1, (255, 0, 255, 128), False, False, True),
             (1, (77, 128, 0, 3), True, False, False), (3, (128, 3, 255, 250), False, True, True)]
    for k, zs, relu, sum_op, skip_first in cases:
        name = f"q8 residual {k}x{k} zero points {zs} {'Sum' if sum_op else 'Add'}{' Relu' if relu else ''}{' skip first' if skip_first else ''}"
        path, sy = residual_model(k, zs, relu, sum_op, skip_first)
        x = (RNG.standard_normal((2, 13, 9, 7)) * 3).astype(np.float32)
        s = (RNG.standard_normal((2, 13, 9, 7)) * 4).astype(np.float32)
        check_fused_residual(name, path, {"x": x, "s": s}, sy, zs)
        if k == 1 and relu:  # the fused form (qdq_add=fused) too: a residual step, within one step
            check_fused_residual(name + " (qdq_add=fused)", path, {"x": x, "s": s}, sy, zs, Q8_FUSED)


def two_blocks():
    """fp32: two residual blocks as ResNet's, h1 = conv1x1(relu(conv1x1(x))) + x (no
    Relu: h1's zero point inside the range), h2 = relu(the same of h1), y = conv1x1(h2),
    32 channels on 14x14, as the QDQ file
    (quantize_static) under a temporary directory: h1 is the input of block 2's
    first conv and the tensor its residual add reads."""
    rng = np.random.default_rng(29)
    C = 32
    nodes, inits = [], []
    for i, (src, dst) in enumerate((("x", "h1"), ("h1", "h2"))):
        for j, (a, b) in enumerate(((src, f"t{i}"), (f"t{i}", f"u{i}"))):
            inits += [init(f"w{i}{j}", (rng.standard_normal((C, C, 1, 1)) / np.sqrt(C)).astype(np.float32)),
                      init(f"b{i}{j}", (rng.standard_normal(C) * 0.1).astype(np.float32))]
            nodes.append(h.make_node("Conv", [a, f"w{i}{j}", f"b{i}{j}"], [b + "c" if j else b + "p"]))
            if not j:
                nodes.append(h.make_node("Relu", [b + "p"], [b]))
        nodes += [h.make_node("Add", [f"u{i}c", src], [f"s{i}" if i else dst])] + ([h.make_node("Relu", [f"s{i}"], [dst])] if i else [])
    inits += [init("wy", (rng.standard_normal((16, C, 1, 1)) / np.sqrt(C)).astype(np.float32)), init("by", np.zeros(16, np.float32))]
    nodes.append(h.make_node("Conv", ["h2", "wy", "by"], ["y"]))
    fp32 = model(nodes, [vi("x", T.FLOAT, [1, C, 14, 14])], [vi("y", T.FLOAT, [1, 16, 14, 14])], inits, opset=13)
    return quantize_random(fp32, (1, C, 14, 14), rng)


def test_q8_residual_held():
    """The residual stream held as bytes (q8_hold.c, contract_q8.c's
    q8_res_buf / q8_post_zo): block 1's output, which its residual kernel's
    output pass requantizes a second time, stays bytes, read by block 2's
    first conv as its input and by block 2's residual kernel as the tensor
    it adds; the int8 kernels forced; an input 3x the calibration's (h1
    saturated at 0 and 255).  Within one step of onnxruntime's int8
    run on >= 99.9%, at most 2 steps."""
    qdq = two_blocks()
    src, err = compiled_c(qdq, Q8_FORCE)
    held = src.count("the tensor added held as bytes")
    both = src.count("held as the output, a tensor added, requantized again")
    print(f"q8 residual held: {held} kernels add a held tensor, {both} residual kernels hold their output")
    S.check("q8 residual held: block 2 adds the held h1, block 1 holds its output", held >= 1 and both >= 1, err[-300:])
    # the held bytes (rint, clamp to [0, 255]) not rounded to bf16 on the way (contract_q8.c's q8_span_step)
    rb = [f for f in re.findall(r"static void \w+_q8out\(.*?\n}\n", src, re.S) if "y[col] = v == v ? (uint8_t)" in f]
    S.check("q8 residual held: no bf16 rounding of the held bytes", len(rb) == both and all("hp_rint(v)" in f and "hp_rb(" not in f
            for f in rb), "\n".join(f for f in rb if "hp_rb(" in f)[-400:])
    x = (RNG.standard_normal((1, 32, 14, 14)) * 3).astype(np.float32)  # past the calibration's range: h1 saturates at both ends
    check_within_step("q8 residual held", qdq, {"x": x}, ["y"], Q8_FORCE)


def downsample_model(zs, relu, sum_op, proj_second):
    """Handmade QDQ downsampling block, as ResNet's: y = Q(relu?(DQ(Q(conv
    3x3 stride 2(x))) + DQ(Q(conv 1x1 stride 2(x))))) of 13 -> 16 channels
    on 9x7, batch 2, per-channel int8 weights with -128 / 127 among them,
    int32 biases; the 1x1 projection conv (and its Q, DQ) before the 3x3
    one in the graph, as onnxruntime's quantizer writes ResNet-50; zs the
    zero points of x, of the two convs' outputs and of y; the projection
    the Add's / Sum's second operand, or with proj_second its first."""
    C, O, zx, za, zb, zy = 13, 16, *zs
    ws = []
    for k in (1, 3):
        w = RNG.integers(-128, 128, (O, C, k, k), dtype=np.int8)
        w[::3, 0, 0, 0] = RNG.choice(np.array([-128, 127], np.int8), w[::3, 0, 0, 0].shape)
        ws.append(w)
    sx, sa, sb, sy = np.float32(0.03), np.float32(0.11), np.float32(0.07), np.float32(0.13)
    u8 = lambda v: np.uint8(v)  # noqa: E731
    inits = [init("sx", sx), init("zx", u8(zx)), init("sa", sa), init("za", u8(za)), init("sb", sb), init("zb", u8(zb)),
             init("sy", sy), init("zy", u8(zy))]
    nodes = [h.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"]), h.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"])]
    for i, (w, st, s, z) in enumerate(((ws[0], "sb", "sb", "zb"), (ws[1], "sa", "sa", "za"))):  # the projection first
        k = w.shape[2]
        wsc = (RNG.random(O) * 0.004 + 0.001).astype(np.float32)
        inits += [init(f"w{i}", w), init(f"ws{i}", wsc), init(f"wz{i}", np.zeros(O, np.int8)),
                  init(f"b{i}", RNG.integers(-3000, 3000, O).astype(np.int32)), init(f"bs{i}", (sx * wsc).astype(np.float32)),
                  init(f"bz{i}", np.zeros(O, np.int32))]
        nodes += [h.make_node("DequantizeLinear", [f"w{i}", f"ws{i}", f"wz{i}"], [f"wd{i}"], axis=0),
                  h.make_node("DequantizeLinear", [f"b{i}", f"bs{i}", f"bz{i}"], [f"bd{i}"], axis=0),
                  h.make_node("Conv", ["xd", f"wd{i}", f"bd{i}"], [f"c{i}"], pads=[k // 2] * 4, strides=[2, 2]),
                  h.make_node("QuantizeLinear", [f"c{i}", s, z], [f"c{i}q"]), h.make_node("DequantizeLinear", [f"c{i}q", s, z], [f"c{i}d"])]
    nodes += [h.make_node("Sum" if sum_op else "Add", ["c1d", "c0d"] if proj_second else ["c0d", "c1d"], ["a"])]
    nodes += [h.make_node("Relu", ["a"], ["r"])] if relu else []
    nodes += [h.make_node("QuantizeLinear", ["r" if relu else "a", "sy", "zy"], ["yq"]),
              h.make_node("DequantizeLinear", ["yq", "sy", "zy"], ["y"])]
    return model(nodes, [vi("x", T.FLOAT, [2, C, 9, 7])], [vi("y", T.FLOAT, None)], inits, opset=13), sy


def test_q8_downsample():
    """The residual add of a downsampling block — both operands convs'
    requantized outputs — fused into the 3x3 conv's int8 epilogue, the 1x1
    projection's output (made first in the graph) the tensor it adds
    (onnx_qdq.c's ox_qdq_skip_first): equal to onnxruntime's int8 run; one
    int8 kernel adds a tensor and requantizes again, no kernel writes a
    conv's bare sums for another to add."""
    cases = [((0, 255, 0, 128), False, True, False), ((255, 0, 255, 64), True, False, True), ((77, 128, 3, 250), True, True, False)]
    for zs, relu, sum_op, proj_second in cases:
        name = f"q8 downsample zero points {zs} {'Sum' if sum_op else 'Add'}{' Relu' if relu else ''}{' proj second' if proj_second else ''}"
        path, sy = downsample_model(zs, relu, sum_op, proj_second)
        x = (RNG.standard_normal((2, 13, 9, 7)) * 3).astype(np.float32)
        check_fused_residual(name, path, {"x": x}, sy, zs)


test_quantize_edges()
test_round_epilogue()
test_contractions()
test_integer_big_k()
test_matmul_integer_slices()
test_qdq_softmax()
test_microsoft_binary()
test_bad_params()
test_qdq_model()
test_qdq_mobilenetv2()
test_qdq_bert()
test_qdq_range_ends()
test_int8_kernel_fallback()
test_requant_epilogue()
test_q8_depthwise()
test_q8_depthwise_held()
test_q8_depthwise_chain()
test_narrow_operand_kept()
test_q8_pays_by_template()
test_q8_residual()
test_q8_residual_held()
test_q8_downsample()
S.close()
