"""Minimal programs for the bugs the differential fuzzer found
(test_fuzz_backends.py, scripts/fuzz.py), each checked against numpy on the
interpreter and the compiled backends."""
import os
import tempfile

import numpy as np

from harp_test import BACKENDS, Suite, close, run

s = Suite("fuzz_regressions")
rng = np.random.default_rng(5)
d = tempfile.mkdtemp(prefix="harp_fr_")


def case(name, text, feeds, want, tol=1e-4):
    path = os.path.join(d, f"{name}.harp")
    with open(path, "w") as f:
        f.write(text)
    for be in dict.fromkeys(BACKENDS + ["regions"]):
        p, out = run(path, feeds, backend=be)
        s.check(f"{name} [{be}] runs", p.returncode == 0, p.stderr)
        if p.returncode == 0:
            for k, w in want.items():
                ok, detail = close(np.load(os.path.join(out, f"{k}.npy")), w, rtol=tol, atol=tol)
                s.check(f"{name} [{be}] {k} vs numpy", ok, detail)


def f32(*shape):
    return rng.uniform(-1, 1, shape).astype(np.float32)


# A '(' opening a line is the next statement (a tuple assignment), not a
# call of the name that ended the line before: `y = x` then `(a, b) = f(y)`
# parsed as `y = x(a, b) ...` and failed with a ParseError.
x = f32(4)
case("tuple_after_name", """graph two(x: f32[4]) -> (a: f32[4], b: f32[4]) {
    return x * 2.0, x + 1.0
}
graph main(x: f32[4]) -> (c: f32[4], e: f32[4]) {
    y = x
    (c, e) = two(y)
    return c, e
}
""", {"x": x}, {"c": x * 2, "e": x + 1})

s.close()
