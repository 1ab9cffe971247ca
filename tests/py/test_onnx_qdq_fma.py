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

ht.onnx_or_skip()
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
from onnx import TensorProto as T  # noqa: E402
from onnx import helper as h  # noqa: E402
from onnx import numpy_helper as nh  # noqa: E402

S = ht.Suite("onnx_qdq_fma")
ht.compiled_only()  # the compiled C's numbers, not tier 0's


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


def conv_add_model(sa, za, sb, zb, sc, zc, conv_first, relu, k=1, xd_out=False):
    """y = DQ(Q(Add(DQ(Q(conv(DQ(Q(x))))), DQ(Q(b))) [Relu])) on [1, 8, 64, 128]:
    the conv (1x1, or k x k padded by k // 2 with the weight at the centre
    tap) an identity of 8 channels whose requantization keeps x's integers
    (weights 1 and 0 of scale 1, x quantized as the conv's output: multiplier sa * 1 / sa = 1, zero
    point za both), so that the residual add in the int8 conv's epilogue sees
    all (a, b) pairs; the conv's output the Add's input 0 (conv_first) or 1;
    b's integers also the input of a second conv (output z), as a real
    model's skip is the next block's input too.  xd_out: x's DQ (xd) is also
    a model output."""
    u8 = lambda v: np.array(v, np.uint8)  # noqa: E731
    f32 = lambda v: np.array(v, np.float32)  # noqa: E731
    w = np.zeros((8, 8, k, k), np.int8)
    w[:, :, k // 2, k // 2] = np.eye(8, dtype=np.int8)
    pads = {"pads": [k // 2] * 4} if k > 1 else {}
    inits = [nh.from_array(v, nm) for nm, v in (("sa", f32(sa)), ("za", u8(za)), ("sb", f32(sb)), ("zb", u8(zb)), ("sc", f32(sc)),
                                               ("zc", u8(zc)), ("w", w), ("ws", f32(1.0)),
                                               ("wz", np.array(0, np.int8)))]
    ops = ["cd", "bd"] if conv_first else ["bd", "cd"]
    nodes = [h.make_node("QuantizeLinear", ["x", "sa", "za"], ["xq"]), h.make_node("DequantizeLinear", ["xq", "sa", "za"], ["xd"]),
             h.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"]), h.make_node("Conv", ["xd", "wd"], ["c"], **pads),
             h.make_node("QuantizeLinear", ["c", "sa", "za"], ["cq"]), h.make_node("DequantizeLinear", ["cq", "sa", "za"], ["cd"]),
             h.make_node("QuantizeLinear", ["b", "sb", "zb"], ["bq"]), h.make_node("DequantizeLinear", ["bq", "sb", "zb"], ["bd"]),
             h.make_node("Add", ops, ["s"]), h.make_node("Conv", ["bd", "wd"], ["c2"], **pads),
             h.make_node("QuantizeLinear", ["c2", "sc", "zc"], ["c2q"]), h.make_node("DequantizeLinear", ["c2q", "sc", "zc"], ["z"])]
    nodes += [h.make_node("Relu", ["s"], ["r"])] if relu else []
    nodes += [h.make_node("QuantizeLinear", ["r" if relu else "s", "sc", "zc"], ["yq"]),
              h.make_node("DequantizeLinear", ["yq", "sc", "zc"], ["y"])]
    shape = [1, 8, 64, 128]
    g = h.make_graph(nodes, "fma_conv", [h.make_tensor_value_info(i, T.FLOAT, shape) for i in "xb"],
                     [h.make_tensor_value_info(o, T.FLOAT, shape) for o in ["y", "z"] + (["xd"] if xd_out else [])],
                     initializer=inits)
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
            # the fmaf twice: the output pass's and its run-time fallback's (<fn>_q8slow's rows), no other kernel's
            S.check(f"{name}: the sum in the int8 conv's output pass",
                    src.count("a tensor added, requantized again") == 1 and src.count("v = fmaf(") == 2 and
                    src.count("_q8slow(pool, bufs)") == 1, p.stderr[-300:])


def matmul_add_model(sa, za, sb, zb, sc, zc):
    """y = DQ(Q(Add(DQ(Q(DQ(Q(x)) @ DQ(W))), DQ(Q(b))))) on [1, 8192, 8], W a
    permutation of the 8 columns (int8 0 / 1, scale 1: not symmetric, so
    that W and its transpose differ), x quantized as the product: the sum
    in the epilogue of an int8 x W (the weight B) sees all (a, b) pairs,
    a's columns permuted."""
    u8 = lambda v: np.array(v, np.uint8)  # noqa: E731
    f32 = lambda v: np.array(v, np.float32)  # noqa: E731
    w = np.roll(np.eye(8, dtype=np.int8), 1, axis=1)
    inits = [nh.from_array(v, nm) for nm, v in (("sa", f32(sa)), ("za", u8(za)), ("sb", f32(sb)), ("zb", u8(zb)), ("sc", f32(sc)),
                                                ("zc", u8(zc)), ("w", w), ("ws", f32(1.0)), ("wz", np.array(0, np.int8)))]
    nodes = [h.make_node("QuantizeLinear", ["x", "sa", "za"], ["xq"]), h.make_node("DequantizeLinear", ["xq", "sa", "za"], ["xd"]),
             h.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"]), h.make_node("MatMul", ["xd", "wd"], ["c"]),
             h.make_node("QuantizeLinear", ["c", "sa", "za"], ["cq"]), h.make_node("DequantizeLinear", ["cq", "sa", "za"], ["cd"]),
             h.make_node("QuantizeLinear", ["b", "sb", "zb"], ["bq"]), h.make_node("DequantizeLinear", ["bq", "sb", "zb"], ["bd"]),
             h.make_node("Add", ["cd", "bd"], ["s"]), h.make_node("QuantizeLinear", ["s", "sc", "zc"], ["yq"]),
             h.make_node("DequantizeLinear", ["yq", "sc", "zc"], ["y"])]
    shape = [1, 8192, 8]
    g = h.make_graph(nodes, "fma_matmul", [h.make_tensor_value_info(i, T.FLOAT, shape) for i in "xb"],
                     [h.make_tensor_value_info("y", T.FLOAT, shape)], initializer=inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
    m.ir_version = 8
    path = os.path.join(tempfile.mkdtemp(), "m.onnx")
    onnx.save(m, path)
    return path


def with_grouped_reader(path):
    """The model at path with a second reader of x's DQ that no int8 kernel
    takes (a grouped conv, requantized: output g), so that the conv's input
    is not held as bytes; its path."""
    m = onnx.load(path)
    g = m.graph
    g.initializer.append(nh.from_array(np.ones((8, 4, 1, 1), np.int8), "wg"))
    g.node.extend([h.make_node("DequantizeLinear", ["wg", "ws", "wz"], ["wgd"]), h.make_node("Conv", ["xd", "wgd"], ["gc"], group=2),
                   h.make_node("QuantizeLinear", ["gc", "sc", "zc"], ["gq"]), h.make_node("DequantizeLinear", ["gq", "sc", "zc"], ["g"])])
    g.output.append(h.make_tensor_value_info("g", T.FLOAT, [1, 8, 64, 128]))
    out = os.path.join(tempfile.mkdtemp(), "m.onnx")
    onnx.save(m, out)
    return out


def harp_source(path, knobs):
    """The C harp prints for model path with knobs (--sources-only), and its stderr."""
    out = tempfile.mkdtemp()
    p = subprocess.run([ht.HARP, "compile", path, "--target", "cpu", "--sources-only", "-o", out, *knobs],
                       capture_output=True, text=True, timeout=300)
    return "".join(open(os.path.join(r, f)).read() for r, _, fs in os.walk(out) for f in fs if f.endswith(".c")), p.stderr


def test_conv_epilogue_fallback():
    """The int8 kernel's run-time fallback for a conv with the QDQ Add step
    (contract_resfma_c.c: <fn>_q8slow, the sums in plain fp32 loops, then
    the whole epilogue per output row as the output pass applies it), reached
    with the knob int8_decline (every int8 kernel declines as for a weight
    that is no int8): equal to onnxruntime's int8 run on all 65,536 (a, b)
    pairs, bit for bit.  A 1x1 conv (read as a GEMM), a 3x3 one and x W
    (MatMul, the weight B), either operand, with and without the Relu; the input
    held as bytes (the fallback then runs on converted copies, <fn>_q8fb)
    or not (x's DQ also read by a grouped conv: the input a bf16 tensor);
    no region's loop nest in the C."""
    knobs = ["--knob", "int8=force", "--knob", "int8_decline=1"]
    for k, prm, conv_first, relu, grouped in ((1, U8[0], True, True, False), (1, U8[1], False, False, True),
                                              (3, U8[2], True, False, False), (3, U8[3], False, True, True), (0, U8[1], True, False, False)):
        name = (f"fallback, {f'{k}x{k} conv' if k else 'x W'} {'first' if conv_first else 'second'}{', Relu' if relu else ''}"
                f"{', its input not held' if grouped else ''}")
        path = conv_add_model(*prm, conv_first, relu, k=k) if k else matmul_add_model(*prm)
        path = with_grouped_reader(path) if grouped else path
        _, _, xf, bf = all_pairs(np.uint8, *prm[:4])
        shape = (1, 8, 64, 128) if k else (1, 8192, 8)
        # x W: the pairs transposed, so that a varies along each row of 8 (the columns W permutes)
        feeds = {"x": xf.reshape(shape), "b": bf.reshape(shape)} if k else {"x": xf.T.reshape(shape), "b": bf.T.reshape(shape)}
        want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(["y"], feeds)[0]
        p, d = ht.run(path, feeds, backend="cpu", extra=knobs)
        S.check(f"{name}: runs", p.returncode == 0, p.stderr[-600:])
        if p.returncode == 0:
            got = np.load(os.path.join(d, "y.npy"))
            S.check(f"{name}: all 65,536 pairs equal to onnxruntime", got.shape == want.shape and np.array_equal(got, want),
                    f"{int(np.sum(got != want)) if got.shape == want.shape else got.shape} differ")
        src, err = harp_source(path, knobs)
        S.check(f"{name}: the fallback the shared sums and the epilogue pass, no loop nest",
                src.count("the int8 kernel declined: fp32 sums, the same epilogue") == 1 and
                src.count("#define HP_Q8_SLOW") == 1 and "_ln(pool, bufs)" not in src and
                "the knob int8_decline" in src and ("the input proven u8" in src) == grouped, err[-300:])


def test_conv_epilogue_fallback_nan():
    """The same fallback reached without the knob: a NaN in the conv's input
    where that input is not held as bytes (x's DQ also read by a grouped
    conv) makes the int8 kernel decline, and the fallback propagates it
    (docs/onnx.md, "NaN": a NaN where bytes are not held is kept).  Every
    element but the 8 channels of the pixels whose window holds it is
    onnxruntime's bit for bit; those are NaN (onnxruntime's Q makes byte 0
    of the NaN: no NaN at all)."""
    for k, prm in ((1, U8[0]), (3, U8[1])):
        name = f"fallback, a NaN in the {k}x{k} conv's input (not held)"
        path = with_grouped_reader(conv_add_model(*prm, True, k == 1, k=k))
        _, _, xf, bf = all_pairs(np.uint8, *prm[:4])
        x = xf.reshape(1, 8, 64, 128).copy()
        x[0, 3, 5, 7] = np.nan
        feeds = {"x": x, "b": bf.reshape(1, 8, 64, 128)}
        want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(["y"], feeds)[0]
        p, d = ht.run(path, feeds, backend="cpu", extra=["--knob", "int8=force"])
        S.check(f"{name}: runs", p.returncode == 0, p.stderr[-600:])
        if p.returncode == 0:
            got = np.load(os.path.join(d, "y.npy"))
            nan_px = np.zeros(want.shape, bool)
            nan_px[0, :, 5 - k // 2:6 + k // 2, 7 - k // 2:8 + k // 2] = True  # 0 x NaN is NaN: the window's reach
            S.check(f"{name}: NaN where the window reads it alone, else onnxruntime's bit for bit",
                    np.array_equal(np.isnan(got), nan_px) and np.array_equal(got[~nan_px], want[~nan_px]),
                    f"{int(np.isnan(got).sum())} NaN, {int(np.sum(got[~nan_px] != want[~nan_px]))} differ")
        src, err = harp_source(path, ["--knob", "int8=force"])
        S.check(f"{name}: the input not held, the fallback the shared sums'",
                "the input proven u8" in src and "_q8slow(pool, bufs)" in src and "_ln(pool, bufs)" not in src, err[-300:])


def test_conv_epilogue_nan_xd_output():
    """A NaN in x where x's DQ is also a model output (docs/onnx.md, "NaN").
    onnxruntime's QuantizeLinear makes byte 0 of it, so its int8 run has
    no NaN in y nor in xd.  harp: the conv reads x's operand form, a kernel
    of its own whose only readers are int8 kernels, held as bytes (byte 0
    for the NaN) even though xd is an output (xd is the fp32 DQ, a buffer of
    its own), so with the int8 kernel (int8=force) y is onnxruntime's bit
    for bit and xd keeps the NaN at that element alone (a buffer not held);
    with int8=off nothing is held and the NaN reaches y at that pixel's 8
    channels alone, every other element equal to onnxruntime."""
    prm = U8[0]
    path = conv_add_model(*prm, True, True, xd_out=True)
    _, _, xf, bf = all_pairs(np.uint8, *prm[:4])
    x = xf.reshape(1, 8, 64, 128).copy()
    x[0, 3, 5, 7] = np.nan
    feeds = {"x": x, "b": bf.reshape(1, 8, 64, 128)}
    want_y, want_xd = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(["y", "xd"], feeds)
    S.check("NaN, xd an output: onnxruntime's y and xd have no NaN", not np.isnan(want_y).any() and not np.isnan(want_xd).any(), "")
    nan_px = np.zeros(want_y.shape, bool)
    nan_px[0, :, 5, 7] = True
    for int8 in ("force", "off"):
        name = f"NaN, xd an output, int8={int8}"
        p, d = ht.run(path, feeds, backend="cpu", extra=["--knob", f"int8={int8}"])
        S.check(f"{name}: runs", p.returncode == 0, p.stderr[-600:])
        if p.returncode:
            continue
        y, xd = np.load(os.path.join(d, "y.npy")), np.load(os.path.join(d, "xd.npy"))
        one = np.zeros(x.shape, bool)
        one[0, 3, 5, 7] = True
        S.check(f"{name}: xd NaN at that element alone, else onnxruntime's",
                np.array_equal(np.isnan(xd), one) and np.array_equal(xd[~one], want_xd[~one]), f"{int(np.isnan(xd).sum())} NaN")
        if int8 == "force":
            S.check(f"{name}: y onnxruntime's bit for bit (the NaN a held byte 0)", np.array_equal(y, want_y),
                    f"{int(np.isnan(y).sum())} NaN, {int(np.sum(y != want_y))} differ")
        else:
            S.check(f"{name}: y NaN at that pixel's channels alone, else onnxruntime's",
                    np.array_equal(np.isnan(y), nan_px) and np.array_equal(y[~nan_px], want_y[~nan_px]),
                    f"{int(np.isnan(y).sum())} NaN, {int(np.sum(y[~nan_px] != want_y[~nan_px]))} differ")


def test_conv_epilogue_nan():
    """A NaN in the input of a conv with the QDQ Add step.  x's QuantizeLinear
    writes held bytes (its only reader is the int8 conv), and a NaN held is
    byte 0, as onnxruntime's QuantizeLinear gives (docs/onnx.md, "NaN"): the
    result is onnxruntime's int8 run, bit for bit, with no NaN.  (The
    int8 kernel's run-time fallback, contract_resfma_c.c, is not reached
    from a held input: test_conv_epilogue_fallback reaches it by the knob
    int8_decline.)"""
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
test_conv_epilogue_fallback()
test_conv_epilogue_fallback_nan()
test_conv_epilogue_nan_xd_output()
S.close()
