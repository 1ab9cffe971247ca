#!/usr/bin/env python3
"""Winograd on the GPU (issue 27): fp16 3x3 stride-1 convolutions of VGG-19
and ResNet-50 sizes (bias + ReLU), each run as

  * implicit GEMM (the default plan),
  * winograd_2x2_3x3 and winograd_4x4_3x3 (--plan overrides: the filter,
    input and output transforms around the batched GEMM of cuda_wino.c),
  * cuDNN through PyTorch (torch.nn.functional.conv2d, fp16, cudnn.benchmark),

rounds interleaved (harp's points and PyTorch's, one after the other, per
round), median ms per point and the ratio to cuDNN.  Each harp point is
checked against PyTorch's fp32 conv on the same inputs (error / max |ref|)
and plan.json must say the plan was applied.

    python3 bench/cuda_winograd.py [--harp build/harp] [--target sm90] [--rounds 5] [--repeat 20] [--dry]

Needs a GPU and PyTorch with CUDA; --dry (no GPU) only checks every plan is
accepted, applied and launches the Winograd kernels (harp dump).  GPU
timings of the Winograd kernels are unmeasured until this runs
(scripts/gpu_acceptance.sh winograd)."""
import argparse
import json
import os
import statistics
import sys
import tempfile

import numpy as np

from cuda_plans import conv_model, harp

SHAPES = [  # name, N, C, HW, OC (3x3, pad 1, stride 1)
    ("vgg_conv1_2", 1, 64, 224, 64),
    ("vgg_conv3_2", 1, 256, 56, 256),
    ("vgg_conv4_2", 1, 512, 28, 512),
    ("vgg_conv5_2", 1, 512, 14, 512),
    ("resnet_3x3_56", 8, 64, 56, 64),
    ("resnet_3x3_28", 8, 128, 28, 128),
    ("resnet_3x3_14", 8, 256, 14, 256),
    ("resnet_3x3_7", 8, 512, 7, 512),
]
T = "predicate_tail m.i.i n.i.i k.i.i;"
PLANS = [("implicit_gemm", None),
         ("winograd_2x2", f"split m 128; split n 128; split k 32; {T} algo_choice conv winograd_2x2_3x3;"),
         ("winograd_4x4", f"split m 128; split n 128; split k 32; {T} algo_choice conv winograd_4x4_3x3;")]


def plan_args(d, plan):
    if not plan:
        return []
    pf = os.path.join(d, f"p{abs(hash(plan))}.plan")
    open(pf, "w").write(plan + "\n")
    return ["--plan", f"y={pf}"]


def dry_point(hp, model, target, plan, d):
    """harp dump: the plan accepted, applied, and (Winograd) its four kernels."""
    out = tempfile.mkdtemp(dir=d)
    p = harp([hp, "dump", model, "--target", target, "--dump", "plan,gpu", "--dump-dir", out, *plan_args(d, plan)])
    if p.returncode:
        return "ERROR " + (p.stderr.strip().splitlines() or ["?"])[-1]
    ent = [e for e in json.load(open(os.path.join(out, "plan.json")))["plans"] if e["region"] == "y"]
    kinds = [k["kind"] for k in json.load(open(os.path.join(out, "gpu.json")))["gpu"]["kernels"]]
    wino = plan is not None
    ok = bool(ent and ent[0].get("applied")) and (("wino_output" in kinds) == wino)
    return "ok" if ok else f"NOT APPLIED {ent and ent[0].get('note')} {kinds}"


def harp_point(hp, model, target, plan, ins, ref, d, repeat):
    """Run once (checked against ref), then time: (error, applied, ms)."""
    out = tempfile.mkdtemp(dir=d)
    extra = plan_args(d, plan)
    p = harp([hp, "run", model, "--backend", "cuda", "--target", target, "--out", out, "--dump", "plan", "--dump-dir", out,
              *ins, *extra])
    if p.returncode:
        return None, False, None
    y = np.load(os.path.join(out, "y.npy")).astype(np.float64)
    err = float(np.abs(y - ref).max() / np.abs(ref).max())
    ent = [e for e in json.load(open(os.path.join(out, "plan.json")))["plans"] if e["region"] == "y"]
    b = harp([hp, "bench", model, "--backend", "cuda", "--target", target, "--repeat", str(repeat), "--json", *extra])
    ms = json.loads(b.stdout)["median_ms"] if b.returncode == 0 else None
    return err, bool(ent and ent[0].get("applied")), ms


def torch_ms(torch, x, w, b, repeat):
    F = torch.nn.functional
    for _ in range(3):
        F.relu(F.conv2d(x, w, b, padding=1))
    st, en = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ts = []
    for _ in range(repeat):
        st.record()
        F.relu(F.conv2d(x, w, b, padding=1))
        en.record()
        en.synchronize()
        ts.append(st.elapsed_time(en))
    return statistics.median(ts)


def run_shape(a, torch, name, n, c, hw, oc, rng, fails):
    d = tempfile.mkdtemp(prefix="harp_cuwino_")
    model = conv_model(d, name, n, c, hw, oc)
    if a.dry:
        for label, plan in PLANS:
            r = dry_point(a.harp, model, a.target, plan, d)
            fails += [] if r == "ok" else [f"{name} {label}"]
            print(f"{name:16s} {label:14s} {r}", flush=True)
        return
    xs = {"x": (rng.random((n, c, hw, hw)) * 0.2 - 0.1), "w": (rng.random((oc, c, 3, 3)) * 0.2 - 0.1) / np.sqrt(c / 64),
          "b": rng.random(oc) * 0.2 - 0.1}
    ins = []
    for k, v in xs.items():
        f = os.path.join(d, f"in_{k}.npy")
        np.save(f, v.astype(np.float16))
        ins += ["--input", f"{k}={f}"]
    t = {k: torch.tensor(v.astype(np.float16)).cuda() for k, v in xs.items()}
    with torch.no_grad():
        ref = torch.relu(torch.nn.functional.conv2d(t["x"].double(), t["w"].double(), t["b"].double(), padding=1)).cpu().numpy()
    ms = {label: [] for label, _ in PLANS}
    ms["cudnn"] = []
    errs = {}
    for _ in range(a.rounds):
        for label, plan in PLANS:
            err, applied, m = harp_point(a.harp, model, a.target, plan, ins, ref, d, a.repeat)
            errs[label] = err
            if err is None or not applied or m is None:
                fails.append(f"{name} {label}")
            elif m:
                ms[label].append(m)
        ms["cudnn"].append(torch_ms(torch, t["x"], t["w"], t["b"], a.repeat))
    cd = statistics.median(ms["cudnn"])
    for label, _ in PLANS:
        med = statistics.median(ms[label]) if ms[label] else None
        e = errs.get(label)
        print(f"{name:16s} {label:14s} {'%.4f ms' % med if med else '-':>11s} "
              f"{'%.2fx cuDNN' % (cd / med) if med else '':>12s} err {e if e is None else '%.1e' % e}", flush=True)
    print(f"{name:16s} {'cudnn':14s} {cd:.4f} ms", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--harp", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build", "harp"))
    ap.add_argument("--target", default="sm90")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--dry", action="store_true", help="no GPU: only check the plans are accepted and applied")
    a = ap.parse_args()
    torch = None
    if not a.dry:
        import torch  # noqa: PLC0415 (a GPU run only)
        torch.backends.cudnn.benchmark = True
    rng = np.random.default_rng(27)
    fails = []
    print(f"# cuda_winograd: target {a.target}, fp16, 3x3 pad 1 + bias + ReLU; median of {a.rounds} rounds x "
          f"{a.repeat}; ratio = cuDNN ms / harp ms (> 1: harp faster)")
    for shape in SHAPES:
        run_shape(a, torch, *shape, rng, fails)
    if fails:
        print(f"cuda_winograd: {len(fails)} failed: {fails}")
        sys.exit(1)
    print("cuda_winograd: every plan accepted and applied (--dry: nothing ran)" if a.dry else
          "cuda_winograd: every point ran, checked against PyTorch fp64, applied")


if __name__ == "__main__":
    main()
