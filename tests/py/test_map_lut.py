"""An elementwise chain through a requantized byte as a table (cgen_map_lut.c):
Q(x) to uint8 -> DQ -> GELU in its Erf form (Div, Erf, Add, Mul, Mul) -> Q ->
DQ, as onnxruntime's quantize_static writes a transformer's FFN.  The cpu
backend computes everything after the byte once per run, on its 256 values,
and looks each point up: its output within one step of onnxruntime's (the
graph as written, optimizations off; Erf's last bits differ), on values that
saturate at both ends of the byte too, and the C harp compiles looks up a
table (a chain whose later op reads an input does not).
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

S = ht.Suite("map_lut")
RNG = np.random.default_rng(11)
SY = np.float32(0.021)


def gelu_model(zx, mul_input):
    """x -> Q(0.05, zx) -> DQ -> Erf GELU -> Q(SY, 3) -> DQ -> y; mul_input: the
    GELU's last Mul reads the graph input g instead of the constant 0.5."""
    def q(v, s, z, o):
        return h.make_node("QuantizeLinear", [v, s, z], [o])

    def dq(v, s, z, o):
        return h.make_node("DequantizeLinear", [v, s, z], [o])
    nodes = [q("x", "sx", "zx", "xq"), dq("xq", "sx", "zx", "xd"), h.make_node("Div", ["xd", "r2"], ["t"]),
             h.make_node("Erf", ["t"], ["e"]), h.make_node("Add", ["e", "one"], ["e1"]), h.make_node("Mul", ["xd", "e1"], ["m"]),
             h.make_node("Mul", ["m", "g" if mul_input else "half"], ["ge"]), q("ge", "sy", "zy", "gq"), dq("gq", "sy", "zy", "y")]
    inits = [nh.from_array(np.float32(0.05), "sx"), nh.from_array(np.uint8(zx), "zx"), nh.from_array(np.float32(np.sqrt(2)), "r2"),
             nh.from_array(np.float32(1), "one"), nh.from_array(np.float32(0.5), "half"), nh.from_array(SY, "sy"),
             nh.from_array(np.uint8(3), "zy")]
    ins = [h.make_tensor_value_info("x", T.FLOAT, [8, 640])]
    if mul_input:
        ins.append(h.make_tensor_value_info("g", T.FLOAT, [8, 640]))
    g = h.make_graph(nodes, "lut", ins, [h.make_tensor_value_info("y", T.FLOAT, [8, 640])], initializer=inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
    m.ir_version = 8
    path = os.path.join(tempfile.mkdtemp(prefix="harp_py_lut_"), "m.onnx")
    onnx.save(m, path)
    return path


def ort_run(path, feeds):
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    return s.run(None, feeds)[0]


def compiled_c(path):
    out = tempfile.mkdtemp(prefix="harp_py_c_")
    p = subprocess.run([ht.HARP, "compile", path, "--target", "cpu", "--sources-only", "-o", out], capture_output=True, text=True, timeout=300)
    return "".join(open(os.path.join(r, f)).read() for r, _, fs in os.walk(out) for f in fs if f.endswith(".c")), p


def test_gelu_table():
    for zx, mul_input in ((128, False), (0, False), (200, False), (128, True)):
        name = f"zx {zx}" + (", Mul reads an input" if mul_input else "")
        path = gelu_model(zx, mul_input)
        x = (RNG.standard_normal((8, 640)) * 4).astype(np.float32)
        x[0, :64] = RNG.choice(np.array([-1e3, 1e3, 0.0, -0.0], np.float32), 64)  # saturated both ends, zeros
        feeds = {"x": x}
        if mul_input:
            feeds["g"] = (RNG.random((8, 640)) + 0.25).astype(np.float32)
        want = ort_run(path, feeds)
        # tier0=off: the compiled object runs, not tier 0's generic kernels
        p, d = ht.run(path, feeds, backend="cpu", extra=("--knob", "tier0=off"))
        S.check(f"{name}: runs", p.returncode == 0, p.stderr[-800:])
        if p.returncode:
            continue
        got = np.load(os.path.join(d, "y.npy"))
        steps = np.abs(got.astype(np.float64) - want.astype(np.float64)) / SY
        S.check(f"{name}: within one step of onnxruntime", got.shape == want.shape and steps.max() <= 1.0001,
                f"max {steps.max():.3f} steps")
        S.check(f"{name}: >= 99% equal to onnxruntime", np.mean(got == want) >= 0.99, f"{np.mean(got == want):.4f}")
        c, cp = compiled_c(path)
        S.check(f"{name}: compiles", cp.returncode == 0, cp.stderr[-800:])
        S.check(f"{name}: {'no ' if mul_input else ''}table lookup in the C", ("_lut(" in c) != mul_input)


if "cpu" in ht.BACKENDS:
    test_gelu_table()
S.close()
