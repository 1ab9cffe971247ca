#!/usr/bin/env python3
"""shapes_session.py — bench/shapes.py's study through a Python session on
its default path: harp.InferenceSession over the detector (or recogniser)
with no shapes and no ShapeSets, so harp chooses a box per power-of-two
bucket of the dims the feeds set (docs/python.md, "Dynamic dims").

    python3 bench/shapes_session.py [--build build] [--n 50] [--exact 3] [--rounds 5] [--only det]

Feeds --n sizes (bench/shapes.py's, seeded) to one default session (one
cache of its own, 2 threads) and prints the compiles it asked for
(compile_count), its objects and C compiles (shapeset_objects), the time to
all the results, and the largest absolute error against onnxruntime.  Then,
for the first --exact sizes, a shapesets="exact" session compiled for that
size alone (its compile time) and the warm latency of the default session,
the exact one and onnxruntime at that size: --rounds rounds, interleaved,
the median of each, and the default / exact ratio.
"""
import argparse
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import numpy as np  # noqa: E402
import onnxruntime as ort  # noqa: E402

import shapes  # noqa: E402  (its models, sizes and corpus fetch)

THREADS = 2


def timed(f, reps=3):
    """The best of reps calls of f, in ms (each a whole run)."""
    best = 1e30
    for _ in range(reps):
        t0 = time.perf_counter()
        f()
        best = min(best, (time.perf_counter() - t0) * 1e3)
    return best


def one_model(a, harp, kind):
    name, box, _ = shapes.MODELS[kind]
    path = shapes.model_path(name)
    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads, so.log_severity_level = THREADS, 1, 3
    ref = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    opts = {"cache_dir": tempfile.mkdtemp(prefix="harp-sess-"), "progress": False, "intra_op_num_threads": THREADS}
    sess = harp.InferenceSession(path, opts)
    rng = np.random.default_rng(1)
    feeds = [rng.random(s, dtype=np.float32) for s in shapes.sizes(kind, a.n, box)]
    err = ymax = 0.0
    t0 = time.perf_counter()
    got = [sess.run(None, {"x": x})[0] for x in feeds]
    total = time.perf_counter() - t0
    for x, y in zip(feeds, got):
        want = ref.run(None, {"x": x})[0]
        err = max(err, float(np.max(np.abs(y.astype(np.float64) - want))) if y.shape == want.shape else float("inf"))
        ymax = max(ymax, float(np.max(np.abs(want))))
    dims = sorted({tuple(x.shape[2:]) for x in feeds})
    print(f"{name}: {a.n} sizes ({len(dims)} distinct), the default session (harp's boxes)")
    print(f"  compiles asked {sess.compile_count()}   objects / C compiles {sess.shapeset_objects()}"
          f"   exact build: {len(dims)} compiles")
    print(f"  all {a.n} results in {total:.1f} s   max abs err vs onnxruntime {err:.2g} (max |y| {ymax:.2g})")
    for x in feeds[:a.exact]:
        t0 = time.perf_counter()
        ex = harp.InferenceSession(path, dict(opts, shapesets="exact", cache_dir=tempfile.mkdtemp(prefix="harp-ex-")))
        ex.run(None, {"x": x})
        comp = (time.perf_counter() - t0) * 1e3
        t = {"auto": [], "exact": [], "ort": []}
        for _ in range(a.rounds):  # interleaved
            t["auto"].append(timed(lambda: sess.run(None, {"x": x})))
            t["exact"].append(timed(lambda: ex.run(None, {"x": x})))
            t["ort"].append(timed(lambda: ref.run(None, {"x": x})))
        m = {k: float(np.median(v)) for k, v in t.items()}
        print(f"  {x.shape[2]}x{x.shape[3]}: default {m['auto']:.1f} ms   exact {m['exact']:.1f} ms   onnxruntime"
              f" {m['ort']:.1f} ms   default / exact {m['auto'] / m['exact']:.2f}   (exact's compile + first run"
              f" {comp / 1e3:.1f} s)")
        ex.close()
    sess.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(HERE, "..", "build"))
    ap.add_argument("--n", type=int, default=50)
    ap.add_argument("--exact", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--only", default="det")
    a = ap.parse_args()
    sys.path.insert(0, os.path.join(os.path.abspath(a.build), "python"))
    import harp
    for kind in a.only.split(","):
        one_model(a, harp, kind)


if __name__ == "__main__":
    main()
