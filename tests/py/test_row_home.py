"""A region's local row array lives in the output it is finally stored to
(region_c.c, row_home) only when that is safe: the softmax row is written
into y and scaled in place; a row another statement reads at other
coordinates (a flip) stays a local array.  Both match numpy."""
import os
import re
import tempfile

import numpy as np

from harp_test import Suite, close, compiled_only, run
compiled_only()  # the row kernels' numbers, not tier 0's (harp_test.py)

# These are the loop nest's features: keep softmax off the row-softmax kernel
# (cgen_softmax.c, which every softmax here would otherwise take).
os.environ["HARP_NO_TEMPLATES"] = "1"
s = Suite("row_home")
rng = np.random.default_rng(11)


def model(text):
    fd, p = tempfile.mkstemp(suffix=".harp", prefix="harp_rowhome_")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return p


def case(name, text, x, want, homed, tol=1e-5):
    d = tempfile.mkdtemp(prefix="harp_rowhome_")
    p, _ = run(model(text), {"x": x}, backend="cpu", outdir=d, extra=["--dump", "c", "--dump-dir", d])
    if p.returncode != 0:
        s.check(name, False, p.stderr)
        return
    src = open(os.path.join(d, "model.c")).read()
    arrays = re.findall(r"float L\d+_\w+\[\d+\];", src)
    s.check(f"{name}: row array {'moved into the output' if homed else 'kept'}", (not arrays) == homed, arrays)
    s.check(f"{name}: values", *close(np.load(os.path.join(d, "y.npy")), want, rtol=tol, atol=tol / 10))


x = (rng.standard_normal((37, 300)) * 3).astype(np.float32)
X = x.astype(np.float64)
e = np.exp(X - X.max(axis=1, keepdims=True))
sm = e / e.sum(axis=1, keepdims=True)

case("softmax", "graph main(x: f32[37, 300]) -> (y: f32[37, 300]) {\n    y = softmax(x)\n    return y\n}\n",
     x, sm, True)
case("softmax by hand", "graph main(x: f32[37, 300]) -> (y: f32[37, 300]) {\n"
     "    e = exp(x - max(x, [1], keepdim=true))\n    y = e / sum(e, [1], keepdim=true)\n    return y\n}\n",
     x, sm, True)
# y[i] reads e[299 - i]: writing e into y would overwrite rows still to be read
case("flipped row", "graph main(x: f32[37, 300]) -> (y: f32[37, 300]) {\n"
     "    e = exp(x - max(x, [1], keepdim=true))\n    y = flip(e, [1]) / sum(e, [1], keepdim=true)\n    return y\n}\n",
     x, e[:, ::-1] / e.sum(axis=1, keepdims=True), False)
# an fp16 output would round the row before it is summed
case("fp16 output", "graph main(x: f32[37, 300]) -> (y: f16[37, 300]) {\n"
     "    y = cast(softmax(x), f16)\n    return y\n}\n", x, sm, False, tol=1e-3)
s.close()
