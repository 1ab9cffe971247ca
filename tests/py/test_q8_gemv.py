"""A QDQ classifier head of a few rows (DQ -> Gemm / MatMul -> Q with M <=
8, the case the skinny bf16 kernel took) on the int8 kernel: its weight B
packed once as int8 (contract_q8.c's cc_q8_gemv, contract_c.c's prepack_b),
against onnxruntime's int8 run (QGemm / QLinearMatMul): equal within one
step of the output's scale on >= 99.9% of elements, at most one step, most
of the outputs unsaturated; and the generated C has the int8 kernel for it.
Rows 1 and 3, the weight as W^T (Gemm transB) and as W (MatMul), odd K and
N, per-channel int8 weights with -128 / 127 among them, the activations'
zero point at 0, inside and 255.  Sizes that pay (K 1280 x N 1000 as
MobileNetV2's head) take the int8 kernel by default, the odd ones with
int8=force.  Needs: HARP_BIN, onnx, onnxruntime.
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

ht.compiled_only()  # the int8 kernel's numbers, not tier 0's (harp_test.compiled_only)
S = ht.Suite("q8_gemv")
RNG = np.random.default_rng(11)


def head(m, k, n, zx, op):
    """The QDQ file of y = DQ(Q(op(DQ(Q(x)), DQ(w)) + b)): x [m, k] fp32, w int8
    per output channel ([n, k] for Gemm transB=1, [k, n] for MatMul), an
    int32 bias (Gemm only), uint8 activations."""
    sx, sy = np.float32(0.02), np.float32(0.6)
    ws = (RNG.random(n) * 0.004 + 0.001).astype(np.float32)
    w = RNG.integers(-128, 128, (n, k) if op == "Gemm" else (k, n), dtype=np.int8)
    w.reshape(-1)[::97] = RNG.choice(np.array([-128, 127], np.int8), w.reshape(-1)[::97].shape)
    inits = [nh.from_array(np.asarray(v), name) for name, v in
             (("sx", sx), ("zx", np.uint8(zx)), ("w", w), ("ws", ws), ("wz", np.zeros(n, np.int8)), ("sy", sy),
              ("zy", np.uint8(131)))]
    if op == "Gemm":
        inits += [nh.from_array(v, name) for name, v in (("b", RNG.integers(-20000, 20000, n).astype(np.int32)), ("bs", sx * ws),
                                                          ("bz", np.zeros(n, np.int32)))]
    dq_w = h.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"], axis=0 if op == "Gemm" else 1)
    if op == "Gemm":
        mm = [h.make_node("DequantizeLinear", ["b", "bs", "bz"], ["bd"], axis=0),
              h.make_node("Gemm", ["xd", "wd", "bd"], ["c"], transB=1)]
    else:
        mm = [h.make_node("MatMul", ["xd", "wd"], ["c"])]
    nodes = [h.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"]), h.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"]),
             dq_w, *mm, h.make_node("QuantizeLinear", ["c", "sy", "zy"], ["cq"]),
             h.make_node("DequantizeLinear", ["cq", "sy", "zy"], ["y"])]
    g = h.make_graph(nodes, "head", [h.make_tensor_value_info("x", T.FLOAT, [m, k])],
                     [h.make_tensor_value_info("y", T.FLOAT, None)], initializer=inits)
    mod = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
    mod.ir_version = 8
    path = os.path.join(tempfile.mkdtemp(prefix="harp_py_q8gemv_"), "head.onnx")
    onnx.save(mod, path)
    return path, float(sy)


def int8_kernels(path, extra):
    """How many int8 kernel wrappers the C `harp compile` makes of path has, and its stderr."""
    out = tempfile.mkdtemp(prefix="harp_py_q8gemv_c_")
    p = subprocess.run([ht.HARP, "compile", path, "--target", "cpu", "-o", out, *extra], capture_output=True, text=True,
                       timeout=300)
    src = "".join(open(os.path.join(r, f)).read() for r, _, fs in os.walk(out) for f in fs if f.endswith(".c"))
    return src.count("_q8(pool, bufs);"), p.stderr


def test_gemv_heads():
    cases = [(1, 1280, 1000, 128, "Gemm", []), (3, 1280, 1000, 0, "MatMul", []),
             (1, 301, 77, 255, "Gemm", ["--knob", "int8=force"]), (3, 97, 45, 40, "MatMul", ["--knob", "int8=force"])]
    for m, k, n, zx, op, extra in cases:
        name = f"int8 GEMV {op} M={m} K={k} N={n} zx={zx}{' (forced)' if extra else ''}"
        path, sy = head(m, k, n, zx, op)
        x = (RNG.standard_normal((m, k)) * 1.5).astype(np.float32)
        x[:, ::7] = RNG.choice(np.array([-1e3, 1e3], np.float32), x[:, ::7].shape)
        s = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        want = s.run(None, {"x": x})[0]
        p, d = ht.run(path, {"x": x}, backend="cpu", extra=extra)
        S.check(f"{name}: runs", p.returncode == 0, p.stderr[-600:])
        if p.returncode == 0:
            got = np.load(os.path.join(d, "y.npy"))
            e = np.abs(got.astype(np.float64) - want) / sy
            inside = float(np.mean((want / sy > -130) & (want / sy < 123)))
            print(f"{name}: {np.mean(e <= 1e-3):.4%} equal, {np.mean(e <= 1 + 1e-3):.4%} within one step, max {e.max():.2f}, "
                  f"{inside:.1%} unsaturated")
            S.check(f"{name}: within one step of onnxruntime's int8 run",
                    got.shape == want.shape and float(np.mean(e <= 1 + 1e-3)) >= 0.999 and e.max() <= 1 + 1e-3 and inside > 0.5,
                    f"{np.mean(e <= 1 + 1e-3):.4%} within one step, max {e.max():.2f}, {inside:.1%} unsaturated")
        q8, err = int8_kernels(path, extra)
        S.check(f"{name}: on the int8 kernel", q8 == 1, f"{q8} int8 kernels; {err[-300:]}")


test_gemv_heads()
S.close()
