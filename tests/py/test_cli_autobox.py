"""`harp run MODEL.onnx --input x=FILE` chooses the box itself (docs/options.md, "ShapeSets chosen by
harp"; src/driver/cli_autobox.c): dyn_conv.onnx (x: N x 4 x H x W, tests/models/gen_dyn_conv.py) copied to
a folder of its own, on a cache of its own, run at H x W = 20 x 20 (the bucket's first binding: compiled
alone, no ShapeSet object), 24 x 18 (a second binding in the bucket 16..31 x 16..31: the box, one C
compile), 21 x 30 (the box from the cache: nothing built), 40 x 40 (another bucket's first binding:
alone), each output against onnxruntime; --shapeset exact at 17 x 17 (no box); --shape keeps the
binding alone; a one-point --shapeset (H=20..20) runs as the binding."""
import os
import re
import shutil
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from harp_test import Suite, close, shapeset_built as built, shapeset_run, onnx_or_skip  # noqa: E402

onnx_or_skip()
import onnxruntime as ort  # noqa: E402

s = Suite("cli_autobox")
D = tempfile.mkdtemp()
MODEL = os.path.join(D, "dyn_conv.onnx")
shutil.copy(os.path.join(os.path.dirname(__file__), "..", "models", "dyn_conv.onnx"), MODEL)
env = dict(os.environ, HARP_CACHE_DIR=tempfile.mkdtemp())
ref = ort.InferenceSession(MODEL, providers=["CPUExecutionProvider"])
rng = np.random.default_rng(25)


def run(h, w, extra=()):
    """harp run at 1 x 4 x h x w: (the process, whether y matches onnxruntime, its detail)."""
    x = rng.standard_normal((1, 4, h, w)).astype(np.float32)
    p, out = shapeset_run(MODEL, {"x": x}, list(extra), env, D)
    if p.returncode:
        return p, False, p.stderr[-600:]
    ok, why = close(np.load(os.path.join(out, "y.npy")), ref.run(None, {"x": x})[0], rtol=1e-4, atol=1e-4)
    return p, ok, why


def said(p, what):
    return re.search(r"harp: shapeset: harp's box [^:]*: " + what, p.stderr) is not None


p, ok, why = run(20, 20)
s.check("20 x 20 matches onnxruntime", ok, why)
s.check("20 x 20: the bucket's first binding, alone", said(p, "the bucket's first binding") and built(p) is None, p.stderr[-800:])
s.check("20 x 20: the box named H=16..31,W=16..31", "N=1,H=16..31,W=16..31" in p.stderr, p.stderr[-800:])
p, ok, why = run(24, 18)
s.check("24 x 18 matches onnxruntime", ok, why)
s.check("24 x 18: the box, one object, one C compile", said(p, "another binding met before") and built(p) == (1, 1),
        f"{built(p)} {p.stderr[-800:]}")
p, ok, why = run(21, 30)
s.check("21 x 30 matches onnxruntime", ok, why)
s.check("21 x 30: the box from the cache, nothing built", built(p) == (1, 0), f"{built(p)} {p.stderr[-800:]}")
p, ok, why = run(40, 40)
s.check("40 x 40 matches onnxruntime", ok, why)
s.check("40 x 40: another bucket's first binding, alone", said(p, "the bucket's first binding") and built(p) is None,
        p.stderr[-800:])
p, ok, why = run(17, 17, ["--shapeset", "exact"])
s.check("--shapeset exact: matches onnxruntime", ok, why)
s.check("--shapeset exact: no box", "harp's box" not in p.stderr and built(p) is None, p.stderr[-800:])
p, ok, why = run(20, 12, ["--shapeset", "H=20..20"])
s.check("a one-point box: matches onnxruntime", ok, why)
p, ok, why = run(20, 12, ["--shapeset", "H=20..20", "--shapeset", "W=20..20", "--shapeset-recompile"])
s.check("one-point boxes, W outside with --shapeset-recompile: matches onnxruntime", ok, why)
s.close()
