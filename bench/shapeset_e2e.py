#!/usr/bin/env python3
"""shapeset_e2e.py — bench/e2e.py's whole models as ShapeSets: one compiled
object for a box of a natural symbol (harp run/bench --shapeset,
docs/architecture.md "One object per ShapeSet") against harp's
exactly-specialised object at the same binding (issue 25's goal: within
1.1x in the steady state).

    python3 bench/shapeset_e2e.py [--harp build/harp] [--rounds 2] [--repeat 20] [--only NAME,...] [--no-check]

Cases (e2e.py's weights, written once as .npy and given as --param, so that
both objects pack them once as a real model's constants):
  resnet18     bench/models/resnet18.harp, the batch N in 1..8, at N = 1, 3, 8
  mobilenetv2  bench/models/mobilenetv2.harp, the batch N in 1..8, at N = 1, 3, 8
  llama        bench/models/llama_layer.harp, the sequence S in 16..128, at S = 37, 77, 128
               (the rotary tables cos, sin [S, 1, 64]: random inputs in the latency runs, --param
               weights at the binding's shape in the check, which the ShapeSet object reads from its
               table at the upper corner: docs/architecture.md, "One object per ShapeSet")
  transformer  examples/transformer_block.harp (B = 4), S in 16..256, at S = 37, 100, 256
  mobilenetv2_hw  bench/mnv2_hw.py's ONNX MobileNetV2 (e2e weights), the image H, W in 160..320
               each, at 160x160, 224x224, 320x320
(the image side is a constant of the .harp models: 224.)
  latency  `harp bench --shapeset SYM=LO..HI --bind SYM=V ...`: in one process,
           per binding an instance of the ShapeSet object and of the specialised
           object, run in turn each round (2 threads, HARP_NUM_THREADS=2); the
           medians, their ratio, on the wall clock and on the process's CPU
           clock (all threads; steadier on a shared machine); and the new-shape
           cost: the first run at each binding on one ShapeSet instance (its
           checks included) minus the warm median, wall / CPU (issue 25: at
           most 10 ms).  The bindings run in the order listed, so at the first
           the instance is new (its first run ever: pages touched, weights
           packed where the object packs at the first run), at the others it
           has run the smaller ones.  --rounds processes, the median of each
           figure.
  check    `harp run --shapeset` and `harp run --sym` (specialised) on the same
           inputs at every binding: the max error of the ShapeSet output
           against the specialised one, relative to the largest |output|.
A model that gets no one object for its box prints the reason (harp's
fallback message) and moves on.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import numpy as np  # noqa: E402

import e2e  # noqa: E402  (the models' weights, shared with bench/e2e.py)


def llama_weights(D=2048, F=5632):
    return dict(g1=1 + e2e.rand(D, scale=0.1), wq=e2e.rand(D, D, scale=D ** -0.5), wk=e2e.rand(D, D, scale=D ** -0.5),
                wv=e2e.rand(D, D, scale=D ** -0.5), wo=e2e.rand(D, D, scale=D ** -0.5), g2=1 + e2e.rand(D, scale=0.1),
                w1=e2e.rand(D, F, scale=D ** -0.5), w3=e2e.rand(D, F, scale=D ** -0.5), w2=e2e.rand(F, D, scale=F ** -0.5))


def llama_inputs(S, D=2048, H=32):
    cos, sin = e2e.rope_tables(S, D // H)
    return {"x": e2e.rand(1, S, D), "cos": cos, "sin": sin}


def transformer_weights(E=64, F=256):
    r = e2e.rand
    return dict(ln1_g=r(E), ln1_b=r(E), wq=r(E, E, scale=E ** -0.5), wk=r(E, E, scale=E ** -0.5), wv=r(E, E, scale=E ** -0.5),
                wo=r(E, E, scale=E ** -0.5), ln2_g=r(E), ln2_b=r(E), w1=r(E, F, scale=E ** -0.5), b1=r(F),
                w2=r(F, E, scale=F ** -0.5), b2=r(E))


def one(sym, lo, hi, vals):
    """A box of one symbol and its bindings."""
    return [(sym, lo, hi)], [{sym: v} for v in vals]


def mnv2_hw_model(d):
    """bench/mnv2_hw.py's MobileNetV2 ONNX (input [1, 3, H, W], the e2e weights as initializers) under d."""
    import mnv2_hw  # noqa: E402
    return mnv2_hw.write(os.path.join(d, "mnv2_hw.onnx"))


# name: (model (a path, or d -> a path), fixed --sym args, (box [(symbol, lo, hi)], bindings [{symbol: value}]),
# weights(), inputs of a binding (name -> array; the ones whose shape depends on the symbol are --param for
# llama's tables), output)
CASES = {
    "resnet18": ("bench/models/resnet18.harp", [], one("N", 1, 8, [1, 3, 8]),
                 lambda: e2e.resnet18_weights(e2e.rand), lambda b: {"x": e2e.rand(b["N"], 3, 224, 224)}, "y"),
    "mobilenetv2": ("bench/models/mobilenetv2.harp", [], one("N", 1, 8, [1, 3, 8]),
                    e2e.mobilenetv2_weights, lambda b: {"x": e2e.rand(b["N"], 3, 224, 224)}, "y"),
    "mobilenetv2_hw": (mnv2_hw_model, [], ([("H", 160, 320), ("W", 160, 320)], [{"H": v, "W": v} for v in (160, 224, 320)]),
                       dict, lambda b: {"x": e2e.rand(1, 3, b["H"], b["W"])}, "y"),
    "llama": ("bench/models/llama_layer.harp", [], one("S", 16, 128, [37, 77, 128]), llama_weights,
              lambda b: llama_inputs(b["S"]), "y"),
    "transformer": ("examples/transformer_block.harp", ["--sym", "B=4"], one("S", 16, 256, [37, 100, 256]),
                    transformer_weights, lambda b: {"x": e2e.rand(4, b["S"], 64)}, "y"),
}
TABLES = {"cos", "sin"}  # llama's inputs that are parameters of the model


def save(d, tensors, kind_of):
    """--input/--param NAME=FILE for each tensor, written under d."""
    args = []
    for k, v in tensors.items():
        p = os.path.join(d, f"{k}.npy")
        np.save(p, v)
        args += [f"--{kind_of(k)}", f"{k}={p}"]
    return args


def harp(cmd, env_extra=None):
    p = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, HARP_NUM_THREADS="2", **(env_extra or {})))
    return p.returncode, p.stdout, p.stderr


def bind_text(b):
    """{H: 160, W: 160} -> "H=160,W=160"."""
    return ",".join(f"{k}={v}" for k, v in b.items())


def box_args(box):
    return [x for sym, lo, hi in box for x in ("--shapeset", f"{sym}={lo}..{hi}")]


def latency(exe, model, extra, wargs, box, binds, repeat):
    """{binding text: (ShapeSet ms, specialised ms, ratio, CPU ratio, first run over warm ms, the same on the CPU
    clock)} of one `harp bench --shapeset` process, or the error."""
    cmd = [exe, "bench", model, *extra, *wargs, *box_args(box), "--repeat", str(repeat), "--json"]
    for b in binds:
        cmd += ["--bind", bind_text(b)]
    rc, out, err = harp(cmd)
    if rc:
        return err.strip().splitlines()[-1] if err.strip() else f"exit {rc}"
    rows = {}
    for line in out.splitlines():
        if '"shapeset_ms"' in line:
            r = json.loads(line)
            rows[r["bind"]] = (r["shapeset_ms"], r["specialised_ms"], r["ratio"], r["shapeset_cpu_ms"] / r["specialised_cpu_ms"],
                               r["first_run_ms"] - r["shapeset_ms"], r["first_run_cpu_ms"] - r["shapeset_cpu_ms"])
    return rows


def check(exe, model, extra, wargs, box, b, inputs, out, d):
    """Max |ShapeSet - specialised| / max |specialised| at binding b (same inputs)."""
    iargs = save(d, inputs, lambda k: "param" if k in TABLES else "input")
    got = []
    for gen in (True, False):
        od = tempfile.mkdtemp(dir=d)
        cmd = [exe, "run", model, *extra, *wargs, *iargs, *[x for k, v in b.items() for x in ("--sym", f"{k}={v}")],
               "--out", od]
        if gen:
            cmd += box_args(box)
        rc, _, err = harp(cmd)
        if rc:
            raise SystemExit(f"harp run failed ({'ShapeSet' if gen else 'specialised'}, {bind_text(b)}): {err[-600:]}")
        got.append(np.load(os.path.join(od, f"{out}.npy")).astype(np.float64))
    return float(np.max(np.abs(got[0] - got[1])) / max(1e-30, np.max(np.abs(got[1]))))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--harp", default=os.path.join(ROOT, "build", "harp"))
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--only", default="")
    ap.add_argument("--no-check", action="store_true", help="skip the output check")
    a = ap.parse_args()
    os.chdir(ROOT)
    exe = os.path.abspath(a.harp)
    only = [s.strip() for s in a.only.split(",") if s.strip()]
    print(f"load: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print("| model | box | binding | ShapeSet ms | specialised ms | ratio | CPU-clock ratio | first run over warm, ms "
          "(wall / CPU) | max rel err |\n|---|---|---|---|---|---|---|---|---|")
    for name, (model, extra, (box, binds), weights, inputs, out) in CASES.items():
        if only and name not in only:
            continue
        d = tempfile.mkdtemp(prefix=f"harp-sse2e-{name}-")
        model = model(d) if callable(model) else model
        wargs = save(d, weights(), lambda k: "param")
        boxt = ", ".join(f"{sym}={lo}..{hi}" for sym, lo, hi in box)
        runs = [latency(exe, model, extra, wargs, box, binds, a.repeat) for _ in range(a.rounds)]
        bad = next((r for r in runs if isinstance(r, str)), None)
        if bad is not None:
            print(f"| {name} | {boxt} | - | no one object: {bad[:300]} | | | | | |")
            sys.stdout.flush()
            continue
        for b in binds:
            bt = bind_text(b)
            g, s, ratio, cratio, first, first_cpu = (statistics.median(r[bt][k] for r in runs) for k in range(6))
            err = float("nan") if a.no_check else check(exe, model, extra, wargs, box, b, inputs(b), out, d)
            new = " (new instance)" if b == binds[0] else ""
            print(f"| {name} | {boxt} | {bt} | {g:.2f} | {s:.2f} | {ratio:.3f} | {cratio:.3f} | "
                  f"{first:+.2f} / {first_cpu:+.2f}{new} | {err:.1e} |")
            sys.stdout.flush()
    print(f"load: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
