#!/usr/bin/env python3
"""test_python_shapeset_dsym.py — harp.InferenceSession(model,
shapesets={"H": .., "W": ..}) (harp.h's shapesets) on a small CNN whose
sizes after its stride-2 conv are (H + 1)/2 (onnx_models.cnn_s2): derived
symbols of the lowering, so one object and one C compile serve four feed
sizes (odd and even), the outputs right-sized and against onnxruntime."""
import os
import tempfile

from harp_py import Suite, harp, np, ort

s = Suite("python_shapeset_dsym")
if ort is None:
    print("onnxruntime not installed: skipped")
    raise SystemExit(77)
import onnx  # noqa: E402
from onnx_models import cnn_s2  # noqa: E402

rng = np.random.default_rng(31)
path = os.path.join(tempfile.mkdtemp(), "cnn_s2.onnx")
onnx.save(cnn_s2(rng), path)
ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
sess = harp.InferenceSession(path, {"cache_dir": tempfile.mkdtemp(), "progress": False}, shapesets={"H": (9, 41), "W": (9, 37)})
for h, w in ((41, 37), (9, 9), (20, 15), (27, 34)):
    x = rng.standard_normal((1, 3, h, w)).astype(np.float32)
    (y,) = sess.run(None, {"x": x})
    want = ref.run(None, {"x": x})[0]
    s.check(f"{h}x{w}: shape {y.shape}", y.shape == want.shape, str(want.shape))
    s.check(f"{h}x{w} vs onnxruntime", y.shape == want.shape and np.allclose(y, want, rtol=1e-4, atol=1e-4))
s.check("one object, one C compile", sess.shapeset_objects() == (1, 1, None), str(sess.shapeset_objects()))
s.close()
