"""Shared pieces of the int8 / QDQ cross-checks (test_onnx_quant*.py): an
ONNX model file from nodes, onnxruntime's run of it, a float model through
onnxruntime's quantize_static on random calibration data, the scale of the
DequantizeLinear that makes an output, the C `harp compile` makes, and the
check of harp's outputs against onnxruntime's on each backend.

Needs: numpy, onnx, onnxruntime (the caller checks with
harp_test.onnx_or_skip() first); harp_test.  Gives: suite, model, ort_run,
vi, init, quantize_random, out_step, compile_sources, compiled_c,
held_maps, same, Q8_FORCE,
Q8_FUSED.
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


def compile_sources(path, extra=()):
    """The C `harp compile --sources-only` (with extra) makes of `path` for
    the cpu, all its files in one string, and the process."""
    out = tempfile.mkdtemp(prefix="harp_py_c_")
    p = subprocess.run([ht.HARP, "compile", path, "--target", "cpu", "--sources-only", "-o", out, *extra], capture_output=True, text=True,
                       timeout=300)
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
