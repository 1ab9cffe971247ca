"""The fused QDQ Add against onnxruntime, bit for bit, over every pair of
8-bit inputs: DQ(a), DQ(b) -> Add [-> Relu] -> Q is onnxruntime's QLinearAdd
(its QDQ transformer fuses it), float code with fused multiply-adds in MLAS:
ra = sa / sc, rb = sb / sc, fixed = zc - fma(ra, za, rb zb), y = sat(rint(
fma(b, rb, fma(a, ra, fixed)))); harp's import (onnx_qdq.c's ox_qdq_binary)
writes it with the Tiny MULADD.  One tensor of 65,536 elements holds all
(a, b) pairs, uint8 and int8, for several scale / zero point sets; harp on
the interpreter and the cpu backend (HARP_TEST_BACKENDS) must equal
onnxruntime on all of them.  The QDQ Mul (QLinearMul) the same way.
"""
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import harp_test as ht  # noqa: E402

try:
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh
except ImportError:
    print("onnx / onnxruntime not installed: skipped")
    sys.exit(77)

S = ht.Suite("onnx_qdq_fma")


def binary_model(op, dt, sa, za, sb, zb, sc, zc, relu=False):
    """y = Q(op(DQ(Q(a)), DQ(Q(b)))) [with a Relu before the Q] of 8-bit
    dtype dt (T.UINT8 / T.INT8), a and b fp32 graph inputs of shape
    [256, 256] (quantized activations, as in a model: a DQ of a graph input
    is a constant's or the fp32 graph's)."""
    npdt = np.uint8 if dt == T.UINT8 else np.int8
    inits = [nh.from_array(np.array(v, np.float32 if k[0] == "s" else npdt), k)
             for k, v in (("sa", sa), ("za", za), ("sb", sb), ("zb", zb), ("sc", sc), ("zc", zc))]
    nodes = [h.make_node("QuantizeLinear", ["a", "sa", "za"], ["aq"]), h.make_node("QuantizeLinear", ["b", "sb", "zb"], ["bq"]),
             h.make_node("DequantizeLinear", ["aq", "sa", "za"], ["ad"]), h.make_node("DequantizeLinear", ["bq", "sb", "zb"], ["bd"]),
             h.make_node(op, ["ad", "bd"], ["s"])]
    nodes += [h.make_node("Relu", ["s"], ["r"])] if relu else []
    nodes += [h.make_node("QuantizeLinear", ["r" if relu else "s", "sc", "zc"], ["y"])]
    g = h.make_graph(nodes, "fma", [h.make_tensor_value_info(k, T.FLOAT, [256, 256]) for k in "ab"],
                     [h.make_tensor_value_info("y", dt, [256, 256])], initializer=inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
    m.ir_version = 8
    path = os.path.join(tempfile.mkdtemp(), "m.onnx")
    onnx.save(m, path)
    return path


def all_pairs(npdt, sa, za, sb, zb):
    """The 8-bit values (a, b) of all pairs, and fp32 inputs their Qs (scale
    s, zero point z) map to them: (q - z) s."""
    v = np.arange(256, dtype=np.int64) + (0 if npdt == np.uint8 else -128)
    a, b = np.meshgrid(v, v, indexing="ij")
    return a.astype(npdt), b.astype(npdt), ((a - za) * np.float32(sa)).astype(np.float32), ((b - zb) * np.float32(sb)).astype(np.float32)


def check_all_pairs(name, op, dt, params, relu=False):
    """harp equal to onnxruntime on all 65,536 (a, b) pairs."""
    path = binary_model(op, dt, *params, relu=relu)
    a, b, af, bf = all_pairs(np.uint8 if dt == T.UINT8 else np.int8, *params[:4])
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"a": af, "b": bf})[0]
    lo, hi = (0, 255) if dt == T.UINT8 else (-128, 127)
    q = lambda v, s, z: np.clip(np.rint(v / np.float32(s)) + z, lo, hi)  # noqa: E731 (QuantizeLinear)
    S.check(f"{name}: the inputs quantize to all pairs", np.array_equal(q(af, params[0], params[1]), a) and
            np.array_equal(q(bf, params[2], params[3]), b), "")
    for be in ht.BACKENDS:
        p, d = ht.run(path, {"a": af, "b": bf}, backend=be)
        S.check(f"{name} ({be}): runs", p.returncode == 0, p.stderr[-600:])
        if p.returncode:
            continue
        got = np.load(os.path.join(d, "y.npy"))
        bad = np.argwhere(got != want) if got.shape == want.shape else np.zeros((1, 2), int)
        S.check(f"{name} ({be}): all 65,536 pairs equal to onnxruntime", got.dtype == want.dtype and len(bad) == 0,
                f"{got.dtype}{got.shape}, {len(bad)} differ, first (a, b) = "
                f"{[(int(a[i, j]), int(b[i, j]), int(got[i, j]), int(want[i, j])) for i, j in bad[:4]]}")


# scale / zero point sets (sa, za, sb, zb, sc, zc): MobileNetV2-like residual
# scales, zero points at the ends of the range and inside, ratios above and
# below 1; the fma and a separate multiply and add differ on some pairs of each
U8 = [(0.0372, 131, 0.0519, 119, 0.0611, 127), (0.11, 0, 0.05, 255, 0.13, 3), (0.021, 255, 0.0173, 0, 0.0097, 128),
      (0.5, 77, 0.25, 128, 0.3, 250)]
I8 = [(0.0372, 3, 0.0519, -9, 0.0611, -1), (0.11, -128, 0.05, 127, 0.13, 0)]


def test_add():
    for k, prm in enumerate(U8):
        check_all_pairs(f"QDQ Add uint8 set {k}", "Add", T.UINT8, prm)
    check_all_pairs("QDQ Add Relu uint8 set 0", "Add", T.UINT8, U8[0], relu=True)
    for k, prm in enumerate(I8):
        check_all_pairs(f"QDQ Add int8 set {k}", "Add", T.INT8, prm)


def test_mul():
    for k, prm in enumerate(U8[:2]):
        check_all_pairs(f"QDQ Mul uint8 set {k}", "Mul", T.UINT8, prm)
    check_all_pairs("QDQ Mul int8 set 0", "Mul", T.INT8, I8[0])


def conv_add_model(sa, za, sb, zb, sc, zc, conv_first, relu):
    """y = DQ(Q(Add(DQ(Q(conv1x1(DQ(Q(x))))), DQ(Q(b))) [Relu])) on [1, 8, 64, 128]:
    the conv an identity of 8 channels whose requantization keeps x's integers
    (weights 1 and 0 of scale 1, x quantized as the conv's output: multiplier sa * 1 / sa = 1, zero
    point za both), so that the residual add in the int8 conv's epilogue sees
    all (a, b) pairs; the conv's output the Add's input 0 (conv_first) or 1;
    b's integers also the input of a second conv (output z), as a real
    model's skip is the next block's input too."""
    u8 = lambda v: np.array(v, np.uint8)  # noqa: E731
    f32 = lambda v: np.array(v, np.float32)  # noqa: E731
    inits = [nh.from_array(v, k) for k, v in (("sa", f32(sa)), ("za", u8(za)), ("sb", f32(sb)), ("zb", u8(zb)), ("sc", f32(sc)),
                                               ("zc", u8(zc)), ("w", np.eye(8, dtype=np.int8).reshape(8, 8, 1, 1)), ("ws", f32(1.0)),
                                               ("wz", np.array(0, np.int8)))]
    ops = ["cd", "bd"] if conv_first else ["bd", "cd"]
    nodes = [h.make_node("QuantizeLinear", ["x", "sa", "za"], ["xq"]), h.make_node("DequantizeLinear", ["xq", "sa", "za"], ["xd"]),
             h.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"]), h.make_node("Conv", ["xd", "wd"], ["c"]),
             h.make_node("QuantizeLinear", ["c", "sa", "za"], ["cq"]), h.make_node("DequantizeLinear", ["cq", "sa", "za"], ["cd"]),
             h.make_node("QuantizeLinear", ["b", "sb", "zb"], ["bq"]), h.make_node("DequantizeLinear", ["bq", "sb", "zb"], ["bd"]),
             h.make_node("Add", ops, ["s"]), h.make_node("Conv", ["bd", "wd"], ["c2"]),
             h.make_node("QuantizeLinear", ["c2", "sc", "zc"], ["c2q"]), h.make_node("DequantizeLinear", ["c2q", "sc", "zc"], ["z"])]
    nodes += [h.make_node("Relu", ["s"], ["r"])] if relu else []
    nodes += [h.make_node("QuantizeLinear", ["r" if relu else "s", "sc", "zc"], ["yq"]),
              h.make_node("DequantizeLinear", ["yq", "sc", "zc"], ["y"])]
    shape = [1, 8, 64, 128]
    g = h.make_graph(nodes, "fma_conv", [h.make_tensor_value_info(k, T.FLOAT, shape) for k in "xb"],
                     [h.make_tensor_value_info(k, T.FLOAT, shape) for k in "yz"], initializer=inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
    m.ir_version = 8
    path = os.path.join(tempfile.mkdtemp(), "m.onnx")
    onnx.save(m, path)
    return path


def test_add_in_conv_epilogue():
    """The QDQ Add as the int8 conv's epilogue step (CT_EPI_RESFMA, the
    default qdq_add=exact; int8=force: this conv is too small to pay):
    onnxruntime's two fused multiply-adds in its order, on all 65,536 (a, b)
    pairs, the conv's output either operand, with and without the Relu —
    equal to onnxruntime's int8 run, and the sum in the conv's kernel (its
    output pass adds the tensor and requantizes again; no other kernel reads
    the conv's output)."""
    for k, prm in enumerate(U8):
        for conv_first, relu in ((True, k == 0), (False, k == 1)):
            name = f"QDQ Add in the int8 conv's epilogue, set {k}, conv {'first' if conv_first else 'second'}{', Relu' if relu else ''}"
            path = conv_add_model(*prm, conv_first, relu)
            _, _, xf, bf = all_pairs(np.uint8, *prm[:4])
            feeds = {"x": xf.reshape(1, 8, 64, 128), "b": bf.reshape(1, 8, 64, 128)}
            want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
            p, d = ht.run(path, feeds, backend="cpu", extra=["--knob", "int8=force"])
            S.check(f"{name}: runs", p.returncode == 0, p.stderr[-600:])
            if p.returncode == 0:
                got = np.load(os.path.join(d, "y.npy"))
                S.check(f"{name}: all 65,536 pairs equal to onnxruntime", got.shape == want.shape and np.array_equal(got, want),
                        f"{int(np.sum(got != want)) if got.shape == want.shape else got.shape} differ")
            out = tempfile.mkdtemp()
            p = subprocess.run([ht.HARP, "compile", path, "--target", "cpu", "--sources-only", "-o", out, "--knob", "int8=force"],
                               capture_output=True, text=True, timeout=300)
            src = "".join(open(os.path.join(r, f)).read() for r, _, fs in os.walk(out) for f in fs if f.endswith(".c"))
            S.check(f"{name}: the sum in the int8 conv's output pass",
                    src.count("a tensor added, requantized again") == 1 and src.count("v = fmaf(") == 1, p.stderr[-300:])


def test_conv_epilogue_nan():
    """A NaN in the input of a conv with the QDQ Add step.  x's QuantizeLinear
    writes held bytes (its only reader is the int8 conv), and a NaN held is
    byte 0, as onnxruntime's QuantizeLinear gives (docs/onnx.md, "NaN"): the
    result is onnxruntime's int8 run, bit for bit, with no NaN.  (The
    int8 kernel's run-time fallback to the region's loop nest,
    contract_resfma_c.c, is no longer reached from a QDQ model's input.)"""
    prm = U8[0]
    path = conv_add_model(*prm, True, True)
    _, _, xf, bf = all_pairs(np.uint8, *prm[:4])
    x = xf.reshape(1, 8, 64, 128).copy()
    x[0, 3, 5, 7] = np.nan
    feeds = {"x": x, "b": bf.reshape(1, 8, 64, 128)}
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(["y"], feeds)[0]
    p, d = ht.run(path, feeds, backend="cpu", extra=["--knob", "int8=force", "--knob", "tier0=off"])
    S.check("conv epilogue, NaN in x: runs", p.returncode == 0, p.stderr[-600:])
    if p.returncode == 0:
        got = np.load(os.path.join(d, "y.npy"))
        S.check("conv epilogue, NaN in x: onnxruntime's int8 run bit for bit (NaN as byte 0)",
                not np.isnan(want).any() and np.array_equal(got, want),
                f"{int(np.isnan(got).sum())} NaN, {int(np.sum(got != want))} differ")


test_add()
test_mul()
test_add_in_conv_epilogue()
test_conv_epilogue_nan()
S.close()
