#!/usr/bin/env python3
"""test_shapeset_qconv.py — an int8 QDQ conv (Conv(DQ(Q(x)), DQ(w)) + bias,
Relu, Q -> DQ) as one ShapeSet object (issue 25), through
harp.InferenceSession(model, shapesets=...), against onnxruntime's int8 run
at three bindings each:
  - over the batch (x [batch, C, 14, 14]): the conv's bf16 operands made the
    run-time kernel refuse it and the template print its batch (the widen's
    element count, cgen_dconv.c), a compile per binding; now one image's
    template runs per image (contract_conv_img.c, any 16/32-bit dtype);
  - over H, W (x [1, C, H, W]): the run-time direct kernel on the widened
    bf16 operands, fp32 multiply-adds (contract_c.c's cc_emit_conv);
  - both at once (x [batch, 8, H, W]);
with 8 input channels (the template widens, fp32 FMAs) and 16 (bf16
multiplication in a specialised object); over the batch with the int8
(vpdpbusd) kernel forced (`int8=force`: these convs are too small for it to
pay), its loop over the images read at run time (the package's model.c
says so); and tests/models/small_cnn.onnx (Conv 3x3 + Relu, MaxPool, Gemm)
through onnxruntime's quantize_static over its batch.  The rule is issue 28's
(test_onnx_quant_qdq.py): within one output step of onnxruntime on >= 99.9%
of the elements; and a binding one short (the reference run one image, row
or column short, zero-padded back) must fail it, so the check sees a kernel
that runs the wrong sizes.  Each model must be one object and one C compile
for its three bindings.  The int8 (vpdpbusd) kernel itself stays off in a
ShapeSet object (contract_q8.c's cc_q8_act): its N, the pixels, is printed."""
import os
import re
import subprocess
import tempfile

from harp_py import Suite, harp, np, ort

s = Suite("shapeset_qconv")
if ort is None:
    print("onnxruntime not installed: skipped")
    raise SystemExit(77)
import onnx  # noqa: E402
from harp_test import HARP, MODELS  # noqa: E402
from onnx import TensorProto as T  # noqa: E402
from onnx import helper as h  # noqa: E402
from onnx import numpy_helper as nh  # noqa: E402

os.environ["HARP_TIER0"] = "off"  # the compiled object's numbers from its first run (harp_test.compiled_only)
rng = np.random.default_rng(25)
SY = 0.04  # the output's quantization step


def qconv(shape, ic, oc):
    """The QDQ conv 3x3 (pads 1) of x `shape` (ic channels) to oc channels:
    uint8 activations (zero point 128), per-channel int8 weights, int32 bias,
    Relu, the output requantized at step SY (zero point 0) and dequantized."""
    w = rng.integers(-127, 128, (oc, ic, 3, 3)).astype(np.int8)
    ws = (rng.random(oc) * 0.01 + 0.002).astype(np.float32)
    sx = np.float32(0.05)
    inits = [nh.from_array(np.array(sx), "sx"), nh.from_array(np.array(128, np.uint8), "zx"), nh.from_array(w, "w"),
             nh.from_array(ws, "ws"), nh.from_array(np.zeros(oc, np.int8), "wz"),
             nh.from_array(rng.integers(-3000, 3000, oc).astype(np.int32), "b"), nh.from_array(ws * sx, "bs"),
             nh.from_array(np.zeros(oc, np.int32), "bz"), nh.from_array(np.array(SY, np.float32), "sy"),
             nh.from_array(np.array(0, np.uint8), "zy")]
    nodes = [h.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"]), h.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"]),
             h.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"], axis=0),
             h.make_node("DequantizeLinear", ["b", "bs", "bz"], ["bd"], axis=0),
             h.make_node("Conv", ["xd", "wd", "bd"], ["c"], pads=[1, 1, 1, 1]), h.make_node("Relu", ["c"], ["r"]),
             h.make_node("QuantizeLinear", ["r", "sy", "zy"], ["rq"]), h.make_node("DequantizeLinear", ["rq", "sy", "zy"], ["y"])]
    g = h.make_graph(nodes, "qconv", [h.make_tensor_value_info("x", T.FLOAT, shape)], [h.make_tensor_value_info("y", T.FLOAT, None)],
                     initializer=inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
    m.ir_version = 8
    return m


def small_cnn_qdq():
    """tests/models/small_cnn.onnx (x [2, 3, 8, 8]) through quantize_static
    (quant_models.quantize_random: QDQ, per-channel, random calibration), its
    batch then a dim_param; the path and its output's step."""
    from quant_models import out_step, quantize_random
    d = tempfile.mkdtemp()
    qdq = quantize_random(os.path.join(MODELS, "small_cnn.onnx"), (2, 3, 8, 8), rng, n=4, qdq=os.path.join(d, "q.onnx"))
    m = onnx.load(qdq)
    for v in (m.graph.input[0], m.graph.output[0]):
        v.type.tensor_type.shape.dim[0].dim_param = "batch"
    onnx.save(m, qdq)
    return qdq, out_step(m, "y")


def within(got, want, step=SY):
    """The fraction of got within one output step of want (issue 28's rule: >= 99.9%)."""
    if got.shape != want.shape:
        return 0.0
    return float(np.mean(np.abs(got.astype(np.float64) - want) / step <= 1.0 + 1e-3))


def one_short(ref, x, vary):
    """onnxruntime's output at x cut one short along its first varying axis
    (0 batch, 2 H, 3 W), zero-padded back to the full binding's shape."""
    ax = vary[0]
    cut = ref.run(None, {"x": np.take(x, range(x.shape[ax] - 1), axis=ax)})[0]
    pad = [(0, 0)] * cut.ndim
    pad[ax] = (0, 1)
    return np.pad(cut, pad)


# (name, x's shape, input channels, the box, three bindings as (N, H, W))
CASES = [("batch_c8", ["batch", 8, 14, 14], 8, {"batch": (1, 4)}, [(4, 14, 14), (1, 14, 14), (3, 14, 14)]),
         ("batch_c16", ["batch", 16, 14, 14], 16, {"batch": (1, 4)}, [(2, 14, 14), (4, 14, 14), (1, 14, 14)]),
         ("hw_c8", [1, 8, "H", "W"], 8, {"H": (7, 14), "W": (7, 14)}, [(1, 14, 14), (1, 7, 9), (1, 10, 13)]),
         ("hw_c16", [1, 16, "H", "W"], 16, {"H": (7, 14), "W": (7, 14)}, [(1, 12, 7), (1, 14, 14), (1, 9, 11)]),
         ("nhw_c8", ["batch", 8, "H", "W"], 8, {"batch": (1, 3), "H": (7, 12), "W": (7, 12)},
          [(3, 12, 12), (1, 7, 10), (2, 11, 8)])]
CASES.append(("small_cnn", ["batch", 3, 8, 8], 3, {"batch": (1, 4)}, [(4, 8, 8), (1, 8, 8), (3, 8, 8)]))
CASES += [("batch_c8_int8", ["batch", 8, 14, 14], 8, {"batch": (1, 4)}, [(4, 14, 14), (2, 14, 14), (1, 14, 14)]),
          ("batch_c16_int8", ["batch", 16, 14, 14], 16, {"batch": (1, 4)}, [(1, 14, 14), (3, 14, 14), (4, 14, 14)])]


def int8_package(path):
    """`harp compile --shapeset batch=1..4 --knob int8=force` of model path:
    whether its model.c holds the int8 kernel with its loop over the
    binding's images (hp_sym_[0]); the compile's output."""
    pkg = os.path.join(tempfile.mkdtemp(), "pkg")
    p = subprocess.run([HARP, "compile", path, "--target", "cpu", "--shapeset", "batch=1..4", "--knob", "int8=force", "-o", pkg],
                       capture_output=True, text=True)
    src = open(os.path.join(pkg, "model.c")).read() if p.returncode == 0 else ""
    ok = "int8 GEMM" in src and re.search(r"for \(long n = 0; n < \(\(hp_sym_\[0\][^;]*&& !rc; n\+\+\)", src) is not None
    return ok, (p.stdout + p.stderr)[-400:]


for name, shape, ic, box, bindings in CASES:
    path, step = os.path.join(tempfile.mkdtemp(), name + ".onnx"), SY
    if name == "small_cnn":
        path, step = small_cnn_qdq()
    else:
        onnx.save(qconv(shape, ic, 2 * ic), path)
    opts = {"cache_dir": tempfile.mkdtemp(), "progress": False}
    if name.endswith("_int8"):
        opts["knobs"] = {"int8": "force"}
        ok, msg = int8_package(path)
        s.check(f"{name}: the package's int8 kernel loops over the binding's images", ok, msg)
    ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    sess = harp.InferenceSession(path, opts, shapesets=box)
    vary = [i for i, d in enumerate(shape) if isinstance(d, str)]
    for n, hh, ww in bindings:
        x = (rng.standard_normal((n, ic, hh, ww)) * 2).astype(np.float32)
        y = sess.run(None, {"x": x})[0]
        want = ref.run(None, {"x": x})[0]
        frac = within(y, want, step)
        s.check(f"{name} {n}x{hh}x{ww}: within one step of onnxruntime's int8 run on >= 99.9%", frac >= 0.999,
                f"{frac:.4%}, shape {y.shape} vs {want.shape}")
        short = within(y, one_short(ref, x, vary), step)
        s.check(f"{name} {n}x{hh}x{ww}: a binding one short fails that rule", short < 0.999, f"{short:.4%}")
    s.check(f"{name}: one object, one C compile for {len(bindings)} bindings", sess.shapeset_objects() == (1, 1, None),
            str(sess.shapeset_objects()))
s.close()
