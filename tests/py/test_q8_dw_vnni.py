"""The int8 depthwise kernel's VNNI variant (contract_q8dw.c, <fn>_dwt_vnni:
vpdpbusd over taps that vpermb gathers from the padded u8 plane) against
onnxruntime's int8 run (QLinearConv): the shapes test_onnx_quant.py's
depthwise cases leave out, output rows narrower than a vector (several rows
a vector: 5 and 2 wide), rows of a vector taken in pairs
(an odd count of them, strides 1 to 3), 4 taps a row, column stride 3, asymmetric pads,
the input's zero point inside the range; and a weight past int8 (uint8
weights up to 255, QLinearConv), whose packed int8 form is flagged invalid
so that the fp32 variant runs; a NaN in an input not held (the fp32
variant then runs: the interpreter's output), and in one held (x's Q map
stores it as byte 0: onnxruntime's output).  Equal to onnxruntime on >= 99.9% of
elements, at most one step, most outputs unsaturated; the C has the
variant.  Needs: HARP_BIN, onnx, onnxruntime; the variant runs where the
CPU has AVX512-VBMI and AVX512-VNNI (else the fp32 one: the numbers hold).
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

ht.compiled_only()  # the int8 kernels' numbers, not tier 0's (harp_test.compiled_only)
S = ht.Suite("q8_dw_vnni")
RNG = np.random.default_rng(5)


def dw_model(shape, k, strides, pads, zx, wdt):
    """QLinearConv, depthwise over c channels (group c) with a k = (kh, kw)
    window: uint8 x with zero point zx, weight wdt (int8 per channel, or
    uint8 with zero point 0 and values past 127), int32 bias, uint8 y;
    x of the given NCHW shape."""
    c = shape[1]
    if wdt == T.INT8:
        w = RNG.integers(-128, 128, (c, 1, *k), dtype=np.int8)
        w[::2, 0, 0] = RNG.choice(np.array([-128, 127], np.int8), w[::2, 0, 0].shape)
        sw, zw = (RNG.random(c) * 0.01 + 0.002).astype(np.float32), np.zeros(c, np.int8)
    else:
        w = RNG.integers(0, 256, (c, 1, *k), dtype=np.uint8)
        sw, zw = np.float32(0.004), np.uint8(0)
    inits = [nh.from_array(np.asarray(v), n) for n, v in
             (("sx", np.float32(0.05)), ("zx", np.uint8(zx)), ("w", w), ("sw", sw), ("zw", zw), ("sy", np.float32(0.3)),
              ("zy", np.uint8(100)), ("b", RNG.integers(-3000, 3000, c).astype(np.int32)))]
    node = h.make_node("QLinearConv", ["x", "sx", "zx", "w", "sw", "zw", "sy", "zy", "b"], ["y"], group=c, strides=strides,
                       pads=pads, kernel_shape=list(k))
    g = h.make_graph([node], "dw", [h.make_tensor_value_info("x", T.UINT8, shape)], [h.make_tensor_value_info("y", T.UINT8, None)],
                     initializer=inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
    m.ir_version = 8
    path = os.path.join(tempfile.mkdtemp(prefix="harp_py_dwvnni_"), "dw.onnx")
    onnx.save(m, path)
    return path


def compiled(path):
    """The C `harp compile` makes of path, and its stderr."""
    out = tempfile.mkdtemp(prefix="harp_py_dwvnni_c_")
    p = subprocess.run([ht.HARP, "compile", path, "--target", "cpu", "-o", out], capture_output=True, text=True, timeout=300)
    return "".join(open(os.path.join(r, f)).read() for r, _, fs in os.walk(out) for f in fs if f.endswith(".c")), p.stderr


def test_vnni_shapes():
    # (channels, H, W, window, strides, pads [t, l, b, r], zx, weight type, the VNNI variant expected)
    cases = [(6, 7, 5, (3, 3), [1, 1], [1, 1, 1, 1], 90, T.INT8, True),
             (5, 9, 4, (3, 3), [2, 2], [1, 0, 1, 1], 255, T.INT8, True),
             (4, 11, 23, (4, 4), [1, 3], [2, 1, 1, 2], 17, T.INT8, True),
             (8, 20, 37, (3, 3), [2, 1], [0, 1, 1, 1], 200, T.INT8, True),
             (7, 10, 9, (3, 3), [1, 1], [1, 1, 1, 1], 60, T.UINT8, True),
             # output rows of a vector or more (9 outputs and up) in pairs (dw_vnni_pair), an odd last row alone: strides 1, 2, 3 below the window's height
             (3, 17, 21, (3, 3), [1, 1], [1, 1, 1, 1], 90, T.INT8, True),
             (5, 21, 33, (3, 3), [2, 2], [1, 1, 1, 1], 30, T.INT8, True),
             (4, 15, 18, (4, 4), [1, 1], [2, 1, 1, 2], 17, T.INT8, True),
             (2, 16, 50, (4, 3), [3, 1], [1, 1, 1, 1], 5, T.INT8, True)]
    for c, hh, ww, k, st, pads, zx, wdt, vnni in cases:
        name = f"depthwise VNNI {c}x{hh}x{ww} {k[0]}x{k[1]} stride {st} pads {pads} zx={zx} {'int8' if wdt == T.INT8 else 'uint8 past 127'}"
        path = dw_model([2, c, hh, ww], k, st, pads, zx, wdt)
        x = RNG.integers(0, 256, (2, c, hh, ww), dtype=np.uint8)
        want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
        p, d = ht.run(path, {"x": x}, backend="cpu")
        S.check(f"{name}: runs", p.returncode == 0, p.stderr[-600:])
        if p.returncode == 0:
            got = np.load(os.path.join(d, "y.npy"))
            e = np.abs(got.astype(np.int64) - want.astype(np.int64)) if got.shape == want.shape else np.array([99])
            inside = float(np.mean((want > 0) & (want < 255)))
            print(f"{name}: {np.mean(e == 0):.4%} equal, max {e.max()}, {inside:.1%} unsaturated")
            S.check(f"{name}: equal to onnxruntime's int8 run", float(np.mean(e == 0)) >= 0.999 and e.max() <= 1 and inside > 0.5,
                    f"{np.mean(e == 0):.4%} equal, max {e.max()}, {inside:.1%} unsaturated")
        src, err = compiled(path)
        S.check(f"{name}: the VNNI variant {'emitted' if vnni else 'absent'}", ("_dwt_vnni(void *ctx" in src) == vnni, err[-300:])


def qdq_dw(shape, shared):
    """x -> Q -> DQ -> depthwise Conv (int8 per-channel weight, int32 bias)
    -> Q -> DQ.  shared: the DQ also feeds a QDQ 1x1 conv (output z) too small
    for the int8 kernel, so the conv's input is the QuantizeLinear's (q - z)
    as bf16, not held as bytes, and a NaN in x reaches it (harp's Q
    propagates it); else the Q map writes it as held bytes (a NaN as 0)."""
    c = shape[1]
    w = RNG.integers(-128, 128, (c, 1, 3, 3), dtype=np.int8)
    ws = (RNG.random(c) * 0.01 + 0.002).astype(np.float32)
    inits = [nh.from_array(np.asarray(v), n) for n, v in
             (("sx", np.float32(0.05)), ("zx", np.uint8(70)), ("w", w), ("ws", ws), ("wz", np.zeros(c, np.int8)),
              ("b", RNG.integers(-3000, 3000, c).astype(np.int32)), ("bs", np.float32(0.05) * ws), ("bz", np.zeros(c, np.int32)),
              ("sy", np.float32(0.3)), ("zy", np.uint8(100)))]
    nodes = [h.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"]), h.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"]),
             h.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"], axis=0),
             h.make_node("DequantizeLinear", ["b", "bs", "bz"], ["bd"], axis=0),
             h.make_node("Conv", ["xd", "wd", "bd"], ["cv"], group=c, pads=[1, 1, 1, 1]),
             h.make_node("QuantizeLinear", ["cv", "sy", "zy"], ["cq"]), h.make_node("DequantizeLinear", ["cq", "sy", "zy"], ["y"])]
    outs = [h.make_tensor_value_info("y", T.FLOAT, None)]
    if shared:
        inits += [nh.from_array(RNG.integers(-128, 128, (4, c, 1, 1), dtype=np.int8), "w1"),
                  nh.from_array(np.full(4, 0.01, np.float32), "w1s"), nh.from_array(np.zeros(4, np.int8), "w1z")]
        nodes += [h.make_node("DequantizeLinear", ["w1", "w1s", "w1z"], ["w1d"], axis=0), h.make_node("Conv", ["xd", "w1d"], ["zc"]),
                  h.make_node("QuantizeLinear", ["zc", "sy", "zy"], ["zq"]), h.make_node("DequantizeLinear", ["zq", "sy", "zy"], ["z"])]
        outs.append(h.make_tensor_value_info("z", T.FLOAT, None))
    g = h.make_graph(nodes, "qdq_dw", [h.make_tensor_value_info("x", T.FLOAT, shape)], outs, initializer=inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
    m.ir_version = 8
    path = os.path.join(tempfile.mkdtemp(prefix="harp_py_dwvnni_"), "qdq_dw.onnx")
    onnx.save(m, path)
    return path


def test_vnni_nan(shared):
    """A NaN in the depthwise conv's input.  Not held (shared): the VNNI
    variant flags it and the fp32 variant runs, so the output is the fp32
    path's (NaN propagated over the windows it reaches) as on the
    interpreter.  Held: x's Q map stores the NaN as byte 0, as
    onnxruntime's QuantizeLinear makes it q = 0, so the output is
    onnxruntime's (no NaN; the interpreter's Q propagates it).  Without NaN
    the same model equals onnxruntime's int8 run."""
    shape = [1, 9, 12, 10]
    path = qdq_dw(shape, shared)
    x = (RNG.standard_normal(shape) * 3).astype(np.float32)
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    p, d = ht.run(path, {"x": x}, backend="cpu")
    S.check("QDQ depthwise, no NaN: runs", p.returncode == 0, p.stderr[-600:])
    if p.returncode == 0:
        got = np.load(os.path.join(d, "y.npy"))
        e = np.abs(got.astype(np.float64) - want) / 0.3
        S.check("QDQ depthwise, no NaN: equal to onnxruntime's int8 run", float(np.mean(e <= 1e-3)) >= 0.999 and e.max() <= 1,
                f"{np.mean(e <= 1e-3):.4%} equal, max {e.max():.2f}")
    x[0, 2, 5, 4] = x[0, 7, 0, 9] = np.nan
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    outs = {}
    for be in ("cpu", "interp"):
        p, d = ht.run(path, {"x": x}, backend=be)
        S.check(f"QDQ depthwise, NaN in x ({be}): runs", p.returncode == 0, p.stderr[-600:])
        outs[be] = np.load(os.path.join(d, "y.npy")) if p.returncode == 0 else None
    if outs["cpu"] is not None and outs["interp"] is not None:
        a, b = outs["cpu"], outs["interp"]
        print(f"QDQ depthwise, NaN in x: {int(np.isnan(b).sum())} NaN outputs on the interpreter, {int(np.isnan(a).sum())} on the cpu")
        if shared:
            S.check("QDQ depthwise, NaN in x not held: the cpu's output is the interpreter's (NaN where it has them)",
                    a.shape == b.shape and np.isnan(b).any() and np.array_equal(np.isnan(a), np.isnan(b)) and
                    np.array_equal(a[~np.isnan(a)], b[~np.isnan(b)]), f"{int(np.isnan(a).sum())} vs {int(np.isnan(b).sum())} NaN")
        else:
            S.check("QDQ depthwise, NaN in x held: the cpu's output is onnxruntime's (no NaN; the interpreter has NaN)",
                    a.shape == want.shape and np.array_equal(a, want) and np.isnan(b).any(),
                    f"{int(np.sum(a != want))} differ from onnxruntime, {int(np.isnan(a).sum())} NaN")
    src, err = compiled(path)
    held = "the int8 depthwise kernel (the input held as bytes" in src
    S.check(f"QDQ depthwise, NaN in x: the VNNI variant emitted, the input {'not ' if shared else ''}held",
            "_dwt_vnni(void *ctx" in src and held != shared, err[-300:])


test_vnni_shapes()
test_vnni_nan(True)
test_vnni_nan(False)
S.close()
