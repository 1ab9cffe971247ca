#!/usr/bin/env python3
"""pool_modes.py — the two modes of a 2-task kernel on the generated code's
thread pool (hprt_pool, src/backend/c/cgen_emit.c): one median per process.

    python3 bench/pool_modes.py [--harp build/harp] [--base BASE_HARP] [--procs 10]
                                [--repeat 200] [--hogs 0,1] [--sym M=1000 ...]

A GEMM 1000x512x50 (bench/models/gemm.json) runs as 2 tasks: ~0.155 ms
when the pool's worker takes the second on the other core, ~0.30 ms when the
caller runs both; which one a process gets used to be fixed for the
process.  For each hog count (0: as the machine is; 1: one more busy
single-threaded process, a user's other job, the case where the scheduler
used to leave the caller and its worker on one CPU), --procs processes of
`harp bench --repeat N --json` per binary, the binaries alternating in one
loop: each process's median, how many processes were in the fast mode
(median under 1.3x the fastest process minimum of that row), and the median
of the medians.  Load averages before and after each row are printed: on a
loaded machine both binaries share the same noise, read the ratios.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = os.path.join(HERE, "models", "gemm.json")


def bench_once(harp, args):
    """One `harp bench` process: its (median_ms, min_ms)."""
    cmd = [harp, "bench", MODEL, "--repeat", str(args.repeat), "--json"]
    for s in args.sym:
        cmd += ["--sym", s]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    d = json.loads(out.strip().splitlines()[-1])
    return d["median_ms"], d["min_ms"]


def start_hogs(n):
    """n busy single-threaded processes (stopped by stop_hogs)."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def stop_hogs(hogs):
    for h in hogs:
        h.kill()
        h.wait()


def row(binaries, hogs, args):
    """procs processes per binary, alternating; a line per binary."""
    load0 = os.getloadavg()[0]
    hp = start_hogs(hogs)
    try:
        res = {name: [] for name, _ in binaries}
        for i in range(args.procs):
            order = binaries if i % 2 == 0 else binaries[::-1]
            for name, harp in order:
                res[name].append(bench_once(harp, args))
    finally:
        stop_hogs(hp)
    load1 = os.getloadavg()[0]
    best = min(mn for r in res.values() for _, mn in r)
    print(f"hogs {hogs}  (load {load0:.1f} -> {load1:.1f}; fast: median < 1.3 x {best:.3f} ms)")
    mm = {}
    for name, _ in binaries:
        meds = sorted(m for m, _ in res[name])
        fast = sum(m < 1.3 * best for m in meds)
        mm[name] = statistics.median(meds)
        print(f"  {name:5s} fast {fast:2d}/{len(meds)}  median of medians {mm[name]:.3f} ms  medians: "
              + " ".join(f"{m:.3f}" for m in meds))
    if "base" in mm:
        print(f"  base/new median of medians: {mm['base'] / mm['new']:.2f}x")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--harp", default=os.path.join(HERE, "..", "build", "harp"))
    ap.add_argument("--base", default="", help="a second harp binary to compare (the one before a change)")
    ap.add_argument("--procs", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=200)
    ap.add_argument("--hogs", default="0,1", help="comma-separated counts of extra busy processes")
    ap.add_argument("--sym", action="append", default=None)
    args = ap.parse_args()
    if args.sym is None:
        args.sym = ["M=1000", "K=512", "N=50"]
    binaries = [("new", args.harp)] + ([("base", args.base)] if args.base else [])
    for _, harp in binaries:  # compile into the cache before timing
        bench_once(harp, args)
    print(f"{os.path.relpath(MODEL)} {' '.join(args.sym)}, {args.procs} processes x --repeat {args.repeat} per binary")
    for h in (int(x) for x in args.hogs.split(",")):
        row(binaries, h, args)


if __name__ == "__main__":
    main()
