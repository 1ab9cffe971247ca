"""The ONNX signal ops and AffineGrid (src/frontend/onnx_ops_signal.c)
against onnxruntime on the interpreter and the cpu backend: DFT (real and
complex, every axis, dft_length cutting or padding, inverse, onesided, the
real inverse of onesided bins), STFT (a constant or run-time window,
onesided or not), the windows (periodic and symmetric), MelWeightMatrix at
a speech front end's settings, a log-mel spectrogram as torch exports it,
and AffineGrid feeding GridSample (a spatial transformer)."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import harp_test as ht  # noqa: E402

ht.onnx_or_skip()
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
from onnx import TensorProto  # noqa: E402
from onnx_models import init, mk, model, vi  # noqa: E402

rng = np.random.default_rng(9)
ort.set_default_logger_severity(3)
S = ht.Suite("onnx_signal")
BACKENDS = [b for b in ("interp", "cpu") if b in ht.BACKENDS]
I64, F32 = TensorProto.INT64, TensorProto.FLOAT


def check(name, nodes, inputs, outs, inits=(), opset=20, rtol=1e-4, atol=1e-4, scale_atol=True):
    m = model(nodes, [vi(k, v.shape, onnx.helper.np_dtype_to_tensor_dtype(v.dtype)) for k, v in inputs.items()],
              [vi(o, None) for o in outs], [init(k, v) for k, v in dict(inits).items()], opset)
    path = os.path.join(ht.tempfile.mkdtemp(), "m.onnx")
    onnx.save(m, path)
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, inputs)
    for be in BACKENDS:
        got, err = ht.run_model(path, inputs, backend=be)
        S.check(f"{name} {be}: runs", err is None, (err or "")[-600:])
        if err:
            continue
        for o, w in zip(outs, want):
            a = atol * (np.abs(w).max() if scale_atol and w.size else 1)  # transforms sum: errors scale with the magnitude
            ok, why = ht.close(got[o], w, rtol=rtol, atol=a)
            S.check(f"{name} {be} {o}: matches onnxruntime", ok, why)


def rand(*shape):
    return rng.standard_normal(shape).astype(np.float32)


# ---- DFT ----------------------------------------------------------------------------------------------
xr, xc = rand(2, 12, 5, 1), rand(2, 12, 5, 2)
nodes, inits, outs = [], {}, []
cases = [("real", "xr", {}, None, 1), ("complex", "xc", {}, None, 1), ("real axis 2", "xr", {}, None, 2),
         ("onesided", "xr", {"onesided": 1}, None, 1), ("onesided odd", "xr", {"onesided": 1}, 7, 1),
         ("inverse complex", "xc", {"inverse": 1}, None, 1), ("padded to 16", "xc", {}, 16, 1), ("cut to 9", "xr", {}, 9, 2)]
for i, (label, src, kw, length, axis) in enumerate(cases):
    ins = [src, f"len{i}" if length else "", f"ax{i}"]
    if length:
        inits[f"len{i}"] = np.array(length, np.int64)
    inits[f"ax{i}"] = np.array(axis, np.int64)
    nodes.append(mk("DFT", ins, [f"y{i}"], **kw))
    outs.append(f"y{i}")
check("DFT (" + ", ".join(c[0] for c in cases) + ")", nodes, {"xr": xr, "xc": xc}, outs, inits)
spec = np.fft.rfft(rand(3, 10).astype(np.float64), axis=1)
bins = np.stack([spec.real, spec.imag], -1).astype(np.float32)
check("DFT inverse onesided (irfft), and with dft_length 11",
      [mk("DFT", ["b", "", "ax"], ["y"], inverse=1, onesided=1), mk("DFT", ["b", "len", "ax"], ["y2"], inverse=1, onesided=1)],
      {"b": bins}, ["y", "y2"], {"ax": np.array(1, np.int64), "len": np.array(11, np.int64)})
check("DFT opset 17 (axis an attribute)", [mk("DFT", ["x"], ["y"], axis=1), mk("DFT", ["x"], ["y2"], axis=1, inverse=1)],
      {"x": rand(3, 8, 2)}, ["y", "y2"], opset=17)

# ---- STFT, windows, a log-mel front end ------------------------------------------------------------------
sig = rand(2, 1000, 1)
check("STFT, a constant Hann window, onesided",
      [mk("HannWindow", ["n"], ["w"]), mk("STFT", ["s", "hop", "w"], ["y"])], {"s": sig}, ["y"],
      {"n": np.array(128, np.int64), "hop": np.array(50, np.int64)}, opset=17)
check("STFT, a run-time window, two-sided, frame_length given",
      [mk("STFT", ["s", "hop", "w", "fl"], ["y"], onesided=0)], {"s": sig, "w": np.abs(rand(64))}, ["y"],
      {"hop": np.array(33, np.int64), "fl": np.array(64, np.int64)}, opset=17)
check("STFT of a complex signal, no window", [mk("STFT", ["s", "hop", "", "fl"], ["y"], onesided=0)], {"s": rand(1, 300, 2)}, ["y"],
      {"hop": np.array(40, np.int64), "fl": np.array(30, np.int64)}, opset=17)
wins = []
for op in ("HannWindow", "HammingWindow", "BlackmanWindow"):
    for per in (0, 1):
        wins.append(mk(op, ["n"], [f"{op}{per}"], periodic=per))
check("the windows, periodic and symmetric", wins, {"z": np.zeros(1, np.float32)}, [n.output[0] for n in wins],
      {"n": np.array(31, np.int64)}, opset=17, atol=1e-6, scale_atol=False)
mel = [mk("MelWeightMatrix", ["nm", "dl", "sr", "lo", "hi"], ["m"])]
check("MelWeightMatrix (80 mels, n_fft 400, 16 kHz, 0 to 8000 Hz)", mel, {"z": np.zeros(1, np.float32)}, ["m"],
      {"nm": np.array(80, np.int64), "dl": np.array(400, np.int64), "sr": np.array(16000, np.int64),
       "lo": np.array(0, np.float32), "hi": np.array(8000, np.float32)}, opset=17, atol=1e-6, scale_atol=False)
# |STFT|^2 -> mel -> log, as a feature extractor exports it
front = [mk("HannWindow", ["n"], ["w"]), mk("STFT", ["s", "hop", "w"], ["st"]), mk("Mul", ["st", "st"], ["sq"]),
         mk("ReduceSum", ["sq", "last"], ["pw"], keepdims=0), mk("MelWeightMatrix", ["nm", "n", "sr", "lo", "hi"], ["mw"]),
         mk("MatMul", ["pw", "mw"], ["me"]), mk("Add", ["me", "eps"], ["me2"]), mk("Log", ["me2"], ["logmel"])]
check("a log-mel front end (Hann, STFT, power, MelWeightMatrix, MatMul, Log)", front, {"s": rand(1, 4000, 1)}, ["logmel"],
      {"n": np.array(400, np.int64), "hop": np.array(160, np.int64), "last": np.array([-1], np.int64), "nm": np.array(40, np.int64),
       "sr": np.array(16000, np.int64), "lo": np.array(20, np.float32), "hi": np.array(7600, np.float32), "eps": np.array(1e-6, np.float32)},
      opset=17, atol=1e-3, scale_atol=False)

# ---- AffineGrid, and a spatial transformer ---------------------------------------------------------------
theta = (np.array([[1, 0.1, 0.05], [-0.2, 0.9, 0.1]], np.float32) + rand(3, 2, 3) * 0.1).astype(np.float32)
check("AffineGrid 2-D both alignments, into GridSample",
      [mk("AffineGrid", ["t", "size"], ["g0"], align_corners=0), mk("AffineGrid", ["t", "size"], ["g1"], align_corners=1),
       mk("GridSample", ["x", "g0"], ["y"], align_corners=0)],
      {"t": theta, "x": rand(3, 4, 9, 11)}, ["g0", "g1", "y"], {"size": np.array([3, 4, 7, 10], np.int64)}, atol=1e-5, scale_atol=False)
check("AffineGrid 3-D", [mk("AffineGrid", ["t", "size"], ["g"], align_corners=1)], {"t": rand(2, 3, 4)}, ["g"],
      {"size": np.array([2, 1, 3, 4, 5], np.int64)}, atol=1e-5, scale_atol=False)
S.close()
