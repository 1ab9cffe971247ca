"""QDQ strided convs of many input channels on the int8 kernel: a 3x3/2 (pad 1),
a 1x1/2 downsample (no padding), as in a ResNet stage's first block, and a
3x3/2 without padding, each with 16-64 input channels (cgen_qgemm.c: B from
the im2col built per call).  Against onnxruntime: with scales that are
powers of two, bit for bit both its int8 run and the QDQ graph as written;
with quantize_static-like scales, within one step of its int8 run and bit
for bit harp's own int8=off run.  The generated C must have the four convs
on the int8 kernel.  Odd sizes put the last stretch of a row at the
image's end.  Needs: HARP_BIN, onnx, onnxruntime.
"""
import os
import re
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import harp_test as ht  # noqa: E402

ht.onnx_or_skip()
import onnxruntime  # noqa: F401  (test_q8_stem's reference)
from onnx import helper as h  # noqa: E402
from onnx import numpy_helper as nh  # noqa: E402
import test_q8_stem as st  # noqa: E402  (conv_q, save_model, harp_out, ort_out, kernels_c: the stem test's QDQ pieces)

ht.compiled_only()  # the compiled C's numbers, not tier 0's (harp run answers its first run from tier 0)
S = ht.Suite("q8_strided")
RNG = np.random.default_rng(29)


def strided_model(shape, pow2=True, zx=128):
    """x -> Q -> DQ -> a: 3x3/2 pad 1 -> b: 1x1/2 (held bytes in); x's DQ -> c: 1x1/2 (the downsample)
    -> d: 3x3/2 without padding; outputs b and d dequantized."""
    cin = shape[1]
    sx = 2.0 ** -5 if pow2 else 0.0173
    nodes = [h.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"]), h.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"])]
    inits = [nh.from_array(np.float32(sx), "sx"), nh.from_array(np.uint8(zx), "zx")]
    s_mid = 2.0 ** -3 if pow2 else 0.061
    for name, src, ci, co, k, stride, pad, s_in, s_out, zy in (("a", "xd", cin, 24, 3, 2, 1, sx, s_mid, 0),
                                                               ("b", "a_d", 24, 40, 1, 2, 0, s_mid, 2.0 ** -2 if pow2 else 0.37, 131),
                                                               ("c", "xd", cin, 48, 1, 2, 0, sx, s_mid, 7),
                                                               ("d", "c_d", 48, 20, 3, 2, 0, s_mid, 2.0 ** -2 if pow2 else 0.29, 255)):
        ws = (2.0 ** -RNG.integers(6, 10, co) if pow2 else RNG.random(co) * 0.004 + 0.001).astype(np.float32)
        n2, i2 = st.conv_q(name, src, ci, co, k, stride, pad, s_in, ws, s_out, zy)
        nodes += n2
        inits += i2
    outs = ["b_d", "d_d"]
    return st.save_model("strided", nodes, inits, shape, outs), outs


def compare(suite, name, path, outs, shape, rng, pow2, step_of):
    """Model path (outputs outs) on the int8 kernel against onnxruntime, into suite: an input of shape from
    rng (some saturating); with power-of-two scales bit for bit its int8 run and its QDQ graph as written,
    else within one step (step_of(output)) of its int8 run and bit for bit harp's own int8=off run."""
    x = (rng.standard_normal(shape) * 2.5).astype(np.float32)
    x.reshape(-1)[::13] = rng.choice(np.array([-50.0, 50.0], np.float32), x.reshape(-1)[::13].shape)  # saturating
    p, got = st.harp_out(path, outs, x, st.FORCE)
    suite.check(f"{name}: runs", p.returncode == 0, p.stderr[-800:])
    if got is None:
        return
    if pow2:
        for opt in (True, False):
            want = st.ort_out(path, x, opt)
            bad = [int((g != w).sum()) for g, w in zip(got, want)]
            suite.check(f"{name}: bit for bit onnxruntime's {'int8 run' if opt else 'QDQ graph as written'}",
                        all(g.shape == w.shape for g, w in zip(got, want)) and not any(bad), f"{bad} elements differ")
    else:
        want = st.ort_out(path, x, True)
        for o, g, w in zip(outs, got, want):
            e = np.abs(g.astype(np.float64) - w) / np.float32(step_of(o))
            suite.check(f"{name}: {o} within one step of onnxruntime's int8 run",
                        g.shape == w.shape and float(np.mean(e <= 1e-3)) >= 0.99 and e.max() <= 1 + 1e-3,
                        f"{np.mean(e <= 1e-3):.4%} equal, max {e.max():.2f} steps")
        p2, base = st.harp_out(path, outs, x, ["--knob", "int8=off"])
        suite.check(f"{name}: bit for bit harp's int8=off run",
                    base is not None and all(np.array_equal(g, b) for g, b in zip(got, base)), p2.stderr[-400:])


def case(name, shape, pow2=True, build=False, **kw):
    path, outs = strided_model(shape, pow2=pow2, **kw)
    compare(S, name, path, outs, shape, RNG, pow2, lambda o: 0.37 if o == "b_d" else 0.29)
    c, pc = st.kernels_c(path, build)  # its package built and run with build, else its C only read
    S.check(f"{name}: {'compiles' if build else 'its C'}", pc.returncode == 0, pc.stderr[-800:])
    gemms = re.findall(r"int8 GEMM (\d+) x (\d+) x (\d+), u8 x s8 \(weight A\)", c)
    S.check(f"{name}: the four convs on the int8 kernel", len(gemms) == 4, f"{gemms}")


def test_strided():
    # the first case's portable package built and run; the others' C only read (test_q8_stem.kernels_c)
    case("32 channels 29x23, zx 128", (1, 32, 23, 29), build=True)
    case("16 channels 34x17, zx 3", (1, 16, 17, 34), zx=3)
    case("quantize_static scales, 64 channels 15x15", (1, 64, 15, 15), pow2=False)


if __name__ == "__main__":
    test_strided()
    S.close()
