#!/usr/bin/env python3
"""cuda_shapeset.py — issue 25's GPU figures (one build per ShapeSet box,
docs/cuda.md "Run-time sizes"), on a machine with an NVIDIA GPU:

    python3 bench/cuda_shapeset.py [--harp build-gpu/harp] [--rounds 2] [--repeat 30] [--only NAME,...]
                                   [--target sm90] [--out FILE.md]

Models: four of bench/shapeset_e2e.py's CASES (the e2e model set as ShapeSets:
resnet18 and mobilenetv2 over the batch N, the LLaMA layer and the
transformer block over the sequence S; their weights as --param), each
with three bindings inside one ShapeSet box (GPU_BINDS: a symbol at v in
3..2^k is boxed with 2^(k-1)+1..2^k, src/runtime/gpu_box.c).

  graph    `harp bench --backend cuda --graphs --bind V1 --bind V2 --bind V3`:
           one session running the three bindings in turn; its counters must
           say one ShapeSet, one build serving it (box_builds 1, builds 1),
           one CUDA Graph instantiated and updated in place for the others
           (no rebuild, no second instantiation): "ok" or "FAILED" and why.
  latency  per binding, the box build (`harp bench --backend cuda --graphs
           --bind V`: the session's one build at the box's upper corner, the
           binding's sizes read at run time) against the exactly-specialised
           build (`harp bench --backend cuda --graphs --sym V`), in --rounds
           interleaved rounds: the best medians and their ratio (issue 25's
           goal: within 1.1x).
  cold     `harp run --backend cuda` at the first binding on an empty cache
           directory (HARP_CACHE_DIR: NVRTC and the plan cache cold): the wall
           time to the first result, then the same again on the filled cache.

Prints a Markdown table per part (and writes them to --out), ready for
bench/RESULTS.md.  Any harp failure is printed in the row, not fatal.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import shapeset_e2e  # noqa: E402  (the models, their weights and inputs)

# three bindings of one box per model (the box's upper corner among them)
GPU_BINDS = {"resnet18": [5, 6, 8], "mobilenetv2": [5, 7, 8], "llama": [80, 100, 128], "transformer": [40, 50, 64]}


def harp(cmd, env=None):
    """(rc, stdout, stderr, seconds) of one harp process."""
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, **(env or {})))
    return p.returncode, p.stdout, p.stderr, time.perf_counter() - t0


def last_json(out):
    for line in reversed(out.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    return None


def why(rc, err):
    lines = err.strip().splitlines()
    return (lines[-1] if lines else f"exit {rc}")[:200]


def bench(exe, model, extra, wargs, target, args, repeat):
    """The `harp bench --backend cuda --graphs` JSON object, or an error string."""
    cmd = [exe, "bench", model, "--backend", "cuda", "--target", target, "--graphs", *extra, *wargs, *args,
           "--repeat", str(repeat), "--json"]
    rc, out, err, _ = harp(cmd)
    j = last_json(out) if rc == 0 else None
    return j if j else why(rc, err)


def graph_row(exe, name, model, extra, wargs, sym, binds, target, repeat):
    args = [a for v in binds for a in ("--bind", f"{sym}={v}")]
    j = bench(exe, model, extra, wargs, target, args, repeat)
    if isinstance(j, str):
        return f"| {name} | {', '.join(map(str, binds))} | - | - | - | FAILED: {j} |"
    s = j["session"]
    ok = s["clusters"] == 1 and s["builds"] == 1 and s["box_builds"] == 1 and s["instantiations"] == 1 and s["box_fallbacks"] == 0
    verdict = "ok" if ok else "FAILED: " + ", ".join(f"{k} {v}" for k, v in s.items())
    return (f"| {name} | {sym}={', '.join(map(str, binds))} | {j['median_ms']:.3f} | {s['builds']} build(s), {s['box_builds']} box |"
            f" {s['instantiations']} inst, {s['updates']} upd, {s['replays']} replays | {verdict} |")


def latency_rows(exe, name, model, extra, wargs, sym, binds, target, rounds, repeat):
    rows = []
    for v in binds:
        box, spec = [], []
        for _ in range(rounds):  # interleaved: box, specialised, box, ...
            for acc, args in ((box, ["--bind", f"{sym}={v}"]), (spec, ["--sym", f"{sym}={v}"])):
                j = bench(exe, model, extra, wargs, target, args, repeat)
                acc.append(j["median_ms"] if isinstance(j, dict) else j)
        bad = next((x for x in box + spec if isinstance(x, str)), None)
        if bad:
            rows.append(f"| {name} | {sym}={v} | - | - | - | {bad} |")
            continue
        b, s = min(box), min(spec)
        rows.append(f"| {name} | {sym}={v} | {b:.3f} | {s:.3f} | {b / s:.3f} | {'ok' if b / s <= 1.1 else 'over 1.1x'} |")
    return rows


def cold_row(exe, name, model, extra, wargs, sym, v, target, d):
    cache = tempfile.mkdtemp(prefix="harp-cold-", dir=d)
    cmd = [exe, "run", model, "--backend", "cuda", "--target", target, *extra, *wargs, "--random-inputs", "--sym", f"{sym}={v}",
           "--out", tempfile.mkdtemp(dir=d)]
    times = []
    for _ in range(2):  # cold, then warm on the cache the first filled
        rc, _, err, t = harp(cmd, {"HARP_CACHE_DIR": cache})
        if rc:
            return f"| {name} | {sym}={v} | - | - | {why(rc, err)} |"
        times.append(t)
    shutil.rmtree(cache, ignore_errors=True)
    return f"| {name} | {sym}={v} | {times[0]:.2f} | {times[1]:.2f} | |"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--harp", default=os.path.join(ROOT, "build-gpu", "harp"))
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--only", default="")
    ap.add_argument("--target", default="sm90")
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    os.chdir(ROOT)
    exe = os.path.abspath(a.harp)
    only = [s.strip() for s in a.only.split(",") if s.strip()]
    work = tempfile.mkdtemp(prefix="harp-cuda-ss-")
    parts = {"graph": ["| model | bindings (one box) | ms per run | builds | graphs | verdict |", "|---|---|---|---|---|---|"],
             "latency": ["| model | binding | box build ms | specialised ms | ratio | goal 1.1x |", "|---|---|---|---|---|---|"],
             "cold": ["| model | binding | cold first result s | warm s | error |", "|---|---|---|---|---|"]}
    for name in GPU_BINDS:
        if only and name not in only:
            continue
        c = shapeset_e2e.prepare(name, tempfile.mkdtemp(prefix=f"{name}-", dir=work))
        model, extra, wargs, sym, d = c["model"], c["extra"], c["wargs"], c["box"][0][0], c["dir"]
        binds = GPU_BINDS[name]
        parts["graph"].append(graph_row(exe, name, model, extra, wargs, sym, binds, a.target, a.repeat))
        parts["latency"] += latency_rows(exe, name, model, extra, wargs, sym, binds, a.target, a.rounds, a.repeat)
        parts["cold"].append(cold_row(exe, name, model, extra, wargs, sym, binds[0], a.target, d))
        print(f"{name}: done", file=sys.stderr, flush=True)
    titles = {"graph": "One CUDA Graph per ShapeSet, three bindings, no rebuild",
              "latency": "Steady state: the box build against the specialised build (best medians of the rounds)",
              "cold": "Cold first result (empty cache: NVRTC, plans) and warm"}
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    text = [f"cuda_shapeset.py --target {a.target} --rounds {a.rounds} --repeat {a.repeat}; load {load}", ""]
    for k, rows in parts.items():
        text += [f"**{titles[k]}**", "", *rows, ""]
    print("\n".join(text))
    if a.out:
        open(a.out, "w").write("\n".join(text))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
