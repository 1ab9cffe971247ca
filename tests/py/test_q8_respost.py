"""A QDQ residual add fused into its int8 conv's tasks (contract_q8.c's
q8_post, cgen_qgemm.h's spec.post): where the conv's output is held as
bytes and requantized twice (its own Q, then the Add's with the other
operand, onnxruntime's exact fused multiply-adds), the kernel's tasks apply
the second requantization to each block of y the moment it is stored
(<fn>_q8post, 16 columns at a time in AVX-512, the rest scalar), no
output pass.

One QDQ model per zero-point pair (the activations' zx, the outputs' zy;
per-channel int8 weights with -128 / 127 among them, int32 biases), a batch
of 2 images of 17 x 19 (323 pixels: a last block of 3 columns, a tail of 3
past the 16-column vectors; and once 19 x 19, 361 pixels: a last block of
41, two vectors of 16 and a tail of 9):
  A  1x1 64 -> 96, held, read by
  B  1x1 96 -> 96, plus D's output (an Add), Relu, Q: held, read by
  S  1x1 96 -> 64, the output (zy 128: the Add's Q ends in a shift);
  D  1x1 64 -> 96 on x, held, read by the Add alone (ResNet's downsample).
Checked: the output equal to onnxruntime's int8 run (>= 99.9% of the
elements exactly, none more than one step off, as test_qvnni4.py) with AMX
on (auto), the scalar variant forced (int8_isa), the VNNI one weight-stationary
(int8_order=ws: the hook on 6 rows x all columns) and the C built for AVX2
(HARP_CFLAGS: the hook's scalar loop, its reference); the three runs equal
on every element; the generated C has exactly one post hook (B's), with its
AVX-512 loops (64 columns, the rounding in the conversion; then 16; the
masked tail), and no output pass.  Skips (77) without onnxruntime."""
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import harp_test as ht  # noqa: E402

ht.onnx_or_skip()
import onnx  # noqa: F401
import onnxruntime as ort  # noqa: E402
import quant_models as qm  # noqa: E402
from onnx import helper as h  # noqa: E402

S = ht.Suite("q8_respost")
ht.compiled_only()
os.environ.setdefault("HARP_CC_OPT", "1")  # what the kernels compute, not their speed (test_qamx.py)
Q8_FORCE = ["--knob", "int8=force"]


def qdq_model(zx, zy, sc, hw=(17, 19)):
    """The model (the module's comment) of images hw with output scales sc
    (name -> scale; 2.0 where missing); its path, feeds and each output's step."""
    rng = np.random.default_rng(11)
    sx = np.float32(0.02)
    cc = qm.ConvChain(rng, sx, zx, zy, sc)
    nodes, inits, outs, steps, q, conv = cc.nodes, cc.inits, cc.outs, cc.steps, cc.q, cc.conv

    def weight(shape):
        return qm.weight(rng, shape)

    x = (rng.standard_normal((2, 64) + hw) * 3).astype(np.float32)
    x.flat[::4] = rng.choice(np.array([-1e3, 1e3], np.float32), x.flat[::4].shape)
    nodes.append(h.make_node("QuantizeLinear", ["x", "sx", "zx"], ["x_q"]))
    nodes.append(h.make_node("DequantizeLinear", ["x_q", "sx", "zx"], ["x_d"]))
    a = conv("A", ("x_d", sx), weight((96, 64, 1, 1)))
    d = conv("D", ("x_d", sx), weight((96, 64, 1, 1)))
    b = conv("B", a, weight((96, 96, 1, 1)))
    nodes.append(h.make_node("Add", [b[0], d[0]], ["R"]))
    nodes.append(h.make_node("Relu", ["R"], ["Rr"]))
    conv("S", q("Rr", False), weight((64, 96, 1, 1)), out=True)
    return cc.save("q8_respost", x)


def calibrated(zx, zy, hw):
    """qdq_model of images hw, its scales calibrated (quant_models.calibrated)."""
    return qm.calibrated(lambda a, b, sc: qdq_model(a, b, sc, hw), zx, zy, 4)


# ws: the VNNI kernels weight-stationary (int8_order; the hook then on each 6-row block of all columns);
# the last: the C without AVX-512, so the hook's scalar loop (an -O1 build: a shorter compile)
RUNS = (("auto", {}), ("scalar", {"HARP_INT8_ISA": "scalar"}), ("ws", {"HARP_INT8_ORDER": "ws"}),
        ("avx2 C", {"HARP_CFLAGS": "-O1 -march=x86-64-v3"}))


def run_case(zx, zy, hw=(17, 19)):
    name = f"zx={zx} zy={zy} {hw[0]}x{hw[1]}"
    path, feeds, steps = calibrated(zx, zy, hw)
    so = ort.SessionOptions()
    so.log_severity_level = 3
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    want = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))
    got = {}
    for tag, env in RUNS:
        os.environ.update(env)
        p, dd = ht.run(path, feeds, backend="cpu", extra=Q8_FORCE)
        for k in env:
            os.environ.pop(k)
        S.check(f"{name} {tag}: runs", p.returncode == 0, p.stderr[-600:])
        if p.returncode:
            continue
        for k, step in steps.items():
            y = got[(tag, k)] = np.load(os.path.join(dd, k + ".npy"))
            err = np.abs(y.astype(np.float64) - want[k]) / step
            eq = float(np.mean(err <= 1e-3))
            qv = np.rint(want[k] / step)
            inside = float(np.mean((qv > -zy) & (qv < 255 - zy)))
            S.check(f"{name} {tag} {k}: equal to onnxruntime's int8 run", y.shape == want[k].shape and eq >= 0.999 and err.max() <= 1
                    and inside > 0.3, f"{eq:.4%} equal, max {err.max():.2f} steps, {inside:.1%} unsaturated")
    for tag, _ in RUNS[1:]:
        if all(("auto", k) in got and (tag, k) in got for k in steps):
            diff = [k for k in steps if not np.array_equal(got[("auto", k)], got[(tag, k)])]
            S.check(f"{name}: auto and {tag} equal", not diff, f"differ in {diff}")
    return path


def check_c(path):
    out = tempfile.mkdtemp(prefix="harp_py_q8_respost_c_")
    p = subprocess.run([ht.HARP, "compile", path, "--target", "cpu", "--sources-only", "-o", out, *Q8_FORCE], capture_output=True,
                       text=True, timeout=300)
    S.check("harp compile: runs", p.returncode == 0, p.stderr[-600:])
    src = "".join(open(os.path.join(r, f)).read() for r, _, fs in os.walk(out) for f in fs if f.endswith(".c"))
    posts = re.findall(r"static void (\w+)_q8post\(void \*ctx, long m0, long m1, long n0, long n1\) \{", src)
    S.check("one post hook (B's)", len(posts) == 1, f"{posts}")
    S.check("its AVX-512 loops", "for (; col + 16 <= n1; col += 16)" in src and "for (; col + 64 <= n1;)" in src
            and "_mm_mask_storeu_epi8(y + col, mk," in src, "")
    S.check("no output pass in B's kernel", all(f"{fn}_q8out(" not in src for fn in posts), "")


for zx, zy in ((0, 128), (128, 0), (255, 255)):
    p = run_case(zx, zy)
run_case(128, 128, (19, 19))
check_c(p)
S.close()
