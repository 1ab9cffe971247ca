"""ONNX Gather with negative constant indices along a symbolic axis under
`harp run MODEL.onnx --shapeset` (issue 25, found by sscpu2): an index i < 0
counts back from the axis's size w, an expression of the box's symbol, so
it reads row w + i at every binding.  A scalar index (-1: a slice
[w - 1, w), its bounds symbolic), an index list [-1, 0, -3] and a table
[2, w] gathered at -2 along its second axis each run at four bindings,
both corners of the box among them, against onnxruntime (before, the list
failed at run time: "an index is out of range").  Each still compiles per
binding (a row offset w - 1 is a constant of the code); one object for the
box is not asserted here."""
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from harp_test import Suite, close, onnx_or_skip, shapeset_run  # noqa: E402

onnx_or_skip()
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
from onnx_models import init, mk, model, vi  # noqa: E402

s = Suite("shapeset_gather_neg")
rng = np.random.default_rng(2525)
D = tempfile.mkdtemp()
env = dict(os.environ, HARP_CACHE_DIR=tempfile.mkdtemp())


def check(name, m, box, shapes):
    """m run under --shapeset box at each shape in shapes (input x) against onnxruntime."""
    path = os.path.join(D, name + ".onnx")
    onnx.save(m, path)
    ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    for shape in shapes:
        x = rng.standard_normal(shape).astype(np.float32)
        p, out = shapeset_run(path, {"x": x}, ["--shapeset", box], env, D)
        tag = f"{name} x{list(shape)}"
        s.check(f"{tag}: runs", p.returncode == 0, p.stderr[-600:])
        for o, want in zip(ref.get_outputs(), ref.run(None, {"x": x}) if p.returncode == 0 else []):
            s.check(f"{tag}: {o.name} vs onnxruntime", *close(np.load(os.path.join(out, o.name + ".npy")), want, 1e-5, 1e-6))


def gather(idx, xshape, axis, oshape):
    """x -> Gather(x, idx along axis) * 2 (the product keeps the gather off the output)."""
    return model([mk("Gather", ["x", "i"], ["g"], axis=axis), mk("Mul", ["g", "two"], ["y"])],
                 [vi("x", xshape)], [vi("y", oshape)],
                 [init("i", np.array(idx, np.int64)), init("two", np.array(2.0, np.float32))])


# the last row of x[w, 4], a scalar index: the slice [w - 1, w)
check("last_row", gather(-1, ["w", 4], 0, [4]), "w=3..40", [(3, 4), (7, 4), (40, 4), (16, 4)])
# rows -1, 0, -3 of x[w, 4]: the indices w - 1, 0, w - 3 at run time
check("rows", gather([-1, 0, -3], ["w", 4], 0, [3, 4]), "w=3..40", [(3, 4), (11, 4), (40, 4), (5, 4)])
# column -2 of x[2, w], the index a [1]-list: x[:, w - 2] as [2, 1]
check("column", gather([-2], [2, "w"], 1, [2, 1]), "w=2..33", [(2, 2), (2, 9), (2, 33), (2, 17)])
s.close()
