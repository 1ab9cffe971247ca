#!/usr/bin/env python3
"""shapeset_range.py — the C compiles and the time to results of
tests/py/test_shapeset_sizes.py's `range_constantofshape` model (Range(0, w),
ConstantOfShape(Shape(x)), fills of w and w + 1 concatenated; x [w, 4]) under
`harp run --shapeset w=1..50`, one process per binding at w = 6, 50, 1 (the
test's order), each binary on a fresh private cache (HARP_CACHE_DIR),
HARP_CPU_CALIB=off.  Binaries are interleaved, --rounds rounds.

    python3 bench/shapeset_range.py --harp build/harp [--base /tmp/base10/build/harp] [--rounds 2]

Printed per round and binary: the C compiles the three runs needed (the sum
of their "built by the C compiler"), the wall time of the three processes,
and whether each run was served by one object for the box."""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "py"))
import onnx  # noqa: E402
from onnx_models import range_constantofshape  # noqa: E402


def range_model(path):
    """The test's m4 (onnx_models.range_constantofshape), saved to path."""
    onnx.save(range_constantofshape(), path)


def once(harp, path, d, box="w=1..50", shapes=((6, 4), (50, 4), (1, 4))):
    """A run per input shape of x in shapes under --shapeset box, on a fresh cache: (C compiles, wall seconds,
    served by one object per run)."""
    env = dict(os.environ, HARP_CACHE_DIR=tempfile.mkdtemp(dir=d), HARP_CPU_CALIB="off")
    built, one, t0 = 0, [], time.time()
    for shape in shapes:
        x = os.path.join(d, "x" + "_".join(map(str, shape)) + ".npy")
        np.save(x, np.random.default_rng(sum(shape)).standard_normal(shape).astype(np.float32))
        p = subprocess.run([harp, "run", path, "--out", tempfile.mkdtemp(dir=d), "--time-stages", "--shapeset", box,
                            "--input", f"x={x}"], capture_output=True, text=True, env=env)
        m = re.search(r"shapeset: (\d+) object\(s\), (\d+) built by the C compiler", p.stderr)
        if p.returncode or not m:
            sys.exit(f"{harp} failed at x {list(shape)}: {p.stderr[-400:]}")
        built += int(m.group(2))
        one.append("one object for the box" in p.stderr)
    return built, time.time() - t0, one


def setup(prefix):
    """The command line (--harp, --base, --rounds), a work folder named prefix..., the binaries [(name, path)]
    to interleave; the load printed."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--harp", default="build/harp")
    ap.add_argument("--base", help="a baseline binary, interleaved with --harp")
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    print(os.popen("uptime").read().strip())
    return a, tempfile.mkdtemp(prefix=prefix), ([("base", a.base)] if a.base else []) + [("harp", a.harp)]


def main():
    a, d, bins = setup("shapeset_range-")
    path = os.path.join(d, "range_constantofshape.onnx")
    range_model(path)
    for r in range(a.rounds):
        for name, h in bins:
            b, t, one = once(h, path, d)
            print(f"round {r}: {name:5s} {h}: C compiles {b}, wall {t:.1f} s (3 runs), one object: {one}", flush=True)
    print(os.popen("uptime").read().strip())


if __name__ == "__main__":
    main()
