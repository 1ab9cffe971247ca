"""Time from process start to output, at a new size in a cached ShapeSet box.

    python3 bench/shapeset_newproc.py [--harp build/harp] [--n 5] [--only det,small]

For each model a cache of its own is warmed first (the box's object built,
its manifest written: src/runtime/sgen_manifest.c; the exactly-specialised
object at one size built).  Then, interleaved, n rounds of three `harp run`
processes, each at a size not run before in that mode:
  manifest     `harp run --shapeset`: the box's manifest found, no corner compiled
  corners      the same with the manifest removed first: the corners compiled
               to the code stage (as before the manifest), the object from the cache
  specialised  `harp run` without --shapeset at the warmed size (its object cached)
Reported: the median wall ms per process and its CPU ms (user + sys of the
child: steadier than wall on a loaded machine), and the ratios to the
specialised process.  Models: det = PP-OCRv4 det over H, W 320..960 (needs
~/.cache/harp/realmodels/models/ppocr_v4_det.onnx; skipped without it),
small = tests/models/layernorm.json over R 1..4096.  HARP_CPU_CALIB=off.
"""
import argparse
import glob
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
DET = os.path.expanduser("~/.cache/harp/realmodels/models/ppocr_v4_det.onnx")


def det_case(rng, n):
    box = ["p2o_DynamicDimension_1=320..960", "p2o_DynamicDimension_2=320..960"]
    sizes = [(int(rng.integers(10, 31)) * 32, int(rng.integers(10, 31)) * 32) for _ in range(3 * n + 1)]
    feeds = [{"x": rng.random((1, 3, h, w), dtype=np.float32)} for h, w in sizes]
    return DET, box, feeds, []


def small_case(rng, n):
    g, b = rng.standard_normal(64).astype(np.float32), rng.standard_normal(64).astype(np.float32)
    feeds = [{"X": rng.standard_normal((int(r), 64)).astype(np.float32)} for r in rng.integers(1, 4097, 3 * n + 1)]
    return os.path.join(ROOT, "tests", "models", "layernorm.json"), ["R=1..4096"], feeds, [("gamma", g), ("beta", b)]


def one_run(exe, model, box, feed, params, cache, work):
    """One process: (wall ms, cpu ms, stderr)."""
    out = tempfile.mkdtemp(dir=work)
    args = [exe, "run", model, "--out", out, "--time-stages"]
    for b in box:
        args += ["--shapeset", b]
    for kind, items in (("--input", feed.items()), ("--param", params)):
        for name, a in items:
            f = os.path.join(out, f"{name}.npy")
            np.save(f, a)
            args += [kind, f"{name}={f}"]
    env = dict(os.environ, HARP_CACHE_DIR=cache, HARP_CPU_CALIB="off")
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(args, capture_output=True, text=True, env=env)
    wall = (time.perf_counter() - t0) * 1e3
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime) * 1e3
    if p.returncode:
        sys.exit(f"harp failed: {' '.join(args)}\n{p.stderr[-800:]}")
    return wall, cpu, p.stderr


def bench_model(a, name, case, work):
    rng = np.random.default_rng(3)
    model, box, feeds, params = case(rng, a.n)
    cache = tempfile.mkdtemp(dir=work)
    t0 = time.perf_counter()
    one_run(a.harp, model, box, feeds[0], params, cache, work)  # the box's object and manifest
    one_run(a.harp, model, [], feeds[0], params, cache, work)  # the specialised object at feeds[0]'s size
    print(f"{name}: warm-up (both objects built) {time.perf_counter() - t0:.1f} s", flush=True)
    res = {"manifest": [], "corners": [], "specialised": []}
    for i in range(a.n):
        for mode in res:
            if mode == "corners":
                for f in glob.glob(os.path.join(cache, "ssm-*.txt")):
                    os.remove(f)
            feed = feeds[0] if mode == "specialised" else feeds[1 + 3 * i + list(res).index(mode)]
            wall, cpu, err = one_run(a.harp, model, box if mode != "specialised" else [], feed, params, cache, work)
            hit = "from the cache's manifest" in err
            if mode != "specialised" and hit != (mode == "manifest"):
                sys.exit(f"{name} {mode}: the manifest was {'' if hit else 'not '}found\n{err[-600:]}")
            res[mode].append((wall, cpu))
    spec = [statistics.median(x[k] for x in res["specialised"]) for k in (0, 1)]
    for mode, xs in res.items():
        w, c = (statistics.median(x[k] for x in xs) for k in (0, 1))
        print(f"  {mode:12s} wall {w:8.1f} ms  cpu {c:8.1f} ms   (x{w / spec[0]:.2f} / x{c / spec[1]:.2f} of specialised)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--harp", default=os.path.join(ROOT, "build", "harp"))
    ap.add_argument("--n", type=int, default=5)
    ap.add_argument("--only", default="det,small")
    a = ap.parse_args()
    print(f"load: {os.getloadavg()[0]:.2f} (1 min); n = {a.n} rounds, medians", flush=True)
    cases = {"det": det_case, "small": small_case}
    with tempfile.TemporaryDirectory() as work:
        for name in a.only.split(","):
            if name == "det" and not os.path.exists(DET):
                print(f"det: skipped ({DET} missing)")
                continue
            bench_model(a, name, cases[name], work)


if __name__ == "__main__":
    main()
