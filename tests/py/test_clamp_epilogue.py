"""max / min with a constant after a contraction or a pooling (ReLU6 =
min(max(x, 0), 6), a one-sided clamp, either operand order) is a clamp step
of the CPU templates' epilogue: the GEMM, the 1x1 and 3x3 convolutions
(stride 1 and 2), the depthwise conv and the pool keep it in their kernel
instead of leaving it, with the bias, to a map kernel of its own (which cost
MobileNetV2 34 extra kernels and a pass over every expanded activation).
Checked against the interpreter, NaN inputs included (the reference's max /
min give NaN when an operand is NaN)."""
import os
import re

import numpy as np

from harp_test import Suite, run_cpu_and_interp

s = Suite("clamp_epilogue")
rng = np.random.default_rng(3)


def rand(*shape, scale=1.0, dtype=np.float32):
    return (rng.standard_normal(shape) * scale).astype(dtype)


def check(name, text, feeds, weights, outs, nkernels, tol=1e-5):
    """nkernels: how many kernels the model must have (None: not checked; fp16 biases are widened by a kernel
    of their own)."""
    r = run_cpu_and_interp(s, name, text, {**feeds, **weights}, params=weights)
    if r is None:
        return
    src, d, e = r
    kernels = re.findall(r"/\* kernel \d+: region (\S+) \*/", src)
    # a map of max / min, or generic loops (a region that ends in max / min: named after it)
    off = re.findall(r"/\* ---- model_k\d+_map: [^\n]*-> [^\n]*\bm(?:ax|in)\b[^\n]*", src)
    off += re.findall(r"/\* kernel \d+: region (?:max|min)\S* \*/\n/\* generic loops[^\n]*", src)
    s.check(f"{name}: every max / min on a template epilogue", not off, str(off))
    if nkernels is not None:
        s.check(f"{name}: one kernel per contraction / pool", len(kernels) == nkernels, f"{len(kernels)}: {kernels}")
    for o in outs:
        got = np.load(os.path.join(d, f"{o}.npy")).astype(np.float64)
        want = np.load(os.path.join(e, f"{o}.npy")).astype(np.float64)
        same_nan = np.array_equal(np.isnan(got), np.isnan(want))
        s.check(f"{name} {o}: NaN where the interpreter has NaN", same_nan,
                f"{int(np.isnan(got).sum())} vs {int(np.isnan(want).sum())}")
        ok = ~np.isnan(want)
        err = np.max(np.abs(got[ok] - want[ok])) / max(1e-30, np.max(np.abs(want[ok]))) if ok.any() else 0.0
        s.check(f"{name} {o}: matches the interpreter (max rel err {err:.1e})", same_nan and err < tol, f"{err:.3g}")
        clipped = np.mean((want[ok] == 0) | (want[ok] == 6) | (want[ok] == -0.5) | (want[ok] == 0.25))
        s.check(f"{name} {o}: the clamp is active", clipped > 0.05, f"{clipped:.2f} of the outputs at a bound")


F32 = """
graph main(a: f32[37, 50], w: f32[50, 70], b: f32[70],
           x: f32[1, 16, 12, 12], w1: f32[32, 16, 1, 1], b1: f32[32], w3: f32[32, 16, 3, 3], b3: f32[32],
           ws: f32[8, 16, 3, 3], bs: f32[8], wd: f32[16, 1, 3, 3], bd: f32[16])
    -> (g: f32[37, 70], c1: f32[1, 32, 12, 12], c3: f32[1, 32, 12, 12], cs: f32[1, 8, 6, 6],
        dw: f32[1, 16, 12, 12], ds: f32[1, 16, 6, 6], lo: f32[37, 70], hi: f32[1, 32, 12, 12],
        rev: f32[1, 16, 6, 6], mp: f32[1, 16, 6, 6]) {
    g = min(max(a @ w + b, 0.0), 6.0)                                            // GEMM, ReLU6
    c1 = min(max(conv2d(x, w1, bias=b1), 0.0), 6.0)                              // 1x1 conv
    c3 = min(max(conv2d(x, w3, bias=b3, pad=1), 0.0), 6.0)                       // 3x3 conv
    cs = min(max(conv2d(x, ws, bias=bs, stride=2, pad=1), 0.0), 6.0)             // 3x3 stride 2
    dw = min(6.0, max(0.0, conv2d(x, wd, bias=bd, pad=1, groups=16)))            // depthwise, constants first
    ds = min(max(conv2d(x, wd, bias=bd, stride=2, pad=1, groups=16), 0.0), 6.0)  // depthwise stride 2
    lo = max(a @ w, -0.5)                                                        // one side: a floor
    hi = min(conv2d(x, w1) * 0.5, 0.25)                                          // one side: a ceiling, after a scale
    rev = max(min(conv2d(x, wd, stride=2, pad=1, groups=16), 6.0), 0.0)          // min first: two steps
    mp = min(max(max_pool2d(x, kernel=2), 0.0), 6.0)                             // pooling
    return g, c1, c3, cs, dw, ds, lo, hi, rev, mp
}
"""

a = rand(37, 50, scale=2.0)
x = rand(1, 16, 12, 12, scale=2.0)
a[3, 7] = a[20, 0] = np.nan  # NaN through the GEMM rows
x[0, 2, 5, 5] = x[0, 9, 0, 11] = np.nan
weights = dict(w=rand(50, 70, scale=0.5), b=rand(70), w1=rand(32, 16, 1, 1, scale=0.7), b1=rand(32),
               w3=rand(32, 16, 3, 3, scale=0.3), b3=rand(32), ws=rand(8, 16, 3, 3, scale=0.3), bs=rand(8),
               wd=rand(16, 1, 3, 3, scale=0.8), bd=rand(16))
check("fp32", F32, {"a": a, "x": x}, weights, ["g", "c1", "c3", "cs", "dw", "ds", "lo", "hi", "rev", "mp"], 10)

F16 = """
graph main(x: f16[1, 16, 12, 12], w: f16[24, 16, 3, 3], b: f16[24], wd: f16[16, 1, 3, 3], bd: f16[16])
    -> (y: f16[1, 24, 12, 12], d: f16[1, 16, 12, 12]) {
    y = min(max(conv2d(x, w, bias=b, pad=1), 0.0), 6.0)
    d = min(max(conv2d(x, wd, bias=bd, pad=1, groups=16), 0.0), 6.0)
    return y, d
}
"""
check("fp16", F16, {"x": rand(1, 16, 12, 12, scale=2.0, dtype=np.float16)},
      dict(w=rand(24, 16, 3, 3, scale=0.3, dtype=np.float16), b=rand(24, dtype=np.float16),
           wd=rand(16, 1, 3, 3, scale=0.8, dtype=np.float16), bd=rand(16, dtype=np.float16)), ["y", "d"], None, tol=2e-3)

s.close()
