"""ONNX LRN on the cpu backend against numpy (the ONNX definition in float64),
at sizes that leave vector tails (channels and planes not multiples of 16),
even and odd windows, the betas models use (0.75, 0.5, 1) and others, and a
window wider than the channels.  And the kernels' reads: the LRN works on an
[N, 1, C, H*W] view of its input and the C backend puts a split index back
together (rc_linear: X / n and X % n over adjacent axes are X), so no kernel
divides per element; the same for a Reshape read by a Relu.  A beta in
quarters (0.75, 0.5, 1, 1.25, ...) takes roots and products, no log or exp, and so
does Pow with such a constant exponent.  The padded
window read keeps the lanes' axis out of the guard's product (region_c.c,
uniform_guard_index: contiguous lanes, not a gather)."""
import re
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import harp_test as ht  # noqa: E402

ht.onnx_or_skip(runtime=False)
import onnx  # noqa: E402
from onnx_models import mk, model, vi  # noqa: E402
ht.compiled_only()  # the LRN kernels' numbers, not tier 0's (harp_test.py)

rng = np.random.default_rng(11)
S = ht.Suite("lrn")


def lrn(x, size, alpha, beta, bias):
    """The ONNX definition: channels c - floor((size-1)/2) .. c + ceil((size-1)/2)."""
    sq, C = x.astype(np.float64) ** 2, x.shape[1]
    s = np.stack([sq[:, max(0, c - (size - 1) // 2):min(C, c + size // 2 + 1)].sum(1) for c in range(C)], 1)
    return x / (bias + alpha / size * s) ** beta


def run_cpu(name, nodes, x, want):
    m = model(nodes, [vi("x", x.shape, onnx.TensorProto.FLOAT)], [vi("y", None)], [])
    path = os.path.join(tempfile.mkdtemp(), "m.onnx")
    onnx.save(m, path)
    dump = tempfile.mkdtemp()
    p, d = ht.run(path, {"x": x}, backend="cpu", extra=["--dump", "c", "--dump-dir", dump])
    S.check(f"{name}: runs", p.returncode == 0, p.stderr.strip()[-600:])
    if p.returncode:
        return
    ok, why = ht.close(np.load(os.path.join(d, "y.npy")), want, rtol=2e-5, atol=1e-6)
    S.check(f"{name}: matches numpy", ok, why)
    src = open(os.path.join(dump, "model.c")).read()
    body = [l for l in src.splitlines() if ("p0[" in l or "p1[" in l) and " % " in l]
    S.check(f"{name}: no per-element division in the reads", not body, "\n".join(body[:3]))
    size = {a.name: a.i for a in nodes[0].attribute}.get("size", 1)
    if nodes[0].op_type == "LRN" and x.ndim > 2 and x.shape[1] > 1 and size > 1:  # a window, padded
        win = [l for l in src.splitlines() if "l_ = p" in l]
        S.check(f"{name}: the window's read is contiguous along the lanes",
                win and all(re.search(r"l_ = p\d+\[\(\(c\d+\) \* 1L\) \+ \(", l) for l in win), "\n".join(win[:3]))
    return src


for shape, size, alpha, beta, bias in [((1, 19, 5, 7), 5, 1e-2, 0.75, 1.0), ((2, 33, 3, 11), 4, 0.3, 0.5, 2.0),
                                       ((1, 17, 9, 1), 3, 0.5, 1.0, 1.5), ((1, 5, 6, 6), 7, 2.0, 0.6, 0.5),
                                       ((1, 24, 13), 2, 1e-3, 1.25, 1.0), ((1, 3, 4, 5), 1, 0.1, 0.25, 1.0),
                                       ((1, 6, 3, 3), 3, 0.2, 2.0, 1.0), ((1, 6, 3, 3), 3, 0.2, -0.5, 1.0)]:
    x = (rng.standard_normal(shape) * 3).astype(np.float32)
    src = run_cpu(f"LRN {shape} size {size} beta {beta}",
                  [mk("LRN", ["x"], ["y"], size=size, alpha=alpha, beta=beta, bias=bias)], x, lrn(x, size, alpha, beta, bias))
    if src:  # a beta in quarters from roots and products (onnx_nn.c, pow_quarters), else a log and an exp
        S.check(f"LRN beta {beta}: log and exp only where beta is no multiple of 1/4",
                ("= hp_log2f(" in src) == (beta * 4 != round(beta * 4)))

# ONNX Pow with a constant exponent shares the roots and products (onnx_ops.c)
for k in (1.5, -0.75, 4.0, -2.0, 2.5, 0.6):
    x = (rng.standard_normal((3, 37)) * 2).astype(np.float32)
    if k != round(k):  # a fractional power of a negative base is NaN; those are Pow's own test's
        x = np.abs(x) + 0.1
    e = onnx.helper.make_tensor("e", onnx.TensorProto.FLOAT, [], [k])
    src = run_cpu(f"Pow x^{k}", [mk("Constant", [], ["e"], value=e), mk("Pow", ["x", "e"], ["y"])], x,
                  (x.astype(np.float64) ** k).astype(np.float32))
    if src:
        S.check(f"Pow x^{k}: log and exp only where k is no multiple of 1/4", ("= hp_log2f(" in src) == (k * 4 != round(k * 4)))

x = rng.standard_normal((2, 3, 5, 7)).astype(np.float32)
shape = onnx.helper.make_tensor("s", onnx.TensorProto.INT64, [3], [2, 3, 35])
run_cpu("Reshape [2,3,5,7] -> [2,3,35], Relu", [mk("Constant", [], ["s"], value=shape), mk("Reshape", ["x", "s"], ["r"]),
                                                 mk("Relu", ["r"], ["y"])], x, np.maximum(x, 0).reshape(2, 3, 35))
S.close()
