"""--precision bf16: a nearest upsample of a bf16 tensor read through words.

Needs: harp_test (HARP_BIN), onnx, onnxruntime, a CPU with AVX512_BF16
(skips, 77, without).  Gives: one suite, test_bf16_upsample.

The PP-OCRv4 detector's neck adds a nearest 2x upsample of a conv's bf16
output to a larger map: the generic loop nest reads the bf16 tensor at
(x / 2, y / 2).  GCC cannot vectorize a gather of 16-bit elements, so such
a loop stayed scalar; a bf16 read whose index the nest divides is loaded
through the 32-bit word holding it (nest_stmt.c, load_bf16_word), which
GCC gathers, when the buffer's element count is even (the word lies inside
it).  Checked on an even-sized map (the word path) and an odd-sized one
(the 16-bit load kept):
  * the outputs against onnxruntime fp32 within the documented whole-model
    bf16 tolerance (docs/options.md, "precision": max abs error <= 2e-2 x
    max |reference|), and not equal to it (bf16 ran);
  * the generated C: the upsample's read through a word (`w_ << 16`) for the
    even map only.
"""
import os
import re
import sys
import tempfile

import numpy as np

from harp_test import Suite, run, onnx_or_skip

onnx_or_skip()
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

if "avx512_bf16" not in open("/proc/cpuinfo").read():
    print("skip: this CPU has no AVX512_BF16")
    sys.exit(77)

s = Suite("bf16_upsample")
rng = np.random.default_rng(2812)


def arr(*shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def model(c, h, w):
    """t = hardswish(conv(x)) at h x w, read by a conv as well (so stored in bf16);
    out = conv(up2(t) + conv(y)), o2 = conv(t); the model's path and feeds."""
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"]), helper.make_node("HardSwish", ["c1"], ["t"]),
             helper.make_node("Resize", ["t", "", "sc"], ["u"], mode="nearest"),
             helper.make_node("Conv", ["y", "w2", "b2"], ["v"]), helper.make_node("Add", ["u", "v"], ["s"]),
             helper.make_node("Conv", ["s", "w3", "b3"], ["out"]), helper.make_node("Conv", ["t", "w4", "b3"], ["o2"])]
    inits = {"w1": arr(c, 8, 1, 1, scale=0.8), "b1": arr(c, scale=0.5), "sc": np.array([1, 1, 2, 2], np.float32),
             "w2": arr(c, 8, 1, 1, scale=0.8), "b2": arr(c, scale=0.5), "w3": arr(24, c, 1, 1, scale=0.5), "w4": arr(24, c, 3, 3, scale=0.3),
             "b3": arr(24, scale=0.5)}
    feeds = {"x": arr(1, 8, h, w, scale=2.0), "y": arr(1, 8, 2 * h, 2 * w, scale=2.0)}
    vi = [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(a.shape)) for n, a in feeds.items()]
    vo = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("out", "o2")]
    g = helper.make_graph(nodes, "g", vi, vo, [numpy_helper.from_array(a, n) for n, a in inits.items()])
    path = os.path.join(tempfile.mkdtemp(), f"up_{c}x{h}x{w}.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    return path, feeds


so = ort.SessionOptions()
so.intra_op_num_threads = 2
for c, h, w, even in ((16, 12, 20, True), (3, 5, 7, False)):
    tag = f"{c}x{h}x{w} ({'even' if even else 'odd'} count)"
    path, feeds = model(c, h, w)
    want = dict(zip(("out", "o2"), ort.InferenceSession(path, so, providers=["CPUExecutionProvider"]).run(None, feeds)))
    dump = tempfile.mkdtemp()
    p, d = run(path, feeds, backend="cpu", extra=["--precision", "bf16", "--dump", "c", "--dump-dir", dump])
    s.check(f"{tag}: runs", p.returncode == 0, p.stderr.strip()[-600:])
    if p.returncode:
        continue
    for n in want:
        got = np.load(os.path.join(d, n + ".npy"))
        err, scale = float(np.max(np.abs(got - want[n]))), float(np.max(np.abs(want[n])))
        s.check(f"{tag}: {n} vs onnxruntime fp32, max abs err {err:.3g} <= 2e-2 x {scale:.3g}", err <= 2e-2 * scale,
                f"ratio {err / scale:.3g}")
        s.check(f"{tag}: {n} differs from fp32 (bf16 ran)", err > 1e-6 * scale, f"err {err:.3g}")
    src = open(os.path.join(dump, "model.c")).read()
    words = re.findall(r"memcpy\(&w_, p\d+ \+ \(i_ & ~1L\), 4\)", src)
    s.check(f"{tag}: the upsample's bf16 read {'through a word' if even else 'as a 16-bit load'}",
            bool(words) == even, f"{len(words)} word reads")
s.close()
