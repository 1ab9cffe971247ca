#!/usr/bin/env python3
"""dwsmall.py — depthwise convolutions on small planes alone: harp against OpenVINO.

    python3 bench/dwsmall.py [--harp build/harp] [--base OTHER_HARP] [--batch 1] [--rounds 3] [--repeat 200] [--only NAME,...]

Layers (one Conv with group = channels, bias, then Clip(0, 6), batch 1, as in
MobileNetV2; --batch images): 7x7x960 3x3 stride 1, 14x14x576 3x3 stride 1 and stride 2 (to 7x7).
Contenders at 2 threads in --rounds interleaved rounds (each one's best median of
--repeat runs kept): harp fp32 and `--precision bf16`, OpenVINO with its defaults
(bf16 on a CPU with AVX512_BF16) and with INFERENCE_PRECISION_HINT=f32, and with
--base a second harp binary (e.g. main's build: before and after) in fp32 and bf16.
The ratio OV/harp > 1 means harp is faster.  Needs onnx, openvino.
"""
import os
import platform
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bf16 import THREADS, Harp  # noqa: E402
from e2e import bench_args, median_ms  # noqa: E402

LAYERS = {"7x7x960 s1": (960, 7, 1), "14x14x576 s1": (576, 14, 1), "14x14x576 s2": (576, 14, 2)}


def layer(d, name, c, hw, stride, n=1):
    """A depthwise 3x3 conv (pad 1) + bias + Clip(0, 6) on an n x c x hw x hw input, saved under d."""
    rng = np.random.default_rng(1)
    w = numpy_helper.from_array((rng.standard_normal((c, 1, 3, 3)) / 3).astype(np.float32), "w")
    b = numpy_helper.from_array((rng.standard_normal(c) * 0.1).astype(np.float32), "b")
    lo = numpy_helper.from_array(np.array(0, np.float32), "lo")
    hi = numpy_helper.from_array(np.array(6, np.float32), "hi")
    oh = (hw + 2 - 3) // stride + 1
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["t"], group=c, kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                              strides=[stride, stride]),
             helper.make_node("Clip", ["t", "lo", "hi"], ["y"])]
    g = helper.make_graph(nodes, "dw", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, c, hw, hw])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n, c, oh, oh])], [w, b, lo, hi])
    path = os.path.join(d, name.replace(" ", "_") + ".onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def main():
    ap = bench_args(repeat=200, json_out=False)
    ap.add_argument("--base", default="")
    ap.add_argument("--batch", type=int, default=1)
    a = ap.parse_args()
    import openvino as ov
    core = ov.Core()
    d = tempfile.mkdtemp(prefix="harp-dwsmall-")
    harps = {"harp": Harp(a.harp, a.repeat, d)}
    if a.base:
        harps["base"] = Harp(a.base, a.repeat, d)
    only = [s for s in a.only.split(",") if s]
    print(f"# dwsmall.py, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {platform.processor() or platform.machine()}, "
          f"{THREADS} threads, batch {a.batch}, load {os.getloadavg()[0]:.1f}; openvino {ov.__version__}; ms per layer, best of {a.rounds} rounds")
    cols = [f"{h} {p}" for h in harps for p in ("fp32", "bf16")] + ["ov default", "ov f32"]
    print("| layer | " + " | ".join(cols) + " | OV default / harp bf16 | OV f32 / harp fp32 |")
    print("|---|" + "---|" * (len(cols) + 2))
    for name, (c, hw, st) in LAYERS.items():
        if only and not any(o in name for o in only):
            continue
        path = layer(d, name, c, hw, st, a.batch)
        x = np.random.default_rng(0).standard_normal((a.batch, c, hw, hw)).astype(np.float32)
        reqs = {}
        for k, cfg in (("ov default", {}), ("ov f32", {"INFERENCE_PRECISION_HINT": "f32"})):
            cm = core.compile_model(core.read_model(path), "CPU",
                                    dict(cfg, INFERENCE_NUM_THREADS=THREADS, PERFORMANCE_HINT="LATENCY"))
            reqs[k] = cm.create_infer_request()
        best = {}
        for _ in range(a.rounds):
            for col in cols:
                if col.startswith("ov"):
                    r = reqs[col]
                    ms = median_ms(lambda: r.infer([x]), a.repeat)
                else:
                    who, prec = col.split()
                    ms = harps[who].bench(path, {"x": x}, prec)["median_ms"]
                best[col] = min(best.get(col, float("inf")), ms)
        print(f"| {name} | " + " | ".join(f"{best[k]:.4f}" for k in cols) +
              f" | {best['ov default'] / best['harp bf16']:.2f} | {best['ov f32'] / best['harp fp32']:.2f} |", flush=True)


if __name__ == "__main__":
    main()
