"""QDQ convs / matmuls with an activation between the op and its Q
(DQ -> Conv / MatMul -> Relu / Clip -> Q, as NNCF, TF converters and
hand-written QDQ models keep it): on the int8 kernel, the activation as
bounds on the requantized integers (onnx_qdq.c's with_act), against
onnxruntime's int8 run (which fuses a Relu / Clip that the Q's saturation
implies, and runs the rest in fp32) and the QDQ graph as written
(optimizations off).  With scales that are powers of two every engine
computes the same numbers exactly, so the outputs must be equal bit for bit;
with quantize_static-like scales, within one step.  1x1, 3x3 and depthwise
convs, a MatMul and a Gemm, Relu / Clip(0, 6) / Clip(-1, 1) / Clip(0.5, 3), output zero points 0 /
128 / 255 (uint8) and int8, odd sizes; the inputs reach the bounds.  The
generated C shows the int8 kernel.
Needs: HARP_BIN, onnx, onnxruntime.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import harp_test as ht  # noqa: E402

ht.onnx_or_skip()
import onnxruntime as ort  # noqa: E402
from onnx import TensorProto as T  # noqa: E402
from onnx import helper as h  # noqa: E402

import quant_models as qm  # noqa: E402

S = qm.suite("q8_act")
RNG = np.random.default_rng(2829)
ACTS = {"relu": None, "clip06": (0.0, 6.0), "clip11": (-1.0, 1.0), "clip_pos": (0.5, 3.0)}


def act_nodes(act, opset):
    """The activation node(s) reading c, writing a (and their initializers)."""
    if act == "relu":
        return [h.make_node("Relu", ["c"], ["a"])], []
    lo, hi = ACTS[act]
    if opset < 11:
        return [h.make_node("Clip", ["c"], ["a"], min=lo, max=hi)], []
    return [h.make_node("Clip", ["c", "clo", "chi"], ["a"])], [qm.init("clo", np.float32(lo)), qm.init("chi", np.float32(hi))]


def build(op, shape, cout, k, act, zy, ydt, pow2, group=1, opset=13):
    """x -> Q(sx, 128) -> DQ -> op (Conv k x k pad k//2 of `group` groups, or
    MatMul) with an int8 per-channel weight (and an int32 bias) -> act ->
    Q(sy, zy of type ydt) -> DQ -> y.  Returns (path, sy)."""
    cin = shape[1] if op == "conv" else shape[-1]
    sx = 2.0 ** -4 if pow2 else 0.0173
    ws = (2.0 ** -RNG.integers(6, 9, cout) if pow2 else RNG.random(cout) * 0.004 + 0.001).astype(np.float32)
    sy = 2.0 ** -3 if pow2 else 0.0465
    wshape = (cout, cin // group, k, k) if op == "conv" else (cout, cin) if op == "gemm" else (cin, cout)
    w = RNG.integers(-128, 128, wshape, dtype=np.int8)
    if opset < 13:  # no per-axis DequantizeLinear yet: one weight scale
        ws = np.full(cout, ws[0], np.float32)
    wdq = {"axis": 1 if op == "matmul" else 0} if opset >= 13 else {}
    nodes = [h.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"]), h.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"]),
             h.make_node("DequantizeLinear", ["w", "ws" if opset >= 13 else "ws1"], ["wd"], **wdq)]
    inits = [qm.init("w", w), qm.init("ws" if opset >= 13 else "ws1", ws if opset >= 13 else ws[0]), qm.init("sx", np.float32(sx)), qm.init("zx", np.uint8(128)),
             qm.init("sy", np.float32(sy)), qm.init("zy", np.array(zy, np.uint8 if ydt == T.UINT8 else np.int8))]
    if op != "matmul":
        b = RNG.integers(-2000, 2000, cout).astype(np.int32)
        bs = (np.float32(sx) * ws).astype(np.float32)
        inits += [qm.init("b", b), qm.init("bs" if opset >= 13 else "bs1", bs if opset >= 13 else bs[0])]
        nodes += [h.make_node("DequantizeLinear", ["b", "bs" if opset >= 13 else "bs1"], ["bd"], **wdq),
                  h.make_node("Conv", ["xd", "wd", "bd"], ["c"], kernel_shape=[k, k], pads=[k // 2] * 4, group=group) if op == "conv" else
                  h.make_node("Gemm", ["xd", "wd", "bd"], ["c"], transB=1)]
    else:
        nodes += [h.make_node("MatMul", ["xd", "wd"], ["c"])]
    an, ai = act_nodes(act, opset)
    nodes += an + [h.make_node("QuantizeLinear", ["a", "sy", "zy"], ["yq"]), h.make_node("DequantizeLinear", ["yq", "sy", "zy"], ["y"])]
    path = qm.model(nodes, [qm.vi("x", T.FLOAT, list(shape))], [qm.vi("y", T.FLOAT, None)], inits + ai, opset=opset)
    return path, sy


def ort_out(path, x, opt):
    so = ort.SessionOptions()
    if not opt:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


def case(name, op, shape, cout, k, act, zy=0, ydt=T.UINT8, pow2=True, group=1, opset=13):
    name = f"{name} {act} zy {zy} {'u8' if ydt == T.UINT8 else 's8'}"
    path, sy = build(op, shape, cout, k, act, zy, ydt, pow2, group, opset)
    x = (RNG.standard_normal(shape) * 3).astype(np.float32)
    p, d = ht.run(path, {"x": x}, backend="cpu", extra=qm.Q8_FORCE)
    S.check(f"{name}: runs", p.returncode == 0, p.stderr[-800:])
    if p.returncode:
        return
    got = np.load(os.path.join(d, "y.npy"))
    lo, hi = ACTS[act] or (0.0, np.inf)
    qlo, qhi = ((0, 255) if ydt == T.UINT8 else (-128, 127))
    for b, edge, at in ((lo, (qlo - zy) * sy, got <= lo + sy / 2), (hi, (qhi - zy) * sy, got >= hi - sy / 2)):
        if (b > edge if b == lo else b < edge):  # a bound inside the Q's range: reached
            S.check(f"{name}: the outputs reach the activation's bound {b}", at.sum() >= 8, f"{int(at.sum())} there")
    for opt in (True, False):
        want = ort_out(path, x, opt)
        what = "int8 run" if opt else "QDQ graph as written"
        if pow2:
            S.check(f"{name}: bit for bit onnxruntime's {what}", got.shape == want.shape and np.array_equal(got, want),
                    f"{int((got != want).sum()) if got.shape == want.shape else got.shape} differ")
        else:
            e = np.abs(got.astype(np.float64) - want) / np.float32(sy)
            S.check(f"{name}: within one step of onnxruntime's {what}", got.shape == want.shape and e.max() <= 1 + 1e-3,
                    f"{np.mean(e <= 1e-3):.4%} equal, max {e.max():.2f} steps")
    src, err = qm.compiled_c(path, qm.Q8_FORCE)
    mark = "_dwt(void *ctx" if group > 1 else "int8 GEMM "  # the depthwise int8 kernel's task; the int8 GEMM's header
    S.check(f"{name}: on the int8 kernel", mark in src and "fp32*fp32->fp32" not in src, err[-400:])


def test_act():
    for act in ACTS:
        case("1x1 conv 13->24 @9x11", "conv", (1, 13, 9, 11), 24, 1, act)
        case("3x3 conv 16->32 @11x7", "conv", (1, 16, 11, 7), 32, 3, act, zy=128)
        case("depthwise 3x3 24 @13x9", "conv", (1, 24, 13, 9), 24, 3, act, zy=255, group=24)
        case("MatMul 37x40->24", "matmul", (37, 40), 24, 0, act, zy=-3, ydt=T.INT8)
    case("1x1 conv 13->24 @9x11 (Clip attributes, opset 10)", "conv", (1, 13, 9, 11), 24, 1, "clip06", zy=128, opset=10)
    case("3x3 conv 16->32 @11x7 s8", "conv", (1, 16, 11, 7), 32, 3, "clip11", zy=-128, ydt=T.INT8)
    case("3x3 conv 16->32 @11x7, quantize_static-like scales", "conv", (1, 16, 11, 7), 32, 3, "relu", zy=128, pow2=False)
    case("MatMul 37x40->24, quantize_static-like scales", "matmul", (37, 40), 24, 0, "clip06", zy=7, pow2=False)
    case("Gemm transB 29x33->19", "gemm", (29, 33), 19, 0, "relu", zy=128)
    case("Gemm transB 29x33->19 s8", "gemm", (29, 33), 19, 0, "clip06", zy=5, ydt=T.INT8)
    case("3x3 conv 16->32 @11x7", "conv", (1, 16, 11, 7), 32, 3, "clip_pos", zy=0)


if __name__ == "__main__":
    test_act()
    S.close()
