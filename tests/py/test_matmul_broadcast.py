"""Contractions over broadcast operands, against numpy on every backend: an
output axis that neither operand reads (an EXPANDed operand, a batch axis
only one side has) must still be computed for every index along it.  These
once came out with only index 0 written (the contraction detector dropped
the axis)."""
import os
import tempfile

import numpy as np

from harp_test import BACKENDS, Suite, close, compiled_only, run
compiled_only()  # the compiled matmuls' numbers, not tier 0's (harp_test.py)

s = Suite("matmul_broadcast")
rng = np.random.default_rng(11)
d = tempfile.mkdtemp(prefix="harp_mb_")


def case(name, sig, body, feeds, want):
    path = os.path.join(d, f"{name}.harp")
    with open(path, "w") as f:
        f.write(f"graph main({sig}) {{\n    {body}\n    return c\n}}\n")
    for be in BACKENDS + ["regions"]:
        p, out = run(path, feeds, backend=be)
        s.check(f"{name} [{be}] runs", p.returncode == 0, p.stderr)
        if p.returncode == 0:
            ok, detail = close(np.load(os.path.join(out, "c.npy")), want, rtol=1e-4, atol=1e-4)
            s.check(f"{name} [{be}] vs numpy", ok, detail)


def f32(*shape):
    return rng.uniform(-1, 1, shape).astype(np.float32)


a, b = f32(1, 64), f32(64, 48)
case("rows", "a: f32[1, 64], b: f32[64, 48]) -> (c: f32[32, 48]", "c = expand(a, [32, 64]) @ b",
     {"a": a, "b": b}, np.broadcast_to(a, (32, 64)) @ b)
a, b = f32(32, 64), f32(64, 1)
case("cols", "a: f32[32, 64], b: f32[64, 1]) -> (c: f32[32, 48]", "c = a @ expand(b, [64, 48])",
     {"a": a, "b": b}, a @ np.broadcast_to(b, (64, 48)))
a, b = f32(32, 64), f32(64, 48)
case("batch_neither", "a: f32[32, 64], b: f32[64, 48]) -> (c: f32[4, 32, 48]", "c = expand(a, [4, 32, 64]) @ b",
     {"a": a, "b": b}, np.broadcast_to(a, (4, 32, 64)) @ b)
a, b = f32(2, 3, 24, 40), f32(3, 40, 16)
case("batch_one_side", "a: f32[2, 3, 24, 40], b: f32[3, 40, 16]) -> (c: f32[2, 3, 24, 16]", "c = a @ b",
     {"a": a, "b": b}, a @ b)
a, b, bias = f32(1, 64), f32(64, 1), f32(48)
case("both_epilogue", "a: f32[1, 64], b: f32[64, 1], bias: f32[48]) -> (c: f32[32, 48]",
     "c = relu(expand(a, [32, 64]) @ expand(b, [64, 48]) + bias)", {"a": a, "b": b, "bias": bias},
     np.maximum(np.broadcast_to(a, (32, 64)) @ np.broadcast_to(b, (64, 48)) + bias, 0))
s.close()
