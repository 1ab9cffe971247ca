"""int8 / uint8 tensors and the ONNX quantization ops against onnxruntime:
handmade edge cases (saturation, zero points at the ends of the range,
per-channel scales, halves that round to even, odd sizes), QLinearConv /
QLinearMatMul / *Integer (K past 2^24 sums), the QDQ Softmax, the
com.microsoft QLinearAdd / QLinearMul, DynamicQuantizeLinear's scale and
zero point exactly, Round as the templates' epilogue
step, and bad quantization parameters (a clear error naming the node and
no output file).  Runs on the interpreter and the cpu backend
(HARP_TEST_BACKENDS).  The QDQ models quantize_static makes are
test_onnx_quant_qdq.py's; the int8 kernels' fusions test_onnx_quant_q8.py's.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import harp_test as ht  # noqa: E402

ht.onnx_or_skip()
from onnx import TensorProto as T  # noqa: E402
from onnx import helper as h  # noqa: E402
from quant_models import init, model, ort_run, same, suite, vi  # noqa: E402

S = suite("onnx_quant")  # compiled_only, HARP_CC_OPT=1 (quant_models.suite)
RNG = np.random.default_rng(7)


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
    same(S, "Q/DQ edges", path, {"x": x, "k": np.array([-129, 128, 255, 256, -1, 1000], np.int32)})


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
    same(S, "QLinearConv / QLinearMatMul / *Integer", path, {"x": x, "a": a}, exact=False)


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
    same(S, "ConvInteger / MatMulInteger, big K", path, {"x": x, "a": a})


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
    same(S, "MatMulInteger over slices of K", path, {"a": a, "x": x})


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
    same(S, "QDQ Softmax", path, {"x": x})


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
    same(S, "QLinearAdd / QLinearMul / DynamicQuantizeLinear", path, {"a": a, "b": b, "f": f}, exact=False)


def test_dynamic_quantize():
    """DynamicQuantizeLinear's scale (the range, with 0, over 255) and zero
    point equal to onnxruntime's on every backend, its bytes within one
    step, on inputs of both signs, all positive (the range from 0) and all
    negative (to 0).  A scale of the range over 254 moves no byte by more
    than one step (test_microsoft_binary lets it through); the scale and the
    zero point show it."""
    rng = np.random.default_rng(254)
    f = (rng.standard_normal((5, 13)) * 3).astype(np.float32)
    path = model([h.make_node("DynamicQuantizeLinear", ["f"], ["dq", "ds", "dz"])], [vi("f", T.FLOAT, f.shape)],
                 [vi("dq", T.UINT8, None), vi("ds", T.FLOAT, None), vi("dz", T.UINT8, None)], opset=13)
    for tag, x in (("mixed", f), ("positive", np.abs(f) + 0.5), ("negative", -np.abs(f) - 0.25)):
        want = ort_run(path, {"f": x})
        for be in ht.BACKENDS:
            p, d = ht.run(path, {"f": x}, backend=be)
            S.check(f"DynamicQuantizeLinear {tag} ({be}): runs", p.returncode == 0, p.stderr[-800:])
            if p.returncode:
                continue
            got = {k: np.load(os.path.join(d, k + ".npy")) for k in want}
            for k in ("ds", "dz"):
                S.check(f"DynamicQuantizeLinear {tag} ({be}): {k} equal to onnxruntime's", got[k].dtype == want[k].dtype
                        and np.array_equal(got[k], want[k]), f"{got[k]!r} vs {want[k]!r}")
            diff = np.abs(got["dq"].astype(np.int64) - want["dq"])
            S.check(f"DynamicQuantizeLinear {tag} ({be}): dq within a step of onnxruntime's", got["dq"].dtype == np.uint8
                    and got["dq"].shape == want["dq"].shape and diff.max() <= 1, f"max diff {diff.max()}")


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
    same(S, "Round after MatMul / Conv", path, {"a": a, "x": x})


test_quantize_edges()
test_round_epilogue()
test_contractions()
test_integer_big_k()
test_matmul_integer_slices()
test_qdq_softmax()
test_microsoft_binary()
test_bad_params()
test_dynamic_quantize()
S.close()
