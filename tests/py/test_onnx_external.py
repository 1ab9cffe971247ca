"""ONNX external data: initializers whose bytes live in files beside the
model (onnx.save(..., save_as_external_data=True), and every model over
protobuf's 2 GB) are read from the model's directory, one file for all or
one per tensor, at their offsets; checked against numpy on the interpreter
and the cpu backend.  A location outside the model's directory (absolute,
"..", a symbolic link leading out), a missing file, an offset or length
past the file's end, a length that disagrees with the dims, or a model read
from memory are clear errors with no output."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import harp_test as ht  # noqa: E402

ht.onnx_or_skip(runtime=False)
import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx_models import mk, model, vi  # noqa: E402

ht.compiled_only()  # the cpu rows check the compiled object's weights, not tier 0's (harp_test.compiled_only)
S = ht.Suite("onnx_external")
D = ht.tempfile.mkdtemp()
r = np.random.default_rng(0)
w = r.standard_normal((64, 32)).astype(np.float32)
b = r.standard_normal(32).astype(np.float32)
shape = np.array([4, 64], np.int64)  # an integer initializer: folded at import, from the external file too
x = r.standard_normal((4, 8, 8)).astype(np.float32)
want = x.reshape(4, 64) @ w + b
np.save(os.path.join(D, "x.npy"), x)


def graph():
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b"), numpy_helper.from_array(shape, "shape")]
    return model([mk("Reshape", ["x", "shape"], ["xr"]), mk("MatMul", ["xr", "w"], ["m"]), mk("Add", ["m", "b"], ["y"])],
                 [vi("x", [4, 8, 8])], [vi("y", None)], inits)


def run(path, backend="interp", cwd=None):
    out = os.path.join(D, f"out{len(os.listdir(D))}")
    p = ht.subprocess.run([os.path.abspath(ht.HARP), "run", path, "--backend", backend, "--input", f"x={os.path.join(D, 'x.npy')}", "--out", out],
                          capture_output=True, text=True, timeout=300, cwd=cwd)
    return p, out


def good(name, path, backend, cwd=None):
    p, out = run(path, backend, cwd)
    S.check(f"{name} ({backend}): runs", p.returncode == 0, p.stderr[-400:])
    if p.returncode == 0:
        got = np.load(os.path.join(out, "y.npy"))
        S.check(f"{name} ({backend}): matches numpy", got.shape == want.shape and np.allclose(got, want, rtol=1e-5, atol=1e-5))


def bad(name, path, *needles):
    p, out = run(path)
    S.check(f"{name}: exit code 1", p.returncode == 1, f"rc={p.returncode} {p.stderr[-300:]}")
    for nd in needles:
        S.check(f"{name}: says {nd!r}", nd in p.stderr, p.stderr[-400:])
    S.check(f"{name}: no output", not os.path.exists(out))


# one file for every tensor, and one file per tensor, in a subdirectory
one = os.path.join(D, "one")
os.makedirs(one)
onnx.save(graph(), os.path.join(one, "m.onnx"), save_as_external_data=True, all_tensors_to_one_file=True, location="weights.bin",
          size_threshold=0)
many = os.path.join(D, "many")
os.makedirs(many)
onnx.save(graph(), os.path.join(many, "m.onnx"), save_as_external_data=True, all_tensors_to_one_file=False, size_threshold=0)
S.check("the per-tensor save wrote several files", len(os.listdir(many)) >= 4, os.listdir(many))
for backend in ("interp", "cpu"):
    good("one external file", os.path.join(one, "m.onnx"), backend)
    good("a file per tensor", os.path.join(many, "m.onnx"), backend)
good("model path relative to the working directory", "m.onnx", "interp", cwd=one)


def external(loc, offset=None, length=None, data=None, extra=None):
    """The graph with w external at loc (written with data, default w's bytes)."""
    m = graph()
    t = [i for i in m.graph.initializer if i.name == "w"][0]
    raw = t.raw_data if t.HasField("raw_data") else w.tobytes()
    t.ClearField("raw_data")
    t.ClearField("float_data")
    t.data_location = TensorProto.EXTERNAL
    for k, v in (("location", loc), ("offset", offset), ("length", length)):
        if v is not None:
            e = t.external_data.add()
            e.key, e.value = k, str(v)
    if extra:
        t.raw_data = extra
    return m, raw


def save_case(name, loc, **kw):
    d = os.path.join(D, name)
    os.makedirs(d)
    m, raw = external(loc, **kw)
    with open(os.path.join(d, "w.bin"), "wb") as f:
        f.write(b"\0" * 16 + raw)
    p = os.path.join(d, "m.onnx")
    with open(p, "wb") as f:
        f.write(m.SerializeToString())
    return p


good("an offset into the file", save_case("off", "w.bin", offset=16, length=w.nbytes), "interp")
bad("absolute location", save_case("abs", "/etc/passwd"), "InvalidArgument", "outside the model's directory")
bad("'..' in the location", save_case("dots", "sub/../../w.bin"), "InvalidArgument", "outside the model's directory")
link = save_case("link", "leak.bin")
os.symlink(os.path.join(D, "off", "w.bin"), os.path.join(D, "link", "leak.bin"))
bad("a symbolic link leading out", link, "InvalidArgument", "outside the model's directory")
bad("a missing file", save_case("missing", "nope.bin"), "IoError", "nope.bin")
bad("offset past the end", save_case("past", "w.bin", offset=1 << 30), "InvalidArgument", "reads past its end")
bad("length past the end", save_case("long", "w.bin", offset=16, length=w.nbytes + 4), "InvalidArgument", "reads past its end")
bad("a length that disagrees with the dims", save_case("short", "w.bin", offset=16, length=w.nbytes - 4), "InvalidArgument", '"w"')
bad("no location", save_case("noloc", None), "InvalidArgument", "names no location")
bad("an offset that is not a number", save_case("nan", "w.bin", offset="x1"), "InvalidArgument", "not a number")
bad("external and raw_data both", save_case("both", "w.bin", offset=16, extra=b"\0" * 8), "InvalidArgument", "raw_data too")
dirloc = save_case("dirloc", "sub")
os.makedirs(os.path.join(D, "dirloc", "sub"))
bad("a directory as the location", dirloc, "IoError", "not a regular file")
S.close()
