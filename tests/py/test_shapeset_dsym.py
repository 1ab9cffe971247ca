#!/usr/bin/env python3
"""`harp run MODEL.onnx --shapeset H=.. --shapeset W=..` on a small CNN whose
sizes after its stride-2 conv are expressions of H, W ((H + 1)/2): the
lowering makes them derived symbols (docs/tiny-ir.md, "Derived symbols"),
so one object serves the box.  A Conv 3x3/2 (pad 1) + Relu, a Conv 3x3/1
(pad 1) with a residual Add, a MaxPool 2x2, with dim_params "H" and "W", on
a cache of its own, run at four bindings (odd and even): the first builds
the object ("one object for the box"), the others build nothing, each
output against onnxruntime; a binding outside the box is InputMismatch
with no output file.  A Resize x2 of the strided conv's output added to a
full-size branch (onnx_models.fpn_s2): exact at even H, W; an odd H breaks
the model and is refused.  The run() helper reads the module's path, BOX."""
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from harp_test import Suite, close, shapeset_built as built, shapeset_run, onnx_or_skip  # noqa: E402

onnx_or_skip()
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
from onnx_models import cnn_s2, fpn_s2  # noqa: E402

s = Suite("shapeset_dsym")
rng = np.random.default_rng(29)
D = tempfile.mkdtemp()
env = dict(os.environ, HARP_CACHE_DIR=tempfile.mkdtemp())

path = os.path.join(D, "cnn_s2.onnx")
onnx.save(cnn_s2(rng), path)
ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
BOX = ["--shapeset", "H=9..41", "--shapeset", "W=9..37"]


def run(x):
    return shapeset_run(path, {"x": x}, BOX, env, D)


for i, (h, w) in enumerate([(41, 37), (9, 9), (20, 15), (33, 26)]):
    x = rng.standard_normal((1, 3, h, w)).astype(np.float32)
    p, out = run(x)
    s.check(f"{h}x{w}: runs", p.returncode == 0, p.stderr[-600:])
    s.check(f"{h}x{w}: one object for the box", "one object for the box" in p.stderr, p.stderr[-600:])
    s.check(f"{h}x{w}: C compiles", built(p) == (1, 1 if i == 0 else 0), str(built(p)))
    if p.returncode == 0:
        s.check(f"{h}x{w} vs onnxruntime", *close(np.load(os.path.join(out, "y.npy")), ref.run(None, {"x": x})[0], 1e-4, 1e-4))

p, out = run(rng.standard_normal((1, 3, 43, 20)).astype(np.float32))
s.check("43x20: outside the ShapeSet", p.returncode == 1 and "outside the compiled ShapeSet" in p.stderr, p.stderr[-400:])
s.check("43x20: no output file", not os.path.exists(os.path.join(out, "y.npy")))

# a Resize x2 of the strided conv's output added to the full-size branch: 2*((H + 1)/2) beside H, two names of one
# size at even H, W (the kernels read them as one axis), a binding that breaks the model at odd H
path = os.path.join(D, "fpn_s2.onnx")
onnx.save(fpn_s2(rng), path)
ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
BOX = ["--shapeset", "H=8..40", "--shapeset", "W=8..36"]
for h, w in ((40, 36), (22, 10)):
    x = rng.standard_normal((1, 3, h, w)).astype(np.float32)
    p, out = run(x)
    s.check(f"fpn {h}x{w}: runs", p.returncode == 0, p.stderr[-600:])
    if p.returncode == 0:
        s.check(f"fpn {h}x{w} vs onnxruntime", *close(np.load(os.path.join(out, "y.npy")), ref.run(None, {"x": x})[0], 1e-4, 1e-4))
p, out = run(rng.standard_normal((1, 3, 21, 10)).astype(np.float32))
s.check("fpn 21x10: refused", p.returncode == 1 and "harp: error" in p.stderr, p.stderr[-400:])
s.check("fpn 21x10: no output file", not os.path.exists(os.path.join(out, "y.npy")))
s.close()
