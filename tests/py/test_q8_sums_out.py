"""A QDQ Gemm whose int8 kernel's fp32 sums are the kernel's output as
they are (contract_q8.c's q8_sums_are_y: no epilogue step, no
requantization; a QDQ GEMM followed by DQ -> SiLU -> Q, its bias, scales,
SiLU and requantization left to the next kernel by region selection,
rcost.c's after_requant; a GELU there is the int8 kernel's own table,
test_q8_gelu_lut.py): the kernel stores them into y
itself, no output pass copies them.  Against onnxruntime's int8 run (its
QGemm fusion): equal on >= 99.9% of elements, none more than one step of
the output's scale off, > 30% unsaturated (quant_models.check_q8_out;
onnxruntime's run of
the graph as written, fp32 Gemm, is no reference here: its sums round
differently and the activation widens a flipped step to 2-3 steps off its
own int8 run); and the generated C has the int8 kernel
writing y (`cx.y)) rc = 2`) with no output pass (`_q8out`) for it.
Rows 128 and 130 (2 and 4 past a multiple of the VNNI tile's 6: the last
row block on its own tile of those rows, cgen_qgemm.c's tilem / tilemt),
columns a multiple of 64 (1536) and not (200).  Needs: HARP_BIN, onnx,
onnxruntime.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import harp_test as ht  # noqa: E402

ht.onnx_or_skip()
from onnx import TensorProto as T  # noqa: E402
from onnx import helper as h  # noqa: E402
from quant_models import check_q8_out, compiled_c, init, model, ort_run, vi  # noqa: E402

ht.compiled_only()  # the int8 kernel's numbers, not tier 0's (harp_test.compiled_only)
S = ht.Suite("q8_sums_out")
RNG = np.random.default_rng(5)


def ffn1(m, k, n):
    """The QDQ file of y = DQ(Q(silu(DQ(Q(Gemm(DQ(Q(x)), DQ(w), b)))))): x [m, k]
    fp32, w int8 [k, n] per output channel, a fp32 bias, uint8 activations
    (zero points 131 and 9 as onnxruntime's calibration made them for BERT)."""
    sx, sh, sy = np.float32(0.03), np.float32(0.04), np.float32(0.02)
    ws = (RNG.random(n) * 0.004 + 0.002).astype(np.float32)
    w = RNG.integers(-128, 128, (k, n), dtype=np.int8)
    inits = [init(name, v) for name, v in
             (("sx", sx), ("zx", np.uint8(128)), ("w", w), ("ws", ws), ("wz", np.zeros(n, np.int8)),
              ("b", (RNG.standard_normal(n) * 0.5).astype(np.float32)), ("sh", sh), ("zh", np.uint8(131)),
              ("sy", sy), ("zy", np.uint8(9)))]
    q, dq = "QuantizeLinear", "DequantizeLinear"
    nodes = [h.make_node(q, ["x", "sx", "zx"], ["xq"]), h.make_node(dq, ["xq", "sx", "zx"], ["xd"]),
             h.make_node(dq, ["w", "ws", "wz"], ["wd"], axis=1), h.make_node("Gemm", ["xd", "wd", "b"], ["cb"]),
             h.make_node(q, ["cb", "sh", "zh"], ["hq"]),
             h.make_node(dq, ["hq", "sh", "zh"], ["hd"]), h.make_node("Sigmoid", ["hd"], ["sg"]),
             h.make_node("Mul", ["hd", "sg"], ["g"]),
             h.make_node(q, ["g", "sy", "zy"], ["gq"]), h.make_node(dq, ["gq", "sy", "zy"], ["y"])]
    return model(nodes, [vi("x", T.FLOAT, [m, k])], [vi("y", T.FLOAT, None)], inits, opset=20), float(sy)


def test_ffn1():
    for m, k, n in ((128, 768, 1536), (130, 256, 200)):
        name = f"QDQ Gemm + SiLU M={m} K={k} N={n}"
        path, sy = ffn1(m, k, n)
        x = (RNG.standard_normal((m, k)) * 1.5).astype(np.float32)
        want = ort_run(path, {"x": x})["y"]
        p, d = ht.run(path, {"x": x}, backend="cpu")
        S.check(f"{name}: runs", p.returncode == 0, p.stderr[-600:])
        if p.returncode == 0:
            check_q8_out(S, name, "y", np.load(os.path.join(d, "y.npy")), want, sy, 9)
        src, err = compiled_c(path)
        direct, passes, q8 = src.count("cx.y)) rc = 2"), src.count("_q8out(void *ctx"), src.count("_q8(pool, bufs);")
        S.check(f"{name}: the int8 kernel stores its sums as y, no output pass",
                q8 == 1 and direct == 1 and passes == 0, f"{q8} int8 kernels, {direct} storing y, {passes} output passes; {err[-300:]}")


test_ffn1()
S.close()
