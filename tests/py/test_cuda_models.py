"""Whole models through the CUDA backend without a GPU: every test model's
translation unit (`harp dump --dump gpu,cu --target sm80|sm90`) runs on the
CPU SIMT simulator (tests/cuda_sim) and must match the reference interpreter
at rtol = atol = 1e-3; the contraction regions must land on the templates.
Skips (77) without g++."""
import os
import sys

import numpy as np

import cuda_sim
from harp_test import MODELS, SRC, Suite, close, run

GPU_MODELS = os.path.join(MODELS, "gpu")
rng = np.random.default_rng(5)

# name, model, syms, {launch kind: at least n} per arch
CASES = [
    ("gemm_tail", os.path.join(GPU_MODELS, "gemm_tail.harp"), (), {"template": 1}),
    ("gemm_bias_relu", os.path.join(MODELS, "seed000_gemm_bias_relu.json"), ("M=80", "N=72", "K=48"), {"template": 1}),
    ("conv3x3_s1", os.path.join(GPU_MODELS, "conv3x3_s1.harp"), (), {"template": 1}),
    ("conv3x3_s2", os.path.join(GPU_MODELS, "conv3x3_s2.harp"), (), {"template": 1}),
    ("attention", os.path.join(MODELS, "attention_full_fp16.json"), ("B=1", "H=2", "M=40", "N=40", "D=16", "Dv=16"), {"template": 1}),
    ("attention_causal", os.path.join(MODELS, "attention_full_causal_fp16.json"), ("B=1", "H=2", "M=40", "N=40", "D=16", "Dv=16"),
     {"template": 1}),
    ("layernorm", os.path.join(MODELS, "layernorm_fp16.json"), ("R=24",), {"simple": 1}),
    ("softmax", os.path.join(MODELS, "softmax_rows.json"), ("R=24", "L=100"), {"simple": 1}),
    ("transformer_fp16", os.path.join(GPU_MODELS, "transformer_block_fp16.harp"), (), {"template": 4}),
    ("transformer", os.path.join(SRC, "examples", "transformer_block.harp"), ("B=1", "S=8"), {}),
]


def inputs_of(gpu_dir):
    import json
    g = json.load(open(os.path.join(gpu_dir, "gpu.json")))["gpu"]
    feeds = {}
    for b in g["buffers"]:
        if b["space"] in ("input", "weights") and b["name"] not in feeds:
            dt = cuda_sim.NP[b["dtype"]]
            a = rng.uniform(-0.3, 0.3, size=b["shape"])  # fp16 chains stay O(1): a one-ulp flip stays in tolerance
            feeds[b["name"]] = a.astype(dt)
    return feeds, g


def main():
    s = Suite("cuda_models")
    if not cuda_sim.have_gxx():
        print("g++ not found: skipped")
        sys.exit(77)
    only = os.environ.get("HARP_CUDA_MODELS")
    for name, model, syms, want in CASES:
        if only and name not in only.split(","):
            continue
        for target in ("sm80", "sm90"):
            what = f"{name} [{target}]"
            p, d = cuda_sim.dump(model, target, syms)
            s.check(f"{what}: harp dump --dump gpu,cu", p.returncode == 0, p.stderr)
            if p.returncode:
                continue
            feeds, g = inputs_of(d)
            kinds = g["launch_kinds"]
            for kind, n in want.items():
                s.check(f"{what}: {n}+ {kind} launches", kinds[kind] >= n,
                        f"{kinds}; declined: {[l.get('declined') for l in g['launches'] if l.get('declined')]}")
            got, err = cuda_sim.run(d, feeds)
            s.check(f"{what}: runs on the simulator", err is None, err)
            if err:
                continue
            q, e = run(model, feeds, syms, backend="interp")
            s.check(f"{what}: interpreter", q.returncode == 0, q.stderr)
            for out, a in got.items():
                wantv = np.load(os.path.join(e, f"{out}.npy")).astype(np.float64)
                ok, detail = close(a, wantv)
                s.check(f"{what}: {out} vs interpreter", ok, detail)
            print(f"{what}: {kinds}", flush=True)
    s.close()


main()
