"""A QuantizeLinear map kernel writing held u8 bytes, against onnxruntime.

q8_hold.c holds a buffer as bytes (x + z) between int8 kernels; a map
kernel whose output provably holds 8-bit integers (a QDQ model's input
Q -> DQ: x / s + z, rint, clamp, z taken off) counts as such a writer
(contract_rows_c.c's map_q8_out, cgen_map's y_u8), so the stem conv reads
the bytes with no conversion pass.  Checked: a QDQ conv whose input Q has
zero point 0 / 128 / 255 (odd sizes) equal to onnxruntime's int8 run, and
its generated C's map kernel stores held bytes; a Q whose DQ a second,
not int8, consumer also reads (a MaxPool): the import gives that consumer
its own fp32 DQ (another kernel, another buffer), so the conv's bf16(q - z)
buffer is still held, and both outputs equal onnxruntime's (the MaxPool's
exactly: it must not read the bytes); NaN and +-inf in x with the Q to u8
and to int8 (zero points at the ends and inside): the held bytes take a NaN
as onnxruntime's QuantizeLinear does (byte 0: q = 0 / -128), y equal to
onnxruntime's where the interpreter (harp's Q keeps a NaN) has NaN.

Needs: numpy, onnx, onnxruntime; HARP_BIN, HARP_SOURCE_DIR.  Gives: the
checks (tests/CMakeLists.txt runs every tests/py/test_*.py).
"""
import glob
import os
import re
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

ht.compiled_only()  # the held bytes' kernels' numbers, not tier 0's (harp_test.compiled_only)
S = ht.Suite("q8_input_held")
RNG = np.random.default_rng(5)
FORCE = ["--knob", "int8=force"]  # small convs: the int8 kernel taken though it may not pay
SX, SY = 0.02, 0.05


def conv_model(zx, side, signed=False):
    """x [1, 3, 17, 19] -> Q(SX, zx) -> DQ -> Conv 3x3 stride 2 pad 1 (8 out
    channels, int8 weight per channel, int32 bias) -> Q(SY, 7) -> DQ -> y;
    side: the input DQ also feeds a MaxPool (not an int8 kernel), output s;
    signed: x's Q to int8 (zx in [-128, 127])."""
    w = RNG.integers(-127, 128, (8, 3, 3, 3)).astype(np.int8)
    ws = (RNG.uniform(0.5, 1.5, 8) * 0.01).astype(np.float32)
    b = RNG.integers(-300, 300, 8).astype(np.int32)
    inits = [nh.from_array(np.array(SX, np.float32), "sx"), nh.from_array(np.array(zx, np.int8 if signed else np.uint8), "zx"),
             nh.from_array(w, "w"), nh.from_array(ws, "ws"), nh.from_array(np.zeros(8, np.int8), "wz"),
             nh.from_array(b, "b"), nh.from_array((ws * SX).astype(np.float32), "bs"), nh.from_array(np.zeros(8, np.int32), "bz"),
             nh.from_array(np.array(SY, np.float32), "sy"), nh.from_array(np.array(7, np.uint8), "zy")]
    nodes = [h.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"]), h.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"]),
             h.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"], axis=0),
             h.make_node("DequantizeLinear", ["b", "bs", "bz"], ["bd"], axis=0),
             h.make_node("Conv", ["xd", "wd", "bd"], ["c"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
             h.make_node("QuantizeLinear", ["c", "sy", "zy"], ["cq"]), h.make_node("DequantizeLinear", ["cq", "sy", "zy"], ["y"])]
    outs = [h.make_tensor_value_info("y", T.FLOAT, None)]
    if side:
        nodes.append(h.make_node("MaxPool", ["xd"], ["s"], kernel_shape=[3, 3], strides=[2, 2]))
        outs.append(h.make_tensor_value_info("s", T.FLOAT, None))
    g = h.make_graph(nodes, "q", [h.make_tensor_value_info("x", T.FLOAT, [1, 3, 17, 19])], outs, initializer=inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
    m.ir_version = 8
    path = os.path.join(tempfile.mkdtemp(), "m.onnx")
    onnx.save(m, path)
    return path


def held_maps(d):
    """The map kernels of the generated C under d that store held bytes."""
    n = 0
    for f in glob.glob(os.path.join(d, "**", "*.c"), recursive=True):
        n += len(re.findall(r"map \d+ points.*-> u8 \(\+\d+, held\) ----", open(f).read()))
    return n


def check(zx, side):
    path = conv_model(zx, side)
    # x spans the whole u8 range around zx and past it (saturation at 0 and 255)
    x = ((RNG.uniform(-300, 300, (1, 3, 17, 19)) * SX)).astype(np.float32)
    x.flat[:6] = np.array([-0.5, 0.5, 1.5, -1.5, 2.5, 0.01]) * SX  # ties: rint to even
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    want = sess.run(None, {"x": x})
    name = f"zero point {zx}{', a MaxPool also reads the DQ' if side else ''}"
    d = tempfile.mkdtemp()
    p, out = ht.run(path, {"x": x}, backend="cpu", extra=[*FORCE, "--dump", "c", "--dump-dir", d])
    S.check(f"{name}: runs", p.returncode == 0, p.stderr[-600:])
    if p.returncode:
        return
    y = np.load(os.path.join(out, "y.npy"))
    bad = int(np.sum(y != want[0]))
    S.check(f"{name}: y equal to onnxruntime's", y.shape == want[0].shape and bad == 0, f"{bad} of {y.size} differ, max {np.abs(y - want[0]).max()}")
    if side:
        s = np.load(os.path.join(out, "s.npy"))
        S.check(f"{name}: s equal to onnxruntime's", s.shape == want[1].shape and np.array_equal(s, want[1]), f"max {np.abs(s - want[1]).max()}")
    n = held_maps(d)
    S.check(f"{name}: one Q map kernel stores held bytes", n == 1, f"{n} held map kernels")


def check_nan(zx, signed):
    """NaN (and +-inf) in x, the Q to u8 or int8: the map holding the bytes
    stores a NaN as byte 0, the lowest value of the proven range, which is
    what onnxruntime's QuantizeLinear makes of a NaN (q = 0 for u8, -128 for
    int8; then DQ): y equal to onnxruntime's, no NaN, where the interpreter
    (whose Q propagates a NaN, docs/onnx.md) has NaN."""
    path = conv_model(zx, False, signed)
    x = ((RNG.uniform(-200, 200, (1, 3, 17, 19)) * SX)).astype(np.float32)
    x.flat[[0, 40, 77, 200, 201, 500]] = [np.nan, -np.nan, np.inf, -np.inf, np.nan, np.nan]
    name = f"NaN in x, zero point {zx}{' int8' if signed else ''}"
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    d = tempfile.mkdtemp()
    p, out = ht.run(path, {"x": x}, backend="cpu", extra=[*FORCE, "--dump", "c", "--dump-dir", d])
    q, iout = ht.run(path, {"x": x}, backend="interp")
    S.check(f"{name}: runs", p.returncode == 0 and q.returncode == 0, p.stderr[-600:] + q.stderr[-300:])
    if p.returncode or q.returncode:
        return
    y, yi = np.load(os.path.join(out, "y.npy")), np.load(os.path.join(iout, "y.npy"))
    n, bad = held_maps(d), int(np.sum(y != want))
    S.check(f"{name}: held, y equal to onnxruntime's (no NaN)", n == 1 and bad == 0 and not np.isnan(want).any() and np.isnan(yi).any(),
            f"{n} held map kernels, {bad} of {y.size} differ, {int(np.isnan(yi).sum())} NaN on the interpreter")


for zx in (0, 128, 255):
    check(zx, False)
check(128, True)
for zx, signed in ((0, False), (200, False), (-128, True), (5, True), (127, True)):
    check_nan(zx, signed)
S.close()
