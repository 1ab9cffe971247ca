"""QDQ convs whose kernel equals their stride and that have no padding (patchify
convs: 2x2/2, 4x4/4, 3x3/3), which the importer lowers as a matmul of the
gathered patches (ct_gemm.nrep) with an NCHW output (C^T): on the int8 kernel
(contract_q8.c's cc_emit_q8gemm: the weight as A, the patches gathered as
its input), against onnxruntime, its int8 run (QLinearConv) and the QDQ graph
as written (optimizations off).  With scales that are powers of two every
engine computes the same numbers exactly, so the outputs must be equal bit
for bit; with quantize_static-like scales, within one step of onnxruntime's
int8 run and bit for bit harp's own int8=off run (the bf16 template).  Odd
channel counts and sizes, input zero points 0 / 128 / 255, output zero
points 0 / 128 / 255.  The generated C shows the path.
Needs: HARP_BIN, onnx, onnxruntime.
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

S = ht.Suite("q8_patchify")
os.environ.setdefault("HARP_CC_OPT", "1")  # what the kernels compute, not their speed
os.environ["HARP_TIER0"] = "off"  # the compiled kernels from the first run, not tier 0's
RNG = np.random.default_rng(2828)
FORCE = ["--knob", "int8=force"]
GATHERED = "int8 GEMM"  # the generated C's header of the int8 kernel


def model(shape, cout, k, zx, zy, pow2):
    """x -> Q(sx, zx) -> DQ -> Conv k x k / k (DQ'd int8 weight per channel, int32 bias) -> Q(sy, zy) -> DQ."""
    cin = shape[1]
    sx = 2.0 ** -4 if pow2 else 0.0173
    ws = (2.0 ** -RNG.integers(5, 9, cout) if pow2 else RNG.random(cout) * 0.004 + 0.001).astype(np.float32)
    sy = 2.0 ** -1 if pow2 else 0.0465
    w = RNG.integers(-128, 128, (cout, cin, k, k), dtype=np.int8)
    w.reshape(-1)[::17] = RNG.choice(np.array([-128, 127], np.int8), w.reshape(-1)[::17].shape)
    b = RNG.integers(-2000, 2000, cout).astype(np.int32)
    inits = [nh.from_array(v, n) for n, v in
             (("w", w), ("ws", ws), ("wz", np.zeros(cout, np.int8)), ("b", b), ("bs", (np.float32(sx) * ws).astype(np.float32)),
              ("bz", np.zeros(cout, np.int32)), ("sx", np.float32(sx)), ("zx", np.uint8(zx)), ("sy", np.float32(sy)),
              ("zy", np.uint8(zy)))]
    nodes = [h.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"]), h.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"]),
             h.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"], axis=0),
             h.make_node("DequantizeLinear", ["b", "bs", "bz"], ["bd"], axis=0),
             h.make_node("Conv", ["xd", "wd", "bd"], ["c"], kernel_shape=[k, k], strides=[k, k])]
    nodes += [h.make_node("QuantizeLinear", ["c", "sy", "zy"], ["yq"]),
              h.make_node("DequantizeLinear", ["yq", "sy", "zy"], ["y"])]
    g = h.make_graph(nodes, "patchify", [h.make_tensor_value_info("x", T.FLOAT, list(shape))],
                     [h.make_tensor_value_info("y", T.FLOAT, None)], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
    m.ir_version = 8
    path = os.path.join(tempfile.mkdtemp(prefix="harp_q8patch_"), "m.onnx")
    onnx.save(m, path)
    return path, sy


def harp_out(path, x, extra):
    p, d = ht.run(path, {"x": x}, backend="cpu", extra=extra)
    return p, (None if p.returncode else np.load(os.path.join(d, "y.npy")))


def ort_out(path, x, opt):
    so = ort.SessionOptions()
    if not opt:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


def kernels_c(path):
    out = tempfile.mkdtemp(prefix="harp_q8patch_c_")
    p = subprocess.run([ht.HARP, "compile", path, "--target", "cpu", "--sources-only", "-o", out, *FORCE], capture_output=True,
                       text=True, timeout=300)
    return open(os.path.join(out, "model.c")).read() if p.returncode == 0 else "", p


def case(name, shape, cout, k, zx=128, zy=0, pow2=True):
    path, sy = model(shape, cout, k, zx, zy, pow2)
    x = (RNG.standard_normal(shape) * 3).astype(np.float32)
    x.reshape(-1)[::11] = RNG.choice(np.array([-40.0, 40.0], np.float32), x.reshape(-1)[::11].shape)  # saturating
    p, got = harp_out(path, x, FORCE)
    S.check(f"{name}: runs", got is not None, p.stderr[-800:])
    if got is None:
        return
    if pow2:
        for opt in (True, False):
            want = ort_out(path, x, opt)
            S.check(f"{name}: bit for bit onnxruntime's {'int8 run' if opt else 'QDQ graph as written'}",
                    got.shape == want.shape and np.array_equal(got, want),
                    f"{int((got != want).sum()) if got.shape == want.shape else got.shape} differ")
    else:
        want = ort_out(path, x, True)
        e = np.abs(got.astype(np.float64) - want) / np.float32(sy)
        S.check(f"{name}: within one step of onnxruntime's int8 run", got.shape == want.shape and e.max() <= 1 + 1e-3,
                f"{np.mean(e <= 1e-3):.4%} equal, max {e.max():.2f} steps")
        p2, base = harp_out(path, x, ["--knob", "int8=off"])
        S.check(f"{name}: bit for bit harp's int8=off run", base is not None and np.array_equal(got, base), p2.stderr[-400:])
    c, pc = kernels_c(path)
    S.check(f"{name}: on the int8 kernel, its input gathered", GATHERED in c and "long s0 = 0, fi = t" in c, pc.stderr[-400:])


def test_patchify():
    case("2x2/2 5->24 @14x18, zx 128 zy 0", (1, 5, 14, 18), 24, 2)
    case("2x2/2 3->13 @18x14, zx 0 zy 128", (1, 3, 18, 14), 13, 2, zx=0, zy=128)
    case("4x4/4 3->32 @20x28, zx 255 zy 255", (1, 3, 20, 28), 32, 4, zx=255, zy=255)
    case("3x3/3 7->9 @9x15, zx 7 zy 3", (1, 7, 9, 15), 9, 3, zx=7, zy=3)
    case("2x2/2 16->40 @32x32, quantize_static-like scales", (1, 16, 32, 32), 40, 2, pow2=False)


if __name__ == "__main__":
    test_patchify()
    S.close()
