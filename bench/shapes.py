#!/usr/bin/env python3
"""shapes.py — one detection model and one OCR recognition model fed many
input sizes, as an OCR service sees them: harp's ShapeSets against the
exactly-specialised build and onnxruntime.

    python3 bench/shapes.py [--harp build/harp] [--n 5] [--specialised 1] [--only det,rec]
                            [--box rec=128..800]

For each model, n input sizes (seeded: the detector H x W in multiples of 32
from 320 to 960, the recogniser 48 x W in multiples of 8 from 96 to 800), one
ShapeSet over the model's dynamic spatial dims (the detector's H and W in
320..960, the recogniser's W in 96..800), and for each size, in this order:
  harp set   `harp run MODEL --shapeset ... --input x=FILE --time-stages`, a
             process per size on one cache of its own, as a service restarted
             per request would see it: the C compiles it needed ("built by the
             C compiler"), whether one object serves the box or why each
             binding compiles on its own, and the wall time from the
             process's start to its output (and the process's CPU time,
             user + sys: steadier than wall on a loaded machine)
  ort        onnxruntime's session (made once, dynamic shapes) run at that size
             (wall, and this process's CPU time over the call)
and, for the first --specialised sizes only:
  harp spec  `harp bench` of the exactly-specialised object at that size
             (warm median) and its compile time on a cold cache
  harp set   ONE `harp bench --shapeset ... --bind S1 --bind S2 ...` process
             over those sizes (when one object serves the box; else the
             ShapeSet's runs are the specialised object's, a compile per
             binding): per size the warm medians of the ShapeSet object and of
             the specialised one, interleaved, their ratio, and the new-shape
             cost: the first run at that size on one ShapeSet instance (its
             checks included) minus the warm median, wall and process-CPU
             clock; at the first size that instance is new (its first run
             ever, beside the specialised instance's first run), at the
             others it has run the sizes before (issue 25's "a new shape, no
             compile, at most 10 ms over a warm run")
--box KIND=LO..HI sets every dynamic dim of a model's box to LO..HI and
draws its sizes inside it (PP-OCRv4 rec is one object from W = 96, its
maps' rows of 12 tokens on the map kernel as at 800).  Printed per model: the C compiles of the ShapeSet and of the specialised
build (one per size), the time spent before results, the per-run latencies
(medians) and the largest absolute error against onnxruntime, with the
largest |output| beside it (on random inputs the detector's map is all near
0, so a relative figure would mislead).  A model whose kernels cannot all
take their sizes at run time compiles per binding, and the reason is
printed; once they can, the compiles fall to one per box and the same
command measures it.  Default run length: about
2-3 minutes on 2 cores (each compile 10-25 s); --n 50 is the full study.
"""
import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "realmodels"))
import numpy as np  # noqa: E402
import onnxruntime as ort  # noqa: E402

import fetch  # noqa: E402
from settle import settle  # noqa: E402  (each contender's block on idle cores)

THREADS = 2
# the ShapeSet of each model: its dynamic spatial dims (shape variables of the dim_params), their ranges
MODELS = {"det": ("ppocr_v4_det", [("p2o_DynamicDimension_1", 320, 960), ("p2o_DynamicDimension_2", 320, 960)], (2, 3)),
          "rec": ("ppocr_v4_rec", [("p2o_DynamicDimension_1", 96, 800)], (3,))}


def sizes(kind, n, box, seed=7):
    """n sizes inside the box (its first dim's bounds): the detector's H x W in
    multiples of 32, the recogniser's 48 x W in multiples of 8."""
    rng = np.random.default_rng(seed)
    lo, hi = box[0][1], box[0][2]
    if kind == "det":
        return [(1, 3, 32 * int(rng.integers(-(-lo // 32), hi // 32 + 1)), 32 * int(rng.integers(-(-lo // 32), hi // 32 + 1)))
                for _ in range(n)]
    return [(1, 3, 48, 8 * int(rng.integers(-(-lo // 8), hi // 8 + 1))) for _ in range(n)]


def model_path(name):
    return fetch.fetch(next(e for e in fetch.load_manifest() if e["name"] == name))


def env_with(cache):
    return dict(os.environ, HARP_CACHE_DIR=cache, HARP_NUM_THREADS=str(THREADS))


def child_cpu_ms():
    """User + sys ms of this process's waited-for children so far."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (r.ru_utime + r.ru_stime) * 1e3


def harp_set(exe, path, box, x, work, cache):
    """One `harp run --shapeset` process: (wall ms, CPU ms, C compiles, why per binding or None, output)."""
    out = tempfile.mkdtemp(dir=work)
    f = os.path.join(out, "in_x.npy")
    np.save(f, x)
    args = [exe, "run", path, "--out", out, "--input", f"x={f}", "--time-stages"]
    for name, lo, hi in box:
        args += ["--shapeset", f"{name}={lo}..{hi}"]
    settle()  # onnxruntime's pool may still spin in this process
    t0, c0 = time.perf_counter(), child_cpu_ms()
    p = subprocess.run(args, capture_output=True, text=True, env=env_with(cache))
    ms, cpu = (time.perf_counter() - t0) * 1e3, child_cpu_ms() - c0
    if p.returncode:
        raise RuntimeError(p.stderr.strip()[-400:])
    built = int(re.search(r"shapeset: \d+ object\(s\), (\d+) built by the C compiler", p.stderr).group(1))
    why = re.search(r"shapeset: a compile per binding: (.*)", p.stderr)
    got = np.load(os.path.join(out, sorted(g for g in os.listdir(out) if g.endswith(".npy") and g != "in_x.npy")[0]))
    return ms, cpu, built, why.group(1) if why else None, got


def harp_spec(exe, path, x, work):
    """The exactly-specialised object at x's size on a cold cache: (warm median ms, compile ms)."""
    f = os.path.join(work, "spec_x.npy")
    np.save(f, x)
    p = subprocess.run([exe, "bench", path, "--input", f"x={f}", "--repeat", "10"], capture_output=True, text=True,
                       env=env_with(tempfile.mkdtemp(dir=work)))
    if p.returncode:
        raise RuntimeError(p.stderr.strip()[-400:])
    med = float(re.search(r"median ([0-9.]+) ms", p.stdout + p.stderr).group(1))
    comp = float(re.search(r"compile ([0-9.]+) ms", p.stdout + p.stderr).group(1))
    return med, comp


def harp_set_bench(exe, path, box, dims, shapes, cache):
    """One `harp bench --shapeset --bind ...` process over shapes (one binding each, in order): its JSON rows
    (shapeset_ms, specialised_ms, first_run_ms, their _cpu_ms, ...; milliseconds), or None (no one object)."""
    args = [exe, "bench", path, "--repeat", "10", "--json", "--shape", "x=" + "x".join(map(str, shapes[-1]))]
    for name, lo, hi in box:
        args += ["--shapeset", f"{name}={lo}..{hi}"]
    for shape in shapes:
        args += ["--bind", ",".join(f"{name}={shape[axis]}" for (name, _, _), axis in zip(box, dims))]
    p = subprocess.run(args, capture_output=True, text=True, env=env_with(cache))
    rows = [json.loads(ln) for ln in p.stdout.splitlines() if '"shapeset_ms"' in ln]
    if p.returncode or len(rows) != len(shapes):
        print(f"  harp bench --shapeset failed: {p.stderr.strip()[-300:]}")
        return None
    return rows


def one_model(a, kind):
    name, box, dims = MODELS[kind]
    for b in a.box:  # --box KIND=LO..HI: every dim of the model's box
        k, rng_ = b.split("=")
        if k == kind:
            lo, hi = (int(v) for v in rng_.split(".."))
            box = [(s, lo, hi) for s, _, _ in box]
    path = model_path(name)
    work = tempfile.mkdtemp(prefix="harp-shapes-")
    cache = tempfile.mkdtemp(dir=work)
    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads, so.log_severity_level = THREADS, 1, 3
    t0 = time.perf_counter()
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    ort_session_ms = (time.perf_counter() - t0) * 1e3
    t = {"set_wall": [], "set_cpu": [], "ort": [], "ort_cpu": [], "spec": [], "spec_compile": []}
    load0 = os.getloadavg()[0]
    built, why, err, ymax = 0, None, 0.0, 0.0
    rng = np.random.default_rng(1)
    shapes = sizes(kind, a.n, box)
    for i, shape in enumerate(shapes):
        x = rng.random(shape, dtype=np.float32)
        wall, cpu, b, w, got = harp_set(a.harp, path, box, x, work, cache)
        t["set_wall"].append(wall), t["set_cpu"].append(cpu)
        built, why = built + b, why or w
        t1, c1 = time.perf_counter(), time.process_time()
        want = sess.run(None, {"x": x})[0]
        t["ort"].append((time.perf_counter() - t1) * 1e3), t["ort_cpu"].append((time.process_time() - c1) * 1e3)
        err = max(err, float(np.max(np.abs(got.astype(np.float64) - want))))  # absolute: outputs can be all near 0
        ymax = max(ymax, float(np.max(np.abs(want))))
        if i < a.specialised:
            med, comp = harp_spec(a.harp, path, x, work)
            t["spec"].append(med), t["spec_compile"].append(comp)
    n, k = a.n, a.specialised
    rows = harp_set_bench(a.harp, path, box, dims, shapes[:k], cache) if not why and k else None
    set_run = [r["shapeset_ms"] for r in rows] if rows else t["spec"]  # per binding: the specialised object's runs
    mode = "one object for the box" if not why else f"a compile per binding ({why[:160]})"
    print(f"{name}: {n} sizes, ShapeSet {', '.join(f'{s}={lo}..{hi}' for s, lo, hi in box)}: {mode}")
    print(f"  max abs err of harp's ShapeSet vs onnxruntime {err:.2g} (max |y| {ymax:.2g})")
    print(f"  C compiles           harp ShapeSet {built}   exactly-specialised {n} (one per size)   onnxruntime 0")
    print(f"  before results       harp ShapeSet {sum(t['set_wall']) / 1e3:.1f} s in all ({np.median(t['set_wall']):.0f} ms a "
          f"size, process start to output; CPU {sum(t['set_cpu']) / 1e3:.1f} s, {np.median(t['set_cpu']):.0f} ms a size)"
          f"   specialised compile {np.median(t['spec_compile']):.0f} ms a size (median of {k})"
          f"   onnxruntime session {ort_session_ms:.0f} ms once")
    print(f"  per-run latency      harp ShapeSet {np.median(set_run):.1f} ms   specialised {np.median(t['spec']):.1f} ms"
          f" (first {k} sizes)   onnxruntime {np.median(t['ort']):.1f} ms (CPU {np.median(t['ort_cpu']):.1f} ms)   (medians)")
    if rows:
        print(f"  one `harp bench --shapeset` process over the first {k} sizes (ms; cpu = process CPU clock, 2 threads):")
        print("    size            ShapeSet  spec   ratio  cpu ratio  first run over warm (wall / cpu)  spec instance's first run")
        for shape, r in zip(shapes, rows):
            print(f"    {'x'.join(map(str, shape[2:])):<14} {r['shapeset_ms']:8.2f} {r['specialised_ms']:6.2f} {r['ratio']:6.3f}"
                  f"  {r['shapeset_cpu_ms'] / r['specialised_cpu_ms']:8.3f}   "
                  f"{r['first_run_ms'] - r['shapeset_ms']:+8.2f} / {r['first_run_cpu_ms'] - r['shapeset_cpu_ms']:+8.2f}"
                  f"{' (a new instance)' if r is rows[0] else ' (a new shape)   '}   "
                  f"{r['specialised_first_run_ms']:8.2f} ms (over warm {r['specialised_first_run_ms'] - r['specialised_ms']:+.2f})")
    print(f"  load (1 min) {load0:.1f} at the start, {os.getloadavg()[0]:.1f} at the end")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--harp", default=os.path.join(HERE, "..", "build", "harp"))
    ap.add_argument("--n", type=int, default=5)
    ap.add_argument("--specialised", type=int, default=1)
    ap.add_argument("--only", default="det,rec")
    ap.add_argument("--box", action="append", default=[], help="KIND=LO..HI: that model's box (all its dims)")
    a = ap.parse_args()
    for kind in a.only.split(","):
        one_model(a, kind)


if __name__ == "__main__":
    main()
