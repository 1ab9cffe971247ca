"""QDQ poolings (DequantizeLinear -> MaxPool / AveragePool -> QuantizeLinear)
against onnxruntime: the CPU's pool template takes the QuantizeLinear after
the pool (x / s, rint, + zero point, clamp) as its epilogue
(contract_pool.c's ct_epi_chain), the division kept a division.  Zero points
0 / 128 / 255, odd sizes, pads, an output scale that puts x / s on halves
(x * (1/s) would round some the other way); the generated C is checked to
run the pool template, not the loop nest.  Runs on the interpreter and the
cpu backend (HARP_TEST_BACKENDS).
"""
import os
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

S = ht.Suite("onnx_qpool")
os.environ.setdefault("HARP_CC_OPT", "1")  # what the kernels compute, not their speed
# the compiled object from the first run: tier0 (the default, auto) would run the first on libharp's
# kernels and the interpreter, not the pool template under test
os.environ["HARP_TIER0"] = "off"
RNG = np.random.default_rng(11)


def qdq_pool(pool, shape, zp, s_in, s_out, k, st, pad, **attrs):
    """x -> Q(s_in, zp) -> DQ -> pool -> Q(s_out, zp) -> DQ -> out, saved; its path."""
    inits = [nh.from_array(np.array(s_in, np.float32), "s"), nh.from_array(np.array(zp, np.uint8), "z"),
             nh.from_array(np.array(s_out, np.float32), "so")]
    nodes = [h.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"]),
             h.make_node("DequantizeLinear", ["xq", "s", "z"], ["xd"]),
             h.make_node(pool, ["xd"], ["y"], kernel_shape=k, strides=st, pads=pad, **attrs),
             h.make_node("QuantizeLinear", ["y", "so", "z"], ["yq"]),
             h.make_node("DequantizeLinear", ["yq", "so", "z"], ["out"])]
    g = h.make_graph(nodes, "qpool", [h.make_tensor_value_info("x", T.FLOAT, list(shape))],
                     [h.make_tensor_value_info("out", T.FLOAT, None)], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
    m.ir_version = 8
    path = os.path.join(tempfile.mkdtemp(prefix="harp_qpool_"), "m.onnx")
    onnx.save(m, path)
    return path


def check(name, path, x, exact=True):
    """harp on each backend against onnxruntime (all optimizations: its own
    QDQ handling) on input x: bit for bit (exact) or within one step."""
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    for be in ht.BACKENDS:
        p, d = ht.run(path, {"x": x}, backend=be)
        S.check(f"{name} ({be}): runs", p.returncode == 0, p.stderr[-800:])
        if p.returncode:
            continue
        got = np.load(os.path.join(d, "out.npy"))
        ok = got.shape == want.shape and got.dtype == want.dtype
        diff = np.abs(got.astype(np.float64) - want.astype(np.float64)) if ok else np.array([np.inf])
        bad = int((diff > 0).sum())
        ok = ok and (bad == 0 if exact else diff.max() <= 1.0001 * np.float32(path_scale[path]))
        S.check(f"{name} ({be}): matches onnxruntime", ok,
                f"{got.dtype}{got.shape} vs {want.dtype}{want.shape}, {bad} differ, max {diff.max()}")


path_scale = {}


def every_byte(shape, zp, s_in):
    """An input whose 2x2 windows' maxima are each byte value once
    (dequantized), the other three points of a window below it."""
    n, c, hh, ww = shape
    q = np.resize(RNG.permutation(256), n * c * (hh // 2) * (ww // 2)).reshape(n, c, hh // 2, ww // 2)
    top = ((q - zp) * np.float32(s_in)).astype(np.float32)
    x = np.repeat(np.repeat(top, 2, axis=2), 2, axis=3) - RNG.uniform(0, 3 * s_in, size=shape).astype(np.float32)
    x[:, :, ::2, ::2] = top
    return x.astype(np.float32)


def case(name, pool, shape, zp, s_in, s_out, k, st, pad, exact=True, template=True, x=None, **attrs):
    path = qdq_pool(pool, shape, zp, s_in, s_out, k, st, pad, **attrs)
    path_scale[path] = s_out
    # every byte value in, either side of the zero point, and values past the range (saturation)
    lo, hi = (0 - zp - 8) * s_in, (255 - zp + 8) * s_in
    if x is None:
        x = RNG.uniform(lo, hi, size=shape).astype(np.float32)
    check(name, path, x, exact)
    if "cpu" in ht.BACKENDS:
        c, p = ht.cpu_c(path)
        S.check(f"{name}: compiles", p.returncode == 0, p.stderr[-800:])
        took = "_pool(hprt_pool *pool" in c and "template declined" not in c
        S.check(f"{name}: the pool template {'takes' if template else 'declines'} it", took == template,
                next((ln for ln in c.splitlines() if "declined" in ln), "no decline noted"))


def test_maxpool():
    for zp in (0, 128, 255):
        # ResNet's stem pool: 3x3 stride 2 pad 1, an odd plane; the scale kept through the pool
        case(f"maxpool 3x3/2 zp {zp}", "MaxPool", (1, 5, 13, 11), zp, 0.05, 0.05, [3, 3], [2, 2], [1, 1, 1, 1])
        # x / s_out on halves: s_out = 2 s_in (exactly, in fp32), every byte a window's maximum (x * (1/s_out)
        # rounds 38-41 of the 256 the other way)
        shape = (1, 4, 16, 16)
        case(f"maxpool halves zp {zp}", "MaxPool", shape, zp, 0.03, 0.06, [2, 2], [2, 2], [0, 0, 0, 0],
             x=every_byte(shape, zp, 0.03))
    # asymmetric pads, a 2x3 window, stride 1, another scale
    case("maxpool 2x3/1 uneven pads", "MaxPool", (1, 4, 7, 10), 37, 0.013, 0.029, [2, 3], [1, 1], [0, 1, 1, 2])


def test_avgpool():
    # an average: a sum times 1/(kh*kw) (count_include_pad) or over the window's points inside; onnxruntime
    # sums in its own order, so one step of the output scale at most
    for zp in (0, 128, 255):
        case(f"avgpool 3x3/2 zp {zp}", "AveragePool", (1, 5, 13, 11), zp, 0.05, 0.05, [3, 3], [2, 2], [1, 1, 1, 1],
             exact=False, count_include_pad=1)
    case("avgpool 2x2/2 no pad", "AveragePool", (1, 3, 9, 7), 128, 0.02, 0.03, [2, 2], [2, 2], [0, 0, 0, 0],
         exact=False, template=False)


if __name__ == "__main__":
    test_maxpool()
    test_avgpool()
    S.close()
