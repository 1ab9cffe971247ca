"""--precision bf16: hardswish gates fused into the contraction before them.

Needs: harp_test (HARP_BIN), onnx, onnxruntime, a CPU with AVX512_BF16
(skips, 77, without).  Gives: one suite, test_bf16_gate.

PP-LCNetV3 (the PP-OCRv4 detector's backbone) follows each conv with a
scale, a hardswish spelled out as x * clip(x + 3, 0, 6) / 6 (paddle2onnx),
and another scale.  With --precision bf16 those ops are epilogue steps of
the conv or GEMM (rg_options.gate_epilogues: a gate x * clamp(x * a + b, lo,
hi) and x / c by a constant), not a map over an fp32 tensor; the fp32
default keeps its maps (its regions unchanged).  Checked here on a 1x1 conv
(the GEMM template), a depthwise 3x3 (cgen_dwconv.c), a 3x3 conv with ONNX's
HardSwish op (mul, add, max, min, then the product) and a MatMul gated by
HardSigmoid (x * hardsigmoid(x)), with and without AMX:
  * the outputs against onnxruntime fp32 within the documented whole-model
    bf16 tolerance (docs/options.md, "precision": max abs error <= 2e-2 x
    max |reference|), the values spread over [-8, 8] so that every clamp
    bound is crossed;
  * the generated C: no map kernel is left, each gate is in a contraction
    kernel (its `g_ = ` statement);
  * the fp32 build: its maps remain, and it agrees with onnxruntime to fp32
    rounding.
"""
import os
import re
import sys
import tempfile

import numpy as np

from harp_test import Suite, run

try:
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper
except ImportError:
    print("skip: no onnx / onnxruntime")
    sys.exit(77)

if "avx512_bf16" not in open("/proc/cpuinfo").read():
    print("skip: this CPU has no AVX512_BF16")
    sys.exit(77)

s = Suite("bf16_gate")
rng = np.random.default_rng(2811)


def arr(*shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def const(name, v):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.array(v, np.float32), name))


def hswish(x, y, tag):
    """paddle2onnx's spelling: y = x * clip(x + 3, 0, 6) / 6."""
    return [helper.make_node("Add", [x, "three"], [tag + "_a"]),
            helper.make_node("Clip", [tag + "_a", "zero", "six"], [tag + "_c"]),
            helper.make_node("Mul", [x, tag + "_c"], [tag + "_m"]), helper.make_node("Div", [tag + "_m", "six"], [y])]


def affine(x, y, tag, a, b):
    """y = x * a + b by scalar constants (PP-LCNetV3's learnable scales)."""
    return [const(tag + "_s", a), const(tag + "_t", b), helper.make_node("Mul", [tag + "_s", x], [tag + "_x"]),
            helper.make_node("Add", [tag + "_x", tag + "_t"], [y])]


C, H, W = 16, 19, 37
nodes = [const("three", 3.0), const("zero", 0.0), const("six", 6.0)]
nodes += [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"])] + affine("c1", "a1", "l1", 1.25, -0.5)
nodes += hswish("a1", "h1", "h1") + affine("h1", "p1", "l2", 0.75, 0.25)
nodes += [helper.make_node("Conv", ["p1", "wd", "bd"], ["c2"], group=C, pads=[1] * 4)] + hswish("c2", "h2", "h2")
nodes += [helper.make_node("Conv", ["h2", "w3", "b3"], ["c3"], pads=[1] * 4), helper.make_node("HardSwish", ["c3"], ["y"])]
# a MatMul (the GEMM template over a [rows, features] activation) gated by HardSigmoid
nodes += [helper.make_node("MatMul", ["z", "wm"], ["mz"]),
          helper.make_node("HardSigmoid", ["mz"], ["hz"], alpha=0.25, beta=0.5), helper.make_node("Mul", ["mz", "hz"], ["yz"])]
# weights that spread the pre-activations over about [-8, 8]
inits = {"w1": arr(C, 8, 1, 1, scale=1.2), "b1": arr(C, scale=0.5), "wd": arr(C, 1, 3, 3, scale=0.9),
         "bd": arr(C, scale=0.5), "w3": arr(24, C, 3, 3, scale=0.25), "b3": arr(24, scale=0.5),
         "wm": arr(40, 33, scale=0.7)}
feeds = {"x": arr(1, 8, H, W, scale=2.0), "z": arr(29, 40, scale=1.5)}
def save(outputs, name):
    """The model with these outputs, saved; its path."""
    vi = [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(a.shape)) for n, a in feeds.items()]
    vo = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs]
    g = helper.make_graph(nodes, "g", vi, vo, [numpy_helper.from_array(a, n) for n, a in inits.items()])
    out = os.path.join(tempfile.mkdtemp(), name)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), out)
    return out


so = ort.SessionOptions()
so.intra_op_num_threads = 2
path = save(["y", "yz"], "gate.onnx")
names = ["y", "yz"]
want = dict(zip(names, ort.InferenceSession(path, so, providers=["CPUExecutionProvider"]).run(None, feeds)))
pres = ["c1", "c2", "c3", "mz"]
pre = ort.InferenceSession(save(pres, "pre.onnx"), so, providers=["CPUExecutionProvider"]).run(None, feeds)
for n, v in zip(pres, pre):  # the gates see both sides of their clamps
    s.check(f"inputs: {n} crosses the clamps (min {v.min():.3g}, max {v.max():.3g})", v.min() < -4 and v.max() > 4)


def kernels(src):
    """{kernel header (`model_kN_KIND: ...`): its C up to the next header}."""
    parts = re.split(r"/\* ---- (model_k\d+_\w+: [^\n]*) ---- \*/", src)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts) - 1, 2)}


for amx in ("auto", "off"):
    os.environ["HARP_AMX"] = amx
    tag = f"bf16, amx {amx}"
    dump = tempfile.mkdtemp()
    p, d = run(path, feeds, backend="cpu", extra=["--precision", "bf16", "--dump", "c", "--dump-dir", dump])
    s.check(f"{tag}: runs", p.returncode == 0, p.stderr.strip()[-600:])
    if p.returncode:
        continue
    for n in names:
        got = np.load(os.path.join(d, n + ".npy"))
        err, scale = float(np.max(np.abs(got - want[n]))), float(np.max(np.abs(want[n])))
        s.check(f"{tag}: {n} vs onnxruntime fp32, max abs err {err:.3g} <= 2e-2 x {scale:.3g}", err <= 2e-2 * scale,
                f"ratio {err / scale:.3g}")
        s.check(f"{tag}: {n} differs from fp32 (bf16 ran)", err > 1e-6 * scale, f"err {err:.3g}")
    ks = kernels(open(os.path.join(dump, "model.c")).read())
    kinds = sorted(k.split(":")[0].split("_", 2)[2] for k in ks)
    s.check(f"{tag}: no map kernel left", not any(k.startswith("map") for k in kinds), f"kernels {kinds}")
    gated = [k for k, body in ks.items() if "g_ = " in body]
    s.check(f"{tag}: the four gates in four contraction kernels (1x1 conv, depthwise, 3x3 conv, matmul)",
            len(gated) == 4 and not any("_map:" in k for k in gated), f"gated {gated}")
    s.check(f"{tag}: the depthwise conv's epilogue has its gate and its / 6",
            any("depthwise" in k and "g_ = " in b and re.search(r"/ \w+_set1\(6\.0+f\)", b) for k, b in ks.items()),
            f"kernels {list(ks)}")
os.environ["HARP_AMX"] = "auto"

dump = tempfile.mkdtemp()
p, d = run(path, feeds, backend="cpu", extra=["--dump", "c", "--dump-dir", dump])
s.check("fp32: runs", p.returncode == 0, p.stderr.strip()[-600:])
if p.returncode == 0:
    ks = kernels(open(os.path.join(dump, "model.c")).read())
    s.check("fp32: the maps remain (its regions unchanged)", sum("_map:" in k for k in ks) >= 3, f"kernels {list(ks)}")
    s.check("fp32: no gate step", not any("g_ = " in b for b in ks.values()))
    for n in names:
        got = np.load(os.path.join(d, n + ".npy"))
        err, scale = float(np.max(np.abs(got - want[n]))), float(np.max(np.abs(want[n])))
        s.check(f"fp32: {n} vs onnxruntime, max abs err {err:.3g} <= 1e-5 x {scale:.3g}", err <= 1e-5 * scale)
s.close()
