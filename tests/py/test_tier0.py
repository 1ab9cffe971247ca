"""Tier 0 (knob tier0, src/runtime/tier0.c): a compiled model's runs before
its shared object exists, GEMM / conv / pool regions on libharp's
shape-generic kernels (run-time sizes, masked tails) and the rest on the
interpreter.  tier0=force runs every model there with no C compiler: each
small ONNX graph below is checked against onnxruntime directly, and the
stderr line of --time-stages must show its contractions on the fast
kernels (a fast path that silently declined would leave them on the
interpreter, right but slow).  tier0=auto (the default): the first run is
tier 0, on a cold cache (the object lands in the cache) and a warm one (the
object is found there in the background, no C printed first).  A
wrong-shaped input is refused before any kernel runs."""
import os
import re
import subprocess
import tempfile

import numpy as np

import model_weights as mw
import onnx_models as om
from harp_test import HARP, Suite, close

try:
    import onnx
    import onnx.numpy_helper
    import onnxruntime as ort
    from onnx import TensorProto, helper
except ImportError:
    print("onnx / onnxruntime not installed (scripts/install-deps.sh)")
    raise SystemExit(77)

s = Suite("tier0")
rng = np.random.default_rng(11)


def rand(*shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def model(nodes, inputs, outputs, inits):
    """An opset-17 ONNX model: inputs {name: array}, outputs [(name, shape)],
    inits {name: array} (weights, as initializers)."""
    vi = [helper.make_tensor_value_info(n, TensorProto.FLOAT, a.shape) for n, a in inputs.items()]
    vo = [helper.make_tensor_value_info(n, TensorProto.FLOAT, sh) for n, sh in outputs]
    ti = [onnx.numpy_helper.from_array(a, n) for n, a in inits.items()]
    g = helper.make_graph(nodes, "t0", vi, vo, ti)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    path = os.path.join(tempfile.mkdtemp(), "m.onnx")
    onnx.save(m, path)
    return path


def harp(path, inputs, knob, cache=None, extra=()):
    out = tempfile.mkdtemp()
    args = [HARP, "run", path, "--out", out, "--knob", f"tier0={knob}", "--time-stages", *extra]
    for n, a in inputs.items():
        f = os.path.join(out, f"in_{n}.npy")
        np.save(f, a)
        args += ["--input", f"{n}={f}"]
    env = dict(os.environ)
    if cache:
        env["HARP_CACHE_DIR"] = cache
    return subprocess.run(args, capture_output=True, text=True, timeout=300, env=env), out


def counts(stderr):
    """(kernels on the fast kernels, kernels on the interpreter), from --time-stages."""
    m = re.search(r"tier 0: (\d+) kernels on the shape-generic kernels \([0-9.]+ ms\), (\d+) on the interpreter", stderr)
    return (int(m.group(1)), int(m.group(2))) if m else (-1, -1)


def case(name, nodes, inputs, outputs, inits, min_fast, tol=1e-4, path=None, max_interp=None):
    """The model (or the ONNX file at path) through tier0=force against
    onnxruntime; at least min_fast kernels on the fast path, at most
    max_interp on the interpreter."""
    path = path or model(nodes, inputs, outputs, inits)
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, inputs)
    p, out = harp(path, inputs, "force")
    s.check(f"{name}: runs on tier 0", p.returncode == 0, p.stderr.strip()[-500:])
    if p.returncode:
        return
    fast, interp = counts(p.stderr)
    s.check(f"{name}: {min_fast}+ kernels on the fast kernels", fast >= min_fast, p.stderr.strip()[-300:])
    if max_interp is not None:
        s.check(f"{name}: at most {max_interp} on the interpreter", 0 <= interp <= max_interp, p.stderr.strip()[-300:])
    for (o, _), w in zip(outputs, want):
        got = np.load(os.path.join(out, o + ".npy"))
        scale = max(1.0, float(np.abs(w).max()))
        s.check(f"{name}: {o} vs onnxruntime", *close(got, w, rtol=tol, atol=tol * scale))


def conv(x, w, b, y, **kw):
    return helper.make_node("Conv", [x, w] + ([b] if b else []), [y], **kw)


# a 3x3 conv, bias, relu: odd sizes (tails of the 6 x 32 tile in both directions)
x, w, b = rand(1, 5, 13, 11), rand(7, 5, 3, 3, scale=0.3), rand(7)
case("conv3x3 bias relu", [conv("x", "w", "b", "c", pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["y"])],
     {"x": x}, [("y", (1, 7, 13, 11))], {"w": w, "b": b}, 1)

# stride 2, asymmetric padding, dilation 2, batch 2
x, w = rand(2, 4, 17, 15), rand(9, 4, 3, 3, scale=0.3)
case("conv stride 2 dilation 2 asymmetric pads", [conv("x", "w", None, "y", strides=[2, 2], pads=[2, 1, 0, 2],
                                                       dilations=[2, 2])],
     {"x": x}, [("y", (2, 9, 8, 7))], {"w": w}, 1)

# stride 1 with dilation 3 and asymmetric pads: the row-segment im2col, runs
# that start and end in the padding, pixels of a panel over several rows
x, w = rand(1, 3, 11, 37), rand(4, 3, 3, 3, scale=0.3)
case("conv stride 1 dilation 3 asymmetric pads", [conv("x", "w", None, "y", pads=[3, 0, 1, 4], dilations=[3, 3])],
     {"x": x}, [("y", (1, 4, 9, 35))], {"w": w}, 1)

# grouped and depthwise, then a residual add and a clip (ReLU6)
x, wg, wd = rand(1, 8, 9, 10), rand(8, 2, 3, 3, scale=0.3), rand(8, 1, 3, 3, scale=0.3)
case("grouped + depthwise + residual + clip",
     [conv("x", "wg", None, "g", pads=[1, 1, 1, 1], group=4), conv("g", "wd", None, "d", pads=[1, 1, 1, 1], group=8),
      helper.make_node("Add", ["d", "x"], ["r"]), helper.make_node("Clip", ["r", "lo", "hi"], ["y"])],
     {"x": x}, [("y", (1, 8, 9, 10))], {"wg": wg, "wd": wd, "lo": np.array(0, np.float32), "hi": np.array(6, np.float32)}, 2)

# depthwise alone, stride 2, dilation 2, asymmetric pads, a bias and a
# hard-sigmoid-like clip: the row-at-a-time taps and their column ranges
x, wd, bd = rand(2, 6, 15, 14), rand(6, 1, 3, 3, scale=0.3), rand(6)
case("depthwise stride 2 dilation 2 asymmetric pads",
     [conv("x", "wd", "bd", "d", pads=[2, 0, 1, 3], strides=[2, 2], dilations=[2, 2], group=6),
      helper.make_node("Clip", ["d", "lo", "hi"], ["y"])],
     {"x": x}, [("y", (2, 6, 7, 7))], {"wd": wd, "bd": bd, "lo": np.array(-0.5, np.float32), "hi": np.array(0.7, np.float32)},
     1, max_interp=0)

# a 1x1 conv over 70 channels (K past one tile), a batch-norm folded as scale + shift
x, w = rand(1, 70, 6, 7), rand(33, 70, 1, 1, scale=0.2)
sc, sh, mu, var = rand(33), rand(33), rand(33), (np.abs(rand(33)) + 0.5).astype(np.float32)
case("conv1x1 + batchnorm", [conv("x", "w", None, "c"),
                             helper.make_node("BatchNormalization", ["c", "sc", "sh", "mu", "var"], ["y"])],
     {"x": x}, [("y", (1, 33, 6, 7))], {"w": w, "sc": sc, "sh": sh, "mu": mu, "var": var}, 1)

# a 1x1 conv read as a GEMM over pixels x channels, its output stored by
# columns: computed as the transpose (tier0_gemm.c), its bias and residual
# steps swapped to the other axis; odd sizes, neither a tile's multiple
x, w, b, r = rand(1, 13, 9, 11), rand(21, 13, 1, 1, scale=0.3), rand(21), rand(1, 21, 9, 11)
case("conv1x1 bias + residual + relu (transposed GEMM)",
     [conv("x", "w", "b", "c"), helper.make_node("Add", ["c", "r"], ["a"]), helper.make_node("Relu", ["a"], ["y"])],
     {"x": x, "r": r}, [("y", (1, 21, 9, 11))], {"w": w, "b": b}, 1, max_interp=0)

# maps read through floor divisions (kernel/gmap.h) on tier0_map.c, none
# on the interpreter: a nearest Resize x2 added to a lateral branch and
# concatenated with it (a piece per slab); a DepthToSpace in both modes
# with a sigmoid; a text detector's head of 2x2 stride-2 ConvTransposes
fpn_path = os.path.join(tempfile.mkdtemp(), "fpn.onnx")
onnx.save(om.fpn_s2(rng), fpn_path)
case("resize x2 + add + concat (gmap)", None, {"x": rand(1, 3, 14, 22)}, [("y", (1, 8, 14, 22))], None, 4, path=fpn_path,
     max_interp=0)
# the slabs cut along rows (a concatenation on H): y's channel stride is
# the whole image's, not a slab's
u, v = rand(1, 3, 4, 5), rand(1, 3, 6, 10)
case("resize x2 concat on rows (gmap)",
     [helper.make_node("Resize", ["u", "", "sc"], ["r"], mode="nearest"), helper.make_node("Sigmoid", ["v"], ["sv"]),
      helper.make_node("Concat", ["r", "sv"], ["y"], axis=2)],
     {"u": u, "v": v}, [("y", (1, 3, 14, 10))], {"sc": np.array([1, 1, 2, 2], np.float32)}, 1, max_interp=0)
x, w = rand(1, 3, 7, 9), rand(12, 3, 1, 1, scale=0.5)
case("depth-to-space DCR + sigmoid, CRD (gmap)",
     [conv("x", "w", None, "c"), helper.make_node("DepthToSpace", ["c"], ["d"], blocksize=2, mode="DCR"),
      helper.make_node("Sigmoid", ["d"], ["y"]), helper.make_node("DepthToSpace", ["c"], ["z"], blocksize=2, mode="CRD")],
     {"x": x}, [("y", (1, 3, 14, 18)), ("z", (1, 3, 14, 18))], {"w": w}, 3, max_interp=0)
x, hw = rand(1, 3, 9, 7), {"w0": rand(4, 3, 3, 3, scale=0.3), "b0": rand(4, scale=0.1), "t1": rand(4, 4, 2, 2, scale=0.4),
                           "c1": rand(4, scale=0.1), "t2": rand(4, 1, 2, 2, scale=0.4), "c2": rand(1, scale=0.1)}
case("conv transpose 2x2/2 head (gmap)",
     [conv("x", "w0", "b0", "a", pads=[1, 1, 1, 1]), helper.make_node("Relu", ["a"], ["r"]),
      helper.make_node("ConvTranspose", ["r", "t1", "c1"], ["u"], kernel_shape=[2, 2], strides=[2, 2]),
      helper.make_node("Relu", ["u"], ["v"]),
      helper.make_node("ConvTranspose", ["v", "t2", "c2"], ["t"], kernel_shape=[2, 2], strides=[2, 2]),
      helper.make_node("Sigmoid", ["t"], ["y"])],
     {"x": x}, [("y", (1, 1, 36, 28))], hw, 3, max_interp=0)

# Gemm with transB and a bias, then a sigmoid; a batched MatMul
a, wt, bb = rand(45, 37), rand(19, 37, scale=0.3), rand(19)
case("gemm transB bias sigmoid", [helper.make_node("Gemm", ["a", "wt", "bb"], ["g"], transB=1),
                                  helper.make_node("Sigmoid", ["g"], ["y"])],
     {"a": a}, [("y", (45, 19))], {"wt": wt, "bb": bb}, 1)
p, q = rand(3, 7, 40), rand(3, 40, 9)
case("batched matmul", [helper.make_node("MatMul", ["p", "q"], ["y"])], {"p": p, "q": q}, [("y", (3, 7, 9))], {}, 1)

# max pooling with padding after a conv; average pooling (a sum and a scale)
x, w = rand(1, 3, 16, 16), rand(6, 3, 3, 3, scale=0.3)
case("conv + maxpool + avgpool",
     [conv("x", "w", None, "c", pads=[1, 1, 1, 1]),
      helper.make_node("MaxPool", ["c"], ["m"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
      helper.make_node("AveragePool", ["m"], ["y"], kernel_shape=[2, 2], strides=[2, 2])],
     {"x": x}, [("y", (1, 6, 4, 4))], {"w": w}, 2)

# a max pooling followed by a clip (ReLU6): the clamp is the pool's epilogue
x = rand(1, 4, 9, 9, scale=5)
case("maxpool + clip", [helper.make_node("MaxPool", ["x"], ["m"], kernel_shape=[3, 3], strides=[2, 2]),
                        helper.make_node("Clip", ["m", "lo", "hi"], ["y"])],
     {"x": x}, [("y", (1, 4, 4, 4))], {"lo": np.array(0, np.float32), "hi": np.array(6, np.float32)}, 1)

# attention (causal, a mask of -inf above the diagonal) and a plain row softmax
S, D = 11, 8
q, k, v = rand(1, 2, S, D), rand(1, 2, S, D), rand(1, 2, S, D)
an, ai = om.attention_nodes(2, S, D, 0.35, True)
case("causal attention", an, {"q": q, "k": k, "v": v}, [("o", (1, 2, S, D))],
     {i.name: onnx.numpy_helper.to_array(i) for i in ai}, 1, max_interp=0)
case("softmax rows", [helper.make_node("Softmax", ["z"], ["y"], axis=-1)], {"z": rand(6, 37, scale=3)},
     [("y", (6, 37))], {}, 1, max_interp=0)

case("layernorm rows", [helper.make_node("LayerNormalization", ["z", "g", "b"], ["y"], axis=-1, epsilon=1e-5)],
     {"z": rand(7, 40, scale=2)}, [("y", (7, 40))], {"g": rand(40), "b": rand(40)}, 1, max_interp=0)

# elementwise maps: a hard-swish chain with a per-channel scale (a broadcast
# per row), and a concatenation with padding (pieces of the output)
z, ch = rand(2, 5, 7, 9, scale=3), rand(1, 5, 1, 1)
case("hard-swish map", [helper.make_node("HardSwish", ["z"], ["h"]), helper.make_node("Mul", ["h", "ch"], ["m"]),
                        helper.make_node("Tanh", ["m"], ["y"])],
     {"z": z}, [("y", (2, 5, 7, 9))], {"ch": ch}, 1, max_interp=0)
u, v = rand(3, 40), rand(2, 40)
case("concat + pad map", [helper.make_node("Exp", ["u"], ["eu"]), helper.make_node("Concat", ["eu", "v"], ["c"], axis=0),
                          helper.make_node("Pad", ["c", "pads", "pv"], ["p"]), helper.make_node("Sigmoid", ["p"], ["y"])],
     {"u": u, "v": v}, [("y", (7, 40))], {"pads": np.array([1, 0, 1, 0], np.int64), "pv": np.array(0.5, np.float32)}, 1)
u, v = rand(3, 40), rand(3, 20)
case("concat columns map", [helper.make_node("Exp", ["u"], ["eu"]), helper.make_node("Concat", ["eu", "v"], ["c"], axis=1),
                            helper.make_node("Pad", ["c", "pads", "pv"], ["p"]), helper.make_node("Sigmoid", ["p"], ["y"])],
     {"u": u, "v": v}, [("y", (3, 92))], {"pads": np.array([0, 16, 0, 16], np.int64), "pv": np.array(0.5, np.float32)}, 1)

# one small BERT layer: GEMMs (one with A repacked: the heads merged back),
# attention, GELU in an epilogue; at this width the residual adds join the
# layernorms' regions, which stay on the interpreter
S, E, H, F = 12, 32, 4, 48
t = mw.bert_weights(rand, E, F)
bert_path = os.path.join(tempfile.mkdtemp(), "bert.onnx")
onnx.save(om.bert(t, 1, S, E, H, F, gelu_op=True), bert_path)
case("bert layer", None, {"x": rand(1, S, E)}, [("y", (1, S, E))], None, 6, path=bert_path, max_interp=2)

# tier0=auto on a cold cache: tier 0 first, the object cached, then loaded
x, w, b = rand(1, 4, 10, 10), rand(8, 4, 3, 3, scale=0.3), rand(8)
path = model([conv("x", "w", "b", "c", pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["y"])],
             {"x": x}, [("y", (1, 8, 10, 10))], {"w": w, "b": b})
want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
cache = tempfile.mkdtemp()
p1, o1 = harp(path, {"x": x}, "auto", cache)
s.check("auto, cold cache: runs", p1.returncode == 0, p1.stderr.strip()[-400:])
s.check("auto, cold cache: the first run is tier 0", "first result written" in p1.stderr, p1.stderr.strip()[-400:])
s.check("auto, cold cache: the object reaches the cache", any(f.endswith(".so") for f in os.listdir(cache)),
        str(os.listdir(cache)))
stages1 = next((ln for ln in p1.stderr.splitlines() if "stages (cpu)" in ln), "")
s.check("auto, cold cache: the C is printed after the first result, not before", ", code " not in stages1 and
        "its C printed in" in p1.stderr, p1.stderr.strip()[-400:])
# the first4 hold: the builder thread, its reading done, waits for the first
# tier-0 run to end (at most 1.5 s) before it takes the second core.  A hold
# removed says "never held" or -1 ms; one never released by the run ends at
# the caller's wait for the object or the 1.5 s limit.
hold = re.search(r"the builder held (-?[0-9.]+) ms after its reading, (.*)", p1.stderr)
s.check("auto, cold cache: the builder held until the first tier-0 run ended",
        hold is not None and float(hold.group(1)) >= 0 and hold.group(2) == "released by the first tier-0 run",
        hold.group(0) if hold else p1.stderr.strip()[-400:])
sos = sorted(f for f in os.listdir(cache) if f.endswith(".so"))
p2, o2 = harp(path, {"x": x}, "auto", cache)
stages2 = next((ln for ln in p2.stderr.splitlines() if "stages (cpu)" in ln), "")
# the builder thread may find the cached object before the first run starts
# (a busy machine): then that object answers; either way no C is printed
# before the first result and nothing is built
t0_first = "first result written" in p2.stderr
# (when the builder thread was first, the stages include its C's print time:
# it ran in the background, which harp says)
bg_first = "the object was ready before the first run (found in the cache; its C printed in the background)" in p2.stderr
s.check("auto, warm cache: no C printed before the first result (tier 0 first, or the cached object ready)",
        p2.returncode == 0 and (", code " not in stages2 or (bg_first and not t0_first)), p2.stderr.strip()[-400:])
s.check("auto, warm cache: the object found in the cache, not built",
        ("found in the cache" in p2.stderr) if t0_first else
        sorted(f for f in os.listdir(cache) if f.endswith(".so")) == sos, p2.stderr.strip()[-400:])
if p1.returncode == 0 and p2.returncode == 0:
    s.check("auto: tier 0 vs onnxruntime", *close(np.load(os.path.join(o1, "y.npy")), want, rtol=1e-4, atol=1e-4))
    s.check("auto: the object vs onnxruntime", *close(np.load(os.path.join(o2, "y.npy")), want, rtol=1e-4, atol=1e-4))

# the object gone from the cache: tier 0 answers and the object is built again
for f in os.listdir(cache):
    if f.endswith(".so"):
        os.unlink(os.path.join(cache, f))
p6, o6 = harp(path, {"x": x}, "auto", cache)
s.check("object gone: tier 0 answers, the object built again", p6.returncode == 0 and "first result written" in p6.stderr
        and "found in the cache" not in p6.stderr, p6.stderr.strip()[-400:])
s.check("object gone: the object is back in the cache", any(f.endswith(".so") for f in os.listdir(cache)), str(os.listdir(cache)))
if p6.returncode == 0:
    s.check("object gone: vs onnxruntime", *close(np.load(os.path.join(o6, "y.npy")), want, rtol=1e-4, atol=1e-4))

# tier0=off: the object first (built, then run), no tier 0
p7, o7 = harp(path, {"x": x}, "off", tempfile.mkdtemp())
s.check("off: the object runs, not tier 0", p7.returncode == 0 and "tier 0" not in p7.stderr and ", code " in p7.stderr,
        p7.stderr.strip()[-400:])
if p7.returncode == 0:
    s.check("off: vs onnxruntime", *close(np.load(os.path.join(o7, "y.npy")), want, rtol=1e-4, atol=1e-4))

# the default is auto: a cold `harp run` with no knob answers on tier 0
out = tempfile.mkdtemp()
f = os.path.join(out, "in_x.npy")
np.save(f, x)
env = {k: v for k, v in os.environ.items() if k != "HARP_TIER0"}
p8 = subprocess.run([HARP, "run", path, "--out", out, "--input", f"x={f}", "--time-stages"], capture_output=True, text=True,
                    timeout=300, env=dict(env, HARP_CACHE_DIR=tempfile.mkdtemp()))
s.check("default: tier 0 first", p8.returncode == 0 and "first result written" in p8.stderr, p8.stderr.strip()[-400:])

# two processes on one cold cache at once: both answer, one object is kept
cache2 = tempfile.mkdtemp()
procs = []
for i in range(2):
    out = tempfile.mkdtemp()
    f = os.path.join(out, "in_x.npy")
    np.save(f, x)
    procs.append((subprocess.Popen([HARP, "run", path, "--out", out, "--input", f"x={f}", "--knob", "tier0=auto"],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                   env=dict(os.environ, HARP_CACHE_DIR=cache2)), out))
for i, (pr, out) in enumerate(procs):
    _, err = pr.communicate(timeout=300)
    s.check(f"concurrent run {i}: succeeds", pr.returncode == 0, err.strip()[-300:])
    if pr.returncode == 0:
        s.check(f"concurrent run {i}: vs onnxruntime", *close(np.load(os.path.join(out, "y.npy")), want, rtol=1e-4, atol=1e-4))
objs = [f for f in os.listdir(cache2) if f.endswith(".so")]
s.check("concurrent runs: one object in the cache", len(objs) == 1, str(os.listdir(cache2)))

# tier0=auto: the builder thread reads tier 0's kernels while the first run
# starts (each kernel waited for): a chain of 24 small convs, each read
# slower than it runs, must still run every kernel on the fast kernels,
# as many as tier0=force (which reads them all first) runs there, and say
# how long the run waited for the reading.  The compiler is absent, so the
# builder reads and then fails fast.
nodes, inits, prev = [], {}, "x"
for i in range(24):
    inits[f"w{i}"], inits[f"b{i}"] = rand(6, 6, 3, 3, scale=0.2), rand(6, scale=0.1)
    nodes += [conv(prev, f"w{i}", f"b{i}", f"c{i}", pads=[1, 1, 1, 1]), helper.make_node("Relu", [f"c{i}"], [f"r{i}"])]
    prev = f"r{i}"
nodes.append(helper.make_node("Identity", [prev], ["y"]))
xc = rand(1, 6, 7, 7)
chain = model(nodes, {"x": xc}, [("y", [1, 6, 7, 7])], inits)
want_c = ort.InferenceSession(chain, providers=["CPUExecutionProvider"]).run(None, {"x": xc})[0]
pf, _ = harp(chain, {"x": xc}, "force")
for i in range(2):
    pa, oa = harp(chain, {"x": xc}, "auto", tempfile.mkdtemp(), ["--knob", "cc=/nonexistent/cc"])
    s.check(f"reading on the builder ({i}): tier 0 answers", pa.returncode == 0 and "first result written" in pa.stderr,
            pa.stderr.strip()[-400:])
    fast_a, fast_f = counts(pa.stderr)[0], counts(pf.stderr)[0]
    s.check(f"reading on the builder ({i}): every kernel tier0=force runs fast runs fast ({fast_a} of {fast_f})",
            fast_f >= 24 and fast_a == fast_f, pa.stderr.strip()[-400:])
    s.check(f"reading on the builder ({i}): the wait is said", re.search(r"\([0-9.]+ ms\), [0-9.]+ ms waiting for their reading",
                                                                       pa.stderr) is not None, pa.stderr.strip()[-400:])
    if pa.returncode == 0:
        s.check(f"reading on the builder ({i}): vs onnxruntime", *close(np.load(os.path.join(oa, "y.npy")), want_c,
                                                                         rtol=1e-4, atol=1e-4))

# no C compiler at all: tier0=auto still answers, and says the build failed
out = tempfile.mkdtemp()
f = os.path.join(out, "in_x.npy")
np.save(f, x)
p4 = subprocess.run([HARP, "run", path, "--out", out, "--input", f"x={f}", "--knob", "tier0=auto", "--knob",
                     "cc=/nonexistent/cc"], capture_output=True, text=True, timeout=300,
                    env=dict(os.environ, HARP_CACHE_DIR=tempfile.mkdtemp()))
s.check("no compiler: tier 0 answers", p4.returncode == 0 and "background build failed" in p4.stderr, p4.stderr.strip()[-300:])
if p4.returncode == 0:
    s.check("no compiler: vs onnxruntime", *close(np.load(os.path.join(out, "y.npy")), want, rtol=1e-4, atol=1e-4))

# the background build fault-injected: a compiler that leaves a partial
# object and fails, one killed by a signal, one that succeeds without an
# object.  Tier 0 answers right every time, says the build failed, and the
# cache is left with no object and no build directory of a live process.
fake = tempfile.mkdtemp()
faults = {
    "partial object, status 1": "printf 'ELF partial' > \"$out\"; exit 1",
    "killed by SIGKILL": "printf 'ELF' > \"$out\"; kill -9 $$",
    "no object, status 0": "exit 0",
}
for name, body in faults.items():
    cc = os.path.join(fake, name.replace(" ", "_").replace(",", "") + ".sh")
    with open(cc, "w") as fh:
        fh.write("#!/bin/sh\nout=\nprev=\nfor a in \"$@\"; do [ \"$prev\" = -o ] && out=$a; prev=$a; done\n" + body + "\n")
    os.chmod(cc, 0o755)
    fcache = tempfile.mkdtemp()
    p5, o5 = harp(path, {"x": x}, "auto", fcache, ["--knob", f"cc={cc}"])
    s.check(f"build fault ({name}): tier 0 answers, the failure said", p5.returncode == 0 and
            "background build failed" in p5.stderr, p5.stderr.strip()[-300:])
    if p5.returncode == 0:
        s.check(f"build fault ({name}): vs onnxruntime", *close(np.load(os.path.join(o5, "y.npy")), want, rtol=1e-4, atol=1e-4))
    left = os.listdir(fcache)
    s.check(f"build fault ({name}): no object in the cache", not any(f.endswith(".so") for f in left), str(left))

# what needs the object under tier0=force builds it: harp bench times it,
# harp compile writes the package (the C is printed on tier 0 too)
pb = subprocess.run([HARP, "bench", path, "--knob", "tier0=force", "--repeat", "2", "--warmup", "1"], capture_output=True,
                    text=True, timeout=300, env=dict(os.environ, HARP_CACHE_DIR=tempfile.mkdtemp()))
s.check("force: harp bench runs the object", pb.returncode == 0 and "median" in pb.stdout + pb.stderr,
        (pb.stdout + pb.stderr).strip()[-300:])
pkg = os.path.join(tempfile.mkdtemp(), "pkg")
pc = subprocess.run([HARP, "compile", path, "--target", "cpu", "-o", pkg, "--knob", "tier0=force"], capture_output=True,
                    text=True, timeout=300, env=dict(os.environ, HARP_CACHE_DIR=tempfile.mkdtemp()))
s.check("force: harp compile writes the package", pc.returncode == 0 and os.path.exists(os.path.join(pkg, "model.c")),
        pc.stderr.strip()[-300:])

# a wrong-shaped input: a clear error naming it, no output file
p3, o3 = harp(path, {"x": rand(1, 4, 10, 9)}, "force")
s.check("wrong shape: refused with a message", p3.returncode != 0 and "x" in p3.stderr and "Traceback" not in p3.stderr,
        p3.stderr.strip()[-300:])
s.check("wrong shape: no output written", not os.path.exists(os.path.join(o3, "y.npy")))
s.close()
