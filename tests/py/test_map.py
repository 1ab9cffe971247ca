"""Elementwise regions go to the CPU map kernel (cgen_map.c) and agree with
the reference interpreter: silu, sigmoid(x) * x, sigmoid, tanh, gelu, exp,
relu, neg, sqrt, rsqrt, recip, div, max / min and their chains, on sizes
with a masked tail and sizes split over threads, per-channel and per-row
broadcasts (a bias along the last axis, a scale per row, batch norm's
x * s + t), a scalar input, fp16 / bf16 storage and casts, and inputs
holding NaN, +-inf, zeros and values whose results are subnormal (NaN in,
NaN out; infinities as the interpreter's).  The generated C must call the map
kernel and decline nothing; a region with an op the kernel has no vector
form of (log, a comparison), one with two outputs and one with rows too short
to vectorize must be declined to the loop nest and still agree."""
import os
import re
import tempfile

import numpy as np

from harp_test import Suite, compiled_only, run
compiled_only()  # the map template's numbers, not tier 0's (harp_test.py)

s = Suite("map")
rng = np.random.default_rng(7)
DT = {np.float32: "f32", np.float16: "f16"}


def special(x):
    """Put NaN, +-inf, +-0, large, tiny and exp-underflowing values into x
    (float32 arrays) at the first positions of its flat view."""
    v = x.reshape(-1)
    vals = [np.nan, np.inf, -np.inf, 0.0, -0.0, 100.0, -100.0, 90.0, -90.0, 150.0, -150.0,
            1e-30, -1e-30, 3.0e38, -3.0e38, 20.0, -20.0, 12.0, -12.0, 5.5, -5.5]
    n = min(len(vals), v.size)
    v[:n] = np.array(vals[:n], dtype=v.dtype)
    return x


def compare(name, got, want, rtol, atol):
    g = got.astype(np.float64).reshape(-1)
    w = want.astype(np.float64).reshape(-1)
    if g.shape != w.shape:
        s.check(f"{name}: shape", False, f"{got.shape} != {want.shape}")
        return
    s.check(f"{name}: NaN where the interpreter has NaN", np.array_equal(np.isnan(g), np.isnan(w)),
            f"{np.flatnonzero(np.isnan(g) != np.isnan(w))[:8]}")
    inf = np.isinf(w)
    s.check(f"{name}: infinities as the interpreter's", np.array_equal(g[inf], w[inf]) and not np.isinf(g[~inf]).any(),
            f"{g[inf][:8]} vs {w[inf][:8]}")
    fin = np.isfinite(w) & np.isfinite(g)
    err = np.abs(g[fin] - w[fin])
    bad = err > rtol * np.abs(w[fin]) + atol
    worst = int(np.argmax(err - rtol * np.abs(w[fin]))) if err.size else 0
    s.check(f"{name}: values within {rtol:g} rel + {atol:g}", not bad.any(),
            f"{int(bad.sum())} off; worst got {g[fin][worst]!r} want {w[fin][worst]!r}" if err.size else "")


def case(name, decl, expr, inputs, out_dt="f32", want_kernel=True, rtol=6e-7, atol=1e-44, declined_why=None,
         kernels=1, shape=None):
    """Compile `y = expr` on the cpu backend; check the map kernel is used
    (or declined), then y against the interpreter.  kernels: how many map
    kernels (a region cut into pieces has one per piece); shape: y's, when
    not the inputs' broadcast."""
    shape = shape or np.broadcast_shapes(*(v.shape for v in inputs.values()))
    text = (f"graph main({decl}) -> (y: {out_dt}[{', '.join(str(d) for d in shape)}]) {{\n"
            f"    y = {expr}\n    return y\n}}\n")
    path = os.path.join(tempfile.mkdtemp(), "m.harp")
    with open(path, "w") as f:
        f.write(text)
    q, e = run(path, inputs, backend="interp")
    s.check(f"{name}: runs on the interpreter", q.returncode == 0, q.stderr.strip()[-400:])
    dump = tempfile.mkdtemp()
    p, d = run(path, inputs, extra=["--dump", "c", "--dump-dir", dump], backend="cpu")
    s.check(f"{name}: compiles and runs on cpu", p.returncode == 0, p.stderr.strip()[-400:])
    if p.returncode or q.returncode:
        return
    c = open(os.path.join(dump, "model.c")).read()
    maps = re.findall(r"/\* ---- model_k\d+_map\d*: map ", c)
    declined = re.findall(r"the template declined \(([^)]*)\)", c)
    if want_kernel:
        s.check(f"{name}: on {kernels} map kernel(s)", len(maps) == kernels, str(maps))
        s.check(f"{name}: nothing declined", not declined, str(declined))
    else:
        s.check(f"{name}: declined to the loop nest", not maps and any(x.startswith(declined_why) for x in declined),
                f"{maps} {declined}")
    got = np.load(os.path.join(d, "y.npy"))
    want = np.load(os.path.join(e, "y.npy"))
    compare(name, got, want, rtol, atol)


def f32(*shape, scale=3.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


# one row (dense chains): a masked tail (1001 = 62 vectors + 9), and a size
# split over the threads (41344 points, tail 0; 40001: tail 1)
for shp in [(7, 11, 13), (2, 64, 17, 19), (40001,)]:
    dims = ", ".join(map(str, shp))
    tag = "x".join(map(str, shp))
    x = special(f32(*shp))
    case(f"silu {tag}", f"x: f32[{dims}]", "silu(x)", {"x": x})
    case(f"sigmoid(x)*x {tag}", f"x: f32[{dims}]", "sigmoid(x) * x", {"x": x})
    case(f"tanh {tag}", f"x: f32[{dims}]", "tanh(x)", {"x": x}, atol=3e-7)
    # gelu: the interpreter's 1 + erf(x) cancels for negative x, the kernel's
    # erfc does not: absolute error against the largest output
    case(f"gelu {tag}", f"x: f32[{dims}]", "gelu(x)", {"x": x}, rtol=1e-6, atol=2e-6)

x = special(f32(3, 333))
x2 = special(f32(3, 333, scale=40.0))
case("exp (subnormal results)", "x: f32[3, 333]", "exp(x)", {"x": x2})
case("sigmoid", "x: f32[3, 333]", "sigmoid(x)", {"x": x2})
case("relu, neg, sqrt, rsqrt, recip", "x: f32[3, 333]", "relu(neg(x)) + sqrt(abs(x)) * rsqrt(abs(x) + 1.0) - recip(x)",
     {"x": x})
a, b = special(f32(5, 77)), f32(5, 77)
b.reshape(-1)[21:27] = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30]
case("div with zeros, infinities, NaN", "a: f32[5, 77], b: f32[5, 77]", "a / b", {"a": a, "b": b})
case("max / min keep NaN", "a: f32[5, 77], b: f32[5, 77]", "max(a, b) - min(a, b * 0.5)", {"a": a, "b": b})

# broadcasts: batch norm's per-channel scale and shift (rows of H*W, split
# over threads), a bias along the last axis, a scale per row, a scalar input
xb, sc, sh = special(f32(2, 24, 29, 31)), f32(24, 1, 1), f32(24, 1, 1)
case("bn affine+relu (per-channel)", "x: f32[2, 24, 29, 31], s: f32[24, 1, 1], t: f32[24, 1, 1]",
     "relu(x * s + t)", {"x": xb, "s": sc, "t": sh}, atol=2e-6)
case("silu(x * s + t) (per-channel)", "x: f32[2, 24, 29, 31], s: f32[24, 1, 1], t: f32[24, 1, 1]",
     "silu(x * s + t)", {"x": xb, "s": sc, "t": sh}, atol=2e-6)
xr, br = special(f32(70, 3072 // 4 + 3)), f32(3072 // 4 + 3)
case("gelu(x + bias) along the last axis", "x: f32[70, 771], b: f32[771]", "gelu(x + b)", {"x": xr, "b": br},
     rtol=1e-6, atol=2e-6)
xs, sr = special(f32(40, 50)), f32(40, 1)
case("a scale per row", "x: f32[40, 50], s: f32[40, 1]", "sigmoid(x * s)", {"x": xs, "s": sr})
case("a scalar input", "x: f32[40, 50], s: f32[1]", "tanh(x * s)", {"x": xs, "s": f32(1)}, atol=3e-7)

# half storage: fp16 / bf16 in and out, casts in the chain
xh = special(f32(64, 515))
xh.reshape(-1)[13:15] = 6.0e4  # 3e38 is no half
xh = xh.astype(np.float16)
case("fp16 gelu", "x: f16[64, 515]", "gelu(x)", {"x": xh}, out_dt="f16", rtol=1e-3, atol=1e-4)
case("fp16 silu", "x: f16[64, 515]", "silu(x)", {"x": xh}, out_dt="f16", rtol=1e-3, atol=1e-4)
case("fp16 in, f32 out", "x: f16[64, 515]", "tanh(cast(x, f32))", {"x": xh}, atol=3e-7)
case("f32 in, bf16 rounded in the chain, f32 out", "x: f32[64, 515]", "cast(cast(sigmoid(x), bf16), f32) * x",
     {"x": special(f32(64, 515))})

# pads, slices and concats: the output cut into pieces, one kernel each.
# RoPE's rotate-half (bench/models/llama_layer.harp), f32 and f16 storage
ROPE = "t * c + concat([-slice(t, [32], [64], [3]), slice(t, [0], [32], [3])], axis=3) * sn"
rdecl = "t: {0}[1, 24, 4, 64], c: {0}[24, 1, 64], sn: {0}[24, 1, 64]"
rin = {"t": special(f32(1, 24, 4, 64)), "c": f32(24, 1, 64, scale=1.0), "sn": f32(24, 1, 64, scale=1.0)}
# (t * c + r * sn may contract to an FMA: one rounding less than the reference)
case("rope (rotate-half)", rdecl.format("f32"), ROPE, rin, kernels=2, rtol=1e-6, atol=2e-6)
case("rope fp16", rdecl.format("f16"), ROPE, {k: v.astype(np.float16) for k, v in rin.items()}, out_dt="f16",
     kernels=2, rtol=1e-3, atol=1e-4)
# three pieces, each its own chain of ops
xc = special(f32(5, 7, 96))
case("concat of three along the last axis", "x: f32[5, 7, 96]",
     "concat([slice(x, [0], [16], [2]) * 2.0, exp(slice(x, [16], [40], [2])), -slice(x, [40], [96], [2])], axis=2)",
     {"x": xc}, kernels=3)
# a pad with a value, both sides: pad pieces are constants through the chain
case("silu of a pad with 1.5", "x: f32[6, 50]", "silu(pad(x, [[0, 0], [16, 20]], value=1.5)) * 3.0",
     {"x": special(f32(6, 50))}, kernels=3, shape=(6, 86))
# a concat along a middle axis: pieces of rows, y written with its row stride
case("concat along axis 1", "x: f32[6, 20, 33]",
     "sigmoid(concat([-slice(x, [10], [20], [1]), slice(x, [0], [10], [1])], axis=1)) * x",
     {"x": special(f32(6, 20, 33))}, kernels=2)
# a value of the region read shifted, no pad: one piece
case("exp(x) read at two shifts", "x: f32[9, 130]",
     "slice(exp(x), [1], [130], [1]) + slice(exp(x), [0], [129], [1])", {"x": special(f32(9, 130))},
     shape=(9, 129))

# declined to the loop nest, same values
xp = np.abs(f32(9, 130)) + 0.5
case("log: no vector form", "x: f32[9, 130]", "silu(log(x))", {"x": xp}, want_kernel=False,
     declined_why="map: an op without a vector form")
case("where: no vector form", "x: f32[9, 130]", "where(x > 1.0, silu(x), x)", {"x": xp}, want_kernel=False,
     declined_why="map: an")
case("rows of 5: too short", "x: f32[300, 5], b: f32[300, 1], c: f32[1, 5]", "sigmoid(x * b + c)",
     {"x": f32(300, 5), "b": f32(300, 1), "c": f32(1, 5)}, want_kernel=False, atol=2e-6,
     declined_why="map: rows of fewer than 16 points")

s.close()
