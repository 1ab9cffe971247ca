#!/usr/bin/env python3
"""test_const_pad.py — a literal constant read through padding (issue 25):
a fill expanded to a shape and then padded (a Concat of two fills, as
ConstantOfShape + Concat import; a pad of another value), read by the CPU
kernels that take constants as literals: the map kernel alone and with an
input (contract_map.c), a row reduction, the recurrent-cell template's gate
math over a small GEMM (cell_c.c), the GEMM template's clamp epilogue
(contract.c), the softmax template's scale (contract_row.c; layernorm's
constants alike), and the GPU's simple elementwise kernel
(contract_ewise.c, run on the CPU SIMT simulator, tests/cuda_sim).  Each
kernel once took the constant as its value everywhere, the pad included:
a silent wrong result.  Checked against numpy, in ordinary compiles at two
sizes and in one ShapeSet object (harp run --shapeset) at three bindings."""
import os
import tempfile

import numpy as np

import cuda_sim
from harp_test import MODELS, Suite, close, compiled_only, run, shapeset_run
compiled_only()  # the compiled padding's numbers, not tier 0's (harp_test.py)

s = Suite("const_pad")
rng = np.random.default_rng(2525)
D = tempfile.mkdtemp()
env = dict(os.environ, HARP_CACHE_DIR=tempfile.mkdtemp())
ROWS = os.path.join(MODELS, "const_pad_rows.harp")


def fills(r, parts):
    """[r, sum n] of the values v in parts [(v, n), ...], side by side."""
    return np.concatenate([np.full((r, n), v, np.float32) for v, n in parts], axis=1)


def want_rows(x):
    """const_pad_rows.harp in numpy."""
    r = x.shape[0]
    c = fills(r, [(0.5, 16), (3.0, 24)])
    pad = fills(r, [(-1.0, 8), (2.5, 24), (-1.0, 8)])
    return {"y": fills(r, [(1.5, 24), (-2.0, 16)]), "z": x * c + c, "u": x + pad,
            "v": (x * fills(r, [(1.0, 20), (2.0, 20)])).sum(axis=1)}


def check_outputs(tag, out, want):
    for name, w in want.items():
        f = os.path.join(out, name + ".npy")
        got = np.load(f) if os.path.exists(f) else np.zeros(0, np.float32)
        s.check(f"{tag}: {name} vs numpy", *close(got, w, 1e-5, 1e-5))


# ordinary compiles, at two row counts
for r in (8, 5):
    x = rng.standard_normal((r, 40)).astype(np.float32)
    p, out = run(ROWS, {"x": x}, syms=[f"R={r}"], backend="cpu")
    s.check(f"const_pad_rows R={r}: runs", p.returncode == 0, p.stderr[-600:])
    check_outputs(f"const_pad_rows R={r}", out, want_rows(x))

# one ShapeSet object over R, three bindings (its rows read at run time, or compiled per binding: right either way)
for r in (30, 2, 17):
    x = rng.standard_normal((r, 40)).astype(np.float32)
    p, out = shapeset_run(ROWS, {"x": x}, ["--backend", "cpu", "--shapeset", "R=2..30"], env, D)
    s.check(f"const_pad_rows --shapeset R={r}: runs", p.returncode == 0, p.stderr[-600:])
    check_outputs(f"const_pad_rows --shapeset R={r}", out, want_rows(x))

# the recurrent-cell template (a GEMM of few rows with its gate math): the product scaled by two fills side by side
CELL = """graph<M=8> main(x: f32[M, 32], w: f32[32, 48]) -> (y: f32[M, 48], z: f32[M, 48]) {
    y = (x @ w) * concat([expand(0.5, [M, 16]), expand(-1.0, [M, 32])], axis=1)
    z = max(x @ w, concat([expand(0.25, [M, 20]), expand(-0.5, [M, 28])], axis=1))
    return y, z
}
"""
cell = os.path.join(D, "cell_pad.harp")
with open(cell, "w") as f:
    f.write(CELL)
x = rng.standard_normal((8, 32)).astype(np.float32)
w = rng.standard_normal((32, 48)).astype(np.float32)
p, out = run(cell, {"x": x, "w": w}, params={"w"}, backend="cpu")
s.check("cell_pad: runs", p.returncode == 0, p.stderr[-600:])
h = x @ w
check_outputs("cell_pad", out, {"y": h * fills(8, [(0.5, 16), (-1.0, 32)]),
                                "z": np.maximum(h, fills(8, [(0.25, 20), (-0.5, 28)]))})

# the GEMM template's epilogue: a max with a constant is a clamp only where no pad of it is read
GEMM = """graph<M=64> main(x: f32[M, 32], w: f32[32, 48]) -> (y: f32[M, 48]) {
    y = max(x @ w, pad(expand(0.5, [M, 32]), [[0, 0], [8, 8]], value=-1.0))
    return y
}
"""
gemm = os.path.join(D, "gemm_pad.harp")
with open(gemm, "w") as f:
    f.write(GEMM)
x = rng.standard_normal((64, 32)).astype(np.float32)
p, out = run(gemm, {"x": x, "w": w}, params={"w"}, backend="cpu")
s.check("gemm_pad: runs", p.returncode == 0, p.stderr[-600:])
check_outputs("gemm_pad", out, {"y": np.maximum(x @ w, fills(64, [(-1.0, 8), (0.5, 32), (-1.0, 8)]))})

# the softmax template (both targets): a constant factor is its scale only where no pad of it is read
SOFTMAX = """graph<R=8> main(x: f32[R, 64]) -> (y: f32[R, 64]) {
    y = softmax(x * pad(expand(0.5, [R, 48]), [[0, 0], [8, 8]], value=2.0))
    return y
}
"""
sm = os.path.join(D, "softmax_pad.harp")
with open(sm, "w") as f:
    f.write(SOFTMAX)
x = rng.standard_normal((8, 64)).astype(np.float32)
t = x * fills(8, [(2.0, 8), (0.5, 48), (2.0, 8)])
e = np.exp(t - t.max(axis=1, keepdims=True))
want_sm = {"y": e / e.sum(axis=1, keepdims=True)}
p, out = run(sm, {"x": x}, backend="cpu")
s.check("softmax_pad: runs", p.returncode == 0, p.stderr[-600:])
check_outputs("softmax_pad", out, want_sm)

# the CUDA translation unit (sm80) on the simulator
if cuda_sim.have_gxx():
    x = rng.standard_normal((6, 40)).astype(np.float32)
    p, d = cuda_sim.dump(ROWS, "sm80", ("R=6",))
    s.check("const_pad_rows sm80: dump", p.returncode == 0, p.stderr[-600:])
    outs, err = cuda_sim.run(d, {"x": x}) if p.returncode == 0 else ({}, "no dump")
    s.check("const_pad_rows sm80: runs on the simulator", err is None, str(err)[-600:])
    for name, w in want_rows(x).items():
        s.check(f"const_pad_rows sm80: {name} vs numpy", *close(np.asarray(outs.get(name, np.zeros(0))), w, 1e-5, 1e-5))
    x = rng.standard_normal((8, 64)).astype(np.float32)
    p, d = cuda_sim.dump(sm, "sm80")
    outs, err = cuda_sim.run(d, {"x": x}) if p.returncode == 0 else ({}, p.stderr[-600:])
    s.check("softmax_pad sm80: runs on the simulator", err is None, str(err)[-600:])
    t = x * fills(8, [(2.0, 8), (0.5, 48), (2.0, 8)])
    e = np.exp(t - t.max(axis=1, keepdims=True))
    s.check("softmax_pad sm80: y vs numpy", *close(np.asarray(outs.get("y", np.zeros(0))), e / e.sum(axis=1, keepdims=True),
                                                   1e-5, 1e-5))
s.close()
