#!/usr/bin/env python3
"""test_shapeset_fdiv.py — ONNX models whose maps read through floor
divisions (a nearest Resize, DepthToSpace, a 2x2 stride-2 ConvTranspose)
as one ShapeSet object over the image size (gmap_c.c), through
harp.InferenceSession(model, shapesets=...), against onnxruntime at four
feed sizes (both corners and between):
  - onnx_models.fpn_s2: a stride-2 conv, a Resize x2 (nearest) added to a
    full-size branch and concatenated with it (even H, W);
  - d2s: Conv 1x1 to 12 channels, DepthToSpace DCR + Sigmoid and CRD (two
    outputs);
  - head: a text detector's head, Conv 3x3 + Relu, ConvTranspose 2x2/2 +
    Relu, ConvTranspose 2x2/2, Sigmoid (PP-OCR's DB head, smaller).
Each must be one object and one C compile for the four sizes."""
import os
import tempfile

from harp_py import Suite, harp, np, ort

s = Suite("shapeset_fdiv")
if ort is None:
    print("onnxruntime not installed: skipped")
    raise SystemExit(77)
import onnx  # noqa: E402
from onnx_models import fpn_s2, init, mk, model, vi  # noqa: E402

rng = np.random.default_rng(43)


def d2s():
    """Conv 1x1 to 12 channels, then DepthToSpace in both modes (two outputs): DCR + Sigmoid, CRD."""
    w = rng.standard_normal((12, 3, 1, 1)) * 0.5
    nodes = [mk("Conv", ["x", "w"], ["c"], kernel_shape=[1, 1]), mk("DepthToSpace", ["c"], ["d"], blocksize=2, mode="DCR"),
             mk("Sigmoid", ["d"], ["y"]), mk("DepthToSpace", ["c"], ["z"], blocksize=2, mode="CRD")]
    return model(nodes, [vi("x", [1, 3, "H", "W"])], [vi("y", None), vi("z", None)], [init("w", w.astype(np.float32))],
                 opset=13)


def head():
    w = {"w0": rng.standard_normal((4, 3, 3, 3)) * 0.3, "b0": rng.standard_normal(4) * 0.1,
         "t1": rng.standard_normal((4, 4, 2, 2)) * 0.4, "c1": rng.standard_normal(4) * 0.1,
         "t2": rng.standard_normal((4, 1, 2, 2)) * 0.4, "c2": rng.standard_normal(1) * 0.1}
    nodes = [mk("Conv", ["x", "w0", "b0"], ["a"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]), mk("Relu", ["a"], ["r"]),
             mk("ConvTranspose", ["r", "t1", "c1"], ["u"], kernel_shape=[2, 2], strides=[2, 2]), mk("Relu", ["u"], ["v"]),
             mk("ConvTranspose", ["v", "t2", "c2"], ["t"], kernel_shape=[2, 2], strides=[2, 2]), mk("Sigmoid", ["t"], ["y"])]
    return model(nodes, [vi("x", [1, 3, "H", "W"])], [vi("y", None)], [init(k, v.astype(np.float32)) for k, v in w.items()])


CASES = [("fpn_s2", fpn_s2(rng), {"H": (8, 40), "W": (8, 36)}, [(40, 36), (8, 8), (22, 10), (14, 30)]),
         ("d2s", d2s(), {"H": (3, 41), "W": (3, 37)}, [(41, 37), (3, 3), (10, 17), (27, 4)]),
         ("head", head(), {"H": (4, 40), "W": (4, 36)}, [(40, 36), (4, 4), (9, 23), (31, 6)])]
for name, m, box, sizes in CASES:
    path = os.path.join(tempfile.mkdtemp(), name + ".onnx")
    onnx.save(m, path)
    ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    sess = harp.InferenceSession(path, {"cache_dir": tempfile.mkdtemp(), "progress": False}, shapesets=box)
    for h, w in sizes:
        x = rng.standard_normal((1, 3, h, w)).astype(np.float32)
        for i, (y, want) in enumerate(zip(sess.run(None, {"x": x}), ref.run(None, {"x": x}))):
            s.check(f"{name} {h}x{w} output {i}: shape {y.shape}", y.shape == want.shape, str(want.shape))
            s.check(f"{name} {h}x{w} output {i} vs onnxruntime",
                    y.shape == want.shape and np.allclose(y, want, rtol=1e-5, atol=1e-5),
                    str(np.abs(y - want).max()) if y.shape == want.shape else "")
    s.check(f"{name}: one object, one C compile", sess.shapeset_objects() == (1, 1, None), str(sess.shapeset_objects()))
s.close()
