#!/usr/bin/env python3
"""shapeset_firstrun.py — issue 25's "a new shape in a compiled ShapeSet costs at
most 10 ms over a warm run", binaries side by side.

    python3 bench/shapeset_firstrun.py --harp A [--harp B ...] [--rounds 2] [--only resnet18,llama,rec,det]

For each of bench/shapeset_e2e.py's models (its weights, boxes and bindings, the
bindings in increasing order), and PP-OCRv4 rec and det (`rec`, `det`: the
ONNX files of tests/realmodels/fetch.py, random weights of their own; the
sizes of bench/shapes.py's seed, as ssfig ran them), and each binary in turn, --rounds times
(interleaved: A B A B): one `harp bench --shapeset --bind ... --json` process
(2 threads).  Per binding it prints the medians over rounds of the first run on
one ShapeSet instance minus the warm median, on the wall clock and the process
CPU clock (the CPU figure is the steadier one on a shared machine), and that
first run's system time, page faults and binding check (rt_sgen_bind, the
"check ms" column): what a new shape costs, which at the
first binding is the instance's first run ever (cold), at the others a new
shape on a warm instance.  The load average is printed before and after.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import shapeset_e2e as sse  # noqa: E402  (the models, their weights and bindings)


# PP-OCRv4's ONNX models: (manifest name, --shape at the first binding, box, bindings "NAME=V[,NAME=V]")
DET = ("p2o_DynamicDimension_1", "p2o_DynamicDimension_2")
REAL = {
    "rec": ("ppocr_v4_rec", "x=1x3x48x768", ["p2o_DynamicDimension_1=96..800"],
            [f"p2o_DynamicDimension_1={w}" for w in (768, 536, 576, 728)]),
    "det": ("ppocr_v4_det", "x=1x3x928x736", [f"{DET[0]}=320..960", f"{DET[1]}=320..960"],
            [f"{DET[0]}={h},{DET[1]}={w}" for h, w in ((928, 736), (768, 896), (704, 832), (864, 448))]),
}


def one(exe, model, extra, boxes, binds):
    """{binding: (first - warm wall ms, first - warm CPU ms, first run's sys ms, its faults, its check's ms)} of
    one process."""
    cmd = [exe, "bench", model, *extra, "--repeat", "5", "--json"]
    for b in boxes:
        cmd += ["--shapeset", b]
    for b in binds:
        cmd += ["--bind", b]
    rc, out, err = sse.harp(cmd)
    if rc:
        raise SystemExit(f"{exe}: {err[-400:]}")
    rows = [json.loads(ln) for ln in out.splitlines() if '"shapeset_ms"' in ln]
    return {r["bind"]: (r["first_run_ms"] - r["shapeset_ms"], r["first_run_cpu_ms"] - r["shapeset_cpu_ms"],
                        r["first_run_sys_ms"], r["first_run_faults"], r["first_run_bind_ms"]) for r in rows}


def case(name):
    """(model, extra args, --shapeset boxes, --bind bindings) of a model named in --only."""
    if name in REAL:
        entry, shape, boxes, binds = REAL[name]
        sys.path.insert(0, os.path.join(ROOT, "tests", "realmodels"))
        import fetch  # noqa: E402  (the corpus's models, fetched and checked)
        path = fetch.fetch(next(e for e in fetch.load_manifest() if e["name"] == entry))
        return path, ["--shape", shape], boxes, binds
    c = sse.prepare(name, tempfile.mkdtemp(prefix=f"harp-ssfr-{name}-"))
    return (c["model"], c["extra"] + c["wargs"], [f"{s}={lo}..{hi}" for s, lo, hi in c["box"]],
            [sse.bind_text(b) for b in c["binds"]])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--harp", action="append", required=True)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--only", default="resnet18,mobilenetv2,llama,transformer")
    a = ap.parse_args()
    os.chdir(ROOT)
    print(f"load: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print("| model | binding | binary | first run over warm, wall ms | CPU ms | sys ms | page faults | check ms |\n"
          "|---|---|---|---|---|---|---|---|")
    for name in a.only.split(","):
        model, extra, boxes, binds = case(name)
        runs = {exe: [] for exe in a.harp}
        for _ in range(a.rounds):
            for exe in a.harp:
                runs[exe].append(one(exe, model, extra, boxes, binds))
        for b in binds:
            for exe in a.harp:
                f = [statistics.median(r[b][k] for r in runs[exe]) for k in range(5)]
                new = " (new instance)" if b == binds[0] else ""
                print(f"| {name} | {b}{new} | {exe} | {f[0]:+.2f} | {f[1]:+.2f} | {f[2]:.2f} | {f[3]:.0f} | {f[4]:.2f} |")
        sys.stdout.flush()
    print(f"load: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
