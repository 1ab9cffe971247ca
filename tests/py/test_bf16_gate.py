"""Hardswish gates fused into the contraction before them, fp32 and bf16.

Needs: harp_test (HARP_BIN), onnx, onnxruntime; a CPU with AVX512_BF16 for
the bf16 half (skipped without).  Gives: one suite, test_bf16_gate.

PP-LCNetV3 (the PP-OCRv4 detector's backbone) follows each conv with a
scale, a hardswish spelled out as x * clip(x + 3, 0, 6) / 6 (paddle2onnx),
and another scale.  On the CPU those ops are epilogue steps of the conv or
GEMM (rg_options.gate_epilogues: a gate x * clamp(x * a + b, lo, hi) and
x / c by a constant), not a map over an fp32 tensor, in fp32 and in bf16;
the knob no_gate_epilogues=1 (an A/B switch) keeps the maps.  Checked here
on a 1x1 conv (the GEMM template), a depthwise 3x3 (cgen_dwconv.c), a 3x3
conv with ONNX's HardSwish op (mul, add, max, min, then the product) and a
MatMul gated by HardSigmoid (x * hardsigmoid(x)):
  * the generated C: no map kernel is left, each gate is in a contraction
    kernel (its `g_ = ` statement); with the knob, the maps remain and no
    gate step; the CUDA C (sm80) keeps them element-wise kernels;
  * fp32, fused and not: the outputs against onnxruntime to fp32 rounding,
    and the fused outputs bit for bit the unfused ones (the same fp32 ops
    in the same order);
  * bf16, with and without AMX: the outputs against onnxruntime fp32 within
    the documented whole-model bf16 tolerance (docs/options.md,
    "precision": max abs error <= 2e-2 x max |reference|);
the values spread over [-8, 8] so that every clamp bound is crossed.
"""
import os
import re
import subprocess
import tempfile

import numpy as np

from harp_test import HARP, Suite, run, onnx_or_skip

onnx_or_skip()
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

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


def check_fused(tag, ks):
    """The fused build's kernels ks (kernels()): no map, the four gates in four contraction kernels."""
    kinds = sorted(k.split(":")[0].split("_", 2)[2] for k in ks)
    s.check(f"{tag}: no map kernel left", not any(k.startswith("map") for k in kinds), f"kernels {kinds}")
    gated = [k for k, body in ks.items() if "g_ = " in body]
    s.check(f"{tag}: the four gates in four contraction kernels (1x1 conv, depthwise, 3x3 conv, matmul)",
            len(gated) == 4 and not any("_map:" in k for k in gated), f"gated {gated}")
    s.check(f"{tag}: the depthwise conv's epilogue has its gate and its / 6",
            any("depthwise" in k and "g_ = " in b and re.search(r"/ \w+_set1\(6\.0+f\)", b) for k, b in ks.items()),
            f"kernels {list(ks)}")


def build(tag, extra, tier0="auto"):
    """Run the model on the CPU with these flags and the knob tier0, its C dumped: (outputs {name: array},
    kernels), or None."""
    os.environ["HARP_TIER0"] = tier0
    dump = tempfile.mkdtemp()
    p, d = run(path, feeds, backend="cpu", extra=[*extra, "--dump", "c", "--dump-dir", dump])
    s.check(f"{tag}: runs", p.returncode == 0, p.stderr.strip()[-600:])
    if p.returncode:
        return None
    outs = {n: np.load(os.path.join(d, n + ".npy")) for n in names}
    return outs, kernels(open(os.path.join(dump, "model.c")).read())


# fp32: fused by default; the knob no_gate_epilogues keeps the maps.  The compiled object's outputs
# (tier0=off) and tier 0's (force: libharp's kernels on the greedy pass's regions), each fused and not.
for t0 in ("off", "force"):
    fp32 = {}
    for knob in (False, True):
        tag = f"fp32, tier0={t0}" + (", no_gate_epilogues=1" if knob else "")
        r = build(tag, ["--knob", "no_gate_epilogues=1"] if knob else [], t0)
        if r is None:
            continue
        fp32[knob], ks = r
        if t0 == "force":  # tier 0 runs libharp's kernels: the dumped C, the object's, is checked with off
            pass
        elif knob:
            s.check(f"{tag}: the maps remain", sum("_map:" in k for k in ks) >= 3, f"kernels {list(ks)}")
            s.check(f"{tag}: no gate step", not any("g_ = " in b for b in ks.values()))
        else:
            check_fused(tag, ks)
        for n in names:
            err, scale = float(np.max(np.abs(fp32[knob][n] - want[n]))), float(np.max(np.abs(want[n])))
            s.check(f"{tag}: {n} vs onnxruntime, max abs err {err:.3g} <= 1e-5 x {scale:.3g}", err <= 1e-5 * scale)
    if len(fp32) == 2:
        a, b = fp32[False], fp32[True]
        for n in names:  # the same fp32 ops in the same order
            s.check(f"fp32, tier0={t0}: {n} fused is bit for bit the maps' output", np.array_equal(a[n], b[n]),
                    f"{int(np.sum(a[n] != b[n]))} of {a[n].size} differ, max {float(np.max(np.abs(a[n] - b[n]))):.3g}")

# the CUDA templates have no gate step: on a GPU target the gates stay element-wise kernels (no GPU needed)
cu = tempfile.mkdtemp()
p = subprocess.run([HARP, "dump", path, "--dump", "cu", "--target", "sm80", "--dump-dir", cu], capture_output=True,
                   text=True, timeout=300)
s.check("sm80: the CUDA C is printed", p.returncode == 0, p.stderr.strip()[-600:])
if p.returncode == 0:
    src = open(os.path.join(cu, "model.cu")).read()
    ewise = len(re.findall(r"__global__ void .*\bk\d+_ewise\(", src))
    s.check(f"sm80: the gates stay element-wise kernels ({ewise}), no gate step", ewise >= 3 and "g_ = " not in src)

if "avx512_bf16" not in open("/proc/cpuinfo").read():
    print("note: this CPU has no AVX512_BF16: the bf16 half is skipped")
else:
    for amx in ("auto", "off"):
        os.environ["HARP_AMX"] = amx
        tag = f"bf16, amx {amx}"
        r = build(tag, ["--precision", "bf16"], "auto")
        if r is None:
            continue
        outs, ks = r
        for n in names:
            err, scale = float(np.max(np.abs(outs[n] - want[n]))), float(np.max(np.abs(want[n])))
            s.check(f"{tag}: {n} vs onnxruntime fp32, max abs err {err:.3g} <= 2e-2 x {scale:.3g}",
                    err <= 2e-2 * scale, f"ratio {err / scale:.3g}")
            s.check(f"{tag}: {n} differs from fp32 (bf16 ran)", err > 1e-6 * scale, f"err {err:.3g}")
        check_fused(tag, ks)
    os.environ["HARP_AMX"] = "auto"
os.environ["HARP_TIER0"] = "auto"
s.close()
