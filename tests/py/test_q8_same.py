"""QDQ stride-1 convs whose output rows are as wide as the image's (3x3 pad 1,
5x5 pad 2: cgen_qgemm.c's qg_dims.ci) on the int8 kernel, B's rows read from
the activation's bytes in place, masked to the zero point off the image (no
padded copy per call, the output's own grid).  Chains as in a ResNet
bottleneck: x -> Q -> DQ -> 1x1 (a) -> 3x3 (b, its input the bytes a holds)
-> 1x1 (c); a 3x3 (d) whose input is the model's fp32 input quantized (no
int8 producer); a 5x5 pad 2 (f) after d; and a 3x3 without padding (e, OW <
W: still the padded-width grid) beside them.  Odd sizes (a block spans
rows, a partial last block), the held bytes' zero point 0 / 128 / 255.
Against onnxruntime, with scales that are powers of two: bit for bit both
its int8 run and the QDQ graph as written; with quantize_static-like
scales within one step of its int8 run and bit for bit harp's own
int8=off run.  The generated C must have every conv on the int8 kernel,
one padded copy (e's) and the masked loads.  Needs: HARP_BIN, onnx,
onnxruntime.
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
import test_q8_stem as st  # noqa: E402  (conv_q, save_model, kernels_c)
import test_q8_strided as sd  # noqa: E402  (compare: the outputs against onnxruntime's)

ht.compiled_only()  # the compiled C's numbers, not tier 0's
S = ht.Suite("q8_same")
RNG = np.random.default_rng(31)


def same_model(shape, zmid, pow2=True, zx=128):
    """The file's chains: outputs c, e and f dequantized.  zmid: the zero point of a's bytes (b's input)."""
    cin = shape[1]
    sx = 2.0 ** -5 if pow2 else 0.0173
    nodes = [h.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"]), h.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"])]
    inits = [nh.from_array(np.float32(sx), "sx"), nh.from_array(np.uint8(zx), "zx")]
    s1, s2 = (2.0 ** -3, 2.0 ** -2) if pow2 else (0.061, 0.37)
    for name, src, ci, co, k, pad, s_in, s_out, zy in (("a", "xd", cin, 24, 1, 0, sx, s1, zmid),
                                                       ("b", "a_d", 24, 20, 3, 1, s1, s1, 7),
                                                       ("c", "b_d", 20, 32, 1, 0, s1, s2, 131),
                                                       ("d", "xd", cin, 16, 3, 1, sx, s1, 255),
                                                       ("f", "d_d", 16, 12, 5, 2, s1, s2, 0),
                                                       ("e", "xd", cin, 8, 3, 0, sx, s2, 60)):
        ws = (2.0 ** -RNG.integers(6, 10, co) if pow2 else RNG.random(co) * 0.004 + 0.001).astype(np.float32)
        n2, i2 = st.conv_q(name, src, ci, co, k, 1, pad, s_in, ws, s_out, zy)
        nodes += n2
        inits += i2
    outs = ["c_d", "e_d", "f_d"]
    return st.save_model("same", nodes, inits, shape, outs), outs


def case(name, shape, zmid, pow2=True, build=False, **kw):
    path, outs = same_model(shape, zmid, pow2=pow2, **kw)
    sd.compare(S, name, path, outs, shape, RNG, pow2, lambda o: 0.37)  # c, e, f all at s2
    c, pc = st.kernels_c(path, build)  # its package built and run with build, else its C only read
    S.check(f"{name}: {'compiles' if build else 'its C'}", pc.returncode == 0, pc.stderr[-800:])
    gemms = re.findall(r"int8 GEMM (\d+) x (\d+) x (\d+), u8 x s8 \(weight A\)", c)
    S.check(f"{name}: the six convs on the int8 kernel", len(gemms) == 6, f"{gemms}")
    pads = re.findall(r"static void (\w+)_pad\(const uint8_t \*x, uint8_t \*xp, long c\)", c)
    S.check(f"{name}: one padded copy (e's, OW < W), none for b, d, f", len(pads) == 1, f"{pads}")
    S.check(f"{name}: b, d, f read x through masked loads", c.count("_mm512_mask_loadu_epi8(vz, (__mmask64)") >= 3)
    S.check(f"{name}: b, c, f read the bytes their int8 producer holds", c.count("(the input held as u8 - ") >= 3)


def test_same():
    # the first case's portable package built and run; the others' C only read (test_q8_stem.kernels_c)
    case("24 channels 13x11, held zero point 128", (1, 24, 11, 13), 128, build=True)
    case("16 channels 9x70, held zero point 0, zx 3", (1, 16, 9, 70), 0, zx=3)
    case("quantize_static scales, 32 channels 15x15, held zero point 255", (1, 32, 15, 15), 255, pow2=False)


if __name__ == "__main__":
    test_same()
    S.close()
