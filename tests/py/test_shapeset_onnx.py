"""`harp run MODEL.onnx --shapeset NAME=LO..HI` (docs/architecture.md, "One
object per ShapeSet"): an ONNX model's dynamic dims stay symbols through the
import, and one compiled object serves every binding in the box.  A model of
MatMul + Add + Softmax + Mul with a dim_param "batch", on a cache of its own,
run at three bindings: the first builds the object, the next two build
nothing (--time-stages), each output against onnxruntime.  The dim is named
three ways (its dim_param, INPUT:AXIS, the shape variable of an anonymous
dim).  --shape binds the box's dim as a file's shape does (random inputs
at it; a file that disagrees refused).  A binding that breaks the model
(two inputs' dims of one dim_param that differ) and
one outside the box are InputMismatch before any kernel runs, with no
output file; a Reshape to (n / 4, 4) computed from Shape is one object too
(n / 4 a derived symbol), and an n it does not divide is refused.  harp
compile --shapeset writes one package for the box: make builds it, its
main matches onnxruntime at two bindings and refuses one outside."""
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from harp_test import HARP, Suite, close, shapeset_built as built, shapeset_run, onnx_or_skip  # noqa: E402

onnx_or_skip()
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
from onnx import TensorProto  # noqa: E402
from onnx_models import init, mk, model, vi  # noqa: E402

s = Suite("shapeset_onnx")
rng = np.random.default_rng(25)
D = tempfile.mkdtemp()
env = dict(os.environ, HARP_CACHE_DIR=tempfile.mkdtemp())
F = TensorProto.FLOAT


def save(m, name):
    path = os.path.join(D, name + ".onnx")
    onnx.save(m, path)
    return path


def run(path, feeds, extra):
    return shapeset_run(path, feeds, extra, env, D)


def dense_softmax(first_dim):
    """x[first_dim, 16] @ W + b -> softmax over 24 -> * 2."""
    w = rng.standard_normal((16, 24)).astype(np.float32) * 0.5
    b = rng.standard_normal(24).astype(np.float32)
    nodes = [mk("MatMul", ["x", "W"], ["h"]), mk("Add", ["h", "b"], ["hb"]), mk("Softmax", ["hb"], ["p"], axis=-1),
             mk("Mul", ["p", "two"], ["y"])]
    return model(nodes, [vi("x", [first_dim, 16])], [vi("y", None)],
                 [init("W", w), init("b", b), init("two", np.array(2.0, np.float32))])


# one object for batch in 2..48: three bindings, one C compile, onnxruntime's numbers
path = save(dense_softmax("batch"), "dense_softmax")
ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
for i, n in enumerate([5, 48, 17]):
    x = rng.standard_normal((n, 16)).astype(np.float32)
    p, out = run(path, {"x": x}, ["--shapeset", "batch=2..48"])
    s.check(f"batch={n}: runs", p.returncode == 0, p.stderr[-500:])
    s.check(f"batch={n}: one object for the box", "one object for the box" in p.stderr, p.stderr[-500:])
    s.check(f"batch={n}: C compiles", built(p) == (1, 1 if i == 0 else 0), str(built(p)))
    if p.returncode == 0:
        s.check(f"batch={n} vs onnxruntime", *close(np.load(os.path.join(out, "y.npy")), ref.run(None, {"x": x})[0], 1e-5, 1e-6))

# the same dim named as INPUT:AXIS: the same object (from the cache)
x = rng.standard_normal((9, 16)).astype(np.float32)
p, out = run(path, {"x": x}, ["--shapeset", "x:0=2..48"])
s.check("x:0: runs from the cache", p.returncode == 0 and built(p) == (1, 0), p.stderr[-500:])
if p.returncode == 0:
    s.check("x:0 vs onnxruntime", *close(np.load(os.path.join(out, "y.npy")), ref.run(None, {"x": x})[0], 1e-5, 1e-6))

# an anonymous dynamic dim: its shape variable x_d0
path2 = save(dense_softmax(None), "dense_softmax_anon")
x = rng.standard_normal((11, 16)).astype(np.float32)
p, out = run(path2, {"x": x}, ["--shapeset", "x_d0=2..32"])
s.check("x_d0: one object", p.returncode == 0 and "one object for the box" in p.stderr, p.stderr[-500:])
if p.returncode == 0:
    want = ort.InferenceSession(path2, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    s.check("x_d0 vs onnxruntime", *close(np.load(os.path.join(out, "y.npy")), want, 1e-5, 1e-6))

# outside the box: refused, nothing written
x = rng.standard_normal((49, 16)).astype(np.float32)
p, out = run(path, {"x": x}, ["--shapeset", "batch=2..48"])
s.check("batch=49: outside the ShapeSet", p.returncode == 1 and "outside the compiled ShapeSet" in p.stderr, p.stderr[-400:])
s.check("batch=49: no output file", not os.path.exists(os.path.join(out, "y.npy")))

# --shape binds the box's dim as an input file's shape does: random inputs at it (from the cache), and a
# file that disagrees with it refused before any kernel (before: the --shape ignored, a run at the file's 5)
p, out = run(path, {}, ["--shapeset", "batch=2..48", "--shape", "x=7x16", "--random-inputs"])
s.check("--shape x=7x16: runs at batch = 7, from the cache", p.returncode == 0 and built(p) == (1, 0)
        and np.load(os.path.join(out, "y.npy")).shape == (7, 24), p.stderr[-400:])
p, out = run(path, {"x": rng.standard_normal((5, 16)).astype(np.float32)}, ["--shapeset", "batch=2..48", "--shape", "x=6x16"])
s.check("--shape x=6x16, a file of 5 rows: InputMismatch", p.returncode == 1 and "error[InputMismatch]" in p.stderr
        and "batch is already 6" in p.stderr, p.stderr[-400:])
s.check("--shape x=6x16, a file of 5 rows: no output file", not os.path.exists(os.path.join(out, "y.npy")))
p, out = run(path, {}, ["--shapeset", "batch=2..48", "--shape", "x=49x16", "--random-inputs"])
s.check("--shape x=49x16: outside the ShapeSet", p.returncode == 1 and "outside the compiled ShapeSet" in p.stderr,
        p.stderr[-400:])

# a constraint of the model: x[a, 4] + z[a, 4], one dim_param, needs the two sizes equal
bc = model([mk("Add", ["x", "z"], ["s"]), mk("Softmax", ["s"], ["y"], axis=-1)], [vi("x", ["a", 4]), vi("z", ["a", 4])],
           [vi("y", None)], [])
path3 = save(bc, "broadcast")
ref3 = ort.InferenceSession(path3, providers=["CPUExecutionProvider"])
for n in (3, 16):
    x, z = rng.standard_normal((n, 4)).astype(np.float32), rng.standard_normal((n, 4)).astype(np.float32)
    p, out = run(path3, {"x": x, "z": z}, ["--shapeset", "a=2..16"])
    s.check(f"a = {n}: runs", p.returncode == 0, p.stderr[-400:])
    if p.returncode == 0:
        s.check(f"a = {n} vs onnxruntime", *close(np.load(os.path.join(out, "y.npy")), ref3.run(None, {"x": x, "z": z})[0],
                                                     1e-5, 1e-6))
x, z = rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal((5, 4)).astype(np.float32)
p, out = run(path3, {"x": x, "z": z}, ["--shapeset", "a=2..16"])
s.check("a = 3, b = 5: InputMismatch", p.returncode == 1 and "error[InputMismatch]" in p.stderr, p.stderr[-400:])
s.check("a = 3, b = 5: no output file", not os.path.exists(os.path.join(out, "y.npy")))

# a size that is an expression of the box's symbol (Reshape to (n / 4, 4), computed from Shape): a derived
# symbol, one object; a binding the Reshape refuses is an error before any kernel runs
rs = model([mk("Shape", ["x"], ["s"]), mk("Gather", ["s", "zero"], ["n"]), mk("Div", ["n", "four"], ["q"]),
            mk("Unsqueeze", ["q", "ax"], ["q1"]), mk("Concat", ["q1", "four1"], ["shape"], axis=0),
            mk("Reshape", ["x", "shape"], ["r"]), mk("Relu", ["r"], ["y"])], [vi("x", ["n"])], [vi("y", None)],
           [init("zero", np.array(0, np.int64)), init("four", np.array(4, np.int64)), init("ax", np.array([0], np.int64)),
            init("four1", np.array([4], np.int64))])
path5 = save(rs, "reshape4")
x = rng.standard_normal(12).astype(np.float32)
p, out = run(path5, {"x": x}, ["--shapeset", "n=4..64"])
s.check("reshape n/4: one object for the box", p.returncode == 0 and "one object for the box" in p.stderr, p.stderr[-400:])
if p.returncode == 0:
    want = ort.InferenceSession(path5, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    s.check("reshape n/4 vs onnxruntime", *close(np.load(os.path.join(out, "y.npy")), want, 1e-6, 1e-6))
p, out = run(path5, {"x": rng.standard_normal(10).astype(np.float32)}, ["--shapeset", "n=4..64"])
s.check("reshape n=10: refused", p.returncode == 1 and "harp: error" in p.stderr and "reshape" in p.stderr.lower()
        and "n=10" in p.stderr, p.stderr[-400:])
s.check("reshape n=10: no output file", not os.path.exists(os.path.join(out, "y.npy")))

# a dynamic dim neither --shapeset nor a file gives: the usual UnboundSymbol
two = model([mk("Add", ["x", "z"], ["y"])], [vi("x", ["a", 4]), vi("z", ["a", 4])], [vi("y", None)], [])
path4 = save(two, "two_inputs")
p, _ = run(path4, {}, ["--shapeset", "a=2..8", "--random-inputs"])
s.check("random inputs in a box: a clear error", p.returncode in (1, 2) and "harp: error" in p.stderr
        and "Traceback" not in p.stderr, p.stderr[-400:])

# harp compile --shapeset: one package for the box (test_shapeset_package.py tests it in depth): built with make,
# its main at batch = 3 and 48 against onnxruntime, batch = 49 refused with no output
pkg = os.path.join(D, "pkg")
p = subprocess.run([HARP, "compile", path, "--target", "cpu", "-o", pkg, "--shapeset", "batch=2..48"], capture_output=True,
                   text=True, env=env, timeout=300)
s.check("compile --shapeset: a package", p.returncode == 0 and os.path.exists(os.path.join(pkg, "model_shapes.c")),
        p.stderr[-300:])
mk_ = subprocess.run(["make", "-C", pkg, "model_main"], capture_output=True, text=True, timeout=300)
s.check("compile --shapeset: make", mk_.returncode == 0, mk_.stderr[-300:])
for n in [3, 48, 49]:
    d = tempfile.mkdtemp(dir=D)
    os.mkdir(os.path.join(d, "inputs"))
    shutil.copy(os.path.join(pkg, "weights.bin"), d)
    x = rng.standard_normal((n, 16)).astype(np.float32)
    np.save(os.path.join(d, "inputs", "x.npy"), x)
    r = subprocess.run([os.path.join(pkg, "model_main"), d], capture_output=True, text=True, timeout=120)
    if n > 48:
        s.check(f"package batch={n}: refused", r.returncode == 2 and "batch = 49 is outside" in r.stderr, r.stderr[-300:])
        s.check(f"package batch={n}: no output", not os.path.exists(os.path.join(d, "outputs")))
    elif r.returncode == 0:
        s.check(f"package batch={n} vs onnxruntime", *close(np.load(os.path.join(d, "outputs", "y.npy")),
                                                          ref.run(None, {"x": x})[0], 1e-5, 1e-6))
    else:
        s.check(f"package batch={n}: runs", False, r.stderr[-300:])

s.close()
