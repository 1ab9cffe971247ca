#!/usr/bin/env python3
"""bf16_strided.py — single strided convs (+ bias, ReLU) under `harp bench --precision bf16`,
one harp build against another, alternated: the convs whose AMX variant gathered B by
im2col before cgen_amx_conv.c read them in place from phase planes (ResNet-50's 1x1
stride-2 projections, its 3x3/2 at 56 and its 7x7/2 stem).

    python3 bench/bf16_strided.py [--harp build/harp] --base OTHER/harp [--rounds 3] [--repeat 300]
                                  [--only NAME,...]

Needs: onnx, numpy.  Gives: per shape the best median and min of --repeat runs of
each build over --rounds alternating rounds, and base/harp of the mins (> 1: --harp
faster).  Shapes: name, input channels, output channels, input side, window, stride, pad."""
import os
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bf16_1x1 import args, compare  # noqa: E402  (the command line; the alternated timing and its table)

SHAPES = [("r50_proj_256_512_56", 256, 512, 56, 1, 2, 0), ("r50_proj_512_1024_28", 512, 1024, 28, 1, 2, 0),
          ("r50_proj_1024_2048_14", 1024, 2048, 14, 1, 2, 0), ("r50_3x3s2_128_56", 128, 128, 56, 3, 2, 1),
          ("r50_stem_3_64_224", 3, 64, 224, 7, 2, 3)]


def conv(path, c, m, side, k, s, pad):
    """Write y = relu(conv(x) + b), x [1, c, side, side], m output channels, k x k window, stride s, pad."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array((rng.standard_normal((m, c, k, k)) * (c * k * k) ** -0.5).astype(np.float32), "w")
    b = numpy_helper.from_array((rng.standard_normal(m) * 0.1).astype(np.float32), "b")
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[k, k], strides=[s, s], pads=[pad] * 4),
             helper.make_node("Relu", ["c"], ["y"])]
    g = helper.make_graph(nodes, "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, side, side])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w, b])
    mdl = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    mdl.ir_version = 8
    onnx.save(mdl, path)


def main():
    a = args(__doc__)
    d = tempfile.mkdtemp(prefix="harp-bf16-strided-")
    only = [s for s in a.only.split(",") if s]
    models = []
    for name, c, m, side, k, s, pad in SHAPES:
        if only and not any(o in name for o in only):
            continue
        path = os.path.join(d, name + ".onnx")
        conv(path, c, m, side, k, s, pad)
        models.append((f"{name} {c}->{m} @{side} {k}x{k}/{s}", path))
    compare(a, models)


if __name__ == "__main__":
    main()
