"""Row kernels prefetch the next row (region_c.c, next_row_prefetch): a later
pass without reductions walks the row in steps of 16 elements, prefetches
what the first pass will read of the next row, and finishes with a tail
loop.  The generated C must carry the prefetches (one per input the first
pass streams) and the results must match numpy on the CPU backend for rows
that are not multiples of 16, rows shorter than 16, fp16 inputs, and two
streamed inputs; a region without a later reduction-free pass gets none."""
import os
import re
import tempfile

import numpy as np

from harp_test import Suite, close, compiled_only, run
compiled_only()  # the row kernels' numbers, not tier 0's (harp_test.py)

# These are the loop nest's features: keep softmax off the row-softmax kernel
# (cgen_softmax.c, which every softmax here would otherwise take).
os.environ["HARP_NO_TEMPLATES"] = "1"
s = Suite("row_prefetch")
rng = np.random.default_rng(5)


def case(name, text, feeds, want, nprefetch, tol=1e-5):
    fd, path = tempfile.mkstemp(suffix=".harp", prefix="harp_pf_")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    d = tempfile.mkdtemp(prefix="harp_pf_")
    p, _ = run(path, feeds, backend="cpu", outdir=d, extra=["--dump", "c", "--dump-dir", d])
    os.unlink(path)
    if p.returncode != 0:
        s.check(name, False, p.stderr)
        return
    src = open(os.path.join(d, "model.c")).read()
    got = len(re.findall(r"__builtin_prefetch\(&p\d+\[", src))
    s.check(f"{name}: {nprefetch} prefetch(es) of the next row", got == nprefetch, f"{got} in the source")
    s.check(f"{name}: values", *close(np.load(os.path.join(d, "y.npy")), want, rtol=tol, atol=tol / 10))


def softmax(x):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


for rows, cols in ((9, 37), (5, 7), (3, 64)):  # a tail after full steps, no full step, no tail
    x = (rng.standard_normal((rows, cols)) * 3).astype(np.float32)
    case(f"softmax {rows}x{cols}", f"graph main(x: f32[{rows}, {cols}]) -> (y: f32[{rows}, {cols}]) {{\n"
         "    y = softmax(x)\n    return y\n}\n", {"x": x}, softmax(x), 1)

x = rng.standard_normal((6, 50)).astype(np.float16)
g = rng.uniform(0.5, 1.5, 50).astype(np.float16)
b = rng.standard_normal(50).astype(np.float16)
X = x.astype(np.float64)
mu = X.mean(axis=1, keepdims=True)
ln = (X - mu) / np.sqrt(((X - mu) ** 2).mean(axis=1, keepdims=True) + 1e-5) * g.astype(np.float64) + b.astype(np.float64)
case("layernorm fp16", "graph main(x: f16[6, 50], g: f16[50], b: f16[50]) -> (y: f16[6, 50]) {\n"
     "    y = layernorm(x, g, b)\n    return y\n}\n", {"x": x, "g": g, "b": b}, ln, 1, tol=1e-2)

x = rng.standard_normal((7, 40)).astype(np.float32)
m = rng.standard_normal((7, 40)).astype(np.float32)
case("two streamed inputs", "graph main(x: f32[7, 40], m: f32[7, 40]) -> (y: f32[7, 40]) {\n"
     "    y = softmax(x + m)\n    return y\n}\n", {"x": x, "m": m}, softmax(x + m), 2)

x = rng.standard_normal((8, 33)).astype(np.float32)
case("one pass: nothing to overlap", "graph main(x: f32[8, 33]) -> (y: f32[8, 1]) {\n"
     "    y = sum(x, [1], keepdim=true)\n    return y\n}\n", {"x": x}, x.astype(np.float64).sum(axis=1, keepdims=True), 0)
s.close()
