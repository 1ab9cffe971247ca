"""Kernels that are the same code are compiled once (src/backend/common/kdedup.c):
a model that repeats a layer gets one copy of each kernel's code and
#defines for the repeats, which run it on their own buffers, passed in the
copy's order when theirs differs.  The results must match the interpreter
and the build without sharing (HARP_NO_DEDUP=1) bit for bit, with the
weights as inputs and as params (packed once, one packed block per kernel).
Kernels that differ in a constant (two matmuls of another depth K) share
the functions and types that are the same text (src/backend/c/kitems.c):
their micro-kernels and, the depth being read from the context, their
tasks become #defines to the first one's."""
import os
import re
import tempfile

import numpy as np

from harp_test import Suite, close, compiled_only, run
compiled_only()  # the deduplicated kernels' numbers, not tier 0's (harp_test.py)

s = Suite("kdedup")
rng = np.random.default_rng(3)

model = os.path.join(tempfile.mkdtemp(), "repeat.harp")
with open(model, "w") as f:
    f.write("""
graph<S=24> layer(x: f32[1, S, 32], w: f32[32, 32], b: f32[32], g: f32[32], w1: f32[32, 64], w2: f32[64, 32])
    -> (y: f32[1, S, 32]) {
    a = attention(x @ w + b, x, x, heads=2)
    h = layernorm(x + a, gamma=g)
    y = h + relu(h @ w1) @ w2
    return y
}

graph<S=24> main(x: f32[1, S, 32], wa: f32[32, 32], ba: f32[32], ga: f32[32], w1a: f32[32, 64], w2a: f32[64, 32],
                 wb: f32[32, 32], bb: f32[32], gb: f32[32], w1b: f32[32, 64], w2b: f32[64, 32],
                 c1: f32[8, 8, 3, 3], c2: f32[8, 8, 3, 3], im: f32[2, 8, 10, 10],
                 ua: f32[64, 48], va: f32[48, 64], ub: f32[64, 80], vb: f32[80, 64])
    -> (y: f32[1, S, 32], z: f32[2, 8, 10, 10], v: f32[64, 64], w: f32[64, 64]) {
    h = layer(x, wa, ba, ga, w1a, w2a)
    y = layer(h, wb, bb, gb, w1b, w2b)
    u = relu(conv2d(im, c1, pad=1))
    z = relu(conv2d(u, c2, pad=1))
    v = relu(ua @ va)
    w = relu(ub @ vb)
    return y, z, v, w
}
""")
feeds = {"x": rng.standard_normal((1, 24, 32)).astype(np.float32),
         "im": rng.standard_normal((2, 8, 10, 10)).astype(np.float32)}
for k, sh in (("ua", (64, 48)), ("va", (48, 64)), ("ub", (64, 80)), ("vb", (80, 64))):
    feeds[k] = rng.standard_normal(sh).astype(np.float32)
for k, sh in (("wa", (32, 32)), ("wb", (32, 32)), ("w1a", (32, 64)), ("w1b", (32, 64)), ("w2a", (64, 32)),
              ("w2b", (64, 32)), ("c1", (8, 8, 3, 3)), ("c2", (8, 8, 3, 3))):
    feeds[k] = (rng.standard_normal(sh) * sh[0] ** -0.5 * (0.3 if len(sh) == 4 else 1)).astype(np.float32)
for k in ("ba", "bb"):
    feeds[k] = (rng.standard_normal(32) * 0.1).astype(np.float32)
for k in ("ga", "gb"):
    feeds[k] = (1 + rng.standard_normal(32) * 0.1).astype(np.float32)
weights = [k for k in feeds if k not in ("x", "im")]

q, want = run(model, feeds, backend="interp")
s.check("interpreter runs", q.returncode == 0, q.stderr)


def cpu(params, env=None):
    d = tempfile.mkdtemp()
    old = dict(os.environ)
    os.environ.update(env or {})
    try:
        p, out = run(model, feeds, extra=["--dump", "c", "--dump-dir", d], backend="cpu", params=params)
    finally:
        os.environ.clear()
        os.environ.update(old)
    src = open(os.path.join(d, "model.c")).read() if p.returncode == 0 else ""
    return p, out, src


for what, params in (("weights as inputs", ()), ("weights as params", weights)):
    p, out, src = cpu(params)
    s.check(f"{what}: runs", p.returncode == 0, p.stderr)
    if p.returncode:
        continue
    copies = re.findall(r"/\* the code of kernel (\d+) \*/", src)
    # the second layer's kernels, its q projection, the second conv; the
    # second layer's q projection reads (weights, then h) where the first's
    # reads (x, then weights): a wrong order fails the comparisons below
    s.check(f"{what}: kernels share code", len(copies) >= 5, f"{len(copies)} copies")
    # kernels of code of their own that #define some of their functions to
    # an earlier kernel's (the matmuls' micro-kernels)
    own = [t for t in re.split(r"^/\* kernel \d+: ", src, flags=re.M)[1:] if "the code of kernel" not in t]
    shared = [t for t in own if re.search(r"^#define (model_k\d+)_(\w+) model_k\d+_\2$", t, flags=re.M)]
    s.check(f"{what}: kernels share functions", len(shared) >= 1, f"{len(shared)} of {len(own)}")
    # the depth travels in the context (cgen_gemm_variant.c): the matmuls' tasks too
    s.check(f"{what}: the other depth shares the task",
            any(re.search(r"^#define model_k\d+_gemm_[a-z0-9]+_task model_k\d+_gemm_[a-z0-9]+_task$", t, flags=re.M) for t in own))
    for o in ("y", "z", "v", "w"):
        got = np.load(os.path.join(out, f"{o}.npy"))
        s.check(f"{what}: {o} vs interpreter", *close(got, np.load(os.path.join(want, f"{o}.npy")), rtol=2e-3, atol=2e-3))
    p2, out2, src2 = cpu(params, {"HARP_NO_DEDUP": "1"})
    s.check(f"{what}: HARP_NO_DEDUP=1 runs", p2.returncode == 0, p2.stderr)
    if p2.returncode:
        continue
    s.check(f"{what}: HARP_NO_DEDUP=1 shares nothing", "the code of kernel" not in src2)
    s.check(f"{what}: the shared code is smaller", len(src2) > len(src) * 1.3, f"{len(src2)} vs {len(src)}")
    for o in ("y", "z", "v", "w"):
        a, b = np.load(os.path.join(out, f"{o}.npy")), np.load(os.path.join(out2, f"{o}.npy"))
        s.check(f"{what}: {o} bit for bit as without sharing", np.array_equal(a, b), f"max diff {np.max(np.abs(a - b))}")
s.close()
