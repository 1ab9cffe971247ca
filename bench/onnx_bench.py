#!/usr/bin/env python3
"""onnx_bench.py — one ONNX file through harp and onnxruntime, beside the .harp twin.

    python3 bench/onnx_bench.py [--harp build/harp] [--rounds 3] [--repeat 20] [--only resnet18,bert]

For each model (the graphs of tests/py/onnx_models.py with bench/e2e.py's
weights) the same .onnx file is timed three ways in interleaved rounds:
  onnx   harp bench MODEL.onnx (weights from its initializers)
  harp   harp bench bench/models/<twin>.harp --param ... (the same weights)
  ort    onnxruntime on MODEL.onnx, intra_op_num_threads=2
and each contender's best median is printed with the ratios onnx/harp and
ort/onnx.  The outputs of harp run MODEL.onnx and of onnxruntime are compared.
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
import onnxruntime as ort  # noqa: E402


def resnet18():
    t = e2e.resnet18_weights()
    return om.resnet18(t), "bench/models/resnet18.harp", {}, {"x": e2e.rand(1, 3, 224, 224)}, t


def bert(layers=2, S=128, E=768, H=12, F=3072):
    c = e2e.case_bert(layers, S, E, H, F)
    t = {k: v for k, (kind, v) in c["tensors"].items() if kind == "param"}
    return om.bert(t, layers, S, E, H, F, gelu_op=True), c["model"], c["syms"], {"x": c["tensors"]["x"][1]}, t


MODELS = {"resnet18": resnet18, "bert": bert}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--harp", default=os.path.join(HERE, "..", "build", "harp"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--only", default=",".join(MODELS))
    a = ap.parse_args()
    h = e2e.Harp(a.harp, a.repeat)
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
