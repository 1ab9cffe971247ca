"""Shared pieces of the int8 / QDQ cross-checks (test_onnx_quant*.py): an
ONNX model file from nodes, onnxruntime's run of it, a float model through
onnxruntime's quantize_static on random calibration data, the scale of the
DequantizeLinear that makes an output, the C `harp compile` makes, and the
check of harp's outputs against onnxruntime's on each backend.

Needs: numpy, onnx, onnxruntime (the caller checks with
harp_test.onnx_or_skip() first); harp_test.  Gives: suite, model, ort_run,
vi, init, quantize_random, out_step, compile_sources, compiled_c,
held_maps, same, Q8_FORCE,
Q8_FUSED; the int8 kernels' ISA tests' (test_qamx.py, test_q8avx2.py,
test_qvnni4.py) weight, act, ort_outputs, check_q8_out, isa_runs, q8_sources.
"""
import os
import re
import subprocess
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper as h
from onnx import numpy_helper as nh

import harp_test as ht

# these models are too small for the int8 kernel to pay (contract_q8.c): taken anyway, to test it
Q8_FORCE = ["--knob", "int8=force"]
# the QDQ residual add written as a residual step of the int8 conv's epilogue, its roundings apart (the
# default, qdq_add=exact, computes it as onnxruntime's QLinearAdd does, bit for bit, as the conv's
# epilogue step CT_EPI_RESFMA: src/region/resfma.c)
Q8_FUSED = Q8_FORCE + ["--knob", "qdq_add=fused"]


def suite(name):
    """The Suite of a test_onnx_quant*.py file, after what they all set:
    the compiled C's numbers, not tier 0's (harp run answers its first run
    from tier 0: harp_test.compiled_only), and the kernels at -O1 (the knob
    cc_opt): these tests check what the kernels compute, not their speed,
    and CI compiles them with a cold cache (-O3: 1.7x the compiler's time,
    bench/RESULTS.md "health3"); the ISA flags and the C are the same."""
    ht.compiled_only()
    os.environ.setdefault("HARP_CC_OPT", "1")
    return ht.Suite(name)


def model(nodes, inputs, outputs, inits=(), ms=False, opset=21):
    """The graph of nodes (inputs, outputs: value infos; inits: initializers;
    ms: also the com.microsoft domain) as m.onnx in a new temporary folder."""
    g = h.make_graph(nodes, "q", inputs, outputs, initializer=list(inits))
    ops = [h.make_opsetid("", opset)] + ([h.make_opsetid("com.microsoft", 1)] if ms else [])
    m = h.make_model(g, opset_imports=ops)
    m.ir_version = 10
    path = os.path.join(tempfile.mkdtemp(), "m.onnx")
    onnx.save(m, path)
    return path


def ort_run(path, feeds):
    """onnxruntime's outputs of model file path on feeds: {name: array}."""
    s = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in s.get_outputs()], s.run(None, feeds)))


def vi(name, t, shape):
    return h.make_tensor_value_info(name, t, shape)


def init(name, arr):
    return nh.from_array(np.asarray(arr), name)


def quantize_random(fp32, shape, rng, n=4, qdq=None, **kw):
    """The fp32 model file `fp32` (one input, x) through quantize_static
    (QDQ, per-channel; uint8 activations and int8 weights unless kw says
    otherwise) calibrated on n random inputs of `shape` from rng, as the file
    qdq (default: qdq.onnx beside fp32).  Returns its path."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter([{"x": rng.standard_normal(shape).astype(np.float32)} for _ in range(n)])

        def get_next(self):
            return next(self.it, None)

    qdq = qdq or os.path.join(os.path.dirname(fp32), "qdq.onnx")
    opts = {"activation_type": QuantType.QUInt8, "weight_type": QuantType.QInt8, **kw}
    quantize_static(fp32, qdq, Reader(), quant_format=QuantFormat.QDQ, per_channel=True, **opts)
    return qdq


def out_step(m, out):
    """The scale of the DequantizeLinear that makes output `out` of the
    loaded model m (its quantization step), or None when another op makes it."""
    last = [n for n in m.graph.node if n.output[0] == out][0]
    if last.op_type != "DequantizeLinear":
        return None
    return float(nh.to_array([i for i in m.graph.initializer if i.name == last.input[1]][0]))


def compile_sources(path, extra=(), env=None):
    """The C `harp compile --sources-only` (with extra; env: variables over
    os.environ) makes of `path` for the cpu, all its files in one string,
    and the process."""
    out = tempfile.mkdtemp(prefix="harp_py_c_")
    p = subprocess.run([ht.HARP, "compile", path, "--target", "cpu", "--sources-only", "-o", out, *extra], capture_output=True, text=True,
                       timeout=300, env={**os.environ, **(env or {})})
    return "".join(open(os.path.join(r, f)).read() for r, _, fs in os.walk(out) for f in fs if f.endswith(".c")), p


def compiled_c(path, extra=()):
    """compile_sources' C of `path`, and the compile's stderr."""
    src, p = compile_sources(path, extra)
    return src, p.stderr


def held_maps(src):
    """How many map kernels of the generated C `src` store held bytes (a Q's,
    contract_rows_c.c's map_q8_out)."""
    return len(re.findall(r"map \d+ points.*-> u8 \(\+\d+, held\) ----", src))


def same(suite, name, path, feeds, exact=True, backends=None):
    """harp on each backend against onnxruntime, checked in suite: equal
    dtypes and shapes, and equal values (exact) or within one unit
    (quantized results of fp32 contractions summed in another order)."""
    want = ort_run(path, feeds)
    for be in backends or ht.BACKENDS:
        p, d = ht.run(path, feeds, backend=be)
        suite.check(f"{name} ({be}): runs", p.returncode == 0, p.stderr[-800:])
        if p.returncode:
            continue
        for k, w in want.items():
            got = np.load(os.path.join(d, k + ".npy"))
            ok = got.dtype == w.dtype and got.shape == w.shape
            diff = np.abs(got.astype(np.float64) - w.astype(np.float64)) if ok else None
            ok = ok and (np.array_equal(got, w) if exact else diff.max(initial=0) <= 1)
            suite.check(f"{name} ({be}): {k} matches onnxruntime", ok,
                        f"{got.dtype}{got.shape} vs {w.dtype}{w.shape}" + (f", max diff {diff.max()}" if diff is not None else ""))


def weight(rng, shape, lo=-128, hi=128, dtype=np.int8):
    """Random weights of shape in [lo, hi) from rng; int8 ones with -128 and
    127 among each output channel's first five (the saturating products)."""
    w = rng.integers(lo, hi, shape, dtype=dtype)
    if dtype == np.int8:
        w.reshape(shape[0], -1)[:, :5] = rng.choice(np.array([-128, 127], np.int8), (shape[0], 5))
    return w


def act(rng, shape, scale):
    """fp32 activations of shape (standard normal times scale), a quarter
    of them far past the quantized range."""
    x = (rng.standard_normal(shape) * scale).astype(np.float32)
    x.flat[::4] = rng.choice(np.array([-1e3, 1e3], np.float32), x.flat[::4].shape)
    return x


class ConvChain:
    """A QDQ graph of int8 convs under construction (test_qvnni4.py,
    test_q8_respost.py): x quantized at scale sx and zero point zx, each
    tensor v requantized at zero point zy and scale sc.get(v, 2.0); per-channel
    int8 weights, int32 biases, all from rng."""

    def __init__(self, rng, sx, zx, zy, sc):
        self.rng, self.sc = rng, sc
        self.nodes, self.outs, self.steps = [], [], {}
        self.inits = [init("sx", sx), init("zx", np.uint8(zx)), init("zy", np.uint8(zy))]

    def q(self, v, out):
        """v through Q -> DQ at zy (an output of the graph where out, its step
        noted); (the DQ's name, the scale)."""
        sy = np.float32(self.sc.get(v, 2.0))
        self.inits.append(init(v + "_sy", sy))
        self.nodes.append(h.make_node("QuantizeLinear", [v, v + "_sy", "zy"], [v + "_q"]))
        self.nodes.append(h.make_node("DequantizeLinear", [v + "_q", v + "_sy", "zy"], [v + "_o"]))
        if out:
            self.outs.append(h.make_tensor_value_info(v + "_o", onnx.TensorProto.FLOAT, None))
            self.steps[v + "_o"] = float(sy)
        return v + "_o", sy

    def conv(self, name, xin, w, out=False, **attrs):
        """Conv `name` of xin = (tensor, its scale) by the int8 weight w
        (dequantized per output channel) plus a bias, then q(name, out)."""
        xname, sin = xin
        ch = w.shape[0]
        ws = (self.rng.random(ch) * 0.01 + 0.001).astype(np.float32)
        self.inits.extend([init(name + "_w", w), init(name + "_ws", ws), init(name + "_wz", np.zeros(ch, np.int8))])
        self.nodes.append(h.make_node("DequantizeLinear", [name + "_w", name + "_ws", name + "_wz"], [name + "_wd"], axis=0))
        self.inits.extend([init(name + "_b", self.rng.integers(-3000, 3000, ch).astype(np.int32)),
                           init(name + "_bs", (np.float32(sin) * ws).astype(np.float32)), init(name + "_bz", np.zeros(ch, np.int32))])
        self.nodes.append(h.make_node("DequantizeLinear", [name + "_b", name + "_bs", name + "_bz"], [name + "_bd"], axis=0))
        self.nodes.append(h.make_node("Conv", [xname, name + "_wd", name + "_bd"], [name], **attrs))
        return self.q(name, out)


    def save(self, name, x):
        """The graph of input x (its feeds) and the outputs noted, saved as
        opset 13: (path, feeds, each output's step)."""
        gr = h.make_graph(self.nodes, name, [h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, x.shape)], self.outs, self.inits)
        m = h.make_model(gr, opset_imports=[h.make_opsetid("", 13)])
        m.ir_version = 8
        path = os.path.join(tempfile.mkdtemp(prefix=f"harp_py_{name}_"), "qdq.onnx")
        onnx.save(m, path)
        return path, {"x": x}, self.steps


def calibrated(build, zx, zy, rounds, skip=("x",)):
    """build(zx, zy, sc) (a ConvChain's model) with each requantized tensor's
    scale sc[v] from onnxruntime's fp32 value of v (its spread over ~60
    steps, so few saturate), refined `rounds` times (each scale moves the
    ones after it); the tensors in skip keep theirs."""
    sc = {}
    for _ in range(rounds):
        path, feeds, _ = build(zx, zy, sc)
        m = onnx.load(path)
        names = [n.input[0] for n in m.graph.node if n.op_type == "QuantizeLinear" and n.input[0] not in skip]
        for n in names:
            m.graph.output.append(h.make_tensor_value_info(n, onnx.TensorProto.FLOAT, None))
        sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        for n, v in zip(names, sess.run(names, feeds)):
            sc[n] = max(float(np.std(v)), 1e-3) / 30
    return build(zx, zy, sc)


def q8_sources(suite, path, env):
    """compile_sources' C of path with the int8 kernels forced under env
    (HARP_AMX, HARP_INT8_ISA), the compile checked in suite."""
    src, p = compile_sources(path, Q8_FORCE, env)
    suite.check(f"harp compile {env}: runs", p.returncode == 0, p.stderr[-600:])
    return src


def ort_outputs(path, feeds):
    """onnxruntime's outputs of model file path on feeds ({name: array}), its warnings off."""
    so = ort.SessionOptions()
    so.log_severity_level = 3
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))


def check_q8_out(suite, name, k, y, want, step, zy):
    """Output k (y) against onnxruntime's (want), in suite: bytes (step None)
    equal on every element, not mostly saturated; fp32 ones of quantization
    step `step` (outputs' zero point zy) equal on >= 99.9% of the elements,
    none more than one step off, more than 30% unsaturated."""
    if step is None:
        inside = float(np.mean((want > np.iinfo(want.dtype).min) & (want < np.iinfo(want.dtype).max)))
        suite.check(f"{name} {k}: equal to onnxruntime", y.dtype == want.dtype and np.array_equal(y, want) and inside > 0.5,
                    f"{np.mean(y == want):.4%} equal, {inside:.1%} unsaturated")
        return
    err = np.abs(y.astype(np.float64) - want) / step
    eq = float(np.mean(err <= 1e-3))
    q = np.rint(want / step)
    inside = float(np.mean((q > -zy) & (q < 255 - zy)))
    suite.check(f"{name} {k}: equal to onnxruntime's int8 run", y.shape == want.shape and eq >= 0.999 and err.max() <= 1
                and inside > 0.3, f"{eq:.4%} equal, max {err.max():.2f} steps, {inside:.1%} unsaturated")


def isa_runs(suite, name, path, feeds, steps, zy, runs, what="equal"):
    """The model file path run on the cpu (int8 kernels forced) once per
    (tag, env) of runs, with env's variables set (HARP_AMX, HARP_INT8_ISA),
    each output named in steps ({name: step}, check_q8_out) checked against
    onnxruntime's run; then every run equal to the first on every element
    (check named "<first> and <tag> <what>").  Returns {(tag, output): array}."""
    want = ort_outputs(path, feeds)
    got = {}
    for tag, env in runs:
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        p, d = ht.run(path, feeds, backend="cpu", extra=Q8_FORCE)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k)
            else:
                os.environ[k] = v
        suite.check(f"{name} {tag}: runs", p.returncode == 0, p.stderr[-600:])
        if p.returncode:
            continue
        for k, step in steps.items():
            y = got[(tag, k)] = np.load(os.path.join(d, k + ".npy"))
            check_q8_out(suite, f"{name} {tag}", k, y, want[k], step, zy)
    first = runs[0][0]
    for tag, _ in runs[1:]:
        if all((t, k) in got for t in (first, tag) for k in steps):
            diff = [k for k in steps if not np.array_equal(got[(first, k)], got[(tag, k)])]
            suite.check(f"{name}: {first} and {tag} {what}", not diff, f"differ in {diff}")
    return got
