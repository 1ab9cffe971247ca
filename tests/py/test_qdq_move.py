"""QDQ activations through movement ops and into activations, against onnxruntime.

- DQ -> Reshape / Transpose / Flatten / (Un)Squeeze -> Q of the same scale and
  zero point (onnxruntime's quantizer wraps every movement of a QDQ model so:
  BERT's heads split and joined) passes the integers through
  (onnx_qdq.c's ox_qdq_move, onnx_quant.c's quantize_fused): no division,
  rounding and clamping again.  Checked: the numbers against onnxruntime's
  int8 run (and its QDQ graph as written), and the imported graph's
  divisions (one per Q of a float value, none for the moved ones).  A Q of
  another type (u8 data through an s8 Q of the same scale and zero point)
  still saturates.
- A quantized Gemm whose requantized output a GELU reads (DQ -> Gelu -> Q,
  BERT's FFN) keeps the int8 kernel: region selection leaves an activation
  after a requantization out of a contraction's epilogue on the CPU
  (src/region/rcost.c's after_requant), else the contraction ran the bf16
  template with the GELU fused.

Needs: numpy, onnx, onnxruntime; HARP_BIN, HARP_SOURCE_DIR.  Gives: the
checks (tests/CMakeLists.txt runs every tests/py/test_*.py).
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

S = ht.Suite("qdq_move")
ht.compiled_only()  # the compiled C's numbers, not tier 0's (harp run answers its first run from tier 0)
RNG = np.random.default_rng(11)
# the FFN model is too small for the int8 kernel to pay (contract_q8.c): taken anyway
Q8_FORCE = ["--knob", "int8=force"]


def save(nodes, inputs, outputs, inits):
    """The opset-13 model of these nodes, saved under a temporary directory; its path."""
    g = h.make_graph(nodes, "q", inputs, outputs, initializer=inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
    m.ir_version = 8
    path = os.path.join(tempfile.mkdtemp(), "m.onnx")
    onnx.save(m, path)
    return path


def qdq(nodes, x, out, s, z):
    """Appends Q -> DQ of x (scale name s, zero point name z) to nodes; out is the DQ's output."""
    nodes += [h.make_node("QuantizeLinear", [x, s, z], [out + "_q"]), h.make_node("DequantizeLinear", [out + "_q", s, z], [out])]


def ort_run(path, feeds, optimize=True):
    so = ort.SessionOptions()
    if not optimize:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    return s.run(None, feeds)[0]


def divisions(path):
    """The FDIV ops of the regions harp forms of path (cpu)."""
    d = tempfile.mkdtemp()
    p = subprocess.run([ht.HARP, "dump", path, "--dump", "region", "--dump-dir", d], capture_output=True, text=True, timeout=300)
    if p.returncode:
        return -1, p.stderr[-400:]
    regions = json.load(open(os.path.join(d, "region.json")))["regions"]
    n = sum(1 for r in regions for b in r["body"] if "op" in b and b["op"]["uop"] == "FDIV")
    return n, ""


def within_steps(name, got, want, step, exact):
    """got against want in steps of the output scale: within one step on >= 99.9% (exact: all equal)."""
    err = np.abs(got.astype(np.float64) - want.astype(np.float64)) / step
    frac = float(np.mean(err <= 1 + 1e-3)) if exact is False else float(np.mean(err <= 1e-3))
    print(f"{name}: {frac:.4%} {'equal' if exact else 'within one step'}, max {err.max():.2f} steps")
    S.check(name, got.shape == want.shape and frac >= (1.0 if exact else 0.999), f"{frac:.4%}, max {err.max():.2f} steps")


def heads_model(qt2):
    """BERT's attention scores in QDQ: q and k from one quantized x (u8, zero
    point 0), each through Reshape [S, H, D] and Transpose to [H, S, D] / [H, D, S]
    with a Q / DQ of x's parameters after every move (Flatten, Unsqueeze,
    Squeeze on k's way; the Flatten's of another zero point, the Squeeze's of
    another scale), then DQ, DQ -> MatMul -> Q -> DQ.  qt2: the type of the
    Q after q's Reshape (uint8 as x, or int8: the same scale and zero point,
    another range, so that its values above 127 saturate)."""
    S_, H, D = 16, 4, 8
    nodes = []
    inits = [nh.from_array(np.array(0.05, np.float32), "s"), nh.from_array(np.array(0, np.uint8), "z"),
             nh.from_array(np.array(0, np.int8 if qt2 == T.INT8 else np.uint8), "z2"), nh.from_array(np.array(40, np.uint8), "z3"),
             nh.from_array(np.array(0.07, np.float32), "sb"),
             nh.from_array(np.array(4.0, np.float32), "sy"), nh.from_array(np.array(0, np.uint8), "zy"),
             nh.from_array(np.array([S_, H, D], np.int64), "shp"), nh.from_array(np.array([0], np.int64), "ax0")]
    qdq(nodes, "x", "xd", "s", "z")
    nodes.append(h.make_node("Reshape", ["xd", "shp"], ["q1"]))
    qdq(nodes, "q1", "q1d", "s", "z2")
    nodes.append(h.make_node("Transpose", ["q1d"], ["q2"], perm=[1, 0, 2]))
    qdq(nodes, "q2", "q2d", "s", "z2")
    nodes.append(h.make_node("Flatten", ["xd"], ["k0"], axis=0))  # [1, S * E]
    qdq(nodes, "k0", "k0d", "s", "z3")  # another zero point: requantized
    nodes.append(h.make_node("Squeeze", ["k0d", "ax0"], ["k1"]))  # [S * E]
    qdq(nodes, "k1", "k1d", "sb", "z3")  # k0's zero point, another scale: requantized
    nodes.append(h.make_node("Reshape", ["k1d", "shp"], ["k2"]))
    qdq(nodes, "k2", "k2d", "s", "z")
    nodes.append(h.make_node("Transpose", ["k2d"], ["k3"], perm=[1, 2, 0]))
    qdq(nodes, "k3", "k3d", "s", "z")
    nodes.append(h.make_node("Unsqueeze", ["k3d", "ax0"], ["k4"]))  # [1, H, D, S]
    qdq(nodes, "k4", "k4d", "s", "z")
    nodes.append(h.make_node("MatMul", ["q2d", "k4d"], ["sc"]))  # [1, H, S, S]
    qdq(nodes, "sc", "y", "sy", "zy")
    return save(nodes, [h.make_tensor_value_info("x", T.FLOAT, [S_, H * D])], [h.make_tensor_value_info("y", T.FLOAT, [1, H, S_, S_])],
                inits), (S_, H * D)


def test_moves():
    """The integers moved, not requantized: equal to onnxruntime on both
    backends, and four divisions in the imported graph (x's Q, k0's of
    another zero point, k1's of another scale, k2's back to x's) where the
    other Qs after a move are of the same parameters as their input's; with q's Q of int8, saturated as
    onnxruntime saturates it."""
    for qt2, name in ((T.UINT8, "same type"), (T.INT8, "u8 through an s8 Q")):
        path, shape = heads_model(qt2)
        x = (np.abs(RNG.standard_normal(shape)) * 6).astype(np.float32)  # q up to 255: above 127 in part
        want, lit = ort_run(path, {"x": x}), ort_run(path, {"x": x}, optimize=False)
        for be in ht.BACKENDS:
            p, d = ht.run(path, {"x": x}, backend=be)
            S.check(f"moves, {name} ({be}): runs", p.returncode == 0, p.stderr[-600:])
            if p.returncode == 0:
                got = np.load(os.path.join(d, "y.npy"))
                within_steps(f"moves, {name} ({be}): y as onnxruntime's int8 run", got, want, 4.0, False)
                within_steps(f"moves, {name} ({be}): y as onnxruntime's QDQ graph as written", got, lit, 4.0, False)
        yq = np.rint(want / 4.0)
        S.check(f"moves, {name}: y not saturated", float(np.mean((yq > 0) & (yq < 255))) > 0.5, f"{np.mean((yq > 0) & (yq < 255)):.2%}")
        if qt2 == T.UINT8:
            n, err = divisions(path)
            S.check(f"moves, {name}: four divisions (x's, k0's, k1's, k2's Q), the moved integers passed through", n == 4, f"{n} FDIV {err}")
        else:  # q's s8 Q clamps x's u8 values: the scores differ from those of the u8 model
            S.check(f"moves, {name}: q saturated at 127", float(np.mean(np.rint(x / 0.05) > 127)) > 0.05, "too few values above 127")


def shared_model(transpose=False):
    """x [1, S, E] quantized, Reshape to [S, E] twice (each with a Q / DQ of
    x's parameters, as BERT's q, k and v projections read it), each read by
    a quantized MatMul of its own weight, their sum quantized: y.  With
    transpose, S = E and Transposes of perm (0, 2, 1) and (0, 1, 2) in place
    of the Reshapes: moves to the same shape that differ."""
    S_, E = (32, 32) if transpose else (32, 64)
    nodes, inits = [], [nh.from_array(np.array(0.05, np.float32), "s"), nh.from_array(np.array(100, np.uint8), "z"),
                        nh.from_array(np.array(0.2, np.float32), "sa"), nh.from_array(np.array(128, np.uint8), "za"),
                        nh.from_array(np.array(0.3, np.float32), "sy"), nh.from_array(np.array(128, np.uint8), "zy"),
                        nh.from_array(np.array([S_, E], np.int64), "s2")]
    qdq(nodes, "x", "xd", "s", "z")
    for i in range(2):
        inits += [nh.from_array(RNG.integers(-127, 128, (E, E)).astype(np.int8), f"w{i}"),
                  nh.from_array((RNG.uniform(0.5, 1.5, E) * 0.01).astype(np.float32), f"ws{i}"), nh.from_array(np.zeros(E, np.int8), f"wz{i}")]
        nodes += [h.make_node("Transpose", ["xd"], [f"r{i}"], perm=[[0, 2, 1], [0, 1, 2]][i]) if transpose else
                  h.make_node("Reshape", ["xd", "s2"], [f"r{i}"])]
        qdq(nodes, f"r{i}", f"rd{i}", "s", "z")
        nodes += [h.make_node("DequantizeLinear", [f"w{i}", f"ws{i}", f"wz{i}"], [f"wd{i}"], axis=1),
                  h.make_node("MatMul", [f"rd{i}", f"wd{i}"], [f"a{i}"])]
        qdq(nodes, f"a{i}", f"ad{i}", "sa", "za")
    nodes.append(h.make_node("Add", ["ad0", "ad1"], ["o"]))
    qdq(nodes, "o", "y", "sy", "zy")
    yshape = [1, S_, E] if transpose else [S_, E]
    return save(nodes, [h.make_tensor_value_info("x", T.FLOAT, [1, S_, E])], [h.make_tensor_value_info("y", T.FLOAT, yshape)], inits), (1, S_, E)


def test_shared_move():
    """The same move of the same integers made once: one conversion of x's
    integers for both MatMuls (x's Q, that conversion, the two MatMuls, the
    sum: at most 4 kernels; 5 when each Reshape had its own); two Transposes
    to the same shape in another order kept apart; equal to onnxruntime."""
    for tr in (False, True):
        name = "shared move" + (", two orders" if tr else "")
        path, shape = shared_model(tr)
        if not tr:
            d = tempfile.mkdtemp()
            p = subprocess.run([ht.HARP, "dump", path, "--dump", "region", "--dump-dir", d],
                               capture_output=True, text=True, timeout=300)
            n = len(json.load(open(os.path.join(d, "region.json")))["regions"]) if p.returncode == 0 else -1
            S.check(f"{name}: one operand form of x's integers", 0 < n <= 4, f"{n} regions {p.stderr[-300:]}")
        x = (RNG.standard_normal(shape) * 2).astype(np.float32)
        want = ort_run(path, {"x": x})
        for be in ht.BACKENDS:
            p, d = ht.run(path, {"x": x}, backend=be)
            S.check(f"{name} ({be}): runs", p.returncode == 0, p.stderr[-600:])
            if p.returncode == 0:
                within_steps(f"{name} ({be}): y as onnxruntime's int8 run", np.load(os.path.join(d, "y.npy")), want, 0.3, False)
        yq = np.rint(want / 0.3) + 128
        S.check(f"{name}: y not saturated", float(np.mean((yq > 0) & (yq < 255))) > 0.5, f"{np.mean((yq > 0) & (yq < 255)):.2%}")


def ffn_model():
    """BERT's FFN in QDQ, as onnxruntime's quantizer writes it: DQ -> Gemm
    (int8 weight per channel, int32 bias) -> Q -> DQ -> Reshape to 3-D -> Q ->
    DQ -> GELU (x Phi(x) with Erf) -> Reshape -> Q -> DQ -> Gemm -> Q -> DQ."""
    M, K, N = 64, 128, 256
    nodes, inits = [], [nh.from_array(np.array(0.04, np.float32), "sx"), nh.from_array(np.array(128, np.uint8), "zx"),
                        nh.from_array(np.array(0.06, np.float32), "sa"), nh.from_array(np.array(120, np.uint8), "za"),
                        nh.from_array(np.array(0.03, np.float32), "sg"), nh.from_array(np.array(10, np.uint8), "zg"),
                        nh.from_array(np.array(0.5, np.float32), "sy"), nh.from_array(np.array(128, np.uint8), "zy"),
                        nh.from_array(np.array(0.7071067811865476, np.float32), "rs2"), nh.from_array(np.array(1.0, np.float32), "one"),
                        nh.from_array(np.array(0.5, np.float32), "half"), nh.from_array(np.array([1, M, N], np.int64), "s3"),
                        nh.from_array(np.array([M, N], np.int64), "s2")]
    for i, (k, n, sin) in enumerate(((K, N, 0.04), (N, K, 0.03))):
        ws = (RNG.uniform(0.5, 1.5, n) * 0.01).astype(np.float32)
        inits += [nh.from_array(RNG.integers(-127, 128, (k, n)).astype(np.int8), f"w{i}"), nh.from_array(ws, f"ws{i}"),
                  nh.from_array(np.zeros(n, np.int8), f"wz{i}"), nh.from_array(RNG.integers(-2000, 2000, n).astype(np.int32), f"b{i}"),
                  nh.from_array((ws * sin).astype(np.float32), f"bs{i}"), nh.from_array(np.zeros(n, np.int32), f"bz{i}")]
        nodes += [h.make_node("DequantizeLinear", [f"w{i}", f"ws{i}", f"wz{i}"], [f"wd{i}"], axis=1),
                  h.make_node("DequantizeLinear", [f"b{i}", f"bs{i}", f"bz{i}"], [f"bd{i}"], axis=0)]
    qdq(nodes, "x", "xd", "sx", "zx")
    nodes.append(h.make_node("Gemm", ["xd", "wd0", "bd0"], ["a0"]))
    qdq(nodes, "a0", "a0d", "sa", "za")
    nodes.append(h.make_node("Reshape", ["a0d", "s3"], ["a"]))  # [1, M, N] as BERT's
    qdq(nodes, "a", "ad", "sa", "za")
    nodes += [h.make_node("Mul", ["ad", "rs2"], ["g0"]), h.make_node("Erf", ["g0"], ["g1"]), h.make_node("Add", ["g1", "one"], ["g2"]),
              h.make_node("Mul", ["ad", "g2"], ["g3"]), h.make_node("Mul", ["g3", "half"], ["g"]),
              h.make_node("Reshape", ["g", "s2"], ["g4"])]
    qdq(nodes, "g4", "gd", "sg", "zg")
    nodes.append(h.make_node("Gemm", ["gd", "wd1", "bd1"], ["o"]))
    qdq(nodes, "o", "y", "sy", "zy")
    return save(nodes, [h.make_tensor_value_info("x", T.FLOAT, [M, K])], [h.make_tensor_value_info("y", T.FLOAT, [M, K])], inits), (M, K)


def test_gelu_after_requant():
    """Both Gemms on the int8 kernel (the first's region without the GELU),
    the GELU in a kernel between them; within one step of onnxruntime's int8 run (the int8
    kernels forced: the model is small)."""
    path, shape = ffn_model()
    d = tempfile.mkdtemp(prefix="harp_py_c_")
    p = subprocess.run([ht.HARP, "compile", path, "--target", "cpu", "--sources-only", "-o", d, *Q8_FORCE], capture_output=True, text=True, timeout=300)
    src = "".join(open(os.path.join(r, f)).read() for r, _, fs in os.walk(d) for f in fs if f.endswith(".c"))
    q8 = re.findall(r"static int \w+?_k(\d+)_q8\(hprt_pool", src)
    S.check("gelu after requant: both Gemms on the int8 kernel", p.returncode == 0 and len(q8) == 2, f"{q8} {p.stderr[-300:]}")
    x = (RNG.standard_normal(shape) * 2).astype(np.float32)
    want = ort_run(path, {"x": x})
    p, d = ht.run(path, {"x": x}, backend="cpu", extra=Q8_FORCE)
    S.check("gelu after requant: runs", p.returncode == 0, p.stderr[-600:])
    if p.returncode == 0:
        got = np.load(os.path.join(d, "y.npy"))
        within_steps("gelu after requant: y within one step of onnxruntime's int8 run", got, want, 0.5, False)
        yq = np.rint(want / 0.5) + 128
        S.check("gelu after requant: y not saturated", float(np.mean((yq > 0) & (yq < 255))) > 0.5, f"{np.mean((yq > 0) & (yq < 255)):.2%}")


test_moves()
test_shared_move()
test_gelu_after_requant()
S.close()
