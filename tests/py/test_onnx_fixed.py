"""ONNX graph inputs fixed at import with --param NAME=FILE: an integer
input that harp needs at import (a Reshape's shape, Slice's starts/ends,
Pad's pads) folds as an initializer would, and a float input becomes a
weight; the data must match the input's type and static dims.  harp run
does it by itself for an --input a node needs (one run, that data); bench
and compile, which run the model on other data, refuse it (Unsupported),
naming the way out."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import harp_test as ht  # noqa: E402

ht.onnx_or_skip(runtime=False)
from onnx import TensorProto  # noqa: E402
from onnx_models import mk, model, vi  # noqa: E402

S = ht.Suite("onnx_fixed")
D = ht.tempfile.mkdtemp()
I64 = TensorProto.INT64


def npy(name, a):
    p = os.path.join(D, name + ".npy")
    np.save(p, a)
    return p


def save(m, name):
    p = os.path.join(D, name + ".onnx")
    with open(p, "wb") as f:
        f.write(m.SerializeToString())
    return p


def run(path, args, backend):
    out = os.path.join(D, f"out_{os.path.basename(path)}_{backend}_{len(os.listdir(D))}")
    p = ht.subprocess.run([ht.HARP, "run", path, "--backend", backend, "--out", out] + args, capture_output=True, text=True,
                          timeout=300)
    return p, out


x = (np.arange(24, dtype=np.float32) - 10).reshape(2, 3, 4)
X = ["--input", f"x={npy('x', x)}"]
reshape = save(model([mk("Reshape", ["x", "shape"], ["r"]), mk("Relu", ["r"], ["y"])], [vi("x", [2, 3, 4]), vi("shape", [2], I64)],
                     [vi("y", None)], []), "reshape")
slicem = save(model([mk("Slice", ["x", "st", "en", "ax"], ["y"])], [vi("x", [2, 3, 4]), vi("st", [1], I64), vi("en", [1], I64),
                                                                    vi("ax", [1], I64)], [vi("y", None)], []), "slice")
padm = save(model([mk("Pad", ["x", "pads"], ["y"], mode="constant")], [vi("x", [2, 3, 4]), vi("pads", [6], I64)], [vi("y", None)], []),
            "pad")
scale = save(model([mk("Mul", ["x", "w"], ["y"])], [vi("x", [2, 3, 4]), vi("w", [4])], [vi("y", None)], []), "scale")
w = np.array([1, -2, 0.5, 3], np.float32)
cases = [
    ("Reshape shape", reshape, ["--param", f"shape={npy('shape', np.array([4, -1]))}"], np.maximum(x.reshape(4, 6), 0)),
    ("Slice starts/ends/axes", slicem, ["--param", f"st={npy('st', np.array([1]))}", "--param", f"en={npy('en', np.array([-1]))}",
                                        "--param", f"ax={npy('ax', np.array([2], np.int32))}"], x[:, :, 1:-1]),
    ("Pad pads", padm, ["--param", f"pads={npy('pads', np.array([0, 1, 0, 0, 0, 2]))}"], np.pad(x, [(0, 0), (1, 0), (0, 2)])),
    ("float input as a weight", scale, ["--param", f"w={npy('w', w)}"], x * w),
]
for backend in ("interp", "cpu"):
    for name, path, args, want in cases:
        p, out = run(path, X + args, backend)
        S.check(f"{name} ({backend}): runs", p.returncode == 0, p.stderr[-400:])
        if p.returncode == 0:
            got = np.load(os.path.join(out, "y.npy"))
            S.check(f"{name} ({backend}): matches numpy", got.shape == want.shape and np.allclose(got, want), f"{got.shape} {want.shape}")

# harp run fixes an --input a node needs at import (one run: that data)
shape_in = ["--input", f"shape={npy('shape', np.array([4, -1]))}"]
for backend in ("interp", "cpu"):
    p, out = run(reshape, X + shape_in, backend)
    S.check(f"Reshape shape as an --input ({backend}): harp run fixes it", p.returncode == 0, p.stderr[-300:])
    if p.returncode == 0:
        S.check(f"Reshape shape as an --input ({backend}): matches numpy",
                np.array_equal(np.load(os.path.join(out, "y.npy")), np.maximum(x.reshape(4, 6), 0)))
# bench and compile run the model on other data: refused, saying how to fix it
for cmd, extra in (("bench", ["--repeat", "1"]), ("compile", ["--target", "cpu", "-o", os.path.join(D, "pkg")])):
    p = ht.subprocess.run([ht.HARP, cmd, reshape] + X + shape_in + extra, capture_output=True, text=True, timeout=300)
    S.check(f"Reshape shape as a run-time input ({cmd}): refused", p.returncode == 1 and "error[Unsupported]" in p.stderr, p.stderr[-300:])
    S.check(f"Reshape shape as a run-time input ({cmd}): names --param", "--param NAME=FILE" in p.stderr, p.stderr[-300:])
S.check("Reshape shape as a run-time input (compile): no package", not os.path.exists(os.path.join(D, "pkg")))
# data that does not fit the input
for what, arr, needle in (("rank", np.array([[4, -1]]), "rank 2"), ("dim", np.array([4, -1, 1]), "dim 0 is 2"),
                          ("type", np.array([4.0, -1.0], np.float32), "is int64; the data fixed for it is fp32")):
    p, out = run(reshape, X + ["--param", f"shape={npy('bad_' + what, arr)}"], "interp")
    S.check(f"fixed data of the wrong {what}: InputMismatch", p.returncode == 1 and "error[InputMismatch]" in p.stderr, p.stderr[-300:])
    S.check(f"fixed data of the wrong {what}: says {needle!r}", needle in p.stderr, p.stderr[-300:])
    S.check(f"fixed data of the wrong {what}: no output", not os.path.exists(out))
p, out = run(reshape, X + ["--param", f"shape={npy('big', np.array([4, 1 << 40]))}"], "interp")
S.check("int64 data outside int32: LimitExceeded", p.returncode == 1 and "error[LimitExceeded]" in p.stderr, p.stderr[-300:])
S.close()
