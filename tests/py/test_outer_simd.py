"""Reductions whose loops sit inside an output loop are vectorized along that
output loop (region_loops.c, outer-loop simd) when the reduction is a small
constant window (pools) or strides across rows (sums over axis 0); a row
reduction keeps its innermost `omp simd reduction`.  Values match the
interpreter and numpy, NaN and -inf included, padded windows included.
Pools run on the pool kernel (cgen_pool.c, tests/py/test_pool.py) when it
takes them; HARP_NO_TEMPLATES keeps them on the loop nest here, the path of
the pools it declines (strides past 2, a window or three per plane)."""
import os
import re
import tempfile

import numpy as np

from harp_test import Suite, close, compiled_only, run, write_model  # noqa: F401
compiled_only()  # the outer-axis SIMD loops' numbers, not tier 0's (harp_test.py)

s = Suite("outer_simd")
os.environ["HARP_NO_TEMPLATES"] = "1"
rng = np.random.default_rng(5)
# a simd pragma on a loop whose body opens with a statement, then a loop
OUTER = re.compile(r"#pragma omp simd private\([^)]*\)\n\s*for \([^\n]*\{\n[^\n]*\n\s*for \(")


def model(text):
    fd, p = tempfile.mkstemp(suffix=".harp", prefix="harp_outer_")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return p


def case(name, sig, body, x, want, outer, tol=1e-6):
    text = f"graph main(x: {sig}) -> (y: {want_sig(want)}) {{\n    y = {body}\n    return y\n}}\n"
    m = model(text)
    d = tempfile.mkdtemp(prefix="harp_outer_")
    p, _ = run(m, {"x": x}, backend="cpu", outdir=d, extra=["--dump", "c", "--dump-dir", d])
    if p.returncode != 0:
        s.check(name, False, p.stderr)
        return
    src = open(os.path.join(d, "model.c")).read()
    s.check(f"{name}: {'outer' if outer else 'innermost'} simd", bool(OUTER.search(src)) == outer,
            "\n".join(l for l in src.splitlines() if "omp simd" in l))
    got = np.load(os.path.join(d, "y.npy"))
    s.check(f"{name}: values vs numpy", *close(got, want, rtol=tol, atol=tol))
    q, e = run(m, {"x": x}, backend="interp")
    if q.returncode == 0:
        ref = np.load(os.path.join(e, "y.npy"))
        s.check(f"{name}: NaN where the interpreter has NaN", np.array_equal(np.isnan(got), np.isnan(ref)))
        s.check(f"{name}: values vs the interpreter", *close(got, ref.astype(np.float64), rtol=tol, atol=tol))
    else:
        s.check(f"{name}: interpreter", False, q.stderr)


def want_sig(a):
    dt = {np.float32: "f32", np.float16: "f16"}[a.dtype.type]
    return f"{dt}[{', '.join(map(str, a.shape))}]"


def windows(x, k, st, pad, fill):
    n, c, h, w = x.shape
    xp = np.full((n, c, h + 2 * pad, w + 2 * pad), fill, dtype=np.float64)
    xp[:, :, pad:pad + h, pad:pad + w] = x
    oh, ow = (h + 2 * pad - k) // st + 1, (w + 2 * pad - k) // st + 1
    out = np.empty((n, c, oh, ow, k * k))
    for i in range(k):
        for j in range(k):
            out[..., i * k + j] = xp[:, :, i:i + st * oh:st, j:j + st * ow:st]
    return out


def nanmax(a, axis):  # NaN propagates, as in the reference
    return np.where(np.isnan(a).any(axis), np.nan, np.max(np.where(np.isnan(a), -np.inf, a), axis))


x = rng.standard_normal((2, 5, 23, 37)).astype(np.float32)
x[0, 1, 4, 7] = np.nan
x[1, 2, 10, 10] = -np.inf
x[1, 3, :, :] = -np.inf
f32 = lambda a: a.astype(np.float32)
case("max_pool 3x3 s2", "f32[2, 5, 23, 37]", "max_pool2d(x, 3, stride=2)", x, f32(nanmax(windows(x, 3, 2, 0, -np.inf), -1)), True)
case("max_pool 3x3 s2 pad 1 (-inf)", "f32[2, 5, 23, 37]",
     "max_pool2d(pad(x, [[0, 0], [0, 0], [1, 1], [1, 1]], value=-inf), 3, stride=2)", x,
     f32(nanmax(windows(x, 3, 2, 1, -np.inf), -1)), True)
case("avg_pool 2x2", "f32[2, 5, 23, 37]", "avg_pool2d(x, 2)", x, f32(windows(x, 2, 2, 0, 0).mean(-1)), True, tol=1e-5)
xh = rng.standard_normal((1, 4, 17, 19)).astype(np.float16)
case("max_pool 3x3 s1 fp16", "f16[1, 4, 17, 19]", "max_pool2d(x, 3, stride=1)", xh,
     nanmax(windows(xh.astype(np.float64), 3, 1, 0, -np.inf), -1).astype(np.float16), True, tol=1e-3)

a = rng.standard_normal((301, 53)).astype(np.float32)
a[7, 3] = np.nan
a[:, 5] = -np.inf
a[:, 6] = np.inf
A = a.astype(np.float64)
case("sum axis 0", "f32[301, 53]", "sum(x, [0])", np.nan_to_num(a, posinf=0, neginf=0),
     f32(np.nan_to_num(A, posinf=0, neginf=0).sum(0)), True, tol=1e-4)
case("max axis 0", "f32[301, 53]", "max(x, [0])", a, f32(nanmax(A, 0)), True)
case("min axis 0", "f32[301, 53]", "min(x, [0])", a, f32(-nanmax(-A, 0)), True)
case("mean axis 1 of 3", "f32[3, 301, 53]", "mean(x, [1])", np.stack([a, a, a]).clip(-5, 5),
     f32(np.stack([A, A, A]).clip(-5, 5).mean(1)), True, tol=1e-4)
# along a row: the innermost loop is contiguous, it keeps the reduction clause
case("max along rows", "f32[53, 301]", "max(x, [1])", np.ascontiguousarray(a.T), f32(nanmax(A.T, 1)), False)
s.close()
