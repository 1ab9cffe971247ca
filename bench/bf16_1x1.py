#!/usr/bin/env python3
"""bf16_1x1.py — single 1x1 convs (+ bias, ReLU) under `harp bench --precision bf16`,
one harp build against another, alternated: which kernel a 1x1 conv's shape
should take in bf16 (the implicit GEMM or the direct kernel over channel pairs).

    python3 bench/bf16_1x1.py [--harp build/harp] [--base OTHER/harp] [--rounds 3] [--repeat 300]
                              [--only NAME,...] [--precision fp32] [--downsample]

--precision fp32 times the fp32 build instead; --downsample takes ResNet-50's
three stride-2 1x1 convs (its downsamples, stride 2 onto 28, 14 and 7 a side)
instead of the shapes below.

Needs: onnx, numpy.  Gives: per shape the best median and min of --repeat runs
of each build over --rounds alternating rounds, and base/harp of the mins (> 1:
--harp faster).  On a loaded machine the mins move far less than the medians.
Shapes: ResNet-50's bottleneck 1x1s at 56, 28, 14 and 7 pixels a side and
MobileNetV2's at 14 and 7 (input channels -> output channels @ side)."""
import argparse
import json
import os
import subprocess
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHAPES = [("r50_64_256_56", 64, 256, 56), ("r50_256_64_56", 256, 64, 56), ("r50_512_128_28", 512, 128, 28),
          ("r50_256_1024_14", 256, 1024, 14), ("r50_1024_256_14", 1024, 256, 14), ("r50_512_2048_7", 512, 2048, 7),
          ("r50_2048_512_7", 2048, 512, 7), ("mb_576_96_14", 576, 96, 14), ("mb_160_960_7", 160, 960, 7),
          ("mb_960_320_7", 960, 320, 7), ("mb_320_1280_7", 320, 1280, 7)]
DOWNSAMPLES = [("r50_s2_256_512_56", 256, 512, 56), ("r50_s2_512_1024_28", 512, 1024, 28),
               ("r50_s2_1024_2048_14", 1024, 2048, 14)]


def conv1x1(path, c, m, side, stride=1):
    """Write a model y = relu(conv1x1(x) + b), x [1, c, side, side], m output channels, stride, to path."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array((rng.standard_normal((m, c, 1, 1)) * c ** -0.5).astype(np.float32), "w")
    b = numpy_helper.from_array((rng.standard_normal(m) * 0.1).astype(np.float32), "b")
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[1, 1], strides=[stride, stride]),
             helper.make_node("Relu", ["c"], ["y"])]
    o = (side - 1) // stride + 1
    g = helper.make_graph(nodes, "conv1x1", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, side, side])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, m, o, o])], [w, b])
    mdl = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    mdl.ir_version = 8
    onnx.save(mdl, path)


def bench(exe, path, repeat, precision="bf16"):
    """(median ms, min ms) of `exe bench path --precision P`."""
    p = subprocess.run([exe, "bench", path, "--precision", precision, "--repeat", str(repeat), "--warmup", "20",
                        "--json"],
                       capture_output=True, text=True, check=True)
    d = json.loads(p.stdout.strip().splitlines()[-1])
    return d["median_ms"], d["min_ms"]


def args(doc):
    """The command line of this bench and of bf16_strided.py."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--harp", default=os.path.join(ROOT, "build", "harp"))
    ap.add_argument("--base", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=300)
    ap.add_argument("--only", default="")
    ap.add_argument("--precision", default="bf16", choices=("bf16", "fp32"))
    ap.add_argument("--downsample", action="store_true", help="ResNet-50's stride-2 1x1 convs")
    return ap.parse_args()


def compare(a, models):
    """Time each (label, path) of models on a.harp and a.base, alternated; print the table."""
    print(f"| shape | harp median / min ms | base median / min ms | base / harp (mins) |  (load {os.getloadavg()[0]:.1f})")
    print("|---|---|---|---|")
    for label, path in models:
        best = {"harp": [1e30, 1e30], "base": [1e30, 1e30]}
        for r in range(a.rounds):
            for who in ("harp", "base") if r % 2 == 0 else ("base", "harp"):
                med, mn = bench(a.harp if who == "harp" else a.base, path, a.repeat, a.precision)
                best[who] = [min(best[who][0], med), min(best[who][1], mn)]
        h, b = best["harp"], best["base"]
        print(f"| {label} | {h[0]:.3f} / {h[1]:.3f} | {b[0]:.3f} / {b[1]:.3f} | {b[1] / h[1]:.2f} |", flush=True)
    print(f"(load at the end {os.getloadavg()[0]:.1f})")


def main():
    a = args(__doc__)
    d = tempfile.mkdtemp(prefix="harp-bf16-1x1-")
    only = [s for s in a.only.split(",") if s]
    models = []
    for name, c, m, side in DOWNSAMPLES if a.downsample else SHAPES:
        if only and not any(o in name for o in only):
            continue
        path = os.path.join(d, name + ".onnx")
        conv1x1(path, c, m, side, 2 if a.downsample else 1)
        models.append((f"{c}->{m} @{side}" + ("/2" if a.downsample else ""), path))
    compare(a, models)


if __name__ == "__main__":
    main()
