#!/usr/bin/env python3
"""shapeset_conv.py — convolutions over run-time image sizes: one ShapeSet
object for a box of H x W (harp run/bench --shapeset H=..,W=..; the direct
kernel reading N, H, W at run time, docs/architecture.md "One object per
ShapeSet") against harp's exactly-specialised objects.

    python3 bench/shapeset_conv.py [--harp build/harp] [--sizes 6] [--rounds 3] [--repeat 50] [--only NAME]

Weights are --param constants (packed once, as a real model's), so the
specialised objects may take Winograd for the 3x3 convs where their plans
say so; the ShapeSet object's convs are the direct kernel.  Models
(bench/models): a ResNet basic block (two 3x3 convs of 64 channels,
the residual in the second's epilogue), a 3x3 conv 64 -> 64, a 1x1 conv
64 -> 256 (a GEMM over the pixels), tests/models/pool_hw.harp at 64
channels (a 2x2 max pool, a 3x3 average of a ReLU), dw_hw.harp (a 3x3 and
a 5x5 depthwise conv of 64 channels, bias and ReLU each) and
tests/models/scale_hw.harp at 64 channels (a squeeze-excite tail: one map
with per-channel broadcasts over H, W), each over H, W in 8..64
(--only NAME: the cases whose model name contains NAME).
  compiles   on an empty cache, --sizes processes each running a new H x W:
             `harp run --shapeset` against `harp run --sym` (one specialised
             object per size): C compiles and the processes' wall time
  latency    `harp bench --shapeset ... --bind H=..,W=..` (4 sizes, one
             process: per size an instance of the ShapeSet object and of the
             specialised one, in turn each round, 2 threads); medians over
             --rounds processes of each median, their ratio and the first run
             at a size on the ShapeSet object over its warm median.
"""
import argparse
import os
import re
import statistics
import subprocess
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BOX = [("H", 8, 64), ("W", 8, 64)]
SIZES = ["H=56,W=56", "H=33,W=47", "H=28,W=28", "H=14,W=14"]
# (model, symbols, weights: name and shape, given as --param like a real model's constants)
CASES = [("resblock.harp", ["--sym", "C=64"], [("w1", (64, 64, 3, 3)), ("b1", (64,)), ("w2", (64, 64, 3, 3)), ("b2", (64,))]),
         ("conv3x3.harp", ["--sym", "C=64", "--sym", "K=64"], [("w", (64, 64, 3, 3)), ("b", (64,))]),
         ("pointwise.harp", ["--sym", "C=64", "--sym", "K=256"], [("w", (256, 64, 1, 1)), ("b", (256,))]),
         ("../../tests/models/pool_hw.harp", ["--sym", "C=64"], []),
         ("dw_hw.harp", [], [("w3", (64, 1, 3, 3)), ("b3", (64,)), ("w5", (64, 1, 5, 5)), ("b5", (64,))]),
         ("../../tests/models/scale_hw.harp", ["--sym", "C=64"], [])]


def weight_args(weights):
    """--param NAME=FILE for each weight, written as .npy files (seeded, scale 0.05)."""
    import numpy as np
    d, rng, args = tempfile.mkdtemp(), np.random.default_rng(1), []
    for name, shape in weights:
        path = os.path.join(d, name + ".npy")
        np.save(path, (rng.standard_normal(shape) * 0.05).astype(np.float32))
        args += ["--param", f"{name}={path}"]
    return args


def box_args():
    return [a for s, lo, hi in BOX for a in ("--shapeset", f"{s}={lo}..{hi}")]


def count_compiles(exe, model, extra, n, shapeset):
    """C compiles and wall time of n processes, each at a new size in the box."""
    cache = tempfile.mkdtemp()
    env = dict(os.environ, HARP_CACHE_DIR=cache, HARP_NUM_THREADS="2")
    built, t0 = 0, time.perf_counter()
    for i in range(n):
        size = [f"{s}={lo + (i * 37 + 11 * k) % (hi - lo + 1)}" for k, (s, lo, hi) in enumerate(BOX)]
        cmd = [exe, "run", model, *extra, "--random-inputs", "--out", tempfile.mkdtemp(), "--time-stages"]
        for b in size:
            cmd += ["--sym", b]
        if shapeset:
            cmd += box_args()
        p = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if p.returncode:
            raise SystemExit(f"harp run failed: {p.stderr[-500:]}")
        m = re.search(r"(\d+) built by the C compiler", p.stderr)
        built += int(m.group(1)) if m and shapeset else 0
    if not shapeset:
        built = sum(f.endswith(".so") for _, _, fs in os.walk(cache) for f in fs)
    return built, time.perf_counter() - t0


def bench_once(exe, model, extra, repeat):
    """{size: (ShapeSet ms, specialised ms, ratio, first run ms)} of one `harp bench` process."""
    cmd = [exe, "bench", model, *extra, *box_args(), "--repeat", str(repeat), "--json"]
    for b in SIZES:
        cmd += ["--bind", b]
    p = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, HARP_NUM_THREADS="2"))
    if p.returncode:
        raise SystemExit(f"harp bench failed: {p.stderr[-500:]}")
    out = {}
    for line in p.stdout.splitlines():
        m = re.search(r'"bind": "([^"]+)", "shapeset_ms": ([\d.]+), "specialised_ms": ([\d.]+), "ratio": ([\d.]+), '
                      r'"first_run_ms": ([\d.]+)', line)
        if m:
            out[m.group(1)] = tuple(float(m.group(k)) for k in range(2, 6))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--harp", default=os.path.join(HERE, "..", "build", "harp"))
    ap.add_argument("--sizes", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    print(f"load: {os.getloadavg()[0]:.1f}")
    for name, syms, weights in CASES:
        if a.only not in name:
            continue
        extra = syms + weight_args(weights)
        model = os.path.join(HERE, "models", name)
        g_cc, g_wall = count_compiles(a.harp, model, extra, a.sizes, True)
        s_cc, s_wall = count_compiles(a.harp, model, extra, a.sizes, False)
        print(f"\n{os.path.basename(name)} {' '.join(syms)}, H, W in 8..64, {a.sizes} sizes in {a.sizes} processes:")
        print(f"  C compiles: ShapeSet {g_cc}, specialised {s_cc}; wall time: ShapeSet {g_wall:.2f} s, "
              f"specialised {s_wall:.2f} s")
        runs = [bench_once(a.harp, model, extra, a.repeat) for _ in range(a.rounds)]
        print("  size          ShapeSet ms  specialised ms  ratio   first run over warm (ms)")
        for b in SIZES:
            med = [statistics.median(r[b][k] for r in runs) for k in range(3)]
            first = statistics.median(r[b][3] - r[b][0] for r in runs)
            print(f"  {b:<13} {med[0]:11.4f}  {med[1]:14.4f}  {med[2]:5.3f}   {first:.3f}")
    print(f"load: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
