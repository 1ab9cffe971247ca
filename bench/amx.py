#!/usr/bin/env python3
"""amx.py — `harp bench --precision bf16` with the AMX variant (HARP_AMX=auto,
cgen_amx.c) against without (amx=off), alternated in one build: single GEMMs
(MatMul with a constant B, + bias) of M x K x N, and ResNet-50's / MobileNetV2's
1x1 convs (+ bias, ReLU) on the implicit GEMM (conv=gemm, where the AMX
variant lives) and, for reference, on the kernel harp picks without AMX
(conv=auto: the direct kernel over channel pairs for many of them).

    python3 bench/amx.py [--harp build/harp] [--rounds 3] [--repeat 200] [--only NAME,...]

Needs: onnx, numpy, a CPU with AMX-BF16.  Gives: per shape the min of
--repeat runs (best over --rounds alternating rounds) of each setting, and
the ratios off/amx (> 1: AMX faster)."""
import argparse
import json
import os
import subprocess
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GEMMS = [("g_16_256_256", 16, 256, 256), ("g_32_256_256", 32, 256, 256), ("g_64_512_512", 64, 512, 512),
         ("g_128_768_768", 128, 768, 768), ("g_256_1024_1024", 256, 1024, 1024), ("g_512_512_2048", 512, 512, 2048),
         ("g_1024_1024_1024", 1024, 1024, 1024)]
CONVS = [("r50_64_256_56", 64, 256, 56), ("r50_256_64_56", 256, 64, 56), ("r50_512_128_28", 512, 128, 28),
         ("r50_256_1024_14", 256, 1024, 14), ("r50_1024_256_14", 1024, 256, 14), ("r50_512_2048_7", 512, 2048, 7),
         ("r50_2048_512_7", 2048, 512, 7), ("mb_576_96_14", 576, 96, 14), ("mb_960_320_7", 960, 320, 7)]


def save(path, nodes, x_shape, y_shape, inits):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)], inits)
    mdl = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    mdl.ir_version = 8
    onnx.save(mdl, path)


def gemm(path, m, k, n):
    """y = x @ w + b, x [m, k], w [k, n] constant."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array((rng.standard_normal((k, n)) * k ** -0.5).astype(np.float32), "w")
    b = numpy_helper.from_array((rng.standard_normal(n) * 0.1).astype(np.float32), "b")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["t"]), helper.make_node("Add", ["t", "b"], ["y"])]
    save(path, nodes, [m, k], [m, n], [w, b])


def conv1x1(path, c, m, side):
    """y = relu(conv1x1(x) + b), x [1, c, side, side], m output channels."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array((rng.standard_normal((m, c, 1, 1)) * c ** -0.5).astype(np.float32), "w")
    b = numpy_helper.from_array((rng.standard_normal(m) * 0.1).astype(np.float32), "b")
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[1, 1]), helper.make_node("Relu", ["c"], ["y"])]
    save(path, nodes, [1, c, side, side], [1, m, side, side], [w, b])


def bench(exe, path, repeat, knobs):
    """min ms of `exe bench path --precision bf16` with the knobs."""
    args = [exe, "bench", path, "--precision", "bf16", "--repeat", str(repeat), "--warmup", "20", "--json"]
    for kv in knobs:
        args += ["--knob", kv]
    p = subprocess.run(args, capture_output=True, text=True, check=True)
    return json.loads(p.stdout.strip().splitlines()[-1])["min_ms"]


def row(exe, path, label, settings, a):
    best = {s: 1e30 for s in settings}
    for r in range(a.rounds):
        for s in settings if r % 2 == 0 else list(reversed(settings)):
            best[s] = min(best[s], bench(exe, path, a.repeat, settings[s]))
    ms = " | ".join(f"{best[s]:.3f}" for s in settings)
    first = list(settings)[0]
    ratios = " | ".join(f"{best[s] / best[first]:.2f}" for s in list(settings)[1:])
    print(f"| {label} | {ms} | {ratios} |", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--harp", default=os.path.join(ROOT, "build", "harp"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=200)
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    d = tempfile.mkdtemp(prefix="harp-amx-")
    only = [s for s in a.only.split(",") if s]
    pick = lambda name: not only or any(o in name for o in only)
    print(f"(load {os.getloadavg()[0]:.1f})")
    print("| GEMM M x K x N | amx ms | off ms | off / amx |\n|---|---|---|---|")
    for name, m, k, n in GEMMS:
        if pick(name):
            path = os.path.join(d, name + ".onnx")
            gemm(path, m, k, n)
            row(a.harp, path, f"{m}x{k}x{n}", {"amx": ["amx=auto"], "off": ["amx=off"]}, a)
    print("| 1x1 conv | amx, gemm ms | off, gemm ms | off, auto ms | off,gemm / amx | off,auto / amx |\n|---|---|---|---|---|---|")
    for name, c, m, side in CONVS:
        if pick(name):
            path = os.path.join(d, name + ".onnx")
            conv1x1(path, c, m, side)
            row(a.harp, path, f"{c}->{m} @{side}", {"amx": ["amx=auto", "conv=gemm"], "offg": ["amx=off", "conv=gemm"],
                                                    "off": ["amx=off"]}, a)
    print(f"(load at the end {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
