"""ONNX initializers reach the computation as stored: raw_data (which the
importer keeps as the tensor's elements, no copy: onnx_load.c's
take_raw), float_data, and a second read of the same initializer, on the
interpreter and the CPU against onnxruntime."""
import os
import subprocess
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

from harp_test import HARP, Suite, compiled_only
from onnx_models import init, mk, model, vi

compiled_only()  # the cpu row checks the compiled object's parameter block, not tier 0's (harp_test.compiled_only)
s = Suite("onnx_weights")
rng = np.random.default_rng(11)
x = rng.standard_normal((1, 3, 8, 8)).astype(np.float32)
w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
b = rng.standard_normal(4).astype(np.float32)
scale = rng.standard_normal((1, 4, 1, 1)).astype(np.float32)
inits = [init("w", w), init("b", b),  # raw_data
         helper.make_tensor("scale", TensorProto.FLOAT, scale.shape, scale.ravel().tolist())]  # float_data
s.check("raw_data initializers", inits[0].HasField("raw_data") and not inits[2].HasField("raw_data"))
nodes = [mk("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
         mk("Mul", ["c", "scale"], ["m"]),
         mk("Conv", ["x", "w", "b"], ["c2"], pads=[1, 1, 1, 1]),  # the same weights read twice
         mk("Add", ["m", "c2"], ["y"])]
path = os.path.join(tempfile.mkdtemp(), "weights.onnx")
onnx.save(model(nodes, [vi("x", x.shape)], [vi("y", None)], inits), path)
want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]

for backend in ("interp", "cpu"):
    out = tempfile.mkdtemp()
    f = os.path.join(out, "x.npy")
    np.save(f, x)
    p = subprocess.run([HARP, "run", path, "--input", f"x={f}", "--out", out, "--backend", backend],
                       capture_output=True, text=True, timeout=300)
    s.check(f"{backend}: runs", p.returncode == 0, p.stderr[-400:])
    if p.returncode == 0:
        got = np.load(os.path.join(out, "y.npy"))
        err = float(np.max(np.abs(got - want)))
        s.check(f"{backend}: vs onnxruntime", err <= 1e-4 * (1 + float(np.max(np.abs(want)))), err)
s.close()
