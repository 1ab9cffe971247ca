"""A QDQ stem (DQ -> Conv 7x7/2, C_in = 3 -> Q -> DQ -> MaxPool 3x3/2 -> Q ->
DQ -> two 1x1 convs -> Q) on held bytes: the stem's int8 kernel stores its
requantized bytes, the max pool reads and writes bytes (contract_q8pool.c:
max commutes with the dequantization when the pool's Q has its input's
scale and zero point), the 1x1 convs read them (q8_hold.c).  Against
onnxruntime, both its int8 run (QLinearConv) and the QDQ graph as written
(optimizations off): with scales that are powers of two every engine
computes the same numbers exactly, so the outputs must be equal bit for
bit; with quantize_static-like scales, within one step of onnxruntime's
int8 run and bit for bit harp's own run with int8=off (the fp32 / bf16
templates, nothing held).  Odd sizes; the stem's output zero point 0 / 128
/ 255; a pool whose Q has another scale, or another zero point, or whose
output is the model's: the pool stays on the fp32 template and the stem
writes its dequantized floats (the generated C says which).  The convs
take the int8 kernel with int8=force (whether they pay depends on the
host's AMX).  Needs: HARP_BIN, onnx, onnxruntime.
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

S = ht.Suite("q8_stem")
os.environ.setdefault("HARP_CC_OPT", "1")  # what the kernels compute, not their speed
os.environ["HARP_TIER0"] = "off"  # the compiled kernels from the first run, not tier 0's
RNG = np.random.default_rng(28)
FORCE = ["--knob", "int8=force"]
HELD_POOL = "max pool on held bytes"
HELD_STEM = "held as the output"


def conv_q(name, x, cin, cout, k, stride, pad, sx, ws, sy, zy):
    """Nodes and initializers of Q(Conv(x, DQ(w), DQ(b)), sy, zy) -> DQ: w int8
    per output channel (scales ws, -128 / 127 among them), b int32 at sx * ws."""
    w = RNG.integers(-128, 128, (cout, cin, k, k), dtype=np.int8)
    w.reshape(-1)[::29] = RNG.choice(np.array([-128, 127], np.int8), w.reshape(-1)[::29].shape)
    b = RNG.integers(-3000, 3000, cout).astype(np.int32)
    inits = [nh.from_array(v, f"{name}_{n}") for n, v in
             (("w", w), ("ws", ws), ("wz", np.zeros(cout, np.int8)), ("b", b), ("bs", (np.float32(sx) * ws).astype(np.float32)),
              ("bz", np.zeros(cout, np.int32)), ("sy", np.float32(sy)), ("zy", np.uint8(zy)))]
    nodes = [h.make_node("DequantizeLinear", [f"{name}_w", f"{name}_ws", f"{name}_wz"], [f"{name}_wd"], axis=0),
             h.make_node("DequantizeLinear", [f"{name}_b", f"{name}_bs", f"{name}_bz"], [f"{name}_bd"], axis=0),
             h.make_node("Conv", [x, f"{name}_wd", f"{name}_bd"], [f"{name}_c"], kernel_shape=[k, k], strides=[stride, stride],
                         pads=[pad] * 4),
             h.make_node("QuantizeLinear", [f"{name}_c", f"{name}_sy", f"{name}_zy"], [f"{name}_q"]),
             h.make_node("DequantizeLinear", [f"{name}_q", f"{name}_sy", f"{name}_zy"], [f"{name}_d"])]
    return nodes, inits


def stem_model(shape, sc, pool_s, pool_z, pow2=True, zx=128, zc=0, to_output=False):
    """x -> Q -> DQ -> stem conv (Q at sc, zc) -> MaxPool -> Q(pool_s, pool_z) -> DQ -> 1x1 convs a, b (or, with
    to_output, the pool's DQ as the model's output)."""
    sx = 2.0 ** -5 if pow2 else 0.0173
    ws = (2.0 ** -RNG.integers(6, 10, 24) if pow2 else RNG.random(24) * 0.004 + 0.001).astype(np.float32)
    stem, inits = conv_q("stem", "xd", 3, 24, 7, 2, 3, sx, ws, sc, zc)
    inits += [nh.from_array(np.float32(sx), "sx"), nh.from_array(np.uint8(zx), "zx"),
              nh.from_array(np.float32(pool_s), "ps"), nh.from_array(np.uint8(pool_z), "pz")]
    nodes = [h.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"]), h.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"]),
             *stem, h.make_node("MaxPool", ["stem_d"], ["p"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
             h.make_node("QuantizeLinear", ["p", "ps", "pz"], ["pq"]), h.make_node("DequantizeLinear", ["pq", "ps", "pz"], ["pd"])]
    # the 1x1 convs a and b read the pool; with to_output, the pool's DQ is an output too and a feeds a2 (a
    # buffer held between two int8 convs, which a hold refused at the pool must leave held)
    outs = ["pd"] if to_output else []
    convs = (("a", "pd", 24, 32, 131, pool_s), ("a2", "a_d", 32, 16, 7, 2.0 ** -2 if pow2 else 0.37)) if to_output else \
        (("a", "pd", 24, 32, 131, pool_s), ("b", "pd", 24, 16, 7, pool_s))
    for name, src, cin, cout, zy, s_in in convs:
        ws2 = (2.0 ** -RNG.integers(6, 9, cout) if pow2 else RNG.random(cout) * 0.01 + 0.002).astype(np.float32)
        n2, i2 = conv_q(name, src, cin, cout, 1, 1, 0, s_in, ws2, 2.0 ** -2 if pow2 else 0.37, zy)
        nodes += n2
        inits += i2
        if not (to_output and name == "a"):
            outs.append(f"{name}_d")
    return save_model("stem", nodes, inits, shape, outs), outs


def save_model(name, nodes, inits, shape, outs):
    """The opset-13 model of nodes and inits, float input x of shape, float outputs outs, saved to a new
    temporary file: its path."""
    g = h.make_graph(nodes, name, [h.make_tensor_value_info("x", T.FLOAT, list(shape))],
                     [h.make_tensor_value_info(o, T.FLOAT, None) for o in outs], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
    m.ir_version = 8
    path = os.path.join(tempfile.mkdtemp(prefix=f"harp_q8{name}_"), "m.onnx")
    onnx.save(m, path)
    return path


def harp_out(path, outs, x, extra):
    p, d = ht.run(path, {"x": x}, backend="cpu", extra=extra)
    return p, (None if p.returncode else [np.load(os.path.join(d, f"{o}.npy")) for o in outs])


def kernels_c(path, build=True):
    """The C of `harp compile` of path for the cpu (int8 kernels forced), all its files in one
    string, and the process: the package built and run too with build, else its sources only
    (test_q8_same.py and test_q8_strided.py build theirs)."""
    out = tempfile.mkdtemp(prefix="harp_q8stem_c_")
    p = subprocess.run([ht.HARP, "compile", path, "--target", "cpu", "-o", out, *FORCE, *([] if build else ["--sources-only"])],
                       capture_output=True, text=True, timeout=300)
    return "".join(open(os.path.join(r, f)).read() for r, _, fs in os.walk(out) for f in fs if f.endswith(".c")), p


def ort_out(path, x, opt):
    so = ort.SessionOptions()
    if not opt:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"]).run(None, {"x": x})


def case(name, shape, sc, pool_s, pool_z, held, pow2=True, chunks=None, build=False, **kw):
    path, outs = stem_model(shape, sc, pool_s, pool_z, pow2=pow2, **kw)
    x = (RNG.standard_normal(shape) * 2.5).astype(np.float32)
    x.reshape(-1)[::13] = RNG.choice(np.array([-50.0, 50.0], np.float32), x.reshape(-1)[::13].shape)  # saturating
    p, got = harp_out(path, outs, x, FORCE)
    S.check(f"{name}: runs", p.returncode == 0, p.stderr[-800:])
    if got is None:
        return
    if pow2:
        for opt in (True, False):
            want = ort_out(path, x, opt)
            bad = [int((g != w).sum()) for g, w in zip(got, want)]
            S.check(f"{name}: bit for bit onnxruntime's {'int8 run' if opt else 'QDQ graph as written'}",
                    all(g.shape == w.shape for g, w in zip(got, want)) and not any(bad), f"{bad} elements differ")
    else:
        want = ort_out(path, x, True)
        for o, g, w in zip(outs, got, want):
            step = np.float32(0.37 if o != "pd" else pool_s)
            e = np.abs(g.astype(np.float64) - w) / step
            S.check(f"{name}: {o} within one step of onnxruntime's int8 run",
                    g.shape == w.shape and float(np.mean(e <= 1e-3 + 1)) >= 0.999 and e.max() <= 1 + 1e-3,
                    f"{np.mean(e <= 1e-3):.4%} equal, max {e.max():.2f} steps")
        p2, base = harp_out(path, outs, x, ["--knob", "int8=off"])
        S.check(f"{name}: bit for bit harp's int8=off run", base is not None and all(np.array_equal(g, b) for g, b in zip(got, base)),
                p2.stderr[-400:])
    c, pc = kernels_c(path, build)
    S.check(f"{name}: {'compiles' if build else 'its C'}", pc.returncode == 0, pc.stderr[-800:])
    S.check(f"{name}: the pool {'on' if held else 'not on'} held bytes", (HELD_POOL in c) == held, f"{c.count(HELD_POOL)} held pools")
    S.check(f"{name}: the stem {'holds' if held else 'does not hold'} its output", (HELD_STEM in c.split("/* kernel 2:")[0]) == held,
            "stem held" if held else "stem not held")
    if chunks:
        S.check(f"{name}: the pool's {chunks}", chunks in c, "another chunking")
    if kw.get("to_output"):
        S.check(f"{name}: the buffer between the 1x1 convs still held", "the input held as u8" in c, "no int8 kernel reads held bytes")


def test_held():
    # the stem's output zero point 0 (a ReLU's), inside and 255; the pool's Q at the same scale and zero point
    # (the first case's package built and run: the portable flags' compile of held bytes; the others' C only read)
    for zx, zc in ((128, 0), (7, 128), (255, 255)):
        case(f"stem 7x7/2 + maxpool, zx {zx} zc {zc}", (1, 3, 37, 45), 2.0 ** -3, 2.0 ** -3, zc, True, zx=zx, zc=zc, build=zx == 128)
    # quantize_static-like scales: no exact products, the pool's Q still the DQ's scale
    case("quantize_static scales, zc 0", (1, 3, 41, 33), 0.0465, 0.0465, 0, True, pow2=False, zc=0)
    # a wide image: the pool's 38 output rows of 1088 bytes in chunks of 15 (the last one partial)
    case("wide image, the pool's rows in chunks", (1, 3, 150, 2100), 2.0 ** -3, 2.0 ** -3, 128, True, zx=128, zc=128,
         chunks="rows in chunks of 15 */")


def test_not_held():
    # another scale (x / s on halves: exact either way), another zero point, the pool's output the model's
    case("pool Q at twice the scale", (1, 3, 37, 45), 2.0 ** -3, 2.0 ** -2, 128, False, zc=128)
    case("pool Q at another zero point", (1, 3, 37, 45), 2.0 ** -3, 2.0 ** -3, 100, False, zc=128)
    case("pool output is the model's", (1, 3, 37, 45), 2.0 ** -3, 2.0 ** -3, 0, False, zc=0, to_output=True)


def test_nan():
    """A NaN in x sends the stem's int8 kernel to the template (its fallback,
    which stores the template's floats back as bytes: a NaN as byte 0, as
    the held convs do): outside the NaN's reach the outputs are harp's
    int8=off run's bit for bit (where that run has NaN, the held path has
    numbers)."""
    shape = (1, 3, 37, 45)
    path, outs = stem_model(shape, 2.0 ** -3, 2.0 ** -3, 0, zc=0)
    x = (RNG.standard_normal(shape) * 2.5).astype(np.float32)
    x[0, 1, 20, 30] = np.nan
    p, got = harp_out(path, outs, x, FORCE)
    p2, base = harp_out(path, outs, x, ["--knob", "int8=off"])
    S.check("NaN in x: runs", got is not None and base is not None, p.stderr[-400:] + p2.stderr[-400:])
    if got is None or base is None:
        return
    reach = [np.isnan(b) for b in base]
    S.check("NaN in x: the NaN reaches some outputs of the int8=off run", all(r.any() and not r.all() for r in reach))
    S.check("NaN in x: elsewhere bit for bit the int8=off run",
            all(np.array_equal(g[~r], b[~r]) for g, b, r in zip(got, base, reach)),
            f"{[int((g[~r] != b[~r]).sum()) for g, b, r in zip(got, base, reach)]} differ")


if __name__ == "__main__":
    test_held()
    test_not_held()
    test_nan()
    S.close()
