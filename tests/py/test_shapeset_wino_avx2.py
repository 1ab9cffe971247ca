"""The AVX2 variant of a portable ShapeSet package (`harp compile --shapeset`,
issue 25) runs Winograd per binding (cgen_wino_rt.c): its 3x3 convs hold the
implicit GEMM (_g), Winograd F(4x4) (_w4) and F(2x2) (_w2), every one
reading its sizes at run time, and $P_run picks one by the rule the
specialised compile applies: the cost model's threshold (the package's
"oh_ * ow_ >= N"), F(2x2) below 8 outputs a side or at 27 to 52 columns,
else F(4x4).

Two ONNX models over x[N, 32, H, W], the box N 1..2, H 6..64, W 6..160:
  res:  Conv 3x3 32->32 pad 1 + bias + x (a residual in the epilogue), Relu,
        then Conv 3x3 32->20 pad 1 + bias, Relu (20 output channels: a
        partial block), the weights initializers (packed at model_init:
        each kernel's layout in one buffer);
  winp: Conv 3x3 32->24 pad 1 with the weight an input (packed per call).
Bindings that take each kernel: 12x12 (below the threshold: the implicit
GEMM), 40x60 and 17x63 (F(4x4), tails in both directions), 64x20 (F(4x4)
on short rows), 20x54 (F(4x4): 14 tiles a row, the edge of F(2x2)'s
columns), 30x40 (F(2x2): 40 columns), 7x150 (F(2x2): 7 rows), and the
upper corner.  The package is built by a plain C compiler with the
dispatch's CPUID test replaced by the environment (HP_TEST_ISA, as
test_shapeset_portable.py does) and a probe added to the AVX2 kernels'
entries (a line on stderr naming the kernel: the generated code otherwise
untouched); per binding the forced-AVX2 run's output against onnxruntime
and the kernels it ran against the rule computed here at the package's
threshold, and that against the kernel a package specialised to the
binding (`harp compile --sym`) runs (its model.c's Winograd comment); the
AVX-512 and scalar variants' outputs against onnxruntime too.
A weight the package transforms per call (winp) costs the specialised
plan the filter transform (plan_cpu_wino_filter_s); the package's threshold
counts it too (plan_cpu_winograd_min_pixels_w, by the tile's points: the
package's "oh_ * ow_ >= (ow_ < 8 || (ow_ >= 27 && ow_ <= 52) ? F2 : F4)"),
so its kernel is the specialised package's at every binding: those of
1050 to 2400 pixels (17x63 ... 40x60) flip to the implicit GEMM (before,
with res's one threshold: Winograd, where the specialised ran the implicit
GEMM), and 64x48 (F(2x2)'s columns, between the two thresholds) runs
F(2x2).  res's threshold is one number, as before."""
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from harp_test import HARP, ISAS, Suite, cc_forced_isa, close, host_has  # noqa: E402

try:
    import onnx  # noqa: F401
    import onnxruntime as ort
except ImportError:
    print("onnx / onnxruntime not installed (scripts/install-deps.sh)")
    sys.exit(77)
from onnx_models import init, mk, model, vi  # noqa: E402

s = Suite("shapeset_wino_avx2")
D = tempfile.mkdtemp()
BOX = {"N": (1, 2), "H": (6, 64), "W": (6, 160)}
BINDINGS = [(1, 12, 12), (2, 40, 60), (1, 17, 63), (1, 64, 20), (1, 20, 54), (1, 30, 40), (2, 7, 150), (2, 64, 160),
            (1, 64, 48)]


def res_model(rng):
    w = {"w0": rng.standard_normal((32, 32, 3, 3)) * 0.08, "b0": rng.standard_normal(32) * 0.1,
         "w1": rng.standard_normal((20, 32, 3, 3)) * 0.08, "b1": rng.standard_normal(20) * 0.1}
    nodes = [mk("Conv", ["x", "w0", "b0"], ["c0"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]), mk("Add", ["c0", "x"], ["s0"]),
             mk("Relu", ["s0"], ["h"]), mk("Conv", ["h", "w1", "b1"], ["c1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             mk("Relu", ["c1"], ["y"])]
    return model(nodes, [vi("x", ["N", 32, "H", "W"])], [vi("y", None)], [init(k, v.astype(np.float32)) for k, v in w.items()])


def winp_model():
    nodes = [mk("Conv", ["x", "w"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])]
    return model(nodes, [vi("x", ["N", 32, "H", "W"]), vi("w", [24, 32, 3, 3])], [vi("y", None)], [])


def specialised_kernel(path, N, H, W):
    """The kernel a package specialised to the binding runs for the 3x3 convs: Winograd F(mxm) where its
    model.c says so (every conv of these models alike), else the implicit GEMM ("g")."""
    out = os.path.join(D, f"fix_{os.path.basename(path)}_{N}x{H}x{W}")
    p = subprocess.run([HARP, "compile", path, "--sym", f"N={N}", "--sym", f"H={H}", "--sym", f"W={W}", "-o", out],
                       capture_output=True, text=True, timeout=600)
    if p.returncode:
        return "compile failed: " + p.stderr[-300:]
    tiles = set(re.findall(r"winograd F\((\d)x\d,3x3\)", open(os.path.join(out, "model.c")).read()))
    return "g" if not tiles else f"w{tiles.pop()}" if len(tiles) == 1 else f"tiles {sorted(tiles)}"


def kernel_of(h, w, thr):
    """The kernel the specialised AVX2 compile runs at output size h x w (pad 1: the input's); thr: the package's
    threshold, or (F(2x2)'s, F(4x4)'s) where its filter is transformed per call (by the cost model's tile rule)."""
    if h * w < (thr if isinstance(thr, int) else thr[0] if w < 8 or 27 <= w <= 52 else thr[1]):
        return "g"
    if h < 8 or w < 8:
        return "w2"
    return "w2" if (w + 3) // 4 < 14 and (w + 1) // 2 >= 14 else "w4"


# the probe: each AVX2 kernel of a conv names itself on stderr when it runs
ENTRY = re.compile(r"(int (\w+_avx2_(g|w4|w2))_run\(hprt_pool \*pool, const void \*A, const void \*B, void \*C, "
                   r"const void \*const \*ep\) \{\n)")


def probe(src):
    return ENTRY.subn(lambda m: m.group(1) + f'  fputs("KERNEL {m.group(3)}\\n", stderr);\n', src)


rng = np.random.default_rng(2525)
kinds, flips, res_thr = set(), set(), None
for name, m, wshape in [("res", res_model(rng), None), ("winp", winp_model(), (24, 32, 3, 3))]:
    path, pkg = os.path.join(D, name + ".onnx"), os.path.join(D, "pkg_" + name)
    onnx.save(m, path)
    ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    args = [HARP, "compile", path, "-o", pkg]
    for k, (lo, hi) in BOX.items():
        args += ["--shapeset", f"{k}={lo}..{hi}"]
    p = subprocess.run(args, capture_output=True, text=True, timeout=600)
    s.check(f"{name}: compile --shapeset", p.returncode == 0, p.stdout[-300:] + p.stderr[-600:])
    if p.returncode:
        continue
    src = open(os.path.join(pkg, "model.c")).read()
    thr = [int(t) for t in re.findall(r"if \(oh_ \* ow_ >= (\d+)L\)", src)]
    thr += [(int(a), int(b)) for a, b in re.findall(r"if \(oh_ \* ow_ >= \(ow_ < 8 \|\| \(ow_ >= 27 && ow_ <= 52\) \? (\d+)L : (\d+)L\)\)", src)]
    s.check(f"{name}: {'per tile (its filter per call)' if wshape else 'one number'}",
            all(isinstance(t, tuple) == bool(wshape) for t in thr), f"thresholds {thr}")
    s.check(f"{name}: the convs choose Winograd per binding", len(thr) >= 2, f"thresholds {thr}")
    if not thr:
        continue
    s.check(f"{name}: one threshold for every conv", len(set(thr)) == 1, f"thresholds {thr}")
    res_thr = thr[0] if name == "res" else res_thr
    probed, n = probe(src)
    nconv = 2 if name == "res" else 1
    s.check(f"{name}: the AVX2 conv holds the implicit GEMM, F(4x4) and F(2x2)", n == 3 * nconv, f"{n} AVX2 kernel entries")
    open(os.path.join(pkg, "model_probe.c"), "w").write("#include <stdio.h>\n" + probed)
    exe = os.path.join(pkg, "model_test")
    b = cc_forced_isa(exe, [os.path.join(pkg, f) for f in ("model_probe.c", "model_shapes.c", "main.c")], [pkg])
    s.check(f"{name}: builds with the dispatch from the environment", b.returncode == 0, b.stderr[-600:])
    if b.returncode:
        continue
    wt = (rng.standard_normal(wshape) * 0.08).astype(np.float32) if wshape else None
    for N, H, W in BINDINGS:
        x = rng.standard_normal((N, 32, H, W)).astype(np.float32)
        feeds = {"x": x} if wt is None else {"x": x, "w": wt}
        want = ref.run(None, feeds)[0]
        k, fix = kernel_of(H, W, thr[0]), specialised_kernel(path, N, H, W)
        at = f"N={N} H={H} W={W}"
        s.check(f"{name} {at}: the rule picks the specialised package's kernel {fix}", k == fix, f"the rule: {k} (threshold {thr[0]})")
        if wt is not None:  # the filter per call: with res's one threshold, Winograd from its pixels
            f4 = thr[0][1] if isinstance(thr[0], tuple) else thr[0]  # F(4x4)'s threshold alone
            flips.add((at, kernel_of(H, W, res_thr) != k, kernel_of(H, W, f4) != k))
        kinds.add(k)
        for isa, env, flag in ISAS:
            if not host_has(flag):
                print(f"skip {name} {isa}: this CPU lacks {flag}")
                continue
            d = tempfile.mkdtemp(dir=D)
            os.mkdir(os.path.join(d, "inputs"))
            shutil.copy(os.path.join(pkg, "weights.bin"), d)
            for nm, v in feeds.items():
                np.save(os.path.join(d, "inputs", nm + ".npy"), v)
            r = subprocess.run([exe, d], capture_output=True, text=True, timeout=300, env=dict(os.environ, HP_TEST_ISA=env))
            s.check(f"{name} {at} {isa}: runs", r.returncode == 0, r.stdout[-200:] + r.stderr[-300:])
            if r.returncode:
                continue
            ran = re.findall(r"KERNEL (\w+)", r.stderr)
            if isa == "avx2":
                s.check(f"{name} {at} avx2: every conv runs {k}", ran == [k] * nconv, f"ran {ran}")
            else:
                s.check(f"{name} {at} {isa}: no AVX2 kernel", ran == [], f"ran {ran}")
            got = np.load(os.path.join(d, "outputs", "y.npy"))
            s.check(f"{name} {at} {isa} vs onnxruntime", *close(got, want, 2e-3, 2e-3))
s.check("the bindings take every AVX2 kernel", kinds == {"g", "w4", "w2"}, str(sorted(kinds)))
s.check("winp: a binding where the filter's cost flips the choice from res's threshold (40x60)",
        any(f[0] == "N=2 H=40 W=60" and f[1] for f in flips), str(sorted(flips)))
s.check("winp: one where F(2x2)'s threshold, not F(4x4)'s, decides (64x48)", any(f[0] == "N=1 H=64 W=48" and f[2] for f in flips),
        str(sorted(flips)))
shutil.rmtree(D, ignore_errors=True)
s.close()
