#!/usr/bin/env python3
"""shapeset_gather.py — the C compiles and the time to results of three of
tests/py/test_shapeset_sizes.py's models under `harp run --shapeset`, one
process per binding, each binary on a fresh private cache, HARP_CPU_CALIB=off
(bench/shapeset_range.py's `once`), binaries interleaved, --rounds rounds:
  gmap_after_cut      a fill of w + 1 rows above x [w, 4], then x again, upsampled x2
                      along rows (a gather map), w=2..40 at w = 5, 40, 2
  gather_table_moves  x [3, w, 2] gathered along axis 1 and along axis 0, w=2..40 at w = 5, 40, 2
  ceil_round_fill     ConstantOfShape [ceil(w / 3), round(w / 3)], w=2..4100 at w = 7, 4100, 2

    python3 bench/shapeset_gather.py --harp build/harp [--base /tmp/base11/build/harp] [--rounds 2]

Printed per round, case and binary: the C compiles its three runs needed,
their wall time and whether each was served by one object for the box."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "py"))
import onnx  # noqa: E402
from onnx import TensorProto  # noqa: E402
from onnx_models import init, mk, model, vi  # noqa: E402
from shapeset_range import once, setup  # noqa: E402


def ints(name, v):
    return init(name, np.array(v, np.int64))


def cases():
    """{name: (model, box, shapes)}: the test's m12, m13 and m6."""
    neg2 = onnx.helper.make_tensor("v", TensorProto.FLOAT, [1], [-2.0])
    fill = onnx.helper.make_tensor("v", TensorProto.FLOAT, [1], [1.5])
    gmap = model([mk("Shape", ["x"], ["s"]), mk("Gather", ["s", "zero"], ["w"]), mk("Unsqueeze", ["w", "ax0"], ["w1"]),
                  mk("Add", ["w1", "one1"], ["wp"]), mk("Concat", ["wp", "four1"], ["s2"], axis=0),
                  mk("ConstantOfShape", ["s2"], ["f"], value=neg2), mk("Concat", ["f", "x", "x"], ["c"], axis=0),
                  mk("Unsqueeze", ["c", "ax2"], ["c3"]), mk("Expand", ["c3", "e112"], ["ce"]), mk("Reshape", ["ce", "r8"], ["cr"]),
                  mk("Mul", ["cr", "three_f"], ["y"])],
                 [vi("x", ["w", 4])], [vi("y", None)],
                 [ints("zero", 0), ints("ax0", [0]), ints("one1", [1]), ints("four1", [4]), ints("ax2", [2]),
                  ints("e112", [1, 1, 2]), ints("r8", [-1, 8]), init("three_f", np.array(3.0, np.float32))])
    gather = model([mk("Gather", ["x", "i4"], ["g"], axis=1), mk("Add", ["g", "g"], ["y1"]),
                    mk("Gather", ["x", "i2"], ["h"], axis=0), mk("Add", ["h", "h"], ["y2"])],
                   [vi("x", [3, "w", 2])], [vi("y1", None), vi("y2", None)], [ints("i4", [0, 1, 1, 0]), ints("i2", [2, 0])])
    ceil = model([mk("Shape", ["x"], ["s"]), mk("Gather", ["s", "zero1"], ["w"]), mk("Cast", ["w"], ["wf"], to=TensorProto.FLOAT),
                  mk("Div", ["wf", "three"], ["w3"]), mk("Ceil", ["w3"], ["c"]), mk("Round", ["w3"], ["r"]),
                  mk("Concat", ["c", "r"], ["cr"], axis=0), mk("Cast", ["cr"], ["shape"], to=TensorProto.INT64),
                  mk("ConstantOfShape", ["shape"], ["y"], value=fill)],
                 [vi("x", ["w", 2])], [vi("y", None)], [ints("zero1", [0]), init("three", np.array(3.0, np.float32))])
    return {"gmap_after_cut": (gmap, "w=2..40", ((5, 4), (40, 4), (2, 4))),
            "gather_table_moves": (gather, "w=2..40", ((3, 5, 2), (3, 40, 2), (3, 2, 2))),
            "ceil_round_fill": (ceil, "w=2..4100", ((7, 2), (4100, 2), (2, 2)))}


def main():
    a, d, bins = setup("shapeset_gather-")
    for r in range(a.rounds):
        for name, (m, box, shapes) in cases().items():
            path = os.path.join(d, name + ".onnx")
            onnx.save(m, path)
            for b, h in bins:
                n, t, one = once(h, path, d, box, shapes)
                print(f"round {r}: {name:18s} {b:4s}: C compiles {n}, wall {t:.1f} s (3 runs), one object: {one}", flush=True)
    print(os.popen("uptime").read().strip())


if __name__ == "__main__":
    main()
