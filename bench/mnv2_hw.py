#!/usr/bin/env python3
"""mnv2_hw.py — writes MobileNetV2 as ONNX with its input's height and width
the dim_params H, W (issue 25's ShapeSet over the image size):

    python3 bench/mnv2_hw.py [--out /tmp/mnv2_hw.onnx]

The graph is tests/py/onnx_models.py's mobilenetv2 (bench/models/mobilenetv2.harp,
batch norm folded) with bench/e2e.py's weights (its seeded generator, so every
run writes the same file).  Then, e.g.:

    harp bench /tmp/mnv2_hw.onnx --shapeset H=160..320 --shapeset W=160..320 \\
        --bind H=160,W=160 --bind H=224,W=224 --bind H=320,W=320 --json"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import e2e  # noqa: E402  (the weights and the ONNX graph builders)


def write(path):
    """Writes the model to path and returns path."""
    m = e2e.om.mobilenetv2(e2e.mobilenetv2_weights(), e2e.om.mobilenetv2_blocks())
    dims = m.graph.input[0].type.tensor_type.shape.dim
    dims[2].dim_param, dims[3].dim_param = "H", "W"
    with open(path, "wb") as f:
        f.write(m.SerializeToString())
    return path


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="/tmp/mnv2_hw.onnx")
    print(write(ap.parse_args().out))
