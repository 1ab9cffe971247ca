#!/usr/bin/env python3
"""onnx_bench.py — one ONNX file through harp and onnxruntime, beside the .harp twin.

    python3 bench/onnx_bench.py [--harp build/harp] [--rounds 3] [--repeat 20] [--only resnet18,bert]
    python3 bench/onnx_bench.py --light [--only light_resnet50,...]

For each model (the graphs of tests/py/onnx_models.py with bench/e2e.py's
weights) the same .onnx file is timed three ways in interleaved rounds:
  onnx   harp bench MODEL.onnx (weights from its initializers)
  harp   harp bench bench/models/<twin>.harp --param ... (the same weights)
  ort    onnxruntime on MODEL.onnx, intra_op_num_threads=2
and each contender's best median is printed with the ratios onnx/harp and
ort/onnx.  The outputs of harp run MODEL.onnx and of onnxruntime are compared.

--light times the onnx package's backend test models (onnx/backend/test/data/
light: ResNet-50, DenseNet-121, SqueezeNet, ShuffleNet, Inception v1, VGG-19)
against onnxruntime alone.  Their weights are ConstantOfShape fills of 0.02;
here each fill is replaced by a random initializer of its shape (He-scaled;
rank-1 ones in [0.5, 1.5], so batch-norm variances stay positive), which
keeps the graph and makes the output comparison mean something; a final
Softmax is dropped (the logits are compared, and timed): tests/realmodels/
fetch.py's light_random, which makes the corpus's light_* models.
"""
import argparse
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "py"))
import e2e  # noqa: E402
import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnx_models as om  # noqa: E402
sys.path.insert(0, os.path.join(HERE, "..", "tests", "realmodels"))
import fetch as realmodels_fetch  # noqa: E402
import onnxruntime as ort  # noqa: E402


def resnet18():
    t = e2e.resnet18_weights(e2e.rand)
    return om.resnet18(t), "bench/models/resnet18.harp", {}, {"x": e2e.rand(1, 3, 224, 224)}, t


def bert(layers=2, S=128, E=768, H=12, F=3072):
    c = e2e.case_bert(layers, S, E, H, F)
    t = {k: v for k, (kind, v) in c["tensors"].items() if kind == "param"}
    return om.bert(t, layers, S, E, H, F, gelu_op=True), c["model"], c["syms"], {"x": c["tensors"]["x"][1]}, t


MODELS = {"resnet18": resnet18, "bert": bert}
LIGHT = ["light_resnet50", "light_densenet121", "light_squeezenet", "light_shufflenet", "light_inception_v1", "light_vgg19"]
LIGHT_DIR = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")


def light(name, seed=0):
    """The light model with random weights in place of its ConstantOfShape
    fills and its final Softmax dropped (tests/realmodels/fetch.py's
    light_random), its input renamed "data", and a random input."""
    m = realmodels_fetch.light_random(onnx.load(os.path.join(LIGHT_DIR, name + ".onnx")), seed)
    g = m.graph
    inits = {i.name for i in g.initializer}
    x = [i for i in g.input if i.name not in inits][0]
    for n in g.node:  # the input as "data": harp bench's --input files are named after it
        n.input[:] = ["data" if i == x.name else i for i in n.input]
    x.name = "data"
    shape = [d.dim_value or 1 for d in x.type.tensor_type.shape.dim]
    return m, x.name, np.random.default_rng(seed + 1).random(shape, dtype=np.float32)


def bench_light(a, h):
    print(f"{'model':20} {'harp ms':>9} {'ort ms':>9} {'ort/harp':>9} {'best':>9} {'best':>9} {'ort/harp':>9}  max rel err"
          f"  (medians, then minima, of {a.rounds} interleaved rounds; each round a median of --repeat runs)")
    for name in a.only.split(","):
        m, xname, x = light(name)
        path = os.path.join(tempfile.mkdtemp(prefix="harp-onnx-"), name + ".onnx")
        onnx.save(m, path)
        so = ort.SessionOptions()
        so.intra_op_num_threads, so.inter_op_num_threads = e2e.THREADS, 1
        so.log_severity_level = 3
        s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        want = s.run(None, {xname: x})[0]
        d = tempfile.mkdtemp(dir=h.dir)
        np.save(os.path.join(d, "x.npy"), x)
        p = subprocess.run([h.exe, "run", path, "--out", d, "--input", f"{xname}={os.path.join(d, 'x.npy')}"],
                           capture_output=True, text=True)
        if p.returncode:
            print(f"{name:20} harp run failed: {p.stderr.strip()[-300:]}")
            continue
        got = np.load(os.path.join(d, [f for f in os.listdir(d) if f != "x.npy"][0]))
        err = float(np.max(np.abs(got - want)) / (np.max(np.abs(want)) + 1e-30))
        ins = {xname: ("input", x)}
        t = {"harp": [], "ort": []}
        for _ in range(a.rounds):
            t["harp"].append(h.bench(path, {}, ins)["median_ms"])
            t["ort"].append(e2e.median_ms(lambda: s.run(None, {xname: x}), a.repeat))
        med = {k: float(np.median(v)) for k, v in t.items()}
        best = {k: float(np.min(v)) for k, v in t.items()}
        print(f"{name:20} {med['harp']:9.2f} {med['ort']:9.2f} {med['ort'] / med['harp']:9.3f} "
              f"{best['harp']:9.2f} {best['ort']:9.2f} {best['ort'] / best['harp']:9.3f}  {err:.2g}", flush=True)
        for k, v in t.items():
            print(f"  {k}: " + " ".join(f"{x:.2f}" for x in v))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--harp", default=os.path.join(HERE, "..", "build", "harp"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--only", default=None)
    ap.add_argument("--light", action="store_true", help="the onnx package's light models against onnxruntime")
    a = ap.parse_args()
    h = e2e.Harp(a.harp, a.repeat)
    if a.light:
        a.only = a.only or ",".join(LIGHT)
        return bench_light(a, h)
    a.only = a.only or ",".join(MODELS)
    print(f"{'model':10} {'onnx ms':>9} {'harp ms':>9} {'ort ms':>9} {'onnx/harp':>10} {'ort/onnx':>9}  max rel err")
    for name in a.only.split(","):
        m, twin, syms, inputs, weights = MODELS[name]()
        path = os.path.join(tempfile.mkdtemp(prefix="harp-onnx-"), name + ".onnx")
        onnx.save(m, path)
        so = ort.SessionOptions()
        so.intra_op_num_threads, so.inter_op_num_threads = e2e.THREADS, 1
        s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        ins = {k: ("input", v) for k, v in inputs.items()}
        out = s.run(None, inputs)[0]
        got = h.run(path, {}, ins, "y")
        err = float(np.max(np.abs(got - out)) / (np.max(np.abs(out)) + 1e-30))
        best = {"onnx": [], "harp": [], "ort": []}
        for _ in range(a.rounds):
            best["onnx"].append(h.bench(path, {}, ins)["median_ms"])
            best["harp"].append(h.bench(twin, syms, {**ins, **{k: ("param", v) for k, v in weights.items()}})["median_ms"])
            best["ort"].append(e2e.median_ms(lambda: s.run(None, inputs), a.repeat))
        b = {k: min(v) for k, v in best.items()}
        print(f"{name:10} {b['onnx']:9.3f} {b['harp']:9.3f} {b['ort']:9.3f} {b['onnx'] / b['harp']:10.3f} {b['ort'] / b['onnx']:9.3f}"
              f"  {err:.2g}", flush=True)
        for k, v in best.items():
            print(f"  {k}: " + " ".join(f"{x:.3f}" for x in v))


if __name__ == "__main__":
    main()
