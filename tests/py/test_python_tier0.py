"""A Python session's first run on tier 0 (issue 25): a cold CPU session
(an empty cache) returns from its compile once tier 0 can run, as `harp
run` does, and its first result comes from tier 0 while the object builds
in the background (harp_options.progress_tier0: the progress callback sees
the stages before that, never "build").  The first result is checked
against onnxruntime, then against the compiled object's result once the
session has waited for it (wait_compiled), which also puts the object in
the cache.  knobs={"tier0": "off"} keeps the old order: the whole compile,
C compiler included, before the first run.

harp_py.py sets HARP_TIER0=off for every other test of the package (their
numbers are the object's); this one clears it, so that the default is
what it checks.
"""
import os
import tempfile

from harp_py import Suite, harp, np, ort
from harp_test import close
import onnx_models as om

if ort is None:
    print("onnxruntime not installed (scripts/install-deps.sh)")
    raise SystemExit(77)
from onnx import TensorProto, helper  # noqa: E402

s = Suite("python_tier0")
rng = np.random.default_rng(7)
os.environ.pop("HARP_TIER0", None)  # the package's default, not the test harness's tier0=off


def rand(*shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def convnet():
    """conv 3x3 + bias + relu, a 1x1 conv, flatten, a fully connected layer: contractions tier 0 runs on its own
    kernels, with epilogues whose loss would show in the numbers."""
    t = {"w1": rand(16, 3, 3, 3, scale=0.3), "b1": rand(16, scale=0.1), "w2": rand(8, 16, 1, 1, scale=0.3),
         "b2": rand(8, scale=0.1), "wf": rand(8 * 12 * 12, 10, scale=0.05), "bf": rand(10, scale=0.1)}
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"]),
             helper.make_node("Flatten", ["c2"], ["f"]),
             helper.make_node("Gemm", ["f", "wf", "bf"], ["y"])]
    m = om.model(nodes, [om.vi("x", [1, 3, 12, 12])], [om.vi("y", [1, 10])], [om.init(k, v) for k, v in t.items()])
    path = os.path.join(tempfile.mkdtemp(), "convnet.onnx")
    with open(path, "wb") as f:
        f.write(m.SerializeToString())
    return path


def objects(cache):
    """The shared objects in the cache directory."""
    return [f for _, _, fs in os.walk(cache) for f in fs if f.endswith(".so")]


path = convnet()
x = rand(1, 3, 12, 12)
want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]

# ---- the default: the first result from tier 0, then the object ------------------------------
cache = tempfile.mkdtemp()
stages = []
sess = harp.InferenceSession(path, {"cache_dir": cache, "intra_op_num_threads": 2,
                                    "progress": lambda st, frac: stages.append(st) and False})
s.check("the compile returned before the build (progress stages)", stages and "build" not in stages, stages)
first = sess.run(None, {"x": x})[0]
s.check("the first run was on tier 0", sess.last_run_tier0 is True, sess.last_run_tier0)
s.check("no object in the cache at the first result", not objects(cache), objects(cache))
ok, d = close(first, want, rtol=1e-4, atol=1e-5)
s.check("tier 0's first result against onnxruntime", ok, d)
sess.wait_compiled()
compiled = sess.run(None, {"x": x})[0]
s.check("after wait_compiled the run is the object's", sess.last_run_tier0 is False, sess.last_run_tier0)
ok, d = close(compiled, want, rtol=1e-4, atol=1e-5)
s.check("the object's result against onnxruntime", ok, d)
ok, d = close(first, compiled, rtol=1e-5, atol=1e-6)
s.check("tier 0's first result equals the object's (within 1e-5)", ok, d)
s.check("the object reached the cache", len(objects(cache)) >= 1, objects(cache))
sess.close()

# ---- a warm cache: tier 0 again (the object is found in the background), the same numbers -----
warm = harp.InferenceSession(path, {"cache_dir": cache, "intra_op_num_threads": 2})
y = warm.run(None, {"x": x})[0]
ok, d = close(y, compiled, rtol=1e-5, atol=1e-6)
s.check("a warm session's first result", ok, d)
warm.wait_compiled()
warm.run(None, {"x": x})
s.check("a warm session runs the object after waiting", warm.last_run_tier0 is False, warm.last_run_tier0)
warm.close()

# ---- knobs tier0=off: the object before the first run (the stages end with the build) ---------
cache = tempfile.mkdtemp()
stages = []
off = harp.InferenceSession(path, {"cache_dir": cache, "knobs": {"tier0": "off"},
                                   "progress": lambda st, frac: stages.append(st) and False})
s.check("tier0=off: the compile ran to its build", "build" in stages, stages)
s.check("tier0=off: the object is in the cache before the first run", len(objects(cache)) >= 1, objects(cache))
y = off.run(None, {"x": x})[0]
s.check("tier0=off: the first run is the object's", off.last_run_tier0 is False, off.last_run_tier0)
ok, d = close(y, compiled, rtol=0, atol=0)
s.check("tier0=off: the same numbers as the tiered session's object", ok, d)
off.close()

# ---- harp.compile: a callable model, tiered the same way --------------------------------------
m = harp.compile(path, cache_dir=tempfile.mkdtemp())
y = m(x)
s.check("harp.compile: the first call on tier 0", m.last_run_tier0 is True, m.last_run_tier0)
ok, d = close(y, want, rtol=1e-4, atol=1e-5)
s.check("harp.compile: tier 0's result against onnxruntime", ok, d)
s.close()
