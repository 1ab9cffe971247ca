#!/usr/bin/env python3
"""shapes.py — one detection model and one OCR recognition model fed many
input sizes, as an OCR service sees them: harp against onnxruntime.

    python3 bench/shapes.py [--harp build/harp] [--n 50] [--specialised 3] [--only det,rec]

For each model, n input sizes (seeded: the detector H x W in multiples of 32
from 320 to 960, the recogniser 48 x W in multiples of 8 from 96 to 800), and
for each size, in this order:
  harp t0    `harp run --knob tier0=force`: a new size costs harp's analysis
             (import at that size, regions, Function, plans) and one run on
             tier 0 (libharp's shape-generic kernels), no C compiler; timed
             from the process's start to its output line, then its own
             "first result" figure
  ort        onnxruntime's session (made once, dynamic shapes) run at that size
and, for the first --specialised sizes only (each is a full C compile):
  harp spec  `harp bench` of the exactly-specialised object at that size
             (warm median), and its compile time on a cold cache
Printed: the number of C compiles each path needs, the total time spent
before results (harp: analysis + tier 0 per size; spec: compile), and the
per-run latencies.  Harp's compiled object does not take run-time sizes yet
(docs/architecture.md, "Tier 0"): a new size in a compiled ShapeSet is a new
analysis, and with tier0=auto a new background build.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "realmodels"))
import numpy as np  # noqa: E402
import onnxruntime as ort  # noqa: E402

import fetch  # noqa: E402

THREADS = 2


def sizes(kind, n, seed=7):
    rng = np.random.default_rng(seed)
    if kind == "det":
        return [(1, 3, 32 * int(rng.integers(10, 31)), 32 * int(rng.integers(10, 31))) for _ in range(n)]
    return [(1, 3, 48, 8 * int(rng.integers(12, 101))) for _ in range(n)]


def model_path(name):
    return fetch.fetch(next(e for e in fetch.load_manifest() if e["name"] == name))


def harp_t0(exe, path, x, work):
    out = tempfile.mkdtemp(dir=work)
    f = os.path.join(out, "in_x.npy")
    np.save(f, x)
    args = [exe, "run", path, "--out", out, "--input", f"x={f}", "--knob", "tier0=force", "--time-stages"]
    t0 = time.perf_counter()
    p = subprocess.run(args, capture_output=True, text=True)
    ms = (time.perf_counter() - t0) * 1e3
    if p.returncode:
        raise RuntimeError(p.stderr.strip()[-400:])
    m = re.search(r"tier 0: (\d+) kernels on the shape-generic kernels \(([0-9.]+) ms\), (\d+) on the interpreter \(([0-9.]+) ms\)",
                  p.stderr)
    run_ms = float(m.group(2)) + float(m.group(4)) if m else float("nan")
    got = np.load(os.path.join(out, sorted(g for g in os.listdir(out) if g.endswith(".npy") and g != "in_x.npy")[0]))
    return ms, run_ms, got


def harp_spec(exe, path, x, work):
    cache = tempfile.mkdtemp(dir=work)
    f = os.path.join(work, "spec_x.npy")
    np.save(f, x)
    p = subprocess.run([exe, "bench", path, "--input", f"x={f}", "--repeat", "10"], capture_output=True, text=True,
                       env=dict(os.environ, HARP_CACHE_DIR=cache))
    if p.returncode:
        raise RuntimeError(p.stderr.strip()[-400:])
    med = float(re.search(r"median ([0-9.]+) ms", p.stdout + p.stderr).group(1))
    comp = float(re.search(r"compile ([0-9.]+) ms", p.stdout + p.stderr).group(1))
    return med, comp


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--harp", default=os.path.join(HERE, "..", "build", "harp"))
    ap.add_argument("--n", type=int, default=50)
    ap.add_argument("--specialised", type=int, default=3)
    ap.add_argument("--only", default="det,rec")
    a = ap.parse_args()
    names = {"det": "ppocr_v4_det", "rec": "ppocr_v4_rec"}
    for kind in a.only.split(","):
        path = model_path(names[kind])
        work = tempfile.mkdtemp(prefix="harp-shapes-")
        so = ort.SessionOptions()
        so.intra_op_num_threads, so.inter_op_num_threads, so.log_severity_level = THREADS, 1, 3
        t0 = time.perf_counter()
        sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        ort_session_ms = (time.perf_counter() - t0) * 1e3
        t = {"t0_wall": [], "t0_run": [], "ort": [], "spec": [], "spec_compile": []}
        err = 0.0
        rng = np.random.default_rng(1)
        for i, shape in enumerate(sizes(kind, a.n)):
            x = rng.random(shape, dtype=np.float32)
            wall, run_ms, got = harp_t0(a.harp, path, x, work)
            t["t0_wall"].append(wall), t["t0_run"].append(run_ms)
            t1 = time.perf_counter()
            want = sess.run(None, {"x": x})[0]
            t["ort"].append((time.perf_counter() - t1) * 1e3)
            err = max(err, float(np.max(np.abs(got.astype(np.float64) - want)) / (np.max(np.abs(want)) + 1e-30)))
            if i < a.specialised:
                med, comp = harp_spec(a.harp, path, x, work)
                t["spec"].append(med), t["spec_compile"].append(comp)
        n, k = a.n, a.specialised
        print(f"{names[kind]}: {n} sizes; max rel err of tier 0 vs onnxruntime {err:.2g}")
        print(f"  C compiles           harp tier0=force 0   exactly-specialised {n} (one per size)   onnxruntime 0")
        print(f"  before results       harp t0 {sum(t['t0_wall']) / 1e3:.1f} s in all ({np.median(t['t0_wall']):.0f} ms a size,"
              f" process start to output)   specialised {np.median(t['spec_compile']):.0f} ms a size (median of {k})"
              f"   onnxruntime session {ort_session_ms:.0f} ms once")
        print(f"  per-run latency      harp tier 0 {np.median(t['t0_run']):.1f} ms   specialised {np.median(t['spec']):.1f} ms"
              f" (first {k} sizes)   onnxruntime {np.median(t['ort']):.1f} ms   (medians)")


if __name__ == "__main__":
    main()
