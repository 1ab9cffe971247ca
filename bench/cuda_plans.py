#!/usr/bin/env python3
"""Plans on the GPU (issue 27): the kernels follow the Schedule Plan, so each
tile choice is a different kernel.  For fp16 convolutions of ResNet sizes
(one of few output tiles over a long reduction, which the default plan
splits along K) and an fp16 attention, run the cost model's default plan
and a set of --plan overrides that differ in one field (conv tile, stages,
warp tile, split-K; attention algorithm and key tile), and for each:

  * check it on the device against the CPU backend (fp32 compute; an
    independent code generator, faster than the interpreter at these sizes)
    on the same inputs (rtol = atol = 1e-2 for these long fp16 sums: a plan
    that runs the wrong kernel or drops a slice is far off);
  * check plan.json says the plan was applied;
  * time it: `harp bench --backend cuda --json` (median of --repeat).

    python3 bench/cuda_plans.py [--harp build/harp] [--target sm90] [--repeat 50] [--dry]

Needs a GPU.  Prints one line per (case, plan): ok / WRONG, applied, median
ms and the ratio to the default plan; exit 1 when any check fails.  GPU
timings of these plans are unmeasured until this runs on a GPU
(scripts/gpu_acceptance.sh plans)."""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

CONVS = [  # name, N, C, HW, OC: fp16 3x3 pad 1 with bias + ReLU
    ("conv_long_k_n1_512x7", 1, 512, 7, 512),  # few tiles, K = 4608: split-K by default
    ("conv_n8_256x14", 8, 256, 14, 256),
    ("conv_n1_64x56", 1, 64, 56, 64),
]
T = "predicate_tail m.i.i n.i.i k.i.i;"
CONV_PLANS = [
    ("64x64x32 s2 w32x32", f"split m 64; split n 64; split k 32; warp_tile 32x32; pipeline k.i stages=2; {T}"),
    ("64x64x32 s3 w32x32", f"split m 64; split n 64; split k 32; warp_tile 32x32; pipeline k.i stages=3; {T}"),
    ("128x128x32 s3 w64x64", f"split m 128; split n 128; split k 32; warp_tile 64x64; pipeline k.i stages=3; {T}"),
    ("128x128x32 s3 w64x32", f"split m 128; split n 128; split k 32; warp_tile 64x32; pipeline k.i stages=3; {T}"),
    ("128x64x64 s2 w64x32", f"split m 128; split n 64; split k 64; warp_tile 64x32; pipeline k.i stages=2; {T}"),
    ("128x128x32 s3 splitk 4", f"split m 128; split n 128; split k 32; warp_tile 64x64; pipeline k.i stages=3; {T} "
     "algo_choice matmul splitk_serial; splitk 4;"),
    ("128x128x32 s3 splitk 8", f"split m 128; split n 128; split k 32; warp_tile 64x64; pipeline k.i stages=3; {T} "
     "algo_choice matmul splitk_serial; splitk 8;"),
]
ATT = "attention_full_fp16.json"
ATT_SYMS = ["B=1", "H=8", "M=1024", "N=1024", "D=64", "Dv=64"]
A = "split m 64; split k 64; predicate_tail m.i.i n.i.i;"
ATT_PLANS = [
    ("2-pass BN 64", f"{A} split n 64; algo_choice attention streaming_softmax_2pass;"),
    ("online BN 64", f"{A} split n 64; algo_choice attention online_softmax;"),
    ("online BN 32", f"{A} split n 32; algo_choice attention online_softmax;"),
    ("online BN 128", f"{A} split n 128; algo_choice attention online_softmax;"),
]


def conv_model(d, name, n, c, hw, oc):
    path = os.path.join(d, name + ".harp")
    with open(path, "w") as f:
        f.write(f"graph main(x: f16[{n}, {c}, {hw}, {hw}], w: f16[{oc}, {c}, 3, 3], b: f16[{oc}]) -> "
                f"(y: f16[{n}, {oc}, {hw}, {hw}]) {{\n    y = relu(conv2d(x, w, bias=b, pad=1))\n    return y\n}}\n")
    return path


def harp(args, timeout=600):
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout)


def region_of(hp, model, syms, target, d):
    """The region holding the contraction (the one with a conv / attention algorithm)."""
    p = harp([hp, "dump", model, "--dump", "plan", "--target", target, "--dump-dir", d, *sum((["--sym", s] for s in syms), [])])
    if p.returncode:
        return None
    for e in json.load(open(os.path.join(d, "plan.json")))["plans"]:
        ac = (e.get("plan") or {}).get("algo_choice", {})
        if "conv" in ac or "attention" in ac:
            return e["region"]
    return None


def inputs_for(model, syms, d, rng):
    """Random inputs (small, so fp16 sums stay O(1)) as .npy files: --input args."""
    harp([HARP, "dump", model, "--dump", "gpu", "--target", "sm80", "--dump-dir", d, *sum((["--sym", s] for s in syms), [])])
    g = json.load(open(os.path.join(d, "gpu.json")))["gpu"]
    args = []
    for b in g["buffers"]:
        if b["space"] in ("input", "weights"):
            a = (rng.random(b["shape"]) * 0.2 - 0.1).astype(np.float16)
            f = os.path.join(d, f"in_{b['name']}.npy")
            if not os.path.exists(f):
                np.save(f, a)
                args += ["--input", f"{b['name']}={f}"]
    return args


def check_and_time(hp, model, syms, target, region, plan_text, ins, want, d, repeat, dry):
    extra = []
    if plan_text and target == "sm90" and "attention" not in plan_text:
        # an sm90 plan tiles for wgmma (warpgroup M = 64, BK = the 128-byte row): the conv
        # template (SM80 on sm_90) takes its tiles and stages, its warp tile is its own
        plan_text = re.sub(r"warp_tile \S+;", "", plan_text).replace("split k 32", "split k 64")
    if plan_text:
        pf = os.path.join(d, "p.plan")
        open(pf, "w").write(plan_text + "\n")
        extra = ["--plan", f"{region}={pf}"]
    sym = sum((["--sym", s] for s in syms), [])
    out = tempfile.mkdtemp(dir=d)
    if dry:  # no GPU: the plan is accepted and applied (harp dump), nothing runs
        p = harp([hp, "dump", model, "--target", target, "--dump", "plan,gpu,cu", "--dump-dir", out, *sym, *extra])
        if p.returncode:
            return "ERROR " + (p.stderr.strip().splitlines() or ["?"])[-1], None, None
        ent = [e for e in json.load(open(os.path.join(out, "plan.json")))["plans"] if e["region"] == region]
        return "ok", bool(ent and ent[0].get("applied")), None
    p = harp([hp, "run", model, "--backend", "cuda", "--target", target, "--out", out, "--dump", "plan", "--dump-dir", out,
              *ins, *sym, *extra])
    if p.returncode:
        return "ERROR " + (p.stderr.strip().splitlines() or ["?"])[-1], None, None
    got = {f[:-4]: np.load(os.path.join(out, f)) for f in os.listdir(out) if f.endswith(".npy") and not f.startswith("in_")}
    ok = all(k in got and np.allclose(got[k].astype(np.float64), v.astype(np.float64), rtol=1e-2, atol=1e-2)
             for k, v in want.items())
    ent = [e for e in json.load(open(os.path.join(out, "plan.json")))["plans"] if e["region"] == region]
    applied = bool(ent and ent[0].get("applied"))
    b = harp([hp, "bench", model, "--backend", "cuda", "--target", target, "--repeat", str(repeat), "--json", *sym, *extra])
    ms = json.loads(b.stdout)["median_ms"] if b.returncode == 0 else None
    return "ok" if ok else "WRONG", applied, ms


def run_case(hp, a, name, model, syms, plans, rng, fails):
    d = tempfile.mkdtemp(prefix="harp_cuplans_")
    region = region_of(hp, model, syms, a.target, d)
    ins = inputs_for(model, syms, d, rng)
    ref = tempfile.mkdtemp(dir=d)
    q = harp([hp, "run", model, "--backend", "cpu", "--out", ref, *ins, *sum((["--sym", s] for s in syms), [])],
             timeout=1800) if not a.dry else subprocess.CompletedProcess([], 0, "", "")
    if q.returncode or not region:
        print(f"{name}: reference failed: {q.stderr.strip()[-300:]}")
        fails.append(name)
        return
    want = {f[:-4]: np.load(os.path.join(ref, f)) for f in os.listdir(ref) if f.endswith(".npy") and not f.startswith("in_")}
    base = None
    for label, text in [("default", None)] + plans:
        ok, applied, ms = check_and_time(hp, model, syms, a.target, region, text, ins, want, d, a.repeat, a.dry)
        if ok != "ok" or not applied:
            fails.append(f"{name} {label}")
        base = ms if label == "default" else base
        ratio = f"{base / ms:.2f}x default" if ms and base else ""
        print(f"{name:24s} {label:26s} {ok:5s} applied={applied!s:5s} "
              f"{'%.4f ms' % ms if ms else '-':>10s} {ratio}", flush=True)


HARP = "harp"


def main():
    global HARP
    ap = argparse.ArgumentParser()
    ap.add_argument("--harp", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build", "harp"))
    ap.add_argument("--target", default="sm90")
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--dry", action="store_true", help="no GPU: only check every plan is accepted and applied (harp dump)")
    a = ap.parse_args()
    HARP = a.harp
    rng = np.random.default_rng(27)
    fails = []
    models = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "models")
    d = tempfile.mkdtemp(prefix="harp_cuplans_m_")
    print(f"# cuda_plans: target {a.target}, median of {a.repeat}; fp16; ratio = default ms / this plan's ms")
    for name, n, c, hw, oc in CONVS:
        run_case(a.harp, a, name, conv_model(d, name, n, c, hw, oc), [], CONV_PLANS, rng, fails)
    run_case(a.harp, a, "attention_1k_h8_d64", os.path.join(models, ATT), ATT_SYMS, ATT_PLANS, rng, fails)
    if fails:
        print(f"cuda_plans: {len(fails)} failed: {fails}")
        sys.exit(1)
    print("cuda_plans: every plan accepted and applied (--dry: nothing ran)" if a.dry else
          "cuda_plans: every plan ran, matched the CPU backend and was applied")


if __name__ == "__main__":
    main()
