"""A ShapeSet object's generic loop nest merges the loops of a contiguous
run whose sizes are symbols (src/backend/c/region_coalesce.c: strides and
trips as products of hp_sv<i>, issue 25).  ONNX graphs over x [1, 16, H, W],
H and W dim_params, one object for the box H, W in 4..20:
  - Clip + GlobalAveragePool (MobileNetV2's tail): the sum over H, W is one
    loop to hp_sv<a> * hp_sv<b> * 1L in the package's model.c, no loop over
    a symbol alone; Relu + ReduceMean over C, H, W: one loop to
    hp_sv<a> * hp_sv<b> * 16L (two merges, the second over the first's bound);
  - the global mean of x + r, r [1, 16, H, 1] (a row broadcast), of x * w,
    w [1, 16, 1, W] (a column broadcast) and of Transpose(z) + x, z
    [1, 16, W, H] (read across the run): the run breaks, the H and W loops
    stay, nothing merged.
Values against numpy at three bindings (a corner, two non-square ones) on
one object.  HARP_NO_TEMPLATES keeps the elementwise graphs on the loop nest."""
import os
import re
import subprocess
import tempfile

import numpy as np

from harp_test import HARP, Suite, close, compiled_only, onnx_or_skip, shapeset_run

onnx_or_skip(runtime=False)
import onnx  # noqa: E402
from onnx_models import init, mk, model, vi  # noqa: E402

compiled_only()
s = Suite("coalesce_sym")
os.environ["HARP_NO_TEMPLATES"] = "1"
rng = np.random.default_rng(25)
work = tempfile.mkdtemp(prefix="harp_csym_")
env = dict(os.environ, HARP_CACHE_DIR=os.path.join(work, "cache"))
BOX = ["--shapeset", "H=4..20", "--shapeset", "W=4..20"]
SIZES = [(20, 20), (9, 13), (17, 5)]
X = [1, 16, "H", "W"]
MERGED = re.compile(r"for \(long c\d+ = 0L; \(?c\d+ < hp_sv(\d+) \* hp_sv(\d+) \* (\d+)L\)?;")
SYM_LOOP = re.compile(r"for \(long c\d+ = 0L; \(?c\d+ < hp_sv\d+\)?;")
c0 = init("lo", np.array(0, np.float32))
c6 = init("hi", np.array(6, np.float32))

GAP = mk("GlobalAveragePool", ["a"], ["y"])
mean = lambda a: a.mean(axis=(2, 3), keepdims=True)  # noqa: E731
# name, the graph, its other inputs' shapes (H, W) -> shape, numpy, and the merged loop's literal
# factor (hp_sv<a> * hp_sv<b> * 1L: H * W; 16L: C * H * W), None where nothing may merge
CASES = [
    ("clip + global mean", model([mk("Clip", ["x", "lo", "hi"], ["a"]), GAP], [vi("x", X)], [vi("y", None)], [c0, c6]),
     {}, lambda x, o: mean(np.clip(x, 0, 6)), "1"),
    ("relu + mean over C, H, W", model([mk("Relu", ["x"], ["a"]), mk("ReduceMean", ["a"], ["y"], axes=[1, 2, 3], keepdims=1)],
                                       [vi("x", X)], [vi("y", None)], []),
     {}, lambda x, o: np.maximum(x, 0).mean(axis=(1, 2, 3), keepdims=True), "16"),
    ("mean of x + row broadcast r", model([mk("Add", ["x", "r"], ["a"]), GAP], [vi("x", X), vi("r", [1, 16, "H", 1])],
                                          [vi("y", None)], []),
     {"r": lambda h, w: (1, 16, h, 1)}, lambda x, o: mean(x + o["r"]), None),
    ("mean of x * column broadcast w", model([mk("Mul", ["x", "w"], ["a"]), GAP], [vi("x", X), vi("w", [1, 16, 1, "W"])],
                                             [vi("y", None)], []),
     {"w": lambda h, w: (1, 16, 1, w)}, lambda x, o: mean(x * o["w"]), None),
    ("mean of transpose(z) + x", model([mk("Transpose", ["z"], ["t"], perm=[0, 1, 3, 2]), mk("Add", ["t", "x"], ["a"]), GAP],
                                       [vi("x", X), vi("z", [1, 16, "W", "H"])], [vi("y", None)], []),
     {"z": lambda h, w: (1, 16, w, h)}, lambda x, o: mean(x + o["z"].transpose(0, 1, 3, 2)), None),
]

for name, m, others, ref, merged in CASES:
    path = os.path.join(work, re.sub(r"\W+", "_", name) + ".onnx")
    onnx.save(m, path)
    pkg = os.path.join(work, re.sub(r"\W+", "_", name))
    p = subprocess.run([HARP, "compile", path, "--target", "cpu", "-o", pkg, *BOX], capture_output=True, text=True,
                       env=env, timeout=300)
    if p.returncode:
        s.check(f"{name}: compiles as one object", False, p.stderr[-400:])
        continue
    src = open(os.path.join(pkg, "model.c")).read()
    body = src[src.find("HP_KERNEL"):]  # the kernels (not the runtime's loops)
    pairs = MERGED.findall(body)
    s.check(f"{name}: {'one loop over the run' if merged else 'no merged loop'}",
            [k for _, _, k in pairs] == ([merged] if merged else []) and all(a != b for a, b, _ in pairs), str(pairs))
    s.check(f"{name}: {'no' if merged else 'the'} loops over a symbol alone", bool(SYM_LOOP.search(body)) != bool(merged),
            str(SYM_LOOP.findall(body)[:4]))
    for h, w in SIZES:
        feeds = {"x": (rng.standard_normal((1, 16, h, w)) * 4).astype(np.float32)}
        feeds.update({k: rng.standard_normal(f(h, w)).astype(np.float32) for k, f in others.items()})
        q, out = shapeset_run(path, feeds, BOX, env, work)
        if q.returncode:
            s.check(f"{name} {h}x{w}: runs", False, q.stderr[-400:])
            continue
        s.check(f"{name} {h}x{w}: one object for the box", "one object for the box" in q.stderr, q.stderr[-300:])
        got, want = np.load(os.path.join(out, "y.npy")), ref(feeds["x"], feeds)
        s.check(f"{name} {h}x{w}: shape", got.shape == want.shape, f"{got.shape} vs {want.shape}")
        if got.shape == want.shape:
            s.check(f"{name} {h}x{w}: vs numpy", *close(got, want.astype(np.float64), rtol=1e-5, atol=1e-5))
s.close()
