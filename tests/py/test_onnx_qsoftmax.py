"""QDQ softmax (Q -> DQ -> [Mul] -> Q -> DQ -> Softmax -> Q -> DQ, an int8
BERT's attention probabilities) against onnxruntime: the CPU's softmax
template takes the steps before the row max (the dequantize / requantize
chain, contract_row.c's softmax_pro) and after the division (the
QuantizeLinear's rint and clamp) into its passes.  Rows of 128 (BERT's
S = 128), of 77 (a vector tail), zero points 0 / 119 / 255, output scales
1/256 and 1/254 (the numerator's constant); the generated C is checked to
run the softmax template with the steps in it, not the loop nest.  Runs on
the interpreter and the cpu backend (HARP_TEST_BACKENDS).
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
from onnx import numpy_helper as nh  # noqa: E402
import quant_models as qm  # noqa: E402

S = ht.Suite("onnx_qsoftmax")
os.environ.setdefault("HARP_CC_OPT", "1")  # what the kernels compute, not their speed
os.environ["HARP_TIER0"] = "off"  # the compiled kernels, not tier 0's first run
RNG = np.random.default_rng(5)


def qdq_softmax(shape, s_in, zp_in, mul, s_mid, zp_mid, s_out, zp_out):
    """x -> Q(s_in, zp_in) -> DQ -> * mul -> Q(s_mid, zp_mid) -> DQ -> Softmax -> Q(s_out, zp_out) -> DQ."""
    arr = {"s": (s_in, np.float32), "z": (zp_in, np.uint8), "m": (mul, np.float32), "sm": (s_mid, np.float32),
           "zm": (zp_mid, np.uint8), "so": (s_out, np.float32), "zo": (zp_out, np.uint8)}
    inits = [nh.from_array(np.array(v, t), k) for k, (v, t) in arr.items()]
    nodes = [h.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"]),
             h.make_node("DequantizeLinear", ["xq", "s", "z"], ["xd"]),
             h.make_node("Mul", ["xd", "m"], ["xm"]),
             h.make_node("QuantizeLinear", ["xm", "sm", "zm"], ["mq"]),
             h.make_node("DequantizeLinear", ["mq", "sm", "zm"], ["md"]),
             h.make_node("Softmax", ["md"], ["p"], axis=-1),
             h.make_node("QuantizeLinear", ["p", "so", "zo"], ["pq"]),
             h.make_node("DequantizeLinear", ["pq", "so", "zo"], ["out"])]
    return qm.model(nodes, [qm.vi("x", T.FLOAT, list(shape))], [qm.vi("out", T.FLOAT, None)], inits, opset=13)


def check(name, path, x, s_out):
    """harp on each backend against onnxruntime on input x: within one step
    of the output scale everywhere, and nearly all elements equal (the exp
    and the sum differ in the last bits, which moves a code only where
    p / s_out falls within an ulp of a half)."""
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    for be in ht.BACKENDS:
        p, d = ht.run(path, {"x": x}, backend=be)
        S.check(f"{name} ({be}): runs", p.returncode == 0, p.stderr[-800:])
        if p.returncode:
            continue
        got = np.load(os.path.join(d, "out.npy"))
        ok = got.shape == want.shape and got.dtype == want.dtype
        diff = np.abs(got.astype(np.float64) - want.astype(np.float64)) if ok else np.array([np.inf])
        same = float((diff == 0).mean())
        ok = ok and diff.max() <= 1.0001 * s_out and same >= 0.98
        S.check(f"{name} ({be}): matches onnxruntime", ok,
                f"{got.dtype}{got.shape} vs {want.dtype}{want.shape}, max {diff.max()}, {same:.4f} equal")


def case(name, shape, zp_in, zp_mid, s_out, zp_out=0, template=True, mul=0.125, s_mid=0.0418, low_rows=False):
    s_in = 0.07
    path = qdq_softmax(shape, s_in, zp_in, mul, s_mid, zp_mid, s_out, zp_out)
    # every input code, past the range either side too (saturation), rows with one large value
    lo = (0 - zp_in - 8) * s_in
    x = RNG.uniform(lo, (255 - zp_in + 8) * s_in, size=shape).astype(np.float32)
    x.reshape(-1, shape[-1])[::7, 3] = 300 * s_in
    if low_rows:  # rows all at the lowest code: lanes past the row must not count in its max
        x.reshape(-1, shape[-1])[1::5, :] = lo
    check(name, path, x, s_out)
    if "cpu" in ht.BACKENDS:
        c, p = ht.cpu_c(path)
        S.check(f"{name}: compiles", p.returncode == 0, p.stderr[-800:])
        k = c.find("_softmax_avx512_row(")
        body = c[k:c.find("\n}\n", k)] if k >= 0 else ""
        took = "-> softmax" in c and "_rint(" in body and "_max(" in body
        S.check(f"{name}: the softmax template {'takes' if template else 'declines'} it, its steps fused",
                took == template, next((ln for ln in c.splitlines() if "declined" in ln), "no decline noted"))


def test_qsoftmax():
    for zp in (0, 119, 255):
        case(f"rows of 128 zp {zp}", (1, 4, 128, 128), zp, zp, 1 / 254)
    case("rows of 128, out 1/256", (1, 2, 64, 128), 128, 119, 1 / 256)
    case("rows of 77 (a tail)", (3, 5, 77), 119, 119, 1 / 254)
    case("rows of 77, zp out 3", (2, 9, 77), 30, 200, 1 / 200, zp_out=3)
    # the middle quantize saturating both ways (its clamp matters)
    case("middle saturates", (1, 3, 128, 128), 119, 119, 1 / 254, mul=1.0)
    # a coarse middle scale (softmax scale 0.5 per code): a max 255 codes too high underflows every exp
    case("coarse scale, low rows of 77", (2, 5, 77), 255, 255, 1 / 254, mul=8.0, s_mid=0.5, low_rows=True)


if __name__ == "__main__":
    test_qsoftmax()
    S.close()
