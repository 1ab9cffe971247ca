#!/usr/bin/env python3
"""shapeset.py — one compiled object per ShapeSet (harp run/bench --shapeset,
docs/architecture.md "One object per ShapeSet") against harp's
exactly-specialised objects.

    python3 bench/shapeset.py [--harp build/harp] [--sizes 4] [--rounds 2] [--repeat 200] [--only NAME]

For each model whose kernels all take their sizes at run time today (a row
softmax of 1000 columns, layernorm of 64, an elementwise map of 37 columns
over R in 2..4096; four GEMMs of 256 over M in 2..512, a transformer MLP
512 -> 2048 -> 512 over T in 16..512, two BERT-base layers over the
sequence S in 16..128; a softmax of 2048 rows over its length L in
16..1024, a GEMM 256 x N x 512 over N in 16..512 and 256 x 256 x K over K
in 16..1024; --only: the models whose file name contains NAME):
  compiles   on an empty cache, --sizes processes each running a new R:
             `harp run --shapeset` (the ShapeSet object; --time-stages says
             how many objects the C compiler built) against `harp run --sym`
             (one specialised object per size): C compiles and the total
             wall time of the processes
  latency    `harp bench --shapeset R=2..4096 --bind R=...` (4 sizes): in one
             process, per size an instance of the ShapeSet object and of the
             specialised object, run in turn each round (2 threads); the
             median of each, their ratio, and the first run at each size on
             the ShapeSet object (its checks included) over the warm median.
             --rounds processes, medians of their figures.
"""
import argparse
import os
import re
import statistics
import subprocess
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.join(HERE, "..", "tests", "models")
BENCH_MODELS = os.path.join(HERE, "models")
# (model, fixed symbols, the symbol over the box, lo, hi, the sizes of the latency rows)
ROWS = ("R", 2, 4096, [7, 300, 1000, 4096])
CASES = [(os.path.join(MODELS, "softmax_rows.json"), ["--sym", "L=1000"], *ROWS),
         (os.path.join(MODELS, "layernorm.json"), [], *ROWS), (os.path.join(MODELS, "gelu_bias_rows.json"), [], *ROWS),
         (os.path.join(MODELS, "gemm_chain4.json"), ["--sym", "D=256"], "M", 2, 512, [7, 100, 300, 512]),
         (os.path.join(BENCH_MODELS, "mlp_block.harp"), ["--sym", "E=512", "--sym", "F=2048"], "T", 16, 512,
          [31, 200, 512]),
         (os.path.join(BENCH_MODELS, "bert_layers.harp"), [], "S", 16, 128, [16, 37, 77, 128]),
         # the row length of a softmax, a GEMM's columns and its depth (the sskind branch)
         (os.path.join(MODELS, "softmax_rows.json"), ["--sym", "R=2048"], "L", 16, 1024, [77, 300, 1000, 1024]),
         (os.path.join(BENCH_MODELS, "gemm_cols.harp"), [], "N", 16, 512, [77, 129, 300, 512]),
         (os.path.join(BENCH_MODELS, "gemm_depth.harp"), [], "K", 16, 1024, [77, 300, 700, 1024])]


def compiles(exe, model, extra, sym, lo, hi, sizes, shapeset):
    cache = tempfile.mkdtemp()
    env = dict(os.environ, HARP_CACHE_DIR=cache, HARP_NUM_THREADS="2")
    rs = [lo + (i * 997) % (hi - lo + 1) for i in range(sizes)]
    cc, t0 = 0, time.perf_counter()
    for r in rs:
        args = [exe, "run", model, *extra, "--sym", f"{sym}={r}", "--random-inputs", "--out",
                tempfile.mkdtemp(), "--time-stages"]
        if shapeset:
            args += ["--shapeset", f"{sym}={lo}..{hi}"]
        p = subprocess.run(args, capture_output=True, text=True, env=env)
        if p.returncode:
            raise SystemExit(f"harp run failed: {p.stderr[-500:]}")
        m = re.search(r"(\d+) built by the C compiler", p.stderr)
        cc += int(m.group(1)) if m else 0
    wall = time.perf_counter() - t0
    if not shapeset:  # one specialised object per size: count them in the cache
        cc = sum(1 for _, _, fs in os.walk(cache) for f in fs if f.endswith(".so"))
    return cc, wall


def latency(exe, model, extra, sym, lo, hi, binds, repeat):
    args = [exe, "bench", model, *extra, "--shapeset", f"{sym}={lo}..{hi}", "--repeat", str(repeat), "--json"]
    for b in binds:
        args += ["--bind", f"{sym}={b}"]
    p = subprocess.run(args, capture_output=True, text=True, env=dict(os.environ, HARP_NUM_THREADS="2"))
    if p.returncode:
        raise SystemExit(f"harp bench failed: {p.stderr[-500:]}")
    rows = {}
    for line in p.stdout.splitlines():
        m = re.search(r'"bind": "\w+=(\d+)", "shapeset_ms": ([\d.]+), "specialised_ms": ([\d.]+), "ratio": ([\d.]+), '
                      r'"first_run_ms": ([\d.]+)', line)
        if m:
            rows[int(m.group(1))] = tuple(float(m.group(k)) for k in range(2, 6))
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--harp", default=os.path.join(HERE, "..", "build", "harp"))
    ap.add_argument("--sizes", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=200)
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    print(f"load: {os.getloadavg()[0]:.1f}")
    for model, extra, sym, lo, hi, binds in CASES:
        if a.only not in os.path.basename(model):
            continue
        g_cc, g_wall = compiles(a.harp, model, extra, sym, lo, hi, a.sizes, True)
        s_cc, s_wall = compiles(a.harp, model, extra, sym, lo, hi, a.sizes, False)
        print(f"\n{os.path.basename(model)} {' '.join(extra)}, {sym} in {lo}..{hi}, {a.sizes} sizes in {a.sizes} processes:")
        print(f"  C compiles: ShapeSet {g_cc}, specialised {s_cc}; wall time of the processes: "
              f"ShapeSet {g_wall:.2f} s, specialised {s_wall:.2f} s")
        runs = [latency(a.harp, model, extra, sym, lo, hi, binds, a.repeat) for _ in range(a.rounds)]
        print(f"  {sym:<7} ShapeSet ms  specialised ms  ratio   first run over warm (ms)")
        for b in binds:
            g = statistics.median(r[b][0] for r in runs)
            s = statistics.median(r[b][1] for r in runs)
            ratio = statistics.median(r[b][2] for r in runs)
            first = statistics.median(r[b][3] - r[b][0] for r in runs)
            print(f"  {b:<7} {g:11.4f}  {s:14.4f}  {ratio:5.3f}   {first:.3f}")
    print(f"load: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
