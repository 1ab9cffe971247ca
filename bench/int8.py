#!/usr/bin/env python3
"""int8.py — QDQ models from onnxruntime's quantize_static through harp, onnxruntime and OpenVINO.

    python3 bench/int8.py [--harp build/harp] [--base OTHER/harp] [--rounds 3] [--repeat 10] [--only resnet50,mobilenetv2,bert_layer]

Each fp32 model harp already runs — ResNet-50 (the onnx package's light
model with random weights in place of its ConstantOfShape fills, converted to
opset 13), MobileNetV2 1.0 and one BERT-base encoder layer (sequence 128;
tests/py/onnx_models.py with bench/e2e.py's weights) — goes through
onnxruntime's quant_pre_process (batch norms folded) and quantize_static (QDQ,
per-channel, uint8 activations, int8 weights, 4 random calibration inputs).

Checked: harp's output on a random input against onnxruntime's int8 run
(its QDQ fusions: QLinearConv, QGemm, ...) and against onnxruntime with graph
optimizations off (the QDQ graph as written: DQ, fp32 op, Q) — the fraction of
elements within one step of the output's scale, and the largest difference
in steps; the same between onnxruntime's two runs.

Timed in interleaved rounds at 2 threads (each round a median of --repeat runs):
  harp      harp bench QDQ.onnx
  harpbf    the same with HARP_INT8=off: its convs on the bf16 template only,
            not the int8 VNNI kernel (the figure before contract_q8.c)
  noamx     (on a CPU with AMX-INT8) the same with HARP_AMX=off: the int8 kernels
            without their AMX variant (cgen_qamx.c), vpdpbusd only
  ort       onnxruntime on QDQ.onnx (intra_op_num_threads=2)
  ov        OpenVINO on QDQ.onnx at its default precision (INFERENCE_NUM_THREADS=2, one stream)
  base      with --base: that harp binary on QDQ.onnx (another build: before / after a change)
  harp32    harp bench on the fp32 model as built (before quant_pre_process: harp
            runs the pre-processed BERT layer 5x slower, its attention unfused)
The medians of the rounds are printed, with harp's speed-up over the faster peer.
"""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "py"))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "realmodels"))
import e2e  # noqa: E402
import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnx_models as om  # noqa: E402
import onnxruntime as ort  # noqa: E402
from onnx import numpy_helper as nh  # noqa: E402

LIGHT_DIR = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")


def resnet50():
    import fetch
    from onnx import version_converter
    m = fetch.light_random(onnx.load(os.path.join(LIGHT_DIR, "light_resnet50.onnx")), 0)
    x = [i for i in m.graph.input if i.name not in {t.name for t in m.graph.initializer}][0]
    for n in m.graph.node:  # the input as "data": harp's --input files are named after it
        n.input[:] = ["data" if i == x.name else i for i in n.input]
    x.name = "data"
    return version_converter.convert_version(m, 13)


def mobilenetv2():
    return om.mobilenetv2(e2e.mobilenetv2_weights(), e2e.mobilenetv2_blocks())


def bert_layer():
    c = e2e.case_bert(1, 128, 768, 12, 3072)
    return om.bert({k: v for k, (kind, v) in c["tensors"].items() if kind == "param"}, 1, 128, 768, 12, 3072, gelu_op=True)


MODELS = {"resnet50": resnet50, "mobilenetv2": mobilenetv2, "bert_layer": bert_layer}


def input_of(m):
    inits = {i.name for i in m.graph.initializer}
    x = [i for i in m.graph.input if i.name not in inits][0]
    return x.name, [d.dim_value or 1 for d in x.type.tensor_type.shape.dim]


def quantize(name, d):
    """The fp32 model as built and its QDQ file, under d."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process
    raw, pre, qdq = (os.path.join(d, f"{name}_{k}.onnx") for k in ("raw", "fp32", "qdq"))
    if os.path.exists(qdq):
        return raw, qdq
    m = MODELS[name]()
    onnx.save(m, raw)
    quant_pre_process(raw, pre, skip_symbolic_shape=True)
    xname, shape = input_of(m)
    rng = np.random.default_rng(1)

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter([{xname: rng.standard_normal(shape).astype(np.float32)} for _ in range(4)])

        def get_next(self):
            return next(self.it, None)

    quantize_static(pre, qdq + ".tmp", Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    os.replace(qdq + ".tmp", qdq)
    return raw, qdq


def ort_session(path, optimize=True):
    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads = e2e.THREADS, 1
    so.log_severity_level = 3
    if not optimize:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def output_step(path):
    """The scale of the DequantizeLinear that makes the graph's first output."""
    m = onnx.load(path)
    inits = {i.name: i for i in m.graph.initializer}
    last = [n for n in m.graph.node if n.output[0] == m.graph.output[0].name][0]
    return float(nh.to_array(inits[last.input[1]])) if last.op_type == "DequantizeLinear" else None


def agreement(a, b, step):
    e = np.abs(a.astype(np.float64) - b.astype(np.float64)) / step
    return float(np.mean(e <= 1 + 1e-3)), float(e.max())


def check(h, name, qdq, xname, x):
    step = output_step(qdq)
    want = ort_session(qdq).run(None, {xname: x})[0]
    lit = ort_session(qdq, optimize=False).run(None, {xname: x})[0]
    got = h.run(qdq, {}, {xname: ("input", x)}, onnx.load(qdq).graph.output[0].name)
    for what, ref in (("ort int8", want), ("ort QDQ as written", lit)):
        frac, worst = agreement(got, ref, step)
        print(f"  {name}: harp vs {what}: {frac:.4%} within one step ({step:.4g}), max {worst:.1f} steps")
    frac, worst = agreement(lit, want, step)
    print(f"  {name}: ort as written vs ort int8: {frac:.4%} within one step, max {worst:.1f} steps", flush=True)


def ov_runner(path, xname, x):
    try:
        import openvino as ov
    except ImportError:
        return None
    cm = ov.Core().compile_model(path, "CPU", {"INFERENCE_NUM_THREADS": str(e2e.THREADS), "NUM_STREAMS": "1"})
    req = cm.create_infer_request()
    return lambda: req.infer({xname: x})


def main():
    ap = e2e.bench_args(repeat=10, only=",".join(MODELS), json_out=False)
    ap.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "harp-int8-models"), help="where the quantized models are kept")
    ap.add_argument("--base", default="", help="another harp binary timed interleaved on the QDQ model (a build before a change)")
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    h = e2e.Harp(a.harp, a.repeat)
    hb = e2e.Harp(a.base, a.repeat) if a.base else None
    rows = []
    for name in a.only.split(","):
        fp32, qdq = quantize(name, a.dir)
        xname, shape = input_of(onnx.load(qdq))
        x = np.random.default_rng(2).standard_normal(shape).astype(np.float32)
        check(h, name, qdq, xname, x)
        s = ort_session(qdq)
        ov = ov_runner(qdq, xname, x)
        ins = {xname: ("input", x)}
        t = {"harp": [], "harpbf": [], "noamx": [], "ort": [], "ov": [], "harp32": [], "base": []}
        amx = "amx_int8" in open("/proc/cpuinfo").read()
        for _ in range(a.rounds):
            t["harp"].append(h.bench(qdq, {}, ins)["median_ms"])
            if hb:
                t["base"].append(hb.bench(qdq, {}, ins)["median_ms"])
            t["harpbf"].append(h.bench(qdq, {}, ins, env={"HARP_INT8": "off"})["median_ms"])
            if amx:
                t["noamx"].append(h.bench(qdq, {}, ins, env={"HARP_AMX": "off"})["median_ms"])
            t["ort"].append(e2e.median_ms(lambda: s.run(None, {xname: x}), a.repeat))
            if ov:
                t["ov"].append(e2e.median_ms(ov, a.repeat))
            t["harp32"].append(h.bench(fp32, {}, ins)["median_ms"])
        med = {k: float(np.median(v)) if v else float("nan") for k, v in t.items()}
        peer = min(med["ort"], med["ov"]) if ov else med["ort"]
        rows.append((name, med, peer))
        print(f"{name:12} harp {med['harp']:8.2f}  harp bf16 {med['harpbf']:8.2f}  ort {med['ort']:8.2f}  ov {med['ov']:8.2f}  harp fp32 {med['harp32']:8.2f} ms   "
              f"faster peer / harp {peer / med['harp']:.2f}x   harp fp32 / harp int8 {med['harp32'] / med['harp']:.2f}x"
              + (f"   base / harp {med['base'] / med['harp']:.2f}x" if hb else "")
              + (f"   noamx {med['noamx']:.2f} ms, noamx / harp {med['noamx'] / med['harp']:.2f}x" if amx else ""), flush=True)
        for k, v in t.items():
            if v:
                print(f"  {k}: " + " ".join(f"{y:.2f}" for y in v))
    print(f"\n{'model':12} {'harp ms':>8} {'bf16 ms':>8} {'ort ms':>8} {'ov ms':>8} {'fp32 ms':>8} {'peer/harp':>9} {'fp32/int8':>9}")
    for name, med, peer in rows:
        print(f"{name:12} {med['harp']:8.2f} {med['harpbf']:8.2f} {med['ort']:8.2f} {med['ov']:8.2f} {med['harp32']:8.2f} "
              f"{peer / med['harp']:9.2f} {med['harp32'] / med['harp']:9.2f}")


if __name__ == "__main__":
    main()
